/* Fortran bridge: collectives (MPI_IN_PLACE / MPI_BOTTOM recognised in
 * every buffer argument). */
#include "bridge.h"

#define T(x) MPI_Type_f2c(*(x))
#define C(x) MPI_Comm_f2c(*(x))
#define O(x) MPI_Op_f2c(*(x))
#define I(x) ((int)*(x))
#define B(x) tcf_buf(x)

FORT(mpi_barrier, MPI_BARRIER, (MPI_Fint *comm, MPI_Fint *ierr))
{
    SETERR(ierr, MPI_Barrier(C(comm)));
}

FORT(mpi_bcast, MPI_BCAST,
     (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr))
{
    SETERR(ierr, MPI_Bcast(B(buf), I(count), T(type), I(root), C(comm)));
}

FORT(mpi_reduce, MPI_REDUCE,
     (void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op, MPI_Fint *root,
      MPI_Fint *comm, MPI_Fint *ierr))
{
    SETERR(ierr, MPI_Reduce(B(sbuf), B(rbuf), I(count), T(type), O(op), I(root), C(comm)));
}

/* (sbuf, rbuf, count, type, op, comm): Allreduce, Scan, Exscan,
 * Reduce_scatter_block (count = recvcount). */
#define RED6(lower, upper, cfn)                                                            \
    FORT(lower, upper,                                                                     \
         (void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op,           \
          MPI_Fint *comm, MPI_Fint *ierr))                                                 \
    {                                                                                      \
        SETERR(ierr, cfn(B(sbuf), B(rbuf), I(count), T(type), O(op), C(comm)));            \
    }
RED6(mpi_allreduce, MPI_ALLREDUCE, MPI_Allreduce)
RED6(mpi_scan, MPI_SCAN, MPI_Scan)
RED6(mpi_exscan, MPI_EXSCAN, MPI_Exscan)
RED6(mpi_reduce_scatter_block, MPI_REDUCE_SCATTER_BLOCK, MPI_Reduce_scatter_block)

FORT(mpi_reduce_scatter, MPI_REDUCE_SCATTER,
     (void *sbuf, void *rbuf, MPI_Fint *rcounts, MPI_Fint *type, MPI_Fint *op, MPI_Fint *comm,
      MPI_Fint *ierr))
{
    SETERR(ierr, MPI_Reduce_scatter(B(sbuf), B(rbuf), rcounts, T(type), O(op), C(comm)));
}

/* (sbuf, scount, stype, rbuf, rcount, rtype, comm): Allgather, Alltoall. */
#define ALL7(lower, upper, cfn)                                                            \
    FORT(lower, upper,                                                                     \
         (void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf, MPI_Fint *rcount,     \
          MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *ierr))                                \
    {                                                                                      \
        SETERR(ierr,                                                                       \
               cfn(B(sbuf), I(scount), T(stype), B(rbuf), I(rcount), T(rtype), C(comm)));  \
    }
ALL7(mpi_allgather, MPI_ALLGATHER, MPI_Allgather)
ALL7(mpi_alltoall, MPI_ALLTOALL, MPI_Alltoall)

/* The same with a root: Gather, Scatter. */
#define ROOT8(lower, upper, cfn)                                                           \
    FORT(lower, upper,                                                                     \
         (void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf, MPI_Fint *rcount,     \
          MPI_Fint *rtype, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr))                \
    {                                                                                      \
        SETERR(ierr, cfn(B(sbuf), I(scount), T(stype), B(rbuf), I(rcount), T(rtype),       \
                         I(root), C(comm)));                                               \
    }
ROOT8(mpi_gather, MPI_GATHER, MPI_Gather)
ROOT8(mpi_scatter, MPI_SCATTER, MPI_Scatter)

FORT(mpi_allgatherv, MPI_ALLGATHERV,
     (void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf, MPI_Fint *rcounts,
      MPI_Fint *displs, MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *ierr))
{
    SETERR(ierr, MPI_Allgatherv(B(sbuf), I(scount), T(stype), B(rbuf), rcounts, displs, T(rtype),
                                C(comm)));
}

FORT(mpi_gatherv, MPI_GATHERV,
     (void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf, MPI_Fint *rcounts,
      MPI_Fint *displs, MPI_Fint *rtype, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr))
{
    SETERR(ierr, MPI_Gatherv(B(sbuf), I(scount), T(stype), B(rbuf), rcounts, displs, T(rtype),
                             I(root), C(comm)));
}

FORT(mpi_scatterv, MPI_SCATTERV,
     (void *sbuf, MPI_Fint *scounts, MPI_Fint *displs, MPI_Fint *stype, void *rbuf,
      MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr))
{
    SETERR(ierr, MPI_Scatterv(B(sbuf), scounts, displs, T(stype), B(rbuf), I(rcount), T(rtype),
                              I(root), C(comm)));
}

FORT(mpi_alltoallv, MPI_ALLTOALLV,
     (void *sbuf, MPI_Fint *scounts, MPI_Fint *sdispls, MPI_Fint *stype, void *rbuf,
      MPI_Fint *rcounts, MPI_Fint *rdispls, MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *ierr))
{
    SETERR(ierr, MPI_Alltoallv(B(sbuf), scounts, sdispls, T(stype), B(rbuf), rcounts, rdispls,
                               T(rtype), C(comm)));
}

/* Nonblocking: the request back to Fortran. */
static void newreq(int rc, const MPI_Request *r, MPI_Fint *req, MPI_Fint *ierr)
{
    if (rc == MPI_SUCCESS)
        *req = MPI_Request_c2f(*r);
    SETERR(ierr, rc);
}

FORT(mpi_ibarrier, MPI_IBARRIER, (MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr))
{
    MPI_Request r = MPI_REQUEST_NULL;
    newreq(MPI_Ibarrier(C(comm), &r), &r, req, ierr);
}

FORT(mpi_ibcast, MPI_IBCAST,
     (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *req,
      MPI_Fint *ierr))
{
    MPI_Request r = MPI_REQUEST_NULL;
    newreq(MPI_Ibcast(B(buf), I(count), T(type), I(root), C(comm), &r), &r, req, ierr);
}

FORT(mpi_iallreduce, MPI_IALLREDUCE,
     (void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op, MPI_Fint *comm,
      MPI_Fint *req, MPI_Fint *ierr))
{
    MPI_Request r = MPI_REQUEST_NULL;
    newreq(MPI_Iallreduce(B(sbuf), B(rbuf), I(count), T(type), O(op), C(comm), &r), &r, req,
           ierr);
}
