#!/bin/bash
# The main job on a fresh Debian 12 machine: install what is needed, build,
# and run it. Until datperf exists this is datinfo: every DAT provider the
# registry finds, whether it loads, and the attributes of each IA that opens.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bash "$top/scripts/setup-deps.sh"
bash "$top/scripts/build.sh" "$top/build"
exec "$top/build/bin/datinfo" "$@"
