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
. "$(dirname "${BASH_SOURCE[0]}")/params_lib.sh"
expect_taken ofa-v2-scm-roe-rxe0 ofa-v2-cma-roe-dummy0 ofa-v2-cma-addr
expect_refused bad-port "OFED's form"
expect_refused bad-words "is not key=value"
exit $fail
