/* sequence_shared.h -- what the test_sequence_*.c files share: random
 * tensors, requests and their answers as floats, the test repository. */
#ifndef TESTS_SEQUENCE_SHARED_H
#define TESTS_SEQUENCE_SHARED_H

#include <jansson.h>
#include <stddef.h>

#include "tests/support/http_util.h"

extern unsigned seed;

float rnd(void);

void fill(float *x, size_t n);

/* (n, w) floats as nested JSON arrays. */
json_t *mat(const float *x, int n, int w);

/* A flat v2 input. */
json_t *input(const char *name, const float *x, int n, int w);

/* POST body (taken) to path with extra headers (NULL-terminated or NULL). */
struct http_reply send_json(int port, const char *path, json_t *body,
                            const char *const *headers);

struct http_reply attention(int port, json_t *body);

/* The numbers of field name of an /attention answer into out (at most max). */
size_t answer_floats(const struct http_reply *a, const char *name, float *out, size_t max);

long long int_of(const struct http_reply *a, const char *name);

void expect_close(const float *got, const float *want, size_t n, const char *what);

#define E 4

#define H 2

/* A step with key/value of one row and query of one row (E wide, identity
 * weights): the body. */
json_t *tiny_step(const char *id, int start);

#endif
