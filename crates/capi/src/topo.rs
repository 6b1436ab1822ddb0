//! Machine model and locality classes from C.

use crate::error::*;
use std::ffi::{c_char, c_uint, CStr};
use topocomm_topo::{ClassIndex, Machine};

/// Opaque machine model handle (`tc_machine` in C).
pub struct TcMachine {
    machine: Machine,
    index: ClassIndex,
}

/// Reads a NUL-terminated C string argument; `name` is used in the error.
pub(crate) fn c_str<'a>(p: *const c_char, name: &str) -> Result<&'a str, i32> {
    if p.is_null() {
        return Err(fail(TC_ERR_INVALID_ARGUMENT, format!("{name} is NULL")));
    }
    // SAFETY: the caller passes a NUL-terminated string that outlives this
    // call (documented in topocomm.h); NULL was excluded above.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str()
        .map_err(|_| fail(TC_ERR_INVALID_ARGUMENT, format!("{name} is not UTF-8")))
}

/// Copies `s` into the caller's buffer `buf` of `len` bytes, NUL-terminated.
pub(crate) fn copy_out(s: &str, buf: *mut c_char, len: usize) -> i32 {
    if buf.is_null() || len == 0 {
        return fail(TC_ERR_INVALID_ARGUMENT, "output buffer is NULL or empty");
    }
    if s.len() + 1 > len {
        return fail(
            TC_ERR_TRUNCATED,
            format!(
                "output buffer of {len} bytes is too small for {} bytes",
                s.len() + 1
            ),
        );
    }
    // SAFETY: `buf` is non-NULL and the caller guarantees `len` writable
    // bytes; we write s.len() + 1 <= len bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), s.len());
        *buf.add(s.len()) = 0;
    }
    TC_OK
}

/// Loads a machine model: `spec` is `live`, `synthetic:DESC`, an hwloc XML
/// path or a topocomm machine JSON path (NULL or "" means `$TOPOCOMM_TOPOLOGY`
/// or the live machine).
#[no_mangle]
pub extern "C" fn tc_machine_load(spec: *const c_char, out: *mut *mut TcMachine) -> i32 {
    guard(|| {
        if out.is_null() {
            return fail(TC_ERR_INVALID_ARGUMENT, "out is NULL");
        }
        let spec = if spec.is_null() {
            None
        } else {
            match c_str(spec, "spec") {
                Ok("") => None,
                Ok(s) => Some(s),
                Err(code) => return code,
            }
        };
        match topocomm_topo::load_default(spec) {
            Ok(machine) => {
                let index = ClassIndex::new(&machine);
                let boxed = Box::new(TcMachine { machine, index });
                // SAFETY: `out` is non-NULL and points to writable storage for
                // one pointer, as documented.
                unsafe { *out = Box::into_raw(boxed) };
                TC_OK
            }
            Err(e) => fail(TC_ERR_TOPOLOGY, e.to_string()),
        }
    })
}

/// Releases a machine model (NULL is accepted and ignored).
#[no_mangle]
pub extern "C" fn tc_machine_free(m: *mut TcMachine) {
    if !m.is_null() {
        // SAFETY: `m` was produced by Box::into_raw in tc_machine_load and is
        // freed once, as documented.
        drop(unsafe { Box::from_raw(m) });
    }
}

pub(crate) fn machine_ref<'a>(m: *const TcMachine) -> Result<&'a TcMachine, i32> {
    if m.is_null() {
        return Err(fail(TC_ERR_INVALID_ARGUMENT, "machine is NULL"));
    }
    // SAFETY: non-NULL handles come from tc_machine_load and stay valid until
    // tc_machine_free, as documented.
    Ok(unsafe { &*m })
}

/// Number of PUs of the machine, or a negative error code.
#[no_mangle]
pub extern "C" fn tc_machine_num_pus(m: *const TcMachine) -> i32 {
    guard(|| match machine_ref(m) {
        Ok(tm) => tm.machine.pus.len() as i32,
        Err(code) => code,
    })
}

/// Writes the locality class name of PUs `p` and `q` (OS indexes) into `buf`.
#[no_mangle]
pub extern "C" fn tc_pair_class(
    m: *const TcMachine,
    p: c_uint,
    q: c_uint,
    buf: *mut c_char,
    len: usize,
) -> i32 {
    guard(|| {
        let tm = match machine_ref(m) {
            Ok(tm) => tm,
            Err(code) => return code,
        };
        let (a, b) = match (tm.machine.require_pu(p), tm.machine.require_pu(q)) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => return fail(TC_ERR_NOT_FOUND, e.to_string()),
        };
        let class = tm.index.classify(&tm.machine, a, b).0;
        copy_out(&class.to_string(), buf, len)
    })
}
