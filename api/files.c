/* files.c -- the web client's static files; see files.h. */
#include "api/files.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The folder, set once at start-up. */
static const char *files_dir = "web";

void files_init(const char *dir)
{
    files_dir = dir;
}

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

/* Only plain names
 * ([A-Za-z0-9_.-], sub-folders allowed) of known types, and only what is
 * really inside the folder: each component is opened beneath the previous
 * one without following a symbolic link (a link to /etc/passwd, or to a
 * folder outside, is not served), none may start with '.' (no dotfiles, no
 * ".."), and the last must be a regular file. Every refusal is a 404 like a
 * missing file, so an answer does not tell which files exist. */
int files_open(const char *url, const char **type, long long *size)
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
    int dir = open(files_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
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
            struct stat st;
            if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
                close(fd);
                return -1;
            }
            *size = (long long)st.st_size;
            return fd;
        }
        dir = fd;
        c += n + 1;
    }
    return -1;
}

int files_exist(const char *url)
{
    const char *type;
    long long size;
    const int fd = files_open(url, &type, &size);
    if (fd >= 0)
        close(fd);
    return fd >= 0;
}
