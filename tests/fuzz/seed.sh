#!/bin/sh
# Remakes the seed corpora: runs each harness for SECONDS from its current seeds, then merges
# what it found into tests/fuzz/corpus/NAME (libFuzzer -merge=1 keeps the smallest set of inputs
# that covers every feature seen). Usage: seed.sh BUILD SECONDS NAME... (`make fuzz-seeds`).
B=$1; S=$2; shift 2
for f in "$@"; do
    work=$B/fuzz-seed/$f
    rm -rf "$work"; mkdir -p "$work/new" "tests/fuzz/corpus/$f"
    "$B/$f" -max_total_time="$S" -timeout=120 -rss_limit_mb=4096 -artifact_prefix="$work/" \
        "$work/new" "tests/fuzz/corpus/$f" > "$work/run.log" 2>&1 || { echo "$f: failed, see $work/run.log"; exit 1; }
    "$B/$f" -merge=1 "tests/fuzz/corpus/$f" "$work/new" > "$work/merge.log" 2>&1 || { echo "$f: merge failed"; exit 1; }
    echo "$f: $(ls "tests/fuzz/corpus/$f" | wc -l) seeds, $(du -sk "tests/fuzz/corpus/$f" | cut -f1) KiB"
done
