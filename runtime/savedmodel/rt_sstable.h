/* rt_sstable.h - LevelDB table format ("SSTable"), as TensorFlow uses it for
 * tensor-bundle indexes (variables.index).
 *
 * File layout: data blocks, a metaindex block (empty here), an index block,
 * then a 48-byte footer (two BlockHandles padded to 40 bytes, magic
 * 0xdb4775248b80fb57). Each block is followed by a 5-byte trailer: the
 * compression type (0 none, 1 Snappy) and the masked crc32c of contents plus
 * type byte. Block contents are prefix-compressed entries followed by restart
 * offsets and their count.
 *
 * The reader parses a whole table held in memory, verifying every block, and
 * keeps a sorted array of entries: index files are small and read once.
 * The writer builds the table in memory exactly as TensorFlow's TableBuilder
 * does (same block splitting, separators, restarts, compression fallback).
 */
#ifndef RT_SSTABLE_H
#define RT_SSTABLE_H

#include <stddef.h>
#include <stdint.h>

#include "ms_status.h"

#define RT_SST_MAGIC 0xdb4775248b80fb57ull
#define RT_SST_FOOTER_LEN 48
#define RT_SST_TRAILER_LEN 5

typedef enum rt_sst_compression {
    RT_SST_COMPRESSION_NONE = 0,
    RT_SST_COMPRESSION_SNAPPY = 1,
} rt_sst_compression;

typedef struct rt_slice {
    const uint8_t *data;
    size_t len;
} rt_slice;

/* ---- reader ---- */
typedef struct rt_sst rt_sst;

/* Parses the table in data[0..n). `name` (e.g. "variables.index") starts
 * every error message, which also gives the byte offset of the bad block.
 * Checks the footer magic, every block's crc and compression type, entry
 * encoding, restart array, and that keys are strictly increasing and lie
 * within their index entry. MS_EDATALOSS for corrupt or truncated input.
 * The table copies what it keeps; data may be freed after the call.
 * Free *out with rt_sst_free. */
ms_status rt_sst_open(const uint8_t *data, size_t n, const char *name, rt_sst **out);
void rt_sst_free(rt_sst *t);

/* Number of entries, and entry i (0 <= i < count) in key order. The slices
 * are borrowed from t. */
size_t rt_sst_count(const rt_sst *t);
void rt_sst_entry(const rt_sst *t, size_t i, rt_slice *key, rt_slice *value);
/* Index of the entry with exactly this key, or -1. */
long rt_sst_find(const rt_sst *t, const void *key, size_t klen);
/* Number of data blocks the table had (tests, diagnostics). */
size_t rt_sst_num_blocks(const rt_sst *t);

/* ---- writer ---- */
typedef struct rt_sst_options {
    rt_sst_compression compression; /* Snappy falls back to none if it saves < 12.5% */
    size_t block_size;              /* flush a data block once it reaches this size */
    int restart_interval;           /* entries between restarts in data blocks */
} rt_sst_options;

/* TensorFlow's settings for bundle indexes: no compression, 256 KiB blocks,
 * restart interval 16 (older TF versions compressed with Snappy). */
rt_sst_options rt_sst_options_default(void);

typedef struct rt_sst_writer rt_sst_writer;

/* opts NULL = rt_sst_options_default(). Free with rt_sst_writer_free unless
 * rt_sst_writer_finish was called. */
ms_status rt_sst_writer_new(const rt_sst_options *opts, rt_sst_writer **out);
/* Appends an entry. Keys must be strictly increasing (byte-wise), else
 * MS_EINVAL. Key and value are copied. */
ms_status rt_sst_writer_add(rt_sst_writer *w, const void *key, size_t klen, const void *val,
                            size_t vlen);
/* Writes the last data block, metaindex, index and footer; *out (malloc'ed,
 * caller frees) receives the file bytes. Frees w in all cases. */
ms_status rt_sst_writer_finish(rt_sst_writer *w, uint8_t **out, size_t *n);
void rt_sst_writer_free(rt_sst_writer *w);

/* Decompresses a Snappy block (raw format, through libsnappy) into a new
 * buffer: *out is malloc'ed (caller frees), *out_len its length. A declared
 * length above max_len is refused before allocating. Corrupt input gives
 * MS_EDATALOSS "snappy: ...". */
ms_status rt_sst_snappy_uncompress(const uint8_t *src, size_t n, size_t max_len, uint8_t **out,
                                   size_t *out_len);

#endif /* RT_SSTABLE_H */
