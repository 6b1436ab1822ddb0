/* Helpers of coll.c shared with collv.c (the v variants, reduce-scatters
 * and scans): internal to libtopocomm-accel.so. */
#ifndef TOPOCOMM_ACCEL_COLL_H
#define TOPOCOMM_ACCEL_COLL_H

#include "accel.h"

/* The ranks a collective phase runs over through the transport: all of an
 * all-local communicator, or this node's members of a mixed one. Members
 * are indexed 0..n-1 (comm rank order); tc[i] is member i's transport rank. */
struct grp {
    int ctx, n, me;
    const int *tc;
};

/* A reduction's working buffers: `bytes` of data at offset lb of an element
 * buffer, as PMPI_Reduce_local expects (the address it is given is the
 * buffer's, the data starts lb bytes further). */
/* PMPI_Reduce_local's contract (inout = in (op) inout, element by
 * element), done in place for the predefined operations on the common
 * predefined types (redop.c), else through PMPI_Reduce_local. */
int acc_reduce_local(const void *in, void *inout, int count, MPI_Datatype type, MPI_Op op);
int acc_reduce_builtin(MPI_Datatype type, MPI_Op op);
int acc_reduce_to(const void *in, const void *upper, void *out, int count, size_t bytes,
                  MPI_Datatype type, MPI_Op op);
int acc_reduce_into_lower(void *lower, void *upper, int count, size_t bytes, MPI_Datatype type,
                          MPI_Op op);

struct red {
    int count;
    MPI_Datatype type;
    MPI_Op op;
    MPI_Aint lb;
    size_t bytes;
    char *acc, *tmp; /* data starts */
};

/* How a vector of `count` elements is cut into one block per member of
 * n: evenly (counts NULL: count/n each, one more for the first count % n)
 * or by counts[] (MPI_Reduce_scatter's). */
struct blocks {
    int count, n;
    const int *counts;
};

/* Block j of `count` elements cut n ways (counts NULL), or of the given
 * counts (MPI_Reduce_scatter's): its first element and count. */
void acc_block_of(const struct blocks *b, int j, int *first, int *cnt);

/* Requests of one collective: on the stack up to 64 members. */
struct reqs {
    tc_request small[64], *r;
    int n;
};
/* Room for n requests (MPI_ERR_NO_MEM when not). */
int acc_reqs_init(struct reqs *q, int n);
/* Waits for every posted request (all of them, also after a failure, so
 * none is left pointing at the caller's buffers) and frees the array: the
 * first transport code that is not 0, else 0. */
int acc_reqs_wait(struct reqs *q);
/* A receive of exactly `len` bytes from member src / a send of `len` bytes
 * to member dst, posted into q: a transport code. */
int acc_post_recv(const struct grp *g, struct reqs *q, void *buf, size_t len, int src, int tag);
int acc_post_send(const struct grp *g, struct reqs *q, const void *buf, size_t len, int dst,
                  int tag);

/* The reduce-scatter of the large reductions: member j ends with block j of
 * the reduction, in member order, in *T (NULL: a working area, returned in
 * *T, valid until the next collective). `mine` is where this member's
 * contribution's data starts; `aliased` says *T is this member's own block
 * of it (in place). d needs count, type, op, lb and bytes (contiguous
 * data). An MPI error class (transport failures included). */
int acc_coll_reduce_blocks(const struct grp *g, struct red *d, const struct blocks *b,
                           const char *mine, char **T, int aliased);
/* A large reduction by gets (gets.c): the vector cut as `cut` says,
 * member j reads block j of every other member's contribution (`mine`,
 * where its data starts) out of that member's memory, folds it in member
 * order into `own` (NULL: into its block of `out`, or only put), and puts
 * it into the receivers' results (`out`, where the whole vector's data
 * starts): every member's for root GETS_ALL (MPI_Allreduce), the root's
 * for root >= 0 (MPI_Reduce; NULL at the other members), nobody's for
 * GETS_NONE (the reduce-scatters: each member's block only in its `own`).
 * Needs single copy (tc_can_put_x) and n >= 2; d needs count, type, op, lb
 * and bytes, contiguous. An MPI error class. */
enum { GETS_ALL = -1, GETS_NONE = -2 };
int acc_coll_reduce_gets(const struct grp *g, struct red *d, const struct blocks *cut,
                         const char *mine, char *out, int root, char *own);
/* Whether a reduction of `bytes` per member over n members goes by gets
 * (root: as acc_coll_reduce_gets): the same answer on every member. */
int acc_coll_by_gets(int n, size_t bytes, int root);
/* Whether a contiguous reduction of `bytes` per member runs by blocks:
 * from ACC_SPLIT_MIN to the reduction limit (TOPOCOMM_ACCEL_COLL_MAX);
 * inline, as every small allreduce asks. */
#define ACC_SPLIT_MIN (16u << 10)
extern size_t acc_coll_split_max;
static inline int acc_coll_split_ok(size_t bytes) {
    return bytes >= ACC_SPLIT_MIN && bytes <= acc_coll_split_max;
}

/* The registration of `comm` when it is all on this node and collectives
 * whose sizes not every member knows (the v variants) run over the
 * transport: the same answer on every member (communicator, node, the
 * job's TOPOCOMM_ACCEL_COLL_MAX); else NULL. */
acc_comm *acc_coll_local(MPI_Comm comm);
/* The registration of `comm` when it is all on this node (reductions:
 * the size limit is checked by acc_coll_red_ok); else NULL. */
acc_comm *acc_coll_local_red(MPI_Comm comm);
/* All of c's members as a group. */
struct grp acc_coll_whole(const acc_comm *c);
/* All of c's members in their near order (coll.c, "Trees from the locality
 * classes"; rank order without one), and in the near order rooted at comm
 * rank root (*groot: the root's member index in it). */
struct grp acc_coll_near(const acc_comm *c);
struct grp acc_coll_rooted(acc_comm *c, int root, int *groot);
/* coll.c's xfer: send slen bytes to member dst, receive exactly rlen from
 * src (either -1: none); a transport code. */
int acc_coll_xfer(const struct grp *g, const void *sbuf, size_t slen, int dst, void *rbuf,
                  size_t rlen, int src, int tag);
/* The largest broadcast run over the transport on c: the same limit for
 * MPI_Bcast and MPI_Ibcast (TOPOCOMM_ACCEL_COLL_MAX, smaller on deep trees). */
size_t acc_coll_bcast_limit(const acc_comm *c);
/* An MPI error class from a transport code. */
int acc_coll_tc_err(int tc_rc);
/* Whether a reduction of count x type can run here (contiguous, within the
 * reduction limit); fills d->lb and d->bytes. */
int acc_coll_red_ok(struct red *d, int count, MPI_Datatype type);
/* Working buffers with src's data in d->acc (no allocation when small). */
int acc_coll_red_init(struct red *d, const void *src, int count, MPI_Datatype type, MPI_Op op);
/* Rank-ordered binomial reduction of d->acc to member 0 (an MPI class). */
int acc_coll_reduce_to_first(const struct grp *g, struct red *d);
/* Ends a collective that took the transport: err goes through comm's
 * error handler into *rc and the call counts as ours; returns 1. Every
 * failure after the transport was chosen ends here (a negative count, a
 * bad datatype, no memory), never in the PMPI call: the other members
 * took the transport too, and a PMPI call would wait for messages nobody
 * sends, with no time limit. */
int acc_coll_done(MPI_Comm comm, int err, int *rc);

#endif
