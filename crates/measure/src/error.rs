//! The errors of topocomm-measure: [`PinError`] for pinning (cloneable, so
//! that pinned threads can share one) and [`Error`] for everything else.
//!
//! Every message reads exactly as topocomm has always printed it, the text of
//! an underlying error included. That underlying error is kept as a typed
//! `cause` field but not returned by [`std::error::Error::source`]: the CLI
//! prints an error's whole source chain joined by ": ", which would print the
//! cause twice.

use crate::backends::MPI_BUILD_ENV;
use crate::p2p::Test;
use std::ffi::OsString;
use std::io;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;
use thiserror::Error;
use topocomm_topo::{PuSet, TopoError};

/// `Result` with [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a thread or process could not be pinned to a PU.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum PinError {
    /// hwloc could not read the live machine.
    #[error("hwloc cannot read this machine: {reason}")]
    Hwloc { reason: String },
    /// The PU does not exist here or this process may not run on it.
    #[error("PU {pu} does not exist or is not usable on this machine (usable PUs: {usable})")]
    NotUsable { pu: u32, usable: PuSet },
    /// Pinning the main thread is refused: the processes it starts would inherit the binding.
    #[error("refusing to pin the main thread to PU {pu}: the processes it starts would inherit the binding (run pinned work on its own thread, pin::on_pu)")]
    MainThread { pu: u32 },
    /// hwloc refused to bind `target` (`thread` or `process`) to the PU.
    #[error("cannot bind the {target} to PU {pu}: {reason}")]
    Bind {
        target: &'static str,
        pu: u32,
        reason: String,
    },
    /// The thread started by [`crate::pin::on_pu`] panicked.
    #[error("the thread pinned to PU {pu} panicked")]
    Panicked { pu: u32 },
}

/// Every other error of this crate, grouped by the module that raises it.
#[derive(Debug, Error)]
pub enum Error {
    // ---- pin, target: the live machine
    /// A thread or process could not be pinned.
    #[error(transparent)]
    Pin(#[from] PinError),
    /// A PU is not in the topology model.
    #[error(transparent)]
    Topo(#[from] TopoError),
    /// The topology has PUs that this machine lacks or does not allow.
    #[error("the topology has PUs {missing} that this machine does not have or does not allow (usable PUs: {usable}); measurements need the live machine or a model of it")]
    NotLive { missing: PuSet, usable: PuSet },
    /// The live machine could not be loaded to compare fingerprints.
    #[error("cannot compare with the live machine: {cause}")]
    LiveUnreadable { cause: TopoError },
    /// The topology's fingerprint is not the live machine's.
    #[error("the topology (fingerprint {given}) is not this machine's (fingerprint {live}): its locality classes would mislabel the measurements; run without --topology")]
    ForeignTopology { given: String, live: String },

    // ---- procrun: bounded jobs
    /// Job `what` could not be started.
    #[error("{what}: cannot start {program:?}: {cause}")]
    Spawn {
        what: String,
        program: OsString,
        cause: io::Error,
    },
    /// Job `what` outlived its time bound and was killed.
    #[error("{what}: no result after {} s; the job was killed (raise --timeout if the machine is slow)", .limit.as_secs())]
    JobTimeout { what: String, limit: Duration },
    /// Waiting for job `what` failed.
    #[error("{what}: cannot wait for the job: {cause}")]
    JobWait { what: String, cause: io::Error },

    // ---- record: sample lines
    /// Line `line` of `origin`'s output is JSON but not a sample line.
    #[error("{origin}: line {line}: not a sample line ({cause})")]
    NotSampleLine {
        origin: String,
        line: usize,
        cause: serde_json::Error,
    },
    /// Line `line` of `origin`'s output has no samples.
    #[error("{origin}: line {line}: no samples")]
    NoSamples { origin: String, line: usize },

    // ---- backends: MPI build, jobs, completeness of their results
    /// A `--vs` peer that is not an MPI we know.
    #[error("unknown peer '{name}' (expected openmpi, mpich, or none)")]
    UnknownPeer { name: String },
    /// `--vs` named no peer.
    #[error("empty list of peers (use none to measure no peer)")]
    NoPeers,
    /// `$TOPOCOMM_MPI_BUILD` is set to something that is not a folder.
    #[error("${} is '{}', which is not a folder (build the MPI benchmark with `make build` or `make -C mpi`)", MPI_BUILD_ENV, .path.display())]
    MpiBuildNotFolder { path: PathBuf },
    /// None of the folders `tried` holds the MPI benchmark build.
    #[error("the MPI benchmark is not built (looked in {}); build it with `make build` (or `make -C mpi`), or set ${}", join_paths(.tried), MPI_BUILD_ENV)]
    MpiBuildMissing { tried: Vec<PathBuf> },
    /// The tc_mpibench binary of one MPI is missing.
    #[error("{} not found; build it with `make build` (or `make -C mpi`)", .path.display())]
    MpiBenchMissing { path: PathBuf },
    /// Backend `name`'s job exited with `status`; `line` is its last error line.
    #[error("{name}: the job failed ({status}): {line}")]
    JobFailed {
        name: String,
        status: ExitStatus,
        line: String,
    },
    /// Backend `name`'s job printed no meta line, so its pinning is unverified.
    #[error("{name}: the job did not report where its ranks ran; refusing unverified pinning")]
    NoPinningMeta { name: String },
    /// Backend `name` printed a line for another implementation or cache mode.
    #[error("{name}: unexpected line for impl '{implementation}', cache '{cache}'")]
    ForeignLine {
        name: String,
        implementation: String,
        cache: String,
    },
    /// A sample line of backend `name` failed `cause`.
    #[error("{name}: {cause}")]
    BadLine { name: String, cause: Box<Error> },
    /// Backend `name` gave `test` in `unit` instead of `expected`.
    #[error("{name}: {test} in '{unit}', expected '{expected}'")]
    WrongUnit {
        name: String,
        test: String,
        unit: String,
        expected: &'static str,
    },
    /// Backend `name` gave a zero, negative or non-finite sample.
    #[error("{name}: {test} {size} B has a non-positive or non-finite sample")]
    BadSample {
        name: String,
        test: String,
        size: u64,
    },
    /// Backend `name` gave no line for these (test, size) points.
    #[error("{name}: no result for {}", join_points(.missing))]
    MissingResults {
        name: String,
        missing: Vec<(Test, u64)>,
    },

    // ---- p2p: arguments and pinning of jobs
    /// A test name that is not latency, bw, bibw or msgrate.
    #[error("unknown test '{text}' (expected latency, bw, bibw, msgrate)")]
    UnknownTest { text: String },
    /// A test listed twice.
    #[error("test '{test}' is listed twice")]
    DuplicateTest { test: Test },
    /// A list argument (`tests`, `sizes`) with no element.
    #[error("empty list of {what}")]
    EmptyList { what: &'static str },
    /// A size that does not start with a number of bytes.
    #[error("bad size '{text}' (expected bytes such as 8, 4K, 1MiB)")]
    BadSize { text: String },
    /// A size with a unit other than K, M or G.
    #[error("bad size '{text}' (unknown suffix '{suffix}'; use K, M or G)")]
    BadSizeSuffix { text: String, suffix: String },
    /// A size that overflows 64 bits.
    #[error("size '{text}' is too large")]
    SizeTooLarge { text: String },
    /// A message size outside 1 B to 1 GiB.
    #[error("size '{text}' is out of range (1 B to 1 GiB)")]
    SizeOutOfRange { text: String },
    /// More message sizes than `max`.
    #[error("at most {max} sizes")]
    TooManySizes { max: usize },
    /// Job `what`'s meta line has no entry for `rank`.
    #[error("{what}: rank {rank} did not report where it ran")]
    RankUnreported { what: String, rank: u32 },
    /// Job `what`'s `rank` reported an affinity list that does not parse.
    #[error("{what}: rank {rank} reported affinity '{affinity}': {reason}")]
    BadAffinity {
        what: String,
        rank: u32,
        affinity: String,
        reason: String,
    },
    /// Job `what`'s `rank` was not bound to exactly PU `pu`.
    #[error("{what}: rank {rank} should be bound to PU {pu} but ran on CPU {cpu} with affinity {affinity}; refusing a silently wrong binding")]
    WrongBinding {
        what: String,
        rank: u32,
        pu: u32,
        cpu: i64,
        affinity: String,
    },

    // ---- cache: cache-state benchmark
    /// A cache state other than M, E, S, O, F or I.
    #[error("unknown cache state '{text}' (expected M, E, S, O, F or I)")]
    UnknownState { text: String },
    /// An operation other than load, store or chase.
    #[error("unknown operation '{text}' (expected load, store or chase)")]
    UnknownOp { text: String },
    /// Locality class `class` does not occur from PU `pu`; `present` are the ones that do.
    #[error("locality class '{class}' is not present on this machine as seen from PU {pu} (present: {}, and 'none' for state I)", .present.join(", "))]
    ClassNotPresent {
        class: String,
        pu: u32,
        present: Vec<String>,
    },
    /// The count `what` (`--samples`, `samples`) is zero.
    #[error("{what} must be at least 1")]
    AtLeastOne { what: &'static str },
    /// A buffer smaller than `min` bytes (one cache line).
    #[error("every buffer size must be at least {min} bytes")]
    BufferTooSmall { min: u64 },
    /// The helper thread on `pu` did not answer in time.
    #[error("the helper thread on PU {pu} stopped answering")]
    HelperSilent { pu: u32 },
    /// No helper thread was started on `pu`.
    #[error("no helper thread on PU {pu}")]
    NoHelper { pu: u32 },
    /// The helper thread on `pu` has ended.
    #[error("the helper thread on PU {pu} is gone")]
    HelperGone { pu: u32 },
    /// A helper thread answered with the wrong kind of reply.
    #[error("helper thread protocol error")]
    HelperProtocol,
    /// A timed pass gave NaN or infinity.
    #[error("a timed pass gave a non-finite value")]
    NonFinitePass,

    // ---- matrix: pair latency, pair selection, transport worker
    /// A thread of a kernel panicked; `thread` names it (`the measuring thread`, `a worker`).
    #[error("{thread} panicked")]
    Panicked { thread: &'static str },
    /// A pair of one PU with itself.
    #[error("PU pair {pu},{pu}: the two PUs must differ")]
    SamePu { pu: u32 },
    /// Measuring PU pair (`p`, `q`) failed with `cause`.
    #[error("PU pair {p},{q}: {cause}")]
    Pair { p: u32, q: u32, cause: Box<Error> },
    /// The other side of the ping-pong gave up.
    #[error("the peer thread gave up")]
    PeerGaveUp,
    /// The other side of the ping-pong did not answer within `limit`.
    #[error("no answer from the peer within {} s", .limit.as_secs())]
    PeerTimeout { limit: Duration },
    /// Metric `name` has no finite sample.
    #[error("metric {name}: no finite samples")]
    NoFiniteSamples { name: String },
    /// A PU of `--pus` is not in the topology.
    #[error("--pus: {cause}")]
    PusOption { cause: TopoError },
    /// Fewer than two PUs to form pairs from.
    #[error("at least two PUs are needed to measure pairs")]
    TooFewPus,
    /// The transport worker at `path` does not run.
    #[error("{}: the transport worker does not run (`--help` failed)", .path.display())]
    WorkerUnusable { path: PathBuf },
    /// The transport worker could not be started.
    #[error("cannot start the transport worker: {cause}")]
    WorkerSpawn { cause: io::Error },
    /// The transport worker on (`p`, `q`) outlived `limit` and was killed.
    #[error("transport worker on PUs {p},{q} did not finish within {} s", .limit.as_secs())]
    WorkerTimeout { p: u32, q: u32, limit: Duration },
    /// Waiting for the transport worker failed.
    #[error("waiting for the transport worker: {cause}")]
    WorkerWait { cause: io::Error },
    /// The transport worker's output could not be collected.
    #[error("transport worker output: {cause}")]
    WorkerOutput { cause: io::Error },
    /// The transport worker on (`p`, `q`) failed; `line` is its last stderr line.
    #[error("transport worker on PUs {p},{q} failed: {line}")]
    WorkerFailed { p: u32, q: u32, line: String },

    // ---- limits: physical limits of a pair
    /// A limit asked between a PU and itself.
    #[error("pair {pu},{pu}: the two PUs must differ (a limit between a PU and itself is not a transfer)")]
    LimitSamePu { pu: u32 },
    /// The other thread of a limit measurement stopped.
    #[error("the other thread stopped")]
    OtherStopped,
    /// The other thread of a limit measurement did not answer within `limit`.
    #[error("the other thread did not answer within {} s", .limit.as_secs())]
    OtherTimeout { limit: Duration },

    // ---- placement: CG and triad under mappings
    /// `workers` is 0 or more than the machine's `pus`.
    #[error("cannot place {workers} workers on {pus} PUs (expected 1..={pus})")]
    WorkerCount { workers: usize, pus: usize },
    /// A workload with no samples or a grid below 2.
    #[error("placement: samples must be >= 1 and the grid >= 2")]
    BadWorkload { samples: usize, grid: usize },
    /// Another worker of the team could not be pinned.
    #[error("another worker could not be pinned")]
    PeerNotPinned,
    /// The `what` (`CG`, `triad`) timings are not finite.
    #[error("{what} timing is not finite")]
    NonFiniteTiming { what: &'static str },

    // ---- charact, *_report: arguments and results of bench cache/matrix/placement
    /// A size that does not parse (`4096`, `64K`, `1MiB`, `2G`; not 0).
    #[error("'{text}' is not a size (expected e.g. 4096, 64K, 1M, 2G)")]
    NotASize { text: String },
    /// Argument `arg` (`--sizes`, `--workers`, ...) failed with `cause`.
    #[error("{arg}: {cause}")]
    Arg {
        arg: &'static str,
        cause: Box<Error>,
    },
    /// Argument `arg` is wrong for `reason` (a parser's message).
    #[error("{arg}: {reason}")]
    ArgReason { arg: &'static str, reason: String },
    /// A list argument (`--ops`, `--states`, `--workers`) with no element.
    #[error("{arg}: the list is empty")]
    EmptyArgList { arg: &'static str },
    /// A size or count argument above what the benchmark allocates up
    /// front (refused before any allocation).
    #[error("{arg}: {value} is too large (at most {max})")]
    ArgTooLarge {
        arg: &'static str,
        value: u64,
        max: &'static str,
    },
    /// `bench matrix --size` below one cache line.
    #[error("--size: at least 64 bytes")]
    MatrixSizeTooSmall,
    /// `bench cache` has no size left, or one below a cache line.
    #[error("--sizes: need at least one size, each at least 64 bytes")]
    CacheSizes,
    /// `bench cache --states/--classes` leave no (class, state) to measure.
    #[error(
        "--states/--classes: nothing left to measure (state I is measured under class 'none')"
    )]
    NothingToMeasure,
    /// A `bench placement --workers` entry that is not in 1..=`pus`.
    #[error("--workers: '{text}' is not a worker count in 1..={pus} (this machine has {pus} PUs)")]
    WorkerArg { text: String, pus: usize },
    /// `bench placement` grid, samples or tolerance out of range.
    #[error("--grid must be >= 2, --samples >= 1, --max-iter >= 1 and --tolerance in (0, 1)")]
    PlacementArgs,
    /// Benchmark `bench` (`bench cache`, `bench placement`) failed with `cause`.
    #[error("{bench}: {cause}")]
    Bench {
        bench: &'static str,
        cause: Box<Error>,
    },
    /// A CG solve of `bench placement` missed its residual or error bound.
    #[error("bench placement: CG with {workers} workers on PUs {pus:?} did not converge (relative residual {residual:.2e}, max error {error:.2e} after {iterations} iterations); raise --max-iter")]
    NotConverged {
        workers: usize,
        pus: Vec<u32>,
        residual: f64,
        error: f64,
        iterations: usize,
    },
    /// The coherence-read kernel of `bench matrix` returned no point.
    #[error("no point measured")]
    NoPoint,
    /// `bench matrix --resume` cannot read its file.
    #[error("--resume: cannot read '{}': {cause}", .path.display())]
    ResumeRead { path: PathBuf, cause: io::Error },
    /// `bench matrix --resume` names a file that is not a bench matrix file.
    #[error("--resume: '{}' is not a bench matrix file ({cause})", .path.display())]
    ResumeNotMatrix {
        path: PathBuf,
        cause: serde_json::Error,
    },
    /// `bench matrix --resume` names a file of another schema.
    #[error("--resume: '{}' has schema '{schema}', expected '{}'", .path.display(), crate::matrix_report::SCHEMA)]
    ResumeSchema { path: PathBuf, schema: String },
    /// `bench matrix --resume` names a file measured on another machine.
    #[error("--resume: '{}' was measured on another machine (fingerprint {file}, this one {live})", .path.display())]
    ResumeMachine {
        path: PathBuf,
        file: String,
        live: String,
    },
    /// `bench matrix --resume` names a file measured with other parameters.
    #[error("--resume: '{}' used other parameters ({params:?}); rerun with the same --pus/--per-class/--size/--samples/--rounds/--quick", .path.display())]
    ResumeParams {
        path: PathBuf,
        params: crate::matrix_report::MatrixParams,
    },
}

impl Error {
    /// Whether this is a usage error: an argument (or the topology, a file
    /// or a variable it names) that cannot be used, found before any
    /// measurement. The CLI exits with status 2 for these, 1 for the rest.
    pub fn is_usage(&self) -> bool {
        use Error::*;
        match self {
            Pair { cause, .. } | Bench { cause, .. } => cause.is_usage(),
            Topo(_)
            | NotLive { .. }
            | ForeignTopology { .. }
            | UnknownPeer { .. }
            | NoPeers
            | UnknownTest { .. }
            | DuplicateTest { .. }
            | EmptyList { .. }
            | BadSize { .. }
            | BadSizeSuffix { .. }
            | SizeTooLarge { .. }
            | SizeOutOfRange { .. }
            | TooManySizes { .. }
            | UnknownState { .. }
            | UnknownOp { .. }
            | ClassNotPresent { .. }
            | AtLeastOne { .. }
            | BufferTooSmall { .. }
            | SamePu { .. }
            | PusOption { .. }
            | TooFewPus
            | LimitSamePu { .. }
            | WorkerCount { .. }
            | BadWorkload { .. }
            | NotASize { .. }
            | ArgTooLarge { .. }
            | Arg { .. }
            | ArgReason { .. }
            | EmptyArgList { .. }
            | MatrixSizeTooSmall
            | CacheSizes
            | NothingToMeasure
            | WorkerArg { .. }
            | PlacementArgs
            | ResumeRead { .. }
            | ResumeNotMatrix { .. }
            | ResumeSchema { .. }
            | ResumeMachine { .. }
            | ResumeParams { .. } => true,
            _ => false,
        }
    }
}

/// `a, b, c` from paths, as the MPI build search reports where it looked.
fn join_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `latency 64 B, bw 1024 B`: the (test, size) points without a result.
fn join_points(points: &[(Test, u64)]) -> String {
    points
        .iter()
        .map(|(t, s)| format!("{t} {s} B"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_errors_are_the_input_ones() {
        let peer = Error::UnknownPeer { name: "x".into() };
        assert!(peer.is_usage());
        let nested = Error::Bench {
            bench: "bench cache",
            cause: Box::new(Error::WorkerArg {
                text: "0".into(),
                pus: 2,
            }),
        };
        assert!(nested.is_usage());
        let timeout = Error::JobTimeout {
            what: "job".into(),
            limit: Duration::from_secs(1),
        };
        assert!(!timeout.is_usage());
        assert!(!Error::NoPoint.is_usage());
    }

    #[test]
    fn messages_with_computed_parts_read_as_before() {
        let e = Error::MpiBuildMissing {
            tried: vec![PathBuf::from("/a/mpi/build"), PathBuf::from("mpi/build")],
        };
        assert_eq!(
            e.to_string(),
            "the MPI benchmark is not built (looked in /a/mpi/build, mpi/build); build it with `make build` (or `make -C mpi`), or set $TOPOCOMM_MPI_BUILD"
        );
        let e = Error::MpiBuildNotFolder {
            path: PathBuf::from("/x"),
        };
        assert_eq!(
            e.to_string(),
            "$TOPOCOMM_MPI_BUILD is '/x', which is not a folder (build the MPI benchmark with `make build` or `make -C mpi`)"
        );
        let e = Error::MissingResults {
            name: "mpich".into(),
            missing: vec![(Test::Latency, 64), (Test::Bw, 8)],
        };
        assert_eq!(e.to_string(), "mpich: no result for latency 64 B, bw 8 B");
        let e = Error::Spawn {
            what: "t".into(),
            program: "nope".into(),
            cause: io::Error::from(io::ErrorKind::NotFound),
        };
        assert_eq!(e.to_string(), "t: cannot start \"nope\": entity not found");
        assert!(std::error::Error::source(&e).is_none());
        let e = Error::Pair {
            p: 1,
            q: 2,
            cause: Box::new(Error::PeerGaveUp),
        };
        assert_eq!(e.to_string(), "PU pair 1,2: the peer thread gave up");
        let e = Error::from(PinError::MainThread { pu: 3 });
        assert_eq!(
            e.to_string(),
            "refusing to pin the main thread to PU 3: the processes it starts would inherit the binding (run pinned work on its own thread, pin::on_pu)"
        );
    }
}
