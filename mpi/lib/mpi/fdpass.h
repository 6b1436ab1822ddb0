/* Passing the segment descriptor from node rank 0 to the other ranks of a
 * node over an abstract-namespace Unix socket (SCM_RIGHTS): no file in the
 * filesystem or /dev/shm, an unguessable name, peers checked by
 * SO_PEERCRED, every wait bounded. Internal to libtopocomm-mpi. */
#ifndef TOPOCOMM_FDPASS_H
#define TOPOCOMM_FDPASS_H

#include <stddef.h>
#include <sys/types.h>

/* "topocomm-" + 32 hex digits + NUL. */
#define FDP_NAME_LEN 48
#define FDP_ERR_LEN 400

/* Binds and listens on a fresh random abstract name (written to name). */
int fdp_listen(char name[FDP_NAME_LEN], int backlog, int *lfd, char err[FDP_ERR_LEN]);

/* Accepts the nranks-1 node ranks 1..nranks-1, each identified by the rank
 * it sends and checked against its credentials (same uid, pid == pids[r];
 * another uid is ignored, a wrong pid of our uid fails at once),
 * and sends each of them `fd`. Gives up at timeout_s seconds. Closes lfd. */
int fdp_serve(int lfd, int fd, const int *pids, int nranks, double timeout_s,
              char err[FDP_ERR_LEN]);

/* Connects to `name` as node rank `rank` and receives the descriptor. */
int fdp_fetch(const char *name, int rank, double timeout_s, int *fd_out,
              char err[FDP_ERR_LEN]);

#endif
