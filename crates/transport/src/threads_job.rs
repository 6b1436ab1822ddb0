//! Jobs of threads for the unit tests: each rank a thread with its own
//! `Comm` on one segment (more threads than the dev machine's 2 CPUs: the
//! waiting policy's oversubscribed case).

use crate::bootstrap::create_segment;
use crate::comm::Comm;

/// Runs `f(rank's comm)` on `n` unbound ranks; `rules` (a rules file's
/// text) or the built-in rules. Panics of a rank fail the test.
pub(crate) fn job(n: usize, rules: Option<&str>, f: fn(&mut Comm)) {
    let m = topocomm_topo::load_default(Some(&format!("synthetic:core:{n} pu:1"))).unwrap();
    job_on(&m, &vec![None; n], rules, f)
}

/// Runs `f(rank's comm)` on ranks planned as bound to `pus` of `m` (the
/// threads are not bound: only the plans know).
pub(crate) fn job_on(
    m: &topocomm_topo::Machine,
    pus: &[Option<u32>],
    rules: Option<&str>,
    f: fn(&mut Comm),
) {
    let n = pus.len();
    let file = rules.map(|text| {
        let p = std::env::temp_dir().join(format!(
            "topocomm-threads-job-{}-{:?}.toml",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::write(&p, text).unwrap();
        p
    });
    let fd = create_segment(m, pus, file.as_deref()).unwrap();
    if let Some(p) = file {
        let _ = std::fs::remove_file(p);
    }
    let ranks: Vec<_> = (0..n)
        .map(|r| {
            let fd = fd.try_clone().unwrap();
            std::thread::spawn(move || {
                let mut c = Comm::join(fd, r).unwrap();
                f(&mut c);
                c.finalize().unwrap();
            })
        })
        .collect();
    for r in ranks {
        r.join().expect("a rank failed");
    }
}
