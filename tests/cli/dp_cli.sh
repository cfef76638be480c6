#!/bin/bash
# minidc train --dp: bad input (clear error from rank 0, non-zero exit, no hang), a rank failing
# mid-run, checkpoint resume bit-identical to an uninterrupted run, resume on another dp size
# and ZeRO stage with --check-serial, and --data with a generated token shard.
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
bin=$BUILD/minidc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
small="--vocab 65 --ctx 8 --layers 2 --heads 2 --channels 16 --batch 12 --quiet"
run() { # ranks args... : runs with a bound, output in $tmp/out, status in $rc
    local n=$1; shift
    timeout -k 5 60 "$MPIEXEC" -n "$n" "$bin" train "$@" >"$tmp/out" 2>&1
    rc=$?
}
expect_error() { # what pattern ranks args...
    local what=$1 pat=$2; shift 2
    run "$@"
    if [ $rc = 0 ] || [ $rc = 124 ] || [ $rc = 137 ]; then
        echo "FAIL: $what: exit $rc (want an error, no hang)"; cat "$tmp/out"; fail=1; return
    fi
    if ! grep -q -- "$pat" "$tmp/out"; then
        echo "FAIL: $what: no '$pat' in the output:"; cat "$tmp/out"; fail=1; return
    fi
    echo "ok: $what: exit $rc: $(grep -m1 -- "$pat" "$tmp/out")"
}
expect_ok() { # what ranks args...
    local what=$1; shift
    run "$@"
    if [ $rc != 0 ]; then echo "FAIL: $what: exit $rc"; cat "$tmp/out"; fail=1; else echo "ok: $what"; fi
}

# ---- bad input: every rank validates the same options before any message -------------------
expect_error "--dp 3 on 4 ranks" "= 3 rank(s), but the job has 4" 4 --dp 3 $small --steps 1
[ "$(grep -c 'but the job has 4' "$tmp/out")" = 1 ] || { echo "FAIL: the error must be printed once (rank 0)"; fail=1; }
expect_error "batch not divisible by dp" "batch 10 (global, in sequences) is not divisible by --dp 4" 4 --dp 4 $small --batch 10 --steps 1
expect_error "unknown --zero" "zero 5" 2 --dp 2 --zero 5 $small --steps 1
expect_error "missing data file" "$tmp/none.bin" 2 --dp 2 $small --data "$tmp/none.bin" --steps 1
expect_ok "save a checkpoint (C=16)" 2 --dp 2 --zero 1 $small --steps 1 --save "$tmp/c16.st"
expect_error "checkpoint of another shape" "n_embd = 16 but the model has 32" 2 --dp 2 --zero 1 \
    --vocab 65 --ctx 8 --layers 2 --heads 2 --channels 32 --batch 12 --steps 1 --resume "$tmp/c16.st"
expect_error "a rank failing mid-run" "failing on purpose" 3 --dp 3 --zero 2 $small --steps 4 --fail-at 1:2
expect_error "--prefetch without ZeRO-3" "prefetch is for --zero 3" 2 --dp 2 --zero 1 --prefetch $small --steps 1
expect_ok "ZeRO-3 with --prefetch and --check-serial" 3 --dp 3 --zero 3 --prefetch $small --steps 3 --check-serial
grep -q "check-serial: .* ok" "$tmp/out" || { echo "FAIL: check-serial with --prefetch"; cat "$tmp/out"; fail=1; }
grep -q "hidden under compute (bucket reductions, prefetched gathers)" "$tmp/out" ||
    { echo "FAIL: the report does not say prefetched gathers are overlapped"; cat "$tmp/out"; fail=1; }

# ---- resume: bit-identical to the uninterrupted run with the same layout --------------------
for z in 0 3; do
    expect_ok "zero $z: 4 steps in one run" 2 --dp 2 --zero $z --accum 2 $small --steps 4 --save "$tmp/a$z.st"
    expect_ok "zero $z: 2 steps" 2 --dp 2 --zero $z --accum 2 $small --steps 2 --save "$tmp/b$z.st"
    expect_ok "zero $z: resume, 2 more steps" 2 --dp 2 --zero $z --accum 2 $small --steps 2 --resume "$tmp/b$z.st" \
        --save "$tmp/c$z.st"
    if cmp -s "$tmp/a$z.st" "$tmp/c$z.st"; then echo "ok: zero $z: resumed checkpoint is bit-identical"
    else echo "FAIL: zero $z: resumed run differs from the uninterrupted one"; fail=1; fi
done

# ---- resume with another dp size and stage; the serial check starts from the same file ------
expect_ok "dp 2 ZeRO-0 checkpoint resumed on dp 3 ZeRO-3 with --check-serial" 3 --dp 3 --zero 3 $small --steps 2 \
    --resume "$tmp/b0.st" --check-serial
grep -q "check-serial: .* ok" "$tmp/out" || { echo "FAIL: check-serial after resume"; cat "$tmp/out"; fail=1; }
expect_ok "dp 2 ZeRO-3 checkpoint resumed on dp 4 ZeRO-2 with --check-serial" 4 --dp 4 --zero 2 $small --steps 2 \
    --resume "$tmp/b3.st" --check-serial
grep -q "check-serial: .* ok" "$tmp/out" || { echo "FAIL: check-serial after resume"; cat "$tmp/out"; fail=1; }

# ---- --data: a generated token shard, sharded by rows; the serial check reads all rows ------
"$bin" data generate copy --tokens 4000 "$tmp/copy.bin" >/dev/null 2>&1 || { echo "FAIL: minidc data generate"; fail=1; }
expect_ok "--data on dp 4 ZeRO-1 with --check-serial" 4 --dp 4 --zero 1 $small --steps 3 --data "$tmp/copy.bin" --check-serial
grep -q "check-serial: .* ok" "$tmp/out" || { echo "FAIL: check-serial with --data"; cat "$tmp/out"; fail=1; }
exit $fail
