/* The tc_* collectives over the topocomm transport: broadcast, allreduce
 * (small and by blocks, in place), reduce to every root, the prefix
 * reductions, the reduce-scatter, allgather and alltoall and their v
 * variants, checked on every rank, and the bits of a double sum the same
 * on every rank.
 * Run: topocomm run -n 3 -- ./collectives */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <topocomm.h>

#define CHECK(call)                                                               \
    do {                                                                          \
        int rc_ = (call);                                                         \
        if (rc_ != TC_OK) {                                                       \
            fprintf(stderr, "%s failed (%d): %s\n", #call, rc_, tc_last_error()); \
            return 1;                                                             \
        }                                                                         \
    } while (0)
#define EXPECT(cond, ...)                         \
    do {                                          \
        if (!(cond)) {                            \
            fprintf(stderr, "rank %d: ", rank);   \
            fprintf(stderr, __VA_ARGS__);         \
            fputc('\n', stderr);                  \
            return 1;                             \
        }                                         \
    } while (0)

int main(void) {
    CHECK(tc_init());
    int rank = tc_rank(), size = tc_size();
    char word[16] = "";
    if (rank == size - 1) strcpy(word, "hello");
    CHECK(tc_bcast(word, sizeof word, size - 1));
    EXPECT(!strcmp(word, "hello"), "bcast gave '%s'", word);

    /* 10 and 5000 elements: the trees, then the blocks (>= 16 KiB). */
    size_t counts[] = {10, 5000};
    for (int k = 0; k < 2; k++) {
        size_t n = counts[k];
        long long *in = malloc(n * sizeof *in), *out = malloc(n * sizeof *out);
        if (!in || !out) return 1;
        for (size_t i = 0; i < n; i++) in[i] = (long long)(rank + 1) * (long long)i;
        long long tri = (long long)size * (size + 1) / 2;
        CHECK(tc_allreduce(in, out, n, TC_INT64, TC_SUM));
        for (size_t i = 0; i < n; i++) EXPECT(out[i] == tri * (long long)i, "allreduce[%zu]", i);
        CHECK(tc_allreduce(NULL, in, n, TC_INT64, TC_MAX)); /* in place */
        for (size_t i = 0; i < n; i++) EXPECT(in[i] == (long long)size * (long long)i, "max[%zu]", i);
        for (int root = 0; root < size; root++) {
            for (size_t i = 0; i < n; i++) in[i] = (long long)(rank + 1) * (long long)i;
            CHECK(tc_reduce(in, rank == root ? out : NULL, n, TC_INT64, TC_SUM, root));
            if (rank == root)
                for (size_t i = 0; i < n; i++) EXPECT(out[i] == tri * (long long)i, "reduce[%zu]", i);
        }
        free(in);
        free(out);
    }

    /* Prefix sums of rank + 1: (r + 1)(r + 2) / 2 through rank r. */
    long long one = rank + 1, pre = -1, ex = -1;
    CHECK(tc_scan(&one, &pre, 1, TC_INT64, TC_SUM));
    EXPECT(pre == (long long)(rank + 1) * (rank + 2) / 2, "scan gave %lld", pre);
    CHECK(tc_exscan(&one, &ex, 1, TC_INT64, TC_SUM));
    EXPECT(rank == 0 ? ex == -1 : ex == (long long)rank * (rank + 1) / 2, "exscan gave %lld", ex);

    /* Reduce-scatter: block d of rank r holds r + d; rank d gets the sum
     * over r, in 2 elements, and the same in place. */
    long long *blocks = malloc(sizeof(long long) * 2 * (size_t)size), mine[2];
    if (!blocks) return 1;
    long long want = (long long)size * (size - 1) / 2 + (long long)size * rank;
    for (int d = 0; d < size; d++) blocks[2 * d] = blocks[2 * d + 1] = rank + d;
    CHECK(tc_reduce_scatter_block(blocks, mine, 2, TC_INT64, TC_SUM));
    EXPECT(mine[0] == want && mine[1] == want, "reduce_scatter_block gave %lld", mine[0]);
    CHECK(tc_reduce_scatter_block(NULL, blocks, 2, TC_INT64, TC_SUM));
    EXPECT(blocks[0] == want && blocks[1] == want, "in place gave %lld", blocks[0]);
    free(blocks);

    /* The v variants: rank r contributes r + 1 bytes of value r, placed
     * in reverse rank order (rank size-1 first). */
    size_t lens[64], displs[64], total = 0;
    if (size > 64) return 2;
    for (int r = size - 1; r >= 0; r--) {
        lens[r] = (size_t)r + 1;
        displs[r] = total;
        total += lens[r];
    }
    unsigned char mine_v[64], *gathered = malloc(total), *back = malloc(total);
    if (!gathered || !back) return 1;
    memset(mine_v, rank, sizeof mine_v);
    CHECK(tc_allgatherv(mine_v, lens[rank], gathered, lens, displs));
    for (int r = 0; r < size; r++)
        for (size_t i = 0; i < lens[r]; i++)
            EXPECT(gathered[displs[r] + i] == r, "allgatherv block %d", r);
    memset(back, 0xff, total);
    CHECK(tc_gatherv(mine_v, lens[rank], rank == 0 ? back : NULL, lens, displs, 0));
    if (rank == 0) EXPECT(!memcmp(back, gathered, total), "gatherv differs from allgatherv");
    unsigned char got_v[64];
    CHECK(tc_scatterv(rank == 0 ? gathered : NULL, lens, displs, got_v, lens[rank], 0));
    for (size_t i = 0; i < lens[rank]; i++) EXPECT(got_v[i] == rank, "scatterv byte %zu", i);
    /* Alltoallv: one byte rank * 16 + d to each rank d, none to itself. */
    size_t sl[64], sd[64], rl[64], rd[64];
    unsigned char out_v[64], in_v[64];
    for (int d = 0; d < size; d++) {
        sl[d] = rl[d] = d != rank;
        sd[d] = rd[d] = (size_t)d;
        out_v[d] = (unsigned char)(rank * 16 + d);
        in_v[d] = 0xff;
    }
    CHECK(tc_alltoallv(out_v, sl, sd, in_v, rl, rd));
    for (int r = 0; r < size; r++)
        EXPECT(in_v[r] == (r == rank ? 0xff : r * 16 + rank), "alltoallv from %d: %d", r, in_v[r]);
    free(gathered);
    free(back);

    double x = 1.0 / (rank + 3), sum, all[64];
    CHECK(tc_allreduce(&x, &sum, 1, TC_DOUBLE, TC_SUM));
    CHECK(tc_allgather(&sum, sizeof sum, all));
    for (int r = 0; r < size; r++) EXPECT(!memcmp(&all[r], &sum, sizeof sum), "bits differ");

    int *send = malloc(sizeof(int) * (size_t)size), *got = malloc(sizeof(int) * (size_t)size);
    if (!send || !got) return 1;
    for (int d = 0; d < size; d++) send[d] = rank * 100 + d;
    CHECK(tc_alltoall(send, sizeof(int), got));
    for (int r = 0; r < size; r++) EXPECT(got[r] == r * 100 + rank, "alltoall[%d] = %d", r, got[r]);
    EXPECT(tc_bcast(word, 4, size) == TC_ERR_INVALID_ARGUMENT, "a bad root was taken");
    EXPECT(strstr(tc_last_error(), "out of range") != NULL, "%s", tc_last_error());
    EXPECT(tc_send_x(word, 1, 0, 1, 65535, 0) == TC_ERR_INVALID_ARGUMENT,
           "the collectives' context was taken");
    EXPECT(tc_allreduce(&x, &sum, 1, 99, TC_SUM) == TC_ERR_INVALID_ARGUMENT &&
               strstr(tc_last_error(), "datatype 99") != NULL,
           "%s", tc_last_error());
    free(send);
    free(got);
    if (rank == 0) printf("collectives ok: %d ranks, sum %.17g\n", size, sum);
    return tc_finalize() == TC_OK ? 0 : 1;
}
