#!/bin/bash
# Runs one command inside a qemu VM that has a real verbs device: Soft-RoCE
# (rdma_rxe) rxe0 over dummy0, which has the address 10.0.0.1/24. The guest runs Debian's
# kernel, chrooted into the host's own root shared read-only over virtio-9p,
# so host-built binaries, plugins and libraries run there unchanged.
#
#   tests/vm/rxe-vm.sh [options] -- <command> [args...]
#
# The command runs as root in the caller's working directory, with the
# caller's environment (LD_LIBRARY_PATH, DAT_OVERRIDE, ...) plus DAT2_VM=1,
# DAT2_VM_ADDR, DAT2_VM_NETDEV, DAT2_VM_DEVICE and DAT2_VM_WORK. Its stdout
# and stderr arrive on ours while it runs; its exit status is ours.
#
# Options:
#   --work DIR   a directory shared read-write at the same path (created if
#                missing, kept afterwards); default: a temporary directory,
#                removed afterwards. DAT2_VM_WORK names it in the guest.
#   --rw DIR     one more existing directory shared read-write at its own
#                path (repeatable), e.g. a build tree that ctest writes into.
#                Everything else of the host is read-only in the guest; /tmp,
#                /run, /var/tmp and /dev/shm are the guest's own (empty).
#   --prepare    install what is missing and build the cached kernel and
#                initramfs, then stop (boots nothing)
#   -q           no "rxe-vm:" progress lines on stderr (errors still show)
#   -v           print the guest's serial console log at the end
# Environment:
#   DAT2_VM_CACHE    cache of kernel, modules, busybox and initramfs
#                    (default ${XDG_CACHE_HOME:-/var/cache}/dat2-rxe-vm)
#   DAT2_VM_TIMEOUT  seconds the whole VM may run (default 1200)
#   DAT2_VM_KERNEL   kernel release, e.g. 6.1.0-56-amd64 (default: the one
#                    cached, else what Debian's linux-image-amd64 depends on)
#   DAT2_VM_MEM      MiB (default 2048)     DAT2_VM_SMP   vCPUs (default 2)
#   DAT2_VM_ADDR     dummy0's IPv4 address (default 10.0.0.1, prefix /24)
#   DAT2_VM_APPEND   more kernel command line (e.g. loglevel=7)
#   DAT2_VM_BZIMAGE=1  boot the compressed bzImage instead of the PVH vmlinux
#   DAT2_VM_CONSOLE_LOG  a file to copy the guest's serial console log to
#   DAT2_VM_NO_INSTALL=1  never call apt-get; fail if something is missing
# Exit status: the command's; 124 when the VM ran out of time; 125 when the
# VM could not be prepared, booted or set up (the reason and the tail of the
# serial console are printed: this never skips silently).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${DAT2_VM_CACHE:-${XDG_CACHE_HOME:-/var/cache}/dat2-rxe-vm}
vm_timeout=${DAT2_VM_TIMEOUT:-1200}
vm_mem=${DAT2_VM_MEM:-2048}
vm_smp=${DAT2_VM_SMP:-2}
vm_addr=${DAT2_VM_ADDR:-10.0.0.1}
vm_prefix=24
vm_netdev=dummy0
vm_rdma_dev=rxe0

# Host packages: the emulator and depmod/cpio to build the initramfs; the
# rest is the RDMA userspace the guest uses from the host root (rdma and ip
# from iproute2, chrt from util-linux, librxe from ibverbs-providers) and the
# peer programs tests run in the VM.
host_packages=(qemu-system-x86 kmod cpio gzip coreutils util-linux iproute2
    ibverbs-providers ibverbs-utils rdmacm-utils perftest libdapl2 dapl2-utils)
# Top-level modules; their dependencies come from modules.dep. crc32_generic
# is only requested at run time (rxe asks the crypto API for "crc32"; without
# it "rdma link add" fails with ENOENT), so depmod cannot know it.
want_modules=(crc32_generic virtio_pci 9pnet_virtio 9p dummy rdma_rxe ib_uverbs rdma_ucm ib_umad)

quiet='' verbose='' prepare_only='' work='' keep_work=''
rw_dirs=()

say() { [ -n "$quiet" ] || echo "rxe-vm: $*" >&2; }
die() { echo "rxe-vm: error: $*" >&2; exit 125; }
usage() { sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

while [ $# -gt 0 ]; do
    case $1 in
    --work) [ $# -ge 2 ] || die "--work needs a directory"; work=$2; keep_work=1; shift 2 ;;
    --work=*) work=${1#--work=}; keep_work=1; shift ;;
    --rw) [ $# -ge 2 ] || die "--rw needs a directory"; rw_dirs+=("$2"); shift 2 ;;
    --rw=*) rw_dirs+=("${1#--rw=}"); shift ;;
    --prepare) prepare_only=1; shift ;;
    -q | --quiet) quiet=1; shift ;;
    -v | --verbose) verbose=1; shift ;;
    -h | --help) usage; exit 0 ;;
    --) shift; break ;;
    *) die "unknown argument '$1' (usage: rxe-vm.sh [--work DIR] [--rw DIR]... [-q] [-v] -- <command...>)" ;;
    esac
done
[ -n "$prepare_only" ] || [ $# -gt 0 ] || die "no command given (usage: rxe-vm.sh [options] -- <command...>)"
[[ $vm_timeout =~ ^[0-9]+$ ]] && [ "$vm_timeout" -gt 0 ] || die "DAT2_VM_TIMEOUT must be a positive number of seconds, not '$vm_timeout'"

# ---- packages ---------------------------------------------------------------------
apt_updated=
apt_update() {
    [ -n "$apt_updated" ] && return 0
    say "apt-get update"
    apt-get update -qq >&2 || die "apt-get update failed"
    apt_updated=1
}

ensure_packages() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    [ "${DAT2_VM_NO_INSTALL:-0}" = 1 ] && die "missing packages ${missing[*]} (and DAT2_VM_NO_INSTALL=1)"
    [ "$(id -u)" = 0 ] || die "missing packages ${missing[*]}: run as root to let rxe-vm.sh install them"
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
        apt_update
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
            || die "apt-get install ${missing[*]} failed"
    fi
}

# apt_download PACKAGE DIR: the package's .deb into DIR (its path on stdout).
apt_download() {
    local pkg=$1 dir=$2 deb
    [ "${DAT2_VM_NO_INSTALL:-0}" = 1 ] && die "$pkg is not cached in $cache (and DAT2_VM_NO_INSTALL=1)"
    if ! (cd "$dir" && apt-get download -qq "$pkg" >/dev/null 2>&1); then
        apt_update
        (cd "$dir" && apt-get download -qq "$pkg" >/dev/null 2>"$dir/download.err") \
            || die "apt-get download $pkg failed: $(tail -n 3 "$dir/download.err")"
    fi
    deb=$(ls "$dir"/"${pkg%%=*}"_*.deb 2>/dev/null | head -n 1)
    [ -n "$deb" ] || die "apt-get download $pkg left no .deb in $dir"
    echo "$deb"
}

# ---- the cache: kernel + modules, busybox, initramfs ------------------------------
kernel_release() {
    local k
    if [ -n "${DAT2_VM_KERNEL:-}" ]; then
        echo "$DAT2_VM_KERNEL"
        return
    fi
    # The cached kernel, so that a warm cache needs no package index at all.
    if [ -f "$cache/kernel-release" ]; then
        k=$(cat "$cache/kernel-release")
        [ -f "$cache/$k/vmlinuz" ] && { echo "$k"; return; }
    fi
    k=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -nE 's/^ *Depends: linux-image-([0-9][^ ]*-amd64)$/\1/p' | head -n 1)
    if [ -z "$k" ]; then
        apt_update
        k=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -nE 's/^ *Depends: linux-image-([0-9][^ ]*-amd64)$/\1/p' | head -n 1)
    fi
    [ -n "$k" ] || die "cannot tell which kernel linux-image-amd64 depends on (apt-cache depends linux-image-amd64); set DAT2_VM_KERNEL"
    echo "$k"
}

# module_order ROOT KVER NAME...: the module files (relative to
# ROOT/lib/modules/KVER) that NAME... need, dependencies first; built-in
# modules are left out.
module_order() {
    local mdir=$1/lib/modules/$2
    shift 2
    awk -v want="$*" '
        function base(p) { sub(/.*\//, "", p); sub(/\.ko(\.(xz|zst|gz))?$/, "", p); gsub(/-/, "_", p); return p }
        FILENAME ~ /modules\.builtin$/ { builtin[base($0)] = 1; next }
        {
            key = $1; sub(/:$/, "", key)
            path_of[base(key)] = key
            deps[key] = ""
            for (i = 2; i <= NF; i++) deps[key] = deps[key] " " $i
        }
        function visit(p,   n, d, i) {
            if (p in done) return
            done[p] = 1
            n = split(deps[p], d, " ")
            for (i = n; i >= 1; i--) visit(d[i])   # modprobe loads the list back to front
            print p
        }
        END {
            n = split(want, w, " ")
            for (i = 1; i <= n; i++) {
                m = w[i]; gsub(/-/, "_", m)
                if (m in builtin) continue
                if (!(m in path_of)) { print "missing module " m > "/dev/stderr"; bad = 1; continue }
                visit(path_of[m])
            }
            exit bad
        }' "$mdir/modules.builtin" "$mdir/modules.dep"
}

# bzimage_payload BZIMAGE: the uncompressed vmlinux (ELF) inside a bzImage,
# on stdout. The x86 boot header (boot protocol 2.08+) locates the payload:
# setup_sects at 0x1f1, payload_offset and payload_length at 0x248 and 0x24c,
# the offset counting from the protected-mode code after the setup sectors.
bzimage_payload() {
    local f=$1 setup_sects offset length start magic
    setup_sects=$(od -An -tu1 -j $((0x1f1)) -N1 "$f") || return 1
    offset=$(od -An -tu4 -j $((0x248)) -N4 "$f") || return 1
    length=$(od -An -tu4 -j $((0x24c)) -N4 "$f") || return 1
    [ "$setup_sects" -eq 0 ] && setup_sects=4
    start=$(((setup_sects + 1) * 512 + offset))
    magic=$(od -An -tx1 -j "$start" -N6 "$f" | tr -d ' \n')
    payload() { dd if="$f" iflag=skip_bytes,count_bytes skip="$start" count="$length" bs=1M status=none; }
    case $magic in
    fd377a585a00) payload | xz -dc --single-stream ;;
    1f8b*) payload | gzip -dc 2>/dev/null || true ;; # gzip complains about the trailing size
    *) return 1 ;;
    esac
}

# What a prepared kernel directory holds; a change here prepares it anew.
kernel_layout="layout 2; modules ${want_modules[*]}"

# prepare_kernel KVER: $cache/KVER/{vmlinuz, vmlinux if the kernel can boot
# through PVH, modules/*.ko, modules/order}.
prepare_kernel() {
    local k=$1 kdir=$cache/$1 tmp deb mods m name
    if [ "$(cat "$kdir/prepared" 2>/dev/null)" = "$kernel_layout" ]; then
        return 0
    fi
    say "preparing kernel $k in $kdir (apt-get download linux-image-$k)"
    tmp=$(mktemp -d "$cache/tmp.XXXXXX") || die "mktemp in $cache"
    deb=$(apt_download "linux-image-$k" "$tmp") || exit 125
    dpkg-deb -x "$deb" "$tmp/root" || die "dpkg-deb -x $deb failed"
    [ -f "$tmp/root/boot/vmlinuz-$k" ] || die "$deb has no boot/vmlinuz-$k"
    # The .deb ships no modules.dep.
    depmod -b "$tmp/root" "$k" || die "depmod -b $tmp/root $k failed"
    mods=$(module_order "$tmp/root" "$k" "${want_modules[@]}") || die "kernel $k lacks modules the VM needs"
    rm -rf "$kdir"
    mkdir -p "$tmp/out/modules"
    for m in $mods; do
        name=${m##*/}
        case $name in
        *.ko) cp "$tmp/root/lib/modules/$k/$m" "$tmp/out/modules/$name" ;;
        *.ko.xz) xz -dc "$tmp/root/lib/modules/$k/$m" >"$tmp/out/modules/${name%.xz}"; name=${name%.xz} ;;
        *.ko.zst) zstd -qdc "$tmp/root/lib/modules/$k/$m" >"$tmp/out/modules/${name%.zst}"; name=${name%.zst} ;;
        *.ko.gz) gzip -dc "$tmp/root/lib/modules/$k/$m" >"$tmp/out/modules/${name%.gz}"; name=${name%.gz} ;;
        esac || die "cannot unpack module $m"
        echo "$name" >>"$tmp/out/modules/order"
    done
    echo "$kernel_layout" >"$tmp/out/prepared"
    cp "$tmp/root/boot/vmlinuz-$k" "$tmp/out/vmlinuz" || die "copy vmlinuz"
    # A PVH-capable kernel boots from its uncompressed ELF image straight
    # into 64-bit code: no firmware boot path and no decompression under TCG,
    # half the boot time (about 4.5 s instead of 8 s to rxe0 ready).
    if grep -qx 'CONFIG_PVH=y' "$tmp/root/boot/config-$k" 2>/dev/null; then
        bzimage_payload "$tmp/out/vmlinuz" >"$tmp/out/vmlinux" \
            && [ "$(head -c 4 "$tmp/out/vmlinux" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ] \
            || rm -f "$tmp/out/vmlinux"
    fi
    mv "$tmp/out" "$kdir" || die "mv $tmp/out $kdir"
    rm -rf "$tmp"
}

# prepare_busybox: a static busybox from Debian's busybox-static, unpacked
# into the cache (installing the package would replace the host's busybox).
prepare_busybox() {
    local tmp deb
    [ -x "$cache/busybox/busybox" ] && return 0
    say "preparing busybox in $cache/busybox (apt-get download busybox-static)"
    tmp=$(mktemp -d "$cache/tmp.XXXXXX") || die "mktemp in $cache"
    deb=$(apt_download busybox-static "$tmp") || exit 125
    dpkg-deb -x "$deb" "$tmp/root" || die "dpkg-deb -x $deb failed"
    [ -x "$tmp/root/bin/busybox" ] || die "$deb has no bin/busybox"
    mkdir -p "$cache/busybox"
    cp "$tmp/root/bin/busybox" "$cache/busybox/busybox.new" && mv "$cache/busybox/busybox.new" "$cache/busybox/busybox" \
        || die "cannot copy busybox into $cache/busybox"
    rm -rf "$tmp"
}

# prepare_initramfs KVER: prints the path of the initramfs for the current
# init.sh, module set and busybox (rebuilt when any of them changes).
prepare_initramfs() {
    local kdir=$cache/$1 key img tmp
    key=$(cat "$here/init.sh" "$kdir/modules/order" "$cache/busybox/busybox" | sha256sum | cut -c1-16)
    img=$kdir/initramfs-$key.cpio.gz
    if [ ! -f "$img" ]; then
        say "building $img"
        tmp=$(mktemp -d "$cache/tmp.XXXXXX") || die "mktemp in $cache"
        mkdir -p "$tmp/root"/{bin,dev,proc,sys,ctl,host,modules}
        cp "$cache/busybox/busybox" "$tmp/root/bin/busybox"
        cp "$here/init.sh" "$tmp/root/init"
        chmod 755 "$tmp/root/init" "$tmp/root/bin/busybox"
        cp "$kdir"/modules/*.ko "$kdir/modules/order" "$tmp/root/modules/"
        (cd "$tmp/root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1) >"$tmp/initramfs" \
            || die "cannot build the initramfs"
        rm -f "$kdir"/initramfs-*.cpio.gz
        mv "$tmp/initramfs" "$img" || die "mv initramfs"
        rm -rf "$tmp"
    fi
    echo "$img"
}

# kernel_image: the PVH vmlinux when there is one (DAT2_VM_BZIMAGE=1: the bzImage).
kernel_image() {
    if [ -s "$cache/$kver/vmlinux" ] && [ "${DAT2_VM_BZIMAGE:-0}" != 1 ]; then
        echo "$cache/$kver/vmlinux"
    else
        echo "$cache/$kver/vmlinuz"
    fi
}

ensure_packages "${host_packages[@]}"
mkdir -p "$cache" || die "cannot create the cache directory $cache (set DAT2_VM_CACHE)"
# One preparer at a time; runs that find the cache ready only wait for it.
exec 9>"$cache/.lock" || die "cannot open $cache/.lock"
flock 9 || die "flock $cache/.lock"
rm -rf "$cache"/tmp.* # what a preparer that failed left behind
kver=$(kernel_release) || exit 125
prepare_kernel "$kver"
echo "$kver" >"$cache/kernel-release"
prepare_busybox
initramfs=$(prepare_initramfs "$kver") || exit 125
flock -u 9
exec 9>&-
if [ -n "$prepare_only" ]; then
    say "ready: kernel $(kernel_image), initramfs $initramfs"
    exit 0
fi

# ---- this run's shares ----------------------------------------------------------------
# run/ holds the serial log and qemu's own messages; run/ctl is the control
# share (config, env, cmd in; stdout, stderr, status, ready, done out).
run=$(mktemp -d "${TMPDIR:-/tmp}/rxe-vm.XXXXXX") || die "mktemp"
ctl=$run/ctl
mkdir -p "$ctl"
qemu_pid='' tail_pids=()
cleanup() {
    [ -n "$qemu_pid" ] && kill -TERM "$qemu_pid" 2>/dev/null && wait "$qemu_pid" 2>/dev/null
    [ ${#tail_pids[@]} -gt 0 ] && kill "${tail_pids[@]}" 2>/dev/null
    [ -z "$keep_work" ] && [ -n "$work" ] && rm -rf "$work"
    rm -rf "$run"
}
trap cleanup EXIT
trap 'echo "rxe-vm: interrupted" >&2; exit 130' INT TERM

if [ -z "$work" ]; then
    work=$run/work
fi
mkdir -p "$work" || die "cannot create the work directory $work"
shares=()
for d in "$work" "${rw_dirs[@]}"; do
    [ -d "$d" ] || die "--rw $d: no such directory"
    d=$(cd "$d" && pwd -P) || die "cannot resolve $d"
    [[ $d == *$'\n'* ]] && die "a shared path may not contain a newline: $d"
    [ "$d" = / ] && die "the host root is shared read-only; it cannot be a read-write share"
    shares+=("$d")
done
work=$(cd "$work" && pwd -P)
# Parents sort before their subdirectories, so init.sh mounts them first.
mapfile -t shares < <(printf '%s\n' "${shares[@]}" | LC_ALL=C sort -u)

vm_cwd=$(pwd -P)
{
    printf 'vm_addr=%q vm_prefix=%q vm_netdev=%q vm_rdma_dev=%q vm_cwd=%q\n' \
        "$vm_addr" "$vm_prefix" "$vm_netdev" "$vm_rdma_dev" "$vm_cwd"
} >"$ctl/config"
# The caller's environment, less what belongs to this shell or this host.
for name in $(compgen -e); do
    case $name in
    BASH* | SHELLOPTS | SHLVL | PWD | OLDPWD | _ | UID | EUID | PPID | HOSTNAME | DAT2_VM_*) continue ;;
    esac
    printf 'export %s=%q\n' "$name" "${!name}"
done >"$ctl/env"
printf 'export DAT2_VM_WORK=%q\n' "$work" >>"$ctl/env"
{
    printf 'cmd=('
    printf ' %q' "$@"
    printf ' )\n'
} >"$ctl/cmd"
cp "$here/guest-run.sh" "$ctl/guest-run.sh"
: >"$ctl/stdout"
: >"$ctl/stderr"

virtfs=(-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
    -virtfs "local,path=$ctl,mount_tag=ctl,security_model=none")
i=0
for d in "${shares[@]}"; do
    virtfs+=(-virtfs "local,path=$d,mount_tag=rw$i,security_model=none,multidevs=remap")
    printf 'rw%d %s\n' "$i" "$d" >>"$ctl/shares"
    i=$((i + 1))
done

# ---- boot -----------------------------------------------------------------------------
# TCG: this machine's /dev/kvm runs only PVM guest kernels (Debian's kernel
# hangs after "Booting from ROM" and -cpu host aborts). No network card
# (-nodefaults): the guest's RoCE traffic stays on its dummy0.
# no_timer_check: with the host's CPUs busy, TCG delivered the IO-APIC
# timer's first ticks too late and the guest kernel panicked at boot ("IO-APIC
# + timer doesn't work"); the check is for broken hardware, which this is not.
kernel=$(kernel_image)
say "booting kernel $kver (${kernel##*/}, TCG, $vm_smp vCPUs, $vm_mem MiB, limit $vm_timeout s)"
start=$(date +%s.%N)
timeout -k 10 "$vm_timeout" qemu-system-x86_64 \
    -accel tcg,thread=multi,tb-size=256 -cpu max -smp "$vm_smp" -m "$vm_mem" \
    -display none -no-reboot -nodefaults -monitor none \
    -chardev "file,id=console,path=$run/console.log" -serial chardev:console \
    -kernel "$kernel" -initrd "$initramfs" \
    -append "console=ttyS0 panic=-1 loglevel=4 rdinit=/init no_timer_check ${DAT2_VM_APPEND:-}" \
    "${virtfs[@]}" \
    </dev/null >"$run/qemu.log" 2>&1 &
qemu_pid=$!
# The command's output, as the guest writes it (9p writes reach the host
# files at once); tail ends after one last read once qemu has gone.
tail -s 0.2 -n +1 -f --pid="$qemu_pid" "$ctl/stdout" &
tail_pids+=($!)
tail -s 0.2 -n +1 -f --pid="$qemu_pid" "$ctl/stderr" >&2 &
tail_pids+=($!)
wait "$qemu_pid"
qemu_rc=$?
qemu_pid=
wait "${tail_pids[@]}"
tail_pids=()
end=$(date +%s.%N)

status=$(cat "$ctl/status" 2>/dev/null)
console_tail() {
    echo "---- qemu messages:" >&2
    tail -n 20 "$run/qemu.log" >&2
    echo "---- serial console, last ${1:-60} lines${DAT2_VM_CONSOLE_LOG:+ (all of it in $DAT2_VM_CONSOLE_LOG)}:" >&2
    tail -n "${1:-60}" "$run/console.log" >&2
}
[ -n "$verbose" ] && { echo "---- serial console:" >&2; cat "$run/console.log" >&2; }
[ -n "${DAT2_VM_CONSOLE_LOG:-}" ] && cp "$run/console.log" "$DAT2_VM_CONSOLE_LOG"

case $qemu_rc in
124 | 137)
    echo "rxe-vm: error: the VM did not finish within DAT2_VM_TIMEOUT=$vm_timeout s; stopped it" >&2
    console_tail 40
    exit 124
    ;;
esac
case $status in
"exit "*)
    rc=${status#exit }
    ready=$(cat "$ctl/ready" 2>/dev/null) done_at=$(cat "$ctl/done" 2>/dev/null)
    ready_wall=$(stat -c %.3Y "$ctl/ready" 2>/dev/null)
    say "$(awk -v s="$start" -v e="$end" -v r="$ready" -v d="$done_at" -v w="$ready_wall" -v rc="$rc" -v dev="$vm_rdma_dev" \
        'BEGIN { printf "%s ready %.1f s after qemu started (guest kernel uptime %.1f s); command exit %d after %.1f s; VM %.1f s in all", dev, w - s, r, rc, d - r, e - s }')"
    exit "$rc"
    ;;
"vm-error "*)
    echo "rxe-vm: error: the VM could not run the command: ${status#vm-error }" >&2
    console_tail 40
    exit 125
    ;;
*)
    echo "rxe-vm: error: the VM stopped (qemu exit $qemu_rc) without reporting a status: it did not boot or its init died" >&2
    console_tail 60
    exit 125
    ;;
esac
