#!/bin/sh
# Compile time and peak memory of the implementation unit (#define ATTN_IMPLEMENTATION and
# #include "attn.h", nothing else) for each compiler given that is on PATH, at -O0 and -O2.
# Usage: sh tests/compile_time.sh BUILD_DIR [COMPILER...] (default: gcc clang). Extra flags (a
# configuration macro, say) come from ATTN_CT_FLAGS. Seconds are user + system CPU time, which
# other load on the machine disturbs less than wall time; peak memory is the compiler's largest
# resident set. Both need GNU time (/usr/bin/time -f); without it only wall seconds are shown.
# MAX_MB (default 1024) fails the run when a compile needs more memory; MAX_SECS, when set,
# fails it when a compile takes longer.
B=$1/compile_time; shift
compilers=${*:-gcc clang}
mkdir -p "$B"
printf '#define ATTN_IMPLEMENTATION\n#include "attn.h"\n' > "$B/impl.c"
MAX_MB=${MAX_MB:-1024}
gnu_time=0
/usr/bin/time -f '%U' true >/dev/null 2>&1 && gnu_time=1
fail=0
echo "implementation unit, -std=c99 ${ATTN_CT_FLAGS:-}"
for cc in $compilers; do
    command -v "$cc" >/dev/null 2>&1 && echo "$cc: $("$cc" --version | head -n 1)"
done
printf '%-8s %-4s %8s %8s\n' compiler opt seconds peak_MB
for cc in $compilers; do
    if ! command -v "$cc" >/dev/null 2>&1; then echo "$cc: not on PATH, skipped"; continue; fi
    for opt in -O0 -O2; do
        # shellcheck disable=SC2086  # ATTN_CT_FLAGS is a list of flags
        set -- "$cc" -std=c99 $opt ${ATTN_CT_FLAGS:-} -I. -c "$B/impl.c" -o "$B/impl.o"
        if [ $gnu_time -eq 1 ]; then
            if ! /usr/bin/time -o "$B/time" -f '%U %S %M' "$@"; then fail=1; continue; fi
            secs=$(awk '{printf "%.1f", $1 + $2}' "$B/time")
            mb=$(awk '{printf "%d", $3 / 1024}' "$B/time")
        else
            t0=$(date +%s)
            if ! "$@"; then fail=1; continue; fi
            secs="$(($(date +%s) - t0)) wall"; mb="?"
        fi
        printf '%-8s %-4s %8s %8s\n' "$cc" "$opt" "$secs" "$mb"
        if [ "$mb" != "?" ] && [ "$mb" -gt "$MAX_MB" ]; then
            echo "FAIL $cc $opt: $mb MB over MAX_MB=$MAX_MB"; fail=1
        fi
        if [ -n "${MAX_SECS:-}" ] && [ $gnu_time -eq 1 ] &&
            awk -v s="$secs" -v m="$MAX_SECS" 'BEGIN { exit !(s > m) }'; then
            echo "FAIL $cc $opt: $secs s over MAX_SECS=$MAX_SECS"; fail=1
        fi
    done
done
exit $fail
