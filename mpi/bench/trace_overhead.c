/* Per-call overhead of the topocomm tracer on small-message ping-pong.
 *
 *   LD_PRELOAD=mpi/build/<impl>/libtopocomm-trace.so mpirun -np 2 trace_overhead [-b blocks] [-r roundtrips] [-s bytes] [-d 0|1] [-m 0|1]
 *
 * In one run, ranks 0 and 1 alternate blocks of ping-pong through PMPI_Send
 * (never traced: the tracer only defines MPI_Send) and through MPI_Send
 * (traced when the library is preloaded), in alternating order. -d 1 runs
 * on a duplicate of MPI_COMM_WORLD (the rank-translation path of the tracer).
 * -m 1 streams sends from rank 0 (overhead per call = (traced - untraced) /
 * sends): the tracer's whole CPU cost; in ping-pong part of it overlaps the
 * message's flight. Each block
 * pair gives one sample of the overhead per send call:
 *   (time with MPI_Send - time with PMPI_Send) / (2 * round trips)
 * (a round trip has two sends on its critical path; receives are not traced).
 * Printed: median and non-parametric 95% confidence interval of that sample,
 * and the median one-way latency of both variants. Without the tracer the
 * overhead is ~0 and the run is a control for the method's noise. */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median and the order statistics bounding a 95% CI of the median. */
static void stats(double *v, int n, double *med, double *lo, double *hi)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    *med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    double h = 0.98 * __builtin_sqrt((double)n); /* 1.96 * sqrt(n) / 2 */
    int j = (int)(n / 2.0 - h), k = (int)(n / 2.0 + h + 1);
    *lo = v[j < 0 ? 0 : j];
    *hi = v[k >= n ? n - 1 : k];
}

static MPI_Comm comm; /* MPI_COMM_WORLD, or a duplicate with -d 1 */
static int stream;   /* -m 1: streaming sends instead of ping-pong */

static double block(int me, int traced, int rounds, char *buf, int bytes)
{
    int (*send)(const void *, int, MPI_Datatype, int, int, MPI_Comm) =
        traced ? MPI_Send : PMPI_Send;
    MPI_Status st;
    double t0 = MPI_Wtime();
    if (stream) {
        /* Rank 0 streams `rounds` eager sends, rank 1 acknowledges the
         * burst: the sender's CPU is the bottleneck, so all of the
         * tracer's bookkeeping shows (in ping-pong it overlaps the flight). */
        for (int i = 0; i < rounds; i++) {
            if (me == 0)
                send(buf, bytes, MPI_BYTE, 1, 4, comm);
            else
                MPI_Recv(buf, bytes, MPI_BYTE, 0, 4, comm, &st);
        }
        if (me == 0)
            MPI_Recv(buf, 0, MPI_BYTE, 1, 5, comm, &st);
        else
            PMPI_Send(buf, 0, MPI_BYTE, 0, 5, comm);
        return MPI_Wtime() - t0;
    }
    for (int i = 0; i < rounds; i++) {
        if (me == 0) {
            send(buf, bytes, MPI_BYTE, 1, 3, comm);
            MPI_Recv(buf, bytes, MPI_BYTE, 1, 3, comm, &st);
        } else {
            MPI_Recv(buf, bytes, MPI_BYTE, 0, 3, comm, &st);
            send(buf, bytes, MPI_BYTE, 0, 3, comm);
        }
    }
    return MPI_Wtime() - t0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int me, n, blocks = 101, rounds = 500, bytes = 8, dup = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    for (int i = 1; i + 1 < argc; i += 2) {
        int v = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "-b") && v > 0)
            blocks = v;
        else if (!strcmp(argv[i], "-r") && v > 0)
            rounds = v;
        else if (!strcmp(argv[i], "-s") && v >= 0)
            bytes = v;
        else if (!strcmp(argv[i], "-d") && v >= 0)
            dup = v;
        else if (!strcmp(argv[i], "-m") && v >= 0)
            stream = v;
        else {
            if (me == 0)
                fprintf(stderr, "trace_overhead: bad argument '%s %s'\n", argv[i], argv[i + 1]);
            MPI_Finalize();
            return 2;
        }
    }
    if (n < 2) {
        if (me == 0)
            fprintf(stderr, "trace_overhead: needs 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    comm = MPI_COMM_WORLD;
    if (dup)
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    char *buf = calloc((size_t)bytes + 1, 1);
    double *ovh = malloc(sizeof(double) * (size_t)blocks);
    double *lt = malloc(sizeof(double) * (size_t)blocks), *lu = malloc(sizeof(double) * (size_t)blocks);
    if (me < 2) {
        block(me, 0, rounds, buf, bytes); /* warm-up */
        block(me, 1, rounds, buf, bytes);
        for (int b = 0; b < blocks; b++) {
            double tu, tt;
            if (b % 2) {
                tu = block(me, 0, rounds, buf, bytes);
                tt = block(me, 1, rounds, buf, bytes);
            } else {
                tt = block(me, 1, rounds, buf, bytes);
                tu = block(me, 0, rounds, buf, bytes);
            }
            double calls = stream ? rounds : 2.0 * rounds;
            ovh[b] = (tt - tu) / calls * 1e9;
            lt[b] = tt / calls * 1e9;
            lu[b] = tu / calls * 1e9;
        }
    }
    if (me == 0) {
        int loaded = dlsym(RTLD_DEFAULT, "tc_write_output") != NULL;
        double m, lo, hi, mt, a, c, mu;
        stats(ovh, blocks, &m, &lo, &hi);
        stats(lt, blocks, &mt, &a, &c);
        stats(lu, blocks, &mu, &a, &c);
        printf("trace_overhead: tracer %s; %s: %d blocks x %d %s of %d bytes on %s\n",
               loaded ? "loaded" : "NOT loaded (control run)", stream ? "streaming" : "ping-pong",
               blocks, rounds, stream ? "sends" : "round trips", bytes,
               dup ? "a duplicate of MPI_COMM_WORLD" : "MPI_COMM_WORLD");
        printf("trace_overhead: time per send median (%s): MPI_Send %.1f ns, PMPI_Send %.1f ns\n",
               stream ? "sender throughput" : "one-way latency", mt, mu);
        printf("trace_overhead: overhead per send call: median %.1f ns, 95%% CI [%.1f, %.1f] ns\n",
               m, lo, hi);
    }
    if (dup)
        MPI_Comm_free(&comm);
    free(buf);
    free(ovh);
    free(lt);
    free(lu);
    MPI_Finalize();
    return 0;
}
