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
 * (Open MPI) ran at 1.5 GB/s, 2.5-3.0 with the areas kept, against 5.0-5.3
 * plain (the rest: the whole message is packed before it moves, docs/mpi.md).
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
 * A vector (MPI_Type_vector, MPI_Type_create_hvector) of a dense element
 * (its bytes one run: a predefined type, or a contiguous one) is n blocks
 * of blk bytes, block i at i * stride, and element e of a message at e *
 * ext: a matrix column, a halo face. Open MPI's generic convertor packs
 * such a column of doubles at about 5 GB/s (PMPI_Pack, 256 KiB: 50 us); the
 * loops below move it at the speed of memory. The bytes are the ones
 * PMPI_Pack writes (the native representation: the type map's bytes in
 * order), so the other end may pack or unpack either way. One layout is
 * kept, for the last type looked at (cleared by MPI_Type_free, as the
 * handle may come back for another type). */
struct strided {
    MPI_Datatype type;
    int valid, ok;   /* looked at; a strided layout */
    int n;           /* blocks per element */
    size_t blk;      /* bytes per block */
    MPI_Aint stride; /* bytes from a block to the next */
    MPI_Aint ext;    /* bytes from an element to the next */
};
static struct strided strided_last;

/* Whether `t` is dense: its size bytes one run starting at its lower bound
 * 0, with no gap before the next element. */
static int dense(MPI_Datatype t, size_t *size) {
    int sz;
    MPI_Aint lb, ext, tlb, text;
    if (PMPI_Type_size(t, &sz) != MPI_SUCCESS || sz <= 0) return 0;
    PMPI_Type_get_extent(t, &lb, &ext);
    PMPI_Type_get_true_extent(t, &tlb, &text);
    *size = (size_t)sz;
    return lb == 0 && tlb == 0 && ext == sz && text == sz;
}

static void strided_look_at(MPI_Datatype type, struct strided *s, int depth);

static void strided_look(MPI_Datatype type, struct strided *s) {
    s->type = type;
    s->valid = 1;
    s->ok = 0;
    strided_look_at(type, s, 0);
}

/* `type`, or what it duplicates (a request keeps a duplicate of its
 * datatype, which the application may free meanwhile), a few levels. */
static void strided_look_at(MPI_Datatype type, struct strided *s, int depth) {
    int ni, na, nd, comb;
    if (PMPI_Type_get_envelope(type, &ni, &na, &nd, &comb) != MPI_SUCCESS) return;
    if (comb == MPI_COMBINER_DUP && depth < 4) {
        MPI_Datatype orig;
        if (PMPI_Type_get_contents(type, 0, 0, 1, NULL, NULL, &orig) != MPI_SUCCESS) return;
        strided_look_at(orig, s, depth + 1);
        int oni, ona, ond, ocomb;
        PMPI_Type_get_envelope(orig, &oni, &ona, &ond, &ocomb);
        if (ocomb != MPI_COMBINER_NAMED) PMPI_Type_free(&orig);
        return;
    }
    if ((comb != MPI_COMBINER_VECTOR && comb != MPI_COMBINER_HVECTOR) || ni > 3 || na > 1 ||
        nd != 1)
        return;
    int ints[3];
    MPI_Aint addrs[1];
    MPI_Datatype old;
    if (PMPI_Type_get_contents(type, ni, na, nd, ints, addrs, &old) != MPI_SUCCESS) return;
    size_t esz = 0;
    int old_dense = dense(old, &esz);
    int oni, ona, ond, ocomb;
    PMPI_Type_get_envelope(old, &oni, &ona, &ond, &ocomb);
    if (ocomb != MPI_COMBINER_NAMED) PMPI_Type_free(&old);
    int count = ints[0], bl = ints[1];
    MPI_Aint stride = comb == MPI_COMBINER_VECTOR ? (MPI_Aint)ints[2] * (MPI_Aint)esz : addrs[0];
    if (!old_dense || count < 1 || bl < 1) return;
    size_t blk = (size_t)bl * esz;
    int size;
    MPI_Aint lb, ext;
    PMPI_Type_size(type, &size);
    PMPI_Type_get_extent(type, &lb, &ext);
    /* Blocks in increasing order, apart (else the general path), the
     * element's first byte at its lower bound 0. */
    if ((count > 1 && stride < (MPI_Aint)blk) || lb != 0 || (size_t)size != (size_t)count * blk)
        return;
    s->n = count;
    s->blk = blk;
    s->stride = stride;
    s->ext = ext;
    s->ok = 1;
}

static const struct strided *strided_of(MPI_Datatype type) {
    if (!strided_last.valid || strided_last.type != type) strided_look(type, &strided_last);
    return strided_last.ok ? &strided_last : NULL;
}

/* Moves `count` elements between the strided layout at `buf` and the
 * packed bytes at `packed` (pack: into packed; else out of it). Fixed
 * sizes of block get fixed-size moves (a column of doubles: 8 bytes). */
#define STRIDED_LOOP(N)                                                                           \
    for (int e = 0; e < count; e++) {                                                            \
        char *base = buf + (MPI_Aint)e * s->ext;                                                 \
        for (int i = 0; i < s->n; i++, packed += (N)) {                                          \
            char *b = base + (MPI_Aint)i * s->stride;                                            \
            if (pack) memcpy(packed, b, (N));                                                    \
            else memcpy(b, packed, (N));                                                         \
        }                                                                                        \
    }
static void strided_move(const struct strided *s, char *buf, int count, char *packed, int pack) {
    if (s->blk == 8) STRIDED_LOOP(8)
    else if (s->blk == 4) STRIDED_LOOP(4)
    else if (s->blk == 16) STRIDED_LOOP(16)
    else STRIDED_LOOP(s->blk)
}

int MPI_Type_free(MPI_Datatype *type) {
    acc_settle();
    acc_dt_last.valid = 0;
    strided_last.valid = 0;
    return PMPI_Type_free(type);
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
    const struct strided *st = strided_of(type);
    if (st) {
        m->tmp = acc_tmp_alloc(bytes);
        if (!m->tmp) return MPI_ERR_NO_MEM;
        strided_move(st, (char *)buf, count, m->tmp, 1);
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
    const struct strided *st = n > 0 ? strided_of(type) : NULL;
    if (st) strided_move(st, buf, n, m->tmp, 0);
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
