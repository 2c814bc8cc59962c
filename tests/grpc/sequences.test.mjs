// Sequences over ModelStreamInfer: a script of steps (two sequences
// interleaved, a layer, a batch with sequence_id as a UINT64 input) equals
// the same steps over HTTP v2 on other ids (outputs and cache_length); a
// stream with a failing request in the middle goes on; Triton's forms of
// sequence_id (int64_param, uint64_param, string_param).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Status, compareAnswers, grpcOutputs, grpcRequest, httpInfer, parseV2Answer, startServer, streamAll, unary } from './harness.mjs';

let srv;
before(async () => { srv = await startServer({ name: 'sequences' }); });
after(async () => { if (srv) await srv.stop(); });

const rows = (n, seed) => Array.from({ length: n * 4 }, (_, i) => Math.fround(Math.sin(seed * 7 + i) * 1.5));
const q = (shape, seed) => ({ name: 'query', datatype: 'FP32', shape, data: rows(shape.slice(0, -1).reduce((a, b) => a * b, 1), seed) });

// The script: ids as 'A' and 'B', filled in per transport.
function script(A, B) {
  return [
    { parameters: { num_heads: 2, sequence_id: A, sequence_start: true, need_weights: true }, inputs: [q([3, 4], 1)] },
    { parameters: { num_heads: 2, sequence_id: B, sequence_start: true }, inputs: [q([2, 4], 2)] },
    { parameters: { num_heads: 2, sequence_id: A, need_weights: true }, inputs: [q([1, 4], 3)] },
    { parameters: { num_heads: 2, sequence_id: B, layer: 1, sequence_start: true }, inputs: [q([2, 4], 4)] },
    { parameters: { num_heads: 2, sequence_id: B, layer: 1, need_weights: false }, inputs: [q([1, 4], 5)] },
    { parameters: { num_heads: 2, sequence_id: A }, inputs: [q([2, 4], 6)] },
    // a batch of both at layer 0, the ids an input tensor
    { parameters: { num_heads: 2, need_weights: true },
      inputs: [q([2, 1, 4], 7), { name: 'sequence_id', datatype: 'UINT64', shape: [2], data: [A, B] }] },
    { parameters: { num_heads: 2, sequence_id: B, sequence_end: true }, inputs: [q([1, 4], 8)] },
    { parameters: { num_heads: 2, sequence_id: A, sequence_end: true }, inputs: [q([1, 4], 9)] },
  ];
}

// cache_length of an HTTP answer: the parameter, or the batch's output.
const httpCache = (h) => (h.head.parameters && h.head.parameters.cache_length !== undefined
  ? String(h.head.parameters.cache_length) : null);
const grpcCache = (r) => (r.parameters && r.parameters.cache_length ? String(r.parameters.cache_length.int64_param) : null);

test('a script of sequence steps over ModelStreamInfer equals the same steps over HTTP v2', async () => {
  const hs = [];
  for (const step of script(7101, 7102)) {
    const h = await httpInfer(srv, 'attention', step);
    assert.equal(h.status, 200, `HTTP step ${hs.length}: ${h.error}`);
    hs.push(h);
  }
  const reqs = script(8101, 8102).map((s, i) => grpcRequest('attention', s, { id: `step-${i}` }));
  const { responses, status } = await streamAll(srv.client, reqs);
  assert.equal(status.code, Status.OK, status.details);
  assert.equal(responses.length, hs.length);
  const bad = [];
  responses.forEach((r, i) => {
    if (r.error_message) { bad.push(`step ${i}: ${r.error_message}`); return; }
    const g = r.infer_response;
    if (g.id !== `step-${i}`) bad.push(`step ${i}: id ${g.id}`);
    bad.push(...compareAnswers(hs[i], g, `step ${i}`));
    if (grpcCache(g) !== httpCache(hs[i])) bad.push(`step ${i}: cache_length ${grpcCache(g)} vs ${httpCache(hs[i])}`);
  });
  assert.deepEqual(bad, []);
  // the lengths the script must have reached (so equal is not equal nothing)
  assert.deepEqual(hs.map(httpCache), ['3', '2', '4', '2', '3', '6', null, '4', '8']);
  const batch = grpcOutputs(responses[6].infer_response).outputs.cache_length;
  assert.ok(batch, 'the batch answers the output cache_length');
  assert.deepEqual([batch.bytes.readBigInt64LE(0), batch.bytes.readBigInt64LE(8)], [7n, 3n]);
});

test('the same steps as unary ModelInfer calls answer the same', async () => {
  const hs = [];
  for (const step of script('h-a-31', 'h-b-31').slice(0, 6)) hs.push(await httpInfer(srv, 'attention', step));
  let i = 0;
  for (const step of script('g-a-31', 'g-b-31').slice(0, 6)) {
    const g = await unary(srv.client, 'ModelInfer', grpcRequest('attention', step));
    assert.deepEqual(compareAnswers(hs[i], g, `step ${i}`), []);
    assert.equal(grpcCache(g), httpCache(hs[i]));
    i++;
  }
  // ended by a last step each (the end without a query is HTTP's own test)
  const end = (id) => ({ parameters: { num_heads: 2, sequence_id: id, sequence_end: true }, inputs: [q([1, 4], 30)] });
  for (const [hid, gid] of [['h-a-31', 'g-a-31'], ['h-b-31', 'g-b-31']]) {
    const h = await httpInfer(srv, 'attention', end(hid));
    const g = await unary(srv.client, 'ModelInfer', grpcRequest('attention', end(gid)));
    assert.deepEqual(compareAnswers(h, g, `end of ${gid}`), []);
    assert.equal(grpcCache(g), httpCache(h));
  }
  const gone = await httpInfer(srv, 'attention', { parameters: { num_heads: 2, sequence_id: 'g-a-31' }, inputs: [q([1, 4], 31)] });
  assert.equal(gone.status, 400, 'the sequence ended over gRPC is gone over HTTP too');
});

test('a stream with a failing request in the middle goes on', async () => {
  const ok = { parameters: { num_heads: 1 }, inputs: [q([2, 4], 11)] };
  const badModel = grpcRequest('no-such-model', ok);
  const badParam = grpcRequest('attention', { ...ok, parameters: { num_heads: 1, num_headz: 1 } });
  const hModel = await httpInfer(srv, 'no-such-model', ok);
  const hParam = await httpInfer(srv, 'attention', { ...ok, parameters: { num_heads: 1, num_headz: 1 } }, { binary: false });
  const { responses, status } = await streamAll(srv.client, [
    grpcRequest('attention', ok, { id: 'r1' }), badModel, grpcRequest('attention', ok, { id: 'r3' }), badParam,
    grpcRequest('attention', ok, { id: 'r5' })]);
  assert.equal(status.code, Status.OK, status.details);
  assert.deepEqual(responses.map((r) => r.error_message), ['', hModel.error, '', hParam.error, '']);
  assert.deepEqual(responses.map((r) => (r.infer_response ? r.infer_response.id : null)), ['r1', null, 'r3', null, 'r5']);
  const h = await httpInfer(srv, 'attention', ok);
  for (const i of [0, 2, 4]) assert.deepEqual(compareAnswers(h, responses[i].infer_response, `r${i + 1}`), []);
});

test("Triton's sequence_id forms: int64_param, uint64_param, string_param", async () => {
  const forms = [
    ['int64_param', { int64_param: '9137712000123' }, 9137712000123],
    ['uint64_param', { uint64_param: '18446744073709551615' }, 18446744073709551615n],
    ['string_param', { string_param: 'triton-7c1e9f02' }, 'triton-7c1e9f02'],
  ];
  for (const [form, param, httpId] of forms) {
    const steps = [{ parameters: { num_heads: 2, sequence_start: true }, inputs: [q([2, 4], 21)] },
                   { parameters: { num_heads: 2 }, inputs: [q([1, 4], 22)] },
                   { parameters: { num_heads: 2, sequence_end: true }, inputs: [q([1, 4], 23)] }];
    const reqs = steps.map((s) => {
      const r = grpcRequest('attention', s);
      r.parameters.sequence_id = param;
      return r;
    });
    const { responses, status } = await streamAll(srv.client, reqs);
    assert.equal(status.code, Status.OK, `${form}: ${status.details}`);
    assert.deepEqual(responses.map((r) => r.error_message), ['', '', ''], form);
    assert.deepEqual(responses.map((r) => grpcCache(r.infer_response)), ['2', '3', '4'], form);
    // the same id over HTTP (JSON: the id as the body's number or string), the same answers
    for (let i = 0; i < steps.length; i++) {
      const body = JSON.stringify({ ...steps[i], parameters: { ...steps[i].parameters, sequence_id: '@ID@', binary_data_output: true } })
        .replace('"@ID@"', typeof httpId === 'string' ? JSON.stringify(httpId) : String(httpId));
      const a = await srv.http('POST', '/v2/models/attention/infer', { body, headers: { 'Content-Type': 'application/json' } });
      const h = parseV2Answer(a);
      assert.equal(h.status, 200, `${form} step ${i} over HTTP: ${h.error}`);
      assert.deepEqual(compareAnswers(h, responses[i].infer_response, `${form} step ${i}`), []);
    }
  }
});
