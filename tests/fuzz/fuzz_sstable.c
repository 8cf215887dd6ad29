/* fuzz_sstable.c - libFuzzer target for the SSTable reader and its Snappy blocks (libsnappy).
 *
 * The first input byte picks what the rest becomes: 0 a whole table file;
 * 1 / 2 the contents of a data block stored raw / Snappy-compressed; 3 the
 * index block; else a Snappy stream. Modes 1-3 wrap the bytes in an
 * otherwise valid table with correct crcs, so the fuzzer reaches the block
 * parser instead of stopping at the checksum.
 * Build: CC=clang CFLAGS=-fsanitize=fuzzer-no-link cmake -S . -B build-fuzz \
 *        -DMS_FUZZ=ON -DMS_SANITIZE=ON */
#include <stdint.h>
#include <stdlib.h>

#include "rt_coding.h"
#include "rt_crc32c.h"
#include "rt_sstable.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void put_block(rt_bytes *f, const uint8_t *p, size_t n, uint8_t type, uint64_t *off,
                      uint64_t *len) {
    *off = f->len;
    *len = n;
    rt_bytes_append(f, p, n);
    rt_bytes_put_u8(f, type);
    rt_bytes_put_fixed32(f, rt_crc32c_mask(rt_crc32c_extend(rt_crc32c(p, n), &type, 1)));
}

static void check_table(const uint8_t *p, size_t n) {
    rt_sst *t = NULL;
    if (rt_sst_open(p, n, "fuzz", &t) != MS_OK)
        return;
    for (size_t i = 0; i < rt_sst_count(t); i++) {
        rt_slice k, v;
        rt_sst_entry(t, i, &k, &v);
        if (rt_sst_find(t, k.data, k.len) != (long)i)
            abort();
    }
    rt_sst_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0)
        return 0;
    uint8_t mode = data[0];
    data++;
    size--;
    if (mode == 0) {
        check_table(data, size);
        return 0;
    }
    if (mode > 3) {
        uint8_t *out = NULL;
        size_t n;
        if (rt_sst_snappy_uncompress(data, size, 1 << 20, &out, &n) == MS_OK)
            free(out);
        return 0;
    }
    static const uint8_t empty[8] = {0, 0, 0, 0, 1, 0, 0, 0};
    rt_bytes f = RT_BYTES_INIT;
    uint64_t doff = 0, dlen = 0, moff, mlen, ioff, ilen;
    if (mode != 3)
        put_block(&f, data, size, mode == 2, &doff, &dlen);
    put_block(&f, empty, 8, 0, &moff, &mlen);
    if (mode == 3) {
        put_block(&f, data, size, 0, &ioff, &ilen);
    } else {
        uint8_t ib[40];
        size_t k = 0;
        ib[k++] = 0;
        ib[k++] = 1;
        size_t vl_at = k++;
        ib[k++] = 0xff;
        size_t v0 = k;
        k += rt_varint64_encode(ib + k, doff);
        k += rt_varint64_encode(ib + k, dlen);
        ib[vl_at] = (uint8_t)(k - v0);
        for (int i = 0; i < 8; i++)
            ib[k++] = empty[i];
        put_block(&f, ib, k, 0, &ioff, &ilen);
    }
    uint8_t foot[48] = {0};
    size_t k = rt_varint64_encode(foot, moff);
    k += rt_varint64_encode(foot + k, mlen);
    k += rt_varint64_encode(foot + k, ioff);
    rt_varint64_encode(foot + k, ilen);
    rt_store_le32(foot + 40, (uint32_t)RT_SST_MAGIC);
    rt_store_le32(foot + 44, (uint32_t)(RT_SST_MAGIC >> 32));
    rt_bytes_append(&f, foot, 48);
    if (rt_bytes_ok(&f))
        check_table(f.data, f.len);
    rt_bytes_free(&f);
    return 0;
}
