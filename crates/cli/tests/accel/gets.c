/* Large reductions by gets under `topocomm accel` (crates/cli/tests/accel.rs,
 * mpi/lib/accel/gets.c): allreduces of 3 MiB, first in place or not as
 * argv[1] says (1 / 0), then the other way, and reduces of 3 MiB to the
 * first and the last rank (in place at the root, then not), and a
 * reduce-scatter of as much (in place as argv[1] says), sums of small
 * integers as doubles (exact in any order) checked element by element.
 * Run with TOPOCOMM_FAIL_PUTS=RANK:K, rank RANK's K-th single-copy get or
 * put of the job fails as if the kernel refused it, at a place fixed by K
 * (the first call's pieces: n - 1 gets, then the puts), and that member
 * finishes by messages; the results must not change. Prints
 * "accel_gets: ok" on rank 0 when every check passed; a failure prints the
 * check and aborts. Plain standard MPI. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

#define CHECK(cond, ...)                                                                         \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "accel_gets: rank %d: check failed at line %d: ", rank, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fprintf(stderr, "\n");                                                             \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                      \
        }                                                                                      \
    } while (0)

enum { M = 3 * 131072 + 5 }; /* 3 MiB and 5 doubles: uneven blocks, several pieces each */

static double contribution(int i) { return (double)((i % 1000) * (rank + 1)); }
static double sum_of(int i) { return (double)((i % 1000) * (size * (size + 1) / 2)); }

static void check_sums(const double *out, const char *what) {
    for (int i = 0; i < M; i++)
        CHECK(out[i] == sum_of(i), "%s: [%d] = %.17g, want %.17g", what, i, out[i], sum_of(i));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int first_in_place = argc > 1 && atoi(argv[1]) == 1;
    double *in = malloc(M * sizeof *in), *out = malloc(M * sizeof *out);
    CHECK(in && out, "no memory");
    for (int i = 0; i < M; i++) in[i] = contribution(i);
    for (int k = 0; k < 2; k++) {
        int ip = k == 0 ? first_in_place : !first_in_place;
        for (int i = 0; i < M; i++) out[i] = ip ? in[i] : -1.0;
        MPI_Allreduce(ip ? MPI_IN_PLACE : in, out, M, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        check_sums(out, ip ? "allreduce in place" : "allreduce");
    }
    int roots[2] = {0, size - 1};
    for (int k = 0; k < 2; k++) {
        int root = roots[k], ip = rank == root && k == 0;
        for (int i = 0; i < M; i++) out[i] = ip ? in[i] : -1.0;
        MPI_Reduce(ip ? MPI_IN_PLACE : in, rank == root ? out : NULL, M, MPI_DOUBLE, MPI_SUM, root,
                   MPI_COMM_WORLD);
        if (rank == root) check_sums(out, ip ? "reduce in place" : "reduce");
    }
    /* A reduce-scatter of the same vector, in place as argv[1] says:
     * member r's block is elements [r * M / size, (r + 1) * M / size). */
    {
        int each = M / size, ip = first_in_place;
        double *v = malloc((size_t)each * size * sizeof *v);
        CHECK(v, "no memory");
        for (int i = 0; i < each * size; i++) v[i] = contribution(i);
        for (int i = 0; i < each; i++) out[i] = -1.0;
        MPI_Reduce_scatter_block(ip ? MPI_IN_PLACE : v, ip ? v : out, each, MPI_DOUBLE, MPI_SUM,
                                 MPI_COMM_WORLD);
        const double *got = ip ? v : out;
        for (int i = 0; i < each; i++)
            CHECK(got[i] == sum_of(rank * each + i), "reduce_scatter_block: [%d] = %.17g", i,
                  got[i]);
        free(v);
    }
    /* The contributions are untouched (nobody wrote into them). */
    for (int i = 0; i < M; i++)
        CHECK(in[i] == contribution(i), "contribution changed at [%d]: %.17g", i, in[i]);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("accel_gets: ok (%d ranks)\n", size);
    free(in);
    free(out);
    MPI_Finalize();
    return 0;
}
