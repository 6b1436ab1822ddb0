/* topocomm MPI extensions (docs/mpi.md):
 * - topocomm_reorder_comm (libtopocomm-reorder.so): link with
 *   -L<repo>/mpi/build/<impl> -ltopocomm-reorder, or preload the library
 *   (LD_PRELOAD) to make MPI_Dist_graph_create[_adjacent] and
 *   MPI_Cart_create honour reorder=1;
 * - topocomm_mpi_init / topocomm_mpi_finalize (libtopocomm-mpi.so): link
 *   with -L<repo>/mpi/build/<impl> -ltopocomm-mpi -L<repo>/target/release
 *   -ltopocomm, then use tc_send/tc_recv/... of topocomm.h among the ranks
 *   of each node. */
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

/* Collective over `comm`: starts topocomm's shared-memory transport among
 * the processes of each node (MPI_Comm_split_type MPI_COMM_TYPE_SHARED).
 * *node_comm receives that node-local communicator: the transport's ranks
 * (tc_rank/tc_size) are its ranks. Per-pair plans come from the PUs the
 * processes are bound to (a process bound to several PUs counts as unbound),
 * the live machine and the built-in rules, or the rules file named by
 * $TOPOCOMM_RULES. The segment descriptor goes from node rank 0 to the others
 * over an abstract Unix socket with a random name (nothing in /dev/shm or the
 * filesystem); the hand-off waits at most $TOPOCOMM_TIMEOUT seconds
 * (default 30). Returns 0 on every rank, or the same negative TC_ERR_* code
 * on every rank when any rank failed (then *node_comm is MPI_COMM_NULL and
 * topocomm_mpi_last_error() names the failing rank and what failed). The
 * caller frees *node_comm (MPI_Comm_free) after topocomm_mpi_finalize. */
int topocomm_mpi_init(MPI_Comm comm, MPI_Comm *node_comm);
/* topocomm_mpi_init with options. pretend_nodes > 0 splits comm into that
 * many blocks of consecutive ranks, each treated as a node (to exercise
 * multi-node paths on one machine); 0 splits by MPI_COMM_TYPE_SHARED.
 * flags: TOPOCOMM_MPI_SHARED joins with tc_init_fd_shared (any thread may
 * then call the transport, one call at a time). */
#define TOPOCOMM_MPI_SHARED 1
int topocomm_mpi_init_ex(MPI_Comm comm, int pretend_nodes, int flags, MPI_Comm *node_comm);
/* Completes queued sends and leaves the transport (tc_finalize). */
int topocomm_mpi_finalize(void);
/* Message of the last failed topocomm_mpi_* call ("" if none). */
const char *topocomm_mpi_last_error(void);

#ifdef __cplusplus
}
#endif

#endif
