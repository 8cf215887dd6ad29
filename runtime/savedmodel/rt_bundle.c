/* rt_bundle.c - tensor bundle reader and writer (see rt_bundle.h). */
#include "rt_bundle.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ms_file.h"
#include "ms_wire.h"
#include "rt_coding.h"
#include "rt_crc32c.h"
#include "rt_sstable.h"
#include "tf_savedmodel.pb-c.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "rt_bundle.c assumes a little-endian host"
#endif

/* kTensorBundleVersion: what this code writes and reads. */
#define BUNDLE_VERSION 1
/* An index larger than this is not a bundle index we want to hold in memory. */
#define BUNDLE_MAX_INDEX (1u << 30)
#define BUNDLE_PATH_MAX 4096

typedef struct bundle_entry {
    char *key;
    rt_dtype dtype;
    rt_shape shape;
    int64_t nelem;
    int shard;
    uint64_t offset, size;
    uint32_t crc; /* unmasked */
    int sliced;
} bundle_entry;

struct rt_bundle {
    char *prefix;
    int num_shards;
    int big_endian;
    int n;
    bundle_entry *ents; /* sorted by key */
    int *fds;           /* one per shard */
};

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

char *rt_bundle_data_path(const char *prefix, int shard, int num_shards, char *buf, size_t n) {
    int k = snprintf(buf, n, "%s.data-%05d-of-%05d", prefix, shard, num_shards);
    return k < 0 || (size_t)k >= n ? NULL : buf;
}

static int pread_full(int fd, void *buf, size_t n, uint64_t off) {
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

/* ---- reader ---- */

/* Index values come from a file: pre-scanned like every protobuf from outside
 * before protobuf-c unpacks them (nesting, framing). */
static ms_status prescan(const char *iname, const char *what, const rt_slice *v) {
    if (ms_wire_check(v->data, v->len, MS_WIRE_MAX_DEPTH) == MS_OK) return MS_OK;
    char why[256];
    snprintf(why, sizeof why, "%s", ms_errmsg());
    return ms_errf(MS_EDATALOSS, "%s: %s does not parse: %s", iname, what, why);
}

static ms_status parse_header(const char *iname, const rt_slice *v, rt_bundle *b) {
    if (prescan(iname, "header entry", v) != MS_OK) return MS_EDATALOSS;
    Tensorflow__BundleHeaderProto *h =
        tensorflow__bundle_header_proto__unpack(NULL, v->len, v->data);
    if (h == NULL)
        return ms_errf(MS_EDATALOSS, "%s: header entry does not parse", iname);
    ms_status st = MS_OK;
    if (h->num_shards < 1 || h->num_shards > 99999)
        st = ms_errf(MS_EDATALOSS, "%s: header has %d shards", iname, h->num_shards);
    else if (h->endianness != TENSORFLOW__BUNDLE_HEADER_PROTO__ENDIANNESS__LITTLE &&
             h->endianness != TENSORFLOW__BUNDLE_HEADER_PROTO__ENDIANNESS__BIG)
        st = ms_errf(MS_EDATALOSS, "%s: header has unknown endianness %d", iname,
                     (int)h->endianness);
    else if (h->version && h->version->min_consumer > BUNDLE_VERSION)
        st = ms_errf(MS_ENOTSUP, "%s: needs bundle reader version %d, this one is %d", iname,
                     h->version->min_consumer, BUNDLE_VERSION);
    if (st == MS_OK && h->version) {
        for (size_t i = 0; i < h->version->n_bad_consumers; i++)
            if (h->version->bad_consumers[i] == BUNDLE_VERSION)
                st = ms_errf(MS_ENOTSUP, "%s: bundle version %d is marked bad for this file", iname,
                             BUNDLE_VERSION);
    }
    if (st == MS_OK) {
        b->num_shards = h->num_shards;
        b->big_endian = h->endianness == TENSORFLOW__BUNDLE_HEADER_PROTO__ENDIANNESS__BIG;
    }
    tensorflow__bundle_header_proto__free_unpacked(h, NULL);
    return st;
}

static ms_status parse_entry(const char *iname, const rt_slice *k, const rt_slice *v,
                             const rt_bundle *b, bundle_entry *e) {
    if (memchr(k->data, 0, k->len) != NULL)
        return ms_errf(MS_EDATALOSS, "%s: tensor name with a NUL byte", iname);
    e->key = strndup((const char *)k->data, k->len);
    if (e->key == NULL)
        return ms_errf(MS_ENOMEM, "%s: out of memory", iname);
    if (prescan(iname, "an entry", v) != MS_OK) return MS_EDATALOSS;
    Tensorflow__BundleEntryProto *p = tensorflow__bundle_entry_proto__unpack(NULL, v->len, v->data);
    if (p == NULL)
        return ms_errf(MS_EDATALOSS, "%s: entry of '%s' does not parse", iname, e->key);
    ms_status st = MS_OK;
    e->dtype = (rt_dtype)p->dtype;
    e->shard = p->shard_id;
    e->offset = (uint64_t)p->offset;
    e->size = (uint64_t)p->size;
    e->crc = rt_crc32c_unmask(p->crc32c);
    e->sliced = p->n_slices > 0;
    e->shape.rank = 0;
    if (p->shape && p->shape->unknown_rank) {
        st = ms_errf(MS_EDATALOSS, "%s: '%s' has an unknown rank", iname, e->key);
        goto done;
    }
    if (p->shape && p->shape->n_dim > RT_MAX_RANK) {
        st = ms_errf(MS_ENOTSUP, "%s: '%s' has rank %zu, above %d", iname, e->key, p->shape->n_dim,
                     RT_MAX_RANK);
        goto done;
    }
    if (p->shape) {
        e->shape.rank = (int)p->shape->n_dim;
        for (size_t i = 0; i < p->shape->n_dim; i++)
            e->shape.dim[i] = p->shape->dim[i]->size;
    }
    if (e->sliced)
        goto done; /* the slices carry their own entries; nothing to check here */
    e->nelem = rt_shape_nelem(&e->shape);
    if (e->nelem < 0) {
        st = ms_errf(MS_EDATALOSS, "%s: '%s' has a bad shape", iname, e->key);
        goto done;
    }
    if (p->offset < 0 || p->size < 0) {
        st = ms_errf(MS_EDATALOSS, "%s: '%s' has a negative offset or size", iname, e->key);
        goto done;
    }
    if (e->shard < 0 || e->shard >= b->num_shards) {
        st = ms_errf(MS_EDATALOSS, "%s: '%s' is in shard %d of %d", iname, e->key, e->shard,
                     b->num_shards);
        goto done;
    }
    if (e->dtype == RT_DT_STRING || e->dtype == RT_DT_VARIANT || e->dtype == RT_DT_RESOURCE) {
        /* Variable-length encodings; at least one length byte per element. */
        if (e->dtype == RT_DT_STRING && (uint64_t)e->nelem > e->size)
            st = ms_errf(MS_EDATALOSS, "%s: '%s' holds %lld strings in %llu bytes", iname, e->key,
                         (long long)e->nelem, (unsigned long long)e->size);
        goto done;
    }
    size_t es = rt_dtype_size(e->dtype);
    if (es == 0) {
        st = ms_errf(MS_EDATALOSS, "%s: '%s' has unknown dtype %d", iname, e->key, (int)p->dtype);
        goto done;
    }
    if ((uint64_t)e->nelem > UINT64_MAX / es || (uint64_t)e->nelem * es != e->size)
        st = ms_errf(MS_EDATALOSS, "%s: '%s' is %llu bytes, %s%s needs %llu", iname, e->key,
                     (unsigned long long)e->size, rt_dtype_name(e->dtype),
                     rt_shape_str(&e->shape, (char[64]){0}, 64),
                     (unsigned long long)((uint64_t)e->nelem * es));
done:
    tensorflow__bundle_entry_proto__free_unpacked(p, NULL);
    return st;
}

ms_status rt_bundle_open_in(const ms_dir *root, const char *prefix, rt_bundle **out) {
    ms_status st = MS_OK;
    char path[BUNDLE_PATH_MAX];
    const char *iname = "index";
    uint8_t *buf = NULL;
    size_t len = 0;
    rt_sst *sst = NULL;
    uint64_t *need = NULL;
    rt_bundle *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return ms_errf(MS_ENOMEM, "bundle: out of memory");
    b->prefix = strdup(prefix);
    if (b->prefix == NULL) {
        free(b);
        return ms_errf(MS_ENOMEM, "bundle: out of memory");
    }
    if (snprintf(path, sizeof(path), "%s.index", prefix) >= (int)sizeof(path)) {
        st = ms_errf(MS_EINVAL, "bundle prefix too long");
        goto fail;
    }
    iname = base_name(path);
    if ((st = ms_file_read(root, path, BUNDLE_MAX_INDEX, &buf, &len)) != MS_OK) {
        /* "<prefix>.index: missing" as before, by its base name */
        if (st == MS_ENOTFOUND)
            st = ms_errf(MS_ENOTFOUND, "%s: missing", iname);
        goto fail;
    }
    if ((st = rt_sst_open(buf, len, iname, &sst)) != MS_OK)
        goto fail;
    free(buf);
    buf = NULL;

    size_t n = rt_sst_count(sst);
    rt_slice k, v;
    if (n == 0) {
        st = ms_errf(MS_EDATALOSS, "%s: no header entry", iname);
        goto fail;
    }
    rt_sst_entry(sst, 0, &k, &v);
    if (k.len != 0) {
        st = ms_errf(MS_EDATALOSS, "%s: no header entry (first key is not empty)", iname);
        goto fail;
    }
    if ((st = parse_header(iname, &v, b)) != MS_OK)
        goto fail;
    if (n - 1 > INT32_MAX) {
        st = ms_errf(MS_EDATALOSS, "%s: too many entries", iname);
        goto fail;
    }
    b->ents = calloc(n, sizeof(*b->ents));
    b->fds = malloc((size_t)b->num_shards * sizeof(int));
    need = calloc((size_t)b->num_shards, sizeof(*need));
    if (b->ents == NULL || b->fds == NULL || need == NULL) {
        st = ms_errf(MS_ENOMEM, "%s: out of memory", iname);
        goto fail;
    }
    for (int s = 0; s < b->num_shards; s++)
        b->fds[s] = -1;
    for (size_t i = 1; i < n; i++) {
        bundle_entry *e = &b->ents[b->n];
        rt_sst_entry(sst, i, &k, &v);
        b->n++; /* counted before parsing so that close frees the key */
        if ((st = parse_entry(iname, &k, &v, b, e)) != MS_OK)
            goto fail;
        if (!e->sliced && e->offset + e->size > need[e->shard])
            need[e->shard] = e->offset + e->size;
    }
    rt_sst_free(sst);
    sst = NULL;

    for (int s = 0; s < b->num_shards; s++) {
        char dname[BUNDLE_PATH_MAX];
        if (rt_bundle_data_path(prefix, s, b->num_shards, dname, sizeof(dname)) == NULL) {
            st = ms_errf(MS_EINVAL, "bundle prefix too long");
            goto fail;
        }
        if ((st = ms_file_open(root, dname, &b->fds[s])) != MS_OK) {
            if (st == MS_ENOTFOUND)
                st = ms_errf(MS_EDATALOSS, "%s: missing", base_name(dname));
            goto fail;
        }
        struct stat sb;
        if (fstat(b->fds[s], &sb) != 0) {
            st = ms_errf(MS_EINVAL, "%s: cannot stat: %s", base_name(dname), strerror(errno));
            goto fail;
        }
        if ((uint64_t)sb.st_size < need[s]) {
            st = ms_errf(MS_EDATALOSS, "%s: truncated: %lld bytes, the index needs %llu",
                         base_name(dname), (long long)sb.st_size, (unsigned long long)need[s]);
            goto fail;
        }
    }
    free(need);
    *out = b;
    return MS_OK;
fail:
    free(buf);
    free(need);
    rt_sst_free(sst);
    rt_bundle_close(b);
    return st;
}

/* A bundle named by path: its own folder is the root its files stay in. */
ms_status rt_bundle_open(const char *prefix, rt_bundle **out) {
    char dir[BUNDLE_PATH_MAX];
    const char *base = base_name(prefix);
    size_t dl = (size_t)(base - prefix);
    if (dl >= sizeof dir)
        return ms_errf(MS_EINVAL, "bundle prefix too long");
    if (dl == 0) {
        strcpy(dir, ".");
    } else {
        memcpy(dir, prefix, dl);
        dir[dl] = '\0';
    }
    ms_dir root;
    ms_status st = ms_dir_open(dir, &root);
    if (st != MS_OK)
        return st == MS_ENOTFOUND ? ms_errf(MS_ENOTFOUND, "%s.index: missing", base) : st;
    st = rt_bundle_open_in(&root, base, out);
    ms_dir_close(&root);
    return st;
}

void rt_bundle_close(rt_bundle *b) {
    if (b == NULL)
        return;
    for (int i = 0; i < b->n; i++)
        free(b->ents[i].key);
    if (b->fds) {
        for (int s = 0; s < b->num_shards; s++)
            if (b->fds[s] >= 0)
                close(b->fds[s]);
    }
    free(b->fds);
    free(b->ents);
    free(b->prefix);
    free(b);
}

int rt_bundle_count(const rt_bundle *b) {
    return b->n;
}

const char *rt_bundle_key(const rt_bundle *b, int i) {
    return i >= 0 && i < b->n ? b->ents[i].key : NULL;
}

static const bundle_entry *find_entry(const rt_bundle *b, const char *key) {
    int lo = 0, hi = b->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(b->ents[mid].key, key);
        if (c == 0)
            return &b->ents[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

ms_status rt_bundle_info(const rt_bundle *b, const char *key, rt_dtype *dtype, rt_shape *shape) {
    const bundle_entry *e = find_entry(b, key);
    if (e == NULL)
        return ms_errf(MS_ENOTFOUND, "%s.index: no tensor '%s'", base_name(b->prefix), key);
    if (dtype)
        *dtype = e->dtype;
    if (shape)
        *shape = e->shape;
    return MS_OK;
}

static void byteswap(void *data, size_t nelem, size_t es) {
    uint8_t *p = data;
    for (size_t i = 0; i < nelem; i++, p += es)
        for (size_t a = 0, z = es - 1; a < z; a++, z--) {
            uint8_t t = p[a];
            p[a] = p[z];
            p[z] = t;
        }
}

/* Decodes a DT_STRING tensor from its bytes (see rt_bundle.h). */
static ms_status decode_strings(const char *dname, const bundle_entry *e, const uint8_t *p,
                                size_t n, rt_tensor **out) {
    size_t cnt = (size_t)e->nelem, pos = 0;
    uint64_t total = 0;
    uint32_t crc = 0;
    rt_str *strs = malloc((cnt ? cnt : 1) * sizeof(*strs));
    if (strs == NULL)
        return ms_errf(MS_ENOMEM, "%s: out of memory", dname);
    for (size_t i = 0; i < cnt; i++) {
        uint64_t len;
        size_t k = rt_varint64_decode(p + pos, n - pos, &len);
        if (k == 0 || len > n) {
            free(strs);
            return ms_errf(MS_EDATALOSS, "%s: '%s': bad string length %zu", dname, e->key, i);
        }
        pos += k;
        strs[i].len = len;
        total += len;
        if (len <= UINT32_MAX) {
            uint8_t l4[4];
            rt_store_le32(l4, (uint32_t)len);
            crc = rt_crc32c_extend(crc, l4, 4);
        } else {
            uint8_t l8[8];
            rt_store_le32(l8, (uint32_t)len);
            rt_store_le32(l8 + 4, (uint32_t)(len >> 32));
            crc = rt_crc32c_extend(crc, l8, 8);
        }
    }
    if (n - pos < 4) {
        free(strs);
        return ms_errf(MS_EDATALOSS, "%s: '%s': truncated string lengths", dname, e->key);
    }
    if (rt_crc32c_unmask(rt_load_le32(p + pos)) != crc) {
        free(strs);
        return ms_errf(MS_EDATALOSS, "%s: '%s': string lengths crc mismatch", dname, e->key);
    }
    crc = rt_crc32c_extend(crc, p + pos, 4);
    pos += 4;
    if (total != n - pos) {
        free(strs);
        return ms_errf(MS_EDATALOSS, "%s: '%s': strings total %llu bytes, entry has %zu", dname,
                       e->key, (unsigned long long)total, n - pos);
    }
    crc = rt_crc32c_extend(crc, p + pos, n - pos);
    if (crc != e->crc) {
        free(strs);
        return ms_errf(MS_EDATALOSS, "%s: crc mismatch for tensor '%s' (offset %llu, size %llu)",
                       dname, e->key, (unsigned long long)e->offset, (unsigned long long)e->size);
    }
    for (size_t i = 0; i < cnt; i++) {
        strs[i].data = p + pos;
        pos += strs[i].len;
    }
    ms_status st = rt_tensor_new_strings(&e->shape, strs, out);
    free(strs);
    if (st != MS_OK)
        return ms_errwrap(st, "%s: '%s'", dname, e->key);
    return MS_OK;
}

static ms_status read_entry(rt_bundle *b, const bundle_entry *e, rt_tensor **out) {
    char dpath[BUNDLE_PATH_MAX];
    ms_status st;
    rt_bundle_data_path(b->prefix, e->shard, b->num_shards, dpath, sizeof(dpath));
    const char *dname = base_name(dpath);
    if (e->sliced)
        return ms_errf(MS_ENOTSUP, "%s: '%s' is a partitioned (sliced) variable", dname, e->key);
    if (e->size > SIZE_MAX / 2)
        return ms_errf(MS_ENOMEM, "%s: '%s' is too large", dname, e->key);
    if (e->dtype == RT_DT_STRING) {
        uint8_t *raw = malloc(e->size ? (size_t)e->size : 1);
        if (raw == NULL)
            return ms_errf(MS_ENOMEM, "%s: out of memory reading '%s'", dname, e->key);
        if (pread_full(b->fds[e->shard], raw, (size_t)e->size, e->offset) != 0) {
            free(raw);
            return ms_errf(MS_EDATALOSS, "%s: cannot read '%s'", dname, e->key);
        }
        st = decode_strings(dname, e, raw, (size_t)e->size, out);
        free(raw);
        return st;
    }
    if (!rt_dtype_is_pod(e->dtype))
        return ms_errf(MS_ENOTSUP, "%s: '%s' has dtype %s, which bundles here cannot hold", dname,
                       e->key, rt_dtype_name(e->dtype));
    rt_tensor *t = NULL;
    if ((st = rt_tensor_new(e->dtype, &e->shape, &t)) != MS_OK)
        return ms_errwrap(st, "%s: '%s'", dname, e->key);
    if (pread_full(b->fds[e->shard], t->data, (size_t)e->size, e->offset) != 0) {
        rt_tensor_unref(t);
        return ms_errf(MS_EDATALOSS, "%s: cannot read '%s'", dname, e->key);
    }
    if (rt_crc32c(t->data, (size_t)e->size) != e->crc) {
        rt_tensor_unref(t);
        return ms_errf(MS_EDATALOSS, "%s: crc mismatch for tensor '%s' (offset %llu, size %llu)",
                       dname, e->key, (unsigned long long)e->offset, (unsigned long long)e->size);
    }
    if (b->big_endian)
        byteswap(t->data, (size_t)e->nelem, rt_dtype_size(e->dtype));
    *out = t;
    return MS_OK;
}

ms_status rt_bundle_read(rt_bundle *b, const char *key, rt_tensor **out) {
    const bundle_entry *e = find_entry(b, key);
    if (e == NULL)
        return ms_errf(MS_ENOTFOUND, "%s.index: no tensor '%s'", base_name(b->prefix), key);
    return read_entry(b, e, out);
}

/* crc of [off, off+size) of fd, read in chunks. */
static int crc_range(int fd, uint64_t off, uint64_t size, uint32_t *crc) {
    enum { CHUNK = 1 << 20 };
    uint8_t *buf = malloc(CHUNK);
    uint32_t c = 0;
    if (buf == NULL)
        return -1;
    while (size > 0) {
        size_t n = size < CHUNK ? (size_t)size : CHUNK;
        if (pread_full(fd, buf, n, off) != 0) {
            free(buf);
            return -1;
        }
        c = rt_crc32c_extend(c, buf, n);
        off += n;
        size -= n;
    }
    free(buf);
    *crc = c;
    return 0;
}

static ms_status verify(rt_bundle *b);

ms_status rt_bundle_verify(const char *prefix) {
    rt_bundle *b;
    ms_status st = rt_bundle_open(prefix, &b);
    return st != MS_OK ? st : verify(b);
}

ms_status rt_bundle_verify_in(const ms_dir *root, const char *prefix) {
    rt_bundle *b;
    ms_status st = rt_bundle_open_in(root, prefix, &b);
    return st != MS_OK ? st : verify(b);
}

/* Reads every tensor of b once and closes it. */
static ms_status verify(rt_bundle *b) {
    ms_status st = MS_OK;
    for (int i = 0; i < b->n && st == MS_OK; i++) {
        const bundle_entry *e = &b->ents[i];
        if (e->sliced)
            continue;
        if (e->dtype == RT_DT_STRING) {
            rt_tensor *t;
            if ((st = read_entry(b, e, &t)) == MS_OK)
                rt_tensor_unref(t);
            continue;
        }
        if (!rt_dtype_is_pod(e->dtype))
            continue; /* variant/resource: nothing we can check beyond the sizes */
        uint32_t crc;
        char dpath[BUNDLE_PATH_MAX];
        rt_bundle_data_path(b->prefix, e->shard, b->num_shards, dpath, sizeof(dpath));
        if (crc_range(b->fds[e->shard], e->offset, e->size, &crc) != 0)
            st = ms_errf(MS_EDATALOSS, "%s: cannot read '%s'", base_name(dpath), e->key);
        else if (crc != e->crc)
            st = ms_errf(MS_EDATALOSS, "%s: crc mismatch for tensor '%s' (offset %llu, size %llu)",
                         base_name(dpath), e->key, (unsigned long long)e->offset,
                         (unsigned long long)e->size);
    }
    rt_bundle_close(b);
    return st;
}

/* ---- writer ---- */

struct rt_bundle_writer {
    char *prefix;
    char *tmp_data; /* path of the temporary data file */
    FILE *data;
    uint64_t size; /* bytes written to data so far */
    bundle_entry *ents;
    int n, cap;
};

ms_status rt_bundle_writer_new(const char *prefix, rt_bundle_writer **out) {
    char path[BUNDLE_PATH_MAX];
    rt_bundle_writer *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return ms_errf(MS_ENOMEM, "bundle writer: out of memory");
    w->prefix = strdup(prefix);
    if (w->prefix == NULL || rt_bundle_data_path(prefix, 0, 1, path, sizeof(path) - 32) == NULL) {
        free(w->prefix);
        free(w);
        return ms_errf(MS_EINVAL, "bundle writer: bad prefix");
    }
    if (asprintf(&w->tmp_data, "%s.tempstate%ld", path, (long)getpid()) < 0) {
        free(w->prefix);
        free(w);
        return ms_errf(MS_ENOMEM, "bundle writer: out of memory");
    }
    w->data = fopen(w->tmp_data, "wb");
    if (w->data == NULL) {
        ms_status st =
            ms_errf(MS_EINVAL, "%s: cannot create: %s", base_name(path), strerror(errno));
        free(w->tmp_data);
        free(w->prefix);
        free(w);
        return st;
    }
    *out = w;
    return MS_OK;
}

static void writer_free(rt_bundle_writer *w, int remove_tmp) {
    if (w->data)
        fclose(w->data);
    if (remove_tmp && w->tmp_data)
        unlink(w->tmp_data);
    for (int i = 0; i < w->n; i++)
        free(w->ents[i].key);
    free(w->ents);
    free(w->tmp_data);
    free(w->prefix);
    free(w);
}

void rt_bundle_writer_abort(rt_bundle_writer *w) {
    if (w)
        writer_free(w, 1);
}

/* Appends p[0..n) to the data file and to the running crc. */
static int put_data(rt_bundle_writer *w, const void *p, size_t n, uint32_t *crc) {
    if (n > 0 && fwrite(p, 1, n, w->data) != n)
        return -1;
    *crc = rt_crc32c_extend(*crc, p, n);
    w->size += n;
    return 0;
}

ms_status rt_bundle_writer_add(rt_bundle_writer *w, const char *key, const rt_tensor *t) {
    if (key == NULL || key[0] == '\0')
        return ms_errf(MS_EINVAL, "bundle writer: tensor names must be non-empty");
    for (int i = 0; i < w->n; i++)
        if (strcmp(w->ents[i].key, key) == 0)
            return ms_errf(MS_EINVAL, "bundle writer: duplicate tensor '%s'", key);
    if (t->dtype != RT_DT_STRING && !rt_dtype_is_pod(t->dtype))
        return ms_errf(MS_ENOTSUP, "bundle writer: '%s' has dtype %s, not supported", key,
                       rt_dtype_name(t->dtype));
    if (w->n == w->cap) {
        int cap = w->cap ? w->cap * 2 : 16;
        bundle_entry *e = realloc(w->ents, (size_t)cap * sizeof(*e));
        if (e == NULL)
            return ms_errf(MS_ENOMEM, "bundle writer: out of memory");
        w->ents = e;
        w->cap = cap;
    }
    bundle_entry *e = &w->ents[w->n];
    memset(e, 0, sizeof(*e));
    e->dtype = t->dtype;
    e->shape = t->shape;
    e->nelem = t->nelem;
    e->offset = w->size;
    uint32_t crc = 0;
    int bad = 0;
    if (t->dtype == RT_DT_STRING) {
        /* varint64 lengths; masked crc of the lengths taken as uint32 (uint64
         * above 4 GiB); the bytes. The entry crc covers the uint32 lengths,
         * the stored checksum and the bytes. */
        const rt_str *s = rt_tensor_strs(t);
        rt_bytes lens = RT_BYTES_INIT;
        for (int64_t i = 0; i < t->nelem; i++) {
            rt_bytes_put_varint64(&lens, s[i].len);
            if (s[i].len <= UINT32_MAX) {
                uint8_t l4[4];
                rt_store_le32(l4, (uint32_t)s[i].len);
                crc = rt_crc32c_extend(crc, l4, 4);
            } else {
                uint8_t l8[8];
                rt_store_le32(l8, (uint32_t)s[i].len);
                rt_store_le32(l8 + 4, (uint32_t)(s[i].len >> 32));
                crc = rt_crc32c_extend(crc, l8, 8);
            }
        }
        if (!rt_bytes_ok(&lens)) {
            rt_bytes_free(&lens);
            return ms_errf(MS_ENOMEM, "bundle writer: out of memory");
        }
        uint32_t dummy = 0;
        uint8_t ck[4];
        rt_store_le32(ck, rt_crc32c_mask(crc));
        bad |= put_data(w, lens.data, lens.len, &dummy);
        bad |= put_data(w, ck, 4, &crc);
        rt_bytes_free(&lens);
        for (int64_t i = 0; i < t->nelem && !bad; i++)
            bad |= put_data(w, s[i].data, (size_t)s[i].len, &crc);
    } else {
        bad |= put_data(w, t->data, rt_tensor_nbytes(t), &crc);
    }
    if (bad)
        return ms_errf(MS_EINVAL, "%s: write failed: %s", base_name(w->tmp_data), strerror(errno));
    e->size = w->size - e->offset;
    e->crc = crc;
    e->key = strdup(key);
    if (e->key == NULL)
        return ms_errf(MS_ENOMEM, "bundle writer: out of memory");
    w->n++;
    return MS_OK;
}

static int entry_cmp(const void *a, const void *b) {
    return strcmp(((const bundle_entry *)a)->key, ((const bundle_entry *)b)->key);
}

/* Serialises one BundleEntryProto the way TensorFlow fills it. */
static ms_status pack_entry(const bundle_entry *e, rt_bytes *out) {
    Tensorflow__BundleEntryProto p = TENSORFLOW__BUNDLE_ENTRY_PROTO__INIT;
    Tensorflow__TensorShapeProto shape = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
    Tensorflow__TensorShapeProto__Dim dims[RT_MAX_RANK];
    Tensorflow__TensorShapeProto__Dim *dimp[RT_MAX_RANK];
    for (int i = 0; i < e->shape.rank; i++) {
        Tensorflow__TensorShapeProto__Dim d = TENSORFLOW__TENSOR_SHAPE_PROTO__DIM__INIT;
        dims[i] = d;
        dims[i].size = e->shape.dim[i];
        dimp[i] = &dims[i];
    }
    shape.n_dim = (size_t)e->shape.rank;
    shape.dim = dimp;
    p.dtype = (Tensorflow__DataType)e->dtype;
    p.shape = &shape;
    p.shard_id = 0;
    p.offset = (int64_t)e->offset;
    p.size = (int64_t)e->size;
    p.crc32c = rt_crc32c_mask(e->crc);
    size_t n = tensorflow__bundle_entry_proto__get_packed_size(&p);
    out->len = 0;
    if (rt_bytes_reserve(out, n) != 0)
        return ms_errf(MS_ENOMEM, "bundle writer: out of memory");
    out->len = tensorflow__bundle_entry_proto__pack(&p, out->data);
    return MS_OK;
}

static ms_status write_file_atomic(const char *path, const uint8_t *p, size_t n) {
    char *tmp;
    if (asprintf(&tmp, "%s.tempstate%ld", path, (long)getpid()) < 0)
        return ms_errf(MS_ENOMEM, "bundle writer: out of memory");
    FILE *f = fopen(tmp, "wb");
    ms_status st = MS_OK;
    if (f == NULL) {
        st = ms_errf(MS_EINVAL, "%s: cannot create: %s", base_name(path), strerror(errno));
    } else {
        int bad = (n > 0 && fwrite(p, 1, n, f) != n);
        bad |= fflush(f) != 0 || fsync(fileno(f)) != 0;
        bad |= fclose(f) != 0;
        if (bad || rename(tmp, path) != 0) {
            st = ms_errf(MS_EINVAL, "%s: write failed: %s", base_name(path), strerror(errno));
            unlink(tmp);
        }
    }
    free(tmp);
    return st;
}

ms_status rt_bundle_writer_finish(rt_bundle_writer *w) {
    ms_status st = MS_OK;
    rt_sst_writer *sw = NULL;
    rt_bytes val = RT_BYTES_INIT;
    uint8_t *file = NULL;
    size_t flen = 0;
    char path[BUNDLE_PATH_MAX];

    if (w->n > 1)
        qsort(w->ents, (size_t)w->n, sizeof(*w->ents), entry_cmp);
    if ((st = rt_sst_writer_new(NULL, &sw)) != MS_OK)
        goto done;

    Tensorflow__BundleHeaderProto h = TENSORFLOW__BUNDLE_HEADER_PROTO__INIT;
    Tensorflow__VersionDef v = TENSORFLOW__VERSION_DEF__INIT;
    v.producer = BUNDLE_VERSION;
    h.num_shards = 1;
    h.endianness = TENSORFLOW__BUNDLE_HEADER_PROTO__ENDIANNESS__LITTLE;
    h.version = &v;
    size_t hn = tensorflow__bundle_header_proto__get_packed_size(&h);
    if (rt_bytes_reserve(&val, hn) != 0) {
        st = ms_errf(MS_ENOMEM, "bundle writer: out of memory");
        goto done;
    }
    val.len = tensorflow__bundle_header_proto__pack(&h, val.data);
    if ((st = rt_sst_writer_add(sw, "", 0, val.data, val.len)) != MS_OK)
        goto done;
    for (int i = 0; i < w->n; i++) {
        if ((st = pack_entry(&w->ents[i], &val)) != MS_OK)
            goto done;
        if ((st = rt_sst_writer_add(sw, w->ents[i].key, strlen(w->ents[i].key), val.data,
                                    val.len)) != MS_OK)
            goto done;
    }
    st = rt_sst_writer_finish(sw, &file, &flen);
    sw = NULL;
    if (st != MS_OK)
        goto done;

    /* Data first, then the index: a present index means a complete bundle. */
    rt_bundle_data_path(w->prefix, 0, 1, path, sizeof(path));
    int bad = fflush(w->data) != 0 || fsync(fileno(w->data)) != 0;
    bad |= fclose(w->data) != 0;
    w->data = NULL;
    if (bad || rename(w->tmp_data, path) != 0) {
        st = ms_errf(MS_EINVAL, "%s: write failed: %s", base_name(path), strerror(errno));
        goto done;
    }
    snprintf(path, sizeof(path), "%s.index", w->prefix);
    st = write_file_atomic(path, file, flen);
done:
    rt_sst_writer_free(sw);
    rt_bytes_free(&val);
    free(file);
    writer_free(w, st != MS_OK);
    return st;
}
