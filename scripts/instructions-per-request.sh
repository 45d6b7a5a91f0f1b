#!/usr/bin/env bash
# User-space instructions per request of both drivers, counted by valgrind's
# callgrind: deterministic for the same binary and inputs whatever else the
# machine does, so small changes show that a timed run cannot resolve.
#
# For each driver, workload and concurrency: runs the comparison binary under
# callgrind twice, with N and 3N measured requests (same warm-up), against one
# testbed (1 node x 2 shards, started here and stopped at the end), and
# reports (instructions(3N) - instructions(N)) / 2N: the marginal cost of a
# request, without start-up, connection set-up and preparation. It counts the
# client's instructions only (not the kernel's, not the server's), including
# the shared harness (comparisons/common: the closed loop, latency slots, the
# typed-row check), which is the same code for both drivers.
#
# Under callgrind the client runs one thread at a time and about 50x slower,
# so the server is never the bottleneck and batches are larger than in a timed
# run: the counts compare the drivers' code paths, not their timing. Runs of
# the same binary differ by about 0.5% (at concurrency 64 by up to 1.8%, see
# --repeat below).
#
# --compare-with REV (repeatable) compares our driver with itself instead of
# with the official one: comparisons/ours as in this work tree against the
# same at each REV (built in a temporary `git worktree` with its own target
# directory; both removed at the end), all in one testbed run. The table has
# each build's count and this tree's count divided by each REV's.
# --bin-cache DIR keeps each REV's binary as DIR/compare-ours-<commit>, so a
# later run with the same commit does not build it again.
#
# --concurrency takes a list ("1 64"). Without --requests, N is 5,000 at
# concurrency 1 and 10,000 otherwise. At concurrency 64 single runs of one
# binary moved by up to 1.8% (the runtime's wake-ups differ from run to
# run); --repeat K measures each cell K times and reports the median.
#
# The testbed is started and stopped by scripts/lib/testbed.sh, the counts
# and the marginal cost come from scripts/lib/callgrind.sh.
#
# usage: scripts/instructions-per-request.sh [--requests N] [--concurrency "C ..."]
#          [--workloads "insert select"] [--no-build] [--repeat K]
#          [--compare-with REV]... [--bin-cache DIR]
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/release-build.sh
source "$repo/scripts/lib/release-build.sh"
# shellcheck source=lib/testbed.sh
source "$repo/scripts/lib/testbed.sh"
# shellcheck source=lib/callgrind.sh
source "$repo/scripts/lib/callgrind.sh"
requests=""
concurrency=64
workloads="insert select"
build=1
repeat=1
revs=()
bin_cache=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --requests) requests="$2"; shift 2 ;;
        --concurrency) concurrency="$2"; shift 2 ;;
        --workloads) workloads="$2"; shift 2 ;;
        --no-build) build=0; shift ;;
        --repeat) repeat="$2"; shift 2 ;;
        --compare-with) revs+=("$2"); shift 2 ;;
        --bin-cache) bin_cache="$2"; shift 2 ;;
        -h|--help) sed -n '2,40p' "$0"; exit 0 ;;
        *) echo "instructions-per-request: unknown argument $1" >&2; exit 2 ;;
    esac
done
command -v valgrind >/dev/null || { echo "instructions-per-request: valgrind is not installed" >&2; exit 2; }

cmp_target="$repo/comparisons/target"
main_target="${CARGO_TARGET_DIR:-$repo/target}"
work="$(mktemp -d)"
rev_trees=()
cleanup() {
    testbed_stop
    for t in "${rev_trees[@]}"; do
        git -C "$repo" worktree remove --force "$t" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

# The builds measured: labels and binaries, in table order. The ratio
# columns divide the first by each of the others.
labels=()
bins=()
if [[ ${#revs[@]} -eq 0 ]]; then
    drivers=(ours official-scylla)
else
    drivers=(ours)
fi
if [[ "$build" == 1 ]]; then
    echo "== building (release)"
    for d in "${drivers[@]}"; do
        (cd "$repo/comparisons/$d" && CARGO_TARGET_DIR="$cmp_target" cargo build --release --quiet)
    done
    release_build
fi
if [[ ${#revs[@]} -eq 0 ]]; then
    labels=(ours official)
    bins=("$cmp_target/release/compare-ours" "$cmp_target/release/compare-official-scylla")
else
    here="$(git -C "$repo" rev-parse --short HEAD)"
    [[ -n "$(git -C "$repo" status --porcelain -- scylla-driver scylla-cql comparisons)" ]] && here="$here+"
    labels=("$here")
    bins=("$cmp_target/release/compare-ours")
    [[ -n "$bin_cache" ]] && mkdir -p "$bin_cache"
    for i in "${!revs[@]}"; do
        rev="${revs[$i]}"
        commit="$(git -C "$repo" rev-parse --verify "$rev^{commit}")"
        bin="$work/compare-ours-$i"
        cached="${bin_cache:+$bin_cache/compare-ours-$commit}"
        if [[ -n "$cached" && -x "$cached" ]]; then
            echo "== $rev ($commit): cached $cached"
            bin="$cached"
        else
            echo "== building comparisons/ours at $rev ($commit)"
            tree="$work/tree-$i"
            git -C "$repo" worktree add --quiet --detach "$tree" "$commit"
            rev_trees+=("$tree")
            (cd "$tree/comparisons/ours" && CARGO_TARGET_DIR="$work/target-$i" cargo build --release --quiet)
            cp "$work/target-$i/release/compare-ours" "$bin"
            rm -rf "$work/target-$i"
            git -C "$repo" worktree remove --force "$tree"
            if [[ -n "$cached" ]]; then
                cp "$bin" "$cached"
            fi
        fi
        labels+=("$rev")
        bins+=("$bin")
    done
fi

# With --no-build nothing above made these: name the one missing.
for b in "${bins[@]}" "$main_target/release/testbed"; do
    if [[ ! -x "$b" ]]; then
        echo "instructions-per-request: $b is missing; run once without --no-build to build it" >&2
        exit 1
    fi
done
cp "$main_target/release/testbed" "$work/testbed"
testbed_start "$work/testbed" "$work/testbed.out" --nodes 1 --shards 2 --duration-secs 3600 || exit 1
node="$testbed_ip"

requests_at() { # concurrency -> N
    if [[ -n "$requests" ]]; then
        echo "$requests"
    elif [[ "$1" == 1 ]]; then
        echo 5000
    else
        echo 10000
    fi
}

most=0
for c in $concurrency; do
    n="$(requests_at "$c")"
    (( 3 * n > most )) && most=$((3 * n))
done
key_base=77000000
# The select workload reads keys an insert run wrote (each driver its own
# keyspace; the builds of our driver share one): enough for the warm-up and
# the largest run.
for d in "${drivers[@]}"; do
    "$cmp_target/release/compare-$d" --node "$node" --workload insert \
        --concurrency 64 --requests $((most + 3000)) --warmup 0 --key-base "$key_base" \
        --json > /dev/null 2>"$work/populate.err" || {
        echo "instructions-per-request: populating the select workload with compare-$d failed:" >&2
        cat "$work/populate.err" >&2
        exit 1
    }
done

count() { # requests binary workload concurrency -> instructions
    local extra=()
    [[ "$3" == select ]] && extra=(--no-populate --key-base "$key_base")
    callgrind_count \
        "$2" --node "$node" --workload "$3" \
        --concurrency "$4" --requests "$1" --warmup 2000 "${extra[@]}" --json
}

echo "== instructions per request (callgrind, marginal over N -> 3N requests, median of $repeat)"
header="$(printf '%-8s %4s %6s' workload C N)"
for l in "${labels[@]}"; do header+="$(printf ' %12s' "$l")"; done
for l in "${labels[@]:1}"; do header+="$(printf ' %18s' "${labels[0]}/$l")"; done
echo "$header"
for w in $workloads; do
    for c in $concurrency; do
        n="$(requests_at "$c")"
        per=()
        for b in "${bins[@]}"; do
            runs=()
            for _ in $(seq "$repeat"); do
                run="$(callgrind_marginal "$n" count "$b" "$w" "$c")" || exit 1
                runs+=("$run")
            done
            per+=("$(printf '%s\n' "${runs[@]}" | sort -n | sed -n "$(( (repeat + 1) / 2 ))p")")
        done
        line="$(printf '%-8s %4d %6d' "$w" "$c" "$n")"
        for p in "${per[@]}"; do line+="$(printf ' %12d' "$p")"; done
        for p in "${per[@]:1}"; do
            line+="$(printf ' %18.3f' "$(echo "${per[0]} / $p" | bc -l)")"
        done
        echo "$line"
    done
done
