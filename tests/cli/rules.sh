#!/bin/bash
# The rules of docs/design.md that a grep can check:
#  1. only the transport calls MPI point-to-point; no MPI collective outside tests/ and the
#     benchmark comparison code (tools/bench_*.c) or the interposer that defines them;
#  5. no -Ofast / -ffast-math;  6. mpicc.mpich / mpiexec.mpich, never the plain names;
#  layering: the model's internal headers only under ref/model/; a scheme (ref/parallel/<s>/)
#  includes no other scheme's internal header; nothing in ref/parallel/ calls ref/train/ (the
#  trainer owns the loop; a scheme only syncs, splits and moves); kernels/ includes no
#  collectives/ header (exact arithmetic lives in numerics/ and include/minidc/exact.h).
# Each rule is a scenario (tests/cli/scenario.sh): one result line, CASE reruns one alone.
. "$(dirname "$0")/scenario.sh"
cd "$(dirname "$0")/../.." || exit 2
fail=0
src=$(ls device/*.c collectives/*.c interposer/*.c kernels/*.c $(find ref -name '*.c') datasets/*.c tools/*.c 2>/dev/null)
label="rule 1: MPI point-to-point only in the transport"
if scenario "$label"; then
    p2p='MPI_(I?[sbr]?send|I?recv|Sendrecv|I?probe|Test|Wait)[a-z]*[[:space:]]*\('
    bad=$(grep -lE "$p2p" $src | grep -vE '^collectives/transport(_wait|_dry)?\.c$' | grep -v '^interposer/')
    if [ -z "$bad" ]; then pass "$label"
    else flunk "$label" "MPI point-to-point outside the transport:"; grep -nE "$p2p" $bad; fi
fi
label="rule 1: no MPI collective outside tests/, tools/bench_*.c and the interposer"
if scenario "$label"; then
    coll='MPI_(Allreduce|Reduce|Bcast|Barrier|Allgather|Allgatherv|Gather|Scatter|Alltoall|Alltoallv|Reduce_scatter|Reduce_scatter_block|Comm_split|Comm_dup|Comm_create)[[:space:]]*\('
    bad=$(grep -lE "$coll" $src | grep -v '^interposer/' | grep -v '^tools/bench_')
    if [ -z "$bad" ]; then pass "$label"
    else flunk "$label" "MPI collective outside tests/:"; grep -nE "$coll" $bad; fi
fi
label="rule 5: no -Ofast, -ffast-math or -funsafe-math"
if scenario "$label"; then
    if hits=$(grep -nE -- '-Ofast|-ffast-math|-funsafe-math' Makefile $src); then flunk "$label" "fast-math:"; echo "$hits"
    else pass "$label"; fi
fi
label="rule 6: mpicc.mpich / mpiexec.mpich, never the plain names"
if scenario "$label"; then
    plain=$(grep -nE '(^|[^.a-z_])(mpicc|mpiexec|mpirun)([[:space:]]|$)' Makefile tools/*.sh tests/run.sh |
            grep -vE '^[^:]+:[0-9]+:[[:space:]]*#')
    if [ -z "$plain" ]; then pass "$label"
    else flunk "$label" "plain mpicc/mpiexec (use mpicc.mpich / mpiexec.mpich):"; echo "$plain"; fi
fi
label="layering: the model's internal headers only under ref/model/"
if scenario "$label"; then
    bad=$(grep -lE '#include "[^"]*(model_internal|layers|moe_internal)\.h"' $src | grep -v '^ref/model/')
    if [ -z "$bad" ]; then pass "$label"
    else flunk "$label" "the model's internals included outside ref/model/:"; echo "$bad"; fi
fi
label="layering: no scheme includes another scheme's internal header"
if scenario "$label"; then
    bad=""
    for f in $(find ref/parallel -name '*.c' -o -name '*.h'); do
        own=$(basename "$(dirname "$f")")
        b=$(grep -oE '#include "[^"]*_internal\.h"' "$f" | grep -vE "\"(\.\./)*($own/)?${own}_internal\.h\"" |
            sed "s|^|layering: $f includes another scheme's header: |")
        [ -n "$b" ] && bad="$bad$b"$'\n'
    done
    if [ -z "$bad" ]; then pass "$label"
    else flunk "$label" "a scheme includes another scheme's internal header:"; printf '%s' "$bad"; fi
fi
label="layering: ref/parallel/ calls no trainer function (ref/train/)"
if scenario "$label"; then
    train_api=$(grep -ohE '^[a-z_ ]*\bmdc_(step|trainer)_[a-z_]+\(' include/minidc/train.h | grep -oE 'mdc_[a-z_]+' | sort -u | paste -sd'|')
    calls=$(grep -nE "\b($train_api)\(" $(find ref/parallel -name '*.c') 2>/dev/null)
    if [ -z "$calls" ]; then pass "$label"
    else flunk "$label" "ref/parallel/ calls the trainer (ref/train/):"; echo "$calls"; fi
fi
label="layering: kernels/ includes no collectives/ header"
if scenario "$label"; then
    bad=$(grep -lE '#include "(minidc/)?(collectives|coll_[a-z_]*)\.h"|#include "\.\./collectives/' kernels/*.c kernels/*.h)
    if [ -z "$bad" ]; then pass "$label"
    else flunk "$label" "kernels/ includes collectives/:"; echo "$bad"; fi
fi
exit $fail
