#!/usr/bin/env node
// Browser tests that the page acts on the first click (docs/web.md),
// against a real build/attention-server started on a free port on the
// repository's models/ (digits-reverse, induction-l0, induction-l1). Run
// through scripts/browser-test.sh, or directly:
// node tests/browser/firstclick.test.mjs
//
// What is checked:
//   run: Run's box beside the input's (to its right, overlapping it
//       vertically) at 1280 and 820 px; Enter in the input runs (and types
//       no new line); at 820 x 720, with the input scrolled into view, the
//       answer after a run, and the error after a refused input, are inside
//       the window;
//   induction: the example opens part-way (its first copy and the start
//       of the repeat, fewer tokens than the example), Step and Next token
//       enabled and each adding a token at once; at the model's last
//       position both are disabled and the status line says Reset starts
//       again; "ideal induction" is checked from the start and its outline
//       drawn on the induction head's layer, nothing on the other layer;
//   mask: the Mask control shows the served model's default (causal for
//       the induction layers, none for digits-reverse), and "none" chosen
//       for a causal model is sent as is_causal: false;
//   overview: every caption in one form (a figure in all or in none), all
//       thumbnails of equal width; the served-model panel names the layer
//       whose map is shown (its model's metadata);
//   tooltip: the weight printed with at most 7 significant digits, within
//       half a unit of the 7th of the float32 (tooltip and live region);
//   head view: the "query" header drawn whole inside the canvas;
//   output: the row labels at least 10 px (font and row);
//   docs: the captions docs/web.md quotes are captions the page shows.
// Screenshots: build/browser/firstclick-*.png. Plumbing: tests/browser/harness.mjs.

import fs from 'node:fs';
import path from 'node:path';
import { ROOT, check, log, openPage, printedAs, runSuite, selectTab, shot } from './harness.mjs';

const ctx = { requests: [] };

async function runCount(page) {
  return page.evaluate(() => window.attn.state.runCount);
}

async function settled(page, before, timeout = 30000) {
  await page.waitForFunction((n) => window.attn.state.runCount > n && !window.attn.state.busy, before, { timeout });
}

// Performs `action` (one run of the page) and waits for it to finish.
async function act(page, action) {
  const before = await runCount(page);
  await action();
  await settled(page, before);
}

const box = (page, sel) => page.$eval(sel, (el) => {
  const r = el.getBoundingClientRect();
  return { left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width, height: r.height };
});
const round = (b) => `(${Math.round(b.left)}, ${Math.round(b.top)})…(${Math.round(b.right)}, ${Math.round(b.bottom)})`;

async function inWindow(page, sel) {
  const b = await box(page, sel), vp = page.viewportSize();
  return { ok: b.height > 0 && b.top >= 0 && b.bottom <= vp.height && b.left >= 0 && b.right <= vp.width, b, vp };
}

async function stepRunBeside(page, base) {
  page.on('request', (r) => {
    if (r.method() === 'POST' && /\/v2\/models\/[^/]+\/infer$/.test(new URL(r.url()).pathname)) {
      ctx.requests.push({ model: decodeURIComponent(new URL(r.url()).pathname.split('/')[3]), headers: r.headers(), body: r.postDataBuffer() });
    }
  });
  await openPage(page, base);
  for (const [W, H] of [[1280, 900], [820, 720]]) {
    await page.setViewportSize({ width: W, height: H });
    await page.waitForTimeout(300);   // the page lays out again 120 ms after a resize
    await page.$eval('[data-testid="tokens"]', (el) => el.scrollIntoView({ block: 'center' }));
    const input = await box(page, '[data-testid="tokens"]'), run = await box(page, '[data-testid="run"]');
    check(run.left >= input.right - 1 && run.top < input.bottom && run.bottom > input.top && run.left - input.right < 40,
          `at ${W} px Run is at ${round(run)}, not beside the input at ${round(input)}`);
  }
  await page.setViewportSize({ width: 1280, height: 900 });
}

async function stepEnterRuns(page) {
  await page.fill('[data-testid="tokens"]', '27182818');
  const before = await runCount(page);
  await page.focus('[data-testid="tokens"]');
  await page.keyboard.press('Enter');
  const ran = await page.waitForFunction((n) => window.attn.state.runCount > n && !window.attn.state.busy, before, { timeout: 5000 })
    .then(() => true, () => false);
  check(ran, 'Enter in the input did not run it (no run in 5 s)');
  const value = await page.inputValue('[data-testid="tokens"]');
  check(value === '27182818', `Enter typed into the input: ${JSON.stringify(value)}`);
  const a = await page.evaluate(() => window.attn.answer());
  check(a && a.tokens.join('') === '81828172', `the run after Enter answers ${JSON.stringify(a && a.tokens)}`);
}

// At 820 x 720 (one column: the maps above the form), the input scrolled
// into view, a run leaves its answer on screen, and a refused input its error.
async function stepAnswerOnScreen(page) {
  await page.setViewportSize({ width: 820, height: 720 });
  await page.waitForTimeout(300);
  try {
    await page.$eval('[data-testid="tokens"]', (el) => el.scrollIntoView({ block: 'center' }));
    await page.fill('[data-testid="tokens"]', '31415926');
    await act(page, () => page.click('[data-testid="run"]'));
    await page.waitForTimeout(300);   // a smooth scroll, were there one, has ended
    let w = await inWindow(page, '[data-testid="answer"]');
    await shot(page, 'firstclick-answer.png');
    check(w.ok, `after a run the answer is at ${round(w.b)}, outside the ${w.vp.width} x ${w.vp.height} window`);
    await page.$eval('[data-testid="tokens"]', (el) => el.scrollIntoView({ block: 'center' }));
    await page.fill('[data-testid="tokens"]', '3141592x');
    await act(page, () => page.click('[data-testid="run"]'));
    await page.waitForTimeout(300);
    check(await page.evaluate(() => !!window.attn.state.lastError), 'a refused input shows no error');
    w = await inWindow(page, '[data-testid="error"]');
    check(w.ok, `after a refused input the error is at ${round(w.b)}, outside the ${w.vp.width} x ${w.vp.height} window`);
  } finally {
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.fill('[data-testid="tokens"]', '31415926');
    await act(page, () => page.click('[data-testid="run"]'));
  }
}

const stackOf = (page) => page.evaluate(() => window.attn.stack());
const disabled = (page, id) => page.$eval(`[data-testid="${id}"]`, (b) => b.disabled);

async function stepInductionOpens(page, base) {
  const cfg = await (await fetch(new URL('v2/models/induction-l0/config.json', base))).json();
  ctx.cfg = cfg;
  ctx.example = [...cfg.input.example];
  await act(page, () => page.selectOption('[data-testid="example"]', 'induction'));
  let s = await stackOf(page);
  check(s.n < ctx.example.length && s.n >= 4, `the induction example opened with ${s.n} of its ${ctx.example.length} tokens: not part-way`);
  check(s.tokens.join('') === ctx.example.slice(0, s.n).join(''), `it opened on "${s.tokens.join('')}", not the example's start`);
  // the first copy and the start of the repeat: past the first copy's end
  const rep = s.ideal.length ? s.ideal[0][0] : -1;
  check(rep > 0 && s.n > rep, `it opened with ${s.n} tokens, the repeat's second copy starts at ${rep}`);
  for (const id of ['step', 'next-token']) check(!(await disabled(page, id)), `${id} is disabled at ${s.n} tokens`);
  const n0 = s.n;
  await act(page, () => page.click('[data-testid="step"]'));
  s = await stackOf(page);
  check(s.n === n0 + 1 && s.tokens[n0] === ctx.example[n0], `Step gave ${s.n} tokens ("${s.tokens.join('')}")`);
  await act(page, () => page.click('[data-testid="next-token"]'));
  s = await stackOf(page);
  check(s.n === n0 + 2, `Next token gave ${s.n} tokens`);
  log(`  opened at ${n0} of ${ctx.example.length} tokens (second copy from ${rep}); Step and Next token each added one`);
}

async function stepLastPosition(page) {
  let s = await stackOf(page);
  for (let k = 0; s.n < s.P && k < 64; k++) {
    await act(page, () => page.click('[data-testid="next-token"]'));
    s = await stackOf(page);
  }
  check(s.n === s.P, `Next token stopped at ${s.n} of ${s.P}`);
  for (const id of ['step', 'next-token']) check(await disabled(page, id), `${id} is not disabled at the model's last position (${s.P})`);
  const status = await page.textContent('[data-testid="step-status"]');
  check(/Reset starts again/.test(status), `at the last position the status line says "${status}"`);
  await act(page, () => page.click('[data-testid="reset"]'));
  for (const id of ['step', 'next-token']) check(!(await disabled(page, id)), `${id} is still disabled after Reset`);
}

// The ideal overlay's canvas: how many pixels are not transparent.
const idealInk = (page) => page.evaluate(() => {
  const c = document.getElementById('heatmap-ideal');
  if (!c.width || !c.height) return 0;
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let k = 3; k < d.length; k += 4) if (d[k]) n++;
  return n;
});

async function stepIdealDefault(page, base) {
  // a fresh page: the checkbox as the page opens it
  await openPage(page, base);
  await act(page, () => page.selectOption('[data-testid="example"]', 'induction'));
  check(await page.isChecked('[data-testid="ideal-induction"]'), '"ideal induction" is not checked when the example opens');
  const circ = ctx.cfg.circuit.induction;
  let s = await stackOf(page);
  check(s.layer === circ.layer, `the example opened on layer ${s.layer}, the induction head is in layer ${circ.layer}`);
  const on = await idealInk(page);
  check(on > 0, `on layer ${circ.layer} (the induction head's) the ideal overlay draws nothing`);
  const other = circ.layer === 0 ? 1 : 0;
  await page.click(`[data-testid="overview-thumb-${other}-0"]`);
  await page.waitForFunction((l) => window.attn.stack().layer === l, other);
  const off = await idealInk(page);
  await shot(page, 'firstclick-ideal-other-layer.png');
  check(off === 0, `on layer ${other} (not the induction head's) the ideal overlay draws ${off} pixels`);
  s = await stackOf(page);
  check(s.ideal.length === 0, `attn.stack().ideal on layer ${other}: ${JSON.stringify(s.ideal)}`);
  await page.click(`[data-testid="overview-thumb-${circ.layer}-${circ.head}"]`);
  await page.waitForFunction((l) => window.attn.stack().layer === l, circ.layer);
  check(await idealInk(page) > 0, `back on layer ${circ.layer} the ideal overlay draws nothing`);
  log(`  checked from the start; ${on} pixels on layer ${circ.layer}, none on layer ${other}`);
}

async function stepMask(page) {
  // the induction example is shown: its layers are causal by default
  let mask = await page.inputValue('[data-testid="mask"]');
  check(mask === 'causal', `with the induction example the Mask control shows "${mask}", the models' default is causal`);
  await act(page, () => page.selectOption('[data-testid="model"]', 'induction-l0'));
  mask = await page.inputValue('[data-testid="mask"]');
  check(mask === 'causal', `with induction-l0 picked the Mask control shows "${mask}"`);
  const from = ctx.requests.length;
  await page.selectOption('[data-testid="mask"]', 'none');
  await act(page, () => page.click('[data-testid="run"]'));
  const sent = ctx.requests.slice(from).filter((r) => r.model === 'induction-l0');
  check(sent.length === 1, `the run sent ${sent.length} requests to induction-l0`);
  const hlen = Number(sent[0].headers['inference-header-content-length'] || 0);
  const header = JSON.parse(sent[0].body.subarray(0, hlen || sent[0].body.length).toString('utf8'));
  check(header.parameters && header.parameters.is_causal === false,
        `"none" for a causal model sent parameters ${JSON.stringify(header.parameters)}, expected is_causal: false`);
  const r = await page.evaluate(() => Array.from(window.attn.matrix(0, 0)[0]));
  check(r.slice(1).some((v) => v > 0), 'with "none" the first query still sees no later key');
  await act(page, () => page.selectOption('[data-testid="example"]', 'trained'));
  mask = await page.inputValue('[data-testid="mask"]');
  check(mask === 'none', `with digits-reverse (no causal default) the Mask control shows "${mask}"`);
}

async function stepOverview(page) {
  await act(page, () => page.selectOption('[data-testid="example"]', 'induction'));
  const thumbs = await page.$$eval('[data-testid="overview"] .thumb', (ts) => ts.map((t) => ({
    cap: t.querySelector('span').textContent, w: t.getBoundingClientRect().width })));
  check(thumbs.length >= 2, `the overview has ${thumbs.length} heads`);
  const fig = thumbs.filter((t) => /\d\.\d/.test(t.cap));
  check(fig.length === 0 || fig.length === thumbs.length,
        `${fig.length} of ${thumbs.length} captions carry a figure: ${thumbs.map((t) => JSON.stringify(t.cap)).join(', ')}`);
  const ws = thumbs.map((t) => t.w), lo = Math.min(...ws), hi = Math.max(...ws);
  check(hi - lo <= 0.5, `the overview's boxes are ${[...new Set(ws.map((w) => Math.round(w)))].join(', ')} px wide, not one width`);
  ctx.captions = thumbs.map((t) => t.cap);
  // The served-model panel names the layer shown.
  const panel = async () => page.$$eval('#model-meta dt', (dts) => {
    const dt = dts.find((d) => d.textContent === 'shown');
    return dt ? dt.nextElementSibling.textContent : null;
  });
  for (const [l, name] of [[0, 'induction-l0'], [1, 'induction-l1']]) {
    await page.click(`[data-testid="overview-thumb-${l}-1"]`);
    await page.waitForFunction((k) => window.attn.stack().layer === k, l);
    const said = await panel();
    check(said && said.includes(`layer ${l}`) && said.includes(name), `with layer ${l} shown the model panel's "shown" line is ${JSON.stringify(said)}`);
    const heads = await page.$$eval('#model-meta dt', (dts) => dts.map((d) => d.textContent));
    check(heads.includes('platform'), `the panel lost the model's metadata: ${heads.join(', ')}`);
  }
  await shot(page, 'firstclick-overview.png');
  log(`  ${thumbs.length} captions of one form, ${Math.round(lo)} px each; the panel follows the layer`);
}

// docs/web.md's quoted captions ("head 0: ...") are captions the page shows
// on the example as it opens.
async function stepDocs() {
  const doc = fs.readFileSync(path.join(ROOT, 'docs', 'web.md'), 'utf8');
  const quoted = [...doc.matchAll(/"(head \d+: [^"]+)"/g)].map((m) => m[1].replace(/\s+/g, ' '));
  check(quoted.length >= 2, `docs/web.md quotes ${quoted.length} captions of the overview ("head N: ..."); the page shows ${JSON.stringify(ctx.captions)}`);
  const missing = quoted.filter((q) => !ctx.captions.includes(q));
  check(missing.length === 0, `docs/web.md quotes captions the page does not show: ${JSON.stringify(missing)}; the page: ${JSON.stringify(ctx.captions)}`);
}

async function stepTooltip(page) {
  await act(page, () => page.selectOption('[data-testid="example"]', 'trained'));
  await page.evaluate(() => window.scrollTo(0, 0));
  const m = await page.evaluate(() => window.attn.matrix(0, window.attn.state.view.head));
  const bad = [];
  let seen = 0;
  for (let i = 0; i < m.length; i++) {
    for (let j = 0; j < m[i].length; j++) {
      const r = await page.evaluate(([a, b]) => window.attn.cellRect(a, b), [i, j]);
      await page.mouse.move(r.cx, r.cy);
      await page.waitForSelector('[data-testid="tooltip"]', { state: 'visible', timeout: 5000 });
      const t = await page.evaluate(() => ({ tip: document.getElementById('tip-weight').textContent,
                                             live: document.getElementById('heatmap-live').textContent }));
      const live = / weight (\S+)$/.exec(t.live);
      for (const [where, text] of [['tooltip', t.tip], ['live region', live ? live[1] : t.live]]) {
        if (!printedAs(text, m[i][j])) bad.push(`(${i}, ${j}) ${where} "${text}" for ${m[i][j]}`);
      }
      seen++;
    }
  }
  await page.mouse.move(2, 2);
  check(bad.length === 0, `${bad.length} weights printed with more than 7 significant digits or off the float32: ${bad.slice(0, 3).join('; ')}`);
  log(`  ${seen} cells hovered: at most 7 significant digits, within half a unit of the last`);
}

async function stepHeadView(page) {
  await selectTab(page, 'headview');
  const got = await page.evaluate(() => {
    const c = document.getElementById('headview'), g = c.getContext('2d');
    const dpr = c.width / parseFloat(c.style.width);
    g.font = `11px system-ui, -apple-system, "Segoe UI", "DejaVu Sans", Roboto, sans-serif`;
    const need = g.measureText('query').width * dpr;
    // the header band (y 4 … 20 CSS px), left of the head's name in the middle
    const w = Math.floor(c.width / 2 - 50 * dpr), y0 = Math.floor(4 * dpr), h = Math.ceil(16 * dpr);
    const d = g.getImageData(0, y0, w, h).data, bg = [d[0], d[1], d[2]];
    let lo = Infinity, hi = -1;
    for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) {
      const k = (y * w + x) * 4;
      if (Math.abs(d[k] - 0x15) + Math.abs(d[k + 1] - 0x1b) + Math.abs(d[k + 2] - 0x23) > 40) { lo = Math.min(lo, x); hi = Math.max(hi, x); }
    }
    return { lo, hi, need, bg };
  });
  await shot(page, 'firstclick-headview.png');
  check(got.hi >= 0, 'no "query" header drawn in the head view');
  check(got.lo >= 1 && got.hi - got.lo + 1 >= got.need - 2,
        `the head view's "query" header is clipped: ink at x ${got.lo}…${got.hi}, the word needs ${got.need.toFixed(1)} px`);
}

// digits-reverse (E = 16) and a layer of the induction example (E = 64:
// narrow cells).
async function stepOutputLabels(page) {
  await selectTab(page, 'output');
  for (const example of ['trained', 'induction']) {
    await act(page, () => page.selectOption('[data-testid="example"]', example));
    const g = await page.evaluate(() => window.attn.outputLayout());
    check(g && g.labels, `${example}: the Output tab draws no row labels: ${JSON.stringify(g)}`);
    check(g.fontPx >= 10 && g.cell >= 10, `${example}: the Output tab's row labels are ${g.fontPx} px in rows of ${g.cell} px (at least 10)`);
    await shot(page, `firstclick-output-${example}.png`);
  }
  await selectTab(page, 'heatmap');
}

runSuite('firstclick.test', [
  ['Run beside the input', stepRunBeside, { essential: true }],
  ['Enter in the input runs it', stepEnterRuns],
  ['after a run the answer, or the error, is on screen', stepAnswerOnScreen],
  ['the induction example opens part-way; Step and Next token act at once', stepInductionOpens],
  ['at the last position Step and Next token are disabled, Reset said', stepLastPosition],
  ['ideal induction on by default, drawn only on its layer', stepIdealDefault],
  ['the Mask control shows the served model\'s default', stepMask],
  ['overview captions of one form, boxes of one width; the panel names the layer', stepOverview],
  ['docs/web.md quotes the captions the page shows', stepDocs],
  ['tooltips print at most 7 significant digits', stepTooltip],
  ['the head view\'s "query" header is not clipped', stepHeadView],
  ['the Output tab\'s row labels are at least 10 px', stepOutputLabels],
], { prefix: 'firstclick-', logName: 'server-firstclick.log' });
