pub mod bench;
pub mod bench_cache;
pub mod bench_matrix;
pub mod bench_placement;
pub mod bench_report;
pub mod charact;
pub mod report;
pub mod topo;
