#!/bin/bash
# The verbs plugin takes OFED's positional ia_params ("<device> <port>",
# "<netdev or address> 0") beside key=value, so that a line of an OFED
# dat.conf works with only its library name changed. Without an RDMA device
# (this host) an open still fails, but not on its ia_params; the VM suite
# (tests/vm/verbs-suite.sh) opens such lines for real.
set -u
probe=$1 libdir=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
cat >"$tmp/dat.conf" <<CONF
ofa-v2-scm-roe-rxe0 u2.0 nonthreadsafe default $libdir/libdat2_verbs.so dapl.2.0 "rxe0 1" ""
ofa-v2-cma-roe-dummy0 u2.0 nonthreadsafe default $libdir/libdat2_verbs.so dapl.2.0 "dummy0 0" ""
ofa-v2-cma-addr u2.0 nonthreadsafe default $libdir/libdat2_verbs.so dapl.2.0 "10.0.0.1 0" ""
bad-port u2.0 nonthreadsafe default $libdir/libdat2_verbs.so dapl.2.0 "rxe0 x" ""
bad-words u2.0 nonthreadsafe default $libdir/libdat2_verbs.so dapl.2.0 "rxe0 1 2" ""
CONF
open() { DAT_OVERRIDE=$tmp/dat.conf "$probe" "$1" >"$tmp/out" 2>"$tmp/err"; }
for ia in ofa-v2-scm-roe-rxe0 ofa-v2-cma-roe-dummy0 ofa-v2-cma-addr; do
    open $ia
    if grep -q "ia_params" "$tmp/err" || grep -q "DAT_INVALID_PARAMETER" "$tmp/out"; then
        echo "FAIL: $ia: its ia_params were refused:"; sed 's/^/    /' "$tmp/out" "$tmp/err"; fail=1
    else
        echo "ok: $ia: ia_params taken ($(head -c 120 "$tmp/out"))"
    fi
done
open bad-port
if grep -q "DAT_INVALID_PARAMETER" "$tmp/out" && grep -q "OFED's form" "$tmp/err"; then
    echo "ok: bad-port: refused, saying OFED's form"
else
    echo "FAIL: bad-port: not refused as it should be:"; sed 's/^/    /' "$tmp/out" "$tmp/err"; fail=1
fi
open bad-words
if grep -q "DAT_INVALID_PARAMETER" "$tmp/out" && grep -q "is not key=value" "$tmp/err"; then
    echo "ok: bad-words: refused"
else
    echo "FAIL: bad-words: not refused as it should be:"; sed 's/^/    /' "$tmp/out" "$tmp/err"; fail=1
fi
exit $fail
