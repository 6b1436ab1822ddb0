/* Ping-pong between two processes pinned to PUs 0 and 1, without any
 * topocomm code: one line written by both directions (each its own word,
 * as the transport's duplex line), or one line per direction (as the ring
 * cells of two channels). See docs/transport.md, "Small messages through
 * the duplex line".
 *
 *   gcc -O2 -Wall -Wextra -Werror -o /tmp/duplex-pingpong scripts/duplex-pingpong.c
 *   /tmp/duplex-pingpong 0    # one line for both directions
 *   /tmp/duplex-pingpong 1    # a line per direction
 *
 * Prints the one-way time in ns (round trip / 2, over the last three
 * quarters of 2 million round trips). */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof s, &s)) {
        perror("duplex-pingpong: sched_setaffinity");
        exit(2);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2 || (argv[1][0] != '0' && argv[1][0] != '1') || argv[1][1]) {
        fprintf(stderr, "usage: duplex-pingpong 0|1 (0: one line, 1: a line per direction)\n");
        return 2;
    }
    int two_lines = argv[1][0] == '1';
    const long n = 2000000;
    uint64_t *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        perror("duplex-pingpong: mmap");
        return 2;
    }
    /* Words 0 and 4 share the first line; word 8 starts the second. */
    uint64_t *a = &m[0], *b = two_lines ? &m[8] : &m[4];
    pid_t pid = fork();
    if (pid < 0) {
        perror("duplex-pingpong: fork");
        return 2;
    }
    if (pid == 0) {
        pin(1);
        for (long i = 1; i <= n; i++) {
            while (__atomic_load_n(a, __ATOMIC_ACQUIRE) != (uint64_t)i)
                ;
            __atomic_store_n(b, (uint64_t)i, __ATOMIC_RELEASE);
        }
        _exit(0);
    }
    pin(0);
    double t0 = 0;
    for (long i = 1; i <= n; i++) {
        if (i == n / 4)
            t0 = now();
        __atomic_store_n(a, (uint64_t)i, __ATOMIC_RELEASE);
        while (__atomic_load_n(b, __ATOMIC_ACQUIRE) != (uint64_t)i)
            ;
    }
    double t = now() - t0;
    waitpid(pid, NULL, 0);
    printf("%s: one-way %.1f ns\n", two_lines ? "a line per direction" : "one line", t / ((double)n * 0.75) / 2 * 1e9);
    return 0;
}
