/* MPI_Init / MPI_Finalize of the accelerator: bootstraps the transport per
 * node (or per pretend node, TOPOCOMM_ACCEL_NODES=N), learns where every
 * rank runs, registers MPI_COMM_WORLD, and at finalize completes what is
 * left and prints the per-path counts (TOPOCOMM_ACCEL_VERBOSE). If the
 * bootstrap fails anywhere, every rank runs plain MPI and rank 0 says why
 * in one line; a job asking for MPI_THREAD_MULTIPLE does the same. */
#include "accel.h"
#include "../../include/topocomm_mpi.h"

#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ACC_HIDDEN struct acc_global acc = {.node_comm = MPI_COMM_NULL};

static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end != '\0' || x < 0 || x > 1 << 20) {
        if (acc.world_rank == 0)
            fprintf(stderr, "topocomm accel: %s='%s': expected an integer from 0 to 1048576; ignored\n",
                    name, v);
        return dflt;
    }
    return (int)x;
}

void acc_mpi_progress(void) {
    int flag;
    PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
}

static void say_plain(const char *why) {
    if (acc.world_rank == 0)
        fprintf(stderr, "topocomm accel: running plain MPI: %s\n", why);
}

/* glibc's malloc serves blocks of 128 KiB and more by mmap and gives the
 * free top of the heap back beyond 128 KiB, until the free of an mmapped
 * block raises both thresholds to that block's size (mmap) and twice it
 * (trim), at most 32 MiB and 64 MiB. Until a process's history has done
 * that, every call that allocates and frees a large temporary buffer
 * faults its pages in again; Open MPI's reduce does, once per call. So
 * whether a job's large reductions run at one speed or half of it
 * depended on what the program (or the accelerator, whose working buffers
 * are kept) had freed before: 8 ranks on the 2-vCPU AMD EPYC VM, Open
 * MPI's own 1 MiB reduce took 0.97-1.16 ms plain, 1.34-1.71 ms under the
 * accelerator (1.3-1.6x the page faults per call) and 0.44-0.56 ms under
 * it with the thresholds at those ends (docs/commands/accel.md, "Memory
 * allocator"). The accelerator sets them there, where glibc's own
 * adaptation ends, unless the user chose them (MALLOC_*_ variables or a
 * glibc.malloc tunable) or set TOPOCOMM_ACCEL_MALLOC=0. */
enum { MMAP_FROM = 32 << 20, TRIM_FROM = 64 << 20 };

static void settle_malloc(void) {
#ifdef __GLIBC__
    if (env_int("TOPOCOMM_ACCEL_MALLOC", 1) == 0) return;
    const char *t = getenv("GLIBC_TUNABLES");
    if (getenv("MALLOC_MMAP_THRESHOLD_") || getenv("MALLOC_TRIM_THRESHOLD_") ||
        getenv("MALLOC_TOP_PAD_") || getenv("MALLOC_MMAP_MAX_") || (t && strstr(t, "glibc.malloc.")))
        return;
    if (!mallopt(M_MMAP_THRESHOLD, MMAP_FROM) || !mallopt(M_TRIM_THRESHOLD, TRIM_FROM)) {
        if (acc.verbose && acc.world_rank == 0)
            fprintf(stderr, "topocomm accel: malloc thresholds not set (mallopt refused)\n");
    }
#endif
}

/* Where every world rank runs: its node (the world rank of the node's
 * transport rank 0) and its transport rank there. */
static int learn_nodes(void) {
    int leader = acc.world_rank;
    PMPI_Bcast(&leader, 1, MPI_INT, 0, acc.node_comm);
    int mine[2] = {leader, acc.node_rank};
    int *all = malloc(sizeof(int) * 2 * (size_t)acc.world_size);
    acc.node_of = malloc(sizeof(int) * (size_t)acc.world_size);
    acc.noderank_of = malloc(sizeof(int) * (size_t)acc.world_size);
    if (!all || !acc.node_of || !acc.noderank_of) {
        free(all);
        return -1;
    }
    PMPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD);
    acc.nodes = 0;
    for (int r = 0; r < acc.world_size; r++) {
        acc.node_of[r] = all[2 * r];
        acc.noderank_of[r] = all[2 * r + 1];
        if (all[2 * r] == r) acc.nodes++;
    }
    free(all);
    return 0;
}

static void setup(int provided) {
    PMPI_Comm_rank(MPI_COMM_WORLD, &acc.world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &acc.world_size);
    acc.verbose = env_int("TOPOCOMM_ACCEL_VERBOSE", 0);
    acc.lazy = env_int("TOPOCOMM_ACCEL_LAZY", 1) != 0;
    if (env_int("TOPOCOMM_ACCEL", 1) == 0) {
        say_plain("TOPOCOMM_ACCEL=0");
        return;
    }
    if (provided == MPI_THREAD_MULTIPLE) {
        say_plain("the application asked for MPI_THREAD_MULTIPLE");
        return;
    }
    int pretend = env_int("TOPOCOMM_ACCEL_NODES", 0);
    /* The bootstrap agrees over MPI_COMM_WORLD: every rank gets the same
     * outcome, so every rank goes plain together. */
    int rc = topocomm_mpi_init_ex(MPI_COMM_WORLD, pretend, TOPOCOMM_MPI_SHARED, &acc.node_comm);
    if (rc != 0) {
        say_plain(topocomm_mpi_last_error());
        return;
    }
    PMPI_Comm_rank(acc.node_comm, &acc.node_rank);
    PMPI_Comm_size(acc.node_comm, &acc.node_size);
    int ok = learn_nodes() == 0, all_ok;
    PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        topocomm_mpi_finalize();
        say_plain("out of memory");
        return;
    }
    /* An MPI receive may wait for hours: no deadline, dead peers are still
     * detected by the transport. */
    tc_set_timeout(0);
    /* Our calls never overlap: one application thread at a time (no
     * MPI_THREAD_MULTIPLE here), and the helper thread of block.c takes
     * over only through its acquire/release hand-over. So the transport
     * skips its overlap check, a locked instruction per call (a two-rank
     * barrier 0.235 -> 0.207 us on the 2-vCPU Xeon VM). */
    tc_set_serialized(1);
    acc.on = 1;
    settle_malloc();
    acc.note_blocked = tc_beats_watched_x() != 0;
    acc_coll_init();
    acc_comm_register(MPI_COMM_WORLD);
    if (acc.verbose && acc.world_rank == 0)
        fprintf(stderr, "topocomm accel: on: %d ranks on %d node%s%s\n", acc.world_size, acc.nodes,
                acc.nodes == 1 ? "" : "s", pretend > 0 ? " (pretend nodes)" : "");
}

int MPI_Init(int *argc, char ***argv) {
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) setup(MPI_THREAD_SINGLE);
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) setup(*provided);
    return rc;
}

static void report(void) {
    const struct acc_stats *s = &acc.stats;
    if (!acc.node_of) {
        fprintf(stderr, "topocomm accel: rank %d: off (plain MPI)\n", acc.world_rank);
        return;
    }
    fprintf(stderr,
            "topocomm accel: rank %d (node %d): transport %llu msgs %llu bytes sent, %llu "
            "received; plain MPI %llu msgs %llu bytes sent, %llu received; collectives %llu "
            "transport (%llu by lanes), %llu plain MPI; %llu bytes put into members' results; "
            "%llu trees in near order; %llu bytes staged\n",
            acc.world_rank, acc.node_of ? acc.node_of[acc.world_rank] : 0,
            (unsigned long long)s->tc_msgs, (unsigned long long)s->tc_bytes,
            (unsigned long long)s->tc_recvs, (unsigned long long)s->plain_msgs,
            (unsigned long long)s->plain_bytes, (unsigned long long)s->plain_recvs,
            (unsigned long long)s->coll_tc, (unsigned long long)s->coll_lane,
            (unsigned long long)s->coll_plain, (unsigned long long)s->coll_put_bytes,
            (unsigned long long)s->coll_near, (unsigned long long)s->coll_staged_bytes);
}

int MPI_Finalize(void) {
    acc_settle();
    if (acc.on) {
        acc_drain();
        /* Nobody may still be sending to us through the transport. */
        PMPI_Barrier(MPI_COMM_WORLD);
        if (acc.verbose) report();
        acc.on = 0;
        if (topocomm_mpi_finalize() != 0)
            fprintf(stderr, "topocomm accel: rank %d: %s\n", acc.world_rank,
                    topocomm_mpi_last_error());
        PMPI_Comm_free(&acc.node_comm);
    } else if (acc.verbose) {
        report();
    }
    return PMPI_Finalize();
}
