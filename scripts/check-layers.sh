#!/usr/bin/env bash
# Keeps the driver's modules layered: every top-level module of
# scylla-driver/src is either a core module, which may use only the core
# modules below it, or an official-path module (the `scylla` crate's paths:
# `client`, `errors`, `frame`, `policies`, ...), which may use anything but
# which no core module uses. Reads code lines only (doc comments may link
# anywhere). Fails, listing the offending lines, on a use outside these
# rules, and on a top-level module this script does not classify.
set -euo pipefail
cd "$(dirname "$0")/../scylla-driver/src"

# Core modules, bottom layer first; each may use those before it.
core=(routing connection tls metrics pool cluster error handle policy history statement result session)
# Official-path modules: aliases and the official shapes over the core.
official=(authentication client deserialize errors frame observability policies response serialize types value)

fail=0

# Every top-level module is classified.
for entry in *; do
  name="${entry%.rs}"
  [[ "$name" == lib || "$name" == lib.md || "$name" == build ]] && continue
  [[ -d "$entry" || "$entry" == *.rs ]] || continue
  if [[ " ${core[*]} ${official[*]} " != *" $name "* ]]; then
    echo "check-layers: the module $name is neither core nor an official path: add it to scripts/check-layers.sh" >&2
    fail=1
  fi
done

# The code lines of a module (its file, or every file of its folder) that name
# crate::<module>, as file:line: text, without comment lines.
uses() {
  local module="$1" target="$2" files=()
  if [[ -d "$module" ]]; then
    mapfile -t files < <(find "$module" -name '*.rs' | sort)
  fi
  [[ -f "$module.rs" ]] && files+=("$module.rs")
  ((${#files[@]})) || return 0
  grep -nHE "crate::$target\b" "${files[@]}" | grep -vE '^[^:]+:[0-9]+:\s*//' || true
}

for i in "${!core[@]}"; do
  module="${core[$i]}"
  # Above: the core modules after this one, and every official path.
  for target in "${core[@]:$((i + 1))}" "${official[@]}"; do
    found="$(uses "$module" "$target")"
    if [[ -n "$found" ]]; then
      echo "$found"
      echo "check-layers: $module/ must not use crate::$target (core layers: ${core[*]}; official paths are used by no core module)" >&2
      fail=1
    fi
  done
done

if [ "$fail" -ne 0 ]; then
  exit 1
fi
echo "layers: ok (${#core[@]} core modules in order, ${#official[@]} official-path modules)"
