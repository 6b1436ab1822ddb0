/* Reductions of the predefined arithmetic, bitwise and logical operations
 * on the common predefined types, done here rather than through
 * PMPI_Reduce_local: for the few elements of a small allreduce, the MPI's
 * dispatch (Open MPI 4.1: ~190 instructions for two floats) sat on the
 * collective's critical path, where the loop takes a few. Same contract as
 * PMPI_Reduce_local: inout[i] = in[i] (op) inout[i], element by element, in
 * the order the caller combines blocks, so a reduction gives the same bits
 * run after run and on every rank (every rank runs this same code).
 * Everything else (other types, MINLOC/MAXLOC pairs, user operations) goes
 * to PMPI_Reduce_local. */
#include "accel.h"
#include "coll.h"

#include <stdint.h>
#include <string.h>

/* The loops run in blocks of VEC_BLOCK elements, each block's loop marked
 * free of dependences between iterations (IVDEP): `out` is one of the two
 * operands or overlaps neither, and element j reads only a[j] and b[j]
 * before writing o[j]. A block's fixed trip count and that promise let the
 * compiler vectorize at -O2 (GCC 12's "very cheap" model vectorizes no loop
 * of unknown count, nor one whose pointers might overlap): the scalar loop
 * took 38% of a 1 MiB two-member allreduce (perf, dev VM), one element per
 * cycle. Element-wise operations give the same bits vectorized or not. */
#define VEC_BLOCK 16
/* On x86-64 the loops are built twice, for AVX2 and for the baseline
 * (SSE2), the one this CPU runs picked at load time (an ifunc): AVX2 took
 * 4-18% off two-member reduce and allreduce from 16 KiB to 1 MiB on the
 * dev VM (scripts/lib-ab.py, 6 rounds), and the baseline build cannot
 * assume it. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ISA_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define ISA_CLONES
#endif
#if defined(__clang__)
#define IVDEP _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define IVDEP _Pragma("GCC ivdep")
#else
#define IVDEP
#endif

/* Integer arithmetic through the unsigned type of the same width: the
 * two's-complement result MPIs give, without C's signed-overflow UB. */
#define INT_LOOP(T, U, EXPR)                                                                      \
    do {                                                                                          \
        const T *a = (const T *)in, *b = (const T *)upper;                                        \
        T *o = (T *)out;                                                                          \
        int i = 0;                                                                                \
        for (; i + VEC_BLOCK <= count; i += VEC_BLOCK) {                                          \
            IVDEP                                                                                 \
            for (int j = 0; j < VEC_BLOCK; j++) {                                                 \
                U x = (U)a[i + j], y = (U)b[i + j];                                               \
                o[i + j] = (T)(EXPR);                                                             \
            }                                                                                     \
        }                                                                                         \
        for (; i < count; i++) {                                                                  \
            U x = (U)a[i], y = (U)b[i];                                                           \
            o[i] = (T)(EXPR);                                                                     \
        }                                                                                         \
    } while (0)

#define INT_OPS(T, U, MINMAX)                                                                     \
    do {                                                                                          \
        if (op == MPI_SUM) INT_LOOP(T, U, x + y);                                                 \
        else if (op == MPI_PROD) INT_LOOP(T, U, x * y);                                           \
        else if (op == MPI_MAX && (MINMAX)) INT_LOOP(T, U, (T)y > (T)x ? y : x);                  \
        else if (op == MPI_MIN && (MINMAX)) INT_LOOP(T, U, (T)y < (T)x ? y : x);                  \
        else if (op == MPI_BAND) INT_LOOP(T, U, x & y);                                           \
        else if (op == MPI_BOR) INT_LOOP(T, U, x | y);                                            \
        else if (op == MPI_BXOR) INT_LOOP(T, U, x ^ y);                                           \
        else if (op == MPI_LAND) INT_LOOP(T, U, (U)(x && y));                                     \
        else if (op == MPI_LOR) INT_LOOP(T, U, (U)(x || y));                                      \
        else if (op == MPI_LXOR) INT_LOOP(T, U, (U)(!x != !y));                                   \
        else return 0;                                                                            \
        return 1;                                                                                 \
    } while (0)

/* Floating point: MAX and MIN keep inout unless in is strictly beyond it
 * (Open MPI's choice; with a NaN the result is the same on every rank). */
#define FLOAT_LOOP(T, EXPR)                                                                       \
    do {                                                                                          \
        const T *a = (const T *)in, *b = (const T *)upper;                                        \
        T *o = (T *)out;                                                                          \
        int i = 0;                                                                                \
        for (; i + VEC_BLOCK <= count; i += VEC_BLOCK) {                                          \
            IVDEP                                                                                 \
            for (int j = 0; j < VEC_BLOCK; j++) {                                                 \
                T x = a[i + j], y = b[i + j];                                                     \
                o[i + j] = (EXPR);                                                                \
            }                                                                                     \
        }                                                                                         \
        for (; i < count; i++) {                                                                  \
            T x = a[i], y = b[i];                                                                 \
            o[i] = (EXPR);                                                                        \
        }                                                                                         \
    } while (0)

#define FLOAT_OPS(T)                                                                              \
    do {                                                                                          \
        if (op == MPI_SUM) FLOAT_LOOP(T, x + y);                                                  \
        else if (op == MPI_PROD) FLOAT_LOOP(T, x * y);                                            \
        else if (op == MPI_MAX) FLOAT_LOOP(T, y > x ? y : x);                                     \
        else if (op == MPI_MIN) FLOAT_LOOP(T, y < x ? y : x);                                     \
        else return 0;                                                                            \
        return 1;                                                                                 \
    } while (0)

/* out[i] = in[i] (op) upper[i]; out is one of the two operands or overlaps
 * neither. 1 when done here, 0 when the caller must use PMPI_Reduce_local. */
ISA_CLONES static int reduce_builtin(const void *in, const void *upper, void *out,
                                     int count, MPI_Datatype type, MPI_Op op) {
    if (type == MPI_DOUBLE) FLOAT_OPS(double);
    if (type == MPI_FLOAT) FLOAT_OPS(float);
    if (type == MPI_INT || type == MPI_INT32_T) INT_OPS(int32_t, uint32_t, 1);
    if (type == MPI_LONG || type == MPI_LONG_LONG || type == MPI_INT64_T) {
        if (sizeof(long) == 8 || type != MPI_LONG) INT_OPS(int64_t, uint64_t, 1);
        return 0;
    }
    /* Unsigned MAX and MIN stay with the MPI: Open MPI 4.1 compares
     * MPI_UNSIGNED_LONG as signed, MPICH 4.0 also MPI_UNSIGNED and
     * MPI_UNSIGNED_LONG_LONG, and an accelerated program must get what it
     * gets plain (crates/cli/tests/accel/coll.c compares every case here
     * with the MPI's MPI_Reduce_local). */
    if (type == MPI_UNSIGNED || type == MPI_UINT32_T) INT_OPS(uint32_t, uint32_t, 0);
    if (type == MPI_UNSIGNED_LONG || type == MPI_UNSIGNED_LONG_LONG || type == MPI_UINT64_T) {
        if (sizeof(unsigned long) == 8 || type != MPI_UNSIGNED_LONG) INT_OPS(uint64_t, uint64_t, 0);
        return 0;
    }
    return 0;
}

/* Whether (type, op) is combined by the loops here rather than by
 * PMPI_Reduce_local: then acc_reduce_to's `out` may also be `in`. */
int acc_reduce_builtin(MPI_Datatype type, MPI_Op op) {
    return reduce_builtin(NULL, NULL, NULL, 0, type, op);
}

int acc_reduce_local(const void *in, void *inout, int count, MPI_Datatype type, MPI_Op op) {
    if (count > 0 && reduce_builtin(in, inout, inout, count, type, op)) return MPI_SUCCESS;
    return PMPI_Reduce_local(in, inout, count, type, op);
}

/* acc_reduce_local into a third buffer: out = in (op) upper, `bytes` the
 * size of `count` elements; `out` may be `upper`, and `in` only where
 * acc_reduce_builtin(type, op) (the fallback copies `upper` into `out`
 * first, which would overwrite `in`). One pass over the three
 * buffers where the loop is here, instead of copying `upper` into `out`
 * first (a whole pass over the vector more for the member that combines
 * into its result). */
int acc_reduce_to(const void *in, const void *upper, void *out, int count, size_t bytes,
                  MPI_Datatype type, MPI_Op op) {
    if (count > 0 && reduce_builtin(in, upper, out, count, type, op)) return MPI_SUCCESS;
    if (out != upper) memcpy(out, upper, bytes);
    return PMPI_Reduce_local(in, out, count, type, op);
}

/* lower := lower (op) upper, `bytes` the size of `count` elements: the
 * result in the lower operand's buffer (an in-place root of two members).
 * The loops here read each element of both before writing it, so `out`
 * may be `in`; the fallback combines into `upper` and copies it back. */
int acc_reduce_into_lower(void *lower, void *upper, int count, size_t bytes, MPI_Datatype type,
                          MPI_Op op) {
    if (count > 0 && reduce_builtin(lower, upper, lower, count, type, op)) return MPI_SUCCESS;
    int rc = PMPI_Reduce_local(lower, upper, count, type, op);
    if (rc == MPI_SUCCESS) memcpy(lower, upper, bytes);
    return rc;
}
