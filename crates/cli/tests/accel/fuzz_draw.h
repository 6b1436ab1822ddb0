/* The draws the fuzz programs (fuzz.c, pfuzz.c) share: one stream from
 * the seed, the same on every rank, so every rank draws the same calls. */
#ifndef FUZZ_DRAW_H
#define FUZZ_DRAW_H
#include <errno.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t rng_state;

/* xorshift64*. */
static uint64_t next(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

static int pick(int n) { return (int)(next() % (uint64_t)n); }

/* A byte count log-uniform from 1 to max, or 0 one time in `zero_one_in`
 * (and when max is 0): every size class, and empty calls, come up. */
static size_t draw_bytes_or_zero(size_t max, int zero_one_in) {
    if (max == 0 || pick(zero_one_in) == 0) return 0;
    int bits = 0;
    while (((size_t)1 << (bits + 1)) <= max) bits++;
    int e = pick(bits + 1);
    size_t lo = (size_t)1 << e, hi = e == bits ? max : (size_t)2 << e;
    return lo + (size_t)(next() % (uint64_t)(hi - lo + 1));
}

/* The arguments SEED [COUNT] [MAX_BYTES] (defaults 1, `count`, 1 MiB);
 * seeds the stream. A value that is not a number, a count below 0 or a
 * size above `most` stops the job with one line naming the argument. */
static void fuzz_args(int argc, char **argv, const char *usage, long *count, size_t *max_bytes,
                      size_t most, unsigned long long *seed) {
    unsigned long long v[3] = {1, (unsigned long long)*count, (size_t)1 << 20};
    static const char *what[3] = {"SEED", "the count", "MAX_BYTES"};
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < 3 && i + 1 < argc; i++) {
        char *end;
        errno = 0;
        v[i] = strtoull(argv[i + 1], &end, 10);
        if (errno || end == argv[i + 1] || *end || argv[i + 1][0] == '-' ||
            (i == 1 && v[i] > 0x7fffffff) || (i == 2 && v[i] > most)) {
            if (rank == 0)
                fprintf(stderr, "%s: %s '%s': expected a number%s; usage: %s\n", argv[0], what[i],
                        argv[i + 1], i == 2 ? " within the limit" : "", usage);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (argc > 4) {
        if (rank == 0) fprintf(stderr, "%s: too many arguments; usage: %s\n", argv[0], usage);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    *seed = v[0];
    *count = (long)v[1];
    *max_bytes = (size_t)v[2];
    rng_state = *seed * 0x9E3779B97F4A7C15ull + 1;
}
#endif
