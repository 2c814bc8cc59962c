/* v2_shared.c -- see v2_shared.h. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>

#include "tests/support/http_util.h"
#include "tests/server/v2_shared.h"

const char *const v2t_repo_flags[] = {"--model-repository", REPO, "--admin-token", TOKEN,
                                  NULL};

/* Start on the test repository and wait until every model has loaded. */
void v2t_start_repo(struct server *s)
{
    server_start_ready(s, v2t_repo_flags);
}

json_t *v2t_get_json(int port, const char *path, long want_status)
{
    struct http_reply a = request(port, "GET", path, NULL, 0, NULL, 0);
    cr_assert_eq(a.status, want_status, "GET %s: %ld %s", path, a.status, a.body);
    json_t *j = json_loadb(a.body ? a.body : "", a.len, 0, NULL);
    cr_assert_not_null(j, "GET %s: not JSON: %s", path, a.body);
    free(a.body);
    return j;
}

const char *const v2t_small_query =
    "{\"name\": \"query\", \"datatype\": \"FP32\", \"shape\": [2, 4], "
    "\"data\": [[1, 0, 0, 1], [0, 1, 1, 0]]}";
