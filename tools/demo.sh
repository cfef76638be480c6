#!/bin/sh
# make demo: 4 ranks, dp = 4, ZeRO-1, the tiny config on the generated
# repeat task (global batch 24 x 64), 200 steps (about 25 s on 2 loaded cores), the loss
# falling from 6.26 to about 1.1; then the memory
# and communication tables beside their formulas, and every rank's device and energy report.
# Usage: tools/demo.sh BUILD MPIEXEC
BUILD=${1:-build}
MPIEXEC=${2:-mpiexec.mpich}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
set -- "$MPIEXEC" -n 4 "$BUILD/minidc" train --config tiny --dp 4 --zero 1 --steps 200 --quiet \
    --report "$BUILD/demo-train-report.json"
echo "\$ $*"
exec "$@"
