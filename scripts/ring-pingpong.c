/* Ping-pong through a ring of cells between two processes pinned to PUs 0
 * and 1, without any topocomm code: how much does moving to the next cell
 * for every message cost against reusing one line (the cache-line limit of
 * `topocomm bench p2p`)? See docs/benchmarks/p2p.md, "Session 3".
 *
 *   gcc -O2 -Wall -Wextra -Werror -o /tmp/ring-pingpong scripts/ring-pingpong.c
 *   /tmp/ring-pingpong CELLS [SPACING_LINES] [ROUND_TRIPS]
 *
 * Each direction has its own ring of CELLS 64-byte cells, SPACING_LINES
 * cache lines apart (default 1); a cell carries `seq` (stored last, release)
 * and 40 bytes of payload, as the transport's cells do. CELLS 0: both
 * directions in one line instead, each its own word, as the transport's
 * duplex line (docs/transport.md, "Small messages through the duplex
 * line"); `ring-pingpong 1` is then the line per direction to compare with.
 * Prints the one-way time in ns (round trip / 2, over the last three
 * quarters of the run). */
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
    uint32_t kind;
    int32_t tag;
    uint64_t len;
    uint8_t body[40];
} __attribute__((aligned(64))) cell;

static long cells, spacing;

static cell *at(cell *ring, long i)
{
    return ring + (i % cells) * spacing;
}

static void put(cell *c, uint64_t v, uint64_t payload)
{
    c->kind = 1;
    c->tag = 7;
    c->len = 8;
    memcpy(c->body, &payload, 8);
    __atomic_store_n(&c->seq, v, __ATOMIC_RELEASE);
}

static uint64_t get(cell *c, uint64_t v)
{
    uint64_t payload;
    while (__atomic_load_n(&c->seq, __ATOMIC_ACQUIRE) != v)
        __builtin_ia32_pause();
    memcpy(&payload, c->body, 8);
    return payload;
}

/* Both directions in one line: words 0 and 4 of it. */
static double one_line(long n)
{
    uint64_t *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        perror("ring-pingpong: mmap");
        exit(2);
    }
    uint64_t *there = &m[0], *back = &m[4];
    pid_t child = fork();
    if (child < 0) {
        perror("ring-pingpong: fork");
        exit(2);
    }
    if (child == 0) {
        pin(1, "ring-pingpong");
        for (long i = 1; i <= n; i++) {
            while (__atomic_load_n(there, __ATOMIC_ACQUIRE) != (uint64_t)i)
                __builtin_ia32_pause();
            __atomic_store_n(back, (uint64_t)i, __ATOMIC_RELEASE);
        }
        _exit(0);
    }
    pin(0, "ring-pingpong");
    double t0 = 0;
    for (long i = 1; i <= n; i++) {
        if (i == n / 4)
            t0 = now();
        __atomic_store_n(there, (uint64_t)i, __ATOMIC_RELEASE);
        while (__atomic_load_n(back, __ATOMIC_ACQUIRE) != (uint64_t)i)
            __builtin_ia32_pause();
    }
    double t = now() - t0;
    waitpid(child, NULL, 0);
    return t;
}

int main(int argc, char **argv)
{
    char *end = "";
    cells = argc > 1 ? strtol(argv[1], &end, 10) : -1;
    spacing = argc > 2 ? atol(argv[2]) : 1;
    long n = argc > 3 ? atol(argv[3]) : 400000;
    if (*end || argc < 2 || argc > 4 || cells < 0 || cells > 4096 || spacing < 1 || spacing > 64 || n < 4) {
        fprintf(stderr, "usage: ring-pingpong CELLS(0-4096; 0: one line for both directions) "
                        "[SPACING_LINES(1-64)] [ROUND_TRIPS(>=4)]\n");
        return 2;
    }
    if (cells == 0) {
        double t = one_line(n);
        printf("one line for both directions: one-way %.1f ns\n", t / ((double)n * 0.75) / 2 * 1e9);
        return 0;
    }
    size_t ring_bytes = (size_t)(cells * spacing) * sizeof(cell);
    cell *m = mmap(NULL, 2 * ring_bytes + 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        perror("ring-pingpong: mmap");
        return 2;
    }
    cell *there = m, *back = m + cells * spacing + 64;
    pid_t child = fork();
    if (child < 0) {
        perror("ring-pingpong: fork");
        return 2;
    }
    if (child == 0) {
        pin(1, "ring-pingpong");
        for (long i = 0; i < n; i++)
            put(at(back, i), (uint64_t)i + 1, get(at(there, i), (uint64_t)i + 1));
        _exit(0);
    }
    pin(0, "ring-pingpong");
    double t0 = 0;
    uint64_t sink = 0;
    for (long i = 0; i < n; i++) {
        if (i == n / 4)
            t0 = now();
        put(at(there, i), (uint64_t)i + 1, (uint64_t)i);
        sink += get(at(back, i), (uint64_t)i + 1);
    }
    double t = now() - t0;
    int status;
    waitpid(child, &status, 0);
    printf("cells %ld spacing %ld lines: one-way %.1f ns (check %llu)\n", cells, spacing,
           t / ((double)n * 0.75) / 2 * 1e9, (unsigned long long)(sink % 10));
    return 0;
}
