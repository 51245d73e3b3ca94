#!/bin/busybox sh
# PID 1 of the Soft-RoCE test VM. rxe-vm.sh puts this file into the initramfs
# as /init, next to a static busybox and the kernel modules listed in
# /modules/order (already in load order). It
#   1. loads the modules,
#   2. mounts the run's control share (tag "ctl") and the host's root
#      (tag "hostroot", read-only) with fresh proc, sys, dev, tmp and run,
#   3. mounts the run's read-write shares (tags named in /ctl/shares) at the
#      same paths they have on the host,
#   4. runs the run's guest-run.sh chrooted into the host root, and
#   5. powers the VM off. qemu runs with -no-reboot and the kernel with
#      panic=-1, so if this script dies the VM still ends.
# Whatever goes wrong before /ctl/status is written shows on the serial
# console, which rxe-vm.sh prints when the run produced no status.

/bin/busybox --install -s /bin
export PATH=/bin
mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
mount -t proc proc /proc
mount -t sysfs sysfs /sys
hostname rxe-vm

ctl_mounted=

power_off() {
    sync
    poweroff -f
    echo o >/proc/sysrq-trigger
    sleep 30
}

die() {
    echo "rxe-vm init: FATAL: $*"
    [ -n "$ctl_mounted" ] && echo "vm-error init: $*" >/ctl/status
    power_off
}

# 9p: msize well above the 8 KiB default (every 9p message is a round trip
# through the emulator); the read-only root may cache, the shares must not
# (the host reads what the guest wrote as soon as the VM stops).
p9_opts=trans=virtio,version=9p2000.L,msize=262144

while read -r mod; do
    insmod "/modules/$mod" || die "insmod $mod failed (see the kernel messages above)"
done </modules/order
echo "rxe-vm init: $(wc -l </modules/order) modules loaded"

mount -t 9p -o "$p9_opts,cache=mmap" ctl /ctl || die "cannot mount the control share (tag ctl)"
ctl_mounted=1

h=/host
mount -t 9p -o "$p9_opts,ro,cache=loose" hostroot $h || die "cannot mount the host root (tag hostroot)"
mount -t proc proc $h/proc || die "mount proc in the host root"
mount -t sysfs sysfs $h/sys || die "mount sysfs in the host root"
mount -t devtmpfs devtmpfs $h/dev || die "mount devtmpfs in the host root"
mkdir -p $h/dev/pts $h/dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts $h/dev/pts || die "mount devpts"
mount -t tmpfs -o mode=1777 tmpfs $h/dev/shm || die "mount /dev/shm"
mount -t tmpfs -o mode=1777 tmpfs $h/tmp || die "mount /tmp"
mount -t tmpfs -o mode=755 tmpfs $h/run || die "mount /run"
if [ -d $h/var/tmp ] && [ ! -L $h/var/tmp ]; then
    mount -t tmpfs -o mode=1777 tmpfs $h/var/tmp || die "mount /var/tmp"
fi
mkdir -p $h/run/rxe-vm $h/run/lock
mount --bind /ctl $h/run/rxe-vm || die "bind the control share into the host root"

# Read-write shares, in the order rxe-vm.sh listed them (a share inside
# another comes after it). A path under a tmpfs mounted above (/tmp, /run)
# does not exist there yet: create it.
if [ -f /ctl/shares ]; then
    while read -r tag path; do
        [ -n "$tag" ] || continue
        mkdir -p "$h$path" 2>/dev/null
        [ -d "$h$path" ] || die "share $tag: $path does not exist in the guest and cannot be created"
        mount -t 9p -o "$p9_opts,cache=mmap" "$tag" "$h$path" || die "cannot mount share $tag at $path"
    done </ctl/shares
fi

[ -f /ctl/guest-run.sh ] || die "the control share has no guest-run.sh"
echo "rxe-vm init: shares mounted; running guest-run.sh in the host root"
chroot $h /bin/bash /run/rxe-vm/guest-run.sh
rc=$?
[ -s /ctl/status ] || echo "vm-error guest-run.sh ended with status $rc without writing a status" >/ctl/status
echo "rxe-vm init: $(cat /ctl/status); powering off"
power_off
