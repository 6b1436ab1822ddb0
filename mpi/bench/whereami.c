/* Where does each rank run? Rank 0 prints one line per rank of
 * MPI_COMM_WORLD, in rank order, on stdout:
 *
 *   rank R host H affinity LIST
 *
 * LIST is the CPU affinity of that process as the kernel reports it
 * (sched_getaffinity, OS CPU numbers, "0", "0-3", "0,2" style). Used to check
 * that launcher files written by `topocomm map` (rankfile, Hydra machinefile)
 * put each rank on the PU the mapping chose. */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "affinity.h"

#define TEXT 256

int main(int argc, char **argv)
{
    int rank, size;
    char me[2 * TEXT];
    char host[TEXT], aff[TEXT];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (gethostname(host, sizeof host))
        snprintf(host, sizeof host, "?");
    host[sizeof host - 1] = '\0';
    affinity_text(aff, sizeof aff);
    memset(me, 0, sizeof me);
    snprintf(me, sizeof me, "rank %d host %s affinity %s", rank, host, aff);
    /* Only rank 0 needs the buffer; on the heap (many ranks). */
    char *all = rank == 0 ? malloc((size_t)size * 2 * TEXT) : NULL;
    if (rank == 0 && !all) {
        fprintf(stderr, "whereami: out of memory for %d ranks\n", size);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Gather(me, 2 * TEXT, MPI_CHAR, all, 2 * TEXT, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < size; r++)
            printf("%s\n", all + (size_t)r * 2 * TEXT);
        fflush(stdout);
        free(all);
    }
    MPI_Finalize();
    return 0;
}
