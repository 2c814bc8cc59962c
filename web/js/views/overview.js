// The layer × head overview: a small map of every head of every layer of
// a stack (state.stack), one row per layer; a single-layer answer is one
// row. Clicking a thumbnail opens that layer and head in the large views.
// Thumbnails follow the threshold and colour range of the large heatmap.

import { state, subscribe } from '../state.js';
import { $, sizeCanvas } from '../canvas.js';
import { VIRIDIS, cellImage, lutIndex } from '../colors.js';
import { matrixOf } from '../tensor.js';
import { mapImage, selectHead } from './maps.js';
import { showLayer } from './stepper.js';

const BOX = 56;   // px, the larger side of a thumbnail

// The layers shown: [{response, name}], from the stack or the one answer.
function layersShown() {
  const s = state.stack, r = state.response;
  if (s) return s.layers.map((x, l) => ({ response: x, name: s.names[l] }));
  return r && r.weights && r.perHead && !r.reduced ? [{ response: r, name: '' }] : [];
}

// The map of head h of answer r: the large views' cached image when r is
// the answer shown (maps.js), else drawn here the same way.
function mapOf(r, h) {
  if (r === state.response) return mapImage(state.view.batch, h).canvas;
  const w = matrixOf(r, state.view.batch, h), thr = state.view.threshold;
  let max = 1;
  if (state.view.rangeMode !== 'unit') { max = 0; for (let k = 0; k < w.length; k++) if (w[k] > max) max = w[k]; }
  return cellImage(r.S, r.L, w, VIRIDIS, (v) => (v >= thr ? lutIndex(v, max) : 0));
}

function thumbCanvas(r, h) {
  const img = mapOf(r, h);
  const scale = BOX / Math.max(r.L, r.S);
  const c = document.createElement('canvas');
  const ctx = sizeCanvas(c, Math.max(1, Math.round(r.S * scale)), Math.max(1, Math.round(r.L * scale)));
  ctx.imageSmoothingEnabled = scale < 1;
  ctx.drawImage(img, 0, 0, Math.round(r.S * scale), Math.round(r.L * scale));
  return c;
}

export function renderOverview() {
  const box = $('overview'), rows = layersShown();
  $('overview-card').hidden = rows.length === 0;
  box.textContent = '';
  const shownLayer = state.stack ? state.stack.layer : 0;
  rows.forEach(({ response: r, name }, l) => {
    const row = document.createElement('div');
    row.className = 'overview-row';
    row.dataset.testid = `overview-layer-${l}`;
    const rowLabel = document.createElement('span');
    rowLabel.className = 'overview-label';
    rowLabel.textContent = `layer ${l}` + (name ? ` · ${name}` : '');
    row.append(rowLabel);
    for (let h = 0; h < r.H; h++) {
      const btn = document.createElement('button');
      btn.type = 'button';
      btn.className = 'thumb';
      btn.dataset.testid = `overview-thumb-${l}-${h}`;
      // every caption "head h: what it does" (a single layer's: "head h")
      const caption = r.headLabels ? `head ${h}: ${r.headLabels[h]}` : `head ${h}`;
      const figure = r.headFigures && r.headFigures[h] ? `, ${r.headFigures[h]}` : '';
      btn.title = `Open layer ${l} head ${h} (${r.headLabels ? r.headLabels[h] : 'no label'}${figure}) in the large views`;
      btn.setAttribute('aria-pressed', String(l === shownLayer && state.view.head === h));
      const cap = document.createElement('span');
      cap.textContent = caption;
      btn.append(thumbCanvas(r, h), cap);
      btn.addEventListener('click', () => (state.stack ? showLayer(l, h) : selectHead(h)));
      row.append(btn);
    }
    box.append(row);
  });
  $('overview-sub').textContent = rows.length ? `${rows.length} × ${rows[0].response.H}` : '';
}

export function initOverview() {
  subscribe((changed, before) => {
    if ('stack' in changed || 'response' in changed) return renderOverview();
    if ('view' in changed) {
      const a = before.view, b = state.view;
      if (a.head !== b.head || a.batch !== b.batch || a.threshold !== b.threshold || a.rangeMode !== b.rangeMode) renderOverview();
    }
  });
}
