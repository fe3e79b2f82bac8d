# Sourced by the test scripts: what more than one of them needs.

# wait_url FILE PID: a server started in the background as PID prints its
# ws:// (or wss://) URL as the first line of FILE, its stdout. Waits up to
# 20 s for it and prints it; returns 1 if the server exits or never says.
# FILE must be empty or absent before the server starts: truncate it in the
# calling shell, since the redirection of a background job happens in the
# child, which may run only after wait_url has read an earlier run's URL.
wait_url() {
  local file=$1 pid=$2 url= _
  for _ in $(seq 400); do
    if [[ -s $file ]]; then
      url=$(head -n 1 "$file" | grep -o 'wss\?://[^[:space:]]*' || true)
      if [[ -n $url ]]; then
        echo "$url"
        return 0
      fi
    fi
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# sig_mask PID FIELD: PID's signal set FIELD (SigIgn, SigCgt) from
# /proc/PID/status, as a number; 0 once PID has ended (or is a zombie).
sig_mask() {
  local hex
  hex=$(awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status" 2>/dev/null || true)
  echo $((16#${hex:-0}))
}

# catches_sigterm PID: PID is alive with a SIGTERM handler installed.
catches_sigterm() { (($(sig_mask "$1" SigCgt) >> (15 - 1) & 1)); }

# sigint_ignored_run OUT TEXT CMD...: runs CMD in the background started
# with SIGINT ignored (as a script's background job is), output in OUT.
# Not a fixed sleep before the signals: a program that took longer to
# start than it got met the SIGINT still ignored, whatever it did after,
# and passed. Its SIGTERM handler installed (the examples install
# SIGINT's first) says that it has done all it does with SIGINT; /proc
# then says whether SIGINT is still ignored, and a SIGINT must leave it
# running. A SIGTERM must then end it with 143 and TEXT in OUT. Returns
# 1, with OUT and the reason on stderr, if any of that fails.
sigint_ignored_run() {
  local out=$1 text=$2 pid rc=0 why=
  shift 2
  (
    trap '' INT
    exec "$@"
  ) >"$out" 2>&1 &
  pid=$!
  for _ in $(seq 400); do
    catches_sigterm "$pid" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  if ! catches_sigterm "$pid"; then
    why="it installed no SIGTERM handler in 20 s"
  elif ! (($(sig_mask "$pid" SigIgn) >> (2 - 1) & 1)); then
    why="it no longer ignores SIGINT"
  else
    kill -INT "$pid" 2>/dev/null || true
    sleep 0.3
    catches_sigterm "$pid" || why="SIGINT ended it"
  fi
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" || rc=$?
  if [[ -z $why ]] && ! { [[ $rc -eq 143 ]] && grep -q "$text" "$out"; }; then
    why="SIGTERM gave exit $rc, want 143 and \"$text\""
  fi
  [[ -z $why ]] && return 0
  cat "$out" >&2
  echo "started with SIGINT ignored, $why" >&2
  return 1
}

# signal_run OUT SIG DELAY WANT CMD...: runs CMD with stdout in OUT.out and
# stderr in OUT.err, sends it SIG after DELAY s and SIGKILL 5 s later
# (timeout runs it in the foreground: a background job of a script ignores
# SIGINT), with SIG's default action restored first (env --default-signal):
# the examples leave a signal ignored that they were started with ignored,
# as a shell expects, and a test started from a background job must not
# depend on that. Returns 0 if it exited WANT and printed a line saying it was
# interrupted; else prints its output and returns 1. The elapsed seconds
# are in $signal_run_took.
signal_run() {
  local out=$1 sig=$2 delay=$3 want=$4 rc=0 t0=$SECONDS
  shift 4
  timeout --preserve-status -s "$sig" -k 5 "$delay" env --default-signal="$sig" "$@" >"$out.out" 2>"$out.err" || rc=$?
  signal_run_took=$((SECONDS - t0))
  if [[ $rc -ne $want ]] || ! grep -q "interrupted" "$out.out"; then
    cat "$out.out" "$out.err" >&2
    echo "exit $rc after SIG$sig (want $want, and a line saying it was interrupted)" >&2
    return 1
  fi
}

# require_built DIR EXE...: each EXE is an executable in DIR, or the
# calling script says which is missing and exits 1.
require_built() {
  local dir=$1 exe
  shift
  for exe in "$@"; do
    [[ -x $dir/$exe ]] || {
      echo "$0: $dir/$exe is not built (./build.sh)" >&2
      exit 1
    }
  done
}

# hostile_cases HOSTILE SKIP...: the cases HOSTILE --list names, one a
# line, but for the SKIP ones. Returns 1, saying why, if the list fails or
# leaves fewer than 10: a program that no longer lists its cases must not
# pass by running none.
hostile_cases() {
  local hostile=$1 list name skip kept=()
  shift
  list=$("$hostile" --list) || {
    echo "FAIL: $hostile --list failed" >&2
    return 1
  }
  while read -r name _; do
    [[ -n $name ]] || continue
    for skip in "$@"; do
      [[ $name == "$skip" ]] && continue 2
    done
    kept+=("$name")
  done <<<"$list"
  if ((${#kept[@]} < 10)); then
    echo "FAIL: $hostile lists ${#kept[@]} cases to run" >&2
    return 1
  fi
  printf '%s\n' "${kept[@]}"
}

# bg_server_start DIR BIN ARGS...: runs BIN ARGS --addr 127.0.0.1:0 in the
# background, its stdout in DIR/server.out and stderr in DIR/server.err;
# sets $spid to its pid and $url to the URL it prints. Returns 1, after
# printing its stderr, if it never prints one.
bg_server_start() {
  local dir=$1
  shift
  : >"$dir/server.out"
  "$@" --addr 127.0.0.1:0 >"$dir/server.out" 2>"$dir/server.err" &
  spid=$!
  url=$(wait_url "$dir/server.out" "$spid") || { cat "$dir/server.err" >&2; return 1; }
}

# bg_server_stop: ends the server bg_server_start started, if one runs.
bg_server_stop() {
  if [[ -n ${spid:-} ]]; then
    kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null || true
  fi
  spid=
}

# thread_dump PID: what each thread of process PID is doing, for a process
# found hung: per thread its id, name, state and kernel wait channel (with
# its kernel stack where /proc lets it be read), then, where gdb is
# installed, every thread's backtrace. For diagnosis only: it never fails,
# and gdb gets 60 s.
thread_dump() {
  local pid=$1 t
  echo "== process $pid: $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || echo gone)"
  for t in /proc/"$pid"/task/*; do
    [[ -d $t ]] || continue
    echo "thread ${t##*/} $(cat "$t/comm" 2>/dev/null) state $(awk '{print $3}' "$t/stat" 2>/dev/null)" \
      "wchan $(cat "$t/wchan" 2>/dev/null)"
    sed 's/^/    /' "$t/stack" 2>/dev/null || true
  done
  if command -v gdb >/dev/null; then
    timeout -s KILL 60 gdb -p "$pid" -batch -nx -ex 'thread apply all bt 24' 2>&1 || true
  else
    echo "(gdb is not installed: no backtraces)"
  fi
}

# watch_client TPID SPID SERVER_OUT DUMP_DIR [OUTLIVE]: waits for a client
# started in the background under timeout (TPID: timeout's pid, which leads
# a process group of its own) against a server started in the background
# as SPID, and returns the client's status. A client still running OUTLIVE
# whole seconds (default 10) after its server ended has hung after the
# server's stop (a 64-handle bench run did, once in a few hundred, with
# nothing to say why: it was killed at its limit): its threads are dumped
# (thread_dump), after the server's output (SERVER_OUT), into a new file in
# DUMP_DIR, which is named on stderr, and then it is killed (status 137).
# The server's status, when it ended first, is left in server_rc (else
# server_rc is empty and the server is still to be waited for). Nothing
# polls before the server has ended, so a bench's measured window runs
# undisturbed. Without wait -p (bash before 5.1: Ubuntu 20.04's 5.0; a
# test sets watch_wait_p=0 to take this path) it waits for the client
# alone. Called in a command substitution (the bench's run_one), wait -n
# does not report a server that ended before it was called ("no such
# job"); the bench's server outlives its client's start.
server_rc=
watch_wait_p=$((BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] >= 501))
watch_client() {
  local tpid=$1 spid=$2 server_out=$3 dump_dir=$4 outlive=${5:-10} ended= st=0 k cpid dump
  server_rc=
  if ((watch_wait_p)); then
    wait -n -p ended "$tpid" "$spid" || st=$?
  fi
  [[ ${ended:-} == "$tpid" ]] && return "$st"
  if [[ ${ended:-} == "$spid" ]]; then # else no wait -p, or wait -n found neither: wait for the client
    server_rc=$st
    for ((k = 0; k < outlive * 20; k++)); do
      kill -0 "$tpid" 2>/dev/null || break
      sleep 0.05
    done
  fi
  if [[ -n $server_rc ]] && kill -0 "$tpid" 2>/dev/null; then
    kill -STOP "$tpid" 2>/dev/null || true # its limit must not cut the dump short
    # From here to the kill nothing may end the shell (set -e): a dump
    # that cannot be written must not leave timeout stopped and the
    # client running for good.
    cpid=$(pgrep -P "$tpid" | head -n 1 || true)
    mkdir -p "$dump_dir" 2>/dev/null || true
    dump=$( (cd "$dump_dir" 2>/dev/null && pwd) || echo "$dump_dir")/hang-$(date -u +%Y%m%dT%H%M%SZ)-${cpid:-unknown}.txt
    if ! {
      echo "the client outlived its server by $outlive s; the server's output:"
      cat "$server_out"
      [[ -z $cpid ]] || thread_dump "$cpid"
    } >"$dump" 2>&1; then
      dump="none ($dump could not be written)"
    fi
    echo "watch_client: the client (pid ${cpid:-unknown}) is still running $outlive s after its server" \
      "ended: a hang. Its threads: $dump" >&2
    # This ends timeout and the client, also where pgrep did not find the
    # client.
    kill -KILL -- "-$tpid" 2>/dev/null || true
  fi
  st=0
  wait "$tpid" || st=$?
  return "$st"
}
