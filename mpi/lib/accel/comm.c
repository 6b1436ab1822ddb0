/* Registered communicators: each intracommunicator created after MPI_Init
 * gets a matching context of the transport, agreed over its members like
 * MPICH's context ids (the lowest id free on every member: an allreduce of
 * free-id bitmaps), and its rank maps (comm rank <-> transport rank on
 * this node). Unregistered communicators (intercommunicators, those from
 * MPI_Comm_idup or MPI_Comm_spawn, MPI_COMM_SELF) simply use plain MPI. */
#include "accel.h"

#include <stdlib.h>
#include <string.h>

#define NCTX ACC_NCTX
static uint64_t ctx_used[NCTX / 64] = {1}; /* id 0 reserved */

/* Open-addressing table handle -> acc_comm, with a last-hit cache. */
#define TABLE_MIN 64
static acc_comm **table;
static size_t table_cap, table_len;
ACC_HIDDEN acc_comm *acc_comm_last; /* accel.h: acc_comm_find's inline hit */

static uintptr_t key_of(MPI_Comm c) { return (uintptr_t)c; }

static size_t slot_of(uintptr_t k, size_t cap) {
    k ^= k >> 17;
    k *= 0x9e3779b97f4a7c15ull;
    return (size_t)(k >> 20) & (cap - 1);
}

acc_comm *acc_comm_find_slow(MPI_Comm comm) {
    if (!table) return NULL;
    for (size_t i = slot_of(key_of(comm), table_cap);; i = (i + 1) & (table_cap - 1)) {
        if (!table[i]) return NULL;
        if (table[i]->comm == comm) return acc_comm_last = table[i];
    }
}

static int insert(acc_comm *c) {
    if ((table_len + 1) * 2 > table_cap) {
        size_t cap = table_cap ? table_cap * 2 : TABLE_MIN;
        acc_comm **t = calloc(cap, sizeof *t);
        if (!t) return -1;
        for (size_t i = 0; i < table_cap; i++)
            if (table[i]) {
                size_t j = slot_of(key_of(table[i]->comm), cap);
                while (t[j]) j = (j + 1) & (cap - 1);
                t[j] = table[i];
            }
        free(table);
        table = t;
        table_cap = cap;
    }
    size_t j = slot_of(key_of(c->comm), table_cap);
    while (table[j]) j = (j + 1) & (table_cap - 1);
    table[j] = c;
    table_len++;
    return 0;
}

/* Removes by re-inserting the rest of the probe chain (no tombstones). */
static acc_comm *take(MPI_Comm comm) {
    if (!table) return NULL;
    size_t i = slot_of(key_of(comm), table_cap);
    while (table[i] && table[i]->comm != comm) i = (i + 1) & (table_cap - 1);
    acc_comm *found = table[i];
    if (!found) return NULL;
    table[i] = NULL;
    table_len--;
    for (size_t j = (i + 1) & (table_cap - 1); table[j]; j = (j + 1) & (table_cap - 1)) {
        acc_comm *c = table[j];
        table[j] = NULL;
        table_len--;
        insert(c); /* cannot grow: the table just shrank */
    }
    if (acc_comm_last == found) acc_comm_last = NULL;
    return found;
}

static void free_comm(acc_comm *c) {
    if (!c) return;
    if (c->leaders != MPI_COMM_NULL) PMPI_Comm_free(&c->leaders);
    free(c->tc_rank);
    free(c->comm_rank);
    free(c->local_tc);
    free(c->leader_of);
    free(c->leaders_rank);
    free(c->near_tc);
    free(c->near_split);
    free(c->near_pos);
    free(c->rooted_tc);
    free(c);
}

/* The node groups of c for collectives: this node's members (transport
 * ranks in comm rank order) and, on a mixed communicator, every rank's node
 * leader and the leaders' communicator (collective over c->comm, as every
 * member of a mixed communicator is). `world` maps comm ranks to world
 * ranks. Returns 0, or -1 when out of memory (then the caller aborts: the
 * members have agreed already). */
static int node_groups(acc_comm *c, const int *world) {
    int n = c->size;
    c->leaders = MPI_COMM_NULL;
    c->local_tc = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!c->local_tc) return -1;
    int me = c->comm_rank[acc.node_rank];
    for (int r = 0; r < n; r++)
        if (c->tc_rank[r] >= 0) {
            if (r == me) c->my_local = c->nlocal;
            c->local_tc[c->nlocal++] = c->tc_rank[r];
        }
    if (!c->mixed || !acc_coll_hier) return 0;
    c->leader_of = malloc(sizeof(int) * (size_t)n);
    c->leaders_rank = malloc(sizeof(int) * (size_t)n);
    int *first = malloc(sizeof(int) * (size_t)acc.world_size);
    if (!c->leader_of || !c->leaders_rank || !first) {
        free(first);
        return -1;
    }
    for (int i = 0; i < acc.world_size; i++) first[i] = -1;
    int nleaders = 0;
    for (int r = 0; r < n; r++) {
        int node = acc.node_of[world[r]];
        c->leaders_rank[r] = -1;
        if (first[node] < 0) {
            first[node] = r;
            c->leaders_rank[r] = nleaders++;
        }
        c->leader_of[r] = first[node];
    }
    free(first);
    int lead = c->leader_of[me] == me;
    return PMPI_Comm_split(c->comm, lead ? 0 : MPI_UNDEFINED, me, &c->leaders) == MPI_SUCCESS ? 0
                                                                                               : -1;
}

/* Collective over comm: the lowest context id free on every member. */
static int agree_ctx(MPI_Comm comm) {
    uint64_t mine[NCTX / 64], all[NCTX / 64];
    for (int i = 0; i < NCTX / 64; i++) mine[i] = ~ctx_used[i];
    if (PMPI_Allreduce(mine, all, NCTX / 64, MPI_UINT64_T, MPI_BAND, comm) != MPI_SUCCESS)
        return -1;
    for (int i = 0; i < NCTX / 64; i++)
        if (all[i]) {
            int ctx = i * 64 + __builtin_ctzll(all[i]);
            ctx_used[i] |= 1ull << (ctx % 64);
            return ctx;
        }
    return -1; /* every id taken on some member: plain MPI for this one */
}

void acc_comm_register(MPI_Comm comm) {
    if (!acc.on || comm == MPI_COMM_NULL) return;
    int inter = 0;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) return;
    int size;
    PMPI_Comm_size(comm, &size);
    acc_comm *c = calloc(1, sizeof *c);
    if (c) {
        c->leaders = MPI_COMM_NULL;
        c->lane = -1;
    }
    int *world = malloc(sizeof(int) * (size_t)size), *ranks = malloc(sizeof(int) * (size_t)size);
    int ok = c && world && ranks;
    if (ok) {
        c->tc_rank = malloc(sizeof(int) * (size_t)size);
        c->comm_rank = malloc(sizeof(int) * (size_t)acc.node_size);
        ok = c->tc_rank && c->comm_rank;
    }
    /* Every member must agree to register (allocation failures included),
     * or all of them use plain MPI for it. */
    int all_ok = 0;
    PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    int ctx = all_ok ? agree_ctx(comm) : -1;
    if (ctx < 0) {
        free(world);
        free(ranks);
        free_comm(c);
        return;
    }
    MPI_Group g, wg;
    PMPI_Comm_group(comm, &g);
    PMPI_Comm_group(MPI_COMM_WORLD, &wg);
    for (int r = 0; r < size; r++) ranks[r] = r;
    PMPI_Group_translate_ranks(g, size, ranks, wg, world);
    PMPI_Group_free(&g);
    PMPI_Group_free(&wg);
    c->comm = comm;
    c->ctx = ctx;
    c->size = size;
    for (int i = 0; i < acc.node_size; i++) c->comm_rank[i] = -1;
    int me = acc.node_of[acc.world_rank];
    for (int r = 0; r < size; r++) {
        int w = world[r];
        if (w != MPI_UNDEFINED && acc.node_of[w] == me) {
            c->tc_rank[r] = acc.noderank_of[w];
            c->comm_rank[acc.noderank_of[w]] = r;
        } else {
            c->tc_rank[r] = -1;
            c->mixed = 1;
        }
    }
    int groups = node_groups(c, world);
    free(world);
    free(ranks);
    if (groups != 0 || insert(c) != 0) {
        /* Out of memory after agreeing: the peers will route through the
         * transport, so this cannot fall back silently. */
        PMPI_Abort(comm, 1);
    }
    acc_coll_lane_setup(c);
    acc_coll_near_setup(c);
}

void acc_comm_unregister(MPI_Comm comm) {
    acc_comm *c = take(comm);
    if (!c) return;
    c->retired = 1;
    if (c->holds == 0) acc_comm_retire_done(c);
}

void acc_comm_retire_done(acc_comm *c) {
    /* The lane goes with the context: its next communicator may not
     * include the members still reading this rank's last block. */
    if (c->lane >= 0) tc_lane_quiesce(c->lane);
    ctx_used[c->ctx / 64] &= ~(1ull << (c->ctx % 64));
    free_comm(c);
}

int acc_error_call(MPI_Comm comm, int code) {
    PMPI_Comm_call_errhandler(comm, code);
    return code;
}

/* ---- Creation and destruction wrappers ----------------------------------- */

#define REGISTER_AFTER(call, out)                                                             \
    do {                                                                                       \
        int rc_ = (call);                                                                      \
        if (rc_ == MPI_SUCCESS) acc_comm_register(*(out));                                     \
        return rc_;                                                                            \
    } while (0)

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm) {
    acc_settle();
    REGISTER_AFTER(PMPI_Comm_dup(comm, newcomm), newcomm);
}

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm) {
    acc_settle();
    REGISTER_AFTER(PMPI_Comm_dup_with_info(comm, info, newcomm), newcomm);
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
    acc_settle();
    REGISTER_AFTER(PMPI_Comm_split(comm, color, key, newcomm), newcomm);
}

int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *newcomm) {
    acc_settle();
    REGISTER_AFTER(PMPI_Comm_split_type(comm, type, key, info, newcomm), newcomm);
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm) {
    acc_settle();
    REGISTER_AFTER(PMPI_Comm_create(comm, group, newcomm), newcomm);
}

int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm) {
    acc_settle();
    REGISTER_AFTER(PMPI_Comm_create_group(comm, group, tag, newcomm), newcomm);
}

int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder,
                    MPI_Comm *newcomm) {
    acc_settle();
    REGISTER_AFTER(PMPI_Cart_create(comm, ndims, dims, periods, reorder, newcomm), newcomm);
}

int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm) {
    acc_settle();
    REGISTER_AFTER(PMPI_Cart_sub(comm, remain_dims, newcomm), newcomm);
}

int MPI_Graph_create(MPI_Comm comm, int nnodes, const int index[], const int edges[], int reorder,
                     MPI_Comm *newcomm) {
    acc_settle();
    REGISTER_AFTER(PMPI_Graph_create(comm, nnodes, index, edges, reorder, newcomm), newcomm);
}

int MPI_Dist_graph_create(MPI_Comm comm, int n, const int sources[], const int degrees[],
                          const int destinations[], const int weights[], MPI_Info info,
                          int reorder, MPI_Comm *newcomm) {
    acc_settle();
    REGISTER_AFTER(PMPI_Dist_graph_create(comm, n, sources, degrees, destinations, weights, info,
                                          reorder, newcomm),
                   newcomm);
}

int MPI_Dist_graph_create_adjacent(MPI_Comm comm, int indegree, const int sources[],
                                   const int sourceweights[], int outdegree,
                                   const int destinations[], const int destweights[],
                                   MPI_Info info, int reorder, MPI_Comm *newcomm) {
    acc_settle();
    REGISTER_AFTER(PMPI_Dist_graph_create_adjacent(comm, indegree, sources, sourceweights,
                                                   outdegree, destinations, destweights, info,
                                                   reorder, newcomm),
                   newcomm);
}

int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm *newcomm) {
    acc_settle();
    REGISTER_AFTER(PMPI_Intercomm_merge(intercomm, high, newcomm), newcomm);
}

int MPI_Comm_free(MPI_Comm *comm) {
    acc_settle();
    if (comm) acc_comm_unregister(*comm);
    return PMPI_Comm_free(comm);
}

int MPI_Comm_disconnect(MPI_Comm *comm) {
    acc_settle();
    if (comm) acc_comm_unregister(*comm);
    return PMPI_Comm_disconnect(comm);
}
