// The head summary: per head, the entropy of its attention and its mean
// attention distance (stats.js), as two small bar charts (SVG), so the
// sharp heads and the far-looking ones stand out in a large grid. A bar
// carries its numbers (data-value, aria-label, <title>); clicking a bar
// selects its head.

import { state } from '../state.js';
import { $ } from '../canvas.js';
import { headColor } from '../colors.js';
import { matrixOf } from '../tensor.js';
import { headStats } from '../stats.js';
import { selectHead } from './maps.js';

const NS = 'http://www.w3.org/2000/svg';
const CHART_H = 34, GAP = 3, ROW_H = CHART_H + 34;

// Stats of every head of one batch item, computed once per (response, batch).
let cache = { r: null, b: -1, stats: null };

export function summaryStats(b) {
  const r = state.response;
  if (cache.r !== r || cache.b !== b) {
    const stats = [];
    for (let h = 0; h < r.H; h++) stats.push(headStats(matrixOf(r, b, h), r.L, r.S));
    cache = { r, b, stats };
  }
  return cache.stats;
}

function el(name, attrs, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

// One chart at height y0: a caption with the largest value, the bars (one
// per head, bw wide), the head numbers under them.
function chart(svg, y0, bw, { key, title, unit, values }) {
  const max = Math.max(...values, 1e-12);
  const x0 = 0, top = y0 + 16;
  svg.append(el('text', { x: x0, y: y0 + 10, class: 'summary-caption' }, `${title} (max ${max.toFixed(2)}${unit})`));
  values.forEach((v, h) => {
    const hgt = Math.max(1, (v / max) * CHART_H);
    const x = x0 + h * (bw + GAP);
    const bar = el('rect', { x, y: top + CHART_H - hgt, width: bw, height: hgt, rx: 1,
                             fill: headColor(h), 'data-head': h, 'data-value': v, 'data-testid': `summary-${key}-${h}`,
                             role: 'button', tabindex: -1,
                             'aria-label': `head ${h}: ${title} ${v.toFixed(3)}${unit}`,
                             class: state.view.head === h ? 'bar selected' : 'bar' });
    bar.append(el('title', {}, `head ${h}: ${title} ${v.toFixed(4)}${unit}`));
    svg.append(bar);
    if (bw >= 12 || h % 4 === 0) svg.append(el('text', { x: x + bw / 2, y: top + CHART_H + 11, class: 'summary-tick' }, String(h)));
  });
}

export function renderSummary() {
  const r = state.response, box = $('head-summary');
  box.textContent = '';
  box.hidden = !(r && r.weights && r.perHead && !r.reduced);   // entropy and distance need the full rows
  if (box.hidden) return;
  const stats = summaryStats(state.view.batch);
  const n = stats.length;
  const bw = n <= 8 ? 20 : Math.max(3, Math.floor(320 / n) - GAP);
  const width = Math.max(210, n * (bw + GAP));
  const svg = el('svg', { width, height: 2 * ROW_H, viewBox: `0 0 ${width} ${2 * ROW_H}`, role: 'group',
                          'aria-label': 'head summary: entropy and mean attention distance per head' });
  chart(svg, 0, bw, { key: 'entropy', title: 'entropy', unit: ' nats', values: stats.map((s) => s.entropy) });
  chart(svg, ROW_H, bw, { key: 'distance', title: 'mean distance |i − j|', unit: '', values: stats.map((s) => s.distance) });
  svg.addEventListener('click', (ev) => {
    const h = ev.target.getAttribute && ev.target.getAttribute('data-head');
    if (h !== null && h !== undefined) selectHead(Number(h));
  });
  box.append(svg);
}

// The selected head's bars outlined (without drawing the charts again).
export function markSelectedBars() {
  for (const b of $('head-summary').querySelectorAll('rect.bar'))
    b.classList.toggle('selected', b.getAttribute('data-head') === String(state.view.head));
}
