#!/usr/bin/env bash
# Builds the published packages (scylla-driver, scylla-driver-cql,
# scylla-driver-macros, scylla-testbed) with every feature on the toolchain
# their `rust-version` states, the way a user on that toolchain gets them:
# in a copy of the workspace whose lockfile is resolved again with cargo's
# MSRV-aware fallback (dependencies at the newest versions that support
# that Rust), since Cargo.lock itself resolves the newest of all.
#
# The toolchain is installed with rustup (minimal profile) when missing; if
# it cannot be installed (no network), the check says so and is skipped.
#
# usage: scripts/msrv-check.sh
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
msrv="$(sed -n 's/^rust-version *= *"\(.*\)"/\1/p' "$repo/Cargo.toml" | head -n1)"
[[ -n "$msrv" ]] || { echo "msrv-check: no rust-version in Cargo.toml" >&2; exit 2; }
# rustup names a release by its three numbers.
toolchain="$msrv"
[[ "$toolchain" =~ ^[0-9]+\.[0-9]+$ ]] && toolchain="$toolchain.0"

if ! rustup run "$toolchain" rustc --version >/dev/null 2>&1; then
    echo "== installing Rust $toolchain (minimal profile)"
    if ! rustup toolchain install "$toolchain" --profile minimal; then
        echo "msrv-check: SKIPPED: Rust $toolchain could not be installed here, so the stated MSRV was not checked"
        exit 0
    fi
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# The work tree's tracked files as they are now (uncommitted edits included).
git -C "$repo" ls-files -z | (cd "$repo" && tar --null -T - -cf -) | tar -xf - -C "$work"
cd "$work"
echo "== resolving dependencies for Rust $toolchain"
CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback cargo "+$toolchain" generate-lockfile --quiet
echo "== cargo +$toolchain check (published packages, all features)"
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}/msrv" cargo "+$toolchain" check --quiet \
    -p scylla-driver -p scylla-driver-cql -p scylla-driver-macros -p scylla-testbed --all-features
echo "msrv-check: the published packages build with Rust $toolchain"
