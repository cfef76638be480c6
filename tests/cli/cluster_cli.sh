#!/bin/bash
# Running under hydra with a hostfile (docs/cluster.md), tested with one naming this host: a
# 2-rank data-parallel run launched with -f HOSTFILE -ppn 2 gives the losses of the plain launch;
# --gpus-per-node 1 makes each rank its own virtual node (its messages on the network links),
# --gpus-per-node 2 puts both on one (NVLink), with the same results.
. "$(dirname "$0")/scenario.sh"
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
bin=$BUILD/minidc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
same="a hostfile, -ppn 2, --gpus-per-node 1 and 2: the plain launch's losses"
net="--gpus-per-node 1: every message on the network"
nvl="--gpus-per-node 2: every message on NVLink"
host=$(hostname)
getent hosts "$host" >/dev/null 2>&1 || host=localhost # a machine whose name does not resolve
echo "$host:2" >"$tmp/hosts"
run() { # name launcher-args... -- train-args...
    local name=$1; shift
    timeout -k 5 100 "$MPIEXEC" "$@" >"$tmp/$name" 2>&1
    rc=$?
}
args="train --config tiny --steps 2 --dp 2 --quiet"
# each run is made when a scenario that reads it is selected
scenario "$same" && run plain -n 2 "$bin" $args
if scenario "$same" || scenario "$net"; then run host1 -f "$tmp/hosts" -n 2 -ppn 2 "$bin" $args --gpus-per-node 1; rc1=$rc; fi
if scenario "$same" || scenario "$nvl"; then run host2 -f "$tmp/hosts" -n 2 -ppn 2 "$bin" $args --gpus-per-node 2; rc2=$rc; fi
losses() { awk '/^step/ {print $4, $6}' "$1"; }
if scenario "$same"; then
    if [ $rc1 = 0 ] && [ $rc2 = 0 ] && [ -n "$(losses "$tmp/plain")" ] && [ "$(losses "$tmp/plain")" = "$(losses "$tmp/host1")" ] &&
        [ "$(losses "$tmp/plain")" = "$(losses "$tmp/host2")" ]; then
        pass "$same"; echo "  (hostfile naming $host)"
    else flunk "$same" "hostfile launches (exit $rc1, $rc2)"; tail -3 "$tmp/host1"; fi
fi
if scenario "$net"; then
    grep -q "link bytes: nvlink 0 B network [1-9]" "$tmp/host1" && pass "$net" ||
        { flunk "$net" "--gpus-per-node 1 links"; grep "link bytes" "$tmp/host1"; }
fi
if scenario "$nvl"; then
    grep -q "link bytes: nvlink [1-9][0-9.]* [KMG]*i*B network 0 B" "$tmp/host2" && pass "$nvl" ||
        { flunk "$nvl" "--gpus-per-node 2 links"; grep "link bytes" "$tmp/host2"; }
fi
exit $fail
