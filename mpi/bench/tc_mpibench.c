/*
 * tc_mpibench: topocomm's own MPI point-to-point benchmark (2 ranks), used to
 * compare Open MPI and MPICH side by side with topocomm's transport (whose
 * worker `topocomm bench-worker p2p` uses the same definitions and prints the
 * same lines) and, later, to tune MPI parameters.
 *
 *   tc_mpibench [--tests latency,bw,bibw,msgrate] [--sizes 1,8,4K,1M]
 *               [--cache hot|cold] [--llc BYTES] [--samples N]
 *               [--min-time-ms T] [--window W] [--impl NAME] [--probe N]
 *
 * Rank 0 prints one JSON line per (test, size, cache) on stdout
 * (docs/formats/bench-json.md):
 *   {"impl":"openmpi","test":"latency","size":8,"cache":"hot","unit":"us","samples":[...]}
 * and one meta line on stderr saying where each rank runs, so that the caller
 * can refuse a silently wrong binding:
 *   {"tc_mpibench_meta":{"wtick":1e-09,"ranks":[{"rank":0,"cpu":0,"affinity":"0"},...]}}
 *
 * Definitions (one sample = one timed batch, the batch sized so that it lasts
 * about --min-time-ms, at least one round trip / one window):
 *   latency  one-way time per message, us: mean over the batch of ping-pong
 *            round trips, divided by 2.
 *   bw       osu_bw style: rank 0 posts W MPI_Isend, waits, rank 1 posts W
 *            MPI_Irecv, waits, then sends a 4-byte ack; GB/s (1e9 B/s).
 *   bibw     both ranks post W MPI_Irecv and W MPI_Isend at once; GB/s of
 *            both directions summed.
 *   msgrate  the bw exchange counted in messages: Mmsg/s.
 * --probe N: after every batch, N 8-byte ping-pongs (untimed by the sample);
 * their one-way time in us is printed per sample as "probe_us":[...], so a
 * caller can tell in which machine state each sample ran (a VM's host moves
 * the vCPUs between near and distant cores, also within a job).
 * Cache modes: hot reuses one buffer per side (OSU); cold rotates through a
 * pool larger than 2 x LLC so that every message uses memory last touched
 * long ago (IMB -off_cache).
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

#include "affinity.h"

#define MAX_SIZES 64
#define MAX_TESTS 4
#define ACK_BYTES 4
#define TAG_DATA 1
#define TAG_ACK 2

enum test { T_LATENCY, T_BW, T_BIBW, T_MSGRATE };
static const char *const TEST_NAMES[] = {"latency", "bw", "bibw", "msgrate"};
static const char *const TEST_UNITS[] = {"us", "GB/s", "GB/s", "Mmsg/s"};

struct opts {
    int tests[MAX_TESTS];
    int ntests;
    uint64_t sizes[MAX_SIZES];
    int nsizes;
    int cold;
    uint64_t llc;
    int samples;
    double min_time;
    int window;
    int probe;
    char impl[64];
};

/* A buffer pool: hot = one slot reused; cold = a region > 2 x LLC walked
 * slot after slot. */
struct pool {
    char *base;
    size_t bytes;
    size_t stride;
    size_t next;
    int cold;
};

static int rank;

/* Parses "123", "4K", "4KiB", "1M", "2G" (binary multiples). */
static int parse_bytes(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno || s[0] == '-')
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

static int parse_int(const char *s, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

/* Returns NULL on success, else a one-line error (static storage). */
static const char *parse_args(int argc, char **argv, struct opts *o) {
    static char err[512];
    o->tests[0] = T_LATENCY;
    o->tests[1] = T_BW;
    o->ntests = 2;
    const uint64_t defsizes[] = {1, 8, 64, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304};
    o->nsizes = (int)(sizeof defsizes / sizeof defsizes[0]);
    memcpy(o->sizes, defsizes, sizeof defsizes);
    o->cold = 0;
    o->llc = 32ULL << 20;
    o->samples = 20;
    o->min_time = 0.010;
    o->window = 64;
    o->probe = 0;
    snprintf(o->impl, sizeof o->impl, "mpi");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            snprintf(err, sizeof err,
                     "usage: tc_mpibench [--tests latency,bw,bibw,msgrate] [--sizes LIST] "
                     "[--cache hot|cold] [--llc BYTES] [--samples N] [--min-time-ms T] "
                     "[--window W] [--impl NAME]");
            return err;
        }
        if (i + 1 >= argc) {
            snprintf(err, sizeof err, "tc_mpibench: argument %s: missing value", a);
            return err;
        }
        const char *v = argv[++i];
        if (strcmp(a, "--tests") == 0) {
            char buf[256];
            snprintf(buf, sizeof buf, "%s", v);
            o->ntests = 0;
            for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                int k = -1;
                for (int j = 0; j < MAX_TESTS; j++)
                    if (strcmp(t, TEST_NAMES[j]) == 0)
                        k = j;
                if (k < 0 || o->ntests >= MAX_TESTS) {
                    snprintf(err, sizeof err,
                             "tc_mpibench: --tests: unknown or repeated test '%s' (expected latency, bw, bibw, msgrate)", t);
                    return err;
                }
                o->tests[o->ntests++] = k;
            }
            if (o->ntests == 0) {
                snprintf(err, sizeof err, "tc_mpibench: --tests: empty list");
                return err;
            }
        } else if (strcmp(a, "--sizes") == 0) {
            char buf[1024];
            snprintf(buf, sizeof buf, "%s", v);
            o->nsizes = 0;
            for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                uint64_t s;
                if (parse_bytes(t, &s) || s == 0 || s > (1ULL << 30) || o->nsizes >= MAX_SIZES) {
                    snprintf(err, sizeof err,
                             "tc_mpibench: --sizes: bad size '%s' (expected 1 to 1G bytes, e.g. 8,4K,1M; at most %d sizes)",
                             t, MAX_SIZES);
                    return err;
                }
                o->sizes[o->nsizes++] = s;
            }
            if (o->nsizes == 0) {
                snprintf(err, sizeof err, "tc_mpibench: --sizes: empty list");
                return err;
            }
        } else if (strcmp(a, "--cache") == 0) {
            if (strcmp(v, "hot") == 0)
                o->cold = 0;
            else if (strcmp(v, "cold") == 0)
                o->cold = 1;
            else {
                snprintf(err, sizeof err, "tc_mpibench: --cache: '%s' (expected hot or cold)", v);
                return err;
            }
        } else if (strcmp(a, "--llc") == 0) {
            if (parse_bytes(v, &o->llc) || o->llc == 0 || o->llc > (1ULL << 34)) {
                snprintf(err, sizeof err, "tc_mpibench: --llc: '%s' (expected a size in bytes, e.g. 32M)", v);
                return err;
            }
        } else if (strcmp(a, "--samples") == 0) {
            if (parse_int(v, 1, 1000000, &o->samples)) {
                snprintf(err, sizeof err, "tc_mpibench: --samples: '%s' (expected an integer 1..1000000)", v);
                return err;
            }
        } else if (strcmp(a, "--min-time-ms") == 0) {
            char *end;
            double t = strtod(v, &end);
            if (end == v || *end || !(t > 0.0 && t <= 60000.0)) {
                snprintf(err, sizeof err, "tc_mpibench: --min-time-ms: '%s' (expected a number of ms in (0, 60000])", v);
                return err;
            }
            o->min_time = t / 1000.0;
        } else if (strcmp(a, "--window") == 0) {
            if (parse_int(v, 1, 4096, &o->window)) {
                snprintf(err, sizeof err, "tc_mpibench: --window: '%s' (expected an integer 1..4096)", v);
                return err;
            }
        } else if (strcmp(a, "--probe") == 0) {
            if (parse_int(v, 0, 1000000, &o->probe)) {
                snprintf(err, sizeof err, "tc_mpibench: --probe: '%s' (expected an integer 0..1000000)", v);
                return err;
            }
        } else if (strcmp(a, "--impl") == 0) {
            if (strlen(v) == 0 || strlen(v) >= sizeof o->impl || strpbrk(v, "\"\\")) {
                snprintf(err, sizeof err, "tc_mpibench: --impl: '%s' (expected a plain name)", v);
                return err;
            }
            snprintf(o->impl, sizeof o->impl, "%s", v);
        } else {
            snprintf(err, sizeof err,
                     "tc_mpibench: unknown argument '%s' (expected --tests, --sizes, --cache, --llc, --samples, "
                     "--min-time-ms, --window, --impl, --probe)",
                     a);
            return err;
        }
    }
    return NULL;
}

static void die(const char *what) {
    fprintf(stderr, "tc_mpibench: rank %d: %s\n", rank, what);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

/* Hot: `slot` bytes. Cold: more than 2 x LLC plus one slot, so that a slot
 * is reused only after > 2 x LLC of other memory has been touched. Pages are
 * touched here so that no page fault falls in a timed batch. */
static void pool_init(struct pool *p, size_t slot, int cold, uint64_t llc) {
    p->cold = cold;
    p->stride = (slot + 63) & ~(size_t)63;
    p->bytes = cold ? (size_t)(2 * llc) + 2 * p->stride : p->stride;
    if (posix_memalign((void **)&p->base, 4096, p->bytes))
        die("out of memory for the buffer pool");
    memset(p->base, rank + 1, p->bytes);
    p->next = 0;
}

static char *pool_take(struct pool *p) {
    if (!p->cold)
        return p->base;
    if (p->next + p->stride > p->bytes)
        p->next = 0;
    char *b = p->base + p->next;
    p->next += p->stride;
    return b;
}

static void pool_free(struct pool *p) {
    free(p->base);
    p->base = NULL;
}

/* One batch of `n` repetitions; returns the elapsed seconds on rank 0. */
static double batch(int test, size_t size, long n, int window, struct pool *sp, struct pool *rp,
                    MPI_Request *reqs, MPI_Status *stats) {
    char ack[ACK_BYTES] = {0};
    int peer = 1 - rank;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long it = 0; it < n; it++) {
        switch (test) {
        case T_LATENCY:
            if (rank == 0) {
                MPI_Send(pool_take(sp), (int)size, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD);
                MPI_Recv(pool_take(rp), (int)size, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(pool_take(rp), (int)size, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(pool_take(sp), (int)size, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD);
            }
            break;
        case T_BW:
        case T_MSGRATE:
            if (rank == 0) {
                for (int w = 0; w < window; w++)
                    MPI_Isend(pool_take(sp), (int)size, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD, &reqs[w]);
                MPI_Waitall(window, reqs, stats);
                MPI_Recv(ack, ACK_BYTES, MPI_CHAR, peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                for (int w = 0; w < window; w++)
                    MPI_Irecv(pool_take(rp), (int)size, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD, &reqs[w]);
                MPI_Waitall(window, reqs, stats);
                MPI_Send(ack, ACK_BYTES, MPI_CHAR, peer, TAG_ACK, MPI_COMM_WORLD);
            }
            break;
        case T_BIBW:
            for (int w = 0; w < window; w++)
                MPI_Irecv(pool_take(rp), (int)size, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD, &reqs[w]);
            for (int w = 0; w < window; w++)
                MPI_Isend(pool_take(sp), (int)size, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD, &reqs[window + w]);
            MPI_Waitall(2 * window, reqs, stats);
            break;
        }
    }
    return MPI_Wtime() - t0;
}

/* Converts a batch time into the test's unit. */
static double to_unit(int test, size_t size, long n, int window, double secs) {
    switch (test) {
    case T_LATENCY:
        return secs / (double)n / 2.0 * 1e6;
    case T_BW:
        return (double)size * (double)window * (double)n / secs / 1e9;
    case T_BIBW:
        return 2.0 * (double)size * (double)window * (double)n / secs / 1e9;
    default:
        return (double)window * (double)n / secs / 1e6;
    }
}

static void run_one(const struct opts *o, int test, size_t size) {
    struct pool sp, rp;
    pool_init(&sp, size, o->cold, o->llc);
    pool_init(&rp, size, o->cold, o->llc);
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * 2 * (size_t)o->window);
    /* Real status arrays: GCC flags MPICH's MPI_STATUSES_IGNORE as a
     * zero-sized region under -Werror. */
    MPI_Status *stats = malloc(sizeof(MPI_Status) * 2 * (size_t)o->window);
    double *samples = malloc(sizeof(double) * (size_t)o->samples);
    double *probes = malloc(sizeof(double) * (size_t)o->samples);
    struct pool pp;
    pool_init(&pp, 8, 0, 0);
    if (!reqs || !stats || !samples || !probes)
        die("out of memory");

    /* Calibration, which is also the warm-up: grow the batch until it lasts
     * min_time; rank 0 decides, both ranks follow through the broadcast. */
    long n = 1;
    for (int round = 0; round < 40; round++) {
        double t = batch(test, size, n, o->window, &sp, &rp, reqs, stats);
        long next = 0; /* 0 = done */
        if (rank == 0 && t < o->min_time) {
            double grow = t > 0 ? o->min_time / t * 1.1 : 16.0;
            if (grow > 16.0)
                grow = 16.0;
            if (grow < 1.5)
                grow = 1.5;
            next = (long)((double)n * grow) + 1;
        }
        MPI_Bcast(&next, 1, MPI_LONG, 0, MPI_COMM_WORLD);
        if (next == 0)
            break;
        n = next;
    }
    batch(test, size, n, o->window, &sp, &rp, reqs, stats); /* one more warm-up batch at the final size */
    for (int s = 0; s < o->samples; s++) {
        samples[s] = to_unit(test, size, n, o->window, batch(test, size, n, o->window, &sp, &rp, reqs, stats));
        if (o->probe > 0)
            probes[s] = to_unit(T_LATENCY, 8, o->probe, 1, batch(T_LATENCY, 8, o->probe, 1, &pp, &pp, reqs, stats));
    }

    if (rank == 0) {
        printf("{\"impl\":\"%s\",\"test\":\"%s\",\"size\":%llu,\"cache\":\"%s\",\"unit\":\"%s\",\"samples\":[",
               o->impl, TEST_NAMES[test], (unsigned long long)size, o->cold ? "cold" : "hot", TEST_UNITS[test]);
        for (int s = 0; s < o->samples; s++)
            printf("%s%.9g", s ? "," : "", samples[s]);
        if (o->probe > 0) {
            printf("],\"probe_us\":[");
            for (int s = 0; s < o->samples; s++)
                printf("%s%.9g", s ? "," : "", probes[s]);
        }
        printf("]}\n");
        fflush(stdout);
    }
    free(samples);
    free(probes);
    pool_free(&pp);
    free(stats);
    free(reqs);
    pool_free(&sp);
    pool_free(&rp);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    struct opts o;
    const char *err = parse_args(argc, argv, &o);
    if (!err && size != 2)
        err = "tc_mpibench: needs exactly 2 ranks (e.g. mpirun -n 2)";
    if (err) {
        if (rank == 0)
            fprintf(stderr, "%s\n", err);
        MPI_Finalize();
        return 2;
    }

    struct {
        int cpu;
        char aff[248];
    } me, all[2];
    me.cpu = sched_getcpu();
    affinity_text(me.aff, sizeof me.aff);
    MPI_Gather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        fprintf(stderr,
                "{\"tc_mpibench_meta\":{\"impl\":\"%s\",\"wtick\":%.3g,\"ranks\":[{\"rank\":0,\"cpu\":%d,\"affinity\":\"%s\"},"
                "{\"rank\":1,\"cpu\":%d,\"affinity\":\"%s\"}]}}\n",
                o.impl, MPI_Wtick(), all[0].cpu, all[0].aff, all[1].cpu, all[1].aff);
        fflush(stderr);
    }

    for (int t = 0; t < o.ntests; t++)
        for (int s = 0; s < o.nsizes; s++)
            run_one(&o, o.tests[t], (size_t)o.sizes[s]);
    MPI_Finalize();
    return 0;
}
