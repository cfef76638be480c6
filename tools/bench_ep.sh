#!/bin/sh
# Expert parallelism against serial in the same run (part of make bench): the `small` config with
# E = 8 experts, top-2, dropless, the same global batch (12 x 128); wall ms per step (median of
# steps 2-5 of minidc train) of the dense model and the MoE model serially on 2 threads, then the
# MoE model on 2 and 4 ranks of 1 thread on the same 2 cores: ep = dp (every rank its own experts),
# and dp 4 without ep (every rank all experts); the virtual ms of a step on the h100 preset and
# the formula's GFLOP per step beside, and the all-to-all's wall ms (waiting for the slowest rank
# included). Target: ep 4 (dp 4) <= 1.3x the serial MoE step.
# Then the Mixtral family (SwiGLU experts, softmax top-2 renormalized): the `mixtral-tiny` config
# and a larger one written here as a config.json (hidden 256, 4 layers, 8 experts of 512, seq
# 128), each serially on 2 threads, with --ep 2 --dp 2 on 2 ranks of 1 thread and --ep 4 --dp 4
# on 4 ranks of 1 thread (2 ranks per core) on the same 2 cores, the same global batch and steps;
# wall ms per step = the median of the steps after 2 warm-up steps, the ratio to serial, and the
# all-to-all's share of the step (the MoE line's a2a wall, its ranks' mean, waiting for the
# slowest rank included, over the step's wall) beside the ranks' expert rows (max/mean). Target:
# the larger config's ep 2 <= 1.3x serial (mixtral-tiny's ~60 ms step is printed without one).
# The last line is PASS when both targets pass, MISS otherwise (a run that fails exits 1).
# Usage: tools/bench_ep.sh BUILD MPIEXEC
BUILD=${1:-build}
MPIEXEC=${2:-mpiexec.mpich}
common="--config small --steps 5"
moe="--experts 8 --topk 2"
. "$(dirname "$0")/bench_steps.sh"
dir=$(mktemp -d)
tmp=$dir/out
trap 'rm -rf "$dir"' EXIT
gflop() { # GFLOP per step the device was charged (the report's work line over the 5 steps)
    awk '/^  work / {for (i = 1; i < NF; i++) if ($(i + 1) == "FLOP,") printf "%.2f", $i / 5e9}' "$1"
}
echo "== expert parallelism, small config, E = 8, top-2, global batch 12 x 128 (tools/bench_ep.sh): wall ms per step"
env -u OMP_WAIT_POLICY OMP_NUM_THREADS=2 "$BUILD/minidc" train $common >"$tmp" 2>&1 || { echo "bench_ep: dense failed"; exit 1; }
d=$(grep '^step' "$tmp" | stats)
df=$(gflop "$tmp")
env -u OMP_WAIT_POLICY OMP_NUM_THREADS=2 "$BUILD/minidc" train $common $moe >"$tmp" 2>&1 || { echo "bench_ep: serial failed"; exit 1; }
s=$(grep '^step' "$tmp" | stats)
sf=$(gflop "$tmp")
sw=$(echo $s | cut -d' ' -f1)
awk -v d="$d" -v s="$s" -v df="$df" -v sf="$sf" 'BEGIN{split(d, a, " "); split(s, b, " ");
    printf "  dense serial (2 threads)   wall %.1f ms  virtual %.3f ms/step  %s GFLOP/step\n", a[1], a[2], df;
    f = "  MoE serial (2 threads)     wall %.1f ms  virtual %.3f ms/step  %s GFLOP/step  (%.2fx the dense time, %.2fx its FLOPs; virtual %.2fx)\n";
    printf f, b[1], b[2], sf, b[1] / a[1], sf / df, b[2] / a[2]}'
for spec in "2 --dp 2 --ep 2" "4 --dp 4 --ep 4" "4 --dp 4"; do
    set -- $spec; n=$1; shift
    OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE "$MPIEXEC" -n "$n" "$BUILD/minidc" train $common $moe "$@" >"$tmp" 2>&1 ||
        { echo "bench_ep: $* failed"; exit 1; }
    r=$(grep '^step' "$tmp" | stats)
    a2a=$(awk '/^  moe:/ {for (i = 1; i < NF; i++) if ($(i + 1) == "ms" && $(i + 2) == "wall)") v = $i} END {print v}' "$tmp")
    awk -v r="$r" -v s="$sw" -v a="$a2a" -v spec="$*" -v n="$n" 'BEGIN{split(r, x, " "); q = x[1] / s;
        printf "  MoE %-16s (%s x 1) wall %.1f ms  virtual %.3f ms/step  %.2fx serial%s%s\n", spec, n, x[1], x[2], q,
               a != "" ? sprintf("  all-to-all %s ms of it", a) : "",
               spec == "--dp 4 --ep 4" ? (q <= 1.3 ? " (target <= 1.3x): PASS" : " (target <= 1.3x): MISS") : ""}'
    [ "$*" = "--dp 4 --ep 4" ] && small=$(awk -v r="$r" -v s="$sw" 'BEGIN{split(r, x, " "); print x[1] / s <= 1.3 ? "PASS" : "MISS"}')
done

# ---- the Mixtral family -------------------------------------------------------------------------
warm=2
epstats() { # FILE E: "wall_ms virtual_ms_per_step a2a_ms a2a_calls load", medians over the steps after $warm;
    # load: max/mean over the E ep ranks of the rows their experts ran (ep rank r holds the r-th E-th of the experts)
    awk -v warm=$warm -v e=$2 '
        function med(a, k,   i, j, t) {
            for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) {t = a[i]; a[i] = a[j]; a[j] = t}
            return (a[int((k + 1) / 2)] + a[int(k / 2) + 1]) / 2 }
        /^step/ {n++; for (i = 1; i <= NF; i++) { if ($i == "ms" && !w[n]) w[n] = $(i - 1); if ($i == "virtual") v[n] = $(i + 1) } }
        /^  moe:.* a2a / && n > warm {for (i = 1; i < NF; i++) { if ($(i + 1) == "ms" && $(i + 2) == "wall)") a[++m] = $i;
                                                                  if ($(i + 1) == "calls,") c = $i }
            for (i = 3; $i != "(max/mean"; i++) x[i - 3] = $i; E = i - 3; split("", r); mx = t = 0;
            for (j = 0; j < E; j++) r[int(j / (E / e))] += x[j];
            for (j = 0; j < e; j++) {t += r[j]; if (r[j] > mx) mx = r[j]}
            l[m] = t ? mx / (t / e) : 0 }
        END {k = 0; for (i = warm + 1; i <= n; i++) s[++k] = w[i];
             printf "%.1f %.3f %.1f %d %.2f", med(s, k), (v[n] - v[warm]) / (n - warm), m ? med(a, m) : 0, c, m ? med(l, m) : 1}' "$1"
}
mixtral() { # label, steps, minidc train options...: serial, ep 2 and ep 4 lines; sets ratio2 (ep 2 / serial)
    label=$1 steps=$2; shift 2
    echo "== expert parallelism, Mixtral: $label, $steps steps (tools/bench_ep.sh): wall ms per step = median of steps $((warm + 1))-$steps"
    env -u OMP_WAIT_POLICY OMP_NUM_THREADS=2 "$BUILD/minidc" train "$@" --steps $steps >"$tmp" 2>&1 ||
        { echo "bench_ep: $label serial failed"; tail -3 "$tmp"; exit 1; }
    s=$(epstats "$tmp" 1)
    echo "$s" | awk '{printf "  serial         %-31s wall %7.1f ms  virtual %.3f ms/step\n", "(1 rank x 2 threads)", $1, $2}'
    for e in 2 4; do
        OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE "$MPIEXEC" -n $e "$BUILD/minidc" train "$@" --steps $steps --ep $e --dp $e \
            >"$tmp" 2>&1 || { echo "bench_ep: $label --ep $e failed"; tail -3 "$tmp"; exit 1; }
        r=$(epstats "$tmp" $e)
        awk -v r="$r" -v s="$s" -v e=$e -v t="$target" 'BEGIN{split(r, x, " "); split(s, y, " "); q = x[1] / y[1];
            printf "  --ep %d --dp %d %-31s wall %7.1f ms  virtual %.3f ms/step  ratio = %.1f / %.1f = %.2fx serial",
                   e, e, sprintf("(%d ranks x 1 thread%s)", e, e > 2 ? ", 2 per core" : ""), x[1], x[2], x[1], y[1], q;
            if (e == 2 && t != "") printf " (target <= %.1fx): %s", t, q <= t ? "PASS" : "MISS";
            printf "\n      all-to-all: %d calls per step, a2a wall %.1f ms = %.1f / %.1f = %.0f%% of the step (a2a wall / step wall);",
                   x[4], x[3], x[3], x[1], 100 * x[3] / x[1];
            printf " the ranks\047 expert rows max/mean %.2f\n", x[5]}'
        [ $e = 2 ] && ratio2=$(awk -v r="$r" -v s="$s" 'BEGIN{split(r, x, " "); split(s, y, " "); print x[1] / y[1]}')
    done
}
target=
mixtral "mixtral-tiny (C 128, 2 layers, 8 experts of 176, top-2), global batch 24 x 64" 20 --config mixtral-tiny
cat >"$dir/config.json" <<'JSON'
{"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "vocab_size": 512, "hidden_size": 256,
 "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4,
 "max_position_embeddings": 128, "num_local_experts": 8, "num_experts_per_tok": 2, "rms_norm_eps": 1e-05,
 "rope_theta": 1000000.0, "tie_word_embeddings": false, "output_router_logits": false}
JSON
target=1.3
mixtral "config.json (C 256, 4 layers, 8 experts of 512, top-2), global batch 16 x 128" 10 --config "$dir/config.json" --batch 16
mix=$(awk -v q="$ratio2" -v t=$target 'BEGIN{print q != "" && q + 0 <= t ? "PASS" : "MISS"}')
echo "bench_ep: $([ "$small" = PASS ] && [ "$mix" = PASS ] && echo PASS || echo MISS) (small, ep 4 <= 1.3x serial: $small;" \
    "Mixtral config.json, ep 2 <= ${target}x serial: $mix, $(printf %.2f "$ratio2")x)"
