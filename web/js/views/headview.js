// The head view (bertviz-like): query tokens left, key tokens right, a line
// from each to each with opacity = weight. The base canvas holds every
// line; hovering a token dims it on the overlay and draws only that token's
// lines at full strength.

import { state } from '../state.js';
import { $, COLORS, FONT, availableWidth, clearOverlay, ellipsize, sizeCanvas, tickStep } from '../canvas.js';
import { headColor } from '../colors.js';
import { headName, matrixOf } from '../tensor.js';

// What this view alone knows: the layout of its last drawing (CSS pixels)
// and the token under the pointer ({kind: 'query', i} or {kind: 'key', j}).
const local = { layout: null, hover: null };

// The centre of query token i / key token j (y in the canvas).
const yQuery = (g, i) => g.top + g.offQ + (i + 0.5) * g.rowH;
const yKey = (g, j) => g.top + g.offK + (j + 0.5) * g.rowH;

export function renderHeadView() {
  const r = state.response;
  const canvas = $('headview'), overlay = $('headview-overlay');
  local.hover = null;
  if (!r || !r.weights) { sizeCanvas(canvas, 1, 1); sizeCanvas(overlay, 1, 1); local.layout = null; return; }
  const { L, S } = r;
  const big = Math.max(L, S);
  const rowH = Math.max(1, Math.min(24, Math.floor(680 / big)));
  const labels = rowH >= 10;
  const fontPx = Math.max(9, Math.min(13, rowH - 3));
  const ctx0 = canvas.getContext('2d');
  ctx0.font = `${fontPx}px ${FONT}`;
  const widest = (arr) => arr.reduce((a, s) => Math.max(a, ctx0.measureText(s).width), 0);
  const tokW = labels ? Math.min(150, Math.ceil(Math.max(widest(r.tokens), widest(r.keyTokens))) + 16) : 40;
  // room for the "query" header too (right-aligned 8 px left of the lines)
  ctx0.font = `11px ${FONT}`;
  const labW = Math.max(tokW, Math.ceil(ctx0.measureText('query').width) + 14);
  const gap = Math.min(340, Math.max(200, availableWidth($('view-headview')) - 2 * labW - 40));
  const top = 28;
  const W = 2 * labW + gap, Hh = top + big * rowH + 12;
  const ctx = sizeCanvas(canvas, W, Hh);
  sizeCanvas(overlay, W, Hh);
  const xL = labW, xR = labW + gap;
  const g = { labW, top, rowH, labels, fontPx, xL, xR, offQ: ((big - L) * rowH) / 2, offK: ((big - S) * rowH) / 2,
              L, S, W, Hh };
  local.layout = g;
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
  ctx.fillText(headName(state.view.head), (xL + xR) / 2, 6);
  drawTokenLabels(ctx, g, -1, -1);
  drawLines(ctx, g, matrixOf(r, state.view.batch, state.view.head), headColor(state.view.head), null, null);
}

function drawTokenLabels(ctx, g, hiQ, hiK) {
  const r = state.response;
  ctx.textBaseline = 'middle';
  if (!g.labels) {
    ctx.fillStyle = COLORS.muted;
    ctx.font = `10px ${FONT}`;
    const step = tickStep(g.rowH, 22);
    ctx.textAlign = 'right';
    for (let i = 0; i < g.L; i += step) ctx.fillText(String(i), g.xL - 8, yQuery(g, i));
    ctx.textAlign = 'left';
    for (let j = 0; j < g.S; j += step) ctx.fillText(String(j), g.xR + 8, yKey(g, j));
    return;
  }
  ctx.font = `${g.fontPx}px ${FONT}`;
  ctx.textAlign = 'right';
  for (let i = 0; i < g.L; i++) {
    ctx.fillStyle = i === hiQ ? COLORS.hi : COLORS.text;
    ctx.fillText(ellipsize(ctx, r.tokens[i], g.labW - 14), g.xL - 8, yQuery(g, i));
  }
  ctx.textAlign = 'left';
  for (let j = 0; j < g.S; j++) {
    ctx.fillStyle = j === hiK ? COLORS.hi : COLORS.text;
    ctx.fillText(ellipsize(ctx, r.keyTokens[j], g.labW - 14), g.xR + 8, yKey(g, j));
  }
}

// Lines batched into 64 opacity levels: one path per level, however many
// lines (L x S = 262144 at 512 tokens). onlyQ / onlyK restrict to one token.
function drawLines(ctx, g, w, color, onlyQ, onlyK) {
  const S = g.S, thr = state.view.threshold;
  const LEVELS = 64;
  const paths = Array.from({ length: LEVELS + 1 }, () => null);
  const i0 = onlyQ ?? 0, i1 = onlyQ ?? g.L - 1;
  const j0 = onlyK ?? 0, j1 = onlyK ?? S - 1;
  const x0 = g.xL - 2, x1 = g.xR + 2;
  for (let i = i0; i <= i1; i++) {
    const y0 = yQuery(g, i);
    for (let j = j0; j <= j1; j++) {
      const v = w[i * S + j];
      if (v < thr) continue;
      const lvl = Math.min(LEVELS, Math.round(v * LEVELS));
      if (lvl <= 0) continue;
      const p = paths[lvl] || (paths[lvl] = new Path2D());
      p.moveTo(x0, y0);
      p.lineTo(x1, yKey(g, j));
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

function drawHover() {
  const g = local.layout, hv = local.hover;
  const ctx = clearOverlay($('headview-overlay'));
  if (!g || !hv) return;
  const w = matrixOf(state.response, state.view.batch, state.view.head);
  const thr = state.view.threshold;
  ctx.fillStyle = 'rgba(21, 27, 35, 0.88)';
  ctx.fillRect(0, g.top - 2, g.W, g.Hh - g.top + 2);
  const color = headColor(state.view.head);
  // Boxes behind the tokens on the other side, alpha = weight.
  ctx.fillStyle = color;
  if (hv.kind === 'query') {
    for (let j = 0; j < g.S; j++) {
      const v = w[hv.i * g.S + j];
      if (v < thr) continue;
      ctx.globalAlpha = Math.min(1, v) * 0.6;
      ctx.fillRect(g.xR + 2, yKey(g, j) - g.rowH / 2, g.labW - 4, g.rowH);
    }
  } else {
    for (let i = 0; i < g.L; i++) {
      const v = w[i * g.S + hv.j];
      if (v < thr) continue;
      ctx.globalAlpha = Math.min(1, v) * 0.6;
      ctx.fillRect(2, yQuery(g, i) - g.rowH / 2, g.labW - 4, g.rowH);
    }
  }
  ctx.globalAlpha = 1;
  const q = hv.kind === 'query' ? hv.i : null, k = hv.kind === 'key' ? hv.j : null;
  drawTokenLabels(ctx, g, q ?? -1, k ?? -1);
  drawLines(ctx, g, w, color, q, k);
}

function hit(ev) {
  const g = local.layout;
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

// The viewport point of query token k (side 'query') or key token k (side
// 'key'), just outside its label; null when the head view is not shown.
export function headTokenPoint(side, k) {
  const g = local.layout;
  if (!g || state.view.tab !== 'headview') return null;
  const r = $('headview').getBoundingClientRect();
  return side === 'query' ? { x: r.left + g.xL - 20, y: r.top + yQuery(g, k) }
                          : { x: r.left + g.xR + 20, y: r.top + yKey(g, k) };
}

export function initHeadView() {
  const overlay = $('headview-overlay');
  overlay.addEventListener('mousemove', (ev) => {
    const at = hit(ev), h = local.hover;
    const same = (!at && !h) || (at && h && at.kind === h.kind && at.i === h.i && at.j === h.j);
    if (!same) { local.hover = at; drawHover(); }
  });
  overlay.addEventListener('mouseleave', () => { local.hover = null; drawHover(); });
}
