/* differential.h -- what the old-vs-new differential (tests/differential.c)
 * shares with its scripted run of sequence steps (tests/differential_seq.c):
 * the two servers, the comparison of their answers and its counts. */
#ifndef TESTS_DIFFERENTIAL_H
#define TESTS_DIFFERENTIAL_H

#include <stddef.h>

#include "tests/support/http_client.h"

extern struct server diff_servers[2]; /* [0] the old build, [1] the new */

struct diff_counts {
    int compared, ok200, differ; /* ok200: the new server's answers with 200 */
};
extern struct diff_counts diff_counts;

/* Start bins[0] (old) and bins[1] (new) with flags (NULL-terminated, with
 * --port 0) into diff_servers, and wait until both are ready: 0, or 2 with
 * the reason printed (neither left running). */
int diff_start(char *const bins[2], const char *const *flags);
void diff_stop(void);

/* Compare the two answers a[0] (old) and a[1] (new) to POST path: status,
 * Content-Type, Inference-Header-Content-Length, Retry-After and body. Counts
 * it; prints label and the first differing bytes when they differ. */
void diff_answers(const char *label, const char *path, const struct http_reply a[2]);

/* POST body to path on both servers and compare the answers; returns the
 * new server's status. hlen >= 0: the body is binary v2 with that
 * Inference-Header-Content-Length; headers: extra lines ("Name: value",
 * NULL-terminated) or NULL. */
long diff_compare(const char *label, const char *path, const char *body, size_t len,
                  long long hlen, const char *const *headers);

/* The sequence script (differential_seq.c): on the servers running (started
 * with the test models), then on a pair started again from bins with small
 * limits; stops the servers. Prints its count line; 0 when every answer was
 * the same, 1 when any differs, 2 when it could not run. */
int diff_sequences(char *const bins[2]);

#endif
