/* test_config.c -- config/: defaults and every type's good and bad
 * values, as cfg_set takes them. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "tests/config/config_shared.h"

/* Expect cfg_set(key, value) to fail with exactly msg, leaving c as it was. */
static void expect_set_error(const char *key, const char *value, const char *msg)
{
    struct cfg c;
    char err[256] = "";
    cfg_defaults(&c);
    char *before = cfgt_dump_str(&c);
    cr_assert_eq(cfg_set(&c, key, value, err, sizeof err), -1, "%s = '%s' was accepted", key,
                 value);
    cr_expect_str_eq(err, msg, "%s = '%s'", key, value);
    char *after = cfgt_dump_str(&c);
    cr_expect_str_eq(after, before, "a failed cfg_set changed the config");
    free(before);
    free(after);
}

Test(config, defaults)
{
    struct cfg c;
    memset(&c, 0xa5, sizeof c);
    cfg_defaults(&c);
    cr_expect_str_eq(c.bind, "0.0.0.0");
    cr_expect_eq(c.port, 8080);
    cr_expect_eq(c.grpc_port, 8001);
    cr_expect_str_eq(c.grpc_address, "");
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
    cr_assert_eq(cfgt_parse(&c, NULL, err, sizeof err, NULL), 0, "%s", err);
    cr_expect_str_eq(c.model_repository, "models");
    cr_expect_eq(c.model_repository_explicit, 0, "the default is not explicit");
    cr_assert_eq(cfgt_parse(&c, NULL, err, sizeof err, "--model-repository", "models", NULL), 0);
    cr_expect_eq(c.model_repository_explicit, 1, "a flag, even with the default's value");
    char *envp[] = {"ATTN_MODEL_REPOSITORY=", NULL};
    cr_assert_eq(cfgt_parse(&c, envp, err, sizeof err, NULL), 0);
    cr_expect_str_eq(c.model_repository, "");
    cr_expect_eq(c.model_repository_explicit, 1, "the environment, even empty");
    cfgt_write_temp(path, "model_repository = /srv/models\n");
    cr_assert_eq(cfgt_parse(&c, NULL, err, sizeof err, "--config", path, NULL), 0, "%s", err);
    unlink(path);
    cr_expect_str_eq(c.model_repository, "/srv/models");
    cr_expect_eq(c.model_repository_explicit, 1, "the file");
    cr_assert_eq(cfgt_parse(&c, NULL, err, sizeof err, "--port", "1", NULL), 0);
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
    cfgt_expect_set_ok(&c, "bind", "127.0.0.1");
    cfgt_expect_set_ok(&c, "port", "0");
    cfgt_expect_set_ok(&c, "workers", "+8");
    cfgt_expect_set_ok(&c, "max_tensor_elements", "4294967296");
    cfgt_expect_set_ok(&c, "max_weights_elements", "17179869184");
    cfgt_expect_set_ok(&c, "log_level", "DEBUG");
    cfgt_expect_set_ok(&c, "static_dir", "/srv/attention/web");
    cr_expect_str_eq(c.bind, "127.0.0.1");
    cr_expect_eq(c.port, 0);
    cr_expect_eq(c.workers, 8);
    cr_expect_eq(c.max_tensor_elements, 1LL << 32);
    cr_expect_eq(c.max_weights_elements, 1LL << 34);
    cr_expect_eq(c.log_level, CFG_LOG_DEBUG);
    cr_expect_str_eq(c.static_dir, "/srv/attention/web");
    cfgt_expect_set_ok(&c, "log_level", "error");
    cr_expect_eq(c.log_level, CFG_LOG_ERROR);
    cfgt_expect_set_ok(&c, "log_level", "warn");
    cr_expect_eq(c.log_level, CFG_LOG_WARN);
}

/* gRPC's port: 0 turns it off; its address: bind's when empty, else an
 * address as bind's (bind itself may not be empty). */
Test(config, grpc_port_and_address)
{
    struct cfg c;
    char err[256] = "";
    cfg_defaults(&c);
    cfgt_expect_set_ok(&c, "grpc_port", "0");
    cr_expect_eq(c.grpc_port, 0);
    cr_expect_eq(cfg_set(&c, "grpc_port", "65536", err, sizeof err), -1);
    cr_expect_str_eq(err, "grpc_port: 65536 is out of range 0..65535");
    cfgt_expect_set_ok(&c, "grpc_address", "::");
    cr_expect_str_eq(c.grpc_address, "::");
    cfgt_expect_set_ok(&c, "grpc_address", "");
    cr_expect_str_eq(c.grpc_address, "");
    cr_expect_eq(cfg_set(&c, "grpc_address", "localhost", err, sizeof err), -1);
    cr_expect_str_eq(err, "grpc_address: 'localhost' is not an IPv4 or IPv6 address");
    cr_expect_eq(cfg_set(&c, "bind", "", err, sizeof err), -1);
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
        cfgt_expect_set_ok(&c, "max_body_bytes", cases[i].text);
        cr_expect_eq(c.max_body_bytes, cases[i].bytes, "%s", cases[i].text);
    }
    cfgt_expect_set_ok(&c, "conn_memory_limit", "16K");
    cr_expect_eq(c.conn_memory_limit, 16384);
    cfgt_expect_set_ok(&c, "conn_memory_limit", "16m");
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
    cfgt_expect_set_ok(&c, "static_dir", path);
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
    cfgt_expect_set_ok(&c, "tls_cert_file", "/etc/attention/cert.pem");
    cfgt_expect_set_ok(&c, "tls_key_file", "key.pem");
    cr_expect_str_eq(c.tls_cert_file, "/etc/attention/cert.pem");
    cr_expect_str_eq(c.tls_key_file, "key.pem");
    cfgt_expect_set_ok(&c, "tls_cert_file", "");
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
    cfgt_write_temp(file, "tls_cert_file = c.pem\ntls_key_file = k.pem\ntls_cert_file =\n");
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
        cfgt_expect_set_ok(&c, "cors_allow_origin", good[i]);
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
    cfgt_expect_set_ok(&c, "bind", "192.168.100.200");
    cfgt_expect_set_ok(&c, "bind", "1.2.3.4");
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

/* ---------------------------------------------------------------------- */
/* Hostile and broken clients: T suffix, IPv6 bind, static_dir checks.     */

/* docs/operations.md says max_inflight_bytes goes up to 1T; "1T" was refused (no T). */
Test(config, byte_sizes_take_t_suffix)
{
    struct cfg c;
    cfg_defaults(&c);
    cfgt_expect_set_ok(&c, "max_inflight_bytes", "1T");
    cr_expect_eq(c.max_inflight_bytes, 1LL << 40);
    cfgt_expect_set_ok(&c, "max_inflight_bytes", "1t");
    cr_expect_eq(c.max_inflight_bytes, 1LL << 40);
    char *dump = cfgt_dump_str(&c);
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
        cfgt_expect_set_ok(&c, "bind", good[i]);
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
