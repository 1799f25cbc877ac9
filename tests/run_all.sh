#!/bin/sh
# Runs the suite in every build configuration, the compile checks and the examples, and prints
# the summed "N passed, N failed, N skipped" as the very last line. Exit status 0 only when
# nothing failed (and something passed). SKIP_CONFIGS (from the Makefile) names configurations
# it could not build, and SKIP_WHY says why: each counts as one skipped.
B=$1; CC=$2; CXX=$3; shift 3
case $B in /*) ;; *) B=./$B ;; esac  # the build folder, absolute or relative to here
passed=0; failed=0; skipped=0
add() {  # add the counts of a "N passed, N failed" line, or "N passed, N failed, N skipped"
    n='\([0-9][0-9]*\)'
    p=$(echo "$1" | sed -n "s/^$n passed, $n failed\(, $n skipped\)\{0,1\}$/\1/p")
    f=$(echo "$1" | sed -n "s/^$n passed, $n failed\(, $n skipped\)\{0,1\}$/\2/p")
    s=$(echo "$1" | sed -n "s/^$n passed, $n failed, $n skipped$/\3/p")
    if [ -z "$p" ]; then failed=$((failed + 1)); return; fi
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + ${s:-0}))
}
for c in ${SKIP_CONFIGS:-}; do
    echo "=== configuration: $c: SKIP ($SKIP_WHY)"; skipped=$((skipped + 1))
done
# Two parts run beside the configurations' suites, as each keeps one core busy at most: the NEON
# suite under qemu-user (one emulated core) and the compile checks (one compiler at a time). Their
# output is printed in its place below. Waiting OpenMP threads sleep: the cores are shared.
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}; export OMP_WAIT_POLICY
neon_pid=
if [ -n "${QEMU_AARCH64:-}" ]; then
    "$QEMU_AARCH64" "$B/test_neon" > "$B/neon.log" 2>&1 &
    neon_pid=$!
fi
sh tests/compile_checks.sh "$CC" "$CXX" "$B" > "$B/compile_checks.log" 2>&1 &
checks_pid=$!
for c in "$@"; do
    echo "=== configuration: $c ($B/test_$c)"
    for threads in 2; do
        out=$(OMP_NUM_THREADS=$threads "$B/test_$c" 2>&1); rc=$?
        echo "$out" | grep -v '^PASS ' ; last=$(echo "$out" | tail -n 1)
        add "$last"
        [ $rc -ne 0 ] && [ -z "$(echo "$last" | grep ' 0 failed')" ] || true
    done
done
# The NEON pass under qemu-user: the Makefile sets QEMU_AARCH64 only when it could cross-build
# $B/test_neon (aarch64-linux-gnu-gcc and qemu-aarch64 on PATH).
echo "=== configuration: neon (aarch64 under qemu-user, $B/test_neon)"
if [ -n "$neon_pid" ]; then
    wait "$neon_pid"
    grep -v '^PASS ' "$B/neon.log"
    add "$(tail -n 1 "$B/neon.log")"
else
    echo "SKIP neon: no aarch64 cross toolchain (aarch64-linux-gnu-gcc and qemu-aarch64)"
    skipped=$((skipped + 1))
fi
echo "=== compile checks"
wait "$checks_pid"
cat "$B/compile_checks.log"; last=$(tail -n 1 "$B/compile_checks.log")
add "$last"
echo "=== packaging"
sh tests/install_check.sh "$B" > "$B/install_check.log" 2>&1
cat "$B/install_check.log"; add "$(tail -n 1 "$B/install_check.log")"
echo "=== examples"
ep=0; ef=0
for ex in "$B"/ex_*; do
    [ -x "$ex" ] || continue
    if "$ex" > "$B/$(basename "$ex").out" 2>&1; then ep=$((ep + 1)); echo "PASS $(basename "$ex")";
    else ef=$((ef + 1)); echo "FAIL $(basename "$ex")"; cat "$B/$(basename "$ex").out"; fi
done
# The vendored-build example cross-built for aarch64, under qemu-user like the NEON suite.
if [ -n "${QEMU_AARCH64:-}" ] && [ -x "$B/embedded_aarch64" ]; then
    if "$QEMU_AARCH64" "$B/embedded_aarch64" > "$B/embedded_aarch64.out" 2>&1; then
        ep=$((ep + 1)); echo "PASS embedded_aarch64 (qemu)"
    else ef=$((ef + 1)); echo "FAIL embedded_aarch64 (qemu)"; cat "$B/embedded_aarch64.out"; fi
fi
add "$ep passed, $ef failed"
echo "=== llama runner against a naive forward pass (tests/llama_check.sh)"
out=$(sh tests/llama_check.sh "$B" "$CC" 2>&1)
echo "$out" | grep -v '^PASS '
add "$(echo "$out" | tail -n 1)"
echo "=== llama runner tensor-parallel over MPI (tests/llama_mpi_check.sh)"
out=$(sh tests/llama_mpi_check.sh "$B" "$CC" 2>&1)
echo "$out" | grep -v '^PASS '
add "$(echo "$out" | tail -n 1)"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
