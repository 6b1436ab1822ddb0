/* Collective semantics check for `topocomm accel` (crates/cli/tests/accel.rs):
 * MPI_Barrier, MPI_Bcast, MPI_Reduce, MPI_Allreduce, MPI_Gather, MPI_Scatter,
 * MPI_Allgather and MPI_Alltoall, their v variants (uneven and zero counts,
 * displacements out of order), MPI_Reduce_scatter(_block), MPI_Scan and
 * MPI_Exscan, MPI_Ibarrier, MPI_Ibcast and MPI_Iallreduce on MPI_COMM_WORLD,
 * a duplicate and a split (a barrier holds every member until the last
 * comes), with every root, MPI_IN_PLACE, a non-contiguous
 * broadcast type, MINLOC, a user operation that is not commutative (2x2
 * integer matrix product: only the rank order gives the right answer), and
 * bitwise determinism of a double allreduce (the same bits on every rank
 * and on every repetition), and every predefined type and operation the
 * accelerator reduces itself against the MPI's MPI_Reduce_local. Plain standard MPI, built with plain mpicc.
 * Prints "accel_coll: ok" on rank 0 when every check passed; any failure
 * prints the check and aborts. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank, size;

#define CHECK(cond, ...)                                                                         \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "accel_coll: rank %d: check failed at line %d: ", rank, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fprintf(stderr, "\n");                                                             \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                      \
        }                                                                                      \
    } while (0)

/* 2x2 integer matrices, multiplied modulo 2^32: associative, not commutative. */
typedef struct {
    unsigned a, b, c, d;
} mat;

static mat mul(mat x, mat y) {
    mat z = {x.a * y.a + x.b * y.c, x.a * y.b + x.b * y.d, x.c * y.a + x.d * y.c,
             x.c * y.b + x.d * y.d};
    return z;
}

static mat mat_of(int r) {
    mat m = {(unsigned)r + 1, 1, 2, (unsigned)(3 * r) + 1};
    return m;
}

/* MPI user op: inout = in * inout (in holds the lower ranks). */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *t) {
    (void)t;
    mat *x = in, *y = inout;
    for (int i = 0; i < *len; i++) y[i] = mul(x[i], y[i]);
}

static double rnd(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return ((double)(*s >> 8) / (double)(1u << 24) - 0.5) * 1e6 / (1 + (*s % 97));
}

/* The 2x2 matrix datatype and the non-commutative product on it. */
static void mat_begin(MPI_Datatype *tmat, MPI_Op *op) {
    MPI_Type_contiguous(4, MPI_UNSIGNED, tmat);
    MPI_Type_commit(tmat);
    MPI_Op_create(matmul, 0, op);
}

static void mat_end(MPI_Datatype *tmat, MPI_Op *op) {
    MPI_Op_free(op);
    MPI_Type_free(tmat);
}

/* Seconds on CLOCK_MONOTONIC. */
static double mono_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void check_comm(MPI_Comm comm, const char *name) {
    int r, n;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    for (int i = 0; i < 3; i++) MPI_Barrier(comm);
    /* A barrier holds every member until the last one comes (20 ms late):
     * each leaves after the last one entered, by CLOCK_MONOTONIC, one clock
     * for every process of the machine (a wait measured from each rank's
     * own start would count how late it left the previous barrier). */
    for (int i = 0; i < 2; i++) {
        if (r == n - 1) usleep(20000);
        double entered = mono_s();
        MPI_Barrier(comm);
        double left = mono_s(), last_entered = entered;
        MPI_Bcast(&last_entered, 1, MPI_DOUBLE, n - 1, comm);
        CHECK(left >= last_entered, "%s barrier %d: left %.3f ms before the last member came",
              name, i, (last_entered - left) * 1e3);
    }

    /* Broadcast from every root: ints, then a strided vector type. */
    for (int root = 0; root < n; root++) {
        int v[1000];
        for (int i = 0; i < 1000; i++) v[i] = r == root ? root * 100000 + i : -1;
        MPI_Bcast(v, 1000, MPI_INT, root, comm);
        for (int i = 0; i < 1000; i++)
            CHECK(v[i] == root * 100000 + i, "%s bcast root %d: v[%d] = %d", name, root, i, v[i]);
        MPI_Datatype every2;
        MPI_Type_vector(50, 1, 2, MPI_DOUBLE, &every2);
        MPI_Type_commit(&every2);
        double w[100];
        for (int i = 0; i < 100; i++) w[i] = r == root ? i + 0.5 : -1.0;
        MPI_Bcast(w, 1, every2, root, comm);
        for (int i = 0; i < 100; i++) {
            double want = (i % 2 == 0 || r == root) ? i + 0.5 : -1.0;
            CHECK(w[i] == want, "%s strided bcast root %d: w[%d] = %g", name, root, i, w[i]);
        }
        MPI_Type_free(&every2);
    }
    /* Large broadcasts (rendezvous / single copy in the transport), from
     * the first and the last rank: two members above the accelerator's
     * limit of 1 MiB (one message, over the transport at any size), more at
     * the limit (above it, the MPI's own). */
    for (int root = 0; root < n; root += n - 1) {
        size_t big = n == 2 ? (3 << 20) + 5 : 1 << 20;
        char *b = malloc(big);
        for (size_t i = 0; i < big; i++) b[i] = r == root ? (char)(i * 7 + root) : 0;
        MPI_Bcast(b, (int)big, MPI_CHAR, root, comm);
        for (size_t i = 0; i < big; i++)
            CHECK(b[i] == (char)(i * 7 + root), "%s big bcast root %d: byte %zu", name, root, i);
        free(b);
        if (n == 1) break;
    }

    /* 12 KiB from every root: broadcast, scatter of 12 KiB blocks and a
     * sum, within the sizes where rules with answers by single copy send
     * a waited-for message by rendezvous (the two-member broadcast and
     * scatter: TC_SEND_WAITED; accel.rs runs this with such rules too):
     * every byte and element arrives. The sum over pretend nodes once
     * crashed MPICH (an in-place reduce at leader 1: coll.c). */
    {
        enum { B12 = 12 << 10, D12 = B12 / 8 };
        char *b = malloc(B12), *sc = malloc((size_t)n * B12), *rb = malloc(B12);
        double *in = malloc(B12), *out = malloc(B12);
        for (int root = 0; root < n; root++) {
            for (int i = 0; i < B12; i++) b[i] = r == root ? (char)(i * 3 + root) : 0;
            MPI_Bcast(b, B12, MPI_CHAR, root, comm);
            for (int i = 0; i < B12; i++)
                CHECK(b[i] == (char)(i * 3 + root), "%s 12K bcast root %d: byte %d", name, root, i);
            for (size_t i = 0; i < (size_t)n * B12; i++) sc[i] = (char)(i * 11 + root);
            MPI_Scatter(sc, B12, MPI_CHAR, rb, B12, MPI_CHAR, root, comm);
            for (int i = 0; i < B12; i++)
                CHECK(rb[i] == (char)(((size_t)r * B12 + (size_t)i) * 11 + (size_t)root),
                      "%s 12K scatter root %d: byte %d", name, root, i);
            for (int i = 0; i < D12; i++) in[i] = (double)(i % 1000) + r, out[i] = -1.0;
            MPI_Reduce(in, r == root ? out : NULL, D12, MPI_DOUBLE, MPI_SUM, root, comm);
            if (r == root)
                for (int i = 0; i < D12; i++)
                    CHECK(out[i] == (double)n * (i % 1000) + (double)n * (n - 1) / 2,
                          "%s 12K reduce root %d: element %d is %g", name, root, i, out[i]);
        }
        free(b);
        free(sc);
        free(rb);
        free(in);
        free(out);
    }

    /* Broadcasts of one size class, more calls than the trials of a
     * crowded node under Open MPI (the transport's run, Open MPI's run,
     * then the way picked): every call's bytes arrive, whichever way. */
    {
        size_t mid = (64 << 10) + 3;
        char *b = malloc(mid);
        for (int it = 0; it < 30; it++) {
            int root = it % n;
            for (size_t i = 0; i < mid; i++) b[i] = r == root ? (char)(i * 5 + it) : 0;
            MPI_Bcast(b, (int)mid, MPI_CHAR, root, comm);
            for (size_t i = 0; i < mid; i++)
                CHECK(b[i] == (char)(i * 5 + it), "%s bcast %d root %d: byte %zu", name, it, root,
                      i);
        }
        free(b);
    }

    /* Allgathers and alltoalls of one block size class (8 KiB and 3
     * ints), more calls than the trials of a crowded node under Open MPI
     * (the transport's run, Open MPI's run, then the way picked), every
     * third one in place: every call's blocks arrive, whichever way. */
    {
        enum { BLK = 2051 };
        int *s = malloc((size_t)n * BLK * sizeof(int)), *b = malloc((size_t)n * BLK * sizeof(int));
        for (int it = 0; it < 30; it++) {
            int ip = it % 3 == 2;
            for (int e = 0; e < BLK; e++) s[e] = r * 7919 + e * 3 + it;
            if (ip) memcpy(b + (size_t)r * BLK, s, BLK * sizeof(int));
            MPI_Allgather(ip ? MPI_IN_PLACE : s, BLK, MPI_INT, b, BLK, MPI_INT, comm);
            for (size_t e = 0; e < (size_t)n * BLK; e++) {
                int from = (int)(e / BLK), k = (int)(e % BLK);
                CHECK(b[e] == from * 7919 + k * 3 + it, "%s allgather %d: [%zu] = %d", name, it, e,
                      b[e]);
            }
            for (size_t e = 0; e < (size_t)n * BLK; e++)
                s[e] = r * 7919 + (int)(e / BLK) * 131 + (int)(e % BLK) + it;
            if (ip) memcpy(b, s, (size_t)n * BLK * sizeof(int));
            MPI_Alltoall(ip ? MPI_IN_PLACE : s, BLK, MPI_INT, b, BLK, MPI_INT, comm);
            for (size_t e = 0; e < (size_t)n * BLK; e++) {
                int from = (int)(e / BLK), k = (int)(e % BLK);
                CHECK(b[e] == from * 7919 + r * 131 + k + it, "%s alltoall %d: [%zu] = %d", name, it,
                      e, b[e]);
            }
        }
        free(s);
        free(b);
    }

    /* Alltoalls of 4 MiB blocks on the world, 13 calls: fewer than a
     * crowded node's trials of short calls take (24), as many as those of
     * calls of a millisecond or more (coll.c trial_record). */
    if (!strcmp(name, "world")) {
        const size_t blk = (size_t)1 << 20; /* ints: 4 MiB */
        int *s = malloc((size_t)n * blk * sizeof(int)), *b = malloc((size_t)n * blk * sizeof(int));
        CHECK(s && b, "%s: no memory for the 4 MiB-block alltoalls", name);
        for (int it = 0; it < 13; it++) {
            for (size_t e = 0; e < (size_t)n * blk; e++) s[e] = r * 7 + (int)(e / blk) * 3 + it;
            MPI_Alltoall(s, (int)blk, MPI_INT, b, (int)blk, MPI_INT, comm);
            for (size_t e = 0; e < (size_t)n * blk; e++) {
                int from = (int)(e / blk);
                if (b[e] != from * 7 + r * 3 + it) {
                    CHECK(0, "%s 4 MiB-block alltoall %d: [%zu] = %d", name, it, e, b[e]);
                    break;
                }
            }
        }
        free(s);
        free(b);
    }

    /* Reduces of one size class, more calls than the trials of a crowded
     * node (straight to the root, by blocks, then the way picked), root
     * and in place moving, of sums that rounding makes depend on the
     * order: every call's sum arrives, and at each root with the bits of
     * the first call there, whichever way. */
    {
        enum { MID = 4099 }; /* 32 KiB and 3 doubles: uneven blocks */
        double *in = malloc(MID * sizeof(double)), *out = malloc(MID * sizeof(double));
        double *first = malloc((size_t)n * MID * sizeof(double));
        for (int i = 0; i < MID; i++) in[i] = 1.0 / (i + 1) + r / 3.0;
        for (int it = 0; it < 30; it++) {
            int root = it % n, ip = r == root && it % 3 == 1;
#ifndef OPEN_MPI
            ip = ip && root == 0; /* plain MPICH 4.0.2: see the reduces below */
#endif
            for (int i = 0; i < MID; i++) out[i] = ip ? in[i] : -1.0;
            MPI_Reduce(ip ? MPI_IN_PLACE : in, r == root ? out : NULL, MID, MPI_DOUBLE, MPI_SUM,
                       root, comm);
            if (r != root) continue;
            double *f = first + (size_t)root * MID;
            if (it < n) memcpy(f, out, MID * sizeof(double));
            for (int i = 0; i < MID; i++) {
                double want = (double)n / (i + 1) + n * (n - 1) / 6.0;
                CHECK(fabs(out[i] - want) <= 1e-12 * want && memcmp(&out[i], &f[i], sizeof *f) == 0,
                      "%s reduce %d of %d doubles to %d: %.17g at %d (first %.17g, want %.17g)",
                      name, it, MID, root, out[i], i, f[i], want);
            }
        }
        free(in);
        free(out);
        free(first);
    }

    /* Reduce to every root: long sum, MINLOC, MPI_IN_PLACE at the root. */
    for (int root = 0; root < n; root++) {
        long s[3] = {r, 2L * r, 1}, out[3] = {0, 0, 0};
        MPI_Reduce(s, out, 3, MPI_LONG, MPI_SUM, root, comm);
        long tri = (long)n * (n - 1) / 2;
        if (r == root)
            CHECK(out[0] == tri && out[1] == 2 * tri && out[2] == n, "%s reduce root %d", name,
                  root);
        struct {
            double v;
            int i;
        } in = {(double)((r + 1) % n), r}, mn;
        MPI_Reduce(&in, &mn, 1, MPI_DOUBLE_INT, MPI_MINLOC, root, comm);
        if (r == root) CHECK(mn.v == 0.0 && mn.i == n - 1, "%s minloc root %d", name, root);
        long ip[2] = {r + 1, 1};
        MPI_Reduce(r == root ? MPI_IN_PLACE : ip, ip, 2, MPI_LONG, MPI_PROD, root, comm);
        if (r == root) {
            long f = 1;
            for (int k = 1; k <= n; k++) f *= k;
            CHECK(ip[0] == f && ip[1] == 1, "%s in-place reduce root %d: %ld", name, root, ip[0]);
        }
    }

    /* Allreduce: sum, max with MPI_IN_PLACE, the non-commutative user op. */
    {
        int x = r + 1, sum = 0;
        MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, comm);
        CHECK(sum == n * (n + 1) / 2, "%s allreduce sum %d", name, sum);
        double m = r * 1.5;
        MPI_Allreduce(MPI_IN_PLACE, &m, 1, MPI_DOUBLE, MPI_MAX, comm);
        CHECK(m == (n - 1) * 1.5, "%s in-place allreduce max %g", name, m);
        MPI_Datatype tmat;
        MPI_Op op;
        mat_begin(&tmat, &op);
        mat mine = mat_of(r), prod, want = mat_of(0);
        for (int k = 1; k < n; k++) want = mul(want, mat_of(k));
        MPI_Allreduce(&mine, &prod, 1, tmat, op, comm);
        CHECK(memcmp(&prod, &want, sizeof want) == 0, "%s allreduce of a non-commutative op",
              name);
        for (int root = 0; root < n; root++) {
            mat p = {0, 0, 0, 0};
            MPI_Reduce(&mine, &p, 1, tmat, op, root, comm);
            if (r == root)
                CHECK(memcmp(&p, &want, sizeof want) == 0, "%s reduce of a non-commutative op",
                      name);
        }
        mat_end(&tmat, &op);
    }

    /* Determinism: 100 allreduces of the same random doubles give the same
     * bits each time, and every rank the same bits: 1000 doubles, and
     * 40000 (320 KB: the large allreduces' trials run each of their ways
     * on some of these calls, so every way must fold in the same order). */
    for (int big = 0; big < 2; big++) {
        int N = big ? 40000 : 1000;
        double *in = malloc(N * sizeof(double)), *first = malloc(N * sizeof(double)),
               *out = malloc(N * sizeof(double));
        unsigned seed = 12345u + (unsigned)r * 7919u;
        for (int i = 0; i < N; i++) in[i] = rnd(&seed);
        MPI_Allreduce(in, first, N, MPI_DOUBLE, MPI_SUM, comm);
        for (int k = 0; k < 100; k++) {
            MPI_Allreduce(in, out, N, MPI_DOUBLE, MPI_SUM, comm);
            CHECK(memcmp(out, first, N * sizeof(double)) == 0, "%s allreduce %d of %d differs",
                  name, k, N);
        }
        double *r0 = malloc(N * sizeof(double));
        memcpy(r0, first, N * sizeof(double));
        MPI_Bcast(r0, N, MPI_DOUBLE, 0, comm);
        CHECK(memcmp(r0, first, N * sizeof(double)) == 0, "%s ranks got different bits", name);
        free(in);
        free(first);
        free(out);
        free(r0);
    }
    /* The same for a few doubles (small enough for the collective lanes:
     * every rank reduces all blocks itself, in rank order). */
    {
        enum { N = 16 };
        double in[N], first[N], out[N], red[N];
        unsigned seed = 777u + (unsigned)r * 31u;
        for (int i = 0; i < N; i++) in[i] = rnd(&seed);
        MPI_Allreduce(in, first, N, MPI_DOUBLE, MPI_SUM, comm);
        for (int k = 0; k < 100; k++) {
            MPI_Allreduce(in, out, N, MPI_DOUBLE, MPI_SUM, comm);
            CHECK(memcmp(out, first, sizeof out) == 0, "%s small allreduce %d differs", name, k);
            /* Every rank is a root in turn: the root's bits stay the same. */
            MPI_Reduce(in, out, N, MPI_DOUBLE, MPI_SUM, k % n, comm);
            if (r == k % n && k < n) memcpy(red, out, sizeof red);
            if (r == k % n)
                CHECK(memcmp(out, red, sizeof out) == 0, "%s small reduce %d differs", name, k);
        }
        double r0[N];
        memcpy(r0, first, sizeof r0);
        MPI_Bcast(r0, N, MPI_DOUBLE, n - 1, comm);
        CHECK(memcmp(r0, first, sizeof r0) == 0, "%s ranks got different small bits", name);
    }
    /* Large allreduces (by blocks over the transport: one block per
     * member), counts that do not divide evenly included, in place and
     * not: exact sums of small integers as doubles, and the
     * non-commutative product in rank order (each element on its own).
     * 140001 doubles (1.07 MiB): beyond the broadcast limit, where a
     * reduce with two ranks per CPU goes by blocks under Open MPI too. */
    {
        const int counts[] = {4097, 16384, 100001, 140001};
        for (int ci = 0; ci < 4; ci++) {
            int m = counts[ci];
            double *in = malloc((size_t)m * sizeof(double)), *out = malloc((size_t)m * sizeof(double));
            for (int i = 0; i < m; i++) in[i] = (double)((i % 1000) * (r + 1));
            for (int in_place = 0; in_place < 2; in_place++) {
                if (in_place) memcpy(out, in, (size_t)m * sizeof(double));
                MPI_Allreduce(in_place ? MPI_IN_PLACE : in, out, m, MPI_DOUBLE, MPI_SUM, comm);
                for (int i = 0; i < m; i++)
                    CHECK(out[i] == (double)((i % 1000) * (n * (n + 1) / 2)),
                          "%s allreduce of %d doubles (in place %d) at %d: %g", name, m,
                          in_place, i, out[i]);
            }
            /* Reduce to every root, in place there or not; the others pass
             * no receive buffer (insignificant there). Plain MPICH 4.0.2
             * crashes in its own reduce for MPI_IN_PLACE at a root other
             * than 0 from 1000 doubles (2 and 3 ranks): Open MPI only. */
            for (int root = 0; root < n; root++)
                for (int in_place = 0; in_place < 2; in_place++) {
#ifndef OPEN_MPI
                    if (in_place && root != 0) continue;
#endif
                    int ip = in_place && r == root;
                    for (int i = 0; i < m; i++) out[i] = ip ? in[i] : -1.0;
                    MPI_Reduce(ip ? MPI_IN_PLACE : in, r == root ? out : NULL, m, MPI_DOUBLE,
                               MPI_SUM, root, comm);
                    for (int i = 0; i < m && r == root; i++)
                        CHECK(out[i] == (double)((i % 1000) * (n * (n + 1) / 2)),
                              "%s reduce of %d doubles to %d (in place %d) at %d: %g", name, m,
                              root, in_place, i, out[i]);
                }
            free(in);
            free(out);
        }
        /* Reduces of 262147 doubles (2 MiB and 24 bytes) to every root in
         * turn: where gets apply (three or more members, single copy
         * working), the way is picked by trials over the first calls of
         * the size (blocks, blocks put, gets, staged: 4 x 7 calls), and
         * every way must give the root the same bits (an inexact sum here)
         * and the right value. */
        {
            enum { BIG = 262147, CALLS = 32 };
            double *in = malloc(BIG * sizeof(double)), *out = malloc(BIG * sizeof(double));
            double *bits = malloc(BIG * sizeof(double));
            CHECK(in && out && bits, "%s: no memory for the 2 MiB reduces", name);
            for (int i = 0; i < BIG; i++) in[i] = 1.0 / (double)(i % 997 + r + 3);
            for (int k = 0; k < CALLS; k++) {
                int root = k % n, first = k < n;
#ifdef OPEN_MPI
                int ip = r == root && (k / n) % 2; /* in place at the root every other turn */
#else
                int ip = r == root && root == 0 && (k / n) % 2; /* MPICH: above */
#endif
                if (ip) memcpy(out, in, BIG * sizeof(double));
                MPI_Reduce(ip ? MPI_IN_PLACE : in, r == root ? out : NULL, BIG, MPI_DOUBLE, MPI_SUM,
                           root, comm);
                if (r != root) continue;
                if (first) memcpy(bits, out, BIG * sizeof(double));
                for (int i = 0; i < BIG; i++) {
                    double want = 0;
                    for (int j = 0; j < n; j++) want += 1.0 / (double)(i % 997 + j + 3);
                    CHECK(fabs(out[i] - want) <= 1e-12 * want,
                          "%s 2 MiB reduce %d to %d at %d: %.17g, want %.17g", name, k, root, i,
                          out[i], want);
                }
                CHECK(memcmp(out, bits, BIG * sizeof(double)) == 0,
                      "%s 2 MiB reduce %d to %d: other bits than its first call", name, k, root);
            }
            free(in);
            free(out);
            free(bits);
        }
        MPI_Datatype tmat;
        MPI_Op op;
        mat_begin(&tmat, &op);
        enum { M = 1101 }; /* 17.6 KB of matrices: the blocks path */
        mat *mine = malloc(M * sizeof(mat)), *prod = malloc(M * sizeof(mat));
        for (int in_place = 0; in_place < 2; in_place++) {
            for (int j = 0; j < M; j++) mine[j] = prod[j] = mat_of(r + j);
            MPI_Allreduce(in_place ? MPI_IN_PLACE : mine, prod, M, tmat, op, comm);
            for (int j = 0; j < M; j++) {
                mat want = mat_of(j);
                for (int k = 1; k < n; k++) want = mul(want, mat_of(k + j));
                CHECK(memcmp(&prod[j], &want, sizeof want) == 0,
                      "%s large non-commutative allreduce (in place %d) at %d", name, in_place, j);
            }
        }
        for (int j = 0; j < M; j++) mine[j] = mat_of(r + j);
        MPI_Reduce(mine, r == n - 1 ? prod : NULL, M, tmat, op, n - 1, comm);
        for (int j = 0; j < M && r == n - 1; j++) {
            mat want = mat_of(j);
            for (int k = 1; k < n; k++) want = mul(want, mat_of(k + j));
            CHECK(memcmp(&prod[j], &want, sizeof want) == 0,
                  "%s large non-commutative reduce at %d", name, j);
        }
        free(mine);
        free(prod);
        mat_end(&tmat, &op);
    }
    /* Zero-count operations. */
    MPI_Bcast(NULL, 0, MPI_INT, 0, comm);
    MPI_Allreduce(MPI_IN_PLACE, NULL, 0, MPI_INT, MPI_SUM, comm);
}

/* Gather, scatter, allgather and alltoall: block sizes from 0 to 5000 ints,
 * every root, MPI_IN_PLACE, and a non-contiguous receive type (pairs of
 * ints one int apart) against a contiguous send type of the same
 * signature. Element k of the block from a to b is val(a, b, k). */
static int val(int a, int b, int k) { return (a * 64 + b) * 8192 + k; }

/* Element i of an in-place gather buffer of member r: its own block set,
 * the others -1. */
static int e_in_place(int r, int m, size_t i) {
    return m > 0 && (int)(i / (size_t)m) == r ? val(r, 0, (int)(i % (size_t)m)) : -1;
}

/* Where element e of a buffer of pairs lies (the gap ints stay -7). */
static int pair_at(int e) { return 3 * (e / 2) + 2 * (e % 2); }

static void check_blocks(MPI_Comm comm, const char *name) {
    int r, n;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    MPI_Datatype pair;
    MPI_Type_vector(2, 1, 2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    /* Two members also take blocks above the accelerator's 1 MiB / n
     * (over the transport at any size; more members: the limit). */
    const int counts[] = {0, 1, 3, 5000, n == 2 ? 300000 : 2};
    for (int ci = 0; ci < 5; ci++) {
        int m = counts[ci];
        size_t all = (size_t)n * (size_t)m;
        int *s = malloc(sizeof(int) * (all + 1)), *b = malloc(sizeof(int) * (all + 1));
        int *v = malloc(sizeof(int) * (3 * all / 2 + 3));
        CHECK(s && b && v, "out of memory");
#define FILL(buf, len, x) for (size_t i_ = 0; i_ < (len); i_++) (buf)[i_] = (x)
        /* Allgather, then in place, then into pairs. */
        FILL(s, (size_t)m, val(r, 0, (int)i_));
        FILL(b, all, -1);
        MPI_Allgather(s, m, MPI_INT, b, m, MPI_INT, comm);
        for (size_t e = 0; e < all; e++)
            CHECK(b[e] == val((int)e / m, 0, (int)e % m), "%s allgather %d: [%zu] = %d", name, m,
                  e, b[e]);
        FILL(b, all, e_in_place(r, m, i_));
        MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, m, MPI_INT, comm);
        for (size_t e = 0; e < all; e++)
            CHECK(b[e] == val((int)e / m, 0, (int)e % m), "%s allgather in place %d: [%zu] = %d",
                  name, m, e, b[e]);
        if (m % 2 == 0) {
            FILL(v, 3 * all / 2, -7);
            MPI_Allgather(s, m, MPI_INT, v, m / 2, pair, comm);
            for (size_t e = 0; e < all; e++)
                CHECK(v[pair_at((int)e)] == val((int)e / m, 0, (int)e % m),
                      "%s allgather into pairs %d: element %zu", name, m, e);
            for (size_t j = 0; j < all / 2; j++)
                CHECK(v[3 * j + 1] == -7, "%s allgather into pairs %d: gap %zu written", name, m, j);
        }
        /* Gather and scatter from every root. */
        for (int root = 0; root < n; root++) {
            FILL(b, all, -1);
            MPI_Gather(s, m, MPI_INT, b, m, MPI_INT, root, comm);
            if (r == root)
                for (size_t e = 0; e < all; e++)
                    CHECK(b[e] == val((int)e / m, 0, (int)e % m), "%s gather %d root %d: [%zu] = %d",
                          name, m, root, e, b[e]);
            FILL(b, all, e_in_place(r, m, i_));
            if (r == root)
                MPI_Gather(MPI_IN_PLACE, m, MPI_INT, b, m, MPI_INT, root, comm);
            else
                MPI_Gather(s, m, MPI_INT, NULL, 0, MPI_INT, root, comm);
            if (r == root)
                for (size_t e = 0; e < all; e++)
                    CHECK(b[e] == val((int)e / m, 0, (int)e % m),
                          "%s gather in place %d root %d: [%zu] = %d", name, m, root, e, b[e]);
            if (m % 2 == 0) {
                FILL(v, 3 * all / 2, -7);
                MPI_Gather(s, m, MPI_INT, v, m / 2, pair, root, comm);
                if (r == root)
                    for (size_t e = 0; e < all; e++)
                        CHECK(v[pair_at((int)e)] == val((int)e / m, 0, (int)e % m),
                              "%s gather into pairs %d root %d: element %zu", name, m, root, e);
            }
            /* The root sends block d to member d. */
            if (r == root) FILL(b, all, val(root, (int)i_ / m, (int)i_ % m));
            FILL(s, (size_t)m, -1);
            MPI_Scatter(b, m, MPI_INT, s, m, MPI_INT, root, comm);
            for (int k = 0; k < m; k++)
                CHECK(s[k] == val(root, r, k), "%s scatter %d root %d: [%d] = %d", name, m, root, k,
                      s[k]);
            if (r == root) {
                MPI_Scatter(b, m, MPI_INT, MPI_IN_PLACE, m, MPI_INT, root, comm);
                for (size_t e = 0; e < all; e++)
                    CHECK(b[e] == val(root, (int)e / m, (int)e % m), "%s scatter in place: [%zu]",
                          name, e);
            } else {
                FILL(s, (size_t)m, -1);
                MPI_Scatter(NULL, 0, MPI_INT, s, m, MPI_INT, root, comm);
                for (int k = 0; k < m; k++)
                    CHECK(s[k] == val(root, r, k), "%s scatter (root in place) %d: [%d] = %d", name,
                          m, k, s[k]);
            }
            FILL(s, (size_t)m, val(r, 0, (int)i_));
        }
        /* Alltoall: block d of member r is val(r, d, .); in place; into pairs. */
        int *t = malloc(sizeof(int) * (all + 1));
        CHECK(t, "out of memory");
        FILL(t, all, val(r, (int)i_ / m, (int)i_ % m));
        FILL(b, all, -1);
        MPI_Alltoall(t, m, MPI_INT, b, m, MPI_INT, comm);
        for (size_t e = 0; e < all; e++)
            CHECK(b[e] == val((int)e / m, r, (int)e % m), "%s alltoall %d: [%zu] = %d", name, m, e,
                  b[e]);
        FILL(b, all, val(r, (int)i_ / m, (int)i_ % m));
        MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, m, MPI_INT, comm);
        for (size_t e = 0; e < all; e++)
            CHECK(b[e] == val((int)e / m, r, (int)e % m), "%s alltoall in place %d: [%zu] = %d",
                  name, m, e, b[e]);
        if (m % 2 == 0) {
            FILL(v, 3 * all / 2, -7);
            MPI_Alltoall(t, m, MPI_INT, v, m / 2, pair, comm);
            for (size_t e = 0; e < all; e++)
                CHECK(v[pair_at((int)e)] == val((int)e / m, r, (int)e % m),
                      "%s alltoall into pairs %d: element %zu", name, m, e);
        }
#undef FILL
        free(t);
        free(s);
        free(b);
        free(v);
    }
    MPI_Type_free(&pair);
}

/* The v variants: member i's block has cnt[i] elements (zeros included);
 * the blocks lie in reverse member order with one element of gap before
 * each (displacements out of order; the gaps must stay untouched). */
static size_t v_layout(int n, const int *cnt, int *displ) {
    size_t off = 0;
    for (int i = n - 1; i >= 0; i--) {
        off += 1;
        displ[i] = (int)off;
        off += (size_t)cnt[i];
    }
    return off + 1;
}

/* Checks that b (a v layout of ints) holds val(i, to, k) in block i and -1
 * in the gaps. */
static void v_check(const int *b, int n, const int *cnt, const int *dsp, size_t tot, int to,
                    const char *what) {
    char *used = calloc(tot, 1);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < cnt[i]; k++) {
            CHECK(b[dsp[i] + k] == val(i, to, k), "%s: block %d [%d] = %d", what, i, k,
                  b[dsp[i] + k]);
            used[dsp[i] + k] = 1;
        }
    for (size_t e = 0; e < tot; e++)
        if (!used[e]) CHECK(b[e] == -1, "%s: gap element %zu written (%d)", what, e, b[e]);
    free(used);
}

static int cnt_of(int kind, int i) {
    return kind == 0 ? 0 : kind == 1 ? i % 3 : kind == 2 ? 1 + (i * 5) % 4 : 2000 + 700 * i;
}

/* Counts of the block from a to b in the alltoallv checks (symmetric, as an
 * in-place alltoallv needs). */
static int cnt2(int kind, int a, int b) {
    return kind == 0 ? 0 : kind == 1 ? (a + b) % 3 : kind == 2 ? 1 + (a * b + a + b) % 4
                                                              : 1500 + 300 * (a + b);
}

static void check_v(MPI_Comm comm, const char *name) {
    int r, n;
    char what[128];
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    /* Plain MPICH 4.0.2 fails the allgatherv below on a communicator of
     * one member (the block is not where the displacement says). */
    if (n == 1) return;
    int *cnt = malloc(sizeof(int) * (size_t)n), *dsp = malloc(sizeof(int) * (size_t)n);
    int *rc2 = malloc(sizeof(int) * (size_t)n), *rd2 = malloc(sizeof(int) * (size_t)n);
    int *sc2 = malloc(sizeof(int) * (size_t)n), *sd2 = malloc(sizeof(int) * (size_t)n);
    MPI_Datatype pair;
    MPI_Type_vector(2, 1, 2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    for (int kind = 0; kind < 4; kind++) {
        for (int i = 0; i < n; i++) cnt[i] = cnt_of(kind, i);
        size_t tot = v_layout(n, cnt, dsp);
        int *b = malloc(sizeof(int) * 3 * (tot + 1)), *s = malloc(sizeof(int) * (tot + 1));
        CHECK(b && s, "out of memory");
#define FILL(buf, len, x) for (size_t i_ = 0; i_ < (len); i_++) (buf)[i_] = (x)
        FILL(s, (size_t)cnt[r] + 1, i_ < (size_t)cnt[r] ? val(r, 0, (int)i_) : -1);
        /* Allgatherv, then in place. */
        FILL(b, tot, -1);
        MPI_Allgatherv(s, cnt[r], MPI_INT, b, cnt, dsp, MPI_INT, comm);
        snprintf(what, sizeof what, "%s allgatherv kind %d", name, kind);
        v_check(b, n, cnt, dsp, tot, 0, what);
        FILL(b, tot, -1);
        for (int k = 0; k < cnt[r]; k++) b[dsp[r] + k] = val(r, 0, k);
        MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, cnt, dsp, MPI_INT, comm);
        snprintf(what, sizeof what, "%s allgatherv in place kind %d", name, kind);
        v_check(b, n, cnt, dsp, tot, 0, what);
        /* Gatherv and scatterv from every root, also in place. */
        for (int root = 0; root < n; root++) {
            FILL(b, tot, -1);
            MPI_Gatherv(s, cnt[r], MPI_INT, b, cnt, dsp, MPI_INT, root, comm);
            snprintf(what, sizeof what, "%s gatherv kind %d root %d", name, kind, root);
            if (r == root) v_check(b, n, cnt, dsp, tot, 0, what);
            FILL(b, tot, -1);
            if (r == root) {
                for (int k = 0; k < cnt[r]; k++) b[dsp[r] + k] = val(r, 0, k);
                MPI_Gatherv(MPI_IN_PLACE, 0, MPI_INT, b, cnt, dsp, MPI_INT, root, comm);
                snprintf(what, sizeof what, "%s gatherv in place kind %d root %d", name, kind,
                         root);
                v_check(b, n, cnt, dsp, tot, 0, what);
            } else {
                MPI_Gatherv(s, cnt[r], MPI_INT, NULL, NULL, NULL, MPI_INT, root, comm);
            }
            /* The root's block i is val(i, root, .): member i gets it. */
            FILL(b, tot, -1);
            if (r == root)
                for (int i = 0; i < n; i++)
                    for (int k = 0; k < cnt[i]; k++) b[dsp[i] + k] = val(i, root, k);
            int *got = malloc(sizeof(int) * ((size_t)cnt[r] + 1));
            FILL(got, (size_t)cnt[r] + 1, -1);
            MPI_Scatterv(b, cnt, dsp, MPI_INT, got, cnt[r], MPI_INT, root, comm);
            for (int k = 0; k <= cnt[r]; k++)
                CHECK(got[k] == (k < cnt[r] ? val(r, root, k) : -1),
                      "%s scatterv kind %d root %d: [%d] = %d", name, kind, root, k, got[k]);
            FILL(got, (size_t)cnt[r] + 1, -1);
            if (r == root) {
                MPI_Scatterv(b, cnt, dsp, MPI_INT, MPI_IN_PLACE, 0, MPI_INT, root, comm);
                snprintf(what, sizeof what, "%s scatterv in place kind %d", name, kind);
                for (int i = 0; i < n; i++)
                    for (int k = 0; k < cnt[i]; k++)
                        CHECK(b[dsp[i] + k] == val(i, root, k), "%s: [%d][%d]", what, i, k);
            } else {
                MPI_Scatterv(NULL, NULL, NULL, MPI_INT, got, cnt[r], MPI_INT, root, comm);
                for (int k = 0; k <= cnt[r]; k++)
                    CHECK(got[k] == (k < cnt[r] ? val(r, root, k) : -1),
                          "%s scatterv (root in place) kind %d: [%d] = %d", name, kind, k, got[k]);
            }
            free(got);
        }
        /* Allgatherv into pairs (a non-contiguous receive type; counts and
         * displacements in pairs), when every count is even. */
        int even = 1;
        for (int i = 0; i < n; i++) even &= cnt[i] % 2 == 0;
        if (even) {
            int *pc = malloc(sizeof(int) * (size_t)n), *pd = malloc(sizeof(int) * (size_t)n);
            for (int i = 0; i < n; i++) pc[i] = cnt[i] / 2;
            size_t ptot = v_layout(n, pc, pd);
            FILL(b, 3 * ptot, -7);
            MPI_Allgatherv(s, cnt[r], MPI_INT, b, pc, pd, pair, comm);
            for (int i = 0; i < n; i++)
                for (int e = 0; e < cnt[i]; e++)
                    CHECK(b[3 * pd[i] + pair_at(e)] == val(i, 0, e),
                          "%s allgatherv into pairs kind %d: block %d element %d", name, kind, i,
                          e);
            int gaps = 0;
            for (size_t e = 0; e < 3 * ptot; e++) gaps += b[e] == -7;
            CHECK(gaps == (int)(3 * ptot) - (int)(tot - (size_t)n - 1),
                  "%s allgatherv into pairs kind %d: %d gap ints left", name, kind, gaps);
            free(pc);
            free(pd);
        }
        /* Alltoallv: block d of member r (cnt2(r, d) elements) is
         * val(r, d, .); both layouts out of order; then in place. */
        for (int i = 0; i < n; i++) {
            sc2[i] = cnt2(kind, r, i);
            rc2[i] = cnt2(kind, i, r);
        }
        size_t stot = v_layout(n, sc2, sd2), rtot = v_layout(n, rc2, rd2);
        int *t = malloc(sizeof(int) * (stot + 1)), *u = malloc(sizeof(int) * (rtot + 1));
        CHECK(t && u, "out of memory");
        FILL(t, stot, -1);
        for (int d = 0; d < n; d++)
            for (int k = 0; k < sc2[d]; k++) t[sd2[d] + k] = val(r, d, k);
        FILL(u, rtot, -1);
        MPI_Alltoallv(t, sc2, sd2, MPI_INT, u, rc2, rd2, MPI_INT, comm);
        snprintf(what, sizeof what, "%s alltoallv kind %d", name, kind);
        v_check(u, n, rc2, rd2, rtot, r, what);
        FILL(u, rtot, -1);
        for (int d = 0; d < n; d++)
            for (int k = 0; k < rc2[d]; k++) u[rd2[d] + k] = val(r, d, k);
        MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, u, rc2, rd2, MPI_INT, comm);
        snprintf(what, sizeof what, "%s alltoallv in place kind %d", name, kind);
        v_check(u, n, rc2, rd2, rtot, r, what);
#undef FILL
        free(t);
        free(u);
        free(b);
        free(s);
    }
    MPI_Type_free(&pair);
    free(cnt);
    free(dsp);
    free(rc2);
    free(rd2);
    free(sc2);
    free(sd2);
}

/* Reduce-scatters and scans: sums, MPI_IN_PLACE, zero counts, the
 * non-commutative matrix product (only the rank order gives its result),
 * and bitwise determinism of double sums. */
static void check_rs_scan(MPI_Comm comm, const char *name) {
    int r, n;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    /* 2100 longs per member: large enough for the blocks of coll.c;
     * 70000 (1.1-2.2 MiB in all with 2-4 members): by gets (gets.c). */
    const int ms[] = {0, 1, 3, 100, 2100, 70000};
    for (int mi = 0; mi < 6; mi++) {
        int m = ms[mi];
        size_t all = (size_t)n * (size_t)m;
        long *in = malloc(sizeof(long) * (all + 1)), *out = malloc(sizeof(long) * (all + 1));
        for (size_t j = 0; j < all; j++) in[j] = r * 1000L + (long)j;
        for (int k = 0; k <= m; k++) out[k] = -1;
        MPI_Reduce_scatter_block(in, out, m, MPI_LONG, MPI_SUM, comm);
        long base = 1000L * n * (n - 1) / 2;
        for (int k = 0; k < m; k++)
            CHECK(out[k] == base + (long)n * (r * m + k), "%s reduce_scatter_block %d: [%d] = %ld",
                  name, m, k, out[k]);
        CHECK(out[m] == -1, "%s reduce_scatter_block %d wrote past its block", name, m);
        MPI_Reduce_scatter_block(MPI_IN_PLACE, in, m, MPI_LONG, MPI_SUM, comm);
        for (int k = 0; k < m; k++)
            CHECK(in[k] == base + (long)n * (r * m + k),
                  "%s reduce_scatter_block in place %d: [%d] = %ld", name, m, k, in[k]);
        /* Uneven counts: member i gets (i + m) % 3 elements (zeros too),
         * more for the larger m (the last member none for 2100). */
        int *rc = malloc(sizeof(int) * (size_t)n), tot = 0, off = 0;
        for (int i = 0; i < n; i++) {
            rc[i] = (i + m) % 3 + (m == 100 ? 50 : m > 100 ? m : 0);
            if (m > 100 && i == n - 1) rc[i] = 0;
            if (i < r) off += rc[i];
            tot += rc[i];
        }
        long *v = malloc(sizeof(long) * ((size_t)tot + 1));
        for (int j = 0; j < tot; j++) v[j] = r * 1000L + j;
        for (int k = 0; k <= rc[r]; k++) out[k] = -1;
        MPI_Reduce_scatter(v, out, rc, MPI_LONG, MPI_SUM, comm);
        for (int k = 0; k < rc[r]; k++)
            CHECK(out[k] == base + (long)n * (off + k), "%s reduce_scatter %d: [%d] = %ld", name,
                  m, k, out[k]);
        CHECK(out[rc[r]] == -1, "%s reduce_scatter %d wrote past its block", name, m);
        /* Plain MPICH 4.0.2 asserts in its own in-place MPI_Reduce_scatter
         * of the 70000 longs with 3 and 4 ranks ("memcpy argument memory
         * ranges overlap" in typerep_yaksa_pack.c): Open MPI only there. */
        int ip_ok = m <= 2100;
#ifdef OPEN_MPI
        ip_ok = 1;
#endif
        if (ip_ok) {
            MPI_Reduce_scatter(MPI_IN_PLACE, v, rc, MPI_LONG, MPI_SUM, comm);
            for (int k = 0; k < rc[r]; k++)
                CHECK(v[k] == base + (long)n * (off + k),
                      "%s reduce_scatter in place %d: [%d] = %ld", name, m, k, v[k]);
        }
        free(v);
        free(rc);
        /* Scans of m longs: member r gets the sum over members 0..r (0..r-1).
         * (Not the large size: scans that large go to the MPI's own.) */
        if (m > 100) m = 0;
        for (int k = 0; k < m; k++) in[k] = (r + 1) * 10L + k;
        MPI_Scan(in, out, m, MPI_LONG, MPI_SUM, comm);
        for (int k = 0; k < m; k++)
            CHECK(out[k] == 10L * (r + 1) * (r + 2) / 2 + (long)(r + 1) * k, "%s scan %d: [%d]",
                  name, m, k);
        MPI_Scan(MPI_IN_PLACE, in, m, MPI_LONG, MPI_SUM, comm);
        for (int k = 0; k < m; k++)
            CHECK(in[k] == 10L * (r + 1) * (r + 2) / 2 + (long)(r + 1) * k,
                  "%s scan in place %d: [%d]", name, m, k);
        for (int k = 0; k < m; k++) in[k] = (r + 1) * 10L + k;
        for (int k = 0; k < m; k++) out[k] = -5;
        MPI_Exscan(in, out, m, MPI_LONG, MPI_SUM, comm);
        if (r > 0)
            for (int k = 0; k < m; k++)
                CHECK(out[k] == 10L * r * (r + 1) / 2 + (long)r * k, "%s exscan %d: [%d] = %ld",
                      name, m, k, out[k]);
        MPI_Exscan(MPI_IN_PLACE, in, m, MPI_LONG, MPI_SUM, comm);
        if (r > 0)
            for (int k = 0; k < m; k++)
                CHECK(in[k] == 10L * r * (r + 1) / 2 + (long)r * k,
                      "%s exscan in place %d: [%d] = %ld", name, m, k, in[k]);
        free(in);
        free(out);
    }
    /* The non-commutative product: member r contributes mat_of(r + j) as
     * element j; element j of the result is the rank-order product. */
    {
        MPI_Datatype tmat;
        MPI_Op op;
        mat_begin(&tmat, &op);
        mat *mine = malloc(sizeof(mat) * 2 * (size_t)n), got[2];
        for (int j = 0; j < 2 * n; j++) mine[j] = mat_of(r + j);
        MPI_Reduce_scatter_block(mine, got, 2, tmat, op, comm);
        for (int e = 0; e < 2; e++) {
            mat want = mat_of(2 * r + e);
            for (int q = 1; q < n; q++) want = mul(want, mat_of(q + 2 * r + e));
            CHECK(memcmp(&got[e], &want, sizeof want) == 0,
                  "%s reduce_scatter_block of a non-commutative op, element %d", name, e);
        }
        mat one = mat_of(r), sc, ex;
        MPI_Scan(&one, &sc, 1, tmat, op, comm);
        MPI_Exscan(&one, &ex, 1, tmat, op, comm);
        mat want = mat_of(0);
        for (int q = 1; q <= r; q++) {
            if (q == r) CHECK(memcmp(&ex, &want, sizeof want) == 0, "%s exscan non-commutative", name);
            want = mul(want, mat_of(q));
        }
        CHECK(memcmp(&sc, &want, sizeof want) == 0, "%s scan of a non-commutative op", name);
        free(mine);
        mat_end(&tmat, &op);
    }
    /* Determinism: the same doubles give the same bits every time. */
    {
        enum { N = 500 };
        double *in = malloc(sizeof(double) * N * (size_t)n), first[N], out[N], fs[N], os[N];
        unsigned seed = 4242u + (unsigned)r * 131u;
        for (int i = 0; i < N * n; i++) in[i] = rnd(&seed);
        MPI_Reduce_scatter_block(in, first, N, MPI_DOUBLE, MPI_SUM, comm);
        MPI_Scan(in, fs, N, MPI_DOUBLE, MPI_SUM, comm);
        for (int k = 0; k < 100; k++) {
            MPI_Reduce_scatter_block(in, out, N, MPI_DOUBLE, MPI_SUM, comm);
            CHECK(memcmp(out, first, sizeof out) == 0, "%s reduce_scatter_block %d differs", name,
                  k);
            MPI_Scan(in, os, N, MPI_DOUBLE, MPI_SUM, comm);
            CHECK(memcmp(os, fs, sizeof os) == 0, "%s scan %d differs", name, k);
        }
        free(in);
    }
}

/* MPI_Ibarrier, MPI_Ibcast and MPI_Iallreduce: several outstanding at once
 * and completed in another order, a blocking collective between start and
 * wait, MPI_Test loops, a non-contiguous broadcast type freed before the
 * wait, MPI_IN_PLACE, the non-commutative operation, and bitwise
 * determinism of double sums. */
static void check_nb(MPI_Comm comm, const char *name) {
    int r, n;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    MPI_Request q[8];
    MPI_Status st[8]; /* not MPI_STATUSES_IGNORE: GCC 12 objects under MPICH */
    for (int root = 0; root < n; root++) {
        int v[300], x = r + 1, sum = -1, ball = r;
        for (int i = 0; i < 300; i++) v[i] = r == root ? root * 1000 + i : -1;
        MPI_Ibarrier(comm, &q[0]);
        MPI_Ibcast(v, 300, MPI_INT, root, comm, &q[1]);
        MPI_Iallreduce(&x, &sum, 1, MPI_INT, MPI_SUM, comm, &q[2]);
        MPI_Iallreduce(MPI_IN_PLACE, &ball, 1, MPI_INT, MPI_MAX, comm, &q[3]);
        /* A blocking collective while those are outstanding. */
        int y = 2 * r, s2 = 0;
        MPI_Allreduce(&y, &s2, 1, MPI_INT, MPI_SUM, comm);
        CHECK(s2 == n * (n - 1), "%s allreduce among non-blocking ones: %d", name, s2);
        MPI_Wait(&q[3], MPI_STATUS_IGNORE);
        MPI_Waitall(3, q, st);
        for (int i = 0; i < 300; i++)
            CHECK(v[i] == root * 1000 + i, "%s ibcast root %d: v[%d] = %d", name, root, i, v[i]);
        CHECK(sum == n * (n + 1) / 2, "%s iallreduce sum %d", name, sum);
        CHECK(ball == n - 1, "%s iallreduce in place max %d", name, ball);
        /* A strided type, freed before the wait; completion by MPI_Test. */
        MPI_Datatype every2;
        MPI_Type_vector(50, 1, 2, MPI_DOUBLE, &every2);
        MPI_Type_commit(&every2);
        double w[100];
        for (int i = 0; i < 100; i++) w[i] = r == root ? i + 0.5 : -1.0;
        MPI_Ibcast(w, 1, every2, root, comm, &q[0]);
        MPI_Type_free(&every2);
        int flag = 0;
        while (!flag) MPI_Test(&q[0], &flag, MPI_STATUS_IGNORE);
        for (int i = 0; i < 100; i++) {
            double want = (i % 2 == 0 || r == root) ? i + 0.5 : -1.0;
            CHECK(w[i] == want, "%s strided ibcast root %d: w[%d] = %g", name, root, i, w[i]);
        }
    }
    /* A barrier completed by polling while point-to-point runs (a ring). */
    {
        int token = r, got = -1;
        MPI_Ibarrier(comm, &q[0]);
        MPI_Sendrecv(&token, 1, MPI_INT, (r + 1) % n, 5, &got, 1, MPI_INT, (r - 1 + n) % n, 5,
                     comm, MPI_STATUS_IGNORE);
        CHECK(got == (r - 1 + n) % n, "%s ring during ibarrier: %d", name, got);
        int flag = 0;
        while (!flag) MPI_Test(&q[0], &flag, MPI_STATUS_IGNORE);
    }
    /* The non-commutative product. */
    {
        MPI_Datatype tmat;
        MPI_Op op;
        mat_begin(&tmat, &op);
        mat mine = mat_of(r), prod, want = mat_of(0);
        for (int k = 1; k < n; k++) want = mul(want, mat_of(k));
        MPI_Iallreduce(&mine, &prod, 1, tmat, op, comm, &q[0]);
        MPI_Wait(&q[0], MPI_STATUS_IGNORE);
        CHECK(memcmp(&prod, &want, sizeof want) == 0, "%s iallreduce of a non-commutative op",
              name);
        mat_end(&tmat, &op);
    }
    /* Determinism: the same doubles, the same bits each time, on every rank;
     * eight at once. */
    {
        enum { N = 200, K = 8 };
        double in[N], first[N], out[K][N];
        unsigned seed = 99u + (unsigned)r * 17u;
        for (int i = 0; i < N; i++) in[i] = rnd(&seed);
        MPI_Iallreduce(in, first, N, MPI_DOUBLE, MPI_SUM, comm, &q[0]);
        MPI_Wait(&q[0], MPI_STATUS_IGNORE);
        for (int rep = 0; rep < 10; rep++) {
            for (int k = 0; k < K; k++)
                MPI_Iallreduce(in, out[k], N, MPI_DOUBLE, MPI_SUM, comm, &q[k]);
            MPI_Waitall(K, q, st);
            for (int k = 0; k < K; k++)
                CHECK(memcmp(out[k], first, sizeof first) == 0, "%s iallreduce %d.%d differs",
                      name, rep, k);
        }
        double r0[N];
        memcpy(r0, first, sizeof r0);
        MPI_Bcast(r0, N, MPI_DOUBLE, 0, comm);
        CHECK(memcmp(r0, first, sizeof r0) == 0, "%s iallreduce: ranks got different bits", name);
    }
}

/* The reductions the accelerator does itself (mpi/lib/accel/redop.c): every
 * predefined type and operation it covers, allreduce and reduce, against
 * the MPI's own MPI_Reduce_local folded over every rank's input in rank
 * order. Inputs whose results are exact whatever the grouping (small
 * integers in floating point; integers wrap modulo 2^n, also in a product
 * that overflows), so any grouping of the ranks gives these bits. */
static void check_builtin_ops(MPI_Comm comm, const char *name) {
    /* Two of the combine loops' blocks of 16 and a tail of 5 (redop.c). */
    enum { N = 37 };
    MPI_Datatype types[] = {MPI_DOUBLE,   MPI_FLOAT,    MPI_INT,           MPI_INT32_T,
                            MPI_LONG,     MPI_LONG_LONG, MPI_INT64_T,      MPI_UNSIGNED,
                            MPI_UINT32_T, MPI_UNSIGNED_LONG, MPI_UNSIGNED_LONG_LONG,
                            MPI_UINT64_T};
    MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MAX,  MPI_MIN, MPI_BAND,
                    MPI_BOR, MPI_BXOR, MPI_LAND, MPI_LOR, MPI_LXOR};
    int r, n;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        int fp = types[t] == MPI_DOUBLE || types[t] == MPI_FLOAT;
        int tsize;
        MPI_Type_size(types[t], &tsize);
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
            if (fp && o >= 4) break; /* bitwise and logical: integers only */
            /* Element i of rank q: small values, zeros, negatives, and for
             * integers one near the top of the range (wraps in a sum or
             * product), in turn, each shifted by i / 5 so that the lanes of
             * a vector differ. */
            unsigned char in[8 * N], want[8 * N], got[8 * N], red[8 * N];
            for (int q = n - 1; q >= 0; q--) {
                for (int i = 0; i < N; i++) {
                    int k = i % 5, s = i / 5;
                    long long v = k == 0 ? q + 1 + s : k == 1 ? (q % 2) * (q + 2 + s)
                                : k == 2 ? -(q + 3 + s) : k == 3 ? 2 * q - 1 - s
                                : ((long long)1 << (tsize * 8 - 3)) + s;
                    unsigned char *at = (q == r ? in : red) + i * tsize;
                    if (types[t] == MPI_DOUBLE) *(double *)at = (double)v;
                    else if (types[t] == MPI_FLOAT) *(float *)at = (float)v;
                    else if (tsize == 4) *(int *)at = (int)v;
                    else *(long long *)at = v;
                }
                if (q == r) memcpy(red, in, (size_t)N * tsize);
                /* want := x_q (op) want, from the highest rank down. */
                if (q == n - 1) memcpy(want, red, (size_t)N * tsize);
                else MPI_Reduce_local(red, want, N, types[t], ops[o]);
            }
            MPI_Allreduce(in, got, N, types[t], ops[o], comm);
            CHECK(!memcmp(got, want, (size_t)N * tsize), "%s: allreduce type %zu op %zu", name,
                  t, o);
            memset(got, 0, sizeof got);
            MPI_Reduce(in, got, N, types[t], ops[o], n - 1, comm);
            CHECK(r != n - 1 || !memcmp(got, want, (size_t)N * tsize), "%s: reduce type %zu op %zu",
                  name, t, o);
        }
    }
}

/* Affine maps x -> a x + b on unsigned ints modulo 2^32, composed:
 * associative, not commutative. MPI user op: inout = in o inout. */
static void affine(void *in, void *inout, int *len, MPI_Datatype *t) {
    (void)t;
    unsigned *x = in, *y = inout;
    for (int i = 0; i < *len; i++) {
        unsigned a = x[2 * i] * y[2 * i], b = x[2 * i] * y[2 * i + 1] + x[2 * i + 1];
        y[2 * i] = a;
        y[2 * i + 1] = b;
    }
}

/* Pairs of ranks (0-1, 2-3, ...; an odd last rank alone): many barriers
 * and allreduces of up to 12 bytes, as a timestep loop makes them. With a
 * CPU per member the accelerator tries two ways on each pair's first
 * calls and keeps one (coll.c, pair_way): every call before, during and
 * after the trials must give the exact result. */
static void check_pairs(void) {
    MPI_Comm pair;
    MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &pair);
    int pr, pn;
    MPI_Comm_rank(pair, &pr);
    MPI_Comm_size(pair, &pn);
    MPI_Datatype tmap;
    MPI_Type_contiguous(2, MPI_UNSIGNED, &tmap);
    MPI_Type_commit(&tmap);
    MPI_Op op;
    MPI_Op_create(affine, 0, &op);
    for (int i = 0; i < 200; i++) {
        MPI_Barrier(pair);
        double d = (double)(i + 3 * pr), dsum = 0, dwant = 0;
        MPI_Allreduce(&d, &dsum, 1, MPI_DOUBLE, MPI_SUM, pair);
        int v[3] = {i - pr, pr * i, 7}, vmax[3], want[3] = {i, (pn - 1) * i, 7};
        MPI_Allreduce(v, vmax, 3, MPI_INT, MPI_MAX, pair);
        int loc[2] = {(i + pr) % 3, pr};
        MPI_Allreduce(MPI_IN_PLACE, loc, 1, MPI_2INT, MPI_MINLOC, pair);
        int lwant[2] = {3, 0};
        unsigned m[2] = {(unsigned)pr + 2, 3u * (unsigned)pr + 1 + (unsigned)i}, mo[2];
        MPI_Allreduce(m, mo, 1, tmap, op, pair);
        unsigned mw[2] = {2, 1u + (unsigned)i}; /* member 0's map, composed with 1's */
        for (int q = 0; q < pn; q++) {
            dwant += (double)(i + 3 * q);
            if ((i + q) % 3 < lwant[0]) {
                lwant[0] = (i + q) % 3;
                lwant[1] = q;
            }
            if (q > 0) {
                mw[1] = mw[0] * (3u * (unsigned)q + 1 + (unsigned)i) + mw[1];
                mw[0] *= (unsigned)q + 2;
            }
        }
        CHECK(dsum == dwant, "pair call %d: double sum %g, want %g", i, dsum, dwant);
        CHECK(!memcmp(vmax, want, sizeof want), "pair call %d: max %d %d %d, want %d %d %d", i,
              vmax[0], vmax[1], vmax[2], want[0], want[1], want[2]);
        CHECK(loc[0] == lwant[0] && loc[1] == lwant[1], "pair call %d: minloc (%d, %d), want (%d, %d)",
              i, loc[0], loc[1], lwant[0], lwant[1]);
        CHECK(mo[0] == mw[0] && mo[1] == mw[1], "pair call %d: composed map (%u, %u), want (%u, %u)", i,
              mo[0], mo[1], mw[0], mw[1]);
    }
    MPI_Op_free(&op);
    MPI_Type_free(&tmap);
    MPI_Comm_free(&pair);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_comm(MPI_COMM_WORLD, "world");
    check_blocks(MPI_COMM_WORLD, "world");
    check_v(MPI_COMM_WORLD, "world");
    check_rs_scan(MPI_COMM_WORLD, "world");
    check_nb(MPI_COMM_WORLD, "world");
    check_builtin_ops(MPI_COMM_WORLD, "world");
    MPI_Comm dup, half;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    check_comm(dup, "dup");
    check_blocks(dup, "dup");
    /* Reverse order inside each half: comm ranks differ from world ranks. */
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &half);
    check_comm(half, "split");
    check_blocks(half, "split");
    check_v(half, "split");
    check_rs_scan(half, "split");
    check_nb(half, "split");
    check_builtin_ops(half, "split");
    MPI_Comm_free(&half);
    MPI_Comm_free(&dup);
    check_pairs();
    /* Communicators come and go with other members (a lane goes from one
     * communicator to the next with its context), back-to-back broadcasts
     * from one root (its block reused while others may still read). */
    for (int k = 0; k < 20; k++) {
        MPI_Comm c2;
        int color = (rank + k / 2) % 2;
        MPI_Comm_split(MPI_COMM_WORLD, color, rank, &c2);
        int v = rank + k, s = 0, want = 0;
        MPI_Allreduce(&v, &s, 1, MPI_INT, MPI_SUM, c2);
        for (int q = 0; q < size; q++)
            if ((q + k / 2) % 2 == color) want += q + k;
        CHECK(s == want, "split %d allreduce %d, want %d", k, s, want);
        int cr, cn;
        MPI_Comm_rank(c2, &cr);
        MPI_Comm_size(c2, &cn);
        for (int b = 0; b < 5; b++) {
            int x = cr == cn - 1 ? 1000 * k + b : -1;
            MPI_Bcast(&x, 1, MPI_INT, cn - 1, c2);
            CHECK(x == 1000 * k + b, "split %d bcast %d got %d", k, b, x);
        }
        MPI_Comm_free(&c2);
    }
    /* More communicators at once than lanes (the rest use messages). */
    {
        enum { M = 70 };
        MPI_Comm many[M];
        for (int i = 0; i < M; i++) MPI_Comm_dup(MPI_COMM_WORLD, &many[i]);
        for (int i = M - 1; i >= 0; i--) {
            int v = i, s = 0;
            MPI_Allreduce(&v, &s, 1, MPI_INT, MPI_SUM, many[i]);
            CHECK(s == i * size, "communicator %d of %d: allreduce %d", i, M, s);
            MPI_Barrier(many[i]);
        }
        for (int i = 0; i < M; i++) MPI_Comm_free(&many[i]);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("accel_coll: ok (%d ranks)\n", size);
    MPI_Finalize();
    return 0;
}
