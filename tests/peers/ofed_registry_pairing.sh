#!/bin/bash
# The registry protocol both ways with OFED's libdat2: a provider built like
# ours (the test provider: init registers, queries translate IA handles with
# dats_get_ia_handle) opens, queries and closes under OFED's libdat2.
set -u
cc=$1 include=$2 probe_src=$3 testlib=$4 work=$5
ofed=/usr/lib/x86_64-linux-gnu/libdat2.so.2
[ -e "$ofed" ] || { echo "FAIL: $ofed missing (apt-get install libdapl2)"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# The probe compiled against our headers, linked against OFED's library.
"$cc" -std=c99 -Wall -Werror -I"$include" -o "$tmp/probe_ofed" "$probe_src" "$ofed" || { echo "FAIL: build"; exit 1; }
unset LD_LIBRARY_PATH
ldd "$tmp/probe_ofed" | grep -qE "libdat2.so.2 => (/usr)?/lib/x86_64-linux-gnu/libdat2.so.2" \
    || { ldd "$tmp/probe_ofed"; echo "FAIL: probe not linked to OFED's libdat2"; exit 1; }
# OFED's registry needs an exact thread-safety match: dat_ia_open asks for nonthreadsafe.
echo "ofed-pair u2.0 nonthreadsafe default $testlib/libdat2_test_provider.so test.2.0 \"ok\" \"\"" >"$tmp/dat.conf"
out=$(DAT_OVERRIDE=$tmp/dat.conf "$tmp/probe_ofed" ofed-pair 2>&1)
echo "$out"
[[ $out == *"open ofed-pair: ok adapter=ofed-pair"* ]] || { echo "FAIL: test provider under OFED's libdat2"; exit 1; }
echo "ok: a provider built for our registry works under OFED's libdat2"
