/* Output helpers shared by the standard-MPI benchmarks (std_p2p.c,
 * std_coll.c): the MPI library's version string and JSON string quoting. */
#ifndef TOPOCOMM_STD_OUT_H
#define TOPOCOMM_STD_OUT_H

#include <mpi.h>
#include <stdio.h>

/* MPI_Get_library_version into lib (MPI_MAX_LIBRARY_VERSION_STRING bytes),
 * trailing blanks and newlines removed; the MPI standard version in *ver,
 * *sub. */
static inline void std_library(char *lib, int *ver, int *sub) {
    int len = 0;
    MPI_Get_library_version(lib, &len);
    lib[len < MPI_MAX_LIBRARY_VERSION_STRING ? len : MPI_MAX_LIBRARY_VERSION_STRING - 1] = '\0';
    while (len > 0 && (lib[len - 1] == '\n' || lib[len - 1] == ' ' || lib[len - 1] == '\0'))
        lib[--len] = '\0';
    MPI_Get_version(ver, sub);
}

/* Prints s as a JSON string. */
static inline void json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\t')
            fputs("\\t", stdout);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

#endif
