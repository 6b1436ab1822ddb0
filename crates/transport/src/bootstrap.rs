//! Bootstrap without the launcher (e.g. from an MPI communicator): one
//! process creates the segment for the ranks of its node and passes the
//! descriptor to the others by its own means (the MPI library sends it over
//! an abstract Unix socket with `SCM_RIGHTS`); every rank then joins with
//! [`crate::Comm::join`]. Nothing is named in the filesystem or `/dev/shm`.

use crate::plan::resolve;
use crate::rules::Rules;
use crate::segment::Segment;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use topocomm_topo::Machine;

/// Creates the segment of a job whose rank `r` runs on PU `pus[r]` (OS
/// index; `None` = not bound to a single PU), with per-pair plans from
/// `rules` (a rules file; `None` = this machine's measured rules if cached,
/// else the built-in ones: [`crate::autotune::cached_or_builtin`]). Returns the
/// segment's descriptor (close-on-exec); the memory lives as long as a
/// descriptor or a mapping of it does.
pub fn create_segment(
    m: &Machine,
    pus: &[Option<u32>],
    rules: Option<&Path>,
) -> Result<OwnedFd, String> {
    let rules = match rules {
        Some(p) => Rules::load(p, m)?,
        None => crate::autotune::cached_or_builtin(m),
    };
    let plans: Vec<(String, crate::Params)> = resolve(m, &rules, pus)?
        .into_iter()
        .map(|p| (p.class, p.params))
        .collect();
    let mut seg = Segment::create(pus.len(), &plans)?;
    let fd = seg.fd;
    // The descriptor now belongs to the caller; dropping `seg` only unmaps.
    seg.fd = -1;
    // SAFETY: `fd` is the memfd Segment::create opened, and `seg` no longer
    // closes it, so the OwnedFd is its only owner.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Comm;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_created_segment_can_be_joined_and_bad_input_is_refused() {
        let m = topocomm_topo::load_default(Some("synthetic:core:2 pu:1")).unwrap();
        let fd = create_segment(&m, &[Some(0)], None).unwrap();
        // SAFETY: fcntl on a descriptor we own.
        let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFD) };
        assert_eq!(flags & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
        let mut c = Comm::join(fd, 0).unwrap();
        assert_eq!((c.rank(), c.size()), (0, 1));
        c.send(b"x", 0, 1).unwrap();
        let mut b = [0u8; 1];
        assert_eq!(c.recv(&mut b, 0, 1).unwrap().count, 1);

        let e = create_segment(&m, &[Some(0), Some(9)], None).unwrap_err();
        assert!(e.contains('9'), "{e}");
        let e = create_segment(&m, &[None], Some(Path::new("/nonexistent/r.toml"))).unwrap_err();
        assert!(e.contains("/nonexistent/r.toml"), "{e}");
        let fd = create_segment(&m, &[None, None], None).unwrap();
        let e = Comm::join(fd, 2).err().expect("rank out of range");
        assert!(e.to_string().contains("out of range"), "{e}");
    }
}
