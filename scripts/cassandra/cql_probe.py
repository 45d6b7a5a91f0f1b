#!/usr/bin/env python3
"""A tiny CQL client (native protocol v4) using only the Python standard library.

Used by scripts/cassandra.sh to tell when a node answers CQL and whether a
small cluster is healthy, without depending on cqlsh or a driver package.
It speaks just enough of the protocol: OPTIONS/SUPPORTED, STARTUP with
optional SASL PLAIN authentication, QUERY, and decoding of ROWS results for
the common column types (others are printed as hex).

Commands (every one exits 0 on success, 1 on failure, 2 on bad usage):
  ping   HOST[:PORT] ...            OPTIONS -> SUPPORTED on every address
  query  HOST[:PORT] CQL            run one statement, print rows tab-separated
  health HOST[:PORT] ...            every node bootstrapped, sees all others
                                    with tokens, and one schema version
Options: --user U --password P (or env CASSANDRA_USER / CASSANDRA_PASSWORD),
         --timeout SECONDS (per network operation, default 5).
"""

import ipaddress
import os
import socket
import ssl
import struct
import sys
import uuid

VERSION_REQ = 0x04
OP_ERROR, OP_STARTUP, OP_READY, OP_AUTHENTICATE = 0x00, 0x01, 0x02, 0x03
OP_OPTIONS, OP_SUPPORTED, OP_QUERY, OP_RESULT = 0x05, 0x06, 0x07, 0x08
OP_AUTH_CHALLENGE, OP_AUTH_RESPONSE, OP_AUTH_SUCCESS = 0x0E, 0x0F, 0x10
CONSISTENCY_ONE = 0x0001
MAX_BODY = 256 * 1024 * 1024


class CqlError(Exception):
    """A failure talking to the server (network, protocol or server error)."""


class Reader:
    """A bounds-checked cursor over a frame body."""

    def __init__(self, data):
        self.data = data
        self.pos = 0

    def take(self, n):
        if n < 0 or self.pos + n > len(self.data):
            raise CqlError("truncated frame body")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def byte(self):
        return self.take(1)[0]

    def short(self):
        return struct.unpack(">H", self.take(2))[0]

    def int(self):
        return struct.unpack(">i", self.take(4))[0]

    def string(self):
        return self.take(self.short()).decode("utf-8")

    def long_string(self):
        return self.take(self.int()).decode("utf-8")

    def bytes(self):
        n = self.int()
        return None if n < 0 else self.take(n)

    def string_list(self):
        return [self.string() for _ in range(self.short())]

    def string_multimap(self):
        return {self.string(): self.string_list() for _ in range(self.short())}


def w_string(s):
    b = s.encode("utf-8")
    return struct.pack(">H", len(b)) + b


def w_long_string(s):
    b = s.encode("utf-8")
    return struct.pack(">i", len(b)) + b


def w_string_map(m):
    out = struct.pack(">H", len(m))
    for k, v in m.items():
        out += w_string(k) + w_string(v)
    return out


def w_bytes(b):
    return struct.pack(">i", len(b)) + b


def parse_addr(text):
    host, _, port = text.rpartition(":")
    if not host:
        return text, 9042
    return host, int(port)


class Connection:
    """One blocking connection; requests are sent one at a time on stream 0."""

    def __init__(self, addr, timeout):
        self.addr = addr
        try:
            self.sock = socket.create_connection(parse_addr(addr), timeout=timeout)
        except OSError as e:
            raise CqlError(f"{addr}: cannot connect: {e}") from None
        self.sock.settimeout(timeout)
        # A node started with `cassandra.sh start --tls`: the script exports
        # the CA (and, with client authentication, a client certificate).
        ca = os.environ.get("CQL_PROBE_TLS_CA")
        if ca:
            ctx = ssl.create_default_context(cafile=ca)
            cert = os.environ.get("CQL_PROBE_TLS_CERT")
            if cert:
                ctx.load_cert_chain(cert, os.environ.get("CQL_PROBE_TLS_KEY"))
            try:
                self.sock = ctx.wrap_socket(self.sock, server_hostname=parse_addr(addr)[0])
            except (OSError, ssl.SSLError) as e:
                self.sock.close()
                raise CqlError(f"{addr}: TLS handshake failed: {e}") from None

    def close(self):
        self.sock.close()

    def _recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except OSError as e:
                raise CqlError(f"{self.addr}: read failed: {e}") from None
            if not chunk:
                raise CqlError(f"{self.addr}: connection closed by server")
            buf += chunk
        return buf

    def request(self, opcode, body=b""):
        header = struct.pack(">BBhBi", VERSION_REQ, 0, 0, opcode, len(body))
        try:
            self.sock.sendall(header + body)
        except OSError as e:
            raise CqlError(f"{self.addr}: write failed: {e}") from None
        version, _flags, _stream, op, length = struct.unpack(">BBhBi", self._recv_exact(9))
        if version != 0x80 | VERSION_REQ:
            raise CqlError(f"{self.addr}: unexpected response version 0x{version:02x}")
        if length < 0 or length > MAX_BODY:
            raise CqlError(f"{self.addr}: bad body length {length}")
        r = Reader(self._recv_exact(length))
        if op == OP_ERROR:
            code = r.int()
            raise CqlError(f"{self.addr}: server error 0x{code:04x}: {r.string()}")
        return op, r

    def options(self):
        op, r = self.request(OP_OPTIONS)
        if op != OP_SUPPORTED:
            raise CqlError(f"{self.addr}: expected SUPPORTED, got opcode 0x{op:02x}")
        return r.string_multimap()

    def startup(self, user=None, password=None):
        op, r = self.request(OP_STARTUP, w_string_map({"CQL_VERSION": "3.0.0"}))
        if op == OP_READY:
            return
        if op != OP_AUTHENTICATE:
            raise CqlError(f"{self.addr}: unexpected opcode 0x{op:02x} after STARTUP")
        authenticator = r.string()
        if user is None:
            raise CqlError(f"{self.addr}: server requires authentication ({authenticator});"
                           " pass --user/--password")
        token = b"\0" + user.encode() + b"\0" + (password or "").encode()
        op, r = self.request(OP_AUTH_RESPONSE, w_bytes(token))
        if op == OP_AUTH_CHALLENGE:
            raise CqlError(f"{self.addr}: unexpected SASL challenge")
        if op != OP_AUTH_SUCCESS:
            raise CqlError(f"{self.addr}: unexpected opcode 0x{op:02x} after AUTH_RESPONSE")

    def query(self, cql):
        """Runs one statement at consistency ONE; returns (column names, rows)."""
        body = w_long_string(cql) + struct.pack(">HB", CONSISTENCY_ONE, 0)
        op, r = self.request(OP_QUERY, body)
        if op != OP_RESULT:
            raise CqlError(f"{self.addr}: expected RESULT, got opcode 0x{op:02x}")
        kind = r.int()
        if kind != 2:  # Void, Set_keyspace, Schema_change: nothing to print
            return [], []
        flags = r.int()
        ncols = r.int()
        if flags & 0x0002:
            r.bytes()  # paging state
        if flags & 0x0004:
            raise CqlError("result without metadata is not supported")
        if flags & 0x0001:
            r.string(), r.string()
        names, types = [], []
        for _ in range(ncols):
            if not flags & 0x0001:
                r.string(), r.string()
            names.append(r.string())
            types.append(read_type(r))
        rows = []
        for _ in range(r.int()):
            rows.append([decode_value(t, r.bytes()) for t in types])
        return names, rows


def read_type(r):
    """Reads a type [option] into a nested tuple such as ('list', ('varchar',))."""
    code = r.short()
    simple = {0x01: "ascii", 0x02: "bigint", 0x03: "blob", 0x04: "boolean", 0x05: "counter",
              0x06: "decimal", 0x07: "double", 0x08: "float", 0x09: "int", 0x0B: "timestamp",
              0x0C: "uuid", 0x0D: "varchar", 0x0E: "varint", 0x0F: "timeuuid", 0x10: "inet",
              0x11: "date", 0x12: "time", 0x13: "smallint", 0x14: "tinyint", 0x15: "duration"}
    if code in simple:
        return (simple[code],)
    if code == 0x0000:
        return ("custom", r.string())
    if code in (0x20, 0x22):
        return ("list" if code == 0x20 else "set", read_type(r))
    if code == 0x21:
        return ("map", read_type(r), read_type(r))
    if code == 0x30:
        r.string(), r.string()
        fields = [(r.string(), read_type(r)) for _ in range(r.short())]
        return ("udt", fields)
    if code == 0x31:
        return ("tuple", [read_type(r) for _ in range(r.short())])
    raise CqlError(f"unknown type code 0x{code:04x}")


def decode_value(t, b):
    """Decodes one cell for printing; unknown or exotic types come out as hex."""
    if b is None:
        return None
    name = t[0]
    if name in ("ascii", "varchar"):
        return b.decode("utf-8")
    if name in ("bigint", "counter", "int", "smallint", "tinyint", "varint"):
        return int.from_bytes(b, "big", signed=True)
    if name == "boolean":
        return b != b"\0"
    if name in ("uuid", "timeuuid"):
        return str(uuid.UUID(bytes=b))
    if name == "inet":
        return str(ipaddress.ip_address(b))
    if name == "double":
        return struct.unpack(">d", b)[0]
    if name == "float":
        return struct.unpack(">f", b)[0]
    if name in ("list", "set"):
        r = Reader(b)
        return [decode_value(t[1], r.bytes()) for _ in range(r.int())]
    if name == "map":
        r = Reader(b)
        return {decode_value(t[1], r.bytes()): decode_value(t[2], r.bytes())
                for _ in range(r.int())}
    return "0x" + b.hex()


def connect(addr, args):
    conn = Connection(addr, args["timeout"])
    try:
        conn.startup(args["user"], args["password"])
    except CqlError:
        conn.close()
        raise
    return conn


def cmd_ping(addrs, args):
    for addr in addrs:
        conn = Connection(addr, args["timeout"])
        try:
            supported = conn.options()
        finally:
            conn.close()
        if "CQL_VERSION" not in supported:
            raise CqlError(f"{addr}: SUPPORTED lacks CQL_VERSION")
    return 0


def cmd_query(addrs, args):
    if len(addrs) != 2:
        print("usage: query HOST[:PORT] CQL", file=sys.stderr)
        return 2
    conn = connect(addrs[0], args)
    try:
        names, rows = conn.query(addrs[1])
    finally:
        conn.close()
    if names:
        print("\t".join(names))
    for row in rows:
        print("\t".join("null" if v is None else str(v) for v in row))
    return 0


def cmd_health(addrs, args):
    """Checks each node's own view; prints one line per problem, returns 1 if any."""
    hosts = [parse_addr(a)[0] for a in addrs]
    problems = []
    versions = set()
    for addr, host in zip(addrs, hosts):
        conn = connect(addr, args)
        try:
            _, local = conn.query(
                "SELECT bootstrapped, schema_version, tokens FROM system.local")
            _, peers = conn.query("SELECT peer, schema_version, tokens FROM system.peers")
        finally:
            conn.close()
        if not local or local[0][0] != "COMPLETED":
            problems.append(f"{host}: bootstrapped = {local[0][0] if local else None}")
        if local:
            versions.add(local[0][1])
            if not local[0][2]:
                problems.append(f"{host}: owns no tokens")
        seen = {}
        for peer, version, tokens in peers:
            seen[peer] = (version, tokens)
            versions.add(version)
        for other in hosts:
            if other == host:
                continue
            if other not in seen:
                problems.append(f"{host}: does not list peer {other}")
            elif not seen[other][1]:
                problems.append(f"{host}: peer {other} has no tokens yet")
    if len(versions) != 1:
        problems.append(f"schema versions disagree: {sorted(map(str, versions))}")
    for p in problems:
        print(p)
    return 1 if problems else 0


def main(argv):
    args = {"timeout": 5.0, "user": os.environ.get("CASSANDRA_USER"),
            "password": os.environ.get("CASSANDRA_PASSWORD")}
    rest = []
    it = iter(argv[1:])
    for a in it:
        if a in ("--user", "--password", "--timeout"):
            value = next(it, None)
            if value is None:
                print(f"{a} needs a value", file=sys.stderr)
                return 2
            args[a[2:]] = float(value) if a == "--timeout" else value
        else:
            rest.append(a)
    commands = {"ping": cmd_ping, "query": cmd_query, "health": cmd_health}
    if not rest or rest[0] not in commands or len(rest) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        return commands[rest[0]](rest[1:], args)
    except (CqlError, OSError, ValueError) as e:
        print(f"cql_probe: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
