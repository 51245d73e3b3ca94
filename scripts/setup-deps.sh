#!/bin/bash
# Installs everything the project needs to build and test on Debian 12, with
# apt-get. Idempotent: does nothing when every package is already there.
set -euo pipefail
packages=(
  build-essential cmake g++ clang libclang-rt-14-dev python3
  libboost-dev libgtest-dev pkg-config go-md2man
  dpkg-dev debhelper lintian
  libfabric-dev libfabric-bin libibverbs-dev librdmacm-dev ibverbs-providers rdmacm-utils
  libdapl2 libdapl-dev dapl2-utils
  iproute2 procps
  gnuplot-nox valgrind heaptrack gdb
  # MVAPICH2's autogen; Open MPI 1.6.5's wants autoconf 2.69 and flex
  # (tests/clients/build-mvapich2.sh, build-openmpi.sh)
  autoconf autoconf2.69 automake libtool libltdl-dev flex
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup-deps: all ${#packages[@]} packages present"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "setup-deps: missing packages: ${missing[*]}; run as root (or with sudo) to install them" >&2
  exit 1
fi
echo "setup-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup-deps: done"
