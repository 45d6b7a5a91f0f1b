#!/usr/bin/env bash
# The docs say what the code does: fails, listing the offenders, when
#  (a) an environment variable `SCYLLA_*` named in README.md or docs/*.md is
#      read nowhere (the protocol's SCYLLA_* option names, string literals in
#      scylla-cql/src or scylla-testbed/src, are not variables), or one that
#      the examples, tests, scripts or doctests read is missing from the table
#      in docs/connecting.md ("Environment variables");
#  (b) a metric name in docs/observability.md's table is no longer a string
#      literal in scylla-driver/src, or one defined there is not in the table;
#  (c) a file or folder path (scylla-*/..., scripts/, examples/, tests/,
#      benches/, docs/, comparisons/, fuzz/, .ci/) named in README.md,
#      docs/*.md, scripts/README.md or examples/README.md does not exist
#      (CHANGELOG.md and comparisons/ are history and not checked; paths git
#      ignores, such as build output, are skipped);
#  (d) a Rust path of the driver in those files (`scylla_driver::` then
#      modules, then an item) goes through a module scylla-driver/src lacks.
# Greps only, no build: it runs in about a second.
set -euo pipefail
cd "$(dirname "$0")/.."

failed=0
fail() {
    echo "check-docs: $1" >&2
    failed=1
}

# Tracked and new (not ignored) files: never target/ or other build output
# (outside a git checkout: every file but target/ and .git/).
files() {
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git ls-files --cached --others --exclude-standard -- "$@" | while read -r f; do
            [[ -f "$f" ]] && echo "$f"
        done
    else
        local args=() pattern
        for pattern in "$@"; do args+=(${args[@]:+-o} -path "./$pattern"); done
        find . \( -path ./target -o -path ./.git \) -prune -o -type f \( "${args[@]}" \) -print | sed 's|^\./||'
    fi
}

docs=(README.md docs/*.md)
checked_docs=(README.md docs/*.md scripts/README.md examples/README.md)

# --- (a) environment variables ---------------------------------------------
mapfile -t rs_files < <(files '*.rs' | grep -v '^comparisons/')
mapfile -t sh_files < <(files '*.sh' '.ci/run' | grep -v '^comparisons/')
mapfile -t py_files < <(files '*.py' | grep -v '^comparisons/')

read_vars=$(
    {
        # Rust (examples, tests, benches, the doctests of README.md and docs/).
        grep -hoE '(env::var(_os)?|require!)\("SCYLLA_[A-Z0-9_]+"' "${rs_files[@]}" "${docs[@]}" || true
        # Shell: $VAR or ${VAR...}.
        grep -hoE '\$\{?SCYLLA_[A-Z0-9_]+' "${sh_files[@]}" || true
        # Python: os.environ / os.getenv.
        if ((${#py_files[@]})); then
            grep -hoE '(environ(\.get)?[[(]|getenv\()["'\'']SCYLLA_[A-Z0-9_]+' "${py_files[@]}" || true
        fi
    } | grep -oE 'SCYLLA_[A-Z0-9_]+' | sort -u
)
protocol_names=$(
    grep -rhoE '"SCYLLA_[A-Z0-9_]+"' scylla-cql/src scylla-testbed/src | tr -d '"' | sort -u
)
documented_vars=$(
    grep -hoE 'SCYLLA_[A-Z0-9_]*[A-Z0-9]\b' "${docs[@]}" | sort -u |
        comm -23 - <(echo "$protocol_names")
)
env_table=$(grep -E '^\| `SCYLLA_' docs/connecting.md | cut -d'|' -f2 | grep -oE 'SCYLLA_[A-Z0-9_]+' | sort -u)

for v in $(comm -23 <(echo "$documented_vars") <(echo "$read_vars")); do
    fail "$v is named in the docs ($(grep -lw "$v" "${docs[@]}" | tr '\n' ' ' | sed 's/ $//')) but no example, test, script or doctest reads it"
done
for v in $(comm -23 <(echo "$read_vars") <(echo "$env_table")); do
    fail "$v is read ($(grep -lE "(env::var(_os)?|require!)\(\"$v\"|\\\$\{?$v\b" "${rs_files[@]}" "${sh_files[@]}" "${docs[@]}" | head -3 | tr '\n' ' ' | sed 's/ $//')) but missing from the table in docs/connecting.md"
done

# --- (b) metric names --------------------------------------------------------
documented_metrics=$(grep -oE '^\| `scylla_driver_[a-z0-9_]+`' docs/observability.md | grep -oE 'scylla_driver_[a-z0-9_]+' | sort -u)
defined_metrics=$(grep -rhoE '"scylla_driver_[a-z0-9_]+"' scylla-driver/src | tr -d '"' | sort -u)
if [[ -z "$documented_metrics" ]]; then
    fail "no metric table found in docs/observability.md"
fi
for m in $(comm -23 <(echo "$documented_metrics") <(echo "$defined_metrics")); do
    fail "metric $m is in docs/observability.md but not defined in scylla-driver/src"
done
for m in $(comm -13 <(echo "$documented_metrics") <(echo "$defined_metrics")); do
    fail "metric $m is defined in scylla-driver/src ($(grep -rlF "\"$m\"" scylla-driver/src | head -1)) but missing from docs/observability.md's table"
done

# --- (c) paths -----------------------------------------------------------------
path_re='(?<![A-Za-z0-9_./@-])(?:\.\./)?(?:scylla-(?:driver-macros|driver|cql|testbed)|scripts|examples|tests|benches|docs|comparisons|fuzz|\.ci)/[A-Za-z0-9_./{},*-]*'
for doc in "${checked_docs[@]}"; do
    while IFS=: read -r line path; do
        path=${path#../}
        path=${path%%[.,]}
        path=${path%%[.,]}
        [[ -z "$path" ]] && continue
        # Brace lists (`routing/{table,ring}.rs`) expand; the characters are
        # restricted by the pattern above, so the expansion runs no code.
        if [[ "$path" == *"{"* ]]; then
            mapfile -t expanded < <(eval "printf '%s\n' $path")
        else
            expanded=("$path")
        fi
        for p in "${expanded[@]}"; do
            # Build output and other ignored paths (comparisons/target/...,
            # fuzz/artifacts/) exist only after a run.
            if git check-ignore -q "$p" 2>/dev/null ||
                [[ "$p" == */target/* || "$p" == fuzz/artifacts* ]]; then
                continue
            elif [[ "$p" == *"*"* ]]; then
                compgen -G "$p" >/dev/null || fail "$doc:$line: $p matches no file"
            elif [[ ! -e "$p" ]]; then
                fail "$doc:$line: $p does not exist"
            fi
        done
    done < <(grep -noP "$path_re" "$doc" || true)
done

# --- (d) module paths of the driver ----------------------------------------------
has_module() { # has_module DIR FILE NAME: NAME is a module of the module at DIR (file FILE)
    [[ -f "$1/$3.rs" || -f "$1/$3/mod.rs" ]] ||
        { [[ -f "$2" ]] && grep -qE "^\s*pub(\(crate\))? mod $3\b" "$2"; }
}
for doc in "${checked_docs[@]}"; do
    while IFS=: read -r line path; do
        IFS=: read -ra segs <<<"${path//::/:}"
        dir=scylla-driver/src file=scylla-driver/src/lib.rs
        # Every segment followed by another one is a module (the last one may
        # be an item), until the first type-like (capitalised) one.
        for ((i = 1; i < ${#segs[@]} - 1; i++)); do
            s=${segs[$i]}
            [[ "$s" =~ ^[a-z_][a-z0-9_]*$ ]] || break
            if ! has_module "$dir" "$file" "$s"; then
                fail "$doc:$line: $path: scylla-driver has no module $(IFS=::; echo "${segs[*]:1:$i}" | sed 's/:/::/g')"
                break
            fi
            file="$dir/$s.rs"
            [[ -f "$file" ]] || file="$dir/$s/mod.rs"
            dir="$dir/$s"
        done
    done < <(grep -noE '\bscylla_driver(::[A-Za-z_][A-Za-z0-9_]*)+' "$doc" || true)
done

if ((failed)); then
    echo "check-docs: the docs and the code disagree (above)" >&2
    exit 1
fi
echo "check-docs: ok (environment variables, metric names, paths and module paths match the code)"
