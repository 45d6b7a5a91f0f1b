#!/usr/bin/env bash
# Builds the published packages (scylla-driver, scylla-driver-cql,
# scylla-driver-macros, scylla-testbed) with every feature on the toolchain
# their `rust-version` states, with the committed Cargo.lock (`--locked`):
# the workspace uses resolver 3, so `cargo update` keeps every dependency at
# a version that supports that Rust, and this check fails when the lockfile
# or the code asks for more.
#
# The toolchain is installed with rustup (minimal profile) when missing. If
# it cannot be installed the check fails: pass --allow-skip (a machine with
# no network) to report that and exit 0 instead.
#
# usage: scripts/msrv-check.sh [--allow-skip]
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
allow_skip=0
case "${1:-}" in
    --allow-skip) allow_skip=1 ;;
    "") ;;
    *) echo "msrv-check: unknown argument $1" >&2; exit 2 ;;
esac
msrv="$(sed -n 's/^rust-version *= *"\(.*\)"/\1/p' "$repo/Cargo.toml" | head -n1)"
[[ -n "$msrv" ]] || { echo "msrv-check: no rust-version in Cargo.toml" >&2; exit 2; }
# rustup names a release by its three numbers.
toolchain="$msrv"
[[ "$toolchain" =~ ^[0-9]+\.[0-9]+$ ]] && toolchain="$toolchain.0"

if ! rustup run "$toolchain" rustc --version >/dev/null 2>&1; then
    echo "== installing Rust $toolchain (minimal profile)"
    if ! rustup toolchain install "$toolchain" --profile minimal; then
        if [[ "$allow_skip" == 1 ]]; then
            echo "msrv-check: SKIPPED (--allow-skip): Rust $toolchain could not be installed, so the stated MSRV was not checked"
            exit 0
        fi
        echo "msrv-check: Rust $toolchain could not be installed, so the stated MSRV cannot be checked" >&2
        exit 1
    fi
fi

cd "$repo"
echo "== cargo +$toolchain check --locked (published packages, all features)"
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}/msrv" cargo "+$toolchain" check --locked --quiet \
    -p scylla-driver -p scylla-driver-cql -p scylla-driver-macros -p scylla-testbed --all-features
echo "msrv-check: the published packages build with Rust $toolchain and the committed Cargo.lock"
