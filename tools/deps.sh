#!/bin/sh
# Makes sure the Debian packages minidc needs are installed: installs them with apt-get when
# run as root, else prints the exact command and exits 2.
#   deps.sh build   compiler, MPICH, OpenBLAS, cJSON
#   deps.sh check   the above plus what the tests need (PyTorch for the cross-checks), and,
#                   optionally, ScaLAPACK's MPICH test programs, which
#                   tests/interposer/interposer_scalapack.sh runs under the interposer (skipped without
#                   them). They are installed only with MINIDC_OPTIONAL_DEPS=1 (.ci/run sets
#                   it): the package pulls in OpenMPI, whose mpicc/mpirun then become the
#                   system's default (minidc itself always calls the .mpich ones), which a
#                   developer's machine should not get unasked. Otherwise a note says how.
set -e
mode=${1:-build}
# Not Debian (macOS with Homebrew, docs/README.md "Platforms"): nothing to check here.
if ! command -v dpkg-query >/dev/null; then
    [ "$mode" = build ] && echo "minidc: no dpkg here: not checking packages (docs/README.md, Platforms)" >&2
    exit 0
fi
pkgs="mpich libmpich-dev libopenblas-dev libcjson-dev pkg-config"
# make MPICH_CC=clang: clang and its OpenMP runtime (clang's -fopenmp links libomp)
[ "${MPICH_CC:-}" = clang ] && pkgs="$pkgs clang libomp-dev"
optional=""
if [ "$mode" = check ]; then
    pkgs="$pkgs python3-torch python3-numpy"
    optional="scalapack-mpi-test"
fi
missing_of() {
    m=""
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || m="$m $p"
    done
    echo "$m"
}
apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends "$@" >/dev/null 2>&1 || {
        apt-get update >/dev/null 2>&1 && apt-get install -y --no-install-recommends "$@" >/dev/null 2>&1; }
}
can_install() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; }
# shellcheck disable=SC2086
missing=$(missing_of $pkgs)
if [ -n "$missing" ]; then
    if can_install; then
        echo "minidc: installing:$missing" >&2
        # shellcheck disable=SC2086
        apt_install $missing || {
            echo "minidc: apt-get install$missing failed; run it by hand to see why" >&2
            exit 2
        }
    else
        echo "minidc: missing Debian packages:$missing" >&2
        echo "install them with:  sudo apt-get install -y$missing" >&2
        exit 2
    fi
fi
# shellcheck disable=SC2086
missing=$(missing_of $optional)
if [ -n "$missing" ] && [ "${MINIDC_OPTIONAL_DEPS:-0}" = 1 ] && can_install; then
    echo "minidc: installing (optional):$missing" >&2
    # shellcheck disable=SC2086
    apt_install $missing || echo "minidc: apt-get install$missing failed (optional)" >&2
    # shellcheck disable=SC2086
    missing=$(missing_of $optional)
fi
if [ -n "$missing" ]; then
    echo "minidc: optional packages not installed:$missing (tests/interposer/interposer_scalapack.sh" \
         "is skipped; to run it: sudo apt-get install -y$missing, which makes OpenMPI the" \
         "default mpicc/mpirun, or make check MINIDC_OPTIONAL_DEPS=1; it runs in make check-long)" >&2
fi
exit 0
