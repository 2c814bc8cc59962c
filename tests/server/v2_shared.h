/* v2_shared.h -- what test_v2.c and test_v2_models.c share: the test
 * repository and its server, a GET answered with JSON, a small query. */
#ifndef TESTS_V2_SHARED_H
#define TESTS_V2_SHARED_H

#include <jansson.h>

#include "tests/support/http_util.h"

#define REPO "tests/models/repo"

#define TOKEN "test-admin-token-0123456789"

extern const char *const v2t_repo_flags[];

/* Start on the test repository and wait until every model has loaded. */
void v2t_start_repo(struct server *s);

json_t *v2t_get_json(int port, const char *path, long want_status);

extern const char *const v2t_small_query;

#endif
