//! Pinning threads to PUs through hwloc (safe bindings; no raw syscalls here).

use hwlocality::cpu::binding::CpuBindingFlags;
use hwlocality::cpu::cpuset::CpuSet;
use hwlocality::Topology;
use std::sync::OnceLock;

fn live() -> Result<&'static Topology, String> {
    static TOPO: OnceLock<Result<Topology, String>> = OnceLock::new();
    TOPO.get_or_init(|| Topology::new().map_err(|e| format!("hwloc cannot read this machine: {e}")))
        .as_ref()
        .map_err(Clone::clone)
}

/// OS indexes of the PUs this process may run on.
pub fn allowed_pus() -> Result<Vec<u32>, String> {
    let t = live()?;
    Ok(t.allowed_cpuset()
        .iter_set()
        .map(|i| usize::from(i) as u32)
        .collect())
}

/// The cpuset of one usable PU, or an error naming the PU and the usable ones
/// (e.g. when a synthetic topology is larger than the machine).
fn usable_pu_set(os_pu: u32) -> Result<CpuSet, String> {
    let allowed = allowed_pus()?;
    if !allowed.contains(&os_pu) {
        return Err(format!(
            "PU {os_pu} does not exist or is not usable on this machine (usable PUs: {})",
            topocomm_topo::PuSet::from_indexes(allowed)
        ));
    }
    let mut set = CpuSet::new();
    set.set(os_pu as usize);
    Ok(set)
}

/// Binds the calling thread to the PU with this OS index.
///
/// Refused on the main thread: child processes inherit the affinity of the
/// thread that starts them, so a pinned main thread would silently confine
/// every benchmark worker and MPI job started later to one PU. Pinned work
/// runs on its own thread ([`on_pu`], or a scoped thread that pins itself).
pub fn pin_current_thread(os_pu: u32) -> Result<(), String> {
    if std::thread::current().name() == Some("main") {
        return Err(format!(
            "refusing to pin the main thread to PU {os_pu}: the processes it starts would \
             inherit the binding (run pinned work on its own thread, pin::on_pu)"
        ));
    }
    let set = usable_pu_set(os_pu)?;
    let t = live()?;
    t.bind_cpu(&set, CpuBindingFlags::THREAD | CpuBindingFlags::STRICT)
        .or_else(|_| t.bind_cpu(&set, CpuBindingFlags::THREAD))
        .map_err(|e| format!("cannot bind the thread to PU {os_pu}: {e}"))
}

/// Runs `f` on a new thread bound to the PU with this OS index and returns
/// its result; the calling thread's binding is untouched.
pub fn on_pu<T: Send>(
    os_pu: u32,
    f: impl FnOnce() -> Result<T, String> + Send,
) -> Result<T, String> {
    std::thread::scope(|s| {
        s.spawn(move || {
            pin_current_thread(os_pu)?;
            f()
        })
        .join()
        .map_err(|_| format!("the thread pinned to PU {os_pu} panicked"))?
    })
}

/// Binds the whole current process to the PU with this OS index.
pub fn pin_current_process(os_pu: u32) -> Result<(), String> {
    let set = usable_pu_set(os_pu)?;
    live()?
        .bind_cpu(&set, CpuBindingFlags::PROCESS)
        .map_err(|e| format!("cannot bind the process to PU {os_pu}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_to_an_allowed_pu_and_rejects_a_missing_one() {
        let pus = allowed_pus().unwrap();
        assert!(!pus.is_empty());
        let last = *pus.last().unwrap();
        std::thread::spawn(move || pin_current_thread(last).unwrap())
            .join()
            .unwrap();
        let e = pin_current_thread(100_000).unwrap_err();
        assert!(e.contains("PU 100000"), "{e}");
    }

    /// The affinity this thread runs with, as hwloc reports it.
    fn my_binding() -> Vec<u32> {
        live()
            .unwrap()
            .cpu_binding(CpuBindingFlags::THREAD)
            .unwrap()
            .iter_set()
            .map(|i| usize::from(i) as u32)
            .collect()
    }

    #[test]
    fn on_pu_runs_pinned_and_leaves_the_caller_alone() {
        let pus = allowed_pus().unwrap();
        let last = *pus.last().unwrap();
        let before = my_binding();
        let inside = on_pu(last, || Ok(my_binding())).unwrap();
        assert_eq!(inside, vec![last]);
        assert_eq!(my_binding(), before);
        let e = on_pu(100_000, || Ok(())).unwrap_err();
        assert!(e.contains("PU 100000"), "{e}");
        let e = on_pu(last, || Err::<(), _>("inner failure".into())).unwrap_err();
        assert_eq!(e, "inner failure");
    }

    #[test]
    fn the_main_thread_is_never_pinned() {
        let last = *allowed_pus().unwrap().last().unwrap();
        let e = std::thread::Builder::new()
            .name("main".into())
            .spawn(move || pin_current_thread(last))
            .unwrap()
            .join()
            .unwrap()
            .unwrap_err();
        assert!(e.contains("main thread") && e.contains("inherit"), "{e}");
    }
}
