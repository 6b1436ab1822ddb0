pub mod bench;
pub mod bench_worker;
pub mod plan;
pub mod report;
pub mod run;
pub mod selftest;
pub mod topo;
