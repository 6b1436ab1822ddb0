/* Ping-pong between ranks 0 and 1 over the topocomm transport, checking the
 * data, a truncation error and a probe. Run: topocomm run -n 2 -- ./pingpong */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <topocomm.h>

#define CHECK(call)                                                           \
    do {                                                                      \
        int rc_ = (call);                                                     \
        if (rc_ != TC_OK) {                                                   \
            fprintf(stderr, "%s failed (%d): %s\n", #call, rc_, tc_last_error()); \
            return 1;                                                         \
        }                                                                     \
    } while (0)

int main(void) {
    CHECK(tc_init());
    int rank = tc_rank(), size = tc_size();
    if (size < 2) {
        fprintf(stderr, "pingpong needs 2 ranks (got %d)\n", size);
        return 2;
    }
    size_t sizes[] = {0, 8, 4096, 100000, 3 << 20};
    size_t max = 3 << 20;
    unsigned char *buf = malloc(max), *want = malloc(max);
    if (!buf || !want) return 1;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        for (size_t i = 0; i < n; i++) want[i] = (unsigned char)(i * 7 + s);
        if (rank == 0) {
            memcpy(buf, want, n);
            CHECK(tc_send(buf, n, 1, (int)s));
            tc_status st;
            memset(buf, 0, n);
            CHECK(tc_recv(buf, max, 1, (int)s, &st));
            if (st.count != n || st.source != 1 || memcmp(buf, want, n) != 0) {
                fprintf(stderr, "size %zu: bad echo\n", n);
                return 1;
            }
        } else if (rank == 1) {
            tc_request r;
            tc_status st;
            CHECK(tc_irecv(buf, max, 0, TC_ANY_TAG, &r));
            CHECK(tc_wait(&r, &st));
            if (st.count != n || st.tag != (int)s || memcmp(buf, want, n) != 0) {
                fprintf(stderr, "size %zu: bad data\n", n);
                return 1;
            }
            CHECK(tc_isend(buf, n, 0, (int)s, &r));
            CHECK(tc_wait(&r, NULL));
        }
    }
    /* Truncation is reported, and the channel keeps working. */
    if (rank == 0) {
        CHECK(tc_send(want, 64, 1, 99));
    } else if (rank == 1) {
        tc_status st;
        CHECK(tc_probe(0, 99, &st));
        if (st.count != 64) return 1;
        int rc = tc_recv(buf, 16, 0, 99, &st);
        if (rc != TC_ERR_TRUNCATED) {
            fprintf(stderr, "expected TC_ERR_TRUNCATED, got %d\n", rc);
            return 1;
        }
        printf("truncation: %s\n", tc_last_error());
    }
    CHECK(tc_barrier());
    if (rank == 0) printf("pingpong ok: %d ranks\n", size);
    free(buf);
    free(want);
    CHECK(tc_finalize());
    return 0;
}
