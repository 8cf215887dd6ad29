/* srv_b64.c - base64 for the REST APIs ({"b64": ...}, KServe BYTES). */
#include <stdlib.h>
#include <string.h>

#include "srv_b64.h"

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_val(int c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

/* Decodes standard or URL-safe base64 (padding optional). malloc'ed; NULL
 * when the text is not base64. */
uint8_t *srv_b64_decode(const char *s, size_t *n) {
    size_t len = strlen(s);
    uint8_t *o = malloc(len / 4 * 3 + 3);
    if (o == NULL) return NULL;
    size_t k = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '=') {
            for (size_t j = i; j < len; j++)
                if (s[j] != '=') goto bad;
            break;
        }
        int v = b64_val((unsigned char)s[i]);
        if (v < 0) goto bad;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            o[k++] = (uint8_t)(acc >> bits);
        }
    }
    *n = k;
    return o;
bad:
    free(o);
    return NULL;
}

char *srv_b64_encode(const uint8_t *p, size_t n) {
    char *o = malloc((n + 2) / 3 * 4 + 1), *w = o;
    if (o == NULL) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        *w++ = B64[v >> 18 & 63];
        *w++ = B64[v >> 12 & 63];
        *w++ = i + 1 < n ? B64[v >> 6 & 63] : '=';
        *w++ = i + 2 < n ? B64[v & 63] : '=';
    }
    *w = 0;
    return o;
}
