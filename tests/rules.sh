#!/bin/bash
# DESIGN.md's rules that a grep can check:
#  1. only the transport calls MPI point-to-point; no MPI collective outside tests/ and the
#     benchmark comparison code (tools/bench_*.c) or the interposer that defines them;
#  5. no -Ofast / -ffast-math;  6. mpicc.mpich / mpiexec.mpich, never the plain names.
cd "$(dirname "$0")/.." || exit 2
fail=0
src=$(ls device/*.c collectives/*.c interposer/*.c kernels/*.c ref/*.c datasets/*.c tools/*.c 2>/dev/null)
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
[ $fail = 0 ] && echo "rules 1, 5, 6 hold"
exit $fail
