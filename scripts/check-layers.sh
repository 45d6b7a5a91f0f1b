#!/usr/bin/env bash
# Keeps the driver's layers acyclic: each folder may only use the layers below
# it. `connection` <- `pool` <- `cluster` -> `routing`; `session`, `statement`,
# `policy` and `result` on top. Exits non-zero and lists the offending lines.
set -euo pipefail
cd "$(dirname "$0")/../scylla-driver/src"

fail=0
check() {
  local dir="$1"; shift
  local pattern
  pattern="crate::($(IFS='|'; echo "$*"))\b"
  if grep -rnE "$pattern" "$dir" --include='*.rs'; then
    echo "layer violation: $dir/ must not use crate::{$*}" >&2
    fail=1
  fi
}

check connection pool routing cluster session statement policy result metrics error
check routing connection pool cluster session statement policy result metrics
check pool routing cluster session statement policy result
check cluster session statement policy result
check statement session cluster pool connection
if [ "$fail" -ne 0 ]; then
  exit 1
fi
echo "layers: ok"
