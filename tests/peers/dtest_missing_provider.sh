#!/bin/bash
# Unmodified dtest (Debian's dapl2-utils) runs on our libdat2 and, when its
# provider is missing, gets a clear reason from our registry.
set -u
libdir=$1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
command -v dtest >/dev/null || { echo "FAIL: dtest not installed (apt-get install dapl2-utils)"; exit 1; }
cat >"$tmp/dat.conf" <<CONF
present u2.0 nonthreadsafe default $tmp/absent-provider.so dapl.2.0 "" ""
CONF
# dtest exits at once when dat_ia_open fails; bound it anyway.
LD_LIBRARY_PATH=$libdir DAT_OVERRIDE=$tmp/dat.conf timeout 20 dtest -P present -s >"$tmp/out" 2>&1
cat "$tmp/out"
# Our registry is the one dtest reached: its log lines start with "dat2:".
grep -q "^dat2: dat_ia_open('present'): $tmp/dat.conf:1: cannot load $tmp/absent-provider.so: .*No such file or directory" "$tmp/out" \
    && echo "ok: dtest got our registry's reason for a missing library" || { echo "FAIL: no reason from our registry"; fail=1; }
grep -q "DAT_PROVIDER_NOT_FOUND" "$tmp/out" && echo "ok: dtest reports DAT_PROVIDER_NOT_FOUND" || { echo "FAIL: dtest status"; fail=1; }
LD_LIBRARY_PATH=$libdir DAT_OVERRIDE=$tmp/dat.conf timeout 20 dtest -P typo -s >"$tmp/out" 2>&1
grep -q "^dat2: dat_ia_open('typo'): no such provider.*known: present" "$tmp/out" \
    && echo "ok: dtest with an unknown name gets the known names" || { cat "$tmp/out"; echo "FAIL: unknown name"; fail=1; }
# OFED's own provider library loads and registers under our libdat2; with
# no RDMA device here its ia_open fails with its own error, not ours.
if [ -e /usr/lib/x86_64-linux-gnu/libdaplofa.so.2 ]; then
    echo 'ofa-v2-none u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "nosuchnetdev 0" ""' >"$tmp/ofa.conf"
    LD_LIBRARY_PATH=$libdir DAT_OVERRIDE=$tmp/ofa.conf timeout 20 dtest -P ofa-v2-none -s >"$tmp/out" 2>&1
    grep -q "dat2: dat_ia_open('ofa-v2-none'): the provider failed to open the IA: DAT_INVALID_ADDRESS" "$tmp/out" \
        && echo "ok: OFED's libdaplofa is loaded, initialized and opened by our registry" \
        || { cat "$tmp/out"; echo "FAIL: libdaplofa under our registry"; fail=1; }
else
    echo "FAIL: libdaplofa.so.2 missing (apt-get install libdapl2)"; fail=1
fi
exit $fail
