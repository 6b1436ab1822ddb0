/*
 * std_p2p: an osu-style point-to-point benchmark that uses only standard MPI
 * calls (no topocomm header, no MPI_T, no vendor extension), so that it can
 * run unchanged under plain MPI and under an interposed PMPI library such as
 * `topocomm accel` (docs/benchmarks/accel.md, driver scripts/accel-bench.py).
 *
 *   std_p2p [--tests latency,bw,bibw,msgrate] [--sizes 1:16M | 1,8,4K,...]
 *           [--iters N] [--warmup N] [--time-ms T] [--min-iters N]
 *           [--max-iters N] [--reps R] [--window W] [--msgrate-size S]
 *           [--no-check] [--strided] [--json]
 *
 * --strided: each message is a non-contiguous datatype instead of bytes:
 * size/8 doubles, every other double of a buffer twice as large
 * (MPI_Type_vector(size/8, 1, 2, MPI_DOUBLE), as a column of a matrix or a
 * halo face), so both ends pack and unpack; sizes below 8 B are refused.
 * The data check stays on bytes.
 *
 * Ranks 0 and 1 of MPI_COMM_WORLD take part; other ranks wait at the final
 * MPI_Barrier. Every message goes over MPI_COMM_WORLD.
 *
 * Tests (one value per (test, size) = median over --reps timed batches):
 *   latency  ping-pong with MPI_Send/MPI_Recv; half the mean round trip, us.
 *   bw       rank 0 posts W MPI_Isend, MPI_Waitall; rank 1 posts W MPI_Irecv,
 *            MPI_Waitall, then sends a 4-byte ack (osu_bw); GB/s (1e9 B/s).
 *   bibw     both ranks post W MPI_Irecv and W MPI_Isend, MPI_Waitall
 *            (osu_bibw); GB/s of both directions together.
 *   msgrate  the bw exchange with --msgrate-size byte messages (default 8),
 *            counted in millions of messages per second.
 * W is --window (default 64, as OSU) but at most --window-bytes / size
 * (default 64 MiB, at least 1), so a 16 MiB window holds 4 messages and one
 * window stays short; the table and the JSON give W per point.
 * Buffers: one send and one receive buffer per rank, page-aligned, allocated
 * once at the largest size, touched before use and reused by every message
 * (warm, as OSU does; the W receives of a window share the receive buffer as
 * in osu_bw, so its contents are not meaningful during the timed loops).
 *
 * Iterations: with --iters N every batch runs N iterations (round trips or
 * windows) after --warmup iterations (default N/10, at least 1). Without
 * --iters the count is scaled per size: rank 0 runs probe batches of 1, 2, 4,
 * ... iterations (these are the warm-up) until the fastest iteration seen
 * times the batch length reaches --time-ms / 8, then every timed batch gets
 * the count that the fastest iteration would need to fill --time-ms (default
 * 50 ms; a slow machine makes batches longer, never shorter; at least 3
 * probes unless 2 probes already used --time-ms),
 * clamped to [--min-iters, --max-iters]; --warmup adds that many untimed
 * iterations in front of every timed batch. Rank 0 decides and tells rank 1
 * with a control message before each batch; rank 0's MPI_Wtime times it.
 *
 * Data check (default on, --no-check to skip), untimed, before the tests: for
 * every size, a window of messages (one message when W x size > 4 MiB) goes
 * each way into distinct slots with a per-message byte pattern; the receiver
 * verifies the count and every byte. A mismatch is reported on stderr and the
 * program exits with status 3 after the check.
 *
 * Output: a table on stdout; with --json instead one JSON object on stdout:
 *   {"benchmark":"std_p2p","meta":{"library":"<MPI_Get_library_version>",
 *    "mpi_version":"3.1","np":2,"window":64,"reps":3,"time_ms":50,
 *    "ranks":[{"rank":0,"host":"h","cpu":0},{"rank":1,...}],"check":"ok"},
 *    "results":{"latency":[{"size":1,"value":0.3,"unit":"us","iters":N,
 *               "samples":[...]},...],"bw":[...],...}}
 * Bad arguments: one line on stderr from rank 0, exit status 2.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "std_out.h"

#define MAX_SIZES 64
#define MAX_TESTS 4
#define MAX_REPS 101
#define ACK_BYTES 4
#define TAG_DATA 11
#define TAG_ACK 12
#define TAG_CTRL 13
#define TAG_CHECK 14
#define TAG_META 15
#define CHECK_BYTES (4u << 20)

enum test { T_LATENCY, T_BW, T_BIBW, T_MSGRATE };
static const char *const TEST_NAMES[] = {"latency", "bw", "bibw", "msgrate"};
static const char *const TEST_UNITS[] = {"us", "GB/s", "GB/s", "Mmsg/s"};

struct opts {
    int tests[MAX_TESTS];
    int ntests;
    uint64_t sizes[MAX_SIZES];
    int nsizes;
    long iters;     /* 0 = auto */
    long warmup;    /* -1 = default */
    double time_s;  /* per timed batch, auto mode */
    long min_iters;
    long max_iters;
    int reps;
    int window;
    uint64_t window_bytes;
    uint64_t msgrate_size;
    int check;
    int json;
    int strided;
};

static int rank;
static struct opts O;
static char *sbuf, *rbuf;
static char ackbuf[ACK_BYTES];
static MPI_Request *reqs;
static int cur_window; /* messages per window at the current size */
/* Real status arrays (as OSU): GCC flags MPICH's MPI_STATUSES_IGNORE, a cast
 * constant, as a zero-length array under -Werror. */
static MPI_Status *stats;

static int parse_bytes(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (s[0] == '-' || s[0] == '\0')
        return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno)
        return -1;
    uint64_t mul = 1;
    if (*end == 'K' || *end == 'k')
        mul = 1ULL << 10, end++;
    else if (*end == 'M' || *end == 'm')
        mul = 1ULL << 20, end++;
    else if (*end == 'G' || *end == 'g')
        mul = 1ULL << 30, end++;
    if (mul > 1 && (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0))
        end += strlen(end);
    if (*end)
        return -1;
    *out = (uint64_t)v * mul;
    return 0;
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static const char *USAGE =
    "usage: std_p2p [--tests latency,bw,bibw,msgrate] [--sizes 1:16M|1,8,4K,...] [--iters N] "
    "[--warmup N] [--time-ms T] [--min-iters N] [--max-iters N] [--reps R] [--window W] [--window-bytes B] "
    "[--msgrate-size S] [--no-check] [--strided] [--json]";

/* "A:B" = powers of two from A to B (A rounded up to a power of two), or a
 * comma list. Returns 0 or -1. */
static int parse_sizes(const char *v, char *err, size_t errlen)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", v);
    O.nsizes = 0;
    char *colon = strchr(buf, ':');
    if (colon) {
        uint64_t a, b;
        *colon = '\0';
        if (parse_bytes(buf, &a) || parse_bytes(colon + 1, &b) || a == 0 || b < a || b > (1ULL << 30)) {
            snprintf(err, errlen, "std_p2p: --sizes: bad range '%s' (expected MIN:MAX, 1 <= MIN <= MAX <= 1G)", v);
            return -1;
        }
        uint64_t s = 1;
        while (s < a)
            s <<= 1;
        for (; s <= b && O.nsizes < MAX_SIZES; s <<= 1)
            O.sizes[O.nsizes++] = s;
    } else {
        for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            uint64_t s;
            if (parse_bytes(t, &s) || s == 0 || s > (1ULL << 30) || O.nsizes >= MAX_SIZES) {
                snprintf(err, errlen,
                         "std_p2p: --sizes: bad size '%s' (expected 1 to 1G bytes, e.g. 8,4K,1M; at most %d sizes)",
                         t, MAX_SIZES);
                return -1;
            }
            O.sizes[O.nsizes++] = s;
        }
    }
    if (O.nsizes == 0) {
        snprintf(err, errlen, "std_p2p: --sizes: empty list");
        return -1;
    }
    return 0;
}

/* Returns NULL on success, else a one-line message (static storage). */
static const char *parse_args(int argc, char **argv)
{
    static char err[512];
    for (int t = 0; t < MAX_TESTS; t++)
        O.tests[t] = t;
    O.ntests = MAX_TESTS;
    O.nsizes = 0;
    for (uint64_t s = 1; s <= (16ULL << 20); s <<= 1)
        O.sizes[O.nsizes++] = s;
    O.iters = 0;
    O.warmup = -1;
    O.time_s = 0.050;
    O.min_iters = 3;
    O.max_iters = 1000000;
    O.reps = 3;
    O.window = 64;
    O.window_bytes = 64ULL << 20;
    O.msgrate_size = 8;
    O.check = 1;
    O.json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return USAGE;
        if (strcmp(a, "--json") == 0) {
            O.json = 1;
            continue;
        }
        if (strcmp(a, "--no-check") == 0) {
            O.check = 0;
            continue;
        }
        if (strcmp(a, "--strided") == 0) {
            O.strided = 1;
            continue;
        }
        if (i + 1 >= argc) {
            snprintf(err, sizeof err, "std_p2p: %s: missing value (%s)", a, USAGE);
            return err;
        }
        const char *v = argv[++i];
        long l;
        if (strcmp(a, "--tests") == 0) {
            char buf[256];
            int seen[MAX_TESTS] = {0};
            snprintf(buf, sizeof buf, "%s", v);
            O.ntests = 0;
            for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                int k = -1;
                for (int j = 0; j < MAX_TESTS; j++)
                    if (strcmp(t, TEST_NAMES[j]) == 0)
                        k = j;
                if (k < 0 || seen[k]) {
                    snprintf(err, sizeof err,
                             "std_p2p: --tests: unknown or repeated test '%s' (expected latency, bw, bibw, msgrate)", t);
                    return err;
                }
                seen[k] = 1;
                O.tests[O.ntests++] = k;
            }
            if (O.ntests == 0) {
                snprintf(err, sizeof err, "std_p2p: --tests: empty list");
                return err;
            }
        } else if (strcmp(a, "--sizes") == 0) {
            if (parse_sizes(v, err, sizeof err))
                return err;
        } else if (strcmp(a, "--iters") == 0) {
            if (parse_long(v, 1, 100000000, &O.iters)) {
                snprintf(err, sizeof err, "std_p2p: --iters: '%s' (expected an integer 1..1e8)", v);
                return err;
            }
        } else if (strcmp(a, "--warmup") == 0) {
            if (parse_long(v, 0, 100000000, &O.warmup)) {
                snprintf(err, sizeof err, "std_p2p: --warmup: '%s' (expected an integer 0..1e8)", v);
                return err;
            }
        } else if (strcmp(a, "--min-iters") == 0) {
            if (parse_long(v, 1, 100000000, &O.min_iters)) {
                snprintf(err, sizeof err, "std_p2p: --min-iters: '%s' (expected an integer 1..1e8)", v);
                return err;
            }
        } else if (strcmp(a, "--max-iters") == 0) {
            if (parse_long(v, 1, 100000000, &O.max_iters)) {
                snprintf(err, sizeof err, "std_p2p: --max-iters: '%s' (expected an integer 1..1e8)", v);
                return err;
            }
        } else if (strcmp(a, "--reps") == 0) {
            if (parse_long(v, 1, MAX_REPS, &l)) {
                snprintf(err, sizeof err, "std_p2p: --reps: '%s' (expected an integer 1..%d)", v, MAX_REPS);
                return err;
            }
            O.reps = (int)l;
        } else if (strcmp(a, "--window") == 0) {
            if (parse_long(v, 1, 4096, &l)) {
                snprintf(err, sizeof err, "std_p2p: --window: '%s' (expected an integer 1..4096)", v);
                return err;
            }
            O.window = (int)l;
        } else if (strcmp(a, "--window-bytes") == 0) {
            if (parse_bytes(v, &O.window_bytes) || O.window_bytes == 0) {
                snprintf(err, sizeof err, "std_p2p: --window-bytes: '%s' (expected a size in bytes, e.g. 64M)", v);
                return err;
            }
        } else if (strcmp(a, "--msgrate-size") == 0) {
            if (parse_bytes(v, &O.msgrate_size) || O.msgrate_size == 0 || O.msgrate_size > (1ULL << 20)) {
                snprintf(err, sizeof err, "std_p2p: --msgrate-size: '%s' (expected 1 to 1M bytes)", v);
                return err;
            }
        } else if (strcmp(a, "--time-ms") == 0) {
            char *end;
            double t = strtod(v, &end);
            if (end == v || *end || !(t > 0.0 && t <= 600000.0)) {
                snprintf(err, sizeof err, "std_p2p: --time-ms: '%s' (expected a number of ms in (0, 600000])", v);
                return err;
            }
            O.time_s = t / 1000.0;
        } else {
            snprintf(err, sizeof err, "std_p2p: unknown argument '%s' (%s)", a, USAGE);
            return err;
        }
    }
    if (O.strided && (O.msgrate_size < 8 || O.msgrate_size % 8)) {
        snprintf(err, sizeof err, "std_p2p: --strided: --msgrate-size %llu is not a multiple of 8 bytes",
                 (unsigned long long)O.msgrate_size);
        return err;
    }
    for (int s = 0; O.strided && s < O.nsizes; s++)
        if (O.sizes[s] < 8 || O.sizes[s] % 8) {
            snprintf(err, sizeof err, "std_p2p: --strided: size %llu is not a multiple of 8 bytes (one double)",
                     (unsigned long long)O.sizes[s]);
            return err;
        }
    if (O.min_iters > O.max_iters) {
        snprintf(err, sizeof err, "std_p2p: --min-iters %ld > --max-iters %ld", O.min_iters, O.max_iters);
        return err;
    }
    return NULL;
}

/* ---- the exchanges; `peer` is the other rank; each runs n iterations ---- */

/* One message of `size` bytes: (count, type) for the calls below. */
static MPI_Datatype strided_type = MPI_DATATYPE_NULL;
static uint64_t strided_size;
static void message(uint64_t size, int *cnt, MPI_Datatype *type)
{
    if (!O.strided) {
        *cnt = (int)size;
        *type = MPI_CHAR;
        return;
    }
    if (strided_size != size) {
        if (strided_type != MPI_DATATYPE_NULL)
            MPI_Type_free(&strided_type);
        MPI_Type_vector((int)(size / 8), 1, 2, MPI_DOUBLE, &strided_type);
        MPI_Type_commit(&strided_type);
        strided_size = size;
    }
    *cnt = 1;
    *type = strided_type;
}

static void run_latency(uint64_t size, long n)
{
    int cnt;
    MPI_Datatype t;
    message(size, &cnt, &t);
    for (long i = 0; i < n; i++) {
        if (rank == 0) {
            MPI_Send(sbuf, cnt, t, 1, TAG_DATA, MPI_COMM_WORLD);
            MPI_Recv(rbuf, cnt, t, 1, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(rbuf, cnt, t, 0, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(sbuf, cnt, t, 0, TAG_DATA, MPI_COMM_WORLD);
        }
    }
}

/* bw and msgrate: rank 0 sends W, rank 1 receives W and acks. */
static void run_bw(uint64_t size, long n)
{
    int cnt, w = cur_window;
    MPI_Datatype t;
    message(size, &cnt, &t);
    for (long i = 0; i < n; i++) {
        if (rank == 0) {
            for (int k = 0; k < w; k++)
                MPI_Isend(sbuf, cnt, t, 1, TAG_DATA, MPI_COMM_WORLD, &reqs[k]);
            MPI_Waitall(w, reqs, stats);
            MPI_Recv(ackbuf, ACK_BYTES, MPI_CHAR, 1, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (int k = 0; k < w; k++)
                MPI_Irecv(rbuf, cnt, t, 0, TAG_DATA, MPI_COMM_WORLD, &reqs[k]);
            MPI_Waitall(w, reqs, stats);
            MPI_Send(ackbuf, ACK_BYTES, MPI_CHAR, 0, TAG_ACK, MPI_COMM_WORLD);
        }
    }
}

static void run_bibw(uint64_t size, long n)
{
    int cnt, w = cur_window, peer = 1 - rank;
    MPI_Datatype t;
    message(size, &cnt, &t);
    for (long i = 0; i < n; i++) {
        for (int k = 0; k < w; k++)
            MPI_Irecv(rbuf, cnt, t, peer, TAG_DATA, MPI_COMM_WORLD, &reqs[k]);
        for (int k = 0; k < w; k++)
            MPI_Isend(sbuf, cnt, t, peer, TAG_DATA, MPI_COMM_WORLD, &reqs[w + k]);
        MPI_Waitall(2 * w, reqs, stats);
    }
}

static void run_test(int test, uint64_t size, long n)
{
    if (n <= 0)
        return;
    if (test == T_LATENCY)
        run_latency(size, n);
    else if (test == T_BIBW)
        run_bibw(size, n);
    else
        run_bw(size, n);
}

/* One batch: rank 0 sends {warm, n} to rank 1, both run warm + n
 * iterations; rank 0 returns the seconds of the n timed ones (timer started
 * after the warm-up, as in OSU). {0, 0} tells rank 1 the point is done. */
static double batch(int test, uint64_t size, long warm, long n)
{
    long ctl[2] = {warm, n};
    if (rank == 0)
        MPI_Send(ctl, 2, MPI_LONG, 1, TAG_CTRL, MPI_COMM_WORLD);
    if (n <= 0 && warm <= 0)
        return 0.0;
    run_test(test, size, warm);
    double t0 = MPI_Wtime();
    run_test(test, size, n);
    return MPI_Wtime() - t0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

struct point {
    int test;
    uint64_t size;
    long iters;
    int window;
    int nsamples;
    double samples[MAX_REPS];
    double value;
};

static double metric(int test, uint64_t size, long n, double secs)
{
    double w = (double)cur_window;
    switch (test) {
    case T_LATENCY:
        return secs / (2.0 * (double)n) * 1e6;
    case T_BW:
        return (double)size * w * (double)n / secs / 1e9;
    case T_BIBW:
        return 2.0 * (double)size * w * (double)n / secs / 1e9;
    default:
        return w * (double)n / secs / 1e6;
    }
}

/* Rank 0: decides the counts, times; rank 1: follows control messages. */
static void measure(int test, uint64_t size, struct point *p)
{
    p->test = test;
    p->size = size;
    p->nsamples = 0;
    cur_window = O.window;
    if (test != T_LATENCY && (uint64_t)cur_window * size > O.window_bytes) {
        uint64_t w = O.window_bytes / size;
        cur_window = w < 1 ? 1 : (int)w;
    }
    p->window = test == T_LATENCY ? 1 : cur_window;
    if (rank == 1) {
        long ctl[2];
        for (;;) {
            MPI_Recv(ctl, 2, MPI_LONG, 0, TAG_CTRL, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (ctl[0] <= 0 && ctl[1] <= 0)
                return;
            run_test(test, size, ctl[0]);
            run_test(test, size, ctl[1]);
        }
    }
    long n, warm;
    if (O.iters > 0) {
        n = O.iters;
        warm = O.warmup >= 0 ? O.warmup : (n / 10 > 0 ? n / 10 : 1);
    } else {
        /* Probe batches of 1, 2, 4, ... iterations (the warm-up) until the
         * fastest iteration seen so far times the batch length reaches
         * time/8: the minimum keeps a batch that was preempted on a busy
         * machine from cutting the probe short or shrinking the count. */
        long k = 1;
        int probes = 0;
        double per = -1.0, spent = 0.0;
        for (;;) {
            double t = batch(test, size, 0, k);
            spent += t;
            probes++;
            if (per < 0 || t / (double)k < per)
                per = t / (double)k;
            /* Done when long enough after >= 3 probes, when >= 2 probes
             * have used a whole batch's time (big messages), or at
             * --max-iters. */
            if (((double)k * per >= O.time_s / 8 && probes >= 3) || (spent >= O.time_s && probes >= 2) ||
                k >= O.max_iters)
                break;
            k *= 2;
        }
        double want = per > 0 ? O.time_s / per : (double)O.max_iters;
        n = want > (double)O.max_iters ? O.max_iters : (long)want;
        if (n < O.min_iters)
            n = O.min_iters;
        if (n > O.max_iters)
            n = O.max_iters;
        warm = O.warmup >= 0 ? O.warmup : 0;
    }
    p->iters = n;
    for (int r = 0; r < O.reps; r++) {
        double secs = batch(test, size, warm, n);
        p->samples[p->nsamples++] = metric(test, size, n, secs);
    }
    batch(test, size, 0, 0);
    double sorted[MAX_REPS];
    memcpy(sorted, p->samples, sizeof(double) * (size_t)p->nsamples);
    qsort(sorted, (size_t)p->nsamples, sizeof(double), cmp_double);
    int m = p->nsamples;
    p->value = m % 2 ? sorted[m / 2] : 0.5 * (sorted[m / 2 - 1] + sorted[m / 2]);
}

/* ---- data check ---- */

static unsigned char pattern(uint64_t size, int msg, int from, uint64_t i)
{
    uint64_t x = (size * 0x9E3779B97F4A7C15ULL) ^ ((uint64_t)msg << 32) ^ ((uint64_t)from << 48) ^ i;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 32;
    return (unsigned char)x;
}

/* Returns the number of bad messages this rank received at `size`. */
static int check_size(uint64_t size, char *cs, char *cr)
{
    int nmsg = (uint64_t)O.window * size <= CHECK_BYTES ? O.window : 1;
    int cnt = (int)size, bad = 0;
    for (int dir = 0; dir < 2; dir++) {
        int sender = dir;
        if (rank == sender) {
            for (int k = 0; k < nmsg; k++) {
                unsigned char *b = (unsigned char *)cs + (size_t)k * size;
                for (uint64_t i = 0; i < size; i++)
                    b[i] = pattern(size, k, sender, i);
                MPI_Isend(b, cnt, MPI_CHAR, 1 - rank, TAG_CHECK, MPI_COMM_WORLD, &reqs[k]);
            }
            MPI_Waitall(nmsg, reqs, stats);
        } else {
            MPI_Status *st = stats;
            memset(cr, 0, (size_t)nmsg * size);
            for (int k = 0; k < nmsg; k++)
                MPI_Irecv(cr + (size_t)k * size, cnt, MPI_CHAR, sender, TAG_CHECK, MPI_COMM_WORLD, &reqs[k]);
            MPI_Waitall(nmsg, reqs, st);
            for (int k = 0; k < nmsg; k++) {
                int got = -1;
                MPI_Get_count(&st[k], MPI_CHAR, &got);
                const unsigned char *b = (const unsigned char *)cr + (size_t)k * size;
                uint64_t i = 0;
                while (i < size && b[i] == pattern(size, k, sender, i))
                    i++;
                if (got != cnt || i < size) {
                    if (bad < 3)
                        fprintf(stderr,
                                "std_p2p: data check FAILED on rank %d: size %llu message %d of %d: count %d, "
                                "first wrong byte at %llu\n",
                                rank, (unsigned long long)size, k, nmsg, got, (unsigned long long)i);
                    bad++;
                }
            }
        }
    }
    return bad;
}

static int data_check(void)
{
    uint64_t maxb = 0;
    for (int s = 0; s < O.nsizes; s++) {
        uint64_t nmsg = (uint64_t)O.window * O.sizes[s] <= CHECK_BYTES ? (uint64_t)O.window : 1;
        if (nmsg * O.sizes[s] > maxb)
            maxb = nmsg * O.sizes[s];
    }
    char *cs = NULL, *cr = NULL;
    if (posix_memalign((void **)&cs, 4096, maxb) || posix_memalign((void **)&cr, 4096, maxb)) {
        fprintf(stderr, "std_p2p: cannot allocate %llu bytes for the data check\n", (unsigned long long)maxb);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int bad = 0;
    for (int s = 0; s < O.nsizes; s++)
        bad += check_size(O.sizes[s], cs, cr);
    free(cs);
    free(cr);
    int other = 0;
    MPI_Sendrecv(&bad, 1, MPI_INT, 1 - rank, TAG_CHECK, &other, 1, MPI_INT, 1 - rank, TAG_CHECK, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    return bad + other;
}

/* ---- output ---- */


struct rankinfo {
    char host[MPI_MAX_PROCESSOR_NAME];
    int cpu;
};

int main(int argc, char **argv)
{
    int np;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);

    const char *err = parse_args(argc, argv);
    if (!err && np < 2)
        err = "std_p2p: needs at least 2 ranks (ranks 0 and 1 take part, others wait)";
    if (err) {
        if (rank == 0)
            fprintf(stderr, "%s\n", err);
        MPI_Finalize();
        return 2;
    }

    int status = 0;
    if (rank < 2) {
        uint64_t maxsize = O.msgrate_size;
        for (int s = 0; s < O.nsizes; s++)
            if (O.sizes[s] > maxsize)
                maxsize = O.sizes[s];
        if (O.strided)
            maxsize *= 2; /* every other double */
        long pg = sysconf(_SC_PAGESIZE);
        size_t align = pg > 0 ? (size_t)pg : 4096;
        reqs = malloc(sizeof(MPI_Request) * 2 * (size_t)O.window);
        stats = malloc(sizeof(MPI_Status) * 2 * (size_t)O.window);
        if (!reqs || !stats || posix_memalign((void **)&sbuf, align, maxsize) ||
            posix_memalign((void **)&rbuf, align, maxsize)) {
            fprintf(stderr, "std_p2p: cannot allocate 2 x %llu bytes\n", (unsigned long long)maxsize);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        memset(sbuf, 'a' + rank, maxsize);
        memset(rbuf, 0, maxsize);
        memset(ackbuf, 0, sizeof ackbuf);

        struct rankinfo me, peer;
        memset(&me, 0, sizeof me);
        int len = 0;
        MPI_Get_processor_name(me.host, &len);
        me.cpu = sched_getcpu();
        MPI_Sendrecv(&me, (int)sizeof me, MPI_BYTE, 1 - rank, TAG_META, &peer, (int)sizeof peer, MPI_BYTE, 1 - rank,
                     TAG_META, MPI_COMM_WORLD, MPI_STATUS_IGNORE);

        int bad = O.check ? data_check() : 0;
        if (bad)
            status = 3;

        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int ver = 0, sub = 0;
        std_library(lib, &ver, &sub);

        if (rank == 0 && !O.json) {
            int firstlen = (int)strcspn(lib, "\n");
            printf("# std_p2p: %.*s\n# np %d, ranks 0 (%s cpu %d) and 1 (%s cpu %d), window %d, reps %d, %s\n", firstlen, lib,
                   np, me.host, me.cpu, peer.host, peer.cpu, O.window, O.reps,
                   O.iters > 0 ? "fixed iterations" : "auto iterations");
            printf("# data check: %s\n", !O.check ? "skipped" : bad ? "FAILED" : "ok");
            if (O.strided)
                printf("# messages: MPI_Type_vector(size/8, 1, 2, MPI_DOUBLE) (--strided)\n");
            fflush(stdout);
        }

        struct point *pts = calloc((size_t)O.ntests * (size_t)O.nsizes, sizeof *pts);
        int npts = 0;
        if (!pts) {
            fprintf(stderr, "std_p2p: out of memory\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (int t = 0; t < O.ntests && !bad; t++) {
            int test = O.tests[t];
            if (rank == 0 && !O.json) {
                printf("\n# %-8s %12s %14s %-7s %10s %7s\n", TEST_NAMES[test], "size (B)", "value", "unit", "iters",
                       "window");
                fflush(stdout);
            }
            int ns = test == T_MSGRATE ? 1 : O.nsizes;
            for (int s = 0; s < ns; s++) {
                uint64_t size = test == T_MSGRATE ? O.msgrate_size : O.sizes[s];
                struct point *p = &pts[npts++];
                measure(test, size, p);
                if (rank == 0 && !O.json) {
                    printf("  %-8s %12llu %14.4f %-7s %10ld %7d\n", TEST_NAMES[test], (unsigned long long)size,
                           p->value, TEST_UNITS[test], p->iters, p->window);
                    fflush(stdout);
                }
            }
        }

        if (rank == 0 && O.json) {
            printf("{\"benchmark\":\"std_p2p\",\"meta\":{\"library\":");
            json_string(lib);
            printf(",\"mpi_version\":\"%d.%d\",\"np\":%d,\"window\":%d,\"reps\":%d,\"time_ms\":%g,"
                   "\"iters_mode\":\"%s\",\"strided\":%s,\"ranks\":[",
                   ver, sub, np, O.window, O.reps, O.time_s * 1000.0, O.iters > 0 ? "fixed" : "auto",
                   O.strided ? "true" : "false");
            printf("{\"rank\":0,\"host\":");
            json_string(me.host);
            printf(",\"cpu\":%d},{\"rank\":1,\"host\":", me.cpu);
            json_string(peer.host);
            printf(",\"cpu\":%d}],\"check\":\"%s\"},\"results\":{", peer.cpu,
                   !O.check ? "skipped" : bad ? "failed" : "ok");
            int first_test = 1;
            for (int t = 0; t < O.ntests; t++) {
                int test = O.tests[t], first = 1;
                for (int i = 0; i < npts; i++) {
                    if (pts[i].test != test)
                        continue;
                    if (first) {
                        printf("%s\"%s\":[", first_test ? "" : ",", TEST_NAMES[test]);
                        first_test = 0;
                    }
                    printf("%s{\"size\":%llu,\"value\":%.6g,\"unit\":\"%s\",\"iters\":%ld,\"window\":%d,"
                           "\"samples\":[",
                           first ? "" : ",", (unsigned long long)pts[i].size, pts[i].value, TEST_UNITS[test],
                           pts[i].iters, pts[i].window);
                    for (int r = 0; r < pts[i].nsamples; r++)
                        printf("%s%.6g", r ? "," : "", pts[i].samples[r]);
                    printf("]}");
                    first = 0;
                }
                if (!first)
                    printf("]");
            }
            printf("}}\n");
            fflush(stdout);
        }
        if (bad && rank == 0)
            fprintf(stderr, "std_p2p: data check failed (%d bad messages); no measurement done\n", bad);
        free(pts);
        free(sbuf);
        free(rbuf);
        free(reqs);
        free(stats);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return status;
}
