/* Fortran bridge: communicator creation and destruction (topology
 * constructors included, so that a reorder shim sees them). */
#include "bridge.h"

/* Stores the new communicator (on success) and the error code. `c` is a
 * pointer: it is read after the call that fills it (the order in which
 * arguments are evaluated is unspecified). */
static void newcomm(int rc, const MPI_Comm *c, MPI_Fint *fcomm, MPI_Fint *ierr)
{
    if (rc == MPI_SUCCESS)
        *fcomm = MPI_Comm_c2f(*c);
    SETERR(ierr, rc);
}

/* Fortran LOGICAL array of n -> C ints (`stack` when it fits). */
static int *logicals(int n, const MPI_Fint *f, int *stack)
{
    int *c = tcf_tmp((size_t)(n > 0 ? n : 0), sizeof(int), stack, TCF_NSTACK * sizeof(int));
    if (c)
        for (int i = 0; i < n; i++)
            c[i] = tcf_l2c(f[i]);
    return c;
}

FORT(mpi_comm_dup, MPI_COMM_DUP, (MPI_Fint *comm, MPI_Fint *newc, MPI_Fint *ierr))
{
    MPI_Comm c = MPI_COMM_NULL;
    newcomm(MPI_Comm_dup(MPI_Comm_f2c(*comm), &c), &c, newc, ierr);
}

FORT(mpi_comm_split, MPI_COMM_SPLIT,
     (MPI_Fint *comm, MPI_Fint *color, MPI_Fint *key, MPI_Fint *newc, MPI_Fint *ierr))
{
    MPI_Comm c = MPI_COMM_NULL;
    newcomm(MPI_Comm_split(MPI_Comm_f2c(*comm), (int)*color, (int)*key, &c), &c, newc, ierr);
}

FORT(mpi_comm_split_type, MPI_COMM_SPLIT_TYPE,
     (MPI_Fint *comm, MPI_Fint *type, MPI_Fint *key, MPI_Fint *info, MPI_Fint *newc,
      MPI_Fint *ierr))
{
    MPI_Comm c = MPI_COMM_NULL;
    newcomm(MPI_Comm_split_type(MPI_Comm_f2c(*comm), (int)*type, (int)*key, MPI_Info_f2c(*info),
                                &c), &c, newc, ierr);
}

FORT(mpi_comm_create, MPI_COMM_CREATE,
     (MPI_Fint *comm, MPI_Fint *group, MPI_Fint *newc, MPI_Fint *ierr))
{
    MPI_Comm c = MPI_COMM_NULL;
    newcomm(MPI_Comm_create(MPI_Comm_f2c(*comm), MPI_Group_f2c(*group), &c), &c, newc, ierr);
}

FORT(mpi_comm_create_group, MPI_COMM_CREATE_GROUP,
     (MPI_Fint *comm, MPI_Fint *group, MPI_Fint *tag, MPI_Fint *newc, MPI_Fint *ierr))
{
    MPI_Comm c = MPI_COMM_NULL;
    newcomm(MPI_Comm_create_group(MPI_Comm_f2c(*comm), MPI_Group_f2c(*group), (int)*tag, &c), &c,
            newc, ierr);
}

FORT(mpi_comm_free, MPI_COMM_FREE, (MPI_Fint *comm, MPI_Fint *ierr))
{
    MPI_Comm c = MPI_Comm_f2c(*comm);
    int rc = MPI_Comm_free(&c);
    if (rc == MPI_SUCCESS)
        *comm = MPI_Comm_c2f(c);
    SETERR(ierr, rc);
}

FORT(mpi_cart_create, MPI_CART_CREATE,
     (MPI_Fint *comm, MPI_Fint *ndims, MPI_Fint *dims, MPI_Fint *periods, MPI_Fint *reorder,
      MPI_Fint *newc, MPI_Fint *ierr))
{
    int n = (int)*ndims, stack[TCF_NSTACK], *p = logicals(n, periods, stack);
    MPI_Comm c = MPI_COMM_NULL;
    int rc = p ? MPI_Cart_create(MPI_Comm_f2c(*comm), n, dims, p, tcf_l2c(*reorder), &c)
               : MPI_ERR_NO_MEM;
    tcf_tmp_free(p, stack);
    newcomm(rc, &c, newc, ierr);
}

FORT(mpi_cart_sub, MPI_CART_SUB,
     (MPI_Fint *comm, MPI_Fint *remain, MPI_Fint *newc, MPI_Fint *ierr))
{
    MPI_Comm cc = MPI_Comm_f2c(*comm), c = MPI_COMM_NULL;
    int n = 0, rc = MPI_Cartdim_get(cc, &n);
    if (rc != MPI_SUCCESS) {
        SETERR(ierr, rc);
        return;
    }
    int stack[TCF_NSTACK], *r = logicals(n, remain, stack);
    rc = r ? MPI_Cart_sub(cc, r, &c) : MPI_ERR_NO_MEM;
    tcf_tmp_free(r, stack);
    newcomm(rc, &c, newc, ierr);
}

FORT(mpi_graph_create, MPI_GRAPH_CREATE,
     (MPI_Fint *comm, MPI_Fint *nnodes, MPI_Fint *index, MPI_Fint *edges, MPI_Fint *reorder,
      MPI_Fint *newc, MPI_Fint *ierr))
{
    MPI_Comm c = MPI_COMM_NULL;
    newcomm(MPI_Graph_create(MPI_Comm_f2c(*comm), (int)*nnodes, index, edges, tcf_l2c(*reorder),
                             &c), &c, newc, ierr);
}

FORT(mpi_dist_graph_create, MPI_DIST_GRAPH_CREATE,
     (MPI_Fint *comm, MPI_Fint *n, MPI_Fint *sources, MPI_Fint *degrees, MPI_Fint *dests,
      MPI_Fint *weights, MPI_Fint *info, MPI_Fint *reorder, MPI_Fint *newc, MPI_Fint *ierr))
{
    MPI_Comm c = MPI_COMM_NULL;
    newcomm(MPI_Dist_graph_create(MPI_Comm_f2c(*comm), (int)*n, sources, degrees, dests,
                                  tcf_weights(weights), MPI_Info_f2c(*info), tcf_l2c(*reorder),
                                  &c), &c, newc, ierr);
}

FORT(mpi_dist_graph_create_adjacent, MPI_DIST_GRAPH_CREATE_ADJACENT,
     (MPI_Fint *comm, MPI_Fint *indeg, MPI_Fint *sources, MPI_Fint *sweights, MPI_Fint *outdeg,
      MPI_Fint *dests, MPI_Fint *dweights, MPI_Fint *info, MPI_Fint *reorder, MPI_Fint *newc,
      MPI_Fint *ierr))
{
    MPI_Comm c = MPI_COMM_NULL;
    newcomm(MPI_Dist_graph_create_adjacent(MPI_Comm_f2c(*comm), (int)*indeg, sources,
                                           tcf_weights(sweights), (int)*outdeg, dests,
                                           tcf_weights(dweights), MPI_Info_f2c(*info),
                                           tcf_l2c(*reorder), &c), &c, newc, ierr);
}

FORT(mpi_intercomm_create, MPI_INTERCOMM_CREATE,
     (MPI_Fint *local, MPI_Fint *local_leader, MPI_Fint *peer, MPI_Fint *remote_leader,
      MPI_Fint *tag, MPI_Fint *newc, MPI_Fint *ierr))
{
    MPI_Comm c = MPI_COMM_NULL;
    newcomm(MPI_Intercomm_create(MPI_Comm_f2c(*local), (int)*local_leader, MPI_Comm_f2c(*peer),
                                 (int)*remote_leader, (int)*tag, &c), &c, newc, ierr);
}

FORT(mpi_intercomm_merge, MPI_INTERCOMM_MERGE,
     (MPI_Fint *inter, MPI_Fint *high, MPI_Fint *newc, MPI_Fint *ierr))
{
    MPI_Comm c = MPI_COMM_NULL;
    newcomm(MPI_Intercomm_merge(MPI_Comm_f2c(*inter), tcf_l2c(*high), &c), &c, newc, ierr);
}
