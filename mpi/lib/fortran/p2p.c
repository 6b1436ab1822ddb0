/* Fortran bridge: initialization and point-to-point. */
#include "bridge.h"

#include <stdlib.h>

/* ---- initialization ---------------------------------------------------- */

FORT(mpi_init, MPI_INIT, (MPI_Fint *ierr))
{
    tcf_consts_init();
    SETERR(ierr, MPI_Init(NULL, NULL));
}

FORT(mpi_init_thread, MPI_INIT_THREAD, (MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr))
{
    int p = MPI_THREAD_SINGLE;
    tcf_consts_init();
    int rc = MPI_Init_thread(NULL, NULL, (int)*required, &p);
    *provided = (MPI_Fint)p;
    SETERR(ierr, rc);
}

FORT(mpi_finalize, MPI_FINALIZE, (MPI_Fint *ierr)) { SETERR(ierr, MPI_Finalize()); }

/* ---- blocking sends ------------------------------------------------------ */

#define SEND(lower, upper, cfn)                                                            \
    FORT(lower, upper,                                                                     \
         (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *dest, MPI_Fint *tag,       \
          MPI_Fint *comm, MPI_Fint *ierr))                                                 \
    {                                                                                      \
        SETERR(ierr, cfn(tcf_buf(buf), (int)*count, MPI_Type_f2c(*type), (int)*dest,       \
                         (int)*tag, MPI_Comm_f2c(*comm)));                                 \
    }
SEND(mpi_send, MPI_SEND, MPI_Send)
SEND(mpi_bsend, MPI_BSEND, MPI_Bsend)
SEND(mpi_ssend, MPI_SSEND, MPI_Ssend)
SEND(mpi_rsend, MPI_RSEND, MPI_Rsend)

/* ---- nonblocking sends and persistent requests --------------------------- */

/* (buf, count, type, peer, tag, comm, request): Isend & co, *_init. */
#define REQ7(lower, upper, cfn)                                                            \
    FORT(lower, upper,                                                                     \
         (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *peer, MPI_Fint *tag,       \
          MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr))                                  \
    {                                                                                      \
        MPI_Request r = MPI_REQUEST_NULL;                                                  \
        int rc = cfn(tcf_buf(buf), (int)*count, MPI_Type_f2c(*type), (int)*peer, (int)*tag, \
                     MPI_Comm_f2c(*comm), &r);                                             \
        if (rc == MPI_SUCCESS)                                                             \
            *req = MPI_Request_c2f(r);                                                     \
        SETERR(ierr, rc);                                                                  \
    }
REQ7(mpi_isend, MPI_ISEND, MPI_Isend)
REQ7(mpi_ibsend, MPI_IBSEND, MPI_Ibsend)
REQ7(mpi_issend, MPI_ISSEND, MPI_Issend)
REQ7(mpi_irsend, MPI_IRSEND, MPI_Irsend)
REQ7(mpi_irecv, MPI_IRECV, MPI_Irecv)
REQ7(mpi_send_init, MPI_SEND_INIT, MPI_Send_init)
REQ7(mpi_bsend_init, MPI_BSEND_INIT, MPI_Bsend_init)
REQ7(mpi_ssend_init, MPI_SSEND_INIT, MPI_Ssend_init)
REQ7(mpi_rsend_init, MPI_RSEND_INIT, MPI_Rsend_init)
REQ7(mpi_recv_init, MPI_RECV_INIT, MPI_Recv_init)

/* ---- receives, probes ------------------------------------------------------ */

FORT(mpi_recv, MPI_RECV,
     (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *source, MPI_Fint *tag,
      MPI_Fint *comm, MPI_Fint *status, MPI_Fint *ierr))
{
    MPI_Status s, *cs = tcf_status_in(status, &s);
    int rc = MPI_Recv(tcf_buf(buf), (int)*count, MPI_Type_f2c(*type), (int)*source, (int)*tag,
                      MPI_Comm_f2c(*comm), cs);
    if (rc == MPI_SUCCESS)
        tcf_status_out(status, cs);
    SETERR(ierr, rc);
}

FORT(mpi_sendrecv, MPI_SENDRECV,
     (void *sbuf, MPI_Fint *scount, MPI_Fint *stype, MPI_Fint *dest, MPI_Fint *stag, void *rbuf,
      MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *source, MPI_Fint *rtag, MPI_Fint *comm,
      MPI_Fint *status, MPI_Fint *ierr))
{
    MPI_Status s, *cs = tcf_status_in(status, &s);
    int rc = MPI_Sendrecv(tcf_buf(sbuf), (int)*scount, MPI_Type_f2c(*stype), (int)*dest,
                          (int)*stag, tcf_buf(rbuf), (int)*rcount, MPI_Type_f2c(*rtype),
                          (int)*source, (int)*rtag, MPI_Comm_f2c(*comm), cs);
    if (rc == MPI_SUCCESS)
        tcf_status_out(status, cs);
    SETERR(ierr, rc);
}

FORT(mpi_sendrecv_replace, MPI_SENDRECV_REPLACE,
     (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *dest, MPI_Fint *stag,
      MPI_Fint *source, MPI_Fint *rtag, MPI_Fint *comm, MPI_Fint *status, MPI_Fint *ierr))
{
    MPI_Status s, *cs = tcf_status_in(status, &s);
    int rc = MPI_Sendrecv_replace(tcf_buf(buf), (int)*count, MPI_Type_f2c(*type), (int)*dest,
                                  (int)*stag, (int)*source, (int)*rtag, MPI_Comm_f2c(*comm), cs);
    if (rc == MPI_SUCCESS)
        tcf_status_out(status, cs);
    SETERR(ierr, rc);
}

FORT(mpi_probe, MPI_PROBE,
     (MPI_Fint *source, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *status, MPI_Fint *ierr))
{
    MPI_Status s, *cs = tcf_status_in(status, &s);
    int rc = MPI_Probe((int)*source, (int)*tag, MPI_Comm_f2c(*comm), cs);
    if (rc == MPI_SUCCESS)
        tcf_status_out(status, cs);
    SETERR(ierr, rc);
}

FORT(mpi_iprobe, MPI_IPROBE,
     (MPI_Fint *source, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *flag, MPI_Fint *status,
      MPI_Fint *ierr))
{
    MPI_Status s, *cs = tcf_status_in(status, &s);
    int f = 0;
    int rc = MPI_Iprobe((int)*source, (int)*tag, MPI_Comm_f2c(*comm), &f, cs);
    if (rc == MPI_SUCCESS) {
        *flag = tcf_c2l(f);
        if (f)
            tcf_status_out(status, cs);
    }
    SETERR(ierr, rc);
}

FORT(mpi_mprobe, MPI_MPROBE,
     (MPI_Fint *source, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *message, MPI_Fint *status,
      MPI_Fint *ierr))
{
    MPI_Status s, *cs = tcf_status_in(status, &s);
    MPI_Message m = MPI_MESSAGE_NULL;
    int rc = MPI_Mprobe((int)*source, (int)*tag, MPI_Comm_f2c(*comm), &m, cs);
    if (rc == MPI_SUCCESS) {
        *message = MPI_Message_c2f(m);
        tcf_status_out(status, cs);
    }
    SETERR(ierr, rc);
}

FORT(mpi_improbe, MPI_IMPROBE,
     (MPI_Fint *source, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *flag, MPI_Fint *message,
      MPI_Fint *status, MPI_Fint *ierr))
{
    MPI_Status s, *cs = tcf_status_in(status, &s);
    MPI_Message m = MPI_MESSAGE_NULL;
    int f = 0;
    int rc = MPI_Improbe((int)*source, (int)*tag, MPI_Comm_f2c(*comm), &f, &m, cs);
    if (rc == MPI_SUCCESS) {
        *flag = tcf_c2l(f);
        if (f) {
            *message = MPI_Message_c2f(m);
            tcf_status_out(status, cs);
        }
    }
    SETERR(ierr, rc);
}

FORT(mpi_mrecv, MPI_MRECV,
     (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *message, MPI_Fint *status,
      MPI_Fint *ierr))
{
    MPI_Status s, *cs = tcf_status_in(status, &s);
    MPI_Message m = MPI_Message_f2c(*message);
    int rc = MPI_Mrecv(tcf_buf(buf), (int)*count, MPI_Type_f2c(*type), &m, cs);
    if (rc == MPI_SUCCESS) {
        *message = MPI_Message_c2f(m);
        tcf_status_out(status, cs);
    }
    SETERR(ierr, rc);
}

FORT(mpi_imrecv, MPI_IMRECV,
     (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *message, MPI_Fint *req,
      MPI_Fint *ierr))
{
    MPI_Message m = MPI_Message_f2c(*message);
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = MPI_Imrecv(tcf_buf(buf), (int)*count, MPI_Type_f2c(*type), &m, &r);
    if (rc == MPI_SUCCESS) {
        *message = MPI_Message_c2f(m);
        *req = MPI_Request_c2f(r);
    }
    SETERR(ierr, rc);
}

/* ---- completion ------------------------------------------------------------ */

/* C copies of a Fortran request array (and back). */
static MPI_Request *reqs_in(int n, const MPI_Fint *f, MPI_Request *stack)
{
    MPI_Request *c = tcf_tmp((size_t)(n > 0 ? n : 0), sizeof *c, stack,
                             TCF_NSTACK * sizeof *stack);
    if (c)
        for (int i = 0; i < n; i++)
            c[i] = MPI_Request_f2c(f[i]);
    return c;
}

static void reqs_out(int n, MPI_Fint *f, const MPI_Request *c)
{
    for (int i = 0; i < n; i++)
        f[i] = MPI_Request_c2f(c[i]);
}

/* C statuses for a Fortran status array of n: *c = MPI_STATUSES_IGNORE
 * (which is NULL in Open MPI) or scratch space; 0 when out of memory. */
static int stats_in(int n, MPI_Fint *f, MPI_Status *stack, MPI_Status **c)
{
    if (f == NULL || tcf_is_statuses_ignore(f)) {
        *c = MPI_STATUSES_IGNORE;
        return 1;
    }
    *c = tcf_tmp((size_t)(n > 0 ? n : 0), sizeof(MPI_Status), stack, TCF_NSTACK * sizeof *stack);
    return *c != NULL;
}

static void stats_out(int n, MPI_Fint *f, MPI_Status *c)
{
    if (c == MPI_STATUSES_IGNORE)
        return;
    for (int i = 0; i < n; i++)
        MPI_Status_c2f(&c[i], f + (size_t)i * TCF_STATUS_SIZE);
}

static void stats_free(MPI_Status *c, MPI_Status *stack)
{
    if (c != MPI_STATUSES_IGNORE)
        tcf_tmp_free(c, stack);
}

FORT(mpi_start, MPI_START, (MPI_Fint *req, MPI_Fint *ierr))
{
    MPI_Request r = MPI_Request_f2c(*req);
    int rc = MPI_Start(&r);
    if (rc == MPI_SUCCESS)
        *req = MPI_Request_c2f(r);
    SETERR(ierr, rc);
}

FORT(mpi_startall, MPI_STARTALL, (MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *ierr))
{
    int n = (int)*count;
    MPI_Request stack[TCF_NSTACK], *c = reqs_in(n, reqs, stack);
    if (!c) {
        SETERR(ierr, MPI_ERR_NO_MEM);
        return;
    }
    int rc = MPI_Startall(n, c);
    if (rc == MPI_SUCCESS)
        reqs_out(n, reqs, c);
    tcf_tmp_free(c, stack);
    SETERR(ierr, rc);
}

FORT(mpi_wait, MPI_WAIT, (MPI_Fint *req, MPI_Fint *status, MPI_Fint *ierr))
{
    MPI_Status s, *cs = tcf_status_in(status, &s);
    MPI_Request r = MPI_Request_f2c(*req);
    int rc = MPI_Wait(&r, cs);
    if (rc == MPI_SUCCESS) {
        *req = MPI_Request_c2f(r);
        tcf_status_out(status, cs);
    }
    SETERR(ierr, rc);
}

FORT(mpi_test, MPI_TEST, (MPI_Fint *req, MPI_Fint *flag, MPI_Fint *status, MPI_Fint *ierr))
{
    MPI_Status s, *cs = tcf_status_in(status, &s);
    MPI_Request r = MPI_Request_f2c(*req);
    int f = 0;
    int rc = MPI_Test(&r, &f, cs);
    if (rc == MPI_SUCCESS) {
        *flag = tcf_c2l(f);
        *req = MPI_Request_c2f(r);
        if (f)
            tcf_status_out(status, cs);
    }
    SETERR(ierr, rc);
}

FORT(mpi_waitall, MPI_WAITALL,
     (MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *statuses, MPI_Fint *ierr))
{
    int n = (int)*count;
    MPI_Request rstack[TCF_NSTACK], *c = reqs_in(n, reqs, rstack);
    MPI_Status sstack[TCF_NSTACK], *cs;
    int ok = stats_in(n, statuses, sstack, &cs);
    int rc = MPI_ERR_NO_MEM;
    if (c && ok) {
        rc = MPI_Waitall(n, c, cs);
        if (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) {
            reqs_out(n, reqs, c);
            stats_out(n, statuses, cs);
        }
    }
    tcf_tmp_free(c, rstack);
    stats_free(cs, sstack);
    SETERR(ierr, rc);
}

FORT(mpi_testall, MPI_TESTALL,
     (MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *flag, MPI_Fint *statuses, MPI_Fint *ierr))
{
    int n = (int)*count, f = 0;
    MPI_Request rstack[TCF_NSTACK], *c = reqs_in(n, reqs, rstack);
    MPI_Status sstack[TCF_NSTACK], *cs;
    int ok = stats_in(n, statuses, sstack, &cs);
    int rc = MPI_ERR_NO_MEM;
    if (c && ok) {
        rc = MPI_Testall(n, c, &f, cs);
        if (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) {
            *flag = tcf_c2l(f);
            reqs_out(n, reqs, c);
            if (f)
                stats_out(n, statuses, cs);
        }
    }
    tcf_tmp_free(c, rstack);
    stats_free(cs, sstack);
    SETERR(ierr, rc);
}

/* C index -> Fortran (1-based; MPI_UNDEFINED stays). */
static MPI_Fint findex(int i) { return (MPI_Fint)(i == MPI_UNDEFINED ? i : i + 1); }

FORT(mpi_waitany, MPI_WAITANY,
     (MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *index, MPI_Fint *status, MPI_Fint *ierr))
{
    int n = (int)*count, idx = MPI_UNDEFINED;
    MPI_Status s, *cs = tcf_status_in(status, &s);
    MPI_Request rstack[TCF_NSTACK], *c = reqs_in(n, reqs, rstack);
    int rc = MPI_ERR_NO_MEM;
    if (c) {
        rc = MPI_Waitany(n, c, &idx, cs);
        if (rc == MPI_SUCCESS) {
            reqs_out(n, reqs, c);
            *index = findex(idx);
            tcf_status_out(status, cs);
        }
    }
    tcf_tmp_free(c, rstack);
    SETERR(ierr, rc);
}

FORT(mpi_testany, MPI_TESTANY,
     (MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *index, MPI_Fint *flag, MPI_Fint *status,
      MPI_Fint *ierr))
{
    int n = (int)*count, idx = MPI_UNDEFINED, f = 0;
    MPI_Status s, *cs = tcf_status_in(status, &s);
    MPI_Request rstack[TCF_NSTACK], *c = reqs_in(n, reqs, rstack);
    int rc = MPI_ERR_NO_MEM;
    if (c) {
        rc = MPI_Testany(n, c, &idx, &f, cs);
        if (rc == MPI_SUCCESS) {
            reqs_out(n, reqs, c);
            *index = findex(idx);
            *flag = tcf_c2l(f);
            if (f)
                tcf_status_out(status, cs);
        }
    }
    tcf_tmp_free(c, rstack);
    SETERR(ierr, rc);
}

typedef int (*somefn)(int, MPI_Request[], int *, int[], MPI_Status[]);

static void some(somefn fn, MPI_Fint *incount, MPI_Fint *reqs, MPI_Fint *outcount,
                 MPI_Fint *indices, MPI_Fint *statuses, MPI_Fint *ierr)
{
    int n = (int)*incount, out = MPI_UNDEFINED;
    MPI_Request rstack[TCF_NSTACK], *c = reqs_in(n, reqs, rstack);
    MPI_Status sstack[TCF_NSTACK], *cs;
    int ok = stats_in(n, statuses, sstack, &cs);
    int istack[TCF_NSTACK];
    int *idx = tcf_tmp((size_t)(n > 0 ? n : 0), sizeof(int), istack, sizeof istack);
    int rc = MPI_ERR_NO_MEM;
    if (c && ok && idx) {
        rc = fn(n, c, &out, idx, cs);
        if (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) {
            reqs_out(n, reqs, c);
            *outcount = (MPI_Fint)out;
            if (out != MPI_UNDEFINED) {
                for (int i = 0; i < out; i++)
                    indices[i] = (MPI_Fint)(idx[i] + 1);
                stats_out(out, statuses, cs);
            }
        }
    }
    tcf_tmp_free(c, rstack);
    stats_free(cs, sstack);
    tcf_tmp_free(idx, istack);
    SETERR(ierr, rc);
}

FORT(mpi_waitsome, MPI_WAITSOME,
     (MPI_Fint *incount, MPI_Fint *reqs, MPI_Fint *outcount, MPI_Fint *indices,
      MPI_Fint *statuses, MPI_Fint *ierr))
{
    some(MPI_Waitsome, incount, reqs, outcount, indices, statuses, ierr);
}

FORT(mpi_testsome, MPI_TESTSOME,
     (MPI_Fint *incount, MPI_Fint *reqs, MPI_Fint *outcount, MPI_Fint *indices,
      MPI_Fint *statuses, MPI_Fint *ierr))
{
    some(MPI_Testsome, incount, reqs, outcount, indices, statuses, ierr);
}

FORT(mpi_cancel, MPI_CANCEL, (MPI_Fint *req, MPI_Fint *ierr))
{
    MPI_Request r = MPI_Request_f2c(*req);
    SETERR(ierr, MPI_Cancel(&r));
}

FORT(mpi_request_free, MPI_REQUEST_FREE, (MPI_Fint *req, MPI_Fint *ierr))
{
    MPI_Request r = MPI_Request_f2c(*req);
    int rc = MPI_Request_free(&r);
    if (rc == MPI_SUCCESS)
        *req = MPI_Request_c2f(MPI_REQUEST_NULL);
    SETERR(ierr, rc);
}

FORT(mpi_request_get_status, MPI_REQUEST_GET_STATUS,
     (MPI_Fint *req, MPI_Fint *flag, MPI_Fint *status, MPI_Fint *ierr))
{
    MPI_Status s, *cs = tcf_status_in(status, &s);
    int f = 0;
    int rc = MPI_Request_get_status(MPI_Request_f2c(*req), &f, cs);
    if (rc == MPI_SUCCESS) {
        *flag = tcf_c2l(f);
        if (f)
            tcf_status_out(status, cs);
    }
    SETERR(ierr, rc);
}

FORT(mpi_test_cancelled, MPI_TEST_CANCELLED, (MPI_Fint *status, MPI_Fint *flag, MPI_Fint *ierr))
{
    MPI_Status s;
    int f = 0;
    int rc = MPI_Status_f2c(status, &s);
    if (rc == MPI_SUCCESS)
        rc = MPI_Test_cancelled(&s, &f);
    if (rc == MPI_SUCCESS)
        *flag = tcf_c2l(f);
    SETERR(ierr, rc);
}
