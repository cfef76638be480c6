#!/bin/sh
# make bench: every benchmark of `minidc bench` (each prints its target and pass/fail per row).
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
echo "== minidc bench device"
"$BUILD/minidc" bench device || exit 1
