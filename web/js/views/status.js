// The run's status: the line in the top bar, the error box, the Run
// buttons (disabled while a run is under way) and <body data-state>
// ('loading', 'error' or 'ready', for styling and tests).

import { state } from '../state.js';
import { $ } from '../canvas.js';

const size = (bytes) => (bytes >= 1 << 20 ? `${(bytes / (1 << 20)).toFixed(1)} MB` : `${(bytes / 1024).toFixed(0)} KB`);

export function renderStatus() {
  const { busy, lastError: err, lastTiming: t } = state;
  $('run').disabled = busy;
  $('run-json').disabled = busy;
  document.body.dataset.state = busy ? 'loading' : err ? 'error' : 'ready';
  $('status').textContent = busy ? 'computing…' : err ? err.code || 'error'
                          : t ? `${Math.round(t.total)} ms · ${size(t.bytes)}` : '';
  const box = $('error');
  box.textContent = '';
  box.hidden = !err;
  if (!err) return;
  const strong = document.createElement('strong');
  strong.textContent = err.status ? `Error ${err.status}${err.code ? ` (${err.code})` : ''}: ` : 'Error: ';
  const span = document.createElement('span');
  span.id = 'error-message';
  span.textContent = err.message;
  box.append(strong, span);
}
