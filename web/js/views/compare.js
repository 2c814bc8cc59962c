// Compare: two maps side by side and their difference. Map A is a head (or
// the average) of the current input; map B a head of the current input or
// of a second input (the same example, weights and options, other tokens:
// typed in this view and run here). The third panel is B − A on a
// diverging scale, blue (A larger) - white (equal) - red (B larger), the
// same range either side of zero, ±max |B − A|. A and B keep the colour
// range of the heatmap tab (0 … max of each map, or 0 … 1).

import { state, update } from '../state.js';
import { $, COLORS, FONT, drawCaption, drawColumnLabels, drawRowLabels, sizeCanvas, availableWidth } from '../canvas.js';
import { DIFF, VIRIDIS, cellImage, diffIndex, drawLegend, formatValue, lutIndex } from '../colors.js';
import { AVG, headName, headsOf, matrixOf } from '../tensor.js';
import { diffOf } from '../stats.js';

const local = { layout: null };

// The response map B comes from.
const responseB = () => (state.compare.input === 'second' && state.second ? state.second.response : state.response);

// The three maps: {a, b, diff, max (of |diff|), L, S, error}.
export function compareMaps() {
  const r = state.response, rb = responseB(), { a, b, input } = state.compare;
  if (!r || !r.weights) return { error: 'The response has no attention weights.' };
  if (input === 'second' && !state.second) return { error: 'Type a second input below and run it.' };
  if (!rb.weights || rb.L !== r.L || rb.S !== r.S)
    return { error: `The second input gives L = ${rb.L}, S = ${rb.S}; the first L = ${r.L}, S = ${r.S}. Type as many tokens to compare.` };
  const okHead = (resp, h) => (h === AVG || (resp.perHead && h < resp.H) ? h : AVG);
  const ma = matrixOf(r, state.view.batch, okHead(r, a));
  const mb = matrixOf(rb, Math.min(state.view.batch, rb.N - 1), okHead(rb, b));
  const d = diffOf(ma, mb);
  return { a: ma, b: mb, diff: d.values, max: d.max, L: r.L, S: r.S };
}

function fillSelect(sel, heads, value) {
  const was = String(value);
  sel.textContent = '';
  for (const h of heads) sel.add(new Option(headName(h), String(h)));
  sel.value = heads.map(String).includes(was) ? was : String(heads[0]);
}

const headValue = (v) => (v === AVG ? AVG : Number(v));

export function renderCompare() {
  const r = state.response, c = $('compare-canvas');
  $('cmp-second').hidden = state.compare.input !== 'second';
  if (!r || !r.weights) { sizeCanvas(c, 1, 1); local.layout = null; return; }
  fillSelect($('cmp-a'), headsOf(r), state.compare.a);
  fillSelect($('cmp-b'), headsOf(responseB().weights ? responseB() : r), state.compare.b);
  $('cmp-input').value = state.compare.input;
  const m = compareMaps();
  $('cmp-message').textContent = m.error || '';
  if (m.error) { sizeCanvas(c, 1, 1); local.layout = null; return; }
  const { L, S } = m;
  // The axes labelled with the tokens, as the heatmap's, when the cells
  // are large enough for text; else every few indices.
  const gap = 18, avail = availableWidth($('view-compare')) - 100 - 2 * gap;
  let cell = Math.max(1, Math.min(24, Math.floor((avail - 40) / (3 * S))));
  const labels = cell >= 10;
  const measure = c.getContext('2d');
  measure.font = `11px ${FONT}`;
  const widest = (arr) => arr.reduce((a, t) => Math.max(a, measure.measureText(t).width), 0);
  const left = labels ? Math.min(110, Math.ceil(widest(r.tokens)) + 14) : 40;
  const colW = labels ? Math.min(80, Math.ceil(widest(r.keyTokens))) : 0;
  const top = labels ? Math.ceil(colW * Math.SQRT1_2) + 30 : 22;
  if (labels) cell = Math.max(10, Math.min(cell, Math.floor((avail - left) / (3 * S))));
  const pw = S * cell, ph = L * cell;
  const W = left + 3 * pw + 2 * gap + 8 + (labels ? Math.ceil(colW * Math.SQRT1_2) : 0), Hh = top + ph + 26;
  const ctx = sizeCanvas(c, W, Hh);
  ctx.fillStyle = COLORS.bg;
  ctx.fillRect(0, 0, W, Hh);
  ctx.imageSmoothingEnabled = false;
  const unit = state.view.rangeMode === 'unit';
  const maxOf = (w) => (unit ? 1 : w.reduce((x, v) => (v > x ? v : x), 0));
  const ma = maxOf(m.a), mb = maxOf(m.b);
  const second = state.compare.input === 'second';
  const panels = [
    [cellImage(S, L, m.a, VIRIDIS, (v) => lutIndex(v, ma)), `A: ${headName(headValue(state.compare.a))}`],
    [cellImage(S, L, m.b, VIRIDIS, (v) => lutIndex(v, mb)), `B: ${headName(headValue(state.compare.b))}${second ? ', second input' : ''}`],
    [cellImage(S, L, m.diff, DIFF, (v) => diffIndex(v, m.max)), `B − A (±${formatValue(m.max)})`],
  ];
  panels.forEach(([img, title], k) => {
    const x = left + k * (pw + gap);
    ctx.drawImage(img, x, top, pw, ph);
    ctx.fillStyle = COLORS.text;
    ctx.textBaseline = labels ? 'top' : 'bottom';
    ctx.textAlign = 'left';
    ctx.font = `12px ${FONT}`;
    ctx.fillText(title, x, labels ? 2 : top - 5);
    ctx.font = `11px ${FONT}`;
    if (labels) drawColumnLabels(ctx, r.keyTokens, x, top, cell);
  });
  drawRowLabels(ctx, { n: L, names: labels ? r.tokens : null, left, top, cell, fontPx: 11, minTickPx: 22 });
  drawCaption(ctx, `rows: query (L = ${L})   columns: key (S = ${S})`, left, top + ph + 8);
  const index = (n) => Array.from({ length: n }, (_, k) => String(k));
  local.layout = { left, top, cell, gap, pw, L, S, max: m.max, ma, mb,
                   rows: labels ? r.tokens.slice() : index(L), cols: labels ? r.keyTokens.slice() : index(S), labels };
  drawLegend($('compare-legend'), {
    height: Math.max(140, Math.min(ph, 300)), scale: DIFF, title: 'B − A',
    ticks: [1, 0.5, 0, -0.5, -1].map((f) => ({ at: (f + 1) / 2, value: f * m.max })),
  });
}

// The centre of cell (i, j) of panel k (0: A, 1: B, 2: B − A) in the canvas's own pixels.
export function comparePixel(k, i, j) {
  const g = local.layout;
  if (!g) return null;
  const dpr = $('compare-canvas').width / parseFloat($('compare-canvas').style.width);
  return { x: Math.floor((g.left + k * (g.pw + g.gap) + (j + 0.5) * g.cell) * dpr),
           y: Math.floor((g.top + (i + 0.5) * g.cell) * dpr) };
}

// The tops of the colour ranges drawn: {a, b, diff}.
export const compareRanges = () => (local.layout ? { a: local.layout.ma, b: local.layout.mb, diff: local.layout.max } : null);

// The axis labels drawn: {rows, cols, tokens (true: the tokens, false:
// indices, the cells too small for text)}.
export const compareLabels = () => (local.layout ? { rows: local.layout.rows, cols: local.layout.cols, tokens: local.layout.labels } : null);

const setCompare = (part) => update({ compare: { ...state.compare, ...part } });

// runSecond(tokensText) -> the answer for the second input, as api.js's
// postAttention gives it ({response}, {error} or {aborted}).
export function initCompare(runSecond) {
  $('cmp-a').addEventListener('change', () => setCompare({ a: headValue($('cmp-a').value) }));
  $('cmp-b').addEventListener('change', () => setCompare({ b: headValue($('cmp-b').value) }));
  $('cmp-input').addEventListener('change', () => {
    if (!$('cmp-tokens').value.trim()) $('cmp-tokens').value = $('tokens').value;
    setCompare({ input: $('cmp-input').value });
  });
  $('cmp-run').addEventListener('click', async () => {
    $('cmp-message').textContent = 'computing…';
    const res = await runSecond($('cmp-tokens').value);
    if (res.aborted) return;
    if (res.error) { $('cmp-message').textContent = `Error: ${res.error.message}`; return; }
    update({ second: { response: res.response }, compare: { ...state.compare, input: 'second' } });
  });
}
