/* Helpers shared by the two-process ping-pong probes in scripts/
 * (ring-pingpong.c, line-demote.c): a monotonic clock in seconds and
 * pinning the calling process to one PU (exit status 2 when it cannot, so
 * a figure never comes from unpinned processes). Include after <sched.h>
 * with _GNU_SOURCE defined, as those files do. */
#ifndef TOPOCOMM_PINGPONG_UTIL_H
#define TOPOCOMM_PINGPONG_UTIL_H

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* `who` names the program in the error line. */
static void pin(int cpu, const char *who)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof s, &s)) {
        fprintf(stderr, "%s: sched_setaffinity to PU %d: ", who, cpu);
        perror(NULL);
        exit(2);
    }
}

#endif
