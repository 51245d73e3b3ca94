#!/bin/bash
# One check of MVAPICH2 1.9 over our libdat2, judged by its output:
#
#   mvapich2.sh <build lib dir> <mvapich2 prefix> <check>
#
# <check> is  <where><ranks>:<program>
#   where    local: every rank on this host, `mpiexec.hydra -launcher fork`
#            netns: one rank in each of two network namespaces joined by a
#                   veth pair, launched through hydra's rsh launcher
#                   (netns-launcher.sh runs the proxy in its host's namespace)
#   program  osu_latency, osu_bw, osu_bibw, osu_allreduce (the OSU table must
#            have every size row with a positive finite figure), a test
#            program <dir>/<name> of MVAPICH2's test/mpi (it must print
#            " No Errors"), or wrong-ia (MV2_DAPL_PROVIDER names no IA: MPI_Init
#            must fail with our registry's message, proof that the IA is
#            opened through our libdat2)
# e.g. local2:osu_latency, local4:coll/allred, netns2:osu_bw.
#
# Every rank talks through DAT (MV2_USE_SHARED_MEM=0) on the IA named by
# DAT2_MPI_IA (default ofi-tcp; from the dat.conf generated in <lib dir>,
# which libdat2 finds beside itself, unless the caller sets DAT_OVERRIDE);
# netns checks write their own dat.conf (one IA per namespace
# address). Exits 0 passed, 1 failed, 77 skipped (netns without root).
# DAT2_MPI_TIMEOUT overrides the program's time limit (seconds).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../peers/lib.sh"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -eq 3 ] || { echo "usage: mvapich2.sh <build lib dir> <mvapich2 prefix> <check>" >&2; exit 2; }
libdir=$(cd "$1" 2>/dev/null && pwd) || fail "no such lib dir: $1"
prefix=$(cd "$2" 2>/dev/null && pwd) || fail "no such MVAPICH2 prefix: $2"
check=$3
where=${check%%[0-9]*} rest=${check#"$where"}
ranks=${rest%%:*} program=${rest#*:}
case "$where" in local | netns) ;; *) fail "check '$check': where must be local or netns" ;; esac
[[ "$ranks" =~ ^[0-9]+$ ]] || fail "check '$check': no rank count"
ia=${DAT2_MPI_IA:-ofi-tcp}
[ -e "$prefix/.complete" ] || fail "$prefix is not a complete MVAPICH2 build (tests/clients/build-mvapich2.sh)"
mpiexec=$prefix/bin/mpiexec.hydra
[ -x "$mpiexec" ] || fail "$mpiexec missing"

# The program, its arguments, its expected output, its time limit. Sizes:
# OSU prints a row per power of two from <first> to <last> (osu_latency from
# 0). The limits are several times what a run takes on a 2-core machine busy
# with other builds (a hang fails; a slow machine does not).
osu_first= osu_last= limit= args=()
case "$program" in
osu_latency) osu_first=0 osu_last=4194304 limit=240 ;;
osu_bw | osu_bibw) osu_first=1 osu_last=4194304 limit=180 ;;
osu_allreduce)
    osu_first=4 osu_last=1048576 limit=240
    # More ranks than cores: MVAPICH2 polls without yielding, so each step
    # waits for the peer's time slice; 100 iterations a size instead of 1000.
    [ "$ranks" -gt 2 ] && args=(-i 100)
    ;;
wrong-ia) limit=30 ;;
*/*) limit=120 ;;
*) fail "unknown program '$program'" ;;
esac
limit=${DAT2_MPI_TIMEOUT:-$limit}
case "$program" in
osu_* | wrong-ia) exe=$prefix/libexec/mvapich2/${program/wrong-ia/osu_latency} ;;
*) exe=$prefix/tests/$program ;;
esac
[ -x "$exe" ] || fail "$exe missing (not built by build-mvapich2.sh?)"

# Our libdat2, not Debian's, must be the one the program loads.
loaded=$(LD_LIBRARY_PATH=$libdir ldd "$exe" | awk '$1 == "libdat2.so.2" { print $3 }')
[ "$loaded" = "$libdir/libdat2.so.2" ] || fail "$exe loads libdat2.so.2 from '${loaded:-nowhere}', not $libdir"

peers_start "mv2-${check//[:\/]/-}" $((limit + 30))
out=$tmp/out
export LD_LIBRARY_PATH=$libdir MV2_USE_SHARED_MEM=0
export MV2_DAPL_PROVIDER=$ia
[ "$program" = wrong-ia ] && MV2_DAPL_PROVIDER=no-such-ia-$$

# The run's processes carry this mark in their environment: hydra puts each
# rank in a process group of its own, out of reach of timeout's signal to
# its group, so those that outlive mpiexec are found by the mark.
mark=mv2-$$-$RANDOM
marked() {
    grep -lzxF "DAT2_MPI_RUN_MARK=$mark" /proc/[0-9]*/environ 2>/dev/null | sed -E 's|/proc/([0-9]+)/environ|\1|'
}
no_marked() { [ -z "$(marked)" ]; }

# run CMD...: CMD under the time limit, output in $out; sets $rc. Ranks
# still there 5 s after mpiexec has gone are killed, and fail the check.
run() {
    local t0=$SECONDS
    echo "run: $*" >"$out.cmd"
    DAT2_MPI_RUN_MARK=$mark timeout -k 5 "$limit" "$@" </dev/null >"$out" 2>&1 &
    cpid=$!
    wait "$cpid"
    rc=$?
    cpid=
    local left=
    if ! wait_until 5 no_marked; then
        left=$(marked | tr '\n' ' ')
        kill -KILL $left 2>/dev/null
    fi
    if [ $rc -eq 124 ] || { [ $rc -eq 137 ] && [ $((SECONDS - t0)) -ge "$limit" ]; }; then
        tail -n 30 "$out"
        fail "$check: still running after $limit s (killed)${left:+; processes $left outlived mpiexec}"
    fi
    [ -z "$left" ] || { tail -n 30 "$out"; fail "$check: processes $left outlived mpiexec (exit $rc)"; }
}

if [ "$where" = local ]; then
    # No DAT_OVERRIDE: libdat2 reads the dat.conf generated beside it, as an
    # application run from the build tree would; that file lists only the
    # IAs that passed a loopback connection when it was generated.
    run "$mpiexec" -launcher fork -n "$ranks" "$exe" "${args[@]}"
else
    # Two "hosts": namespaces joined by a veth pair whose ends have the same
    # name in both (hydra gives its proxies the -iface of mpiexec's host).
    [ "$ranks" = 2 ] || fail "netns checks run 2 ranks, one per namespace"
    ns_s=mv2_s$$ ns_c=mv2_c$$ addr_s=10.233.0.1 addr_c=10.233.0.2 ifname=mv2net
    veth_hosts "$ns_s" "$ns_c" mv2s$$ mv2c$$ "$addr_s" "$addr_c"
    veth_rename $ifname
    for side in s c; do
        eval a=\$addr_$side
        echo "$ia u2.0 nonthreadsafe default libdat2_ofi.so dat2.2.0 \"provider=tcp address=$a\" \"\"" >"$tmp/dat_$side.conf"
    done
    # netns-launcher.sh finds a host's namespace here, and checks it owns the address.
    export DAT2_NETNS_HOSTS="$addr_s=$ns_s $addr_c=$ns_c"
    # mpiexec runs on the first host; one rank per host (rank 0 on the
    # first, forked; rank 1's proxy goes through the launcher), each with its
    # namespace's dat.conf. FI_TCP_IFACE: libfabric tcp binds
    # its data path to that interface's address.
    run ip netns exec "$ns_s" "$mpiexec" -launcher rsh -launcher-exec "$here/netns-launcher.sh" \
        -iface $ifname -hosts $addr_s,$addr_c -genv FI_TCP_IFACE $ifname \
        -n 1 -env DAT_OVERRIDE "$tmp/dat_s.conf" "$exe" "${args[@]}" : \
        -n 1 -env DAT_OVERRIDE "$tmp/dat_c.conf" "$exe" "${args[@]}"
fi

show() { echo "---- $(cat "$out.cmd") (exit $rc), last 40 lines:"; tail -n 40 "$out"; }
verdict() { echo "FAIL: $check: $*"; show; exit 1; }

if [ "$program" = wrong-ia ]; then
    [ $rc -ne 0 ] || verdict "MPI_Init succeeded with MV2_DAPL_PROVIDER=$MV2_DAPL_PROVIDER"
    grep -q "^dat2:.*$MV2_DAPL_PROVIDER" "$out" || verdict "no 'dat2:' message naming $MV2_DAPL_PROVIDER (is our libdat2 the one MVAPICH2 calls?)"
    echo "PASS: $check: MPI_Init fails, and our registry says why: $(grep -m1 "^dat2:.*$MV2_DAPL_PROVIDER" "$out")"
    exit 0
fi

[ $rc -eq 0 ] || verdict "exit status $rc"
# OSU tables contain no such words; test programs print " No Errors" when they pass.
hit=$(grep -v '^ No Errors$' "$out" | grep -iE "$bad_lines|found [0-9]+ errors")
[ -z "$hit" ] || verdict "output reports: $(head -n 5 <<<"$hit")"

if [ -n "$osu_first" ]; then
    grep -q "^# OSU MPI" "$out" || verdict "no OSU header line"
    # Every size row once, in order, with a positive finite figure, and
    # nothing else but comments. Bandwidth is printed in MB/s with two
    # decimals: a slow small size may print 0.00, which is below the printed
    # resolution and not a failure (its messages all completed), as long as
    # the largest size's figure is positive.
    zero_ok=0
    [ "$program" = osu_bw ] || [ "$program" = osu_bibw ] && zero_ok=1
    table=$(awk -v first="$osu_first" -v last="$osu_last" -v zero_ok=$zero_ok '
        /^#/ { next }
        NF == 0 { next }
        {
            if (NF != 2) { print "malformed row: " $0; bad = 1; exit }
            if (expect == "") expect = first
            if ($1 != expect) { print "row " $1 " where " expect " was due"; bad = 1; exit }
            if ($2 !~ /^[0-9]+\.[0-9]+$/) { print "size " $1 ": figure " $2 " is not a finite non-negative number"; bad = 1; exit }
            if ($2 + 0 <= 0 && !(zero_ok && $1 != last)) { print "size " $1 ": figure " $2 " is not positive"; bad = 1; exit }
            if ($2 + 0 <= 0) below++
            rows++
            seen = seen $1 "=" $2 " "
            prev = $1
            expect = (expect == 0) ? 1 : expect * 2
        }
        END {
            if (bad) exit 1
            if (rows == 0 || prev != last) { print "the table ends at size " (rows ? prev : "(no row)") ", not " last; exit 1 }
            printf "%s", seen
            if (below) printf "(%d sizes below 0.01 MB/s)", below
        }' "$out") || verdict "OSU table: $table"
    echo "PASS: $check: $(grep -cvE '^#|^$' "$out") sizes $osu_first..$osu_last: $table"
else
    grep -qx ' No Errors' "$out" || verdict "no ' No Errors' line"
    echo "PASS: $check: No Errors"
fi
if [ "$where" = netns ]; then
    # The ranks' traffic crossed the veth pair.
    pkts=$(rx_packets "$ns_s" $ifname)
    [ "${pkts:-0}" -gt 1000 ] || verdict "only ${pkts:-0} packets arrived on $ifname in $ns_s"
    echo "ok: $pkts packets arrived on $ifname in $ns_s"
fi
exit 0
