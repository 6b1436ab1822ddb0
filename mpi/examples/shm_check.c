/* Checks topocomm's shared-memory transport bootstrapped from MPI
 * (topocomm_mpi_init, libtopocomm-mpi.so): on each node, a ring over all node
 * ranks and a ping-pong between node rank 0 and every other node rank, with
 * payloads from 1 B to 4 MiB (inline, eager, pipelined and single-copy
 * protocols), each verified byte by byte. One line per check and rank:
 *   node N rank R/S: ring 4194304 B ok
 *   node N rank R/S: ping-pong 0<->P 4194304 B ok
 * then `shm_check: all C checks passed on P ranks` from rank 0 of
 * MPI_COMM_WORLD. Exit 1 on any failure (bootstrap included, then every rank
 * prints the agreed error).
 *
 *   shm_check [--bench] [--exit-rank R]
 *
 * --bench adds a small comparison between node ranks 0 and 1: ping-pong
 * latency (8 B) and bandwidth (1 MiB), tc_send/tc_recv vs MPI_Send/MPI_Recv
 * on the node communicator, median of 11 samples (printed only).
 * --exit-rank R: world rank R exits (code 3) before the bootstrap (a fault
 * for the tests: the job must end with an error, not hang). */
#include "../../include/topocomm.h"
#include "../include/topocomm_mpi.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const size_t SIZES[] = {1, 40, 41, 1000, 16384, 16385, 65536, 262144, 1048576, 4194304};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])
#define TAG_RING 1
#define TAG_PING 2
#define TAG_PONG 3

static unsigned char pattern(int src, size_t i, size_t n) {
    return (unsigned char)(src * 131 + i * 7 + n);
}

static void fill(unsigned char *b, size_t n, int src) {
    for (size_t i = 0; i < n; i++) b[i] = pattern(src, i, n);
}

/* "" when b holds src's pattern of n bytes and the status says so. */
static const char *verify(const unsigned char *b, size_t n, int src, int rc,
                          const tc_status *st, char *why, size_t wlen) {
    if (rc != 0) {
        snprintf(why, wlen, "error %d: %s", rc, tc_last_error());
        return why;
    }
    if (st->source != src || st->count != n) {
        snprintf(why, wlen, "status source %d count %zu, expected %d and %zu", st->source,
                 st->count, src, n);
        return why;
    }
    for (size_t i = 0; i < n; i++)
        if (b[i] != pattern(src, i, n)) {
            snprintf(why, wlen, "byte %zu is %u, expected %u", i, b[i], pattern(src, i, n));
            return why;
        }
    return "";
}

static int report(int node, int r, int s, const char *what, size_t n, const char *why) {
    printf("node %d rank %d/%d: %s %zu B %s%s\n", node, r, s, what, n, why[0] ? "FAILED: " : "ok",
           why);
    return why[0] ? 1 : 0;
}

static double median(double *v, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return v[n / 2];
}

/* Median time of one round trip of n bytes between node ranks 0 and 1. */
static double pingpong(int use_tc, MPI_Comm node, int r, size_t n, unsigned char *buf) {
    enum { SAMPLES = 11 };
    int iters = n > 65536 ? 20 : 500;
    double t[SAMPLES];
    for (int s = -1; s < SAMPLES; s++) { /* s = -1: warm-up */
        MPI_Barrier(node);
        double t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++) {
            if (r == 0) {
                if (use_tc) {
                    tc_send(buf, n, 1, TAG_PING);
                    tc_recv(buf, n, 1, TAG_PONG, NULL);
                } else {
                    MPI_Send(buf, (int)n, MPI_BYTE, 1, TAG_PING, node);
                    MPI_Recv(buf, (int)n, MPI_BYTE, 1, TAG_PONG, node, MPI_STATUS_IGNORE);
                }
            } else if (r == 1) {
                if (use_tc) {
                    tc_recv(buf, n, 0, TAG_PING, NULL);
                    tc_send(buf, n, 0, TAG_PONG);
                } else {
                    MPI_Recv(buf, (int)n, MPI_BYTE, 0, TAG_PING, node, MPI_STATUS_IGNORE);
                    MPI_Send(buf, (int)n, MPI_BYTE, 0, TAG_PONG, node);
                }
            }
        }
        if (s >= 0) t[s] = (MPI_Wtime() - t0) / iters;
    }
    return median(t, SAMPLES);
}

static void bench(MPI_Comm node, int r, int s) {
    if (s < 2) return;
    unsigned char *buf = calloc(1 << 20, 1);
    double lat_tc = pingpong(1, node, r, 8, buf), lat_mpi = pingpong(0, node, r, 8, buf);
    double bw_tc = pingpong(1, node, r, 1 << 20, buf), bw_mpi = pingpong(0, node, r, 1 << 20, buf);
    if (r == 0) {
        printf("bench (node ranks 0-1, median of 11): latency 8 B: topocomm %.2f us, MPI %.2f us\n",
               lat_tc / 2 * 1e6, lat_mpi / 2 * 1e6);
        printf("bench (node ranks 0-1, median of 11): bandwidth 1 MiB: topocomm %.2f GB/s, MPI "
               "%.2f GB/s\n",
               2.0 * (1 << 20) / bw_tc / 1e9, 2.0 * (1 << 20) / bw_mpi / 1e9);
    }
    free(buf);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int wrank, wsize, do_bench = 0, exit_rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--bench")) {
            do_bench = 1;
        } else if (!strcmp(argv[i], "--exit-rank") && i + 1 < argc) {
            exit_rank = atoi(argv[++i]);
        } else {
            if (wrank == 0) fprintf(stderr, "shm_check: unknown argument '%s'\n", argv[i]);
            MPI_Finalize();
            return 2;
        }
    }
    if (wrank == exit_rank) {
        fprintf(stderr, "shm_check: rank %d exits before the bootstrap (--exit-rank)\n", wrank);
        exit(3);
    }
    MPI_Comm node;
    int rc = topocomm_mpi_init(MPI_COMM_WORLD, &node);
    if (rc != 0) {
        fprintf(stderr, "shm_check: rank %d: %s (code %d)\n", wrank, topocomm_mpi_last_error(),
                rc);
        MPI_Finalize();
        return 1;
    }
    int r = tc_rank(), s = tc_size(), nr, ns, leader = wrank;
    MPI_Comm_rank(node, &nr);
    MPI_Comm_size(node, &ns);
    MPI_Bcast(&leader, 1, MPI_INT, 0, node); /* node id: world rank of its rank 0 */
    int bad = 0, checks = 0;
    char why[200];
    if (r != nr || s != ns) {
        printf("node %d rank %d/%d: FAILED: tc rank/size %d/%d\n", leader, nr, ns, r, s);
        bad++;
    }
    size_t max = SIZES[NSIZES - 1];
    unsigned char *out = malloc(max), *in = malloc(max);
    for (size_t k = 0; k < NSIZES && !bad; k++) {
        size_t n = SIZES[k];
        /* Ring: send to the next node rank, receive from the previous one. */
        int next = (r + 1) % s, prev = (r + s - 1) % s;
        tc_request req;
        tc_status st = {-1, -1, 0};
        fill(out, n, r);
        memset(in, 0, n);
        int e = tc_isend(out, n, next, TAG_RING, &req);
        int rr = e ? e : tc_recv(in, max, prev, TAG_RING, &st);
        if (!e) e = tc_wait(&req, NULL);
        bad += report(leader, r, s, "ring", n, verify(in, n, prev, rr ? rr : e, &st, why, sizeof why));
        checks++;
        /* Ping-pong: node rank 0 with each other rank; the echo is the
         * peer's own pattern, so both directions are checked. */
        for (int p = 1; p < s; p++) {
            char pair[32];
            snprintf(pair, sizeof pair, "ping-pong 0<->%d", p);
            if (r == 0) {
                fill(out, n, 0);
                e = tc_send(out, n, p, TAG_PING);
                memset(in, 0, n);
                rr = e ? e : tc_recv(in, max, p, TAG_PONG, &st);
                bad += report(leader, r, s, pair, n, verify(in, n, p, rr, &st, why, sizeof why));
                checks++;
            } else if (r == p) {
                memset(in, 0, n);
                rr = tc_recv(in, max, 0, TAG_PING, &st);
                const char *w = verify(in, n, 0, rr, &st, why, sizeof why);
                bad += report(leader, r, s, pair, n, w);
                checks++;
                fill(out, n, r);
                if (tc_send(out, n, 0, TAG_PONG) != 0) bad++;
            }
        }
    }
    free(out);
    free(in);
    if (!bad && tc_barrier() != 0) {
        printf("node %d rank %d/%d: FAILED: tc_barrier: %s\n", leader, r, s, tc_last_error());
        bad++;
    }
    if (!bad && do_bench) bench(node, r, s);
    int fin = topocomm_mpi_finalize();
    if (fin != 0) {
        printf("node %d rank %d/%d: FAILED: %s\n", leader, r, s, topocomm_mpi_last_error());
        bad++;
    }
    MPI_Comm_free(&node);
    int tot[2] = {bad, checks}, sum[2];
    MPI_Reduce(tot, sum, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    int any;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (wrank == 0) {
        if (sum[0] == 0)
            printf("shm_check: all %d checks passed on %d ranks\n", sum[1], wsize);
        else
            printf("shm_check: %d of %d checks FAILED on %d ranks\n", sum[0], sum[1], wsize);
    }
    MPI_Finalize();
    return any ? 1 : 0;
}
