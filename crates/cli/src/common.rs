//! Options and helpers shared by every subcommand.

use anyhow::Result;
use clap::Args;
use topocomm_topo::Machine;

#[derive(Args, Clone, Debug)]
pub struct GlobalOpts {
    /// Topology to work on: an hwloc XML file, `synthetic:DESC` (e.g.
    /// `synthetic:pack:2 numa:2 l3:2 core:4 pu:2`), a topocomm machine JSON
    /// file, or `live` (default)
    #[arg(long, global = true, env = topocomm_topo::TOPOLOGY_ENV, value_name = "FILE|synthetic:DESC")]
    pub topology: Option<String>,
}

impl GlobalOpts {
    pub fn machine(&self) -> Result<Machine> {
        Ok(topocomm_topo::load_default(self.topology.as_deref())?)
    }
}

/// Left-aligned plain-text table with a header line.
pub fn text_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{:<w$}  ", c, w = widths[i]));
            }
        }
        s.trim_end().to_string()
    };
    let mut out = String::new();
    out.push_str(&line(header.to_vec()));
    out.push('\n');
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    out
}
