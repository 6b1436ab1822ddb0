//! Metadata every result file carries, so a number can be traced back to
//! the machine, the build and the command that produced it.

use serde::{Deserialize, Serialize};
use topocomm_topo::Machine;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    /// topocomm version.
    pub version: String,
    /// The command line, as given.
    pub command: Vec<String>,
    pub cpu_model: Option<String>,
    pub kernel: Option<String>,
    pub hostname: Option<String>,
    /// Topology fingerprint (`topocomm_topo::fingerprint`).
    pub fingerprint: String,
    /// Seconds since the Unix epoch when the run started.
    pub started_unix: u64,
    pub timer: crate::timer::TimerInfo,
}

impl RunMeta {
    pub fn new(m: &Machine, timer: crate::timer::TimerInfo) -> Self {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .ok()
                .map(|s| s.trim().to_string())
        };
        RunMeta {
            version: env!("CARGO_PKG_VERSION").to_string(),
            command: std::env::args().collect(),
            cpu_model: m.cpu_model.clone(),
            kernel: read("/proc/sys/kernel/osrelease"),
            hostname: read("/proc/sys/kernel/hostname"),
            fingerprint: m.fingerprint.clone(),
            started_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            timer,
        }
    }
}

/// Seconds since the Unix epoch, now (0 if the clock says earlier).
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Civil UTC date and time of a Unix timestamp: (year, month, day, hour,
/// minute, second), by H. Hinnant's days-to-civil algorithm.
pub fn civil_utc(secs: i64) -> (i64, i64, i64, i64, i64, i64) {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, rem / 3600, rem / 60 % 60, rem % 60)
}

#[cfg(test)]
mod civil_tests {
    #[test]
    fn civil_dates() {
        assert_eq!(super::civil_utc(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(super::civil_utc(951_782_400), (2000, 2, 29, 0, 0, 0));
        assert_eq!(
            super::civil_utc(1_795_392_000 + 3661),
            (2026, 11, 23, 1, 1, 1)
        );
        assert_eq!(super::civil_utc(-1), (1969, 12, 31, 23, 59, 59));
    }
}
