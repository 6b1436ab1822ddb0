/* Large reductions by gets: where single copy works (tc_can_put_x), each
 * member reads its block of every other member's contribution straight
 * out of that member's buffer (tc_get_x, process_vm_readv), a piece at a
 * time into a buffer that stays in its cache, folds the piece there, and
 * writes the reduced piece into every receiving member's result (tc_put_x)
 * while it is still in the cache (docs/collectives.md, "Reductions by
 * gets").
 *
 * Why: by messages (coll.c's blocks), every copy of a block landed in a
 * working area in memory, was read back by the fold, and the reduced block
 * was read back again to be put: on the 2-vCPU Intel Xeon VM with 4 ranks,
 * half of a 16 MiB allreduce's time was the kernel's copying and a fifth
 * the fold, over several passes of memory per block. Here each byte of
 * another member's contribution is read from memory once and each byte of
 * a result written once; the pieces in between stay in the cache. No
 * member waits for another between the exchange of addresses and the
 * words at the end, so it suits crowded nodes too (no sender needs to be
 * scheduled for its block to be read).
 *
 * Order and bits: member k folds block k piece by piece, each element as
 * x_0 (op) (x_1 (op) (... (op) x_{n-1})), the order of coll.c's blocks:
 * the same bits on every member and every run, for any operation.
 *
 * Who may touch what, and when: member k alone reads block k of the other
 * members' contributions and alone writes block k of their results; it
 * writes a piece of a result only after reading that piece of every
 * contribution, so in place (contribution and result one buffer) a piece
 * is overwritten only once nobody needs it. A member returns only when
 * every other member's word says it is done with this member's buffers.
 *
 * Failures: a get or a put that fails (single copy refused by the kernel
 * mid-job; the transport then refuses every later one and says so once)
 * makes the member finish its block by messages: its words ask the others
 * for their contributions from the first piece it had not folded and
 * announce its reduced bytes by message from the first piece it had not
 * put everywhere. A dead peer or a transport error ends the call with an
 * error. */
#include "accel.h"
#include "coll.h"

#include <stdlib.h>
#include <string.h>

/* Tags of their own (coll.c's start at 1, collv.c's at 32). */
enum { T_GET_ADDR = 48, T_GET_WORD, T_GET_PART, T_GET_RESULT };

/* A member's word at the end (two 8-byte values): done with the
 * receiver's buffers, and either WORD_PUT (its reduced block is in the
 * receiver's result, if the receiver gets one) or WORD_MISSING | put << 2,
 * folded: the reduced bytes of its block from `put` on come by message,
 * and it needs the receiver's contribution from `folded` on by message. */
enum { WORD_PUT = 1, WORD_MISSING = 2 };

/* Piece buffers (grow-only, kept for the next call): the get's landing
 * place, the member's own contribution moved aside (in place), and the
 * reduced piece of a member with no result buffer (a reduce's non-root). */
static char *piece_area;
static size_t piece_cap;
/* The addresses and words of a call (acc_coll_reduce_gets says where). */
static uint64_t *words_area;
static int words_cap;

static size_t round64(size_t b) { return (b + 63) & ~(size_t)63; }

/* The piece size: the transport's pipeline fragment between this member
 * and the next (a size chosen to stay in the pair's caches, derived from
 * the caches at start-up), whole elements of `esz` bytes. */
static size_t piece_bytes(const struct grp *g, size_t esz) {
    uint64_t frag = 0;
    if (tc_pair_fragment_x(g->tc[g->me], g->tc[(g->me + 1) % g->n], &frag) != 0 || frag == 0)
        frag = 128 << 10; /* not reached with a transport; the built-in fragment */
    size_t p = (size_t)frag / esz * esz;
    return p ? p : esz;
}

static int grow(size_t piece, int n) {
    if (piece_cap < 3 * round64(piece)) {
        free(piece_area);
        piece_area = aligned_alloc(64, 3 * round64(piece));
        piece_cap = piece_area ? 3 * round64(piece) : 0;
        if (!piece_area) return 0;
    }
    if (words_cap < 6 * n + 2) {
        uint64_t *w = realloc(words_area, sizeof *w * (size_t)(6 * n + 2));
        if (!w) return 0;
        words_area = w;
        words_cap = 6 * n + 2;
    }
    return 1;
}

/* Whether member j receives the other members' reduced blocks: everyone
 * for an allreduce (GETS_ALL), the root for a reduce (root >= 0), nobody
 * for a reduce-scatter (GETS_NONE). */
static int receives(int j, int root) { return root == GETS_ALL || j == root; }

/* How far a member's block got by gets: `put` bytes were put into every
 * receiver's result; `folded` bytes (put, or put plus the piece whose put
 * failed) are reduced, the piece past `put` in `own` or in the `lone`
 * piece buffer. */
struct reached {
    size_t put, folded;
};

/* Member me's block (len0 bytes from off0 of the vector) by gets into
 * `own` (NULL: a piece buffer at a time, only put); n >= 2. *err: an MPI
 * error class (the fold's) or MPI_SUCCESS; *terr: a negative transport
 * code for a dead peer or a bad argument. A get or put refused stops it
 * where it is (the returned offsets). */
static struct reached fold_by_gets(const struct grp *g, struct red *d, const uint64_t *addr,
                                   const char *mine, char *own, size_t off0, size_t len0,
                                   size_t piece, int root, int *err, int *terr) {
    int n = g->n, me = g->me, top = n - 1, aliased = own != NULL && own == mine + off0;
    size_t esz = d->bytes / (size_t)d->count, rp = round64(piece);
    char *buf = piece_area, *kept = piece_area + rp, *lone = piece_area + 2 * rp;
    for (size_t off = 0; off < len0; off += piece) {
        size_t len = len0 - off < piece ? len0 - off : piece;
        const char *x_me = mine + off0 + off;
        /* Where this piece's fold runs: the result, or a piece buffer. */
        char *fold = own ? own + off : lone;
        int in_fold = 1, r = 1;
        if (aliased) { /* fold is my contribution: keep it for the fold (and a failure) */
            memcpy(kept, fold, len);
            x_me = kept;
        }
        if (top != me)
            r = tc_get_x(g->tc[top], fold, len, addr[2 * top] + off0 + off);
        else if (!aliased)
            in_fold = 0; /* the first step folds x_{n-2} with mine into fold */
        for (int j = top - 1; j >= 0 && r == 1 && *err == MPI_SUCCESS; j--) {
            const char *x = x_me;
            if (j != me) {
                r = tc_get_x(g->tc[j], buf, len, addr[2 * j] + off0 + off);
                x = buf;
            }
            if (r != 1) break;
            if (in_fold) {
                *err = acc_reduce_local(x - d->lb, fold - d->lb, (int)(len / esz), d->type, d->op);
            } else {
                *err = acc_reduce_to(x - d->lb, x_me - d->lb, fold - d->lb, (int)(len / esz), len,
                                     d->type, d->op);
                in_fold = 1;
            }
        }
        if (r != 1 || *err != MPI_SUCCESS) {
            if (aliased) memcpy(fold, kept, len); /* my contribution back for the messages */
            if (r < 0) *terr = r;
            return (struct reached){off, off};
        }
        for (int k = 1; k < n; k++) {
            int dst = (me + k) % n;
            if (!receives(dst, root)) continue;
            r = tc_put_x(g->tc[dst], fold, len, addr[2 * dst + 1] + off0 + off);
            if (r != 1) {
                /* Reduced, not put everywhere: some receivers' contributions
                 * to this piece may be overwritten (in place), so it is
                 * not folded again; it goes by message with the rest. */
                if (r < 0) *terr = r;
                return (struct reached){off, off + len};
            }
            acc.stats.coll_put_bytes += len;
        }
    }
    return (struct reached){len0, len0};
}

/* Member me's block from where the gets stopped, by messages: every other
 * member's contribution from `at.folded` received into a working area and
 * folded in member order, then the reduced bytes from `at.put` sent to
 * every receiver (the piece between the two taken from `own` or from the
 * `lone` piece buffer). */
static int fold_by_messages(const struct grp *g, struct red *d, const char *mine, char *own,
                            const char *lone, size_t off0, size_t len0, struct reached at, int root,
                            int *terr) {
    int n = g->n, me = g->me, top = n - 1;
    size_t esz = d->bytes / (size_t)d->count, len = len0 - at.folded, slot = round64(len);
    size_t head = at.folded - at.put, out_len = len0 - at.put;
    /* Slot j: member j's contribution; slot n: the reduced bytes without `own`. */
    char *w = malloc(slot * (size_t)n + round64(out_len) + 64);
    if (!w) return MPI_ERR_NO_MEM;
    char *t = own ? own + at.put : w + slot * (size_t)n;
    struct reqs q;
    int err = acc_reqs_init(&q, n);
    for (int j = 0; j < n && err == MPI_SUCCESS && *terr == 0; j++)
        if (j != me) *terr = acc_post_recv(g, &q, w + (size_t)j * slot, len, j, T_GET_PART);
    if (err == MPI_SUCCESS) {
        int werr = acc_reqs_wait(&q);
        if (*terr == 0) *terr = werr;
    }
    if (err == MPI_SUCCESS && *terr == 0) {
        if (!own) memcpy(t, lone, head);
        memcpy(w + (size_t)me * slot, mine + off0 + at.folded, len);
        memcpy(t + head, w + (size_t)top * slot, len);
        for (int j = top - 1; j >= 0 && err == MPI_SUCCESS; j--)
            err = acc_reduce_local(w + (size_t)j * slot - d->lb, t + head - d->lb,
                                   (int)(len / esz), d->type, d->op);
    }
    if (err == MPI_SUCCESS && *terr == 0) {
        err = acc_reqs_init(&q, n);
        for (int k = 1; k < n && err == MPI_SUCCESS && *terr == 0; k++) {
            int dst = (me + k) % n;
            if (receives(dst, root)) *terr = acc_post_send(g, &q, t, out_len, dst, T_GET_RESULT);
        }
        if (err == MPI_SUCCESS) {
            int werr = acc_reqs_wait(&q);
            if (*terr == 0) *terr = werr;
        }
    }
    free(w);
    return err;
}

int acc_coll_reduce_gets(const struct grp *g, struct red *d, const struct blocks *cut,
                         const char *mine, char *out, int root, char *own) {
    struct blocks b = *cut;
    int n = g->n, me = g->me, first, cnt;
    size_t esz = d->bytes / (size_t)d->count, piece = piece_bytes(g, esz);
    if (!grow(piece, n)) return MPI_ERR_NO_MEM;
    /* words_area: [2j, 2j+1] member j's addresses, then its word to me,
     * then mine to it (2 x 8 bytes each), then my own addresses. */
    uint64_t *addr = words_area, *theirs = words_area + 2 * n, *said = words_area + 4 * n;
    uint64_t *my = words_area + 6 * n;
    my[0] = (uint64_t)(uintptr_t)mine;
    my[1] = (uint64_t)(uintptr_t)out;
    struct reqs q;
    int err = acc_reqs_init(&q, 2 * n), terr = 0;
    if (err != MPI_SUCCESS) return err;
    for (int k = 1; k < n && terr == 0; k++) {
        int j = (me - k + n) % n;
        terr = acc_post_recv(g, &q, &addr[2 * j], 2 * sizeof *addr, j, T_GET_ADDR);
    }
    for (int k = 1; k < n && terr == 0; k++)
        terr = acc_post_send(g, &q, my, 2 * sizeof *my, (me + k) % n, T_GET_ADDR);
    int werr = acc_reqs_wait(&q);
    if (terr == 0) terr = werr;
    if (terr != 0) return acc_coll_tc_err(terr);

    acc_block_of(&b, me, &first, &cnt);
    size_t off0 = (size_t)first * esz, len0 = (size_t)cnt * esz;
    char *res = receives(me, root) ? out : NULL; /* the whole vector's result here */
    if (!own && res) own = res + off0;
    struct reached at = fold_by_gets(g, d, addr, mine, own, off0, len0, piece, root, &err, &terr);
    if (err != MPI_SUCCESS) return err; /* the operation failed: every member's does */
    if (terr != 0) return acc_coll_tc_err(terr);

    /* The words: done with the receiver's buffers, and how far my block
     * went: all put, or WORD_MISSING with where the messages take over
     * (the reduced bytes from at.put, the contributions from at.folded). */
    err = acc_reqs_init(&q, 2 * n);
    if (err != MPI_SUCCESS) return err;
    for (int k = 1; k < n && terr == 0; k++) {
        int j = (me - k + n) % n;
        terr = acc_post_recv(g, &q, &theirs[2 * j], 2 * sizeof *theirs, j, T_GET_WORD);
    }
    int whole = at.put == len0;
    for (int k = 1; k < n && terr == 0; k++) {
        int j = (me + k) % n;
        said[2 * j] = whole ? WORD_PUT : WORD_MISSING | (uint64_t)at.put << 2;
        said[2 * j + 1] = at.folded;
        terr = acc_post_send(g, &q, &said[2 * j], 2 * sizeof *said, j, T_GET_WORD);
    }
    werr = acc_reqs_wait(&q);
    if (terr == 0) terr = werr;
    if (terr != 0) return acc_coll_tc_err(terr);

    /* What went missing moves by message: my contribution to each member
     * whose block did not go whole (from where its fold stopped), that
     * member's reduced bytes to me if I receive them, and my own block's
     * rest. */
    int missing = !whole;
    for (int j = 0; j < n; j++) missing |= j != me && (theirs[2 * j] & WORD_MISSING);
    if (!missing) return MPI_SUCCESS;
    err = acc_reqs_init(&q, 2 * n);
    if (err != MPI_SUCCESS) return err;
    for (int k = 1; k < n && terr == 0; k++) {
        int j = (me + k) % n, f, c;
        if (!(theirs[2 * j] & WORD_MISSING)) continue;
        acc_block_of(&b, j, &f, &c);
        size_t put = (size_t)(theirs[2 * j] >> 2), folded = (size_t)theirs[2 * j + 1];
        size_t jo = (size_t)f * esz, jl = (size_t)c * esz;
        if (put > folded || folded > jl) {
            terr = TC_ERR_TRUNCATED; /* no member of this call sends such a word */
            break;
        }
        terr = acc_post_send(g, &q, mine + jo + folded, jl - folded, j, T_GET_PART);
        if (terr == 0 && res)
            terr = acc_post_recv(g, &q, res + jo + put, jl - put, j, T_GET_RESULT);
    }
    if (terr == 0 && !whole) {
        const char *lone = piece_area + 2 * round64(piece);
        err = fold_by_messages(g, d, mine, own, lone, off0, len0, at, root, &terr);
    }
    werr = acc_reqs_wait(&q);
    if (terr == 0) terr = werr;
    return err != MPI_SUCCESS ? err : acc_coll_tc_err(terr);
}
