#!/bin/bash
# The interposer under a program minidc did not write: Debian's ScaLAPACK test suite for MPICH
# (package scalapack-mpi-test). The BLACS tester checks broadcasts and combines (sum, amax,
# amin) of every precision, integer to double complex, on 2x2 and 1x4 grids, row, column and
# whole-grid scopes, plus barriers and grid maps; the LU and QR drivers factor and solve small
# systems in real and complex precision and check the residuals. Each runs on 4 ranks with and
# without LD_PRELOAD=libminidc_mpi.so: the verdicts must be the same and all passing, and
# minidc must really have run BLACS's MPI_Bcast (derived datatypes, packed), MPI_Allreduce,
# MPI_Reduce and MPI_Barrier (its amax/amin user ops, and its sums over derived datatypes, go
# to MPICH).
# Each verdict is a scenario (tests/cli/scenario.sh); a tester runs when one of the scenarios
# reading its logs is selected.
set -u
. "$(dirname "$0")/../cli/scenario.sh"
dir=/usr/lib/x86_64-linux-gnu/scalapack/mpich-tests
[ -x "$dir/xCbtest" ] || { echo "skip: no ScaLAPACK tests (apt-get install scalapack-mpi-test)"; exit 77; }
. tests/interposer/interposer_env.sh
# ScaLAPACK's testers do not free what they allocate: only our errors count here.
[ "${SANITIZE:-0}" = 1 ] && export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
cd "$tmp" || exit 1
fail=0

# BLACS tester input: broadcasts and combines (no point-to-point section), every precision.
cat >bt.dat <<'EOF'
'minidc interposer check'       Comment line
6                               device out
'blacstest.out'                 output file name
'F'                             Run SDRV?
'T'                             Run BSBR?
'T'                             Run COMB?
'T'                             Run AUX?
5                               Number of precisions
'I' 'S' 'D' 'C' 'Z'             Values for precision
0                               Verbosity level
EOF
cat >comb.dat <<'EOF'
3                       Number of OPs
'+' '>' '<'             Combine operations to perform
3                       Number of scopes
'R' 'C' 'A'             values for scopes
0                       Repeatability flag (0=no-rep, 1=rep, 2=both)
0                       Coherence flag (0=no-coh, 1=coh, 2=both)
1                       Number of topologies
' '                     TOP (' ': BLACS uses MPI_Allreduce / MPI_Reduce)
4                       Number of matrices
3 1 25 0                M
5 1 19 0                N
5 1 25 1                LDASRC
9 1 25 1                LDADEST
4 1 25 1                LDI
2                       Number of dests
0 -1                    RDEST
0 -1                    CDEST
2                       Number of grids
2 1                     NPROW
2 4                     NPCOL
EOF
cat >bsbr.dat <<'EOF'
3                       Number of scopes
'R' 'C' 'A'             values for scopes
1                       Number of topologies
' '                     TOP
2                       Number of shapes
'G' 'U'                 UPLO
'E' 'N'                 DIAG
4                       Number of matrices
2 1 25 0                M
2 7 19 0                N
2 1 25 1                LDASRC
2 1 25 1                LDADEST
2                       Number of src/dest pairs
0 1                     RSRC
0 1                     CSRC
2                       Number of grids
2 1                     NPROW
2 4                     NPCOL
EOF
# LU and QR drivers: small systems on 2x2 and 1x4 grids.
cat >LU.dat <<'EOF'
'ScaLAPACK LU input file'
'minidc interposer check'
'LU.out'        output file name
6               device out
2               number of problems sizes
10 17           values of M
12 13           values of N
2               number of NB's
2 3             values of NB
1               number of NRHS's
3               values of NRHS
1               number of NBRHS's
3               values of NBRHS
2               number of process grids (ordered pairs of P & Q)
2 1             values of P
2 4             values of Q
3.0             threshold
T               (T or F) Test Cond. Est. and Iter. Ref. Routines
EOF
cat >QR.dat <<'EOF'
'ScaLAPACK QR input file'
'minidc interposer check'
'QR.out'        output file name
6               device out
2               number of factorizations
'QR' 'QP'       factorizations (QP: with column pivoting)
2               number of problems sizes
13 26           values of M
17 20           values of N
1               number of blocking sizes
3               values of MB
4               values of NB
2               number of process grids (ordered pairs P & Q)
2 1             values of P
2 4             values of Q
5.0             threshold
EOF

# Runs program $1 on 4 ranks, without (tag mpich) or with (tag minidc) the interposer.
run() {
    local prog=$1 tag=$2 env=()
    [ "$tag" = minidc ] && env=(-genv LD_PRELOAD "$preload" -genv MINIDC_VERBOSE 1)
    # BLACS's last auxiliary test calls BLACS_ABORT on purpose: that exit status is expected.
    local t0=$SECONDS; timeout 240 "$MPIEXEC" -n 4 "${env[@]}" "$dir/$prog" >"$prog.$tag.log" 2>&1 </dev/null
    local rc=$?; echo "  $prog ($tag): $((SECONDS - t0)) s"
    [ $rc = 124 ] && flunk "$prog ($tag)" "timed out"
    return 0
}

# The BLACS tester's verdict lines. REPEATABLE SUM says SKIPPED when the non-repeatable sum
# already gave the same bits in every trial (it did with minidc's deterministic collectives),
# PASSED when it needed BLACS's repeatable mode: both are passes.
verdicts() { grep -E "PASSED|FAILED|SKIPPED|TESTS:" "$1" | grep -v "REPEATABLE SUM"; }

verdict="BLACS tester: the same verdicts with and without the interposer, none failed"
ran=()
for f in MPI_Bcast MPI_Allreduce MPI_Reduce MPI_Barrier; do ran+=("BLACS tester: minidc ran $f"); done
want_blacs=0
for label in "$verdict" "${ran[@]}"; do scenario "$label" && want_blacs=1; done
if [ $want_blacs = 1 ]; then
    scenario "$verdict" && run xCbtest mpich
    run xCbtest minidc
fi
if scenario "$verdict"; then
    n=$(verdicts xCbtest.minidc.log | wc -l)
    if [ "$n" -lt 20 ]; then
        flunk "$verdict" "with the interposer: only $n verdict lines:"; tail -n 20 xCbtest.minidc.log
    elif ! diff <(verdicts xCbtest.mpich.log) <(verdicts xCbtest.minidc.log) >diff.txt; then
        flunk "$verdict" "verdicts differ (< MPICH, > minidc):"; head -n 20 diff.txt
    elif verdicts xCbtest.minidc.log | grep -qE "^ *FAILED|[1-9][0-9]* FAILED"; then
        flunk "$verdict" "failures:"; verdicts xCbtest.minidc.log | grep -E "^ *FAILED|[1-9][0-9]* FAILED" | head
    else
        pass "$verdict"; echo "  $n verdicts"
    fi
fi
for label in "${ran[@]}"; do
    scenario "$label" || continue
    f=${label##* }
    grep -q "rank 0: $f runs on minidc" xCbtest.minidc.log && pass "$label" || flunk "$label" "minidc did not run $f"
done

for prog in xdlu xzlu xdqr xcqr; do
    label="$prog: systems solved and checked, the same with and without the interposer"
    scenario "$label" || continue
    run $prog mpich
    run $prog minidc
    for tag in mpich minidc; do
        passed=$(sed -n 's/^ *\([0-9]*\) tests completed and passed residual checks.*/\1/p' $prog.$tag.log)
        failed=$(sed -n 's/^ *\([0-9]*\) tests completed and failed residual checks.*/\1/p' $prog.$tag.log)
        eval "${tag}_passed=\${passed:-none} ${tag}_failed=\${failed:-none}"
    done
    if [ "$minidc_passed" = none ] || [ "$minidc_failed" != 0 ] || [ "$minidc_passed" = 0 ] ||
       [ "$minidc_passed" != "$mpich_passed" ] || [ "$mpich_failed" != 0 ]; then
        flunk "$label" "passed $mpich_passed, failed $mpich_failed without the interposer; passed $minidc_passed, failed $minidc_failed with it:"
        tail -n 15 $prog.minidc.log
    else
        pass "$label"; echo "  $minidc_passed systems"
    fi
done
exit $fail
