/* static.c -- the web client's static files; see static.h.
 * Part of the HTTP front (http/http.c).
 */
#include "http/static.h"

#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "http/response.h"
#include "lib/errors.h"

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
 * ([A-Za-z0-9_.-], sub-folders allowed) of known types, and only what is
 * really inside the folder: each component is opened beneath the previous
 * one without following a symbolic link (a link to /etc/passwd, or to a
 * folder outside, is not served), none may start with '.' (no dotfiles, no
 * ".."), and the last must be a regular file. Every refusal is a 404 like a
 * missing file, so an answer does not tell which files exist. */
int open_static(const struct req *r, const char *url, const char **type,
                struct stat *st)
{
    const char *rel = strcmp(url, "/") == 0 ? "index.html" : url + 1;
    *type = content_type_of(rel);
    int ok = *type != NULL && strlen(rel) < PATH_MAX;
    for (const char *c = rel; ok && *c; c++) {
        const int starts = c == rel || c[-1] == '/'; /* a component's first byte */
        ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
             *c == '_' || *c == '-' || (*c == '.' && !starts) || (*c == '/' && !starts);
    }
    if (!ok)
        return -1;
    int dir = open(r->srv->cfg.static_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (const char *c = rel; dir >= 0;) {
        char name[NAME_MAX + 1];
        const size_t n = strcspn(c, "/");
        if (n >= sizeof name) {
            close(dir);
            return -1;
        }
        memcpy(name, c, n);
        name[n] = '\0';
        const int last = c[n] == '\0';
        /* O_NONBLOCK: a FIFO must not block */
        const int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC |
                                             (last ? O_NONBLOCK : O_DIRECTORY));
        close(dir);
        if (last) {
            if (fd >= 0 && (fstat(fd, st) != 0 || !S_ISREG(st->st_mode))) {
                close(fd);
                return -1;
            }
            return fd;
        }
        dir = fd;
        c += n + 1;
    }
    return -1;
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
