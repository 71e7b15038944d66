/* Fuzz target: the zip layer of TorchScript archives (importer/torchscript/zip.h,
 * docs/FUZZING.md).
 *
 * An input that starts with "PK" is a zip: ox_zip_open, then every entry found again by name
 * and read (STORED in place, DEFLATE through ox_inflate with its size and CRC checks), each
 * one's bytes summed so that ASan sees every byte read. Any other input is a raw DEFLATE
 * stream after a 2-byte little-endian count: ox_inflate into count * 16 bytes (at most
 * 1 MiB). Seeds: the .pt archives (TorchScript fixtures, archives made with torch), small zips
 * with DEFLATE records, and raw DEFLATE streams made with zlib.
 */
#include "fuzz.h"
#include "importer/torchscript/zip.h"

/* Entries bigger than this, once inflated, are left unread: the limit of ox_zip_read
 * (OX_ZIP_MAX_INFLATED, 1 GiB) is legal but slow to reach on every run. */
#define FUZZ_MAX_ENTRY ((uint64_t)16 << 20)

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_init();
    return 0;
}

static volatile uint32_t sink;

static void zip(const uint8_t *data, size_t size) {
    struct ox_zip *z;
    if (ox_zip_open(data, size, "fuzz.pt", &z) != OX_OK) return;
    const char *prefix = ox_zip_prefix(z);
    size_t plen = strlen(prefix);
    for (int i = 0; i < ox_zip_count(z); i++) {
        const struct ox_zip_entry *e = ox_zip_entry_at(z, i);
        if (strncmp(e->name, prefix, plen) != 0 || ox_zip_find(z, e->name + plen) != e)
            abort(); /* every entry shares the prefix and is found by its name */
        if (e->usize > FUZZ_MAX_ENTRY) continue;
        const uint8_t *bytes;
        size_t n;
        uint8_t *owned;
        if (ox_zip_read(z, e, &bytes, &n, &owned) != OX_OK) continue;
        sink += ox_crc32(bytes, n);
        free(owned);
    }
    (void)ox_zip_find(z, "data.pkl");
    ox_zip_free(z);
}

static void inflate(const uint8_t *data, size_t size) {
    if (size < 2) return;
    size_t out_len = (size_t)(data[0] | data[1] << 8) * 16;
    uint8_t *out = malloc(out_len ? out_len : 1);
    if (!out) return;
    if (ox_inflate(data + 2, size - 2, out, out_len) == OX_OK) sink += ox_crc32(out, out_len);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size >= 2 && data[0] == 'P' && data[1] == 'K')
        zip(data, size);
    else
        inflate(data, size);
    return 0;
}
