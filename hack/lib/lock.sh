# Sourced by the build scripts (hack/build-testbin.sh, hack/build-controllers.sh,
# hack/triton-runtime.sh): take an exclusive flock(1) lock, saying while waiting what is being waited
# on, by whom and for how long.
#
#   take_lock FD LOCKFILE WHAT LOG_PREFIX
#
# FD must already be open on LOCKFILE (exec 9>"$LOCKFILE"). The holder writes its pid and what it
# builds to LOCKFILE.pid once it has the lock, so a waiter can name it. While waiting, a line every
# TRTLLM_LOCK_REPORT_SECONDS (default 30): elapsed seconds, the holder's pid and whether it still
# runs (a killed script's children, e.g. `go build`, inherit the descriptor and keep the lock until
# they exit: then the pid is gone but the lock is still held, and the line says so).
take_lock() {
  local fd=$1 file=$2 what=$3 prefix=$4
  local every=${TRTLLM_LOCK_REPORT_SECONDS:-30}
  if ! flock -n "$fd"; then
    local holder="" holder_what="" start=$SECONDS
    if [ -r "$file.pid" ]; then
      read -r holder holder_what < "$file.pid" || true
    fi
    local by="a process that did not record its pid"
    if [ -n "$holder" ]; then
      by="pid $holder"
      if [ -r "/proc/$holder/cmdline" ]; then
        by="$by ($(tr '\0' ' ' < "/proc/$holder/cmdline" | cut -c1-120 | sed 's/ *$//'))"
      fi
    fi
    echo "[$prefix] waiting for the lock $file: $by is building ${holder_what:-$what}" >&2
    while ! flock -w "$every" "$fd"; do
      local state="still running"
      if [ -n "$holder" ] && ! kill -0 "$holder" 2>/dev/null; then
        state="no longer running; a child process it started still holds the lock"
      fi
      echo "[$prefix] still waiting after $((SECONDS - start)) s for ${holder:+pid $holder }($state) to finish building ${holder_what:-$what}" >&2
    done
    echo "[$prefix] got the lock after $((SECONDS - start)) s" >&2
  fi
  echo "$$ $what" > "$file.pid"
}
