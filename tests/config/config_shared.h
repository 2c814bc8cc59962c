/* config_shared.h -- what the test_config*.c files share: every key as
 * the spec lists them, a temporary file, cfgt_parse() over a command line. */
#ifndef TESTS_CONFIG_SHARED_H
#define TESTS_CONFIG_SHARED_H

#include <stddef.h>

#include "config/config.h"

#define NKEYS 36 /* config_shared.c checks it is the length of cfgt_keys[] */

extern const char *const cfgt_keys[NKEYS];

/* A temp file holding text; its name goes to path (at least 64 bytes). */
void cfgt_write_temp(char *path, const char *text);

/* argv = {"attention-server", args..., NULL} from a NULL-terminated list. */
int cfgt_parse(struct cfg *c, char **envp, char *err, size_t errlen, ...);

/* The dump of c as a malloc'd string. (Not inlined: GCC 12 then takes the
 * returned buffer for the local pointer it was written through and warns
 * -Wdangling-pointer at every use.) */
char *cfgt_dump_str(const struct cfg *c) __attribute__((noinline));

void cfgt_expect_set_ok(struct cfg *c, const char *key, const char *value);

#endif
