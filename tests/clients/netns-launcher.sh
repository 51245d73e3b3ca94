#!/bin/bash
# The launcher of the netns checks (hydra's -launcher-exec in mvapich2.sh,
# Open MPI's orte_rsh_agent in openmpi-1.6.5-udapl.sh), standing in for ssh:
# they run it as
#
#   netns-launcher.sh <host> <command words...>
#
# (the words make one shell command line, as with ssh) and it runs that
# command in the network namespace that DAT2_NETNS_HOSTS ("<address>=<netns>
# ...") names for the host, after checking that the namespace owns that
# address, as the host's sshd would. Our own exit status is 255 (ssh's).
set -u
host=${1:?usage: netns-launcher.sh <host> <command...>}
shift
ns=
for m in ${DAT2_NETNS_HOSTS:-}; do
    [ "${m%%=*}" = "$host" ] && ns=${m#*=}
done
[ -n "$ns" ] || { echo "netns-launcher: host $host is not in DAT2_NETNS_HOSTS='${DAT2_NETNS_HOSTS:-}'" >&2; exit 255; }
ip -n "$ns" -o addr show | grep -q " inet $host/" || { echo "netns-launcher: namespace $ns does not own $host" >&2; exit 255; }
exec ip netns exec "$ns" /bin/sh -c "$*"
