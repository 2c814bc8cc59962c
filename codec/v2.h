/* v2.h -- the Open Inference Protocol (KServe v2) infer request and
 * answer for the attention models, without HTTP: JSON tensors (nested or
 * flat "data", row-major) and Triton's binary tensor data extension.
 *
 *     struct v2_request r;
 *     struct failure e;
 *     if (v2_decode_infer(&r, body, len, header_len, model, &lim, &e) == 0) {
 *         ... att_forward_checked(out, w, &r.c.p, ...) ...
 *         struct stream *st = v2_stream_new(&r, "bert", out, w);
 *         ... stream_size(st), stream_text_len(st), stream_read(...) ...
 *     }
 *     v2_request_deinit(&r);   (always)
 *
 * Inputs (names, datatypes, shapes):
 *   query  FP32 [L, E] or [N, L, E] (required); key, value FP32, same rank
 *   (optional: cross-attention); attn_mask BOOL or FP32, [L, S] or
 *   [N·H, L, S]; key_padding_mask BOOL [S] or [N, S]. A batch of
 *   sequences: sequence_id UINT64 or BYTES [B] (codec/v2_sequence.h),
 *   sequence_start and sequence_end BOOL [B] (optional), instead of the
 *   parameters of those names.
 *   With the built-in model (model == NULL, name "attention") also the
 *   weight tensors, FP32, named as in POST /attention: in_proj_weight,
 *   q_proj_weight, k_proj_weight, v_proj_weight, in_proj_bias,
 *   out_proj_weight, out_proj_bias.
 * Request parameters: need_weights, average_attn_weights, is_causal
 *   (booleans), causal_alignment ("upper_left" or "lower_right", with
 *   is_causal), the variants (codec/variants.h: num_kv_heads, head_dim,
 *   rope as JSON text or rope_style / rope_theta / rope_rotary_dim,
 *   query_position_offset, alibi, alibi_slopes as JSON text, window_left,
 *   window_right, softcap), scale (number > 0), positional_encoding (sinusoidal),
 *   num_heads (integer; required for the built-in model; with a server-held
 *   model optional and, if given, equal to the model's), binary_data_output
 *   (boolean), the sequence's (sequence_id, sequence_start, sequence_end,
 *   layer, kv_cache_dtype: codec/sequence.h). Any other name is refused, naming the nearest known one
 *   (suggest.h), at the request's, an input's and an output's level, but
 *   for the names the protocols reserve (codec/v2_params.c: Triton's
 *   priority, timeout, headers, triton_*, MLServer's content_type: ignored;
 *   an output's classification only with its "off" value; shared_memory_*
 *   refused). The request's
 *   "model_name" (KServe's client) must be the model's.
 *   The names are the options table's (options/options.h). A server-held
 *   model's "defaults" (model.h) fill what a request does not set, member
 *   by member (codec_values_defaults, the rule POST /attention follows
 *   too; attn_mask causal there means is_causal, causal_lower_right
 *   is_causal with causal_alignment "lower_right").
 * Outputs: "output" FP32 (shape of query), "attention_weights" FP32
 *   (N, H, L, S), or (N, L, S) averaged, without N when query has rank 2.
 *   With the parameter weights_top_k (integer >= 1) instead
 *   "attention_weights_top_k_values" FP32 and "..._indices" INT32, both
 *   (N, H, L, min(k, S)); with weights_pool, "attention_weights_pooled"
 *   FP32 (N, H, ⌈L/p⌉, ⌈S/p⌉) (codec/reduce.h: codec_weights_reduce); the full
 *   weights are then never made, nor may be asked for. A batch of
 *   sequences also answers "cache_length" INT64 [B] (named in "outputs"
 *   or not); one sequence's step answers "parameters": {"cache_length"}.
 *   "outputs" given: only those, in that order (unknown or duplicate names,
 *   or a weights output the parameters do not make, are 400); attention
 *   weights not asked for are not computed.
 *   An output is binary when its "parameters": {"binary_data": true}, or
 *   else when the request's binary_data_output is true.
 *
 * Binary inputs: header_len >= 0 is Inference-Header-Content-Length: the
 * JSON is body[0, header_len), and each input with "parameters":
 * {"binary_data_size": n} takes the next n bytes after it, in the order of
 * "inputs" (little-endian, row-major; BOOL one byte 0/1). Every byte must
 * be used. header_len -1: the whole body is JSON (bytes after it: refused
 * naming the header and the length it should say).
 *
 * Decoding memory. Each input's JSON "data" (flat or nested; FP32 numbers,
 * "-inf" in a float attn_mask, BOOL true/false) is read straight into its
 * floats or bytes by jsonnum_parse_array_opt() (v2_scan.c), and jansson
 * reads the rest of the JSON part with each such array replaced by one
 * placeholder: no node per number. Decoding then holds at most 3x the body
 * beyond the body (the floats take 4 bytes per number of at least 2
 * bytes of text, "0,"; measured: 2.0x for 8 MB of "0," flat or nested,
 * 0.4x for 12-byte decimals, 1.1x for a true/false mask; jansson's DOM
 * took 22x, 3.7x, 7x; tests/codec/test_v2_fast.c). An array the fast reader
 * stops in goes to jansson as before, which says what is wrong; in a JSON
 * part above CODEC_FAST_ERRORS_FROM bytes only when it is at most
 * SCAN_SMALL bytes: a larger one is refused with the fast reader's message
 * (naming the input, the problem, line and column) when the schema reaches
 * that input, and invalid JSON anywhere in the body comes first. A large
 * value the schema ignores (an unknown field's or parameter's, an input
 * refused before its data is read) is replaced too, its syntax checked:
 * 0.05x for 8 MB of "0," there. Not bounded yet: the data of an input
 * whose name is written with an escape, large values of known fields
 * ("id", "shape", "outputs", ...) still go to jansson whole.
 *
 * Every refusal is a struct failure (400-class with a message naming the input
 * and the problem; 413 for a limit), mapped to {"error": msg} by the
 * caller. Same limits as POST /attention (struct codec_limits), and
 * att_check() is run once, here, whose sizes r.c carries.
 */
#ifndef CODEC_V2_H
#define CODEC_V2_H

#include <stddef.h>

#include "model/model.h"
#include "codec/codec.h"

enum v2_output {
    V2_OUT_OUTPUT = 0,
    V2_OUT_WEIGHTS,       /* attention_weights, full */
    V2_OUT_TOPK_VALUES,   /* attention_weights_top_k_values (weights_top_k) */
    V2_OUT_TOPK_INDICES,  /* attention_weights_top_k_indices, INT32 */
    V2_OUT_POOLED,        /* attention_weights_pooled (weights_pool) */
    V2_OUT_CACHE_LENGTH,  /* cache_length, INT64 [B]: a batch of sequences */
    V2_OUT_COUNT
};

/* The name of output k ("output", "attention_weights", ...): the one list. */
const char *v2_output_name(enum v2_output k);

struct v2_request {
    struct codec_request c; /* p (checked), out_len, weights_len, batched, arena */
    char *id;               /* the request's "id" (owned), or NULL */
    int n_outputs;          /* outputs to answer, in order */
    int outputs[V2_OUT_COUNT]; /* enum v2_output */
    int binary[V2_OUT_COUNT];  /* per enum v2_output: answer it as binary data */
};

/* Decode an infer request for model m (NULL: the built-in "attention").
 * Returns 0, or -1 with err filled. r must be deinit'ed either way. */
int v2_decode_infer(struct v2_request *r, const char *body, size_t len, long long header_len,
                    const struct model *m, const struct codec_limits *lim,
                    struct failure *err);
/* v2_decode_infer() with the X-Sequence-Id header (NULL: none); a step of
 * r->c.seq.n sequences when that is not 0 (codec.h). */
int v2_decode_infer_seq(struct v2_request *r, const char *body, size_t len,
                        long long header_len, const struct model *m,
                        const struct codec_limits *lim, const char *sequence_header,
                        struct failure *err);
void v2_request_deinit(struct v2_request *r);

/* The 200 answer: {"model_name", "model_version": "1", "id"?, "outputs": [...]}
 * with JSON data (flat, row-major, shortest round-trip floats) or, for a
 * binary output, "parameters": {"binary_data_size": n} and its bytes after
 * the JSON, in the order of the outputs. The JSON part is written now; the
 * binary data is copied out of out and weights as it is read (never one
 * buffer): the stream of both protocols (codec/stream.h), its text the JSON
 * part (stream_text_len: Inference-Header-Content-Length), one piece per
 * binary output (stream_pieces > 0: a binary answer). Takes ownership of
 * out and weights (malloc'd; freed by stream_free, also on failure). NULL
 * when out of memory. */
struct stream *v2_stream_new(const struct v2_request *r, const char *model_name, float *out,
                             float *weights);

#endif
