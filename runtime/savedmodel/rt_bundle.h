/* rt_bundle.h - TensorFlow checkpoint "tensor bundle" (V2 checkpoint format):
 * the variables/ folder of a SavedModel.
 *
 * <prefix>.index is an SSTable (rt_sstable.h) whose first key "" holds a
 * BundleHeaderProto and whose other keys are tensor names mapping to
 * BundleEntryProtos (dtype, shape, shard, offset, size, masked crc32c).
 * <prefix>.data-NNNNN-of-MMMMM hold the tensor bytes: POD tensors raw and
 * little-endian, DT_STRING tensors as varint64 lengths, a masked crc32c of the
 * lengths, then the bytes.
 *
 * Error messages start with the file's base name ("variables.index: block crc
 * mismatch at offset 123", "variables.data-00000-of-00001: missing").
 */
#ifndef RT_BUNDLE_H
#define RT_BUNDLE_H

#include "kn_backend.h"
#include "ms_file.h"
#include "ms_status.h"
#include "rt_tensor.h"

/* ---- reader ---- */
typedef struct rt_bundle rt_bundle;

/* Opens the bundle at `prefix` (e.g. "<export_dir>/variables/variables").
 * Reads and verifies every block of prefix.index, checks the header (shard
 * count, endianness, version) and every entry (known dtype, shape, size that
 * fits dtype and shape, shard in range), and checks that every data shard
 * exists and is long enough for its entries. MS_ENOTFOUND when the index is
 * missing, MS_EDATALOSS for corrupt or truncated files, MS_ENOTSUP for
 * features this reader lacks (a newer format version). Keeps the data shards
 * open until rt_bundle_close. */
ms_status rt_bundle_open(const char *prefix, rt_bundle **out);
/* The same for a bundle inside a model folder: `prefix` is relative to root
 * ("variables/variables") and every file is opened beneath it (ms_file.h):
 * an index or shard that resolves outside the folder is MS_EPERM naming it,
 * one that is not a regular file MS_EINVAL, and nothing outside is read.
 * rt_bundle_open(path) is this with the prefix's own folder as the root. */
ms_status rt_bundle_open_in(const ms_dir *root, const char *prefix, rt_bundle **out);
void rt_bundle_close(rt_bundle *b);

/* Number of tensors (the header entry excluded) and their names in sorted
 * order; names are borrowed from b. */
int rt_bundle_count(const rt_bundle *b);
const char *rt_bundle_key(const rt_bundle *b, int i);

/* dtype and shape of a tensor without reading it. MS_ENOTFOUND if absent. */
ms_status rt_bundle_info(const rt_bundle *b, const char *key, rt_dtype *dtype, rt_shape *shape);

/* Reads tensor `key` into a new tensor (caller unrefs). The entry crc32c is
 * verified (MS_EDATALOSS on mismatch); DT_STRING tensors are decoded and their
 * length checksum verified too. MS_ENOTFOUND for an unknown key, MS_ENOTSUP
 * for sliced (partitioned) entries and DT_VARIANT/DT_RESOURCE. Several threads
 * may read from one open bundle at once (positioned reads, no shared state). */
ms_status rt_bundle_read(rt_bundle *b, const char *key, rt_tensor **out);

/* The completeness check of the model manager: the index parses with all
 * block crcs correct, every shard is present and long enough, and every
 * tensor's bytes match its crc32c. Reads the whole bundle once. */
ms_status rt_bundle_verify(const char *prefix);
/* The same beneath root, as rt_bundle_open_in. */
ms_status rt_bundle_verify_in(const ms_dir *root, const char *prefix);

/* ---- writer ---- */
typedef struct rt_bundle_writer rt_bundle_writer;

/* Starts a single-shard bundle at `prefix`. Tensor bytes stream into a
 * temporary data file beside the final one; nothing appears under the final
 * names until rt_bundle_writer_finish. The folder must exist. */
ms_status rt_bundle_writer_new(const char *prefix, rt_bundle_writer **out);
/* Appends tensor `key` (copied out at once; t stays the caller's). Keys must
 * be unique and non-empty (MS_EINVAL); any order. DT_VARIANT and DT_RESOURCE
 * are MS_ENOTSUP. */
ms_status rt_bundle_writer_add(rt_bundle_writer *w, const char *key, const rt_tensor *t);
/* Writes prefix.data-00000-of-00001 and then prefix.index exactly as
 * TensorFlow's BundleWriter does (sorted keys, header under key ""), each by
 * rename from a temporary file so readers never see a partial index. Frees w
 * whatever the outcome. */
ms_status rt_bundle_writer_finish(rt_bundle_writer *w);
/* Frees w and removes its temporary file; writes nothing. NULL is fine. */
void rt_bundle_writer_abort(rt_bundle_writer *w);

/* File name of shard `shard` of `num_shards` ("<prefix>.data-00000-of-00001")
 * into buf; returns buf, or NULL when it does not fit. */
char *rt_bundle_data_path(const char *prefix, int shard, int num_shards, char *buf, size_t n);

/* RestoreV2 as a host op (rt_ops_restore.c): reads named tensors from a
 * bundle; the saver's restore op runs it once at load. */
extern const kn_kernel rt_ops_restore_kernels[];

#endif /* RT_BUNDLE_H */
