/* test_config.c -- config/: defaults, every type's good and bad values, the
 * file format, the precedence defaults < file < environment < flags, and the
 * command line (--help, --key=value, missing values, unknown flags). */
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"

/* Every key, as the spec lists them; the dump test checks the module has no more. */
static const char *const keys[] = {
    "bind", "port", "workers", "queue_depth", "threads_per_request", "max_body_bytes",
    "max_inflight_bytes",
    "max_tensor_elements", "max_batch", "max_target_len", "max_source_len",
    "max_embed_dim", "max_heads", "max_weights_elements", "max_sequences",
    "sequence_idle_timeout", "max_sequence_bytes", "conn_timeout",
    "conn_memory_limit", "max_connections", "header_timeout", "body_timeout",
    "min_upload_rate", "min_send_rate", "max_answer_bytes", "drain_timeout", "log_level",
    "static_dir", "tls_cert_file", "tls_key_file", "cors_allow_origin", "model_repository",
    "admin_token",
};
#define NKEYS (sizeof keys / sizeof keys[0])

/* A temp file holding text; its name goes to path (at least 64 bytes). */
static void write_temp(char *path, const char *text)
{
    strcpy(path, "/tmp/test_config_XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0, "mkstemp failed");
    size_t n = strlen(text);
    cr_assert_eq(write(fd, text, n), (ssize_t)n);
    close(fd);
}

/* argv = {"attention-server", args..., NULL} from a NULL-terminated list. */
static int parse(struct cfg *c, char **envp, char *err, size_t errlen, ...)
{
    char *argv[32] = {"attention-server"};
    int argc = 1;
    va_list ap;
    va_start(ap, errlen);
    for (char *a; (a = va_arg(ap, char *)) != NULL;) {
        cr_assert(argc < 31);
        argv[argc++] = a;
    }
    va_end(ap);
    FILE *out = fopen("/dev/null", "w");
    int rc = cfg_parse(c, argc, argv, envp, out, err, errlen);
    fclose(out);
    return rc;
}

/* The dump of c as a malloc'd string. (Not inlined: GCC 12 then takes the
 * returned buffer for the local pointer it was written through and warns
 * -Wdangling-pointer at every use.) */
static char *dump_str(const struct cfg *c) __attribute__((noinline));
static char *dump_str(const struct cfg *c)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cfg_dump(c, f);
    fclose(f);
    return buf;
}

/* Expect cfg_set(key, value) to fail with exactly msg, leaving c as it was. */
static void expect_set_error(const char *key, const char *value, const char *msg)
{
    struct cfg c;
    char err[256] = "";
    cfg_defaults(&c);
    char *before = dump_str(&c);
    cr_assert_eq(cfg_set(&c, key, value, err, sizeof err), -1, "%s = '%s' was accepted", key,
                 value);
    cr_expect_str_eq(err, msg, "%s = '%s'", key, value);
    char *after = dump_str(&c);
    cr_expect_str_eq(after, before, "a failed cfg_set changed the config");
    free(before);
    free(after);
}

static void expect_set_ok(struct cfg *c, const char *key, const char *value)
{
    char err[256] = "";
    cr_assert_eq(cfg_set(c, key, value, err, sizeof err), 0, "%s = '%s': %s", key, value, err);
}

Test(config, defaults)
{
    struct cfg c;
    memset(&c, 0xa5, sizeof c);
    cfg_defaults(&c);
    cr_expect_str_eq(c.bind, "0.0.0.0");
    cr_expect_eq(c.port, 8080);
    cr_expect_eq(c.workers, 2);
    cr_expect_eq(c.queue_depth, 64);
    cr_expect_eq(c.threads_per_request, 1);
    cr_expect_eq(c.max_body_bytes, 64LL << 20);
    cr_expect_eq(c.max_tensor_elements, 16777216);
    cr_expect_eq(c.max_batch, 64);
    cr_expect_eq(c.max_target_len, 4096);
    cr_expect_eq(c.max_source_len, 4096);
    cr_expect_eq(c.max_embed_dim, 4096);
    cr_expect_eq(c.max_heads, 256);
    cr_expect_eq(c.max_weights_elements, 67108864);
    cr_expect_eq(c.conn_timeout, 30);
    cr_expect_eq(c.conn_memory_limit, 32768);
    cr_expect_eq(c.max_connections, 1024);
    cr_expect_eq(c.header_timeout, 20);
    cr_expect_eq(c.body_timeout, 120);
    cr_expect_eq(c.min_upload_rate, 1024);
    cr_expect_eq(c.min_send_rate, 1024);
    cr_expect_eq(c.max_answer_bytes, 1LL << 30);
    cr_expect_eq(c.drain_timeout, 20);
    cr_expect_eq(c.log_level, CFG_LOG_INFO);
    cr_expect_str_eq(c.static_dir, "web");
    cr_expect_str_eq(c.tls_cert_file, "");
    cr_expect_str_eq(c.tls_key_file, "");
    cr_expect_str_eq(c.cors_allow_origin, "");
    cr_expect_str_eq(c.model_repository, "models");
    cr_expect_eq(c.model_repository_explicit, 0);
}

/* model_repository's default may be missing at start-up (main.c),
 * a value from any source may not: each source marks it as set, even to
 * the default's own value, and even to empty. */
Test(config, model_repository_set_by_a_source_is_explicit)
{
    struct cfg c;
    char err[256] = "", path[64];
    cr_assert_eq(parse(&c, NULL, err, sizeof err, NULL), 0, "%s", err);
    cr_expect_str_eq(c.model_repository, "models");
    cr_expect_eq(c.model_repository_explicit, 0, "the default is not explicit");
    cr_assert_eq(parse(&c, NULL, err, sizeof err, "--model-repository", "models", NULL), 0);
    cr_expect_eq(c.model_repository_explicit, 1, "a flag, even with the default's value");
    char *envp[] = {"ATTN_MODEL_REPOSITORY=", NULL};
    cr_assert_eq(parse(&c, envp, err, sizeof err, NULL), 0);
    cr_expect_str_eq(c.model_repository, "");
    cr_expect_eq(c.model_repository_explicit, 1, "the environment, even empty");
    write_temp(path, "model_repository = /srv/models\n");
    cr_assert_eq(parse(&c, NULL, err, sizeof err, "--config", path, NULL), 0, "%s", err);
    unlink(path);
    cr_expect_str_eq(c.model_repository, "/srv/models");
    cr_expect_eq(c.model_repository_explicit, 1, "the file");
    cr_assert_eq(parse(&c, NULL, err, sizeof err, "--port", "1", NULL), 0);
    cr_expect_eq(c.model_repository_explicit, 0, "another key leaves it unset");
}

Test(config, log_level_names)
{
    cr_expect_str_eq(cfg_log_level_str(CFG_LOG_ERROR), "error");
    cr_expect_str_eq(cfg_log_level_str(CFG_LOG_WARN), "warn");
    cr_expect_str_eq(cfg_log_level_str(CFG_LOG_INFO), "info");
    cr_expect_str_eq(cfg_log_level_str(CFG_LOG_DEBUG), "debug");
    cr_expect_str_eq(cfg_log_level_str(-1), "unknown");
    cr_expect_str_eq(cfg_log_level_str(4), "unknown");
}

Test(config, set_accepts_every_type)
{
    struct cfg c;
    cfg_defaults(&c);
    expect_set_ok(&c, "bind", "127.0.0.1");
    expect_set_ok(&c, "port", "0");
    expect_set_ok(&c, "workers", "+8");
    expect_set_ok(&c, "max_tensor_elements", "4294967296");
    expect_set_ok(&c, "max_weights_elements", "17179869184");
    expect_set_ok(&c, "log_level", "DEBUG");
    expect_set_ok(&c, "static_dir", "/srv/attention/web");
    cr_expect_str_eq(c.bind, "127.0.0.1");
    cr_expect_eq(c.port, 0);
    cr_expect_eq(c.workers, 8);
    cr_expect_eq(c.max_tensor_elements, 1LL << 32);
    cr_expect_eq(c.max_weights_elements, 1LL << 34);
    cr_expect_eq(c.log_level, CFG_LOG_DEBUG);
    cr_expect_str_eq(c.static_dir, "/srv/attention/web");
    expect_set_ok(&c, "log_level", "error");
    cr_expect_eq(c.log_level, CFG_LOG_ERROR);
    expect_set_ok(&c, "log_level", "warn");
    cr_expect_eq(c.log_level, CFG_LOG_WARN);
}

Test(config, byte_sizes_take_suffixes)
{
    static const struct {
        const char *text;
        long long bytes;
    } cases[] = {
        {"1024", 1024},        {"1k", 1024},          {"1K", 1024},
        {"3m", 3LL << 20},     {"64M", 64LL << 20},   {"2g", 2LL << 30},
        {"16G", 16LL << 30},   {"17179869184", 1LL << 34},
    };
    struct cfg c;
    cfg_defaults(&c);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        expect_set_ok(&c, "max_body_bytes", cases[i].text);
        cr_expect_eq(c.max_body_bytes, cases[i].bytes, "%s", cases[i].text);
    }
    expect_set_ok(&c, "conn_memory_limit", "16K");
    cr_expect_eq(c.conn_memory_limit, 16384);
    expect_set_ok(&c, "conn_memory_limit", "16m");
    cr_expect_eq(c.conn_memory_limit, 16777216);
}

Test(config, unknown_key)
{
    expect_set_error("wokers", "2", "unknown key 'wokers'");
    expect_set_error("", "2", "unknown key ''");
    expect_set_error("max-body-bytes", "1M", "unknown key 'max-body-bytes'");
}

Test(config, integer_rejects_non_integers)
{
    expect_set_error("workers", "abc", "workers: abc is not an integer");
    expect_set_error("workers", "", "workers: empty value, expected 1..64");
    expect_set_error("workers", "12abc", "workers: 12abc is not an integer");
    expect_set_error("workers", " 2", "workers:  2 is not an integer");
    expect_set_error("workers", "2 ", "workers: 2  is not an integer");
    expect_set_error("workers", "0x10", "workers: 0x10 is not an integer");
    expect_set_error("workers", "1.5", "workers: 1.5 is not an integer");
    expect_set_error("workers", "1e3", "workers: 1e3 is not an integer");
    expect_set_error("workers", "-", "workers: - is not an integer");
    expect_set_error("workers", "--1", "workers: --1 is not an integer");
    expect_set_error("workers", "4k", "workers: 4k is not an integer");
    expect_set_error("max_tensor_elements", "1M", "max_tensor_elements: 1M is not an integer");
}

Test(config, integer_out_of_range_low)
{
    expect_set_error("workers", "0", "workers: 0 is out of range 1..64");
    expect_set_error("port", "-1", "port: -1 is out of range 0..65535");
    expect_set_error("queue_depth", "0", "queue_depth: 0 is out of range 1..65536");
    expect_set_error("threads_per_request", "-3", "threads_per_request: -3 is out of range 1..16");
    expect_set_error("max_tensor_elements", "0",
                     "max_tensor_elements: 0 is out of range 1..4294967296");
    expect_set_error("max_batch", "0", "max_batch: 0 is out of range 1..65536");
    expect_set_error("max_target_len", "0", "max_target_len: 0 is out of range 1..1048576");
    expect_set_error("max_source_len", "0", "max_source_len: 0 is out of range 1..1048576");
    expect_set_error("max_embed_dim", "0", "max_embed_dim: 0 is out of range 1..65536");
    expect_set_error("max_heads", "0", "max_heads: 0 is out of range 1..65536");
    expect_set_error("max_weights_elements", "0",
                     "max_weights_elements: 0 is out of range 1..17179869184");
    expect_set_error("conn_timeout", "0", "conn_timeout: 0 is out of range 1..3600");
    expect_set_error("max_body_bytes", "1023", "max_body_bytes: 1023 is out of range 1K..16G");
    expect_set_error("conn_memory_limit", "16383",
                     "conn_memory_limit: 16383 is out of range 16K..16M");
    expect_set_error("conn_memory_limit", "-1k",
                     "conn_memory_limit: -1k is out of range 16K..16M");
}

Test(config, integer_out_of_range_high)
{
    expect_set_error("workers", "65", "workers: 65 is out of range 1..64");
    expect_set_error("port", "65536", "port: 65536 is out of range 0..65535");
    expect_set_error("queue_depth", "65537", "queue_depth: 65537 is out of range 1..65536");
    expect_set_error("threads_per_request", "17", "threads_per_request: 17 is out of range 1..16");
    expect_set_error("max_tensor_elements", "4294967297",
                     "max_tensor_elements: 4294967297 is out of range 1..4294967296");
    expect_set_error("max_batch", "65537", "max_batch: 65537 is out of range 1..65536");
    expect_set_error("max_target_len", "1048577",
                     "max_target_len: 1048577 is out of range 1..1048576");
    expect_set_error("max_source_len", "1048577",
                     "max_source_len: 1048577 is out of range 1..1048576");
    expect_set_error("max_embed_dim", "65537", "max_embed_dim: 65537 is out of range 1..65536");
    expect_set_error("max_heads", "65537", "max_heads: 65537 is out of range 1..65536");
    expect_set_error("max_weights_elements", "17179869185",
                     "max_weights_elements: 17179869185 is out of range 1..17179869184");
    expect_set_error("conn_timeout", "3601", "conn_timeout: 3601 is out of range 1..3600");
    expect_set_error("max_body_bytes", "17G", "max_body_bytes: 17G is out of range 1K..16G");
    expect_set_error("conn_memory_limit", "16777217",
                     "conn_memory_limit: 16777217 is out of range 16K..16M");
}

Test(config, integer_overflow_is_out_of_range)
{
    /* Fits a long long but not an int: must not wrap into range. */
    expect_set_error("workers", "4294967298", "workers: 4294967298 is out of range 1..64");
    expect_set_error("port", "99999999999999999999",
                     "port: 99999999999999999999 is out of range 0..65535");
    expect_set_error("max_weights_elements", "-99999999999999999999",
                     "max_weights_elements: -99999999999999999999 is out of range "
                     "1..17179869184");
    /* The suffix multiplication overflows; wrapped, (2^34 + 1)·2^30 would be 1G. */
    expect_set_error("max_body_bytes", "17179869185G",
                     "max_body_bytes: 17179869185G is out of range 1K..16G");
}

Test(config, byte_size_rejects_bad_suffixes)
{
    const char *msg_tail = " is not a byte size (integer, optional K, M, G or T suffix)";
    const char *bad[] = {"64MB", "64MiB", "1P", "1kk", "k", "1 k", "1.5M", "0x400"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char msg[128];
        snprintf(msg, sizeof msg, "max_body_bytes: %s%s", bad[i], msg_tail);
        expect_set_error("max_body_bytes", bad[i], msg);
    }
}

Test(config, bad_bind_address)
{
    const char *bad[] = {"localhost", "1.2.3", "256.0.0.1", "::1::2", "", "1.2.3.4 ",
                         "0.0.0.0:80", "[::1]", "::1 "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char msg[128];
        snprintf(msg, sizeof msg, "bind: '%s' is not an IPv4 or IPv6 address", bad[i]);
        expect_set_error("bind", bad[i], msg);
    }
}

Test(config, bad_log_level)
{
    expect_set_error("log_level", "verbose",
                     "log_level: 'verbose' is not one of error, warn, info, debug");
    expect_set_error("log_level", "warning",
                     "log_level: 'warning' is not one of error, warn, info, debug");
    expect_set_error("log_level", "2", "log_level: '2' is not one of error, warn, info, debug");
    expect_set_error("log_level", "", "log_level: '' is not one of error, warn, info, debug");
}

Test(config, static_dir_length)
{
    char path[300];
    memset(path, 'a', sizeof path);
    path[255] = '\0';
    struct cfg c;
    cfg_defaults(&c);
    expect_set_ok(&c, "static_dir", path);
    cr_expect_eq(strlen(c.static_dir), 255);
    path[255] = 'a';
    path[256] = '\0';
    char err[256];
    cr_expect_eq(cfg_set(&c, "static_dir", path, err, sizeof err), -1);
    cr_expect(strstr(err, "static_dir: ") == err, "%s", err);
    cr_expect(strstr(err, "shorter than 256 bytes") != NULL, "%s", err);
    expect_set_error("static_dir", "", "static_dir: '' must be non-empty and shorter than 256 bytes");
}

/* The TLS files may be empty (plain HTTP) or any name that fits; whether
 * they exist and hold PEM is the server's check at start-up (http/tls.h). */
Test(config, tls_files)
{
    struct cfg c;
    cfg_defaults(&c);
    expect_set_ok(&c, "tls_cert_file", "/etc/attention/cert.pem");
    expect_set_ok(&c, "tls_key_file", "key.pem");
    cr_expect_str_eq(c.tls_cert_file, "/etc/attention/cert.pem");
    cr_expect_str_eq(c.tls_key_file, "key.pem");
    expect_set_ok(&c, "tls_cert_file", "");
    cr_expect_str_eq(c.tls_cert_file, "");
    char path[300];
    memset(path, 'a', sizeof path);
    path[256] = '\0';
    char err[256];
    cr_expect_eq(cfg_set(&c, "tls_key_file", path, err, sizeof err), -1);
    cr_expect(strstr(err, "tls_key_file: ") == err, "%s", err);
    cr_expect(strstr(err, "shorter than 256 bytes") != NULL, "%s", err);

    /* from the file, "key =" with nothing after it is the empty name */
    char file[64];
    write_temp(file, "tls_cert_file = c.pem\ntls_key_file = k.pem\ntls_cert_file =\n");
    cfg_defaults(&c);
    cr_expect_eq(cfg_load_file(&c, file, err, sizeof err), 0, "%s", err);
    unlink(file);
    cr_expect_str_eq(c.tls_cert_file, "");
    cr_expect_str_eq(c.tls_key_file, "k.pem");
}

/* cors_allow_origin: empty, "*", or origins as browsers send them, with
 * commas (and blanks around them) between; no paths, no "null", no "*" in
 * a list. */
Test(config, cors_allow_origin)
{
    static const char *const good[] = {
        "", "*", "https://a.example", "http://localhost:3000",
        "https://a.example,http://127.0.0.1:8080", "https://a.example, https://b.example ",
        "http://[::1]:8080",
    };
    struct cfg c;
    cfg_defaults(&c);
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        expect_set_ok(&c, "cors_allow_origin", good[i]);
        cr_expect_str_eq(c.cors_allow_origin, good[i]);
    }
    static const struct {
        const char *value, *item;
    } bad[] = {
        {"https://a.example/", "https://a.example/"},
        {"a.example", "a.example"},
        {"null", "null"},
        {"*,https://a.example", "*"},
        {"https://a.example,", ""},
        {"https://a.example,,https://b.example", ""},
        {"ftp://a.example", "ftp://a.example"},
        {"https://", "https://"},
        {"https://a example", "https://a example"},
        {"https://a.example;https://b.example", "https://a.example;https://b.example"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char msg[256];
        snprintf(msg, sizeof msg,
                 "cors_allow_origin: '%s' is not an origin (scheme://host[:port], e.g. "
                 "https://app.example.com; or * alone)", bad[i].item);
        expect_set_error("cors_allow_origin", bad[i].value, msg);
    }
    char big[1100];
    memset(big, 'a', sizeof big);
    memcpy(big, "https://", 8);
    big[1024] = '\0';
    char err[256];
    cr_expect_eq(cfg_set(&c, "cors_allow_origin", big, err, sizeof err), -1);
    cr_expect(strstr(err, "shorter than 1024 bytes") != NULL, "%s", err);
}

/* No stale bytes after a string's NUL, so equal configs are equal bytes. */
Test(config, strings_are_zero_padded)
{
    struct cfg c;
    memset(&c, 0xa5, sizeof c);
    cfg_defaults(&c);
    for (size_t i = strlen(c.static_dir); i < sizeof c.static_dir; i++)
        cr_assert_eq(c.static_dir[i], 0, "static_dir[%zu] after cfg_defaults", i);
    expect_set_ok(&c, "bind", "192.168.100.200");
    expect_set_ok(&c, "bind", "1.2.3.4");
    cr_assert_str_eq(c.bind, "1.2.3.4");
    for (size_t i = strlen(c.bind); i < sizeof c.bind; i++)
        cr_assert_eq(c.bind[i], 0, "bind[%zu] after a shorter value", i);
}

Test(config, error_buffer_may_be_null_or_small)
{
    struct cfg c;
    cfg_defaults(&c);
    cr_expect_eq(cfg_set(&c, "workers", "0", NULL, 0), -1);
    char small[8];
    cr_expect_eq(cfg_set(&c, "workers", "0", small, sizeof small), -1);
    cr_expect_str_eq(small, "workers");
}

Test(config, file_parsing)
{
    char path[64];
    write_temp(path, "# a comment\n"
                     "\n"
                     "   \t\n"
                     "  # an indented comment\n"
                     "port=9000\n"
                     "\tworkers \t=\t 4  \n"
                     "bind = 127.0.0.1\r\n"
                     "static_dir = /srv/my web\n"
                     "max_body_bytes = 1M\n"
                     "log_level = warn\n"
                     "workers = 5\n"
                     "max_heads = 8"); /* no final newline */
    struct cfg c;
    char err[256] = "";
    cfg_defaults(&c);
    int rc = cfg_load_file(&c, path, err, sizeof err);
    unlink(path);
    cr_assert_eq(rc, 0, "%s", err);
    cr_expect_eq(c.port, 9000);
    cr_expect_eq(c.workers, 5, "a later line wins");
    cr_expect_str_eq(c.bind, "127.0.0.1");
    cr_expect_str_eq(c.static_dir, "/srv/my web");
    cr_expect_eq(c.max_body_bytes, 1 << 20);
    cr_expect_eq(c.log_level, CFG_LOG_WARN);
    cr_expect_eq(c.max_heads, 8);
    cr_expect_eq(c.queue_depth, 64, "keys not in the file keep their value");
}

Test(config, file_bad_value_names_file_and_line)
{
    char path[64], want[160];
    write_temp(path, "# workers\n\nworkers = abc\nport = 1\n");
    struct cfg c;
    char err[256] = "";
    cfg_defaults(&c);
    cr_expect_eq(cfg_load_file(&c, path, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s:3: workers: abc is not an integer", path);
    cr_expect_str_eq(err, want);
    cr_expect_eq(c.port, 8080, "lines after the bad one are not read");
    unlink(path);

    write_temp(path, "port = 1\nqueue_depth = 0\n");
    cr_expect_eq(cfg_load_file(&c, path, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s:2: queue_depth: 0 is out of range 1..65536", path);
    cr_expect_str_eq(err, want);
    unlink(path);
}

Test(config, file_unknown_key)
{
    char path[64], want[160];
    write_temp(path, "port = 1\nwokers = 2\n");
    struct cfg c;
    char err[256] = "";
    cfg_defaults(&c);
    cr_expect_eq(cfg_load_file(&c, path, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s:2: unknown key 'wokers'", path);
    cr_expect_str_eq(err, want);
    unlink(path);
}

Test(config, file_line_without_equals)
{
    const char *bad[] = {"workers 4\n", "= 4\n", "port = 1 # inline comment\n"};
    const char *want_tail[] = {":1: expected 'key = value', got 'workers 4'",
                               ":1: expected 'key = value', got ''",
                               ":1: port: 1 # inline comment is not an integer"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[64], want[160];
        write_temp(path, bad[i]);
        struct cfg c;
        char err[256] = "";
        cfg_defaults(&c);
        cr_expect_eq(cfg_load_file(&c, path, err, sizeof err), -1, "%s", bad[i]);
        snprintf(want, sizeof want, "%s%s", path, want_tail[i]);
        cr_expect_str_eq(err, want);
        unlink(path);
    }
}

Test(config, file_missing)
{
    struct cfg c;
    char err[256] = "";
    cfg_defaults(&c);
    cr_expect_eq(cfg_load_file(&c, "/nonexistent/attention.conf", err, sizeof err), -1);
    cr_expect_str_eq(err, "/nonexistent/attention.conf: No such file or directory");
}

/* The example file must parse, hold the defaults, and mention every key. */
Test(config, example_file_is_the_defaults)
{
    const char *path = "config/attention.conf.example";
    FILE *f = fopen(path, "r");
    cr_assert(f != NULL, "cannot open %s: run the tests from the project root", path);
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    for (size_t i = 0; i < NKEYS; i++) {
        char line[64];
        snprintf(line, sizeof line, "\n%s =", keys[i]); /* "key =" alone: empty */
        cr_expect(strstr(text, line) != NULL, "%s has no '%s =' line", path, keys[i]);
    }

    struct cfg c, d;
    char err[256] = "";
    cfg_defaults(&d);
    memset(&c, 0, sizeof c);
    cfg_defaults(&c);
    cfg_set(&c, "workers", "9", NULL, 0);
    cr_assert_eq(cfg_load_file(&c, path, err, sizeof err), 0, "%s", err);
    char *got = dump_str(&c), *want = dump_str(&d);
    cr_expect_str_eq(got, want);
    free(got);
    free(want);
}

Test(config, dump_lists_every_key_and_reads_back)
{
    struct cfg c, d;
    cfg_defaults(&c);
    expect_set_ok(&c, "bind", "10.1.2.3");
    expect_set_ok(&c, "port", "0");
    expect_set_ok(&c, "max_body_bytes", "3M");
    expect_set_ok(&c, "max_weights_elements", "12345678901");
    expect_set_ok(&c, "log_level", "debug");
    expect_set_ok(&c, "static_dir", "/var/www");
    char *text = dump_str(&c);

    size_t lines = 0;
    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    cr_expect_eq(lines, NKEYS, "dump has %zu lines, the spec %zu keys:\n%s", lines, NKEYS, text);
    for (size_t i = 0; i < NKEYS; i++) {
        char head[64];
        snprintf(head, sizeof head, "%s ", keys[i]);
        cr_expect(strstr(text, head) != NULL, "no %s in the dump", keys[i]);
    }
    cr_expect(strstr(text, "max_body_bytes       = 3145728\n") != NULL, "%s", text);
    cr_expect(strstr(text, "log_level            = debug\n") != NULL, "%s", text);

    char path[64], err[256] = "";
    write_temp(path, text);
    cfg_defaults(&d);
    int rc = cfg_load_file(&d, path, err, sizeof err);
    unlink(path);
    cr_assert_eq(rc, 0, "%s", err);
    char *again = dump_str(&d);
    cr_expect_str_eq(again, text);
    free(again);
    free(text);
}

Test(config, parse_no_arguments_gives_defaults)
{
    struct cfg c, d;
    char err[256] = "";
    memset(&c, 0x5a, sizeof c);
    cr_assert_eq(parse(&c, NULL, err, sizeof err, NULL), 0, "%s", err);
    cfg_defaults(&d);
    char *got = dump_str(&c), *want = dump_str(&d);
    cr_expect_str_eq(got, want);
    free(got);
    free(want);
}

Test(config, precedence_file_env_flag)
{
    char path[64], err[256] = "";
    write_temp(path, "port = 1111\nworkers = 3\nqueue_depth = 5\nmax_heads = 7\n");
    char config_env[96];
    snprintf(config_env, sizeof config_env, "ATTN_CONFIG=%s", path);
    char *envp[] = {"HOME=/root", config_env, "ATTN_PORT=2222", "ATTN_WORKERS=4",
                    "ATTN_MAX_BODY_BYTES=2M", "ATTN_MAX_HEADS=9", "ATTN_NOT_A_KEY=1",
                    NULL};
    struct cfg c;
    int rc = parse(&c, envp, err, sizeof err, "--port", "3333", "--max-heads", "11",
                   "--max-batch", "12", NULL);
    unlink(path);
    cr_assert_eq(rc, 0, "%s", err);
    cr_expect_eq(c.queue_depth, 5, "file over default");
    cr_expect_eq(c.workers, 4, "env over file");
    cr_expect_eq(c.max_body_bytes, 2 << 20, "env over default");
    cr_expect_eq(c.port, 3333, "flag over env over file");
    cr_expect_eq(c.max_heads, 11, "flag over env over file");
    cr_expect_eq(c.max_batch, 12, "flag over default");
    cr_expect_eq(c.conn_timeout, 30, "default when nothing sets it");
}

Test(config, config_flag_overrides_config_env)
{
    char env_file[64], flag_file[64], err[256] = "";
    write_temp(env_file, "port = 1111\nworkers = 3\n");
    write_temp(flag_file, "port = 4444\n");
    char config_env[96];
    snprintf(config_env, sizeof config_env, "ATTN_CONFIG=%s", env_file);
    char *envp[] = {config_env, NULL};
    struct cfg c;

    int rc = parse(&c, envp, err, sizeof err, "--config", flag_file, NULL);
    cr_expect_eq(rc, 0, "%s", err);
    cr_expect_eq(c.port, 4444);
    cr_expect_eq(c.workers, 2, "only the --config file is read");

    rc = parse(&c, envp, err, sizeof err, NULL);
    cr_expect_eq(rc, 0, "%s", err);
    cr_expect_eq(c.port, 1111, "ATTN_CONFIG without --config");
    cr_expect_eq(c.workers, 3);

    char config_flag[96];
    snprintf(config_flag, sizeof config_flag, "--config=%s", flag_file);
    rc = parse(&c, NULL, err, sizeof err, "--workers", "6", config_flag, NULL);
    cr_expect_eq(rc, 0, "%s", err);
    cr_expect_eq(c.port, 4444, "--config=FILE");
    cr_expect_eq(c.workers, 6, "a flag before --config still beats the file");
    unlink(env_file);
    unlink(flag_file);
}

Test(config, parse_reports_file_errors)
{
    char path[64], err[256] = "", want[160];
    write_temp(path, "port = 1\n\nmax_heads = 0\n");
    struct cfg c;
    cr_expect_eq(parse(&c, NULL, err, sizeof err, "--config", path, NULL), -1);
    snprintf(want, sizeof want, "%s:3: max_heads: 0 is out of range 1..65536", path);
    cr_expect_str_eq(err, want);
    unlink(path);

    cr_expect_eq(parse(&c, NULL, err, sizeof err, "--config", "/nonexistent.conf", NULL), -1);
    cr_expect_str_eq(err, "/nonexistent.conf: No such file or directory");
}

Test(config, env_errors_name_the_variable)
{
    struct cfg c;
    char err[256] = "";
    char *envp1[] = {"ATTN_WORKERS=abc", NULL};
    cr_expect_eq(parse(&c, envp1, err, sizeof err, NULL), -1);
    cr_expect_str_eq(err, "ATTN_WORKERS: workers: abc is not an integer");

    char *envp2[] = {"ATTN_CONN_MEMORY_LIMIT=1G", NULL};
    cr_expect_eq(parse(&c, envp2, err, sizeof err, NULL), -1);
    cr_expect_str_eq(err, "ATTN_CONN_MEMORY_LIMIT: conn_memory_limit: 1G is out of range 16K..16M");

    char *envp3[] = {"ATTN_PORT=", NULL};
    cr_expect_eq(parse(&c, envp3, err, sizeof err, NULL), -1);
    cr_expect_str_eq(err, "ATTN_PORT: port: empty value, expected 0..65535");

    char *envp4[] = {"ATTN_BIND=localhost", NULL};
    cr_expect_eq(parse(&c, envp4, err, sizeof err, NULL), -1);
    cr_expect_str_eq(err, "ATTN_BIND: bind: 'localhost' is not an IPv4 or IPv6 address");
}

Test(config, env_names_are_exact)
{
    struct cfg c;
    char err[256] = "";
    /* Lower case, a prefix of a name, or a longer name are not ATTN_PORT. */
    char *envp[] = {"attn_port=1", "ATTN_POR=2", "ATTN_PORTS=3", "ATTN_PORT_=4",
                    "ATTN_MAX_BODY_BYTES=4k", NULL};
    cr_assert_eq(parse(&c, envp, err, sizeof err, NULL), 0, "%s", err);
    cr_expect_eq(c.port, 8080);
    cr_expect_eq(c.max_body_bytes, 4096);
}

Test(config, flag_errors_name_the_flag)
{
    struct cfg c;
    char err[256] = "";
    cr_expect_eq(parse(&c, NULL, err, sizeof err, "--workers", "0", NULL), -1);
    cr_expect_str_eq(err, "--workers: workers: 0 is out of range 1..64");
    cr_expect_eq(parse(&c, NULL, err, sizeof err, "--max-body-bytes=1x", NULL), -1);
    cr_expect_str_eq(err, "--max-body-bytes: max_body_bytes: 1x is not a byte size "
                          "(integer, optional K, M, G or T suffix)");
    cr_expect_eq(parse(&c, NULL, err, sizeof err, "--log-level", "loud", NULL), -1);
    cr_expect_str_eq(err, "--log-level: log_level: 'loud' is not one of error, warn, info, debug");
}

Test(config, key_equals_value_form)
{
    struct cfg c;
    char err[256] = "";
    int rc = parse(&c, NULL, err, sizeof err, "--port=0", "--max-body-bytes=1M",
                   "--log-level=debug", "--bind=127.0.0.1", "--static-dir=a=b", "--workers",
                   "3", "--workers=5", NULL);
    cr_assert_eq(rc, 0, "%s", err);
    cr_expect_eq(c.port, 0);
    cr_expect_eq(c.max_body_bytes, 1 << 20);
    cr_expect_eq(c.log_level, CFG_LOG_DEBUG);
    cr_expect_str_eq(c.bind, "127.0.0.1");
    cr_expect_str_eq(c.static_dir, "a=b", "only the first '=' splits");
    cr_expect_eq(c.workers, 5, "a later flag wins");

    cr_expect_eq(parse(&c, NULL, err, sizeof err, "--port=", NULL), -1);
    cr_expect_str_eq(err, "--port: port: empty value, expected 0..65535");
}

Test(config, every_key_has_a_flag)
{
    /* A value other than the default for each of keys[]. */
    static const char *const values[NKEYS] = {
        "1.2.3.4", "1", "3", "5", "2", "2M", "3M", "7", "8", "9", "10", "11", "12", "13",
        "99", "30", "64M", "14",
        "32K", "100", "5", "60", "2K", "3K", "2G", "10", "warn", "d", "c.pem", "k.pem",
        "https://a.example", "models", "a-secret-token-0123456789",
    };
    for (size_t i = 0; i < NKEYS; i++) {
        char flag[64];
        size_t n = (size_t)snprintf(flag, sizeof flag, "--%s", keys[i]);
        for (size_t j = 0; j < n; j++)
            if (flag[j] == '_')
                flag[j] = '-';
        const char *value = values[i];
        struct cfg c, d;
        char err[256] = "";
        cr_expect_eq(parse(&c, NULL, err, sizeof err, flag, value, NULL), 0, "%s %s: %s", flag,
                     value, err);
        cfg_defaults(&d);
        cr_expect_eq(cfg_set(&d, keys[i], value, err, sizeof err), 0, "%s", err);
        char *got = dump_str(&c), *want = dump_str(&d);
        cr_expect_str_eq(got, want, "%s %s", flag, value);
        free(got);
        free(want);
    }
}

Test(config, missing_flag_value)
{
    struct cfg c;
    char err[256] = "";
    cr_expect_eq(parse(&c, NULL, err, sizeof err, "--port", NULL), -1);
    cr_expect_str_eq(err, "--port: missing value");
    cr_expect_eq(parse(&c, NULL, err, sizeof err, "--port", "--workers", "3", NULL), -1);
    cr_expect_str_eq(err, "--port: missing value");
    cr_expect_eq(parse(&c, NULL, err, sizeof err, "--workers", "3", "--config", NULL), -1);
    cr_expect_str_eq(err, "--config: missing value");
    /* A negative number is a value, not a flag. */
    cr_expect_eq(parse(&c, NULL, err, sizeof err, "--port", "-1", NULL), -1);
    cr_expect_str_eq(err, "--port: port: -1 is out of range 0..65535");
}

Test(config, unknown_flags_and_arguments)
{
    struct cfg c;
    char err[256] = "";
    cr_expect_eq(parse(&c, NULL, err, sizeof err, "--bogus", "1", NULL), -1);
    cr_expect_str_eq(err, "unknown flag '--bogus' (try --help)");
    cr_expect_eq(parse(&c, NULL, err, sizeof err, "--max_body_bytes=1M", NULL), -1);
    cr_expect_str_eq(err, "unknown flag '--max_body_bytes' (try --help)");
    cr_expect_eq(parse(&c, NULL, err, sizeof err, "--Port", "1", NULL), -1);
    cr_expect_str_eq(err, "unknown flag '--Port' (try --help)");
    cr_expect_eq(parse(&c, NULL, err, sizeof err, "-p", "1", NULL), -1);
    cr_expect_str_eq(err, "unknown flag '-p' (try --help)");
    cr_expect_eq(parse(&c, NULL, err, sizeof err, "serve", NULL), -1);
    cr_expect_str_eq(err, "unexpected argument 'serve' (flags only; try --help)");
    cr_expect_eq(parse(&c, NULL, err, sizeof err, "--port", "1", "2", NULL), -1);
    cr_expect_str_eq(err, "unexpected argument '2' (flags only; try --help)");
    /* Flags are checked before the config file is read. */
    cr_expect_eq(parse(&c, NULL, err, sizeof err, "--config", "/nonexistent", "--bogus=1", NULL),
                 -1);
    cr_expect_str_eq(err, "unknown flag '--bogus' (try --help)");
}

Test(config, help_prints_every_key)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    char *argv[] = {"attention-server", "--workers", "0", "--bogus", "--help", NULL};
    struct cfg c;
    char err[256] = "";
    int rc = cfg_parse(&c, 5, argv, NULL, out, err, sizeof err);
    fclose(out);
    cr_expect_eq(rc, 1, "--help wins over bad flags");
    cr_expect(strstr(buf, "Usage: attention-server") != NULL, "%s", buf);
    cr_expect(strstr(buf, "--config FILE") != NULL && strstr(buf, "ATTN_CONFIG") != NULL);
    for (size_t i = 0; i < NKEYS; i++) {
        char flag[64], env[64];
        snprintf(flag, sizeof flag, "  --%s ", keys[i]);
        snprintf(env, sizeof env, " ATTN_%s ", keys[i]);
        for (char *p = flag; *p; p++)
            if (*p == '_')
                *p = '-';
        for (char *p = env; *p; p++)
            *p = (char)toupper((unsigned char)*p);
        char *line = strstr(buf, flag);
        cr_expect(line != NULL, "no %s in usage:\n%s", flag, buf);
        if (line == NULL)
            continue;
        char *eol = strchr(line, '\n');
        cr_assert(eol != NULL);
        *eol = '\0';
        cr_expect(strstr(line, env) != NULL, "no %s on: %s", env, line);
        cr_expect(strstr(line, "(default ") != NULL, "no default on: %s", line);
        *eol = '\n';
    }
    cr_expect(strstr(buf, "(default 64M; 1K..16G)") != NULL, "%s", buf);
    cr_expect(strstr(buf, "(default 8080; 0..65535)") != NULL, "%s", buf);
    cr_expect(strstr(buf, "(default info; error|warn|info|debug)") != NULL, "%s", buf);
    free(buf);

    FILE *devnull = fopen("/dev/null", "w");
    char *argv2[] = {"attention-server", "-h", NULL};
    cr_expect_eq(cfg_parse(&c, 2, argv2, NULL, devnull, err, sizeof err), 1);
    fclose(devnull);
}

/* blas_threads, the old name of threads_per_request, in all three sources:
 * the same setting, errors naming the new key, the later of the two names
 * winning in the file and on the command line, the new one in the
 * environment (which has no order), and the usual precedence between them. */
Test(config, alias_in_the_file)
{
    static const struct {
        const char *text;
        int want;
    } cases[] = {
        {"blas_threads = 3\n", 3},
        {"threads_per_request = 2\nblas_threads = 5\n", 5},
        {"blas_threads = 5\nthreads_per_request = 2\n", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[64], err[256] = "";
        write_temp(path, cases[i].text);
        struct cfg c;
        cfg_defaults(&c);
        int rc = cfg_load_file(&c, path, err, sizeof err);
        unlink(path);
        cr_assert_eq(rc, 0, "%s", err);
        cr_expect_eq(c.threads_per_request, cases[i].want, "%s", cases[i].text);
    }
    char path[64], err[256] = "", want[160];
    write_temp(path, "blas_threads = 17\n");
    struct cfg c;
    cfg_defaults(&c);
    cr_expect_eq(cfg_load_file(&c, path, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s:1: threads_per_request: 17 is out of range 1..16", path);
    cr_expect_str_eq(err, want);
    unlink(path);
    expect_set_ok(&c, "blas_threads", "4");
    cr_expect_eq(c.threads_per_request, 4, "cfg_set takes the old name too");
}

Test(config, alias_in_the_environment)
{
    struct cfg c;
    char err[256] = "";
    char *old_only[] = {"ATTN_BLAS_THREADS=3", NULL};
    cr_assert_eq(parse(&c, old_only, err, sizeof err, NULL), 0, "%s", err);
    cr_expect_eq(c.threads_per_request, 3);

    /* both: the new name, whichever comes first in environ */
    char *old_first[] = {"ATTN_BLAS_THREADS=3", "ATTN_THREADS_PER_REQUEST=2", NULL};
    char *new_first[] = {"ATTN_THREADS_PER_REQUEST=2", "ATTN_BLAS_THREADS=3", NULL};
    cr_assert_eq(parse(&c, old_first, err, sizeof err, NULL), 0, "%s", err);
    cr_expect_eq(c.threads_per_request, 2, "the new name wins");
    cr_assert_eq(parse(&c, new_first, err, sizeof err, NULL), 0, "%s", err);
    cr_expect_eq(c.threads_per_request, 2, "the new name wins");

    char *bad[] = {"ATTN_BLAS_THREADS=0", NULL};
    cr_expect_eq(parse(&c, bad, err, sizeof err, NULL), -1);
    cr_expect_str_eq(err, "ATTN_BLAS_THREADS: threads_per_request: 0 is out of range 1..16");

    /* over the file, under a flag */
    char path[64];
    write_temp(path, "threads_per_request = 4\n");
    char *envp[] = {"ATTN_BLAS_THREADS=3", NULL};
    int rc = parse(&c, envp, err, sizeof err, "--config", path, NULL);
    cr_assert_eq(rc, 0, "%s", err);
    cr_expect_eq(c.threads_per_request, 3, "environment (old name) over file (new name)");
    rc = parse(&c, envp, err, sizeof err, "--config", path, "--threads-per-request", "6", NULL);
    unlink(path);
    cr_assert_eq(rc, 0, "%s", err);
    cr_expect_eq(c.threads_per_request, 6, "flag over environment");
}

Test(config, alias_on_the_command_line)
{
    struct cfg c;
    char err[256] = "";
    cr_assert_eq(parse(&c, NULL, err, sizeof err, "--blas-threads", "3", NULL), 0, "%s", err);
    cr_expect_eq(c.threads_per_request, 3);
    cr_assert_eq(parse(&c, NULL, err, sizeof err, "--blas-threads=5", NULL), 0, "%s", err);
    cr_expect_eq(c.threads_per_request, 5);
    cr_assert_eq(parse(&c, NULL, err, sizeof err, "--threads-per-request", "2", "--blas-threads",
                       "4", NULL), 0, "%s", err);
    cr_expect_eq(c.threads_per_request, 4, "the later flag wins");
    cr_assert_eq(parse(&c, NULL, err, sizeof err, "--blas-threads", "4", "--threads-per-request",
                       "2", NULL), 0, "%s", err);
    cr_expect_eq(c.threads_per_request, 2, "the later flag wins");

    char *envp[] = {"ATTN_THREADS_PER_REQUEST=2", NULL};
    cr_assert_eq(parse(&c, envp, err, sizeof err, "--blas-threads", "7", NULL), 0, "%s", err);
    cr_expect_eq(c.threads_per_request, 7, "flag (old name) over environment (new name)");

    cr_expect_eq(parse(&c, NULL, err, sizeof err, "--blas-threads", "0", NULL), -1);
    cr_expect_str_eq(err, "--blas-threads: threads_per_request: 0 is out of range 1..16");
    cr_expect_eq(parse(&c, NULL, err, sizeof err, "--blas_threads", "2", NULL), -1);
    cr_expect_str_eq(err, "unknown flag '--blas_threads' (try --help)");
}

Test(config, alias_in_usage_not_in_dump)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    cfg_usage(out);
    fclose(out);
    const char *line = strstr(buf, "  --blas-threads N ");
    cr_assert(line != NULL, "%s", buf);
    const char *eol = strchr(line, '\n');
    cr_assert(eol != NULL);
    char row[256];
    snprintf(row, sizeof row, "%.*s", (int)(eol - line), line);
    cr_expect(strstr(row, " ATTN_BLAS_THREADS ") != NULL, "%s", row);
    cr_expect(strstr(row, "old name of --threads-per-request") != NULL, "%s", row);
    free(buf);

    struct cfg c;
    cfg_defaults(&c);
    char *dump = dump_str(&c);
    cr_expect(strstr(dump, "blas_threads") == NULL, "%s", dump);
    cr_expect(strstr(dump, "threads_per_request  = 1\n") != NULL, "%s", dump);
    free(dump);
}

/* The settings table of docs/operations.md must list every key cfg_dump() knows. */
Test(config, docs_table_lists_every_key)
{
    FILE *f = fopen("docs/operations.md", "r");
    cr_assert_not_null(f, "docs/operations.md not found (run from the repository root)");
    static char readme[1 << 17];
    size_t n = fread(readme, 1, sizeof readme - 1, f);
    readme[n] = '\0';
    fclose(f);
    struct cfg c;
    cfg_defaults(&c);
    char *dump = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&dump, &len);
    cfg_dump(&c, m);
    fclose(m);
    int nkeys = 0;
    for (char *line = strtok(dump, "\n"); line; line = strtok(NULL, "\n")) {
        char key[64], row[80];
        if (sscanf(line, "%63[a-z_] =", key) != 1)
            continue;
        snprintf(row, sizeof row, "| `%s` |", key);
        cr_expect(strstr(readme, row), "docs/operations.md's settings table lacks a row for %s", key);
        nkeys++;
    }
    free(dump);
    /* and no other: the table (the one with bind's row) has a row a key */
    const char *row = strstr(readme, "| `bind` |");
    cr_assert_not_null(row, "docs/operations.md has no configuration table");
    int rows = 0;
    const char *line = row;
    while (line > readme) { /* back to the table's first line */
        const char *prev = line - 1;
        while (prev > readme && prev[-1] != '\n')
            prev--;
        if (*prev != '|')
            break;
        line = prev;
    }
    for (; *line == '|'; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : "")
        rows += strncmp(line, "| `", 3) == 0;
    cr_assert_gt(nkeys, 0);
    cr_assert_eq(rows, nkeys, "docs/operations.md's configuration table has %d rows for the %d keys",
                 rows, nkeys);
}

/* ---------------------------------------------------------------------- */
/* Hostile and broken clients: T suffix, IPv6 bind, static_dir checks.     */

/* docs/operations.md says max_inflight_bytes goes up to 1T; "1T" was refused (no T). */
Test(config, byte_sizes_take_t_suffix)
{
    struct cfg c;
    cfg_defaults(&c);
    expect_set_ok(&c, "max_inflight_bytes", "1T");
    cr_expect_eq(c.max_inflight_bytes, 1LL << 40);
    expect_set_ok(&c, "max_inflight_bytes", "1t");
    cr_expect_eq(c.max_inflight_bytes, 1LL << 40);
    char *dump = dump_str(&c);
    const char *line = strstr(dump, "max_inflight_bytes ");
    cr_expect(line && strstr(line, "= 1099511627776\n") == strchr(line, '='), "%s", dump);
    free(dump);
    expect_set_error("max_inflight_bytes", "2T", "max_inflight_bytes: 2T is out of range 1M..1T");
    expect_set_error("max_body_bytes", "1T", "max_body_bytes: 1T is out of range 1K..16G");
    expect_set_error("max_inflight_bytes", "8388608T",
                     "max_inflight_bytes: 8388608T is out of range 1M..1T");
}

Test(config, bind_takes_ipv6)
{
    struct cfg c;
    cfg_defaults(&c);
    const char *good[] = {"::", "::1", "fe80::1", "2001:db8::7", "::ffff:127.0.0.1",
                          "127.0.0.1", "0.0.0.0"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        expect_set_ok(&c, "bind", good[i]);
        cr_expect_str_eq(c.bind, good[i]);
    }
}

/* A temporary directory (path at least 64 bytes), with index.html if asked. */
static void temp_dir(char *path, int with_index)
{
    strcpy(path, "/tmp/test_config_dir_XXXXXX");
    cr_assert_not_null(mkdtemp(path));
    if (with_index) {
        char f[128];
        snprintf(f, sizeof f, "%s/index.html", path);
        FILE *fp = fopen(f, "w");
        cr_assert_not_null(fp);
        fclose(fp);
    }
}

static void remove_temp_dir(const char *path)
{
    char f[128];
    snprintf(f, sizeof f, "%s/index.html", path);
    unlink(f);
    rmdir(path);
}

/* static_dir=/ served any readable .json/.html/... file of the host. */
Test(config, static_dir_refuses_the_host)
{
    char msg[512];
    const char *refused[] = {"/", "/etc", "/usr", "/tmp", "/etc/..", "//"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        msg[0] = '\0';
        cr_expect_eq(cfg_check_static_dir(refused[i], msg, sizeof msg), -1, "%s: %s",
                     refused[i], msg);
        cr_expect(strstr(msg, "would be served"), "%s: %s", refused[i], msg);
    }
    cr_expect_eq(cfg_check_static_dir("README.md", msg, sizeof msg), -1, "%s", msg);
    cr_expect(strstr(msg, "is not a directory"), "%s", msg);
}

Test(config, static_dir_accepts_the_web_client)
{
    char msg[512] = "", dir[64];
    cr_expect_eq(cfg_check_static_dir("web", msg, sizeof msg), 0, "%s", msg);
    temp_dir(dir, 1);
    cr_expect_eq(cfg_check_static_dir(dir, msg, sizeof msg), 0, "%s", msg);
    remove_temp_dir(dir);
    temp_dir(dir, 0);
    cr_expect_eq(cfg_check_static_dir(dir, msg, sizeof msg), 1, "%s", msg);
    cr_expect(strstr(msg, "has no index.html"), "%s", msg);
    remove_temp_dir(dir);
    cr_expect_eq(cfg_check_static_dir("/nonexistent/web", msg, sizeof msg), 1, "%s", msg);
    cr_expect(strstr(msg, "No such file"), "%s", msg);
}
