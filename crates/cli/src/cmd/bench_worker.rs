//! `topocomm bench-worker p2p` (hidden): the rank part of the p2p
//! benchmark worker (`topocomm_transport::worker`, the same as the
//! `topocomm-worker` binary's), for jobs started with `topocomm run -n 2`.
//! Rank 0 prints one JSON line per (test, size, cache):
//! `{"impl":"topocomm","test":..,"size":..,"cache":..,"unit":..,"samples":[..]}`
//! (with `--probe N`, also `"probe_us":[..]`, one per sample), and one
//! pinning line on stderr: `{"bench_meta":{"ranks":[{"rank":0,"cpu":0,"affinity":"0"},..]}}`.

use crate::common::GlobalOpts;
use anyhow::Result;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub kind: Kind,
}

#[derive(clap::Subcommand, Debug)]
pub enum Kind {
    /// Point-to-point latency, bandwidth, bidirectional bandwidth, message
    /// rate (--help lists the arguments)
    #[command(disable_help_flag = true)]
    P2p {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

pub fn run(_g: &GlobalOpts, a: &Args) -> Result<ExitCode> {
    let Kind::P2p { args } = &a.kind;
    let code = topocomm_transport::worker::p2p_rank(args)?;
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}
