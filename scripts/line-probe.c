/*
 * line-probe: the state of the machine between two PUs, in 0.1 s, for
 * scripts/p2p-jobs.py. Prints one line:
 *
 *   rtt_ns=<cache-line round trip> copy_gbs=<cross-core copy of 1 MiB>
 *
 * The round trip is two threads pinned to P and Q bouncing one cache line
 * (median over 20 batches of 5000 round trips); the copy rate is thread Q
 * copying 1 MiB that thread P has just written (median over 20 copies).
 * On a virtual machine both depend on where the host runs the two vCPUs at
 * the moment (same core complex or not), which no guest setting controls:
 * a job that is slow while this probe is slow too is the machine, not the
 * transport.
 *
 *   cc -O2 -pthread -Wall -Wextra -Werror scripts/line-probe.c -o line-probe
 *   ./line-probe 0 1
 *   ./line-probe 0 1 --series 3000
 *
 * --series N: instead, N round-trip times back to back (2000 bounces each,
 * both threads busy the whole time), one number in ns per batch on one line:
 * shows whether the host moves the vCPUs while they never idle.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCH 5000
#define ROUNDS 20
#define COPY_BYTES (1 << 20)

static _Alignas(128) _Atomic unsigned long line;
static _Alignas(128) _Atomic unsigned long copy_turn;
static char *src;
static int pu_q;

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

static void *peer(void *arg) {
    double *copy_s = arg;
    if (pin(pu_q) != 0) {
        perror("line-probe: pinning to Q");
        exit(2);
    }
    for (unsigned long i = 1; i <= (unsigned long)BATCH * ROUNDS; i++) {
        while (atomic_load_explicit(&line, memory_order_acquire) != 2 * i - 1)
            ;
        atomic_store_explicit(&line, 2 * i, memory_order_release);
    }
    char *dst = malloc(COPY_BYTES);
    if (!dst)
        exit(2);
    memset(dst, 0, COPY_BYTES);
    for (unsigned long r = 0; r < ROUNDS; r++) {
        while (atomic_load_explicit(&copy_turn, memory_order_acquire) != 2 * r + 1)
            ;
        double t0 = now();
        memcpy(dst, src, COPY_BYTES);
        copy_s[r] = now() - t0;
        atomic_store_explicit(&copy_turn, 2 * r + 2, memory_order_release);
    }
    free(dst);
    return NULL;
}

/* --series: the peer answers until the main thread stores SERIES_END. */
#define SERIES_END (~0UL)
#define SERIES_BATCH 2000

static void *series_peer(void *arg) {
    (void)arg;
    if (pin(pu_q) != 0) {
        perror("line-probe: pinning to Q");
        exit(2);
    }
    for (;;) {
        unsigned long v = atomic_load_explicit(&line, memory_order_acquire);
        if (v == SERIES_END)
            return NULL;
        if (v & 1)
            atomic_store_explicit(&line, v + 1, memory_order_release);
    }
}

static int series(long n) {
    pthread_t t;
    if (pthread_create(&t, NULL, series_peer, NULL) != 0)
        return 2;
    unsigned long i = 0;
    for (long r = 0; r < n; r++) {
        double t0 = now();
        for (int k = 0; k < SERIES_BATCH; k++) {
            i += 2;
            atomic_store_explicit(&line, i - 1, memory_order_release);
            while (atomic_load_explicit(&line, memory_order_acquire) != i)
                ;
        }
        printf("%s%.0f", r ? " " : "", (now() - t0) / SERIES_BATCH * 1e9);
    }
    printf("\n");
    atomic_store_explicit(&line, SERIES_END, memory_order_release);
    pthread_join(t, NULL);
    return 0;
}

int main(int argc, char **argv) {
    long n_series = 0;
    if (argc == 5 && strcmp(argv[3], "--series") == 0)
        n_series = atol(argv[4]);
    if ((argc != 3 && argc != 5) || (argc == 5 && n_series < 1)) {
        fprintf(stderr, "usage: line-probe P Q [--series N] (two OS PU indexes; N >= 1)\n");
        return 2;
    }
    int p = atoi(argv[1]);
    pu_q = atoi(argv[2]);
    if (pin(p) != 0) {
        perror("line-probe: pinning to P");
        return 2;
    }
    if (n_series)
        return series(n_series);
    src = malloc(COPY_BYTES);
    if (!src)
        return 2;
    memset(src, 1, COPY_BYTES);
    double rtt[ROUNDS], copy_s[ROUNDS], gbs[ROUNDS];
    pthread_t t;
    if (pthread_create(&t, NULL, peer, copy_s) != 0)
        return 2;
    for (unsigned long r = 0; r < ROUNDS; r++) {
        double t0 = now();
        for (unsigned long k = 1; k <= BATCH; k++) {
            unsigned long i = r * BATCH + k;
            atomic_store_explicit(&line, 2 * i - 1, memory_order_release);
            while (atomic_load_explicit(&line, memory_order_acquire) != 2 * i)
                ;
        }
        rtt[r] = (now() - t0) / BATCH * 1e9;
    }
    for (unsigned long r = 0; r < ROUNDS; r++) {
        memset(src, (int)r, COPY_BYTES); /* dirty on P */
        atomic_store_explicit(&copy_turn, 2 * r + 1, memory_order_release);
        while (atomic_load_explicit(&copy_turn, memory_order_acquire) != 2 * r + 2)
            ;
    }
    pthread_join(t, NULL);
    for (int r = 0; r < ROUNDS; r++)
        gbs[r] = COPY_BYTES / copy_s[r] / 1e9;
    qsort(rtt, ROUNDS, sizeof rtt[0], cmp);
    qsort(gbs, ROUNDS, sizeof gbs[0], cmp);
    printf("rtt_ns=%.0f copy_gbs=%.1f\n", rtt[ROUNDS / 2], gbs[ROUNDS / 2]);
    free(src);
    return 0;
}
