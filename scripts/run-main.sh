#!/bin/bash
# The main job on a fresh Debian 12 machine: install what is needed, build,
# and run datperf on the default DAT provider (the first dat.conf entry:
# ofi-tcp, libfabric tcp on loopback): the send/recv ping-pong at eight
# sizes from 1 B to 1 MiB, compared with libfabric's own fi_pingpong in the
# same run, then the streaming bandwidth of RDMA write, RDMA read and send;
# then both again over ofi-shm (libfabric shm, one host). About a minute on
# a quiet machine. Arguments, when given, replace
# datperf's (datperf --help).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bash "$top/scripts/setup-deps.sh"
bash "$top/scripts/build.sh" "$top/build"
datperf=$top/build/bin/datperf
if [ $# -gt 0 ]; then
  exec "$datperf" "$@"
fi
# The figures also go to build/datperf-*.json (and a chart when gnuplot is
# there) for comparison between commits. Then the same over ofi-shm, the
# one-host fabric (libfabric shm, reliable datagrams), beside its own peer
# (fi_pingpong -p shm -e rdm): every MPI job's process pairs on one node.
plot=()
command -v gnuplot >/dev/null && plot=(--plot "$top/build/datperf-pingpong.png")
"$datperf" pingpong --sizes 1,8,64,512,4k,32k,256k,1m --compare --json="$top/build/datperf-pingpong.json" "${plot[@]}"
echo
"$datperf" write,read,send --sizes 4k,64k,1m --json="$top/build/datperf-bandwidth.json"
if grep -q '^ofi-shm ' "$top/build/lib/dat.conf"; then
  echo
  command -v gnuplot >/dev/null && plot=(--plot "$top/build/datperf-pingpong-shm.png")
  "$datperf" pingpong -P ofi-shm --sizes 1,8,64,512,4k,32k,256k,1m --compare \
    --json="$top/build/datperf-pingpong-shm.json" "${plot[@]}"
  echo
  "$datperf" write,read,send -P ofi-shm --sizes 4k,64k,1m --json="$top/build/datperf-bandwidth-shm.json"
else
  echo "ofi-shm: skipped: the build's loopback probe left it out of build/lib/dat.conf (a comment there says why)"
fi
