/* Internal interface of the topocomm reorder shim (libtopocomm-reorder.so). */
#ifndef TOPOCOMM_SHIM_H
#define TOPOCOMM_SHIM_H

#include <mpi.h>

/* Environment variables (docs/mpi.md). */
#define TC_ENV_TOPOLOGY "TOPOCOMM_TOPOLOGY"        /* node topology: XML, synthetic:DESC, live */
#define TC_ENV_NODES "TOPOCOMM_NODES"              /* simulated cluster: node count */
#define TC_ENV_RPN "TOPOCOMM_RANKS_PER_NODE"       /* simulated cluster: ranks per node */
#define TC_ENV_PLACEMENT "TOPOCOMM_PLACEMENT"      /* simulated: block (default) | round-robin */
#define TC_ENV_REORDER "TOPOCOMM_REORDER"          /* 0: pass every call through */
#define TC_ENV_VERBOSE "TOPOCOMM_REORDER_VERBOSE"  /* 1: rank 0 says what it did */
#define TC_ENV_FORCE "TOPOCOMM_REORDER_FORCE"      /* reverse | shift:K (tests) */

/* A directed, weighted edge list in the ranks of the communicator. */
typedef struct {
    long n, cap;
    int *src, *dst;
    double *w;
    int failed; /* a push ran out of memory */
} tc_graph;

int tc_graph_push(tc_graph *g, int src, int dst, double w);
void tc_graph_free(tc_graph *g);

/* Where this process is: a node index (dense, 0..nodes-1, identical on all
 * processes of the same node) and the OS index of its PU. Collective over
 * comm. `nodes` receives the node count. Returns 0 or -1 (reason in `err`). */
int tc_placement(MPI_Comm comm, int *node, int *pu, int *nodes, char *err, int errlen);

/* Collective over comm: gathers everyone's edges and placements to rank 0,
 * maps the graph (vertices = ranks of comm) onto the slots the processes
 * occupy, and gives every process the whole result: vertex_of_slot[s] is the
 * vertex (new rank) played by the process of rank s. Returns 0, or -1 on
 * every process with the reason in `err` on rank 0. */
int tc_reorder_perm(MPI_Comm comm, const tc_graph *local, int *vertex_of_slot, char *err,
                    int errlen);

/* 1 when the shim should act on a call with this reorder flag. */
int tc_shim_active(MPI_Comm comm, int reorder);
/* The fallback warning (rank 0 of comm only) and the success note. */
void tc_warn(MPI_Comm comm, const char *fn, const char *why);
void tc_note(MPI_Comm comm, const char *fn, const int *vertex_of_slot);

#endif
