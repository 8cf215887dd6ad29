/* ms_wire.c - protobuf wire-format pre-scan (see ms_wire.h). */
#include "ms_wire.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static bool wire_varint(const uint8_t *p, size_t n, size_t *pos, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64 && *pos < n; shift += 7) {
        uint8_t b = p[(*pos)++];
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

/* Does [p, p+n) parse as a flat sequence of fields? On failure *bad_at is
 * the offset of the field that does not parse. *nfields: how many. */
static bool wire_flat_ok(const uint8_t *p, size_t n, size_t *bad_at, uint64_t *nfields) {
    size_t pos = 0;
    *nfields = 0;
    while (pos < n) {
        ++*nfields;
        uint64_t key, v;
        size_t at = pos;
        if (!wire_varint(p, n, &pos, &key) || (key >> 3) == 0) {
            *bad_at = at;
            return false;
        }
        switch (key & 7) {
        case 0:
            if (!wire_varint(p, n, &pos, &v)) { *bad_at = at; return false; }
            break;
        case 1:
            if (n - pos < 8) { *bad_at = at; return false; }
            pos += 8;
            break;
        case 2:
            if (!wire_varint(p, n, &pos, &v) || v > n - pos) { *bad_at = at; return false; }
            pos += (size_t)v;
            break;
        case 5:
            if (n - pos < 4) { *bad_at = at; return false; }
            pos += 4;
            break;
        default: /* groups (3, 4) are not used by our protos */
            *bad_at = at;
            return false;
        }
    }
    return true;
}

/* Depth of the deepest chain of length-delimited fields that each parse as
 * messages, found with an explicit stack of (start, end, cursor). */
static ms_status too_many(uint64_t max_fields) {
    return ms_errf(MS_ENOMEM,
                   "message holds more than %llu protobuf fields (elements, map entries and "
                   "sub-messages counted at every level; limit)",
                   (unsigned long long)max_fields);
}

static ms_status wire_scan(const uint8_t *buf, size_t n, int max_depth, uint64_t max_fields) {
    size_t bad = 0;
    uint64_t nf = 0, total = 0;
    if (!wire_flat_ok(buf, n, &bad, &nf))
        return ms_errf(MS_EINVAL, "not valid protobuf wire format: expected a field key or value at byte %zu of %zu", bad, n);
    total = nf;
    if (max_fields && total > max_fields) return too_many(max_fields);
    struct { size_t end, pos; } st[MS_WIRE_MAX_DEPTH + 2];
    int lim = max_depth < 1 ? 1 : (max_depth > MS_WIRE_MAX_DEPTH ? MS_WIRE_MAX_DEPTH : max_depth);
    int top = 0;
    st[0].end = n;
    st[0].pos = 0;
    while (top >= 0) {
        if (st[top].pos >= st[top].end) {
            top--;
            continue;
        }
        uint64_t key = 0, v = 0;
        size_t pos = st[top].pos;
        wire_varint(buf, st[top].end, &pos, &key);
        switch (key & 7) {
        case 0: wire_varint(buf, st[top].end, &pos, &v); st[top].pos = pos; break;
        case 1: st[top].pos = pos + 8; break;
        case 5: st[top].pos = pos + 4; break;
        default: {
            wire_varint(buf, st[top].end, &pos, &v);
            size_t sub = pos;
            st[top].pos = pos + (size_t)v;
            size_t dummy;
            if (v > 0 && wire_flat_ok(buf + sub, (size_t)v, &dummy, &nf)) {
                total += nf;
                if (max_fields && total > max_fields) return too_many(max_fields);
                if (top + 1 > lim)
                    return ms_errf(MS_EINVAL, "message nesting deeper than %d levels (at byte %zu)", lim, sub);
                top++;
                st[top].pos = sub;
                st[top].end = sub + (size_t)v;
            }
        }
        }
    }
    return MS_OK;
}

ms_status ms_wire_check(const uint8_t *buf, size_t n, int max_depth) {
    return wire_scan(buf, n, max_depth, 0);
}

ms_status ms_wire_check_request(const uint8_t *buf, size_t n) {
    return wire_scan(buf, n, MS_WIRE_MAX_DEPTH, MS_WIRE_MAX_FIELDS);
}

/* Size of a varint's encoding. */
static size_t varint_len(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static size_t put_varint(uint8_t *p, uint64_t v) {
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

ms_status ms_wire_merge_field(const uint8_t *buf, size_t n, uint32_t field, uint8_t **out,
                              size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    size_t pos = 0, count = 0, total = 0;
    while (pos < n) { /* the pre-scan has checked the framing; stop quietly if not */
        uint64_t key, v;
        if (!wire_varint(buf, n, &pos, &key)) return MS_OK;
        switch (key & 7) {
        case 0: if (!wire_varint(buf, n, &pos, &v)) return MS_OK; break;
        case 1: if (n - pos < 8) return MS_OK; pos += 8; break;
        case 5: if (n - pos < 4) return MS_OK; pos += 4; break;
        case 2:
            if (!wire_varint(buf, n, &pos, &v) || v > n - pos) return MS_OK;
            if ((key >> 3) == field) {
                count++;
                total += (size_t)v;
            }
            pos += (size_t)v;
            break;
        default: return MS_OK;
        }
    }
    if (count < 2) return MS_OK;
    uint64_t key = (uint64_t)field << 3 | 2;
    uint8_t *o = malloc(n + varint_len(key) + varint_len(total) + 1);
    if (o == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    /* The merged field first (its payloads concatenated, in order: protobuf's
     * merge), then every other field as it was. */
    size_t w = put_varint(o, key);
    w += put_varint(o + w, total);
    for (int pass = 0; pass < 2; pass++) {
        pos = 0;
        while (pos < n) {
            size_t at = pos;
            uint64_t k = 0, v = 0;
            wire_varint(buf, n, &pos, &k);
            switch (k & 7) {
            case 0: wire_varint(buf, n, &pos, &v); break;
            case 1: pos += 8; break;
            case 5: pos += 4; break;
            default: {
                wire_varint(buf, n, &pos, &v);
                size_t start = pos;
                pos += (size_t)v;
                if ((k >> 3) == field) {
                    if (pass == 0) {
                        memcpy(o + w, buf + start, (size_t)v);
                        w += (size_t)v;
                    }
                    continue;
                }
            }
            }
            if (pass == 1) {
                memcpy(o + w, buf + at, pos - at);
                w += pos - at;
            }
        }
    }
    *out = o;
    *out_len = w;
    return MS_OK;
}
