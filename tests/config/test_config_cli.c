/* test_config_cli.c -- config/: the command line (--help, --key=value,
 * missing values, unknown flags, aliases), and the dump, usage and docs
 * tables listing every key. */
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

Test(config, dump_lists_every_key_and_reads_back)
{
    struct cfg c, d;
    cfg_defaults(&c);
    cfgt_expect_set_ok(&c, "bind", "10.1.2.3");
    cfgt_expect_set_ok(&c, "port", "0");
    cfgt_expect_set_ok(&c, "max_body_bytes", "3M");
    cfgt_expect_set_ok(&c, "max_weights_elements", "12345678901");
    cfgt_expect_set_ok(&c, "log_level", "debug");
    cfgt_expect_set_ok(&c, "static_dir", "/var/www");
    char *text = cfgt_dump_str(&c);

    size_t lines = 0;
    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    cr_expect_eq(lines, NKEYS, "dump has %zu lines, the spec %zu keys:\n%s", lines, NKEYS, text);
    for (size_t i = 0; i < NKEYS; i++) {
        char head[64];
        snprintf(head, sizeof head, "%s ", cfgt_keys[i]);
        cr_expect(strstr(text, head) != NULL, "no %s in the dump", cfgt_keys[i]);
    }
    cr_expect(strstr(text, "max_body_bytes       = 3145728\n") != NULL, "%s", text);
    cr_expect(strstr(text, "log_level            = debug\n") != NULL, "%s", text);

    char path[64], err[256] = "";
    cfgt_write_temp(path, text);
    cfg_defaults(&d);
    int rc = cfg_load_file(&d, path, err, sizeof err);
    unlink(path);
    cr_assert_eq(rc, 0, "%s", err);
    char *again = cfgt_dump_str(&d);
    cr_expect_str_eq(again, text);
    free(again);
    free(text);
}

Test(config, flag_errors_name_the_flag)
{
    struct cfg c;
    char err[256] = "";
    cr_expect_eq(cfgt_parse(&c, NULL, err, sizeof err, "--workers", "0", NULL), -1);
    cr_expect_str_eq(err, "--workers: workers: 0 is out of range 1..64");
    cr_expect_eq(cfgt_parse(&c, NULL, err, sizeof err, "--max-body-bytes=1x", NULL), -1);
    cr_expect_str_eq(err, "--max-body-bytes: max_body_bytes: 1x is not a byte size "
                          "(integer, optional K, M, G or T suffix)");
    cr_expect_eq(cfgt_parse(&c, NULL, err, sizeof err, "--log-level", "loud", NULL), -1);
    cr_expect_str_eq(err, "--log-level: log_level: 'loud' is not one of error, warn, info, debug");
}

Test(config, key_equals_value_form)
{
    struct cfg c;
    char err[256] = "";
    int rc = cfgt_parse(&c, NULL, err, sizeof err, "--port=0", "--max-body-bytes=1M",
                   "--log-level=debug", "--bind=127.0.0.1", "--static-dir=a=b", "--workers",
                   "3", "--workers=5", NULL);
    cr_assert_eq(rc, 0, "%s", err);
    cr_expect_eq(c.port, 0);
    cr_expect_eq(c.max_body_bytes, 1 << 20);
    cr_expect_eq(c.log_level, CFG_LOG_DEBUG);
    cr_expect_str_eq(c.bind, "127.0.0.1");
    cr_expect_str_eq(c.static_dir, "a=b", "only the first '=' splits");
    cr_expect_eq(c.workers, 5, "a later flag wins");

    cr_expect_eq(cfgt_parse(&c, NULL, err, sizeof err, "--port=", NULL), -1);
    cr_expect_str_eq(err, "--port: port: empty value, expected 0..65535");
}

Test(config, every_key_has_a_flag)
{
    /* A value other than the default for each of cfgt_keys[]. */
    static const char *const values[NKEYS] = {
        "1.2.3.4", "1", "8002", "::1", "3", "5", "2", "2M", "3M", "7", "8", "9", "10", "11", "12", "13",
        "99", "30", "64M", "12", "14",
        "32K", "100", "5", "60", "2K", "3K", "2G", "10", "warn", "d", "c.pem", "k.pem",
        "https://a.example", "models", "a-secret-token-0123456789",
    };
    for (size_t i = 0; i < NKEYS; i++) {
        char flag[64];
        size_t n = (size_t)snprintf(flag, sizeof flag, "--%s", cfgt_keys[i]);
        for (size_t j = 0; j < n; j++)
            if (flag[j] == '_')
                flag[j] = '-';
        const char *value = values[i];
        struct cfg c, d;
        char err[256] = "";
        cr_expect_eq(cfgt_parse(&c, NULL, err, sizeof err, flag, value, NULL), 0, "%s %s: %s", flag,
                     value, err);
        cfg_defaults(&d);
        cr_expect_eq(cfg_set(&d, cfgt_keys[i], value, err, sizeof err), 0, "%s", err);
        char *got = cfgt_dump_str(&c), *want = cfgt_dump_str(&d);
        cr_expect_str_eq(got, want, "%s %s", flag, value);
        free(got);
        free(want);
    }
}

Test(config, missing_flag_value)
{
    struct cfg c;
    char err[256] = "";
    cr_expect_eq(cfgt_parse(&c, NULL, err, sizeof err, "--port", NULL), -1);
    cr_expect_str_eq(err, "--port: missing value");
    cr_expect_eq(cfgt_parse(&c, NULL, err, sizeof err, "--port", "--workers", "3", NULL), -1);
    cr_expect_str_eq(err, "--port: missing value");
    cr_expect_eq(cfgt_parse(&c, NULL, err, sizeof err, "--workers", "3", "--config", NULL), -1);
    cr_expect_str_eq(err, "--config: missing value");
    /* A negative number is a value, not a flag. */
    cr_expect_eq(cfgt_parse(&c, NULL, err, sizeof err, "--port", "-1", NULL), -1);
    cr_expect_str_eq(err, "--port: port: -1 is out of range 0..65535");
}

Test(config, unknown_flags_and_arguments)
{
    struct cfg c;
    char err[256] = "";
    cr_expect_eq(cfgt_parse(&c, NULL, err, sizeof err, "--bogus", "1", NULL), -1);
    cr_expect_str_eq(err, "unknown flag '--bogus' (try --help)");
    cr_expect_eq(cfgt_parse(&c, NULL, err, sizeof err, "--max_body_bytes=1M", NULL), -1);
    cr_expect_str_eq(err, "unknown flag '--max_body_bytes' (try --help)");
    cr_expect_eq(cfgt_parse(&c, NULL, err, sizeof err, "--Port", "1", NULL), -1);
    cr_expect_str_eq(err, "unknown flag '--Port' (try --help)");
    cr_expect_eq(cfgt_parse(&c, NULL, err, sizeof err, "-p", "1", NULL), -1);
    cr_expect_str_eq(err, "unknown flag '-p' (try --help)");
    cr_expect_eq(cfgt_parse(&c, NULL, err, sizeof err, "serve", NULL), -1);
    cr_expect_str_eq(err, "unexpected argument 'serve' (flags only; try --help)");
    cr_expect_eq(cfgt_parse(&c, NULL, err, sizeof err, "--port", "1", "2", NULL), -1);
    cr_expect_str_eq(err, "unexpected argument '2' (flags only; try --help)");
    /* Flags are checked before the config file is read. */
    cr_expect_eq(cfgt_parse(&c, NULL, err, sizeof err, "--config", "/nonexistent", "--bogus=1", NULL),
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
        snprintf(flag, sizeof flag, "  --%s ", cfgt_keys[i]);
        snprintf(env, sizeof env, " ATTN_%s ", cfgt_keys[i]);
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

Test(config, alias_on_the_command_line)
{
    struct cfg c;
    char err[256] = "";
    cr_assert_eq(cfgt_parse(&c, NULL, err, sizeof err, "--blas-threads", "3", NULL), 0, "%s", err);
    cr_expect_eq(c.threads_per_request, 3);
    cr_assert_eq(cfgt_parse(&c, NULL, err, sizeof err, "--blas-threads=5", NULL), 0, "%s", err);
    cr_expect_eq(c.threads_per_request, 5);
    cr_assert_eq(cfgt_parse(&c, NULL, err, sizeof err, "--threads-per-request", "2", "--blas-threads",
                       "4", NULL), 0, "%s", err);
    cr_expect_eq(c.threads_per_request, 4, "the later flag wins");
    cr_assert_eq(cfgt_parse(&c, NULL, err, sizeof err, "--blas-threads", "4", "--threads-per-request",
                       "2", NULL), 0, "%s", err);
    cr_expect_eq(c.threads_per_request, 2, "the later flag wins");

    char *envp[] = {"ATTN_THREADS_PER_REQUEST=2", NULL};
    cr_assert_eq(cfgt_parse(&c, envp, err, sizeof err, "--blas-threads", "7", NULL), 0, "%s", err);
    cr_expect_eq(c.threads_per_request, 7, "flag (old name) over environment (new name)");

    cr_expect_eq(cfgt_parse(&c, NULL, err, sizeof err, "--blas-threads", "0", NULL), -1);
    cr_expect_str_eq(err, "--blas-threads: threads_per_request: 0 is out of range 1..16");
    cr_expect_eq(cfgt_parse(&c, NULL, err, sizeof err, "--blas_threads", "2", NULL), -1);
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
    char *dump = cfgt_dump_str(&c);
    cr_expect(strstr(dump, "blas_threads") == NULL, "%s", dump);
    cr_expect(strstr(dump, "threads_per_request  = 1\n") != NULL, "%s", dump);
    free(dump);
}

/* The settings table of docs/operations.md must list every key cfg_dump() knows. */
Test(config, docs_table_lists_every_key)
{
    char *readme = fixture_read("docs/operations.md", NULL);
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
    free(readme);
}
