// The plumbing of the gRPC tests (tests/grpc/*.test.mjs, run by
// scripts/grpc-test.sh under node:test): a real attention-server on free
// loopback ports (HTTP and gRPC), a client of the service made at run time
// from proto/grpc_service.proto by @grpc/grpc-js and @grpc/proto-loader (a
// client nobody here wrote), HTTP requests to the same server, and the
// golden /attention cases written as v2 requests for both transports.
//
//   const srv = await startServer({ name: 'rpcs', args: ['--admin-token', TOKEN] });
//   const res = await unary(srv.client, 'ServerLive', {});
//   const h = await srv.http('GET', '/v2');
//   await srv.stop();   // SIGTERM, exit status 0, no sanitizer report in its log
//
// Environment: ATTN_SERVER (default build/attention-server). The server's
// stderr goes to build/grpc/<name>.log.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const SERVER = path.resolve(ROOT, process.env.ATTN_SERVER || 'build/attention-server');
export const PROTO = path.join(ROOT, 'proto', 'grpc_service.proto');
export const OUT = path.join(ROOT, 'build', 'grpc');
export const TOKEN = 'grpc-test-admin-token-0123456789';
export const LOADER_OPTIONS = { keepCase: true, longs: String, enums: String, defaults: true };
export const CLIENT_OPTIONS = { 'grpc.max_receive_message_length': -1, 'grpc.max_send_message_length': -1,
                                'grpc.use_local_subchannel_pool': 1 };
export const { status: Status } = grpc;
export { grpc };

const live = new Set();   // servers not stopped yet: killed when node exits
process.on('exit', () => { for (const c of live) if (c.exitCode === null) c.kill('SIGKILL'); });

// The service's client class from a .proto file (the repository's by default).
export function loadService(file = PROTO) {
  const def = protoLoader.loadSync(file, LOADER_OPTIONS);
  return { def, Service: grpc.loadPackageDefinition(def).inference.GRPCInferenceService,
           methods: def['inference.GRPCInferenceService'] };
}
const proto = loadService();
export const methods = proto.methods;   // requestSerialize / responseDeserialize per method

export function makeClient(port, { ca = null, Service = proto.Service, options = {} } = {}) {
  const creds = ca ? grpc.credentials.createSsl(ca) : grpc.credentials.createInsecure();
  return new Service(`127.0.0.1:${port}`, creds, { ...CLIENT_OPTIONS, ...options });
}

// A free loopback TCP port (closed again: the server binds it next).
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export { sleep };

// Metadata from a plain object ({authorization: 'Bearer …'}).
export function metadata(obj = {}) {
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(obj)) md.set(k, v);
  return md;
}
export const bearer = (token = TOKEN) => metadata({ authorization: `Bearer ${token}` });

// A unary call as a promise: the response, or a rejection with the
// ServiceError (code, details). deadlineMs 0: none.
export function unary(client, method, req, { md = new grpc.Metadata(), deadlineMs = 30000 } = {}) {
  const opts = deadlineMs ? { deadline: Date.now() + deadlineMs } : {};
  return new Promise((resolve, reject) => {
    client[method](req, md, opts, (err, res) => (err ? reject(err) : resolve(res)));
  });
}

// The gRPC code of an HTTP error status, as the service maps them.
export function codeForHttp(httpStatus) {
  return { 400: Status.INVALID_ARGUMENT, 401: Status.UNAUTHENTICATED, 403: Status.PERMISSION_DENIED, 404: Status.NOT_FOUND,
           408: Status.DEADLINE_EXCEEDED, 413: Status.RESOURCE_EXHAUSTED, 429: Status.RESOURCE_EXHAUSTED,
           501: Status.UNIMPLEMENTED, 503: Status.UNAVAILABLE }[httpStatus] ?? Status.INTERNAL;
}

// The error of a call that must fail: {code, details}; a success rejects.
export async function failure(client, method, req, opts) {
  try {
    await unary(client, method, req, opts);
  } catch (e) {
    return e;
  }
  throw new Error(`${method} succeeded where it should have failed`);
}

// ModelStreamInfer: writes every request, half-closes, and collects the
// answers in order with the final status ({responses, status}).
export function streamAll(client, reqs, { md = new grpc.Metadata(), deadlineMs = 60000 } = {}) {
  return new Promise((resolve, reject) => {
    const call = client.ModelStreamInfer(md, { deadline: Date.now() + deadlineMs });
    const responses = [];
    let status = null, ended = false;
    const done = () => { if (status && ended) resolve({ responses, status }); };
    call.on('data', (r) => responses.push(r));
    call.on('status', (s) => { status = s; done(); });
    call.on('end', () => { ended = true; done(); });
    call.on('error', (e) => { if (!status) status = { code: e.code, details: e.details }; ended = true; done(); });
    for (const r of reqs) call.write(r);
    call.end();
    setTimeout(() => reject(new Error('ModelStreamInfer: no end')), deadlineMs + 5000).unref();
  });
}

// ---------------------------------------------------------------------------
// The server

// Starts build/attention-server (ATTN_SERVER) on 127.0.0.1 with a free HTTP
// port (its "listening on" line) and a free gRPC port (grpc_port from the
// environment), waits until both answer, and returns the handle: ports,
// client, http(), log(), pid, stop(). args are extra flags, env extra
// variables; tls {cert, key, ca} serves HTTPS and gRPC over TLS.
export async function startServer({ name = 'server', args = [], env = {}, tls = null } = {}) {
  if (!fs.existsSync(SERVER)) throw new Error(`${SERVER} does not exist; run \`make build/attention-server\``);
  fs.mkdirSync(OUT, { recursive: true });
  const grpcPort = await freePort();
  const tlsArgs = tls ? ['--tls-cert-file', tls.cert, '--tls-key-file', tls.key] : [];
  const child = spawn(SERVER, ['--port', '0', '--bind', '127.0.0.1', ...tlsArgs, ...args], {
    cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, ATTN_GRPC_PORT: String(grpcPort), ATTN_GRPC_ADDRESS: '127.0.0.1', ...env },
  });
  live.add(child);
  const logFile = fs.createWriteStream(path.join(OUT, `${name}.log`));
  let text = '';
  child.stderr.on('data', (d) => { logFile.write(d); text += d; });   // always drained
  const exited = new Promise((r) => child.once('exit', (code, sig) => { live.delete(child); r({ code, sig }); }));
  const scheme = tls ? 'https' : 'http';
  const httpPort = await new Promise((resolve, reject) => {
    const t0 = Date.now();
    const poll = setInterval(() => {
      const m = text.match(new RegExp(`listening on ${scheme}://127\\.0\\.0\\.1:(\\d+)`));
      if (m) { clearInterval(poll); resolve(Number(m[1])); }
      else if (child.exitCode !== null || Date.now() - t0 > 15000) {
        clearInterval(poll);
        child.kill('SIGKILL');
        reject(new Error(`the server did not listen (exit ${child.exitCode}):\n${text}`));
      }
    }, 20);
  });
  const ca = tls ? fs.readFileSync(tls.cert) : null;
  const client = makeClient(grpcPort, { ca });
  const srv = {
    name, httpPort, grpcPort, pid: child.pid, child, client, ca, exited,
    log: () => text,
    http: (method, p, opts = {}) => httpRequest(httpPort, method, p, { ...opts, ca }),
    client2: (opts) => makeClient(grpcPort, { ca, ...opts }),
    stop: (opts) => stopServer(srv, opts),
    terminated: false,
    term: () => { if (!srv.terminated) { srv.terminated = true; child.kill('SIGTERM'); } },
  };
  // gRPC: ServerLive answers (the transport starts beside HTTP)
  const t0 = Date.now();
  for (;;) {
    try {
      const r = await unary(client, 'ServerLive', {}, { deadlineMs: 1000 });
      if (r.live) break;
    } catch (e) {
      if (Date.now() - t0 > 15000 || child.exitCode !== null) {
        child.kill('SIGKILL');
        throw new Error(`gRPC on 127.0.0.1:${grpcPort} did not answer ServerLive in 15 s (${e.code} ${e.details})`);
      }
      await sleep(100);
    }
  }
  return srv;
}

// SIGTERM, then the exit within timeoutMs: status 0 and no sanitizer report
// in the log, else it throws (the server is killed in any case).
export async function stopServer(srv, { timeoutMs = 30000, expectCode = 0 } = {}) {
  srv.client.close();
  if (srv.child.exitCode === null && srv.child.signalCode === null) srv.term();
  let timer;
  const r = await Promise.race([srv.exited, new Promise((res) => { timer = setTimeout(() => res(null), timeoutMs); })]);
  clearTimeout(timer);
  if (!r) {
    srv.child.kill('SIGKILL');
    throw new Error(`${srv.name}: the server did not exit within ${timeoutMs} ms of SIGTERM`);
  }
  if (/Sanitizer|runtime error:/.test(srv.log())) throw new Error(`${srv.name}: sanitizer report in build/grpc/${srv.name}.log`);
  if (r.code !== expectCode) throw new Error(`${srv.name}: exit ${r.code} (signal ${r.sig}), expected ${expectCode}`);
  return r;
}

// VmRSS of a process in bytes.
export function rssOf(pid) {
  const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/);
  return m ? Number(m[1]) * 1024 : 0;
}
export const underSanitizer = (pid) => /libasan|libtsan/.test(fs.readFileSync(`/proc/${pid}/maps`, 'utf8'));

// ---------------------------------------------------------------------------
// HTTP to the same server

export function httpRequest(port, method, p, { body = null, headers = {}, ca = null, timeoutMs = 60000 } = {}) {
  const mod = ca ? https : http;
  return new Promise((resolve, reject) => {
    const req = mod.request({ host: '127.0.0.1', port, method, path: p, headers, ca, timeout: timeoutMs,
                              agent: false }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const buf = Buffer.concat(chunks);
        const json = () => JSON.parse(buf.toString('utf8'));
        resolve({ status: res.statusCode, headers: res.headers, body: buf, json, text: buf.toString('utf8') });
      });
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${p}: no answer in ${timeoutMs} ms`)));
    req.on('error', reject);
    if (body !== null) req.write(body);
    req.end();
  });
}

// A v2 infer over HTTP: JSON (data in the JSON) or binary (every input and
// output binary). Returns {status, error, head, outputs: {name: {datatype,
// shape, bytes}}, order: [names]}.
export async function httpInfer(srv, model, v2, { binary = true, headers = {} } = {}) {
  let body, hdrs = { 'Content-Type': 'application/json', ...headers };
  if (binary) {
    const bins = [];
    const head = { ...v2, parameters: { ...(v2.parameters || {}), binary_data_output: true },
                   inputs: (v2.inputs || []).map((t) => {
                     const b = tensorBytes(t);
                     bins.push(b);
                     const { data, ...rest } = t;
                     return { ...rest, parameters: { ...(t.parameters || {}), binary_data_size: b.length } };
                   }) };
    const h = Buffer.from(JSON.stringify(head));
    body = Buffer.concat([h, ...bins]);
    hdrs = { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': String(h.length), ...headers };
  } else {
    body = Buffer.from(JSON.stringify(v2));
  }
  const a = await srv.http('POST', `/v2/models/${model}/infer`, { body, headers: hdrs });
  return parseV2Answer(a);
}

export function parseV2Answer(a) {
  const hl = a.headers['inference-header-content-length'];
  const jl = hl ? Number(hl) : a.body.length;
  const head = JSON.parse(a.body.subarray(0, jl).toString('utf8'));
  if (a.status !== 200) return { status: a.status, error: head.error, head };
  let at = jl;
  const outputs = {}, order = [];
  for (const o of head.outputs || []) {
    const n = o.parameters && o.parameters.binary_data_size;
    let bytes;
    if (n !== undefined) { bytes = a.body.subarray(at, at + n); at += n; }
    else bytes = tensorBytes({ datatype: o.datatype, data: o.data.flat(Infinity) });
    outputs[o.name] = { datatype: o.datatype, shape: o.shape, bytes: Buffer.from(bytes) };
    order.push(o.name);
  }
  if (hl && at !== a.body.length) throw new Error(`binary outputs fill ${at} of ${a.body.length} bytes`);
  return { status: 200, head, outputs, order };
}

// ---------------------------------------------------------------------------
// Tensors and requests

// The little-endian bytes of a v2 tensor {datatype, data (flat)}.
export function tensorBytes({ datatype, data }) {
  const flat = data.flat(Infinity);
  const size = { BOOL: 1, INT8: 1, UINT8: 1, INT32: 4, UINT32: 4, FP32: 4, INT64: 8, UINT64: 8, FP64: 8 }[datatype];
  const b = Buffer.alloc(flat.length * size);
  flat.forEach((v, i) => {
    switch (datatype) {
      case 'BOOL': b.writeUInt8(v ? 1 : 0, i); break;
      case 'FP32': b.writeFloatLE(typeof v === 'string' ? Number(v.replace('inf', 'Infinity')) : v, 4 * i); break;
      case 'FP64': b.writeDoubleLE(v, 8 * i); break;
      case 'INT32': b.writeInt32LE(v, 4 * i); break;
      case 'INT64': b.writeBigInt64LE(BigInt(v), 8 * i); break;
      case 'UINT64': b.writeBigUInt64LE(BigInt(v), 8 * i); break;
      default: throw new Error(`tensorBytes: ${datatype}`);
    }
  });
  return b;
}

// Integer options are int64_param, other numbers double_param.
const INTEGER_PARAMS = new Set(['num_heads', 'num_kv_heads', 'head_dim', 'query_position_offset', 'window_left',
                                'window_right', 'layer', 'top_k', 'max_tokens']);
export function inferParameter(name, v) {
  if (typeof v === 'boolean') return { bool_param: v };
  if (typeof v === 'string') return { string_param: v };
  if (typeof v === 'bigint') return { uint64_param: v.toString() };
  if (Number.isInteger(v) && (INTEGER_PARAMS.has(name) || name === 'sequence_id')) return { int64_param: String(v) };
  return { double_param: v };
}

// A ModelInferRequest of a v2 request ({parameters, inputs: [{name,
// datatype, shape, data}]}): raw_input_contents (little-endian) or, typed,
// fp32_contents / bool_contents / uint64_contents.
export function grpcRequest(model, v2, { typed = false, id = '' } = {}) {
  const parameters = {};
  for (const [k, v] of Object.entries(v2.parameters || {})) parameters[k] = inferParameter(k, v);
  const inputs = [], raw = [];
  for (const t of v2.inputs || []) {
    const inp = { name: t.name, datatype: t.datatype, shape: t.shape.map(String), parameters: {} };
    if (typed) {
      const flat = t.data.flat(Infinity);
      const key = { FP32: 'fp32_contents', BOOL: 'bool_contents', UINT64: 'uint64_contents', INT64: 'int64_contents',
                    FP64: 'fp64_contents' }[t.datatype];
      inp.contents = { [key]: key === 'fp32_contents' ? flat.map((v) => (typeof v === 'string' ? -Infinity : v))
                                 : key.endsWith('64_contents') ? flat.map(String) : flat };
    } else {
      raw.push(tensorBytes(t));
    }
    inputs.push(inp);
  }
  return { model_name: model, model_version: '', id, parameters, inputs, outputs: [], raw_input_contents: raw };
}

// {name: {datatype, shape (numbers), bytes}} of a ModelInferResponse.
export function grpcOutputs(res) {
  const outputs = {}, order = [];
  res.outputs.forEach((o, i) => {
    outputs[o.name] = { datatype: o.datatype, shape: o.shape.map(Number), bytes: Buffer.from(res.raw_output_contents[i] || []) };
    order.push(o.name);
  });
  return { outputs, order };
}

// Differences between an HTTP answer and a gRPC answer ([] when equal bit
// for bit: the same outputs, datatypes, shapes and bytes).
export function compareAnswers(h, g, label) {
  const bad = [];
  const go = grpcOutputs(g);
  if (go.order.join() !== h.order.join()) bad.push(`${label}: outputs ${go.order} over gRPC, ${h.order} over HTTP`);
  for (const n of h.order) {
    const a = h.outputs[n], b = go.outputs[n];
    if (!b) continue;
    if (a.datatype !== b.datatype) bad.push(`${label} ${n}: datatype ${b.datatype} vs ${a.datatype}`);
    if (a.shape.join() !== b.shape.join()) bad.push(`${label} ${n}: shape [${b.shape}] vs [${a.shape}]`);
    if (!a.bytes.equals(b.bytes)) {
      let i = 0;
      while (i < Math.min(a.bytes.length, b.bytes.length) && a.bytes[i] === b.bytes[i]) i++;
      bad.push(`${label} ${n}: ${b.bytes.length} bytes vs ${a.bytes.length}, first difference at byte ${i}`);
    }
  }
  return bad;
}

// A golden /attention request ({query, key, ..., weights, options}) as a
// v2 request, as tests/support/golden_v2.c writes it.
export function goldenV2(req) {
  const inputs = [], parameters = {};
  const add = (name, t) => inputs.push({ name, shape: t.shape, data: t.data,
                                         datatype: typeof t.data[0] === 'boolean' ? 'BOOL' : 'FP32' });
  for (const n of ['query', 'key', 'value', 'attn_mask', 'key_padding_mask']) {
    const t = req[n];
    if (typeof t === 'string') {
      parameters.is_causal = true;
      if (t === 'causal_lower_right') parameters.causal_alignment = 'lower_right';
    } else if (t) add(n, t);
  }
  for (const [k, t] of Object.entries(req.weights || {})) add(k, t);
  for (const o of ['num_heads', 'need_weights', 'average_attn_weights', 'scale', 'positional_encoding',
                   'num_kv_heads', 'head_dim', 'query_position_offset', 'alibi', 'softcap']) {
    if (req[o] !== undefined) parameters[o] = req[o];
  }
  for (const o of ['rope', 'alibi_slopes']) if (req[o] !== undefined) parameters[o] = JSON.stringify(req[o]);
  if (req.window) { parameters.window_left = req.window[0]; parameters.window_right = req.window[1]; }
  return { parameters, inputs };
}

export function goldenCases(dir = path.join(ROOT, 'tests', 'golden')) {
  return fs.readdirSync(dir).filter((f) => f.endsWith('.json')).sort()
    .map((f) => ({ file: path.join(path.basename(dir), f), ...JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) }));
}

// A self-signed certificate for 127.0.0.1 in a temporary directory
// ({dir, cert, key}), by the openssl command as the HTTPS test makes it.
export async function makeCert() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'attn-grpc-tls-'));
  const cert = path.join(dir, 'cert.pem'), key = path.join(dir, 'key.pem');
  await new Promise((resolve, reject) => {
    const p = spawn('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
                                '-days', '2', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1',
                                '-keyout', key, '-out', cert], { stdio: 'ignore' });
    p.on('exit', (c) => (c === 0 ? resolve() : reject(new Error(`openssl exited ${c}`))));
    p.on('error', reject);
  });
  return { dir, cert, key };
}

// A request heavy enough to take a while (about two seconds over HTTP
// without sanitizers at the defaults, a 0.5 MB message, 67 MB of weights):
// one batch item, L = S = rows, E, 4 heads, the weights (rows^2 * 16
// bytes) asked or not. Deterministic data.
export function heavyV2(rows = 2048, E = 64, needWeights = true) {
  const q = new Array(rows * E);
  for (let i = 0; i < q.length; i++) q[i] = Math.fround(((i * 2654435761) % 1000) / 1000 - 0.5);
  return { parameters: { num_heads: 4, need_weights: needWeights },
           inputs: [{ name: 'query', datatype: 'FP32', shape: [1, rows, E], data: q }] };
}

// The gRPC frame of a message (uncompressed): flag, length, bytes.
export function grpcFrame(msg) {
  const h = Buffer.alloc(5);
  h.writeUInt32BE(msg.length, 1);
  return Buffer.concat([h, msg]);
}
