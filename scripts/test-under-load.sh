#!/usr/bin/env bash
# Runs the README's test command (`cargo test --workspace`) N times while a
# compiler-like load keeps both cores busy: a release build of the whole
# workspace into another target directory, cleaned and started again each
# time it finishes (many short rustc processes and their memory traffic,
# the load under which timing-based tests used to fail; busy loops or
# stress-ng's CPU stressors did not reproduce those failures). Prints the
# load average before and after each run and a summary line.
#
# usage: scripts/test-under-load.sh [--runs N] [--no-load]
#   LOAD_TARGET_DIR (default: a temporary directory) is where the load builds.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
runs=3
load=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --runs) runs="$2"; shift 2 ;;
        --no-load) load=0; shift ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "test-under-load: unknown argument $1" >&2; exit 2 ;;
    esac
done
cd "$repo"

echo "== building the tests first"
cargo test --workspace --no-run --quiet

load_dir="${LOAD_TARGET_DIR:-$(mktemp -d)}"
load_pid=""
stop_load() {
    if [[ -n "$load_pid" ]]; then
        # The loop and the cargo and rustc processes under it.
        pkill -TERM -P "$load_pid" 2>/dev/null || true
        kill "$load_pid" 2>/dev/null || true
        wait "$load_pid" 2>/dev/null || true
        # cargo's and rustc's processes name the directory on their command
        # line; they may still write into it for a moment after the signal
        # (a removal racing them failed the script after passing runs).
        pkill -f "$load_dir" 2>/dev/null || true
        for _ in $(seq 1 100); do
            pgrep -f "$load_dir" >/dev/null || break
            sleep 0.1
        done
    fi
    if [[ -z "${LOAD_TARGET_DIR:-}" ]]; then
        rm -rf "$load_dir" 2>/dev/null || echo "test-under-load: could not remove $load_dir" >&2
    fi
}
trap stop_load EXIT
if [[ "$load" == 1 ]]; then
    (
        while :; do
            cargo clean --quiet --target-dir "$load_dir" 2>/dev/null || true
            cargo build --quiet --release --workspace --all-targets --target-dir "$load_dir" \
                >/dev/null 2>&1 || true
        done
    ) &
    load_pid=$!
    echo "== load: release builds of the workspace in $load_dir (pid $load_pid); 30 s to ramp up"
    sleep 30
fi

passed=0
failed=0
for i in $(seq 1 "$runs"); do
    echo "== run $i of $runs: load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
    log="${TMPDIR:-/tmp}/test-under-load-run-$i.log"
    rc=0
    cargo test --workspace --no-fail-fast >"$log" 2>&1 || rc=$?
    grep -E '^test result:|^test .* FAILED$|panicked at|^error' "$log" || true
    # cargo's exit status decides: a test that fails and a target that does
    # not build both make it non-zero.
    if [[ "$rc" != 0 ]]; then
        failed=$((failed + 1))
        echo "== run $i FAILED (cargo exited $rc; log: $log)"
    else
        passed=$((passed + 1))
    fi
    echo "== run $i done: load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
done
echo "test-under-load: $passed passed, $failed failed (runs of cargo test --workspace$([[ "$load" == 1 ]] && echo ' under a parallel release build'))"
[[ "$failed" == 0 ]]
