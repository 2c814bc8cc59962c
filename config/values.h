/* values.h -- internal to config/: the row type of the settings table
 * (config.c) and what values.c offers it: one value parsed, checked and
 * stored, a row's range written out, and the error formatter. Not for use
 * outside config/; see config.h for the interface. */
#ifndef CONFIG_VALUES_H
#define CONFIG_VALUES_H

#include <stddef.h>

#include "config/config.h"

enum setting_type {
    SETTING_T_INT,     /* int field, decimal */
    SETTING_T_COUNT,   /* long long field, decimal */
    SETTING_T_BYTES,   /* long long field, decimal with an optional K/M/G/T suffix */
    SETTING_T_ADDR,    /* char array, IPv4 or IPv6 address */
    SETTING_T_PATH,    /* char array, any non-empty string that fits */
    SETTING_T_LEVEL,   /* int field, enum cfg_log_level written as a word */
    SETTING_T_FILE,    /* char array, a file name, or empty for "not used" */
    SETTING_T_DIR,     /* char array, a directory name, or empty for "none" */
    SETTING_T_ORIGINS, /* char array, empty, "*", or comma-separated http(s) origins */
    SETTING_T_SECRET,  /* char array, empty or at least 16 bytes; never printed */
};

#define SETTING_TYPES (SETTING_T_SECRET + 1) /* how many types (the last above + 1) */

/* A row of the settings table: one setting, its field in struct cfg and
 * what values it takes. */
struct setting {
    const char *key;  /* file key; flag and env var are derived from it */
    enum setting_type type;
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
void cfg_fmt_range(char *buf, size_t len, const struct setting *o);

/* Parse value for o and store it in c; c is untouched on error. */
int cfg_set_value(struct cfg *c, const struct setting *o, const char *value, char *err,
                  size_t errlen);

#endif
