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
//! `orte_tmpdir_base` removes the shared directory from the picture. The
//! variable is Open MPI's own; MPICH and topocomm's launcher ignore it, so
//! setting it on any job is harmless.

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
        if chosen {
            return SessionBase { dir: None };
        }
        match fresh_dir(&std::env::temp_dir()) {
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
        let mut a = Command::new("true");
        let mut b = Command::new("true");
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
    fn a_base_the_caller_chose_is_kept() {
        let mut c = Command::new("true");
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
