/* Requests of the accelerator. A request of ours is handed to the
 * application as an MPI_Request value that no MPI library ever produces
 * (Open MPI: an odd pointer; MPICH: a handle whose kind bits say
 * "invalid"), so every request-taking function can tell ours from plain
 * ones (wait.c). Their Fortran handles are likewise out of the range the
 * MPI uses (MPI_Request_f2c/c2f below). */
#include "accel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Requests live in blocks of ACC_REQ_CHUNK that never move: a handle is an index. */
acc_req **acc_req_chunks;
int acc_req_nchunks;
acc_req *acc_free_list;

#if defined(OPEN_MPI)
#define F_BASE 0x40000000 /* Open MPI's Fortran handles are small table indices */
#else
#define F_BASE 0 /* MPICH's Fortran handle is the C handle */
#endif

acc_req *acc_req_new(void) {
    if (!acc_free_list) {
        acc_req **c = realloc(acc_req_chunks, sizeof *acc_req_chunks * (size_t)(acc_req_nchunks + 1));
        if (!c) return NULL;
        acc_req_chunks = c;
        acc_req *block = calloc(ACC_REQ_CHUNK, sizeof *block);
        if (!block) return NULL;
        acc_req_chunks[acc_req_nchunks] = block;
        for (int i = ACC_REQ_CHUNK - 1; i >= 0; i--) {
            block[i].index = acc_req_nchunks * ACC_REQ_CHUNK + i;
            block[i].next = acc_free_list;
            acc_free_list = &block[i];
        }
        acc_req_nchunks++;
    }
    acc_req *r = acc_free_list;
    acc_free_list = r->next;
    int index = r->index;
    memset(r, 0, sizeof *r);
    r->index = index;
    r->tc = TC_REQUEST_NULL;
    r->plain = MPI_REQUEST_NULL;
    r->held = MPI_DATATYPE_NULL;
    return r;
}


void acc_hold_type(acc_req *r) {
    if (r->held == MPI_DATATYPE_NULL && PMPI_Type_dup(r->type, &r->held) != MPI_SUCCESS)
        r->held = MPI_DATATYPE_NULL;
}

static inline void drop_type(acc_req *r) {
    if (r->held != MPI_DATATYPE_NULL) {
        acc_type_free(&r->held);
        r->held = MPI_DATATYPE_NULL;
    }
}

MPI_Request acc_sent = MPI_REQUEST_NULL;

MPI_Request acc_sent_make(void) {
    acc_req *r = acc_req_new();
    if (!r) return MPI_REQUEST_NULL;
    r->shared = 1;
    r->is_send = 1;
    r->kind = K_DONE;
    r->comm = MPI_COMM_NULL;
    acc_set_done(r);
    acc_note(r, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, MPI_SUCCESS);
    acc_sent = acc_handle(r);
    return acc_sent;
}

void acc_req_release_full(acc_req *r) {
    if (r->shared) return; /* acc_sent: lives as long as the process */
    acc_req_unbind(r);
    drop_type(r);
    if (r->owns_type) acc_type_free(&r->type);
    r->owns_type = 0;
    /* No calls in the common case: a small message's whole path is about
     * a thousand instructions, and each call here cost ~20. */
    if (r->msg.tmp) {
        acc_tmp_free(r->msg.tmp);
        r->msg.tmp = NULL;
    }
    if (r->nbc) {
        acc_nbc_free(r->nbc);
        r->nbc = NULL;
    }
    r->next = acc_free_list;
    r->kind = K_DONE;
    r->freed = 1;
    acc_free_list = r;
}

#if defined(OPEN_MPI)
/* Open MPI's Fortran handles index a table; ours lie above it. (MPICH's
 * f2c/c2f are identity macros: our handles pass through unchanged.) */
MPI_Request MPI_Request_f2c(MPI_Fint f) {
    return f >= F_BASE ? ACC_HANDLE_OF(f - F_BASE) : PMPI_Request_f2c(f);
}

MPI_Fint MPI_Request_c2f(MPI_Request h) {
    if (h != MPI_REQUEST_NULL && ACC_IS_OURS(h)) return (MPI_Fint)(F_BASE + ACC_INDEX_OF(h));
    return PMPI_Request_c2f(h);
}
#endif

/* ---- Completion ---------------------------------------------------------- */

/* Records the outcome of a transport operation on r. */
static void complete_tc(acc_req *r, int rc, const tc_status *ts) {
    acc_set_done(r);
    r->tc = TC_REQUEST_NULL;
    if (r->kind == K_SEND) {
        acc_note(r, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, MPI_SUCCESS);
        r->err = rc == 0 ? MPI_SUCCESS : MPI_ERR_OTHER;
        return;
    }
    int src = (rc == 0 || rc == TC_ERR_TRUNCATED) ? r->c->comm_rank[ts->source] : MPI_ANY_SOURCE;
    size_t got = (rc == 0) ? ts->count : r->msg.len;
    r->err = rc == 0 ? MPI_SUCCESS : rc == TC_ERR_TRUNCATED ? MPI_ERR_TRUNCATE : MPI_ERR_OTHER;
    if (rc != 0 && rc != TC_ERR_TRUNCATED)
        fprintf(stderr, "topocomm accel: rank %d: receive failed: %s\n", acc.world_rank,
                tc_last_error());
    if (rc == 0) {
        if (r->msg.tmp) { /* packed: unpack (contiguous data landed in place) */
            MPI_Datatype t = r->held != MPI_DATATYPE_NULL ? r->held : r->type;
            int u = acc_unpack(&r->msg, got, r->buf, r->count, t, r->comm);
            if (u != MPI_SUCCESS) r->err = u;
        }
        drop_type(r);
    } else {
        acc_tmp_free(r->msg.tmp);
        r->msg.tmp = NULL;
        drop_type(r);
    }
    acc.stats.tc_recvs++;
    acc_note(r, src, rc == 0 || rc == TC_ERR_TRUNCATED ? ts->tag : MPI_ANY_TAG, got,
               r->err);
}

int acc_req_poll(acc_req *r) {
    if (r->done) return 1;
    switch (r->kind) {
    case K_SEND:
    case K_RECV: {
        tc_status ts;
        int flag = 0;
        int rc = tc_test(&r->tc, &flag, &ts);
        if (rc != 0 || flag) complete_tc(r, rc, &ts);
        return r->done;
    }
    case K_PLAIN: {
        int flag = 0;
        int rc = PMPI_Test(&r->plain, &flag, &r->st);
        r->st_mpi = 1;
        if (rc != MPI_SUCCESS) {
            r->err = rc;
            flag = 1;
        }
        if (flag) {
            acc_set_done(r);
            acc.stats.plain_recvs++;
        }
        return r->done;
    }
    case K_DEFER:
        acc_resolve_deferred(r->c);
        return r->kind != K_DEFER ? acc_req_poll(r) : 0;
    case K_DONE:
        acc_set_done(r);
        return 1;
    case K_COLL:
        return acc_nbc_advance(r, 0);
    case K_LAZY: /* every entry point posts these first (acc_settle) */
        acc_settle();
        return r->kind != K_LAZY && acc_req_poll(r);
    }
    return 0;
}

int acc_req_wait_full(acc_req *r) {
    for (int turn = 0; !r->done; turn++) {
        if (r->kind == K_SEND || r->kind == K_RECV) {
            tc_status ts;
            int flag = 0;
            int rc = tc_wait_for(&r->tc, ACC_SLICE, &flag, &ts);
            if (rc != 0 || flag) {
                complete_tc(r, rc, &ts);
                break;
            }
        } else if (r->kind == K_COLL) {
            if (acc_nbc_advance(r, ACC_SLICE)) break;
        } else if (acc_req_poll(r)) {
            break;
        } else {
            tc_progress();
        }
        acc_mpi_progress();
        acc_progress();
        (void)turn;
    }
    return r->err;
}

/* Whether r waits on a transport request. */
static int on_tc(const acc_req *r) {
    return r && !r->done && (r->kind == K_SEND || r->kind == K_RECV) && r->tc != TC_REQUEST_NULL;
}

void acc_req_wait_batch(acc_req *const rs[], int n) {
    /* The transport's handles, statuses, outcomes and our requests, in one
     * area: on the stack for a window of up to 64. */
    struct slot {
        tc_status st;
        tc_request h;
        acc_req *q;
        int rc;
    };
    int m = 0;
    for (int i = 0; i < n; i++) m += on_tc(rs[i]);
    if (m < 2) return; /* one request: acc_req_wait is as cheap */
    enum { STACK = 64 };
    tc_status stack_st[STACK];
    tc_request stack_h[STACK];
    int stack_rc[STACK];
    acc_req *stack_q[STACK];
    char *heap = NULL;
    tc_status *st = stack_st;
    tc_request *h = stack_h;
    int *rc = stack_rc;
    acc_req **q = stack_q;
    if (m > STACK) {
        /* Largest alignment first: statuses, handles, pointers, ints. */
        heap = malloc(sizeof(struct slot) * (size_t)m);
        if (!heap) return; /* acc_req_wait takes them one by one */
        st = (tc_status *)heap;
        h = (tc_request *)(st + m);
        q = (acc_req **)(h + m);
        rc = (int *)(q + m);
    }
    int k = 0;
    for (int i = 0; i < n; i++)
        if (on_tc(rs[i])) {
            q[k] = rs[i];
            h[k++] = rs[i]->tc;
        }
    for (;;) {
        size_t left = 0;
        /* A failed call leaves what is left to acc_req_wait. */
        if (tc_wait_all_x((size_t)m, h, st, rc, ACC_SLICE, &left) != 0) break;
        for (k = 0; k < m; k++)
            if (h[k] == TC_REQUEST_NULL && q[k]->tc != TC_REQUEST_NULL)
                complete_tc(q[k], rc[k], &st[k]);
        if (left == 0) break;
        /* Between slices, as acc_req_wait does. */
        acc_mpi_progress();
        acc_progress();
    }
    free(heap);
}

void acc_req_make_inactive(acc_req *r) {
    r->active = 0;
    acc_set_done(r); /* an inactive persistent request completes at once */
    r->cancelled = 0;
    acc_tmp_free(r->msg.tmp);
    r->msg.tmp = NULL;
    drop_type(r);
    acc_note(r, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, MPI_SUCCESS);
}

/* ---- Starting operations ------------------------------------------------- */

int acc_tc_send(acc_comm *c, const struct acc_msg *m, int peer, int tag, int flags,
                tc_request *t) {
    if (tc_isend_x(m->data, m->len, acc_local(c, peer), tag, c->ctx, flags, t) != 0) {
        fprintf(stderr, "topocomm accel: rank %d: send failed: %s\n", acc.world_rank,
                tc_last_error());
        return MPI_ERR_OTHER;
    }
    acc.stats.tc_msgs++;
    acc.stats.tc_bytes += m->len;
    return MPI_SUCCESS;
}

int acc_req_start(acc_req *r) {
    r->done = r->cancelled = 0;
    r->err = MPI_SUCCESS;
    r->active = 1;
    acc_count(r);
    if (r->is_send && r->buffered) {
        r->kind = K_DONE;
        acc_set_done(r);
        return r->err = acc_send_buffered(r->buf, r->count, r->type, r->c, r->peer, r->tag);
    }
    if (r->is_send) {
        r->kind = K_SEND;
        int rc = acc_pack(r->buf, r->count, r->type, r->comm, &r->msg);
        if (rc != MPI_SUCCESS) return rc;
        rc = acc_tc_send(r->c, &r->msg, r->peer, r->tag, r->sync ? TC_SEND_SYNC : 0, &r->tc);
        if (rc != MPI_SUCCESS) {
            acc_set_done(r);
            return r->err = rc;
        }
        if (r->tc == TC_REQUEST_DONE) {
            /* Pushed at posting (inline or eager): complete now, so the
             * wait costs nothing (message-rate windows). */
            r->tc = TC_REQUEST_NULL;
            acc_set_done(r);
            if (r->msg.tmp) {
                acc_tmp_free(r->msg.tmp);
                r->msg.tmp = NULL;
            }
            acc_note(r, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, MPI_SUCCESS);
        }
        return MPI_SUCCESS;
    }
    /* A receive: held back as an any-source receive of a mixed
     * communicator or behind a held-back one it overlaps (acc_held_back),
     * from a rank of this node through the transport, or from another node
     * through PMPI. */
    if (r->c->mixed && (r->peer == MPI_ANY_SOURCE || acc_held_back(r->c, r->peer, r->tag))) {
        r->kind = K_DEFER;
        acc_defer(r);
        return MPI_SUCCESS;
    }
    if (r->peer != MPI_ANY_SOURCE && acc_local(r->c, r->peer) < 0) {
        r->kind = K_PLAIN;
        int rc = PMPI_Irecv(r->buf, r->count, r->type, r->peer, r->tag, r->comm, &r->plain);
        if (rc != MPI_SUCCESS) acc_set_done(r);
        return r->err = rc;
    }
    return acc_post_tc_recv(r, r->peer == MPI_ANY_SOURCE ? TC_ANY_SOURCE : acc_local(r->c, r->peer),
                            r->tag);
}

int acc_post_tc_recv(acc_req *r, int tc_src, int tag) {
    int rc = acc_recv_area(r->buf, r->count, r->type, &r->msg);
    if (rc != MPI_SUCCESS) {
        acc_set_done(r);
        return r->err = rc;
    }
    if (r->msg.tmp) acc_hold_type(r);
    r->kind = K_RECV;
    /* A zero-byte receive may come with a NULL buffer: any valid address. */
    void *dst = r->msg.len == 0 ? (void *)&r->msg : (void *)r->msg.data;
    tc_status ts;
    int now = 0;
    rc = tc_irecv_now_x(dst, r->msg.len, tc_src, tag == MPI_ANY_TAG ? TC_ANY_TAG : tag, r->c->ctx,
                        &r->tc, &now, &ts);
    if (rc != 0) {
        fprintf(stderr, "topocomm accel: rank %d: receive failed: %s\n", acc.world_rank,
                tc_last_error());
        acc_set_done(r);
        return r->err = MPI_ERR_OTHER;
    }
    /* The message was already there (a window of receives behind a faster
     * sender): complete now, the wait has nothing left to do. */
    if (now) complete_tc(r, 0, &ts);
    return MPI_SUCCESS;
}

/* ---- Background work ----------------------------------------------------- */

/* Buffered sends still in flight, and requests the application freed
 * before they completed: completed in the background. */
static acc_req *orphans;

void acc_orphan(acc_req *r) {
    r->next = orphans;
    orphans = r;
}

void acc_progress(void) {
    if (acc_any_deferred()) acc_resolve_deferred(NULL);
    acc_nbc_progress();
    acc_req **p = &orphans;
    while (*p) {
        acc_req *r = *p;
        if (r->kind == K_SEND || r->kind == K_RECV) {
            tc_status ts;
            int flag = 0;
            int rc = tc_test(&r->tc, &flag, &ts);
            if (rc != 0 || flag) complete_tc(r, rc, &ts);
        } else {
            acc_req_poll(r);
        }
        if (r->done) {
            *p = r->next;
            acc_req_release(r);
        } else {
            p = &r->next;
        }
    }
}

void acc_drain(void) {
    while (orphans || acc_any_deferred()) {
        acc_progress();
        tc_progress();
        acc_mpi_progress();
    }
}
