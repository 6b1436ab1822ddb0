//! The JSON sample line shared by every p2p-style benchmark backend: the
//! topocomm worker (`topocomm-worker`, or `topocomm bench-worker p2p` under `topocomm run`) and the MPI benchmark
//! (`mpi/bench/tc_mpibench`) print one line per (test, size, cache):
//!
//! `{"impl":"topocomm","test":"latency","size":8,"cache":"hot","unit":"us","samples":[...]}`

use crate::{Error, Result};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SampleLine {
    #[serde(rename = "impl")]
    pub implementation: String,
    /// `latency` (one-way, us), `bw` / `bibw` (GB/s = 1e9 B/s), `msgrate` (Mmsg/s).
    pub test: String,
    pub size: u64,
    /// `hot` (buffer reuse) or `cold` (rotating buffers beyond the LLC).
    pub cache: String,
    pub unit: String,
    pub samples: Vec<f64>,
    /// With the workers' `--probe N`: the one-way time (us) of the 8-byte
    /// ping-pongs run right after each sample, one per sample: which machine
    /// state each sample ran in (docs/formats/bench-json.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_us: Option<Vec<f64>>,
}

impl SampleLine {
    /// Parses every sample line of a backend's output; other lines (warnings,
    /// banners) are skipped, malformed JSON lines are an error naming the line.
    pub fn parse_all(output: &str, source: &str) -> Result<Vec<SampleLine>> {
        let mut out = Vec::new();
        for (i, line) in output.lines().enumerate() {
            let line = line.trim();
            if !line.starts_with('{') {
                continue;
            }
            let rec: SampleLine =
                serde_json::from_str(line).map_err(|cause| Error::NotSampleLine {
                    origin: source.into(),
                    line: i + 1,
                    cause,
                })?;
            if rec.samples.is_empty() {
                return Err(Error::NoSamples {
                    origin: source.into(),
                    line: i + 1,
                });
            }
            out.push(rec);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_skips_noise() {
        let text = "warning: x\n{\"impl\":\"openmpi\",\"test\":\"bw\",\"size\":65536,\"cache\":\"hot\",\"unit\":\"GB/s\",\"samples\":[1.5,2.0]}\n";
        let v = SampleLine::parse_all(text, "t").unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].implementation, "openmpi");
        assert_eq!(v[0].samples, vec![1.5, 2.0]);
        let e = SampleLine::parse_all("{\"impl\":1}", "t").unwrap_err();
        assert!(
            e.to_string().starts_with("t: line 1: not a sample line ("),
            "{e}"
        );
        let e = SampleLine::parse_all("x\n{\"impl\":\"a\",\"test\":\"bw\",\"size\":8,\"cache\":\"hot\",\"unit\":\"GB/s\",\"samples\":[]}", "t").unwrap_err();
        assert_eq!(e.to_string(), "t: line 2: no samples");
    }
}
