#!/usr/bin/env bash
# Side-by-side comparison of this workspace's driver ("ours") with the official
# ScyllaDB Rust driver (crate `scylla` 1.x, "official"), measured in one run
# against one server.
#
# Builds comparisons/ours and comparisons/official-scylla in release (both use
# comparisons/common for the command line, the closed loop and the
# measurement), starts the testbed binary (1 node x 2 shards, bounded by
# --duration-secs) unless --node names an external server, then runs, for each
# concurrency, rounds of: ours insert, official insert, ours select, official
# select, with the order of the drivers swapped every other round (interleaved
# ABBA, so that drift in machine or server load hits both drivers alike).
# Prints every run's line and a table of medians with the ratio ours/official.
#
# --tls: both drivers connect over TLS (rustls, server certificate verified
# against the CA and the node's IP address). The testbed then also serves TLS
# (--tls-dir: port 9142, shard-aware port 19142) and the clients connect to
# 9142 trusting its ca.pem; --tls-client-auth makes it require a client
# certificate, which both clients then present. Against an external server:
# --node HOST:TLSPORT --tls-ca FILE [--tls-cert FILE --tls-key FILE].
#
# --ours-protocol 4|5 pins the protocol version of ours (default: negotiated,
# which is v5 against the testbed and Cassandra 4+; the official driver speaks
# v4 only). v5 frames travel in checksummed segments and EXECUTE of a SELECT
# skips the result metadata (the statement's metadata id).
#
# The testbed is started and stopped by scripts/lib/testbed.sh.
#
# usage: scripts/compare-drivers.sh [--node HOST:PORT] [--rounds R] [--ours-protocol 4|5]
#          [--concurrency "1 64 512"] [--requests N] [--requests-c1 N]
#          [--warmup N] [--threads T] [--out FILE.jsonl] [--no-build]
#          [--tls [--tls-client-auth]] [--tls-ca FILE [--tls-cert FILE --tls-key FILE]]
#
# Exit status: 0 if every run succeeded, 1 if a run failed, 2 on bad usage.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/release-build.sh
source "$repo/scripts/lib/release-build.sh"
# shellcheck source=lib/testbed.sh
source "$repo/scripts/lib/testbed.sh"
node=""
rounds=3
concurrencies="1 64 512"
requests=100000     # measured requests per run at concurrency > 1
requests_c1=20000   # at concurrency 1 (each request waits for the previous)
warmup=10000
threads=2
out=""
build=1
run_timeout=300     # seconds, per benchmark run
tls=0
tls_client_auth=0
tls_ca=""
tls_cert=""
tls_key=""

while [[ $# -gt 0 ]]; do
    case "$1" in
        --node) node="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --concurrency) concurrencies="$2"; shift 2 ;;
        --requests) requests="$2"; shift 2 ;;
        --requests-c1) requests_c1="$2"; shift 2 ;;
        --warmup) warmup="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --no-build) build=0; shift ;;
        --ours-protocol) export OURS_PROTOCOL="$2"; shift 2 ;;
        --tls) tls=1; shift ;;
        --tls-client-auth) tls=1; tls_client_auth=1; shift ;;
        --tls-ca) tls=1; tls_ca="$2"; shift 2 ;;
        --tls-cert) tls_cert="$2"; shift 2 ;;
        --tls-key) tls_key="$2"; shift 2 ;;
        -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
        *) echo "compare-drivers: unknown argument '$1'" >&2; exit 2 ;;
    esac
done

if [[ -n "$tls_cert" || -n "$tls_key" ]] && [[ -z "$tls_cert" || -z "$tls_key" ]]; then
    echo "compare-drivers: --tls-cert and --tls-key go together" >&2; exit 2
fi
if [[ -n "$node" ]]; then
    if [[ "$tls" == 1 && -z "$tls_ca" ]]; then
        echo "compare-drivers: --tls with --node needs --tls-ca FILE (the server's CA)" >&2; exit 2
    fi
    if [[ "$tls_client_auth" == 1 && -z "$tls_cert" ]]; then
        echo "compare-drivers: --tls-client-auth with --node needs --tls-cert and --tls-key" >&2; exit 2
    fi
elif [[ -n "$tls_ca" || -n "$tls_cert" ]]; then
    echo "compare-drivers: --tls-ca/--tls-cert/--tls-key are for --node; the testbed makes its own (use --tls)" >&2
    exit 2
fi
if [[ -n "$tls_cert" && -z "$tls_ca" ]]; then
    echo "compare-drivers: --tls-cert/--tls-key need --tls-ca" >&2; exit 2
fi

cmp_target="${COMPARE_TARGET_DIR:-$repo/comparisons/target}"
main_target="${CARGO_TARGET_DIR:-$repo/target}"
ours_bin="$cmp_target/release/compare-ours"
official_bin="$cmp_target/release/compare-official-scylla"
testbed_bin="$main_target/release/testbed"
work="$(mktemp -d)"
[[ -n "$out" ]] || out="$work/results.jsonl"
: > "$out"

# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
    testbed_stop
    rm -rf "$work"
}
trap cleanup EXIT

if [[ "$build" == 1 ]]; then
    echo "== building (release)"
    for crate in ours official-scylla; do
        (cd "$repo/comparisons/$crate" &&
            CARGO_TARGET_DIR="$cmp_target" timeout 1800 cargo build --release --quiet)
    done
    if [[ -z "$node" ]]; then
        CARGO_TARGET_DIR="$main_target" timeout 1800 release_build
    fi
fi

# Bench time is small; bound the server generously but finitely.
n_conc=$(wc -w <<< "$concurrencies")
duration=$(( 120 + rounds * n_conc * 4 * run_timeout / 10 ))

if [[ -z "$node" ]]; then
    testbed_args=(--nodes 1 --shards 2 --duration-secs "$duration")
    if [[ "$tls" == 1 ]]; then
        testbed_args+=(--tls-dir "$work/tls")
        if [[ "$tls_client_auth" == 1 ]]; then testbed_args+=(--tls-client-auth); fi
    fi
    echo "== starting testbed: ${testbed_args[*]}"
    # Run a private copy: the target dir may be shared with other checkouts
    # whose builds would replace the binary under our feet.
    cp "$testbed_bin" "$work/testbed"
    testbed_start "$work/testbed" "$work/testbed.out" "${testbed_args[@]}" || exit 1
    node="$testbed_addr"
    if [[ "$tls" == 1 ]]; then
        # The "tls:" line comes once ca.pem (and the client files) exist.
        testbed_wait_tls || exit 1
        node="$testbed_tls_addr"
    fi
    server_desc="testbed (1 node x 2 shards, same machine)"
    if [[ "$tls" == 1 ]]; then
        tls_ca="$work/tls/ca.pem"
        if [[ "$tls_client_auth" == 1 ]]; then
            tls_cert="$work/tls/client.pem"
            tls_key="$work/tls/client.key"
        fi
        server_desc+=", $(grep '^tls:' "$work/testbed.out" | sed 's/; CA .*//')"
    fi
else
    server_desc="external server $node"
    if [[ "$tls" == 1 ]]; then
        server_desc+=", TLS (CA $tls_ca${tls_cert:+, client certificate $tls_cert})"
    fi
fi
# The TLS options both clients get (empty in plain mode).
tls_args=()
if [[ "$tls" == 1 ]]; then
    tls_args+=(--tls-ca "$tls_ca")
    if [[ -n "$tls_cert" ]]; then tls_args+=(--tls-cert "$tls_cert" --tls-key "$tls_key"); fi
fi
echo "== server: $server_desc"
echo "== ours: protocol ${OURS_PROTOCOL:-negotiated (v5 where the server has it)}; official: v4"
echo "== load average before: $(cut -d' ' -f1-3 /proc/loadavg); cores: $(nproc)"

# Syscalls per request, counted by perf on each client's measured phase,
# when perf can read the syscall tracepoint here.
count_args=()
if perf stat -e raw_syscalls:sys_enter true > /dev/null 2>&1; then
    count_args=(--count-syscalls)
else
    echo "== perf cannot count syscalls here: the syscalls column stays empty"
fi

failed=0
run_one() { # driver bin workload conc n key_base extra...
    local driver="$1" bin="$2" workload="$3" conc="$4" n="$5" base="$6"
    shift 6
    local line
    if line="$(timeout "$run_timeout" "$bin" --node "$node" --workload "$workload" \
        --concurrency "$conc" --requests "$n" --warmup "$warmup" --threads "$threads" \
        --key-base "$base" --json ${tls_args[@]+"${tls_args[@]}"} \
        ${count_args[@]+"${count_args[@]}"} "$@" 2> "$work/err")"; then
        # Tagged with its round, so that the summary pairs each run with the
        # other driver's run of the same round.
        line="${line%\}},\"round\":$r}"
        echo "$line" >> "$out"
        echo "  $line"
    else
        failed=1
        echo "  FAILED: $driver $workload c=$conc: $(tail -n 3 "$work/err" | tr '\n' ' ')"
        echo "{\"driver\":\"$driver\",\"workload\":\"$workload\",\"concurrency\":$conc,\"round\":$r,\"failed\":true}" >> "$out"
    fi
}

# Fresh keys per (run, driver): a base far from the previous ones.
base=$(( $(date +%s) << 24 ))
for c in $concurrencies; do
    n=$requests
    [[ "$c" == 1 ]] && n=$requests_c1
    for r in $(seq 1 "$rounds"); do
        echo "== concurrency $c, round $r/$rounds"
        ours_base=$base
        official_base=$(( base + (1 << 22) ))
        base=$(( base + (1 << 23) ))
        # Alternate who goes first (ABBA): a server that is still busy with
        # the previous run's work (memtable flushes, GC, compaction on a real
        # Cassandra) must not always slow down the same driver.
        if (( r % 2 == 1 )); then
            run_one ours "$ours_bin" insert "$c" "$n" "$ours_base"
            run_one official "$official_bin" insert "$c" "$n" "$official_base"
            run_one ours "$ours_bin" select "$c" "$n" "$ours_base" --no-populate
            run_one official "$official_bin" select "$c" "$n" "$official_base" --no-populate
        else
            run_one official "$official_bin" insert "$c" "$n" "$official_base"
            run_one ours "$ours_bin" insert "$c" "$n" "$ours_base"
            run_one official "$official_bin" select "$c" "$n" "$official_base" --no-populate
            run_one ours "$ours_bin" select "$c" "$n" "$ours_base" --no-populate
        fi
    done
done
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ -n "$testbed_pid" ]]; then
    # SIGINT: the testbed prints its per-node counters (accepted connections
    # by port kind and over TLS) before exiting.
    testbed_stop INT
    # The testbed's own count of what it accepted over the whole comparison
    # (both drivers): by port kind, and how many of those were TLS.
    echo "== testbed accepted (all runs, both drivers): $(grep -oE 'accepted_(regular|shard_aware|tls): [0-9]+' \
        "$work/testbed.out" | tr -d ':' | paste -sd ' ' - || true)"
fi
echo

python3 - "$out" "$server_desc" "$threads" <<'EOF'
import json, statistics, sys
path, server, threads = sys.argv[1], sys.argv[2], sys.argv[3]
runs = [json.loads(l) for l in open(path) if l.strip()]
fails = [r for r in runs if r.get("failed")]
runs = [r for r in runs if not r.get("failed")]
keys = sorted({(r["workload"], r["concurrency"]) for r in runs},
              key=lambda k: (k[0] != "insert", k[1]))
fields = [("ops_per_s", "ops/s", 0), ("p50_us", "p50 us", 1), ("p99_us", "p99 us", 1),
          ("p999_us", "p999 us", 1), ("cpu_sched_us_per_req", "cpu us/req", 2),
          ("allocs_per_req", "allocs/req", 3), ("syscalls_per_req", "syscalls/req", 2)]
def med(rs, f):
    v = [r[f] for r in rs if r.get(f) is not None]
    return statistics.median(v) if v else None
print(f"server: {server}; client tokio worker threads: {threads}; medians of "
      f"{max((sum(1 for r in runs if (r['workload'], r['concurrency'], r['driver']) == (w, c, 'ours')) for w, c in keys), default=0)} runs")
print("cpu us/req: client process CPU (all threads, from /proc/self/task/*/schedstat) / requests")
print("allocs/req: heap allocations of the client process in the measured phase / requests (incl. spawning the C tasks)")
print("syscalls/req: syscalls of the client process in the measured phase / requests (perf stat raw_syscalls:sys_enter)")
hdr = f"{'workload':<8} {'conc':>5} | " + " | ".join(
    f"{name + ' ours':>16} {'official':>9} {'o/off':>6}" for _, name, _ in fields)
print(hdr)
print("-" * len(hdr))
for w, c in keys:
    cells = []
    for f, name, prec in fields:
        o = med([r for r in runs if (r["workload"], r["concurrency"], r["driver"]) == (w, c, "ours")], f)
        x = med([r for r in runs if (r["workload"], r["concurrency"], r["driver"]) == (w, c, "official")], f)
        fmt = lambda v: "-" if v is None else f"{v:.{prec}f}"
        ratio = "-" if not o or not x else f"{o / x:.2f}"
        cells.append(f"{fmt(o):>16} {fmt(x):>9} {ratio:>6}")
    print(f"{w:<8} {c:>5} | " + " | ".join(cells))
print("ratio o/off = ours / official: above 1 is better for ops/s, below 1 is better for latency and CPU.")
tls = {r.get("tls") for r in runs}
print(f"TLS: {'yes' if tls == {True} else 'no' if tls <= {False, None} else 'mixed'}; "
      "connections open at the end of each run (remote port: count, runs):")
for d in ("ours", "official"):
    seen = {}
    for r in runs:
        if r["driver"] == d:
            c = r.get("connections_by_port")
            k = "?" if c is None else " ".join(f"{p}:{n}" for p, n in c.items())
            seen[k] = seen.get(k, 0) + 1
    print(f"  {d:<8} " + "; ".join(f"{k} ({n})" for k, n in sorted(seen.items(), key=lambda kv: -kv[1])))
# The same ratios per round (ours and the official driver ran one after the
# other in each round): their median and range show how far one run's
# figure can move on this machine, which the medians above do not.
print("per-round ratios ours / official (median [min-max] over the rounds):")
for w, c in keys:
    by_round = {}
    for r in runs:
        if (r["workload"], r["concurrency"]) == (w, c) and "round" in r:
            by_round.setdefault(r["round"], {})[r["driver"]] = r
    pairs = [(d["ours"], d["official"]) for d in by_round.values() if len(d) == 2]
    cells = []
    for f, name in (("cpu_sched_us_per_req", "cpu"), ("ops_per_s", "ops/s"), ("p99_us", "p99")):
        q = [o[f] / x[f] for o, x in pairs if o.get(f) and x.get(f)]
        if q:
            cells.append(f"{name} {statistics.median(q):.2f} [{min(q):.2f}-{max(q):.2f}]")
    print(f"  {w:<8} {c:>5}: " + "; ".join(cells))
if fails:
    print(f"FAILED runs: {len(fails)}: " + ", ".join(f"{r['driver']} {r['workload']} c={r['concurrency']}" for r in fails))
EOF
exit "$failed"
