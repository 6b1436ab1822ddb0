//! Runs a benchmark job (mpirun, `topocomm run`) as its own process group,
//! collecting stdout and stderr, and kills the whole job tree if it outlives
//! its time bound: a stuck peer is an error, never a hang. Each job that
//! runs Open MPI's mpirun (itself or behind a wrapper) gets its own Open
//! MPI session-directory base (`ompi_session`).

use crate::ompi_session::SessionBase;
use crate::{Error, Result};
use std::io::{BufRead, Read};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a finished job printed.
#[derive(Debug)]
pub struct JobOutput {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

/// Runs `cmd` with a time bound. Errors name `what` and say why (cannot
/// start, killed after the bound, non-zero exit with the last stderr line).
pub fn run_bounded(cmd: Command, what: &str, limit: Duration) -> Result<JobOutput> {
    run_bounded_with(cmd, what, limit, &mut |_| {})
}

/// [`run_bounded`], calling `on_line` with each stdout line as it arrives
/// (progress of long jobs).
pub fn run_bounded_with(
    mut cmd: Command,
    what: &str,
    limit: Duration,
    on_line: &mut dyn FnMut(&str),
) -> Result<JobOutput> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Own process group: the timeout kills mpirun and every rank.
        .process_group(0);
    // Lives until the job has ended (or been killed), then goes with
    // whatever the job left in it.
    let _session = SessionBase::isolate(&mut cmd);
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|cause| Error::Spawn {
        what: what.into(),
        program: cmd.get_program().into(),
        cause,
    })?;
    let pgid = child.id();
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            String::from_utf8_lossy(&v).into_owned()
        })
    };
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stdout = child.stdout.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let err = drain(Box::new(child.stderr.take().expect("piped")));
    let status = loop {
        while let Ok(line) = rx.try_recv() {
            on_line(&line);
        }
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if start.elapsed() > limit => {
                kill_group(pgid);
                let _ = child.wait();
                return Err(Error::JobTimeout {
                    what: what.into(),
                    limit,
                });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(cause) => {
                kill_group(pgid);
                return Err(Error::JobWait {
                    what: what.into(),
                    cause,
                });
            }
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    Ok(JobOutput {
        status,
        stdout,
        stderr,
        elapsed: start.elapsed(),
    })
}

/// Sends SIGKILL to a process group through kill(1) (no unsafe code here).
fn kill_group(pgid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// The line of a job's stderr that says what went wrong: the first one from
/// our own programs (`tc_mpibench:`, `topocomm:`, `topocomm-worker:`; a
/// rank's own error comes before the launcher's `topocomm run: rank N
/// exited` line), else the last non-empty line that is not a meta line or
/// a launcher's ruler.
pub fn last_error_line(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().map(str::trim).collect();
    if let Some(l) = lines.iter().find(|l| {
        ["tc_mpibench:", "topocomm:", "topocomm-worker:"]
            .iter()
            .any(|p| l.starts_with(p))
    }) {
        return l.to_string();
    }
    lines
        .iter()
        .rfind(|l| !l.is_empty() && !l.starts_with('{') && !l.chars().all(|c| c == '-'))
        .copied()
        .unwrap_or("no message")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collects_output_and_kills_on_timeout() {
        let mut c = Command::new("sh");
        c.args(["-c", "echo out; echo err >&2; exit 3"]);
        let o = run_bounded(c, "t", Duration::from_secs(10)).unwrap();
        assert_eq!(o.status.code(), Some(3));
        assert_eq!(o.stdout.trim(), "out");
        assert_eq!(last_error_line(&o.stderr), "err");

        let mut c = Command::new("sh");
        // The child sleeps too: the whole group must go.
        c.args(["-c", "sleep 30 & sleep 30"]);
        let t0 = Instant::now();
        let e = run_bounded(c, "sleeper", Duration::from_millis(300))
            .unwrap_err()
            .to_string();
        assert!(e.contains("sleeper") && e.contains("killed"), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(10));

        let c = Command::new("/nonexistent/tc-no-such-program");
        let e = run_bounded(c, "ghost", Duration::from_secs(10)).unwrap_err();
        assert!(
            matches!(&e, Error::Spawn { cause, .. } if cause.kind() == std::io::ErrorKind::NotFound),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .starts_with("ghost: cannot start \"/nonexistent/tc-no-such-program\": "),
            "{e}"
        );
    }

    #[test]
    fn a_ranks_own_error_wins_over_the_launchers_summary() {
        let stderr = "topocomm-worker: rank 0: the peer did not answer in 30 s\n\
                      topocomm run: rank 0 (pid 7) exited with code 1; stopping the job\n";
        assert_eq!(
            last_error_line(stderr),
            "topocomm-worker: rank 0: the peer did not answer in 30 s"
        );
        assert_eq!(
            last_error_line(
                "noise\ntopocomm run: rank 1 (pid 8) exited with code 1; stopping the job\n"
            ),
            "topocomm run: rank 1 (pid 8) exited with code 1; stopping the job"
        );
    }
}
