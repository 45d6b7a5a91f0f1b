#!/usr/bin/env bash
# Paired comparison of client CPU per request between builds of the comparison
# binaries (`compare-ours` of two commits, or `compare-ours` against
# `compare-official-scylla`): small differences that the ten-round medians of
# compare-drivers.sh cannot resolve from run to run.
#
# Starts one testbed (1 node x 2 shards) for the whole comparison (or uses
# the server given with --node), then runs
# ROUNDS rounds; each round runs every binary once, in an order reversed every
# other round, with the same arguments (100,000 requests after 5,000 of
# warm-up, the same --key-base so that INSERTs rewrite the same rows and the
# test cluster does not grow). Each binary's CPU per request is then divided by
# the first binary's of the same round, and the median and interquartile range
# of those ratios are printed, with each binary's medians of ops/s, p50, p99
# and CPU per request, and the rounds' own ratios of ops/s, p50 and p99. A
# run takes about a second at concurrency 64, so 40 rounds of two binaries
# take under two minutes; their ratio's median resolves about 1-2%.
#
# Copy the binaries aside first (a later build replaces them under
# comparisons/target):
#   cp comparisons/target/release/compare-ours /tmp/ours-before
#   ... change, rebuild comparisons/ours ...
#   scripts/paired-cpu.sh --workload insert --concurrency 64 --rounds 40 \
#       /tmp/ours-before comparisons/target/release/compare-ours
#
# --node HOST:PORT runs against a server already up (a real Cassandra from
# scripts/cassandra.sh) instead of starting a testbed.
#
# The testbed is started and stopped by scripts/lib/testbed.sh.
#
# usage: scripts/paired-cpu.sh [--node HOST:PORT] [--workload insert|select]
#          [--concurrency C] [--rounds R] [--requests N] BIN_A BIN_B [BIN...]
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/release-build.sh
source "$repo/scripts/lib/release-build.sh"
# shellcheck source=lib/testbed.sh
source "$repo/scripts/lib/testbed.sh"
workload=insert
concurrency=64
rounds=20
requests=100000
warmup=5000        # unmeasured requests before each run
bins=()
node=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --node) node="$2"; shift 2 ;;
        --workload) workload="$2"; shift 2 ;;
        --concurrency) concurrency="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --requests) requests="$2"; shift 2 ;;
        -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
        -*) echo "paired-cpu: unknown option $1" >&2; exit 2 ;;
        *) bins+=("$1"); shift ;;
    esac
done
if [[ ${#bins[@]} -lt 2 ]]; then
    echo "paired-cpu: give at least two binaries (see --help)" >&2
    exit 2
fi
for b in "${bins[@]}"; do
    [[ -x "$b" ]] || { echo "paired-cpu: $b is not an executable" >&2; exit 2; }
done

work="$(mktemp -d)"
cleanup() {
    testbed_stop
    rm -rf "$work"
}
trap cleanup EXIT
if [[ -z "$node" ]]; then
    testbed_bin="${CARGO_TARGET_DIR:-$repo/target}/release/testbed"
    if [[ ! -x "$testbed_bin" ]]; then
        release_build
    fi
    cp "$testbed_bin" "$work/testbed"
    # Bounded: about two seconds per run is plenty.
    testbed_start "$work/testbed" "$work/testbed.out" \
        --nodes 1 --shards 2 --duration-secs $(( 120 + rounds * ${#bins[@]} * 10 )) || exit 1
    node="$testbed_addr"
fi

key_base=77000000
echo "== $workload at concurrency $concurrency, $rounds rounds, $requests requests per run, server $node"
echo "== load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ "$workload" == select ]]; then
    # The rows the SELECTs read (warm-up and measured keys), written once by
    # each binary: each driver reads its own keyspace.
    for b in "${bins[@]}"; do
        "$b" --node "$node" --workload insert --concurrency 64 \
            --requests $(( requests + warmup )) --warmup 0 --key-base "$key_base" \
            > /dev/null 2>> "$work/clients.log"
    done
fi
for r in $(seq 1 "$rounds"); do
    order=("${bins[@]}")
    if (( r % 2 == 0 )); then
        order=()
        for (( i=${#bins[@]}-1; i>=0; i-- )); do order+=("${bins[$i]}"); done
    fi
    for b in "${order[@]}"; do
        extra=()
        [[ "$workload" == select ]] && extra=(--no-populate)
        line="$("$b" --node "$node" --workload "$workload" --concurrency "$concurrency" \
            --requests "$requests" --warmup "$warmup" --key-base "$key_base" "${extra[@]}" --json \
            2>> "$work/clients.log" | tail -n 1)" ||
            { echo "paired-cpu: a run of $b failed:" >&2; tail -n 5 "$work/clients.log" >&2; exit 1; }
        printf '%s\t%s\t%s\n' "$r" "$b" "$line" >> "$work/runs.tsv"
    done
done
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$work/runs.tsv" "${bins[@]}" <<'EOF'
import json
import statistics
import sys

path, bins = sys.argv[1], sys.argv[2:]
runs = {}
for line in open(path):
    r, b, js = line.rstrip("\n").split("\t", 2)
    runs.setdefault(int(r), {})[b] = json.loads(js)


def quartiles(xs):
    if len(xs) < 2:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4)
    return q[0], q[2]


base = bins[0]


def short(b):
    return b if len(b) <= 40 else "..." + b[-37:]


def ratio_summary(b, key):
    ratios = [runs[r][b][key] / runs[r][base][key] for r in sorted(runs)]
    lo, hi = quartiles(ratios)
    return statistics.median(ratios), lo, hi


print(f"{'binary':40} {'ops/s':>9} {'p50 us':>8} {'p99 us':>8} {'cpu us/req':>11}   ratio to first: median [IQR]")
for b in bins:
    rows = [runs[r][b] for r in sorted(runs)]
    m, lo, hi = ratio_summary(b, "cpu_sched_us_per_req")
    med = lambda k: statistics.median(x[k] for x in rows)
    print(
        f"{short(b):40} {med('ops_per_s'):9.0f} {med('p50_us'):8.0f} {med('p99_us'):8.0f}"
        f" {med('cpu_sched_us_per_req'):11.3f}   {m:.3f} [{lo:.3f}-{hi:.3f}]"
    )
# The rounds' own ratios of throughput and latency: the two runs of a round
# meet the server in about the same state (a Cassandra compacting, say).
print("per-round ratio to first, median [IQR]:")
for b in bins[1:]:
    parts = []
    for key, name in (("ops_per_s", "ops/s"), ("p50_us", "p50"), ("p99_us", "p99")):
        m, lo, hi = ratio_summary(b, key)
        parts.append(f"{name} {m:.3f} [{lo:.3f}-{hi:.3f}]")
    print(f"  {short(b):40} " + ", ".join(parts))
EOF
