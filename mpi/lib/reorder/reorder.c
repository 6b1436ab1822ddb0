/* The collective core of the shim: gather the graph and the placement to
 * rank 0, map with the topocomm mapping engine (tc_map_to_slots in
 * libtopocomm), check the answer and broadcast it. Every exit path is taken
 * by all processes together (decisions are made on rank 0 and broadcast), so
 * a failure can never leave some processes waiting for the others. */
#include "shim.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* From libtopocomm (crates/capi). Weak, so the shim still loads (and falls
 * back with a warning) against a libtopocomm without the mapping engine. */
extern int tc_map_to_slots(const char *topology_spec, int nodes, int n, const int *slot_node,
                           const int *slot_pu, long m, const int *src, const int *dst,
                           const double *bytes, const double *msgs, int *vertex_of_slot)
    __attribute__((weak));
extern const char *tc_last_error(void) __attribute__((weak));

int tc_graph_push(tc_graph *g, int src, int dst, double w)
{
    if (g->n == g->cap) {
        long cap = g->cap ? 2 * g->cap : 16;
        int *s = realloc(g->src, sizeof(int) * (size_t)cap);
        if (s)
            g->src = s;
        int *d = s ? realloc(g->dst, sizeof(int) * (size_t)cap) : NULL;
        if (d)
            g->dst = d;
        double *x = d ? realloc(g->w, sizeof(double) * (size_t)cap) : NULL;
        if (!x) {
            g->failed = 1;
            return -1;
        }
        g->w = x;
        g->cap = cap;
    }
    g->src[g->n] = src;
    g->dst[g->n] = dst;
    g->w[g->n] = w;
    g->n++;
    return 0;
}

void tc_graph_free(tc_graph *g)
{
    free(g->src);
    free(g->dst);
    free(g->w);
    memset(g, 0, sizeof *g);
}

/* Rank 0: map and validate. Returns 0 or -1 with the reason in err. */
/* TOPOCOMM_REORDER_FORCE=reverse|shift:K imposes a permutation instead of
 * the mapping engine's: a test hook for the renumbering logic (neighbour
 * lists, weights, MPI_COMM_NULL beyond a grid), independent of the mapping. */
static int forced_perm(int n, int *vertex_of_slot, char *err, int errlen)
{
    const char *f = getenv(TC_ENV_FORCE);
    int k = 0;
    if (!strcmp(f, "reverse")) {
        for (int s = 0; s < n; s++)
            vertex_of_slot[s] = n - 1 - s;
        return 0;
    }
    if (!strncmp(f, "shift:", 6)) {
        char *end;
        errno = 0;
        long x = strtol(f + 6, &end, 10);
        if (!errno && end != f + 6 && *end == '\0' && x >= -INT_MAX && x <= INT_MAX) {
            k = (int)x;
            for (int s = 0; s < n; s++)
                vertex_of_slot[s] = (int)((((long)s + k) % n + n) % n);
            return 0;
        }
    }
    snprintf(err, (size_t)errlen, "%s='%s': expected reverse or shift:K (K an int)", TC_ENV_FORCE,
             f);
    return -1;
}

static int map_on_root(int n, int nodes, const int *place, long m, const double *edges,
                       int *vertex_of_slot, char *err, int errlen)
{
    const char *f = getenv(TC_ENV_FORCE);
    if (f && *f)
        return forced_perm(n, vertex_of_slot, err, errlen);
    if (!tc_map_to_slots) {
        snprintf(err, (size_t)errlen,
                 "libtopocomm has no tc_map_to_slots (mapping engine not built in)");
        return -1;
    }
    int *slot_node = malloc(sizeof(int) * (size_t)n), *slot_pu = malloc(sizeof(int) * (size_t)n);
    int *src = malloc(sizeof(int) * (size_t)(m ? m : 1)), *dst = malloc(sizeof(int) * (size_t)(m ? m : 1));
    double *w = malloc(sizeof(double) * (size_t)(m ? m : 1));
    int *seen = calloc((size_t)n, sizeof(int));
    int rc = -1;
    if (!slot_node || !slot_pu || !src || !dst || !w || !seen) {
        snprintf(err, (size_t)errlen, "out of memory for %d ranks and %ld edges", n, m);
        goto out;
    }
    for (int s = 0; s < n; s++) {
        slot_node[s] = place[2 * s];
        slot_pu[s] = place[2 * s + 1];
    }
    for (long e = 0; e < m; e++) {
        src[e] = (int)edges[3 * e];
        dst[e] = (int)edges[3 * e + 1];
        w[e] = edges[3 * e + 2];
    }
    const char *spec = getenv(TC_ENV_TOPOLOGY);
    if (!spec || !*spec)
        spec = "live";
    /* The graph has one metric (the MPI weights): it is given as both bytes
     * and messages so any objective of the engine sees the same graph. */
    int r = tc_map_to_slots(spec, nodes, n, slot_node, slot_pu, m, src, dst, w, w,
                            vertex_of_slot);
    if (r != 0) {
        snprintf(err, (size_t)errlen, "mapping failed (code %d): %s", r,
                 tc_last_error ? tc_last_error() : "no message");
        goto out;
    }
    for (int s = 0; s < n; s++) {
        int v = vertex_of_slot[s];
        if (v < 0 || v >= n || seen[v]++) {
            snprintf(err, (size_t)errlen, "mapping engine returned no permutation (slot %d -> %d)",
                     s, v);
            goto out;
        }
    }
    rc = 0;
out:
    free(slot_node);
    free(slot_pu);
    free(src);
    free(dst);
    free(w);
    free(seen);
    return rc;
}

int tc_reorder_perm(MPI_Comm comm, const tc_graph *local, int *vertex_of_slot, char *err,
                    int errlen)
{
    int me, n, node = 0, pu = 0, nodes = 0;
    PMPI_Comm_rank(comm, &me);
    PMPI_Comm_size(comm, &n);
    err[0] = '\0';
    int ok = tc_placement(comm, &node, &pu, &nodes, err, errlen) == 0;

    /* Local checks: every vertex id must be a rank of comm, weights >= 0. */
    for (long e = 0; ok && e < local->n; e++) {
        if (local->src[e] < 0 || local->src[e] >= n || local->dst[e] < 0 || local->dst[e] >= n) {
            snprintf(err, (size_t)errlen, "rank %d: edge %d -> %d outside 0..%d", me,
                     local->src[e], local->dst[e], n - 1);
            ok = 0;
        } else if (!(local->w[e] >= 0)) {
            snprintf(err, (size_t)errlen, "rank %d: negative or NaN weight on edge %d -> %d", me,
                     local->src[e], local->dst[e]);
            ok = 0;
        }
    }
    double *mine = malloc(sizeof(double) * (size_t)(3 * (local->n ? local->n : 1)));
    if (!mine || !vertex_of_slot || local->failed) {
        snprintf(err, (size_t)errlen, "rank %d: out of memory", me);
        ok = 0;
    }
    /* Edges as (src, dst, weight) doubles: ranks are exact in a double. */
    for (long e = 0; ok && e < local->n; e++) {
        mine[3 * e] = local->src[e];
        mine[3 * e + 1] = local->dst[e];
        mine[3 * e + 2] = local->w[e];
    }
    int cnt = ok && local->n <= (1 << 28) ? (int)(3 * local->n) : -1;
    int myplace[2] = {node, pu};

    int *counts = NULL, *displs = NULL, *place = NULL;
    double *all = NULL;
    int status = 0;
    if (me == 0) {
        counts = malloc(sizeof(int) * (size_t)n);
        displs = malloc(sizeof(int) * (size_t)n);
        place = malloc(sizeof(int) * 2 * (size_t)n);
    }
    PMPI_Gather(&cnt, 1, MPI_INT, counts, 1, MPI_INT, 0, comm);
    PMPI_Gather(myplace, 2, MPI_INT, place, 2, MPI_INT, 0, comm);
    long total = 0;
    if (me == 0) {
        if (!counts || !displs || !place) {
            status = -1;
            snprintf(err, (size_t)errlen, "out of memory gathering %d ranks", n);
        }
        for (int i = 0; status == 0 && i < n; i++) {
            if (counts[i] < 0) {
                status = -1;
                if (!err[0])
                    snprintf(err, (size_t)errlen, "rank %d could not describe its edges", i);
            }
            displs[i] = (int)total;
            total += counts[i] > 0 ? counts[i] : 0;
        }
        if (status == 0 && total > (1L << 30)) {
            status = -1;
            snprintf(err, (size_t)errlen, "graph too large (%ld edges)", total / 3);
        }
        if (status == 0 && !(all = malloc(sizeof(double) * (size_t)(total ? total : 1)))) {
            status = -1;
            snprintf(err, (size_t)errlen, "out of memory for %ld edges", total / 3);
        }
        if (status != 0 && counts)
            for (int i = 0; i < n; i++)
                counts[i] = 0, displs[i] = 0;
    }
    /* Ranks that failed locally send nothing (cnt < 0 -> 0 elements). */
    PMPI_Gatherv(mine, cnt > 0 ? cnt : 0, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, 0, comm);
    if (me == 0 && status == 0)
        status = map_on_root(n, nodes, place, total / 3, all, vertex_of_slot, err, errlen);
    /* Status first, then (only on success) the permutation: a process
     * whose buffers failed has already made rank 0 fail (cnt < 0). */
    PMPI_Bcast(&status, 1, MPI_INT, 0, comm);
    if (status == 0)
        PMPI_Bcast(vertex_of_slot, n, MPI_INT, 0, comm);
    free(mine);
    free(all);
    free(counts);
    free(displs);
    free(place);
    return status == 0 ? 0 : -1;
}
