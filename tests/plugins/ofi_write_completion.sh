#!/bin/bash
# The ofi plugin's write_completion key (plugins/ofi/README.md, "RDMA write
# completion"): transmit opens over a connected provider; any other value,
# and transmit over a reliable-datagram one (whose target drops a write it
# refuses without a word), are refused with DAT_INVALID_PARAMETER and a
# line naming the key. What transmit completion does on a connection is
# the conformance suites' (conformance_*_ofi-tcp-transmit).
set -u
probe=$1 libdir=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
cat >"$tmp/dat.conf" <<CONF
tcp-transmit u2.0 nonthreadsafe default $libdir/libdat2_ofi.so dat2.2.0 "provider=tcp address=127.0.0.1 write_completion=transmit" ""
tcp-delivery u2.0 nonthreadsafe default $libdir/libdat2_ofi.so dat2.2.0 "provider=tcp address=127.0.0.1 write_completion=delivery" ""
tcp-soon u2.0 nonthreadsafe default $libdir/libdat2_ofi.so dat2.2.0 "provider=tcp address=127.0.0.1 write_completion=soon" ""
shm-transmit u2.0 nonthreadsafe default $libdir/libdat2_ofi.so dat2.2.0 "provider=shm write_completion=transmit" ""
CONF
. "$(dirname "${BASH_SOURCE[0]}")/params_lib.sh"
expect_taken tcp-transmit tcp-delivery
expect_refused tcp-soon "write_completion=soon: not delivery or transmit"
expect_refused shm-transmit "write_completion=transmit needs a connected (FI_EP_MSG) provider"
exit $fail
