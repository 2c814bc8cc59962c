/* jsonnum.h -- numbers between JSON text and float32 arrays, fast.
 *
 * jansson builds a 32-byte node per number and parses big numeric arrays at
 * about 45 MB/s; json_dumps writes them at about 55 MB/s. This module is the
 * fast route for tensors, in both directions, with no DOM:
 *
 *   Writing. jsonnum_format_float() writes the shortest decimal that reads
 *   back as the same float32 -- "0.1", not "0.100000001" -- both directly
 *   (strtof) and through a double ((float)strtod, as Python, JavaScript and
 *   jsonnum_parse_array() read it), using Ryu (Ulf Adams, PLDI 2018) for the
 *   digits, which needs only 64-bit multiplications and two small tables.
 *   The double route rounds twice, and a handful of Ryu's shortest decimals
 *   do not survive it (0x15ae43fd: "7.038531e-26" reads back 0x15ae43fe);
 *   those get one digit more ("7.0385307e-26"). Of the two forms,
 *   fixed ("0.0123", "16777216") and scientific ("1e-45", "3.4028235e38"),
 *   it writes the shorter, and fixed when they tie. jsonnum_format_array()
 *   writes a whole row "[a,b,c]". `make roundtrip-check` checks all 2^32
 *   floats both ways.
 *
 *   Reading. jsonnum_parse_array() reads one JSON array of numbers, nested
 *   to any rank from 1 to 4 and rectangular ("[[1, 2], [3, 4]]" is (2, 2)),
 *   straight into a malloc'd float buffer of 4 bytes a number. It accepts
 *   exactly RFC 8259's grammar (numbers, whitespace, brackets, commas) and
 *   produces, bit for bit, what jansson + a cast gives: (float)
 *   json_number_value(v), i.e. (float)strtod(token) for reals and
 *   (float)(double)(long long) for integers -- so "-0" is +0 (jansson reads
 *   it as the integer 0) while "-0.0" is -0. Unlike jansson it takes every
 *   number JSON allows: an integer outside long long is read as a real,
 *   (float)strtod(token), and a number beyond double is out of float32
 *   range -- what jansson gives after jsonnum_standin() (below). Like
 *   jansson it ignores one NUL byte right after a number (jansson's lexer
 *   loses a NUL it has read ahead and put back). jsonnum_parse_array_opt()
 *   with JSONNUM_NEG_INF also reads the strings "-inf" and "-Infinity",
 *   written exactly so, as -infinity, where a number may be (a string with
 *   escapes goes to the reference path, which reads it as the same string):
 *   JSON has no infinity, and a float mask needs it.
 *
 *     struct jsonnum_array a;
 *     struct jsonnum_error e;
 *     size_t used;
 *     if (jsonnum_parse_array(&a, text, len, max_count, &used, &e) == JSONNUM_OK) {
 *         ... a.data: (a.shape[0], ..., a.shape[a.ndim - 1]), a.count floats ...
 *         jsonnum_array_deinit(&a);   (or take a.data and free() it later)
 *     } else if (e.code != JSONNUM_ERR_SYNTAX) {
 *         ... valid JSON perhaps, but not a clean numeric array: parse it
 *             with jansson for the exact error, as before ...
 *     }
 *
 * What "not a clean numeric array" means. JSONNUM_ERR_SYNTAX is a claim: the
 * text is not JSON, and jansson rejects any document containing it, with or
 * without jsonnum_standin() (a test checks this against jansson over
 * generated and mutated inputs). Every other
 * error means only "stopped here, this is not a clean numeric array" and
 * makes no claim about the rest of the text, which was not read:
 *   JSONNUM_ERR_TYPE   a string (but "-inf" with JSONNUM_NEG_INF), object,
 *                      true, false or null, or a top-level value that is
 *                      not an array ("[1, \"a\"]" is valid JSON);
 *   JSONNUM_ERR_SHAPE  ragged, an empty array, or a number where an array is
 *                      expected or the other way round;
 *   JSONNUM_ERR_DEPTH  an array nested more than 4 deep;
 *   JSONNUM_ERR_RANGE  a number whose float32 is infinite ("1e39", and
 *                      "1e400", which is beyond double too);
 *   JSONNUM_ERR_LIMIT  more than max_count numbers (checked before the
 *                      buffer grows, so a huge array costs no memory);
 *   JSONNUM_ERR_NOMEM  out of memory.
 * Errors are found in document order: the first offending token wins, and
 * err->offset is its byte offset in s. When jansson accepts a document
 * (after jsonnum_standin()), the parser returns JSONNUM_OK exactly when the
 * document is a clean numeric array, with the same shape and the same float
 * bits.
 *
 * Numbers jansson cannot hold. jansson refuses a whole document for one
 * integer outside long long ("too big integer") or one number beyond double
 * ("real number overflow"), though JSON allows both and JavaScript writes
 * 1e20 as 100000000000000000000. jsonnum_standin() rewrites a copy of such
 * a document so that jansson loads it and reads each of those numbers as
 * this parser does: an integer outside long long becomes the real of the
 * same value, its shortest digits with an exponent ("1e20"); a number beyond
 * double becomes "1e39" with its sign, beyond float32 as it was. Each
 * stand-in is right-aligned in the bytes of its token, spaces before it, so
 * every other byte keeps its offset (and jansson's error columns).
 *
 * Conversion. Integers and decimals with at most 19 significant digits whose
 * value is w·10^e with w ≤ 2^53 and |e| ≤ 22 (nearly every float printed
 * with 9 digits) are exact double operations (Clinger's fast path), hence
 * the correctly rounded double, hence equal to strtod's; the rest go through
 * strtod itself. strtod reads the locale's decimal point: like the rest of
 * the service, this assumes nobody calls setlocale. Needs a round-to-nearest
 * FPU mode and FLT_EVAL_METHOD 0 (x86-64 SSE), both the defaults.
 */
#ifndef LIB_JSONNUM_H
#define LIB_JSONNUM_H

#include <stddef.h>

#define JSONNUM_MAX_RANK 4

/* Bytes jsonnum_format_float() may write: 15 characters ("-1.23456789e-38")
 * and a NUL. */
#define JSONNUM_FLOAT_MAX 16

/* Bytes jsonnum_format_array() may write for n floats, NUL included. */
#define JSONNUM_ARRAY_MAX(n) ((size_t)(n) * JSONNUM_FLOAT_MAX + 3)

enum jsonnum_status {
    JSONNUM_OK = 0,
    JSONNUM_ERR_SYNTAX = -1,
    JSONNUM_ERR_TYPE = -2,
    JSONNUM_ERR_SHAPE = -3,
    JSONNUM_ERR_DEPTH = -4,
    JSONNUM_ERR_RANGE = -5,
    JSONNUM_ERR_LIMIT = -6,
    JSONNUM_ERR_NOMEM = -7,
};

struct jsonnum_error {
    int code;       /* enum jsonnum_status */
    size_t offset;  /* byte offset in s of the offending token */
    char msg[120];  /* e.g. "ragged array: 3 elements where 4 expected" */
};

struct jsonnum_array {
    float *data;                        /* (shape[0], ..., shape[ndim-1]) row-major;
                                           malloc'd, owned by the caller */
    size_t count;                       /* product of the shape, ≥ 1 */
    int ndim;                           /* 1 .. JSONNUM_MAX_RANK */
    long long shape[JSONNUM_MAX_RANK];  /* unused dimensions are 0 */
};

/* Short name of a status ("syntax", "ragged or empty", ...). */
const char *jsonnum_status_str(int status);

/* Write f as the shortest JSON number that reads back as f both by strtof
 * and by (float)strtod (the nearest such, when several), with a NUL after
 * it; dst needs JSONNUM_FLOAT_MAX bytes. -0 is written "-0". JSON has no
 * infinity or NaN: for those it writes "null" (as JavaScript's
 * JSON.stringify does). Returns the length, NUL excluded. */
int jsonnum_format_float(char *dst, float f);

/* Write "[x0,x1,...]" (no spaces) and a NUL. x: (n,); dst needs
 * JSONNUM_ARRAY_MAX(n) bytes. Returns the length, NUL excluded. */
size_t jsonnum_format_array(char *dst, const float *x, size_t n);

/* Options of jsonnum_parse_array_opt(). */
#define JSONNUM_NEG_INF 1u /* "-inf" and "-Infinity" read as -infinity */
#define JSONNUM_BOOL 2u    /* true and false (1 and 0) instead of numbers: a
                              number is JSONNUM_ERR_TYPE */

/* Parse one JSON array of numbers at s (len bytes, need not be NUL-terminated;
 * leading JSON whitespace is skipped). On JSONNUM_OK, *a holds the data
 * (caller frees, see jsonnum_array_deinit) and *consumed is the offset just
 * past the closing ']'. On failure *a is zeroed (nothing to free) and err
 * says what and where; see the design comment for what each status means.
 * max_count bounds the number of numbers (SIZE_MAX: no bound). */
int jsonnum_parse_array(struct jsonnum_array *a, const char *s, size_t len, size_t max_count,
                        size_t *consumed, struct jsonnum_error *err);

/* The same with options: flags is 0, JSONNUM_NEG_INF or JSONNUM_BOOL. */
int jsonnum_parse_array_opt(struct jsonnum_array *a, const char *s, size_t len,
                            size_t max_count, unsigned flags, size_t *consumed,
                            struct jsonnum_error *err);

/* Free a's data (NULL is fine) and zero a. */
void jsonnum_array_deinit(struct jsonnum_array *a);

/* Replace, in s (len bytes and a NUL after them), every number token that
 * jansson cannot hold by its stand-in (see the design comment); strings are
 * left alone. Returns how many were replaced. */
size_t jsonnum_standin(char *s, size_t len);

#endif
