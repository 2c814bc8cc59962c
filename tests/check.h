/* check.h -- float tensor comparison for tests, after llm.c's check_tensor.
 *
 * check_tensor() accepts got[i] when |got[i] - want[i]| <= atol + rtol·|want[i]|;
 * on failure it prints the tensor's name, max |Δ| and the first mismatches
 * to stderr, so a red test says where it went wrong. */
#ifndef TESTS_CHECK_H
#define TESTS_CHECK_H

#include <stddef.h>

/* Returns 1 when every element is within tolerance, 0 otherwise. */
int check_tensor(const char *name, const float *got, const float *want, size_t n,
                 double atol, double rtol);

/* Deterministic uniform floats in [-1, 1) from a 64-bit state (xorshift). */
float check_randf(unsigned long long *state);

#endif
