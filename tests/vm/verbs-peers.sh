#!/bin/bash
# Unmodified peer programs (Debian's dapl2-utils: dtest, dtestcm, dapltest)
# run server and client over our verbs plugin on a real RDMA device, and the
# test judges what they print (dapltest exits 0 even when a test fails).
# Runs where a verbs device with an IP address exists: inside the Soft-RoCE
# VM (tests/vm/rxe-vm.sh, which exports DAT2_VM_ADDR), or on RDMA hardware.
#
#   verbs-peers.sh <build lib dir> <ours|ofed|ofed-cma|ours-cma|ours-scm> [case]
#
# Pairings:
#   ours      our libdat2 (LD_LIBRARY_PATH=<lib dir> shadows OFED's) + our
#             verbs plugin, named relatively in dat.conf
#   ofed      OFED's libdat2 + our verbs plugin, named by absolute path
#   ofed-cma  OFED's libdat2 + OFED's own cma provider (libdaplofa): the
#             baseline the performance results are compared with
#   ours-cma  our libdat2 + OFED's cma provider: our registry hosts OFED's
#             providers unchanged (the drop-in replacement of libdat2)
#   ours-scm  our libdat2 + OFED's scm provider (libdaploscm: connections over
#             sockets, QPs on the device), the registry's second OFED provider
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
# Absolute: peers_start enters a scratch directory before cases.sh is read.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../peers/lib.sh
. "$here/../peers/lib.sh" || { echo "cannot read $here/../peers/lib.sh"; exit 1; }
libdir=$1 pairing=$2 case=${3:-dtest}
addr=${VERBS_PEER_ADDR:-${DAT2_VM_ADDR:-10.0.0.1}}
ofed_lib=/usr/lib/x86_64-linux-gnu/libdat2.so.2

libdir=$(cd "$libdir" 2>/dev/null && pwd) || fail "no such lib dir: $1"
plugin=$libdir/libdat2_verbs.so
[ -e "$plugin" ] || fail "$plugin missing (build with libibverbs-dev and librdmacm-dev)"
for p in dtest dtestcm dapltest stdbuf ss rdma timeout taskset; do
    command -v $p >/dev/null || fail "$p not installed (dtest/dtestcm/dapltest: dapl2-utils; rdma: iproute2; taskset: util-linux)"
done
netdev=${VERBS_PEER_NETDEV:-$(ip -o -4 addr show | awk -v a="$addr" '{ split($4, p, "/"); if (p[1] == a) print $2 }' | head -n 1)}
[ -n "$netdev" ] || fail "no netdev has the address $addr (set DAT2_VM_ADDR or VERBS_PEER_ADDR)"
rdma link show 2>/dev/null | grep -q "netdev $netdev\b" || fail "$netdev ($addr) carries no RDMA device (rdma link show)"
# "link rxe0/1 state ACTIVE physical_state LINK_UP netdev dummy0": the device (scm's dat.conf entry)
rdma_dev=$(rdma link show 2>/dev/null | awk -v n="$netdev" '$NF == n { split($2, d, "/"); print d[1]; exit }')
case $pairing in ours-scm | ofedconf-scm) [ -n "$rdma_dev" ] || fail "no RDMA device name for $netdev in 'rdma link show' (the scm entry needs it)" ;; esac

peers_start verbs_peers 135

# ---- the pairing -------------------------------------------------------------
conf=$tmp/dat.conf
case $pairing in
ours | ofed) ia=verbs-peer ;;
ofed-cma | ours-cma) ia=ofa-v2-cma-roe-$netdev ;;
ours-scm) ia=ofa-v2-scm-roe-$netdev ;;
# OFED's own lines for this device with only the library changed to ours.
ofedconf-cma) ia=ofa-v2-cma-roe-$netdev-dat2 ;;
ofedconf-scm) ia=ofa-v2-scm-roe-$netdev-dat2 ;;
*) fail "pairing must be ours, ofed, ofed-cma, ours-cma, ours-scm, ofedconf-cma or ofedconf-scm, not '$pairing'" ;;
esac
case $pairing in
ours | ours-cma | ours-scm | ofedconf-cma | ofedconf-scm)
    libname=libdat2_verbs.so
    export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    want_dat2=$libdir/libdat2.so.2
    ;;
ofed | ofed-cma)
    [ -e "$ofed_lib" ] || fail "$ofed_lib missing (apt-get install libdapl2)"
    libname=$plugin
    use_ofed_libdat2 "$libdir" "$1"
    want_dat2=$ofed_lib
    ;;
esac
# OFED's registry needs nonthreadsafe entries (what dat_ia_open asks for).
cat >"$conf" <<CONF
verbs-peer u2.0 nonthreadsafe default $libname dat2.2.0 "address=$addr" ""
ofa-v2-cma-roe-$netdev u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "$netdev 0" ""
ofa-v2-scm-roe-$netdev u2.0 nonthreadsafe default libdaploscm.so.2 dapl.2.0 "$rdma_dev 1" ""
ofa-v2-cma-roe-$netdev-dat2 u2.0 nonthreadsafe default libdat2_verbs.so dapl.2.0 "$netdev 0" ""
ofa-v2-scm-roe-$netdev-dat2 u2.0 nonthreadsafe default libdat2_verbs.so dapl.2.0 "$rdma_dev 1" ""
CONF
export DAT_OVERRIDE=$conf

resolved=$(ldd "$(command -v dtest)" | awk '$1 == "libdat2.so.2" { print $3 }')
[ "$(readlink -f "$resolved")" = "$(readlink -f "$want_dat2")" ] \
    || fail "pairing $pairing: dtest resolves libdat2.so.2 to '$resolved', expected $want_dat2"
echo "pairing $pairing: libdat2 $resolved, IA $ia ($addr on $netdev), case $case"

# A slower device in a small VM: longer limits, smaller runs.
: "${client_limit:=90}"; server_wait=30 exit_wait=30 line_wait=15
dtest_args="-B 50 -b 65536" dtestcm_connections=100 iteration_divisor=2
dtestx_atomics=yes # rxe has IBV_ATOMIC_HCA: dtestx must run its atomics
dat_listening=cm_listening # rdma_cm listeners are not sockets
# OFED's scm provider listens on a TCP socket, on the qualifier + 1000.
scm_listening() { tcp_listening $(($1 + 1000)); }
[ "$pairing" = ours-scm ] && dat_listening=scm_listening
# The busy-polling ping-pong on its own vCPU each, as vm-smoke.sh runs
# perftest: two pollers the guest's scheduler put on one vCPU take turns
# at the timer tick (4 ms a round trip).
if [ "$case" = dtest-W ] && [ "$(nproc)" -ge 2 ]; then
    server_cpu=0 client_cpu=1
fi
# shellcheck source=../peers/cases.sh
. "$here/../peers/cases.sh" || fail "cannot read $here/../peers/cases.sh"
run_case
exit 0
