"""The suite's Python WebSocket client: websockets 15.0.1, which
make test installs into a venv of Debian's python3 in .cache/python-ws.

It reads one request (JSON, argv[1]: url, headers, send) and connects the
way a tool in the Harness container would: through HTTPS_PROXY (websockets
reads the proxy from the environment), trusting SSL_CERT_FILE. It prints
each message as one JSON line ({"type": "text"|"binary", "data": ...},
binary data in base64), sends each string of send after the fourth, closes
with 1000 "done" after the answers, and prints the close code and reason.
"""
import base64
import json
import os
import ssl
import sys

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect


def main():
    spec = json.loads(sys.argv[1])
    ctx = ssl.create_default_context(cafile=os.environ.get("SSL_CERT_FILE"))
    # TLS 1.2 at most. Over TLS 1.3 the sync client's receiving thread reads
    # the server's session tickets while the opening thread writes the
    # upgrade request on the same TLS socket, and now and then neither goes
    # on: the client times out "waiting for handshake response" with the
    # server never having read the request. It is the client's: against a
    # plain Go TLS WebSocket server, no Custodian, 11 and 15 of 6000
    # connects stalled (websockets 17.0.1: 7 and 3 of 6000); with TLS 1.2,
    # or with the server's session tickets off, 0 of 6000 each.
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    send = spec.get("send") or []
    out = sys.stdout
    with connect(
        spec["url"],
        additional_headers=[tuple(h) for h in spec.get("headers") or []],
        ssl=ctx,
        open_timeout=20,
        # No close timeout: with one, close() sets a timeout on the TLS
        # socket from the sending thread while the receiving thread is
        # blocked reading it, and now and then that read fails at once
        # ("The read operation timed out", websockets 15.0.1's sync client
        # on CPython 3.11) before the server's close frame is read: the
        # client reports 1006. The suite's own timeouts bound the run.
        close_timeout=None,
    ) as ws:
        n = 0
        try:
            while True:
                m = ws.recv(timeout=20)
                if isinstance(m, str):
                    out.write(json.dumps({"type": "text", "data": m}, separators=(",", ":")) + "\n")
                else:
                    out.write(json.dumps({"type": "binary", "data": base64.b64encode(m).decode()}, separators=(",", ":")) + "\n")
                n += 1
                if n == 4:
                    for s in send:
                        ws.send(s)
                if n == 4 + len(send):
                    ws.close(1000, "done")
        except ConnectionClosed:
            pass
        out.write(json.dumps({"type": "close", "code": ws.close_code, "reason": ws.close_reason}, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
