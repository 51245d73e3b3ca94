#!/bin/bash
# Second stage of the Soft-RoCE test VM: init.sh runs this chrooted into the
# host's root (read-only), with the run's control share at /run/rxe-vm.
# It brings up the network and the rxe device, then runs the caller's
# command with the caller's environment and working directory, its output in
# the control share (rxe-vm.sh streams it to the host's stdout and stderr),
# and writes "exit <status>" to the control share's status file.
#
# From the control share (written by rxe-vm.sh):
#   config  shell variables: vm_addr vm_prefix vm_netdev vm_rdma_dev vm_cwd
#   env     "export NAME=value" lines: the caller's environment
#   cmd     "cmd=( ... )": the command
set -u
ctl=/run/rxe-vm
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

vm_error() {
    echo "rxe-vm guest: FATAL: $*" >&2
    echo "vm-error $*" >"$ctl/status"
    exit 1
}

# shellcheck source=/dev/null
. "$ctl/config" || vm_error "cannot read $ctl/config"
: "${vm_addr:?}" "${vm_prefix:?}" "${vm_netdev:?}" "${vm_rdma_dev:?}" "${vm_cwd:?}"

uptime_s() { local up _; read -r up _ </proc/uptime; echo "$up"; }

# ---- network and the rxe device ------------------------------------------------
# dummy0 (from the dummy module) carries the RoCE address; rxe loops packets
# to its own address back internally, so servers and clients in this one VM
# reach each other through rxe0. The VM has no network card: nothing leaves it.
ip link set lo up || vm_error "ip link set lo up failed"
ip link show "$vm_netdev" >/dev/null 2>&1 || vm_error "no $vm_netdev netdev (dummy module not loaded?)"
ip addr add "$vm_addr/$vm_prefix" dev "$vm_netdev" || vm_error "ip addr add $vm_addr/$vm_prefix dev $vm_netdev failed"
ip link set "$vm_netdev" up || vm_error "ip link set $vm_netdev up failed"
out=$(rdma link add "$vm_rdma_dev" type rxe netdev "$vm_netdev" 2>&1) \
    || vm_error "rdma link add $vm_rdma_dev type rxe netdev $vm_netdev failed: $out (kernel: $(dmesg | grep -i rxe | tail -n 3 | tr '\n' ' '))"

# Ready when the port is ACTIVE, its IPv4 RoCEv2 GID (index 1) is set and
# the uverbs and rdma_cm character devices exist. Read only the first GIDs:
# reading all 1024 GID files takes ~25 s under TCG.
sysdev=/sys/class/infiniband/$vm_rdma_dev
zero_gid=0000:0000:0000:0000:0000:0000:0000:0000
rxe_ready() {
    local state gid
    state=$(cat "$sysdev/ports/1/state" 2>/dev/null) || return 1
    [[ $state == *ACTIVE* ]] || return 1
    gid=$(cat "$sysdev/ports/1/gids/1" 2>/dev/null) || return 1
    [ -n "$gid" ] && [ "$gid" != "$zero_gid" ] || return 1
    compgen -G "/dev/infiniband/uverbs*" >/dev/null && [ -e /dev/infiniband/rdma_cm ]
}
for ((i = 0; i < 100; i++)); do
    rxe_ready && break
    sleep 0.1
done
rxe_ready || vm_error "$vm_rdma_dev not ready after 10 s: port state '$(cat "$sysdev/ports/1/state" 2>/dev/null)', gid[1] '$(cat "$sysdev/ports/1/gids/1" 2>/dev/null)', /dev/infiniband: $(ls /dev/infiniband 2>&1 | tr '\n' ' ')"

# Under TCG a busy-polling process starves ksoftirqd (where rxe does its
# work) until the next timer tick: round trips grow from ~11 us to ~4 ms.
# Real-time priority for ksoftirqd avoids that.
for d in /proc/[0-9]*; do
    read -r comm <"$d/comm" 2>/dev/null || continue
    case $comm in
    ksoftirqd/*) chrt -f -p 50 "${d#/proc/}" >/dev/null || vm_error "chrt -f -p 50 ${d#/proc/} ($comm) failed" ;;
    esac
done

uptime_s >"$ctl/ready"
echo "rxe-vm guest: $vm_rdma_dev ready on $vm_netdev $vm_addr at $(cat "$ctl/ready") s; running the command in $vm_cwd"

# ---- the caller's command -------------------------------------------------------
# A subshell: the caller's environment replaces ours, and the command's
# exit status (128+N for a signal) is its own.
setup_error() { echo "$*" >"$ctl/setup-error"; exit 125; } # rxe-vm.sh reports it
(
    # shellcheck source=/dev/null
    . "$ctl/env" || setup_error "cannot read the caller's environment ($ctl/env)"
    export DAT2_VM=1 DAT2_VM_ADDR=$vm_addr DAT2_VM_NETDEV=$vm_netdev DAT2_VM_DEVICE=$vm_rdma_dev
    # A TMPDIR of the host may lie under the host's /tmp, which the guest's
    # own /tmp hides: create it, or fall back to /tmp.
    if [ -n "${TMPDIR:-}" ] && ! { mkdir -p "$TMPDIR" 2>/dev/null && [ -w "$TMPDIR" ]; }; then
        echo "rxe-vm guest: TMPDIR=$TMPDIR is not writable in the guest; using /tmp" >&2
        export TMPDIR=/tmp
    fi
    ulimit -l unlimited 2>/dev/null
    cd "$vm_cwd" 2>/dev/null \
        || setup_error "cannot enter the working directory $vm_cwd in the guest (under the guest's own /tmp or /run? share it with --rw)"
    # shellcheck source=/dev/null
    . "$ctl/cmd" || setup_error "cannot read the command ($ctl/cmd)"
    # shellcheck disable=SC2154 # cmd comes from $ctl/cmd
    exec "${cmd[@]}"
) </dev/null >"$ctl/stdout" 2>"$ctl/stderr"
rc=$?
uptime_s >"$ctl/done"
if [ -s "$ctl/setup-error" ]; then
    echo "vm-error $(cat "$ctl/setup-error")" >"$ctl/status"
else
    echo "exit $rc" >"$ctl/status"
fi
exit 0
