/* dcm_parse.h - DICOM Part 10 parser: file meta, data set, sequences, and
 * encapsulated pixel data split into fragments and frames.
 *
 * Accepted input (see docs/dicom.md):
 *   - 128-byte preamble + "DICM" + File Meta group (the normal Part 10 file);
 *   - "DICM" at offset 0 (preamble stripped) + File Meta group;
 *   - when lim->allow_no_meta is set (the default): a bare data set with no
 *     preamble and no meta (ACR-NEMA style); its encoding is sniffed from the
 *     first element (implicit LE, explicit LE or explicit BE).
 * The meta group is bounded by (0002,0000) when present, so a second group
 * 0002 block inside the data set cannot change the transfer syntax.
 *
 * The parser never recurses: sequences and items are tracked on an explicit
 * stack capped at lim->max_depth. Every length is checked in 64-bit against
 * the bytes that remain before it is used. Elements are recorded in a flat
 * array in file order; an element's children (items of a sequence, elements
 * of an item) follow it and end at elems[i].end.
 *
 * Ownership: dcm_parse() returns a dcm_dataset the caller frees with
 * dcm_dataset_free(). The dataset borrows the input bytes (they must outlive
 * it) except for a deflated data set, whose inflated copy it owns.
 */
#ifndef DCM_PARSE_H
#define DCM_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "dcm_codec.h"
#include "ms_budget.h"
#include "ms_status.h"

/* Limits against hostile input. dcm_limits_default() fills sane values. */
typedef struct dcm_limits {
    uint32_t max_depth;       /* sequence + item nesting levels (default 64) */
    uint64_t max_inflated;    /* deflated data set: cap on inflated bytes (256 MiB) */
    uint64_t max_pixel_bytes; /* decoded image: frames*rows*cols*samples*4 cap (1 GiB) */
    uint32_t max_elements;    /* elements recorded in one file (1,000,000) */
    int allow_no_meta;        /* accept a bare data set without DICM (1) */
    uint32_t threads;         /* not a limit: threads decoding the frames of one
                               * encapsulated file (0 or 1: serial, the default) */
    ms_budget *budget;        /* the request's memory budget (NULL: none): inflated bytes
                               * are taken from it as they grow, given back on free */
    int header_only;          /* not a limit: stop at the top-level pixel data (0) */
} dcm_limits;

void dcm_limits_default(dcm_limits *lim);

#define DCM_TAG(g, e) (((uint32_t)(g) << 16) | (uint32_t)(e))
#define DCM_VR(a, b)  ((uint16_t)(((uint16_t)(a) << 8) | (uint16_t)(b)))
#define DCM_NO_PARENT UINT32_MAX

/* Tags this code uses. */
enum {
    DCM_TAG_TRANSFER_SYNTAX = DCM_TAG(0x0002, 0x0010),
    DCM_TAG_ITEM = DCM_TAG(0xFFFE, 0xE000),
    DCM_TAG_ITEM_DELIM = DCM_TAG(0xFFFE, 0xE00D),
    DCM_TAG_SEQ_DELIM = DCM_TAG(0xFFFE, 0xE0DD),
    DCM_TAG_PIXEL_DATA = DCM_TAG(0x7FE0, 0x0010),
    DCM_TAG_FLOAT_PIXEL_DATA = DCM_TAG(0x7FE0, 0x0008),
    DCM_TAG_DOUBLE_PIXEL_DATA = DCM_TAG(0x7FE0, 0x0009),
    DCM_TAG_EXT_OFFSET_TABLE = DCM_TAG(0x7FE0, 0x0001),
    DCM_TAG_EXT_OFFSET_LENGTHS = DCM_TAG(0x7FE0, 0x0002),
};

typedef enum dcm_elem_flags {
    DCM_ELEM_UNDEF_LEN = 1, /* encoded with undefined length */
    DCM_ELEM_ENCAPS = 2,    /* encapsulated pixel data (fragments) */
} dcm_elem_flags;

typedef struct dcm_elem {
    uint32_t tag;
    uint16_t vr;        /* DCM_VR('U','S'); from the dictionary in implicit VR */
    uint16_t flags;     /* dcm_elem_flags */
    uint32_t parent;    /* index of the enclosing item (or sequence, for an item) */
    uint32_t end;       /* index one past the element's last descendant */
    uint64_t off;       /* value offset in dcm_dataset.body */
    uint64_t len;       /* value length in bytes (content length for SQ/items) */
    uint8_t big_endian; /* byte order of the value */
} dcm_elem;

typedef struct dcm_fragment {
    uint64_t off; /* fragment bytes in body */
    uint64_t len;
    uint64_t item_off; /* offset of the item tag, relative to the first fragment's tag */
} dcm_fragment;

typedef struct dcm_dataset {
    const uint8_t *body; /* the data set bytes (borrowed input, or owned inflated copy) */
    uint64_t body_len;
    uint8_t *inflated; /* owned when the data set was deflated; else NULL */

    char ts_uid[68]; /* transfer syntax UID (sniffed ones get a name in ts_note) */
    char sop_class[68];
    const char *ts_note; /* "no file meta: sniffed implicit VR LE" etc., or NULL */
    int has_meta;
    int explicit_vr; /* of the data set body */
    int big_endian;
    int deflated;
    dcm_codec_kind codec; /* DCM_CODEC_NONE for native syntaxes */

    dcm_elem *elems;
    uint32_t nelems, cap_elems;

    /* Encapsulated (7FE0,0010) at the top level: item 0 (offset table) and fragments. */
    int encapsulated;
    const uint8_t *bot; /* basic offset table bytes (little endian uint32s) */
    uint64_t bot_len;
    dcm_fragment *frags;
    uint32_t nfrags, cap_frags;
    int missing_seq_delim; /* tolerated: Pixel Data ran to EOF without (FFFE,E0DD) */
    int header_only;       /* parsed with lim->header_only and stopped at the pixel data */
    ms_budget *budget;     /* what the inflated bytes were taken from */
    uint64_t budget_held;
} dcm_dataset;

/* Parses a Part 10 file (or bare data set) of `len` bytes. MS_EINVAL with a
 * reason for malformed input, MS_ENOTSUP for an unsupported transfer syntax
 * (the message names its UID), MS_ENOMEM when a limit or malloc fails.
 * With lim->header_only the walk ends at the top-level (7FE0,0008/0009/0010):
 * that element is recorded (a defined length checked against the bytes left;
 * encapsulated data flagged DCM_ELEM_ENCAPS, ds->encapsulated set, no
 * fragment walked, its length running to the end) and nothing after it is
 * read; ds->header_only says so. Such a data set answers every header
 * question and native pixel views (dcm_native_view_of); anything that needs
 * the fragments (dcm_decode_hu_ds, dcm_encaps_map) wants a full parse. */
ms_status dcm_parse(const uint8_t *bytes, size_t len, const dcm_limits *lim, dcm_dataset **out);
void dcm_dataset_free(dcm_dataset *ds);

/* Finds element `tag` among the children of `parent` (DCM_NO_PARENT = top
 * level). Returns its index or -1. */
int64_t dcm_find(const dcm_dataset *ds, uint32_t parent, uint32_t tag);
/* Item `n` (0-based) of the sequence element seq, or -1. */
int64_t dcm_item(const dcm_dataset *ds, uint32_t seq, uint32_t n);
/* Number of items in sequence element seq. */
uint32_t dcm_item_count(const dcm_dataset *ds, uint32_t seq);

/* Value readers for element index i. They fail with MS_EINVAL when the VR or
 * length does not fit. Strings are trimmed of spaces and NULs. */
ms_status dcm_get_uint(const dcm_dataset *ds, int64_t i, uint32_t vm_index, uint32_t *out);
ms_status dcm_get_int(const dcm_dataset *ds, int64_t i, uint32_t vm_index, int32_t *out);
/* DS or IS value `vm_index` of a backslash-separated list, parsed with strtod. */
ms_status dcm_get_number(const dcm_dataset *ds, int64_t i, uint32_t vm_index, double *out);

/* Non-zero for attributes that identify a patient, a study or a person
 * (PS3.15 Basic Profile, private groups included): error messages never
 * quote their values. */
int dcm_tag_identifying(uint32_t tag);
/* Number of backslash-separated values of a string element (0 when empty). */
uint32_t dcm_string_vm(const dcm_dataset *ds, int64_t i);
/* Copies a trimmed string value into buf (NUL-terminated, truncated to n-1). */
void dcm_get_string(const dcm_dataset *ds, int64_t i, char *buf, size_t n);

/* Maps the encapsulated fragments to nframes frames: frame f is fragments
 * [starts[f], starts[f+1]); starts (caller-allocated) gets nframes + 1
 * entries. Uses the Extended Offset Table or the Basic Offset Table when they
 * match the fragments, else the rules of docs/dicom.md (one fragment per
 * frame; codec start markers; JPEG end markers). MS_EINVAL when no rule fits. */
ms_status dcm_encaps_map(const dcm_dataset *ds, uint32_t nframes, uint32_t *starts);

/* Name of a transfer syntax UID ("Explicit VR Little Endian"), or NULL. */
const char *dcm_ts_name(const char *uid);

#endif /* DCM_PARSE_H */
