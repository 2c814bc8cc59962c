// Reduced attention weights (docs/api.md, "Reduced weights": weights_pool, weights_top_k)
// as the page draws them, and when the page asks for them.
//
//   reduceFor(L, S, H, mode)     -> {pool: p} | {topK: k} | null, the request's choice
//   decodeReduced(json, ..., {decodeFull, decodeTensor})
//                                -> a decoded response (tensor.js's, which lends its decoders)
//                                   whose map is the reduced one
//
// Pooled: each cell of a ⌈L/p⌉ × ⌈S/p⌉ map is the mean of a p × p tile of
// the weights; the response's L and S are the map's, its labels the ranges
// of positions a tile covers ("8–15"), and `reduced` = {kind: 'pool', p,
// L, S (of the full weights)}. Top-k: each row's k largest weights with
// their keys, drawn as an L × S map that is zero outside them (a sparse
// heatmap); `reduced` = {kind: 'topk', k, values, indices}. Only sizes up
// to FULL_LIMIT are made dense; above it the page asks for pooled weights.
// No DOM.

// Above this many weights (L·S·H per batch item, 64 MB as float32) the page
// asks for pooled weights on its own.
export const FULL_LIMIT = 16 * 1024 * 1024;
// The largest map a head gets when pooled automatically: p = ⌈max(L, S) / 512⌉.
export const POOLED_SIDE = 512;

// The reduction a request asks for: mode 'auto' (full up to FULL_LIMIT,
// else pooled to at most POOLED_SIDE a side), 'full', {pool: p} or {topK: k}.
export function reduceFor(L, S, H, mode) {
  if (mode === 'full') return null;
  if (mode === 'auto') return L * S * H > FULL_LIMIT ? { pool: Math.ceil(Math.max(L, S) / POOLED_SIDE) } : null;
  return mode;
}

const range = (a, b) => (a === b ? String(a) : `${a}–${b}`);

export function decodeReduced(json, askedAverage, reduce, { decodeFull, decodeTensor }) {
  const { attention_weights_pooled: pooled, attention_weights_top_k: topk, ...rest } = json;
  const r = decodeFull(rest, askedAverage);   // output, sizes, labels; no weights
  const N = r.N, L = r.L, S = r.S;
  if (pooled !== undefined) {
    const w = decodeTensor(pooled, 'attention_weights_pooled');
    const rank = w.shape.length, Lp = w.shape[rank - 2], Sp = w.shape[rank - 1];
    const p = (reduce && reduce.pool) || Math.ceil(L / Lp);
    const perHead = rank === 4 || (rank === 3 && !askedAverage);
    if (w.data.length !== N * (perHead ? r.H : 1) * Lp * Sp) throw new Error(`attention_weights_pooled has shape (${w.shape})`);
    const tiles = (n, m) => Array.from({ length: m }, (_, a) => range(a * p, Math.min(n, (a + 1) * p) - 1));
    return { ...r, L: Lp, S: Sp, perHead, weights: w.data, weightsShape: w.shape, tokens: tiles(L, Lp), keyTokens: tiles(S, Sp),
             reduced: { kind: 'pool', p, L, S, tokens: r.tokens, keyTokens: r.keyTokens } };
  }
  const values = decodeTensor(topk.values, 'attention_weights_top_k.values');
  const indices = decodeTensor(topk.indices, 'attention_weights_top_k.indices', 'int32');
  const rank = values.shape.length, k = values.shape[rank - 1];
  const perHead = rank === 4 || (rank === 3 && !askedAverage);
  const rows = values.data.length / k;
  if (rows * S > FULL_LIMIT * Math.max(1, N)) throw new Error(`top-k of ${rows} rows x ${S} keys is too large to draw; ask for pooled weights`);
  const weights = new Float32Array(rows * S);
  for (let row = 0; row < rows; row++) {
    for (let t = 0; t < k; t++) weights[row * S + indices.data[row * k + t]] = values.data[row * k + t];
  }
  return { ...r, perHead, weights, weightsShape: values.shape,
           reduced: { kind: 'topk', k, values: values.data, indices: indices.data } };
}

// Words for the tooltip and the announcement about cell (i, j) of map row
// block `row0` (the flat row index of (batch, head, i) is row0 + i).
export function reducedNote(r, row0, i, j) {
  const x = r.reduced;
  if (!x) return '';
  if (x.kind === 'pool') {
    return `tile of ${x.p} × ${x.p}: queries ${r.tokens[i]}, keys ${r.keyTokens[j]}, mean weight`;
  }
  const row = row0 + i;
  for (let t = 0; t < x.k; t++) if (x.indices[row * x.k + t] === j) return `rank ${t + 1} of the row's top ${x.k}`;
  return `not in the row's top ${x.k} (drawn as 0)`;
}
