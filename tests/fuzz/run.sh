#!/bin/sh
# Runs each libFuzzer harness for SECONDS from its seed corpus and prints a line per harness:
# executions, seconds, crashes (a sanitizer report or a signal) and invariant failures (a broken
# property); libFuzzer stops at the first of either and saves the input under
# BUILD/fuzz-work/NAME/. New inputs it finds go to BUILD/fuzz-work/NAME/corpus, never to the
# repository. FUZZ_SEED (default: libFuzzer's random seed) fixes the seed, as .ci/run does, so a
# CI failure can be replayed; the first line says which seed ran.
# Exit status 0 only when no harness failed. Usage: run.sh BUILD SECONDS NAME...
B=$1; S=$2; shift 2
seed=${FUZZ_SEED:+-seed=$FUZZ_SEED}
echo "seed: ${FUZZ_SEED:-random}"
failed=0
printf '%-14s %12s %8s %8s %10s\n' harness executions seconds crashes invariants
for f in "$@"; do
    work=$B/fuzz-work/$f
    mkdir -p "$work/corpus"
    seeds=tests/fuzz/corpus/$f
    [ -d "$seeds" ] || seeds=
    start=$(date +%s)
    "$B/$f" $seed -max_total_time="$S" -print_final_stats=1 -timeout=120 -rss_limit_mb=4096 \
        -artifact_prefix="$work/" "$work/corpus" $seeds > "$work/log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
    inv=$(grep -c '^invariant failed' "$work/log")
    crash=0
    [ $rc -ne 0 ] && [ "$inv" -eq 0 ] && crash=1
    printf '%-14s %12s %8s %8s %10s\n' "$f" "${execs:-?}" "$secs" "$crash" "$inv"
    if [ $rc -ne 0 ]; then
        failed=1
        grep -B2 -A12 -m1 -E '^invariant failed|ERROR: |runtime error|deadly signal' "$work/log" ||
            tail -n 5 "$work/log"
        ls "$work"/crash-* "$work"/timeout-* "$work"/oom-* 2>/dev/null
    fi
done
exit $failed
