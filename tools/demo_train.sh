#!/bin/sh
# make demo with the training driver: 4 ranks, dp = 4, ZeRO-1, the tiny config on the generated
# repeat task, 200 steps (about 20 s of CPU on 2 idle cores), the loss falling; then the memory
# and communication tables beside their formulas, and every rank's device and energy report.
# Usage: tools/demo_train.sh BUILD MPIEXEC
BUILD=${1:-build}
MPIEXEC=${2:-mpiexec.mpich}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
set -- "$MPIEXEC" -n 4 "$BUILD/minidc" train --config tiny --dp 4 --zero 1 --batch 8 --seq 32 --steps 200 \
    --lr 3e-3 --quiet --report "$BUILD/demo-train-report.json"
echo "\$ $*"
exec "$@"
