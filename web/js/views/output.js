// The output view: the shapes of the answer's tensors, and the output of
// the chosen batch item as a heatmap (rows: query positions, columns: the
// embedding dimensions; blue negative, red positive) with its legend.

import { state } from '../state.js';
import { $, COLORS, FONT, drawCaption, drawRowLabels, sizeCanvas } from '../canvas.js';
import { DIVERGING, cellImage, drawLegend } from '../colors.js';

// The layout of the last drawing, for the test hook: {cell, labels, fontPx}.
let layout = null;
export const outputLayout = () => (layout ? { ...layout } : null);

function shapesText(r) {
  const dims = (a) => `(${a.join(', ')})`;
  let text = `output (${r.outputShape.length === 3 ? 'N, L, E' : 'L, E'}) = ${dims(r.outputShape)}`;
  if (r.weightsShape) {
    const names = r.weightsShape.length === 4 ? 'N, H, L, S' : r.weightsShape.length === 2 ? 'L, S'
                : r.perHead ? 'H, L, S' : 'N, L, S';
    text += `    attention_weights (${names}) = ${dims(r.weightsShape)}`;
  } else {
    text += '    attention_weights: none';
  }
  return `${text}    head_dim = ${r.headDim}`;
}

export function renderOutput() {
  const r = state.response;
  const c = $('output-canvas');
  if (!r) { sizeCanvas(c, 1, 1); layout = null; return; }
  $('output-shape').textContent = shapesText(r);
  const batched = r.outputShape.length === 3;
  const rows = r.outputShape[batched ? 1 : 0];
  const cols = r.outputShape[r.outputShape.length - 1];
  const base = batched ? state.view.batch * rows * cols : 0;
  const data = r.output.subarray(base, base + rows * cols);
  let amax = 0;
  for (let k = 0; k < data.length; k++) amax = Math.max(amax, Math.abs(data[k]));
  const image = cellImage(cols, rows, data, DIVERGING, (v) => {
    const t = amax > 0 ? Math.round(((v / amax) * 0.5 + 0.5) * 255) : 128;
    return t < 0 ? 0 : t > 255 ? 255 : t;
  });
  const cell = Math.max(1, Math.min(28, Math.floor(Math.min(640 / cols, 420 / rows))));
  const labels = cell >= 10 && rows === r.L;
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
  ctx.drawImage(image, left, top, cols * cell, rows * cell);
  // the tokens at 10 px at least (rows of 10 px at least), else numbers at 10 px (drawRowLabels)
  const fontPx = labels ? Math.max(10, Math.min(13, cell - 2)) : 10;
  drawRowLabels(ctx, { n: rows, names: labels ? r.tokens : null, left, top, cell, fontPx, minTickPx: 22 });
  layout = { cell, labels, fontPx };
  drawCaption(ctx, caption, left, top + rows * cell + 8);
  ctx.textBaseline = 'bottom';
  ctx.fillText(r.N > 1 ? `batch item ${state.view.batch}` : 'output', left, top - 6);
  drawLegend($('output-legend'), {
    height: Math.max(140, Math.min(rows * cell, 300)), scale: DIVERGING, title: 'value',
    ticks: [1, 0.5, 0, -0.5, -1].map((f) => ({ at: (f + 1) / 2, value: f * amax })),
  });
}
