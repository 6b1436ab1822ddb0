//! What the run knows about each setting it measured: every score it got
//! against paired defaults (as a candidate, as the re-measured incumbent,
//! in confirmations), so that the bar a challenger must beat is the
//! incumbent's *typical* score, not its latest one.
//!
//! Why: on a shared VM one job in several runs 2-3x slower (or faster) as a
//! whole, and copy-in/copy-out pipelines switch between a fast and a slow
//! mode. When the bar was the incumbent's latest re-measurement, one slow job
//! of a confirmed x3 incumbent let a x1.3 candidate replace it, and the
//! descent wandered off (issue 21: three runs, three different settings).
//! The median of all its measurements moves only when most of them move.

use crate::space::Setting;

/// The scores of one setting in this run.
#[derive(Clone, Debug, Default)]
pub(super) struct Standing {
    scores: Vec<f64>,
    vetoed: usize,
}

impl Standing {
    /// How many times the setting was measured.
    pub(super) fn count(&self) -> usize {
        self.scores.len()
    }

    /// The median score (the lower middle one for an even count, which
    /// errs on the side of the challenger).
    pub(super) fn median(&self) -> f64 {
        let mut s = self.scores.clone();
        s.sort_by(f64::total_cmp);
        match s.len() {
            0 => 1.0,
            n => s[(n - 1) / 2],
        }
    }

    /// Vetoed (a size slower beyond the noise, or a failed job) in most of
    /// its measurements: established, not one unlucky job.
    pub(super) fn mostly_vetoed(&self) -> bool {
        2 * self.vetoed > self.scores.len()
    }

    /// The score a challenger must beat: the median, never below the
    /// defaults (1); the defaults' own 1 when the setting is mostly vetoed.
    pub(super) fn bar(&self) -> f64 {
        if self.mostly_vetoed() {
            1.0
        } else {
            self.median().max(1.0)
        }
    }
}

/// Every setting measured in the run, with its standing.
#[derive(Default)]
pub(super) struct Standings {
    entries: Vec<(Setting, Standing)>,
}

impl Standings {
    /// Records one measurement (`feasible = false` for a veto or a failure).
    pub(super) fn record(&mut self, setting: &Setting, score: f64, feasible: bool) {
        let i = match self.entries.iter().position(|(s, _)| s == setting) {
            Some(i) => i,
            None => {
                self.entries.push((setting.clone(), Standing::default()));
                self.entries.len() - 1
            }
        };
        let st = &mut self.entries[i].1;
        st.scores.push(score);
        st.vetoed += usize::from(!feasible);
    }

    /// The setting's standing (empty when never measured).
    pub(super) fn of(&self, setting: &Setting) -> Standing {
        self.entries
            .iter()
            .find(|(s, _)| s == setting)
            .map(|(_, st)| st.clone())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(v: &str) -> Setting {
        Setting::from([("p".to_string(), v.to_string())])
    }

    #[test]
    fn one_slow_job_does_not_move_the_bar() {
        let mut st = Standings::default();
        let a = setting("a");
        for x in [3.1, 2.6, 2.5] {
            st.record(&a, x, true);
        }
        // The incumbent's latest re-measurement ran in a slow mode.
        st.record(&a, 1.2, true);
        let s = st.of(&a);
        assert_eq!(s.count(), 4);
        assert_eq!(s.median(), 2.5);
        assert_eq!(s.bar(), 2.5);
        // Most of them slow: then the bar follows.
        st.record(&a, 1.1, true);
        st.record(&a, 1.3, true);
        assert_eq!(st.of(&a).bar(), 1.3);
    }

    #[test]
    fn a_setting_vetoed_in_most_measurements_bars_at_the_defaults() {
        let mut st = Standings::default();
        let a = setting("a");
        st.record(&a, 2.0, true);
        st.record(&a, 2.2, false);
        assert!(!st.of(&a).mostly_vetoed());
        assert_eq!(st.of(&a).bar(), 2.0);
        st.record(&a, 2.1, false);
        assert!(st.of(&a).mostly_vetoed());
        assert_eq!(st.of(&a).bar(), 1.0);
        // Below the defaults the bar is the defaults.
        let b = setting("b");
        st.record(&b, 0.8, true);
        assert_eq!(st.of(&b).bar(), 1.0);
        assert_eq!(st.of(&setting("c")).count(), 0);
    }
}
