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

# The program $app (set by the test) writes each rank's results to DIR/rank<R>.txt.
# mpich_run P: runs it on P ranks without the library into $tmp/mpichP (log: $tmp/mpichP.log).
# lib_run P NAME [VAR=VALUE ...]: runs it with the library (and those -genv settings) into
#   $tmp/NAME (log: $tmp/NAME.log), and compares every rank's results with $tmp/mpichP.
# Each prints what failed and returns 1 (lib_run: 2 when the run itself failed); the caller
# sets fail.
mpich_run() {
    mkdir -p "$tmp/mpich$1"
    timeout 120 "$MPIEXEC" -n "$1" "$app" "$tmp/mpich$1" >"$tmp/mpich$1.log" 2>&1 && return 0
    echo "n=$1: the program failed without the interposer:"; tail "$tmp/mpich$1.log"; return 1
}
lib_run() {
    local p=$1 name=$2 env=() r ok=0
    shift 2
    for kv in "$@"; do env+=(-genv "${kv%%=*}" "${kv#*=}"); done
    mkdir -p "$tmp/$name"
    if ! timeout 120 "$MPIEXEC" -n "$p" -genv LD_PRELOAD "$preload" "${env[@]}" "$app" "$tmp/$name" \
            >"$tmp/$name.log" 2>&1; then
        echo "n=$p: the program failed with the interposer ($*):"; tail -n 20 "$tmp/$name.log"; return 2
    fi
    for r in $(seq 0 $((p - 1))); do
        diff "$tmp/mpich$p/rank$r.txt" "$tmp/$name/rank$r.txt" >"$tmp/diff" && continue
        echo "n=$p rank $r: results differ with the interposer ($*) (< MPICH, > minidc):"; head -n 20 "$tmp/diff"
        ok=1
    done
    return $ok
}
