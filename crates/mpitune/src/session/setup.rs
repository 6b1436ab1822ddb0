//! The options of a run and what they resolve to before any MPI job runs:
//! the MPI, the classes and their weights, the sizes and samples, the file
//! to write, the budget and the objective. Bad input fails here, with a
//! message that names the command-line option.

use super::chain;
use crate::objective::Objective;
use crate::weights::{self, ClassWeight};
use std::path::PathBuf;
use std::time::Duration;
use topocomm_measure::backends::MpiImpl;
use topocomm_measure::p2p::{default_sizes, parse_sizes, P2pParams};
use topocomm_topo::{pair_class, Machine};

/// The options of `topocomm tune --mpi` (docs/commands/tune-mpi.md), as
/// given: `None` takes the default (which `quick` changes).
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `openmpi` or `mpich`.
    pub mpi: String,
    /// One PU pair, `P,Q` (default: the representative pair of every class).
    pub pair: Option<String>,
    /// Message sizes, comma-separated, K/M/G suffixes.
    pub sizes: Option<String>,
    /// Smoke run: one parameter, one candidate, 3 sizes, 5 samples.
    pub quick: bool,
    /// Communication matrix and placement weighting the classes by bytes.
    pub matrix: Option<PathBuf>,
    pub map: Option<PathBuf>,
    /// The file to write (default: topocomm-openmpi.conf or topocomm-mpich.env).
    pub out: Option<PathBuf>,
    /// Time budget of the search, seconds.
    pub budget: Option<u64>,
    /// Coordinate-descent rounds at most.
    pub rounds: Option<u32>,
    /// Samples per size and setting.
    pub samples: Option<u32>,
    /// Messages in flight in bw.
    pub window: Option<u32>,
    /// Bound on one benchmark job, seconds (default: computed).
    pub timeout: Option<u64>,
    /// No search: verify this existing exported file.
    pub verify: Option<PathBuf>,
    /// Sizes whose bandwidth is maximized, `MIN-MAX`.
    pub objective: Option<String>,
    /// The running program, from which the MPI build folder is looked for
    /// (`measure::backends::locate_mpi_build`: `<exe>/../lib/topocomm` when
    /// installed); `None`: only `$TOPOCOMM_MPI_BUILD` and `./mpi/build`.
    pub exe: Option<PathBuf>,
}

/// Everything resolved from the [`Options`] before any MPI job runs.
#[derive(Clone, Debug)]
pub struct Setup {
    pub which: MpiImpl,
    pub params: P2pParams,
    pub classes: Vec<ClassWeight>,
    /// The file the search writes.
    pub out: PathBuf,
    pub budget: Duration,
    pub rounds: usize,
    pub objective: Objective,
}

/// `openmpi` or `mpich`.
pub fn parse_mpi(text: &str) -> Result<MpiImpl, String> {
    MpiImpl::ALL
        .into_iter()
        .find(|m| m.name() == text.trim())
        .ok_or_else(|| format!("--mpi '{text}': unknown MPI (expected openmpi or mpich)"))
}

impl Setup {
    /// Resolves `a` on machine `m`: every pair must be usable here.
    pub fn new(m: &Machine, a: &Options) -> Result<Setup, String> {
        let which = parse_mpi(&a.mpi)?;
        let sizes = match (&a.sizes, a.quick) {
            (Some(s), _) => parse_sizes(s).map_err(|e| format!("--sizes: {e}"))?,
            (None, true) => vec![4096, 65536, 1 << 20],
            (None, false) => default_sizes(),
        };
        let classes = classes(m, a)?;
        let out = a.out.clone().unwrap_or_else(|| {
            PathBuf::from(match which {
                MpiImpl::OpenMpi => "topocomm-openmpi.conf",
                MpiImpl::Mpich => "topocomm-mpich.env",
            })
        });
        let params = P2pParams {
            tests: Vec::new(),
            sizes,
            cold: false,
            llc: m.llc_size().unwrap_or(32 << 20),
            samples: a.samples.unwrap_or(if a.quick { 5 } else { 9 }) as usize,
            min_time_ms: if a.quick { 1.0 } else { 2.0 },
            window: a.window.unwrap_or(if a.quick { 8 } else { 16 }),
            probe: 0,
        };
        let objective = match &a.objective {
            Some(o) => {
                let obj = Objective::parse(o).map_err(|e| format!("--objective: {e}"))?;
                if !params.sizes.iter().any(|&z| obj.contains(z)) {
                    return Err(format!(
                        "--objective {o}: none of the measured sizes lies in it (add them with --sizes)"
                    ));
                }
                obj
            }
            None => Objective::default(),
        };
        Ok(Setup {
            which,
            params,
            classes,
            out,
            budget: Duration::from_secs(a.budget.unwrap_or(if a.quick { 120 } else { 1200 })),
            rounds: a.rounds.unwrap_or(if a.quick { 1 } else { 2 }) as usize,
            objective,
        })
    }
}

/// The classes to tune on: `--pair`, the matrix's classes, or every class
/// equally; each pair on PUs this process may use.
fn classes(m: &Machine, a: &Options) -> Result<Vec<ClassWeight>, String> {
    let classes = if let Some(text) = &a.pair {
        let (p, q) =
            topocomm_topo::resolve_pair(m, text).map_err(|e| format!("--pair: {}", chain(&e)))?;
        if p == q {
            return Err(format!("--pair {text}: the two PUs must differ"));
        }
        let class = pair_class(m, p, q).map_err(|e| format!("--pair {text}: {}", chain(&e)))?;
        vec![ClassWeight {
            class: class.to_string(),
            pair: (p, q),
            weight: 1.0,
            bytes: None,
        }]
    } else if let (Some(mat), Some(map)) = (&a.matrix, &a.map) {
        weights::from_matrix(m, mat, map)?
    } else {
        weights::equal(m)
    };
    if classes.is_empty() {
        return Err("this topology has a single PU: there is no pair to tune on".into());
    }
    let allowed = topocomm_measure::pin::allowed_pus().map_err(|e| chain(&e))?;
    for c in &classes {
        for pu in [c.pair.0, c.pair.1] {
            if !allowed.contains(&pu) {
                return Err(format!(
                    "pair {},{} (class {}): PU {pu} is not usable on this machine (usable: {}); tuning runs on the live machine",
                    c.pair.0,
                    c.pair.1,
                    c.class,
                    topocomm_topo::PuSet::from_indexes(allowed.clone())
                ));
            }
        }
    }
    Ok(classes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_mpi_names_are_one_line_errors() {
        let e = parse_mpi("intelmpi").unwrap_err();
        assert!(
            e.contains("--mpi 'intelmpi'") && e.contains("openmpi or mpich"),
            "{e}"
        );
        assert_eq!(parse_mpi("mpich").unwrap(), MpiImpl::Mpich);
    }
}
