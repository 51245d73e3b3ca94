#!/bin/bash
# libdat2's dynamic symbols: a superset of OFED's (same names, same version
# node DAT_2.0, same soname), plus the DAT 2.0 calls OFED declared but never
# exported, and nothing that is not a DAT call (but libdat.so.1's way in).
set -u
ours=$1
ofed=/usr/lib/x86_64-linux-gnu/libdat2.so.2
fail=0
if [ ! -e "$ofed" ]; then echo "FAIL: $ofed missing: install libdapl2 (scripts/setup-deps.sh)"; exit 1; fi
syms() { nm -D --defined-only --with-symbol-versions "$1" | awk '$2 ~ /^[TtWw]$/ {print $3}' | sort -u; }
syms "$ofed" >/tmp/exports.ofed.$$; syms "$ours" >/tmp/exports.ours.$$
trap 'rm -f /tmp/exports.*.$$' EXIT
missing=$(comm -23 /tmp/exports.ofed.$$ /tmp/exports.ours.$$)
if [ -n "$missing" ]; then echo "FAIL: OFED exports these and we do not:"; echo "$missing"; fail=1
else echo "ok: all $(wc -l </tmp/exports.ofed.$$) OFED exports present with the same version"; fi
for f in dat_cno_fd_create dat_cno_trigger dat_csp_create dat_csp_query dat_csp_free dat_ep_common_connect \
         dat_rmr_create_for_ep dat_ep_post_send_with_invalidate dat_ep_post_rdma_read_to_rmr \
         dat_registry_providers_related; do
    grep -qx "$f@@DAT_2.0" /tmp/exports.ours.$$ || { echo "FAIL: $f not exported"; fail=1; }
done
# ... but libdat.so.1's entry point, under a private version node.
extra=$(grep -vE '^(dat_[a-z_]+|dats_get_ia_handle)@@DAT_2.0$' /tmp/exports.ours.$$ | grep -vx 'dat12_ia_openv@@DAT2_PRIVATE_DAT12')
if [ -n "$extra" ]; then echo "FAIL: exports beyond the DAT API:"; echo "$extra"; fail=1
else echo "ok: $(wc -l </tmp/exports.ours.$$) exports, all DAT calls"; fi
soname=$(readelf -d "$ours" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = libdat2.so.2 ] && echo "ok: soname libdat2.so.2" || { echo "FAIL: soname '$soname'"; fail=1; }
exit $fail
