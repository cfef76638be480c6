# Sourced by the interposer tests (not a test itself): sets BUILD, MPIEXEC, lib (the library)
# and preload (what LD_PRELOAD gets: under SANITIZE=1 ASan's runtime goes first, since ASan
# must be the first library loaded), and tmp, a scratch directory removed at exit. Exits 1
# without the library, 77 (skip) without libasan under SANITIZE=1.
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
lib=$PWD/$BUILD/libminidc_mpi.so
[ -f "$lib" ] || { echo "missing $lib (make)"; exit 1; }
preload=$lib
if [ "${SANITIZE:-0}" = 1 ]; then
    asan=$(gcc -print-file-name=libasan.so)
    [ -f "$asan" ] || { echo "skip: no libasan.so to preload ahead of the interposer under SANITIZE=1"; exit 77; }
    preload="$asan $lib"
    export ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
