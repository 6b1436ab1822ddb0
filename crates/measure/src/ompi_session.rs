//! A private session-directory base for each Open MPI job topocomm starts.
//!
//! Open MPI 4.1's mpirun keeps its session files under
//! `<tmp>/ompi.<host>.<uid>`, shared by every mpirun of one user: each
//! creates it at start and removes it at exit when it is empty. Two jobs
//! that start and end together race on it: one removes the directory
//! between the other's `mkdir` (EEXIST) and `stat`, and `orte_init` fails
//! with "A call to mkdir was unable to create the desired directory ...
//! File exists" (seen in CI with two tests launching at once; a user
//! running two benchmarks at once hits it alike). Giving each job its own
//! `orte_tmpdir_base` removes the shared directory from the picture. Only
//! jobs that run Open MPI's launcher get one; a base left by a process
//! killed mid-job (SIGKILL runs no destructor) is removed by the next job
//! of any topocomm process once that process is gone.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Open MPI's MCA parameter for the session-directory base, as environment.
pub const TMPDIR_BASE_VAR: &str = "OMPI_MCA_orte_tmpdir_base";

/// A job's own session-directory base; removed, with whatever a killed
/// job left in it, when dropped.
#[derive(Debug)]
pub struct SessionBase {
    dir: Option<PathBuf>,
}

impl SessionBase {
    /// Points `cmd` at a fresh directory under the system temporary
    /// directory, unless the user (process environment) or the caller
    /// (`cmd`'s environment) already chose a base. If the directory cannot
    /// be made the job runs as it would have without it: Open MPI then
    /// says itself what is wrong with the temporary directory.
    pub fn isolate(cmd: &mut Command) -> SessionBase {
        let chosen = std::env::var_os(TMPDIR_BASE_VAR).is_some()
            || cmd.get_envs().any(|(k, _)| k == TMPDIR_BASE_VAR);
        if chosen || !runs_open_mpi(cmd) {
            return SessionBase { dir: None };
        }
        let tmp = std::env::temp_dir();
        sweep_orphans(&tmp);
        match fresh_dir(&tmp) {
            Some(dir) => {
                cmd.env(TMPDIR_BASE_VAR, &dir);
                SessionBase { dir: Some(dir) }
            }
            None => SessionBase { dir: None },
        }
    }

    /// The directory this job uses, if it got one of its own.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }
}

impl Drop for SessionBase {
    fn drop(&mut self) {
        if let Some(d) = &self.dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// Whether `cmd` runs Open MPI's launcher: as its program, or behind a
/// wrapper that takes the launch command as arguments (`topocomm accel --
/// mpirun.openmpi ...`, `timeout 60 mpirun.openmpi ...`).
fn runs_open_mpi(cmd: &Command) -> bool {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .filter_map(|a| Path::new(a).file_name())
        .any(|n| {
            ["mpirun.openmpi", "mpiexec.openmpi", "orterun"]
                .iter()
                .any(|l| n == *l)
        })
}

/// Removes the bases of processes that are gone (`/proc/<pid>` absent):
/// what a SIGKILL mid-job left.
fn sweep_orphans(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("topocomm-ompi-")) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// `<tmp>/topocomm-ompi-<pid>-<n>`, mode 0700 (Open MPI wants its session
/// files private). Short on purpose: PMIx puts a Unix socket inside it,
/// and socket paths are limited to 108 bytes.
fn fresh_dir(tmp: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    for _ in 0..16 {
        // Relaxed: the counter only has to hand out distinct numbers.
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = tmp.join(format!("topocomm-ompi-{}-{n}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Some(dir),
            // Left by an earlier process with our pid: take the next number.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(_) => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_job_gets_its_own_base_and_it_goes_with_the_guard() {
        let mut a = Command::new("mpirun.openmpi");
        let mut b = Command::new("timeout");
        b.args(["60", "/usr/bin/mpirun.openmpi", "-n", "2", "true"]);
        let (ga, gb) = (SessionBase::isolate(&mut a), SessionBase::isolate(&mut b));
        let (da, db) = (ga.dir().unwrap().to_owned(), gb.dir().unwrap().to_owned());
        assert_ne!(da, db);
        let val = |c: &Command| {
            c.get_envs()
                .find(|(k, _)| *k == TMPDIR_BASE_VAR)
                .and_then(|(_, v)| v.map(PathBuf::from))
        };
        assert_eq!(val(&a).as_deref(), Some(da.as_path()));
        assert!(da.is_dir() && db.is_dir());
        // What a killed job leaves inside goes too.
        std::fs::create_dir_all(da.join("ompi.host.0/jf.1")).unwrap();
        drop(ga);
        assert!(!da.exists());
        assert!(db.is_dir());
        drop(gb);
        assert!(!db.exists());
    }

    #[test]
    fn jobs_without_open_mpi_get_none() {
        for (prog, args) in [("true", vec![]), ("mpirun.mpich", vec!["-n", "2", "true"])] {
            let mut c = Command::new(prog);
            c.args(&args);
            assert!(SessionBase::isolate(&mut c).dir().is_none(), "{prog}");
            assert!(c.get_envs().all(|(k, _)| k != TMPDIR_BASE_VAR), "{prog}");
        }
    }

    #[test]
    fn bases_of_gone_processes_are_swept() {
        let tmp = std::env::temp_dir().join(format!("tc-sweep-test-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        // No process has pid 4194304 (above Linux's pid_max limit).
        let dead = tmp.join("topocomm-ompi-4194304-0");
        let alive = tmp.join(format!("topocomm-ompi-{}-0", std::process::id()));
        let other = tmp.join("topocomm-ompi-notapid-0");
        for d in [&dead, &alive, &other] {
            std::fs::create_dir_all(d.join("ompi.host.0")).unwrap();
        }
        sweep_orphans(&tmp);
        assert!(!dead.exists());
        assert!(alive.is_dir() && other.is_dir());
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn a_base_the_caller_chose_is_kept() {
        let mut c = Command::new("mpirun.openmpi");
        c.env(TMPDIR_BASE_VAR, "/somewhere/else");
        let g = SessionBase::isolate(&mut c);
        assert!(g.dir().is_none());
        let v: Vec<_> = c
            .get_envs()
            .filter(|(k, _)| *k == TMPDIR_BASE_VAR)
            .collect();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].1, Some(std::ffi::OsStr::new("/somewhere/else")));
    }
}
