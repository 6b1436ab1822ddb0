/* Collective wrappers of the tracer (only when TOPOCOMM_TRACE_COLLECTIVES is
 * set). A collective is counted as the point-to-point messages of one
 * *logical* algorithm, the textbook one for each operation, at the sending
 * rank; what the MPI library really does internally (and which changes with
 * message size and library version) is deliberately not modelled. The
 * decompositions (also in docs/mpi.md):
 *   Barrier        dissemination: round k sends 0 bytes to r+2^k (mod n)
 *   Bcast          binomial tree rooted at root (MPICH's short-message bcast)
 *   Reduce         binomial tree towards root
 *   Allreduce      recursive doubling; for n not a power of two the first
 *                  2*(n-p2) ranks pre-fold (even -> odd) and get the result
 *                  back at the end (MPICH's algorithm)
 *   Allgather(v)   ring: n-1 steps, step i sends block (r-i) to r+1
 *   Gather(v)      flat: each non-root sends its block to root
 *   Scatter(v)     flat: root sends each rank its block
 *   Alltoall(v,w)  all pairs: each rank sends its block to every other rank
 *   Reduce_scatter(_block)  all pairs: rank sends block j to rank j
 *   Scan, Exscan   linear chain: r sends to r+1
 * Non-blocking variants (Ibarrier, Ibcast, Ireduce, Iallreduce, Iallgather,
 * Igather, Iscatter, Ialltoall) are counted like their blocking forms.
 * Intercommunicator collectives and neighbourhood collectives are not
 * counted. Messages to oneself are never counted. */
#include "trace.h"

#include <stddef.h>

static int coll_ctx(MPI_Comm comm, int *r, int *n)
{
    int inter = 0;
    if (!tc_trace_colls || tc_world_rank < 0)
        return 0;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter)
        return 0;
    PMPI_Comm_rank(comm, r);
    PMPI_Comm_size(comm, n);
    return 1;
}

static void add(MPI_Comm comm, int dst, uint64_t bytes, uint64_t msgs)
{
    tc_lock();
    int w = tc_world_of(comm, dst);
    tc_unlock();
    tc_add_world(w, bytes, msgs);
}

static void d_barrier(MPI_Comm comm)
{
    int r, n;
    if (!coll_ctx(comm, &r, &n))
        return;
    for (int k = 1; k < n; k <<= 1)
        add(comm, (r + k) % n, 0, 1);
}

static void d_bcast(MPI_Comm comm, int root, uint64_t bytes)
{
    int r, n;
    if (!coll_ctx(comm, &r, &n))
        return;
    int vr = (r - root + n) % n, mask = 1;
    while (mask < n && !(vr & mask))
        mask <<= 1;
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (vr + mask < n)
            add(comm, (vr + mask + root) % n, bytes, 1);
}

static void d_reduce(MPI_Comm comm, int root, uint64_t bytes)
{
    int r, n;
    if (!coll_ctx(comm, &r, &n))
        return;
    int vr = (r - root + n) % n;
    for (int mask = 1; mask < n; mask <<= 1)
        if (vr & mask) {
            add(comm, ((vr & ~mask) + root) % n, bytes, 1);
            break;
        }
}

static void d_allreduce(MPI_Comm comm, uint64_t bytes)
{
    int r, n;
    if (!coll_ctx(comm, &r, &n))
        return;
    int p2 = 1;
    while (p2 * 2 <= n)
        p2 *= 2;
    int rem = n - p2, newrank;
    if (r < 2 * rem) {
        if (r % 2 == 0) {
            add(comm, r + 1, bytes, 1); /* fold into the odd partner, wait for the result */
            return;
        }
        newrank = r / 2;
    } else {
        newrank = r - rem;
    }
    for (int mask = 1; mask < p2; mask <<= 1) {
        int nd = newrank ^ mask;
        add(comm, nd < rem ? nd * 2 + 1 : nd + rem, bytes, 1);
    }
    if (r < 2 * rem)
        add(comm, r - 1, bytes, 1); /* result back to the folded even rank */
}

static void d_ring_allgather(MPI_Comm comm, uint64_t bytes)
{
    int r, n;
    if (!coll_ctx(comm, &r, &n) || n < 2)
        return;
    add(comm, (r + 1) % n, bytes * (uint64_t)(n - 1), (uint64_t)(n - 1));
}

static void d_ring_allgatherv(MPI_Comm comm, const int *counts, MPI_Datatype type)
{
    int r, n;
    if (!coll_ctx(comm, &r, &n) || n < 2)
        return;
    uint64_t total = 0;
    for (int i = 0; i < n - 1; i++)
        total += tc_bytes_of(counts[(r - i + n) % n], type);
    add(comm, (r + 1) % n, total, (uint64_t)(n - 1));
}

static void d_to_root(MPI_Comm comm, int root, uint64_t bytes)
{
    int r, n;
    if (!coll_ctx(comm, &r, &n) || r == root)
        return;
    add(comm, root, bytes, 1);
}

/* counts == NULL: every rank gets `count` elements. */
static void d_from_root(MPI_Comm comm, int root, int count, const int *counts,
                        MPI_Datatype type)
{
    int r, n;
    if (!coll_ctx(comm, &r, &n) || r != root)
        return;
    for (int j = 0; j < n; j++)
        add(comm, j, tc_bytes_of(counts ? counts[j] : count, type), 1);
}

static void d_all_pairs(MPI_Comm comm, int count, const int *counts, MPI_Datatype type,
                        const MPI_Datatype *types)
{
    int r, n;
    if (!coll_ctx(comm, &r, &n))
        return;
    for (int j = 0; j < n; j++)
        add(comm, j, tc_bytes_of(counts ? counts[j] : count, types ? types[j] : type), 1);
}

static void d_chain(MPI_Comm comm, uint64_t bytes)
{
    int r, n;
    if (!coll_ctx(comm, &r, &n) || r + 1 >= n)
        return;
    add(comm, r + 1, bytes, 1);
}

/* ---- wrappers -------------------------------------------------------- */

int MPI_Barrier(MPI_Comm comm)
{
    int rc = PMPI_Barrier(comm);
    if (rc == MPI_SUCCESS)
        d_barrier(comm);
    return rc;
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *req)
{
    int rc = PMPI_Ibarrier(comm, req);
    if (rc == MPI_SUCCESS)
        d_barrier(comm);
    return rc;
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    int rc = PMPI_Bcast(buf, count, type, root, comm);
    if (rc == MPI_SUCCESS)
        d_bcast(comm, root, tc_bytes_of(count, type));
    return rc;
}

int MPI_Ibcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm,
               MPI_Request *req)
{
    int rc = PMPI_Ibcast(buf, count, type, root, comm, req);
    if (rc == MPI_SUCCESS)
        d_bcast(comm, root, tc_bytes_of(count, type));
    return rc;
}

int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
               MPI_Comm comm)
{
    int rc = PMPI_Reduce(sbuf, rbuf, count, type, op, root, comm);
    if (rc == MPI_SUCCESS)
        d_reduce(comm, root, tc_bytes_of(count, type));
    return rc;
}

int MPI_Ireduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                MPI_Comm comm, MPI_Request *req)
{
    int rc = PMPI_Ireduce(sbuf, rbuf, count, type, op, root, comm, req);
    if (rc == MPI_SUCCESS)
        d_reduce(comm, root, tc_bytes_of(count, type));
    return rc;
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm)
{
    int rc = PMPI_Allreduce(sbuf, rbuf, count, type, op, comm);
    if (rc == MPI_SUCCESS)
        d_allreduce(comm, tc_bytes_of(count, type));
    return rc;
}

int MPI_Iallreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                   MPI_Comm comm, MPI_Request *req)
{
    int rc = PMPI_Iallreduce(sbuf, rbuf, count, type, op, comm, req);
    if (rc == MPI_SUCCESS)
        d_allreduce(comm, tc_bytes_of(count, type));
    return rc;
}

/* With MPI_IN_PLACE the block a rank contributes is described by the
 * receive arguments. */
#define BLOCK_BYTES(sbuf, scount, stype, rcount, rtype)                                \
    ((sbuf) == MPI_IN_PLACE ? tc_bytes_of(rcount, rtype) : tc_bytes_of(scount, stype))

int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm)
{
    int rc = PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm);
    if (rc == MPI_SUCCESS)
        d_ring_allgather(comm, BLOCK_BYTES(sbuf, scount, stype, rcount, rtype));
    return rc;
}

int MPI_Iallgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                   MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req)
{
    int rc = PMPI_Iallgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, req);
    if (rc == MPI_SUCCESS)
        d_ring_allgather(comm, BLOCK_BYTES(sbuf, scount, stype, rcount, rtype));
    return rc;
}

int MPI_Allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                   const int rcounts[], const int displs[], MPI_Datatype rtype, MPI_Comm comm)
{
    int rc = PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm);
    if (rc == MPI_SUCCESS)
        d_ring_allgatherv(comm, rcounts, rtype);
    return rc;
}

int MPI_Gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
               MPI_Datatype rtype, int root, MPI_Comm comm)
{
    int rc = PMPI_Gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm);
    if (rc == MPI_SUCCESS)
        d_to_root(comm, root, tc_bytes_of(scount, stype));
    return rc;
}

int MPI_Igather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req)
{
    int rc = PMPI_Igather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req);
    if (rc == MPI_SUCCESS)
        d_to_root(comm, root, tc_bytes_of(scount, stype));
    return rc;
}

int MPI_Gatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                const int rcounts[], const int displs[], MPI_Datatype rtype, int root,
                MPI_Comm comm)
{
    int rc = PMPI_Gatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm);
    if (rc == MPI_SUCCESS)
        d_to_root(comm, root, tc_bytes_of(scount, stype));
    return rc;
}

int MPI_Scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                MPI_Datatype rtype, int root, MPI_Comm comm)
{
    int rc = PMPI_Scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm);
    if (rc == MPI_SUCCESS)
        d_from_root(comm, root, scount, NULL, stype);
    return rc;
}

int MPI_Iscatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                 MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req)
{
    int rc = PMPI_Iscatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req);
    if (rc == MPI_SUCCESS)
        d_from_root(comm, root, scount, NULL, stype);
    return rc;
}

int MPI_Scatterv(const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype,
                 void *rbuf, int rcount, MPI_Datatype rtype, int root, MPI_Comm comm)
{
    int rc = PMPI_Scatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm);
    if (rc == MPI_SUCCESS)
        d_from_root(comm, root, 0, scounts, stype);
    return rc;
}

int MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                 MPI_Datatype rtype, MPI_Comm comm)
{
    int rc = PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm);
    if (rc == MPI_SUCCESS) {
        if (sbuf == MPI_IN_PLACE)
            d_all_pairs(comm, rcount, NULL, rtype, NULL);
        else
            d_all_pairs(comm, scount, NULL, stype, NULL);
    }
    return rc;
}

int MPI_Ialltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req)
{
    int rc = PMPI_Ialltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, req);
    if (rc == MPI_SUCCESS) {
        if (sbuf == MPI_IN_PLACE)
            d_all_pairs(comm, rcount, NULL, rtype, NULL);
        else
            d_all_pairs(comm, scount, NULL, stype, NULL);
    }
    return rc;
}

int MPI_Alltoallv(const void *sbuf, const int scounts[], const int sdispls[],
                  MPI_Datatype stype, void *rbuf, const int rcounts[], const int rdispls[],
                  MPI_Datatype rtype, MPI_Comm comm)
{
    int rc = PMPI_Alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm);
    if (rc == MPI_SUCCESS) {
        if (sbuf == MPI_IN_PLACE)
            d_all_pairs(comm, 0, rcounts, rtype, NULL);
        else
            d_all_pairs(comm, 0, scounts, stype, NULL);
    }
    return rc;
}

int MPI_Alltoallw(const void *sbuf, const int scounts[], const int sdispls[],
                  const MPI_Datatype stypes[], void *rbuf, const int rcounts[],
                  const int rdispls[], const MPI_Datatype rtypes[], MPI_Comm comm)
{
    int rc = PMPI_Alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm);
    if (rc == MPI_SUCCESS) {
        if (sbuf == MPI_IN_PLACE)
            d_all_pairs(comm, 0, rcounts, MPI_DATATYPE_NULL, rtypes);
        else
            d_all_pairs(comm, 0, scounts, MPI_DATATYPE_NULL, stypes);
    }
    return rc;
}

int MPI_Reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype type,
                             MPI_Op op, MPI_Comm comm)
{
    int rc = PMPI_Reduce_scatter_block(sbuf, rbuf, rcount, type, op, comm);
    if (rc == MPI_SUCCESS)
        d_all_pairs(comm, rcount, NULL, type, NULL);
    return rc;
}

int MPI_Reduce_scatter(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype type,
                       MPI_Op op, MPI_Comm comm)
{
    int rc = PMPI_Reduce_scatter(sbuf, rbuf, rcounts, type, op, comm);
    if (rc == MPI_SUCCESS)
        d_all_pairs(comm, 0, rcounts, type, NULL);
    return rc;
}

int MPI_Scan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
             MPI_Comm comm)
{
    int rc = PMPI_Scan(sbuf, rbuf, count, type, op, comm);
    if (rc == MPI_SUCCESS)
        d_chain(comm, tc_bytes_of(count, type));
    return rc;
}

int MPI_Exscan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
               MPI_Comm comm)
{
    int rc = PMPI_Exscan(sbuf, rbuf, count, type, op, comm);
    if (rc == MPI_SUCCESS)
        d_chain(comm, tc_bytes_of(count, type));
    return rc;
}
