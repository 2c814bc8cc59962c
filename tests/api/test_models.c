/* test_models.c -- a model by name (api/models.h): the 404/503 mapping of
 * the registry's refusals, an unknown model's message with the models
 * served, bounded, and the interface lent to the /attention decoder. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/models.h"
#include "codec/request.h"

/* An unknown model names the nearest and lists the served models: the
 * built-in one without a repository; at most MODELS_MAX_LISTED and within
 * the buffer, then "…", with a repository of 30. */
Test(models, unknown_model_lists_the_served_models_bounded, .timeout = 60)
{
    char msg[600];
    models_unknown(msg, sizeof msg, "attentoin");
    cr_expect_str_eq(msg, "unknown model 'attentoin' (did you mean 'attention'?); the models "
                          "served are attention");
    struct repo_ref *ref;
    int code = -1;
    cr_expect_eq(models_acquire(&ref, "nope", NULL, &code, msg, sizeof msg), -1);
    cr_expect_eq(code, ERR_NOT_FOUND);
    cr_expect_null(ref);
    cr_expect_str_eq(msg, "unknown model 'nope'; the models served are attention");
    /* a version of a model that exists: repo_acquire's own message */
    code = -1;
    cr_expect_eq(models_acquire(&ref, "attention", "2", &code, msg, sizeof msg), -1);
    cr_expect_eq(code, ERR_NOT_FOUND);
    cr_expect(strstr(msg, "has no version '2'"), "%s", msg);

    char dir[] = "/tmp/models-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    for (int i = 0; i < 30; i++) { /* empty folders: models that fail to load */
        char p[64];
        snprintf(p, sizeof p, "%s/model-%02d", dir, i);
        cr_assert_eq(mkdir(p, 0700), 0);
    }
    cr_assert_eq(repo_start(dir, NULL), 0);
    while (!repo_loading_done())
        usleep(10000);
    models_unknown(msg, sizeof msg, "model-7");
    static const char head[] = "unknown model 'model-7' (did you mean 'model-07'?); the "
                               "models served are attention, model-00, model-01,";
    cr_expect(strncmp(msg, head, sizeof head - 1) == 0, "%s", msg);
    /* the built-in model and 19 of the repository's */
    cr_expect(strstr(msg, "model-18, … (GET /v2/models lists them)"), "%s", msg);
    cr_expect(!strstr(msg, "model-19"), "at most %d names: %s", MODELS_MAX_LISTED, msg);
    /* a small buffer: as many as fit, then the tail, never cut mid-name */
    char small[120];
    models_unknown(small, sizeof small, "x");
    cr_expect(strstr(small, ", … (GET /v2/models lists them)"), "%s", small);
    /* a model that exists, not ready: not "unknown" */
    code = -1;
    cr_expect_eq(models_acquire(&ref, "model-03", NULL, &code, msg, sizeof msg), -1);
    cr_expect_eq(code, ERR_MODEL_NOT_READY);
    cr_expect(strstr(msg, "is not ready"), "%s", msg);
    repo_stop();
    for (int i = 0; i < 30; i++) {
        char p[64];
        snprintf(p, sizeof p, "%s/model-%02d", dir, i);
        rmdir(p);
    }
    rmdir(dir);
}

/* The decoder gets its model through models_codec: the built-in model by
 * name (weights inline, no struct model), and the same refusal as v2 for
 * an unknown one; a decoder lent no models knows none. */
Test(models, the_attention_decoder_acquires_through_the_lent_interface)
{
    const struct codec_limits lim = {1000, 4, 16, 16, 16, 4, 1000, 256};
    struct codec_request r;
    struct failure e;
    char b[256];
    /* the built-in model: held, released at deinit; its weights are inline */
    snprintf(b, sizeof b, "{\"model\": \"attention\", \"num_heads\": 1, "
                          "\"query\": [[1, 2]]}");
    cr_expect_eq(codec_decode_request(&r, b, strlen(b), &lim, &models_codec, &e), 0, "%s",
                 e.msg);
    cr_expect_not_null(r.model_ref);
    codec_request_deinit(&r);
    cr_expect_null(r.model_ref);
    /* unknown: 404 and the API's message, from either decoder */
    snprintf(b, sizeof b, "{\"model\": \"attentoin\", \"num_heads\": 1, "
                          "\"query\": [[1, 2]]}");
    cr_expect_eq(codec_decode_request(&r, b, strlen(b), &lim, &models_codec, &e), -1);
    cr_expect_eq(e.code, ERR_NOT_FOUND);
    cr_expect_str_eq(e.msg, "unknown model 'attentoin' (did you mean 'attention'?); the "
                            "models served are attention");
    codec_request_deinit(&r);
    cr_expect_eq(codec_decode_request_reference(&r, b, strlen(b), &lim, &models_codec, &e), -1);
    cr_expect_eq(e.code, ERR_NOT_FOUND);
    codec_request_deinit(&r);
    /* no models lent */
    cr_expect_eq(codec_decode_request(&r, b, strlen(b), &lim, NULL, &e), -1);
    cr_expect_eq(e.code, ERR_NOT_FOUND);
    cr_expect_str_eq(e.msg, "unknown model 'attentoin'");
    codec_request_deinit(&r);
}
