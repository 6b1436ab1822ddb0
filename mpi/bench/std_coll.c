/*
 * std_coll: an osu-style collective latency benchmark that uses only
 * standard MPI calls, so that it runs unchanged under plain MPI and under an
 * interposed PMPI library such as `topocomm accel` (docs/collectives.md,
 * driver scripts/accel-bench.py --bench std_coll).
 *
 *   std_coll [--tests barrier,bcast,reduce,allreduce,gather,scatter,allgather,alltoall]
 *            [--sizes 4:16M | 8,1K,...]
 *            [--time-ms T] [--reps R] [--max-iters N] [--probe N] [--no-check] [--json]
 *
 * Every rank of MPI_COMM_WORLD takes part. For each (test, size) the value
 * is the median over --reps timed batches (default 5) of the batch's mean
 * latency per call, averaged over the ranks as osu_allreduce does, in us.
 * A batch: a barrier, then N calls back to back timed by each rank with
 * MPI_Wtime (bcast and reduce: each call timed alone between untimed
 * barriers, as osu_bcast). Those untimed barriers are PMPI_Barrier, the
 * MPI's own under an interposed library too: which rank leaves a barrier
 * first decides how long the others wait in a rooted call after it (with
 * 4 ranks on 2 CPUs, the accelerator's one-hop barrier let rank 1 leave
 * first and wait 5-6 us for the root in the 8-byte bcast, where Open MPI's
 * let the root leave first), so with MPI_Barrier the ratio of two
 * configurations mixed their barriers into the timed call. The barrier
 * test itself times MPI_Barrier. N is chosen by rank 0 from a probe batch so that a batch lasts
 * about --time-ms (default 20 ms), at least 2 and at most --max-iters
 * (default 100000), and sent to all ranks before the timed batches.
 * Before the probes, 4 to 32 untimed calls (warm_up: up to a quarter
 * second), as OSU's skip iterations.
 *
 * Data: bcast moves `size` bytes (MPI_CHAR) from root 0; reduce (root 0) and
 * allreduce sum size/4 floats (at least one, as osu_reduce); gather, scatter,
 * allgather and alltoall move blocks of `size` bytes (MPI_CHAR) per rank (as
 * osu_gather and osu_alltoall; gather and scatter timed like bcast, root 0);
 * barrier has no size (reported as size 0). Default tests: the first four. The buffers are allocated once at the largest
 * size and reused (warm, as OSU does).
 *
 * --probe N (default 0: none): after each point's timed batches, ranks 0 and
 * 1 run N untimed 8-byte ping-pongs (MPI_Send/MPI_Recv, through the library
 * being measured) and the point gets their one-way time in us as
 * "probe_us": where a VM's host had the two CPUs while the point ran
 * (topocomm bench coll classes each job by them, crates/measure).
 *
 * Data check (default on, --no-check to skip), untimed, before the tests,
 * on a duplicate of MPI_COMM_WORLD (so that a library's per-communicator
 * picks are made on the timed pattern: data_check): for every size, bcast
 * of a byte pattern from every root, and reduce and allreduce of per-rank
 * integers stored exactly in floats, every element
 * checked; each block of gather, scatter, allgather and alltoall checked
 * byte by byte. A mismatch is reported on stderr and the program exits with
 * status 3 without measuring.
 *
 * Output: a table on stdout; with --json one JSON object on stdout:
 *   {"benchmark":"std_coll","meta":{"library":"...","mpi_version":"3.1",
 *    "np":4,"reps":5,"time_ms":20,"ranks":[{"rank":0,"host":"h","cpu":0},...],
 *    "check":"ok"},"results":{"allreduce":[{"size":8,"value":0.9,"unit":"us",
 *    "iters":N,"samples":[...]},...],...}}
 * Bad arguments: one line on stderr from rank 0, exit status 2.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "std_out.h"

#define MAX_SIZES 64
#define MAX_REPS 101

enum { T_BARRIER, T_BCAST, T_REDUCE, T_ALLREDUCE, T_GATHER, T_SCATTER, T_ALLGATHER, T_ALLTOALL, NTESTS };
static const char *const TEST_NAMES[NTESTS] = {"barrier",   "bcast",   "reduce",    "allreduce",
                                               "gather",    "scatter", "allgather", "alltoall"};
/* The default --tests: the first four (the blocks collectives on request). */
#define DEFAULT_TESTS 4

static struct {
    int tests[NTESTS], ntests;
    uint64_t sizes[MAX_SIZES];
    int nsizes;
    double time_s;
    int reps;
    long max_iters;
    int probe;
    int check, json;
} O;

static int rank, np;
static char *sbuf, *rbuf;

static int parse_size(const char *s, uint64_t *out) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s) return -1;
    if (*end == 'K' || *end == 'k') v <<= 10, end++;
    else if (*end == 'M' || *end == 'm') v <<= 20, end++;
    if (*end || v < 1 || v > (1ull << 30)) return -1;
    *out = v;
    return 0;
}

static const char *parse_args(int argc, char **argv) {
    static char err[256];
    O.ntests = DEFAULT_TESTS;
    for (int t = 0; t < DEFAULT_TESTS; t++) O.tests[t] = t;
    O.nsizes = 0;
    O.time_s = 0.020;
    O.reps = 5;
    O.max_iters = 100000;
    O.check = 1;
    const char *sizes = "4:1M";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) { O.json = 1; continue; }
        if (!strcmp(a, "--no-check")) { O.check = 0; continue; }
        if (i + 1 >= argc) {
            snprintf(err, sizeof err, "std_coll: %s: missing value or unknown option (see the header of mpi/bench/std_coll.c)", a);
            return err;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--tests")) {
            O.ntests = 0;
            char tmp[256];
            snprintf(tmp, sizeof tmp, "%s", v);
            for (char *t = strtok(tmp, ","); t; t = strtok(NULL, ",")) {
                int k = -1;
                for (int j = 0; j < NTESTS; j++)
                    if (!strcmp(t, TEST_NAMES[j])) k = j;
                for (int j = 0; j < O.ntests; j++)
                    if (O.tests[j] == k) k = -1;
                if (k < 0) {
                    snprintf(err, sizeof err, "std_coll: --tests: unknown or repeated test '%s' (expected barrier, bcast, reduce, allreduce, gather, scatter, allgather, alltoall)", t);
                    return err;
                }
                O.tests[O.ntests++] = k;
            }
        } else if (!strcmp(a, "--sizes")) {
            sizes = v;
        } else if (!strcmp(a, "--time-ms")) {
            O.time_s = atof(v) / 1000.0;
            if (!(O.time_s > 0 && O.time_s < 60)) return "std_coll: --time-ms: expected a number of ms in (0, 60000)";
        } else if (!strcmp(a, "--reps")) {
            O.reps = atoi(v);
            if (O.reps < 1 || O.reps > MAX_REPS) return "std_coll: --reps: expected 1 to 101";
        } else if (!strcmp(a, "--probe")) {
            char *end;
            long n = strtol(v, &end, 10);
            if (end == v || *end || n < 0 || n > 1000000) return "std_coll: --probe: expected 0 to 1000000 ping-pongs";
            O.probe = (int)n;
        } else if (!strcmp(a, "--max-iters")) {
            O.max_iters = atol(v);
            if (O.max_iters < 2) return "std_coll: --max-iters: expected at least 2";
        } else {
            snprintf(err, sizeof err, "std_coll: unknown option '%s'", a);
            return err;
        }
    }
    const char *colon = strchr(sizes, ':');
    if (colon) {
        char lo[64];
        snprintf(lo, sizeof lo, "%.*s", (int)(colon - sizes), sizes);
        uint64_t a, b;
        if (parse_size(lo, &a) || parse_size(colon + 1, &b) || a > b) {
            snprintf(err, sizeof err, "std_coll: --sizes: bad range '%s' (expected MIN:MAX, 1 <= MIN <= MAX <= 1G)", sizes);
            return err;
        }
        for (uint64_t s = a; s <= b && O.nsizes < MAX_SIZES; s *= 2) O.sizes[O.nsizes++] = s;
    } else {
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s", sizes);
        for (char *t = strtok(tmp, ","); t; t = strtok(NULL, ",")) {
            if (O.nsizes == MAX_SIZES || parse_size(t, &O.sizes[O.nsizes])) {
                snprintf(err, sizeof err, "std_coll: --sizes: bad size '%s' (expected 1 to 1G bytes, e.g. 8,4K,1M; at most %d sizes)", t, MAX_SIZES);
                return err;
            }
            O.nsizes++;
        }
    }
    if (O.nsizes == 0) return "std_coll: --sizes: empty list";
    return NULL;
}

static int elems(uint64_t size) { return size < 4 ? 1 : (int)(size / 4); }

/* One call of `test` with `size` bytes. */
static void call(int test, uint64_t size, MPI_Comm comm) {
    switch (test) {
    case T_BARRIER: MPI_Barrier(comm); break;
    case T_BCAST: MPI_Bcast(sbuf, (int)size, MPI_CHAR, 0, comm); break;
    case T_REDUCE:
        MPI_Reduce(sbuf, rbuf, elems(size), MPI_FLOAT, MPI_SUM, 0, comm);
        break;
    case T_ALLREDUCE:
        MPI_Allreduce(sbuf, rbuf, elems(size), MPI_FLOAT, MPI_SUM, comm);
        break;
    /* Blocks of `size` bytes per rank (osu_gather's convention). */
    case T_GATHER: MPI_Gather(sbuf, (int)size, MPI_CHAR, rbuf, (int)size, MPI_CHAR, 0, comm); break;
    case T_SCATTER: MPI_Scatter(sbuf, (int)size, MPI_CHAR, rbuf, (int)size, MPI_CHAR, 0, comm); break;
    case T_ALLGATHER: MPI_Allgather(sbuf, (int)size, MPI_CHAR, rbuf, (int)size, MPI_CHAR, comm); break;
    default: MPI_Alltoall(sbuf, (int)size, MPI_CHAR, rbuf, (int)size, MPI_CHAR, comm); break;
    }
}

/* Mean seconds per call of one batch of n calls, averaged over the ranks.
 * Rooted collectives (bcast, reduce) would pipeline back to back (the root
 * of a bcast, the leaves of a reduce, run ahead), so as in osu_bcast each
 * call is timed alone between untimed barriers; barrier and allreduce
 * synchronize by themselves and run back to back. */
static double batch(int test, uint64_t size, long n) {
    double mine = 0, sum = 0;
    PMPI_Barrier(MPI_COMM_WORLD);
    if (test == T_BCAST || test == T_REDUCE || test == T_GATHER || test == T_SCATTER) {
        for (long i = 0; i < n; i++) {
            double t0 = MPI_Wtime();
            call(test, size, MPI_COMM_WORLD);
            mine += MPI_Wtime() - t0;
            PMPI_Barrier(MPI_COMM_WORLD);
        }
    } else {
        double t0 = MPI_Wtime();
        for (long i = 0; i < n; i++) call(test, size, MPI_COMM_WORLD);
        mine = MPI_Wtime() - t0;
    }
    mine /= (double)n;
    MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum / np;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

struct point {
    int test;
    uint64_t size;
    long iters;
    double value, samples[MAX_REPS];
    double probe_us; /* < 0: none */
};

/* Untimed calls of each point before its probes, as OSU's skip
 * iterations: at least WARM_MIN (first-touch faults, connection set-up),
 * then batches of WARM_MIN more while fewer than WARM_CALLS were made and
 * less than WARM_S spent (rank 0's clock, its verdict broadcast, so every
 * rank makes the same calls). Under `topocomm accel` a communicator's
 * first calls of a size class may be trials of the ways it can take
 * (12-28 calls for a large allreduce, docs/collectives.md): they fall
 * here for calls of up to about 8 ms, so the timed batches measure the
 * way picked, as an application's calls after its first few do. */
enum { WARM_MIN = 4, WARM_CALLS = 32 };
#define WARM_S 0.25

static void warm_up(int test, uint64_t size) {
    double t0 = MPI_Wtime();
    int more = 1;
    for (long done = 0; more; done += WARM_MIN) {
        batch(test, size, WARM_MIN);
        more = done + WARM_MIN < WARM_CALLS && MPI_Wtime() - t0 < WARM_S;
        MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
}

/* --probe: rank 0's one-way time (us) of O.probe 8-byte ping-pongs with
 * rank 1, the others wait at the barrier after; -1 without --probe or with
 * one rank. */
static double probe(void) {
    if (O.probe == 0 || np < 2) return -1;
    char b[8] = {0};
    double t = 0;
    PMPI_Barrier(MPI_COMM_WORLD);
    if (rank < 2) {
        double t0 = MPI_Wtime();
        for (int i = 0; i < O.probe; i++) {
            if (rank == 0) {
                MPI_Send(b, 8, MPI_CHAR, 1, 77, MPI_COMM_WORLD);
                MPI_Recv(b, 8, MPI_CHAR, 1, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(b, 8, MPI_CHAR, 0, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(b, 8, MPI_CHAR, 0, 77, MPI_COMM_WORLD);
            }
        }
        t = (MPI_Wtime() - t0) / O.probe / 2 * 1e6;
    }
    PMPI_Barrier(MPI_COMM_WORLD);
    return t;
}

static void measure(int test, uint64_t size, struct point *p) {
    /* Warm-up, then probes: 2 calls, 10x more until a batch takes 1/8 of
     * --time-ms. */
    warm_up(test, size);
    long n = 2;
    double per = batch(test, size, n);
    while (per * (double)n < O.time_s / 8 && n < O.max_iters) {
        n *= 10;
        if (n > O.max_iters) n = O.max_iters;
        per = batch(test, size, n);
    }
    long iters = per > 0 ? (long)(O.time_s / per) : O.max_iters;
    if (iters < 2) iters = 2;
    if (iters > O.max_iters) iters = O.max_iters;
    MPI_Bcast(&iters, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    p->test = test;
    p->size = size;
    p->iters = iters;
    double sorted[MAX_REPS];
    for (int r = 0; r < O.reps; r++) sorted[r] = p->samples[r] = batch(test, size, iters) * 1e6;
    qsort(sorted, (size_t)O.reps, sizeof(double), cmp_double);
    p->value = O.reps % 2 ? sorted[O.reps / 2] : 0.5 * (sorted[O.reps / 2 - 1] + sorted[O.reps / 2]);
    p->probe_us = probe();
}

/* Untimed: every root's bcast of a pattern; reduce and allreduce of
 * integers (exact in floats) checked element by element; then the block
 * collectives. On a duplicate of MPI_COMM_WORLD: an interposed library
 * that picks its way per communicator and size from the first calls
 * (topocomm accel's trials, docs/collectives.md) then picks for
 * MPI_COMM_WORLD in warm_up, on the pattern the batches time (root 0,
 * warm buffers), not on the check's (every root in turn, every buffer
 * rewritten before each call). With the check on MPI_COMM_WORLD, 8
 * crowded ranks' 1 MiB broadcasts were picked on it: the transport's
 * trial calls took 720-1430 us there against 150-170 us from root 0
 * alone (Zen 5 VM, 2026-12-02), and the trials chose Open MPI's own. */
static int data_check(uint64_t maxsize) {
    int bad = 0;
    MPI_Comm cc;
    MPI_Comm_dup(MPI_COMM_WORLD, &cc);
    for (int s = 0; s < O.nsizes; s++) {
        uint64_t size = O.sizes[s];
        for (int root = 0; root < np; root++) {
            for (uint64_t i = 0; i < size; i++) sbuf[i] = rank == root ? (char)(i * 13 + root) : 0;
            MPI_Bcast(sbuf, (int)size, MPI_CHAR, root, cc);
            for (uint64_t i = 0; i < size; i++)
                if (sbuf[i] != (char)(i * 13 + root)) {
                    bad++;
                    break;
                }
        }
        int n = elems(size);
        float *in = (float *)sbuf, *out = (float *)rbuf;
        for (int i = 0; i < n; i++) in[i] = (float)(rank + i % 1000);
        float want0 = (float)np * (float)(np - 1) / 2;
        for (int k = 0; k < 2; k++) {
            memset(out, 0, (size_t)n * sizeof(float));
            if (k == 0) MPI_Reduce(in, out, n, MPI_FLOAT, MPI_SUM, 0, cc);
            else MPI_Allreduce(in, out, n, MPI_FLOAT, MPI_SUM, cc);
            if (k == 0 && rank != 0) continue;
            for (int i = 0; i < n; i++)
                if (out[i] != want0 + (float)np * (float)(i % 1000)) {
                    bad++;
                    break;
                }
        }
    }
    (void)maxsize;
    /* Block collectives: byte j of the block from rank a to rank b is
     * pattern(a, b, j) (gather and allgather: b = 0). */
#define PAT(a, b, j) ((char)((a) * 31 + (b) * 7 + (int)(j) * 13))
    for (int s = 0; s < O.nsizes; s++) {
        uint64_t size = O.sizes[s];
        int want_tests[4] = {T_GATHER, T_SCATTER, T_ALLGATHER, T_ALLTOALL};
        for (int t = 0; t < 4; t++) {
            int test = want_tests[t];
            for (int d = 0; d < np; d++)
                for (uint64_t j = 0; j < size; j++)
                    sbuf[(uint64_t)d * size + j] =
                        test == T_ALLTOALL ? PAT(rank, d, j) : test == T_SCATTER ? PAT(0, d, j) : PAT(rank, 0, j);
            memset(rbuf, 0, (size_t)np * size);
            call(test, size, cc);
            int checks = test == T_GATHER ? (rank == 0 ? np : 0) : test == T_SCATTER ? 1 : np;
            for (int a = 0; a < checks && !bad; a++)
                for (uint64_t j = 0; j < size; j++) {
                    char want = test == T_ALLTOALL ? PAT(a, rank, j) : test == T_SCATTER ? PAT(0, rank, j) : PAT(a, 0, j);
                    if (rbuf[(uint64_t)a * size + j] != want) {
                        bad++;
                        break;
                    }
                }
        }
    }
#undef PAT
    int all = 0;
    MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_SUM, cc);
    MPI_Comm_free(&cc);
    return all;
}


struct rankinfo {
    char host[MPI_MAX_PROCESSOR_NAME];
    int cpu;
};

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    const char *err = parse_args(argc, argv);
    if (err) {
        if (rank == 0) fprintf(stderr, "%s\n", err);
        MPI_Finalize();
        return 2;
    }
    uint64_t maxsize = 4;
    for (int s = 0; s < O.nsizes; s++)
        if (O.sizes[s] > maxsize) maxsize = O.sizes[s];
    long pg = sysconf(_SC_PAGESIZE);
    /* np blocks of the largest size: the gather, scatter, allgather and
     * alltoall buffers. */
    size_t bufsize = (size_t)maxsize * (size_t)np;
    if (posix_memalign((void **)&sbuf, pg > 0 ? (size_t)pg : 4096, bufsize) ||
        posix_memalign((void **)&rbuf, pg > 0 ? (size_t)pg : 4096, bufsize)) {
        fprintf(stderr, "std_coll: cannot allocate 2 x %zu bytes\n", bufsize);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(sbuf, 1, bufsize);
    memset(rbuf, 0, bufsize);

    struct rankinfo me;
    memset(&me, 0, sizeof me);
    int len = 0;
    MPI_Get_processor_name(me.host, &len);
    me.cpu = sched_getcpu();
    struct rankinfo *all = rank == 0 ? malloc(sizeof me * (size_t)np) : NULL;
    MPI_Gather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, 0, MPI_COMM_WORLD);

    int bad = O.check ? data_check(maxsize) : 0;
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int ver = 0, sub = 0;
    std_library(lib, &ver, &sub);
    if (rank == 0 && !O.json) {
        printf("# std_coll: %.*s\n# np %d, reps %d, batch %.0f ms\n# data check: %s\n",
               (int)strcspn(lib, "\n"), lib, np, O.reps, O.time_s * 1000,
               !O.check ? "skipped" : bad ? "FAILED" : "ok");
        fflush(stdout);
    }
    struct point *pts = calloc((size_t)NTESTS * MAX_SIZES, sizeof *pts);
    int npts = 0;
    for (int t = 0; t < O.ntests && !bad; t++) {
        int test = O.tests[t];
        if (rank == 0 && !O.json) printf("\n# %-9s %12s %14s %-5s %10s\n", TEST_NAMES[test], "size (B)", "value", "unit", "iters");
        int ns = test == T_BARRIER ? 1 : O.nsizes;
        for (int s = 0; s < ns; s++) {
            struct point *p = &pts[npts++];
            measure(test, test == T_BARRIER ? 0 : O.sizes[s], p);
            if (rank == 0 && !O.json) {
                printf("  %-9s %12llu %14.4f %-5s %10ld\n", TEST_NAMES[test], (unsigned long long)p->size, p->value, "us",
                       p->iters);
                fflush(stdout);
            }
        }
    }
    if (rank == 0 && O.json) {
        printf("{\"benchmark\":\"std_coll\",\"meta\":{\"library\":");
        json_string(lib);
        printf(",\"mpi_version\":\"%d.%d\",\"np\":%d,\"reps\":%d,\"time_ms\":%g,\"ranks\":[", ver, sub, np, O.reps,
               O.time_s * 1000.0);
        for (int r = 0; r < np; r++) {
            printf("%s{\"rank\":%d,\"host\":", r ? "," : "", r);
            json_string(all[r].host);
            printf(",\"cpu\":%d}", all[r].cpu);
        }
        printf("],\"check\":\"%s\"},\"results\":{", !O.check ? "skipped" : bad ? "failed" : "ok");
        int first_test = 1;
        for (int t = 0; t < O.ntests; t++) {
            int first = 1;
            for (int i = 0; i < npts; i++) {
                if (pts[i].test != O.tests[t]) continue;
                if (first) printf("%s\"%s\":[", first_test ? "" : ",", TEST_NAMES[pts[i].test]);
                first_test = 0;
                printf("%s{\"size\":%llu,\"value\":%.6g,\"unit\":\"us\",\"iters\":%ld,\"samples\":[", first ? "" : ",",
                       (unsigned long long)pts[i].size, pts[i].value, pts[i].iters);
                for (int r = 0; r < O.reps; r++) printf("%s%.6g", r ? "," : "", pts[i].samples[r]);
                printf("]");
                if (pts[i].probe_us >= 0) printf(",\"probe_us\":%.6g", pts[i].probe_us);
                printf("}");
                first = 0;
            }
            if (!first) printf("]");
        }
        printf("}}\n");
        fflush(stdout);
    }
    if (bad && rank == 0) fprintf(stderr, "std_coll: data check failed (%d bad results); no measurement done\n", bad);
    free(pts);
    free(all);
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return bad ? 3 : 0;
}
