/* The intercepted MPI topology constructors and topocomm_reorder_comm.
 *
 * With reorder = 1, the graph is mapped (reorder.c), the processes are
 * renumbered with MPI_Comm_split (key = the vertex each process now plays),
 * and the real constructor is called on that communicator with reorder = 0:
 *  - MPI_Dist_graph_create_adjacent: the process playing vertex v must pass
 *    the neighbour lists *of vertex v*, i.e. those that the process of old
 *    rank v passed; they are sent to it (vertex ids = new ranks, so the lists
 *    need no renumbering, and their order and weights are kept).
 *  - MPI_Dist_graph_create: the graph is the union of all edges, whoever
 *    passes them, so every process passes its own arguments unchanged.
 *  - MPI_Cart_create: every process passes the same dims/periods; processes
 *    beyond the grid get MPI_COMM_NULL as without reordering.
 * Any failure: one warning from rank 0 and the unreordered constructor. */
#include "../../include/topocomm_mpi.h"
#include "shim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERRLEN 256

int tc_shim_active(MPI_Comm comm, int reorder)
{
    const char *v = getenv(TC_ENV_REORDER);
    int inter = 1;
    if (!reorder || (v && !strcmp(v, "0")) || comm == MPI_COMM_NULL)
        return 0;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter)
        return 0;
    return 1;
}

void tc_warn(MPI_Comm comm, const char *fn, const char *why)
{
    int r = 0;
    PMPI_Comm_rank(comm, &r);
    if (r == 0)
        fprintf(stderr, "topocomm-reorder: warning: %s: %s; ranks not reordered\n", fn,
                why && *why ? why : "unknown failure");
}

void tc_note(MPI_Comm comm, const char *fn, const int *vertex_of_slot)
{
    const char *v = getenv(TC_ENV_VERBOSE);
    int r = 0, n = 0, moved = 0;
    if (!v || !*v || !strcmp(v, "0"))
        return;
    PMPI_Comm_rank(comm, &r);
    PMPI_Comm_size(comm, &n);
    if (r != 0)
        return;
    for (int s = 0; s < n; s++)
        moved += vertex_of_slot[s] != s;
    fprintf(stderr, "topocomm-reorder: %s: %d of %d ranks renumbered\n", fn, moved, n);
}

/* Maps `g` over comm and splits comm so that the process of rank s gets rank
 * vertex_of_slot[s] (color MPI_UNDEFINED for new ranks >= keep). On failure
 * returns -1 on all processes (after the warning). */
static int reorder_split(MPI_Comm comm, const char *fn, tc_graph *g, int keep, int **perm_out,
                         MPI_Comm *split)
{
    int n, me;
    char err[ERRLEN];
    PMPI_Comm_size(comm, &n);
    PMPI_Comm_rank(comm, &me);
    int *perm = malloc(sizeof(int) * (size_t)n);
    if (tc_reorder_perm(comm, g, perm, err, ERRLEN) != 0) {
        tc_warn(comm, fn, err);
        free(perm);
        return -1;
    }
    int v = perm[me];
    PMPI_Comm_split(comm, v < keep ? 0 : MPI_UNDEFINED, v, split);
    tc_note(comm, fn, perm);
    if (perm_out)
        *perm_out = perm;
    else
        free(perm);
    return 0;
}

/* ---- MPI_Dist_graph_create_adjacent ----------------------------------- */

/* Packed lists: [indeg, outdeg, in_weighted, out_weighted, sources, sw, dests, dw]. */
static int *pack_adj(int indeg, const int *sources, const int *sw, int outdeg, const int *dests,
                     const int *dw, int *len)
{
    int inw = sw != MPI_UNWEIGHTED, outw = dw != MPI_UNWEIGHTED;
    *len = 4 + indeg * (1 + inw) + outdeg * (1 + outw);
    int *p = malloc(sizeof(int) * (size_t)*len), k = 4;
    if (!p)
        return NULL;
    p[0] = indeg, p[1] = outdeg, p[2] = inw, p[3] = outw;
    for (int i = 0; i < indeg; i++)
        p[k++] = sources[i];
    for (int i = 0; inw && i < indeg; i++)
        p[k++] = sw[i];
    for (int i = 0; i < outdeg; i++)
        p[k++] = dests[i];
    for (int i = 0; outw && i < outdeg; i++)
        p[k++] = dw[i];
    return p;
}

static const int *weights_of(const int *p, int deg, int weighted, const int *arr)
{
    (void)p;
    if (!weighted)
        return MPI_UNWEIGHTED;
    return deg == 0 ? MPI_WEIGHTS_EMPTY : arr;
}

int MPI_Dist_graph_create_adjacent(MPI_Comm comm, int indeg, const int sources[],
                                   const int sourceweights[], int outdeg,
                                   const int destinations[], const int destweights[],
                                   MPI_Info info, int reorder, MPI_Comm *newcomm)
{
    static const char fn[] = "MPI_Dist_graph_create_adjacent";
    if (!tc_shim_active(comm, reorder))
        return PMPI_Dist_graph_create_adjacent(comm, indeg, sources, sourceweights, outdeg,
                                               destinations, destweights, info, reorder,
                                               newcomm);
    int me;
    PMPI_Comm_rank(comm, &me);
    tc_graph g = {0};
    for (int i = 0; i < outdeg; i++)
        tc_graph_push(&g, me, destinations[i],
                      destweights == MPI_UNWEIGHTED ? 1.0 : (double)destweights[i]);
    int *perm = NULL;
    MPI_Comm split = MPI_COMM_NULL;
    int rc = reorder_split(comm, fn, &g, 1 << 30, &perm, &split);
    tc_graph_free(&g);
    if (rc != 0)
        return PMPI_Dist_graph_create_adjacent(comm, indeg, sources, sourceweights, outdeg,
                                               destinations, destweights, info, 0, newcomm);

    /* Send my lists to the process now playing vertex `me`; receive the
     * lists of vertex perm[me] from its old owner. On a private duplicate so
     * no application message can match. */
    int n, len = 0, rlen = 0, to = -1, from = perm[me];
    PMPI_Comm_size(comm, &n);
    for (int s = 0; s < n; s++)
        if (perm[s] == me)
            to = s;
    free(perm);
    MPI_Comm priv;
    PMPI_Comm_dup(comm, &priv);
    int *mine = pack_adj(indeg, sources, sourceweights, outdeg, destinations, destweights, &len);
    /* Out of memory here cannot be hidden from the peer: it gets empty
     * lists (zeroed header) and MPI reports the inconsistent graph. */
    int hdr = mine ? len : 0;
    PMPI_Sendrecv(&hdr, 1, MPI_INT, to, 1, &rlen, 1, MPI_INT, from, 1, priv, MPI_STATUS_IGNORE);
    int *theirs = calloc((size_t)(rlen >= 4 ? rlen : 4), sizeof(int));
    PMPI_Sendrecv(mine, hdr, MPI_INT, to, 2, theirs, rlen, MPI_INT, from, 2, priv,
                  MPI_STATUS_IGNORE);
    PMPI_Comm_free(&priv);
    free(mine);
    const int *p = theirs;
    int rin = p[0], rout = p[1], inw = p[2], outw = p[3];
    const int *rs = p + 4, *rsw = rs + rin, *rd = rsw + (inw ? rin : 0), *rdw = rd + rout;
    rc = PMPI_Dist_graph_create_adjacent(split, rin, rs, weights_of(p, rin, inw, rsw), rout, rd,
                                         weights_of(p, rout, outw, rdw), info, 0, newcomm);
    free(theirs);
    PMPI_Comm_free(&split);
    return rc;
}

/* ---- MPI_Dist_graph_create ------------------------------------------- */

int MPI_Dist_graph_create(MPI_Comm comm, int n, const int sources[], const int degrees[],
                          const int destinations[], const int weights[], MPI_Info info,
                          int reorder, MPI_Comm *newcomm)
{
    static const char fn[] = "MPI_Dist_graph_create";
    if (!tc_shim_active(comm, reorder))
        return PMPI_Dist_graph_create(comm, n, sources, degrees, destinations, weights, info,
                                      reorder, newcomm);
    tc_graph g = {0};
    long k = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < degrees[i]; j++, k++)
            tc_graph_push(&g, sources[i], destinations[k],
                          weights == MPI_UNWEIGHTED ? 1.0 : (double)weights[k]);
    MPI_Comm split = MPI_COMM_NULL;
    int rc = reorder_split(comm, fn, &g, 1 << 30, NULL, &split);
    tc_graph_free(&g);
    if (rc != 0)
        return PMPI_Dist_graph_create(comm, n, sources, degrees, destinations, weights, info, 0,
                                      newcomm);
    rc = PMPI_Dist_graph_create(split, n, sources, degrees, destinations, weights, info, 0,
                                newcomm);
    PMPI_Comm_free(&split);
    return rc;
}

/* ---- MPI_Cart_create ------------------------------------------------- */

int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[],
                    int reorder, MPI_Comm *newcomm)
{
    static const char fn[] = "MPI_Cart_create";
    int me, size;
    long cells = 1;
    if (!tc_shim_active(comm, reorder) || ndims <= 0)
        return PMPI_Cart_create(comm, ndims, dims, periods, reorder, newcomm);
    PMPI_Comm_rank(comm, &me);
    PMPI_Comm_size(comm, &size);
    for (int d = 0; d < ndims; d++)
        cells *= dims[d] > 0 ? dims[d] : 0;
    if (cells == 0 || cells > size) /* invalid: let MPI report it */
        return PMPI_Cart_create(comm, ndims, dims, periods, reorder, newcomm);

    /* My grid neighbours (row-major numbering, as MPI's), unit weights. */
    tc_graph g = {0};
    if (me < cells) {
        int *c = malloc(sizeof(int) * (size_t)ndims);
        if (!c) {
            g.failed = 1;
        } else {
            for (int d = ndims - 1, r = me; d >= 0; d--) {
                c[d] = r % dims[d];
                r /= dims[d];
            }
            for (int d = 0; d < ndims; d++)
                for (int step = -1; step <= 1; step += 2) {
                    int x = c[d] + step;
                    if (x < 0 || x >= dims[d]) {
                        if (!periods[d])
                            continue;
                        x = (x + dims[d]) % dims[d];
                    }
                    long nb = 0;
                    for (int e = 0; e < ndims; e++)
                        nb = nb * dims[e] + (e == d ? x : c[e]);
                    if (nb != me)
                        tc_graph_push(&g, me, (int)nb, 1.0);
                }
            free(c);
        }
    }
    MPI_Comm split = MPI_COMM_NULL;
    int rc = reorder_split(comm, fn, &g, (int)cells, NULL, &split);
    tc_graph_free(&g);
    if (rc != 0)
        return PMPI_Cart_create(comm, ndims, dims, periods, 0, newcomm);
    if (split == MPI_COMM_NULL) {
        *newcomm = MPI_COMM_NULL;
        return MPI_SUCCESS;
    }
    rc = PMPI_Cart_create(split, ndims, dims, periods, 0, newcomm);
    PMPI_Comm_free(&split);
    return rc;
}

/* ---- explicit call --------------------------------------------------- */

int topocomm_reorder_comm(MPI_Comm comm, int n_edges, const int *src, const int *dst,
                          const double *weights, MPI_Comm *newcomm)
{
    static const char fn[] = "topocomm_reorder_comm";
    tc_graph g = {0};
    int inter = 1;
    if (comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) {
        if (comm != MPI_COMM_NULL)
            tc_warn(comm, fn, "not an intracommunicator");
        int rc = comm == MPI_COMM_NULL ? MPI_ERR_COMM : PMPI_Comm_dup(comm, newcomm);
        return rc == MPI_SUCCESS ? 1 : rc;
    }
    for (int i = 0; i < n_edges; i++)
        tc_graph_push(&g, src[i], dst[i], weights ? weights[i] : 1.0);
    MPI_Comm split = MPI_COMM_NULL;
    int rc = reorder_split(comm, fn, &g, 1 << 30, NULL, &split);
    tc_graph_free(&g);
    if (rc != 0) {
        rc = PMPI_Comm_dup(comm, newcomm);
        return rc == MPI_SUCCESS ? 1 : rc;
    }
    *newcomm = split;
    return MPI_SUCCESS;
}
