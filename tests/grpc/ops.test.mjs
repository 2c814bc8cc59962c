// What operators see of gRPC calls: GET /metrics counts them with
// protocol="grpc", the access log names each call with its request id
// (x-request-id metadata); and TLS from the same certificate settings as
// HTTPS, with grpc-js's createSsl(ca).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';
import { Status, compareAnswers, failure, grpcRequest, httpInfer, makeCert, makeClient, metadata, startServer,
         unary } from './harness.mjs';

const small = { parameters: { num_heads: 2 }, inputs: [{ name: 'query', datatype: 'FP32', shape: [2, 4], data: [1, 0, 0, 1, 0, 2, 1, 0] }] };

// The sum of the samples of `family` whose labels match every [k, v] pair.
function sample(text, family, labels) {
  let sum = 0, found = false;
  for (const line of text.split('\n')) {
    const m = line.match(/^(\w+)\{([^}]*)\} (\S+)$/);
    if (!m || m[1] !== family) continue;
    const ls = Object.fromEntries([...m[2].matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (labels.every(([k, v]) => ls[k] === v)) { sum += Number(m[3]); found = true; }
  }
  return found ? sum : null;
}

test('metrics count gRPC calls with protocol="grpc"; the access log has their request ids', async () => {
  const srv = await startServer({ name: 'ops' });
  try {
    for (let i = 0; i < 5; i++) await unary(srv.client, 'ModelInfer', grpcRequest('attention', small));
    await unary(srv.client, 'ServerMetadata', {}, { md: metadata({ 'x-request-id': 'grpc-req-31-meta' }) });
    await unary(srv.client, 'ModelInfer', grpcRequest('attention', small), { md: metadata({ 'x-request-id': 'grpc-req-31-infer' }) });
    const bad = await failure(srv.client, 'ModelInfer', grpcRequest('attention', { ...small, parameters: { num_heads: 3 } }),
                              { md: metadata({ 'x-request-id': 'grpc-req-31-bad' }) });
    assert.equal(bad.code, Status.INVALID_ARGUMENT);
    await httpInfer(srv, 'attention', small);
    const m = (await srv.http('GET', '/metrics')).text;
    const grpcLines = m.split('\n').filter((l) => /protocol="grpc"/.test(l) && !l.startsWith('#'));
    assert.ok(grpcLines.length > 0, 'no protocol="grpc" line in /metrics');
    const ok = sample(m, 'attention_requests_total', [['protocol', 'grpc'], ['status', 'OK']]);
    assert.ok(ok >= 8, `attention_requests_total{protocol="grpc",status="OK"} is ${ok}, 8 calls or more answered OK`);
    const inv = sample(m, 'attention_requests_total', [['protocol', 'grpc'], ['status', 'INVALID_ARGUMENT']]);
    assert.ok(inv >= 1, `attention_requests_total{protocol="grpc",status="INVALID_ARGUMENT"} is ${inv}`);
    assert.ok(sample(m, 'attention_requests_total', [['protocol', 'http']]) >= 1, 'HTTP requests counted with protocol="http"');
    const log = srv.log().split('\n');
    const line = (id) => log.find((l) => l.includes(`id=${id}`));
    const meta = line('grpc-req-31-meta');
    assert.ok(meta && /GRPC \/inference\.GRPCInferenceService\/ServerMetadata OK /.test(meta), `access log: ${meta}`);
    const infer = line('grpc-req-31-infer');
    assert.ok(infer && /GRPC \/inference\.GRPCInferenceService\/ModelInfer OK /.test(infer), `access log: ${infer}`);
    // a call without x-request-id gets an id made up, as an HTTP request without X-Request-Id
    assert.ok(log.some((l) => /GRPC \/inference\.GRPCInferenceService\/ModelInfer OK \d+ .*id=\S+$/.test(l) && !l.includes('grpc-req-31')),
              'no access log line of a ModelInfer without x-request-id');
    const b = line('grpc-req-31-bad');
    assert.ok(b && /ModelInfer INVALID_ARGUMENT /.test(b), `access log: ${b}`);
  } finally {
    await srv.stop();
  }
});

test('TLS: the certificate of tls_cert_file/tls_key_file serves gRPC too (createSsl(ca))', async () => {
  const cert = await makeCert();
  let srv = null;
  try {
    srv = await startServer({ name: 'ops-tls', tls: cert });   // waits for ServerLive over TLS
    assert.deepEqual(await unary(srv.client, 'ServerReady', {}), { ready: true });
    const h = await httpInfer(srv, 'attention', small);   // HTTPS, the same certificate
    assert.equal(h.status, 200, h.error);
    const g = await unary(srv.client, 'ModelInfer', grpcRequest('attention', small));
    assert.deepEqual(compareAnswers(h, g, 'over TLS'), []);
    // a client without TLS gets no answer from the TLS port
    const plain = makeClient(srv.grpcPort);
    const e = await failure(plain, 'ServerLive', {}, { deadlineMs: 5000 });
    plain.close();
    assert.ok([Status.UNAVAILABLE, Status.DEADLINE_EXCEEDED, Status.INTERNAL].includes(e.code), `${e.code} ${e.details}`);
    assert.deepEqual(await unary(srv.client, 'ServerLive', {}), { live: true });
  } finally {
    if (srv) await srv.stop();
    fs.rmSync(cert.dir, { recursive: true, force: true });
  }
});
