! Fortran test program for the Fortran bridge (mpi/lib/fortran): `use mpi`,
! point-to-point in three forms and a Cartesian communicator with reorder.
!
!   fring        (no arguments; any number of ranks n >= 2)
!
! Exact point-to-point traffic, counted at the sender (world ranks):
!  1. MPI_Sendrecv around the ring, 3 times: rank r sends 10 INTEGERs
!     (40 bytes) to (r+1) mod n.
!  2. MPI_Isend/MPI_Irecv + MPI_Waitall the other way round, 2 times: rank r
!     sends 25 DOUBLE PRECISION (200 bytes) to (r-1) mod n.
!  3. MPI_Cart_create of an MPI_Dims_create(n, 2) grid, periodic in dim 0
!     only, reorder = .true.; on it, one MPI_Sendrecv of 1 INTEGER (4 bytes)
!     to the +1 neighbour of dim 0 (always one: periodic) and one of 2
!     INTEGERs (8 bytes) to the +1 neighbour of dim 1 (none at the edge).
! Collectives (counted only on request), all with MPI_IN_PLACE where it
! applies: on MPI_COMM_WORLD one MPI_Allgather of 1 INTEGER per rank (in
! place: the send count given is 0) and two MPI_Allreduce of 1 INTEGER; on
! the grid one MPI_Barrier.
!
! Output: each rank prints `rank W new C coords X Y` (W its world rank, C
! its rank in the grid); rank 0 prints `fring: ring ok`, `fring: cart
! neighbours ok` when every check passed everywhere (else `... WRONG` and
! exit status 1).
program fring
  use mpi
  implicit none
  integer :: ierr, rank, n, lap, nxt, prv, bad, anybad
  integer :: sbuf(10), rbuf(10), reqs(2), stats(MPI_STATUS_SIZE, 2)
  double precision :: dsend(25), drecv(25)
  integer :: dims(2), cart, crank, coords(2), src0, dst0, src1, dst1
  integer :: one(1), got(1), two(2), got2(2), status(MPI_STATUS_SIZE)
  integer, allocatable :: all(:)
  logical :: periods(2)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, n, ierr)
  nxt = mod(rank + 1, n)
  prv = mod(rank + n - 1, n)
  bad = 0

  ! 1. Sendrecv ring (status returned and checked).
  do lap = 1, 3
     sbuf = rank * 100 + lap
     rbuf = -1
     call MPI_Sendrecv(sbuf, 10, MPI_INTEGER, nxt, 1, rbuf, 10, MPI_INTEGER, prv, 1, &
          MPI_COMM_WORLD, status, ierr)
     if (ierr /= MPI_SUCCESS .or. any(rbuf /= prv * 100 + lap)) bad = 1
     if (status(MPI_SOURCE) /= prv .or. status(MPI_TAG) /= 1) bad = 1
  end do

  ! 2. Isend/Irecv the other way, Waitall with statuses then with
  !    MPI_STATUSES_IGNORE.
  do lap = 1, 2
     dsend = rank + 0.5d0 * lap
     drecv = -1
     call MPI_Irecv(drecv, 25, MPI_DOUBLE_PRECISION, nxt, 2, MPI_COMM_WORLD, reqs(1), ierr)
     call MPI_Isend(dsend, 25, MPI_DOUBLE_PRECISION, prv, 2, MPI_COMM_WORLD, reqs(2), ierr)
     if (lap == 1) then
        call MPI_Waitall(2, reqs, stats, ierr)
        if (stats(MPI_SOURCE, 1) /= nxt .or. stats(MPI_TAG, 1) /= 2) bad = 1
     else
        call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE, ierr)
     end if
     if (ierr /= MPI_SUCCESS .or. any(drecv /= nxt + 0.5d0 * lap)) bad = 1
     if (reqs(1) /= MPI_REQUEST_NULL .or. reqs(2) /= MPI_REQUEST_NULL) bad = 1
  end do
  ! In-place allgather of the world ranks.
  allocate(all(n))
  all = -1
  all(rank + 1) = rank
  call MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 1, MPI_INTEGER, MPI_COMM_WORLD, &
       ierr)
  do lap = 1, n
     if (all(lap) /= lap - 1) bad = 1
  end do
  deallocate(all)
  anybad = bad
  call MPI_Allreduce(MPI_IN_PLACE, anybad, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
     if (anybad == 0) then
        print '(a)', 'fring: ring ok'
     else
        print '(a)', 'fring: ring WRONG'
     end if
  end if

  ! 3. Cartesian grid with reorder = .true.
  dims = 0
  call MPI_Dims_create(n, 2, dims, ierr)
  periods = (/ .true., .false. /)
  call MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, .true., cart, ierr)
  call MPI_Comm_rank(cart, crank, ierr)
  call MPI_Cart_coords(cart, crank, 2, coords, ierr)
  print '(a,i0,a,i0,a,i0,a,i0)', 'rank ', rank, ' new ', crank, ' coords ', coords(1), ' ', &
       coords(2)
  call MPI_Cart_shift(cart, 0, 1, src0, dst0, ierr)
  call MPI_Cart_shift(cart, 1, 1, src1, dst1, ierr)
  one(1) = crank
  got(1) = -1
  call MPI_Sendrecv(one, 1, MPI_INTEGER, dst0, 3, got, 1, MPI_INTEGER, src0, 3, cart, &
       MPI_STATUS_IGNORE, ierr)
  if (got(1) /= src0) bad = 1
  two = crank
  got2 = -7
  call MPI_Sendrecv(two, 2, MPI_INTEGER, dst1, 4, got2, 2, MPI_INTEGER, src1, 4, cart, &
       status, ierr)
  if (src1 == MPI_PROC_NULL) then
     if (any(got2 /= -7) .or. status(MPI_SOURCE) /= MPI_PROC_NULL) bad = 1
  else
     if (any(got2 /= src1) .or. status(MPI_SOURCE) /= src1) bad = 1
  end if
  call MPI_Barrier(cart, ierr)
  anybad = bad
  call MPI_Allreduce(MPI_IN_PLACE, anybad, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
     if (anybad == 0) then
        print '(a)', 'fring: cart neighbours ok'
     else
        print '(a)', 'fring: cart neighbours WRONG'
     end if
  end if
  call MPI_Comm_free(cart, ierr)
  call MPI_Finalize(ierr)
  if (anybad /= 0) stop 1
end program fring
