//! `topocomm topo`: the machine model for people and scripts. The text is
//! `topocomm_topo::text`'s; this module picks the view and prints it.

use crate::common::{usage, GlobalOpts};
use anyhow::{anyhow, Result};
use std::process::ExitCode;
use topocomm_topo::text::{classes_lines, matrix_text, summary, MATRIX_MAX_PUS};
use topocomm_topo::ClassMatrix;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// List the classes present, one per line: `<class> <pair-count> <P>,<Q>` (OS indexes)
    #[arg(long, conflicts_with_all = ["pair", "matrix", "json"])]
    pub classes: bool,
    /// Print the locality class of two PUs: OS indexes, e.g. `--pair 0,4`, or hwloc
    /// locations, e.g. `--pair core:0,core:1` (docs/concepts/locations.md)
    #[arg(long, value_name = "A,B", conflicts_with_all = ["matrix", "json"])]
    pub pair: Option<String>,
    /// Print the class of every PU pair, rows and columns in topology order
    #[arg(long, conflicts_with = "json")]
    pub matrix: bool,
    /// Write the machine model as JSON (schema topocomm.machine/1) on stdout
    #[arg(long)]
    pub json: bool,
    /// Always print the full tree (by default only up to 64 PUs)
    #[arg(long)]
    pub tree: bool,
}

pub fn run(g: &GlobalOpts, a: &Args) -> Result<ExitCode> {
    let m = g.machine()?;
    if let Some(pair) = &a.pair {
        let (p, q) = topocomm_topo::resolve_pair(&m, pair)
            .map_err(|e| usage(anyhow::anyhow!("--pair: {e}")))?;
        println!("{}", topocomm_topo::pair_class(&m, p, q)?);
        return Ok(ExitCode::SUCCESS);
    }
    if a.json {
        println!("{}", m.to_json());
        return Ok(ExitCode::SUCCESS);
    }
    let cm = ClassMatrix::new(&m);
    if a.classes {
        print!("{}", classes_lines(&cm));
        return Ok(ExitCode::SUCCESS);
    }
    if a.matrix {
        if cm.len() > MATRIX_MAX_PUS {
            return Err(usage(anyhow!(
                "--matrix: this topology has {} PUs, a {0}x{0} matrix; at most {MATRIX_MAX_PUS} PUs are printed (use --classes, or --pair P,Q for one pair)",
                cm.len()
            )));
        }
        print!("{}", matrix_text(&cm));
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", summary(&m, &cm, a.tree || m.pus.len() <= 64));
    Ok(ExitCode::SUCCESS)
}
