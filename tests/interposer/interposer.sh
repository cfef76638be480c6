#!/bin/bash
# The interposer: the same MPI program (tests/interposer/interposer_app.c) run with and without
# LD_PRELOAD=libminidc_mpi.so writes identical results (integer-valued inputs, so summation
# order cannot matter), minidc really ran the collectives (MINIDC_VERBOSE=1 says so once per
# function), and a user op went to MPICH (said once, too); erroneous calls fail with minidc's
# error, not a hang or MPICH's generic one.
# Each check is a scenario (tests/cli/scenario.sh); a run without the library that other
# scenarios compare with is made when one of them is selected.
set -u
. "$(dirname "$0")/../cli/scenario.sh"
. tests/interposer/interposer_env.sh
app=$BUILD/tests/interposer_app
[ -x "$app" ] || { flunk "setup: $app" "missing (make tests)"; exit 1; }
fail=0
same_label() { echo "n=$1: results identical with and without the interposer, each collective on minidc once"; }
sliced="n=4: identical with MINIDC_SLICE=64"
verbose2="n=3: MINIDC_VERBOSE=2 names the type and op of every reduction"
for p in 1 3 4; do
    label=$(same_label $p)
    # the runs without the library are also what the sliced (n=4) and MINIDC_VERBOSE=2 (n=3) runs compare with
    { [ $p = 4 ] && scenario "$sliced"; } || { [ $p = 3 ] && scenario "$verbose2"; } || scenario "$label" || continue
    mpich_run $p || { flunk "n=$p: the program without the interposer" "it failed"; continue; }
    scenario "$label" || continue
    lib_run $p minidc$p MINIDC_VERBOSE=1
    case $? in 0) ;; 1) flunk "$label" "results differ"; continue ;; *) flunk "$label" "the run failed"; continue ;; esac
    lines=$(wc -l <"$tmp/minidc$p/rank0.txt")
    why=""
    for f in MPI_Allreduce MPI_Reduce_scatter_block MPI_Reduce_scatter MPI_Allgather MPI_Allgatherv \
             MPI_Bcast MPI_Reduce MPI_Gather MPI_Scatter MPI_Alltoall MPI_Alltoallv MPI_Barrier; do
        n=$(grep -c "rank 0: $f runs on minidc" "$tmp/minidc$p.log")
        [ "$n" = 1 ] || why="$why; expected one 'rank 0: $f runs on minidc' line, got $n"
    done
    grep -q "rank 0: MPI_Allreduce falls through to MPICH" "$tmp/minidc$p.log" ||
        why="$why; no 'falls through' line for MPI_Allreduce (derived type, user op)"
    if [ -z "$why" ]; then pass "$label"; echo "  $lines results per rank"; else flunk "$label" "${why#; }"; fi
done
# Reducing messages in 64-byte slices (no emulated device here: sliced messages carry a header
# of their own) must give the same results.
if scenario "$sliced" && [ -d "$tmp/mpich4" ]; then
    lib_run 4 sliced4 MINIDC_SLICE=64 && pass "$sliced" || flunk "$sliced" "results differ or the run failed"
fi
# Random mixes of derived and plain types, chosen by each rank on its own (the same type
# signature): identical results with and without the library, several seeds and rank counts.
rnd=$BUILD/tests/interposer_random
for p in 2 3 5; do
    for seed in 1 2 3; do
        label="random derived/plain mixes n=$p seed $seed: identical with and without the library"
        scenario "$label" || continue
        [ -x "$rnd" ] || { flunk "$label" "missing $rnd (make tests)"; continue; }
        a=$(timeout 60 "$MPIEXEC" -n $p "$rnd" $seed 2>&1 | sort)
        b=$(timeout 60 "$MPIEXEC" -n $p -genv LD_PRELOAD "$preload" -genv MINIDC_TIMEOUT 20 "$rnd" $seed 2>&1 | sort)
        if [ "$a" != "$b" ] || ! echo "$a" | grep -q "hash"; then
            flunk "$label" "differ (MPICH, then minidc):"; echo "$a" | head -3; echo "$b" | head -6
        else pass "$label"; fi
    done
done
# MINIDC_VERBOSE=2 says what every call ran as: the Fortran, unsigned and complex types run on
# minidc (complex sums as pairs of reals), and what minidc cannot do exactly goes to MPICH.
if scenario "$verbose2" && [ -d "$tmp/mpich3" ]; then
    if ! lib_run 3 v2 MINIDC_VERBOSE=2; then
        flunk "$verbose2" "results differ or the run failed"
    else
        why=""
        for want in "MPI_Allreduce runs on minidc (.*MPI_DOUBLE_COMPLEX sum as 2 x f64)" \
                    "MPI_Reduce_scatter runs on minidc (.*MPI_C_COMPLEX sum as 2 x f32)" \
                    "MPI_Reduce runs on minidc (.*MPI_UINT64_T prod as i64)" \
                    "MPI_Allreduce runs on minidc (.*MPI_INT8_T sum as u8)" \
                    "MPI_Reduce_scatter_block runs on minidc (.*MPI_DOUBLE_PRECISION sum as f64)" \
                    "MPI_Allreduce runs on minidc (.*MPI_INTEGER max as i32)" \
                    "MPI_Allreduce falls through to MPICH: max of MPI_UNSIGNED " \
                    "MPI_Reduce falls through to MPICH: prod of MPI_C_DOUBLE_COMPLEX "; do
            n=$(grep -c "rank 0: $want" "$tmp/v2.log")
            [ "$n" -ge 2 ] || why="$why; expected a 'rank 0: $want' line per communicator, got $n"
        done
        [ -z "$why" ] && pass "$verbose2" || flunk "$verbose2" "${why#; }"
    fi
fi
# MPI_Reduce in place at a root other than 0 (8192 ints): MPICH 4.0.2's own crashes there
# (pmodels/mpich#6540); under the library it runs on minidc and the program finds its result right.
red=$BUILD/tests/interposer_reduce_root
for p in 3 4; do
    label="in-place MPI_Reduce at root $((p - 1)) of $p ranks: right"
    scenario "$label" || continue
    out=$(timeout 60 "$MPIEXEC" -n $p -genv LD_PRELOAD "$preload" -genv MINIDC_TIMEOUT 20 "$red" 2>&1)
    echo "$out" | grep -q "^ok: in-place reduce at root $((p - 1)) of $p ranks" && pass "$label" ||
        { flunk "$label" "in-place reduce at root $((p - 1)), n=$p:"; echo "$out" | head -5; }
done
# In-place MPI_Reduce_scatter and MPI_Reduce_scatter_block (tests/interposer/interposer_inplace.c) with
# each reduce-scatter algorithm: the rank's block right, the rest of the buffer as it was (as
# mpi4py's testReduceScatter checks). Under the library only: MPICH 4.0.2's own in-place
# MPI_Reduce_scatter of large blocks fails an overlapping-memcpy assertion.
inp=$BUILD/tests/interposer_inplace
for p in 3 4; do
    for algo in auto ring recursive_halving pairwise; do
        label="in-place MPI_Reduce_scatter(_block), $algo, n=$p: the rest of the buffer kept"
        scenario "$label" || continue
        out=$(timeout 60 "$MPIEXEC" -n $p -genv LD_PRELOAD "$preload" -genv MINIDC_TIMEOUT 20 \
              -genv MINIDC_ALGO_REDUCE_SCATTER $algo "$inp" 2>&1)
        rc=$?
        [ $rc = 0 ] && [ "$(echo "$out" | grep -c '^ok: ')" = 7 ] && pass "$label" ||
            { flunk "$label" "rc $rc:"; echo "$out" | head -8; }
    done
done
# Calls the library must leave to MPICH or report at once (tests/interposer/interposer_recover.c):
# intercommunicators, a root that is no rank, MPI_DATATYPE_NULL, an uncommitted type on every
# rank, world's handler set by a thread during a collective. The same "ok" lines, each call
# followed by a valid one, with and without the library.
rec=$BUILD/tests/interposer_recover
for p in 3 4; do
    label="intercommunicators, bad roots and types, world's handler from a thread, n=$p: as MPICH"
    scenario "$label" || continue
    a=$(timeout 60 "$MPIEXEC" -n $p "$rec" 2>&1 | grep -E '^(ok|FAILED|skipped)')
    b=$(timeout 60 "$MPIEXEC" -n $p -genv LD_PRELOAD "$preload" -genv MINIDC_TIMEOUT 20 "$rec" 2>&1)
    rc=$?
    b=$(echo "$b" | grep -E '^(ok|FAILED|skipped)')
    if [ $rc != 0 ] || [ "$a" != "$b" ] || [ "$(echo "$b" | grep -c '^ok:')" -lt 12 ]; then
        flunk "$label" "interposer_recover (rc $rc), MPICH then minidc:"; echo "$a"; echo "--"; echo "$b"
    else pass "$label"; fi
done
# A gather the root alone refuses: the others' blocks do not stay for the next gather (under
# MPICH they do, and the next gather at the root returns the refused call's values); aliased
# buffers are MPI_ERR_BUFFER where MPICH says so, and the calls after them right.
for p in 3 4; do
    label="calls the root alone refuses, aliased buffers, n=$p: MPICH's errors, the next call right"
    scenario "$label" || continue
    out=$(timeout 60 "$MPIEXEC" -n $p -genv LD_PRELOAD "$preload" -genv MINIDC_TIMEOUT 20 "$rec" --root-only 2>&1)
    [ $? = 0 ] && [ "$(echo "$out" | grep -c '^ok: ')" = 6 ] && pass "$label" ||
        { flunk "$label" "interposer_recover --root-only:"; echo "$out" | grep -v "^minidc interposer" | head -8; }
done
# A scatter the root alone refuses: the job stops at once with the reason (the others cannot be
# told, and would take the root's next blocks for this call's; MPICH leaves them waiting).
label="a scatter the root alone refuses: the job stops, naming the root and why"
if scenario "$label"; then
    if timeout 60 "$MPIEXEC" -n 3 -genv LD_PRELOAD "$preload" -genv MINIDC_TIMEOUT 20 "$rec" --root-scatter >"$tmp/sc.log" 2>&1 ||
            ! grep -q "rank 2: MPI_Scatter: sendtype is MPI_DATATYPE_NULL" "$tmp/sc.log" ||
            ! grep -q "rank 2: MPI_Scatter: the root refused the call .* stopping the job" "$tmp/sc.log" ||
            grep -q "the job went on" "$tmp/sc.log"; then
        flunk "$label" "a scatter the root alone refuses:"; head -5 "$tmp/sc.log"
    else pass "$label"; fi
fi
# Erroneous calls: every rank exits non-zero, within the timeout, and the error names the
# function, the rank and what is wrong (not MPICH's generic "See the MPI_ERROR field" or an
# assertion inside its memcpy).
for bad in "negative:MPI_Allreduce: count is -1, a negative count" \
           "longer:MPI_Allreduce: mismatch: rank " \
           "one-negative:rank 1: MPI_Bcast: count is -1, a negative count" \
           "sizes:rank 1: MPI_Allgather: this rank sends 12 bytes but receives blocks of 16"; do
    kind=${bad%%:*} want=${bad#*:}
    label="--bad $kind: fails with '$want'"
    scenario "$label" || continue
    if timeout 60 "$MPIEXEC" -n 3 -genv LD_PRELOAD "$preload" -genv MINIDC_TIMEOUT 20 \
            "$app" --bad "$kind" >"$tmp/bad.log" 2>&1; then
        flunk "$label" "the job succeeded"
    elif ! grep -qF "$want" "$tmp/bad.log"; then
        flunk "$label" "no '$want' in its output:"; head -n 8 "$tmp/bad.log"
    else
        pass "$label"
    fi
done
exit $fail
