#!/usr/bin/env node
// `make screenshot`: the docs' pictures, taken from the page as the browser
// tests drive it (tests/browser/harness.mjs: the real server on a free port,
// Debian's Chromium, a 1280 x 900 window). Each step checks what it shows,
// so a broken page fails instead of becoming the picture.
//
//   docs/screenshot.png, the README's picture: the page opens on the trained
//       model (models/digits-reverse), the first head of its learned pattern
//       is selected, and the pointer rests on the brightest cell of the large
//       heatmap's first row, so the tooltip shows (checked: the trained
//       model, no error, the tooltip);
//   docs/induction.png, docs/web.md's picture of the induction example: the
//       example, opened part-way, stepped token by token to the end of the repeat's
//       second copy, the induction head open in the large map with the ideal
//       induction overlay on; the shot reaches down to the layer × head
//       overview under the map (checked: the induction example, no error,
//       the induction head shown, its mean weight on key i − m + 1 over the
//       second copy ≥ 0.4: the stripe is there).
// Run through scripts/browser-test.sh screenshot (installs what is missing).

import fs from 'node:fs';
import path from 'node:path';
import { ROOT, check, openPage, printedAs, runSuite, selectHead } from './harness.mjs';

const OUT = path.join(ROOT, 'docs', 'screenshot.png');
const INDUCTION = path.join(ROOT, 'docs', 'induction.png');

async function stepScreenshot(page, base) {
  await openPage(page, base);
  const example = await page.inputValue('[data-testid="example"]');
  check(example === 'trained', `the page opened on example "${example}", not the trained model`);
  const err = await page.evaluate(() => window.attn.state.lastError);
  check(!err, `the page shows an error: ${JSON.stringify(err)}`);
  const config = await (await fetch(new URL('v2/models/digits-reverse/config.json', base))).json();
  const head = config.pattern.heads[0];
  await selectHead(page, head);
  // the brightest cell of row 0 (the mirrored key), hovered for its tooltip
  const row = await page.evaluate((h) => window.attn.matrix(0, h)[0], head);
  const j = row.indexOf(Math.max(...row));
  const r = await page.evaluate((jj) => window.attn.cellRect(0, jj), j);
  check(r, 'attn.cellRect returned null on the heatmap tab');
  await page.mouse.move(r.cx, r.cy);
  await page.waitForSelector('[data-testid="tooltip"]', { state: 'visible', timeout: 5000 });
  const weight = await page.evaluate(() => document.getElementById('tip-weight').textContent);
  check(printedAs(weight, row[j]), `the tooltip says weight ${weight}, the page holds ${row[j]}`);
  await page.screenshot({ path: OUT, fullPage: false });
  check(fs.statSync(OUT).size > 10000, `${OUT} is too small to be the page`);
  process.stdout.write(`  wrote ${path.relative(ROOT, OUT)}: digits-reverse, head ${head}, the tooltip of query 0, key ${j}\n`);
}

// Waits for the run `action` starts (a stack action sends one call per layer).
async function act(page, action) {
  const before = await page.evaluate(() => window.attn.state.runCount);
  await action();
  await page.waitForFunction((n) => window.attn.state.runCount > n && !window.attn.state.busy, before, { timeout: 30000 });
  const err = await page.evaluate(() => window.attn.state.lastError);
  check(!err, `the page shows an error: ${JSON.stringify(err)}`);
}

async function stepInduction(page, base) {
  await openPage(page, base);
  const config = await (await fetch(new URL('v2/models/induction-l0/config.json', base))).json();
  const { induction } = config.circuit, example = [...config.input.example];
  await act(page, () => page.selectOption('[data-testid="example"]', 'induction'));
  const label = await page.$eval('[data-testid="example"]', (s) => s.selectedOptions[0].textContent);
  check(/induction/i.test(label), `the example shown is "${label}", not the induction example`);
  // It opens part-way into the repeat: Step to the end of the second copy
  // (the longest segment repeated right after itself).
  check(await page.isChecked('[data-testid="ideal-induction"]'), 'the ideal overlay is off');
  let end = 0;
  for (let m = Math.floor(example.length / 2); m >= 2 && !end; m--) {
    for (let st = 0; st + 2 * m <= example.length && !end; st++) {
      if (example.slice(st, st + m).join('') === example.slice(st + m, st + 2 * m).join('')) end = st + 2 * m;
    }
  }
  check(end > 0, 'the example has no repeated segment');
  let s = await page.evaluate(() => window.attn.stack());
  while (s.n < end) {
    await act(page, () => page.click('[data-testid="step"]'));
    s = await page.evaluate(() => window.attn.stack());
  }
  check(s.tokens.join('') === example.slice(0, s.n).join(''), `the page holds "${s.tokens.join('')}", not the example's first ${s.n} tokens`);
  const view = await page.evaluate(() => window.attn.state.view);
  check(s.layer === induction.layer && view.head === induction.head && view.tab === 'heatmap',
        `the large map shows layer ${s.layer} head ${view.head} (${view.tab}), not the induction head ${JSON.stringify(induction)}`);
  check(s.ideal.length >= 4, `the ideal overlay has ${s.ideal.length} cells`);
  const m = s.maps[induction.layer][induction.head];
  const stripe = s.ideal.reduce((t, [i, j]) => t + m[i][j], 0) / s.ideal.length;
  check(stripe >= 0.4, `the induction head's mean weight on key i − m + 1 over the second copy is ${stripe.toFixed(3)} < 0.4: no stripe`);
  const bottom = await page.evaluate(() => {
    window.scrollTo(0, 0);
    return Math.ceil(document.getElementById('overview-card').getBoundingClientRect().bottom) + 16;
  });
  await page.screenshot({ path: INDUCTION, fullPage: true, clip: { x: 0, y: 0, width: 1280, height: Math.max(900, bottom) } });
  check(fs.statSync(INDUCTION).size > 10000, `${INDUCTION} is too small to be the page`);
  process.stdout.write(`  wrote ${path.relative(ROOT, INDUCTION)}: ${s.n} tokens stepped, layer ${s.layer} head ${view.head}, ` +
                       `stripe ${stripe.toFixed(2)} over ${s.ideal.length} cells\n`);
}

runSuite('screenshot', [
  ['docs/screenshot.png from the page on the trained model', stepScreenshot, { essential: true }],
  ['docs/induction.png from the page on the induction example, stepped', stepInduction],
], { prefix: 'screenshot-', logName: 'server-screenshot.log' });
