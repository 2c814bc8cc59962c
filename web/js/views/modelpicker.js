// The served-model picker: a <select> filled from GET /v2/models, the
// chosen model's metadata (GET /v2/models/{m}: platform, format, heads,
// widths, dtype, defaults; from its config.json: the task, the vocabulary,
// the pattern it learned), and the Example list's first entry, the first
// served model that ships a vocabulary and an embedding table (a trained
// model to look at).
//
//   await initModelPicker(onPick)   // fills the list; onPick(name) when the user picks ('' = none)
//   modelOf(name)                   // the models.js info of a listed model (cached), or null
//   trainedModel()                  // the info of the Example list's trained model, or null

import { $ } from '../canvas.js';
import { listModels, modelInfo } from '../models.js';

const infos = new Map();
let trained = null;

export const modelOf = (name) => infos.get(name) || null;
export const trainedModel = () => trained;

// A row of the list: v a text, or an array of texts, one line each.
function row(dl, k, v) {
  const dt = document.createElement('dt');
  dt.textContent = k;
  const dd = document.createElement('dd');
  if (Array.isArray(v)) {
    for (const line of v) {
      const div = document.createElement('div');
      div.textContent = line;
      dd.append(div);
    }
  } else {
    dd.textContent = v;
  }
  dl.append(dt, dd);
}

// A default's value as it reads: true, 1, sinusoidal, [1, 2], and an
// object as its fields (rope: style half, theta 10000, rotary_dim 8).
const plain = (v) => (typeof v === 'string' ? v : Array.isArray(v) ? `[${v.map(plain).join(', ')}]`
                    : v !== null && typeof v === 'object' ? Object.entries(v).map(([k, x]) => `${k} ${plain(x)}`).join(', ')
                    : String(v));

// The chosen model's metadata in the sidebar (nothing for ''); `shown`,
// when given, first: which layer of a stack the maps show.
export function showModelMeta(name, shown) {
  const box = $('model-meta'), info = modelOf(name);
  box.textContent = '';
  box.hidden = !info;
  if (!info) return;
  const p = info.meta.parameters || {}, c = info.config;
  const dl = document.createElement('dl');
  if (shown) row(dl, 'shown', shown);
  row(dl, 'platform', `${info.meta.platform} · ${p.format} · ${p.dtype}`);
  row(dl, 'heads', `H = ${p.num_heads}, Hkv = ${p.num_kv_heads}, d = ${p.head_dim}`);
  row(dl, 'widths', `E = ${info.E}` + (info.kdim !== info.E || info.vdim !== info.E ? `, kdim = ${info.kdim}, vdim = ${info.vdim}` : ''));
  row(dl, 'inputs', info.meta.inputs.map((t) => `${t.name} ${t.datatype} [${t.shape.join(', ')}]`));
  row(dl, 'outputs', info.meta.outputs.map((t) => `${t.name} [${t.shape.join(', ')}]`));
  if (p.defaults && Object.keys(p.defaults).length) row(dl, 'defaults', Object.entries(p.defaults).map(([k, v]) => `${k}: ${plain(v)}`));
  if (c.task) row(dl, 'task', c.task);
  if (info.trained) row(dl, 'vocabulary', c.vocab.join(' '));
  if (c.pattern) row(dl, 'learned', `${c.pattern.kind} (heads ${(c.pattern.heads || []).join(', ')})` +
                                    (c.pattern.description ? `: ${c.pattern.description}` : ''));
  if (c.circuit) row(dl, 'circuit', ['previous_token', 'induction'].filter((k) => c.circuit[k]).map((k) => {
    const x = c.circuit[k];
    return `${k.replace('_', '-')} head: layer ${x.layer} head ${x.head} (mean weight ${x.mean_weight})`;
  }).join('; ') + (c.circuit.accuracy !== undefined ? `; accuracy ${c.circuit.accuracy}` : ''));
  row(dl, 'input', info.trained && c.positions ? 'the model\'s own embedding table and learned positions (config.json), added by the page'
                 : info.trained ? 'the model\'s own embedding table (config.json), positional encoding by the server'
                                : 'the page\'s token embeddings at the model\'s widths');
  box.append(dl);
}

export async function initModelPicker(onPick) {
  const sel = $('model');
  let names = [];
  try { names = await listModels(); } catch { names = []; }
  // A model still loading at start-up may not answer yet: a few tries.
  const tryInfo = async (n) => {
    for (let k = 0; k < 4; k++) {
      try { return await modelInfo(n); } catch { await new Promise((r) => setTimeout(r, 250 * (k + 1))); }
    }
    return null;
  };
  const got = await Promise.all(names.map(tryInfo));
  for (const info of got) {
    if (!info) continue;
    infos.set(info.name, info);
    sel.add(new Option(`${info.name} (H = ${info.H}, E = ${info.E})`, info.name));
    if (!trained && info.trained) trained = info;
  }
  $('model-count').textContent = `${infos.size} served`;
  if (trained) {
    // The name only, so it fits the sidebar; the task in the tooltip and the panel.
    const opt = new Option(`Trained: ${trained.name}`, 'trained');
    if (trained.config.task) opt.title = trained.config.task;
    $('example').insertBefore(opt, $('example').firstElementChild);
  }
  sel.addEventListener('change', () => { showModelMeta(sel.value); onPick(sel.value); });
}
