// Per-head summaries of attention maps, for the head summary chart:
//
//   headStats(w, L, S)   -> {entropy, distance} of one L x S map (row-major)
//   diffOf(a, b)         -> Float32Array b - a, and its largest |value|
//
// entropy: each query row's −Σ_j w_ij ln w_ij, in nats (0 = the row puts all
// its weight on one key; ln S = uniform), averaged over the rows that see
// some key. distance: each row's Σ_j w_ij |i − j| (how far from the
// diagonal a head looks, in positions), averaged over the same rows. A row
// that sees no key (all zeros) counts in neither. No DOM.

export function headStats(w, L, S) {
  let ent = 0, dist = 0, rows = 0;
  for (let i = 0; i < L; i++) {
    let e = 0, d = 0, sum = 0;
    for (let j = 0; j < S; j++) {
      const v = w[i * S + j];
      if (v > 0) { e -= v * Math.log(v); d += v * Math.abs(i - j); sum += v; }
    }
    if (sum > 0) { ent += e; dist += d; rows++; }
  }
  return { entropy: rows ? ent / rows : 0, distance: rows ? dist / rows : 0 };
}

export function diffOf(a, b) {
  const out = new Float32Array(a.length);
  let max = 0;
  for (let k = 0; k < a.length; k++) {
    out[k] = b[k] - a[k];
    const m = Math.abs(out[k]);
    if (m > max) max = m;
  }
  return { values: out, max };
}
