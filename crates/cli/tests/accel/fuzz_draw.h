/* The draws the fuzz programs (fuzz.c, pfuzz.c) share: one stream from
 * the seed, the same on every rank, so every rank draws the same calls. */
#ifndef FUZZ_DRAW_H
#define FUZZ_DRAW_H
#include <stddef.h>
#include <stdint.h>

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
#endif
