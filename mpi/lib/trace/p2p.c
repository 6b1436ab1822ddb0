/* Point-to-point wrappers of the tracer, tracer state, and the translation
 * of communicator ranks to MPI_COMM_WORLD ranks.
 *
 * Every send flavour is counted once, at the sender, when the PMPI call
 * succeeded: blocking (Send/Bsend/Ssend/Rsend), non-blocking (I*send),
 * persistent (counted at each MPI_Start/MPI_Startall of a *_send_init
 * request) and the send half of Sendrecv/Sendrecv_replace. Messages to
 * MPI_PROC_NULL, to oneself, and to processes outside MPI_COMM_WORLD are not
 * counted (they never cross a link between two ranks of the job). */
#include "trace.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

int tc_world_rank = -1;
int tc_world_size = 0;
int tc_trace_colls = 0;

static int g_mt;            /* MPI_THREAD_MULTIPLE: counters need the lock */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_keyval = MPI_KEYVAL_INVALID;

void tc_lock(void)
{
    if (g_mt)
        pthread_mutex_lock(&g_mu);
}

void tc_unlock(void)
{
    if (g_mt)
        pthread_mutex_unlock(&g_mu);
}

/* The per-communicator translation table lives in a communicator attribute,
 * so MPI itself frees it when the communicator is freed (no stale entry can
 * match a recycled handle). Layout: [size, world rank of 0, ..., of size-1]. */
static int free_table(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)extra;
    free(attr);
    return MPI_SUCCESS;
}

static int env_true(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0 && strcmp(v, "no") != 0 && strcmp(v, "false") != 0;
}

void tc_state_init(int provided)
{
    g_mt = provided == MPI_THREAD_MULTIPLE;
    PMPI_Comm_rank(MPI_COMM_WORLD, &tc_world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &tc_world_size);
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_table, &g_keyval, NULL);
    tc_trace_colls = env_true(TC_TRACE_COLL_ENV);
}

static int *build_table(MPI_Comm comm)
{
    int inter = 0, size = 0;
    MPI_Group grp, world;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter) {
        PMPI_Comm_remote_size(comm, &size);
        PMPI_Comm_remote_group(comm, &grp);
    } else {
        PMPI_Comm_size(comm, &size);
        PMPI_Comm_group(comm, &grp);
    }
    int *t = malloc(sizeof(int) * ((size_t)size + 1));
    int *in = malloc(sizeof(int) * ((size_t)size + 1));
    if (!t || !in) {
        free(t);
        free(in);
        PMPI_Group_free(&grp);
        return NULL;
    }
    for (int i = 0; i < size; i++)
        in[i] = i;
    PMPI_Comm_group(MPI_COMM_WORLD, &world);
    PMPI_Group_translate_ranks(grp, size, in, world, t + 1);
    PMPI_Group_free(&world);
    PMPI_Group_free(&grp);
    free(in);
    t[0] = size;
    PMPI_Comm_set_attr(comm, g_keyval, t);
    return t;
}

int tc_world_of(MPI_Comm comm, int r)
{
    if (r < 0 || r == MPI_PROC_NULL)
        return -1;
    if (comm == MPI_COMM_WORLD)
        return r;
    int *t = NULL, found = 0;
    PMPI_Comm_get_attr(comm, g_keyval, &t, &found);
    if (!found) {
        t = build_table(comm);
        if (!t)
            return -1;
    }
    if (r >= t[0] || t[r + 1] == MPI_UNDEFINED)
        return -1;
    return t[r + 1];
}

uint64_t tc_bytes_of(int count, MPI_Datatype type)
{
    int sz = 0;
    if (count <= 0)
        return 0;
    PMPI_Type_size(type, &sz);
    return (uint64_t)count * (uint64_t)(sz > 0 ? sz : 0);
}

void tc_add_world(int wdst, uint64_t bytes, uint64_t msgs)
{
    if (wdst < 0 || wdst == tc_world_rank || msgs == 0)
        return;
    tc_lock();
    tc_table_add(wdst, bytes, msgs);
    tc_unlock();
}

void tc_count_world(int wdst, uint64_t bytes, uint64_t n) { tc_add_world(wdst, bytes * n, n); }

void tc_count(MPI_Comm comm, int dst, int count, MPI_Datatype type, uint64_t n)
{
    if (tc_world_rank < 0)
        return;
    tc_lock();
    int w = tc_world_of(comm, dst);
    tc_unlock();
    tc_count_world(w, tc_bytes_of(count, type), n);
}

/* ---- initialization -------------------------------------------------- */

int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        tc_state_init(MPI_THREAD_SINGLE);
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        tc_state_init(*provided);
    return rc;
}

/* ---- blocking -------------------------------------------------------- */

#define BLOCKING(NAME)                                                                 \
    int MPI_##NAME(const void *buf, int count, MPI_Datatype type, int dest, int tag,   \
                   MPI_Comm comm)                                                      \
    {                                                                                  \
        int rc = PMPI_##NAME(buf, count, type, dest, tag, comm);                       \
        if (rc == MPI_SUCCESS)                                                         \
            tc_count(comm, dest, count, type, 1);                                      \
        return rc;                                                                     \
    }
BLOCKING(Send)
BLOCKING(Bsend)
BLOCKING(Ssend)
BLOCKING(Rsend)

/* ---- non-blocking ---------------------------------------------------- */

#define NONBLOCKING(NAME)                                                              \
    int MPI_##NAME(const void *buf, int count, MPI_Datatype type, int dest, int tag,   \
                   MPI_Comm comm, MPI_Request *req)                                    \
    {                                                                                  \
        int rc = PMPI_##NAME(buf, count, type, dest, tag, comm, req);                  \
        if (rc == MPI_SUCCESS)                                                         \
            tc_count(comm, dest, count, type, 1);                                      \
        return rc;                                                                     \
    }
NONBLOCKING(Isend)
NONBLOCKING(Ibsend)
NONBLOCKING(Issend)
NONBLOCKING(Irsend)

/* ---- persistent ------------------------------------------------------ */

#define PERSISTENT(NAME)                                                               \
    int MPI_##NAME(const void *buf, int count, MPI_Datatype type, int dest, int tag,   \
                   MPI_Comm comm, MPI_Request *req)                                    \
    {                                                                                  \
        int rc = PMPI_##NAME(buf, count, type, dest, tag, comm, req);                  \
        if (rc == MPI_SUCCESS && tc_world_rank >= 0) {                                 \
            tc_lock();                                                                 \
            int w = tc_world_of(comm, dest);                                           \
            if (w >= 0 && w != tc_world_rank)                                          \
                tc_persist_put(*req, w, tc_bytes_of(count, type));                     \
            tc_unlock();                                                               \
        }                                                                              \
        return rc;                                                                     \
    }
PERSISTENT(Send_init)
PERSISTENT(Bsend_init)
PERSISTENT(Ssend_init)
PERSISTENT(Rsend_init)

static void count_start(MPI_Request req)
{
    int w;
    uint64_t b;
    tc_lock();
    int hit = tc_persist_get(req, &w, &b);
    tc_unlock();
    if (hit)
        tc_count_world(w, b, 1);
}

int MPI_Start(MPI_Request *req)
{
    MPI_Request r = *req;
    int rc = PMPI_Start(req);
    if (rc == MPI_SUCCESS)
        count_start(r);
    return rc;
}

int MPI_Startall(int n, MPI_Request reqs[])
{
    int rc = PMPI_Startall(n, reqs);
    if (rc == MPI_SUCCESS)
        for (int i = 0; i < n; i++)
            count_start(reqs[i]);
    return rc;
}

int MPI_Request_free(MPI_Request *req)
{
    MPI_Request r = *req;
    int rc = PMPI_Request_free(req);
    if (rc == MPI_SUCCESS) {
        tc_lock();
        tc_persist_del(r);
        tc_unlock();
    }
    return rc;
}

/* ---- combined send-receive ------------------------------------------- */

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag,
                 void *rbuf, int rcount, MPI_Datatype rtype, int source, int rtag,
                 MPI_Comm comm, MPI_Status *status)
{
    int rc = PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag,
                           comm, status);
    if (rc == MPI_SUCCESS)
        tc_count(comm, dest, scount, stype, 1);
    return rc;
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int stag,
                         int source, int rtag, MPI_Comm comm, MPI_Status *status)
{
    int rc = PMPI_Sendrecv_replace(buf, count, type, dest, stag, source, rtag, comm, status);
    if (rc == MPI_SUCCESS)
        tc_count(comm, dest, count, type, 1);
    return rc;
}
