/* access_log.c -- see access_log.h. */
#include "lib/access_log.h"

#include <stdatomic.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* 1..64 characters of [A-Za-z0-9._:-]. */
static int sane_id(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++) {
        const char c = s[n];
        if (n >= 64 || !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                         (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':' || c == '-'))
            return 0;
    }
    return n > 0;
}

void request_id_of(char out[REQUEST_ID_BYTES], const char *client)
{
    if (client && sane_id(client)) {
        memcpy(out, client, strlen(client) + 1);
        return;
    }
    /* 128 random bits as 32 hex digits, from the kernel 16 ids at a time;
     * a counter if it has none */
    static atomic_ullong counter;
    static _Thread_local unsigned char pool[16 * 16];
    static _Thread_local size_t used = sizeof pool;
    unsigned char b[16];
    if (used == sizeof pool && getrandom(pool, sizeof pool, GRND_NONBLOCK) == (ssize_t)sizeof pool)
        used = 0;
    if (used < sizeof pool) {
        memcpy(b, pool + used, sizeof b);
        used += sizeof b;
    } else {
        const unsigned long long c = atomic_fetch_add(&counter, 1) + 1;
        const unsigned long long t = (unsigned long long)time(NULL);
        memcpy(b, &c, 8);
        memcpy(b + 8, &t, 8);
    }
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[32] = '\0';
}

char *log_escape(char *dst, size_t n, const char *src)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (const unsigned char *c = (const unsigned char *)src; *c && o + 5 <= n; c++) {
        if (*c > 0x20 && *c < 0x7f && *c != '\\') {
            dst[o++] = (char)*c;
        } else {
            dst[o++] = '\\', dst[o++] = 'x';
            dst[o++] = hex[*c >> 4], dst[o++] = hex[*c & 15];
        }
    }
    if (n)
        dst[o < n ? o : n - 1] = '\0';
    return dst;
}
