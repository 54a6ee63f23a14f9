/* utf8.c — UTF-8 checks on text from outside; see utf8.h. */
#include "utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t ccd_utf8_seq_len(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    if (!n)
        return 0;
    if (s[0] < 0x80)
        return 1;
    size_t len = s[0] >= 0xc2 && s[0] <= 0xdf   ? 2
                 : s[0] >= 0xe0 && s[0] <= 0xef ? 3
                 : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4
                                                : 0; /* a continuation byte, C0, C1, F5.. */
    if (!len || len > n)
        return 0;
    uint32_t cp = s[0] & (0x7f >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0; /* overlong, past Unicode, a surrogate */
    return len;
}

int ccd_utf8_valid(const char *s, size_t n)
{
    for (size_t i = 0, k; i < n; i += k)
        if (!(k = ccd_utf8_seq_len(s + i, n - i)))
            return 0;
    return 1;
}

void ccd_utf8_fix(char *s)
{
    size_t n = strlen(s), i = n;
    while (i > 0 && n - i < 3 && ((unsigned char)s[i - 1] & 0xc0) == 0x80)
        i--; /* back over the continuation bytes of the last sequence */
    if (i > 0 && (unsigned char)s[i - 1] >= 0xc0 && !ccd_utf8_seq_len(s + i - 1, n - i + 1))
        s[n = i - 1] = 0; /* its first byte, whose sequence the end cut */
    for (size_t k, j = 0; j < n; j += k ? k : 1)
        if (!(k = ccd_utf8_seq_len(s + j, n - j)))
            s[j] = '?';
}

json_t *ccd_json_text(const char *s, size_t *replaced)
{
    if (replaced)
        *replaced = 0;
    if (!s)
        return NULL;
    size_t n = strlen(s), bad = 0;
    for (size_t i = 0, k; i < n; i += k ? k : 1)
        bad += !(k = ccd_utf8_seq_len(s + i, n - i));
    if (!bad)
        return json_stringn(s, n);
    char *fixed = malloc(n + 2 * bad + 1); /* each bad byte becomes the 3 bytes of U+FFFD */
    if (!fixed)
        return NULL;
    size_t o = 0;
    for (size_t i = 0, k; i < n; i += k ? k : 1) {
        if ((k = ccd_utf8_seq_len(s + i, n - i))) {
            memcpy(fixed + o, s + i, k);
            o += k;
        } else {
            memcpy(fixed + o, "\xef\xbf\xbd", 3);
            o += 3;
        }
    }
    json_t *j = json_stringn(fixed, o);
    free(fixed);
    if (replaced)
        *replaced = bad;
    return j;
}
