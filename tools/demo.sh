#!/bin/sh
# make demo: the best end-to-end run minidc has so far. Until the training driver exists, a
# small data-parallel workload on 4 emulated H100s in 2 virtual nodes of 2 (NVLink inside, network across), then every rank's device report.
# Usage: tools/demo.sh BUILD MPIEXEC
BUILD=${1:-build}
MPIEXEC=${2:-mpiexec.mpich}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
echo "\$ $MPIEXEC -n 4 $BUILD/minidc workload --device h100 --gpus-per-node 2 --steps 3 --report $BUILD/demo-report.json"
exec "$MPIEXEC" -n 4 "$BUILD/minidc" workload --device h100 --gpus-per-node 2 --steps 3 --report "$BUILD/demo-report.json"
