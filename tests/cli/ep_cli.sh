#!/bin/bash
# Mixture of experts and expert parallelism: e = 1, 2, 4 with E = 4 and 8, k = 1 and 2, dropless
# and with capacity (both drop policies), composed with dp and tp (with and without SP), each
# run passing --check-serial (the loss every step and the parameters at the end against the
# serial model on the same global batch) and --check-replicas (dense tensors over the dense
# group, experts over their expert-data-parallel group), its per-step MoE line equal to serial's
# (the same tokens per expert and drops: the routing depends on the global batch only); under
# --exact byte-identical checkpoints to serial, also with cp, pp and zb-h1; a saved MoE checkpoint
# read back by minidc forward; bad configurations refused before any message (exit 2, the option
# named); the --report file's MoE figures the mesh's sums (equal to serial's).
# Each mesh and each refusal is a scenario (tests/cli/scenario.sh); a serial run that scenarios
# compare with runs when one of them is selected.
. "$(dirname "$0")/scenario.sh"
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
bin=$BUILD/minidc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
model="--vocab 384 --ctx 32 --layers 2 --heads 4 --channels 32 --batch 8 --seq 32 --steps 2 --seed 5 --moe-z-loss 0.001"
run() { # name ranks args...
    local name=$1 n=$2; shift 2
    timeout -k 5 120 "$MPIEXEC" -n "$n" "$bin" train $model "$@" >"$tmp/$name.out" 2>&1
    rc=$?
}
moe_lines() { grep "^  moe:" "$1" | sed 's/  a2a .*//; s/  etp .*//'; } # routing figures, without the mesh's bytes
any() { local l; for l; do scenario "$l" && return 0; done; return 1; } # labels...: one is selected
i=0
specs=("2 --dp 2 --ep 2" "4 --dp 4 --ep 4" "4 --dp 4 --ep 2" "4 --dp 2 --ep 2 --tp 2" "4 --dp 2 --tp 2")
for moe in "--experts 4 --topk 1" "--experts 4 --topk 2 --capacity-factor 1.0 --moe-aux-loss 0.01" \
    "--experts 8 --topk 2 --capacity-factor 1.25 --moe-drop probs --moe-renorm" "--experts 8 --topk 1 --moe-aux-loss 0.01"; do
    i=$((i + 1))
    labels=()
    for spec in "${specs[@]}"; do labels+=("${spec#* } $moe: equal to serial, the same routing and drops"); done
    any "${labels[@]}" || continue
    run ser$i 1 $moe
    [ $rc = 0 ] || { flunk "serial $moe (the reference of its meshes)" "exit $rc"; tail -3 "$tmp/ser$i.out"; continue; }
    for spec in "${specs[@]}"; do
        set -- $spec; n=$1; shift
        label="$* $moe: equal to serial, the same routing and drops"
        scenario "$label" || continue
        run ep$i "$n" "$@" $moe --check-serial --check-replicas
        if [ $rc = 0 ] && grep -q "check-serial: .*: ok" "$tmp/ep$i.out" && [ "$(moe_lines "$tmp/ep$i.out")" = "$(moe_lines "$tmp/ser$i.out")" ] &&
            { [[ "$*" != *--ep* ]] || grep -q "a2a [1-9]" "$tmp/ep$i.out"; }; then
            pass "$label"
        else flunk "$label" "exit $rc"; grep -E "check-serial|moe:|error|differs" "$tmp/ep$i.out" | head -6; fi
    done
done
label="--dp 2 --ep 2 --tp 2 --sp: equal to serial"
if scenario "$label"; then
    run sp 4 --dp 2 --ep 2 --tp 2 --sp --experts 4 --topk 2 --check-serial --check-replicas
    if [ $rc = 0 ] && grep -q "check-serial: .*: ok" "$tmp/sp.out"; then pass "$label"
    else flunk "$label" "with SP: exit $rc"; tail -3 "$tmp/sp.out"; fi
fi

# exact mode: byte-identical checkpoints to serial's, with drops and the aux losses
xm="--experts 4 --topk 2 --capacity-factor 1.0 --moe-aux-loss 0.01 --exact-block 8 --dropout 0.1"
xspecs=("2 --dp 2 --ep 2" "4 --dp 4 --ep 4" "4 --dp 4 --ep 2" "4 --dp 2 --ep 2 --tp 2" "4 --dp 4 --ep 2 --accum 2"
    "4 --dp 2 --ep 2 --pp 2 --microbatches 2" "2 --pp 2 --microbatches 2 --schedule zb-h1")
forward="minidc forward reads the MoE checkpoint"
labels=("$forward")
for spec in "${xspecs[@]}"; do labels+=("exact, ${spec#* }: byte-identical to serial"); done
if any "${labels[@]}"; then
    run xser 1 $xm --save "$tmp/serial.st"
    [ $rc = 0 ] || { flunk "serial exact run (the reference of the exact scenarios)" "exit $rc"; tail -3 "$tmp/xser.out"; exit 1; }
fi
for spec in "${xspecs[@]}"; do
    set -- $spec; n=$1; shift; i=$((i + 1))
    label="exact, $*: byte-identical to serial"
    scenario "$label" || continue
    run x$i "$n" "$@" $xm --save "$tmp/x$i.st"
    if [ $rc = 0 ] && cmp -s "$tmp/serial.st" "$tmp/x$i.st"; then pass "$label"
    else flunk "$label" "exit $rc or the checkpoint differs"; tail -3 "$tmp/x$i.out"; fi
done
# dropless (SP and CP split the sequences: capacity and the aux loss need whole ones)
xd="--experts 8 --topk 2 --exact-block 8"
dspecs=("4 --dp 2 --ep 2 --tp 2 --sp" "4 --dp 2 --ep 2 --cp 2" "4 --dp 4 --ep 4")
labels=()
for spec in "${dspecs[@]}"; do labels+=("exact dropless, ${spec#* }: byte-identical to serial"); done
any "${labels[@]}" && run xdser 1 $xd --save "$tmp/serial_d.st"
for spec in "${dspecs[@]}"; do
    set -- $spec; n=$1; shift; i=$((i + 1))
    label="exact dropless, $*: byte-identical to serial"
    scenario "$label" || continue
    run x$i "$n" "$@" $xd --save "$tmp/x$i.st"
    if [ $rc = 0 ] && cmp -s "$tmp/serial_d.st" "$tmp/x$i.st"; then pass "$label"
    else flunk "$label" "exit $rc or the checkpoint differs"; tail -3 "$tmp/x$i.out"; fi
done

# every scheme at once on 64 ranks (2 cores): tp 2 + SP, cp 2, pp 2, dp 8 of which ep 2, on a MoE
# model, byte-identical to serial
label="exact, 64 ranks (tp 2 sp, cp 2, pp 2, dp 8 with ep 2): byte-identical to serial"
if scenario "$label"; then
    big="--vocab 256 --ctx 32 --layers 4 --heads 4 --channels 32 --batch 16 --seq 32 --steps 2 --seed 3 --quiet"
    big="$big --experts 4 --topk 2 --moe-z-loss 0.001 --exact-block 4"
    timeout -k 5 100 "$MPIEXEC" -n 1 "$bin" train $big --save "$tmp/big1.st" >"$tmp/big1.out" 2>&1
    timeout -k 5 240 "$MPIEXEC" -n 64 "$bin" train $big --tp 2 --sp --cp 2 --pp 2 --microbatches 2 --dp 8 --ep 2 \
        --save "$tmp/big64.st" >"$tmp/big64.out" 2>&1
    rc=$?
    if [ $rc = 0 ] && cmp -s "$tmp/big1.st" "$tmp/big64.st"; then pass "$label"
    else flunk "$label" "64 ranks: exit $rc or the checkpoint differs"; tail -3 "$tmp/big64.out"; fi
fi

# resume: 2 serial steps continued for 2 on ep 2 give the checkpoint of 4 serial steps
resumed="exact, a serial checkpoint resumed on --dp 2 --ep 2: byte-identical to 4 serial steps"
topk="resume with another --topk refused"
any "$resumed" "$topk" && run s2 1 $xm --save "$tmp/s2.st"
if scenario "$resumed"; then
    run s4 1 $xm --steps 4 --save "$tmp/s4.st"
    run r4 2 $xm --dp 2 --ep 2 --resume "$tmp/s2.st" --save "$tmp/r4.st"
    if [ $rc = 0 ] && cmp -s "$tmp/s4.st" "$tmp/r4.st"; then pass "$resumed"
    else flunk "$resumed" "resume on ep 2: exit $rc or the checkpoint differs"; tail -3 "$tmp/r4.out"; fi
fi
if scenario "$topk"; then
    run rk 1 $xm --topk 1 --resume "$tmp/s2.st"
    if [ $rc != 0 ] && grep -q "moe_topk (--topk) = 2 but the model has 1" "$tmp/rk.out"; then pass "$topk"
    else flunk "$topk" "exit $rc"; tail -2 "$tmp/rk.out"; fi
fi

# aux-loss-free balancing: the bias moves the routing (the digest differs from a run without it),
# every mesh updates it alike (byte-identical checkpoints, the biases in them), and it resumes
label="--moe-bias-rate: the routing moves; ep 2 and a resumed run byte-identical to serial"
if scenario "$label"; then
    xb="--experts 4 --topk 2 --exact-block 8 --steps 6 --moe-bias-rate 0.01"
    run b0 1 $xb --moe-bias-rate 0 --save "$tmp/b0.st"
    run b1 1 $xb --save "$tmp/b1.st"
    run b2 4 $xb --dp 4 --ep 2 --save "$tmp/b2.st"
    run b3 1 $xb --steps 3 --save "$tmp/b3.st"
    run b4 2 $xb --steps 3 --dp 2 --ep 2 --resume "$tmp/b3.st" --save "$tmp/b4.st"
    if [ "$(moe_lines "$tmp/b0.out" | tail -1)" != "$(moe_lines "$tmp/b1.out" | tail -1)" ] && cmp -s "$tmp/b1.st" "$tmp/b2.st" &&
        cmp -s "$tmp/b1.st" "$tmp/b4.st"; then pass "$label"
    else flunk "$label" "exit $rc"; tail -2 "$tmp/b4.out"; fi
fi

# the checkpoint is a MoE GPT-2 file: minidc forward infers E and the MoE blocks from its names
if scenario "$forward"; then
    if ! /usr/bin/python3 - "$tmp" <<'EOF'
import sys, numpy as np
rng = np.random.default_rng(0)
np.save(sys.argv[1] + "/x.npy", rng.integers(0, 384, (2, 16)).astype(np.int64))
np.save(sys.argv[1] + "/y.npy", rng.integers(0, 384, (2, 16)).astype(np.int32))
EOF
    then flunk "$forward" "writing the forward inputs"
    else
        out=$("$bin" forward --weights "$tmp/serial.st" --tokens "$tmp/x.npy" --targets "$tmp/y.npy" --dump "$tmp/d.st" \
            --capacity-factor 1.0 2>&1)
        if [ $? = 0 ] && [[ "$out" == *"loss "* ]]; then pass "$forward"; echo "  ${out%%;*}"
        else flunk "$forward" "forward on the MoE checkpoint: $out"; fi
    fi
fi

# the --report file's MoE figures are the mesh's sums, as the MoE line: equal to serial's
label="--report JSON on --dp 2 --ep 2 --tp 2 --sp: tokens per expert, drops, aux and z sums and digest equal serial's"
if scenario "$label"; then
    run jser 1 --experts 4 --topk 2 --report "$tmp/jser.json"
    run jmesh 4 --experts 4 --topk 2 --dp 2 --ep 2 --tp 2 --sp --report "$tmp/jmesh.json"
    if [ $rc = 0 ] && /usr/bin/python3 - "$tmp/jser.json" "$tmp/jmesh.json" <<'EOF'
import json, sys
a, b = (json.load(open(f))["schemes"]["moe"] for f in sys.argv[1:])
bad = [k for k in ["tokens_per_expert", "dropped", "routing_digest"] if a[k] != b[k]]
bad += [k for k in ["aux_sum", "z_sum"] if abs(a[k] - b[k]) > 1e-5 * max(1, abs(a[k]))]
sys.exit(f"differ: {bad}: {a} {b}" if bad else 0)
EOF
    then pass "$label"; else flunk "$label" "exit $rc"; fi
fi

# refusals: exit 2 on every rank, the option named, before any step
refuse() { # expect ranks args...
    local want=$1 n=$2; shift 2
    local label="refused: $*"
    scenario "$label" || return 0
    out=$(timeout -k 5 60 "$MPIEXEC" -n "$n" "$bin" train $model "$@" 2>&1); rc=$?
    if [ $rc = 2 ] && [[ "$out" == *"$want"* ]] && [[ "$out" != *"step "* ]]; then pass "$label"
    else flunk "$label" "exit $rc, want 2 and '$want': $(echo "$out" | tail -2)"; fi
}
refuse "--ep 3 does not divide --dp 2" 2 --dp 2 --ep 3 --experts 6
refuse "does not divide --experts 6" 4 --dp 4 --ep 4 --experts 6
refuse "expert parallelism needs a mixture of experts" 2 --dp 2 --ep 2
refuse "--zero 1" 2 --dp 2 --ep 2 --experts 4 --zero 1
refuse "--topk 5" 1 --experts 4 --topk 5
refuse "--moe-drop 'first'" 1 --experts 4 --moe-drop first
refuse "route a whole sequence as one group" 2 --tp 2 --sp --experts 4 --capacity-factor 1
refuse "--capacity-factor" 1 --experts 4 --capacity-factor -1
exit $fail
