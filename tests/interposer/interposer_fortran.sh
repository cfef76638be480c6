#!/bin/bash
# The interposer under a Fortran program (tests/interposer/interposer_fortran.f90, built here with
# mpif90.mpich: libmpich-dev brings gfortran): MPICH's Fortran bindings call the C MPI_*
# functions, so the library takes over a Fortran program's collectives with Fortran's own
# datatypes. Run at 1, 3 and 4 ranks with and without LD_PRELOAD: the result files must be
# identical, and MINIDC_VERBOSE=2 must show the Fortran types running on minidc (complex sums
# as pairs of reals) and the strided matrix row broadcast there too.
# Each rank count is a scenario (tests/cli/scenario.sh); the program is built whatever is selected.
set -u
. "$(dirname "$0")/../cli/scenario.sh"
. tests/interposer/interposer_env.sh
fc=mpif90.mpich
command -v $fc >/dev/null || { echo "skip: no $fc (apt-get install libmpich-dev gfortran)"; exit 77; }
# `use mpi` declares no argument types: gfortran warns about REAL and COMPLEX buffers passed to
# the same routine; the warnings go to the log, not the test's output.
if ! $fc -O1 -o "$tmp/app" tests/interposer/interposer_fortran.f90 >"$tmp/build.log" 2>&1; then
    echo "skip: $fc could not build tests/interposer/interposer_fortran.f90:"; tail -n 5 "$tmp/build.log"; exit 77
fi
fail=0
app=$tmp/app
for p in 1 3 4; do
    label="n=$p: results identical with and without the interposer, Fortran types on minidc"
    scenario "$label" || continue
    mpich_run $p || { flunk "$label" "the program failed without the interposer"; continue; }
    lib_run $p minidc$p MINIDC_VERBOSE=2
    case $? in 0) ;; 1) flunk "$label" "results differ"; continue ;; *) flunk "$label" "the run failed"; continue ;; esac
    why=""
    for want in "MPI_Allreduce runs on minidc (.*MPI_DOUBLE_PRECISION sum as f64)" \
                "MPI_Allreduce runs on minidc (.*MPI_REAL min as f32)" \
                "MPI_Allreduce runs on minidc (.*MPI_INTEGER8 prod as i64)" \
                "MPI_Allreduce runs on minidc (.*MPI_COMPLEX sum as 2 x f32)" \
                "MPI_Allreduce runs on minidc (.*MPI_DOUBLE_COMPLEX sum as 2 x f64)" \
                "MPI_Reduce_scatter_block runs on minidc (.*MPI_INTEGER max as i32)" \
                "MPI_Bcast runs on minidc" "MPI_Allgather runs on minidc" \
                "MPI_Alltoall runs on minidc" "MPI_Barrier runs on minidc"; do
        grep -q "rank 0: $want" "$tmp/minidc$p.log" || why="$why; no 'rank 0: $want' line"
    done
    if [ -z "$why" ]; then pass "n=$p: $(wc -l <"$tmp/minidc$p/rank0.txt") results identical with and without the interposer, Fortran types on minidc"
    else flunk "$label" "${why#; }"; fi
done
exit $fail
