//! Pinning threads to PUs through hwloc (safe bindings; no raw syscalls here).

use crate::PinError;
use hwlocality::cpu::binding::CpuBindingFlags;
use hwlocality::cpu::cpuset::CpuSet;
use hwlocality::Topology;
use std::sync::OnceLock;

fn live() -> Result<&'static Topology, PinError> {
    static TOPO: OnceLock<Result<Topology, PinError>> = OnceLock::new();
    TOPO.get_or_init(|| {
        Topology::new().map_err(|e| PinError::Hwloc {
            reason: e.to_string(),
        })
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// OS indexes of the PUs this process may run on.
pub fn allowed_pus() -> Result<Vec<u32>, PinError> {
    let t = live()?;
    Ok(t.allowed_cpuset()
        .iter_set()
        .map(|i| usize::from(i) as u32)
        .collect())
}

/// The cpuset of one usable PU, or an error naming the PU and the usable ones
/// (e.g. when a synthetic topology is larger than the machine).
fn usable_pu_set(os_pu: u32) -> Result<CpuSet, PinError> {
    let allowed = allowed_pus()?;
    if !allowed.contains(&os_pu) {
        return Err(PinError::NotUsable {
            pu: os_pu,
            usable: topocomm_topo::PuSet::from_indexes(allowed),
        });
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
pub fn pin_current_thread(os_pu: u32) -> Result<(), PinError> {
    if std::thread::current().name() == Some("main") {
        return Err(PinError::MainThread { pu: os_pu });
    }
    let set = usable_pu_set(os_pu)?;
    let t = live()?;
    t.bind_cpu(&set, CpuBindingFlags::THREAD | CpuBindingFlags::STRICT)
        .or_else(|_| t.bind_cpu(&set, CpuBindingFlags::THREAD))
        .map_err(|e| PinError::Bind {
            target: "thread",
            pu: os_pu,
            reason: e.to_string(),
        })
}

/// Runs `f` on a new thread bound to the PU with this OS index and returns
/// its result; the calling thread's binding is untouched. `f`'s error type
/// only has to take in a [`PinError`] (e.g. [`crate::Error`] or `PinError`).
pub fn on_pu<T: Send, E: From<PinError> + Send>(
    os_pu: u32,
    f: impl FnOnce() -> Result<T, E> + Send,
) -> Result<T, E> {
    std::thread::scope(|s| {
        s.spawn(move || {
            pin_current_thread(os_pu)?;
            f()
        })
        .join()
        .map_err(|_| PinError::Panicked { pu: os_pu })?
    })
}

/// Binds the whole current process to the PU with this OS index.
pub fn pin_current_process(os_pu: u32) -> Result<(), PinError> {
    let set = usable_pu_set(os_pu)?;
    live()?
        .bind_cpu(&set, CpuBindingFlags::PROCESS)
        .map_err(|e| PinError::Bind {
            target: "process",
            pu: os_pu,
            reason: e.to_string(),
        })
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
        let e = pin_current_thread(100_000).unwrap_err().to_string();
        assert!(e.starts_with("PU 100000 does not exist"), "{e}");
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
        let inside = on_pu(last, || Ok::<_, PinError>(my_binding())).unwrap();
        assert_eq!(inside, vec![last]);
        assert_eq!(my_binding(), before);
        let e = on_pu(100_000, || Ok::<_, PinError>(())).unwrap_err();
        assert!(matches!(e, PinError::NotUsable { pu: 100_000, .. }), "{e}");
        let e = on_pu(last, || Err::<(), _>(crate::Error::PeerGaveUp)).unwrap_err();
        assert!(matches!(e, crate::Error::PeerGaveUp), "{e}");
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
        assert_eq!(e, PinError::MainThread { pu: last });
        assert!(e.to_string().contains("main thread") && e.to_string().contains("inherit"));
    }
}
