/* v2_inputs.c -- the names of a v2 request's inputs and the checks of
 * its named items, shared by the request's halves (codec/v2.c,
 * v2_params.c, v2_scan.c); calls nothing of theirs. See
 * codec/v2_inputs.h. */
#include "codec/v2_inputs.h"
#include "codec/v2_internal.h"

#include <stdio.h>
#include <string.h>

#include "options/options.h"
#include "codec/scan.h"
#include "lib/suggest.h"

/* The tensor inputs, in their enum order: options of the table. */
static const enum opt_id tensor_inputs[IN_WEIGHT] = {
    OPT_QUERY, OPT_KEY, OPT_VALUE, OPT_ATTN_MASK, OPT_KEY_PADDING_MASK, OPT_SEQUENCE_ID,
    OPT_SEQUENCE_START, OPT_SEQUENCE_END};

const char *v2_input_name(int idx)
{
    return idx < IN_WEIGHT ? opt_name(tensor_inputs[idx]) : att_weight_name((enum att_weight)(idx - IN_WEIGHT));
}

int v2_input_index(const char *name)
{
    for (int i = 0; i < IN_WEIGHT; i++)
        if (strcmp(name, opt_name(tensor_inputs[i])) == 0)
            return i;
    const int w = scan_weight_index(name);
    return w < 0 ? -1 : IN_WEIGHT + w;
}

const char *v2_named_item(json_t *list, size_t i, const char *what, json_t **x,
                          struct failure *err)
{
    *x = json_array_get(list, i);
    const char *name = json_string_value(json_object_get(*x, "name"));
    if (!json_is_object(*x) || !name)
        fail_with(err, ERR_INVALID_PARAMETER, "%s[%zu] must be an object with a string name",
                  what, i);
    return json_is_object(*x) ? name : NULL;
}

int v2_known_fields(json_t *obj, const char *const *list, const char *what,
                    struct failure *err)
{
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v) {
        int i = 0;
        while (list[i] && strcmp(k, list[i]))
            i++;
        if (!list[i]) {
            char all[96] = "", hint[96];
            for (i = 0; list[i]; i++)
                snprintf(all + strlen(all), sizeof all - strlen(all), "%s%s", i ? ", " : "",
                         list[i]);
            const char *near = suggest_nearest(k, list, (size_t)i);
            if (near)
                snprintf(hint, sizeof hint, "did you mean '%s'? ", near);
            return fail_with(err, ERR_INVALID_PARAMETER, "%s has an unknown field '%.64s' (%sits "
                             "fields are %s)", what, k, near ? hint : "", all);
        }
    }
    return 0;
}
