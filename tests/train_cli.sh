#!/bin/bash
# `minidc train`: a short run on the generated task (progress lines, falling loss, the device
# report), and the exit status 2 with a message naming the option for bad options.
BUILD=${BUILD:-build}
m=$BUILD/minidc
fail=0
t=$(mktemp -d /tmp/minidc-train-XXXXXX)
trap 'rm -rf "$t"' EXIT
check() { # description, output file, grep pattern
    if ! grep -q -- "$3" "$2"; then echo "FAIL: $1: no '$3' in:"; sed 's/^/  | /' "$2"; fail=1; fi
}
status() { # description, expected exit status, output file, command...
    local what=$1 want=$2 out=$3; shift 3
    "$@" >"$out" 2>&1
    local rc=$?
    [ $rc = "$want" ] || { echo "FAIL: $what: exit $rc, expected $want"; sed 's/^/  | /' "$out"; fail=1; }
}
status "train tiny" 0 "$t/tiny" $m train --config tiny --steps 30 --batch 6 --seq 32 --lr 3e-3
check "progress line" "$t/tiny" "^step     1  loss 6\.[0-9]*  norm .* ms .* tok/s  virtual .* ms  energy .* J"
check "last step" "$t/tiny" "^step    30 "
check "device report" "$t/tiny" "virtual time"
check "memory figure" "$t/tiny" "^memory: params .* activations .* MiB on h100"
l1=$(awk '/^step     1 /{print $4}' "$t/tiny"); l30=$(awk '/^step    30 /{print $4}' "$t/tiny")
awk -v a="$l1" -v b="$l30" 'BEGIN{exit !(b < a - 0.5)}' || { echo "FAIL: loss $l1 -> $l30 did not fall by 0.5"; fail=1; }
status "explicit sizes" 0 "$t/sizes" $m train --vocab 97 --ctx 13 --layers 1 --heads 3 --channels 24 --steps 2 --batch 3 --quiet
check "explicit sizes line" "$t/sizes" "V=97 (padded 128) T=13 L=1 H=3 C=24"
status "heads do not divide channels" 2 "$t/heads" $m train --config tiny --heads 5 --steps 1
check "heads message" "$t/heads" "--heads: 5 heads do not divide --channels 128"
status "seq longer than context" 2 "$t/seq" $m train --config tiny --seq 65 --steps 1
check "seq message" "$t/seq" "--seq 65 must be in \[1, 64\]"
status "unknown config" 2 "$t/cfg" $m train --config nosuch
check "config message" "$t/cfg" "--config: unknown config 'nosuch'"
status "unknown option" 2 "$t/opt" $m train --bogus
check "option message" "$t/opt" "unknown option '--bogus'"
status "bad number" 2 "$t/num" $m train --steps many
check "number message" "$t/num" "--steps needs an integer"
status "help" 0 "$t/help" $m train --help
check "help text" "$t/help" "--config NAME"
exit $fail
