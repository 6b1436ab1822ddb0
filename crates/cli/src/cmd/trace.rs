//! `topocomm trace -- mpirun ... ./app`: runs an MPI program with the PMPI
//! tracer preloaded and summarizes the communication matrix it wrote.

pub mod launcher;

use crate::common::usage;
use anyhow::{bail, Context, Result};
use launcher::Impl;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Folder holding `<impl>/libtopocomm-*.so` (normally `<repo>/mpi/build`).
pub const MPI_BUILD_ENV: &str = "TOPOCOMM_MPI_BUILD";
/// Variables read by the tracer (mpi/lib/trace/trace.h).
const OUT_ENV: &str = "TOPOCOMM_TRACE_OUT";
const COLL_ENV: &str = "TOPOCOMM_TRACE_COLLECTIVES";

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where the tracer writes the CSV edge list `src,dst,bytes,msgs`
    #[arg(long, default_value = "topocomm-trace.csv", value_name = "FILE")]
    pub out: PathBuf,
    /// Also count collectives, decomposed into their logical point-to-point
    /// pattern (see docs/mpi.md)
    #[arg(long)]
    pub collectives: bool,
    /// MPI of the launcher, when it cannot be detected: openmpi or mpich
    #[arg(long = "impl", value_name = "openmpi|mpich")]
    pub imp: Option<String>,
    /// The tracer library to preload (default: searched in $TOPOCOMM_MPI_BUILD,
    /// <exe>/../lib/topocomm, <exe>/../../mpi/build, ./mpi/build)
    #[arg(long, value_name = "FILE")]
    pub lib: Option<PathBuf>,
    /// The summary as one JSON object on stdout instead of the text lines
    #[arg(long)]
    pub json: bool,
    /// The launch command, after `--`: e.g. `-- mpirun -np 16 ./app args`
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

pub fn run(a: &Args) -> Result<ExitCode> {
    let launcher = &a.command[0];
    let imp = match &a.imp {
        Some(s) => Impl::parse(s).map_err(usage)?,
        None => launcher::detect(launcher).map_err(usage)?,
    };
    let lib = match &a.lib {
        Some(p) if p.is_file() => std::fs::canonicalize(p).unwrap_or(p.clone()),
        Some(p) => {
            return Err(usage(anyhow::anyhow!(
                "--lib {}: no such file",
                p.display()
            )))
        }
        None => launcher::find_lib(imp, "trace")?,
    };
    let out = absolute(&a.out)?;
    // A stale file from an earlier run must not pass for this run's trace.
    match std::fs::remove_file(&out) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("--out {}", out.display())),
    }
    // The Fortran bridge in front of the tracer: Fortran programs are traced
    // under Open MPI too (docs/mpi.md, "Fortran").
    let preload = launcher::preload_value(imp, &lib)?;
    let mut vars = vec![
        ("LD_PRELOAD".to_string(), preload.clone()),
        (OUT_ENV.to_string(), out.display().to_string()),
    ];
    if a.collectives {
        vars.push((COLL_ENV.to_string(), "1".to_string()));
    }
    let argv = launcher::with_env(imp, &a.command, &vars);
    eprintln!("trace: {} launcher, preloading {}", imp.name(), preload);
    let status = Command::new(&argv[0])
        .args(&argv[1..])
        .status()
        .with_context(|| format!("cannot run '{}'", argv[0]))?;
    if !status.success() {
        bail!(
            "the traced command exited with {status}{}",
            if out.exists() {
                ""
            } else {
                "; no trace written"
            }
        );
    }
    if !out.is_file() {
        bail!(
            "the tracer wrote no {}: did every rank reach MPI_Finalize, and is the program \
             dynamically linked with {} (the MPI of '{launcher}')?",
            out.display(),
            imp.name()
        );
    }
    let s = summarize(&out)?;
    if a.json {
        let heaviest = s
            .heaviest
            .map(|(src, dst, bytes)| serde_json::json!({ "src": src, "dst": dst, "bytes": bytes }));
        let doc = serde_json::json!({
            "file": out.display().to_string(), "mpi": imp.name(), "collectives": a.collectives,
            "ranks": s.ranks, "pairs": s.pairs, "bytes": s.bytes, "msgs": s.msgs, "heaviest": heaviest,
        });
        println!("{doc}");
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "trace: {} ({}{}): {} ranks, {} pairs, {} bytes, {} messages",
        out.display(),
        imp.name(),
        if a.collectives {
            ", point-to-point + collectives"
        } else {
            ", point-to-point"
        },
        s.ranks,
        s.pairs,
        s.bytes,
        s.msgs
    );
    if let Some((src, dst, b)) = s.heaviest {
        println!("trace: heaviest pair {src} -> {dst}: {b} bytes");
    }
    Ok(ExitCode::SUCCESS)
}

fn absolute(p: &Path) -> Result<PathBuf> {
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    Ok(std::env::current_dir()
        .context("current directory")?
        .join(p))
}

/// Totals of a `src,dst,bytes,msgs` file.
#[derive(Debug, Default, PartialEq)]
pub struct Summary {
    /// Highest rank seen + 1 (ranks that neither sent nor received are not
    /// visible in the edge list).
    pub ranks: u64,
    pub pairs: u64,
    pub bytes: u64,
    pub msgs: u64,
    pub heaviest: Option<(u64, u64, u64)>,
}

pub fn summarize(path: &Path) -> Result<Summary> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    summarize_text(&text).with_context(|| path.display().to_string())
}

fn summarize_text(text: &str) -> Result<Summary> {
    let mut s = Summary::default();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || (i == 0 && line.starts_with("src")) {
            continue;
        }
        let f: Vec<&str> = line.split(',').collect();
        if f.len() != 4 {
            bail!("line {}: expected src,dst,bytes,msgs", i + 1);
        }
        let mut v = [0u64; 4];
        for (k, x) in f.iter().enumerate() {
            v[k] = x.trim().parse().with_context(|| {
                format!(
                    "line {} column {}: expected a non-negative integer, got '{x}'",
                    i + 1,
                    k + 1
                )
            })?;
        }
        s.ranks = s.ranks.max(v[0] + 1).max(v[1] + 1);
        s.pairs += 1;
        s.bytes += v[2];
        s.msgs += v[3];
        if s.heaviest.is_none_or(|h| v[2] > h.2) {
            s.heaviest = Some((v[0], v[1], v[2]));
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_csv() {
        let s = summarize_text("src,dst,bytes,msgs\n0,1,100,2\n1,3,50,1\n").unwrap();
        assert_eq!(s.ranks, 4);
        assert_eq!(s.pairs, 2);
        assert_eq!(s.bytes, 150);
        assert_eq!(s.msgs, 3);
        assert_eq!(s.heaviest, Some((0, 1, 100)));
    }

    #[test]
    fn bad_csv_names_line_and_column() {
        let e = summarize_text("src,dst,bytes,msgs\n0,1,x,2\n").unwrap_err();
        assert!(format!("{e:#}").contains("line 2 column 3"), "{e:#}");
    }
}
