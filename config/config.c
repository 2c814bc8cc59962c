/* config.c -- the settings table and its four readers (defaults, file,
 * environment, flags), plus usage and dump. See config.h. */
#include "config/config.h"

#include <arpa/inet.h>
#include <assert.h>
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

enum opt_type {
    OPT_INT,   /* int field, decimal */
    OPT_COUNT, /* long long field, decimal */
    OPT_BYTES, /* long long field, decimal with an optional K/M/G/T suffix */
    OPT_ADDR,  /* char array, IPv4 or IPv6 address */
    OPT_PATH,  /* char array, any non-empty string that fits */
    OPT_LEVEL, /* int field, enum cfg_log_level written as a word */
    OPT_FILE,  /* char array, a file name, or empty for "not used" */
    OPT_ORIGINS, /* char array, empty, "*", or comma-separated http(s) origins */
};

struct opt {
    const char *key;  /* file key; flag and env var are derived from it */
    enum opt_type type;
    size_t off;       /* offsetof(struct cfg, key) */
    size_t size;      /* sizeof the field (string capacity) */
    long long min, max;
    const char *def;  /* default, written as in a config file */
    const char *help;
};

/* Offset of field k, and a compile-time check that k has type T: comparing
 * distinct pointer types draws a warning (as the Linux kernel's typecheck()),
 * so an int row pointing at a long long field cannot slip through. */
#define FIELD(k, T) (offsetof(struct cfg, k) + 0 * sizeof((T *)0 == &((struct cfg *)0)->k))
#define SIZE(k) sizeof(((struct cfg *)0)->k)

#define INT(k, lo, hi, def, help) {#k, OPT_INT, FIELD(k, int), SIZE(k), lo, hi, def, help}
#define COUNT(k, lo, hi, def, help) \
    {#k, OPT_COUNT, FIELD(k, long long), SIZE(k), lo, hi, def, help}
#define BYTES(k, lo, hi, def, help) \
    {#k, OPT_BYTES, FIELD(k, long long), SIZE(k), lo, hi, def, help}
#define STR(k, type, def, help) {#k, type, FIELD(k[0], char), SIZE(k), 0, 0, def, help}
#define LEVEL(k, def, help) \
    {#k, OPT_LEVEL, FIELD(k, int), SIZE(k), CFG_LOG_ERROR, CFG_LOG_DEBUG, def, help}

static const struct opt opts[] = {
    STR(bind, OPT_ADDR, "0.0.0.0", "address to listen on"),
    INT(port, 0, 65535, "8080", "TCP port; 0 picks a free one"),
    INT(workers, 1, 64, "2", "worker threads running requests"),
    INT(queue_depth, 1, 65536, "64", "requests waiting for a worker before 503"),
    INT(threads_per_request, 1, 16, "1",
        "threads computing one request; keep workers x this <= cores"),
    BYTES(max_body_bytes, 1LL << 10, 1LL << 34, "64M", "largest request body (413 above)"),
    BYTES(max_inflight_bytes, 1LL << 20, 1LL << 40, "1G",
          "request bytes held at once, all connections together (503 above)"),
    COUNT(max_tensor_elements, 1, 1LL << 32, "16777216", "most elements in one tensor"),
    INT(max_batch, 1, 65536, "64", "largest batch N"),
    INT(max_target_len, 1, 1048576, "4096", "longest target sequence L"),
    INT(max_source_len, 1, 1048576, "4096", "longest source sequence S"),
    INT(max_embed_dim, 1, 65536, "4096", "largest E, kdim and vdim"),
    INT(max_heads, 1, 65536, "256", "most heads H"),
    COUNT(max_weights_elements, 1, 1LL << 34, "67108864",
          "most elements N*H*L*S in the weights output"),
    INT(conn_timeout, 1, 3600, "30", "seconds a connection may stay idle"),
    BYTES(conn_memory_limit, 1LL << 14, 1LL << 24, "32K",
          "libmicrohttpd memory per connection"),
    INT(max_connections, 1, 65536, "1024",
        "open connections; past it idle ones are reclaimed, else 503"),
    INT(header_timeout, 1, 3600, "20",
        "seconds to receive a request's headers (from accept or the previous answer)"),
    INT(body_timeout, 1, 3600, "120", "seconds to receive a request's body"),
    BYTES(min_upload_rate, 0, 1LL << 30, "1K",
          "bytes/s a body must arrive at, after a 5 s grace (0: no minimum)"),
    BYTES(min_send_rate, 0, 1LL << 30, "1K",
          "bytes/s a client must read an answer at, after a 5 s grace (0: no minimum)"),
    BYTES(max_answer_bytes, 1LL << 20, 1LL << 40, "1G",
          "answer bytes computed and not yet sent, all connections together (503 above)"),
    INT(drain_timeout, 1, 3600, "20",
        "seconds SIGTERM waits for requests before closing the ones still uploading"),
    LEVEL(log_level, "info", "least severe messages logged"),
    STR(static_dir, OPT_PATH, "web", "directory of the browser client's static files"),
    STR(tls_cert_file, OPT_FILE, "", "PEM certificate (chain) for HTTPS; empty: plain HTTP"),
    STR(tls_key_file, OPT_FILE, "", "PEM private key of tls_cert_file"),
    STR(cors_allow_origin, OPT_ORIGINS, "",
        "origins whose pages may call the service (CORS); empty: none"),
};

#define NOPTS (sizeof opts / sizeof opts[0])

/* Old names still read everywhere a key is: the file, the environment
 * (ATTN_<NAME>) and the flags (--name). An alias is the same setting under
 * another name, so where a source has an order, the file's lines and the
 * flags, the later of the two wins, as for a key given twice; the
 * environment has none, and there the canonical name wins. Errors name the
 * canonical key; cfg_dump() writes only it. */
static const struct alias {
    const char *name; /* the old name */
    const char *key;  /* the key of opts[] it stands for */
} aliases[] = {
    {"blas_threads", "threads_per_request"},
};

#define NALIASES (sizeof aliases / sizeof aliases[0])

static const char *const level_names[] = {"error", "warn", "info", "debug"};

/* Format into err, if the caller gave one. */
__attribute__((format(printf, 3, 4))) static void errf(char *err, size_t errlen,
                                                      const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* The row of a key, or of the key an alias stands for; NULL if neither. */
static const struct opt *find_opt(const char *key)
{
    for (size_t i = 0; i < NOPTS; i++)
        if (strcmp(opts[i].key, key) == 0)
            return &opts[i];
    for (size_t a = 0; a < NALIASES; a++)
        if (strcmp(aliases[a].name, key) == 0)
            return find_opt(aliases[a].key);
    return NULL;
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
static void fmt_num(char *buf, size_t len, const struct opt *o, long long v)
{
    static const char suffixes[] = "KMGT";
    int s = -1;
    if (o->type == OPT_BYTES && v != 0)
        while (s < 3 && v % (1LL << (10 * (s + 2))) == 0)
            s++;
    if (s < 0)
        snprintf(buf, len, "%lld", v);
    else
        snprintf(buf, len, "%lld%c", v >> (10 * (s + 1)), suffixes[s]);
}

/* The allowed values of o, for messages and usage. */
static void fmt_range(char *buf, size_t len, const struct opt *o)
{
    char lo[24], hi[24];
    switch (o->type) {
    case OPT_INT:
    case OPT_COUNT:
    case OPT_BYTES:
        fmt_num(lo, sizeof lo, o, o->min);
        fmt_num(hi, sizeof hi, o, o->max);
        snprintf(buf, len, "%s..%s", lo, hi);
        break;
    case OPT_ADDR:
        snprintf(buf, len, "IPv4 or IPv6 address; :: is both");
        break;
    case OPT_PATH:
        snprintf(buf, len, "non-empty, < %zu bytes", o->size);
        break;
    case OPT_LEVEL:
        snprintf(buf, len, "error|warn|info|debug");
        break;
    case OPT_FILE:
        snprintf(buf, len, "file name or empty, < %zu bytes", o->size);
        break;
    case OPT_ORIGINS:
        snprintf(buf, len, "empty, *, or scheme://host[:port],...");
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
static int set_opt(struct cfg *c, const struct opt *o, const char *value, char *err,
                   size_t errlen)
{
    char *field = (char *)c + o->off;
    char range[64];
    long long v;
    int rc;

    fmt_range(range, sizeof range, o);
    switch (o->type) {
    case OPT_INT:
    case OPT_COUNT:
    case OPT_BYTES:
        if (*value == '\0') {
            errf(err, errlen, "%s: empty value, expected %s", o->key, range);
            return -1;
        }
        rc = parse_int(value, o->type == OPT_BYTES, &v);
        if (rc == -1) {
            errf(err, errlen, "%s: %.64s is not %s", o->key, value,
                 o->type == OPT_BYTES ? "a byte size (integer, optional K, M, G or T suffix)"
                                      : "an integer");
            return -1;
        }
        if (rc == -2 || v < o->min || v > o->max) {
            errf(err, errlen, "%s: %.64s is out of range %s", o->key, value, range);
            return -1;
        }
        if (o->type == OPT_INT)
            *(int *)(void *)field = (int)v;
        else
            *(long long *)(void *)field = v;
        return 0;
    case OPT_ADDR: {
        struct in6_addr a;
        if (inet_pton(AF_INET, value, &a) != 1 && inet_pton(AF_INET6, value, &a) != 1) {
            errf(err, errlen, "%s: '%.64s' is not an IPv4 or IPv6 address", o->key, value);
            return -1;
        }
        break;
    }
    case OPT_PATH:
        if (*value == '\0' || strlen(value) >= o->size) {
            errf(err, errlen, "%s: '%.64s' must be non-empty and shorter than %zu bytes",
                 o->key, value, o->size);
            return -1;
        }
        break;
    case OPT_FILE:
        if (strlen(value) >= o->size) {
            errf(err, errlen, "%s: '%.64s...' must be shorter than %zu bytes", o->key, value,
                 o->size);
            return -1;
        }
        break;
    case OPT_ORIGINS: {
        const char *bad;
        int badlen;
        if (strlen(value) >= o->size) {
            errf(err, errlen, "%s: '%.64s...' must be shorter than %zu bytes", o->key, value,
                 o->size);
            return -1;
        }
        if (check_origins(value, &bad, &badlen) != 0) {
            errf(err, errlen, "%s: '%.*s' is not an origin (scheme://host[:port], e.g. "
                 "https://app.example.com; or * alone)", o->key, badlen, bad);
            return -1;
        }
        break;
    }
    case OPT_LEVEL:
        for (int i = 0; i < (int)(sizeof level_names / sizeof level_names[0]); i++) {
            if (strcasecmp(value, level_names[i]) == 0) {
                *(int *)(void *)field = i;
                return 0;
            }
        }
        errf(err, errlen, "%s: '%.64s' is not one of error, warn, info, debug", o->key, value);
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
        errf(msg, msglen, "static_dir '%.200s': %s; every file of the web client will "
             "answer 404", dir, strerror(errno));
        return 1;
    }
    if (stat(real, &st) != 0 || !S_ISDIR(st.st_mode)) {
        errf(msg, msglen, "static_dir '%.200s' is not a directory", dir);
        return -1;
    }
    /* "/" and "/etc" have at most one '/'; their files are the host's, not ours */
    if (strchr(real + 1, '/') == NULL) {
        errf(msg, msglen, "static_dir '%.200s' is %s: every readable .html, .js, .css, "
             ".json, .svg, .png or .ico file under it would be served; point it at the web "
             "client's folder", dir, real);
        return -1;
    }
    snprintf(index, sizeof index, "%s/index.html", real);
    if (access(index, R_OK) != 0) {
        errf(msg, msglen, "static_dir '%.200s' (%s) has no index.html: is it the web "
             "client's folder? Its .html, .js, .css, .json, .svg, .png and .ico files are "
             "served to anyone", dir, real);
        return 1;
    }
    return 0;
}

void cfg_defaults(struct cfg *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < NOPTS; i++) {
        int rc = set_opt(c, &opts[i], opts[i].def, NULL, 0);
        assert(rc == 0 && "a default in the table is out of its own range");
        (void)rc;
    }
}

int cfg_set(struct cfg *c, const char *key, const char *value, char *err, size_t errlen)
{
    const struct opt *o = find_opt(key);
    if (o == NULL) {
        errf(err, errlen, "unknown key '%.64s'", key);
        return -1;
    }
    return set_opt(c, o, value, err, errlen);
}

/* Trim blanks (and the '\r' of CRLF files) at both ends, in place. */
static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

int cfg_load_file(struct cfg *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        errf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0, rc = 0;
    char msg[192];

    while (getline(&line, &cap, f) != -1) {
        lineno++;
        char *s = trim(line);
        if (*s == '\0' || *s == '#')
            continue;
        char *eq = strchr(s, '=');
        if (eq != NULL)
            *eq = '\0';
        char *key = trim(s);
        if (eq == NULL || *key == '\0') {
            errf(err, errlen, "%s:%d: expected 'key = value', got '%.64s'", path, lineno, s);
            rc = -1;
            goto done;
        }
        if (cfg_set(c, key, trim(eq + 1), msg, sizeof msg) != 0) {
            errf(err, errlen, "%s:%d: %s", path, lineno, msg);
            rc = -1;
            goto done;
        }
    }
    if (ferror(f)) {
        errf(err, errlen, "%s: read error: %s", path, strerror(errno));
        rc = -1;
    }
done:
    free(line);
    fclose(f);
    return rc;
}

/* The value of NAME in envp, or NULL. */
static const char *env_get(char **envp, const char *name)
{
    size_t n = strlen(name);
    for (char **e = envp; e != NULL && *e != NULL; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

/* "ATTN_" + key in upper case. */
static void env_name(char *buf, size_t len, const char *key)
{
    int n = snprintf(buf, len, "ATTN_%s", key);
    for (int i = 5; i < n && (size_t)i < len; i++)
        buf[i] = (char)toupper((unsigned char)buf[i]);
}

/* "--" + key with '_' written '-'. */
static void flag_name(char *buf, size_t len, const char *key)
{
    int n = snprintf(buf, len, "--%s", key);
    for (int i = 2; i < n && (size_t)i < len; i++)
        if (buf[i] == '_')
            buf[i] = '-';
}

/* One flag of argv, as read by next_flag(). opt is NULL for --config. */
struct flag {
    const struct opt *opt;
    const char *name; /* the flag as spelled, up to any '=' (for messages) */
    size_t namelen;
    const char *value;
};

/* Read the flag at argv[*i] into fl, stepping *i past a separate value.
 * 0, or -1 with err set for an unknown flag, a missing value or a stray
 * argument. */
static int next_flag(int argc, char **argv, int *i, struct flag *fl, char *err, size_t errlen)
{
    const char *arg = argv[*i];
    if (strncmp(arg, "--", 2) != 0) {
        if (arg[0] == '-')
            errf(err, errlen, "unknown flag '%.64s' (try --help)", arg);
        else
            errf(err, errlen, "unexpected argument '%.64s' (flags only; try --help)", arg);
        return -1;
    }
    const char *eq = strchr(arg, '=');
    fl->name = arg;
    fl->namelen = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
    fl->opt = NULL;

    char buf[64];
    int known = fl->namelen == strlen("--config") && strncmp(arg, "--config", fl->namelen) == 0;
    for (size_t k = 0; k < NOPTS + NALIASES && !known; k++) {
        const char *key = k < NOPTS ? opts[k].key : aliases[k - NOPTS].name;
        flag_name(buf, sizeof buf, key);
        if (strlen(buf) == fl->namelen && strncmp(arg, buf, fl->namelen) == 0) {
            fl->opt = find_opt(key);
            known = 1;
        }
    }
    if (!known) {
        int n = fl->namelen > 64 ? 64 : (int)fl->namelen;
        errf(err, errlen, "unknown flag '%.*s' (try --help)", n, arg);
        return -1;
    }
    if (eq != NULL) {
        fl->value = eq + 1;
    } else if (*i + 1 < argc && strncmp(argv[*i + 1], "--", 2) != 0) {
        fl->value = argv[++*i];
    } else {
        errf(err, errlen, "%s: missing value", arg);
        return -1;
    }
    return 0;
}

int cfg_parse(struct cfg *c, int argc, char **argv, char **envp, FILE *out, char *err,
              size_t errlen)
{
    const char *config = NULL;
    struct flag fl;
    char name[64], msg[192];

    cfg_defaults(c);

    /* 1. --help anywhere wins over everything else. */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            cfg_usage(out);
            return 1;
        }
    }

    /* 2. Check the shape of every flag before reading anything, and find
     *    --config (the last one wins, as for every flag). */
    for (int i = 1; i < argc; i++) {
        if (next_flag(argc, argv, &i, &fl, err, errlen) != 0)
            return -1;
        if (fl.opt == NULL)
            config = fl.value;
    }

    /* 3. The config file. */
    if (config == NULL)
        config = env_get(envp, "ATTN_CONFIG");
    if (config != NULL && cfg_load_file(c, config, err, errlen) != 0)
        return -1;

    /* 4. The environment: a key's own name, else an alias of it. */
    for (size_t k = 0; k < NOPTS; k++) {
        env_name(name, sizeof name, opts[k].key);
        const char *v = env_get(envp, name);
        for (size_t a = 0; a < NALIASES && v == NULL; a++)
            if (strcmp(aliases[a].key, opts[k].key) == 0) {
                env_name(name, sizeof name, aliases[a].name);
                v = env_get(envp, name);
            }
        if (v != NULL && set_opt(c, &opts[k], v, msg, sizeof msg) != 0) {
            errf(err, errlen, "%s: %s", name, msg);
            return -1;
        }
    }

    /* 5. The flags, in order. */
    for (int i = 1; i < argc; i++) {
        if (next_flag(argc, argv, &i, &fl, err, errlen) != 0)
            return -1;
        if (fl.opt != NULL && set_opt(c, fl.opt, fl.value, msg, sizeof msg) != 0) {
            errf(err, errlen, "%.*s: %s", (int)fl.namelen, fl.name, msg);
            return -1;
        }
    }
    return 0;
}

/* "--key METAVAR", a flag as the usage lists it. */
static void usage_flag(char *buf, size_t len, const char *key, enum opt_type type)
{
    static const char *const metavar[] = {
        [OPT_INT] = "N", [OPT_COUNT] = "N", [OPT_BYTES] = "SIZE",
        [OPT_ADDR] = "ADDR", [OPT_PATH] = "DIR", [OPT_LEVEL] = "LEVEL",
        [OPT_FILE] = "FILE", [OPT_ORIGINS] = "LIST",
    };
    flag_name(buf, len, key);
    size_t n = strlen(buf);
    snprintf(buf + n, len - n, " %s", metavar[type]);
}

void cfg_usage(FILE *out)
{
    char flag[64], env[64], range[64];

    fprintf(out,
            "Usage: attention-server [--config FILE] [--KEY VALUE | --KEY=VALUE]... [--help]\n"
            "\n"
            "Settings, lowest precedence first: defaults, the config file (--config FILE,\n"
            "else ATTN_CONFIG; \"key = value\" lines, '#' comments), the environment\n"
            "(ATTN_<KEY>), then flags. A SIZE is bytes, with an optional K, M, G or T\n"
            "suffix (powers of 1024).\n"
            "\n");
    fprintf(out, "  %-25s %-26s %s\n", "--config FILE", "ATTN_CONFIG",
            "config file to read (default none)");
    for (size_t k = 0; k < NOPTS; k++) {
        const struct opt *o = &opts[k];
        usage_flag(flag, sizeof flag, o->key, o->type);
        env_name(env, sizeof env, o->key);
        fmt_range(range, sizeof range, o);
        fprintf(out, "  %-25s %-26s %s (default %s; %s)\n", flag, env, o->help,
                o->def[0] ? o->def : "empty", range);
    }
    for (size_t a = 0; a < NALIASES; a++) {
        char key_flag[64];
        usage_flag(flag, sizeof flag, aliases[a].name, find_opt(aliases[a].key)->type);
        env_name(env, sizeof env, aliases[a].name);
        flag_name(key_flag, sizeof key_flag, aliases[a].key);
        fprintf(out, "  %-25s %-26s old name of %s\n", flag, env, key_flag);
    }
    fprintf(out, "  %-25s %-26s %s\n", "--help, -h", "", "print this and exit");
}

void cfg_dump(const struct cfg *c, FILE *out)
{
    for (size_t k = 0; k < NOPTS; k++) {
        const struct opt *o = &opts[k];
        const char *field = (const char *)c + o->off;
        fprintf(out, "%-20s = ", o->key);
        switch (o->type) {
        case OPT_INT:
            fprintf(out, "%d\n", *(const int *)(const void *)field);
            break;
        case OPT_COUNT:
        case OPT_BYTES:
            fprintf(out, "%lld\n", *(const long long *)(const void *)field);
            break;
        case OPT_ADDR:
        case OPT_PATH:
        case OPT_FILE:
        case OPT_ORIGINS:
            fprintf(out, "%.*s\n", (int)o->size, field);
            break;
        case OPT_LEVEL:
            fprintf(out, "%s\n", cfg_log_level_str(*(const int *)(const void *)field));
            break;
        }
    }
}

const char *cfg_log_level_str(int level)
{
    if (level < 0 || level >= (int)(sizeof level_names / sizeof level_names[0]))
        return "unknown";
    return level_names[level];
}
