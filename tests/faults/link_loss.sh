#!/bin/bash
# Link loss mid-transfer (issue 7): two network namespaces, two hosts, joined
# by a veth pair; a server and a client (link_loss_peer, our program over
# our libdat2 and libfabric plugin on tcp) stream RDMA writes and sends to
# each other, receives posted, every byte verified. Then:
#   1. a short flap (the client's veth down for 0.5 s, then up): the
#      connection survives, the data keeps arriving intact;
#   2. link loss while both stream (the client's veth down, and it stays
#      down): both sides see DAT_CONNECTION_EVENT_BROKEN or DISCONNECTED, and
#      every DTO that was outstanding completes with an error exactly once
#      (the program checks the cookies), within $bound_ms of the link going
#      down; the link comes back, one side resets its Endpoint
#      (dat_ep_reset), the other frees and recreates it, they connect again
#      and stream, verified;
#   3. the same with the client idle (only receives posted) and the server
#      posting RDMA writes and sends into the dead link; after the
#      reconnection (the sides swap reset and recreate) they part with a
#      graceful disconnect.
#
# The bound: both sides' dat.conf entries say link_timeout_ms=$timeout_ms
# (plugins/ofi/README.md, "Link loss"): the plugin sets TCP_USER_TIMEOUT and
# keepalive on each connection, so a side notices a dead link within about
# link_timeout_ms + max(1 s, link_timeout_ms / 10), whether or not it has
# data in flight. The namespaces keep the kernel's default TCP sysctls.
#
#   link_loss.sh <link_loss_peer> <build lib dir>
#
# Needs root (ip netns); exits 77 (skipped) saying why when namespaces or a
# veth pair cannot be made here. For experiments: DAT2_LINK_TIMEOUT_MS
# overrides the timeout ("none": no link_timeout_ms, the kernel's defaults),
# DAT2_LINK_BOUND_MS the bound, DAT2_LINK_SYSCTLS sets sysctls in both
# namespaces ("net.ipv4.tcp_retries2=3").
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../peers/lib.sh"
peer_bin=$1 libdir=$2

[ -x "$peer_bin" ] || fail "no such program: $peer_bin"
peer_bin=$(realpath "$peer_bin")
libdir=$(cd "$libdir" 2>/dev/null && pwd) || fail "no such lib dir: $2"
[ -e "$libdir/libdat2_ofi.so" ] || fail "$libdir/libdat2_ofi.so missing (build the ofi plugin)"
[ -e "$libdir/libdat2.so.2" ] || fail "$libdir/libdat2.so.2 missing"
command -v timeout >/dev/null || fail "timeout not installed (coreutils)"
command -v ip >/dev/null || skip "no 'ip' command (apt-get install iproute2)"

timeout_ms=${DAT2_LINK_TIMEOUT_MS:-3000}
if [ "$timeout_ms" = none ]; then
    bound_ms=${DAT2_LINK_BOUND_MS:-60000}
else
    # The slowest case, a side with nothing in flight: keepalive probes
    # every max(1 s, T/10) once T/2 passed idle; the one at or after T ends
    # it. One second more for a loaded machine (sanitizers, 2 shared cores).
    intvl=$((timeout_ms / 10 > 1000 ? timeout_ms / 10 : 1000))
    bound_ms=${DAT2_LINK_BOUND_MS:-$((timeout_ms + intvl + 1000))}
fi
flap_ms=500
port=62100

ns_s=dlls$$ ns_c=dllc$$     # server and client namespaces
if_s=dlls$$ if_c=dllc$$     # the veth ends (at most 15 characters)
addr_s=10.233.0.1 addr_c=10.233.0.2

# ctest gives this 75 s (TIMEOUT); stop before, so that the programs, the
# namespaces and the veth pair are removed.
peers_start link_loss 60

# ---- the network ------------------------------------------------------------------
veth_hosts "$ns_s" "$ns_c" "$if_s" "$if_c" "$addr_s" "$addr_c"
# For experiments: DAT2_LINK_SYSCTLS="net.ipv4.tcp_retries2=3 ..." in both namespaces.
for kv in ${DAT2_LINK_SYSCTLS:-}; do
    for ns in "$ns_s" "$ns_c"; do ip netns exec "$ns" sysctl -qw "$kv" || fail "sysctl $kv"; done
done
echo "kernel: net.ipv4.tcp_retries2=$(ip netns exec "$ns_c" sysctl -n net.ipv4.tcp_retries2)," \
     "tcp_keepalive_time=$(ip netns exec "$ns_c" sysctl -n net.ipv4.tcp_keepalive_time) "

params_extra=" link_timeout_ms=$timeout_ms"
[ "$timeout_ms" = none ] && params_extra=
for side in s c; do
    eval a=\$addr_$side
    echo "ofi-veth u2.0 nonthreadsafe default libdat2_ofi.so dat2.2.0 \"provider=tcp address=$a$params_extra\" \"\"" >"$tmp/dat_$side.conf"
done
echo "dat.conf: $(cat "$tmp/dat_c.conf")"
echo "bound: each side's connection ends, and its last DTO completes, within $bound_ms ms of the link going down"

# ---- the two programs -----------------------------------------------------------------
sout=$tmp/server.out cout=$tmp/client.out
: >"$sout"; : >"$cout"
mkfifo "$tmp/server.in" "$tmp/client.in" || fail "mkfifo"
# Read-write opens: neither blocks waiting for the other end, and the
# programs see end-of-file (and stop) only when this script is gone.
exec 5<>"$tmp/server.in" 6<>"$tmp/client.in"
start_peer() { # start_peer ROLE SIDE: the program in SIDE's namespace, its pid in $!
    local role=$1 side=$2 ns ifc
    eval ns=\$ns_$side ifc=\$if_$side
    ip netns exec "$ns" env LD_LIBRARY_PATH="$libdir" DAT_OVERRIDE="$tmp/dat_$side.conf" FI_TCP_IFACE="$ifc" \
        timeout -k 5 70 "$peer_bin" "$role" ofi-veth $addr_s $port <"$tmp/$role.in" >"$tmp/$role.out" 2>&1 5>&- 6>&- &
}
server=5 client=6
tell() { local fd; eval fd=\$$1; echo "$2" >&$fd; } # tell server|client COMMAND

show() { show_outputs "link_loss_peer server in $ns_s" "link_loss_peer client in $ns_c"; }
verdict_fail() { echo "FAIL: $*"; show; exit 1; }
# seen FILE ERE [N]: the file has at least N (1) lines matching ERE.
seen() { [ "$(grep -cE "$2" "$1")" -ge "${3:-1}" ]; }
running() { [ -z "$1" ] || kill -0 "$1" 2>/dev/null; } # running PID (none yet: yes)
failed() { grep -q '^FAIL' "$sout" "$cout" || ! running "$spid" || ! running "$cpid"; }
# await SECONDS WHAT FILE ERE [N]: waits for the line(s); fails the test,
# naming WHAT, when a program fails or exits first, or after SECONDS.
await() {
    local secs=$1 what=$2 file=$3 ere=$4 n=${5:-1} i
    for ((i = 0; i < secs * 20; i++)); do
        seen "$file" "$ere" "$n" && return 0
        if failed; then
            sleep 0.2 # let the programs' last lines arrive
            seen "$file" "$ere" "$n" && return 0
            verdict_fail "$what: a program failed or exited"
        fi
        sleep 0.05
    done
    verdict_fail "$what: not within $secs s"
}
field() { sed -nE "s/.*[ ]$2=([^ ]+).*/\1/p" <<<"$1"; } # field LINE KEY

start_peer server s
spid=$!
await 15 "the server listening" "$sout" '^LISTENING'
start_peer client c
cpid=$!
await 15 "the connection" "$sout" '^ESTABLISHED side=server epoch=0'
await 5 "the connection" "$cout" '^ESTABLISHED side=client epoch=0'
echo "ok: connected across the veth pair ($ns_c -> $ns_s:$port)"

# Steady streaming first: 20 rounds verified on both sides.
tell server mark; tell client mark
await 15 "streaming" "$sout" '^ADVANCED' 1
await 15 "streaming" "$cout" '^ADVANCED' 1
echo "ok: streaming: $(grep '^ADVANCED' "$cout" | tail -1)"

# ---- 1. a short flap ----------------------------------------------------------------
t0=$(date +%s%3N)
ip -n "$ns_c" link set "$if_c" down || fail "ip link set $if_c down"
sleep $(awk "BEGIN { print $flap_ms / 1000 }")
ip -n "$ns_c" link set "$if_c" up || fail "ip link set $if_c up"
t1=$(date +%s%3N)
echo "flap: $if_c down for $((t1 - t0)) ms"
tell server mark; tell client mark
await 20 "streaming after the flap (the flap must not break the connection)" "$sout" '^ADVANCED' 2
await 20 "streaming after the flap (the flap must not break the connection)" "$cout" '^ADVANCED' 2
! grep -q '^BROKEN' "$sout" "$cout" || verdict_fail "the flap broke the connection"
echo "ok: the connection survived a ${flap_ms} ms flap: server $(grep '^ADVANCED' "$sout" | tail -1 | cut -d' ' -f3-5)," \
     "client $(grep '^ADVANCED' "$cout" | tail -1 | cut -d' ' -f3-5)"

# judge_loss N T_DOWN: the Nth BROKEN line of each side: the connection
# ended with BROKEN or DISCONNECTED, and it and the last completion came
# within $bound_ms of T_DOWN; every receive posted (16) completed with an
# error. The program has checked that every DTO outstanding completed
# exactly once, none successfully after the connection event.
judge_loss() {
    local n=$1 t_down=$2 side f line event ev_ms last_ms bad=0
    await $((bound_ms / 1000 + 10)) "the server's report of the break" "$sout" '^BROKEN' "$n"
    await $((bound_ms / 1000 + 10)) "the client's report of the break" "$cout" '^BROKEN' "$n"
    for side in server client; do
        eval f=\$${side:0:1}out
        line=$(grep '^BROKEN' "$f" | sed -n "${n}p")
        event=$(field "$line" event)
        ev_ms=$(( $(field "$line" event_ms) - t_down ))
        last_ms=$(( $(field "$line" last_completion_ms) - t_down ))
        echo "$side: $line"
        echo "RESULT link-loss-$n-$side $ev_ms ms to the connection event, $last_ms ms to the last DTO completion"
        case "$event" in
        DAT_CONNECTION_EVENT_BROKEN | DAT_CONNECTION_EVENT_DISCONNECTED) ;;
        *) echo "FAIL: $side: the connection ended with '$event'"; bad=$((bad + 1)) ;;
        esac
        [ "$ev_ms" -le "$bound_ms" ] || { echo "FAIL: $side: the connection event came $ev_ms ms after the link went down (bound $bound_ms ms)"; bad=$((bad + 1)); }
        [ "$last_ms" -le "$bound_ms" ] || { echo "FAIL: $side: a DTO completed $last_ms ms after the link went down (bound $bound_ms ms)"; bad=$((bad + 1)); }
        [ "$(field "$line" err_recv)" = 16 ] || { echo "FAIL: $side: $(field "$line" err_recv) receives completed with an error, 16 were posted"; bad=$((bad + 1)); }
    done
    [ $bad -eq 0 ] || verdict_fail "$bad problems after link loss $n"
}

# recover N: the link comes back; one side resets its Endpoint, the other
# frees and recreates it (alternating); they connect again (connection N)
# and stream 20 rounds more, verified.
recover() {
    local n=$1
    ip -n "$ns_c" link set "$if_c" up || fail "ip link set $if_c up"
    tell server reconnect
    await 10 "the server's Endpoint for connection $n" "$sout" "^READY side=server epoch=$n"
    tell client reconnect
    await 15 "connection $n" "$sout" "^ESTABLISHED side=server epoch=$n"
    await 15 "connection $n" "$cout" "^ESTABLISHED side=client epoch=$n"
    tell server mark; tell client mark
    await 15 "streaming on connection $n" "$sout" "^ADVANCED side=server epoch=$n"
    await 15 "streaming on connection $n" "$cout" "^ADVANCED side=client epoch=$n"
    echo "ok: reconnected (server: $(field "$(grep "^READY" "$sout" | tail -1)" endpoint)," \
         "client: $(field "$(grep "^READY" "$cout" | tail -1)" endpoint)): $(grep '^ADVANCED' "$cout" | tail -1)"
}

# ---- 2. link loss while both sides stream ------------------------------------------------
# Both sides have RDMA writes and sends in flight nearly all the time, and
# their receives posted.
t_down=$(date +%s%3N)
ip -n "$ns_c" link set "$if_c" down || fail "ip link set $if_c down"
echo "link loss 1 (both streaming): $if_c down at $t_down"
judge_loss 1 "$t_down"
echo "ok: both sides saw the connection end and every outstanding DTO complete with an error, within $bound_ms ms"
recover 1

# ---- 3. link loss with one side idle ----------------------------------------------------
# Both stop between rounds (only receives posted); the link goes down; the
# server then posts writes and sends into it. The client has nothing in
# flight: only keepalive can tell it that the link is gone.
tell server hold; tell client hold
await 10 "holding" "$sout" '^HELD side=server epoch=1 .*outstanding=16 '
await 10 "holding" "$cout" '^HELD side=client epoch=1 .*outstanding=16 '
t_down=$(date +%s%3N)
ip -n "$ns_c" link set "$if_c" down || fail "ip link set $if_c down"
tell server burst
await 5 "the server's burst" "$sout" '^BURST'
echo "link loss 2 (client idle, server: $(grep '^BURST' "$sout" | cut -d' ' -f3-4)): $if_c down at $t_down"
judge_loss 2 "$t_down"
line=$(grep '^BROKEN' "$sout" | sed -n 2p)
[ "$(field "$line" err_write)" = 16 ] || verdict_fail "server: $(field "$line" err_write) of the 16 RDMA writes posted into the dead link completed with an error"
line=$(grep '^BROKEN' "$cout" | sed -n 2p)
[ "$(field "$line" errors)" = 16 ] || verdict_fail "client: $(field "$line" errors) DTOs completed with an error; it had only its 16 receives posted"
echo "ok: the idle side and the side with DTOs in flight both saw the connection end within $bound_ms ms"
recover 2

tell server finish; tell client finish
await 15 "parting" "$sout" '^DONE'
await 15 "parting" "$cout" '^DONE'
wait "$cpid"; crc=$?; cpid=
wait "$spid"; src=$?; spid=
[ $crc -eq 0 ] && [ $src -eq 0 ] || verdict_fail "exit status: server $src, client $crc"
grep -h '^DONE' "$sout" "$cout" | sed 's/^/ok: /'
# Sanitizer reports (a sanitizer build) go to the programs' stderr, here.
hit=$(grep -lE 'ERROR: (Address|Leak|Thread|Undefined)Sanitizer|runtime error:' "$sout" "$cout")
[ -z "$hit" ] || verdict_fail "sanitizer report in $hit"
echo "PASS: link loss (a ${flap_ms} ms flap survived; two losses detected within $bound_ms ms on both sides, each followed by a reconnection)"
exit 0
