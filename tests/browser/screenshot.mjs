#!/usr/bin/env node
// `make screenshot`: docs/screenshot.png, the README's picture, taken from the
// page as the browser tests drive it (tests/browser/harness.mjs: the real
// server on a free port, Debian's Chromium, a 1280 x 900 window): the page
// opens on the trained model (models/digits-reverse), the first head of its
// learned pattern is selected, and the pointer rests on the brightest cell of
// the large heatmap's first row, so the tooltip shows. The step checks what
// it shows (the trained model, no error, the tooltip), so a broken page fails
// instead of becoming the picture.
// Run through scripts/browser-test.sh screenshot (installs what is missing).

import fs from 'node:fs';
import path from 'node:path';
import { ROOT, check, openPage, runSuite, selectHead } from './harness.mjs';

const OUT = path.join(ROOT, 'docs', 'screenshot.png');

async function stepScreenshot(page, base) {
  await openPage(page, base);
  const example = await page.inputValue('[data-testid="example"]');
  check(example === 'trained', `the page opened on example "${example}", not the trained model`);
  const err = await page.evaluate(() => window.attn.state.lastError);
  check(!err, `the page shows an error: ${JSON.stringify(err)}`);
  const config = await (await fetch(new URL('v2/models/digits-reverse/config', base))).json();
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
  check(Number(weight) === row[j], `the tooltip says weight ${weight}, the page holds ${row[j]}`);
  await page.screenshot({ path: OUT, fullPage: false });
  check(fs.statSync(OUT).size > 10000, `${OUT} is too small to be the page`);
  process.stdout.write(`  wrote ${path.relative(ROOT, OUT)}: digits-reverse, head ${head}, the tooltip of query 0, key ${j}\n`);
}

runSuite('screenshot', [['docs/screenshot.png from the page on the trained model', stepScreenshot, { essential: true }]],
         { prefix: 'screenshot-', logName: 'server-screenshot.log' });
