/* Fortran bridge: the Fortran MPI entry points (mpif.h and `use mpi`)
 * implemented on top of the C MPI_ functions, so that PMPI tools preloaded
 * after this library (LD_PRELOAD=bridge.so:tool.so) see the calls of a
 * Fortran program even under Open MPI, whose own Fortran bindings call
 * PMPI_ directly. Handles are converted with the MPI_*_f2c/c2f functions
 * (their MPI_ names, so that a tool may wrap them too). mpi_f08 is not
 * covered. */
#ifndef TOPOCOMM_FORTRAN_BRIDGE_H
#define TOPOCOMM_FORTRAN_BRIDGE_H

#include <mpi.h>
#include <stddef.h>

_Static_assert(sizeof(MPI_Fint) == sizeof(int), "default Fortran INTEGER must be a C int");

/* Fortran LOGICAL values of gfortran, which both Debian MPIs are built with
 * (Open MPI OMPI_FORTRAN_VALUE_TRUE = 1, MPICH MPIR_F_TRUE = 1). */
#define TCF_TRUE 1
#define TCF_FALSE 0

/* Integers per status in a Fortran status array (MPI_STATUS_SIZE). */
#ifdef MPI_F_STATUS_SIZE
#define TCF_STATUS_SIZE MPI_F_STATUS_SIZE
#else
#define TCF_STATUS_SIZE ((int)(sizeof(MPI_Status) / sizeof(MPI_Fint)))
#endif

/* Defines the four Fortran manglings of `lower` (lower_, lower__, lower,
 * UPPER) as aliases of one function tcf_<lower>, whose definition follows
 * the macro:  FORT(mpi_send, MPI_SEND, (params)) { body }  */
#define FORT(lower, upper, params)                                                         \
    __attribute__((visibility("hidden"))) void tcf_##lower params;                        \
    void lower##_ params __attribute__((alias("tcf_" #lower)));                           \
    void lower##__ params __attribute__((alias("tcf_" #lower)));                          \
    void lower params __attribute__((alias("tcf_" #lower)));                              \
    void upper params __attribute__((alias("tcf_" #lower)));                              \
    void tcf_##lower params

/* Sets the Fortran ierror argument (which may be absent in mpif.h calls of
 * some compilers: NULL is tolerated). */
#define SETERR(ierr, rc)                                                                   \
    do {                                                                                   \
        if (ierr)                                                                          \
            *(ierr) = (MPI_Fint)(rc);                                                      \
    } while (0)

/* Helpers of the bridge, not exported. */
#pragma GCC visibility push(hidden)

/* The Fortran sentinel addresses (consts.c). */
void tcf_consts_init(void);
int tcf_is_bottom(const void *p);
int tcf_is_in_place(const void *p);
int tcf_is_status_ignore(const void *p);
int tcf_is_statuses_ignore(const void *p);
int tcf_is_unweighted(const void *p);
int tcf_is_weights_empty(const void *p);

/* A Fortran choice buffer as C: MPI_BOTTOM / MPI_IN_PLACE recognised. */
void *tcf_buf(void *p);
/* An int array argument that may be MPI_UNWEIGHTED / MPI_WEIGHTS_EMPTY. */
const int *tcf_weights(const MPI_Fint *p);

/* Scratch arrays: `stack` (of `stack_bytes`) when n*size fits, else malloc
 * (NULL on failure); tcf_tmp_free frees only what was malloc'ed. */
void *tcf_tmp(size_t n, size_t size, void *stack, size_t stack_bytes);
void tcf_tmp_free(void *p, void *stack);
#define TCF_NSTACK 16

/* Status in/out: the C status to pass for Fortran status `f` (`tmp` or
 * MPI_STATUS_IGNORE), and its conversion back. */
MPI_Status *tcf_status_in(MPI_Fint *f, MPI_Status *tmp);
void tcf_status_out(MPI_Fint *f, MPI_Status *c);

/* Fortran LOGICAL <-> C int. */
static inline int tcf_l2c(MPI_Fint v) { return v != TCF_FALSE; }
static inline MPI_Fint tcf_c2l(int v) { return v ? TCF_TRUE : TCF_FALSE; }

#pragma GCC visibility pop

#endif
