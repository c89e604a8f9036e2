# Sourced by the mpi label's scripts.
#   out=$(bounded SECS command [args...]); rc=$?
# Runs the command with stdin from /dev/null and its stdout and stderr into a file, then
# prints the file; returns the command's status (124: it ran past SECS; 137: it ignored the
# TERM for 10 s more and was killed). Why a file and not $(...)'s pipe: when timeout ends
# mpirun, rank processes it leaves behind still hold the pipe, and $(...) waited for them
# until ctest's own limit (seen once under load: mpi.unchecked.np2,
# mpi.lifetimes.ctor_deadline_owned).
bounded() {
  local secs=$1 log rc
  shift
  log=$(mktemp)
  timeout -k 10 "$secs" "$@" > "$log" 2>&1 < /dev/null
  rc=$?
  cat "$log"
  rm -f "$log"
  return $rc
}
