// The large heatmap of the chosen map: query tokens down, key tokens
// across, the colour legend beside it, a tooltip with the exact weight
// under the pointer. The map is drawn from its offscreen image scaled up
// without smoothing; hovering only redraws a transparent overlay.
// Keyboard: the overlay takes the focus; the arrow keys move the
// highlighted cell (clamped at the edges), Home / End go to the row's first
// / last key, Page Down / Page Up to the next / previous head on the same
// cell, and each move is announced in #heatmap-live (aria-live).

import { state } from '../state.js';
import { $, COLORS, FONT, availableWidth, clearOverlay, drawCaption, drawColumnLabels, drawRowLabels, sizeCanvas,
         tickStep } from '../canvas.js';
import { VIRIDIS, drawLegend, formatValue } from '../colors.js';
import { AVG, formatFloat32, headsOf, matrixOf } from '../tensor.js';
import { reducedNote } from '../reduced.js';
import { mapImage, mapLabel, selectHead } from './maps.js';

// What this view alone knows: the layout of its last drawing ({left, top,
// cell, L, S} in CSS pixels) and the cell under the pointer ({i, j}).
const local = { layout: null, hover: null };
// Called with the layout after each drawing (stepper.js draws over the map).
const drawnHooks = [];
export const onHeatmapDrawn = (fn) => drawnHooks.push(fn);
export const heatmapLayout = () => (local.layout && state.view.tab === 'heatmap' ? { ...local.layout } : null);

export function renderHeatmap() {
  const r = state.response;
  const canvas = $('heatmap'), overlay = $('heatmap-overlay');
  // The keyboard's cell survives a redraw (another head, the threshold)
  // while the map has the focus; the pointer's does not.
  const kept = document.activeElement === overlay ? local.hover : null;
  local.hover = null;
  hideTooltip();
  if (!r || !r.weights) {
    sizeCanvas(canvas, 1, 1);
    sizeCanvas(overlay, 1, 1);
    $('legend').style.display = 'none';
    local.layout = null;
    for (const fn of drawnHooks) fn();
    return;
  }
  $('legend').style.display = '';
  const img = mapImage(state.view.batch, state.view.head);
  const { L, S } = r;
  const rows = r.tokens, cols = r.keyTokens;
  const avail = availableWidth($('view-heatmap')) - 110;   // legend and margins
  const room = roomBelow(canvas);
  const measure = canvas.getContext('2d');
  // First guess of the cell size, then the label margins it implies. A
  // long sequence: up to 640 px and 40 px a cell, larger where the window
  // has the room below the map's top. A short one (40 px cells within
  // 640): as large as that room, so the map fills a large window and stays
  // on screen in a small one (cells of 16 to 96 px).
  const fits = (px) => Math.floor(px / Math.max(L, S));
  const short = fits(640) >= 40;
  let cell = short ? Math.max(16, Math.min(96, fits(room - 60)))
                   : Math.min(96, Math.max(fits(640), fits(room - 60)));
  cell = Math.max(1, Math.min(cell, fits(avail - 120)));
  const labels = cell >= 10;
  const fontPx = Math.max(9, Math.min(13, cell - 3));
  measure.font = `${fontPx}px ${FONT}`;
  const widest = (arr) => arr.reduce((a, s) => Math.max(a, measure.measureText(s).width), 0);
  const left = labels ? Math.min(130, Math.ceil(widest(rows)) + 14) : 44;
  const colW = labels ? Math.min(110, Math.ceil(widest(cols))) : 0;
  const top = labels ? Math.ceil(colW * Math.SQRT1_2) + 22 : 30;
  const right = labels ? Math.ceil(colW * Math.SQRT1_2) + 8 : 10;
  cell = Math.max(1, Math.min(cell, Math.floor((avail - left - right) / S) || 1));
  if (short || cell > 40) cell = Math.min(cell, Math.max(short ? 16 : 40, Math.floor((room - top - 28) / L)));
  // A stack's map stays on screen under the step controls (10 px cells at least: the labels).
  else if (state.stack) cell = Math.min(cell, Math.max(10, Math.floor((room - top - 28) / L)));
  const gw = S * cell, gh = L * cell;
  const x = r.reduced;
  const caption = x && x.kind === 'pool'
    ? `rows: query tiles (L = ${x.L} in ${L})   columns: key tiles (S = ${x.S} in ${S}); each cell the mean of ${x.p} × ${x.p} weights`
    : `rows: query (L = ${L})   columns: key (S = ${S})` + (x ? `; each row's top ${x.k}, the rest drawn as 0` : '');
  measure.font = `11px ${FONT}`;
  const W = Math.max(left + gw + right, left + Math.ceil(measure.measureText(caption).width) + 8), Hh = top + gh + 28;
  const ctx = sizeCanvas(canvas, W, Hh);
  sizeCanvas(overlay, W, Hh);
  ctx.fillStyle = COLORS.bg;
  ctx.fillRect(0, 0, W, Hh);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(img.canvas, left, top, gw, gh);

  drawRowLabels(ctx, { n: L, names: labels ? rows : null, left, top, cell, fontPx, minTickPx: 26 });
  if (labels) {
    drawColumnLabels(ctx, cols, left, top, cell);
  } else {
    ctx.textAlign = 'center';
    ctx.textBaseline = 'bottom';
    const step = tickStep(cell, 26);
    for (let j = 0; j < S; j += step) ctx.fillText(String(j), left + (j + 0.5) * cell, top - 4);
  }
  drawCaption(ctx, caption, left, top + gh + 10);
  local.layout = { left, top, cell, L, S };
  if (kept && kept.i < L && kept.j < S) moveKeyboard(0, 0, null, kept);
  for (const fn of drawnHooks) fn();

  const thr = state.view.threshold;
  drawLegend($('legend'), {
    height: Math.max(160, Math.min(gh, 640)), scale: VIRIDIS, title: 'weight',
    ticks: [1, 0.75, 0.5, 0.25, 0].map((f) => ({ at: f, value: f * img.max })),
    note: thr > 0 ? [`< ${formatValue(thr)}`, 'hidden'] : [],
  });
}

// The height from the top of el to the bottom of the window when the page
// is scrolled to its top, less what goes under the map (the answer line),
// at least 200 px.
function roomBelow(el) {
  const top = el.getBoundingClientRect().top + window.scrollY;
  return Math.max(200, window.innerHeight - top - ($('answer').hidden ? 20 : 90));
}

// The cell (query i, key j) in CSS pixels relative to the viewport, and its
// centre in page coordinates; null when the heatmap is not shown.
export function cellRect(i, j) {
  const g = local.layout;
  if (!g || state.view.tab !== 'heatmap') return null;
  const r = $('heatmap').getBoundingClientRect();
  const x = r.left + g.left + j * g.cell, y = r.top + g.top + i * g.cell;
  const cx = x + g.cell / 2, cy = y + g.cell / 2;
  return { x, y, w: g.cell, h: g.cell, cx, cy, pageX: cx + window.scrollX, pageY: cy + window.scrollY };
}

// The centre of that cell in the heatmap canvas's own pixels.
export function cellPixel(i, j) {
  const g = local.layout;
  if (!g) return null;
  const dpr = $('heatmap').width / parseFloat($('heatmap').style.width);
  return { x: Math.floor((g.left + (j + 0.5) * g.cell) * dpr), y: Math.floor((g.top + (i + 0.5) * g.cell) * dpr) };
}

function hit(ev) {
  const g = local.layout;
  if (!g) return null;
  const r = $('heatmap-overlay').getBoundingClientRect();
  const x = ev.clientX - r.left - g.left, y = ev.clientY - r.top - g.top;
  const j = Math.floor(x / g.cell), i = Math.floor(y / g.cell);
  return i >= 0 && j >= 0 && i < g.L && j < g.S ? { i, j } : null;
}

// The hovered cell outlined, its row and column shaded, its labels lit.
function drawHover() {
  const g = local.layout;
  const ctx = clearOverlay($('heatmap-overlay'));
  if (!g || !local.hover) return;
  const { i, j } = local.hover;
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

// The tooltip for cell (i, j) near the viewport point (x, y); the same
// words go to the aria-live region.
function showTooltip(at, i, j) {
  const r = state.response, { batch, head, threshold } = state.view;
  const w = matrixOf(r, batch, head)[i * r.S + j];
  $('tip-query').textContent = r.tokens[i];
  $('tip-qi').textContent = `#${i}`;
  $('tip-key').textContent = r.keyTokens[j];
  $('tip-kj').textContent = `#${j}`;
  const text = formatFloat32(w);
  $('tip-weight').textContent = text;
  $('tip-head').textContent = mapLabel() + (w < threshold ? ' · below threshold (hidden)' : '');
  const note = head === AVG && r.reduced && r.reduced.kind === 'topk' ? 'the mean over heads of their top-k maps'
             : reducedNote(r, (r.perHead ? batch * r.H + (head === AVG ? 0 : head) : batch) * r.L, i, j);
  $('tip-note').textContent = note;
  $('tip-note').hidden = !note;
  $('heatmap-live').textContent = `query ${i} "${r.tokens[i]}", key ${j} "${r.keyTokens[j]}", weight ${text}` +
                                  (note ? ` (${note})` : '');
  const tip = $('tooltip');
  tip.hidden = false;
  const { x, y } = tipPlace(at, tip.offsetWidth, tip.offsetHeight, $('legend').getBoundingClientRect());
  tip.style.left = `${x}px`;
  tip.style.top = `${y}px`;
}

// Where a tw × th tooltip goes near the viewport point `at`: below right of
// it, else below left, above right, above left; the first that stays in the
// window and off the colour legend (the rectangle `avoid`), else the first
// in the window, else the first moved into it.
function tipPlace(at, tw, th, avoid) {
  const W = window.innerWidth - 8, H = window.innerHeight - 8;
  const spots = [[at.x + 16, at.y + 16], [at.x - tw - 16, at.y + 16], [at.x + 16, at.y - th - 16], [at.x - tw - 16, at.y - th - 16]]
    .map(([x, y]) => ({ x, y }));
  const inside = (p) => p.x >= 4 && p.y >= 4 && p.x + tw <= W && p.y + th <= H;
  const gap = 4;   // offsetWidth / offsetHeight are rounded
  const clear = (p) => p.x + tw + gap <= avoid.left || p.x >= avoid.right + gap || p.y + th + gap <= avoid.top ||
                       p.y >= avoid.bottom + gap;
  const p = spots.find((q) => inside(q) && clear(q)) || spots.find(inside) || spots[0];
  return { x: Math.max(4, Math.min(p.x, W - tw)), y: Math.max(4, Math.min(p.y, H - th)) };
}

function hideTooltip() {
  $('tooltip').hidden = true;
}

export function initHeatmap() {
  const overlay = $('heatmap-overlay');
  overlay.addEventListener('mousemove', (ev) => {
    const at = hit(ev);
    const h = local.hover;
    if (!at) {
      if (h) { local.hover = null; drawHover(); }
      hideTooltip();
      return;
    }
    if (!h || h.i !== at.i || h.j !== at.j) {
      local.hover = at;
      drawHover();
    }
    showTooltip({ x: ev.clientX, y: ev.clientY }, at.i, at.j);
  });
  overlay.addEventListener('mouseleave', () => { local.hover = null; drawHover(); hideTooltip(); });
  overlay.addEventListener('focus', () => { if (!local.hover) moveKeyboard(0, 0, null); });
  overlay.addEventListener('blur', () => { local.hover = null; drawHover(); hideTooltip(); });
  overlay.addEventListener('keydown', (ev) => {
    if ((ev.key === 'PageDown' || ev.key === 'PageUp') && state.response && state.response.weights) {
      ev.preventDefault();
      const heads = headsOf(state.response);
      const k = heads.indexOf(state.view.head) + (ev.key === 'PageDown' ? 1 : -1);
      selectHead(heads[(k + heads.length) % heads.length]);   // the redraw keeps and announces the cell
      return;
    }
    const step = KEYS[ev.key];
    if (!step || !local.layout) return;
    ev.preventDefault();
    moveKeyboard(step[0], step[1], ev.key);
  });
}

// Key -> [row step, column step]; Home / End are handled in moveKeyboard.
const KEYS = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1], Home: [0, 0], End: [0, 0] };

function moveKeyboard(di, dj, key, from = local.hover) {
  const g = local.layout;
  if (!g) return;
  const h = from || { i: 0, j: 0 };
  const clamp = (v, n) => Math.max(0, Math.min(n - 1, v));
  const i = clamp(h.i + di, g.L);
  const j = key === 'Home' ? 0 : key === 'End' ? g.S - 1 : clamp(h.j + dj, g.S);
  local.hover = { i, j };
  drawHover();
  const c = cellRect(i, j);
  showTooltip({ x: c.x + c.w, y: c.y + c.h }, i, j);
}

// The cell the keyboard or the pointer highlights ({i, j}), or null.
export const highlightedCell = () => (local.hover ? { ...local.hover } : null);
