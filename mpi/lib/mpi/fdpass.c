/* See fdpass.h. */
#define _GNU_SOURCE
#include "fdpass.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static int failf(char err[FDP_ERR_LEN], const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, FDP_ERR_LEN, fmt, ap);
    va_end(ap);
    return -1;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Milliseconds left until `deadline` (0 when past it). */
static int left_ms(double deadline) {
    double l = deadline - now_s();
    return l <= 0 ? 0 : (int)(l * 1000.0) + 1;
}

/* Waits until fd is readable or the deadline passes: 1 readable, 0 timed out, -1 error. */
static int wait_readable(int fd, double deadline) {
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int ms = left_ms(deadline);
        if (ms == 0) return 0;
        int r = poll(&p, 1, ms);
        if (r > 0) return 1;
        if (r == 0) return 0;
        if (errno != EINTR) return -1;
    }
}

/* The abstract address of `name`: sun_path starts with a NUL byte. */
static socklen_t address(const char *name, struct sockaddr_un *a) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    size_t n = strlen(name);
    memcpy(a->sun_path + 1, name, n);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

int fdp_listen(char name[FDP_NAME_LEN], int backlog, int *lfd, char err[FDP_ERR_LEN]) {
    unsigned char rnd[16];
    size_t got = 0;
    while (got < sizeof rnd) {
        ssize_t r = getrandom(rnd + got, sizeof rnd - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return failf(err, "getrandom for the bootstrap socket name: %s", strerror(errno));
        got += (size_t)r;
    }
    int k = snprintf(name, FDP_NAME_LEN, "topocomm-");
    for (size_t i = 0; i < sizeof rnd; i++)
        k += snprintf(name + k, (size_t)(FDP_NAME_LEN - k), "%02x", rnd[i]);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0) return failf(err, "bootstrap socket: %s", strerror(errno));
    struct sockaddr_un a;
    socklen_t len = address(name, &a);
    if (bind(s, (struct sockaddr *)&a, len) != 0 || listen(s, backlog) != 0) {
        int e = errno;
        close(s);
        return failf(err, "bootstrap socket @%s: %s", name, strerror(e));
    }
    *lfd = s;
    return 0;
}

/* Reads exactly n bytes before the deadline. */
static int read_full(int fd, void *buf, size_t n, double deadline) {
    size_t got = 0;
    while (got < n) {
        int w = wait_readable(fd, deadline);
        if (w <= 0) return -1;
        ssize_t r = recv(fd, (char *)buf + got, n - got, MSG_DONTWAIT);
        if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

static int send_fd(int conn, int fd) {
    char byte = 'T';
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                       .msg_controllen = sizeof ctl.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    ssize_t r;
    do r = sendmsg(conn, &m, MSG_NOSIGNAL);
    while (r < 0 && errno == EINTR);
    return r == 1 ? 0 : -1;
}

int fdp_serve(int lfd, int fd, const int *pids, int nranks, double timeout_s,
              char err[FDP_ERR_LEN]) {
    double deadline = now_s() + timeout_s;
    char *served = calloc((size_t)nranks, 1);
    char rejected[200] = "";
    int done = 0, rc = 0;
    if (!served) {
        close(lfd);
        return failf(err, "out of memory");
    }
    while (done < nranks - 1) {
        int w = wait_readable(lfd, deadline);
        if (w <= 0) {
            int missing = 0;
            for (int r = 1; r < nranks; r++)
                if (!served[r]) {
                    missing = r;
                    break;
                }
            rc = w < 0 ? failf(err, "poll on the bootstrap socket: %s", strerror(errno))
                       : failf(err,
                               "%d of %d node ranks (first: node rank %d) did not fetch the "
                               "segment within %g s (TOPOCOMM_TIMEOUT)%s%s",
                               nranks - 1 - done, nranks - 1, missing, timeout_s,
                               rejected[0] ? "; " : "", rejected);
            break;
        }
        int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
            rc = failf(err, "accept on the bootstrap socket: %s", strerror(errno));
            break;
        }
        struct ucred cr;
        socklen_t cl = sizeof cr;
        int32_t rank = -1;
        if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0) {
            snprintf(rejected, sizeof rejected, "a peer without credentials (%s) was rejected",
                     strerror(errno));
        } else if (cr.uid != geteuid()) {
            snprintf(rejected, sizeof rejected, "pid %d of uid %u was rejected (not our uid %u)",
                     (int)cr.pid, (unsigned)cr.uid, (unsigned)geteuid());
        } else if (read_full(c, &rank, sizeof rank, deadline) != 0) {
            snprintf(rejected, sizeof rejected, "pid %d sent no rank", (int)cr.pid);
        } else if (rank < 1 || rank >= nranks || served[rank] || pids[rank] != (int)cr.pid) {
            /* Same uid but not the expected process: a misconfiguration
             * (e.g. ranks in different pid namespaces), so fail now. */
            rc = failf(err, "pid %d claiming node rank %d is not that rank's process (pid %d)",
                       (int)cr.pid, (int)rank, rank >= 1 && rank < nranks ? pids[rank] : -1);
            close(c);
            break;
        } else if (send_fd(c, fd) != 0) {
            rc = failf(err, "sending the segment to node rank %d: %s", (int)rank, strerror(errno));
            close(c);
            break;
        } else {
            served[rank] = 1;
            done++;
        }
        close(c);
    }
    free(served);
    close(lfd);
    return rc;
}

int fdp_fetch(const char *name, int rank, double timeout_s, int *fd_out,
              char err[FDP_ERR_LEN]) {
    double deadline = now_s() + timeout_s;
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return failf(err, "bootstrap socket: %s", strerror(errno));
    struct sockaddr_un a;
    socklen_t len = address(name, &a);
    int r;
    do r = connect(s, (struct sockaddr *)&a, len);
    while (r != 0 && errno == EINTR);
    if (r != 0) {
        int e = errno;
        close(s);
        return failf(err, "connecting to node rank 0's bootstrap socket: %s (did it give up?)",
                     strerror(e));
    }
    int32_t me = rank;
    if (send(s, &me, sizeof me, MSG_NOSIGNAL) != (ssize_t)sizeof me) {
        int e = errno;
        close(s);
        return failf(err, "sending our rank to node rank 0: %s", strerror(e));
    }
    char byte = 0;
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                       .msg_controllen = sizeof ctl.buf};
    ssize_t got = -1;
    for (;;) {
        int w = wait_readable(s, deadline);
        if (w == 0) {
            close(s);
            return failf(err, "no segment from node rank 0 within %g s (TOPOCOMM_TIMEOUT)",
                         timeout_s);
        }
        if (w < 0) break;
        got = recvmsg(s, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        break;
    }
    int e = errno;
    close(s);
    if (got < 0) return failf(err, "receiving the segment from node rank 0: %s", strerror(e));
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    if (got != 1 || byte != 'T' || !c || c->cmsg_level != SOL_SOCKET ||
        c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int)))
        return failf(err, "node rank 0 closed the bootstrap connection without sending the "
                          "segment (it rejected this process or gave up)");
    memcpy(fd_out, CMSG_DATA(c), sizeof(int));
    return 0;
}
