#!/usr/bin/env bash
# watch_client (tests/lib.sh), the bench's watch for a client that outlives
# its server, against stand-ins: a "server" that ends (sleep, then exit with
# a status) and a "client" under timeout, as tests/bench.sh starts them.
#
#   tests/watch_client.sh
#
# Its dump-and-kill path had been tried only by hand: no bench run has met a
# real hang since it was written. Each case checks what watch_client
# returns, server_rc, and whether it wrote a dump; the hung client must be
# dumped and killed, not left to its limit (300 s, beyond CTest's timeout,
# so a watch that does not kill it fails the test).
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
# shellcheck source=tests/lib.sh
source "$here/lib.sh"
tmp=$(mktemp -d)
spid= tpid=
# cleanup: whatever a failed check left running (the stand-ins and their
# children), and the files.
cleanup() {
  [[ -z $tpid ]] || kill -KILL -- "-$tpid" 2>/dev/null || true
  [[ -z $spid ]] || pkill -KILL -P "$spid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
dumps=$tmp/hangs
fails=0

# server SECONDS STATUS: a stand-in server in the background, as spid; it
# prints a line and exits with STATUS after SECONDS.
server() {
  (
    echo "stand-in server: window done"
    sleep "$1"
    exit "$2"
  ) >"$tmp/server.out" 2>&1 &
  spid=$!
}

# client LIMIT COMMAND...: a stand-in client under timeout, as tpid.
client() {
  local limit=$1
  shift
  timeout -s KILL "$limit" "$@" >"$tmp/client.out" 2>&1 &
  tpid=$!
}

# check NAME GOT WANT: one expectation.
check() {
  if [[ $2 == "$3" ]]; then
    echo "ok: $1: $2"
  else
    echo "FAIL: $1: got \"$2\", want \"$3\""
    fails=$((fails + 1))
  fi
}

# watch: runs watch_client on the stand-ins (OUTLIVE 1 s), leaving its
# status in rc and the number of dump files in ndumps.
watch() {
  rc=0
  watch_client "$tpid" "$spid" "$tmp/server.out" "$dumps" 1 2>"$tmp/watch.err" || rc=$?
  ndumps=0
  [[ ! -d $dumps ]] || ndumps=$(find "$dumps" -name 'hang-*.txt' | wc -l)
}

# 1. The client ends first (the server's stop reached it): its status, and
#    the server left to be waited for.
server 2 0
client 300 sh -c 'exit 3'
watch
check "client first: status" "$rc" 3
check "client first: server_rc" "$server_rc" ""
check "client first: dumps" "$ndumps" 0
wait "$spid" || true

if ((!watch_wait_p)); then
  # Cases 2 and 3 need wait -p; case 4 is this bash's own path.
  echo "note: no wait -p here (bash $BASH_VERSION, watch_wait_p=0): the watch's dump path is not tested"
fi

# 2. The server ends first (status 5), and the client ends within OUTLIVE.
if ((watch_wait_p)); then
server 0.2 5
client 300 sh -c 'sleep 0.5; exit 4'
watch
check "server first, client ends: status" "$rc" 4
check "server first, client ends: server_rc" "$server_rc" 5
check "server first, client ends: dumps" "$ndumps" 0

fi

# 3. The server ends first (status 0), and the client hangs: dumped, then
#    killed (137), with the server's output and the client's threads in
#    the dump, named on stderr.
if ((watch_wait_p)); then
server 0.2 0
client 300 sleep 1000
cpid=
for _ in $(seq 100); do
  cpid=$(pgrep -P "$tpid" || true)
  [[ -n $cpid ]] && break
  sleep 0.05
done
watch
check "client hangs: status" "$rc" 137
check "client hangs: server_rc" "$server_rc" 0
check "client hangs: dumps" "$ndumps" 1
# Ended: gone, or a zombie or dying (killed with its parent, timeout, it
# is left to init, which need not reap it at once; kill -0 still finds
# it). The SIGKILL was sent; on a loaded machine the process may not have
# run since, so its state is looked at for up to 2 s.
for _ in $(seq 40); do
  state=$(awk '{print $3}' "/proc/$cpid/stat" 2>/dev/null || true)
  [[ ${state:-Z} == [ZX] ]] && break
  sleep 0.05
done
check "client hangs: client ended" "$([[ ${state:-Z} == [ZX] ]] && echo ended || echo "alive ($state)")" ended
dump=$(find "$dumps" -name 'hang-*.txt' 2>/dev/null | head -n 1 || true)
check "client hangs: dump named on stderr" "$(grep -c -F "$dump" "$tmp/watch.err" || true)" 1
check "client hangs: dump file named for the client" "${dump##*-}" "$cpid.txt"
check "client hangs: server output in the dump" "$(grep -c '^stand-in server: window done$' "$dump" || true)" 1
check "client hangs: the client's thread in the dump" \
  "$(grep -c "^thread $cpid sleep state S " "$dump" || true)" 1
# gdb attaches to a process that is not its child only where ptrace lets
# it: as root, or with Yama's ptrace_scope 0 (Ubuntu's default is 1).
scope=$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo 0)
if command -v gdb >/dev/null && ((EUID == 0 || scope == 0)); then
  check "client hangs: a backtrace in the dump" "$(grep -c '^#0 ' "$dump" | awk '{print ($1 > 0)}')" 1
else
  echo "note: no backtrace expected (gdb missing, or ptrace_scope $scope as uid $EUID)"
fi
rm -rf "$dumps"
fi

# 4. Without wait -p (bash 5.0): the client alone is waited for, and a
#    hang is left to the client's own limit (here 1 s), as the bench did
#    before the watch.
watch_wait_p=0
server 0.2 0
client 1 sleep 1000
watch
check "no wait -p: status" "$rc" 137
check "no wait -p: server_rc" "$server_rc" ""
check "no wait -p: dumps" "$ndumps" 0
wait "$spid" || true

if ((fails)); then
  echo "watch_client: $fails check(s) failed"
  exit 1
fi
echo "watch_client: all checks passed"
