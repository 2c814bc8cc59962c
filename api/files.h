/* files.h -- the web client's static files (static_dir), for the route
 * table's GET /... row (api/routes.c): which paths name one, and the file
 * opened read-only for the transport to send from its descriptor. */
#ifndef API_FILES_H
#define API_FILES_H

/* Largest static file served; the web client's files are far smaller. */
#define FILES_MAX_BYTES (16 << 20)

/* Serve the files under dir (borrowed: must outlive the server). */
void files_init(const char *dir);

/* The file that url names, opened read-only, with its content type and
 * size; -1 when there is none. */
int files_open(const char *url, const char **type, long long *size);

/* Whether url names a file (the row's exists column). */
int files_exist(const char *url);

#endif
