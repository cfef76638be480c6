! A Fortran MPI program for tests/interposer/interposer_fortran.sh: MPICH's Fortran bindings call the C
! MPI_* functions, so LD_PRELOAD=libminidc_mpi.so takes over a Fortran program's collectives
! too, with Fortran's own datatypes (DOUBLE PRECISION, REAL, INTEGER, INTEGER*8, COMPLEX,
! DOUBLE COMPLEX). Also the classic Fortran pattern of a row of a column-major matrix (a strided
! vector type) broadcast from the root to ranks that receive a contiguous array. Integer-valued
! data: every result is exact in any summation order. Each rank writes its results to
! DIR/rankR.txt (DIR is the first argument); the files must be identical with and without the
! library.
program interposer_fortran
  use mpi
  implicit none
  integer, parameter :: n = 7
  integer :: ierr, me, np, i, u, rowtype
  character(len=256) :: dir, path
  double precision :: d(n), dr(n), a(4, n), row(n)
  real :: r(n), rr(n)
  integer :: k(n), kr(n)
  integer(kind=8) :: l(n), lr(n)
  complex :: c(n), cr(n)
  complex(kind=8) :: z(n), zr(n)
  integer, allocatable :: g(:), ga(:)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, me, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)
  call get_command_argument(1, dir)
  write (path, '(a,"/rank",i0,".txt")') trim(dir), me
  open (newunit=u, file=path, status='replace', action='write')

  do i = 1, n
    d(i) = mod(me * 7 + i * 3, 17) - 8
    r(i) = real(mod(me * 5 + i, 11) - 5)
    k(i) = mod(me * 3 + i * 7, 13) - 6
    l(i) = 1 + mod(me + i, 2)
    c(i) = cmplx(real(me + i), real(i - me))
    z(i) = cmplx(dble(2 * me - i), dble(me * i), kind=8)
  end do

  call MPI_Allreduce(d, dr, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  write (u, '(a,*(1x,f0.1))') 'allreduce double precision sum', dr
  call MPI_Allreduce(d, dr, n, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
  write (u, '(a,*(1x,f0.1))') 'allreduce double precision max', dr
  call MPI_Allreduce(r, rr, n, MPI_REAL, MPI_MIN, MPI_COMM_WORLD, ierr)
  write (u, '(a,*(1x,f0.1))') 'allreduce real min', rr
  call MPI_Allreduce(k, kr, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  write (u, '(a,*(1x,i0))') 'allreduce integer sum', kr
  call MPI_Allreduce(l, lr, n, MPI_INTEGER8, MPI_PROD, MPI_COMM_WORLD, ierr)
  write (u, '(a,*(1x,i0))') 'allreduce integer8 prod', lr
  call MPI_Allreduce(c, cr, n, MPI_COMPLEX, MPI_SUM, MPI_COMM_WORLD, ierr)
  write (u, '(a,*(1x,f0.1))') 'allreduce complex sum', cr
  call MPI_Allreduce(z, zr, n, MPI_DOUBLE_COMPLEX, MPI_SUM, MPI_COMM_WORLD, ierr)
  write (u, '(a,*(1x,f0.1))') 'allreduce double complex sum', zr
  dr = -1
  call MPI_Reduce(d, dr, n, MPI_DOUBLE_PRECISION, MPI_SUM, np - 1, MPI_COMM_WORLD, ierr)
  if (me == np - 1) write (u, '(a,*(1x,f0.1))') 'reduce double precision sum', dr
  kr = -1
  call MPI_Reduce_scatter_block(k, kr, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
  write (u, '(a,*(1x,i0))') 'reduce_scatter_block integer max', kr(1)

  allocate (g(np), ga(n * np))
  call MPI_Allgather(k, n, MPI_INTEGER, ga, n, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  write (u, '(a,*(1x,i0))') 'allgather integer', ga
  do i = 1, np
    g(i) = me * 100 + i
  end do
  call MPI_Alltoall(g, 1, MPI_INTEGER, ga, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  write (u, '(a,*(1x,i0))') 'alltoall integer', ga(1:np)
  deallocate (g, ga)

  ! Row 2 of the root's 4 x n column-major matrix: n elements 4 apart (a vector type); the
  ! other ranks receive it into a contiguous array of n DOUBLE PRECISION.
  do i = 1, n
    a(:, i) = [dble(i), dble(10 * i + me), dble(-i), dble(me)]
  end do
  row = -1
  call MPI_Type_vector(n, 1, 4, MPI_DOUBLE_PRECISION, rowtype, ierr)
  call MPI_Type_commit(rowtype, ierr)
  if (me == 0) then
    call MPI_Bcast(a(2, 1), 1, rowtype, 0, MPI_COMM_WORLD, ierr)
    row = a(2, :)
  else
    call MPI_Bcast(row, n, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
  end if
  write (u, '(a,*(1x,f0.1))') 'bcast matrix row', row
  call MPI_Type_free(rowtype, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  write (u, '(a)') 'barrier'
  close (u)
  call MPI_Finalize(ierr)
end program interposer_fortran
