#!/usr/bin/env node
// Browser tests of the served-model picker (docs/web.md),
// against a real build/attention-server started on a free port with
// --model-repository tests/models/repo (every layout and dtype of the
// fixtures). Run through scripts/browser-test.sh, or directly:
// node tests/browser/models.test.mjs
//
// What is checked: the picker lists every model of GET /v2/models but the
// built-in one; choosing each runs the current tokens through POST
// /v2/models/{m}/infer with binary tensors (the page's token embeddings
// at the model's widths: query E, key kdim and value vdim when they
// differ), shows the model's metadata, and draws weights that equal the
// same request made here in v2's JSON form, every head, and every cell of
// the large heatmap has the colour of its weight; the metadata panel has no
// raw JSON and nothing wider than the panel. Export JSON of a v2
// exchange holds the inputs and outputs with their data. Pooled (p = 2)
// and top-k (k = 2) weights of a model through v2 (weights_pool /
// weights_top_k, binary FP32 and INT32 outputs) equal the tile means and
// the rows' largest of the full weights the page drew for the same input.
// Screenshots: build/browser/models-*.png. Plumbing: tests/browser/harness.mjs.

import { check, checkHeatmapShows, log, openPage, parseV2Body, runAndWait, runSuite, shot } from './harness.mjs';

const ctx = { names: [] };

async function stepOpen(page, base) {
  const first = await openPage(page, base, 'sentence');
  check(first.status === 200, `the sentence example got HTTP ${first.status}`);
  const listed = (await (await fetch(new URL('v2/models', base))).json()).models.filter((m) => m !== 'attention');
  const options = await page.$$eval('[data-testid="model"] option', (os) => os.map((o) => o.value).filter(Boolean));
  check(JSON.stringify(options) === JSON.stringify(listed), `the picker lists ${JSON.stringify(options)}, the server ${JSON.stringify(listed)}`);
  check(listed.length >= 10, `only ${listed.length} models served from tests/models/repo`);
  ctx.names = listed;
}

// The page's binary v2 request in v2's JSON form (data arrays), without binary_data_output.
function asJsonRequest(buf, headerLen) {
  const { header, inputs } = parseV2Body(buf, headerLen);
  const { binary_data_output: bin, ...parameters } = header.parameters;
  check(bin === true, 'the page did not ask for binary outputs');
  return { json: { parameters, inputs: inputs.map((t) => ({ ...t, data: Array.from(t.data) })) } };
}

async function stepEachModel(page, base) {
  const tokens = (await page.inputValue('[data-testid="tokens"]')).trim().split(/\s+/);
  const lines = [];
  for (const name of ctx.names) {
    const meta = await (await fetch(new URL(`v2/models/${name}`, base))).json();
    const { status, resp } = await runAndWait(page, () => page.selectOption('[data-testid="model"]', name), 60000, { v2: true });
    check(status === 200, `${name}: the page's infer got HTTP ${status}`);
    check(new URL(resp.url()).pathname === `/v2/models/${name}/infer`, `${name}: the page called ${resp.url()}`);
    const err = await page.evaluate(() => window.attn.state.lastError);
    check(!err, `${name}: the page shows ${JSON.stringify(err)}`);
    const req = resp.request();
    const { json } = asJsonRequest(req.postDataBuffer(), Number((await req.allHeaders())['inference-header-content-length']));
    const width = (n) => { const t = meta.inputs.find((x) => x.name === n); return t.shape[t.shape.length - 1]; };
    const q = json.inputs.find((x) => x.name === 'query');
    check(JSON.stringify(q.shape) === JSON.stringify([tokens.length, width('query')]),
          `${name}: query shape ${JSON.stringify(q.shape)}, expected [${tokens.length}, ${width('query')}]`);
    for (const n of ['key', 'value']) {
      const t = json.inputs.find((x) => x.name === n);
      if (width(n) !== width('query')) check(t && t.shape[1] === width(n), `${name}: ${n} should be sent with width ${width(n)}`);
    }
    // The same request in v2's JSON form, from here.
    const direct = await (await fetch(new URL(`v2/models/${name}/infer`, base), { method: 'POST', body: JSON.stringify(json) })).json();
    const w = direct.outputs.find((o) => o.name === 'attention_weights');
    check(w, `${name}: the direct request got ${JSON.stringify(direct).slice(0, 200)}`);
    const [H, L, S] = w.shape;
    let worst = 0;
    for (let h = 0; h < H; h++) {
      const pm = await page.evaluate((h) => window.attn.matrix(0, h), h);
      check(pm.length === L && pm[0].length === S, `${name}: the page's head ${h} is ${pm.length} x ${pm[0].length}, expected ${L} x ${S}`);
      pm.forEach((row, i) => row.forEach((v, j) => { worst = Math.max(worst, Math.abs(v - w.data[(h * L + i) * S + j])); }));
    }
    check(worst <= 1e-6, `${name}: the page's weights differ from the direct request's by up to ${worst}`);
    const m0 = Array.from({ length: L }, (_, i) => w.data.slice(i * S, (i + 1) * S));
    await checkHeatmapShows(page, m0, `${name} head 0`);
    const metaText = await page.textContent('[data-testid="model-meta"]');
    check(metaText.includes(meta.parameters.format) && metaText.includes(`H = ${meta.parameters.num_heads}`),
          `${name}: the metadata shown ("${metaText.slice(0, 120)}…") does not name its format and heads`);
    // Readable in the sidebar: no raw JSON, nothing sticking out of the panel.
    const panel = await page.evaluate(() => {
      const box = document.querySelector('[data-testid="model-meta"]');
      return { wide: [...box.querySelectorAll('dd, dd div')].filter((d) => d.scrollWidth > d.clientWidth + 1).map((d) => d.textContent),
               over: box.scrollWidth > box.clientWidth + 1 };
    });
    check(!/[{}]/.test(metaText) && !panel.over && panel.wide.length === 0,
          `${name}: the panel shows raw JSON or sticks out: ${panel.wide.join(' | ') || metaText.slice(0, 200)}`);
    // the fields the model disables show its own E and H
    const form = await page.evaluate(() => ({ E: document.querySelector('[data-testid="embed-dim"]').value,
                                              H: document.querySelector('[data-testid="heads"]').value }));
    check(form.E === String(width('query')) && form.H === String(meta.parameters.num_heads),
          `${name}: the form shows E ${form.E}, H ${form.H}; the model has E ${width('query')}, H ${meta.parameters.num_heads}`);
    lines.push(`${name} (${meta.parameters.format}, H ${H}, E ${width('query')})`);
    if (name === ctx.names[0]) await shot(page, 'models-first.png');
  }
  log(`  ${lines.length} models drawn with the direct request's weights: ${lines.join(', ')}`);
}

async function stepExportJson(page) {
  const text = await page.evaluate(() => window.attn.exchangeJson());
  const x = JSON.parse(text);
  const name = ctx.names[ctx.names.length - 1];
  check(x.endpoint === `POST /v2/models/${name}/infer`, `Export JSON names ${x.endpoint}`);
  const q = x.request.inputs.find((t) => t.name === 'query');
  check(q && q.data.length === q.shape[0] * q.shape[1], 'Export JSON: the query has no data');
  const w = x.response.outputs.find((t) => t.name === 'attention_weights');
  const [H, L, S] = w.shape;
  check(w.data.length === H * L * S, 'Export JSON: the weights have no data');
  const pm = await page.evaluate(() => window.attn.matrix(0, 0));
  check(pm.every((row, i) => row.every((v, j) => v === w.data[i * S + j])), 'Export JSON: the weights differ from the drawn ones');
  log(`  Export JSON of a v2 exchange: the query (${q.shape}) and the weights (${w.shape}) with their data`);
}

// Pooled and top-k weights of a served model through v2 (binary INT32
// indices too), against the full weights the page drew for the same input.
async function stepReduced(page) {
  const name = ctx.names.find((n) => n === 'mha_f32') || ctx.names[0];
  await page.selectOption('[data-testid="weights-mode"]', 'full');
  const full = await runAndWait(page, () => page.selectOption('[data-testid="model"]', name), 60000, { v2: true });
  check(full.status === 200, `${name}: HTTP ${full.status}`);
  const H = await page.evaluate(() => window.attn.state.response.H);
  const fm = [];
  for (let h = 0; h < H; h++) fm.push(await page.evaluate((h) => window.attn.matrix(0, h), h));
  const L = fm[0].length, S = fm[0][0].length;
  const runAs = async (mode, n) => {
    await page.selectOption('[data-testid="weights-mode"]', mode);
    await page.fill('[data-testid="weights-param"]', String(n));
    const r = await runAndWait(page, () => page.click('[data-testid="run"]'), 60000, { v2: true });
    check(r.status === 200, `${name} ${mode} ${n}: HTTP ${r.status}`);
    const req = r.resp.request();
    return parseV2Body(req.postDataBuffer(), Number((await req.allHeaders())['inference-header-content-length'])).header;
  };
  const p = 2;
  const hp = await runAs('pool', p);
  check(hp.parameters.weights_pool === p && hp.outputs.some((o) => o.name === 'attention_weights_pooled'),
        `${name}: the pooled request is ${JSON.stringify(hp)}`);
  let worst = 0;
  for (let h = 0; h < H; h++) {
    const got = await page.evaluate((h) => window.attn.matrix(0, h), h);
    check(got.length === Math.ceil(L / p) && got[0].length === Math.ceil(S / p), `${name}: pooled head ${h} is ${got.length} x ${got[0].length}`);
    got.forEach((row, a) => row.forEach((v, b) => {
      let sum = 0, n = 0;
      for (let i = a * p; i < Math.min(L, (a + 1) * p); i++) for (let j = b * p; j < Math.min(S, (b + 1) * p); j++) { sum += fm[h][i][j]; n++; }
      worst = Math.max(worst, Math.abs(v - sum / n));
    }));
  }
  check(worst <= 1e-6, `${name}: pooled tiles differ from the full weights' means by up to ${worst}`);
  await checkHeatmapShows(page, await page.evaluate(() => window.attn.matrix(0, window.attn.state.view.head === 'avg' ? 0 : window.attn.state.view.head)), `${name} pooled`);
  const k = 2;
  const hk = await runAs('topk', k);
  check(hk.parameters.weights_top_k === k, `${name}: the top-k request is ${JSON.stringify(hk.parameters)}`);
  for (let h = 0; h < H; h++) {
    const got = await page.evaluate((h) => window.attn.matrix(0, h), h);
    fm[h].forEach((row, i) => {
      const top = row.map((v, j) => [v, j]).sort((x, y) => y[0] - x[0] || x[1] - y[1]).slice(0, k).map(([, j]) => j);
      got[i].forEach((v, j) => check(v === (top.includes(j) ? row[j] : 0), `${name} top-${k} head ${h} (${i},${j}): ${v}`));
    });
  }
  log(`  ${name} through v2: pooled p = ${p} = the full weights' tile means (max |Δ| ${worst.toExponential(1)}), top-${k} = each row's largest`);
  await page.selectOption('[data-testid="weights-mode"]', 'auto');
}

runSuite('models.test', [
  ['the picker lists the served models', stepOpen, { essential: true }],
  ['each served model: v2 binary infer, drawn weights = the direct request\'s', stepEachModel],
  ['Export JSON of a v2 exchange', stepExportJson],
  ['pooled and top-k weights of a served model through v2', stepReduced],
], { prefix: 'models-', logName: 'server-models.log', serverArgs: ['--model-repository', 'tests/models/repo'] });
