// The sidebar's example form: filled in from a built-in example, read back
// as the form examples.js builds a request from. The attention-variant
// controls keep their values across examples; the KV-head choices follow
// the number of heads (its divisors), and the RoPE parameters and the
// padding count show only when they apply.

import { $ } from '../canvas.js';
import { EXAMPLES } from '../examples.js';
import { modelExample } from '../models.js';

// The Weights control as reduced.js reduceFor takes it.
function weightsMode() {
  const mode = $('weights-mode').value, n = Number($('weights-param').value);
  if (mode === 'pool') return { pool: n };
  if (mode === 'topk') return { topK: n };
  return mode;
}

export function readForm() {
  return {
    example: $('example').value,
    tokens: $('tokens').value,
    keyTokens: $('key-tokens').value,
    cross: !$('key-tokens-field').hidden,
    E: Number($('embed-dim').value),
    H: Number($('heads').value),
    mask: $('mask').value,
    padK: Number($('pad-k').value),
    scale: $('scale').value.trim(),
    seed: Number($('seed').value) | 0,
    hkv: Number($('kv-heads').value),
    rope: $('rope').value,
    ropeTheta: $('rope-theta').value.trim(),
    ropeDim: $('rope-dim').value.trim(),
    offset: $('pos-offset').value.trim(),
    alibi: $('alibi').checked,
    windowLeft: $('window-left').value.trim(),
    windowRight: $('window-right').value.trim(),
    softcap: $('softcap').value.trim(),
    model: $('model').value,
    weightsMode: weightsMode(),
  };
}

export function applyExample(name) {
  const ex = EXAMPLES[name];
  $('tokens').value = ex.tokens;
  $('key-tokens').value = ex.keyTokens || '';
  $('key-tokens-field').hidden = !ex.keyTokens;
  $('tokens-label').textContent = ex.keyTokens ? 'Query tokens (target)' : 'Tokens';
  $('tokens').rows = name.startsWith('long') ? 5 : 2;
  $('embed-dim').value = String(ex.E);
  $('heads').value = String(ex.H);
  $('mask').value = ex.mask;
  $('scale').value = '';
  $('seed').value = String(ex.seed);
  updateFormFields();
}

// The form for a served model with a vocabulary (models.js): its example
// input, no key tokens, the vocabulary named in the label.
export function applyModelInput(info) {
  $('tokens').value = modelExample(info);
  $('key-tokens').value = '';
  $('key-tokens-field').hidden = true;
  $('tokens-label').textContent = `Input (${info.name}'s tokens: ${info.config.vocab.join(' ')})`;
  $('tokens').rows = 2;
  showModelWidths(info);
}

// The mask a served model applies when the request names none, as the
// Mask control's value: its metadata's defaults (attn_mask, or is_causal
// with causal_alignment) -> 'causal', 'causal_lower_right' or 'none'.
export function modelMask(info) {
  const d = (info.meta.parameters || {}).defaults || {};
  if (d.attn_mask === 'causal' || d.attn_mask === 'causal_lower_right') return d.attn_mask;
  if (d.is_causal === true) return d.causal_alignment === 'lower_right' ? 'causal_lower_right' : 'causal';
  return 'none';
}

// A served model's own E, H and mask in the fields (not the last
// example's).
export function showModelWidths(info) {
  showChoice('embed-dim', info.E);
  showChoice('heads', info.H);
  $('mask').value = modelMask(info);
  updateFormFields();
}

// Select `value` in the select `id`, adding it as a choice when missing.
function showChoice(id, value) {
  if (!value) return;
  const sel = $(id), v = String(value);
  if (![...sel.options].some((o) => o.value === v)) sel.add(new Option(v, v));
  sel.value = v;
}

// The KV-head choices for H heads: H itself (value '', sent as nothing),
// then every smaller divisor, down to 1 (multi-query). A choice that still
// divides H is kept.
function fillKvHeads() {
  const sel = $('kv-heads'), H = Number($('heads').value), was = sel.value;
  sel.textContent = '';
  sel.add(new Option(`${H} (= H)`, ''));
  for (let k = H - 1; k >= 1; k--) {
    if (H % k === 0) sel.add(new Option(k === 1 ? '1 (multi-query)' : String(k), String(k)));
  }
  sel.value = was && H % Number(was) === 0 && Number(was) < H ? was : '';
}

// Everything in the form that depends on other fields: the KV-head choices,
// the head dimension d as the rotary dims' default, and which optional
// fields show.
export function updateFormFields() {
  fillKvHeads();
  $('rope-dim').placeholder = `d = ${Number($('embed-dim').value) / Number($('heads').value)}`;
  $('rope-fields').hidden = $('rope').value === 'off';
  $('pad-k-field').style.visibility = $('mask').value === 'padding' ? 'visible' : 'hidden';
  const mode = $('weights-mode').value;
  $('weights-param-field').style.visibility = mode === 'pool' || mode === 'topk' ? 'visible' : 'hidden';
  $('weights-param-label').textContent = mode === 'topk' ? 'k' : 'p';
  // A served model brings its own widths, heads, weights and variants.
  const model = $('model').value !== '';
  for (const id of ['embed-dim', 'heads', 'seed', 'scale']) $(id).disabled = model;
  $('variants').disabled = model;
}
