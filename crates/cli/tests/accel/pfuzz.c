/* Random point-to-point traffic, every message checked, for `topocomm
 * accel` (crates/cli/tests/accel.rs; scripts/coll-fuzz.py --program pfuzz
 * runs it longer). Plain standard MPI, built with plain mpicc.
 *
 *   pfuzz [SEED] [ROUNDS] [MAX_BYTES]     (defaults 1, 200, 1 MiB)
 *
 * Each round every rank draws, from SEED, the same schedule: up to 24
 * messages (source, destination, tag, byte count log-uniform from 0 to
 * MAX_BYTES, communicator among MPI_COMM_WORLD, a duplicate and a split;
 * a rank may send to itself). Each rank then
 *   1. posts some of its receives early (MPI_Irecv, or MPI_Recv_init and
 *      MPI_Start),
 *   2. starts all its sends (MPI_Isend, MPI_Issend, MPI_Send_init and
 *      MPI_Start, or MPI_Ibsend into an attached buffer),
 *   3. makes its other receives one by one (MPI_Recv, MPI_Probe then
 *      MPI_Recv, MPI_Iprobe until found then MPI_Recv, MPI_Mprobe then
 *      MPI_Mrecv, MPI_Improbe until found then MPI_Imrecv),
 *   4. completes its requests (MPI_Waitall, MPI_Waitany, MPI_Testsome or
 *      MPI_Test over them), and now and then posts a receive nobody
 *      matches and cancels it (MPI_Test_cancelled must say so).
 * Receives may name their source and tag or take MPI_ANY_SOURCE for some
 * tags, MPI_ANY_TAG for some sources, or both for all (one way per rank and
 * round, so that every receive still finds a message). Once done, the
 * receives are read in the order they were posted (matched, for the
 * probes that take a message): the i-th receive that got a message from
 * source s with tag t on a communicator must hold the i-th message s sent
 * to this rank with tag t there (MPI's non-overtaking rule), with its
 * status (source, tag, count) and every byte right, and every message must
 * arrive once. Rounds with wildcards end with a barrier. Prints "pfuzz: ok, N rounds, M messages (seed S)" on rank
 * 0; a mismatch prints the round and message and aborts. FUZZ_TRACE=1
 * prints each round's schedule. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_draw.h"

enum { MAXMSG = 24, NCOMMS = 3, NTAGS = 4 };

static int wrank, wsize;

static char byte_of(int src, long round, int j, long i) {
    uint64_t h = (uint64_t)src * 0x9E3779B97F4A7C15ull ^ (uint64_t)round * 0xC2B2AE3D27D4EB4Full ^
                 (uint64_t)j * 0x165667B19E3779F9ull ^ (uint64_t)i * 0x27D4EB2F165667C5ull;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    return (char)(h >> 40);
}

/* A byte count log-uniform up to max, 0 one time in 12. */
static size_t draw_bytes(size_t max) { return draw_bytes_or_zero(max, 12); }

/* One message of a round's schedule, in world ranks; its communicator's
 * ranks are looked up when it is sent or received. */
struct msg {
    int src, dst, tag, comm;
    long bytes;
};

/* One receive of this rank: what it asked for and what it got. */
struct recv {
    int comm, src, tag; /* asked: comm ranks, or MPI_ANY_* */
    char *buf;
    long cap;
    MPI_Request req;
    MPI_Status st;
    int how;    /* 0 early, 1 late */
    int posted; /* order of posting (matching) */
};

static long round_no;

#define FAIL(...)                                                                \
    do {                                                                         \
        fprintf(stderr, "pfuzz: rank %d: round %ld: ", wrank, round_no);       \
        fprintf(stderr, __VA_ARGS__);                                            \
        fprintf(stderr, "\n");                                                   \
        MPI_Abort(MPI_COMM_WORLD, 1);                                            \
    } while (0)

static MPI_Comm comms[NCOMMS];
static int *to_comm[NCOMMS];   /* world rank -> comm rank (-1: not a member) */
static int *to_world[NCOMMS];  /* comm rank -> world rank */

static void check(int rc, const char *what) {
    if (rc != MPI_SUCCESS) FAIL("%s returned %d", what, rc);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    unsigned long long seed;
    long rounds = 200;
    size_t max_bytes;
    fuzz_args(argc, argv, "pfuzz [SEED] [ROUNDS] [MAX_BYTES <= 16 MiB]", &rounds, &max_bytes,
              (size_t)1 << 24, &seed);
    int trace = getenv("FUZZ_TRACE") != NULL;

    comms[0] = MPI_COMM_WORLD;
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    /* Two groups, the upper half in reverse order: messages between the
     * groups go through world and the duplicate only. */
    MPI_Comm_split(MPI_COMM_WORLD, wrank < wsize / 2, wsize - wrank, &comms[2]);
    for (int c = 0; c < NCOMMS; c++) {
        int n;
        MPI_Comm_size(comms[c], &n);
        to_world[c] = malloc(sizeof(int) * (size_t)n);
        to_comm[c] = malloc(sizeof(int) * (size_t)wsize);
        MPI_Allgather(&wrank, 1, MPI_INT, to_world[c], 1, MPI_INT, comms[c]);
        for (int w = 0; w < wsize; w++) to_comm[c][w] = -1;
        for (int r = 0; r < n; r++) to_comm[c][to_world[c][r]] = r;
    }
    /* Every rank knows every rank's group in the split (same draws). */
    int *group = malloc(sizeof(int) * (size_t)wsize);
    for (int w = 0; w < wsize; w++) group[w] = w < wsize / 2;

    /* A buffer for MPI_Ibsend: room for two rounds' sends (a round's
     * buffered messages are all received within the round, but the MPI
     * may release their space later). */
    size_t bsize = 2 * MAXMSG * (max_bytes + MPI_BSEND_OVERHEAD) + 64;
    char *bbuf = malloc(bsize);
    MPI_Buffer_attach(bbuf, (int)(bsize > 0x7fffffff ? 0x7fffffff : bsize));

    struct msg sched[MAXMSG];
    struct recv rv[MAXMSG + 1];
    MPI_Request sreq[MAXMSG];
    char *sbuf[MAXMSG];
    long total = 0;
    for (round_no = 0; round_no < rounds; round_no++) {
        int nm = 1 + pick(MAXMSG);
        for (int j = 0; j < nm; j++) {
            struct msg *m = &sched[j];
            m->src = pick(wsize);
            m->dst = pick(wsize);
            m->comm = pick(NCOMMS);
            if (m->comm == 2 && group[m->src] != group[m->dst]) m->comm = pick(2);
            m->tag = pick(NTAGS);
            m->bytes = (long)draw_bytes(max_bytes);
            if (trace && wrank == 0)
                fprintf(stderr, "pfuzz: round %ld message %d: %d -> %d, comm %d, tag %d, %ld bytes\n",
                        round_no, j, m->src, m->dst, m->comm, m->tag, m->bytes);
        }
        /* This rank's wildcard way this round, drawn by every rank for
         * every rank (same stream): 0 none, 1 any source for the tags in
         * the mask, 2 any tag for the sources (world ranks) in the mask,
         * 3 both for all. */
        int way = 0, mask = 0, wild = 0;
        for (int w = 0; w < wsize; w++) {
            int wy = pick(4) == 0 ? pick(4) : 0, mk = pick(1 << 16);
            wild |= wy != 0;
            if (w == wrank) {
                way = wy;
                mask = mk;
            }
        }
        long biggest = 0;
        for (int j = 0; j < nm; j++)
            if (sched[j].dst == wrank && sched[j].bytes > biggest) biggest = sched[j].bytes;
        int cancel = pick(8) == 0;
        int completion = pick(4);

        /* The receives: one per message to this rank, its pattern from
         * that message, widened by the wildcard way. Early or late. */
        int nr = 0;
        for (int j = 0; j < nm; j++) {
            struct msg *m = &sched[j];
            int early = pick(2), pers = pick(3) == 0, late_way = pick(5);
            if (m->dst != wrank) continue;
            struct recv *r = &rv[nr++];
            r->comm = m->comm;
            r->src = to_comm[m->comm][m->src];
            r->tag = m->tag;
            int any_src = way == 3 || (way == 1 && (mask >> m->tag) & 1);
            int any_tag = way == 3 || (way == 2 && (mask >> (m->src % 16)) & 1);
            if (any_src) r->src = MPI_ANY_SOURCE;
            if (any_tag) r->tag = MPI_ANY_TAG;
            /* Receives of one pattern take its messages in send order,
             * not the one each was drawn from: room for the largest
             * message to this rank. */
            r->cap = biggest;
            r->buf = malloc((size_t)r->cap + 1);
            r->req = MPI_REQUEST_NULL;
            r->how = early ? 0 : 1 + late_way;
            r->posted = -1;
            r->st.MPI_SOURCE = -2;
            if (early && pers) r->how = -1; /* persistent, started early */
        }
        if (trace)
            for (int i = 0; i < nr; i++)
                fprintf(stderr, "pfuzz: rank %d round %ld: receive %d: comm %d source %d tag %d, %s\n",
                        wrank, round_no, i, rv[i].comm, rv[i].src, rv[i].tag,
                        rv[i].how == -1  ? "persistent, early"
                        : rv[i].how == 0 ? "MPI_Irecv, early"
                        : rv[i].how == 1 ? "MPI_Recv"
                        : rv[i].how == 2 ? "MPI_Probe, MPI_Recv"
                        : rv[i].how == 3 ? "MPI_Iprobe, MPI_Recv"
                        : rv[i].how == 4 ? "MPI_Mprobe, MPI_Mrecv"
                                         : "MPI_Improbe, MPI_Imrecv");
        /* 1. Early receives, in schedule order. */
        int order = 0;
        for (int i = 0; i < nr; i++) {
            struct recv *r = &rv[i];
            if (r->how == 0)
                check(MPI_Irecv(r->buf, (int)r->cap, MPI_CHAR, r->src, r->tag, comms[r->comm],
                                &r->req),
                      "MPI_Irecv");
            else if (r->how == -1) {
                check(MPI_Recv_init(r->buf, (int)r->cap, MPI_CHAR, r->src, r->tag, comms[r->comm],
                                    &r->req),
                      "MPI_Recv_init");
                check(MPI_Start(&r->req), "MPI_Start");
            } else
                continue;
            r->posted = order++;
        }
        /* A receive nobody matches (tag NTAGS + 1 is never sent), to cancel. */
        MPI_Request lonely = MPI_REQUEST_NULL;
        char lonely_buf[8];
        if (cancel)
            check(MPI_Irecv(lonely_buf, 8, MPI_CHAR, MPI_ANY_SOURCE, NTAGS + 1, MPI_COMM_WORLD,
                            &lonely),
                  "MPI_Irecv (to cancel)");
        /* 2. Sends. */
        int ns = 0;
        for (int j = 0; j < nm; j++) {
            struct msg *m = &sched[j];
            int mode = pick(4);
            if (m->src != wrank) continue;
            char *b = malloc((size_t)m->bytes + 1);
            for (long i = 0; i < m->bytes; i++) b[i] = byte_of(m->src, round_no, j, i);
            int dst = to_comm[m->comm][m->dst];
            MPI_Comm cm = comms[m->comm];
            MPI_Request *q = &sreq[ns];
            sbuf[ns++] = b;
            if (trace)
                fprintf(stderr, "pfuzz: rank %d round %ld: send message %d by %s\n", wrank, round_no,
                        j, (const char *[]){"MPI_Isend", "MPI_Issend", "MPI_Send_init", "MPI_Ibsend"}[mode]);
            if (mode == 0)
                check(MPI_Isend(b, (int)m->bytes, MPI_CHAR, dst, m->tag, cm, q), "MPI_Isend");
            else if (mode == 1)
                check(MPI_Issend(b, (int)m->bytes, MPI_CHAR, dst, m->tag, cm, q), "MPI_Issend");
            else if (mode == 2) {
                check(MPI_Send_init(b, (int)m->bytes, MPI_CHAR, dst, m->tag, cm, q),
                      "MPI_Send_init");
                check(MPI_Start(q), "MPI_Start");
            } else
                check(MPI_Ibsend(b, (int)m->bytes, MPI_CHAR, dst, m->tag, cm, q), "MPI_Ibsend");
        }
        /* 3. Late receives, one by one in schedule order. */
        for (int i = 0; i < nr; i++) {
            struct recv *r = &rv[i];
            if (r->how <= 0) continue;
            MPI_Comm cm = comms[r->comm];
            int found = 0;
            if (trace) fprintf(stderr, "pfuzz: rank %d round %ld: late receive %d\n", wrank, round_no, i);
            MPI_Message msg;
            MPI_Status pst;
            switch (r->how) {
            case 1:
                r->posted = order++;
                check(MPI_Recv(r->buf, (int)r->cap, MPI_CHAR, r->src, r->tag, cm, &r->st),
                      "MPI_Recv");
                break;
            case 2:
                check(MPI_Probe(r->src, r->tag, cm, &pst), "MPI_Probe");
                if (trace) {
                    int pc;
                    MPI_Get_count(&pst, MPI_CHAR, &pc);
                    fprintf(stderr, "pfuzz: rank %d round %ld: probed source %d tag %d, %d bytes\n",
                            wrank, round_no, pst.MPI_SOURCE, pst.MPI_TAG, pc);
                }
                /* Receive what was probed: its source and tag exactly (a
                 * wildcard receive could match another message now). */
                r->posted = order++;
                check(MPI_Recv(r->buf, (int)r->cap, MPI_CHAR, pst.MPI_SOURCE, pst.MPI_TAG, cm,
                               &r->st),
                      "MPI_Recv after MPI_Probe");
                if (r->st.MPI_SOURCE != pst.MPI_SOURCE || r->st.MPI_TAG != pst.MPI_TAG)
                    FAIL("MPI_Probe saw (%d, %d), the receive got (%d, %d)", pst.MPI_SOURCE,
                         pst.MPI_TAG, r->st.MPI_SOURCE, r->st.MPI_TAG);
                break;
            case 3:
                while (!found) check(MPI_Iprobe(r->src, r->tag, cm, &found, &pst), "MPI_Iprobe");
                r->posted = order++;
                check(MPI_Recv(r->buf, (int)r->cap, MPI_CHAR, pst.MPI_SOURCE, pst.MPI_TAG, cm,
                               &r->st),
                      "MPI_Recv after MPI_Iprobe");
                break;
            case 4:
                check(MPI_Mprobe(r->src, r->tag, cm, &msg, &pst), "MPI_Mprobe");
                r->posted = order++;
                check(MPI_Mrecv(r->buf, (int)r->cap, MPI_CHAR, &msg, &r->st), "MPI_Mrecv");
                break;
            default:
                while (!found)
                    check(MPI_Improbe(r->src, r->tag, cm, &found, &msg, &pst), "MPI_Improbe");
                r->posted = order++;
                check(MPI_Imrecv(r->buf, (int)r->cap, MPI_CHAR, &msg, &r->req), "MPI_Imrecv");
                break;
            }
        }
        if (trace) fprintf(stderr, "pfuzz: rank %d round %ld: completing (way %d)\n", wrank, round_no, completion);
        /* 4. Completion of every request. */
        MPI_Request all[2 * MAXMSG];
        MPI_Status sts[2 * MAXMSG];
        int idx[2 * MAXMSG], na = 0, ri[2 * MAXMSG];
        for (int i = 0; i < nr; i++)
            if (rv[i].req != MPI_REQUEST_NULL) {
                ri[na] = i;
                all[na++] = rv[i].req;
            }
        int nrecv_reqs = na;
        for (int i = 0; i < ns; i++) {
            ri[na] = -1;
            all[na++] = sreq[i];
        }
        if (completion == 0) {
            check(MPI_Waitall(na, all, sts), "MPI_Waitall");
        } else if (completion == 1) {
            for (int left = na; left > 0; left--) {
                int k;
                MPI_Status s;
                check(MPI_Waitany(na, all, &k, &s), "MPI_Waitany");
                if (k == MPI_UNDEFINED) FAIL("MPI_Waitany found nothing with %d left", left);
                sts[k] = s;
            }
        } else if (completion == 2) {
            for (int left = na; left > 0;) {
                int out;
                MPI_Status s[2 * MAXMSG];
                check(MPI_Testsome(na, all, &out, idx, s), "MPI_Testsome");
                if (out == MPI_UNDEFINED) FAIL("MPI_Testsome: no active request, %d left", left);
                for (int q = 0; q < out; q++) sts[idx[q]] = s[q];
                left -= out;
            }
        } else {
            for (int q = 0; q < na; q++) {
                int done = 0;
                while (!done) check(MPI_Test(&all[q], &done, &sts[q]), "MPI_Test");
            }
        }
        for (int q = 0; q < nrecv_reqs; q++) rv[ri[q]].st = sts[q];
        if (cancel) {
            int flag = 0;
            MPI_Status cs;
            check(MPI_Cancel(&lonely), "MPI_Cancel");
            check(MPI_Wait(&lonely, &cs), "MPI_Wait (cancelled)");
            check(MPI_Test_cancelled(&cs, &flag), "MPI_Test_cancelled");
            if (!flag) FAIL("a receive of a tag nobody sends was not cancelled");
        }
        /* The persistent requests: free them (inactive after completion). */
        for (int i = 0; i < nr; i++)
            if (rv[i].how == -1) {
                /* MPI_Waitall & co. leave persistent requests allocated
                 * (inactive); our copy in `all` was the one completed. */
                for (int q = 0; q < nrecv_reqs; q++)
                    if (ri[q] == i) MPI_Request_free(&all[q]);
            }
        for (int q = nrecv_reqs; q < na; q++)
            if (all[q] != MPI_REQUEST_NULL) MPI_Request_free(&all[q]);

        /* Checks, receives in posting order. */
        int by_post[MAXMSG];
        for (int i = 0; i < nr; i++) by_post[rv[i].posted] = i;
        int seen[MAXMSG] = {0};
        for (int p = 0; p < nr; p++) {
            struct recv *r = &rv[by_post[p]];
            int s = r->st.MPI_SOURCE, tag = r->st.MPI_TAG;
            if (s < 0 || tag < 0 || tag >= NTAGS)
                FAIL("receive %d (posted %d) has status source %d tag %d", by_post[p], p, s, tag);
            int src_w = to_world[r->comm][s];
            if ((r->src != MPI_ANY_SOURCE && r->src != s) || (r->tag != MPI_ANY_TAG && r->tag != tag))
                FAIL("receive for (%d, %d) got (%d, %d)", r->src, r->tag, s, tag);
            /* The first message of (source, tag, comm) to this rank not
             * taken by an earlier-posted receive. */
            int j = -1;
            for (int q = 0; q < nm && j < 0; q++)
                if (!seen[q] && sched[q].dst == wrank && sched[q].src == src_w &&
                    sched[q].tag == tag && sched[q].comm == r->comm)
                    j = q;
            if (j < 0)
                FAIL("a message from %d with tag %d on comm %d that nobody sent or that came twice",
                     src_w, tag, r->comm);
            seen[j] = 1;
            int count;
            MPI_Get_count(&r->st, MPI_CHAR, &count);
            if (count != sched[j].bytes)
                FAIL("message %d (%d -> %d, tag %d, comm %d): %d bytes, expected %ld (overtaken?)", j,
                     src_w, wrank, tag, r->comm, count, sched[j].bytes);
            for (long i = 0; i < count; i++)
                if (r->buf[i] != byte_of(src_w, round_no, j, i))
                    FAIL("message %d (%d -> %d, tag %d, comm %d, %d bytes): byte %ld differs (overtaken?)",
                         j, src_w, wrank, tag, r->comm, count, i);
            total++;
        }
        for (int i = 0; i < nr; i++) free(rv[i].buf);
        for (int i = 0; i < ns; i++) free(sbuf[i]);
        /* A rank that used wildcards waits for everyone before the next
         * round: a sender already in the next round could otherwise have
         * its message taken by a wildcard receive of this one. Without
         * wildcards the rounds may overlap (MPI's order keeps each
         * round's messages first in line for its receives). */
        if (wild) check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    }
    int size_out;
    MPI_Buffer_detach(&bbuf, &size_out);
    free(bbuf);
    long sum = 0;
    MPI_Reduce(&total, &sum, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (wrank == 0) printf("pfuzz: ok, %ld rounds, %ld messages (seed %llu)\n", rounds, sum, seed);
    for (int c = 1; c < NCOMMS; c++) MPI_Comm_free(&comms[c]);
    for (int c = 0; c < NCOMMS; c++) {
        free(to_comm[c]);
        free(to_world[c]);
    }
    free(group);
    MPI_Finalize();
    return 0;
}
