//! Single copy between processes with `process_vm_readv` (Cross Memory
//! Attach): start-up permission setup and probing, chunked reads, and the
//! chunked writes of [`Comm::put`](crate::Comm::put).

use std::io;

/// Lets the job's peers read this process's memory (`process_vm_readv`)
/// where Yama requires it: under `ptrace_scope = 1` a process may read only
/// its descendants, and ranks are siblings. Yama also lets a process name
/// one tracer with `PR_SET_PTRACER`, and then lets that process *and its
/// descendants* read it. The ranks of a job on a node are children of one
/// process (`topocomm run`'s launcher, `mpirun`, Hydra's proxy), so each
/// rank names its parent: its siblings may read it, other processes of the
/// user may not (Open MPI's vader names "any process" instead). Ranks of
/// other parents cannot read it: their trial read at start-up fails and the
/// job uses two-copy, saying so once. Nothing is changed under scope 0
/// (every process of the user may read already) or 2-3 (no declaration
/// helps), and nothing when single copy is switched off ([`enabled`]).
pub fn allow_peers() {
    if ptrace_scope() == Some(1) {
        // SAFETY: getppid cannot fail; prctl with integer arguments only.
        unsafe {
            let parent = libc::getppid() as libc::c_ulong;
            libc::prctl(libc::PR_SET_PTRACER, parent, 0, 0, 0);
        }
    }
}

/// Whether single copy may be used: `TOPOCOMM_SINGLE_COPY=0` switches it
/// off (messages then always go through the segment, and no process is
/// allowed to read the ranks' memory), `1` or unset leaves it on.
pub fn enabled() -> Result<bool, String> {
    match std::env::var("TOPOCOMM_SINGLE_COPY") {
        Err(_) => Ok(true),
        Ok(v) => match v.trim() {
            "1" => Ok(true),
            "0" => Ok(false),
            _ => Err(format!(
                "TOPOCOMM_SINGLE_COPY='{v}': expected 0 (off) or 1 (on)"
            )),
        },
    }
}

/// Yama's ptrace scope, if the module is present.
pub fn ptrace_scope() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

/// `process_vm_readv` or `process_vm_writev`: the same arguments, the
/// local iovec read from or written to.
type VmCall = unsafe extern "C" fn(
    libc::pid_t,
    *const libc::iovec,
    libc::c_ulong,
    *const libc::iovec,
    libc::c_ulong,
    libc::c_ulong,
) -> libc::ssize_t;

/// `len` bytes between `local` and `remote` in process `pid` by `call`, in
/// calls of at most `chunk` bytes (each pins at most `chunk` bytes of
/// pages, so a long transfer stays interruptible and the caller can check
/// for faults). `short`: the error of a call that moved nothing.
///
/// # Safety
/// `local` must be valid for `len` bytes of what `call` does with it.
unsafe fn chunked(
    call: VmCall,
    pid: i32,
    local: *mut u8,
    remote: u64,
    len: usize,
    chunk: usize,
    short: (io::ErrorKind, &str),
) -> io::Result<()> {
    let mut off = 0usize;
    while off < len {
        let n = (len - off).min(chunk.max(4096));
        let l = libc::iovec {
            // SAFETY: off + n <= len, inside the caller's buffer.
            iov_base: unsafe { local.add(off) }.cast(),
            iov_len: n,
        };
        let r = libc::iovec {
            iov_base: (remote as usize + off) as *mut libc::c_void,
            iov_len: n,
        };
        // SAFETY: one valid local iovec; the remote one is checked by the kernel.
        let moved = unsafe { call(pid, &l, 1, &r, 1, 0) };
        if moved < 0 {
            return Err(io::Error::last_os_error());
        }
        if moved == 0 {
            return Err(io::Error::new(short.0, short.1));
        }
        off += moved as usize;
    }
    Ok(())
}

/// Reads `len` bytes at `remote` in process `pid` into `local`, in chunks of
/// `chunk` bytes.
///
/// # Safety
/// `local` must be valid for `len` writable bytes.
pub unsafe fn read(
    pid: i32,
    local: *mut u8,
    remote: u64,
    len: usize,
    chunk: usize,
) -> io::Result<()> {
    let short = (io::ErrorKind::UnexpectedEof, "short read");
    // SAFETY: the caller's promise; process_vm_readv writes into `local`.
    unsafe {
        chunked(
            libc::process_vm_readv,
            pid,
            local,
            remote,
            len,
            chunk,
            short,
        )
    }
}

/// Writes `len` bytes from `local` to `remote` in process `pid`
/// (`process_vm_writev`), in calls of at most `chunk` bytes like [`read`].
/// The kernel checks the same permission as for reading (ptrace attach),
/// so it works wherever [`read`] does.
///
/// # Safety
/// `local` must be valid for `len` readable bytes.
pub unsafe fn write(
    pid: i32,
    local: *const u8,
    remote: u64,
    len: usize,
    chunk: usize,
) -> io::Result<()> {
    let short = (io::ErrorKind::WriteZero, "short write");
    // SAFETY: the caller's promise; process_vm_writev only reads `local`
    // (the cast to *mut is for the shared iovec type).
    unsafe {
        chunked(
            libc::process_vm_writev,
            pid,
            local.cast_mut(),
            remote,
            len,
            chunk,
            short,
        )
    }
}

impl crate::Comm {
    /// A single-copy call found rank `peer`'s process gone (`ESRCH`): the
    /// communicator is broken from now on; the error to return.
    pub(crate) fn vanished(&mut self, peer: usize, detail: &str) -> crate::Error {
        let e = crate::Error::DeadPeer {
            rank: peer as i32,
            detail: detail.into(),
        };
        self.broken = Some(e.clone());
        e
    }
}

/// Probes single copy without peers: forks a child that allows any tracer,
/// then reads a word of its memory. `Ok(())` when CMA works, else the reason.
pub fn probe_fork() -> Result<(), String> {
    static WORD: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let want = 0x5eed_0000_0000_0000u64 | u64::from(std::process::id());
    WORD.store(want, std::sync::atomic::Ordering::Relaxed);
    let mut fds = [0i32; 2];
    // SAFETY: pipe into a two-int array.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(format!("pipe: {}", io::Error::last_os_error()));
    }
    // SAFETY: the child calls only async-signal-safe functions, then _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: async-signal-safe calls in the forked child.
        unsafe {
            libc::prctl(libc::PR_SET_PTRACER, libc::PR_SET_PTRACER_ANY, 0, 0, 0);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            let b = 1u8;
            libc::write(fds[1], (&b as *const u8).cast(), 1);
            libc::close(fds[1]);
            // Killed by the parent (or by PDEATHSIG if the parent dies).
            loop {
                libc::pause();
            }
        }
    }
    let mut b = 0u8;
    // SAFETY: closing our write end first, so a child that dies before
    // writing gives EOF instead of blocking us; then reading one byte.
    unsafe {
        libc::close(fds[1]);
        libc::read(fds[0], (&mut b as *mut u8).cast(), 1);
    }
    let mut got = 0u64;
    // SAFETY: `got` is 8 writable bytes; the remote address is WORD's in the
    // child, identical after fork.
    let res = unsafe {
        read(
            pid,
            (&mut got as *mut u64).cast(),
            WORD.as_ptr() as u64,
            8,
            4096,
        )
    };
    // SAFETY: killing and reaping our own child; closing our pipe.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
        libc::close(fds[0]);
    }
    match res {
        Ok(()) if got == want => Ok(()),
        Ok(()) => Err("trial read returned wrong data".into()),
        Err(e) => Err(format!(
            "process_vm_readv: {e}{}",
            ptrace_scope()
                .map(|s| format!(" (Yama ptrace_scope = {s})"))
                .unwrap_or_default()
        )),
    }
}
