#!/bin/bash
# minidc train --dp: bad input (clear error from rank 0, non-zero exit, no hang), a rank failing
# mid-run, checkpoint resume bit-identical to an uninterrupted run, resume on another dp size
# and ZeRO stage with --check-serial, and --data with a generated token shard.
# Each behaviour is a scenario (tests/cli/scenario.sh): the runs a scenario reads (a checkpoint
# it resumes, a shard it trains on) are made when it is selected, and a failure of one of them
# is that scenario's failure.
. "$(dirname "$0")/scenario.sh"
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
bad_run() { # what pattern: the run in $tmp/out exited with an error (no hang) naming pattern
    if [ $rc = 0 ] || [ $rc = 124 ] || [ $rc = 137 ]; then
        flunk "$1" "exit $rc (want an error, no hang)"; cat "$tmp/out"; return 1
    fi
    if ! grep -q -- "$2" "$tmp/out"; then
        flunk "$1" "no '$2' in the output:"; cat "$tmp/out"; return 1
    fi
}
expect_error() { # what pattern ranks args...
    local what=$1 pat=$2; shift 2
    scenario "$what" || return 0
    run "$@"
    bad_run "$what" "$pat" || return
    pass "$what"; echo "  exit $rc: $(grep -m1 -- "$pat" "$tmp/out")"
}
ran_ok() { # what: the run in $tmp/out exited 0
    [ $rc = 0 ] && return 0
    flunk "$1" "exit $rc"; cat "$tmp/out"; return 1
}
serial_ok() { # what why: --check-serial said ok in $tmp/out
    grep -q "check-serial: .* ok" "$tmp/out" && return 0
    flunk "$1" "$2"; cat "$tmp/out"; return 1
}

# ---- bad input: every rank validates the same options before any message -------------------
label="--dp 3 on 4 ranks: refused, the error printed once (rank 0)"
if scenario "$label"; then
    run 4 --dp 3 $small --steps 1
    if bad_run "$label" "= 3 rank(s), but the job has 4"; then
        if [ "$(grep -c 'but the job has 4' "$tmp/out")" = 1 ]; then
            pass "$label"; echo "  exit $rc: $(grep -m1 -- "but the job has 4" "$tmp/out")"
        else flunk "$label" "the error must be printed once (rank 0)"; fi
    fi
fi
expect_error "batch not divisible by dp" "batch 10 (global, in sequences) is not divisible by --dp 4" 4 --dp 4 $small --batch 10 --steps 1
expect_error "unknown --zero" "zero 5" 2 --dp 2 --zero 5 $small --steps 1
expect_error "missing data file" "$tmp/none.bin" 2 --dp 2 $small --data "$tmp/none.bin" --steps 1
label="checkpoint of another shape (C=16 saved, C=32 resumed)"
if scenario "$label"; then
    run 2 --dp 2 --zero 1 $small --steps 1 --save "$tmp/c16.st"
    if [ $rc != 0 ]; then flunk "$label" "saving the C=16 checkpoint: exit $rc"; cat "$tmp/out"
    else
        run 2 --dp 2 --zero 1 --vocab 65 --ctx 8 --layers 2 --heads 2 --channels 32 --batch 12 --steps 1 --resume "$tmp/c16.st"
        pat="n_embd = 16 but the model has 32"
        bad_run "$label" "$pat" && { pass "$label"; echo "  exit $rc: $(grep -m1 -- "$pat" "$tmp/out")"; }
    fi
fi
expect_error "a rank failing mid-run" "failing on purpose" 3 --dp 3 --zero 2 $small --steps 4 --fail-at 1:2
expect_error "--prefetch without ZeRO-3" "prefetch is for --zero 3" 2 --dp 2 --zero 1 --prefetch $small --steps 1
label="ZeRO-3 with --prefetch and --check-serial: prefetched gathers hidden under compute"
if scenario "$label"; then
    run 3 --dp 3 --zero 3 --prefetch $small --steps 3 --check-serial
    if ran_ok "$label" && serial_ok "$label" "check-serial with --prefetch"; then
        if grep -q "hidden under compute (bucket reductions, prefetched gathers)" "$tmp/out"; then pass "$label"
        else flunk "$label" "the report does not say prefetched gathers are overlapped"; cat "$tmp/out"; fi
    fi
fi

# ---- resume: bit-identical to the uninterrupted run with the same layout --------------------
# the 2-step checkpoints b0.st and b3.st are also what the resumes on another mesh start from
later0="dp 2 ZeRO-0 checkpoint resumed on dp 3 ZeRO-3 with --check-serial"
later3="dp 2 ZeRO-3 checkpoint resumed on dp 4 ZeRO-2 with --check-serial"
for z in 0 3; do
    label="zero $z: 2 steps, resumed for 2 more: bit-identical to 4 steps in one run"
    later=later$z
    scenario "$label" || scenario "${!later}" || continue
    run 2 --dp 2 --zero $z --accum 2 $small --steps 2 --save "$tmp/b$z.st"
    [ $rc = 0 ] || { flunk "setup: zero $z: 2 steps saved" "exit $rc"; cat "$tmp/out"; rm -f "$tmp/b$z.st"; }
    scenario "$label" || continue
    [ -f "$tmp/b$z.st" ] || { flunk "$label" "no 2-step checkpoint"; continue; }
    run 2 --dp 2 --zero $z --accum 2 $small --steps 4 --save "$tmp/a$z.st"
    ran_ok "$label" || continue
    run 2 --dp 2 --zero $z --accum 2 $small --steps 2 --resume "$tmp/b$z.st" --save "$tmp/c$z.st"
    ran_ok "$label" || continue
    if cmp -s "$tmp/a$z.st" "$tmp/c$z.st"; then pass "$label"
    else flunk "$label" "resumed run differs from the uninterrupted one"; fi
done

# ---- resume with another dp size and stage; the serial check starts from the same file ------
if scenario "$later0"; then
    run 3 --dp 3 --zero 3 $small --steps 2 --resume "$tmp/b0.st" --check-serial
    ran_ok "$later0" && serial_ok "$later0" "check-serial after resume" && pass "$later0"
fi
if scenario "$later3"; then
    run 4 --dp 4 --zero 2 $small --steps 2 --resume "$tmp/b3.st" --check-serial
    ran_ok "$later3" && serial_ok "$later3" "check-serial after resume" && pass "$later3"
fi

# ---- --data: a generated token shard, sharded by rows; the serial check reads all rows ------
label="--data on dp 4 ZeRO-1 with --check-serial"
if scenario "$label"; then
    if ! "$bin" data generate copy --tokens 4000 "$tmp/copy.bin" >/dev/null 2>&1; then flunk "$label" "minidc data generate"
    else
        run 4 --dp 4 --zero 1 $small --steps 3 --data "$tmp/copy.bin" --check-serial
        ran_ok "$label" && serial_ok "$label" "check-serial with --data" && pass "$label"
    fi
fi
exit $fail
