// Export: the current view as PNG (its canvases side by side under a title
// line), the large heatmap as SVG (svg.js: a <rect> per weight, labels, a
// legend; on the Compare tab its three maps), and the last exchange with the service as JSON ({endpoint,
// request, response}, the texts as sent and received), each downloaded as
// a file named after the view, head and batch item.

import { state } from '../state.js';
import { $, COLORS, FONT } from '../canvas.js';
import { DIFF, VIRIDIS, cellImage, colorFor, diffColor, diffIndex, formatValue, lutIndex } from '../colors.js';
import { compareMaps, compareRanges } from './compare.js';
import { AVG, matrixOf } from '../tensor.js';
import { heatmapSvg, legendSvg, svgDocument } from '../svg.js';
import { mapImage, mapLabel } from './maps.js';

const PARTS = { heatmap: ['heatmap', 'legend'], headview: ['headview'], output: ['output-canvas', 'output-legend'],
                compare: ['compare-canvas', 'compare-legend'] };
const WHAT = { heatmap: 'attention weights', headview: 'head view', output: 'output', compare: 'comparison' };

function download(blob, name) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

function baseName(what) {
  const { head, batch } = state.view;
  return `attention-${what}-${head === AVG ? 'avg' : `head${head}`}${state.response.N > 1 ? `-batch${batch}` : ''}`;
}

export function exportPng() {
  const r = state.response, { tab } = state.view;
  if (!r || !PARTS[tab]) return;
  const parts = PARTS[tab].map($);
  const dpr = window.devicePixelRatio || 1;
  const pad = Math.round(16 * dpr), titleH = Math.round(30 * dpr), gap = Math.round(12 * dpr);
  const W = pad * 2 + parts.reduce((a, c) => a + c.width, 0) + gap * (parts.length - 1);
  const H = pad * 2 + titleH + Math.max(...parts.map((c) => c.height));
  const out = document.createElement('canvas');
  out.width = W;
  out.height = H;
  const ctx = out.getContext('2d');
  ctx.fillStyle = COLORS.bg;
  ctx.fillRect(0, 0, W, H);
  ctx.fillStyle = COLORS.text;
  ctx.font = `${Math.round(14 * dpr)}px ${FONT}`;
  ctx.textBaseline = 'top';
  ctx.fillText(`${state.title} — ${WHAT[tab]}, ${mapLabel(', ')}`, pad, pad);
  let x = pad;
  for (const c of parts) {
    ctx.drawImage(c, x, pad + titleH);
    if (c.id === 'headview') ctx.drawImage($('headview-overlay'), x, pad + titleH);
    x += c.width + gap;
  }
  out.toBlob((blob) => download(blob, `${baseName(tab)}.png`), 'image/png');
}

// The viridis legend of a map whose colour range is 0 … max.
export function viridisLegend(x, y, height, max) {
  const stops = Array.from({ length: 17 }, (_, k) => colorFor(k / 16, 1));
  return legendSvg({ x, y, height, stops, title: 'weight', id: 'viridis',
                     ticks: [1, 0.75, 0.5, 0.25, 0].map((f) => ({ at: f, label: formatValue(f * max) })) });
}

// The selected map as SVG: the cells as the heatmap draws them (threshold
// and colour range included), the tokens, the legend.
export function svgOfView() {
  const r = state.response;
  if (!r || !r.weights) return null;
  const { batch, head, threshold } = state.view;
  const img = mapImage(batch, head);
  const cell = Math.max(1, Math.min(24, Math.floor(640 / Math.max(r.L, r.S))));
  const map = heatmapSvg({ x: 12, y: 36, cell, L: r.L, S: r.S, rows: r.tokens, cols: r.keyTokens,
                           values: matrixOf(r, batch, head), image: img.canvas,
                           rgbOf: (v) => colorFor(v < threshold ? 0 : v, img.max) });
  const legendH = Math.max(120, Math.min(300, map.height - 40));
  const legend = viridisLegend(12 + map.width + 30, 60, legendH, img.max);
  return svgDocument(12 + map.width + 100, Math.max(36 + map.height, 80 + legendH) + 12,
                     `${state.title} — attention weights, ${mapLabel(', ')}`, [map.text, legend]);
}

// The Compare tab as SVG: A, B and B − A side by side, each with its
// legend, the cells as the tab draws them.
function svgOfCompare() {
  const r = state.response, m = compareMaps(), rg = compareRanges();
  if (m.error || !rg) return null;
  const cell = Math.max(1, Math.min(20, Math.floor(300 / Math.max(m.L, m.S))));
  const panels = [
    [m.a, (v) => colorFor(v, rg.a), VIRIDIS, (v) => lutIndex(v, rg.a), `A: ${$('cmp-a').selectedOptions[0].text}`],
    [m.b, (v) => colorFor(v, rg.b), VIRIDIS, (v) => lutIndex(v, rg.b), `B: ${$('cmp-b').selectedOptions[0].text}` +
      (state.compare.input === 'second' ? ', second input' : '')],
    [m.diff, (v) => diffColor(v, m.max), DIFF, (v) => diffIndex(v, m.max), `B − A (±${formatValue(m.max)})`],
  ];
  const rowsB = state.compare.input === 'second' && state.second ? state.second.response.tokens : r.tokens;
  let x = 12, height = 0;
  const parts = panels.map(([values, rgbOf, scale, indexOf, caption], k) => {
    const map = heatmapSvg({ x, y: 40, cell, L: m.L, S: m.S, rows: k === 1 ? rowsB : r.tokens,
                             cols: k === 1 && state.compare.input === 'second' && state.second ? state.second.response.keyTokens : r.keyTokens,
                             values, rgbOf, caption, image: cellImage(m.S, m.L, values, scale, indexOf) });
    x += map.width + 24;
    height = Math.max(height, map.height);
    return map.text;
  });
  const stops = Array.from({ length: 17 }, (_, k) => diffColor(k / 8 - 1, 1));
  parts.push(legendSvg({ x, y: 64, height: 160, stops, title: 'B − A', id: 'diverging',
                         ticks: [1, 0.5, 0, -0.5, -1].map((f) => ({ at: (f + 1) / 2, label: formatValue(f * m.max) })) }));
  return svgDocument(x + 80, Math.max(60 + height, 250), `${state.title} — comparison`, parts);
}

// What Export SVG writes for the current tab: the comparison on the Compare
// tab, else the selected map.
export function svgOfTab() {
  return state.view.tab === 'compare' ? svgOfCompare() : svgOfView();
}

export function exportSvg() {
  const text = svgOfTab();
  const what = state.view.tab === 'compare' ? 'compare' : 'heatmap';
  if (text) download(new Blob([text], { type: 'image/svg+xml' }), `${baseName(what)}.svg`);
}

// The last exchange: {"endpoint", "request", "response"}, the request and
// the response inserted as the texts that went over the wire (a v2 binary
// exchange: its JSON with the binary tensors written into "data").
export function exchangeJson() {
  const x = state.lastExchange;
  if (!x) return null;
  return `{"endpoint": ${JSON.stringify(x.endpoint)},\n "request": ${x.request},\n "response": ${x.response}}\n`;
}

export function exportJson() {
  const text = exchangeJson();
  if (text) download(new Blob([text], { type: 'application/json' }), `${baseName('exchange')}.json`);
}
