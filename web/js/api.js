// The client of POST /attention: builds a request, sends it, and hands back
// either the decoded answer or an error, never both. No DOM.
//
//   const req = requestFromForm(form);          // or requestFromText(pasted)
//   if (req.error) ...;
//   const res = await postAttention(req);
//   if (res.aborted) ...;                       // a newer request replaced it
//   else if (res.error) ...;                    // {status, code, message}
//   else ...;                                   // res.response, res.timing
//
// An error is {status, code, message}: status is the HTTP status (0 when
// the request never got an answer) and code the server's slug ('' if none).

import { EXAMPLES, buildExampleRequest } from './examples.js';
import { decodeResponse } from './tensor.js';
import { variantSummary } from './variants.js';

// What a request asks for instead of the full weights: {pool: p}, {topK: k} or null.
const reduceOf = (req) => (Number.isInteger(req.weights_pool) ? { pool: req.weights_pool }
                         : Number.isInteger(req.weights_top_k) ? { topK: req.weights_top_k } : null);

const fail = (message, status = 0, code = '') => ({ error: { status, code, message } });

// A request for the sidebar's form (examples.js buildExampleRequest):
// {body, askedAverage, title, pasted: false} or {error}.
export function requestFromForm(form) {
  try {
    const req = buildExampleRequest(form);
    const variants = variantSummary(req);
    return { body: JSON.stringify(req), askedAverage: false, pasted: false, reduce: reduceOf(req),
             title: EXAMPLES[form.example].title + (variants ? ` · ${variants}` : '') };
  } catch (e) {
    return fail(e.message);
  }
}

// A request the user pasted or uploaded: sent exactly as typed, since
// parsing and writing it again would, among other things, merge duplicate
// keys that the server rejects. It is parsed here only to learn whether it
// asks for averaged weights; the server judges everything else.
export function requestFromText(text) {
  if (!text.trim()) return fail('Paste a request JSON into the box (or upload a file) first.');
  let parsed;
  try { parsed = JSON.parse(text); } catch { parsed = undefined; }
  const obj = !!parsed && typeof parsed === 'object';
  const askedAverage = obj && parsed.average_attn_weights === true;
  return { body: text, askedAverage, title: 'Your request', pasted: true, reduce: obj ? reduceOf(parsed) : null };
}

// The request in flight per slot ('main', or 'second' for Compare's second
// input); sending another in the same slot aborts it.
const inflight = {};

// fetch(url, init) as the one request in flight of `slot` (a newer one in
// the same slot aborts it), its body read as `read` ('text' or
// 'arrayBuffer'): {res, body}, {aborted: true} or {error}.
export async function fetchInSlot(slot, url, init, read) {
  if (inflight[slot]) inflight[slot].abort();
  const controller = new AbortController();
  inflight[slot] = controller;
  try {
    const res = await fetch(url, { ...init, signal: controller.signal });
    return { res, body: await res[read]() };
  } catch (e) {
    if (controller.signal.aborted) return { aborted: true };
    return fail(`Could not reach the attention service: ${e.message}`);
  } finally {
    if (inflight[slot] === controller) inflight[slot] = null;
  }
}

// Sends req.body and decodes the answer: {response, text (the body as
// received), bytes, serverTiming, timing: {fetch, decode} in ms}, {error}
// or {aborted: true}.
export async function postAttention(req, slot = 'main') {
  const t0 = performance.now();
  const sent = await fetchInSlot(slot, 'attention', { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                                      body: req.body }, 'text');
  if (sent.aborted || sent.error) return sent;
  const { res, body: text } = sent;
  const t1 = performance.now();
  let json = null;
  try { json = JSON.parse(text); } catch { /* reported below */ }
  if (!res.ok) {
    const err = json && json.error;
    if (err && typeof err.message === 'string') return fail(err.message, res.status, err.code);
    return fail(`${res.statusText || 'request failed'}: ${text.slice(0, 300)}`, res.status);
  }
  let response;
  try {
    if (!json) throw new Error('the body is not JSON');
    response = decodeResponse(json, req.askedAverage, req.reduce);
  } catch (e) {
    return fail(`Could not read the service's answer: ${e.message}`);
  }
  return { response, text, bytes: text.length, serverTiming: res.headers.get('Server-Timing') || '',
           timing: { fetch: t1 - t0, decode: performance.now() - t1 } };
}
