/* Message bytes from MPI datatypes: a contiguous layout is sent from (and
 * received into) the user's buffer directly; any other layout is packed
 * with PMPI_Pack into a temporary and unpacked at the receiver, so derived
 * and non-contiguous datatypes take the same path, in the same order, as
 * every other message of the pair. */
#include "accel.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

/* Released packing areas, kept for the next messages. Freed, a large one
 * went back to the kernel (glibc trims the top of the heap, and unmaps
 * what it mapped), and the next message of the same size faulted every
 * page back in: a window of 8 strided 256 KiB messages between 2 ranks
 * (Open MPI) ran at 1.5 GB/s, 2.5 with the areas kept, against 5.0-5.3
 * plain (docs/benchmarks/accel.md, "Strided datatypes").
 * The transport keeps its unexpected-message buffers the same way
 * (crates/transport/src/spare.rs). Up to TMP_KEEP areas and TMP_BYTES in
 * all (a window of 8 strided 4 MiB messages: 3.1-3.2 GB/s with 32 MiB
 * kept, 4.3-4.5 with 64), best fit on reuse: what a process keeps is at
 * most what it had in flight at once. One thread (the accelerator is off under
 * MPI_THREAD_MULTIPLE). */
enum { TMP_KEEP = 16 };
#define TMP_BYTES ((size_t)64 << 20)
static struct {
    void *p[TMP_KEEP];
    size_t cap[TMP_KEEP];
    int n;
    size_t bytes;
} tmp_pool;

void *acc_tmp_alloc(size_t bytes) {
    int best = -1;
    for (int i = 0; i < tmp_pool.n; i++)
        if (tmp_pool.cap[i] >= bytes && (best < 0 || tmp_pool.cap[i] < tmp_pool.cap[best])) best = i;
    if (best < 0) return malloc(bytes ? bytes : 1);
    void *p = tmp_pool.p[best];
    tmp_pool.bytes -= tmp_pool.cap[best];
    tmp_pool.n--;
    tmp_pool.p[best] = tmp_pool.p[tmp_pool.n];
    tmp_pool.cap[best] = tmp_pool.cap[tmp_pool.n];
    return p;
}

void acc_tmp_free(void *p) {
    if (!p) return;
    size_t cap = malloc_usable_size(p);
    /* Full, or too large to keep: the smallest kept one makes room when
     * this one is larger (large ones are the ones the kernel takes back). */
    if (tmp_pool.n == TMP_KEEP || tmp_pool.bytes + cap > TMP_BYTES) {
        int small = -1;
        for (int i = 0; i < tmp_pool.n; i++)
            if (small < 0 || tmp_pool.cap[i] < tmp_pool.cap[small]) small = i;
        if (small < 0 || tmp_pool.cap[small] >= cap ||
            tmp_pool.bytes - tmp_pool.cap[small] + cap > TMP_BYTES) {
            free(p);
            return;
        }
        free(tmp_pool.p[small]);
        tmp_pool.bytes -= tmp_pool.cap[small];
        tmp_pool.n--;
        tmp_pool.p[small] = tmp_pool.p[tmp_pool.n];
        tmp_pool.cap[small] = tmp_pool.cap[tmp_pool.n];
    }
    tmp_pool.p[tmp_pool.n] = p;
    tmp_pool.cap[tmp_pool.n++] = cap;
    tmp_pool.bytes += cap;
}

/* The layout of the last datatype seen (accel.h). */
struct acc_dtype_cache acc_dt_last;

/* ---- Strided layouts packed here --------------------------------------
 * A datatype built from a dense element (a predefined type whose bytes are
 * one run) by contiguous, vector, hvector, subarray, resized and dup
 * constructors is a nest of regular strides: blocks of blk bytes, repeated
 * cnt[0] times stride str[0] apart, that repeated cnt[1] times str[1]
 * apart, and so on (a matrix column, a halo face of a 3-D array, a block
 * of a matrix), starting off bytes from the buffer, and element e of a
 * message ext bytes after element e-1. Its type map lists the blocks in
 * the order of these nested loops, innermost first, so the loops below
 * write the bytes PMPI_Pack writes (the native representation), and the
 * other end may pack or unpack either way. Open MPI's generic convertor
 * packs a column of doubles at about 5 GB/s (PMPI_Pack, 256 KiB: 50 us);
 * the loops move it at the speed of memory. The layouts of the last
 * LAYOUTS types looked at are kept (a halo exchange alternates its send
 * type, its receive type and the duplicates its requests hold; a look is
 * a recursion of envelope queries), all dropped by MPI_Type_free, as a
 * handle may come back for another type. Other types (indexed, struct, ...) and nests
 * deeper than LVL_MAX go to PMPI_Pack. */
enum { LVL_MAX = 4 };
struct layout {
    size_t blk;            /* bytes per block */
    int nlev;              /* levels of repetition, innermost first */
    int cnt[LVL_MAX];      /* items per level */
    MPI_Aint str[LVL_MAX]; /* bytes between two items of the level */
    MPI_Aint off;          /* first byte from the element's origin */
};
enum { LAYOUTS = 4 };
static struct {
    MPI_Datatype type;
    int valid, ok; /* looked at; a strided layout */
    struct layout l;
    MPI_Aint ext; /* bytes from an element to the next */
} layouts[LAYOUTS];
static int layouts_next; /* the entry replaced next (round robin) */

/* Repeats the layout cnt times, stride bytes apart: merged into the block
 * or the outermost level when the repetition continues it. */
static int layout_repeat(struct layout *l, int cnt, MPI_Aint stride) {
    if (cnt < 1) return 0;
    if (cnt == 1) return 1;
    if (l->nlev == 0 && stride == (MPI_Aint)l->blk) {
        l->blk *= (size_t)cnt;
        return 1;
    }
    if (l->nlev > 0 && stride == (MPI_Aint)l->cnt[l->nlev - 1] * l->str[l->nlev - 1]) {
        l->cnt[l->nlev - 1] *= cnt;
        return 1;
    }
    if (l->nlev == LVL_MAX) return 0;
    l->cnt[l->nlev] = cnt;
    l->str[l->nlev++] = stride;
    return 1;
}

static int layout_of(MPI_Datatype type, struct layout *l, int depth);

/* The layout of a constructor's element type, and its extent. */
static int layout_old(MPI_Datatype old, struct layout *l, MPI_Aint *ext, int depth) {
    MPI_Aint lb;
    int ok = layout_of(old, l, depth + 1);
    PMPI_Type_get_extent(old, &lb, ext);
    int ni, na, nd, comb;
    PMPI_Type_get_envelope(old, &ni, &na, &nd, &comb);
    if (comb != MPI_COMBINER_NAMED) PMPI_Type_free(&old);
    return ok && *ext > 0;
}

static int layout_of(MPI_Datatype type, struct layout *l, int depth) {
    int ni, na, nd, comb;
    if (depth > 8 || PMPI_Type_get_envelope(type, &ni, &na, &nd, &comb) != MPI_SUCCESS) return 0;
    if (comb == MPI_COMBINER_NAMED) {
        int size;
        MPI_Aint lb, ext;
        if (PMPI_Type_size(type, &size) != MPI_SUCCESS || size <= 0) return 0;
        PMPI_Type_get_extent(type, &lb, &ext);
        /* Pair types (MPI_SHORT_INT, ...) may have a gap: not dense. */
        if (lb != 0 || ext != size) return 0;
        *l = (struct layout){(size_t)size, 0, {0}, {0}, 0};
        return 1;
    }
    enum { NI = 3 * 8 + 2 }; /* a subarray of up to 8 dimensions */
    if (ni > NI || na > 2 || nd != 1) return 0;
    int in[NI];
    MPI_Aint ad[2], oext;
    MPI_Datatype old;
    if (PMPI_Type_get_contents(type, ni, na, nd, in, ad, &old) != MPI_SUCCESS) return 0;
    if (!layout_old(old, l, &oext, depth)) return 0;
    switch (comb) {
    case MPI_COMBINER_DUP:
    case MPI_COMBINER_RESIZED: /* the blocks stay; the extent is read at the top */
        return 1;
    case MPI_COMBINER_CONTIGUOUS:
        return layout_repeat(l, in[0], oext);
    case MPI_COMBINER_VECTOR:
        return layout_repeat(l, in[1], oext) && layout_repeat(l, in[0], (MPI_Aint)in[2] * oext);
    case MPI_COMBINER_HVECTOR:
        return layout_repeat(l, in[1], oext) && layout_repeat(l, in[0], ad[0]);
    case MPI_COMBINER_SUBARRAY: {
        int nd2 = in[0], order = in[1 + 3 * nd2];
        const int *sizes = in + 1, *sub = in + 1 + nd2, *starts = in + 1 + 2 * nd2;
        if (nd2 < 1 || nd2 > 8) return 0;
        /* The fastest dimension first: the last in C order, the first in
         * Fortran order. */
        MPI_Aint stride = oext;
        for (int k = 0; k < nd2; k++) {
            int d = order == MPI_ORDER_C ? nd2 - 1 - k : k;
            l->off += (MPI_Aint)starts[d] * stride;
            if (!layout_repeat(l, sub[d], stride)) return 0;
            stride *= sizes[d];
        }
        return 1;
    }
    default:
        return 0;
    }
}

/* The layout checked against the type: its bytes are the type's size and
 * no level overlaps the next (every stride positive and at least the span
 * of what it repeats). */
static int layout_sound(const struct layout *l, MPI_Datatype type) {
    int size;
    if (PMPI_Type_size(type, &size) != MPI_SUCCESS) return 0;
    size_t total = l->blk;
    MPI_Aint span = (MPI_Aint)l->blk;
    for (int i = 0; i < l->nlev; i++) {
        if (l->str[i] < span) return 0;
        total *= (size_t)l->cnt[i];
        span = (MPI_Aint)(l->cnt[i] - 1) * l->str[i] + span;
    }
    return l->blk > 0 && total == (size_t)size;
}

static const struct layout *strided_of(MPI_Datatype type, MPI_Aint *ext) {
    int i = 0;
    while (i < LAYOUTS && !(layouts[i].valid && layouts[i].type == type)) i++;
    if (i == LAYOUTS) {
        MPI_Aint lb;
        i = layouts_next;
        layouts_next = (layouts_next + 1) % LAYOUTS;
        layouts[i].type = type;
        layouts[i].valid = 1;
        layouts[i].ok = layout_of(type, &layouts[i].l, 0) && layout_sound(&layouts[i].l, type);
        PMPI_Type_get_extent(type, &lb, &layouts[i].ext);
    }
    *ext = layouts[i].ext;
    return layouts[i].ok ? &layouts[i].l : NULL;
}

/* Moves the innermost level's blocks between `at` and the packed bytes:
 * fixed-size moves for blocks of 4, 8 and 16 bytes (a column of doubles). */
#define INNER_LOOP(N)                                                                             \
    for (int i = 0; i < n0; i++, packed += (N)) {                                                \
        char *b = at + (MPI_Aint)i * s0;                                                         \
        if (pack) memcpy(packed, b, (N));                                                        \
        else memcpy(b, packed, (N));                                                             \
    }

/* `count` elements between the layout at `buf` (element e at e * ext) and
 * the packed bytes (pack: into them; else out of them). */
static void strided_move(const struct layout *l, MPI_Aint ext, char *buf, int count,
                         char *packed, int pack) {
    int n0 = l->nlev > 0 ? l->cnt[0] : 1;
    MPI_Aint s0 = l->nlev > 0 ? l->str[0] : 0;
    size_t blk = l->blk;
    for (int e = 0; e < count; e++) {
        int idx[LVL_MAX] = {0};
        for (;;) {
            char *at = buf + (MPI_Aint)e * ext + l->off;
            for (int k = 1; k < l->nlev; k++) at += (MPI_Aint)idx[k] * l->str[k];
            if (blk == 8) INNER_LOOP(8)
            else if (blk == 4) INNER_LOOP(4)
            else if (blk == 16) INNER_LOOP(16)
            else INNER_LOOP(blk)
            /* The next item of the outer levels (an odometer). */
            int k = 1;
            while (k < l->nlev && ++idx[k] == l->cnt[k]) idx[k++] = 0;
            if (k >= l->nlev) break;
        }
    }
}

/* Frees a datatype, the application's or one the accelerator made (the
 * duplicates its requests hold): the cached layouts go with it, since the
 * MPI hands a freed handle out again for the next new type. The held
 * duplicates had been freed by PMPI_Type_free alone, so after a matched
 * receive of one type the next matched receive of a strided type, given
 * the recycled handle, was unpacked with the first type's layout
 * (crates/cli/tests/accel/checks.c, listener then pairwise). */
int acc_type_free(MPI_Datatype *type) {
    acc_dt_last.valid = 0;
    for (int i = 0; i < LAYOUTS; i++) layouts[i].valid = 0;
    return PMPI_Type_free(type);
}

int MPI_Type_free(MPI_Datatype *type) {
    acc_settle();
    return acc_type_free(type);
}

int acc_dt_load(MPI_Datatype type) {
    MPI_Aint elb;
    if (PMPI_Type_size(type, &acc_dt_last.size) != MPI_SUCCESS || acc_dt_last.size < 0) {
        acc_dt_last.valid = 0;
        return -1;
    }
    PMPI_Type_get_true_extent(type, &acc_dt_last.tlb, &acc_dt_last.text);
    PMPI_Type_get_extent(type, &elb, &acc_dt_last.ext);
    acc_dt_last.type = type;
    acc_dt_last.valid = 1;
    return 0;
}

size_t acc_bytes(int count, MPI_Datatype type) {
    MPI_Aint lb;
    size_t bytes = 0;
    return acc_contiguous(count, type, &lb, &bytes) < 0 ? 0 : bytes;
}

int acc_pack_full(const void *buf, int count, MPI_Datatype type, MPI_Comm comm,
                  struct acc_msg *m) {
    MPI_Aint lb;
    size_t bytes;
    m->tmp = NULL;
    int k = acc_contiguous(count, type, &lb, &bytes);
    if (k < 0) return MPI_ERR_TYPE;
    if (k == 1) {
        m->data = (const char *)buf + lb;
        m->len = bytes;
        return MPI_SUCCESS;
    }
    MPI_Aint ext;
    const struct layout *st = strided_of(type, &ext);
    if (st) {
        m->tmp = acc_tmp_alloc(bytes);
        if (!m->tmp) return MPI_ERR_NO_MEM;
        strided_move(st, ext, (char *)buf, count, m->tmp, 1);
        m->data = m->tmp;
        m->len = bytes;
        return MPI_SUCCESS;
    }
    int psize, pos = 0;
    int rc = PMPI_Pack_size(count, type, comm, &psize);
    if (rc != MPI_SUCCESS) return rc;
    m->tmp = acc_tmp_alloc(psize > 0 ? (size_t)psize : 1);
    if (!m->tmp) return MPI_ERR_NO_MEM;
    rc = PMPI_Pack(buf, count, type, m->tmp, psize, &pos, comm);
    if (rc != MPI_SUCCESS) {
        acc_tmp_free(m->tmp);
        m->tmp = NULL;
        return rc;
    }
    m->data = m->tmp;
    m->len = (size_t)pos;
    return MPI_SUCCESS;
}

int acc_recv_area_full(void *buf, int count, MPI_Datatype type, struct acc_msg *m) {
    MPI_Aint lb;
    size_t bytes;
    m->tmp = NULL;
    int k = acc_contiguous(count, type, &lb, &bytes);
    if (k < 0) return MPI_ERR_TYPE;
    m->len = bytes;
    if (k == 1) {
        m->data = (char *)buf + lb;
        return MPI_SUCCESS;
    }
    m->tmp = acc_tmp_alloc(bytes > 0 ? bytes : 1);
    if (!m->tmp) return MPI_ERR_NO_MEM;
    m->data = m->tmp;
    return MPI_SUCCESS;
}

int acc_unpack(struct acc_msg *m, size_t got, void *buf, int count, MPI_Datatype type,
               MPI_Comm comm) {
    if (!m->tmp) return MPI_SUCCESS;
    int size, pos = 0, rc = MPI_SUCCESS;
    PMPI_Type_size(type, &size);
    /* Whole elements only: a trailing partial element is left as it was
     * (MPI_Get_elements still reports it from the status). */
    int n = size > 0 ? (int)(got / (size_t)size) : 0;
    int truncated = n > count || (n == count && got > (size_t)size * (size_t)n);
    if (n > count) n = count;
    MPI_Aint ext = 0;
    const struct layout *st = n > 0 ? strided_of(type, &ext) : NULL;
    if (st) strided_move(st, ext, buf, n, m->tmp, 0);
    else if (n > 0) rc = PMPI_Unpack(m->tmp, (int)got, &pos, buf, n, type, comm);
    acc_tmp_free(m->tmp);
    m->tmp = NULL;
    return rc == MPI_SUCCESS && truncated ? MPI_ERR_TRUNCATE : rc;
}

/* Statuses whose hidden fields (count, cancelled) say `bytes` bytes, not
 * cancelled, as PMPI_Status_set_elements_x and PMPI_Status_set_cancelled
 * wrote them: copied for the next status of the same size instead of two
 * PMPI calls per message. Two sizes: a window of equal messages hits one,
 * and a wait over sends (0 bytes) and receives together (bidirectional
 * windows) hits both instead of remaking one per request. One thread at a
 * time uses the accelerator (MPI_THREAD_MULTIPLE turns it off). */
MPI_Status acc_status_tmpl[2];
size_t acc_status_tmpl_bytes[2] = {(size_t)-1, (size_t)-1};

const MPI_Status *acc_status_tmpl_make(size_t bytes) {
    /* The entry not used last goes: entry 1 moves to 0, the new one is 1. */
    acc_status_tmpl[0] = acc_status_tmpl[1];
    acc_status_tmpl_bytes[0] = acc_status_tmpl_bytes[1];
    MPI_Status *t = &acc_status_tmpl[1];
    memset(t, 0, sizeof *t);
    PMPI_Status_set_elements_x(t, MPI_BYTE, (MPI_Count)bytes);
    PMPI_Status_set_cancelled(t, 0);
    acc_status_tmpl_bytes[1] = bytes;
    return t;
}
