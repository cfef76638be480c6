#!/bin/bash
# The course's labs (labs/, docs/course/): every lab's grader runs twice, as `make lab N=...` runs
# it: on the untouched student file at 2 ranks (every check fails, each with its reason,
# and the grade exits non-zero) and on the reference solution in tests/labs/solutions at every rank
# count of the lab (every check passes).
# A scenario per lab and file: hole-N, solution-N.
cd "$(dirname "$0")/../.." || exit 2
. tests/cli/scenario.sh
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
grade() { # N student-file [ranks] -> $tmp/out, rc
    LAB_RANKS=${3:-} make -s --no-print-directory lab N="$1" LAB_SRC="$2" BUILD="$BUILD" SANITIZE="${SANITIZE:-0}" \
        PORTABLE="${PORTABLE:-0}" MPIEXEC="$MPIEXEC" >"$tmp/out" 2>&1
    rc=$?
}
for grader in labs/graders/lab[0-9]*.c; do
    n=${grader#labs/graders/lab}
    n=${n%.c}
    hole=$(ls labs/lab"$n"_*.c 2>/dev/null)
    sol=tests/labs/solutions/$(basename "$hole")
    if scenario "hole-$n"; then
        grade "$n" "$hole" 2 # the hole fails alike at every rank count: two ranks stand for them
        total=$(grep -c '^\(PASS\|FAIL\) ' "$tmp/out")
        if [ "$rc" = 0 ]; then flunk "hole-$n" "the untouched $hole passed its grade"
        elif [ "$total" -lt 5 ]; then flunk "hole-$n" "only $total checks ran:"; tail -n 15 "$tmp/out"
        elif grep -q '^PASS ' "$tmp/out"; then flunk "hole-$n" "checks pass on the untouched $hole:"; grep '^PASS ' "$tmp/out" | head -n 5
        elif grep -E '^FAIL ' "$tmp/out" | grep -vqE '^FAIL .*: .*[a-z].*'; then
            flunk "hole-$n" "a failed check gives no reason:"; grep -E '^FAIL ' "$tmp/out" | grep -vE ': .*[a-z]' | head -n 3
        else pass "hole-$n: all $total checks fail, each with its reason ($(grep -m1 '^FAIL ' "$tmp/out" | cut -c1-110)...)"; fi
    fi
    if scenario "solution-$n"; then
        if [ ! -f "$sol" ]; then flunk "solution-$n" "no reference solution $sol"; continue; fi
        grade "$n" "$sol"
        if [ "$rc" != 0 ] || grep -q '^FAIL ' "$tmp/out"; then flunk "solution-$n" "the reference solution fails:"; grep -E '^FAIL |error' "$tmp/out" | head -n 8
        else pass "solution-$n: $(tail -n 1 "$tmp/out")"; fi
    fi
done
exit $fail
