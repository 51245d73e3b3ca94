#!/bin/bash
# Unmodified peer programs (Debian's dapl2-utils: dtest, dtestcm, dtestsrq,
# dapltest) run server and client over our libfabric plugin on loopback, and
# the test judges what they print (dapltest exits 0 even when a test fails).
#
#   dapl_peers.sh <build lib dir> <ours|ofed> [case]
#
# Pairings:
#   ours  our libdat2 (LD_LIBRARY_PATH=<lib dir> shadows OFED's) + our plugin,
#         named relatively in dat.conf (our registry resolves it beside libdat2)
#   ofed  OFED's libdat2 (/usr/lib/x86_64-linux-gnu/libdat2.so.2) + our plugin,
#         named by absolute path (OFED's registry needs one)
# Cases: dtest (default) dtest-p dtest-c dtest-W dtest-D dtestcm dtestsrq
#        dapltest-T-SR dapltest-T-RR dapltest-T-RW dapltest-T-V
#        dapltest-P-RW dapltest-P-RR dapltest-Q
# Performance cases print "RESULT <case> <number> <unit>".
# Environment: DAPL_PEER_IA picks the dat.conf entry (ofi-tcp by default;
# ofi-sockets and ofi-net exist too).
#
# dtest uses fixed ports 15828 (side channel) and 45248, dapltest 62000: the
# cases cannot run in parallel (ctest: RESOURCE_LOCK dapl_ports).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
libdir=$1 pairing=$2 case=${3:-dtest}
ia=${DAPL_PEER_IA:-ofi-tcp}
ofed_lib=/usr/lib/x86_64-linux-gnu/libdat2.so.2
addr=127.0.0.1

libdir=$(cd "$libdir" 2>/dev/null && pwd) || fail "no such lib dir: $1"
plugin=$libdir/libdat2_ofi.so
[ -e "$plugin" ] || fail "$plugin missing (build the ofi plugin)"
for p in dtest dtestcm dtestsrq dapltest stdbuf ss timeout; do
    command -v $p >/dev/null || fail "$p not installed (dtest/dtestcm/dapltest: apt-get install dapl2-utils)"
done

# ctest gives a case 150 s (TIMEOUT); stop before that, so the peers and
# the scratch directory are cleaned up.
peers_start dapl_peers 135

# ---- the pairing -------------------------------------------------------------
conf=$tmp/dat.conf
case $pairing in
ours)
    libname=libdat2_ofi.so
    export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    want_dat2=$libdir/libdat2.so.2
    ;;
ofed)
    [ -e "$ofed_lib" ] || fail "$ofed_lib missing (apt-get install libdapl2)"
    libname=$plugin
    # Nothing may shadow OFED's libdat2: drop our lib dir from the search path.
    if [ -n "${LD_LIBRARY_PATH:-}" ]; then
        LD_LIBRARY_PATH=$(tr ':' '\n' <<<"$LD_LIBRARY_PATH" | grep -vxF -e "$libdir" -e "$1" | paste -sd: -)
        [ -n "$LD_LIBRARY_PATH" ] && export LD_LIBRARY_PATH || unset LD_LIBRARY_PATH
    fi
    want_dat2=$ofed_lib
    ;;
*) fail "pairing must be ours or ofed, not '$pairing'" ;;
esac
# OFED's registry needs nonthreadsafe entries (what dat_ia_open asks for).
cat >"$conf" <<CONF
ofi-tcp u2.0 nonthreadsafe default $libname dat2.2.0 "provider=tcp address=$addr" ""
ofi-sockets u2.0 nonthreadsafe default $libname dat2.2.0 "provider=sockets address=$addr" ""
ofi-net u2.0 nonthreadsafe default $libname dat2.2.0 "provider=net address=$addr" ""
CONF
export DAT_OVERRIDE=$conf
# The data path binds to the address of FI_*_IFACE: keep it on loopback.
export FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo FI_NET_IFACE=lo

# The peer binaries must reach the libdat2 of the pairing.
resolved=$(ldd "$(command -v dtest)" | awk '$1 == "libdat2.so.2" { print $3 }')
[ "$(readlink -f "$resolved")" = "$(readlink -f "$want_dat2")" ] \
    || fail "pairing $pairing: dtest resolves libdat2.so.2 to '$resolved', expected $want_dat2"
echo "pairing $pairing: libdat2 $resolved, plugin $plugin, IA $ia, case $case"

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
listening() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }

# start_server PORT CMD...: runs CMD line-buffered, waits until PORT listens.
start_server() {
    local port=$1; shift
    server_cmd="$*"
    listening "$port" && verdict_fail "port $port is already in use before the server starts: $(ss -Hltnp "sport = :$port")"
    timeout -k 5 120 stdbuf -oL -eL "$@" >"$sout" 2>&1 &
    spid=$!
    await_server 15 listening "$port"
    case $? in
    1) verdict_fail "server exited before listening on port $port" ;;
    2) verdict_fail "server not listening on port $port after 15 s" ;;
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
    start_server 15828 dtest -P "$ia" -s $args
    run_client 60 dtest -P "$ia" -h $addr $args
    wait_server_exit 20 || verdict_fail "dtest server still running 20 s after the client ended"
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
    local n=200 cps
    start_server 15828 dtestcm -P "$ia" -s -c $n
    run_client 60 dtestcm -P "$ia" -h $addr -c $n
    wait_server_exit 20 || verdict_fail "dtestcm server still running 20 s after the client ended"
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
    start_server 45248 dtestsrq -P "$ia" -s $args
    run_client 60 dtestsrq -P "$ia" -h $addr $args
    wait_server_exit 20 || stacks=1 verdict_fail "dtestsrq server still running 20 s after the client ended"
    need "$sout" "ALL $n CONNECTED on server" "server did not report 'ALL $n CONNECTED on server!'"
    need "$cout" "ALL $n CONNECTED on client" "client did not report 'ALL $n CONNECTED on client!'"
    need "$sout" "DAPL RC SRQ Test Complete\." "server did not print 'DAPL RC SRQ Test Complete.'"
    need "$cout" "DAPL RC SRQ Test Complete\." "client did not print 'DAPL RC SRQ Test Complete.'"
    refuse "$sout" "$bad_lines" "server reports"
    refuse "$cout" "$bad_lines" "client reports"
    echo "ok: dtestsrq $args: both sides 'DAPL RC SRQ Test Complete.'"
}

# ---- dapltest --------------------------------------------------------------------
dapltest_server() {
    start_server 62000 dapltest -T S -D "$ia"
}
client_done='DT_cs_Client: =+ End of Work -- Client Exiting'
# Transaction test: dapltest -T T [opts] OPS...
run_transaction() {
    local opts=$1 ops=$2 threads eps wqe
    dapltest_server
    run_client 90 dapltest -T T -s $addr -D "$ia" $opts $ops
    need "$cout" "$client_done" "client did not reach 'End of Work'"
    refuse "$cout" "$bad_lines|syntax|usage" "client reports"
    need "$cout" "^----- Stats ---- :" "client printed no '----- Stats ----' summary"
    need "$cout" "^Total WQE +: +[0-9.]+ WQE/Sec" "client printed no 'Total WQE' line"
    # The server side of the test ends after the client's final sync and the
    # disconnect; it prints this line then.
    wait_server_line "Server: Transaction Test Finished for this client" 10 \
        || stacks=1 verdict_fail "server did not print 'Server: Transaction Test Finished for this client' within 10 s of the client's end (server test thread stuck)"
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
    run_client 90 dapltest -T P -s $addr -D "$ia" $opts $op
    need "$cout" "$client_done" "client did not reach 'End of Work'"
    refuse "$cout" "$bad_lines|syntax|usage" "client reports"
    need "$cout" "^raw: " "client printed no 'raw:' statistics line"
    wait_server_line "Server: Finished performance test\. +Exiting\." 10 \
        || verdict_fail "server did not print 'Server: Finished performance test.  Exiting.' within 10 s"
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
    run_client 30 dapltest -T Q -s $addr -D "$ia"
    need "$cout" "$client_done" "quit client did not reach 'End of Work'"
    refuse "$cout" "$bad_lines" "quit client reports"
    wait_server_exit 15 || verdict_fail "server still running 15 s after 'dapltest -T Q'"
    need "$sout" "DT_cs_Server \($ia\): +Exiting\." "server did not print 'DT_cs_Server ($ia):  Exiting.'"
    refuse "$sout" "$bad_lines" "server reports"
    echo "ok: dapltest -T Q stopped the server"
}

# ---- the cases -------------------------------------------------------------------
case $case in
dtest)   run_dtest "-B 100"; result_bidir ;;
dtest-p) run_dtest "-p -B 100"; result_bidir ;;
dtest-c) run_dtest "-c -B 100"; result_bidir ;;
dtest-W) run_dtest "-W -B 1000"; result_pingpong ;;
dtest-D) run_dtest "-D -b 65536 -B 100"; result_pingpong ;;
dtestcm) run_dtestcm ;;
dtestsrq) run_dtestsrq ;;
dapltest-T-SR) run_transaction "-i 1000 -t 1 -w 1" "client SR 256 server SR 256" ;;
dapltest-T-RR) run_transaction "-i 500 -t 1 -w 1" "client RR 4096 client SR 256 server RR 4096 server SR 256" ;;
dapltest-T-RW) run_transaction "-i 500 -t 1 -w 1" "client RW 4096 1 client SR 256 server RW 4096 1 server SR 256" ;;
dapltest-T-V)  run_transaction "-V -t 2 -w 4 -i 200" "client RW 4096 1 server RW 2048 4 client SR 1024 4 server SR 4096 2" ;;
dapltest-P-RW) run_performance "-i 2048 -p 16 -m b" "RW 65536 2" ;;
dapltest-P-RR) run_performance "-i 2048 -p 16 -m b" "RR 65536 2" ;;
dapltest-Q)    run_quit ;;
*) fail "unknown case '$case'" ;;
esac
echo "PASS: $case ($pairing)"
exit 0
