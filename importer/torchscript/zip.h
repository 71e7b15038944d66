/* The zip container of TorchScript archives (SPEC-torchscript.md §1): central directory
 * (zip64 included), STORED records used in place, DEFLATE records inflated by our own
 * RFC 1951 decoder. Every length and offset is checked against the file before use.
 *
 *     struct ox_zip *z;
 *     if (ox_zip_open(map, size, "model.pt", &z) != OX_OK) puts(ox_errmsg());
 *     const struct ox_zip_entry *e = ox_zip_find(z, "data.pkl");   // under the prefix
 *     const uint8_t *bytes; size_t n; uint8_t *owned;
 *     ox_zip_read(z, e, &bytes, &n, &owned);   // STORED: points into map; else malloc'd
 *     ...
 *     free(owned);
 *     ox_zip_free(z);
 *
 * Ownership: the zip borrows `buf` (it must outlive it); entry names are owned by the zip.
 */
#ifndef OX_IMPORTER_TORCHSCRIPT_ZIP_H
#define OX_IMPORTER_TORCHSCRIPT_ZIP_H

#include "graph/ir.h"

#define OX_ZIP_MAX_ENTRIES  1000000
#define OX_ZIP_MAX_INFLATED ((size_t)1 << 30) /* one DEFLATE record, inflated (zip bombs) */

struct ox_zip_entry {
    const char *name;      /* full name as stored, NUL-terminated (names with NUL are rejected) */
    uint64_t data_offset;  /* of the record's data in the file (from the local header) */
    uint64_t csize, usize; /* compressed and uncompressed sizes (central directory, zip64) */
    uint16_t method;       /* 0 STORED, 8 DEFLATE; others fail at read time */
    uint32_t crc32;
};

struct ox_zip;

/* Parse the central directory of a zip held in buf[0..len). `what` names the file in
 * messages (copied). Every entry must lie inside the file, its local header must name it
 * as the directory does, names must be unique, and a STORED entry's sizes must agree. The common
 * prefix (the archive folder,
 * "<name>/" or "archive/") is the part up to and including the first '/' of the first
 * entry, and every entry must share it, else OX_E_INVALID. Errors: OX_E_INVALID (not a zip,
 * truncated, inconsistent), OX_E_UNSUPPORTED (encrypted, multi-disk), OX_E_NOMEM. */
ox_status ox_zip_open(const uint8_t *buf, size_t len, const char *what, struct ox_zip **out);
void ox_zip_free(struct ox_zip *z);
/* "mlp_traced/" (with the slash). */
const char *ox_zip_prefix(const struct ox_zip *z);
int ox_zip_count(const struct ox_zip *z);
const struct ox_zip_entry *ox_zip_entry_at(const struct ox_zip *z, int i);
/* The entry named prefix + rel, or NULL. */
const struct ox_zip_entry *ox_zip_find(const struct ox_zip *z, const char *rel);
/* The entry's uncompressed bytes. STORED: *data points into the zip's buffer and *owned is
 * NULL; its CRC is not checked (storages are used in place, often memory-mapped: checking
 * would read them all once more; ox_crc32 is there for who wants it). DEFLATE: inflated into
 * malloc'd memory, *data == *owned (the caller frees it); the result must be exactly usize bytes
 * (at most OX_ZIP_MAX_INFLATED), and the CRC-32 must match. Errors name the archive and the entry:
 * OX_E_INVALID (corrupt data, sizes or CRC), OX_E_UNSUPPORTED (another method), OX_E_NOMEM. */
ox_status ox_zip_read(const struct ox_zip *z, const struct ox_zip_entry *e, const uint8_t **data,
                      size_t *len, uint8_t **owned);
/* Raw DEFLATE (RFC 1951, no zlib header) of in[0..in_len) into out[0..out_len): exactly
 * out_len bytes must come out, and the stream must end inside the input. Exposed for tests
 * and fuzzing. OX_E_INVALID with what is wrong in the message. */
ox_status ox_inflate(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_len);
uint32_t ox_crc32(const uint8_t *p, size_t n);

#endif
