//! Where an unbound rank of a crowded node starts: one nudge at start-up
//! that moves rank `r` to the `r`-th CPU of its affinity mask (modulo its
//! size) and gives the mask back at once (docs/transport.md, "Crowded
//! unbound ranks start spread").
//!
//! Why: with more ranks than CPUs and no binding (`mpirun --oversubscribe`
//! binds to none), the kernel placed the 4 ranks of a job on the 2-vCPU
//! Intel Xeon dev VM 3:1 or 4:0 (`perf sched timehist`) and left them so
//! for the whole run: ranks that wait by yielding never sleep, so wake-up
//! placement never runs, and a rank that ran microseconds ago is cache-hot
//! to the load balancer. A barrier then took three `sched_yield` hand-overs
//! on the crowded CPU (about 1 us each) instead of one per CPU. The mask is
//! restored, so the scheduler stays free to move the rank later and the
//! binding the user asked for (none) is kept.

/// Moves the calling thread to the `index`-th CPU (modulo their number) of
/// its affinity mask and restores the mask. Does nothing when the mask has
/// one CPU or cannot be read; a failure to restore it is returned (the
/// thread would otherwise stay pinned).
pub(crate) fn nudge(index: usize) -> Result<(), String> {
    // The mask as `launch::allowed_cpus` reads it (empty when unreadable).
    let cpus = crate::launch::allowed_cpus();
    if cpus.len() < 2 {
        return Ok(());
    }
    // SAFETY: zeroed cpu_set_t values are empty sets; CPU_SET of CPUs the
    // kernel reported (below CPU_SETSIZE); sched_setaffinity reads the
    // sets we own, of the size given.
    unsafe {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpus[index % cpus.len()] as usize, &mut one);
        let mut mask: libc::cpu_set_t = std::mem::zeroed();
        for &c in &cpus {
            libc::CPU_SET(c as usize, &mut mask);
        }
        // The kernel moves a running thread off a CPU its new mask lacks
        // before the call returns; a refusal (a cpuset that changed) only
        // means no nudge.
        libc::sched_setaffinity(0, size, &one);
        if libc::sched_setaffinity(0, size, &mask) != 0 {
            return Err(format!(
                "could not restore the CPU affinity after spreading: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_nudge_keeps_the_affinity_mask() {
        let before = crate::launch::allowed_cpus();
        for i in 0..4 {
            super::nudge(i).unwrap();
            assert_eq!(crate::launch::allowed_cpus(), before);
        }
    }
}
