/* MPI_Finalize: gather every rank's sparse counters to rank 0 and write the
 * CSV edge list `src,dst,bytes,msgs` (docs/formats/comm-matrix.md).
 * Rank 0 receives one count per rank (MPI_Gather) and then the edges
 * themselves (MPI_Gatherv of (dst, bytes, msgs) triples): memory is
 * O(ranks + edges), never ranks x ranks. */
#include "trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *out_path(void)
{
    const char *p = getenv(TC_TRACE_OUT_ENV);
    return p && *p ? p : TC_TRACE_DEFAULT_OUT;
}

static void write_csv(int nranks, const int *counts, const int64_t *triples)
{
    const char *path = out_path();
    size_t len = strlen(path);
    char *tmp = malloc(len + 16);
    if (!tmp)
        return;
    snprintf(tmp, len + 16, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "topocomm-trace: cannot write %s: %s\n", tmp, strerror(errno));
        free(tmp);
        return;
    }
    fprintf(f, "src,dst,bytes,msgs\n");
    long k = 0, pairs = 0;
    uint64_t tb = 0, tm = 0;
    for (int src = 0; src < nranks; src++) {
        for (int e = 0; e < counts[src]; e++, k++) {
            const int64_t *t = triples + 3 * k;
            fprintf(f, "%d,%lld,%lld,%lld\n", src, (long long)t[0], (long long)t[1],
                    (long long)t[2]);
            pairs++;
            tb += (uint64_t)t[1];
            tm += (uint64_t)t[2];
        }
    }
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    /* Rename so a reader never sees a half-written file. */
    if (bad || rename(tmp, path) != 0) {
        fprintf(stderr, "topocomm-trace: cannot write %s: %s\n", path, strerror(errno));
        remove(tmp);
    } else {
        fprintf(stderr,
                "topocomm-trace: wrote %s (%d ranks, %ld pairs, %llu bytes, %llu msgs)\n",
                path, nranks, pairs, (unsigned long long)tb, (unsigned long long)tm);
    }
    free(tmp);
}

void tc_write_output(void)
{
    long n = tc_table_len();
    tc_edge *mine = malloc(sizeof *mine * (size_t)(n ? n : 1));
    int64_t *send = malloc(sizeof *send * (size_t)(3 * (n ? n : 1)));
    int ok = mine && send;
    if (ok) {
        tc_table_export(mine);
        for (long i = 0; i < n; i++) {
            send[3 * i] = mine[i].dst;
            send[3 * i + 1] = (int64_t)mine[i].bytes;
            send[3 * i + 2] = (int64_t)mine[i].msgs;
        }
    }
    /* Every rank takes part in both collectives even if its own allocation
     * failed (it then contributes nothing), so nobody hangs. */
    int cnt = ok ? (int)(3 * n) : 0;
    int P = tc_world_size, me = tc_world_rank;
    int *counts = NULL, *displs = NULL;
    int64_t *all = NULL;
    long total = 0;
    if (me == 0) {
        counts = malloc(sizeof(int) * (size_t)P);
        displs = malloc(sizeof(int) * (size_t)P);
    }
    PMPI_Gather(&cnt, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (me == 0 && counts && displs) {
        for (int i = 0; i < P; i++) {
            displs[i] = (int)total;
            total += counts[i];
        }
        all = malloc(sizeof(int64_t) * (size_t)(total ? total : 1));
    }
    PMPI_Gatherv(send, cnt, MPI_INT64_T, all, counts, displs, MPI_INT64_T, 0, MPI_COMM_WORLD);
    if (me == 0) {
        if (all && counts) {
            for (int i = 0; i < P; i++)
                counts[i] /= 3;
            write_csv(P, counts, all);
        } else {
            fprintf(stderr, "topocomm-trace: out of memory gathering the trace\n");
        }
    }
    free(all);
    free(counts);
    free(displs);
    free(mine);
    free(send);
}

int MPI_Finalize(void)
{
    if (tc_world_rank >= 0)
        tc_write_output();
    tc_world_rank = -1; /* nothing is counted after this point */
    return PMPI_Finalize();
}
