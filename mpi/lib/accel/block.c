/* Blocking PMPI calls made while operations of ours are outstanding. The
 * transport progresses only inside our calls, so a rank sitting in
 * PMPI_Barrier would never match the synchronous send a peer waits on
 * (MPICH's pt2pt/rqstatus does exactly that) and the job would hang. The
 * call cannot be swapped for its non-blocking form (MPI_Ibarrier does not
 * match a peer's MPI_Barrier), so a helper thread drives the transport
 * (tc_progress only: it never calls MPI) while this thread is inside the
 * blocking PMPI call. With nothing outstanding (the common case) nothing
 * of this runs.
 *
 * Hand-over protocol on `state` (the transport is used by one thread at a
 * time): the application thread stores BLOCKED (release: its transport
 * calls happen-before the helper's) before the PMPI call; the helper
 * moves BLOCKED -> PROGRESSING (acquire) for one tc_progress pass and
 * stores BLOCKED again (release); after the PMPI call the application
 * thread moves BLOCKED -> RUNNING (acquire: the helper's pass
 * happens-before its next transport call), waiting out a pass in flight. */
#include "accel.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

enum { RUNNING, BLOCKED, PROGRESSING };
static _Atomic int state = RUNNING;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int started;

static void *helper(void *arg) {
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&mu);
        while (atomic_load_explicit(&state, memory_order_relaxed) != BLOCKED)
            pthread_cond_wait(&cv, &mu);
        pthread_mutex_unlock(&mu);
        for (;;) {
            int expect = BLOCKED;
            if (!atomic_compare_exchange_strong_explicit(&state, &expect, PROGRESSING,
                                                         memory_order_acquire,
                                                         memory_order_relaxed))
                break; /* the application thread is back */
            tc_progress();
            atomic_store_explicit(&state, BLOCKED, memory_order_release);
            /* A pass every ~20 us: the peers' cells need no faster answer
             * than their own waits, and the core may be shared. */
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

void acc_block_begin(void) {
    if (!started) {
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        started = pthread_create(&t, &a, helper, NULL) == 0;
        pthread_attr_destroy(&a);
        if (!started) return; /* no helper: the call runs as before */
    }
    pthread_mutex_lock(&mu);
    atomic_store_explicit(&state, BLOCKED, memory_order_release);
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}

void acc_block_end(void) {
    if (!started) return;
    for (;;) {
        int expect = BLOCKED;
        if (atomic_compare_exchange_weak_explicit(&state, &expect, RUNNING, memory_order_acquire,
                                                  memory_order_relaxed))
            return;
        sched_yield(); /* a pass is in flight: it takes microseconds */
    }
}

/* A blocking collective through PMPI_ (ACC_BLOCKING). */
#define BLOCK(call) return ACC_BLOCKING(call)

/* A collective that coll.c may run over the transport: its result when it
 * did, else the PMPI call (counted as plain). */
#define COLL(tc_call, call)                                                                      \
    do {                                                                                       \
        int crc_;                                                                              \
        acc_settle();                                                                          \
        if (tc_call) return crc_;                                                              \
        if (acc.on) acc.stats.coll_plain++;                                                    \
        BLOCK(call);                                                                           \
    } while (0)

int MPI_Barrier(MPI_Comm comm) { COLL(acc_coll_barrier(comm, &crc_), PMPI_Barrier(comm)); }

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
    COLL(acc_coll_bcast(buf, count, type, root, comm, &crc_),
         PMPI_Bcast(buf, count, type, root, comm));
}

int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
               MPI_Comm comm) {
    COLL(acc_coll_reduce(sbuf, rbuf, count, type, op, root, comm, &crc_),
         PMPI_Reduce(sbuf, rbuf, count, type, op, root, comm));
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm) {
    COLL(acc_coll_allreduce(sbuf, rbuf, count, type, op, comm, &crc_),
         PMPI_Allreduce(sbuf, rbuf, count, type, op, comm));
}

int MPI_Gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
               MPI_Datatype rtype, int root, MPI_Comm comm) {
    COLL(acc_coll_gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, &crc_),
         PMPI_Gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm));
}

int MPI_Gatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
                const int displs[], MPI_Datatype rtype, int root, MPI_Comm comm) {
    COLL(acc_coll_gatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, &crc_),
         PMPI_Gatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm));
}

int MPI_Scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                MPI_Datatype rtype, int root, MPI_Comm comm) {
    COLL(acc_coll_scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, &crc_),
         PMPI_Scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm));
}

int MPI_Scatterv(const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype,
                 void *rbuf, int rcount, MPI_Datatype rtype, int root, MPI_Comm comm) {
    COLL(acc_coll_scatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, &crc_),
         PMPI_Scatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm));
}

int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm) {
    COLL(acc_coll_allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, &crc_),
         PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm));
}

int MPI_Allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                   const int rcounts[], const int displs[], MPI_Datatype rtype, MPI_Comm comm) {
    COLL(acc_coll_allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, &crc_),
         PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm));
}

int MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                 MPI_Datatype rtype, MPI_Comm comm) {
    COLL(acc_coll_alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, &crc_),
         PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm));
}

int MPI_Alltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype,
                  void *rbuf, const int rcounts[], const int rdispls[], MPI_Datatype rtype,
                  MPI_Comm comm) {
    COLL(acc_coll_alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm,
                            &crc_),
         PMPI_Alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm));
}

int MPI_Reduce_scatter(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype type,
                       MPI_Op op, MPI_Comm comm) {
    COLL(acc_coll_reduce_scatter(sbuf, rbuf, rcounts, type, op, comm, &crc_),
         PMPI_Reduce_scatter(sbuf, rbuf, rcounts, type, op, comm));
}

int MPI_Reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype type,
                             MPI_Op op, MPI_Comm comm) {
    COLL(acc_coll_reduce_scatter_block(sbuf, rbuf, rcount, type, op, comm, &crc_),
         PMPI_Reduce_scatter_block(sbuf, rbuf, rcount, type, op, comm));
}

int MPI_Scan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
             MPI_Comm comm) {
    COLL(acc_coll_scan(sbuf, rbuf, count, type, op, comm, &crc_),
         PMPI_Scan(sbuf, rbuf, count, type, op, comm));
}

int MPI_Exscan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
               MPI_Comm comm) {
    COLL(acc_coll_exscan(sbuf, rbuf, count, type, op, comm, &crc_),
         PMPI_Exscan(sbuf, rbuf, count, type, op, comm));
}
