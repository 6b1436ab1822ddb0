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
    create_segment_bound(m, pus, &[], rules)
}

/// [`create_segment`] where the ranks not bound to one PU may be bound to
/// sets of PUs: `sets[r]`, OS indexes (empty: unknown), which the
/// collectives' near order groups by ([`crate::plan::fill_set_depths`]).
pub fn create_segment_bound(
    m: &Machine,
    pus: &[Option<u32>],
    sets: &[Vec<u32>],
    rules: Option<&Path>,
) -> Result<OwnedFd, String> {
    let rules = match rules {
        Some(p) => Rules::load(p, m)?,
        None => crate::autotune::cached_or_builtin(m),
    };
    let mut plans = resolve(m, &rules, pus)?;
    crate::plan::fill_set_depths(&mut plans, m, pus, sets);
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

    /// Pages of a range not resident in this process's mapping (mincore).
    fn missing_pages(ptr: *const u8, len: usize) -> usize {
        let start = ptr as usize / 4096 * 4096;
        let pages = (ptr as usize + len).div_ceil(4096) - start / 4096;
        let mut v = vec![0u8; pages];
        // SAFETY: page-aligned range inside a live mapping; `v` has a byte per page.
        let r = unsafe { libc::mincore(start as *mut libc::c_void, pages * 4096, v.as_mut_ptr()) };
        assert_eq!(r, 0, "mincore: {}", std::io::Error::last_os_error());
        v.iter().filter(|b| **b & 1 == 0).count()
    }

    /// The regression check of the first-message page faults: once started,
    /// every slot page of a rank's channels is resident in its mapping.
    #[test]
    fn slot_pages_are_mapped_in_at_start_up() {
        let m = topocomm_topo::load_default(Some("synthetic:core:2 pu:1")).unwrap();
        let fd = create_segment(&m, &[None, None], None).unwrap();
        let other = fd.try_clone().unwrap();
        let peer = std::thread::spawn(move || {
            let c = Comm::join(other, 1).unwrap();
            // Keep the mapping alive until rank 0 has looked.
            std::thread::sleep(std::time::Duration::from_millis(200));
            drop(c);
        });
        let c = Comm::join(fd, 0).unwrap();
        assert!(c.prefault_wanted());
        for (ptr, plan) in [
            (c.outs[1].slots as *const u8, c.outs[1].plan),
            (c.ins[1].slots, c.ins[1].plan),
        ] {
            let len = plan.ring_bytes() as usize;
            assert!(len >= 64 << 10, "{len}");
            assert_eq!(missing_pages(ptr, len), 0, "slot pages not resident");
        }
        peer.join().unwrap();
    }
}
