#!/bin/sh
# The llama runner tensor-parallel over MPI (examples/llama.c built with mpicc -DLLAMA_MPI), when
# mpicc and mpirun are on PATH ("SKIP" otherwise). Tiny checkpoints from make_checkpoint: 4
# heads / 2 KV heads (1 and 2 ranks), and 4 heads / 4 KV heads with hidden 190 (4 ranks; 190 is
# not a multiple of 4, so the last rank's MLP slice is larger). Prompts served with continuous
# batching, chunked prefill, forks (-n 2), preemption and a system prompt, 1 thread per rank.
# Every run also checks, each step, that all ranks built the same metadata and pool (the runner
# fails otherwise).
# Tolerance: with N ranks each output of wo and w2 is the MPI_Allreduce sum of N partial dot
# products, a different grouping of the float additions than the single-process matmul, so
# the logits move by rounding (~1e-6 here). The --dump logits must pass tests/llama_ref.c (a
# double-precision forward pass, teacher-forced on the run's tokens) at the f32 tolerance of
# tests/llama_check.sh, 1e-4, and greedy tokens must be the reference's argmax except at near
# ties (best two within 2e-4). The greedy tokens are also compared with the single-process
# runner's: identical on these checkpoints (no near ties); with 1 rank the dump is bitwise the
# single-process one. Last line: "N passed, N failed" (", 1 skipped" follows without MPI).
# Usage: sh tests/llama_mpi_check.sh BUILD_DIR [CC]
B=${1:-build}; CC=${2:-cc}
if ! command -v mpicc > /dev/null 2>&1 || ! command -v mpirun > /dev/null 2>&1; then
    echo "SKIP llama_mpi_check: mpicc and mpirun are not on PATH (Debian: libopenmpi-dev openmpi-bin)"
    echo "0 passed, 0 failed, 1 skipped"; exit 0
fi
mkdir -p "$B"
FLAGS="-std=c99 -pedantic -Wall -Wextra -Werror -O2"
die() { echo "FAIL $*"; echo "0 passed, 1 failed"; exit 1; }
fresh() { [ -x "$1" ] && [ ! "$2" -nt "$1" ] && [ ! attn.h -nt "$1" ]; }
fresh "$B/llama_mpi" examples/llama.c ||
    mpicc $FLAGS -fopenmp -DLLAMA_MPI -I. examples/llama.c -o "$B/llama_mpi" -lm || die "build llama_mpi"
for ex in llama make_checkpoint; do
    fresh "$B/ex_$ex" "examples/$ex.c" ||
        $CC $FLAGS -fopenmp -I. "examples/$ex.c" -o "$B/ex_$ex" -lm || die "build $ex"
done
fresh "$B/llama_ref" tests/llama_ref.c || $CC $FLAGS tests/llama_ref.c -o "$B/llama_ref" -lm || die "build llama_ref"
M2=$B/mpi_kv2.bin; M4=$B/mpi_kv4.bin; Z=$B/mpi_tok.bin
{ "$B/ex_make_checkpoint" --tiny -o "$M2" -z "$Z" &&
  "$B/ex_make_checkpoint" --tiny --kv-heads 4 --hidden 190 --seed 5 -o "$M4" -z "$Z"; } > /dev/null ||
    die "make_checkpoint"
MPIRUN="mpirun --oversubscribe"
[ "$(id -u)" -eq 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"  # Open MPI refuses root without it
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
passed=0; failed=0
ok() { passed=$((passed + 1)); echo "PASS $*"; }
bad() { failed=$((failed + 1)); echo "FAIL $*"; }
# name | ranks | checkpoint | runner flags | what the stats line must show (grep -E, or -)
check() {
    name=$1; np=$2; model=$3; flags=$4; want=$5
    set -- -z "$Z" -m 16 --threads 1 $flags -p "the quick brown fox jumps over the lazy dog" \
        -p "hi" -p "once upon a time there was a little girl named lily who liked to play" \
        -p "the sun" -p "a cat sat on the mat" --arrive 0,0,1,3,4
    out=$($MPIRUN -np "$np" "$B/llama_mpi" "$model" --dump "$B/mpi_$name.dump" "$@" 2> "$B/mpi_$name.err")
    if [ $? -ne 0 ]; then bad "$name: mpirun -np $np failed: $(head -n 3 "$B/mpi_$name.err")"; return; fi
    if [ "$want" != "-" ] && ! echo "$out" | grep -Eq "$want"; then
        bad "$name: expected /$want/ in: $(echo "$out" | tail -n 3)"; return
    fi
    single=$("$B/ex_llama" "$model" --dump "$B/mpi_${name}_single.dump" "$@" 2>&1) ||
        { bad "$name: the single-process runner failed: $single"; return; }
    res=$("$B/llama_ref" "$model" "$B/mpi_$name.dump" 1e-4 2>&1) ||
        { bad "$name: against the reference: $res"; return; }
    if [ "$(echo "$out" | grep '^\[')" != "$(echo "$single" | grep '^\[')" ]; then
        bad "$name: tokens differ from the single-process runner's"; return
    fi
    if [ "$np" -eq 1 ] && ! cmp -s "$B/mpi_$name.dump" "$B/mpi_${name}_single.dump"; then
        bad "$name: 1 rank: logits not bitwise those of the single-process runner"; return
    fi
    ok "$name ($np ranks): tokens = single process; $(echo "$res" | tail -n 1)"
}
PRE='preemptions [1-9].*forks [1-9].*copies [1-9]'
FORK="--ignore-eos --chunk 3 -n 2 --blocks 16 --block-size 4"
check np1_fork   1 "$M2" "$FORK" "$PRE"
check np2_fork   2 "$M2" "$FORK" "$PRE"
# a system prompt: found in the prefix cache (the default), or computed once and forked (off)
SYS="--ignore-eos --chunk 5 -n 2 --blocks 30 --block-size 4 --system you_are_a_helpful_assistant"
check np2_system     2 "$M2" "$SYS" "prefix cache: [0-9]+ lookups, [1-9][0-9]* of [0-9]+ tokens found cached"
check np2_system_off 2 "$M2" "$SYS --prefix-cache off" "system prompt of [0-9]+ tokens computed once"
check np2_sample 2 "$M2" "$FORK --temp 0.8 --top-p 0.9 --seed 7" "$PRE"
check np2_kv4    2 "$M4" "$FORK" "$PRE"
check np4_kv4    4 "$M4" "$FORK" "$PRE"
# A rank count that does not divide the KV heads is refused with a message.
out=$($MPIRUN -np 3 "$B/llama_mpi" "$M4" -m 2 -p "1 2 3" 2>&1)
if [ $? -ne 0 ] && echo "$out" | grep -q 'do not divide the 4 KV heads'; then ok "3 ranks refused for 4 KV heads"
else bad "3 ranks over 4 KV heads: $out"; fi
# The per-step agreement check catches ranks whose pools diverge: rank 1 given a larger pool
# (other free block ids) must stop the run with the message.
out=$($MPIRUN -np 1 "$B/llama_mpi" "$M2" -m 4 --blocks 16 -p "1 2 3" : \
      -np 1 "$B/llama_mpi" "$M2" -m 4 --blocks 17 -p "1 2 3" 2>&1)
if [ $? -ne 0 ] && echo "$out" | grep -q 'differ from another rank'; then ok "diverging pools detected"
else bad "diverging pools not detected: $(echo "$out" | head -n 3)"; fi
# No arguments: the runner's self-check (batched = each prompt alone), sharded over 2 ranks.
out=$($MPIRUN -np 2 "$B/llama_mpi" 2>&1)
if [ $? -eq 0 ] && echo "$out" | grep -q '^ok: '; then ok "self-check over 2 ranks"
else bad "self-check over 2 ranks: $(echo "$out" | tail -n 3)"; fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
