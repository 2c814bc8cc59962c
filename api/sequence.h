/* sequence.h -- a step of a sequence, for both protocols: the rules that
 * need the sequence's state (what its start fixed, its cache), then the
 * step on the cache (core/kvcache.h) held by the store
 * (api/sequence_store.h). What the request alone decides is read before,
 * by the codec (codec/sequence.h); docs/sequences.md says what a client
 * sees.
 *
 *     struct seq *held;
 *     if (sequence_step(&r, model, model_id, &lim, hint, &out, &w, &held, &err) == 0)
 *         ... encode the answer (r.seq.length: the cache's length) ...
 *     ... the answer sent or given up ...
 *     sequence_sent(held);                     // the idle timer starts
 */
#ifndef API_SEQUENCE_H
#define API_SEQUENCE_H

#include "codec/codec.h"
#include "lib/errors.h"

struct seq;

/* Run r's step on its sequence (r->seq.id set): out and w malloc'd, r's
 * sizes, S (the whole cache, for the answer) and seq.length set; a
 * sequence_end without a step (r->seq.end_only) ends it. model: the
 * model's name; model_id: the loaded model (NULL: the built-in one, whose
 * weights the start keeps); weights_hint: the protocol's words for the
 * weights limit. The whole request is checked, and the step's rows
 * projected and checked against the cache's dtype, before the store may
 * evict anyone. 0 and *held (the sequence, busy until sequence_sent: the
 * answer is to be sent), or -1 with err (the sequence as before, its idle
 * timer too). */
int sequence_step(struct codec_request *r, const char *model, const void *model_id,
                  const struct codec_limits *lim, const char *weights_hint, float **out,
                  float **w, void **held, struct failure *err);

/* The answer of a step sequence_step() held was sent or given up (NULL:
 * nothing); a void * for struct route_response's done. */
void sequence_sent(void *held);

#endif
