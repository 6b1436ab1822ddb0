/* 3-D halo-exchange stencil: a periodic (or not) process grid from
 * MPI_Dims_create + MPI_Cart_create (reorder as asked), each rank owns an
 * n x n x n block of doubles with one ghost layer, and every iteration
 * exchanges its six faces with its Cartesian neighbours and does a 7-point
 * Jacobi sweep.
 *
 *   halo3d [-n edge] [-i iterations] [--periodic 0|1] [--reorder 0|1]
 *          [--mode isend|sendrecv|persistent] [--print]
 *
 * Exact point-to-point traffic, for the tracer tests: per iteration, for each
 * dimension d and each direction (-1, +1) whose neighbour (MPI_Cart_shift) is
 * not MPI_PROC_NULL, one message of n*n*8 bytes to that neighbour; messages
 * to oneself (a periodic dimension of extent 1) are not counted by the
 * tracer. Before that, the neighbour check sends one int (4 bytes) to each
 * of the six neighbours once (MPI_Sendrecv). Each rank checks, by exchanging ranks with its neighbours, that the
 * neighbour it sends to is the one that receives (Cartesian neighbour lists
 * correct in the communicator it got).
 * --print: each rank prints `rank W new N coords X Y Z`. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum mode { M_ISEND, M_SENDRECV, M_PERSISTENT };

static void usage(int rank, const char *msg)
{
    if (rank == 0)
        fprintf(stderr,
                "halo3d: %s\nusage: halo3d [-n edge] [-i iterations] [--periodic 0|1]"
                " [--reorder 0|1] [--mode isend|sendrecv|persistent] [--print]\n",
                msg);
    MPI_Finalize();
    exit(2);
}

static int pos_int(const char *s, int rank, const char *what)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < 0 || v > 1 << 20) {
        char m[128];
        snprintf(m, sizeof m, "%s: expected a non-negative integer, got '%s'", what, s);
        usage(rank, m);
    }
    return (int)v;
}

#define IDX(x, y, z) (((size_t)(x) * (N + 2) + (size_t)(y)) * (N + 2) + (size_t)(z))

/* Face `side` (0 = low, 1 = high) of dimension d: interior layer to send
 * (ghost = 0) or ghost layer to fill (ghost = 1). */
static void face(double *g, int N, int d, int side, int ghost, double *buf, int pack)
{
    int layer = side == 0 ? (ghost ? 0 : 1) : (ghost ? N + 1 : N);
    size_t k = 0;
    for (int a = 1; a <= N; a++)
        for (int b = 1; b <= N; b++) {
            size_t i = d == 0 ? IDX(layer, a, b) : d == 1 ? IDX(a, layer, b) : IDX(a, b, layer);
            if (pack)
                buf[k++] = g[i];
            else
                g[i] = buf[k++];
        }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int wrank, wsize;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    int N = 16, iters = 10, periodic = 1, reorder = 0, print = 0;
    enum mode mode = M_ISEND;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "-n") && more)
            N = pos_int(argv[++i], wrank, "-n");
        else if (!strcmp(a, "-i") && more)
            iters = pos_int(argv[++i], wrank, "-i");
        else if (!strcmp(a, "--periodic") && more)
            periodic = pos_int(argv[++i], wrank, "--periodic") != 0;
        else if (!strcmp(a, "--reorder") && more)
            reorder = pos_int(argv[++i], wrank, "--reorder") != 0;
        else if (!strcmp(a, "--print"))
            print = 1;
        else if (!strcmp(a, "--mode") && more) {
            const char *v = argv[++i];
            if (!strcmp(v, "isend"))
                mode = M_ISEND;
            else if (!strcmp(v, "sendrecv"))
                mode = M_SENDRECV;
            else if (!strcmp(v, "persistent"))
                mode = M_PERSISTENT;
            else
                usage(wrank, "--mode: expected isend, sendrecv or persistent");
        } else {
            char msg[160];
            snprintf(msg, sizeof msg, "unknown or incomplete argument '%s'", a);
            usage(wrank, msg);
        }
    }
    if (N < 1)
        usage(wrank, "-n: the block edge must be at least 1");

    int dims[3] = {0, 0, 0}, periods[3] = {periodic, periodic, periodic};
    MPI_Dims_create(wsize, 3, dims);
    MPI_Comm cart;
    MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, reorder, &cart);
    int me, coords[3];
    MPI_Comm_rank(cart, &me);
    MPI_Cart_coords(cart, me, 3, coords);
    if (print)
        printf("rank %d new %d coords %d %d %d\n", wrank, me, coords[0], coords[1], coords[2]);

    int nb[3][2]; /* [d][0] = low neighbour, [d][1] = high neighbour */
    for (int d = 0; d < 3; d++)
        MPI_Cart_shift(cart, d, 1, &nb[d][0], &nb[d][1]);

    /* Neighbour check: send my rank towards each side; what arrives from
     * the opposite side must be that side's neighbour. */
    int bad = 0;
    for (int d = 0; d < 3; d++)
        for (int s = 0; s < 2; s++) {
            int got = -2;
            MPI_Sendrecv(&me, 1, MPI_INT, nb[d][s], 90 + s, &got, 1, MPI_INT, nb[d][1 - s],
                         90 + s, cart, MPI_STATUS_IGNORE);
            if (nb[d][1 - s] != MPI_PROC_NULL && got != nb[d][1 - s]) {
                fprintf(stderr, "halo3d: rank %d dim %d: got %d from side %d, expected %d\n", me,
                        d, got, 1 - s, nb[d][1 - s]);
                bad = 1;
            }
        }

    size_t cells = (size_t)(N + 2) * (N + 2) * (N + 2), fsz = (size_t)N * N;
    double *g = calloc(cells, sizeof *g), *h = calloc(cells, sizeof *h);
    double *sbuf = malloc(6 * fsz * sizeof *sbuf), *rbuf = malloc(6 * fsz * sizeof *rbuf);
    if (!g || !h || !sbuf || !rbuf)
        usage(wrank, "out of memory");
    for (int x = 1; x <= N; x++)
        for (int y = 1; y <= N; y++)
            for (int z = 1; z <= N; z++)
                g[IDX(x, y, z)] = me + 0.001 * (x + y + z);

    MPI_Request reqs[12];
    /* A real status array: GCC's -Wstringop-overflow misreads MPICH's
     * MPI_STATUSES_IGNORE (a cast constant) as a zero-length array. */
    MPI_Status st[12];
    int nreq = 0;
    if (mode == M_PERSISTENT) {
        for (int d = 0; d < 3; d++)
            for (int s = 0; s < 2; s++) {
                int f = 2 * d + s;
                MPI_Recv_init(rbuf + f * fsz, (int)fsz, MPI_DOUBLE, nb[d][s], 10 + (1 - s), cart,
                              &reqs[nreq++]);
                MPI_Send_init(sbuf + f * fsz, (int)fsz, MPI_DOUBLE, nb[d][s], 10 + s, cart,
                              &reqs[nreq++]);
            }
    }
    MPI_Barrier(cart);
    double t0 = MPI_Wtime();
    for (int it = 0; it < iters; it++) {
        for (int d = 0; d < 3; d++)
            for (int s = 0; s < 2; s++)
                face(g, N, d, s, 0, sbuf + (2 * d + s) * fsz, 1);
        /* Tag 10 + s: a message sent towards side s arrives from side 1-s. */
        if (mode == M_PERSISTENT) {
            MPI_Startall(nreq, reqs);
            MPI_Waitall(nreq, reqs, st);
        } else if (mode == M_ISEND) {
            MPI_Request r[12];
            int k = 0;
            for (int d = 0; d < 3; d++)
                for (int s = 0; s < 2; s++) {
                    int f = 2 * d + s;
                    MPI_Irecv(rbuf + f * fsz, (int)fsz, MPI_DOUBLE, nb[d][s], 10 + (1 - s), cart,
                              &r[k++]);
                    MPI_Isend(sbuf + f * fsz, (int)fsz, MPI_DOUBLE, nb[d][s], 10 + s, cart,
                              &r[k++]);
                }
            MPI_Waitall(k, r, st);
        } else {
            for (int d = 0; d < 3; d++)
                for (int s = 0; s < 2; s++) {
                    int f = 2 * d + s, o = 2 * d + (1 - s);
                    MPI_Sendrecv(sbuf + f * fsz, (int)fsz, MPI_DOUBLE, nb[d][s], 10 + s,
                                 rbuf + o * fsz, (int)fsz, MPI_DOUBLE, nb[d][1 - s], 10 + s, cart,
                                 MPI_STATUS_IGNORE);
                }
        }
        for (int d = 0; d < 3; d++)
            for (int s = 0; s < 2; s++)
                if (nb[d][s] != MPI_PROC_NULL)
                    face(g, N, d, s, 1, rbuf + (2 * d + s) * fsz, 0);
        for (int x = 1; x <= N; x++)
            for (int y = 1; y <= N; y++)
                for (int z = 1; z <= N; z++)
                    h[IDX(x, y, z)] = (g[IDX(x - 1, y, z)] + g[IDX(x + 1, y, z)] +
                                       g[IDX(x, y - 1, z)] + g[IDX(x, y + 1, z)] +
                                       g[IDX(x, y, z - 1)] + g[IDX(x, y, z + 1)]) /
                                      6.0;
        double *t = g;
        g = h;
        h = t;
    }
    double t1 = MPI_Wtime();
    for (int i = 0; i < nreq; i++)
        MPI_Request_free(&reqs[i]);

    double local = 0, sum = 0, dt = t1 - t0, maxt = 0;
    for (int x = 1; x <= N; x++)
        for (int y = 1; y <= N; y++)
            for (int z = 1; z <= N; z++)
                local += g[IDX(x, y, z)];
    MPI_Reduce(&local, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, cart);
    MPI_Reduce(&dt, &maxt, 1, MPI_DOUBLE, MPI_MAX, 0, cart);
    int anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, cart);
    if (me == 0) {
        printf("halo3d: grid %dx%dx%d%s, block %d^3, %d iterations: %.6f s, checksum %.6e\n",
               dims[0], dims[1], dims[2], periodic ? " periodic" : "", N, iters, maxt, sum);
        printf("halo3d: cartesian neighbours %s\n", anybad ? "WRONG" : "ok");
    }
    free(g);
    free(h);
    free(sbuf);
    free(rbuf);
    MPI_Comm_free(&cart);
    MPI_Finalize();
    return anybad ? 1 : 0;
}
