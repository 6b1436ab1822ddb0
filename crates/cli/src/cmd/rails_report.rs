//! The report's rails section, from `topocomm rails`'s tables (used by
//! `topocomm report`).

use topocomm_rails::{rail_tables, Setup, SetupOptions};
use topocomm_topo::text::origin_text;
use topocomm_topo::Machine;

/// The report's rails section (HTML), for machines that have rails.
pub fn report_section(m: &Machine) -> Option<String> {
    use topocomm_report::{esc, html_table};
    let s = Setup::new(m.clone(), origin_text(m), &SetupOptions::default()).ok()?;
    if s.rails.is_empty() {
        return None;
    }
    let split = s.numa_split().ok()?;
    let head: Vec<&str> = split.head.iter().map(String::as_str).collect();
    let mut h = String::new();
    for (title, mut head, rows) in rail_tables(&s.rails) {
        head[0] = "name";
        h.push_str(&format!("<p>{title}:</p>{}", html_table(&head, &rows)));
    }
    h.push_str(&format!(
        "<p>Split of a large message from each NUMA node (distance, weight, share per rail); weights: {} (<code>topocomm rails</code>, docs/commands/rails.md).</p>",
        esc(&s.source())
    ));
    h.push_str(&html_table(&head, &split.rows));
    Some(h)
}
