/* Prints the current value of MPI_T control variables, one "name=value" line
 * each, for every variable whose name contains one of the arguments (all
 * variables if none). Used to check that a tuned settings file really takes
 * effect inside the MPI library (Open MPI exposes its MCA parameters and MPICH
 * its CVARs through MPI_T). Run with one process. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static int wanted(const char *name, int argc, char **argv) {
    if (argc < 2) return 1;
    for (int i = 1; i < argc; i++)
        if (strstr(name, argv[i])) return 1;
    return 0;
}

/* Name of value v in enumeration en, or NULL. */
static const char *enum_name(MPI_T_enum en, int v, char *buf, int len) {
    int num = 0;
    char ename[256];
    int elen = sizeof ename;
    if (en == MPI_T_ENUM_NULL || MPI_T_enum_get_info(en, &num, ename, &elen) != MPI_SUCCESS) return NULL;
    for (int i = 0; i < num; i++) {
        int value, l = len;
        if (MPI_T_enum_get_item(en, i, &value, buf, &l) == MPI_SUCCESS && value == v) return buf;
    }
    return NULL;
}

static void print_value(int idx, const char *name, MPI_Datatype dt, MPI_T_enum en, int bind) {
    MPI_T_cvar_handle h;
    int count = 0;
    if (bind != MPI_T_BIND_NO_OBJECT) return; /* needs an object; not a global setting */
    if (MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) != MPI_SUCCESS) return;
    if (count == 1 && (dt == MPI_INT || dt == MPI_UNSIGNED)) {
        int v = 0;
        char item[256];
        const char *label;
        if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS) {
            label = enum_name(en, v, item, sizeof item);
            if (label) printf("%s=%s\n", name, label);
            else printf("%s=%d\n", name, v);
        }
    } else if (count == 1 && (dt == MPI_UNSIGNED_LONG || dt == MPI_UNSIGNED_LONG_LONG ||
                              dt == MPI_LONG || dt == MPI_LONG_LONG || dt == MPI_COUNT)) {
        unsigned long long v = 0;
        if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS) printf("%s=%llu\n", name, v);
    } else if (dt == MPI_CHAR && count > 0 && count < 4096) {
        char buf[4096] = {0};
        if (MPI_T_cvar_read(h, buf) == MPI_SUCCESS) printf("%s=%s\n", name, buf);
    }
    MPI_T_cvar_handle_free(&h);
}

int main(int argc, char **argv) {
    int provided, n = 0;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "tc_mpit_cvars: MPI_T_init_thread failed\n");
        return 1;
    }
    MPI_Init(&argc, &argv);
    MPI_T_cvar_get_num(&n);
    for (int i = 0; i < n; i++) {
        char name[256], desc[1];
        int name_len = sizeof name, desc_len = 0, verbosity, bind, scope;
        MPI_Datatype dt;
        MPI_T_enum en;
        if (MPI_T_cvar_get_info(i, name, &name_len, &verbosity, &dt, &en, desc, &desc_len, &bind,
                                &scope) != MPI_SUCCESS)
            continue;
        if (wanted(name, argc, argv)) print_value(i, name, dt, en, bind);
    }
    fflush(stdout);
    /* MPI_T_finalize before MPI_Finalize: Open MPI 4.1 crashes the other way round. */
    MPI_T_finalize();
    MPI_Finalize();
    return 0;
}
