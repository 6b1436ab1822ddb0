//! The launcher behind `topocomm run`: binds, spawns, bootstraps (the
//! segment descriptor and `TOPOCOMM_*` variables), watches and cleans up.

use crate::plan::Plan;
use crate::segment::Segment;
use std::ffi::OsString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::str::FromStr;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};
use topocomm_topo::{Machine, ObjectKind};

/// How ranks are pinned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Bind {
    /// Not pinned.
    None,
    /// Round-robin over cores in topology order (first PU of each core).
    Core,
    /// Round-robin over PUs in topology order.
    Pu,
    /// Explicit PU OS indexes, one per rank (cycled if shorter).
    List(Vec<u32>),
    /// hwloc locations (`core:0,core:1`, `pu:0-1`, `numa:1`), resolved
    /// against the machine by [`topocomm_topo::Locations::per_rank`].
    Locations(topocomm_topo::Locations),
}

impl FromStr for Bind {
    type Err = String;
    fn from_str(s: &str) -> Result<Bind, String> {
        match s.trim() {
            "none" => Ok(Bind::None),
            "core" => Ok(Bind::Core),
            "pu" => Ok(Bind::Pu),
            list => {
                if let Some(v) = list
                    .split(',')
                    .map(|x| x.trim().parse::<u32>())
                    .collect::<Result<Vec<_>, _>>()
                    .ok()
                    .filter(|v| !v.is_empty())
                {
                    return Ok(Bind::List(v));
                }
                topocomm_topo::Locations::parse(list)
                    .map(Bind::Locations)
                    .map_err(|e| {
                        format!(
                            "--bind '{s}': {e} (expected none, core, pu, PU OS indexes like 0,4 or hwloc locations like core:0,core:1 or pu:0-1)"
                        )
                    })
            }
        }
    }
}

/// The CPU the calling thread runs on now, if the kernel says.
pub fn running_cpu() -> Option<usize> {
    crate::waiting::current_cpu()
}

/// PUs this process may run on.
pub fn allowed_cpus() -> Vec<u32> {
    // SAFETY: sched_getaffinity into a zeroed cpu_set_t of the right size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as u32)
            .filter(|&c| libc::CPU_ISSET(c as usize, &set))
            .collect()
    }
}

/// The PU of each of `n` ranks under `policy`, among the PUs this process
/// may run on.
pub fn bind_pus(m: &Machine, policy: &Bind, n: usize) -> Result<Vec<Option<u32>>, String> {
    bind_pus_within(m, policy, n, &allowed_cpus())
}

/// What `topocomm run -n N` binds without `--bind` or `--map`: one rank
/// per core while there are enough cores, else none bound. `allowed`: the
/// PUs ranks may use (empty: all of `m`'s, for a topology that is not this
/// machine's, as `topocomm plan --ranks` shows).
pub fn default_pus(m: &Machine, n: usize, allowed: &[u32]) -> Result<Vec<Option<u32>>, String> {
    let cores = m
        .objects
        .iter()
        .filter(|o| o.kind == ObjectKind::Core)
        .count();
    let policy = if n <= cores { Bind::Core } else { Bind::None };
    bind_pus_within(m, &policy, n, allowed)
}

/// [`bind_pus`] among `allowed` (empty: every PU of `m`).
pub fn bind_pus_within(
    m: &Machine,
    policy: &Bind,
    n: usize,
    allowed: &[u32],
) -> Result<Vec<Option<u32>>, String> {
    let order: Vec<u32> = match policy {
        Bind::None => return Ok(vec![None; n]),
        Bind::Core => {
            let cores: Vec<u32> = m
                .objects
                .iter()
                .filter(|o| o.kind == ObjectKind::Core)
                .filter_map(|o| {
                    o.cpuset
                        .indexes()
                        .iter()
                        .copied()
                        .find(|p| allowed.is_empty() || allowed.contains(p))
                })
                .collect();
            if cores.is_empty() {
                m.pus.iter().map(|p| p.os_index).collect()
            } else {
                cores
            }
        }
        Bind::Pu => m
            .pus
            .iter()
            .map(|p| p.os_index)
            .filter(|p| allowed.is_empty() || allowed.contains(p))
            .collect(),
        Bind::List(v) => {
            for &p in v {
                m.require_pu(p).map_err(|e| format!("--bind: {e}"))?;
                if !allowed.is_empty() && !allowed.contains(&p) {
                    return Err(format!(
                        "--bind: PU {p} is not in the CPUs this process may use ({allowed:?})"
                    ));
                }
            }
            v.clone()
        }
        Bind::Locations(l) => {
            let v = l
                .per_rank(m)
                .map_err(|e| format!("--bind {}: {e}", l.text()))?;
            if let Some(p) = v
                .iter()
                .find(|p| !allowed.is_empty() && !allowed.contains(p))
            {
                return Err(format!(
                    "--bind {}: PU {p} is not in the CPUs this process may use ({allowed:?})",
                    l.text()
                ));
            }
            v
        }
    };
    if order.is_empty() {
        return Err("--bind: no PU available to bind to".into());
    }
    Ok((0..n).map(|r| Some(order[r % order.len()])).collect())
}

/// Reads a `topocomm map --format perm` file: one line `<node> <pu>` per
/// rank (node must be 0: one node).
pub fn read_map(path: &Path, m: &Machine, n: usize) -> Result<Vec<Option<u32>>, String> {
    let file = path.display();
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("{file}: cannot read map file: {e}"))?;
    let mut pus = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.split('#').next().unwrap_or("").trim();
        if t.is_empty() {
            continue;
        }
        let f: Vec<&str> = t.split_whitespace().collect();
        let parsed = match f.as_slice() {
            [a, b] => a.parse::<u32>().ok().zip(b.parse::<u32>().ok()),
            _ => None,
        };
        let (node, pu) = parsed.ok_or_else(|| {
            format!(
                "{file}: line {}: expected '<node-index> <pu-os-index>', got '{t}'",
                i + 1
            )
        })?;
        if node != 0 {
            return Err(format!(
                "{file}: line {}: node {node}: topocomm run launches on one node (node 0)",
                i + 1
            ));
        }
        m.require_pu(pu)
            .map_err(|e| format!("{file}: line {}: {e}", i + 1))?;
        pus.push(Some(pu));
    }
    if pus.len() != n {
        return Err(format!(
            "{file}: has {} rank lines but -n is {n}",
            pus.len()
        ));
    }
    Ok(pus)
}

/// What to launch.
pub struct Launch {
    pub pus: Vec<Option<u32>>,
    pub plans: Vec<Plan>,
    /// Exported as `TOPOCOMM_TIMEOUT` when set.
    pub timeout: Option<f64>,
    /// Time the other ranks get to report a failure before being killed.
    pub grace: Duration,
    pub program: OsString,
    pub args: Vec<OsString>,
}

static SIGNALLED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNALLED.store(sig, Ordering::Relaxed);
}

fn install_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: installs an async-signal-safe handler (one atomic store).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// A descriptor that becomes readable when child `pid` exits (Linux 5.3+);
/// `None` where the kernel has no `pidfd_open`.
fn pidfd(pid: i32) -> Option<OwnedFd> {
    // SAFETY: a plain system call with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a descriptor just returned to us and owned by nobody else.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Sleeps until a live rank exits, a signal arrives (the handlers have no
/// `SA_RESTART`, so `poll` returns) or `max` passes. Blocking here instead
/// of polling `waitpid` every few milliseconds keeps the launcher off the
/// CPUs of the ranks: on a node with no spare CPU each poll preempted the
/// rank it shared a CPU with (about a thousand times a second). Without
/// pidfds (old kernels) it polls every 3 ms as before.
fn wait_for_event(fds: &[Option<OwnedFd>], alive: &[bool], max: Duration) {
    let mut polled: Vec<libc::pollfd> = fds
        .iter()
        .zip(alive)
        .filter(|(_, a)| **a)
        .filter_map(|(f, _)| f.as_ref())
        .map(|f| libc::pollfd {
            fd: f.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    if polled.len() < alive.iter().filter(|a| **a).count() {
        std::thread::sleep(max.min(Duration::from_millis(3)));
        return;
    }
    let ms = max.as_millis().clamp(1, i32::MAX as u128) as i32;
    // SAFETY: `polled` is a valid array of `polled.len()` pollfds.
    unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, ms) };
}

fn kill_all(pids: &[i32], alive: &[bool], sig: i32) {
    for (p, a) in pids.iter().zip(alive) {
        if *a {
            // SAFETY: signalling our own, not yet reaped, child.
            unsafe { libc::kill(*p, sig) };
        }
    }
}

fn describe(status: i32) -> (i32, String) {
    if libc::WIFEXITED(status) {
        let c = libc::WEXITSTATUS(status);
        (c, format!("exited with code {c}"))
    } else if libc::WIFSIGNALED(status) {
        let s = libc::WTERMSIG(status);
        (128 + s, format!("was killed by signal {s}"))
    } else {
        (1, format!("ended with status {status}"))
    }
}

/// Runs the job; returns the exit code to propagate: the first non-zero
/// exit code, 128 + signal for a rank killed by a signal, 128 + signal when
/// the launcher itself was interrupted, else 0.
pub fn run(l: &Launch) -> Result<i32, String> {
    let n = l.pus.len();
    let seg = Segment::create(n, &l.plans)?;
    install_handlers();
    let me = std::process::id() as i32;
    let mut pids = Vec::with_capacity(n);
    for (rank, pu) in l.pus.iter().enumerate() {
        let mut cmd = Command::new(&l.program);
        cmd.args(&l.args)
            .env("TOPOCOMM_RANK", rank.to_string())
            .env("TOPOCOMM_SIZE", n.to_string())
            .env("TOPOCOMM_SHM_FD", seg.fd.to_string());
        if let Some(t) = l.timeout {
            cmd.env("TOPOCOMM_TIMEOUT", t.to_string());
        }
        if let Some(p) = pu {
            cmd.env("TOPOCOMM_PU", p.to_string());
        }
        let (fd, pu) = (seg.fd, *pu);
        // SAFETY: the closure runs between fork and exec and calls only
        // async-signal-safe functions (fcntl, prctl, getppid, kill,
        // sched_setaffinity) on stack data.
        unsafe {
            cmd.pre_exec(move || {
                // The segment descriptor survives exec in the child only.
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Die with the launcher, even on kill -9 of the launcher.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::getppid() != me {
                    libc::kill(libc::getpid(), libc::SIGKILL);
                }
                if let Some(p) = pu {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(p as usize, &mut set);
                    if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        match cmd.spawn() {
            Ok(child) => pids.push(child.id() as i32),
            Err(e) => {
                let alive = vec![true; pids.len()];
                kill_all(&pids, &alive, libc::SIGKILL);
                for p in &pids {
                    // SAFETY: reaping our own children.
                    unsafe { libc::waitpid(*p, std::ptr::null_mut(), 0) };
                }
                return Err(format!(
                    "cannot start rank {rank}: '{}': {e}",
                    l.program.to_string_lossy()
                ));
            }
        }
    }
    let pidfds: Vec<Option<OwnedFd>> = pids.iter().map(|&p| pidfd(p)).collect();
    let mut alive = vec![true; n];
    let mut left = n;
    let mut code: Option<i32> = None;
    let mut kill_at: Option<Instant> = None;
    while left > 0 {
        loop {
            let mut status = 0;
            // SAFETY: non-blocking reap of any of our children.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid <= 0 {
                break;
            }
            let Some(rank) = pids.iter().position(|&p| p == pid) else {
                continue;
            };
            alive[rank] = false;
            left -= 1;
            let (c, what) = describe(status);
            if c != 0 && code.is_none() {
                code = Some(c);
                crate::say!("topocomm run: rank {rank} (pid {pid}) {what}; stopping the job");
                seg.set_abort(rank as u64 + 1);
                kill_at = Some(Instant::now() + l.grace);
            }
        }
        if left == 0 {
            break;
        }
        let sig = SIGNALLED.swap(0, Ordering::Relaxed);
        if sig != 0 {
            crate::say!("topocomm run: received signal {sig}; terminating the ranks");
            code.get_or_insert(128 + sig);
            seg.set_abort(u64::MAX);
            kill_all(&pids, &alive, libc::SIGTERM);
            kill_at = Some(Instant::now() + Duration::from_secs(1));
        }
        if kill_at.is_some_and(|t| Instant::now() >= t) {
            kill_all(&pids, &alive, libc::SIGKILL);
            kill_at = None;
        }
        // A signal that came after the check above waits for the next
        // wake-up at most: 100 ms.
        let mut max = Duration::from_millis(100);
        if let Some(t) = kill_at {
            max = max.min(t.saturating_duration_since(Instant::now()));
        }
        wait_for_event(&pidfds, &alive, max);
    }
    Ok(code.unwrap_or(0))
}
