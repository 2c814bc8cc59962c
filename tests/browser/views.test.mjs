#!/usr/bin/env node
// Browser tests of the page's analysis views (README "In the browser"),
// against a real build/attention-server started on a free port. Run
// through scripts/browser-test.sh, or directly: node tests/browser/views.test.mjs
//
// What is checked, each against the server's answer decoded here:
//   summary: the head summary's entropy (nats) and mean attention distance
//       of every head equal the values computed here from the weights, the
//       bars' heights are in the values' order, clicking a bar selects its
//       head;
//   keyboard: the focused heatmap moves its highlighted cell with the arrow
//       keys (clamped at the edges; Home / End), and the aria-live region
//       announces query, key and the exact weight of the response;
//   export: the SVG download has a <rect> per weight whose fill is the
//       colour of that weight (window.attn.colorFor) and the tokens as
//       labels; the JSON download holds the request as sent and the
//       response as received.
// Screenshots: build/browser/views-*.png. Plumbing: tests/browser/harness.mjs.

import fs from 'node:fs';
import path from 'node:path';
import { OUT, check, log, runAndWait, runSuite, selectHead, shot, weightsOf } from './harness.mjs';

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
  const respP = page.waitForResponse((r) => new URL(r.url()).pathname === '/attention', { timeout: 30000 });
  await page.goto(base, { waitUntil: 'domcontentloaded' });
  await page.waitForFunction(() => window.attn && window.attn.state.runCount > 0 && !window.attn.state.busy, null, { timeout: 30000 });
  const resp = await respP;
  ctx.json = await resp.json();
  ctx.sent = resp.request().postData();
  check(resp.status() === 200, `the first example got HTTP ${resp.status()}`);
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
    const want = `query ${i} "${tokens[i]}", key ${j} "${tokens[j]}", weight ${m[i][j]}`;
    check(text === want, `after ${keys.join(' ')} the live region says "${text}", expected "${want}"`);
    const w = Number(text.match(/weight (\S+)$/)[1]);
    check(w === m[i][j], `announced weight ${w}, the response has ${m[i][j]}`);
    check(await page.isVisible('[data-testid="tooltip"]'), 'the tooltip is not shown for the keyboard cell');
  }
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

runSuite('views.test', [
  ['open the page', stepOpen, { essential: true }],
  ['head summary: entropy and distance per head match the weights', stepSummary],
  ['keyboard: arrow keys move the cell, aria-live announces the weight', stepKeyboard],
  ['export: SVG cells have the weights\' colours; JSON is the exchange', stepExport],
], { prefix: 'views-', logName: 'server-views.log' });
