pub mod bench;
pub mod report;
pub mod topo;
