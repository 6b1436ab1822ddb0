/* The CPU affinity of the calling process as text, shared by the MPI-side
 * tools that report where ranks run (tc_mpibench's meta line, whereami). */
#ifndef TC_AFFINITY_H
#define TC_AFFINITY_H

#include <sched.h>
#include <stdio.h>

/* "0", "0-3", "0,2" style list of the CPUs this process may run on (OS
 * numbers, from sched_getaffinity); "?" if the kernel does not say. A list
 * longer than `len` is cut at the last range that fits. */
static inline void affinity_text(char *out, size_t len)
{
    cpu_set_t set;
    size_t used = 0;
    out[0] = '\0';
    if (sched_getaffinity(0, sizeof set, &set)) {
        snprintf(out, len, "?");
        return;
    }
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &set))
            continue;
        int e = c;
        while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, &set))
            e++;
        int n = e > c ? snprintf(out + used, len - used, "%s%d-%d", used ? "," : "", c, e)
                      : snprintf(out + used, len - used, "%s%d", used ? "," : "", c);
        if (n < 0 || (size_t)n >= len - used) {
            /* Drop the partial range snprintf left behind. */
            out[used] = '\0';
            return;
        }
        used += (size_t)n;
        c = e;
    }
}

#endif
