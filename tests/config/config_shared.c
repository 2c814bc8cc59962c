/* config_shared.c -- see config_shared.h. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "tests/config/config_shared.h"

/* Every key, as the spec lists them; the dump test checks the module has no more. */
const char *const cfgt_keys[] = {
    "bind", "port", "grpc_port", "grpc_address", "workers", "queue_depth", "threads_per_request", "max_body_bytes",
    "max_inflight_bytes",
    "max_tensor_elements", "max_batch", "max_target_len", "max_source_len",
    "max_embed_dim", "max_heads", "max_weights_elements", "max_sequences",
    "sequence_idle_timeout", "max_sequence_bytes", "max_layers", "conn_timeout",
    "conn_memory_limit", "max_connections", "header_timeout", "body_timeout",
    "min_upload_rate", "min_send_rate", "max_answer_bytes", "drain_timeout", "log_level",
    "static_dir", "tls_cert_file", "tls_key_file", "cors_allow_origin", "model_repository",
    "admin_token",
};
_Static_assert(sizeof cfgt_keys / sizeof cfgt_keys[0] == NKEYS, "NKEYS is the number of keys");

/* A temp file holding text; its name goes to path (at least 64 bytes). */
void cfgt_write_temp(char *path, const char *text)
{
    strcpy(path, "/tmp/test_config_XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0, "mkstemp failed");
    size_t n = strlen(text);
    cr_assert_eq(write(fd, text, n), (ssize_t)n);
    close(fd);
}

/* argv = {"attention-server", args..., NULL} from a NULL-terminated list. */
int cfgt_parse(struct cfg *c, char **envp, char *err, size_t errlen, ...)
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

char *cfgt_dump_str(const struct cfg *c)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cfg_dump(c, f);
    fclose(f);
    return buf;
}

void cfgt_expect_set_ok(struct cfg *c, const char *key, const char *value)
{
    char err[256] = "";
    cr_assert_eq(cfg_set(c, key, value, err, sizeof err), 0, "%s = '%s': %s", key, value, err);
}
