/* Semantics that `topocomm accel` must keep, checked by
 * crates/cli/tests/accel.rs under both MPIs, plain and accelerated, with
 * and without pretend nodes. Built with plain mpicc (never linked with
 * topocomm). Any rank count >= 2. Prints "accel_checks: ok" on rank 0.
 * `thread` as first argument: MPI_Init_thread(MPI_THREAD_MULTIPLE) and a
 * ring, for the fallback test. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int errors;
#define CHECK(c)                                                                              \
    do {                                                                                       \
        if (!(c)) {                                                                            \
            fprintf(stderr, "rank %d: check failed: %s (line %d)\n", rank, #c, __LINE__);      \
            errors++;                                                                          \
        }                                                                                      \
    } while (0)

static int rank, size;

/* Strided layouts (vectors of a dense element, packed by the accelerator
 * itself) and their neighbours (packed by the MPI), pair by pair: each
 * sent strided and received as bytes (the packed order), sent as bytes
 * and received strided (the scatter, the gaps untouched), strided both
 * ways with several elements per message, and a non-blocking receive
 * (whose request keeps a duplicate of the datatype) with the type freed
 * before the wait. */
static void strided(MPI_Comm comm) {
    int peer = rank ^ 1;
    if (peer >= size) return;
    int lead = rank < peer;
    enum { M = 4096 };
    static int src[M], dst[M], flat[M];
    enum { NT = 13 };
    MPI_Datatype contig3, col, t[NT];
    MPI_Type_contiguous(3, MPI_INT, &contig3);
    MPI_Type_vector(200, 1, 2, MPI_INT, &t[0]);       /* 4-byte blocks */
    MPI_Type_vector(100, 2, 5, MPI_INT, &t[1]);       /* 8-byte blocks */
    MPI_Type_vector(60, 4, 9, MPI_INT, &t[2]);        /* 16-byte blocks */
    MPI_Type_create_hvector(50, 1, 20, contig3, &t[3]); /* 12-byte blocks, byte stride */
    MPI_Type_vector(1, 7, 7, MPI_INT, &t[4]);         /* one block: contiguous */
    MPI_Type_vector(3, 2, 1, MPI_INT, &t[5]);         /* overlapping blocks: the MPI's */
    /* Nests: 3-D faces (C order, with a start), a 2-D block in Fortran
     * order, a vector of vectors, a contiguous run of a resized column, a
     * vector of pairs with a gap (MPI_SHORT_INT: the MPI's). */
    int sz3[3] = {6, 7, 8}, face_x[3] = {6, 5, 1}, face_y[3] = {6, 1, 5}, at[3] = {0, 2, 3};
    MPI_Type_create_subarray(3, sz3, face_x, at, MPI_ORDER_C, MPI_INT, &t[6]);
    MPI_Type_create_subarray(3, sz3, face_y, at, MPI_ORDER_C, MPI_INT, &t[7]);
    int sz2[2] = {20, 30}, blk2[2] = {5, 7}, at2[2] = {3, 4};
    MPI_Type_create_subarray(2, sz2, blk2, at2, MPI_ORDER_FORTRAN, MPI_INT, &t[8]);
    MPI_Type_vector(4, 3, 5, MPI_INT, &col);
    MPI_Type_vector(5, 2, 3, col, &t[9]);
    MPI_Datatype colr;
    MPI_Type_create_resized(col, 0, 20 * (MPI_Aint)sizeof(int), &colr);
    MPI_Type_contiguous(6, colr, &t[10]);
    MPI_Type_free(&colr);
    MPI_Type_vector(40, 1, 3, MPI_SHORT_INT, &t[11]);
    MPI_Type_dup(t[7], &t[12]);
    MPI_Type_free(&col);
    for (int k = 0; k < NT; k++) MPI_Type_commit(&t[k]);
    for (int k = 0; k < NT; k++) {
        int tsize;
        MPI_Aint lb, ext;
        MPI_Type_size(t[k], &tsize);
        MPI_Type_get_extent(t[k], &lb, &ext);
        int n = 3; /* elements per message */
        /* The packed order of n elements, from MPI_Pack itself. */
        for (int i = 0; i < M; i++) src[i] = rank * 100000 + i;
        int pos = 0;
        MPI_Pack(src, n, t[k], flat, (int)sizeof flat, &pos, comm);
        CHECK(pos == n * tsize);
        if (lead) {
            MPI_Send(src, n, t[k], peer, 100 + k, comm);
            MPI_Send(flat, pos, MPI_BYTE, peer, 200 + k, comm);
            MPI_Send(src, n, t[k], peer, 300 + k, comm);
        } else {
            /* The peer's packed order: its src is our src shifted. */
            static int want[M];
            for (int i = 0; i < M; i++) src[i] = peer * 100000 + i;
            pos = 0;
            MPI_Pack(src, n, t[k], want, (int)sizeof want, &pos, comm);
            MPI_Status st;
            int count;
            memset(dst, 0, sizeof dst);
            MPI_Recv(dst, (int)sizeof dst, MPI_BYTE, peer, 100 + k, comm, &st);
            MPI_Get_count(&st, MPI_BYTE, &count);
            CHECK(count == n * tsize && memcmp(dst, want, (size_t)count) == 0);
            for (int i = 0; i < M; i++) dst[i] = -1;
            MPI_Recv(dst, n, t[k], peer, 200 + k, comm, MPI_STATUS_IGNORE);
            static int back[M];
            for (int i = 0; i < M; i++) back[i] = -1;
            pos = 0;
            MPI_Unpack(want, (int)sizeof want, &pos, back, n, t[k], comm);
            CHECK(memcmp(dst, back, sizeof dst) == 0);
            for (int i = 0; i < M; i++) dst[i] = -1;
            MPI_Request r;
            MPI_Datatype d;
            MPI_Type_dup(t[k], &d);
            MPI_Irecv(dst, n, d, peer, 300 + k, comm, &r);
            MPI_Type_free(&d);
            MPI_Wait(&r, &st);
            MPI_Get_count(&st, t[k], &count);
            CHECK(count == n && memcmp(dst, back, sizeof dst) == 0);
        }
        (void)lb;
        (void)ext;
    }
    for (int k = 0; k < NT; k++) MPI_Type_free(&t[k]);
    MPI_Type_free(&contig3);
}

/* Every rank sends its rank to 0 with ANY_SOURCE receives, several tags,
 * interleaved with specific-source receives posted after them. */
static void any_source(MPI_Comm comm) {
    if (rank == 0) {
        int got = 0, seen[64] = {0};
        for (int i = 1; i < size; i++) {
            int v;
            MPI_Status st;
            MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 7, comm, &st);
            CHECK(v == st.MPI_SOURCE && st.MPI_TAG == 7);
            if (v > 0 && v < 64) seen[v]++;
            got++;
        }
        for (int i = 1; i < size; i++) CHECK(seen[i] == 1);
        CHECK(got == size - 1);
        /* Non-overtaking: two messages from each rank into ANY_SOURCE
         * receives; per sender, the receive posted first gets its first. */
        MPI_Request r[2 * 64];
        int v[2 * 64];
        int n = size - 1 < 64 ? size - 1 : 63;
        for (int i = 0; i < n; i++) {
            MPI_Irecv(&v[2 * i], 1, MPI_INT, MPI_ANY_SOURCE, 8, comm, &r[2 * i]);
            MPI_Irecv(&v[2 * i + 1], 1, MPI_INT, MPI_ANY_SOURCE, 8, comm, &r[2 * i + 1]);
        }
        MPI_Status sts[2 * 64];
        MPI_Waitall(2 * n, r, sts);
        /* Per sender, the receive posted first got its first message. */
        for (int src = 1; src <= n; src++) {
            int k = 0;
            for (int i = 0; i < 2 * n; i++)
                if (sts[i].MPI_SOURCE == src) CHECK(v[i] == 100 * src + k++);
            CHECK(k == 2);
        }
    } else {
        MPI_Send(&rank, 1, MPI_INT, 0, 7, comm);
        if (rank < 64) {
            int a = 100 * rank, b = 100 * rank + 1;
            MPI_Send(&a, 1, MPI_INT, 0, 8, comm);
            MPI_Send(&b, 1, MPI_INT, 0, 8, comm);
        }
    }
}

/* A listener: every rank posts an any-source receive of a tag nobody sends
 * yet (as a program waiting for a shutdown message does), then trades with
 * every other rank by receives of other tags: from a given source (the
 * other node's ranks too), any source, a probe, a matched probe; the
 * listener must hold none of them back. Then rank 0 sends the listener's
 * tag to every rank and each listener completes with it. With pretend
 * nodes, receives posted after the listener on the mixed communicator had
 * waited behind it for good (crates/cli/tests/accel/pfuzz.c found it). */
static void listener(MPI_Comm comm) {
    enum { STOP = 99, DATA = 3, PROBED = 4, SELF = 5 };
    int stop = -1;
    MPI_Request lr;
    MPI_Irecv(&stop, 1, MPI_INT, MPI_ANY_SOURCE, STOP, comm, &lr);
    int right = (rank + 1) % size, left = (rank - 1 + size) % size;
    int v = -1, w = -1, x = -1, y = 100 + rank;
    MPI_Request s[3];
    MPI_Isend(&y, 1, MPI_INT, right, DATA, comm, &s[0]);
    MPI_Isend(&y, 1, MPI_INT, right, DATA, comm, &s[1]);
    MPI_Isend(&y, 1, MPI_INT, right, PROBED, comm, &s[2]);
    MPI_Status st;
    MPI_Recv(&v, 1, MPI_INT, left, DATA, comm, &st);
    CHECK(v == 100 + left && st.MPI_SOURCE == left);
    MPI_Recv(&w, 1, MPI_INT, MPI_ANY_SOURCE, DATA, comm, &st);
    CHECK(w == 100 + left && st.MPI_SOURCE == left);
    MPI_Probe(MPI_ANY_SOURCE, PROBED, comm, &st);
    CHECK(st.MPI_SOURCE == left && st.MPI_TAG == PROBED);
    MPI_Message m;
    MPI_Mprobe(left, PROBED, comm, &m, &st);
    MPI_Mrecv(&x, 1, MPI_INT, &m, &st);
    CHECK(x == 100 + left);
    MPI_Status sst[3];
    MPI_Waitall(3, s, sst);
    /* An any-source receive and a synchronous send to this rank itself,
     * completed by one MPI_Waitall with more of the transport's requests:
     * the send needs the receive, which is held back on a communicator
     * spanning nodes (it had waited for good while the wait blocked on the
     * transport's requests). */
    {
        int in = -1, out = 7000 + rank, in2 = -1, out2 = 8000 + rank;
        MPI_Request q[4];
        MPI_Status qs[4];
        MPI_Irecv(&in, 1, MPI_INT, MPI_ANY_SOURCE, SELF, comm, &q[0]);
        MPI_Irecv(&in2, 1, MPI_INT, rank, SELF + 1, comm, &q[1]);
        MPI_Issend(&out, 1, MPI_INT, rank, SELF, comm, &q[2]);
        MPI_Issend(&out2, 1, MPI_INT, rank, SELF + 1, comm, &q[3]);
        MPI_Waitall(4, q, qs);
        CHECK(in == 7000 + rank && qs[0].MPI_SOURCE == rank && in2 == 8000 + rank);
    }
    int flag = 1;
    MPI_Test(&lr, &flag, MPI_STATUS_IGNORE);
    CHECK(!flag); /* nobody sent STOP yet */
    MPI_Barrier(comm);
    if (rank == 0)
        for (int r = 0; r < size; r++) MPI_Send(&r, 1, MPI_INT, r, STOP, comm);
    MPI_Wait(&lr, &st);
    CHECK(stop == rank && st.MPI_SOURCE == 0 && st.MPI_TAG == STOP);
}

/* Pairs (0,1), (2,3), ...: every send mode, persistent, probes, datatypes. */
static void pairwise(MPI_Comm comm) {
    int peer = rank ^ 1;
    if (peer >= size) return;
    int lead = rank < peer;
    enum { N = 3000 };
    static double big[N], got[N];
    for (int i = 0; i < N; i++) big[i] = rank * 1e6 + i;
    /* Synchronous, buffered, ready (after the peer posted), standard. */
    int bufsize = 2 * (N * 8 + MPI_BSEND_OVERHEAD);
    void *attach = malloc((size_t)bufsize);
    MPI_Buffer_attach(attach, bufsize);
    if (lead) {
        MPI_Ssend(big, N, MPI_DOUBLE, peer, 1, comm);
        MPI_Bsend(big, N, MPI_DOUBLE, peer, 2, comm);
        MPI_Recv(NULL, 0, MPI_INT, peer, 3, comm, MPI_STATUS_IGNORE); /* peer posted */
        MPI_Rsend(big, 10, MPI_DOUBLE, peer, 4, comm);
    } else {
        MPI_Status st;
        int count;
        MPI_Recv(got, N, MPI_DOUBLE, peer, 1, comm, &st);
        MPI_Get_count(&st, MPI_DOUBLE, &count);
        CHECK(count == N && got[N - 1] == peer * 1e6 + N - 1 && st.MPI_SOURCE == peer);
        MPI_Recv(got, N, MPI_DOUBLE, peer, 2, comm, MPI_STATUS_IGNORE);
        CHECK(got[17] == peer * 1e6 + 17);
        MPI_Request r;
        MPI_Irecv(got, 10, MPI_DOUBLE, peer, 4, comm, &r);
        MPI_Send(NULL, 0, MPI_INT, peer, 3, comm);
        MPI_Wait(&r, &st);
        MPI_Get_count(&st, MPI_DOUBLE, &count);
        CHECK(count == 10 && got[9] == peer * 1e6 + 9);
    }
    int dummy;
    MPI_Buffer_detach(&attach, &dummy);
    free(attach);
    /* A strided vector both ways, and a probe + matched receive. */
    MPI_Datatype vec;
    MPI_Type_vector(100, 1, 3, MPI_DOUBLE, &vec);
    MPI_Type_commit(&vec);
    if (lead) {
        MPI_Send(big, 1, vec, peer, 5, comm);
    } else {
        memset(got, 0, sizeof got);
        MPI_Message m;
        MPI_Status st;
        MPI_Mprobe(peer, 5, comm, &m, &st);
        int bytes;
        MPI_Get_count(&st, MPI_BYTE, &bytes);
        CHECK(bytes == 800);
        MPI_Mrecv(got, 1, vec, &m, &st);
        CHECK(got[3 * 99] == peer * 1e6 + 3 * 99 && got[1] == 0);
    }
    MPI_Type_free(&vec);
    /* Persistent requests, started three times, mixed with a plain one. */
    MPI_Request pr[2];
    int out = rank, in = -1;
    MPI_Send_init(&out, 1, MPI_INT, peer, 6, comm, &pr[0]);
    MPI_Recv_init(&in, 1, MPI_INT, peer, 6, comm, &pr[1]);
    for (int k = 0; k < 3; k++) {
        out = rank + 10 * k;
        MPI_Status sts[2];
        MPI_Startall(2, pr);
        MPI_Waitall(2, pr, sts);
        CHECK(in == peer + 10 * k);
    }
    MPI_Request_free(&pr[0]);
    MPI_Request_free(&pr[1]);
    /* A receive cancelled before any message: it reports cancelled. */
    MPI_Request c;
    MPI_Status cst;
    int flag;
    MPI_Irecv(&in, 1, MPI_INT, peer, 99, comm, &c);
    MPI_Cancel(&c);
    MPI_Wait(&c, &cst);
    MPI_Test_cancelled(&cst, &flag);
    CHECK(flag);
    /* Small sends complete at posting (under the accelerator: all of them
     * one shared handle) through every completion call, and receives whose
     * message is already there when posted. */
    {
        int v[8], r8[8];
        MPI_Request s[8];
        MPI_Status st;
        for (int k = 0; k < 8; k++) {
            v[k] = rank * 1000 + k;
            MPI_Isend(&v[k], 1, MPI_INT, peer, 40 + k, comm, &s[k]);
        }
        CHECK(MPI_Request_c2f(s[0]) == MPI_Request_c2f(s[0]));
        MPI_Request back = MPI_Request_f2c(MPI_Request_c2f(s[0]));
        MPI_Wait(&back, &st);
        CHECK(back == MPI_REQUEST_NULL);
        int f = 0;
        MPI_Request_get_status(s[1], &f, &st);
        CHECK(f && s[1] != MPI_REQUEST_NULL);
        MPI_Test(&s[1], &f, &st);
        CHECK(f && s[1] == MPI_REQUEST_NULL);
        MPI_Cancel(&s[2]);
        MPI_Wait(&s[2], &st);
        MPI_Test_cancelled(&st, &f);
        CHECK(!f && s[2] == MPI_REQUEST_NULL);
        MPI_Request_free(&s[3]);
        CHECK(s[3] == MPI_REQUEST_NULL);
        int idx = -1;
        MPI_Waitany(2, &s[4], &idx, &st);
        CHECK(idx >= 0 && s[4 + idx] == MPI_REQUEST_NULL);
        int outc = 0, outi[4];
        MPI_Status many[8];
        MPI_Waitsome(4, &s[4], &outc, outi, many);
        CHECK(outc == 3);
        MPI_Testall(8, s, &f, many);
        CHECK(f);
        for (int k = 0; k < 8; k++) CHECK(s[k] == MPI_REQUEST_NULL);
        /* The peer's eight are in (its sends completed before this
         * exchange): each receive takes its message when posted. */
        MPI_Sendrecv(NULL, 0, MPI_INT, peer, 49, NULL, 0, MPI_INT, peer, 49, comm,
                     MPI_STATUS_IGNORE);
        MPI_Request q[8];
        /* Tags 40-43 in sending order, then 47 down to 44 (those pass
         * through the unexpected queue). */
        int tag[8] = {40, 41, 42, 43, 47, 46, 45, 44};
        for (int k = 0; k < 8; k++) MPI_Irecv(&r8[k], 1, MPI_INT, peer, tag[k], comm, &q[k]);
        MPI_Status sts[8];
        MPI_Waitall(8, q, sts);
        int ok = 1;
        for (int k = 0; k < 8; k++) {
            int n = -1;
            MPI_Get_count(&sts[k], MPI_INT, &n);
            ok &= r8[k] == peer * 1000 + tag[k] - 40 && sts[k].MPI_SOURCE == peer &&
                  sts[k].MPI_TAG == tag[k] && n == 1 && q[k] == MPI_REQUEST_NULL;
        }
        CHECK(ok);
    }
    /* A window of 150 receives and 150 sends in one MPI_Waitall (beyond
     * the accelerator's 64 on the stack), tags cycling, statuses checked,
     * the last receive too short (a truncation in the middle of the array
     * leaves the others complete). */
    {
        enum { W = 150 };
        int sb[W], rb[W], two[2] = {-1, -1};
        MPI_Request q[2 * W];
        MPI_Status sts[2 * W];
        for (int k = 0; k < W; k++) {
            sb[k] = rank * 100000 + k;
            rb[k] = -1;
        }
        for (int k = 0; k < W - 1; k++)
            MPI_Irecv(&rb[k], 1, MPI_INT, peer, 20 + k % 7, comm, &q[k]);
        MPI_Irecv(two, 1, MPI_INT, peer, 19, comm, &q[W - 1]);
        for (int k = 0; k < W - 1; k++)
            MPI_Isend(&sb[k], 1, MPI_INT, peer, 20 + k % 7, comm, &q[W + k]);
        MPI_Isend(sb, 2, MPI_INT, peer, 19, comm, &q[2 * W - 1]);
        /* Which communicator's handler a request array's error goes to
         * differs (MPICH: MPI_COMM_WORLD's): return on all three. */
        MPI_Comm all[3] = {comm, MPI_COMM_WORLD, MPI_COMM_SELF};
        for (int i = 0; i < 3; i++) MPI_Comm_set_errhandler(all[i], MPI_ERRORS_RETURN);
        int rc = MPI_Waitall(2 * W, q, sts);
        for (int i = 0; i < 3; i++) MPI_Comm_set_errhandler(all[i], MPI_ERRORS_ARE_FATAL);
        int err_class = MPI_SUCCESS;
        MPI_Error_class(sts[W - 1].MPI_ERROR, &err_class);
        CHECK(rc == MPI_ERR_IN_STATUS && err_class == MPI_ERR_TRUNCATE);
        int ok = 1;
        for (int k = 0; k < W - 1; k++)
            ok &= rb[k] == peer * 100000 + k && sts[k].MPI_SOURCE == peer &&
                  sts[k].MPI_TAG == 20 + k % 7 && sts[k].MPI_ERROR == MPI_SUCCESS &&
                  q[k] == MPI_REQUEST_NULL;
        CHECK(ok);
        CHECK(two[1] == -1 && sts[W - 1].MPI_SOURCE == peer && sts[W - 1].MPI_TAG == 19);
    }
    /* Sendrecv_replace. */
    int v = rank;
    MPI_Sendrecv_replace(&v, 1, MPI_INT, peer, 9, peer, 9, comm, MPI_STATUS_IGNORE);
    CHECK(v == peer);
}

/* Messages on a duplicate never match receives on the original. */
static void contexts(void) {
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    int peer = rank ^ 1;
    if (peer < size) {
        int a = 1, b = 2, x = 0, y = 0;
        MPI_Request r[2];
        MPI_Irecv(&x, 1, MPI_INT, peer, 0, MPI_COMM_WORLD, &r[0]);
        MPI_Irecv(&y, 1, MPI_INT, peer, 0, dup, &r[1]);
        MPI_Send(&b, 1, MPI_INT, peer, 0, dup);
        MPI_Send(&a, 1, MPI_INT, peer, 0, MPI_COMM_WORLD);
        MPI_Status sts[2];
        MPI_Waitall(2, r, sts);
        CHECK(x == 1 && y == 2);
    }
    MPI_Comm_free(&dup);
}

/* Receives recorded by MPI_Irecv and posted at the next call (accelerated,
 * docs/commands/accel.md) behave as if posted at MPI_Irecv: a probe after
 * it sees the next message, not the one it matched; its datatype and
 * communicator may be freed before the wait; it can be cancelled; a peer's
 * synchronous send completes while this rank sits in a barrier. */
static void recorded_receives(MPI_Comm comm) {
    int peer = rank ^ 1;
    if (peer >= size) {
        MPI_Barrier(comm);
        MPI_Barrier(comm);
        return;
    }
    MPI_Comm dup;
    MPI_Comm_dup(comm, &dup);
    MPI_Datatype four;
    MPI_Type_contiguous(4, MPI_INT, &four);
    MPI_Type_commit(&four);
    int a = 100 + rank, b = 200 + rank, quad[4] = {rank, rank + 1, rank + 2, rank + 3};
    int got = -1, next = -1, dupv = -1, gquad[4] = {0}, never = -1, sync = -1;
    MPI_Send(&a, 1, MPI_INT, peer, 21, comm);
    MPI_Send(&b, 1, MPI_INT, peer, 21, comm);
    MPI_Barrier(comm); /* both messages are on their way to each rank */
    MPI_Request r[5];
    MPI_Irecv(&got, 1, MPI_INT, peer, 21, comm, &r[0]);
    MPI_Status st;
    MPI_Probe(peer, 21, comm, &st); /* the second message: the first is r[0]'s */
    MPI_Recv(&next, 1, MPI_INT, peer, 21, comm, MPI_STATUS_IGNORE);
    MPI_Irecv(gquad, 1, four, peer, 22, comm, &r[1]);
    MPI_Type_free(&four);
    MPI_Irecv(&dupv, 1, MPI_INT, peer, 23, dup, &r[2]);
    MPI_Irecv(&never, 1, MPI_INT, peer, 24, comm, &r[3]);
    MPI_Cancel(&r[3]);
    MPI_Irecv(&sync, 1, MPI_INT, peer, 25, comm, &r[4]);
    if (rank < peer) {
        int v = 7;
        MPI_Ssend(&v, 1, MPI_INT, peer, 25, comm);
    }
    MPI_Barrier(comm); /* the lower rank's Ssend is matched by then */
    if (rank > peer) {
        int v = 7;
        MPI_Ssend(&v, 1, MPI_INT, peer, 25, comm);
    }
    MPI_Send(quad, 4, MPI_INT, peer, 22, comm);
    int d = 300 + rank;
    MPI_Send(&d, 1, MPI_INT, peer, 23, dup);
    MPI_Comm_free(&dup);
    MPI_Status sts[5];
    MPI_Waitall(5, r, sts);
    int cancelled = 0;
    MPI_Test_cancelled(&sts[3], &cancelled);
    CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == 21);
    CHECK(got == 100 + peer && next == 200 + peer);
    CHECK(gquad[0] == peer && gquad[3] == peer + 3);
    CHECK(dupv == 300 + peer && sts[2].MPI_SOURCE == peer);
    CHECK(cancelled && never == -1);
    CHECK(sync == 7);
}

static void thread_ring(void) {
    int v = rank, got = -1;
    MPI_Sendrecv(&v, 1, MPI_INT, (rank + 1) % size, 0, &got, 1, MPI_INT, (rank + size - 1) % size,
                 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(got == (rank + size - 1) % size);
}

int main(int argc, char **argv) {
    int threads = argc > 1 && strcmp(argv[1], "thread") == 0;
    if (threads) {
        int provided;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (threads) {
        thread_ring();
    } else {
        any_source(MPI_COMM_WORLD);
        listener(MPI_COMM_WORLD);
        pairwise(MPI_COMM_WORLD);
        strided(MPI_COMM_WORLD);
        contexts();
        recorded_receives(MPI_COMM_WORLD);
        MPI_Comm half;
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
        int hr;
        MPI_Comm_rank(half, &hr);
        int save = rank;
        rank = hr;
        MPI_Comm_size(half, &size);
        if (size >= 2) pairwise(half);
        rank = save;
        MPI_Comm_free(&half);
    }
    int all;
    MPI_Allreduce(&errors, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf(all == 0 ? "accel_checks: ok\n" : "accel_checks: %d errors\n", all);
    MPI_Finalize();
    return all != 0;
}
