//! The four copy rates of a locality class, read from `bench cache` points
//! (docs/model.md): which (class, state, op) curve feeds which rate, and
//! what stands in when a curve could not be measured here.

use crate::curve::Curve;
use crate::protocol::{CopyRates, SingleCopyRates};
use serde::{Deserialize, Serialize};
use topocomm_measure::cache::{CachePoint, Op, State};

/// One rate and where its curve came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RateSource {
    /// `lhm`, `shs`, `lmm` or `shm`.
    pub rate: String,
    /// The curve used: `self M load`, `l3 M load`, ...
    pub used: String,
    /// Why the preferred curve was not used, when it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
}

/// The rates of one class with their provenance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClassRates {
    pub class: String,
    pub rates: CopyRates,
    pub sources: Vec<RateSource>,
}

impl ClassRates {
    /// The single-copy rates (the receiver's copy of the two-copy model)
    /// with the given fixed costs.
    pub fn single_copy(&self, per_call: f64, per_page: f64) -> SingleCopyRates {
        SingleCopyRates {
            lmm: self.rates.lmm.clone(),
            shm: self.rates.shm.clone(),
            per_call,
            per_page,
        }
    }
}

/// The curve of (class, state, op) as (size, median GB/s); points whose
/// timed span was below the timer's resolution are left out unless nothing
/// else is there.
pub fn curve_of(points: &[CachePoint], class: &str, state: State, op: Op) -> Option<Curve> {
    let sel: Vec<&CachePoint> = points
        .iter()
        .filter(|p| p.class == class && p.state == state && p.op == op)
        .filter(|p| p.summary.median.is_finite() && p.summary.median > 0.0)
        .collect();
    let resolved: Vec<&&CachePoint> = sel.iter().filter(|p| p.resolved).collect();
    let use_pts: Vec<(u64, f64)> = if resolved.is_empty() {
        sel.iter().map(|p| (p.size, p.summary.median)).collect()
    } else {
        resolved
            .iter()
            .map(|p| (p.size, p.summary.median))
            .collect()
    };
    Curve::new(use_pts).ok()
}

fn first_of(
    points: &[CachePoint],
    rate: &str,
    prefs: &[(&str, State, Op)],
    why_missing: &str,
) -> Result<(Curve, RateSource), String> {
    for (i, (class, state, op)) in prefs.iter().enumerate() {
        if let Some(c) = curve_of(points, class, *state, *op) {
            let (pc, ps, po) = prefs[0];
            return Ok((
                c,
                RateSource {
                    rate: rate.into(),
                    used: format!("{class} {state} {op}"),
                    fallback: (i > 0).then(|| format!("{pc} {ps} {po} not measured{why_missing}")),
                },
            ));
        }
    }
    Err(format!(
        "{}: no curve for {} (tried {}); run `topocomm bench cache --ops load,store --states M,S` from the pair's first PU",
        rate.to_uppercase(),
        rate,
        prefs
            .iter()
            .map(|(c, s, o)| format!("{c} {s} {o}"))
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// Builds the copy rates of `class` from bench cache points:
/// LHM = `self M load`, SHS = `self S store`, LMM = `<class> M load`,
/// SHM = `self M store`. Fallbacks, in order:
/// SHS -> `self E store` -> `self M store` (state S needs a third core);
/// LMM -> `<class> O load` -> `<class> E load` -> `none I load` (memory, pessimistic)
/// -> the first other class's `M load`; LHM -> `self E load`.
pub fn class_rates(points: &[CachePoint], class: &str) -> Result<ClassRates, String> {
    use Op::{Load, Store};
    use State::{E, I, M, O, S};
    let (lhm, s1) = first_of(points, "lhm", &[("self", M, Load), ("self", E, Load)], "")?;
    let (shs, s2) = first_of(
        points,
        "shs",
        &[("self", S, Store), ("self", E, Store), ("self", M, Store)],
        " (state S needs a core besides the measuring PU and the holder)",
    )?;
    let others: Vec<String> = {
        let mut v: Vec<String> = points
            .iter()
            .filter(|p| p.class != "self" && p.class != "none" && p.class != class)
            .filter(|p| p.state == M && p.op == Load)
            .map(|p| p.class.clone())
            .collect();
        v.dedup();
        v
    };
    let mut lmm_prefs: Vec<(&str, State, Op)> = vec![
        (class, M, Load),
        (class, O, Load),
        (class, E, Load),
        ("none", I, Load),
    ];
    lmm_prefs.extend(others.iter().map(|c| (c.as_str(), M, Load)));
    let (lmm, s3) = first_of(
        points,
        "lmm",
        &lmm_prefs,
        " (this class was not among the bench cache holders)",
    )?;
    let (shm, s4) = first_of(points, "shm", &[("self", M, Store)], "")?;
    Ok(ClassRates {
        class: class.into(),
        rates: CopyRates { lhm, shs, lmm, shm },
        sources: vec![s1, s2, s3, s4],
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use topocomm_measure::stats::Summary;

    /// One resolved `bench cache` point of one sample (also used by
    /// `compare`'s tests).
    pub(crate) fn pt(class: &str, state: State, op: Op, size: u64, gbps: f64) -> CachePoint {
        CachePoint {
            class: class.into(),
            state,
            op,
            size,
            holder: 0,
            second: None,
            unit: "GB/s".into(),
            passes: 1,
            resolved: true,
            samples: vec![gbps],
            summary: Summary::of(&[gbps]).unwrap(),
        }
    }

    fn table() -> Vec<CachePoint> {
        let mut v = Vec::new();
        for (size, k) in [(4096u64, 1.0), (1 << 20, 0.5)] {
            v.push(pt("self", State::M, Op::Load, size, 100.0 * k));
            v.push(pt("self", State::S, Op::Store, size, 10.0 * k));
            v.push(pt("self", State::M, Op::Store, size, 60.0 * k));
            v.push(pt("l3", State::M, Op::Load, size, 40.0 * k));
            v.push(pt("none", State::I, Op::Load, size, 8.0));
            v.push(pt("self", State::E, Op::Store, size, 50.0));
        }
        v
    }

    #[test]
    fn rates_come_from_the_right_curves() {
        let r = class_rates(&table(), "l3").unwrap();
        assert_eq!(r.rates.lhm.at(4096), 100.0);
        assert_eq!(r.rates.shs.at(4096), 10.0);
        assert_eq!(r.rates.lmm.at(1 << 20), 20.0);
        assert_eq!(r.rates.shm.at(1 << 20), 30.0);
        assert!(r.sources.iter().all(|s| s.fallback.is_none()));
        // S = C / min(LHM, SHS), R = C / min(LMM, SHM) at the message size.
        let s = r.rates.send_chunk(4096, 4096);
        assert!((s - 4096.0 / 10e9).abs() < 1e-18);
        let rr = r.rates.recv_chunk(4096, 1 << 20);
        assert!((rr - 4096.0 / 20e9).abs() < 1e-18);
    }

    #[test]
    fn missing_states_and_classes_fall_back_and_say_so() {
        let pts: Vec<CachePoint> = table()
            .into_iter()
            .filter(|p| p.state != State::S)
            .collect();
        let r = class_rates(&pts, "l3").unwrap();
        assert_eq!(r.rates.shs.at(4096), 50.0);
        let shs = &r.sources[1];
        assert_eq!(shs.used, "self E store");
        assert!(shs.fallback.as_deref().unwrap().contains("self S store"));
        // A class that was not measured: memory (state I) stands in.
        let r = class_rates(&pts, "numa").unwrap();
        assert_eq!(r.sources[2].used, "none I load");
        assert_eq!(r.rates.lmm.at(4096), 8.0);
        // Without I either: another class's M load.
        let no_i: Vec<CachePoint> = pts.into_iter().filter(|p| p.class != "none").collect();
        let r = class_rates(&no_i, "numa").unwrap();
        assert_eq!(r.sources[2].used, "l3 M load");
        // Without SHM nothing stands in: an error naming the rate.
        let no_shm: Vec<CachePoint> = no_i
            .into_iter()
            .filter(|p| !(p.class == "self" && p.op == Op::Store))
            .collect();
        let e = class_rates(&no_shm, "l3").unwrap_err();
        assert!(e.starts_with("SHS") || e.starts_with("SHM"), "{e}");
    }
}
