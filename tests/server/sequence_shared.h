/* sequence_shared.h -- what the test_sequence_*.c files share: random
 * tensors, requests and their answers as floats, the test repository. */
#ifndef TESTS_SEQUENCE_SHARED_H
#define TESTS_SEQUENCE_SHARED_H

#include <jansson.h>
#include <stddef.h>

#include "tests/support/http_util.h"

extern unsigned seqt_seed;

float seqt_rnd(void);

void seqt_fill(float *x, size_t n);

/* (n, w) floats as nested JSON arrays. */
json_t *seqt_mat(const float *x, int n, int w);

/* A flat v2 input. */
json_t *seqt_input(const char *name, const float *x, int n, int w);

/* POST body (taken) to path with extra headers (NULL-terminated or NULL). */
struct http_reply seqt_send_json(int port, const char *path, json_t *body,
                            const char *const *headers);

struct http_reply seqt_attention(int port, json_t *body);

/* The numbers of field name of an /attention answer into out (at most max). */
size_t seqt_answer_floats(const struct http_reply *a, const char *name, float *out, size_t max);

long long seqt_int_of(const struct http_reply *a, const char *name);

/* x rounded as a cache of dtype 0 (FP32), 1 (FP16) or 2 (BF16) stores it. */
float seqt_round(int dtype, float x);

void seqt_expect_close(const float *got, const float *want, size_t n, const char *what);

#define E 4

#define H 2

/* A step with key/value of one row and query of one row (E wide, identity
 * weights): the body. */
json_t *seqt_tiny_step(const char *id, int start);

#endif
