#!/usr/bin/env bash
# Coverage-guided fuzzing (fuzz/, `cargo fuzz`) of the protocol decoders
# (target cql_frame) and of the driver's TLS record layer (tls_records):
# runs each fuzz target in turn for N seconds from the seed corpus in
# fuzz/corpus/<target>, prints how many inputs ran, and exits non-zero if
# any input made a check fail or ran over 10 s (the input is saved under
# fuzz/artifacts/<target>/; replay it with `cargo +nightly fuzz run
# --fuzz-dir fuzz <target> <file>`).
#
# usage: scripts/fuzz.sh [--seconds N]   (N seconds for EACH target, so the
#                                         run takes about 2 x N plus builds;
#                                         default 60)
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
# Builds into ${CARGO_TARGET_DIR:-target}/fuzz; inputs found while fuzzing
# go to ${CARGO_TARGET_DIR:-target}/fuzz/corpus/<target>, not into the
# committed seeds.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds=60
targets=(cql_frame tls_records)
while [[ $# -gt 0 ]]; do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "fuzz: unknown argument $1" >&2; exit 2 ;;
    esac
done
cd "$repo"
target_dir="${CARGO_TARGET_DIR:-target}"
case "$target_dir" in /*) ;; *) target_dir="$repo/$target_dir" ;; esac
target_dir="$target_dir/fuzz"
failed=0
for t in "${targets[@]}"; do
    work="$target_dir/corpus/$t"
    mkdir -p "$work"
    log="$target_dir/$t.log"
    start=$(date +%s)
    cargo +nightly fuzz build --fuzz-dir fuzz --target-dir "$target_dir" "$t"
    echo "fuzz: $t built in $(( $(date +%s) - start )) s; running for $seconds s" >&2
    set +e
    cargo +nightly fuzz run --fuzz-dir fuzz --target-dir "$target_dir" "$t" \
        "$work" "fuzz/corpus/$t" -- \
        -max_total_time="$seconds" -timeout=10 -print_final_stats=1 >"$log" 2>&1
    status=$?
    set -e
    grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|^stat::|ERROR|panicked|Test unit written|^SUMMARY' "$log" || true
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    if [[ -z "$runs" ]]; then
        runs=$(grep -oE '^#[0-9]+' "$log" | tail -n 1 | tr -d '#')
    fi
    if [[ $status -ne 0 ]]; then
        echo "fuzz: $t FAILED after ${runs:-?} executions (exit $status); full log: $log" >&2
        failed=1
    else
        echo "fuzz: $t ok: ${runs:-?} executions in $seconds s, no crash"
    fi
done
exit $failed
