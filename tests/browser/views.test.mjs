#!/usr/bin/env node
// Browser tests of the page's analysis views (docs/web.md),
// against a real build/attention-server started on a free port. Run
// through scripts/browser-test.sh, or directly: node tests/browser/views.test.mjs
//
// What is checked, each against the server's answer decoded here:
//   summary: the head summary's entropy (nats) and mean attention distance
//       of every head equal the values computed here from the weights, the
//       bars' heights are in the values' order, clicking a bar selects its
//       head;
//   keyboard: the focused heatmap moves its highlighted cell with the arrow
//       keys (clamped at the edges; Home / End; Page Down / Up change the
//       head on the same cell), and the aria-live region
//       announces query, key and the exact weight of the response;
//   compare: heads A and B of the causal example side by side and B − A:
//       the maps equal the response's heads, the difference's pixels are
//       red where B is larger, blue where A is, white where both are zero
//       (above the diagonal); then B from a second input run in the view:
//       its heads are the second answer's; Export SVG there has the three
//       maps, the difference's cells filled with its colours;
//   export: the SVG download has a <rect> per weight whose fill is the
//       colour of that weight (window.attn.colorFor) and the tokens as
//       labels; the JSON download holds the request as sent and the
//       response as received.
// Screenshots: build/browser/views-*.png. Plumbing: tests/browser/harness.mjs.

import fs from 'node:fs';
import path from 'node:path';
import { OUT, check, isAttention, log, openPage, printedAs, rgb, runAndWait, runSuite, sameColor, selectHead, selectTab, shot,
         weightsOf } from './harness.mjs';

const ctx = { json: null, w: null, sent: null };

// Clicks the button and returns the text of the file it downloads.
async function downloaded(page, testid) {
  const dlP = page.waitForEvent('download', { timeout: 10000 });
  await page.click(`[data-testid="${testid}"]`);
  const dl = await dlP;
  const file = path.join(OUT, `views-${dl.suggestedFilename()}`);
  await dl.saveAs(file);
  return { name: dl.suggestedFilename(), text: fs.readFileSync(file, 'utf8') };
}

async function stepOpen(page, base) {
  const { status, body, sent } = await openPage(page, base, 'sentence');
  check(status === 200, `the sentence example got HTTP ${status}`);
  ctx.json = body;
  ctx.sent = sent;
  ctx.w = weightsOf(ctx.json);
}

// Entropy (nats) and mean |i - j| of one L x S map, rows with no weight left out.
function stats(m) {
  let ent = 0, dist = 0, rows = 0;
  m.forEach((row, i) => {
    let e = 0, d = 0, sum = 0;
    row.forEach((v, j) => { if (v > 0) { e -= v * Math.log(v); d += v * Math.abs(i - j); sum += v; } });
    if (sum > 0) { ent += e; dist += d; rows++; }
  });
  return { entropy: ent / rows, distance: dist / rows };
}

async function stepSummary(page) {
  const H = ctx.json.num_heads;
  const want = Array.from({ length: H }, (_, h) => stats(ctx.w[0][h]));
  const shown = await page.evaluate((H) => Array.from({ length: H }, (_, h) => ['entropy', 'distance'].map((k) => {
    const el = document.querySelector(`[data-testid="summary-${k}-${h}"]`);
    return el && { v: Number(el.getAttribute('data-value')), hgt: Number(el.getAttribute('height')), label: el.getAttribute('aria-label') };
  })), H);
  for (let h = 0; h < H; h++) {
    const [e, d] = shown[h];
    check(e && d, `head ${h} has no bars in the head summary`);
    check(Math.abs(e.v - want[h].entropy) < 1e-9, `head ${h}: the summary says entropy ${e.v}, the weights give ${want[h].entropy}`);
    check(Math.abs(d.v - want[h].distance) < 1e-9, `head ${h}: the summary says distance ${d.v}, the weights give ${want[h].distance}`);
    check(e.label.includes(want[h].entropy.toFixed(3)), `head ${h}: the bar's label "${e.label}" does not give ${want[h].entropy.toFixed(3)}`);
  }
  for (const [k, key] of [[0, 'entropy'], [1, 'distance']]) {
    const order = (f) => Array.from({ length: H }, (_, h) => h).sort((a, b) => f(a) - f(b) || a - b).join(',');
    const byValue = order((h) => want[h][key]), byHeight = order((h) => shown[h][k].hgt);
    check(byValue === byHeight, `${key}: heads by value ${byValue}, by bar height ${byHeight}`);
  }
  const target = H - 1;
  await page.click(`[data-testid="summary-distance-${target}"]`);
  await page.waitForFunction((h) => window.attn.state.view.head === h, target, { timeout: 5000 });
  const hook = await page.evaluate(() => window.attn.headSummary(0));
  check(hook.length === H && Math.abs(hook[0].entropy - want[0].entropy) < 1e-9, 'attn.headSummary disagrees with the chart');
  await page.locator('[data-testid="head-summary"]').screenshot({ path: 'build/browser/views-summary.png' });
  log(`  ${H} heads: entropy ${want.map((s) => s.entropy.toFixed(3)).join(' ')} nats; ` +
      `distance ${want.map((s) => s.distance.toFixed(2)).join(' ')}; click on a bar selected head ${target}`);
  await selectHead(page, 0);
}

async function stepKeyboard(page) {
  const L = ctx.json.target_len, S = ctx.json.source_len, m = ctx.w[0][0], tokens = ctx.json.tokens;
  await page.focus('[data-testid="heatmap-overlay"]');
  const live = await page.getAttribute('[data-testid="heatmap-live"]', 'aria-live');
  check(live === 'polite', `the announcement region has aria-live="${live}"`);
  const moves = [[['ArrowRight', 'ArrowRight', 'ArrowRight', 'ArrowDown', 'ArrowDown'], [2, 3]],
                 [Array(S + 3).fill('ArrowLeft'), [2, 0]],
                 [['End'], [2, S - 1]],
                 [Array(L + 3).fill('ArrowDown'), [L - 1, S - 1]],
                 [Array(S + 2).fill('ArrowRight'), [L - 1, S - 1]],
                 [['Home', 'ArrowUp'], [L - 2, 0]]];
  for (const [keys, [i, j]] of moves) {
    for (const k of keys) await page.keyboard.press(k);
    const got = await page.evaluate(() => window.attn.highlightedCell());
    check(got && got.i === i && got.j === j, `after ${keys.join(' ')} the highlighted cell is ${JSON.stringify(got)}, expected (${i}, ${j})`);
    const text = await page.textContent('[data-testid="heatmap-live"]');
    const want = `query ${i} "${tokens[i]}", key ${j} "${tokens[j]}", weight `;
    check(text.startsWith(want), `after ${keys.join(' ')} the live region says "${text}", expected "${want}…"`);
    const w = text.match(/weight (\S+)$/)[1];
    check(printedAs(w, m[i][j]), `announced weight ${w}, the response has ${m[i][j]}`);
    check(await page.isVisible('[data-testid="tooltip"]'), 'the tooltip is not shown for the keyboard cell');
  }
  // Page Down: the next head, the same cell, announced with that head's weight.
  await page.keyboard.press('PageDown');
  await page.waitForFunction(() => window.attn.state.view.head === 1);
  const cell = await page.evaluate(() => window.attn.highlightedCell());
  const said = await page.textContent('[data-testid="heatmap-live"]');
  check(cell && cell.i === L - 2 && cell.j === 0, `after Page Down the highlighted cell is ${JSON.stringify(cell)}`);
  check(printedAs(said.match(/weight (\S+)$/)[1], ctx.w[0][1][L - 2][0]), `after Page Down the live region says "${said}", head 1 has ${ctx.w[0][1][L - 2][0]}`);
  await page.keyboard.press('PageUp');
  await page.waitForFunction(() => window.attn.state.view.head === 0);
  await shot(page, 'views-keyboard.png');
  log(`  ${moves.reduce((a, [k]) => a + k.length, 0)} key presses: cell clamped at the edges, each announced with the response's weight`);
  await page.keyboard.press('Tab');
}

async function stepExport(page) {
  const { json, w } = ctx;
  const H = json.num_heads, L = json.target_len, S = json.source_len, head = 1;
  await selectHead(page, head);
  const svg = await downloaded(page, 'export-svg');
  check(svg.name.endsWith('.svg'), `Export SVG downloaded ${svg.name}`);
  const max = await page.evaluate((h) => window.attn.colorMax(0, h), head);
  const parsed = await page.evaluate((text) => {
    const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
    if (doc.querySelector('parsererror')) return { error: doc.querySelector('parsererror').textContent };
    const rects = [...doc.querySelectorAll('rect[data-i]')].map((r) => [Number(r.getAttribute('data-i')), Number(r.getAttribute('data-j')), r.getAttribute('fill')]);
    return { rects, texts: [...doc.querySelectorAll('text')].map((t) => t.textContent), root: doc.documentElement.tagName };
  }, svg.text);
  check(!parsed.error && parsed.root === 'svg', `the SVG does not parse: ${parsed.error}`);
  check(parsed.rects.length === L * S, `the SVG has ${parsed.rects.length} cells, the map ${L * S}`);
  const hex = (c) => '#' + c.map((v) => v.toString(16).padStart(2, '0')).join('');
  const wantFill = await page.evaluate(({ m, max }) => m.map((row) => row.map((v) => window.attn.colorFor(v, max))), { m: w[0][head], max });
  const bad = parsed.rects.filter(([i, j, fill]) => fill !== hex(wantFill[i][j]));
  check(bad.length === 0, `${bad.length} SVG cells have the wrong fill, e.g. ${JSON.stringify(bad.slice(0, 3))}`);
  for (const tok of new Set(json.tokens)) check(parsed.texts.includes(tok), `the SVG has no label "${tok}"`);
  check(parsed.texts.some((t) => t.includes(`head ${head}`)), 'the SVG title does not name the head');

  const ex = await downloaded(page, 'export-json');
  const back = JSON.parse(ex.text);
  check(back.endpoint === 'POST /attention', `Export JSON names endpoint ${back.endpoint}`);
  check(JSON.stringify(back.request) === JSON.stringify(JSON.parse(ctx.sent)), 'Export JSON: the request differs from the one sent');
  check(JSON.stringify(back.response) === JSON.stringify(json), 'Export JSON: the response differs from the one received');
  log(`  SVG: ${parsed.rects.length} <rect> cells with the weights' colours, ${parsed.texts.length} labels (${svg.text.length} bytes); ` +
      `JSON: request and response as exchanged (${ex.text.length} bytes); H = ${H}`);
  await selectHead(page, 0);
}

async function comparePixels(page, cells) {
  return page.evaluate((cells) => {
    const ctx = document.getElementById('compare-canvas').getContext('2d');
    return cells.map(([k, i, j]) => {
      const p = window.attn.comparePixel(k, i, j);
      return Array.from(ctx.getImageData(p.x, p.y, 1, 1).data.slice(0, 3));
    });
  }, cells);
}

// The page's compare maps equal wa, wb (L x S), and the difference panel's
// pixels at its largest, smallest and (if any) zero cells have the colours
// of the diverging scale.
async function checkCompare(page, wa, wb, what) {
  const m = await page.evaluate(() => window.attn.compareMaps());
  check(!m.error, `${what}: the compare view says "${m.error}"`);
  const L = wa.length, S = wa[0].length;
  const d = wa.map((row, i) => row.map((v, j) => Math.fround(wb[i][j] - v)));
  check(JSON.stringify(m.a) === JSON.stringify(wa.flat()) && JSON.stringify(m.b) === JSON.stringify(wb.flat()),
        `${what}: the compared maps are not the response's heads`);
  check(JSON.stringify(m.diff) === JSON.stringify(d.flat()), `${what}: the difference is not B − A`);
  let hi = [0, 0], lo = [0, 0], zero = null;
  d.forEach((row, i) => row.forEach((v, j) => {
    if (v > d[hi[0]][hi[1]]) hi = [i, j];
    if (v < d[lo[0]][lo[1]]) lo = [i, j];
    if (v === 0 && !zero) zero = [i, j];
  }));
  const max = Math.max(d[hi[0]][hi[1]], -d[lo[0]][lo[1]]);
  check(Math.abs(m.max - max) < 1e-12, `${what}: the scale's range is ±${m.max}, max |B − A| is ${max}`);
  const cells = [hi, lo, ...(zero ? [zero] : [])];
  const got = await comparePixels(page, cells.map(([i, j]) => [2, i, j]));
  const want = await page.evaluate(({ vals, max }) => vals.map((v) => window.attn.diffColor(v, max)), { vals: cells.map(([i, j]) => d[i][j]), max });
  cells.forEach(([i, j], k) => check(sameColor(got[k], want[k]), `${what}: B − A at (${i},${j}) = ${d[i][j]} drawn ${rgb(got[k])}, expected ${rgb(want[k])}`));
  check(got[0][0] > got[0][2] + 80, `${what}: the largest B − A (${d[hi[0]][hi[1]]}) is drawn ${rgb(got[0])}, not red`);
  check(got[1][2] > got[1][0] + 80, `${what}: the smallest B − A (${d[lo[0]][lo[1]]}) is drawn ${rgb(got[1])}, not blue`);
  if (zero) check(sameColor(got[2], [255, 255, 255], 0), `${what}: B − A = 0 at (${zero}) is drawn ${rgb(got[2])}, not white`);
  // A and B panels: the extreme cells of A in viridis on A's range.
  const ranges = await page.evaluate(() => window.attn.compareRanges());
  const [pa] = await comparePixels(page, [[0, hi[0], hi[1]]]);
  const [ca] = await page.evaluate(([v, mx]) => [window.attn.colorFor(v, mx)], [wa[hi[0]][hi[1]], ranges.a]);
  check(sameColor(pa, ca), `${what}: A at (${hi}) drawn ${rgb(pa)}, expected ${rgb(ca)}`);
  return { L, S, hi: d[hi[0]][hi[1]], lo: d[lo[0]][lo[1]], zero: !!zero };
}

async function stepCompare(page) {
  const { body: json, status } = await runAndWait(page, () => page.selectOption('[data-testid="example"]', 'causal'));
  check(status === 200, `the causal example got HTTP ${status}`);
  const w = weightsOf(json);
  await selectTab(page, 'compare');
  await page.selectOption('[data-testid="cmp-a"]', '0');
  await page.selectOption('[data-testid="cmp-b"]', '2');
  await page.waitForFunction(() => window.attn.state.compare.a === 0 && window.attn.state.compare.b === 2);
  const r1 = await checkCompare(page, w[0][0], w[0][2], 'heads 0 and 2');
  check(r1.zero, 'the causal example should have cells where both heads are zero');
  await shot(page, 'views-compare-heads.png');
  // Export SVG on this tab: the three maps; the difference's cells filled as drawn.
  const svg = await downloaded(page, 'export-svg');
  const groups = await page.evaluate((text) => {
    const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
    return [...doc.querySelectorAll('g.heatmap')].map((g) => Object.fromEntries(
      [...g.querySelectorAll('rect[data-i]')].map((r) => [`${r.getAttribute('data-i')},${r.getAttribute('data-j')}`, r.getAttribute('fill')])));
  }, svg.text);
  check(groups.length === 3, `the comparison's SVG has ${groups.length} maps, expected A, B and B − A`);
  const m = await page.evaluate(() => window.attn.compareMaps());
  const hex = (c) => '#' + c.map((v) => v.toString(16).padStart(2, '0')).join('');
  const L = w[0][0].length;
  const wantDiff = await page.evaluate(({ d, max }) => d.map((v) => window.attn.diffColor(v, max)), { d: m.diff, max: m.max });
  const bad = m.diff.map((_, k) => [Math.floor(k / L), k % L, k]).filter(([i, j, k]) => groups[2][`${i},${j}`] !== hex(wantDiff[k]));
  check(bad.length === 0, `${bad.length} cells of B − A in the SVG have the wrong fill, e.g. ${JSON.stringify(bad.slice(0, 3))}`);
  check(groups[2]['0,1'] === '#ffffff', `B − A = 0 at (0, 1) is filled ${groups[2]['0,1']} in the SVG`);

  // B from a second input: as many tokens, other words.
  const tokens = json.tokens.slice();
  tokens[1] = 'twice';
  tokens[tokens.length - 1] = 'sing';
  await page.selectOption('[data-testid="cmp-input"]', 'second');
  await page.fill('[data-testid="cmp-tokens"]', tokens.join(' '));
  const respP = page.waitForResponse(isAttention);
  await page.click('[data-testid="cmp-run"]');
  const second = await (await respP).json();
  await page.waitForFunction(() => window.attn.state.second && !window.attn.compareMaps().error, null, { timeout: 15000 });
  check(JSON.stringify(second.tokens) === JSON.stringify(tokens), 'the second input was not sent with its tokens');
  await page.selectOption('[data-testid="cmp-b"]', '0');
  await page.waitForFunction(() => window.attn.state.compare.b === 0);
  const w2 = weightsOf(second);
  const r2 = await checkCompare(page, w[0][0], w2[0][0], 'head 0 of two inputs');
  await shot(page, 'views-compare-inputs.png');
  log(`  heads 0 vs 2: B − A from ${r1.lo.toFixed(3)} (blue) to ${r1.hi.toFixed(3)} (red), zeros white; ` +
      `head 0, "${json.tokens.join(' ')}" vs "${tokens.join(' ')}": ${r2.lo.toFixed(3)} … ${r2.hi.toFixed(3)}`);
  await page.selectOption('[data-testid="cmp-input"]', 'same');
  await selectTab(page, 'heatmap');
}

runSuite('views.test', [
  ['open the page', stepOpen, { essential: true }],
  ['head summary: entropy and distance per head match the weights', stepSummary],
  ['keyboard: arrow keys move the cell, aria-live announces the weight', stepKeyboard],
  ['export: SVG cells have the weights\' colours; JSON is the exchange', stepExport],
  ['compare: two heads, two inputs; B − A in blue-white-red', stepCompare],
], { prefix: 'views-', logName: 'server-views.log' });
