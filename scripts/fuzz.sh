#!/usr/bin/env bash
# Coverage-guided fuzzing (fuzz/, `cargo fuzz`) of the protocol decoders
# (target cql_frame) and of the driver's TLS record layer (tls_records):
# runs each fuzz target in turn for N seconds from the seed corpus in
# fuzz/corpus/<target>, prints how many inputs ran, and exits non-zero if
# any input made a check fail or ran over 10 s (the input is saved under
# fuzz/artifacts/<target>/; replay it with `cargo +nightly fuzz run
# --fuzz-dir fuzz <target> <file>`).
#
# usage: scripts/fuzz.sh [--seconds N] [--sanitizer address|none]
#   --seconds N: for EACH target, so the run takes about 2 x N plus the
#                build (default 60)
#   --sanitizer: cargo fuzz's sanitizer (default address). The driver's and
#                the protocol crate's code forbids `unsafe`, so AddressSanitizer
#                watches only the dependencies' unsafe code, and building the
#                driver with it takes several minutes on 2 cores; CI's short
#                run uses none.
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
# Builds into ${CARGO_TARGET_DIR:-target}/fuzz; inputs found while fuzzing
# go to ${CARGO_TARGET_DIR:-target}/fuzz/corpus/<target>, not into the
# committed seeds.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds=60
sanitizer=address
targets=(cql_frame tls_records)
while [[ $# -gt 0 ]]; do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --sanitizer) sanitizer="$2"; shift 2 ;;
        -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
        *) echo "fuzz: unknown argument $1" >&2; exit 2 ;;
    esac
done
cd "$repo"
target_dir="${CARGO_TARGET_DIR:-target}"
case "$target_dir" in /*) ;; *) target_dir="$repo/$target_dir" ;; esac
target_dir="$target_dir/fuzz"
failed=0
# Every target in one build (they share the driver and its dependencies).
start=$(date +%s)
cargo +nightly fuzz build --fuzz-dir fuzz --target-dir "$target_dir" --sanitizer "$sanitizer"
echo "fuzz: ${targets[*]} built (sanitizer $sanitizer) in $(( $(date +%s) - start )) s" >&2
for t in "${targets[@]}"; do
    work="$target_dir/corpus/$t"
    mkdir -p "$work"
    log="$target_dir/$t.log"
    echo "fuzz: $t running for $seconds s" >&2
    set +e
    cargo +nightly fuzz run --fuzz-dir fuzz --target-dir "$target_dir" --sanitizer "$sanitizer" "$t" \
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
