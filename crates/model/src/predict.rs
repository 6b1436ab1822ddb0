//! One-way time of a message under a transport parameter set: which
//! protocol the transport picks for the size (inline, eager, pipelined
//! two-copy, single copy), the model of that protocol, and the fixed costs
//! around it (fitted from measurements by [`crate::fit`]).

use crate::protocol::{pipelined_time, single_copy_time};
use crate::rates::ClassRates;
use serde::{Deserialize, Serialize};
use topocomm_transport::Params;

/// Fixed costs around the copies, in seconds. All zero = the pure model of
/// seed 001 (copies only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Overheads {
    /// Every message: cell write, doorbell, the receiver's poll and match.
    pub message: f64,
    /// Rendezvous (RTS, then CTS or buffer announcement) of messages above
    /// the eager limit, both two-copy and single copy.
    pub rendezvous: f64,
    /// Per fragment of the pipelined two-copy: slot flag write and poll.
    pub per_chunk: f64,
    /// Per `process_vm_readv` call: system call entry and exit.
    pub per_call: f64,
    /// Per 4 KiB page of a single copy: page-table walk and pinning in the
    /// kernel (also absorbs any per-byte difference between the kernel's
    /// copy and the user-space copy rate of the cache benchmark).
    pub per_page: f64,
}

/// The protocol the transport uses for a message (mirrors `Comm::isend`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Inline,
    Eager,
    Pipelined,
    Single,
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Inline => "inline",
            Protocol::Eager => "eager",
            Protocol::Pipelined => "two-copy",
            Protocol::Single => "single-copy",
        }
    }
}

/// The protocol of an `m`-byte message under `p` (with single copy
/// available on this machine when `cma_ok`).
pub fn protocol_for(p: &Params, m: u64, cma_ok: bool) -> Protocol {
    if m <= p.inline_max {
        Protocol::Inline
    } else if m <= p.eager_max {
        Protocol::Eager
    } else if p.cma && cma_ok && m >= p.cma_threshold {
        Protocol::Single
    } else {
        Protocol::Pipelined
    }
}

/// Predicted one-way seconds of an `m`-byte message between a pair of
/// class `r` under parameters `p`. Inline messages are one cell: only the
/// per-message cost. Eager messages are one chunk copied in and out with no
/// rendezvous.
pub fn predict(r: &ClassRates, p: &Params, m: u64, ov: &Overheads, cma_ok: bool) -> f64 {
    match protocol_for(p, m, cma_ok) {
        Protocol::Inline => ov.message,
        Protocol::Eager => ov.message + pipelined_time(&r.rates, m, m.max(1), 1, 0.0),
        Protocol::Pipelined => {
            ov.message
                + ov.rendezvous
                + pipelined_time(&r.rates, m, p.fragment, p.depth as u32, ov.per_chunk)
        }
        Protocol::Single => {
            ov.message
                + ov.rendezvous
                + single_copy_time(
                    &r.single_copy(ov.per_call, ov.per_page),
                    m,
                    p.cma_chunk,
                    0.0,
                )
        }
    }
}

/// The copy part of [`predict`] and the coefficients of each fixed cost
/// (message, rendezvous, per_chunk, per_call, per_page): the prediction is
/// `copy + sum coef_i * cost_i`. This is what the fit solves for.
pub fn decompose(r: &ClassRates, p: &Params, m: u64, cma_ok: bool) -> (f64, [f64; 5]) {
    let chunks = |c: u64| m.div_ceil(c.max(1)).max(1) as f64;
    match protocol_for(p, m, cma_ok) {
        Protocol::Inline => (0.0, [1.0, 0.0, 0.0, 0.0, 0.0]),
        Protocol::Eager => (
            pipelined_time(&r.rates, m, m.max(1), 1, 0.0),
            [1.0, 0.0, 0.0, 0.0, 0.0],
        ),
        Protocol::Pipelined => {
            // per_chunk sits on the sender's side of the pipeline; its
            // coefficient is exact when the sender is the slower side and an
            // upper bound otherwise.
            (
                pipelined_time(&r.rates, m, p.fragment, p.depth as u32, 0.0),
                [1.0, 1.0, chunks(p.fragment), 0.0, 0.0],
            )
        }
        Protocol::Single => (
            single_copy_time(&r.single_copy(0.0, 0.0), m, p.cma_chunk, 0.0),
            [1.0, 1.0, 0.0, chunks(p.cma_chunk), m.div_ceil(4096) as f64],
        ),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::curve::Curve;
    use crate::protocol::CopyRates;

    pub(crate) fn flat_rates(s: f64, r: f64) -> ClassRates {
        ClassRates {
            class: "l3".into(),
            rates: CopyRates {
                lhm: Curve::flat(s),
                shs: Curve::flat(s),
                lmm: Curve::flat(r),
                shm: Curve::flat(r),
            },
            sources: vec![],
        }
    }

    pub(crate) fn params() -> Params {
        crate::test_params()
    }

    #[test]
    fn protocol_follows_the_thresholds() {
        let p = params();
        assert_eq!(protocol_for(&p, 8, true), Protocol::Inline);
        assert_eq!(protocol_for(&p, 4096, true), Protocol::Eager);
        assert_eq!(protocol_for(&p, 65536, true), Protocol::Pipelined);
        assert_eq!(protocol_for(&p, 1 << 20, true), Protocol::Single);
        assert_eq!(protocol_for(&p, 1 << 20, false), Protocol::Pipelined);
    }

    #[test]
    fn decomposition_matches_prediction() {
        let r = flat_rates(10.0, 5.0);
        let p = params();
        let ov = Overheads {
            message: 1e-6,
            rendezvous: 2e-6,
            per_chunk: 0.0,
            per_call: 3e-6,
            per_page: 1e-8,
        };
        for m in [8u64, 4096, 65536, 1 << 20, 3 << 20] {
            let (copy, k) = decompose(&r, &p, m, true);
            let c = [
                ov.message,
                ov.rendezvous,
                ov.per_chunk,
                ov.per_call,
                ov.per_page,
            ];
            let sum: f64 = copy + k.iter().zip(c).map(|(a, b)| a * b).sum::<f64>();
            let t = predict(&r, &p, m, &ov, true);
            assert!((sum - t).abs() < 1e-15, "{m}: {sum} vs {t}");
        }
        // Eager = one chunk: the two copies add up.
        let t = predict(&r, &p, 4096, &Overheads::default(), true);
        assert!((t - (4096.0 / 10e9 + 4096.0 / 5e9)).abs() < 1e-15);
    }
}
