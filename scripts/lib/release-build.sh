# Sourced by the scripts that run release binaries of this workspace: the
# test cluster (`testbed`), `storm_reconnect` and `soak`.
#
# `release_build` builds all three in one cargo invocation from the root
# package and the test cluster's package. Cargo unifies the features of the
# dependencies over what one invocation selects, so a script that built only
# `-p scylla-testbed` got a second copy of tokio and its neighbours (about 2
# minutes on 2 cores); with this one selection, `cargo run --release
# --example storm_reconnect` (the README's first command) and every script
# share one set of dependency builds.
#
# The binaries land in "$(release_dir)" (CARGO_TARGET_DIR is honoured).

release_build() {
    local root
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
    (cd "$root" && cargo build --release --quiet -p scylla-driver-suite -p scylla-testbed \
        --bin testbed --example storm_reconnect --example soak)
}

release_dir() {
    local root
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
    echo "${CARGO_TARGET_DIR:-$root/target}/release"
}
