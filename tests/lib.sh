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
