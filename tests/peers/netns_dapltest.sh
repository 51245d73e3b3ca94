#!/bin/bash
# dapltest between two network namespaces joined by a veth pair: the server
# and the client each have their own IA address (dat.conf ia_params
# "provider=tcp address=<its veth address>"), as on two hosts. Our libdat2
# and our plugin (LD_LIBRARY_PATH=<lib dir>).
#
#   netns_dapltest.sh <build lib dir> [provider]
#
# provider: the libfabric provider of the entry, tcp by default; "tcp;ofi_rxm"
# runs the plugin's RDM transport (its side channel and rxm's tcp
# connections both cross the veth pair).
#
# Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN for `ip netns`); exits 77
# (skipped) saying why when namespaces or veth links cannot be made here.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
libdir=$1 provider=${2:-tcp}

libdir=$(cd "$libdir" 2>/dev/null && pwd) || fail "no such lib dir: $1"
[ -e "$libdir/libdat2_ofi.so" ] || fail "$libdir/libdat2_ofi.so missing (build the ofi plugin)"
[ -e "$libdir/libdat2.so.2" ] || fail "$libdir/libdat2.so.2 missing"
for p in dapltest stdbuf timeout; do
    command -v $p >/dev/null || fail "$p not installed (dapltest: apt-get install dapl2-utils)"
done
command -v ip >/dev/null || skip "no 'ip' command (apt-get install iproute2)"
command -v ss >/dev/null || skip "no 'ss' command (apt-get install iproute2)"

ns_s=dapl_s$$ ns_c=dapl_c$$     # server and client namespaces
if_s=dvs$$ if_c=dvc$$           # the veth ends (names of at most 15 chars)
addr_s=10.231.0.1 addr_c=10.231.0.2

# ctest gives this 120 s (TIMEOUT); stop before that, so that the peers,
# the namespaces and the veth pair are removed.
peers_start netns_dapltest 105

# ---- the network -----------------------------------------------------------------
veth_hosts "$ns_s" "$ns_c" "$if_s" "$if_c" "$addr_s" "$addr_c"

# One dat.conf per namespace: the IA's address is the namespace's own.
for side in s c; do
    eval a=\$addr_$side
    echo "ofi-veth u2.0 nonthreadsafe default libdat2_ofi.so dat2.2.0 \"provider=$provider address=$a\" \"\"" >"$tmp/dat_$side.conf"
done

# in_ns SIDE CMD...: CMD in the side's namespace, with our libdat2 and its
# dat.conf; libfabric tcp binds its data path to FI_TCP_IFACE's address, so
# it names the side's veth.
# DAPL_NETNS_IFACE overrides that, for experiments: an interface name, or
# "none" to leave FI_TCP_IFACE unset.
in_ns() {
    local side=$1 ns ifc; shift
    eval ns=\$ns_$side ifc=\$if_$side
    ifc=${DAPL_NETNS_IFACE:-$ifc}
    if [ "$ifc" = none ]; then
        ip netns exec "$ns" env -u FI_TCP_IFACE LD_LIBRARY_PATH="$libdir" DAT_OVERRIDE="$tmp/dat_$side.conf" "$@"
    else
        ip netns exec "$ns" env LD_LIBRARY_PATH="$libdir" DAT_OVERRIDE="$tmp/dat_$side.conf" \
            FI_TCP_IFACE="$ifc" "$@"
    fi
}

sout=$tmp/server.out cout=$tmp/client.out
show() { show_outputs "dapltest -T S in $ns_s" "$client_cmd in $ns_c"; }
verdict_fail() { echo "FAIL: $*"; show; exit 1; }
failures=0
fail_case() { echo "FAIL: $*"; show; failures=$((failures + 1)); }
bad_lines="$bad_lines|syntax|usage"

# ---- the server --------------------------------------------------------------------
client_cmd="(none yet)"
: >"$cout"
in_ns s timeout -k 5 120 stdbuf -oL -eL dapltest -T S -D ofi-veth >"$sout" 2>&1 &
spid=$!
server_listens() { ip netns exec "$ns_s" ss -Hltn "sport = :62000" | grep -q "$addr_s:62000"; }
await_server 15 server_listens
case $? in
1) verdict_fail "server exited before listening" ;;
2) verdict_fail "server not listening on $addr_s:62000 after 15 s" ;;
esac
echo "ok: dapltest server listens on $addr_s:62000 in $ns_s"

# ---- the transactions ------------------------------------------------------------------
finished=0
# The server's test thread for each client ends after the client's final sync
# and disconnect, with this line.
server_finished() { [ "$(grep -c "Server: Transaction Test Finished for this client" "$sout")" -ge "$finished" ]; }
transaction() { # transaction NAME OPS...
    local name=$1 wqe hit; shift
    client_cmd="dapltest -T T -s $addr_s -D ofi-veth -i 500 -t 1 -w 1 $*"
    in_ns c timeout -k 5 60 stdbuf -oL -eL dapltest -T T -s $addr_s -D ofi-veth -i 500 -t 1 -w 1 "$@" >"$cout" 2>&1 &
    cpid=$!
    wait "$cpid"
    cpid=
    grep -qE 'DT_cs_Client: =+ End of Work -- Client Exiting' "$cout" || { fail_case "$name: client did not reach 'End of Work'"; return; }
    grep -qE '^Total WQE +: +[0-9.]+ WQE/Sec' "$cout" || { fail_case "$name: client printed no 'Total WQE' line"; return; }
    hit=$(bad_report "$cout" "$bad_lines")
    [ -z "$hit" ] || { fail_case "$name: client reports (count, line): $hit"; return; }
    grep -q "Server Net Address: $addr_s" "$cout" || { fail_case "$name: client did not resolve the server at $addr_s"; return; }
    finished=$((finished + 1))
    if ! wait_until 10 server_finished; then
        fail_case "$name: server did not print 'Server: Transaction Test Finished for this client' within 10 s of the client's end"
        finished=$((finished - 1))
        return
    fi
    hit=$(bad_report "$sout" "$bad_lines")
    [ -z "$hit" ] || { fail_case "$name: server reports (count, line): $hit"; return; }
    wqe=$(sed -nE 's/^Total WQE +: +([0-9.]+) WQE\/Sec.*/\1/p' "$cout")
    echo "ok: $name across the veth pair ($ns_c -> $ns_s)"
    echo "RESULT netns-$name $wqe WQE/s"
}
transaction SR client SR 256 server SR 256
transaction RW client RW 4096 1 client SR 256 server RW 4096 1 server SR 256

# The connections really crossed the veth pair: its counters moved.
pkts=$(ip -n "$ns_s" -s link show "$if_s" | awk '/RX:/ { getline; print $2; exit }')
[ "${pkts:-0}" -gt 100 ] || verdict_fail "only ${pkts:-0} packets arrived on $if_s"
echo "ok: $pkts packets arrived on $if_s"
[ $failures -eq 0 ] || { echo "FAIL: $failures of 2 transactions"; exit 1; }
echo "PASS: netns dapltest ($provider)"
exit 0
