/*
 * crowded-barrier: the time of a bare barrier among N processes sharing
 * the machine's CPUs, each waiting by sched_yield (as Open MPI's and
 * topocomm's waits do when there are more ranks than CPUs): what a small
 * collective on a crowded node cannot go below, whatever its protocol
 * (docs/collectives.md, "What bounds the small collectives on crowded
 * nodes"). Rule 0: one shared counter and one sense word on lines of
 * their own; the last to arrive flips the sense; a waiter always yields.
 * Rule 1, the lanes' rule (crates/transport/src/lanes.rs): a word per
 * process on a line of its own holding its barrier count and the CPU it
 * arrived on; a waiter yields only while a process that has not arrived
 * last arrived on the CPU the waiter runs on, and spins otherwise. Prints
 * the median of 5 rounds of 100000 barriers, in microseconds per barrier.
 *
 *   cc -O2 -Wall -Wextra -Werror scripts/crowded-barrier.c -o crowded-barrier
 *   ./crowded-barrier N [pin [rule]]  (pin 1: process i bound to CPU i mod
 *                                      CPUs; 0: unbound, as `mpirun
 *                                      --bind-to none`; rule 0 or 1, above)
 *
 * On a virtual machine the figure depends on where the host runs the vCPUs
 * at the moment: run scripts/line-probe.c before and after.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 5
#define BARRIERS 100000
#define WARMUP 1000

#define MAX_N 256

struct shared {
    /* Rule 1: process i's barrier count << 16 | (its CPU + 1). */
    struct {
        _Alignas(128) long word;
    } own[MAX_N];
    _Alignas(128) long count;  /* arrivals at the current barrier */
    _Alignas(128) long sense;  /* flipped by the last arrival */
    _Alignas(128) double us[ROUNDS];
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A whole number in [lo, hi], or exits naming the argument. */
static long arg(const char *s, const char *name, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "crowded-barrier: %s: expected a whole number in [%ld, %ld], got '%s'\n",
                name, lo, hi, s);
        exit(2);
    }
    return v;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Rule 1: barrier number k (from 1) of process me among n. */
static void own_barrier(struct shared *s, long n, long me, long k) {
    /* Release: nothing to publish here but the arrival itself. */
    __atomic_store_n(&s->own[me].word, k << 16 | (sched_getcpu() + 1), __ATOMIC_RELEASE);
    for (;;) {
        int missing = 0, here = 0, cpu = sched_getcpu() + 1;
        for (long j = 0; j < n; j++) {
            long w = __atomic_load_n(&s->own[j].word, __ATOMIC_ACQUIRE);
            if (w >> 16 >= k) continue;
            missing = 1;
            if ((w & 0xffff) == cpu) {
                here = 1;
                break;
            }
        }
        if (!missing) return;
        if (here)
            sched_yield();
        else
            __builtin_ia32_pause();
    }
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: crowded-barrier N [pin [rule]]\n");
        return 2;
    }
    long n = arg(argv[1], "N", 2, MAX_N);
    long pin = argc > 2 ? arg(argv[2], "pin", 0, 1) : 1;
    long rule = argc > 3 ? arg(argv[3], "rule", 0, 1) : 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    struct shared *s =
        mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED) {
        perror("crowded-barrier: mmap");
        return 1;
    }
    long me = 0;
    for (long i = 1; i < n; i++) {
        pid_t p = fork();
        if (p < 0) {
            perror("crowded-barrier: fork");
            return 1;
        }
        if (p == 0) {
            me = i;
            break;
        }
    }
    if (pin && cpus > 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET((int)(me % cpus), &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0) perror("crowded-barrier: sched_setaffinity");
    }
    long local = 0;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = 0;
        for (long it = 0; it < WARMUP + BARRIERS; it++) {
            if (it == WARMUP) t0 = now();
            if (rule == 1) {
                own_barrier(s, n, me, r * (WARMUP + BARRIERS) + it + 1);
                continue;
            }
            local ^= 1;
            /* Acquire-release: the last arrival sees every other arrival's
             * writes; the sense store (release) publishes them onward. */
            if (__atomic_add_fetch(&s->count, 1, __ATOMIC_ACQ_REL) == n) {
                __atomic_store_n(&s->count, 0, __ATOMIC_RELAXED);
                __atomic_store_n(&s->sense, local, __ATOMIC_RELEASE);
            } else {
                while (__atomic_load_n(&s->sense, __ATOMIC_ACQUIRE) != local) sched_yield();
            }
        }
        if (me == 0) s->us[r] = (now() - t0) / BARRIERS * 1e6;
    }
    if (me != 0) return 0;
    for (long i = 1; i < n; i++) wait(NULL);
    qsort(s->us, ROUNDS, sizeof s->us[0], cmp);
    printf("%ld processes on %ld CPUs (%s, rule %ld): %.3f us per barrier (median of %d rounds, "
           "%.3f-%.3f)\n",
           n, cpus, pin ? "pinned" : "unbound", rule, s->us[ROUNDS / 2], ROUNDS, s->us[0],
           s->us[ROUNDS - 1]);
    return 0;
}
