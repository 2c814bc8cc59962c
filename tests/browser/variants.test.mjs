#!/usr/bin/env node
// Browser tests of the attention-variant controls (docs/web.md,
// issue 12), against a real build/attention-server started on a free port.
// Run through scripts/browser-test.sh, or directly:
//
//   node tests/browser/variants.test.mjs             # both groups below
//   node tests/browser/variants.test.mjs requests    # the request shapes only
//
// requests: each control (KV heads, RoPE and its theta and rotary dims, the
//   query position offset, ALiBi, the window's two sides, soft-cap, both
//   causal alignments) is set on its own, the page's run captured as it goes
//   over the wire (and read back through the hook, attn.state.lastRequest):
//   the field is there with the value typed, no other variant field is,
//   and with all of them set at once all are. With Hkv < H the packed
//   in_proj_weight is (E + 2·Hkv·d, E), its k block following the query
//   heads of its group. Whatever the server answers.
// heatmaps: the server computes the variants; the page draws them: causal
//   lower-right cross-attention (L = 7, S = 8) and a window of [2, 0] with
//   grouped KV heads, RoPE, ALiBi and soft-cap have weight zero exactly
//   where blocked, in every head, and the large heatmap draws those cells
//   as zero and every cell as the server's weight.
// Screenshots: build/browser/var-*.png. Plumbing: tests/browser/harness.mjs.

import { check, checkHeatmapShows, decodeTensor, log, openPage, pixels, rgb, runAndWait, runSuite, sameColor, selectHead,
         shot, weightsOf } from './harness.mjs';

// Every variant control as the page starts: nothing set.
const DEFAULTS = { 'kv-heads': '', 'pos-offset': '', 'rope-theta': '', 'rope-dim': '', rope: 'off', alibi: false,
                   'window-left': '', 'window-right': '', softcap: '', mask: 'none' };
const VARIANT_KEYS = ['num_kv_heads', 'rope', 'query_position_offset', 'alibi', 'alibi_slopes', 'window', 'softcap',
                      'attn_mask'];

// Sets the variant controls to DEFAULTS overridden by `values` (control
// id -> value; '' empties it). RoPE's own fields are shown (and emptied or
// filled) before RoPE takes its value.
async function setControls(page, values) {
  const all = { ...DEFAULTS, ...values };
  await page.selectOption('[data-testid="rope"]', 'half');
  for (const [id, v] of Object.entries(all)) {
    const sel = `[data-testid="${id}"]`;
    if (typeof v === 'boolean') await page.setChecked(sel, v);
    else if (await page.$eval(sel, (el) => el.tagName === 'SELECT')) await page.selectOption(sel, v === '' ? { index: 0 } : v);
    else await page.fill(sel, v);
  }
}

// Runs the example form with `values` set; returns the request the page
// sent (parsed), checked against the hook's copy, and the server's answer.
async function sentWith(page, values) {
  await setControls(page, values);
  const { status, body, sent } = await runAndWait(page, () => page.click('[data-testid="run"]'));
  const hook = await page.evaluate(() => window.attn.state.lastRequest.body);
  check(hook === sent, 'attn.state.lastRequest.body is not the body the page sent');
  return { req: JSON.parse(sent), status, body };
}

// The variant fields of a request, as a sorted JSON text.
const variantsOf = (req) => JSON.stringify(Object.fromEntries(VARIANT_KEYS.filter((k) => k in req).sort().map((k) => [k, req[k]])));

async function stepOpen(page, base) {
  await openPage(page, base, 'sentence');
  for (const [id, v] of Object.entries(DEFAULTS)) {
    const sel = `[data-testid="${id}"]`;
    const got = typeof v === 'boolean' ? await page.isChecked(sel) : await page.inputValue(sel);
    check(got === v, `control ${id} starts as ${JSON.stringify(got)}, expected ${JSON.stringify(v)}`);
  }
  // Every control has a label (its text inside the <label>).
  const unlabelled = await page.evaluate((ids) => ids.filter((id) => {
    const el = document.querySelector(`[data-testid="${id}"]`);
    return !el.labels || el.labels.length === 0 || !el.labels[0].textContent.trim();
  }), Object.keys(DEFAULTS));
  check(unlabelled.length === 0, `controls without a label: ${unlabelled.join(', ')}`);
  check(await page.isHidden('#rope-fields'), 'RoPE theta and rotary dims show while RoPE is off');
}

async function stepRequests(page) {
  const { req: plain } = await sentWith(page, {});
  const E = plain.query.shape[1], H = plain.num_heads, d = E / H;
  check(variantsOf(plain) === '{}', `with no variant set the page sent ${variantsOf(plain)}`);
  check(JSON.stringify(plain.weights.in_proj_weight.shape) === JSON.stringify([3 * E, E]),
        `in_proj_weight is (${plain.weights.in_proj_weight.shape}) without KV heads, expected (${3 * E}, ${E})`);
  const cases = [
    [{ 'kv-heads': '2' }, { num_kv_heads: 2 }],
    [{ 'kv-heads': '1' }, { num_kv_heads: 1 }],
    [{ rope: 'half' }, { rope: { style: 'half' } }],
    [{ rope: 'interleaved', 'rope-theta': '500' }, { rope: { style: 'interleaved', theta: 500 } }],
    [{ rope: 'half', 'rope-dim': '4' }, { rope: { style: 'half', rotary_dim: 4 } }],
    [{ rope: 'off', 'rope-theta': '500', 'rope-dim': '4' }, {}],
    [{ 'pos-offset': '3' }, { query_position_offset: 3 }],
    [{ alibi: true }, { alibi: true }],
    [{ 'window-left': '2' }, { window: [2, -1] }],
    [{ 'window-right': '0' }, { window: [-1, 0] }],
    [{ 'window-left': '2', 'window-right': '0' }, { window: [2, 0] }],
    [{ softcap: '5' }, { softcap: 5 }],
    [{ mask: 'causal' }, { attn_mask: 'causal' }],
    [{ mask: 'causal_lower_right' }, { attn_mask: 'causal_lower_right' }],
    [{ 'kv-heads': '2', rope: 'half', 'rope-theta': '10000', 'rope-dim': '6', 'pos-offset': '0', alibi: true,
       'window-left': '3', 'window-right': '1', softcap: '30', mask: 'causal_lower_right' },
     { num_kv_heads: 2, rope: { style: 'half', theta: 10000, rotary_dim: 6 }, query_position_offset: 0, alibi: true,
       window: [3, 1], softcap: 30, attn_mask: 'causal_lower_right' }],
  ];
  for (const [set, want] of cases) {
    const { req, status, body } = await sentWith(page, set);
    check(variantsOf(req) === variantsOf(want),
          `with ${JSON.stringify(set)} the page sent ${variantsOf(req)}, expected ${variantsOf(want)}`);
    const Hkv = want.num_kv_heads || H;
    const w = req.weights.in_proj_weight;
    check(JSON.stringify(w.shape) === JSON.stringify([E + 2 * Hkv * d, E]) && !req.weights.in_proj_bias,
          `with Hkv = ${Hkv}: in_proj_weight (${w.shape}), expected (${E + 2 * Hkv * d}, ${E}) and no in_proj_bias`);
    check(decodeTensor(w).data.length === (E + 2 * Hkv * d) * E, `with Hkv = ${Hkv}: in_proj_weight's data does not fit its shape`);
    log(`  ${JSON.stringify(set)} -> ${variantsOf(req)} (server: ${status}${status === 200 ? '' : ` ${body && body.error && body.error.code}`})`);
  }
}

// Correlation of two equal-length arrays.
function corr(a, b) {
  const n = a.length, ma = a.reduce((s, x) => s + x, 0) / n, mb = b.reduce((s, x) => s + x, 0) / n;
  let ab = 0, aa = 0, bb = 0;
  for (let k = 0; k < n; k++) { ab += (a[k] - ma) * (b[k] - mb); aa += (a[k] - ma) ** 2; bb += (b[k] - mb) ** 2; }
  return ab / Math.sqrt(aa * bb);
}

// Hkv follows H: its choices are H and H's smaller divisors, a choice that
// still divides the new H is kept; the k block of KV head 0 is mostly the
// q block of query head 0 (the page's seeded projections), as with Hkv = H.
async function stepKvHeads(page) {
  const options = () => page.$$eval('[data-testid="kv-heads"] option', (os) => os.map((o) => o.value));
  await setControls(page, { 'kv-heads': '2' });
  check(JSON.stringify(await options()) === JSON.stringify(['', '2', '1']), `H = 4 offers Hkv ${JSON.stringify(await options())}`);
  await page.selectOption('[data-testid="heads"]', '8');
  check(JSON.stringify(await options()) === JSON.stringify(['', '4', '2', '1']), `H = 8 offers Hkv ${JSON.stringify(await options())}`);
  check(await page.inputValue('[data-testid="kv-heads"]') === '2', 'Hkv = 2 was dropped when H went from 4 to 8');
  const placeholder = await page.getAttribute('[data-testid="rope-dim"]', 'placeholder');
  check(placeholder === 'd = 4', `rotary dims say "${placeholder}" for E = 32, H = 8`);
  const { req } = await sentWith(page, { 'kv-heads': '2' });
  const E = req.query.shape[1], d = E / 8;
  const w = decodeTensor(req.weights.in_proj_weight).data;
  const q0 = w.slice(0, d * E), k0 = w.slice(E * E, (E + d) * E);
  const c = corr(q0, k0);
  check(c > 0.9, `the k block of KV head 0 correlates ${c.toFixed(3)} with query head 0's, expected > 0.9`);
  await page.selectOption('[data-testid="heads"]', '1');
  check(JSON.stringify(await options()) === JSON.stringify(['']) && await page.inputValue('[data-testid="kv-heads"]') === '',
        'with H = 1 the only KV-head choice should be H');
  await page.selectOption('[data-testid="heads"]', '4');
  log(`  Hkv choices follow H; with H = 8, Hkv = 2: in_proj_weight (${req.weights.in_proj_weight.shape}), ` +
      `k block of KV head 0 ~ q block of head 0 (r = ${c.toFixed(3)})`);
}

// ---------------------------------------------------------------------------
// Heatmaps: what the server computes, drawn

// The weights of every head and the average have zeros exactly where
// `blocked(i, j)` says (and something elsewhere in each row), and the large
// heatmap draws every cell as the weight, the blocked ones as zero.
async function checkBlocked(page, json, blocked, what) {
  const w = weightsOf(json)[0];
  const H = json.num_heads, L = json.target_len, S = json.source_len;
  let zeros = 0;
  for (let h = 0; h <= H; h++) {
    for (let i = 0; i < L; i++) {
      for (let j = 0; j < S; j++) {
        if (blocked(i, j)) {
          check(w[h][i][j] === 0, `${what}: head ${h === H ? 'avg' : h} has weight ${w[h][i][j]} at blocked (${i},${j})`);
          zeros++;
        }
      }
      const seen = w[h][i].reduce((a, v) => a + v, 0);
      check(w[h][i].every((v, j) => blocked(i, j)) || Math.abs(seen - 1) < 1e-4,
            `${what}: head ${h === H ? 'avg' : h}, row ${i} sums to ${seen}`);
    }
  }
  const zero = await page.evaluate(() => window.attn.colorFor(0, 1));
  for (const h of [0, H - 1, 'avg']) {
    await selectHead(page, h);
    const m = w[h === 'avg' ? H : h];
    await checkHeatmapShows(page, m, `${what}, head ${h}`);
    const cells = [];
    for (let i = 0; i < L; i++) for (let j = 0; j < S; j++) if (blocked(i, j)) cells.push([i, j]);
    const got = await pixels(page, cells);
    got.forEach((c, k) => check(sameColor(c, zero),
                                `${what}, head ${h}: blocked (${cells[k]}) drawn ${rgb(c)}, not the zero colour ${rgb(zero)}`));
  }
  await selectHead(page, 0);
  return zeros;
}

async function stepLowerRight(page) {
  const { body: json, status } = await runAndWait(page, () => page.selectOption('[data-testid="example"]', 'cross'));
  check(status === 200, `the cross example got HTTP ${status}`);
  const { req, status: st2, body } = await sentWith(page, { mask: 'causal_lower_right' });
  check(st2 === 200, `causal lower-right cross-attention got HTTP ${st2}: ${JSON.stringify(body && body.error)}`);
  check(req.attn_mask === 'causal_lower_right', 'the request is not causal lower-right');
  const L = body.target_len, S = body.source_len;
  check(L === json.target_len && S > L, `the cross example should have S > L, has L = ${L}, S = ${S}`);
  // Bottom-right: key j is blocked for query i when j > i + S - L.
  const zeros = await checkBlocked(page, body, (i, j) => j > i + S - L, 'causal lower-right');
  // The cells that tell the alignments apart (j = i + 1 .. i + S - L) carry weight.
  const w = weightsOf(body)[0][0];
  check(w.some((row, i) => i + 1 < S && row[i + 1] > 0), 'causal lower-right: no weight right of the diagonal (looks upper-left)');
  const title = await page.evaluate(() => window.attn.state.title);
  check(title.includes('causal lower-right'), `the heads' title "${title}" does not name the alignment`);
  await shot(page, 'var-01-causal-lower-right.png');
  log(`  L = ${L}, S = ${S}: ${zeros} blocked weights are 0 and drawn as zero; title "${title}"`);
}

async function stepWindow(page) {
  await runAndWait(page, () => page.selectOption('[data-testid="example"]', 'sentence'));
  const set = { 'kv-heads': '2', rope: 'half', alibi: true, 'window-left': '2', 'window-right': '0', softcap: '5' };
  const { req, status, body } = await sentWith(page, set);
  check(status === 200, `the window request got HTTP ${status}: ${JSON.stringify(body && body.error)}`);
  check(JSON.stringify(req.window) === '[2,0]' && req.num_kv_heads === 2, 'the request lacks the window or Hkv');
  // Query i (position i) sees keys i - 2 .. i.
  const zeros = await checkBlocked(page, body, (i, j) => j < i - 2 || j > i, 'window [2, 0]');
  await shot(page, 'var-02-window.png');
  // With an offset of 3 on the cross example (L = 7, S = 8), query i sits at
  // 3 + i and a window of [1, 1] lets it see keys 2 + i .. 4 + i.
  await runAndWait(page, () => page.selectOption('[data-testid="example"]', 'cross'));
  const off = await sentWith(page, { 'pos-offset': '3', 'window-left': '1', 'window-right': '1' });
  check(off.status === 200, `the offset window request got HTTP ${off.status}: ${JSON.stringify(off.body && off.body.error)}`);
  const zeros2 = await checkBlocked(page, off.body, (i, j) => j < 2 + i || j > 4 + i, 'offset 3, window [1, 1]');
  await shot(page, 'var-03-window-offset.png');
  await setControls(page, {});
  log(`  window [2, 0] with Hkv = 2, RoPE, ALiBi, soft-cap: ${zeros} blocked weights 0 and drawn as zero; ` +
      `offset 3, window [1, 1]: ${zeros2}`);
}

// ---------------------------------------------------------------------------

const group = process.argv[2] || 'all';
check(['all', 'requests', 'heatmaps'].includes(group), `unknown group "${group}" (requests, heatmaps or all)`);
const steps = [['page opens; every variant control labelled and unset', stepOpen, { essential: true }]];
if (group !== 'heatmaps') {
  steps.push(['each control sends its field, only when set', stepRequests],
             ['KV heads follow H; packed k/v blocks of Hkv·d rows', stepKvHeads]);
}
if (group !== 'requests') {
  steps.push(['causal lower-right: blocked weights zero, drawn as zero', stepLowerRight],
             ['window (with Hkv, RoPE, ALiBi, soft-cap, offset): blocked weights zero, drawn as zero', stepWindow]);
}
runSuite(`variants.test (${group})`, steps, { prefix: 'var-', logName: 'server-variants.log' });
