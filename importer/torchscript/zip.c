/* The zip container of TorchScript archives (SPEC-torchscript.md §1) and a raw DEFLATE
 * decoder (RFC 1951).
 *
 * The records read here, field by field (all integers little-endian):
 *
 *   end of central directory (EOCD), 22 bytes + comment, at the end of the file:
 *     u32 0x06054b50, u16 this disk, u16 disk of the central directory, u16 entries on this
 *     disk, u16 entries in all, u32 central directory size, u32 its offset, u16 comment
 *     length, comment
 *   zip64 EOCD locator, 20 bytes, just before the EOCD:
 *     u32 0x07064b50, u32 disk of the zip64 EOCD, u64 its offset, u32 number of disks
 *   zip64 EOCD, 56 bytes (+ extensible data):
 *     u32 0x06064b50, u64 size of the rest of the record, u16 version made by, u16 version
 *     needed, u32 this disk, u32 disk of the central directory, u64 entries on this disk,
 *     u64 entries in all, u64 central directory size, u64 its offset
 *   central directory header, 46 bytes + name + extra + comment:
 *     u32 0x02014b50, u16 version made by, u16 version needed, u16 flags, u16 method,
 *     u16 time, u16 date, u32 crc-32, u32 compressed size, u32 uncompressed size, u16 name
 *     length, u16 extra length, u16 comment length, u16 disk of the record, u16 internal
 *     attributes, u32 external attributes, u32 offset of the local header
 *     extra fields: u16 id, u16 size, data; id 1 (zip64) holds, in this order and only for
 *     the fields above that hold 0xFFFFFFFF (0xFFFF for the disk): u64 uncompressed size,
 *     u64 compressed size, u64 local header offset, u32 disk
 *   local header, 30 bytes + name + extra, then the record's data:
 *     u32 0x04034b50, u16 version needed, u16 flags, u16 method, u16 time, u16 date,
 *     u32 crc-32, u32 compressed size, u32 uncompressed size, u16 name length, u16 extra
 *     length
 * TorchScript writes flags 0x0808 (data descriptor, UTF-8): the local header's CRC and
 * sizes are 0 and the real ones follow the data, so sizes and CRC come from the central
 * directory and only the local header's name and extra lengths are used (its extra field
 * pads the data to 64 bytes).
 */
#include "importer/torchscript/zip.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SIG_EOCD   0x06054b50u
#define SIG_LOC64  0x07064b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_CDH    0x02014b50u
#define SIG_LFH    0x04034b50u

#define EOCD_SIZE   22
#define LOC64_SIZE  20
#define EOCD64_SIZE 56
#define CDH_SIZE    46
#define LFH_SIZE    30

#define FLAG_ENCRYPTED        0x0001u
#define FLAG_STRONG_ENCRYPTED 0x0040u

/* DEFLATE codes at most 258 bytes in two bits (a 1-bit length code and a 1-bit distance
 * code), so no stream inflates more than 1032 times its size (plus a block's header). */
#define DEFLATE_MAX_RATIO 1032

struct ox_zip {
    const uint8_t *buf; /* borrowed */
    size_t len;
    const char *what;
    const char *prefix;
    size_t prefix_len;
    int n;
    struct ox_zip_entry *entries;       /* central-directory order */
    const struct ox_zip_entry **sorted; /* by name, for ox_zip_find */
    struct ox_arena arena;
};

static uint16_t rd16(const uint8_t *p) {
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p) {
    return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

/* [off, off + n) lies inside [0, limit). */
static bool inside(uint64_t off, uint64_t n, uint64_t limit) {
    return off <= limit && n <= limit - off;
}

/* ---- CRC-32 (ISO-HDLC, reflected polynomial 0xEDB88320) ------------------------------- */

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t ox_crc32(const uint8_t *p, size_t n) {
    pthread_once(&crc_once, crc_init);
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* ---- inflate (RFC 1951) ---------------------------------------------------------------- */

/* The input, read LSB first. `buf` holds `cnt` bits not yet used; bytes are taken from the
 * input only when a read needs them, so `buf` never runs past the input's end. */
struct bits {
    const uint8_t *in;
    size_t len, pos;
    uint64_t buf;
    int cnt;
};

static void refill(struct bits *b, int n) {
    while (b->cnt < n && b->pos < b->len) {
        b->buf |= (uint64_t)b->in[b->pos++] << b->cnt;
        b->cnt += 8;
    }
}

/* n <= 16 bits; false when the input ends first. */
static bool getbits(struct bits *b, int n, uint32_t *v) {
    refill(b, n);
    if (b->cnt < n) return false;
    *v = (uint32_t)(b->buf & (((uint64_t)1 << n) - 1));
    b->buf >>= n;
    b->cnt -= n;
    return true;
}

#define HUFF_MAX_BITS 15
#define HUFF_FAST     9 /* codes up to this long decode with one table lookup */
#define HUFF_MAX_SYMS 288

/* A canonical Huffman code. fast[] is indexed by the next HUFF_FAST input bits and holds
 * (length << 9 | symbol), or 0 for codes longer than HUFF_FAST bits and unused bit
 * patterns, which are decoded bit by bit from count[] and symbol[]. */
struct huff {
    uint16_t count[HUFF_MAX_BITS + 1]; /* codes of each length */
    uint16_t symbol[HUFF_MAX_SYMS];    /* symbols in code order */
    uint16_t fast[1 << HUFF_FAST];
};

enum { HUFF_COMPLETE, HUFF_SINGLE_OK, HUFF_EMPTY_OK };

/* Build the code of n symbols with these lengths (0: unused). A code must be complete,
 * except that `allow` HUFF_SINGLE_OK accepts a lone code of length 1 (as zlib does) and
 * HUFF_EMPTY_OK also no code at all (a block that copies nothing). NULL when good, else
 * what is wrong. */
static const char *huff_build(struct huff *h, const uint8_t *lens, int n, int allow) {
    memset(h->count, 0, sizeof h->count);
    for (int i = 0; i < n; i++) h->count[lens[i]]++;
    h->count[0] = 0;
    int left = 1, n_codes = 0;
    for (int len = 1; len <= HUFF_MAX_BITS; len++) {
        left <<= 1;
        left -= h->count[len];
        n_codes += h->count[len];
        if (left < 0) return "oversubscribed";
    }
    if (left > 0) {
        bool ok = (n_codes == 0 && allow == HUFF_EMPTY_OK) ||
                  (n_codes == 1 && h->count[1] == 1 && allow != HUFF_COMPLETE);
        if (!ok) return n_codes ? "incomplete" : "empty";
    }
    uint16_t offs[HUFF_MAX_BITS + 2];
    offs[1] = 0;
    for (int len = 1; len <= HUFF_MAX_BITS; len++) offs[len + 1] = offs[len] + h->count[len];
    for (int i = 0; i < n; i++)
        if (lens[i]) h->symbol[offs[lens[i]]++] = (uint16_t)i;
    memset(h->fast, 0, sizeof h->fast);
    unsigned code = 0, idx = 0;
    for (int len = 1; len <= HUFF_FAST; len++) {
        for (int k = 0; k < h->count[len]; k++, code++, idx++) {
            unsigned rev = 0; /* the code's bits, first one lowest */
            for (int j = 0; j < len; j++) rev |= ((code >> j) & 1) << (len - 1 - j);
            for (unsigned r = rev; r < 1u << HUFF_FAST; r += 1u << len)
                h->fast[r] = (uint16_t)(len << 9 | h->symbol[idx]);
        }
        code <<= 1;
    }
    return NULL;
}

/* The next symbol; -1 when the input ends, -2 for a bit pattern that is no code. */
static int huff_decode(struct bits *b, const struct huff *h) {
    refill(b, HUFF_FAST);
    if (b->cnt >= HUFF_FAST) {
        unsigned e = h->fast[b->buf & ((1u << HUFF_FAST) - 1)];
        if (e) {
            b->buf >>= e >> 9;
            b->cnt -= (int)(e >> 9);
            return (int)(e & 511);
        }
    }
    int code = 0, first = 0, index = 0;
    for (int len = 1; len <= HUFF_MAX_BITS; len++) {
        uint32_t bit;
        if (!getbits(b, 1, &bit)) return -1;
        code |= (int)bit;
        int count = h->count[len];
        if (code - first < count) return h->symbol[index + code - first];
        index += count;
        first = (first + count) << 1;
        code <<= 1;
    }
    return -2;
}

static const uint16_t len_base[29] = {3,  4,  5,  6,   7,   8,   9,   10,  11, 13,
                                      15, 17, 19, 23,  27,  31,  35,  43,  51, 59,
                                      67, 83, 99, 115, 131, 163, 195, 227, 258};
static const uint8_t len_extra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                      2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const uint16_t dist_base[30] = {
    1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,   65,    97,    129,
    193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
static const uint8_t dist_extra[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                       6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

struct inflater {
    struct bits b;
    uint8_t *out;
    size_t out_len, out_pos;
    struct huff lit, dist;
};

#define OVERRUN "the input ends inside the stream"

static ox_status inflate_stored(struct inflater *s) {
    struct bits *b = &s->b;
    b->buf >>= b->cnt & 7; /* to a byte boundary */
    b->cnt -= b->cnt & 7;
    uint32_t n, nn;
    if (!getbits(b, 16, &n) || !getbits(b, 16, &nn)) return ox_err(OX_E_INVALID, OVERRUN);
    if (n != (~nn & 0xFFFFu))
        return ox_err(OX_E_INVALID,
                      "stored block length 0x%04x does not match its complement 0x%04x", n, nn);
    if (n > s->out_len - s->out_pos)
        return ox_err(OX_E_INVALID, "output longer than %zu bytes", s->out_len);
    for (; n && b->cnt >= 8; n--) { /* whole bytes already in the bit buffer */
        s->out[s->out_pos++] = (uint8_t)b->buf;
        b->buf >>= 8;
        b->cnt -= 8;
    }
    if (n > b->len - b->pos) return ox_err(OX_E_INVALID, OVERRUN);
    if (n) memcpy(s->out + s->out_pos, b->in + b->pos, n);
    s->out_pos += n;
    b->pos += n;
    return OX_OK;
}

static ox_status inflate_codes(struct inflater *s) {
    struct bits *b = &s->b;
    for (;;) {
        int sym = huff_decode(b, &s->lit);
        if (sym == -1) return ox_err(OX_E_INVALID, OVERRUN);
        if (sym == -2) return ox_err(OX_E_INVALID, "invalid literal/length code");
        if (sym < 256) {
            if (s->out_pos == s->out_len)
                return ox_err(OX_E_INVALID, "output longer than %zu bytes", s->out_len);
            s->out[s->out_pos++] = (uint8_t)sym;
            continue;
        }
        if (sym == 256) return OX_OK;
        sym -= 257;
        if (sym >= 29) return ox_err(OX_E_INVALID, "invalid length code %d", sym + 257);
        uint32_t extra;
        if (!getbits(b, len_extra[sym], &extra)) return ox_err(OX_E_INVALID, OVERRUN);
        size_t len = len_base[sym] + extra;
        int dsym = huff_decode(b, &s->dist);
        if (dsym == -1) return ox_err(OX_E_INVALID, OVERRUN);
        if (dsym == -2 || dsym >= 30) return ox_err(OX_E_INVALID, "invalid distance code");
        if (!getbits(b, dist_extra[dsym], &extra)) return ox_err(OX_E_INVALID, OVERRUN);
        size_t dist = dist_base[dsym] + extra;
        if (dist > s->out_pos)
            return ox_err(OX_E_INVALID, "distance %zu too far back (%zu bytes written)", dist,
                          s->out_pos);
        if (len > s->out_len - s->out_pos)
            return ox_err(OX_E_INVALID, "output longer than %zu bytes", s->out_len);
        uint8_t *d = s->out + s->out_pos;
        const uint8_t *from = d - dist;
        for (size_t i = 0; i < len; i++) d[i] = from[i]; /* may overlap: byte by byte */
        s->out_pos += len;
    }
}

static void fixed_codes(struct inflater *s) {
    uint8_t lens[HUFF_MAX_SYMS];
    int i = 0;
    for (; i < 144; i++) lens[i] = 8;
    for (; i < 256; i++) lens[i] = 9;
    for (; i < 280; i++) lens[i] = 7;
    for (; i < 288; i++) lens[i] = 8;
    huff_build(&s->lit, lens, 288, HUFF_COMPLETE);
    for (i = 0; i < 32; i++) lens[i] = 5; /* 30 and 31 are in the code but invalid */
    huff_build(&s->dist, lens, 32, HUFF_COMPLETE);
}

static ox_status dynamic_codes(struct inflater *s) {
    static const uint8_t order[19] = {16, 17, 18, 0, 8,  7, 9,  6, 10, 5,
                                      11, 4,  12, 3, 13, 2, 14, 1, 15};
    struct bits *b = &s->b;
    uint32_t hlit, hdist, hclen;
    if (!getbits(b, 5, &hlit) || !getbits(b, 5, &hdist) || !getbits(b, 4, &hclen))
        return ox_err(OX_E_INVALID, OVERRUN);
    hlit += 257;
    hdist += 1;
    hclen += 4;
    if (hlit > 286 || hdist > 30)
        return ox_err(OX_E_INVALID, "too many length (%u) or distance (%u) codes", hlit, hdist);
    uint8_t lens[286 + 30];
    memset(lens, 0, 19);
    for (uint32_t i = 0; i < hclen; i++) {
        uint32_t v;
        if (!getbits(b, 3, &v)) return ox_err(OX_E_INVALID, OVERRUN);
        lens[order[i]] = (uint8_t)v;
    }
    struct huff cl;
    const char *why = huff_build(&cl, lens, 19, HUFF_COMPLETE);
    if (why) return ox_err(OX_E_INVALID, "invalid code lengths: the code-length code is %s", why);
    uint32_t n = hlit + hdist;
    for (uint32_t i = 0; i < n;) {
        int sym = huff_decode(b, &cl);
        if (sym == -1) return ox_err(OX_E_INVALID, OVERRUN);
        if (sym == -2) return ox_err(OX_E_INVALID, "invalid code lengths: bad code-length code");
        if (sym < 16) {
            lens[i++] = (uint8_t)sym;
            continue;
        }
        uint32_t rep, v = 0;
        uint8_t fill = 0;
        bool ok;
        if (sym == 16) {
            if (i == 0)
                return ox_err(OX_E_INVALID, "invalid code lengths: repeat with no previous length");
            fill = lens[i - 1];
            ok = getbits(b, 2, &v);
            rep = 3 + v;
        } else if (sym == 17) {
            ok = getbits(b, 3, &v);
            rep = 3 + v;
        } else {
            ok = getbits(b, 7, &v);
            rep = 11 + v;
        }
        if (!ok) return ox_err(OX_E_INVALID, OVERRUN);
        if (rep > n - i)
            return ox_err(OX_E_INVALID, "invalid code lengths: repeat past the %u lengths", n);
        memset(lens + i, fill, rep);
        i += rep;
    }
    if (lens[256] == 0) return ox_err(OX_E_INVALID, "invalid code lengths: no end-of-block code");
    why = huff_build(&s->lit, lens, (int)hlit, HUFF_SINGLE_OK);
    if (why)
        return ox_err(OX_E_INVALID, "invalid code lengths: the literal/length code is %s", why);
    why = huff_build(&s->dist, lens + hlit, (int)hdist, HUFF_EMPTY_OK);
    if (why) return ox_err(OX_E_INVALID, "invalid code lengths: the distance code is %s", why);
    return OX_OK;
}

ox_status ox_inflate(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_len) {
    struct inflater *s = malloc(sizeof *s);
    if (!s) return ox_err(OX_E_NOMEM, "out of memory");
    s->b = (struct bits){.in = in, .len = in ? in_len : 0};
    s->out = out;
    s->out_len = out ? out_len : 0;
    s->out_pos = 0;
    ox_status st = OX_OK;
    uint32_t final = 0, type;
    while (!final && st == OX_OK) {
        if (!getbits(&s->b, 1, &final) || !getbits(&s->b, 2, &type)) {
            st = ox_err(OX_E_INVALID, OVERRUN);
            break;
        }
        if (type == 0) {
            st = inflate_stored(s);
        } else if (type == 1) {
            fixed_codes(s);
            st = inflate_codes(s);
        } else if (type == 2) {
            st = dynamic_codes(s);
            if (st == OX_OK) st = inflate_codes(s);
        } else {
            st = ox_err(OX_E_INVALID, "invalid block type 3");
        }
    }
    if (st == OX_OK && s->out_pos != out_len)
        st = ox_err(OX_E_INVALID, "inflated %zu bytes, expected %zu", s->out_pos, out_len);
    free(s);
    return st;
}

/* ---- central directory ----------------------------------------------------------------- */

static int cmp_entry(const void *a, const void *b) {
    return strcmp((*(const struct ox_zip_entry *const *)a)->name,
                  (*(const struct ox_zip_entry *const *)b)->name);
}

/* The end of central directory record: 22 fixed bytes and a comment of up to 65535 bytes,
 * the last thing in the file, so its signature lies in the last 22 + 65535 bytes. The
 * comment may itself contain the signature's bytes: scan backwards from the end and take
 * the first candidate whose comment length reaches exactly the end of the file. */
static bool find_eocd(const uint8_t *buf, size_t len, size_t *pos) {
    if (len < EOCD_SIZE) return false;
    size_t lo = len - EOCD_SIZE > 65535 ? len - EOCD_SIZE - 65535 : 0;
    for (size_t p = len - EOCD_SIZE + 1; p-- > lo;) {
        if (rd32(buf + p) == SIG_EOCD && p + EOCD_SIZE + rd16(buf + p + 20) == len) {
            *pos = p;
            return true;
        }
    }
    return false;
}

/* The directory's place and size, from the EOCD and, where it holds 0xFFFF/0xFFFFFFFF,
 * from the zip64 EOCD that the locator before it points to. *end is where the directory
 * must end by: the zip64 EOCD or the EOCD. */
static ox_status read_eocd(const uint8_t *buf, size_t len, const char *what, uint64_t *n,
                           uint64_t *cd_off, uint64_t *cd_size, uint64_t *end) {
    size_t pos;
    if (!find_eocd(buf, len, &pos))
        return ox_err(OX_E_INVALID, "%s: not a zip archive (no end of central directory record)",
                      what);
    const uint8_t *e = buf + pos;
    uint32_t disk = rd16(e + 4), cd_disk = rd16(e + 6);
    uint64_t n_disk = rd16(e + 8);
    *n = rd16(e + 10);
    *cd_size = rd32(e + 12);
    *cd_off = rd32(e + 16);
    *end = pos;
    if (pos >= LOC64_SIZE && rd32(e - LOC64_SIZE) == SIG_LOC64) {
        const uint8_t *l = e - LOC64_SIZE;
        uint64_t off = rd64(l + 8);
        uint32_t n_disks = rd32(l + 16);
        if (rd32(l + 4) != 0 || n_disks > 1)
            return ox_err(OX_E_UNSUPPORTED, "%s: multi-disk zip archives are not supported", what);
        if (!inside(off, EOCD64_SIZE, pos - LOC64_SIZE) || rd32(buf + off) != SIG_EOCD64)
            return ox_err(OX_E_INVALID,
                          "%s: the zip64 locator points to offset %llu, where no zip64 end of "
                          "central directory record lies",
                          what, (unsigned long long)off);
        const uint8_t *z = buf + off;
        if (rd64(z + 4) < EOCD64_SIZE - 12)
            return ox_err(OX_E_INVALID, "%s: zip64 end of central directory record of %llu bytes",
                          what, (unsigned long long)rd64(z + 4));
        if (disk == 0xFFFF) disk = rd32(z + 16);
        if (cd_disk == 0xFFFF) cd_disk = rd32(z + 20);
        if (n_disk == 0xFFFF) n_disk = rd64(z + 24);
        if (*n == 0xFFFF) *n = rd64(z + 32);
        if (*cd_size == 0xFFFFFFFF) *cd_size = rd64(z + 40);
        if (*cd_off == 0xFFFFFFFF) *cd_off = rd64(z + 48);
        *end = off;
    }
    if (disk != 0 || cd_disk != 0 || n_disk != *n)
        return ox_err(OX_E_UNSUPPORTED, "%s: multi-disk zip archives are not supported", what);
    if (!inside(*cd_off, *cd_size, *end))
        return ox_err(OX_E_INVALID,
                      "%s: the central directory (offset %llu, %llu bytes) runs past the end of "
                      "the archive (%llu bytes before its end record)",
                      what, (unsigned long long)*cd_off, (unsigned long long)*cd_size,
                      (unsigned long long)*end);
    if (*n == 0) return ox_err(OX_E_INVALID, "%s: the zip archive has no entries", what);
    if (*n > OX_ZIP_MAX_ENTRIES)
        return ox_err(OX_E_INVALID, "%s: %llu zip entries, more than the limit of %d", what,
                      (unsigned long long)*n, OX_ZIP_MAX_ENTRIES);
    if (*n > *cd_size / CDH_SIZE)
        return ox_err(OX_E_INVALID,
                      "%s: %llu zip entries cannot fit in a central directory of %llu bytes", what,
                      (unsigned long long)*n, (unsigned long long)*cd_size);
    return OX_OK;
}

/* Take the next u64 (or u32, with n == 4) of a zip64 extra field into *v. */
static bool take(const uint8_t **f, const uint8_t *end, int n, uint64_t *v) {
    if (end - *f < n) return false;
    *v = n == 8 ? rd64(*f) : rd32(*f);
    *f += n;
    return true;
}

/* The zip64 extra field (id 1) of a central directory header: replace the saturated
 * values. Without one, the saturated values are taken as they are. */
static bool read_zip64_extra(const uint8_t *x, size_t n, uint64_t *usize, uint64_t *csize,
                             uint64_t *lh_off, uint64_t *disk) {
    for (size_t i = 0; i + 4 <= n;) {
        uint16_t id = rd16(x + i), sz = rd16(x + i + 2);
        if (sz > n - i - 4) return false;
        const uint8_t *f = x + i + 4, *end = f + sz;
        if (id == 1) {
            if (*usize == 0xFFFFFFFF && !take(&f, end, 8, usize)) return false;
            if (*csize == 0xFFFFFFFF && !take(&f, end, 8, csize)) return false;
            if (*lh_off == 0xFFFFFFFF && !take(&f, end, 8, lh_off)) return false;
            if (*disk == 0xFFFF && !take(&f, end, 4, disk)) return false;
            return true;
        }
        i += 4 + (size_t)sz;
    }
    return true;
}

/* One central directory header at buf[*p..cd_end); *p moves past it. */
static ox_status read_entry(struct ox_zip *z, size_t *p, size_t cd_end, int idx,
                            struct ox_zip_entry *e) {
    const uint8_t *buf = z->buf;
    const char *what = z->what;
    if (!inside(*p, CDH_SIZE, cd_end) || rd32(buf + *p) != SIG_CDH)
        return ox_err(OX_E_INVALID, "%s: zip central directory entry %d: bad header at offset %zu",
                      what, idx, *p);
    const uint8_t *h = buf + *p;
    uint16_t flags = rd16(h + 8), nl = rd16(h + 28), xl = rd16(h + 30), cl = rd16(h + 32);
    if (!inside(*p + CDH_SIZE, (size_t)nl + xl + cl, cd_end))
        return ox_err(OX_E_INVALID,
                      "%s: zip central directory entry %d: name and extra fields run past the "
                      "directory",
                      what, idx);
    const char *name = (const char *)h + CDH_SIZE;
    if (nl == 0 || memchr(name, 0, nl))
        return ox_err(OX_E_INVALID, "%s: zip entry %d: empty name or a name holding a NUL byte",
                      what, idx);
    e->name = ox_arena_strndup(&z->arena, name, nl);
    if (!e->name) return ox_err(OX_E_NOMEM, "%s: out of memory", what);
    if (flags & (FLAG_ENCRYPTED | FLAG_STRONG_ENCRYPTED))
        return ox_err(OX_E_UNSUPPORTED, "%s: zip entry '%s' is encrypted", what, e->name);
    e->method = rd16(h + 10);
    e->crc32 = rd32(h + 16);
    e->csize = rd32(h + 20);
    e->usize = rd32(h + 24);
    uint64_t lh_off = rd32(h + 42);
    uint64_t disk = rd16(h + 34);
    if (!read_zip64_extra(h + CDH_SIZE + nl, xl, &e->usize, &e->csize, &lh_off, &disk))
        return ox_err(OX_E_INVALID, "%s: zip entry '%s': malformed extra field", what, e->name);
    if (disk != 0)
        return ox_err(OX_E_UNSUPPORTED, "%s: zip entry '%s' is on disk %llu (multi-disk archive)",
                      what, e->name, (unsigned long long)disk);
    *p += CDH_SIZE + (size_t)nl + xl + cl;

    /* the local header: its name must match, its lengths place the data */
    if (!inside(lh_off, LFH_SIZE, z->len) || rd32(buf + lh_off) != SIG_LFH)
        return ox_err(OX_E_INVALID, "%s: zip entry '%s': no local header at offset %llu", what,
                      e->name, (unsigned long long)lh_off);
    const uint8_t *l = buf + lh_off;
    uint16_t lnl = rd16(l + 26), lxl = rd16(l + 28);
    if (!inside(lh_off + LFH_SIZE, (uint64_t)lnl + lxl, z->len))
        return ox_err(OX_E_INVALID, "%s: zip entry '%s': local header runs past the end", what,
                      e->name);
    if (lnl != nl || memcmp(l + LFH_SIZE, name, nl) != 0)
        return ox_err(OX_E_INVALID,
                      "%s: zip entry '%s': the local header names another file (%.*s)", what,
                      e->name, (int)(lnl < 200 ? lnl : 200), (const char *)l + LFH_SIZE);
    e->data_offset = lh_off + LFH_SIZE + lnl + lxl;
    if (!inside(e->data_offset, e->csize, z->len))
        return ox_err(OX_E_INVALID,
                      "%s: zip entry '%s': its data (offset %llu, %llu bytes) runs past the end "
                      "of the file (%zu bytes)",
                      what, e->name, (unsigned long long)e->data_offset,
                      (unsigned long long)e->csize, z->len);
    if (e->method == 0 && e->csize != e->usize)
        return ox_err(OX_E_INVALID,
                      "%s: zip entry '%s': stored with %llu bytes but %llu uncompressed", what,
                      e->name, (unsigned long long)e->csize, (unsigned long long)e->usize);
    return OX_OK;
}

ox_status ox_zip_open(const uint8_t *buf, size_t len, const char *what, struct ox_zip **out) {
    *out = NULL;
    if (!what) what = "zip";
    if (!buf) len = 0;
    uint64_t n = 0, cd_off = 0, cd_size = 0, end = 0;
    ox_status st = read_eocd(buf, len, what, &n, &cd_off, &cd_size, &end);
    if (st) return st;
    struct ox_zip *z = calloc(1, sizeof *z);
    if (!z) return ox_err(OX_E_NOMEM, "%s: out of memory", what);
    z->buf = buf;
    z->len = len;
    z->n = (int)n;
    z->what = ox_arena_strdup(&z->arena, what);
    z->entries = ox_arena_alloc(&z->arena, (size_t)n * sizeof *z->entries);
    z->sorted = ox_arena_alloc(&z->arena, (size_t)n * sizeof *z->sorted);
    if (!z->what || !z->entries || !z->sorted) {
        st = ox_err(OX_E_NOMEM, "%s: out of memory", what);
        goto fail_free_zip;
    }
    what = z->what;
    size_t p = (size_t)cd_off, cd_end = (size_t)(cd_off + cd_size);
    for (int i = 0; i < z->n; i++) {
        st = read_entry(z, &p, cd_end, i, &z->entries[i]);
        if (st) goto fail_free_zip;
        z->sorted[i] = &z->entries[i];
    }

    /* the archive folder: the first entry's name up to its first '/' */
    const char *first = z->entries[0].name, *slash = strchr(first, '/');
    if (!slash || slash == first) {
        st = ox_err(OX_E_INVALID, "%s: the first zip entry '%s' is not inside an archive folder",
                    what, first);
        goto fail_free_zip;
    }
    z->prefix_len = (size_t)(slash - first) + 1;
    z->prefix = ox_arena_strndup(&z->arena, first, z->prefix_len);
    if (!z->prefix) {
        st = ox_err(OX_E_NOMEM, "%s: out of memory", what);
        goto fail_free_zip;
    }
    for (int i = 1; i < z->n; i++)
        if (strncmp(z->entries[i].name, z->prefix, z->prefix_len) != 0) {
            st = ox_err(OX_E_INVALID, "%s: zip entry '%s' is outside the archive folder '%s'", what,
                        z->entries[i].name, z->prefix);
            goto fail_free_zip;
        }
    qsort(z->sorted, (size_t)z->n, sizeof *z->sorted, cmp_entry);
    for (int i = 1; i < z->n; i++)
        if (strcmp(z->sorted[i - 1]->name, z->sorted[i]->name) == 0) {
            st = ox_err(OX_E_INVALID, "%s: zip entry '%s' appears twice", what, z->sorted[i]->name);
            goto fail_free_zip;
        }
    *out = z;
    return OX_OK;

fail_free_zip:
    ox_zip_free(z);
    return st;
}

void ox_zip_free(struct ox_zip *z) {
    if (!z) return;
    ox_arena_free(&z->arena);
    free(z);
}

const char *ox_zip_prefix(const struct ox_zip *z) {
    return z->prefix;
}

int ox_zip_count(const struct ox_zip *z) {
    return z->n;
}

const struct ox_zip_entry *ox_zip_entry_at(const struct ox_zip *z, int i) {
    return i >= 0 && i < z->n ? &z->entries[i] : NULL;
}

const struct ox_zip_entry *ox_zip_find(const struct ox_zip *z, const char *rel) {
    /* every name starts with the prefix, so names sort as their remainders do */
    int lo = 0, hi = z->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(z->sorted[mid]->name + z->prefix_len, rel);
        if (c == 0) return z->sorted[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

ox_status ox_zip_read(const struct ox_zip *z, const struct ox_zip_entry *e, const uint8_t **data,
                      size_t *len, uint8_t **owned) {
    *data = NULL;
    *len = 0;
    *owned = NULL;
    if (!e) return ox_err(OX_E_INVALID, "%s: no such zip entry", z->what);
    /* open checked that csize bytes from data_offset lie in the file */
    const uint8_t *in = z->buf + e->data_offset;
    if (e->method == 0) {
        *data = in;
        *len = (size_t)e->usize;
        return OX_OK;
    }
    if (e->method != 8)
        return ox_err(OX_E_UNSUPPORTED,
                      "%s: zip entry '%s': compression method %u is not supported", z->what,
                      e->name, e->method);
    if (e->usize > OX_ZIP_MAX_INFLATED)
        return ox_err(OX_E_NOMEM,
                      "%s: zip entry '%s' claims %llu bytes once inflated, more than the limit of "
                      "%zu",
                      z->what, e->name, (unsigned long long)e->usize, OX_ZIP_MAX_INFLATED);
    if (e->usize > (e->csize + 1) * DEFLATE_MAX_RATIO)
        return ox_err(OX_E_INVALID,
                      "%s: zip entry '%s' claims %llu bytes once inflated, impossible from %llu "
                      "compressed bytes",
                      z->what, e->name, (unsigned long long)e->usize, (unsigned long long)e->csize);
    uint8_t *buf = malloc(e->usize ? (size_t)e->usize : 1);
    if (!buf)
        return ox_err(OX_E_NOMEM, "%s: zip entry '%s': out of memory for %llu bytes", z->what,
                      e->name, (unsigned long long)e->usize);
    ox_status st = ox_inflate(in, (size_t)e->csize, buf, (size_t)e->usize);
    if (st) {
        free(buf);
        return ox_err_prefix(st, "%s: zip entry '%s': ", z->what, e->name);
    }
    uint32_t crc = ox_crc32(buf, (size_t)e->usize);
    if (crc != e->crc32) {
        free(buf);
        return ox_err(OX_E_INVALID,
                      "%s: zip entry '%s': CRC-32 mismatch (stored 0x%08x, data 0x%08x)", z->what,
                      e->name, e->crc32, crc);
    }
    *data = *owned = buf;
    *len = (size_t)e->usize;
    return OX_OK;
}
