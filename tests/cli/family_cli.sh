#!/bin/bash
# The Llama, Qwen2 and Qwen3 families on the mesh: each family's small config on tp 2, tp 2 with
# SP, dp 2 with ZeRO-3, pp 2, tp 4 (more tp ranks than kv heads: each kv head on two) and cp 2
# (ring, zigzag; rotary positions at global positions) equal to serial (--check-serial), exact
# mode on each bit for bit; the all-gather and Ulysses algorithms, interleaved pipelines and
# 8-rank meshes of several axes; the MoE families on ep, DeepSeek-V3 routing and transformers'
# global-batch aux loss on every axis, and expert tensor parallelism (--etp: exact bit for bit,
# its bytes against their formula, its checkpoint serial's); Ulysses over too few kv heads, bad
# --etp values and routing settings refused by name; a run saved as a Hugging Face directory read
# back by forward, and resumed from it bit for bit. Each is a scenario (tests/cli/scenario.sh);
# `family_cli.sh long` (make check-long) runs the long tier: Llama and Qwen2 beyond tp 2 with SP
# (Qwen3, with every feature, is in the core) and more meshes of the MoE checks.
. "$(dirname "$0")/scenario.sh"
[ "${1:-}" = long ] && TIER=long # make check-long: the long tier (more meshes of the same checks)
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
bin=$BUILD/minidc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
run() { # ranks args...
    local n=$1; shift
    timeout -k 5 120 "$MPIEXEC" -n "$n" "$bin" train "$@" >"$tmp/out" 2>&1
    rc=$?
}
parity() { # what want ranks args...: the run exits 0 and prints want
    local what=$1 want=$2; shift 2
    scenario "$what" || return 0
    run "$@" --steps 3 --quiet --check-serial
    if [ $rc != 0 ]; then flunk "$what" "exit $rc"; cat "$tmp/out"; return; fi
    if ! grep -q -- "$want" "$tmp/out"; then flunk "$what" "no '$want' in:"; grep check-serial "$tmp/out"; return; fi
    pass "$what"; echo "  $(grep -m1 check-serial "$tmp/out" | cut -c1-150)"
}
long_parity() { # the same as parity, in the long tier (make check-long): meshes the core's others cover
    local was=$tier
    tier=long
    parity "$@"
    tier=$was
}
near="within the limits"
same="identical to serial bit for bit: ok"
for c in llama-tiny qwen2-tiny qwen3-tiny; do
    parity "$c: --tp 2 --sp equals serial" "$near" 2 --config $c --tp 2 --sp
    [ $c = qwen3-tiny ] || tier=long # the others' other meshes: the long tier (qwen3-tiny has every feature)
    parity "$c: exact, --tp 2 --sp bit for bit" "$same" 2 --config $c --tp 2 --sp --exact
    long_parity "$c: --tp 2 equals serial" "$near" 2 --config $c --tp 2
    parity "$c: --dp 2 --zero 3 equals serial" "$near" 2 --config $c --dp 2 --zero 3
    long_parity "$c: --pp 2 equals serial" "$near" 2 --config $c --pp 2
    parity "$c: exact, --pp 2 --dp 2 bit for bit" "$same" 4 --config $c --pp 2 --dp 2 --exact
    parity "$c: exact, --tp 4 (2 kv heads, each on 2 ranks) bit for bit" "$same" 4 --config $c --tp 4 --exact
    long_parity "$c: --cp 2 (ring, zigzag) equals serial" "$near" 2 --config $c --cp 2
    parity "$c: exact, --cp 2 (ring, zigzag) bit for bit" "$same" 2 --config $c --cp 2 --exact
    tier=core
done
# odd sizes: a vocabulary padded (700 to 768), GQA 3 with one kv head (on every tp rank), head_dim
# 40 != C/H = 32, intermediate_size 201, every bias, an untied head, llama3 scaling
cat >"$tmp/odd.json" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 700, "hidden_size": 96,
 "intermediate_size": 201, "num_hidden_layers": 2, "num_attention_heads": 3, "num_key_value_heads": 1,
 "head_dim": 40, "max_position_embeddings": 48, "rms_norm_eps": 1e-05, "rope_theta": 500000,
 "rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4,
                  "original_max_position_embeddings": 16},
 "tie_word_embeddings": false, "attention_bias": true, "mlp_bias": true, "hidden_act": "silu"}
JSON
parity "odd llama: --tp 3 (one kv head on 3 ranks) equals serial, replicas agree" "$near" 3 --config "$tmp/odd.json" --tp 3 --sp --check-replicas
parity "odd llama: exact, --tp 3 --sp bit for bit" "$same" 3 --config "$tmp/odd.json" --tp 3 --sp --exact --exact-block 4
parity "odd llama: exact, --tp 3 --cp 2 bit for bit" "$same" 6 --config "$tmp/odd.json" --tp 3 --cp 2 --exact
long_parity "odd llama: --pp 2 --dp 2 --zero 3 equals serial" "$near" 4 --config "$tmp/odd.json" --pp 2 --dp 2 --zero 3
parity "odd llama: exact, --pp 2 interleaved, --dp 2 --zero 3 bit for bit" "$same" 4 --config "$tmp/odd.json" --layers 4 --pp 2 --schedule interleaved --virtual-stages 2 --accum 4 --dp 2 --zero 3 --exact
parity "llama-tiny: exact, --cp 2 all-gather bit for bit" "$same" 2 --config llama-tiny --cp 2 --cp-algo allgather --exact
parity "qwen2-tiny: --cp 2 ulysses equals serial" "$near" 2 --config qwen2-tiny --cp 2 --cp-algo ulysses
parity "qwen3-tiny: exact, --cp 2 ulysses bit for bit" "$same" 2 --config qwen3-tiny --cp 2 --cp-algo ulysses --exact
long_parity "qwen3-tiny: exact, --cp 2 --tp 4 (shared kv heads under the ring) bit for bit" "$same" 8 --config qwen3-tiny --cp 2 --tp 4 --exact
long_parity "llama-tiny: --pp 2 interleaved (2 chunks a stage) equals serial" "$near" 2 --config llama-tiny --layers 4 --pp 2 --schedule interleaved --virtual-stages 2 --accum 4
parity "llama-tiny: exact, --pp 2 interleaved bit for bit" "$same" 2 --config llama-tiny --layers 4 --pp 2 --schedule interleaved --virtual-stages 2 --accum 4 --exact
parity "qwen3-tiny: exact, --pp 2 zb-h1 bit for bit" "$same" 2 --config qwen3-tiny --pp 2 --schedule zb-h1 --accum 4 --exact
long_parity "qwen2-tiny: exact, --dp 2 --zero 3 bit for bit" "$same" 2 --config qwen2-tiny --dp 2 --zero 3 --exact
long_parity "qwen3-tiny: exact, 8 ranks --tp 2 --cp 2 --pp 2 bit for bit" "$same" 8 --config qwen3-tiny --tp 2 --cp 2 --pp 2 --exact
long_parity "llama-tiny: 8 ranks --tp 2 --sp --cp 2 --dp 2 --zero 3 equals serial" "$near" 8 --config llama-tiny --tp 2 --sp --cp 2 --dp 2 --zero 3
parity "llama-tiny: --tp 4 (each kv head on 2 ranks) equals serial, replicas agree" "$near" 4 --config llama-tiny --tp 4 --check-replicas
long_parity "qwen3-tiny: --tp 4 --sp (each kv head on 2 ranks) equals serial" "$near" 4 --config qwen3-tiny --tp 4 --sp

tier=long # the same, on more meshes
parity "deepseek-moe-tiny: exact, --pp 2 --cp 2 bit for bit" "$same" 4 --config deepseek-moe-tiny --pp 2 --cp 2 --exact
parity "mixtral-tiny aux loss: --ep 2 --dp 2 equals serial" "$near" 2 --config mixtral-tiny --router-aux-loss 0.02 --ep 2 --dp 2
tier=core

# the MoE families: Mixtral (every block sparse, gates renormalized), Qwen3-MoE (block 0 dense,
# block 1 sparse, raw gates) and Qwen2-MoE on expert parallelism, tp x ep, SP, pp and cp
parity "mixtral-tiny: --ep 2 --dp 2 equals serial, replicas agree" "$near" 2 --config mixtral-tiny --ep 2 --dp 2 --check-replicas
long_parity "mixtral-tiny: exact, --ep 2 --dp 2 --tp 2 --sp bit for bit" "$same" 4 --config mixtral-tiny --ep 2 --dp 2 --tp 2 --sp --exact
parity "qwen3-moe-tiny: --tp 2 --sp equals serial" "$near" 2 --config qwen3-moe-tiny --tp 2 --sp
parity "qwen3-moe-tiny: exact, --ep 2 --dp 2 --pp 2 bit for bit" "$same" 4 --config qwen3-moe-tiny --ep 2 --dp 2 --pp 2 --exact
long_parity "qwen3-moe-tiny: exact, --cp 2 --ep 2 --dp 2 bit for bit" "$same" 4 --config qwen3-moe-tiny --cp 2 --ep 2 --dp 2 --exact
# Qwen2-MoE: a sigmoid-gated shared expert beside the routed ones (replicated over ep; its gate|up
# column- and its down row-parallel over tp like the dense MLP, its sigmoid gate replicated)
parity "qwen2-moe-tiny: --ep 2 --dp 2 equals serial, replicas agree" "$near" 2 --config qwen2-moe-tiny --ep 2 --dp 2 --check-replicas
parity "qwen2-moe-tiny: exact, --tp 2 --sp --ep 2 --dp 2 bit for bit" "$same" 4 --config qwen2-moe-tiny --tp 2 --sp --ep 2 --dp 2 --exact
long_parity "qwen2-moe-tiny: exact, --cp 2 --pp 2 bit for bit" "$same" 4 --config qwen2-moe-tiny --cp 2 --pp 2 --exact
parity "qwen2-moe-tiny: exact, --tp 2 (the shared expert split over tp) bit for bit, replicas agree" "$same" 2 --config qwen2-moe-tiny --tp 2 --exact --check-replicas
figures() { # what ranks args...: the tp report's collectives, parameters and partial gradients equal to their formulas
    local what=$1; shift
    scenario "$what" || return 0
    run "$@" --steps 2
    local part=$(grep -m1 "partial gradients" "$tmp/out" | sed -nE 's/.* ([0-9]+) bytes; formula .* beta = ([0-9]+) .*/\1 \2/p')
    if [ $rc != 0 ]; then flunk "$what" "exit $rc"; tail -3 "$tmp/out"
    elif grep -q DIFFERS "$tmp/out" || ! grep -q "parameters per rank: .* ok" "$tmp/out"; then
        flunk "$what" "a figure differs:"; grep -E "DIFFERS|parameters per rank" "$tmp/out"
    elif [ -n "$part" ] && [ "${part% *}" != "${part#* }" ]; then flunk "$what" "partial gradients: $part"
    else pass "$what"; fi
}
figures "qwen2-moe-tiny --tp 2 --sp --ep 2: the shared expert's f and g counted, every tp figure equal to its formula" 4 --config qwen2-moe-tiny --tp 2 --sp --ep 2
figures "deepseek-moe-tiny --tp 2 --etp 2 --pp 2 --exact: every tp figure equal to its formula" 4 --config deepseek-moe-tiny --tp 2 --etp 2 --pp 2 --exact
figures "gpt-2 moe --tp 2 --sp: routers and whole experts among the partial gradients, equal to the formula" 2 --config tiny --experts 4 --tp 2 --sp
# DeepSeek-V3 routing (sigmoid, group-limited, scaled; an ungated shared expert; block 0 dense) and
# transformers' aux loss over the global batch (a counting forward per step) on every axis
parity "deepseek-moe-tiny: --ep 2 --dp 2 equals serial, replicas agree" "$near" 2 --config deepseek-moe-tiny --ep 2 --dp 2 --check-replicas
long_parity "deepseek-moe-tiny: --tp 2 --sp equals serial" "$near" 2 --config deepseek-moe-tiny --tp 2 --sp
long_parity "deepseek-moe-tiny: exact, --ep 4 --dp 4 bit for bit" "$same" 4 --config deepseek-moe-tiny --ep 4 --dp 4 --exact
parity "deepseek-moe-tiny with Switch's aux loss, the z-loss, capacity 1.25 by score: exact, --ep 2 --dp 2 --tp 2 bit for bit" "$same" 4 --config deepseek-moe-tiny --moe-aux-loss 0.01 --moe-z-loss 0.001 --capacity-factor 1.25 --moe-drop probs --ep 2 --dp 2 --tp 2 --exact
parity "qwen3-moe-tiny --router deepseek (3 groups of 2, keep 2): exact, --ep 3 --dp 3 bit for bit" "$same" 3 --config qwen3-moe-tiny --router deepseek --router-groups 3 --router-topk-groups 2 --routed-scaling 1.5 --shared-experts 2 --moe-bias-rate 0.01 --ep 3 --dp 3 --exact
parity "mixtral-tiny aux loss: exact, --ep 2 --dp 2 --tp 2 --sp bit for bit" "$same" 4 --config mixtral-tiny --router-aux-loss 0.02 --ep 2 --dp 2 --tp 2 --sp --exact
parity "deepseek-moe-tiny aux loss: exact, --pp 2 interleaved --cp 2 bit for bit" "$same" 4 --config deepseek-moe-tiny --router-aux-loss 0.02 --layers 4 --pp 2 --schedule interleaved --virtual-stages 2 --microbatches 4 --cp 2 --exact
long_parity "mixtral-tiny aux loss: --pp 2 (1F1B, 4 micro-batches) --dp 2 equals serial" "$near" 4 --config mixtral-tiny --router-aux-loss 0.02 --layers 4 --pp 2 --microbatches 4 --dp 2
long_parity "deepseek-moe-tiny aux loss: exact, --dp 2 --zero 3 --tp 2 bit for bit" "$same" 4 --config deepseek-moe-tiny --router-aux-loss 0.02 --dp 2 --zero 3 --tp 2 --exact
parity "deepseek-moe-tiny aux loss: exact, 16 ranks --tp 2 --etp 2 --sp --ep 2 --dp 2 --pp 2 --cp 2 bit for bit" "$same" 16 --config deepseek-moe-tiny --batch 8 --router-aux-loss 0.02 --tp 2 --etp 2 --sp --ep 2 --dp 2 --pp 2 --cp 2 --exact
long_parity "qwen2-moe-tiny: 16 ranks --tp 2 --sp --ep 2 --dp 2 --pp 2 --cp 2 equals serial" "$near" 16 --config qwen2-moe-tiny --tp 2 --sp --ep 2 --dp 2 --pp 2 --cp 2

# expert tensor parallelism (--etp): each routed expert's gate/up column- and its down row-parallel
# over etp consecutive tp ranks; with SP the members' rows gathered and the partial sums scattered
# back, without it one allreduce; the shards' gradients summed over the tp ranks of one etp rank
# with SP (tp 4, etp 2); GPT-2's experts (c_fc bias sharded, c_proj bias after the sum)
parity "mixtral-tiny: --tp 2 --sp --etp 2 equals serial, replicas agree" "$near" 2 --config mixtral-tiny --tp 2 --sp --etp 2 --check-replicas
long_parity "mixtral-tiny: exact, --tp 2 --etp 2 bit for bit" "$same" 2 --config mixtral-tiny --tp 2 --etp 2 --exact
long_parity "mixtral-tiny: exact, --tp 2 --sp --etp 2 bit for bit" "$same" 2 --config mixtral-tiny --tp 2 --sp --etp 2 --exact
parity "mixtral-tiny: exact, --tp 2 --sp --etp 2 --ep 2 --dp 2 bit for bit, replicas agree" "$same" 4 --config mixtral-tiny --tp 2 --sp --etp 2 --ep 2 --dp 2 --exact --check-replicas
parity "mixtral-tiny: --tp 4 --etp 2 (two etp groups of the same tokens) equals serial, replicas agree" "$near" 4 --config mixtral-tiny --tp 4 --etp 2 --check-replicas
parity "qwen3-moe-tiny: exact, --tp 4 --sp --etp 2 (shards summed over 2 tp ranks) bit for bit, replicas agree" "$same" 4 --config qwen3-moe-tiny --tp 4 --sp --etp 2 --exact --check-replicas
parity "qwen2-moe-tiny: exact, --tp 2 --sp --etp 2 --dp 2 --zero 3 bit for bit" "$same" 4 --config qwen2-moe-tiny --tp 2 --sp --etp 2 --dp 2 --zero 3 --exact
long_parity "gpt-2 moe: exact, --tp 2 --sp --etp 2 bit for bit" "$same" 2 --config tiny --experts 4 --tp 2 --sp --etp 2 --exact
tier=long # the same, on more meshes
parity "mixtral-tiny: --tp 2 --etp 2 equals serial" "$near" 2 --config mixtral-tiny --tp 2 --etp 2
parity "gpt-2 moe: --tp 2 --etp 2 equals serial" "$near" 2 --config tiny --experts 4 --tp 2 --etp 2
parity "mixtral-tiny: exact, 16 ranks --tp 2 --etp 2 --sp --ep 2 --dp 2 --pp 2 --cp 2 bit for bit" "$same" 16 --config mixtral-tiny --batch 8 --tp 2 --etp 2 --sp --ep 2 --dp 2 --pp 2 --cp 2 --exact
tier=core
# the etp line: each step's gathers and sums, per rank, equal to the ring's formula
etp_bytes() { # what ranks args...
    local what=$1; shift
    scenario "$what" || return 0
    run "$@" --steps 1 --quiet
    local l=$(grep -m1 "^  moe:" "$tmp/out" | sed -n 's/.*  etp [0-9]* [A-Z+]* \([0-9]*\) B\/rank (.* = \([0-9]*\), R = .*/\1 \2/p')
    set -- $l
    if [ $rc != 0 ] || [ -z "$l" ] || [ "$1" != "$2" ]; then flunk "$what" "exit $rc, measured and formula '$l':"; grep "moe:" "$tmp/out" | head -2; return; fi
    pass "$what"; echo "  $(grep -m1 "^  moe:" "$tmp/out" | sed 's/.*  etp/etp/' | cut -c1-150)"
}
etp_bytes "mixtral-tiny --tp 2 --sp --etp 2: the etp bytes equal AG + RS's formula" 2 --config mixtral-tiny --tp 2 --sp --etp 2
etp_bytes "qwen3-moe-tiny --tp 4 --etp 4: the etp bytes equal AR's formula" 4 --config qwen3-moe-tiny --tp 4 --etp 4
etp_bytes "mixtral-tiny exact --tp 2 --sp --etp 2: the etp bytes equal the exact sums' formula" 2 --config mixtral-tiny --tp 2 --sp --etp 2 --exact
# the checkpoint holds the global tensors: an etp run's is serial's byte for byte, and resumes on another etp
if scenario "exact: an --etp 2 checkpoint is serial's, and a serial one resumes on --tp 4 --sp --etp 4"; then
    what="exact: an --etp 2 checkpoint is serial's, and a serial one resumes on --tp 4 --sp --etp 4"
    run 1 --config qwen3-moe-tiny --steps 2 --quiet --exact --save "$tmp/e1.st"
    run 2 --config qwen3-moe-tiny --tp 2 --etp 2 --steps 2 --quiet --exact --save "$tmp/e2.st"
    run 1 --config qwen3-moe-tiny --steps 4 --quiet --exact --save "$tmp/e4.st"
    run 4 --config qwen3-moe-tiny --tp 4 --sp --etp 4 --steps 2 --quiet --exact --resume "$tmp/e1.st" --save "$tmp/r4.st"
    if ! cmp -s "$tmp/e1.st" "$tmp/e2.st"; then flunk "$what" "the --etp 2 checkpoint differs from serial's"
    elif [ $rc != 0 ] || ! cmp -s "$tmp/e4.st" "$tmp/r4.st"; then flunk "$what" "resumed on --etp 4: exit $rc or not 4 serial steps"; tail -3 "$tmp/out"
    else pass "$what"; fi
fi

# exact mode's dumps: every site (rope_q, rope_k, q_norm, k_norm, the SwiGLU gate, up and product
# among them) and every gradient of a step, reassembled from the mesh, byte for byte the serial
# run's (a gradient can differ in bits that AdamW's update then rounds away: the parameters alone
# would not show it)
dumps_equal() { # what ranks config mesh-args...
    local what=$1 n=$2 cfg=$3; shift 3
    scenario "$what" || return 0
    rm -rf "$tmp/ds" "$tmp/dm"
    run 1 --config $cfg --steps 1 --quiet --exact --dump-dir "$tmp/ds"
    [ $rc = 0 ] && run "$n" --config $cfg "$@" --steps 1 --quiet --exact --dump-dir "$tmp/dm"
    if [ $rc != 0 ]; then flunk "$what" "exit $rc"; tail -5 "$tmp/out"; return; fi
    "$bin" compare "$tmp/ds" "$tmp/dm" --rtol 0 --atol 0 >"$tmp/cmp" 2>&1
    local crc=$?
    local sites=$(grep -c "attn.rope_q\|attn.k_norm\|mlp.gate \|mlp.product" "$tmp/cmp")
    if [ $crc != 0 ] || [ "$sites" -lt 12 ]; then flunk "$what" "compare exit $crc, $sites new sites:"; grep -v " 0 *0 *0 *0$" "$tmp/cmp" | head -5; return; fi
    pass "$what"; echo "  $(tail -1 "$tmp/cmp")"
}
dumps_equal "qwen3-tiny: exact dumps, --tp 2 --sp: every site and gradient bit for bit" 2 qwen3-tiny --tp 2 --sp
dumps_equal "qwen3-tiny: exact dumps, --tp 4 --cp 2: every site and gradient bit for bit" 8 qwen3-tiny --tp 4 --cp 2
dumps_equal "qwen3-moe-tiny: exact dumps, --ep 2 --dp 2 --tp 2: every site and gradient bit for bit" 4 qwen3-moe-tiny --ep 2 --dp 2 --tp 2
dumps_equal "deepseek-moe-tiny: exact dumps, --ep 2 --dp 2 --tp 2 --sp: scores, choices, gates, every site bit for bit" 4 deepseek-moe-tiny --ep 2 --dp 2 --tp 2 --sp

refused() { # what pattern ranks args...
    local what=$1 pat=$2; shift 2
    scenario "$what" || return 0
    run "$@" --steps 1
    if [ $rc = 0 ] || ! grep -q -- "$pat" "$tmp/out"; then flunk "$what" "exit $rc, want a refusal naming '$pat'"; cat "$tmp/out"; return; fi
    pass "$what"; echo "  $(grep -m1 -- "$pat" "$tmp/out")"
}
moe_json() { # extra keys: a small Mixtral config.json with them
    echo '{"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "vocab_size": 128, "hidden_size": 32,
 "intermediate_size": 40, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
 "max_position_embeddings": 16, "num_local_experts": 4, "num_experts_per_tok": 2'"$1"'}'
}
moe_json ', "scoring_func": "sigmoid", "topk_method": "greedy", "n_group": 2, "topk_group": 1' >"$tmp/greedy.json"
refused "DeepSeek routing other than noaux_tc refused by name" '"topk_method" is "greedy"' 1 --config "$tmp/greedy.json"
moe_json ', "scoring_func": "sigmoid", "topk_method": "noaux_tc", "n_group": 3, "topk_group": 1' >"$tmp/groups.json"
refused "n_group not dividing the experts refused by name" "n_group 3 must divide the 4 experts" 1 --config "$tmp/groups.json"
refused "GPT-2's MoE refuses the families' router options" "are a MoE family's" 1 --config tiny --experts 4 --router deepseek

# transformers' aux loss from config.json (output_router_logits, router_aux_loss_coef) is the
# one --router-aux-loss gives, and it is in the loss
if scenario "output_router_logits in config.json: the loss --router-aux-loss gives"; then
    what="output_router_logits in config.json: the loss --router-aux-loss gives"
    moe_json ', "output_router_logits": true, "router_aux_loss_coef": 0.5' >"$tmp/lb.json"
    moe_json '' >"$tmp/nolb.json"
    loss1() { grep -E '^step +1 ' "$tmp/out" | awk '{print $4}'; }
    run 1 --config "$tmp/lb.json" --steps 1 --seq 16 --batch 4 && a=$(loss1)
    run 1 --config "$tmp/nolb.json" --router-aux-loss 0.5 --steps 1 --seq 16 --batch 4 && b=$(loss1)
    run 1 --config "$tmp/nolb.json" --steps 1 --seq 16 --batch 4 && c=$(loss1)
    if [ -z "$a" ] || [ "$a" != "$b" ] || [ "$a" = "$c" ]; then flunk "$what" "losses: config $a, option $b, none $c"
    else pass "$what"; echo "  step 1 loss $a with the aux loss (0.5 x load_balancing_loss_func), $c without"; fi
fi
echo '{"model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"], "vocab_size": 128}' >"$tmp/ds.json"
refused "a deepseek_v3 config refused by name" "deepseek_v3\": its multi-head latent attention (MLA)" 1 --config "$tmp/ds.json"
refused "--etp 3 with --tp 2 refused by name" "--etp 3 does not divide --tp 2" 2 --config mixtral-tiny --tp 2 --etp 3
cat >"$tmp/q45.json" <<'JSON'
{"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "vocab_size": 128, "hidden_size": 32,
 "intermediate_size": 64, "moe_intermediate_size": 45, "num_hidden_layers": 2, "num_attention_heads": 2,
 "num_key_value_heads": 1, "head_dim": 16, "max_position_embeddings": 16, "num_experts": 4, "num_experts_per_tok": 2}
JSON
refused "--etp not dividing an expert's width refused by name" "--etp 2 does not divide an expert's width 45 (moe_intermediate_size)" 2 --config "$tmp/q45.json" --tp 2 --etp 2
refused "ulysses over fewer kv heads than cp ranks refused" "ulysses gives every cp rank whole kv heads" 4 --config qwen2-tiny --cp 2 --tp 2 --cp-algo ulysses

if scenario "--save DIR/: a directory forward reads, resumed bit for bit"; then
    what="--save DIR/: a directory forward reads, resumed bit for bit"
    run 1 --config qwen3-tiny --steps 4 --quiet && cp "$tmp/out" "$tmp/four"
    run 2 --config qwen3-tiny --tp 2 --steps 2 --quiet --save "$tmp/q3/"
    run 1 --config qwen3-tiny --steps 2 --quiet --resume "$tmp/q3/" && cp "$tmp/out" "$tmp/resumed"
    last() { grep -E '^step +4 ' "$1" | awk '{print $4, $6}'; }
    python3 -c 'import struct, sys
h = b"{\x27descr\x27: \x27<i4\x27, \x27fortran_order\x27: False, \x27shape\x27: (1, 4), }"
h += b" " * (63 - (10 + len(h)) % 64) + b"\n"
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + struct.pack("<4i", 3, 1, 4, 1))' "$tmp/x.npy"
    timeout 60 "$bin" forward --weights "$tmp/q3" --tokens "$tmp/x.npy" --targets "$tmp/x.npy" --dump "$tmp/d.st" >"$tmp/fwd" 2>&1
    frc=$?
    if [ ! -s "$tmp/q3/config.json" ] || [ ! -s "$tmp/q3/model.safetensors" ] || [ ! -s "$tmp/q3/training_state.safetensors" ]; then
        flunk "$what" "missing files: $(ls "$tmp/q3" 2>&1)"
    elif ! grep -q '"model_type": "qwen3"' "$tmp/q3/config.json"; then
        flunk "$what" "config.json: $(head -5 "$tmp/q3/config.json")"
    elif [ -z "$(last "$tmp/four")" ] || [ "$(last "$tmp/four")" != "$(last "$tmp/resumed")" ]; then
        flunk "$what" "step 4 after resuming '$(last "$tmp/resumed")', straight '$(last "$tmp/four")'"
    elif [ $frc != 0 ] || ! grep -aq "grad.model.layers.0.mlp.up_proj.weight" "$tmp/d.st"; then
        flunk "$what" "forward --weights DIR: exit $frc, no grad.model.layers.0.mlp.up_proj.weight: $(head -3 "$tmp/fwd")"
    else
        pass "$what"; echo "  step 4: $(last "$tmp/resumed") both ways"
    fi
fi
exit $fail
