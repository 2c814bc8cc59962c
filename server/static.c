/* static.c -- the web client's static files; see static.h.
 * Part of the HTTP front (server/http.c).
 */
#include "server/static.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "server/answer.h"
#include "server/errors.h"

/* Largest static file served; the web client's files are far smaller. */
#define STATIC_MAX_BYTES (16 << 20)

static const char *content_type_of(const char *path)
{
    static const struct { const char *ext, *type; } types[] = {
        {".html", "text/html; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},   {".json", "application/json"},
        {".png", "image/png"},                 {".svg", "image/svg+xml"},
        {".ico", "image/x-icon"},
    };
    const char *dot = strrchr(path, '.');
    for (size_t i = 0; dot && i < sizeof types / sizeof types[0]; i++)
        if (strcmp(dot, types[i].ext) == 0)
            return types[i].type;
    return NULL;
}

/* The file under cfg.static_dir that url names, opened read-only, with its
 * content type and size; -1 when there is none. Only plain names
 * ([A-Za-z0-9_.-], sub-folders allowed, no "..") of known types. */
int open_static(const struct req *r, const char *url, const char **type,
                struct stat *st)
{
    const char *rel = strcmp(url, "/") == 0 ? "index.html" : url + 1;
    *type = content_type_of(rel);
    int ok = *type != NULL && strstr(rel, "..") == NULL && rel[0] != '/';
    for (const char *c = rel; ok && *c; c++)
        ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
             (*c >= '0' && *c <= '9') || *c == '_' || *c == '-' || *c == '.' || *c == '/';
    char path[512];
    if (!ok || snprintf(path, sizeof path, "%s/%s", r->srv->cfg.static_dir, rel) >=
                   (int)sizeof path)
        return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
    if (fd >= 0 && (fstat(fd, st) != 0 || !S_ISREG(st->st_mode))) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* A static file of the web client, sent from its descriptor (sendfile where
 * the kernel can): never copied into memory, never read on this thread. */
enum MHD_Result serve_static(struct req *r, const char *url)
{
    const char *type;
    struct stat st;
    char msg[200];
    int fd = open_static(r, url, &type, &st);
    if (fd < 0) {
        r->ep = EP_OTHER;
        snprintf(msg, sizeof msg, "no endpoint or file at %.120s", url);
        return send_error(r, ERR_NOT_FOUND, msg);
    }
    if (st.st_size > STATIC_MAX_BYTES) {
        close(fd);
        snprintf(msg, sizeof msg, "%.100s is %lld bytes; static files are served up to %d "
                 "bytes", url, (long long)st.st_size, STATIC_MAX_BYTES);
        return send_error(r, ERR_PAYLOAD_TOO_LARGE, msg);
    }
    struct MHD_Response *resp = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
    if (!resp) {
        close(fd);
        return send_error(r, ERR_INTERNAL, "out of memory sending a static file");
    }
    return send_response(r, 200, resp, (size_t)st.st_size, type);
}
