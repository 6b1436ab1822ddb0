/*
 * std_collv: latency of the collectives docs/collectives.md added to the
 * accelerator in its second round (the v variants, reduce-scatter, scans,
 * non-blocking barrier and allreduce), standard MPI only, so that it runs
 * unchanged plain and under `topocomm accel`.
 *
 *   std_collv [--sizes 8,1K,...] [--iters N] [--reps R]
 *
 * Sizes are bytes per rank (per block for the v variants: every rank the
 * same count, displacements in reverse rank order; reduce-scatter and
 * scans: size/8 doubles per rank, at least one). Each value is the median
 * over R batches of N calls back to back (after one untimed batch) of the
 * batch's mean latency per call, averaged over the ranks, in us. The
 * non-blocking ones are timed start + MPI_Wait. One line per (test, size)
 * on stdout from rank 0: "test size_bytes us". Bad arguments: one line on
 * stderr from rank 0, exit status 2.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { GATHERV, ALLGATHERV, ALLTOALLV, RSB, SCAN, EXSCAN, IBARRIER, IALLREDUCE, NT };
static const char *const NAMES[NT] = {"gatherv", "allgatherv", "alltoallv", "reduce_scatter_block",
                                      "scan",    "exscan",     "ibarrier",  "iallreduce"};

static long parse_size(const char *s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || v < 0) return -1;
    if (*end == 'K') v <<= 10, end++;
    else if (*end == 'M') v <<= 20, end++;
    return *end ? -1 : v;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static char *sbuf, *rbuf;
static int *cnt, *dsp, n, me;

static void one(int t, long size) {
    int c = (int)size, k = (int)(size / 8 > 0 ? size / 8 : 1);
    MPI_Request q;
    switch (t) {
    case GATHERV:
        MPI_Gatherv(sbuf, c, MPI_CHAR, rbuf, cnt, dsp, MPI_CHAR, 0, MPI_COMM_WORLD);
        break;
    case ALLGATHERV:
        MPI_Allgatherv(sbuf, c, MPI_CHAR, rbuf, cnt, dsp, MPI_CHAR, MPI_COMM_WORLD);
        break;
    case ALLTOALLV:
        MPI_Alltoallv(sbuf, cnt, dsp, MPI_CHAR, rbuf, cnt, dsp, MPI_CHAR, MPI_COMM_WORLD);
        break;
    case RSB:
        MPI_Reduce_scatter_block(sbuf, rbuf, k, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        break;
    case SCAN:
        MPI_Scan(sbuf, rbuf, k, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        break;
    case EXSCAN:
        MPI_Exscan(sbuf, rbuf, k, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        break;
    case IBARRIER:
        MPI_Ibarrier(MPI_COMM_WORLD, &q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        break;
    case IALLREDUCE:
        MPI_Iallreduce(sbuf, rbuf, k, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        break;
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    long sizes[32];
    int ns = 0, iters = 1000, reps = 5;
    const char *list = "8,1K,16K,256K";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--sizes") && i + 1 < argc) list = argv[++i];
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            if (me == 0) fprintf(stderr, "std_collv: unknown argument '%s'\n", argv[i]);
            MPI_Finalize();
            return 2;
        }
    }
    char *dup = strdup(list);
    for (char *tok = strtok(dup, ","); tok && ns < 32; tok = strtok(NULL, ",")) {
        sizes[ns] = parse_size(tok);
        if (sizes[ns] < 0) {
            if (me == 0) fprintf(stderr, "std_collv: --sizes: '%s' is not a size\n", tok);
            MPI_Finalize();
            return 2;
        }
        ns++;
    }
    if (iters < 1 || reps < 1 || reps > 101) {
        if (me == 0) fprintf(stderr, "std_collv: --iters >= 1 and --reps 1..101 expected\n");
        MPI_Finalize();
        return 2;
    }
    long max = 8;
    for (int i = 0; i < ns; i++) max = sizes[i] > max ? sizes[i] : max;
    sbuf = calloc((size_t)n, (size_t)max);
    rbuf = calloc((size_t)n, (size_t)max);
    cnt = malloc(sizeof(int) * (size_t)n);
    dsp = malloc(sizeof(int) * (size_t)n);
    double lat[101];
    for (int t = 0; t < NT; t++)
        for (int si = 0; si < ns; si++) {
            if (t == IBARRIER && si > 0) break;
            for (int i = 0; i < n; i++) {
                cnt[i] = (int)sizes[si];
                dsp[i] = (int)sizes[si] * (n - 1 - i);
            }
            for (int rep = -1; rep < reps; rep++) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                for (int it = 0; it < iters; it++) one(t, sizes[si]);
                double mine = (MPI_Wtime() - t0) / iters * 1e6, sum = 0;
                MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
                if (rep >= 0) lat[rep] = sum / n;
            }
            qsort(lat, (size_t)reps, sizeof(double), cmp);
            if (me == 0)
                printf("%s %ld %.4g\n", NAMES[t], t == IBARRIER ? 0 : sizes[si], lat[reps / 2]);
        }
    free(dup);
    MPI_Finalize();
    return 0;
}
