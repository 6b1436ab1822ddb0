/* Point-to-point wrappers: every send and receive flavour, probes and
 * matched probes, and the receives held back on mixed communicators.
 *
 * MPI_ANY_SOURCE on a communicator with members on other nodes: the
 * receive cannot be posted on both paths (one of them could match a
 * message the other also takes), so it is held back in a per-communicator
 * queue with every receive posted after it on that communicator (posting
 * those first would let them overtake it). The head of the queue is
 * resolved when a matching message shows up on either path (a probe); it
 * is then posted on that path for that exact source and tag, which takes
 * that very message (the first from that source with that tag), and the
 * queue moves on. */
#include "accel.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* The plain path's counters, kept only for --verbose: on the remote path
 * every nanosecond is overhead over the MPI's own latency. */
static inline void count_plain(int count, MPI_Datatype type) {
    if (!acc.verbose) return;
    acc.stats.plain_msgs++;
    acc.stats.plain_bytes += acc_bytes(count, type);
}

/* The communicator when a send from here to `dst` goes through the transport. */
static inline __attribute__((always_inline)) acc_comm *send_route(MPI_Comm comm, int dst) {
    if (!acc.on || dst == MPI_PROC_NULL) return NULL;
    acc_comm *c = acc_comm_find(comm);
    return c && acc_local(c, dst) >= 0 ? c : NULL;
}

/* The communicator when a receive from `src` with `tag` must be one of
 * ours (transport, or held back behind a receive it overlaps); NULL:
 * straight to PMPI. */
static inline __attribute__((always_inline)) acc_comm *recv_route(MPI_Comm comm, int src,
                                                                  int tag) {
    if (!acc.on || src == MPI_PROC_NULL) return NULL;
    acc_comm *c = acc_comm_find(comm);
    if (!c) return NULL;
    if (src == MPI_ANY_SOURCE || acc_local(c, src) >= 0) return c;
    return acc_held_back(c, src, tag) ? c : NULL;
}

int acc_wait_tc(tc_request *r, tc_status *ts) {
    if (*r == TC_REQUEST_DONE) {
        /* A send complete when posted: no call into the library (230
         * instructions per collective step that waits for its sends);
         * the status the transport gives such a handle. */
        *r = TC_REQUEST_NULL;
        if (ts) *ts = (tc_status){acc.node_rank, 0, 0};
        return 0;
    }
    for (;;) {
        int flag = 0;
        int rc = tc_wait_for(r, ACC_SLICE, &flag, ts);
        if (rc != 0) return rc;
        if (flag) return 0;
        acc_mpi_progress();
        acc_progress();
    }
}

static int tc_to_mpi(int rc) {
    return rc == 0 ? MPI_SUCCESS : rc == TC_ERR_TRUNCATED ? MPI_ERR_TRUNCATE : MPI_ERR_OTHER;
}

/* ---- Sends --------------------------------------------------------------- */

/* A blocking send over the transport. A message that can go without a
 * rendezvous (inline in a cell, or eager through a slot) goes out in one
 * transport call, complete (tc_send_now_x: no request, no wait): the
 * latency path. Synchronous sends, and messages that call does not take,
 * take a transport request and its wait. */
__attribute__((noinline)) static int send_local(acc_comm *c, const void *buf, int count,
                                                MPI_Datatype type, int dst, int tag, int flags) {
    struct acc_msg m;
    int rc = acc_pack(buf, count, type, c->comm, &m);
    if (rc != MPI_SUCCESS) return acc_error(c->comm, rc);
    int peer = acc_local(c, dst);
    if ((flags & TC_SEND_SYNC) || tc_send_now_x(m.data, m.len, peer, tag, c->ctx) != 1) {
        acc_settle(); /* the wait below progresses */
        tc_request r;
        rc = tc_isend_x(m.data, m.len, peer, tag, c->ctx, flags, &r);
        if (rc == 0) rc = acc_wait_tc(&r, NULL);
    }
    acc_tmp_free(m.tmp);
    acc.stats.tc_msgs++;
    acc.stats.tc_bytes += m.len;
    return acc_error(c->comm, tc_to_mpi(rc));
}

int acc_send_buffered(const void *buf, int count, MPI_Datatype type, acc_comm *c, int peer,
                      int tag) {
    acc_req *r = acc_req_new();
    if (!r) return MPI_ERR_NO_MEM;
    int rc = acc_pack(buf, count, type, c->comm, &r->msg);
    if (rc == MPI_SUCCESS && !r->msg.tmp) {
        /* Contiguous: copy, the application may reuse its buffer at once. */
        r->msg.tmp = acc_tmp_alloc(r->msg.len);
        if (!r->msg.tmp) rc = MPI_ERR_NO_MEM;
        else {
            memcpy(r->msg.tmp, r->msg.data, r->msg.len);
            r->msg.data = r->msg.tmp;
        }
    }
    if (rc != MPI_SUCCESS) {
        acc_req_release(r);
        return rc;
    }
    r->kind = K_SEND;
    r->is_send = 1;
    acc_req_bind(r, c);
    r->comm = c->comm;
    if (tc_isend_x(r->msg.data, r->msg.len, acc_local(c, peer), tag, c->ctx, 0, &r->tc) != 0) {
        acc_req_release(r);
        return MPI_ERR_OTHER;
    }
    acc.stats.tc_msgs++;
    acc.stats.tc_bytes += r->msg.len;
    acc_count(r);
    acc_orphan(r);
    return MPI_SUCCESS;
}

/* A blocking send wrapper: the transport to a rank of this node, else the
 * PMPI call (with the progress helper on duty when needed). Every path ends
 * in a tail call and the slow ones are out of line, so the plain-MPI path
 * adds no stack frame of ours to the MPI's latency. */
#define SEND_WRAPPER(NAME, FLAGS)                                                                \
    __attribute__((noinline)) static int plain_##NAME(const void *buf, int count,                \
                                                      MPI_Datatype type, int dst, int tag,       \
                                                      MPI_Comm comm) {                           \
        acc_settle();                                                                            \
        if (acc.on && dst != MPI_PROC_NULL) count_plain(count, type);                            \
        return ACC_BLOCKING(PMPI_##NAME(buf, count, type, dst, tag, comm));                      \
    }                                                                                            \
    __attribute__((noinline)) static int route_##NAME(const void *buf, int count,                \
                                                      MPI_Datatype type, int dst, int tag,       \
                                                      MPI_Comm comm) {                           \
        acc_comm *c = send_route(comm, dst);                                                     \
        if (c) return send_local(c, buf, count, type, dst, tag, FLAGS);                          \
        return plain_##NAME(buf, count, type, dst, tag, comm);                                   \
    }                                                                                            \
    int MPI_##NAME(const void *buf, int count, MPI_Datatype type, int dst, int tag,               \
                   MPI_Comm comm) {                                                              \
        if (acc_plain_now(comm, dst, 1)) return PMPI_##NAME(buf, count, type, dst, tag, comm);      \
        return route_##NAME(buf, count, type, dst, tag, comm);                                   \
    }

SEND_WRAPPER(Send, 0)
SEND_WRAPPER(Rsend, 0)
SEND_WRAPPER(Ssend, TC_SEND_SYNC)

int MPI_Bsend(const void *buf, int count, MPI_Datatype type, int dst, int tag, MPI_Comm comm) {
    acc_settle();
    acc_comm *c = send_route(comm, dst);
    if (!c) {
        if (acc.on && dst != MPI_PROC_NULL) count_plain(count, type);
        return ACC_BLOCKING(PMPI_Bsend(buf, count, type, dst, tag, comm));
    }
    return acc_error(comm, acc_send_buffered(buf, count, type, c, dst, tag));
}

/* A send request's arguments (kept for persistent restarts). */
static void send_args(acc_req *r, const void *buf, int count, MPI_Datatype type, int dst, int tag,
                      MPI_Comm comm, acc_comm *c) {
    r->is_send = 1;
    acc_req_bind(r, c);
    r->comm = comm;
    r->buf = (void *)buf;
    r->count = count;
    r->type = type;
    r->peer = dst;
    r->tag = tag;
}

/* The message-rate path of MPI_Isend: a contiguous message of the last
 * datatype seen, pushed into the ring at once, completes at posting and
 * gets the shared completed-send handle (acc_sent). Returns 1 when it
 * took the send (the MPI result in *rc), 0 when the full path must (a
 * packed message, or no shared handle). A send the transport could not
 * push at once gets a request of its own around the transport's. */
static int isend_now(const void *buf, int count, MPI_Datatype type, int dst, int tag,
                     MPI_Comm comm, acc_comm *c, MPI_Request *req, int *rc) {
    struct acc_msg m;
    MPI_Request done = acc_sent_handle();
    if (done == MPI_REQUEST_NULL || !acc_msg_fast(buf, count, type, &m)) return 0;
    if (tc_send_now_x(m.data, m.len, acc_local(c, dst), tag, c->ctx) == 1) {
        acc.stats.tc_msgs++;
        acc.stats.tc_bytes += m.len;
        *req = done;
        *rc = MPI_SUCCESS;
        return 1;
    }
    acc_settle(); /* the general send may progress */
    tc_request t;
    *rc = acc_tc_send(c, &m, dst, tag, 0, &t);
    if (*rc != MPI_SUCCESS) {
        *rc = acc_error(comm, *rc);
        return 1;
    }
    if (t == TC_REQUEST_DONE) {
        *req = done;
        *rc = MPI_SUCCESS;
        return 1;
    }
    acc_req *r = acc_req_new();
    if (!r) {
        /* The message is on its way; only its completion cannot be
         * tracked: wait for it here. */
        *rc = acc_error(comm, tc_to_mpi(acc_wait_tc(&t, NULL)));
        *req = done;
        return 1;
    }
    send_args(r, buf, count, type, dst, tag, comm, c);
    r->kind = K_SEND;
    r->active = 1;
    r->msg = m;
    r->tc = t;
    acc_count(r);
    *req = acc_handle(r);
    *rc = MPI_SUCCESS;
    return 1;
}

/* A non-blocking send (or persistent send when `persistent`). */
static int isend(const void *buf, int count, MPI_Datatype type, int dst, int tag, MPI_Comm comm,
                 acc_comm *c, int sync, int buffered, int persistent, MPI_Request *req) {
    int rc;
    if (!sync && !buffered && !persistent && isend_now(buf, count, type, dst, tag, comm, c, req, &rc))
        return rc;
    acc_settle();
    acc_req *r = acc_req_new();
    if (!r) return acc_error(comm, MPI_ERR_NO_MEM);
    send_args(r, buf, count, type, dst, tag, comm, c);
    r->sync = sync;
    r->buffered = buffered;
    r->persistent = persistent;
    *req = acc_handle(r);
    if (persistent) {
        /* The application may free its datatype while the request lives. */
        if (PMPI_Type_dup(type, &r->type) == MPI_SUCCESS) r->owns_type = 1;
        else r->type = type;
        r->kind = K_DONE;
        acc_set_done(r); /* inactive */
        acc_note(r, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, MPI_SUCCESS);
        return MPI_SUCCESS;
    }
    return acc_error(comm, acc_req_start(r));
}

/* As SEND_WRAPPER: the plain-MPI path is a tail call after a few loads. */
#define ISEND_WRAPPER(NAME, SYNC, BUFFERED)                                                      \
    __attribute__((noinline)) static int route_##NAME(const void *buf, int count,                \
                                                      MPI_Datatype type, int dst, int tag,       \
                                                      MPI_Comm comm, MPI_Request *req) {         \
        acc_comm *c = send_route(comm, dst);                                                     \
        if (!c) {                                                                                \
            acc_settle();                                                                        \
            if (acc.on && dst != MPI_PROC_NULL) count_plain(count, type);                        \
            return PMPI_##NAME(buf, count, type, dst, tag, comm, req);                           \
        }                                                                                        \
        return isend(buf, count, type, dst, tag, comm, c, SYNC, BUFFERED, 0, req);               \
    }                                                                                            \
    int MPI_##NAME(const void *buf, int count, MPI_Datatype type, int dst, int tag,               \
                   MPI_Comm comm, MPI_Request *req) {                                            \
        if (acc_plain_now(comm, dst, 0)) return PMPI_##NAME(buf, count, type, dst, tag, comm, req); \
        return route_##NAME(buf, count, type, dst, tag, comm, req);                              \
    }

ISEND_WRAPPER(Isend, 0, 0)
ISEND_WRAPPER(Irsend, 0, 0)
ISEND_WRAPPER(Issend, 1, 0)
ISEND_WRAPPER(Ibsend, 0, 1)

#define SEND_INIT_WRAPPER(NAME, SYNC, BUFFERED)                                                  \
    int MPI_##NAME(const void *buf, int count, MPI_Datatype type, int dst, int tag,               \
                   MPI_Comm comm, MPI_Request *req) {                                            \
        acc_comm *c = send_route(comm, dst);                                                     \
        if (!c) return PMPI_##NAME(buf, count, type, dst, tag, comm, req);                       \
        return isend(buf, count, type, dst, tag, comm, c, SYNC, BUFFERED, 1, req);               \
    }

SEND_INIT_WRAPPER(Send_init, 0, 0)
SEND_INIT_WRAPPER(Rsend_init, 0, 0)
SEND_INIT_WRAPPER(Ssend_init, 1, 0)
SEND_INIT_WRAPPER(Bsend_init, 0, 1)

int MPI_Buffer_detach(void *buffer_addr, int *size) {
    acc_settle();
    if (acc.on) acc_drain();
    return PMPI_Buffer_detach(buffer_addr, size);
}

/* ---- Receives ------------------------------------------------------------ */

static acc_req *new_recv(void *buf, int count, MPI_Datatype type, int src, int tag,
                         MPI_Comm comm, acc_comm *c) {
    acc_req *r = acc_req_new();
    if (!r) return NULL;
    acc_req_bind(r, c);
    r->comm = comm;
    r->buf = buf;
    r->count = count;
    r->type = type;
    r->peer = src;
    r->tag = tag;
    return r;
}

/* The receive path of MPI_Irecv for a contiguous receive `m` (the
 * message area of the last datatype seen) on a communicator all on this
 * node: one transport call (tc_irecv_now_x) posts the receive, or takes its
 * message at once when it is already here (a window behind a faster
 * sender), and then r completes with no transport request. Returns 1 when
 * it did either (r started), 0 when nothing happened and r must be started
 * the general way (which also reports errors). */
static int irecv_now(acc_req *r, const struct acc_msg *m) {
    int tsrc = r->peer == MPI_ANY_SOURCE ? TC_ANY_SOURCE : acc_local(r->c, r->peer);
    tc_status ts;
    int now = 0;
    if (tc_irecv_now_x((void *)m->data, m->len, tsrc, r->tag == MPI_ANY_TAG ? TC_ANY_TAG : r->tag,
                       r->c->ctx, &r->tc, &now, &ts) != 0)
        return 0;
    r->active = 1;
    r->msg = *m;
    if (now) {
        r->kind = K_DONE;
        acc_set_done(r);
        acc_note(r, r->c->comm_rank[ts.source], ts.tag, ts.count, MPI_SUCCESS);
        acc.stats.tc_recvs++;
    } else {
        r->kind = K_RECV;
        acc_count(r);
    }
    return 1;
}

/* ---- Lazily posted receives (accel.h) ------------------------------------ */

ACC_HIDDEN acc_req *acc_lazy_head;
static acc_req *lazy_tail;

/* Records r (contiguous, message area m, on a communicator all on this
 * node) to be posted at the next call; 0 when r must be posted now. Only
 * tags the transport accepts are recorded, so posting later cannot fail
 * where posting now would have failed, except for a peer lost meanwhile
 * (reported by the request, as for a posted receive). */
static int irecv_lazy(acc_req *r, const struct acc_msg *m) {
    if (!acc.lazy || (r->tag < 0 && r->tag != MPI_ANY_TAG)) return 0;
    r->kind = K_LAZY;
    r->active = 1;
    r->msg = *m;
    r->next = NULL;
    if (lazy_tail) lazy_tail->next = r;
    else acc_lazy_head = r;
    lazy_tail = r;
    return 1;
}

/* Looks a wait gives the message of a recorded receive before it posts
 * that receive and the rest: about 2 us of a message stream's gaps. The
 * budget starts again after each message taken, so a window behind a
 * steady sender is taken whole; one that stalls costs one budget. */
enum { LAZY_LOOKS = 64 };

/* In a wait: takes r's message (r completes, no request) when it comes
 * within *looks looks; sets *looks to 0 when r must be posted. */
static int take_lazy(acc_req *r, const struct acc_msg *m, int *looks) {
    int tsrc = r->peer == MPI_ANY_SOURCE ? -1 : acc_local(r->c, r->peer);
    tc_status ts;
    while (*looks > 0 && tsrc >= 0 && r->tag != MPI_ANY_TAG) {
        int flag = 0;
        if (tc_take_now_x((void *)m->data, m->len, tsrc, r->tag, r->c->ctx, &flag, &ts) != 0 ||
            flag < 0)
            break;
        if (flag == 1) {
            r->kind = K_DONE;
            acc_set_done(r);
            acc_note(r, r->c->comm_rank[ts.source], ts.tag, ts.count, MPI_SUCCESS);
            acc.stats.tc_recvs++;
            *looks = LAZY_LOOKS;
            return 1;
        }
        --*looks;
    }
    *looks = 0;
    return 0;
}

void acc_lazy_post(int waiting) {
    /* Detached first: a call made while posting (an error handler, a
     * PMPI call of the general path) finds the queue empty. */
    acc_req *r = acc_lazy_head;
    acc_lazy_head = lazy_tail = NULL;
    int looks = waiting ? LAZY_LOOKS : 0;
    while (r) {
        acc_req *next = r->next;
        r->next = NULL;
        struct acc_msg m = r->msg;
        if (looks > 0 && take_lazy(r, &m, &looks)) {
            r = next;
            continue;
        }
        if (!irecv_now(r, &m)) {
            int rc = acc_req_start(r);
            if (rc != MPI_SUCCESS) {
                r->err = rc;
                acc_set_done(r);
                acc_note(r, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, rc);
            }
        }
        r = next;
    }
}

__attribute__((noinline)) static int irecv_route(void *buf, int count, MPI_Datatype type,
                                                 int src, int tag, MPI_Comm comm,
                                                 MPI_Request *req);

/* As SEND_WRAPPER: the plain-MPI path is a tail call after a few loads. */
int MPI_Irecv(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm,
              MPI_Request *req) {
    if (acc_plain_now(comm, src, 0)) return PMPI_Irecv(buf, count, type, src, tag, comm, req);
    return irecv_route(buf, count, type, src, tag, comm, req);
}

__attribute__((noinline)) static int irecv_route(void *buf, int count, MPI_Datatype type,
                                                 int src, int tag, MPI_Comm comm,
                                                 MPI_Request *req) {
    acc_comm *c = recv_route(comm, src, tag);
    if (!c) {
        acc_settle();
        if (acc.verbose && src != MPI_PROC_NULL) acc.stats.plain_recvs++;
        return PMPI_Irecv(buf, count, type, src, tag, comm, req);
    }
    acc_req *r = new_recv(buf, count, type, src, tag, comm, c);
    if (!r) return acc_error(comm, MPI_ERR_NO_MEM);
    *req = acc_handle(r);
    struct acc_msg m;
    if (!c->mixed && acc_msg_fast(buf, count, type, &m)) {
        if (irecv_lazy(r, &m)) return MPI_SUCCESS;
        acc_settle();
        if (irecv_now(r, &m)) return MPI_SUCCESS;
    }
    acc_settle();
    return acc_error(comm, acc_req_start(r));
}

int MPI_Recv_init(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm,
                  MPI_Request *req) {
    acc_settle();
    acc_comm *c = acc.on && src != MPI_PROC_NULL ? acc_comm_find(comm) : NULL;
    /* A persistent receive from another node is still ours on a mixed
     * communicator: at each start it may have to wait behind an
     * any-source receive. */
    if (!c || (acc_local(c, src) < 0 && src != MPI_ANY_SOURCE && !c->mixed))
        return PMPI_Recv_init(buf, count, type, src, tag, comm, req);
    acc_req *r = new_recv(buf, count, type, src, tag, comm, c);
    if (!r) return acc_error(comm, MPI_ERR_NO_MEM);
    r->persistent = 1;
    /* The application may free its datatype while the request lives. */
    if (PMPI_Type_dup(type, &r->type) == MPI_SUCCESS) r->owns_type = 1;
    r->kind = K_DONE;
    acc_set_done(r);
    acc_note(r, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, MPI_SUCCESS);
    *req = acc_handle(r);
    return MPI_SUCCESS;
}

/* MPI_Recv through PMPI (out of line: see SEND_WRAPPER). */
__attribute__((noinline)) static int recv_plain(void *buf, int count, MPI_Datatype type, int src,
                                                int tag, MPI_Comm comm, MPI_Status *status) {
    if (acc.verbose && src != MPI_PROC_NULL) acc.stats.plain_recvs++;
    return ACC_BLOCKING(PMPI_Recv(buf, count, type, src, tag, comm, status));
}

static int recv_local(acc_comm *c, void *buf, int count, MPI_Datatype type, int src, int tag,
                      MPI_Status *status);

__attribute__((noinline)) static int recv_route_call(void *buf, int count, MPI_Datatype type,
                                                     int src, int tag, MPI_Comm comm,
                                                     MPI_Status *status) {
    acc_settle();
    acc_comm *c = recv_route(comm, src, tag);
    if (c) return recv_local(c, buf, count, type, src, tag, status);
    return recv_plain(buf, count, type, src, tag, comm, status);
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm,
             MPI_Status *status) {
    if (acc_plain_now(comm, src, 1)) return PMPI_Recv(buf, count, type, src, tag, comm, status);
    return recv_route_call(buf, count, type, src, tag, comm, status);
}

/* MPI_Recv from a rank of this node (or held back on a mixed communicator). */
__attribute__((noinline)) static int recv_local(acc_comm *c, void *buf, int count,
                                                MPI_Datatype type, int src, int tag,
                                                MPI_Status *status) {
    MPI_Comm comm = c->comm;
    if (c->mixed && (src == MPI_ANY_SOURCE || acc_held_back(c, src, tag))) {
        acc_req *r = new_recv(buf, count, type, src, tag, comm, c);
        if (!r) return acc_error(comm, MPI_ERR_NO_MEM);
        MPI_Request h = acc_handle(r);
        int rc = acc_req_start(r);
        if (rc == MPI_SUCCESS) rc = acc_req_wait(r);
        rc = acc_req_finish(r, &h, status);
        return acc_error(comm, rc);
    }
    /* The latency path: a bounded blocking receive on the transport, PMPI
     * progress between slices. */
    struct acc_msg m;
    int rc = acc_recv_area(buf, count, type, &m);
    if (rc != MPI_SUCCESS) return acc_error(comm, rc);
    int tsrc = src == MPI_ANY_SOURCE ? TC_ANY_SOURCE : acc_local(c, src);
    int ttag = tag == MPI_ANY_TAG ? TC_ANY_TAG : tag;
    void *dst = m.len == 0 ? (void *)&m : (void *)m.data;
    tc_status ts;
    int flag = 0;
    rc = tc_recv_x(dst, m.len, tsrc, ttag, c->ctx, ACC_SLICE, &flag, &ts);
    if (rc == 0 && !flag) {
        /* A long wait: one posted receive waited for in slices, so the
         * transport's waiting policy sees one wait (and backs off) rather
         * than a fresh short one every slice. */
        acc_mpi_progress();
        acc_progress();
        tc_request r;
        rc = tc_irecv_x(dst, m.len, tsrc, ttag, c->ctx, &r);
        if (rc == 0) rc = acc_wait_tc(&r, &ts);
    }
    acc.stats.tc_recvs++;
    int err = tc_to_mpi(rc);
    if (rc == 0) err = acc_unpack(&m, ts.count, buf, count, type, comm);
    else acc_tmp_free(m.tmp);
    if (rc == 0 || rc == TC_ERR_TRUNCATED)
        acc_status(status, c->comm_rank[ts.source], ts.tag, rc == 0 ? ts.count : m.len, err);
    return acc_error(comm, err);
}

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dst, int stag, void *rbuf,
                 int rcount, MPI_Datatype rtype, int src, int rtag, MPI_Comm comm,
                 MPI_Status *status) {
    acc_settle();
    if (!send_route(comm, dst) && !recv_route(comm, src, rtag)) {
        if (acc.on && dst != MPI_PROC_NULL && acc_comm_find(comm)) count_plain(scount, stype);
        return PMPI_Sendrecv(sbuf, scount, stype, dst, stag, rbuf, rcount, rtype, src, rtag, comm,
                             status);
    }
    MPI_Request s;
    int rc = MPI_Isend(sbuf, scount, stype, dst, stag, comm, &s);
    if (rc != MPI_SUCCESS) return rc;
    int rr = MPI_Recv(rbuf, rcount, rtype, src, rtag, comm, status);
    rc = MPI_Wait(&s, MPI_STATUS_IGNORE);
    return rr != MPI_SUCCESS ? rr : rc;
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dst, int stag, int src,
                         int rtag, MPI_Comm comm, MPI_Status *status) {
    acc_settle();
    if (!send_route(comm, dst) && !recv_route(comm, src, rtag)) {
        if (acc.on && dst != MPI_PROC_NULL && acc_comm_find(comm)) count_plain(count, type);
        return PMPI_Sendrecv_replace(buf, count, type, dst, stag, src, rtag, comm, status);
    }
    /* Send a packed copy (MPI_PACKED matches any type at the receiver). */
    int psize, pos = 0;
    int rc = PMPI_Pack_size(count, type, comm, &psize);
    if (rc != MPI_SUCCESS) return acc_error(comm, rc);
    void *tmp = malloc(psize > 0 ? (size_t)psize : 1);
    if (!tmp) return acc_error(comm, MPI_ERR_NO_MEM);
    rc = PMPI_Pack(buf, count, type, tmp, psize, &pos, comm);
    MPI_Request s = MPI_REQUEST_NULL;
    if (rc == MPI_SUCCESS) rc = MPI_Isend(tmp, pos, MPI_PACKED, dst, stag, comm, &s);
    if (rc == MPI_SUCCESS) {
        int rr = MPI_Recv(buf, count, type, src, rtag, comm, status);
        rc = MPI_Wait(&s, MPI_STATUS_IGNORE);
        if (rr != MPI_SUCCESS) rc = rr;
    }
    free(tmp);
    return rc;
}

/* ---- Held-back receives -------------------------------------------------- */

static int deferred_comms; /* communicators with a non-empty queue */
/* Those communicators, linked by next_queued: waits that block on the
 * transport (acc_req_wait_batch) resolve their queues between slices
 * (acc_progress), since a held-back receive may be what a synchronous send
 * of the same wait needs (a rank's MPI_Issend to itself and its any-source
 * receive, completed by one MPI_Waitall: it had waited for good). A
 * communicator with pending requests outlives MPI_Comm_free (comm.c). */
static acc_comm *queued;

static void unlist(acc_comm *c) {
    acc_comm **p = &queued;
    while (*p && *p != c) p = &(*p)->next_queued;
    if (*p) *p = c->next_queued;
    c->next_queued = NULL;
    deferred_comms--;
}

void acc_defer(acc_req *r) {
    acc_comm *c = r->c;
    r->next = NULL;
    if (c->deferred_tail) c->deferred_tail->next = r;
    else {
        c->deferred_head = r;
        c->next_queued = queued;
        queued = c;
        deferred_comms++;
    }
    c->deferred_tail = r;
    acc_resolve_deferred(c);
}

int acc_any_deferred(void) { return deferred_comms > 0; }

/* Removes r from its communicator's queue (MPI_Cancel, resolution); 1 if
 * it was there. */
int acc_undefer(acc_req *r) {
    acc_comm *c = r->c;
    acc_req **p = &c->deferred_head, *prev = NULL;
    while (*p && *p != r) {
        prev = *p;
        p = &(*p)->next;
    }
    if (!*p) return 0;
    *p = r->next;
    if (c->deferred_tail == r) c->deferred_tail = prev;
    if (!c->deferred_head) unlist(c);
    r->next = NULL;
    return 1;
}

/* Whether receives (s1, t1) and (s2, t2) could match one message. */
static int overlap(int s1, int t1, int s2, int t2) {
    return (s1 == MPI_ANY_SOURCE || s2 == MPI_ANY_SOURCE || s1 == s2) &&
           (t1 == MPI_ANY_TAG || t2 == MPI_ANY_TAG || t1 == t2);
}

/* Whether a receive before `upto` in c's queue (NULL: any) overlaps
 * (src, tag). */
static int overlapped(const acc_comm *c, const acc_req *upto, int src, int tag) {
    for (const acc_req *d = c->deferred_head; d && d != upto; d = d->next)
        if (overlap(d->peer, d->tag, src, tag)) return 1;
    return 0;
}

/* Whether a receive from `src` with `tag` on c must be held back: a
 * receive already held back could match a message this one could, and
 * MPI gives such a message to the earlier receive. One that overlaps none
 * goes at once: a receive of another tag posted after an any-source
 * receive that waits for, say, a shutdown message nobody has sent yet
 * (held back behind it, such receives had waited for good; found by
 * crates/cli/tests/accel/pfuzz.c with two pretend nodes). */
int acc_held_back(const acc_comm *c, int src, int tag) { return overlapped(c, NULL, src, tag); }

/* Tries to resolve r, a held-back receive; 1 when it was posted (and left
 * the queue). With no earlier held-back receive that overlaps it, a
 * receive from a given source is posted as it is, and an any-source one
 * takes the first message either path has for it. Behind one that
 * overlaps it, r takes only a message that no earlier held-back receive
 * could take (looked at before it is taken), posted for that message's
 * source and tag: MPI gives a message to the earliest receive it matches,
 * and an earlier receive that never finds one of its own (an any-source
 * receive of a tag nobody has sent yet) must not hold back the messages
 * it could never take. */
static int resolve_one(acc_comm *c, acc_req *r) {
    int tag = r->tag, careful = overlapped(c, r, r->peer, tag);
    int local = r->peer == MPI_ANY_SOURCE ? TC_ANY_SOURCE : acc_local(c, r->peer);
    if (r->peer != MPI_ANY_SOURCE && !careful) {
        acc_undefer(r);
        if (local >= 0) {
            acc_post_tc_recv(r, local, tag);
        } else {
            r->kind = K_PLAIN;
            r->err = PMPI_Irecv(r->buf, r->count, r->type, r->peer, tag, r->comm, &r->plain);
            if (r->err != MPI_SUCCESS) acc_set_done(r);
        }
        return 1;
    }
    int by_tc = r->peer == MPI_ANY_SOURCE || local >= 0;
    int by_mpi = r->peer == MPI_ANY_SOURCE || local < 0;
    /* The order of the two probes alternates so neither path can starve
     * the other. */
    static unsigned turn;
    for (int k = 0; k < 2; k++) {
        if (((turn + (unsigned)k) & 1) == 0) {
            if (!by_tc) continue;
            int flag = 0;
            tc_status ts;
            tc_iprobe_x(local, tag == MPI_ANY_TAG ? TC_ANY_TAG : tag, c->ctx, &flag, &ts);
            if (flag && !(careful && overlapped(c, r, c->comm_rank[ts.source], ts.tag))) {
                acc_undefer(r);
                acc_post_tc_recv(r, ts.source, ts.tag);
                turn++;
                return 1;
            }
        } else {
            if (!by_mpi) continue;
            int flag = 0, src = r->peer, mtag = tag;
            MPI_Message msg;
            MPI_Status st;
            if (careful) {
                PMPI_Iprobe(src, tag, r->comm, &flag, &st);
                if (!flag || overlapped(c, r, st.MPI_SOURCE, st.MPI_TAG)) continue;
                /* The first from its source with its tag: the one seen. */
                src = st.MPI_SOURCE;
                mtag = st.MPI_TAG;
            }
            PMPI_Improbe(src, mtag, r->comm, &flag, &msg, &st);
            if (flag) {
                acc_undefer(r);
                r->kind = K_PLAIN;
                r->err = PMPI_Imrecv(r->buf, r->count, r->type, &msg, &r->plain);
                if (r->err != MPI_SUCCESS) acc_set_done(r);
                turn++;
                return 1;
            }
        }
    }
    return 0;
}

/* Whether receive d matches every message receive r matches. */
static int covers(const acc_req *d, const acc_req *r) {
    return (d->peer == MPI_ANY_SOURCE || d->peer == r->peer) &&
           (d->tag == MPI_ANY_TAG || d->tag == r->tag);
}

/* Whether an earlier receive of c's queue than r covers it. */
static int covered(const acc_comm *c, const acc_req *r) {
    for (const acc_req *d = c->deferred_head; d != r; d = d->next)
        if (covers(d, r)) return 1;
    return 0;
}

/* Resolves what can be of c's queue, in queue order, again from the head
 * after each receive that resolved (it may free later ones). A receive
 * that an earlier one covers is skipped: that one found no message it
 * could take, and the earliest receive that matches a waiting message is
 * never skipped (no earlier one matches it) and always takes it, so a pass
 * moves on whenever any receive can. */
void acc_resolve_deferred(acc_comm *c) {
    if (!c) {
        /* Every communicator with a queue (resolving may empty, and so
         * unlist, the one at hand). */
        for (acc_comm *q = queued, *next; q; q = next) {
            next = q->next_queued;
            acc_resolve_deferred(q);
        }
        return;
    }
    for (int moved = 1; moved;) {
        moved = 0;
        for (acc_req *r = c->deferred_head; r; r = r->next)
            if (!covered(c, r) && resolve_one(c, r)) {
                moved = 1;
                break;
            }
    }
}

/* ---- Probes -------------------------------------------------------------- */

/* 1 and the status when a matching message is waiting on the transport. */
static int tc_probe_once(acc_comm *c, int src, int tag, MPI_Status *status) {
    int flag = 0;
    tc_status ts;
    int tsrc = src == MPI_ANY_SOURCE ? TC_ANY_SOURCE : acc_local(c, src);
    tc_iprobe_x(tsrc, tag == MPI_ANY_TAG ? TC_ANY_TAG : tag, c->ctx, &flag, &ts);
    if (flag) acc_status(status, c->comm_rank[ts.source], ts.tag, ts.count, MPI_SUCCESS);
    return flag;
}

/* The communicator when a probe for (src, tag) is ours: a source on this
 * node or any source, or a held-back receive it overlaps; NULL: PMPI's. */
static acc_comm *probe_route(MPI_Comm comm, int src, int tag) {
    if (!acc.on || src == MPI_PROC_NULL) return NULL;
    acc_comm *c = acc_comm_find(comm);
    if (!c) return NULL;
    if (src != MPI_ANY_SOURCE && acc_local(c, src) < 0)
        return acc_held_back(c, src, tag) ? c : NULL;
    return c;
}

/* Whether src is on this node or any source (the transport's to probe). */
static int probe_local(const acc_comm *c, int src) {
    return src == MPI_ANY_SOURCE || acc_local(c, src) >= 0;
}

int MPI_Iprobe(int src, int tag, MPI_Comm comm, int *flag, MPI_Status *status) {
    acc_settle();
    acc_comm *c = probe_route(comm, src, tag);
    if (!c) return PMPI_Iprobe(src, tag, comm, flag, status);
    acc_progress();
    if (c->deferred_head) acc_resolve_deferred(c);
    MPI_Status st;
    int local = probe_local(c, src);
    *flag = local ? tc_probe_once(c, src, tag, &st) : 0;
    if (!*flag && c->mixed && (src == MPI_ANY_SOURCE || !local)) {
        int rc = PMPI_Iprobe(src, tag, comm, flag, &st);
        if (rc != MPI_SUCCESS) return rc;
    }
    if (*flag && acc_held_back(c, st.MPI_SOURCE, st.MPI_TAG)) *flag = 0;
    if (*flag) acc_status_copy(status, &st);
    else acc_mpi_progress();
    return MPI_SUCCESS;
}

int MPI_Probe(int src, int tag, MPI_Comm comm, MPI_Status *status) {
    acc_settle();
    acc_comm *c = probe_route(comm, src, tag);
    if (!c) return ACC_BLOCKING(PMPI_Probe(src, tag, comm, status));
    for (unsigned i = 0;; i++) {
        int flag;
        int rc = MPI_Iprobe(src, tag, comm, &flag, status);
        if (rc != MPI_SUCCESS || flag) return rc;
        if (i > 1000) sched_yield();
    }
}

/* ---- Matched probes ------------------------------------------------------ */

#if defined(OPEN_MPI)
#define MSG_OF(i) ((MPI_Message)(uintptr_t)(((uintptr_t)(i) << 1) | 1))
#define MSG_OURS(m) (((uintptr_t)(m)) & 1)
#define MSG_INDEX(m) ((int)((uintptr_t)(m) >> 1))
#define MSG_F_BASE 0x40000000
#else
#define MSG_OF(i) ((MPI_Message)(0x10000000 | (i)))
#define MSG_OURS(m) ((((unsigned)(m)) >> 28) == 1)
#define MSG_INDEX(m) ((int)(((unsigned)(m)) & 0x0fffffff))
#define MSG_F_BASE 0
#endif

static acc_req *req_of_msg(MPI_Message m) {
    if (m == MPI_MESSAGE_NULL || m == MPI_MESSAGE_NO_PROC || !MSG_OURS(m)) return NULL;
#if defined(OPEN_MPI)
    return acc_req_of((MPI_Request)(uintptr_t)m);
#else
    return acc_req_of((MPI_Request)m);
#endif
}

#if defined(OPEN_MPI)
MPI_Message MPI_Message_f2c(MPI_Fint f) {
    return f >= MSG_F_BASE ? MSG_OF(f - MSG_F_BASE) : PMPI_Message_f2c(f);
}

MPI_Fint MPI_Message_c2f(MPI_Message m) {
    if (m != MPI_MESSAGE_NULL && m != MPI_MESSAGE_NO_PROC && MSG_OURS(m))
        return (MPI_Fint)(MSG_F_BASE + MSG_INDEX(m));
    return PMPI_Message_c2f(m);
}
#endif

int MPI_Improbe(int src, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
                MPI_Status *status) {
    acc_settle();
    acc_comm *c = probe_route(comm, src, tag);
    if (!c) return PMPI_Improbe(src, tag, comm, flag, message, status);
    acc_progress();
    if (c->deferred_head) acc_resolve_deferred(c);
    MPI_Status st;
    int local = probe_local(c, src);
    *flag = local ? tc_probe_once(c, src, tag, &st) : 0;
    if (*flag && acc_held_back(c, st.MPI_SOURCE, st.MPI_TAG)) *flag = 0;
    if (!*flag) {
        if (c->mixed && (src == MPI_ANY_SOURCE || !local)) {
            if (!c->deferred_head) return PMPI_Improbe(src, tag, comm, flag, message, status);
            /* Look first; take only a message no held-back receive could
             * take (the first from its source with its tag: the one seen). */
            int rc = PMPI_Iprobe(src, tag, comm, flag, &st);
            if (rc != MPI_SUCCESS || !*flag) return rc;
            if (acc_held_back(c, st.MPI_SOURCE, st.MPI_TAG)) {
                *flag = 0;
                return MPI_SUCCESS;
            }
            return PMPI_Improbe(st.MPI_SOURCE, st.MPI_TAG, comm, flag, message, status);
        }
        acc_mpi_progress();
        return MPI_SUCCESS;
    }
    /* Take the message now into a buffer of its size (the receive for its
     * exact source and tag matches that very message); MPI_Mrecv copies it
     * out. */
    int bytes;
    PMPI_Get_count(&st, MPI_BYTE, &bytes);
    acc_req *r = new_recv(NULL, bytes, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, comm, c);
    void *tmp = malloc(bytes > 0 ? (size_t)bytes : 1);
    if (!r || !tmp) {
        free(tmp);
        if (r) acc_req_release(r);
        return acc_error(comm, MPI_ERR_NO_MEM);
    }
    r->kind = K_RECV;
    r->msg.tmp = tmp;
    r->msg.data = tmp;
    r->msg.len = (size_t)bytes;
    if (tc_irecv_x(tmp, (size_t)bytes, acc_local(c, st.MPI_SOURCE), st.MPI_TAG, c->ctx, &r->tc) !=
        0) {
        acc_req_release(r);
        return acc_error(comm, MPI_ERR_OTHER);
    }
    acc_count(r);
    *message = MSG_OF(r->index);
    acc_status_copy(status, &st);
    return MPI_SUCCESS;
}

int MPI_Mprobe(int src, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status) {
    acc_settle();
    acc_comm *c = probe_route(comm, src, tag);
    if (!c) return ACC_BLOCKING(PMPI_Mprobe(src, tag, comm, message, status));
    for (unsigned i = 0;; i++) {
        int flag;
        int rc = MPI_Improbe(src, tag, comm, &flag, message, status);
        if (rc != MPI_SUCCESS || flag) return rc;
        if (i > 1000) sched_yield();
    }
}

/* Points a matched-probe request at the user's buffer: on completion the
 * temporary is unpacked into it (acc_unpack), with truncation checked. */
static void aim(acc_req *r, void *buf, int count, MPI_Datatype type) {
    r->buf = buf;
    r->count = count;
    r->type = type;
    acc_hold_type(r);
}

int MPI_Mrecv(void *buf, int count, MPI_Datatype type, MPI_Message *message, MPI_Status *status) {
    acc_settle();
    acc_req *r = req_of_msg(*message);
    if (!r) return PMPI_Mrecv(buf, count, type, message, status);
    aim(r, buf, count, type);
    MPI_Request h = acc_handle(r);
    MPI_Comm comm = r->comm;
    acc_req_wait(r);
    *message = MPI_MESSAGE_NULL;
    return acc_error(comm, acc_req_finish(r, &h, status));
}

int MPI_Imrecv(void *buf, int count, MPI_Datatype type, MPI_Message *message,
               MPI_Request *request) {
    acc_settle();
    acc_req *r = req_of_msg(*message);
    if (!r) return PMPI_Imrecv(buf, count, type, message, request);
    aim(r, buf, count, type);
    *message = MPI_MESSAGE_NULL;
    *request = acc_handle(r);
    return MPI_SUCCESS;
}
