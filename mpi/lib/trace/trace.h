/* Internal interface of the topocomm PMPI tracer (libtopocomm-trace.so).
 * The tracer counts, at the sender, bytes and messages per destination
 * MPI_COMM_WORLD rank, and writes the edge list at MPI_Finalize. */
#ifndef TOPOCOMM_TRACE_H
#define TOPOCOMM_TRACE_H

#include <mpi.h>
#include <stdint.h>

/* Environment variables. */
#define TC_TRACE_OUT_ENV "TOPOCOMM_TRACE_OUT"
#define TC_TRACE_COLL_ENV "TOPOCOMM_TRACE_COLLECTIVES"
#define TC_TRACE_DEFAULT_OUT "topocomm-trace.csv"

/* One destination's counters. */
typedef struct {
    int dst;           /* world rank, -1 = empty slot */
    uint64_t bytes;
    uint64_t msgs;
} tc_edge;

/* Open-addressing hash map world rank -> counters (sparse: only the
 * destinations this rank actually sent to). */
void tc_table_add(int dst, uint64_t bytes, uint64_t msgs);
/* Number of destinations recorded. */
long tc_table_len(void);
/* Copies the used entries (sorted by dst) into out[0..tc_table_len()). */
void tc_table_export(tc_edge *out);

/* Persistent send requests: handle -> (world dst, bytes). */
void tc_persist_put(MPI_Request req, int dst, uint64_t bytes);
/* Returns 1 and fills dst/bytes when req is a traced persistent send. */
int tc_persist_get(MPI_Request req, int *dst, uint64_t *bytes);
void tc_persist_del(MPI_Request req);

/* State shared by the wrappers. */
extern int tc_world_rank;     /* -1 until MPI_Init returned */
extern int tc_world_size;
extern int tc_trace_colls;    /* collectives decomposed when non-zero */
void tc_lock(void);
void tc_unlock(void);
void tc_state_init(int provided_thread_level);

/* Translates rank `r` of `comm` (remote group for intercommunicators) to a
 * world rank; -1 for MPI_PROC_NULL / ranks outside MPI_COMM_WORLD. */
int tc_world_of(MPI_Comm comm, int r);
/* Counts `count` elements of `type` sent to rank `dst` of `comm`, `n` times. */
void tc_count(MPI_Comm comm, int dst, int count, MPI_Datatype type, uint64_t n);
/* Same, with a destination already translated to a world rank. */
void tc_count_world(int wdst, uint64_t bytes, uint64_t n);
/* Adds `msgs` messages totalling `bytes` to world rank `wdst`. */
void tc_add_world(int wdst, uint64_t bytes, uint64_t msgs);
uint64_t tc_bytes_of(int count, MPI_Datatype type);

/* Writes the gathered edge list (called from MPI_Finalize before PMPI). */
void tc_write_output(void);

#endif
