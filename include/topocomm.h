/* topocomm C API. Link with -ltopocomm (pkg-config --libs topocomm).
 *
 * Conventions: functions return 0 (TC_OK) on success and a negative TC_ERR_*
 * code on failure; tc_last_error() gives the message of the last failure on
 * the calling thread. Handles are opaque and released by their tc_*_free.
 * String arguments are NUL-terminated UTF-8 and only read during the call. */
#ifndef TOPOCOMM_H
#define TOPOCOMM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TC_OK 0
#define TC_ERR_INVALID_ARGUMENT (-1)
#define TC_ERR_TOPOLOGY (-2)
#define TC_ERR_NOT_FOUND (-3)
#define TC_ERR_TRUNCATED (-4)
#define TC_ERR_DEAD_PEER (-5)
#define TC_ERR_TIMEOUT (-6)
#define TC_ERR_NOT_INITIALIZED (-7)
#define TC_ERR_TRANSPORT (-8)
#define TC_ERR_INTERNAL (-99)

/* Message of the last failed call on this thread ("" if none). Valid until
 * the next failing call on the same thread. */
const char *tc_last_error(void);
/* Library version, e.g. "0.1.0". */
const char *tc_version(void);

/* ---- Machine model ------------------------------------------------------ */
typedef struct TcMachine tc_machine;

/* Loads a machine model. spec: "live", "synthetic:DESC", an hwloc XML path or
 * a topocomm machine JSON path; NULL or "" means $TOPOCOMM_TOPOLOGY or live. */
int tc_machine_load(const char *spec, tc_machine **out);
void tc_machine_free(tc_machine *m);
/* Number of PUs (>= 1), or a negative error code. */
int tc_machine_num_pus(const tc_machine *m);
/* Locality class ("smt", "l2", "l3", "numa", "package", "machine", ...) of
 * two PUs given by OS index, written into buf (len bytes, NUL-terminated). */
int tc_pair_class(const tc_machine *m, unsigned p, unsigned q, char *buf, size_t len);

/* ---- Rank reordering ---------------------------------------------------- */
/* Maps the n vertices of a directed weighted graph (m edges src[k]->dst[k]
 * with bytes[k] and msgs[k]) onto n given slots (slot_node[s] = node index,
 * slot_pu[s] = PU OS index on that node; several slots may share a PU when
 * oversubscribed), on `nodes` copies of the topology `topology_spec` (NULL or
 * "" = $TOPOCOMM_TOPOLOGY or live). Minimizes the estimated communication
 * time with the default per-class costs (strategy auto, seed 1: the result is
 * deterministic). On success writes vertex_of_slot[s] = the vertex placed on
 * slot s (a permutation of 0..n-1) and returns 0; negative TC_ERR_* otherwise
 * (TC_ERR_INVALID_ARGUMENT for bad arrays, slots or edges, TC_ERR_TOPOLOGY
 * when the topology cannot be loaded). Edge arrays may be NULL when m == 0. */
int tc_map_to_slots(const char *topology_spec, int nodes, int n, const int *slot_node, const int *slot_pu,
                    long m, const int *src, const int *dst, const double *bytes, const double *msgs,
                    int *vertex_of_slot);

/* ---- Shared-memory transport (docs/capi.md) ------------------------------
 * Run the program with `topocomm run -n N -- prog`; without the launcher it
 * is a job of one rank. Use from the thread that called tc_init. Tags are
 * >= 0. Errors: TC_ERR_TRUNCATED (message longer than the buffer; the
 * message is consumed), TC_ERR_DEAD_PEER (a rank died or the job was
 * stopped), TC_ERR_TIMEOUT (no completion within TOPOCOMM_TIMEOUT seconds,
 * default 60). */
#define TC_ANY_SOURCE (-1)
#define TC_ANY_TAG (-1)
#define TC_REQUEST_NULL ((tc_request)0)
typedef uint64_t tc_request;
typedef struct {
    int source;   /* rank the message came from */
    int tag;      /* its tag */
    size_t count; /* its length in bytes */
} tc_status;

int tc_init(void);
int tc_finalize(void);
/* Bootstrap without the launcher (e.g. from MPI: libtopocomm-mpi, docs/mpi.md).
 * One process creates the segment of a job of nranks ranks, rank r bound to
 * PU pus[r] (OS index, -1 = not bound to a single PU; pus may be NULL), with
 * plans from the live machine (or $TOPOCOMM_TOPOLOGY) and the built-in rules,
 * or the rules file rules_path (NULL = built-in). *fd_out receives the
 * segment's descriptor (close-on-exec, never a file in /dev/shm); pass it to
 * every rank (e.g. SCM_RIGHTS), each of which calls tc_init_fd. */
int tc_segment_create(int nranks, const int *pus, const char *rules_path, int *fd_out);
/* tc_segment_create with each rank's binding for the ranks not bound to one
 * PU: sets[r * words .. (r + 1) * words - 1] is rank r's CPU mask (bit k of
 * word w: the PU of OS index 64 w + k; all zero: unknown), so that the
 * collectives' near order (tc_near_order) can group ranks bound to a
 * package, a NUMA node or a cache each. sets NULL or words 0: none given. */
int tc_segment_create_sets(int nranks, const int *pus, const uint64_t *sets, int words,
                           const char *rules_path, int *fd_out);
/* Joins as `rank` the job of segment descriptor fd (from tc_segment_create)
 * and waits for all ranks (at most TOPOCOMM_TIMEOUT seconds), like tc_init.
 * fd is closed in every case. */
int tc_init_fd(int fd, int rank);
/* Rank / number of ranks (>= 0), or a negative error code. */
int tc_rank(void);
int tc_size(void);
int tc_send(const void *buf, size_t len, int dst, int tag);
/* status may be NULL. src may be TC_ANY_SOURCE, tag TC_ANY_TAG. */
int tc_recv(void *buf, size_t cap, int src, int tag, tc_status *status);
/* Non-blocking: buf must stay valid and untouched until tc_wait/tc_test
 * completes the request. */
int tc_isend(const void *buf, size_t len, int dst, int tag, tc_request *req);
int tc_irecv(void *buf, size_t cap, int src, int tag, tc_request *req);
/* Completes *req and sets it to TC_REQUEST_NULL; status may be NULL. */
int tc_wait(tc_request *req, tc_status *status);
/* *flag = 1 when complete (then *req = TC_REQUEST_NULL), else 0. */
int tc_test(tc_request *req, int *flag, tc_status *status);
/* Status of the first matching message that has arrived, not yet received. */
int tc_probe(int src, int tag, tc_status *status);
int tc_iprobe(int src, int tag, int *flag, tc_status *status);
int tc_barrier(void);

/* ---- Collectives (docs/capi.md) ------------------------------------------
 * Every rank calls the same collectives in the same order with the same
 * sizes. Reductions combine (lower ranks) op (higher ranks) along a tree
 * fixed by the job size: the same bits on every run and every rank. */
enum { TC_INT32 = 1, TC_INT64, TC_UINT64, TC_FLOAT, TC_DOUBLE };
enum { TC_SUM = 1, TC_PROD, TC_MIN, TC_MAX }; /* integers wrap */
int tc_bcast(void *buf, size_t len, int root);
/* sbuf NULL: in place (from rbuf). */
int tc_allreduce(const void *sbuf, void *rbuf, size_t count, int dtype, int op);
/* rbuf ignored (may be NULL) except at root; in place only at root. */
int tc_reduce(const void *sbuf, void *rbuf, size_t count, int dtype, int op, int root);
/* Prefix reductions: rank r gets ranks 0..r's (tc_scan) or 0..r-1's
 * (tc_exscan: rank 0's rbuf is not written); sbuf NULL: in place. */
int tc_scan(const void *sbuf, void *rbuf, size_t count, int dtype, int op);
int tc_exscan(const void *sbuf, void *rbuf, size_t count, int dtype, int op);
/* sbuf: size x count elements; rank r's rbuf (count elements) gets block r
 * of the reduction. sbuf NULL: in place, rbuf holds size x count elements
 * and its first block gets the result. */
int tc_reduce_scatter_block(const void *sbuf, void *rbuf, size_t count, int dtype, int op);
/* rbuf: size x len bytes, block r from rank r; sbuf NULL: in place. */
int tc_allgather(const void *sbuf, size_t len, void *rbuf);
/* sbuf, rbuf: size x len bytes; block d of sbuf goes to rank d. */
int tc_alltoall(const void *sbuf, size_t len, void *rbuf);
/* The root's rbuf / sbuf: size x len bytes (ignored elsewhere). */
int tc_gather(const void *sbuf, size_t len, void *rbuf, int root);
int tc_scatter(const void *sbuf, size_t len, void *rbuf, int root);
/* The v variants: block r is lens[r] bytes from byte displs[r] of the
 * buffer (size entries each; blocks written may not overlap). At a
 * non-root, the root-only buffer and table are ignored (may be NULL). */
int tc_gatherv(const void *sbuf, size_t len, void *rbuf, const size_t *lens,
               const size_t *displs, int root);
int tc_scatterv(const void *sbuf, const size_t *lens, const size_t *displs, void *rbuf,
                size_t len, int root);
/* The same table on every rank; sbuf NULL: in place (from rank r's block). */
int tc_allgatherv(const void *sbuf, size_t len, void *rbuf, const size_t *lens,
                  const size_t *displs);
int tc_alltoallv(const void *sbuf, const size_t *slens, const size_t *sdispls, void *rbuf,
                 const size_t *rlens, const size_t *rdispls);

/* ---- Extended transport API (used by the MPI accelerator, docs/capi.md) --
 * Matching contexts: a message sent in context ctx (0..65534; 65535 is the
 * collectives') matches only
 * receives and probes of the same context; the plain functions above use
 * context 0. */
#define TC_SEND_SYNC 1 /* flags: the send completes only once matched */
/* flags: the receiver is waiting for this message (blocked in its receive,
 * as a broadcast's or a reduction's member is). Within the sizes where this
 * machine's rules answer a ping-pong by rendezvous (lone_rendezvous_min up
 * to the eager limit: the receiver's single copy measured faster than an
 * eager message's two copies), the message goes by rendezvous and the
 * receiver reads it once; the send then completes only once it is read (a
 * sender that comes first waits for its receiver). Elsewhere no effect.
 * Other flag bits are refused (TC_ERR_INVALID). */
#define TC_SEND_WAITED 2
/* The handle of a send that completed when it was posted (an inline or
 * eager message pushed at once): waiting on it returns at once, and a
 * caller may treat it as complete without waiting. */
#define TC_REQUEST_DONE ((tc_request)0xFFFFFFFFu)
/* tc_init_fd, but the communicator belongs to the process: any thread may
 * call, one call at a time (an overlapping call fails with
 * TC_ERR_INVALID_ARGUMENT). */
int tc_init_fd_shared(int fd, int rank);
/* promise != 0: the caller promises that its calls on the process-wide
 * communicator never overlap and that whatever hands them from one thread
 * to another orders them (a mutex, release/acquire, a join); the overlap
 * check (a locked instruction per call) is then skipped, and an overlapping
 * call is a data race instead of an error. 0 withdraws it. Returns 0. */
int tc_set_serialized(int promise);
/* How long a wait may see no progress before TC_ERR_TIMEOUT; seconds <= 0:
 * never (dead or finalized peers are still detected). */
int tc_set_timeout(double seconds);
int tc_isend_x(const void *buf, size_t len, int dst, int tag, int ctx, int flags,
               tc_request *req);
int tc_send_x(const void *buf, size_t len, int dst, int tag, int ctx, int flags);
/* Sends len bytes at once when they can go without a rendezvous (inline in a
 * cell of the ring, or eager through a free slot) and nothing is queued ahead
 * to dst: returns 1 when sent (complete, no request), 0 when not and nothing
 * happened (above the eager size, messages queued, ring or slots full, or
 * arguments tc_isend_x would refuse: take tc_isend_x, which sends it or
 * reports the error), a negative code only without a communicator. */
int tc_send_now_x(const void *buf, size_t len, int dst, int tag, int ctx);
int tc_irecv_x(void *buf, size_t cap, int src, int tag, int ctx, tc_request *req);
/* tc_irecv_x that says whether the receive completed at posting (its
 * message was already there): *flag = 1, status filled, *req =
 * TC_REQUEST_NULL (nothing to wait for); else *flag = 0 and *req is pending
 * (a receive that failed, e.g. truncated, is pending too: its wait says so). */
int tc_irecv_now_x(void *buf, size_t cap, int src, int tag, int ctx, tc_request *req, int *flag,
                   tc_status *status);
/* Takes the next message from src (tag, ctx) into buf when it is already
 * there and nothing posted or unexpected comes before it in MPI order; never
 * posts, drains or waits. *flag = 1: taken (status filled); 0: not there yet
 * (try again); -1: post the receive instead (something comes before it, its
 * message is another receive's, a rendezvous or longer than cap, or an
 * argument tc_irecv_x would refuse). For a caller about to wait for
 * receives it has not posted yet (the MPI accelerator's lazy receives). */
int tc_take_now_x(void *buf, size_t cap, int src, int tag, int ctx, int *flag, tc_status *status);
/* Blocking receive for at most budget_s seconds (<= 0: no limit): *flag = 1
 * when received (status filled), 0 when the budget ran out (nothing
 * received, nothing left posted). A message longer than cap fills the status
 * (count = its length) and returns TC_ERR_TRUNCATED. */
int tc_recv_x(void *buf, size_t cap, int src, int tag, int ctx, double budget_s, int *flag,
              tc_status *status);
/* Waits for *req at most budget_s seconds (<= 0: no limit): *flag = 1 when
 * complete (*req = TC_REQUEST_NULL), else 0 and *req stays valid. */
int tc_wait_for(tc_request *req, double budget_s, int *flag, tc_status *status);
/* Waits for reqs[0..n) in turn, each at most budget_s seconds (<= 0: no
 * limit), returning at the first one not complete in its budget. Each one
 * that completed or failed becomes TC_REQUEST_NULL with sts[i] filled and
 * rcs[i] its outcome (TC_OK or an error code, e.g. TC_ERR_TRUNCATED); the
 * others keep their handle; TC_REQUEST_NULL entries are skipped. *left:
 * how many are still pending. */
int tc_wait_all_x(size_t n, tc_request *reqs, tc_status *sts, int *rcs, double budget_s,
                  size_t *left);
int tc_iprobe_x(int src, int tag, int ctx, int *flag, tc_status *status);
/* blocked != 0: this rank is about to block in another library's call and
 * will not answer through the transport until tc_note_blocked(0); peers
 * waiting for it yield their CPU meanwhile instead of spinning. */
int tc_note_blocked(int blocked);
/* 1 when some rank of this node reads heartbeats (one that may share its
 * CPU), so tc_note_blocked has an effect; 0 when none does (the caller may
 * skip tc_note_blocked altogether); a negative code without a communicator. */
int tc_beats_watched_x(void);
/* The smallest eager limit (largest message pushed without waiting for the
 * receiver) of any pair of this node's ranks, the same on every rank, in
 * *bytes (UINT64_MAX with one rank); a negative code for a NULL pointer or
 * without a communicator. */
int tc_eager_floor_x(uint64_t *bytes);
/* The smaller pipeline fragment of the two channels between ranks a and b
 * (the same on every rank: the plans are in the shared segment), in *bytes:
 * a piece size for a long transfer cut in pieces that should stay in the
 * pair's caches. A negative code for a NULL pointer, a rank out of range,
 * a == b, or without a communicator. */
int tc_pair_fragment_x(int a, int b, uint64_t *bytes);
/* The near order of n members (job ranks ranks[i], a communicator's members
 * in its rank order) for the trees of collectives: 1 when there is one, with
 * order[k] the member (an index into ranks) at position k and split[k]
 * (k >= 1) the depth of the lowest common ancestor of the PUs of the
 * members at positions k-1 and k (larger: nearer; split[0] = 0), so every
 * group sharing a locality level is a run of positions; 0 when there is
 * none (a member not bound to one PU, all pairs at one level, one member);
 * a negative code for a NULL pointer, a rank out of range or without a
 * communicator. The same answer on every rank. */
int tc_near_order(const int *ranks, int n, int *order, int *split);
/* The positions of a near order (its n splits) in the order a tree rooted
 * at position p takes them, into out (n ints): p first, then the rest of its
 * deepest group, then the rest of each enclosing group outwards, so a
 * binomial tree from out[0] keeps every group's subtree inside the group.
 * 0, or a negative code for a bad argument. Needs no communicator. */
int tc_near_rooted(const int *split, int n, int p, int *out);
/* 1 when tc_put_x can write into the other ranks' memory (single copy
 * works between every pair of the job: the same answer on every rank), 0
 * when not, a negative code without a communicator. */
int tc_can_put_x(void);
/* Writes len bytes at buf to address remote in rank dst's memory
 * (process_vm_writev), complete when it returns: 1 written, 0 not (single
 * copy off, or it failed here: said once on stderr, and every later call
 * returns 0; move the bytes by a message instead), a negative code for a
 * bad argument or a dead peer. The caller orders the write with the
 * peer's use of that memory (e.g. a message sent after it). */
int tc_put_x(int dst, const void *buf, size_t len, uint64_t remote);
/* Reads len bytes at address remote in rank src's memory into buf
 * (process_vm_readv), complete when it returns: 1 read, 0 not (as
 * tc_put_x: off, or failed here, said once, and every later tc_get_x and
 * tc_put_x returns 0; the bytes must come by message instead), a negative
 * code for a bad argument or a dead peer. The caller tells src (e.g. by a
 * message) when it may change that memory again. */
int tc_get_x(int src, void *buf, size_t len, uint64_t remote);
/* Cancels a receive no message has matched yet: *cancelled = 1 and
 * *req = TC_REQUEST_NULL; else *cancelled = 0 (complete it as usual).
 * Sends are never cancelled. */
int tc_cancel(tc_request *req, int *cancelled);
/* One pass of the progress engine. */
int tc_progress(void);

/* Collective lanes (docs/collectives.md, "Lanes"): per rank and lane a
 * sequence word with two inline slots (payloads up to 24 bytes) and two
 * data blocks of TC_LANE_DATA bytes in the segment;
 * lane l serves the collectives of the communicator of context l (0: the
 * plain API's tc_barrier). Every member calls the same lane collectives in
 * the same order. */
#define TC_LANES 64
#define TC_LANE_DATA 1024
/* Most members of a lane collective (each member reads every other's word). */
#define TC_LANE_FLAT_MAX 16
/* The epoch of the last collective on the lane at this rank. */
int tc_lane_epoch(int lane, uint64_t *epoch);
/* Gives the lane to a communicator of n transport ranks (this one
 * included), counting on from epoch (the members' largest tc_lane_epoch). */
int tc_lane_start(int lane, uint64_t epoch, const int *members, int n);
/* `only` of tc_lane_exchange: every member's arrival (TC_LANE_ALL), or
 * every member's in a collective where every member waits for every
 * member's, such as a barrier or an allreduce but not a reduce
 * (TC_LANE_ALL_BY_ALL: the wait may then end at a member already at a
 * later collective, without reading the others' lines). */
#define TC_LANE_ALL (-1)
#define TC_LANE_ALL_BY_ALL (-2)
/* The next collective, of len bytes per member: publishes data (NULL:
 * nothing), then
 * waits at most budget_s seconds (<= 0: no limit) for every member's
 * arrival (only < 0) or transport rank only's: *flag = 1 when complete,
 * else 0 (call again with the same arguments: it publishes once). reads !=
 * 0: this rank reads others' data, then calls tc_lane_done. Once complete,
 * blocks (NULL, or room for every member, one with only) holds where each
 * member's len bytes lie, in the communicator's rank order. */
int tc_lane_exchange(int lane, const void *data, size_t len, int reads, int only,
                     double budget_s, int *flag, const void **blocks);
/* Payload bytes per member of a pair collective. */
#define TC_PAIR_DATA 12
/* The next collective of a 2-member lane on its pair line (both members'
 * words and payloads on one cache line): publishes len bytes of data (at
 * most TC_PAIR_DATA; 0: a barrier), waits at most budget_s seconds (<= 0:
 * no limit) for the other member's, then copies its len bytes into out.
 * *flag = 1 when complete, else 0 (call again with the same arguments: it
 * publishes once). */
int tc_pair_exchange(int lane, const void *data, size_t len, void *out, double budget_s,
                     int *flag);
/* This rank has read the others' data of the current collective. */
int tc_lane_done(int lane);
/* Waits until every member has read this rank's blocks; frees the lane. */
int tc_lane_quiesce(int lane);
/* Transport rank `rank`'s staging area in the segment: its address in this
 * process into *at, its length (the same for every rank: 2 MiB) into *bytes. Every member
 * of a large collective may read and write the others' areas; the caller
 * orders those accesses (barriers around each use) and uses its own area
 * for one collective at a time. */
int tc_stage(int rank, void **at, size_t *bytes);

#ifdef __cplusplus
}
#endif
#endif /* TOPOCOMM_H */
