#!/bin/sh
# memcheck over the examples and a reduced suite (the tests whose names contain one of the
# filters): prints each program's error count and the total, and the suite's own last line.
# Exit status 0 only when valgrind found no error and the suite passed.
# Usage: valgrind.sh BUILD VALGRIND FILTER...
B=$1; VG=$2; shift 2
case $B in /*) ;; *) B=./$B ;; esac
total=0; failed=0
run() {  # run NAME PROGRAM ARGS...: memcheck, its error count added to the total
    name=$1; shift
    $VG --tool=memcheck --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
        --track-origins=yes --log-file="$B/valgrind-$name.log" "$@" > "$B/valgrind-$name.out" 2>&1
    rc=$?
    errors=$(sed -n 's/.*ERROR SUMMARY: \([0-9][0-9]*\) errors.*/\1/p' "$B/valgrind-$name.log" | tail -n 1)
    [ -n "$errors" ] || errors=1
    total=$((total + errors))
    echo "$name: $errors errors (exit status $rc)"
    if [ "$errors" -ne 0 ] || [ $rc -ne 0 ]; then failed=1; grep -A20 -m3 '^==[0-9]*== [A-Z]' "$B/valgrind-$name.log" | head -60; fi
}
for ex in "$B"/ex_*; do
    [ -x "$ex" ] || continue
    OMP_NUM_THREADS=2 run "$(basename "$ex")" "$ex"
done
run suite "$B/test_valgrind" "$@"
tail -n 1 "$B/valgrind-suite.out"
tail -n 1 "$B/valgrind-suite.out" | grep -q ' 0 failed, [0-9]* skipped$' || failed=1
echo "valgrind: $total errors"
exit $failed
