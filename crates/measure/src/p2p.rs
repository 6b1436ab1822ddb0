//! Point-to-point benchmark parameters shared by every backend (the topocomm
//! worker, tc_mpibench under each MPI, the physical limits), and the pinning
//! check of a job's meta line.

use crate::{Error, Result};
use serde::Deserialize;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;
use topocomm_topo::PuSet;

/// One of the four p2p tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Test {
    /// One-way time per message (ping-pong round trip / 2), us.
    Latency,
    /// Window of W non-blocking sends then a small ack (osu_bw), GB/s.
    Bw,
    /// Both directions at once, summed, GB/s.
    Bibw,
    /// The bw exchange counted in messages, Mmsg/s.
    Msgrate,
}

impl Test {
    pub const ALL: [Test; 4] = [Test::Latency, Test::Bw, Test::Bibw, Test::Msgrate];

    pub fn name(self) -> &'static str {
        match self {
            Test::Latency => "latency",
            Test::Bw => "bw",
            Test::Bibw => "bibw",
            Test::Msgrate => "msgrate",
        }
    }

    pub fn unit(self) -> &'static str {
        match self {
            Test::Latency => "us",
            Test::Bw | Test::Bibw => "GB/s",
            Test::Msgrate => "Mmsg/s",
        }
    }

    /// Whether a larger value is better (rates) or worse (times).
    pub fn higher_is_better(self) -> bool {
        !matches!(self, Test::Latency)
    }
}

impl fmt::Display for Test {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Test {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Test::ALL
            .into_iter()
            .find(|t| t.name() == s.trim())
            .ok_or_else(|| Error::UnknownTest { text: s.into() })
    }
}

/// Parses a comma-separated list of tests (`latency,bw`), no repeats.
pub fn parse_tests(text: &str) -> Result<Vec<Test>> {
    let mut out = Vec::new();
    for part in text.split(',').filter(|p| !p.trim().is_empty()) {
        let t: Test = part.parse()?;
        if out.contains(&t) {
            return Err(Error::DuplicateTest { test: t });
        }
        out.push(t);
    }
    if out.is_empty() {
        return Err(Error::EmptyList { what: "tests" });
    }
    Ok(out)
}

/// Parses `8`, `4K`, `4KiB`, `1M`, `64MiB`, `1G` (binary multiples).
pub fn parse_size(text: &str) -> Result<u64> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(digits);
    let n: u64 = num
        .parse()
        .map_err(|_| Error::BadSize { text: text.into() })?;
    let mul: u64 = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => {
            return Err(Error::BadSizeSuffix {
                text: text.into(),
                suffix: suffix.into(),
            })
        }
    };
    n.checked_mul(mul)
        .ok_or_else(|| Error::SizeTooLarge { text: text.into() })
}

/// Parses a comma-separated list of message sizes, 1 B to 1 GiB each.
pub fn parse_sizes(text: &str) -> Result<Vec<u64>> {
    const MAX_SIZES: usize = 64;
    let mut out = Vec::new();
    for part in text.split(',').filter(|p| !p.trim().is_empty()) {
        let s = parse_size(part)?;
        if s == 0 || s > 1 << 30 {
            return Err(Error::SizeOutOfRange { text: part.into() });
        }
        out.push(s);
    }
    if out.is_empty() {
        return Err(Error::EmptyList { what: "sizes" });
    }
    if out.len() > MAX_SIZES {
        return Err(Error::TooManySizes { max: MAX_SIZES });
    }
    Ok(out)
}

/// `1`, `4K`, `64M`: sizes as people write them.
pub fn size_label(n: u64) -> String {
    if n >= 1 << 30 && n % (1 << 30) == 0 {
        format!("{}G", n >> 30)
    } else if n >= 1 << 20 && n % (1 << 20) == 0 {
        format!("{}M", n >> 20)
    } else if n >= 1 << 10 && n % (1 << 10) == 0 {
        format!("{}K", n >> 10)
    } else {
        n.to_string()
    }
}

/// Default sizes: powers of 4 from 1 B to 64 MiB, plus 8 B (the size of the
/// small-message latency targets).
pub fn default_sizes() -> Vec<u64> {
    let mut v: Vec<u64> = (0..14).map(|i| 1u64 << (2 * i)).collect();
    v.insert(2, 8);
    v
}

/// What every backend is asked to measure for one pair and one cache mode;
/// [`P2pParams::worker_args`] is the common command-line contract of the
/// topocomm worker and tc_mpibench.
#[derive(Clone, Debug, PartialEq)]
pub struct P2pParams {
    pub tests: Vec<Test>,
    pub sizes: Vec<u64>,
    pub cold: bool,
    pub llc: u64,
    pub samples: usize,
    pub min_time_ms: f64,
    pub window: u32,
    /// 8-byte ping-pongs after every sample, whose one-way time the worker
    /// prints next to it (`--probe N`; 0: none): the machine state each
    /// sample ran in (crate::p2p_placement).
    pub probe: u32,
}

impl P2pParams {
    pub fn cache(&self) -> &'static str {
        if self.cold {
            "cold"
        } else {
            "hot"
        }
    }

    /// `--tests .. --sizes .. --cache .. --llc .. --samples .. --min-time-ms .. --window ..`,
    /// then `--probe N` when `probe` > 0.
    pub fn worker_args(&self) -> Vec<String> {
        let join = |v: Vec<String>| v.join(",");
        vec![
            "--tests".into(),
            join(self.tests.iter().map(|t| t.name().to_string()).collect()),
            "--sizes".into(),
            join(self.sizes.iter().map(u64::to_string).collect()),
            "--cache".into(),
            self.cache().into(),
            "--llc".into(),
            self.llc.to_string(),
            "--samples".into(),
            self.samples.to_string(),
            "--min-time-ms".into(),
            format!("{}", self.min_time_ms),
            "--window".into(),
            self.window.to_string(),
        ]
        .into_iter()
        .chain(
            (self.probe > 0)
                .then(|| ["--probe".into(), self.probe.to_string()])
                .into_iter()
                .flatten(),
        )
        .collect()
    }

    /// A generous bound on one backend's run: start-up, then per (test,
    /// size) the warm-up and samples, each at least one batch, assuming a
    /// pessimistic 0.5 GB/s for windows of large messages.
    pub fn time_bound(&self) -> Duration {
        let mut secs = 30.0;
        for t in &self.tests {
            for &s in &self.sizes {
                let bytes = match t {
                    Test::Latency => 2.0 * s as f64,
                    Test::Bibw => 2.0 * s as f64 * f64::from(self.window),
                    _ => s as f64 * f64::from(self.window),
                };
                let batch = (self.min_time_ms / 1e3).max(bytes / 0.5e9 + 1e-3);
                // Calibration (a few batches) + warm-up + samples.
                secs += batch * (self.samples as f64 + 8.0) * 2.0;
            }
        }
        Duration::from_secs_f64(secs.min(6.0 * 3600.0))
    }
}

/// Where one rank of a job ran, as its meta line says.
#[derive(Clone, Debug, Deserialize, PartialEq, serde::Serialize)]
pub struct RankPlace {
    pub rank: u32,
    /// `sched_getcpu()` when the rank reported.
    pub cpu: i64,
    /// The rank's affinity list (`0`, `0-3`).
    pub affinity: String,
}

#[derive(Deserialize)]
struct MetaBody {
    #[serde(default)]
    ranks: Vec<RankPlace>,
    #[serde(default)]
    wtick: Option<f64>,
}

/// The pinning meta of a job: `{"tc_mpibench_meta":{...}}` (tc_mpibench) or
/// `{"bench_meta":{...}}` (other workers), found on stderr or stdout.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct JobMeta {
    pub ranks: Vec<RankPlace>,
    /// The job's clock tick in seconds, if it says.
    pub wtick: Option<f64>,
}

/// Finds the meta line in a job's output, if any.
pub fn find_meta(text: &str) -> Option<JobMeta> {
    for line in text.lines().map(str::trim).filter(|l| l.starts_with('{')) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        for key in ["tc_mpibench_meta", "bench_meta"] {
            if let Some(body) = v.get(key) {
                if let Ok(b) = serde_json::from_value::<MetaBody>(body.clone()) {
                    return Some(JobMeta {
                        ranks: b.ranks,
                        wtick: b.wtick,
                    });
                }
            }
        }
    }
    None
}

/// Refuses a job whose ranks did not run exactly where asked: rank 0 on P,
/// rank 1 on Q, each bound to that one PU.
pub fn verify_pinning(meta: &JobMeta, pair: (u32, u32), what: &str) -> Result<()> {
    for (rank, want) in [(0u32, pair.0), (1u32, pair.1)] {
        let r =
            meta.ranks
                .iter()
                .find(|r| r.rank == rank)
                .ok_or_else(|| Error::RankUnreported {
                    what: what.into(),
                    rank,
                })?;
        let aff = PuSet::parse_list(&r.affinity).map_err(|reason| Error::BadAffinity {
            what: what.into(),
            rank,
            affinity: r.affinity.clone(),
            reason,
        })?;
        if aff.indexes() != [want] || r.cpu != i64::from(want) {
            return Err(Error::WrongBinding {
                what: what.into(),
                rank,
                pu: want,
                cpu: r.cpu,
                affinity: r.affinity.clone(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tests_and_sizes() {
        assert_eq!(
            parse_tests("latency,bw").unwrap(),
            vec![Test::Latency, Test::Bw]
        );
        let err = |r: Result<Vec<Test>>| r.unwrap_err().to_string();
        assert_eq!(
            err(parse_tests("latency,latency")),
            "test 'latency' is listed twice"
        );
        assert_eq!(
            err(parse_tests("lat")),
            "unknown test 'lat' (expected latency, bw, bibw, msgrate)"
        );
        assert_eq!(err(parse_tests(",")), "empty list of tests");
        let err = |r: Result<Vec<u64>>| r.unwrap_err().to_string();
        assert_eq!(parse_sizes("1,4K,64MiB").unwrap(), vec![1, 4096, 64 << 20]);
        assert_eq!(
            err(parse_sizes("0")),
            "size '0' is out of range (1 B to 1 GiB)"
        );
        assert_eq!(
            err(parse_sizes("4X")),
            "bad size '4X' (unknown suffix 'X'; use K, M or G)"
        );
        assert_eq!(
            err(parse_sizes("x")),
            "bad size 'x' (expected bytes such as 8, 4K, 1MiB)"
        );
        assert_eq!(
            err(parse_sizes("99999999999999999999G")),
            "bad size '99999999999999999999G' (expected bytes such as 8, 4K, 1MiB)"
        );
        assert_eq!(
            err(parse_sizes("9999999999999G")),
            "size '9999999999999G' is too large"
        );
        assert_eq!(err(parse_sizes("")), "empty list of sizes");
        assert_eq!(
            err(parse_sizes(&vec!["8"; 65].join(","))),
            "at most 64 sizes"
        );
        assert_eq!(default_sizes()[..4], [1, 4, 8, 16]);
        assert_eq!(default_sizes().last(), Some(&(64 << 20)));
        assert_eq!(size_label(65536), "64K");
        assert_eq!(size_label(1000), "1000");
    }

    #[test]
    fn worker_args_round_trip_the_contract() {
        let p = P2pParams {
            tests: vec![Test::Latency, Test::Bibw],
            sizes: vec![8, 65536],
            cold: true,
            llc: 32 << 20,
            samples: 9,
            min_time_ms: 2.5,
            window: 64,
            probe: 0,
        };
        assert_eq!(
            p.worker_args().join(" "),
            "--tests latency,bibw --sizes 8,65536 --cache cold --llc 33554432 --samples 9 --min-time-ms 2.5 --window 64"
        );
        assert!(p.time_bound() > Duration::from_secs(30));
    }

    #[test]
    fn pinning_is_checked() {
        let text = "noise\n{\"tc_mpibench_meta\":{\"impl\":\"x\",\"wtick\":1e-09,\"ranks\":[{\"rank\":0,\"cpu\":0,\"affinity\":\"0\"},{\"rank\":1,\"cpu\":1,\"affinity\":\"1\"}]}}\n";
        let m = find_meta(text).unwrap();
        assert_eq!(m.wtick, Some(1e-9));
        verify_pinning(&m, (0, 1), "t").unwrap();
        let e = verify_pinning(&m, (1, 0), "t").unwrap_err().to_string();
        assert_eq!(e, "t: rank 0 should be bound to PU 1 but ran on CPU 0 with affinity 0; refusing a silently wrong binding");
        let loose = "{\"bench_meta\":{\"ranks\":[{\"rank\":0,\"cpu\":0,\"affinity\":\"0-1\"},{\"rank\":1,\"cpu\":1,\"affinity\":\"1\"}]}}";
        let e = verify_pinning(&find_meta(loose).unwrap(), (0, 1), "t").unwrap_err();
        assert!(e.to_string().contains("affinity 0-1"), "{e}");
        let one = "{\"bench_meta\":{\"ranks\":[{\"rank\":0,\"cpu\":0,\"affinity\":\"0\"}]}}";
        let e = verify_pinning(&find_meta(one).unwrap(), (0, 1), "t").unwrap_err();
        assert_eq!(e.to_string(), "t: rank 1 did not report where it ran");
        assert!(find_meta("{\"impl\":\"x\"}").is_none());
    }
}
