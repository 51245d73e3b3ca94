#!/bin/bash
# Configures and builds one configuration: build.sh DIR [cmake args...]
set -euo pipefail
dir=$1; shift
top=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dir"
cmake -S "$top" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >"$dir/configure.log" 2>&1 \
  || { cat "$dir/configure.log"; exit 1; }
cmake --build "$dir" -j"$(nproc)" 2>&1 | grep -E "warning:|error:|Error [0-9]" || true
cmake --build "$dir" -j"$(nproc)" >/dev/null
