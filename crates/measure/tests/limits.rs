//! The physical limits measured on this machine are sane (quick mode).

use std::time::Duration;
use topocomm_measure::limits::{copy_rate, latency, LimitParams};
use topocomm_measure::pin::allowed_pus;
use topocomm_measure::Summary;

/// The tests measure: run them one at a time, not against each other.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn pair() -> Option<(u32, u32)> {
    let pus = allowed_pus().unwrap();
    if pus.len() < 2 {
        eprintln!("notice: fewer than 2 usable PUs; skipping the limit tests");
        return None;
    }
    Some((pus[0], pus[1]))
}

fn params(pair: (u32, u32), cold: bool) -> LimitParams {
    LimitParams {
        pair,
        cold,
        llc: 4 << 20,
        samples: 7,
        min_time: Duration::from_millis(1),
    }
}

#[test]
fn cross_core_latency_is_positive_and_below_10us() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(pair) = pair() else { return };
    for size in [8, 64] {
        let l = latency(&params(pair, false), size).unwrap();
        assert_eq!(
            (l.implementation.as_str(), l.test.as_str(), l.unit.as_str()),
            ("limit", "latency", "us")
        );
        assert_eq!(l.samples.len(), 7);
        let s = Summary::of(&l.samples).unwrap();
        eprintln!(
            "limit latency {size} B: median {:.4} us [{:.4}, {:.4}]",
            s.median, s.ci_low, s.ci_high
        );
        assert!(s.median > 0.0 && s.median < 10.0, "{s:?}");
    }
}

#[test]
fn copy_rate_is_positive_hot_and_cold() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(pair) = pair() else { return };
    for (cold, size) in [(false, 64), (false, 65536), (true, 65536), (true, 1 << 20)] {
        let l = copy_rate(&params(pair, cold), size).unwrap();
        assert_eq!(l.cache, if cold { "cold" } else { "hot" });
        let s = Summary::of(&l.samples).unwrap();
        eprintln!(
            "limit copy {} {size} B: median {:.2} GB/s [{:.2}, {:.2}]",
            l.cache, s.median, s.ci_low, s.ci_high
        );
        assert!(s.median > 0.01 && s.median < 10_000.0, "{s:?}");
    }
}
