/* Non-blocking collectives over the transport: MPI_Ibarrier, MPI_Ibcast and
 * MPI_Iallreduce on communicators whose members are all on this node
 * (docs/collectives.md). Each is a request of ours (kind K_COLL) carrying a
 * schedule: the blocking algorithm of coll.c cut into steps, each step a
 * few transport sends and receives posted at once. The schedule moves on
 * whenever the accelerator runs: MPI_Wait/Test and their array forms on the
 * request, and every wait of ours for anything else (acc_progress), so a
 * rank that waits for a message, or for another collective, still answers
 * its peers' steps.
 *
 * Matching: every non-blocking collective of a communicator gets the next
 * tag of the communicator's own sequence (all members start them in the
 * same order: MPI's rule), in the collective context, so its messages can
 * match neither another one's nor a blocking collective's, whichever order
 * the members progress them in.
 *
 * Where: as the v variants (acc_coll_local), so under Open MPI with more
 * ranks on the node than CPUs they stay with Open MPI: there MPICH's
 * coll/nonblocking3 (4 ranks on 2 CPUs, our collectives mixed with Open
 * MPI's own non-blocking ones and completed by every wait and test
 * variant) took 30 s to over 120 s against 20 s plain.
 *
 * The reduction is the blocking MPI_Allreduce's (recursive doubling for
 * power-of-two sizes, else the rank-ordered binomial reduction to member 0
 * and a broadcast), so it gives the same bits, run after run. */
#include "accel.h"
#include "coll.h"

#include <stdlib.h>
#include <string.h>

#define T_NBC (1 << 20) /* tags T_NBC + (sequence mod 2^20) */
#define NBC_SENDS 32

enum { NB_BARRIER, NB_BCAST, NB_ALLREDUCE };

struct acc_nbc {
    int what, n, me, ctx, tag, err;
    int *tc;                  /* member -> transport rank (a copy) */
    int step, mask, phase;    /* where the schedule is */
    tc_request rq, sq[NBC_SENDS];
    size_t rlen;              /* bytes the posted receive must bring */
    int nsq, posted;
    /* Broadcast: the bytes (packed at the root, a receive area elsewhere),
     * where they are unpacked, and the root. */
    struct acc_msg m;
    void *ubuf;
    int ucount, root;
    MPI_Datatype utype;       /* a duplicate when unpacking is needed */
    MPI_Comm comm;
    /* Allreduce: working buffers (data starts), the result's place. */
    struct red d;
    void *mem, *rbuf;
    struct acc_req *next_active;
};

static acc_req *active; /* requests whose schedule is not finished */
static char none;
#define NONEMPTY(p, len) ((len) ? (void *)(p) : (void *)&none)

static void post_send(struct acc_nbc *b, const void *buf, size_t len, int member) {
    if (b->err || b->nsq >= NBC_SENDS) {
        if (!b->err) b->err = MPI_ERR_INTERN;
        return;
    }
    tc_request *q = &b->sq[b->nsq];
    if (tc_isend_x(NONEMPTY(buf, len), len, b->tc[member], b->tag, b->ctx, 0, q) != 0)
        b->err = MPI_ERR_OTHER;
    else if (*q == TC_REQUEST_DONE)
        *q = TC_REQUEST_NULL;
    else
        b->nsq++;
    b->posted = 1;
}

static void post_recv(struct acc_nbc *b, void *buf, size_t len, int member) {
    if (b->err) return;
    b->rlen = len;
    if (tc_irecv_x(NONEMPTY(buf, len), len, b->tc[member], b->tag, b->ctx, &b->rq) != 0)
        b->err = MPI_ERR_OTHER;
    b->posted = 1;
}

/* Whether the step's posted operations are complete: waits up to `budget`
 * seconds (0: only tests) for the receive, then tests the sends. */
static int step_done(struct acc_nbc *b, double budget) {
    tc_status ts;
    int flag = 0;
    if (b->rq != TC_REQUEST_NULL) {
        int rc = budget > 0 ? tc_wait_for(&b->rq, budget, &flag, &ts)
                            : tc_test(&b->rq, &flag, &ts);
        if (rc != 0) {
            b->err = acc_coll_tc_err(rc);
            b->rq = TC_REQUEST_NULL;
            return 1;
        }
        if (!flag) return 0;
        if (ts.count != b->rlen) b->err = MPI_ERR_TRUNCATE;
        budget = 0;
    }
    while (b->nsq > 0) {
        tc_request *q = &b->sq[b->nsq - 1];
        int rc = budget > 0 ? tc_wait_for(q, budget, &flag, NULL) : tc_test(q, &flag, NULL);
        if (rc != 0) b->err = acc_coll_tc_err(rc);
        else if (!flag) return 0;
        b->nsq--;
    }
    b->posted = 0;
    return 1;
}

/* acc := lower (op) upper; upper_in_tmp: the higher members' block is in tmp. */
static void combine(struct acc_nbc *b, int upper_in_tmp) {
    struct red *d = &b->d;
    if (d->bytes == 0 || b->err) return;
    char *lower = upper_in_tmp ? d->acc : d->tmp, *upper = upper_in_tmp ? d->tmp : d->acc;
    int rc = acc_reduce_local(lower - d->lb, upper - d->lb, d->count, d->type, d->op);
    if (rc != MPI_SUCCESS) b->err = rc;
    d->tmp = lower;
    d->acc = upper;
}

/* Binomial broadcast of `len` bytes at `data` from member `root` (coll.c's
 * bcast_bytes in steps): 1 when finished. Phase 0: receive from the parent;
 * phase 1: send to every child at once. */
static int bcast_steps(struct acc_nbc *b, void *data, size_t len, int root) {
    int n = b->n, vr = (b->me - root + n) % n;
    if (b->phase == 0) {
        int mask = 1;
        while (mask < n && !(vr & mask)) mask <<= 1;
        b->mask = mask;
        b->phase = 1;
        if (mask < n) {
            post_recv(b, data, len, (vr - mask + root) % n);
            return 0;
        }
    }
    if (b->phase == 1) {
        b->phase = 2;
        for (int m = b->mask >> 1; m > 0; m >>= 1)
            if (vr + m < n) post_send(b, data, len, (vr + m + root) % n);
        if (b->posted) return 0;
    }
    return 1;
}

/* Barrier: dissemination, round k with members me +- 2^k. */
static int barrier_steps(struct acc_nbc *b) {
    int dist = 1 << b->step;
    if (dist >= b->n) return 1;
    b->step++;
    post_send(b, NULL, 0, (b->me + dist) % b->n);
    post_recv(b, NULL, 0, (b->me - dist + b->n) % b->n);
    return 0;
}

static int is_pow2(int n) { return (n & (n - 1)) == 0; }

/* Allreduce. Steps 0..: recursive doubling (power-of-two sizes), or the
 * reduction to member 0 then (step -1) the broadcast. */
static int allreduce_steps(struct acc_nbc *b) {
    struct red *d = &b->d;
    int n = b->n, me = b->me;
    if (b->step < 0) return bcast_steps(b, d->acc, d->bytes, 0);
    if (is_pow2(n)) {
        /* Each exchange: both combine lower (op) upper. */
        if (b->mask > 0) combine(b, (me ^ b->mask) > me); /* the last exchange */
        b->mask = b->mask ? b->mask << 1 : 1;
        if (b->mask >= n) return 1;
        post_send(b, d->acc, d->bytes, me ^ b->mask);
        post_recv(b, d->tmp, d->bytes, me ^ b->mask);
        return 0;
    }
    /* Reduction to member 0: at step `mask` a member r that is a multiple
     * of 2*mask takes [r+mask, r+2*mask) from r+mask (phase 1: that
     * receive is done), a member with bit `mask` sends its block to
     * r-mask (phase 2: sent) and goes on to the broadcast. */
    if (b->phase == 1) {
        combine(b, 1);
        b->mask <<= 1;
    } else if (b->phase == 2) {
        b->mask = n;
    } else if (b->mask == 0) {
        b->mask = 1;
    }
    b->phase = 0;
    for (; b->mask < n; b->mask <<= 1) {
        if (me & b->mask) {
            post_send(b, d->acc, d->bytes, me - b->mask);
            b->phase = 2;
            return 0;
        }
        if (me + b->mask < n) {
            post_recv(b, d->tmp, d->bytes, me + b->mask);
            b->phase = 1;
            return 0;
        }
    }
    b->step = -1;
    b->phase = 0;
    return bcast_steps(b, d->acc, d->bytes, 0);
}

/* Runs the schedule as far as it goes: 1 when finished. */
static int run(struct acc_nbc *b, double budget) {
    for (;;) {
        if (b->posted && !step_done(b, budget)) return 0;
        budget = 0;
        if (b->err) return 1;
        int fin = b->what == NB_BARRIER  ? barrier_steps(b)
                  : b->what == NB_BCAST ? bcast_steps(b, (void *)b->m.data, b->m.len, b->root)
                                        : allreduce_steps(b);
        if (b->err) {
            /* Nothing more is posted; what was is waited for. */
            while (b->posted && !step_done(b, 1.0)) {
            }
            return 1;
        }
        if (fin) return 1;
    }
}

/* Final copies once the schedule is finished. */
static void finish(struct acc_nbc *b) {
    if (b->what == NB_BCAST) {
        if (b->me != b->root && b->err == MPI_SUCCESS) {
            MPI_Datatype t = b->utype != MPI_DATATYPE_NULL ? b->utype : MPI_BYTE;
            if (b->m.tmp) b->err = acc_unpack(&b->m, b->m.len, b->ubuf, b->ucount, t, b->comm);
        }
    } else if (b->what == NB_ALLREDUCE && b->err == MPI_SUCCESS && b->d.bytes) {
        memcpy((char *)b->rbuf + b->d.lb, b->d.acc, b->d.bytes);
    }
}

static void unlink_active(acc_req *r) {
    for (acc_req **p = &active; *p; p = &(*p)->nbc->next_active)
        if (*p == r) {
            *p = r->nbc->next_active;
            return;
        }
}

/* Advances r's schedule; 1 (and r done) when it is finished. */
int acc_nbc_advance(acc_req *r, double budget) {
    if (r->done) return 1;
    struct acc_nbc *b = r->nbc;
    if (!run(b, budget)) return 0;
    finish(b);
    unlink_active(r);
    r->err = b->err;
    acc_note(r, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, b->err);
    acc_set_done(r);
    return 1;
}

int acc_nbc_busy(void) { return active != NULL; }

void acc_nbc_progress(void) {
    acc_req *r = active;
    while (r) {
        acc_req *next = r->nbc->next_active;
        acc_nbc_advance(r, 0);
        r = next;
    }
}

void acc_nbc_free(struct acc_nbc *b) {
    if (!b) return;
    free(b->tc);
    acc_tmp_free(b->m.tmp);
    free(b->mem);
    if (b->utype != MPI_DATATYPE_NULL) acc_type_free(&b->utype);
    free(b);
}

/* A new schedule over all of c's members in the order of `grp` (the
 * blocking collective's: the same tree, so an MPI_Iallreduce gives the
 * bits of MPI_Allreduce), its request, and the next tag of c's sequence.
 * NULL when out of memory. */
static acc_req *start(acc_comm *c, MPI_Comm comm, int what, const struct grp *grp) {
    struct grp g = *grp;
    acc_req *r = acc_req_new();
    struct acc_nbc *b = calloc(1, sizeof *b);
    int *tc = malloc(sizeof(int) * (size_t)g.n);
    if (!r || !b || !tc) {
        if (r) acc_req_release(r);
        free(b);
        free(tc);
        return NULL;
    }
    memcpy(tc, g.tc, sizeof(int) * (size_t)g.n);
    b->what = what;
    b->n = g.n;
    b->me = g.me;
    b->ctx = g.ctx;
    b->tc = tc;
    b->tag = T_NBC + (int)(c->nbc_seq++ & ((1u << 20) - 1));
    b->utype = MPI_DATATYPE_NULL;
    b->comm = comm;
    r->kind = K_COLL;
    r->nbc = b;
    r->comm = comm;
    acc_req_bind(r, c); /* the context stays reserved until it is done */
    r->active = 1;
    acc_count(r);
    return r;
}

/* A call that fails after the transport was chosen reports the error
 * itself, never through the PMPI call (acc_coll_done in coll.h says why);
 * the request is MPI_REQUEST_NULL. Returns 1. */
static int refuse(MPI_Comm comm, int err, MPI_Request *req, int *rc) {
    *req = MPI_REQUEST_NULL;
    *rc = acc_error(comm, err);
    return 1;
}

/* Hands the request out after a first turn of its schedule. */
static int launch(acc_req *r, MPI_Request *req) {
    r->nbc->next_active = active;
    active = r;
    acc_nbc_advance(r, 0);
    *req = acc_handle(r);
    acc.stats.coll_tc++;
    return MPI_SUCCESS;
}

int acc_coll_ibarrier(MPI_Comm comm, MPI_Request *req, int *rc) {
    acc_comm *c = acc_coll_local(comm);
    if (!c) return 0;
    struct grp g = acc_coll_near(c);
    acc_req *r = start(c, comm, NB_BARRIER, &g);
    if (!r) return refuse(comm, MPI_ERR_NO_MEM, req, rc);
    *rc = launch(r, req);
    return 1;
}

int acc_coll_ibcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm,
                    MPI_Request *req, int *rc) {
    acc_comm *c = acc_coll_local(comm);
    if (!c || count < 0 || root < 0 || root >= c->size) return 0;
    MPI_Aint lb;
    size_t bytes;
    if (acc_contiguous(count, type, &lb, &bytes) < 0)
        return refuse(comm, MPI_ERR_TYPE, req, rc);
    if (bytes > acc_coll_bcast_limit(c)) return 0;
    int me = c->comm_rank[acc.node_rank];
    struct acc_msg m;
    MPI_Datatype held = MPI_DATATYPE_NULL;
    int err = me == root ? acc_pack(buf, count, type, comm, &m) : acc_recv_area(buf, count, type, &m);
    if (err != MPI_SUCCESS) return refuse(comm, err, req, rc);
    if (me != root && m.tmp && PMPI_Type_dup(type, &held) != MPI_SUCCESS) {
        acc_tmp_free(m.tmp);
        return refuse(comm, MPI_ERR_TYPE, req, rc);
    }
    int groot;
    struct grp g = acc_coll_rooted(c, root, &groot);
    acc_req *r = start(c, comm, NB_BCAST, &g);
    if (!r) {
        acc_tmp_free(m.tmp);
        if (held != MPI_DATATYPE_NULL) acc_type_free(&held);
        return refuse(comm, MPI_ERR_NO_MEM, req, rc);
    }
    struct acc_nbc *b = r->nbc;
    b->m = m;
    b->utype = held;
    b->ubuf = buf;
    b->ucount = count;
    b->root = groot;
    *rc = launch(r, req);
    return 1;
}

int acc_coll_iallreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                        MPI_Comm comm, MPI_Request *req, int *rc) {
    acc_comm *c = acc_coll_local(comm);
    struct red d;
    if (!c || !acc_coll_red_ok(&d, count, type)) return 0;
    size_t half = (d.bytes + 63) & ~(size_t)63;
    char *mem = aligned_alloc(64, half ? 2 * half : 64);
    if (!mem) return refuse(comm, MPI_ERR_NO_MEM, req, rc);
    int commutes = 0;
    if (PMPI_Op_commutative(op, &commutes) != MPI_SUCCESS) commutes = 0;
    struct grp g = commutes ? acc_coll_near(c) : acc_coll_whole(c);
    acc_req *r = start(c, comm, NB_ALLREDUCE, &g);
    if (!r) {
        free(mem);
        return refuse(comm, MPI_ERR_NO_MEM, req, rc);
    }
    struct acc_nbc *b = r->nbc;
    d.count = count;
    d.type = type;
    d.op = op;
    d.acc = mem;
    d.tmp = mem + half;
    const void *src = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    if (d.bytes) memcpy(d.acc, (const char *)src + d.lb, d.bytes);
    b->d = d;
    b->mem = mem;
    b->rbuf = rbuf;
    *rc = launch(r, req);
    return 1;
}

/* ---- The MPI_ entry points ----------------------------------------------- */

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *req) {
    acc_settle();
    int rc;
    if (acc_coll_ibarrier(comm, req, &rc)) return rc;
    if (acc.on) acc.stats.coll_plain++;
    return PMPI_Ibarrier(comm, req);
}

int MPI_Ibcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm,
               MPI_Request *req) {
    acc_settle();
    int rc;
    if (acc_coll_ibcast(buf, count, type, root, comm, req, &rc)) return rc;
    if (acc.on) acc.stats.coll_plain++;
    return PMPI_Ibcast(buf, count, type, root, comm, req);
}

int MPI_Iallreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                   MPI_Comm comm, MPI_Request *req) {
    acc_settle();
    int rc;
    if (acc_coll_iallreduce(sbuf, rbuf, count, type, op, comm, req, &rc)) return rc;
    if (acc.on) acc.stats.coll_plain++;
    return PMPI_Iallreduce(sbuf, rbuf, count, type, op, comm, req);
}
