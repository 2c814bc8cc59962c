// Canvas and DOM helpers shared by the views: the theme, canvases sized for
// the screen's pixel ratio, labels that fit, and the axis labels of a grid
// of cells.

export const $ = (id) => document.getElementById(id);

export const FONT = 'system-ui, -apple-system, "Segoe UI", "DejaVu Sans", Roboto, sans-serif';
export const COLORS = { bg: '#151b23', text: '#c9d4e0', muted: '#8b98a9', grid: '#2a3441', hi: '#fde725' };

// Sizes `canvas` to w x h CSS pixels at the device's pixel ratio and returns
// its context, drawing in CSS pixels.
export function sizeCanvas(canvas, w, h) {
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(w * dpr);
  canvas.height = Math.round(h * dpr);
  canvas.style.width = `${w}px`;
  canvas.style.height = `${h}px`;
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return ctx;
}

// Clears a hover overlay (sized with sizeCanvas) and returns its context,
// drawing in CSS pixels.
export function clearOverlay(overlay) {
  const ctx = overlay.getContext('2d');
  const dpr = overlay.width / (parseFloat(overlay.style.width) || 1);
  ctx.setTransform(1, 0, 0, 1, 0, 0);
  ctx.clearRect(0, 0, overlay.width, overlay.height);
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return ctx;
}

// The smallest round step between numbered ticks that leaves minPx between them.
export function tickStep(cellPx, minPx) {
  for (const s of [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000])
    if (s * cellPx >= minPx) return s;
  return 10000;
}

export function ellipsize(ctx, text, maxW) {
  if (ctx.measureText(text).width <= maxW) return text;
  let s = text;
  while (s.length > 1 && ctx.measureText(s + '…').width > maxW) s = s.slice(0, -1);
  return s + '…';
}

// The width a view can draw in (a hidden view has none yet: its card's).
export function availableWidth(el) {
  const w = el.clientWidth || $('view-heatmap').parentElement.clientWidth - 32;
  return Math.max(320, w);
}

// The labels left of `n` rows of cells (`cell` px high, from `top`), right
// aligned at `left`: the `names` in `fontPx` when given, else every few
// row numbers, `minTickPx` apart at least.
export function drawRowLabels(ctx, { n, names, left, top, cell, fontPx, minTickPx }) {
  ctx.textAlign = 'right';
  ctx.textBaseline = 'middle';
  if (names) {
    ctx.fillStyle = COLORS.text;
    ctx.font = `${fontPx}px ${FONT}`;
    for (let i = 0; i < n; i++) ctx.fillText(ellipsize(ctx, names[i], left - 12), left - 6, top + (i + 0.5) * cell);
    return;
  }
  ctx.fillStyle = COLORS.muted;
  ctx.font = `10px ${FONT}`;
  const step = tickStep(cell, minTickPx);
  for (let i = 0; i < n; i += step) ctx.fillText(String(i), left - 5, top + (i + 0.5) * cell);
}

// The labels above `names.length` columns of cells (`cell` px wide, from
// `left`), slanted up to the right from just above `top`, each at most
// 110 px long, in the context's current font.
export function drawColumnLabels(ctx, names, left, top, cell) {
  ctx.fillStyle = COLORS.text;
  ctx.textAlign = 'left';
  ctx.textBaseline = 'middle';
  names.forEach((name, j) => {
    ctx.save();
    ctx.translate(left + (j + 0.5) * cell, top - 6);
    ctx.rotate(-Math.PI / 4);
    ctx.fillText(ellipsize(ctx, name, 110), 0, 0);
    ctx.restore();
  });
}

// A caption in small muted type with its top at (x, y).
export function drawCaption(ctx, text, x, y) {
  ctx.fillStyle = COLORS.muted;
  ctx.font = `11px ${FONT}`;
  ctx.textAlign = 'left';
  ctx.textBaseline = 'top';
  ctx.fillText(text, x, y);
}
