pub mod report;
pub mod topo;
