/* Random sequences of collectives, every result checked exactly, for
 * `topocomm accel` (crates/cli/tests/accel.rs; scripts/coll-fuzz.py runs it
 * longer, over rank counts and both MPIs). Plain standard MPI, built with
 * plain mpicc.
 *
 *   fuzz [SEED] [CALLS] [MAX_BYTES]     (defaults 1, 400, 1 MiB)
 *
 * Every rank draws the same sequence from SEED (MPI wants the same
 * collectives in the same order on every member): which communicator
 * (MPI_COMM_WORLD, a duplicate, two splits of which one reverses the rank
 * order, pairs of neighbouring ranks, and now and then a duplicate made,
 * used and freed), which call, its root, type, operation, MPI_IN_PLACE or
 * not, and a byte count drawn log-uniformly from 0 to MAX_BYTES (so that
 * consecutive calls cross the accelerator's size classes, its trials,
 * lanes, staging areas and protocols in any order). Contributions are
 * small integers (exact in float and double sums), different per rank,
 * element and call; every rank computes what each result must be and
 * compares every element. Prints "fuzz: ok, N calls (seed S)" on rank 0;
 * a mismatch prints the call, the element and both values, and aborts. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_draw.h"

static int wrank;

/* Member r's element i of call k: a small integer, so that sums of up to
 * a few hundred members stay exact in float. */
static int value(int r, long i, long k) {
    uint64_t h = (uint64_t)r * 0x9E3779B97F4A7C15ull ^ (uint64_t)i * 0xC2B2AE3D27D4EB4Full ^
                 (uint64_t)k * 0x165667B19E3779F9ull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return (int)(h % 201) - 100;
}

enum { T_INT, T_FLOAT, T_DOUBLE, T_LONG, NTYPES };
static MPI_Datatype mpi_type(int t) {
    switch (t) {
    case T_INT: return MPI_INT;
    case T_FLOAT: return MPI_FLOAT;
    case T_DOUBLE: return MPI_DOUBLE;
    default: return MPI_LONG_LONG;
    }
}
static size_t type_size(int t) {
    return t == T_INT ? 4 : t == T_FLOAT ? 4 : 8;
}
static void put(void *buf, int t, long i, long v) {
    switch (t) {
    case T_INT: ((int *)buf)[i] = (int)v; break;
    case T_FLOAT: ((float *)buf)[i] = (float)v; break;
    case T_DOUBLE: ((double *)buf)[i] = (double)v; break;
    default: ((long long *)buf)[i] = v; break;
    }
}
static long get(const void *buf, int t, long i) {
    switch (t) {
    case T_INT: return ((const int *)buf)[i];
    case T_FLOAT: return (long)((const float *)buf)[i];
    case T_DOUBLE: return (long)((const double *)buf)[i];
    default: return (long)((const long long *)buf)[i];
    }
}

enum { O_SUM, O_MAX, O_MIN, NOPS };
static MPI_Op mpi_op(int o) { return o == O_SUM ? MPI_SUM : o == O_MAX ? MPI_MAX : MPI_MIN; }
static long fold(int o, long a, long b) {
    return o == O_SUM ? a + b : o == O_MAX ? (a > b ? a : b) : (a < b ? a : b);
}
/* The reduction of members [0, upto) of element i of call k. */
static long reduced(int o, int upto, long i, long k, const int *wr) {
    long acc = value(wr[0], i, k);
    for (int m = 1; m < upto; m++) acc = fold(o, acc, value(wr[m], i, k));
    return acc;
}

static const char *names[] = {"barrier", "bcast", "reduce", "allreduce", "allgather",
                              "alltoall", "gather", "scatter", "reduce_scatter_block",
                              "scan", "sendrecv", "iallreduce", "ibcast", "gatherv",
                              "scatterv", "allgatherv", "alltoallv", "reduce_scatter",
                              "exscan", "matrix product (not commutative)", "minloc/maxloc",
                              "strided bcast", "ibarrier", "dup-use-free"};
enum { K_BARRIER, K_BCAST, K_REDUCE, K_ALLREDUCE, K_ALLGATHER, K_ALLTOALL, K_GATHER,
       K_SCATTER, K_RSB, K_SCAN, K_SENDRECV, K_IALLREDUCE, K_IBCAST, K_GATHERV, K_SCATTERV,
       K_ALLGATHERV, K_ALLTOALLV, K_RS, K_EXSCAN, K_MATRIX, K_LOC, K_STRIDED, K_IBARRIER,
       K_DUP /* last: not drawn inside a duplicate */, NKINDS };

/* 2x2 integer matrices multiplied modulo 2^32: associative, not
 * commutative, so only MPI's rank order gives the expected product. */
typedef struct {
    unsigned a, b, c, d;
} mat;
static mat mul(mat x, mat y) {
    mat z = {x.a * y.a + x.b * y.c, x.a * y.b + x.b * y.d, x.c * y.a + x.d * y.c,
             x.c * y.b + x.d * y.d};
    return z;
}
static mat mat_of(int r, long i, long k) {
    mat m = {(unsigned)value(r, i, k) + 101u, 1u, (unsigned)value(r, i + 7, k) + 103u, 3u};
    return m;
}
/* MPI user operation: inout = in * inout (in: the lower ranks). */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *t) {
    (void)t;
    mat *x = in, *y = inout;
    for (int i = 0; i < *len; i++) y[i] = mul(x[i], y[i]);
}
static MPI_Op matop;
static MPI_Datatype mattype;

/* Elements (or bytes) member `from` gives member `to` in call k of a v
 * collective: 0 to `most`, the same on every rank without a message. */
static long vcount(long k, int from, int to, long most) {
    return most <= 0 ? 0 : (long)((unsigned)(value(from, to, k) + 100) * 7919u % (unsigned)(most + 1));
}

static long call_no;
/* FUZZ_TRACE: the drawn count of the call about to run. */
#define TRACE_COUNT(what, x)                                                                  \
    do {                                                                                     \
        if (trace) fprintf(stderr, "fuzz: rank %d: call %ld: %s %ld\n", wrank, call_no, what, (long)(x)); \
    } while (0)
static int trace; /* FUZZ_TRACE set: every call on stderr before it runs */
static const char *comm_name;

#define FAIL(...)                                                                            \
    do {                                                                                     \
        fprintf(stderr, "fuzz: rank %d: call %ld (%s on %s): ", wrank, call_no, names[kind],  \
                comm_name);                                                                  \
        fprintf(stderr, __VA_ARGS__);                                                        \
        fprintf(stderr, "\n");                                                               \
        MPI_Abort(MPI_COMM_WORLD, 1);                                                        \
    } while (0)

/* A byte count log-uniform up to max, 0 one time in 16. */
static size_t draw_bytes(size_t max) { return draw_bytes_or_zero(max, 16); }

/* One call on comm (its members' world ranks in wr[]), checked. */
static void one_call(MPI_Comm comm, const int *wr, int kind, size_t max_bytes, char *a, char *b,
                     char *c) {
    int n, me;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    int t = pick(NTYPES), o = pick(NOPS), root = pick(n), in_place = pick(3) == 0;
    MPI_Datatype dt = mpi_type(t);
    size_t es = type_size(t);
    long k = call_no;
    int rc = MPI_SUCCESS;
    if (trace)
        fprintf(stderr, "fuzz: rank %d: call %ld: %s on %s (%d members), type %d, op %d, root %d, "
                "in place %d\n", wrank, k, names[kind], comm_name, n, t, o, root, in_place);
    switch (kind) {
    case K_BARRIER:
        rc = MPI_Barrier(comm);
        break;
    case K_BCAST:
    case K_IBCAST: {
        long cnt = (long)(draw_bytes(max_bytes) / es);
        TRACE_COUNT("count", cnt);
        for (long i = 0; i < cnt; i++) put(a, t, i, me == root ? value(wr[root], i, k) : 7777);
        if (kind == K_BCAST) {
            rc = MPI_Bcast(a, (int)cnt, dt, root, comm);
        } else {
            MPI_Request r;
            rc = MPI_Ibcast(a, (int)cnt, dt, root, comm, &r);
            if (rc == MPI_SUCCESS) rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
        }
        for (long i = 0; i < cnt; i++)
            if (get(a, t, i) != value(wr[root], i, k))
                FAIL("%ld elements from root %d: element %ld is %ld, expected %d", cnt, root, i,
                     get(a, t, i), value(wr[root], i, k));
        break;
    }
    case K_REDUCE:
    case K_ALLREDUCE:
    case K_IALLREDUCE: {
        long cnt = (long)(draw_bytes(max_bytes) / es);
        TRACE_COUNT("count", cnt);
        for (long i = 0; i < cnt; i++) {
            put(a, t, i, value(wr[me], i, k));
            put(b, t, i, 5555);
        }
        int rooted = kind == K_REDUCE, gets = !rooted || me == root;
        int ip = in_place && gets;
#ifdef MPICH_VERSION
        /* MPICH 4.0.2's own MPI_Reduce crashes reading MPI_IN_PLACE as a
         * buffer at a root other than 0 with 3 members and 10 000 long
         * longs (its reduce-scatter-gather algorithm; plain MPICH, no
         * topocomm): not drawn, so that the calls check the accelerator. */
        if (rooted && root != 0) ip = 0;
#endif
        char *out = ip ? a : b;
        if (kind == K_REDUCE)
            rc = MPI_Reduce(ip ? MPI_IN_PLACE : a, out, (int)cnt, dt, mpi_op(o), root, comm);
        else if (kind == K_ALLREDUCE)
            rc = MPI_Allreduce(ip ? MPI_IN_PLACE : a, out, (int)cnt, dt, mpi_op(o), comm);
        else {
            MPI_Request r;
            rc = MPI_Iallreduce(ip ? MPI_IN_PLACE : a, out, (int)cnt, dt, mpi_op(o), comm, &r);
            if (rc == MPI_SUCCESS) rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
        }
        if (gets)
            for (long i = 0; i < cnt; i++) {
                long want = reduced(o, n, i, k, wr);
                if (get(out, t, i) != want)
                    FAIL("%ld elements, op %d, type %d, root %d, in place %d: element %ld is %ld, "
                         "expected %ld",
                         cnt, o, t, root, ip, i, get(out, t, i), want);
            }
        break;
    }
    case K_ALLGATHER:
    case K_GATHER: {
        long blk = (long)draw_bytes(max_bytes / (size_t)n);
        int gets = kind == K_ALLGATHER || me == root;
        int ip = in_place && gets;
        for (long i = 0; i < blk * n; i++) b[i] = (char)0x5a;
        char *mine = ip ? b + (size_t)me * blk : a;
        for (long i = 0; i < blk; i++) mine[i] = (char)value(wr[me], i, k);
        if (kind == K_ALLGATHER)
            rc = MPI_Allgather(ip ? MPI_IN_PLACE : a, (int)blk, MPI_CHAR, b, (int)blk, MPI_CHAR,
                               comm);
        else
            rc = MPI_Gather(ip ? MPI_IN_PLACE : a, (int)blk, MPI_CHAR, b, (int)blk, MPI_CHAR, root,
                            comm);
        if (gets)
            for (int m = 0; m < n; m++)
                for (long i = 0; i < blk; i++)
                    if (b[m * blk + i] != (char)value(wr[m], i, k))
                        FAIL("blocks of %ld bytes, in place %d: byte %ld of member %d is %d, "
                             "expected %d",
                             blk, ip, i, m, b[m * blk + i], (char)value(wr[m], i, k));
        break;
    }
    case K_ALLTOALL: {
        long blk = (long)draw_bytes(max_bytes / (size_t)n);
        /* Member m's block for member d: value(m, d * blk + i). */
        char *send = in_place ? b : a;
        for (int d = 0; d < n; d++)
            for (long i = 0; i < blk; i++) send[d * blk + i] = (char)value(wr[me], d * blk + i, k);
        if (!in_place)
            for (long i = 0; i < blk * n; i++) b[i] = (char)0x5a;
        rc = MPI_Alltoall(in_place ? MPI_IN_PLACE : a, (int)blk, MPI_CHAR, b, (int)blk, MPI_CHAR,
                          comm);
        for (int m = 0; m < n; m++)
            for (long i = 0; i < blk; i++) {
                char want = (char)value(wr[m], me * blk + i, k);
                if (b[m * blk + i] != want)
                    FAIL("blocks of %ld bytes, in place %d: byte %ld from member %d is %d, "
                         "expected %d",
                         blk, in_place, i, m, b[m * blk + i], want);
            }
        break;
    }
    case K_SCATTER: {
        long blk = (long)draw_bytes(max_bytes / (size_t)n);
        int ip = in_place && me == root;
        if (me == root)
            for (int d = 0; d < n; d++)
                for (long i = 0; i < blk; i++) a[d * blk + i] = (char)value(wr[root], d * blk + i, k);
        char *out = ip ? a + (size_t)me * blk : b;
        if (!ip)
            for (long i = 0; i < blk; i++) b[i] = (char)0x5a;
        rc = MPI_Scatter(a, (int)blk, MPI_CHAR, ip ? MPI_IN_PLACE : b, (int)blk, MPI_CHAR, root,
                         comm);
        for (long i = 0; i < blk; i++)
            if (out[i] != (char)value(wr[root], me * blk + i, k))
                FAIL("blocks of %ld bytes from root %d: byte %ld is %d, expected %d", blk, root, i,
                     out[i], (char)value(wr[root], me * blk + i, k));
        break;
    }
    case K_RSB: {
        long cnt = (long)(draw_bytes(max_bytes / (size_t)n) / es);
        for (long i = 0; i < cnt * n; i++) put(a, t, i, value(wr[me], i, k));
        for (long i = 0; i < cnt; i++) put(b, t, i, 4444);
        char *out = in_place ? a : b;
        rc = MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : a, out, (int)cnt, dt, mpi_op(o),
                                      comm);
        for (long i = 0; i < cnt; i++) {
            long want = reduced(o, n, me * cnt + i, k, wr);
            if (get(out, t, i) != want)
                FAIL("%ld elements per member, op %d, type %d, in place %d: element %ld is %ld, "
                     "expected %ld",
                     cnt, o, t, in_place, i, get(out, t, i), want);
        }
        break;
    }
    case K_SCAN:
    case K_EXSCAN: {
        /* Member me gets members 0..me (scan) or 0..me-1 (exscan, none
         * on member 0) reduced. */
        int upto = kind == K_SCAN ? me + 1 : me;
        long cnt = (long)(draw_bytes(max_bytes) / es);
        for (long i = 0; i < cnt; i++) {
            put(a, t, i, value(wr[me], i, k));
            put(b, t, i, 3333);
        }
        char *out = in_place ? a : b;
        void *in = in_place ? MPI_IN_PLACE : a;
        rc = kind == K_SCAN ? MPI_Scan(in, out, (int)cnt, dt, mpi_op(o), comm)
                            : MPI_Exscan(in, out, (int)cnt, dt, mpi_op(o), comm);
        if (rc == MPI_SUCCESS && upto > 0)
            for (long i = 0; i < cnt; i++) {
                long want = reduced(o, upto, i, k, wr);
                if (get(out, t, i) != want)
                    FAIL("%ld elements, op %d, type %d, in place %d: element %ld is %ld, expected "
                         "%ld",
                         cnt, o, t, in_place, i, get(out, t, i), want);
            }
        break;
    }
    case K_SENDRECV: {
        long len = (long)draw_bytes(max_bytes);
        int to = (me + 1) % n, from = (me - 1 + n) % n;
        for (long i = 0; i < len; i++) a[i] = (char)value(wr[me], i, k);
        for (long i = 0; i < len; i++) c[i] = (char)0x5a;
        MPI_Status st;
        rc = MPI_Sendrecv(a, (int)len, MPI_CHAR, to, (int)(k % 32000), c, (int)len, MPI_CHAR, from,
                          (int)(k % 32000), comm, &st);
        int got = -1;
        if (rc == MPI_SUCCESS) MPI_Get_count(&st, MPI_CHAR, &got);
        if (rc == MPI_SUCCESS && got != len) FAIL("%ld bytes from %d: received %d", len, from, got);
        for (long i = 0; i < len; i++)
            if (c[i] != (char)value(wr[from], i, k))
                FAIL("%ld bytes from %d: byte %ld is %d, expected %d", len, from, i, c[i],
                     (char)value(wr[from], i, k));
        break;
    }
    case K_GATHERV:
    case K_ALLGATHERV: {
        /* Member m's block: vcount(k, m, 0, most) bytes, placed in reverse
         * member order in the receive buffer with a gap of 3 bytes. */
        long most = (long)draw_bytes(max_bytes / (size_t)n / 2);
        int *cnt = malloc(sizeof(int) * (size_t)n), *disp = malloc(sizeof(int) * (size_t)n);
        long at = 0;
        for (int m = n - 1; m >= 0; m--) {
            cnt[m] = (int)vcount(k, m, 0, most);
            disp[m] = (int)at;
            at += cnt[m] + 3;
        }
        int gets = kind == K_ALLGATHERV || me == root;
        int ip = in_place && gets;
        for (long i = 0; i < at; i++) b[i] = (char)0x5a;
        char *mine = ip ? b + disp[me] : a;
        for (long i = 0; i < cnt[me]; i++) mine[i] = (char)value(wr[me], i, k);
        if (kind == K_ALLGATHERV)
            rc = MPI_Allgatherv(ip ? MPI_IN_PLACE : a, cnt[me], MPI_CHAR, b, cnt, disp, MPI_CHAR,
                                comm);
        else
            rc = MPI_Gatherv(ip ? MPI_IN_PLACE : a, cnt[me], MPI_CHAR, b, cnt, disp, MPI_CHAR, root,
                             comm);
        if (gets && rc == MPI_SUCCESS)
            for (int m = 0; m < n; m++) {
                for (long i = 0; i < cnt[m]; i++)
                    if (b[disp[m] + i] != (char)value(wr[m], i, k))
                        FAIL("%d bytes of member %d at %d, in place %d: byte %ld is %d", cnt[m], m,
                             disp[m], ip, i, b[disp[m] + i]);
                for (long i = 0; i < 3; i++)
                    if (b[disp[m] + cnt[m] + i] != (char)0x5a)
                        FAIL("the gap after member %d's %d bytes was written", m, cnt[m]);
            }
        free(cnt);
        free(disp);
        break;
    }
    case K_SCATTERV: {
        long most = (long)draw_bytes(max_bytes / (size_t)n / 2);
        int *cnt = malloc(sizeof(int) * (size_t)n), *disp = malloc(sizeof(int) * (size_t)n);
        long at = 0;
        for (int m = n - 1; m >= 0; m--) {
            cnt[m] = (int)vcount(k, root, m, most);
            disp[m] = (int)at;
            at += cnt[m] + 5;
        }
        int ip = in_place && me == root;
        if (me == root)
            for (int m = 0; m < n; m++)
                for (long i = 0; i < cnt[m]; i++) a[disp[m] + i] = (char)value(wr[root], m * 1000003L + i, k);
        for (long i = 0; i < cnt[me] + 8; i++) b[i] = (char)0x5a;
        rc = MPI_Scatterv(a, cnt, disp, MPI_CHAR, ip ? MPI_IN_PLACE : b, cnt[me], MPI_CHAR, root,
                          comm);
        char *out = ip ? a + disp[me] : b;
        if (rc == MPI_SUCCESS) {
            for (long i = 0; i < cnt[me]; i++)
                if (out[i] != (char)value(wr[root], me * 1000003L + i, k))
                    FAIL("%d bytes from root %d: byte %ld is %d", cnt[me], root, i, out[i]);
            if (!ip && b[cnt[me]] != (char)0x5a) FAIL("a byte past the %d received was written", cnt[me]);
        }
        free(cnt);
        free(disp);
        break;
    }
    case K_ALLTOALLV: {
        long most = (long)draw_bytes(max_bytes / (size_t)n / 2);
        int *sc = malloc(sizeof(int) * (size_t)n), *sd = malloc(sizeof(int) * (size_t)n);
        int *rcn = malloc(sizeof(int) * (size_t)n), *rd = malloc(sizeof(int) * (size_t)n);
        long sat = 0, rat = 0;
        for (int m = n - 1; m >= 0; m--) {
            sc[m] = (int)vcount(k, me, m, most);
            sd[m] = (int)sat;
            sat += sc[m] + 1;
        }
        for (int m = 0; m < n; m++) {
            rcn[m] = (int)vcount(k, m, me, most);
            rd[m] = (int)rat;
            rat += rcn[m] + 2;
        }
        for (int m = 0; m < n; m++)
            for (long i = 0; i < sc[m]; i++) a[sd[m] + i] = (char)value(wr[me], m * 1000003L + i, k);
        for (long i = 0; i < rat; i++) b[i] = (char)0x5a;
        rc = MPI_Alltoallv(a, sc, sd, MPI_CHAR, b, rcn, rd, MPI_CHAR, comm);
        if (rc == MPI_SUCCESS)
            for (int m = 0; m < n; m++) {
                for (long i = 0; i < rcn[m]; i++)
                    if (b[rd[m] + i] != (char)value(wr[m], me * 1000003L + i, k))
                        FAIL("%d bytes from member %d: byte %ld is %d", rcn[m], m, i, b[rd[m] + i]);
                if (b[rd[m] + rcn[m]] != (char)0x5a) FAIL("a byte past member %d's was written", m);
            }
        free(sc);
        free(sd);
        free(rcn);
        free(rd);
        break;
    }
    case K_RS: {
        long most = (long)(draw_bytes(max_bytes / (size_t)n / 2) / es);
        int *cnt = malloc(sizeof(int) * (size_t)n);
        long total = 0;
        for (int m = 0; m < n; m++) total += cnt[m] = (int)vcount(k, m, 0, most);
        long first = 0;
        for (int m = 0; m < me; m++) first += cnt[m];
#ifdef MPICH_VERSION
        /* MPICH 4.0.2's own in-place MPI_Reduce_scatter asserts on
         * overlapping memcpy ranges (typerep_yaksa_pack.c, 8 members, 100
         * to 200 long longs each, plain MPICH): not drawn there. */
        in_place = 0;
#endif
        for (long i = 0; i < total; i++) put(a, t, i, value(wr[me], i, k));
        for (long i = 0; i < cnt[me]; i++) put(b, t, i, 2222);
        char *out = in_place ? a : b;
        rc = MPI_Reduce_scatter(in_place ? MPI_IN_PLACE : a, out, cnt, dt, mpi_op(o), comm);
        if (rc == MPI_SUCCESS)
            for (long i = 0; i < cnt[me]; i++) {
                long want = reduced(o, n, first + i, k, wr);
                if (get(out, t, i) != want)
                    FAIL("%d of %ld elements, op %d, type %d, in place %d: element %ld is %ld, "
                         "expected %ld",
                         cnt[me], total, o, t, in_place, i, get(out, t, i), want);
            }
        free(cnt);
        break;
    }
    case K_MATRIX: {
        /* Allreduce, reduce or scan (drawn) of matrices with the
         * non-commutative product. */
        long cnt = (long)(draw_bytes(max_bytes / 4) / sizeof(mat));
        int how = pick(3);
        mat *x = (mat *)a, *y = (mat *)b;
        for (long i = 0; i < cnt; i++) {
            x[i] = mat_of(wr[me], i, k);
            y[i] = (mat){9, 9, 9, 9};
        }
        int gets = how != 1 || me == root;
        if (how == 0)
            rc = MPI_Allreduce(x, y, (int)cnt, mattype, matop, comm);
        else if (how == 1)
            rc = MPI_Reduce(x, y, (int)cnt, mattype, matop, root, comm);
        else
            rc = MPI_Scan(x, y, (int)cnt, mattype, matop, comm);
        int upto = how == 2 ? me + 1 : n;
        if (gets && rc == MPI_SUCCESS)
            for (long i = 0; i < cnt; i++) {
                mat w = mat_of(wr[0], i, k);
                for (int m = 1; m < upto; m++) w = mul(w, mat_of(wr[m], i, k));
                if (memcmp(&w, &y[i], sizeof w))
                    FAIL("%ld matrices (%s), root %d: element %ld is {%u %u %u %u}, expected "
                         "{%u %u %u %u}",
                         cnt, how == 0 ? "allreduce" : how == 1 ? "reduce" : "scan", root, i,
                         y[i].a, y[i].b, y[i].c, y[i].d, w.a, w.b, w.c, w.d);
            }
        break;
    }
    case K_LOC: {
        struct {
            double v;
            int i;
        } *x = (void *)a, *y = (void *)b;
        long cnt = (long)(draw_bytes(max_bytes / 2) / 16);
        int maxloc = pick(2);
        for (long i = 0; i < cnt; i++) {
            x[i].v = (double)(value(wr[me], i, k) / 20); /* ties between members */
            x[i].i = me;
        }
        rc = MPI_Allreduce(x, y, (int)cnt, MPI_DOUBLE_INT, maxloc ? MPI_MAXLOC : MPI_MINLOC, comm);
        if (rc == MPI_SUCCESS)
            for (long i = 0; i < cnt; i++) {
                double best = (double)(value(wr[0], i, k) / 20);
                int at = 0;
                for (int m = 1; m < n; m++) {
                    double v = (double)(value(wr[m], i, k) / 20);
                    if (maxloc ? v > best : v < best) {
                        best = v;
                        at = m;
                    }
                }
                if (y[i].v != best || y[i].i != at)
                    FAIL("%ld pairs, %s: element %ld is (%g, %d), expected (%g, %d)", cnt,
                         maxloc ? "maxloc" : "minloc", i, y[i].v, y[i].i, best, at);
            }
        break;
    }
    case K_STRIDED: {
        /* Every other int of 2 * cnt: a non-contiguous broadcast type. */
        long cnt = (long)(draw_bytes(max_bytes / 2) / 4);
        MPI_Datatype vec;
        MPI_Type_vector((int)cnt, 1, 2, MPI_INT, &vec);
        MPI_Type_commit(&vec);
        int *x = (int *)a;
        for (long i = 0; i < 2 * cnt; i++) x[i] = me == root || i % 2 ? value(wr[root], i, k) : -7;
        if (me != root)
            for (long i = 1; i < 2 * cnt; i += 2) x[i] = value(wr[me], i, k + 1);
        rc = MPI_Bcast(x, cnt ? 1 : 0, vec, root, comm);
        MPI_Type_free(&vec);
        if (rc == MPI_SUCCESS)
            for (long i = 0; i < 2 * cnt; i++) {
                int want = i % 2 ? (me == root ? value(wr[root], i, k) : value(wr[me], i, k + 1))
                                 : value(wr[root], i, k);
                if (x[i] != want)
                    FAIL("%ld strided ints from root %d: int %ld is %d, expected %d", cnt, root, i,
                         x[i], want);
            }
        break;
    }
    case K_IBARRIER: {
        MPI_Request r;
        rc = MPI_Ibarrier(comm, &r);
        if (rc == MPI_SUCCESS) rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
        break;
    }
    default:
        break;
    }
    if (rc != MPI_SUCCESS) FAIL("returned error %d", rc);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    unsigned long long seed;
    long calls = 400;
    size_t max_bytes;
    fuzz_args(argc, argv, "fuzz [SEED] [CALLS] [MAX_BYTES <= 1 GiB]", &calls, &max_bytes,
              (size_t)1 << 30, &seed);
    trace = getenv("FUZZ_TRACE") != NULL;
    MPI_Op_create(matmul, 0, &matop);
    MPI_Type_contiguous(4, MPI_UNSIGNED, &mattype);
    MPI_Type_commit(&mattype);

    /* The communicators and their members' world ranks (in comm order). */
    enum { NCOMMS = 5 };
    MPI_Comm comms[NCOMMS];
    const char *cnames[NCOMMS] = {"world", "a duplicate", "split by parity",
                                  "reversed", "pairs"};
    comms[0] = MPI_COMM_WORLD;
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &comms[2]);
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - wrank, &comms[3]);
    MPI_Comm_split(MPI_COMM_WORLD, wrank / 2, wrank, &comms[4]);
    int *members[NCOMMS];
    for (int i = 0; i < NCOMMS; i++) {
        int n;
        MPI_Comm_size(comms[i], &n);
        members[i] = malloc(sizeof(int) * (size_t)n);
        MPI_Allgather(&wrank, 1, MPI_INT, members[i], 1, MPI_INT, comms[i]);
    }
    /* Room for the largest call: n blocks of max_bytes / n, or max_bytes. */
    size_t room = max_bytes + 64;
    char *a = malloc(room), *b = malloc(room), *c = malloc(room);
    if (!a || !b || !c) MPI_Abort(MPI_COMM_WORLD, 3);

    /* Zero counts first, on every communicator, while the accelerator's
     * scratch areas are still unallocated: a zero-count reduction that was
     * the first call of the one-hop algorithm failed with MPI_ERR_NO_MEM
     * (docs/conformance.md, "Random collective sequences"). */
    for (int i = 0; i < NCOMMS; i++) {
        int z = 0, zr = 0;
        if (MPI_Allreduce(&z, &zr, 0, MPI_INT, MPI_SUM, comms[i]) != MPI_SUCCESS ||
            MPI_Reduce(&z, &zr, 0, MPI_INT, MPI_SUM, 0, comms[i]) != MPI_SUCCESS) {
            fprintf(stderr, "fuzz: rank %d: a zero-count reduction on %s failed\n", wrank,
                    cnames[i]);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    for (call_no = 0; call_no < calls; call_no++) {
        int which = pick(NCOMMS), kind = pick(NKINDS);
        /* The parity split and the pairs differ between ranks: every rank
         * draws the same numbers, and each calls on its own group. */
        MPI_Comm comm = comms[which];
        comm_name = cnames[which];
        if (kind == K_DUP) {
            MPI_Comm d;
            MPI_Comm_dup(comm, &d);
            int inner = pick(NKINDS - 1);
            one_call(d, members[which], inner, max_bytes, a, b, c);
            one_call(d, members[which], K_BARRIER, max_bytes, a, b, c);
            MPI_Comm_free(&d);
        } else {
            one_call(comm, members[which], kind, max_bytes, a, b, c);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (wrank == 0) printf("fuzz: ok, %ld calls (seed %llu)\n", calls, seed);
    for (int i = 1; i < NCOMMS; i++) MPI_Comm_free(&comms[i]);
    MPI_Op_free(&matop);
    MPI_Type_free(&mattype);
    for (int i = 0; i < NCOMMS; i++) free(members[i]);
    free(a);
    free(b);
    free(c);
    MPI_Finalize();
    return 0;
}
