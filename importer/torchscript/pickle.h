/* The pickle machine for what torch.jit.save writes (SPEC-torchscript.md §2): protocol 2,
 * the opcodes of §2.1 plus LIST, DICT, APPEND, SETITEM, and only the globals of §2.2. It
 * never runs anything: a GLOBAL outside the list fails with its name. Memo entries are
 * references (shared storages and tied tensors stay shared).
 *
 *     struct ox_pickle *p;
 *     struct ox_pv *root;
 *     if (ox_pickle_load(bytes, n, "model.pt: data.pkl", &p, &root) != OX_OK) ...
 *     ... root->kind == OX_PV_OBJECT, root->cls "__torch__.MLP", root->state a DICT ...
 *     ox_pickle_free(p);    // every ox_pv of this load
 *
 * Ownership: all values (and their strings) live in the pickle's arena, freed by
 * ox_pickle_free; the input bytes are only read during the call.
 */
#ifndef OX_IMPORTER_TORCHSCRIPT_PICKLE_H
#define OX_IMPORTER_TORCHSCRIPT_PICKLE_H

#include "graph/ir.h"

#define OX_PICKLE_MAX_MEMO  (1 << 24)         /* memo index bound */
#define OX_PICKLE_MAX_DEPTH 1000              /* stack depth and nesting of values */
#define OX_PICKLE_MAX_BYTES ((size_t)1 << 30) /* memory for the values of one load */

typedef enum {
    OX_PV_NONE,
    OX_PV_BOOL,
    OX_PV_INT,
    OX_PV_FLOAT,
    OX_PV_STR,     /* s, s_len (UTF-8, may hold NUL) */
    OX_PV_TUPLE,   /* items[n] */
    OX_PV_LIST,    /* items[n] (build_*list and restore_type_tag unwrapped) */
    OX_PV_DICT,    /* items[2n]: key0, value0, key1, value1, ... in insertion order (a key set
                      twice is there twice); state: an OrderedDict's BUILD argument or NULL */
    OX_PV_OBJECT,  /* cls: "__torch__.a.b.Name"; state: the BUILD argument (a DICT for modules) */
    OX_PV_TENSOR,  /* tensor: a view of a storage (see struct ox_pv_tensor) */
    OX_PV_STORAGE, /* the result of a persistent load: tensor.storage (key, dtype, numel) */
    OX_PV_DEVICE,  /* s: "cpu", "cuda:0" */
    OX_PV_GLOBAL,  /* s: "module.name" of an allowed global not yet applied (a class) */
} ox_pv_kind;

struct ox_pv_storage {
    const char *key;      /* "0", "1", ...: record data/<key> (or constants/<key>) */
    ox_dtype dtype;       /* from the <X>Storage class (§2.4) */
    int64_t numel;        /* elements (not bytes) */
    const char *location; /* "cpu", ... */
};

/* The view lies inside its storage: sizes and strides >= 0, and offset + sum((size - 1) *
 * stride) < numel when no size is 0 (offset <= numel otherwise). */
struct ox_pv_tensor {
    struct ox_pv_storage storage;
    int64_t offset; /* storage_offset, in elements */
    int rank;
    int64_t size[OX_MAX_RANK], stride[OX_MAX_RANK]; /* strides in elements */
    bool requires_grad;
};

struct ox_pv {
    ox_pv_kind kind;
    bool b;
    int64_t i;
    double f;
    const char *s;
    size_t s_len;
    int n;
    struct ox_pv **items;
    const char *cls;     /* OBJECT */
    struct ox_pv *state; /* OBJECT: the BUILD state, NULL before BUILD */
    struct ox_pv_tensor tensor;
    const char *type_tag; /* restore_type_tag's type string, when the value had one */
};

struct ox_pickle;

/* Run the pickle in buf[0..len). `what` prefixes messages ("m.pt: data.pkl"). Errors:
 * OX_E_INVALID (malformed: bad opcode, stack underflow, bad memo index, lengths past the
 * end, a tensor view outside its storage, a value that holds itself), OX_E_UNSUPPORTED
 * (protocol other than 2, a global outside the allowed list: the message names it, e.g. a
 * quantized tensor or a custom C++ class; an integer beyond 64 bits), OX_E_NOMEM (also past
 * OX_PICKLE_MAX_BYTES). */
ox_status ox_pickle_load(const uint8_t *buf, size_t len, const char *what, struct ox_pickle **out,
                         struct ox_pv **root);
/* The same with a string length limit (lim->string_length; NULL or 0: the default): a longer
 * string fails with OX_E_LIMIT. */
ox_status ox_pickle_load_with(const uint8_t *buf, size_t len, const char *what,
                              const ox_limits *lim, struct ox_pickle **out, struct ox_pv **root);
void ox_pickle_free(struct ox_pickle *p);
/* Dict lookup by string key (NULL if absent or d is not a DICT); of a key set twice, the
 * later value, as in Python. */
struct ox_pv *ox_pv_get(const struct ox_pv *d, const char *key);

#endif
