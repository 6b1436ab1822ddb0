/* topocomm_mpi_init: bootstraps topocomm's shared-memory transport among the
 * ranks of each node of an MPI communicator (docs/mpi.md). Node rank 0
 * creates the segment for the PUs the node's ranks are bound to and hands
 * its descriptor to the others over an abstract Unix socket (fdpass.c);
 * every step ends with an agreement over the whole communicator, so a
 * failure anywhere makes every rank return the same error instead of
 * hanging. It calls the PMPI_ entry points: a tool preloaded around the
 * application (tracer, accelerator) neither counts nor intercepts the
 * bootstrap's own traffic. */
#define _GNU_SOURCE
#include "../../include/topocomm_mpi.h"
#include "../../../include/topocomm.h"
#include "fdpass.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char last_error[FDP_ERR_LEN + 100];

const char *topocomm_mpi_last_error(void) { return last_error; }

/* The outcome of one step on one rank: 0 or a negative TC_ERR_* code. */
struct outcome {
    int code;
    char msg[FDP_ERR_LEN];
};

static void set(struct outcome *o, int code, const char *fmt, ...) {
    va_list ap;
    o->code = code;
    va_start(ap, fmt);
    vsnprintf(o->msg, sizeof o->msg, fmt, ap);
    va_end(ap);
}

/* Collective over comm: 0 if every rank succeeded, else the code of the
 * lowest failing rank, whose message becomes every rank's last error. */
static int agree(MPI_Comm comm, const struct outcome *mine, int node_rank) {
    int rank;
    PMPI_Comm_rank(comm, &rank);
    int in[2] = {mine->code != 0 ? 0 : 1, rank}, out[2];
    if (PMPI_Allreduce(in, out, 1, MPI_2INT, MPI_MINLOC, comm) != MPI_SUCCESS) {
        snprintf(last_error, sizeof last_error, "topocomm_mpi_init: MPI_Allreduce failed");
        return TC_ERR_TRANSPORT;
    }
    if (out[0] == 1) return 0;
    struct {
        int code, node_rank;
        char msg[FDP_ERR_LEN];
    } w = {mine->code, node_rank, ""};
    memcpy(w.msg, mine->msg, sizeof w.msg);
    if (PMPI_Bcast(&w, (int)sizeof w, MPI_BYTE, out[1], comm) != MPI_SUCCESS) w.code = 0;
    snprintf(last_error, sizeof last_error, "topocomm_mpi_init: rank %d (node rank %d): %s",
             out[1], w.node_rank, w.msg);
    return w.code != 0 ? w.code : TC_ERR_TRANSPORT;
}

/* The PU this process is bound to, or -1 when it may run on several; and
 * its CPU mask into mask[MASK_INTS] (32 bits each, CPU c in bit c % 32 of
 * int c / 32; all zero when unknown): ranks bound to a package or a cache
 * each are grouped by it in the collectives' near order. */
enum { MASK_INTS = CPU_SETSIZE / 32 };
static int bound_pu(unsigned *mask) {
    cpu_set_t set;
    CPU_ZERO(&set);
    memset(mask, 0, sizeof(unsigned) * MASK_INTS);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
    int one = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) {
            mask[c / 32] |= 1u << (c % 32);
            one = one == -1 ? c : -2;
        }
    return one >= 0 ? one : -1;
}

/* Ints per rank in the bootstrap's gather: PU, pid, CPU mask. */
enum { INFO_INTS = 2 + MASK_INTS };

/* TOPOCOMM_TIMEOUT (seconds) or 30 s for the descriptor hand-off. */
static double handoff_timeout(struct outcome *o) {
    const char *s = getenv("TOPOCOMM_TIMEOUT");
    if (!s) return 30.0;
    char *end;
    double t = strtod(s, &end);
    /* The range of topocomm_transport::TIMEOUT_RANGE. */
    if (end == s || *end != '\0' || !(t >= 1e-3 && t <= 1e6)) {
        set(o, TC_ERR_INVALID_ARGUMENT, "TOPOCOMM_TIMEOUT='%s': expected a number of seconds from 0.001 to 1000000", s);
        return 1.0;
    }
    return t;
}

/* Testing knob TOPOCOMM_MPI_BOOT_DELAY="R:S": node rank R sleeps S seconds
 * before fetching the descriptor (to exercise the bounded hand-off). */
static void test_delay(int node_rank) {
    const char *s = getenv("TOPOCOMM_MPI_BOOT_DELAY");
    if (!s || !*s) return;
    char *end, *end2 = NULL;
    errno = 0;
    long r = strtol(s, &end, 10);
    double secs = *end == ':' ? strtod(end + 1, &end2) : -1.0;
    /* usleep takes under 1 s; at most 60 s, slept second by second. */
    if (errno || end == s || *end != ':' || end2 == end + 1 || *end2 != '\0' || r < 0 ||
        !(secs >= 0.0 && secs <= 60.0)) {
        if (node_rank == 0)
            fprintf(stderr, "topocomm: TOPOCOMM_MPI_BOOT_DELAY='%s': expected RANK:SECONDS with "
                            "SECONDS from 0 to 60; ignored\n", s);
        return;
    }
    if (r != node_rank) return;
    for (; secs >= 1.0; secs -= 1.0) sleep(1);
    usleep((useconds_t)(secs * 1e6));
}

/* Node rank 0: creates the segment and listens; `name` is broadcast to
 * the node ("" on failure). */
static void create(const int *info, int nsize, int *seg_fd, int *lfd, char *name,
                   struct outcome *o) {
    int *pus = malloc(sizeof(int) * (size_t)nsize);
    uint64_t *sets = malloc(sizeof(uint64_t) * (MASK_INTS / 2) * (size_t)nsize);
    if (!pus || !sets) {
        free(pus);
        free(sets);
        set(o, TC_ERR_INTERNAL, "out of memory");
        return;
    }
    for (int r = 0; r < nsize; r++) {
        const int *in = info + (size_t)INFO_INTS * r;
        pus[r] = in[0];
        for (int w = 0; w < MASK_INTS / 2; w++)
            sets[(size_t)r * (MASK_INTS / 2) + w] =
                (uint64_t)(unsigned)in[2 + 2 * w] | (uint64_t)(unsigned)in[3 + 2 * w] << 32;
    }
    const char *rules = getenv("TOPOCOMM_RULES");
    int rc = tc_segment_create_sets(nsize, pus, sets, MASK_INTS / 2, rules && *rules ? rules : NULL,
                                    seg_fd);
    free(pus);
    free(sets);
    if (rc != 0) {
        set(o, rc, "%s", tc_last_error());
        return;
    }
    if (nsize > 1) {
        char err[FDP_ERR_LEN];
        if (fdp_listen(name, nsize, lfd, err) != 0) {
            set(o, TC_ERR_TRANSPORT, "%s", err);
            name[0] = '\0'; /* the peers then skip the hand-off */
        }
    }
}

static int bootstrap(MPI_Comm comm, MPI_Comm node, int flags) {
    int nrank, nsize;
    PMPI_Comm_rank(node, &nrank);
    PMPI_Comm_size(node, &nsize);
    struct outcome o = {0, ""};
    double timeout = handoff_timeout(&o);
    int mine[INFO_INTS];
    mine[0] = bound_pu((unsigned *)mine + 2);
    mine[1] = (int)getpid();
    int *info = NULL;
    if (nrank == 0 && !(info = malloc(sizeof(int) * INFO_INTS * (size_t)nsize))) {
        fprintf(stderr, "topocomm_mpi_init: out of memory\n");
        PMPI_Abort(comm, 1);
    }
    PMPI_Gather(mine, INFO_INTS, MPI_INT, info, INFO_INTS, MPI_INT, 0, node);
    int seg_fd = -1, lfd = -1;
    char name[FDP_NAME_LEN] = "";
    if (nrank == 0 && o.code == 0) create(info, nsize, &seg_fd, &lfd, name, &o);
    PMPI_Bcast(name, FDP_NAME_LEN, MPI_CHAR, 0, node);
    if (nsize > 1) {
        char err[FDP_ERR_LEN];
        if (nrank == 0) {
            int *pids = malloc(sizeof(int) * (size_t)nsize);
            if (!pids) {
                fprintf(stderr, "topocomm_mpi_init: out of memory\n");
                PMPI_Abort(comm, 1);
            }
            for (int r = 0; r < nsize; r++) pids[r] = info[(size_t)INFO_INTS * r + 1];
            if (lfd >= 0 && fdp_serve(lfd, seg_fd, pids, nsize, timeout, err) != 0)
                set(&o, TC_ERR_TIMEOUT, "%s", err);
            free(pids);
        } else if (o.code == 0 && name[0] == '\0') {
            set(&o, TC_ERR_TRANSPORT, "node rank 0 could not create the segment or its socket");
        } else if (o.code == 0) {
            test_delay(nrank);
            if (fdp_fetch(name, nrank, timeout, &seg_fd, err) != 0)
                set(&o, TC_ERR_TRANSPORT, "%s", err);
        }
    }
    free(info);
    int rc = agree(comm, &o, nrank);
    if (rc != 0) {
        if (seg_fd >= 0) close(seg_fd);
        return rc;
    }
    /* tc_init_fd closes seg_fd in every case. */
    int tc = (flags & TOPOCOMM_MPI_SHARED) ? tc_init_fd_shared(seg_fd, nrank)
                                           : tc_init_fd(seg_fd, nrank);
    if (tc != 0) set(&o, tc, "tc_init_fd: %s", tc_last_error());
    rc = agree(comm, &o, nrank);
    if (rc != 0 && tc == 0) tc_finalize();
    return rc;
}

int topocomm_mpi_init(MPI_Comm comm, MPI_Comm *node_comm) {
    return topocomm_mpi_init_ex(comm, 0, 0, node_comm);
}

int topocomm_mpi_init_ex(MPI_Comm comm, int pretend_nodes, int flags, MPI_Comm *node_comm) {
    if (!node_comm) {
        snprintf(last_error, sizeof last_error, "topocomm_mpi_init: node_comm is NULL");
        return TC_ERR_INVALID_ARGUMENT;
    }
    *node_comm = MPI_COMM_NULL;
    int rank, size;
    MPI_Comm node;
    if (PMPI_Comm_rank(comm, &rank) != MPI_SUCCESS || PMPI_Comm_size(comm, &size) != MPI_SUCCESS) {
        snprintf(last_error, sizeof last_error, "topocomm_mpi_init: not a valid communicator");
        return TC_ERR_INVALID_ARGUMENT;
    }
    int split_rc;
    if (pretend_nodes > 0) {
        /* Blocks of consecutive ranks, the first (size % nodes) one larger,
         * as a launcher fills nodes slot by slot. */
        int nodes = pretend_nodes < size ? pretend_nodes : size;
        int base = size / nodes, extra = size % nodes;
        int big = extra * (base + 1);
        int color = rank < big ? rank / (base + 1) : extra + (rank - big) / base;
        split_rc = PMPI_Comm_split(comm, color, rank, &node);
    } else {
        split_rc = PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    }
    if (split_rc != MPI_SUCCESS) {
        snprintf(last_error, sizeof last_error,
                 "topocomm_mpi_init: splitting the communicator into nodes failed");
        return TC_ERR_TRANSPORT;
    }
    int rc = bootstrap(comm, node, flags);
    if (rc != 0) {
        PMPI_Comm_free(&node);
        return rc;
    }
    *node_comm = node;
    return 0;
}

int topocomm_mpi_finalize(void) {
    int rc = tc_finalize();
    if (rc != 0)
        snprintf(last_error, sizeof last_error, "topocomm_mpi_finalize: %s", tc_last_error());
    return rc;
}
