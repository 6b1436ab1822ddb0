/* topocomm C API. Link with -ltopocomm (pkg-config --libs topocomm).
 *
 * Conventions: functions return 0 (TC_OK) on success and a negative TC_ERR_*
 * code on failure; tc_last_error() gives the message of the last failure on
 * the calling thread. Handles are opaque and released by their tc_*_free.
 * String arguments are NUL-terminated UTF-8 and only read during the call. */
#ifndef TOPOCOMM_H
#define TOPOCOMM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TC_OK 0
#define TC_ERR_INVALID_ARGUMENT (-1)
#define TC_ERR_TOPOLOGY (-2)
#define TC_ERR_NOT_FOUND (-3)
#define TC_ERR_TRUNCATED (-4)
#define TC_ERR_INTERNAL (-99)

/* Message of the last failed call on this thread ("" if none). Valid until
 * the next failing call on the same thread. */
const char *tc_last_error(void);
/* Library version, e.g. "0.1.0". */
const char *tc_version(void);

/* ---- Machine model ------------------------------------------------------ */
typedef struct TcMachine tc_machine;

/* Loads a machine model. spec: "live", "synthetic:DESC", an hwloc XML path or
 * a topocomm machine JSON path; NULL or "" means $TOPOCOMM_TOPOLOGY or live. */
int tc_machine_load(const char *spec, tc_machine **out);
void tc_machine_free(tc_machine *m);
/* Number of PUs (>= 1), or a negative error code. */
int tc_machine_num_pus(const tc_machine *m);
/* Locality class ("smt", "l2", "l3", "numa", "package", "machine", ...) of
 * two PUs given by OS index, written into buf (len bytes, NUL-terminated). */
int tc_pair_class(const tc_machine *m, unsigned p, unsigned q, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* TOPOCOMM_H */
