#!/usr/bin/env node
// Browser tests of reduced weights (docs/web.md: pooled and
// top-k weights, the long-sequence example), against a real
// build/attention-server started on a free port. Run through
// scripts/browser-test.sh, or directly: node tests/browser/reduced.test.mjs
//
// What is checked:
//   pooled: at L = S = 64, H = 4, the page's map with Weights "pooled",
//       p = 4, equals the 4 x 4 tile means of the full weights the page got
//       for the same input just before (computed here in double), its
//       pixels have those values' colours, and the tooltip names the tile's
//       ranges;
//   top-k: with k = 3 each row of the page's map holds the row's 3 largest
//       full weights (ties by the lower key), the same floats, and zeros
//       elsewhere, drawn so; the tooltip gives a cell's rank;
//   long: the L = S = 4096, H = 16 example asks for pooled weights (p = 8),
//       gets no full weights, holds 16 x 512 x 512 floats, is drawn (extreme
//       cells' colours) and hoverable (the tooltip's weight is the map's);
//       the times are printed, not asserted.
// Screenshots: build/browser/reduced-*.png. Plumbing: tests/browser/harness.mjs.

import { argExtremes, check, checkHeatmapShows, decodeTensor, log, openPage, pixels, printedAs, rgb, runAndWait, runSuite,
         sameColor, selectHead, shot, weightsOf } from './harness.mjs';

const ctx = { full: null };
const WORDS = 'the quick brown fox jumps over the lazy dog while a small bird sings'.split(' ');

async function runWith(page, mode, param) {
  await page.selectOption('[data-testid="weights-mode"]', mode);
  if (param !== undefined) await page.fill('[data-testid="weights-param"]', String(param));
  const run = await runAndWait(page, () => page.click('[data-testid="run"]'));
  check(run.status === 200, `Weights ${mode} ${param ?? ''}: HTTP ${run.status} ${JSON.stringify(run.body).slice(0, 200)}`);
  return { ...run, req: JSON.parse(run.sent) };
}

async function stepFull(page, base) {
  await openPage(page, base, 'sentence');
  await page.fill('[data-testid="tokens"]', Array.from({ length: 64 }, (_, i) => WORDS[i % WORDS.length]).join(' '));
  const { body, req } = await runWith(page, 'full');
  check(req.weights_pool === undefined && req.weights_top_k === undefined, 'Weights "full" sent a reduction');
  check(body.target_len === 64 && body.num_heads === 4, `L = ${body.target_len}, H = ${body.num_heads}`);
  ctx.full = weightsOf(body);
}

async function stepPooled(page) {
  const p = 4;
  const { body, req } = await runWith(page, 'pool', p);
  check(req.weights_pool === p, `the request asks weights_pool ${req.weights_pool}`);
  check(body.attention_weights === undefined && body.attention_weights_pooled, 'the answer is not pooled');
  const H = body.num_heads, L = 64, n = L / p;
  let worst = 0;
  for (let h = 0; h < H; h++) {
    const f = ctx.full[0][h];
    const want = Array.from({ length: n }, (_, a) => Array.from({ length: n }, (_, b) => {
      let s = 0;
      for (let i = a * p; i < (a + 1) * p; i++) for (let j = b * p; j < (b + 1) * p; j++) s += f[i][j];
      return s / (p * p);
    }));
    const got = await page.evaluate((h) => window.attn.matrix(0, h), h);
    check(got.length === n && got[0].length === n, `head ${h}: the pooled map is ${got.length} x ${got[0].length}`);
    got.forEach((row, a) => row.forEach((v, b) => { worst = Math.max(worst, Math.abs(v - want[a][b])); }));
    if (h === 1) {
      await selectHead(page, 1);
      await checkHeatmapShows(page, got, 'pooled head 1');
    }
  }
  check(worst <= 1e-6, `pooled tiles differ from the means of the full weights by up to ${worst}`);
  const r = await page.evaluate(() => window.attn.cellRect(3, 5));
  await page.mouse.move(r.cx, r.cy);
  await page.waitForSelector('[data-testid="tip-note"]', { state: 'visible', timeout: 5000 });
  const note = await page.textContent('[data-testid="tip-note"]');
  check(note.includes('queries 12–15') && note.includes('keys 20–23') && note.includes('4 × 4'), `the tooltip says "${note}" for tile (3, 5)`);
  await shot(page, 'reduced-pooled.png');
  await page.mouse.move(2, 2);
  log(`  p = ${p}: ${H} heads of ${n} x ${n} tiles = the full weights' tile means (max |Δ| ${worst.toExponential(1)}); tooltip "${note}"`);
}

async function stepTopK(page) {
  const k = 3;
  const { body, req } = await runWith(page, 'topk', k);
  check(req.weights_top_k === k, `the request asks weights_top_k ${req.weights_top_k}`);
  check(body.attention_weights === undefined && body.attention_weights_top_k, 'the answer is not top-k');
  const H = body.num_heads, L = 64;
  for (let h = 0; h < H; h++) {
    const got = await page.evaluate((h) => window.attn.matrix(0, h), h);
    ctx.full[0][h].forEach((row, i) => {
      const top = row.map((v, j) => [v, j]).sort((a, b) => b[0] - a[0] || a[1] - b[1]).slice(0, k).map(([, j]) => j);
      got[i].forEach((v, j) => {
        const want = top.includes(j) ? row[j] : 0;
        check(v === want, `top-k head ${h}, cell (${i},${j}): the page has ${v}, expected ${want}`);
      });
    });
  }
  await selectHead(page, 2);
  const m = await page.evaluate(() => window.attn.matrix(0, 2));
  await checkHeatmapShows(page, m, 'top-k head 2');
  const row = m[10], j = row.indexOf(Math.max(...row));
  const r = await page.evaluate(([i, j]) => window.attn.cellRect(i, j), [10, j]);
  await page.mouse.move(r.cx, r.cy);
  await page.waitForSelector('[data-testid="tip-note"]', { state: 'visible', timeout: 5000 });
  const note = await page.textContent('[data-testid="tip-note"]');
  check(note === `rank 1 of the row's top ${k}`, `the tooltip says "${note}" at the row's largest weight`);
  await shot(page, 'reduced-topk.png');
  await page.mouse.move(2, 2);
  log(`  k = ${k}: every row of ${H} heads x ${L} rows holds its ${k} largest full weights, zeros elsewhere; tooltip "${note}"`);
  await page.selectOption('[data-testid="weights-mode"]', 'auto');
}

async function stepLong(page) {
  const { body, status, ms, sent } = await runAndWait(page, () => page.selectOption('[data-testid="example"]', 'long4096'), 180000);
  check(status === 200, `the L = 4096 example got HTTP ${status}: ${JSON.stringify(body).slice(0, 300)}`);
  const req = JSON.parse(sent);
  check(req.weights_pool === 8, `the L = 4096 example asks weights_pool ${req.weights_pool}, expected 8`);
  check(body.target_len === 4096 && body.num_heads === 16 && body.attention_weights === undefined,
        `L = ${body.target_len}, H = ${body.num_heads}, full weights ${body.attention_weights !== undefined}`);
  const pooled = decodeTensor(body.attention_weights_pooled);
  check(JSON.stringify(pooled.shape) === '[16,512,512]', `pooled shape ${pooled.shape}`);
  const held = await page.evaluate(() => ({ n: window.attn.state.response.weights.length, L: window.attn.state.response.L,
                                            heap: performance.memory ? performance.memory.usedJSHeapSize : 0,
                                            t: window.attn.state.lastTiming }));
  check(held.n === 16 * 512 * 512, `the page holds ${held.n} weights, expected the pooled 16 x 512 x 512`);
  await selectHead(page, 0);
  const head0 = Array.from({ length: 512 }, (_, a) => pooled.data.slice(a * 512, (a + 1) * 512));
  const { max, min } = argExtremes(head0);
  const cmax = await page.evaluate(() => window.attn.colorMax(0, 0));
  const [pmax, pmin] = await pixels(page, [[max.i, max.j], [min.i, min.j]]);
  const [wmax, wmin] = await page.evaluate(([a, b, m]) => [window.attn.colorFor(a, m), window.attn.colorFor(b, m)], [max.v, min.v, cmax]);
  check(sameColor(pmax, wmax) && sameColor(pmin, wmin), `L = 4096: extreme tiles drawn ${rgb(pmax)} / ${rgb(pmin)}, expected ${rgb(wmax)} / ${rgb(wmin)}`);
  const t = held.t;
  log(`  L = S = 4096, H = 16, pooled p = 8 (${(JSON.stringify(body).length / 1e6).toFixed(1)} MB answer, JS heap ${(held.heap / 1e6).toFixed(0)} MB): ` +
      `drawn in ${ms} ms after choosing it (page: ${t.total.toFixed(0)} ms = build ${t.build.toFixed(0)} ms, request ${t.fetch.toFixed(0)} ms, ` +
      `decode ${t.decode.toFixed(0)} ms, draw ${t.render.toFixed(0)} ms; server ${t.serverTiming})`);
  await shot(page, 'reduced-long-4096.png');
  // Hover: the tooltip's weight is the map's at the tile it names.
  const t1 = Date.now(), n = 30;
  for (let k = 0; k < n; k++) {
    const r = await page.evaluate(([i, j]) => window.attn.cellRect(i, j), [(k * 37) % 512, (k * 101) % 512]);
    await page.mouse.move(r.cx, r.cy);
  }
  await page.waitForSelector('[data-testid="tooltip"]', { state: 'visible' });
  const hoverMs = (Date.now() - t1) / n;
  const tip = await page.evaluate(() => ({ qi: document.getElementById('tip-qi').textContent, kj: document.getElementById('tip-kj').textContent,
                                           w: document.getElementById('tip-weight').textContent, note: document.getElementById('tip-note').textContent }));
  const [a, b] = [Number(tip.qi.slice(1)), Number(tip.kj.slice(1))];
  check(printedAs(tip.w, head0[a][b]), `hover on tile (${a}, ${b}) says ${tip.w}, the map has ${head0[a][b]}`);
  check(tip.note.startsWith('tile of 8 × 8'), `the tooltip's note is "${tip.note}"`);
  const t2 = Date.now();
  await selectHead(page, 9);
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r())));
  log(`  L = 4096: ${hoverMs.toFixed(1)} ms per hover move (tile (${a}, ${b}): "${tip.note}" ${tip.w}), ${Date.now() - t2} ms to switch head`);
  await page.mouse.move(2, 2);
}

runSuite('reduced.test', [
  ['L = 64 with the full weights', stepFull, { essential: true }],
  ['pooled p = 4: tiles = means of the full weights, drawn', stepPooled],
  ['top-k k = 3: each row\'s 3 largest full weights, drawn', stepTopK],
  ['L = S = 4096, H = 16: pooled, drawn and hoverable (time printed)', stepLong],
], { prefix: 'reduced-', logName: 'server-reduced.log' });
