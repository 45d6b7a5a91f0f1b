#!/usr/bin/env bash
# User-space instructions per request of both drivers, counted by valgrind's
# callgrind: deterministic for the same binary and inputs whatever else the
# machine does, so small changes show that a timed run cannot resolve.
#
# For each driver and workload: runs the comparison binary under callgrind
# twice, with N and 3N measured requests (same warm-up), against one testbed
# (1 node x 2 shards, started here and stopped at the end), and reports
# (instructions(3N) - instructions(N)) / 2N: the marginal cost of a request,
# without start-up, connection set-up and preparation. It counts the client's
# instructions only (not the kernel's, not the server's), including the
# shared harness (comparisons/common: the closed loop, latency slots, the
# typed-row check), which is the same code for both drivers.
#
# Under callgrind the client runs one thread at a time and about 50x slower,
# so the server is never the bottleneck and batches are larger than in a timed
# run: the counts compare the drivers' code paths, not their timing. Runs of
# the same binary differ by about 0.5%.
#
# usage: scripts/instructions-per-request.sh [--requests N] [--concurrency C]
#          [--workloads "insert select"] [--no-build]
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
requests=10000
concurrency=64
workloads="insert select"
build=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --requests) requests="$2"; shift 2 ;;
        --concurrency) concurrency="$2"; shift 2 ;;
        --workloads) workloads="$2"; shift 2 ;;
        --no-build) build=0; shift ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) echo "instructions-per-request: unknown argument $1" >&2; exit 2 ;;
    esac
done
command -v valgrind >/dev/null || { echo "instructions-per-request: valgrind is not installed" >&2; exit 2; }

cmp_target="$repo/comparisons/target"
main_target="${CARGO_TARGET_DIR:-$repo/target}"
if [[ "$build" == 1 ]]; then
    echo "== building (release)"
    for d in ours official-scylla; do
        (cd "$repo/comparisons/$d" && CARGO_TARGET_DIR="$cmp_target" cargo build --release --quiet)
    done
    (cd "$repo" && cargo build --release --quiet -p scylla-testbed --bin testbed)
fi

work="$(mktemp -d)"
cp "$main_target/release/testbed" "$work/testbed"
"$work/testbed" --nodes 1 --shards 2 --duration-secs 3600 > "$work/testbed.out" 2>&1 &
testbed_pid=$!
trap 'kill "$testbed_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
node=""
for _ in $(seq 100); do
    node="$(grep -oP '^node 0: \K\S+' "$work/testbed.out" || true)"
    [[ -n "$node" ]] && break
    sleep 0.1
done
[[ -n "$node" ]] || { echo "instructions-per-request: the testbed did not start" >&2; exit 1; }

big=$((3 * requests))
key_base=77000000
# The select workload reads keys an insert run wrote (each driver its own
# keyspace): enough for the warm-up and the larger run.
for driver in ours official-scylla; do
    "$cmp_target/release/compare-$driver" --node "$node" --workload insert \
        --concurrency 64 --requests $((big + 3000)) --warmup 0 --key-base "$key_base" \
        --json > /dev/null 2>&1
done

count() { # driver workload requests -> instructions
    local extra=()
    [[ "$2" == select ]] && extra=(--no-populate --key-base "$key_base")
    valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        "$cmp_target/release/compare-$1" --node "$node" --workload "$2" \
        --concurrency "$concurrency" --requests "$3" --warmup 2000 "${extra[@]}" --json \
        2>&1 >/dev/null | grep -oP 'Collected : \K[0-9]+'
}

echo "== instructions per request (callgrind, marginal over $requests -> $big requests, concurrency $concurrency)"
printf '%-8s %12s %12s %7s\n' workload ours official ratio
for w in $workloads; do
    declare -A per=()
    for driver in ours official-scylla; do
        small_n="$(count "$driver" "$w" "$requests")"
        big_n="$(count "$driver" "$w" "$big")"
        per[$driver]=$(( (big_n - small_n) / (big - requests) ))
    done
    printf '%-8s %12d %12d %7.2f\n' "$w" "${per[ours]}" "${per[official-scylla]}" \
        "$(echo "${per[ours]} / ${per[official-scylla]}" | bc -l)"
done
