/* golden_v2.h -- the one converter of a golden request (a POST /attention
 * body with its tensors as flat {shape, data}, as tests/golden/,
 * tests/golden_variants/ and tests/models/golden/ hold them) into a KServe
 * v2 infer request, for the codec tests, the HTTP tests and the
 * old-vs-new differential (tests/differential.c). No Criterion, no libcurl:
 * jansson only.
 *
 * The request's tensors become inputs (query, key, value, attn_mask,
 * key_padding_mask, then the weights in the request's order), BOOL when
 * their data holds booleans, else FP32; attn_mask "causal" becomes the
 * parameter is_causal, "causal_lower_right" is_causal with
 * causal_alignment "lower_right"; the options become parameters of the same
 * names, except rope and alibi_slopes (JSON text) and window (window_left,
 * window_right). Members v2 has no place for ("model": the URL names it)
 * are left out. */
#ifndef TESTS_GOLDEN_V2_H
#define TESTS_GOLDEN_V2_H

#include <jansson.h>
#include <stddef.h>

enum {
    GOLDEN_V2_NESTED = 1, /* data as nested arrays of the input's shape (else flat) */
    GOLDEN_V2_HELD = 2,   /* a server-held model holds the weights and num_heads:
                             neither is sent */
};

/* The v2 request (a new reference) for golden request req; flags above. */
json_t *golden_v2(json_t *req, int flags);

enum golden_v2_data {
    GOLDEN_V2_JSON,   /* every input's data in the JSON */
    GOLDEN_V2_BINARY, /* every input's data binary, after the JSON */
    GOLDEN_V2_MIXED,  /* binary but for key and attn_mask, which stay JSON */
};

/* The body of v2 (as golden_v2 wrote it, flat) with its data as asked:
 * malloc'd, its length in *len, and in *hlen the length of the JSON part
 * when there is binary data (the Inference-Header-Content-Length), else -1. */
char *golden_v2_body(json_t *v2, enum golden_v2_data data, size_t *len, long long *hlen);

/* Flat floats of a golden tensor's data (numbers, or "-inf"); caller frees. */
float *floats_of(json_t *data, size_t *n);

#endif
