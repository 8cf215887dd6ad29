/* srv_pbarena.c - the bump allocator of srv_pbarena.h. */
#include "srv_pbarena.h"

#include <stdint.h>
#include <stdlib.h>

struct srv_pbchunk {
    srv_pbchunk *next;
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
    /* A new chunk: at least PB_CHUNK_MIN, or exactly the request if larger
     * (a bytes field of a DICOM file), so the arena never holds much more
     * than the message needs. */
    size_t cap = need > PB_CHUNK_MIN ? need : PB_CHUNK_MIN;
    if (cap > SIZE_MAX - sizeof(srv_pbchunk)) return NULL;
    srv_pbchunk *c = malloc(sizeof(*c) + cap);
    if (c == NULL) return NULL;
    c->next = a->chunks;
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
}
