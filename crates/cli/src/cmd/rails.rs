//! `topocomm rails`: network rails and GPUs with their locality, NUIOA split
//! weights and plans (seed 002), and the per-local-rank device environment,
//! printed (`--env`) or applied to a program (`rails exec`).
//! See docs/commands/rails.md.

pub use super::rails_report::report_section;
use crate::common::{text_table, GlobalOpts};
use anyhow::Result;
use std::ffi::OsString;
use std::process::ExitCode;
use topocomm_measure::p2p::parse_size;
use topocomm_rails::{
    chunk_rows, env_text, list_or_dash, local_rank, rail_tables, resolve_rank, to_json,
    weight_rows, Setup, SetupOptions, SplitParams, Stack,
};
use topocomm_topo::text::origin_text;

/// Environment variable naming the location, like `--pu` (for `rails exec`
/// under a launcher, or to force a PU when the topology is not this machine's).
const PU_ENV: &str = "TOPOCOMM_RAILS_PU";

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    pub sub: Option<Sub>,
    #[command(flatten)]
    pub opts: Opts,
    /// Split plan of one message of this many bytes (e.g. 4M) from --pu (default 4M with --pu)
    #[arg(long, value_name = "BYTES", value_parser = parse_size, requires = "pu", conflicts_with = "env")]
    pub size: Option<u64>,
    /// Print the device environment of one local rank as `export` lines
    #[arg(long)]
    pub env: bool,
    /// Local rank for --env (default: from OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID or SLURM_LOCALID, else 0)
    #[arg(long, value_name = "R", requires = "env")]
    pub local_rank: Option<u32>,
    /// Write JSON on stdout instead of text
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Subcommand, Debug)]
pub enum Sub {
    /// Set the device environment of this local rank and exec PROG (use under mpirun/srun)
    Exec(ExecArgs),
}

#[derive(clap::Args, Debug)]
pub struct ExecArgs {
    #[command(flatten)]
    pub opts: Opts,
    /// Program and its arguments
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required = true,
        value_name = "PROG [ARGS]"
    )]
    pub command: Vec<OsString>,
}

#[derive(clap::Args, Debug)]
pub struct Opts {
    /// Process location: PU OS index(es), e.g. 8 or 8-15, or hwloc locations such as
    /// core:4 or numa:1 (docs/concepts/locations.md) (default for --env and exec: this process's binding)
    #[arg(long, env = PU_ENV, value_name = "PUS")]
    pub pu: Option<String>,
    /// All-to-all / contention mode: use only the nearest rails (seed 002 §4.5)
    #[arg(long)]
    pub contention: bool,
    /// Measured throughput table (docs/formats/rails-table.md) instead of the default model
    #[arg(long, env = "TOPOCOMM_RAILS_TABLE", value_name = "FILE")]
    pub table: Option<String>,
    /// Use plain IP (Ethernet) interfaces as TCP rails too
    #[arg(long)]
    pub ethernet: bool,
    /// Drop rails whose share would be below this fraction
    #[arg(long, value_name = "F", default_value_t = 0.10)]
    pub min_share: f64,
    /// Messages below this size use a single rail
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "64K")]
    pub single_below: u64,
    /// Stack whose variables --env and exec write: auto (libfabric for usNIC, else ucx), ucx, openmpi (MCA file), mpich, libfabric, intelmpi
    #[arg(long, value_name = "STACK", default_value = "auto")]
    pub stack: String,
}

fn setup(g: &GlobalOpts, o: &Opts) -> Result<Setup> {
    let m = g.machine()?;
    let options = SetupOptions {
        ethernet: o.ethernet,
        table: o.table.clone(),
        params: SplitParams {
            min_share: o.min_share,
            single_rail_below: o.single_below,
            contention: o.contention,
        },
        stack: Stack::parse("--stack", &o.stack)?,
    };
    Ok(Setup::new(m.clone(), origin_text(&m), &options)?)
}

pub fn run(g: &GlobalOpts, a: &Args) -> Result<ExitCode> {
    if let Some(Sub::Exec(e)) = &a.sub {
        return exec(g, e);
    }
    let s = setup(g, &a.opts)?;
    if a.env {
        return env_mode(&s, a);
    }
    match &a.opts.pu {
        Some(pu) => plan_mode(&s, pu, a.size.unwrap_or(4 << 20), a.json),
        None => machine_mode(&s, a.json),
    }
}

fn machine_mode(s: &Setup, json: bool) -> Result<ExitCode> {
    let rails = &s.rails;
    if json {
        let v = to_json(&s.machine_doc()?);
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    let split = s.numa_split()?;
    println!("Rails of {}", s.origin);
    if rails.is_empty() {
        println!("No rails: {}.", rails.absence_reason());
        return Ok(ExitCode::SUCCESS);
    }
    for (title, head, rows) in rail_tables(rails) {
        println!("\n{title}:");
        print!("{}", indent(&text_table(&head, &rows)));
    }
    for i in &rails.ignored {
        println!("ignored: {} ({})", i.name, i.reason);
    }
    if rails.nics.is_empty() {
        println!("\nNearest GPUs from each NUMA node (no network rail):");
    } else {
        println!(
            "\nSplit of a large message from each NUMA node; weights: {}{}\n(distance, weight, share per rail)",
            s.source(),
            if s.params.contention { "; contention mode: nearest rails only" } else { "" }
        );
    }
    let h: Vec<&str> = split.head.iter().map(String::as_str).collect();
    print!("{}", indent(&text_table(&h, &split.rows)));
    Ok(ExitCode::SUCCESS)
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("  {l}\n")).collect()
}

fn plan_mode(s: &Setup, pu: &str, size: u64, json: bool) -> Result<ExitCode> {
    let p = s.plan(pu, size)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&to_json(&p))?);
        return Ok(ExitCode::SUCCESS);
    }
    let loc = &p.location;
    println!(
        "From PUs {} (NUMA {}, package {}); weights: {}",
        loc.pus,
        list_or_dash(&loc.numa_nodes),
        list_or_dash(&loc.packages),
        p.weights_from
    );
    let head = ["rail", "distance", "NUMA latency", "weight"];
    print!("{}", text_table(&head, &weight_rows(&p.weights)));
    let mode = serde_json::to_value(p.plan.mode)?;
    let mode = mode.as_str().unwrap_or("");
    println!("\nPlan for {} bytes ({mode}):", p.plan.size);
    let head = ["rail", "distance", "share", "bytes"];
    print!("{}", text_table(&head, &chunk_rows(&p.plan)));
    for (name, why) in &p.plan.dropped {
        println!("dropped {name}: {why}");
    }
    Ok(ExitCode::SUCCESS)
}

fn env_mode(s: &Setup, a: &Args) -> Result<ExitCode> {
    let (rank, rank_from) = resolve_rank(a.local_rank, |k| std::env::var(k).ok())?;
    if s.rails.is_empty() {
        if a.json {
            println!("{}", to_json(&s.no_rails_env(rank)));
        } else {
            let why = s.rails.absence_reason();
            println!("# no rails on {}: {why}; nothing to set", s.origin);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let doc = s.env(a.opts.pu.as_deref(), rank, rank_from)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&to_json(&doc))?);
        return Ok(ExitCode::SUCCESS);
    }
    let (from, at) = (&doc.local_rank_from, &doc.location_from);
    let stack = doc.stack.name();
    println!(
        "# topocomm rails --stack {stack}: local rank {rank} ({from}) at {at} on {}",
        s.origin
    );
    print!("{}", env_text(doc.stack, &doc.env, &doc.notes));
    Ok(ExitCode::SUCCESS)
}

/// One stderr write per message: ranks of a job share the stream.
fn note(msg: &str) {
    let line = format!("topocomm rails exec: {msg}\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
}

fn exec(g: &GlobalOpts, e: &ExecArgs) -> Result<ExitCode> {
    use std::os::unix::process::CommandExt;
    let (prog, args) = e.command.split_first().expect("clap requires a program");
    let s = setup(g, &e.opts)?;
    let rank = local_rank(|k| std::env::var(k).ok())?;
    let name = prog.to_string_lossy();
    let vars = s.exec_env(e.opts.pu.as_deref(), rank, &name, g.verbose, &mut note)?;
    let err = std::process::Command::new(prog)
        .args(args)
        .envs(vars.iter().map(|v| (&v.name, &v.value)))
        .exec();
    // Only reached when exec failed; 127 as a shell says "not runnable".
    note(&format!("cannot run '{name}': {err}"));
    Ok(ExitCode::from(127))
}
