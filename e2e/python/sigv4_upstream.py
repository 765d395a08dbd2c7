"""A bound AWS host for the e2e suite (sigv4_test.go): an HTTPS server that
checks every request's SigV4 signature with the REAL key, recomputed by
botocore's own signer (SigV4Auth, S3SigV4Auth) — an implementation that is
not the Custodian's — and then answers as S3 or Bedrock would, enough for
boto3 and the AWS SDK for Go.

Its environment names what it needs: SIGV4_CREDS, a file holding the real
key as JSON {"id", "secret", "token"} (never argv); SIGV4_CERT and SIGV4_KEY,
its leaf; SIGV4_PORT_FILE, where it writes the port it listens on
(127.0.0.1). A request that does not verify is answered 403
SignatureDoesNotMatch and counted; an aws-chunked body is read strictly,
its chunk and trailer signatures checked as the real key's chain and its
CRC32 trailer against its data. GET /__stats (plain, no signature) answers
{"verified": N, "refused": M, "forms": {x-amz-content-sha256 of each
verified PUT: count}}. No line it writes holds a key part.
"""

import base64
import hashlib
import hmac
import json
import os
import ssl
import sys
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl

from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

with open(os.environ["SIGV4_CREDS"]) as f:
    REAL = json.load(f)
CREDS = Credentials(REAL["id"], REAL["secret"], REAL["token"])

objects = {}
stats = {"verified": 0, "refused": 0, "forms": {}}
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
    form = headers.get("X-Amz-Content-Sha256", "")
    if form in CHUNKED:
        why = chunked_why(body, form, date, region, service, sig, headers.get("X-Amz-Trailer", ""))
        if why:
            return why
    return None


# The aws-chunked forms: whether each chunk is signed, whether trailers follow.
CHUNKED = {
    "STREAMING-AWS4-HMAC-SHA256-PAYLOAD": (True, False),
    "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER": (True, True),
    "STREAMING-UNSIGNED-PAYLOAD-TRAILER": (False, True),
}


def parse_chunked(body, form):
    """An aws-chunked body read as S3 reads it: [(data, chunk signature)],
    [trailer lines], or a ValueError. Written here (botocore has no reader),
    from AWS's "Transferring Payload in Multiple Chunks" and "Signature
    calculations for trailing headers"."""
    signed, trailing = CHUNKED[form]
    chunks, rest = [], body
    while True:
        line, crlf, rest = rest.partition(b"\r\n")
        if not crlf:
            raise ValueError("a chunk line without its CRLF")
        size_hex, sig = line, b""
        if signed:
            size_hex, _, sig = line.partition(b";chunk-signature=")
        if not size_hex or size_hex.strip(b"0123456789abcdefABCDEF"):
            raise ValueError("a chunk size that is not hex digits")
        size = int(size_hex, 16)
        if size == 0 and trailing:
            chunks.append((b"", sig.decode()))
            break
        data, crlf, rest = rest[:size], rest[size:size + 2], rest[size + 2:]
        if crlf != b"\r\n":
            raise ValueError("a chunk's data without its CRLF")
        chunks.append((data, sig.decode()))
        if size == 0:
            if rest:
                raise ValueError("bytes after the last chunk")
            return chunks, []
    trailers = []
    while True:
        line, crlf, rest = rest.partition(b"\r\n")
        if not crlf:
            raise ValueError("a trailer line without its CRLF")
        if not line:
            if rest:
                raise ValueError("bytes after the trailers")
            return chunks, trailers
        trailers.append(line.decode())


def chunked_why(body, form, amz_date, region, service, seed, declared):
    """Why an aws-chunked body is not one S3 takes from the real key: its
    framing, a chunk or trailer signature that is not the real key's chain
    seeded by the request's signature, a trailer x-amz-trailer (declared)
    names that is not there, or a checksum trailer that is not its data's.
    None when it is."""
    signed, _ = CHUNKED[form]
    try:
        chunks, trailers = parse_chunked(body, form)
    except ValueError as e:
        return "the aws-chunked body: " + str(e)
    key = ("AWS4" + REAL["secret"]).encode()
    for part in (amz_date[:8], region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    scope = "/".join((amz_date[:8], region, service, "aws4_request"))
    prev = seed
    for data, sig in chunks:
        if not signed:
            continue
        sts = "\n".join(("AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, prev,
                         hashlib.sha256(b"").hexdigest(), hashlib.sha256(data).hexdigest()))
        prev = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(prev, sig):
            return "the chunk signatures are not the real key's chain"
    values = dict(t.partition(":")[::2] for t in trailers)
    for name in filter(None, (n.strip() for n in declared.split(","))):
        if name not in values:
            return "a trailer x-amz-trailer names is not in the body"
    if signed and trailers:
        if not trailers[-1].startswith("x-amz-trailer-signature:"):
            return "the signed trailers do not end with their signature"
        canonical = "".join(t + "\n" for t in sorted(trailers[:-1]))
        sts = "\n".join(("AWS4-HMAC-SHA256-TRAILER", amz_date, scope, prev, hashlib.sha256(canonical.encode()).hexdigest()))
        want = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(want, values["x-amz-trailer-signature"]):
            return "the trailer signature is not the real key's chain"
    if "x-amz-checksum-crc32" in values:
        crc = zlib.crc32(b"".join(d for d, _ in chunks)).to_bytes(4, "big")
        if base64.b64encode(crc).decode() != values["x-amz-checksum-crc32"]:
            return "the CRC32 trailer is not the data's"
    return None


def dechunk(body, form):
    """The payload of an aws-chunked body."""
    return b"".join(d for d, _ in parse_chunked(body, form)[0])


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
            if not why and self.command == "PUT":
                form = self.headers.get("X-Amz-Content-Sha256", "")
                form = form if form in CHUNKED or form == "UNSIGNED-PAYLOAD" else "a hash"
                stats["forms"][form] = stats["forms"].get(form, 0) + 1
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
            if self.headers.get("X-Amz-Content-Sha256") in CHUNKED:
                body = dechunk(body, self.headers["X-Amz-Content-Sha256"])
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
