//! Helpers shared by the characterization commands (`bench cache`,
//! `bench placement`, `bench matrix`): progress bar, size lists, output files.

use anyhow::{Context, Result};
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::Instant;

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

/// Parses a byte count: `4096`, `4K`, `4KiB`, `1M`, `2G` (binary units).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (num, mul) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 1 << 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("'{text}' is not a size (expected e.g. 4096, 64K, 1M, 2G)"))
}

/// Comma-separated list of sizes.
pub fn parse_sizes(text: &str) -> Result<Vec<u64>, String> {
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(parse_size)
        .collect()
}

/// Human size for tables: 1K, 64K, 1M.
pub fn size_label(n: u64) -> String {
    topocomm_report::bytes_label(n as f64)
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

/// `value [ci_low, ci_high]` with a precision fit for the magnitude.
pub fn fmt_ci(s: &topocomm_measure::Summary) -> String {
    format!("{} [{}, {}]", num(s.median), num(s.ci_low), num(s.ci_high))
}

pub fn num(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// Fails unless `m` is the machine we are running on (see topocomm_measure::target).
pub fn require_live(m: &topocomm_topo::Machine) -> Result<()> {
    Ok(topocomm_measure::target::require_live(m)?)
}

/// The timer check, also printed so every run shows it.
pub fn timer_checked() -> topocomm_measure::timer::TimerInfo {
    let t = topocomm_measure::timer::check();
    eprintln!(
        "timer: resolution {:.0} ns, overhead {:.0} ns per reading",
        t.resolution_ns, t.overhead_ns
    );
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("64K").unwrap(), 65536);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert!(parse_size("x").is_err());
        assert!(parse_size("0").is_err());
        assert_eq!(parse_sizes("1K,2K").unwrap(), vec![1024, 2048]);
    }
}
