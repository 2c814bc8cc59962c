/* static.h -- the web client's static files (http/static.c).
 * Internal to the HTTP front (http/http.c).
 */
#ifndef SERVER_STATIC_H
#define SERVER_STATIC_H

#include <sys/stat.h>

#include "http/http_internal.h"

/* The file under cfg.static_dir that url names, opened read-only, with its
 * content type and size; -1 when there is none. */
int open_static(const struct req *r, const char *url, const char **type, struct stat *st);

/* Answer r with the file url names: 200, 404 or 413. */
enum MHD_Result serve_static(struct req *r, const char *url);

#endif
