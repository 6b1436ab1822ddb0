/* Pairs ping-pong: rank r < n/2 ping-pongs with rank r + n/2, all pairs at
 * once, so a placement can be judged by how fast its talkers exchange (used
 * to check what `topocomm map --oversubscribe` does with talkers).
 *
 *   pairs SIZE ITERS [REPS]
 *
 * Each of REPS (default 5) repetitions times ITERS round trips of SIZE bytes
 * after a barrier; a repetition's time is the slowest rank's. Rank 0 prints
 * every repetition and the median, in microseconds per round trip:
 *
 *   pairs: 4 ranks, 1000000 B, 300 round trips: median 571.1 us [reps 570.2 571.1 ...]
 *
 * One untimed repetition warms up first. Exit status 2 on bad arguments. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_REPS 1000

static long parse(const char *s, const char *what, long lo, long hi, int loud)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > hi) {
        if (loud)
            fprintf(stderr, "pairs: %s '%s' must be an integer in [%ld, %ld]\n", what, s, lo, hi);
        return -1;
    }
    return v;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    long size = argc >= 3 ? parse(argv[1], "SIZE", 0, 1L << 30, rank == 0) : -1;
    long iters = argc >= 3 ? parse(argv[2], "ITERS", 1, 100000000, rank == 0) : -1;
    long reps = argc >= 4 ? parse(argv[3], "REPS", 1, MAX_REPS, rank == 0) : 5;
    if (argc < 3 || argc > 4 || size < 0 || iters < 0 || reps < 0 || n % 2 != 0) {
        if (rank == 0)
            fprintf(stderr, "usage: pairs SIZE ITERS [REPS] (an even number of ranks; got %d)\n", n);
        MPI_Finalize();
        return 2;
    }
    char *buf = malloc(size > 0 ? (size_t)size : 1);
    if (!buf) {
        fprintf(stderr, "pairs: cannot allocate %ld bytes\n", size);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int half = n / 2, peer = rank < half ? rank + half : rank - half;
    double times[MAX_REPS];
    for (long r = -1; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t = MPI_Wtime();
        for (long i = 0; i < iters; i++) {
            if (rank < half) {
                MPI_Send(buf, (int)size, MPI_CHAR, peer, 0, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)size, MPI_CHAR, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(buf, (int)size, MPI_CHAR, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, (int)size, MPI_CHAR, peer, 0, MPI_COMM_WORLD);
            }
        }
        t = MPI_Wtime() - t;
        double slowest;
        MPI_Reduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (r >= 0)
            times[r] = slowest / (double)iters * 1e6;
    }
    if (rank == 0) {
        printf("pairs: %d ranks, %ld B, %ld round trips: median ", n, size, iters);
        double sorted[MAX_REPS];
        for (long r = 0; r < reps; r++)
            sorted[r] = times[r];
        qsort(sorted, (size_t)reps, sizeof sorted[0], cmp);
        printf("%.1f us [reps", reps % 2 ? sorted[reps / 2] : (sorted[reps / 2 - 1] + sorted[reps / 2]) / 2);
        for (long r = 0; r < reps; r++)
            printf(" %.1f", times[r]);
        printf("]\n");
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
