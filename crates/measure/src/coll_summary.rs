//! The statistics and the result document of `topocomm bench coll`
//! (runs in [`crate::bench_coll`]): per collective and size, the median
//! over jobs of each MPI plain and under `topocomm accel` (95% CI of the
//! median from order statistics, [`Summary`]), and the ratio of topocomm's
//! median to the better MPI's with a 95% paired bootstrap CI over jobs;
//! the OSU-style tables, the SVG plots, the report's HTML and the
//! `topocomm.bench.coll/1` document (docs/formats/bench-coll-json.md).

use crate::bench_coll::{JobRecord, Plan, COLLECTIVES};
use crate::p2p::size_label;
use crate::Summary;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use topocomm_report::{esc, html_table, svg_loglog, Series};

/// The schema of the result document.
pub const SCHEMA: &str = "topocomm.bench.coll/1";

/// A ratio whose upper CI end is above this is `slower`.
pub const SLOWER_ABOVE: f64 = 1.05;

/// How the ratio and its CI are computed, as the document and the tables say.
pub const RATIO_METHOD: &str = "topocomm = `topocomm accel` over the better MPI (lower plain median); \
     ratio = its median over the better MPI's plain median, over the jobs where every compared \
     MPI's plain and accel runs succeeded (an MPI with no plain or no accel value is not compared); 95% CI: paired percentile bootstrap over job indices (a job's runs \
     resampled together), the better MPI re-chosen in each resample; medians' CIs: order statistics";

/// A probe above this many times the probes' 10th percentile reads the
/// distant placement (as `scripts/p2p-jobs.py --far`).
pub const FAR_FACTOR: f64 = 2.0;
/// Job indices that ran near in every job, at least, for the ratios to
/// leave the others out.
pub const MIN_NEAR: usize = 3;

/// Where the host had ranks 0 and 1 during the jobs, from the probes
/// inside each job (`JobRecord::probe_us`: std_coll's `--probe`, 8-byte
/// ping-pongs between ranks 0 and 1 through the library measured after
/// each point): a job is near when the median of its probes is at or under
/// the cut of its MPI and configuration. Probes taken by this process just
/// before and after each job, as until 2026-12-02, read the placement the
/// host chose while the vCPUs idled between jobs, not the one the job ran
/// in (docs/commands/bench-coll.md).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    /// Per `MPI CONFIG` (`openmpi plain`, `openmpi accel`, ...): probes
    /// above this (us) read distant, [`FAR_FACTOR`] x the 10th percentile
    /// of that MPI and configuration's probes (the two configurations'
    /// ping-pongs go through different libraries).
    pub cuts_us: BTreeMap<String, f64>,
    /// Jobs (runs) that ran near by the median of their probes, and the
    /// others with probes.
    pub near_jobs: usize,
    pub distant_jobs: usize,
    /// Points (one collective and size of one run) that ran near, each by
    /// the probe right after it, and the others; a run without a probe per
    /// point counts all its points by the whole run ([`ran_near`]). A job
    /// near by its median may still have run its first points distant: on
    /// the Zen 5 VM (2026-12-02, session 57) one `openmpi accel` run took
    /// its allgather and alltoall points at probes of 0.29-0.36 us and 2-3x
    /// the others' times, then the rest at 0.08-0.1 us, and counted whole
    /// it pushed the 2-rank allgather's CI at 8 bytes to [0.50, 1.85].
    #[serde(default)]
    pub near_points: usize,
    #[serde(default)]
    pub distant_points: usize,
    /// The ratios are over the near points only (some points ran distant,
    /// and every point of every MPI has at least [`MIN_NEAR`] near runs of
    /// each configuration): the host moves a VM's vCPUs between placements
    /// from second to second, a plain run and an accelerated run of one
    /// job index were often in different ones, and the placements differ
    /// 2-3x for every MPI on the 2-vCPU AMD EPYC VM.
    pub ratios_over_near: bool,
}

/// The probe time above which a job ran distant: [`FAR_FACTOR`] x the
/// 10th percentile of `probes_us` (sorted here); `None` with fewer than 2.
pub fn far_cut(probes_us: &mut [f64]) -> Option<f64> {
    if probes_us.len() < 2 {
        return None;
    }
    probes_us.sort_by(f64::total_cmp);
    Some(FAR_FACTOR * probes_us[(probes_us.len() - 1) / 10])
}

/// The key of a job's MPI and configuration in [`Placement::cuts_us`].
fn cut_key(r: &JobRecord) -> String {
    format!("{} {}", r.mpi, r.config)
}

/// Whether a job ran near: the median of its probes at or under its MPI
/// and configuration's cut (`None`: no probes, or no cut).
pub fn ran_near(r: &JobRecord, pl: &Placement) -> Option<bool> {
    let cut = pl.cuts_us.get(&cut_key(r))?;
    let mut v = r.probe_us.clone();
    if v.is_empty() {
        return None;
    }
    Some(median(&mut v) <= *cut)
}

/// Which points of job `r` ran near (in `r.results`' order): each by the
/// probe right after it when every point has one (a job may change
/// placement between points), else all by the whole job ([`ran_near`]);
/// `None` when the job cannot be classed (no cut, no probes).
fn points_near(r: &JobRecord, pl: &Placement) -> Option<Vec<bool>> {
    let cut = *pl.cuts_us.get(&cut_key(r))?;
    if !r.results.is_empty() && r.results.iter().all(|p| p.probe_us.is_some()) {
        return Some(
            r.results
                .iter()
                .map(|p| p.probe_us.is_some_and(|v| v <= cut))
                .collect(),
        );
    }
    ran_near(r, pl).map(|near| vec![near; r.results.len()])
}

/// What of job `r` ran near ([`points_near`]); `None` when nothing did.
fn near_part(r: &JobRecord, pl: &Placement) -> Option<JobRecord> {
    let near = points_near(r, pl)?;
    let results: Vec<_> = r
        .results
        .iter()
        .zip(&near)
        .filter(|(_, n)| **n)
        .map(|(p, _)| p.clone())
        .collect();
    (!results.is_empty()).then(|| JobRecord {
        results,
        ..r.clone()
    })
}

/// The jobs' placement; `None` without probes (ranks unbound).
pub fn placement(plan: &Plan, jobs: &[JobRecord]) -> Option<Placement> {
    let ok: Vec<&JobRecord> = jobs.iter().filter(|r| r.status == "ok").collect();
    let mut probes: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in &ok {
        probes
            .entry(cut_key(r))
            .or_default()
            .extend(r.probe_us.iter().copied());
    }
    let cuts_us: BTreeMap<String, f64> = probes
        .into_iter()
        .filter_map(|(k, mut v)| far_cut(&mut v).map(|c| (k, c)))
        .collect();
    if cuts_us.is_empty() {
        return None;
    }
    let mut pl = Placement {
        cuts_us,
        near_jobs: 0,
        distant_jobs: 0,
        near_points: 0,
        distant_points: 0,
        ratios_over_near: false,
    };
    let jobs_in = |near: bool| ok.iter().filter(|r| ran_near(r, &pl) == Some(near)).count();
    let (near_jobs, distant_jobs) = (jobs_in(true), jobs_in(false));
    // Per MPI, configuration and point: the runs in which it ran near.
    let mut near_runs: BTreeMap<(&str, &str, &str, u64), usize> = BTreeMap::new();
    let (mut near_points, mut distant_points) = (0, 0);
    for r in &ok {
        let Some(near) = points_near(r, &pl) else {
            continue;
        };
        for (p, n) in r.results.iter().zip(near) {
            *near_runs
                .entry((&r.mpi, &r.config, &p.collective, p.size))
                .or_default() += usize::from(n);
            if n {
                near_points += 1;
            } else {
                distant_points += 1;
            }
        }
    }
    let enough = plan.impls.iter().all(|m| {
        let runs = |cfg: &str| {
            ok.iter()
                .filter(|r| r.mpi == m.name() && r.config == cfg)
                .count()
        };
        // An MPI with no runs of a configuration is not compared anyway.
        runs("plain") == 0
            || runs("accel") == 0
            || near_runs
                .iter()
                .filter(|(k, _)| k.0 == m.name())
                .all(|(_, n)| *n >= MIN_NEAR)
    });
    pl.near_jobs = near_jobs;
    pl.distant_jobs = distant_jobs;
    pl.near_points = near_points;
    pl.distant_points = distant_points;
    pl.ratios_over_near = distant_points > 0 && enough;
    Some(pl)
}

/// One line on the placement, as the tables say it.
pub fn placement_line(pl: &Placement) -> String {
    let (n, d) = (pl.near_points, pl.distant_points);
    let cuts: Vec<String> = pl
        .cuts_us
        .iter()
        .map(|(k, v)| format!("{k} {v:.3}"))
        .collect();
    let head = format!(
        "placement: 8-byte ping-pongs between ranks 0 and 1 after each point, through the library \
         measured; {n} points near (probe at most 2x the 10th percentile of its MPI and \
         configuration, us: {}), {d} distant; {} of {} jobs near by their median probe",
        cuts.join(", "),
        pl.near_jobs,
        pl.near_jobs + pl.distant_jobs
    );
    if pl.ratios_over_near {
        format!(
            "{head}: medians and ratios over the points that ran near (ratio CI: bootstrap of \
             the plain and accel jobs apart)"
        )
    } else if d == 0 {
        format!("{head}: over all jobs")
    } else {
        format!(
            "{head}: fewer than {MIN_NEAR} near runs of some point of an MPI and configuration, \
             over all jobs (mixed placements)"
        )
    }
}

/// One MPI at one point: its plain and accelerated medians over jobs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MpiCell {
    pub mpi: String,
    pub plain: Option<Summary>,
    pub accel: Option<Summary>,
}

/// One (collective, size) of the summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub collective: String,
    /// Bytes (per rank for allgather and alltoall); 0 for barrier.
    pub size: u64,
    pub mpis: Vec<MpiCell>,
    /// The MPIs the ratio compares with: those with plain and accel values.
    #[serde(default)]
    pub compared: Vec<String>,
    /// The MPI with the lower plain median (over the paired jobs).
    pub better: Option<String>,
    /// Median of accel over `better`, us.
    pub topocomm_us: Option<f64>,
    /// `better`'s plain median, us.
    pub better_us: Option<f64>,
    pub ratio: Option<f64>,
    pub ci95: Option<[f64; 2]>,
    /// The CI's upper end is above [`SLOWER_ABOVE`].
    pub slower: bool,
    /// Jobs in which every MPI's plain and accel runs have this point; with
    /// the placement's near jobs only (`Placement::ratios_over_near`), the
    /// better MPI's near runs (the fewer of plain and accel).
    pub paired_jobs: usize,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    crate::stats::quantile_sorted(v, 0.5)
}

/// Deterministic generator of the bootstrap (splitmix64).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) % n as u64) as usize
    }
}

/// The ratio of one resample: median of `accel[k]` over the jobs `idx`
/// divided by the smallest of the plain medians, `k` that MPI.
fn ratio_of(plain: &[Vec<f64>], accel: &[Vec<f64>], idx: &[usize]) -> (usize, f64) {
    let med = |v: &Vec<f64>| median(&mut idx.iter().map(|&i| v[i]).collect::<Vec<_>>());
    let (k, best) = plain
        .iter()
        .map(med)
        .enumerate()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .expect("at least one MPI");
    (k, med(&accel[k]) / best)
}

/// The ratio over every job (point, with the index of the better MPI) and
/// its 95% paired percentile bootstrap CI. `plain[m][j]`, `accel[m][j]`:
/// MPI m's value in paired job j.
pub fn paired_ratio(
    plain: &[Vec<f64>],
    accel: &[Vec<f64>],
    resamples: u32,
    seed: u64,
) -> (usize, f64, [f64; 2]) {
    let n = plain[0].len();
    let all: Vec<usize> = (0..n).collect();
    let (k, point) = ratio_of(plain, accel, &all);
    if n < 2 || resamples < 1 {
        return (k, point, [point, point]);
    }
    let mut rng = Rng(seed);
    let rs: Vec<f64> = (0..resamples)
        .map(|_| {
            let idx: Vec<usize> = (0..n).map(|_| rng.below(n)).collect();
            ratio_of(plain, accel, &idx).1
        })
        .collect();
    (k, point, percentile_ci(rs))
}

/// The 2.5th and 97.5th percentiles of bootstrap resamples (at least one).
fn percentile_ci(mut rs: Vec<f64>) -> [f64; 2] {
    rs.sort_by(|a, b| a.total_cmp(b));
    let r = (rs.len() - 1) as f64;
    [
        rs[(0.025 * r).floor() as usize],
        rs[(0.975 * r).ceil() as usize],
    ]
}

/// [`paired_ratio`] for runs that are not paired: `plain[m]` and
/// `accel[m]` hold MPI m's values in any number of jobs each (the near
/// ones), and each resample draws every list on its own.
pub fn unpaired_ratio(
    plain: &[Vec<f64>],
    accel: &[Vec<f64>],
    resamples: u32,
    seed: u64,
) -> (usize, f64, [f64; 2]) {
    let ratio = |p: &[Vec<f64>], a: &[Vec<f64>]| -> (usize, f64) {
        let (k, best) = p
            .iter()
            .map(|v| median(&mut v.clone()))
            .enumerate()
            .min_by(|x, y| x.1.total_cmp(&y.1))
            .expect("at least one MPI");
        (k, median(&mut a[k].clone()) / best)
    };
    let (k, point) = ratio(plain, accel);
    if resamples < 1 {
        return (k, point, [point, point]);
    }
    let mut rng = Rng(seed);
    let mut draw =
        |v: &Vec<f64>| -> Vec<f64> { (0..v.len()).map(|_| v[rng.below(v.len())]).collect() };
    let rs: Vec<f64> = (0..resamples)
        .map(|_| {
            let p: Vec<Vec<f64>> = plain.iter().map(&mut draw).collect();
            let a: Vec<Vec<f64>> = accel.iter().map(&mut draw).collect();
            ratio(&p, &a).1
        })
        .collect();
    (k, point, percentile_ci(rs))
}

/// The value of `mpi`/`config` at (collective, size) in job `j`, if it ran.
fn value(
    jobs: &[JobRecord],
    j: u32,
    mpi: &str,
    config: &str,
    coll: &str,
    size: u64,
) -> Option<f64> {
    jobs.iter()
        .find(|r| r.job == j && r.mpi == mpi && r.config == config && r.status == "ok")?
        .results
        .iter()
        .find(|p| p.collective == coll && p.size == size)
        .map(|p| p.value_us)
}

/// The summary rows, collectives in std_coll's order, sizes ascending.
pub fn summarize(plan: &Plan, jobs: &[JobRecord]) -> Vec<Row> {
    let mpis: Vec<&str> = plan.impls.iter().map(|m| m.name()).collect();
    // The near jobs only, when the placement says so (`Placement`): their
    // runs are not paired by job index then.
    let near = placement(plan, jobs).filter(|pl| pl.ratios_over_near);
    let jobs: Vec<JobRecord> = match &near {
        Some(pl) => jobs.iter().filter_map(|r| near_part(r, pl)).collect(),
        None => jobs.to_vec(),
    };
    let jobs = &jobs[..];
    let mut keys: Vec<(usize, String, u64)> = Vec::new();
    for r in jobs {
        for p in &r.results {
            let rank = COLLECTIVES
                .iter()
                .position(|c| *c == p.collective)
                .unwrap_or(99);
            let key = (rank, p.collective.clone(), p.size);
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    keys.sort();
    let mut rows = Vec::new();
    for (_, coll, size) in keys {
        let col = |mpi: &str, cfg: &str| -> Vec<f64> {
            (0..plan.jobs)
                .filter_map(|j| value(jobs, j, mpi, cfg, &coll, size))
                .collect()
        };
        let cells: Vec<MpiCell> = mpis
            .iter()
            .map(|m| MpiCell {
                mpi: m.to_string(),
                plain: Summary::of(&col(m, "plain")),
                accel: Summary::of(&col(m, "accel")),
            })
            .collect();
        // Compared: the MPIs with plain and accel values (an MPI whose
        // jobs all failed is left out, and said); paired jobs: every
        // compared MPI's plain and accel present.
        let compared: Vec<&str> = mpis
            .iter()
            .zip(&cells)
            .filter(|(_, c)| c.plain.is_some() && c.accel.is_some())
            .map(|(m, _)| *m)
            .collect();
        let paired: Vec<u32> = (0..plan.jobs)
            .filter(|&j| {
                compared.iter().all(|m| {
                    ["plain", "accel"]
                        .iter()
                        .all(|c| value(jobs, j, m, c, &coll, size).is_some())
                })
            })
            .collect();
        let series = |cfg: &str| -> Vec<Vec<f64>> {
            compared
                .iter()
                .map(|m| {
                    paired
                        .iter()
                        .map(|&j| value(jobs, j, m, cfg, &coll, size).unwrap_or(f64::NAN))
                        .collect()
                })
                .collect()
        };
        let mut row = Row {
            collective: coll.clone(),
            size,
            mpis: cells,
            compared: compared.iter().map(|m| m.to_string()).collect(),
            better: None,
            topocomm_us: None,
            better_us: None,
            ratio: None,
            ci95: None,
            slower: false,
            paired_jobs: paired.len(),
        };
        if let (Some(_), false) = (&near, compared.is_empty()) {
            // Near jobs: each configuration's runs on their own.
            let vals =
                |cfg: &str| -> Vec<Vec<f64>> { compared.iter().map(|m| col(m, cfg)).collect() };
            let (plain, accel) = (vals("plain"), vals("accel"));
            let (k, ratio, ci) = unpaired_ratio(&plain, &accel, plan.resamples, plan.seed);
            row.better = Some(compared[k].to_string());
            row.topocomm_us = Some(median(&mut accel[k].clone()));
            row.better_us = Some(median(&mut plain[k].clone()));
            row.ratio = Some(ratio);
            row.ci95 = Some(ci);
            row.slower = ci[1] > SLOWER_ABOVE;
            row.paired_jobs = plain[k].len().min(accel[k].len());
        } else if !compared.is_empty() && !paired.is_empty() {
            let (plain, accel) = (series("plain"), series("accel"));
            let (k, ratio, ci) = paired_ratio(&plain, &accel, plan.resamples, plan.seed);
            let all: Vec<usize> = (0..paired.len()).collect();
            let med = |v: &Vec<f64>| median(&mut all.iter().map(|&i| v[i]).collect::<Vec<_>>());
            row.better = Some(compared[k].to_string());
            row.topocomm_us = Some(med(&accel[k]));
            row.better_us = Some(med(&plain[k]));
            row.ratio = Some(ratio);
            row.ci95 = Some(ci);
            row.slower = ci[1] > SLOWER_ABOVE;
        }
        rows.push(row);
    }
    rows
}

/// A latency in us with 4 significant digits.
pub fn us(v: f64) -> String {
    if v >= 1000.0 {
        format!("{v:.0}")
    } else {
        format!("{:.4}", v)
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

fn size_text(coll: &str, size: u64) -> String {
    if coll == "barrier" {
        "-".into()
    } else {
        size_label(size)
    }
}

/// The tables: per collective a title, a header and one line per size.
pub fn tables(plan: &Plan, rows: &[Row]) -> Vec<(String, Vec<String>, Vec<Vec<String>>)> {
    let mut out: Vec<(String, Vec<String>, Vec<Vec<String>>)> = Vec::new();
    for r in rows {
        if out.last().map(|t| &t.0) != Some(&r.collective) {
            let mut h = vec!["size".to_string(), "topocomm".into(), "over".into()];
            h.extend(plan.impls.iter().map(|m| m.name().to_string()));
            h.extend(["ratio".into(), "[95% CI]".into(), "".into()]);
            out.push((r.collective.clone(), h, Vec::new()));
        }
        let mut line = vec![
            size_text(&r.collective, r.size),
            r.topocomm_us.map(us).unwrap_or_else(|| "-".into()),
            r.better.clone().unwrap_or_else(|| "-".into()),
        ];
        for c in &r.mpis {
            line.push(
                c.plain
                    .as_ref()
                    .map(|s| us(s.median))
                    .unwrap_or_else(|| "-".into()),
            );
        }
        match (r.ratio, r.ci95) {
            (Some(q), Some([lo, hi])) => {
                line.push(format!("{q:.3}"));
                line.push(format!("[{lo:.3}, {hi:.3}]"));
            }
            _ => line.extend(["-".into(), "".into()]),
        }
        line.push(if r.slower {
            "slower".into()
        } else {
            String::new()
        });
        out.last_mut().expect("pushed above").2.push(line);
    }
    out
}

/// The SVG plot of one collective: latency per size, plain and accel per
/// MPI, shaded 95% CI of the medians. None for barrier (one point, no size).
pub fn plot(collective: &str, rows: &[Row]) -> Option<String> {
    let rows: Vec<&Row> = rows
        .iter()
        .filter(|r| r.collective == collective && r.size > 0)
        .collect();
    let first = rows.first()?;
    let mut series = Vec::new();
    for (i, c) in first.mpis.iter().enumerate() {
        for (cfg, dashed) in [("plain", true), ("accel", false)] {
            let mut s = Series {
                name: if cfg == "plain" {
                    c.mpi.clone()
                } else {
                    format!("topocomm over {}", c.mpi)
                },
                points: Vec::new(),
                dashed,
                band: Vec::new(),
            };
            for r in &rows {
                let cell = &r.mpis[i];
                if let Some(m) = if cfg == "plain" {
                    &cell.plain
                } else {
                    &cell.accel
                } {
                    s.points.push((r.size as f64, m.median));
                    s.band.push((r.size as f64, m.ci_low, m.ci_high));
                }
            }
            if !s.points.is_empty() {
                series.push(s);
            }
        }
    }
    Some(svg_loglog(
        &format!("{collective}: latency per call"),
        "size (bytes)",
        "us",
        &series,
        &|v| size_label(v as u64),
    ))
}

/// The failed jobs, one line each with the stderr tail indented.
pub fn failures(jobs: &[JobRecord]) -> Vec<String> {
    jobs.iter()
        .filter(|r| r.status != "ok")
        .map(|r| {
            let mut s = format!(
                "job {} {} {} failed: {}",
                r.job + 1,
                r.mpi,
                r.config,
                r.reason.as_deref().unwrap_or("unknown")
            );
            for l in r.stderr_tail.as_deref().unwrap_or("").lines() {
                s.push_str(&format!("\n    {l}"));
            }
            s
        })
        .collect()
}

/// The result document.
pub fn to_json(
    plan: &Plan,
    commands: serde_json::Value,
    jobs: &[JobRecord],
    rows: &[Row],
    mut meta: serde_json::Value,
    finished: String,
) -> serde_json::Value {
    if let Some(o) = meta.as_object_mut() {
        o.insert(
            "plan".into(),
            serde_json::to_value(plan).unwrap_or_default(),
        );
        o.insert("commands".into(), commands);
        o.insert("ratio".into(), RATIO_METHOD.into());
        o.insert(
            "placement".into(),
            serde_json::to_value(placement(plan, jobs)).unwrap_or_default(),
        );
        o.insert("slower_above".into(), SLOWER_ABOVE.into());
        o.insert("finished".into(), finished.into());
    }
    serde_json::json!({
        "schema": SCHEMA,
        "meta": meta,
        "jobs": jobs,
        "rows": rows,
    })
}

/// The report's section from a `topocomm.bench.coll/1` document: the
/// tables and one plot per collective; Err names what is wrong.
pub fn html_from_json(doc: &serde_json::Value) -> Result<String, String> {
    if doc["schema"].as_str() != Some(SCHEMA) {
        return Err(format!(
            "not a topocomm bench coll JSON file (schema {SCHEMA})"
        ));
    }
    let rows: Vec<Row> =
        serde_json::from_value(doc["rows"].clone()).map_err(|e| format!("rows: {e}"))?;
    let plan = &doc["meta"]["plan"];
    let mpis: Vec<String> = rows
        .first()
        .map(|r| r.mpis.iter().map(|c| c.mpi.clone()).collect())
        .unwrap_or_default();
    let mut h = format!(
        "<p>{} ranks, {} jobs per MPI and configuration (bind {}), median per call in us. {}.</p>",
        plan["np"],
        plan["jobs"],
        esc(plan["bind"].as_str().unwrap_or("?")),
        esc(RATIO_METHOD)
    );
    // Older documents have no placement; `null` without probes.
    if let Ok(pl) = serde_json::from_value::<Placement>(doc["meta"]["placement"].clone()) {
        h.push_str(&format!("<p>{}.</p>", esc(&placement_line(&pl))));
    }
    let mut colls: Vec<&str> = Vec::new();
    for r in &rows {
        if !colls.contains(&r.collective.as_str()) {
            colls.push(&r.collective);
        }
    }
    for c in colls {
        let mut hd = vec!["size", "topocomm", "over"];
        hd.extend(mpis.iter().map(String::as_str));
        hd.extend(["ratio [95% CI]", ""]);
        let lines: Vec<Vec<String>> = rows
            .iter()
            .filter(|r| r.collective == c)
            .map(|r| {
                let mut l = vec![
                    size_text(c, r.size),
                    r.topocomm_us.map(us).unwrap_or_else(|| "-".into()),
                    r.better.clone().unwrap_or_else(|| "-".into()),
                ];
                l.extend(r.mpis.iter().map(|m| {
                    m.plain
                        .as_ref()
                        .map(|s| us(s.median))
                        .unwrap_or_else(|| "-".into())
                }));
                l.push(match (r.ratio, r.ci95) {
                    (Some(q), Some([a, b])) => format!("{q:.3} [{a:.3}, {b:.3}]"),
                    _ => "-".into(),
                });
                l.push(if r.slower {
                    "slower".into()
                } else {
                    String::new()
                });
                l
            })
            .collect();
        h.push_str(&format!("<h3>{}</h3>{}", esc(c), html_table(&hd, &lines)));
        if let Some(svg) = plot(c, &rows) {
            h.push_str(&format!("<div class=\"svgbox\">{svg}</div>"));
        }
    }
    let jobs: Vec<JobRecord> =
        serde_json::from_value(doc["jobs"].clone()).map_err(|e| format!("jobs: {e}"))?;
    for f in failures(&jobs) {
        h.push_str(&format!("<p class=\"note\">{}</p>", esc(&f)));
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job's record with an 8-byte allreduce of `v` us (`None`: failed).
    fn record(job: u32, mpi: &str, config: &str, v: Option<f64>, probe_us: Vec<f64>) -> JobRecord {
        JobRecord {
            job,
            mpi: mpi.into(),
            config: config.into(),
            status: if v.is_some() { "ok" } else { "failed" }.into(),
            wall_s: 1.0,
            reason: v.is_none().then(|| "killed".into()),
            stderr_tail: None,
            meta: serde_json::Value::Null,
            probe_us,
            results: v
                .map(|v| crate::bench_coll::Point {
                    collective: "allreduce".into(),
                    size: 8,
                    value_us: v,
                    samples_us: vec![v],
                    probe_us: None,
                })
                .into_iter()
                .collect(),
        }
    }

    #[test]
    fn a_job_that_changed_placement_between_points_keeps_its_near_points() {
        let mut r = record(0, "openmpi", "accel", Some(0.09), vec![]);
        let far = crate::bench_coll::Point {
            size: 16,
            value_us: 0.28,
            probe_us: Some(0.25),
            ..r.results[0].clone()
        };
        r.results[0].probe_us = Some(0.04);
        r.results.push(far);
        r.probe_us = r.results.iter().filter_map(|p| p.probe_us).collect();
        let pl = Placement {
            cuts_us: [("openmpi accel".to_string(), 0.08)].into(),
            near_jobs: 0,
            distant_jobs: 1,
            near_points: 1,
            distant_points: 1,
            ratios_over_near: true,
        };
        let kept = near_part(&r, &pl).expect("one point ran near");
        assert_eq!(kept.results.len(), 1);
        assert_eq!(kept.results[0].value_us, 0.09);
        // Its MPI and configuration have no cut: nothing to class it by.
        let other = JobRecord {
            config: "plain".into(),
            ..r.clone()
        };
        assert!(near_part(&other, &pl).is_none());
        // Every point distant: nothing kept.
        r.results[0].probe_us = Some(0.3);
        assert!(near_part(&r, &pl).is_none());
    }

    #[test]
    fn ratio_against_the_better_mpi() {
        // MPI 0 plain 2.0, MPI 1 plain 1.0 (better), accel over 1: 0.5.
        let plain = vec![vec![2.0, 2.1, 1.9, 2.0], vec![1.0, 1.1, 0.9, 1.0]];
        let accel = vec![vec![9.0; 4], vec![0.5, 0.55, 0.45, 0.5]];
        let (k, r, [lo, hi]) = paired_ratio(&plain, &accel, 2000, 1);
        assert_eq!(k, 1);
        assert!((r - 0.5).abs() < 1e-12, "{r}");
        assert!(
            lo <= r && r <= hi && lo >= 0.45 / 1.1 && hi <= 0.55 / 0.9,
            "[{lo}, {hi}]"
        );
        // Deterministic for a seed.
        assert_eq!(
            paired_ratio(&plain, &accel, 500, 7),
            paired_ratio(&plain, &accel, 500, 7)
        );
        // One job: the CI is the point.
        let (_, r1, ci) = paired_ratio(&[vec![2.0]], &[vec![3.0]], 100, 1);
        assert_eq!((r1, ci), (1.5, [1.5, 1.5]));
    }

    #[test]
    fn an_mpi_whose_plain_jobs_failed_is_not_compared() {
        use crate::bench_coll::{plan, Options};
        let p = plan(
            &Options {
                jobs: 2,
                ..Options::default()
            },
            2,
        )
        .unwrap();
        let job =
            |j: u32, mpi: &str, config: &str, v: Option<f64>| record(j, mpi, config, v, vec![]);
        let jobs = vec![
            job(0, "openmpi", "plain", Some(2.0)),
            job(0, "openmpi", "accel", Some(1.0)),
            job(0, "mpich", "plain", None),
            job(0, "mpich", "accel", Some(0.5)),
            job(1, "openmpi", "accel", Some(1.0)),
            job(1, "openmpi", "plain", Some(4.0)),
            job(1, "mpich", "accel", Some(0.5)),
            job(1, "mpich", "plain", None),
        ];
        let rows = summarize(&p, &jobs);
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!(r.compared, ["openmpi"]);
        assert_eq!((r.better.as_deref(), r.paired_jobs), (Some("openmpi"), 2));
        assert_eq!((r.topocomm_us, r.better_us), (Some(1.0), Some(3.0)));
        assert!((r.ratio.unwrap() - 1.0 / 3.0).abs() < 1e-12);
        assert!(r.mpis[1].plain.is_none() && r.mpis[1].accel.is_some());
        assert_eq!(failures(&jobs).len(), 2);
    }

    /// The plan of `jobs` jobs of a 2-rank run against Open MPI alone.
    fn openmpi_plan(jobs: u32) -> Plan {
        use crate::bench_coll::{plan, Options};
        plan(
            &Options {
                jobs,
                vs: Some("openmpi".into()),
                ..Options::default()
            },
            2,
        )
        .unwrap()
    }

    #[test]
    fn ratios_leave_out_the_jobs_that_ran_in_the_distant_placement() {
        let p = openmpi_plan(6);
        let job = |j: u32, config: &str, probe: f64| {
            // Near (probe 0.04 us): plain 0.24, accel 0.09. Distant (0.25
            // us): plain 0.55, accel 0.28.
            let near = probe < 0.1;
            let v = match (config, near) {
                ("plain", true) => 0.24,
                ("plain", false) => 0.55,
                (_, true) => 0.09,
                _ => 0.28,
            };
            record(j, "openmpi", config, Some(v), vec![0.04, probe])
        };
        // Distant: the plain run of job 1, the accel runs of jobs 3 and 4
        // (paired by index, only jobs 0, 2 and 5 would be near in both).
        let far = |j: u32, c: &str| matches!((j, c), (1, "plain") | (3, "accel") | (4, "accel"));
        let jobs: Vec<JobRecord> = (0..6u32)
            .flat_map(|j| {
                ["plain", "accel"].map(|c| job(j, c, if far(j, c) { 0.25 } else { 0.04 }))
            })
            .collect();
        let pl = placement(&p, &jobs).expect("probes");
        assert!((pl.cuts_us["openmpi plain"] - 0.08).abs() < 1e-12, "{pl:?}");
        assert!((pl.cuts_us["openmpi accel"] - 0.08).abs() < 1e-12, "{pl:?}");
        assert_eq!((pl.near_jobs, pl.distant_jobs), (9, 3));
        // Without a probe per point, a run's points go by the whole run.
        assert_eq!((pl.near_points, pl.distant_points), (9, 3));
        assert!(pl.ratios_over_near);
        assert!(placement_line(&pl).contains("over the points that ran near"));
        let r = &summarize(&p, &jobs)[0];
        // 5 near plain runs, 4 near accel runs: the ratio of the near medians.
        assert_eq!(r.paired_jobs, 4);
        assert!((r.ratio.unwrap() - 0.09 / 0.24).abs() < 1e-12, "{r:?}");
        assert_eq!(r.ci95, Some([0.09 / 0.24, 0.09 / 0.24]));
        // Mixed over all jobs, the same data read 0.09 / 0.24 .. 0.28 / 0.24.
        // Fewer than MIN_NEAR near accel runs: over all jobs, paired.
        let few: Vec<JobRecord> = (0..6u32)
            .flat_map(|j| {
                ["plain", "accel"]
                    .map(|c| job(j, c, if c == "accel" && j > 1 { 0.25 } else { 0.04 }))
            })
            .collect();
        let pl = placement(&p, &few).unwrap();
        assert!(!pl.ratios_over_near);
        assert!(placement_line(&pl).contains("over all jobs (mixed placements)"));
        assert_eq!(summarize(&p, &few)[0].paired_jobs, 6);
        // No probes (ranks unbound): no placement, every job, paired.
        let none: Vec<JobRecord> = jobs
            .into_iter()
            .map(|mut r| {
                r.probe_us.clear();
                r
            })
            .collect();
        assert!(placement(&p, &none).is_none());
        assert_eq!(summarize(&p, &none)[0].paired_jobs, 6);
    }

    #[test]
    fn points_that_ran_distant_are_left_out_of_jobs_that_ran_near() {
        use crate::bench_coll::Point;
        let p = openmpi_plan(5);
        // Two points per run, each with its probe: the 8-byte allreduce and
        // a 1 KiB one. Near (probe 0.04 us): plain 0.24 / 0.4, accel 0.09 /
        // 0.15; distant (0.3 us): everything 3x.
        let point = |size: u64, v: f64, probe: f64| Point {
            collective: "allreduce".into(),
            size,
            value_us: v,
            samples_us: vec![v],
            probe_us: Some(probe),
        };
        let run = |j: u32, config: &str, first_far: bool| {
            let (a, b) = if config == "plain" {
                (0.24, 0.4)
            } else {
                (0.09, 0.15)
            };
            let (f, probe) = if first_far { (3.0, 0.3) } else { (1.0, 0.04) };
            let mut r = record(j, "openmpi", config, Some(a), vec![]);
            r.results = vec![point(8, a * f, probe), point(1024, b, 0.04)];
            r.probe_us = r.results.iter().filter_map(|p| p.probe_us).collect();
            r
        };
        // Accel run 0 took its first point distant, then the others near
        // (a third point, near in every run): by its median probe the job
        // ran near.
        let mut jobs: Vec<JobRecord> = (0..5u32)
            .flat_map(|j| ["plain", "accel"].map(|c| run(j, c, j == 0 && c == "accel")))
            .collect();
        for r in &mut jobs {
            r.results.push(point(2048, 1.0, 0.04));
            r.probe_us.push(0.04);
        }
        let pl = placement(&p, &jobs).expect("probes");
        assert_eq!((pl.near_jobs, pl.distant_jobs), (10, 0), "{pl:?}");
        assert_eq!((pl.near_points, pl.distant_points), (29, 1), "{pl:?}");
        assert!(pl.ratios_over_near, "{pl:?}");
        assert!(placement_line(&pl).contains("29 points near"));
        let rows = summarize(&p, &jobs);
        let r8 = rows.iter().find(|r| r.size == 8).unwrap();
        // The distant point (0.27 us) is out: every accel run left reads 0.09.
        assert_eq!(r8.ci95, Some([0.09 / 0.24, 0.09 / 0.24]), "{r8:?}");
        assert_eq!(r8.paired_jobs, 4);
        let r1k = rows.iter().find(|r| r.size == 1024).unwrap();
        assert_eq!(r1k.paired_jobs, 5);
    }

    #[test]
    fn unpaired_ratio_draws_each_list_on_its_own() {
        let plain = vec![vec![2.0, 2.2, 1.8], vec![1.0, 1.1, 0.9, 1.0, 1.05]];
        let accel = vec![vec![9.0], vec![0.5, 0.6]];
        let (k, r, [lo, hi]) = unpaired_ratio(&plain, &accel, 2000, 3);
        assert_eq!(k, 1);
        assert!((r - 0.55 / 1.0).abs() < 1e-12, "{r}");
        assert!(
            lo <= r && r <= hi && lo >= 0.5 / 1.1 && hi <= 0.6 / 0.9,
            "[{lo}, {hi}]"
        );
        assert_eq!(
            unpaired_ratio(&plain, &accel, 300, 9),
            unpaired_ratio(&plain, &accel, 300, 9)
        );
    }

    #[test]
    fn small_numbers_print_short() {
        assert_eq!(us(0.25), "0.25");
        assert_eq!(us(12.34567), "12.3457");
        assert_eq!(us(4025.4), "4025");
    }
}
