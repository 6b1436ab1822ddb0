//! `topocomm rails`: network rails and GPUs with their locality, NUIOA split
//! weights and plans (seed 002), and the per-local-rank device environment,
//! printed (`--env`) or applied to a program (`rails exec`).
//! See docs/commands/rails.md.

use crate::cmd::topo::origin_text;
use crate::common::{text_table, GlobalOpts};
use anyhow::{anyhow, Context, Result};
use serde_json::json;
use std::ffi::OsString;
use std::process::ExitCode;
use topocomm_measure::p2p::parse_size;
use topocomm_rails::{
    choose, device_env, discover, local_rank, nearest, split, weigh, DiscoverOptions, EnvVar,
    Location, RailTable, Rails, SplitParams, LOCAL_RANK_VARS,
};
use topocomm_topo::{Machine, PuSet};

/// Environment variable naming the location, like `--pu` (for `rails exec`
/// under a launcher, or to force a PU when the topology is not this machine's).
const PU_ENV: &str = "TOPOCOMM_RAILS_PU";

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    pub sub: Option<Sub>,
    #[command(flatten)]
    pub opts: Opts,
    /// Split plan of one message of this many bytes (e.g. 4M) from --pu (default 4M with --pu)
    #[arg(long, value_name = "BYTES", value_parser = parse_size, requires = "pu", conflicts_with = "env")]
    pub size: Option<u64>,
    /// Print the device environment of one local rank as `export` lines
    #[arg(long)]
    pub env: bool,
    /// Local rank for --env (default: from OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID or SLURM_LOCALID, else 0)
    #[arg(long, value_name = "R", requires = "env")]
    pub local_rank: Option<u32>,
    /// Write JSON on stdout instead of text
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Subcommand, Debug)]
pub enum Sub {
    /// Set the device environment of this local rank and exec PROG (use under mpirun/srun)
    Exec(ExecArgs),
}

#[derive(clap::Args, Debug)]
pub struct ExecArgs {
    #[command(flatten)]
    pub opts: Opts,
    /// Print the variables set on stderr
    #[arg(short, long)]
    pub verbose: bool,
    /// Program and its arguments
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required = true,
        value_name = "PROG [ARGS]"
    )]
    pub command: Vec<OsString>,
}

#[derive(clap::Args, Debug)]
pub struct Opts {
    /// Process location: PU OS index(es), e.g. 8 or 8-15 (default for --env and exec: this process's binding)
    #[arg(long, env = PU_ENV, value_name = "PUS")]
    pub pu: Option<String>,
    /// All-to-all / contention mode: use only the nearest rails (seed 002 §4.5)
    #[arg(long)]
    pub contention: bool,
    /// Measured throughput table (docs/formats/rails-table.md) instead of the default model
    #[arg(long, env = "TOPOCOMM_RAILS_TABLE", value_name = "FILE")]
    pub table: Option<String>,
    /// Use plain IP (Ethernet) interfaces as TCP rails too
    #[arg(long)]
    pub ethernet: bool,
    /// Drop rails whose share would be below this fraction
    #[arg(long, value_name = "F", default_value_t = 0.10)]
    pub min_share: f64,
    /// Messages below this size use a single rail
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "64K")]
    pub single_below: u64,
}

/// Everything the modes need, loaded and checked once.
struct Ctx {
    m: Machine,
    rails: Rails,
    table: Option<RailTable>,
    params: SplitParams,
}

impl Ctx {
    fn new(g: &GlobalOpts, o: &Opts) -> Result<Self> {
        let m = g.machine()?;
        let rails = discover(
            &m,
            &DiscoverOptions {
                ethernet: o.ethernet,
            },
        );
        let table = match &o.table {
            Some(p) => {
                let t = RailTable::load(p)?;
                t.check(&rails.nics)?;
                Some(t)
            }
            None => None,
        };
        let params = SplitParams {
            min_share: o.min_share,
            single_rail_below: o.single_below,
            contention: o.contention,
        };
        params.validate()?;
        Ok(Ctx {
            m,
            rails,
            table,
            params,
        })
    }

    fn source(&self) -> String {
        match &self.table {
            Some(t) => format!("measured table {} (GB/s)", t.path),
            None => "default model of seed 002 (1.0 near the rail, 0.77 elsewhere)".into(),
        }
    }

    /// The location from --pu / TOPOCOMM_RAILS_PU, else this process's binding.
    fn location(&self, pu: Option<&str>) -> Result<(Location, String)> {
        let (set, what) = match pu {
            Some(t) => (
                PuSet::parse_list(t).map_err(|e| anyhow!("--pu '{t}': {e}"))?,
                format!("--pu {t}"),
            ),
            None => {
                let b = bound_pus()?;
                let what = format!("this process's binding (PUs {b})");
                (b, what)
            }
        };
        let loc = Location::new(&self.m, &set).with_context(|| what.clone())?;
        Ok((loc, what))
    }
}

/// PUs this process may run on (`Cpus_allowed_list` of /proc/self/status).
fn bound_pus() -> Result<PuSet> {
    let status = std::fs::read_to_string("/proc/self/status")
        .context("reading /proc/self/status for this process's binding")?;
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .ok_or_else(|| anyhow!("/proc/self/status has no Cpus_allowed_list: pass --pu"))?;
    PuSet::parse_list(list.trim()).map_err(|e| anyhow!("/proc/self/status Cpus_allowed_list: {e}"))
}

pub fn run(g: &GlobalOpts, a: &Args) -> Result<ExitCode> {
    if let Some(Sub::Exec(e)) = &a.sub {
        return exec(g, e);
    }
    let ctx = Ctx::new(g, &a.opts)?;
    if a.env {
        return env_mode(&ctx, a);
    }
    match &a.opts.pu {
        Some(pu) => plan_mode(&ctx, pu, a.size.unwrap_or(4 << 20), a.json),
        None => machine_mode(&ctx, a.json),
    }
}

fn rail_rows(rails: &[topocomm_rails::Rail], gpu: bool) -> Vec<Vec<String>> {
    rails
        .iter()
        .map(|r| {
            let what = if gpu {
                r.gpu_index.map_or("-".into(), |i| i.to_string())
            } else {
                r.transport
                    .map_or("-".into(), |t| format!("{t:?}").to_lowercase())
            };
            vec![
                r.name.clone(),
                what,
                if r.aliases.is_empty() {
                    "-".into()
                } else {
                    r.aliases.join(",")
                },
                r.pci_bus_id.clone().unwrap_or_else(|| "-".into()),
                r.package.map_or("-".into(), |p| format!("package {p}")),
                numa_list(&r.numa_nodes),
                r.cpuset.to_string(),
            ]
        })
        .collect()
}

fn numa_list(n: &[u32]) -> String {
    if n.is_empty() {
        "-".into()
    } else {
        n.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
    }
}

/// One location per NUMA node with PUs (or the whole machine without them).
fn numa_locations(m: &Machine) -> Vec<(String, Location)> {
    let mut out: Vec<(String, Location)> = m
        .numa_nodes
        .iter()
        .filter(|n| !n.cpuset.is_empty())
        .filter_map(|n| {
            let l = Location::new(m, &n.cpuset).ok()?;
            Some((format!("NUMA {}", n.os_index), l))
        })
        .collect();
    if out.is_empty() {
        let all = PuSet::from_indexes(m.pus.iter().map(|p| p.os_index));
        out.extend(
            Location::new(m, &all)
                .ok()
                .map(|l| ("machine".to_string(), l)),
        );
    }
    out
}

/// The split of a large message from each NUMA node: header, table rows
/// and the same as JSON.
type NumaSplit = (Vec<String>, Vec<Vec<String>>, Vec<serde_json::Value>);

fn numa_split(ctx: &Ctx) -> Result<NumaSplit> {
    let (m, rails) = (&ctx.m, &ctx.rails);
    let large = ctx.params.single_rail_below.max(1 << 30);
    let mut rows = Vec::new();
    let mut js = Vec::new();
    for (label, loc) in numa_locations(m) {
        let w = weigh(m, &loc, &rails.nics, ctx.table.as_ref());
        let plan = (!w.is_empty())
            .then(|| split(&w, large, &ctx.params))
            .transpose()?;
        let (gpus, gd) = nearest(&loc, &rails.gpus);
        let gpu_names: Vec<&str> = gpus.iter().map(|&i| rails.gpus[i].name.as_str()).collect();
        let mut row = vec![
            label.clone(),
            loc.packages
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
            loc.pus.to_string(),
        ];
        for x in &w {
            let share = plan
                .as_ref()
                .and_then(|p| p.chunks.iter().find(|c| c.rail == x.rail))
                .map_or(0.0, |c| c.share);
            row.push(format!(
                "{} {:.2} {:.1}%",
                x.distance,
                x.weight,
                share * 100.0
            ));
        }
        row.push(match gd {
            Some(d) => format!("{} ({d})", gpu_names.join(",")),
            None => "-".into(),
        });
        rows.push(row);
        js.push(
            json!({"from": label, "location": loc, "weights": w, "plan": plan,
            "nearest_gpus": gpu_names, "gpu_distance": gd}),
        );
    }
    let mut head: Vec<String> = vec!["from".into(), "package".into(), "PUs".into()];
    head.extend(rails.nics.iter().map(|r| r.name.clone()));
    head.push("nearest GPUs".into());
    Ok((head, rows, js))
}

/// The report's rails section (HTML), for machines that have rails.
pub fn report_section(m: &Machine) -> Option<String> {
    use topocomm_report::{esc, html_table};
    let ctx = Ctx {
        m: m.clone(),
        rails: discover(m, &DiscoverOptions { ethernet: false }),
        table: None,
        params: SplitParams::default(),
    };
    if ctx.rails.is_empty() {
        return None;
    }
    let (head, rows, _) = numa_split(&ctx).ok()?;
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    let mut h = String::new();
    for (list, what, gpu) in [
        (&ctx.rails.nics, "Network rails", false),
        (&ctx.rails.gpus, "GPUs (index in PCI bus order)", true),
    ] {
        if !list.is_empty() {
            h.push_str(&format!("<p>{what}:</p>"));
            h.push_str(&html_table(
                &[
                    "name",
                    if gpu { "index" } else { "transport" },
                    "aliases",
                    "PCI",
                    "near",
                    "NUMA",
                    "PUs",
                ],
                &rail_rows(list, gpu),
            ));
        }
    }
    h.push_str(&format!(
        "<p>Split of a large message from each NUMA node (distance, weight, share per rail); weights: {} (<code>topocomm rails</code>, docs/commands/rails.md).</p>",
        esc(&ctx.source())
    ));
    h.push_str(&html_table(&head, &rows));
    Some(h)
}

fn machine_mode(ctx: &Ctx, json: bool) -> Result<ExitCode> {
    let (m, rails) = (&ctx.m, &ctx.rails);
    let (split_head, rows, js) = numa_split(ctx)?;
    if json {
        let v = json!({"schema": "topocomm.rails/1", "origin": origin_text(m),
            "weights": ctx.source(), "contention": ctx.params.contention,
            "rails": rails, "from_numa": js,
            "notice": rails.is_empty().then(|| rails.absence_reason())});
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("Rails of {}", origin_text(m));
    if rails.is_empty() {
        println!("No rails: {}.", rails.absence_reason());
        return Ok(ExitCode::SUCCESS);
    }
    let head = ["rail", "", "aliases", "PCI", "near", "NUMA", "PUs"];
    if !rails.nics.is_empty() {
        println!("\nNetwork rails:");
        let mut h = head;
        h[1] = "transport";
        print!(
            "{}",
            indent(&text_table(&h, &rail_rows(&rails.nics, false)))
        );
    }
    if !rails.gpus.is_empty() {
        println!("\nGPUs (index in PCI bus order):");
        let mut h = head;
        (h[0], h[1]) = ("gpu", "index");
        print!("{}", indent(&text_table(&h, &rail_rows(&rails.gpus, true))));
    }
    for i in &rails.ignored {
        println!("ignored: {} ({})", i.name, i.reason);
    }
    if rails.nics.is_empty() {
        println!("\nNearest GPUs from each NUMA node (no network rail):");
    } else {
        println!(
            "\nSplit of a large message from each NUMA node; weights: {}{}\n(distance, weight, share per rail)",
            ctx.source(),
            if ctx.params.contention { "; contention mode: nearest rails only" } else { "" }
        );
    }
    let h: Vec<&str> = split_head.iter().map(String::as_str).collect();
    print!("{}", indent(&text_table(&h, &rows)));
    Ok(ExitCode::SUCCESS)
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("  {l}\n")).collect()
}

fn plan_mode(ctx: &Ctx, pu: &str, size: u64, json: bool) -> Result<ExitCode> {
    let (m, rails) = (&ctx.m, &ctx.rails);
    let (loc, _) = ctx.location(Some(pu))?;
    if rails.nics.is_empty() {
        return Err(anyhow!(
            "--pu {pu} --size: no network rail on this machine: {}",
            rails.absence_reason()
        ));
    }
    let w = weigh(m, &loc, &rails.nics, ctx.table.as_ref());
    let plan = split(&w, size, &ctx.params)?;
    if json {
        let v = json!({"schema": "topocomm.rails-plan/1", "origin": origin_text(m),
            "weights_from": ctx.source(), "location": loc, "weights": w, "plan": plan});
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "From PUs {} (NUMA {}, package {}); weights: {}",
        loc.pus,
        numa_list(&loc.numa_nodes),
        numa_list(&loc.packages),
        ctx.source()
    );
    let rows: Vec<Vec<String>> = w
        .iter()
        .map(|x| {
            vec![
                x.name.clone(),
                x.distance.to_string(),
                x.numa_latency.map_or("-".into(), |l| l.to_string()),
                format!("{:.2}", x.weight),
            ]
        })
        .collect();
    print!(
        "{}",
        text_table(&["rail", "distance", "NUMA latency", "weight"], &rows)
    );
    println!(
        "\nPlan for {} bytes ({}):",
        plan.size,
        serde_json::to_value(plan.mode)?.as_str().unwrap_or("")
    );
    let rows: Vec<Vec<String>> = plan
        .chunks
        .iter()
        .map(|c| {
            vec![
                c.name.clone(),
                c.distance.to_string(),
                format!("{:.1}%", c.share * 100.0),
                c.bytes.to_string(),
            ]
        })
        .collect();
    print!(
        "{}",
        text_table(&["rail", "distance", "share", "bytes"], &rows)
    );
    for (name, why) in &plan.dropped {
        println!("dropped {name}: {why}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The local rank from the launcher's variables (and which one), if any.
fn env_local_rank() -> Result<Option<(u32, &'static str)>> {
    Ok(local_rank(|k| std::env::var(k).ok())?)
}

/// The variables of one local rank, with a header comment.
fn compute_env(ctx: &Ctx, pu: Option<&str>, rank: u32) -> Result<(Location, String, Vec<EnvVar>)> {
    let (loc, what) = ctx.location(pu)?;
    let w = weigh(&ctx.m, &loc, &ctx.rails.nics, ctx.table.as_ref());
    let choice = choose(&ctx.rails, &loc, &w, &ctx.params, rank)?;
    Ok((loc.clone(), what, device_env(&ctx.rails, &loc, &choice)))
}

fn env_mode(ctx: &Ctx, a: &Args) -> Result<ExitCode> {
    let (rank, rank_from) = match a.local_rank {
        Some(r) => (r, "--local-rank".to_string()),
        None => match env_local_rank()? {
            Some((r, var)) => (r, var.to_string()),
            None => (
                0,
                format!("default: none of {} is set", LOCAL_RANK_VARS.join(", ")),
            ),
        },
    };
    if ctx.rails.is_empty() {
        if a.json {
            println!(
                "{}",
                json!({"local_rank": rank, "env": [], "notice": ctx.rails.absence_reason()})
            );
        } else {
            println!(
                "# no rails on {}: {}; nothing to set",
                origin_text(&ctx.m),
                ctx.rails.absence_reason()
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let (loc, what, vars) = compute_env(ctx, a.opts.pu.as_deref(), rank)?;
    if a.json {
        let v = json!({"schema": "topocomm.rails-env/1", "local_rank": rank,
            "local_rank_from": rank_from, "location": loc, "location_from": what,
            "weights_from": ctx.source(), "env": vars});
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "# topocomm rails: local rank {rank} ({rank_from}) at {what} on {}",
        origin_text(&ctx.m)
    );
    print!("{}", exports(&vars));
    Ok(ExitCode::SUCCESS)
}

/// `# why` + `export NAME=VALUE` per variable.
fn exports(vars: &[EnvVar]) -> String {
    vars.iter()
        .map(|v| format!("# {}\nexport {}={}\n", v.why, v.name, shell_quote(&v.value)))
        .collect()
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.,:/-=".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// One stderr write per message: ranks of a job share the stream.
fn note(msg: &str) {
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!("topocomm rails exec: {msg}\n").as_bytes(),
    );
}

fn exec(g: &GlobalOpts, e: &ExecArgs) -> Result<ExitCode> {
    use std::os::unix::process::CommandExt;
    let (prog, args) = e.command.split_first().expect("clap requires a program");
    let ctx = Ctx::new(g, &e.opts)?;
    let rank = env_local_rank()?;
    let mut cmd = std::process::Command::new(prog);
    cmd.args(args);
    if ctx.rails.is_empty() {
        // Never fail the job for missing devices: say so once, run unchanged.
        note(&format!(
            "no rails on {}: {}; running {} unchanged",
            origin_text(&ctx.m),
            ctx.rails.absence_reason(),
            prog.to_string_lossy()
        ));
    } else {
        let r = rank.map_or(0, |(r, _)| r);
        if rank.is_none() {
            note(&format!(
                "none of {} is set: local rank 0",
                LOCAL_RANK_VARS.join(", ")
            ));
        }
        let (_, what, vars) = compute_env(&ctx, e.opts.pu.as_deref(), r)?;
        if e.verbose {
            note(&format!(
                "local rank {r} at {what}:\n{}",
                exports(&vars).trim_end()
            ));
        }
        for v in &vars {
            cmd.env(&v.name, &v.value);
        }
    }
    let err = cmd.exec();
    // Only reached when exec failed; 127 as a shell says "not runnable".
    note(&format!("cannot run '{}': {err}", prog.to_string_lossy()));
    Ok(ExitCode::from(127))
}
