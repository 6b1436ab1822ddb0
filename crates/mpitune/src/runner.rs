//! Measures one setting: tc_mpibench under the MPI, pinned on each class's
//! representative pair, streaming bandwidth over the sizes and latency on
//! the small ones (the guard that keeps small messages from regressing).
//! Also finds which layer carries Open MPI's intra-node traffic.

use crate::objective::ClassMeasure;
use crate::space::{to_env, Layer, Setting};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use topocomm_measure::backends::{Backend, MpiImpl};
use topocomm_measure::p2p::{P2pParams, Test};
use topocomm_measure::procrun::run_bounded;

/// Latency is measured on the sizes up to this (eager sizes).
pub const LATENCY_MAX: u64 = 4096;

#[derive(Clone, Debug)]
pub struct Runner {
    pub which: MpiImpl,
    pub build: PathBuf,
    pub layer: Layer,
    /// (class name, pair) in the order of the weights.
    pub pairs: Vec<(String, (u32, u32))>,
    /// bw over every size (tests = [Bw]).
    pub bw: P2pParams,
    /// latency over the small sizes (tests = [Latency]), if any.
    pub latency: Option<P2pParams>,
    /// Bound on each job; `None`: computed from the parameters.
    pub timeout: Option<Duration>,
}

impl Runner {
    /// Splits `base` (its sizes, samples, window, ...) into the bw and
    /// latency jobs.
    pub fn params(base: &P2pParams) -> (P2pParams, Option<P2pParams>) {
        let bw = P2pParams {
            tests: vec![Test::Bw],
            ..base.clone()
        };
        let small: Vec<u64> = base
            .sizes
            .iter()
            .copied()
            .filter(|s| *s <= LATENCY_MAX)
            .collect();
        let lat = (!small.is_empty()).then(|| P2pParams {
            tests: vec![Test::Latency],
            sizes: small,
            ..base.clone()
        });
        (bw, lat)
    }

    /// Measures `setting` (passed as environment variables) on every pair.
    pub fn measure(
        &self,
        setting: &Setting,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Vec<ClassMeasure>, String> {
        self.measure_env(to_env(self.layer, setting), progress)
    }

    /// Measures with exactly these extra environment variables (the tuned
    /// file's content, or `OMPI_MCA_mca_base_envar_file_prefix=FILE`).
    pub fn measure_env(
        &self,
        env: Vec<(String, String)>,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Vec<ClassMeasure>, String> {
        let backend = Backend::Mpi {
            which: self.which,
            build: self.build.clone(),
            env,
        };
        let mut out = Vec::new();
        for (class, pair) in &self.pairs {
            let mut lines = Vec::new();
            for p in std::iter::once(&self.bw).chain(self.latency.as_ref()) {
                let bound = self.timeout.unwrap_or_else(|| p.time_bound());
                let run = backend
                    .run(*pair, p, bound, progress)
                    .map_err(|e| format!("class {class}, pair {},{}: {e}", pair.0, pair.1))?;
                lines.extend(run.lines);
            }
            out.push(ClassMeasure {
                class: class.clone(),
                pair: *pair,
                lines,
            });
        }
        Ok(out)
    }
}

/// The pml Open MPI selects for a 2-rank job on this machine (`ob1` with
/// btl vader, or `ucx`), from `pml_base_verbose` output of tc_mpit_cvars.
pub fn openmpi_pml(build: &std::path::Path) -> Result<String, String> {
    openmpi_pml_env(build, &[])
}

/// [`openmpi_pml`] with extra environment variables (e.g. the exported
/// file, to check that using it keeps the pml the defaults select).
pub fn openmpi_pml_env(
    build: &std::path::Path,
    env: &[(String, String)],
) -> Result<String, String> {
    let bin = build.join("openmpi").join("tc_mpit_cvars");
    if !bin.is_file() {
        return Err(format!(
            "{} not found; build it with `make -C mpi`",
            bin.display()
        ));
    }
    let mut cmd = Command::new(MpiImpl::OpenMpi.mpirun());
    cmd.args([
        "-n",
        "2",
        "--oversubscribe",
        "--mca",
        "pml_base_verbose",
        "10",
    ])
    .arg(&bin)
    .arg("pml_ucx_devices")
    .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
    .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    .envs(env.iter().map(|(k, v)| (k, v)));
    let out = run_bounded(cmd, "openmpi pml probe", Duration::from_secs(60))
        .map_err(|e| e.to_string())?;
    let text = format!("{}\n{}", out.stdout, out.stderr);
    parse_selected_pml(&text).ok_or_else(|| {
        format!(
            "openmpi pml probe: cannot tell which pml Open MPI selects ({}): {}",
            out.status,
            topocomm_measure::procrun::last_error_line(&out.stderr)
        )
    })
}

/// `select: component ob1 selected` -> `ob1`.
pub fn parse_selected_pml(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let rest = l.split("select: component ").nth(1)?;
        let name = rest.strip_suffix(" selected")?;
        Some(name.trim().to_string())
    })
}

/// The layer a pml name means.
pub fn layer_of_pml(pml: &str) -> Layer {
    if pml == "ucx" {
        Layer::OmpiUcx
    } else {
        Layer::Vader
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_the_jobs_and_reads_the_pml() {
        let base = P2pParams {
            tests: vec![Test::Bw, Test::Latency],
            sizes: vec![8, 4096, 65536],
            cold: false,
            llc: 1 << 25,
            samples: 5,
            min_time_ms: 1.0,
            window: 8,
            probe: 0,
        };
        let (bw, lat) = Runner::params(&base);
        assert_eq!(bw.tests, vec![Test::Bw]);
        assert_eq!(bw.sizes.len(), 3);
        assert_eq!(lat.unwrap().sizes, vec![8, 4096]);
        let (_, lat) = Runner::params(&P2pParams {
            sizes: vec![1 << 20],
            ..base
        });
        assert!(lat.is_none());
        assert_eq!(
            parse_selected_pml(
                "[vm:1] select: init returned priority 20\n[vm:1] select: component ob1 selected\n"
            ),
            Some("ob1".into())
        );
        assert_eq!(layer_of_pml("ucx"), Layer::OmpiUcx);
        assert_eq!(layer_of_pml("ob1"), Layer::Vader);
    }
}
