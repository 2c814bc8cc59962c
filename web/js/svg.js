// Heatmaps as SVG text, for Export SVG: each weight a <rect> with its fill
// (the colour the canvas draws it with) and data-i / data-j / data-w, the
// token labels as <text>, a colour legend, and a title line. Maps above
// MAX_RECT_CELLS cells are embedded as one PNG <image> (one pixel a cell)
// under the same labels: 512 x 512 rects would be 20 MB of SVG.
//
//   svgDocument(width, height, title, parts)   -> the whole file's text
//   heatmapSvg({x, y, cell, L, S, rows, cols, values, rgbOf, image, caption}) -> {text, width, height}
//   legendSvg({x, y, height, stops, ticks, title}) -> text
//
// No state, no DOM but the PNG of an embedded map.

export const MAX_RECT_CELLS = 128 * 128;

const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
const hex = (c) => '#' + c.map((v) => v.toString(16).padStart(2, '0')).join('');

export function svgDocument(width, height, title, parts) {
  return `<?xml version="1.0" encoding="UTF-8"?>\n` +
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ` +
    `font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="11">\n` +
    `<rect width="100%" height="100%" fill="#ffffff"/>\n` +
    `<text x="12" y="20" font-size="14">${esc(title)}</text>\n${parts.join('\n')}\n</svg>\n`;
}

// One map: values (L x S, row-major) coloured by rgbOf(value) -> [r, g, b];
// rows / cols are the token labels (null: numbers every few cells). The
// cells start at (x + left margin, y + top margin); returns the text and
// the size taken.
export function heatmapSvg({ x, y, cell, L, S, rows, cols, values, rgbOf, image, caption }) {
  const labels = cell >= 8 && rows && cols;
  const left = labels ? 8 + 6.5 * Math.min(16, Math.max(...rows.map((s) => s.length))) : 36;
  const top = labels ? 8 + 4.6 * Math.min(16, Math.max(...cols.map((s) => s.length))) : 20;
  const gx = x + left, gy = y + top;
  const out = [`<g class="heatmap" data-rows="${L}" data-cols="${S}" shape-rendering="crispEdges">`];
  if (caption) out.push(`<text x="${gx}" y="${y + 2}" font-size="12">${esc(caption)}</text>`);
  if (L * S <= MAX_RECT_CELLS) {
    for (let i = 0; i < L; i++) {
      for (let j = 0; j < S; j++) {
        const v = values[i * S + j];
        out.push(`<rect x="${gx + j * cell}" y="${gy + i * cell}" width="${cell}" height="${cell}" fill="${hex(rgbOf(v))}" ` +
                 `data-i="${i}" data-j="${j}" data-w="${v}"/>`);
      }
    }
  } else {
    out.push(`<image x="${gx}" y="${gy}" width="${S * cell}" height="${L * cell}" preserveAspectRatio="none" ` +
             `style="image-rendering:pixelated" href="${image.toDataURL('image/png')}"/>`);
  }
  const step = labels ? 1 : Math.max(1, Math.ceil(24 / cell));
  for (let i = 0; i < L; i += step) {
    out.push(`<text x="${gx - 4}" y="${gy + (i + 0.5) * cell + 4}" text-anchor="end">${esc(labels ? rows[i] : i)}</text>`);
  }
  for (let j = 0; j < S; j += step) {
    const cx = gx + (j + 0.5) * cell;
    out.push(labels ? `<text transform="translate(${cx} ${gy - 4}) rotate(-45)">${esc(cols[j])}</text>`
                    : `<text x="${cx}" y="${gy - 4}" text-anchor="middle">${j}</text>`);
  }
  out.push(`<text x="${gx}" y="${gy + L * cell + 16}" fill="#555">rows: query (L = ${L})   columns: key (S = ${S})</text>`, '</g>');
  return { text: out.join('\n'), width: left + S * cell, height: top + L * cell + 22 };
}

// A vertical colour bar (stops: [r, g, b] from the bottom to the top) with
// labelled ticks ({at: 0 … 1 from the bottom, label}).
export function legendSvg({ x, y, height, stops, ticks, title, id }) {
  const n = stops.length - 1;
  const grad = stops.map((c, k) => `<stop offset="${(k / n).toFixed(4)}" stop-color="${hex(c)}"/>`).join('');
  const out = [`<defs><linearGradient id="${id}" x1="0" y1="1" x2="0" y2="0">${grad}</linearGradient></defs>`,
               `<text x="${x}" y="${y - 6}">${esc(title)}</text>`,
               `<rect x="${x}" y="${y}" width="14" height="${height}" fill="url(#${id})" stroke="#999" stroke-width="0.5"/>`];
  for (const t of ticks) {
    const ty = y + (1 - t.at) * height;
    out.push(`<line x1="${x + 14}" x2="${x + 18}" y1="${ty}" y2="${ty}" stroke="#333"/>`,
             `<text x="${x + 21}" y="${ty + 4}">${esc(t.label)}</text>`);
  }
  return out.join('\n');
}
