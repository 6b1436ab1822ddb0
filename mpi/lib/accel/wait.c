/* Completion of requests: every MPI_Wait / MPI_Test variant over arrays
 * that mix requests of ours with plain MPI requests, plus MPI_Start(all),
 * MPI_Cancel, MPI_Request_free and MPI_Request_get_status. Arrays with no
 * request of ours go straight to PMPI. */
#include "accel.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* MPICH's MPI_STATUSES_IGNORE is the address (MPI_Status *)1, which GCC
 * takes for a zero-size array when it is passed on to PMPI_Waitall & co. */
#pragma GCC diagnostic ignored "-Wstringop-overflow"

static int any_ours(int n, const MPI_Request reqs[]) {
    for (int i = 0; i < n; i++)
        if (acc_req_of(reqs[i])) return 1;
    return 0;
}

/* Whether reqs[i] is a null or inactive request (ignored by the any and some variants). */
static int inert(MPI_Request h) {
    if (h == MPI_REQUEST_NULL) return 1;
    acc_req *r = acc_req_of(h);
    return r && r->persistent && !r->active;
}

static MPI_Status *status_at(MPI_Status *sts, int i) {
    return sts == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &sts[i];
}

/* One polling turn for a blocked multi-request wait. */
static void idle(unsigned turn) {
    tc_progress();
    acc_mpi_progress();
    acc_progress();
    if (turn > 2000) sched_yield();
}

int MPI_Wait(MPI_Request *req, MPI_Status *status) {
    acc_settle_to_wait();
    acc_req *r = acc_req_of(*req);
    if (!r && acc_nbc_busy()) {
        /* A non-blocking collective of ours is under way: its steps move
         * only inside our calls, and a peer may wait for them. */
        for (unsigned turn = 0;; turn++) {
            int flag = 0, rc = PMPI_Test(req, &flag, status);
            if (rc != MPI_SUCCESS || flag) return rc;
            idle(turn + 2001); /* yield each turn: the peers may share the CPU */
        }
    }
    if (!r) return ACC_BLOCKING(PMPI_Wait(req, status));
    MPI_Comm comm = r->comm;
    acc_req_wait(r);
    return acc_error(comm, acc_req_finish(r, req, status));
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status) {
    acc_settle();
    acc_req *r = acc_req_of(*req);
    if (!r) {
        if (acc.on) acc_progress();
        return PMPI_Test(req, flag, status);
    }
    acc_progress();
    *flag = acc_req_poll(r);
    if (!*flag) {
        acc_mpi_progress();
        return MPI_SUCCESS;
    }
    MPI_Comm comm = r->comm;
    return acc_error(comm, acc_req_finish(r, req, status));
}

int MPI_Request_get_status(MPI_Request req, int *flag, MPI_Status *status) {
    acc_settle();
    acc_req *r = acc_req_of(req);
    if (!r) return PMPI_Request_get_status(req, flag, status);
    *flag = acc_req_poll(r);
    if (*flag) acc_status_out(r, status);
    return MPI_SUCCESS;
}

/* Finishes reqs[i] (ours) into its status slot; records errors. */
static int finish_at(MPI_Request reqs[], int i, MPI_Status *sts) {
    return acc_req_finish(acc_req_of(reqs[i]), &reqs[i], status_at(sts, i));
}

/* Plain requests of an array, compacted for one PMPI call. */
struct subset {
    int n;
    int *at;
    MPI_Request *reqs;
    MPI_Status *sts;
    int stack_at[32];
    MPI_Request stack_reqs[32];
    MPI_Status stack_sts[32];
};

static int subset_init(struct subset *s, int n, MPI_Request reqs[]) {
    s->n = 0;
    s->at = s->stack_at;
    s->reqs = s->stack_reqs;
    s->sts = s->stack_sts;
    if (n > 32) {
        s->at = malloc(sizeof(int) * (size_t)n);
        s->reqs = malloc(sizeof(MPI_Request) * (size_t)n);
        s->sts = malloc(sizeof(MPI_Status) * (size_t)n);
        if (!s->at || !s->reqs || !s->sts) return -1;
    }
    for (int i = 0; i < n; i++)
        if (!acc_req_of(reqs[i]) && reqs[i] != MPI_REQUEST_NULL) {
            s->at[s->n] = i;
            s->reqs[s->n++] = reqs[i];
        }
    return 0;
}

static void subset_free(struct subset *s) {
    if (s->at != s->stack_at) {
        free(s->at);
        free(s->reqs);
        free(s->sts);
    }
}

/* Writes the subset's handles (and statuses, when asked) back. */
static void subset_back(struct subset *s, MPI_Request reqs[], MPI_Status *sts, int with_status) {
    for (int k = 0; k < s->n; k++) {
        reqs[s->at[k]] = s->reqs[k];
        if (with_status && sts != MPI_STATUSES_IGNORE) sts[s->at[k]] = s->sts[k];
    }
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[]) {
    acc_settle_to_wait();
    /* One look per handle: ours (rs[i]) or plain (NULL). */
    enum { STACK = 64 };
    acc_req *stack_rs[STACK];
    acc_req **rs = n <= STACK ? stack_rs : malloc(sizeof *rs * (size_t)n);
    if (!rs) {
        if (!any_ours(n, reqs) && !acc_nbc_busy()) return ACC_BLOCKING(PMPI_Waitall(n, reqs, sts));
        return MPI_ERR_NO_MEM;
    }
    int ours = 0;
    for (int i = 0; i < n; i++) ours += (rs[i] = acc_req_of(reqs[i])) != NULL;
    if (!ours && !acc_nbc_busy()) {
        if (rs != stack_rs) free(rs);
        return ACC_BLOCKING(PMPI_Waitall(n, reqs, sts));
    }
    int err = 0;
    int stack_errs[STACK] = {0};
    int *errs = n <= STACK ? stack_errs : calloc((size_t)n, sizeof(int));
    /* Ours first (their waits drive PMPI progress too), the transport's
     * together, then the plain ones in one call. */
    acc_req_wait_batch(rs, n);
    for (int i = 0; i < n; i++) {
        acc_req *r = rs[i];
        if (!r) continue;
        acc_req_wait(r);
        int e = acc_req_finish(r, &reqs[i], status_at(sts, i));
        if (errs) errs[i] = e;
        if (e != MPI_SUCCESS) err = 1;
    }
    int rc = MPI_SUCCESS;
    if (ours < n) {
        struct subset s;
        if (subset_init(&s, n, reqs) != 0) rc = MPI_ERR_NO_MEM;
        else if (s.n > 0) {
            if (acc_nbc_busy()) {
                /* As in MPI_Wait: keep our non-blocking collectives moving. */
                int flag = 0;
                for (unsigned turn = 0;; turn++) {
                    rc = PMPI_Testall(s.n, s.reqs, &flag,
                                      sts == MPI_STATUSES_IGNORE ? sts : s.sts);
                    if (flag || rc != MPI_SUCCESS) break;
                    idle(turn + 2001);
                }
            } else {
                rc = PMPI_Waitall(s.n, s.reqs, sts == MPI_STATUSES_IGNORE ? sts : s.sts);
            }
            subset_back(&s, reqs, sts, 1);
            if (rc == MPI_ERR_IN_STATUS && errs && sts != MPI_STATUSES_IGNORE)
                for (int k = 0; k < s.n; k++) errs[s.at[k]] = s.sts[k].MPI_ERROR;
        }
        subset_free(&s);
    }
    if (err || rc == MPI_ERR_IN_STATUS) {
        if (sts != MPI_STATUSES_IGNORE && errs)
            for (int i = 0; i < n; i++) sts[i].MPI_ERROR = errs[i];
        rc = MPI_ERR_IN_STATUS;
    }
    if (errs != stack_errs) free(errs);
    if (rs != stack_rs) free(rs);
    return rc;
}

int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[]) {
    acc_settle();
    if (!any_ours(n, reqs)) {
        if (acc.on) acc_progress();
        return PMPI_Testall(n, reqs, flag, sts);
    }
    acc_progress();
    *flag = 0;
    for (int i = 0; i < n; i++) {
        acc_req *r = acc_req_of(reqs[i]);
        if (r && !acc_req_poll(r)) {
            acc_mpi_progress();
            return MPI_SUCCESS;
        }
    }
    /* Every one of ours is done: the answer is the plain ones'. */
    struct subset s;
    if (subset_init(&s, n, reqs) != 0) {
        subset_free(&s);
        return MPI_ERR_NO_MEM;
    }
    int pflag = 1, rc = MPI_SUCCESS;
    if (s.n > 0) {
        rc = PMPI_Testall(s.n, s.reqs, &pflag,
                          sts == MPI_STATUSES_IGNORE ? sts : s.sts);
        subset_back(&s, reqs, sts, pflag);
    }
    subset_free(&s);
    if (!pflag || (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS)) return rc;
    int err = rc == MPI_ERR_IN_STATUS;
    for (int i = 0; i < n; i++)
        if (acc_req_of(reqs[i])) {
            int e = finish_at(reqs, i, sts);
            if (e != MPI_SUCCESS) {
                err = 1;
                if (sts != MPI_STATUSES_IGNORE) sts[i].MPI_ERROR = e;
            }
        }
    *flag = 1;
    return err ? MPI_ERR_IN_STATUS : MPI_SUCCESS;
}

/* One pass of Testany: 1 when something completed (or all are inert). */
static int testany_pass(int n, MPI_Request reqs[], int *index, MPI_Status *status, int *rc) {
    int live = 0;
    for (int i = 0; i < n; i++) {
        if (inert(reqs[i])) continue;
        live++;
        acc_req *r = acc_req_of(reqs[i]);
        if (r && acc_req_poll(r)) {
            *index = i;
            *rc = finish_at(reqs, i, status == MPI_STATUS_IGNORE ? MPI_STATUSES_IGNORE : status - i);
            return 1;
        }
    }
    if (!live) {
        *index = MPI_UNDEFINED;
        return 1;
    }
    struct subset s;
    if (subset_init(&s, n, reqs) != 0) {
        subset_free(&s);
        *rc = MPI_ERR_NO_MEM;
        return 1;
    }
    int k = MPI_UNDEFINED, flag = 0;
    if (s.n > 0) {
        *rc = PMPI_Testany(s.n, s.reqs, &k, &flag, status);
        subset_back(&s, reqs, NULL, 0);
    }
    subset_free(&s);
    if (flag && k != MPI_UNDEFINED) {
        *index = s.at[k];
        return 1;
    }
    return *rc != MPI_SUCCESS;
}

int MPI_Testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status) {
    acc_settle();
    if (!any_ours(n, reqs)) {
        if (acc.on) acc_progress();
        return PMPI_Testany(n, reqs, index, flag, status);
    }
    acc_progress();
    int rc = MPI_SUCCESS;
    *index = MPI_UNDEFINED;
    *flag = testany_pass(n, reqs, index, status, &rc);
    if (!*flag) acc_mpi_progress();
    return rc;
}

int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status) {
    acc_settle();
    if (!any_ours(n, reqs) && !acc_nbc_busy())
        return ACC_BLOCKING(PMPI_Waitany(n, reqs, index, status));
    int rc = MPI_SUCCESS;
    *index = MPI_UNDEFINED;
    for (unsigned turn = 0; !testany_pass(n, reqs, index, status, &rc); turn++) idle(turn);
    return rc;
}

/* One pass of Testsome: the number completed (MPI_UNDEFINED if all inert). */
static int testsome_pass(int n, MPI_Request reqs[], int indices[], MPI_Status sts[], int *rc) {
    int out = 0, live = 0, err = 0;
    for (int i = 0; i < n; i++) {
        if (inert(reqs[i])) continue;
        live++;
        acc_req *r = acc_req_of(reqs[i]);
        if (r && acc_req_poll(r)) {
            MPI_Status *st = sts == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &sts[out];
            int e = acc_req_finish(r, &reqs[i], st);
            if (e != MPI_SUCCESS) {
                err = 1;
                if (st != MPI_STATUS_IGNORE) st->MPI_ERROR = e;
            }
            indices[out++] = i;
        }
    }
    if (!live) return MPI_UNDEFINED;
    struct subset s;
    if (subset_init(&s, n, reqs) != 0) {
        subset_free(&s);
        *rc = MPI_ERR_NO_MEM;
        return out;
    }
    if (s.n > 0) {
        int k = 0;
        int *idx = malloc(sizeof(int) * (size_t)s.n);
        if (idx) {
            int prc = PMPI_Testsome(s.n, s.reqs, &k, idx,
                                    sts == MPI_STATUSES_IGNORE ? sts : s.sts);
            if (prc == MPI_ERR_IN_STATUS) err = 1;
            else if (prc != MPI_SUCCESS) *rc = prc;
            subset_back(&s, reqs, NULL, 0);
            for (int j = 0; k != MPI_UNDEFINED && j < k; j++) {
                if (sts != MPI_STATUSES_IGNORE) sts[out] = s.sts[j];
                indices[out++] = s.at[idx[j]];
            }
            free(idx);
        } else {
            *rc = MPI_ERR_NO_MEM;
        }
    }
    subset_free(&s);
    if (err && *rc == MPI_SUCCESS) *rc = MPI_ERR_IN_STATUS;
    return out;
}

int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status sts[]) {
    acc_settle();
    if (!any_ours(n, reqs)) {
        if (acc.on) acc_progress();
        return PMPI_Testsome(n, reqs, outcount, indices, sts);
    }
    acc_progress();
    int rc = MPI_SUCCESS;
    *outcount = testsome_pass(n, reqs, indices, sts, &rc);
    if (*outcount == 0) acc_mpi_progress();
    return rc;
}

int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status sts[]) {
    acc_settle();
    if (!any_ours(n, reqs) && !acc_nbc_busy())
        return ACC_BLOCKING(PMPI_Waitsome(n, reqs, outcount, indices, sts));
    int rc = MPI_SUCCESS;
    for (unsigned turn = 0;; turn++) {
        *outcount = testsome_pass(n, reqs, indices, sts, &rc);
        if (*outcount != 0 || rc != MPI_SUCCESS) return rc;
        idle(turn);
    }
}

int MPI_Start(MPI_Request *req) {
    acc_settle();
    acc_req *r = acc_req_of(*req);
    if (!r) return PMPI_Start(req);
    return acc_error(r->comm, acc_req_start(r));
}

int MPI_Startall(int n, MPI_Request reqs[]) {
    acc_settle();
    int rc = MPI_SUCCESS;
    for (int i = 0; i < n && rc == MPI_SUCCESS; i++) rc = MPI_Start(&reqs[i]);
    return rc;
}

int MPI_Cancel(MPI_Request *req) {
    acc_settle();
    acc_req *r = acc_req_of(*req);
    if (!r) return PMPI_Cancel(req);
    if (r->done) return MPI_SUCCESS;
    switch (r->kind) {
    case K_RECV: {
        int cancelled = 0;
        tc_cancel(&r->tc, &cancelled);
        if (!cancelled) break;
        acc_tmp_free(r->msg.tmp);
        r->msg.tmp = NULL;
        acc_set_done(r);
            r->cancelled = 1;
        acc_note(r, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, MPI_SUCCESS);
        break;
    }
    case K_DEFER:
        if (acc_undefer(r)) {
            acc_set_done(r);
            r->cancelled = 1;
            acc_note(r, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, MPI_SUCCESS);
        }
        break;
    case K_PLAIN:
        return PMPI_Cancel(&r->plain);
    case K_SEND: /* sends through the transport are not cancelled: the */
    case K_DONE: /* request completes normally, Test_cancelled says false */
    case K_COLL: /* collectives are never cancelled */
    case K_LAZY: /* posted by acc_settle above */
        break;
    }
    return MPI_SUCCESS;
}

int MPI_Request_free(MPI_Request *req) {
    acc_settle();
    acc_req *r = acc_req_of(*req);
    if (!r) return PMPI_Request_free(req);
    *req = MPI_REQUEST_NULL;
    if (r->done || (r->persistent && !r->active)) acc_req_release(r);
    else acc_orphan(r); /* completes (and is released) in the background */
    return MPI_SUCCESS;
}
