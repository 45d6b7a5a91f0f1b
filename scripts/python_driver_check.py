"""Faithfulness check: the PyPI Python driver (`scylla-driver`) uses the
test cluster as if it were ScyllaDB.

Run by python_driver_check.sh against a running `testbed` binary. Checks:
every node discovered; shard-aware connections to every shard of every
node; DDL; prepared INSERT and SELECT of 100 keys; and, from the testbed's
own `testbed.stats` table, that connections came through the shard-aware
port and that token-aware routing sent no request to a wrong shard or a
non-replica node. Exits non-zero with a message on the first failure.

Protocol version: pinned to 4 unless PYCHECK_PROTOCOL=auto, which lets the
driver negotiate (it starts above v5 and steps down on each "Invalid or
unsupported protocol version" refusal); PYCHECK_EXPECT_PROTOCOL=N then
asserts the version it settled on, and that the testbed counted the
refusals (a v4-only testbed refuses every version above 4).
"""

import os
import sys
import time

from cassandra.cluster import Cluster, ExecutionProfile, EXEC_PROFILE_DEFAULT
from cassandra.policies import TokenAwarePolicy, RoundRobinPolicy

HOST, PORT, NODES, SHARDS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
# With a CA (the testbed's --tls-dir), connect over TLS on the TLS port.
TLS_CA = sys.argv[5] if len(sys.argv) > 5 and sys.argv[5] else None
# With PYCHECK_TABLETS=N (the testbed runs with --tablets N), also check
# tablet routing: a NetworkTopologyStrategy keyspace gets tablets by default.
TABLETS = int(os.environ.get("PYCHECK_TABLETS", "0"))
KEYS = 100
PROTOCOL = os.environ.get("PYCHECK_PROTOCOL", "4")
EXPECT_PROTOCOL = int(os.environ.get("PYCHECK_EXPECT_PROTOCOL", "0"))
DEADLINE = time.monotonic() + 90


def fail(msg):
    print(f"python_driver_check: FAIL: {msg}", flush=True)
    sys.exit(1)


def step(msg):
    print(f"python_driver_check: {msg}", flush=True)


def stats(session):
    rows = list(session.execute("SELECT * FROM testbed.stats", timeout=10))
    if len(rows) != NODES * SHARDS:
        fail(f"testbed.stats has {len(rows)} rows, expected {NODES * SHARDS}")
    return rows


def check_tablets(session):
    """A tablets keyspace (the testbed's default for NetworkTopologyStrategy):
    the driver learns the tablets from the tablets-routing-v1 payloads of its
    first requests; after that warm-up, no request is misrouted."""
    session.execute(
        "CREATE KEYSPACE IF NOT EXISTS pytablets WITH replication = "
        "{'class': 'NetworkTopologyStrategy', 'replication_factor': 3}"
    )
    session.execute("CREATE TABLE IF NOT EXISTS pytablets.kv (k int PRIMARY KEY, v int)")
    initial = [r for r in session.execute(
        "SELECT keyspace_name, initial_tablets FROM system_schema.scylla_keyspaces"
    ) if r.keyspace_name == "pytablets"]
    if not initial or initial[0].initial_tablets is None:
        fail(f"pytablets is not a tablets keyspace in system_schema.scylla_keyspaces: {initial}")
    tablets = list(session.execute("SELECT table_name, last_token FROM system.tablets"))
    tablets = [r for r in tablets if r.table_name == "kv"]
    if len(tablets) != TABLETS:
        fail(f"system.tablets has {len(tablets)} tablets of pytablets.kv, expected {TABLETS}")
    ins = session.prepare("INSERT INTO pytablets.kv (k, v) VALUES (?, ?)")

    def misrouted():
        return sum(r.requests_tablet_misrouted for r in stats(session))

    m0 = misrouted()
    warm = 20 * TABLETS
    for k in range(warm):
        session.execute(ins, (k, k))
    m1 = misrouted()
    measured = 2000
    for k in range(warm, warm + measured):
        session.execute(ins, (k, k))
    m2 = misrouted()
    step(
        f"tablets: {TABLETS} tablets RF 3; warm-up {warm} requests, {m1 - m0} misrouted "
        f"(learned from payloads); then {measured} requests, {m2 - m1} misrouted"
    )
    if m1 - m0 == 0:
        fail("no misroute during warm-up: the tablet path was not exercised")
    if m2 - m1 != 0:
        fail(f"{m2 - m1} requests misrouted after warm-up")


profile = ExecutionProfile(
    load_balancing_policy=TokenAwarePolicy(RoundRobinPolicy()), request_timeout=10
)
tls_args = {}
if TLS_CA:
    import ssl

    ctx = ssl.create_default_context(cafile=TLS_CA)
    # The Python driver uses SCYLLA_SHARD_AWARE_PORT_SSL only when
    # `ssl_options` is set (pool.py: `if cluster.ssl_options and ...`); with
    # an `ssl_context` alone it would open its shard-aware connections on the
    # plaintext port. The server certificate names testbed.local.
    tls_args = {"ssl_context": ctx, "ssl_options": {"server_hostname": "testbed.local"}}
version_args = {} if PROTOCOL == "auto" else {"protocol_version": int(PROTOCOL)}
cluster = Cluster(
    [HOST],
    port=PORT,
    **tls_args,
    **version_args,
    compression=True,
    connect_timeout=10,
    control_connection_timeout=10,
    execution_profiles={EXEC_PROFILE_DEFAULT: profile},
)
try:
    session = cluster.connect()
    step(f"connected; release {cluster.metadata.get_host(HOST).release_version if cluster.metadata.get_host(HOST) else '?'}")
    step(
        f"protocol version {cluster.protocol_version} "
        f"({'negotiated' if PROTOCOL == 'auto' else 'pinned'})"
    )
    if EXPECT_PROTOCOL and cluster.protocol_version != EXPECT_PROTOCOL:
        fail(f"the driver settled on protocol v{cluster.protocol_version}, expected v{EXPECT_PROTOCOL}")

    hosts = cluster.metadata.all_hosts()
    addrs = sorted(str(h.endpoint.address) for h in hosts)
    if len(hosts) != NODES:
        fail(f"driver discovered {len(hosts)} nodes {addrs}, expected {NODES}")
    if not all(h.is_up for h in hosts):
        fail(f"not every node is up in the driver: {[(str(h), h.is_up) for h in hosts]}")
    step(f"discovered {NODES} nodes: {addrs}")

    if not cluster.is_shard_aware():
        fail("the driver did not detect ScyllaDB sharding (cluster.is_shard_aware() is False)")
    while True:
        sa = cluster.shard_aware_stats() or {}
        full = len(sa) == NODES and all(
            v["shards_count"] == SHARDS and v["connected"] == SHARDS for v in sa.values()
        )
        if full:
            break
        if time.monotonic() > DEADLINE:
            fail(f"per-shard pools incomplete: {sa}")
        time.sleep(0.2)
    step(f"every shard of every node has a connection: {sa}")

    session.execute(
        "CREATE KEYSPACE IF NOT EXISTS pycheck WITH replication = "
        "{'class': 'SimpleStrategy', 'replication_factor': 1}"
    )
    session.execute("CREATE TABLE IF NOT EXISTS pycheck.kv (k int PRIMARY KEY, v text)")
    session.execute(
        "CREATE TABLE IF NOT EXISTS pycheck.wide (a int, b text, c int, v bigint, "
        "PRIMARY KEY ((a, b), c))"
    )
    if not cluster.metadata.keyspaces.get("pycheck") or "kv" not in cluster.metadata.keyspaces["pycheck"].tables:
        fail("the driver's schema metadata does not show pycheck.kv after CREATE TABLE")
    step("keyspace and tables created; schema metadata refreshed")

    before = {(r.node, r.shard): r for r in stats(session)}

    ins = session.prepare("INSERT INTO pycheck.kv (k, v) VALUES (?, ?)")
    sel = session.prepare("SELECT k, v FROM pycheck.kv WHERE k = ?")
    if ins.routing_key_indexes != [0] or sel.routing_key_indexes != [0]:
        fail(f"pk indexes: insert {ins.routing_key_indexes}, select {sel.routing_key_indexes}")
    ins2 = session.prepare("INSERT INTO pycheck.wide (c, v, b, a) VALUES (?, ?, ?, ?)")
    if ins2.routing_key_indexes != [3, 2]:
        fail(f"composite pk indexes: {ins2.routing_key_indexes}, expected [3, 2]")
    sel2 = session.prepare("SELECT v FROM pycheck.wide WHERE a = ? AND b = ? AND c = ?")

    for k in range(KEYS):
        session.execute(ins, (k, f"value-{k}"))
        session.execute(ins2, (k % 7, k * 10, f"b{k}", k))
    for k in range(KEYS):
        rows = list(session.execute(sel, (k,)))
        if len(rows) != 1 or rows[0].k != k or rows[0].v != f"value-{k}":
            fail(f"SELECT k={k} returned {rows}")
        rows = list(session.execute(sel2, (k, f"b{k}", k % 7)))
        if len(rows) != 1 or rows[0].v != k * 10:
            fail(f"SELECT wide a={k} returned {rows}")
    step(f"prepared INSERT and SELECT of {KEYS} keys on a simple and a composite key: ok")

    # Paging through the driver.
    from cassandra.query import SimpleStatement

    all_rows = list(session.execute(SimpleStatement("SELECT k FROM pycheck.kv", fetch_size=30)))
    if sorted(r.k for r in all_rows) != list(range(KEYS)):
        fail(f"paged full scan returned {len(all_rows)} rows")
    step("paged scan (page size 30) returned every key once")

    if TABLETS:
        check_tablets(session)

    after = stats(session)
    wrong = sum(r.requests_wrong_shard - before[(r.node, r.shard)].requests_wrong_shard for r in after)
    non_replica = sum(
        r.requests_non_replica - before[(r.node, r.shard)].requests_non_replica for r in after
    )
    shard_aware = sum(r.accepted_shard_aware for r in after)
    shards_with_sa = sum(1 for r in after if r.accepted_shard_aware > 0)
    served = sum(r.requests_served - before[(r.node, r.shard)].requests_served for r in after)
    step(
        f"testbed.stats: {served} requests served, {shard_aware} shard-aware connections on "
        f"{shards_with_sa}/{NODES * SHARDS} shards, wrong shard {wrong}, non-replica {non_replica}"
    )
    if shards_with_sa < NODES * (SHARDS - 1):
        fail("too few shards got connections through the shard-aware port")
    if wrong != 0:
        fail(f"{wrong} requests reached a wrong shard despite token-aware routing")
    if non_replica != 0:
        fail(f"{non_replica} requests reached a non-replica node despite token-aware routing")
    refusals = sum(r.version_refusals for r in after)
    v5 = sum(r.connections_v5 for r in after)
    step(f"protocol: {v5} v5 connections, {refusals} version refusals")
    if cluster.protocol_version >= 5 and v5 == 0:
        fail("the driver says v5 but the testbed saw no v5 connection")
    if cluster.protocol_version == 4 and v5 != 0:
        fail(f"the driver says v4 but the testbed saw {v5} v5 connections")
    if PROTOCOL == "auto" and cluster.protocol_version == 4 and refusals == 0:
        fail("the driver negotiated down to v4 without a refusal counted")
    if TLS_CA:
        tls = sum(r.accepted_tls for r in after)
        total = sum(r.accepted_regular + r.accepted_shard_aware for r in after)
        step(f"TLS: {tls} of {total} accepted connections were TLS")
        if tls != total:
            fail(f"{total - tls} connections were not TLS")
    step("PASS")
finally:
    cluster.shutdown()
