#!/usr/bin/env node
// Browser tests of the induction stack in the page (docs/web.md, "The
// induction example, step mode and the overview"), against a real
// build/attention-server started on a free port serving models/ (which
// holds induction-l0 and induction-l1). Run through
// scripts/browser-test.sh, or directly: node tests/browser/induction.test.mjs
//
// Nothing here depends on how well the model is trained: every check is
// of structure, or of equality with the stateless answers computed here.
//
//   example: the Example list's induction entry runs the config's example
//       part-way (the first copy and three tokens of the repeat), Run the
//       whole of it, through both layers, one v2 infer call each (a prompt
//       chunk that starts a sequence); every head of both layers equals the stateless
//       answer of the same stack computed here (x0 = embedding + positions,
//       the residual added in float32), the large heatmap draws the
//       induction head, every head of both layers is labelled with what it
//       does (the circuit's two by name, others by the config's training
//       figures per head, else "mostly X", X the largest of the mean
//       weights measured here on the drawn map; the figure in the
//       thumbnail's tooltip), and the
//       predictions line shows the tokens and marks the correct guesses;
//   ideal: the "ideal induction" toggle outlines query i of the second copy
//       at key i − m + 1 (the repeat found here) and nothing else;
//   step: Reset sends sequence_end for both old sequences and starts new
//       ones at one token; each Step sends one infer per layer carrying the
//       layer's sequence_id, one query row and a body of the same size at
//       every position; the rows drawn equal the stateless answers of the
//       prefix; Next token appends the model's prediction; at P positions
//       Step and Next token are disabled and the page says so;
//   lost: a sequence ended behind the page's back (as a restart would) is
//       said and started again from the tokens the page kept;
//   typed: a typed sequence is one prompt chunk (L = S = its length) on
//       both layers, then steps continue from it;
//   overview: layers × heads thumbnails, captioned with the labels (also
//       after 5 steps); a click opens that layer and head, its label over the map;
//       a single-layer model (digits-reverse) has one row;
//   leaving: another example hides step mode and ends both sequences, and
//       so does leaving the page (a reload).
// Screenshots: build/browser/induction-*.png. Plumbing: tests/browser/harness.mjs.

import { check, checkHeatmapShows, log, openPage, parseV2Body, runSuite, shot } from './harness.mjs';

const TOL = 1e-4;
const ctx = { base: '', cfg: null, H: [], E: 0, P: 0, requests: [], example: '' };

// Every infer request the page sends, decoded: {model, header (JSON), query rows, bytes, seqHeader}.
function capture(page) {
  page.on('request', (r) => {
    if (r.method() !== 'POST' || !/^\/v2\/models\/[^/]+\/infer$/.test(new URL(r.url()).pathname)) return;
    const buf = r.postDataBuffer() || Buffer.alloc(0);
    const hlen = Number(r.headers()['inference-header-content-length'] || 0);
    const model = decodeURIComponent(new URL(r.url()).pathname.split('/')[3]);
    let header, rows = 0;
    if (hlen) {
      const v = parseV2Body(buf, hlen);
      header = v.header;
      const q = v.inputs.find((t) => t.name === 'query');
      rows = q ? q.shape[0] : 0;
    } else {
      header = JSON.parse(buf.toString('utf8'));
    }
    ctx.requests.push({ model, header, params: header.parameters || {}, rows, bytes: buf.length,
                        seqHeader: r.headers()['x-sequence-id'] || '' });
  });
}

// Performs `action` (a page action that starts one run) and returns the infer
// requests it sent, after the run has finished.
async function act(page, action) {
  const before = await page.evaluate(() => window.attn.state.runCount);
  const from = ctx.requests.length;
  await action();
  await page.waitForFunction((n) => window.attn.state.runCount > n && !window.attn.state.busy, before, { timeout: 30000 });
  const err = await page.evaluate(() => window.attn.state.lastError);
  check(!err, `the page shows an error: ${JSON.stringify(err)}`);
  return ctx.requests.slice(from);
}

const stackOf = (page) => page.evaluate(() => window.attn.stack());

async function v2(name, body) {
  const res = await fetch(new URL(`v2/models/${name}/infer`, ctx.base), { method: 'POST', body: JSON.stringify(body) });
  const json = await res.json();
  check(res.status === 200, `${name}: HTTP ${res.status} ${JSON.stringify(json).slice(0, 200)}`);
  return json;
}

// The stateless answer of the stack for `tokens`, computed here: per layer
// the weights [h][i][j], and the predictions.
async function stateless(tokens) {
  const c = ctx.cfg, E = ctx.E, n = tokens.length;
  let x = new Float32Array(n * E);
  tokens.forEach((t, i) => {
    const e = c.embedding[c.vocab.indexOf(t)], p = c.positions[i];
    for (let d = 0; d < E; d++) x[i * E + d] = e[d] + p[d];
  });
  const maps = [];
  for (let l = 0; l < ctx.names.length; l++) {
    const a = await v2(ctx.names[l], { inputs: [{ name: 'query', datatype: 'FP32', shape: [n, E], data: Array.from(x) }] });
    const o = a.outputs.find((t) => t.name === 'output'), w = a.outputs.find((t) => t.name === 'attention_weights');
    const H = w.shape[0];
    check(w.shape.join() === [H, n, n].join(), `${ctx.names[l]}: stateless weights of shape ${w.shape}`);
    maps.push(Array.from({ length: H }, (_, h) => Array.from({ length: n }, (_, i) => w.data.slice((h * n + i) * n, (h * n + i + 1) * n))));
    const next = new Float32Array(n * E);
    for (let k = 0; k < n * E; k++) next[k] = x[k] + o.data[k];
    x = next;
  }
  // Predictions, with each position's margin between the best two logits.
  const preds = [];
  for (let i = 0; i < n; i++) {
    const logits = c.unembedding.map((u, t) => u.reduce((s, v, d) => s + v * x[i * E + d], c.unembedding_bias ? c.unembedding_bias[t] : 0));
    const order = logits.map((v, k) => [v, k]).sort((a, b) => b[0] - a[0]);
    preds.push({ token: c.vocab[order[0][1]], margin: order[0][0] - order[1][0] });
  }
  return { maps, preds };
}

// The page's maps (attn.stack()) against the stateless answer for its tokens.
async function checkAgainstStateless(page, what) {
  const s = await stackOf(page);
  const want = await stateless(s.tokens);
  let worst = 0, where = '';
  want.maps.forEach((layer, l) => layer.forEach((m, h) => {
    check(s.maps[l][h].length === s.n, `${what}: layer ${l} head ${h} has ${s.maps[l][h].length} rows, the page holds ${s.n} tokens`);
    m.forEach((row, i) => row.forEach((v, j) => {
      const d = Math.abs(v - s.maps[l][h][i][j]);
      if (d > worst) { worst = d; where = `layer ${l} head ${h} (${i}, ${j}): page ${s.maps[l][h][i][j]}, stateless ${v}`; }
    }));
  }));
  check(worst <= TOL, `${what}: the drawn weights differ from the stateless answer by ${worst} at ${where}`);
  want.preds.forEach((p, i) => {
    if (p.margin > 1e-3) check(s.predictions[i] === p.token, `${what}: prediction at ${i} is ${s.predictions[i]}, the stateless logits say ${p.token}`);
  });
  return { s, want };
}

// The longest segment repeated right after itself: {start, m}.
function repeatOf(tokens) {
  for (let m = Math.floor(tokens.length / 2); m >= 2; m--) {
    for (let s = 0; s + 2 * m <= tokens.length; s++) {
      if (tokens.slice(s, s + m).join('\u0000') === tokens.slice(s + m, s + 2 * m).join('\u0000')) return { start: s, m };
    }
  }
  return null;
}

// A head's mean weights on its map m (n × n) of the tokens, as the labels
// measure them: queries 1 … n − 1 on the previous token, on themselves, on
// the first token; the queries whose token occurred before on those
// occurrences; and the ideal induction cells of the example's repeat
// (query i in the second copy, key i − m + 1, i < n).
function measured(m, tokens) {
  const n = tokens.length, mean = (xs) => (xs.length ? xs.reduce((t, v) => t + v, 0) / xs.length : null);
  const rep = repeatOf([...ctx.example]), cells = [], qs = [];
  for (let i = rep.start + rep.m; i < Math.min(n, rep.start + 2 * rep.m); i++) cells.push(m[i][i - rep.m + 1]);
  for (let i = 1; i < n; i++) qs.push(i);
  const dup = qs.filter((i) => tokens.slice(0, i).includes(tokens[i]))
    .map((i) => tokens.slice(0, i).reduce((t, tok, j) => t + (tok === tokens[i] ? m[i][j] : 0), 0));
  return { 'the previous token': mean(qs.map((i) => m[i][i - 1])), itself: mean(qs.map((i) => m[i][i])),
           'the first token': mean(qs.map((i) => m[i][0])), 'the same token earlier': mean(dup), 'key i − m + 1': mean(cells) };
}

// Every head of every layer says what it does: the circuit's two by name;
// another whose training figure per head (config.training) reaches the
// circuit's bar as that role; else "mostly X" with X the largest of the
// weights measured here on the drawn map. No label carries a figure: the
// thumbnail's tooltip does (the training figure, or f, X's measure). The
// overview's captions are "head h: label".
async function checkLabels(page, s, what) {
  const c = ctx.cfg, t = c.training;
  const trained = { 'previous-token head': [c.circuit.previous_token.layer, t.previous_token_weight_per_head],
                    'induction head': [c.circuit.induction.layer, t.induction_weight_per_head] };
  const seen = [];
  const titles = await page.$$eval('[data-testid="overview"] .thumb', (xs) => xs.map((x) => x.title));
  const H = s.labels[0].length;
  s.labels.forEach((heads, l) => heads.forEach((label, h) => {
    const fig = /mean weight (\d\.\d\d) (in training|on the tokens shown)/.exec(titles[l * H + h]);
    const where = `${what}: layer ${l} head ${h} is labelled "${label}"`;
    const role = Object.entries(c.circuit).find(([, v]) => v && v.layer === l && v.head === h);
    if (role) {
      check(label === (role[0] === 'induction' ? 'induction head' : 'previous-token head'), `${where}, the circuit names it ${role[0]}`);
      seen.push(`${l}.${h} ${label}`);
      return;
    }
    const byConfig = /^(previous-token head|induction head)$/.exec(label);
    const byMap = /^mostly (.+)$/.exec(label);
    check(byConfig || byMap, `${where}: not what it does`);
    check(fig, `${where}: its thumbnail's tooltip "${titles[l * H + h]}" gives no figure`);
    if (byConfig) {
      const [layer, figs] = trained[byConfig[1]];
      check(layer === l && figs[h].toFixed(2) === fig[1] && fig[2] === 'in training', `${where} (${fig[0]}), the config's training figure for layer ${layer} is ${figs[h]}`);
    } else {
      const m = measured(s.maps[l][h], s.tokens), best = Math.max(...Object.values(m).filter((v) => v !== null));
      check(m[byMap[1]] !== undefined && m[byMap[1]] !== null, `${where}: no such measure (${Object.keys(m).join(', ')})`);
      check(Math.abs(m[byMap[1]] - Number(fig[1])) <= 0.005 + 1e-9 && fig[2] === 'on the tokens shown',
            `${where} (${fig[0]}), measured here on the drawn map: ${m[byMap[1]]}`);
      check(m[byMap[1]] >= best - 1e-6, `${where}, but the largest measure here is ${best}: ${JSON.stringify(m)}`);
    }
    seen.push(`${l}.${h} ${label}`);
  }));
  const caps = await page.$$eval('[data-testid="overview"] .thumb span', (xs) => xs.map((x) => x.textContent));
  const want = s.labels.flatMap((heads) => heads.map((label, h) => `head ${h}: ${label}`));
  check(JSON.stringify(caps) === JSON.stringify(want), `${what}: the overview's captions ${JSON.stringify(caps)}, the labels ${JSON.stringify(want)}`);
  return seen;
}

// ---------------------------------------------------------------------------

async function stepExample(page, base) {
  ctx.base = base;
  capture(page);
  await openPage(page, base);
  const cfg = await (await fetch(new URL('v2/models/induction-l0/config.json', base))).json();
  check(cfg.next_layer, `models/induction-l0 is not served with a next_layer: ${JSON.stringify(cfg).slice(0, 200)}`);
  ctx.cfg = cfg;
  ctx.names = ['induction-l0', cfg.next_layer];
  ctx.E = cfg.embedding[0].length;
  ctx.P = cfg.positions.length;
  ctx.example = cfg.input.example;
  const opt = await page.$$eval('[data-testid="example"] option', (os) => os.map((o) => ({ v: o.value, t: o.textContent })));
  const ind = opt.find((o) => /induction/i.test(o.t));
  check(ind, `no entry of the Example list mentions induction: ${opt.map((o) => o.t).join(' | ')}`);
  // It opens part-way: the first copy and three tokens of the repeat.
  const opened = await act(page, () => page.selectOption('[data-testid="example"]', ind.v));
  const rep = repeatOf([...ctx.example]), n0 = rep.start + rep.m + 3;
  check(opened.length === 2 && opened.every((r, l) => r.model === ctx.names[l] && r.rows === n0 && r.params.sequence_start === true),
        `the example sent ${JSON.stringify(opened.map((r) => [r.model, r.rows, r.params]))}, expected one ${n0}-row prompt chunk per layer`);
  // Run: the whole example, one prompt chunk per layer.
  const sent = (await act(page, () => page.click('[data-testid="run"]'))).filter((r) => !r.params.sequence_end);
  check(sent.length === 2 && sent[0].model === ctx.names[0] && sent[1].model === ctx.names[1],
        `Run sent ${sent.map((r) => r.model).join(', ')}, expected one infer per layer: ${ctx.names.join(', ')}`);
  const n = [...ctx.example].length;
  for (const r of sent) {
    check(r.rows === n && r.params.sequence_start === true && typeof r.params.sequence_id === 'string' && r.params.sequence_id.length >= 32,
          `${r.model}: the example's request has ${r.rows} rows and parameters ${JSON.stringify(r.params)}; expected ${n} rows starting an unguessable sequence`);
    check(r.seqHeader === r.params.sequence_id, `${r.model}: X-Sequence-Id "${r.seqHeader}" is not the sequence_id`);
  }
  const { s, want } = await checkAgainstStateless(page, 'the example');
  check(s.tokens.join('') === ctx.example, `the page holds "${s.tokens.join('')}", the example is "${ctx.example}"`);
  // The labels: what each head learned.
  const circ = cfg.circuit;
  check(s.labels[circ.previous_token.layer][circ.previous_token.head] === 'previous-token head' &&
        s.labels[circ.induction.layer][circ.induction.head] === 'induction head',
        `the heads' labels ${JSON.stringify(s.labels)} do not name the circuit ${JSON.stringify(circ)}`);
  // The large heatmap opens on the induction head and draws it.
  check(s.layer === circ.induction.layer, `the page shows layer ${s.layer}, the induction head is in layer ${circ.induction.layer}`);
  const title = await page.textContent('#view-title');
  check(title.includes('induction head'), `the view's title "${title}" does not say "induction head"`);
  await checkHeatmapShows(page, want.maps[circ.induction.layer][circ.induction.head], 'the induction head');
  // The predictions line: each token, the guess for it under it, correct ones marked.
  const cols = await page.$$eval('[data-testid="predictions"] .pcol:not(.plabel)', (cs) => cs.map((c) => ({
    tok: c.querySelector('.ptok').textContent, pred: c.querySelector('.ppred').textContent, ok: c.classList.contains('ok') })));
  check(cols.length === n + 1, `the predictions line has ${cols.length} columns, expected ${n} tokens and the next`);
  s.tokens.forEach((t, i) => {
    check(cols[i].tok === t, `column ${i} shows token "${cols[i].tok}", expected "${t}"`);
    if (i === 0) return;
    check(cols[i].pred === s.predictions[i - 1], `column ${i} shows the guess "${cols[i].pred}", the model's is "${s.predictions[i - 1]}"`);
    check(cols[i].ok === (s.predictions[i - 1] === t), `column ${i} is ${cols[i].ok ? '' : 'not '}marked correct (guess ${s.predictions[i - 1]}, token ${t})`);
  });
  check(cols[n].pred === s.predictions[n - 1] && cfg.vocab.includes(cols[n].pred), `the last column's guess "${cols[n].pred}" is not the model's next token`);
  await shot(page, 'induction-example.png');
  log(`  ${n} tokens, ${cols.filter((c) => c.ok).length} of ${n - 1} next tokens right; circuit ${JSON.stringify(circ.induction)}`);
  log(`  labels: ${(await checkLabels(page, s, 'the example')).join('; ')}`);
}

async function stepIdeal(page) {
  const rep = repeatOf([...ctx.example]);
  check(rep, `the example "${ctx.example}" has no repeated segment`);
  await page.check('[data-testid="ideal-induction"]');
  const s = await stackOf(page);
  const want = [];
  for (let i = rep.start + rep.m; i < rep.start + 2 * rep.m; i++) want.push([i, i - rep.m + 1]);
  check(JSON.stringify(s.ideal) === JSON.stringify(want), `ideal cells ${JSON.stringify(s.ideal)}, expected ${JSON.stringify(want)}`);
  // Drawn: an outline at each ideal cell's edge, nothing at a cell off the stripe.
  const px = await page.evaluate(({ cells, off }) => {
    const c = document.getElementById('heatmap-ideal'), g = c.getContext('2d');
    const dpr = c.width / parseFloat(c.style.width);
    const at = (i, j) => {
      const p = window.attn.cellPixel(i, j), r = window.attn.cellRect(i, j);
      return Array.from(g.getImageData(Math.floor(p.x - (r.w / 2 - 1) * dpr), p.y, 1, 1).data);
    };
    return { on: cells.map(([i, j]) => at(i, j)), off: at(off[0], off[1]) };
  }, { cells: want, off: [want[0][0], 0] });
  check(px.on.every((p) => p[3] > 0), `an ideal cell has no outline drawn: ${JSON.stringify(px.on)}`);
  check(px.off[3] === 0, `a cell off the stripe is outlined: ${px.off}`);
  await shot(page, 'induction-ideal.png');
  await page.uncheck('[data-testid="ideal-induction"]');
}

async function stepStep(page) {
  const old = (await stackOf(page)).sequenceIds;
  const sent = await act(page, () => page.click('[data-testid="reset"]'));
  const ends = sent.filter((r) => r.params.sequence_end === true);
  check(ends.length === 2 && old.every((id) => ends.some((r) => r.params.sequence_id === id && !r.header.inputs)),
        `Reset sent ${JSON.stringify(ends.map((r) => r.params))}: expected sequence_end without inputs for ${old.join(', ')}`);
  const starts = sent.filter((r) => r.params.sequence_start === true);
  check(starts.length === 2 && starts.every((r) => r.rows === 1 && !old.includes(r.params.sequence_id)),
        `Reset started ${JSON.stringify(starts.map((r) => [r.model, r.rows, r.params]))}: expected two new sequences at one token`);
  let s = await stackOf(page);
  check(s.n === 1, `after Reset the page holds ${s.n} tokens`);
  const ids = s.sequenceIds;
  const sizes = {};
  const steps = Math.min(20, ctx.P - 2, [...ctx.example].length - 1);
  for (let k = 0; k < steps; k++) {
    const got = await act(page, () => page.click('[data-testid="step"]'));
    check(got.length === 2, `step ${k + 1} sent ${got.length} requests, expected one per layer`);
    got.forEach((r, l) => {
      check(r.model === ctx.names[l] && r.params.sequence_id === ids[l] && r.seqHeader === ids[l] && !r.params.sequence_start,
            `step ${k + 1}: ${r.model} parameters ${JSON.stringify(r.params)}, expected the layer's sequence ${ids[l]}`);
      check(r.rows === 1, `step ${k + 1}: ${r.model} sent ${r.rows} query rows, expected 1 (the new token's)`);
      sizes[r.model] = sizes[r.model] || r.bytes;
      check(r.bytes === sizes[r.model], `step ${k + 1}: ${r.model}'s body is ${r.bytes} bytes, the first step's ${sizes[r.model]}: the request grows`);
    });
    const L = await page.evaluate(() => window.attn.state.response.L);
    check(L === k + 2, `after step ${k + 1} the map has ${L} rows, expected ${k + 2}`);
    if (k === 4 || k === steps - 1) {
      const { s: now } = await checkAgainstStateless(page, `after step ${k + 1}`);
      await checkLabels(page, now, `after step ${k + 1}`);
    }
  }
  s = await stackOf(page);
  check(s.tokens.join('') === [...ctx.example].slice(0, steps + 1).join(''), `stepping gave "${s.tokens.join('')}"`);
  await shot(page, 'induction-steps.png');
  // Next token: the model's own prediction, one row.
  const guess = s.predictions[s.n - 1];
  const got = await act(page, () => page.click('[data-testid="next-token"]'));
  check(got.length === 2 && got.every((r) => r.rows === 1 && r.bytes === sizes[r.model]), `Next token sent ${JSON.stringify(got.map((r) => [r.rows, r.bytes]))}`);
  s = await stackOf(page);
  check(s.tokens[s.n - 1] === guess, `Next token appended "${s.tokens[s.n - 1]}", the model predicted "${guess}"`);
  await checkAgainstStateless(page, 'after Next token');
  // At P positions Step and Next token are disabled, and the page says so.
  while (s.n < ctx.P) { await act(page, () => page.click('[data-testid="next-token"]')); s = await stackOf(page); }
  const off = await page.$$eval('[data-testid="step"], [data-testid="next-token"]', (bs) => bs.map((b) => b.disabled));
  check(off.every(Boolean), `at ${ctx.P} positions Step, Next token disabled: ${off}`);
  const status = await page.textContent('[data-testid="step-status"]');
  check(status.includes(`reached the model's ${ctx.P} positions: Reset starts again`), `the status line says "${status}"`);
}

async function stepLost(page) {
  await act(page, () => page.click('[data-testid="reset"]'));
  for (let k = 0; k < 3; k++) await act(page, () => page.click('[data-testid="step"]'));
  const s0 = await stackOf(page);
  // End layer 1's sequence behind the page's back (a restart loses both).
  const end = await fetch(new URL(`v2/models/${ctx.names[1]}/infer`, ctx.base), { method: 'POST',
    body: JSON.stringify({ parameters: { sequence_id: s0.sequenceIds[1], sequence_end: true } }) });
  check(end.status === 200, `ending the page's sequence from here: HTTP ${end.status}`);
  const sent = await act(page, () => page.click('[data-testid="step"]'));
  const s = await stackOf(page);
  check(s.n === s0.n + 1 && /lost/.test(s.note), `after a lost sequence: ${s.n} tokens, note "${s.note}"`);
  const restart = sent.filter((r) => r.params.sequence_start);
  check(restart.length === 2 && restart.every((r) => r.rows === s.n), `the restart sent ${JSON.stringify(restart.map((r) => [r.model, r.rows]))}: expected ${s.n} rows per layer`);
  await checkAgainstStateless(page, 'after the restart');
  const status = await page.textContent('[data-testid="step-status"]');
  check(/lost/.test(status), `the page does not say the sequence was lost: "${status}"`);
}

async function stepTyped(page) {
  const typed = [...ctx.example].slice(0, 12).join('');
  await page.fill('[data-testid="tokens"]', typed);
  const sent = await act(page, () => page.click('[data-testid="run"]'));
  const chunks = sent.filter((r) => !r.params.sequence_end);
  check(chunks.length === 2 && chunks.every((r) => r.rows === 12 && r.params.sequence_start), `Run sent ${JSON.stringify(chunks.map((r) => [r.model, r.rows, r.params]))}: expected one 12-row prompt chunk per layer`);
  const got = await act(page, () => page.click('[data-testid="next-token"]'));
  check(got.length === 2 && got.every((r) => r.rows === 1 && !r.params.sequence_start), `the step after the prompt sent ${JSON.stringify(got.map((r) => [r.rows, r.params]))}`);
  await checkAgainstStateless(page, 'a typed prompt and one step');
  // A token outside the vocabulary is refused in words.
  await page.fill('[data-testid="tokens"]', `${typed}\u00e9`);
  await page.click('[data-testid="run"]');
  await page.waitForFunction(() => window.attn.state.lastError && !window.attn.state.busy);
  const msg = await page.textContent('#error');
  check(/knows only the tokens/.test(msg), `a bad token shows "${msg}"`);
  await page.fill('[data-testid="tokens"]', ctx.example);
}

async function stepOverview(page) {
  await act(page, () => page.click('[data-testid="run"]'));
  const s = await stackOf(page);
  const thumbs = await page.$$eval('[data-testid="overview"] .thumb', (ts) => ts.map((t) => t.dataset.testid));
  const want = s.maps.flatMap((heads, l) => heads.map((_, h) => `overview-thumb-${l}-${h}`));
  check(JSON.stringify(thumbs) === JSON.stringify(want), `the overview has ${JSON.stringify(thumbs)}, expected ${JSON.stringify(want)}`);
  const pt = ctx.cfg.circuit.previous_token;
  await page.click(`[data-testid="overview-thumb-${pt.layer}-${pt.head}"]`);
  await page.waitForFunction(({ l, h }) => window.attn.stack().layer === l && window.attn.state.view.head === h, { l: pt.layer, h: pt.head });
  const title = await page.textContent('#view-title');
  check(title.includes('previous-token head'), `the view's title "${title}" does not name the previous-token head`);
  await checkHeatmapShows(page, s.maps[pt.layer][pt.head], 'the previous-token head opened from the overview');
  const pressed = await page.$$eval('[data-testid="overview"] .thumb[aria-pressed="true"]', (ts) => ts.map((t) => t.dataset.testid));
  check(pressed.join() === `overview-thumb-${pt.layer}-${pt.head}`, `the overview marks ${pressed.join()} as shown`);
  await shot(page, 'induction-overview.png');
  // Another head's label (not the circuit's) is over the map too.
  const other = s.labels.flatMap((heads, l) => heads.map((label, h) => ({ l, h, label })))
    .find((x) => !/^(previous-token|induction) head$/.test(x.label));
  await page.click(`[data-testid="overview-thumb-${other.l}-${other.h}"]`);
  await page.waitForFunction(({ l, h }) => window.attn.stack().layer === l && window.attn.state.view.head === h, other);
  const title2 = await page.textContent('#view-title');
  check(title2.includes(other.label), `the view's title "${title2}" does not say layer ${other.l} head ${other.h}'s label "${other.label}"`);
}

async function stepLeave(page) {
  const ids = (await stackOf(page)).sequenceIds;
  const sent = await act(page, () => page.selectOption('[data-testid="example"]', 'trained'));
  check(await page.isHidden('[data-testid="stack-card"]'), 'step mode is still shown for the single-layer model');
  check(await page.evaluate(() => window.attn.stack()) === null, 'attn.stack() still holds the stack');
  const ends = () => ctx.requests.filter((r) => r.params.sequence_end && ids.includes(r.params.sequence_id));
  for (let k = 0; k < 50 && ends().length < 2; k++) await page.waitForTimeout(100);
  check(ends().length === 2, `leaving the stack ended ${ends().length} of its 2 sequences`);
  // A single layer: one row of thumbnails, a click opens the head.
  const r = await page.evaluate(() => ({ H: window.attn.state.response.H }));
  const thumbs = await page.$$eval('[data-testid="overview"] .thumb', (ts) => ts.map((t) => t.dataset.testid));
  check(thumbs.length === r.H && thumbs.every((t, h) => t === `overview-thumb-0-${h}`), `the single-layer overview has ${JSON.stringify(thumbs)}`);
  await page.click(`[data-testid="overview-thumb-0-${r.H - 1}"]`);
  await page.waitForFunction((h) => window.attn.state.view.head === h, r.H - 1);
  check(sent.every((x) => !x.params.sequence_id || x.params.sequence_end), 'the single-layer run carried a sequence_id');
}

// Nothing of the stack is left on the page after an error, or under
// another example: an input error in the stack, steps still queued when
// another example is chosen, another example's failed run. Each time the
// stack's sequences are ended.
async function stepNoStaleStack(page) {
  const settle = async (before) => page.waitForFunction((n) => window.attn.state.runCount > n && !window.attn.state.busy,
                                                       before, { timeout: 30000 });
  const ended = async (ids) => {
    const ends = () => ctx.requests.filter((r) => r.params.sequence_end && ids.includes(r.params.sequence_id));
    for (let k = 0; k < 50 && ends().length < ids.length; k++) await page.waitForTimeout(100);
    return ends().length;
  };
  const gone = async (what) => {
    const st = await page.evaluate(() => ({ stack: window.attn.stack(), title: window.attn.state.title }));
    check(st.stack === null, `${what}: the stack is still drawn`);
    check(await page.isHidden('[data-testid="stack-card"]'), `${what}: the step controls are still shown`);
    return st;
  };
  // 1. an input error in the stack: no maps under the banner
  await act(page, () => page.selectOption('[data-testid="example"]', 'induction'));
  let ids = (await stackOf(page)).sequenceIds;
  await page.fill('[data-testid="tokens"]', '');
  let before = await page.evaluate(() => window.attn.state.runCount);
  await page.click('[data-testid="run"]');
  await settle(before);
  const e1 = await page.evaluate(() => ({ err: window.attn.state.lastError, resp: window.attn.state.response }));
  check(e1.err && e1.resp === null, `an empty input: error ${JSON.stringify(e1.err)}, a response still drawn: ${e1.resp !== null}`);
  await gone('after an input error');
  check(await ended(ids) === 2, 'the input error left the stack\'s sequences open');
  // 2. steps queued, then another example: that example is what is drawn
  await act(page, () => page.selectOption('[data-testid="example"]', 'induction'));
  ids = (await stackOf(page)).sequenceIds;
  before = await page.evaluate(() => window.attn.state.runCount);
  await page.evaluate(() => {   // four clicks at once, then the other example
    for (let k = 0; k < 4; k++) document.querySelector('[data-testid="step"]').click();
    const sel = document.querySelector('[data-testid="example"]');
    sel.value = 'sentence';
    sel.dispatchEvent(new Event('change', { bubbles: true }));
  });
  await page.waitForFunction(() => !window.attn.state.busy && window.attn.state.title && !/induction/.test(window.attn.state.title),
                             null, { timeout: 30000 });
  await page.waitForTimeout(1500);   // what was queued has had its time
  const st = await gone('steps queued, then the sentence example');
  const L = await page.evaluate(() => window.attn.state.response && window.attn.state.response.L);
  check(!/induction/.test(st.title) && L === 10, `the sentence example is not what is drawn: "${st.title}", L ${L}`);
  check(await ended(ids) === 2, 'choosing another example left the stack\'s sequences open');
  // 3. another example's run fails: the stack goes too
  await act(page, () => page.selectOption('[data-testid="example"]', 'induction'));
  ids = (await stackOf(page)).sequenceIds;
  await page.route('**/attention', (r) => r.fulfill({ status: 503, contentType: 'application/json',
                                                       body: '{"error":"busy (test)","code":"overloaded"}' }));
  before = await page.evaluate(() => window.attn.state.runCount);
  await page.selectOption('[data-testid="example"]', 'sentence');
  await settle(before);
  await page.unroute('**/attention');
  const e3 = await page.evaluate(() => window.attn.state.lastError);
  check(e3 && e3.status === 503, `the failed run shows ${JSON.stringify(e3)}`);
  await gone('after another example\'s failed run');
  check(await ended(ids) === 2, 'the failed run left the stack\'s sequences open');
}

// Leaving the page (a reload) ends the stack's sequences: a step on them
// from here is then 400, the sequence not found.
async function stepPageHide(page, base) {
  await act(page, () => page.selectOption('[data-testid="example"]', 'induction'));
  const ids = (await stackOf(page)).sequenceIds;
  await page.goto(base, { waitUntil: 'domcontentloaded' });
  await page.waitForFunction(() => window.attn && window.attn.state.runCount > 0 && !window.attn.state.busy, null, { timeout: 30000 });
  const row = Array.from({ length: ctx.E }, () => 0);
  for (let l = 0; l < ids.length; l++) {
    const res = await fetch(new URL(`v2/models/${ctx.names[l]}/infer`, base), { method: 'POST', body: JSON.stringify({
      parameters: { sequence_id: ids[l] }, inputs: [{ name: 'query', datatype: 'FP32', shape: [1, ctx.E], data: row }] }) });
    const status = res.status;
    check(status === 400, `layer ${l}'s sequence is still held by the server after the page was left (a step on it: HTTP ${status})`);
  }
}

runSuite('induction.test', [
  ['the induction example: both layers, labels, predictions, equal to the stateless stack', stepExample, { essential: true }],
  ['ideal induction: the outline at key i − m + 1 in the second copy', stepIdeal],
  ['step mode: Reset ends and starts, each step one row per layer in its sequence, equal to stateless', stepStep],
  ['a lost sequence is said and started again from the tokens kept', stepLost],
  ['a typed sequence is one prompt chunk, then steps', stepTyped],
  ['layer × head overview: every head, a click opens it', stepOverview],
  ['leaving the stack ends its sequences; a single layer is one overview row', stepLeave],
  ['nothing of the stack under an error or another example (queued steps dropped)', stepNoStaleStack],
  ['leaving the page ends the sequences', stepPageHide],
], { prefix: 'induction-', logName: 'server-induction.log' });
