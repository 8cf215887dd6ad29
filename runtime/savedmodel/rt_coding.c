/* rt_coding.c - growable byte buffer, varints, fixed-width integers. */
#include "rt_coding.h"

#include <stdlib.h>
#include <string.h>

int rt_bytes_reserve(rt_bytes *b, size_t extra) {
    if (b->failed)
        return -1;
    if (extra <= b->cap - b->len)
        return 0;
    if (extra > SIZE_MAX / 2 - b->len) {
        b->failed = 1;
        return -1;
    }
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->len < extra)
        cap *= 2;
    uint8_t *p = realloc(b->data, cap);
    if (p == NULL) {
        b->failed = 1;
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

void rt_bytes_append(rt_bytes *b, const void *p, size_t n) {
    if (n == 0 || rt_bytes_reserve(b, n) != 0)
        return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void rt_bytes_put_u8(rt_bytes *b, uint8_t v) {
    rt_bytes_append(b, &v, 1);
}

void rt_bytes_put_fixed32(rt_bytes *b, uint32_t v) {
    uint8_t t[4];
    rt_store_le32(t, v);
    rt_bytes_append(b, t, 4);
}

void rt_bytes_put_fixed64(rt_bytes *b, uint64_t v) {
    uint8_t t[8];
    rt_store_le32(t, (uint32_t)v);
    rt_store_le32(t + 4, (uint32_t)(v >> 32));
    rt_bytes_append(b, t, 8);
}

void rt_bytes_put_varint32(rt_bytes *b, uint32_t v) {
    rt_bytes_put_varint64(b, v);
}

void rt_bytes_put_varint64(rt_bytes *b, uint64_t v) {
    uint8_t t[10];
    rt_bytes_append(b, t, rt_varint64_encode(t, v));
}

uint8_t *rt_bytes_take(rt_bytes *b, size_t *len) {
    uint8_t *p = b->data;
    if (len)
        *len = b->len;
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = 0;
    return p;
}

void rt_bytes_free(rt_bytes *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = 0;
}

size_t rt_varint64_encode(uint8_t *p, uint64_t v) {
    size_t i = 0;
    while (v >= 0x80) {
        p[i++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[i++] = (uint8_t)v;
    return i;
}

size_t rt_varint64_decode(const uint8_t *p, size_t n, uint64_t *v) {
    uint64_t r = 0;
    for (size_t i = 0; i < 10 && i < n; i++) {
        uint64_t part = p[i] & 0x7f;
        if (i == 9 && part > 1)
            return 0; /* more than 64 bits */
        r |= part << (7 * i);
        if ((p[i] & 0x80) == 0) {
            *v = r;
            return i + 1;
        }
    }
    return 0;
}

size_t rt_varint32_decode(const uint8_t *p, size_t n, uint32_t *v) {
    uint64_t r;
    size_t k = rt_varint64_decode(p, n < 5 ? n : 5, &r);
    if (k == 0 || r > UINT32_MAX)
        return 0;
    *v = (uint32_t)r;
    return k;
}
