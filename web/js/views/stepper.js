// The stack example and step mode: a served stack of layers (stack.js),
// run on the typed tokens as one prompt chunk, then stepped token by token
// ("Step": the next token of the sequence last run or reset; "Next token":
// the model's own prediction), each step one row per layer; "Reset" ends
// the sequences and starts new ones at the first token. Below the buttons:
// the tokens with the model's prediction for each under it (correct ones
// marked), and a status line. "ideal induction" (on from the start)
// outlines, on the large heatmap of the induction head's layer, where an
// ideal induction head would look.
//
//   initStepper()          // after the model picker: adds the stack's entry to the Example list
//   stackChosen()          // the Example list shows the stack
//   openStack()            // the stack's example input, run part-way into its repeat
//   runStack()             // the typed tokens as one prompt chunk (new sequences)
//   cancelStack()          // drops the actions queued so far (app.js, before another run)
//   stackView()            // the test hook's snapshot (app.js window.attn.stack)
//
// state.stack (state.js) holds what is drawn: every layer's maps, the
// layer shown, the tokens and predictions; the sequences themselves (ids,
// the residual stream) are the SequenceStack's.

import { state, subscribe, update } from '../state.js';
import { $, clearOverlay, sizeCanvas } from '../canvas.js';
import { SequenceStack, findRepeat, idealInduction, stackOf, stackTokens } from '../stack.js';
import { modelOf, showModelMeta } from './modelpicker.js';
import { applyModelInput, updateFormFields } from './form.js';
import { heatmapLayout, onHeatmapDrawn } from './heatmap.js';

export const STACK_EXAMPLE = 'induction';

let layers = null;     // the served stack's model infos, or null
let stepping = null;    // the SequenceStack of what is shown
let plan = [];         // the token ids Step walks through: the typed text at the last Run or Reset
let queue = Promise.resolve();   // actions run one after another, in the order clicked
let epoch = 0;         // actions queued before cancelStack() are dropped

export const stackChosen = () => !!layers && $('example').value === STACK_EXAMPLE;

// The first served model that starts a stack, as an entry of the Example list.
export function initStepper() {
  for (const opt of $('model').options) {
    layers = opt.value ? stackOf(modelOf(opt.value), modelOf) : null;
    if (layers) break;
  }
  if (!layers) return;
  const c = layers[0].config;
  const what = c.circuit && c.circuit.induction ? 'induction heads' : layers[0].name;
  const opt = new Option(`Trained: ${what} (${layers.length} layers)`, STACK_EXAMPLE);
  const trained = $('example').querySelector('option[value="trained"]');
  $('example').insertBefore(opt, trained ? trained.nextSibling : $('example').firstElementChild);
  $('step').addEventListener('click', () => act(step));
  $('next-token').addEventListener('click', () => act(nextToken));
  $('reset').addEventListener('click', () => act(reset));
  $('ideal').addEventListener('change', drawIdeal);
  subscribe((changed) => {
    if ('stack' in changed) {
      $('stack-card').hidden = !state.stack;
      markButtons();
      document.body.dataset.stack = state.stack ? 'on' : '';
      if (!state.stack && stepping) { stepping.end(); stepping = null; }
      renderPredictions();
    }
  });
  onHeatmapDrawn(drawIdeal);
  // The server would keep the sequences until their idle timeout.
  window.addEventListener('pagehide', () => { if (stepping) stepping.end(true); });
}

// The example opens part-way: its first copy and the first OPEN_INTO
// tokens of the repeat (the whole input when it has no repeat), so Step and
// Next token add a token at once and the stripe grows from there.
const OPEN_INTO = 3;

export function openStack() {
  $('example').value = STACK_EXAMPLE;
  $('model').value = layers[0].name;
  showModelMeta(layers[0].name);
  applyModelInput(layers[0]);
  updateFormFields();
  return act(async () => {
    plan = idsOf($('tokens').value);
    const rep = findRepeat(plan);
    stepping = stepping || new SequenceStack(layers);
    return stepping.restart(plan.slice(0, rep ? Math.min(plan.length, rep.start + rep.m + OPEN_INTO) : plan.length));
  });
}

// Drops the stack's actions queued so far (a run of another example
// replaces what they would draw).
export function cancelStack() {
  epoch++;
}

export const runStack = () => act(async () => {
  plan = idsOf($('tokens').value);
  stepping = stepping || new SequenceStack(layers);
  return stepping.restart(plan);
});

async function reset() {
  plan = idsOf($('tokens').value);
  stepping = stepping || new SequenceStack(layers);
  return stepping.restart(plan.slice(0, 1));
}

const allIn = () => `all ${plan.length} tokens of the sequence are in: Next token appends the model's prediction`;
const reached = () => `reached the model's ${stepping.P} positions: Reset starts again`;

async function step() {
  if (!stepping) return { note: 'Run first' };
  if (stepping.n >= stepping.P) return { note: reached() };
  if (stepping.n >= plan.length) return { note: allIn() };
  return stepping.append([plan[stepping.n]]);
}

async function nextToken() {
  if (!stepping) return { note: 'Run first' };
  if (stepping.n >= stepping.P) return { note: reached() };
  const next = stepping.predictions()[stepping.n - 1];
  return stepping.append([stepping.vocab.indexOf(next)]);
}

function idsOf(text) {
  return stackTokens(layers[0], text).map((t) => layers[0].config.vocab.indexOf(t));
}

// Runs `fn` after the actions before it, as a run of the page (busy,
// runSeq, runCount, lastError as app.js's runs), and draws its result:
// {ok}, {note} (nothing sent), or {error, lost}.
function act(fn) {
  const mine = epoch;
  queue = queue.then(async () => {
    if (mine !== epoch) return;   // another run of the page came after the click
    const seq = state.runSeq + 1, t0 = performance.now();
    update({ runSeq: seq, busy: true });
    let r;
    try {
      r = await fn();
    } catch (e) {
      r = { error: { status: 0, code: '', message: e.message } };
    }
    if (seq !== state.runSeq) return;   // another run replaced this one on the page
    const done = { busy: false, runCount: state.runCount + 1 };
    // an error leaves nothing drawn under it (as app.js's runs): the stack
    // goes, and with it the sequences (the subscriber below ends them)
    if (r.error) return update({ ...done, lastError: r.error, response: null, second: null, stack: null });
    if (!stepping) return update({ ...done, lastError: null });
    const note = r.note || (r.lost ? `the server had lost the sequences (restarted?): started again from the ${stepping.n} tokens kept here`
                                   : stepping.n >= stepping.P ? reached() : stepping.n >= plan.length ? allIn() : '');
    publish(note, { ...done, lastError: null, lastTiming: r.note ? state.lastTiming : { total: performance.now() - t0, bytes: stepping.lastBytes } });
  });
  return queue;
}

// The sequence stack's maps into the state: every layer's, the shown one as the response.
function publish(note, extra) {
  const c = layers[0].config;
  const first = c.circuit && c.circuit.induction ? c.circuit.induction : { layer: idealLayer(), head: 0 };
  const layer = state.stack ? state.stack.layer : first.layer;
  const cells = idealFor(stepping.tokens());
  const maps = layers.map((_, l) => stepping.layerResponse(l, cells));
  const r = maps[layer];
  const head = state.stack ? (state.view.head === 'avg' || state.view.head < r.H ? state.view.head : 0) : first.head;
  update({
    ...extra,
    stack: { names: layers.map((x) => x.name), layers: maps, layer, n: stepping.n, P: stepping.P,
             tokens: stepping.tokens(), predictions: stepping.predictions(), note,
             sequenceIds: stepping.seq.slice() },
    response: r, title: `${layers[layer].name} (layer ${layer} of ${layers.length}, trained)`,
    view: { ...state.view, head, batch: 0, tab: state.view.tab === 'compare' ? 'heatmap' : state.view.tab },
    second: null, lastExchange: stepping.lastExchange,
  });
}

// Shows layer l's maps, head h (the overview's click).
export function showLayer(l, h) {
  const s = state.stack;
  update({ stack: { ...s, layer: l }, response: s.layers[l], title: `${layers[l].name} (layer ${l} of ${layers.length}, trained)`,
           view: { ...state.view, head: h } });
}

// Step and Next token do nothing at the model's last position (Step
// neither past the sequence last run or reset): disabled there, the status
// line saying why. The model panel shows the layer whose map is drawn.
function markButtons() {
  const s = state.stack;
  $('next-token').disabled = !s || s.n >= s.P;
  $('step').disabled = !s || s.n >= s.P || s.n >= plan.length;
  if (s) showModelMeta(s.names[s.layer], `layer ${s.layer} of ${s.names.length}: ${s.names[s.layer]}`);
}

// The layer whose heads the ideal induction outline describes: the
// config's induction head's, else the last.
function idealLayer() {
  const c = layers[0].config;
  return c.circuit && c.circuit.induction ? c.circuit.induction.layer : layers.length - 1;
}

// Under each token the model's guess for it (made at the position before),
// then its guess for the next token; correct guesses marked.
function renderPredictions() {
  const box = $('predictions'), s = state.stack;
  box.textContent = '';
  $('step-status').textContent = s ? `${s.n} of ${s.P} positions` + (s.note ? ` · ${s.note}` : '') : '';
  if (!s) return;
  const head = (text, cls) => Object.assign(document.createElement('span'), { textContent: text, className: cls });
  const col = (top, bottom, cls, title) => {
    const c = document.createElement('span');
    c.className = `pcol ${cls}`;
    c.title = title;
    c.append(head(top, 'ptok'), head(bottom, 'ppred'));
    return c;
  };
  box.append(col('token', 'predicted', 'plabel', ''));
  let right = 0;
  s.tokens.forEach((t, i) => {
    if (i === 0) { box.append(col(t, '·', '', `position 0: ${t}`)); return; }
    const p = s.predictions[i - 1], ok = p === t;
    right += ok;
    box.append(col(t, p, ok ? 'ok' : 'miss', `position ${i}: ${t}; the model predicted ${p} from the tokens before${ok ? ' (correct)' : ''}`));
  });
  if (s.n) box.append(col('?', s.predictions[s.n - 1], 'next', 'the model\'s prediction of the next token'));
  if (s.n > 1) $('step-status').textContent += ` · ${right} of ${s.n - 1} next tokens predicted`;
}

// The cells an ideal induction head would weigh on the shown map, for the
// repeat found in the sequence (the one Step walks through, else the tokens).
export function idealCells() {
  const s = state.stack;
  return s && stepping ? idealFor(s.tokens) : [];
}

// The same for the tokens held (the sequence stack's, before they are shown).
function idealFor(tokens) {
  const n = tokens.length;
  const seq = plan.length >= n && plan.slice(0, n).every((id, i) => tokens[i] === stepping.vocab[id])
    ? plan.map((id) => stepping.vocab[id]) : tokens;
  return idealInduction(findRepeat(seq), n);
}

const idealShown = () => !!state.stack && $('ideal').checked && state.stack.layer === idealLayer();

function drawIdeal() {
  const c = $('heatmap-ideal'), g = heatmapLayout();
  if (!g || !idealShown()) { sizeCanvas(c, 1, 1); return; }
  const base = $('heatmap');
  sizeCanvas(c, parseFloat(base.style.width), parseFloat(base.style.height));
  const ctx = clearOverlay(c);
  ctx.strokeStyle = '#ff4fd8';
  ctx.lineWidth = Math.max(1, Math.min(2, g.cell / 6));
  for (const [i, j] of idealCells()) {
    if (i < g.L && j < g.S) ctx.strokeRect(g.left + j * g.cell + 1, g.top + i * g.cell + 1, g.cell - 2, g.cell - 2);
  }
}

// The test hook's snapshot: what state.stack holds, plus each layer's maps
// as nested arrays ([layer][head][i][j]) and the ideal cells drawn.
export function stackView() {
  const s = state.stack;
  if (!s) return null;
  const maps = s.layers.map((r) => Array.from({ length: r.H }, (_, h) => Array.from({ length: r.L },
    (_, i) => Array.from(r.weights.subarray((h * r.L + i) * r.S, (h * r.L + i + 1) * r.S)))));
  return { names: s.names.slice(), layer: s.layer, n: s.n, P: s.P, tokens: s.tokens.slice(), predictions: s.predictions.slice(),
           note: s.note, sequenceIds: s.sequenceIds.slice(), maps, labels: s.layers.map((r) => r.headLabels.slice()),
           ideal: idealShown() ? idealCells() : [] };
}
