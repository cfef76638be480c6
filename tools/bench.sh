#!/bin/sh
# make bench: every benchmark of `minidc bench` (each prints its target and pass/fail per row).
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
echo "== minidc bench device"
"$BUILD/minidc" bench device || exit 1

# ---- kernels: training step vs PyTorch (tools/bench_train.c, tests/bench_torch.py) ----------
# Each config in its own process (peak RSS per config); PyTorch measured right before minidc,
# both on 2 threads, OMP_WAIT_POLICY=PASSIVE.
echo "== minidc bench train (training step, B=4, 2 threads; PyTorch in the same run)"
for cfg in tiny small gpt2; do
    r=$(OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 tests/bench_torch.py --config $cfg 2>/dev/null) || r="0 0"
    OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE "$BUILD/minidc" bench train --config $cfg \
        --torch-ms "${r% *}" --torch-cpu-ms "${r#* }" || exit 1
done
# ---- end kernels ---------------------------------------------------------------------------
