/* fixture.h -- the files the tests read, and the rule for one that is
 * missing: a failure that names the file and what makes it, in every test
 * (never a skip in one and an assertion in another).
 *
 * The generated fixtures are committed (tests/golden by tests/gen_golden.py,
 * tests/golden_variants by tests/gen_variants.py, tests/cases by
 * tests/gen_cases.py, tests/models by tests/gen_models.py, the trained
 * models by models/train_*.py); the others (openapi.yaml, docs/, README.md,
 * config/, examples/) are the repository's own, and the tests run from its
 * top. Each function here fails the calling Criterion test when the file is
 * not there. */
#ifndef TESTS_FIXTURE_H
#define TESTS_FIXTURE_H

#include <stddef.h>

/* What makes the file or folder at path: a command, or where it lives. */
const char *fixture_maker(const char *path);

/* Fails the test unless path (file or folder) exists. */
void fixture_need(const char *path);

/* The whole file at path (testdata_read), malloc'd (caller frees), length in
 * *len when len is not NULL; fails the test when it cannot be read. */
char *fixture_read(const char *path, size_t *len);

/* The *.json files of dir, sorted, as malloc'd paths (caller frees each),
 * as testdata_list(); fails the test when dir holds none, or more than max. */
int fixture_list(const char *dir, char **paths, int max);

/* openapi.yaml's text, read once per process (never freed): the one reader
 * of the spec. */
#define FIXTURE_SPEC "openapi.yaml"
const char *fixture_spec(void);

#endif
