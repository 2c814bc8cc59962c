#!/usr/bin/env node
// End-to-end tests of the web client (web/) in Debian's Chromium, driven by
// playwright-core, against a real build/attention-server started here on a
// free port. Run through scripts/browser-test.sh (which installs what is
// missing), or directly: node tests/browser/web.test.mjs
//
// What is checked:
//   0. the page opens on the trained model (models/digits-reverse, served
//      as the default model_repository): the input embedded with the
//      model's table goes to v2 infer as binary tensors, the weights equal
//      POST /attention's for the same model and input, and in each head the
//      model's pattern names, every row's brightest drawn cell (read from
//      the pixels) is the mirrored key L-1-i; another input too; a token
//      outside the vocabulary is refused in words;
//   1. sentence example (untrained, random weights): the large heatmap's pixel at the cell with the
//      largest weight and at the one with the smallest has the colour the
//      scale gives those values (window.attn.colorFor), the weights the page
//      shows are the ones the server sent (decoded here independently);
//   2. hovering cells: the tooltip names the query token, the key token and
//      the exact weight of the response;
//   3. switching heads (and to the average): every cell of the large heatmap
//      changes to that head's values; the threshold slider hides weights;
//   4. causal example: every cell above the diagonal is drawn as zero, in
//      every head;
//   5. a malformed pasted request: the server's error message is shown in
//      #error, alone (the maps of the earlier input are not left under it);
//   6. L = S = 512, H = 16: renders; the time taken is printed, not asserted;
//   7. the test hook window.attn is read-only: assignments through it throw
//      (or, on the copies of typed arrays, change nothing) and the page
//      keeps working;
//   8. a pasted request is sent exactly as typed: one with a duplicate key
//      gets the server's invalid_json answer in #error (parsing and writing
//      it again would merge the keys into a request the server accepts);
//   9. CORS: the page calls a second server that allows its origin (with
//      the preflight; errors and Server-Timing readable), and is refused by
//      the first server, which does not;
//   plus the cross-attention example, a batched own request (batch
//   selector), the head view, the output view and Export PNG.
// Screenshots of every view go to build/browser/. The plumbing (server,
// browser, steps and report) is tests/browser/harness.mjs.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { CheckError, OUT, ROOT, SERVER, argExtremes, check, checkHeatmapShows, isAttention, isInfer, log, openPage, parseV2Body, pixels,
         printedAs, rgb, runAndWait,
         runSuite, sameColor, selectHead, selectTab, shot, viewOf, weightsOf } from './harness.mjs';

// ---------------------------------------------------------------------------
// The steps

const ctx = { first: null };

// The brightest cell of each drawn row, read from the pixels: each pixel
// mapped back to its index on the colour scale (nearest of the 256 colours).
async function brightestDrawn(page, L, S) {
  const cells = [];
  for (let i = 0; i < L; i++) for (let j = 0; j < S; j++) cells.push([i, j]);
  const got = await pixels(page, cells);
  const table = await page.evaluate(() => Array.from({ length: 256 }, (_, k) => window.attn.colorFor(k / 255, 1)));
  const level = (c) => table.reduce((best, t, k) => {
    const dist = Math.abs(t[0] - c[0]) + Math.abs(t[1] - c[1]) + Math.abs(t[2] - c[2]);
    return dist < best.d ? { d: dist, k } : best;
  }, { d: Infinity, k: -1 }).k;
  return Array.from({ length: L }, (_, i) => {
    let jBest = 0;
    for (let j = 1; j < S; j++) if (level(got[i * S + j]) > level(got[i * S + jBest])) jBest = j;
    return jBest;
  });
}

// The page opens on the trained model (models/digits-reverse): its example
// input embedded with the model's table, sent to v2 infer as binary
// tensors; the weights equal a POST /attention of the same model and
// input made here; in every head the pattern names, each row's brightest
// drawn cell is the mirrored key L-1-i; another input shows it too; a
// character outside the vocabulary is refused in words.
async function stepTrained(page, base) {
  const respP = page.waitForResponse(isInfer, { timeout: 30000 });
  const t0 = Date.now();
  await openPage(page, base);
  const openMs = Date.now() - t0;
  const resp = await respP;
  check(resp.status() === 200, `the trained model's run got HTTP ${resp.status()}`);
  const err = await page.evaluate(() => window.attn.state.lastError);
  check(!err, `the first example shows an error: ${JSON.stringify(err)}`);
  const first = await page.inputValue('[data-testid="example"]');
  check(first === 'trained', `the page opened on example "${first}", not the trained model`);
  const groups = await page.$$eval('[data-testid="example"] optgroup', (gs) => gs.map((g) => g.label));
  check(groups.some((g) => /untrained/i.test(g)), `the random-weight examples are not labelled untrained: ${JSON.stringify(groups)}`);
  const name = new URL(resp.url()).pathname.split('/')[3];
  check(name === 'digits-reverse', `the first run went to model ${name}`);
  const config = await (await fetch(new URL(`v2/models/${name}/config.json`, base))).json();
  const text = await page.inputValue('[data-testid="tokens"]');
  check(text === config.input.example, `the input is "${text}", the model's example "${config.input.example}"`);

  const req = resp.request();
  const hlen = Number((await req.allHeaders())['inference-header-content-length']);
  const { header, inputs } = parseV2Body(req.postDataBuffer(), hlen);
  check(header.parameters.binary_data_output === true, 'the page did not ask for binary outputs');
  const tokens = [...text];
  const E = config.embedding[0].length, L = tokens.length;
  const rows = tokens.map((t) => config.embedding[config.vocab.indexOf(t)]);
  check(JSON.stringify(header.inputs[0].shape) === JSON.stringify([L, E]) &&
        Array.from(inputs[0].data).every((v, k) => v === Math.fround(rows[Math.floor(k / E)][k % E])),
        `the query sent is not the embedding rows of "${text}" (shape ${JSON.stringify(header.inputs[0].shape)})`);

  // The same model and input through POST /attention, from here.
  const direct = await (await fetch(new URL('attention', base), { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: name, query: rows, tokens }) })).json();
  const w = weightsOf(direct);
  const H = direct.num_heads;
  for (let h = 0; h < H; h++) {
    const pm = await page.evaluate((h) => window.attn.matrix(0, h), h);
    const worst = Math.max(...pm.flatMap((row, i) => row.map((v, j) => Math.abs(v - w[0][h][i][j]))));
    check(worst <= 1e-6, `head ${h}: the page's weights differ from POST /attention's by up to ${worst}`);
  }
  const heads = config.pattern.heads;
  for (const h of heads) {
    await selectHead(page, h);
    await checkHeatmapShows(page, w[0][h], `trained head ${h}`);
    const brightest = await brightestDrawn(page, L, L);
    const wrong = brightest.map((j, i) => [i, j]).filter(([i, j]) => j !== L - 1 - i);
    check(wrong.length === 0, `trained head ${h}: rows whose brightest drawn cell is not the mirrored key: ${JSON.stringify(wrong)}`);
  }
  await selectHead(page, heads[0]);
  await shot(page, '00-trained.png');
  const mirrored = heads.map((h) => (w[0][h].reduce((a, row, i) => a + row[L - 1 - i], 0) / L).toFixed(3));
  log(`  page opened on ${name} ("${text}") in ${openMs} ms; heads ${heads.join(', ')}: every row's brightest drawn cell is ` +
      `the mirrored key (mean mirrored weight ${mirrored.join(', ')}); weights = POST /attention's`);

  // Another input, and one the vocabulary refuses.
  await page.fill('[data-testid="tokens"]', '27182818');
  const again = await runAndWait(page, () => page.click('[data-testid="run"]'), 60000, { v2: true });
  check(again.status === 200, `the input 27182818 got HTTP ${again.status}`);
  const m = await page.evaluate((h) => window.attn.matrix(0, h), heads[0]);
  m.forEach((row, i) => check(row.indexOf(Math.max(...row)) === L - 1 - i, `input 27182818, head ${heads[0]}: row ${i} peaks at ${row.indexOf(Math.max(...row))}`));
  await page.fill('[data-testid="tokens"]', '12a45678');
  await page.click('[data-testid="run"]');
  await page.waitForSelector('#error', { state: 'visible', timeout: 5000 });
  const shown = await page.textContent('#error');
  check(/knows only the tokens/.test(shown) && shown.includes('"a"'), `the input 12a45678 shows "${shown}"`);
  log(`  input 27182818: anti-diagonal too; input 12a45678: "${shown}"`);
}

async function stepSentence(page) {
  const { body: json, status, sent } = await runAndWait(page, () => page.selectOption('[data-testid="example"]', 'sentence'));
  check(status === 200, `the sentence example got HTTP ${status}: ${JSON.stringify(json)}`);
  const err = await page.evaluate(() => window.attn.state.lastError);
  check(!err, `the sentence example shows an error: ${JSON.stringify(err)}`);
  check(await page.inputValue('[data-testid="model"]') === '', 'the sentence example still names a served model');

  const req = JSON.parse(sent);
  check(req.output_encoding === 'base64', 'the page did not ask for output_encoding "base64"');
  check(req.query && typeof req.query.b64 === 'string' && req.weights && req.weights.in_proj_weight.dtype === 'float32',
        'the sentence request should carry base64 float32 tensors (query, weights)');
  const tokens = (await page.inputValue('[data-testid="tokens"]')).trim().split(/\s+/);
  check(json.target_len === tokens.length && json.source_len === tokens.length,
        `L, S = ${json.target_len}, ${json.source_len}; the text box has ${tokens.length} tokens`);
  check(JSON.stringify(json.tokens) === JSON.stringify(tokens), 'the response does not echo the tokens');

  const w = weightsOf(json);
  const H = json.num_heads;
  // The page's decoded weights are exactly the server's.
  for (let h = 0; h < H; h++) {
    const pm = await page.evaluate((h) => window.attn.matrix(0, h), h);
    check(JSON.stringify(pm) === JSON.stringify(w[0][h]), `attn.matrix(0, ${h}) differs from the response's weights`);
  }
  const lr = await page.evaluate(() => { const r = window.attn.state.response; return { H: r.H, L: r.L, S: r.S, tokens: r.tokens, keyTokens: r.keyTokens }; });
  check(lr.H === H && lr.L === json.target_len && JSON.stringify(lr.tokens) === JSON.stringify(tokens),
        'attn.state.response does not describe the response');
  const thumbs = await page.locator('[data-testid^="head-thumb-"]').count();
  check(thumbs === H + 1, `the head grid has ${thumbs} maps, expected ${H} heads + the average`);

  // The colour scale is viridis from #440154 (0) to #fde725 (max).
  const ends = await page.evaluate(() => [window.attn.colorFor(0, 1), window.attn.colorFor(1, 1), window.attn.colorFor(0.5, 1)]);
  check(sameColor(ends[0], [68, 1, 84], 0) && sameColor(ends[1], [253, 231, 37], 0) && sameColor(ends[2], [33, 145, 140], 1),
        `colorFor is not viridis: 0 -> ${rgb(ends[0])}, 0.5 -> ${rgb(ends[2])}, 1 -> ${rgb(ends[1])}`);

  const view = await viewOf(page);
  check(view.head === 0 && view.tab === 'heatmap', `the page should start on head 0's heatmap, not ${JSON.stringify(view)}`);
  const { max, min } = argExtremes(w[0][0]);
  check(view.max === max.v, `the colour range ends at ${view.max}, the head's largest weight is ${max.v}`);
  const [pmax, pmin] = await pixels(page, [[max.i, max.j], [min.i, min.j]]);
  const [cmax, cmin] = await page.evaluate(([a, b, m]) => [window.attn.colorFor(a, m), window.attn.colorFor(b, m)], [max.v, min.v, view.max]);
  check(sameColor(pmax, cmax), `largest weight ${max.v} at (${max.i},${max.j}) is drawn ${rgb(pmax)}, the scale says ${rgb(cmax)}`);
  check(sameColor(pmin, cmin), `smallest weight ${min.v} at (${min.i},${min.j}) is drawn ${rgb(pmin)}, the scale says ${rgb(cmin)}`);
  check(sameColor(pmax, [253, 231, 37]), `the largest weight should be drawn in the top colour #fde725, not ${rgb(pmax)}`);
  log(`  head 0: max ${max.v} at (${max.i},${max.j}) drawn ${rgb(pmax)}; min ${min.v} at (${min.i},${min.j}) drawn ${rgb(pmin)}`);
  await shot(page, '01-sentence-heatmap.png');
  await page.locator('[data-testid="head-grid"]').screenshot({ path: path.join(OUT, '01-sentence-model-view.png') });
  ctx.first = { json, w, tokens };
}

async function stepHover(page) {
  const { json, w, tokens } = ctx.first;
  const L = json.target_len, S = json.source_len;
  const { max } = argExtremes(w[0][0]);
  const cells = [[max.i, max.j], [0, S - 1], [L - 1, 0], [Math.floor(L / 2), Math.floor(S / 3)]];
  for (const [i, j] of cells) {
    const r = await page.evaluate(([i, j]) => window.attn.cellRect(i, j), [i, j]);
    check(r, 'attn.cellRect returned null on the heatmap tab');
    await page.mouse.move(r.cx, r.cy);
    await page.waitForSelector('[data-testid="tooltip"]', { state: 'visible', timeout: 5000 });
    const tip = await page.evaluate(() => ({
      q: document.getElementById('tip-query').textContent,
      k: document.getElementById('tip-key').textContent,
      w: document.getElementById('tip-weight').textContent,
    }));
    check(tip.q === tokens[i], `tooltip at (${i},${j}) names query "${tip.q}", expected "${tokens[i]}"`);
    check(tip.k === tokens[j], `tooltip at (${i},${j}) names key "${tip.k}", expected "${tokens[j]}"`);
    check(printedAs(tip.w, w[0][0][i][j]), `tooltip at (${i},${j}) says weight ${tip.w}, the response has ${w[0][0][i][j]}`);
    if (i === max.i && j === max.j) await shot(page, '02-hover-tooltip.png');
  }
  log(`  ${cells.length} cells hovered: query, key and weight (7 digits) match the response`);
  await page.mouse.move(2, 2);
  await page.waitForSelector('[data-testid="tooltip"]', { state: 'hidden', timeout: 5000 });
}

async function stepSwitchHeads(page) {
  const { json, w } = ctx.first;
  const H = json.num_heads;
  const before = await checkHeatmapShows(page, w[0][0], 'head 0');
  for (const head of [H - 1, 1, 'avg']) {
    await selectHead(page, head);
    const m = head === 'avg' ? w[0][H] : w[0][head];
    const { view, cells } = await checkHeatmapShows(page, m, `after switching to head ${head}`);
    check(view.max === argExtremes(m).max.v, `head ${head}: colour range ends at ${view.max}, expected its max ${argExtremes(m).max.v}`);
    // It really changed: some cell's expected colour differs from head 0's.
    const differs = await page.evaluate(([a, b, ma, mb]) => a.some((row, i) => row.some((v, j) => {
      const ca = window.attn.colorFor(v, ma), cb = window.attn.colorFor(b[i][j], mb);
      return Math.abs(ca[0] - cb[0]) + Math.abs(ca[1] - cb[1]) + Math.abs(ca[2] - cb[2]) > 30;
    })), [m, w[0][0], view.max, before.view.max]);
    check(differs, `head ${head} looks like head 0; the test cannot tell a switch happened`);
    log(`  head ${head}: all ${cells} cells drawn with that head's values`);
    if (head === H - 1) await shot(page, `03-head-${head}.png`);
  }
  // The threshold slider hides (draws as zero) weights below it.
  const m = w[0][H];
  const vals = m.flat().sort((a, b) => a - b);
  const thr = Math.ceil(vals[Math.floor(vals.length * 0.7)] * 1000) / 1000;
  await page.$eval('[data-testid="threshold"]', (el, v) => { el.value = String(v); el.dispatchEvent(new Event('input', { bubbles: true })); }, thr);
  await page.waitForFunction((t) => window.attn.state.view.threshold === t, thr);
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  const hidden = vals.filter((v) => v < thr).length;
  check(hidden > 0 && hidden < vals.length, `threshold ${thr} should hide some but not all cells`);
  await checkHeatmapShows(page, m, `average with threshold ${thr}`);
  log(`  threshold ${thr}: ${hidden} of ${vals.length} cells drawn as zero, the rest unchanged`);
  await shot(page, '04-threshold.png');
  await page.$eval('[data-testid="threshold"]', (el) => { el.value = '0'; el.dispatchEvent(new Event('input', { bubbles: true })); });
  await page.waitForFunction(() => window.attn.state.view.threshold === 0);
  await selectHead(page, 0);
}

async function stepReadOnlyHook(page) {
  const { json, w } = ctx.first;
  const snapshot = () => page.evaluate(() => {
    const s = window.attn.state;
    return { view: { ...s.view }, runCount: s.runCount, busy: s.busy, title: s.title, tokens: [...s.response.tokens],
             w0: Array.from(s.response.weights.subarray(0, 8)), m: window.attn.matrix(0, 0) };
  });
  const before = await snapshot();
  const tried = await page.evaluate(() => {
    'use strict';
    const a = window.attn;
    const attempts = {
      'state.view.head = 2': () => { a.state.view.head = 2; },
      'state.view = {tab: "output"}': () => { a.state.view = { ...a.state.view, tab: 'output' }; },
      'Object.assign(state.view, {threshold: 0.5})': () => { Object.assign(a.state.view, { threshold: 0.5 }); },
      'state.runCount = -1': () => { a.state.runCount = -1; },
      'state.busy = true': () => { a.state.busy = true; },
      'state.response.tokens[0] = "dog"': () => { a.state.response.tokens[0] = 'dog'; },
      'state.response.H = 1': () => { a.state.response.H = 1; },
      'delete state.response': () => { delete a.state.response; },
      'attn.state = {}': () => { a.state = {}; },
      'attn.matrix = null': () => { a.matrix = null; },
      'state.response.weights.fill(0)': () => { a.state.response.weights.fill(0); },   // a copy: no error, no effect
    };
    return Object.entries(attempts).map(([what, fn]) => {
      try { fn(); return [what, 'no error']; } catch (e) { return [what, e.name]; }
    });
  });
  const silent = tried.filter(([what, how]) => how !== 'TypeError' && !what.includes('weights'));
  check(silent.length === 0, `assignments through window.attn did not throw: ${silent.map(([w, h]) => `${w} (${h})`).join(', ')}`);
  const after = await snapshot();
  check(JSON.stringify(after) === JSON.stringify(before),
        `assignments through window.attn changed the state: before ${JSON.stringify(before).slice(0, 300)}, after ${JSON.stringify(after).slice(0, 300)}`);
  // The page works as before: the heatmap is head 0's, a click selects head 1.
  await checkHeatmapShows(page, w[0][0], 'head 0 after the writes through the hook');
  await selectHead(page, 1);
  await checkHeatmapShows(page, w[0][1], 'head 1 selected after the writes through the hook');
  await selectHead(page, 0);
  log(`  ${tried.length} writes through window.attn: ${tried.filter(([, h]) => h === 'TypeError').length} threw TypeError, ` +
      `the typed-array copy changed nothing; state unchanged, head switching works (H = ${json.num_heads})`);
}

async function stepViews(page) {
  const { json } = ctx.first;
  // Head view: hover a query token; its lines are drawn on the overlay.
  await selectTab(page, 'headview');
  const p = await page.evaluate(() => window.attn.headTokenPoint('query', 1));
  check(p, 'attn.headTokenPoint returned null on the head view tab');
  await page.mouse.move(p.x, p.y);
  const inked = await page.waitForFunction(() => {
    const o = document.getElementById('headview-overlay');
    const d = o.getContext('2d').getImageData(0, 0, o.width, o.height).data;
    for (let k = 3; k < d.length; k += 4) if (d[k] !== 0) return true;
    return false;
  }, null, { timeout: 5000 }).then(() => true, () => false);
  check(inked, 'hovering a token in the head view drew nothing');
  await shot(page, '05-head-view.png');
  await page.mouse.move(2, 2);

  // Output: its shape and a small heatmap.
  await selectTab(page, 'output');
  const shape = await page.textContent('[data-testid="output-shape"]');
  const want = `(${json.target_len}, ${json.embed_dim})`;
  check(shape.includes(`output (L, E) = ${want}`), `the output view says "${shape}", expected the shape ${want}`);
  const size = await page.evaluate(() => { const c = document.getElementById('output-canvas'); return [c.width, c.height]; });
  check(size[0] > 50 && size[1] > 50, `the output heatmap is ${size[0]}x${size[1]} pixels`);
  await shot(page, '06-output.png');

  // Export PNG of the current view (the heatmap).
  await selectTab(page, 'heatmap');
  const dlP = page.waitForEvent('download', { timeout: 10000 });
  await page.click('[data-testid="export"]');
  const dl = await dlP;
  const file = path.join(OUT, `export-${dl.suggestedFilename()}`);
  await dl.saveAs(file);
  const png = fs.readFileSync(file);
  check(png.length > 1000 && png.subarray(0, 8).equals(Buffer.from([137, 80, 78, 71, 13, 10, 26, 10])),
        `Export PNG gave ${png.length} bytes that are not a PNG`);
  log(`  head view hover, output ${want}, Export PNG -> ${path.relative(ROOT, file)} (${png.length} bytes)`);
}

async function stepCausal(page) {
  const { body: json, status } = await runAndWait(page, () => page.selectOption('[data-testid="example"]', 'causal'));
  check(status === 200, `the causal example got HTTP ${status}: ${JSON.stringify(json)}`);
  const L = json.target_len, H = json.num_heads;
  check(L === json.source_len && L > 2, 'the causal example should be self-attention');
  const w = weightsOf(json);
  const zero = await page.evaluate(() => window.attn.colorFor(0, 1));
  let above = 0;
  for (let h = 0; h <= H; h++) {
    await selectHead(page, h === H ? 'avg' : h);
    const m = w[0][h];
    const cells = [];
    for (let i = 0; i < L; i++) for (let j = i + 1; j < L; j++) cells.push([i, j]);
    cells.forEach(([i, j]) => check(m[i][j] === 0, `the server gave weight ${m[i][j]} above the diagonal at (${i},${j})`));
    const got = await pixels(page, cells);
    got.forEach((c, k) => check(sameColor(c, zero), `head ${h === H ? 'avg' : h}: cell (${cells[k][0]},${cells[k][1]}) above the diagonal is drawn ${rgb(c)}, not the zero colour ${rgb(zero)}`));
    const [first] = await pixels(page, [[0, 0]]);
    check(!sameColor(first, zero, 10), `head ${h}: cell (0,0) (weight 1) is drawn as zero`);
    above += cells.length;
    if (h === 0) await shot(page, '07-causal.png');
  }
  log(`  ${H} heads + average: all ${above} cells above the diagonal drawn as zero ${rgb(zero)}`);
  await selectHead(page, 0);
}

async function stepCross(page) {
  const { body: json, status } = await runAndWait(page, () => page.selectOption('[data-testid="example"]', 'cross'));
  check(status === 200, `the cross-attention example got HTTP ${status}: ${JSON.stringify(json)}`);
  const q = (await page.inputValue('[data-testid="tokens"]')).trim().split(/\s+/);
  const k = (await page.inputValue('[data-testid="key-tokens"]')).trim().split(/\s+/);
  check(json.target_len === q.length && json.source_len === k.length && q.length !== k.length,
        `cross-attention: L, S = ${json.target_len}, ${json.source_len} for ${q.length} query and ${k.length} key tokens`);
  const w = weightsOf(json);
  await checkHeatmapShows(page, w[0][0], 'cross-attention head 0');
  const [i, j] = [q.length - 1, k.length - 1];
  const r = await page.evaluate(([i, j]) => window.attn.cellRect(i, j), [i, j]);
  await page.mouse.move(r.cx, r.cy);
  await page.waitForSelector('[data-testid="tooltip"]', { state: 'visible' });
  const tip = [await page.textContent('#tip-query'), await page.textContent('#tip-key'), await page.textContent('#tip-weight')];
  check(tip[0] === q[i] && tip[1] === k[j] && printedAs(tip[2], w[0][0][i][j]),
        `cross tooltip says ${JSON.stringify(tip)}, expected ${JSON.stringify([q[i], k[j], w[0][0][i][j]])}`);
  await shot(page, '08-cross.png');
  await page.mouse.move(2, 2);
  log(`  L = ${q.length} query tokens x S = ${k.length} key tokens drawn and labelled`);
}

async function stepOwnBatched(page) {
  const query = [
    [[1, 0, 0, 1], [0, 2, 1, 0], [1, 1, 0.5, -0.5]],
    [[0, 1, 1, 0], [2, 0, 0, 1], [-1, 0.5, 1, 1]],
  ];
  const text = JSON.stringify({ query, num_heads: 2, tokens: ['x', 'y', 'z'] });
  await page.fill('[data-testid="request-json"]', text);
  const { body: json, status } = await runAndWait(page, () => page.click('[data-testid="run-json"]'));
  check(status === 200 && json.batch === 2, `the batched request got HTTP ${status}: ${JSON.stringify(json).slice(0, 300)}`);
  const w = weightsOf(json);
  check(await page.isVisible('[data-testid="batch"]'), 'no batch selector for N = 2');
  await checkHeatmapShows(page, w[0][0], 'own request, batch item 0');
  await page.selectOption('[data-testid="batch"]', '1');
  await page.waitForFunction(() => window.attn.state.view.batch === 1);
  await checkHeatmapShows(page, w[1][0], 'own request, batch item 1');
  await shot(page, '09-own-request-batch1.png');
  log('  own batched request (N = 2): batch selector shown, item 1 drawn with its own weights');
}

async function stepMalformed(page) {
  for (const text of ['{"query": [[1, 2], [3]], "num_heads": 1, "tokens": ["a", "b"]}',
                      '{"query": [[1, 0, 0, 1]], "num_heads": 2,']) {
    await page.fill('[data-testid="request-json"]', text);
    const { body, status } = await runAndWait(page, () => page.click('[data-testid="run-json"]'));
    check(status >= 400 && status < 500, `the malformed request got HTTP ${status}, expected a 4xx`);
    check(body && body.error && typeof body.error.message === 'string' && body.error.message.length > 0,
          `the server's answer has no error message: ${JSON.stringify(body)}`);
    await page.waitForSelector('#error', { state: 'visible', timeout: 5000 });
    const shown = await page.textContent('#error');
    check(shown.includes(body.error.message), `#error says "${shown}", the server said "${body.error.message}"`);
    const still = await page.evaluate(() => [...document.querySelectorAll('[data-testid^="head-thumb-"], #heatmap')]
      .filter((el) => el.offsetParent !== null).length);
    check(still === 0, `after the error ${still} maps of the earlier input are still shown under it`);
    log(`  ${status} ${body.error.code}: "${body.error.message}" shown in #error`);
  }
  await shot(page, '10-error.png');
}

async function stepPastedAsTyped(page) {
  const text = '{"query": [[1, 2]], "num_heads": 1, "num_heads": 2}';
  // What re-serialising would have sent (the keys merged, the last wins) is a valid request.
  const merged = JSON.stringify(JSON.parse(text));
  const alt = await fetch(new URL('attention', page.url()), { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                                               body: merged });
  check(alt.status === 200, `${merged} got HTTP ${alt.status}; the test needs a request that is valid once its keys are merged`);
  await page.fill('[data-testid="request-json"]', text);
  const { body, status, sent } = await runAndWait(page, () => page.click('[data-testid="run-json"]'));
  check(status === 400 && body && body.error && body.error.code === 'invalid_json' && /duplicate object key/.test(body.error.message),
        `the request with a duplicate key got HTTP ${status}: ${JSON.stringify(body)}`);
  await page.waitForSelector('#error', { state: 'visible', timeout: 5000 });
  const shown = await page.textContent('#error');
  check(shown.includes(body.error.message) && shown.includes('400 (invalid_json)'),
        `#error says "${shown}", the server said 400 invalid_json "${body.error.message}"`);
  check(sent === text, `the page sent ${JSON.stringify(sent)}, not the text as typed ${JSON.stringify(text)}`);
  // "Last request" gives the text back as typed, too.
  await page.fill('[data-testid="request-json"]', '');
  await page.click('[data-testid="copy-request"]');
  const back = await page.inputValue('[data-testid="request-json"]');
  check(back === text, `"Last request" put ${JSON.stringify(back)} in the editor, not the text sent ${JSON.stringify(text)}`);
  log(`  ${text} sent as typed: 400 invalid_json "${body.error.message}" shown in #error`);
}

// A second server that lets this page's origin call it (cors_allow_origin):
// the page's own fetch, with the preflight a JSON POST needs, gets the
// answer and reads the exposed Server-Timing header; the first server, on
// another origin (localhost instead of 127.0.0.1) and without CORS, is
// refused by the browser.
async function stepCrossOrigin(page, base) {
  const origin = new URL(base).origin;
  const other = spawn(SERVER, ['--port', '0', '--bind', '127.0.0.1', '--cors-allow-origin', origin],
                      { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  try {
    const port = await new Promise((resolve, reject) => {
      let buf = '';
      const timer = setTimeout(() => reject(new CheckError(`the CORS server did not start:\n${buf}`)), 10000);
      other.stderr.on('data', (d) => {
        buf += d;
        const m = buf.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
        if (m) { clearTimeout(timer); resolve(Number(m[1])); }
      });
      other.once('exit', (code) => { clearTimeout(timer); reject(new CheckError(`the CORS server exited (${code}):\n${buf}`)); });
    });
    const call = (url, body = '{"query": [[1, 0, 1, 0]], "num_heads": 2}') => page.evaluate(async ([url, body]) => {
      try {
        const r = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
        return { status: r.status, timing: r.headers.get('Server-Timing'), body: await r.json() };
      } catch (e) {
        return { error: String(e) };
      }
    }, [url, body]);
    const ok = await call(`http://127.0.0.1:${port}/attention`);
    check(ok.status === 200 && ok.body && Array.isArray(ok.body.output),
          `a page on ${origin} could not call a server that allows it: ${JSON.stringify(ok)}`);
    check(ok.timing && ok.timing.startsWith('receive;'), `Server-Timing is not readable cross-origin: ${ok.timing}`);
    const bad = await call(`http://127.0.0.1:${port}/attention`, '{"query": [[1, 0, 1, 0]], "num_heads": 3}');
    check(bad.status === 400 && bad.body && bad.body.error && bad.body.error.code === 'invalid_parameter',
          `a cross-origin error answer is not readable: ${JSON.stringify(bad)}`);
    const refused = await call(`http://localhost:${new URL(base).port}/attention`);
    check(refused.error, `a server without cors_allow_origin was readable from ${origin}: ${JSON.stringify(refused)}`);
    log(`  allowed: 200, Server-Timing "${ok.timing}"; without CORS: ${refused.error}`);
  } finally {
    other.kill('SIGTERM');
  }
}

async function stepLong(page) {
  await page.selectOption('[data-testid="example"]', 'sentence');   // back to a known state (runs)
  await page.waitForFunction(() => !window.attn.state.busy && window.attn.state.response && window.attn.state.response.L === 10);
  const { body: json, status, ms } = await runAndWait(page, () => page.selectOption('[data-testid="example"]', 'long'), 120000);
  check(status === 200, `the L = 512 example got HTTP ${status}: ${JSON.stringify(json).slice(0, 300)}`);
  check(json.target_len === 512 && json.source_len === 512 && json.num_heads === 16,
        `the long example has L = ${json.target_len}, S = ${json.source_len}, H = ${json.num_heads}`);
  const t = await page.evaluate(() => window.attn.state.lastTiming);
  const thumbs = await page.locator('[data-testid^="head-thumb-"]').count();
  check(thumbs === 17, `the L = 512 example shows ${thumbs} head maps, expected 16 + the average`);
  const w = weightsOf(json);
  const { max, min } = argExtremes(w[0][0]);
  const view = await viewOf(page);
  const [pmax, pmin] = await pixels(page, [[max.i, max.j], [min.i, min.j]]);
  const [cmax, cmin] = await page.evaluate(([a, b, m]) => [window.attn.colorFor(a, m), window.attn.colorFor(b, m)], [max.v, min.v, view.max]);
  check(sameColor(pmax, cmax) && sameColor(pmin, cmin), `L = 512: extreme cells drawn ${rgb(pmax)} / ${rgb(pmin)}, expected ${rgb(cmax)} / ${rgb(cmin)}`);
  log(`  L = S = 512, H = 16 (${(JSON.stringify(json).length / 1e6).toFixed(1)} MB response): rendered in ${ms} ms ` +
      `after choosing it (page: ${t.total.toFixed(0)} ms = build ${t.build.toFixed(0)} ms, request ${t.fetch.toFixed(0)} ms, decode ${t.decode.toFixed(0)} ms, ` +
      `draw ${t.render.toFixed(0)} ms; server ${t.serverTiming})`);
  await shot(page, '11-long-512.png');

  // Hover and head switching on the big map (printed, not asserted).
  const t1 = Date.now();
  const n = 40;
  for (let k = 0; k < n; k++) {
    const r = await page.evaluate(([i, j]) => window.attn.cellRect(i, j), [(k * 37) % 512, (k * 101) % 512]);
    await page.mouse.move(r.cx, r.cy);
  }
  await page.waitForSelector('[data-testid="tooltip"]', { state: 'visible' });
  const hoverMs = (Date.now() - t1) / n;
  const t2 = Date.now();
  await selectHead(page, 7);
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r())));
  const switchMs = Date.now() - t2;
  const t3 = Date.now();
  await selectTab(page, 'headview');
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r())));
  const hvMs = Date.now() - t3;
  await shot(page, '12-long-512-head-view.png');
  await selectTab(page, 'heatmap');
  log(`  L = 512: ${hoverMs.toFixed(1)} ms per hover move, ${switchMs} ms to switch head, ${hvMs} ms to draw the head view`);
}

// ---------------------------------------------------------------------------

runSuite('web.test', [
  ['the page opens on the trained model: anti-diagonal heads, drawn', stepTrained, { essential: true }],
  ['sentence example (untrained): extreme cells have the scale\'s colours', stepSentence, { essential: true }],
  ['hover: tooltip shows query, key and weight (7 digits)', stepHover],
  ['switch heads: heatmap shows that head; threshold hides', stepSwitchHeads],
  ['test hook is read-only; the page keeps working', stepReadOnlyHook],
  ['head view, output view, Export PNG', stepViews],
  ['causal example: nothing above the diagonal', stepCausal],
  ['cross-attention example', stepCross],
  ['own batched request: batch selector', stepOwnBatched],
  ['malformed request: server message in #error', stepMalformed],
  ['pasted request with a duplicate key: sent as typed, server error shown', stepPastedAsTyped],
  ['cross-origin page: allowed by cors_allow_origin, refused without', stepCrossOrigin],
  ['L = 512, H = 16 renders (time printed)', stepLong],
]);
