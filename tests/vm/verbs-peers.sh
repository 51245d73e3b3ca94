#!/bin/bash
# Unmodified peer programs (Debian's dapl2-utils: dtest, dtestcm, dapltest)
# run server and client over our verbs plugin on a real RDMA device, and the
# test judges what they print (dapltest exits 0 even when a test fails).
# Runs where a verbs device with an IP address exists: inside the Soft-RoCE
# VM (tests/vm/rxe-vm.sh, which exports DAT2_VM_ADDR), or on RDMA hardware.
#
#   verbs-peers.sh <build lib dir> <ours|ofed|ofed-cma> [case]
#
# Pairings:
#   ours      our libdat2 (LD_LIBRARY_PATH=<lib dir> shadows OFED's) + our
#             verbs plugin, named relatively in dat.conf
#   ofed      OFED's libdat2 + our verbs plugin, named by absolute path
#   ofed-cma  OFED's libdat2 + OFED's own cma provider (libdaplofa): the
#             baseline the performance results are compared with
# Cases: dtest (default) dtest-p dtest-c dtest-W dtest-D dtestcm
#        dapltest-T-SR dapltest-T-RR dapltest-T-RW dapltest-T-V
#        dapltest-P-RW dapltest-P-RR dapltest-Q
# Performance cases print "RESULT <case> <number> <unit>".
# Environment: DAT2_VM_ADDR (or VERBS_PEER_ADDR) is the IP address of the
# RDMA netdev, default 10.0.0.1; VERBS_PEER_NETDEV its netdev (for ofed-cma),
# default the one holding the address.
#
# dtest uses fixed ports 15828 (side channel) and 45248, dapltest 62000: the
# cases cannot run in parallel.
set -u
# shellcheck source=../peers/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../peers/lib.sh"
libdir=$1 pairing=$2 case=${3:-dtest}
addr=${VERBS_PEER_ADDR:-${DAT2_VM_ADDR:-10.0.0.1}}
ofed_lib=/usr/lib/x86_64-linux-gnu/libdat2.so.2

libdir=$(cd "$libdir" 2>/dev/null && pwd) || fail "no such lib dir: $1"
plugin=$libdir/libdat2_verbs.so
[ -e "$plugin" ] || fail "$plugin missing (build with libibverbs-dev and librdmacm-dev)"
for p in dtest dtestcm dapltest stdbuf ss rdma timeout; do
    command -v $p >/dev/null || fail "$p not installed (dtest/dtestcm/dapltest: dapl2-utils; rdma: iproute2)"
done
netdev=${VERBS_PEER_NETDEV:-$(ip -o -4 addr show | awk -v a="$addr" '{ split($4, p, "/"); if (p[1] == a) print $2 }' | head -n 1)}
[ -n "$netdev" ] || fail "no netdev has the address $addr (set DAT2_VM_ADDR or VERBS_PEER_ADDR)"
rdma link show 2>/dev/null | grep -q "netdev $netdev\b" || fail "$netdev ($addr) carries no RDMA device (rdma link show)"

peers_start verbs_peers 135

# ---- the pairing -------------------------------------------------------------
conf=$tmp/dat.conf
case $pairing in
ours | ofed) ia=verbs-peer ;;
ofed-cma) ia=ofa-v2-cma-roe-$netdev ;;
*) fail "pairing must be ours, ofed or ofed-cma, not '$pairing'" ;;
esac
case $pairing in
ours)
    libname=libdat2_verbs.so
    export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    want_dat2=$libdir/libdat2.so.2
    ;;
ofed | ofed-cma)
    [ -e "$ofed_lib" ] || fail "$ofed_lib missing (apt-get install libdapl2)"
    libname=$plugin
    # Nothing may shadow OFED's libdat2: drop our lib dir from the search path.
    if [ -n "${LD_LIBRARY_PATH:-}" ]; then
        LD_LIBRARY_PATH=$(tr ':' '\n' <<<"$LD_LIBRARY_PATH" | grep -vxF -e "$libdir" -e "$1" | paste -sd: -)
        [ -n "$LD_LIBRARY_PATH" ] && export LD_LIBRARY_PATH || unset LD_LIBRARY_PATH
    fi
    want_dat2=$ofed_lib
    ;;
esac
# OFED's registry needs nonthreadsafe entries (what dat_ia_open asks for).
cat >"$conf" <<CONF
verbs-peer u2.0 nonthreadsafe default $libname dat2.2.0 "address=$addr" ""
ofa-v2-cma-roe-$netdev u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "$netdev 0" ""
CONF
export DAT_OVERRIDE=$conf

resolved=$(ldd "$(command -v dtest)" | awk '$1 == "libdat2.so.2" { print $3 }')
[ "$(readlink -f "$resolved")" = "$(readlink -f "$want_dat2")" ] \
    || fail "pairing $pairing: dtest resolves libdat2.so.2 to '$resolved', expected $want_dat2"
echo "pairing $pairing: libdat2 $resolved, IA $ia ($addr on $netdev), case $case"

# ---- running both sides --------------------------------------------------------
sout=$tmp/server.out cout=$tmp/client.out
: >"$sout"; : >"$cout"
server_cmd="(none yet)" client_cmd="(none yet)"

show() { show_outputs "$server_cmd" "$client_cmd"; }
verdict_fail() {
    echo "FAIL: $case ($pairing): $*"
    show
    exit 1
}
tcp_listening() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }
# rdma_cm listeners are not sockets: the kernel's CM id table shows them.
cm_listening() { rdma res show cm_id 2>/dev/null | grep -qE "state LISTEN .*src-addr [^ ]*:$1( |$)"; }

# start_server PROBE PORT CMD...: runs CMD line-buffered, waits until PROBE PORT.
start_server() {
    local probe=$1 port=$2; shift 2
    server_cmd="$*"
    $probe "$port" && verdict_fail "port $port is already in use before the server starts"
    timeout -k 5 120 stdbuf -oL -eL "$@" >"$sout" 2>&1 &
    spid=$!
    await_server 30 $probe "$port"
    case $? in
    1) verdict_fail "server exited before listening on port $port" ;;
    2) verdict_fail "server not listening on port $port after 30 s" ;;
    esac
}
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
wait_server_line() { wait_until "$2" grep -qE "$1" "$sout"; }
server_gone() { ! kill -0 "$spid" 2>/dev/null; }
wait_server_exit() {
    wait_until "$1" server_gone || return 1
    wait "$spid"
    spid=
}
need() { grep -qE "$2" "$1" || verdict_fail "$3"; }
refuse() {
    local hit
    hit=$(bad_report "$1" "$2")
    [ -z "$hit" ] || verdict_fail "$3 (count, line):"$'\n'"$hit"
}

# ---- dtest ---------------------------------------------------------------------
# The client learns the server's IA address over TCP port 15828, then connects
# to conn_qual 45248. Small buffers: the VM has little memory.
run_dtest() {
    local args=$1
    start_server tcp_listening 15828 dtest -P "$ia" -s $args
    run_client 90 dtest -P "$ia" -h "$addr" $args
    wait_server_exit 20 || verdict_fail "dtest server still running 20 s after the client ended"
    need "$sout" "DAPL Test Complete\. PASSED" "server did not print 'DAPL Test Complete. PASSED'"
    need "$cout" "DAPL Test Complete\. PASSED" "client did not print 'DAPL Test Complete. PASSED'"
    refuse "$sout" "$bad_lines" "server reports"
    refuse "$cout" "$bad_lines" "client reports"
    echo "ok: dtest $args: both sides 'DAPL Test Complete. PASSED'"
}
result_pingpong() {
    local lat
    lat=$(sed -nE 's/.*RDMA write PingPong: .* latency +([0-9.]+) us.*/\1/p' "$cout" | tail -n 1)
    [ -n "$lat" ] || verdict_fail "client printed no 'RDMA write PingPong: ... latency' line"
    echo "RESULT $case $lat us"
}
result_bidir() {
    local bw
    bw=$(sed -nE 's/.*RDMA write \(bi-direction\):.* ([0-9.]+) MB\/sec.*/\1/p' "$cout" | tail -n 1)
    [ -n "$bw" ] && echo "RESULT $case $bw MB/s"
    return 0
}

# ---- dtestcm -------------------------------------------------------------------
run_dtestcm() {
    local n=100 cps
    start_server tcp_listening 15828 dtestcm -P "$ia" -s -c $n
    run_client 90 dtestcm -P "$ia" -h "$addr" -c $n
    wait_server_exit 30 || verdict_fail "dtestcm server still running 30 s after the client ended"
    need "$sout" "ALL $n CONNECTED on Server" "server did not report 'ALL $n CONNECTED on Server!'"
    need "$cout" "ALL $n CONNECTED on Client" "client did not report 'ALL $n CONNECTED on Client!'"
    need "$sout" "DAPL Connection Test Complete" "server did not complete"
    need "$cout" "DAPL Connection Test Complete" "client did not complete"
    refuse "$sout" "$bad_lines" "server reports"
    refuse "$cout" "$bad_lines" "client reports"
    cps=$(sed -nE 's/.*Connections: .*CPS +([0-9.]+) .*Num=([0-9]+).*/\1 \2/p' "$cout" | tail -n 1)
    [ -n "$cps" ] || verdict_fail "client printed no 'Connections: ... CPS ...' line"
    [ "${cps#* }" = "$n" ] || verdict_fail "client counted ${cps#* } connections, not $n"
    echo "ok: dtestcm: $n connections on both sides"
    echo "RESULT $case ${cps% *} conn/s"
}

# ---- dapltest --------------------------------------------------------------------
dapltest_server() { start_server cm_listening 62000 dapltest -T S -D "$ia"; }
client_done='DT_cs_Client: =+ End of Work -- Client Exiting'
run_transaction() {
    local opts=$1 ops=$2 wqe
    dapltest_server
    run_client 120 dapltest -T T -s "$addr" -D "$ia" $opts $ops
    need "$cout" "$client_done" "client did not reach 'End of Work'"
    refuse "$cout" "$bad_lines|syntax|usage" "client reports"
    need "$cout" "^----- Stats ---- :" "client printed no '----- Stats ----' summary"
    need "$cout" "^Total WQE +: +[0-9.]+ WQE/Sec" "client printed no 'Total WQE' line"
    wait_server_line "Server: Transaction Test Finished for this client" 15 \
        || verdict_fail "server did not print 'Server: Transaction Test Finished for this client' within 15 s of the client's end"
    refuse "$sout" "$bad_lines" "server reports"
    wqe=$(sed -nE 's/^Total WQE +: +([0-9.]+) WQE\/Sec.*/\1/p' "$cout")
    echo "ok: dapltest -T T $opts $ops: client and server finished"
    echo "RESULT $case $wqe WQE/s"
}
run_performance() {
    local opts=$1 op=$2 bw ops
    dapltest_server
    run_client 120 dapltest -T P -s "$addr" -D "$ia" $opts $op
    need "$cout" "$client_done" "client did not reach 'End of Work'"
    refuse "$cout" "$bad_lines|syntax|usage" "client reports"
    need "$cout" "^raw: " "client printed no 'raw:' statistics line"
    wait_server_line "Server: Finished performance test\. +Exiting\." 15 \
        || verdict_fail "server did not print 'Server: Finished performance test.  Exiting.' within 15 s"
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
    run_client 60 dapltest -T Q -s "$addr" -D "$ia"
    need "$cout" "$client_done" "quit client did not reach 'End of Work'"
    refuse "$cout" "$bad_lines" "quit client reports"
    wait_server_exit 20 || verdict_fail "server still running 20 s after 'dapltest -T Q'"
    need "$sout" "DT_cs_Server \($ia\): +Exiting\." "server did not print 'DT_cs_Server ($ia):  Exiting.'"
    refuse "$sout" "$bad_lines" "server reports"
    echo "ok: dapltest -T Q stopped the server"
}

# ---- the cases -------------------------------------------------------------------
case $case in
dtest)   run_dtest "-B 50 -b 65536"; result_bidir ;;
dtest-p) run_dtest "-p -B 50 -b 65536"; result_bidir ;;
dtest-c) run_dtest "-c -B 50 -b 65536"; result_bidir ;;
dtest-W) run_dtest "-W -B 1000"; result_pingpong ;;
dtest-D) run_dtest "-D -b 65536 -B 50"; result_pingpong ;;
dtestcm) run_dtestcm ;;
dapltest-T-SR) run_transaction "-i 500 -t 1 -w 1" "client SR 256 server SR 256" ;;
dapltest-T-RR) run_transaction "-i 200 -t 1 -w 1" "client RR 4096 client SR 256 server RR 4096 server SR 256" ;;
dapltest-T-RW) run_transaction "-i 200 -t 1 -w 1" "client RW 4096 1 client SR 256 server RW 4096 1 server SR 256" ;;
dapltest-T-V)  run_transaction "-V -t 2 -w 4 -i 100" "client RW 4096 1 server RW 2048 4 client SR 1024 4 server SR 4096 2" ;;
dapltest-P-RW) run_performance "-i 1024 -p 16 -m b" "RW 65536 2" ;;
dapltest-P-RR) run_performance "-i 1024 -p 16 -m b" "RR 65536 2" ;;
dapltest-Q)    run_quit ;;
*) fail "unknown case '$case'" ;;
esac
echo "PASS: $case ($pairing)"
exit 0
