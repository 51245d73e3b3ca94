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
# Cases: dtest (default) dtest-p dtest-c dtest-W dtest-D dtestcm dtestsrq dtestsrq-defaults dtestx
#        dapltest-T-SR dapltest-T-RR dapltest-T-RW dapltest-T-V
#        dapltest-P-RW dapltest-P-RR dapltest-Q dapltest-soak (load and soak, ~60 s)
#        dapltest-L-{ia,pz,cno,evd,ep,rsp,psp,lmr,rpost,size_lmr} (dapltest -T L)
#        dapltest-F-{queryinfo,pz,mem,endpoint,hwconn,connmgt} (dapltest -T F)
#        dapltest-T-RSP (dapltest -T T -r: Reserved Service Points)
# Performance cases print "RESULT <case> <number> <unit>".
# Environment: DAPL_PEER_IA picks the dat.conf entry (ofi-tcp by default;
# ofi-sockets, ofi-net, and the RDM transport's ofi-shm and ofi-rxm exist too).
#
# dtest uses fixed ports 15828 (side channel) and 45248, dapltest 62000: the
# cases cannot run in parallel (ctest: RESOURCE_LOCK dapl_ports).
set -u
# The fixed ports (and dapltest -T L's 100 listeners at 43414..43513) lie in
# the kernel's ephemeral range, where any test running beside a case may
# hold one for a connection of its own: as root, each case gets a network
# namespace of its own with only loopback in it. The case's own process
# takes ephemeral ports too (libfabric's tcp endpoints listen on one), so
# the namespace's ephemeral range starts above all the fixed ports but 62000,
# which lies above the default range's end.
if [ -z "${DAPL_PEER_NETNS:-}" ] && [ "$(id -u)" = 0 ] && unshare -n true 2>/dev/null; then
    export DAPL_PEER_NETNS=private
    exec unshare -n bash -c 'ip link set lo up || { echo "FAIL: cannot bring up loopback in a new network namespace (ip link set lo up)"; exit 1; }
        echo "46000 60999" >/proc/sys/net/ipv4/ip_local_port_range || { echo "FAIL: cannot set the namespace'"'"'s ephemeral port range"; exit 1; }
        exec bash "$@"' bash "${BASH_SOURCE[0]}" "$@"
fi
# Absolute: peers_start enters a scratch directory before cases.sh is read.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"
libdir=$1 pairing=$2 case=${3:-dtest}
ia=${DAPL_PEER_IA:-ofi-tcp}
ofed_lib=/usr/lib/x86_64-linux-gnu/libdat2.so.2
addr=127.0.0.1

libdir=$(cd "$libdir" 2>/dev/null && pwd) || fail "no such lib dir: $1"
plugin=$libdir/libdat2_ofi.so
[ -e "$plugin" ] || fail "$plugin missing (build the ofi plugin)"
for p in dtest dtestcm dtestsrq dtestx dapltest stdbuf ss timeout; do
    command -v $p >/dev/null || fail "$p not installed (dtest/dtestcm/dapltest: apt-get install dapl2-utils)"
done

# ctest gives a case 150 s (TIMEOUT; the soak, whose three rounds take
# 40 s each on a busy machine, 260 s); stop before that, so the peers and
# the scratch directory are cleaned up.
if [ "$case" = dapltest-soak ]; then peers_start dapl_peers 240; else peers_start dapl_peers 135; fi

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
    use_ofed_libdat2 "$libdir" "$1"
    want_dat2=$ofed_lib
    ;;
*) fail "pairing must be ours or ofed, not '$pairing'" ;;
esac
# OFED's registry needs nonthreadsafe entries (what dat_ia_open asks for).
cat >"$conf" <<CONF
ofi-tcp u2.0 nonthreadsafe default $libname dat2.2.0 "provider=tcp address=$addr" ""
ofi-sockets u2.0 nonthreadsafe default $libname dat2.2.0 "provider=sockets address=$addr" ""
ofi-net u2.0 nonthreadsafe default $libname dat2.2.0 "provider=net address=$addr" ""
ofi-shm u2.0 nonthreadsafe default $libname dat2.2.0 "provider=shm" ""
ofi-rxm u2.0 nonthreadsafe default $libname dat2.2.0 "provider=tcp;ofi_rxm address=$addr" ""
CONF
# shm has atomics (dtestx runs fetch and add and compare and swap there).
[ "$ia" = ofi-shm ] && dtestx_atomics=${dtestx_atomics:-yes}
export DAT_OVERRIDE=$conf
# The data path binds to the address of FI_*_IFACE: keep it on loopback.
export FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo FI_NET_IFACE=lo

# The peer binaries must reach the libdat2 of the pairing.
resolved=$(ldd "$(command -v dtest)" | awk '$1 == "libdat2.so.2" { print $3 }')
[ "$(readlink -f "$resolved")" = "$(readlink -f "$want_dat2")" ] \
    || fail "pairing $pairing: dtest resolves libdat2.so.2 to '$resolved', expected $want_dat2"
echo "pairing $pairing: libdat2 $resolved, plugin $plugin, IA $ia, case $case, network namespace ${DAPL_PEER_NETNS:-shared (not root)}"

# shellcheck source=cases.sh
dat_listening=tcp_listening # our libfabric tcp listeners are sockets
. "$here/cases.sh" || fail "cannot read $here/cases.sh"
run_case
exit 0
