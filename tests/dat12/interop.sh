#!/bin/bash
# A DAT 1.2 program and a DAT 2.0 program at the same time on the same IA
# name, each talking to the other: a 1.2 server with a 2.0 client and a 2.0
# server with a 1.2 client, all four running at once (pingpong.c built for
# each API). Judged by each program's last line.
set -u
pp12=$1 pp20=$2 ia=${3:-ofi-tcp} rounds=${4:-200}
dir=$(mktemp -d) && trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT
# Qualifiers of this run: two concurrent runs must not meet, and both lie
# below the kernel's ephemeral range (32768 and up by default), where a PSP
# of any other test (dat_psp_create_any) or a connection's port may sit.
q1=$((10000 + ($$ % 11000))) q2=$((q1 + 11000))
low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
[ "$q2" -lt "$low" ] || { echo "FAIL: qualifier $q2 lies in the ephemeral port range (from $low)"; exit 1; }
"$pp12" server "$ia" $q1 $rounds >"$dir/s12" 2>&1 & s12=$!
"$pp20" server "$ia" $q2 $rounds >"$dir/s20" 2>&1 & s20=$!
for i in $(seq 100); do
    grep -q listening "$dir/s12" && grep -q listening "$dir/s20" && break
    sleep 0.1
done
"$pp20" client "$ia" $q1 $rounds 127.0.0.1 >"$dir/c20" 2>&1 & c20=$!
"$pp12" client "$ia" $q2 $rounds 127.0.0.1 >"$dir/c12" 2>&1 & c12=$!
fail=0
for p in s12:$s12 s20:$s20 c20:$c20 c12:$c12; do
    name=${p%%:*} pid=${p#*:}
    wait "$pid"; rc=$?
    last=$(tail -1 "$dir/$name")
    if [ $rc -eq 0 ] && [[ "$last" == *"$rounds rounds verified" ]]; then echo "ok: $last"
    else echo "FAIL: $name (exit $rc):"; cat "$dir/$name"; fail=1; fi
done
exit $fail
