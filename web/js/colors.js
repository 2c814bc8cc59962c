// Colour scales: viridis for weights, a diverging blue-grey-red for the
// signed output, one colour per head, and the one legend both scales use.
//
//   colorFor(w, max)                    -> [r, g, b], how weight w is drawn on 0 … max
//   cellImage(cols, rows, values, VIRIDIS, (v) => lutIndex(v, max))
//                                       -> an offscreen canvas, one pixel per value
//   drawLegend(canvas, {...})           -> a colour bar with ticks
//
// Each scale is a table of 256 colours; a value is drawn with the entry its
// index function gives, so colorFor predicts every pixel of a heatmap exactly.

import { COLORS, FONT, sizeCanvas } from './canvas.js';
import { LITTLE_ENDIAN, AVG } from './tensor.js';

const VIRIDIS_HEX =
  '44015444025645045745055946075a46085c460a5d460b5e470d60470e61471063471164471365481467481668481769' +
  '48186a481a6c481b6d481c6e481d6f481f70482071482173482374482475482576482677482878482979472a7a472c7a' +
  '472d7b472e7c472f7d46307e46327e46337f463480453581453781453882443983443a83443b84433d84433e85423f85' +
  '4240864241864142874144874045884046883f47883f48893e49893e4a893e4c8a3d4d8a3d4e8a3c4f8a3c508b3b518b' +
  '3b528b3a538b3a548c39558c39568c38588c38598c375a8c375b8d365c8d365d8d355e8d355f8d34608d34618d33628d' +
  '33638d32648e32658e31668e31678e31688e30698e306a8e2f6b8e2f6c8e2e6d8e2e6e8e2e6f8e2d708e2d718e2c718e' +
  '2c728e2c738e2b748e2b758e2a768e2a778e2a788e29798e297a8e297b8e287c8e287d8e277e8e277f8e27808e26818e' +
  '26828e26828e25838e25848e25858e24868e24878e23888e23898e238a8d228b8d228c8d228d8d218e8d218f8d21908d' +
  '21918c20928c20928c20938c1f948c1f958b1f968b1f978b1f988b1f998a1f9a8a1e9b8a1e9c891e9d891f9e891f9f88' +
  '1fa0881fa1881fa1871fa28720a38620a48621a58521a68522a78522a88423a98324aa8325ab8225ac8226ad8127ad81' +
  '28ae8029af7f2ab07f2cb17e2db27d2eb37c2fb47c31b57b32b67a34b67935b77937b87838b9773aba763bbb753dbc74' +
  '3fbc7340bd7242be7144bf7046c06f48c16e4ac16d4cc26c4ec36b50c46a52c56954c56856c66758c7655ac8645cc863' +
  '5ec96260ca6063cb5f65cb5e67cc5c69cd5b6ccd5a6ece5870cf5773d05675d05477d1537ad1517cd2507fd34e81d34d' +
  '84d44b86d54989d5488bd6468ed64590d74393d74195d84098d83e9bd93c9dd93ba0da39a2da37a5db36a8db34aadc32' +
  'addc30b0dd2fb2dd2db5de2bb8de29bade28bddf26c0df25c2df23c5e021c8e020cae11fcde11dd0e11cd2e21bd5e21a' +
  'd8e219dae319dde318dfe318e2e418e5e419e7e419eae51aece51befe51cf1e51df4e61ef6e620f8e621fbe723fde725';

function packRGBA(r, g, b) {
  return LITTLE_ENDIAN ? ((255 << 24) | (b << 16) | (g << 8) | r) >>> 0
                       : ((r << 24) | (g << 16) | (b << 8) | 255) >>> 0;
}

// A scale from rgbOf(i), i = 0 … 255: {rgb: 768 bytes, px: 256 RGBA words for ImageData}.
function makeScale(rgbOf) {
  const rgb = new Uint8Array(768), px = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    const [r, g, b] = rgbOf(i);
    rgb.set([r, g, b], 3 * i);
    px[i] = packRGBA(r, g, b);
  }
  return { rgb, px };
}

const rgbAt = (scale, i) => [scale.rgb[3 * i], scale.rgb[3 * i + 1], scale.rgb[3 * i + 2]];

// Viridis (matplotlib, CC0), from #440154 (0) to #fde725 (max).
export const VIRIDIS = makeScale((i) => [0, 1, 2].map((c) => parseInt(VIRIDIS_HEX.substr(6 * i + 2 * c, 2), 16)));

// Blue - light grey - red for the output tensor: index 0 is -max, 128 about 0.
export const DIVERGING = makeScale((i) => {
  const stops = [[49, 104, 214], [236, 238, 242], [214, 56, 64]];
  const t = i / 255 * 2;
  const a = stops[t < 1 ? 0 : 1], b = stops[t < 1 ? 1 : 2], f = t < 1 ? t : t - 1;
  return [0, 1, 2].map((c) => Math.round(a[c] + (b[c] - a[c]) * f));
});

// Blue - white - red for differences: entry 128 is white (exactly 0), 0 is
// -max (blue), 255 is +max (red).
export const DIFF = makeScale((i) => {
  const [a, f] = i < 128 ? [[49, 104, 214], i / 128] : [[214, 56, 64], (255 - i) / 127];
  return [0, 1, 2].map((c) => Math.round(a[c] + (255 - a[c]) * f));
});

// Index in DIFF of the difference `value` on the range -max … max.
export function diffIndex(value, max) {
  if (!(max > 0) || value === 0) return 128;
  const t = Math.max(-1, Math.min(1, value / max));
  return t > 0 ? 128 + Math.round(t * 127) : 128 + Math.round(t * 128);
}

export const diffColor = (value, max) => rgbAt(DIFF, diffIndex(value, max));

// Index in a 256-step table of `value` on the range 0 … max.
export function lutIndex(value, max) {
  if (!(max > 0)) return 0;
  const t = Math.round((value / max) * 255);
  return t > 255 ? 255 : t > 0 ? t : 0;
}

export function colorFor(value, max) {
  return rgbAt(VIRIDIS, lutIndex(value, max));
}

// An offscreen canvas cols x rows, one pixel per value (row-major), each
// drawn with scale entry indexOf(value).
export function cellImage(cols, rows, values, scale, indexOf) {
  const canvas = document.createElement('canvas');
  canvas.width = cols;
  canvas.height = rows;
  const ctx = canvas.getContext('2d');
  const data = ctx.createImageData(cols, rows);
  const px = new Uint32Array(data.data.buffer);
  for (let k = 0; k < values.length; k++) px[k] = scale.px[indexOf(values[k])];
  ctx.putImageData(data, 0, 0);
  return canvas;
}

// One colour per head for the head view (and the chips in the head grid).
const HEAD_COLORS = ['#4cc9f0', '#f8961e', '#90be6d', '#f94144', '#b388eb', '#f9c74f', '#43aa8b',
  '#ff8fab', '#4d96ff', '#e9c46a', '#2ec4b6', '#ff6b6b', '#c77dff', '#a7c957', '#ffb703', '#8ecae6'];
const AVG_COLOR = '#e6edf3';
export const headColor = (h) => (h === AVG ? AVG_COLOR : HEAD_COLORS[h % HEAD_COLORS.length]);

// A number for a legend: 0 as "0", else three decimals, or two significant
// digits when that would show nothing.
export const formatValue = (v) => (v === 0 ? '0' : Math.abs(v) >= 0.01 ? v.toFixed(3) : v.toPrecision(2));

// The colour legend of a heatmap: `title` on top, the whole `scale` as a bar
// (entry 255 at the top, 0 at the bottom), a labelled tick for each of
// `ticks` ({at: 0 … 1 along the bar from the bottom, value}), and the lines
// of `note` under the bar.
export function drawLegend(canvas, { height, scale, title, ticks, note = [] }) {
  const W = 86, barTop = 24, barH = height - 40;
  const ctx = sizeCanvas(canvas, W, height);
  ctx.fillStyle = COLORS.bg;
  ctx.fillRect(0, 0, W, height);
  for (let y = 0; y < barH; y++) {
    const [r, g, b] = rgbAt(scale, Math.round((1 - y / Math.max(1, barH - 1)) * 255));
    ctx.fillStyle = `rgb(${r},${g},${b})`;
    ctx.fillRect(8, barTop + y, 16, 1);
  }
  ctx.strokeStyle = COLORS.grid;
  ctx.strokeRect(8.5, barTop - 0.5, 15, barH + 1);
  ctx.fillStyle = COLORS.muted;
  ctx.font = `11px ${FONT}`;
  ctx.textBaseline = 'top';
  ctx.fillText(title, 4, 4);
  ctx.fillStyle = COLORS.text;
  ctx.textBaseline = 'middle';
  for (const { at, value } of ticks) {
    const y = barTop + (1 - at) * (barH - 1);
    ctx.fillRect(24, Math.round(y), 4, 1);
    ctx.fillText(formatValue(value), 31, y);
  }
  ctx.fillStyle = COLORS.muted;
  ctx.textBaseline = 'top';
  note.forEach((line, k) => ctx.fillText(line, 4, barTop + barH + 6 + 13 * k));
}
