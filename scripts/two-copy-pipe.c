/*
 * two-copy-pipe: what a two-copy stream between two PUs can reach with no
 * protocol at all, next to the copy that `topocomm bench p2p` calls the bw
 * limit (docs/benchmarks/p2p.md, "What bounds two-copy at 64-256 KiB").
 * Prints one line, each figure the median of 9 rounds, in GB/s:
 *
 *   serial_out  Q copies FRAG bytes that P has just written into its own
 *               hot buffer, P idle meanwhile (bench p2p's bw limit)
 *   serial_in   P copies its hot source into FRAG bytes that Q has just
 *               read, Q idle meanwhile (a sender's copy into a slot)
 *   pipe        both at once through a ring of DEPTH slots of FRAG bytes:
 *               P fills slot i+1 while Q empties slot i, one
 *               release/acquire counter each way (the stream rate)
 *   pipe_out    Q's copies alone, timed inside that stream
 *
 *   cc -O2 -pthread -Wall -Wextra -Werror scripts/two-copy-pipe.c -o two-copy-pipe
 *   ./two-copy-pipe 0 1 [FRAG [DEPTH]]        (defaults 65536 and 4)
 *
 * On a virtual machine every figure depends on where the host runs the two
 * vCPUs at the moment: run scripts/line-probe.c before and after.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS 9
#define SERIAL_COPIES 400
#define PIPE_COPIES 4000

static size_t frag;
static long depth;
static int pu_q;
static char *ring, *src_p, *dst_q;
static _Alignas(128) _Atomic long turn;      /* serial hand-off: odd = Q copies */
static _Alignas(128) _Atomic long published; /* slots P has filled */
static _Alignas(128) _Atomic long released;  /* slots Q has emptied */
/* Q's copy seconds per round, read by P after the join. */
static double q_serial_s[ROUNDS], q_pipe_s[ROUNDS];

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int pin(int pu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(pu, &s);
    return sched_setaffinity(0, sizeof s, &s);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void *q_main(void *arg) {
    (void)arg;
    if (pin(pu_q) != 0) {
        perror("two-copy-pipe: pinning to Q");
        exit(2);
    }
    long hand = 0;
    for (int r = 0; r < ROUNDS; r++) {
        for (long i = 0; i < SERIAL_COPIES; i++, hand += 2) {
            while (atomic_load_explicit(&turn, memory_order_acquire) != hand + 1)
                ;
            double t0 = now();
            memcpy(dst_q, ring, frag);
            q_serial_s[r] += now() - t0;
            atomic_store_explicit(&turn, hand + 2, memory_order_release);
        }
        long first = (long)r * PIPE_COPIES;
        for (long i = first; i < first + PIPE_COPIES; i++) {
            while (atomic_load_explicit(&published, memory_order_acquire) <= i)
                ;
            double t0 = now();
            memcpy(dst_q, ring + (size_t)(i % depth) * frag, frag);
            q_pipe_s[r] += now() - t0;
            atomic_store_explicit(&released, i + 1, memory_order_release);
        }
    }
    return NULL;
}

/* The number in `arg`, or exit 2 naming the argument and what was expected. */
static long arg_number(const char *arg, const char *name, long min) {
    char *end;
    long v = strtol(arg, &end, 0);
    if (end == arg || *end || v < min) {
        fprintf(stderr, "two-copy-pipe: %s '%s': expected a whole number >= %ld\n", name, arg, min);
        exit(2);
    }
    return v;
}

static double median(double *v) {
    qsort(v, ROUNDS, sizeof v[0], cmp);
    return v[ROUNDS / 2];
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 5) {
        fprintf(stderr, "usage: two-copy-pipe P Q [FRAG [DEPTH]] (two OS PU indexes)\n");
        return 2;
    }
    int p = (int)arg_number(argv[1], "P", 0);
    pu_q = (int)arg_number(argv[2], "Q", 0);
    frag = argc > 3 ? (size_t)arg_number(argv[3], "FRAG (bytes)", 64) : 65536;
    depth = argc > 4 ? arg_number(argv[4], "DEPTH", 1) : 4;
    if (pin(p) != 0) {
        perror("two-copy-pipe: pinning to P");
        return 2;
    }
    ring = aligned_alloc(4096, frag * (size_t)depth);
    src_p = aligned_alloc(4096, frag);
    dst_q = aligned_alloc(4096, frag);
    if (!ring || !src_p || !dst_q) {
        fprintf(stderr, "two-copy-pipe: out of memory\n");
        return 2;
    }
    memset(ring, 1, frag * (size_t)depth);
    memset(src_p, 2, frag);
    memset(dst_q, 3, frag);
    pthread_t t;
    if (pthread_create(&t, NULL, q_main, NULL) != 0)
        return 2;
    double in[ROUNDS], pipe[ROUNDS], out[ROUNDS], pipe_out[ROUNDS];
    long hand = 0;
    for (int r = 0; r < ROUNDS; r++) {
        double in_s = 0;
        for (long i = 0; i < SERIAL_COPIES; i++, hand += 2) {
            double t0 = now();
            memcpy(ring, src_p, frag); /* slot 0, last read by Q */
            in_s += now() - t0;
            atomic_store_explicit(&turn, hand + 1, memory_order_release);
            while (atomic_load_explicit(&turn, memory_order_acquire) != hand + 2)
                ;
        }
        long first = (long)r * PIPE_COPIES;
        double t0 = now();
        for (long i = first; i < first + PIPE_COPIES; i++) {
            while (i - atomic_load_explicit(&released, memory_order_acquire) >= depth)
                ;
            memcpy(ring + (size_t)(i % depth) * frag, src_p, frag);
            atomic_store_explicit(&published, i + 1, memory_order_release);
        }
        while (atomic_load_explicit(&released, memory_order_acquire) < first + PIPE_COPIES)
            ;
        in[r] = (double)frag * SERIAL_COPIES / in_s / 1e9;
        pipe[r] = (double)frag * PIPE_COPIES / (now() - t0) / 1e9;
    }
    pthread_join(t, NULL);
    for (int r = 0; r < ROUNDS; r++) {
        out[r] = (double)frag * SERIAL_COPIES / q_serial_s[r] / 1e9;
        pipe_out[r] = (double)frag * PIPE_COPIES / q_pipe_s[r] / 1e9;
    }
    printf("frag=%zu depth=%ld serial_out=%.1f serial_in=%.1f pipe=%.1f pipe_out=%.1f\n", frag,
           depth, median(out), median(in), median(pipe), median(pipe_out));
    return 0;
}
