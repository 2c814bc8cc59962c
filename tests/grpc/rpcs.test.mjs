// Every RPC of inference.GRPCInferenceService against the HTTP answers of
// the same server (GET /v2, /v2/models/<m>, .../config, .../stats, POST
// /v2/repository/index), field by field.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Status, TOKEN, bearer, codeForHttp, compareAnswers, failure, grpcRequest, httpInfer, startServer, streamAll, unary } from './harness.mjs';

let srv;
before(async () => { srv = await startServer({ name: 'rpcs', args: ['--admin-token', TOKEN] }); });
after(async () => { if (srv) await srv.stop(); });

const num = (xs) => xs.map(Number);
const models = async () => ['attention', ...(await srv.http('POST', '/v2/repository/index', {
  body: '{}', headers: { Authorization: `Bearer ${TOKEN}` } })).json().map((m) => m.name)];

test('ServerLive and ServerReady are true, as GET /v2/health/live and ready answer 200', async () => {
  assert.equal((await srv.http('GET', '/v2/health/live')).status, 200);
  assert.equal((await srv.http('GET', '/v2/health/ready')).status, 200);
  assert.deepEqual(await unary(srv.client, 'ServerLive', {}), { live: true });
  assert.deepEqual(await unary(srv.client, 'ServerReady', {}), { ready: true });
});

test('ServerMetadata equals GET /v2', async () => {
  const h = (await srv.http('GET', '/v2')).json();
  const g = await unary(srv.client, 'ServerMetadata', {});
  assert.deepEqual({ name: g.name, version: g.version, extensions: g.extensions },
                   { name: h.name, version: h.version, extensions: h.extensions });
});

test('ModelReady: every model true as over HTTP; an unknown one NOT_FOUND', async () => {
  for (const m of await models()) {
    const h = await srv.http('GET', `/v2/models/${m}/ready`);
    assert.equal(h.status, 200, m);
    assert.deepEqual(await unary(srv.client, 'ModelReady', { name: m, version: '' }), { ready: true }, m);
  }
  assert.equal((await srv.http('GET', '/v2/models/no-such-model/ready')).status, 404);
  const e = await failure(srv.client, 'ModelReady', { name: 'no-such-model', version: '' });
  assert.equal(e.code, Status.NOT_FOUND, e.details);
});

test('ModelMetadata equals GET /v2/models/<name> for every model', async () => {
  for (const m of await models()) {
    const h = (await srv.http('GET', `/v2/models/${m}`)).json();
    const g = await unary(srv.client, 'ModelMetadata', { name: m, version: '' });
    const tensors = (ts) => ts.map((t) => ({ name: t.name, datatype: t.datatype, shape: num(t.shape) }));
    assert.equal(g.name, h.name);
    assert.deepEqual(g.versions, h.versions, m);
    assert.equal(g.platform, h.platform, m);
    assert.deepEqual(tensors(g.inputs), tensors(h.inputs), m);
    assert.deepEqual(tensors(g.outputs), tensors(h.outputs), m);
  }
  const h = await srv.http('GET', '/v2/models/no-such-model');
  const e = await failure(srv.client, 'ModelMetadata', { name: 'no-such-model', version: '' });
  assert.equal(e.code, Status.NOT_FOUND);
  assert.equal(e.details, h.json().error);
});

test('ModelConfig equals GET /v2/models/<name>/config for every model', async () => {
  for (const m of await models()) {
    const h = (await srv.http('GET', `/v2/models/${m}/config`)).json();
    const { config: c } = await unary(srv.client, 'ModelConfig', { name: m, version: '' });
    const ios = (xs, opt) => xs.map((x) => ({ name: x.name, data_type: x.data_type, dims: num(x.dims),
                                             ...(opt ? { optional: Boolean(x.optional) } : {}) }));
    assert.equal(c.name, h.name, m);
    assert.equal(c.platform, h.platform, m);
    assert.equal(c.backend, h.backend, m);
    assert.equal(c.max_batch_size, h.max_batch_size, m);
    assert.deepEqual(ios(c.input, true), ios(h.input, true), m);
    assert.deepEqual(ios(c.output, false), ios(h.output, false), m);
    const seq = h.sequence_batching ? String(h.sequence_batching.max_sequence_idle_microseconds) : null;
    assert.equal(c.sequence_batching ? c.sequence_batching.max_sequence_idle_microseconds : null, seq, m);
    const params = Object.fromEntries(Object.entries(c.parameters).map(([k, v]) => [k, v.string_value]));
    const hparams = Object.fromEntries(Object.entries(h.parameters || {}).map(([k, v]) => [k, v.string_value]));
    assert.deepEqual(params, hparams, m);
  }
});

// HTTP's statistics (numbers) in the gRPC form (uint64 as strings).
function statsOfHttp(s) {
  const d = (x) => ({ count: String(x.count), ns: String(x.ns) });
  return { name: s.name, version: s.version, last_inference: String(s.last_inference),
           inference_count: String(s.inference_count), execution_count: String(s.execution_count),
           inference_stats: Object.fromEntries(Object.entries(s.inference_stats).map(([k, v]) => [k, d(v)])),
           batch_stats: s.batch_stats.map((b) => ({ batch_size: String(b.batch_size), compute_input: d(b.compute_input),
                                                    compute_infer: d(b.compute_infer), compute_output: d(b.compute_output) })) };
}
// An absent StatisticDuration reads as zeros, as every client reads it.
const ZERO = { count: '0', ns: '0' };
function statsOfGrpc(s) {
  const { memory_usage, response_stats, ...rest } = s;   // HTTP has neither
  const is = rest.inference_stats || {};
  rest.inference_stats = Object.fromEntries(['success', 'fail', 'queue', 'compute_input', 'compute_infer', 'compute_output',
                                             'cache_hit', 'cache_miss'].map((k) => [k, is[k] || ZERO]));
  rest.batch_stats = rest.batch_stats.map((b) => ({ batch_size: b.batch_size, compute_input: b.compute_input || ZERO,
                                                    compute_infer: b.compute_infer || ZERO, compute_output: b.compute_output || ZERO }));
  return rest;
}

test('ModelStatistics equals GET .../stats, before and after inferences over gRPC', async () => {
  const v2 = { parameters: { num_heads: 1 }, inputs: [{ name: 'query', datatype: 'FP32', shape: [2, 2], data: [1, 0, 0, 1] }] };
  for (let round = 0; round < 2; round++) {
    for (const m of await models()) {
      const h = (await srv.http('GET', `/v2/models/${m}/stats`)).json();
      const g = await unary(srv.client, 'ModelStatistics', { name: m, version: '' });
      assert.equal(g.model_stats.length, 1, m);
      assert.deepEqual(statsOfGrpc(g.model_stats[0]), statsOfHttp(h.model_stats[0]), `${m}, round ${round}`);
    }
    const all = (await srv.http('GET', '/v2/models/stats')).json();
    const gall = await unary(srv.client, 'ModelStatistics', { name: '', version: '' });
    assert.deepEqual(gall.model_stats.map(statsOfGrpc), all.model_stats.map(statsOfHttp));
    for (let i = 0; i < 3; i++) await unary(srv.client, 'ModelInfer', grpcRequest('attention', v2));
  }
  const { model_stats: [s] } = await unary(srv.client, 'ModelStatistics', { name: 'attention', version: '' });
  assert.equal(s.inference_count, '6', 'the six ModelInfer calls are counted');
});

const indexOf = async () => (await srv.http('POST', '/v2/repository/index', {
  body: '{}', headers: { Authorization: `Bearer ${TOKEN}` } })).json();
const grpcIndex = async () => (await unary(srv.client, 'RepositoryIndex', { repository_name: '', ready: false },
                                           { md: bearer() })).models;

test('RepositoryIndex equals POST /v2/repository/index', async () => {
  assert.deepEqual(await grpcIndex(), await indexOf());
});

test('RepositoryModelUnload and RepositoryModelLoad change the model as over HTTP', async () => {
  const [first] = await indexOf();
  assert.ok(first, 'the repository models/ has models');
  const m = first.name;
  await unary(srv.client, 'RepositoryModelUnload', { repository_name: '', model_name: m, parameters: {} }, { md: bearer() });
  const unloaded = await indexOf();
  assert.notEqual(unloaded.find((x) => x.name === m).state, 'READY');
  assert.deepEqual(await grpcIndex(), unloaded);
  assert.equal((await srv.http('GET', `/v2/models/${m}/ready`)).status === 200, false);
  // not ready: ready false, or the HTTP 503 as UNAVAILABLE
  const r = await unary(srv.client, 'ModelReady', { name: m, version: '' }).catch((e) => ({ code: e.code }));
  assert.ok(r.ready === false || r.code === Status.UNAVAILABLE, JSON.stringify(r));
  await unary(srv.client, 'RepositoryModelLoad', { repository_name: '', model_name: m, parameters: {} }, { md: bearer() });
  const loaded = await indexOf();
  assert.equal(loaded.find((x) => x.name === m).state, 'READY');
  assert.deepEqual(await grpcIndex(), loaded);
  assert.deepEqual(await unary(srv.client, 'ModelReady', { name: m, version: '' }), { ready: true });
  // a load of a model the repository has not: HTTP's message, the code of its status
  const h = await srv.http('POST', '/v2/repository/models/no-such-model/load', { headers: { Authorization: `Bearer ${TOKEN}` } });
  const e = await failure(srv.client, 'RepositoryModelLoad', { repository_name: '', model_name: 'no-such-model', parameters: {} },
                          { md: bearer() });
  assert.equal(e.code, codeForHttp(h.status), `HTTP ${h.status}: ${e.details}`);
  assert.equal(e.details, h.json().error);
});

test('ModelInfer and ModelStreamInfer answer as HTTP v2 infer', async () => {
  const v2 = { parameters: { num_heads: 2, need_weights: true },
               inputs: [{ name: 'query', datatype: 'FP32', shape: [1, 3, 4], data: [1, 0, 0, 1, 0, 2, 1, 0, 1, 1, 0.5, -0.5] }] };
  const h = await httpInfer(srv, 'attention', v2);
  assert.equal(h.status, 200, h.error);
  const g = await unary(srv.client, 'ModelInfer', grpcRequest('attention', v2, { id: 'rpc-1' }));
  assert.equal(g.model_name, 'attention');
  assert.equal(g.id, 'rpc-1');
  assert.deepEqual(compareAnswers(h, g, 'ModelInfer'), []);
  const s = await streamAll(srv.client, [grpcRequest('attention', v2, { id: 's-1' }), grpcRequest('attention', v2, { id: 's-2' })]);
  assert.equal(s.status.code, Status.OK, s.status.details);
  assert.deepEqual(s.responses.map((r) => [r.error_message, r.infer_response && r.infer_response.id]), [['', 's-1'], ['', 's-2']]);
  for (const r of s.responses) assert.deepEqual(compareAnswers(h, r.infer_response, 'ModelStreamInfer'), []);
});
