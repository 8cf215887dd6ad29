/* srv_pbarena.c - the bump allocator of srv_pbarena.h. */
#include "srv_pbarena.h"

#include <stdint.h>
#include <stdlib.h>

struct srv_pbchunk {
    srv_pbchunk *next;
    int exact;          /* one allocation of its own (srv_pbarena_keep may take it) */
    int taken;          /* scratch of srv_pbarena_keep */
    max_align_t data[]; /* the chunk's bytes */
};

#define PB_ALIGN 16
#define PB_CHUNK_MIN 16384

static void *pb_alloc(void *data, size_t size) {
    srv_pbarena *a = data;
    size_t need = (size + PB_ALIGN - 1) & ~(size_t)(PB_ALIGN - 1);
    if (need < size) return NULL; /* overflow */
    if (a->cap - a->used >= need) {
        void *p = a->buf + a->used;
        a->used += need;
        return p;
    }
    if (need >= PB_CHUNK_MIN && a->region_fn != NULL) {
        if (a->region == NULL) {
            a->region = a->region_fn(a->region_ctx, a->region_size);
            if (a->region == NULL) a->region_fn = NULL; /* heap chunks then */
        }
        if (a->region != NULL && a->region->size - a->region_used >= need) {
            void *p = (unsigned char *)a->region->data + a->region_used;
            a->region_used += need;
            return p;
        }
    }
    /* A new chunk: at least PB_CHUNK_MIN, or exactly the request if larger
     * (a bytes field of a DICOM file), so the arena never holds much more
     * than the message needs. */
    size_t cap = need > PB_CHUNK_MIN ? need : PB_CHUNK_MIN;
    if (cap > SIZE_MAX - sizeof(srv_pbchunk)) return NULL;
    srv_pbchunk *c = malloc(sizeof(*c) + cap);
    if (c == NULL) return NULL;
    c->next = a->chunks;
    c->exact = need >= PB_CHUNK_MIN;
    c->taken = 0;
    a->chunks = c;
    if (need < PB_CHUNK_MIN) { /* keep bumping in the new chunk */
        a->buf = (unsigned char *)c->data;
        a->cap = cap;
        a->used = need;
    }
    return c->data;
}

/* Memory goes back all at once in srv_pbarena_release. */
static void pb_free(void *data, void *ptr) {
    (void)data;
    (void)ptr;
}

void srv_pbarena_init(srv_pbarena *a, void *buf, size_t cap) {
    a->alloc.alloc = pb_alloc;
    a->alloc.free = pb_free;
    a->alloc.allocator_data = a;
    /* Align the caller's buffer's start. */
    uintptr_t p = (uintptr_t)buf, q = (p + PB_ALIGN - 1) & ~(uintptr_t)(PB_ALIGN - 1);
    a->buf = buf;
    a->used = buf != NULL && cap >= q - p ? (size_t)(q - p) : cap;
    a->cap = cap;
    a->chunks = NULL;
    a->region_fn = NULL;
    a->region_ctx = NULL;
    a->region_size = 0;
    a->region = NULL;
    a->region_used = 0;
}

void srv_pbarena_set_region(srv_pbarena *a, srv_pbregion_fn fn, void *ctx, size_t size) {
    a->region_fn = fn;
    a->region_ctx = ctx;
    a->region_size = size;
}

void srv_pbarena_release(srv_pbarena *a) {
    srv_pbchunk *c = a->chunks;
    while (c != NULL) {
        srv_pbchunk *next = c->next;
        free(c);
        c = next;
    }
    a->chunks = NULL;
    a->buf = NULL;
    a->used = a->cap = 0;
    if (a->region != NULL) rt_buf_unref(a->region);
    a->region = NULL;
    a->region_fn = NULL;
}

/* The chunks srv_pbarena_keep took over, freed with the buffer. */
typedef struct kept_chunks {
    size_t n;
    srv_pbchunk *c[];
} kept_chunks;

static void kept_release(rt_buf *b) {
    kept_chunks *k = b->owner;
    for (size_t i = 0; i < k->n; i++)
        free(k->c[i]);
    free(k);
}

#define KEEP_MAX 256 /* more values than this are copied (the search is n x chunks) */

static void region_kept_release(rt_buf *b) {
    rt_buf_unref(b->owner);
}

/* srv_pbarena_keep where every non-empty value lies in the region; NULL if not. */
static rt_buf *keep_in_region(srv_pbarena *a, const ProtobufCBinaryData *vals, size_t n) {
    if (a->region == NULL) return NULL;
    const unsigned char *lo = a->region->data, *hi = lo + a->region_used;
    size_t total = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        if (vals[i].len == 0) continue;
        const unsigned char *p = vals[i].data;
        if (p < lo || p >= hi || vals[i].len > (size_t)(hi - p)) return NULL;
        total += vals[i].len;
        m++;
    }
    if (m == 0) return NULL;
    rt_buf *b = rt_buf_wrap(NULL, total, region_kept_release, rt_buf_ref(a->region));
    if (b == NULL) rt_buf_unref(a->region);
    return b;
}

rt_buf *srv_pbarena_keep(void *arena, const ProtobufCBinaryData *vals, size_t n) {
    srv_pbarena *a = arena;
    if (n == 0) return NULL;
    rt_buf *r = keep_in_region(a, vals, n);
    if (r != NULL) return r;
    if (n > KEEP_MAX) return NULL;
    size_t m = 0, total = 0;
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) {
        if (vals[i].len == 0) continue;
        srv_pbchunk *c = a->chunks;
        while (c != NULL && !(c->exact && !c->taken && (void *)c->data == (void *)vals[i].data))
            c = c->next;
        if (c == NULL) {
            ok = 0;
            break;
        }
        c->taken = 1;
        m++;
        total += vals[i].len;
    }
    kept_chunks *k = ok && m > 0 ? malloc(sizeof(*k) + m * sizeof(k->c[0])) : NULL;
    rt_buf *b = k != NULL ? rt_buf_wrap(NULL, total, kept_release, k) : NULL;
    if (b == NULL) {
        free(k);
        for (srv_pbchunk *c = a->chunks; c != NULL; c = c->next)
            c->taken = 0;
        return NULL;
    }
    /* Unlink the taken chunks: the buffer frees them now. */
    k->n = 0;
    for (srv_pbchunk **pp = &a->chunks; *pp != NULL;) {
        srv_pbchunk *c = *pp;
        if (c->taken) {
            *pp = c->next;
            c->taken = 0;
            k->c[k->n++] = c;
        } else {
            pp = &c->next;
        }
    }
    return b;
}
