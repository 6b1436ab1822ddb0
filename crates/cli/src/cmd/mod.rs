pub mod map;
pub mod report;
pub mod topo;
pub mod trace;
