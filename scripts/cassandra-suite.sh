#!/usr/bin/env bash
# Runs the real-server suite (tests/cassandra) against Apache Cassandra:
#   (a) 1 node:            cargo test --test cassandra (and session's cassandra_metadata,
#                          the quickstart and semantic_cache examples) with SCYLLA_URI, in
#                          protocol v5 (negotiated) and again pinned to v4
#   (b) 1 node with --auth: the auth/LZ4 tests           with SCYLLA_AUTH_URI
#   (c) 1 node with --tls-client-auth: the tls tests and the quick start over
#                          TLS (SCYLLA_TLS_CA, SCYLLA_TLS_CERT/KEY)
#   (d) --three-nodes:     3 nodes, the three_nodes tests with SCYLLA_THREE_NODES=1
# The tests are compiled before any JVM starts (they would compete for the
# cores), and Cassandra is always stopped on exit (trap).
set -euo pipefail
cd "$(dirname "$0")/.."

three=0
for arg in "$@"; do
    case "$arg" in
        --three-nodes) three=1 ;;
        -h | --help)
            echo "usage: scripts/cassandra-suite.sh [--three-nodes]"
            exit 0
            ;;
        *) echo "unknown argument: $arg" >&2; exit 2 ;;
    esac
done

C=scripts/cassandra.sh
log() { echo "cassandra-suite: $*" >&2; }
phase_start=$SECONDS
phase() { log "$1 took $((SECONDS - phase_start)) s"; phase_start=$SECONDS; }

if bash "$C" status >/dev/null 2>&1; then
    echo "a Cassandra started by scripts/cassandra.sh is already running; stop it first" >&2
    exit 1
fi
started=0
cleanup() {
    if ((started)); then
        bash "$C" stop || true
    fi
}
trap cleanup EXIT

# Starting Cassandra is the one step here that the machine, not the driver,
# can fail: a JVM on 2 shared cores that does not come up in time, or a
# joining node that gives up. `cassandra.sh start` prints the tail of the
# failed node's logs and stops what it started; one more attempt follows. A
# failure of the tests themselves is never retried.
start_cassandra() {
    if bash "$C" start "$@"; then
        return 0
    fi
    log "starting Cassandra ($*) failed (its logs are above); one more attempt in 5 s"
    sleep 5
    bash "$C" start "$@"
}

log "compiling the tests"
cargo test --test cassandra --test session --no-run
cargo build --example quickstart
cargo build --example semantic_cache
phase "compiling"

log "(a) 1 node"
started=1
start_cassandra 1
phase "(a) start"
# The real-server tests are #[ignore]d (a plain `cargo test` lists them as
# ignored); each phase runs its own with --ignored.
SCYLLA_URI="$(bash "$C" uri)" cargo test --test cassandra -- --ignored --test-threads 2 \
    --skip auth::good_bad_and_missing_credentials --skip auth::lz4_compression_is_negotiated_and_used \
    --skip three_nodes:: --skip tls::
SCYLLA_URI="$(bash "$C" uri)" cargo test --test session -- --include-ignored cassandra_metadata::
log "(a) again, pinned to protocol v4 (the run above negotiated v5)"
SCYLLA_PROTOCOL_VERSION=4 SCYLLA_URI="$(bash "$C" uri)" cargo test --test cassandra -- --ignored \
    --test-threads 2 \
    --skip auth::good_bad_and_missing_credentials --skip auth::lz4_compression_is_negotiated_and_used \
    --skip three_nodes:: --skip tls::
log "(a) the README's quick start against the real server"
SCYLLA_URI="$(bash "$C" uri)" cargo run --example quickstart
log "(a) the semantic cache example (vector search; fails below its hit-rate floor or on a false hit)"
SCYLLA_URI="$(bash "$C" uri)" timeout 300 cargo run --example semantic_cache
phase "(a) tests"
bash "$C" stop
phase "(a) stop"

log "(b) 1 node with --auth"
start_cassandra 1 --auth
phase "(b) start"
SCYLLA_AUTH_URI="$(bash "$C" uri)" cargo test --test cassandra -- --ignored \
    auth::good_bad_and_missing_credentials auth::lz4_compression_is_negotiated_and_used
phase "(b) tests"
bash "$C" stop
phase "(b) stop"

log "(c) 1 node with TLS and client certificates"
start_cassandra 1 --tls-client-auth
phase "(c) start"
tls_dir="$(bash "$C" tls-dir)"
SCYLLA_URI="$(bash "$C" uri)" SCYLLA_TLS_CA="$tls_dir/ca.pem" SCYLLA_TLS_CLIENT_AUTH=1 \
    SCYLLA_TLS_CERT="$tls_dir/client.pem" SCYLLA_TLS_KEY="$tls_dir/client.key" \
    cargo test --test cassandra -- --ignored tls::
log "(c) the quick start over TLS with a client certificate"
SCYLLA_URI="$(bash "$C" uri)" SCYLLA_TLS_CA="$tls_dir/ca.pem" \
    SCYLLA_TLS_CERT="$tls_dir/client.pem" SCYLLA_TLS_KEY="$tls_dir/client.key" \
    cargo run --example quickstart
phase "(c) tests"
bash "$C" stop
phase "(c) stop"

if ((three)); then
    log "(d) 3 nodes"
    start_cassandra 3
    phase "(d) start"
    SCYLLA_URI="$(bash "$C" uri)" SCYLLA_THREE_NODES=1 \
        cargo test --test cassandra three_nodes:: -- --ignored --test-threads 1 --nocapture
    phase "(d) tests"
    bash "$C" stop
    phase "(d) stop"
fi
started=0
log "all phases passed"
