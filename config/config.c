/* config.c -- the settings table and its four readers (defaults, file,
 * environment, flags), plus usage and dump. See config.h; a value is parsed
 * and checked in values.c. */
#include "config/config.h"
#include "config/values.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Offset of field k, and a compile-time check that k has type T: comparing
 * distinct pointer types draws a warning (as the Linux kernel's typecheck()),
 * so an int row pointing at a long long field cannot slip through. */
#define FIELD(k, T) (offsetof(struct cfg, k) + 0 * sizeof((T *)0 == &((struct cfg *)0)->k))
#define SIZE(k) sizeof(((struct cfg *)0)->k)

#define INT(k, lo, hi, def, help) {#k, SETTING_T_INT, FIELD(k, int), SIZE(k), lo, hi, def, help}
#define COUNT(k, lo, hi, def, help) \
    {#k, SETTING_T_COUNT, FIELD(k, long long), SIZE(k), lo, hi, def, help}
#define BYTES(k, lo, hi, def, help) \
    {#k, SETTING_T_BYTES, FIELD(k, long long), SIZE(k), lo, hi, def, help}
#define STR(k, type, def, help) {#k, type, FIELD(k[0], char), SIZE(k), 0, 0, def, help}
#define LEVEL(k, def, help) \
    {#k, SETTING_T_LEVEL, FIELD(k, int), SIZE(k), CFG_LOG_ERROR, CFG_LOG_DEBUG, def, help}

static const struct setting settings[] = {
    STR(bind, SETTING_T_ADDR, "0.0.0.0", "address to listen on"),
    INT(port, 0, 65535, "8080", "TCP port; 0 picks a free one"),
    INT(grpc_port, 0, 65535, "8001",
        "TCP port of the Open Inference Protocol over gRPC; 0 turns gRPC off"),
    STR(grpc_address, SETTING_T_ADDR, "", "address gRPC listens on; empty: bind's"),
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
    INT(max_sequences, 1, 1048576, "1024",
        "sequences held at once; past it idle ones are evicted, else 503"),
    INT(sequence_idle_timeout, 1, 604800, "600",
        "seconds a sequence may go without a step before it is dropped"),
    BYTES(max_sequence_bytes, 1LL << 20, 1LL << 40, "1G",
          "bytes of every sequence's KV cache together (allocated blocks)"),
    INT(max_layers, 1, 65536, "256", "layers a sequence may hold, each its own cache "
        "(a request's layer is 0..max_layers-1)"),
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
        "seconds SIGTERM waits for connections to close before cutting uploads"),
    LEVEL(log_level, "info", "least severe messages logged"),
    STR(static_dir, SETTING_T_PATH, "web", "directory of the browser client's static files"),
    STR(tls_cert_file, SETTING_T_FILE, "", "PEM certificate (chain) for HTTPS; empty: plain HTTP"),
    STR(tls_key_file, SETTING_T_FILE, "", "PEM private key of tls_cert_file"),
    STR(cors_allow_origin, SETTING_T_ORIGINS, "",
        "origins whose pages may call the service (CORS); empty: none"),
    STR(model_repository, SETTING_T_DIR, "models",
        "directory of server-held models, one subdirectory each; empty: none"),
    STR(admin_token, SETTING_T_SECRET, "",
        "bearer token of the model repository endpoints; empty: they answer 403"),
};

#define NSETTINGS (sizeof settings / sizeof settings[0])

/* Old names still read everywhere a key is: the file, the environment
 * (ATTN_<NAME>) and the flags (--name). An alias is the same setting under
 * another name, so where a source has an order, the file's lines and the
 * flags, the later of the two wins, as for a key given twice; the
 * environment has none, and there the canonical name wins. Errors name the
 * canonical key; cfg_dump() writes only it. */
static const struct alias {
    const char *name; /* the old name */
    const char *key;  /* the key of settings[] it stands for */
} aliases[] = {
    {"blas_threads", "threads_per_request"},
};

#define NALIASES (sizeof aliases / sizeof aliases[0])

/* The row of a key, or of the key an alias stands for; NULL if neither. */
static const struct setting *find_setting(const char *key)
{
    for (size_t i = 0; i < NSETTINGS; i++)
        if (strcmp(settings[i].key, key) == 0)
            return &settings[i];
    for (size_t a = 0; a < NALIASES; a++)
        if (strcmp(aliases[a].name, key) == 0)
            return find_setting(aliases[a].key);
    return NULL;
}

void cfg_defaults(struct cfg *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < NSETTINGS; i++) {
        int rc = cfg_set_value(c, &settings[i], settings[i].def, NULL, 0);
        assert(rc == 0 && "a default in the table is out of its own range");
        (void)rc;
    }
}

/* A value from a source (the file, the environment, a flag), not a default:
 * cfg_set_value, noting the settings whose default is treated apart (main.c:
 * workers from the CPUs, a missing default model_repository). */
static int set_from_source(struct cfg *c, const struct setting *o, const char *value, char *err,
                           size_t errlen)
{
    int rc = cfg_set_value(c, o, value, err, errlen);
    if (rc == 0 && o->off == offsetof(struct cfg, model_repository))
        c->model_repository_explicit = 1;
    if (rc == 0 && o->off == offsetof(struct cfg, workers))
        c->workers_explicit = 1;
    return rc;
}

int cfg_set(struct cfg *c, const char *key, const char *value, char *err, size_t errlen)
{
    const struct setting *o = find_setting(key);
    if (o == NULL) {
        cfg_errf(err, errlen, "unknown key '%.64s'", key);
        return -1;
    }
    return set_from_source(c, o, value, err, errlen);
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
        cfg_errf(err, errlen, "%s: %s", path, strerror(errno));
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
            cfg_errf(err, errlen, "%s:%d: expected 'key = value', got '%.64s'", path, lineno, s);
            rc = -1;
            goto done;
        }
        if (cfg_set(c, key, trim(eq + 1), msg, sizeof msg) != 0) {
            cfg_errf(err, errlen, "%s:%d: %s", path, lineno, msg);
            rc = -1;
            goto done;
        }
    }
    if (ferror(f)) {
        cfg_errf(err, errlen, "%s: read error: %s", path, strerror(errno));
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

/* One flag of argv, as read by next_flag(). setting is NULL for --config. */
struct flag {
    const struct setting *setting;
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
            cfg_errf(err, errlen, "unknown flag '%.64s' (try --help)", arg);
        else
            cfg_errf(err, errlen, "unexpected argument '%.64s' (flags only; try --help)", arg);
        return -1;
    }
    const char *eq = strchr(arg, '=');
    fl->name = arg;
    fl->namelen = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
    fl->setting = NULL;

    char buf[64];
    int known = fl->namelen == strlen("--config") && strncmp(arg, "--config", fl->namelen) == 0;
    for (size_t k = 0; k < NSETTINGS + NALIASES && !known; k++) {
        const char *key = k < NSETTINGS ? settings[k].key : aliases[k - NSETTINGS].name;
        flag_name(buf, sizeof buf, key);
        if (strlen(buf) == fl->namelen && strncmp(arg, buf, fl->namelen) == 0) {
            fl->setting = find_setting(key);
            known = 1;
        }
    }
    if (!known) {
        int n = fl->namelen > 64 ? 64 : (int)fl->namelen;
        cfg_errf(err, errlen, "unknown flag '%.*s' (try --help)", n, arg);
        return -1;
    }
    if (eq != NULL) {
        fl->value = eq + 1;
    } else if (*i + 1 < argc && strncmp(argv[*i + 1], "--", 2) != 0) {
        fl->value = argv[++*i];
    } else {
        cfg_errf(err, errlen, "%s: missing value", arg);
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
        if (fl.setting == NULL)
            config = fl.value;
    }

    /* 3. The config file. */
    if (config == NULL)
        config = env_get(envp, "ATTN_CONFIG");
    if (config != NULL && cfg_load_file(c, config, err, errlen) != 0)
        return -1;

    /* 4. The environment: a key's own name, else an alias of it. */
    for (size_t k = 0; k < NSETTINGS; k++) {
        env_name(name, sizeof name, settings[k].key);
        const char *v = env_get(envp, name);
        for (size_t a = 0; a < NALIASES && v == NULL; a++)
            if (strcmp(aliases[a].key, settings[k].key) == 0) {
                env_name(name, sizeof name, aliases[a].name);
                v = env_get(envp, name);
            }
        if (v != NULL && set_from_source(c, &settings[k], v, msg, sizeof msg) != 0) {
            cfg_errf(err, errlen, "%s: %s", name, msg);
            return -1;
        }
    }

    /* 5. The flags, in order. */
    for (int i = 1; i < argc; i++) {
        if (next_flag(argc, argv, &i, &fl, err, errlen) != 0)
            return -1;
        if (fl.setting != NULL && set_from_source(c, fl.setting, fl.value, msg, sizeof msg) != 0) {
            cfg_errf(err, errlen, "%.*s: %s", (int)fl.namelen, fl.name, msg);
            return -1;
        }
    }
    return 0;
}

/* "--key METAVAR", a flag as the usage lists it. */
static void usage_flag(char *buf, size_t len, const char *key, enum setting_type type)
{
    static const char *const metavar[] = {
        [SETTING_T_INT] = "N", [SETTING_T_COUNT] = "N", [SETTING_T_BYTES] = "SIZE",
        [SETTING_T_ADDR] = "ADDR", [SETTING_T_PATH] = "DIR", [SETTING_T_LEVEL] = "LEVEL",
        [SETTING_T_FILE] = "FILE", [SETTING_T_DIR] = "DIR", [SETTING_T_ORIGINS] = "LIST",
        [SETTING_T_SECRET] = "TOKEN",
    };
    _Static_assert(sizeof metavar / sizeof metavar[0] == SETTING_TYPES, "a metavar per type");
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
    for (size_t k = 0; k < NSETTINGS; k++) {
        const struct setting *o = &settings[k];
        usage_flag(flag, sizeof flag, o->key, o->type);
        env_name(env, sizeof env, o->key);
        cfg_fmt_range(range, sizeof range, o);
        const char *def = o->def[0] ? o->def : "empty";
        if (strcmp(o->key, "workers") == 0)
            def = "the CPUs this process may use / threads_per_request";
        fprintf(out, "  %-25s %-26s %s (default %s; %s)\n", flag, env, o->help, def, range);
    }
    for (size_t a = 0; a < NALIASES; a++) {
        char key_flag[64];
        usage_flag(flag, sizeof flag, aliases[a].name, find_setting(aliases[a].key)->type);
        env_name(env, sizeof env, aliases[a].name);
        flag_name(key_flag, sizeof key_flag, aliases[a].key);
        fprintf(out, "  %-25s %-26s old name of %s\n", flag, env, key_flag);
    }
    fprintf(out, "  %-25s %-26s %s\n", "--help, -h", "", "print this and exit");
    fprintf(out,
            "\n"
            "Exit status: %d after a drain (SIGTERM or SIGINT) or --help; %d when start-up\n"
            "refuses a setting, for its value or for what it names (static_dir,\n"
            "model_repository, the TLS files); %d for any other failure (the port in use,\n"
            "out of memory, a second signal during the drain).\n",
            CFG_EXIT_OK, CFG_EXIT_SETTING, CFG_EXIT_FAILURE);
}

void cfg_dump(const struct cfg *c, FILE *out)
{
    for (size_t k = 0; k < NSETTINGS; k++) {
        const struct setting *o = &settings[k];
        const char *field = (const char *)c + o->off;
        fprintf(out, "%-20s = ", o->key);
        switch (o->type) {
        case SETTING_T_INT:
            fprintf(out, "%d\n", *(const int *)(const void *)field);
            break;
        case SETTING_T_COUNT:
        case SETTING_T_BYTES:
            fprintf(out, "%lld\n", *(const long long *)(const void *)field);
            break;
        case SETTING_T_ADDR:
        case SETTING_T_PATH:
        case SETTING_T_FILE:
        case SETTING_T_DIR:
        case SETTING_T_ORIGINS:
            fprintf(out, "%.*s\n", (int)o->size, field);
            break;
        case SETTING_T_SECRET: /* never printed */
            fprintf(out, "%s\n", *field ? "(set)" : "");
            break;
        case SETTING_T_LEVEL:
            fprintf(out, "%s\n", cfg_log_level_str(*(const int *)(const void *)field));
            break;
        }
    }
}

