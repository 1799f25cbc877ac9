#!/bin/sh
# Builds attn.h the ways users will: as C++, as strict C99 (the implementation units under
# stricter warnings: casts, shadowing, prototypes), a declarations-only unit linked with the
# implementation unit, ATTN_STATIC in two units of one program, the decode tests under
# ATTN_NO_FP8_KERNELS, the ISA tests without the tile kernels (ATTN_NO_AMX), C++ with decode's
# tile kernels (ATTN_DECODE_TILES); the bench (bench/attn_bench.c) under the same warnings, run
# on a tiny decode for each of its decode row kinds; checks attn.h's map of itself and the
# README's and header's copies of examples/quickstart.c (tests/house.sh) and the implementation
# unit's code-size budget (tests/text_budget.sh).
# Prints PASS/FAIL per check, SKIP with the reason where one cannot run, and a final
# "N passed, N failed, N skipped".
CC=$1; CXX=$2; B=$3/compile; mkdir -p "$B"
p=0; f=0; s=0
check() {  # name, command...
    name=$1; shift
    if out=$("$@" 2>&1); then p=$((p + 1)); echo "PASS $name"; else f=$((f + 1)); echo "FAIL $name"; echo "$out" | head -20; fi
}
W="-std=c99 -pedantic -Wall -Wextra -Werror"
# the implementation units: stricter still (casts that drop const or raise alignment, shadowing,
# prototypes); the small user units (decl.c) keep W
S="$W -Wcast-qual -Wcast-align -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wundef -Wpointer-arith -Wwrite-strings -Wredundant-decls -Wvla"
SX="-Wall -Wextra -Werror -Wcast-qual -Wshadow -Wundef"
accepts() {  # compiler, language (c or c++), flag: whether the compiler takes the flag
    echo 'int main(void) { return 0; }' | $1 -Werror $3 -x $2 - -o "$B/flag_probe" >/dev/null 2>&1
}
# casts to the type an expression already has: a g++ flag (clang++ would reject it)
if accepts "$CXX" c++ -Wuseless-cast; then SX="$SX -Wuseless-cast"; fi
# gcc's flow warnings (null pointers it can see dereferenced, if/else arms alike), where the
# compiler has them: on the C implementation unit built by $CC (SF; S is clang's too) and on
# the C++ one
SF=""
for flag in -Wnull-dereference -Wduplicated-branches; do
    if accepts "$CC" c $flag; then SF="$SF $flag"; fi
    if accepts "$CXX" c++ $flag; then SX="$SX $flag"; fi
done
printf '#define ATTN_IMPLEMENTATION\n#include "attn.h"\nint main(void) { return attn_version() == ATTN_VERSION_NUMBER ? 0 : 1; }\n' > "$B/impl.cc"
printf '#include "attn.h"\nint decl_user(void) { attn_params p = {0}; p.num_heads = 1; p.num_kv_heads = 1; p.head_size = 8; return attn_params_check(&p) == ATTN_OK; }\n' > "$B/decl.c"
printf '#define ATTN_IMPLEMENTATION\n#include "attn.h"\nint decl_user(void);\nint main(void) { return decl_user() ? 0 : 1; }\n' > "$B/impl.c"
printf '#define ATTN_STATIC\n#define ATTN_IMPLEMENTATION\n#include "attn.h"\nint unit_a(void) { return attn_best_isa() != ATTN_ISA_AUTO; }\n' > "$B/static_a.c"
printf '#define ATTN_STATIC\n#define ATTN_IMPLEMENTATION\n#include "attn.h"\nint unit_a(void);\nint main(void) { return unit_a() && attn_version() == ATTN_VERSION_NUMBER ? 0 : 1; }\n' > "$B/static_b.c"
check cxx_header_and_implementation sh -c "$CXX $SX -O2 -I. $B/impl.cc -o $B/impl_cc -lm && $B/impl_cc"
check cxx_with_decode_tiles sh -c "$CXX -Wall -Wextra -Werror -O2 -DATTN_DECODE_TILES -I. $B/impl.cc -o $B/impl_cc_dt -lm && $B/impl_cc_dt"
check cxx_with_openmp sh -c "$CXX $SX -O2 -fopenmp -I. $B/impl.cc -o $B/impl_cc_omp -lm && $B/impl_cc_omp"
check c99_pedantic_decls_unit_linked_with_impl_unit sh -c "$CC $W -O2 -I. -c $B/decl.c -o $B/decl.o && $CC $S $SF -O2 -I. -c $B/impl.c -o $B/impl.o && $CC $B/decl.o $B/impl.o -o $B/decl_impl -lm && $B/decl_impl"
check c99_pedantic_unoptimised_O0 sh -c "$CC $W -O0 -I. $B/impl.c $B/decl.c -o $B/impl_O0 -lm && $B/impl_O0"
check attn_static_in_two_units sh -c "$CC $W -O2 -I. $B/static_a.c $B/static_b.c -o $B/static_ab -lm && $B/static_ab"
check header_map_matches_code sh tests/house.sh attn.h
# the code-size budget (tests/text_budget.sh: gcc -O2, every ISA compiled in); not counted where
# it cannot run (no gcc for x86-64)
out=$(sh tests/text_budget.sh "$3" 2>&1); rc=$?
case $out in
    SKIP*) s=$((s + 1)); echo "SKIP text_budget: ${out#SKIP: }" ;;
    *) if [ $rc -eq 0 ]; then p=$((p + 1)); echo "PASS text_budget: $(echo "$out" | head -n 1)"
       else f=$((f + 1)); echo "FAIL text_budget"; echo "$out"; fi ;;
esac
# every function symbol of that unit found by grepping attn.h for its stem (where it was built)
if [ -f "$3/text_budget/impl.o" ]; then
    check symbols_found_in_the_header sh tests/house.sh attn.h "$3/text_budget/impl.o"
else
    s=$((s + 1)); echo "SKIP symbols_found_in_the_header: no x86-64 unit from text_budget"
fi
# the bench: a decode, decode-hot and kv-read row for each of two caches at 1 and 2 threads
check bench_builds_and_prints_its_decode_rows sh -c "$CC $W -O1 -fopenmp -I. bench/attn_bench.c \
    -o $B/attn_bench -lm && $B/attn_bench decode -H 4 --hk 2 -D 64 --seqs 2 --ctx 100 -t 1,2 -r 1 \
    --limits 10,1 --kv-dtype f32,fp8_e4m3 --hot > $B/bench.txt && \
    test \$(grep -c -E '^[|] (decode|decode-hot|kv-read) ' $B/bench.txt) -eq 12 && \
    test \$(grep -c -E '^[|] decode-hot ' $B/bench.txt) -eq 4"
check decode_tests_without_fp8_kernels sh -c "$CC $W -O2 -DATTN_NO_FP8_KERNELS -I. tests/test_main.c \
    -o $B/test_no_fp8 -lm && $B/test_no_fp8 decode fp8 paged forward build_info"
check tests_without_amx sh -c "$CC $W -O2 -DATTN_NO_AMX -I. tests/test_main.c \
    -o $B/test_no_amx -lm && $B/test_no_amx isa_ sdpa_bf16 build_info logits_on_tiles tile_queries"
if ! command -v clang >/dev/null 2>&1; then
    s=$((s + 2)); echo "SKIP clang_c99_pedantic, clang_c99_pedantic_unoptimised_O0: no clang"
else
    check clang_c99_pedantic sh -c "clang $S -Wcomma -O2 -I. -c $B/impl.c -o $B/clang_impl.o && clang $W -O2 -I. $B/decl.c $B/clang_impl.o -o $B/clang_c -lm && $B/clang_c"
    check clang_c99_pedantic_unoptimised_O0 sh -c "clang $W -O0 -I. $B/impl.c $B/decl.c -o $B/clang_c_O0 -lm && $B/clang_c_O0"
fi
if printf '#include <oneapi/dnnl/dnnl.h>\n' | $CC -E -x c - >/dev/null 2>&1; then  # the oneDNN engine too
    check cxx_with_onednn sh -c "$CXX -Wall -Wextra -Werror -O2 -fopenmp -DATTN_USE_ONEDNN -I. $B/impl.cc -o $B/impl_cc_dnnl -lm -ldnnl && $B/impl_cc_dnnl"
    if ! command -v clang >/dev/null 2>&1; then
        s=$((s + 1)); echo "SKIP clang_c99_pedantic_with_onednn: no clang"
    else
        check clang_c99_pedantic_with_onednn sh -c "clang $W -O2 -fopenmp -DATTN_USE_ONEDNN -I. $B/impl.c $B/decl.c -o $B/clang_c_dnnl -lm -ldnnl && $B/clang_c_dnnl"
    fi
else
    s=$((s + 2)); echo "SKIP cxx_with_onednn, clang_c99_pedantic_with_onednn: no <oneapi/dnnl/dnnl.h>"
fi
echo "$p passed, $f failed, $s skipped"
[ "$f" -eq 0 ]
