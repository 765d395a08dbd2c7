"""The suite's Python client: Debian's python3-requests, run by /usr/bin/python3.

It reads one request (JSON, argv[1]) and sends it the way a tool in the
Harness container would: requests reads HTTPS_PROXY, NO_PROXY and
REQUESTS_CA_BUNDLE from the environment. It prints the answer as one JSON
object, or, for a stream, the status line and then each chunk of the body
the moment it arrives.
"""
import json
import sys

import requests


def main():
    spec = json.loads(sys.argv[1])
    headers = {name: value for name, value in spec.get("headers") or []}
    body = spec.get("body")
    resp = requests.request(
        spec["method"],
        spec["url"],
        headers=headers,
        data=body.encode() if body else None,
        stream=bool(spec.get("stream")),
        allow_redirects=False,
        timeout=30,
    )
    out = sys.stdout.buffer
    if spec.get("stream"):
        out.write(b"status %d\n" % resp.status_code)
        out.flush()
        for chunk in resp.iter_content(chunk_size=None):
            out.write(chunk)
            out.flush()
        return
    out.write(json.dumps({
        "status": resp.status_code,
        "headers": [[k, v] for k, v in resp.headers.items()],
        "body": resp.content.decode("utf-8", "replace"),
    }).encode())


if __name__ == "__main__":
    main()
