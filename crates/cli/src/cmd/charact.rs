//! Helpers shared by the characterization commands (`bench cache`,
//! `bench placement`, `bench matrix`): progress bar, output files, and the
//! size syntax and number formats of `topocomm_measure::charact`.

use anyhow::{Context, Result};
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::Instant;
pub use topocomm_measure::charact::size_label;

/// A progress bar with ETA on stderr: redrawn in place on a terminal, one
/// line per 10% otherwise (logs, CI).
pub struct Progress {
    label: String,
    total: usize,
    start: Instant,
    tty: bool,
    last_decile: usize,
}

impl Progress {
    pub fn new(label: &str, total: usize) -> Progress {
        Progress {
            label: label.into(),
            total: total.max(1),
            start: Instant::now(),
            tty: std::io::stderr().is_terminal(),
            last_decile: 0,
        }
    }

    pub fn tick(&mut self, done: usize) {
        if crate::common::quiet() {
            return;
        }
        let el = self.start.elapsed().as_secs_f64();
        let eta = if done > 0 {
            el / done as f64 * (self.total.saturating_sub(done)) as f64
        } else {
            0.0
        };
        let frac = done as f64 / self.total as f64;
        let text = format!(
            "{} [{:<30}] {done}/{} elapsed {} ETA {}",
            self.label,
            "#".repeat((frac * 30.0) as usize),
            self.total,
            clock(el),
            clock(eta)
        );
        let mut e = std::io::stderr();
        if self.tty {
            let _ = write!(e, "\r{text}");
            if done >= self.total {
                let _ = writeln!(e);
            }
        } else {
            let decile = (frac * 10.0) as usize;
            if decile > self.last_decile || done >= self.total {
                self.last_decile = decile;
                let _ = writeln!(e, "{text}");
            }
        }
    }
}

fn clock(s: f64) -> String {
    let s = s.round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s / 60 % 60)
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

/// Writes a file (atomically), naming it in the error.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create folder '{}'", dir.display()))?;
    }
    topocomm_report::write_atomic(path, bytes)
        .with_context(|| format!("cannot write '{}'", path.display()))
}

/// Writes `value` as pretty-printed JSON to `path` (see [`write_file`]).
pub fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<()> {
    write_file(path, serde_json::to_string_pretty(value)?.as_bytes())
}

/// Fails unless `m` is the machine we are running on (see topocomm_measure::target).
pub fn require_live(m: &topocomm_topo::Machine) -> Result<()> {
    Ok(topocomm_measure::target::require_live(m)?)
}

/// The timer check, also printed so every run shows it.
pub fn timer_checked() -> topocomm_measure::timer::TimerInfo {
    let t = topocomm_measure::timer::check();
    crate::common::note(&format!(
        "timer: resolution {:.0} ns, overhead {:.0} ns per reading",
        t.resolution_ns, t.overhead_ns
    ));
    t
}
