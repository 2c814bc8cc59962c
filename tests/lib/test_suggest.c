/* test_suggest.c -- "did you mean ...?" (lib/suggest.h): the edit
 * distance, the nearest name and the hint. An unknown model's message is
 * the API's (tests/api/test_models.c). */
#include <criterion/criterion.h>
#include <string.h>

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
