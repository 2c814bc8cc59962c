// The run's status: the line in the top bar, the error box, the Run
// buttons (disabled while a run is under way) and <body data-state>
// ('loading', 'error' or 'ready', for styling and tests).

import { state } from '../state.js';
import { $ } from '../canvas.js';

// Bytes as the server's log gives a model's size: B, KB, MB, GB (powers of 1000).
const size = (bytes) => (bytes < 1000 ? `${bytes} B` : bytes < 999.95e3 ? `${(bytes / 1e3).toFixed(1)} KB`
                              : bytes < 999.95e6 ? `${(bytes / 1e6).toFixed(1)} MB` : `${(bytes / 1e9).toFixed(2)} GB`);

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
