/* values.h -- internal to config/: the row type of the settings table
 * (config.c) and what values.c offers it: one value parsed, checked and
 * stored, a row's range written out, and the error formatter. Not for use
 * outside config/; see config.h for the interface. */
#ifndef CONFIG_VALUES_H
#define CONFIG_VALUES_H

#include <stddef.h>

#include "config/config.h"

enum opt_type {
    OPT_INT,   /* int field, decimal */
    OPT_COUNT, /* long long field, decimal */
    OPT_BYTES, /* long long field, decimal with an optional K/M/G/T suffix */
    OPT_ADDR,  /* char array, IPv4 or IPv6 address */
    OPT_PATH,  /* char array, any non-empty string that fits */
    OPT_LEVEL, /* int field, enum cfg_log_level written as a word */
    OPT_FILE,  /* char array, a file name, or empty for "not used" */
    OPT_DIR,   /* char array, a directory name, or empty for "none" */
    OPT_ORIGINS, /* char array, empty, "*", or comma-separated http(s) origins */
    OPT_SECRET, /* char array, empty or at least 16 bytes; never printed */
};

#define OPT_TYPES (OPT_SECRET + 1) /* how many types (the last above + 1) */

struct opt {
    const char *key;  /* file key; flag and env var are derived from it */
    enum opt_type type;
    size_t off;       /* offsetof(struct cfg, key) */
    size_t size;      /* sizeof the field (string capacity) */
    long long min, max;
    const char *def;  /* default, written as in a config file */
    const char *help;
};

/* Format into err, if the caller gave one. */
__attribute__((format(printf, 3, 4))) void cfg_errf(char *err, size_t errlen, const char *fmt,
                                                    ...);

/* The allowed values of o, for messages and usage. */
void cfg_fmt_range(char *buf, size_t len, const struct opt *o);

/* Parse value for o and store it in c; c is untouched on error. */
int cfg_set_opt(struct cfg *c, const struct opt *o, const char *value, char *err,
                size_t errlen);

#endif
