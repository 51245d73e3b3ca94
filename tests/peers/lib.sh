# Shared by the peer scripts (sourced, not run): verdicts, the scratch
# directory, and the peer processes, which must never outlive the script.
#
# A script that sources this sets sout/cout (the server's and the client's
# output files) and records its `timeout`-wrapped peers in spid/cpid; the
# EXIT trap (peers_start) ends them, the deadline and the scratch directory.

fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }

# Lines a peer program prints when something went wrong (our libraries start
# theirs with "dat2:").
bad_lines='error|fail|warning|swallow|timed out|timeout|^dat2:|abort|segmentation|assert'

spid= # the server's `timeout` wrapper
cpid= # the client's `timeout` wrapper while it runs
deadline_pid=
tmp=

# Ends a `timeout`-wrapped process and its children, by their ids: TERM first
# (timeout forwards it), KILL whatever is left after 3 s.
stop_tree() {
    local pid=$1 kids i
    [ -n "$pid" ] || return 0
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return 0; }
    kids=$(pgrep -P "$pid")
    kill -TERM "$pid" $kids 2>/dev/null
    for i in $(seq 30); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL $kids "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    return 0
}

# The EXIT trap: peers first, then the deadline, the script's own cleanup
# (the function named by $peers_extra_cleanup, if any) and the scratch directory.
peers_cleanup() {
    stop_tree "$cpid"
    stop_tree "$spid"
    stop_tree "$deadline_pid"
    [ -n "${peers_extra_cleanup:-}" ] && "$peers_extra_cleanup"
    [ -n "$tmp" ] && rm -rf "$tmp"
    return 0
}

# peers_start NAME SECONDS: a scratch directory $tmp (entered: crash reports a
# peer may write, libfabric's <prog>.<...>.btr, stay in there), the cleanup
# traps, and a deadline: after SECONDS the script is stopped (TERM), so that
# it cleans up before ctest's TIMEOUT would kill it without that chance.
peers_start() {
    local name=$1 seconds=$2 self=$$
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/$name.XXXXXX") || fail "mktemp"
    cd "$tmp" || fail "cd $tmp"
    trap peers_cleanup EXIT
    trap 'exit 130' INT TERM
    (
        sleep "$seconds"
        echo "FAIL: $name still running after $seconds s; stopping it"
        kill -TERM "$self"
    ) &
    deadline_pid=$!
}

# wait_until SECONDS CMD...: runs CMD every 0.1 s until it succeeds (0) or
# SECONDS have passed (1).
wait_until() {
    local i n=$(($1 * 10))
    shift
    for ((i = 0; i < n; i++)); do
        "$@" && return 0
        sleep 0.1
    done
    return 1
}

# Listener probes (PORT -> 0 when something listens there): TCP sockets, and
# rdma_cm ids (rping, dapltest and DAT servers over verbs open no socket).
# use_ofed_libdat2 DIR...: OFED's libdat2 must not be shadowed: the DIRs
# (our lib dir, as given and resolved) leave LD_LIBRARY_PATH.
use_ofed_libdat2() {
    [ -n "${LD_LIBRARY_PATH:-}" ] || return 0
    local args=() d keep
    for d in "$@"; do args+=(-e "$d"); done
    keep=$(tr ':' '\n' <<<"$LD_LIBRARY_PATH" | grep -vxF "${args[@]}" | paste -sd: -)
    if [ -n "$keep" ]; then export LD_LIBRARY_PATH=$keep; else unset LD_LIBRARY_PATH; fi
}
tcp_listening() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }
cm_listening() { rdma res show cm_id 2>/dev/null | grep -qE "state LISTEN .*src-addr [^ ]*:$1( |$)"; }

# await_server SECONDS CMD...: like wait_until for CMD (the server listens),
# but gives up as soon as the server ($spid) has exited: 0 listening, 1 the
# server exited, 2 not listening after SECONDS.
await_server() {
    local i n=$(($1 * 10))
    shift
    for ((i = 0; i < n; i++)); do
        "$@" && return 0
        kill -0 "$spid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 2
}

# show_outputs SERVER_DESCRIPTION CLIENT_DESCRIPTION: the tails of $sout and $cout.
show_outputs() {
    echo "---- server ($1), last 30 lines:"
    tail -n 30 "$sout"
    echo "---- client ($2), last 30 lines:"
    tail -n 30 "$cout"
}

# bad_report FILE ERE: the (at most 5) most frequent lines of FILE matching
# ERE case-insensitively, with their counts; nothing when none matches.
bad_report() {
    grep -iE "$2" "$1" | sort | uniq -c | sort -rn | head -n 5
}

# ---- two hosts: network namespaces joined by a veth pair --------------------------
# veth_hosts NS_S NS_C IF_S IF_C ADDR_S ADDR_C: namespaces NS_S and NS_C, the
# veth ends IF_S in NS_S with ADDR_S/24 and IF_C in NS_C with ADDR_C/24, all
# up (loopback too). Skips (exit 77) saying why when this machine cannot make
# them (not root, no veth). Sets peers_extra_cleanup so that the EXIT trap
# removes them (deleting a namespace deletes the veth end inside it, and so
# the pair).
veth_made_s= veth_made_c= veth_ns_s= veth_ns_c= veth_if_s= veth_if_c=
veth_remove() {
    [ -n "$veth_made_s" ] && ip netns del "$veth_ns_s" 2>/dev/null
    [ -n "$veth_made_c" ] && ip netns del "$veth_ns_c" 2>/dev/null
    ip link del "$veth_if_s" 2>/dev/null # if it never moved into its namespace
    return 0
}
veth_hosts() {
    veth_ns_s=$1 veth_ns_c=$2 veth_if_s=$3 veth_if_c=$4
    local addr_s=$5 addr_c=$6 err ns
    command -v ip >/dev/null || skip "no 'ip' command (apt-get install iproute2)"
    peers_extra_cleanup=veth_remove
    err=$(ip netns add "$veth_ns_s" 2>&1) || skip "cannot create a network namespace (uid $(id -u); needs root with CAP_SYS_ADMIN and CAP_NET_ADMIN): ip netns add: $err"
    veth_made_s=1
    err=$(ip netns add "$veth_ns_c" 2>&1) || skip "cannot create a second network namespace: ip netns add: $err"
    veth_made_c=1
    err=$(ip link add "$veth_if_s" type veth peer name "$veth_if_c" 2>&1) || skip "cannot create a veth pair (CAP_NET_ADMIN, veth module): ip link add: $err"
    ip link set "$veth_if_s" netns "$veth_ns_s" &&
        ip link set "$veth_if_c" netns "$veth_ns_c" &&
        ip -n "$veth_ns_s" addr add "$addr_s/24" dev "$veth_if_s" &&
        ip -n "$veth_ns_c" addr add "$addr_c/24" dev "$veth_if_c" || fail "cannot set up the veth pair"
    for ns in "$veth_ns_s" "$veth_ns_c"; do ip -n "$ns" link set lo up || fail "lo up in $ns"; done
    ip -n "$veth_ns_s" link set "$veth_if_s" up && ip -n "$veth_ns_c" link set "$veth_if_c" up || fail "veth up"
    echo "namespaces $veth_ns_s ($veth_if_s $addr_s, server) and $veth_ns_c ($veth_if_c $addr_c, client)"
}

# veth_rename NAME: both ends of veth_hosts' pair renamed NAME, up. MPI
# launchers hand the interface name given on the first host to every host.
veth_rename() {
    local side ns ifc
    for side in s c; do
        eval ns=\$veth_ns_$side ifc=\$veth_if_$side
        ip -n "$ns" link set "$ifc" down && ip -n "$ns" link set "$ifc" name "$1" && ip -n "$ns" link set "$1" up ||
            fail "cannot rename the veth end $ifc in $ns"
        eval veth_if_$side=\$1
    done
}

# rx_packets NS IF: how many packets interface IF of namespace NS received.
rx_packets() { ip -n "$1" -s link show "$2" | awk '/RX:/ { getline; print $2; exit }'; }
