#!/usr/bin/env bash
# The driver's TLS against OpenSSL (socat in front of the test cluster), for
# every version, cipher suite and record layer (tests/tls_interop.rs).
# Installs socat and openssl with apt-get when they are missing (as root),
# then runs the ignored tests; fails if a peer cannot be had.
#
# usage: scripts/tls-interop.sh
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
missing=()
command -v socat >/dev/null || missing+=(socat)
command -v openssl >/dev/null || missing+=(openssl)
if [[ ${#missing[@]} -gt 0 ]]; then
    echo "== installing ${missing[*]}"
    if [[ "$(id -u)" != 0 ]]; then
        echo "tls-interop: ${missing[*]} missing; install them (apt-get install ${missing[*]})" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
echo "== peers: $(openssl version), $(socat -V 2>/dev/null | sed -n 's/^socat version \([^ ]*\).*/socat \1/p')"
cd "$repo"
cargo test --test tls_interop -- --ignored --nocapture
