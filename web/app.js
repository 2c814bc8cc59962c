// Attention viewer: builds /attention and v2 infer requests, sends them,
// draws the weights.
//
// Plain ES modules, no dependencies, nothing fetched but this service's own
// files, POST /attention and /v2. This file wires them together:
//
//   js/state.js      the one state object: update(), subscribe(), readOnlyView()
//   js/api.js        requests (from the form or pasted text), POST, errors as data
//   js/tensor.js     base64 / nested tensors, the decoded response, per-head weights
//   js/colors.js     viridis and diverging scales, the legend both heatmaps use
//   js/examples.js   the built-in examples and the requests they make
//   js/variants.js   the attention-variant fields of a request (Hkv, RoPE, ALiBi, ...)
//   js/canvas.js     canvas and DOM helpers shared by the views
//   js/models.js     served models over v2: list, metadata and config, their
//                    input (vocabulary and embedding table), binary infer
//   js/stats.js      per-head entropy and mean attention distance, differences
//   js/readout.js    a model's answer in words: unembedding -> logits -> tokens
//   js/svg.js        heatmaps as SVG text (Export SVG)
//   js/stack.js      a stack of served layers (induction-l0 -> -l1): the residual
//                    stream, one sequence per layer, predictions
//   js/headlabels.js what each head of a stack does, in words (its label)
//   js/views/*.js    one module per part of the page: grid, summary, heatmap,
//                    headview, output, compare, status, form, modelpicker,
//                    export, answer, stepper (step mode), overview (layer x head);
//                    maps.js (the per-head images)
//
// A run: build the request (the served model chosen in the picker: v2
// infer with binary tensors; else POST /attention) -> the call -> an error
// goes into state.lastError
// -> else the response goes into the state -> the subscriber below draws.
// Everything is drawn on <canvas> (never one DOM node per cell); the weights
// come back as base64 float32 and live in Float32Arrays.
//
// Test hook, window.attn (used by tests/browser/*.test.mjs), read-only:
//   attn.state -> a read-only view of the state (js/state.js): response,
//       title, view {batch, head, threshold, rangeMode, tab}, lastRequest,
//       lastExchange, runSeq, busy, runCount, lastTiming, lastError. Assigning through it
//       throws; typed arrays in it are copies.
//   attn.colorFor(value, max) -> [r, g, b]  the colour a weight `value` is
//       drawn with when the colour range is 0..max (viridis, 256 steps).
//       A weight below the threshold is drawn as colorFor(0, max).
//   attn.diffColor(value, max) -> [r, g, b]  the colour of a difference on
//       -max … max in the Compare tab (blue - white - red, 0 white).
//   attn.colorMax(batch, head) -> the top of that map's colour range (null
//       without weights); the large heatmap shows state.view's map.
//   attn.matrix(batch, head) -> plain L x S array of arrays of the weights
//       of one head (or "avg", the mean over heads) of one batch item.
//   attn.cellRect(i, j) -> the large heatmap's cell (query i, key j) in CSS
//       pixels: {x, y, w, h, cx, cy} relative to the viewport (what
//       page.mouse.move takes) and {pageX, pageY}, its centre in page
//       coordinates; null when the heatmap is not shown.
//   attn.cellPixel(i, j) -> {x, y}: the centre of that cell in the heatmap
//       canvas's own pixels (for getImageData on #heatmap).
//   attn.headTokenPoint(side, k) -> {x, y}: viewport point of query token k
//       (side "query") or key token k (side "key") in the head view.
//   attn.svgOfTab() -> the text Export SVG downloads; attn.exchangeJson()
//       -> the text Export JSON downloads.
//   attn.compareMaps() -> the Compare tab's maps {a, b, diff (flat L x S
//       arrays), max, L, S} or {error}; attn.comparePixel(k, i, j) -> {x, y}
//       the centre of cell (i, j) of panel k (0 A, 1 B, 2 B − A) in
//       #compare-canvas's pixels; attn.compareRanges() -> {a, b, diff};
//       attn.compareLabels() -> {rows, cols, tokens}: the axis labels drawn
//       (the tokens, or indices when the cells are too small for text).
//   attn.highlightedCell() -> {i, j}: the heatmap cell the keyboard or the
//       pointer highlights, or null.
//   attn.outputLayout() -> the Output tab's last drawing: {cell (px a row),
//       labels (the tokens drawn left of the rows), fontPx (theirs)}, or null.
//   attn.headSummary(batch) -> [{entropy, distance}] per head, as the head
//       summary chart shows them (null for averaged weights).
//   attn.stack() -> the stack shown (views/stepper.js stackView) or null:
//       {names, layer, n, P, tokens, predictions, note, sequenceIds,
//       maps [layer][head][i][j], labels [layer][head], ideal [[i, j]]}.
//   attn.answer() -> the served model's answer in words under the maps
//       (views/answer.js answerOf: {model, tokens, expected, right, ...}),
//       or null when the drawn response has none.

import { state, update, subscribe, readOnlyView } from './js/state.js';
import { postAttention, requestFromForm, requestFromText } from './js/api.js';
import { AVG, matrixOf } from './js/tensor.js';
import { colorFor, diffColor } from './js/colors.js';
import { $ } from './js/canvas.js';
import { mapImage, mapLabel } from './js/views/maps.js';
import { initGrid, markSelectedThumb, renderGrid } from './js/views/grid.js';
import { cellPixel, cellRect, highlightedCell, initHeatmap, renderHeatmap } from './js/views/heatmap.js';
import { markSelectedBars, renderSummary, summaryStats } from './js/views/summary.js';
import { headTokenPoint, initHeadView, renderHeadView } from './js/views/headview.js';
import { outputLayout, renderOutput } from './js/views/output.js';
import { answerOf, renderAnswer } from './js/views/answer.js';
import { renderStatus } from './js/views/status.js';
import { applyExample, applyModelInput, modelMask, readForm, showModelWidths, updateFormFields } from './js/views/form.js';
import { initModelPicker, modelOf, showModelMeta, trainedModel } from './js/views/modelpicker.js';
import { inferV2, modelInput } from './js/models.js';
import { reduceFor } from './js/reduced.js';
import { compareLabels, compareMaps, comparePixel, compareRanges, initCompare, renderCompare } from './js/views/compare.js';
import { exchangeJson, exportJson, exportPng, exportSvg, svgOfTab } from './js/views/export.js';
import { STACK_EXAMPLE, cancelStack, initStepper, openStack, runStack, stackChosen, stackView } from './js/views/stepper.js';
import { initOverview } from './js/views/overview.js';

// ---------------------------------------------------------------------------
// Drawing what the state says

function renderView() {
  const tab = state.view.tab;
  if (tab === 'heatmap') renderHeatmap();
  else if (tab === 'headview') renderHeadView();
  else if (tab === 'compare') renderCompare();
  else renderOutput();
  $('view-title').textContent = state.response ? mapLabel() : '';
}

function renderAll() {
  renderGrid();
  renderSummary();
  renderAnswer();   // before the map, which leaves it room on screen
  renderView();
}

// fn at the next animation frame, once however often it is asked for before.
function oncePerFrame(fn) {
  let frame = 0;
  return () => {
    if (!frame) frame = requestAnimationFrame(() => { frame = 0; fn(); });
  };
}
const renderAllSoon = oncePerFrame(() => { if (state.response) renderAll(); });

function showTab() {
  const tab = state.view.tab;
  for (const b of document.querySelectorAll('.tabs [role="tab"]'))
    b.setAttribute('aria-selected', String(b.dataset.view === tab));
  for (const v of ['heatmap', 'headview', 'output', 'compare']) $(`view-${v}`).hidden = v !== tab;
}

// No response (an error cleared it): the error alone, no maps of an
// earlier input under it.
function showResponse() {
  const r = state.response;
  for (const id of ['heads-card', 'view-card']) $(id).hidden = !r;
  if (!r) return;
  const sel = $('batch');
  sel.textContent = '';
  $('batch-field').hidden = !(r.N > 1);
  for (let b = 0; b < r.N; b++) sel.add(new Option(String(b), String(b)));
  sel.value = String(state.view.batch);
  const x = r.reduced;
  const sizes = !x ? `L = ${r.L}, S = ${r.S}` : x.kind === 'pool'
    ? `L = ${x.L}, S = ${x.S}, pooled p = ${x.p}: ${r.L} × ${r.S} tiles` : `L = ${r.L}, S = ${r.S}, top ${x.k} of each row`;
  $('heads-sub').textContent = `${state.title} · ${sizes}, H = ${r.H}, E = ${r.E}` +
    (r.N > 1 ? `, N = ${r.N}` : '');
  showTab();
  renderAll();
}

subscribe((changed, before) => {
  if ('busy' in changed || 'lastError' in changed || 'lastTiming' in changed) renderStatus();
  if ('response' in changed) {
    showResponse();
  } else if ('compare' in changed || 'second' in changed) {
    if (state.view.tab === 'compare') renderCompare();
  } else if ('view' in changed) {
    const was = before.view, now = state.view;
    $('threshold-value').textContent = now.threshold.toFixed(3);
    if (was.batch !== now.batch) renderAll();
    else if (was.threshold !== now.threshold || was.rangeMode !== now.rangeMode) renderAllSoon();
    else if (was.tab !== now.tab) { showTab(); if (state.response) renderView(); }
    else if (was.head !== now.head) { markSelectedThumb(); markSelectedBars(); if (now.tab !== 'compare') renderView(); }
  }
});

// ---------------------------------------------------------------------------
// Running requests

// The view kept across runs where the new response has it.
function fitView(view, r) {
  const v = { ...view };
  if (v.batch >= r.N) v.batch = 0;
  if (!r.perHead) v.head = AVG;
  else if (v.head !== AVG && v.head >= r.H) v.head = 0;
  if (!r.weights) v.tab = 'output';   // nothing else to show
  return v;
}

const nextFrame = () => new Promise((r) => requestAnimationFrame(() => r()));

function finish(seq, changed) {
  if (seq === state.runSeq) update({ ...changed, busy: false, runCount: state.runCount + 1 });
}

// The tokens of the form as a served model's input and the v2 parameters
// of the mask control (which shows the model's own default when chosen).
async function sendToModel(form, slot) {
  const info = modelOf(form.model);
  let input;
  try {
    input = modelInput(info, form.tokens, form.cross ? form.keyTokens : '');
  } catch (e) {
    return { error: { status: 0, code: '', message: e.message } };
  }
  const params = {};
  if (form.mask === 'causal' || form.mask === 'causal_lower_right') params.is_causal = true;
  else if (form.mask === 'none' && modelMask(info) !== 'none') params.is_causal = false;   // over the model's causal default
  if (form.mask === 'causal_lower_right') params.causal_alignment = 'lower_right';
  const reduce = reduceFor(input.tokens.length, input.keyTokens.length, info.H, form.weightsMode);
  const built = performance.now();
  const res = await inferV2(info, input, params, slot, reduce);
  const title = `${info.name} (served model${info.trained ? ', trained' : ', on the page\'s embeddings'})`;
  return { res, built, title, exchange: res.response &&
           { endpoint: `POST /v2/models/${info.name}/infer`, request: res.request, response: res.answer } };
}

// One run's request and its answer: {res (api.js's answer), built (time
// the request was ready), title, sent ({body, pasted} of a POST /attention
// body), exchange (for Export JSON)} or {error}. tokensText replaces the
// form's tokens (Compare's second input).
async function send(kind, slot, tokensText) {
  const form = kind === 'example' ? readForm() : null;
  if (form && tokensText !== undefined) form.tokens = tokensText;
  if (form && form.model) return sendToModel(form, slot);
  const req = form ? requestFromForm(form) : requestFromText($('request-json').value);
  if (req.error) return req;
  const built = performance.now();
  if (slot === 'main') update({ lastRequest: { body: req.body, pasted: req.pasted } });
  const res = await postAttention(req, slot);
  return { res, built, title: req.title,
           exchange: res.response && { endpoint: 'POST /attention', request: req.body, response: res.text } };
}

async function run(kind) {
  if (kind === 'example' && stackChosen()) return runStack();
  cancelStack();   // steps still queued would draw the stack over this run
  const seq = state.runSeq + 1;
  update({ runSeq: seq, busy: true });
  const t0 = performance.now();
  const sent = await send(kind, 'main');
  // an error leaves nothing drawn under it: no maps, no stack (its sequences end)
  if (sent.error) return finish(seq, { lastError: sent.error, response: null, second: null, stack: null });
  const res = sent.res;
  if (res.aborted || seq !== state.runSeq) return;
  if (res.error) return finish(seq, { lastError: res.error, response: null, second: null, stack: null });
  const t2 = performance.now();
  update({ response: res.response, title: sent.title, view: fitView(state.view, res.response), lastError: null,
           second: null, lastExchange: sent.exchange, stack: null });
  const t3 = performance.now();
  await nextFrame();
  const t4 = performance.now();
  finish(seq, { lastTiming: { build: sent.built - t0, ...res.timing, render: t3 - t2, total: t4 - t0,
                              serverTiming: res.serverTiming, bytes: res.bytes } });
}

// After a run the user started: its error, or its answer under the map
// (else the large view's top), on screen, scrolled to only when it is not
// (one column: the form is below the maps).
function reveal() {
  const el = state.lastError ? $('error') : $('answer').hidden ? $('view-card') : $('answer');
  if (el.hidden) return;
  const r = el.getBoundingClientRect(), H = window.innerHeight;
  const seen = el.id === 'view-card' ? r.top >= 0 && r.top < H / 2 : r.top >= 0 && r.bottom <= H;
  if (seen) return;
  if (el.id === 'answer') $('view-card').scrollIntoView({ block: 'start' });
  el.scrollIntoView({ block: 'nearest' });
}

// The Example list: the trained model (its example input, the model chosen
// in the picker) or an untrained example (no model).
function pickExample(name) {
  const t = trainedModel();
  $('example').value = name;
  if (name === STACK_EXAMPLE) return openStack();
  if (name === 'trained' && t) {
    $('model').value = t.name;
    applyModelInput(t);
  } else {
    $('model').value = '';
    applyExample(name);
  }
  showModelMeta($('model').value);
  updateFormFields();
  run('example');
}

// The picker: a model with a vocabulary gets its example input when the
// tokens are not in its vocabulary; no model goes back to the untrained
// sentence example when the trained one was shown.
function pickModel(name) {
  const info = modelOf(name), t = trainedModel();
  if (info && info.trained) {
    try { modelInput(info, $('tokens').value); } catch { applyModelInput(info); }
  }
  if (info) showModelWidths(info);
  if (name === '' && ['trained', STACK_EXAMPLE].includes($('example').value)) { $('example').value = 'sentence'; applyExample('sentence'); }
  else if (t && name === t.name) $('example').value = 'trained';
  else if ($('example').value === STACK_EXAMPLE) $('example').value = 'sentence';
  updateFormFields();
  run('example');
}

// ---------------------------------------------------------------------------
// Wiring

const setView = (part) => update({ view: { ...state.view, ...part } });

async function init() {
  $('example').addEventListener('change', () => pickExample($('example').value));
  for (const id of ['mask', 'heads', 'embed-dim', 'rope', 'weights-mode']) $(id).addEventListener('change', updateFormFields);
  const runShown = (kind) => run(kind).then(reveal);
  $('run').addEventListener('click', () => runShown('example'));
  $('run-json').addEventListener('click', () => runShown('json'));
  // Enter runs the tokens (Shift+Enter: a new line); the JSON editor, whose
  // text has lines, runs on Ctrl+Enter.
  for (const id of ['tokens', 'key-tokens', 'request-json']) {
    $(id).addEventListener('keydown', (ev) => {
      if (ev.key !== 'Enter' || ev.isComposing || ev.shiftKey) return;
      if (id === 'request-json' && !(ev.ctrlKey || ev.metaKey)) return;
      ev.preventDefault();
      runShown(id === 'request-json' ? 'json' : 'example');
    });
  }
  $('upload').addEventListener('change', async () => {
    const f = $('upload').files[0];
    if (!f) return;
    $('request-json').value = await f.text();
    $('upload').value = '';
    run('json');
  });
  // The user's own text comes back as typed; a generated request indented.
  $('copy-request').addEventListener('click', () => {
    const last = state.lastRequest;
    if (!last) return;
    let text = last.body;
    if (!last.pasted) try { text = JSON.stringify(JSON.parse(last.body), null, 1); } catch { /* as sent */ }
    $('request-json').value = text;
  });
  $('threshold').addEventListener('input', () => setView({ threshold: Number($('threshold').value) }));
  $('range-mode').addEventListener('change', () => setView({ rangeMode: $('range-mode').value }));
  $('batch').addEventListener('change', () => setView({ batch: Number($('batch').value) }));
  for (const b of document.querySelectorAll('.tabs [role="tab"]'))
    b.addEventListener('click', () => setView({ tab: b.dataset.view }));
  $('export').addEventListener('click', exportPng);
  $('export-svg').addEventListener('click', exportSvg);
  $('export-json').addEventListener('click', exportJson);
  initGrid();
  initHeatmap();
  initHeadView();
  initCompare(async (text) => {
    const sent = await send('example', 'second', text);
    return sent.error ? sent : sent.res;
  });

  // Lay out again only when the width changed (a full-page screenshot, for
  // one, resizes the window's height; that must not drop the hover).
  let resizeTimer = 0, lastWidth = document.documentElement.clientWidth;
  window.addEventListener('resize', () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => {
      const w = document.documentElement.clientWidth;
      if (w === lastWidth) return;
      lastWidth = w;
      if (state.response) renderView();
    }, 120);
  });

  window.attn = Object.freeze({
    state: readOnlyView(state),
    colorFor,
    diffColor,
    colorMax: (b, h) => (state.response && state.response.weights ? mapImage(b, h).max : null),
    matrix(b, h) {
      const r = state.response, w = matrixOf(r, b, h);
      return w && Array.from({ length: r.L }, (_, i) => Array.from(w.subarray(i * r.S, (i + 1) * r.S)));
    },
    cellRect,
    cellPixel,
    headTokenPoint,
    highlightedCell,
    outputLayout,
    svgOfTab,
    compareMaps: () => { const m = compareMaps(); return m.error ? m : { ...m, a: Array.from(m.a), b: Array.from(m.b), diff: Array.from(m.diff) }; },
    comparePixel,
    compareRanges,
    compareLabels,
    exchangeJson,
    stack: stackView,
    answer: () => answerOf(),
    headSummary: (b) => (state.response && state.response.perHead ? summaryStats(b).map((s) => ({ ...s })) : null),
  });

  // The first example: the served trained model when there is one.
  await initModelPicker(pickModel);
  initStepper();
  initOverview();
  pickExample(trainedModel() ? 'trained' : 'sentence');
}

init();
