// Export PNG: the current view's canvases side by side under a title line,
// downloaded as a file named after the view, head and batch item.

import { state } from '../state.js';
import { $, COLORS, FONT } from '../canvas.js';
import { AVG } from '../tensor.js';
import { mapLabel } from './maps.js';

const PARTS = { heatmap: ['heatmap', 'legend'], headview: ['headview'], output: ['output-canvas', 'output-legend'] };
const WHAT = { heatmap: 'attention weights', headview: 'head view', output: 'output' };

export function exportPng() {
  const r = state.response, { tab, head, batch } = state.view;
  if (!r) return;
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
  const name = `attention-${tab}-${head === AVG ? 'avg' : `head${head}`}${r.N > 1 ? `-batch${batch}` : ''}.png`;
  out.toBlob((blob) => {
    const url = URL.createObjectURL(blob);
    const a = document.createElement('a');
    a.href = url;
    a.download = name;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }, 'image/png');
}
