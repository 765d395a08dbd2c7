// The AWS SDK for JavaScript v3 as the agent runs it, for the e2e suite
// (sigv4_test.go): its environment is harness.env (the AWS_* stand-ins,
// HTTPS_PROXY, NODE_EXTRA_CA_CERTS, which Node reads at start) and the
// endpoints, AWS_ENDPOINT_URL_S3 and AWS_ENDPOINT_URL_BEDROCK_RUNTIME. The
// credentials are the SDK's own default chain (the AWS_* variables). The
// SDK's HTTP handler opens its own agent, which no proxy variable reaches,
// so it is handed one for HTTPS_PROXY (https-proxy-agent), as the SDK's
// guide for a proxy says.
//
// It runs the steps argv names and prints one JSON line per step:
// {"step", "ok", "status", "body"}, as aws_client.py does. Steps: invoke
// (Bedrock InvokeModel, a JSON POST whose body the Custodian hashes), put
// (S3 PutObject of a stream: the SDK's default flexible checksum sends it
// aws-chunked, STREAMING-UNSIGNED-PAYLOAD-TRAILER with a CRC32 trailer),
// get, presigned (a presigned GetObject URL fetched with https through the
// proxy), other-region (S3 signed for eu-west-1, which the Custodian
// refuses).
'use strict';
const https = require('node:https');
const { Readable } = require('node:stream');
const { HttpsProxyAgent } = require('https-proxy-agent');
const { NodeHttpHandler } = require('@smithy/node-http-handler');
const { S3Client, PutObjectCommand, GetObjectCommand } = require('@aws-sdk/client-s3');
const { BedrockRuntimeClient, InvokeModelCommand } = require('@aws-sdk/client-bedrock-runtime');
const { getSignedUrl } = require('@aws-sdk/s3-request-presigner');

const BUCKET = 'e2e-bucket';
const KEY = 'dir/js object.txt';
const PARTS = ['hello from ', 'the js sdk'];

const proxy = process.env.HTTPS_PROXY || process.env.https_proxy;
const agent = new HttpsProxyAgent(proxy);
// The SDK builds its Node handler from these options.
const common = { requestHandler: { httpsAgent: agent }, maxAttempts: 1 };

function s3(region) {
  return new S3Client({ ...common, region, endpoint: process.env.AWS_ENDPOINT_URL_S3, forcePathStyle: true });
}

async function text(body) {
  return Buffer.from(await body.transformToByteArray()).toString('utf8');
}

const steps = {
  async invoke() {
    // Bedrock's client defaults to an HTTP/2 handler, which takes no
    // agent: it is handed the HTTP/1.1 one, with the proxy's agent, for
    // this call that streams nothing.
    const c = new BedrockRuntimeClient({
      ...common, requestHandler: new NodeHttpHandler({ httpsAgent: agent }), region: 'us-east-1', endpoint: process.env.AWS_ENDPOINT_URL_BEDROCK_RUNTIME,
    });
    const r = await c.send(new InvokeModelCommand({
      modelId: 'anthropic.claude-v2', body: JSON.stringify({ prompt: 'hi' }), contentType: 'application/json', accept: 'application/json',
    }));
    return [r.$metadata.httpStatusCode, Buffer.from(r.body).toString('utf8')];
  },
  async put() {
    const body = Readable.from(PARTS.map((p) => Buffer.from(p)));
    const length = PARTS.reduce((n, p) => n + Buffer.byteLength(p), 0);
    const r = await s3('us-east-1').send(new PutObjectCommand({ Bucket: BUCKET, Key: KEY, Body: body, ContentLength: length }));
    return [r.$metadata.httpStatusCode, ''];
  },
  async get() {
    const r = await s3('us-east-1').send(new GetObjectCommand({ Bucket: BUCKET, Key: KEY }));
    return [r.$metadata.httpStatusCode, await text(r.Body)];
  },
  async presigned() {
    const url = await getSignedUrl(s3('us-east-1'), new GetObjectCommand({ Bucket: BUCKET, Key: KEY }), { expiresIn: 300 });
    return new Promise((resolve, reject) => {
      const req = https.get(url, { agent }, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve([res.statusCode, Buffer.concat(chunks).toString('utf8')]));
      });
      req.on('error', reject);
      req.setTimeout(30000, () => req.destroy(new Error('timed out')));
    });
  },
  async 'other-region'() {
    const r = await s3('eu-west-1').send(new GetObjectCommand({ Bucket: BUCKET, Key: KEY }));
    return [r.$metadata.httpStatusCode, await text(r.Body)];
  },
};

(async () => {
  for (const name of process.argv.slice(2)) {
    const f = steps[name];
    if (!f) continue;
    let out;
    try {
      const [status, body] = await f();
      out = { step: name, ok: status === 200, status, body };
    } catch (e) {
      // The step's failure is the test's to read.
      out = { step: name, ok: false, status: (e.$metadata && e.$metadata.httpStatusCode) || null, body: `${e.name}: ${e.message}` };
    }
    process.stdout.write(JSON.stringify(out) + '\n');
  }
  agent.destroy();
})();
