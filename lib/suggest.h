/* suggest.h -- "did you mean ...?" for a name the server does not know,
 * the one rule every refusal of an unknown name uses: fields of POST
 * /attention and of a v2 request, v2 parameters, inputs and outputs, and
 * model names on both protocols.
 *
 *     char hint[96];
 *     return fail_with(err, ERR_INVALID_PARAMETER, "unknown parameter '%s'%s", k,
 *                     suggest_hint(hint, sizeof hint, k, known, n_known));
 *
 * A known name is suggested when it is within edit distance 2 of the
 * unknown one (Damerau-Levenshtein as optimal string alignment: an
 * insertion, a deletion, a substitution or a swap of two neighbours each
 * count 1, so "is_casual" is 1 from "is_causal"); the nearest wins, the
 * first in the list on a tie. Only names: an unknown model's message,
 * which also lists the models served, is the API's (api/models.h). */
#ifndef LIB_SUGGEST_H
#define LIB_SUGGEST_H

#include <stddef.h>

#define SUGGEST_MAX_DISTANCE 2

/* The edit distance of a and b, or SUGGEST_MAX_DISTANCE + 1 when greater. */
int suggest_distance(const char *a, const char *b);

/* The name of list (n names; NULL entries skipped) nearest to word within
 * SUGGEST_MAX_DISTANCE, or NULL. word itself is never suggested. */
const char *suggest_nearest(const char *word, const char *const *list, size_t n);

/* " (did you mean 'x'?)" for the nearest name of list, or "" when none is
 * near: written into buf (n bytes), which is returned. */
const char *suggest_hint(char *buf, size_t n, const char *word, const char *const *list,
                         size_t count);

#endif
