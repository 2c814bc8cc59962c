// The model's answer in words, under the maps: for a served model whose
// config.json has a vocabulary and an unembedding (readout.js), the token
// each position of the Output decodes to, and, when the config says what
// the right answer is, whether each one is right. Hidden for anything else
// (the untrained examples, your own request, one layer of a stack).
//
//   renderAnswer()   // after each response (and batch change)
//   answerOf()       // {model, tokens, expected, right, what, bias} of the drawn answer, or null

import { state } from '../state.js';
import { $ } from '../canvas.js';
import { modelOf } from './modelpicker.js';
import { answerWhat, canRead, expected, predict } from '../readout.js';

// The answer of the current response and batch item, or null.
export function answerOf() {
  const r = state.response;
  const info = r && r.json && r.json.model ? modelOf(r.json.model) : null;
  // A layer of a stack (config.next_layer) answers only through the whole
  // stack, its residual added: not from its own Output.
  if (!info || !canRead(info.config) || info.config.next_layer) return null;
  const E = r.outputShape[r.outputShape.length - 1], rows = r.outputShape[r.outputShape.length - 2];
  if (E !== info.config.unembedding[0].length || rows !== r.L) return null;
  const b = r.outputShape.length === 3 ? state.view.batch : 0;
  const words = predict(info.config, r.output.subarray(b * rows * E, (b + 1) * rows * E));
  const want = expected(info.config, r.tokens);
  return { model: info.name, tokens: words, expected: want, what: answerWhat(info.config),
           bias: Boolean(info.config.unembedding_bias),
           right: want ? words.map((t, i) => (want[i] === null ? null : t === want[i])) : null };
}

export function renderAnswer() {
  const box = $('answer'), a = answerOf();
  box.hidden = !a;
  if (!a) return;
  const line = $('answer-tokens');
  line.textContent = '';
  a.tokens.forEach((t, i) => {
    const s = document.createElement('span');
    s.className = `answer-token${a.right && a.right[i] !== null ? (a.right[i] ? ' right' : ' wrong') : ''}`;
    s.dataset.testid = 'answer-token';
    s.textContent = t;
    if (a.right && a.right[i] === false) s.title = `expected ${a.expected[i]}`;
    line.append(s);
  });
  const known = a.right ? a.right.filter((x) => x !== null) : [];
  const ok = known.filter(Boolean).length;
  $('answer-verdict').textContent = !a.right ? ''
    : ok === known.length ? `✓ right (${a.what})`
    : `✗ ${known.length - ok} of ${known.length} wrong; ${a.what}: ${a.expected.map((t) => t ?? '?').join(' ')}`;
  $('answer-verdict').className = `answer-verdict ${a.right && ok === known.length ? 'right' : 'wrong'}`;
  $('answer-how').textContent = `${a.model}'s unembedding${a.bias ? ' (+ bias)' : ''} applied to the Output: ` +
    'the most likely token at each position';
}
