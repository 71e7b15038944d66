/* The zip and pickle layers of TorchScript archives (importer/torchscript/zip.h, pickle.h).
 *
 * Oracles from outside: the torch 2.11 archives kept in shared/torchscript/torch-2.11 (the
 * archive folder each must have, SPEC-torchscript.md §1.1; every record readable; the root
 * object of data.pkl), DEFLATE streams written by hand from RFC 1951's fixed code, and
 * hand-made broken inputs, each with the error code and the words its message must hold.
 * tests/torchscript_container.py compares the same layers, entry by entry and value by
 * value, with Python's zipfile and pickle and with torch.jit.load, through this program's
 * --dump mode:
 *
 *     test_torchscript_container SCRATCH_DIR [FIXTURE_DIR]   the unit tests
 *     test_torchscript_container --dump ARCHIVE OUT_DIR       entries, bytes and pickles
 */
#include "harness.h"
#include "importer/torchscript/pickle.h"
#include "importer/torchscript/zip.h"

#include <malloc.h>
#include <sys/stat.h>

/* ---- files ----------------------------------------------------------------------------- */

static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* ---- the value tree as text (the format tests/torchscript_container.py writes too) ----- */

struct text {
    char *s;
    size_t n, cap;
    const struct ox_pv **seen; /* lists, dicts, objects and tensors already printed */
    int n_seen;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (t->n + (size_t)k + 1 > t->cap) {
        t->cap = (t->n + (size_t)k + 1) * 2;
        t->s = realloc(t->s, t->cap);
        if (!t->s) exit(2);
    }
    va_start(ap, fmt);
    vsnprintf(t->s + t->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    t->n += (size_t)k;
}

static void put_str(struct text *t, const char *s, size_t n) {
    put(t, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
            put(t, "%c", c);
        else
            put(t, "\\x%02x", c);
    }
    put(t, "\"");
}

/* "#k" for the first time a shared-able value is printed (then its body), "@k" later. */
static bool put_id(struct text *t, const struct ox_pv *v) {
    for (int i = 0; i < t->n_seen; i++)
        if (t->seen[i] == v) {
            put(t, "@%d", i);
            return false;
        }
    t->seen = realloc(t->seen, (size_t)(t->n_seen + 1) * sizeof *t->seen);
    if (!t->seen) exit(2);
    t->seen[t->n_seen] = v;
    put(t, "#%d", t->n_seen++);
    return true;
}

static void put_storage(struct text *t, const struct ox_pv_storage *s) {
    put(t, "%s,%s,%lld,%s", s->key, ox_dtype_name(s->dtype), (long long)s->numel, s->location);
}

static void put_pv(struct text *t, const struct ox_pv *v) {
    switch (v->kind) {
    case OX_PV_NONE: put(t, "N"); return;
    case OX_PV_BOOL: put(t, v->b ? "T" : "F"); return;
    case OX_PV_INT: put(t, "I%lld", (long long)v->i); return;
    case OX_PV_FLOAT: put(t, "F%.17g", v->f); return;
    case OX_PV_STR:
        put(t, "S");
        put_str(t, v->s, v->s_len);
        return;
    case OX_PV_TUPLE:
        put(t, "(");
        for (int i = 0; i < v->n; i++) put_pv(t, v->items[i]), put(t, ",");
        put(t, ")");
        return;
    case OX_PV_LIST:
    case OX_PV_DICT:
        put(t, v->kind == OX_PV_LIST ? "L" : "D");
        if (!put_id(t, v)) return;
        if (v->type_tag) put(t, "t"), put_str(t, v->type_tag, strlen(v->type_tag));
        put(t, v->kind == OX_PV_LIST ? "[" : "{");
        for (int i = 0; i < v->n; i++) {
            if (v->kind == OX_PV_DICT) {
                put_pv(t, v->items[2 * i]);
                put(t, ":");
                put_pv(t, v->items[2 * i + 1]);
            } else {
                put_pv(t, v->items[i]);
            }
            put(t, ",");
        }
        put(t, v->kind == OX_PV_LIST ? "]" : "}");
        if (v->state) put(t, "!"), put_pv(t, v->state);
        return;
    case OX_PV_OBJECT:
        put(t, "O");
        if (!put_id(t, v)) return;
        put(t, "<%s>!", v->cls);
        if (v->state)
            put_pv(t, v->state);
        else
            put(t, "-");
        return;
    case OX_PV_TENSOR: {
        put(t, "A");
        if (!put_id(t, v)) return;
        const struct ox_pv_tensor *x = &v->tensor;
        put(t, "<");
        put_storage(t, &x->storage);
        put(t, ",%lld,[", (long long)x->offset);
        for (int i = 0; i < x->rank; i++) put(t, "%lld,", (long long)x->size[i]);
        put(t, "],[");
        for (int i = 0; i < x->rank; i++) put(t, "%lld,", (long long)x->stride[i]);
        put(t, "],%d>", x->requires_grad);
        return;
    }
    case OX_PV_STORAGE:
        put(t, "P<");
        put_storage(t, &v->tensor.storage);
        put(t, ">");
        return;
    case OX_PV_DEVICE: put(t, "V%s", v->s); return;
    case OX_PV_GLOBAL: put(t, "G%s", v->s); return;
    }
}

static char *pv_text(const struct ox_pv *v) {
    struct text t = {0};
    put(&t, "%s", "");
    put_pv(&t, v);
    free(t.seen);
    return t.s;
}

/* ---- --dump: what tests/torchscript_container.py compares ------------------------------ */

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* Lines, tab-separated: "prefix P", "entry I NAME METHOD CSIZE USIZE CRC DATA_OFFSET" (the
 * bytes read go to OUT_DIR/I), "pickle NAME TEXT" or "pickle NAME error CODE MESSAGE", and
 * "error CODE MESSAGE" when the archive does not open. */
static int dump(const char *path, const char *out_dir) {
    size_t len;
    uint8_t *buf = slurp(path, &len);
    if (!buf) {
        printf("error\tio\tcannot read %s\n", path);
        return 1;
    }
    struct ox_zip *z;
    ox_status st = ox_zip_open(buf, len, path, &z);
    if (st) {
        printf("error\t%d\t%s\n", st, ox_errmsg());
        free(buf);
        return 0;
    }
    printf("prefix\t%s\n", ox_zip_prefix(z));
    int rc = 0;
    for (int i = 0; i < ox_zip_count(z); i++) {
        const struct ox_zip_entry *e = ox_zip_entry_at(z, i);
        const char *rel = e->name + strlen(ox_zip_prefix(z));
        if (ox_zip_find(z, rel) != e) {
            printf("error\tfind\tox_zip_find('%s') is not entry %d\n", rel, i);
            rc = 1;
        }
        printf("entry\t%d\t%s\t%u\t%llu\t%llu\t%08x\t%llu\n", i, e->name, e->method,
               (unsigned long long)e->csize, (unsigned long long)e->usize, e->crc32,
               (unsigned long long)e->data_offset);
        const uint8_t *data;
        size_t n;
        uint8_t *owned;
        st = ox_zip_read(z, e, &data, &n, &owned);
        if (st) {
            printf("readerror\t%d\t%d\t%s\n", i, st, ox_errmsg());
            continue;
        }
        char p[4096];
        snprintf(p, sizeof p, "%s/%d", out_dir, i);
        FILE *f = fopen(p, "wb");
        if (!f || fwrite(data, 1, n, f) != n) rc = 1;
        if (f) fclose(f);
        if (ends_with(e->name, "pkl")) {
            struct ox_pickle *pk;
            struct ox_pv *root;
            char what[4200];
            snprintf(what, sizeof what, "%s: %s", path, rel);
            st = ox_pickle_load(data, n, what, &pk, &root);
            if (st) {
                printf("pickle\t%s\terror\t%d\t%s\n", e->name, st, ox_errmsg());
            } else {
                char *text = pv_text(root);
                printf("pickle\t%s\t%s\n", e->name, text);
                free(text);
                ox_pickle_free(pk);
            }
        }
        free(owned);
    }
    ox_zip_free(z);
    free(buf);
    return rc;
}

/* ---- a zip writer for hand-made archives ----------------------------------------------- */

struct zentry {
    const char *name;
    uint16_t method;
    const void *data; /* csize bytes as they go into the file */
    size_t csize;
    uint64_t usize; /* >= 2^32: saturated, with a zip64 extra field in the directory */
    uint32_t crc;
};

struct zip {
    uint8_t b[1 << 16];
    size_t n;
    size_t lfh[8], cdh[8], eocd, eocd64, cd;
};

static void w8(struct zip *z, unsigned v) {
    z->b[z->n++] = (uint8_t)v;
}
static void w16(struct zip *z, unsigned v) {
    w8(z, v & 0xFF), w8(z, v >> 8 & 0xFF);
}
static void w32(struct zip *z, uint32_t v) {
    w16(z, v & 0xFFFF), w16(z, v >> 16);
}
static void w64(struct zip *z, uint64_t v) {
    w32(z, (uint32_t)v), w32(z, (uint32_t)(v >> 32));
}
static void wbytes(struct zip *z, const void *p, size_t n) {
    memcpy(z->b + z->n, p, n);
    z->n += n;
}

/* The layout TorchScript writes (flags 0x0808, zero local sizes, data at 64-byte offsets,
 * a descriptor after the data, zip64 end records before the EOCD). */
static void make_zip(struct zip *z, const struct zentry *e, int n) {
    z->n = 0;
    for (int i = 0; i < n; i++) {
        z->lfh[i] = z->n;
        size_t nl = strlen(e[i].name), pad = (64 - (z->n + 30 + nl + 4) % 64) % 64;
        w32(z, 0x04034b50), w16(z, 20), w16(z, 0x0808), w16(z, e[i].method);
        w32(z, 0), w32(z, 0), w32(z, 0), w32(z, 0);
        w16(z, (unsigned)nl), w16(z, (unsigned)(4 + pad));
        wbytes(z, e[i].name, nl);
        w16(z, 0x4246), w16(z, (unsigned)pad);
        memset(z->b + z->n, 'Z', pad);
        z->n += pad;
        wbytes(z, e[i].data, e[i].csize);
        w32(z, 0x08074b50), w32(z, e[i].crc), w32(z, (uint32_t)e[i].csize);
        w32(z, (uint32_t)e[i].usize);
    }
    z->cd = z->n;
    for (int i = 0; i < n; i++) {
        z->cdh[i] = z->n;
        bool big = e[i].usize >= 0xFFFFFFFFu;
        size_t nl = strlen(e[i].name);
        w32(z, 0x02014b50), w16(z, 0), w16(z, 20), w16(z, 0x0808), w16(z, e[i].method);
        w32(z, 0), w32(z, e[i].crc), w32(z, (uint32_t)e[i].csize);
        w32(z, big ? 0xFFFFFFFFu : (uint32_t)e[i].usize);
        w16(z, (unsigned)nl), w16(z, big ? 12 : 0), w16(z, 0), w16(z, 0), w16(z, 0), w32(z, 0);
        w32(z, (uint32_t)z->lfh[i]);
        wbytes(z, e[i].name, nl);
        if (big) w16(z, 1), w16(z, 8), w64(z, e[i].usize);
    }
    size_t cd_size = z->n - z->cd;
    z->eocd64 = z->n;
    w32(z, 0x06064b50), w64(z, 44), w16(z, 0x1e), w16(z, 45), w32(z, 0), w32(z, 0);
    w64(z, (uint64_t)n), w64(z, (uint64_t)n), w64(z, cd_size), w64(z, z->cd);
    w32(z, 0x07064b50), w32(z, 0), w64(z, z->eocd64), w32(z, 1);
    z->eocd = z->n;
    w32(z, 0x06054b50), w16(z, 0), w16(z, 0), w16(z, (unsigned)n), w16(z, (unsigned)n);
    w32(z, (uint32_t)cd_size), w32(z, (uint32_t)z->cd), w16(z, 0);
}

static void set32(struct zip *z, size_t at, uint32_t v) {
    size_t n = z->n;
    z->n = at;
    w32(z, v);
    z->n = n;
}

static void set64(struct zip *z, size_t at, uint64_t v) {
    size_t n = z->n;
    z->n = at;
    w64(z, v);
    z->n = n;
}

/* ---- DEFLATE streams written with the fixed code (RFC 1951 §3.2.6) --------------------- */

struct bw {
    uint8_t b[256];
    size_t nbits;
};

static void bits(struct bw *w, uint32_t v, int n) { /* LSB first */
    for (int i = 0; i < n; i++, w->nbits++)
        if (v >> i & 1) w->b[w->nbits / 8] |= (uint8_t)(1u << (w->nbits % 8));
}

static void huff(struct bw *w, uint32_t code, int n) { /* MSB first */
    for (int i = n - 1; i >= 0; i--) bits(w, code >> i & 1, 1);
}

static void fixed_sym(struct bw *w, int sym) {
    if (sym < 144)
        huff(w, 0x30 + (uint32_t)sym, 8);
    else if (sym < 256)
        huff(w, 0x190 + (uint32_t)(sym - 144), 9);
    else if (sym < 280)
        huff(w, (uint32_t)(sym - 256), 7);
    else
        huff(w, 0xC0 + (uint32_t)(sym - 280), 8);
}

static size_t bw_len(const struct bw *w) {
    return (w->nbits + 7) / 8;
}

/* "abc" then a copy of 6 bytes from 3 back: "abcabcabc" (length code 260 = 6, distance code
 * 2 = 3). `dist_code` and `len_sym` replace the copy's codes when not 0. */
static struct bw abc_stream(int len_sym, int dist_code) {
    struct bw w = {0};
    bits(&w, 1, 1), bits(&w, 1, 2); /* final, fixed */
    fixed_sym(&w, 'a'), fixed_sym(&w, 'b'), fixed_sym(&w, 'c');
    fixed_sym(&w, len_sym ? len_sym : 260);
    huff(&w, dist_code ? (uint32_t)dist_code : 2, 5);
    fixed_sym(&w, 256);
    return w;
}

static bool has(const char *words) { /* every ';'-separated word is in the message */
    char buf[256];
    snprintf(buf, sizeof buf, "%s", words);
    for (char *s = strtok(buf, ";"); s; s = strtok(NULL, ";"))
        if (!strstr(ox_errmsg(), s)) return false;
    return true;
}

#define EXPECT_ERR(expr, code, words)                                                              \
    do {                                                                                           \
        ox_status st_ = (expr);                                                                    \
        CHECK(st_ == (code) && has(words), "%s: got %d '%s', want %d with '%s'", #expr, st_,       \
              ox_errmsg(), code, words);                                                           \
    } while (0)

static void test_inflate(void) {
    uint8_t out[64];
    struct bw w = abc_stream(0, 0);
    EXPECT(ox_inflate(w.b, bw_len(&w), out, 9) == OX_OK);
    CHECK(memcmp(out, "abcabcabc", 9) == 0, "fixed-code copy inflates to abcabcabc");
    EXPECT_ERR(ox_inflate(w.b, bw_len(&w), out, 5), OX_E_INVALID, "output longer than 5");
    EXPECT_ERR(ox_inflate(w.b, bw_len(&w), out, 12), OX_E_INVALID, "inflated 9 bytes;expected 12");
    EXPECT_ERR(ox_inflate(w.b, bw_len(&w) - 1, out, 9), OX_E_INVALID, "input ends");
    w = abc_stream(0, 4); /* distance code 4: 5 back, 3 written */
    EXPECT_ERR(ox_inflate(w.b, bw_len(&w), out, 9), OX_E_INVALID, "distance 5 too far back");
    w = abc_stream(286, 0);
    EXPECT_ERR(ox_inflate(w.b, bw_len(&w), out, 9), OX_E_INVALID, "invalid length code 286");
    w = abc_stream(0, 30);
    EXPECT_ERR(ox_inflate(w.b, bw_len(&w), out, 9), OX_E_INVALID, "invalid distance code");

    /* block type 3 */
    w = (struct bw){0};
    bits(&w, 1, 1), bits(&w, 3, 2);
    EXPECT_ERR(ox_inflate(w.b, 1, out, 0), OX_E_INVALID, "invalid block type");

    /* stored blocks: a non-final one, then a final one; LEN must match ~NLEN */
    const uint8_t stored[] = {0x00, 2, 0, 0xFD, 0xFF, 'h', 'i', 0x01, 1, 0, 0xFE, 0xFF, '!'};
    EXPECT(ox_inflate(stored, sizeof stored, out, 3) == OX_OK);
    CHECK(memcmp(out, "hi!", 3) == 0, "two stored blocks");
    const uint8_t bad_stored[] = {0x01, 2, 0, 0xFD, 0xFE, 'h', 'i'};
    EXPECT_ERR(ox_inflate(bad_stored, sizeof bad_stored, out, 2), OX_E_INVALID,
               "does not match its complement");
    const uint8_t short_stored[] = {0x01, 9, 0, 0xF6, 0xFF, 'h', 'i'};
    EXPECT_ERR(ox_inflate(short_stored, sizeof short_stored, out, 9), OX_E_INVALID, "input ends");
    EXPECT(ox_inflate((const uint8_t[]){0x03, 0x00}, 2, out, 0) == OX_OK); /* empty fixed */

    /* dynamic blocks: code-length codes that do not form a proper code */
    w = (struct bw){0};
    bits(&w, 1, 1), bits(&w, 2, 2);
    bits(&w, 0, 5), bits(&w, 0, 5), bits(&w, 0, 4); /* 257, 1, 4 code-length codes */
    bits(&w, 1, 3), bits(&w, 1, 3), bits(&w, 1, 3), bits(&w, 1, 3); /* four of length 1 */
    EXPECT_ERR(ox_inflate(w.b, bw_len(&w), out, 1), OX_E_INVALID,
               "invalid code lengths;oversubscribed");
    w = (struct bw){0};
    bits(&w, 1, 1), bits(&w, 2, 2);
    bits(&w, 0, 5), bits(&w, 0, 5), bits(&w, 0, 4);
    bits(&w, 2, 3), bits(&w, 2, 3), bits(&w, 0, 3), bits(&w, 0, 3); /* two of length 2 */
    EXPECT_ERR(ox_inflate(w.b, bw_len(&w), out, 1), OX_E_INVALID,
               "invalid code lengths;incomplete");
    /* symbols 16, 17, 18 and 0 with lengths 2: the code is complete; then a repeat of
     * the previous length with nothing before it */
    w = (struct bw){0};
    bits(&w, 1, 1), bits(&w, 2, 2);
    bits(&w, 0, 5), bits(&w, 0, 5), bits(&w, 0, 4);
    bits(&w, 2, 3), bits(&w, 2, 3), bits(&w, 2, 3), bits(&w, 2, 3);
    huff(&w, 0, 2); /* symbol 0 (code 00) */
    huff(&w, 1, 2); /* symbol 16 */
    bits(&w, 0, 2);
    /* lengths so far: 0 then 3 more zeros, fine; a code of 138 zeros then no EOB length */
    for (int i = 0; i < 2; i++) huff(&w, 3, 2), bits(&w, 127, 7); /* 18: 138 zeros each */
    EXPECT_ERR(ox_inflate(w.b, bw_len(&w), out, 1), OX_E_INVALID, "repeat past the 258 lengths");
    w = (struct bw){0};
    bits(&w, 1, 1), bits(&w, 2, 2);
    bits(&w, 0, 5), bits(&w, 0, 5), bits(&w, 0, 4);
    bits(&w, 2, 3), bits(&w, 2, 3), bits(&w, 2, 3), bits(&w, 2, 3);
    huff(&w, 1, 2), bits(&w, 0, 2); /* 16 first */
    EXPECT_ERR(ox_inflate(w.b, bw_len(&w), out, 1), OX_E_INVALID, "no previous length");
    w = (struct bw){0};
    bits(&w, 1, 1), bits(&w, 2, 2);
    bits(&w, 0, 5), bits(&w, 0, 5), bits(&w, 0, 4);
    bits(&w, 2, 3), bits(&w, 2, 3), bits(&w, 2, 3), bits(&w, 2, 3);
    huff(&w, 3, 2), bits(&w, 127, 7); /* 138 zeros */
    huff(&w, 3, 2), bits(&w, 109, 7); /* 120 zeros: 258 lengths, all 0 */
    EXPECT_ERR(ox_inflate(w.b, bw_len(&w), out, 1), OX_E_INVALID, "no end-of-block code");
    EXPECT_ERR(ox_inflate(NULL, 0, NULL, 0), OX_E_INVALID, "input ends");

    /* CRC-32 check value of "123456789" (the catalogue's) */
    CHECK(ox_crc32((const uint8_t *)"123456789", 9) == 0xCBF43926u, "crc32 check value");
    CHECK(ox_crc32(NULL, 0) == 0, "crc32 of nothing");
}

/* ---- zip ------------------------------------------------------------------------------- */

static void test_zip(void) {
    static struct zip z;
    struct bw abc = abc_stream(0, 0);
    uint32_t abc_crc = ox_crc32((const uint8_t *)"abcabcabc", 9);
    struct zentry good[3] = {
        {"m/data.pkl", 0, "\x80\x02N.", 4, 4, ox_crc32((const uint8_t *)"\x80\x02N.", 4)},
        {"m/code/x.py", 8, abc.b, bw_len(&abc), 9, abc_crc},
        {"m/version", 0, "3\n", 2, 2, ox_crc32((const uint8_t *)"3\n", 2)},
    };
    make_zip(&z, good, 3);
    struct ox_zip *zp = NULL;
    EXPECT(ox_zip_open(z.b, z.n, "good.pt", &zp) == OX_OK);
    if (zp) {
        CHECK(strcmp(ox_zip_prefix(zp), "m/") == 0 && ox_zip_count(zp) == 3,
              "prefix m/, 3 entries");
        const struct ox_zip_entry *e = ox_zip_find(zp, "code/x.py");
        const uint8_t *d;
        size_t n;
        uint8_t *owned;
        CHECK(e && e->method == 8 && e->data_offset % 64 == 0, "deflated entry found, aligned");
        EXPECT(ox_zip_read(zp, e, &d, &n, &owned) == OX_OK);
        CHECK(n == 9 && owned && d == owned && memcmp(d, "abcabcabc", 9) == 0, "inflated entry");
        free(owned);
        e = ox_zip_find(zp, "data.pkl");
        EXPECT(e && ox_zip_read(zp, e, &d, &n, &owned) == OX_OK);
        CHECK(e && n == 4 && !owned && d == z.b + e->data_offset, "stored entry read in place");
        CHECK(!ox_zip_find(zp, "nothing") && !ox_zip_find(zp, "") && !ox_zip_entry_at(zp, 3) &&
                  !ox_zip_entry_at(zp, -1),
              "missing entries are NULL");
        ox_zip_free(zp);
    }
    ox_zip_free(NULL);

    /* a comment that holds an end record of its own (whose comment would not reach the end
     * of the file): the real one is found */
    static const uint8_t fake[] = {0x50, 0x4b, 0x05, 0x06, 0, 0, 0, 0, 9, 0, 9,   0,
                                   0,    0,    0,    0,    0, 0, 0, 0, 7, 0, '-', '-'};
    z.b[z.eocd + 20] = sizeof fake;
    wbytes(&z, fake, sizeof fake);
    EXPECT(ox_zip_open(z.b, z.n, "comment.pt", &zp) == OX_OK);
    CHECK(zp && ox_zip_count(zp) == 3, "the end record before the comment is the one used");
    ox_zip_free(zp);
    z.n -= sizeof fake;
    z.b[z.eocd + 20] = 0;

    /* every truncation fails cleanly */
    bool all = true;
    for (size_t cut = 0; cut < z.n; cut++) {
        zp = NULL;
        if (ox_zip_open(z.b, cut, "cut.pt", &zp) != OX_E_INVALID) all = false;
        ox_zip_free(zp);
    }
    CHECK(all, "every truncated copy is refused as invalid");
    EXPECT_ERR(ox_zip_open(z.b, z.n - 10, "t.pt", &zp), OX_E_INVALID, "t.pt;not a zip archive");

    /* the EOCD and zip64 EOCD pointing past the end */
    make_zip(&z, good, 3);
    set32(&z, z.eocd + 16, 0xFFFFFFF0u);
    EXPECT_ERR(ox_zip_open(z.b, z.n, "e.pt", &zp), OX_E_INVALID, "central directory;runs past");
    make_zip(&z, good, 3);
    set32(&z, z.eocd + 16, 0xFFFFFFFFu); /* saturated: the zip64 value is used */
    EXPECT(ox_zip_open(z.b, z.n, "e.pt", &zp) == OX_OK);
    ox_zip_free(zp);
    set64(&z, z.eocd64 + 48, 1ull << 40);
    EXPECT_ERR(ox_zip_open(z.b, z.n, "e.pt", &zp), OX_E_INVALID, "central directory;runs past");
    make_zip(&z, good, 3);
    set64(&z, z.eocd - 20 + 8, z.n); /* the locator */
    EXPECT_ERR(ox_zip_open(z.b, z.n, "e.pt", &zp), OX_E_INVALID, "zip64 locator");
    make_zip(&z, good, 3);
    set32(&z, z.eocd + 8, 0xFFFFFFFFu); /* entries: see the zip64 record */
    set64(&z, z.eocd64 + 24, 1000000000ull);
    set64(&z, z.eocd64 + 32, 1000000000ull);
    EXPECT_ERR(ox_zip_open(z.b, z.n, "e.pt", &zp), OX_E_INVALID, "more than the limit");
    make_zip(&z, good, 3);
    set32(&z, z.eocd + 4, 1); /* disk 1 */
    EXPECT_ERR(ox_zip_open(z.b, z.n, "e.pt", &zp), OX_E_UNSUPPORTED, "multi-disk");

    /* an entry's data past the end of the file */
    make_zip(&z, good, 3);
    set32(&z, z.cdh[2] + 20, 1u << 20), set32(&z, z.cdh[2] + 24, 1u << 20);
    EXPECT_ERR(ox_zip_open(z.b, z.n, "d.pt", &zp), OX_E_INVALID, "m/version;runs past the end");
    make_zip(&z, good, 3);
    set32(&z, z.cdh[1] + 42, (uint32_t)z.n - 10); /* local header near the end */
    EXPECT_ERR(ox_zip_open(z.b, z.n, "d.pt", &zp), OX_E_INVALID, "m/code/x.py;no local header");
    make_zip(&z, good, 3);
    z.b[z.lfh[1] + 30] = 'q'; /* the local header names another file */
    EXPECT_ERR(ox_zip_open(z.b, z.n, "d.pt", &zp), OX_E_INVALID, "local header names another");
    make_zip(&z, good, 3);
    set32(&z, z.cdh[0] + 20, 3); /* STORED with csize 3, usize 4 */
    EXPECT_ERR(ox_zip_open(z.b, z.n, "d.pt", &zp), OX_E_INVALID, "stored with 3 bytes");
    make_zip(&z, good, 3);
    z.b[z.cdh[0] + 8] |= 1; /* encrypted */
    EXPECT_ERR(ox_zip_open(z.b, z.n, "d.pt", &zp), OX_E_UNSUPPORTED, "m/data.pkl;encrypted");

    /* names: outside the folder, twice, with no folder */
    struct zentry two[2] = {good[0], good[2]};
    two[1].name = "n/version";
    make_zip(&z, two, 2);
    EXPECT_ERR(ox_zip_open(z.b, z.n, "p.pt", &zp), OX_E_INVALID,
               "'n/version' is outside the archive folder 'm/'");
    two[1].name = "m/data.pkl";
    make_zip(&z, two, 2);
    EXPECT_ERR(ox_zip_open(z.b, z.n, "p.pt", &zp), OX_E_INVALID, "'m/data.pkl' appears twice");
    two[0].name = "data.pkl";
    make_zip(&z, two, 2);
    EXPECT_ERR(ox_zip_open(z.b, z.n, "p.pt", &zp), OX_E_INVALID, "not inside an archive folder");

    /* reading: bad DEFLATE, CRC, sizes, bombs, methods */
    struct zentry one[2] = {good[0], good[1]};
    struct bw bad = abc_stream(0, 4);
    one[1].data = bad.b;
    one[1].csize = bw_len(&bad);
    const uint8_t *d;
    size_t n;
    uint8_t *owned;
    const struct ox_zip_entry *e;
#define READ_ERR(code, words)                                                                      \
    do {                                                                                           \
        make_zip(&z, one, 2);                                                                      \
        zp = NULL;                                                                                 \
        EXPECT(ox_zip_open(z.b, z.n, "r.pt", &zp) == OX_OK);                                       \
        e = zp ? ox_zip_find(zp, "code/x.py") : NULL;                                              \
        if (e) EXPECT_ERR(ox_zip_read(zp, e, &d, &n, &owned), code, words);                        \
        CHECK(!e || (!owned && !d), "nothing is returned on failure");                             \
        ox_zip_free(zp);                                                                           \
    } while (0)
    READ_ERR(OX_E_INVALID, "r.pt;m/code/x.py;distance 5 too far back");
    bad = abc_stream(286, 0);
    one[1].data = bad.b;
    READ_ERR(OX_E_INVALID, "m/code/x.py;invalid length code");
    one[1] = good[1];
    one[1].usize = 5;
    READ_ERR(OX_E_INVALID, "m/code/x.py;output longer than 5");
    one[1] = good[1];
    one[1].crc ^= 1;
    READ_ERR(OX_E_INVALID, "m/code/x.py;CRC-32 mismatch");
    one[1] = good[1];
    one[1].usize = 100000000000ull; /* 100 GB: through the zip64 extra field */
    READ_ERR(OX_E_NOMEM, "m/code/x.py;100000000000 bytes;more than the limit");
    one[1] = good[1];
    one[1].usize = 1 << 20;
    READ_ERR(OX_E_INVALID, "m/code/x.py;impossible from");
    one[1] = good[1];
    one[1].method = 12;
    READ_ERR(OX_E_UNSUPPORTED, "m/code/x.py;compression method 12");
#undef READ_ERR
}

/* ---- pickle ---------------------------------------------------------------------------- */

static ox_status load(const char *bytes, size_t n, struct ox_pickle **p, struct ox_pv **root) {
    *p = NULL;
    return ox_pickle_load((const uint8_t *)bytes, n, "t.pkl", p, root);
}

#define PK_ERR(lit, code, words)                                                                   \
    do {                                                                                           \
        struct ox_pickle *p_;                                                                      \
        struct ox_pv *r_;                                                                          \
        EXPECT_ERR(load(lit, sizeof(lit) - 1, &p_, &r_), code, words);                             \
        CHECK(!p_, "no pickle on failure");                                                        \
    } while (0)

/* The pickle's text (see put_pv); "" on failure. */
static char *pk_text(const char *bytes, size_t n) {
    struct ox_pickle *p;
    struct ox_pv *root;
    if (load(bytes, n, &p, &root) != OX_OK) {
        printf("  load failed: %s\n", ox_errmsg());
        char *e = malloc(1);
        if (e) *e = 0;
        return e;
    }
    char *t = pv_text(root);
    ox_pickle_free(p);
    return t;
}

#define PK_TEXT(lit, want)                                                                         \
    do {                                                                                           \
        char *t_ = pk_text(lit, sizeof(lit) - 1);                                                  \
        CHECK(t_ &&strcmp(t_, want) == 0, "%s: got %s, want %s", #lit, t_, want);                  \
        free(t_);                                                                                  \
    } while (0)

/* "\x80\x02" GLOBAL torch._utils _rebuild_tensor_v2 then the argument tuple */
#define K1 "K\x01"
#define REBUILD                                                                                    \
    "c"                                                                                            \
    "torch._utils\n_rebuild_tensor_v2\n("
#define STORAGE4                                                                                   \
    "(X\x07\x00\x00\x00storagec"                                                                   \
    "torch\nFloatStorage\nX\x01\x00\x00\x00"                                                       \
    "0"                                                                                            \
    "X\x03\x00\x00\x00"                                                                            \
    "cpuK\x04tQ"

/* PROTO 2, GLOBAL (the "module\nname\n" lines), a string argument, TUPLE1, REDUCE, STOP. */
static size_t call_global(char *out, const char *lines, const char *arg) {
    size_t n = 0, la = strlen(lines), lg = strlen(arg);
    memcpy(out + n,
           "\x80\x02"
           "c",
           3),
        n += 3;
    memcpy(out + n, lines, la), n += la;
    out[n++] = 'X';
    for (int i = 0; i < 4; i++) out[n++] = (char)(lg >> (8 * i) & 0xFF);
    memcpy(out + n, arg, lg), n += lg;
    memcpy(out + n, "\x85R.", 3), n += 3;
    return n;
}

static void test_pickle(const char *dir) {
    /* scalars: BINFLOAT is big-endian, LONG1 two's complement, ints signed or not */
    PK_TEXT("\x80\x02(NK\xffM\xff\xffJ\xfe\xff\xff\xff\x88\x89G\x3f\xf8\x00\x00\x00\x00\x00\x00"
            "\x8a\x08\x00\x00\x00\x00\x00\x01\x00\x00\x8a\x01\xfe\x8a\x00t.",
            "(N,I255,I65535,I-2,T,F,F1.5,I1099511627776,I-2,I0,)");
    PK_TEXT("\x80\x02X\x03\x00\x00\x00"
            "a\x00\xc3\x85.",
            "(S\"a\\x00\\xc3\",)");
    /* containers, all ways of building them, and memo references */
    PK_TEXT("\x80\x02]q\x00(K\x01K\x02"
            "eK\x03"
            "ah\x00\x86.",
            "(L#0[I1,I2,I3,],L@0,)");
    PK_TEXT("\x80\x02(K\x01K\x02l(X\x01\x00\x00\x00"
            "aK\x01"
            "d}X\x01\x00\x00\x00"
            "bNs\x87.",
            "(L#0[I1,I2,],D#1{S\"a\":I1,},D#2{S\"b\":N,},)");
    PK_TEXT("\x80\x02}(X\x01\x00\x00\x00kK\x01X\x01\x00\x00\x00kK\x02u.",
            "D#0{S\"k\":I1,S\"k\":I2,}");
    {
        struct ox_pickle *p;
        struct ox_pv *r;
        const char s[] = "\x80\x02}(X\x01\x00\x00\x00kK\x01X\x01\x00\x00\x00kK\x02u.";
        EXPECT(load(s, sizeof s - 1, &p, &r) == OX_OK);
        CHECK(p && ox_pv_get(r, "k") && ox_pv_get(r, "k")->i == 2 && !ox_pv_get(r, "x") &&
                  !ox_pv_get(NULL, "k"),
              "ox_pv_get: the later value of a key set twice; NULL when absent");
        ox_pickle_free(p);
    }
    ox_pickle_free(NULL);
    /* TorchScript globals: a module, typed lists, type tags, a tensor, a device */
    PK_TEXT("\x80\x02"
            "c__torch__.a\nM\n)\x81}(X\x01\x00\x00\x00w" REBUILD STORAGE4
            "K\x01K\x03\x85K\x01\x85\x88"
            "ccollections\nOrderedDict\n)RtR"
            "X\x01\x00\x00\x00l"
            "ctorch.jit._pickle\nbuild_intlist\n]K\x07"
            "a\x85R"
            "X\x01\x00\x00\x00t"
            "ctorch.jit._pickle\nrestore_type_tag\n}X\x07\x00\x00\x00"
            "Dict[,]\x86R"
            "X\x01\x00\x00\x00"
            "d"
            "ctorch\ndevice\nX\x06\x00\x00\x00"
            "cuda:1\x85Rub.",
            "O#0<__torch__.a.M>!D#1{S\"w\":A#2<0,float,4,cpu,1,[3,],[1,],1>,S\"l\":L#3[I7,],"
            "S\"t\":D#4t\"Dict[,]\"{},S\"d\":Vcuda:1,}");
    /* a torch.save-style OrderedDict with its _metadata state */
    PK_TEXT("\x80\x02"
            "ccollections\nOrderedDict\nq\x00)R}X\x01\x00\x00\x00mK\x01sb.",
            "D#0{}!D#1{S\"m\":I1,}");
    /* an empty tensor may sit at the end of its storage; a 0-dim one is one element */
    PK_TEXT("\x80\x02" REBUILD STORAGE4 "K\x04K\x00\x85K\x01\x85\x89NtR.",
            "A#0<0,float,4,cpu,4,[0,],[1,],0>");
    PK_TEXT("\x80\x02" REBUILD STORAGE4 "K\x03)\x29\x89NtR.", "A#0<0,float,4,cpu,3,[],[],0>");

    /* broken or hostile pickles */
    PK_ERR("\x80\x03N.", OX_E_UNSUPPORTED, "t.pkl;protocol 3");
    PK_ERR("N.", OX_E_INVALID, "PROTO 2");
    PK_ERR("\x80\x02N\xff.", OX_E_INVALID, "t.pkl;offset 3;opcode 0xff");
    PK_ERR("\x80\x02\x85.", OX_E_INVALID, "offset 2 (TUPLE1);stack underflow");
    PK_ERR("\x80\x02(R.", OX_E_INVALID, "REDUCE;stack underflow");
    PK_ERR("\x80\x02Nt.", OX_E_INVALID, "no MARK");
    PK_ERR("\x80\x02NN.", OX_E_INVALID, "STOP;2 values");
    PK_ERR("\x80\x02N", OX_E_INVALID, "without STOP");
    PK_ERR("\x80\x02j\x00\x00\x00\x80.", OX_E_INVALID, "LONG_BINGET;memo index 2147483648");
    PK_ERR("\x80\x02Nr\x00\x00\x00\x80.", OX_E_INVALID, "LONG_BINPUT;memo index 2147483648");
    PK_ERR("\x80\x02h\x05.", OX_E_INVALID, "memo index 5 was never set");
    PK_ERR("\x80\x02X\xff\xff\x00\x00"
           "abc.",
           OX_E_INVALID, "BINUNICODE;needs 65535 bytes");
    PK_ERR("\x80\x02X\xff\xff", OX_E_INVALID, "BINUNICODE;needs 4 bytes");
    PK_ERR("\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.", OX_E_UNSUPPORTED,
           "LONG1;9 bytes");
    PK_ERR("\x80\x02\x8a\x04\x01\x02", OX_E_INVALID, "LONG1;needs 5 bytes");
    PK_ERR("\x80\x02G\x3f\xf8", OX_E_INVALID, "BINFLOAT;needs 8 bytes");
    PK_ERR("\x80\x02"
           "c__torch__.x",
           OX_E_INVALID, "GLOBAL;unterminated");
    PK_ERR("\x80\x02"
           "c_\x01\nx\n.",
           OX_E_INVALID, "GLOBAL;byte 0x01");
    PK_ERR("\x80\x02"
           "ctorch._utils\n_rebuild_qtensor\n.",
           OX_E_UNSUPPORTED, "torch._utils._rebuild_qtensor;quantized");
    PK_ERR("\x80\x02"
           "ctorch\nQInt8Storage\n.",
           OX_E_UNSUPPORTED, "QInt8Storage;quantized");
    PK_ERR("\x80\x02"
           "c__torch__.torch.classes.quantized\nLinearPackedParamsBase\n.",
           OX_E_UNSUPPORTED, "__torch__.torch.classes.quantized.LinearPackedParamsBase;custom C++");
    PK_ERR("\x80\x02"
           "cbuiltins\neval\n.",
           OX_E_UNSUPPORTED, "'builtins.eval' is not allowed");
    PK_ERR("\x80\x02"
           "ctorch._utils\n_rebuild_sparse_tensor\n.",
           OX_E_UNSUPPORTED, "torch._utils._rebuild_sparse_tensor");
    PK_ERR("\x80\x02"
           "c__torch__\nM\nK\x01\x85\x81.",
           OX_E_INVALID, "NEWOBJ;no arguments");
    PK_ERR("\x80\x02"
           "c__torch__\nM\n)R.",
           OX_E_INVALID, "cannot be called");
    PK_ERR("\x80\x02"
           "K\x01K\x02"
           "b.",
           OX_E_INVALID, "BUILD;state of an int");
    PK_ERR("\x80\x02"
           "K\x01K\x02"
           "a.",
           OX_E_INVALID, "APPEND;appends to an int");
    PK_ERR("\x80\x02"
           "}(K\x01u.",
           OX_E_INVALID, "SETITEMS;odd number");
    PK_ERR("\x80\x02"
           "ctorch\nFloatStorage\nQ.",
           OX_E_INVALID, "BINPERSID;persistent id");
    PK_ERR("\x80\x02(X\x07\x00\x00\x00storagec"
           "torch\nFloatStorage\nX\x03\x00\x00\x00../"
           "X\x03\x00\x00\x00"
           "cpuK\x04tQ.",
           OX_E_INVALID, "without '/'");
    PK_ERR("\x80\x02"
           "ctorch.jit._pickle\nbuild_intlist\n]X\x00\x00\x00\x00"
           "a\x85R.",
           OX_E_INVALID, "build_intlist: item 0 is a str, not an int");
    /* a tensor view past its storage: (2, 3) with strides (3, 1) needs 6 elements of 4 */
    PK_ERR("\x80\x02" REBUILD STORAGE4 "K\x00K\x02K\x03\x86K\x03K\x01\x86\x89NtR.", OX_E_INVALID,
           "REDUCE;outside storage '0' of 4 elements");
    PK_ERR("\x80\x02" REBUILD STORAGE4 "K\x01K\x04\x85K\x01\x85\x89NtR.", OX_E_INVALID,
           "outside storage");
    PK_ERR("\x80\x02" REBUILD STORAGE4 "K\x05K\x00\x85K\x01\x85\x89NtR.", OX_E_INVALID,
           "outside storage");
    PK_ERR("\x80\x02" REBUILD STORAGE4 "K\x00J\xff\xff\xff\xff\x85K\x01\x85\x89NtR.", OX_E_INVALID,
           "outside storage");
    PK_ERR("\x80\x02" REBUILD STORAGE4 "K\x00\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x40K\x02\x86"
           "\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x40K\x01\x86\x89NtR.",
           OX_E_INVALID, "outside storage"); /* (2^62)^2 overflows */
    PK_ERR("\x80\x02" REBUILD STORAGE4 "K\x00(" K1 K1 K1 K1 K1 K1 K1 K1 K1 K1 K1 K1 K1 K1 K1 K1 K1
           "t)\x89NtR.",
           OX_E_INVALID, "at most 16");
    /* a list that holds itself; nesting deeper than the bound */
    PK_ERR("\x80\x02]q\x00h\x00"
           "a.",
           OX_E_INVALID, "holds itself");
    {
        char deep[1100];
        memcpy(deep, "\x80\x02N", 3);
        memset(deep + 3, 0x85, 1000);
        memcpy(deep + 1003, ".", 1);
        struct ox_pickle *p;
        struct ox_pv *r;
        EXPECT_ERR(load(deep, 1004, &p, &r), OX_E_INVALID, "deeper than 1000");
        deep[1002] = '.';
        EXPECT(load(deep, 1003, &p, &r) == OX_OK);
        ox_pickle_free(p);
        memset(deep + 2, '(', 1001);
        EXPECT_ERR(load(deep, 1003, &p, &r), OX_E_INVALID, "more than 1000 marks");
        memset(deep + 2, 'N', 1001);
        EXPECT_ERR(load(deep, 1003, &p, &r), OX_E_INVALID, "stack deeper than 1000");
    }

    /* a pickle that names os.system is refused before anything can run */
    char pwn[2048], cmd[1200];
    snprintf(cmd, sizeof cmd, "touch %s/pwned", dir);
    size_t k = call_global(pwn, "os\nsystem\n", cmd);
    struct ox_pickle *p;
    struct ox_pv *r;
    EXPECT_ERR(load(pwn, k, &p, &r), OX_E_UNSUPPORTED, "GLOBAL;'os.system' is not allowed");
    char path[1200];
    snprintf(path, sizeof path, "%s/pwned", dir);
    struct stat sb;
    CHECK(stat(path, &sb) != 0, "os.system was not run");
    const char *others[] = {"posix\nsystem\n", "subprocess\nPopen\n", "builtins\nexec\n",
                            "torch\nload\n", "__builtin__\neval\n"};
    for (int i = 0; i < 5; i++) {
        k = call_global(pwn, others[i], cmd);
        EXPECT_ERR(load(pwn, k, &p, &r), OX_E_UNSUPPORTED, "is not allowed");
    }

    /* every truncation of a good pickle fails cleanly */
    const char full[] =
        "\x80\x02"
        "c__torch__.a\nM\n)\x81}(X\x01\x00\x00\x00w" REBUILD STORAGE4 "K\x01K\x03\x85K\x01\x85\x88"
        "ccollections\nOrderedDict\n)RtRub.";
    bool all = true;
    for (size_t cut = 0; cut + 1 < sizeof full - 1; cut++)
        if (load(full, cut, &p, &r) != OX_E_INVALID || p) all = false;
    CHECK(all, "every truncated pickle is refused as invalid");
}

/* ---- random damage: nothing may crash (ASan/UBSan builds check the reads) ------------- */

static uint32_t rng = 12345;
static uint32_t next(void) {
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return rng;
}

static void exercise(const uint8_t *b, size_t n) {
    struct ox_zip *z = NULL;
    if (ox_zip_open(b, n, "fuzz", &z) != OX_OK) return;
    for (int i = 0; i < ox_zip_count(z); i++) {
        const uint8_t *d;
        size_t len;
        uint8_t *owned;
        const struct ox_zip_entry *e = ox_zip_entry_at(z, i);
        if (ox_zip_read(z, e, &d, &len, &owned) != OX_OK) continue;
        if (ends_with(e->name, "pkl")) {
            struct ox_pickle *p;
            struct ox_pv *r;
            if (ox_pickle_load(d, len, "fuzz", &p, &r) == OX_OK) ox_pickle_free(p);
        }
        free(owned);
    }
    ox_zip_free(z);
}

static void mutate(uint8_t *b, size_t n) {
    int flips = 1 + (int)(next() % 8);
    for (int i = 0; i < flips && n; i++) {
        uint32_t r = next();
        if (r % 4 == 0) /* a small change to a length or count */
            b[r / 4 % n] += (uint8_t)(r >> 24 & 3) - 1;
        else
            b[r / 4 % n] = (uint8_t)(r >> 24);
    }
}

/* Damaged copies of the whole archive, and of each pickle and DEFLATE record on its own. */
static void test_damage(const struct ox_zip *z, const uint8_t *archive, size_t n, int rounds) {
    uint8_t *b = malloc(n);
    if (!b) return;
    for (int r = 0; r < rounds; r++) {
        memcpy(b, archive, n);
        mutate(b, n);
        exercise(b, n);
        exercise(b, next() % n);
    }
    int n_records = 0;
    for (int i = 0; i < ox_zip_count(z); i++) {
        const struct ox_zip_entry *e = ox_zip_entry_at(z, i);
        bool pkl = ends_with(e->name, "pkl") && e->method == 0;
        if (!pkl && e->method != 8) continue;
        n_records++;
        size_t len = (size_t)e->csize;
        uint8_t *out = malloc((size_t)e->usize + 1);
        for (int r = 0; r < rounds / 4 && out; r++) {
            memcpy(b, archive + e->data_offset, len);
            mutate(b, len);
            size_t cut = next() % 4 ? len : next() % (len + 1);
            if (pkl) {
                struct ox_pickle *p;
                struct ox_pv *root;
                if (ox_pickle_load(b, cut, "fuzz", &p, &root) == OX_OK) ox_pickle_free(p);
            } else {
                (void)ox_inflate(b, cut, out, (size_t)e->usize);
            }
        }
        free(out);
    }
    free(b);
    CHECK(n_records > 0, "%d damaged copies of the archive and of %d records handled", rounds,
          n_records);
}

/* ---- the torch 2.11 archives ----------------------------------------------------------- */

/* want_root: the root object's class, or (for a torch.save state dict) a key of the root
 * dict that holds a tensor. */
static void test_fixture(const char *dir, const char *file, const char *want_prefix,
                         const char *want_root, bool has_deflated) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    size_t len;
    uint8_t *buf = slurp(path, &len);
    CHECK(buf, "%s: cannot read", path);
    if (!buf) return;
    struct ox_zip *z = NULL;
    EXPECT(ox_zip_open(buf, len, file, &z) == OX_OK);
    if (!z) {
        free(buf);
        return;
    }
    CHECK(strcmp(ox_zip_prefix(z), want_prefix) == 0, "%s: prefix %s, want %s", file,
          ox_zip_prefix(z), want_prefix);
    int n_read = 0, n_deflated = 0, n_unaligned = 0;
    for (int i = 0; i < ox_zip_count(z); i++) {
        const struct ox_zip_entry *e = ox_zip_entry_at(z, i);
        const uint8_t *d;
        size_t n;
        uint8_t *owned;
        ox_status st = ox_zip_read(z, e, &d, &n, &owned);
        CHECK(st == OX_OK && n == e->usize, "%s: %s: %s", file, e->name, ox_errmsg());
        if (st) continue;
        n_read++;
        n_deflated += e->method == 8;
        n_unaligned += e->data_offset % 64 != 0; /* §1.2: every record's data is aligned */
        if (e->method == 0)
            CHECK(ox_crc32(d, n) == e->crc32, "%s: %s: CRC of the stored bytes", file, e->name);
        free(owned);
    }
    CHECK(n_read == ox_zip_count(z) && (n_deflated > 0) == has_deflated && n_unaligned == 0,
          "%s: %d of %d entries read, %d deflated, %d unaligned", file, n_read, ox_zip_count(z),
          n_deflated, n_unaligned);
    const struct ox_zip_entry *e = ox_zip_find(z, "data.pkl");
    const uint8_t *d;
    size_t n;
    uint8_t *owned;
    CHECK(e && ox_zip_read(z, e, &d, &n, &owned) == OX_OK, "%s: data.pkl", file);
    if (e) {
        struct ox_pickle *p = NULL;
        struct ox_pv *root;
        EXPECT(ox_pickle_load(d, n, file, &p, &root) == OX_OK);
        if (p) {
            bool ok = want_root[0] == '_'
                          ? root->kind == OX_PV_OBJECT && strcmp(root->cls, want_root) == 0 &&
                                root->state && root->state->kind == OX_PV_DICT
                          : root->kind == OX_PV_DICT && ox_pv_get(root, want_root) &&
                                ox_pv_get(root, want_root)->kind == OX_PV_TENSOR;
            CHECK(ok, "%s: data.pkl root is %s", file, want_root);
            ox_pickle_free(p);
        }
    }
    test_damage(z, buf, len, 2000);
    ox_zip_free(z);
    free(buf);
}

static void test_fixtures(const char *dir) {
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        printf("note: %s is absent: the torch 2.11 archives are skipped\n", dir);
        return;
    }
    test_fixture(dir, "mlp_traced.pt", "mlp_traced/", "__torch__.MLP", true);
    test_fixture(dir, "mlp_scripted.pt", "mlp_scripted/", "__torch__.___torch_mangle_4.MLP", true);
    test_fixture(dir, "smallcnn_traced.pt", "smallcnn_traced/", "__torch__.CNN", true);
    test_fixture(dir, "lstm_traced.pt", "lstm_traced/", "__torch__.LN", true);
    test_fixture(dir, "control_scripted.pt", "control_scripted/", "__torch__.Control", true);
    test_fixture(dir, "my.model.v1.pt", "my.model.v1/",
                 "__torch__.torch.nn.modules.linear.___torch_mangle_340.Linear", true);
    test_fixture(dir, "saved_to_buffer.pt", "archive/",
                 "__torch__.torch.nn.modules.linear.___torch_mangle_340.Linear", true);
    test_fixture(dir, "transformer_enc_traced.pt", "transformer_enc_traced/",
                 "__torch__.torch.nn.modules.transformer.TransformerEncoderLayer", true);
    test_fixture(dir, "state_dict_torchsave.pt", "state_dict_torchsave/", "weight", false);
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--dump") == 0) return dump(argv[2], argv[3]);
    const char *dir = argc > 1 ? argv[1] : "test_torchscript_container.tmp";
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    if (system(cmd) != 0) return 2;
    /* the damage loops allocate and free in a tight loop: keep glibc from giving the heap
     * back to the kernel each time (brk costs a TLB flush, slow in virtual machines) */
    mallopt(M_TRIM_THRESHOLD, 256 << 20);

    test_inflate();
    test_zip();
    test_pickle(dir);
    /* the fixtures sit beside the checkout: <checkout>/../shared/torchscript/torch-2.11 */
    char fixtures[2048];
    if (argc > 2) {
        snprintf(fixtures, sizeof fixtures, "%s", argv[2]);
    } else {
        snprintf(fixtures, sizeof fixtures, "%s", __FILE__);
        char *s = strrchr(fixtures, '/');
        if (s) *s = 0; /* tests */
        s = strrchr(fixtures, '/');
        if (s) *s = 0; /* the checkout */
        size_t l = strlen(fixtures);
        snprintf(fixtures + l, sizeof fixtures - l, "/../shared/torchscript/torch-2.11");
    }
    test_fixtures(fixtures);

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) return 2;
    return harness_finish();
}
