/* sequence.h -- a step of a batch of sequences (one, in the scalar form)
 * at one layer, for both protocols: the rules that need each sequence's
 * state (what its start fixed, the layer's cache), then the steps on the
 * caches (core/kvcache.h) held by the store (api/sequence_store.h), all or
 * nothing, spread over the core's runner (att_parallel). What the request
 * alone decides is read before, by the codec (codec/sequence.h);
 * docs/sequences.md says what a client sees.
 *
 *     void *held;
 *     if (sequence_step(&r, model, model_id, &lim, hint, &out, &w, &held, &err) == 0)
 *         ... encode the answer (r.seq.item[b].length: each cache's length) ...
 *     ... the answer sent or given up ...
 *     sequence_sent(held);                     // the idle timers start
 */
#ifndef API_SEQUENCE_H
#define API_SEQUENCE_H

#include "codec/codec.h"
#include "lib/errors.h"

struct seq;

/* Run r's steps, item b on r->seq.item[b]'s sequence at r->seq.layer (r->p
 * holds the batch: N = r->seq.n): out (N, L, E) and w malloc'd, r's sizes,
 * S (the longest cache after the step: the weights are padded to it, zeros
 * past an item's own) and each item's length set; a sequence_end without
 * a step (r->seq.end_only) ends every item's. A refusal names the item
 * (sequence_id[b] 'id') in the array form, and changes no sequence: a
 * step that fails after others were applied rolls them back. model: the
 * model's name; model_id: the loaded model (NULL: the built-in one, whose
 * weights the start keeps); weights_hint: the protocol's words for the
 * weights limit. The whole request is checked, and the step's rows
 * projected and checked against the cache's dtype, before the store may
 * evict anyone. 0 and *held (the sequences, busy until sequence_sent: the
 * answer is to be sent), or -1 with err (every sequence as before, its
 * idle timer too). */
int sequence_step(struct codec_request *r, const char *model, const void *model_id,
                  const struct codec_limits *lim, const char *weights_hint, float **out,
                  float **w, void **held, struct failure *err);

/* The answer of a step sequence_step() held was sent or given up (NULL:
 * nothing); a void * for struct route_response's done. */
void sequence_sent(void *held);

#endif
