#!/bin/bash
# Outputs are checked before any work (train, forward): a destination under a regular file, a
# directory, a FIFO or a device, or one of the run's inputs, is refused with exit 2 and a message
# naming the option and the path, before the first step (no "step" line), on every rank of a
# multi-rank run (the message printed once); --resume X --save X stays allowed; checkpoints are
# written atomically (and reports and shards): through a symbolic link, whole when three runs save to one path at once
# (each tensor's checksum is checked on resume), without stale temporary files; a FIFO given as
# an input is refused at once instead of waited on; a tiny weights file naming a huge model is
# refused before the model is allocated.
# Each refusal and each writer behaviour is a scenario (tests/cli/scenario.sh); the inputs several
# of them read (a shard, weights, tokens) are always made.
. "$(dirname "$0")/scenario.sh"
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
m=$BUILD/minidc
fail=0
t=$(mktemp -d /tmp/minidc-outputs-XXXXXX)
trap 'rm -rf "$t"' EXIT
tiny="--vocab 65 --ctx 8 --layers 2 --heads 2 --channels 16 --batch 4 --quiet"
refused() { # what, status, pattern, command...: true when the command is refused as wanted
    local what=$1 want=$2 pat=$3; shift 3
    timeout -k 5 60 "$@" >"$t/out" 2>&1 </dev/null
    local rc=$?
    if [ $rc != "$want" ]; then flunk "$what" "exit $rc, expected $want"; sed 's/^/  | /' "$t/out" | tail -5; return 1; fi
    if ! grep -q -- "$pat" "$t/out"; then flunk "$what" "no '$pat' in:"; sed 's/^/  | /' "$t/out" | tail -5; return 1; fi
    if grep -q "^step " "$t/out"; then flunk "$what" "it trained before refusing"; return 1; fi
}
expect() { # what, status, pattern, command...: the scenario WHAT
    scenario "$1" || return 0
    refused "$@" && { pass "$1"; echo "  $(grep -m1 -- "$3" "$t/out")"; }
}
verdict() { # what, the problems found ("" when none)
    if [ -z "$2" ]; then pass "$1"; else flunk "$1" "${2#; }"; fi
}
touch "$t/file"
mkfifo "$t/fifo"
mkdir "$t/dir"
expect "--save under a regular file" 2 "--save $t/file/c.st: the directory $t/file does not exist" \
    "$m" train $tiny --steps 50 --save "$t/file/c.st"
expect "--save to a directory" 2 "--save $t/dir is a directory, not a file" "$m" train $tiny --steps 50 --save "$t/dir"
expect "--report to a FIFO (no hang)" 2 "--report $t/fifo is not a regular file" "$m" train $tiny --steps 50 --report "$t/fifo"
expect "--save to a device" 2 "--save /dev/null is not a regular file" "$m" train $tiny --steps 50 --save /dev/null
"$m" data generate copy --tokens 2000 "$t/d.bin" >/dev/null 2>&1 || flunk "setup: data generate" "exit $?"
expect "--save over the --data file" 2 "--save $t/d.bin is the same file as --data $t/d.bin" \
    "$m" train $tiny --steps 50 --data "$t/d.bin" --save "$t/d.bin"
label="2 ranks, --save under a regular file: refused, the error printed once (rank 0)"
if scenario "$label"; then
    if refused "$label" 2 "the directory $t/file does not exist" \
        "$MPIEXEC" -n 2 "$m" train $tiny --dp 2 --steps 50 --save "$t/file/c.st"; then
        [ "$(grep -c 'does not exist' "$t/out")" = 1 ] && pass "$label" || flunk "$label" "the error must be printed once (rank 0)"
    fi
fi
# forward: --dump may not overwrite the weights or the tokens
"$m" train $tiny --steps 1 --save "$t/w.st" >/dev/null 2>&1 || flunk "setup: saving weights" "exit $?"
/usr/bin/python3 -c "import numpy as np; np.save('$t/x.npy', np.arange(8, dtype=np.int32).reshape(2, 4))" ||
    flunk "setup: writing tokens" "python failed"
cp "$t/w.st" "$t/w0.st"
label="forward --dump over --weights: refused, the weights unchanged"
if scenario "$label"; then
    if refused "$label" 2 "--dump $t/w.st is the same file as --weights $t/w.st" \
        "$m" forward --weights "$t/w.st" --tokens "$t/x.npy" --dump "$t/w.st"; then
        cmp -s "$t/w.st" "$t/w0.st" && pass "$label" || flunk "$label" "the weights file changed"
    fi
fi
expect "forward --report over --tokens" 2 "--report $t/x.npy is the same file as --tokens $t/x.npy" \
    "$m" forward --weights "$t/w.st" --tokens "$t/x.npy" --dump "$t/o.st" --report "$t/x.npy"
# resuming from a file and saving to it is allowed: the old file stays until the new one is complete
label="--resume X --save X: allowed, saves step 3"
if scenario "$label"; then
    if ! timeout 60 "$m" train $tiny --steps 2 --resume "$t/w.st" --save "$t/w.st" >"$t/out" 2>&1; then
        flunk "$label" "--resume X --save X failed"; cat "$t/out"
    elif ! grep -q "saved $t/w.st (step 3" "$t/out"; then flunk "$label" "--resume X --save X did not save step 3"; cat "$t/out"
    else pass "$label"; fi
fi

# ---- the atomic writer: through a symbolic link, never mixed, no stale temporary files -------
label="--save through a symbolic link: the link kept, its target holds the new checkpoint"
if scenario "$label"; then
    why=""
    "$m" train $tiny --steps 1 --save "$t/target.st" >/dev/null 2>&1 && ln -s "$t/target.st" "$t/link.st" || why="$why; making a link"
    timeout 60 "$m" train $tiny --steps 2 --save "$t/link.st" >"$t/out" 2>&1 || why="$why; saving through a link"
    [ -L "$t/link.st" ] || why="$why; the link was replaced by a file"
    grep -q "step 2" <(/usr/bin/python3 -c "import json,struct,sys; b=open(sys.argv[1],'rb').read(); n=struct.unpack('<Q',b[:8])[0]; print('step', json.loads(b[8:8+n])['__metadata__']['step'])" "$t/target.st") ||
        why="$why; the link's target does not hold the new checkpoint"
    verdict "$label" "$why"
fi
label="three concurrent savers: a dead writer's and their own temporary files gone, a checkpoint that resumes"
if scenario "$label"; then
    why=""
    sleep 0 & dead=$!; wait $dead                                # a pid that no longer runs
    touch "$t/c.st.tmp.$dead.0"                                   # what a killed writer leaves behind
    for i in 1 2 3; do "$m" train $tiny --steps 3 --seed $i --save "$t/c.st" >/dev/null 2>&1 & done; wait
    [ ! -e "$t/c.st.tmp.$dead.0" ] || why="$why; a dead writer's temporary file is still there"
    ls "$t" | grep -q "c.st.tmp" && why="$why; temporary files left: $(ls "$t" | grep c.st.tmp)"
    timeout 60 "$m" train $tiny --steps 1 --resume "$t/c.st" --force-seed >"$t/out" 2>&1 ||
        { why="$why; three concurrent savers left a checkpoint that does not resume"; tail -3 "$t/out"; }
    verdict "$label" "$why"
fi

# ---- a FIFO given as an input is refused at once (no open that waits for a writer) -----------
for o in --data --resume --device-file; do
    expect "$o FIFO (no hang)" 1 "$t/fifo: not a regular file" "$m" train $tiny --steps 1 $o "$t/fifo"
done
expect "forward --tokens FIFO (no hang)" 1 "$t/fifo: not a regular file" \
    "$m" forward --weights "$t/w.st" --tokens "$t/fifo" --dump "$t/o2.st"

# ---- a tiny weights file naming a huge model is refused before anything is allocated ----------
label="a 9 KB file naming h.199, under a 1 GB address-space limit"
if scenario "$label"; then
    /usr/bin/python3 -c "import numpy as np; np.save('$t/x1.npy', np.zeros((1, 1), dtype=np.int32))" || flunk "setup: x1" "python failed"
    /usr/bin/python3 - "$t/h199.st" <<'EOF' || flunk "setup: writing h199.st" "python failed"
import json, struct, sys
# V=1, T=1, C=768: 6 KB of data, but 200 layers of C=768 would be 1.4 G parameters
ts = {"wte.weight": [1, 768], "wpe.weight": [1, 768], "h.199.ln_1.weight": [768]}
hdr, off, data = {"__metadata__": {"n_head": "12"}}, 0, b""
for k, sh in ts.items():
    n = 4
    for d in sh: n *= d
    hdr[k] = {"dtype": "F32", "shape": sh, "data_offsets": [off, off + n]}; off += n; data += b"\0" * n
h = json.dumps(hdr).encode(); h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + data)
EOF
    # (the sanitizer's shadow memory cannot live under an address-space limit: that build runs without)
    lim="ulimit -v 1000000;"
    [ "${SANITIZE:-0}" = 1 ] && lim=""
    expect "$label" 1 "no tensor 'h.0.ln_1.weight' (the file's names imply L=200" \
        bash -c "$lim exec '$m' forward --weights '$t/h199.st' --tokens '$t/x1.npy' --dump '$t/o3.st'"
fi

# ---- reports, shards and their vocabularies go through the same writer -----------------------
label="--report and data generate through links: the links kept, their targets written, no temporary files"
if scenario "$label"; then
    why=""
    touch "$t/rt.json" && ln -s "$t/rt.json" "$t/rl.json" && touch "$t/dt.bin" && ln -s "$t/dt.bin" "$t/dl.bin"
    timeout 60 "$m" train $tiny --steps 1 --report "$t/rl.json" >/dev/null 2>&1 || why="$why; --report through a link"
    "$m" data generate copy --tokens 500 "$t/dl.bin" >/dev/null 2>&1 || why="$why; data generate through a link"
    [ -L "$t/rl.json" ] && [ -L "$t/dl.bin" ] || why="$why; a link was replaced by a file"
    [ -s "$t/rt.json" ] && [ -s "$t/dt.bin" ] || why="$why; the links' targets were not written"
    ls "$t" | grep -q "\.tmp\." && why="$why; temporary files left: $(ls "$t" | grep '\.tmp\.')"
    verdict "$label" "$why"
fi
exit $fail
