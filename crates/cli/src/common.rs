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

/// Left-aligned plain-text table with a header line (`topocomm_topo::text::text_table`).
pub fn text_table(header: &[&str], rows: &[Vec<String>]) -> String {
    topocomm_topo::text::text_table(header, rows)
}
