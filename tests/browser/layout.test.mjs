#!/usr/bin/env node
// Browser tests of the page's layout and of the trained model's answer in
// words (docs/web.md), against a real build/attention-server started on a
// free port on the repository's models/. Run through scripts/browser-test.sh,
// or directly: node tests/browser/layout.test.mjs
//
// What is checked:
//   readout.js on a made-up model: logits, argmax, the bias, "next" and
//       "reverse" answers;
//   answer: under the map, digits-reverse's answer is the argmax of its
//       unembedding (+ unembedding_bias, from the served config.json,
//       computed here) applied to the page's Output, the input reversed,
//       each digit marked right; none for an untrained example;
//   widths 820, 1400 and 1920 px (heights 1180, 900, 1080, and 720 at 820
//       and 1400, a short window): nothing cut off
//       (no option of a select wider than the select shows; no sideways
//       scroll),
//       the map and its answer on screen after a run; at 1920 the map is
//       larger than at 1400 and reaches down the window;
//   the induction example at 820, 1400 and 1920 px (after a Reset and
//       three Steps, and after a run of its 32 tokens): no select, step control, predictions column,
//       overview label or map title cut off (past the window or its card,
//       or its text wider than its box), no sideways scroll, no word of a
//       head's label broken across lines; the large map and the Step
//       button on screen together, and at 1920 the overview beside them;
//   served-model panel: the defaults as "name: value" lines, no identifier
//       broken across two lines; the controls a served model sets look
//       disabled (faded), and not with an untrained example;
//   tooltip: hovering every cell of the map, it never covers the legend;
//   compare: the axes are labelled with the tokens, as the heatmap's;
//   an input error: the banner alone, no maps of the earlier input under
//       it; the next run shows them again;
//   the server's start-up line names the page's address, and the model's
//       load line gives its size in KB.
// Screenshots: build/browser/layout-*.png. Plumbing: tests/browser/harness.mjs.

import fs from 'node:fs';
import path from 'node:path';
import { OUT, check, log, openPage, runAndWait, runSuite, selectTab, shot } from './harness.mjs';

const MODEL = 'digits-reverse';
const WIDTHS = [[820, 1180], [1400, 900], [1920, 1080], [820, 720], [1400, 720]];
const ctx = { config: null, mapAt: {} };

async function runModel(page) {
  const r = await runAndWait(page, () => page.click('[data-testid="run"]'), 60000, { v2: true });
  check(r.status === 200, `the run got HTTP ${r.status}`);
}

// The answer computed here from the served config and the Output the page drew.
async function answerHere(page) {
  const { out, tokens } = await page.evaluate(() => ({ out: Array.from(window.attn.state.response.output),
                                                        tokens: Array.from(window.attn.state.response.tokens) }));
  const U = ctx.config.unembedding, b = ctx.config.unembedding_bias, E = U[0].length;
  return { tokens, words: tokens.map((_, i) => {
    let best = 0, bestZ = -Infinity;
    U.forEach((row, v) => {
      let z = b[v];
      for (let e = 0; e < E; e++) z += out[i * E + e] * row[e];
      if (z > bestZ) { bestZ = z; best = v; }
    });
    return ctx.config.vocab[best];
  }) };
}

async function stepAnswer(page, base) {
  await openPage(page, base);
  ctx.config = await (await fetch(new URL(`v2/models/${MODEL}/config.json`, base))).json();
  check(Array.isArray(ctx.config.unembedding) && Array.isArray(ctx.config.unembedding_bias) && !ctx.config.readout,
        'the served config has no unembedding / unembedding_bias (or still a readout)');
  check(await page.inputValue('[data-testid="model"]') === MODEL, `the page opened on ${await page.inputValue('[data-testid="model"]')}`);
  for (const input of ['31415926', '27182818']) {
    await page.fill('[data-testid="tokens"]', input);
    await runModel(page);
    const { tokens, words } = await answerHere(page);
    check(words.join('') === [...input].reverse().join(''), `${input}: the unembedding here reads ${words.join('')}`);
    check(await page.isVisible('[data-testid="answer"]'), `${input}: no answer under the map`);
    const shown = await page.$$eval('[data-testid="answer-token"]', (s) => s.map((x) => [x.textContent, x.className]));
    check(JSON.stringify(shown.map((x) => x[0])) === JSON.stringify(words),
          `${input}: the page shows ${shown.map((x) => x[0]).join(' ')}, the unembedding gives ${words.join(' ')}`);
    check(shown.every((x) => /\bright\b/.test(x[1])), `${input}: not every digit marked right: ${JSON.stringify(shown)}`);
    const verdict = await page.textContent('[data-testid="answer-verdict"]');
    check(/right/.test(verdict) && /reversed/.test(verdict), `${input}: the verdict says "${verdict}"`);
    const a = await page.evaluate(() => window.attn.answer());
    check(a && a.right.every(Boolean) && JSON.stringify(a.expected) === JSON.stringify(tokens.slice().reverse()),
          `${input}: attn.answer() is ${JSON.stringify(a)}`);
    log(`  ${input} -> ${words.join('')} under the map, marked right`);
  }
  await shot(page, 'layout-answer.png');
  await runAndWait(page, () => page.selectOption('[data-testid="example"]', 'sentence'));
  check(!(await page.isVisible('[data-testid="answer"]')), 'an untrained example shows an answer');
  check(await page.evaluate(() => window.attn.answer()) === null, 'attn.answer() is not null for an untrained example');
  await runAndWait(page, () => page.selectOption('[data-testid="example"]', 'trained'), 60000, { v2: true });
}

// js/readout.js on a small made-up model, as the induction model's config
// has it (no bias; answer "next"), and with a bias.
async function stepReadoutModule(page) {
  const got = await page.evaluate(async () => {
    const m = await import('./js/readout.js');
    const cfg = { vocab: ['a', 'b', 'c'], unembedding: [[1, 0], [0, 1], [1, 1]], answer: 'next' };
    const x = new Float32Array([2, 0, 0, 3, 1, 1, -1, -1]);   // 4 rows of E = 2
    const withBias = { ...cfg, unembedding_bias: [0, 0, -5], answer: 'reverse' };
    return { can: [m.canRead(cfg), m.canRead({ ...cfg, unembedding: [[1, 0]] }), m.canRead({ ...cfg, unembedding_bias: [1] }),
                   m.canRead({ vocab: ['a'] })],
             z: Array.from(m.logits(cfg, x)), words: m.predict(cfg, x), biased: m.predict(withBias, x),
             next: m.expected(cfg, ['a', 'b', 'c']), rev: m.expected(withBias, ['a', 'b', 'c']),
             none: m.expected({ vocab: [] }, ['a']), what: [m.answerWhat(cfg), m.answerWhat(withBias)] };
  });
  const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  check(same(got.can, [true, false, false, false]), `canRead: ${JSON.stringify(got.can)}`);
  check(same(got.z, [2, 0, 2, 0, 3, 3, 1, 1, 2, -1, -1, -2]), `logits: ${JSON.stringify(got.z)}`);
  check(same(got.words, ['a', 'b', 'c', 'a']), `tokens: ${JSON.stringify(got.words)} (argmax, the first on a tie)`);
  check(same(got.biased, ['a', 'b', 'a', 'a']), `tokens with the bias: ${JSON.stringify(got.biased)}`);
  check(same(got.next, ['b', 'c', null]) && same(got.rev, ['c', 'b', 'a']) && got.none === null,
        `expected: next ${JSON.stringify(got.next)}, reverse ${JSON.stringify(got.rev)}, none ${JSON.stringify(got.none)}`);
  log(`  logits, argmax, bias, answers "next" and "reverse" (${got.what.join(', ')})`);
}

// Every visible select with an option whose text is wider than the select
// shows (any option may be chosen): each measured in a copy of the select
// sized to its content.
async function cutOff(page) {
  return page.evaluate(() => {
    const bad = [];
    const fits = (sel, text) => {
      const probe = sel.cloneNode(false), cs = getComputedStyle(sel);
      probe.removeAttribute('id');
      probe.style.cssText = 'position:absolute;visibility:hidden;width:auto;min-width:0;max-width:none;left:0;top:0';
      for (const p of ['font', 'letter-spacing', 'padding', 'border', 'appearance', 'box-sizing']) probe.style.setProperty(p, cs.getPropertyValue(p));
      probe.add(new Option(text));
      document.body.append(probe);
      const need = probe.getBoundingClientRect().width;
      probe.remove();
      return need <= sel.getBoundingClientRect().width + 0.5 ? null : need;
    };
    for (const sel of document.querySelectorAll('select')) {
      if (!sel.offsetParent || sel.getBoundingClientRect().width === 0) continue;
      const texts = [...sel.options].map((o) => o.text);
      for (const t of texts) {
        const need = fits(sel, t);
        if (need) bad.push(`#${sel.id} "${t}" needs ${Math.ceil(need)} px, has ${Math.round(sel.getBoundingClientRect().width)}`);
      }
    }
    const doc = document.documentElement;
    if (doc.scrollWidth > doc.clientWidth) bad.push(`the page scrolls sideways (${doc.scrollWidth} > ${doc.clientWidth})`);
    const v = document.getElementById('view-heatmap');
    if (v.scrollWidth > v.clientWidth) bad.push(`the heatmap view scrolls sideways (${v.scrollWidth} > ${v.clientWidth})`);
    return bad;
  });
}

async function boxes(page) {
  return page.evaluate(() => {
    const box = (id) => { const r = document.getElementById(id).getBoundingClientRect(); return { x: r.x, y: r.y, w: r.width, h: r.height, bottom: r.bottom, right: r.right }; };
    return { map: box('heatmap'), answer: box('answer'), W: window.innerWidth, H: window.innerHeight };
  });
}

async function stepWidths(page) {
  for (const [W, H] of WIDTHS) {
    await page.setViewportSize({ width: W, height: H });
    await page.waitForTimeout(300);   // the page lays out again 120 ms after a resize
    await page.evaluate(() => window.scrollTo(0, 0));
    await runModel(page);
    await page.evaluate(() => window.scrollTo(0, 0));
    const bad = await cutOff(page);
    check(bad.length === 0, `at ${W} px: cut off: ${bad.join('; ')}`);
    const b = await boxes(page);
    const on = (r) => r.x >= 0 && r.y >= 0 && r.right <= b.W && r.bottom <= b.H;
    check(on(b.map), `at ${W} x ${H}: the map is at (${Math.round(b.map.x)}, ${Math.round(b.map.y)}) ${Math.round(b.map.w)} x ${Math.round(b.map.h)}, not on screen`);
    check(on(b.answer), `at ${W} x ${H}: the answer under the map is at y ${Math.round(b.answer.y)}…${Math.round(b.answer.bottom)}, not on screen`);
    ctx.mapAt[`${W}x${H}`] = b;
    await page.screenshot({ path: path.join(OUT, `layout-${W}x${H}.png`) });
    log(`  ${W} x ${H}: nothing cut off; map ${Math.round(b.map.w)} x ${Math.round(b.map.h)} at (${Math.round(b.map.x)}, ${Math.round(b.map.y)}), answer on screen`);
  }
  const a = ctx.mapAt['1400x900'].map, c = ctx.mapAt['1920x1080'];
  check(c.map.w * c.map.h >= 1.4 * a.w * a.h, `at 1920 px the map (${Math.round(c.map.w)} x ${Math.round(c.map.h)}) is not larger than at 1400 px (${Math.round(a.w)} x ${Math.round(a.h)})`);
  check(c.H - c.answer.bottom < 0.25 * c.H, `at 1920 x 1080 the map and its answer end at y ${Math.round(c.answer.bottom)}: a large empty area below`);
  await page.setViewportSize({ width: 1400, height: 900 });
}

// With the induction example shown: every element of `sels` that is shown
// and whose box is cut off (it reaches past the window's sides or its
// card's, or its text overflows its box), in words.
async function stackCutOff(page, sels) {
  return page.evaluate((list) => {
    const bad = [], W = document.documentElement.clientWidth;
    for (const sel of list) {
      for (const el of document.querySelectorAll(sel)) {
        if (!el.offsetParent) { bad.push(`${sel} is not shown`); continue; }
        const r = el.getBoundingClientRect(), card = el.closest('.card').getBoundingClientRect();
        const name = `${sel} "${el.textContent.trim().slice(0, 40)}"`;
        if (r.left < 0 || r.right > W + 0.5) bad.push(`${name} at x ${Math.round(r.left)}…${Math.round(r.right)}, the window is ${W} wide`);
        if (r.left < card.left - 0.5 || r.right > card.right + 0.5) bad.push(`${name} reaches out of its card`);
        if (el.scrollWidth > el.clientWidth + 1) bad.push(`${name}'s text needs ${el.scrollWidth} px, has ${el.clientWidth}`);
      }
    }
    return bad;
  }, sels);
}

const STACK_PARTS = ['#step', '#next-token', '#reset', 'label:has(#ideal)', '#predictions', '#predictions .pcol', '#step-status',
                     '.overview-label', '.overview .thumb', '.overview .thumb span', '#view-title'];

// The induction example (two served layers, step mode, the overview) at each
// width: nothing cut off, no sideways scroll, no word of a head's label
// broken across lines, and after a run (and a Step) the large map and the
// step controls on screen together.
async function stepStackWidths(page) {
  const runs = () => page.evaluate(() => window.attn.state.runCount);
  const done = (n) => page.waitForFunction((k) => window.attn.state.runCount > k && !window.attn.state.busy, n, { timeout: 30000 });
  let n = await runs();
  await page.selectOption('[data-testid="example"]', 'induction');
  await done(n);
  try {
    await stackAtWidths(page, runs, done);
  } finally {   // the steps after this one start from the trained model at 1400 px
    await page.setViewportSize({ width: 1400, height: 900 });
    n = await runs();
    await page.selectOption('[data-testid="example"]', 'trained');
    await done(n);
  }
}

async function stackAtWidths(page, runs, done) {
  let n;
  for (const [W, H] of WIDTHS.slice(0, 3)) {
    await page.setViewportSize({ width: W, height: H });
    await page.waitForTimeout(300);   // the page lays out again 120 ms after a resize
    await page.evaluate(() => window.scrollTo(0, 0));
    // After three Steps from a Reset, then after a run of all 32 tokens.
    n = await runs();
    await page.click('[data-testid="reset"]');
    await done(n);
    for (let k = 0; k < 3; k++) { n = await runs(); await page.click('[data-testid="step"]'); await done(n); }
    for (const when of ['after 3 steps', 'after a run']) {
      if (when === 'after a run') { n = await runs(); await page.click('[data-testid="run"]'); await done(n); }
      check(!(await page.evaluate(() => window.attn.state.lastError)), `at ${W} px the induction example shows an error`);
      await page.evaluate(() => window.scrollTo(0, 0));
      const bad = (await cutOff(page)).concat(await stackCutOff(page, STACK_PARTS));
      if (bad.length) await page.screenshot({ path: path.join(OUT, `layout-induction-${W}x${H}.png`) });
      check(bad.length === 0, `at ${W} px, the induction example ${when}: cut off: ${bad.join('; ')}`);
      const broken = await brokenWords(page, '[data-testid="overview"]');
      check(broken.length === 0, `at ${W} px, ${when}, words broken across lines in the overview: ${broken.join(', ')}`);
    }
    const b = await page.evaluate(() => {
      const box = (id) => { const r = document.getElementById(id).getBoundingClientRect(); return { x: r.x, y: r.y, w: r.width, h: r.height, bottom: r.bottom, right: r.right }; };
      return { map: box('heatmap'), step: box('step'), overview: box('overview-card'), W: window.innerWidth, H: window.innerHeight };
    });
    const on = (r) => r.x >= 0 && r.y >= 0 && r.right <= b.W && r.bottom <= b.H;
    await page.screenshot({ path: path.join(OUT, `layout-induction-${W}x${H}.png`) });
    check(on(b.map), `at ${W} x ${H}, the induction example: the map is at (${Math.round(b.map.x)}, ${Math.round(b.map.y)}) ${Math.round(b.map.w)} x ${Math.round(b.map.h)}, not on screen`);
    check(on(b.step), `at ${W} x ${H}, the induction example: the Step button is at (${Math.round(b.step.x)}, ${Math.round(b.step.y)}), not on screen with the map`);
    // A wide window: the overview beside the map, not a large empty area.
    if (W >= 1920) check(on(b.overview) && b.overview.x >= b.map.right, `at ${W} x ${H}, the induction example: the overview is at (${Math.round(b.overview.x)}, ${Math.round(b.overview.y)}) ${Math.round(b.overview.w)} x ${Math.round(b.overview.h)}, not on screen beside the map`);
    log(`  ${W} x ${H}: nothing cut off; map ${Math.round(b.map.w)} x ${Math.round(b.map.h)} at (${Math.round(b.map.x)}, ${Math.round(b.map.y)}) under the step controls`);
  }
}

// No word of the text under el is split across two lines.
async function brokenWords(page, selector) {
  return page.evaluate((sel) => {
    const out = [];
    const walk = document.createTreeWalker(document.querySelector(sel), NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      for (const m of n.data.matchAll(/[^\s]+/g)) {
        const r = document.createRange();
        r.setStart(n, m.index);
        r.setEnd(n, m.index + m[0].length);
        const tops = new Set([...r.getClientRects()].map((q) => Math.round(q.top)));
        if (tops.size > 1) out.push(m[0]);
      }
    }
    return out;
  }, selector);
}

async function stepModelPanel(page) {
  for (const [W, H] of [[1400, 900], [820, 1180]]) {
    await page.setViewportSize({ width: W, height: H });
    await page.waitForTimeout(200);
    const text = await page.innerText('[data-testid="model-meta"]');
    check(!/[{}]/.test(text), `at ${W} px the panel shows raw JSON: ${text}`);
    const meta = await (await fetch(new URL(`v2/models/${MODEL}`, page.url()))).json();
    for (const [k, v] of Object.entries(meta.parameters.defaults))
      check(text.includes(`${k}: ${v}`), `at ${W} px the panel has no line "${k}: ${v}": ${text}`);
    const broken = await brokenWords(page, '[data-testid="model-meta"]');
    check(broken.length === 0, `at ${W} px words broken across lines in the panel: ${broken.join(', ')}`);
  }
  await page.setViewportSize({ width: 1400, height: 900 });
  const look = () => page.evaluate(() => ['embed-dim', 'heads', 'seed', 'scale', 'rope', 'softcap'].map((id) => {
    const el = document.getElementById(id);
    return { id, disabled: el.matches(':disabled'), opacity: Number(getComputedStyle(el).opacity) };
  }));
  const served = await look();
  for (const c of served) check(c.disabled && c.opacity <= 0.6, `with a served model #${c.id} is ${c.disabled ? '' : 'not '}disabled, opacity ${c.opacity}`);
  await runAndWait(page, () => page.selectOption('[data-testid="example"]', 'sentence'));
  for (const c of await look()) check(!c.disabled && c.opacity === 1, `with an untrained example #${c.id} looks disabled (opacity ${c.opacity})`);
  await runAndWait(page, () => page.selectOption('[data-testid="example"]', 'trained'), 60000, { v2: true });
  log(`  defaults as name: value lines, no word broken; disabled controls at opacity ${served[0].opacity}`);
}

async function stepTooltip(page) {
  for (const [W, H] of [[1400, 900], [820, 1180]]) {
    await page.setViewportSize({ width: W, height: H });
    await page.waitForTimeout(300);
    await runModel(page);
    const { L, S } = await page.evaluate(() => ({ L: window.attn.state.response.L, S: window.attn.state.response.S }));
    const over = [];
    await page.evaluate(() => { window.scrollTo(0, 0); document.getElementById('heatmap').scrollIntoView({ block: 'nearest' }); });
    for (let i = 0; i < L; i++) {
      for (let j = 0; j < S; j++) {
        const c = await page.evaluate(([a, b]) => window.attn.cellRect(a, b), [i, j]);
        await page.mouse.move(c.cx, c.cy);
        const r = await page.evaluate(() => {
          const box = (id) => document.getElementById(id).getBoundingClientRect();
          return { tip: box('tooltip'), legend: box('legend'), shown: !document.getElementById('tooltip').hidden };
        });
        check(r.shown, `at ${W} px no tooltip over cell (${i}, ${j})`);
        const t = r.tip, g = r.legend;
        if (!(t.right <= g.left || t.left >= g.right || t.bottom <= g.top || t.top >= g.bottom)) over.push(`(${i}, ${j})`);
      }
    }
    check(over.length === 0, `at ${W} px the tooltip covers the legend over cells ${over.join(' ')}`);
    await page.mouse.move(2, 2);
  }
  await page.setViewportSize({ width: 1400, height: 900 });
  log('  the tooltip never covers the legend (every cell, 1400 and 820 px)');
}

async function stepCompare(page) {
  await selectTab(page, 'compare');
  await page.waitForFunction(() => window.attn.compareLabels() !== null);
  const got = await page.evaluate(() => ({ labels: window.attn.compareLabels(), tokens: Array.from(window.attn.state.response.tokens),
                                            keys: Array.from(window.attn.state.response.keyTokens) }));
  check(got.labels.tokens && JSON.stringify(got.labels.rows) === JSON.stringify(got.tokens) &&
        JSON.stringify(got.labels.cols) === JSON.stringify(got.keys),
        `the Compare tab labels its axes ${JSON.stringify(got.labels)}, the heatmap with the tokens ${got.tokens.join(' ')}`);
  await shot(page, 'layout-compare.png');
  await selectTab(page, 'heatmap');
  log(`  Compare axes: ${got.labels.rows.join(' ')}`);
}

async function stepError(page) {
  await page.fill('[data-testid="tokens"]', '12a45678');
  await page.click('[data-testid="run"]');
  await page.waitForSelector('#error', { state: 'visible', timeout: 5000 });
  const shown = await page.evaluate(() => ['heads-card', 'view-card', 'head-grid', 'heatmap', 'answer']
    .filter((id) => { const el = document.getElementById(id); return el.offsetParent !== null && el.getBoundingClientRect().height > 0; }));
  check(shown.length === 0, `after an input error the page still shows ${shown.join(', ')} under the banner`);
  check(await page.evaluate(() => window.attn.state.response) === null, 'after an input error the earlier response is kept');
  await shot(page, 'layout-error.png');
  await page.fill('[data-testid="tokens"]', '31415926');
  await runModel(page);
  check(await page.isVisible('[data-testid="heatmap"]') && await page.isVisible('[data-testid="answer"]'),
        'after a good run the maps are not shown again');
  log('  an input error: the banner alone; the next run shows the maps again');
}

async function stepLog(page, base) {
  const text = fs.readFileSync(path.join(OUT, 'server-layout.log'), 'utf8');
  check(text.includes(`open ${base} in a browser`), `the server's start-up line does not name ${base}:\n${text.split('\n').slice(0, 3).join('\n')}`);
  const line = text.split('\n').find((l) => l.includes(`model ${MODEL}: loaded`)) || '';
  check(/, \d+\.\d KB\)$/.test(line) && !/0\.0 MB/.test(line), `the load line gives the size as: ${line}`);
  log(`  "${text.split('\n').find((l) => l.includes('listening on')).replace(/.*\)/, '').trim()}"; ${line.replace(/.*, /, '')}`);
}

runSuite('layout.test', [
  ['answer: digits-reverse\'s reversed digits under the map, marked right', stepAnswer, { essential: true }],
  ['readout.js: logits, tokens, the right answers', stepReadoutModule],
  ['820, 1400, 1920 px: nothing cut off, the map on screen', stepWidths],
  ['the induction example at 820, 1400, 1920 px: nothing cut off, the map on screen with the step controls', stepStackWidths],
  ['served-model panel: defaults readable, no broken words; disabled controls look it', stepModelPanel],
  ['tooltip never covers the legend', stepTooltip],
  ['compare: axes labelled with the tokens', stepCompare],
  ['input error: no earlier maps under the banner', stepError],
  ['start-up line names the page; model size in KB', stepLog],
], { prefix: 'layout-', logName: 'server-layout.log' });
