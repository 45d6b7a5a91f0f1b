# Sourced by the scripts that run the test cluster (`testbed`) as a separate
# process: cost-gate.sh, instructions-per-request.sh, paired-cpu.sh,
# compare-drivers.sh and python_driver_check.sh.
#
# `testbed_start BINARY OUTFILE [FLAGS...]` starts BINARY with FLAGS in the
# background, its standard output and error in OUTFILE, and waits (at most
# $testbed_timeout seconds, 20 by default) for its line
# `node 0: ADDRESS port PORT ...`. It then sets
#
#   testbed_pid   the process id
#   testbed_out   OUTFILE
#   testbed_ip    node 0's address (127.X.Y.1)
#   testbed_port  node 0's CQL port
#   testbed_addr  ADDRESS:PORT
#
# If the process exits first, or the line does not come in time (the process
# is then stopped), it prints why, naming OUTFILE, and OUTFILE's contents to
# standard error, and returns 1. Call it in the script's own shell, not in a
# command substitution, so that the pid reaches `testbed_stop`. Several
# testbeds may run at once; the variables describe the last one started.
#
# `testbed_wait_tls` (after a start with --tls-dir) waits the same way for
# the `tls: port PORT ...` line, which comes once DIR/ca.pem and the client
# files exist, and sets testbed_tls_port and testbed_tls_addr (ADDRESS:PORT).
# `testbed_wait_line ERE WHAT` waits for any line (grep -E) and sets
# testbed_line to the first that matches.
#
# `testbed_stop [SIGNAL]` sends SIGNAL (TERM by default) to every testbed
# started, waits at most 5 s for each to exit, kills what is left, and reaps
# them: the EXIT trap's call. With INT the testbed prints its per-node
# counters before it exits.
#
# Messages start with $testbed_who, the script's name by default.
#
# Scripts that take the binary from a shared target directory run a private
# copy (cp it into their temporary directory first): a build in another
# checkout can replace the file while the testbed runs.

testbed_who="$(basename "$0" .sh)"
testbed_timeout=20
testbed_pids=()
testbed_pid=""
testbed_out=""
testbed_ip=""
testbed_port=""
testbed_addr=""
testbed_tls_port=""
testbed_tls_addr=""
testbed_line=""

testbed_start() {
    local bin="$1" out="$2"
    shift 2
    testbed_out="$out"
    testbed_ip="" testbed_port="" testbed_addr="" testbed_tls_port="" testbed_tls_addr=""
    "$bin" "$@" > "$out" 2>&1 &
    testbed_pid=$!
    testbed_pids+=("$testbed_pid")
    testbed_wait_line '^node 0: [^ ]+ port [0-9]+ ' "node 0 line" || return 1
    local re='^node 0: ([^ ]+) port ([0-9]+) '
    [[ "$testbed_line" =~ $re ]] || return 1
    testbed_ip="${BASH_REMATCH[1]}"
    testbed_port="${BASH_REMATCH[2]}"
    testbed_addr="$testbed_ip:$testbed_port"
}

testbed_wait_tls() {
    testbed_wait_line '^tls: port [0-9]+ ' "tls: line" || return 1
    local re='^tls: port ([0-9]+) '
    [[ "$testbed_line" =~ $re ]] || return 1
    testbed_tls_port="${BASH_REMATCH[1]}"
    testbed_tls_addr="$testbed_ip:$testbed_tls_port"
}

testbed_wait_line() {
    local re="$1" what="$2" i status
    testbed_line=""
    for (( i = 0; i < testbed_timeout * 10; i++ )); do
        testbed_line="$(grep -m1 -E -- "$re" "$testbed_out" 2>/dev/null || true)"
        [[ -n "$testbed_line" ]] && return 0
        if ! kill -0 "$testbed_pid" 2>/dev/null; then
            # It may have printed the line just before it exited.
            testbed_line="$(grep -m1 -E -- "$re" "$testbed_out" 2>/dev/null || true)"
            [[ -n "$testbed_line" ]] && return 0
            status=0
            wait "$testbed_pid" 2>/dev/null || status=$?
            testbed_fail "exited (status $status) before it printed its $what"
            return 1
        fi
        sleep 0.1
    done
    testbed_stop_pid "$testbed_pid" TERM
    testbed_fail "printed no $what within $testbed_timeout s (stopped)"
    return 1
}

testbed_stop() {
    local p
    for p in ${testbed_pids[@]+"${testbed_pids[@]}"}; do
        testbed_stop_pid "$p" "${1:-TERM}"
    done
    testbed_pids=()
    testbed_pid=""
}

# Internal: one process, bounded.
testbed_stop_pid() {
    local p="$1" i
    kill -"$2" "$p" 2>/dev/null || true
    for (( i = 0; i < 50; i++ )); do
        kill -0 "$p" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$p" 2>/dev/null; then kill -KILL "$p" 2>/dev/null || true; fi
    wait "$p" 2>/dev/null || true
}

# Internal: the failure message, then the output so far.
testbed_fail() {
    {
        echo "$testbed_who: the testbed $1; its output, $testbed_out:"
        cat "$testbed_out" 2>/dev/null || true
    } >&2
}
