//! `topocomm tune --mpi openmpi|mpich` (dispatched from `cmd::tune`): tunes the installed MPI's shared-memory
//! parameters with tc_mpibench, writes them as an MCA parameter file (Open
//! MPI) or an environment file (MPICH), measures defaults vs that file side
//! by side and proves the file's values take effect
//! (docs/commands/tune-mpi.md, docs/formats/mpi-exports.md). The run is
//! `topocomm_mpitune::session`; this module parses, prints and exits.

use crate::common::{json_stdout, text_table, usage, GlobalOpts};
use anyhow::{anyhow, bail, Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;
use topocomm_mpitune::session::{self, text, Options};

#[derive(clap::Args, Debug, Clone)]
pub struct MpiArgs {
    /// The MPI to tune: openmpi or mpich (the Debian packages' mpirun.<name>)
    #[arg(long, value_name = "openmpi|mpich")]
    pub mpi: String,
    /// Tune on this PU pair only: PU OS indexes, e.g. 0,1, or hwloc locations,
    /// e.g. core:0,core:1; default: the
    /// representative pair of every locality class, equally weighted
    #[arg(long, value_name = "A,B", conflicts_with_all = ["matrix", "map"])]
    pub pair: Option<String>,
    /// Message sizes (K, M, G suffixes), comma-separated; default powers of 4
    /// from 1 B to 64 MiB (--quick: 4K,64K,1M)
    #[arg(long, value_name = "LIST")]
    pub sizes: Option<String>,
    /// Smoke run: one parameter, one candidate, 3 sizes, 5 samples
    #[arg(long)]
    pub quick: bool,
    /// Communication matrix (as `topocomm map` reads) to weight the classes by bytes
    #[arg(long, value_name = "FILE", requires = "map")]
    pub matrix: Option<PathBuf>,
    /// Placement of the matrix's ranks: perm file, `<node> <pu>` per rank
    #[arg(long, value_name = "FILE", requires = "matrix")]
    pub map: Option<PathBuf>,
    /// Where to write the settings (default: topocomm-openmpi.conf or topocomm-mpich.env)
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Time budget of the search in seconds (default 1200; --quick: 120)
    #[arg(long, value_name = "SECS")]
    pub budget: Option<u64>,
    /// Coordinate-descent rounds at most (default 2; --quick: 1)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10))]
    pub rounds: Option<u32>,
    /// Samples per size and setting (default 9; --quick: 5)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(3..=1000))]
    pub samples: Option<u32>,
    /// Messages in flight in bw (default 16; --quick: 8)
    #[arg(long, value_name = "W", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub window: Option<u32>,
    /// Kill one benchmark job after this many seconds (default: computed)
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
    /// Also write everything (search steps, raw samples, read-back) as JSON
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// No search: measure the defaults against an existing exported FILE
    /// (an earlier run's, or edited by hand) and check that its values take
    /// effect; exit status 1 when a size is slower than default
    #[arg(long, value_name = "FILE", conflicts_with_all = ["out", "budget", "rounds", "quick"])]
    pub verify: Option<PathBuf>,
    /// Message sizes whose bandwidth is maximized, MIN-MAX (default 64K-4M);
    /// every other size must only not get slower
    #[arg(long, value_name = "MIN-MAX")]
    pub objective: Option<String>,
}

impl MpiArgs {
    /// The library's options (everything but `--json`, written here).
    pub fn options(&self) -> Options {
        Options {
            mpi: self.mpi.clone(),
            pair: self.pair.clone(),
            sizes: self.sizes.clone(),
            quick: self.quick,
            matrix: self.matrix.clone(),
            map: self.map.clone(),
            out: self.out.clone(),
            budget: self.budget,
            rounds: self.rounds,
            samples: self.samples,
            window: self.window,
            timeout: self.timeout,
            verify: self.verify.clone(),
            objective: self.objective.clone(),
            exe: std::env::current_exe().ok(),
        }
    }
}

pub fn run_mpi(g: &GlobalOpts, a: &MpiArgs) -> Result<ExitCode> {
    let m = g.machine()?;
    // The options and the --verify file checked first: usage errors (2).
    let opts = a.options();
    let s = session::Setup::new(&m, &opts).map_err(|e| usage(anyhow!(e)))?;
    if let Some(f) = &opts.verify {
        let e = topocomm_mpitune::export::read_export(s.which, f);
        e.map_err(|e| usage(anyhow!("--verify: {e}")))?;
    }
    let o = session::run(&m, &opts, &mut |msg| g.note(msg)).map_err(|e| anyhow!(e))?;
    if json_stdout(&a.json) {
        println!("{}", serde_json::to_string_pretty(&o.json())?);
    } else {
        print!("{}", text::report(&o, text_table));
    }
    if let Some(path) = a.json.as_ref().filter(|_| !json_stdout(&a.json)) {
        let doc = serde_json::to_string_pretty(&o.json())?;
        topocomm_report::write_atomic(path, doc.as_bytes())
            .with_context(|| format!("--json {}", path.display()))?;
    }
    if let Some(e) = o.not_applied() {
        bail!(e);
    }
    match text::not_confirmed(&o) {
        Some(line) if json_stdout(&a.json) => g.note(&line),
        Some(line) => println!("{line}"),
        None => {}
    }
    Ok(if o.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
