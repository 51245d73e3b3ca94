# Sourced by build-mvapich2.sh and build-openmpi.sh: the cache outside the
# clone, one builder at a time, and the logged, timed build steps.
# The caller sets `tool` (its name, for messages), `cache` and defines die().

# client_cache_open NAME KEY LOCK_WAIT_SECONDS: sets prefix, log, work,
# start and steps. A prefix holding .complete is printed and the script
# ends there; anything else there (an interrupted build) is removed.
client_cache_open() {
    local name=$1 key=$2 wait=$3
    prefix=$cache/$name-$key
    mkdir -p "$cache" || die "cannot create $cache (set DAT2_CLIENT_CACHE to a writable directory)"
    # A second caller waits for the first, then finds the build done.
    exec 9>"$cache/$name.lock"
    flock -w "$wait" 9 || die "another build has held $cache/$name.lock for over $wait s"
    if [ -e "$prefix/.complete" ]; then
        echo "$tool: cached: $prefix"
        echo "$prefix"
        exit 0
    fi
    rm -rf "$prefix"
    log=$cache/$name-$key.log
    work=$(mktemp -d "${TMPDIR:-/tmp}/$tool.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    trap 'exit 143' TERM INT
    echo "$tool: building $prefix (log: $log)"
    start=$(date +%s)
    steps= # one line per step: its wall and CPU seconds, for build-info.txt
    : >"$log"
}

# step NAME CMD...: runs CMD with its output in the log; a failure shows the
# log's tail. Reports the step's wall-clock and CPU time: the CPU time says
# what it costs on an idle machine when the wall-clock time does not.
step() {
    local name=$1 t TIMEFORMAT='%0R s (CPU %0U s user, %0S s sys)'
    shift
    echo "---- $name: $*" >>"$log"
    if ! t=$({ time "$@" >>"$log" 2>&1; } 2>&1); then
        tail -n 40 "$log" >&2
        die "$name failed after $t (whole log: $log)"
    fi
    echo "$tool: $name $t"
    steps+="$name $t"$'\n'
}
