#!/bin/bash
# What LD_PRELOAD=libminidc_mpi.so buys a plain MPI program: tests/bench/bench_interposer.c run with
# and without the library, alternately (ROUNDS times each, so drift on a shared machine hits
# both), at each rank count. Per row: the median over rounds of the program's own median per
# call; ratio = MPICH time / time with the library (above 1: the library is faster).
#   tools/bench_interposer.sh [ITERS]     (BENCH_INTERPOSER_RANKS, default "2 4"; ROUNDS, default 3;
#   MINIDC_LIB, default build/libminidc_mpi.so: another build's library, to compare versions)
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
iters=${1:-20}
rounds=${ROUNDS:-3}
app=$BUILD/tests/bench_interposer
lib=${MINIDC_LIB:-$PWD/$BUILD/libminidc_mpi.so}
[ -x "$app" ] && [ -f "$lib" ] || { echo "missing $app or $lib (make $app)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for p in ${BENCH_INTERPOSER_RANKS:-2 4}; do
    for r in $(seq "$rounds"); do
        "$MPIEXEC" -n "$p" "$app" "$iters" >"$tmp/mpich.$r" || exit 1
        "$MPIEXEC" -n "$p" -genv LD_PRELOAD "$lib" "$app" "$iters" >"$tmp/minidc.$r" || exit 1
    done
    echo "# $p ranks on $(getconf _NPROCESSORS_ONLN) cores, $rounds alternating runs each, $iters calls per row"
    printf '%-24s %10s %12s %12s %8s\n' row bytes "mpich(us)" "minidc(us)" ratio
    # rows are in the same order in every file: name (two words) bytes us
    paste -d' ' "$tmp"/mpich.* "$tmp"/minidc.* | awk -v R="$rounds" '
        function med(a, n,   i, j, x) {
            for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
        { for (k = 1; k <= R; k++) { m[k] = $(4 * k); d[k] = $(4 * (R + k)) }
          a = med(m, R); b = med(d, R)
          printf "%-24s %10s %12.2f %12.2f %8.2f\n", $1 " " $2, $3, a, b, a / b }'
done
