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
