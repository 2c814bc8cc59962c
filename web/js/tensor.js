// Tensors: float32 to base64 for requests, the three tensor forms of a
// response decoded (base64 {shape, dtype, b64}, {shape, data}, nested
// arrays), the decoded response, and the weights of one head of it.
//
//   const r = decodeResponse(json, askedAverage);   // throws Error on a bad answer
//   const w = matrixOf(r, batch, head);             // Float32Array L x S, row-major
//
// No DOM. A decoded response is never changed after decodeResponse returns.

import { decodeReduced } from './reduced.js';

export const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

function bytesToB64(u8) {
  if (typeof u8.toBase64 === 'function') return u8.toBase64();
  let s = '';
  for (let i = 0; i < u8.length; i += 0x8000) s += String.fromCharCode.apply(null, u8.subarray(i, i + 0x8000));
  return btoa(s);
}

function b64ToBytes(b64) {
  if (typeof Uint8Array.fromBase64 === 'function') return Uint8Array.fromBase64(b64);
  const s = atob(b64);
  const u8 = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) u8[i] = s.charCodeAt(i);
  return u8;
}

// A float32 value as text with at most 7 significant digits (float32
// carries about 7.2): the fewest that give the value back as a float32,
// else 7 ("0.05570138", not the double 0.05570137873291969).
export function formatFloat32(v) {
  for (let p = 1; p < 7; p++) {
    const x = Number(v.toPrecision(p));
    if (Math.fround(x) === v) return String(x);
  }
  return String(Number(v.toPrecision(7)));
}

// A Float32Array as a request tensor {shape, dtype: 'float32', b64}.
export function f32Tensor(data, shape) {
  let bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (!LITTLE_ENDIAN) {
    bytes = new Uint8Array(data.length * 4);
    const dv = new DataView(bytes.buffer);
    data.forEach((v, i) => dv.setFloat32(4 * i, v, true));
  }
  return { shape, dtype: 'float32', b64: bytesToB64(bytes) };
}

const product = (shape) => shape.reduce((a, b) => a * b, 1);
const isObject = (t) => t && typeof t === 'object' && !Array.isArray(t);

// Any of the three forms, or {shape, data: Float32Array} already decoded
// (a v2 binary answer) -> {shape, data: Float32Array}; `name` is for errors.
// dtype 'int32' (top-k indices) gives an Int32Array.
export function decodeTensor(t, name, dtype = 'float32') {
  const Typed = dtype === 'int32' ? Int32Array : Float32Array;
  if (isObject(t) && typeof t.b64 === 'string') {
    if (t.dtype !== dtype) throw new Error(`${name}: dtype ${t.dtype}, expected ${dtype}`);
    const bytes = b64ToBytes(t.b64);
    if (bytes.length !== 4 * product(t.shape)) throw new Error(`${name}: ${bytes.length} bytes for shape (${t.shape})`);
    let data;
    if (LITTLE_ENDIAN && bytes.byteOffset % 4 === 0) {
      data = new Typed(bytes.buffer, bytes.byteOffset, bytes.length / 4);
    } else {
      const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
      data = new Typed(bytes.length / 4);
      for (let i = 0; i < data.length; i++) data[i] = dtype === 'int32' ? dv.getInt32(4 * i, true) : dv.getFloat32(4 * i, true);
    }
    return { shape: t.shape.slice(), data };
  }
  if (isObject(t) && t.data instanceof Typed) return { shape: t.shape.slice(), data: t.data };
  if (isObject(t) && Array.isArray(t.data)) {
    return { shape: t.shape.slice(), data: Typed.from(t.data) };
  }
  if (Array.isArray(t)) {
    const shape = [];
    for (let x = t; Array.isArray(x); x = x[0]) shape.push(x.length);
    const flat = t.flat(shape.length);
    if (flat.length !== product(shape)) throw new Error(`${name}: ragged nested array`);
    return { shape, data: Typed.from(flat) };
  }
  throw new Error(`${name}: not a tensor`);
}

// ---------------------------------------------------------------------------
// The decoded response

export const AVG = 'avg';

// A /attention answer as {N, H, L, S, E, headDim, perHead, tokens, keyTokens,
// weights (Float32Array or null), weightsShape, output (Float32Array),
// outputShape, json (the answer without its tensors), reduced (null, or
// reduced.js's description of pooled or top-k weights)}. `reduce` is what
// the request asked ({pool: p} or {topK: k}), for reduced answers. perHead: the weights
// are per head (N, H, L, S) rather than the average (N, L, S); a rank-3
// answer is ambiguous, `askedAverage` (the request's average_attn_weights)
// settles it.
export function decodeResponse(json, askedAverage, reduce = null) {
  if (json.attention_weights_pooled !== undefined || json.attention_weights_top_k !== undefined)
    return decodeReduced(json, askedAverage, reduce, { decodeFull: decodeResponse, decodeTensor });
  const N = json.batch, H = json.num_heads, L = json.target_len, S = json.source_len, E = json.embed_dim;
  const out = decodeTensor(json.output, 'output');
  let weights = null, weightsShape = null, perHead = true;
  if (json.attention_weights !== undefined) {
    const w = decodeTensor(json.attention_weights, 'attention_weights');
    weightsShape = w.shape;
    const r = w.shape.length;
    perHead = r === 4 || (r === 3 && !askedAverage);
    if (w.data.length !== N * (perHead ? H : 1) * L * S)
      throw new Error(`attention_weights has shape (${w.shape.join(', ')}), which does not fit N=${N}, H=${H}, L=${L}, S=${S}`);
    weights = w.data;
  }
  const labels = (arr, n) => (Array.isArray(arr) && arr.length === n ? arr.map(String)
                                                                     : Array.from({ length: n }, (_, i) => String(i)));
  const tokens = labels(json.tokens, L);
  const keyTokens = Array.isArray(json.key_tokens) ? labels(json.key_tokens, S)
                  : (Array.isArray(json.tokens) && S === L ? tokens.slice() : labels(null, S));
  const meta = Object.fromEntries(Object.entries(json).filter(([k]) => k !== 'output' && k !== 'attention_weights'));
  return { N, H, L, S, E, headDim: json.head_dim, perHead, tokens, keyTokens, weights, weightsShape,
           output: out.data, outputShape: out.shape, json: meta, reduced: null };
}

// Head averages, computed once per (response, batch item).
const averages = new WeakMap();

// The L x S weights of head `h` (or AVG, the mean over heads) of batch item
// `b`, row-major; null when the response has no weights.
export function matrixOf(r, b, h) {
  if (!r || !r.weights) return null;
  const LS = r.L * r.S;
  if (!r.perHead) return r.weights.subarray(b * LS, (b + 1) * LS);
  if (h !== AVG) return r.weights.subarray((b * r.H + h) * LS, (b * r.H + h + 1) * LS);
  if (!averages.has(r)) averages.set(r, new Map());
  const cache = averages.get(r);
  let avg = cache.get(b);
  if (!avg) {
    const acc = new Float64Array(LS);
    for (let h2 = 0; h2 < r.H; h2++) {
      const w = r.weights.subarray((b * r.H + h2) * LS, (b * r.H + h2 + 1) * LS);
      for (let k = 0; k < LS; k++) acc[k] += w[k];
    }
    avg = new Float32Array(LS);
    for (let k = 0; k < LS; k++) avg[k] = acc[k] / r.H;
    cache.set(b, avg);
  }
  return avg;
}

// The maps the head grid shows: every head and the average, or only the
// average when the response has averaged weights.
export const headsOf = (r) => (r.perHead ? [...Array.from({ length: r.H }, (_, h) => h), AVG] : [AVG]);
export const headName = (h) => (h === AVG ? 'average' : `head ${h}`);
