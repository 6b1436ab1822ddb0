/* Where each process runs: node index and PU.
 *
 * Real cluster: processes sharing memory (MPI_COMM_TYPE_SHARED) are one
 * node; nodes are numbered in the order of their lowest rank in comm; the PU
 * is the one the process runs on now (sched_getcpu; meaningful when the
 * launcher binds processes, which Open MPI does by default for <= 2 ranks
 * and both MPIs do with --bind-to core).
 *
 * Simulated cluster (TOPOCOMM_NODES and/or TOPOCOMM_RANKS_PER_NODE set): a
 * cluster of identical nodes simulated on one machine, for tests and
 * what-if runs. MPI_COMM_WORLD rank w is on node w / rpn (placement
 * "block", the default) or w % nodes (TOPOCOMM_PLACEMENT=round-robin), and
 * on the PU with OS index = its position among the ranks of that node (the
 * synthetic topologies of hwloc number PUs 0, 1, ... in tree order). */
#define _GNU_SOURCE
#include "shim.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Largest simulated node count or ranks per node (the products stay in a long). */
#define TC_SIM_MAX (1L << 20)

/* `name` as an integer in 1..=TC_SIM_MAX (strtol, errno and end checked); 0 when
 * unset or empty; -1 with the reason in err when it is something else. */
static long env_long(const char *name, char *err, int errlen)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end != '\0' || x < 1 || x > TC_SIM_MAX) {
        snprintf(err, (size_t)errlen, "%s='%s': expected an integer from 1 to %ld", name, v,
                 TC_SIM_MAX);
        return -1;
    }
    return x;
}

static int simulated(int *node, int *pu, int *nodes, char *err, int errlen)
{
    long n = env_long(TC_ENV_NODES, err, errlen);
    if (n < 0)
        return -1;
    long rpn = env_long(TC_ENV_RPN, err, errlen);
    if (rpn < 0)
        return -1;
    int w, size;
    PMPI_Comm_rank(MPI_COMM_WORLD, &w);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    if (!n)
        n = (size + rpn - 1) / rpn;
    if (!rpn)
        rpn = (size + n - 1) / n;
    if (n * rpn < size) {
        snprintf(err, (size_t)errlen, "%s=%ld x %s=%ld holds fewer than the %d ranks",
                 TC_ENV_NODES, n, TC_ENV_RPN, rpn, size);
        return -1;
    }
    const char *pl = getenv(TC_ENV_PLACEMENT);
    if (pl && *pl && strcmp(pl, "block") && strcmp(pl, "round-robin")) {
        snprintf(err, (size_t)errlen, "%s='%s': expected block or round-robin", TC_ENV_PLACEMENT,
                 pl);
        return -1;
    }
    if (pl && !strcmp(pl, "round-robin")) {
        *node = (int)(w % n);
        *pu = (int)(w / n);
    } else {
        *node = (int)(w / rpn);
        *pu = (int)(w % rpn);
    }
    *nodes = (int)n;
    return 0;
}

int tc_placement(MPI_Comm comm, int *node, int *pu, int *nodes, char *err, int errlen)
{
    const char *a = getenv(TC_ENV_NODES), *b = getenv(TC_ENV_RPN);
    if ((a && *a) || (b && *b))
        return simulated(node, pu, nodes, err, errlen);

    int rank, lrank, info[2] = {0, 0};
    MPI_Comm local, leaders;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
    PMPI_Comm_rank(local, &lrank);
    PMPI_Comm_split(comm, lrank == 0 ? 0 : MPI_UNDEFINED, rank, &leaders);
    if (leaders != MPI_COMM_NULL) {
        PMPI_Comm_rank(leaders, &info[0]);
        PMPI_Comm_size(leaders, &info[1]);
        PMPI_Comm_free(&leaders);
    }
    PMPI_Bcast(info, 2, MPI_INT, 0, local);
    PMPI_Comm_free(&local);
    *node = info[0];
    *nodes = info[1];
    int cpu = sched_getcpu();
    *pu = cpu < 0 ? 0 : cpu;
    return 0;
}
