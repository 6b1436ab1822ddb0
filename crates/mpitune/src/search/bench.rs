//! The measuring side of the search: timed jobs of the defaults and of
//! the candidates, each candidate judged against its paired defaults under
//! the run's A/A noise and its scope; the steps and messages they make.

use super::{MeasureFn, Step};
use crate::objective::{
    combine, compare_with, evidence, job_level_shift, ClassMeasure, ClassVerdict, NoiseFloor,
    Objective, Rule, Shift,
};
use crate::space::{Setting, Space};
use std::time::Instant;

/// One setting measured against paired defaults.
#[derive(Clone)]
pub(super) struct Scored {
    pub(super) score: f64,
    pub(super) feasible: bool,
    pub(super) error: Option<String>,
    pub(super) verdicts: Vec<ClassVerdict>,
    /// The first pair looked like a machine event and was measured again.
    pub(super) remeasured: bool,
    pub(super) seconds: f64,
}

impl Step {
    pub(super) fn defaults(round: usize, param: &str, seconds: f64) -> Step {
        Step {
            round,
            param: param.into(),
            role: "defaults".into(),
            setting: Setting::new(),
            score: 1.0,
            feasible: true,
            error: None,
            remeasured: false,
            slower: Vec::new(),
            out_of_scope: Vec::new(),
            seconds,
        }
    }

    pub(super) fn scored(
        round: usize,
        param: &str,
        role: &str,
        setting: &Setting,
        sc: &Scored,
    ) -> Step {
        Step {
            round,
            param: param.into(),
            role: role.into(),
            setting: setting.clone(),
            score: sc.score,
            feasible: sc.feasible,
            error: sc.error.clone(),
            remeasured: sc.remeasured,
            slower: listed(&sc.verdicts, true),
            out_of_scope: listed(&sc.verdicts, false),
            seconds: sc.seconds,
        }
    }
}

/// The measuring side of the search: timed jobs and their comparison.
pub(super) struct Bench<'m, 'a> {
    measure: &'m mut MeasureFn<'a>,
    weights: &'m [f64],
    objective: Objective,
    space: &'m Space,
    /// A/A pairs of this run's jobs of the defaults.
    pub(super) noise: NoiseFloor,
    last_defaults: Option<Vec<ClassMeasure>>,
}

impl<'m, 'a> Bench<'m, 'a> {
    pub(super) fn new(
        measure: &'m mut MeasureFn<'a>,
        weights: &'m [f64],
        objective: Objective,
        space: &'m Space,
    ) -> Self {
        Bench {
            measure,
            weights,
            objective,
            space,
            noise: NoiseFloor::default(),
            last_defaults: None,
        }
    }

    fn timed(&mut self, s: &Setting) -> (Result<Vec<ClassMeasure>, String>, f64) {
        let t = Instant::now();
        let r = (self.measure)(s);
        (r, t.elapsed().as_secs_f64())
    }

    /// The defaults; failing to run them ends the search.
    /// Each job of the defaults and the one before it form an A/A pair.
    pub(super) fn defaults(&mut self) -> Result<(Vec<ClassMeasure>, f64), String> {
        let (r, secs) = self.timed(&Setting::new());
        let d = r.map_err(|e| format!("measuring the defaults: {e}"))?;
        if let Some(prev) = &self.last_defaults {
            self.noise.add_pair(prev, &d);
        }
        self.last_defaults = Some(d.clone());
        Ok((d, secs))
    }

    fn score(
        &self,
        d: &[ClassMeasure],
        c: &[ClassMeasure],
        s: &Setting,
    ) -> (f64, bool, Vec<ClassVerdict>) {
        let scope = self.space.scope(s);
        let v: Vec<ClassVerdict> = d
            .iter()
            .zip(c)
            .enumerate()
            .map(|(i, (d, c))| {
                let rule = Rule {
                    noise: Some((&self.noise, i)),
                    scope: Some(&scope),
                };
                compare_with(d, c, &self.objective, rule)
            })
            .collect();
        let (s, f) = combine(&v, self.weights);
        (s, f, v)
    }

    /// `s` against the defaults `d`. When the setting's job came out slower
    /// at (almost) every size, a machine event is more likely than the
    /// setting: the pair is measured again once, and the new defaults
    /// replace `d`.
    pub(super) fn against(
        &mut self,
        d: &mut Vec<ClassMeasure>,
        s: &Setting,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Scored, String> {
        let (r, mut seconds) = self.timed(s);
        let mut sc = self.scored(d, r, s);
        if job_level_shift(&sc.verdicts) == Some(Shift::Slower) {
            progress("  every size moved together: measuring the pair again");
            let (d2, secs_d) = self.defaults()?;
            *d = d2;
            let (r, secs_c) = self.timed(s);
            seconds += secs_d + secs_c;
            sc = self.scored(d, r, s);
            sc.remeasured = true;
        }
        sc.seconds += seconds;
        Ok(sc)
    }

    fn scored(
        &self,
        d: &[ClassMeasure],
        r: Result<Vec<ClassMeasure>, String>,
        setting: &Setting,
    ) -> Scored {
        let (score, feasible, error, verdicts) = match r {
            Ok(c) => {
                let (s, f, v) = self.score(d, &c, setting);
                (s, f, None, v)
            }
            Err(e) => (0.0, false, Some(e), Vec::new()),
        };
        Scored {
            score,
            feasible,
            error,
            verdicts,
            remeasured: false,
            seconds: 0.0,
        }
    }
}

/// The evidence of the sizes slower beyond the noise: in scope (`true`,
/// vetoing) or out of it.
fn listed(verdicts: &[ClassVerdict], in_scope: bool) -> Vec<String> {
    verdicts
        .iter()
        .flat_map(|v| {
            v.sizes
                .iter()
                .filter(move |c| c.slower && c.in_scope == in_scope)
                .map(|c| evidence(&v.class, c))
        })
        .collect()
}

/// The parameters whose value differs from `from` to `to`.
pub(super) fn moved(from: &Setting, to: &Setting) -> Vec<(String, Option<String>)> {
    let mut keys: Vec<&String> = from.keys().chain(to.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| from.get(*k) != to.get(*k))
        .map(|k| (k.clone(), to.get(k).cloned()))
        .collect()
}

/// ` (rejected: slower at bw 1K, latency 8)` or ` (failed: ...)`, or nothing.
pub(super) fn why_rejected(
    feasible: bool,
    error: Option<&str>,
    verdicts: &[ClassVerdict],
) -> String {
    if let Some(e) = error {
        return format!(" (failed: {e})");
    }
    let out = listed(verdicts, false);
    let out = if out.is_empty() {
        String::new()
    } else {
        format!(" (out of scope, not vetoing: {})", out.join(", "))
    };
    if feasible {
        return out;
    }
    format!(
        " (rejected: slower beyond the noise at {}){out}",
        listed(verdicts, true).join(", ")
    )
}
