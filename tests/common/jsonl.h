/* tests/common/jsonl.h — a strict little JSON reader for the tests of
 * commands that print one JSON object per line: objects, arrays, strings,
 * numbers, true/false/null; a stray comma, an unquoted NaN or trailing text
 * makes a line invalid. Nothing is allocated. */
#ifndef VKG_TEST_JSONL_H
#define VKG_TEST_JSONL_H

#include <stdbool.h>
#include <stddef.h>

/* Is line exactly one JSON object (blanks around it allowed)? */
bool jsonl_is_object(const char *line);
/* The raw text of top-level key `key` of a line that is one object, copied
 * into out (cut to n - 1 characters), or NULL when the key is absent. */
const char *jsonl_get(const char *line, const char *key, char *out, size_t n);
/* Top-level key `key` as a number: true with *v set, false when the key is
 * absent or its value is not a number (null, a string, ...). */
bool jsonl_num(const char *line, const char *key, double *v);

#endif
