//! `topocomm selftest` (hidden): transport checks run under `topocomm run`
//! by the integration tests, and by hand to check a machine:
//! `topocomm run -n 4 -- topocomm selftest stress`.

use crate::common::GlobalOpts;
use anyhow::{bail, Result};
use std::io::Write;
use std::process::ExitCode;
use topocomm_transport::selftest::{self, StressSpec};
use topocomm_transport::{Comm, Error};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// stress | pingpong | truncate | die | hang | plan | where
    pub scenario: String,
    /// Seed of the random message plan
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Messages sent by each rank (stress), or in all between ranks 0 and 1 (pingpong)
    #[arg(long, default_value_t = 40, value_parser = crate::common::count(0, 10_000_000))]
    pub messages: usize,
    /// Largest message in bytes (stress, pingpong; sizes are log-uniform from 0)
    #[arg(long, default_value_t = 1 << 20, value_parser = crate::common::count(0, 1 << 30))]
    pub max_size: usize,
}

fn truncate(c: &mut Comm) -> Result<()> {
    if c.size() < 2 {
        bail!("truncate needs 2 ranks");
    }
    let big = vec![7u8; 3 << 20];
    match c.rank() {
        0 => {
            c.send(&big[..100], 1, 5)?;
            c.send(&big[..20_000], 1, 5)?;
            c.send(&big, 1, 6)?;
            c.send(b"after", 1, 7)?;
        }
        1 => {
            let mut small = [0u8; 10];
            let mut mid = vec![0u8; 1000];
            for (tag, cap) in [(5, 10usize), (5, 1000), (6, 1000)] {
                let buf = if cap == 10 {
                    &mut small[..]
                } else {
                    &mut mid[..]
                };
                match c.recv(buf, 0, tag) {
                    Err(e @ Error::Truncated { .. }) => println!("truncation detected: {e}"),
                    other => bail!("expected a truncation error, got {other:?}"),
                }
            }
            let st = c.recv(&mut mid, 0, 7)?;
            if &mid[..st.count] != b"after" {
                bail!("channel broken after truncation");
            }
            println!("channel ok after truncation");
        }
        _ => {}
    }
    c.barrier()?;
    Ok(())
}

pub fn run(_g: &GlobalOpts, a: &Args) -> Result<ExitCode> {
    let mut c = Comm::init()?;
    let spec = StressSpec {
        seed: a.seed,
        messages: a.messages,
        max_size: a.max_size,
    };
    match a.scenario.as_str() {
        "stress" => {
            let s = selftest::stress(&mut c, &spec)?;
            if c.rank() == 0 {
                println!(
                    "stress ok: {} ranks, {} messages each ({} in all, {} bytes), max {} bytes, 1 cancel each",
                    s.ranks, a.messages, s.messages, s.bytes, a.max_size
                );
            }
        }
        "pingpong" => {
            let s = selftest::pingpong(&mut c, &spec)?;
            if c.rank() == 0 {
                println!(
                    "pingpong ok: {} messages between ranks 0 and 1 ({} bytes), max {} bytes",
                    s.messages, s.bytes, a.max_size
                );
            }
        }
        "truncate" => truncate(&mut c)?,
        "die" => {
            // Rank 0 dies hard; the others wait for it and must fail in bounded time.
            if c.rank() == 0 {
                std::thread::sleep(std::time::Duration::from_millis(200));
                kill_self();
            }
            let mut b = [0u8; 8];
            c.recv(&mut b, 0, 1)?;
            bail!("received a message from a dead rank");
        }
        "hang" => {
            // Everyone waits for a message nobody sends (killed from outside,
            // or fails with TOPOCOMM_TIMEOUT).
            let line = format!("rank {} pid {}\n", c.rank(), std::process::id());
            std::io::stderr().write_all(line.as_bytes())?;
            let mut b = [0u8; 8];
            let src = ((c.rank() + 1) % c.size()) as i32;
            c.recv(&mut b, src, 1)?;
        }
        "plan" => {
            for p in 0..c.size() {
                if p != c.rank() {
                    let (class, _) = c.plan_to(p);
                    println!("rank {} -> {p}: {class}: {}", c.rank(), c.mechanism_to(p));
                }
            }
        }
        "where" => {
            // Where the rank runs right after start-up, and on how many
            // CPUs it may run (the spread of crowded unbound ranks).
            let cpu = topocomm_transport::launch::running_cpu()
                .map_or_else(|| "unknown".to_string(), |c| c.to_string());
            let allowed = topocomm_transport::launch::allowed_cpus();
            let list: Vec<String> = allowed.iter().map(u32::to_string).collect();
            println!("rank {} cpu {cpu} allowed {}", c.rank(), list.join(","));
        }
        o => {
            bail!(
                "unknown scenario '{o}' (expected stress, pingpong, truncate, die, hang, plan or where)"
            )
        }
    }
    c.finalize()?;
    Ok(ExitCode::SUCCESS)
}

/// SIGKILL to ourselves, like `kill -9` from outside.
fn kill_self() {
    let _ = std::process::Command::new("kill")
        .args(["-9", &std::process::id().to_string()])
        .status();
    std::thread::sleep(std::time::Duration::from_secs(60));
}
