//! # topocomm-model
//!
//! Predicts the time of a shared-memory transfer from cache micro-benchmark
//! throughputs (Putigny, Ruelle, Goglin; seed 001), and tunes the
//! transport's rules with measurements, guided or not by the model (Ma,
//! Bosilca, Bouteiller, Dongarra; seed 000):
//!
//! * pipelined two-copy of a message of size `M` in chunks `C_1..C_n`
//!   (equation 1): `T = S(C_1) + sum_{i>=2} max(S(C_i), R(C_{i-1})) + R(C_n)`,
//!   with the sender copy `S(C) = C / min(LHM(M), SHS(M))` (equation 2: load
//!   its own Modified source, store into shared-buffer lines left Shared by
//!   the receiver's last read) and the receiver copy
//!   `R(C) = C / min(LMM(M), SHM(M))` (equation 3: load lines Modified in the
//!   sender's cache, at the pair's locality class, and store into its own
//!   Modified destination). Throughputs are taken at the *message* size `M`,
//!   as the paper does, because consecutive chunks contend like one buffer.
//! * single-copy (CMA `process_vm_readv`) in chunks: one copy by the
//!   receiver from the sender's Modified buffer, plus a per-call cost.
//! * [`rates`]: which `bench cache` curve feeds which rate (with fallbacks),
//!   [`predict`]: the protocol the transport picks per size and the fixed
//!   costs around the copies, [`fit`]: those costs fitted to measurements,
//!   [`tune`]: grid and model-guided searches that write rules files.
//! * [`compare`]: what `topocomm model` computes (predicted vs measured per
//!   class, the model JSON document); [`choice`]: the classes and sizes a
//!   model or tune run covers.
//!
//! The throughputs come from `topocomm bench cache`; see docs/model.md.

pub mod choice;
pub mod compare;
mod curve;
mod error;
pub mod fit;
pub mod predict;
mod protocol;
pub mod rates;
mod text;
pub mod tune;

/// Rules shared by the unit tests: every protocol reachable, round sizes.
#[cfg(test)]
pub(crate) fn test_params() -> topocomm_transport::Params {
    use topocomm_transport::{CopyKind, Owner, Params};
    Params {
        inline_max: 40,
        eager_max: 16 << 10,
        fragment: 64 << 10,
        depth: 8,
        cma: true,
        cma_threshold: 1 << 20,
        adaptive: true,
        cma_chunk: 1 << 20,
        copy: CopyKind::Plain,
        nt_threshold: u64::MAX,
        stream_out_min: u64::MAX,
        buffer_owner: Owner::Sender,
        lone_rendezvous_min: None,
        help_min: topocomm_transport::rules::HELP_NEVER,
    }
}

pub use curve::Curve;
pub use error::ModelError;
pub use predict::{predict, protocol_for, Overheads, Protocol};
pub use protocol::{chunk_sizes, pipelined_time, single_copy_time, CopyRates, SingleCopyRates};
pub use rates::{class_rates, ClassRates};
