#!/usr/bin/env bash
# Prints a TCP port on 127.0.0.1 that is free right now (the kernel's pick
# for port 0). Sourced or run by the other test scripts.
set -euo pipefail
py=/usr/bin/python3
[[ -x $py ]] || py=python3
exec "$py" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
