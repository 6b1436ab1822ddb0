/* Where glibc's malloc serves a 24 MiB block in an MPI program: from the
 * heap once the accelerator has set the malloc thresholds
 * (mpi/lib/accel/state.c, settle_malloc), by mmap with glibc's defaults
 * (no block that large was freed before in this process, so its adaptive
 * threshold is still below). Rank 0 prints "malloc_state: heap" or
 * "malloc_state: mmap" (crates/cli/tests/accel.rs). */
#include <malloc.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    size_t before = mallinfo2().hblks;
    char *volatile p = malloc((size_t)24 << 20);
    if (!p) MPI_Abort(MPI_COMM_WORLD, 2);
    p[0] = 1;
    size_t after = mallinfo2().hblks;
    if (rank == 0) printf("malloc_state: %s\n", after > before ? "mmap" : "heap");
    free(p);
    MPI_Finalize();
    return 0;
}
