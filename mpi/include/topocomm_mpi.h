/* topocomm MPI extensions (libtopocomm-reorder.so).
 * Link with -L<repo>/mpi/build/<impl> -ltopocomm-reorder, or preload the
 * library (LD_PRELOAD) to make MPI_Dist_graph_create[_adjacent] and
 * MPI_Cart_create honour reorder=1. See docs/mpi.md. */
#ifndef TOPOCOMM_MPI_H
#define TOPOCOMM_MPI_H

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Collective over `comm` (an intracommunicator). Each process passes some
 * edges of the communication graph (any process may pass any edge; the graph
 * is the union of all of them): n_edges pairs (src[i], dst[i]) of ranks of
 * `comm`, with weights[i] (bytes or any additive amount of traffic; NULL =
 * weight 1 for every edge). The graph is mapped onto the processes' current
 * placement (nodes from MPI_COMM_TYPE_SHARED, PUs from sched_getcpu, or the
 * simulated cluster given by TOPOCOMM_NODES / TOPOCOMM_RANKS_PER_NODE) and
 * *newcomm receives a communicator with the same processes where rank v is
 * the process chosen to play graph vertex v.
 * Returns MPI_SUCCESS when reordered; 1 when the reordering failed and
 * *newcomm is an unreordered duplicate of comm (one warning printed by rank
 * 0 of comm); an MPI error code only if even the duplicate failed. */
int topocomm_reorder_comm(MPI_Comm comm, int n_edges, const int *src, const int *dst,
                          const double *weights, MPI_Comm *newcomm);

#ifdef __cplusplus
}
#endif

#endif
