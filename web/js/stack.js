// A stack of served layers run by the page: a two-layer attention-only
// transformer whose layers are served models (induction-l0 names its next
// layer in config.json's `next_layer`), the residual stream added here:
//
//   x0 = embedding[token] + positions[i]; x1 = x0 + layer0(x0); x2 = x1 + layer1(x1)
//   prediction at i = vocab[argmax x2[i] · unembeddingᵀ] (readout.js predict)
//
// Each layer advances its own sequence on the server (docs/sequences.md):
// a prompt chunk starts it (sequence_start, all rows), a step sends only
// the new token's row of that layer's input, so a request does not grow
// with the position. No DOM.
//
//   const layers = stackOf(info, modelOf);       // [info0, info1, ...] or null
//   const s = new SequenceStack(layers);
//   await s.run(ids);     // new sequences, ids as one prompt chunk -> {ok} or {error, lost}
//   await s.run([id]);    // one more token: a step on every layer
//   s.layerResponse(l);   // layer l's maps so far, shaped as tensor.js decodeResponse
//   await s.end();        // sequence_end (without a step) on every layer

import { embedIds, inferV2, tokenize } from './models.js';
import { predict } from './readout.js';
import { figureText, headWhat } from './headlabels.js';

// The layers of the stack starting at `info` (following next_layer through
// the served models modelOf knows), or null when info starts none.
export function stackOf(info, modelOf) {
  const c = info && info.config;
  if (!info || !info.trained || !Array.isArray(c.positions) || !Array.isArray(c.unembedding) ||
      typeof c.next_layer !== 'string') return null;
  const layers = [info];
  for (let next = modelOf(c.next_layer); next && layers.length < 8;
    next = typeof next.config.next_layer === 'string' ? modelOf(next.config.next_layer) : null) layers.push(next);
  return layers.length > 1 ? layers : null;
}

// 128 random bits in hex: an id nobody can guess (docs/sequences.md).
export function newSequenceId() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

// A typed text as tokens of the stack's vocabulary, 1 to P of them
// (models.js tokenize; throws RangeError in words).
export function stackTokens(info, text) {
  const P = info.config.positions.length;
  return tokenize({ ...info, config: { ...info.config, input: { min_length: 1, max_length: P } } }, text);
}

// The longest segment repeated right after itself in `tokens`: {start, m}
// (copies at start … start+m−1 and start+m … start+2m−1), or null.
export function findRepeat(tokens) {
  for (let m = Math.floor(tokens.length / 2); m >= 2; m--) {
    for (let s = 0; s + 2 * m <= tokens.length; s++) {
      let k = 0;
      while (k < m && tokens[s + k] === tokens[s + m + k]) k++;
      if (k === m) return { start: s, m };
    }
  }
  return null;
}

// Where an ideal induction head looks, for the first n rows: query i in the
// second copy of the repeat attends to key i − m + 1 (the token after the
// previous occurrence of its own token). [[i, j], ...]
export function idealInduction(repeat, n) {
  if (!repeat) return [];
  const cells = [];
  for (let i = repeat.start + repeat.m; i < Math.min(n, repeat.start + 2 * repeat.m); i++) cells.push([i, i - repeat.m + 1]);
  return cells;
}

const isLost = (err) => err.status === 400 && /does not exist|sequence_not_found/.test(err.message);

export class SequenceStack {
  constructor(layers) {
    this.layers = layers;
    const c = layers[0].config;
    this.vocab = c.vocab;
    this.P = c.positions.length;
    this.E = c.embedding[0].length;
    this.ids = [];             // token ids so far
    this.n = 0;
    // xLast: the residual stream after the last layer, P x E; out[l]: layer
    // l's attention output; w[l]: its weights, H x P x P.
    this.xLast = new Float32Array(this.P * this.E);
    this.out = layers.map(() => new Float32Array(this.P * this.E));
    this.w = layers.map((info) => new Float32Array(info.H * this.P * this.P));
    this.seq = layers.map(() => '');   // each layer's sequence id ('' = none)
    this.synced = false;               // the server's caches hold exactly this.ids
    this.lastExchange = null;
    this.lastBytes = 0;                // the last call's answers, in bytes
  }

  // One call per layer with rows `from` … from + ids.length − 1: a prompt
  // chunk that starts new sequences (start) or a step. The answers are
  // kept only when every layer succeeded.
  async advance(ids, start) {
    const from = start ? 0 : this.n, k = ids.length, n = from + k, E = this.E;
    const all = this.ids.slice(0, from).concat(ids).map((i) => this.vocab[i]);
    let x = embedIds(this.layers[0].config, ids, from);
    const got = [];
    let bytes = 0;
    for (let l = 0; l < this.layers.length; l++) {
      const info = this.layers[l];
      const params = { sequence_id: this.seq[l], ...(start ? { sequence_start: true } : {}) };
      const input = { tokens: all.slice(from), keyTokens: all, query: x };
      const res = await inferV2(info, input, params, `stack-${l}`, null, { 'X-Sequence-Id': this.seq[l] });
      if (res.aborted) return { error: { status: 0, code: '', message: 'the request was cancelled' } };
      if (res.error) return { error: res.error, lost: isLost(res.error) };
      const r = res.response;
      if (r.L !== k || r.S !== n || !r.weights) return { error: { status: 0, code: '', message: `${info.name} answered ${r.L} x ${r.S} weights, expected ${k} x ${n}` } };
      bytes += res.bytes;
      const next = new Float32Array(k * E);
      for (let q = 0; q < k * E; q++) next[q] = x[q] + r.output[q];
      got.push({ r, exchange: { endpoint: `POST /v2/models/${info.name}/infer`, request: res.request, response: res.answer } });
      x = next;
    }
    // Every layer answered: keep the rows.
    got.forEach(({ r }, l) => {
      this.out[l].set(r.output, from * E);
      const H = this.layers[l].H, P = this.P;
      for (let h = 0; h < H; h++) {
        for (let q = 0; q < k; q++) {
          const dst = (h * P + from + q) * P;
          this.w[l].set(r.weights.subarray((h * k + q) * n, (h * k + q + 1) * n), dst);
          this.w[l].fill(0, dst + n, dst + P);
        }
      }
    });
    this.xLast.set(x, from * E);
    this.ids = this.ids.slice(0, from).concat(ids);
    this.n = n;
    this.lastExchange = got[got.length - 1].exchange;
    this.lastBytes = bytes;
    return { ok: true };
  }

  // New sequences on every layer with `ids` as one prompt chunk (the old
  // ones ended first).
  async restart(ids) {
    await this.end();
    this.seq = this.layers.map(() => newSequenceId());
    this.synced = false;
    const r = await this.advance(ids, true);
    this.synced = !r.error;
    return r;
  }

  // `ids` appended: as a step when the caches hold the tokens so far, else
  // (a failed step before) new sequences from every token kept here. A
  // sequence the server lost (400, e.g. after a restart) is started again
  // from the tokens kept here, once: {ok, restarted} or {error}.
  async append(ids) {
    if (this.n + ids.length > this.P) return { error: { status: 0, code: '', message: `the model has ${this.P} positions` } };
    if (!this.synced) return { ...(await this.restart(this.ids.concat(ids))), restarted: true };
    const r = await this.advance(ids, false);
    if (r.lost) return { ...(await this.restart(this.ids.concat(ids))), restarted: true, lost: true };
    if (r.error) this.synced = false;
    return r;
  }

  // Ends every layer's sequence without a step (sequence_end, no inputs);
  // keepalive: the requests outlive the page (on leaving it).
  async end(keepalive = false) {
    const ids = this.seq;
    this.seq = this.layers.map(() => '');
    this.synced = false;
    await Promise.all(this.layers.map((info, l) => ids[l] && fetch(`v2/models/${encodeURIComponent(info.name)}/infer`, {
      method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Sequence-Id': ids[l] },
      body: JSON.stringify({ parameters: { sequence_id: ids[l], sequence_end: true } }), keepalive,
    }).catch(() => null)));
  }

  // The predicted token at each position so far: the argmax of the last
  // residual stream's rows through the config's unembedding (readout.js).
  predictions() {
    return predict(this.layers[0].config, this.xLast.subarray(0, this.n * this.E));
  }

  tokens() {
    return this.ids.map((i) => this.vocab[i]);
  }

  // Layer l's maps for the first n tokens, shaped as tensor.js
  // decodeResponse's answer (a new object each time: the views cache by
  // it), with `layer`, what each head does (headRoles: headlabels.js
  // headWhat, measured over the ideal induction cells `cells`; null where
  // nothing says), each head's label (headLabels: that, else "not measured
  // (one token)") and the figure behind it in words (headFigures, '' for none). Its json names the layer but no `model`: a layer's own
  // output is not the stack's answer, which predictions() reads from the
  // residual stream.
  layerResponse(l, cells = idealInduction(findRepeat(this.tokens()), this.n)) {
    const info = this.layers[l], H = info.H, n = this.n, P = this.P, E = this.E;
    const weights = new Float32Array(H * n * n);
    for (let h = 0; h < H; h++) for (let i = 0; i < n; i++) weights.set(this.w[l].subarray((h * P + i) * P, (h * P + i) * P + n), (h * n + i) * n);
    const tokens = this.tokens();
    const r = { N: 1, H, L: n, S: n, E, headDim: E / H, perHead: true, tokens, keyTokens: tokens.slice(), weights,
                weightsShape: [1, H, n, n], output: this.out[l].slice(0, n * E), outputShape: [1, n, E],
                json: { layer: info.name, cache_length: n }, reduced: null, layer: l };
    const what = headWhat(this.layers[0].config, l, r, cells);
    r.headRoles = what.map((x) => x.what);
    r.headLabels = what.map((x) => x.what || 'not measured (one token)');
    r.headFigures = what.map(figureText);
    return r;
  }
}
