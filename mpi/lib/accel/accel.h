/* Internal interface of the topocomm MPI accelerator (libtopocomm-accel.so,
 * docs/commands/accel.md). Preloaded into an unmodified MPI application, it
 * sends point-to-point messages between two ranks of one node through
 * topocomm's shared-memory transport and everything else through PMPI_.
 *
 * Routing rule (the same on every rank, so a pair of ranks always uses one
 * path per communicator and MPI's non-overtaking order holds): a message on
 * a registered communicator (comm.c) whose peer is on this node goes
 * through the transport in the communicator's matching context; a message
 * to a rank on another node, to MPI_PROC_NULL, or on an unregistered
 * communicator (intercommunicators, MPI_COMM_SELF, ...) goes through PMPI_.
 *
 * Single-threaded by contract: the library turns itself off when the
 * application asks for MPI_THREAD_MULTIPLE (state.c). */
#ifndef TOPOCOMM_ACCEL_H
#define TOPOCOMM_ACCEL_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "../../../include/topocomm.h"

/* ---- Global state (state.c) ---------------------------------------------- */
struct acc_stats {
    uint64_t tc_msgs, tc_bytes;       /* sent through the transport */
    uint64_t plain_msgs, plain_bytes; /* sent through PMPI_ by the wrappers */
    uint64_t tc_recvs, plain_recvs;   /* receives completed per path */
    uint64_t coll_tc, coll_plain;     /* collectives per path (coll.c) */
    uint64_t coll_lane;               /* of coll_tc: through the lanes */
    uint64_t coll_put_bytes;          /* written into members' results (tc_put_x) */
    uint64_t coll_staged_bytes;       /* copied into this rank's staging area (coll.c) */
    uint64_t coll_near;               /* trees run along a near order (coll.c) */
};

struct acc_global {
    int on;           /* the transport is up: accelerate */
    int world_rank, world_size;
    int node_rank, node_size;
    int nodes;        /* distinct nodes in MPI_COMM_WORLD */
    int *node_of;     /* world rank -> node id (world rank of its node rank 0) */
    int *noderank_of; /* world rank -> transport rank on its node */
    int verbose;
    int lazy;         /* receives posted lazily (TOPOCOMM_ACCEL_LAZY, p2p.c) */
    int note_blocked; /* a local peer reads heartbeats: say when we block in PMPI */
    MPI_Comm node_comm;
    struct acc_stats stats;
    /* Operations of ours started and not complete: while there are any, a
     * blocking PMPI call could starve them (the transport progresses only
     * inside our calls), so blocking calls become non-blocking ones plus a
     * polling loop (block.c). */
    long outstanding;
};
/* Hidden (as the other hot globals below): read RIP-relative, not through
 * the GOT, on every call. */
#define ACC_HIDDEN __attribute__((visibility("hidden")))
extern struct acc_global acc ACC_HIDDEN;

/* Drives PMPI progress (remote messages, non-blocking collectives) while
 * a wait on the transport is in progress. */
void acc_mpi_progress(void);
/* Budget of one wait slice on the transport before PMPI progress (s). */
#define ACC_SLICE 50e-6

/* ---- Communicators (comm.c) ---------------------------------------------- */
/* Point-to-point context ids are 1..ACC_NCTX-1 (0: the plain tc_* API); a
 * communicator's collectives use its id + ACC_NCTX. */
#define ACC_NCTX 16384
/* A pick between two ways per size class (log2 of the bytes), timed on a
 * communicator's first calls of the class (coll.c, trial_record). */
struct acc_pick {
    double best[2]; /* per way: the sum of the trials' times, seconds */
    unsigned char calls, choice;
    unsigned char run[2]; /* calls of each way's trial run (coll.c run_of); 0: not set yet */
};

typedef struct acc_comm {
    MPI_Comm comm;
    int ctx;           /* matching context in the transport */
    int size;
    int *tc_rank;      /* comm rank -> transport rank on this node, -1 if remote */
    int *comm_rank;    /* transport rank -> comm rank, -1 if not a member */
    int mixed;         /* some member is on another node */
    /* This node's members, for collectives (coll.c): their transport ranks
     * in comm rank order; the first is the node's leader. */
    int nlocal, my_local;
    int *local_tc;
    /* Mixed communicators only (else NULL / MPI_COMM_NULL): comm rank ->
     * comm rank of its node's leader, comm rank -> rank in `leaders` (-1 if
     * not a leader), and the communicator of the node leaders. */
    int *leader_of, *leaders_rank;
    MPI_Comm leaders;
    /* The transport's collective lane of this communicator (its context),
     * or -1: small collectives through flags in the segment (coll.c).
     * lane_flat: the members' words (barriers, small reductions and
     * broadcasts); lane_pair: two members' pair line (barriers, and with
     * a CPU per member allreduces of up to TC_PAIR_DATA bytes where the
     * trials pick it: pickp). */
    int lane, lane_flat, lane_pair;
    /* Two members with a CPU each (lane_pair without lane_flat), barriers
     * (0) and allreduces of up to TC_PAIR_DATA bytes (1): the pair line
     * (way 0) or one message each way (way 1), timed on the first calls
     * (coll.c, pair_trial_end). */
    struct acc_pairpick {
        double start, best[2]; /* the current block's start; per way, its fastest block, s */
        unsigned short calls;
        unsigned char picked, choice;
    } pickp[2];
    /* The near order of an all-local communicator's members (coll.c,
     * acc_coll_near_setup; NULL without one): near_tc[k] is the transport
     * rank at position k, near_split[k] the depth at which positions k-1
     * and k part, near_pos[comm rank] its position, near_me this member's.
     * rooted_tc: the order rooted at comm rank rooted_root (-1: none yet),
     * this member at rooted_me. */
    int *near_tc, *near_split, *near_pos, near_me;
    int *rooted_tc, rooted_root, rooted_me;
    struct acc_req *deferred_head, *deferred_tail; /* receives held back (p2p.c) */
    struct acc_comm *next_queued; /* the next communicator with held-back receives (p2p.c) */
    unsigned nbc_seq; /* non-blocking collectives started on it (nbc.c) */
    /* Requests bound to it (acc_req_bind) and not released yet: a
     * communicator freed by MPI_Comm_free while some are pending is
     * retired (out of the lookup, its context still reserved) until the
     * last one is released, as MPI lets pending operations complete. */
    int holds;
    int retired;
    /* Large allreduces per size class: the way this communicator uses
     * among those that apply (coll.c, reduction_large: the whole exchange,
     * halves, pieces, blocks, blocks put, gets, staged), timed on its
     * first calls of the class. Room for 5: the most that apply to one call
     * (two members: whole, halves, pieces, gets, staged; ar_ways). */
    struct acc_pickw {
        double sum[5];          /* per way: this member's timed trial calls, seconds */
        double best[5];         /* per way: this member's fastest timed trial call, seconds */
        unsigned char ways[5];  /* the ways tried, in trial order (coll.c enum ar_way) */
        unsigned char nways;    /* 0: no call of the class yet */
        unsigned char calls, run, choice; /* run 0: not set yet; choice: index in ways */
    } pickar[64];
    /* Reduces of three or more members by blocks where gets apply
     * (acc_coll_by_gets), per size class: the way picked among blocks,
     * blocks put and gets, timed on the first calls (coll.c,
     * reduction_large). */
    struct acc_pickw pickrl[64];
    /* Crowded broadcasts under Open MPI, per size class: the transport's
     * tree (0) or Open MPI's own (1), timed on the first calls
     * (coll.c, bcast_trial). */
    struct acc_pick pickb[64];
    /* Crowded reduces above the transport's eager size, per size class:
     * straight to the root (0) or by blocks (1), timed on the first calls
     * (coll.c, reduce_trial). */
    struct acc_pick pickr[64];
    /* Crowded allgathers and alltoalls of blocks beyond the transport's
     * eager size under Open MPI, per size class of a block: the transport
     * (0) or Open MPI's own (1), timed on the first calls (coll.c,
     * block_picks). */
    struct acc_pick pickg[64], picka[64];
} acc_comm;

/* The registered communicator `comm`, or NULL (then: plain MPI). */
acc_comm *acc_comm_find_slow(MPI_Comm comm);
extern acc_comm *acc_comm_last ACC_HIDDEN; /* the last one found */
/* Inline for the last one found: every call of the plain-MPI path looks
 * its communicator up, and a call cost as much as the rest of the check. */
static inline acc_comm *acc_comm_find(MPI_Comm comm) {
    acc_comm *c = acc_comm_last;
    return c && c->comm == comm ? c : acc_comm_find_slow(comm);
}
/* Registers a new intracommunicator (collective over it); NULL/inter: no-op. */
void acc_comm_register(MPI_Comm comm);
void acc_comm_unregister(MPI_Comm comm);
/* Frees a retired communicator whose last request was released. */
void acc_comm_retire_done(acc_comm *c);
/* Transport rank of comm rank r, or -1 when r is not on this node. */
static inline int acc_local(const acc_comm *c, int r) {
    return (r >= 0 && r < c->size) ? c->tc_rank[r] : -1;
}
/* Calls the communicator's error handler with `code` (not MPI_SUCCESS). */
int acc_error_call(MPI_Comm comm, int code);
/* Calls the communicator's error handler with `code` and returns it. */
static inline int acc_error(MPI_Comm comm, int code) {
    return code == MPI_SUCCESS ? code : acc_error_call(comm, code);
}

/* ---- Datatypes (dtype.c) ------------------------------------------------- */
/* A message's bytes: contiguous in the user buffer (tmp == NULL, data
 * points into it) or packed into tmp (malloc'd). */
struct acc_msg {
    const void *data;
    size_t len;
    void *tmp;
};
/* The layout of the last datatype seen (dtype.c): three PMPI queries per
 * message cost as much as a small message itself. MPI_Type_free clears it
 * (a freed handle may come back for another type). */
struct acc_dtype_cache {
    int valid;
    MPI_Datatype type;
    int size;
    MPI_Aint tlb, text, ext;
};
extern struct acc_dtype_cache acc_dt_last;
/* Loads `type` into acc_dt_last (0), or -1 when it is invalid. */
int acc_dt_load(MPI_Datatype type);
/* Whether `count` elements of `type` are one contiguous run of bytes (1),
 * not (0), or `type` is invalid (-1); *lb: offset of the first byte from
 * the buffer address, *bytes: their number. Inline: the last datatype
 * again is the common case. */
static inline int acc_contiguous(int count, MPI_Datatype type, MPI_Aint *lb, size_t *bytes) {
    if ((!acc_dt_last.valid || acc_dt_last.type != type) && acc_dt_load(type) != 0) return -1;
    int size = acc_dt_last.size;
    *bytes = (size_t)size * (size_t)(count > 0 ? count : 0);
    if (size == 0 || count <= 0) {
        *lb = 0;
        return 1;
    }
    *lb = acc_dt_last.tlb;
    return acc_dt_last.text == size && (count == 1 || acc_dt_last.ext == size);
}
/* Bytes of `count` elements of `type` (0 for an invalid type). */
size_t acc_bytes(int count, MPI_Datatype type);
/* The common case of acc_pack and acc_recv_area, inline: the last datatype
 * again, `count` of it contiguous. 0: take the full path. */
static inline int acc_msg_fast(const void *buf, int count, MPI_Datatype type,
                               struct acc_msg *m) {
    const struct acc_dtype_cache *d = &acc_dt_last;
    if (!d->valid || d->type != type || count <= 0 || d->size <= 0 || d->text != d->size ||
        (count != 1 && d->ext != d->size))
        return 0;
    m->data = (const char *)buf + d->tlb;
    m->len = (size_t)d->size * (size_t)count;
    m->tmp = NULL;
    return 1;
}
/* Packing areas (struct acc_msg's tmp): malloc'd, and on release kept for
 * the next message (dtype.c) instead of freed. Any of them may still be
 * given to free(). */
void *acc_tmp_alloc(size_t bytes);
void acc_tmp_free(void *p);
int acc_pack_full(const void *buf, int count, MPI_Datatype type, MPI_Comm comm,
                  struct acc_msg *m);
int acc_recv_area_full(void *buf, int count, MPI_Datatype type, struct acc_msg *m);
/* The bytes of a send: the user's buffer when contiguous, else packed. */
static inline int acc_pack(const void *buf, int count, MPI_Datatype type, MPI_Comm comm,
                           struct acc_msg *m) {
    return acc_msg_fast(buf, count, type, m) ? MPI_SUCCESS : acc_pack_full(buf, count, type, comm, m);
}
/* Where `count` elements of `type` are received: into the user buffer when
 * contiguous, else into a temporary (unpacked by acc_unpack). */
static inline int acc_recv_area(void *buf, int count, MPI_Datatype type, struct acc_msg *m) {
    return acc_msg_fast(buf, count, type, m) ? MPI_SUCCESS : acc_recv_area_full(buf, count, type, m);
}
int acc_unpack(struct acc_msg *m, size_t got, void *buf, int count, MPI_Datatype type,
               MPI_Comm comm);
/* Copies a status into the application's, leaving its MPI_ERROR as it
 * was (single-completion calls never set it; the multi-completion ones set
 * it themselves). */
static inline void acc_status_copy(MPI_Status *dst, const MPI_Status *src) {
    if (dst == MPI_STATUS_IGNORE) return;
    int keep = dst->MPI_ERROR;
    *dst = *src;
    dst->MPI_ERROR = keep;
}
/* Statuses of the last two message sizes seen (count set through PMPI, as
 * the MPI's status layout is its own), and the making of a new one. */
extern MPI_Status acc_status_tmpl[2];
extern size_t acc_status_tmpl_bytes[2];
const MPI_Status *acc_status_tmpl_make(size_t bytes);
/* Fills an MPI status for a message of `bytes` bytes, leaving MPI_ERROR as
 * it was when err is MPI_SUCCESS. */
static inline void acc_status(MPI_Status *st, int source, int tag, size_t bytes, int err) {
    if (st == MPI_STATUS_IGNORE) return;
    const MPI_Status *t = bytes == acc_status_tmpl_bytes[1]   ? &acc_status_tmpl[1]
                          : bytes == acc_status_tmpl_bytes[0] ? &acc_status_tmpl[0]
                                                              : acc_status_tmpl_make(bytes);
    int keep = st->MPI_ERROR;
    *st = *t;
    st->MPI_SOURCE = source;
    st->MPI_TAG = tag;
    st->MPI_ERROR = err != MPI_SUCCESS ? err : keep;
}

/* ---- Requests (req.c) ---------------------------------------------------- */
enum acc_kind {
    K_SEND,   /* transport send */
    K_RECV,   /* transport receive */
    K_PLAIN,  /* a PMPI request held by one of ours (resolved any-source) */
    K_DEFER,  /* receive held back behind an any-source receive (p2p.c) */
    K_DONE,   /* completed when created (buffered send) */
    K_COLL,   /* a non-blocking collective's schedule (nbc.c) */
    K_LAZY,   /* receive recorded by MPI_Irecv, not yet posted (acc_settle) */
};

typedef struct acc_req {
    enum acc_kind kind;
    int is_send, persistent, active, done, cancelled, freed, sync, buffered;
    int err;
    tc_request tc;
    MPI_Request plain;
    acc_comm *c;
    MPI_Comm comm;
    /* User arguments (kept for persistent restarts and unpacking). */
    void *buf;
    int count;
    MPI_Datatype type;
    int peer, tag;
    /* A duplicate of `type` held while a packed receive is in flight: the
     * application may free its datatype before the receive completes. */
    MPI_Datatype held;
    struct acc_msg msg;
    int counted;    /* included in acc.outstanding */
    int owns_type;  /* `type` is a duplicate of the persistent request's own */
    MPI_Status st;           /* final status, when a PMPI call gave it (st_mpi) */
    int st_mpi;
    int st_src, st_tag, st_err; /* else the outcome, made a status on demand */
    size_t st_bytes;
    struct acc_nbc *nbc;     /* K_COLL: the schedule (nbc.c) */
    struct acc_req *next;    /* deferred queue / free list */
    int index;
    /* The one request that stands for every send complete at posting
     * (acc_sent_handle): never released, its state never changes. */
    int shared;
} acc_req;

acc_req *acc_req_new(void);

/* Receives posted lazily (p2p.c). MPI_Irecv of a contiguous message on a
 * communicator all on this node records the receive (K_LAZY) and returns;
 * the next call into the accelerator gives the recorded receives to the
 * transport in their order, each taking its message at once when it is
 * already here. Matching and progress happen only inside our calls, so a
 * receive posted at the next call matches exactly what it would have
 * matched at MPI_Irecv, while a window of receives waited for together
 * takes messages that arrived meanwhile without a transport request each
 * (docs/commands/accel.md). Every entry point calls acc_settle() first,
 * except the send paths that push a message at once (they match nothing
 * and progress nothing) and MPI_Irecv itself. */
extern acc_req *acc_lazy_head ACC_HIDDEN;
void acc_lazy_post(int waiting);
static inline void acc_settle(void) {
    if (acc_lazy_head) acc_lazy_post(0);
}
/* acc_settle for a call about to wait (MPI_Wait, MPI_Waitall): each
 * recorded receive first looks a bounded number of times for its message
 * to take it as it arrives, before it is posted (p2p.c LAZY_LOOKS). */
static inline void acc_settle_to_wait(void) {
    if (acc_lazy_head) acc_lazy_post(1);
}
/* Records r's outcome (source, tag, bytes, error) without building a status. */
static inline void acc_note(acc_req *r, int src, int tag, size_t bytes, int err) {
    r->st_mpi = 0;
    r->st_src = src;
    r->st_tag = tag;
    r->st_bytes = bytes;
    r->st_err = err;
}
/* Writes r's status into the application's (nothing for MPI_STATUS_IGNORE). */
static inline void acc_status_out(const acc_req *r, MPI_Status *out) {
    if (out == MPI_STATUS_IGNORE) return;
    if (r->st_mpi) acc_status_copy(out, &r->st);
    else acc_status(out, r->st_src, r->st_tag, r->st_bytes, r->st_err);
    if (r->cancelled) PMPI_Status_set_cancelled(out, 1);
}
/* Marks r done (and no longer outstanding). */
static inline void acc_set_done(acc_req *r) {
    r->done = 1;
    if (r->counted) {
        r->counted = 0;
        acc.outstanding--;
    }
}
/* Counts r as outstanding until acc_set_done. */
static inline void acc_count(acc_req *r) {
    if (!r->counted) {
        r->counted = 1;
        acc.outstanding++;
    }
}
/* Returns r to the free list (the shared completed-send request stays);
 * acc_req_release_full also drops what r holds (a datatype, a packing
 * buffer, a collective's schedule). */
void acc_req_release_full(acc_req *r);
extern acc_req *acc_free_list;
/* Binds r to communicator c for r's lifetime (see acc_comm.holds). */
static inline void acc_req_bind(acc_req *r, acc_comm *c) {
    r->c = c;
    c->holds++;
}
/* Ends r's binding, at its release. */
static inline void acc_req_unbind(acc_req *r) {
    acc_comm *c = r->c;
    if (!c) return;
    r->c = NULL;
    if (--c->holds == 0 && c->retired) acc_comm_retire_done(c);
}
static inline void acc_req_release(acc_req *r) {
    /* Inline for the common case: a window of small messages releases a
     * request per message, and a call cost as much as the rest. */
    acc_req_unbind(r);
    if (r->shared || r->held != MPI_DATATYPE_NULL || r->owns_type || r->msg.tmp || r->nbc) {
        acc_req_release_full(r);
        return;
    }
    r->next = acc_free_list;
    r->kind = K_DONE;
    r->freed = 1;
    acc_free_list = r;
}

/* Handles of ours: values no MPI library ever produces (Open MPI: an odd
 * pointer; MPICH: a handle whose kind bits say "invalid"), so every
 * request-taking function can tell ours from plain ones (req.c). The
 * lookups below are inline: a window of small messages makes several per
 * message. */
#define ACC_REQ_CHUNK 256
extern acc_req **acc_req_chunks;
extern int acc_req_nchunks;
#if defined(OPEN_MPI)
#define ACC_HANDLE_OF(i) ((MPI_Request)(uintptr_t)(((uintptr_t)(i) << 1) | 1))
#define ACC_IS_OURS(h) (((uintptr_t)(h)) & 1)
#define ACC_INDEX_OF(h) ((int)((uintptr_t)(h) >> 1))
#elif defined(MPICH)
/* MPICH handles carry their kind in bits 30-31; kind 0 is "invalid". */
#define ACC_HANDLE_OF(i) ((MPI_Request)(0x10000000 | (i)))
#define ACC_IS_OURS(h) ((((unsigned)(h)) >> 28) == 1)
#define ACC_INDEX_OF(h) ((int)(((unsigned)(h)) & 0x0fffffff))
#else
#error "unknown MPI implementation"
#endif
/* The request behind a handle of ours, or NULL for a plain MPI handle. */
static inline acc_req *acc_req_of(MPI_Request h) {
    if (h == MPI_REQUEST_NULL || !ACC_IS_OURS(h)) return NULL;
    int i = ACC_INDEX_OF(h);
    if (i / ACC_REQ_CHUNK >= acc_req_nchunks) return NULL;
    return &acc_req_chunks[i / ACC_REQ_CHUNK][i % ACC_REQ_CHUNK];
}
static inline MPI_Request acc_handle(acc_req *r) { return ACC_HANDLE_OF(r->index); }
/* The handle of a send that completed when it was posted (an inline or
 * eager message pushed into the ring): one shared request, done from the
 * start, which every wait, test, free and cancel finishes like any done
 * send without releasing it. A window of small sends then costs no
 * request set-up, completion or release per message. MPI_REQUEST_NULL
 * when it could not be made (no memory): the caller takes the full path. */
extern MPI_Request acc_sent;
MPI_Request acc_sent_make(void);
static inline MPI_Request acc_sent_handle(void) {
    return acc_sent != MPI_REQUEST_NULL ? acc_sent : acc_sent_make();
}
/* Polls r (no blocking): 1 when done (status stored in r->st). */
int acc_req_poll(acc_req *r);
/* Blocks until r is done (slices + PMPI progress); returns r->err. */
int acc_req_wait_full(acc_req *r);
static inline int acc_req_wait(acc_req *r) { return r->done ? r->err : acc_req_wait_full(r); }
/* Waits for the transport requests among rs[0..n) (NULL entries: not ours)
 * with one call into the transport per slice for all of them, not one per
 * request (a window of small messages); the others are left to
 * acc_req_wait, which returns at once for those done here. */
void acc_req_wait_batch(acc_req *const rs[], int n);
/* Makes a done persistent request inactive (it may be started again). */
void acc_req_make_inactive(acc_req *r);
/* Finishes a done request for the caller: status out, handle released or
 * (persistent) made inactive; returns the MPI error code. */
static inline int acc_req_finish(acc_req *r, MPI_Request *h, MPI_Status *st) {
    int err = r->err;
    acc_status_out(r, st);
    if (r->persistent) {
        acc_req_make_inactive(r);
    } else {
        acc_req_release(r);
        *h = MPI_REQUEST_NULL;
    }
    return err;
}
/* Sends m's bytes to comm rank `peer` of c through the transport (flags:
 * TC_SEND_SYNC) into *t, counting them; a failure is said on stderr.
 * MPI_SUCCESS or MPI_ERR_OTHER. */
int acc_tc_send(acc_comm *c, const struct acc_msg *m, int peer, int tag, int flags,
                tc_request *t);
/* Starts the operation of a request (non-persistent at creation, persistent
 * at MPI_Start). */
int acc_req_start(acc_req *r);
/* Holds a duplicate of r's datatype until the receive is unpacked. */
void acc_hold_type(acc_req *r);
/* Posts r's receive on the transport from transport rank tc_src (or
 * TC_ANY_SOURCE) with `tag` (MPI tag or MPI_ANY_TAG). */
int acc_post_tc_recv(acc_req *r, int tc_src, int tag);
/* Progress on everything in the background: buffered sends, freed
 * requests, receives held back. */
void acc_progress(void);
/* Completes every background operation (Buffer_detach, Finalize). */
void acc_drain(void);
void acc_orphan(acc_req *r);

/* ---- Blocking PMPI calls (block.c) -------------------------------------- */
/* Around a blocking PMPI call: the helper thread drives the transport. */
void acc_block_begin(void);
void acc_block_end(void);
/* Around a blocking PMPI call: tells the transport peers this rank is
 * blocked elsewhere (their waits for it yield), and puts the helper on
 * duty when operations of ours are outstanding. Returns what
 * acc_blocking_exit needs. */
static inline int acc_blocking_enter(void) {
    if (!acc.on) return 0;
    /* Two transport calls per blocking PMPI call were most of the remote
     * path's overhead: made only when a local peer reads the heartbeat. */
    if (acc.note_blocked) tc_note_blocked(1);
    if (acc.outstanding <= 0) return 1;
    acc_block_begin();
    return 2;
}
static inline void acc_blocking_exit(int how) {
    if (how == 2) acc_block_end();
    if (how && acc.note_blocked) tc_note_blocked(0);
}
/* Whether a blocking PMPI call needs neither: nothing of ours is
 * outstanding and no local peer reads the heartbeat. */
static inline __attribute__((always_inline)) int acc_blocking_quiet(void) {
    return !acc.on || (!acc.note_blocked && acc.outstanding <= 0);
}
/* Whether a point-to-point call with peer `peer` on `comm` goes straight to
 * PMPI as it is: the communicator is the last one looked up, the peer is
 * on another node, nothing of ours is recorded or held back, nobody
 * counts, and for a `blocking` call nothing of ours is outstanding and no
 * local rank reads heartbeats (acc_blocking_quiet). No calls, so a wrapper whose
 * other paths are tail calls runs this one without a stack frame. */
static inline __attribute__((always_inline)) int acc_plain_now(MPI_Comm comm, int peer,
                                                              int blocking) {
    const acc_comm *c = acc_comm_last;
    return !acc.on ||
           (c && c->comm == comm && peer >= 0 && peer < c->size && c->tc_rank[peer] < 0 &&
            !c->deferred_head && !acc_lazy_head && !acc.verbose &&
            (!blocking || acc_blocking_quiet()));
}
/* `call` (a blocking PMPI call returning int) between the two; inline, and
 * when quiet the call alone (a tail call: no frame of ours around it), as
 * the plain-MPI path's latency is the MPI's own plus this. */
#define ACC_BLOCKING(call)                                                                       \
    (acc_blocking_quiet() ? (call) : ({                                                        \
        int how_ = acc_blocking_enter();                                                       \
        int rc_ = (call);                                                                      \
        acc_blocking_exit(how_);                                                               \
        rc_;                                                                                   \
    }))

/* ---- Point-to-point helpers (p2p.c) ------------------------------------- */
/* Waits on a transport request in slices, driving PMPI progress between. */
int acc_wait_tc(tc_request *r, tc_status *ts);
/* A buffered send to a local rank: the data is copied, the send completes
 * in the background. */
int acc_send_buffered(const void *buf, int count, MPI_Datatype type, acc_comm *c, int peer,
                      int tag);
/* Receive on a mixed communicator held back (any-source or behind one). */
void acc_defer(acc_req *r);
/* Resolves held-back receives of c whose path can now be chosen. */
void acc_resolve_deferred(acc_comm *c);
int acc_held_back(const acc_comm *c, int src, int tag);
/* PMPI_Type_free that also drops the cached layouts (dtype.c). */
int acc_type_free(MPI_Datatype *type);
int acc_any_deferred(void);
/* Removes r from its communicator's queue (MPI_Cancel): 1 if it was there. */
int acc_undefer(acc_req *r);

/* ---- Collectives (coll.c) ------------------------------------------------ */
/* Each runs the collective over the transport and returns 1 (the MPI
 * result in *rc) when `comm` is all on this node and the arguments suit,
 * else returns 0 without doing anything (the caller uses PMPI_). */
/* Reads TOPOCOMM_ACCEL_COLL_MAX and TOPOCOMM_ACCEL_COLL_HIER (at start-up). */
void acc_coll_init(void);
/* Hierarchical collectives on communicators spanning nodes (opt-in:
 * TOPOCOMM_ACCEL_COLL_HIER=1, docs/collectives.md). */
extern int acc_coll_hier;
/* Which communicators take the transport's lanes for small collectives
 * (TOPOCOMM_ACCEL_COLL_LANES: unset, crowded nodes only; 1 all; 0 none). */
enum { LANES_OFF, LANES_CROWDED, LANES_ALL };
extern int acc_coll_lanes;
/* Gives c its lane when it qualifies (collective over c's members). */
void acc_coll_lane_setup(acc_comm *c);
/* Gives c its near order when its members' PUs have one (coll.c). */
void acc_coll_near_setup(acc_comm *c);
int acc_coll_barrier(MPI_Comm comm, int *rc);
int acc_coll_bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm, int *rc);
int acc_coll_reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                    int root, MPI_Comm comm, int *rc);
int acc_coll_allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm, int *rc);
/* Equal-block collectives over the transport on all-local communicators
 * (the total within TOPOCOMM_ACCEL_COLL_MAX); 0: the caller runs PMPI_. */
int acc_coll_gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                    MPI_Datatype rtype, int root, MPI_Comm comm, int *rc);
int acc_coll_scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                     MPI_Datatype rtype, int root, MPI_Comm comm, int *rc);
int acc_coll_allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                       MPI_Datatype rtype, MPI_Comm comm, int *rc);
int acc_coll_alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                      MPI_Datatype rtype, MPI_Comm comm, int *rc);
/* collv.c: the v variants on every all-local communicator whatever the
 * counts (only the root knows them all), the reduce-scatters and scans
 * with coll.c's reduction rules; 0: the caller runs PMPI_. */
int acc_coll_gatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                     const int rcounts[], const int displs[], MPI_Datatype rtype, int root,
                     MPI_Comm comm, int *rc);
int acc_coll_scatterv(const void *sbuf, const int scounts[], const int displs[],
                      MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, int root,
                      MPI_Comm comm, int *rc);
int acc_coll_allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                        const int rcounts[], const int displs[], MPI_Datatype rtype,
                        MPI_Comm comm, int *rc);
int acc_coll_alltoallv(const void *sbuf, const int scounts[], const int sdispls[],
                       MPI_Datatype stype, void *rbuf, const int rcounts[], const int rdispls[],
                       MPI_Datatype rtype, MPI_Comm comm, int *rc);
int acc_coll_reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype type,
                                  MPI_Op op, MPI_Comm comm, int *rc);
int acc_coll_reduce_scatter(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype type,
                            MPI_Op op, MPI_Comm comm, int *rc);
int acc_coll_scan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm, int *rc);
int acc_coll_exscan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                    MPI_Comm comm, int *rc);

/* ---- Non-blocking collectives (nbc.c) ------------------------------------ */
/* MPI_Ibarrier, MPI_Ibcast, MPI_Iallreduce over the transport on all-local
 * communicators (a K_COLL request, *req); 0: the caller runs PMPI_. */
int acc_coll_ibarrier(MPI_Comm comm, MPI_Request *req, int *rc);
int acc_coll_ibcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm,
                    MPI_Request *req, int *rc);
int acc_coll_iallreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                        MPI_Comm comm, MPI_Request *req, int *rc);
/* Advances r's schedule, waiting up to budget s (0: test only); 1 when done. */
int acc_nbc_advance(acc_req *r, double budget);
/* Advances every unfinished schedule (acc_progress). */
void acc_nbc_progress(void);
/* Whether a non-blocking collective of ours is unfinished: waits on plain
 * requests then poll (wait.c) instead of blocking in the MPI. */
int acc_nbc_busy(void);
void acc_nbc_free(struct acc_nbc *b);

#endif
