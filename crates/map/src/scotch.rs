//! Scotch static mapping through Debian's `scotch_gmap` command, for
//! `topocomm bench map`: the graph in Scotch's `.grf` format, a `tleaf`
//! target built from a symmetric target tree, and the mapping read back.

use crate::graph::Graph;
use crate::matrix::CommMatrix;
use crate::target::Target;
use std::fmt::Write as _;
use std::os::unix::process::ExitStatusExt as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one `scotch_gmap` run may take before it is killed: the
/// benchmark's largest case takes well under a second, and a hung run
/// (a deadlock seen once with Scotch's threads) must not hang the bench.
const SCOTCH_DEADLINE: Duration = Duration::from_secs(120);

/// Whether `scotch_gmap` can be run.
pub fn available() -> bool {
    Command::new("scotch_gmap")
        .arg("-h")
        .output()
        .is_ok_and(|o| o.status.success() || !o.stdout.is_empty() || !o.stderr.is_empty())
}

/// `tleaf L a0 c0 a1 c1 ...` of a symmetric target, root level first,
/// level `i`'s link cost from `cost(i, levels, class)`; `None` when the
/// tree is not symmetric (tleaf cannot describe it).
pub fn tleaf(t: &Target, cost: &dyn Fn(usize, usize, &str) -> i64) -> Option<String> {
    let levels = t.levels_if_symmetric()?;
    let mut s = format!("tleaf {}", levels.len());
    for (i, (arity, class)) in levels.iter().enumerate() {
        let _ = write!(s, " {} {}", arity, cost(i, levels.len(), class).max(1));
    }
    Some(s)
}

/// Scotch's mapping of `m` onto the target described by `tleaf`: the leaf
/// of every rank, the seconds `scotch_gmap` took and how many ranks had to
/// be moved off a terminal Scotch gave twice. `Err` says why it failed.
pub fn map(
    t: &Target,
    m: &CommMatrix,
    tleaf: &str,
    tag: &str,
) -> Result<(Vec<u32>, f64, usize), String> {
    let dir = std::env::temp_dir().join(format!("tc-bench-map-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let g = Graph::from_matrix(m, m.n);
    let wmax = g.bytes.iter().cloned().fold(0.0, f64::max).max(1.0);
    let mut grf = format!("0\n{} {}\n0 010\n", g.n, g.adj.len());
    for v in 0..g.n {
        let r = g.neighbours(v);
        let _ = write!(grf, "{}", r.len());
        for k in r {
            let w = ((g.bytes[k] / wmax) * 1e6).round().max(1.0) as i64;
            let _ = write!(grf, " {w} {}", g.adj[k]);
        }
        grf.push('\n');
    }
    let (gp, tp, op) = (dir.join("g.grf"), dir.join("t.tgt"), dir.join("o.map"));
    let write = |p: &std::path::Path, s: &str| {
        std::fs::write(p, s).map_err(|e| format!("{}: {e}", p.display()))
    };
    write(&gp, &grf)?;
    write(&tp, &format!("{tleaf}\n"))?;
    let t0 = Instant::now();
    let run = run_gmap(&gp, &tp, &op, &dir.join("err.txt"));
    let secs = t0.elapsed().as_secs_f64();
    let text = std::fs::read_to_string(&op).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    run?;
    let mut part = vec![u32::MAX; g.n];
    for l in text.lines().skip(1) {
        let f: Vec<usize> = l
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        if f.len() == 2 && f[0] < g.n {
            part[f[0]] = f[1] as u32;
        }
    }
    // Terminals are numbered in tleaf order = the depth-first leaf order.
    let mut used = vec![false; t.len()];
    let mut leaf = vec![u32::MAX; m.n];
    let mut spill = Vec::new();
    for v in 0..m.n {
        let p = part[v] as usize;
        if p < t.len() && !used[p] {
            used[p] = true;
            leaf[v] = p as u32;
        } else {
            spill.push(v);
        }
    }
    let repaired = spill.len();
    let mut free = (0..t.len()).filter(|&l| !used[l]);
    for v in spill {
        leaf[v] = free.next().ok_or("more ranks than terminals")? as u32;
    }
    Ok((leaf, secs, repaired))
}

/// Runs `scotch_gmap` on one thread, killed past [`SCOTCH_DEADLINE`].
///
/// One thread: Debian's Scotch 7.0.3 with its default threads (one per
/// CPU) dies of SIGSEGV on some graphs of 960-2048 ranks here (the same
/// files map fine with `SCOTCH_PTHREAD_NUMBER=1`), and one thread gives
/// the same mapping on any machine; on the 128-288-rank cases the two
/// mappings score the same.
fn run_gmap(
    gp: &std::path::Path,
    tp: &std::path::Path,
    op: &std::path::Path,
    ep: &std::path::Path,
) -> Result<(), String> {
    // Its messages go to a file, not a pipe: a pipe nobody reads while
    // waiting could fill and stall it until the deadline.
    let err_file = std::fs::File::create(ep).map_err(|e| format!("{}: {e}", ep.display()))?;
    let mut child = Command::new("scotch_gmap")
        .args([gp, tp, op])
        .args(["-Cd", "-cb", "-b0"])
        .env("SCOTCH_PTHREAD_NUMBER", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err_file)
        .spawn()
        .map_err(|e| format!("scotch_gmap: {e}"))?;
    let deadline = Instant::now() + SCOTCH_DEADLINE;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "scotch_gmap did not finish within {} s: killed",
                    SCOTCH_DEADLINE.as_secs()
                ));
            }
            Err(e) => return Err(format!("scotch_gmap: {e}")),
        }
    };
    if status.success() {
        return Ok(());
    }
    let err = std::fs::read_to_string(ep).unwrap_or_default();
    let how = match status.signal() {
        Some(sig) => format!("killed by signal {sig}"),
        None => format!("exit status {}", status.code().unwrap_or(-1)),
    };
    Err(match err.trim() {
        "" => format!("scotch_gmap failed ({how})"),
        msg => format!("scotch_gmap failed ({how}): {msg}"),
    })
}
