// The sidebar's example form: filled in from a built-in example, read back
// as the form examples.js builds a request from.

import { $ } from '../canvas.js';
import { EXAMPLES } from '../examples.js';

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
  };
}

export function applyExample(name) {
  const ex = EXAMPLES[name];
  $('tokens').value = ex.tokens;
  $('key-tokens').value = ex.keyTokens || '';
  $('key-tokens-field').hidden = !ex.keyTokens;
  $('tokens-label').textContent = ex.keyTokens ? 'Query tokens (target)' : 'Tokens';
  $('tokens').rows = name === 'long' ? 5 : 2;
  $('embed-dim').value = String(ex.E);
  $('heads').value = String(ex.H);
  $('mask').value = ex.mask;
  $('scale').value = '';
  $('seed').value = String(ex.seed);
  updateMaskFields();
}

export function updateMaskFields() {
  $('pad-k-field').style.visibility = $('mask').value === 'padding' ? 'visible' : 'hidden';
}
