/* cc_time.c — civil dates and RFC 3339 (see cc_time.h). */
#include "cc_time.h"

#include <errno.h>

int64_t cc_days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

void cc_civil_from_days(int64_t days, int64_t *y, int *m, int *d)
{
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

int cc_civil_valid(int64_t y, int m, int d)
{
    static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m < 1 || m > 12 || d < 1)
        return 0;
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return d <= mdays[m - 1] + (m == 2 && leap);
}

static int digits(const char *s, size_t len, size_t at, int n, int *out)
{
    if (at + (size_t)n > len)
        return -1;
    int v = 0;
    for (int i = 0; i < n; i++) {
        char c = s[at + i];
        if (c < '0' || c > '9')
            return -1;
        v = v * 10 + (c - '0');
    }
    *out = v;
    return 0;
}

int cc_time_parse_rfc3339(const char *s, size_t len, int64_t *out)
{
    int Y, M, D, h, m, sec, oh = 0, om = 0, sign = 0;
    size_t i;
    if (len < 20 || digits(s, len, 0, 4, &Y) || s[4] != '-' || digits(s, len, 5, 2, &M) ||
        s[7] != '-' || digits(s, len, 8, 2, &D))
        return -EINVAL;
    if (s[10] != 'T' && s[10] != 't' && s[10] != ' ')
        return -EINVAL;
    if (digits(s, len, 11, 2, &h) || s[13] != ':' || digits(s, len, 14, 2, &m) || s[16] != ':' ||
        digits(s, len, 17, 2, &sec))
        return -EINVAL;
    i = 19;
    if (s[i] == '.') {
        size_t j = ++i;
        while (i < len && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == j)
            return -EINVAL;
    }
    if (i >= len)
        return -EINVAL;
    if (s[i] == 'Z' || s[i] == 'z') {
        i++;
    } else if (s[i] == '+' || s[i] == '-') {
        sign = s[i] == '-' ? -1 : 1;
        if (digits(s, len, i + 1, 2, &oh) || i + 3 >= len || s[i + 3] != ':' ||
            digits(s, len, i + 4, 2, &om))
            return -EINVAL;
        i += 6;
    } else {
        return -EINVAL;
    }
    if (i != len || !cc_civil_valid(Y, M, D) || h > 23 || m > 59 || sec > 60 || oh > 23 || om > 59)
        return -EINVAL;
    int64_t t = cc_days_from_civil(Y, M, D) * 86400 + h * 3600 + m * 60 + sec;
    *out = t - sign * (oh * 3600 + om * 60);
    return 0;
}

int cc_time_format_rfc3339(int64_t unix_s, char *buf, size_t cap)
{
    if (cap > 0)
        buf[0] = 0;
    /* years 0..9999: keeps the day arithmetic below far from overflow */
    if (cap < CC_RFC3339_LEN || unix_s < -62167219200LL || unix_s > 253402300799LL)
        return -ERANGE;
    int64_t days = unix_s >= 0 ? unix_s / 86400 : -((-unix_s + 86399) / 86400);
    int64_t sod = unix_s - days * 86400, y;
    int m, d;
    cc_civil_from_days(days, &y, &m, &d);
    int v[6] = {(int)y, m, d, (int)(sod / 3600), (int)(sod / 60 % 60), (int)(sod % 60)};
    buf[0] = (char)('0' + v[0] / 1000), buf[1] = (char)('0' + v[0] / 100 % 10);
    buf[2] = (char)('0' + v[0] / 10 % 10), buf[3] = (char)('0' + v[0] % 10);
    static const char sep[] = "--T::";
    for (int i = 1; i < 6; i++) {
        buf[1 + 3 * i] = sep[i - 1];
        buf[2 + 3 * i] = (char)('0' + v[i] / 10);
        buf[3 + 3 * i] = (char)('0' + v[i] % 10);
    }
    buf[19] = 'Z';
    buf[20] = 0;
    return 0;
}
