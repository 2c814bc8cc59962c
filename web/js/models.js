// Server-held models through the Open Inference Protocol (v2): the list,
// each model's metadata and config.json, the input a model is run on (its
// own vocabulary and embedding table when config.json ships them, else the
// page's token embeddings at the model's widths), and infer with binary
// tensors both ways. No DOM.
//
//   const names = await listModels();                  // ['digits-reverse', ...] (not the built-in)
//   const info = await modelInfo('digits-reverse');    // {name, meta, config, E, kdim, vdim, H, trained}
//   const input = modelInput(info, text, keyText);     // {tokens, keyTokens, query, key?, value?} or throws RangeError
//   const res = await inferV2(info, input, params, slot, reduce);
//                       // {response, request, answer, bytes, timing} or {error} / {aborted};
//                       // reduce (reduced.js): pooled or top-k outputs instead of the weights
//
// Binary tensors (docs/models.md, "Infer, binary tensors"): the request body is the
// JSON header, then each input's little-endian float32 bytes in the order
// of `inputs`; Inference-Header-Content-Length gives the header's length.
// The answer, asked with binary_data_output, is its JSON header (length in
// the same header of the answer) and each output's bytes in order.

import { LITTLE_ENDIAN, decodeResponse } from './tensor.js';
import { embed } from './examples.js';
import { fetchInSlot } from './api.js';

const fail = (message, status = 0, code = '') => ({ error: { status, code, message } });

async function getJson(path) {
  const res = await fetch(path);
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* below */ }
  if (!res.ok) throw new Error(`GET ${path}: HTTP ${res.status} ${json && json.error ? json.error : text.slice(0, 200)}`);
  return json;
}

// The served models' names, without the built-in `attention` (whose
// weights a request must carry).
export async function listModels() {
  const j = await getJson('v2/models');
  return (j.models || []).filter((m) => m !== 'attention');
}

// A model's metadata and config: its widths E (query), kdim, vdim from the
// inputs' shapes, H, and `trained` when config.json has a vocabulary and an
// embedding table the page can build the input from.
export async function modelInfo(name) {
  const [meta, config] = await Promise.all([getJson(`v2/models/${encodeURIComponent(name)}`),
                                            getJson(`v2/models/${encodeURIComponent(name)}/config.json`)]);
  const width = (input) => {
    const t = (meta.inputs || []).find((x) => x.name === input);
    return t ? t.shape[t.shape.length - 1] : -1;
  };
  const E = width('query');
  const trained = Array.isArray(config.vocab) && Array.isArray(config.embedding) && config.embedding.length === config.vocab.length;
  return { name, meta, config, E, kdim: width('key'), vdim: width('value'), H: meta.parameters && meta.parameters.num_heads,
           trained };
}

// The example input of a model with a vocabulary: config.input.example (or
// config.example), else the first `length` vocabulary entries.
export function modelExample(info) {
  const c = info.config, inp = c.input || {};
  if (typeof inp.example === 'string') return inp.example;
  if (typeof c.example === 'string') return c.example;
  return c.vocab.slice(0, inp.length || 8).join(inp.tokens === 'digits' ? '' : ' ');
}

// A text as token ids of the model's vocabulary: one character a token
// when every entry is one character (digits), else words separated by
// white space.
export function tokenize(info, text) {
  const c = info.config, vocab = c.vocab;
  const chars = vocab.every((v) => [...v].length === 1);
  const tokens = chars ? [...text.replace(/\s+/g, '')] : text.trim().split(/\s+/).filter(Boolean);
  const bad = [...new Set(tokens.filter((t) => !vocab.includes(t)))];
  if (bad.length) {
    throw new RangeError(`${info.name} knows only the tokens ${vocab.join(' ')}; the input has ${bad.map((t) => `"${t}"`).join(', ')}.`);
  }
  const inp = c.input || {};
  const n = tokens.length, min = inp.length || inp.min_length || 1, max = inp.length || inp.max_length || Infinity;
  if (n < min || n > max) {
    throw new RangeError(`${info.name} takes ${min === max ? min : `${min} to ${max}`} tokens; the input has ${n}.`);
  }
  return tokens;
}

// The rows of the model's embedding table for token ids `ids`, plus its
// learned `positions` rows from position `from` when config.json has them
// (a stack's first layer), in float32.
export function embedIds(config, ids, from = 0) {
  const E = config.embedding[0].length, x = new Float32Array(ids.length * E), pos = config.positions;
  ids.forEach((id, k) => {
    const e = config.embedding[id], p = pos && pos[from + k];
    for (let d = 0; d < E; d++) x[k * E + d] = p ? e[d] + p[d] : e[d];
  });
  return x;
}

const words = (text) => text.trim().split(/\s+/).filter(Boolean);

// The input tensors: with the model's table, its rows for the tokens (the
// server adds the positional encoding the model's defaults name); without
// one, the page's token embeddings (examples.js embed) at widths E, kdim,
// vdim. key / value only when they differ from the query.
export function modelInput(info, text, keyText = '') {
  if (info.trained) {
    const tokens = tokenize(info, text);
    return { tokens, keyTokens: tokens, query: embedIds(info.config, tokens.map((t) => info.config.vocab.indexOf(t))) };
  }
  const tokens = words(text);
  if (!tokens.length) throw new RangeError('Type at least one token (words separated by spaces).');
  const keyTokens = words(keyText).length ? words(keyText) : tokens;
  const input = { tokens, keyTokens, query: embed(tokens, info.E) };
  if (keyTokens !== tokens || info.kdim !== info.E || info.vdim !== info.E) {
    input.key = embed(keyTokens, info.kdim);
    input.value = embed(keyTokens, info.vdim);
  }
  return input;
}

function leBytes(f32) {
  if (LITTLE_ENDIAN) return new Uint8Array(f32.buffer, f32.byteOffset, f32.byteLength);
  const out = new Uint8Array(f32.length * 4), dv = new DataView(out.buffer);
  f32.forEach((v, i) => dv.setFloat32(4 * i, v, true));
  return out;
}

// n little-endian float32s (or int32s) at byte `offset` of buf.
function numbersAt(buf, offset, n, int32) {
  const dv = new DataView(buf, offset, n * 4), out = int32 ? new Int32Array(n) : new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = int32 ? dv.getInt32(4 * i, true) : dv.getFloat32(4 * i, true);
  return out;
}

// The v2 request for `input` with extra `params`, asking for `outputs`: {header (object),
// headerLength (its bytes), body (Uint8Array: the header, then the tensors), tensors}.
export function v2Request(input, params = {}, outputs = ['output', 'attention_weights']) {
  const tensors = [['query', input.query, input.tokens.length, input.query.length / input.tokens.length]];
  if (input.key) tensors.push(['key', input.key, input.keyTokens.length, input.key.length / input.keyTokens.length]);
  if (input.value) tensors.push(['value', input.value, input.keyTokens.length, input.value.length / input.keyTokens.length]);
  const header = {
    parameters: { ...params, binary_data_output: true },
    inputs: tensors.map(([name, data, rows, cols]) => ({ name, shape: [rows, cols], datatype: 'FP32',
                                                         parameters: { binary_data_size: data.byteLength } })),
    outputs: outputs.map((name) => ({ name })),
  };
  const headerBytes = new TextEncoder().encode(JSON.stringify(header));
  const body = new Uint8Array(headerBytes.length + tensors.reduce((a, t) => a + t[1].byteLength, 0));
  body.set(headerBytes, 0);
  let off = headerBytes.length;
  for (const [, data] of tensors) { body.set(leBytes(data), off); off += data.byteLength; }
  return { header, headerLength: headerBytes.length, body, tensors };
}

// Runs model `info` on `input` (slot as api.js postAttention; `headers`
// added to the request's, e.g. X-Sequence-Id); the answer
// decoded as tensor.js decodeResponse does a POST /attention answer, the
// tokens as labels. `request` and `answer` are JSON texts of the exchange
// with the binary tensors written as "data" (for Export JSON).
export async function inferV2(info, input, params = {}, slot = 'main', reduce = null, headers = {}) {
  const weightsOut = !reduce ? ['attention_weights'] : reduce.pool ? ['attention_weights_pooled']
                   : ['attention_weights_top_k_values', 'attention_weights_top_k_indices'];
  const req = v2Request(input, { ...params, ...(reduce && reduce.pool ? { weights_pool: reduce.pool } : {}),
                                 ...(reduce && reduce.topK ? { weights_top_k: reduce.topK } : {}) }, ['output', ...weightsOut]);
  const t0 = performance.now();
  const sent = await fetchInSlot(slot, `v2/models/${encodeURIComponent(info.name)}/infer`, {
    method: 'POST', body: req.body,
    headers: { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': String(req.headerLength), ...headers },
  }, 'arrayBuffer');
  if (sent.aborted || sent.error) return sent;
  const { res, body: buf } = sent;
  const t1 = performance.now();
  const hlen = Number(res.headers.get('Inference-Header-Content-Length') || buf.byteLength);
  const headText = new TextDecoder().decode(new Uint8Array(buf, 0, Math.min(hlen, buf.byteLength)));
  let head = null;
  try { head = JSON.parse(headText); } catch { /* below */ }
  if (!res.ok) return fail(head && head.error ? String(head.error) : `HTTP ${res.status}: ${headText.slice(0, 300)}`, res.status);
  try {
    if (!head || !Array.isArray(head.outputs)) throw new Error('the answer has no outputs');
    let off = hlen;
    const out = {};
    for (const o of head.outputs) {
      const n = o.shape.reduce((a, b) => a * b, 1);
      if (o.parameters && o.parameters.binary_data_size !== undefined) {
        if (o.parameters.binary_data_size !== 4 * n || off + 4 * n > buf.byteLength) throw new Error(`output ${o.name}: bad binary size`);
        out[o.name] = { shape: o.shape, data: numbersAt(buf, off, n, o.datatype === 'INT32') };
        off += 4 * n;
      } else {
        out[o.name] = { shape: o.shape, data: (o.datatype === 'INT32' ? Int32Array : Float32Array).from(o.data.flat(Infinity)) };
      }
    }
    const o = out.output;
    const weights = !reduce ? { attention_weights: out.attention_weights }
      : reduce.pool ? { attention_weights_pooled: out.attention_weights_pooled }
      : { attention_weights_top_k: { values: out.attention_weights_top_k_values, indices: out.attention_weights_top_k_indices } };
    if (!o || Object.values(weights).some((w) => !w || (w.values === undefined && !w.data) || (w.values !== undefined && !(w.values && w.indices))))
      throw new Error(`the answer lacks output or ${weightsOut.join(' / ')}`);
    const response = decodeResponse({
      batch: 1, num_heads: info.H, target_len: input.tokens.length, source_len: input.keyTokens.length,
      embed_dim: o.shape[o.shape.length - 1], head_dim: info.meta.parameters.head_dim,
      output: o, ...weights, tokens: input.tokens, key_tokens: input.keyTokens, model: info.name,
    }, false, reduce);
    const withData = (h, arrays) => ({ ...h, [h.inputs ? 'inputs' : 'outputs']: (h.inputs || h.outputs).map((t, k) => {
      const { parameters, ...rest } = t;
      const p = { ...(parameters || {}) };
      delete p.binary_data_size;
      return { ...rest, ...(Object.keys(p).length ? { parameters: p } : {}), data: Array.from(arrays[k]) };
    }) });
    const request = JSON.stringify(withData(req.header, req.tensors.map((t) => t[1])));
    const answer = JSON.stringify(withData(head, head.outputs.map((x) => out[x.name].data)));
    return { response, request, answer, bytes: buf.byteLength, serverTiming: res.headers.get('Server-Timing') || '',
             timing: { fetch: t1 - t0, decode: performance.now() - t1 } };
  } catch (e) {
    return fail(`Could not read the service's answer: ${e.message}`);
  }
}
