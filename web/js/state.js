// The page's one state object, and the read-only view the tests see.
//
// Every module reads `state` directly and changes it only through update(),
// which assigns the given top-level fields and then calls each subscriber
// with them and with what they were before, so a subscriber can tell what
// changed:
//
//   import { state, update, subscribe } from './state.js';
//   subscribe((changed, before) => { if ('view' in changed && before.view.head !== state.view.head) ... });
//   update({ view: { ...state.view, head: 2 } });   // nested objects: copy, never mutate
//
// What is derived from the state (offscreen images, head averages, the
// geometry of the last drawing) belongs to the module that computes it, and
// so does what only one view uses (the cell or token under the pointer).

export const state = {
  response: null,     // the decoded answer being drawn (tensor.js decodeResponse), or null
  title: '',          // what produced it: an example's title or "Your request"
  view: {             // what the user chose to look at
    batch: 0,
    head: 0,          // a head index or 'avg'
    threshold: 0,     // weights below it are drawn as zero
    rangeMode: 'head',  // colour range 'head' (0 … max of each map) or 'unit' (0 … 1)
    tab: 'heatmap',   // 'heatmap', 'headview', 'output' or 'compare'
  },
  compare: {          // the Compare tab: maps A and B (heads or 'avg'), B from 'same' or 'second' input
    a: 0,
    b: 1,
    input: 'same',
  },
  second: null,       // {response}: the second input's answer (Compare), or null
  stack: null,        // a stack of served layers (views/stepper.js): {names, layers (each layer's answer
                      // as response), layer (the one shown as response), n, P, tokens, predictions,
                      // note, sequenceIds}, or null
  lastRequest: null,  // {body, pasted}: the last body sent, and whether the user typed it
  lastExchange: null, // {endpoint, request, response}: the texts of the last successful run (Export JSON)
  runSeq: 0,          // number of the latest run; an older run's answer is dropped
  busy: false,        // a run is under way
  runCount: 0,        // finished runs, successful or not
  lastTiming: null,   // {build, fetch, decode, render, total, serverTiming, bytes} of the last success
  lastError: null,    // {status, code, message} of the last run, or null
};

const subscribers = [];

export function subscribe(fn) {
  subscribers.push(fn);
}

export function update(changed) {
  const before = {};
  for (const key of Object.keys(changed)) before[key] = state[key];
  Object.assign(state, changed);
  for (const fn of subscribers) fn(changed, before);
}

// A read-only view of `obj` (the state for window.attn): reading works as on
// the object itself, nested objects are read-only views too, typed arrays are
// handed out as copies, and any assignment, deletion or definition throws.
const views = new WeakMap();

function refuse(_, key) {
  throw new TypeError(`the state is read-only (tried to change "${String(key)}")`);
}

export function readOnlyView(obj) {
  let v = views.get(obj);
  if (!v) {
    v = new Proxy(obj, {
      get(target, key) {
        const x = Reflect.get(target, key);
        if (ArrayBuffer.isView(x)) return x.slice();
        return x !== null && typeof x === 'object' ? readOnlyView(x) : x;
      },
      set: refuse,
      deleteProperty: refuse,
      defineProperty: refuse,
      setPrototypeOf: refuse,
      preventExtensions: refuse,
    });
    views.set(obj, v);
  }
  return v;
}
