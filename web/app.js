// Attention viewer: builds /attention requests, sends them, draws the weights.
//
// Plain ES module, no dependencies, nothing fetched but this service's own
// files and POST /attention. Everything is drawn on <canvas> (never one DOM
// node per cell); the weights come back as base64 float32 and live in
// Float32Arrays. Each heatmap is rendered once into an offscreen canvas (one
// pixel per cell) and scaled up with nearest-neighbour sampling; hovering
// only redraws a transparent overlay canvas and the tooltip.
//
// Test hooks, on window.attn (used by tests/browser/web.test.mjs):
//   attn.colorFor(value, max) -> [r, g, b]  the colour a weight `value` is
//       drawn with when the colour range is 0..max (viridis, 256 steps).
//       A weight below the threshold is drawn as colorFor(0, max).
//   attn.view -> {batch, head, max, threshold, rangeMode, tab}: what the large
//       heatmap shows; head is a number or "avg"; max is the top of its range.
//   attn.lastResponse -> the decoded answer: {N, H, L, S, E, headDim, perHead,
//       tokens, keyTokens, weightsShape, outputShape, weights (Float32Array),
//       output (Float32Array), json (the response without the tensors)}.
//   attn.matrix(batch, head) -> plain L x S array of arrays of the weights
//       of one head (or "avg", the mean over heads) of one batch item.
//   attn.cellRect(i, j) -> the large heatmap's cell (query i, key j) in CSS
//       pixels: {x, y, w, h, cx, cy} relative to the viewport (what
//       page.mouse.move takes) and {pageX, pageY}, its centre in page
//       coordinates; null when the heatmap is not shown.
//   attn.cellPixel(i, j) -> {x, y}: the centre of that cell in the heatmap
//       canvas's own pixels (for getImageData on #heatmap).
//   attn.headTokenPoint(side, k) -> {x, y}: viewport point of query token k
//       (side "query") or key token k (side "key") in the head view.
//   attn.runCount (finished runs, successful or not), attn.busy,
//   attn.lastTiming {build, fetch, decode, render, total} in ms,
//   attn.lastError {status, code, message} or null.

const VIRIDIS_HEX =
  '44015444025645045745055946075a46085c460a5d460b5e470d60470e61471063471164471365481467481668481769' +
  '48186a481a6c481b6d481c6e481d6f481f70482071482173482374482475482576482677482878482979472a7a472c7a' +
  '472d7b472e7c472f7d46307e46327e46337f463480453581453781453882443983443a83443b84433d84433e85423f85' +
  '4240864241864142874144874045884046883f47883f48893e49893e4a893e4c8a3d4d8a3d4e8a3c4f8a3c508b3b518b' +
  '3b528b3a538b3a548c39558c39568c38588c38598c375a8c375b8d365c8d365d8d355e8d355f8d34608d34618d33628d' +
  '33638d32648e32658e31668e31678e31688e30698e306a8e2f6b8e2f6c8e2e6d8e2e6e8e2e6f8e2d708e2d718e2c718e' +
  '2c728e2c738e2b748e2b758e2a768e2a778e2a788e29798e297a8e297b8e287c8e287d8e277e8e277f8e27808e26818e' +
  '26828e26828e25838e25848e25858e24868e24878e23888e23898e238a8d228b8d228c8d228d8d218e8d218f8d21908d' +
  '21918c20928c20928c20938c1f948c1f958b1f968b1f978b1f988b1f998a1f9a8a1e9b8a1e9c891e9d891f9e891f9f88' +
  '1fa0881fa1881fa1871fa28720a38620a48621a58521a68522a78522a88423a98324aa8325ab8225ac8226ad8127ad81' +
  '28ae8029af7f2ab07f2cb17e2db27d2eb37c2fb47c31b57b32b67a34b67935b77937b87838b9773aba763bbb753dbc74' +
  '3fbc7340bd7242be7144bf7046c06f48c16e4ac16d4cc26c4ec36b50c46a52c56954c56856c66758c7655ac8645cc863' +
  '5ec96260ca6063cb5f65cb5e67cc5c69cd5b6ccd5a6ece5870cf5773d05675d05477d1537ad1517cd2507fd34e81d34d' +
  '84d44b86d54989d5488bd6468ed64590d74393d74195d84098d83e9bd93c9dd93ba0da39a2da37a5db36a8db34aadc32' +
  'addc30b0dd2fb2dd2db5de2bb8de29bade28bddf26c0df25c2df23c5e021c8e020cae11fcde11dd0e11cd2e21bd5e21a' +
  'd8e219dae319dde318dfe318e2e418e5e419e7e419eae51aece51befe51cf1e51df4e61ef6e620f8e621fbe723fde725';

// ---------------------------------------------------------------------------
// Colour scales

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

function packRGBA(r, g, b) {
  return LITTLE_ENDIAN ? ((255 << 24) | (b << 16) | (g << 8) | r) >>> 0
                       : ((r << 24) | (g << 16) | (b << 8) | 255) >>> 0;
}

// Viridis (matplotlib, CC0), 256 entries, from #440154 (0) to #fde725 (max).
const VIRIDIS = new Uint8Array(768);
for (let i = 0; i < 768; i++) VIRIDIS[i] = parseInt(VIRIDIS_HEX.substr(2 * i, 2), 16);
const VIRIDIS32 = new Uint32Array(256);
for (let i = 0; i < 256; i++) VIRIDIS32[i] = packRGBA(VIRIDIS[3 * i], VIRIDIS[3 * i + 1], VIRIDIS[3 * i + 2]);

// Index in the 256-step table of `value` on the range 0..max. The drawing
// loops use this very expression, so colorFor predicts every pixel exactly.
function lutIndex(value, max) {
  if (!(max > 0)) return 0;
  const t = Math.round((value / max) * 255);
  return t > 255 ? 255 : t > 0 ? t : 0;
}

export function colorFor(value, max) {
  const i = lutIndex(value, max);
  return [VIRIDIS[3 * i], VIRIDIS[3 * i + 1], VIRIDIS[3 * i + 2]];
}

function cssColor(rgb, alpha = 1) {
  return alpha === 1 ? `rgb(${rgb[0]},${rgb[1]},${rgb[2]})` : `rgba(${rgb[0]},${rgb[1]},${rgb[2]},${alpha})`;
}

// Diverging blue - light grey - red for the output tensor (signed values).
const DIVERGING32 = new Uint32Array(256);
const DIVERGING = new Uint8Array(768);
{
  const stops = [[49, 104, 214], [236, 238, 242], [214, 56, 64]];
  for (let i = 0; i < 256; i++) {
    const t = i / 255 * 2;
    const a = stops[t < 1 ? 0 : 1], b = stops[t < 1 ? 1 : 2], f = t < 1 ? t : t - 1;
    for (let c = 0; c < 3; c++) DIVERGING[3 * i + c] = Math.round(a[c] + (b[c] - a[c]) * f);
    DIVERGING32[i] = packRGBA(DIVERGING[3 * i], DIVERGING[3 * i + 1], DIVERGING[3 * i + 2]);
  }
}

// One colour per head for the head view (and the chips in the head grid).
const HEAD_COLORS = ['#4cc9f0', '#f8961e', '#90be6d', '#f94144', '#b388eb', '#f9c74f', '#43aa8b',
  '#ff8fab', '#4d96ff', '#e9c46a', '#2ec4b6', '#ff6b6b', '#c77dff', '#a7c957', '#ffb703', '#8ecae6'];
const AVG_COLOR = '#e6edf3';
const headColor = (h) => (h === AVG ? AVG_COLOR : HEAD_COLORS[h % HEAD_COLORS.length]);

// ---------------------------------------------------------------------------
// Deterministic numbers: FNV-1a hash of a token seeds a PRNG (mulberry32).

function fnv1a(str) {
  let h = 0x811c9dc5;
  for (let i = 0; i < str.length; i++) {
    h ^= str.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

function mulberry32(seed) {
  let a = seed >>> 0;
  return function () {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function gaussian(rng) {
  let u = 0;
  while (u === 0) u = rng();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rng());
}

// ---------------------------------------------------------------------------
// Tensors: base64 float32 both ways, and the three request forms decoded.

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

function f32Tensor(data, shape) {
  let bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (!LITTLE_ENDIAN) {
    bytes = new Uint8Array(data.length * 4);
    const dv = new DataView(bytes.buffer);
    data.forEach((v, i) => dv.setFloat32(4 * i, v, true));
  }
  return { shape, dtype: 'float32', b64: bytesToB64(bytes) };
}

const product = (shape) => shape.reduce((a, b) => a * b, 1);

function decodeTensor(t, name) {
  if (t && typeof t === 'object' && !Array.isArray(t) && typeof t.b64 === 'string') {
    if (t.dtype !== 'float32') throw new Error(`${name}: dtype ${t.dtype}, expected float32`);
    const bytes = b64ToBytes(t.b64);
    if (bytes.length !== 4 * product(t.shape)) throw new Error(`${name}: ${bytes.length} bytes for shape (${t.shape})`);
    let data;
    if (LITTLE_ENDIAN && bytes.byteOffset % 4 === 0) {
      data = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
    } else {
      const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
      data = new Float32Array(bytes.length / 4);
      for (let i = 0; i < data.length; i++) data[i] = dv.getFloat32(4 * i, true);
    }
    return { shape: t.shape.slice(), data };
  }
  if (t && typeof t === 'object' && !Array.isArray(t) && Array.isArray(t.data)) {
    return { shape: t.shape.slice(), data: Float32Array.from(t.data) };
  }
  if (Array.isArray(t)) {
    const shape = [];
    for (let x = t; Array.isArray(x); x = x[0]) shape.push(x.length);
    const flat = t.flat(shape.length);
    if (flat.length !== product(shape)) throw new Error(`${name}: ragged nested array`);
    return { shape, data: Float32Array.from(flat) };
  }
  throw new Error(`${name}: not a tensor`);
}

// ---------------------------------------------------------------------------
// Built-in examples

const LONG_TEXT = ('attention lets every position of a sequence look at every other position ' +
  'and decide how much of each one to mix into its own representation . the query of a token ' +
  'is compared with the keys of all tokens , the scores are scaled and passed through a softmax ' +
  ', and the resulting weights average the values . several heads do this in parallel on ' +
  'smaller slices of the embedding , so one head can follow the previous word while another ' +
  'tracks a repeated name or the end of a sentence .').split(/\s+/);
const longTokens = Array.from({ length: 512 }, (_, i) => LONG_TEXT[i % LONG_TEXT.length]).join(' ');

const EXAMPLES = {
  sentence: { title: 'Sentence self-attention', tokens: 'the cat sat on the mat because it was tired',
              keyTokens: null, E: 32, H: 4, mask: 'none', seed: 7 },
  causal: { title: 'Causal decoder', tokens: '<s> once upon a time a small robot learned to paint',
            keyTokens: null, E: 32, H: 4, mask: 'causal', seed: 11 },
  cross: { title: 'Cross-attention', tokens: 'le chat dort sur le tapis rouge',
           keyTokens: 'the cat is sleeping on the red mat', E: 32, H: 4, mask: 'none', seed: 5 },
  // Long: token vectors scaled down (embedGain) so the positional encoding
  // shows, as a band along the diagonal in the first heads.
  long: { title: 'Long sequence', tokens: longTokens, keyTokens: null, E: 256, H: 16, mask: 'none', seed: 3,
          embedGain: 0.4 },
};

const splitTokens = (text) => text.trim().split(/\s+/).filter(Boolean);

// The embedding of a token: a gaussian vector (variance gain²) seeded by the
// token's hash (case-folded, so "The" and "the" agree). The sinusoidal
// positional encoding is added by the server (positional_encoding).
function embed(tokens, E, gain = 1) {
  const x = new Float32Array(tokens.length * E);
  tokens.forEach((tok, i) => {
    const rng = mulberry32(fnv1a(tok.toLowerCase()) ^ 0x9e3779b9);
    for (let e = 0; e < E; e++) x[i * E + e] = gain * gaussian(rng);
  });
  return x;
}

// Random projections from the seed. Head h's key projection is partly its
// query projection (mix from 0.95 down to 0.05 across heads), so the first
// heads attend to similar tokens and nearby positions, the last more freely.
function projections(E, H, seed) {
  const rng = mulberry32((seed >>> 0) ^ 0x85ebca6b);
  const d = E / H;
  const gain = 1.6 / Math.sqrt(E);
  const rand = () => gaussian(rng) * gain;
  const inProj = new Float32Array(3 * E * E);
  for (let r = 0; r < E; r++) {
    const h = Math.floor(r / d);
    const mix = H > 1 ? 0.95 - 0.9 * h / (H - 1) : 0.8;
    const other = Math.sqrt(1 - mix * mix);
    for (let c = 0; c < E; c++) {
      const q = rand();
      inProj[r * E + c] = q;
      inProj[(E + r) * E + c] = mix * q + other * rand();
    }
  }
  for (let k = 2 * E * E; k < 3 * E * E; k++) inProj[k] = gaussian(rng) / Math.sqrt(E);
  const outProj = new Float32Array(E * E);
  for (let k = 0; k < E * E; k++) outProj[k] = gaussian(rng) / Math.sqrt(E);
  return { in_proj_weight: f32Tensor(inProj, [3 * E, E]), out_proj_weight: f32Tensor(outProj, [E, E]) };
}

class UserError extends Error {}

function buildExampleRequest(form) {
  const tokens = splitTokens(form.tokens);
  if (tokens.length === 0) throw new UserError('Type at least one token (words separated by spaces).');
  const cross = form.cross && splitTokens(form.keyTokens).length > 0;
  const keyTokens = cross ? splitTokens(form.keyTokens) : tokens;
  const { E, H } = form;
  const req = {
    query: f32Tensor(embed(tokens, E, form.embedGain), [tokens.length, E]),
    num_heads: H,
    weights: projections(E, H, form.seed),
    positional_encoding: 'sinusoidal',
    output_encoding: 'base64',
    tokens,
  };
  if (cross) {
    req.key = f32Tensor(embed(keyTokens, E, form.embedGain), [keyTokens.length, E]);
    req.key_tokens = keyTokens;
  }
  if (form.mask === 'causal') req.attn_mask = 'causal';
  if (form.mask === 'padding') {
    const k = Math.max(0, Math.min(keyTokens.length, form.padK | 0));
    req.key_padding_mask = keyTokens.map((_, j) => j >= keyTokens.length - k);
  }
  if (form.scale !== '') {
    const s = Number(form.scale);
    if (!Number.isFinite(s)) throw new UserError(`Scale "${form.scale}" is not a number.`);
    req.scale = s;   // the server names the problem if it is not > 0
  }
  return req;
}

// ---------------------------------------------------------------------------
// The decoded response

const AVG = 'avg';

function modelFromResponse(json, askedAverage) {
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
           output: out.data, outputShape: out.shape, json: meta, avgCache: new Map() };
}

function matrixOf(m, b, h) {
  if (!m.weights) return null;
  const LS = m.L * m.S;
  if (!m.perHead) return m.weights.subarray(b * LS, (b + 1) * LS);
  if (h !== AVG) return m.weights.subarray((b * m.H + h) * LS, (b * m.H + h + 1) * LS);
  let avg = m.avgCache.get(b);
  if (!avg) {
    const acc = new Float64Array(LS);
    for (let h2 = 0; h2 < m.H; h2++) {
      const w = m.weights.subarray((b * m.H + h2) * LS, (b * m.H + h2 + 1) * LS);
      for (let k = 0; k < LS; k++) acc[k] += w[k];
    }
    avg = new Float32Array(LS);
    for (let k = 0; k < LS; k++) avg[k] = acc[k] / m.H;
    m.avgCache.set(b, avg);
  }
  return avg;
}

const headsOf = (m) => (m.perHead ? [...Array.from({ length: m.H }, (_, h) => h), AVG] : [AVG]);
const headName = (h) => (h === AVG ? 'average' : `head ${h}`);

// ---------------------------------------------------------------------------
// State

const $ = (id) => document.getElementById(id);

const state = {
  model: null,
  batch: 0,
  head: 0,
  threshold: 0,
  rangeMode: 'head',
  tab: 'heatmap',
  title: '',
  images: new Map(),      // "b:h" -> {canvas (S x L, one pixel per cell), max}
  hm: null,               // large heatmap geometry
  hv: null,               // head view geometry
  hover: null,
  lastRequestText: '',
  runSeq: 0,
  controller: null,
};

const attn = {
  colorFor,
  runCount: 0,
  busy: false,
  lastTiming: null,
  lastError: null,
  get lastResponse() { return state.model; },
  get view() {
    const img = state.model && state.model.weights ? imageFor(state.batch, state.head) : null;
    return { batch: state.batch, head: state.head, max: img ? img.max : null, threshold: state.threshold,
             rangeMode: state.rangeMode, tab: state.tab };
  },
  matrix(b, h) {
    const m = state.model;
    const w = m && matrixOf(m, b, h);
    if (!w) return null;
    return Array.from({ length: m.L }, (_, i) => Array.from(w.subarray(i * m.S, (i + 1) * m.S)));
  },
  cellRect,
  cellPixel,
  headTokenPoint(side, k) {
    const g = state.hv;
    if (!g || state.tab !== 'headview') return null;
    const r = $('headview').getBoundingClientRect();
    return side === 'query' ? { x: r.left + g.xL - 20, y: r.top + g.yq(k) }
                            : { x: r.left + g.xR + 20, y: r.top + g.yk(k) };
  },
  selectHead: (h) => selectHead(h),
  run: () => run('example'),
};
window.attn = attn;

// ---------------------------------------------------------------------------
// Offscreen images, one pixel per cell

function rangeMax(w) {
  if (state.rangeMode === 'unit') return 1;
  let max = 0;
  for (let k = 0; k < w.length; k++) if (w[k] > max) max = w[k];
  return max;
}

function imageFor(b, h) {
  const key = `${b}:${h}`;
  let img = state.images.get(key);
  if (img) return img;
  const m = state.model;
  const w = matrixOf(m, b, h);
  const max = rangeMax(w);
  const thr = state.threshold;
  const canvas = document.createElement('canvas');
  canvas.width = m.S;
  canvas.height = m.L;
  const ctx = canvas.getContext('2d');
  const data = ctx.createImageData(m.S, m.L);
  const px = new Uint32Array(data.data.buffer);
  for (let k = 0; k < w.length; k++) {
    const v = w[k];
    let t = 0;
    if (v >= thr && max > 0) {
      t = Math.round((v / max) * 255);   // = lutIndex(v, max)
      t = t > 255 ? 255 : t > 0 ? t : 0;
    }
    px[k] = VIRIDIS32[t];
  }
  ctx.putImageData(data, 0, 0);
  img = { canvas, max };
  state.images.set(key, img);
  return img;
}

function sizeCanvas(canvas, w, h) {
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(w * dpr);
  canvas.height = Math.round(h * dpr);
  canvas.style.width = `${w}px`;
  canvas.style.height = `${h}px`;
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return ctx;
}

const FONT = 'system-ui, -apple-system, "Segoe UI", "DejaVu Sans", Roboto, sans-serif';
const COLORS = { bg: '#151b23', text: '#c9d4e0', muted: '#8b98a9', grid: '#2a3441', hi: '#fde725' };

function tickStep(cellPx, minPx) {
  for (const s of [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000])
    if (s * cellPx >= minPx) return s;
  return 10000;
}

function ellipsize(ctx, text, maxW) {
  if (ctx.measureText(text).width <= maxW) return text;
  let s = text;
  while (s.length > 1 && ctx.measureText(s + '…').width > maxW) s = s.slice(0, -1);
  return s + '…';
}

function availableWidth(el) {
  const w = el.clientWidth || $('view-heatmap').parentElement.clientWidth - 32;
  return Math.max(320, w);
}

// ---------------------------------------------------------------------------
// Head grid ("model view")

function renderGrid() {
  const m = state.model;
  const grid = $('head-grid');
  grid.textContent = '';
  if (!m || !m.weights) {
    const p = document.createElement('p');
    p.className = 'hint';
    p.textContent = m ? 'The response has no attention weights (need_weights was false).' : '';
    grid.appendChild(p);
    return;
  }
  const heads = headsOf(m);
  const box = heads.length <= 9 ? 104 : 76;
  const big = Math.max(m.L, m.S);
  const scale = big <= box ? Math.floor(box / big) : box / big;
  const w = Math.max(1, Math.round(m.S * scale)), h = Math.max(1, Math.round(m.L * scale));
  for (const head of heads) {
    const btn = document.createElement('button');
    btn.type = 'button';
    btn.className = 'thumb' + (head === AVG ? ' avg' : '');
    btn.dataset.head = String(head);
    btn.dataset.testid = `head-thumb-${head}`;
    btn.setAttribute('aria-pressed', String(head === state.head));
    btn.title = `Show ${headName(head)} in the large views`;
    const c = document.createElement('canvas');
    const ctx = sizeCanvas(c, w, h);
    const img = imageFor(state.batch, head);
    ctx.imageSmoothingEnabled = scale < 1;
    ctx.imageSmoothingQuality = 'high';
    ctx.drawImage(img.canvas, 0, 0, w, h);
    const label = document.createElement('span');
    const chip = `<svg width="8" height="8" aria-hidden="true"><circle cx="4" cy="4" r="4" fill="${headColor(head)}"/></svg>`;
    label.innerHTML = `${chip} ${headName(head)}`;
    btn.append(c, label);
    btn.addEventListener('click', () => selectHead(head));
    grid.appendChild(btn);
  }
}

function markSelectedThumb() {
  for (const el of $('head-grid').querySelectorAll('.thumb'))
    el.setAttribute('aria-pressed', String(el.dataset.head === String(state.head)));
}

function selectHead(head) {
  const m = state.model;
  if (!m || !m.weights) return;
  const h = head === AVG || head === 'avg' ? AVG : Number(head);
  if (h !== AVG && !(m.perHead && h >= 0 && h < m.H)) return;
  state.head = h;
  markSelectedThumb();
  renderView();
}

// ---------------------------------------------------------------------------
// Large heatmap

function renderHeatmap() {
  const m = state.model;
  const canvas = $('heatmap'), overlay = $('heatmap-overlay');
  if (!m || !m.weights) {
    sizeCanvas(canvas, 1, 1);
    sizeCanvas(overlay, 1, 1);
    $('legend').style.display = 'none';
    state.hm = null;
    return;
  }
  $('legend').style.display = '';
  const img = imageFor(state.batch, state.head);
  const { L, S } = m;
  const rows = m.tokens, cols = m.keyTokens;
  const avail = availableWidth($('view-heatmap')) - 110;   // legend and margins
  const measure = canvas.getContext('2d');
  // First guess of the cell size, then the label margins it implies.
  let cell = Math.max(1, Math.min(40, Math.floor(Math.min(640, avail - 120) / Math.max(L, S))));
  const labels = cell >= 10;
  const fontPx = Math.max(9, Math.min(13, cell - 3));
  measure.font = `${fontPx}px ${FONT}`;
  const widest = (arr) => arr.reduce((a, s) => Math.max(a, measure.measureText(s).width), 0);
  const left = labels ? Math.min(130, Math.ceil(widest(rows)) + 14) : 44;
  const colW = labels ? Math.min(110, Math.ceil(widest(cols))) : 0;
  const top = labels ? Math.ceil(colW * Math.SQRT1_2) + 22 : 30;
  const right = labels ? Math.ceil(colW * Math.SQRT1_2) + 8 : 10;
  cell = Math.max(1, Math.min(cell, Math.floor((avail - left - right) / S) || 1));
  const gw = S * cell, gh = L * cell;
  const caption = `rows: query (L = ${L})   columns: key (S = ${S})`;
  measure.font = `11px ${FONT}`;
  const W = Math.max(left + gw + right, left + Math.ceil(measure.measureText(caption).width) + 8), Hh = top + gh + 28;
  const ctx = sizeCanvas(canvas, W, Hh);
  sizeCanvas(overlay, W, Hh);
  ctx.fillStyle = COLORS.bg;
  ctx.fillRect(0, 0, W, Hh);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(img.canvas, left, top, gw, gh);

  ctx.fillStyle = COLORS.text;
  ctx.font = `${fontPx}px ${FONT}`;
  if (labels) {
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    for (let i = 0; i < L; i++) ctx.fillText(ellipsize(ctx, rows[i], left - 12), left - 6, top + (i + 0.5) * cell);
    ctx.textAlign = 'left';
    for (let j = 0; j < S; j++) {
      ctx.save();
      ctx.translate(left + (j + 0.5) * cell, top - 6);
      ctx.rotate(-Math.PI / 4);
      ctx.fillText(ellipsize(ctx, cols[j], 110), 0, 0);
      ctx.restore();
    }
  } else {
    ctx.font = `10px ${FONT}`;
    ctx.fillStyle = COLORS.muted;
    ctx.textBaseline = 'middle';
    const step = tickStep(cell, 26);
    ctx.textAlign = 'right';
    for (let i = 0; i < L; i += step) ctx.fillText(String(i), left - 5, top + (i + 0.5) * cell);
    ctx.textAlign = 'center';
    ctx.textBaseline = 'bottom';
    for (let j = 0; j < S; j += step) ctx.fillText(String(j), left + (j + 0.5) * cell, top - 4);
  }
  ctx.fillStyle = COLORS.muted;
  ctx.font = `11px ${FONT}`;
  ctx.textAlign = 'left';
  ctx.textBaseline = 'top';
  ctx.fillText(caption, left, top + gh + 10);
  state.hm = { left, top, cell, L, S };
  renderLegend(img.max, Math.max(160, Math.min(gh, 360)));
  drawHeatmapHover();
  $('view-title').textContent = `${headName(state.head)}${m.N > 1 ? ` · batch ${state.batch}` : ''}`;
}

function renderLegend(max, height) {
  const c = $('legend');
  const W = 86, barTop = 24, barH = height - 40;
  const ctx = sizeCanvas(c, W, height);
  ctx.fillStyle = COLORS.bg;
  ctx.fillRect(0, 0, W, height);
  for (let y = 0; y < barH; y++) {
    const v = 1 - y / Math.max(1, barH - 1);
    ctx.fillStyle = cssColor(colorFor(v, 1));
    ctx.fillRect(8, barTop + y, 16, 1);
  }
  ctx.strokeStyle = COLORS.grid;
  ctx.strokeRect(8.5, barTop - 0.5, 15, barH + 1);
  ctx.fillStyle = COLORS.muted;
  ctx.font = `11px ${FONT}`;
  ctx.textBaseline = 'top';
  ctx.fillText('weight', 4, 4);
  ctx.fillStyle = COLORS.text;
  ctx.textBaseline = 'middle';
  const fmt = (v) => (v === 0 ? '0' : v >= 0.01 ? v.toFixed(3) : v.toPrecision(2));
  for (const f of [1, 0.75, 0.5, 0.25, 0]) {
    const y = barTop + (1 - f) * (barH - 1);
    ctx.fillRect(24, Math.round(y), 4, 1);
    ctx.fillText(fmt(f * max), 31, y);
  }
  if (state.threshold > 0) {
    ctx.fillStyle = COLORS.muted;
    ctx.textBaseline = 'top';
    ctx.fillText(`< ${fmt(state.threshold)}`, 4, barTop + barH + 6);
    ctx.fillText('hidden', 4, barTop + barH + 19);
  }
}

function cellRect(i, j) {
  const g = state.hm;
  if (!g || state.tab !== 'heatmap') return null;
  const r = $('heatmap').getBoundingClientRect();
  const x = r.left + g.left + j * g.cell, y = r.top + g.top + i * g.cell;
  const cx = x + g.cell / 2, cy = y + g.cell / 2;
  return { x, y, w: g.cell, h: g.cell, cx, cy, pageX: cx + window.scrollX, pageY: cy + window.scrollY };
}

function cellPixel(i, j) {
  const g = state.hm;
  if (!g) return null;
  const dpr = $('heatmap').width / parseFloat($('heatmap').style.width);
  return { x: Math.floor((g.left + (j + 0.5) * g.cell) * dpr), y: Math.floor((g.top + (i + 0.5) * g.cell) * dpr) };
}

function hitHeatmap(ev) {
  const g = state.hm;
  if (!g) return null;
  const r = $('heatmap-overlay').getBoundingClientRect();
  const x = ev.clientX - r.left - g.left, y = ev.clientY - r.top - g.top;
  const j = Math.floor(x / g.cell), i = Math.floor(y / g.cell);
  return i >= 0 && j >= 0 && i < g.L && j < g.S ? { i, j } : null;
}

function drawHeatmapHover() {
  const g = state.hm, o = $('heatmap-overlay');
  const ctx = o.getContext('2d');
  const dpr = o.width / (parseFloat(o.style.width) || 1);
  ctx.setTransform(1, 0, 0, 1, 0, 0);
  ctx.clearRect(0, 0, o.width, o.height);
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  const hv = state.hover;
  if (!g || !hv || hv.kind !== 'cell') return;
  const { i, j } = hv;
  const gw = g.S * g.cell, gh = g.L * g.cell;
  ctx.fillStyle = 'rgba(253, 231, 37, 0.10)';
  ctx.fillRect(0, g.top + i * g.cell, g.left, g.cell);           // the query label
  ctx.fillRect(g.left + j * g.cell, 0, g.cell, g.top);           // the key label
  ctx.strokeStyle = 'rgba(255, 255, 255, 0.35)';
  ctx.lineWidth = 1;
  ctx.strokeRect(g.left + 0.5, g.top + i * g.cell + 0.5, gw - 1, Math.max(1, g.cell - 1));
  ctx.strokeRect(g.left + j * g.cell + 0.5, g.top + 0.5, Math.max(1, g.cell - 1), gh - 1);
  ctx.strokeStyle = COLORS.hi;
  ctx.lineWidth = 2;
  const pad = g.cell >= 4 ? 1 : 0;
  ctx.strokeRect(g.left + j * g.cell - pad, g.top + i * g.cell - pad, g.cell + 2 * pad, g.cell + 2 * pad);
}

function showTooltip(ev, i, j) {
  const m = state.model;
  const w = matrixOf(m, state.batch, state.head)[i * m.S + j];
  $('tip-query').textContent = m.tokens[i];
  $('tip-qi').textContent = `#${i}`;
  $('tip-key').textContent = m.keyTokens[j];
  $('tip-kj').textContent = `#${j}`;
  $('tip-weight').textContent = String(w);    // the float32 exactly, shortest round-trip form
  $('tip-head').textContent = `${headName(state.head)}${m.N > 1 ? ` · batch ${state.batch}` : ''}` +
    (w < state.threshold ? ' · below threshold (hidden)' : '');
  const tip = $('tooltip');
  tip.hidden = false;
  const tw = tip.offsetWidth, th = tip.offsetHeight;
  let x = ev.clientX + 16, y = ev.clientY + 16;
  if (x + tw > window.innerWidth - 8) x = ev.clientX - tw - 16;
  if (y + th > window.innerHeight - 8) y = ev.clientY - th - 16;
  tip.style.left = `${Math.max(4, x)}px`;
  tip.style.top = `${Math.max(4, y)}px`;
}

function hideTooltip() {
  $('tooltip').hidden = true;
}

// ---------------------------------------------------------------------------
// Head view (bertviz-like): query tokens left, key tokens right, lines with
// opacity = weight. The base canvas holds every line; hovering a token dims
// it on the overlay and draws only that token's lines at full strength.

function renderHeadView() {
  const m = state.model;
  const canvas = $('headview'), overlay = $('headview-overlay');
  if (!m || !m.weights) { sizeCanvas(canvas, 1, 1); sizeCanvas(overlay, 1, 1); state.hv = null; return; }
  const { L, S } = m;
  const big = Math.max(L, S);
  const rowH = Math.max(1, Math.min(24, Math.floor(680 / big)));
  const labels = rowH >= 10;
  const fontPx = Math.max(9, Math.min(13, rowH - 3));
  const ctx0 = canvas.getContext('2d');
  ctx0.font = `${fontPx}px ${FONT}`;
  const widest = (arr) => arr.reduce((a, s) => Math.max(a, ctx0.measureText(s).width), 0);
  const labW = labels ? Math.min(150, Math.ceil(Math.max(widest(m.tokens), widest(m.keyTokens))) + 16) : 40;
  const gap = Math.min(340, Math.max(200, availableWidth($('view-headview')) - 2 * labW - 40));
  const top = 28;
  const W = 2 * labW + gap, Hh = top + big * rowH + 12;
  const ctx = sizeCanvas(canvas, W, Hh);
  sizeCanvas(overlay, W, Hh);
  const xL = labW, xR = labW + gap;
  const offQ = ((big - L) * rowH) / 2, offK = ((big - S) * rowH) / 2;
  const yq = (i) => top + offQ + (i + 0.5) * rowH, yk = (j) => top + offK + (j + 0.5) * rowH;
  state.hv = { labW, gap, top, rowH, labels, fontPx, xL, xR, offQ, offK, L, S, W, Hh, yq, yk };
  ctx.fillStyle = COLORS.bg;
  ctx.fillRect(0, 0, W, Hh);
  ctx.font = `11px ${FONT}`;
  ctx.fillStyle = COLORS.muted;
  ctx.textBaseline = 'top';
  ctx.textAlign = 'right';
  ctx.fillText('query', xL - 8, 6);
  ctx.textAlign = 'left';
  ctx.fillText('key', xR + 8, 6);
  ctx.textAlign = 'center';
  ctx.fillText(headName(state.head), (xL + xR) / 2, 6);
  drawTokenLabels(ctx, -1, -1);
  const w = matrixOf(m, state.batch, state.head);
  drawLines(ctx, w, headColor(state.head), null, null);
}

function drawTokenLabels(ctx, hiQ, hiK) {
  const g = state.hv, m = state.model;
  ctx.textBaseline = 'middle';
  if (!g.labels) {
    ctx.fillStyle = COLORS.muted;
    ctx.font = `10px ${FONT}`;
    const step = tickStep(g.rowH, 22);
    ctx.textAlign = 'right';
    for (let i = 0; i < g.L; i += step) ctx.fillText(String(i), g.xL - 8, g.yq(i));
    ctx.textAlign = 'left';
    for (let j = 0; j < g.S; j += step) ctx.fillText(String(j), g.xR + 8, g.yk(j));
    return;
  }
  ctx.font = `${g.fontPx}px ${FONT}`;
  ctx.textAlign = 'right';
  for (let i = 0; i < g.L; i++) {
    ctx.fillStyle = i === hiQ ? COLORS.hi : COLORS.text;
    ctx.fillText(ellipsize(ctx, m.tokens[i], g.labW - 14), g.xL - 8, g.yq(i));
  }
  ctx.textAlign = 'left';
  for (let j = 0; j < g.S; j++) {
    ctx.fillStyle = j === hiK ? COLORS.hi : COLORS.text;
    ctx.fillText(ellipsize(ctx, m.keyTokens[j], g.labW - 14), g.xR + 8, g.yk(j));
  }
}

// Lines batched into 64 opacity levels: one path per level, however many
// lines (L x S = 262144 at 512 tokens). onlyQ / onlyK restrict to one token.
function drawLines(ctx, w, color, onlyQ, onlyK) {
  const g = state.hv, S = g.S, thr = state.threshold;
  const LEVELS = 64;
  const paths = Array.from({ length: LEVELS + 1 }, () => null);
  const i0 = onlyQ ?? 0, i1 = onlyQ ?? g.L - 1;
  const j0 = onlyK ?? 0, j1 = onlyK ?? S - 1;
  const x0 = g.xL - 2, x1 = g.xR + 2;
  for (let i = i0; i <= i1; i++) {
    const y0 = g.yq(i);
    for (let j = j0; j <= j1; j++) {
      const v = w[i * S + j];
      if (v < thr) continue;
      const lvl = Math.round(v * LEVELS);
      if (lvl <= 0) continue;
      const p = paths[lvl > LEVELS ? LEVELS : lvl] || (paths[lvl > LEVELS ? LEVELS : lvl] = new Path2D());
      p.moveTo(x0, y0);
      p.lineTo(x1, g.yk(j));
    }
  }
  ctx.save();
  ctx.strokeStyle = color;
  ctx.lineWidth = g.rowH >= 6 ? 2 : 1;
  for (let l = 1; l <= LEVELS; l++) {
    if (!paths[l]) continue;
    ctx.globalAlpha = l / LEVELS;
    ctx.stroke(paths[l]);
  }
  ctx.restore();
}

function drawHeadViewHover() {
  const o = $('headview-overlay'), g = state.hv;
  const ctx = o.getContext('2d');
  const dpr = o.width / (parseFloat(o.style.width) || 1);
  ctx.setTransform(1, 0, 0, 1, 0, 0);
  ctx.clearRect(0, 0, o.width, o.height);
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  const hv = state.hover;
  if (!g || !hv || (hv.kind !== 'query' && hv.kind !== 'key')) return;
  const m = state.model;
  const w = matrixOf(m, state.batch, state.head);
  ctx.fillStyle = 'rgba(21, 27, 35, 0.88)';
  ctx.fillRect(0, g.top - 2, g.W, g.Hh - g.top + 2);
  const color = headColor(state.head);
  // Boxes behind the tokens on the other side, alpha = weight.
  ctx.fillStyle = color;
  if (hv.kind === 'query') {
    for (let j = 0; j < g.S; j++) {
      const v = w[hv.i * g.S + j];
      if (v < state.threshold) continue;
      ctx.globalAlpha = Math.min(1, v) * 0.6;
      ctx.fillRect(g.xR + 2, g.yk(j) - g.rowH / 2, g.labW - 4, g.rowH);
    }
  } else {
    for (let i = 0; i < g.L; i++) {
      const v = w[i * g.S + hv.j];
      if (v < state.threshold) continue;
      ctx.globalAlpha = Math.min(1, v) * 0.6;
      ctx.fillRect(2, g.yq(i) - g.rowH / 2, g.labW - 4, g.rowH);
    }
  }
  ctx.globalAlpha = 1;
  drawTokenLabels(ctx, hv.kind === 'query' ? hv.i : -1, hv.kind === 'key' ? hv.j : -1);
  drawLines(ctx, w, color, hv.kind === 'query' ? hv.i : null, hv.kind === 'key' ? hv.j : null);
}

function hitHeadView(ev) {
  const g = state.hv;
  if (!g) return null;
  const r = $('headview-overlay').getBoundingClientRect();
  const x = ev.clientX - r.left, y = ev.clientY - r.top;
  if (x <= g.xL + 6) {
    const i = Math.floor((y - g.top - g.offQ) / g.rowH);
    if (i >= 0 && i < g.L) return { kind: 'query', i };
  } else if (x >= g.xR - 6) {
    const j = Math.floor((y - g.top - g.offK) / g.rowH);
    if (j >= 0 && j < g.S) return { kind: 'key', j };
  }
  return null;
}

// ---------------------------------------------------------------------------
// Output tensor

function renderOutput() {
  const m = state.model;
  const c = $('output-canvas');
  if (!m) { sizeCanvas(c, 1, 1); return; }
  const dims = (a) => `(${a.join(', ')})`;
  const oNames = m.outputShape.length === 3 ? 'N, L, E' : 'L, E';
  let text = `output (${oNames}) = ${dims(m.outputShape)}`;
  if (m.weightsShape) {
    const names = m.weightsShape.length === 4 ? 'N, H, L, S' : m.weightsShape.length === 2 ? 'L, S'
                : m.perHead ? 'H, L, S' : 'N, L, S';
    text += `    attention_weights (${names}) = ${dims(m.weightsShape)}`;
  } else {
    text += '    attention_weights: none';
  }
  text += `    head_dim = ${m.headDim}`;
  $('output-shape').textContent = text;
  const { L, E } = m;
  const rows = m.outputShape.length === 3 ? m.outputShape[1] : m.outputShape[0];
  const cols = m.outputShape[m.outputShape.length - 1];
  const base = m.outputShape.length === 3 ? state.batch * rows * cols : 0;
  const data = m.output.subarray(base, base + rows * cols);
  let amax = 0;
  for (let k = 0; k < data.length; k++) amax = Math.max(amax, Math.abs(data[k]));
  const off = document.createElement('canvas');
  off.width = cols;
  off.height = rows;
  const octx = off.getContext('2d');
  const id = octx.createImageData(cols, rows);
  const px = new Uint32Array(id.data.buffer);
  for (let k = 0; k < data.length; k++) {
    const t = amax > 0 ? Math.round(((data[k] / amax) * 0.5 + 0.5) * 255) : 128;
    px[k] = DIVERGING32[t < 0 ? 0 : t > 255 ? 255 : t];
  }
  octx.putImageData(id, 0, 0);
  const cell = Math.max(1, Math.min(28, Math.floor(Math.min(640 / cols, 420 / rows))));
  const labels = cell >= 10 && rows === L;
  const left = labels ? 100 : 40, top = 22;
  const caption = `rows: query positions (${rows})   columns: embedding dims (E = ${cols})`;
  const mctx = c.getContext('2d');
  mctx.font = `11px ${FONT}`;
  const W = Math.max(left + cols * cell + 10, left + Math.ceil(mctx.measureText(caption).width) + 8);
  const Hh = top + rows * cell + 26;
  const ctx = sizeCanvas(c, W, Hh);
  ctx.fillStyle = COLORS.bg;
  ctx.fillRect(0, 0, W, Hh);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(off, left, top, cols * cell, rows * cell);
  ctx.fillStyle = COLORS.text;
  ctx.font = `${labels ? Math.min(13, cell - 2) : 10}px ${FONT}`;
  ctx.textAlign = 'right';
  ctx.textBaseline = 'middle';
  if (labels) {
    for (let i = 0; i < rows; i++) ctx.fillText(ellipsize(ctx, m.tokens[i], left - 12), left - 6, top + (i + 0.5) * cell);
  } else {
    const step = tickStep(cell, 22);
    for (let i = 0; i < rows; i += step) ctx.fillText(String(i), left - 5, top + (i + 0.5) * cell);
  }
  ctx.fillStyle = COLORS.muted;
  ctx.font = `11px ${FONT}`;
  ctx.textAlign = 'left';
  ctx.textBaseline = 'top';
  ctx.fillText(caption, left, top + rows * cell + 8);
  ctx.textBaseline = 'bottom';
  ctx.fillText(m.N > 1 ? `batch item ${state.batch}` : 'output', left, top - 6);
  // Legend
  const lg = $('output-legend');
  const lh = Math.max(140, Math.min(rows * cell, 300)), barH = lh - 40;
  const lctx = sizeCanvas(lg, 80, lh);
  lctx.fillStyle = COLORS.bg;
  lctx.fillRect(0, 0, 80, lh);
  for (let y = 0; y < barH; y++) {
    const t = Math.round((1 - y / Math.max(1, barH - 1)) * 255);
    lctx.fillStyle = `rgb(${DIVERGING[3 * t]},${DIVERGING[3 * t + 1]},${DIVERGING[3 * t + 2]})`;
    lctx.fillRect(8, 24 + y, 16, 1);
  }
  lctx.fillStyle = COLORS.muted;
  lctx.font = `11px ${FONT}`;
  lctx.textBaseline = 'top';
  lctx.fillText('value', 4, 4);
  lctx.fillStyle = COLORS.text;
  lctx.textBaseline = 'middle';
  const fmt = (v) => (Math.abs(v) >= 0.01 || v === 0 ? v.toFixed(3) : v.toPrecision(2));
  for (const f of [1, 0.5, 0, -0.5, -1]) {
    const y = 24 + ((1 - f) / 2) * (barH - 1);
    lctx.fillRect(24, Math.round(y), 4, 1);
    lctx.fillText(fmt(f * amax), 31, y);
  }
}

// ---------------------------------------------------------------------------
// Rendering orchestration

function renderView() {
  state.hover = null;
  hideTooltip();
  if (state.tab === 'heatmap') renderHeatmap();
  else if (state.tab === 'headview') { renderHeadView(); drawHeadViewHover(); }
  else renderOutput();
  const m = state.model;
  $('view-title').textContent = m ? `${headName(state.head)}${m.N > 1 ? ` · batch ${state.batch}` : ''}` : '';
}

function renderAll() {
  state.images.clear();
  renderGrid();
  renderView();
}

let pending = 0;
function scheduleRenderAll() {
  if (pending) return;
  pending = requestAnimationFrame(() => { pending = 0; if (state.model) renderAll(); });
}

function selectTab(tab) {
  state.tab = tab;
  for (const b of document.querySelectorAll('.tabs [role="tab"]'))
    b.setAttribute('aria-selected', String(b.dataset.view === tab));
  for (const v of ['heatmap', 'headview', 'output']) $(`view-${v}`).hidden = v !== tab;
  if (state.model) renderView();
}

function setupBatchSelect() {
  const m = state.model;
  const sel = $('batch');
  sel.textContent = '';
  $('batch-field').hidden = !(m && m.N > 1);
  if (!m) return;
  for (let b = 0; b < m.N; b++) {
    const o = document.createElement('option');
    o.value = String(b);
    o.textContent = String(b);
    sel.appendChild(o);
  }
  sel.value = String(state.batch);
}

// ---------------------------------------------------------------------------
// Errors and status

function showError(message, code, status) {
  const el = $('error');
  el.textContent = '';
  const strong = document.createElement('strong');
  strong.textContent = status ? `Error ${status}${code ? ` (${code})` : ''}: ` : 'Error: ';
  const span = document.createElement('span');
  span.id = 'error-message';
  span.textContent = message;
  el.append(strong, span);
  el.hidden = false;
  attn.lastError = { status: status || 0, code: code || '', message };
  document.body.dataset.state = 'error';
  $('status').textContent = code || 'error';
}

function clearError() {
  $('error').hidden = true;
  $('error').textContent = '';
  attn.lastError = null;
}

function setStatus(text) {
  $('status').textContent = text;
}

// ---------------------------------------------------------------------------
// Running requests

function readForm() {
  return {
    tokens: $('tokens').value,
    keyTokens: $('key-tokens').value,
    cross: !$('key-tokens-field').hidden,
    E: Number($('embed-dim').value),
    H: Number($('heads').value),
    mask: $('mask').value,
    padK: Number($('pad-k').value),
    scale: $('scale').value.trim(),
    seed: Number($('seed').value) | 0,
    embedGain: EXAMPLES[$('example').value].embedGain || 1,
  };
}

function applyExample(name) {
  const ex = EXAMPLES[name];
  $('tokens').value = ex.tokens;
  $('key-tokens').value = ex.keyTokens || '';
  $('key-tokens-field').hidden = !ex.keyTokens;
  $('tokens-label').textContent = ex.keyTokens ? 'Query tokens (target)' : 'Tokens';
  $('tokens').rows = name === 'long' ? 5 : 2;
  $('embed-dim').value = String(ex.E);
  $('heads').value = String(ex.H);
  $('mask').value = ex.mask;
  $('scale').value = '';
  $('seed').value = String(ex.seed);
  updateMaskFields();
}

function updateMaskFields() {
  $('pad-k-field').style.visibility = $('mask').value === 'padding' ? 'visible' : 'hidden';
}

const nextFrame = () => new Promise((r) => requestAnimationFrame(() => r()));

async function run(kind) {
  const seq = ++state.runSeq;
  if (state.controller) state.controller.abort();
  const controller = new AbortController();
  state.controller = controller;
  attn.busy = true;
  document.body.dataset.state = 'loading';
  setStatus('computing…');
  $('run').disabled = true;
  $('run-json').disabled = true;
  const t0 = performance.now();
  const finish = () => {
    if (seq !== state.runSeq) return;
    attn.busy = false;
    $('run').disabled = false;
    $('run-json').disabled = false;
    attn.runCount++;
  };
  let body, askedAverage = false, title;
  try {
    if (kind === 'example') {
      const form = readForm();
      const req = buildExampleRequest(form);
      title = EXAMPLES[$('example').value].title;
      body = JSON.stringify(req);
    } else {
      const text = $('request-json').value;
      if (!text.trim()) throw new UserError('Paste a request JSON into the box (or upload a file) first.');
      let parsed;
      try { parsed = JSON.parse(text); } catch { parsed = undefined; }
      if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) {
        askedAverage = parsed.average_attn_weights === true;
        if (parsed.output_encoding === 'base64') body = text;
        else { parsed.output_encoding = 'base64'; body = JSON.stringify(parsed); }
      } else {
        body = text;   // not a JSON object: let the server say what is wrong with it
      }
      title = 'Your request';
    }
  } catch (e) {
    showError(e.message);
    finish();
    return;
  }
  state.lastRequestText = body;
  const t1 = performance.now();
  let res, text;
  try {
    res = await fetch('attention', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body,
                                     signal: controller.signal });
    text = await res.text();
  } catch (e) {
    if (seq !== state.runSeq) return;
    showError(`Could not reach the attention service: ${e.message}`);
    finish();
    return;
  }
  if (seq !== state.runSeq) return;
  const t2 = performance.now();
  let json = null;
  try { json = JSON.parse(text); } catch { /* reported below */ }
  if (!res.ok) {
    const err = json && json.error;
    if (err && typeof err.message === 'string') showError(err.message, err.code, res.status);
    else showError(`${res.statusText || 'request failed'}: ${text.slice(0, 300)}`, '', res.status);
    finish();
    return;
  }
  let model;
  try {
    if (!json) throw new Error('the body is not JSON');
    model = modelFromResponse(json, askedAverage);
  } catch (e) {
    showError(`Could not read the service's answer: ${e.message}`);
    finish();
    return;
  }
  const t3 = performance.now();
  clearError();
  state.model = model;
  state.title = title;
  if (state.batch >= model.N) state.batch = 0;
  if (!model.perHead) state.head = AVG;
  else if (state.head !== AVG && state.head >= model.H) state.head = 0;
  setupBatchSelect();
  if (!model.weights && state.tab !== 'output') selectTab('output');   // nothing else to show
  $('heads-sub').textContent = `${title} · L = ${model.L}, S = ${model.S}, H = ${model.H}, E = ${model.E}` +
    (model.N > 1 ? `, N = ${model.N}` : '');
  renderAll();
  const t4 = performance.now();
  await nextFrame();
  if (seq !== state.runSeq) return;
  const t5 = performance.now();
  attn.lastTiming = { build: t1 - t0, fetch: t2 - t1, decode: t3 - t2, render: t4 - t3, total: t5 - t0,
                      serverTiming: res.headers.get('Server-Timing') || '' };
  document.body.dataset.state = 'ready';
  setStatus(`${Math.round(t5 - t0)} ms · ${text.length >= 1 << 20 ? `${(text.length / (1 << 20)).toFixed(1)} MB` : `${(text.length / 1024).toFixed(0)} KB`}`);
  finish();
}

// ---------------------------------------------------------------------------
// Export PNG of the current view

function exportPng() {
  const m = state.model;
  if (!m) return;
  const parts = state.tab === 'heatmap' ? [$('heatmap'), $('legend')]
              : state.tab === 'headview' ? [$('headview')]
              : [$('output-canvas'), $('output-legend')];
  const dpr = window.devicePixelRatio || 1;
  const pad = Math.round(16 * dpr), titleH = Math.round(30 * dpr), gap = Math.round(12 * dpr);
  const W = pad * 2 + parts.reduce((a, c) => a + c.width, 0) + gap * (parts.length - 1);
  const H = pad * 2 + titleH + Math.max(...parts.map((c) => c.height));
  const out = document.createElement('canvas');
  out.width = W;
  out.height = H;
  const ctx = out.getContext('2d');
  ctx.fillStyle = COLORS.bg;
  ctx.fillRect(0, 0, W, H);
  ctx.fillStyle = COLORS.text;
  ctx.font = `${Math.round(14 * dpr)}px ${FONT}`;
  ctx.textBaseline = 'top';
  const what = state.tab === 'heatmap' ? 'attention weights' : state.tab === 'headview' ? 'head view' : 'output';
  ctx.fillText(`${state.title} — ${what}, ${headName(state.head)}${m.N > 1 ? `, batch ${state.batch}` : ''}`, pad, pad);
  let x = pad;
  for (const c of parts) {
    ctx.drawImage(c, x, pad + titleH);
    if (c.id === 'headview') ctx.drawImage($('headview-overlay'), x, pad + titleH);
    x += c.width + gap;
  }
  const name = `attention-${state.tab}-${state.head === AVG ? 'avg' : `head${state.head}`}` +
    `${m.N > 1 ? `-batch${state.batch}` : ''}.png`;
  out.toBlob((blob) => {
    const url = URL.createObjectURL(blob);
    const a = document.createElement('a');
    a.href = url;
    a.download = name;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }, 'image/png');
}

// ---------------------------------------------------------------------------
// Wiring

function init() {
  applyExample('sentence');
  $('example').addEventListener('change', () => { applyExample($('example').value); run('example'); });
  $('mask').addEventListener('change', updateMaskFields);
  $('run').addEventListener('click', () => run('example'));
  $('run-json').addEventListener('click', () => run('json'));
  for (const id of ['tokens', 'key-tokens', 'request-json']) {
    $(id).addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) {
        ev.preventDefault();
        run(id === 'request-json' ? 'json' : 'example');
      }
    });
  }
  $('upload').addEventListener('change', async () => {
    const f = $('upload').files[0];
    if (!f) return;
    $('request-json').value = await f.text();
    $('upload').value = '';
    run('json');
  });
  $('copy-request').addEventListener('click', () => {
    if (!state.lastRequestText) return;
    try { $('request-json').value = JSON.stringify(JSON.parse(state.lastRequestText), null, 1); }
    catch { $('request-json').value = state.lastRequestText; }
  });
  $('threshold').addEventListener('input', () => {
    state.threshold = Number($('threshold').value);
    $('threshold-value').textContent = state.threshold.toFixed(3);
    scheduleRenderAll();
  });
  $('range-mode').addEventListener('change', () => {
    state.rangeMode = $('range-mode').value;
    scheduleRenderAll();
  });
  $('batch').addEventListener('change', () => {
    state.batch = Number($('batch').value);
    renderAll();
  });
  for (const b of document.querySelectorAll('.tabs [role="tab"]'))
    b.addEventListener('click', () => selectTab(b.dataset.view));
  $('export').addEventListener('click', exportPng);

  const hmo = $('heatmap-overlay');
  hmo.addEventListener('mousemove', (ev) => {
    const hit = hitHeatmap(ev);
    if (!hit) {
      if (state.hover) { state.hover = null; drawHeatmapHover(); }
      hideTooltip();
      return;
    }
    const h = state.hover;
    if (!h || h.kind !== 'cell' || h.i !== hit.i || h.j !== hit.j) {
      state.hover = { kind: 'cell', ...hit };
      drawHeatmapHover();
    }
    showTooltip(ev, hit.i, hit.j);
  });
  hmo.addEventListener('mouseleave', () => { state.hover = null; drawHeatmapHover(); hideTooltip(); });

  const hvo = $('headview-overlay');
  hvo.addEventListener('mousemove', (ev) => {
    const hit = hitHeadView(ev);
    const h = state.hover;
    const same = (!hit && !h) || (hit && h && hit.kind === h.kind && hit.i === h.i && hit.j === h.j);
    if (!same) { state.hover = hit; drawHeadViewHover(); }
  });
  hvo.addEventListener('mouseleave', () => { state.hover = null; drawHeadViewHover(); });

  $('head-grid').addEventListener('keydown', (ev) => {
    const m = state.model;
    if (!m || (ev.key !== 'ArrowRight' && ev.key !== 'ArrowLeft')) return;
    const heads = headsOf(m);
    const k = heads.indexOf(state.head) + (ev.key === 'ArrowRight' ? 1 : -1);
    const next = heads[(k + heads.length) % heads.length];
    selectHead(next);
    const el = $('head-grid').querySelector(`[data-head="${next}"]`);
    if (el) el.focus();
  });

  // Lay out again only when the width changed (a full-page screenshot, for
  // one, resizes the window's height; that must not drop the hover).
  let resizeTimer = 0, lastWidth = document.documentElement.clientWidth;
  window.addEventListener('resize', () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => {
      const w = document.documentElement.clientWidth;
      if (w === lastWidth) return;
      lastWidth = w;
      if (state.model) renderView();
    }, 120);
  });

  run('example');
}

init();
