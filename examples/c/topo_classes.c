/* Prints the locality class of PU pairs through the topocomm C API.
 * Usage: topo_classes TOPOLOGY P Q [P Q ...]
 * Build: cc -Wall -Wextra -Werror topo_classes.c $(pkg-config --cflags --libs topocomm) */
#include <stdio.h>
#include <stdlib.h>
#include <topocomm.h>

int main(int argc, char **argv) {
    if (argc < 2 || argc % 2 != 0) {
        fprintf(stderr, "usage: %s TOPOLOGY P Q [P Q ...]\n", argv[0]);
        return 2;
    }
    tc_machine *m = NULL;
    if (tc_machine_load(argv[1], &m) != TC_OK) {
        fprintf(stderr, "error: %s\n", tc_last_error());
        return 1;
    }
    printf("topocomm %s, %d PUs\n", tc_version(), tc_machine_num_pus(m));
    int status = 0;
    for (int i = 2; i + 1 < argc; i += 2) {
        char cls[32];
        unsigned p = (unsigned)strtoul(argv[i], NULL, 10), q = (unsigned)strtoul(argv[i + 1], NULL, 10);
        int rc = tc_pair_class(m, p, q, cls, sizeof cls);
        if (rc == TC_OK) {
            printf("%u,%u %s\n", p, q, cls);
        } else {
            printf("%u,%u error %d: %s\n", p, q, rc, tc_last_error());
            status = 1;
        }
    }
    tc_machine_free(m);
    return status;
}
