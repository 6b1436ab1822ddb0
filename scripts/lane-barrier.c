/*
 * lane-barrier: the time of a topocomm lane barrier (tc_lane_exchange on
 * lane 0 with no data, every member waited out: what tc_barrier and the
 * accelerator's MPI_Barrier run), next to scripts/crowded-barrier.c's bare
 * barrier with the same waiting rule. Prints rank 0's median of 7 rounds of
 * 100000 barriers, in microseconds per barrier.
 *
 *   cc -O2 -Wall -Wextra -Werror -Iinclude scripts/lane-barrier.c \
 *      -Ltarget/release -ltopocomm -Wl,-rpath,$PWD/target/release -o lane-barrier
 *   topocomm run -n 4 -- ./lane-barrier            (4 ranks on the CPUs there are)
 *   taskset -c 0 topocomm run -n 2 -- ./lane-barrier (2 ranks on one CPU: every
 *       barrier is one sched_yield hand-over; compare with
 *       taskset -c 0 ./crowded-barrier 2 0 1)
 *
 * An optional argument, a budget in seconds per call (e.g. 50e-6, as the
 * accelerator's slices), calls again until the barrier completes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <topocomm.h>

#define ROUNDS 7
#define BARRIERS 100000

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    double budget = 0;
    if (argc > 2 || (argc == 2 && (budget = strtod(argv[1], NULL)) <= 0)) {
        fprintf(stderr, "usage: lane-barrier [budget seconds > 0]\n");
        return 2;
    }
    if (tc_init() != TC_OK) {
        fprintf(stderr, "lane-barrier: tc_init: %s\n", tc_last_error());
        return 1;
    }
    double us[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now();
        for (int i = 0; i < BARRIERS; i++) {
            int flag = 0;
            do {
                if (tc_lane_exchange(0, NULL, 0, 0, TC_LANE_ALL_BY_ALL, budget, &flag, NULL) != TC_OK) {
                    fprintf(stderr, "lane-barrier: tc_lane_exchange: %s\n", tc_last_error());
                    return 1;
                }
            } while (!flag);
        }
        us[r] = (now() - t0) / BARRIERS * 1e6;
    }
    qsort(us, ROUNDS, sizeof us[0], cmp);
    if (tc_rank() == 0)
        printf("%d ranks: %.3f us per lane barrier (median of %d rounds, %.3f-%.3f)\n", tc_size(),
               us[ROUNDS / 2], ROUNDS, us[0], us[ROUNDS - 1]);
    return tc_finalize() == TC_OK ? 0 : 1;
}
