#!/usr/bin/env bash
# Faithfulness check of the test cluster: the PyPI Python driver for ScyllaDB
# (`scylla-driver`) connects to the `testbed` binary, discovers every node,
# opens per-shard connections through the shard-aware port and runs prepared
# statements; see python_driver_check.py for the assertions. Runs: plain,
# TLS (plus this driver's prepared statements over TLS), and tablets (testbed
# --tablets 16), with the driver pinned to protocol v4; then the driver
# negotiating by itself against a v4-only testbed (--protocol-version 4, as
# ScyllaDB: it must step down to v4 through the testbed's refusals) and
# against the default v5 testbed (it must settle on v5).
#
# Creates .venv-testbed/ (gitignored) on first use. Bounded in time: the
# testbed stops by itself (--duration-secs) and is killed on exit anyway
# (scripts/lib/testbed.sh starts and stops it).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/release-build.sh
source scripts/lib/release-build.sh
# shellcheck source=lib/testbed.sh
source scripts/lib/testbed.sh
testbed_who="python_driver_check: FAIL"

DRIVER_VERSION="3.29.3"
NODES=3
SHARDS=4
BLOCK="${TESTBED_BLOCK:-77.$((RANDOM % 200 + 1))}"
HOST="127.${BLOCK}.1"
PORT=9042
VENV=.venv-testbed

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import cassandra, lz4" 2>/dev/null; then
    echo "== python_driver_check: installing scylla-driver==$DRIVER_VERSION into $VENV"
    python3 -m venv "$VENV"
    SCYLLA_DRIVER_NO_EXTENSIONS=1 CASS_DRIVER_NO_CYTHON=1 timeout 600 \
        "$VENV/bin/pip" install -q --disable-pip-version-check "scylla-driver==$DRIVER_VERSION" "lz4==4.4.5"
fi

echo "== python_driver_check: building the testbed"
release_build

LOG=$(mktemp)
cleanup() {
    testbed_stop
    rm -f "$LOG"
}
trap cleanup EXIT

TARGET="${CARGO_TARGET_DIR:-target}"
run_check() {  # run_check LABEL PORT [TLS_CA]
testbed_start "$TARGET/release/testbed" "$LOG" --nodes "$NODES" --shards "$SHARDS" --block "$BLOCK" \
    --port "$PORT" --duration-secs 150 "${TB_ARGS[@]}" || exit 1
# Wait (bounded) until every node has printed its line, i.e. is listening.
testbed_wait_line "^node $((NODES - 1)): " "node $((NODES - 1)) line" || exit 1

echo "== python_driver_check: running the driver against $HOST:$2 ($1)"
if ! timeout 120 "$VENV/bin/python" scripts/python_driver_check.py "$HOST" "$2" "$NODES" "$SHARDS" ${3:+"$3"}; then
    echo "python_driver_check: FAIL (testbed output follows)"
    cat "$LOG"
    exit 1
fi
if [ -n "${3:-}" ]; then
    # This driver too, over TLS against the same cluster: prepared INSERTs
    # then SELECTs checked row by row, by the throughput tool (its source is
    # in benches/tools/; CI also runs the quick start over TLS against the
    # real Cassandra).
    echo "== python_driver_check: this driver's prepared INSERT/SELECT over TLS against $HOST:$2"
    local out
    if ! out=$(timeout 300 cargo run -q --example throughput -- --node "$HOST:$2" --tls --tls-ca "$3" \
        --workload select --requests 2000 --warmup 0 --concurrency 16 --coalescing adaptive --json) \
        || [[ "$out" != *'"errors":0'* ]]; then
        echo "python_driver_check: FAIL: this driver over TLS: $out"
        exit 1
    fi
    echo "  $out"
fi
testbed_stop
}

TB_ARGS=()
run_check plain "$PORT"
# TLS: the testbed writes its CA; the driver connects on the TLS port (9142)
# and opens its shard-aware connections on SCYLLA_SHARD_AWARE_PORT_SSL.
TLS_DIR=$(mktemp -d)
TB_ARGS=(--tls-dir "$TLS_DIR")
BLOCK="78.$((RANDOM % 200 + 1))"   # fresh addresses: no TIME_WAIT from the first run
HOST="127.${BLOCK}.1"
run_check TLS 9142 "$TLS_DIR/ca.pem"
rm -rf "$TLS_DIR"
# Tablets: new NetworkTopologyStrategy keyspaces use 16 tablets per table;
# the driver (it speaks TABLETS_ROUTING_V1) learns them from the payloads.
TB_ARGS=(--tablets 16)
BLOCK="79.$((RANDOM % 200 + 1))"
HOST="127.${BLOCK}.1"
export PYCHECK_TABLETS=16
run_check tablets "$PORT"
unset PYCHECK_TABLETS
# Negotiation: the driver offers its newest version and steps down on each
# "Invalid or unsupported protocol version" refusal.
export PYCHECK_PROTOCOL=auto
TB_ARGS=(--protocol-version 4)
BLOCK="80.$((RANDOM % 200 + 1))"
HOST="127.${BLOCK}.1"
export PYCHECK_EXPECT_PROTOCOL=4
run_check "v4-only, negotiated" "$PORT"
# Against the default (v5) testbed the driver settles on v5: LZ4 segments
# on every connection after the two refusals of its DSE versions.
TB_ARGS=()
BLOCK="81.$((RANDOM % 200 + 1))"
HOST="127.${BLOCK}.1"
export PYCHECK_EXPECT_PROTOCOL=5
run_check "v5, negotiated" "$PORT"
