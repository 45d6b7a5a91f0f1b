#!/usr/bin/env bash
# Runs a real Apache Cassandra (1 or 3 nodes on 127.0.0.1-3) for the
# project's integration tests, from the server jars on Maven Central.
# Needs: java 17, mvn, python3. No docker, no cqlsh, no tarball.
# See scripts/README.md for usage and measured timings.
set -euo pipefail

usage() {
    cat <<'EOF'
usage: scripts/cassandra.sh COMMAND [options]

  start [N] [--auth] [--tls] [--tls-client-auth] [--keep-data] [--heap SIZE]
            fetch the jars (first time), start N nodes (1 or 3; default 1) and
            wait until CQL answers on every node (3 nodes: also ring health).
            --auth       PasswordAuthenticator; superuser cassandra/cassandra
            --tls        client encryption on the native port (TLS only:
                         optional false); a CA, node keystore and truststore
                         made with keytool in $CASSANDRA_DIR/tls, the CA as
                         tls/ca.pem (see 'tls-dir')
            --tls-client-auth  --tls, and clients must present a certificate
                         signed by that CA (tls/client.pem, tls/client.key)
            --keep-data  reuse data dirs from the previous run (default: wipe)
            --heap SIZE  JVM heap per node (default 1G for 1 node, 512M for 3)
  stop      stop every node this script started (SIGTERM, then SIGKILL)
  status    show each node: process, CQL; exit 0 only if all are up
  uri       print the value for SCYLLA_URI (e.g. 127.0.0.1:9042)
  tls-dir   print the directory holding ca.pem, client.pem, client.key
  health    check the running cluster's ring (peers, tokens, schema)
  cql CQL   run one statement on node 1 and print the rows
  fetch     only download the jars into the cache
  nodetool ARGS...   run nodetool against node 1
  stop-node K [--kill]  stop only node K (SIGTERM and wait; --kill: SIGKILL,
            as a crash), keeping its data, for failover tests
  start-node K  start node K again on its data and wait until CQL answers

Environment: CASSANDRA_DIR (default <repo>/.cassandra),
  CASSANDRA_VERSION (default 5.0.6), CASSANDRA_START_TIMEOUT (seconds per
  node, default 180), CASSANDRA_FETCH_TIMEOUT (seconds, default 900).
EOF
}

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HERE="$ROOT/scripts/cassandra"
CDIR="${CASSANDRA_DIR:-$ROOT/.cassandra}"
VERSION="${CASSANDRA_VERSION:-5.0.6}"
START_TIMEOUT="${CASSANDRA_START_TIMEOUT:-180}"
FETCH_TIMEOUT="${CASSANDRA_FETCH_TIMEOUT:-900}"
STOP_TIMEOUT=60
HEALTH_TIMEOUT=120
# RING_DELAY for nodes that join an existing ring. With 1000 ms a joining node
# on 2 busy cores sometimes had not yet gossiped with the seed and died with
# "Unable to contact any seeds"; 3000 ms costs about 4 s per joining node.
JOIN_RING_DELAY_MS="${CASSANDRA_JOIN_RING_DELAY_MS:-3000}"
JOIN_ATTEMPTS=3
PROBE="$HERE/cql_probe.py"
CQL_PORT=9042
LIB="$CDIR/lib"

log() { echo "cassandra.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

node_addr() { echo "127.0.0.$1"; }
node_dir() { echo "$CDIR/node$1"; }
jmx_port() { echo $((7099 + 100 * $1)); }

# Flags of an options file: one per line, '#' starts a comment. A line such as
# "--add-opens a/b=ALL-UNNAMED" becomes the single argument "--add-opens=a/b=...".
read_options() {
    sed -e 's/#.*$//' -e 's/[[:space:]]*$//' -e '/^[[:space:]]*$/d' \
        -e 's/^\(--[a-z-]*\)[[:space:]][[:space:]]*/\1=/' "$1"
}

need() {
    command -v "$1" >/dev/null 2>&1 || die "'$1' is not installed ($2)"
}

check_tools() {
    need java "install OpenJDK 17"
    need python3 "needed for the CQL readiness probe"
    local v
    v="$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)"
    if [[ "$v" != "17" ]]; then
        log "warning: java major version is '${v:-unknown}'; Cassandra 5.0 is tested here with 17"
    fi
}

# Pid of node K if its process is alive and is a Cassandra daemon, else empty.
live_pid() {
    local f pid
    f="$(node_dir "$1")/pid"
    [[ -f "$f" ]] || return 0
    pid="$(cat "$f" 2>/dev/null || true)"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 0
    if [[ -r "/proc/$pid/cmdline" ]]; then
        grep -qa CassandraDaemon "/proc/$pid/cmdline" 2>/dev/null || return 0
    else
        kill -0 "$pid" 2>/dev/null || return 0
    fi
    echo "$pid"
}

state_get() {  # state_get KEY DEFAULT
    local v=""
    [[ -f "$CDIR/state" ]] && v="$(sed -n "s/^$1=//p" "$CDIR/state" | tail -n1)"
    echo "${v:-$2}"
}

TLS_PASS=changeit

# make_tls DIR: a CA, a node key pair (SANs 127.0.0.1-3, localhost) and a
# client key pair signed by it, with the JDK's keytool: PKCS12 keystore and
# truststore for the server, PEM files for clients. keytool cannot write a
# private key as PEM, so openssl converts the client's (PKCS#8).
make_tls() {
    local dir=$1 kt=(keytool -storetype PKCS12 -storepass "$TLS_PASS" -keypass "$TLS_PASS")
    local san="san=ip:127.0.0.1,ip:127.0.0.2,ip:127.0.0.3,dns:localhost"
    rm -rf "$dir" && mkdir -p "$dir"
    "${kt[@]}" -genkeypair -alias ca -keyalg RSA -keysize 2048 -validity 30 \
        -dname "CN=scripts-cassandra test CA" -ext bc:c -keystore "$dir/ca.p12" 2>/dev/null
    "${kt[@]}" -exportcert -rfc -alias ca -keystore "$dir/ca.p12" -file "$dir/ca.pem" 2>/dev/null
    local who
    for who in node client; do
        "${kt[@]}" -genkeypair -alias "$who" -keyalg RSA -keysize 2048 -validity 30 \
            -dname "CN=scripts-cassandra $who" -keystore "$dir/$who.p12" 2>/dev/null
        "${kt[@]}" -certreq -alias "$who" -keystore "$dir/$who.p12" -file "$dir/$who.csr" 2>/dev/null
        local ext=(-ext "$san")
        [[ "$who" == client ]] && ext=(-ext eku=clientAuth)
        "${kt[@]}" -gencert -alias ca -keystore "$dir/ca.p12" -rfc -validity 30 "${ext[@]}" \
            -infile "$dir/$who.csr" -outfile "$dir/$who.pem" 2>/dev/null
        "${kt[@]}" -importcert -noprompt -alias ca -file "$dir/ca.pem" -keystore "$dir/$who.p12" 2>/dev/null
        "${kt[@]}" -importcert -noprompt -alias "$who" -file "$dir/$who.pem" -keystore "$dir/$who.p12" 2>/dev/null
    done
    "${kt[@]}" -importcert -noprompt -alias ca -file "$dir/ca.pem" -keystore "$dir/truststore.p12" 2>/dev/null
    openssl pkcs12 -in "$dir/client.p12" -nocerts -nodes -passin "pass:$TLS_PASS" 2>/dev/null |
        openssl pkey -out "$dir/client.key"
    [[ -s "$dir/ca.pem" && -s "$dir/node.p12" && -s "$dir/client.key" ]] || die "making TLS certificates in $dir failed"
    log "TLS: CA, node and client certificates in $dir (ca.pem, client.pem, client.key)"
}

# The probe speaks TLS to a node started with --tls, and plaintext otherwise
# (`start` calls this again after writing the new state: the state read
# before it may be a previous TLS run's).
export_probe_tls() {
    if [[ "$(state_get TLS 0)" != 0 ]]; then
        export CQL_PROBE_TLS_CA="$CDIR/tls/ca.pem"
        export CQL_PROBE_TLS_CERT="$CDIR/tls/client.pem" CQL_PROBE_TLS_KEY="$CDIR/tls/client.key"
    else
        unset CQL_PROBE_TLS_CA CQL_PROBE_TLS_CERT CQL_PROBE_TLS_KEY
    fi
}

probe_auth_args() {
    if [[ "$(state_get AUTH 0)" == 1 ]]; then
        echo "--user cassandra --password cassandra"
    fi
}

fetch() {
    if [[ -f "$LIB/.complete-$VERSION" ]]; then
        return 0
    fi
    need mvn "Maven fetches the Cassandra jars from Maven Central"
    log "fetching org.apache.cassandra:cassandra-all:$VERSION and its dependencies with Maven"
    log "(about 66 MB; a first run with an empty ~/.m2 took about 1 minute here)"
    local fetchdir="$CDIR/fetch"
    rm -rf "$fetchdir" "$LIB"
    mkdir -p "$fetchdir"
    cat >"$fetchdir/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by scripts/cassandra.sh: only used to download the server jars. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.scripts</groupId>
  <artifactId>cassandra-server-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.cassandra</groupId>
      <artifactId>cassandra-all</artifactId>
      <version>$VERSION</version>
    </dependency>
  </dependencies>
</project>
EOF
    local t0=$SECONDS
    if ! (cd "$fetchdir" && timeout "$FETCH_TIMEOUT" mvn -q -B \
        dependency:copy-dependencies -DincludeScope=runtime \
        -DoutputDirectory="$fetchdir/lib" >"$fetchdir/mvn.log" 2>&1); then
        tail -n 30 "$fetchdir/mvn.log" >&2 || true
        die "Maven could not fetch the jars (log: $fetchdir/mvn.log)"
    fi
    ls "$fetchdir/lib"/cassandra-all-*.jar >/dev/null 2>&1 ||
        die "Maven finished but cassandra-all is missing in $fetchdir/lib"
    mv "$fetchdir/lib" "$LIB"
    touch "$LIB/.complete-$VERSION"
    log "fetched $(ls "$LIB" | wc -l) jars in $((SECONDS - t0)) s"
}

write_logback() {
    cat >"$1" <<'EOF'
<!-- Generated by scripts/cassandra.sh: INFO and above to logs/system.log. -->
<configuration scan="false">
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>${cassandra.logdir}/system.log</file>
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
  <logger name="org.apache.cassandra" level="INFO"/>
</configuration>
EOF
}

write_yaml() {  # write_yaml K AUTH TLS (0, 1, or 2 = with client auth)
    local k=$1 auth=$2 tls=${3:-0} d addr
    d="$(node_dir "$k")"
    addr="$(node_addr "$k")"
    local authn=AllowAllAuthenticator authz=AllowAllAuthorizer
    if [[ "$auth" == 1 ]]; then
        authn=PasswordAuthenticator
        authz=CassandraAuthorizer
    fi
    cat >"$d/conf/cassandra.yaml" <<EOF
# Generated by scripts/cassandra.sh for node $k.
cluster_name: scripts-cassandra
num_tokens: 16
allocate_tokens_for_local_replication_factor: 1
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
data_file_directories:
  - $d/data
commitlog_directory: $d/commitlog
saved_caches_directory: $d/saved_caches
hints_directory: $d/hints
cdc_raw_directory: $d/cdc_raw
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "127.0.0.1:7000"
listen_address: $addr
rpc_address: $addr
storage_port: 7000
native_transport_port: $CQL_PORT
endpoint_snitch: SimpleSnitch
commitlog_sync: periodic
commitlog_sync_period: 10000ms
authenticator:
  class_name: org.apache.cassandra.auth.$authn
authorizer:
  class_name: org.apache.cassandra.auth.$authz
role_manager:
  class_name: org.apache.cassandra.auth.CassandraRoleManager
# Off by default in 5.0; the schema metadata tests read a view.
materialized_views_enabled: true
EOF
    if [[ "$tls" != 0 ]]; then
        local client_auth=false
        [[ "$tls" == 2 ]] && client_auth=true
        # Cassandra 5.0 serves TLS on native_transport_port itself when
        # optional is false (native_transport_port_ssl is deprecated).
        cat >>"$d/conf/cassandra.yaml" <<EOF
client_encryption_options:
  enabled: true
  optional: false
  keystore: $CDIR/tls/node.p12
  keystore_password: $TLS_PASS
  store_type: PKCS12
  require_client_auth: $client_auth
  truststore: $CDIR/tls/truststore.p12
  truststore_password: $TLS_PASS
EOF
    fi
}

start_node() {  # start_node K HEAP
    local k=$1 heap=$2 d addr jamm ring_delay=1000
    ((k == 1)) || ring_delay=$JOIN_RING_DELAY_MS
    d="$(node_dir "$k")"
    addr="$(node_addr "$k")"
    jamm="$(ls "$LIB"/jamm-*.jar 2>/dev/null | head -n1)"
    [[ -n "$jamm" ]] || die "jamm agent jar missing in $LIB"
    local -a flags
    mapfile -t flags < <(read_options "$HERE/jvm17-server.options")
    flags+=(
        "-Xms$heap" "-Xmx$heap"
        "-javaagent:$jamm"
        "-Dcassandra.config=file://$d/conf/cassandra.yaml"
        "-Dlogback.configurationFile=file://$d/conf/logback.xml"
        "-Dcassandra-foreground=yes"
        "-Dcassandra.storagedir=$d"
        "-Dcassandra.logdir=$d/logs"
        "-Dcassandra.jmx.local.port=$(jmx_port "$k")"
        "-Dcassandra.ring_delay_ms=$ring_delay"
        "-Dcassandra.skip_wait_for_gossip_to_settle=0"
        "-Dcassandra.superuser_setup_delay_ms=0"
        "-XX:HeapDumpPath=$d/logs"
        -cp "$LIB/*"
        org.apache.cassandra.service.CassandraDaemon
    )
    # setsid + no inherited stdio: the node outlives this script and does not
    # hold a CI job's output pipes open.
    setsid java "${flags[@]}" </dev/null >"$d/logs/stdout.log" 2>&1 &
    local pid=$!
    echo "$pid" >"$d/pid"
    wait_exec "$pid"
    log "node $k ($addr): started, pid $pid, heap $heap, JMX $(jmx_port "$k"), logs $d/logs"
}

# Waits (at most 10 s) until background job PID has become the Cassandra
# daemon or has ended. Until it execs, the job is a fork of this script whose
# command line names no CassandraDaemon, so live_pid would call a node that is
# only being launched dead. Beside three busy loops, 3 launches in 300 were
# still forks at the first check (2026-11-30); in CI that failed `start-node`
# on a node that came up a moment later.
wait_exec() {
    local pid=$1 i
    [[ -d /proc/self ]] || return 0
    for ((i = 0; i < 200; i++)); do
        [[ -r "/proc/$pid/cmdline" ]] || return 0
        grep -qa CassandraDaemon "/proc/$pid/cmdline" 2>/dev/null && return 0
        # A job that ended is a zombie (empty command line) until bash reaps it.
        [[ "$(proc_state "$pid")" == Z ]] && return 0
        sleep 0.05
    done
}

# The state letter of process PID (R, S, D, Z, ...), or empty if it is gone.
proc_state() {
    local stat
    stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 0
    # The command name in parentheses may hold spaces: the state follows the last ')'.
    stat="${stat##*) }"
    echo "${stat%% *}"
}

show_logs() {
    local d
    d="$(node_dir "$1")"
    for f in "$d/logs/system.log" "$d/logs/stdout.log"; do
        if [[ -s "$f" ]]; then
            echo "---- last lines of $f" >&2
            tail -n 40 "$f" >&2
        fi
    done
}

wait_cql() {  # wait_cql K AUTH
    local k=$1 auth=$2 addr t0=$SECONDS
    addr="$(node_addr "$k")"
    local deadline=$((SECONDS + START_TIMEOUT))
    while ((SECONDS < deadline)); do
        if [[ -z "$(live_pid "$k")" ]]; then
            show_logs "$k"
            log "error: node $k exited during start-up"
            return 2
        fi
        if python3 "$PROBE" --timeout 2 ping "$addr:$CQL_PORT" 2>/dev/null; then
            break
        fi
        sleep 1
    done
    if ((SECONDS >= deadline)); then
        show_logs "$k"
        log "error: node $k: no CQL answer on $addr:$CQL_PORT after $START_TIMEOUT s"
        return 1
    fi
    log "node $k: CQL answers after $((SECONDS - t0)) s"
    if [[ "$auth" == 1 ]]; then
        # The default superuser appears shortly after CQL is up.
        local err=""
        while ((SECONDS < deadline)); do
            if err="$(python3 "$PROBE" --timeout 3 --user cassandra --password cassandra \
                query "$addr:$CQL_PORT" "SELECT release_version FROM system.local" 2>&1)"; then
                log "node $k: login as cassandra/cassandra works"
                return 0
            fi
            sleep 0.5
        done
        log "error: node $k: login as cassandra/cassandra still fails: $err"
        return 1
    fi
}

wait_health() {  # wait_health N
    local n=$1 out="" t0=$SECONDS
    local -a addrs=()
    for ((k = 1; k <= n; k++)); do addrs+=("$(node_addr "$k"):$CQL_PORT"); done
    local deadline=$((SECONDS + HEALTH_TIMEOUT))
    # shellcheck disable=SC2046
    while ((SECONDS < deadline)); do
        if out="$(python3 "$PROBE" $(probe_auth_args) health "${addrs[@]}" 2>&1)"; then
            log "ring healthy: $n nodes see each other with tokens, one schema version ($((SECONDS - t0)) s)"
            return 0
        fi
        sleep 1
    done
    log "error: ring not healthy after $HEALTH_TIMEOUT s:"
    echo "$out" >&2
    return 1
}

running_nodes() {
    local k count=0
    for k in 1 2 3; do
        [[ -n "$(live_pid "$k")" ]] && count=$((count + 1))
    done
    echo "$count"
}

cmd_start() {
    local n=1 auth=0 keep=0 heap="" tls=0
    while (($#)); do
        case "$1" in
            1 | 3) n=$1 ;;
            --auth) auth=1 ;;
            --tls) ((tls == 2)) || tls=1 ;;
            --tls-client-auth) tls=2 ;;
            --keep-data) keep=1 ;;
            --heap)
                [[ $# -ge 2 ]] || die "--heap needs a size such as 512M"
                heap=$2
                shift
                ;;
            -h | --help) usage; return 0 ;;
            *) die "start: unknown argument '$1' (node count must be 1 or 3)" ;;
        esac
        shift
    done
    [[ -n "$heap" ]] || { if ((n == 1)); then heap=1G; else heap=512M; fi; }
    [[ "$heap" =~ ^[0-9]+[MmGg]$ ]] || die "--heap: expected a size such as 512M or 1G"

    local running
    running="$(running_nodes)"
    if ((running > 0)); then
        if ((running == n)) && [[ "$(state_get NODES 0)" == "$n" && "$(state_get AUTH 0)" == "$auth" && "$(state_get TLS 0)" == "$tls" ]]; then
            log "already running ($n node(s), auth=$auth); nothing to do ('stop' first to restart)"
            return 0
        fi
        die "$running node(s) already running with a different setup (nodes=$(state_get NODES '?'), auth=$(state_get AUTH '?')); run 'scripts/cassandra.sh stop' first"
    fi
    check_tools
    if python3 "$PROBE" --timeout 1 ping "127.0.0.1:$CQL_PORT" 2>/dev/null; then
        die "something not started by this script already answers CQL on 127.0.0.1:$CQL_PORT"
    fi
    fetch

    local t0=$SECONDS k d
    for ((k = 1; k <= n; k++)); do
        d="$(node_dir "$k")"
        if ((keep == 0)); then
            rm -rf "$d"
        fi
        mkdir -p "$d/conf" "$d/logs" "$d/data" "$d/commitlog" "$d/saved_caches" "$d/hints" "$d/cdc_raw"
    done
    # Remove node dirs beyond N so 'stop'/'status' see only this cluster.
    for ((k = n + 1; k <= 3; k++)); do
        ((keep == 1)) || rm -rf "$(node_dir "$k")"
    done
    printf 'NODES=%s\nAUTH=%s\nVERSION=%s\nHEAP=%s\nTLS=%s\n' "$n" "$auth" "$VERSION" "$heap" "$tls" >"$CDIR/state"
    if ((tls != 0)); then
        need keytool "the JDK's keytool makes the TLS keystores"
        need openssl "openssl writes the client key as PEM"
        make_tls "$CDIR/tls"
    fi
    export_probe_tls

    for ((k = 1; k <= n; k++)); do
        d="$(node_dir "$k")"
        write_yaml "$k" "$auth" "$tls"
        write_logback "$d/conf/logback.xml"
        # Nodes join one at a time: Cassandra refuses concurrent bootstraps.
        local attempt rc
        for ((attempt = 1; attempt <= JOIN_ATTEMPTS; attempt++)); do
            start_node "$k" "$heap"
            rc=0
            wait_cql "$k" "$auth" || rc=$?
            ((rc == 0)) && break
            # A joiner that never reached the seed left no state: wipe, retry.
            if ((rc == 2 && k > 1 && attempt < JOIN_ATTEMPTS)) &&
                grep -q "Unable to contact any seeds" "$d/logs/stdout.log"; then
                log "node $k: could not reach the seed in time; retrying (attempt $((attempt + 1)) of $JOIN_ATTEMPTS)"
                mv "$d/logs" "$d/logs.failed-$attempt"
                rm -rf "$d/data" "$d/commitlog" "$d/saved_caches" "$d/hints" "$d/cdc_raw"
                mkdir -p "$d/logs" "$d/data" "$d/commitlog" "$d/saved_caches" "$d/hints" "$d/cdc_raw"
                continue
            fi
            log "stopping the nodes started so far"
            cmd_stop || true
            return 1
        done
    done
    if ((n > 1)); then
        if ! wait_health "$n"; then
            log "stopping the cluster (logs stay in $CDIR/node*/logs)"
            cmd_stop || true
            return 1
        fi
    fi
    log "up: $n node(s) in $((SECONDS - t0)) s; SCYLLA_URI=$(cmd_uri)"
}

cmd_stop() {
    local k pid any=0 t0=$SECONDS
    local -a pids=()
    for k in 1 2 3; do
        pid="$(live_pid "$k")"
        if [[ -n "$pid" ]]; then
            log "node $k: SIGTERM pid $pid"
            kill -TERM "$pid" 2>/dev/null || true
            pids+=("$k:$pid")
            any=1
        fi
    done
    if ((any == 0)); then
        log "no node running"
        rm -f "$CDIR"/node*/pid
        return 0
    fi
    local deadline=$((SECONDS + STOP_TIMEOUT)) alive
    while ((SECONDS < deadline)); do
        alive=0
        for entry in "${pids[@]}"; do
            [[ -n "$(live_pid "${entry%%:*}")" ]] && alive=1
        done
        ((alive == 0)) && break
        sleep 0.5
    done
    for entry in "${pids[@]}"; do
        k="${entry%%:*}"
        pid="$(live_pid "$k")"
        if [[ -n "$pid" ]]; then
            log "node $k: still alive after $STOP_TIMEOUT s, SIGKILL pid $pid"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    deadline=$((SECONDS + 15))
    while ((SECONDS < deadline)); do
        alive=0
        for entry in "${pids[@]}"; do
            [[ -n "$(live_pid "${entry%%:*}")" ]] && alive=1
        done
        ((alive == 0)) && break
        sleep 0.5
    done
    ((alive == 0)) || die "some node is still alive after SIGKILL"
    rm -f "$CDIR"/node*/pid
    log "stopped in $((SECONDS - t0)) s"
}

cmd_stop_node() {  # cmd_stop_node K [--kill]
    local k=${1:-} sig=TERM pid t0=$SECONDS
    [[ "$k" =~ ^[1-3]$ ]] || die "usage: stop-node K [--kill] (K = 1..3)"
    [[ "${2:-}" == --kill ]] && sig=KILL
    pid="$(live_pid "$k")"
    [[ -n "$pid" ]] || { log "node $k is not running"; return 0; }
    log "node $k: SIG$sig pid $pid"
    kill "-$sig" "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + STOP_TIMEOUT))
    while [[ -n "$(live_pid "$k")" ]] && ((SECONDS < deadline)); do sleep 0.2; done
    if [[ -n "$(live_pid "$k")" ]]; then
        log "node $k: still alive after $STOP_TIMEOUT s, SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 1
    fi
    rm -f "$(node_dir "$k")/pid"
    log "node $k stopped in $((SECONDS - t0)) s"
}

cmd_start_node() {  # cmd_start_node K
    local k=${1:-} n
    [[ "$k" =~ ^[1-3]$ ]] || die "usage: start-node K (K = 1..3)"
    n="$(state_get NODES 0)"
    ((k <= n)) || die "node $k is not part of the started cluster ($n node(s))"
    [[ -z "$(live_pid "$k")" ]] || { log "node $k already running"; return 0; }
    [[ -f "$(node_dir "$k")/conf/cassandra.yaml" ]] || die "node $k was never set up"
    local heap
    heap="$(state_get HEAP "")"
    [[ -n "$heap" ]] || { if ((n == 1)); then heap=1G; else heap=512M; fi; }
    start_node "$k" "$heap"
    wait_cql "$k" "$(state_get AUTH 0)" || die "node $k did not come back"
}

cmd_status() {
    local n k pid ok=0 up=0
    n="$(state_get NODES 0)"
    if ((n == 0)); then
        echo "not started (no $CDIR/state)"
        return 3
    fi
    echo "cluster: $n node(s), auth=$(state_get AUTH 0), Cassandra $(state_get VERSION "$VERSION")"
    for ((k = 1; k <= n; k++)); do
        pid="$(live_pid "$k")"
        if [[ -z "$pid" ]]; then
            echo "node $k $(node_addr "$k"):$CQL_PORT  process: stopped"
            continue
        fi
        up=$((up + 1))
        if python3 "$PROBE" --timeout 2 ping "$(node_addr "$k"):$CQL_PORT" 2>/dev/null; then
            echo "node $k $(node_addr "$k"):$CQL_PORT  process: running (pid $pid)  CQL: up"
            ok=$((ok + 1))
        else
            echo "node $k $(node_addr "$k"):$CQL_PORT  process: running (pid $pid)  CQL: not answering"
        fi
    done
    ((ok == n)) && return 0
    ((up == 0)) && return 3
    return 1
}

cmd_uri() {
    echo "$(node_addr 1):$CQL_PORT"
}

cmd_health() {
    local n
    n="$(state_get NODES 0)"
    ((n > 0)) || die "not started"
    local -a addrs=()
    for ((k = 1; k <= n; k++)); do addrs+=("$(node_addr "$k"):$CQL_PORT"); done
    # shellcheck disable=SC2046
    python3 "$PROBE" $(probe_auth_args) health "${addrs[@]}" && echo "healthy: $n node(s)"
}

cmd_cql() {
    [[ $# -eq 1 ]] || die "usage: scripts/cassandra.sh cql 'STATEMENT'"
    # shellcheck disable=SC2046
    python3 "$PROBE" $(probe_auth_args) query "$(cmd_uri)" "$1"
}

cmd_nodetool() {
    [[ -f "$LIB/.complete-$VERSION" ]] || die "jars not fetched yet (run 'start' or 'fetch')"
    local -a flags
    mapfile -t flags < <(read_options "$HERE/jvm17-clients.options")
    java "${flags[@]}" -Xmx256M -cp "$LIB/*" \
        -Dlogback.configurationFile=file:///dev/null \
        org.apache.cassandra.tools.NodeTool -h 127.0.0.1 -p "$(jmx_port 1)" "$@"
}

main() {
    [[ $# -ge 1 ]] || { usage >&2; exit 2; }
    local cmd=$1
    shift
    export_probe_tls
    case "$cmd" in
        start) cmd_start "$@" ;;
        stop) cmd_stop ;;
        status) cmd_status ;;
        uri) cmd_uri ;;
        tls-dir) echo "$CDIR/tls" ;;
        health) cmd_health ;;
        cql) cmd_cql "$@" ;;
        fetch) mkdir -p "$CDIR" && fetch ;;
        nodetool) cmd_nodetool "$@" ;;
        stop-node) cmd_stop_node "$@" ;;
        start-node) cmd_start_node "$@" ;;
        -h | --help | help) usage ;;
        *) usage >&2; exit 2 ;;
    esac
}

main "$@"
