# The peer programs' cases (dtest, dtestcm, dtestsrq, dapltest), how both
# sides run and how their output is judged; sourced (after lib.sh) by the
# transport's script (dapl_peers.sh: libfabric on loopback; tests/vm/
# verbs-peers.sh: verbs in the Soft-RoCE VM), which sets:
#   ia addr pairing case   the dat.conf entry, the server address, the labels
#   dat_listening          a function PORT -> 0 when the DAT server listens
#                          (tcp_listening for libfabric tcp; rdma_cm ids for verbs)
# and may change these defaults (a slower device, a smaller machine):
: "${client_limit:=60}"       # seconds a client may run
: "${server_wait:=15}"        # seconds for a server to listen
: "${exit_wait:=20}"          # seconds for a server to end after its client
: "${line_wait:=10}"          # seconds for a server's closing line
: "${dtest_args:=-B 100}"     # dtest's default, -p and -c cases
: "${dtestcm_connections:=200}"
: "${iteration_divisor:=1}"

# ---- running both sides --------------------------------------------------------
sout=$tmp/server.out cout=$tmp/client.out
: >"$sout"; : >"$cout"
server_cmd="(none yet)" client_cmd="(none yet)" # for show(), under set -u

show() { show_outputs "$server_cmd" "$client_cmd"; }
# Where a live server's threads wait (gdb, when present and allowed to attach).
server_stacks() {
    local kid
    [ -n "$spid" ] && command -v gdb >/dev/null || return 0
    for kid in $(pgrep -P "$spid"); do
        echo "---- server threads (pid $kid):"
        timeout 30 gdb -p "$kid" -batch -ex "thread apply all bt 10" 2>/dev/null \
            | grep -E "^Thread|^#" | cut -c1-220 | head -n 80
    done
}
verdict_fail() {
    echo "FAIL: $case ($pairing): $*"
    show
    [ -n "${stacks:-}" ] && server_stacks
    exit 1
}
# start_server PROBE PORT CMD...: runs CMD line-buffered, waits until
# `PROBE PORT` says it listens (tcp_listening, or the caller's $dat_listening
# for the transport's own listeners).
start_server() {
    local probe=$1 port=$2; shift 2
    server_cmd="$*"
    $probe "$port" && verdict_fail "port $port is already in use before the server starts"
    timeout -k 5 120 stdbuf -oL -eL "$@" >"$sout" 2>&1 &
    spid=$!
    await_server "$server_wait" $probe "$port"
    case $? in
    1) verdict_fail "server exited before listening on port $port" ;;
    2) verdict_fail "server not listening on port $port after $server_wait s" ;;
    esac
}
# run_client LIMIT CMD...: the client, bounded by LIMIT seconds.
run_client() {
    local limit=$1 rc; shift
    client_cmd="$*"
    timeout -k 5 "$limit" stdbuf -oL -eL "$@" >"$cout" 2>&1 &
    cpid=$!
    wait "$cpid"; rc=$?
    cpid=
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && verdict_fail "client did not finish within $limit s"
    return 0
}
# wait_server_line PATTERN SECONDS: the server prints PATTERN (an ERE) in time.
wait_server_line() { wait_until "$2" grep -qE "$1" "$sout"; }
# wait_server_exit SECONDS: the server ends by itself.
server_gone() { ! kill -0 "$spid" 2>/dev/null; }
wait_server_exit() {
    wait_until "$1" server_gone || return 1
    wait "$spid"
    spid=
}
need() { # need FILE ERE WHAT
    grep -qE "$2" "$1" || verdict_fail "$3"
}
refuse() { # refuse FILE ERE WHAT: no line may match
    local hit
    hit=$(bad_report "$1" "$2")
    [ -z "$hit" ] || verdict_fail "$3 (count, line):"$'\n'"$hit"
}

# ---- dtest ---------------------------------------------------------------------
# dtest: the client learns the server's IA address over TCP port 15828, then
# connects to conn_qual 45248. -B is the burst count (iterations), -b the
# buffer size.
run_dtest() {
    local args=$1
    start_server tcp_listening 15828 dtest -P "$ia" -s $args
    run_client "$client_limit" dtest -P "$ia" -h "$addr" $args
    wait_server_exit "$exit_wait" || verdict_fail "dtest server still running $exit_wait s after the client ended"
    need "$sout" "DAPL Test Complete\. PASSED" "server did not print 'DAPL Test Complete. PASSED'"
    need "$cout" "DAPL Test Complete\. PASSED" "client did not print 'DAPL Test Complete. PASSED'"
    local s=$sout c=$cout
    if [[ " $args " == *" -c "* ]]; then
        # dtest -c waits on one CNO that both DTO EVDs feed; its collect_event
        # says the CNO "could return EVD's in any order", retries, and prints
        # this when the CNO woke for the other EVD (its completion came first).
        grep -v "WARNING: CNO notification: without EVD?" "$sout" >"$tmp/server.cno"; s=$tmp/server.cno
        grep -v "WARNING: CNO notification: without EVD?" "$cout" >"$tmp/client.cno"; c=$tmp/client.cno
    fi
    refuse "$s" "$bad_lines" "server reports"
    refuse "$c" "$bad_lines" "client reports"
    echo "ok: dtest $args: both sides 'DAPL Test Complete. PASSED'"
}
# "RDMA write PingPong: (1000 x 1) Total 183919.91 us: latency 91.96 us, BW 0.01 MB/s"
result_pingpong() {
    local lat
    lat=$(sed -nE 's/.*RDMA write PingPong: .* latency +([0-9.]+) us.*/\1/p' "$cout" | tail -n 1)
    [ -n "$lat" ] || verdict_fail "client printed no 'RDMA write PingPong: ... latency' line"
    echo "RESULT $case $lat us"
}
# "RDMA write (bi-direction): Total=..., 200 x 4194304, 2861.02 MB/sec"
result_bidir() {
    local bw
    bw=$(sed -nE 's/.*RDMA write \(bi-direction\):.* ([0-9.]+) MB\/sec.*/\1/p' "$cout" | tail -n 1)
    [ -n "$bw" ] && echo "RESULT $case $bw MB/s"
    return 0
}

# ---- dtestcm -------------------------------------------------------------------
run_dtestcm() {
    local n=$dtestcm_connections cps
    start_server tcp_listening 15828 dtestcm -P "$ia" -s -c $n
    run_client "$client_limit" dtestcm -P "$ia" -h "$addr" -c $n
    wait_server_exit "$exit_wait" || verdict_fail "dtestcm server still running $exit_wait s after the client ended"
    need "$sout" "ALL $n CONNECTED on Server" "server did not report 'ALL $n CONNECTED on Server!'"
    need "$cout" "ALL $n CONNECTED on Client" "client did not report 'ALL $n CONNECTED on Client!'"
    need "$sout" "DAPL Connection Test Complete" "server did not complete"
    need "$cout" "DAPL Connection Test Complete" "client did not complete"
    refuse "$sout" "$bad_lines" "server reports"
    refuse "$cout" "$bad_lines" "client reports"
    # " Connections:   367.60 usec, CPS 2720.36 Total 0.04 secs, poll_cnt=4122, Num=100"
    cps=$(sed -nE 's/.*Connections: .*CPS +([0-9.]+) .*Num=([0-9]+).*/\1 \2/p' "$cout" | tail -n 1)
    [ -n "$cps" ] || verdict_fail "client printed no 'Connections: ... CPS ...' line"
    [ "${cps#* }" = "$n" ] || verdict_fail "client counted ${cps#* } connections, not $n"
    echo "ok: dtestcm: $n connections on both sides"
    echo "RESULT $case ${cps% *} conn/s"
}

# ---- dtestsrq ------------------------------------------------------------------
# Both sides take every receive from one SRQ shared by all their connections;
# each message is checked (data, order per connection) and its buffer posted
# back to the SRQ; after each disconnect a side waits (without timeout) for
# an asynchronous event naming the EP (OFED's "last WQE reached"). The
# server listens on 45248. -b: there is no DAT_IB_TRANSPORT_MTU attribute.
run_dtestsrq() {
    local n=8 args="-b 4096 -c 8 -B 4 -t 10"
    start_server "$dat_listening" 45248 dtestsrq -P "$ia" -s $args
    run_client "$client_limit" dtestsrq -P "$ia" -h "$addr" $args
    wait_server_exit "$exit_wait" || stacks=1 verdict_fail "dtestsrq server still running $exit_wait s after the client ended"
    need "$sout" "ALL $n CONNECTED on server" "server did not report 'ALL $n CONNECTED on server!'"
    need "$cout" "ALL $n CONNECTED on client" "client did not report 'ALL $n CONNECTED on client!'"
    need "$sout" "DAPL RC SRQ Test Complete\." "server did not print 'DAPL RC SRQ Test Complete.'"
    need "$cout" "DAPL RC SRQ Test Complete\." "client did not print 'DAPL RC SRQ Test Complete.'"
    refuse "$sout" "$bad_lines" "server reports"
    refuse "$cout" "$bad_lines" "client reports"
    echo "ok: dtestsrq $args: both sides 'DAPL RC SRQ Test Complete.'"
}

# ---- dapltest --------------------------------------------------------------------
dapltest_server() { start_server "$dat_listening" 62000 dapltest -T S -D "$ia"; }
client_done='DT_cs_Client: =+ End of Work -- Client Exiting'
# Transaction test: dapltest -T T [opts] OPS...
run_transaction() {
    local opts=$1 ops=$2 threads eps wqe
    dapltest_server
    run_client $((client_limit + 30)) dapltest -T T -s "$addr" -D "$ia" $opts $ops
    need "$cout" "$client_done" "client did not reach 'End of Work'"
    refuse "$cout" "$bad_lines|syntax|usage" "client reports"
    need "$cout" "^----- Stats ---- :" "client printed no '----- Stats ----' summary"
    need "$cout" "^Total WQE +: +[0-9.]+ WQE/Sec" "client printed no 'Total WQE' line"
    # The server side of the test ends after the client's final sync and the
    # disconnect; it prints this line then.
    wait_server_line "Server: Transaction Test Finished for this client" "$line_wait" \
        || stacks=1 verdict_fail "server did not print 'Server: Transaction Test Finished for this client' within $line_wait s of the client's end (server test thread stuck)"
    refuse "$sout" "$bad_lines" "server reports"
    threads=$(sed -nE 's/^----- Stats ---- : ([0-9]+) threads, ([0-9]+) EPs.*/\1 \2/p' "$cout")
    wqe=$(sed -nE 's/^Total WQE +: +([0-9.]+) WQE\/Sec.*/\1/p' "$cout")
    echo "ok: dapltest -T T $opts $ops: client and server finished (${threads% *} threads, ${threads#* } EPs)"
    echo "RESULT $case $wqe WQE/s"
}
# Performance test: dapltest -T P [opts] OP
run_performance() {
    local opts=$1 op=$2 bw ops
    dapltest_server
    run_client $((client_limit + 30)) dapltest -T P -s "$addr" -D "$ia" $opts $op
    need "$cout" "$client_done" "client did not reach 'End of Work'"
    refuse "$cout" "$bad_lines|syntax|usage" "client reports"
    need "$cout" "^raw: " "client printed no 'raw:' statistics line"
    wait_server_line "Server: Finished performance test\. +Exiting\." "$line_wait" \
        || verdict_fail "server did not print 'Server: Finished performance test.  Exiting.' within $line_wait s"
    refuse "$sout" "$bad_lines" "server reports"
    bw=$(sed -nE 's/^ *Bandwidth +: +([0-9.]+) MB\/sec.*/\1/p' "$cout" | tail -n 1)
    ops=$(sed -nE 's/^ *Operation Throughput +: +([0-9.]+) ops\/sec.*/\1/p' "$cout" | tail -n 1)
    [ -n "$bw" ] || verdict_fail "client printed no 'Bandwidth : ... MB/sec' line"
    echo "ok: dapltest -T P $opts $op"
    echo "RESULT $case $bw MB/s"
    [ -n "$ops" ] && echo "RESULT $case-ops $ops ops/s"
    return 0
}
run_quit() {
    dapltest_server
    run_client "$client_limit" dapltest -T Q -s "$addr" -D "$ia"
    need "$cout" "$client_done" "quit client did not reach 'End of Work'"
    refuse "$cout" "$bad_lines" "quit client reports"
    wait_server_exit "$exit_wait" || verdict_fail "server still running $exit_wait s after 'dapltest -T Q'"
    need "$sout" "DT_cs_Server \($ia\): +Exiting\." "server did not print 'DT_cs_Server ($ia):  Exiting.'"
    refuse "$sout" "$bad_lines" "server reports"
    echo "ok: dapltest -T Q stopped the server"
}

# ---- the cases -------------------------------------------------------------------
# dtest: $dtest_args sizes the buffers (-b) and the bursts (-B); dapltest
# iterations are divided by $iteration_divisor (a slow device, a small VM).
run_case() {
    local k=$iteration_divisor
    case $case in
    dtest)   run_dtest "$dtest_args"; result_bidir ;;
    dtest-p) run_dtest "-p $dtest_args"; result_bidir ;;
    dtest-c) run_dtest "-c $dtest_args"; result_bidir ;;
    dtest-W) run_dtest "-W -B 1000"; result_pingpong ;;
    dtest-D) run_dtest "-D -b 65536 -B $((100 / k))"; result_pingpong ;;
    dtestcm) run_dtestcm ;;
    dtestsrq) run_dtestsrq ;;
    dapltest-T-SR) run_transaction "-i $((1000 / k)) -t 1 -w 1" "client SR 256 server SR 256" ;;
    dapltest-T-RR) run_transaction "-i $((500 / k)) -t 1 -w 1" "client RR 4096 client SR 256 server RR 4096 server SR 256" ;;
    dapltest-T-RW) run_transaction "-i $((500 / k)) -t 1 -w 1" "client RW 4096 1 client SR 256 server RW 4096 1 server SR 256" ;;
    dapltest-T-V)  run_transaction "-V -t 2 -w 4 -i $((200 / k))" "client RW 4096 1 server RW 2048 4 client SR 1024 4 server SR 4096 2" ;;
    dapltest-P-RW) run_performance "-i $((2048 / k)) -p 16 -m b" "RW 65536 2" ;;
    dapltest-P-RR) run_performance "-i $((2048 / k)) -p 16 -m b" "RR 65536 2" ;;
    dapltest-Q)    run_quit ;;
    *) fail "unknown case '$case'" ;;
    esac
    echo "PASS: $case ($pairing)"
}
