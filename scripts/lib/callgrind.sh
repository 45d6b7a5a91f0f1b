# Sourced by the scripts that count a client's instructions with valgrind's
# callgrind: cost-gate.sh and instructions-per-request.sh.
#
# `callgrind_count COMMAND [ARGS...]` runs COMMAND under callgrind (no
# profile file written; standard input from /dev/null, standard output
# discarded) and prints the instructions it executed (callgrind's
# "Collected" total). If the command fails or callgrind reports no total,
# it prints the command and the end of its output to standard error and
# returns 1.
#
# `callgrind_marginal N COUNTER [ARGS...]` prints the marginal cost of a
# request, (instructions(3N) - instructions(N)) / 2N, so that start-up,
# connection set-up and preparation drop out. COUNTER is a command (a shell
# function of the script) that `COUNTER REQUESTS ARGS...` runs one
# measurement of REQUESTS requests through callgrind_count and prints its
# count; the script's own arguments (binary, address, workload...) pass
# through ARGS. Returns 1 if either count fails. Aggregating several
# measurements (a median, a least) is the script's.
#
# Messages start with $callgrind_who, the script's name by default.

callgrind_who="$(basename "$0" .sh)"

callgrind_count() {
    local out status=0 count
    out="$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null </dev/null)" ||
        status=$?
    count="$(grep -oP 'Collected : \K[0-9]+' <<< "$out" | tail -n 1 || true)"
    if [[ "$status" != 0 || -z "$count" ]]; then
        {
            if [[ -z "$count" ]]; then
                echo "$callgrind_who: no instruction count from callgrind (status $status) for: $*"
            else
                echo "$callgrind_who: callgrind ended with status $status for: $*"
            fi
            echo "the end of its output:"
            tail -n 5 <<< "$out"
        } >&2
        return 1
    fi
    echo "$count"
}

callgrind_marginal() {
    local n="$1" counter="$2" small big
    shift 2
    small="$("$counter" "$n" "$@")" || return 1
    big="$("$counter" $((3 * n)) "$@")" || return 1
    echo $(( (big - small) / (2 * n) ))
}
