// The built-in examples, and the /attention request each one makes.
//
//   const req = buildExampleRequest(form);   // a request object; throws RangeError on bad input
//
// Embeddings and projection weights are generated here, deterministically:
// an FNV-1a hash of a token (or the seed) seeds a PRNG (mulberry32) that
// draws gaussians. No DOM.

import { f32Tensor } from './tensor.js';
import { numberFrom, variantFields } from './variants.js';
import { reduceFor } from './reduced.js';

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

const LONG_TEXT = ('attention lets every position of a sequence look at every other position ' +
  'and decide how much of each one to mix into its own representation . the query of a token ' +
  'is compared with the keys of all tokens , the scores are scaled and passed through a softmax ' +
  ', and the resulting weights average the values . several heads do this in parallel on ' +
  'smaller slices of the embedding , so one head can follow the previous word while another ' +
  'tracks a repeated name or the end of a sentence .').split(/\s+/);
const longTokens = (n) => Array.from({ length: n }, (_, i) => LONG_TEXT[i % LONG_TEXT.length]).join(' ');

export const EXAMPLES = {
  sentence: { title: 'Sentence self-attention', tokens: 'the cat sat on the mat because it was tired',
              keyTokens: null, E: 32, H: 4, mask: 'none', seed: 7 },
  causal: { title: 'Causal decoder', tokens: '<s> once upon a time a small robot learned to paint',
            keyTokens: null, E: 32, H: 4, mask: 'causal', seed: 11 },
  cross: { title: 'Cross-attention', tokens: 'le chat dort sur le tapis rouge',
           keyTokens: 'the cat is sleeping on the red mat', E: 32, H: 4, mask: 'none', seed: 5 },
  // Long: token vectors scaled down (embedGain) so the positional encoding
  // shows, as a band along the diagonal in the first heads.
  long: { title: 'Long sequence, L = 512', tokens: longTokens(512), keyTokens: null, E: 256, H: 16, mask: 'none', seed: 3,
          embedGain: 0.4 },
  // L·S·H = 268 M weights: the page asks for pooled weights (reduced.js).
  long4096: { title: 'Long sequence, L = 4096', tokens: longTokens(4096), keyTokens: null, E: 128, H: 16, mask: 'none',
              seed: 3, embedGain: 0.4 },
};

const splitTokens = (text) => text.trim().split(/\s+/).filter(Boolean);

// The embedding of a token: a gaussian vector (variance gain²) seeded by the
// token's hash (case-folded, so "The" and "the" agree). The sinusoidal
// positional encoding is added by the server (positional_encoding).
export function embed(tokens, E, gain = 1) {
  const x = new Float32Array(tokens.length * E);
  tokens.forEach((tok, i) => {
    const rng = mulberry32(fnv1a(tok.toLowerCase()) ^ 0x9e3779b9);
    for (let e = 0; e < E; e++) x[i * E + e] = gain * gaussian(rng);
  });
  return x;
}

// Random projections from the seed, packed as in_proj_weight (E + 2·Hkv·d,
// E): the q block (H·d = E rows), then the k and v blocks of the Hkv KV
// heads (Hkv·d rows each). KV head g's key projection is partly the query
// projection of the first query head of its group, g·H/Hkv (mix from 0.95
// down to 0.05 across KV heads), so the first heads attend to similar
// tokens and nearby positions, the last more freely. With Hkv = H every
// head is its own group and the numbers are those of plain multi-head
// attention.
function projections(E, H, Hkv, seed) {
  const rng = mulberry32((seed >>> 0) ^ 0x85ebca6b);
  const d = E / H, group = H / Hkv, Dkv = Hkv * d;
  const gain = 1.6 / Math.sqrt(E);
  const rand = () => gaussian(rng) * gain;
  const inProj = new Float32Array((E + 2 * Dkv) * E);
  for (let r = 0; r < E; r++) {
    const h = Math.floor(r / d);
    // The KV head whose k rows this q row seeds (the first query head of a group does), or -1.
    const g = h % group === 0 ? h / group : -1;
    const mix = g < 0 ? 0 : Hkv > 1 ? 0.95 - 0.9 * g / (Hkv - 1) : 0.8;
    const other = Math.sqrt(1 - mix * mix);
    const kRow = E + g * d + (r % d);
    for (let c = 0; c < E; c++) {
      const q = rand();
      inProj[r * E + c] = q;
      if (g >= 0) inProj[kRow * E + c] = mix * q + other * rand();
    }
  }
  for (let k = (E + Dkv) * E; k < (E + 2 * Dkv) * E; k++) inProj[k] = gaussian(rng) / Math.sqrt(E);
  const outProj = new Float32Array(E * E);
  for (let k = 0; k < E * E; k++) outProj[k] = gaussian(rng) / Math.sqrt(E);
  return { in_proj_weight: f32Tensor(inProj, [E + 2 * Dkv, E]), out_proj_weight: f32Tensor(outProj, [E, E]) };
}

// The request for the sidebar's form: {example (a key of EXAMPLES), tokens,
// keyTokens (text, words separated by white space), cross (key tokens
// given), E, H, mask ('none', 'causal', 'causal_lower_right', 'padding'),
// padK (padded keys), scale (text, '' for the default), seed, weightsMode
// (reduced.js reduceFor: 'auto', 'full', {pool: p}, {topK: k}), and the
// variant controls variants.js reads (hkv: KV heads, 0 = H, ...)}.
export function buildExampleRequest(form) {
  const gain = EXAMPLES[form.example].embedGain || 1;
  const tokens = splitTokens(form.tokens);
  if (tokens.length === 0) throw new RangeError('Type at least one token (words separated by spaces).');
  const cross = form.cross && splitTokens(form.keyTokens).length > 0;
  const keyTokens = cross ? splitTokens(form.keyTokens) : tokens;
  const { E, H } = form;
  const Hkv = form.hkv || H;
  if (H % Hkv !== 0) throw new RangeError(`${Hkv} KV heads do not divide ${H} heads.`);
  const req = {
    query: f32Tensor(embed(tokens, E, gain), [tokens.length, E]),
    num_heads: H,
    weights: projections(E, H, Hkv, form.seed),
    positional_encoding: 'sinusoidal',
    output_encoding: 'base64',
    tokens,
  };
  if (cross) {
    req.key = f32Tensor(embed(keyTokens, E, gain), [keyTokens.length, E]);
    req.key_tokens = keyTokens;
  }
  if (form.mask === 'causal' || form.mask === 'causal_lower_right') req.attn_mask = form.mask;
  if (form.mask === 'padding') {
    const k = Math.max(0, Math.min(keyTokens.length, form.padK | 0));
    req.key_padding_mask = keyTokens.map((_, j) => j >= keyTokens.length - k);
  }
  const scale = numberFrom(form.scale, 'Scale');
  if (scale !== undefined) req.scale = scale;   // the server names the problem if it is not > 0
  const reduce = reduceFor(tokens.length, keyTokens.length, H, form.weightsMode || 'auto');
  if (reduce && reduce.pool) req.weights_pool = reduce.pool;
  if (reduce && reduce.topK) req.weights_top_k = reduce.topK;
  return Object.assign(req, variantFields(form));
}
