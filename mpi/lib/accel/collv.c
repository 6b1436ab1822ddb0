/* The v variants (MPI_Gatherv, MPI_Scatterv, MPI_Allgatherv, MPI_Alltoallv),
 * the reduce-scatters (MPI_Reduce_scatter_block, MPI_Reduce_scatter) and
 * the scans (MPI_Scan, MPI_Exscan) over the transport, on communicators
 * whose members are all on this node (docs/collectives.md).
 *
 * Taking the transport must be decided by every member from values all of
 * them know: in a v variant only the root (or each receiver) knows every
 * count, so the v variants run here on every all-local communicator
 * whatever the counts (acc_coll_local: the communicator, the node and the
 * job's environment decide), with one message per pair of members that
 * exchange a block, zero-length ones included, so sender and receiver
 * always agree on the messages. The reductions use the counts every member
 * passes identically (the reduce-scatter's recvcounts array, the scan's
 * count) and coll.c's limit on reductions.
 *
 * Reductions combine in rank order only (lower ranks on the left,
 * acc_reduce_local: PMPI_Reduce_local's contract), along a tree fixed by
 * the communicator size: every operation, commutative or not, gives the
 * same bits run after run. */
#include "accel.h"
#include "coll.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

enum { T_GATHERV = 32, T_SCATTERV, T_ALLGATHERV, T_ALLTOALLV, T_RSCAT, T_SCAN };

static char none;
#define NONEMPTY(p, len) ((len) ? (void *)(p) : (void *)&none)

/* The address of element `displ` of `type` in an MPI buffer. */
static char *at(const void *buf, int displ, MPI_Datatype type) {
    MPI_Aint lb, ext;
    PMPI_Type_get_extent(type, &lb, &ext);
    return (char *)buf + (MPI_Aint)displ * ext;
}

/* One member's side of a v collective: the block received from it (area)
 * and the bytes sent to it. */
struct vpeer {
    struct acc_msg rm, sm;
    int rdo, sdo, rcount;
    void *rbuf; /* where rm is unpacked (rcount elements) */
    size_t got;
    tc_request rq, sq;
};

static struct vpeer *vp_new(int n) { return calloc((size_t)n, sizeof(struct vpeer)); }

static void vp_free(struct vpeer *p, int n) {
    for (int i = 0; p && i < n; i++) {
        acc_tmp_free(p[i].rm.tmp);
        acc_tmp_free(p[i].sm.tmp);
    }
    free(p);
}

/* Posts every receive (from member me-1, me-2, ...), then every send (to
 * me+1, me+2, ...), waits for all of them (also after a failure, so none
 * is left pointing at the caller's buffers), then unpacks what came. */
static int vp_run(const struct grp *g, struct vpeer *p, MPI_Datatype rtype, MPI_Comm comm,
                  int tag) {
    int n = g->n, me = g->me, trc = 0;
    for (int k = 1; k < n && trc == 0; k++) {
        struct vpeer *q = &p[(me - k + n) % n];
        if (q->rdo)
            trc = tc_irecv_x(NONEMPTY(q->rm.data, q->rm.len), q->rm.len, g->tc[(me - k + n) % n],
                             tag, g->ctx, &q->rq);
    }
    for (int k = 1; k < n && trc == 0; k++) {
        struct vpeer *q = &p[(me + k) % n];
        if (q->sdo)
            trc = tc_isend_x(NONEMPTY(q->sm.data, q->sm.len), q->sm.len, g->tc[(me + k) % n], tag,
                             g->ctx, 0, &q->sq);
    }
    for (int i = 0; i < n; i++) {
        tc_status ts;
        if (p[i].sq != TC_REQUEST_NULL) {
            int e = acc_wait_tc(&p[i].sq, NULL);
            if (trc == 0) trc = e;
        }
        if (p[i].rq != TC_REQUEST_NULL) {
            ts.count = 0;
            int e = acc_wait_tc(&p[i].rq, &ts);
            if (trc == 0) trc = e;
            p[i].got = ts.count;
        }
    }
    int err = acc_coll_tc_err(trc);
    for (int i = 0; i < n && err == MPI_SUCCESS; i++)
        if (p[i].rdo) err = acc_unpack(&p[i].rm, p[i].got, p[i].rbuf, p[i].rcount, rtype, comm);
    return err;
}

/* Member i's receive area: rcount elements of rtype at rbuf. */
static int vp_recv(struct vpeer *q, void *rbuf, int rcount, MPI_Datatype rtype) {
    if (rcount < 0) return MPI_ERR_COUNT;
    q->rdo = 1;
    q->rbuf = rbuf;
    q->rcount = rcount;
    return acc_recv_area(rbuf, rcount, rtype, &q->rm);
}

static int vp_send(struct vpeer *q, const void *sbuf, int scount, MPI_Datatype stype,
                   MPI_Comm comm) {
    if (scount < 0) return MPI_ERR_COUNT;
    q->sdo = 1;
    return acc_pack(sbuf, scount, stype, comm, &q->sm);
}

/* A member's own block from its send buffer to its receive buffer (what
 * fits: mismatched signatures are the program's error). */
static int copy_own(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                    MPI_Datatype rtype, MPI_Comm comm) {
    struct acc_msg s, r;
    if (scount < 0 || rcount < 0) return MPI_ERR_COUNT;
    int err = acc_pack(sbuf, scount, stype, comm, &s);
    if (err != MPI_SUCCESS) return err;
    err = acc_recv_area(rbuf, rcount, rtype, &r);
    if (err == MPI_SUCCESS) {
        size_t len = s.len < r.len ? s.len : r.len;
        if (len) memmove((void *)r.data, s.data, len);
        err = acc_unpack(&r, len, rbuf, rcount, rtype, comm);
    }
    acc_tmp_free(s.tmp);
    return err;
}

/* Receives at most m->len bytes from member src; *got: how many came. */
static int recv_upto(const struct grp *g, struct acc_msg *m, int src, int tag, size_t *got) {
    tc_status ts;
    int flag = 0;
    ts.count = 0;
    int rc = tc_recv_x(NONEMPTY(m->data, m->len), m->len, g->tc[src], tag, g->ctx, ACC_SLICE,
                       &flag, &ts);
    if (rc == 0 && !flag) {
        tc_request r;
        rc = tc_irecv_x(NONEMPTY(m->data, m->len), m->len, g->tc[src], tag, g->ctx, &r);
        if (rc == 0) rc = acc_wait_tc(&r, &ts);
    }
    *got = ts.count;
    return acc_coll_tc_err(rc);
}

/* Ends a collective that ran here: the result through the error handler. */
/* A member that fails before its exchange (acc_coll_done). */
static int fail_early(struct vpeer *p, int n, MPI_Comm comm, int err, int *rc) {
    vp_free(p, n);
    return acc_coll_done(comm, err, rc);
}

/* ---- The v variants: one message per pair, all posted at once --------- */

int acc_coll_gatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                     const int rcounts[], const int displs[], MPI_Datatype rtype, int root,
                     MPI_Comm comm, int *rc) {
    acc_comm *c = acc_coll_local(comm);
    if (!c || root < 0 || root >= c->size) return 0;
    struct grp g = acc_coll_whole(c);
    int err;
    if (g.me != root) {
        struct acc_msg m;
        err = scount < 0 ? MPI_ERR_COUNT : acc_pack(sbuf, scount, stype, comm, &m);
        if (err != MPI_SUCCESS) return acc_coll_done(comm, err, rc);
        err = acc_coll_tc_err(acc_coll_xfer(&g, m.data, m.len, root, NULL, 0, -1, T_GATHERV));
        acc_tmp_free(m.tmp);
        return acc_coll_done(comm, err, rc);
    }
    struct vpeer *p = vp_new(g.n);
    err = p ? MPI_SUCCESS : MPI_ERR_NO_MEM;
    for (int i = 0; i < g.n && err == MPI_SUCCESS; i++)
        if (i != g.me) err = vp_recv(&p[i], at(rbuf, displs[i], rtype), rcounts[i], rtype);
    if (err != MPI_SUCCESS) return fail_early(p, g.n, comm, err, rc);
    if (sbuf != MPI_IN_PLACE)
        err = copy_own(sbuf, scount, stype, at(rbuf, displs[g.me], rtype), rcounts[g.me], rtype,
                       comm);
    int e = vp_run(&g, p, rtype, comm, T_GATHERV);
    vp_free(p, g.n);
    return acc_coll_done(comm, err == MPI_SUCCESS ? e : err, rc);
}

int acc_coll_scatterv(const void *sbuf, const int scounts[], const int displs[],
                      MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root,
                      MPI_Comm comm, int *rc) {
    acc_comm *c = acc_coll_local(comm);
    if (!c || root < 0 || root >= c->size) return 0;
    struct grp g = acc_coll_whole(c);
    int err;
    if (g.me != root) {
        struct acc_msg m;
        size_t got = 0;
        err = rcount < 0 ? MPI_ERR_COUNT : acc_recv_area(rbuf, rcount, rtype, &m);
        if (err != MPI_SUCCESS) return acc_coll_done(comm, err, rc);
        err = recv_upto(&g, &m, root, T_SCATTERV, &got);
        if (err == MPI_SUCCESS)
            err = acc_unpack(&m, got, rbuf, rcount, rtype, comm);
        else
            acc_tmp_free(m.tmp);
        return acc_coll_done(comm, err, rc);
    }
    struct vpeer *p = vp_new(g.n);
    err = p ? MPI_SUCCESS : MPI_ERR_NO_MEM;
    for (int i = 0; i < g.n && err == MPI_SUCCESS; i++)
        if (i != g.me) err = vp_send(&p[i], at(sbuf, displs[i], stype), scounts[i], stype, comm);
    if (err != MPI_SUCCESS) return fail_early(p, g.n, comm, err, rc);
    if (rbuf != MPI_IN_PLACE)
        err = copy_own(at(sbuf, displs[g.me], stype), scounts[g.me], stype, rbuf, rcount, rtype,
                       comm);
    int e = vp_run(&g, p, rtype, comm, T_SCATTERV);
    vp_free(p, g.n);
    return acc_coll_done(comm, err == MPI_SUCCESS ? e : err, rc);
}

int acc_coll_allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                        const int rcounts[], const int displs[], MPI_Datatype rtype,
                        MPI_Comm comm, int *rc) {
    acc_comm *c = acc_coll_local(comm);
    if (!c) return 0;
    struct grp g = acc_coll_whole(c);
    struct vpeer *p = vp_new(g.n);
    struct acc_msg own = {NULL, 0, NULL};
    int err = p ? MPI_SUCCESS : MPI_ERR_NO_MEM;
    for (int i = 0; i < g.n && err == MPI_SUCCESS; i++)
        if (i != g.me) err = vp_recv(&p[i], at(rbuf, displs[i], rtype), rcounts[i], rtype);
    /* What every other member gets: the own block, in place or not. */
    if (err == MPI_SUCCESS)
        err = sbuf == MPI_IN_PLACE
                  ? (rcounts[g.me] < 0 ? MPI_ERR_COUNT
                                       : acc_pack(at(rbuf, displs[g.me], rtype), rcounts[g.me],
                                                  rtype, comm, &own))
                  : (scount < 0 ? MPI_ERR_COUNT : acc_pack(sbuf, scount, stype, comm, &own));
    if (err != MPI_SUCCESS) return fail_early(p, g.n, comm, err, rc);
    for (int i = 0; i < g.n; i++)
        if (i != g.me) {
            p[i].sdo = 1;
            p[i].sm.data = own.data;
            p[i].sm.len = own.len;
        }
    if (sbuf != MPI_IN_PLACE)
        err = copy_own(sbuf, scount, stype, at(rbuf, displs[g.me], rtype), rcounts[g.me], rtype,
                       comm);
    int e = vp_run(&g, p, rtype, comm, T_ALLGATHERV);
    vp_free(p, g.n);
    acc_tmp_free(own.tmp);
    return acc_coll_done(comm, err == MPI_SUCCESS ? e : err, rc);
}

int acc_coll_alltoallv(const void *sbuf, const int scounts[], const int sdispls[],
                       MPI_Datatype stype, void *rbuf, const int rcounts[], const int rdispls[],
                       MPI_Datatype rtype, MPI_Comm comm, int *rc) {
    acc_comm *c = acc_coll_local(comm);
    if (!c) return 0;
    struct grp g = acc_coll_whole(c);
    struct vpeer *p = vp_new(g.n);
    int err = p ? MPI_SUCCESS : MPI_ERR_NO_MEM, in_place = sbuf == MPI_IN_PLACE;
    for (int i = 0; i < g.n && err == MPI_SUCCESS; i++) {
        if (i == g.me) continue;
        err = vp_recv(&p[i], at(rbuf, rdispls[i], rtype), rcounts[i], rtype);
        if (err != MPI_SUCCESS) break;
        if (!in_place) {
            err = vp_send(&p[i], at(sbuf, sdispls[i], stype), scounts[i], stype, comm);
            continue;
        }
        /* In place: block i is sent from a copy, since the block received
         * from member i overwrites it. */
        err = vp_send(&p[i], at(rbuf, rdispls[i], rtype), rcounts[i], rtype, comm);
        if (err == MPI_SUCCESS && !p[i].sm.tmp) {
            void *copy = malloc(p[i].sm.len ? p[i].sm.len : 1);
            if (!copy) {
                err = MPI_ERR_NO_MEM;
                break;
            }
            memcpy(copy, p[i].sm.data, p[i].sm.len);
            p[i].sm.data = p[i].sm.tmp = copy;
        }
    }
    if (err != MPI_SUCCESS) return fail_early(p, g.n, comm, err, rc);
    if (!in_place)
        err = copy_own(at(sbuf, sdispls[g.me], stype), scounts[g.me], stype,
                       at(rbuf, rdispls[g.me], rtype), rcounts[g.me], rtype, comm);
    int e = vp_run(&g, p, rtype, comm, T_ALLTOALLV);
    vp_free(p, g.n);
    return acc_coll_done(comm, err == MPI_SUCCESS ? e : err, rc);
}

/* ---- Reduce-scatter: the rank-ordered reduction to member 0, then member
 * 0 sends each member its segment (all sends posted at once). ----------- */

/* A working area of `bytes` for an in-place reduce-scatter by gets
 * (grow-only, kept for the next call); NULL without memory. */
static char *scatter_area(size_t bytes) {
    static char *area;
    static size_t cap;
    if (bytes > cap || !area) {
        free(area);
        area = malloc(bytes ? bytes : 1);
        cap = area ? bytes : 0;
    }
    return area;
}

static int red_scatter(const void *sbuf, void *rbuf, const int *counts, int each,
                       MPI_Datatype type, MPI_Op op, MPI_Comm comm, int *rc) {
    acc_comm *c = acc_coll_local_red(comm);
    if (!c) return 0;
    long long total = 0;
    for (int i = 0; i < c->size; i++) {
        int k = counts ? counts[i] : each;
        if (k < 0) return 0;
        total += k;
    }
    struct red d;
    if (total > INT_MAX) return 0;
    const void *src = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    struct grp g = acc_coll_whole(c);
    if (acc_contiguous((int)total, type, &d.lb, &d.bytes) == 1 && acc_coll_split_ok(d.bytes)) {
        /* Large: each member reduces its own segment (coll.c's blocks);
         * in place, into a working area until every segment is sent. */
        struct blocks b = {(int)total, g.n, counts};
        d.count = (int)total;
        d.type = type;
        d.op = op;
        int in_place = sbuf == MPI_IN_PLACE, err;
        size_t mine = d.bytes / (size_t)total * (size_t)(counts ? counts[g.me] : each);
        char *t = in_place ? NULL : (char *)rbuf + d.lb;
        if (acc_coll_by_gets(g.n, d.bytes, GETS_NONE)) {
            /* In place the others read this member's rbuf until its call
             * returns: the segment waits in a working area till then. */
            if (in_place && !(t = scatter_area(mine))) return acc_coll_done(comm, MPI_ERR_NO_MEM, rc);
            err = acc_coll_reduce_gets(&g, &d, &b, (const char *)src + d.lb, NULL, GETS_NONE, t);
        } else {
            err = acc_coll_reduce_blocks(&g, &d, &b, (const char *)src + d.lb, &t, 0);
        }
        if (err == MPI_SUCCESS && in_place && mine) memcpy((char *)rbuf + d.lb, t, mine);
        return acc_coll_done(comm, err, rc);
    }
    if (!acc_coll_red_ok(&d, (int)total, type)) return 0;
    int err = acc_coll_red_init(&d, src, (int)total, type, op);
    if (err != MPI_SUCCESS) return acc_coll_done(comm, err, rc);
    size_t esz = total > 0 ? d.bytes / (size_t)total : 0;
    err = acc_coll_reduce_to_first(&g, &d);
    if (err != MPI_SUCCESS) return acc_coll_done(comm, err, rc);
    size_t mine = esz * (size_t)(counts ? counts[g.me] : each);
    if (g.me != 0) {
        err = acc_coll_tc_err(
            acc_coll_xfer(&g, NULL, 0, -1, NONEMPTY((char *)rbuf + d.lb, mine), mine, 0, T_RSCAT));
        return acc_coll_done(comm, err, rc);
    }
    tc_request small[64], *q = g.n <= 64 ? small : malloc(sizeof(tc_request) * (size_t)g.n);
    if (!q) return acc_coll_done(comm, MPI_ERR_NO_MEM, rc);
    size_t off = mine;
    int trc = 0, posted = 0;
    for (int i = 1; i < g.n && trc == 0; i++, posted++) {
        size_t len = esz * (size_t)(counts ? counts[i] : each);
        trc = tc_isend_x(NONEMPTY(d.acc + off, len), len, g.tc[i], T_RSCAT, g.ctx, 0, &q[i - 1]);
        off += len;
        if (trc != 0) posted--;
    }
    if (mine) memcpy((char *)rbuf + d.lb, d.acc, mine);
    for (int i = 0; i < posted; i++) {
        int e = acc_wait_tc(&q[i], NULL);
        if (trc == 0) trc = e;
    }
    if (q != small) free(q);
    return acc_coll_done(comm, acc_coll_tc_err(trc), rc);
}

int acc_coll_reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype type,
                                  MPI_Op op, MPI_Comm comm, int *rc) {
    return red_scatter(sbuf, rbuf, NULL, rcount, type, op, comm, rc);
}

int acc_coll_reduce_scatter(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype type,
                            MPI_Op op, MPI_Comm comm, int *rc) {
    if (!rcounts) return 0;
    return red_scatter(sbuf, rbuf, rcounts, 0, type, op, comm, rc);
}

/* ---- Scans: Hillis-Steele doubling. At distance d member r sends its
 * partial result (members [r-d+1, r]) to r+d and combines the one of
 * [r-2d+1, r-d] from r-d on its left; for the exclusive scan it also
 * combines what it received into the members [.., r-1] so far, on the
 * left. log2 n rounds; the bracketing depends only on n and r. ---------- */

static char *ex_buf; /* exclusive partial results: grow-only, kept */
static size_t ex_cap;

static int scan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                MPI_Comm comm, int exclusive, int *rc) {
    acc_comm *c = acc_coll_local_red(comm);
    struct red d;
    if (!c || !acc_coll_red_ok(&d, count, type)) return 0;
    if (exclusive && d.bytes > ex_cap) {
        free(ex_buf);
        ex_buf = malloc(d.bytes);
        ex_cap = ex_buf ? d.bytes : 0;
        if (!ex_buf) return acc_coll_done(comm, MPI_ERR_NO_MEM, rc);
    }
    const void *src = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    int ierr = acc_coll_red_init(&d, src, count, type, op);
    if (ierr != MPI_SUCCESS) return acc_coll_done(comm, ierr, rc);
    struct grp g = acc_coll_whole(c);
    int n = g.n, r = g.me, err = MPI_SUCCESS, have_ex = 0;
    for (int k = 1; k < n && err == MPI_SUCCESS; k <<= 1) {
        int dst = r + k < n ? r + k : -1, from = r - k >= 0 ? r - k : -1;
        err = acc_coll_tc_err(
            acc_coll_xfer(&g, d.acc, d.bytes, dst, d.tmp, d.bytes, from, T_SCAN));
        if (err != MPI_SUCCESS || from < 0 || d.bytes == 0) continue;
        /* PMPI_Reduce_local(in, inout): inout = in (op) inout. */
        if (exclusive && !have_ex) {
            memcpy(ex_buf, d.tmp, d.bytes);
            have_ex = 1;
        } else if (exclusive) {
            err = acc_reduce_local(d.tmp - d.lb, ex_buf - d.lb, count, type, op);
        }
        if (err == MPI_SUCCESS && r + 2 * k < n)
            err = acc_reduce_local(d.tmp - d.lb, d.acc - d.lb, count, type, op);
        else if (err == MPI_SUCCESS && !exclusive)
            err = acc_reduce_local(d.tmp - d.lb, d.acc - d.lb, count, type, op);
    }
    if (err == MPI_SUCCESS && d.bytes) {
        if (!exclusive) memcpy((char *)rbuf + d.lb, d.acc, d.bytes);
        else if (have_ex) memcpy((char *)rbuf + d.lb, ex_buf, d.bytes);
    }
    return acc_coll_done(comm, err, rc);
}

int acc_coll_scan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm, int *rc) {
    return scan(sbuf, rbuf, count, type, op, comm, 0, rc);
}

int acc_coll_exscan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                    MPI_Comm comm, int *rc) {
    return scan(sbuf, rbuf, count, type, op, comm, 1, rc);
}
