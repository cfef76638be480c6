#!/bin/bash
# `minidc explain` runs without MPI (no mpiexec, MPI never initialized) and prints the NCCL
# ring order, per-rank bytes next to the formula, and a cost, for every collective x algorithm.
# Each check is a scenario (tests/cli/scenario.sh): one result line, CASE reruns one alone.
set -u
. "$(dirname "$0")/scenario.sh"
BUILD=${BUILD:-build}
bin=$BUILD/minidc
fail=0
ring="explain allreduce --algo ring -n 4 --count 16 --element 5"
if scenario "$ring: the ring order" || scenario "$ring: bytes sent per rank" || scenario "$ring: the bytes formula"; then
    out=$("$bin" explain allreduce --algo ring -n 4 --count 16 --element 5 2>&1) || { flunk "$ring" "exit $?"; echo "$out"; exit 1; }
    if scenario "$ring: the ring order"; then
        echo "$out" | grep -qF 'out[5] = ((x2 + x3) + x0) + x1' && pass "$ring: the ring order" ||
            { flunk "$ring: the ring order" "ring order line missing:"; echo "$out"; }
    fi
    if scenario "$ring: bytes sent per rank"; then
        echo "$out" | grep -qF 'bytes sent per rank: r0 96, r1 96, r2 96, r3 96' && pass "$ring: bytes sent per rank" ||
            flunk "$ring: bytes sent per rank" "bytes line missing"
    fi
    if scenario "$ring: the bytes formula"; then
        echo "$out" | grep -qF 'formula: 2(p-1)/p n = 96 bytes' && pass "$ring: the bytes formula" ||
            flunk "$ring: the bytes formula" "formula line missing"
    fi
fi
# MPI must not be initialized: MPICH would print nothing, but a singleton init leaves a
# process manager; make sure explain never calls MPI_Init by running it under a bogus PMI.
label="explain barrier runs under a broken PMI environment (no MPI_Init)"
if scenario "$label"; then
    PMI_FD=bogus PMI_PORT=bogus PMI_RANK=bogus "$bin" explain barrier -n 5 >/dev/null 2>&1 && pass "$label" ||
        flunk "$label" "explain barrier failed under a broken PMI environment (does it call MPI_Init?)"
fi
algos() { "$bin" explain $1 --list | awk 'NR > 1 && NF && $1 != "cost:" {print $1}'; }
for c in allreduce reduce_scatter allgather bcast reduce gather scatter alltoall alltoallv barrier; do
    for a in $(algos $c); do
        label="explain $c --algo $a runs at 1, 3 and 8 ranks"
        scenario "$label" || continue
        bad=""
        for p in 1 3 8; do
            "$bin" explain $c --algo $a -n $p --count 5 --root $((p - 1)) --gpus-per-node 4 >/dev/null 2>&1 ||
                { bad="$bad $p"; echo "explain $c --algo $a -n $p failed:"; "$bin" explain $c --algo $a -n $p --count 5 2>&1 | tail -3; }
        done
        [ -z "$bad" ] && pass "$label" || flunk "$label" "failed at -n$bad"
    done
done
# The bytes formula printed next to "bytes sent per rank" must equal the busiest rank's bytes
# for equal blocks (720720 elements divide by every p here), fold and subtrees included.
for c in allreduce reduce_scatter allgather bcast reduce gather scatter alltoall alltoallv; do
    for a in $(algos $c); do
        label="explain $c --algo $a: the bytes formula equals the busiest rank's bytes at 1-16 ranks"
        scenario "$label" || continue
        bad=""
        for p in 1 2 3 4 5 6 7 8 9 12 16; do
            out=$("$bin" explain $c --algo $a -n $p --count 720720 --summary --gpus-per-node 4 2>&1)
            most=$(echo "$out" | grep "bytes sent per rank" | grep -oE "r[0-9]+ [0-9]+" | awk '$2 > m {m = $2} END {print m + 0}')
            said=$(echo "$out" | grep -oE "= [0-9]+ bytes \(n" | grep -oE "[0-9]+")
            [ "$most" = "$said" ] ||
                { bad="$bad $p"; echo "explain $c --algo $a -n $p: busiest rank sends $most, formula says ${said:-nothing}"; }
        done
        [ -z "$bad" ] && pass "$label" || flunk "$label" "the formula differs at -n$bad"
    done
done
label="explain allreduce --algo nosuch refused"
if scenario "$label"; then
    "$bin" explain allreduce --algo nosuch -n 4 >/dev/null 2>&1 && flunk "$label" "an unknown algorithm was accepted" || pass "$label"
fi
# Malformed and out-of-range numbers: exit 2 and a message naming the option and the value.
for bad in "--count abc" "--count 4x" "--count -1" "--count 18446744073709551615" "-n 4x" "-n 0" \
           "-n 5000" "--root abc" "--chunk 1.5" "--element -2" "--counts 1,2,3,4,5" "--counts 1,2,3," \
           "--counts 1,,2,3" "--gpus-per-node 0" "--count"; do
    opt=${bad%% *}
    label="explain allreduce $bad: exit 2 naming $opt"
    scenario "$label" || continue
    out=$("$bin" explain allreduce $bad 2>&1)
    rc=$?
    { [ $rc = 2 ] && echo "$out" | grep -q -- "$opt"; } && pass "$label" ||
        { flunk "$label" "expected exit 2 naming $opt, got $rc:"; echo "$out" | head -3; }
done
# A realistic count is explained at once: the summation is computed per block of the schedule,
# not per element (16 M elements took minutes before; the test's timeout catches a regression).
label="explain allreduce ring of 16 M elements: the last chunk's summation, at once"
if scenario "$label"; then
    if ! out=$("$bin" explain allreduce --algo ring -n 8 --count 16777216 --summary 2>&1); then
        flunk "$label" "explain of 16 M elements failed:"; echo "$out" | tail -3
    elif ! echo "$out" | grep -qF 'out[14680064..16777215] = ((((((x0 + x1) + x2) + x3) + x4) + x5) + x6) + x7'; then
        flunk "$label" "16 M elements: the last chunk's summation is missing"; echo "$out" | grep 'out\['
    else pass "$label"; fi
fi
# A schedule too large to list is refused with a reason, not built until memory runs out.
label="a 16 M-message schedule refused: too many to list"
if scenario "$label"; then
    out=$("$bin" explain allreduce --algo ring --chunk 4 --count 16777216 2>&1)
    [ $? = 2 ] && echo "$out" | grep -q "too many to list" && pass "$label" ||
        { flunk "$label" "a 16 M-message schedule was not refused:"; echo "$out" | head -3; }
fi
# The student's page shows explain's output in full: each `$ build/minidc explain ...` block in
# docs/collectives-explain.md must be exactly what the command prints now.
doc=${DOC:-docs/collectives-explain.md}
n=0
while IFS= read -r cmd; do
    n=$((n + 1))
    label="$doc: '$cmd' prints what the page shows"
    scenario "$label" || continue
    want=$(awk -v c="\$ $cmd" '$0 == c {on = 1; next} on && (/^```/ || /^\$ /) {exit} on' "$doc")
    got=$(eval "$BUILD/${cmd#build/}" 2>&1)
    [ "$got" = "$want" ] && pass "$label" || { flunk "$label" "it prints something else than the page shows:";
        diff <(echo "$want") <(echo "$got") | head -10; }
done < <(sed -n 's/^\$ \(build\/minidc explain .*\)$/\1/p' "$doc")
label="$doc: at least 5 explain examples"
if scenario "$label"; then
    [ $n -ge 5 ] && pass "$label" || flunk "$label" "expected at least 5 explain examples, found $n"
fi
# `explain block`: one GPT-2 block under tensor parallelism, listed without MPI. Per block, the
# listing must hold docs/design.md's collectives: TP 4 AllReduce of bsh floats, 4 x 2(t-1)/t bsh beta
# bytes per rank; SP 6 AllGather + 4 ReduceScatter (the inputs of the column-parallel linears are
# gathered again in backward), 10 (t-1)/t bsh beta; and every total it prints must say ok.
sizes="--vocab 384 --heads 6 --channels 192 --ctx 48 --layers 2"
for t in 1 2 3; do
    for sp in "" --sp; do
        [ $t = 1 ] && [ -n "$sp" ] && continue
        label="explain block --tp $t${sp:+ $sp}: per block the collectives and bytes of the formulas, every total ok"
        scenario "$label" || continue
        out=$("$bin" explain block $sizes --batch 2 --tp $t $sp 2>&1) ||
            { flunk "$label" "explain block --tp $t $sp failed:"; echo "$out" | tail -3; continue; }
        got=$(echo "$out" | awk '/^block (forward|backward)/ {on = 1; next} /^$/ || /^[^ ]/ {on = 0}
            on && / AllReduce over tp/ {ar++} on && / AllGather over tp/ {ag++} on && / ReduceScatter over tp/ {rs++}
            on && / bytes per rank$/ {by += $(NF - 3)} END {print ar + 0, ag + 0, rs + 0, by + 0}')
        bsh=$((2 * 48 * 192))
        if [ $t = 1 ]; then want="0 0 0 0"
        elif [ -z "$sp" ]; then want="4 0 0 $((4 * 2 * (t - 1) * (bsh / t) * 4))"
        else want="0 6 4 $((10 * (t - 1) * (bsh / t) * 4))"; fi
        if [ "$got" != "$want" ]; then
            flunk "$label" "per block AR AG RS bytes = $got, the formulas say $want"
        elif [ $t != 1 ] && ! echo "$out" | grep -qE "^  (TP|SP): .* = ${want##* } bytes per rank; listed ${want##* } ok$"; then
            flunk "$label" "no per-layer total of ${want##* } bytes:"; echo "$out" | grep -A1 "^per layer"
        elif [ $t != 1 ] && echo "$out" | grep -q DIFFERS; then
            flunk "$label" "a total DIFFERS:"; echo "$out" | grep DIFFERS
        else pass "$label"; fi
    done
done
# A size the partition cannot split: exit 2 and the same message as minidc train, naming the option.
while IFS=: read -r args msg; do
    label="explain block $args: exit 2, '$msg'"
    scenario "$label" || continue
    out=$("$bin" explain block $args 2>&1)
    rc=$?
    { [ $rc = 2 ] && echo "$out" | grep -qF -- "$msg"; } && pass "$label" ||
        { flunk "$label" "expected exit 2 and '$msg', got $rc:"; echo "$out" | head -3; }
done <<'BAD'
--tp 5:--tp 5 does not divide --heads 4
--tp 2 --channels 130 --heads 5:--tp 2 does not divide --heads 5
--tp 2 --sp --seq 63:--sp: the sequence length 63 (--seq) is not divisible by --tp 2
--sp:--sp needs --tp 2 or more
--tp 65:--tp needs an integer in 1..64
--tp 2 --seq 65:--seq 65 must be in [1, 64]
--batch 0:--batch needs an integer
--config nosuch:--config: unknown config 'nosuch'
--heads 5:--heads: 5 heads do not divide --channels 128
BAD
# tp 3 on a vocabulary padded to 512: the run pads to 768, as minidc train does
label="explain block --tp 3: the vocabulary padded to 768"
if scenario "$label"; then
    out=$("$bin" explain block --tp 3 --heads 6 --channels 192 2>&1)
    echo "$out" | grep -q "V=512 (padded Vp = 768)" && pass "$label" ||
        { flunk "$label" "the vocabulary is not padded to 768:"; echo "$out" | head -3; }
fi
# The listing agrees with the code: its totals per micro-batch equal what a one-step run of
# minidc train counts (calls and bytes sent per rank, in its tensor-parallel report; MPI here).
mpi=${MPIEXEC:-mpiexec.mpich}
small="--vocab 384 --heads 6 --channels 192 --ctx 24 --layers 2 --batch 1"
for run in "2" "2 --sp" "3 --sp"; do
    t=${run%% *} sp=
    [ "$run" != "$t" ] && sp=${run#* }
    label="explain block --tp $t${sp:+ $sp}: the listing's calls and bytes equal minidc train's"
    scenario "$label" || continue
    if ! command -v "$mpi" >/dev/null 2>&1; then
        echo "explain block: $mpi not found, the comparison with minidc train is skipped"; continue
    fi
    ex=$("$bin" explain block $small --tp $t $sp 2>&1)
    tr=$(MINIDC_TIMEOUT=30 "$mpi" -n $t "$bin" train $small --tp $t $sp --steps 1 --quiet 2>&1) ||
        { flunk "$label" "train --tp $t $sp failed:"; echo "$tr" | tail -3; continue; }
    pick='index($0, n) == 1 {split(substr($0, length(n) + 1), f, " "); print f[1], f[k]}'
    bad=""
    for row in "AllReduce (b,s,h)" "AllReduce (b,s) loss" "AllGather (b,s,h)" "ReduceScatter (b,s,h)"; do
        e=$(echo "$ex" | awk -v n="  $row " -v k=2 "$pick")
        a=$(echo "$tr" | awk -v n="  $row " -v k=3 "$pick")
        { [ -n "$e" ] && [ "$e" = "$a" ]; } ||
            { bad="$bad; $row"; echo "explain block --tp $t $sp: $row: listed (calls bytes) '$e', train counted '$a'"; }
    done
    [ -z "$bad" ] && pass "$label" || flunk "$label" "rows that differ${bad#;}"
done
# explain exact: the default mode's order for one element differs between dp 2 and dp 3 (the
# ring's expressions), exact mode's blocks cover the batch on each mesh
for want in "g = x1 + x0" "g = (x1 + x2) + x0" "96 canonical blocks" "dp 3: rank 0 blocks 0-31, rank 1 blocks 32-63, rank 2 blocks 64-95" \
    "g = round(p_0 + p_1 + ... + p_95)"; do
    label="explain exact --config tiny --dp 2 --dp 3: '$want'"
    scenario "$label" || continue
    if ! ex=$("$bin" explain exact --config tiny --dp 2 --dp 3 --exact-block 16 2>&1); then flunk "$label" "explain exact failed"
    elif echo "$ex" | grep -qF -- "$want"; then pass "$label"
    else flunk "$label" "no '$want' in:"; echo "$ex"; fi
done
label="explain exact --exact-block 5 (seq 64) refused"
if scenario "$label"; then
    "$bin" explain exact --exact-block 5 >/dev/null 2>&1 && flunk "$label" "explain exact --exact-block 5 (seq 64) accepted" || pass "$label"
fi
# --meshes: the positions each mesh leaves a block, the largest block fitting all, the default
for want in "tp2,sp                     32 positions" "cp2                        16 positions" \
    "tp4,sp,cp2                  8 positions" "the largest up to 32: --exact-block 8" \
    "the default for --seq 64 is 8: it fits every mesh above"; do
    label="explain exact --seq 64 --meshes: '$want'"
    scenario "$label" || continue
    if ! ex=$("$bin" explain exact --seq 64 --meshes "tp2,sp cp2 tp4,sp,cp2" 2>&1); then flunk "$label" "explain exact --meshes failed"
    elif echo "$ex" | grep -qF -- "$want"; then pass "$label"
    else flunk "$label" "no '$want' in:"; echo "$ex"; fi
done
label="explain exact --seq 24 --meshes tp3,sp: the default's misfit said"
if scenario "$label"; then
    ex=$("$bin" explain exact --seq 24 --meshes "tp3,sp" 2>&1)
    echo "$ex" | grep -qF "the default for --seq 24 is 3: it does not fit every mesh above" && pass "$label" ||
        { flunk "$label" "the default's misfit not said:"; echo "$ex"; }
fi
label="explain exact --meshes tp2,zz refused"
if scenario "$label"; then
    "$bin" explain exact --meshes "tp2,zz" >/dev/null 2>&1 && flunk "$label" "explain exact --meshes tp2,zz accepted" || pass "$label"
fi
exit $fail
