/* Message bytes from MPI datatypes: a contiguous layout is sent from (and
 * received into) the user's buffer directly; any other layout is packed
 * with PMPI_Pack into a temporary and unpacked at the receiver, so derived
 * and non-contiguous datatypes take the same path, in the same order, as
 * every other message of the pair. */
#include "accel.h"

#include <stdlib.h>
#include <string.h>

/* The layout of the last datatype seen (accel.h). */
struct acc_dtype_cache acc_dt_last;

int MPI_Type_free(MPI_Datatype *type) {
    acc_settle();
    acc_dt_last.valid = 0;
    return PMPI_Type_free(type);
}

int acc_dt_load(MPI_Datatype type) {
    MPI_Aint elb;
    if (PMPI_Type_size(type, &acc_dt_last.size) != MPI_SUCCESS || acc_dt_last.size < 0) {
        acc_dt_last.valid = 0;
        return -1;
    }
    PMPI_Type_get_true_extent(type, &acc_dt_last.tlb, &acc_dt_last.text);
    PMPI_Type_get_extent(type, &elb, &acc_dt_last.ext);
    acc_dt_last.type = type;
    acc_dt_last.valid = 1;
    return 0;
}

size_t acc_bytes(int count, MPI_Datatype type) {
    MPI_Aint lb;
    size_t bytes = 0;
    return acc_contiguous(count, type, &lb, &bytes) < 0 ? 0 : bytes;
}

int acc_pack_full(const void *buf, int count, MPI_Datatype type, MPI_Comm comm,
                  struct acc_msg *m) {
    MPI_Aint lb;
    size_t bytes;
    m->tmp = NULL;
    int k = acc_contiguous(count, type, &lb, &bytes);
    if (k < 0) return MPI_ERR_TYPE;
    if (k == 1) {
        m->data = (const char *)buf + lb;
        m->len = bytes;
        return MPI_SUCCESS;
    }
    int psize, pos = 0;
    int rc = PMPI_Pack_size(count, type, comm, &psize);
    if (rc != MPI_SUCCESS) return rc;
    m->tmp = malloc(psize > 0 ? (size_t)psize : 1);
    if (!m->tmp) return MPI_ERR_NO_MEM;
    rc = PMPI_Pack(buf, count, type, m->tmp, psize, &pos, comm);
    if (rc != MPI_SUCCESS) {
        free(m->tmp);
        m->tmp = NULL;
        return rc;
    }
    m->data = m->tmp;
    m->len = (size_t)pos;
    return MPI_SUCCESS;
}

int acc_recv_area_full(void *buf, int count, MPI_Datatype type, struct acc_msg *m) {
    MPI_Aint lb;
    size_t bytes;
    m->tmp = NULL;
    int k = acc_contiguous(count, type, &lb, &bytes);
    if (k < 0) return MPI_ERR_TYPE;
    m->len = bytes;
    if (k == 1) {
        m->data = (char *)buf + lb;
        return MPI_SUCCESS;
    }
    m->tmp = malloc(bytes > 0 ? bytes : 1);
    if (!m->tmp) return MPI_ERR_NO_MEM;
    m->data = m->tmp;
    return MPI_SUCCESS;
}

int acc_unpack(struct acc_msg *m, size_t got, void *buf, int count, MPI_Datatype type,
               MPI_Comm comm) {
    if (!m->tmp) return MPI_SUCCESS;
    int size, pos = 0, rc = MPI_SUCCESS;
    PMPI_Type_size(type, &size);
    /* Whole elements only: a trailing partial element is left as it was
     * (MPI_Get_elements still reports it from the status). */
    int n = size > 0 ? (int)(got / (size_t)size) : 0;
    int truncated = n > count || (n == count && got > (size_t)size * (size_t)n);
    if (n > count) n = count;
    if (n > 0) rc = PMPI_Unpack(m->tmp, (int)got, &pos, buf, n, type, comm);
    free(m->tmp);
    m->tmp = NULL;
    return rc == MPI_SUCCESS && truncated ? MPI_ERR_TRUNCATE : rc;
}

/* Statuses whose hidden fields (count, cancelled) say `bytes` bytes, not
 * cancelled, as PMPI_Status_set_elements_x and PMPI_Status_set_cancelled
 * wrote them: copied for the next status of the same size instead of two
 * PMPI calls per message. Two sizes: a window of equal messages hits one,
 * and a wait over sends (0 bytes) and receives together (bidirectional
 * windows) hits both instead of remaking one per request. One thread at a
 * time uses the accelerator (MPI_THREAD_MULTIPLE turns it off). */
MPI_Status acc_status_tmpl[2];
size_t acc_status_tmpl_bytes[2] = {(size_t)-1, (size_t)-1};

const MPI_Status *acc_status_tmpl_make(size_t bytes) {
    /* The entry not used last goes: entry 1 moves to 0, the new one is 1. */
    acc_status_tmpl[0] = acc_status_tmpl[1];
    acc_status_tmpl_bytes[0] = acc_status_tmpl_bytes[1];
    MPI_Status *t = &acc_status_tmpl[1];
    memset(t, 0, sizeof *t);
    PMPI_Status_set_elements_x(t, MPI_BYTE, (MPI_Count)bytes);
    PMPI_Status_set_cancelled(t, 0);
    acc_status_tmpl_bytes[1] = bytes;
    return t;
}
