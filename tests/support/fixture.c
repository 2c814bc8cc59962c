#include "tests/support/fixture.h"

#include <criterion/criterion.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/support/testdata.h"

/* By prefix of the path, the first that matches. */
static const struct { const char *prefix, *maker; } makers[] = {
    {"tests/golden_variants", "/usr/bin/python3 tests/gen_variants.py"},
    {"tests/golden", "/usr/bin/python3 tests/gen_golden.py"},
    {"tests/cases", "python3 tests/gen_cases.py"},
    {"tests/models/trained/digits-reverse", "/usr/bin/python3 models/train_digits_reverse.py"},
    {"tests/models", "/usr/bin/python3 tests/gen_models.py"},
    {"models/digits-reverse", "/usr/bin/python3 models/train_digits_reverse.py"},
    {"models/induction", "/usr/bin/python3 models/train_induction.py"},
    {"build/", "make all"},
};

const char *fixture_maker(const char *path)
{
    for (size_t i = 0; i < sizeof makers / sizeof makers[0]; i++)
        if (strncmp(path, makers[i].prefix, strlen(makers[i].prefix)) == 0)
            return makers[i].maker;
    return "it is in the repository: run the tests from its top";
}

void fixture_need(const char *path)
{
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "fixture %s is missing (%s)", path, fixture_maker(path));
}

char *fixture_read(const char *path, size_t *len)
{
    char *text = testdata_read(path, len);
    cr_assert_not_null(text, "fixture %s cannot be read (%s)", path, fixture_maker(path));
    return text;
}

int fixture_list(const char *dir, char **paths, int max)
{
    const int n = testdata_list(dir, paths, max), all = testdata_count(dir);
    cr_assert_gt(n, 0, "fixture %s holds no case (%s)", dir, fixture_maker(dir));
    cr_assert_eq(n, all, "listed %d of the %d cases of %s", n, all, dir);
    return n;
}

const char *fixture_spec(void)
{
    static char *text;
    if (!text)
        text = fixture_read(FIXTURE_SPEC, NULL);
    return text;
}
