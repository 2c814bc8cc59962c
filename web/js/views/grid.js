// The head grid ("model view"): a small heatmap per head and the average;
// clicking one, or the arrow keys, shows it in the large views.

import { state } from '../state.js';
import { $, sizeCanvas } from '../canvas.js';
import { headColor } from '../colors.js';
import { AVG, headName, headsOf } from '../tensor.js';
import { mapImage, selectHead } from './maps.js';

export function renderGrid() {
  const r = state.response;
  const grid = $('head-grid');
  grid.textContent = '';
  if (!r || !r.weights) {
    const p = document.createElement('p');
    p.className = 'hint';
    p.textContent = r ? 'The response has no attention weights (need_weights was false).' : '';
    grid.appendChild(p);
    return;
  }
  const heads = headsOf(r);
  const box = heads.length <= 9 ? 104 : 76;
  const big = Math.max(r.L, r.S);
  const scale = big <= box ? Math.floor(box / big) : box / big;
  const w = Math.max(1, Math.round(r.S * scale)), h = Math.max(1, Math.round(r.L * scale));
  for (const head of heads) {
    const btn = document.createElement('button');
    btn.type = 'button';
    btn.className = 'thumb' + (head === AVG ? ' avg' : '');
    btn.dataset.head = String(head);
    btn.dataset.testid = `head-thumb-${head}`;
    btn.title = `Show ${headName(head)} in the large views`;
    const c = document.createElement('canvas');
    const ctx = sizeCanvas(c, w, h);
    ctx.imageSmoothingEnabled = scale < 1;
    ctx.imageSmoothingQuality = 'high';
    ctx.drawImage(mapImage(state.view.batch, head).canvas, 0, 0, w, h);
    const label = document.createElement('span');
    const chip = `<svg width="8" height="8" aria-hidden="true"><circle cx="4" cy="4" r="4" fill="${headColor(head)}"/></svg>`;
    label.innerHTML = `${chip} ${headName(head)}`;
    btn.append(c, label);
    btn.addEventListener('click', () => selectHead(head));
    grid.appendChild(btn);
  }
  markSelectedThumb();
}

export function markSelectedThumb() {
  for (const el of $('head-grid').querySelectorAll('.thumb'))
    el.setAttribute('aria-pressed', String(el.dataset.head === String(state.view.head)));
}

export function initGrid() {
  $('head-grid').addEventListener('keydown', (ev) => {
    const r = state.response;
    if (!r || (ev.key !== 'ArrowRight' && ev.key !== 'ArrowLeft')) return;
    const heads = headsOf(r);
    const k = heads.indexOf(state.view.head) + (ev.key === 'ArrowRight' ? 1 : -1);
    const next = heads[(k + heads.length) % heads.length];
    selectHead(next);
    const el = $('head-grid').querySelector(`[data-head="${next}"]`);
    if (el) el.focus();
  });
}
