#!/usr/bin/env bash
# The cost gate: instructions per request of this tree's driver, counted by
# valgrind's callgrind (deterministic where timings on shared machines are
# not), against the committed baseline benches/baseline/instructions.tsv;
# fails when a cell costs more than 3 % over its baseline.
#
# Cells: INSERT and SELECT (prepared, typed rows), at concurrency 1 and 64,
# over plaintext (plain-*), over TLS with the driver's record layer
# (tls-*: RecordLayer::Driver, the opt-in) and over TLS with rustls' record
# layer (rustls-*: the default), against one test cluster node with 2
# shards (protocol v5, negotiated). Each cell is the marginal cost of a request:
# (instructions(3N) - instructions(N)) / 2N, so start-up, connection set-up
# and preparation drop out. At concurrency 64 how many requests share a
# write or a read varies with timing, and fewer sharing costs more (over TLS,
# where a record's cost is shared, one run of an unchanged tree came out
# 3.9 % above another): the baseline there is the least of 3 measurements.
# The gate measures each cell once; a cell over the limit is measured again
# (at concurrency 64 the least of 3 more) and fails only if it is over again.
#
# The baseline moves only in a commit that says why: run with --update and
# commit benches/baseline/instructions.tsv with the reason. With --only
# PREFIX only the cells whose names start with PREFIX (plain, tls, rustls)
# are measured, and --update replaces (or adds) just their rows.
#
# Allocations per request are gated by tests/session_allocations.rs (cargo
# test): 0 per request in steady state, plaintext, LZ4 and TLS with the
# driver's record layer, v4 and v5; rustls' record layer is bounded there.
#
# The test cluster is started and stopped by scripts/lib/testbed.sh, the
# count and the marginal cost come from scripts/lib/callgrind.sh.
#
# usage: scripts/cost-gate.sh [--update] [--only PREFIX] [--no-build] [--threshold PCT]
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/release-build.sh
source "$repo/scripts/lib/release-build.sh"
# shellcheck source=lib/testbed.sh
source "$repo/scripts/lib/testbed.sh"
# shellcheck source=lib/callgrind.sh
source "$repo/scripts/lib/callgrind.sh"
baseline="$repo/benches/baseline/instructions.tsv"
update=0
build=1
threshold=3
only=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --update) update=1; shift ;;
        --only) only="$2"; shift 2 ;;
        --no-build) build=0; shift ;;
        --threshold) threshold="$2"; shift 2 ;;
        -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
        *) echo "cost-gate: unknown argument $1" >&2; exit 2 ;;
    esac
done
command -v valgrind >/dev/null || { echo "cost-gate: valgrind is not installed" >&2; exit 2; }

target="${CARGO_TARGET_DIR:-$repo/target}"
if [[ "$build" == 1 ]]; then
    echo "== building (release): the comparison client and the testbed"
    # The comparison client shares this workspace's target directory, so
    # the release dependencies built for storm_reconnect are reused.
    (cd "$repo/comparisons/ours" && CARGO_TARGET_DIR="$target" cargo build --release --quiet)
    release_build
fi
client="$target/release/compare-ours"

work="$(mktemp -d)"
cleanup() {
    testbed_stop
    rm -rf "$work"
}
trap cleanup EXIT

# Two testbeds, with their output in $work/plain.out and $work/tls.out.
testbed_start "$target/release/testbed" "$work/plain.out" --nodes 1 --shards 2 --duration-secs 3600 || exit 1
plain="$testbed_ip"
mkdir -p "$work/tls"
testbed_start "$target/release/testbed" "$work/tls.out" --nodes 1 --shards 2 --duration-secs 3600 \
    --tls-dir "$work/tls" || exit 1
testbed_wait_tls || exit 1
tls_addr="$testbed_tls_addr"
tls_args=(--tls-ca "$work/tls/ca.pem")
# Who seals and opens the TLS records (comparisons/ours reads it): the
# tls-* cells take the driver's record layer, the rustls-* cells rustls'.
tls_records=rustls

key_base=77000000
populate() { # address [tls args...]
    local addr="$1"
    shift
    OURS_TLS_RECORDS="$tls_records" "$client" --node "$addr" "$@" --workload insert --concurrency 64 \
        --requests 33000 --warmup 0 --key-base "$key_base" --json > /dev/null 2>&1
}
populate "$plain"
populate "$tls_addr" "${tls_args[@]}"

count() { # requests address workload concurrency [tls args...] -> instructions
    local n="$1" addr="$2" w="$3" c="$4"
    shift 4
    local extra=()
    [[ "$w" == select ]] && extra=(--no-populate --key-base "$key_base")
    OURS_TLS_RECORDS="$tls_records" callgrind_count \
        "$client" --node "$addr" "$@" --workload "$w" \
        --concurrency "$c" --requests "$n" --warmup 2000 "${extra[@]}" --json
}

marginal() { # address workload concurrency [tls args...] -> instructions per request
    local addr="$1" w="$2" c="$3"
    shift 3
    local n=5000 repeat=1
    if [[ "$c" != 1 ]]; then n=10000; repeat="$repeat_c64"; fi
    local runs=() run
    for _ in $(seq "$repeat"); do
        run="$(callgrind_marginal "$n" count "$addr" "$w" "$c" "$@")" || exit 1
        runs+=("$run")
    done
    printf '%s\n' "${runs[@]}" | sort -n | head -1
}

measure_cell() { # cell name -> instructions per request
    local transport w c
    IFS=- read -r transport w c <<< "$1"
    c="${c#c}"
    case "$transport" in
        plain) marginal "$plain" "$w" "$c" ;;
        tls) tls_records=driver marginal "$tls_addr" "$w" "$c" "${tls_args[@]}" ;;
        rustls) tls_records=rustls marginal "$tls_addr" "$w" "$c" "${tls_args[@]}" ;;
        *) echo "cost-gate: unknown cell $1" >&2; exit 2 ;;
    esac
}

# Measurements per concurrency-64 cell: the baseline takes the least of 3;
# the gate measures once and takes 3 more only for a cell over the limit.
repeat_c64=1
[[ "$update" == 1 ]] && repeat_c64=3

measured="$work/measured.tsv"
printf 'cell\tinstructions_per_request\n' > "$measured"
for transport in plain tls rustls; do
    for w in insert select; do
        for c in 1 64; do
            cell="$transport-$w-c$c"
            [[ "$cell" == "$only"* ]] || continue
            v="$(measure_cell "$cell")"
            printf '%s\t%s\n' "$cell" "$v" >> "$measured"
            printf '%-20s %8s\n' "$cell" "$v"
        done
    done
done

stamp="$(date -u +%Y-%m-%d), commit $(git -C "$repo" rev-parse --short HEAD), load $(cut -d' ' -f1 /proc/loadavg)"
if [[ "$update" == 1 && -n "$only" && -f "$baseline" ]]; then
    # Only the measured rows move: replaced in place, or added at the end,
    # under a comment that says when they were measured.
    merged="$work/merged.tsv"
    awk -F'\t' -v m="$measured" -v note="# $only* rows: scripts/cost-gate.sh --only $only, $stamp." '
        BEGIN { while ((getline line < m) > 0) { split(line, f, "\t"); if (f[1] != "cell") { v[f[1]] = f[2]; order[++n] = f[1] } } }
        $1 == "cell" { print note; print; next }
        ($1 in v) { print $1 "\t" v[$1]; done[$1] = 1; next }
        { print }
        END { for (i = 1; i <= n; i++) if (!(order[i] in done)) print order[i] "\t" v[order[i]] }
    ' "$baseline" > "$merged"
    mv "$merged" "$baseline"
    echo "cost-gate: the $only* rows of ${baseline#"$repo"/} updated"
    exit 0
fi
if [[ "$update" == 1 ]]; then
    mkdir -p "$(dirname "$baseline")"
    {
        echo "# Instructions per request (scripts/cost-gate.sh), $stamp."
        echo "# Moves only in a commit that says why."
        cat "$measured"
    } > "$baseline"
    echo "cost-gate: baseline written to ${baseline#"$repo"/}"
    exit 0
fi

[[ -f "$baseline" ]] || { echo "cost-gate: no baseline (${baseline#"$repo"/}); run with --update" >&2; exit 2; }
failed=0
echo "== against ${baseline#"$repo"/} (limit +$threshold %)"
while IFS=$'\t' read -r cell value <&3; do
    [[ "$cell" == cell || "$cell" == \#* || -z "$cell" ]] && continue
    base="$(awk -F'\t' -v c="$cell" '$1 == c { print $2 }' "$baseline")"
    if [[ -z "$base" ]]; then
        echo "cost-gate: $cell has no baseline" >&2
        failed=1
        continue
    fi
    over() { (( $(echo "$1 / $base > 1 + $threshold / 100" | bc -l) )); }
    verdict=ok
    if over "$value"; then
        again="$(repeat_c64=3 measure_cell "$cell")"
        if over "$again"; then
            verdict="FAIL (again: $again)"
            failed=1
        else
            verdict="ok (over once; again: $again)"
        fi
    fi
    ratio="$(echo "$value / $base" | bc -l)"
    printf '%-20s %8s %8s %7.3f %s\n' "$cell" "$value" "$base" "$ratio" "$verdict"
done 3< "$measured"
if [[ "$failed" == 1 ]]; then
    echo "cost-gate: a request costs more than $threshold % over the baseline (see above)" >&2
    exit 1
fi
echo "cost-gate: passed"
