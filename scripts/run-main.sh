#!/bin/bash
# The main job on a fresh Debian 12 machine: install what is needed, build,
# and run it. Until datperf exists this is datinfo: every DAT provider the
# registry finds, whether it loads, and the attributes of each IA that opens.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bash "$top/scripts/setup-deps.sh"
bash "$top/scripts/build.sh" "$top/build"
rc=0
"$top/build/bin/datinfo" "$@" || rc=$?
# datinfo exits 1 when some entry does not open (on a machine without RDMA
# devices, every OFED entry of /etc/dat.conf): that is its report, not a
# failure of this command. 2 and above are real errors.
if [ "$rc" -ge 2 ]; then exit "$rc"; fi
