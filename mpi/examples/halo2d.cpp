// A 2-D halo exchange in C++ (std::vector buffers, a Cartesian
// communicator, MPI_Isend/MPI_Irecv/MPI_Waitall of row and column halos,
// a strided column datatype), checked against the values each neighbour
// must have sent; used by `topocomm accel`'s tests as a C++ program built
// with plain mpicxx. Prints "halo2d: ok" on rank 0 (exit status 1 on a
// wrong halo).
#include <mpi.h>

#include <cstdio>
#include <vector>

namespace {

constexpr int kN = 64;       // interior points per side
constexpr int kIters = 50;   // exchanges

struct Grid {
    int n;
    std::vector<double> a;  // (n+2) x (n+2), halo included
    explicit Grid(int n_) : n(n_), a(static_cast<size_t>((n_ + 2) * (n_ + 2)), 0.0) {}
    double &at(int i, int j) { return a[static_cast<size_t>(i * (n + 2) + j)]; }
};

// What rank `r` stores at interior point (i, j) in iteration `it`.
double value(int r, int it, int i, int j) { return r * 1e6 + it * 1e3 + i * 31 + j; }

}  // namespace

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int size, rank;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int dims[2] = {0, 0}, periods[2] = {1, 1};
    MPI_Dims_create(size, 2, dims);
    MPI_Comm cart;
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
    MPI_Comm_rank(cart, &rank);
    int up, down, left, right;
    MPI_Cart_shift(cart, 0, 1, &up, &down);
    MPI_Cart_shift(cart, 1, 1, &left, &right);
    MPI_Datatype column;
    MPI_Type_vector(kN, 1, kN + 2, MPI_DOUBLE, &column);
    MPI_Type_commit(&column);
    Grid g(kN);
    long errors = 0;
    for (int it = 0; it < kIters; it++) {
        for (int i = 1; i <= kN; i++)
            for (int j = 1; j <= kN; j++) g.at(i, j) = value(rank, it, i, j);
        std::vector<MPI_Request> req(8);
        MPI_Irecv(&g.at(0, 1), kN, MPI_DOUBLE, up, 0, cart, &req[0]);
        MPI_Irecv(&g.at(kN + 1, 1), kN, MPI_DOUBLE, down, 1, cart, &req[1]);
        MPI_Irecv(&g.at(1, 0), 1, column, left, 2, cart, &req[2]);
        MPI_Irecv(&g.at(1, kN + 1), 1, column, right, 3, cart, &req[3]);
        MPI_Isend(&g.at(kN, 1), kN, MPI_DOUBLE, down, 0, cart, &req[4]);
        MPI_Isend(&g.at(1, 1), kN, MPI_DOUBLE, up, 1, cart, &req[5]);
        MPI_Isend(&g.at(1, kN), 1, column, right, 2, cart, &req[6]);
        MPI_Isend(&g.at(1, 1), 1, column, left, 3, cart, &req[7]);
        std::vector<MPI_Status> st(8);
        MPI_Waitall(8, req.data(), st.data());
        for (int k = 1; k <= kN; k++) {
            errors += g.at(0, k) != value(up, it, kN, k);
            errors += g.at(kN + 1, k) != value(down, it, 1, k);
            errors += g.at(k, 0) != value(left, it, k, kN);
            errors += g.at(k, kN + 1) != value(right, it, k, 1);
        }
    }
    long all = 0;
    MPI_Allreduce(&errors, &all, 1, MPI_LONG, MPI_SUM, cart);
    if (rank == 0) {
        if (all == 0) std::printf("halo2d: ok (%d x %d ranks, %d exchanges)\n", dims[0], dims[1], kIters);
        else std::printf("halo2d: %ld wrong halo values\n", all);
    }
    MPI_Type_free(&column);
    MPI_Comm_free(&cart);
    MPI_Finalize();
    return all == 0 ? 0 : 1;
}
