//! The `testbed` program: the in-process test cluster, standalone
//! (`cargo install scylla-testbed`, then `testbed --nodes 3 --shards 8`).
//! `testbed --help` lists the options; see [`scylla_testbed::cli`].

fn main() -> std::process::ExitCode {
    scylla_testbed::cli::main_from(std::env::args_os())
}
