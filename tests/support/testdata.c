#include "tests/support/testdata.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int testdata_list(const char *dir, char **paths, int max)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        size_t len = strlen(e->d_name);
        if (len > 5 && strcmp(e->d_name + len - 5, ".json") == 0) {
            paths[n] = malloc(strlen(dir) + len + 2);
            sprintf(paths[n++], "%s/%s", dir, e->d_name);
        }
    }
    closedir(d);
    qsort(paths, (size_t)n, sizeof *paths, cmp_str);
    return n;
}

static int is_json(const char *dir, const char *name)
{
    (void)dir;
    const size_t len = strlen(name);
    return len > 5 && strcmp(name + len - 5, ".json") == 0;
}

static int is_folder(const char *dir, const char *name)
{
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return name[0] != '.' && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* How many entries of dir are what keep says; 0 when dir is missing. */
static int count_entries(const char *dir, int (*keep)(const char *dir, const char *name))
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += keep(dir, e->d_name);
    closedir(d);
    return n;
}

int testdata_count(const char *dir)
{
    return count_entries(dir, is_json);
}

int testdata_count_dirs(const char *dir)
{
    return count_entries(dir, is_folder);
}

char *testdata_body(json_t *c, size_t *len)
{
    json_t *raw = json_object_get(c, "raw");
    if (raw) { /* may hold NUL bytes: keep the length */
        *len = json_string_length(raw);
        char *s = malloc(*len + 1);
        if (s)
            memcpy(s, json_string_value(raw), *len + 1);
        return s;
    }
    json_t *b = json_object_get(c, "request");
    char *s = json_dumps(b ? b : json_object_get(c, "body"), JSON_COMPACT);
    *len = s ? strlen(s) : 0;
    return s;
}

char *testdata_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 65536, n = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 == cap) {
            char *more = realloc(buf, cap *= 2);
            if (!more)
                free(buf);
            buf = more;
        }
    }
    const int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

int testdata_copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    char buf[65536];
    size_t n;
    int rc = in && out ? 0 : -1;
    while (!rc && (n = fread(buf, 1, sizeof buf, in)) > 0)
        rc = fwrite(buf, 1, n, out) == n ? 0 : -1;
    if (in)
        fclose(in);
    if (out && fclose(out) != 0)
        rc = -1;
    return rc;
}
