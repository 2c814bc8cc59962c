// The plumbing the browser tests share (tests/browser/*.test.mjs): a real
// attention-server started on a free port, Debian's Chromium driven by
// playwright-core, the steps of a suite run in order with a report, and
// helpers that read what the page drew and what the server answered.
//
//   import { runSuite, check, runAndWait } from './harness.mjs';
//   runSuite('web.test', [['what it checks', async (page, base) => { ... }, { essential: true }], ...]);
//
// A failed check() throws CheckError; the suite goes on to the next step
// unless the failed one is essential (the rest cannot work without it).
// Screenshots and the server's log go to build/browser/. Any failure exits
// 1 with the reason; the server and the browser are stopped in every case.
//
// Environment: ATTN_SERVER (default build/attention-server), CHROMIUM
// (default /usr/bin/chromium), BROWSER_TEST_TIMEOUT (seconds, default 240).

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const SERVER = path.resolve(ROOT, process.env.ATTN_SERVER || 'build/attention-server');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
export const OUT = path.join(ROOT, 'build', 'browser');
const TOLERANCE = 2;   // per colour channel, 0..255

let server = null;
let context = null;
let userDataDir = null;
const pageErrors = [];
let suite = 'browser test';   // the name in the report lines

// ---------------------------------------------------------------------------
// Plumbing

export function log(msg) {
  process.stdout.write(`${msg}\n`);
}

export class CheckError extends Error {}
export function check(cond, msg) {
  if (!cond) throw new CheckError(msg);
}

export function sameColor(got, want, tol = TOLERANCE) {
  return got.length >= 3 && [0, 1, 2].every((c) => Math.abs(got[c] - want[c]) <= tol);
}
// Significant digits of a number as printed ("0.0557014" -> 6, "1.5e-7" -> 2).
export function sigDigits(text) {
  const m = /^-?(\d*)\.?(\d*)(e[-+]?\d+)?$/i.exec(String(text).trim());
  if (!m) return Infinity;
  return (m[1] + m[2]).replace(/^0+/, '').length;
}

// A float32 as the page prints it (web/js/tensor.js formatFloat32): at most
// 7 significant digits, within half a unit of the 7th of the value.
export function printedAs(text, v) {
  return sigDigits(text) <= 7 && Math.abs(Number(text) - v) <= 5e-7 * Math.abs(v) + 1e-45;
}

export const rgb = (c) => `rgb(${c[0]}, ${c[1]}, ${c[2]})`;

async function cleanup() {
  if (context) {
    const c = context;
    context = null;
    await Promise.race([c.close().catch(() => {}), new Promise((r) => setTimeout(r, 5000))]);
  }
  if (server && server.exitCode === null && server.signalCode === null) {
    server.kill('SIGTERM');
    await Promise.race([new Promise((r) => server.once('exit', r)), new Promise((r) => setTimeout(r, 5000))]);
    if (server.exitCode === null && server.signalCode === null) server.kill('SIGKILL');
  }
  server = null;
  if (userDataDir) {
    fs.rmSync(userDataDir, { recursive: true, force: true });
    userDataDir = null;
  }
}

async function die(msg) {
  process.stderr.write(`${suite}: FAIL: ${msg}\n`);
  await cleanup();
  process.exit(1);
}

for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => { die(`interrupted by ${sig}`); });
}
process.on('exit', () => {
  // Last resort (synchronous): never leave the server behind.
  if (server && server.exitCode === null) server.kill('SIGKILL');
});

function startServer(logName, serverArgs) {
  check(fs.existsSync(SERVER), `${SERVER} does not exist; run \`make build/attention-server\` first`);
  const logFile = fs.createWriteStream(path.join(OUT, logName));
  server = spawn(SERVER, ['--port', '0', '--bind', '127.0.0.1', '--static-dir', 'web', ...serverArgs],
                 { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  return new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`the server printed no "listening on" line in 10 s:\n${buf}`)), 10000);
    server.stderr.on('data', (d) => {
      logFile.write(d);   // keep draining stderr (access log) so the server never blocks
      if (buf === null) return;
      buf += d;
      const m = buf.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) {
        buf = null;
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    server.once('exit', (code, sig) => {
      clearTimeout(timer);
      reject(new Error(`the server exited (code ${code}, signal ${sig}) before listening:\n${buf || ''}`));
    });
  });
}

// Decodes a response tensor here, independently of the page's decoder.
export function decodeTensor(t) {
  if (t && typeof t.b64 === 'string') {
    const b = Buffer.from(t.b64, 'base64');
    const copy = new Uint8Array(b.length);
    copy.set(b);
    return { shape: t.shape, data: Array.from(new Float32Array(copy.buffer)) };
  }
  if (t && Array.isArray(t.data)) return { shape: t.shape, data: t.data.slice() };
  const shape = [];
  for (let x = t; Array.isArray(x); x = x[0]) shape.push(x.length);
  return { shape, data: t.flat(shape.length) };
}

// The weights of one response as w[b][h][i][j] (h = H means the average).
export function weightsOf(json) {
  const { batch: N, num_heads: H, target_len: L, source_len: S } = json;
  const w = decodeTensor(json.attention_weights).data;
  check(w.length === N * H * L * S, `attention_weights has ${w.length} values, expected N*H*L*S = ${N * H * L * S}`);
  const out = [];
  for (let b = 0; b < N; b++) {
    const heads = [];
    for (let h = 0; h < H; h++) {
      heads.push(Array.from({ length: L }, (_, i) => w.slice(((b * H + h) * L + i) * S, ((b * H + h) * L + i + 1) * S)));
    }
    heads.push(Array.from({ length: L }, (_, i) => Array.from({ length: S },
      (_, j) => Math.fround(heads.slice(0, H).reduce((a, m) => a + m[i][j], 0) / H))));
    out.push(heads);
  }
  return out;
}

export function argExtremes(m) {
  let max = { v: -Infinity }, min = { v: Infinity };
  m.forEach((row, i) => row.forEach((v, j) => {
    if (v > max.v) max = { v, i, j };
    if (v < min.v) min = { v, i, j };
  }));
  return { max, min };
}

// A v2 request body with binary tensors, split at its header length:
// {header, inputs: [{name, shape, datatype, data: Float32Array}]} in the
// order of the header's inputs; every byte must belong to one.
export function parseV2Body(buf, headerLen) {
  const header = JSON.parse(buf.subarray(0, headerLen).toString('utf8'));
  let off = headerLen;
  const inputs = header.inputs.map((inp) => {
    const n = inp.parameters.binary_data_size;
    const copy = new Uint8Array(n);
    copy.set(buf.subarray(off, off + n));
    off += n;
    return { name: inp.name, shape: inp.shape, datatype: inp.datatype, data: new Float32Array(copy.buffer) };
  });
  check(off === buf.length, `the v2 body has ${buf.length - off} bytes beyond its tensors`);
  return { header, inputs };
}

export const isAttention = (r) => new URL(r.url()).pathname === '/attention' && r.request().method() === 'POST';
export const isInfer = (r) => /^\/v2\/models\/[^/]+\/infer$/.test(new URL(r.url()).pathname) && r.request().method() === 'POST';

// Opens the page and waits for its first run (the trained model, or the
// sentence example without one); then, when `example` is given, chooses
// that built-in example and returns its run (runAndWait).
export async function openPage(page, base, example) {
  await page.goto(base, { waitUntil: 'domcontentloaded' });
  await page.waitForFunction(() => window.attn && window.attn.state.runCount > 0 && !window.attn.state.busy, null, { timeout: 30000 });
  if (!example) return null;
  return runAndWait(page, () => page.selectOption('[data-testid="example"]', example));
}

// Performs `action`, waits until the page has finished the run it starts and
// returns the /attention response it got (status and JSON body), or with
// v2, the v2 infer response (status and the playwright response, no body).
export async function runAndWait(page, action, timeout = 60000, { v2 = false } = {}) {
  const before = await page.evaluate(() => window.attn.state.runCount);
  const respP = page.waitForResponse(v2 ? isInfer : isAttention, { timeout });
  const t0 = Date.now();
  await action();
  const resp = await respP;
  await page.waitForFunction((n) => window.attn.state.runCount > n && !window.attn.state.busy, before, { timeout });
  const ms = Date.now() - t0;
  if (v2) return { status: resp.status(), body: null, ms, resp };
  // Chromium's inspector drops big bodies (the 22 MB of L = 512) from its
  // cache; then send the page's very request again from here (the answer is
  // deterministic) and read that.
  let body = await resp.json().catch(() => undefined);
  if (body === undefined) {
    const again = await fetch(resp.url(), { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                            body: resp.request().postData() });
    check(again.status === resp.status(), `the request sent again got HTTP ${again.status}, the page got ${resp.status()}`);
    body = await again.json().catch(() => null);
  }
  return { status: resp.status(), body, ms, sent: resp.request().postData() };
}

export async function pixels(page, cells) {
  return page.evaluate((cells) => {
    const c = document.getElementById('heatmap');
    const ctx = c.getContext('2d');
    return cells.map(([i, j]) => {
      const p = window.attn.cellPixel(i, j);
      return Array.from(ctx.getImageData(p.x, p.y, 1, 1).data.slice(0, 3));
    });
  }, cells);
}

// Every cell of the large heatmap against colorFor(value, view.max) for the
// matrix `m` (values below the view's threshold are expected as zero).
export async function checkHeatmapShows(page, m, what) {
  const view = await viewOf(page);
  const cells = [];
  m.forEach((row, i) => row.forEach((_, j) => cells.push([i, j])));
  const got = await pixels(page, cells);
  const want = await page.evaluate(({ vals, max, thr }) => vals.map((v) => window.attn.colorFor(v < thr ? 0 : v, max)),
                                   { vals: cells.map(([i, j]) => m[i][j]), max: view.max, thr: view.threshold });
  const bad = [];
  cells.forEach(([i, j], k) => { if (!sameColor(got[k], want[k])) bad.push(`(${i},${j}) w=${m[i][j]}: drawn ${rgb(got[k])}, expected ${rgb(want[k])}`); });
  check(bad.length === 0, `${what}: ${bad.length} of ${cells.length} cells have the wrong colour, e.g. ${bad.slice(0, 3).join('; ')}`);
  return { view, cells: cells.length };
}

// What the large heatmap shows: the state's view and the top of its colour range.
export async function viewOf(page) {
  return page.evaluate(() => {
    const v = window.attn.state.view;
    return { ...v, max: window.attn.colorMax(v.batch, v.head) };
  });
}

export async function shot(page, name) {
  await page.screenshot({ path: path.join(OUT, name), fullPage: true });
}

export async function selectHead(page, head) {
  await page.click(`[data-testid="head-thumb-${head}"]`);
  await page.waitForFunction((h) => String(window.attn.state.view.head) === String(h), head);
}

export async function selectTab(page, tab) {
  await page.click(`[data-testid="tab-${tab}"]`);
  await page.waitForFunction((t) => window.attn.state.view.tab === t, tab);
}

// ---------------------------------------------------------------------------

// Runs `steps` ([name, async (page, base) => ..., {essential}], in order) on
// one page against a fresh server (started in the repository's root, so
// its model_repository is models/ unless serverArgs name another) and
// exits: 0 if every step passed, else 1 after naming the failures. Screenshots whose names start with `prefix`
// are removed first (the whole folder's with ''); the server's log is
// build/browser/<logName>.
export async function runSuite(name, steps, { prefix = '', logName = 'server.log', serverArgs = [] } = {}) {
  suite = name;
  main(steps, prefix, logName, serverArgs).catch((e) => die(e instanceof CheckError ? e.message : (e && e.stack) || String(e)));
}

async function main(steps, prefix, logName, serverArgs) {
  fs.mkdirSync(OUT, { recursive: true });
  for (const f of fs.readdirSync(OUT)) if (f.startsWith(prefix) && /\.png$/.test(f)) fs.rmSync(path.join(OUT, f));
  const watchdog = setTimeout(() => die(`timed out after ${process.env.BROWSER_TEST_TIMEOUT || 240} s`),
                              1000 * Number(process.env.BROWSER_TEST_TIMEOUT || 240));
  check(fs.existsSync(CHROMIUM), `${CHROMIUM} is missing (apt-get install chromium)`);
  const port = await startServer(logName, serverArgs);
  const base = `http://127.0.0.1:${port}/`;
  log(`${suite}: server on ${base}, browser ${CHROMIUM}`);
  userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'attn-browser-'));
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
           '--disable-component-update', '--disable-sync', '--disable-quic', '--no-first-run'],
    viewport: { width: 1280, height: 900 },
    deviceScaleFactor: 1,
    acceptDownloads: true,
  });
  const page = context.pages()[0] || await context.newPage();
  page.setDefaultTimeout(15000);
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error' && !/status of 4\d\d/.test(m.text())) log(`  [browser console] ${m.text()}`); });
  log(`${suite}: ${(await page.evaluate(() => navigator.userAgent)).match(/HeadlessChrome\/[\d.]+/)}`);

  const results = [];
  for (const [name, fn, opts] of steps) {
    const t = Date.now();
    try {
      await fn(page, base);
      if (pageErrors.length) throw new CheckError(`uncaught error in the page: ${pageErrors.splice(0).join(' | ')}`);
      results.push([name, null]);
      log(`ok   ${name} (${Date.now() - t} ms)`);
    } catch (e) {
      results.push([name, e]);
      log(`FAIL ${name}: ${e instanceof CheckError ? e.message : e.stack}`);
      await page.screenshot({ path: path.join(OUT, `${prefix}failed-${results.length}.png`), fullPage: true }).catch(() => {});
      if (opts && opts.essential) break;   // nothing else can work without it
    }
  }
  clearTimeout(watchdog);
  await cleanup();
  const failed = results.filter(([, e]) => e);
  log(`${suite}: ${results.length - failed.length} passed, ${failed.length} failed; screenshots in ${path.relative(ROOT, OUT)}/`);
  if (failed.length) {
    for (const [name, e] of failed) process.stderr.write(`${suite}: FAIL: ${name}: ${e.message}\n`);
    process.exit(1);
  }
}
