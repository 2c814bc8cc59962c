// Every golden /attention case (tests/golden/*.json, then
// tests/golden_variants/*.json) sent as ModelInfer to
// the built-in model "attention" with raw_input_contents (little-endian) and
// the same case as HTTP v2 infer (binary), the answers equal bit for bit;
// then a few with typed contents (fp32_contents, bool_contents), and the
// golden expectations as a sanity check of both.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, compareAnswers, goldenCases, goldenV2, grpcRequest, httpInfer, startServer, unary } from './harness.mjs';

let srv;
before(async () => { srv = await startServer({ name: 'differential' }); });
after(async () => { if (srv) await srv.stop(); });

const cases = goldenCases();

// Largest difference of float32 bytes from the expected numbers, relative.
function worst(bytes, want) {
  const got = new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length));
  let w = 0;
  want.forEach((v, i) => { w = Math.max(w, Math.abs(got[i] - v) / Math.max(1, Math.abs(v))); });
  return got.length === want.length ? w : Infinity;
}

// Each case over HTTP v2 binary and over ModelInfer with raw contents:
// the differences (none when every answer is equal bit for bit), counted.
async function differential(list, what) {
  let equal = 0;
  const bad = [];
  for (const c of list) {
    const v2 = goldenV2(c.request);
    const h = await httpInfer(srv, 'attention', v2);
    if (h.status !== 200) { bad.push(`${c.file}: HTTP ${h.status} ${h.error}`); continue; }
    let g;
    try {
      g = await unary(srv.client, 'ModelInfer', grpcRequest('attention', v2, { id: c.file }));
    } catch (e) {
      bad.push(`${c.file}: gRPC ${e.code} ${e.details}`);
      continue;
    }
    const diffs = compareAnswers(h, g, c.file);
    if (g.id !== c.file) diffs.push(`${c.file}: id ${JSON.stringify(g.id)} not echoed`);
    if (g.model_name !== 'attention') diffs.push(`${c.file}: model_name ${g.model_name}`);
    // both against the golden numbers (loosely: HTTP's own tests hold the tolerances)
    for (const [name, t] of Object.entries(c.expected)) {
      const o = h.outputs[name];
      if (!o || worst(o.bytes, t.data) > 1e-3) diffs.push(`${c.file} ${name}: far from the golden values`);
    }
    if (diffs.length) bad.push(...diffs); else equal++;
  }
  console.log(`grpc differential (${what}): ${list.length} cases, ${equal} equal`);
  assert.deepEqual(bad, []);
  assert.equal(equal, list.length);
}

test('every golden case: ModelInfer (raw contents) equals HTTP v2 binary, bit for bit', async () => {
  assert.ok(cases.length >= 20, `only ${cases.length} golden cases found`);
  await differential(cases, 'tests/golden');
});

test('every golden variant case (RoPE, ALiBi, windows, soft-cap, ...): the same', async () => {
  const variants = goldenCases(path.join(ROOT, 'tests', 'golden_variants'));
  assert.ok(variants.length >= 20, `only ${variants.length} variant cases found`);
  await differential(variants, 'tests/golden_variants');
});

test('typed contents (fp32_contents, bool_contents) answer as raw contents do', async () => {
  const some = cases.filter((c) => c.request.attn_mask && typeof c.request.attn_mask !== 'string').slice(0, 2)
    .concat(cases.filter((c) => c.request.weights).slice(0, 2), cases.slice(0, 1));
  assert.ok(some.length >= 4);
  for (const c of some) {
    const v2 = goldenV2(c.request);
    const h = await httpInfer(srv, 'attention', v2);
    const g = await unary(srv.client, 'ModelInfer', grpcRequest('attention', v2, { typed: true }));
    assert.deepEqual(compareAnswers(h, g, `${c.file} (typed)`), []);
  }
  console.log(`grpc differential (typed contents): ${some.length} cases equal`);
});

test('HTTP JSON and HTTP binary agree with gRPC on a few cases', async () => {
  for (const c of cases.slice(0, 4)) {
    const v2 = goldenV2(c.request);
    const hj = await httpInfer(srv, 'attention', v2, { binary: false });
    assert.equal(hj.status, 200, hj.error);
    const g = await unary(srv.client, 'ModelInfer', grpcRequest('attention', v2));
    // JSON prints float32 so that it reads back to the same float32
    for (const [n, o] of Object.entries(hj.outputs)) {
      const go = g.outputs.findIndex((x) => x.name === n);
      assert.ok(go >= 0, `${c.file}: ${n} missing over gRPC`);
      assert.ok(o.bytes.equals(Buffer.from(g.raw_output_contents[go])), `${c.file} ${n}: JSON numbers differ from gRPC's`);
    }
  }
});
