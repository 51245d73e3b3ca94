#!/bin/bash
# libdat.so.1's dynamic symbols: every DAT 1.2 call of include/dat (version
# DAT_1.2, as Linux's libdat.so.1), nothing else; never the registration
# calls or dats_get_ia_handle (providers find libdat2's in the global
# scope); its registry calls bound to libdat2's version DAT_2.0 (the open to
# libdat2's private dat12_ia_openv).
set -u
lib=$1 include=$2
fail=0
declared=$(cat "$include/dat/dat.h" "$include/dat/udat.h" | grep -o 'extern DAT_RETURN dat_[a-z_]*' | awk '{print $3 "@@DAT_1.2"}' | sort -u)
exported=$(nm -D --defined-only --with-symbol-versions "$lib" | awk '$2 ~ /^[TtWw]$/ {print $3}' | sort -u)
missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
extra=$(comm -13 <(echo "$declared") <(echo "$exported"))
[ -z "$missing" ] && echo "ok: all $(echo "$declared" | wc -l) calls of include/dat exported at DAT_1.2" \
  || { echo "FAIL: not exported:"; echo "$missing"; fail=1; }
[ -z "$extra" ] && echo "ok: nothing else exported" || { echo "FAIL: exported beyond the DAT 1.2 calls:"; echo "$extra"; fail=1; }
for f in dat_registry_add_provider dat_registry_remove_provider dats_get_ia_handle; do
    nm -D --defined-only "$lib" | grep -qw "$f" && { echo "FAIL: $f is exported (providers would bind to it)"; fail=1; }
done
imports=$(nm -D --undefined-only --with-symbol-versions "$lib" | awk '{print $2}' | grep -E '^dats?_' | sort)
bad=$(echo "$imports" | grep -v '@DAT_2.0$' | grep -vx 'dat12_ia_openv@DAT2_PRIVATE_DAT12')
[ -n "$imports" ] && [ -z "$bad" ] && echo "ok: imports $(echo $imports)" \
  || { echo "FAIL: DAT imports not bound to libdat2's versions: ${bad:-none at all}"; fail=1; }
soname=$(readelf -d "$lib" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = libdat.so.1 ] && echo "ok: soname libdat.so.1" || { echo "FAIL: soname '$soname'"; fail=1; }
exit $fail
