/* http_golden.h -- what the HTTP tests share about golden cases (a POST
 * /attention body under "request", PyTorch's answers under "expected"):
 * sending one through POST /attention in any tensor form and through v2
 * (JSON or binary tensors), and reading the answers back.
 *
 * v2_golden() writes the request as a v2 infer request with golden_v2()
 * (tests/support/golden_v2.h). */
#ifndef TESTS_HTTP_GOLDEN_H
#define TESTS_HTTP_GOLDEN_H

#include <jansson.h>
#include <stddef.h>

#include "tests/support/golden_v2.h"
#include "tests/support/http_util.h"

/* Flat floats of a response tensor, nested arrays or {"b64"}; caller frees. */
float *flatten(json_t *t, size_t *n);
/* Standard base64 of nb bytes; caller frees. */
char *b64_encode(const unsigned char *bytes, size_t nb);
/* A flat {shape, data} tensor as nested arrays (form 1) or base64 (form 3). */
json_t *reform(json_t *t, int form);
/* POST /attention the golden case at path with its tensors in form (1
 * nested, 2 {shape, data}, 3 base64), the answer in base64 or JSON;
 * 1 when it matches PyTorch within the tolerance of docs/numerics.md. */
int check_golden(int port, const char *path, int form, int base64_out);

/* A v2 error: status, {"error": "<message containing text>"} and nothing else. */
void expect_v2_error(const struct http_reply *a, long status, const char *text);
/* POST /v2/models/{model}/infer; hlen >= 0: Inference-Header-Content-Length. */
struct http_reply infer(int port, const char *model, const char *body, size_t len,
                    long long hlen);
/* GET path: asserts 200 and a JSON body; the body, parsed (the caller decrefs). */
json_t *http_get_json(int port, const char *path);
/* The JSON part of an infer answer. */
json_t *answer_head(const struct http_reply *a);
/* The floats of output name in an infer answer (JSON or binary); NULL if absent. */
float *output_of(const struct http_reply *a, const char *name, size_t *n, json_t **shape);
/* The numbers of a nested JSON array, in order, into out (at most max). */
void flatten_into(json_t *v, float *out, size_t *n, size_t max);
/* The golden case at path through v2 (model: a server-held one, or NULL =
 * the built-in model with the weights as inputs), JSON or binary; 1 when
 * it matches PyTorch. */
int v2_golden(int port, const char *path, const char *model, int binary);

#endif
