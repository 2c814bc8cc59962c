/* testdata.h -- the data files the tests share: listing tests/golden and
 * tests/cases, and the request body a file holds.
 *
 * A golden case keeps its body under "request"; an invalid-request case
 * under "body" (a JSON value) or "raw" (exact text, possibly with NUL
 * bytes, read with JSON_ALLOW_NUL). */
#ifndef TESTS_TESTDATA_H
#define TESTS_TESTDATA_H

#include <jansson.h>
#include <stddef.h>

/* The *.json files of dir, sorted, as malloc'd paths (caller frees each);
 * returns how many (at most max, 0 when dir is missing). */
int testdata_list(const char *dir, char **paths, int max);

/* How many *.json files dir holds (0 when it is missing), with no limit:
 * what a test that lists a fixture folder asserts it went through. */
int testdata_count(const char *dir);
/* How many folders dir holds (a model repository's models), 0 when it is
 * missing. */
int testdata_count_dirs(const char *dir);

/* The request body of case c: "raw" as is, else the value under "request"
 * or "body" written compactly. malloc'd (caller frees), length in *len. */
char *testdata_body(json_t *c, size_t *len);

/* The whole file at path, NUL-terminated, malloc'd (caller frees); its
 * length in *len when len is not NULL. NULL when it cannot be read. The one
 * whole-file reader of the tests: fixture_read() (fixture.h) asserts on it. */
char *testdata_read(const char *path, size_t *len);

/* Copy the file from to the file to (created or truncated); 0, or -1. */
int testdata_copy_file(const char *from, const char *to);

#endif
