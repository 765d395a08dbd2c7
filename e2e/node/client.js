// The suite's Node client. Node 20 ignores HTTPS_PROXY (and
// NODE_USE_ENV_PROXY) by itself, so, as a tool in the Harness container
// would, it takes the proxy from the environment and hands https an agent
// from npm (https-proxy-agent), leaving hosts NO_PROXY names direct. With
// --env-proxy it hands https no agent at all, and the proxy is Node's own
// business: Node 22.21+ and 24.5+ honour NODE_USE_ENV_PROXY=1 (harness.env
// sets it), Node 20 goes direct. NODE_EXTRA_CA_CERTS is read by Node at start.
//
// It reads one request (JSON, its last argument) and prints the answer as
// one JSON object, or, for a stream, the status line and then each chunk of
// the body the moment it arrives.
'use strict';
const http = require('node:http');
const https = require('node:https');
const { HttpsProxyAgent } = require('https-proxy-agent');

function noProxy(host) {
  const list = (process.env.NO_PROXY || process.env.no_proxy || '').split(',');
  return list.map((s) => s.trim()).filter(Boolean).some((h) => h === host || host.endsWith('.' + h));
}

const spec = JSON.parse(process.argv[process.argv.length - 1]);
const envProxy = process.argv.includes('--env-proxy');
const url = new URL(spec.url);
// The path exactly as the test wrote it: URL would resolve dot segments.
const path = spec.url.slice(spec.url.indexOf('/', url.protocol.length + 2));
const tls = url.protocol === 'https:';
const proxy = process.env.HTTPS_PROXY || process.env.https_proxy;
const hostname = url.hostname.replace(/^\[|\]$/g, '');
const agent = !envProxy && tls && proxy && !noProxy(hostname) ? new HttpsProxyAgent(proxy) : undefined;
const headers = {};
for (const [name, value] of spec.headers || []) headers[name] = value;

// https-proxy-agent 7 drops the host when it opens TLS to an IP literal, so
// Node would check the certificate against "localhost" (or against a Host
// header the request sets): check it against the URL's host, as a direct
// request does.
const checkServerIdentity = (_, cert) => require('node:tls').checkServerIdentity(hostname, cert);
const req = (tls ? https : http).request(
  { method: spec.method, hostname, port: url.port, path, headers, agent, checkServerIdentity },
  (res) => {
    if (spec.stream) {
      process.stdout.write(`status ${res.statusCode}\n`);
      res.on('data', (chunk) => process.stdout.write(chunk));
      return;
    }
    const chunks = [];
    res.on('data', (c) => chunks.push(c));
    res.on('end', () => {
      const hs = [];
      for (let i = 0; i < res.rawHeaders.length; i += 2) hs.push([res.rawHeaders[i], res.rawHeaders[i + 1]]);
      process.stdout.write(JSON.stringify({ status: res.statusCode, headers: hs, body: Buffer.concat(chunks).toString('utf8') }));
    });
  },
);
req.on('error', (err) => {
  process.stderr.write(`node client: ${err.message}\n`);
  process.exitCode = 1;
});
req.setTimeout(30000, () => req.destroy(new Error('timed out')));
if (spec.body) req.write(spec.body);
req.end();
