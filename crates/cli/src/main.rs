//! The `topocomm` command: a thin layer over the library crates. Each
//! subcommand lives in its own module under `cmd/`.

mod autotune;
mod cmd;
mod common;

use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "topocomm", version, about = "Find out how a node is wired, what each path costs, and where to put your ranks", long_about = None)]
struct Cli {
    #[command(flatten)]
    global: common::GlobalOpts,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show the machine model: tree, locality classes, devices
    Topo(cmd::topo::Args),
    /// Write the self-contained HTML + JSON report of this machine
    Report(cmd::report::Args),
    /// Place ranks on a node or a cluster from a communication matrix
    Map(Box<cmd::map::Args>),
    /// Run an MPI program with the PMPI tracer and write its communication matrix
    Trace(cmd::trace::Args),
    /// Run an unmodified MPI program with same-node messages over topocomm's transport
    Accel(cmd::accel::Args),
    /// Benchmarks: point-to-point (topocomm vs Open MPI, MPICH and the physical limits), cache states, placement, per-pair matrix
    Bench(cmd::bench::Args),
    /// Launch N ranks of a program over the shared-memory transport
    Run(cmd::run::Args),
    /// Show the transport plan (protocol parameters) per locality class
    Plan(cmd::plan::Args),
    /// Transfer-time model per locality class: predicted (and measured) protocol times
    Model(Box<cmd::model::Args>),
    /// Tune the transport rules per locality class (grid and model-guided search)
    Tune(Box<cmd::tune::Args>),
    /// NIC/GPU rails: locality, NUIOA split weights and plans, per-local-rank device environment
    Rails(Box<cmd::rails::Args>),
    /// Benchmark worker run by `topocomm bench` under `topocomm run`
    #[command(hide = true)]
    BenchWorker(cmd::bench_worker::Args),
    /// Transport self-checks, run under `topocomm run`
    Selftest(cmd::selftest::Args),
    /// Print the shell completion script (bash, zsh, fish, ...) to stdout
    Completions(cmd::completions::Args),
    /// Write the man pages (topocomm.1, topocomm-<command>.1) into a folder
    #[command(hide = true)]
    Manpages(cmd::completions::ManArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    common::set_quiet(cli.global.quiet);
    let result = match &cli.command {
        Command::Topo(a) => cmd::topo::run(&cli.global, a),
        Command::Report(a) => {
            autotune::before_benchmarks(&cli.global);
            cmd::report::run(&cli.global, a)
        }
        Command::Map(a) => cmd::map::run(&cli.global, a),
        Command::Trace(a) => cmd::trace::run(a),
        Command::Accel(a) => {
            // The transport's rules for this machine are measured once and
            // cached (issue 14); later jobs load them.
            autotune::before_benchmarks(&cli.global);
            cmd::accel::run(&cli.global, a)
        }
        Command::Bench(a) => {
            // bench map measures no machine: no tuning first; bench p2p
            // checks its pairs first (cmd::bench::p2p::measure).
            if !matches!(
                a.command,
                cmd::bench::BenchCommand::Map(_) | cmd::bench::BenchCommand::P2p(_)
            ) {
                autotune::before_benchmarks(&cli.global);
            }
            cmd::bench::run(&cli.global, a)
        }
        Command::Run(a) => cmd::run::run(&cli.global, a),
        Command::Plan(a) => cmd::plan::run(&cli.global, a),
        Command::Model(a) => cmd::model::run(&cli.global, a),
        Command::Tune(a) => cmd::tune::run(&cli.global, a),
        Command::Rails(a) => cmd::rails::run(&cli.global, a),
        Command::BenchWorker(a) => cmd::bench_worker::run(&cli.global, a),
        Command::Selftest(a) => cmd::selftest::run(&cli.global, a),
        Command::Completions(a) => cmd::completions::run(a, Cli::command()),
        Command::Manpages(a) => cmd::completions::man(a, Cli::command()),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // One line: the chain of causes joined, no backtrace.
            let msg: Vec<String> = e.chain().map(|c| c.to_string()).collect();
            // One write per line: ranks of a job share this stderr.
            let line = format!("topocomm: error: {}\n", msg.join(": "));
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            // 2: usage error; 1: failure (docs/commands/README.md).
            ExitCode::from(common::exit_status(&e))
        }
    }
}
