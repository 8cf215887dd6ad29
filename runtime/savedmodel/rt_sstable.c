/* rt_sstable.c - LevelDB table reader and writer (see rt_sstable.h). */
#include "rt_sstable.h"

#include <snappy-c.h>

#include <stdlib.h>
#include <string.h>

#include "rt_coding.h"
#include "rt_crc32c.h"

/* A decompressed block may not exceed this (hostile Snappy preambles). */
#define SST_MAX_BLOCK (256u << 20)

typedef struct sst_entry {
    size_t koff, klen, voff, vlen;
} sst_entry;

struct rt_sst {
    rt_bytes store; /* all keys and values, back to back */
    sst_entry *ents;
    size_t n, cap;
    size_t nblocks;
};

typedef struct sst_handle {
    uint64_t offset, size;
} sst_handle;

static int slice_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen) {
    size_t m = alen < blen ? alen : blen;
    int c = m ? memcmp(a, b, m) : 0;
    if (c != 0)
        return c;
    return alen < blen ? -1 : alen > blen ? 1 : 0;
}

/* ---- reader ---- */

static size_t decode_handle(const uint8_t *p, size_t n, sst_handle *h) {
    size_t a = rt_varint64_decode(p, n, &h->offset);
    if (a == 0)
        return 0;
    size_t b = rt_varint64_decode(p + a, n - a, &h->size);
    if (b == 0)
        return 0;
    return a + b;
}

/* Checks the trailer of the block at h and yields its (decompressed) contents
 * in *contents; *owned is set when the contents were allocated (free it). */
ms_status rt_sst_snappy_uncompress(const uint8_t *src, size_t n, size_t max_len, uint8_t **out,
                                   size_t *out_len) {
    *out = NULL;
    size_t len;
    if (snappy_uncompressed_length((const char *)src, n, &len) != SNAPPY_OK)
        return ms_errf(MS_EDATALOSS, "snappy: bad length preamble");
    if (len > max_len)
        return ms_errf(MS_EDATALOSS, "snappy: declared length %zu exceeds the limit %zu", len,
                       max_len);
    uint8_t *buf = malloc(len ? len : 1);
    if (buf == NULL) return ms_errf(MS_ENOMEM, "snappy: out of memory for %zu bytes", len);
    size_t got = len;
    if (snappy_uncompress((const char *)src, n, (char *)buf, &got) != SNAPPY_OK || got != len) {
        free(buf);
        return ms_errf(MS_EDATALOSS, "snappy: corrupt compressed block");
    }
    *out = buf;
    *out_len = got;
    return MS_OK;
}

static ms_status read_block(const uint8_t *file, size_t body_len, const char *name,
                            const sst_handle *h, const char *what, const uint8_t **contents,
                            size_t *clen, uint8_t **owned) {
    *owned = NULL;
    if (h->offset > body_len || h->size > body_len - h->offset ||
        body_len - h->offset - h->size < RT_SST_TRAILER_LEN)
        return ms_errf(MS_EDATALOSS,
                       "%s: %s block at offset %llu size %llu lies outside the file (%zu bytes)",
                       name, what, (unsigned long long)h->offset, (unsigned long long)h->size,
                       body_len + RT_SST_FOOTER_LEN);
    const uint8_t *p = file + h->offset;
    size_t n = (size_t)h->size;
    uint8_t type = p[n];
    uint32_t want = rt_crc32c_unmask(rt_load_le32(p + n + 1));
    uint32_t got = rt_crc32c(p, n + 1);
    if (want != got)
        return ms_errf(MS_EDATALOSS, "%s: block crc mismatch at offset %llu", name,
                       (unsigned long long)h->offset);
    if (type == RT_SST_COMPRESSION_NONE) {
        *contents = p;
        *clen = n;
        return MS_OK;
    }
    if (type == RT_SST_COMPRESSION_SNAPPY) {
        ms_status st = rt_sst_snappy_uncompress(p, n, SST_MAX_BLOCK, owned, clen);
        if (st != MS_OK)
            return ms_errwrap(st, "%s: %s block at offset %llu", name, what,
                              (unsigned long long)h->offset);
        *contents = *owned;
        return MS_OK;
    }
    return ms_errf(MS_EDATALOSS, "%s: unknown compression type %u of block at offset %llu", name,
                   type, (unsigned long long)h->offset);
}

typedef ms_status (*entry_fn)(void *ctx, const uint8_t *key, size_t klen, const uint8_t *val,
                              size_t vlen);

/* Walks the entries of one block's contents, calling fn for each. */
static ms_status parse_block(const uint8_t *b, size_t n, const char *name, uint64_t at, entry_fn fn,
                             void *ctx) {
    ms_status st = MS_OK;
    rt_bytes key = RT_BYTES_INIT;
    if (n < 4)
        return ms_errf(MS_EDATALOSS, "%s: block at offset %llu too short (%zu bytes)", name,
                       (unsigned long long)at, n);
    uint32_t nrestarts = rt_load_le32(b + n - 4);
    if (nrestarts > (n - 4) / 4)
        return ms_errf(MS_EDATALOSS, "%s: block at offset %llu has a bad restart count %u", name,
                       (unsigned long long)at, nrestarts);
    size_t limit = n - 4 - (size_t)nrestarts * 4;
    for (uint32_t i = 0; i < nrestarts; i++) {
        uint32_t r = rt_load_le32(b + limit + (size_t)i * 4);
        if (r > limit || (limit > 0 && r == limit))
            return ms_errf(MS_EDATALOSS, "%s: block at offset %llu has restart %u out of range",
                           name, (unsigned long long)at, r);
    }
    if (nrestarts == 0 && limit > 0)
        return ms_errf(MS_EDATALOSS, "%s: block at offset %llu has entries but no restarts", name,
                       (unsigned long long)at);
    if (rt_bytes_reserve(&key, 64) != 0)
        return ms_errf(MS_ENOMEM, "%s: out of memory", name);
    size_t pos = 0;
    while (pos < limit) {
        uint32_t shared, nonshared, vlen;
        size_t k1 = rt_varint32_decode(b + pos, limit - pos, &shared);
        size_t k2 = k1 ? rt_varint32_decode(b + pos + k1, limit - pos - k1, &nonshared) : 0;
        size_t k3 = k2 ? rt_varint32_decode(b + pos + k1 + k2, limit - pos - k1 - k2, &vlen) : 0;
        if (k3 == 0) {
            st = ms_errf(MS_EDATALOSS, "%s: bad entry header in block at offset %llu (+%zu)", name,
                         (unsigned long long)at, pos);
            goto out;
        }
        pos += k1 + k2 + k3;
        if (shared > key.len || nonshared > limit - pos || vlen > limit - pos - nonshared) {
            st = ms_errf(MS_EDATALOSS, "%s: entry overruns block at offset %llu (+%zu)", name,
                         (unsigned long long)at, pos);
            goto out;
        }
        key.len = shared;
        rt_bytes_append(&key, b + pos, nonshared);
        if (!rt_bytes_ok(&key)) {
            st = ms_errf(MS_ENOMEM, "%s: out of memory", name);
            goto out;
        }
        pos += nonshared;
        st = fn(ctx, key.data, key.len, b + pos, vlen);
        if (st != MS_OK)
            goto out;
        pos += vlen;
    }
out:
    rt_bytes_free(&key);
    return st;
}

typedef struct index_ctx {
    sst_handle *h;
    rt_bytes seps; /* separator keys, back to back */
    size_t *sep_off, *sep_len;
    size_t n, cap;
    const char *name;
    int bad;
} index_ctx;

static ms_status on_index_entry(void *vctx, const uint8_t *key, size_t klen, const uint8_t *val,
                                size_t vlen) {
    index_ctx *c = vctx;
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        sst_handle *h = realloc(c->h, cap * sizeof(*h));
        if (h)
            c->h = h;
        size_t *so = realloc(c->sep_off, cap * sizeof(size_t));
        if (so)
            c->sep_off = so;
        size_t *sl = realloc(c->sep_len, cap * sizeof(size_t));
        if (sl)
            c->sep_len = sl;
        if (!h || !so || !sl)
            return ms_errf(MS_ENOMEM, "%s: out of memory", c->name);
        c->cap = cap;
    }
    if (decode_handle(val, vlen, &c->h[c->n]) != vlen)
        return ms_errf(MS_EDATALOSS, "%s: bad block handle in the index block", c->name);
    c->sep_off[c->n] = c->seps.len;
    c->sep_len[c->n] = klen;
    rt_bytes_append(&c->seps, key, klen);
    if (!rt_bytes_ok(&c->seps))
        return ms_errf(MS_ENOMEM, "%s: out of memory", c->name);
    c->n++;
    return MS_OK;
}

typedef struct data_ctx {
    rt_sst *t;
    const char *name;
    uint64_t at;
} data_ctx;

static ms_status on_data_entry(void *vctx, const uint8_t *key, size_t klen, const uint8_t *val,
                               size_t vlen) {
    data_ctx *c = vctx;
    rt_sst *t = c->t;
    if (t->n > 0) {
        const sst_entry *prev = &t->ents[t->n - 1];
        if (slice_cmp(t->store.data + prev->koff, prev->klen, key, klen) >= 0)
            return ms_errf(MS_EDATALOSS, "%s: keys out of order in block at offset %llu", c->name,
                           (unsigned long long)c->at);
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        sst_entry *e = realloc(t->ents, cap * sizeof(*e));
        if (e == NULL)
            return ms_errf(MS_ENOMEM, "%s: out of memory", c->name);
        t->ents = e;
        t->cap = cap;
    }
    sst_entry *e = &t->ents[t->n];
    e->koff = t->store.len;
    e->klen = klen;
    rt_bytes_append(&t->store, key, klen);
    e->voff = t->store.len;
    e->vlen = vlen;
    rt_bytes_append(&t->store, val, vlen);
    if (!rt_bytes_ok(&t->store))
        return ms_errf(MS_ENOMEM, "%s: out of memory", c->name);
    t->n++;
    return MS_OK;
}

static ms_status count_entry(void *ctx, const uint8_t *key, size_t klen, const uint8_t *val,
                             size_t vlen) {
    (void)key, (void)klen, (void)val, (void)vlen;
    (*(size_t *)ctx)++;
    return MS_OK;
}

ms_status rt_sst_open(const uint8_t *data, size_t n, const char *name, rt_sst **out) {
    ms_status st = MS_OK;
    index_ctx ic = {.seps = RT_BYTES_INIT, .name = name};
    uint8_t *owned = NULL;
    const uint8_t *contents;
    size_t clen;
    rt_sst *t;

    if (n < RT_SST_FOOTER_LEN)
        return ms_errf(MS_EDATALOSS, "%s: truncated: %zu bytes, shorter than the footer", name, n);
    const uint8_t *foot = data + n - RT_SST_FOOTER_LEN;
    uint64_t magic = rt_load_le64(foot + 40);
    if (magic != RT_SST_MAGIC)
        return ms_errf(MS_EDATALOSS, "%s: bad table magic 0x%016llx (truncated or not a table)",
                       name, (unsigned long long)magic);
    sst_handle meta_h, index_h;
    size_t a = decode_handle(foot, 40, &meta_h);
    size_t b = a ? decode_handle(foot + a, 40 - a, &index_h) : 0;
    if (b == 0)
        return ms_errf(MS_EDATALOSS, "%s: bad block handles in the footer", name);
    size_t body = n - RT_SST_FOOTER_LEN;

    t = calloc(1, sizeof(*t));
    /* Buffers start non-empty so that slices of empty keys never point at
     * NULL (pointer arithmetic on NULL is undefined). */
    if (t == NULL || rt_bytes_reserve(&t->store, 256) != 0 || rt_bytes_reserve(&ic.seps, 64) != 0) {
        rt_bytes_free(&ic.seps);
        rt_sst_free(t);
        return ms_errf(MS_ENOMEM, "%s: out of memory", name);
    }

    /* The metaindex block is empty in bundles, but verify it like the rest. */
    if ((st = read_block(data, body, name, &meta_h, "metaindex", &contents, &clen, &owned)) !=
        MS_OK)
        goto fail;
    size_t nmeta = 0;
    st = parse_block(contents, clen, name, meta_h.offset, count_entry, &nmeta);
    free(owned);
    owned = NULL;
    if (st != MS_OK)
        goto fail;

    if ((st = read_block(data, body, name, &index_h, "index", &contents, &clen, &owned)) != MS_OK)
        goto fail;
    st = parse_block(contents, clen, name, index_h.offset, on_index_entry, &ic);
    free(owned);
    owned = NULL;
    if (st != MS_OK)
        goto fail;

    for (size_t i = 0; i < ic.n; i++) {
        data_ctx dc = {t, name, ic.h[i].offset};
        size_t before = t->n;
        if ((st = read_block(data, body, name, &ic.h[i], "data", &contents, &clen, &owned)) !=
            MS_OK)
            goto fail;
        st = parse_block(contents, clen, name, ic.h[i].offset, on_data_entry, &dc);
        free(owned);
        owned = NULL;
        if (st != MS_OK)
            goto fail;
        /* The index key must be >= every key of its block. */
        if (t->n > before) {
            const sst_entry *last = &t->ents[t->n - 1];
            if (slice_cmp(ic.seps.data + ic.sep_off[i], ic.sep_len[i], t->store.data + last->koff,
                          last->klen) < 0) {
                st = ms_errf(MS_EDATALOSS,
                             "%s: index key below the last key of block at offset "
                             "%llu",
                             name, (unsigned long long)ic.h[i].offset);
                goto fail;
            }
        }
        t->nblocks++;
    }
    free(ic.h);
    free(ic.sep_off);
    free(ic.sep_len);
    rt_bytes_free(&ic.seps);
    *out = t;
    return MS_OK;
fail:
    free(ic.h);
    free(ic.sep_off);
    free(ic.sep_len);
    rt_bytes_free(&ic.seps);
    rt_sst_free(t);
    return st;
}

void rt_sst_free(rt_sst *t) {
    if (t == NULL)
        return;
    rt_bytes_free(&t->store);
    free(t->ents);
    free(t);
}

size_t rt_sst_count(const rt_sst *t) {
    return t->n;
}

size_t rt_sst_num_blocks(const rt_sst *t) {
    return t->nblocks;
}

void rt_sst_entry(const rt_sst *t, size_t i, rt_slice *key, rt_slice *value) {
    const sst_entry *e = &t->ents[i];
    if (key) {
        key->data = t->store.data + e->koff;
        key->len = e->klen;
    }
    if (value) {
        value->data = t->store.data + e->voff;
        value->len = e->vlen;
    }
}

long rt_sst_find(const rt_sst *t, const void *key, size_t klen) {
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const sst_entry *e = &t->ents[mid];
        int c = slice_cmp(t->store.data + e->koff, e->klen, key, klen);
        if (c == 0)
            return (long)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* ---- writer ---- */

typedef struct blk_builder {
    rt_bytes buf;
    rt_bytes restarts; /* fixed32 offsets */
    rt_bytes last_key;
    int counter;
    int interval;
} blk_builder;

static void blk_reset(blk_builder *b) {
    b->buf.len = 0;
    b->restarts.len = 0;
    rt_bytes_put_fixed32(&b->restarts, 0);
    b->last_key.len = 0;
    b->counter = 0;
}

static void blk_init(blk_builder *b, int interval) {
    memset(b, 0, sizeof(*b));
    b->interval = interval;
    blk_reset(b);
}

static void blk_destroy(blk_builder *b) {
    rt_bytes_free(&b->buf);
    rt_bytes_free(&b->restarts);
    rt_bytes_free(&b->last_key);
}

static void blk_add(blk_builder *b, const uint8_t *key, size_t klen, const uint8_t *val,
                    size_t vlen) {
    size_t shared = 0;
    if (b->counter < b->interval) {
        size_t m = klen < b->last_key.len ? klen : b->last_key.len;
        while (shared < m && b->last_key.data[shared] == key[shared])
            shared++;
    } else {
        rt_bytes_put_fixed32(&b->restarts, (uint32_t)b->buf.len);
        b->counter = 0;
    }
    rt_bytes_put_varint32(&b->buf, (uint32_t)shared);
    rt_bytes_put_varint32(&b->buf, (uint32_t)(klen - shared));
    rt_bytes_put_varint32(&b->buf, (uint32_t)vlen);
    /* The empty key (the bundle header's) may come as NULL: no NULL + 0. */
    if (klen > shared) rt_bytes_append(&b->buf, key + shared, klen - shared);
    rt_bytes_append(&b->buf, val, vlen);
    b->last_key.len = 0;
    rt_bytes_append(&b->last_key, key, klen);
    b->counter++;
}

static size_t blk_estimate(const blk_builder *b) {
    return b->buf.len + b->restarts.len + 4;
}

/* Appends the restart array and count; contents are then b->buf. */
static void blk_finish(blk_builder *b) {
    rt_bytes_append(&b->buf, b->restarts.data, b->restarts.len);
    rt_bytes_put_fixed32(&b->buf, (uint32_t)(b->restarts.len / 4));
}

static int blk_ok(const blk_builder *b) {
    return rt_bytes_ok(&b->buf) && rt_bytes_ok(&b->restarts) && rt_bytes_ok(&b->last_key);
}

struct rt_sst_writer {
    rt_sst_options opt;
    rt_bytes file;
    blk_builder data, index;
    rt_bytes last_key;
    size_t num_entries;
    int pending_index;
    sst_handle pending;
};

rt_sst_options rt_sst_options_default(void) {
    rt_sst_options o = {
        .compression = RT_SST_COMPRESSION_NONE,
        .block_size = 256 * 1024,
        .restart_interval = 16,
    };
    return o;
}

ms_status rt_sst_writer_new(const rt_sst_options *opts, rt_sst_writer **out) {
    rt_sst_writer *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return ms_errf(MS_ENOMEM, "sstable writer: out of memory");
    w->opt = opts ? *opts : rt_sst_options_default();
    if (w->opt.restart_interval < 1)
        w->opt.restart_interval = 1;
    if (w->opt.block_size == 0)
        w->opt.block_size = 1;
    blk_init(&w->data, w->opt.restart_interval);
    blk_init(&w->index, 1);
    *out = w;
    return MS_OK;
}

void rt_sst_writer_free(rt_sst_writer *w) {
    if (w == NULL)
        return;
    rt_bytes_free(&w->file);
    blk_destroy(&w->data);
    blk_destroy(&w->index);
    rt_bytes_free(&w->last_key);
    free(w);
}

static void write_raw_block(rt_sst_writer *w, const uint8_t *p, size_t n, uint8_t type,
                            sst_handle *h) {
    uint8_t trailer[RT_SST_TRAILER_LEN];
    h->offset = w->file.len;
    h->size = n;
    rt_bytes_append(&w->file, p, n);
    trailer[0] = type;
    uint32_t crc = rt_crc32c_extend(rt_crc32c(p, n), &type, 1);
    rt_store_le32(trailer + 1, rt_crc32c_mask(crc));
    rt_bytes_append(&w->file, trailer, sizeof(trailer));
}

static ms_status write_block(rt_sst_writer *w, blk_builder *b, sst_handle *h) {
    blk_finish(b);
    if (!blk_ok(b))
        return ms_errf(MS_ENOMEM, "sstable writer: out of memory");
    const uint8_t *raw = b->buf.data;
    size_t n = b->buf.len;
    if (w->opt.compression == RT_SST_COMPRESSION_SNAPPY) {
        size_t zn = snappy_max_compressed_length(n);
        uint8_t *z = malloc(zn);
        if (z == NULL)
            return ms_errf(MS_ENOMEM, "sstable writer: out of memory");
        if (snappy_compress((const char *)raw, n, (char *)z, &zn) != SNAPPY_OK) zn = n;
        if (zn < n - n / 8)
            write_raw_block(w, z, zn, RT_SST_COMPRESSION_SNAPPY, h);
        else
            write_raw_block(w, raw, n, RT_SST_COMPRESSION_NONE, h);
        free(z);
    } else {
        write_raw_block(w, raw, n, RT_SST_COMPRESSION_NONE, h);
    }
    blk_reset(b);
    return MS_OK;
}

static ms_status flush_data(rt_sst_writer *w) {
    if (w->data.buf.len == 0)
        return MS_OK;
    ms_status st = write_block(w, &w->data, &w->pending);
    if (st == MS_OK)
        w->pending_index = 1;
    return st;
}

static void add_index_entry(rt_sst_writer *w, const uint8_t *key, size_t klen) {
    uint8_t hbuf[20];
    size_t hn = rt_varint64_encode(hbuf, w->pending.offset);
    hn += rt_varint64_encode(hbuf + hn, w->pending.size);
    blk_add(&w->index, key, klen, hbuf, hn);
    w->pending_index = 0;
}

ms_status rt_sst_writer_add(rt_sst_writer *w, const void *key, size_t klen, const void *val,
                            size_t vlen) {
    if (w->num_entries > 0 && slice_cmp(w->last_key.data, w->last_key.len, key, klen) >= 0)
        return ms_errf(MS_EINVAL, "sstable writer: keys must be added in increasing order");
    if (klen > UINT32_MAX || vlen > UINT32_MAX)
        return ms_errf(MS_EINVAL, "sstable writer: entry too large");
    if (w->pending_index) {
        /* Shortest separator between the last key and this one, as LevelDB's
         * bytewise comparator computes it. */
        rt_bytes *lk = &w->last_key;
        const uint8_t *k = key;
        size_t m = lk->len < klen ? lk->len : klen, d = 0;
        while (d < m && lk->data[d] == k[d])
            d++;
        if (d < m) {
            uint8_t c = lk->data[d];
            if (c < 0xff && c + 1 < k[d]) {
                lk->data[d]++;
                lk->len = d + 1;
            }
        }
        add_index_entry(w, lk->data, lk->len);
    }
    w->last_key.len = 0;
    rt_bytes_append(&w->last_key, key, klen);
    w->num_entries++;
    blk_add(&w->data, key, klen, val, vlen);
    if (!blk_ok(&w->data) || !rt_bytes_ok(&w->last_key))
        return ms_errf(MS_ENOMEM, "sstable writer: out of memory");
    if (blk_estimate(&w->data) >= w->opt.block_size)
        return flush_data(w);
    return MS_OK;
}

ms_status rt_sst_writer_finish(rt_sst_writer *w, uint8_t **out, size_t *n) {
    ms_status st;
    sst_handle meta_h, index_h;
    blk_builder meta;
    blk_init(&meta, w->opt.restart_interval);
    if ((st = flush_data(w)) != MS_OK)
        goto done;
    if ((st = write_block(w, &meta, &meta_h)) != MS_OK)
        goto done;
    if (w->pending_index) {
        /* Shortest key >= the last key: bump the first byte that can be. */
        rt_bytes *lk = &w->last_key;
        for (size_t i = 0; i < lk->len; i++) {
            if (lk->data[i] != 0xff) {
                lk->data[i]++;
                lk->len = i + 1;
                break;
            }
        }
        add_index_entry(w, lk->data, lk->len);
    }
    if ((st = write_block(w, &w->index, &index_h)) != MS_OK)
        goto done;
    uint8_t foot[RT_SST_FOOTER_LEN];
    memset(foot, 0, sizeof(foot));
    size_t k = rt_varint64_encode(foot, meta_h.offset);
    k += rt_varint64_encode(foot + k, meta_h.size);
    k += rt_varint64_encode(foot + k, index_h.offset);
    rt_varint64_encode(foot + k, index_h.size);
    rt_store_le32(foot + 40, (uint32_t)RT_SST_MAGIC);
    rt_store_le32(foot + 44, (uint32_t)(RT_SST_MAGIC >> 32));
    rt_bytes_append(&w->file, foot, sizeof(foot));
    if (!rt_bytes_ok(&w->file)) {
        st = ms_errf(MS_ENOMEM, "sstable writer: out of memory");
        goto done;
    }
    *out = rt_bytes_take(&w->file, n);
done:
    blk_destroy(&meta);
    rt_sst_writer_free(w);
    return st;
}
