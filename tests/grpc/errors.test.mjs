// Each gRPC status code the service answers, with HTTP's message where the
// same request has one: INVALID_ARGUMENT, NOT_FOUND, UNAVAILABLE,
// RESOURCE_EXHAUSTED, UNAUTHENTICATED, PERMISSION_DENIED, UNIMPLEMENTED,
// DEADLINE_EXCEEDED.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { PROTO, Status, TOKEN, bearer, failure, grpcRequest, heavyV2, httpInfer, loadService, makeClient,
         sleep, startServer, unary } from './harness.mjs';

let srv;
before(async () => {
  srv = await startServer({ name: 'errors', args: ['--admin-token', TOKEN, '--max-body-bytes', '1M', '--max-sequences', '1',
                                                   '--max-sequence-bytes', '1M'] });
});
after(async () => { if (srv) await srv.stop(); });

const query = (shape, v = 0.25) => ({ name: 'query', datatype: 'FP32', shape,
                                       data: Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => ((i % 7) - 3) * v) });
const small = { parameters: { num_heads: 2 }, inputs: [query([2, 4])] };
const seen = new Set();
async function expectCode(code, method, req, opts, httpAnswer) {
  const e = await failure(srv.client, method, req, opts);
  assert.equal(e.code, code, `${method}: ${Status[e.code]} ${e.details}`);
  if (httpAnswer !== undefined) assert.equal(e.details, httpAnswer);
  seen.add(Status[code]);
  return e;
}

test('INVALID_ARGUMENT: a bad parameter, with the message HTTP answers', async () => {
  for (const params of [{ num_heads: 2, num_headz: 1 }, { num_heads: 3 }, { num_heads: 2, need_weights: 'yes' },
                        { num_heads: 2, query_position_offset: -5 }]) {
    const v2 = { ...small, parameters: params };
    const h = await httpInfer(srv, 'attention', v2, { binary: false });
    assert.equal(h.status, 400, JSON.stringify(params));
    await expectCode(Status.INVALID_ARGUMENT, 'ModelInfer', grpcRequest('attention', v2), {}, h.error);
  }
  // an input whose raw contents do not match its shape
  const r = grpcRequest('attention', small);
  r.raw_input_contents[0] = r.raw_input_contents[0].subarray(4);
  await expectCode(Status.INVALID_ARGUMENT, 'ModelInfer', r);
  assert.deepEqual(await unary(srv.client, 'ServerLive', {}), { live: true });
});

test('NOT_FOUND: an unknown model, an unknown sequence', async () => {
  const h = await httpInfer(srv, 'no-such-model', small);
  assert.equal(h.status, 404);
  await expectCode(Status.NOT_FOUND, 'ModelInfer', grpcRequest('no-such-model', small), {}, h.error);
  const step = { parameters: { num_heads: 2, sequence_id: 'never-started-31' }, inputs: [query([1, 4])] };
  const hs = await httpInfer(srv, 'attention', step, { binary: false });
  assert.equal(hs.status, 400);
  assert.match(hs.error, /does not exist/);
  await expectCode(Status.NOT_FOUND, 'ModelInfer', grpcRequest('attention', step), {}, hs.error);
});

test('UNAVAILABLE: a model that is not ready (unloaded)', async () => {
  const idx = (await srv.http('POST', '/v2/repository/index', { body: '{}', headers: { Authorization: `Bearer ${TOKEN}` } })).json();
  const m = idx[0].name;
  const meta = (await srv.http('GET', `/v2/models/${m}`)).json();
  const E = Number(meta.inputs[0].shape.at(-1));
  const v2 = { parameters: {}, inputs: [query([1, 2, E])] };
  await unary(srv.client, 'RepositoryModelUnload', { repository_name: '', model_name: m, parameters: {} }, { md: bearer() });
  const h = await httpInfer(srv, m, v2, { binary: false });
  assert.equal(h.status, 503, h.error);
  await expectCode(Status.UNAVAILABLE, 'ModelInfer', grpcRequest(m, v2), {}, h.error);
  await unary(srv.client, 'RepositoryModelLoad', { repository_name: '', model_name: m, parameters: {} }, { md: bearer() });
  const g = await unary(srv.client, 'ModelInfer', grpcRequest(m, v2));
  assert.ok(g.outputs.length >= 1);
});

test('RESOURCE_EXHAUSTED: a message over max_body_bytes, max_sequences, max_sequence_bytes', async () => {
  const big = { parameters: { num_heads: 2 }, inputs: [query([1, 80000, 4])] };   // 1.28 MB > 1M
  await expectCode(Status.RESOURCE_EXHAUSTED, 'ModelInfer', grpcRequest('attention', big));
  // two new sequences in one batch where one may live: HTTP's 503, RESOURCE_EXHAUSTED here
  const batch = (a, b) => ({ parameters: { num_heads: 1 },
                             inputs: [query([2, 1, 4]), { name: 'sequence_id', datatype: 'UINT64', shape: [2], data: [a, b] },
                                      { name: 'sequence_start', datatype: 'BOOL', shape: [2], data: [true, true] }] });
  const h = await httpInfer(srv, 'attention', batch(11, 12), { binary: false });
  assert.equal(h.status, 503, h.error);
  await expectCode(Status.RESOURCE_EXHAUSTED, 'ModelInfer', grpcRequest('attention', batch(11, 12)), {}, h.error);
  // a sequence that could never fit max_sequence_bytes: HTTP's 413
  const huge = (id) => ({ parameters: { num_heads: 1, sequence_id: id, sequence_start: true, need_weights: false },
                          inputs: [query([3072, 64], 0.01)] });
  const hh = await httpInfer(srv, 'attention', huge('huge-h'));
  assert.equal(hh.status, 413, hh.error);
  await expectCode(Status.RESOURCE_EXHAUSTED, 'ModelInfer', grpcRequest('attention', huge('huge-h')), {}, hh.error);
  assert.deepEqual(await unary(srv.client, 'ServerLive', {}), { live: true });
});

test('UNAUTHENTICATED: repository calls without the token or with a wrong one', async () => {
  const h = await srv.http('POST', '/v2/repository/index', { body: '{}' });
  assert.equal(h.status, 401);
  const calls = [['RepositoryIndex', { repository_name: '', ready: false }],
                 ['RepositoryModelLoad', { repository_name: '', model_name: 'x', parameters: {} }],
                 ['RepositoryModelUnload', { repository_name: '', model_name: 'x', parameters: {} }]];
  for (const [m, req] of calls) {
    await expectCode(Status.UNAUTHENTICATED, m, req);
    await expectCode(Status.UNAUTHENTICATED, m, req, { md: bearer(`${TOKEN}x`) });
    await expectCode(Status.UNAUTHENTICATED, m, req, { md: bearer('') });
  }
  // the message says what is missing (HTTP's names the header, gRPC's the metadata)
  const e = await failure(srv.client, 'RepositoryIndex', { repository_name: '', ready: false });
  assert.match(e.details, /authorization: Bearer/i);
  assert.match(h.json().error, /Authorization: Bearer/);
});

test('UNIMPLEMENTED: a method the service has not (a client from a proto of our own)', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'attn-grpc-proto-'));
  const file = path.join(dir, 'extra.proto');
  const text = fs.readFileSync(PROTO, 'utf8').replace('service GRPCInferenceService {',
    'service GRPCInferenceService {\n  rpc LogSettings(ServerLiveRequest) returns (ServerLiveResponse) {}\n'
    + '  rpc CudaSharedMemoryStatus(ModelReadyRequest) returns (ModelReadyResponse) {}');
  fs.writeFileSync(file, text);
  const { Service } = loadService(file);
  fs.rmSync(dir, { recursive: true, force: true });
  const c = makeClient(srv.grpcPort, { Service });
  try {
    for (const [m, req] of [['LogSettings', {}], ['CudaSharedMemoryStatus', { name: 'attention', version: '' }]]) {
      const e = await failure(c, m, req);
      assert.equal(e.code, Status.UNIMPLEMENTED, `${m}: ${e.details}`);
    }
    seen.add('UNIMPLEMENTED');
    assert.deepEqual(await unary(c, 'ServerLive', {}), { live: true });
  } finally {
    c.close();
  }
});

test('DEADLINE_EXCEEDED: heavy calls with short deadlines; the server then answers others', async () => {
  const heavy = grpcRequest('attention', heavyV2());
  const errs = await Promise.all([0, 1, 2, 3].map(() => failure(srv.client, 'ModelInfer', heavy, { deadlineMs: 150 })));
  for (const e of errs) assert.equal(e.code, Status.DEADLINE_EXCEEDED, e.details);
  seen.add('DEADLINE_EXCEEDED');
  const t0 = Date.now();
  assert.deepEqual(await unary(srv.client, 'ServerLive', {}, { deadlineMs: 20000 }), { live: true });
  const g = await unary(srv.client, 'ModelInfer', grpcRequest('attention', small), { deadlineMs: 60000 });
  assert.equal(g.outputs[0].name, 'output');
  console.log(`after 4 heavy calls past their deadline, a small ModelInfer answered in ${Date.now() - t0} ms`);
});

test('a call past its deadline stops computing: on one worker, the next call runs without it finishing', async () => {
  // One worker runs jobs in order: the heavy call (about a second of
  // computing, far more under the sanitizers) and then a small one. When
  // the small one is answered, the heavy one has ended; had it been
  // computed to the end, the model's statistics would count it a success.
  const one = await startServer({ name: 'errors-deadline', args: ['--workers', '1'] });
  try {
    const stats = async () => {
      const h = await one.http('GET', '/v2/models/attention/stats');
      const s = JSON.parse(h.text).model_stats[0].inference_stats;
      return Number(s.success.count);
    };
    const before = await stats();
    const heavy = failure(one.client, 'ModelInfer', grpcRequest('attention', heavyV2(4096)), { deadlineMs: 150 });
    await sleep(50);
    const g = await unary(one.client, 'ModelInfer', grpcRequest('attention', small), { deadlineMs: 120000 });
    assert.equal(g.outputs[0].name, 'output');
    assert.equal((await heavy).code, Status.DEADLINE_EXCEEDED);
    assert.equal(await stats() - before, 1, 'the heavy call was computed to the end past its deadline');
  } finally {
    await one.stop();
  }
});

test('PERMISSION_DENIED without admin_token; UNAVAILABLE for a call during the drain', async () => {
  const s2 = await startServer({ name: 'errors-no-token' });
  let stopped = false;
  try {
    const h = await s2.http('POST', '/v2/repository/index', { body: '{}' });
    assert.equal(h.status, 403);
    const e = await failure(s2.client, 'RepositoryIndex', { repository_name: '', ready: false }, { md: bearer() });
    assert.equal(e.code, Status.PERMISSION_DENIED, e.details);
    assert.equal(e.details, h.json().error);
    seen.add('PERMISSION_DENIED');
    // a heavy call in flight, SIGTERM: it finishes; a call after it is refused
    const inflight = unary(s2.client, 'ModelInfer', grpcRequest('attention', heavyV2()), { deadlineMs: 120000 });
    await sleep(500);
    s2.term();
    await sleep(300);
    const c = s2.client2();
    const late = await failure(c, 'ModelInfer', grpcRequest('attention', small), { deadlineMs: 10000 });
    c.close();
    assert.equal(late.code, Status.UNAVAILABLE, late.details);
    seen.add('UNAVAILABLE');
    const done = await inflight;
    assert.equal(done.outputs[0].name, 'output', 'the call in flight at SIGTERM is answered');
    stopped = true;
    await s2.stop();
  } finally {
    if (!stopped) await s2.stop().catch(() => {});
  }
});

test('every code above was seen', () => {
  const want = ['INVALID_ARGUMENT', 'NOT_FOUND', 'UNAVAILABLE', 'RESOURCE_EXHAUSTED', 'UNAUTHENTICATED', 'PERMISSION_DENIED',
                'UNIMPLEMENTED', 'DEADLINE_EXCEEDED'];
  console.log(`grpc status codes seen: ${[...seen].sort().join(', ')}`);
  assert.deepEqual(want.filter((c) => !seen.has(c)), []);
});
