#!/bin/bash
# Open MPI 1.6.5 (../shared/clients), its udapl BTL unmodified, built against
# our include/dat and libdat.so.1 (a DAT 1.2 consumer) once per machine by
# build-openmpi.sh (cached outside the clone by content hash); then, with 2
# ranks, judged by their output:
#   ring_c                   over btl udapl: every rank reports its exit
#   osu_latency, osu_bw      over btl udapl, then over Open MPI's own tcp
#                            BTL in the same run: every size row in order,
#                            each figure finite and above 0
# and a table of udapl/tcp ratios (latency: udapl over tcp, lower is
# better; bandwidth: udapl over tcp, higher is better).
#
#   openmpi-1.6.5-udapl.sh <lib dir holding libdat.so> [ia_name] [local|netns]
#
# local (the default): both ranks on this host, the IA from <lib dir>/dat.conf
# (the build's generated one; DAT_OVERRIDE), ofi-tcp unless named, the tcp
# BTL on loopback. netns: one rank in each of two network namespaces joined
# by a veth pair, mpirun's remote daemon started through netns-launcher.sh
# (as through ssh), each rank with a dat.conf whose IA (provider tcp) serves
# on its namespace's address, both BTLs on the veth; osu_latency over udapl
# must move over 1000 packets across it. Root only (exit 77 otherwise).
# Each run has a time limit (DAT2_MPI_TIMEOUT seconds, 900). Exit 0 when
# every check passed. DAT2_OPENMPI_PREFIX names an Open MPI 1.6.5 built the
# same way elsewhere (its tests/ holding ring_c, osu_latency and osu_bw)
# instead of the cache.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
libdir=$(cd "${1:?usage: openmpi-1.6.5-udapl.sh <lib dir holding libdat.so> [ia_name] [local|netns]}" && pwd) ||
    exit 1
ia=${2:-ofi-tcp}
where=${3:-local}
case "$where" in local | netns) ;; *) echo "FAIL: where must be local or netns, not '$where'"; exit 1 ;; esac
limit=${DAT2_MPI_TIMEOUT:-900}
out=$(mktemp -d "${TMPDIR:-/tmp}/openmpi-udapl.XXXXXX")
fail=0
ok() { echo "PASS: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

prefix=${DAT2_OPENMPI_PREFIX:-$(bash "$here/build-openmpi.sh" "$libdir" | tail -n 1)}
[ -e "$prefix/.complete" ] || { echo "FAIL: Open MPI build (build-openmpi.sh)"; exit 1; }
[ -r "$libdir/dat.conf" ] || { echo "FAIL: no $libdir/dat.conf (build the project first)"; exit 1; }
export LD_LIBRARY_PATH=$libdir DAT_OVERRIDE=$libdir/dat.conf PATH=$prefix/bin:$PATH

# libmpi (the BTL is in it: --disable-dlopen) loads this build's libdat.so.1.
ldd "$prefix/lib/libmpi.so" >"$out/ldd"
grep -q "libdat.so.1 => $libdir/libdat.so.1" "$out/ldd" && ok "libmpi loads $libdir/libdat.so.1" \
    || { bad "libmpi does not load our libdat.so.1:"; cat "$out/ldd"; }

udapl=(--mca btl udapl,self --mca btl_udapl_if_include "$ia")
tcp=(--mca btl tcp,self --mca btl_tcp_if_include lo)
# On one host each rank is bound to a core of its own, for both BTLs, as
# the OSU benchmarks are meant to run (MVAPICH2 binds by default, Open MPI
# 1.6.5 does not): unbound, two polling ranks may share a CPU. Binding
# removes that cause of run-to-run spread, not every one (docs/performance.md).
# Not between namespaces: each "host" would bind its rank to core 0.
if [ "$where" = local ]; then
    udapl+=(--bind-to-core)
    tcp+=(--bind-to-core)
fi
launch=() wrap=()
if [ "$where" = netns ]; then
    . "$here/../peers/lib.sh" # veth_hosts, skip
    ns_s=om_s$$ ns_c=om_c$$ addr_s=10.234.0.1 addr_c=10.234.0.2 ifname=omnet
    trap veth_remove EXIT
    veth_hosts "$ns_s" "$ns_c" oms$$ omc$$ "$addr_s" "$addr_c"
    veth_rename $ifname # Open MPI's interface options name one interface
    for side in s c; do
        eval ns=\$ns_$side a=\$addr_$side
        echo "$ia u2.0 nonthreadsafe default libdat2_ofi.so dat2.2.0 \"provider=tcp address=$a\" \"\"" \
            >"$out/dat_$ns.conf"
    done
    # Each rank takes the dat.conf of the namespace it runs in.
    printf '#!/bin/sh\nDAT_OVERRIDE=%s/dat_$(ip netns identify $$).conf exec "$@"\n' "$out" >"$out/wrap.sh"
    chmod +x "$out/wrap.sh"
    printf '%s slots=1\n%s slots=1\n' "$addr_s" "$addr_c" >"$out/hosts"
    export DAT2_NETNS_HOSTS="$addr_s=$ns_s $addr_c=$ns_c" # netns-launcher.sh's map
    hosts=(--hostfile "$out/hosts" --mca orte_rsh_agent "$here/netns-launcher.sh" --mca oob_tcp_if_include $ifname)
    udapl+=("${hosts[@]}")
    tcp=(--mca btl tcp,self --mca btl_tcp_if_include $ifname "${hosts[@]}")
    launch=(ip netns exec "$ns_s") wrap=("$out/wrap.sh")
fi
# run NAME BTL-ARGS... -- PROGRAM: mpirun with 2 ranks, output kept in $out/NAME.
run() {
    local name=$1; shift
    local args=() t0=$(date +%s%N) rc
    while [ "$1" != -- ]; do args+=("$1"); shift; done; shift
    echo "+ ${launch[*]} mpirun -np 2 ${args[*]} ${wrap[*]} $*"
    timeout -k 10 "$limit" "${launch[@]}" "$prefix/bin/mpirun" -np 2 "${args[@]}" "${wrap[@]}" "$@" >"$out/$name" 2>&1
    rc=$?
    cat "$out/$name"
    echo "($name: exit $rc, $(( ($(date +%s%N) - t0) / 1000000 )) ms)"
    return $rc
}
# clean NAME: no line an MPI prints when something went wrong.
clean() { ! grep -qiE 'error|warning|abort|segmentation|signal|unable|not reachable' "$out/$1"; }

if run ring_c "${udapl[@]}" -- "$prefix/tests/ring_c" && clean ring_c &&
    grep -q '^Process 0 exiting$' "$out/ring_c" && grep -q '^Process 1 exiting$' "$out/ring_c"; then
    ok "ring_c over udapl ($ia): both ranks exit"
else
    bad "ring_c over udapl ($ia)"
fi
# As installed beside OFED's libdat2: no DAT_OVERRIDE, so the registry
# reads the dat.conf beside libdat2 and the system's /etc/dat.conf (OFED's
# stock one has dozens of entries). The BTL lists providers into room for
# 8 and is off if that call fails.
if [ "$where" = local ] && [ -r /etc/dat.conf ]; then
    if (unset DAT_OVERRIDE; run ring_c.sysconf "${udapl[@]}" -- "$prefix/tests/ring_c") && clean ring_c.sysconf &&
        grep -q '^Process 1 exiting$' "$out/ring_c.sysconf"; then
        ok "ring_c over udapl ($ia) without DAT_OVERRIDE ($(grep -cvE '^\s*(#|$)' /etc/dat.conf) entries in /etc/dat.conf)"
    else
        bad "ring_c over udapl ($ia) without DAT_OVERRIDE (the dat.conf beside libdat2 and /etc/dat.conf)"
    fi
fi

# judge FILE FIRST: an OSU table with every size from FIRST to 4 MiB,
# doubling, in order, each figure finite and above 0 (osu_bw prints two
# decimals: a small size may read 0.00 MB/s; the largest must not).
judge() {
    python3 - "$out/$1" "$2" <<'PY'
import math, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip() and l[0].isdigit()]
want = ([0] if sys.argv[2] == "0" else []) + [1 << i for i in range(23)]
sizes = [int(r[0]) for r in rows]
assert sizes == want, f"sizes {sizes}"
vals = [float(r[1]) for r in rows]
assert all(math.isfinite(v) and v >= 0 for v in vals), vals
assert vals[-1] > 0 and (sys.argv[2] == "1" or all(v > 0 for v in vals)), vals
PY
}
for prog in osu_latency osu_bw; do
    first=0; [ $prog = osu_bw ] && first=1
    for btl in udapl tcp; do
        declare -n args=$btl
        [ "$where" = netns ] && rx0=$(rx_packets "$ns_s" $ifname)
        if run "$prog.$btl" "${args[@]}" -- "$prefix/tests/$prog" && clean "$prog.$btl" && judge "$prog.$btl" $first; then
            ok "$prog over $btl: every size, figures finite and above 0"
        else
            bad "$prog over $btl"
        fi
        unset -n args
        if [ "$where" = netns ] && [ $prog = osu_latency ] && [ $btl = udapl ]; then
            rx=$(($(rx_packets "$ns_s" $ifname) - rx0))
            [ "$rx" -gt 1000 ] && ok "osu_latency over udapl: $rx packets crossed the veth pair" \
                || bad "osu_latency over udapl: only $rx packets crossed the veth pair"
        fi
    done
done

# The ratios, size by size (udapl / tcp).
python3 - "$out" <<'PY'
import sys
def table(path):
    try:
        return {int(l.split()[0]): float(l.split()[1]) for l in open(path) if l.strip() and l[0].isdigit()}
    except OSError:
        return {}
d = sys.argv[1]
lat_u, lat_t = table(d + "/osu_latency.udapl"), table(d + "/osu_latency.tcp")
bw_u, bw_t = table(d + "/osu_bw.udapl"), table(d + "/osu_bw.tcp")
print("# size   lat udapl us   lat tcp us   ratio  |  bw udapl MB/s   bw tcp MB/s   ratio")
for s in sorted(set(lat_u) | set(bw_u)):
    def r(a, b):
        return f"{a[s] / b[s]:6.2f}" if s in a and s in b and b[s] > 0 else "     -"
    def v(a):
        return f"{a[s]:12.2f}" if s in a else "           -"
    print(f"{s:7d} {v(lat_u)} {v(lat_t)} {r(lat_u, lat_t)}  | {v(bw_u)} {v(bw_t)} {r(bw_u, bw_t)}")
PY
# shm's latency on this host falls into two groups about three times apart,
# fi_pingpong's as much as ours, and each run lands in one of them at its
# start (docs/performance.md). libfabric's own ping-pong over shm, in the
# same minute on the cores the ranks were bound to, is the peer beside the
# table: what a program with nothing between it and libfabric got here.
if [ "$ia" = ofi-shm ] && [ "$where" = local ]; then
    if command -v fi_pingpong >/dev/null; then
        port=$((40000 + $$ % 20000))
        taskset -c 0 timeout 30 fi_pingpong -p shm -e rdm -S 8 -I 100000 -B $port >/dev/null 2>&1 &
        sleep 0.3
        us=$(taskset -c 1 timeout 30 fi_pingpong -p shm -e rdm -S 8 -I 100000 -P $port 127.0.0.1 2>/dev/null |
            awk '$1 == 8 {print $7}')
        wait
        echo "peer: fi_pingpong -p shm -e rdm -S 8, same minute, same cores: ${us:-no figure} us one-way"
    else
        echo "peer: fi_pingpong not run (not installed; Debian's libfabric-bin has it)"
    fi
fi
echo "openmpi-1.6.5 udapl: $([ $fail = 0 ] && echo passed || echo failed) (outputs in $out; load average $(cut -d' ' -f1-3 /proc/loadavg))"
exit $fail
