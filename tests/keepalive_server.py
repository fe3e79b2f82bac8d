#!/usr/bin/python3
"""A PlugRL server on Python websockets, with its keepalive made short.

    keepalive_server.py CHECKER [--ping-interval S] [--ping-timeout S]

PlugRL servers run on the Python websockets library, which pings every
client (ping_interval, 20 s by default) and drops one that leaves a ping
unanswered for ping_timeout (20 s) with close code 1011 and the reason
"keepalive ping timeout". A client whose process is stopped (a debugger's
breakpoint, SIGSTOP) cannot answer. This server lets a test see that close
from the library itself, in seconds: it sends metadata (action_horizon 1,
action_dim 1), answers every infer with a float32 action of zeros and takes
feedback, on as many connections as come, and prints its URL on stdout
("listening on ws://127.0.0.1:PORT") and one line per connection's end on
stderr (its close code and reason). It exits when stdin closes.

CHECKER is ../shared/conformance/plugrl-conformance (or its directory):
the plugrl_protocol package beside it is the protocol authors' msgpack
codec (SPEC 3.2).
Needs Debian's python3 with python3-websockets, python3-msgpack and
python3-numpy, as the checker does.
"""

import argparse
import asyncio
import os
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checker")
    parser.add_argument("--ping-interval", type=float, default=1.0)
    parser.add_argument("--ping-timeout", type=float, default=2.0)
    args = parser.parse_args()
    checker = os.path.abspath(args.checker)
    sys.path.insert(0, checker if os.path.isdir(checker) else os.path.dirname(checker))

    import numpy as np
    from plugrl_protocol import msgpack_numpy

    try:  # websockets 13 and later
        from websockets.asyncio.server import serve
    except ImportError:  # Debian 12's 10.4
        from websockets.legacy.server import serve
    from websockets.exceptions import ConnectionClosed

    metadata = msgpack_numpy.packb(
        {
            "message_type": "metadata",
            "data": {"protocol_version": 1, "action_horizon": 1, "action_dim": 1},
        }
    )

    async def handle(websocket, path=None):
        try:
            await websocket.send(metadata)
            async for raw in websocket:
                message = msgpack_numpy.unpackb(raw)
                if message.get("message_type") != "infer":
                    continue  # feedback: nothing to answer
                envs = np.asarray(message["env_indices"], dtype=np.int64)
                action = np.zeros((1, len(envs), 1), np.float32)
                await websocket.send(
                    msgpack_numpy.packb(
                        {"message_type": "action", "data": {"env_ids": envs, "action": action}}
                    )
                )
        except ConnectionClosed:
            pass
        print(
            f"keepalive_server: connection ended: close code {websocket.close_code}, "
            f"reason {websocket.close_reason!r}",
            file=sys.stderr,
            flush=True,
        )

    async def run() -> None:
        async with serve(
            handle,
            "127.0.0.1",
            0,
            ping_interval=args.ping_interval,
            ping_timeout=args.ping_timeout,
            compression=None,
            max_size=None,
        ) as server:
            port = next(iter(server.sockets)).getsockname()[1]
            print(f"listening on ws://127.0.0.1:{port}", flush=True)
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, sys.stdin.read)  # until stdin closes

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
