// A served model's answer in words. Its config.json's `unembedding` (V × E)
// and, when present, `unembedding_bias` (V) turn each row of E numbers (an
// attention layer's output, or a residual stream) into logits over the
// vocabulary, logits = x · unembeddingᵀ + unembedding_bias; the argmax of
// each row is the predicted token. `answer` in the config says what the
// right answer to an input is ("reverse", "next"), so the page can mark
// each prediction. No DOM.
//
//   canRead(config)                   // vocab and an unembedding that fit it
//   const z = logits(config, x)       // Float32Array rows × V, x: rows × E (row-major)
//   const ids = argmaxRows(z, V)      // token ids, one per row
//   const words = tokens(config, z)   // ['6', '2', ...]: vocab[argmax] of each row
//   predict(config, x)                // tokens(config, logits(config, x))
//   expected(config, input)           // the right tokens for the input tokens, or null
//   answerWhat(config)                // what they are, in words

// Whether config has a vocabulary and an unembedding of one row per token
// (and a bias of one number per token, when it has one).
export function canRead(config) {
  if (!config || !Array.isArray(config.vocab) || !Array.isArray(config.unembedding)) return false;
  const V = config.vocab.length, U = config.unembedding;
  if (U.length !== V || !Array.isArray(U[0]) || !U.every((row) => Array.isArray(row) && row.length === U[0].length))
    return false;
  const b = config.unembedding_bias;
  return b === undefined || (Array.isArray(b) && b.length === V);
}

// x (rows × E, E the unembedding's width) times unembeddingᵀ, plus the
// bias: rows × V logits, accumulated in float64.
export function logits(config, x) {
  const U = config.unembedding, V = U.length, E = U[0].length, b = config.unembedding_bias;
  if (x.length % E !== 0) throw new RangeError(`${x.length} numbers are not rows of E = ${E}`);
  const rows = x.length / E, out = new Float32Array(rows * V);
  for (let i = 0; i < rows; i++) {
    for (let v = 0; v < V; v++) {
      const u = U[v];
      let z = b ? b[v] : 0;
      for (let e = 0; e < E; e++) z += x[i * E + e] * u[e];
      out[i * V + v] = z;
    }
  }
  return out;
}

// The index of the largest of each row of V numbers (the first on a tie).
export function argmaxRows(z, V) {
  const ids = [];
  for (let i = 0; i < z.length / V; i++) {
    let best = 0;
    for (let v = 1; v < V; v++) if (z[i * V + v] > z[i * V + best]) best = v;
    ids.push(best);
  }
  return ids;
}

export const tokens = (config, z) => argmaxRows(z, config.vocab.length).map((id) => config.vocab[id]);

export const predict = (config, x) => tokens(config, logits(config, x));

// What config.answer names: the right answer to the input tokens.
const ANSWERS = {
  reverse: { what: 'the input reversed', of: (input) => input.slice().reverse() },
  // the last position's next token is not known yet: null
  next: { what: 'the next token', of: (input) => input.map((_, i) => (i + 1 < input.length ? input[i + 1] : null)) },
};

// The right tokens for the input tokens (null where not known), or null
// when config.answer names none of the above.
export function expected(config, input) {
  const a = ANSWERS[config.answer];
  return a ? a.of(input) : null;
}

// The right answer in words ("the input reversed"), or ''.
export const answerWhat = (config) => (ANSWERS[config.answer] ? ANSWERS[config.answer].what : '');
