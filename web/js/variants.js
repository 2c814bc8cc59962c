// The attention variants (docs/variants.md) as /attention
// request fields, from the sidebar's form: grouped KV heads, rotary
// positions, the query position offset, ALiBi, a sliding window and
// soft-capping. A field is sent only when its control is set; the server
// judges the values (and names the field when one is wrong).
//
//   Object.assign(req, variantFields(form));   // throws RangeError on text that is not a number
//   variantSummary(req)                        // 'Hkv = 2, RoPE half, window [3, 0]', '' for none
//
// No DOM.

// `text` from a number input as a number; '' is "not set" (undefined).
export function numberFrom(text, what) {
  if (text === '') return undefined;
  const v = Number(text);
  if (!Number.isFinite(v)) throw new RangeError(`${what} "${text}" is not a number.`);
  return v;
}

// The variant fields for form {H, hkv (0 = H), rope ('off', 'half',
// 'interleaved'), ropeTheta, ropeDim, offset, alibi (boolean), windowLeft,
// windowRight, softcap (text, '' = not set)}.
export function variantFields(form) {
  const f = {};
  if (form.hkv && form.hkv !== form.H) f.num_kv_heads = form.hkv;
  if (form.rope !== 'off') {
    f.rope = { style: form.rope };
    const theta = numberFrom(form.ropeTheta, 'RoPE theta');
    const dims = numberFrom(form.ropeDim, 'Rotary dims');
    if (theta !== undefined) f.rope.theta = theta;
    if (dims !== undefined) f.rope.rotary_dim = dims;
  }
  const offset = numberFrom(form.offset, 'Query position offset');
  if (offset !== undefined) f.query_position_offset = offset;
  if (form.alibi) f.alibi = true;
  // One side left empty is unlimited (-1), as the API writes it.
  const left = numberFrom(form.windowLeft, 'Window left');
  const right = numberFrom(form.windowRight, 'Window right');
  if (left !== undefined || right !== undefined) f.window = [left ?? -1, right ?? -1];
  const cap = numberFrom(form.softcap, 'Soft-cap');
  if (cap !== undefined) f.softcap = cap;
  return f;
}

// The variants a request asks for, in words, for the title of its drawing.
export function variantSummary(req) {
  const parts = [];
  if (req.attn_mask === 'causal_lower_right') parts.push('causal lower-right');
  if (req.num_kv_heads !== undefined) parts.push(`Hkv = ${req.num_kv_heads}`);
  if (req.rope) {
    parts.push(`RoPE ${req.rope.style}` + (req.rope.theta !== undefined ? ` θ = ${req.rope.theta}` : '') +
               (req.rope.rotary_dim !== undefined ? `, ${req.rope.rotary_dim} dims` : ''));
  }
  if (req.query_position_offset !== undefined) parts.push(`offset ${req.query_position_offset}`);
  if (req.alibi) parts.push('ALiBi');
  if (req.window) parts.push(`window [${req.window.join(', ')}]`);
  if (req.softcap !== undefined) parts.push(`soft-cap ${req.softcap}`);
  return parts.join(', ');
}
