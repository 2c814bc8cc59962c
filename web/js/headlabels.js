// What each head of a stack's layer does, in a few words: its label under
// the overview's thumbnails and over the large map, every one in the same
// form (no figure; the figure that chose it goes in a tooltip). No DOM.
//
//   1. the config's `circuit` names it: "previous-token head", "induction
//      head" (figure: the circuit's mean_weight, in training);
//   2. else the training figures per head in the config say it does the
//      same as the circuit's head of its layer, measured as the issue
//      measures the circuit (training.previous_token_weight_per_head for
//      the previous-token head's layer, mean weight ≥ 0.5;
//      training.induction_weight_per_head for the induction head's layer,
//      ≥ 0.4): "induction head" (figure: that, in training);
//   3. else measured on the map shown, over queries 1 … n − 1: the mean
//      weight on the previous token, on itself, on the first token; over
//      the queries whose token occurred before, on those earlier
//      occurrences (a duplicate-token head); and over the ideal induction
//      cells (query i in the second copy, key i − m + 1), on the token
//      after the earlier occurrence. The largest names it: "mostly the
//      first token" (figure: that mean, on the tokens shown);
//   4. else (one query, nothing to measure) what null.
//
//   headWhat(config, layer, r, cells)   // [{what (or null), figure (or null), basis}] per head;
//                                       // r as tensor.js decodeResponse (H, L = S = n, weights)
//   headRoles(config)                   // (layer, head) -> the circuit's name or null
//   measureHead(r, h, cells)            // {previous, same, itself, first, induction} (null: nothing to measure)

// The circuit's roles (config.circuit's keys), their names, the training
// figures per head of each (in config.training) and the bar a head's
// figure must reach to be called what the circuit's head is.
const ROLES = [
  { key: 'previous_token', name: 'previous-token head', figures: 'previous_token_weight_per_head', bar: 0.5 },
  { key: 'induction', name: 'induction head', figures: 'induction_weight_per_head', bar: 0.4 },
];

// What each head learned, from config.circuit: role(layer, head) ->
// 'previous-token head', 'induction head' or null.
export function headRoles(config) {
  const c = config.circuit || {};
  return (layer, head) => {
    const k = ROLES.find((x) => c[x.key] && c[x.key].layer === layer && c[x.key].head === head);
    return k ? k.name : null;
  };
}

// What a measured figure names, in the order that wins a tie.
const MEASURES = [
  ['previous', 'mostly the previous token'],
  ['induction', 'mostly key i − m + 1'],
  ['same', 'mostly the same token earlier'],
  ['itself', 'mostly itself'],
  ['first', 'mostly the first token'],
];

// Head h's mean weights (see above) on the n × n map of r, its tokens r.tokens.
export function measureHead(r, h, cells) {
  const n = r.L, w = r.weights, at = (i, j) => w[(h * n + i) * r.S + j];
  const mean = (xs) => (xs.length ? xs.reduce((s, v) => s + v, 0) / xs.length : null);
  const queries = Array.from({ length: Math.max(0, n - 1) }, (_, k) => k + 1);
  const same = (i) => r.tokens.slice(0, i).reduce((s, t, j) => s + (t === r.tokens[i] ? at(i, j) : 0), 0);
  return {
    previous: mean(queries.map((i) => at(i, i - 1))),
    same: mean(queries.filter((i) => r.tokens.slice(0, i).includes(r.tokens[i])).map(same)),
    itself: mean(queries.map((i) => at(i, i))),
    first: mean(queries.map((i) => at(i, 0))),
    induction: mean(cells.filter(([i, j]) => i < n && j < n).map(([i, j]) => at(i, j))),
  };
}

// What each head of layer `layer` (its maps in r) does, in words, and the
// figure that says so (see above): {what, figure, basis ('training' or
// 'measured')}; what and figure null when nothing says.
export function headWhat(config, layer, r, cells) {
  const role = headRoles(config), c = config.circuit || {}, t = config.training || {};
  return Array.from({ length: r.H }, (_, h) => {
    if (role(layer, h)) {
      const k = ROLES.find((x) => x.name === role(layer, h));
      const f = c[k.key].mean_weight;
      return { what: k.name, figure: typeof f === 'number' ? f : null, basis: 'training' };
    }
    for (const k of ROLES) {
      const f = Array.isArray(t[k.figures]) ? t[k.figures][h] : undefined;
      if (c[k.key] && c[k.key].layer === layer && typeof f === 'number' && f >= k.bar) return { what: k.name, figure: f, basis: 'training' };
    }
    const m = measureHead(r, h, cells);
    let best = null;
    for (const [key, name] of MEASURES) if (m[key] !== null && (!best || m[key] > best.v)) best = { v: m[key], name };
    return best ? { what: best.name, figure: best.v, basis: 'measured' } : { what: null, figure: null, basis: 'measured' };
  });
}

// A head's figure in words, for a tooltip: "mean weight 0.69 in training".
export function figureText(x) {
  return x.figure === null ? '' : `mean weight ${x.figure.toFixed(2)} ${x.basis === 'training' ? 'in training' : 'on the tokens shown'}`;
}
