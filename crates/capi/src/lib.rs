//! # topocomm-capi
//!
//! The C ABI of topocomm (`include/topocomm.h`). Conventions, the same for
//! every function:
//! - functions return `0` on success and a negative `TC_ERR_*` code on failure;
//! - the message of the last failure on the calling thread is available from
//!   `tc_last_error()` until the next failing call on that thread;
//! - objects are opaque pointers created by `tc_*_create`/`tc_*_load` and
//!   released by the matching `tc_*_free`;
//! - no function panics across the boundary: panics are caught and reported
//!   as `TC_ERR_INTERNAL`.

// The exported functions take raw pointers from C callers; their contracts
// (non-NULL where required, valid lengths, handles from this library) are
// documented in include/topocomm.h, since C cannot see Rust's `unsafe fn`.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

mod coll;
mod error;
mod lanes;
mod map;
mod shared;
pub use shared::tc_set_serialized;
mod topo;
mod transport;
mod transport_x;

pub use coll::*;
pub use error::*;
pub use lanes::*;
pub use map::*;
pub use topo::*;
pub use transport::*;
pub use transport_x::*;
