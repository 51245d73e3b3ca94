#!/bin/bash
# One registry, one dat.conf for both APIs: a DAT 1.2 program (open12, via
# libdat.so.1) opens a u2.0 entry and a u1.2 entry naming our plugin; a DAT
# 2.0 program (dat2_open_probe, via libdat2) opens the u2.0 entry and is
# refused the u1.2 one, with the reason.
set -u
open12=$1 open20=$2 libdir=$3
conf=$(mktemp) && trap 'rm -f "$conf"' EXIT
cat >"$conf" <<CONF
ofi-tcp u2.0 nonthreadsafe default $libdir/libdat2_ofi.so dat2.2.0 "provider=tcp address=127.0.0.1" ""
ofi-tcp-12 u1.2 nonthreadsafe default $libdir/libdat2_ofi.so dat2.2.0 "provider=tcp address=127.0.0.1" ""
CONF
export DAT_OVERRIDE=$conf
fail=0
expect() { # expect <description> <regex> <command...>
    local what=$1 re=$2; shift 2
    local out; out=$("$@" 2>&1)
    if [[ "$out" =~ $re ]]; then echo "ok: $what"; else echo "FAIL: $what: got: $out"; fail=1; fi
}
expect "1.2 program opens the u2.0 entry" "open12 ofi-tcp: ok, DAT API 1.2" "$open12" ofi-tcp
expect "1.2 program opens the u1.2 entry" "open12 ofi-tcp-12: ok, DAT API 1.2" "$open12" ofi-tcp-12
expect "2.0 program opens the u2.0 entry" "ofi-tcp: ok" "$open20" ofi-tcp
expect "2.0 program is refused the u1.2 entry" "implements DAT API 1.2.*DAT_PROVIDER_NOT_FOUND DAT_MAJOR_NOT_FOUND" "$open20" ofi-tcp-12
expect "1.2 program: unknown name" "open12 nosuch: DAT_PROVIDER_NOT_FOUND DAT_NAME_NOT_REGISTERED" "$open12" nosuch
exit $fail
