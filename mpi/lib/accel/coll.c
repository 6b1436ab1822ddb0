/* Collectives over the transport for communicators whose members are all on
 * this node (issue 16's first step; docs/collectives.md): MPI_Barrier,
 * MPI_Bcast, MPI_Reduce and MPI_Allreduce. Each communicator's collective
 * messages travel in a context of their own (its point-to-point context +
 * ACC_NCTX), so they never match the application's messages, and the
 * transport's per-pair FIFO order pairs the k-th collective of two ranks.
 *
 * Reductions combine partial results in rank order only (lower ranks' block
 * on the left), with PMPI_Reduce_local's contract (acc_reduce_local: the
 * common predefined cases in place, the rest through PMPI_Reduce_local), so
 * every predefined and user operation, commutative or not, gives the same
 * bits on every run for a given communicator size, and the same bits on
 * every rank.
 *
 * On a node with more ranks than CPUs (or everywhere with
 * TOPOCOMM_ACCEL_COLL_LANES=1), small ones (up to TC_LANE_DATA bytes per
 * rank, communicators of up to TC_LANE_FLAT_MAX members all on this node)
 * skip the messages: each member
 * publishes its contribution in its block of the communicator's lane in the
 * segment and reads the others' (the transport's lanes.rs).
 *
 * Everything else (communicators spanning nodes, non-contiguous reduction
 * types, argument errors, the other collectives) goes to PMPI_, with the
 * progress helper of block.c when operations of ours are outstanding. */
#include "accel.h"
#include "coll.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    T_BARRIER = 1,
    T_BCAST,
    T_REDUCE,
    T_RESULT,
    T_ALLREDUCE,
    T_ROOT,
    T_GATHER,
    T_SCATTER,
    T_ALLGATHER,
    T_ALLTOALL,
    T_ADDR
};

/* Sends this small complete when posted (in a cell or an eager slot)
 * unless the channel is full; waiting for one cannot wait for the peer's
 * receive. */
#define XFER_EAGER 4096

/* Largest reduction (bytes per rank) and broadcast run over the transport;
 * larger ones go to the MPI's own algorithms (reduce-scatter, pipelines),
 * which the whole-vector trees here do not beat (docs/collectives.md).
 * TOPOCOMM_ACCEL_COLL_MAX (bytes) overrides both. */
#define RED_MAX_DEFAULT (16u << 10)
#define BCAST_MAX_DEFAULT (1u << 20)

static size_t red_max = RED_MAX_DEFAULT, bcast_max = BCAST_MAX_DEFAULT;
/* Reductions by blocks (reduce_split, acc_coll_reduce_blocks): no limit
 * of their own. */
size_t acc_coll_split_max = SIZE_MAX;
/* Whether TOPOCOMM_ACCEL_COLL_MAX set the limits: then they hold with two
 * members and on crowded nodes too (any_size). */
static int coll_max_set;

int acc_coll_hier, acc_coll_lanes;
/* TOPOCOMM_ACCEL_PAIR: the way of every two-member barrier and small
 * allreduce with a CPU per member (0: the pair line, 1: a message each
 * way), or -1: picked per communicator by trials (pair_trial_end). */
static int pair_force = -1;
/* The ways of a large allreduce (reduction_large). Two members: one
 * exchange of whole vectors, the halves (a reduce-scatter and an
 * allgather of halves), the halves by pieces (their reduced pieces put
 * into the other's result where single copy works), or gets (gets.c);
 * three or more: blocks by message, blocks whose reduced blocks are put
 * into the receivers' results, or gets; any number: through the staging
 * areas (reduce_staged). Every way folds each element in
 * member order, x_0 (op) (x_1 (op) (...)): the same bits whichever is
 * picked. */
enum ar_way { AR_WHOLE, AR_HALVES, AR_PIECES, AR_BLOCKS, AR_PUTS, AR_GETS, AR_STAGED, AR_NWAYS };
static const char *const ar_key[AR_NWAYS] = {"whole", "halves", "pieces", "blocks",
                                             "puts",  "gets",   "staged"};
static const char *const ar_name[AR_NWAYS] = {"whole exchange", "halves", "halves by pieces",
                                               "blocks", "blocks put", "gets", "staged"};
/* TOPOCOMM_ACCEL_ALLREDUCE=WAY: that way for every large allreduce it
 * applies to (the others picked as without it); -1 (unset): each
 * communicator picks per size class from its first calls. */
static int ar_forced = -1;
/* TOPOCOMM_ACCEL_PAIR_PIECE: bytes per piece of the two-member large
 * allreduce (0: whole halves); -1 (unset): the pair's pipeline fragment
 * (pair_piece). */
static long long pair_piece_set = -1;
/* TOPOCOMM_ACCEL_PUT=0: reduced data moves by message only: the two-member
 * allreduce by pieces swaps the reduced halves instead of putting each
 * reduced piece into the other member's result (pair_fold_pieces), and the
 * blocks' allreduce and reduce send the reduced blocks instead of putting
 * them (blocks_put); default 1. */
static int acc_put = 1;

/* Whether reduced data is put (acc_put and single copy working in the
 * job): the same answer on every member for the whole job, asked of the
 * transport once. */
static int puts_on(void) {
    static int can = -1;
    if (can < 0 && acc_put) {
        int r = tc_can_put_x();
        if (r >= 0) can = r == 1; /* negative: no transport yet, ask again */
    }
    return acc_put && can == 1;
}

/* TOPOCOMM_ACCEL_GETS=0: large reductions by messages (coll.c's blocks,
 * the two-member pair) also where single copy works. */
static int acc_gets = 1;

/* TOPOCOMM_ACCEL_STAGE=0: large reductions never through the staging
 * areas (reduce_staged); default 1 (one of the ways tried). */
static int acc_stage = 1;

/* TOPOCOMM_ACCEL_NEAR=0: the small collectives' trees in rank order, not
 * in the members' near order (acc_coll_near_setup). */
static int acc_near = 1;

/* Smallest reductions by gets (gets.c), bytes per member: below, the
 * exchange of addresses and the words at the end (two more rounds of
 * messages) cost more than the copies they save. Alternating rounds of
 * scripts/lib-ab.py on the 2-vCPU Intel Xeon VM (docs/collectives.md,
 * "Reductions by gets"): an allreduce of 4 crowded ranks took 28.2 us by
 * gets against 31.2 by blocks at 64 KiB, 22.8 against 22.0 at 32 KiB;
 * of 2 ranks 9.2 against 9.5-25.9 at 128 KiB (the pair's pieces), 5.8
 * against 5.6 at 64 KiB; a reduce of 4 crowded ranks 533 against 576 at 2
 * MiB, even at 1 MiB, 52 against 45 at 256 KiB (its non-roots, which
 * leave by blocks as soon as their blocks are sent, wait for every
 * member's word here). Two-member reduces stay with the pair's one
 * message (reduce_pair: 16 MiB in 1.64 ms against 1.72 by gets). The
 * reduce-scatters (whole vector, nothing put afterwards): 4 crowded
 * ranks, 512 KiB 59-77 against 64-68 us, 1 MiB even, 4 MiB 488-500
 * against 660; 2 ranks 256 KiB 8.4-8.6 against 8.5-9.7, 512 KiB 17-22
 * against 20-23 (std_collv, alternating jobs). */
enum {
    GETS_MIN = 64u << 10,
    GETS_MIN_PAIR = 128u << 10,
    GETS_REDUCE_MIN = 2u << 20,
    GETS_SCATTER_MIN = 1u << 20,
    GETS_SCATTER_MIN_PAIR = 256u << 10
};

/* acc_coll_by_gets (coll.h): the same answer on every member. */
int acc_coll_by_gets(int n, size_t bytes, int root) {
    if (!acc_gets || n < 2 || !puts_on()) return 0;
    if (root >= 0) return n > 2 && bytes >= GETS_REDUCE_MIN;
    if (root == GETS_NONE) return bytes >= (n == 2 ? GETS_SCATTER_MIN_PAIR : GETS_SCATTER_MIN);
    return bytes >= (n == 2 ? GETS_MIN_PAIR : GETS_MIN);
}

/* An on/off switch from the environment into *v (left as it is when
 * unset or empty; anything but 0 or 1 is said once, by world rank 0). */
static void on_off(const char *name, int *v) {
    const char *e = getenv(name);
    if (!e || !*e) return;
    if (!strcmp(e, "0") || !strcmp(e, "1"))
        *v = *e == '1';
    else if (acc.world_rank == 0)
        fprintf(stderr, "topocomm accel: %s='%s': expected 0 or 1; using %d\n", name, e, *v);
}

void acc_coll_init(void) {
    const char *aw = getenv("TOPOCOMM_ACCEL_ALLREDUCE");
    if (aw && *aw) {
        for (int w = 0; w < AR_NWAYS; w++)
            if (!strcmp(aw, ar_key[w])) ar_forced = w;
        if (ar_forced < 0 && acc.world_rank == 0)
            fprintf(stderr,
                    "topocomm accel: TOPOCOMM_ACCEL_ALLREDUCE='%s': expected whole, halves, "
                    "pieces, blocks, puts, gets or staged; picking per size from the first "
                    "calls\n",
                    aw);
    }
    const char *pp = getenv("TOPOCOMM_ACCEL_PAIR_PIECE");
    if (pp && *pp) {
        char *end;
        errno = 0;
        long long x = strtoll(pp, &end, 10);
        if (errno || *end || x < 0) {
            if (acc.world_rank == 0)
                fprintf(stderr,
                        "topocomm accel: TOPOCOMM_ACCEL_PAIR_PIECE='%s': expected a number of "
                        "bytes (0: whole halves); using the pair's pipeline fragment\n",
                        pp);
        } else {
            pair_piece_set = x;
        }
    }
    on_off("TOPOCOMM_ACCEL_PUT", &acc_put);
    on_off("TOPOCOMM_ACCEL_GETS", &acc_gets);
    on_off("TOPOCOMM_ACCEL_STAGE", &acc_stage);
    on_off("TOPOCOMM_ACCEL_NEAR", &acc_near);
    const char *h = getenv("TOPOCOMM_ACCEL_COLL_HIER");
    acc_coll_hier = h && !strcmp(h, "1");
    /* Unset: barriers and reductions on crowded nodes only. With a CPU per
     * rank the lanes were not faster than the message algorithms at 2
     * ranks on the 2-vCPU AMD EPYC VM; with 4 and 8 ranks on the 2 vCPUs
     * of the Intel Xeon VM they took 0.3-0.7x their time (barrier,
     * allreduce): one flag per member beat n - 1 messages each. Broadcasts
     * keep the messages there (8 B with 4 ranks: 0.23-0.26 against 0.40
     * us; docs/collectives.md, "Lanes"). 1: every small collective on
     * every node; 0: none. */
    const char *l = getenv("TOPOCOMM_ACCEL_COLL_LANES");
    acc_coll_lanes = !l || !*l            ? LANES_CROWDED
                     : !strcmp(l, "1")    ? LANES_ALL
                     : !strcmp(l, "0")    ? LANES_OFF
                                          : -1;
    if (acc_coll_lanes < 0) {
        if (acc.world_rank == 0)
            fprintf(stderr,
                    "topocomm accel: TOPOCOMM_ACCEL_COLL_LANES='%s': expected 0 (off) or 1 (every "
                    "node); using the lanes on crowded nodes only\n",
                    l);
        acc_coll_lanes = LANES_CROWDED;
    }
    const char *pw = getenv("TOPOCOMM_ACCEL_PAIR");
    pair_force = !pw || !*pw ? -1 : !strcmp(pw, "line") ? 0 : !strcmp(pw, "messages") ? 1 : -2;
    if (pair_force == -2) {
        if (acc.world_rank == 0)
            fprintf(stderr,
                    "topocomm accel: TOPOCOMM_ACCEL_PAIR='%s': expected line or messages; "
                    "picking by trials\n",
                    pw);
        pair_force = -1;
    }
    const char *v = getenv("TOPOCOMM_ACCEL_COLL_MAX");
    if (!v || !*v) return;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end) {
        if (acc.world_rank == 0)
            fprintf(stderr,
                    "topocomm accel: TOPOCOMM_ACCEL_COLL_MAX='%s' is not a byte count; using "
                    "%u and %u bytes\n",
                    v, RED_MAX_DEFAULT, BCAST_MAX_DEFAULT);
        return;
    }
    red_max = bcast_max = acc_coll_split_max = (size_t)x;
    coll_max_set = 1;
}

/* struct grp (the members a phase runs over): coll.h. */

static struct grp whole(const acc_comm *c) {
    struct grp g = {c->ctx + ACC_NCTX, c->size, c->comm_rank[acc.node_rank], c->tc_rank};
    return g;
}

static struct grp node_part(const acc_comm *c) {
    struct grp g = {c->ctx + ACC_NCTX, c->nlocal, c->my_local, c->local_tc};
    return g;
}

/* ---- Trees from the locality classes -------------------------------------
 * The small collectives' trees (the binomial broadcast and reduction,
 * recursive doubling, the dissemination barrier) run over the members in
 * their near order (the transport's tc_near_order: every group of members
 * sharing a cache, a NUMA node or a package is a run of positions, nested
 * as the machine nests them), so a subtree leaves its group only where it
 * spans it. The levels are the depths of the members' PUs' lowest common
 * ancestors in the machine model, not a fixed list. Reductions take it
 * only with a commutative operation (the rank order is MPI's for the
 * others); their result is then the same bits from run to run for a given
 * placement. TOPOCOMM_ACCEL_NEAR=0 keeps the rank order (acc_near). */

/* accel -v, once for MPI_COMM_WORLD: its ranks in their near order, the
 * groups of the farthest level apart ("0 2 4 6 | 1 3 5 7"). */
static void say_near(const int *order, const int *split, int n) {
    int far = split[1];
    for (int k = 2; k < n; k++)
        if (split[k] < far) far = split[k];
    char line[512];
    size_t at = 0;
    for (int k = 0; k < n && at + 32 < sizeof line; k++)
        at += (size_t)snprintf(line + at, sizeof line - at, "%s%d", k == 0 ? ""
                                                                  : split[k] == far ? " | "
                                                                                    : " ",
                               order[k]);
    fprintf(stderr, "topocomm accel: MPI_COMM_WORLD's trees along the near order %s%s\n", line,
            at + 32 >= sizeof line ? " ..." : "");
}

void acc_coll_near_setup(acc_comm *c) {
    int n = c->size;
    if (!acc_near || c->mixed || n < 3) return;
    int *order = malloc(sizeof(int) * (size_t)n);
    int *split = malloc(sizeof(int) * (size_t)n);
    int *tc = malloc(sizeof(int) * (size_t)n);
    int *pos = malloc(sizeof(int) * (size_t)n);
    int *rooted = malloc(sizeof(int) * (size_t)n);
    /* The same answer on every member (the plans are in the segment), so
     * a member out of memory cannot keep the rank order alone. */
    if (!order || !split || !tc || !pos || !rooted) {
        fprintf(stderr, "topocomm accel: out of memory for a communicator's near order\n");
        PMPI_Abort(c->comm, 1);
    }
    if (tc_near_order(c->tc_rank, n, order, split) == 1) {
        for (int k = 0; k < n; k++) {
            tc[k] = c->tc_rank[order[k]];
            pos[order[k]] = k;
        }
        c->near_tc = tc;
        c->near_split = split;
        c->near_pos = pos;
        c->near_me = pos[c->comm_rank[acc.node_rank]];
        c->rooted_tc = rooted;
        c->rooted_root = -1;
        if (acc.verbose && c->comm == MPI_COMM_WORLD && c->near_me == pos[0]) say_near(order, split, n);
        free(order);
        return;
    }
    free(order);
    free(split);
    free(tc);
    free(pos);
    free(rooted);
}

/* The members in their near order (in rank order without one). */
static struct grp near_grp(const acc_comm *c) {
    if (!c->near_tc) return whole(c);
    acc.stats.coll_near++;
    struct grp g = {c->ctx + ACC_NCTX, c->size, c->near_me, c->near_tc};
    return g;
}

/* The members in the near order rooted at comm rank `root`: the root
 * first, then the rest of its deepest group, then the rest of each
 * enclosing group outwards (each run in near order), so a binomial tree
 * from member 0 keeps every group's subtree inside the group wherever the
 * root sits (near.rs, rooted). *groot: the root's member index (0, or
 * `root` itself in rank order without a near order). Kept for the next
 * call with the same root. */
static struct grp rooted_grp(acc_comm *c, int root, int *groot) {
    if (!c->near_tc) {
        *groot = root;
        return whole(c);
    }
    if (c->rooted_root != root) {
        int n = c->size;
        /* Positions first (rooted_tc as room), then their transport ranks. */
        if (tc_near_rooted(c->near_split, n, c->near_pos[root], c->rooted_tc) != 0) {
            /* Cannot fail with near_setup's arguments; on every member
             * alike if it did. */
            c->rooted_root = -1;
            *groot = root;
            return whole(c);
        }
        for (int i = 0; i < n; i++) c->rooted_tc[i] = c->near_tc[c->rooted_tc[i]];
        int mine = c->near_tc[c->near_me];
        for (int i = 0; i < n; i++)
            if (c->rooted_tc[i] == mine) c->rooted_me = i;
        c->rooted_root = root;
    }
    *groot = 0;
    acc.stats.coll_near++;
    struct grp g = {c->ctx + ACC_NCTX, c->size, c->rooted_me, c->rooted_tc};
    return g;
}

struct grp acc_coll_near(const acc_comm *c) { return near_grp(c); }
struct grp acc_coll_rooted(acc_comm *c, int root, int *groot) { return rooted_grp(c, root, groot); }

/* Receives exactly `len` bytes from member src: the transport's blocking
 * receive (its latency path takes a message already there with no
 * request), then, for a long wait, one posted receive waited for in
 * slices. */
static int recv_from(const struct grp *g, void *buf, size_t len, int src, int tag) {
    static char none;
    tc_status ts;
    int flag = 0;
    int rc = tc_recv_x(len ? buf : &none, len, g->tc[src], tag, g->ctx, ACC_SLICE, &flag, &ts);
    if (rc == 0 && !flag) {
        tc_request r;
        rc = tc_irecv_x(len ? buf : &none, len, g->tc[src], tag, g->ctx, &r);
        if (rc == 0) rc = acc_wait_tc(&r, &ts);
    }
    return rc == 0 && ts.count != len ? TC_ERR_TRUNCATED : rc;
}

/* Sends `slen` bytes to member dst and receives exactly `rlen` bytes from
 * member src (either may be -1: none). A send that completed when posted
 * (inline or eager) is followed by the blocking receive; otherwise both are
 * posted before either is waited for (two rendezvous sends waiting for
 * each other's receive would never complete). */
static int xfer(const struct grp *g, const void *sbuf, size_t slen, int dst, void *rbuf,
                size_t rlen, int src, int tag) {
    static char none;
    tc_request rr = TC_REQUEST_NULL, rs = TC_REQUEST_NULL;
    int rc = 0;
    if (dst >= 0 && slen <= XFER_EAGER) {
        if (tc_send_now_x(slen ? sbuf : &none, slen, g->tc[dst], tag, g->ctx) != 1) {
            rc = tc_isend_x(slen ? sbuf : &none, slen, g->tc[dst], tag, g->ctx, 0, &rs);
            if (rc == 0) rc = acc_wait_tc(&rs, NULL); /* at once when done at posting */
        }
        return rc == 0 && src >= 0 ? recv_from(g, rbuf, rlen, src, tag) : rc;
    }
    if (dst < 0) return src >= 0 ? recv_from(g, rbuf, rlen, src, tag) : 0;
    if (src >= 0) rc = tc_irecv_x(rlen ? rbuf : &none, rlen, g->tc[src], tag, g->ctx, &rr);
    if (rc == 0 && dst >= 0)
        rc = tc_isend_x(slen ? sbuf : &none, slen, g->tc[dst], tag, g->ctx, 0, &rs);
    if (rc == 0 && dst >= 0) rc = acc_wait_tc(&rs, NULL);
    if (rc == 0 && src >= 0) {
        tc_status ts;
        rc = acc_wait_tc(&rr, &ts);
        if (rc == 0 && ts.count != rlen) rc = TC_ERR_TRUNCATED;
    }
    return rc;
}

/* Sends `len` bytes to member dst, which is waiting for them in its
 * receive: above XFER_EAGER with TC_SEND_WAITED, so that within the sizes
 * where this machine's rules found the receiver's single copy faster than
 * an eager message's two copies the receiver reads it once (a two-member
 * reduce of 16 KiB on a 2-vCPU Intel Xeon VM: 1.93 -> 1.52 us, Open MPI
 * 1.78; docs/transport.md, "Sends a receiver waits for"). Returns a
 * transport code. */
static int send_waited(const struct grp *g, const void *buf, size_t len, int dst, int tag) {
    if (len <= XFER_EAGER) return xfer(g, buf, len, dst, NULL, 0, -1, tag);
    tc_request r = TC_REQUEST_NULL;
    int rc = tc_isend_x(buf, len, g->tc[dst], tag, g->ctx, TC_SEND_WAITED, &r);
    return rc == 0 ? acc_wait_tc(&r, NULL) : rc;
}

/* An MPI error class from a transport code (0: success). */
static int tc_err(int tc_rc) {
    static int said;
    if (tc_rc == 0) return MPI_SUCCESS;
    if (tc_rc == TC_ERR_TRUNCATED) return MPI_ERR_TRUNCATE;
    /* MPI_ERR_OTHER alone does not say what happened (a member died, a
     * wait timed out): the transport's reason, once per process (a
     * program under MPI_ERRORS_RETURN may meet it on every later call). */
    if (!said) {
        said = 1;
        fprintf(stderr, "topocomm accel: rank %d: collective over the transport failed: %s\n",
                acc.world_rank, tc_last_error());
    }
    return MPI_ERR_OTHER;
}

/* This machine's online CPUs (read once; -1 or 0 when unknown), or
 * TOPOCOMM_ACCEL_CPUS: the count the collectives' choices assume (tests
 * run the paths of a node with a CPU per rank on a 2-CPU machine). */
static long online_cpus(void) {
    static long cpus = -1;
    if (cpus >= 0) return cpus;
    cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const char *e = getenv("TOPOCOMM_ACCEL_CPUS");
    if (e && *e) {
        char *end;
        errno = 0;
        long x = strtol(e, &end, 10);
        if (errno || *end || x < 1) {
            if (acc.world_rank == 0)
                fprintf(stderr,
                        "topocomm accel: TOPOCOMM_ACCEL_CPUS='%s': expected a number of CPUs "
                        "from 1; using the %ld online\n",
                        e, cpus);
        } else {
            cpus = x;
        }
    }
    return cpus;
}

/* Whether this node has more ranks than online CPUs: the same answer on
 * every member (one node, one machine). There, a round of a tree waits for
 * its partner to be scheduled, so the small collectives below take one hop. */
static int crowded(void) {
    long cpus = online_cpus();
    return cpus > 0 && acc.node_size > cpus;
}

/* Whether broadcasts and equal-block collectives over c run over the
 * transport at any size: with two members or on a crowded node, unless
 * TOPOCOMM_ACCEL_COLL_MAX set a limit (acc_coll_bcast and block_comm say
 * why). The same answer on every member. */
static int any_size(const acc_comm *c) {
    return !coll_max_set && !c->mixed && (c->size == 2 || crowded());
}

/* The size class of a picked-by-trials collective: floor(log2 bytes), at
 * most 63 (class k holds 2^k to 2^(k+1) - 1 bytes; 0 and 1 byte share 0). */
static int size_class(size_t bytes) {
    int k = 0;
    while (k < 63 && ((size_t)2 << k) <= bytes) k++;
    return k;
}

/* Members beyond which a binomial tree takes more than three rounds. */
enum { DEEP_TREE = 8 };

/* Rounds of a binomial tree over n members: ceil(log2 n). */
static int tree_rounds(int n) {
    int d = 0;
    while ((1 << d) < n) d++;
    return d;
}

/* The largest broadcast over the transport on c (any_size aside). A whole
 * message down a binomial tree costs a transfer per round, the MPIs'
 * segmented pipelines about one transfer plus a segment per round: with a
 * CPU per rank and more than DEEP_TREE members the limit shrinks with the
 * rounds (16-core Intel Xeon VM, bench coll against Open MPI 4.1.6 and
 * MPICH 4.0.2, 5 jobs: 1 MiB took 0.78 of the better MPI's time with 8
 * ranks but 1.16 [1.07, 1.47] with 16; 64 KiB 0.75 with 16;
 * docs/collectives.md, "Uncrowded 8 and 16 ranks"). */
static size_t bcast_limit(const acc_comm *c) {
    int rounds = tree_rounds(c->mixed ? c->nlocal : c->size);
    if (coll_max_set || crowded() || rounds <= 3) return bcast_max;
    return bcast_max / (size_t)rounds * 3;
}

/* Largest exchange (members x block bytes) that an allgather, alltoall,
 * gather or scatter moves over the transport with three or more members
 * and a CPU per rank. Every member posts a send and a receive per peer at
 * once; above this the MPIs' own (MPICH's especially) were faster on the
 * 16-core Intel Xeon VM (bench coll, 4-5 jobs, ratio to the better MPI):
 * alltoall 64 KiB blocks 1.41 with 4 ranks, 1.28 with 8, 16 KiB 1.08-1.23
 * with 16, allgather 16 KiB 1.20-1.33 with 16; within it 0.51-0.79
 * (alltoall 16 KiB with 4 and 8 ranks, 1 KiB with 16) and 0.54-0.84 for
 * the allgather (docs/collectives.md, "Uncrowded 8 and 16 ranks"). */
#define EXCHANGE_MAX (128u << 10)

/* ---- Barrier: dissemination, ceil(log2 n) rounds of 0-byte messages ---- */

enum { FLAT_ALL_MAX = 8 }; /* members of the one-hop barrier, bcast and allreduce at most */

/* Whether n members on this node take the one-hop forms (barrier, bcast,
 * small allreduce): more ranks than CPUs, 3 to FLAT_ALL_MAX members.
 * The same answer on every member. */
static int one_hop(int n) {
    return n > 2 && n <= FLAT_ALL_MAX && crowded();
}

/* On a node with more ranks than CPUs, up to FLAT_ALL_MAX members: each
 * sends a 0-byte message to every other and waits for theirs, one hop
 * instead of ceil(log2 n) rounds that each wait for a partner to be
 * scheduled (alternating runs of `topocomm bench coll --oversubscribe --vs
 * openmpi --collectives barrier`, ratio to Open MPI: 4 ranks on 2 CPUs
 * 0.87-1.20 -> 0.46-0.79, 8 ranks 0.87 -> 0.79-0.82). */
static int barrier(const struct grp *g) {
    int n = g->n, r = g->me, rc = 0;
    if (one_hop(n)) {
        for (int k = 1; k < n && rc == 0; k++)
            rc = xfer(g, NULL, 0, (r + k) % n, NULL, 0, -1, T_BARRIER);
        for (int k = 1; k < n && rc == 0; k++) rc = recv_from(g, NULL, 0, (r - k + n) % n, T_BARRIER);
        return rc;
    }
    for (int k = 1; k < n && rc == 0; k <<= 1)
        rc = xfer(g, NULL, 0, (r + k) % n, NULL, 0, (r - k + n) % n, T_BARRIER);
    return rc;
}

/* Binomial fan-in of 0-byte messages to member 0: it returns there once
 * every member has arrived. */
static int fan_in(const struct grp *g) {
    int n = g->n, r = g->me, rc = 0;
    for (int mask = 1; mask < n && rc == 0; mask <<= 1) {
        if (r & mask) return xfer(g, NULL, 0, r - mask, NULL, 0, -1, T_BARRIER);
        if (r + mask < n) rc = xfer(g, NULL, 0, -1, NULL, 0, r + mask, T_BARRIER);
    }
    return rc;
}

/* ---- Broadcast: binomial tree of the message bytes --------------------- */

static int bcast_bytes(const struct grp *g, void *data, size_t len, int root) {
    int n = g->n, vr = (g->me - root + n) % n, rc = 0;
    /* On a node with more ranks than CPUs the root sends to every member
     * itself (one hop), where the tree's second hop waits for an inner
     * member to be scheduled: 8 B with 4 ranks on the Xeon dev VM's 2
     * vCPUs 1.6-3.3 us by the tree against Open MPI's 0.4-0.6. Larger
     * ones too since 2026-11-28, on the 2-vCPU AMD EPYC VM (lib-ab.py, 8
     * rounds, medians): 8 ranks 16 KiB 22.3 -> 14.5 us (Open MPI 29.2), 4
     * ranks 1 MiB 132 -> 115 (Open MPI 228), 64-256 KiB level with the
     * tree (docs/collectives.md, "Crowded nodes: broadcast from the
     * root"). The sends go out together and are waited for at the end. */
    int flat = one_hop(n);
    if (flat && vr != 0) return recv_from(g, data, len, root, T_BCAST);
    int mask = 1;
    if (!flat) {
        while (mask < n) {
            if (vr & mask) {
                rc = xfer(g, NULL, 0, -1, data, len, (vr - mask + root) % n, T_BCAST);
                break;
            }
            mask <<= 1;
        }
    }
    /* Children (binomial: in decreasing subtree size), sent concurrently. */
    int kids[32], nk = 0;
    if (flat)
        for (int j = 1; j < n; j++) kids[nk++] = j;
    else
        for (mask >>= 1; mask > 0; mask >>= 1)
            if (vr + mask < n) kids[nk++] = vr + mask;
    tc_request reqs[32];
    int k = 0;
    for (int i = 0; i < nk && rc == 0; i++) {
        static char none;
        int child = g->tc[(kids[i] + root) % n];
        /* A small message goes out complete, with no request (the
         * latency path of a send), unless the channel is full. */
        if (len <= XFER_EAGER && tc_send_now_x(len ? data : &none, len, child, T_BCAST, g->ctx) == 1)
            continue;
        /* With two members the child is blocked in its receive: read
         * once where that pays (send_waited; 16 KiB 1.79 -> 1.34 us, Open
         * MPI 1.50). With more, not measured: the ordinary send. */
        rc = tc_isend_x(len ? data : &none, len, child, T_BCAST, g->ctx, n == 2 ? TC_SEND_WAITED : 0,
                        &reqs[k++]);
    }
    for (int i = 0; i < k && rc == 0; i++) rc = acc_wait_tc(&reqs[i], NULL);
    return rc;
}

/* ---- Reductions ---------------------------------------------------------- */

/* struct red (a reduction's working buffers): coll.h. */

/* Working buffers of reductions: no malloc on the latency path.
 * One collective runs at a time (the accelerator is single-threaded by
 * contract: MPI_THREAD_MULTIPLE turns it off). */
static _Alignas(64) char red_small[2][RED_MAX_DEFAULT];

static char *scratch; /* larger ones: grow-only, kept for the next call */
static size_t scratch_cap;

/* A working area of `bytes` (a multiple of 64): the static one when it
 * fits, else the grow-only scratch. */
static char *work_area(size_t bytes) {
    if (bytes <= sizeof red_small) return red_small[0];
    if (bytes > scratch_cap) {
        free(scratch);
        scratch = aligned_alloc(64, bytes);
        scratch_cap = scratch ? bytes : 0;
    }
    return scratch;
}

static size_t round64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

/* Two working buffers of `bytes` each in d->acc and d->tmp. */
static int red_alloc(struct red *d, size_t bytes) {
    size_t half = round64(bytes);
    char *w = work_area(2 * half);
    if (!w) return MPI_ERR_NO_MEM;
    d->acc = w;
    d->tmp = w + half;
    return MPI_SUCCESS;
}

static int red_init(struct red *d, const void *src, int count, MPI_Datatype type, MPI_Op op) {
    d->count = count;
    d->type = type;
    d->op = op;
    int rc = red_alloc(d, d->bytes);
    if (rc == MPI_SUCCESS) memcpy(d->acc, (const char *)src + d->lb, d->bytes);
    return rc;
}

static void red_free(struct red *d) { (void)d; }

/* acc := lower (op) upper, where `upper_in_tmp` says which of acc/tmp
 * holds the higher ranks' block. */
static int red_combine(struct red *d, int upper_in_tmp) {
    char *lower = upper_in_tmp ? d->acc : d->tmp, *upper = upper_in_tmp ? d->tmp : d->acc;
    /* PMPI_Reduce_local(in, inout): inout = in (op) inout. */
    int rc = acc_reduce_local(lower - d->lb, upper - d->lb, d->count, d->type, d->op);
    if (upper != d->acc) {
        d->tmp = d->acc;
        d->acc = upper;
    }
    return rc;
}

/* Whether a reduction of `count` x `type` can run here; fills d->lb/bytes. */
static int red_ok(struct red *d, int count, MPI_Datatype type) {
    if (count < 0) return 0;
    return acc_contiguous(count, type, &d->lb, &d->bytes) == 1 && d->bytes <= red_max;
}

/* Binomial reduction in member order to member 0: at step `mask`, member r
 * (a multiple of 2*mask) holds members [r, r+mask) and takes [r+mask,
 * r+2*mask) from r+mask. Returns an MPI error class (transport failures
 * included). */
static int reduce_to_first(const struct grp *g, struct red *d) {
    int n = g->n, r = g->me;
    for (int mask = 1; mask < n; mask <<= 1) {
        if (r & mask) return tc_err(xfer(g, d->acc, d->bytes, r - mask, NULL, 0, -1, T_REDUCE));
        if (r + mask < n) {
            int rc = tc_err(xfer(g, NULL, 0, -1, d->tmp, d->bytes, r + mask, T_REDUCE));
            if (rc == MPI_SUCCESS) rc = red_combine(d, 1);
            if (rc != MPI_SUCCESS) return rc;
        }
    }
    return MPI_SUCCESS;
}

static int is_pow2(int n) { return n > 0 && (n & (n - 1)) == 0; }

/* Allreduce over g: recursive doubling for power-of-two sizes (at step
 * `mask` each member holds the block of `mask` members it belongs to and
 * exchanges it with the partner block; both combine lower (op) upper, so
 * the order is the member order and every member gets the same bits),
 * else the reduction to member 0 and a broadcast. */
static int allreduce_grp(const struct grp *g, struct red *d) {
    int n = g->n, r = g->me, rc = MPI_SUCCESS;
    if (is_pow2(n)) {
        for (int mask = 1; mask < n && rc == MPI_SUCCESS; mask <<= 1) {
            int partner = r ^ mask;
            rc = tc_err(xfer(g, d->acc, d->bytes, partner, d->tmp, d->bytes, partner, T_ALLREDUCE));
            if (rc == MPI_SUCCESS) rc = red_combine(d, partner > r);
        }
        return rc;
    }
    rc = reduce_to_first(g, d);
    return rc == MPI_SUCCESS ? tc_err(bcast_bytes(g, d->acc, d->bytes, 0)) : rc;
}

/* memcpy for the few bytes of a small collective: fixed-size moves inline
 * instead of a call into the C library for 8 bytes. */
static inline void copy_few(void *dst, const void *src, size_t n) {
    if (n == 8) memcpy(dst, src, 8);
    else if (n == 4) memcpy(dst, src, 4);
    else if (n == 16) memcpy(dst, src, 16);
    else memcpy(dst, src, n);
}

/* Allreduce of two members below SPLIT_MIN bytes: each sends its block
 * straight from the user's buffer and combines the other's into the result
 * (member 0's (op) member 1's on both, the one combine recursive doubling
 * makes for two members, so the same bits), with no working copy of its
 * own block and no copy out for member 1, nor for member 0 when not in
 * place (the peer's block lands in its result). The send is complete when xfer
 * returns (a small message is copied into the ring), so an in-place
 * result may overwrite the block sent. */
static int allreduce_two_small(const struct grp *g, struct red *d, const void *src, void *rbuf) {
    const char *mine = (const char *)src + d->lb;
    char *out = (char *)rbuf + d->lb;
    /* Member 0 not in place: the peer's block lands in the result and is
     * combined there (out = mine (op) out); else in a working area. */
    char *peer = g->me == 0 && out != mine ? out : work_area(round64(d->bytes));
    if (!peer) return MPI_ERR_NO_MEM;
    int partner = 1 - g->me;
    int rc = tc_err(xfer(g, mine, d->bytes, partner, peer, d->bytes, partner, T_ALLREDUCE));
    if (rc != MPI_SUCCESS) return rc;
    if (g->me == 0) {
        /* out = mine (op) peer: the inout operand is the upper block. */
        rc = acc_reduce_local(mine - d->lb, peer - d->lb, d->count, d->type, d->op);
        if (rc == MPI_SUCCESS && peer != out) copy_few(out, peer, d->bytes);
        return rc;
    }
    /* out = peer (op) mine. */
    return acc_reduce_to(peer - d->lb, mine - d->lb, out - d->lb, d->count, d->bytes, d->type,
                         d->op);
}

/* Allreduce of two members from SPLIT_MIN bytes: each reduces one half
 * (a reduce-scatter), then they swap the reduced halves (an allgather).
 * Both halves are computed as member 0's (op) member 1's, so both members
 * get the same bits. Against recursive doubling (whole buffer copied in,
 * exchanged, reduced and copied out), each member moves and reduces half
 * the data and copies at most one half, into or out of a working buffer
 * only when in place:
 * - member 0 (the head, the larger half) receives member 1's copy of it
 *   straight into the result and reduces into it (PMPI_Reduce_local's
 *   inout operand is the upper one);
 * - member 1 (the tail) does the same where combines_over_copy; else it
 *   receives member 0's copy of it into the head of the result (free
 *   until the allgather; the tail is the smaller half, so it fits) and
 *   reduces it with its own tail into the result in one pass
 *   (acc_reduce_to; no copy of its tail first, which made member 0 wait
 *   for it at the allgather).
 * Halves of PAIR_PIECES_MIN pieces or more go by pieces (pair_fold_pieces).
 * 2 ranks on the dev VM, medians of 7 alternating jobs: 64 KiB 17 us vs
 * Open MPI's 22, 1 MiB 166 vs 211 us, 16 MiB 6.0 vs 7.6 ms
 * (docs/collectives.md "Sizes"). */
#define SPLIT_MIN ACC_SPLIT_MIN

/* Pieces only for halves of at least this many: smaller halves stay in the
 * caches anyway, and each piece is one more exchange (1 MiB allreduces, 4
 * pieces of 128 KiB: 0.86-1.09x the whole halves' time on the Intel Xeon
 * VM, no gain; 2-8 MiB: 0.81-0.94x; docs/collectives.md). */
enum { PAIR_PIECES_MIN = 8 };

/* The piece size of a two-member reduction over g, the same on both
 * members (the environment is the job's, the fragment is read from the
 * shared segment); 0: no pieces. On a node with more ranks than CPUs each
 * piece would wait for the other member to be scheduled: no pieces. */
static size_t pair_piece(const struct grp *g) {
    if (pair_piece_set >= 0) return (size_t)pair_piece_set;
    uint64_t frag = 0;
    if (crowded() || tc_pair_fragment_x(g->tc[0], g->tc[1], &frag) != 0) return 0;
    return (size_t)frag;
}

/* Pieces no smaller than this when they are put (put_piece). */
enum { PUT_PIECE_MIN = 64 << 10 };

/* The piece of a two-member allreduce whose reduced pieces are put into
 * the other member's result (pair_fold_pieces): the pair's fragment, or
 * less, down to PUT_PIECE_MIN, so that halves from 8 x 64 KiB (1 MiB
 * allreduces) go by pieces too. Without puts, 1 MiB allreduces by pieces
 * of 128 KiB gained nothing over the whole halves (above); with them, 8
 * pieces of 64 KiB took 191 us against the whole halves' 219 and 217
 * for the same pieces swapped by message (Open MPI, 2-vCPU Intel Xeon VM,
 * medians of 10 alternating rounds; docs/collectives.md). */
static size_t put_piece(size_t frag, size_t h0) {
    size_t p = h0 / PAIR_PIECES_MIN;
    if (p < PUT_PIECE_MIN) p = PUT_PIECE_MIN;
    return p < frag ? p : frag;
}

/* Whether member `me` of two combines the other's copy with its own in
 * the buffer the copy landed in, writing over it: member 0 always
 * (PMPI_Reduce_local's inout operand is the upper one, the copy), member 1
 * only where this library's loops combine (acc_reduce_builtin: they may
 * write over the operand they read; PMPI_Reduce_local's inout would have to
 * be member 1's own data). The copy is then still in this core's cache
 * when the combine reads it, and no third buffer is touched: member 1
 * combining from the head of its result into its tail took twice member
 * 0's combine time in a 1 MiB allreduce, and member 0 waited for it
 * (docs/collectives.md, "member 1 combines where it received"). */
static int combines_over_copy(const struct red *d, int me) {
    return me == 0 || acc_reduce_builtin(d->type, d->op);
}

/* res := member 0's (op) member 1's for n elements (`bytes` of them), from
 * this member's `own` and the other member's copy `theirs`, in one pass:
 * res may be own (in place, theirs then a working area) or theirs (the
 * copy received into the result, where combines_over_copy), never
 * both. */
static int combine_two(const struct red *d, int me, const char *own, char *theirs, char *res,
                       size_t n, size_t bytes) {
    if (me == 1) /* res = theirs (op) own */
        return acc_reduce_to(theirs - d->lb, own - d->lb, res - d->lb, (int)n, bytes, d->type,
                             d->op);
    if (res != own) /* res = own (op) theirs */
        return acc_reduce_to(own - d->lb, theirs - d->lb, res - d->lb, (int)n, bytes, d->type,
                             d->op);
    return acc_reduce_into_lower(res - d->lb, theirs - d->lb, (int)n, bytes, d->type, d->op);
}

/* The reduce-scatter of allreduce_pair by pieces of `piece` bytes: each
 * piece of the other member's copy of my half lands in a working area
 * that stays in this core's cache and is combined from there into the
 * result. The whole half instead lands in the result (written to memory),
 * and the combine reads it back: one write and one read of the half more,
 * at a core's copy rate (14 GB/s on the Intel Xeon VM) the largest cost of
 * a large two-member allreduce. Same bits: element by element member 0's
 * (op) member 1's. Both members take the same steps (c0, the larger half,
 * sets their number); a step past the end of a member's own half moves
 * nothing its way.
 *
 * With `peer_at` (the address of my half in the other member's result;
 * 0: none), each reduced piece is then put there (tc_put_x) while still
 * in this core's cache, so the allgather needs no second pass: the swap
 * of the reduced halves read each half back from memory after the last
 * piece. Safe in place too: once piece i of the other's copy of my half
 * has reached me, the other member no longer needs its bytes there (a
 * received message has left the sender's buffer, whichever protocol
 * moved it). *put_done: the bytes of my half put (a prefix: the first
 * refused put stops them; the rest then goes by message). */
static int pair_fold_pieces(const struct grp *g, const struct red *d, const char *mine,
                            char *out, int c0, int c1, size_t esz, size_t piece,
                            uint64_t peer_at, size_t *put_done) {
    int me = g->me, other = 1 - me;
    size_t ce = piece / esz ? piece / esz : 1; /* elements per piece */
    size_t h0 = (size_t)c0 * esz;
    size_t my_off = me ? h0 : 0, their_off = me ? 0 : h0;
    size_t cmine = (size_t)(me ? c1 : c0), ctheir = (size_t)(me ? c0 : c1);
    int putting = peer_at != 0;
    *put_done = 0;
    char *wa = work_area(round64(ce * esz));
    if (!wa) return MPI_ERR_NO_MEM;
    for (size_t s0 = 0; s0 < (size_t)c0; s0 += ce) {
        size_t rn = s0 < cmine ? (cmine - s0 < ce ? cmine - s0 : ce) : 0;
        size_t sn = s0 < ctheir ? (ctheir - s0 < ce ? ctheir - s0 : ce) : 0;
        int rc = tc_err(xfer(g, mine + their_off + s0 * esz, sn * esz, other, wa, rn * esz, other,
                             T_ALLREDUCE));
        if (rc != MPI_SUCCESS) return rc;
        if (!rn) continue;
        char *res = out + my_off + s0 * esz;
        rc = combine_two(d, me, mine + my_off + s0 * esz, wa, res, rn, rn * esz);
        if (rc != MPI_SUCCESS) return rc;
        if (putting) {
            int put = tc_put_x(g->tc[other], res, rn * esz, peer_at + s0 * esz);
            if (put < 0) return tc_err(put);
            if (put == 1) {
                *put_done += rn * esz;
                acc.stats.coll_put_bytes += rn * esz;
            } else {
                putting = 0;
            }
        }
    }
    return MPI_SUCCESS;
}

/* pieces: by pieces where the halves take PAIR_PIECES_MIN or more (else
 * whole halves). */
static int allreduce_pair(const struct grp *g, struct red *d, const void *src, void *rbuf,
                          int pieces) {
    int me = g->me, other = 1 - me;
    size_t esz = d->bytes / (size_t)d->count; /* contiguous: count x size bytes */
    int c1 = d->count / 2, c0 = d->count - c1;
    size_t h0 = (size_t)c0 * esz, h1 = d->bytes - h0;
    size_t my_off = me ? h0 : 0, my_len = me ? h1 : h0;
    size_t their_off = me ? 0 : h0, their_len = me ? h0 : h1;
    const char *mine = (const char *)src + d->lb; /* data starts */
    char *out = (char *)rbuf + d->lb;
    int rc;
    size_t piece = pieces ? pair_piece(g) : 0;
    /* h0, not my_len, and tc_can_put_x (the same answer on every rank for
     * the whole job): both members decide alike. */
    int put = piece && puts_on();
    if (put && pair_piece_set < 0) piece = put_piece(piece, h0);
    /* The prefixes of my half put into the other's result and of theirs put
     * into mine: the allgather below moves only what is left. */
    uint64_t put_mine = 0, put_theirs = 0;
    if (piece && h0 >= PAIR_PIECES_MIN * piece) {
        /* First the addresses: where the other member's half goes in my
         * result, and where mine goes in theirs. */
        uint64_t peer_at = 0;
        if (put) {
            uint64_t at = (uint64_t)(uintptr_t)(out + their_off);
            rc = tc_err(xfer(g, &at, sizeof at, other, &peer_at, sizeof peer_at, other,
                             T_ALLREDUCE));
            if (rc != MPI_SUCCESS) return rc;
        }
        size_t done = 0;
        rc = pair_fold_pieces(g, d, mine, out, c0, c1, esz, piece, peer_at, &done);
        if (rc == MPI_SUCCESS && peer_at) {
            /* The puts are complete (tc_put_x returns after the write), so
             * once this word reaches the other member, its result holds
             * them. */
            put_mine = done;
            rc = tc_err(xfer(g, &put_mine, sizeof put_mine, other, &put_theirs,
                             sizeof put_theirs, other, T_ALLREDUCE));
            if (rc == MPI_SUCCESS && (put_mine > my_len || put_theirs > their_len))
                rc = MPI_ERR_INTERN;
        }
    } else {
        /* Where the other member's copy of my half lands: in place, the
         * whole result still holds my data (half of it on its way out): a
         * working buffer; else my half of the result, or, where the
         * combine cannot write over the copy, the head of the result. */
        char *in = mine == out                ? work_area(round64(my_len))
                   : combines_over_copy(d, me) ? out + my_off
                                               : out;
        if (!in) return MPI_ERR_NO_MEM;
        rc = tc_err(xfer(g, mine + their_off, their_len, other, in, my_len, other, T_ALLREDUCE));
        if (rc == MPI_SUCCESS)
            rc = combine_two(d, me, mine + my_off, in, out + my_off, (size_t)(me ? c1 : c0),
                             my_len);
    }
    if (rc != MPI_SUCCESS) return rc;
    if (put_mine == my_len && put_theirs == their_len) return MPI_SUCCESS;
    size_t sn = my_len - (size_t)put_mine, rn = their_len - (size_t)put_theirs;
    return tc_err(xfer(g, sn ? out + my_off + put_mine : NULL, sn, other,
                       rn ? out + their_off + put_theirs : NULL, rn, other, T_ALLREDUCE));
}

/* Reduce of two members from SPLIT_MIN bytes: the other member sends its
 * whole vector to the root, which combines it with its own in one pass
 * (member 0's (op) member 1's, the blocks' bits). One message and one
 * pass over the vector at the root. */
/* Where member `me` of two receives the other's whole vector: not in
 * place and where combines_over_copy, straight into its result (combined
 * there), else a working area. NULL: no memory. */
static char *pair_in(const struct red *d, int me, const char *mine, char *out) {
    return mine != out && combines_over_copy(d, me) ? out : work_area(round64(d->bytes));
}

static int reduce_pair(const struct grp *g, struct red *d, const void *src, void *rbuf,
                       int root) {
    int me = g->me;
    const char *mine = (const char *)src + d->lb;
    if (me != root) return tc_err(send_waited(g, mine, d->bytes, root, T_REDUCE));
    char *out = (char *)rbuf + d->lb, *in = pair_in(d, me, mine, out);
    if (!in) return MPI_ERR_NO_MEM;
    int rc = tc_err(xfer(g, NULL, 0, -1, in, d->bytes, 1 - me, T_REDUCE));
    return rc != MPI_SUCCESS ? rc : combine_two(d, me, mine, in, out, (size_t)d->count, d->bytes);
}

/* Allreduce of two members by one exchange of whole vectors: each
 * receives the other's and combines it with its own in one pass (member
 * 0's (op) member 1's on both: the same bits). */
static int allreduce_whole2(const struct grp *g, struct red *d, const void *src, void *rbuf) {
    int me = g->me;
    const char *mine = (const char *)src + d->lb;
    char *out = (char *)rbuf + d->lb, *in = pair_in(d, me, mine, out);
    if (!in) return MPI_ERR_NO_MEM;
    int rc = tc_err(xfer(g, mine, d->bytes, 1 - me, in, d->bytes, 1 - me, T_ALLREDUCE));
    return rc != MPI_SUCCESS ? rc : combine_two(d, me, mine, in, out, (size_t)d->count, d->bytes);
}

/* Small reduce straight to the root on crowded nodes (reduce_flat, after
 * the request helpers below). */
static int reduce_flat(const struct grp *g, struct red *d, const char *own, char *out, int root);
static int allreduce_flat(const struct grp *g, struct red *d);

/* Allreduce (root < 0) and reduce by blocks from SPLIT_MIN bytes
 * (reduce_split, after the request helpers below). */
/* How reduce_split moves the blocks: gets where acc_coll_by_gets, else
 * blocks put where puts_on (SPLIT_AUTO), or one way (an allreduce's way
 * picked by reduction_large). */
enum split_how { SPLIT_AUTO, SPLIT_MSGS, SPLIT_PUTS, SPLIT_GETS };
static int reduce_split(const struct grp *g, struct red *d, const void *src, void *rbuf,
                        int root, enum split_how how);
/* A large allreduce or reduce, its way picked by trials (after the
 * allreduce's helpers below). */
static int reduction_large(acc_comm *c, const struct grp *g, struct red *d, const void *src,
                           void *rbuf, int split, int root);

/* ---- Lanes: small collectives through flags and blocks in the segment --- */

static int my_comm_rank(const acc_comm *c) { return c->comm_rank[acc.node_rank]; }

void acc_coll_lane_setup(acc_comm *c) {
    c->lane = -1;
    c->lane_flat = c->lane_pair = 0;
    /* The same on every member: mixed, ctx and size are agreed, and the
     * switch comes from the job's environment. Two members take their
     * pair line for barriers where the lanes are on (crowded nodes unless
     * the switch says otherwise): one line for both words. With a CPU per
     * member the way of barriers and small allreduces is picked by trials
     * (pair_trial_end): which wins depends on the machine (docs/collectives.md,
     * "Two members: one line"). */
    int flat = acc_coll_lanes == LANES_ALL || (acc_coll_lanes == LANES_CROWDED && crowded());
    /* Two members have their pair line unless the lanes are off: with a
     * CPU each, barriers and small allreduces take it where the trials
     * pick it (pair_trial_end). */
    int pair = c->size == 2 && acc_coll_lanes != LANES_OFF;
    if ((!flat && !pair) || c->mixed || c->ctx >= TC_LANES || c->size > TC_LANE_FLAT_MAX) return;
    /* Counting on from the members' largest epoch on this lane (its words
     * only grow); a member that cannot read its epoch turns them off. */
    uint64_t mine[2] = {0, 0}, all[2];
    if (tc_lane_epoch(c->ctx, &mine[0]) != 0) mine[1] = 1;
    if (PMPI_Allreduce(mine, all, 2, MPI_UINT64_T, MPI_MAX, c->comm) != MPI_SUCCESS || all[1])
        return;
    if (tc_lane_start(c->ctx, all[0], c->tc_rank, c->size) != 0) {
        /* The peers use the lane now: no silent fallback. */
        fprintf(stderr, "topocomm accel: lane %d: %s\n", c->ctx, tc_last_error());
        PMPI_Abort(c->comm, 1);
    }
    c->lane = c->ctx;
    c->lane_flat = flat;
    c->lane_pair = pair;
    if (pair_force >= 0)
        for (int k = 0; k < 2; k++) {
            c->pickp[k].picked = 1;
            c->pickp[k].choice = (unsigned char)pair_force;
        }
}

/* One lane collective (tc_lane_exchange): publish `len` bytes of `data`,
 * wait for every member (only < 0) or transport rank `only`, in slices
 * with PMPI progress between (as acc_wait_tc); `blocks` gets where each
 * member's bytes lie. */
static int lane_exchange(int lane, const void *data, size_t len, int reads, int only,
                         const void **blocks) {
    for (;;) {
        int flag = 0,
            rc = tc_lane_exchange(lane, data, len, reads, only, ACC_SLICE, &flag, blocks);
        if (rc != 0 || flag) return rc;
        acc_mpi_progress();
        acc_progress();
    }
}

static int lane_barrier(const acc_comm *c) {
    return lane_exchange(c->lane, NULL, 0, 0, TC_LANE_ALL_BY_ALL, NULL);
}

/* One pair collective (tc_pair_exchange): publish `len` bytes of `data`,
 * wait for the other member in slices with PMPI progress between (as
 * lane_exchange), copy its `len` bytes into `out`. */
static int pair_exchange(int lane, const void *data, size_t len, void *out) {
    for (;;) {
        int flag = 0, rc = tc_pair_exchange(lane, data, len, out, ACC_SLICE, &flag);
        if (rc != 0 || flag) return rc;
        acc_mpi_progress();
        acc_progress();
    }
}

/* out := x0 (op) (x1 (op) (... (op) x_{n-1})), x_i member i's bytes: the
 * same operations in the same order on every rank, so every rank gets the
 * same bits, run after run. `out` is a buffer as PMPI_Reduce_local takes
 * it (the data lb bytes further). */
static int lane_reduce(const acc_comm *c, struct red *d, const void **x, char *out) {
    if (d->bytes == 0) return MPI_SUCCESS;
    memcpy(out + d->lb, x[c->size - 1], d->bytes);
    for (int i = c->size - 2; i >= 0; i--) {
        int rc = acc_reduce_local((const char *)x[i] - d->lb, out, d->count, d->type, d->op);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}

/* Whether d->bytes per rank can go through c's lane. */
static int lane_fits(const acc_comm *c, size_t bytes) {
    return c->lane_flat && bytes <= TC_LANE_DATA;
}

/* Every member publishes its contribution; `root` < 0: all reduce (an
 * allreduce), else only the root. */
static int lane_reduction(const acc_comm *c, struct red *d, const void *src, void *rbuf,
                          int root) {
    int me = my_comm_rank(c), reads = root < 0 || me == root;
    const void *x[TC_LANE_FLAT_MAX];
    /* An allreduce's members all wait for all; a reduce's root alone. */
    int awaited = root < 0 ? TC_LANE_ALL_BY_ALL : reads ? TC_LANE_ALL : c->tc_rank[me];
    int rc = tc_err(lane_exchange(c->lane, (const char *)src + d->lb, d->bytes, reads, awaited,
                                  reads ? x : NULL));
    if (rc != MPI_SUCCESS || !reads) return rc;
    rc = lane_reduce(c, d, x, rbuf);
    tc_lane_done(c->lane);
    return rc;
}

/* The root publishes the bytes; the others wait for the root's word only. */
static int lane_bcast(const acc_comm *c, void *data, size_t len, int root) {
    int me = my_comm_rank(c);
    if (me == root) return tc_err(lane_exchange(c->lane, data, len, 0, c->tc_rank[me], NULL));
    const void *b = NULL;
    int rc = lane_exchange(c->lane, NULL, len, 1, c->tc_rank[root], &b);
    if (rc != 0) return tc_err(rc);
    memcpy(data, b, len);
    tc_lane_done(c->lane);
    return MPI_SUCCESS;
}

/* Where a communicator's collectives run: NULL (plain MPI), or its
 * registration, all local (c->mixed == 0) or mixed with node groups. */
static acc_comm *coll_comm(MPI_Comm comm) {
    if (!acc.on) return NULL;
    acc_comm *c = acc_comm_find(comm);
    return c && (!c->mixed || (acc_coll_hier && c->leader_of)) ? c : NULL;
}

static int am_leader(const acc_comm *c) { return c->leader_of[my_comm_rank(c)] == my_comm_rank(c); }

/* Hierarchical reductions need a commutative operation: a node's members
 * need not be consecutive ranks. */
static int commutative(MPI_Op op) {
    int yes = 0;
    return PMPI_Op_commutative(op, &yes) == MPI_SUCCESS && yes;
}

/* ---- Entry points (called by the MPI_ wrappers of block.c) -------------
 * On a mixed communicator: the node's members over the transport, the node
 * leaders over PMPI_ (as a blocking PMPI call, with the progress helper
 * when operations of ours are outstanding). */

/* ---- Two members with a CPU each: the pair line or a message each way ---
 * A barrier or small allreduce of two members is one word each way on the
 * pair line (both words and payloads on one cache line: each member's
 * store takes the line the other polls) or one message each way (each
 * member polls its own channel). Which is faster depends on the machine:
 * on the 2-vCPU Intel Xeon VM a message each way took 0.159-0.163 us per
 * barrier against the line's 0.199-0.205 (session 45, before the line's
 * fast path); on the 2-vCPU AMD EPYC (Zen 5) VM, with it, the line took
 * 0.066-0.072 against 0.078-0.080, and 0.21-0.22 against 0.31-0.32 in the
 * jobs where the host placed the two vCPUs far apart, while a small
 * allreduce took 0.095-0.098 by the line against 0.088-0.091 by messages
 * (lib-ab, 16 rounds per MPI, 2026-12-03). So each communicator times both on its first calls, in
 * alternating blocks of PAIR_BLOCK calls (line, messages, line, ...) over
 * PAIR_ROUNDS rounds, the first round not counted; each member keeps each
 * way's fastest block, the two members' are summed (PMPI_Allreduce) and
 * the way with the lower sum stays, the same on both. Blocks, not single
 * calls: a call is tens of nanoseconds, the clock read about twenty.
 * Alternating, fastest blocks: with one run of each way in a row (the
 * line's first) the picks followed the order and the odd interrupted run
 * (lib-ab, 16 rounds: the picked way's median 0.093 us where the line
 * alone took 0.075). */
enum { PAIR_BLOCK = 16, PAIR_ROUNDS = 5, PAIR_CALLS = 2 * PAIR_BLOCK * PAIR_ROUNDS };
enum { PAIR_BARRIER, PAIR_ALLREDUCE };

/* The way of a trial call (pair_trial_start/_end): 0 (the pair line), 1 (a
 * message each way). Once the trials picked, or where TOPOCOMM_ACCEL_PAIR
 * forced a way at the lane's setup, p->picked and p->choice say it. */
static int pair_trial_way(const struct acc_pairpick *p) { return p->calls / PAIR_BLOCK % 2; }

/* Starts a block's clock at its first call. */
static void pair_trial_start(struct acc_pairpick *p) {
    if (p->calls % PAIR_BLOCK == 0) p->start = PMPI_Wtime();
}

/* Records a trial call, failed calls included (both members then make the
 * PMPI_Allreduce at the same call, where one that skipped it would leave
 * the other waiting in it). After the last trial call both members keep
 * the way with the lower sum of their fastest blocks. Returns an MPI
 * error class. */
static int pair_trial_end(const acc_comm *c, struct acc_pairpick *p, int kind) {
    if (p->calls % PAIR_BLOCK == PAIR_BLOCK - 1 && p->calls >= 2 * PAIR_BLOCK) {
        double t = PMPI_Wtime() - p->start;
        double *best = &p->best[pair_trial_way(p)];
        if (*best == 0 || t < *best) *best = t;
    }
    if (++p->calls < PAIR_CALLS) return MPI_SUCCESS;
    double sum[2] = {0, 0};
    int err = ACC_BLOCKING(PMPI_Allreduce(p->best, sum, 2, MPI_DOUBLE, MPI_SUM, c->comm));
    p->choice = sum[1] < sum[0];
    p->picked = 1;
    if (err == MPI_SUCCESS && acc.verbose && my_comm_rank(c) == 0)
        fprintf(stderr,
                "topocomm accel: two-member %s: %s (the pair line %.3f us, a message each way "
                "%.3f us: mean of both members' fastest of %d blocks of %d calls)\n",
                kind == PAIR_BARRIER ? "barriers" : "allreduces of up to 12 bytes",
                p->choice ? "a message each way" : "the pair line",
                sum[0] * 1e6 / 2 / PAIR_BLOCK, sum[1] * 1e6 / 2 / PAIR_BLOCK, PAIR_ROUNDS - 1,
                PAIR_BLOCK);
    return err;
}

/* Two members, up to TC_PAIR_DATA bytes, on the pair line: each publishes
 * its block and reads the other's; both compute member 0's (op) member
 * 1's, so both get the same bits. */
static int allreduce_line(const acc_comm *c, const struct red *d, const void *src, void *rbuf) {
    /* Aligned for the reduction loops (16 >= TC_PAIR_DATA). */
    _Alignas(16) char other[16];
    const char *mine = src;
    char *out = rbuf;
    int rc = tc_err(pair_exchange(c->lane, mine, d->bytes, other));
    if (rc != MPI_SUCCESS || d->bytes == 0) return rc;
    /* The lower bound is 0 (allreduce_line_fits). Member 1: out = other
     * (op) mine, out possibly mine (in place). Member 0: other = mine (op)
     * other, then out = other (acc_reduce_to may not write over its lower
     * operand, which is mine, and out in place). */
    if (my_comm_rank(c) == 1)
        return acc_reduce_to(other, mine, out, d->count, d->bytes, d->type, d->op);
    rc = acc_reduce_local(mine, other, d->count, d->type, d->op);
    if (rc == MPI_SUCCESS) copy_few(out, other, d->bytes);
    return rc;
}

/* Whether an allreduce of d over c may go by allreduce_line. */
static int allreduce_line_fits(const acc_comm *c, const struct red *d) {
    return c->lane_pair && !c->lane_flat && d->lb == 0 && d->bytes <= TC_PAIR_DATA;
}

int acc_coll_barrier(MPI_Comm comm, int *rc) {
    acc_comm *c = coll_comm(comm);
    if (!c) return 0;
    int err;
    struct acc_pairpick *p = &c->pickp[PAIR_BARRIER];
    if (c->lane_pair && (c->lane_flat || (p->picked && !p->choice))) {
        err = tc_err(pair_exchange(c->lane, NULL, 0, NULL));
        acc.stats.coll_lane++;
    } else if (c->lane_pair && !p->picked) {
        pair_trial_start(p);
        if (pair_trial_way(p) == 0) {
            err = tc_err(pair_exchange(c->lane, NULL, 0, NULL));
            acc.stats.coll_lane++;
        } else {
            struct grp g = near_grp(c);
            err = tc_err(barrier(&g));
        }
        int rec = pair_trial_end(c, p, PAIR_BARRIER);
        if (err == MPI_SUCCESS) err = rec;
    } else if (c->lane_flat) {
        err = tc_err(lane_barrier(c));
        acc.stats.coll_lane++;
    } else if (!c->mixed) {
        struct grp g = near_grp(c);
        err = tc_err(barrier(&g));
    } else {
        struct grp g = node_part(c);
        err = tc_err(fan_in(&g));
        if (err == MPI_SUCCESS && am_leader(c)) err = ACC_BLOCKING(PMPI_Barrier(c->leaders));
        if (err == MPI_SUCCESS) err = tc_err(bcast_bytes(&g, NULL, 0, 0));
    }
    *rc = acc_error(comm, err);
    acc.stats.coll_tc++;
    return 1;
}

/* The broadcast of m over the transport (lanes, the tree, or leaders
 * across nodes), then the unpacking of a non-root member's copy. */
static int bcast_run(acc_comm *c, struct acc_msg *m, void *buf, int count, MPI_Datatype type,
                     int root, MPI_Comm comm) {
    int me = my_comm_rank(c), err;
    void *data = (void *)m->data;
    if (lane_fits(c, m->len) && acc_coll_lanes == LANES_ALL) {
        err = lane_bcast(c, data, m->len, root);
        acc.stats.coll_lane++;
    } else if (!c->mixed) {
        int groot;
        struct grp g = rooted_grp(c, root, &groot);
        err = tc_err(bcast_bytes(&g, data, m->len, groot));
    } else {
        /* Root -> its node's leader, leaders (PMPI), each leader -> its node. */
        struct grp g = node_part(c);
        int rl = c->leader_of[root];
        err = MPI_SUCCESS;
        if (root != rl && me == root) err = tc_err(xfer(&g, data, m->len, 0, NULL, 0, -1, T_ROOT));
        if (root != rl && me == rl) {
            int src = -1;
            for (int i = 0; i < g.n; i++)
                if (g.tc[i] == c->tc_rank[root]) src = i;
            err = tc_err(xfer(&g, NULL, 0, -1, data, m->len, src, T_ROOT));
        }
        if (err == MPI_SUCCESS && am_leader(c) && m->len > 0)
            err = ACC_BLOCKING(PMPI_Bcast(data, (int)m->len, MPI_BYTE, c->leaders_rank[rl],
                                          c->leaders));
        if (err == MPI_SUCCESS) err = tc_err(bcast_bytes(&g, data, m->len, 0));
    }
    if (me != root && err == MPI_SUCCESS)
        err = acc_unpack(m, m->len, buf, count, type, comm);
    else
        acc_tmp_free(m->tmp);
    acc.stats.coll_tc++;
    return err;
}

/* Crowded broadcasts from this size, three or more members, under Open MPI
 * (bcast_trial). Below it the tree stays: a member's messages go out at
 * once, and 16 KiB took 0.44-0.67 of Open MPI's time with 8 ranks on a
 * 2-vCPU Intel Xeon VM while its trials came out even (bench coll, 2 runs
 * of 3 jobs). */
enum { BCAST_PICK_MIN = 32u << 10 };

/* Whether a broadcast of len bytes over c is picked by trials: on a node
 * with more ranks than CPUs, three or more members, under Open MPI. The
 * transport's tree hands a whole message down ceil(log2 n) hops, each
 * waiting for a member to be scheduled; Open MPI's pipeline yields and
 * moves segments. Which wins depends on the machine: 8 ranks on a 2-vCPU
 * AMD EPYC VM, 1-16 MiB took 0.53-0.77 of Open MPI's time by the tree, on
 * a 2-vCPU Intel Xeon VM 256 KiB and 1 MiB took 1.33 and 1.53 of it
 * (bench coll, 3 jobs). MPICH is never tried: its collectives poll without
 * yielding on a crowded node (67-133 ms per 256 KiB-1 MiB broadcast of 8
 * ranks there), so the tree stays. The same answer on every member. */
static int bcast_picks(const acc_comm *c, size_t len) {
#ifdef OPEN_MPI
    return !coll_max_set && !c->mixed && c->size > 2 && len >= BCAST_PICK_MIN && crowded();
#else
    (void)c;
    (void)len;
    return 0;
#endif
}

/* Calls of each way in a trial run (bcast_trial, reduce_trial,
 * block_call): BCAST_WARM not counted, then BCAST_TRIALS timed, in a row.
 * Where every member's first call took LONG_CALL_S or more (the fastest
 * member's: a descheduled member's call of 0.1 ms can take a millisecond
 * on a crowded node), LONG_TRIALS timed, and the MPI's own run warms up
 * with LONG_WARM calls: its warm-up absorbs the other way's stragglers, a
 * few microseconds to a few hundred, nothing against a call of
 * milliseconds, where 24 calls of trials are most of what many programs
 * make of a size (a 2 MiB-block alltoall of 8 crowded ranks takes about
 * 0.1 s on the 2-vCPU Intel Xeon VM). A transport's run keeps BCAST_WARM:
 * its receivers choose their protocol per size from the first messages'
 * times (transport.md, "Choosing the rendezvous protocol per message"),
 * and with one warm-up call its 4 MiB broadcast of 8 crowded ranks lost
 * the trials it had won with six (6 alternating rounds). */
enum { BCAST_WARM = 6, BCAST_TRIALS = 6, BCAST_RUN = BCAST_WARM + BCAST_TRIALS };
enum { LONG_WARM = 1, LONG_TRIALS = 3 };
#define LONG_CALL_S 1e-3

/* Calls of way `way`'s trial run of p: BCAST_RUN until its first call has
 * set p->run (that call is the first way's, either length). */
static int run_of(const struct acc_pick *p, int way) {
    return p->run[way] ? p->run[way] : BCAST_RUN;
}
/* Timed calls per way (the same for both: their sums are compared). */
static int trial_timed(const struct acc_pick *p) { return run_of(p, 0) - BCAST_WARM; }
/* Whether p's next call is one of its trials. */
static int in_trials(const struct acc_pick *p) { return p->calls < run_of(p, 0) + run_of(p, 1); }
/* The way of p's next trial call: 0 (the first run), 1 (the second). */
static int trial_way(const struct acc_pick *p) { return p->calls >= run_of(p, 0); }

/* Records one call of way `alg` taking t seconds in a size class's trials
 * (each way's run in a row, its warm-up calls not counted); `mpi_second`:
 * whether way 1 is the MPI's own. After the first call every member
 * learns the fastest member's time of it (PMPI_Allreduce) and keeps the
 * run lengths that follow from it in p->run; after the last, member 0
 * sums every member's counted times of each way into sum[] and broadcasts
 * the way with the lower sum, which every member keeps in p->choice.
 * Called after every trial call, failed ones included (an error returned
 * to a program under MPI_ERRORS_RETURN): every member then makes these
 * PMPI calls at the same call, where a member that skipped them would
 * leave the others waiting in them for good. Returns an MPI error class
 * and, in *done, whether the class has just picked. */
static int trial_record(struct acc_pick *p, int alg, double t, int mpi_second, MPI_Comm comm,
                        double sum[2], int *done) {
    *done = 0;
    if (!p->run[0]) {
        double fastest = t;
        int err = ACC_BLOCKING(PMPI_Allreduce(&t, &fastest, 1, MPI_DOUBLE, MPI_MIN, comm));
        if (err != MPI_SUCCESS) return err;
        int timed = fastest >= LONG_CALL_S ? LONG_TRIALS : BCAST_TRIALS;
        p->run[0] = (unsigned char)(BCAST_WARM + timed);
        p->run[1] = (unsigned char)((timed == LONG_TRIALS && mpi_second ? LONG_WARM : BCAST_WARM) +
                                    timed);
    }
    int pos = alg ? p->calls - p->run[0] : p->calls;
    if (pos >= run_of(p, alg) - trial_timed(p)) p->best[alg] += t;
    *done = ++p->calls == p->run[0] + p->run[1];
    if (!*done) return MPI_SUCCESS;
    sum[0] = sum[1] = 0;
    int err = ACC_BLOCKING(PMPI_Reduce(p->best, sum, 2, MPI_DOUBLE, MPI_SUM, 0, comm));
    int choice = sum[1] < sum[0];
    if (err == MPI_SUCCESS) err = ACC_BLOCKING(PMPI_Bcast(&choice, 1, MPI_INT, 0, comm));
    p->choice = (unsigned char)choice;
    return err;
}

/* One call of a broadcast picked by trials (bcast_picks), per size class
 * (log2 of the bytes): a run of calls by the transport, then one by Open
 * MPI, each run's warm-up calls not counted (trial_record; a run's calls in a
 * row, as an application makes them back to back: a call right after one
 * of the other way pays for that one's stragglers, and the transport's
 * first calls of a size measure its protocols); member 0 then sums
 * every member's time of each over its trials (PMPI_Reduce) and
 * broadcasts the way with the lower sum, which every member keeps for the
 * class. Sums, not the fastest trials: on a crowded node the waits for
 * descheduled members are the cost (at 64 KiB the transport's fastest
 * trials were 0.3-0.7 of Open MPI's while its calls took 1.5-4x as long
 * on average). */
static int bcast_trial(acc_comm *c, int k, struct acc_msg *m, void *buf, int count,
                       MPI_Datatype type, int root, MPI_Comm comm) {
    struct acc_pick *p = &c->pickb[k];
    int alg = trial_way(p), err, done;
    double t0 = PMPI_Wtime();
    if (alg) {
        acc_tmp_free(m->tmp);
        err = ACC_BLOCKING(PMPI_Bcast(buf, count, type, root, comm));
        acc.stats.coll_plain++;
    } else {
        err = bcast_run(c, m, buf, count, type, root, comm);
    }
    double t = PMPI_Wtime() - t0, sum[2];
    /* Recorded after a failed call too (trial_record says why). */
    int rec = trial_record(p, alg, t, 1, comm, sum, &done);
    if (err != MPI_SUCCESS) return err;
    err = rec;
    if (done && err == MPI_SUCCESS && acc.verbose && my_comm_rank(c) == 0)
        fprintf(stderr,
                "topocomm accel: crowded broadcast of %zu-%zu bytes over %d members: %s "
                "(transport %.2f us, Open MPI %.2f us: mean of every member's %d timed calls)\n",
                (size_t)1 << k, ((size_t)2 << k) - 1, c->size,
                p->choice ? "Open MPI's own" : "the transport",
                sum[0] * 1e6 / c->size / trial_timed(p), sum[1] * 1e6 / c->size / trial_timed(p),
                trial_timed(p));
    return err;
}

int acc_coll_bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm, int *rc) {
    acc_comm *c = coll_comm(comm);
    if (!c || count < 0 || root < 0 || root >= c->size) return 0;
    struct acc_msg m;
    int me = my_comm_rank(c), err;
    err = me == root ? acc_pack(buf, count, type, comm, &m) : acc_recv_area(buf, count, type, &m);
    if (err != MPI_SUCCESS) return acc_coll_done(comm, err, rc);
    /* Two members: one message, which the transport moves faster than the
     * MPIs' pipelines at every size (dev VM, near: 4 MiB 81 us against
     * Open MPI's 272-326, 16 MiB 0.43-1.06 ms against 1.9-2.1). A node
     * with more ranks than CPUs: any size as well, since the transport
     * weighs two-copy by its copying there (4 ranks on the dev VM's 2
     * vCPUs: 1-16 MiB 0.39-0.40 of Open MPI's time, 8 ranks 0.53-0.77;
     * bench coll, 4 jobs), except where trials under Open MPI pick its own
     * (bcast_picks). More: the limit, above which the MPIs' pipelines beat
     * whole messages down a tree. */
    if (m.len > bcast_limit(c) && !any_size(c)) {
        acc_tmp_free(m.tmp);
        return 0;
    }
    if (bcast_picks(c, m.len)) {
        int k = size_class(m.len);
        struct acc_pick *p = &c->pickb[k];
        if (in_trials(p)) {
            *rc = acc_error(comm, bcast_trial(c, k, &m, buf, count, type, root, comm));
            return 1;
        }
        if (p->choice) {
            acc_tmp_free(m.tmp);
            return 0;
        }
    }
    *rc = acc_error(comm, bcast_run(c, &m, buf, count, type, root, comm));
    return 1;
}

/* Whether a large reduce stays with the MPI's own (under Open MPI only):
 * - with a CPU per rank, three or more members above the broadcast limit:
 *   Open MPI's pipeline up a chain into the root reduces each segment
 *   while it is in the cache; on the dev VM it took 3.5 ms for 16 MiB at
 *   2 ranks against 4.7 by blocks, with the scalar combine of then. Two
 *   members send one message (reduce_pair) and, with the vectorized
 *   combine, won at every size (4 MiB 182-189 us against Open MPI's
 *   309-337, 16 MiB 0.95 ms against 2.5-2.8);
 * - with a CPU per rank, more than DEEP_TREE members below the broadcast
 *   limit: the blocks' gather into the root funnels n - 1 messages into
 *   one rank, which Open MPI's chain beats there (16 ranks on the 16-core
 *   Intel Xeon VM, 5 jobs: 16 KiB 1.07, 64 KiB 1.13 of its time; 1 MiB
 *   0.82, kept; docs/collectives.md, "Uncrowded 8 and 16 ranks").
 * On a node with more ranks than CPUs, up to the broadcast limit, the
 * trials pick between the transport's two ways (reduce_picks) whatever
 * the block size. Until session 58, blocks larger than the transport
 * pushes at once (the eager floor, a slot there) went to Open MPI's own:
 * before the trials existed, 1 MiB by blocks with 8 ranks (128 KiB blocks)
 * had taken 1.20-1.39 of its time on the 2-vCPU Intel Xeon VM. With the
 * trials, on the 2-vCPU AMD EPYC (Zen 5) VM at 384 KiB-1 MiB, 3 and 4
 * ranks took 0.34-0.69 of the time of Open MPI's own under the
 * accelerator, 6 ranks 0.52-0.61, 8 ranks 0.78-0.83 (lib-ab.py, 6-10
 * rounds, medians; docs/collectives.md, session 58).
 * With two or more ranks per CPU the blocks take every size above the
 * broadcast limit: Open MPI's own large reduce depends on where the ranks
 * run, and under the accelerator they start spread (rank r on the r-th
 * CPU, modulo their number; transport.md). With 8 ranks on the 2-vCPU
 * Intel Xeon VM its 2, 4 and 8 MiB reduce took 1.28, 1.25 and 1.08-1.30
 * of plain Open MPI's time in alternating jobs, the blocks 1.06,
 * 0.80-0.98 and 0.87-1.28 (16 MiB even); with ranks 0-3 on one CPU and
 * 4-7 on the other Open MPI's own 4 MiB took 0.84: the placement, not the
 * accelerator, slows it. 4 ranks: 2-8 MiB 0.79-0.92 by blocks against
 * 0.94-1.02, 16 MiB 1.00-1.10 against 0.96-0.99. With fewer ranks per CPU
 * Open MPI's own stays (3 ranks: 2-16 MiB 1.03, 0.90, 0.45 against 1.15,
 * 1.09, 0.61 by blocks; 6-8 rounds each, docs/collectives.md).
 * Under MPICH the blocks won at every size (16 MiB: 5.8 ms against 22.9):
 * its collectives poll without yielding on a crowded node and take
 * milliseconds per call there (docs/collectives.md), where Open MPI's
 * yield (it turns mpi_yield_when_idle on when it sees more ranks than
 * CPUs).
 * The same answer on every member: the size and the node are. */
static int reduce_to_mpi(int members, size_t bytes) {
#ifdef OPEN_MPI
    if (members <= 2) return 0;
    if (!crowded()) return bytes > bcast_max || (members > DEEP_TREE && bytes < bcast_max);
    /* Two per CPU: blocks. */
    return bytes > bcast_max && acc.node_size < 2 * online_cpus();
#else
    (void)members;
    (void)bytes;
    return 0;
#endif
}

/* Largest crowded reduce whose way is picked by trials (reduce_picks):
 * beyond it the root alone would fold n - 1 whole vectors (and hold them:
 * n slots) of a size where the blocks spread that work over the CPUs. At
 * 1 MiB the trials already came out for the blocks with 8 ranks on the
 * 2-vCPU Intel Xeon VM (1.16 ms a call straight to the root, 1.02 by
 * blocks) and even with 4 (414 and 417 us). */
enum { REDUCE_PICK_MAX = 1u << 20 };

/* Whether a reduce of `bytes` over c picks its way by trials: on a node
 * with more ranks than CPUs, three to FLAT_ALL_MAX members (the root holds
 * a copy from each: at most 8 MiB; beyond, not measured), above the size that
 * goes straight to the root anyway (red_max). Straight to the root, every
 * sender's message completes without waiting for another member, where
 * the blocks' exchange waits for every member to be scheduled; but the
 * root folds everything itself. Which wins depends on the machine and the
 * size: 8 ranks on the 2-vCPU Intel Xeon VM, 32 KiB took 9-12 us
 * straight to the root against 51-54 by blocks, 64 KiB 20-23 against
 * 70-74, 128 KiB 57-97 against 111-153, 1 MiB lost (above).
 * Both ways fold every element in member order, x_0 (op) (x_1 (op) (...
 * (op) x_{n-1})): the same bits whichever is picked, run after run (which
 * is why the MPI's own, another order, is not among them: where
 * reduce_to_mpi gives it the size, nothing is picked). The same answer on
 * every member. */
static int reduce_picks(const acc_comm *c, size_t bytes) {
    return !coll_max_set && !c->mixed && c->size > 2 && c->size <= FLAT_ALL_MAX && crowded() &&
           bytes > red_max && bytes <= REDUCE_PICK_MAX && !reduce_to_mpi(c->size, bytes);
}

/* A reduce straight to the root (reduce_flat) from the user's buffers. */
static int reduce_flat_run(acc_comm *c, struct red *d, const void *src, void *rbuf, int root) {
    struct grp g = whole(c);
    acc.stats.coll_tc++;
    return reduce_flat(&g, d, (const char *)src + d->lb, (char *)rbuf + d->lb, root);
}

/* A reduce by blocks (reduce_split) over every member. */
static int reduce_blocks_run(acc_comm *c, struct red *d, const void *src, void *rbuf, int root) {
    struct grp g = whole(c);
    acc.stats.coll_tc++;
    return reduce_split(&g, d, src, rbuf, root, SPLIT_AUTO);
}

/* One call of a reduce picked by trials (reduce_picks), per size class, as
 * the broadcast's (bcast_trial): a run of calls straight to the root, then
 * one by blocks, each run's warm-up calls not counted (trial_record);
 * member 0 sums every member's times of each way and broadcasts the way
 * with the lower sum, which every member keeps for the class. */
static int reduce_trial(acc_comm *c, int k, struct red *d, const void *src, void *rbuf, int root,
                        MPI_Comm comm) {
    struct acc_pick *p = &c->pickr[k];
    int alg = trial_way(p), done;
    double t0 = PMPI_Wtime();
    int err = alg ? reduce_blocks_run(c, d, src, rbuf, root) : reduce_flat_run(c, d, src, rbuf, root);
    double t = PMPI_Wtime() - t0, sum[2];
    /* Recorded after a failed call too (trial_record says why). */
    int rec = trial_record(p, alg, t, 0, comm, sum, &done);
    if (err != MPI_SUCCESS) return err;
    err = rec;
    if (done && err == MPI_SUCCESS && acc.verbose && my_comm_rank(c) == 0)
        fprintf(stderr,
                "topocomm accel: crowded reduce of %zu-%zu bytes over %d members: %s "
                "(straight to the root %.2f us, by blocks %.2f us: mean of every member's %d "
                "timed calls)\n",
                (size_t)1 << k, ((size_t)2 << k) - 1, c->size,
                p->choice ? "by blocks" : "straight to the root",
                sum[0] * 1e6 / c->size / trial_timed(p), sum[1] * 1e6 / c->size / trial_timed(p),
                trial_timed(p));
    return err;
}

int acc_coll_reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                    int root, MPI_Comm comm, int *rc) {
    acc_comm *c = coll_comm(comm);
    struct red d;
    if (!c || root < 0 || root >= c->size || count < 0) return 0;
    const void *src = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    /* Large: by blocks, gathered at the root (as the allreduce). On a
     * crowded node, not while the straight-to-the-root path below takes
     * the size (up to red_max, the transport's eager size by default):
     * its senders' blocks complete into the root's slots without waiting
     * for it, where the blocks' exchange waits for every member to be
     * scheduled. 16 KiB on the Xeon dev VM's 2 vCPUs, 4 alternating jobs:
     * 4.2-5.9 against 30-39 us with 8 ranks (Open MPI 27-30), 4.2-5.5
     * against 9.8-14 with 4 (Open MPI 14-16; docs/collectives.md).
     * Above that, up to REDUCE_PICK_MAX, the first calls of each size
     * class pick between the two (reduce_picks). */
    if (!c->mixed && count >= c->size && acc_contiguous(count, type, &d.lb, &d.bytes) == 1 &&
        acc_coll_split_ok(d.bytes) && !(c->size > 2 && crowded() && d.bytes <= red_max)) {
        d.count = count;
        d.type = type;
        d.op = op;
        if (reduce_picks(c, d.bytes)) {
            int k = size_class(d.bytes);
            if (in_trials(&c->pickr[k])) {
                *rc = acc_error(comm, reduce_trial(c, k, &d, src, rbuf, root, comm));
                return 1;
            }
            if (!c->pickr[k].choice) {
                *rc = acc_error(comm, reduce_flat_run(c, &d, src, rbuf, root));
                return 1;
            }
        }
        if (reduce_to_mpi(c->size, d.bytes)) return 0;
        struct grp g = whole(c);
        /* Where gets apply, the way by trials: with 4 ranks on the 2-vCPU
         * AMD EPYC (Zen 5) VM, whose kernel copies between processes at 9-12
         * GB/s, a 2 MiB reduce took 653 us by gets, 356 by blocks put and
         * 319 by message (lib-ab.py, 6 rounds; plain Open MPI 723), with 8
         * ranks 4 MiB 4047, 2791 and 3341 (Open MPI 3109), where on the
         * 2-vCPU Intel Xeon VM the gets had won from 2 MiB. */
        *rc = acc_error(comm, c->size == 2 ? reduce_pair(&g, &d, src, rbuf, root)
                              : acc_coll_by_gets(c->size, d.bytes, root)
                                  ? reduction_large(c, &g, &d, src, rbuf, 1, root)
                                  : reduce_split(&g, &d, src, rbuf, root, SPLIT_AUTO));
        acc.stats.coll_tc++;
        return 1;
    }
    if (!red_ok(&d, count, type)) return 0;
    if (c->mixed && !commutative(op)) return 0;
    int me = my_comm_rank(c);
    int ierr = red_init(&d, src, count, type, op);
    if (ierr != MPI_SUCCESS) return acc_coll_done(comm, ierr, rc);
    if (lane_fits(c, d.bytes)) {
        *rc = acc_error(comm, lane_reduction(c, &d, src, rbuf, root));
        acc.stats.coll_tc++;
        acc.stats.coll_lane++;
        return 1;
    }
    int err, holder; /* comm rank that ends with the result in d.acc */
    if (!c->mixed && c->size > 2 && crowded()) {
        struct grp g = whole(c);
        err = reduce_flat(&g, &d, d.acc, d.acc, root);
        holder = root;
    } else if (!c->mixed && c->near_tc && commutative(op)) {
        /* The near order rooted at the root: the tree ends there. */
        int groot;
        struct grp g = rooted_grp(c, root, &groot);
        err = reduce_to_first(&g, &d);
        holder = root;
    } else if (!c->mixed) {
        struct grp g = whole(c);
        err = reduce_to_first(&g, &d);
        holder = 0;
        if (err == MPI_SUCCESS && root != 0) {
            if (me == 0) err = tc_err(xfer(&g, d.acc, d.bytes, root, NULL, 0, -1, T_RESULT));
            if (me == root) err = tc_err(xfer(&g, NULL, 0, -1, d.acc, d.bytes, 0, T_RESULT));
            holder = root;
        }
    } else {
        /* Node reduction to the leader, leaders (PMPI) to the root's leader,
         * then to the root. */
        struct grp g = node_part(c);
        int rl = c->leader_of[root];
        err = reduce_to_first(&g, &d);
        if (err == MPI_SUCCESS && am_leader(c)) {
            /* Not MPI_IN_PLACE at the root's leader: MPICH 4.0.2's reduce
             * of 1536 doubles or more over two ranks reads the MPI_IN_PLACE
             * address itself (SIGSEGV at 0xffff...) when the root is rank
             * 1, plain MPICH too; the result lands in d.tmp instead, then
             * becomes d.acc. The other leaders give no result buffer. */
            int at_root = me == rl;
            err = ACC_BLOCKING(PMPI_Reduce(d.acc - d.lb, at_root ? d.tmp - d.lb : NULL, count,
                                           type, op, c->leaders_rank[rl], c->leaders));
            if (at_root) {
                char *t = d.acc;
                d.acc = d.tmp;
                d.tmp = t;
            }
        }
        holder = rl;
        if (err == MPI_SUCCESS && root != rl) {
            int rsrc = -1;
            for (int i = 0; i < g.n; i++)
                if (g.tc[i] == c->tc_rank[root]) rsrc = i;
            if (me == rl) err = tc_err(xfer(&g, d.acc, d.bytes, rsrc, NULL, 0, -1, T_RESULT));
            if (me == root) err = tc_err(xfer(&g, NULL, 0, -1, d.acc, d.bytes, 0, T_RESULT));
            holder = root;
        }
    }
    if (err == MPI_SUCCESS && me == root && holder == root)
        memcpy((char *)rbuf + d.lb, d.acc, d.bytes);
    red_free(&d);
    *rc = acc_error(comm, err);
    acc.stats.coll_tc++;
    return 1;
}

/* ---- Large reductions through the staging areas -------------------------
 * Every member copies its contribution into its staging area in the
 * segment (tc_stage) once; each then folds its block of the elements
 * straight out of the others' areas into its own, and every member that
 * wants the result copies the others' reduced blocks out: about three
 * user-space copies of the vector per member, and no step that waits for
 * one particular member to be scheduled, only the barriers between the
 * phases. The messages' ways wait for each sender and receiver in turn
 * (slot rings of a few fragments), the puts and gets go through the
 * kernel's single copy, 9-12 GB/s on the 2-vCPU AMD EPYC (Zen 5) VM
 * against 20-90 GB/s for memcpy. Vectors larger than an area go in rounds
 * of an area per member. */

static char **stage_at; /* the members' areas, in member order */
static int stage_cap;
static size_t stage_len; /* bytes of an area: the same for every rank */

/* Fills stage_at for g's members; 0 when the areas cannot be had (then on
 * every member: the transport is the same library everywhere). */
static int stage_areas(const struct grp *g) {
    if (stage_cap < g->n) {
        char **p = realloc(stage_at, sizeof *p * (size_t)g->n);
        if (!p) return 0;
        stage_at = p;
        stage_cap = g->n;
    }
    for (int k = 0; k < g->n; k++) {
        void *at = NULL;
        size_t len = 0;
        if (tc_stage(g->tc[k], &at, &len) != 0) return 0;
        stage_at[k] = at;
        stage_len = len;
    }
    return 1;
}

/* Whether a reduction of d over g can go through the staging areas: the
 * same answer on every member (sizes, count and the library's area). */
static int stage_fits(const struct grp *g, const struct red *d) {
    if (!acc_stage || g->n < 2 || d->count < g->n || !stage_areas(g)) return 0;
    return stage_len / (d->bytes / (size_t)d->count) >= (size_t)g->n;
}

/* Between the phases: every member's copies before it (the barrier's
 * Release stores and Acquire loads, or its messages) happen before every
 * member's reads after it. */
static int stage_barrier(const acc_comm *c, const struct grp *g) {
    if (c->lane_flat && g->n == c->size) return lane_barrier(c);
    return barrier(g);
}

/* Member k's copy of a round's block [lo, ...) for a fold: this member's
 * from its own buffer `x`, the others' from their areas. */
static const char *staged_operand(const struct grp *g, int k, const char *x, size_t lo) {
    return (k == g->me ? x : stage_at[k]) + lo;
}

/* MPI_Allreduce (root GETS_ALL) or MPI_Reduce of d over g (all of c)
 * through the staging areas, in rounds of up to an area per member. Each
 * member's block of a round is folded x_0 (op) (x_1 (op) (...)) as every
 * other way folds it: the same bits whichever way is picked. */
static int reduce_staged(const acc_comm *c, const struct grp *g, struct red *d, const void *src,
                         void *rbuf, int root) {
    if (!stage_areas(g)) return MPI_ERR_INTERN; /* stage_fits said yes: cannot happen */
    int n = g->n, me = g->me, all = root < 0 || me == root, rc = 0, prev = -1;
    int err = MPI_SUCCESS; /* a failed fold: the barriers still run, for the others */
    size_t esz = d->bytes / (size_t)d->count, per_round = stage_len / esz;
    const char *in = (const char *)src + d->lb;
    char *out = all ? (char *)rbuf + d->lb : NULL;
    for (size_t off = 0; off < (size_t)d->count && rc == 0; off += per_round) {
        size_t left = (size_t)d->count - off;
        int cnt = (int)(left < per_round ? left : per_round), first, num;
        struct blocks b = {cnt, n, NULL};
        acc_block_of(&b, me, &first, &num);
        /* A shorter last round moves the blocks: a member still copying
         * this member's reduced block out of its area must be done before
         * the copy-in below overwrites it. */
        if (prev >= 0 && cnt != prev) rc = stage_barrier(c, g);
        prev = cnt;
        const char *x = in + off * esz;
        char *mine = stage_at[me];
        size_t lo = (size_t)first * esz, hi = (size_t)(first + num) * esz;
        /* My own block is read by me alone: straight from my buffer. */
        memcpy(mine, x, lo);
        memcpy(mine + hi, x + hi, (size_t)cnt * esz - hi);
        acc.stats.coll_staged_bytes += (size_t)cnt * esz - (hi - lo);
        if (rc == 0) rc = stage_barrier(c, g);
        if (rc != 0) break;
        char *res = mine + lo;
        if (num > 0 && err == MPI_SUCCESS) {
            err = acc_reduce_to(staged_operand(g, n - 2, x, lo) - d->lb,
                                staged_operand(g, n - 1, x, lo) - d->lb, res - d->lb, num,
                                hi - lo, d->type, d->op);
            for (int k = n - 3; k >= 0 && err == MPI_SUCCESS; k--)
                err = acc_reduce_local(staged_operand(g, k, x, lo) - d->lb, res - d->lb, num,
                                       d->type, d->op);
            if (all) memcpy(out + off * esz + lo, res, hi - lo);
        }
        rc = stage_barrier(c, g);
        for (int k = 0; k < n && rc == 0 && all; k++) {
            if (k == me) continue;
            int f, m;
            acc_block_of(&b, k, &f, &m);
            memcpy(out + (off + (size_t)f) * esz, stage_at[k] + (size_t)f * esz, (size_t)m * esz);
        }
    }
    /* The areas are free again for the next collective once every member
     * has copied its blocks out. */
    if (rc == 0) rc = stage_barrier(c, g);
    return rc != 0 ? tc_err(rc) : err;
}

/* The ways a large allreduce of d over g can take (enum ar_way), in trial
 * order, into w; returns how many. `split`: the call is one of blocks
 * (count >= members, SPLIT_MIN and up), else a two-member one above
 * XFER_EAGER. The same on every member: the sizes, the pair's fragment
 * (in the shared segment) and the job-wide answer of single copy. A way
 * forced by TOPOCOMM_ACCEL_ALLREDUCE is the only one where it applies. */
static int ar_ways(const struct grp *g, const struct red *d, int split, int root,
                   unsigned char w[AR_NWAYS]) {
    int n = 0;
    if (g->n == 2) {
        w[n++] = AR_WHOLE;
        if (d->count >= 2) {
            w[n++] = AR_HALVES;
            size_t piece = pair_piece(g), esz = d->bytes / (size_t)d->count;
            size_t h0 = (size_t)(d->count - d->count / 2) * esz;
            if (piece && puts_on() && pair_piece_set < 0) piece = put_piece(piece, h0);
            if (piece && h0 >= PAIR_PIECES_MIN * piece) w[n++] = AR_PIECES;
        }
    } else {
        w[n++] = AR_BLOCKS;
        if (puts_on()) w[n++] = AR_PUTS;
    }
    if (split && acc_coll_by_gets(g->n, d->bytes, root)) w[n++] = AR_GETS;
    if (stage_fits(g, d)) w[n++] = AR_STAGED;
    if (root != GETS_ALL) return n; /* TOPOCOMM_ACCEL_ALLREDUCE: allreduces only */
    for (int i = 0; i < n; i++)
        if (w[i] == ar_forced) {
            w[0] = w[i];
            return 1;
        }
    return n;
}

/* One large allreduce (root GETS_ALL) or reduce by way w. */
static int ar_run(const acc_comm *c, const struct grp *g, struct red *d, const void *src,
                  void *rbuf, int root, int w) {
    switch (w) {
    case AR_WHOLE: return allreduce_whole2(g, d, src, rbuf);
    case AR_HALVES: return allreduce_pair(g, d, src, rbuf, 0);
    case AR_PIECES: return allreduce_pair(g, d, src, rbuf, 1);
    case AR_BLOCKS: return reduce_split(g, d, src, rbuf, root, SPLIT_MSGS);
    case AR_PUTS: return reduce_split(g, d, src, rbuf, root, SPLIT_PUTS);
    case AR_STAGED: return reduce_staged(c, g, d, src, rbuf, root);
    default: return reduce_split(g, d, src, rbuf, root, SPLIT_GETS);
    }
}

/* Trials of a large allreduce: rounds of one call of each way, AR_WARM
 * rounds not counted, then AR_TRIALS timed; where every member's first
 * call took LONG_CALL_S or more, AR_LONG_WARM and AR_LONG_TRIALS (a 16 MiB
 * allreduce of 4 crowded ranks takes about 11 ms). Rounds, not each way's
 * calls in a row: on the 2-vCPU AMD EPYC VM a job's first ~400 1 MiB
 * allreduces each got faster than the one before, under plain Open MPI
 * too (means of 40 calls: 378, 292, 242, ... 153 us), which in runs in a
 * row favoured the way tried last. The warm-up rounds cover the
 * transport's first tries of each protocol for a new message size (it
 * tries the other after 2 messages: transport.md, "Choosing the
 * rendezvous protocol per message"). */
enum { AR_WARM = 3, AR_TRIALS = 4, AR_LONG_WARM = 2, AR_LONG_TRIALS = 2 };

/* An allreduce (root GETS_ALL) above the tree sizes (split: by blocks;
 * else two members above XFER_EAGER), or a reduce to root of three or
 * more members by blocks where gets apply (acc_coll_by_gets; below, its
 * blocks are put where single copy works, else sent: SPLIT_AUTO). Which
 * way wins depends on the machine as much as on the size: on the 2-vCPU
 * Intel Xeon VM (model 167) the gets won from 64 KiB with 4 crowded ranks
 * and from 128 KiB with 2, on a 2-vCPU AMD EPYC (Zen 3) VM, where a single copy by the kernel runs at 8-9 GB/s against
 * 25-34 GB/s for a user-space memcpy of the same bytes, the halves by
 * message took 0.64-0.68 of the gets' time at 1-4 MiB with 2 ranks and
 * the blocks by message 0.64 of it at 1 MiB with 4 crowded ranks, while
 * the gets still won at 16 MiB (docs/collectives.md, "Large allreduces:
 * the way picked by trials"). So each communicator runs every way that
 * applies on its first calls of each size class (log2 of the bytes),
 * then member 0 sums per way every member's fastest timed call (on a
 * crowded node: all its timed calls; PMPI_Reduce) and broadcasts the way
 * with the lowest sum, which every member keeps. Every way gives the same
 * bits, so the pick does not change results (which is why the MPI's own,
 * another order, is not among them). */
static int reduction_large(acc_comm *c, const struct grp *g, struct red *d, const void *src,
                           void *rbuf, int split, int root) {
    unsigned char w[AR_NWAYS];
    int nw = ar_ways(g, d, split, root, w);
    if (nw == 1) return ar_run(c, g, d, src, rbuf, root, w[0]);
    int k = size_class(d->bytes);
    struct acc_pickw *p = root == GETS_ALL ? &c->pickar[k] : &c->pickrl[k];
    if (!p->nways) {
        memcpy(p->ways, w, (size_t)nw);
        p->nways = (unsigned char)nw;
    }
    if (p->run && p->calls >= p->nways * p->run)
        return ar_run(c, g, d, src, rbuf, root, p->ways[p->choice]);
    int i = p->calls % p->nways, round = p->calls / p->nways;
    double t0 = PMPI_Wtime();
    int rc = ar_run(c, g, d, src, rbuf, root, p->ways[i]);
    double t = PMPI_Wtime() - t0;
    /* Every member makes these PMPI calls at the same call, failed ones
     * included (trial_record says why). */
    if (!p->run) {
        double fastest = t;
        int err = ACC_BLOCKING(PMPI_Allreduce(&t, &fastest, 1, MPI_DOUBLE, MPI_MIN, c->comm));
        if (err != MPI_SUCCESS) return err;
        p->run = (unsigned char)(fastest >= LONG_CALL_S ? AR_LONG_WARM + AR_LONG_TRIALS
                                                        : AR_WARM + AR_TRIALS);
    }
    int warm = p->run == AR_LONG_WARM + AR_LONG_TRIALS ? AR_LONG_WARM : AR_WARM;
    if (round >= warm) {
        p->sum[i] += t;
        if (round == warm || t < p->best[i]) p->best[i] = t;
    }
    if (++p->calls < p->nways * p->run) return rc;
    /* With a CPU per member, the fastest timed call of each way: a way's
     * first calls of a new size are its slowest (the transport's first
     * tries of each protocol for it; on the 2-vCPU AMD EPYC VM the halves
     * of 1 MiB took 110-280 us a call over their calls 4 to 13, 95-100
     * from the 20th), and the fastest is the nearest to what the way does
     * once settled. On a crowded node the sums: there a member's fastest
     * call says little of how long the others waited for it to be
     * scheduled (trial_record). */
    int by_sum = crowded();
    double sum[AR_NWAYS] = {0};
    int choice = 0;
    int err = ACC_BLOCKING(PMPI_Reduce(by_sum ? p->sum : p->best, sum, p->nways, MPI_DOUBLE,
                                       MPI_SUM, 0, c->comm));
    for (int j = 1; j < p->nways; j++)
        if (sum[j] < sum[choice]) choice = j;
    if (err == MPI_SUCCESS) err = ACC_BLOCKING(PMPI_Bcast(&choice, 1, MPI_INT, 0, c->comm));
    p->choice = (unsigned char)choice;
    if (acc.verbose && g->me == 0) {
        char line[256];
        int at = 0, timed = p->run - warm;
        for (int j = 0; j < p->nways && at < (int)sizeof line; j++)
            at += snprintf(line + at, sizeof line - (size_t)at, "%s%s %.2f us", j ? ", " : "",
                           ar_name[p->ways[j]], sum[j] * 1e6 / g->n / (by_sum ? timed : 1));
        fprintf(stderr,
                "topocomm accel: %s of %zu-%zu bytes over %d members: %s (%s: "
                "%s every member's %d timed calls)\n",
                root == GETS_ALL ? "allreduce" : "reduce", (size_t)1 << k, ((size_t)2 << k) - 1,
                g->n, ar_name[p->ways[choice]], line,
                by_sum ? "means of" : "means over the members of the fastest of", timed);
    }
    return rc != MPI_SUCCESS ? rc : err;
}

int acc_coll_allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm, int *rc) {
    acc_comm *c = coll_comm(comm);
    struct red d;
    if (!c || count < 0) return 0;
    const void *src = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    /* The layout once (it was looked up twice per call: a fifth of a small
     * allreduce's own instructions). */
    int contiguous = acc_contiguous(count, type, &d.lb, &d.bytes) == 1;
    d.count = count;
    d.type = type;
    d.op = op;
    /* Two members with a CPU each whose trials picked the pair line: first,
     * before the checks of the other ways (a 2-rank 8-byte allreduce's
     * time is a few hundred instructions and one line's transfer). */
    const struct acc_pairpick *pp = &c->pickp[PAIR_ALLREDUCE];
    if (pp->picked && !pp->choice && contiguous && d.bytes <= red_max &&
        allreduce_line_fits(c, &d)) {
        *rc = acc_error(comm, allreduce_line(c, &d, src, rbuf));
        acc.stats.coll_tc++;
        acc.stats.coll_lane++;
        return 1;
    }
    /* Large: by blocks (every member sees the same size, count and limit:
     * MPI requires equal counts and datatypes), also on a node with more
     * ranks than CPUs. There, blocks larger than the transport pushes at
     * once went to Open MPI's own until the combine was vectorized (1 MiB
     * had taken 427 us against Open MPI's 343 with 4 ranks on the dev VM's
     * 2 vCPUs); since then the blocks took 0.70-0.87 of Open MPI's time at
     * 1 MiB and 0.71-0.91 at 16 MiB with 4 ranks, 0.78-0.92 and 0.78-0.84
     * with 8 (bench coll, 4-8 jobs; 4 MiB with 4 ranks: 0.95-1.07, level). */
    if (!c->mixed && count >= c->size && contiguous && acc_coll_split_ok(d.bytes)) {
        struct grp g = whole(c);
        *rc = acc_error(comm, reduction_large(c, &g, &d, src, rbuf, 1, GETS_ALL));
        acc.stats.coll_tc++;
        return 1;
    }
    if (!contiguous || d.bytes > red_max) return 0;
    if (c->mixed && !commutative(op)) return 0;
    if (!c->mixed && c->size == 2 && d.bytes > XFER_EAGER) {
        struct grp g = whole(c);
        *rc = acc_error(comm, reduction_large(c, &g, &d, src, rbuf, 0, GETS_ALL));
        acc.stats.coll_tc++;
        return 1;
    }
    if (!c->mixed && c->size == 2 && !lane_fits(c, d.bytes) && d.bytes <= XFER_EAGER) {
        /* The pair line once picked: above. */
        struct grp g = whole(c);
        struct acc_pairpick *p = &c->pickp[PAIR_ALLREDUCE];
        int err, rec = MPI_SUCCESS, line = allreduce_line_fits(c, &d);
        if (line && !p->picked) {
            pair_trial_start(p);
            if (pair_trial_way(p) == 0) {
                err = allreduce_line(c, &d, src, rbuf);
                acc.stats.coll_lane++;
            } else {
                err = allreduce_two_small(&g, &d, src, rbuf);
            }
            rec = pair_trial_end(c, p, PAIR_ALLREDUCE);
        } else {
            /* Messages picked, or no line (a picked line went above). */
            err = allreduce_two_small(&g, &d, src, rbuf);
        }
        *rc = acc_error(comm, err == MPI_SUCCESS ? rec : err);
        acc.stats.coll_tc++;
        return 1;
    }
    int ierr = red_init(&d, src, count, type, op);
    if (ierr != MPI_SUCCESS) return acc_coll_done(comm, ierr, rc);
    if (lane_fits(c, d.bytes)) {
        *rc = acc_error(comm, lane_reduction(c, &d, src, rbuf, -1));
        acc.stats.coll_tc++;
        acc.stats.coll_lane++;
        return 1;
    }
    int err;
    if (!c->mixed && one_hop(c->size)) {
        struct grp g = whole(c);
        err = allreduce_flat(&g, &d);
    } else if (!c->mixed) {
        struct grp g = c->near_tc && commutative(op) ? near_grp(c) : whole(c);
        err = allreduce_grp(&g, &d);
    } else {
        /* Node reduction to the leader, leaders' allreduce (PMPI), node
         * broadcast. */
        struct grp g = node_part(c);
        err = reduce_to_first(&g, &d);
        if (err == MPI_SUCCESS && am_leader(c))
            err = ACC_BLOCKING(
                PMPI_Allreduce(MPI_IN_PLACE, d.acc - d.lb, count, type, op, c->leaders));
        if (err == MPI_SUCCESS) err = tc_err(bcast_bytes(&g, d.acc, d.bytes, 0));
    }
    if (err == MPI_SUCCESS) memcpy((char *)rbuf + d.lb, d.acc, d.bytes);
    red_free(&d);
    *rc = acc_error(comm, err);
    acc.stats.coll_tc++;
    return 1;
}

/* ---- Gather, scatter, allgather, alltoall: equal blocks, all-local ------
 * Every block goes straight from its owner to its reader (one message per
 * pair, all posted before any is waited for): on one node a message costs
 * one copy whatever the distance, so a tree would only add rounds. The
 * decision to run here depends only on values every member agrees on (the
 * communicator, the block's byte count, which MPI requires to match
 * between senders and receivers, and its size), never on one member's
 * datatype layout: non-contiguous layouts are packed. */

/* struct reqs (the requests of one collective): coll.h. */

int acc_reqs_init(struct reqs *q, int n) {
    q->n = 0;
    q->r = n <= 64 ? q->small : malloc(sizeof(tc_request) * (size_t)n);
    return q->r ? MPI_SUCCESS : MPI_ERR_NO_MEM;
}

/* Waits for every posted request (all of them, also after a failure, so
 * none is left pointing at the caller's buffers; those already waited for
 * are TC_REQUEST_NULL) and frees the array. */
int acc_reqs_wait(struct reqs *q) {
    int rc = 0;
    for (int i = 0; i < q->n; i++) {
        tc_status ts;
        if (q->r[i] == TC_REQUEST_NULL) continue;
        int e = acc_wait_tc(&q->r[i], &ts);
        if (rc == 0) rc = e;
    }
    if (q->r != q->small) free(q->r);
    return rc;
}

static char empty_block;
#define NONEMPTY(p, len) ((len) ? (void *)(p) : (void *)&empty_block)

int acc_post_recv(const struct grp *g, struct reqs *q, void *buf, size_t len, int src, int tag) {
    return tc_irecv_x(NONEMPTY(buf, len), len, g->tc[src], tag, g->ctx, &q->r[q->n++]);
}

int acc_post_send(const struct grp *g, struct reqs *q, const void *buf, size_t len, int dst,
                  int tag) {
    return tc_isend_x(NONEMPTY(buf, len), len, g->tc[dst], tag, g->ctx, 0, &q->r[q->n++]);
}

/* post_send to a member blocked in its receive of it (send_waited). */
static int post_send_waited(const struct grp *g, struct reqs *q, const void *buf, size_t len,
                            int dst, int tag) {
    return tc_isend_x(NONEMPTY(buf, len), len, g->tc[dst], tag, g->ctx, TC_SEND_WAITED,
                      &q->r[q->n++]);
}

/* ---- Large reductions by blocks: a reduce-scatter, then whatever moves
 * the reduced blocks (an allgather for MPI_Allreduce, a gather to the root
 * for MPI_Reduce, nothing for MPI_Reduce_scatter(_block)).
 * The vector is cut into n blocks of whole elements and member j reduces
 * block j: every member sends block j of its contribution straight to
 * member j, which folds the n copies in member order,
 *   x_0 (op) (x_1 (op) (... (op) x_{n-1})),
 * taking them from the top as they arrive. Each block is reduced once, by
 * one member, in one order, so every member gets the same bits, run after
 * run (also for non-commutative operations). Against the whole-vector
 * trees, which copy, exchange and reduce the whole vector log2(n) times,
 * each member moves (n-1)/n of it per phase and reduces n-1 blocks of 1/n;
 * the MPIs switch to the same shape at these sizes. All receives of a
 * phase are posted before its sends, so every rendezvous can start at
 * once. Member n-1's copy is received straight into the member's result
 * block, the others into a working area; when the result block holds the
 * member's own contribution (in place), that is moved aside first.
 * Cutting the phase into 64 or 256 KiB chunks, received into a small ring
 * and reduced while in the cache, did not pay on the dev VM: within 10%
 * either way, slower at 64 KiB-1 MiB (docs/collectives.md "Sizes"). */

/* Block j of `count` elements cut n ways (counts NULL), or of the given
 * counts (MPI_Reduce_scatter's): its first element and count. */
void acc_block_of(const struct blocks *b, int j, int *first, int *cnt) {
    if (b->counts) {
        int f = 0;
        for (int i = 0; i < j; i++) f += b->counts[i];
        *first = f;
        *cnt = b->counts[j];
        return;
    }
    int q = b->count / b->n, r = b->count % b->n;
    *first = j * q + (j < r ? j : r);
    *cnt = q + (j < r);
}

int acc_coll_reduce_blocks(const struct grp *g, struct red *d, const struct blocks *b,
                           const char *mine, char **T, int aliased) {
    int n = g->n, me = g->me, top = n - 1, first, cnt;
    size_t esz = d->bytes / (size_t)d->count; /* contiguous: count x size bytes */
    acc_block_of(b, me, &first, &cnt);
    size_t my_off = (size_t)first * esz, my_len = (size_t)cnt * esz, slot = round64(my_len);
    /* Slot j: member j's copy of my block; slot n: my result if *T is NULL. */
    char *w = work_area(slot * (size_t)(n + 1));
    struct reqs q;
    if (!w) return MPI_ERR_NO_MEM;
    if (!*T) *T = w + (size_t)n * slot;
    char *t = *T;
    int err = acc_reqs_init(&q, 2 * n);
    if (err != MPI_SUCCESS) return err;
    if (aliased && me != top) memcpy(w + (size_t)me * slot, t, my_len);
    /* Receives in member order: member j's at index j - (j > me). */
    int terr = 0;
    for (int j = 0; j < n && terr == 0; j++)
        if (j != me)
            terr = acc_post_recv(g, &q, j == top ? t : w + (size_t)j * slot, my_len, j,
                                 T_ALLREDUCE);
    for (int k = 1; k < n && terr == 0; k++) {
        int dst = (me + k) % n, f, c;
        acc_block_of(b, dst, &f, &c);
        terr = acc_post_send(g, &q, mine + (size_t)f * esz, (size_t)c * esz, dst, T_ALLREDUCE);
    }
    /* The fold from the top: t = x_{n-1}, then t = x_j (op) t. The top
     * member's own block goes into t with the first step (acc_reduce_to:
     * t = x_{n-2} (op) mine, one pass), not copied there first. */
    int top_in_t = !(me == top && !aliased);
    if (terr == 0 && !top_in_t && n == 1) { /* no fold step to take it in */
        memcpy(t, mine + my_off, my_len);
        top_in_t = 1;
    }
    for (int j = top; j >= 0 && terr == 0 && err == MPI_SUCCESS; j--) {
        const char *x;
        if (j == me) {
            x = aliased ? w + (size_t)me * slot : mine + my_off;
        } else {
            tc_status ts;
            terr = acc_wait_tc(&q.r[j - (j > me)], &ts);
            if (terr == 0 && ts.count != my_len) terr = TC_ERR_TRUNCATED;
            x = w + (size_t)j * slot;
        }
        if (terr == 0 && j < top && cnt > 0) {
            if (top_in_t) {
                err = acc_reduce_local(x - d->lb, t - d->lb, cnt, d->type, d->op);
            } else {
                err = acc_reduce_to(x - d->lb, mine + my_off - d->lb, t - d->lb, cnt, my_len,
                                    d->type, d->op);
                top_in_t = 1;
            }
        }
    }
    int werr = acc_reqs_wait(&q); /* the sends, and everything after a failure */
    if (terr == 0) terr = werr;
    return err != MPI_SUCCESS ? err : tc_err(terr);
}

/* The blocks' phase 2: root < 0: every member's reduced block t to every
 * member's `out` (an allgather), else to the root's only. */
static int blocks_out(const struct grp *g, const struct blocks *b, size_t esz, const char *t,
                      char *out, int root) {
    int n = g->n, me = g->me, first, cnt;
    acc_block_of(b, me, &first, &cnt);
    struct reqs q;
    int err = acc_reqs_init(&q, 2 * n), terr = 0;
    if (err != MPI_SUCCESS) return err;
    for (int k = 1; k < n && terr == 0 && (root < 0 || me == root); k++) {
        int from = (me - k + n) % n, f, c;
        acc_block_of(b, from, &f, &c);
        terr = acc_post_recv(g, &q, out + (size_t)f * esz, (size_t)c * esz, from, T_RESULT);
    }
    for (int k = 1; k < n && terr == 0; k++) {
        int dst = (me + k) % n;
        if (root < 0 || dst == root)
            terr = acc_post_send(g, &q, t, (size_t)cnt * esz, dst, T_RESULT);
    }
    int werr = acc_reqs_wait(&q);
    return tc_err(terr ? terr : werr);
}

/* A small reduce with every member's block sent straight to the root,
 * which folds them in member order from the top, x_0 (op) (x_1 (op) (...
 * (op) x_{n-1})), as the blocks do (deterministic, any operation): one
 * hop, where the binomial tree makes each inner member wait for its
 * children to be scheduled before it can send. For nodes with more ranks
 * than CPUs. */
static char *flat_area;
static size_t flat_cap;

/* flat_area with room for n slots of `slot` bytes (grow-only, kept).
 * Never left unallocated: a zero-count call has slots of 0 bytes, and
 * the area's address is still taken (it had failed those calls with
 * MPI_ERR_NO_MEM, found by scripts/coll-fuzz.py). */
static int flat_slots(size_t slot, int n) {
    size_t need = slot * (size_t)n;
    if (need < 64) need = 64;
    if (need > flat_cap) {
        free(flat_area);
        flat_area = aligned_alloc(64, need);
        flat_cap = flat_area ? need : 0;
    }
    return flat_area != NULL;
}

/* out := the fold of the n slots of flat_area (slot j: member j's
 * block; the caller's own copied into its slot), from the top. */
static int fold_slots(struct red *d, int n, size_t slot, char *out) {
    char *t = flat_area + (size_t)(n - 1) * slot;
    int err = MPI_SUCCESS;
    for (int j = n - 2; j >= 0 && err == MPI_SUCCESS; j--)
        err = acc_reduce_local(flat_area + (size_t)j * slot - d->lb, t - d->lb, d->count, d->type,
                               d->op);
    if (err == MPI_SUCCESS) memcpy(out, t, d->bytes);
    return err;
}

/* d->bytes from `own` (this member's contribution) to the root, which
 * folds all n into `out` (own and out may be one buffer). */
static int reduce_flat(const struct grp *g, struct red *d, const char *own, char *out, int root) {
    int n = g->n, me = g->me;
    if (me != root) return tc_err(xfer(g, own, d->bytes, root, NULL, 0, -1, T_REDUCE));
    size_t slot = round64(d->bytes);
    if (!flat_slots(slot, n)) return MPI_ERR_NO_MEM;
    struct reqs q;
    int err = acc_reqs_init(&q, n), terr = 0;
    if (err != MPI_SUCCESS) return err;
    for (int j = 0; j < n && terr == 0; j++)
        if (j != me)
            terr = acc_post_recv(g, &q, flat_area + (size_t)j * slot, d->bytes, j, T_REDUCE);
    int werr = acc_reqs_wait(&q);
    if (terr == 0) terr = werr;
    if (terr != 0) return tc_err(terr);
    memcpy(flat_area + (size_t)me * slot, own, d->bytes);
    return fold_slots(d, n, slot, out);
}

/* A small allreduce with every member's block sent straight to every
 * other member, each folding the n blocks in member order from the top
 * (the same bits on every member). For nodes with more ranks than CPUs:
 * one hop instead of log2(n) rounds, each of which waited for its partner
 * to be scheduled. n(n-1) messages, so up to FLAT_ALL_MAX members (as far
 * as measured). Alternating runs of `topocomm bench coll --oversubscribe
 * --vs openmpi --collectives allreduce --sizes 8,1K`, ratio to Open MPI:
 * 8 ranks on 2 CPUs, 8 B 0.99-1.07 -> 0.63-0.69, 1 KiB 0.61-0.62 ->
 * 0.50-0.53; 4 ranks 8 B 0.70-0.72 -> 0.56-0.63, 1 KiB unchanged
 * (0.42-0.47). A reduction to one member and a broadcast back took
 * 1.0-2.3x at 4 ranks: two hops. (FLAT_ALL_MAX: above.) */
static int allreduce_flat(const struct grp *g, struct red *d) {
    int n = g->n, me = g->me;
    size_t slot = round64(d->bytes);
    if (!flat_slots(slot, n)) return MPI_ERR_NO_MEM;
    struct reqs q;
    int err = acc_reqs_init(&q, 2 * n), terr = 0;
    if (err != MPI_SUCCESS) return err;
    for (int k = 1; k < n && terr == 0; k++) {
        int j = (me - k + n) % n;
        terr = acc_post_recv(g, &q, flat_area + (size_t)j * slot, d->bytes, j, T_ALLREDUCE);
    }
    for (int k = 1; k < n && terr == 0; k++)
        terr = acc_post_send(g, &q, d->acc, d->bytes, (me + k) % n, T_ALLREDUCE);
    int werr = acc_reqs_wait(&q);
    if (terr == 0) terr = werr;
    if (terr != 0) return tc_err(terr);
    memcpy(flat_area + (size_t)me * slot, d->acc, d->bytes);
    return fold_slots(d, n, slot, d->acc);
}

/* The addresses of the other members' results (blocks_put), grow-only. */
static uint64_t *peer_outs;
static int peer_outs_cap;

/* The blocks' phase 2 by puts: this member's reduced block t written into
 * every receiving member's result (all for root < 0, else the root's)
 * with tc_put_x while it is still in this core's cache, where blocks_out
 * sends it and each receiver copies it in. `at` holds the receivers'
 * result addresses (posted before phase 1, so they are there when the
 * fold is done; q_at: their receives). Then one 8-byte word to each
 * receiver: 1 when its block was put (a put is complete when tc_put_x
 * returns, so the word orders it before the receiver returns), 0 when
 * refused, and then the block follows by message. */
static int blocks_put(const struct grp *g, const struct blocks *b, size_t esz, const char *t,
                      char *out, int root, struct reqs *q_at) {
    int n = g->n, me = g->me, first, cnt, recv = root < 0 || me == root;
    acc_block_of(b, me, &first, &cnt);
    size_t len = (size_t)cnt * esz;
    /* peer_outs: [0, n) the receivers' result addresses, [n, 2n) their
     * words to me, [2n, 3n) mine to them (kept until reqs_wait). */
    uint64_t *at = peer_outs, *theirs = peer_outs + n, *words = peer_outs + 2 * n;
    int terr = acc_reqs_wait(q_at);
    struct reqs q;
    int err = acc_reqs_init(&q, 3 * n);
    if (err != MPI_SUCCESS) return err;
    for (int k = 1; k < n && terr == 0 && recv; k++) {
        int from = (me - k + n) % n;
        terr = acc_post_recv(g, &q, &theirs[from], sizeof *theirs, from, T_RESULT);
    }
    for (int k = 1; k < n && terr == 0; k++) {
        int dst = (me + k) % n;
        if (root >= 0 && dst != root) continue;
        int put = tc_put_x(g->tc[dst], t, len, at[dst] + (uint64_t)first * esz);
        if (put < 0) {
            terr = put;
            break;
        }
        if (put == 1) acc.stats.coll_put_bytes += len;
        words[dst] = (uint64_t)put;
        terr = acc_post_send(g, &q, &words[dst], sizeof *words, dst, T_RESULT);
        if (terr == 0 && put == 0) terr = acc_post_send(g, &q, t, len, dst, T_RESULT);
    }
    int werr = acc_reqs_wait(&q);
    if (terr == 0) terr = werr;
    /* The blocks a member could not put: by message after its word. */
    for (int k = 1; k < n && terr == 0 && recv; k++) {
        int from = (me - k + n) % n, f, c;
        if (theirs[from] == 1) continue;
        acc_block_of(b, from, &f, &c);
        terr = xfer(g, NULL, 0, -1, out + (size_t)f * esz, (size_t)c * esz, from, T_RESULT);
    }
    return tc_err(terr);
}

/* MPI_Allreduce (root < 0) or MPI_Reduce by blocks, from SPLIT_MIN bytes.
 * Where single copy works (tc_can_put_x: the same answer on every member
 * for the whole job), from the sizes of by_gets each member reads its
 * block of the others' contributions itself (gets.c), else the reduced
 * blocks are put into the receivers' results (blocks_put), the
 * receivers' addresses sent at the start. */
static int reduce_split(const struct grp *g, struct red *d, const void *src, void *rbuf,
                        int root, enum split_how how) {
    struct blocks b = {d->count, g->n, NULL};
    int n = g->n, first, cnt, me = g->me, all = root < 0 || me == root;
    const char *mine = (const char *)src + d->lb; /* data starts */
    char *out = all ? (char *)rbuf + d->lb : NULL;
    size_t esz = d->bytes / (size_t)d->count;
    acc_block_of(&b, me, &first, &cnt);
    int put = how == SPLIT_AUTO ? puts_on() : how == SPLIT_PUTS;
    if (how == SPLIT_GETS || (how == SPLIT_AUTO && acc_coll_by_gets(n, d->bytes, root)))
        return acc_coll_reduce_gets(g, d, &b, mine, out, root, NULL); /* root -1 is GETS_ALL */
    struct reqs q_at;
    if (put) {
        /* [0, n): the receivers' result addresses; [n, 2n): their words
         * to me; [2n, 3n): mine to them; [3n]: my own address. */
        if (peer_outs_cap < 3 * n + 1) {
            uint64_t *p = realloc(peer_outs, sizeof *p * (size_t)(3 * n + 1));
            if (!p) return MPI_ERR_NO_MEM;
            peer_outs = p;
            peer_outs_cap = 3 * n + 1;
        }
        int err = acc_reqs_init(&q_at, 2 * n), terr = 0;
        if (err != MPI_SUCCESS) return err;
        peer_outs[3 * n] = (uint64_t)(uintptr_t)out;
        for (int k = 1; k < n && terr == 0; k++) {
            int j = (me - k + n) % n;
            if (root < 0 || j == root)
                terr = acc_post_recv(g, &q_at, &peer_outs[j], sizeof(uint64_t), j, T_ADDR);
        }
        for (int k = 1; k < n && terr == 0 && all; k++)
            terr = acc_post_send(g, &q_at, &peer_outs[3 * n], sizeof(uint64_t), (me + k) % n,
                             T_ADDR);
        if (terr != 0) {
            acc_reqs_wait(&q_at);
            return tc_err(terr);
        }
    }
    char *t = all ? out + (size_t)first * esz : NULL; /* non-roots: a working area */
    int err = acc_coll_reduce_blocks(g, d, &b, mine, &t, all && mine == out);
    if (put) {
        if (err != MPI_SUCCESS) {
            acc_reqs_wait(&q_at);
            return err;
        }
        return blocks_put(g, &b, esz, t, out, root, &q_at);
    }
    return err != MPI_SUCCESS ? err : blocks_out(g, &b, esz, t, out, root);
}

/* The bytes of `count` elements of `type`, or (size_t)-1 if unusable. */
static size_t block_bytes(int count, MPI_Datatype type) {
    MPI_Aint lb;
    size_t bytes;
    if (count < 0 || acc_contiguous(count, type, &lb, &bytes) < 0) return (size_t)-1;
    return bytes;
}

/* An all-local communicator whose n blocks of `blk` bytes fit the limit. */
static acc_comm *block_comm(MPI_Comm comm, size_t blk) {
    acc_comm *c = coll_comm(comm);
    if (!c || c->mixed || blk == (size_t)-1) return NULL;
    /* Two members: one block each way at most, at any size, as the
     * two-member broadcast (dev VM, near, 12 alternating rounds: allgather
     * 1 MiB 49 us against Open MPI's 85, 4 MiB 307 against 381; alltoall 4
     * MiB 382 against 514).
     * A node with more ranks than CPUs: at any size too. These calls went
     * to Open MPI's own there (8-byte alltoall 5.5 us against 46 with 4
     * ranks on 2 CPUs, 2026-11-23); since the waits yield early and the
     * transport weighs two-copy by its copying on such nodes, the blocks
     * take 0.34-0.69 of Open MPI's time for the allgather and 0.48-0.77
     * for the alltoall from 8 B to 16 MiB with 4 ranks on the dev VM's 2
     * vCPUs, and with 8 ranks gather 0.09-0.29, scatter 0.22-0.51,
     * allgather 0.50-0.86 (8 B: 1.06), alltoall 0.60-0.93 (bench coll, 4
     * jobs); under Open MPI, blocks beyond XFER_EAGER of three or more
     * members then take the way their trials pick (block_picks). */
    if (any_size(c)) return c;
    if (!coll_max_set && c->size > 2 && !crowded())
        return blk <= EXCHANGE_MAX / (size_t)c->size ? c : NULL;
    return blk <= bcast_max / (size_t)c->size ? c : NULL;
}

/* The address of block i (of `count` elements of `type`) in an MPI buffer. */
static char *block_at(const void *buf, int i, int count, MPI_Datatype type) {
    MPI_Aint lb, ext;
    PMPI_Type_get_extent(type, &lb, &ext);
    return (char *)buf + (MPI_Aint)i * count * ext;
}

int acc_coll_gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                    MPI_Datatype rtype, int root, MPI_Comm comm, int *rc) {
    acc_comm *c0 = coll_comm(comm);
    if (!c0 || root < 0 || root >= c0->size) return 0;
    int me = my_comm_rank(c0);
    size_t blk = me == root ? block_bytes(rcount, rtype) : block_bytes(scount, stype);
    acc_comm *c = block_comm(comm, blk);
    if (!c) return 0;
    struct grp g = whole(c);
    struct acc_msg m;
    int err;
    if (me != root) {
        err = acc_pack(sbuf, scount, stype, comm, &m);
        if (err != MPI_SUCCESS) return acc_coll_done(comm, err, rc);
        /* Eager, not send_waited even with two members: the root copies
         * its own block into place while this one's copy into the slot
         * runs, then copies this one out; reading it instead came after
         * the own copy just the same (2 members, 8 KiB 1.03 -> 1.16 us,
         * 16 KiB 1.90 -> 1.83, Open MPI 1.40 and 2.04). */
        err = tc_err(xfer(&g, m.data, m.len, root, NULL, 0, -1, T_GATHER));
        acc_tmp_free(m.tmp);
    } else {
        struct acc_msg area;
        struct reqs q;
        err = acc_recv_area(rbuf, c->size * rcount, rtype, &area);
        if (err == MPI_SUCCESS) err = acc_reqs_init(&q, c->size);
        if (err != MPI_SUCCESS) {
            acc_tmp_free(area.tmp);
            return acc_coll_done(comm, err, rc);
        }
        char *a = (char *)area.data;
        int terr = 0;
        /* Small blocks are taken in member order by the latency path once
         * the root's own block is in place (below); large ones are posted
         * first so that every rendezvous can start at once. */
        int small = blk <= XFER_EAGER;
        for (int i = 0; i < g.n && terr == 0 && !small; i++)
            if (i != me) terr = acc_post_recv(&g, &q, a + (size_t)i * blk, blk, i, T_GATHER);
        if (sbuf != MPI_IN_PLACE) {
            err = acc_pack(sbuf, scount, stype, comm, &m);
            if (err == MPI_SUCCESS) {
                memcpy(a + (size_t)me * blk, m.data, m.len < blk ? m.len : blk);
                acc_tmp_free(m.tmp);
            }
        } else if (area.tmp) {
            /* The root's own block stays where it is in rbuf; the unpack
             * of the whole area below must not overwrite it with junk. */
            err = acc_pack(block_at(rbuf, me, rcount, rtype), rcount, rtype, comm, &m);
            if (err == MPI_SUCCESS) {
                memcpy(a + (size_t)me * blk, m.data, blk);
                acc_tmp_free(m.tmp);
            }
        }
        for (int i = 0; i < g.n && terr == 0 && small; i++)
            if (i != me) terr = recv_from(&g, a + (size_t)i * blk, blk, i, T_GATHER);
        int werr = acc_reqs_wait(&q);
        if (terr == 0) terr = werr;
        if (err == MPI_SUCCESS) err = tc_err(terr);
        if (err == MPI_SUCCESS)
            err = acc_unpack(&area, (size_t)c->size * blk, rbuf, c->size * rcount, rtype, comm);
        else
            acc_tmp_free(area.tmp);
    }
    *rc = acc_error(comm, err);
    acc.stats.coll_tc++;
    return 1;
}

int acc_coll_scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                     MPI_Datatype rtype, int root, MPI_Comm comm, int *rc) {
    acc_comm *c0 = coll_comm(comm);
    if (!c0 || root < 0 || root >= c0->size) return 0;
    int me = my_comm_rank(c0);
    size_t blk = me == root ? block_bytes(scount, stype) : block_bytes(rcount, rtype);
    acc_comm *c = block_comm(comm, blk);
    if (!c) return 0;
    struct grp g = whole(c);
    int err;
    if (me != root) {
        struct acc_msg area;
        err = acc_recv_area(rbuf, rcount, rtype, &area);
        if (err != MPI_SUCCESS) return acc_coll_done(comm, err, rc);
        err = tc_err(xfer(&g, NULL, 0, -1, (void *)area.data, blk, root, T_SCATTER));
        if (err == MPI_SUCCESS)
            err = acc_unpack(&area, blk, rbuf, rcount, rtype, comm);
        else
            acc_tmp_free(area.tmp);
    } else {
        struct acc_msg m;
        struct reqs q;
        err = acc_pack(sbuf, c->size * scount, stype, comm, &m);
        if (err != MPI_SUCCESS) return acc_coll_done(comm, err, rc);
        err = acc_reqs_init(&q, c->size);
        if (err != MPI_SUCCESS) {
            acc_tmp_free(m.tmp);
            return acc_coll_done(comm, err, rc);
        }
        const char *s = (const char *)m.data;
        int terr = 0;
        /* With two members the other is blocked in its receive: read once
         * where that pays (send_waited), while the root copies its own
         * block (16 KiB 1.98 -> 1.35 us, Open MPI 1.77). With more, the
         * ordinary sends: not measured. */
        for (int i = 0; i < g.n && terr == 0; i++)
            if (i != me)
                terr = (g.n == 2 ? post_send_waited : acc_post_send)(&g, &q, s + (size_t)i * blk,
                                                                      blk, i, T_SCATTER);
        if (rbuf != MPI_IN_PLACE) {
            struct acc_msg own;
            err = acc_recv_area(rbuf, rcount, rtype, &own);
            if (err == MPI_SUCCESS) {
                memcpy((void *)own.data, s + (size_t)me * blk, blk);
                err = acc_unpack(&own, blk, rbuf, rcount, rtype, comm);
            }
        }
        int werr = acc_reqs_wait(&q);
        if (terr == 0) terr = werr;
        if (err == MPI_SUCCESS) err = tc_err(terr);
        acc_tmp_free(m.tmp);
    }
    *rc = acc_error(comm, err);
    acc.stats.coll_tc++;
    return 1;
}

/* Allgather and alltoall: every member sends to and receives from every
 * other; `send` holds the blocks to send (one block for allgather, n for
 * alltoall: `per_dest`), `area` receives n blocks. */
static int exchange(const struct grp *g, const char *send, int per_dest, char *area, size_t blk,
                    int tag) {
    struct reqs q;
    int rc = acc_reqs_init(&q, 2 * g->n);
    if (rc != MPI_SUCCESS) return rc;
    int terr = 0;
    if (blk <= XFER_EAGER) {
        /* Small blocks. A power-of-two allgather swaps with one partner
         * per step (the allreduce's pattern): with 4 ranks on 2 CPUs the
         * 8-byte allgather took 7.7 us so against 45-63 us all at once.
         * Each step's send completes when posted and its receive takes the
         * transport's latency path. */
        if (q.r != q.small) free(q.r);
        int n = g->n, me = g->me;
        if (!per_dest && is_pow2(n)) {
            /* Recursive doubling: at distance d each member holds the d
             * blocks of its aligned group and swaps them with the partner
             * group's (contiguous in `area`). */
            for (int d = 1; d < n && terr == 0; d <<= 1) {
                int partner = me ^ d, mine = me & ~(d - 1), theirs = partner & ~(d - 1);
                terr = xfer(g, area + (size_t)mine * blk, (size_t)d * blk, partner,
                            area + (size_t)theirs * blk, (size_t)d * blk, partner, tag);
            }
            return tc_err(terr);
        }
        /* Otherwise all at once: sends first (each completes when posted
         * unless the channel is full), then the receives in order through
         * the latency path, then whatever send had to wait for room.
         * Pairwise steps (n-1 rounds, each waiting for one given peer)
         * took 2.4x longer than this for a 4-byte alltoall with 4 ranks on
         * 2 CPUs (110 us against 46). */
        if (acc_reqs_init(&q, n) != MPI_SUCCESS) return MPI_ERR_NO_MEM;
        for (int k = 1; k < n && terr == 0; k++) {
            int dst = (me + k) % n;
            terr = acc_post_send(g, &q, send + (per_dest ? (size_t)dst * blk : 0), blk, dst, tag);
        }
        for (int k = 1; k < n && terr == 0; k++) {
            int src = (me - k + n) % n;
            terr = recv_from(g, area + (size_t)src * blk, blk, src, tag);
        }
        int werr = acc_reqs_wait(&q);
        return tc_err(terr ? terr : werr);
    }
    for (int k = 1; k < g->n && terr == 0; k++) {
        int src = (g->me - k + g->n) % g->n;
        terr = acc_post_recv(g, &q, area + (size_t)src * blk, blk, src, tag);
    }
    for (int k = 1; k < g->n && terr == 0; k++) {
        int dst = (g->me + k) % g->n;
        terr = acc_post_send(g, &q, send + (per_dest ? (size_t)dst * blk : 0), blk, dst, tag);
    }
    int werr = acc_reqs_wait(&q);
    return tc_err(terr ? terr : werr);
}

/* An allgather (per_dest 0) or alltoall (1) through c's lane, where
 * lane_fits: every member publishes what it sends (its block, or its
 * n blocks), waits for every member's and copies into `area` each one's
 * block (allgather) or the block addressed to it (alltoall). One arrival
 * word per member and one round, where the messages take n - 1 sends and
 * receives per member, each waiting for its peer to be scheduled on a
 * crowded node (docs/collectives.md, "Lanes"). Returns an MPI error class. */
static int lane_blocks(const acc_comm *c, const char *send, int per_dest, char *area, size_t blk) {
    int n = c->size, me = my_comm_rank(c);
    const void *x[TC_LANE_FLAT_MAX];
    size_t len = per_dest ? (size_t)n * blk : blk;
    int rc = lane_exchange(c->lane, send, len, 1, TC_LANE_ALL_BY_ALL, x);
    if (rc != 0) return tc_err(rc);
    size_t at = per_dest ? (size_t)me * blk : 0;
    for (int i = 0; i < n; i++)
        if (i != me) memcpy(area + (size_t)i * blk, (const char *)x[i] + at, blk);
    tc_lane_done(c->lane);
    acc.stats.coll_lane++;
    return MPI_SUCCESS;
}

/* Whether an allgather or alltoall of `blk`-byte blocks over c goes
 * through the staging areas (stage_blocks) rather than by message: on a
 * crowded node, blocks beyond XFER_EAGER (smaller ones leave when posted).
 * The same answer on every member. */
static int stage_blocks_fit(const acc_comm *c, const struct grp *g, size_t blk) {
    return acc_stage && g->n >= 2 && !c->mixed && crowded() && blk > XFER_EAGER &&
           stage_areas(g) && stage_len / (size_t)g->n >= 64;
}

/* An allgather (per_dest 0) or alltoall (1) through the staging areas,
 * where stage_blocks_fit: every member copies what it sends (its block,
 * or the block for each other member) into its area, and after a barrier
 * copies into `area` each member's block (allgather) or the block it
 * addressed to this one (alltoall), in rounds of up to an area's share
 * per block; a barrier after each round frees the areas. A message waits
 * for both its sender and its receiver to be scheduled, fragment after
 * fragment of its slot ring; here every member copies without waiting for
 * any one member. Returns an MPI error class. */
static int stage_blocks(const acc_comm *c, const struct grp *g, const char *send, int per_dest,
                        char *area, size_t blk) {
    int n = g->n, me = g->me, rc = 0;
    size_t slot = per_dest ? stage_len / (size_t)n / 64 * 64 : stage_len;
    char *mine = stage_at[me];
    for (size_t off = 0; off < blk && rc == 0; off += slot) {
        size_t len = blk - off < slot ? blk - off : slot;
        for (int k = 0; k < n; k++) {
            if (per_dest && k == me) continue;
            memcpy(mine + (per_dest ? (size_t)k * slot : 0),
                   send + (per_dest ? (size_t)k * blk : 0) + off, len);
            acc.stats.coll_staged_bytes += len;
            if (!per_dest) break;
        }
        rc = stage_barrier(c, g);
        for (int i = 0; i < n && rc == 0; i++) {
            if (i == me) continue;
            memcpy(area + (size_t)i * blk + off,
                   stage_at[i] + (per_dest ? (size_t)me * slot : 0), len);
        }
        if (rc == 0) rc = stage_barrier(c, g);
    }
    return tc_err(rc);
}

/* The allgather over the transport (acc_coll_allgather): 1, *rc set. */
static int allgather_tc(acc_comm *c, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                        int rcount, MPI_Datatype rtype, MPI_Comm comm, int *rc) {
    struct grp g = whole(c);
    int me = g.me;
    size_t blk = block_bytes(rcount, rtype);
    struct acc_msg area, own;
    int aerr = acc_recv_area(rbuf, c->size * rcount, rtype, &area);
    if (aerr != MPI_SUCCESS) return acc_coll_done(comm, aerr, rc);
    char *a = (char *)area.data;
    /* The own block goes into the area first: it is also what is sent. */
    int err = sbuf != MPI_IN_PLACE ? acc_pack(sbuf, scount, stype, comm, &own)
                                   : acc_pack(block_at(rbuf, me, rcount, rtype), rcount, rtype,
                                              comm, &own);
    if (err != MPI_SUCCESS) {
        acc_tmp_free(area.tmp);
        return acc_coll_done(comm, err, rc);
    }
    /* A send signature that does not match the receive one is the
     * program's error (MPI leaves it undefined): copy what fits, never
     * past either buffer. */
    size_t n_own = own.len < blk ? own.len : blk;
    if (own.data != a + (size_t)me * blk) memcpy(a + (size_t)me * blk, own.data, n_own);
    /* The others read the block from the send buffer (as Open MPI's
     * does), not from the copy just written here, whose lines sit
     * modified in this core's cache: 64 KiB, 2 ranks, the two alternating
     * within each of 6 jobs on the dev VM, medians 8.1-14.3 us against
     * 8.6-17.8 (never slower). */
    const char *send = own.len >= blk ? (const char *)own.data : a + (size_t)me * blk;
    err = lane_fits(c, blk)                 ? lane_blocks(c, send, 0, a, blk)
          : stage_blocks_fit(c, &g, blk) ? stage_blocks(c, &g, send, 0, a, blk)
                                         : exchange(&g, send, 0, a, blk, T_ALLGATHER);
    acc_tmp_free(own.tmp);
    if (err == MPI_SUCCESS)
        err = acc_unpack(&area, (size_t)c->size * blk, rbuf, c->size * rcount, rtype, comm);
    else
        acc_tmp_free(area.tmp);
    *rc = acc_error(comm, err);
    acc.stats.coll_tc++;
    return 1;
}

/* The alltoall over the transport (acc_coll_alltoall): 1, *rc set. */
static int alltoall_tc(acc_comm *c, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                       int rcount, MPI_Datatype rtype, MPI_Comm comm, int *rc) {
    struct grp g = whole(c);
    int me = g.me;
    size_t blk = block_bytes(rcount, rtype);
    struct acc_msg area, send;
    int err = acc_recv_area(rbuf, c->size * rcount, rtype, &area);
    if (err != MPI_SUCCESS) return acc_coll_done(comm, err, rc);
    char *a = (char *)area.data;
    if (sbuf != MPI_IN_PLACE) {
        err = acc_pack(sbuf, c->size * scount, stype, comm, &send);
    } else {
        /* In place: the blocks to send are overwritten by those received,
         * so they are sent from a copy. */
        err = acc_pack(rbuf, c->size * rcount, rtype, comm, &send);
        if (err == MPI_SUCCESS && !send.tmp) {
            void *copy = malloc(send.len ? send.len : 1);
            if (!copy) err = MPI_ERR_NO_MEM;
            else {
                memcpy(copy, send.data, send.len);
                send.data = send.tmp = copy;
            }
        }
    }
    if (err == MPI_SUCCESS && send.len < (size_t)c->size * blk) {
        /* Mismatched signatures (the program's error): send zeros for
         * the missing bytes rather than read past the send buffer. */
        void *pad = calloc(1, (size_t)c->size * blk);
        if (!pad) err = MPI_ERR_NO_MEM;
        else {
            memcpy(pad, send.data, send.len);
            acc_tmp_free(send.tmp);
            send.data = send.tmp = pad;
        }
    }
    if (err != MPI_SUCCESS) {
        acc_tmp_free(send.tmp);
        acc_tmp_free(area.tmp);
        return acc_coll_done(comm, err, rc);
    }
    const char *s = (const char *)send.data;
    if (s + (size_t)me * blk != a + (size_t)me * blk)
        memmove(a + (size_t)me * blk, s + (size_t)me * blk, blk);
    err = lane_fits(c, (size_t)c->size * blk) ? lane_blocks(c, s, 1, a, blk)
          : stage_blocks_fit(c, &g, blk)         ? stage_blocks(c, &g, s, 1, a, blk)
                                                 : exchange(&g, s, 1, a, blk, T_ALLTOALL);
    acc_tmp_free(send.tmp);
    if (err == MPI_SUCCESS)
        err = acc_unpack(&area, (size_t)c->size * blk, rbuf, c->size * rcount, rtype, comm);
    else
        acc_tmp_free(area.tmp);
    *rc = acc_error(comm, err);
    acc.stats.coll_tc++;
    return 1;
}

/* Whether a crowded allgather or alltoall of `blk`-byte blocks over c
 * picks its way by trials (block_call): on a node with more ranks than
 * CPUs, three or more members, blocks beyond XFER_EAGER, under Open MPI.
 * Which wins changes with the machine and its state from job to job: with
 * 8 ranks on the 2-vCPU Intel Xeon VM the transport's alltoall took 1.2-1.4
 * of Open MPI's time at 16 KiB in four alternating rounds and 1.07-1.47
 * from 8 B to 16 MiB in a bench coll run of 5 jobs, and its allgather
 * 0.56-0.99 in the same rounds but 1.11-1.24 at 1-16 MiB in that run, where
 * on a 2-vCPU AMD EPYC VM both had taken 0.48-0.93 of Open MPI's time
 * (block_comm). Up to XFER_EAGER every block goes out when posted and the
 * transport stays (8 B: 0.82 of Open MPI's alltoall in those rounds).
 * MPICH is never tried (its collectives poll without yielding on a crowded
 * node). The same answer on every member. */
static int block_picks(const acc_comm *c, size_t blk) {
#ifdef OPEN_MPI
    return !coll_max_set && !c->mixed && c->size > 2 && blk > XFER_EAGER && crowded();
#else
    (void)c;
    (void)blk;
    return 0;
#endif
}

/* The way of this call of a block collective picked by trials: a run of
 * calls by the transport (0), one by Open MPI (1), as the broadcast's
 * (bcast_trial), then the picked way; *trial: whether this
 * call is one of the trials (timed and recorded by block_trial_done). */
static int block_way(const struct acc_pick *p, int *trial) {
    *trial = in_trials(p);
    return *trial ? trial_way(p) : p->choice;
}

/* Records a trial call of `way` that took t seconds (trial_record); says
 * which way the class picked once it has. Returns an MPI error class. */
static int block_trial_done(acc_comm *c, struct acc_pick *p, int way, double t, size_t blk,
                            const char *what, MPI_Comm comm) {
    double sum[2];
    int done, err = trial_record(p, way, t, 1, comm, sum, &done);
    if (done && err == MPI_SUCCESS && acc.verbose && my_comm_rank(c) == 0)
        fprintf(stderr,
                "topocomm accel: crowded %s of %zu-%zu-byte blocks over %d members: %s "
                "(transport %.2f us, Open MPI %.2f us: mean of every member's %d timed calls)\n",
                what, (size_t)1 << size_class(blk), ((size_t)2 << size_class(blk)) - 1, c->size,
                p->choice ? "Open MPI's own" : "the transport",
                sum[0] * 1e6 / c->size / trial_timed(p), sum[1] * 1e6 / c->size / trial_timed(p),
                trial_timed(p));
    return err;
}

/* One allgather (alltoall 0) or alltoall call: over the transport, or on
 * a crowded node under Open MPI (block_picks) the trials' way of this call
 * or the way its block size class picked. Returns 1 (handled, *rc set) or
 * 0 (the MPI's own, by the caller). */
static int block_call(int alltoall, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                      int rcount, MPI_Datatype rtype, MPI_Comm comm, int *rc) {
    /* The two ways: the same arguments for each collective. */
    int (*tc)(acc_comm *, const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm,
              int *) = alltoall ? alltoall_tc : allgather_tc;
    int (*mpi)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm) =
        alltoall ? PMPI_Alltoall : PMPI_Allgather;
    size_t blk = block_bytes(rcount, rtype);
    acc_comm *c = block_comm(comm, blk);
    if (!c) return 0;
    if (!block_picks(c, blk)) return tc(c, sbuf, scount, stype, rbuf, rcount, rtype, comm, rc);
    struct acc_pick *p = &(alltoall ? c->picka : c->pickg)[size_class(blk)];
    int trial, way = block_way(p, &trial);
    if (!trial) return way ? 0 : tc(c, sbuf, scount, stype, rbuf, rcount, rtype, comm, rc);
    double t0 = PMPI_Wtime();
    if (way) {
        *rc = ACC_BLOCKING(mpi(sbuf, scount, stype, rbuf, rcount, rtype, comm));
        acc.stats.coll_plain++;
    } else {
        tc(c, sbuf, scount, stype, rbuf, rcount, rtype, comm, rc);
    }
    double t = PMPI_Wtime() - t0;
    /* Recorded after a failed call too (trial_record says why). */
    int rec = block_trial_done(c, p, way, t, blk, alltoall ? "alltoall" : "allgather", comm);
    if (*rc == MPI_SUCCESS) *rc = acc_error(comm, rec);
    return 1;
}

int acc_coll_allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                       MPI_Datatype rtype, MPI_Comm comm, int *rc) {
    return block_call(0, sbuf, scount, stype, rbuf, rcount, rtype, comm, rc);
}

int acc_coll_alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                      MPI_Datatype rtype, MPI_Comm comm, int *rc) {
    return block_call(1, sbuf, scount, stype, rbuf, rcount, rtype, comm, rc);
}

/* ---- For collv.c (coll.h) ------------------------------------------------ */

acc_comm *acc_coll_local(MPI_Comm comm) {
    acc_comm *c = coll_comm(comm);
#ifdef OPEN_MPI
    /* Not on a node with more ranks than CPUs, for the non-blocking
     * collectives (MPICH's coll/nonblocking3 with 4 ranks, which mixes them
     * with Open MPI's own, took 30 s to over 120 s against 20 s plain) and
     * the v variants with them (not measured there since the equal blocks
     * moved to the transport, block_comm). */
    if (crowded()) return NULL;
#endif
    return c && !c->mixed && bcast_max > 0 ? c : NULL;
}

acc_comm *acc_coll_local_red(MPI_Comm comm) {
    acc_comm *c = coll_comm(comm);
    return c && !c->mixed ? c : NULL;
}

struct grp acc_coll_whole(const acc_comm *c) { return whole(c); }

size_t acc_coll_bcast_limit(const acc_comm *c) { return bcast_limit(c); }

int acc_coll_xfer(const struct grp *g, const void *sbuf, size_t slen, int dst, void *rbuf,
                  size_t rlen, int src, int tag) {
    return xfer(g, sbuf, slen, dst, rbuf, rlen, src, tag);
}

int acc_coll_tc_err(int tc_rc) { return tc_err(tc_rc); }

int acc_coll_red_ok(struct red *d, int count, MPI_Datatype type) { return red_ok(d, count, type); }

int acc_coll_red_init(struct red *d, const void *src, int count, MPI_Datatype type, MPI_Op op) {
    return red_init(d, src, count, type, op);
}

int acc_coll_reduce_to_first(const struct grp *g, struct red *d) { return reduce_to_first(g, d); }



int acc_coll_done(MPI_Comm comm, int err, int *rc) {
    *rc = acc_error(comm, err);
    acc.stats.coll_tc++;
    return 1;
}
