/* test_suggest.c -- "did you mean ...?" (lib/suggest.h): the edit
 * distance, the nearest name, the hint, and an unknown model's message
 * with the models served, bounded. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/suggest.h"

Test(suggest, distance_counts_edits_and_swaps_up_to_two)
{
    static const struct { const char *a, *b; int d; } cases[] = {
        {"is_causal", "is_causal", 0},
        {"is_casual", "is_causal", 1},    /* a swap of two neighbours */
        {"nmu_heads", "num_heads", 1},
        {"num_head", "num_heads", 1},     /* a deletion */
        {"querry", "query", 1},           /* an insertion */
        {"qeury", "query", 1},
        {"scala", "scale", 1},            /* a substitution */
        {"binary_dat", "binary_data", 1},
        {"outptu", "output", 1},
        {"attentoin", "attention", 1},
        {"bert-l4", "bert-l3", 1},
        {"nead_wieghts", "need_weights", 2},
        {"ab", "ba", 1},
        {"", "id", 2},
        {"x", "id", 2},
        {"", "key", 3},                   /* more than 2: 3 (SUGGEST_MAX_DISTANCE + 1) */
        {"junk", "num_heads", 3},
        {"kitten", "sitting", 3},
        {"model", "model_name", 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_expect_eq(suggest_distance(cases[i].a, cases[i].b), cases[i].d, "%s ~ %s: %d, want %d",
                     cases[i].a, cases[i].b, suggest_distance(cases[i].a, cases[i].b),
                     cases[i].d);
        cr_expect_eq(suggest_distance(cases[i].b, cases[i].a), cases[i].d, "%s ~ %s",
                     cases[i].b, cases[i].a);
    }
    /* long names: never near (and no overrun) */
    char a[300], b[300];
    memset(a, 'a', 299), a[299] = '\0';
    memset(b, 'a', 298), b[298] = 'b', b[299] = '\0';
    cr_expect_eq(suggest_distance(a, b), SUGGEST_MAX_DISTANCE + 1);
}

Test(suggest, nearest_and_hint)
{
    static const char *const list[] = {"need_weights", "is_causal", NULL, "scale", "num_heads",
                                       "num_kv_heads"};
    const size_t n = sizeof list / sizeof list[0];
    char hint[96];
    cr_expect_str_eq(suggest_hint(hint, sizeof hint, "is_casual", list, n),
                     " (did you mean 'is_causal'?)");
    cr_expect_str_eq(suggest_hint(hint, sizeof hint, "junk", list, n), "");
    /* the nearest wins over an earlier one further away */
    cr_expect_str_eq(suggest_nearest("num_kv_head", list, n), "num_kv_heads");
    /* a tie: the first in the list */
    static const char *const tie[] = {"scale", "scalf"};
    cr_expect_str_eq(suggest_nearest("scalg", tie, 2), "scale");
    /* the word itself is not a suggestion */
    cr_expect_null(suggest_nearest("scale", tie, 1));
}

/* An unknown model names the nearest and lists the served models: the
 * built-in one without a repository; at most SUGGEST_MAX_MODELS and within
 * the buffer, then "…", with a repository of 30. */
Test(suggest, unknown_model_lists_the_served_models_bounded, .timeout = 60)
{
    char msg[600];
    suggest_unknown_model(msg, sizeof msg, "attentoin");
    cr_expect_str_eq(msg, "unknown model 'attentoin' (did you mean 'attention'?); the models "
                          "served are attention");
    struct repo_ref *ref;
    cr_expect_eq(suggest_acquire(&ref, "nope", NULL, msg, sizeof msg), REPO_ENOTFOUND);
    cr_expect_str_eq(msg, "unknown model 'nope'; the models served are attention");
    /* a version of a model that exists: repo_acquire's own message */
    cr_expect_eq(suggest_acquire(&ref, "attention", "2", msg, sizeof msg), REPO_ENOTFOUND);
    cr_expect(strstr(msg, "has no version '2'"), "%s", msg);

    char dir[] = "/tmp/suggest-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    for (int i = 0; i < 30; i++) { /* empty folders: models that fail to load */
        char p[64];
        snprintf(p, sizeof p, "%s/model-%02d", dir, i);
        cr_assert_eq(mkdir(p, 0700), 0);
    }
    cr_assert_eq(repo_start(dir, NULL), 0);
    while (!repo_loading_done())
        usleep(10000);
    suggest_unknown_model(msg, sizeof msg, "model-7");
    static const char head[] = "unknown model 'model-7' (did you mean 'model-07'?); the "
                               "models served are attention, model-00, model-01,";
    cr_expect(strncmp(msg, head, sizeof head - 1) == 0, "%s", msg);
    /* the built-in model and 19 of the repository's */
    cr_expect(strstr(msg, "model-18, … (GET /v2/models lists them)"), "%s", msg);
    cr_expect(!strstr(msg, "model-19"), "at most %d names: %s", SUGGEST_MAX_MODELS, msg);
    /* a small buffer: as many as fit, then the tail, never cut mid-name */
    char small[120];
    suggest_unknown_model(small, sizeof small, "x");
    cr_expect(strstr(small, ", … (GET /v2/models lists them)"), "%s", small);
    /* a model that exists, not ready: not "unknown" */
    cr_expect_eq(suggest_acquire(&ref, "model-03", NULL, msg, sizeof msg), REPO_ENOTREADY);
    cr_expect(strstr(msg, "is not ready"), "%s", msg);
    repo_stop();
    for (int i = 0; i < 30; i++) {
        char p[64];
        snprintf(p, sizeof p, "%s/model-%02d", dir, i);
        rmdir(p);
    }
    rmdir(dir);
}
