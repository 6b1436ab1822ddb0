/* Ping-pong of one cache line between two processes pinned to PUs 0 and 1,
 * without any topocomm code: what does work between a receive and the reply
 * cost, and does CLDEMOTE after each write win it back? The question behind
 * the duplex line's demote (docs/transport.md, "The duplex line is demoted
 * after each message").
 *
 *   gcc -O2 -Wall -Wextra -Werror -o /tmp/line-demote scripts/line-demote.c
 *   /tmp/line-demote WORK DEMOTE [ROUND_TRIPS [APART]]
 *
 * Both directions live in one 64-byte line, each in its own 32-byte half
 * (seq stored last with release, then 8 bytes of payload), as the
 * transport's duplex line. Before each write, each side spins WORK
 * iterations of an empty volatile loop (the receive and send calls of a
 * real reply; `line-demote 0 0` is `bench p2p`'s line limit). DEMOTE 1:
 * `cldemote` on the line after each write (a no-op on x86 CPUs without
 * it). APART: bytes from the first half to the second, a multiple of 32
 * below 4096 (default 32: one line; 128 or more: a line per direction, as
 * two flags on lines of their own would be). Prints the one-way time in
 * ns (round trip / 2, over the last three quarters of the run) and the
 * nanoseconds of WORK alone. x86-64 only. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pingpong-util.h"

typedef struct {
    _Atomic uint64_t seq;
    uint64_t payload;
    uint64_t pad[2];
} half;

static long work;
static int demote;

static void spin_work(void)
{
    for (volatile long k = 0; k < work; k++)
        ;
}

static void put(half *h, uint64_t v)
{
    spin_work();
    h->payload = v * 3;
    __atomic_store_n(&h->seq, v, __ATOMIC_RELEASE);
    if (demote)
        __asm__ volatile("cldemote %0" ::"m"(*(const char *)h));
}

static uint64_t get(half *h, uint64_t v)
{
    while (__atomic_load_n(&h->seq, __ATOMIC_ACQUIRE) != v)
        __builtin_ia32_pause();
    return h->payload;
}

int main(int argc, char **argv)
{
    char *e1 = "", *e2 = "";
    work = argc > 1 ? strtol(argv[1], &e1, 10) : -1;
    demote = argc > 2 ? (int)strtol(argv[2], &e2, 10) : -1;
    long n = argc > 3 ? atol(argv[3]) : 1000000;
    char *e3 = "";
    long apart = argc > 4 ? strtol(argv[4], &e3, 10) : 32;
    if (*e1 || *e2 || *e3 || argc < 3 || argc > 5 || work < 0 || work > 100000 || demote < 0 ||
        demote > 1 || n < 4 || apart < 32 || apart >= 4096 || apart % 32 != 0) {
        fprintf(stderr, "usage: line-demote WORK(0-100000 loop iterations) DEMOTE(0|1) "
                        "[ROUND_TRIPS(>=4) [APART(32-4064, a multiple of 32)]]\n");
        return 2;
    }
    half *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        perror("line-demote: mmap");
        return 2;
    }
    half *there = &m[0], *back = &m[apart / 32]; /* APART 32: one 64-byte line */
    pid_t child = fork();
    if (child < 0) {
        perror("line-demote: fork");
        return 2;
    }
    if (child == 0) {
        pin(1, "line-demote");
        for (long i = 1; i <= n; i++)
            put(back, get(there, (uint64_t)i) / 3);
        _exit(0);
    }
    pin(0, "line-demote");
    double t0 = 0;
    uint64_t sink = 0;
    for (long i = 1; i <= n; i++) {
        if (i == n / 4)
            t0 = now();
        put(there, (uint64_t)i);
        sink += get(back, (uint64_t)i);
    }
    double t = now() - t0;
    waitpid(child, NULL, 0);
    double w0 = now();
    for (long i = 0; i < n / 4; i++)
        spin_work();
    double w = (now() - w0) / (double)(n / 4);
    printf("work %ld (%.1f ns) demote %d apart %ld: one-way %.1f ns (check %llu)\n", work, w * 1e9,
           demote, apart, t / ((double)n * 0.75) / 2 * 1e9, (unsigned long long)(sink % 10));
    return 0;
}
