#!/bin/sh
# bitwise.sh [REV] - are the working tree's kernels bit for bit those of revision REV?
#
# Builds tests/bitwise.c (the working tree's) twice, against REV's attn.h (git show REV:attn.h)
# and against the working tree's attn.h, with ${CC:-gcc} -O2 -fopenmp and, when clang is on PATH,
# a second pair with clang; runs all four and compares the listings line by line. Each line is
# one case: a kernel over one shape, dtype set, option set and execution setting, and the FNV-1a
# hash of every byte it wrote (outputs, lse, cache memory, pool memory) with its status.
# REV defaults to 4c678e4, the base of the issue-25 refactor. Exit 0 and a last line
# "bitwise: N outputs identical to REV (...)" when every line matches; else the differing cases
# and exit 1; exit 2 when a build or run fails.
#
# Covers: attn_sdpa (f32/f16/bf16 q, k/v and out, MHA/GQA/MQA, causal or not, ALiBi, windows,
# soft cap, sinks, lse, strided rows, varlen with Lq < Lk and Lq > Lk, head sizes 1 to 256),
# attn_paged_prefill and attn_paged_decode v1/v2/auto over every cache dtype (fp8 with non-unit
# scales) and block sizes 1, 16, 32 with shuffled block tables, attn_forward (mixed batches,
# every attention type, every backend the build has), attn_write_kv (duplicate and -1 slots),
# attn_swap_blocks, attn_copy_blocks, attn_convert over every dtype pair, the scalar
# conversions, the bias builders, attn_merge_states and the block pool and sequence operations.
# Each kernel runs on every ISA that attn_isa_supported() reports, at 1 and 2 OpenMP threads and
# on a caller pool, with exec.f32_probs 0 and 1.
# Cannot cover: ISAs this CPU lacks. AVX-512 paths (the bf16 pair kernels included) are compared
# only on a machine with AVX-512 (BF16), NEON only on aarch64; the last line names the ISAs that
# ran. The oneDNN engine only when BITWISE_CFLAGS="-DATTN_USE_ONEDNN" BITWISE_LIBS=-ldnnl are
# given. Equal hashes on this sweep are evidence, not proof, for shapes outside it.
# BITWISE_TREE_CFLAGS go to the working tree's build only: BITWISE_TREE_CFLAGS=-DATTN_NO_FP8_KERNELS
# with REV=HEAD checks that a configuration macro changes no output.
# Run: `sh tests/bitwise.sh REV` or `make bitwise BASE=REV`.
set -u
REV=${1:-4c678e4}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/attn-bitwise.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
trap 'exit 2' INT TERM
mkdir "$tmp/base"
if ! git -C "$root" show "$REV:attn.h" > "$tmp/base/attn.h" 2>"$tmp/git.err"; then
    echo "bitwise: cannot read attn.h at $REV: $(cat "$tmp/git.err")"
    exit 2
fi

compilers=${CC:-gcc}
if command -v clang > /dev/null 2>&1 && [ "$(basename "${CC:-gcc}")" != clang ]; then
    compilers="$compilers clang"
fi
# Waiting OpenMP threads sleep instead of spinning, which keeps a shared machine usable.
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMP_WAIT_POLICY

cache=${BITWISE_CACHE:-${TMPDIR:-/tmp}/attn-bitwise-cache}
total=0
failed=0
names=
isas=
for cc in $compilers; do
    name=$(basename "$cc")
    names="${names:+$names, }$name"
    for side in base tree; do
        if [ $side = base ]; then inc=$tmp/base; else inc=$root; fi
        # The base listing depends only on REV's header, bitwise.c, the compiler and the flags:
        # it is kept in $cache (BITWISE_CACHE=none turns this off) and reused.
        key=
        if [ $side = base ] && [ "$cache" != none ]; then
            key=$( { git -C "$root" rev-parse "$REV:attn.h"; git hash-object "$root/tests/bitwise.c"
                     $cc --version 2>&1 | head -n 1; echo "${BITWISE_CFLAGS:-} ${BITWISE_LIBS:-}"
                     uname -m; grep -m 1 '^flags' /proc/cpuinfo 2>/dev/null; } |
                   git hash-object --stdin)
            if [ -s "$cache/$key.out" ]; then
                cp "$cache/$key.out" "$tmp/$name-$side.out"
                grep -v '^#' "$tmp/$name-$side.out" > "$tmp/$name-$side.txt"
                continue
            fi
        fi
        # shellcheck disable=SC2086
        extra=; [ $side = tree ] && extra=${BITWISE_TREE_CFLAGS:-}
        if ! nice $cc -std=c99 -O2 -fopenmp ${BITWISE_CFLAGS:-} $extra -I"$inc" "$root/tests/bitwise.c" \
                -o "$tmp/$name-$side" -lm ${BITWISE_LIBS:-}; then
            echo "bitwise: building tests/bitwise.c with $name against the $side attn.h failed"
            exit 2
        fi
        if ! "$tmp/$name-$side" > "$tmp/$name-$side.out"; then
            echo "bitwise: the $name build against the $side attn.h failed to run"
            exit 2
        fi
        grep -v '^#' "$tmp/$name-$side.out" > "$tmp/$name-$side.txt"
        if [ -n "$key" ] && mkdir -p "$cache" 2>/dev/null; then
            cp "$tmp/$name-$side.out" "$cache/$key.$$" && mv "$cache/$key.$$" "$cache/$key.out"
        fi
    done
    isas=$(sed -n 's/^# isas: //p' "$tmp/$name-tree.out")
    n=$(wc -l < "$tmp/$name-tree.txt")
    dups=$(awk '{print $1}' "$tmp/$name-tree.txt" | sort | uniq -d | head -3)
    if [ -n "$dups" ]; then
        echo "bitwise: case names not unique: $dups"
        exit 2
    fi
    # Differing cases: the same name with another hash or status, or a case on one side only;
    # but a case of a dtype REV's header lacks ("# dtypes:" of each listing) is new, not a
    # difference (e.g. the integer caches against a REV from before them).
    sed -n 's/^# dtypes: //p' "$tmp/$name-base.out" | tr ' ' '\n' > "$tmp/$name-base.dts"
    new_dts=$(sed -n 's/^# dtypes: //p' "$tmp/$name-tree.out" | tr ' ' '\n' |
              grep -vxF -f "$tmp/$name-base.dts" | tr '\n' ' ' | sed 's/ $//')
    awk -v cc="$name" -v new_dts="$new_dts" '
        BEGIN { n = split(new_dts, d, " "); for (i = 1; i <= n; i++) fresh[d[i]] = 1 }
        NR == FNR { want[$1] = $2 " " $3; next }
        { if (!($1 in want)) {
              k = split($1, part, "[/-]"); is_new = 0
              for (i = 1; i <= k; i++) if (part[i] in fresh) is_new = 1
              if (is_new) { news++; next }
              printf "%s: %s only in the working tree\n", cc, $1
          }
          else if (want[$1] != $2 " " $3)
              printf "%s: %s differs: base %s, working tree %s\n", cc, $1, want[$1], $2 " " $3
          delete want[$1] }
        END { for (k in want) printf "%s: %s only in the base\n", cc, k
              print news + 0 > newfile }
    ' newfile="$tmp/$name.new" "$tmp/$name-base.txt" "$tmp/$name-tree.txt" > "$tmp/$name.diff"
    d=$(wc -l < "$tmp/$name.diff")
    fresh=$(cat "$tmp/$name.new")
    [ "$fresh" -gt 0 ] && echo "bitwise: $name: $fresh new cases of dtypes $REV lacks ($new_dts) not compared"
    n=$((n - fresh))
    if [ "$d" -gt 0 ]; then
        head -n 200 "$tmp/$name.diff"
        [ "$d" -gt 200 ] && echo "... and $((d - 200)) more"
        echo "bitwise: $name: $d of $n cases differ from $REV"
        failed=$((failed + d))
    fi
    total=$((total + n))
done

if [ $failed -gt 0 ]; then
    echo "bitwise: $failed outputs differ from $REV ($names; isas: $isas)"
    exit 1
fi
echo "bitwise: $total outputs identical to $REV ($names; isas: $isas)"
