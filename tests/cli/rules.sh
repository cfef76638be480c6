#!/bin/bash
# The rules of docs/design.md that a grep can check:
#  1. only the transport calls MPI point-to-point; no MPI collective outside tests/ and the
#     benchmark comparison code (tools/bench_*.c) or the interposer that defines them;
#  5. no -Ofast / -ffast-math;  6. mpicc.mpich / mpiexec.mpich, never the plain names;
#  layering: the model's internal headers only under ref/model/; a scheme (ref/parallel/<s>/)
#  includes no other scheme's internal header; nothing in ref/parallel/ calls ref/train/ (the
#  trainer owns the loop; a scheme only syncs, splits and moves); kernels/ includes no
#  collectives/ header (exact arithmetic lives in numerics/ and include/minidc/exact.h).
cd "$(dirname "$0")/../.." || exit 2
fail=0
src=$(ls device/*.c collectives/*.c interposer/*.c kernels/*.c $(find ref -name '*.c') datasets/*.c tools/*.c 2>/dev/null)
p2p='MPI_(I?[sbr]?send|I?recv|Sendrecv|I?probe|Test|Wait)[a-z]*[[:space:]]*\('
bad=$(grep -lE "$p2p" $src | grep -vE '^collectives/transport(_wait)?\.c$' | grep -v '^interposer/')
[ -n "$bad" ] && { echo "rule 1: MPI point-to-point outside the transport:"; grep -nE "$p2p" $bad; fail=1; }
coll='MPI_(Allreduce|Reduce|Bcast|Barrier|Allgather|Allgatherv|Gather|Scatter|Alltoall|Alltoallv|Reduce_scatter|Reduce_scatter_block|Comm_split|Comm_dup|Comm_create)[[:space:]]*\('
bad=$(grep -lE "$coll" $src | grep -v '^interposer/' | grep -v '^tools/bench_')
[ -n "$bad" ] && { echo "rule 1: MPI collective outside tests/:"; grep -nE "$coll" $bad; fail=1; }
if grep -nE -- '-Ofast|-ffast-math|-funsafe-math' Makefile $src; then echo "rule 5: fast-math"; fail=1; fi
plain=$(grep -nE '(^|[^.a-z_])(mpicc|mpiexec|mpirun)([[:space:]]|$)' Makefile tools/*.sh tests/run.sh |
        grep -vE '^[^:]+:[0-9]+:[[:space:]]*#')
[ -n "$plain" ] && { echo "rule 6: plain mpicc/mpiexec (use mpicc.mpich / mpiexec.mpich):"; echo "$plain"; fail=1; }
bad=$(grep -lE '#include "[^"]*(model_internal|layers|moe_internal)\.h"' $src | grep -v '^ref/model/')
[ -n "$bad" ] && { echo "layering: the model's internals included outside ref/model/:"; echo "$bad"; fail=1; }
for f in $(find ref/parallel -name '*.c' -o -name '*.h'); do
    own=$(basename "$(dirname "$f")")
    grep -oE '#include "[^"]*_internal\.h"' "$f" | grep -vE "\"(\.\./)*($own/)?${own}_internal\.h\"" |
        sed "s|^|layering: $f includes another scheme's header: |" | grep . && fail=1
done
train_api=$(grep -ohE '^[a-z_ ]*\bmdc_(step|trainer)_[a-z_]+\(' include/minidc/train.h | grep -oE 'mdc_[a-z_]+' | sort -u | paste -sd'|')
calls=$(grep -nE "\b($train_api)\(" $(find ref/parallel -name '*.c') 2>/dev/null)
[ -n "$calls" ] && { echo "layering: ref/parallel/ calls the trainer (ref/train/):"; echo "$calls"; fail=1; }
bad=$(grep -lE '#include "(minidc/)?(collectives|coll_[a-z_]*)\.h"|#include "\.\./collectives/' kernels/*.c kernels/*.h)
[ -n "$bad" ] && { echo "layering: kernels/ includes collectives/:"; echo "$bad"; fail=1; }
[ $fail = 0 ] && echo "rules 1, 5, 6 and the layering hold"
exit $fail
