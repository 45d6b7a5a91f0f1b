#!/usr/bin/env bash
# The driver's TLS against OpenSSL (socat in front of the test cluster) and
# GnuTLS (tests/tls_interop/gnutls_proxy.c in front of it, with and without
# server-initiated KeyUpdates), for every version, cipher suite and record
# layer (tests/tls_interop.rs).
# Installs what is missing with apt-get (as root): socat, openssl, gnutls-bin,
# libgnutls28-dev, pkg-config and a C compiler; builds the proxy into cargo's
# target directory; then runs the ignored tests. Fails if a peer cannot be had.
#
# usage: scripts/tls-interop.sh
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
missing=()
command -v socat >/dev/null || missing+=(socat)
command -v openssl >/dev/null || missing+=(openssl)
command -v gnutls-cli >/dev/null || missing+=(gnutls-bin)
command -v pkg-config >/dev/null || missing+=(pkg-config)
command -v cc >/dev/null || command -v gcc >/dev/null || missing+=(gcc)
if ! command -v pkg-config >/dev/null || ! pkg-config --exists gnutls; then
    missing+=(libgnutls28-dev)
fi
if [[ ${#missing[@]} -gt 0 ]]; then
    echo "== installing ${missing[*]}"
    if [[ "$(id -u)" != 0 ]]; then
        echo "tls-interop: ${missing[*]} missing; install them (apt-get install ${missing[*]})" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
cc="$(command -v cc || command -v gcc)"
echo "== peers: $(openssl version), $(socat -V 2>/dev/null | sed -n 's/^socat version \([^ ]*\).*/socat \1/p'), GnuTLS $(pkg-config --modversion gnutls)"
cd "$repo"
# The proxy goes into cargo's target directory (CARGO_TARGET_DIR or the
# configured one), never into the tree.
target="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
proxy="$target/tls-interop/gnutls_proxy"
mkdir -p "$(dirname "$proxy")"
# shellcheck disable=SC2046 # pkg-config's flags are separate words
"$cc" -O2 -Wall -Wextra -Werror -o "$proxy" tests/tls_interop/gnutls_proxy.c $(pkg-config --cflags --libs gnutls)
echo "== GnuTLS proxy: $proxy"
SCYLLA_GNUTLS_PROXY="$proxy" cargo test --test tls_interop -- --ignored --nocapture --test-threads=1
