/* codec.h -- the JSON protocol of POST /attention: request in, answer out.
 *
 * The codec/ layer (the rule: scripts/layers.sh) owns the two protocols'
 * bodies: this header (POST /attention), v2.h (v2 infer), tensors
 * (tensor.h), the fast decoder (scan.h, scan_json.h) and the one stream
 * encoder (stream.h); both read the request options table
 * (options/options.h). It includes codec/, model/ (never the registry),
 * options/, core/ and lib/: a server-held model comes in through struct
 * codec_models, lent by the api.
 *
 * codec_decode_request() turns a request body into a struct att_params whose
 * arrays the request owns, after checking every field, every tensor
 * (tensor.h: three forms, one check) and every limit, and att_check() once,
 * whose sizes it carries (out_len, weights_len) so nobody checks again.
 * codec_encode_response() writes the answer, or codec_stream_new() writes it
 * as it is sent. Errors come back as a struct failure (lib/errors.h).
 *
 *     struct codec_request r;
 *     struct failure e;
 *     if (codec_decode_request(&r, body, len, &limits, &e) == 0) {
 *         ... att_forward_checked(out, weights, &r.p, ...) ...
 *         char *json = codec_encode_response(&r, out, weights, &json_len);
 *     }
 *     codec_request_deinit(&r);   (always, success or not)
 *
 * Two decoders. The fast decoder (scan.h) reads the structure itself and
 * the tensors straight into floats. For a body of at most
 * CODEC_FAST_ERRORS_FROM bytes, anything it does not handle cleanly, and
 * every error, sends the whole body to the second one: jansson with
 * JSON_REJECT_DUPLICATES, which is the reference for what is accepted and
 * for those error messages. A larger body never goes to jansson whole (its
 * DOM costs 20-30x the body): the fast decoder gives the answer, the same
 * status and slug, and a message naming the field and the problem (the
 * reference's own when the value at fault is small). Decoding then holds
 * at most 3x the body size beyond the body itself (docs/api.md, "Request").
 * r.path says which decoder answered. Call it on a thread with >= 1 MiB of
 * stack (jansson recurses up to its 2048-deep limit).
 *
 * A server-held model ("model": name) gives the weights (then "weights" is
 * refused), num_heads (optional then; if given it must agree), num_kv_heads
 * and head_dim (the same: its weights have those shapes) and its
 * "defaults" for the options the request does not set. The codec does not
 * know the registry: the caller lends it the models through struct
 * codec_models (the API's, api/models.h), whose refusals (404 not_found,
 * 503 model_not_ready) are the answer. The name of the built-in model,
 * "attention" (MODEL_BUILTIN), means the weights are in the request.
 *
 * Labels: tokens must have exactly L entries and key_tokens exactly S
 * (the same labels serve every batch item).
 *
 * Numbers. A tensor value is any JSON number that fits float32; jansson
 * refuses integers beyond long long and numbers beyond double, so the
 * reference loads such a body again with stand-ins for them
 * (jsonnum_standin). Integer fields (num_heads, shape) take integers: 2.0
 * is refused, an integral value beyond 2^63 is too large. A float attn_mask
 * may hold -inf, as "-inf" or "-Infinity" or as its base64 bits; no other
 * tensor may, and +inf and NaN are refused everywhere.
 *
 * The attention variants' fields (num_kv_heads, head_dim, rope,
 * query_position_offset, alibi, alibi_slopes, window, softcap) are checked
 * by codec/variants.c, which v2 shares; the weights' shapes follow from H,
 * num_kv_heads and head_dim there.
 *
 * This header holds the types the codec's files share (types and
 * constants only); each file's functions are in its own header:
 * codec/request.h (request.c: the request schema and limits), resolve.h
 * (the options both protocols share, resolved), response.h (the answer,
 * buffered or streamed through stream.c, the stream v2 sends too),
 * reduce.h (the reduced weights and the weights limit, shared with v2),
 * status.h (the core's statuses as errors), scan.h and scan_json.h (the
 * fast decoder), tensor.h (tensors). */
#ifndef CODEC_CODEC_H
#define CODEC_CODEC_H

#include <stddef.h>

#include "core/attention.h"
#include "lib/errors.h"
#include "codec/sequence.h"
#include "codec/stream.h"
#include "codec/tensor.h"

/* Bodies above this many bytes get their errors from the fast decoder. */
#define CODEC_FAST_ERRORS_FROM (64 * 1024)

struct codec_limits {
    long long max_tensor_elements;  /* per tensor */
    int max_batch, max_target_len, max_source_len, max_embed_dim, max_heads;
    long long max_weights_elements; /* N·H·L·S of the weights output */
    int max_layers;                 /* a sequence's layers: layer is 0..max_layers-1 */
};

enum codec_path {
    CODEC_PATH_NONE = 0,
    CODEC_PATH_FAST,    /* the fast decoder read the whole request, or refused
                           a body above CODEC_FAST_ERRORS_FROM */
    CODEC_PATH_JANSSON, /* the reference did (every refusal of a small body) */
};

struct codec_request {
    struct att_params p;  /* checked by att_check(); arrays in arena */
    size_t out_len;       /* floats of the output (att_check) */
    size_t weights_len;   /* floats of the attention weights, 0 if none */
    int batched;          /* query had rank 3 */
    int base64_out;       /* output_encoding "base64" */
    char *tokens_json;    /* compact JSON of tokens, or NULL (owned) */
    char *key_tokens_json;
    enum codec_path path; /* which decoder read it */
    const struct codec_models *models; /* the lender of model_ref, or NULL */
    void *model_ref;      /* "model": the reference models->acquire gave, held until
                             deinit (opaque here; a struct repo_ref * from the API), or NULL */
    struct codec_sequence seq; /* a step of seq.n sequences when seq.n (then p is this
                                  step's request, N = seq.n: att_step_check, not
                                  att_check, is the caller's, and out_len/weights_len
                                  are 0) */
    struct tensor_arena arena;
};

/* The server-held models, lent by the caller (the codec never calls the
 * registry). acquire(ctx, name, ...) gives 0 with *m (NULL for the
 * built-in model: the weights are in the request) and *ref, which the
 * request holds until codec_request_deinit() gives it to release(ctx,
 * ref); or -1 with err filled: that refusal is the answer, as is. */
struct model;
struct codec_models {
    int (*acquire)(void *ctx, const char *name, const struct model **m, void **ref,
                   struct failure *err);
    void (*release)(void *ctx, void *ref);
    void *ctx;
};

#endif
