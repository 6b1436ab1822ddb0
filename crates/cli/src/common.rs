//! Options and helpers shared by every subcommand.

use anyhow::Result;
use clap::Args;
use topocomm_topo::Machine;

#[derive(Args, Clone, Debug)]
pub struct GlobalOpts {
    /// Topology to work on: an hwloc XML file, `synthetic:DESC` (e.g.
    /// `synthetic:pack:2 numa:2 l3:2 core:4 pu:2`), a topocomm machine JSON
    /// file, or `live` (default)
    #[arg(long, global = true, env = topocomm_topo::TOPOLOGY_ENV, value_name = "FILE|synthetic:DESC")]
    pub topology: Option<String>,
    /// Less on stderr: no progress, notes or summaries, only results and errors
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// More on stderr: what is run and the details of each step
    #[arg(short, long, global = true)]
    pub verbose: bool,
}

impl GlobalOpts {
    pub fn machine(&self) -> Result<Machine> {
        Ok(topocomm_topo::load_default(self.topology.as_deref())?)
    }

    /// A progress or note line on stderr, unless `--quiet` (one write: ranks
    /// of a job share the stream).
    pub fn note(&self, msg: &str) {
        if !self.quiet {
            let _ =
                std::io::Write::write_all(&mut std::io::stderr(), format!("{msg}\n").as_bytes());
        }
    }
}

/// A usage error: the command line (an argument's value, or a variable or
/// file it names) asks for something impossible. Exit status 2; every
/// other error is a failure, exit status 1 (docs/commands/README.md).
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// `e` (with its chain of causes, joined as the error line shows them) as
/// a [`UsageError`].
pub fn usage(e: impl Into<anyhow::Error>) -> anyhow::Error {
    let e: anyhow::Error = e.into();
    let msg: Vec<String> = e.chain().map(|c| c.to_string()).collect();
    anyhow::Error::new(UsageError(msg.join(": ")))
}

/// The exit status of an error: 2 for usage errors (a [`UsageError`], or a
/// library error about the input: a topology that does not load, a PU or
/// rails argument that does not fit it), 1 for every other failure.
pub fn exit_status(e: &anyhow::Error) -> u8 {
    let input = e.chain().any(|c| {
        c.is::<UsageError>()
            || c.is::<topocomm_topo::TopoError>()
            || c.is::<topocomm_rails::RailsError>()
            || c.downcast_ref::<topocomm_measure::Error>()
                .is_some_and(|m| m.is_usage())
    });
    if input {
        2
    } else {
        1
    }
}

/// Left-aligned plain-text table with a header line (`topocomm_topo::text::text_table`).
pub fn text_table(header: &[&str], rows: &[Vec<String>]) -> String {
    topocomm_topo::text::text_table(header, rows)
}

/// `--json [FILE]` given without FILE: the JSON document goes to stdout in
/// place of the text.
pub fn json_stdout(json: &Option<std::path::PathBuf>) -> bool {
    json.as_deref() == Some(std::path::Path::new("-"))
}

/// `value` as pretty JSON on stdout; exit status 0.
pub fn print_json(value: &impl serde::Serialize) -> Result<std::process::ExitCode> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(std::process::ExitCode::SUCCESS)
}

/// Progress of a long command on stderr: on a terminal one status line
/// rewritten in place, with a spinner and the seconds elapsed; elsewhere
/// one line every `every` steps (`--verbose`: every step); nothing under
/// `--quiet`. [`Progress::finish`] ends the status line.
pub struct Progress {
    quiet: bool,
    tty: bool,
    every: usize,
    n: usize,
    start: std::time::Instant,
}

impl Progress {
    /// `quiet`, `verbose`: [`GlobalOpts`]'s.
    pub fn new(quiet: bool, verbose: bool, every: usize) -> Self {
        Progress {
            quiet,
            tty: std::io::IsTerminal::is_terminal(&std::io::stderr()),
            every: if verbose { 1 } else { every.max(1) },
            n: 0,
            start: std::time::Instant::now(),
        }
    }

    pub fn step(&mut self, msg: &str) {
        self.n += 1;
        if self.quiet {
            return;
        }
        let line = if self.tty {
            let spin = ['|', '/', '-', '\\'][self.n % 4];
            let t = self.start.elapsed().as_secs();
            format!("\r\x1b[K{spin} {t:>4} s  {msg}")
        } else if (self.n - 1) % self.every == 0 {
            format!("{msg}\n")
        } else {
            return;
        };
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    }

    pub fn finish(&mut self) {
        if self.tty && !self.quiet && self.n > 0 {
            eprintln!();
        }
    }
}

/// `--quiet` for code that has no [`GlobalOpts`] at hand (progress bars),
/// set once by `main`.
static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn set_quiet(q: bool) {
    QUIET.store(q, std::sync::atomic::Ordering::Relaxed);
}

pub fn quiet() -> bool {
    QUIET.load(std::sync::atomic::Ordering::Relaxed)
}

/// A note line on stderr unless `--quiet` (see [`GlobalOpts::note`]).
pub fn note(msg: &str) {
    if !quiet() {
        let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("{msg}\n").as_bytes());
    }
}

/// clap value parser of a count in `lo..=hi` (a `usize` option): a value
/// outside is refused up front with the range, before any work or
/// allocation (docs/testing.md, "Numeric inputs").
pub fn count(lo: u64, hi: u64) -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(lo..=hi)
}

/// A finite number in `(lo, hi]`, or `what` as the error (clap shows it
/// after the option's name).
fn in_range(text: &str, lo: f64, hi: f64, what: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v > lo && v <= hi => Ok(v),
        _ => Err(format!("expected {what}")),
    }
}

/// clap value parser: milliseconds in (0, 60000].
pub fn millis(text: &str) -> Result<f64, String> {
    in_range(
        text,
        0.0,
        60_000.0,
        "a number of milliseconds in (0, 60000]",
    )
}

/// Longest time bound an option takes: one week, in seconds.
pub const MAX_SECS: u64 = 7 * 24 * 3600;

/// clap value parser: seconds in (0, [`MAX_SECS`]].
pub fn seconds(text: &str) -> Result<f64, String> {
    in_range(
        text,
        0.0,
        MAX_SECS as f64,
        "a number of seconds in (0, 604800]",
    )
}
