// The suite's Node WebSocket client: the ws package from npm,
// through HTTPS_PROXY with a proxy agent (https-proxy-agent, as client.js),
// trusting NODE_EXTRA_CA_CERTS, which Node reads at start. (Node 24.11's
// built-in WebSocket ignores NODE_USE_ENV_PROXY and goes direct.)
//
// It reads one request (JSON, its last argument: url, headers, send),
// opens the connection with those headers, prints each message it
// receives as one JSON line ({"type":"text"|"binary","data":…}, binary
// data in base64), sends each string of send once the fourth message
// arrived, closes with 1000 "done" after the answers to them, and prints
// {"type":"close","code":…,"reason":…}.
'use strict';
const WebSocket = require('ws');
const { HttpsProxyAgent } = require('https-proxy-agent');

const spec = JSON.parse(process.argv[process.argv.length - 1]);
const headers = {};
for (const [name, value] of spec.headers || []) headers[name] = value;
const url = new URL(spec.url);
const hostname = url.hostname.replace(/^\[|\]$/g, '');
const proxy = process.env.HTTPS_PROXY || process.env.https_proxy;
// https-proxy-agent 7 drops the host when it opens TLS to an IP literal:
// check the certificate against the URL's host, as a direct request does.
const checkServerIdentity = (_, cert) => require('node:tls').checkServerIdentity(hostname, cert);
const ws = new WebSocket(spec.url, { headers, agent: proxy ? new HttpsProxyAgent(proxy) : undefined, checkServerIdentity });
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const send = spec.send || [];
let n = 0;
ws.on('message', (data, isBinary) => {
  out(isBinary ? { type: 'binary', data: Buffer.from(data).toString('base64') } : { type: 'text', data: data.toString() });
  n++;
  if (n === 4) for (const s of send) ws.send(s);
  if (n === 4 + send.length) ws.close(1000, 'done');
});
ws.on('unexpected-response', (_, res) => {
  out({ type: 'status', status: res.statusCode });
  process.exit(1);
});
ws.on('error', (e) => process.stderr.write('ws error: ' + e.message + '\n'));
ws.on('close', (code, reason) => {
  out({ type: 'close', code, reason: reason.toString() });
  process.exit(0);
});
setTimeout(() => { out({ type: 'timeout' }); process.exit(1); }, 20000);
