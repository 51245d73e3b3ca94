#!/bin/bash
# Proof that the Soft-RoCE VM is a real RDMA host: runs inside it
#
#   tests/vm/rxe-vm.sh -- bash tests/vm/vm-smoke.sh [case...]
#
# the stock tools over rxe0 and judges what each prints (several of them
# exit 0 after failures):
#   devices     ibv_devices lists rxe0; ibv_devinfo shows its port ACTIVE on
#               Ethernet; every ksoftirqd is SCHED_FIFO
#   rping       rping server + client over rdma_cm, 10 ping-pongs with data
#   write-lat   perftest ib_write_lat server + client on rxe0
#   send-lat    perftest ib_send_lat server + client on rxe0
#   dtest       OFED dtest (send/recv, RDMA write and read, 64 KiB)
#   dtest-W     OFED dtest -W, 1-byte RDMA-write ping-pong
#   dapltest-T  OFED dapltest -T T (send/recv, RDMA write, RDMA read)
#   dapltest-P  OFED dapltest -T P, RDMA write, 64 KiB x 2 segments, 16 deep
#   dapltest-P-lat  OFED dapltest -T P, 1-byte RDMA write, polling, 1 deep
# All cases run by default. The DAT cases use OFED's libdat2
# (/usr/lib/x86_64-linux-gnu/libdat2.so.2) and its cma provider
# (libdaplofa.so.2) through a dat.conf entry on the VM's netdev: /etc/dat.conf's
# ofa-v2-ib0 needs an ib0 that a RoCE host does not have.
# Prints "ok:"/"FAIL:" per case, "RESULT <case> <number> <unit>" for each
# measurement, and closes with "vm-smoke: N passed, N failed"; exits 1 when
# any case failed.
set -u

if [ "${DAT2_VM:-}" != 1 ]; then
    echo "vm-smoke: this runs inside the test VM: tests/vm/rxe-vm.sh -- bash tests/vm/vm-smoke.sh" >&2
    exit 2
fi
addr=$DAT2_VM_ADDR dev=$DAT2_VM_DEVICE netdev=$DAT2_VM_NETDEV
ofed_dat2=/usr/lib/x86_64-linux-gnu/libdat2.so.2
ia=ofa-v2-rxe
all_cases=(devices rping write-lat send-lat dtest dtest-W dapltest-T dapltest-P dapltest-P-lat)

# stop_tree (ends a `timeout`-wrapped program), wait_until, the listener probes.
# shellcheck source=../peers/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../peers/lib.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vm-smoke.XXXXXX") || exit 1
cd "$tmp" || exit 1
spid='' cpid=''
trap 'stop "$cpid"; stop "$spid"; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# ---- helpers ------------------------------------------------------------------------
stop() { stop_tree "$1"; }


sout=server.out cout=client.out
# Latency cases pin server and client to different vCPUs: two busy-polling
# peers that the scheduler put on one vCPU only take turns at the timer tick,
# and every round trip then takes 4 ms (HZ=250) instead of ~13 us.
pin_server=() pin_client=()
pin_peers() {
    [ "$(nproc)" -ge 2 ] || return 0
    pin_server=(taskset -c 0) pin_client=(taskset -c 1)
}
case_name='' server_cmd='' client_cmd=''
# The case's verdict: everything below returns 1 after printing why.
bad() {
    echo "FAIL: $case_name: $*"
    echo "---- server: $server_cmd"
    tail -n 25 "$sout" 2>/dev/null
    echo "---- client: $client_cmd"
    tail -n 25 "$cout" 2>/dev/null
    return 1
}

# start_server HOW PORT LIMIT CMD...: the server, line-buffered, bounded by
# LIMIT seconds; waits until it listens (HOW: tcp or cm).
start_server() {
    local how=$1 port=$2 limit=$3
    shift 3
    server_cmd="$*"
    : >"$sout"
    "${how}_listening" "$port" && { bad "port $port ($how) is taken before the server starts"; return 1; }
    timeout -k 5 "$limit" "${pin_server[@]}" stdbuf -oL -eL "$@" >"$sout" 2>&1 &
    spid=$!
    server_up() { "${how}_listening" "$port" || ! kill -0 "$spid" 2>/dev/null; }
    wait_until 20 server_up
    "${how}_listening" "$port" && return 0
    kill -0 "$spid" 2>/dev/null && { bad "server not listening on $how port $port after 20 s"; return 1; }
    wait "$spid"
    bad "server exited (status $?) before listening on $how port $port"
}

# run_client LIMIT CMD...: the client, bounded by LIMIT seconds; its status in $crc.
crc=
run_client() {
    local limit=$1
    shift
    client_cmd="$*"
    : >"$cout"
    timeout -k 5 "$limit" "${pin_client[@]}" stdbuf -oL -eL "$@" >"$cout" 2>&1 &
    cpid=$!
    wait "$cpid"
    crc=$?
    cpid=
    case $crc in 124 | 137) bad "client did not finish within $limit s"; return 1 ;; esac
    return 0
}

# server_exit SECONDS: the server ends by itself in time; its status in $src.
src=
server_exit() {
    server_gone() { ! kill -0 "$spid" 2>/dev/null; }
    wait_until "$1" server_gone || { bad "server still running $1 s after the client ended"; return 1; }
    wait "$spid"
    src=$?
    spid=
    return 0
}

need() { grep -qE "$2" "$1" || bad "${3:-$1 lacks /$2/}"; }
# refuse FILE ERE WHAT: no line may match (case-insensitively).
refuse() {
    local hits
    hits=$(grep -iE "$2" "$1" | sort | uniq -c | sort -rn | head -n 5)
    [ -z "$hits" ] || bad "$3 (count, line):"$'\n'"$hits"
}
bad_lines='error|fail|warning|timed out|timeout|abort|segmentation|assert|usage'

# ---- cases ---------------------------------------------------------------------------
case_devices() {
    server_cmd="(none)" client_cmd="ibv_devices; ibv_devinfo -d $dev"
    : >"$sout"
    ibv_devices >"$cout" 2>&1 || bad "ibv_devices exited $?" || return 1
    need "$cout" "^[[:space:]]*${dev}[[:space:]]" "ibv_devices does not list $dev" || return 1
    ibv_devinfo -d "$dev" >"$cout" 2>&1 || bad "ibv_devinfo -d $dev exited $?" || return 1
    need "$cout" "state:[[:space:]]+PORT_ACTIVE" "ibv_devinfo: port not PORT_ACTIVE" || return 1
    need "$cout" "link_layer:[[:space:]]+Ethernet" "ibv_devinfo: link layer not Ethernet" || return 1
    # The harness's latency fix: every ksoftirqd real-time (see rxe-vm.sh).
    local d comm n=0
    for d in /proc/[0-9]*; do
        read -r comm <"$d/comm" 2>/dev/null || continue
        [[ $comm == ksoftirqd/* ]] || continue
        chrt -p "${d#/proc/}" | grep -q "SCHED_FIFO" || bad "$comm is not SCHED_FIFO: $(chrt -p "${d#/proc/}")" || return 1
        n=$((n + 1))
    done
    [ $n -gt 0 ] || bad "no ksoftirqd thread found" || return 1
    echo "ok: devices: $dev listed, port ACTIVE, link layer Ethernet ($(sed -nE 's/.*active_mtu:[[:space:]]+([0-9]+).*/MTU \1/p' "$cout")); $n ksoftirqd SCHED_FIFO"
}

case_rping() {
    local n=10 got
    start_server cm 7174 60 rping -s -a "$addr" -v -C $n || return 1
    run_client 60 rping -c -a "$addr" -v -C $n || return 1
    [ "$crc" = 0 ] || bad "client exited $crc" || return 1
    server_exit 10 || return 1
    [ "$src" = 0 ] || bad "server exited $src" || return 1
    got=$(grep -cE "^ping data: rdma-ping-[0-9]+: " "$cout")
    [ "$got" = $n ] || bad "client printed $got 'ping data' lines, not $n" || return 1
    got=$(grep -cE "^server ping data: rdma-ping-[0-9]+: " "$sout")
    [ "$got" = $n ] || bad "server printed $got 'server ping data' lines, not $n" || return 1
    echo "ok: rping: $n RDMA read/write ping-pongs with data over rdma_cm"
}

# perftest: -x 1 is the IPv4 RoCEv2 GID; the client's first argument-free
# run waits on TCP port 18515 for the exchange of QP numbers.
perftest_lat() {
    local tool=$1 iters=2000 row typical avg
    start_server tcp 18515 90 "$tool" -d "$dev" -x 1 -n $iters || return 1
    run_client 90 "$tool" -d "$dev" -x 1 -n $iters "$addr" || return 1
    [ "$crc" = 0 ] || bad "client exited $crc" || return 1
    server_exit 10 || return 1
    [ "$src" = 0 ] || bad "server exited $src" || return 1
    # " #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%"
    row=$(awk -v n=$iters '$2 == n && $1 ~ /^[0-9]+$/ && NF >= 6 { print $5, $6 }' "$cout" | tail -n 1)
    [ -n "$row" ] || bad "client printed no result row for $iters iterations" || return 1
    typical=${row% *} avg=${row#* }
    # ~4 ms, a timer tick, when ksoftirqd is not real-time (checked in case
    # devices) or both peers share a vCPU (pinned above); a host overloaded
    # by other work may get there too, so this is a warning, not a verdict.
    awk -v t="$typical" 'BEGIN { exit !(t > 0 && t < 1000) }' \
        || echo "WARNING: $case_name: typical latency $typical us (~13 us expected): host overloaded?"
    echo "ok: $case_name: $iters iterations, t_typical $typical us, t_avg $avg us"
    echo "RESULT $case_name $typical us"
}
case_write-lat() { pin_peers; perftest_lat ib_write_lat; }
case_send-lat() { pin_peers; perftest_lat ib_send_lat; }

# The DAT cases: OFED's libdat2 with its cma provider, and nothing on the
# library path that could shadow OFED's libdat2 (the caller's LD_LIBRARY_PATH
# may name our build).
dat_env() {
    cat >"$tmp/dat.conf" <<CONF
$ia u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "$netdev 0" ""
CONF
    export DAT_OVERRIDE=$tmp/dat.conf
    unset LD_LIBRARY_PATH LD_PRELOAD
    local resolved
    resolved=$(ldd "$(command -v dtest)" | awk '$1 == "libdat2.so.2" { print $3 }')
    [ "$(readlink -f "$resolved")" = "$(readlink -f "$ofed_dat2")" ] \
        || bad "dtest resolves libdat2.so.2 to '$resolved', not OFED's $ofed_dat2"
}

# dtest_pair ARGS...: server and client with the same options; both PASSED.
dtest_pair() {
    start_server tcp 15828 120 dtest -P "$ia" -s "$@" || return 1
    run_client 120 dtest -P "$ia" -h "$addr" "$@" || return 1
    server_exit 20 || return 1
    need "$sout" "DAPL Test Complete\. PASSED" "server did not print 'DAPL Test Complete. PASSED'" || return 1
    need "$cout" "DAPL Test Complete\. PASSED" "client did not print 'DAPL Test Complete. PASSED'" || return 1
    refuse "$sout" "$bad_lines" "server reports" || return 1
    refuse "$cout" "$bad_lines" "client reports" || return 1
}

case_dtest() {
    local bw
    # Default buffers (4 MB x 1000) exhaust a 2 GB guest.
    dtest_pair -B 50 -b 65536 || return 1
    # "RDMA write (bi-direction): Total=..., 100 x 65536, 34.51 MB/sec"
    bw=$(sed -nE 's/.*RDMA write \(bi-direction\):.* ([0-9.]+) MB\/sec.*/\1/p' "$cout" | tail -n 1)
    echo "ok: dtest -B 50 -b 65536: both sides PASSED"
    [ -n "$bw" ] && echo "RESULT dtest-rdma-write-bidir $bw MB/s"
    return 0
}

case_dtest-W() {
    local lat
    pin_peers
    dtest_pair -W -B 2000 || return 1
    # "RDMA write PingPong: (1000 x 1) Total 127814.05 us: latency 63.91 us, BW 0.02 MB/s"
    lat=$(sed -nE 's/.*RDMA write PingPong: .* latency +([0-9.]+) us.*/\1/p' "$cout" | tail -n 1)
    [ -n "$lat" ] || bad "client printed no 'RDMA write PingPong: ... latency' line" || return 1
    echo "ok: dtest -W: 1-byte RDMA-write ping-pong, both sides PASSED, latency $lat us"
    echo "RESULT dtest-W $lat us"
}

client_done='DT_cs_Client: =+ End of Work -- Client Exiting'
# dapltest_run LIMIT SERVER_DONE_LINE TEST ARGS...: a server, the client
# `dapltest -T TEST ... ARGS` (-T must come first), then `dapltest -T Q`
# stops the server; the outputs are judged.
dapltest_run() {
    local limit=$1 server_done=$2 test=$3 client_out
    shift 3
    start_server cm 62000 $((limit + 60)) dapltest -T S -D "$ia" || return 1
    run_client "$limit" dapltest -T "$test" -s "$addr" -D "$ia" "$@" || return 1
    need "$cout" "$client_done" "client did not reach 'End of Work'" || return 1
    refuse "$cout" "$bad_lines" "client reports" || return 1
    client_out=$tmp/client.test.out
    cp "$cout" "$client_out"
    wait_until 15 grep -qE "$server_done" "$sout" || bad "server did not print '$server_done' within 15 s" || return 1
    run_client 30 dapltest -T Q -s "$addr" -D "$ia" || return 1
    need "$cout" "$client_done" "quit client did not reach 'End of Work'" || return 1
    server_exit 15 || return 1
    need "$sout" "DT_cs_Server \($ia\): +Exiting\." "server did not print 'DT_cs_Server ($ia):  Exiting.'" || return 1
    refuse "$sout" "$bad_lines" "server reports" || return 1
    cp "$client_out" "$cout"
}

case_dapltest-T() {
    local wqe
    dapltest_run 120 "Server: Transaction Test Finished for this client" \
        T -i 500 -t 1 -w 1 client SR 256 client RW 4096 1 client RR 4096 1 server SR 256 server RW 4096 1 server RR 4096 1 \
        || return 1
    need "$cout" "^----- Stats ---- :" "client printed no '----- Stats ----' summary" || return 1
    wqe=$(sed -nE 's/^Total WQE +: +([0-9.]+) WQE\/Sec.*/\1/p' "$cout")
    [ -n "$wqe" ] || bad "client printed no 'Total WQE' line" || return 1
    echo "ok: dapltest -T T: send/recv, RDMA write, RDMA read; client and server finished"
    echo "RESULT dapltest-T $wqe WQE/s"
}

# dapltest_perf MODE_ARGS...: -T P; prints the client's bandwidth and mean latency.
dapltest_perf() {
    dapltest_run 180 "Server: Finished performance test\. +Exiting\." P "$@" || return 1
    need "$cout" "^raw: " "client printed no 'raw:' statistics line" || return 1
    perf_bw=$(sed -nE 's/^ *Bandwidth +: +([0-9.]+) MB\/sec.*/\1/p' "$cout" | tail -n 1)
    perf_ops=$(sed -nE 's/^ *Operation Throughput +: +([0-9.]+) ops\/sec.*/\1/p' "$cout" | tail -n 1)
    # The first "Arithmetic mean" is the latency section's.
    perf_lat=$(sed -nE '/^Latency/,/Arithmetic mean/s/^ *Arithmetic mean +: +([0-9.]+) us.*/\1/p' "$cout" | head -n 1)
    [ -n "$perf_bw" ] && [ -n "$perf_lat" ] || bad "client printed no Bandwidth or Latency mean" || return 1
}
case_dapltest-P() {
    dapltest_perf -i 512 -p 16 -m b RW 65536 2 || return 1
    echo "ok: dapltest -T P RW 65536 x 2, 16 deep, blocking: $perf_bw MB/s"
    echo "RESULT dapltest-P $perf_bw MB/s"
}
case_dapltest-P-lat() {
    pin_peers
    dapltest_perf -i 5000 -p 1 -m p RW 1 1 || return 1
    echo "ok: dapltest -T P RW 1 byte, 1 deep, polling: mean latency $perf_lat us, $perf_ops ops/s"
    echo "RESULT dapltest-P-lat $perf_lat us"
}

# ---- main ------------------------------------------------------------------------------
[ $# -gt 0 ] && cases=("$@") || cases=("${all_cases[@]}")
for c in "${cases[@]}"; do
    declare -F "case_$c" >/dev/null || { echo "vm-smoke: unknown case '$c' (cases: ${all_cases[*]})" >&2; exit 2; }
done
for tool in ibv_devices ibv_devinfo rping ib_write_lat ib_send_lat dtest dapltest rdma ss stdbuf timeout taskset chrt; do
    command -v $tool >/dev/null || { echo "vm-smoke: $tool is not installed (rxe-vm.sh installs ibverbs-utils rdmacm-utils perftest dapl2-utils iproute2)" >&2; exit 1; }
done

passed=0 failed=0 failures=()
echo "vm-smoke: $dev on $netdev ($addr); kernel $(uname -r); cases: ${cases[*]}"
for c in "${cases[@]}"; do
    case_name=$c server_cmd='' client_cmd=''
    t0=$(date +%s.%N)
    # Each case in a subshell: its environment (DAT_OVERRIDE...) stays its own.
    (
        trap 'stop "$cpid"; stop "$spid"' EXIT
        case $c in dtest* | dapltest*) dat_env || exit 1 ;; esac
        "case_$c"
    )
    rc=$?
    t1=$(date +%s.%N)
    if [ $rc = 0 ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1)) failures+=("$c")
    fi
    awk -v c="$c" -v a="$t0" -v b="$t1" 'BEGIN { printf "     (%s: %.1f s)\n", c, b - a }'
done
[ $failed -gt 0 ] && echo "vm-smoke: failed: ${failures[*]}"
echo "vm-smoke: $passed passed, $failed failed"
[ $failed = 0 ]
