/* load.c -- see load.h. load_take() finds a key, checks its dtype and
 * shape, allocates and converts; load_read_json() reads the config files
 * (config.json, the checkpoint's config.json and index). */
#include "model/load.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CONFIG_MAX (1u << 20) /* config.json: 1 MiB at most */

int load_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (errlen)
        vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

const struct st_tensor *load_find(const struct load *ld, const char *key)
{
    char full[MODEL_PREFIX_MAX + 64];
    snprintf(full, sizeof full, "%s%s", ld->prefix, key);
    return st_find(ld->f, full);
}

/* Its element count is then d0·max(d1, 1), backed by bytes of the file. */
const struct st_tensor *load_checked(struct load *ld, const char *key, long d0, long d1)
{
    const struct st_tensor *t = load_find(ld, key);
    if (!t) {
        load_fail(ld->err, ld->errlen, "%s: missing key %s%s", ld->file, ld->prefix, key);
        return NULL;
    }
    uint64_t want[2] = {(uint64_t)d0, (uint64_t)d1};
    int wnd = d1 < 0 ? 1 : 2;
    if (t->ndim != wnd || t->shape[0] != want[0] || (wnd == 2 && t->shape[1] != want[1])) {
        char got[96], exp[64];
        st_shape_str(got, sizeof got, t->shape, t->ndim);
        st_shape_str(exp, sizeof exp, want, wnd);
        load_fail(ld->err, ld->errlen, "%s: %s has shape %s, expected %s", ld->file, t->name,
                  got, exp);
        return NULL;
    }
    if (!st_dtype_convertible(t->dtype)) {
        load_fail(ld->err, ld->errlen, "%s: %s has dtype %s; only F32, F16 and BF16 "
                  "can be loaded", ld->file, t->name, t->dtype);
        return NULL;
    }
    return t;
}

int load_convert(struct load *ld, float *dst, const struct st_tensor *t)
{
    struct model *m = ld->m;
    if (!m->dtype[0])
        snprintf(m->dtype, sizeof m->dtype, "%s", t->dtype);
    else if (strcmp(m->dtype, t->dtype))
        snprintf(m->dtype, sizeof m->dtype, "mixed");
    char msg[320];
    if (st_read_f32(ld->f, dst, t, msg, sizeof msg))
        return load_fail(ld->err, ld->errlen, "%s: %s", ld->file, msg);
    for (size_t i = 0; i < (size_t)t->count; i++)
        if (!isfinite(dst[i]))
            return load_fail(ld->err, ld->errlen, "%s: %s[%zu] is not finite",
                                 ld->file, t->name, i);
    return 0;
}

int load_take(struct load *ld, float **out, const char *key, int optional, long d0, long d1)
{
    *out = NULL;
    if (optional && !load_find(ld, key))
        return 0;
    const struct st_tensor *t = load_checked(ld, key, d0, d1);
    if (!t)
        return -1;
    if (!(*out = malloc((t->count ? (size_t)t->count : 1) * sizeof **out)))
        return load_fail(ld->err, ld->errlen, "out of memory for %s", t->name);
    return load_convert(ld, *out, t);
}

json_t *load_read_json(const char *path, const char *what, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
    if (fd < 0) {
        load_fail(err, errlen, "%s: %s", what, strerror(errno));
        return NULL;
    }
    struct stat sb;
    char *buf = NULL;
    json_t *cfg = NULL;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
        load_fail(err, errlen, "%s: not a regular file", what);
    } else if (sb.st_size > (off_t)CONFIG_MAX) {
        load_fail(err, errlen, "%s: %lld bytes, more than %u", what, (long long)sb.st_size,
                  CONFIG_MAX);
    } else if (!(buf = malloc((size_t)sb.st_size + 1))) {
        load_fail(err, errlen, "out of memory");
    } else {
        size_t got = 0;
        ssize_t r = 1;
        while (got < (size_t)sb.st_size && (r = read(fd, buf + got, (size_t)sb.st_size - got)) > 0)
            got += (size_t)r;
        json_error_t jerr;
        if (r < 0)
            load_fail(err, errlen, "%s: %s", what, strerror(errno));
        else if (!(cfg = json_loadb(buf, got, JSON_REJECT_DUPLICATES, &jerr)))
            load_fail(err, errlen, "%s: %s (line %d)", what, jerr.text, jerr.line);
    }
    free(buf);
    close(fd);
    return cfg;
}
