/* test_config_sources.c -- config/: the file format, the environment,
 * and the precedence defaults < file < environment < flags. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "tests/config/config_shared.h"
#include "tests/support/fixture.h"

Test(config, file_parsing)
{
    char path[64];
    cfgt_write_temp(path, "# a comment\n"
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
    cfgt_write_temp(path, "# workers\n\nworkers = abc\nport = 1\n");
    struct cfg c;
    char err[256] = "";
    cfg_defaults(&c);
    cr_expect_eq(cfg_load_file(&c, path, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s:3: workers: abc is not an integer", path);
    cr_expect_str_eq(err, want);
    cr_expect_eq(c.port, 8080, "lines after the bad one are not read");
    unlink(path);

    cfgt_write_temp(path, "port = 1\nqueue_depth = 0\n");
    cr_expect_eq(cfg_load_file(&c, path, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s:2: queue_depth: 0 is out of range 1..65536", path);
    cr_expect_str_eq(err, want);
    unlink(path);
}

Test(config, file_unknown_key)
{
    char path[64], want[160];
    cfgt_write_temp(path, "port = 1\nwokers = 2\n");
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
        cfgt_write_temp(path, bad[i]);
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
    char *text = fixture_read(path, NULL);
    for (size_t i = 0; i < NKEYS; i++) {
        char line[64];
        snprintf(line, sizeof line, "\n%s =", cfgt_keys[i]); /* "key =" alone: empty */
        cr_expect(strstr(text, line) != NULL, "%s has no '%s =' line", path, cfgt_keys[i]);
    }
    free(text);

    struct cfg c, d;
    char err[256] = "";
    cfg_defaults(&d);
    memset(&c, 0, sizeof c);
    cfg_defaults(&c);
    cfg_set(&c, "workers", "9", NULL, 0);
    cr_assert_eq(cfg_load_file(&c, path, err, sizeof err), 0, "%s", err);
    char *got = cfgt_dump_str(&c), *want = cfgt_dump_str(&d);
    cr_expect_str_eq(got, want);
    free(got);
    free(want);
}

Test(config, parse_no_arguments_gives_defaults)
{
    struct cfg c, d;
    char err[256] = "";
    memset(&c, 0x5a, sizeof c);
    cr_assert_eq(cfgt_parse(&c, NULL, err, sizeof err, NULL), 0, "%s", err);
    cfg_defaults(&d);
    char *got = cfgt_dump_str(&c), *want = cfgt_dump_str(&d);
    cr_expect_str_eq(got, want);
    free(got);
    free(want);
}

Test(config, precedence_file_env_flag)
{
    char path[64], err[256] = "";
    cfgt_write_temp(path, "port = 1111\nworkers = 3\nqueue_depth = 5\nmax_heads = 7\n");
    char config_env[96];
    snprintf(config_env, sizeof config_env, "ATTN_CONFIG=%s", path);
    char *envp[] = {"HOME=/root", config_env, "ATTN_PORT=2222", "ATTN_WORKERS=4",
                    "ATTN_MAX_BODY_BYTES=2M", "ATTN_MAX_HEADS=9", "ATTN_NOT_A_KEY=1",
                    NULL};
    struct cfg c;
    int rc = cfgt_parse(&c, envp, err, sizeof err, "--port", "3333", "--max-heads", "11",
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
    cfgt_write_temp(env_file, "port = 1111\nworkers = 3\n");
    cfgt_write_temp(flag_file, "port = 4444\n");
    char config_env[96];
    snprintf(config_env, sizeof config_env, "ATTN_CONFIG=%s", env_file);
    char *envp[] = {config_env, NULL};
    struct cfg c;

    int rc = cfgt_parse(&c, envp, err, sizeof err, "--config", flag_file, NULL);
    cr_expect_eq(rc, 0, "%s", err);
    cr_expect_eq(c.port, 4444);
    cr_expect_eq(c.workers, 2, "only the --config file is read");

    rc = cfgt_parse(&c, envp, err, sizeof err, NULL);
    cr_expect_eq(rc, 0, "%s", err);
    cr_expect_eq(c.port, 1111, "ATTN_CONFIG without --config");
    cr_expect_eq(c.workers, 3);

    char config_flag[96];
    snprintf(config_flag, sizeof config_flag, "--config=%s", flag_file);
    rc = cfgt_parse(&c, NULL, err, sizeof err, "--workers", "6", config_flag, NULL);
    cr_expect_eq(rc, 0, "%s", err);
    cr_expect_eq(c.port, 4444, "--config=FILE");
    cr_expect_eq(c.workers, 6, "a flag before --config still beats the file");
    unlink(env_file);
    unlink(flag_file);
}

Test(config, parse_reports_file_errors)
{
    char path[64], err[256] = "", want[160];
    cfgt_write_temp(path, "port = 1\n\nmax_heads = 0\n");
    struct cfg c;
    cr_expect_eq(cfgt_parse(&c, NULL, err, sizeof err, "--config", path, NULL), -1);
    snprintf(want, sizeof want, "%s:3: max_heads: 0 is out of range 1..65536", path);
    cr_expect_str_eq(err, want);
    unlink(path);

    cr_expect_eq(cfgt_parse(&c, NULL, err, sizeof err, "--config", "/nonexistent.conf", NULL), -1);
    cr_expect_str_eq(err, "/nonexistent.conf: No such file or directory");
}

Test(config, env_errors_name_the_variable)
{
    struct cfg c;
    char err[256] = "";
    char *envp1[] = {"ATTN_WORKERS=abc", NULL};
    cr_expect_eq(cfgt_parse(&c, envp1, err, sizeof err, NULL), -1);
    cr_expect_str_eq(err, "ATTN_WORKERS: workers: abc is not an integer");

    char *envp2[] = {"ATTN_CONN_MEMORY_LIMIT=1G", NULL};
    cr_expect_eq(cfgt_parse(&c, envp2, err, sizeof err, NULL), -1);
    cr_expect_str_eq(err, "ATTN_CONN_MEMORY_LIMIT: conn_memory_limit: 1G is out of range 16K..16M");

    char *envp3[] = {"ATTN_PORT=", NULL};
    cr_expect_eq(cfgt_parse(&c, envp3, err, sizeof err, NULL), -1);
    cr_expect_str_eq(err, "ATTN_PORT: port: empty value, expected 0..65535");

    char *envp4[] = {"ATTN_BIND=localhost", NULL};
    cr_expect_eq(cfgt_parse(&c, envp4, err, sizeof err, NULL), -1);
    cr_expect_str_eq(err, "ATTN_BIND: bind: 'localhost' is not an IPv4 or IPv6 address");
}

Test(config, env_names_are_exact)
{
    struct cfg c;
    char err[256] = "";
    /* Lower case, a prefix of a name, or a longer name are not ATTN_PORT. */
    char *envp[] = {"attn_port=1", "ATTN_POR=2", "ATTN_PORTS=3", "ATTN_PORT_=4",
                    "ATTN_MAX_BODY_BYTES=4k", NULL};
    cr_assert_eq(cfgt_parse(&c, envp, err, sizeof err, NULL), 0, "%s", err);
    cr_expect_eq(c.port, 8080);
    cr_expect_eq(c.max_body_bytes, 4096);
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
        cfgt_write_temp(path, cases[i].text);
        struct cfg c;
        cfg_defaults(&c);
        int rc = cfg_load_file(&c, path, err, sizeof err);
        unlink(path);
        cr_assert_eq(rc, 0, "%s", err);
        cr_expect_eq(c.threads_per_request, cases[i].want, "%s", cases[i].text);
    }
    char path[64], err[256] = "", want[160];
    cfgt_write_temp(path, "blas_threads = 17\n");
    struct cfg c;
    cfg_defaults(&c);
    cr_expect_eq(cfg_load_file(&c, path, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s:1: threads_per_request: 17 is out of range 1..16", path);
    cr_expect_str_eq(err, want);
    unlink(path);
    cfgt_expect_set_ok(&c, "blas_threads", "4");
    cr_expect_eq(c.threads_per_request, 4, "cfg_set takes the old name too");
}

Test(config, alias_in_the_environment)
{
    struct cfg c;
    char err[256] = "";
    char *old_only[] = {"ATTN_BLAS_THREADS=3", NULL};
    cr_assert_eq(cfgt_parse(&c, old_only, err, sizeof err, NULL), 0, "%s", err);
    cr_expect_eq(c.threads_per_request, 3);

    /* both: the new name, whichever comes first in environ */
    char *old_first[] = {"ATTN_BLAS_THREADS=3", "ATTN_THREADS_PER_REQUEST=2", NULL};
    char *new_first[] = {"ATTN_THREADS_PER_REQUEST=2", "ATTN_BLAS_THREADS=3", NULL};
    cr_assert_eq(cfgt_parse(&c, old_first, err, sizeof err, NULL), 0, "%s", err);
    cr_expect_eq(c.threads_per_request, 2, "the new name wins");
    cr_assert_eq(cfgt_parse(&c, new_first, err, sizeof err, NULL), 0, "%s", err);
    cr_expect_eq(c.threads_per_request, 2, "the new name wins");

    char *bad[] = {"ATTN_BLAS_THREADS=0", NULL};
    cr_expect_eq(cfgt_parse(&c, bad, err, sizeof err, NULL), -1);
    cr_expect_str_eq(err, "ATTN_BLAS_THREADS: threads_per_request: 0 is out of range 1..16");

    /* over the file, under a flag */
    char path[64];
    cfgt_write_temp(path, "threads_per_request = 4\n");
    char *envp[] = {"ATTN_BLAS_THREADS=3", NULL};
    int rc = cfgt_parse(&c, envp, err, sizeof err, "--config", path, NULL);
    cr_assert_eq(rc, 0, "%s", err);
    cr_expect_eq(c.threads_per_request, 3, "environment (old name) over file (new name)");
    rc = cfgt_parse(&c, envp, err, sizeof err, "--config", path, "--threads-per-request", "6", NULL);
    unlink(path);
    cr_assert_eq(rc, 0, "%s", err);
    cr_expect_eq(c.threads_per_request, 6, "flag over environment");
}
