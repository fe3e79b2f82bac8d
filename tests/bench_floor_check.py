#!/usr/bin/env python3
"""The transport floor (bench/bench_floor.cpp) sends what it claims to:
every frame masked (RFC 6455 5.3) with a fresh key, its payload exactly the
source bytes once unmasked and of the sizes asked for, and, under strace,
each frame in one system call. The bench server discards payloads without
unmasking them, so a floor that skipped the masking (the cost it exists to
include), reused a key, or sent a frame in two calls would run as well and
be faster than any real client: a floor too low, every ratio to it wrong.

  tests/bench_floor_check.py PATH/TO/plugrl_bench_floor
"""
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile

EXCHANGES = 40
# A 16-bit and a 64-bit length, neither a multiple of 8: mask_copy's tail.
INFER, FEEDBACK = 130, 70001


def recv_exact(c, n):
    b = bytearray()
    while len(b) < n:
        k = c.recv(n - len(b))
        if not k:
            raise SystemExit("bench_floor_check: the floor closed early")
        b += k
    return bytes(b)


def read_frame(c):
    b0, b1 = recv_exact(c, 2)
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack(">H", recv_exact(c, 2))[0]
    elif n == 127:
        n = struct.unpack(">Q", recv_exact(c, 8))[0]
    key = recv_exact(c, 4) if b1 & 0x80 else None
    return b0, key, recv_exact(c, n)


def server_frame(op, payload):
    n = len(payload)
    if n < 126:
        h = bytes([0x80 | op, n])
    else:
        h = bytes([0x80 | op, 126]) + struct.pack(">H", n)
    return h + payload


def main():
    floor = sys.argv[1]
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    port = ls.getsockname()[1]
    tmp = tempfile.mkdtemp()
    trace = os.path.join(tmp, "strace.out")
    cmd = [floor, "--url", f"ws://127.0.0.1:{port}", "--infer-bytes", str(INFER), "--feedback-bytes", str(FEEDBACK)]
    # strace where it can trace (ptrace may be refused in a container).
    traced = shutil.which("strace") is not None and subprocess.run(
        ["strace", "-o", os.devnull, "true"], capture_output=True).returncode == 0
    if traced:
        cmd = ["strace", "-f", "-e", "trace=sendto,sendmsg", "-o", trace] + cmd
    else:
        print("bench_floor_check: NOTE: no strace here: one send per frame is not checked")
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    ls.settimeout(30)
    c, _ = ls.accept()
    c.settimeout(30)
    head = b""
    while b"\r\n\r\n" not in head:
        head += c.recv(4096)
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")
    c.sendall(server_frame(0x2, b"\x80"))  # metadata: the floor only wants a binary frame
    src = bytes((i * 7) & 0xFF for i in range(max(INFER, FEEDBACK)))
    keys, errors = [], []

    def check(what, size):
        b0, key, data = read_frame(c)
        if b0 != 0x82:
            errors.append(f"{what}: first byte {b0:#x}, want 0x82 (FIN, binary)")
        if key is None:
            errors.append(f"{what}: not masked")
            return
        keys.append(key)
        plain = bytes(x ^ key[i % 4] for i, x in enumerate(data))
        if len(data) != size or plain != src[:size]:
            errors.append(f"{what}: {len(data)} bytes that unmask to other bytes than the source's {size}")

    for i in range(EXCHANGES):
        check(f"infer {i}", INFER)
        c.sendall(server_frame(0x2, b"\x00" * 64))
        check(f"feedback {i}", FEEDBACK)
    check("last infer", INFER)
    c.sendall(server_frame(0x8, struct.pack(">H", 1001) + b"plugrl-server-stop"))
    b0, key, data = read_frame(c)
    if b0 & 0x0F != 0x8 or key is None:
        errors.append(f"the floor's close: first byte {b0:#x}, masked {key is not None}")
    c.close()
    if p.wait(timeout=30) != 0:
        errors.append(f"the floor exited {p.returncode}")
    if len(set(keys)) != len(keys):
        errors.append(f"{len(keys)} frames with {len(set(keys))} keys: a key reused")
    if traced:
        calls = [ln for ln in open(trace) if re.search(r"\b(sendto|sendmsg)\(", ln)]
        # The handshake, every frame, the close: one call each.
        want = 1 + 2 * EXCHANGES + 1 + 1
        if len(calls) != want:
            errors.append(f"{len(calls)} send calls for {2 * EXCHANGES + 1} frames, a handshake and a close; want {want}")
    shutil.rmtree(tmp)
    for e in errors[:10]:
        print("FAIL:", e, file=sys.stderr)
    if errors:
        sys.exit(1)
    print(f"bench_floor_check: ok ({len(keys)} frames, each masked with its own key{', one send each' if traced else ''})")


main()
