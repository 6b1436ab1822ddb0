//! `topocomm selftest` (hidden): transport checks run under `topocomm run`
//! by the integration tests, and by hand to check a machine:
//! `topocomm run -n 4 -- topocomm selftest stress`.

use crate::common::GlobalOpts;
use anyhow::{bail, Result};
use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::process::ExitCode;
use topocomm_transport::{Comm, Error, ANY_SOURCE, ANY_TAG};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// stress | truncate | die | hang | plan
    pub scenario: String,
    /// Seed of the random message plan
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Messages sent by each rank (stress)
    #[arg(long, default_value_t = 40)]
    pub messages: usize,
    /// Largest message in bytes (stress; sizes are log-uniform from 0)
    #[arg(long, default_value_t = 1 << 20)]
    pub max_size: usize,
}

/// splitmix64: a tiny deterministic generator every rank can replay.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

struct Msg {
    dst: usize,
    tag: i32,
    size: usize,
}

/// Message `i` of rank `src`: destination, tag in 0..4 and a size
/// log-uniform in [0, max] (with exact 0 and max now and then).
fn message(seed: u64, n: usize, src: usize, i: usize, max: usize) -> Msg {
    let h = mix(seed ^ mix((src as u64) << 32 | i as u64));
    let dst = (h % n as u64) as usize;
    let tag = ((h >> 8) % 4) as i32;
    let r = (h >> 16) % 1000;
    let size = if r < 30 {
        0
    } else if r < 40 {
        max
    } else {
        let bits = (max.max(1) as f64).log2();
        let e = ((h >> 32) as f64 / u32::MAX as f64) * bits;
        (2f64.powf(e) as usize).min(max)
    };
    Msg { dst, tag, size }
}

fn fill(seed: u64, src: usize, i: usize, buf: &mut [u8]) {
    let base = mix(seed ^ (src as u64) << 40 ^ i as u64);
    for (k, chunk) in buf.chunks_mut(8).enumerate() {
        let v = mix(base.wrapping_add(k as u64)).to_ne_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}

fn stress(c: &mut Comm, a: &Args) -> Result<()> {
    let (n, me, seed) = (c.size(), c.rank(), a.seed);
    // Expected arrivals per (source, tag), in send order (non-overtaking).
    let mut expect: HashMap<(usize, i32), VecDeque<(usize, usize)>> = HashMap::new();
    let mut total = 0;
    for src in 0..n {
        for i in 0..a.messages {
            let m = message(seed, n, src, i, a.max_size);
            if m.dst == me {
                expect
                    .entry((src, m.tag))
                    .or_default()
                    .push_back((i, m.size));
                total += 1;
            }
        }
    }
    let mut bufs: Vec<Vec<u8>> = Vec::new();
    let mut reqs = Vec::new();
    for i in 0..a.messages {
        let m = message(seed, n, me, i, a.max_size);
        let mut b = vec![0u8; m.size];
        fill(seed, me, i, &mut b);
        // SAFETY: `b` is kept in `bufs` (its heap block never moves) until
        // the wait_all below.
        reqs.push(unsafe { c.isend_raw(b.as_ptr(), b.len(), m.dst, m.tag)? });
        bufs.push(b);
    }
    let mut rbuf = vec![0u8; a.max_size];
    let mut want = Vec::new();
    for k in 0..total {
        // Alternate receive styles: any/any, probe then exact, any source with a tag.
        let st = match (mix(seed ^ me as u64 ^ (k as u64) << 20)) % 3 {
            0 => c.recv(&mut rbuf, ANY_SOURCE, ANY_TAG)?,
            1 => {
                let p = c.probe(ANY_SOURCE, ANY_TAG)?;
                let mut exact = vec![0u8; p.count];
                let st = c.recv(&mut exact, p.source, p.tag)?;
                if st != p {
                    bail!("probe said {p:?}, receive got {st:?}");
                }
                rbuf[..st.count].copy_from_slice(&exact);
                st
            }
            _ => {
                let tag = (0..4)
                    .find(|t| (0..n).any(|s| expect.get(&(s, *t)).is_some_and(|q| !q.is_empty())))
                    .expect("a message is still expected");
                c.recv(&mut rbuf, ANY_SOURCE, tag)?
            }
        };
        let src = st.source as usize;
        let Some((i, size)) = expect.get_mut(&(src, st.tag)).and_then(|q| q.pop_front()) else {
            bail!("rank {me}: unexpected message {st:?}");
        };
        if size != st.count {
            bail!("rank {me}: message {i} from {src} tag {}: {} bytes, expected {size} (order or length broken)", st.tag, st.count);
        }
        want.resize(size, 0);
        fill(seed, src, i, &mut want);
        if rbuf[..size] != want[..] {
            let at = rbuf
                .iter()
                .zip(&want)
                .position(|(x, y)| x != y)
                .unwrap_or(0);
            bail!("rank {me}: message {i} from {src} ({size} bytes) corrupted at byte {at}");
        }
    }
    c.wait_all(&reqs)?;
    drop(bufs);
    c.barrier()?;
    if me == 0 {
        println!(
            "stress ok: {n} ranks, {} messages each, max {} bytes",
            a.messages, a.max_size
        );
    }
    Ok(())
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
    match a.scenario.as_str() {
        "stress" => stress(&mut c, a)?,
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
        o => bail!("unknown scenario '{o}' (expected stress, truncate, die, hang or plan)"),
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
