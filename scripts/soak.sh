#!/usr/bin/env bash
# Soak: a mixed workload against the in-process test cluster under a churn
# schedule (node restarts, tablet moves and splits, tables created and
# dropped, NAT and a slow node on and off, connections dropped) for N
# minutes; fails unless every operation ended exactly once, no value was
# wrong, every failure follows a disruption, and memory, descriptors,
# connections and tasks are back near their level after the warm-up.
# What it checks and how: benches/tools/soak.rs.
#
# usage: scripts/soak.sh [--minutes N] [--out DIR]   (default: 2 minutes,
#        target/soak); samples.csv, operations.csv, summary.txt and
#        chart.svg are written to DIR.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/release-build.sh
source "$repo/scripts/lib/release-build.sh"
minutes=2
out="$repo/target/soak"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --minutes) minutes="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "soak: unknown argument $1" >&2; exit 2 ;;
    esac
done
cd "$repo"
release_build
"${CARGO_TARGET_DIR:-target}/release/examples/soak" --minutes "$minutes" --out "$out"
