"""A bound AWS host for the e2e suite (sigv4_test.go): an HTTPS server that
checks every request's SigV4 signature with the REAL key, recomputed by
botocore's own signer (SigV4Auth, S3SigV4Auth) — an implementation that is
not the Custodian's — and then answers as S3 or Bedrock would, enough for
boto3 and the AWS SDK for Go.

Its environment names what it needs: SIGV4_CREDS, a file holding the real
key as JSON {"id", "secret", "token"} (never argv); SIGV4_CERT and SIGV4_KEY,
its leaf; SIGV4_PORT_FILE, where it writes the port it listens on
(127.0.0.1). A request that does not verify is answered 403
SignatureDoesNotMatch and counted; GET /__stats (plain, no signature)
answers {"verified": N, "refused": M}. No line it writes holds a key part.
"""

import hashlib
import hmac
import json
import os
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl

from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

with open(os.environ["SIGV4_CREDS"]) as f:
    REAL = json.load(f)
CREDS = Credentials(REAL["id"], REAL["secret"], REAL["token"])

objects = {}
stats = {"verified": 0, "refused": 0}
lock = threading.Lock()


def fields(auth):
    out = {}
    for part in auth[len("AWS4-HMAC-SHA256 "):].split(","):
        k, _, v = part.strip().partition("=")
        out[k] = v
    return out


def verify(method, host, target, headers, body):
    """Why the request does not verify with the real key, or None."""
    path, _, query = target.partition("?")
    params = parse_qsl(query, keep_blank_values=True)
    presigned = any(k == "X-Amz-Signature" for k, _ in params)
    if presigned:
        q = dict(params)
        cred, signed, sig, date = q["X-Amz-Credential"], q["X-Amz-SignedHeaders"], q["X-Amz-Signature"], q["X-Amz-Date"]
        if q.get("X-Amz-Security-Token") != REAL["token"]:
            return "the presigned query does not carry the real session token"
        # botocore reads the query's pairs as sent (encoded), less the
        # signature.
        query = "&".join(p for p in query.split("&") if not p.startswith("X-Amz-Signature="))
    else:
        auth = headers.get("Authorization", "")
        if not auth.startswith("AWS4-HMAC-SHA256 "):
            return "no SigV4 Authorization"
        f = fields(auth)
        cred, signed, sig = f.get("Credential", ""), f.get("SignedHeaders", ""), f.get("Signature", "")
        date = headers.get("X-Amz-Date", "")
        if headers.get("X-Amz-Security-Token") != REAL["token"]:
            return "the request does not carry the real session token"
    parts = cred.split("/")
    if len(parts) != 5 or parts[0] != REAL["id"]:
        return "the credential is not the real key id's"
    region, service = parts[2], parts[3]
    cls = S3SigV4Auth if service == "s3" else SigV4Auth
    if presigned:
        class Query(cls):
            def payload(self, request):
                return "UNSIGNED-PAYLOAD"
        cls = Query
    signer = cls(CREDS, service, region)
    hs = {}
    for name in signed.split(";"):
        if name == "host":
            hs["host"] = host
        elif name in headers:
            hs[name] = headers[name]
    url = "https://" + host + path + ("?" + query if query else "")
    req = AWSRequest(method=method, url=url, headers=hs, data=body)
    req.context["timestamp"] = date
    cr = signer.canonical_request(req)
    want = signer.signature(signer.string_to_sign(req, cr), req)
    if signer.signed_headers(signer.headers_to_sign(req)) != signed:
        return "the signed headers are not the ones sent"
    if not hmac.compare_digest(want, sig):
        return "the signature does not verify with the real key"
    if headers.get("X-Amz-Content-Sha256") == "STREAMING-AWS4-HMAC-SHA256-PAYLOAD" and not chain_ok(body, date, region, service, sig):
        return "the chunk signatures are not the real key's chain"
    return None


def chain_ok(body, amz_date, region, service, seed):
    """Whether a signed aws-chunked body carries the real key's chain,
    seeded by the request's signature (AWS's "Transferring Payload in
    Multiple Chunks"; botocore has no signer for it, so it is written here)."""
    key = ("AWS4" + REAL["secret"]).encode()
    for part in (amz_date[:8], region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    scope = "/".join((amz_date[:8], region, service, "aws4_request"))
    prev, rest = seed, body
    while True:
        line, _, rest = rest.partition(b"\r\n")
        size_hex, _, sig = line.partition(b";chunk-signature=")
        size = int(size_hex, 16)
        data, crlf, rest = rest[:size], rest[size:size + 2], rest[size + 2:]
        sts = "\n".join(("AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, prev,
                         hashlib.sha256(b"").hexdigest(), hashlib.sha256(data).hexdigest()))
        want = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
        if crlf != b"\r\n" or not hmac.compare_digest(want, sig.decode()):
            return False
        prev = want
        if size == 0:
            return rest == b""


def dechunk(body):
    """The payload of an aws-chunked body (its trailers dropped)."""
    out = b""
    while body:
        line, _, body = body.partition(b"\r\n")
        size = int(line.split(b";")[0], 16)
        if size == 0:
            break
        out, body = out + body[:size], body[size + 2:]
    return out


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # no line holds a header or a path
        pass

    def answer(self, status, body, ctype="application/json", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def read_chunked(self):
        body = b""
        while True:
            size = int(self.rfile.readline().split(b";")[0], 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return body
            body += self.rfile.read(size)
            self.rfile.readline()

    def handle_any(self):
        if "chunked" in (self.headers.get("Transfer-Encoding") or ""):
            body = self.read_chunked()
        else:
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else b""
        if self.path == "/__stats":
            with lock:
                return self.answer(200, json.dumps(stats).encode())
        why = verify(self.command, self.headers.get("Host", ""), self.path, self.headers, body)
        with lock:
            stats["refused" if why else "verified"] += 1
        if why:
            print("sigv4 upstream: refused: " + why, file=sys.stderr, flush=True)
            return self.answer(403, b"<Error><Code>SignatureDoesNotMatch</Code></Error>", "application/xml")
        path = self.path.partition("?")[0]
        if path.startswith("/model/"):
            # Bedrock's InvokeModel; the answer echoes the credential the
            # upstream got, which the Custodian must scrub.
            echo = REAL["id"] + " " + REAL["token"]
            return self.answer(200, json.dumps({"completion": "hello from bedrock", "echo": echo}).encode())
        if self.command == "PUT":
            if "aws-chunked" in (self.headers.get("Content-Encoding") or ""):
                body = dechunk(body)
            objects[path] = body
            return self.answer(200, b"", extra=[("ETag", '"e2e"')])
        if self.command in ("GET", "HEAD"):
            if path not in objects:
                return self.answer(404, b"<Error><Code>NoSuchKey</Code></Error>", "application/xml")
            return self.answer(200, objects[path], "application/octet-stream", [("ETag", '"e2e"')])
        return self.answer(405, b"")

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = handle_any


def main():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.environ["SIGV4_CERT"], os.environ["SIGV4_KEY"])
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    with open(os.environ["SIGV4_PORT_FILE"] + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(os.environ["SIGV4_PORT_FILE"] + ".tmp", os.environ["SIGV4_PORT_FILE"])
    srv.serve_forever()


if __name__ == "__main__":
    main()
