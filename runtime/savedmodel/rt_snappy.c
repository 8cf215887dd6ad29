/* rt_snappy.c - Snappy raw-format codec (see rt_snappy.h). */
#include "rt_snappy.h"

#include <stdlib.h>
#include <string.h>

/* ---- decompression ---- */

static int snappy_varint32(const uint8_t *p, size_t n, uint32_t *v, size_t *used) {
    uint64_t r = 0;
    for (size_t i = 0; i < 5 && i < n; i++) {
        r |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if ((p[i] & 0x80) == 0) {
            if (r > UINT32_MAX)
                return -1;
            *v = (uint32_t)r;
            *used = i + 1;
            return 0;
        }
    }
    return -1;
}

ms_status rt_snappy_uncompressed_length(const uint8_t *src, size_t n, size_t *out) {
    uint32_t v;
    size_t used;
    if (snappy_varint32(src, n, &v, &used) != 0)
        return ms_errf(MS_EDATALOSS, "snappy: bad length preamble");
    *out = v;
    return MS_OK;
}

ms_status rt_snappy_decompress(const uint8_t *src, size_t n, uint8_t *dst, size_t dst_cap,
                               size_t *out_len) {
    uint32_t want;
    size_t used;
    if (snappy_varint32(src, n, &want, &used) != 0)
        return ms_errf(MS_EDATALOSS, "snappy: bad length preamble");
    if (want > dst_cap)
        return ms_errf(MS_EDATALOSS, "snappy: declared length %u exceeds the %zu expected", want,
                       dst_cap);
    size_t ip = used, op = 0;
    while (ip < n) {
        uint8_t tag = src[ip++];
        size_t len, off;
        switch (tag & 3) {
        case 0: /* literal */
            len = tag >> 2;
            if (len >= 60) {
                size_t nb = len - 59;
                if (n - ip < nb)
                    return ms_errf(MS_EDATALOSS, "snappy: truncated literal length at %zu", ip);
                len = 0;
                for (size_t i = 0; i < nb; i++)
                    len |= (size_t)src[ip + i] << (8 * i);
                ip += nb;
            }
            len += 1;
            if (n - ip < len)
                return ms_errf(MS_EDATALOSS, "snappy: literal of %zu bytes overruns input at %zu",
                               len, ip);
            if (want - op < len)
                return ms_errf(MS_EDATALOSS, "snappy: literal overruns declared length %u", want);
            memcpy(dst + op, src + ip, len);
            ip += len;
            op += len;
            continue;
        case 1:
            if (n - ip < 1)
                return ms_errf(MS_EDATALOSS, "snappy: truncated copy at %zu", ip);
            len = 4 + ((tag >> 2) & 7);
            off = ((size_t)(tag >> 5) << 8) | src[ip];
            ip += 1;
            break;
        case 2:
            if (n - ip < 2)
                return ms_errf(MS_EDATALOSS, "snappy: truncated copy at %zu", ip);
            len = 1 + (size_t)(tag >> 2);
            off = (size_t)src[ip] | (size_t)src[ip + 1] << 8;
            ip += 2;
            break;
        default:
            if (n - ip < 4)
                return ms_errf(MS_EDATALOSS, "snappy: truncated copy at %zu", ip);
            len = 1 + (size_t)(tag >> 2);
            off = (size_t)src[ip] | (size_t)src[ip + 1] << 8 | (size_t)src[ip + 2] << 16 |
                  (size_t)src[ip + 3] << 24;
            ip += 4;
            break;
        }
        if (off == 0 || off > op)
            return ms_errf(MS_EDATALOSS, "snappy: copy offset %zu invalid at output %zu", off, op);
        if (want - op < len)
            return ms_errf(MS_EDATALOSS, "snappy: copy overruns declared length %u", want);
        /* Overlapping copies (off < len) repeat a pattern: go byte by byte. */
        if (off >= len) {
            memcpy(dst + op, dst + op - off, len);
        } else {
            for (size_t i = 0; i < len; i++)
                dst[op + i] = dst[op - off + i];
        }
        op += len;
    }
    if (op != want)
        return ms_errf(MS_EDATALOSS, "snappy: produced %zu bytes, declared %u", op, want);
    if (out_len)
        *out_len = want;
    return MS_OK;
}

ms_status rt_snappy_decompress_alloc(const uint8_t *src, size_t n, size_t max_len, uint8_t **out,
                                     size_t *out_len) {
    size_t len;
    ms_status st = rt_snappy_uncompressed_length(src, n, &len);
    if (st != MS_OK)
        return st;
    if (len > max_len)
        return ms_errf(MS_EDATALOSS, "snappy: declared length %zu above the limit %zu", len,
                       max_len);
    uint8_t *buf = malloc(len ? len : 1);
    if (buf == NULL)
        return ms_errf(MS_ENOMEM, "snappy: cannot allocate %zu bytes", len);
    st = rt_snappy_decompress(src, n, buf, len, out_len);
    if (st != MS_OK) {
        free(buf);
        return st;
    }
    *out = buf;
    return MS_OK;
}

/* ---- compression ---- */

#define SNAPPY_FRAGMENT 65536u
#define SNAPPY_HASH_BITS 14

size_t rt_snappy_max_compressed_length(size_t n) {
    return 32 + n + n / 6;
}

static uint32_t load32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t snappy_hash(uint32_t v) {
    return (v * 0x1e35a7bdu) >> (32 - SNAPPY_HASH_BITS);
}

static uint8_t *emit_literal(uint8_t *op, const uint8_t *lit, size_t len) {
    size_t n = len - 1;
    if (n < 60) {
        *op++ = (uint8_t)(n << 2);
    } else {
        int nb = n < 0x100 ? 1 : n < 0x10000 ? 2 : n < 0x1000000 ? 3 : 4;
        *op++ = (uint8_t)((59 + nb) << 2);
        for (int i = 0; i < nb; i++)
            *op++ = (uint8_t)(n >> (8 * i));
    }
    memcpy(op, lit, len);
    return op + len;
}

/* One copy element of 1..64 bytes (offset below 65536 within a fragment). */
static uint8_t *emit_copy_upto64(uint8_t *op, size_t off, size_t len) {
    if (len >= 4 && len <= 11 && off < 2048) {
        *op++ = (uint8_t)(1 | ((len - 4) << 2) | ((off >> 8) << 5));
        *op++ = (uint8_t)(off & 0xff);
    } else {
        *op++ = (uint8_t)(2 | ((len - 1) << 2));
        *op++ = (uint8_t)(off & 0xff);
        *op++ = (uint8_t)(off >> 8);
    }
    return op;
}

static uint8_t *emit_copy(uint8_t *op, size_t off, size_t len) {
    /* Keep every piece at least 4 long so the short form stays usable. */
    while (len >= 68) {
        op = emit_copy_upto64(op, off, 64);
        len -= 64;
    }
    if (len > 64) {
        op = emit_copy_upto64(op, off, 60);
        len -= 60;
    }
    return emit_copy_upto64(op, off, len);
}

static uint8_t *compress_fragment(const uint8_t *src, size_t n, uint8_t *op, uint16_t *table) {
    size_t lit = 0, ip = 0;
    memset(table, 0, sizeof(uint16_t) << SNAPPY_HASH_BITS);
    if (n >= 8) {
        size_t limit = n - 4; /* last position where a 4-byte load fits */
        ip = 1;
        while (ip <= limit) {
            uint32_t v = load32(src + ip);
            uint32_t h = snappy_hash(v);
            size_t cand = table[h];
            table[h] = (uint16_t)ip;
            if (cand < ip && load32(src + cand) == v) {
                size_t len = 4;
                while (ip + len < n && src[cand + len] == src[ip + len])
                    len++;
                if (ip > lit)
                    op = emit_literal(op, src + lit, ip - lit);
                op = emit_copy(op, ip - cand, len);
                ip += len;
                lit = ip;
                continue;
            }
            ip++;
        }
    }
    if (lit < n)
        op = emit_literal(op, src + lit, n - lit);
    return op;
}

size_t rt_snappy_compress(const uint8_t *src, size_t n, uint8_t *dst) {
    uint8_t *op = dst;
    uint64_t v = n;
    do {
        uint8_t b = v & 0x7f;
        v >>= 7;
        *op++ = (uint8_t)(b | (v ? 0x80 : 0));
    } while (v);
    uint16_t table[1u << SNAPPY_HASH_BITS];
    for (size_t pos = 0; pos < n; pos += SNAPPY_FRAGMENT) {
        size_t len = n - pos < SNAPPY_FRAGMENT ? n - pos : SNAPPY_FRAGMENT;
        op = compress_fragment(src + pos, len, op, table);
    }
    return (size_t)(op - dst);
}
