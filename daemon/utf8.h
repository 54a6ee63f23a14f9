/*
 * utf8.h — text from outside (topology files, URL paths, error messages that quote a cut
 * piece of input) checked as UTF-8 before it goes where UTF-8 is required: JSON (jansson's
 * json_string returns NULL for anything else, and a NULL set into an object drops the
 * field or, in json_pack, the whole object), Alertmanager's label values, journald (which
 * stores a line that is not UTF-8 as a blob that `journalctl` does not print).
 *
 * Strict UTF-8 as RFC 3629 and jansson define it: no overlong forms, no surrogates
 * (U+D800..U+DFFF), nothing past U+10FFFF.
 */
#ifndef CCD_UTF8_H
#define CCD_UTF8_H

#include <stddef.h>

#include <jansson.h>

/** Bytes of the valid UTF-8 sequence at s[0..n) (1 to 4), 0 when s does not start one. */
size_t ccd_utf8_seq_len(const char *s, size_t n);

/** Whether s[0..n) is valid UTF-8 (NUL bytes count as valid: check them apart). */
int ccd_utf8_valid(const char *s, size_t n);

/** Makes s UTF-8 in place: drops its end when that is the start of a sequence without the
 *  rest (what a cut to a buffer's size, snprintf's, leaves), then writes '?' over each other
 *  byte that does not start a valid sequence. */
void ccd_utf8_fix(char *s);

/** s as a JSON string, every byte that does not start a valid sequence replaced by U+FFFD;
 *  *replaced (when not NULL) is set to the count of bytes replaced. NULL only when out of
 *  memory or s is NULL. */
json_t *ccd_json_text(const char *s, size_t *replaced);

#endif
