#!/bin/sh
# Makes sure the Debian packages minidc needs are installed: installs them with apt-get when
# run as root, else prints the exact command and exits 2.
#   deps.sh build   compiler, MPICH, OpenBLAS, cJSON
#   deps.sh check   the above plus what the tests need (PyTorch for the cross-checks)
set -e
mode=${1:-build}
pkgs="mpich libmpich-dev libopenblas-dev libcjson-dev pkg-config"
[ "$mode" = check ] && pkgs="$pkgs python3-torch python3-numpy"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "minidc: installing:$missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends $missing >/dev/null 2>&1 || {
        apt-get update >/dev/null && apt-get install -y --no-install-recommends $missing >/dev/null; }
    exit 0
fi
echo "minidc: missing Debian packages:$missing" >&2
echo "install them with:  sudo apt-get install -y$missing" >&2
exit 2
