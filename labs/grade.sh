#!/bin/bash
# Grades one lab: runs its grader (built by `make lab N=...`) at each of the lab's rank counts (the
# grader's "Ranks: ..." line) and adds up the checks. Usage: labs/grade.sh N GRADER STUDENT_FILE.
# Exit 0 only when every check of every run passed; a run that crashes or hangs (120 s) is a
# failed check of its own.
N=$1
bin=$2
src=$3
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
ranks=$(sed -n 's/^ \* Ranks: \([0-9 ]*\).*/\1/p' "$(dirname "$0")/graders/lab$N.c" | head -n 1)
ranks=$(echo ${ranks:-1 2 3 4})
[ -n "$LAB_RANKS" ] && ranks=$LAB_RANKS # a narrower sweep while working: LAB_RANKS="2 3" make lab N=1
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
echo "lab $N: grading $src at ${ranks// /, } ranks"
pass=0
fail=0
for p in $ranks; do
    timeout -k 5 120 "$MPIEXEC" -n "$p" "$bin" >"$tmp" 2>&1
    rc=$?
    grep -E '^(PASS|FAIL|      )' "$tmp"
    pass=$((pass + $(grep -c '^PASS' "$tmp")))
    fail=$((fail + $(grep -c '^FAIL' "$tmp")))
    if [ $rc -ge 124 ] || ! grep -q "^np=$p: " "$tmp"; then
        fail=$((fail + 1))
        why="crashed (exit $rc)"
        [ $rc -eq 124 ] || [ $rc -eq 137 ] && why="did not finish in 120 s (a rank waits for a message that never comes?)"
        echo "FAIL  np=$p  the run $why; its last lines:"
        grep -vE '^(PASS|FAIL|      )' "$tmp" | tail -n 8 | sed 's/^/        /'
    fi
done
echo "lab $N: $pass of $((pass + fail)) checks passed"
[ $fail -eq 0 ]
