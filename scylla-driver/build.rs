//! `SCYLLA_LOOM=1 cargo test -p scylla-driver --lib limiter::loom_model`
//! builds the request limiter against loom's atomics and locks for its model
//! check (`src/session/limiter.rs`). The switch is an environment variable
//! read here rather than `RUSTFLAGS="--cfg ..."`, so that only this crate is
//! rebuilt for the model, not every dependency.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(scylla_loom)");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=SCYLLA_LOOM");
    if std::env::var_os("SCYLLA_LOOM").is_some_and(|v| !v.is_empty() && v != "0") {
        println!("cargo::rustc-cfg=scylla_loom");
    }
}
