/* config.h -- the service's settings: defaults, config file, environment, flags.
 *
 * The config/ layer (the rule: scripts/layers.sh) owns the settings table
 * and its sources, the CPU count and value parsing; it includes config/ and
 * lib/ only. main.c hands each layer the part of struct cfg it needs.
 *
 * This module knows settings only: no HTTP, no JSON, no core. Every setting
 * is one row of a static table in config.c (key, type, field, range, default,
 * help), and every source is read through that table, so a row added there
 * is at once a file key, an environment variable, a flag, a --help line and
 * a line of the start-up dump. Precedence, lowest first:
 *
 *     defaults < config file < environment < command-line flags
 *
 *     file line      max_body_bytes = 64M
 *     environment    ATTN_MAX_BODY_BYTES=64M
 *     flag           --max-body-bytes 64M   or   --max-body-bytes=64M
 *
 * A renamed key keeps its old name as an alias in all three sources
 * (blas_threads, ATTN_BLAS_THREADS, --blas-threads for threads_per_request).
 * Given both names, the later wins in the file and on the command line, as
 * for a key given twice, and the new name wins in the environment, which
 * has no order; the precedence between sources is unchanged. cfg_set()
 * takes either name; errors and cfg_dump() use the new one.
 *
 * The config file is named by --config FILE, else by ATTN_CONFIG; its lines
 * are "key = value", blank, or whole-line '#' comments. Integers are decimal
 * and parsed strictly (no blanks, no trailing junk, no overflow); the byte
 * sizes (max_body_bytes, conn_memory_limit) also take a K, M, G or T suffix,
 * powers of 1024 ("64M" = 67108864). Each value is checked as it is set, and
 * an error names its source, the key and the allowed range:
 *
 *     struct cfg c;
 *     char err[256];
 *     switch (cfg_parse(&c, argc, argv, environ, stdout, err, sizeof err)) {
 *     case 1:  return 0;                       // --help: usage printed
 *     case -1: fprintf(stderr, "%s\n", err);   // e.g. "--workers: workers: 0
 *              return CFG_EXIT_SETTING;        //  is out of range 1..64"
 *     }
 *     cfg_dump(&c, stderr);
 *
 * Nothing here keeps state: every function works on the caller's struct.
 */
#ifndef CONFIG_CONFIG_H
#define CONFIG_CONFIG_H

#include <stddef.h>
#include <stdio.h>

enum cfg_log_level { CFG_LOG_ERROR, CFG_LOG_WARN, CFG_LOG_INFO, CFG_LOG_DEBUG };

/* attention-server's exit statuses (cfg_usage prints them): 0 after a
 * drain or --help; 2 when start-up refuses a setting, for its value or for
 * what it names (a folder, the TLS pair); 1 for any other failure, at
 * start-up (the port in use, out of memory) or later (a second signal). */
enum cfg_exit { CFG_EXIT_OK = 0, CFG_EXIT_FAILURE = 1, CFG_EXIT_SETTING = 2 };

/* Defaults and ranges; N, L, S, E, H as in core/attention.h. */
struct cfg {
    char bind[64];                  /* "0.0.0.0"; IPv4 or IPv6 address ("::": both) */
    int port;                       /* 8080; 0..65535 (0 = pick a free port) */
    int grpc_port;                  /* 8001; 0..65535 (0 = no gRPC): the gRPC transport's */
    char grpc_address[64];          /* ""; IPv4 or IPv6 address of gRPC; "" = bind's */
    int workers;                    /* 2; 1..64; cfg_parse: unset, main takes the CPUs (config/cpus.h) */
    int workers_explicit;           /* 1 if the file, environment or a flag set workers
                                     * (cfg_set, cfg_parse) */
    int queue_depth;                /* 64; 1..65536 */
    int threads_per_request;        /* 1; 1..16: threads computing one request */
    long long max_body_bytes;       /* 64 MiB; 1 KiB..16 GiB */
    long long max_inflight_bytes;   /* 1 GiB; 1 MiB..1 TiB: bodies held at once */
    long long max_tensor_elements;  /* 16777216; 1..2^32 */
    int max_batch;                  /* 64; 1..65536 (N) */
    int max_target_len;             /* 4096; 1..1048576 (L) */
    int max_source_len;             /* 4096; 1..1048576 (S) */
    int max_embed_dim;              /* 4096; 1..65536 (E, kdim, vdim) */
    int max_heads;                  /* 256; 1..65536 (H) */
    long long max_weights_elements; /* 67108864 (N·H·L·S of the weights output); 1..2^34 */
    int max_sequences;              /* 1024; 1..1048576: sequences held */
    int sequence_idle_timeout;      /* 600 seconds; 1..604800: a sequence's life without a step */
    long long max_sequence_bytes;   /* 1 GiB; 1 MiB..1 TiB: every sequence's cache together */
    int max_layers;                 /* 256; 1..65536: layers of a sequence (a request's layer) */
    int conn_timeout;               /* 30 seconds; 1..3600 */
    long long conn_memory_limit;    /* 32 KiB (libmicrohttpd per connection; it zeroes it per request); 16 KiB..16 MiB */
    int max_connections;            /* 1024; 1..65536: open connections */
    int header_timeout;             /* 20 seconds; 1..3600: to receive the headers */
    int body_timeout;               /* 120 seconds; 1..3600: to receive the body */
    long long min_upload_rate;      /* 1K bytes/s; 0..1G (0: none), after a 5 s grace */
    long long min_send_rate;        /* 1K bytes/s; 0..1G (0: none), after a 5 s grace */
    long long max_answer_bytes;     /* 1 GiB; 1 MiB..1 TiB: answers not yet sent, all together */
    int drain_timeout;              /* 20 seconds; 1..3600: SIGTERM's deadline */
    int log_level;                  /* enum cfg_log_level; written error|warn|info|debug; info */
    char static_dir[256];           /* "web"; the browser client's static files; non-empty */
    char tls_cert_file[256];        /* ""; PEM certificate (chain); "" = plain HTTP */
    char tls_key_file[256];         /* ""; PEM private key (both or neither: http/tls.h) */
    char cors_allow_origin[1024];   /* ""; "" = no CORS, "*", or "https://a.example,..." */
    char model_repository[256];     /* "models"; DIR/<name>/{config.json,model.safetensors}; "" = none */
    int model_repository_explicit;  /* 1 if the file, environment or a flag set model_repository
                                     * (cfg_set, cfg_parse): only the default may be missing */
    char admin_token[128];          /* ""; Bearer token of /v2/repository; "" = disabled (403) */
};

/* Fill c with the defaults (every byte, padding and string tails included). */
void cfg_defaults(struct cfg *c);

/* Set one key from its string value. 0 on success; -1 with a message in err
 * naming the key and the allowed range ("workers: 0 is out of range 1..64"),
 * or "unknown key 'x'". c is unchanged on error. err may be NULL. */
int cfg_set(struct cfg *c, const char *key, const char *value, char *err, size_t errlen);

/* Read a "key = value" file on top of c: blank lines and whole-line '#'
 * comments allowed, blanks around key and value trimmed, a later line wins.
 * 0 on success; -1 with the file and line in err
 * ("x.conf:3: workers: abc is not an integer"); keys before the bad line
 * stay set. */
int cfg_load_file(struct cfg *c, const char *path, char *err, size_t errlen);

/* The whole precedence, starting from cfg_defaults(c): config file
 * (--config FILE, else ATTN_CONFIG) < environment (ATTN_<KEY UPPERCASE>,
 * e.g. ATTN_MAX_BODY_BYTES) < flags (--max-body-bytes N or
 * --max-body-bytes=N: the key with '_' written '-'; a later flag wins).
 * envp is the environment to read, NULL-terminated ("NAME=value"; pass
 * `environ` in main); NULL means empty. --help or -h anywhere prints the usage
 * to out and returns 1. Otherwise 0 to run, or -1 with err naming the source
 * ("--port", "ATTN_PORT", "x.conf:3") and the problem. Unknown flags, missing
 * flag values (a following "--..." counts as missing) and positional
 * arguments are errors; unknown ATTN_* variables are ignored. */
int cfg_parse(struct cfg *c, int argc, char **argv, char **envp, FILE *out, char *err,
              size_t errlen);

/* Every flag with its environment variable, default and range, one per line. */
void cfg_usage(FILE *out);

/* The effective configuration as "key = value" lines, every key, in a form
 * cfg_load_file() reads back (for the start-up log). */
void cfg_dump(const struct cfg *c, FILE *out);

/* Whether dir may be static_dir, whose readable .html/.js/.json/... files
 * anyone can fetch: -1 with the reason in msg when it must be refused ("/"
 * or a top-level directory such as /etc or /home, or not a directory); 1
 * with a warning in msg when it has no index.html (not the web client's
 * folder?) or does not exist (every file answers 404); 0 when it looks right. */
int cfg_check_static_dir(const char *dir, char *msg, size_t msglen);

/* "error", "warn", "info", "debug"; "unknown" for anything else. */
const char *cfg_log_level_str(int level);

#endif
