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
# peer_preload: a library the peer programs (not the script's tools) preload,
# e.g. the TSan runtime for our TSan-built libraries (tests/peers/tsan_peers.sh).
: "${peer_preload:=}"
# PEER_CLIENT_WRAPPER: a command the client runs under, e.g. valgrind
# --tool=callgrind (docs/performance.md profiles dtest -W that way).
: "${PEER_CLIENT_WRAPPER:=}"
: "${dtestx_atomics:=no}"     # yes: the IA offers fetch and add and compare and swap

# ---- running both sides --------------------------------------------------------
sout=$tmp/server.out cout=$tmp/client.out
: >"$sout"; : >"$cout"
server_cmd="(none yet)" client_cmd="(none yet)" # for show(), under set -u
client_rc=0                                       # the last client's exit status

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
# start_server PROBE PORT CMD...: runs CMD line-buffered (for at most
# $server_limit s, default 120; stderr left unbuffered, as glibc has it:
# malloc_stats, which the soak's heap probe calls, would otherwise take the buffer from
# malloc under its own arena locks and hang), waits until
# `PROBE PORT` says it listens (tcp_listening, or the caller's $dat_listening
# for the transport's own listeners). With $server_cpu (run_client:
# $client_cpu) set, the peer runs on that CPU only (taskset).
start_server() {
    local probe=$1 port=$2; shift 2
    local try rc
    server_cmd="$*"
    $probe "$port" && verdict_fail "port $port is already in use before the server starts"
    for try in 1 2 3; do
        timeout -k 5 "${server_limit:-120}" ${peer_preload:+env LD_PRELOAD=$peer_preload} \
            ${server_cpu:+taskset -c $server_cpu} stdbuf -oL "$@" >"$sout" 2>&1 &
        spid=$!
        await_server "$server_wait" $probe "$port"
        rc=$?
        # The kernel may release the previous case's rdma_cm id on the
        # conn_qual a moment after that process exited: a server refused
        # with DAT_CONN_QUAL_IN_USE starts again, a little later. A port
        # that stays taken (one a server never released) fails all three.
        [ $rc = 1 ] && [ $try -lt 3 ] && grep -q "DAT_CONN_QUAL_IN_USE" "$sout" || break
        echo "note: server try $try: its conn_qual was still in use; again in 2 s. The kernel's cm_ids:"
        rdma res show cm_id 2>/dev/null | sed 's/^/    /' | head -n 20
        wait "$spid" 2>/dev/null; spid=
        sleep 2
    done
    case $rc in
    1) verdict_fail "server exited before listening on port $port" ;;
    2) verdict_fail "server not listening on port $port after $server_wait s" ;;
    esac
}
# run_client LIMIT CMD...: the client, bounded by LIMIT seconds.
run_client() {
    local limit=$1 rc; shift
    client_cmd="$*"
    timeout -k 5 "$limit" ${peer_preload:+env LD_PRELOAD=$peer_preload} ${client_cpu:+taskset -c $client_cpu} \
        stdbuf -oL -eL $PEER_CLIENT_WRAPPER "$@" >"$cout" 2>&1 &
    cpid=$!
    wait "$cpid"; rc=$?
    cpid= client_rc=$rc
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
refuse_except() { # refuse_except FILE ALLOWED_ERE ERE WHAT: refuse, but for the lines ALLOWED_ERE matches
    grep -vE "$2" "$1" >"$tmp/rest.out"
    refuse "$tmp/rest.out" "$3" "$4"
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

# ---- dtestx --------------------------------------------------------------------
# The InfiniBand extensions (dat_ib_extensions.h): each side writes its
# buffer to the other with immediate data (0x7777 from the client, 0x1111
# from the server) and checks both extended events, the immediate and the
# length of the receive it consumed; then compare and swap and fetch and
# add, which it skips ("not supported by HW") when dat_ia_query's
# DAT_IB_CMP_AND_SWAP / DAT_IB_FETCH_AND_ADD attributes are not TRUE. The
# side channel is TCP port 15828, the server's conn_qual 31112.
# $dtestx_atomics says which the IA must do: run them (yes) or skip them.
# dtestx races with itself: its server creates the PSP only after the side
# channel, where its client connects at once; a client first is refused by
# nobody listening (DAT_CONNECTION_EVENT_NON_PEER_REJECTED, 0x4003, "!conn
# established"). That one outcome is run again, at most five times, and said so.
run_dtestx() {
    local side f try
    # (dtestx.c: send_server_params, then dat_psp_create.) Under ctest -j2
    # the client won 3 times in a row once.
    for try in 1 2 3 4 5 6; do
        start_server tcp_listening 15828 dtestx -P "$ia" -s
        run_client "$client_limit" dtestx -P "$ia" -h "$addr"
        grep -q "unexpected event, !conn established: 0x4003" "$cout" && [ $try -lt 6 ] || break
        echo "note: dtestx run $try: its client connected before its server listened (NON_PEER_REJECTED); again"
        kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; spid=
        wait_until 10 eval '! tcp_listening 15828'
    done
    wait_server_exit "$exit_wait" || stacks=1 verdict_fail "dtestx server still running $exit_wait s after the client ended"
    [ "$client_rc" = 0 ] || verdict_fail "dtestx client exited with status $client_rc"
    for side in server client; do
        f=$sout; [ $side = client ] && f=$cout
        need "$f" "Running as (Server|Client) - $ia .* v209" "$side did not see extension version 209"
        need "$f" "RDMA_WRITE_WITH_IMMEDIATE_DATA test - PASSED" "$side: write with immediate data did not pass"
        if [ "$dtestx_atomics" = yes ]; then
            need "$f" "CMP_SWAP test - PASSED" "$side: compare and swap did not pass"
            need "$f" "FETCH_ADD test - PASSED" "$side: fetch and add did not pass"
        else
            need "$f" "Skipping CMP and SWAP" "$side ran compare and swap on an IA that has no atomics"
            need "$f" "Skipping FETCH and ADD" "$side ran fetch and add on an IA that has no atomics"
        fi
        need "$f" "IB extension test - immed/atomic test PASSED" "$side did not print 'IB extension test - immed/atomic test PASSED'"
        refuse "$f" "$bad_lines" "$side reports"
    done
    need "$sout" "Server received immed_data=0x7777" "server did not receive the client's immediate data"
    need "$cout" "Client received immed_data=0x1111" "client did not receive the server's immediate data"
    echo "ok: dtestx: write with immediate data both ways; atomics ${dtestx_atomics/no/skipped (not offered)}"
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
# server listens on 45248. dtestsrq-defaults: no arguments but the IA and the
# roles (one connection, buffers of DAT_IB_TRANSPORT_MTU bytes).
run_dtestsrq() {
    local n=8 args="-b 4096 -c 8 -B 4 -t 10"
    if [ "$case" = dtestsrq-defaults ]; then
        n=1 args=""
    fi
    start_server "$dat_listening" 45248 dtestsrq -P "$ia" -s $args
    run_client "$client_limit" dtestsrq -P "$ia" -h "$addr" $args
    wait_server_exit "$exit_wait" || stacks=1 verdict_fail "dtestsrq server still running $exit_wait s after the client ended"
    need "$sout" "ALL $n CONNECTED on server" "server did not report 'ALL $n CONNECTED on server!'"
    need "$cout" "ALL $n CONNECTED on client" "client did not report 'ALL $n CONNECTED on client!'"
    need "$sout" "DAPL RC SRQ Test Complete\." "server did not print 'DAPL RC SRQ Test Complete.'"
    need "$cout" "DAPL RC SRQ Test Complete\." "client did not print 'DAPL RC SRQ Test Complete.'"
    refuse "$sout" "$bad_lines" "server reports"
    refuse "$cout" "$bad_lines" "client reports"
    echo "ok: dtestsrq ${args:-(defaults)}: both sides 'DAPL RC SRQ Test Complete.'"
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
    quit_server
}
# quit_server: `dapltest -T Q` ends the running dapltest server, which exits
# by itself (its IA closed, its threads joined).
quit_server() {
    run_client "$client_limit" dapltest -T Q -s "$addr" -D "$ia"
    need "$cout" "$client_done" "quit client did not reach 'End of Work'"
    refuse "$cout" "$bad_lines" "quit client reports"
    wait_server_exit "$exit_wait" || verdict_fail "server still running $exit_wait s after 'dapltest -T Q'"
    need "$sout" "DT_cs_Server \($ia\): +Exiting\." "server did not print 'DT_cs_Server ($ia):  Exiting.'"
    refuse "$sout" "$bad_lines" "server reports"
    echo "ok: dapltest -T Q stopped the server"
}

# ---- dapltest -T L: limits, no server ---------------------------------------------
# `dapltest -T L -w 8 -m 100 limit_X` opens 8 IAs (each with a PZ, CNO, EVDs,
# an EP... up to the object under test) and then creates up to 100 of the
# object under test, round-robin over them; it reports how many it made and
# counts a failed creation as the limit, not as an error (its verdict is
# wrong only when preparing or freeing fails: "error occurs ..."). We judge
# harder: all 100 must be made, nothing else may fail. Its limit_ep..
# limit_size_lmr give the EPs of IAs 2..8 the connection EVD of IA 1
# (accepted: core/ep.cpp, connect_evd_cast). limit_psp and limit_rsp listen
# on qualifiers 0xAffab1e + i, above 65535: ports 43414.. (core/sockaddr.hpp,
# port_of_qual), all 100 of them.
run_limit() {
    local test=$1 what=$2 made
    run_client "$client_limit" dapltest -T L -D "$ia" -w 8 -m 100 "$test"
    need "$cout" "^Limitation Test +$test\$" "dapltest did not start '$test'"
    refuse "$cout" "error occurs|bogus|signal|out of memory|no memory|Cannot find" "dapltest reports"
    case $test in
    limit_rpost)
        # Receives are posted to each of the 8 EPs (default max_recv_dtos)
        # until one fails, which must be the queue being full
        # (dat_ep_post_recv(3DAT): DAT_INSUFFICIENT_RESOURCES). dapltest then
        # prints a second "posted per EP" line one higher (its loop counter
        # advances once more before it stops): the first line is the count.
        need "$cout" "dat_ep_post_recv fails: DAT_INSUFFICIENT_RESOURCES" \
            "the receive past max_recv_dtos did not fail with DAT_INSUFFICIENT_RESOURCES"
        made=$(sed -nE 's/.*recv buffers posted per EP: ([0-9]+).*/\1/p' "$cout" | head -n 1)
        [ -n "$made" ] && [ "$made" -ge 16 ] || verdict_fail "fewer than 16 receives per EP ('$made')"
        need "$cout" "\(total posted: $((made * 8))\)" "total posted is not 8 x $made"
        refuse_except "$cout" "dat_ep_post_recv fails: DAT_INSUFFICIENT_RESOURCES" \
            "fail|error" "dapltest reports besides the full receive queue"
        ;;
    limit_size_lmr)
        # Sizes double from 4 KiB until a registration fails or 2^31 would
        # overflow dapltest's counter: every size up to 1 GiB must register
        # (max_lmr_block_size is 4 GiB - 1).
        need "$cout" "LMR of 0x40000000 bytes OK - stopping now\." "not every LMR size up to 1 GiB registered"
        refuse "$cout" "fail|error" "dapltest reports"
        ;;
    *)
        need "$cout" "${what}: 100\$" "dapltest did not reach '${what}: 100'"
        refuse "$cout" "fail|error" "dapltest reports"
        ;;
    esac
    [ "$client_rc" = 0 ] || verdict_fail "dapltest exited with status $client_rc"
    echo "ok: dapltest -T L $test"
}

# ---- dapltest -T F: functional tests ----------------------------------------------
# `dapltest -T F -f FEATURE [caseN...]` prints "Result: PASS" for a case even
# when one of its checks failed ("... failed in file test/dapl_fft_X.c, line
# N"): both are judged. -s names the server (no test of these features
# connects; without it dapltest complains that getaddrinfo failed).
run_fft() {
    local feature=$1 cases=$2 expect=$3 n
    run_client "$client_limit" dapltest -T F -D "$ia" -s "$addr" -f "$feature" $cases
    refuse "$cout" "failed in file|Result: FAIL|signal|error|usage|don't know" "dapltest reports"
    n=$(grep -c "^Result: PASS" "$cout")
    [ "$n" = "$expect" ] || verdict_fail "$n of $expect cases printed 'Result: PASS'"
    [ "$client_rc" = 0 ] || verdict_fail "dapltest exited with status $client_rc"
    echo "ok: dapltest -T F -f $feature $cases: $n cases passed"
}
# mem case2 registers 0 bytes at address NULL and expects DAT_LENGTH_ERROR;
# dat_lmr_create(3DAT) lists no DAT_LENGTH_ERROR (dat_error.h: a local buffer
# too small for RDMA data) but DAT_INVALID_PARAMETER for an invalid argument,
# which we return (the address comes first: DAT_INVALID_ARG3). Judged: the
# other four cases strictly, case2's one failed check and the code we gave.
run_fft_mem() {
    run_fft mem "case0 case1 case3 case4" 4
    run_client "$client_limit" dapltest -T F -D "$ia" -s "$addr" -f mem case2
    need "$cout" "^Error = -?[0-9]+, DAT_INVALID_PARAMETER DAT_INVALID_ARG3" \
        "mem case2 (0-byte LMR at NULL) did not get DAT_INVALID_PARAMETER DAT_INVALID_ARG3"
    [ "$(grep -c "failed in file" "$cout")" = 1 ] || verdict_fail "mem case2: more than the documented check failed"
    refuse_except "$cout" "failed in file test/dapl_fft_mem.c, line [0-9]+\$|^Error = " \
        "fail|error|signal" "mem case2 reports besides the documented DAT_LENGTH_ERROR check"
    echo "ok: dapltest -T F -f mem case2: DAT_INVALID_PARAMETER where dapltest wants DAT_LENGTH_ERROR (documented)"
}
# queryinfo: 18 cases; case5 (dat_cr_query) is "tested in the connmgt test"
# and prints "Result: UNSUPP". Over OFED's libdat2, cases 13 and 15 pass the
# consumer's IA handle to dat_cno_query/dat_evd_query; OFED's IA handles are
# small integers (1, 2, ...) that its libdat2 dereferences as a provider
# table before any provider sees the call (SIGSEGV inside OFED's
# dat_cno_query/dat_evd_query): they run in the "ours" pairing only.
run_fft_queryinfo() {
    if [ "$pairing" = ofed ]; then
        run_fft queryinfo "case0 case1 case2 case3 case4 case6 case7 case8 case9 case10 case11 case12 case14 case16 case17" 15
    else
        run_fft queryinfo "" 17
        need "$cout" "^Result: UNSUPP" "queryinfo case5 did not print dapltest's 'Result: UNSUPP'"
    fi
}

# ---- dapltest -T T -r: Reserved Service Points --------------------------------------
# The server makes one RSP per EP (dat_rsp_create), the client connects, the
# server checks the request and accepts it with DAT_HANDLE_NULL. Known
# deviation, documented: dapltest's DT_cr_check wants the RSP's handle in the
# request event's sp_handle, where dat.h (DAT_CR_ARRIVAL_EVENT_DATA) says "If
# the Service Point was Reserved, sp_handle is DAT_HANDLE_NULL"; so its server
# rejects the request ("PSP mismatch (got 0x(nil) ...)") and the RSP, having
# generated its one request, turns the client's retries away; dapltest's
# failure path keeps the RSP (hence its dat_evd_free and graceful
# dat_ia_close complaints). Judged: the request reaches the RSP's EVD with
# the RSP's qualifier and a CR handle, dapltest's reject reaches the client
# as DAT_CONNECTION_EVENT_PEER_REJECTED, the RSP refuses every retry (the
# provider's refusal: NON_PEER_REJECTED), and no side reports anything else.
run_transaction_rsp() {
    local allowed
    dapltest_server
    run_client $((client_limit + 30)) dapltest -T T -s "$addr" -D "$ia" -r -i 100 -t 1 -w 1 client SR 256 server SR 256
    need "$cout" "$client_done" "client did not reach 'End of Work'"
    wait_server_line "Server: Transaction Test Finished for this client" "$line_wait" \
        || stacks=1 verdict_fail "server did not finish the test within $line_wait s of the client's end"
    need "$sout" "^Test Error: Server CR data problem" "the server did not check an RSP request"
    need "$sout" "PSP mismatch \(got 0x\(nil\) wanted 0x" "the RSP request's sp_handle is not DAT_HANDLE_NULL (dat.h)"
    refuse "$sout" "conn_qual mismatch|NULL cr_handle|dat_cr_reject error" "the RSP request was wrong"
    need "$cout" "conn_event_wait DAT_CONNECTION_EVENT_PEER_REJECTED" "the client saw no PEER_REJECTED"
    refuse_except "$cout" "^Warning: conn_event_wait DAT_CONNECTION_EVENT_(NON_)?PEER_REJECTED\$|retrying connection\.\.\.\$|dat_ep_disconnect \(abrupt\) #0 error DAT_INVALID_STATE DAT_INVALID_STATE_EP_UNCONNECTED\$" \
        "$bad_lines|syntax|usage" "client reports besides the rejections"
    allowed='^Test Error: Server CR data problem|PSP mismatch \(got 0x\(nil\)|dat_ep_disconnect \(abrupt\) #0 error DAT_INVALID_STATE DAT_INVALID_STATE_EP_UNCONNECTED|dat_evd_free \(creq\) error: DAT_INVALID_STATE DAT_INVALID_STATE_EVD_IN_USE'
    refuse_except "$sout" "$allowed" "$bad_lines" "server reports besides dapltest's documented sp_handle check"
    echo "ok: dapltest -T T -r: RSP request delivered and checked; sp_handle DAT_HANDLE_NULL per dat.h (dapltest wants the RSP: documented)"
}

# ---- load and soak ---------------------------------------------------------------
# dapltest transaction tests with 8 threads x 8 endpoints and data validation
# (-V), client round after client round against one server for
# $soak_seconds and at least three rounds: every round moves ~3 GB in ~700k
# operations over 64 connections, so a leak per operation or per connection
# shows. The server is sampled between rounds (the client's 64 connections
# gone), from the end of round 2 (warm: each PZ is a libfabric domain of its
# own, opened and closed by every client round) to the last:
# - its heap in use, glibc's own count (malloc_stats, which a probe
#   preloaded into the server prints on request, tests/peers/heap_probe.c):
#   beyond $soak_heap_kib KiB fails, a leak of 4 KiB per connection;
# - its resident memory once malloc_trim(0) has given back what malloc keeps
#   free: beyond $soak_rss_kib KiB fails, memory held outside malloc. Not
#   the plain RSS: the server's threads spread their blocks over glibc's
#   arenas, which keep the pages of freed blocks, so the RSS grows while
#   the heap in use does not;
# - its threads and open descriptors: beyond $soak_fds fails.
# Each client is sampled 3 s into its round (connected, buffers registered,
# warm) against the most it reaches later in the round (every 0.5 s):
# RSS beyond $soak_client_rss_kib KiB (its allocator is still warming up) or
# descriptors beyond $soak_fds fail. The heap in use is also judged under
# heaptrack, which sees every allocation, by dapltest-soak-heap (below).
: "${soak_seconds:=60}"
: "${soak_iterations:=1500}" # per round; ~10 s each on the 2-core CI machine
# A fixed mmap threshold (the default, 128 KiB, set by tunable): glibc
# otherwise raises it to the size of the first mapped block freed, and
# libfabric's tcp endpoint takes two 459200-byte buffer pools per endpoint.
soak_tunables=glibc.malloc.mmap_threshold=131072
: "${soak_heap_kib:=256}"
: "${soak_rss_kib:=6144}"
: "${soak_client_rss_kib:=8192}"
: "${soak_fds:=2}"
proc_rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
proc_fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
proc_threads() { awk '/^Threads:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
# server_heap PID: trims PID's heap and prints "HEAP_KIB RSS_KIB" (heap in
# use from malloc_stats' total, which the server's heap probe prints on its
# stderr, $sout, and removes the request file once it has).
server_heap() {
    local totals0 heap
    totals0=$(grep -c "^Total (incl. mmap):" "$sout")
    : >"$DAT2_HEAP_PROBE_REQUEST"
    wait_until 10 eval '[ ! -e "$DAT2_HEAP_PROBE_REQUEST" ]' \
        || { echo "the server's heap probe ($DAT2_HEAP_PROBE_LIB) did not answer within 10 s" >&2; return 1; }
    [ "$(grep -c "^Total (incl. mmap):" "$sout")" -gt "$totals0" ] \
        || { echo "the heap probe answered, but no new malloc_stats total is in the server's output" >&2; return 1; }
    heap=$(awk '/^Total \(incl. mmap\):/ { t = 1; next } t && /^in use bytes/ { v = $NF; t = 0 } END { print v }' "$sout")
    [ -n "$heap" ] || { echo "no 'in use bytes' after malloc_stats' total" >&2; return 1; }
    echo "$((heap / 1024)) $(proc_rss "$1")"
}
soak_ops="client RW 4096 1 server RW 2048 4 client SR 1024 4 server SR 4096 2"
soak_server_count() { grep -c "Server: Transaction Test Finished for this client" "$sout"; }
soak_server_done() { [ "$(soak_server_count)" -ge "$soak_finished" ]; }
run_soak() {
    local srv start now round=0 cpid_real rc
    local s_heap0= s_rss0= s_fds0= s_thr0= s_heap1 s_rss1 s_fds1 s_thr1 c_rss0 c_fds0 c_rss1 c_fds1 worst_c_rss=0 worst_c_fds=0 rounds_judged=0
    export GLIBC_TUNABLES=${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}$soak_tunables
    [ -n "${DAT2_HEAP_PROBE_LIB:-}" ] && [ -f "$DAT2_HEAP_PROBE_LIB" ] \
        || fail "DAT2_HEAP_PROBE_LIB names no library (the build's libdat2_heap_probe.so, tests/CMakeLists.txt): the soak reads the server's heap through it"
    export DAT2_HEAP_PROBE_REQUEST=$tmp/heap.request
    rm -f "$DAT2_HEAP_PROBE_REQUEST"
    # Within dapl_peers.sh's own limit for the soak (240 s).
    peer_preload=${peer_preload:+$peer_preload:}$DAT2_HEAP_PROBE_LIB server_limit=230 dapltest_server
    srv=$(pgrep -P "$spid" | head -n 1)
    [ -n "$srv" ] && [ -d "/proc/$srv" ] || verdict_fail "cannot find the dapltest server process under $spid"
    start=$(date +%s)
    while :; do
        round=$((round + 1))
        client_cmd="dapltest -T T -V -t 8 -w 8 -i $soak_iterations -s $addr -D $ia $soak_ops"
        timeout -k 5 "$((client_limit + 30))" stdbuf -oL -eL $client_cmd >"$cout" 2>&1 &
        cpid=$!
        c_rss0= c_fds0= c_rss1= c_fds1=
        sleep 3
        while kill -0 "$cpid" 2>/dev/null; do
            cpid_real=$(pgrep -P "$cpid" | head -n 1)
            if [ -n "$cpid_real" ] && [ -d "/proc/$cpid_real" ]; then
                local r f
                r=$(proc_rss "$cpid_real") f=$(proc_fds "$cpid_real")
                if [ -n "$r" ] && [ "$f" -gt 0 ]; then
                    [ -z "$c_rss0" ] && c_rss0=$r c_fds0=$f c_rss1=$r c_fds1=$f
                    [ "$r" -gt "$c_rss1" ] && c_rss1=$r
                    [ "$f" -gt "$c_fds1" ] && c_fds1=$f
                fi
            fi
            sleep 0.5
        done
        wait "$cpid"; rc=$?
        cpid=
        [ $rc -eq 124 ] || [ $rc -eq 137 ] && verdict_fail "soak round $round: client did not finish within $((client_limit + 30)) s"
        need "$cout" "$client_done" "soak round $round: client did not reach 'End of Work'"
        refuse "$cout" "$bad_lines|syntax|usage" "soak round $round: client reports"
        need "$cout" "^----- Stats ---- : 8 threads, 8 EPs" "soak round $round: client printed no '8 threads, 8 EPs' summary (8 EPs per thread)"
        soak_finished=$round
        wait_until "$line_wait" soak_server_done \
            || stacks=1 verdict_fail "soak round $round: the server finished only $(soak_server_count) client tests"
        refuse "$sout" "$bad_lines" "soak round $round: server reports"
        if [ -n "$c_rss0" ]; then
            echo "soak round $round: client RSS $c_rss0 -> at most $c_rss1 KiB, fds $c_fds0 -> at most $c_fds1"
            [ $((c_rss1 - c_rss0)) -gt "$worst_c_rss" ] && worst_c_rss=$((c_rss1 - c_rss0))
            [ $((c_fds1 - c_fds0)) -gt "$worst_c_fds" ] && worst_c_fds=$((c_fds1 - c_fds0))
            rounds_judged=$((rounds_judged + 1))
        fi
        # The server between rounds: all 64 of the client's connections gone.
        sleep 0.5
        [ -d "/proc/$srv" ] || verdict_fail "soak round $round: the server process is gone"
        read -r s_heap1 s_rss1 < <(server_heap "$srv" 2>"$tmp/heap.err") \
            || verdict_fail "soak round $round: cannot read the server's heap: $(cat "$tmp/heap.err")"
        s_fds1=$(proc_fds "$srv") s_thr1=$(proc_threads "$srv")
        if [ "$round" = 2 ]; then s_heap0=$s_heap1 s_rss0=$s_rss1 s_fds0=$s_fds1 s_thr0=$s_thr1; fi
        echo "soak round $round: server heap in use $s_heap1 KiB, RSS after malloc_trim $s_rss1 KiB, fds $s_fds1, threads $s_thr1"
        now=$(date +%s)
        [ $((now - start)) -ge "$soak_seconds" ] && [ "$round" -ge 3 ] && break
    done
    [ "$rounds_judged" -ge 1 ] || verdict_fail "soak: no client round lived long enough to be sampled twice"
    echo "soak: $round rounds (8 threads x 8 EPs, -V) in $((now - start)) s; server after round 2 -> after round $round:" \
         "heap in use $s_heap0 -> $s_heap1 KiB, trimmed RSS $s_rss0 -> $s_rss1 KiB, fds $s_fds0 -> $s_fds1, threads $s_thr0 -> $s_thr1;" \
         "clients' worst growth within a round: RSS +$worst_c_rss KiB, fds +$worst_c_fds"
    [ $((s_heap1 - s_heap0)) -le "$soak_heap_kib" ] || verdict_fail "soak: the server's heap in use grew by $((s_heap1 - s_heap0)) KiB (bound $soak_heap_kib)"
    [ $((s_rss1 - s_rss0)) -le "$soak_rss_kib" ] || verdict_fail "soak: the server's RSS after malloc_trim grew by $((s_rss1 - s_rss0)) KiB (bound $soak_rss_kib)"
    [ $((s_fds1 - s_fds0)) -le "$soak_fds" ] || verdict_fail "soak: server open descriptors grew by $((s_fds1 - s_fds0)) (bound $soak_fds)"
    [ $((s_thr1 - s_thr0)) -le "$soak_fds" ] || verdict_fail "soak: the server's threads grew by $((s_thr1 - s_thr0)) (bound $soak_fds)"
    [ "$worst_c_rss" -le "$soak_client_rss_kib" ] || verdict_fail "soak: a client's RSS grew by $worst_c_rss KiB within its round (bound $soak_client_rss_kib)"
    [ "$worst_c_fds" -le "$soak_fds" ] || verdict_fail "soak: a client's open descriptors grew by $worst_c_fds within its round (bound $soak_fds)"
    echo "RESULT $case $((now - start)) s"
}

# ---- the soak's heap in use (heaptrack) --------------------------------------------
# The server runs under heaptrack, which records every allocation; between
# rounds (the client's 64 connections gone) the heap in use must come back
# to what it was after the first round, within $heap_growth_kib KiB. This is
# what a leak changes, whatever glibc keeps of freed memory in the RSS.
: "${heap_rounds:=4}"
: "${heap_iterations:=300}"
: "${heap_growth_kib:=256}"
run_soak_heap() {
    local t0 r t_end t_start windows=$tmp/heap.windows troughs
    command -v heaptrack >/dev/null && command -v heaptrack_print >/dev/null \
        || fail "heaptrack not installed (apt-get install heaptrack)"
    now_s() { date +%s.%N; }
    t0=$(now_s)
    start_server "$dat_listening" 62000 heaptrack -o "$tmp/heap" dapltest -T S -D "$ia"
    : >"$windows"
    for r in $(seq 1 "$heap_rounds"); do
        t_start=$(now_s)
        [ "$r" -gt 1 ] && echo "$t_end $t_start" >>"$windows"
        run_client $((client_limit + 30)) dapltest -T T -V -t 8 -w 8 -i "$heap_iterations" -s "$addr" -D "$ia" $soak_ops
        need "$cout" "$client_done" "heap round $r: client did not reach 'End of Work'"
        refuse "$cout" "$bad_lines|syntax|usage" "heap round $r: client reports"
        soak_finished=$r
        wait_until "$line_wait" soak_server_done \
            || stacks=1 verdict_fail "heap round $r: the server finished only $(soak_server_count) client tests"
        t_end=$(now_s)
        sleep 1.5
    done
    quit_server
    heaptrack_print -f "$tmp"/heap.*zst -M "$tmp/heap.massif" >"$tmp/heap.txt" 2>&1 \
        || verdict_fail "heaptrack_print failed: $(tail -n 3 "$tmp/heap.txt")"
    # The least heap in use within each gap between rounds (times relative to
    # heaptrack's start, ~t0).
    troughs=$(awk -v t0="$t0" '
        NR == FNR { a[NR] = $1 - t0; b[NR] = $2 - t0; n = NR; next }
        /^time=/ { t = substr($0, 6) + 0 }
        /^mem_heap_B=/ { h = substr($0, 12) + 0
            for (i = 1; i <= n; i++) if (t >= a[i] && t <= b[i] && (!(i in m) || h < m[i])) m[i] = h }
        END { for (i = 1; i <= n; i++) printf "%s ", (i in m) ? m[i] : "none"; print "" }' "$windows" "$tmp/heap.massif")
    echo "heap in use between rounds (bytes): $troughs"
    grep -E "^peak heap memory consumption|^total memory leaked" "$tmp/heap.txt"
    set -- $troughs
    [ $# -ge 2 ] || verdict_fail "fewer than 2 gaps between rounds were measured"
    for r in "$@"; do [ "$r" != none ] || verdict_fail "heaptrack recorded no snapshot within a gap between rounds"; done
    local first=$1 last=${!#}
    [ $((last - first)) -le $((heap_growth_kib * 1024)) ] \
        || verdict_fail "the server's heap in use grew by $(((last - first) / 1024)) KiB from the first gap between rounds to the last (bound $heap_growth_kib KiB): a leak"
    echo "ok: the server's heap in use after round 1: $((first / 1024)) KiB, after round $heap_rounds: $((last / 1024)) KiB"
    echo "RESULT $case $(((last - first) / 1024)) KiB"
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
    dtestsrq | dtestsrq-defaults) run_dtestsrq ;;
    dtestx)  run_dtestx ;;
    dapltest-T-SR) run_transaction "-i $((1000 / k)) -t 1 -w 1" "client SR 256 server SR 256" ;;
    dapltest-T-RR) run_transaction "-i $((500 / k)) -t 1 -w 1" "client RR 4096 client SR 256 server RR 4096 server SR 256" ;;
    dapltest-T-RW) run_transaction "-i $((500 / k)) -t 1 -w 1" "client RW 4096 1 client SR 256 server RW 4096 1 server SR 256" ;;
    dapltest-T-V)  run_transaction "-V -t 2 -w 4 -i $((200 / k))" "client RW 4096 1 server RW 2048 4 client SR 1024 4 server SR 4096 2" ;;
    dapltest-T-V8) run_transaction "-V -t 8 -w 8 -i $((100 / k))" "client RW 4096 1 server RW 2048 4 client SR 1024 4 server SR 4096 2"
                   quit_server ;;
    dapltest-P-RW) run_performance "-i $((2048 / k)) -p 16 -m b" "RW 65536 2" ;;
    dapltest-P-RR) run_performance "-i $((2048 / k)) -p 16 -m b" "RR 65536 2" ;;
    dapltest-Q)    run_quit ;;
    dapltest-soak) run_soak ;;
    dapltest-soak-heap) run_soak_heap ;;
    dapltest-L-ia)       run_limit limit_ia "IAs opened" ;;
    dapltest-L-pz)       run_limit limit_pz "PZs created" ;;
    dapltest-L-cno)      run_limit limit_cno "CNOs created" ;;
    dapltest-L-evd)      run_limit limit_evd "EVDs created" ;;
    dapltest-L-ep)       run_limit limit_ep "EPs created" ;;
    dapltest-L-rsp)      run_limit limit_rsp "RSPs created" ;;
    dapltest-L-psp)      run_limit limit_psp "PSPs created" ;;
    dapltest-L-lmr)      run_limit limit_lmr "LMRs created" ;;
    dapltest-L-rpost)    run_limit limit_rpost "" ;;
    dapltest-L-size_lmr) run_limit limit_size_lmr "" ;;
    dapltest-F-queryinfo) run_fft_queryinfo ;;
    dapltest-F-pz)       run_fft pz "" 3 ;;
    dapltest-F-mem)      run_fft_mem ;;
    dapltest-F-endpoint) run_fft endpoint "" 3 ;;
    dapltest-F-hwconn)   run_fft hwconn "" 4 ;;
    dapltest-F-connmgt)  run_fft connmgt "" 2 ;;
    dapltest-T-RSP)      run_transaction_rsp ;;
    *) fail "unknown case '$case'" ;;
    esac
    echo "PASS: $case ($pairing)"
}
