#!/bin/bash
# The published runs of docs/predict.md, predicted: Korthikanti et al. 2022 Table 5 (iteration
# times) and Figure 1 (activation memory per GPU), Narayanan et al. 2021's 1T on 3072 A100s, and
# the Megatron-LM README's H100 weak-scaling rows. One line per run: the prediction beside the
# published figure (tools/predict_published.json has every source).
#   usage: tools/predict_validate.sh [table5|acts|narayanan|h100|all] [22B|175B|530B|1T]
# (a model name limits table5 and acts to its row and skips the others)
# The A100 runs use docs/predict/a100-80-calibrated.json, Megatron's dropout 0.1 and the attention
# that keeps its T x T probabilities; 530B runs 35 processes, 1T 64 (minutes on 2 cores).
cd "$(dirname "$0")/.." || exit 2
BIN=${BUILD:-build}/minidc
what=${1:-table5} only=${2:-}
a100=(--device-file docs/predict/a100-80-calibrated.json --precision fp16 --dropout 0.1 --attention materialized
      --vocab 51200 --ctx 2048)

step() { sed -n 's/^predicted step \([^ ]*\) s.*/\1/p'; }

gpt() { # name layers hidden heads pp vstages batch micro-batch: the pipeline options and sizes
    local sched=()
    [ "$5" -gt 1 ] && { if [ "$6" -gt 1 ]; then sched=(--schedule interleaved --virtual-stages "$6"); else sched=(--schedule 1f1b); fi; }
    echo "--layers $2 --channels $3 --heads $4 --tp 8 --pp $5 ${sched[*]} --batch $7 --microbatches $(($7 / $8))"
}

# name layers hidden heads pp vstages batch micro-batch; published full, SP+sel; activations none, SP+sel
rows=("22B 48 6144 64 1 1 4 4 1.42 1.10 59.25 9.56"
      "175B 96 12288 96 8 3 64 1 18.13 13.75 66.84 12.35"
      "530B 105 20480 128 35 3 280 1 49.05 37.83 114.02 23.08"
      "1T 128 25600 160 64 1 512 1 94.42 71.49 131.25 26.56")

for row in "${rows[@]}"; do
    set -- $row
    [ -n "$only" ] && [ "$only" != "$1" ] && continue
    mesh=$(gpt "$@")
    if [ "$what" = table5 ] || [ "$what" = all ]; then
        full=$("$BIN" predict "${a100[@]}" $mesh --recompute full 2>&1 | step)
        sel=$("$BIN" predict "${a100[@]}" $mesh --sp --recompute selective 2>&1 | step)
        printf 'Table 5 %-5s full %8s s (published %s)   SP+sel %8s s (published %s)\n' "$1" "$full" "$9" "$sel" "${10}"
    fi
    if [ "$what" = acts ] || [ "$what" = all ]; then
        acts() { "$BIN" predict "${a100[@]}" $mesh "$@" 2>&1 | sed -n 's/.*activations \([0-9.]*\) GiB.*/\1/p'; }
        printf 'Figure 1 %-5s none %8s GiB (published %s)   SP+sel %8s GiB (published %s)\n' "$1" \
            "$(acts --recompute none)" "${11}" "$(acts --sp --recompute selective)" "${12}"
    fi
done

if { [ "$what" = narayanan ] || [ "$what" = all ]; } && [ -z "$only" ]; then # 96 B s l h^2 (1 + s/6h + V/16lh)
    t=$("$BIN" predict "${a100[@]}" $(gpt 1T 128 25600 160 64 1 512 1) --batch 3072 --dp 6 --recompute full 2>&1 | step)
    python3 -c "t = $t; f = 96 * 3072 * 2048 * 128 * 25600**2 * (1 + 2048 / (6 * 25600) + 51200 / (16 * 128 * 25600))
print('Narayanan 1T, 3072 GPUs: step %.4g s, %.1f TFLOP/s per GPU (published 163)' % (t, f / t / 3072 / 1e12))"
fi

if { [ "$what" = h100 ] || [ "$what" = all ]; } && [ -z "$only" ]; then # 72 B s l h^2 (1 + s/6h + V/12lh)
    for row in "7.1B 30 4096 32 2 1 48 192 465.9" "70B 84 8192 64 8 2 48 384 419.7" "177B 96 12288 96 8 6 48 1152 432.8"; do
        set -- $row
        sched=()
        [ "$6" -gt 1 ] && sched=(--schedule 1f1b)
        t=$("$BIN" predict --device h100 --precision bf16 --vocab 131072 --ctx 4096 --layers "$2" --channels "$3" \
            --heads "$4" --tp "$5" --sp --pp "$6" "${sched[@]}" --dp "$7" --batch "$8" --microbatches $(($8 / $7)) \
            --zero 1 2>&1 | step)
        python3 -c "t, B, l, h = $t, $8, $2, $3; f = 72 * B * 4096 * l * h * h * (1 + 4096 / (6 * h) + 131072 / (12 * l * h))
print('H100 %-5s %4d GPUs: step %.4g s, %.1f TFLOP/s per GPU (published $9)' % ('$1', $5 * $6 * $7, t, f / t / ($5 * $6 * $7) / 1e12))"
    done
fi
