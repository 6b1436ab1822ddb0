/* Sparse per-destination counters and the persistent-request table.
 * Both are open-addressing hash maps with linear probing that double when
 * half full: memory is proportional to the destinations a rank really uses,
 * never to the size of MPI_COMM_WORLD. */
#include "trace.h"

#include <stdlib.h>
#include <string.h>

static tc_edge *g_tab;
static long g_cap, g_len;

static uint64_t mix(uint64_t x)
{
    /* splitmix64 finalizer: neighbouring ranks land far apart. */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static int table_grow(void)
{
    long ncap = g_cap ? g_cap * 2 : 64;
    tc_edge *n = malloc(sizeof *n * (size_t)ncap);
    if (!n)
        return -1;
    for (long i = 0; i < ncap; i++)
        n[i].dst = -1;
    for (long i = 0; i < g_cap; i++) {
        if (g_tab[i].dst < 0)
            continue;
        long j = (long)(mix((uint64_t)g_tab[i].dst) & (uint64_t)(ncap - 1));
        while (n[j].dst >= 0)
            j = (j + 1) & (ncap - 1);
        n[j] = g_tab[i];
    }
    free(g_tab);
    g_tab = n;
    g_cap = ncap;
    return 0;
}

void tc_table_add(int dst, uint64_t bytes, uint64_t msgs)
{
    if (dst < 0)
        return;
    if (2 * (g_len + 1) > g_cap && table_grow() != 0)
        return; /* out of memory: the count is lost, the application goes on */
    long j = (long)(mix((uint64_t)dst) & (uint64_t)(g_cap - 1));
    while (g_tab[j].dst >= 0 && g_tab[j].dst != dst)
        j = (j + 1) & (g_cap - 1);
    if (g_tab[j].dst < 0) {
        g_tab[j].dst = dst;
        g_tab[j].bytes = 0;
        g_tab[j].msgs = 0;
        g_len++;
    }
    g_tab[j].bytes += bytes;
    g_tab[j].msgs += msgs;
}

long tc_table_len(void) { return g_len; }

static int by_dst(const void *a, const void *b)
{
    int x = ((const tc_edge *)a)->dst, y = ((const tc_edge *)b)->dst;
    return (x > y) - (x < y);
}

void tc_table_export(tc_edge *out)
{
    long k = 0;
    for (long i = 0; i < g_cap; i++)
        if (g_tab[i].dst >= 0)
            out[k++] = g_tab[i];
    qsort(out, (size_t)k, sizeof *out, by_dst);
}

/* ---- persistent send requests ---------------------------------------- */

typedef struct {
    uint64_t key; /* request handle bits; 0 = empty */
    int used;     /* 1 = live, 2 = deleted (tombstone) */
    int dst;
    uint64_t bytes;
} preq;

static preq *p_tab;
static long p_cap, p_live;

static uint64_t req_key(MPI_Request r)
{
    /* MPI_Request is a pointer in Open MPI and an int in MPICH. */
    uint64_t k = 0;
    memcpy(&k, &r, sizeof r < sizeof k ? sizeof r : sizeof k);
    return k;
}

static int preq_grow(void)
{
    long ncap = p_cap ? p_cap * 2 : 32;
    preq *n = calloc((size_t)ncap, sizeof *n);
    if (!n)
        return -1;
    for (long i = 0; i < p_cap; i++) {
        if (p_tab[i].used != 1)
            continue;
        long j = (long)(mix(p_tab[i].key) & (uint64_t)(ncap - 1));
        while (n[j].used)
            j = (j + 1) & (ncap - 1);
        n[j] = p_tab[i];
    }
    free(p_tab);
    p_tab = n;
    p_cap = ncap;
    return 0;
}

static long preq_find(uint64_t k)
{
    if (!p_cap)
        return -1;
    long j = (long)(mix(k) & (uint64_t)(p_cap - 1));
    for (long probes = 0; probes < p_cap && p_tab[j].used; probes++) {
        if (p_tab[j].used == 1 && p_tab[j].key == k)
            return j;
        j = (j + 1) & (p_cap - 1);
    }
    return -1;
}

void tc_persist_put(MPI_Request req, int dst, uint64_t bytes)
{
    uint64_t k = req_key(req);
    long j = preq_find(k);
    if (j < 0) {
        /* Tombstones count as occupied for the load factor: rehash early. */
        long occupied = 0;
        for (long i = 0; i < p_cap; i++)
            occupied += p_tab[i].used != 0;
        if (2 * (occupied + 1) > p_cap && preq_grow() != 0)
            return;
        j = (long)(mix(k) & (uint64_t)(p_cap - 1));
        while (p_tab[j].used == 1)
            j = (j + 1) & (p_cap - 1);
        p_live++;
    }
    p_tab[j].key = k;
    p_tab[j].used = 1;
    p_tab[j].dst = dst;
    p_tab[j].bytes = bytes;
}

int tc_persist_get(MPI_Request req, int *dst, uint64_t *bytes)
{
    long j = preq_find(req_key(req));
    if (j < 0)
        return 0;
    *dst = p_tab[j].dst;
    *bytes = p_tab[j].bytes;
    return 1;
}

void tc_persist_del(MPI_Request req)
{
    long j = preq_find(req_key(req));
    if (j >= 0) {
        p_tab[j].used = 2;
        p_live--;
    }
}
