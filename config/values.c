/* values.c -- parsing and checking one setting's value (integers, byte
 * sizes with K/M/G/T suffixes, addresses, paths, origin lists, log levels),
 * the static_dir check, and the ranges shown in messages and usage. The
 * table they serve is in config.c; see config.h and values.h. */
#include "config/values.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static const char *const level_names[] = {"error", "warn", "info", "debug"};

/* Format into err, if the caller gave one. */
void cfg_errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Strict decimal integer: optional sign, digits, and for byte sizes one
 * K/M/G/T suffix (powers of 1024). 0 on success, -1 if not a number, -2 if it
 * does not fit a long long. */
static int parse_int(const char *s, int suffix, long long *out)
{
    const char *p = s + (*s == '+' || *s == '-');
    if (!isdigit((unsigned char)*p))
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    int overflow = errno == ERANGE;
    if (suffix && *end != '\0') {
        int shift;
        switch (*end) {
        case 'k': case 'K': shift = 10; break;
        case 'm': case 'M': shift = 20; break;
        case 'g': case 'G': shift = 30; break;
        case 't': case 'T': shift = 40; break;
        default: return -1;
        }
        end++;
        if (*end == '\0' && !overflow) {
            long long mult = 1LL << shift;
            if (v > LLONG_MAX / mult || v < LLONG_MIN / mult)
                overflow = 1;
            else
                v *= mult;
        }
    }
    if (*end != '\0')
        return -1;
    if (overflow)
        return -2;
    *out = v;
    return 0;
}

/* A number as the user would write it: byte sizes with the largest exact
 * suffix (65536 -> "64K"), everything else in decimal. */
static void fmt_num(char *buf, size_t len, const struct setting *o, long long v)
{
    static const char suffixes[] = "KMGT";
    int s = -1;
    if (o->type == SETTING_T_BYTES && v != 0)
        while (s < 3 && v % (1LL << (10 * (s + 2))) == 0)
            s++;
    if (s < 0)
        snprintf(buf, len, "%lld", v);
    else
        snprintf(buf, len, "%lld%c", v >> (10 * (s + 1)), suffixes[s]);
}

/* The allowed values of o, for messages and usage. */
void cfg_fmt_range(char *buf, size_t len, const struct setting *o)
{
    char lo[24], hi[24];
    switch (o->type) {
    case SETTING_T_INT:
    case SETTING_T_COUNT:
    case SETTING_T_BYTES:
        fmt_num(lo, sizeof lo, o, o->min);
        fmt_num(hi, sizeof hi, o, o->max);
        snprintf(buf, len, "%s..%s", lo, hi);
        break;
    case SETTING_T_ADDR: /* empty only where the default is (grpc_address) */
        snprintf(buf, len, o->def[0] ? "IPv4 or IPv6 address; :: is both"
                                     : "IPv4 or IPv6 address, or empty");
        break;
    case SETTING_T_PATH:
        snprintf(buf, len, "non-empty, < %zu bytes", o->size);
        break;
    case SETTING_T_LEVEL:
        snprintf(buf, len, "error|warn|info|debug");
        break;
    case SETTING_T_FILE:
        snprintf(buf, len, "file name or empty, < %zu bytes", o->size);
        break;
    case SETTING_T_DIR:
        snprintf(buf, len, "directory name or empty, < %zu bytes", o->size);
        break;
    case SETTING_T_ORIGINS:
        snprintf(buf, len, "empty, *, or scheme://host[:port],...");
        break;
    case SETTING_T_SECRET:
        snprintf(buf, len, "empty, or 16..%zu printable bytes", o->size - 1);
        break;
    }
}

/* One origin as browsers send it in Origin: http:// or https://, then a
 * host and an optional :port, no path, no blanks ("https://a.example:8443").
 * s is n bytes, not terminated. */
static int is_origin(const char *s, size_t n)
{
    size_t k = strncmp(s, "https://", 8) == 0 ? 8 : strncmp(s, "http://", 7) == 0 ? 7 : 0;
    if (k == 0 || k == n || n > 255)
        return 0;
    for (; k < n; k++)
        if (!isalnum((unsigned char)s[k]) && !strchr("-._:[]", s[k]))
            return 0;
    return 1;
}

/* "" (no CORS), "*", or origins separated by commas (blanks around them
 * allowed); 0 if v is one of those. *bad and *badlen: the offending item. */
static int check_origins(const char *v, const char **bad, int *badlen)
{
    if (strcmp(v, "*") == 0 || *v == '\0')
        return 0;
    for (const char *p = v;;) {
        while (*p == ' ')
            p++;
        size_t n = strcspn(p, ",");
        size_t t = n;
        while (t > 0 && p[t - 1] == ' ')
            t--;
        if (!is_origin(p, t)) {
            *bad = p, *badlen = t > 64 ? 64 : (int)t;
            return -1;
        }
        if (p[n] == '\0')
            return 0;
        p += n + 1;
    }
}

/* Parse value for o and store it in c; c is untouched on error. User values
 * are echoed at most 64 bytes long so the range always fits the message. */
int cfg_set_value(struct cfg *c, const struct setting *o, const char *value, char *err,
                  size_t errlen)
{
    char *field = (char *)c + o->off;
    char range[64];
    long long v;
    int rc;

    cfg_fmt_range(range, sizeof range, o);
    switch (o->type) {
    case SETTING_T_INT:
    case SETTING_T_COUNT:
    case SETTING_T_BYTES:
        if (*value == '\0') {
            cfg_errf(err, errlen, "%s: empty value, expected %s", o->key, range);
            return -1;
        }
        rc = parse_int(value, o->type == SETTING_T_BYTES, &v);
        if (rc == -1) {
            cfg_errf(err, errlen, "%s: %.64s is not %s", o->key, value,
                 o->type == SETTING_T_BYTES ? "a byte size (integer, optional K, M, G or T suffix)"
                                      : "an integer");
            return -1;
        }
        if (rc == -2 || v < o->min || v > o->max) {
            cfg_errf(err, errlen, "%s: %.64s is out of range %s", o->key, value, range);
            return -1;
        }
        if (o->type == SETTING_T_INT)
            *(int *)(void *)field = (int)v;
        else
            *(long long *)(void *)field = v;
        return 0;
    case SETTING_T_ADDR: {
        struct in6_addr a;
        if (*value == '\0' && o->def[0] == '\0') /* an address that may be unset */
            break;
        if (inet_pton(AF_INET, value, &a) != 1 && inet_pton(AF_INET6, value, &a) != 1) {
            cfg_errf(err, errlen, "%s: '%.64s' is not an IPv4 or IPv6 address", o->key, value);
            return -1;
        }
        break;
    }
    case SETTING_T_PATH:
        if (*value == '\0' || strlen(value) >= o->size) {
            cfg_errf(err, errlen, "%s: '%.64s' must be non-empty and shorter than %zu bytes",
                 o->key, value, o->size);
            return -1;
        }
        break;
    case SETTING_T_FILE:
    case SETTING_T_DIR:
        if (strlen(value) >= o->size) {
            cfg_errf(err, errlen, "%s: '%.64s...' must be shorter than %zu bytes", o->key, value,
                 o->size);
            return -1;
        }
        break;
    case SETTING_T_SECRET: {
        const size_t n = strlen(value);
        int printable = 1;
        for (const char *q = value; *q; q++)
            printable &= *q > ' ' && *q < 127;
        if (n && (n < 16 || n >= o->size || !printable)) {
            cfg_errf(err, errlen, "%s: must be empty or 16..%zu printable bytes without blanks "
                     "(got %zu bytes)", o->key, o->size - 1, n);
            return -1;
        }
        break;
    }
    case SETTING_T_ORIGINS: {
        const char *bad;
        int badlen;
        if (strlen(value) >= o->size) {
            cfg_errf(err, errlen, "%s: '%.64s...' must be shorter than %zu bytes", o->key, value,
                 o->size);
            return -1;
        }
        if (check_origins(value, &bad, &badlen) != 0) {
            cfg_errf(err, errlen, "%s: '%.*s' is not an origin (scheme://host[:port], e.g. "
                 "https://app.example.com; or * alone)", o->key, badlen, bad);
            return -1;
        }
        break;
    }
    case SETTING_T_LEVEL:
        for (int i = 0; i < (int)(sizeof level_names / sizeof level_names[0]); i++) {
            if (strcasecmp(value, level_names[i]) == 0) {
                *(int *)(void *)field = i;
                return 0;
            }
        }
        cfg_errf(err, errlen, "%s: '%.64s' is not one of error, warn, info, debug", o->key, value);
        return -1;
    }
    /* A string that fits: zero the tail too, so two equal configs compare equal. */
    memset(field, 0, o->size);
    memcpy(field, value, strlen(value));
    return 0;
}

int cfg_check_static_dir(const char *dir, char *msg, size_t msglen)
{
    char real[PATH_MAX], index[PATH_MAX + 16];
    struct stat st;
    if (realpath(dir, real) == NULL) {
        cfg_errf(msg, msglen, "static_dir '%.200s': %s; every file of the web client will "
             "answer 404", dir, strerror(errno));
        return 1;
    }
    if (stat(real, &st) != 0 || !S_ISDIR(st.st_mode)) {
        cfg_errf(msg, msglen, "static_dir '%.200s' is not a directory", dir);
        return -1;
    }
    /* "/" and "/etc" have at most one '/'; their files are the host's, not ours */
    if (strchr(real + 1, '/') == NULL) {
        cfg_errf(msg, msglen, "static_dir '%.200s' is %s: every readable .html, .js, .css, "
             ".json, .svg, .png or .ico file under it would be served; point it at the web "
             "client's folder", dir, real);
        return -1;
    }
    snprintf(index, sizeof index, "%s/index.html", real);
    if (access(index, R_OK) != 0) {
        cfg_errf(msg, msglen, "static_dir '%.200s' (%s) has no index.html: is it the web "
             "client's folder? Its .html, .js, .css, .json, .svg, .png and .ico files are "
             "served to anyone", dir, real);
        return 1;
    }
    return 0;
}

const char *cfg_log_level_str(int level)
{
    if (level < 0 || level >= (int)(sizeof level_names / sizeof level_names[0]))
        return "unknown";
    return level_names[level];
}
