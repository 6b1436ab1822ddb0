/* Ring benchmark of Mercier & Jeannot (EuroMPI 2011, seed 003): k rings of m
 * processes; in each ring a token of S bytes goes around L times (the ring
 * leader, position 0, starts it and gets it back), then the ring leaders
 * allgather their tokens. Ring r is made of ranks r*m .. r*m+m-1 of the
 * communicator the benchmark runs on.
 *
 *   ring [-k rings] [-m size] [-l laps] [-s bytes] [-w warmup laps]
 *        [--mode send|ssend|isend|persistent] [--graph] [--reorder 0|1] [--print]
 *
 * --graph builds a distributed graph communicator of the rings with
 * MPI_Dist_graph_create_adjacent (in = previous, out = next, weight = bytes
 * sent per run) with reorder as given (default 1) and runs on it; each rank then
 * checks that MPI_Dist_graph_neighbors returns exactly its ring neighbours.
 * --print: each rank prints `rank W new N ring R pos P` (W its
 * MPI_COMM_WORLD rank, N its rank in the communicator used).
 *
 * Exact point-to-point traffic per run, for the tracer tests: each member
 * sends L+w messages of S bytes to the next member of its ring (the warm-up
 * laps are real laps). Collectives (counted only on request): one
 * MPI_Barrier on the communicator used, one MPI_Allgather of S bytes among the
 * k leaders (ranks pos == 0, in ring order), one MPI_Reduce of 2 doubles to
 * rank 0 and one MPI_Allreduce of 1 int, all on the communicator used. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum mode { M_SEND, M_SSEND, M_ISEND, M_PERSISTENT };

static void usage(int rank, const char *msg)
{
    if (rank == 0)
        fprintf(stderr,
                "ring: %s\nusage: ring [-k rings] [-m size] [-l laps] [-s bytes] [-w warmup]"
                " [--mode send|ssend|isend|persistent] [--graph] [--reorder 0|1] [--print]\n",
                msg);
    MPI_Finalize();
    exit(2);
}

static int pos_int(const char *s, int rank, const char *what)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < 0 || v > 1 << 30) {
        char m[128];
        snprintf(m, sizeof m, "%s: expected a non-negative integer, got '%s'", what, s);
        usage(rank, m);
    }
    return (int)v;
}

/* One lap of the token in the ring of `comm` containing rank `me`. */
static void lap(MPI_Comm comm, int me, int m, int first, char *buf, int bytes, enum mode mode,
                MPI_Request *preq)
{
    int pos = me - first, next = first + (pos + 1) % m, prev = first + (pos + m - 1) % m;
    if (m == 1)
        return;
    if (pos != 0)
        MPI_Recv(buf, bytes, MPI_BYTE, prev, 7, comm, MPI_STATUS_IGNORE);
    switch (mode) {
    case M_SEND:
        MPI_Send(buf, bytes, MPI_BYTE, next, 7, comm);
        break;
    case M_SSEND:
        MPI_Ssend(buf, bytes, MPI_BYTE, next, 7, comm);
        break;
    case M_ISEND: {
        MPI_Request r;
        MPI_Isend(buf, bytes, MPI_BYTE, next, 7, comm, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        break;
    }
    case M_PERSISTENT:
        MPI_Start(preq);
        MPI_Wait(preq, MPI_STATUS_IGNORE);
        break;
    }
    if (pos == 0)
        MPI_Recv(buf, bytes, MPI_BYTE, prev, 7, comm, MPI_STATUS_IGNORE);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int wrank, wsize;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);

    int k = 0, m = 0, laps = 100, bytes = 1024, warm = 0, graph = 0, reorder = 1, print = 0;
    enum mode mode = M_SEND;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "-k") && more)
            k = pos_int(argv[++i], wrank, "-k");
        else if (!strcmp(a, "-m") && more)
            m = pos_int(argv[++i], wrank, "-m");
        else if (!strcmp(a, "-l") && more)
            laps = pos_int(argv[++i], wrank, "-l");
        else if (!strcmp(a, "-s") && more)
            bytes = pos_int(argv[++i], wrank, "-s");
        else if (!strcmp(a, "-w") && more)
            warm = pos_int(argv[++i], wrank, "-w");
        else if (!strcmp(a, "--reorder") && more)
            reorder = pos_int(argv[++i], wrank, "--reorder") != 0;
        else if (!strcmp(a, "--graph"))
            graph = 1;
        else if (!strcmp(a, "--print"))
            print = 1;
        else if (!strcmp(a, "--mode") && more) {
            const char *v = argv[++i];
            if (!strcmp(v, "send"))
                mode = M_SEND;
            else if (!strcmp(v, "ssend"))
                mode = M_SSEND;
            else if (!strcmp(v, "isend"))
                mode = M_ISEND;
            else if (!strcmp(v, "persistent"))
                mode = M_PERSISTENT;
            else
                usage(wrank, "--mode: expected send, ssend, isend or persistent");
        } else {
            char msg[160];
            snprintf(msg, sizeof msg, "unknown or incomplete argument '%s'", a);
            usage(wrank, msg);
        }
    }
    /* Defaults: m = 4 members per ring, as many rings as fit. */
    if (m == 0)
        m = k ? wsize / k : (wsize >= 4 ? 4 : wsize);
    if (k == 0)
        k = m ? wsize / m : 0;
    if (m < 1 || k < 1 || (long)k * m != wsize) {
        char msg[160];
        snprintf(msg, sizeof msg, "-k %d rings of -m %d processes need %ld ranks, the job has %d",
                 k, m, (long)k * m, wsize);
        usage(wrank, msg);
    }

    MPI_Comm comm = MPI_COMM_WORLD;
    if (graph) {
        /* Ring neighbours in the numbering of MPI_COMM_WORLD (= graph vertices). */
        int first = wrank / m * m, pos = wrank % m;
        int prev = first + (pos + m - 1) % m, next = first + (pos + 1) % m;
        int w = bytes * (laps + warm);
        int deg = m > 1 ? 1 : 0;
        MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, deg, &prev, deg ? &w : MPI_WEIGHTS_EMPTY,
                                       deg, &next, deg ? &w : MPI_WEIGHTS_EMPTY, MPI_INFO_NULL,
                                       reorder, &comm);
    }
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    int ring = me / m, first = ring * m, pos = me - first;
    int next = first + (pos + 1) % m, prev = first + (pos + m - 1) % m;

    int bad = 0;
    if (graph && m > 1) {
        int indeg, outdeg, weighted, src = -1, dst = -1, sw, dw;
        MPI_Dist_graph_neighbors_count(comm, &indeg, &outdeg, &weighted);
        if (indeg == 1 && outdeg == 1)
            MPI_Dist_graph_neighbors(comm, 1, &src, &sw, 1, &dst, &dw);
        if (indeg != 1 || outdeg != 1 || src != prev || dst != next) {
            fprintf(stderr,
                    "ring: rank %d: graph neighbours in=%d (%d) out=%d (%d), expected %d -> "
                    "%d\n",
                    me, indeg, src, outdeg, dst, prev, next);
            bad = 1;
        }
    }
    if (print)
        printf("rank %d new %d ring %d pos %d\n", wrank, me, ring, pos);

    char *buf = calloc((size_t)bytes + 1, 1);
    MPI_Request preq = MPI_REQUEST_NULL;
    if (mode == M_PERSISTENT && m > 1)
        MPI_Send_init(buf, bytes, MPI_BYTE, next, 7, comm, &preq);
    for (int i = 0; i < warm; i++)
        lap(comm, me, m, first, buf, bytes, mode, &preq);
    MPI_Barrier(comm);
    double t0 = MPI_Wtime();
    for (int i = 0; i < laps; i++)
        lap(comm, me, m, first, buf, bytes, mode, &preq);
    double t1 = MPI_Wtime();

    /* Leaders exchange their tokens. */
    MPI_Comm leaders;
    MPI_Comm_split(comm, pos == 0 ? 0 : MPI_UNDEFINED, ring, &leaders);
    if (leaders != MPI_COMM_NULL) {
        char *all = malloc((size_t)bytes * (size_t)k + 1);
        MPI_Allgather(buf, bytes, MPI_BYTE, all, bytes, MPI_BYTE, leaders);
        free(all);
        MPI_Comm_free(&leaders);
    }
    double t2 = MPI_Wtime();
    if (preq != MPI_REQUEST_NULL)
        MPI_Request_free(&preq);

    double times[2] = {t1 - t0, t2 - t0}, maxt[2];
    MPI_Reduce(times, maxt, 2, MPI_DOUBLE, MPI_MAX, 0, comm);
    int anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, comm);
    if (me == 0) {
        printf("ring: %d rings x %d ranks, %d laps of %d bytes: laps %.6f s (%.3f us/hop), "
               "total %.6f s%s\n",
               k, m, laps, bytes, maxt[0], laps && m ? maxt[0] * 1e6 / laps / m : 0.0, maxt[1],
               graph ? (reorder ? " [graph, reorder=1]" : " [graph, reorder=0]") : "");
        if (graph)
            printf("ring: graph neighbours %s\n", anybad ? "WRONG" : "ok");
    }
    free(buf);
    if (comm != MPI_COMM_WORLD)
        MPI_Comm_free(&comm);
    MPI_Finalize();
    return anybad ? 1 : 0;
}
