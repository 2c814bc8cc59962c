// The attention maps (one per head and the average) as the views show them:
// each map's offscreen image (one pixel per weight, viridis on the map's
// colour range, weights below the threshold as zero), shared by the head
// grid and the large heatmap; the chosen map's name; choosing one.

import { state, update } from '../state.js';
import { AVG, headName, matrixOf } from '../tensor.js';
import { VIRIDIS, cellImage, lutIndex } from '../colors.js';

// The images drawn for one response, threshold and colour range: "batch:head" -> {canvas, max}.
let cache = { key: null, images: new Map() };

// The image of head `h` (or 'avg') of batch item `b`: {canvas (S x L), max
// (the top of its colour range)}.
export function mapImage(b, h) {
  const { response: r, view } = state;
  const key = [r, view.threshold, view.rangeMode];
  if (!cache.key || cache.key.some((x, k) => x !== key[k])) cache = { key, images: new Map() };
  const name = `${b}:${h}`;
  let img = cache.images.get(name);
  if (img) return img;
  const w = matrixOf(r, b, h);
  let max = 1;
  if (view.rangeMode !== 'unit') {
    max = 0;
    for (let k = 0; k < w.length; k++) if (w[k] > max) max = w[k];
  }
  const thr = view.threshold;
  img = { canvas: cellImage(r.S, r.L, w, VIRIDIS, (v) => (v >= thr ? lutIndex(v, max) : 0)), max };
  cache.images.set(name, img);
  return img;
}

// What the large views show, in words: "head 2 · batch 1".
export function mapLabel(sep = ' · ') {
  const { response: r, view } = state;
  const role = r && r.headRoles && view.head !== AVG && r.headRoles[view.head] ? `${sep}${r.headRoles[view.head]}` : '';
  return `${r && r.layer !== undefined ? `layer ${r.layer}${sep}` : ''}${headName(view.head)}${role}${r && r.N > 1 ? `${sep}batch ${view.batch}` : ''}`;
}

// Shows head `head` (a number, or 'avg') in the large views, if the response has it.
export function selectHead(head) {
  const r = state.response;
  const h = head === AVG ? AVG : Number(head);
  if (!r || !r.weights || (h !== AVG && !(r.perHead && h >= 0 && h < r.H))) return;
  update({ view: { ...state.view, head: h } });
}
