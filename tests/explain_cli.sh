#!/bin/bash
# `minidc explain` runs without MPI (no mpiexec, MPI never initialized) and prints the NCCL
# ring order, per-rank bytes next to the formula, and a cost, for every collective x algorithm.
set -u
BUILD=${BUILD:-build}
bin=$BUILD/minidc
fail=0
out=$("$bin" explain allreduce --algo ring -n 4 --count 16 --element 5 2>&1) || { echo "$out"; exit 1; }
echo "$out" | grep -qF 'out[5] = ((x2 + x3) + x0) + x1' || { echo "ring order line missing:"; echo "$out"; fail=1; }
echo "$out" | grep -qF 'bytes sent per rank: r0 96, r1 96, r2 96, r3 96' || { echo "bytes line missing"; fail=1; }
echo "$out" | grep -qF 'formula: 2(p-1)/p n = 96 bytes' || { echo "formula line missing"; fail=1; }
# MPI must not be initialized: MPICH would print nothing, but a singleton init leaves a
# process manager; make sure explain never calls MPI_Init by running it under a bogus PMI.
PMI_FD=bogus PMI_PORT=bogus PMI_RANK=bogus "$bin" explain barrier -n 5 >/dev/null 2>&1 ||
    { echo "explain barrier failed under a broken PMI environment (does it call MPI_Init?)"; fail=1; }
for c in allreduce reduce_scatter allgather bcast reduce gather scatter alltoall alltoallv barrier; do
    algos=$("$bin" explain $c --list | awk 'NR > 1 && NF && $1 != "cost:" {print $1}')
    for a in $algos; do
        for p in 1 3 8; do
            "$bin" explain $c --algo $a -n $p --count 5 --root $((p - 1)) --gpus-per-node 4 >/dev/null 2>&1 ||
                { echo "explain $c --algo $a -n $p failed:"; "$bin" explain $c --algo $a -n $p --count 5 2>&1 | tail -3; fail=1; }
        done
    done
done
"$bin" explain allreduce --algo nosuch -n 4 >/dev/null 2>&1 && { echo "an unknown algorithm was accepted"; fail=1; }
[ $fail = 0 ] && echo "explain_cli: ok"
exit $fail
