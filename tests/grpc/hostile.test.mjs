// The hostile cases of the HTTP side where they apply to HTTP/2, each
// bounded, the server serving others after each: an oversized message, a
// flood of streams beyond max_connections, a client that never reads its
// answers (node's own http2 module: streams opened and never read), a
// connection dropped mid-call.
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { after, before, test } from 'node:test';
import { Status, failure, grpcFrame, grpcRequest, heavyV2, httpInfer, methods, rssOf, sleep, startServer,
         underSanitizer, unary } from './harness.mjs';

const MAX_CALLS = 8;
let srv;
before(async () => {
  srv = await startServer({ name: 'hostile', args: ['--max-connections', String(MAX_CALLS), '--max-body-bytes', '2M'] });
});
after(async () => { if (srv) await srv.stop(); });

const small = { parameters: { num_heads: 2 }, inputs: [{ name: 'query', datatype: 'FP32', shape: [2, 4], data: [1, 0, 0, 1, 0, 2, 1, 0] }] };

// Others are served: ServerLive, a small ModelInfer equal to HTTP's, GET /v2.
async function othersServed(what) {
  const t0 = Date.now();
  assert.deepEqual(await unary(srv.client, 'ServerLive', {}, { deadlineMs: 30000 }), { live: true }, what);
  const g = await unary(srv.client, 'ModelInfer', grpcRequest('attention', small), { deadlineMs: 30000 });
  const h = await httpInfer(srv, 'attention', small);
  assert.ok(Buffer.from(g.raw_output_contents[0]).equals(h.outputs.output.bytes), what);
  assert.equal((await srv.http('GET', '/v2')).status, 200, what);
  return Date.now() - t0;
}

// A raw HTTP/2 session to the gRPC port and a call on it (never read unless asked).
function session() {
  const s = http2.connect(`http://127.0.0.1:${srv.grpcPort}`);
  s.on('error', () => {});
  return s;
}
function rawCall(s, method) {
  const st = s.request({ ':method': 'POST', ':path': `/inference.GRPCInferenceService/${method}`,
                         'content-type': 'application/grpc', te: 'trailers' });
  st.on('error', () => {});
  return st;
}
const inferFrame = (v2) => grpcFrame(methods.ModelInfer.requestSerialize(grpcRequest('attention', v2)));
const inferenceCount = async () => Number((await unary(srv.client, 'ModelStatistics', { name: 'attention', version: '' }))
  .model_stats[0].inference_count);

test('an oversized message: RESOURCE_EXHAUSTED (unary and in a stream), others served', async () => {
  const big = { parameters: { num_heads: 2 }, inputs: [{ name: 'query', datatype: 'FP32', shape: [1, 160000, 4],
                                                          data: new Array(640000).fill(0.5) }] };   // 2.56 MB
  const e = await failure(srv.client, 'ModelInfer', grpcRequest('attention', big));
  assert.equal(e.code, Status.RESOURCE_EXHAUSTED, e.details);
  const st = await new Promise((resolve) => {
    const call = srv.client.ModelStreamInfer({ deadline: Date.now() + 30000 });
    call.on('data', () => {});
    call.on('error', () => {});
    call.on('status', resolve);
    call.write(grpcRequest('attention', small));
    call.write(grpcRequest('attention', big));
    call.end();
  });
  assert.equal(st.code, Status.RESOURCE_EXHAUSTED, st.details);
  await othersServed('after an oversized message');
});

test(`a flood of streams beyond max_connections (${MAX_CALLS}): the excess RESOURCE_EXHAUSTED, the others answered`, async () => {
  const N = 3 * MAX_CALLS;
  const client = srv.client2();
  const calls = Array.from({ length: N }, (_, i) => {
    const call = client.ModelStreamInfer({ deadline: Date.now() + 60000 });
    const r = { call, answered: false, status: null };
    r.done = new Promise((resolve) => {
      call.on('data', (m) => { r.answered = !m.error_message; });
      call.on('error', () => {});
      call.on('status', (s) => { r.status = s; resolve(); });
    });
    r.first = new Promise((resolve) => { call.once('data', resolve); call.once('status', resolve); });
    call.write(grpcRequest('attention', small, { id: `flood-${i}` }));
    return r;
  });
  await Promise.all(calls.map((c) => c.first));   // each answered once, or ended
  const refused = calls.filter((c) => c.status);
  const open = calls.filter((c) => !c.status);
  for (const c of refused) assert.equal(c.status.code, Status.RESOURCE_EXHAUSTED, c.status.details);
  console.log(`flood: ${N} streams, ${open.length} open and answered, ${refused.length} RESOURCE_EXHAUSTED`);
  assert.ok(open.length >= 1 && open.length <= MAX_CALLS, `${open.length} streams open`);
  assert.ok(open.every((c) => c.answered));
  assert.ok(refused.length >= N - MAX_CALLS);
  for (const c of open) c.call.end();
  await Promise.all(calls.map((c) => c.done));
  for (const c of open) assert.equal(c.status.code, Status.OK, c.status.details);
  client.close();
  await othersServed('after the flood');
});

test('a client that never reads its answers: the server holds little, makes little progress, serves others', async () => {
  const before = await inferenceCount();
  const rss0 = rssOf(srv.pid);
  const s = session();
  // a stream of 40 requests whose answers are 4 MB each, and 3 unary calls of 16 MB answers, none read
  const frame = inferFrame(heavyV2(512, 64, true));
  const st = rawCall(s, 'ModelStreamInfer');
  st.pause();
  for (let i = 0; i < 40; i++) st.write(frame);
  const unaries = [0, 1, 2].map(() => {
    const u = rawCall(s, 'ModelInfer');
    u.pause();
    u.end(inferFrame(heavyV2(1024, 64, true)));
    return u;
  });
  await sleep(4000);
  const done = await inferenceCount() - before;
  const grown = rssOf(srv.pid) - rss0;
  console.log(`never read: ${done} of 43 inferences done, server RSS grew ${(grown / 1048576).toFixed(1)} MB`);
  assert.ok(done <= 3 + 4, `${done} inferences done for a client that reads nothing`);
  if (!underSanitizer(srv.pid)) assert.ok(grown < 150 * 1048576, `RSS grew ${grown} bytes`);
  const ms = await othersServed('while a client reads nothing');
  console.log(`never read: others served in ${ms} ms`);
  for (const u of unaries) u.close(http2.constants.NGHTTP2_CANCEL);
  st.close(http2.constants.NGHTTP2_CANCEL);
  s.destroy();
  await othersServed('after the client that reads nothing went');
});

test('a connection dropped mid-call: the server serves the next', async () => {
  for (const method of ['ModelInfer', 'ModelStreamInfer']) {
    const before = await inferenceCount();
    const s = session();
    const st = rawCall(s, method);
    st.on('data', () => {});
    st.write(inferFrame(heavyV2()));
    if (method === 'ModelStreamInfer') st.write(inferFrame(heavyV2()));
    else st.end();
    await sleep(300);
    s.destroy();
    const ms = await othersServed(`after a dropped ${method}`);
    console.log(`dropped ${method}: the next calls answered in ${ms} ms (${await inferenceCount() - before} inferences since)`);
  }
  // grpc-js cancelling a heavy call
  const call = srv.client.ModelInfer(grpcRequest('attention', heavyV2()), () => {});
  await sleep(300);
  call.cancel();
  await othersServed('after a cancelled call');
});
