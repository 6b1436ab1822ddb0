/* The Fortran sentinels (MPI_BOTTOM, MPI_IN_PLACE, MPI_STATUS_IGNORE,
 * MPI_STATUSES_IGNORE, MPI_UNWEIGHTED, MPI_WEIGHTS_EMPTY) are variables in
 * common blocks: a Fortran program passes their addresses. The addresses
 * are found with dlsym(RTLD_DEFAULT), which returns the definition every
 * module refers to (the program's own copy of a common block, if it has one,
 * else the first MPI library defining it), in every name mangling:
 *  - Open MPI: one common block per sentinel, /mpi_fortran_bottom/,
 *    /mpi_fortran_in_place/, /mpi_fortran_status_ignore/,
 *    /mpi_fortran_statuses_ignore/, /mpi_fortran_unweighted/,
 *    /mpi_fortran_weights_empty/ (defined in libmpi); its C
 *    MPI_F_STATUS(ES)_IGNORE point at the status ones.
 *  - MPICH: COMMON /MPIPRIV1/ MPI_BOTTOM, MPI_IN_PLACE, MPI_STATUS_IGNORE;
 *    /MPIPRIV2/ MPI_STATUSES_IGNORE, ...; /MPIFCMB5/ MPI_UNWEIGHTED;
 *    /MPIFCMB9/ MPI_WEIGHTS_EMPTY (mpif.h and the mpi module alike). Its C
 *    MPI_F_STATUS(ES)_IGNORE are set by mpirinitf_, which MPICH's own
 *    mpi_init_ calls and which the bridge therefore calls too. */
#define _GNU_SOURCE
#include "bridge.h"

#include <ctype.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { K_BOTTOM, K_IN_PLACE, K_STATUS_IGNORE, K_STATUSES_IGNORE, K_UNWEIGHTED, K_WEIGHTS_EMPTY, K_N };
#define MAXADDR 12

static const void *addrs[K_N][MAXADDR];
static int naddr[K_N];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void add(int k, const void *p)
{
    if (!p)
        return;
    for (int i = 0; i < naddr[k]; i++)
        if (addrs[k][i] == p)
            return;
    if (naddr[k] < MAXADDR)
        addrs[k][naddr[k]++] = p;
}

/* Adds base_+off, base__+off, base+off, BASE+off (off in MPI_Fint). */
static void add_sym(int k, const char *base, size_t off)
{
    char name[64];
    for (int m = 0; m < 4; m++) {
        size_t n = strlen(base);
        if (n + 3 > sizeof name)
            return;
        memcpy(name, base, n + 1);
        if (m == 0)
            strcat(name, "_");
        else if (m == 1)
            strcat(name, "__");
        else if (m == 3)
            for (size_t i = 0; i < n; i++)
                name[i] = (char)toupper((unsigned char)name[i]);
        MPI_Fint *p = dlsym(RTLD_DEFAULT, name);
        if (p)
            add(k, p + off);
    }
}

static void init(void)
{
#if defined(MPICH)
    /* What MPICH's mpi_init_ does before MPI_Init: let its Fortran side
     * register the common blocks (sets the C MPI_F_STATUS(ES)_IGNORE). */
    int *need = dlsym(RTLD_DEFAULT, "MPIR_F_NeedInit");
    void (*rinit)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "mpirinitf_");
    if (need && *need && rinit) {
        rinit();
        *need = 0;
    }
    add_sym(K_BOTTOM, "mpipriv1", 0);
    add_sym(K_IN_PLACE, "mpipriv1", 1);
    add_sym(K_STATUS_IGNORE, "mpipriv1", 2);
    add_sym(K_STATUSES_IGNORE, "mpipriv2", 0);
    add_sym(K_UNWEIGHTED, "mpifcmb5", 0);
    add_sym(K_WEIGHTS_EMPTY, "mpifcmb9", 0);
#else
    add_sym(K_BOTTOM, "mpi_fortran_bottom", 0);
    add_sym(K_IN_PLACE, "mpi_fortran_in_place", 0);
    add_sym(K_STATUS_IGNORE, "mpi_fortran_status_ignore", 0);
    add_sym(K_STATUSES_IGNORE, "mpi_fortran_statuses_ignore", 0);
    add_sym(K_UNWEIGHTED, "mpi_fortran_unweighted", 0);
    add_sym(K_WEIGHTS_EMPTY, "mpi_fortran_weights_empty", 0);
#endif
    add(K_STATUS_IGNORE, MPI_F_STATUS_IGNORE);
    add(K_STATUSES_IGNORE, MPI_F_STATUSES_IGNORE);
    const char *v = getenv("TOPOCOMM_FORTRAN_DEBUG");
    if (v && *v && strcmp(v, "0")) {
        static const char *names[K_N] = {"MPI_BOTTOM",          "MPI_IN_PLACE",
                                         "MPI_STATUS_IGNORE",   "MPI_STATUSES_IGNORE",
                                         "MPI_UNWEIGHTED",      "MPI_WEIGHTS_EMPTY"};
        for (int k = 0; k < K_N; k++) {
            fprintf(stderr, "topocomm-fortran: %s at", names[k]);
            for (int i = 0; i < naddr[k]; i++)
                fprintf(stderr, " %p", addrs[k][i]);
            fprintf(stderr, "%s\n", naddr[k] ? "" : " (not found)");
        }
    }
}

void tcf_consts_init(void) { pthread_once(&once, init); }

static int is(int k, const void *p)
{
    if (!p)
        return 0;
    tcf_consts_init();
    for (int i = 0; i < naddr[k]; i++)
        if (addrs[k][i] == p)
            return 1;
    return 0;
}

int tcf_is_bottom(const void *p) { return is(K_BOTTOM, p); }
int tcf_is_in_place(const void *p) { return is(K_IN_PLACE, p); }
int tcf_is_status_ignore(const void *p) { return is(K_STATUS_IGNORE, p); }
int tcf_is_statuses_ignore(const void *p) { return is(K_STATUSES_IGNORE, p); }
int tcf_is_unweighted(const void *p) { return is(K_UNWEIGHTED, p); }
int tcf_is_weights_empty(const void *p) { return is(K_WEIGHTS_EMPTY, p); }

void *tcf_buf(void *p)
{
    if (tcf_is_bottom(p))
        return MPI_BOTTOM;
    if (tcf_is_in_place(p))
        return MPI_IN_PLACE;
    return p;
}

const int *tcf_weights(const MPI_Fint *p)
{
    if (tcf_is_unweighted(p))
        return MPI_UNWEIGHTED;
    if (tcf_is_weights_empty(p))
        return MPI_WEIGHTS_EMPTY;
    return p;
}

void *tcf_tmp(size_t n, size_t size, void *stack, size_t stack_bytes)
{
    if (n * size <= stack_bytes)
        return stack;
    size_t bytes = n * size;
    return malloc(bytes > 0 ? bytes : 1);
}

void tcf_tmp_free(void *p, void *stack)
{
    if (p != stack)
        free(p);
}

MPI_Status *tcf_status_in(MPI_Fint *f, MPI_Status *tmp)
{
    if (f == NULL || tcf_is_status_ignore(f))
        return MPI_STATUS_IGNORE;
    /* Start from the application's values: a call that leaves a field
     * alone (MPI_ERROR, in every single-completion call) must leave the
     * Fortran status's field alone too. */
    MPI_Status_f2c(f, tmp);
    return tmp;
}

void tcf_status_out(MPI_Fint *f, MPI_Status *c)
{
    if (c != MPI_STATUS_IGNORE)
        MPI_Status_c2f(c, f);
}
