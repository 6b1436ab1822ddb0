//! `topocomm-worker`: the p2p benchmark worker that `measure` and
//! `model::tune` start (the launcher and rank parts are
//! `topocomm_transport::worker`; docs/commands/bench-worker.md).

fn main() -> std::process::ExitCode {
    let code = topocomm_transport::worker::main(std::env::args_os().skip(1).collect());
    std::process::ExitCode::from(code.clamp(0, 255) as u8)
}
