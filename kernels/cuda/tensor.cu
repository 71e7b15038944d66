/* CUDA kernels of the tensor family (kernels/cuda/tensor.def): Transpose, Concat, Split,
 * Slice, Gather, GatherElements, ScatterElements (and opset 9's Scatter), ScatterND, Pad, Tile,
 * DepthToSpace, SpaceToDepth, Resize and Trilu.
 *
 * They only move elements, so they serve every element type by its size: 1, 2, 4 or 8
 * bytes moved as an unsigned integer of that width (strings and other sizes go to the CPU).
 * Resize's linear mode and the scatters' reductions are the ones that compute: Resize takes
 * float, float16, bfloat16 and double, the reductions float, float16, bfloat16, int32 and
 * int64.
 *
 * prepare() does all the shape work once, following the CPU kernels of kernels/cpu/tensor.c
 * and kernels/cpu/resize.c, and checks that it arrives at the output shape the CPU's infer
 * chose (any disagreement is left to the CPU). Inputs whose values shape the work (Slice's
 * starts/ends/axes/steps, Pad's pads and axes, Split's sizes, Trilu's k, Resize's scales and
 * sizes) are read there, and only when constant. run() launches from that state:
 *
 * - Most ops are one "view" copy: the output is contiguous and element i of it comes from
 *   the input at base + sum(i_d * stride_d) (strides of any sign, 0 for a repeat). Size-1
 *   dims are dropped and dims the source walks contiguously are merged (as the CPU's
 *   strided_copy does); when the innermost dim is contiguous on both sides, elements are
 *   moved up to 16 bytes at a time where alignment allows.
 * - Transpose first merges the input dims that stay adjacent in the output, which turns most
 *   permutations into a batched 2-D or 3-D one. When the innermost dim moves (and both dims
 *   of the tile are at least 8 long), a 32x32 tile goes through shared memory so that reads
 *   and writes are both coalesced (attention's [B,S,H,D] <-> [B,H,D,S]); when it stays, the
 *   view copy moves whole rows.
 * - Concat and Split copy one block of rows per input (output) with a pitched row copy.
 * - Gather, GatherElements, Pad, Resize and Trilu have their own index kernels; Gather and
 *   GatherElements read the indices on the device and write zeros for an index out of range
 *   (the CPU reports an error there).
 *
 * Index arithmetic is 32-bit when the element count allows (dividing by magic numbers, see
 * tn_div) and 64-bit otherwise; offsets are always 64-bit. Every kernel is a grid-stride
 * loop.
 */
#include "kernels/cuda/cuda.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

#define TN_MAX_DIMS  (2 * OX_MAX_RANK) /* Tile's view: a repeat and a dim per axis */
#define TN_TILE      32                /* transpose tile side */
#define TN_TILE_ROWS 8                 /* rows of threads per transpose tile */

/* ---- element types and launch helpers -------------------------------------------------- */

/* Bytes per element of a type that is only moved: 1, 2, 4 or 8; 0 for strings (pointers on
 * the host) and other sizes. */
static size_t move_size(ox_dtype dt) {
    if (dt == OX_STRING) return 0;
    size_t es = ox_dtype_size(dt);
    return es == 1 || es == 2 || es == 4 || es == 8 ? es : 0;
}

/* f(T()) with T the unsigned type of w bytes: 1, 2, 4 or 8 (an element), or 16 (uint4, for
 * copies that move several elements at once). */
template <typename F> static void with_width(size_t w, F f) {
    switch (w) {
    case 1: f(uint8_t()); break;
    case 2: f(uint16_t()); break;
    case 4: f(uint32_t()); break;
    case 8: f(uint64_t()); break;
    default: f(uint4()); break;
    }
}

/* The same for one element of es bytes (1, 2, 4 or 8). */
template <typename F> static void with_elem(size_t es, F f) {
    switch (es) {
    case 1: f(uint8_t()); break;
    case 2: f(uint16_t()); break;
    case 4: f(uint32_t()); break;
    default: f(uint64_t()); break;
    }
}

/* f(I()) with I the index type for n items: 32-bit below 2^31 (a grid-stride step then
 * cannot wrap), else 64-bit. */
template <typename F> static void with_index(int64_t n, F f) {
    if (n < INT32_MAX)
        f(uint32_t());
    else
        f(uint64_t());
}

#define TN_THREADS 256

/* The first item of this thread and the grid's stride, for a grid-stride loop. */
template <typename I> __device__ static inline I first_item() {
    return (I)blockIdx.x * blockDim.x + threadIdx.x;
}
template <typename I> __device__ static inline I grid_step() {
    return (I)gridDim.x * blockDim.x;
}

/* A divisor for the index kernels. With 32-bit indices (n < 2^31) the quotient is
 * (umulhi(n, m) + n) >> s, magic numbers that spare an integer division per dim (the
 * round-up method of Granlund and Montgomery); 64-bit indices divide by d. */
struct tn_div {
    int64_t d;
    uint32_t m, s;
};

static tn_div div_make(int64_t d) {
    tn_div v = {d, 0, 0};
    if (d < 1 || d > INT32_MAX) return v;
    while (((int64_t)1 << v.s) < d) v.s++;
    v.m =
        (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << v.s) - (uint64_t)d)) / (uint64_t)d + 1);
    return v;
}

__device__ static inline uint32_t div_q(uint32_t n, const tn_div &v) {
    return (__umulhi(n, v.m) + n) >> v.s;
}
__device__ static inline uint64_t div_q(uint64_t n, const tn_div &v) {
    return n / (uint64_t)v.d;
}

/* q / v into q, returning q % v. */
template <typename I> __device__ static inline I div_step(I &q, const tn_div &v) {
    I quot = div_q(q, v), rem = q - quot * (I)v.d;
    q = quot;
    return rem;
}

static bool aligned(const void *p, size_t w) {
    return (uintptr_t)p % w == 0;
}

static void tn_strides(int rank, const int64_t *dims, int64_t *st) {
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        st[i] = s;
        s *= dims[i];
    }
}

static int64_t tn_prod(const int64_t *dims, int from, int to) {
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= dims[i];
    return p;
}

static bool same_dims(const ox_tensor *t, int rank, const int64_t *dims) {
    if (t->rank != rank) return false;
    for (int d = 0; d < rank; d++)
        if (t->dims[d] != dims[d]) return false;
    return true;
}

/* Normalise an axis into [0, rank); false when out of range. */
static bool tn_axis(int64_t axis, int rank, int *out) {
    int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank) return false;
    *out = (int)a;
    return true;
}

/* State that is one malloc'ed block. */
void ox_cu_tn_release(void *state) {
    free(state);
}

static ox_status keep_state(void **state, const void *s, size_t bytes) {
    void *p = malloc(bytes);
    if (!p) return ox_err(OX_E_NOMEM, "out of memory");
    memcpy(p, s, bytes);
    *state = p;
    return OX_OK;
}

/* ---- constant inputs read on the host -------------------------------------------------- */

/* A small input's values copied to the host: t is the input with data at buf. */
struct tn_host {
    ox_tensor t;
    uint64_t buf[64];
};

/* Input i into h. An empty input needs no data; any other must be constant (its bit set in
 * const_inputs) and fit buf. OX_E_UNSUPPORTED otherwise. */
static ox_status host_input(const ox_tensor *const *in, int i, unsigned const_inputs,
                            struct tn_host *h) {
    const ox_tensor *t = in[i];
    memset(&h->t, 0, sizeof h->t);
    h->t.dtype = t->dtype;
    h->t.rank = t->rank;
    memcpy(h->t.dims, t->dims, sizeof h->t.dims);
    h->t.data = h->buf;
    size_t es = ox_dtype_size(t->dtype);
    int64_t cnt = ox_tensor_numel(t);
    if (t->dtype == OX_STRING || es == 0) return OX_E_UNSUPPORTED;
    if (cnt == 0) return OX_OK;
    if (i >= 32 || !((const_inputs >> i) & 1u) || !t->data || cnt > (int64_t)(sizeof h->buf / es))
        return OX_E_UNSUPPORTED;
    return ox_cu_check(cudaMemcpy(h->buf, t->data, (size_t)cnt * es, cudaMemcpyDeviceToHost),
                       "reading a constant input");
}

/* An integer list from a host copy: at most max values, else OX_E_UNSUPPORTED. */
static ox_status host_ints(const struct tn_host *h, int64_t *out, int64_t max, int64_t *cnt) {
    int64_t k = ox_tensor_numel(&h->t);
    *cnt = 0;
    if (!ox_dtype_is_int(h->t.dtype) || k > max) return OX_E_UNSUPPORTED;
    for (int64_t i = 0; i < k; i++) out[i] = ox_get_i64(&h->t, i);
    *cnt = k;
    return OX_OK;
}

/* Input i (present) as an integer list, read when constant. */
static ox_status const_ints(const ox_tensor *const *in, int i, unsigned const_inputs, int64_t *out,
                            int64_t max, int64_t *cnt) {
    struct tn_host h;
    ox_status st = host_input(in, i, const_inputs, &h);
    if (st) return st;
    return host_ints(&h, out, max, cnt);
}

/* An integer list attribute: count (-1 when absent), OX_E_UNSUPPORTED past max. */
static ox_status attr_list(const struct ox_node *n, const char *name, int64_t *out, int max,
                           int64_t *cnt) {
    const int64_t *v;
    int c = ox_attr_ints(n, name, &v);
    *cnt = c;
    if (c > max) return OX_E_UNSUPPORTED;
    for (int i = 0; i < c; i++) out[i] = v[i];
    return OX_OK;
}

/* ---- view copy ------------------------------------------------------------------------- */

/* dst[i] = src[base + sum_d i_d * st[d]] for the contiguous dst of dims[0..rank). */
struct tn_view {
    int rank;
    int64_t dims[TN_MAX_DIMS];
    int64_t st[TN_MAX_DIMS];
    int64_t base; /* elements */
    int64_t n;    /* elements of dst */
};

/* The view of dims/st with size-1 dims dropped and dims the source walks contiguously
 * merged (st[prev] == st[i] * dims[i]). */
static void view_make(struct tn_view *v, int rank, const int64_t *dims, const int64_t *st,
                      int64_t base) {
    memset(v, 0, sizeof *v);
    v->base = base;
    v->n = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] == 0) {
            v->n = 0;
            v->rank = 0;
            return;
        }
        if (dims[i] == 1) continue;
        v->n *= dims[i];
        int r = v->rank;
        if (r > 0 && v->st[r - 1] == st[i] * dims[i]) {
            v->dims[r - 1] *= dims[i];
            v->st[r - 1] = st[i];
            continue;
        }
        v->dims[r] = dims[i];
        v->st[r] = st[i];
        v->rank = r + 1;
    }
}

/* A view as the kernel takes it. */
struct view_args {
    int rank;
    tn_div dims[TN_MAX_DIMS];
    int64_t st[TN_MAX_DIMS];
};

template <typename T, typename I>
__global__ static void view_kernel(T *__restrict__ y, const T *__restrict__ x, view_args v, I n) {
    for (I i = first_item<I>(); i < n; i += grid_step<I>()) {
        I q = i;
        int64_t off = 0;
        for (int d = v.rank - 1; d > 0; d--) off += (int64_t)div_step(q, v.dims[d]) * v.st[d];
        off += (int64_t)q * v.st[0];
        y[i] = x[off];
    }
}

/* Launch the copy of view v0 from src into dst (elements of es bytes). */
static ox_status view_copy(struct ox_cuda_ctx *c, const struct tn_view *v0, void *dst,
                           const void *src, size_t es, const char *what) {
    if (v0->n == 0) return OX_OK;
    const char *s = (const char *)src + v0->base * (int64_t)es;
    if (v0->rank == 0 || (v0->rank == 1 && v0->st[0] == 1))
        return ox_cu_check(
            cudaMemcpyAsync(dst, s, (size_t)v0->n * es, cudaMemcpyDeviceToDevice, c->stream), what);
    struct tn_view v = *v0;
    int L = v.rank - 1;
    size_t w = es;
    /* a contiguous innermost dim moves in the widest units that every row start allows */
    for (size_t cand = 16; v.st[L] == 1 && cand > es; cand /= 2) {
        bool ok = (v.dims[L] * (int64_t)es) % (int64_t)cand == 0 && aligned(dst, cand) &&
                  aligned(s, cand);
        for (int d = 0; ok && d < L; d++) ok = (v.st[d] * (int64_t)es) % (int64_t)cand == 0;
        if (ok) {
            w = cand;
            break;
        }
    }
    if (w > es) {
        int64_t k = (int64_t)(w / es);
        v.dims[L] /= k;
        for (int d = 0; d < L; d++) v.st[d] /= k;
        v.n /= k;
    }
    view_args a;
    a.rank = v.rank;
    for (int d = 0; d < v.rank; d++) a.dims[d] = div_make(v.dims[d]), a.st[d] = v.st[d];
    with_width(w, [&](auto t) {
        using T = decltype(t);
        with_index(v.n, [&](auto ix) {
            using I = decltype(ix);
            view_kernel<T, I><<<ox_cu_blocks(v.n), TN_THREADS, 0, c->stream>>>(
                (T *)dst, (const T *)s, a, (I)v.n);
        });
    });
    return ox_cu_launched(what);
}

/* ---- pitched row copy ------------------------------------------------------------------ */

template <typename T, typename I>
__global__ static void rows_kernel(T *__restrict__ y, int64_t dp, const T *__restrict__ x,
                                   int64_t sp, tn_div width, I n) {
    for (I i = first_item<I>(); i < n; i += grid_step<I>()) {
        I r = i, col = div_step(r, width);
        y[(int64_t)r * dp + col] = x[(int64_t)r * sp + col];
    }
}

/* rows rows of width bytes from src (pitch sp bytes) to dst (pitch dp bytes). */
static ox_status rows_copy(struct ox_cuda_ctx *c, void *dst, int64_t dp, const void *src,
                           int64_t sp, int64_t width, int64_t rows, const char *what) {
    if (width == 0 || rows == 0) return OX_OK;
    if (rows == 1 || (dp == width && sp == width))
        return ox_cu_check(
            cudaMemcpyAsync(dst, src, (size_t)(width * rows), cudaMemcpyDeviceToDevice, c->stream),
            what);
    size_t w = 16;
    while (w > 1 && (width % (int64_t)w || dp % (int64_t)w || sp % (int64_t)w || !aligned(dst, w) ||
                     !aligned(src, w)))
        w /= 2;
    int64_t wd = width / (int64_t)w, n = wd * rows;
    with_width(w, [&](auto t) {
        using T = decltype(t);
        with_index(n, [&](auto ix) {
            using I = decltype(ix);
            rows_kernel<T, I><<<ox_cu_blocks(n), TN_THREADS, 0, c->stream>>>(
                (T *)dst, dp / (int64_t)w, (const T *)src, sp / (int64_t)w, div_make(wd), (I)n);
        });
    });
    return ox_cu_launched(what);
}

/* ---- Transpose ------------------------------------------------------------------------- */

/* A batch of 2-D transposes: input element (row, col) of batch item b, at
 * in_off(b) + row * in_rs + col, goes to out_off(b) + col * out_cs + row. */
struct tr_args {
    int nb; /* batch dims */
    int64_t bdims[OX_MAX_RANK], bin[OX_MAX_RANK], bout[OX_MAX_RANK];
    int64_t rows, cols, in_rs, out_cs;
    int64_t tiles_r, tiles_c, n_tiles;
};

/* One tile per block and loop step: tiles by column, then row, then batch item. */
template <typename T>
__global__ static void transpose_tiled(T *__restrict__ y, const T *__restrict__ x, tr_args a) {
    __shared__ T tile[TN_TILE][TN_TILE + 1];
    for (int64_t t = blockIdx.x; t < a.n_tiles; t += gridDim.x) {
        int64_t tc = t % a.tiles_c, rest = t / a.tiles_c;
        int64_t tr = rest % a.tiles_r, b = rest / a.tiles_r;
        int64_t xo = 0, yo = 0;
        for (int d = a.nb - 1; d >= 0; d--) {
            int64_t k = b % a.bdims[d];
            b /= a.bdims[d];
            xo += k * a.bin[d];
            yo += k * a.bout[d];
        }
        int64_t r0 = tr * TN_TILE, c0 = tc * TN_TILE;
        int64_t col = c0 + threadIdx.x;
        for (int k = threadIdx.y; k < TN_TILE; k += TN_TILE_ROWS) {
            int64_t row = r0 + k;
            if (row < a.rows && col < a.cols) tile[k][threadIdx.x] = x[xo + row * a.in_rs + col];
        }
        __syncthreads();
        int64_t row = r0 + threadIdx.x;
        for (int k = threadIdx.y; k < TN_TILE; k += TN_TILE_ROWS) {
            int64_t oc = c0 + k;
            if (oc < a.cols && row < a.rows) y[yo + oc * a.out_cs + row] = tile[threadIdx.x][k];
        }
        __syncthreads();
    }
}

struct tn_transpose {
    bool tiled;
    size_t es;
    struct tn_view view;
    struct tr_args tr;
};

ox_status ox_cu_tn_prepare_transpose(struct ox_cuda_ctx *c, const struct ox_node *n,
                                     const ox_tensor *const *in, ox_tensor *const *out,
                                     unsigned const_inputs, void **state, size_t *workspace) {
    (void)c, (void)const_inputs, (void)workspace;
    const ox_tensor *x = in[0];
    int r = x->rank;
    struct tn_transpose s;
    memset(&s, 0, sizeof s);
    s.es = move_size(x->dtype);
    if (!s.es || out[0]->dtype != x->dtype) return OX_E_UNSUPPORTED;
    /* the permutation, as the CPU reads it */
    int perm[OX_MAX_RANK];
    int64_t p[OX_MAX_RANK], k;
    if (attr_list(n, "perm", p, OX_MAX_RANK, &k)) return OX_E_UNSUPPORTED;
    if (k < 0) {
        for (int i = 0; i < r; i++) perm[i] = r - 1 - i;
    } else {
        if (k != r) return OX_E_UNSUPPORTED;
        bool seen[OX_MAX_RANK] = {false};
        for (int i = 0; i < r; i++) {
            if (p[i] < 0 || p[i] >= r || seen[p[i]]) return OX_E_UNSUPPORTED;
            seen[p[i]] = true;
            perm[i] = (int)p[i];
        }
    }
    int64_t odims[OX_MAX_RANK];
    for (int i = 0; i < r; i++) odims[i] = x->dims[perm[i]];
    if (!same_dims(out[0], r, odims)) return OX_E_UNSUPPORTED;
    if (ox_tensor_numel(x) == 0) return keep_state(state, &s, sizeof s);

    /* drop size-1 dims: d1 are the input dims left, p1 the output order over them */
    int map[OX_MAX_RANK], r1 = 0, p1[OX_MAX_RANK], k1 = 0;
    int64_t d1[OX_MAX_RANK];
    for (int i = 0; i < r; i++) {
        map[i] = x->dims[i] != 1 ? r1 : -1;
        if (x->dims[i] != 1) d1[r1++] = x->dims[i];
    }
    for (int i = 0; i < r; i++)
        if (map[perm[i]] >= 0) p1[k1++] = map[perm[i]];
    /* merge runs of input dims that stay adjacent and in order in the output: group g (in
     * output order) is input dims first[g] .. first[g] + len[g] - 1 */
    int ng = 0, first[OX_MAX_RANK];
    int64_t gsize[OX_MAX_RANK];
    for (int i = 0; i < r1;) {
        int j = i;
        while (j + 1 < r1 && p1[j + 1] == p1[j] + 1) j++;
        first[ng] = p1[i];
        gsize[ng] = tn_prod(d1, p1[i], p1[j] + 1);
        ng++;
        i = j + 1;
    }
    /* the merged problem: input dims rd (input order), output dim g is input dim rp[g] */
    int rp[OX_MAX_RANK];
    int64_t rd[OX_MAX_RANK], ist[OX_MAX_RANK], ost[OX_MAX_RANK], od[OX_MAX_RANK];
    for (int g = 0; g < ng; g++) {
        int pos = 0;
        for (int h = 0; h < ng; h++) pos += first[h] < first[g];
        rp[g] = pos;
        rd[pos] = gsize[g];
    }
    tn_strides(ng, rd, ist);
    for (int g = 0; g < ng; g++) od[g] = rd[rp[g]];
    tn_strides(ng, od, ost);

    int64_t vst[OX_MAX_RANK];
    for (int g = 0; g < ng; g++) vst[g] = ist[rp[g]];
    int L = ng - 1;
    if (ng >= 2 && rp[L] != L) {
        int a = rp[L], q = 0; /* output dim L is input dim a; input dim L is output dim q */
        while (rp[q] != L) q++;
        if (rd[a] >= 8 && rd[L] >= 8) {
            struct tr_args *t = &s.tr;
            s.tiled = true;
            for (int g = 0; g < ng; g++) {
                if (g == q || g == L) continue;
                t->bdims[t->nb] = od[g];
                t->bin[t->nb] = ist[rp[g]];
                t->bout[t->nb] = ost[g];
                t->nb++;
            }
            t->rows = rd[a];
            t->in_rs = ist[a];
            t->cols = rd[L];
            t->out_cs = ost[q];
            t->tiles_r = (t->rows + TN_TILE - 1) / TN_TILE;
            t->tiles_c = (t->cols + TN_TILE - 1) / TN_TILE;
            t->n_tiles = t->tiles_r * t->tiles_c * tn_prod(t->bdims, 0, t->nb);
        }
    }
    if (!s.tiled) view_make(&s.view, ng, od, vst, 0);
    return keep_state(state, &s, sizeof s);
}

ox_status ox_cu_tn_transpose(struct ox_cuda_ctx *c, const struct ox_node *n,
                             const ox_tensor *const *in, ox_tensor *const *out) {
    (void)n;
    const struct tn_transpose *s = (const struct tn_transpose *)c->state;
    if (ox_tensor_numel(in[0]) == 0) return OX_OK;
    if (!s->tiled) return view_copy(c, &s->view, out[0]->data, in[0]->data, s->es, "Transpose");
    int64_t blocks = s->tr.n_tiles < (1 << 22) ? s->tr.n_tiles : (1 << 22);
    dim3 threads(TN_TILE, TN_TILE_ROWS);
    with_elem(s->es, [&](auto t) {
        using T = decltype(t);
        transpose_tiled<T><<<(unsigned)blocks, threads, 0, c->stream>>>(
            (T *)out[0]->data, (const T *)in[0]->data, s->tr);
    });
    return ox_cu_launched("Transpose");
}

/* ---- Concat ---------------------------------------------------------------------------- */

struct tn_concat {
    int axis;
    size_t es;
    int64_t outer, inner;
};

ox_status ox_cu_tn_prepare_concat(struct ox_cuda_ctx *c, const struct ox_node *n,
                                  const ox_tensor *const *in, ox_tensor *const *out,
                                  unsigned const_inputs, void **state, size_t *workspace) {
    (void)c, (void)const_inputs, (void)workspace;
    if (n->n_inputs < 1) return OX_E_UNSUPPORTED;
    const ox_tensor *x = in[0];
    struct tn_concat s;
    s.es = move_size(x->dtype);
    if (!s.es || x->rank < 1 || out[0]->dtype != x->dtype) return OX_E_UNSUPPORTED;
    if (!ox_node_attr(n, "axis") && n->opset >= 4) return OX_E_UNSUPPORTED;
    int64_t ax = ox_attr_int(n, "axis", 1);
    if ((ax < 0 && n->opset < 11) || !tn_axis(ax, x->rank, &s.axis)) return OX_E_UNSUPPORTED;
    int64_t dims[OX_MAX_RANK];
    memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
    dims[s.axis] = 0;
    for (int i = 0; i < n->n_inputs; i++) {
        const ox_tensor *t = in[i];
        if (!t || t->dtype != x->dtype || t->rank != x->rank) return OX_E_UNSUPPORTED;
        for (int d = 0; d < x->rank; d++)
            if (d != s.axis && t->dims[d] != x->dims[d]) return OX_E_UNSUPPORTED;
        dims[s.axis] += t->dims[s.axis];
    }
    if (!same_dims(out[0], x->rank, dims)) return OX_E_UNSUPPORTED;
    s.outer = tn_prod(x->dims, 0, s.axis);
    s.inner = tn_prod(x->dims, s.axis + 1, x->rank);
    return keep_state(state, &s, sizeof s);
}

ox_status ox_cu_tn_concat(struct ox_cuda_ctx *c, const struct ox_node *n,
                          const ox_tensor *const *in, ox_tensor *const *out) {
    const struct tn_concat *s = (const struct tn_concat *)c->state;
    int64_t es = (int64_t)s->es, row = out[0]->dims[s->axis] * s->inner * es, at = 0;
    for (int i = 0; i < n->n_inputs; i++) {
        int64_t blk = in[i]->dims[s->axis] * s->inner * es;
        ox_status st =
            rows_copy(c, (char *)out[0]->data + at, row, in[i]->data, blk, blk, s->outer, "Concat");
        if (st) return st;
        at += blk;
    }
    return OX_OK;
}

/* ---- Split ----------------------------------------------------------------------------- */

struct tn_split {
    int axis;
    size_t es;
    int64_t outer, inner, dim;
    int n_sizes;
    int64_t sizes[]; /* along the axis, one per output */
};

ox_status ox_cu_tn_prepare_split(struct ox_cuda_ctx *c, const struct ox_node *n,
                                 const ox_tensor *const *in, ox_tensor *const *out,
                                 unsigned const_inputs, void **state, size_t *workspace) {
    (void)c, (void)workspace;
    const ox_tensor *x = in[0];
    int no = n->n_outputs, axis;
    size_t es = move_size(x->dtype);
    if (!es || no < 1 || !tn_axis(ox_attr_int(n, "axis", 0), x->rank, &axis))
        return OX_E_UNSUPPORTED;
    struct tn_split *s = (struct tn_split *)calloc(1, sizeof *s + sizeof(int64_t) * (size_t)no);
    if (!s) return ox_err(OX_E_NOMEM, "out of memory");
    s->axis = axis;
    s->es = es;
    s->dim = x->dims[axis];
    s->outer = tn_prod(x->dims, 0, axis);
    s->inner = tn_prod(x->dims, axis + 1, x->rank);
    s->n_sizes = no;
    /* the sizes, from where the CPU takes them (kernels/cpu/tensor.c, split_info) */
    const ox_tensor *sp = (n->opset == 1 || n->opset >= 13) ? ox_in(n, in, 1) : NULL;
    const int64_t *attr = NULL;
    int na = n->opset < 13 ? ox_attr_ints(n, "split", &attr) : -1;
    int64_t num = n->opset >= 18 ? ox_attr_int(n, "num_outputs", 0) : 0, sum = 0;
    ox_status st = OX_OK;
    bool all_out = true;
    for (int j = 0; j < no; j++) all_out = all_out && out[j];
    if (sp) {
        struct tn_host h;
        st = host_input(in, 1, const_inputs, &h);
        if (st == OX_E_UNSUPPORTED && all_out) {
            /* sizes not constant: the CPU's infer put them in the output shapes */
            for (int j = 0; j < no; j++) s->sizes[j] = out[j]->dims[axis];
            st = OX_OK;
        } else if (!st) {
            int64_t k = ox_tensor_numel(&h.t);
            if (!ox_dtype_is_int(h.t.dtype) || k != no)
                st = OX_E_UNSUPPORTED;
            else
                for (int j = 0; j < no; j++) s->sizes[j] = ox_get_i64(&h.t, j);
        }
    } else if (na >= 0) {
        if (na != no)
            st = OX_E_UNSUPPORTED;
        else
            for (int j = 0; j < no; j++) s->sizes[j] = attr[j];
    } else if (num > 0) {
        int64_t chunk = (s->dim + num - 1) / num;
        if (num != no)
            st = OX_E_UNSUPPORTED;
        else
            for (int j = 0; j < no; j++)
                s->sizes[j] = j < no - 1 ? chunk : s->dim - chunk * (no - 1);
    } else {
        if (s->dim % no != 0)
            st = OX_E_UNSUPPORTED;
        else
            for (int j = 0; j < no; j++) s->sizes[j] = s->dim / no;
    }
    for (int j = 0; !st && j < no; j++) {
        if (s->sizes[j] < 0) st = OX_E_UNSUPPORTED;
        sum += s->sizes[j];
        if (out[j]) {
            int64_t dims[OX_MAX_RANK];
            memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
            dims[axis] = s->sizes[j];
            if (out[j]->dtype != x->dtype || !same_dims(out[j], x->rank, dims))
                st = OX_E_UNSUPPORTED;
        }
    }
    if (!st && sum != s->dim) st = OX_E_UNSUPPORTED;
    if (st) {
        free(s);
        return st;
    }
    *state = s;
    return OX_OK;
}

ox_status ox_cu_tn_split(struct ox_cuda_ctx *c, const struct ox_node *n, const ox_tensor *const *in,
                         ox_tensor *const *out) {
    const struct tn_split *s = (const struct tn_split *)c->state;
    int64_t es = (int64_t)s->es, row = s->dim * s->inner * es, at = 0;
    for (int j = 0; j < n->n_outputs && j < s->n_sizes; j++) {
        int64_t blk = s->sizes[j] * s->inner * es;
        if (out[j]) {
            ox_status st = rows_copy(c, out[j]->data, blk, (const char *)in[0]->data + at, row, blk,
                                     s->outer, "Split");
            if (st) return st;
        }
        at += blk;
    }
    return OX_OK;
}

/* ---- Slice ----------------------------------------------------------------------------- */

struct tn_viewop {
    size_t es;
    struct tn_view view;
};

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

ox_status ox_cu_tn_prepare_slice(struct ox_cuda_ctx *c, const struct ox_node *n,
                                 const ox_tensor *const *in, ox_tensor *const *out,
                                 unsigned const_inputs, void **state, size_t *workspace) {
    (void)c, (void)workspace;
    const ox_tensor *x = in[0];
    int r = x->rank;
    struct tn_viewop s;
    s.es = move_size(x->dtype);
    if (!s.es || out[0]->dtype != x->dtype) return OX_E_UNSUPPORTED;
    /* starts, ends, axes, steps as the CPU's slice_params reads them */
    int64_t sts[OX_MAX_RANK], ens[OX_MAX_RANK], axs[OX_MAX_RANK], sps[OX_MAX_RANK];
    int64_t ns, ne, na = -1, nsp = -1;
    if (n->opset < 10) {
        if (attr_list(n, "starts", sts, OX_MAX_RANK, &ns) ||
            attr_list(n, "ends", ens, OX_MAX_RANK, &ne) ||
            attr_list(n, "axes", axs, OX_MAX_RANK, &na) || ns < 0 || ne < 0)
            return OX_E_UNSUPPORTED;
    } else {
        if (!ox_in(n, in, 1) || !ox_in(n, in, 2)) return OX_E_UNSUPPORTED;
        ox_status st;
        if ((st = const_ints(in, 1, const_inputs, sts, OX_MAX_RANK, &ns)) ||
            (st = const_ints(in, 2, const_inputs, ens, OX_MAX_RANK, &ne)))
            return st;
        if (ox_in(n, in, 3) && (st = const_ints(in, 3, const_inputs, axs, OX_MAX_RANK, &na)))
            return st;
        if (ox_in(n, in, 4) && (st = const_ints(in, 4, const_inputs, sps, OX_MAX_RANK, &nsp)))
            return st;
    }
    if (ne != ns || (na >= 0 && na != ns) || (nsp >= 0 && nsp != ns)) return OX_E_UNSUPPORTED;
    int64_t start[OX_MAX_RANK], step[OX_MAX_RANK], len[OX_MAX_RANK];
    for (int d = 0; d < r; d++) start[d] = 0, step[d] = 1, len[d] = x->dims[d];
    bool seen[OX_MAX_RANK] = {false};
    for (int i = 0; i < ns; i++) {
        int a;
        if (!tn_axis(na >= 0 ? axs[i] : i, r, &a) || seen[a]) return OX_E_UNSUPPORTED;
        seen[a] = true;
        int64_t b = sts[i], e = ens[i], k = nsp >= 0 ? sps[i] : 1, d = x->dims[a], l;
        if (k == 0) return OX_E_UNSUPPORTED;
        if (k < -INT64_MAX) k = -INT64_MAX;
        if (b < 0) b += d;
        if (e < 0) e += d;
        if (d == 0) {
            b = 0, l = 0;
        } else if (k > 0) {
            b = clamp64(b, 0, d);
            e = clamp64(e, 0, d);
            l = e > b ? (e - b - 1) / k + 1 : 0;
        } else {
            b = clamp64(b, 0, d - 1);
            e = clamp64(e, -1, d - 1);
            l = b > e ? (b - e - 1) / -k + 1 : 0;
        }
        start[a] = b, step[a] = k, len[a] = l;
    }
    if (!same_dims(out[0], r, len)) return OX_E_UNSUPPORTED;
    int64_t xs[OX_MAX_RANK], vs[OX_MAX_RANK], base = 0;
    tn_strides(r, x->dims, xs);
    for (int d = 0; d < r; d++) {
        /* a step past the axis's length takes only the start: its stride never counts */
        base += start[d] * xs[d];
        vs[d] = len[d] > 1 ? step[d] * xs[d] : 0;
    }
    view_make(&s.view, r, len, vs, base);
    return keep_state(state, &s, sizeof s);
}

/* Every op whose state is a tn_viewop: Slice, Tile, DepthToSpace, SpaceToDepth. */
ox_status ox_cu_tn_view(struct ox_cuda_ctx *c, const struct ox_node *n, const ox_tensor *const *in,
                        ox_tensor *const *out) {
    const struct tn_viewop *s = (const struct tn_viewop *)c->state;
    return view_copy(c, &s->view, out[0]->data, in[0]->data, s->es, n->op_type);
}

/* ---- Tile ------------------------------------------------------------------------------ */

ox_status ox_cu_tn_prepare_tile(struct ox_cuda_ctx *c, const struct ox_node *n,
                                const ox_tensor *const *in, ox_tensor *const *out,
                                unsigned const_inputs, void **state, size_t *workspace) {
    (void)c, (void)n, (void)const_inputs, (void)workspace;
    const ox_tensor *x = in[0], *y = out[0];
    struct tn_viewop s;
    s.es = move_size(x->dtype);
    if (!s.es || y->dtype != x->dtype || y->rank != x->rank) return OX_E_UNSUPPORTED;
    memset(&s.view, 0, sizeof s.view);
    if (ox_tensor_numel(y) > 0) {
        /* the output seen as [rep0, d0, rep1, d1, ...], the repeats with stride 0; the
         * repeats are the CPU's infer's, from the output shape */
        int64_t xs[OX_MAX_RANK], dims[TN_MAX_DIMS], st[TN_MAX_DIMS];
        tn_strides(x->rank, x->dims, xs);
        for (int d = 0; d < x->rank; d++) {
            if (x->dims[d] == 0 || y->dims[d] % x->dims[d] != 0) return OX_E_UNSUPPORTED;
            dims[2 * d] = y->dims[d] / x->dims[d];
            dims[2 * d + 1] = x->dims[d];
            st[2 * d] = 0;
            st[2 * d + 1] = xs[d];
        }
        view_make(&s.view, 2 * x->rank, dims, st, 0);
    }
    return keep_state(state, &s, sizeof s);
}

/* ---- DepthToSpace / SpaceToDepth ------------------------------------------------------- */

/* The view of a DepthToSpace (d2s) or SpaceToDepth, as the CPU kernels see them. */
static ox_status prepare_space(const struct ox_node *n, const ox_tensor *const *in,
                               ox_tensor *const *out, bool d2s, void **state) {
    const ox_tensor *x = in[0];
    struct tn_viewop s;
    s.es = move_size(x->dtype);
    int64_t b = ox_attr_int(n, "blocksize", 0);
    if (!s.es || x->rank != 4 || b <= 0 || b > INT32_MAX || out[0]->dtype != x->dtype)
        return OX_E_UNSUPPORTED;
    const int64_t *d = x->dims;
    int64_t dims[6], st[6], ydims[4];
    if (d2s) {
        const char *m = n->opset >= 11 ? ox_attr_str(n, "mode", "DCR") : "DCR";
        bool crd = strcmp(m, "CRD") == 0;
        if (!crd && strcmp(m, "DCR") != 0) return OX_E_UNSUPPORTED;
        if (d[1] % (b * b) != 0) return OX_E_UNSUPPORTED;
        int64_t N = d[0], C = d[1] / (b * b), H = d[2], W = d[3];
        ydims[0] = N, ydims[1] = C, ydims[2] = H * b, ydims[3] = W * b;
        /* the output as [N, C, H, b1, W, b2]; the input as DCR [N, b1, b2, C, H, W] or
         * CRD [N, C, b1, b2, H, W] */
        int64_t v[6] = {N, C, H, b, W, b};
        memcpy(dims, v, sizeof v);
        st[0] = d[1] * H * W;
        st[2] = W;
        st[4] = 1;
        if (crd) {
            st[1] = b * b * H * W;
            st[3] = b * H * W;
            st[5] = H * W;
        } else {
            st[1] = H * W;
            st[3] = b * C * H * W;
            st[5] = C * H * W;
        }
    } else {
        if (d[2] % b != 0 || d[3] % b != 0) return OX_E_UNSUPPORTED;
        int64_t N = d[0], C = d[1], H = d[2], W = d[3], H2 = H / b, W2 = W / b;
        ydims[0] = N, ydims[1] = C * b * b, ydims[2] = H2, ydims[3] = W2;
        /* the output as [N, b1, b2, C, H2, W2]; the input as [N, C, H2, b1, W2, b2] */
        int64_t v[6] = {N, b, b, C, H2, W2}, w[6] = {C * H * W, W, 1, H * W, b * W, b};
        memcpy(dims, v, sizeof v);
        memcpy(st, w, sizeof w);
    }
    if (!same_dims(out[0], 4, ydims)) return OX_E_UNSUPPORTED;
    view_make(&s.view, 6, dims, st, 0);
    return keep_state(state, &s, sizeof s);
}

ox_status ox_cu_tn_prepare_depth_to_space(struct ox_cuda_ctx *c, const struct ox_node *n,
                                          const ox_tensor *const *in, ox_tensor *const *out,
                                          unsigned const_inputs, void **state, size_t *workspace) {
    (void)c, (void)const_inputs, (void)workspace;
    return prepare_space(n, in, out, true, state);
}

ox_status ox_cu_tn_prepare_space_to_depth(struct ox_cuda_ctx *c, const struct ox_node *n,
                                          const ox_tensor *const *in, ox_tensor *const *out,
                                          unsigned const_inputs, void **state, size_t *workspace) {
    (void)c, (void)const_inputs, (void)workspace;
    return prepare_space(n, in, out, false, state);
}

/* ---- Gather ---------------------------------------------------------------------------- */

/* y[o, j, :] = x[o, idx[j], :] over rows of `width` units; an index out of range gives a
 * row of zeros. */
template <typename T, typename IX, typename I>
__global__ static void gather_kernel(T *__restrict__ y, const T *__restrict__ x,
                                     const IX *__restrict__ idx, tn_div width, tn_div ni, int64_t D,
                                     I n) {
    for (I i = first_item<I>(); i < n; i += grid_step<I>()) {
        I o = i, col = div_step(o, width), j = div_step(o, ni);
        int64_t k = (int64_t)idx[j];
        if (k < 0) k += D;
        y[i] = k >= 0 && k < D ? x[((int64_t)o * D + k) * width.d + col] : T();
    }
}

struct tn_gather {
    size_t es;
    int64_t outer, inner, D;
};

ox_status ox_cu_tn_prepare_gather(struct ox_cuda_ctx *c, const struct ox_node *n,
                                  const ox_tensor *const *in, ox_tensor *const *out,
                                  unsigned const_inputs, void **state, size_t *workspace) {
    (void)c, (void)const_inputs, (void)workspace;
    const ox_tensor *x = in[0], *idx = in[1];
    struct tn_gather s;
    int axis;
    s.es = move_size(x->dtype);
    if (!s.es || (idx->dtype != OX_INT64 && idx->dtype != OX_INT32) || out[0]->dtype != x->dtype ||
        !tn_axis(ox_attr_int(n, "axis", 0), x->rank, &axis))
        return OX_E_UNSUPPORTED;
    int r = x->rank - 1 + idx->rank, k = 0;
    if (r > OX_MAX_RANK) return OX_E_UNSUPPORTED;
    int64_t dims[OX_MAX_RANK];
    for (int d = 0; d < axis; d++) dims[k++] = x->dims[d];
    for (int d = 0; d < idx->rank; d++) dims[k++] = idx->dims[d];
    for (int d = axis + 1; d < x->rank; d++) dims[k++] = x->dims[d];
    if (!same_dims(out[0], r, dims)) return OX_E_UNSUPPORTED;
    s.D = x->dims[axis];
    s.outer = tn_prod(x->dims, 0, axis);
    s.inner = tn_prod(x->dims, axis + 1, x->rank);
    return keep_state(state, &s, sizeof s);
}

ox_status ox_cu_tn_gather(struct ox_cuda_ctx *c, const struct ox_node *n,
                          const ox_tensor *const *in, ox_tensor *const *out) {
    (void)n;
    const struct tn_gather *s = (const struct tn_gather *)c->state;
    int64_t ni = ox_tensor_numel(in[1]);
    if (s->outer * ni * s->inner == 0) return OX_OK;
    /* each row of `inner` elements moves in the widest units its start allows */
    int64_t row = s->inner * (int64_t)s->es;
    size_t w = 16;
    while (w > s->es && (row % (int64_t)w || !aligned(out[0]->data, w) || !aligned(in[0]->data, w)))
        w /= 2;
    int64_t width = row / (int64_t)w, total = s->outer * ni * width;
    bool i64 = in[1]->dtype == OX_INT64;
    with_width(w, [&](auto t) {
        using T = decltype(t);
        with_index(total, [&](auto ix) {
            using I = decltype(ix);
            unsigned blocks = ox_cu_blocks(total);
            if (i64)
                gather_kernel<T, int64_t, I><<<blocks, TN_THREADS, 0, c->stream>>>(
                    (T *)out[0]->data, (const T *)in[0]->data, (const int64_t *)in[1]->data,
                    div_make(width), div_make(ni), s->D, (I)total);
            else
                gather_kernel<T, int32_t, I><<<blocks, TN_THREADS, 0, c->stream>>>(
                    (T *)out[0]->data, (const T *)in[0]->data, (const int32_t *)in[1]->data,
                    div_make(width), div_make(ni), s->D, (I)total);
        });
    });
    return ox_cu_launched("Gather");
}

/* ---- GatherElements -------------------------------------------------------------------- */

/* y[e] = x at e's coordinates (over the indices' dims) with the axis's replaced by idx[e]. */
struct ge_args {
    int rank, axis;
    tn_div idims[OX_MAX_RANK];
    int64_t xs[OX_MAX_RANK], D;
};

/* The offset into x of element e's position (GatherElements reads there, ScatterElements
 * writes there), or -1 when its index is out of range. */
template <typename IX, typename I>
__device__ static inline int64_t elements_at(const ge_args &a, const IX *__restrict__ idx, I e) {
    I q = e;
    int64_t off = 0;
    for (int d = a.rank - 1; d >= 0; d--) {
        I c = div_step(q, a.idims[d]);
        if (d != a.axis) off += (int64_t)c * a.xs[d];
    }
    int64_t k = (int64_t)idx[e];
    if (k < 0) k += a.D;
    return k >= 0 && k < a.D ? off + k * a.xs[a.axis] : -1;
}

template <typename T, typename IX, typename I>
__global__ static void gather_elements_kernel(T *__restrict__ y, const T *__restrict__ x,
                                              const IX *__restrict__ idx, ge_args a, I n) {
    for (I e = first_item<I>(); e < n; e += grid_step<I>()) {
        int64_t o = elements_at(a, idx, e);
        y[e] = o >= 0 ? x[o] : T();
    }
}

struct tn_gather_elements {
    size_t es;
    struct ge_args a;
};

/* a for indices idx over data x along n's axis (GatherElements, ScatterElements); false when
 * the ranks differ, the axis is out of range or an index dim exceeds x's off the axis. */
static bool elements_geom(const struct ox_node *n, const ox_tensor *x, const ox_tensor *idx,
                          struct ge_args *a) {
    if (x->rank != idx->rank || !tn_axis(ox_attr_int(n, "axis", 0), x->rank, &a->axis))
        return false;
    for (int d = 0; d < x->rank; d++)
        if (d != a->axis && idx->dims[d] > x->dims[d]) return false;
    a->rank = x->rank;
    for (int d = 0; d < x->rank; d++) a->idims[d] = div_make(idx->dims[d]);
    tn_strides(x->rank, x->dims, a->xs);
    a->D = x->dims[a->axis];
    return true;
}

ox_status ox_cu_tn_prepare_gather_elements(struct ox_cuda_ctx *c, const struct ox_node *n,
                                           const ox_tensor *const *in, ox_tensor *const *out,
                                           unsigned const_inputs, void **state, size_t *workspace) {
    (void)c, (void)const_inputs, (void)workspace;
    const ox_tensor *x = in[0], *idx = in[1];
    struct tn_gather_elements s;
    memset(&s, 0, sizeof s);
    s.es = move_size(x->dtype);
    if (!s.es || (idx->dtype != OX_INT64 && idx->dtype != OX_INT32) || out[0]->dtype != x->dtype ||
        !same_dims(out[0], idx->rank, idx->dims) || !elements_geom(n, x, idx, &s.a))
        return OX_E_UNSUPPORTED;
    return keep_state(state, &s, sizeof s);
}

ox_status ox_cu_tn_gather_elements(struct ox_cuda_ctx *c, const struct ox_node *n,
                                   const ox_tensor *const *in, ox_tensor *const *out) {
    (void)n;
    const struct tn_gather_elements *s = (const struct tn_gather_elements *)c->state;
    int64_t total = ox_tensor_numel(in[1]);
    if (total == 0) return OX_OK;
    bool i64 = in[1]->dtype == OX_INT64;
    with_elem(s->es, [&](auto t) {
        using T = decltype(t);
        with_index(total, [&](auto ix) {
            using I = decltype(ix);
            unsigned blocks = ox_cu_blocks(total);
            if (i64)
                gather_elements_kernel<T, int64_t, I><<<blocks, TN_THREADS, 0, c->stream>>>(
                    (T *)out[0]->data, (const T *)in[0]->data, (const int64_t *)in[1]->data, s->a,
                    (I)total);
            else
                gather_elements_kernel<T, int32_t, I><<<blocks, TN_THREADS, 0, c->stream>>>(
                    (T *)out[0]->data, (const T *)in[0]->data, (const int32_t *)in[1]->data, s->a,
                    (I)total);
        });
    });
    return ox_cu_launched("GatherElements");
}

/* ---- ScatterElements, Scatter, ScatterND ----------------------------------------------- */

/* The output starts as a copy of data (none where it is data's memory), then one thread an
 * element of updates writes or reduces into it: ScatterElements at the element's coordinates
 * (over the indices' dims) with the axis's replaced by its index, ScatterND at the slice its
 * row of indices names. Reductions (opset 16: add, mul; 18: max, min) are atomic: float,
 * float16, bfloat16, int32 and int64 (integers wrap, as on the CPU); without one, any element
 * type by its size. Duplicate indices: with a reduction every update counts (in any order);
 * without, one of them wins (the spec leaves it undefined; the CPU takes the last). An index
 * out of range updates nothing (the CPU reports it as an error). These are the ops autograd
 * emits for MaxPool's and Slice's gradients, so training steps stay on the GPU. */
enum { SC_NONE, SC_ADD, SC_MUL, SC_MAX, SC_MIN };

template <typename T> __device__ static inline T sc_apply(T a, T b, int red) {
    switch (red) {
    case SC_ADD: return a + b;
    case SC_MUL: return a * b;
    case SC_MAX: return a > b ? a : b;
    default: return a < b ? a : b;
    }
}

/* *p = red(*p, v), atomically: hardware atomics where they exist, else a compare-and-swap
 * loop over the element's bits. */
__device__ static inline void sc_atomic(float *p, float v, int red) {
    if (red == SC_ADD) {
        atomicAdd(p, v);
        return;
    }
    unsigned *q = (unsigned *)p, old = *q, prev;
    do {
        prev = old;
        old = atomicCAS(q, prev, __float_as_uint(sc_apply(__uint_as_float(prev), v, red)));
    } while (old != prev);
}

/* The 16-bit float types' bits as a float and back (rounded to nearest even). */
__device__ static inline float sc_float(unsigned short b, __half) {
    return __half2float(__ushort_as_half(b));
}
__device__ static inline float sc_float(unsigned short b, __nv_bfloat16) {
    return __bfloat162float(__ushort_as_bfloat16(b));
}
__device__ static inline unsigned short sc_bits(float f, __half) {
    return __half_as_ushort(__float2half_rn(f));
}
__device__ static inline unsigned short sc_bits(float f, __nv_bfloat16) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}

/* *p = red(*p, v) for a 16-bit float T: a compare-and-swap loop over the element's bits, the
 * arithmetic in float */
template <typename T> __device__ static inline void sc_atomic16(T *p, T v, int red) {
    unsigned short *q = (unsigned short *)p, old = *q, prev, vb;
    memcpy(&vb, &v, sizeof vb);
    float b = sc_float(vb, v);
    do {
        prev = old;
        old = atomicCAS(q, prev, sc_bits(sc_apply(sc_float(prev, v), b, red), v));
    } while (old != prev);
}

__device__ static inline void sc_atomic(__half *p, __half v, int red) {
    sc_atomic16(p, v, red);
}

/* add: the hardware's bfloat16 atomic (sm_90; cuda_bf16.h loops on older GPUs), which rounds
 * the exact sum once, as the loop would */
__device__ static inline void sc_atomic(__nv_bfloat16 *p, __nv_bfloat16 v, int red) {
    if (red == SC_ADD)
        atomicAdd(p, v);
    else
        sc_atomic16(p, v, red);
}

__device__ static inline void sc_atomic(int32_t *p, int32_t v, int red) {
    switch (red) {
    case SC_ADD: atomicAdd(p, v); return;
    case SC_MAX: atomicMax(p, v); return;
    case SC_MIN: atomicMin(p, v); return;
    default: break;
    }
    int old = *p, prev;
    do {
        prev = old;
        old = atomicCAS(p, prev, (int)((uint32_t)prev * (uint32_t)v));
    } while (old != prev);
}

__device__ static inline void sc_atomic(int64_t *p, int64_t v, int red) {
    unsigned long long *q = (unsigned long long *)p;
    switch (red) {
    case SC_ADD: atomicAdd(q, (unsigned long long)v); return;
    case SC_MAX: atomicMax((long long *)p, (long long)v); return;
    case SC_MIN: atomicMin((long long *)p, (long long)v); return;
    default: break;
    }
    unsigned long long old = *q, prev;
    do {
        prev = old;
        old = atomicCAS(q, prev, prev * (unsigned long long)v);
    } while (old != prev);
}

template <typename T> __device__ static inline void sc_put(T *p, T v, int red) {
    if constexpr (std::is_same<T, float>::value || std::is_same<T, __half>::value ||
                  std::is_same<T, __nv_bfloat16>::value || std::is_same<T, int32_t>::value ||
                  std::is_same<T, int64_t>::value) {
        if (red != SC_NONE) {
            sc_atomic(p, v, red);
            return;
        }
    }
    *p = v;
}

struct sc_args {
    struct ge_args el; /* ScatterElements: GatherElements' geometry (xs: data's strides) */
    int red;
    /* ScatterND: k index columns over data's first k dims, S elements a slice */
    int k;
    int64_t xd[OX_MAX_RANK], S;
};

template <typename T, typename IX, typename I>
__global__ static void scatter_elements_kernel(T *y, const T *__restrict__ u,
                                               const IX *__restrict__ idx, sc_args a, I n) {
    for (I e = first_item<I>(); e < n; e += grid_step<I>()) {
        int64_t o = elements_at(a.el, idx, e);
        if (o >= 0) sc_put(y + o, u[e], a.red);
    }
}

template <typename T, typename IX, typename I>
__global__ static void scatter_nd_kernel(T *y, const T *__restrict__ u, const IX *__restrict__ idx,
                                         sc_args a, I n) {
    for (I e = first_item<I>(); e < n; e += grid_step<I>()) {
        I i = e / (I)a.S, j = e - i * (I)a.S;
        int64_t off = (int64_t)j;
        bool in = true;
        for (int t = 0; t < a.k; t++) {
            int64_t v = (int64_t)idx[(int64_t)i * a.k + t];
            if (v < 0) v += a.xd[t];
            in = in && v >= 0 && v < a.xd[t];
            off += v * a.el.xs[t];
        }
        if (in) sc_put(y + off, u[e], a.red);
    }
}

struct tn_scatter {
    bool nd;
    ox_dtype dt;
    size_t es;
    struct sc_args a;
};

ox_status ox_cu_tn_prepare_scatter(struct ox_cuda_ctx *c, const struct ox_node *n,
                                   const ox_tensor *const *in, ox_tensor *const *out,
                                   unsigned const_inputs, void **state, size_t *workspace) {
    (void)c, (void)const_inputs, (void)workspace;
    const ox_tensor *x = ox_in(n, in, 0), *idx = ox_in(n, in, 1), *u = ox_in(n, in, 2);
    struct tn_scatter s;
    memset(&s, 0, sizeof s);
    if (!x || !idx || !u || !out[0]) return OX_E_UNSUPPORTED;
    s.nd = strcmp(n->op_type, "ScatterND") == 0;
    s.dt = x->dtype;
    s.es = move_size(x->dtype);
    const char *r = n->opset >= 16 ? ox_attr_str(n, "reduction", "none") : "none";
    s.a.red = !strcmp(r, "none")                    ? SC_NONE
              : !strcmp(r, "add")                   ? SC_ADD
              : !strcmp(r, "mul")                   ? SC_MUL
              : !strcmp(r, "max") && n->opset >= 18 ? SC_MAX
              : !strcmp(r, "min") && n->opset >= 18 ? SC_MIN
                                                    : -1;
    bool arith = x->dtype == OX_FLOAT || x->dtype == OX_FLOAT16 || x->dtype == OX_BFLOAT16 ||
                 x->dtype == OX_INT32 || x->dtype == OX_INT64;
    if (!s.es || s.a.red < 0 || (s.a.red != SC_NONE && !arith) ||
        (idx->dtype != OX_INT64 && idx->dtype != OX_INT32) || u->dtype != x->dtype ||
        out[0]->dtype != x->dtype || !same_dims(out[0], x->rank, x->dims))
        return OX_E_UNSUPPORTED;
    if (!s.nd) {
        if (!same_dims(u, idx->rank, idx->dims) || !elements_geom(n, x, idx, &s.a.el))
            return OX_E_UNSUPPORTED;
    } else {
        tn_strides(x->rank, x->dims, s.a.el.xs);
        int q = idx->rank;
        if (q < 1 || x->rank < 1 || idx->dims[q - 1] > x->rank) return OX_E_UNSUPPORTED;
        s.a.k = (int)idx->dims[q - 1];
        s.a.S = 1;
        for (int d = s.a.k; d < x->rank; d++) s.a.S *= x->dims[d];
        for (int d = 0; d < s.a.k; d++) s.a.xd[d] = x->dims[d];
        bool ok = u->rank == q - 1 + x->rank - s.a.k;
        for (int d = 0; ok && d < q - 1; d++) ok = u->dims[d] == idx->dims[d];
        for (int d = s.a.k; ok && d < x->rank; d++) ok = u->dims[q - 1 + d - s.a.k] == x->dims[d];
        if (!ok) return OX_E_UNSUPPORTED;
    }
    return keep_state(state, &s, sizeof s);
}

template <typename T>
static void scatter_launch(cudaStream_t st, const struct tn_scatter *s, void *y, const void *u,
                           const void *idx, bool i64, int64_t total) {
    with_index(total, [&](auto ix) {
        using I = decltype(ix);
        unsigned blocks = ox_cu_blocks(total);
        if (s->nd && i64)
            scatter_nd_kernel<T, int64_t, I><<<blocks, TN_THREADS, 0, st>>>(
                (T *)y, (const T *)u, (const int64_t *)idx, s->a, (I)total);
        else if (s->nd)
            scatter_nd_kernel<T, int32_t, I><<<blocks, TN_THREADS, 0, st>>>(
                (T *)y, (const T *)u, (const int32_t *)idx, s->a, (I)total);
        else if (i64)
            scatter_elements_kernel<T, int64_t, I><<<blocks, TN_THREADS, 0, st>>>(
                (T *)y, (const T *)u, (const int64_t *)idx, s->a, (I)total);
        else
            scatter_elements_kernel<T, int32_t, I><<<blocks, TN_THREADS, 0, st>>>(
                (T *)y, (const T *)u, (const int32_t *)idx, s->a, (I)total);
    });
}

ox_status ox_cu_tn_scatter(struct ox_cuda_ctx *c, const struct ox_node *n,
                           const ox_tensor *const *in, ox_tensor *const *out) {
    const struct tn_scatter *s = (const struct tn_scatter *)c->state;
    size_t bytes = (size_t)ox_tensor_numel(in[0]) * s->es;
    if (bytes && out[0]->data != in[0]->data) {
        ox_status st = ox_cu_check(
            cudaMemcpyAsync(out[0]->data, in[0]->data, bytes, cudaMemcpyDeviceToDevice, c->stream),
            n->op_type);
        if (st) return st;
    }
    int64_t total = ox_tensor_numel(in[2]);
    if (total == 0 || bytes == 0) return OX_OK;
    bool i64 = in[1]->dtype == OX_INT64;
    const void *u = in[2]->data, *idx = in[1]->data;
    void *y = out[0]->data;
    if (s->a.red != SC_NONE) {
        switch (s->dt) {
        case OX_FLOAT: scatter_launch<float>(c->stream, s, y, u, idx, i64, total); break;
        case OX_FLOAT16: scatter_launch<__half>(c->stream, s, y, u, idx, i64, total); break;
        case OX_BFLOAT16: scatter_launch<__nv_bfloat16>(c->stream, s, y, u, idx, i64, total); break;
        case OX_INT32: scatter_launch<int32_t>(c->stream, s, y, u, idx, i64, total); break;
        default: scatter_launch<int64_t>(c->stream, s, y, u, idx, i64, total); break;
        }
    } else {
        with_elem(s->es, [&](auto t) {
            scatter_launch<decltype(t)>(c->stream, s, y, u, idx, i64, total);
        });
    }
    return ox_cu_launched(n->op_type);
}

/* ---- Pad ------------------------------------------------------------------------------- */

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

/* Per axis of the output: the input's kept part is lo .. lo + len - 1 (negative pads crop),
 * and it starts at output index beg. */
struct pad_args {
    int rank, mode;
    tn_div ydims[OX_MAX_RANK];
    int64_t xs[OX_MAX_RANK], beg[OX_MAX_RANK], lo[OX_MAX_RANK], len[OX_MAX_RANK];
};

/* Source index in the input for output index o along one axis, or -1 for the constant (the
 * CPU's pad_src). */
__device__ static int64_t pad_src(int64_t o, int64_t begin, int64_t lo, int64_t len, int mode) {
    int64_t i = o - begin;
    if (i >= 0 && i < len) return lo + i;
    switch (mode) {
    case PAD_EDGE: return lo + (i < 0 ? 0 : len - 1);
    case PAD_WRAP: return lo + ((i % len) + len) % len;
    case PAD_REFLECT: {
        if (len == 1) return lo;
        int64_t p = 2 * (len - 1), m = ((i % p) + p) % p;
        return lo + (m >= len ? p - m : m);
    }
    default: return -1;
    }
}

/* cv: the constant on the device (Pad-11's input), or NULL for cval. */
template <typename T, typename I>
__global__ static void pad_kernel(T *__restrict__ y, const T *__restrict__ x, const T *cv, T cval,
                                  pad_args a, I n) {
    for (I i = first_item<I>(); i < n; i += grid_step<I>()) {
        I q = i;
        int64_t off = 0;
        bool fill = false;
        for (int d = a.rank - 1; d >= 0; d--) {
            I c = div_step(q, a.ydims[d]);
            int64_t s =
                a.len[d] > 0 ? pad_src((int64_t)c, a.beg[d], a.lo[d], a.len[d], a.mode) : -1;
            if (s < 0)
                fill = true;
            else
                off += s * a.xs[d];
        }
        y[i] = fill ? (cv ? *cv : cval) : x[off];
    }
}

struct tn_pad {
    size_t es;
    uint64_t cval; /* the constant's bits when it does not come from input 2 */
    struct pad_args a;
};

/* Types whose value attribute (Pad below opset 11) converts (the CPU's is_arith). */
static bool pad_value_type(ox_dtype dt) {
    return dt == OX_FLOAT || dt == OX_DOUBLE || dt == OX_FLOAT16 || dt == OX_BFLOAT16 ||
           dt == OX_BOOL || ox_dtype_is_int(dt);
}

ox_status ox_cu_tn_prepare_pad(struct ox_cuda_ctx *c, const struct ox_node *n,
                               const ox_tensor *const *in, ox_tensor *const *out,
                               unsigned const_inputs, void **state, size_t *workspace) {
    (void)c, (void)workspace;
    const ox_tensor *x = in[0];
    int r = x->rank;
    struct tn_pad s;
    memset(&s, 0, sizeof s);
    s.es = move_size(x->dtype);
    if (!s.es || out[0]->dtype != x->dtype) return OX_E_UNSUPPORTED;
    /* mode, pads and axes as the CPU's pad_params reads them */
    const char *m = ox_attr_str(n, "mode", "constant");
    if (strcmp(m, "constant") == 0)
        s.a.mode = PAD_CONSTANT;
    else if (strcmp(m, "reflect") == 0)
        s.a.mode = PAD_REFLECT;
    else if (strcmp(m, "edge") == 0)
        s.a.mode = PAD_EDGE;
    else if (strcmp(m, "wrap") == 0 && n->opset >= 19)
        s.a.mode = PAD_WRAP;
    else
        return OX_E_UNSUPPORTED;
    int64_t p[2 * OX_MAX_RANK], np, axes[OX_MAX_RANK], na = -1, pads[2 * OX_MAX_RANK];
    ox_status st;
    if (n->opset < 11) {
        if (attr_list(n, n->opset < 2 ? "paddings" : "pads", p, 2 * OX_MAX_RANK, &np) || np < 0)
            return OX_E_UNSUPPORTED;
    } else {
        if (!ox_in(n, in, 1)) return OX_E_UNSUPPORTED;
        if ((st = const_ints(in, 1, const_inputs, p, 2 * OX_MAX_RANK, &np))) return st;
        if (n->opset >= 18 && ox_in(n, in, 3) &&
            (st = const_ints(in, 3, const_inputs, axes, OX_MAX_RANK, &na)))
            return st;
    }
    if (na < 0) {
        if (np != 2 * r) return OX_E_UNSUPPORTED;
        for (int i = 0; i < 2 * r; i++) pads[i] = p[i];
    } else {
        if (np != 2 * na) return OX_E_UNSUPPORTED;
        bool seen[OX_MAX_RANK] = {false};
        for (int i = 0; i < 2 * r; i++) pads[i] = 0;
        for (int i = 0; i < na; i++) {
            int a;
            if (!tn_axis(axes[i], r, &a) || seen[a]) return OX_E_UNSUPPORTED;
            seen[a] = true;
            pads[a] = p[i];
            pads[r + a] = p[na + i];
        }
    }
    /* the constant: input 2 (read on the device at run time), or the value attribute */
    const ox_tensor *cv = n->opset >= 11 ? ox_in(n, in, 2) : NULL;
    if (cv && (cv->dtype != x->dtype || ox_tensor_numel(cv) > 1)) return OX_E_UNSUPPORTED;
    if (n->opset < 11 && pad_value_type(x->dtype)) {
        ox_tensor t;
        memset(&t, 0, sizeof t);
        t.dtype = x->dtype;
        t.data = &s.cval;
        ox_set_f64(&t, 0, ox_attr_float(n, "value", 0.0f));
    }
    int64_t ydims[OX_MAX_RANK];
    for (int d = 0; d < r; d++) {
        int64_t b = pads[d], e = pads[r + d];
        if (b < -x->dims[d] || e < -x->dims[d]) return OX_E_UNSUPPORTED;
        ydims[d] = x->dims[d] + b + e;
        s.a.lo[d] = b < 0 ? -b : 0;
        s.a.len[d] = x->dims[d] - s.a.lo[d] - (e < 0 ? -e : 0);
        s.a.beg[d] = b > 0 ? b : 0;
        if (s.a.mode != PAD_CONSTANT && s.a.len[d] <= 0 && (b > 0 || e > 0))
            return OX_E_UNSUPPORTED;
    }
    if (!same_dims(out[0], r, ydims)) return OX_E_UNSUPPORTED;
    s.a.rank = r;
    for (int d = 0; d < r; d++) s.a.ydims[d] = div_make(ydims[d]);
    tn_strides(r, x->dims, s.a.xs);
    return keep_state(state, &s, sizeof s);
}

ox_status ox_cu_tn_pad(struct ox_cuda_ctx *c, const struct ox_node *n, const ox_tensor *const *in,
                       ox_tensor *const *out) {
    const struct tn_pad *s = (const struct tn_pad *)c->state;
    int64_t total = ox_tensor_numel(out[0]);
    if (total == 0) return OX_OK;
    const ox_tensor *cv = n->opset >= 11 ? ox_in(n, in, 2) : NULL;
    const void *cvp = cv && ox_tensor_numel(cv) == 1 ? cv->data : NULL;
    with_elem(s->es, [&](auto t) {
        using T = decltype(t);
        T cval;
        memcpy(&cval, &s->cval, sizeof cval);
        with_index(total, [&](auto ix) {
            using I = decltype(ix);
            pad_kernel<T, I><<<ox_cu_blocks(total), TN_THREADS, 0, c->stream>>>(
                (T *)out[0]->data, (const T *)in[0]->data, (const T *)cvp, cval, s->a, (I)total);
        });
    });
    return ox_cu_launched("Pad");
}

/* ---- Trilu ----------------------------------------------------------------------------- */

/* Upper keeps column j >= row i + k, lower keeps j <= i + k; the rest is zero. */
template <typename T, typename I>
__global__ static void trilu_kernel(T *y, const T *x, tn_div R, tn_div C, int64_t k, bool upper,
                                    I n) {
    for (I e = first_item<I>(); e < n; e += grid_step<I>()) {
        I q = e;
        int64_t j = (int64_t)div_step(q, C), i = (int64_t)div_step(q, R);
        T v = x[e];
        y[e] = (upper ? j - i >= k : j - i <= k) ? v : T();
    }
}

struct tn_trilu {
    size_t es;
    int64_t R, C, k;
    bool upper;
};

ox_status ox_cu_tn_prepare_trilu(struct ox_cuda_ctx *c, const struct ox_node *n,
                                 const ox_tensor *const *in, ox_tensor *const *out,
                                 unsigned const_inputs, void **state, size_t *workspace) {
    (void)c, (void)workspace;
    const ox_tensor *x = in[0];
    struct tn_trilu s;
    s.es = move_size(x->dtype);
    if (!s.es || x->rank < 2 || !same_dims(out[0], x->rank, x->dims) || out[0]->dtype != x->dtype)
        return OX_E_UNSUPPORTED;
    s.k = 0;
    if (ox_in(n, in, 1)) {
        struct tn_host h;
        ox_status st = host_input(in, 1, const_inputs, &h);
        if (st) return st;
        if (!ox_dtype_is_int(h.t.dtype) || ox_tensor_numel(&h.t) != 1) return OX_E_UNSUPPORTED;
        s.k = ox_get_i64(&h.t, 0);
    }
    s.upper = ox_attr_int(n, "upper", 1) != 0;
    s.R = x->dims[x->rank - 2];
    s.C = x->dims[x->rank - 1];
    if (s.k > s.R + s.C) s.k = s.R + s.C;
    if (s.k < -(s.R + s.C)) s.k = -(s.R + s.C);
    return keep_state(state, &s, sizeof s);
}

ox_status ox_cu_tn_trilu(struct ox_cuda_ctx *c, const struct ox_node *n, const ox_tensor *const *in,
                         ox_tensor *const *out) {
    (void)n;
    const struct tn_trilu *s = (const struct tn_trilu *)c->state;
    int64_t total = ox_tensor_numel(in[0]);
    if (total == 0) return OX_OK;
    with_elem(s->es, [&](auto t) {
        using T = decltype(t);
        with_index(total, [&](auto ix) {
            using I = decltype(ix);
            trilu_kernel<T, I><<<ox_cu_blocks(total), TN_THREADS, 0, c->stream>>>(
                (T *)out[0]->data, (const T *)in[0]->data, div_make(s->R), div_make(s->C), s->k,
                s->upper, (I)total);
        });
    });
    return ox_cu_launched("Trilu");
}

/* ---- Resize ---------------------------------------------------------------------------- */

/* The subset of kernels/cpu/resize.c served here: modes nearest and linear (no antialias,
 * no exclude_outside), coordinate modes half_pixel, pytorch_half_pixel, align_corners and
 * asymmetric (Resize-10's legacy rules included), scales or sizes constant, no axes
 * attribute, keep_aspect_ratio_policy stretch. The per-axis taps are computed on the host in
 * prepare exactly as the CPU computes them and uploaded as tables; linear interpolates the
 * last two axes (the others must map each index to itself). */
enum { RZ_NEAREST, RZ_LINEAR };
enum { RZ_HALF_PIXEL, RZ_PYTORCH_HALF_PIXEL, RZ_ALIGN_CORNERS, RZ_ASYMMETRIC };
enum { RZ_ROUND_FLOOR, RZ_ROUND_CEIL, RZ_FLOOR, RZ_CEIL, RZ_SIMPLE };

struct rz_params {
    int mode, ctm, nearest, rank;
    int64_t in[OX_MAX_RANK], out[OX_MAX_RANK];
    double scale[OX_MAX_RANK];
};

/* At most two taps of one output coordinate: indices into the axis, weights. */
struct rz_tap {
    int64_t i[2];
    double w[2];
    int n;
};

static ox_status rz_parse(const struct ox_node *n, const ox_tensor *const *in,
                          unsigned const_inputs, struct rz_params *p) {
    const ox_tensor *x = in[0];
    int r = x->rank;
    bool legacy = n->opset < 11;
    memset(p, 0, sizeof *p);
    p->rank = r;
    const char *m = ox_attr_str(n, "mode", "nearest");
    if (strcmp(m, "nearest") == 0)
        p->mode = RZ_NEAREST;
    else if (strcmp(m, "linear") == 0 || (legacy && strcmp(m, "bilinear") == 0))
        p->mode = RZ_LINEAR;
    else
        return OX_E_UNSUPPORTED;
    if (legacy) {
        p->ctm = RZ_ASYMMETRIC;
        p->nearest = RZ_SIMPLE;
    } else {
        const char *c = ox_attr_str(n, "coordinate_transformation_mode", "half_pixel");
        if (strcmp(c, "half_pixel") == 0)
            p->ctm = RZ_HALF_PIXEL;
        else if (strcmp(c, "pytorch_half_pixel") == 0)
            p->ctm = RZ_PYTORCH_HALF_PIXEL;
        else if (strcmp(c, "align_corners") == 0)
            p->ctm = RZ_ALIGN_CORNERS;
        else if (strcmp(c, "asymmetric") == 0)
            p->ctm = RZ_ASYMMETRIC;
        else
            return OX_E_UNSUPPORTED;
        const char *nm = ox_attr_str(n, "nearest_mode", "round_prefer_floor");
        if (strcmp(nm, "round_prefer_floor") == 0)
            p->nearest = RZ_ROUND_FLOOR;
        else if (strcmp(nm, "round_prefer_ceil") == 0)
            p->nearest = RZ_ROUND_CEIL;
        else if (strcmp(nm, "floor") == 0)
            p->nearest = RZ_FLOOR;
        else if (strcmp(nm, "ceil") == 0)
            p->nearest = RZ_CEIL;
        else
            return OX_E_UNSUPPORTED;
        if (ox_attr_int(n, "exclude_outside", 0) != 0) return OX_E_UNSUPPORTED;
        if (n->opset >= 18) {
            const int64_t *av;
            if (ox_attr_int(n, "antialias", 0) != 0 || ox_attr_ints(n, "axes", &av) >= 0 ||
                strcmp(ox_attr_str(n, "keep_aspect_ratio_policy", "stretch"), "stretch") != 0)
                return OX_E_UNSUPPORTED;
        }
    }
    /* scales or sizes: input 1 (Resize-10), inputs 2 and 3 (11 and later) */
    double scales[OX_MAX_RANK];
    int64_t sizes[OX_MAX_RANK], n_sizes = 0;
    int n_scales = 0;
    int isc = legacy ? 1 : 2, isz = legacy ? -1 : 3;
    ox_status st;
    if (isz > 0 && ox_in(n, in, isz) && ox_tensor_numel(in[isz]) > 0 &&
        (st = const_ints(in, isz, const_inputs, sizes, OX_MAX_RANK, &n_sizes)))
        return st;
    if (ox_in(n, in, isc) && ox_tensor_numel(in[isc]) > 0) {
        struct tn_host h;
        if ((st = host_input(in, isc, const_inputs, &h))) return st;
        int64_t k = ox_tensor_numel(&h.t);
        if (!ox_dtype_is_float(h.t.dtype) || k > OX_MAX_RANK) return OX_E_UNSUPPORTED;
        for (int64_t i = 0; i < k; i++) scales[i] = ox_get_f64(&h.t, i);
        n_scales = (int)k;
    }
    if ((n_sizes > 0) == (n_scales > 0)) return OX_E_UNSUPPORTED;
    for (int d = 0; d < r; d++) p->in[d] = x->dims[d];
    if (n_sizes) {
        if (n_sizes != r) return OX_E_UNSUPPORTED;
        for (int d = 0; d < r; d++) {
            if (sizes[d] < 0 || (p->in[d] == 0 && sizes[d] > 0)) return OX_E_UNSUPPORTED;
            p->scale[d] = p->in[d] ? (double)sizes[d] / (double)p->in[d] : 1.0;
            p->out[d] = sizes[d];
        }
    } else {
        if (n_scales != r) return OX_E_UNSUPPORTED;
        for (int d = 0; d < r; d++) {
            double v = scales[d] * (double)p->in[d];
            if (!(scales[d] > 0) || !(v < 9.2e18)) return OX_E_UNSUPPORTED;
            p->scale[d] = scales[d];
            p->out[d] = (int64_t)floor(v);
        }
    }
    return OX_OK;
}

/* Position in the input of output coordinate j on axis d (the CPU's rsz_coord). */
static double rz_coord(const struct rz_params *p, int d, int64_t j) {
    double x = (double)j, s = p->scale[d], in = (double)p->in[d];
    double out_w = s * in;
    switch (p->ctm) {
    case RZ_HALF_PIXEL: return (x + 0.5) / s - 0.5;
    case RZ_PYTORCH_HALF_PIXEL: return p->out[d] > 1 ? (x + 0.5) / s - 0.5 : 0;
    case RZ_ALIGN_CORNERS: return out_w == 1 ? 0 : x * (in - 1) / (out_w - 1);
    default: return x / s;
    }
}

/* The taps of output coordinate j on axis d (the CPU's rsz_taps for these modes). */
static struct rz_tap rz_taps(const struct rz_params *p, int d, int64_t j) {
    struct rz_tap t;
    memset(&t, 0, sizeof t);
    double pos = rz_coord(p, d, j);
    int64_t n = p->in[d];
    double fl = floor(pos), r = pos - fl;
    int64_t base = (int64_t)fl;
    if (p->mode == RZ_NEAREST) {
        int64_t k;
        switch (p->nearest) {
        case RZ_ROUND_FLOOR: k = r <= 0.5 ? base : base + 1; break;
        case RZ_ROUND_CEIL: k = r < 0.5 ? base : base + 1; break;
        case RZ_FLOOR: k = base; break;
        case RZ_CEIL: k = r > 0 ? base + 1 : base; break;
        default: k = p->scale[d] < 1 ? (int64_t)ceil(pos) : (int64_t)pos; break;
        }
        t.i[0] = k < 0 ? 0 : k >= n ? n - 1 : k;
        t.w[0] = 1;
        t.n = 1;
        return t;
    }
    for (int64_t i = 0; i < 2; i++) {
        double wt = i == 0 ? 1 - r : r;
        int64_t k = base + i;
        if (wt == 0) continue;
        t.i[t.n] = k < 0 ? 0 : k >= n ? n - 1 : k;
        t.w[t.n++] = wt;
    }
    if (t.n == 0) {
        t.i[0] = base < 0 ? 0 : base >= n ? n - 1 : base;
        t.w[0] = 1;
        t.n = 1;
    }
    return t;
}

static bool rz_is_identity(const struct rz_tap *t, int64_t j) {
    return t->n == 1 && t->i[0] == j && t->w[0] == 1;
}

/* Nearest: tab[toff[d] + j] is the input element offset along axis d of output index j. */
struct rzn_args {
    int rank;
    tn_div ydims[OX_MAX_RANK];
    int64_t toff[OX_MAX_RANK];
};

template <typename T, typename I>
__global__ static void resize_nearest(T *__restrict__ y, const T *__restrict__ x,
                                      const int64_t *__restrict__ tab, rzn_args a, I n) {
    for (I i = first_item<I>(); i < n; i += grid_step<I>()) {
        I q = i;
        int64_t off = 0;
        for (int d = a.rank - 1; d >= 0; d--)
            off += tab[a.toff[d] + (int64_t)div_step(q, a.ydims[d])];
        y[i] = x[off];
    }
}

/* Linear over the last two axes [.., H, W] (H is 1 for rank 1), computed in double as the
 * CPU does: float rows as sum_h wh (sum_w ww x) (`factored`), the other types as
 * sum_h sum_w (wh ww) x. Products and sums are rounded one by one (no fused multiply-add),
 * as on the CPU. */
struct rzl_args {
    int64_t Hi, Wi;
    tn_div Ho, Wo;
};

__device__ static inline double rz_load(float v) {
    return (double)v;
}
__device__ static inline double rz_load(__half v) {
    return (double)__half2float(v);
}
__device__ static inline double rz_load(__nv_bfloat16 v) {
    return (double)__bfloat162float(v);
}
__device__ static inline double rz_load(double v) {
    return v;
}
__device__ static inline void rz_store(float *p, double v) {
    *p = (float)v;
}
__device__ static inline void rz_store(__half *p, double v) {
    *p = __float2half_rn((float)v);
}
__device__ static inline void rz_store(__nv_bfloat16 *p, double v) {
    *p = __float2bfloat16_rn((float)v); /* through float, as the CPU's ox_set_f64 */
}
__device__ static inline void rz_store(double *p, double v) {
    *p = v;
}

template <typename T, bool factored, typename I>
__global__ static void resize_linear(T *__restrict__ y, const T *__restrict__ x,
                                     const rz_tap *__restrict__ th, const rz_tap *__restrict__ tw,
                                     rzl_args a, I n) {
    for (I i = first_item<I>(); i < n; i += grid_step<I>()) {
        I b = i, ow = div_step(b, a.Wo), oh = div_step(b, a.Ho);
        const T *xp = x + (int64_t)b * a.Hi * a.Wi;
        const rz_tap h = th[oh], w = tw[ow];
        double acc = 0;
#pragma unroll
        for (int p = 0; p < 2; p++) {
            if (p >= h.n) break;
            const T *row = xp + h.i[p] * a.Wi;
            if (factored) {
                double s = 0;
#pragma unroll
                for (int q = 0; q < 2; q++)
                    if (q < w.n) s = __dadd_rn(s, __dmul_rn(w.w[q], rz_load(row[w.i[q]])));
                acc = __dadd_rn(acc, __dmul_rn(h.w[p], s));
            } else {
#pragma unroll
                for (int q = 0; q < 2; q++)
                    if (q < w.n)
                        acc = __dadd_rn(acc,
                                        __dmul_rn(__dmul_rn(h.w[p], w.w[q]), rz_load(row[w.i[q]])));
            }
        }
        rz_store(y + i, acc);
    }
}

struct tn_resize {
    int mode; /* RZ_NEAREST, RZ_LINEAR; -1: a plain copy */
    size_t es;
    ox_dtype dtype;
    void *tables; /* device: nearest int64 offsets, linear rz_tap rows (H then W) */
    struct rzn_args nn;
    struct rzl_args lin;
};

void ox_cu_tn_release_resize(void *state) {
    struct tn_resize *s = (struct tn_resize *)state;
    if (!s) return;
    if (s->tables) cudaFree(s->tables);
    free(s);
}

ox_status ox_cu_tn_prepare_resize(struct ox_cuda_ctx *c, const struct ox_node *n,
                                  const ox_tensor *const *in, ox_tensor *const *out,
                                  unsigned const_inputs, void **state, size_t *workspace) {
    (void)c, (void)workspace;
    const ox_tensor *x = in[0];
    struct rz_params p;
    if (x->rank < 1 || out[0]->dtype != x->dtype) return OX_E_UNSUPPORTED;
    ox_status st = rz_parse(n, in, const_inputs, &p);
    if (st) return st;
    if (!same_dims(out[0], p.rank, p.out)) return OX_E_UNSUPPORTED;
    struct tn_resize s;
    memset(&s, 0, sizeof s);
    s.mode = p.mode;
    s.dtype = x->dtype;
    s.es = move_size(x->dtype);
    if (p.mode == RZ_NEAREST && !s.es) return OX_E_UNSUPPORTED;
    if (p.mode == RZ_LINEAR && x->dtype != OX_FLOAT && x->dtype != OX_FLOAT16 &&
        x->dtype != OX_BFLOAT16 && x->dtype != OX_DOUBLE)
        return OX_E_UNSUPPORTED;
    int r = p.rank;
    /* the taps of every axis, and which axes map each index to itself */
    int64_t total = 0, toff[OX_MAX_RANK];
    for (int d = 0; d < r; d++) toff[d] = total, total += p.out[d];
    struct rz_tap *taps = (struct rz_tap *)malloc(sizeof(struct rz_tap) * (size_t)(total + 1));
    if (!taps) return ox_err(OX_E_NOMEM, "out of memory");
    bool ident[OX_MAX_RANK], all_ident = true;
    for (int d = 0; d < r; d++) {
        ident[d] = p.in[d] == p.out[d];
        for (int64_t j = 0; j < p.out[d]; j++) {
            taps[toff[d] + j] = rz_taps(&p, d, j);
            if (!rz_is_identity(&taps[toff[d] + j], j)) ident[d] = false;
        }
        all_ident = all_ident && ident[d];
    }
    void *host = NULL;
    size_t bytes = 0;
    if (all_ident || ox_tensor_numel(out[0]) == 0) {
        s.mode = -1; /* the CPU copies the input as it is */
        if (!s.es) s.es = ox_dtype_size(x->dtype);
    } else if (p.mode == RZ_NEAREST) {
        int64_t xs[OX_MAX_RANK];
        tn_strides(r, p.in, xs);
        int64_t *tab = (int64_t *)malloc(sizeof(int64_t) * (size_t)total);
        if (!tab) {
            free(taps);
            return ox_err(OX_E_NOMEM, "out of memory");
        }
        for (int d = 0; d < r; d++)
            for (int64_t j = 0; j < p.out[d]; j++)
                tab[toff[d] + j] = taps[toff[d] + j].i[0] * xs[d];
        s.nn.rank = r;
        for (int d = 0; d < r; d++) s.nn.ydims[d] = div_make(p.out[d]);
        memcpy(s.nn.toff, toff, sizeof(int64_t) * (size_t)r);
        host = tab;
        bytes = sizeof(int64_t) * (size_t)total;
    } else {
        for (int d = 0; d + 2 < r; d++)
            if (!ident[d]) {
                free(taps);
                return OX_E_UNSUPPORTED;
            }
        int W = r - 1, H = r - 2;
        int64_t s_Wo = p.out[W], s_Ho = H >= 0 ? p.out[H] : 1;
        s.lin.Wi = p.in[W], s.lin.Wo = div_make(s_Wo);
        s.lin.Hi = H >= 0 ? p.in[H] : 1, s.lin.Ho = div_make(s_Ho);
        struct rz_tap *tl = (struct rz_tap *)malloc(sizeof(struct rz_tap) * (size_t)(s_Ho + s_Wo));
        if (!tl) {
            free(taps);
            return ox_err(OX_E_NOMEM, "out of memory");
        }
        if (H >= 0) {
            memcpy(tl, taps + toff[H], sizeof(struct rz_tap) * (size_t)s_Ho);
        } else {
            memset(tl, 0, sizeof *tl);
            tl[0].w[0] = 1;
            tl[0].n = 1;
        }
        memcpy(tl + s_Ho, taps + toff[W], sizeof(struct rz_tap) * (size_t)s_Wo);
        host = tl;
        bytes = sizeof(struct rz_tap) * (size_t)(s_Ho + s_Wo);
    }
    free(taps);
    if (host) {
        st = ox_cu_check(cudaMalloc(&s.tables, bytes), "Resize tables");
        if (!st)
            st = ox_cu_check(cudaMemcpy(s.tables, host, bytes, cudaMemcpyHostToDevice),
                             "Resize tables");
        free(host);
        if (!st) st = keep_state(state, &s, sizeof s);
        if (st && s.tables) cudaFree(s.tables);
        return st;
    }
    return keep_state(state, &s, sizeof s);
}

ox_status ox_cu_tn_resize(struct ox_cuda_ctx *c, const struct ox_node *n,
                          const ox_tensor *const *in, ox_tensor *const *out) {
    (void)n;
    const struct tn_resize *s = (const struct tn_resize *)c->state;
    int64_t total = ox_tensor_numel(out[0]);
    if (total == 0) return OX_OK;
    if (s->mode < 0)
        return ox_cu_check(cudaMemcpyAsync(out[0]->data, in[0]->data, (size_t)total * s->es,
                                           cudaMemcpyDeviceToDevice, c->stream),
                           "Resize");
    unsigned blocks = ox_cu_blocks(total);
    if (s->mode == RZ_NEAREST) {
        with_elem(s->es, [&](auto t) {
            using T = decltype(t);
            with_index(total, [&](auto ix) {
                using I = decltype(ix);
                resize_nearest<T, I><<<blocks, TN_THREADS, 0, c->stream>>>(
                    (T *)out[0]->data, (const T *)in[0]->data, (const int64_t *)s->tables, s->nn,
                    (I)total);
            });
        });
        return ox_cu_launched("Resize");
    }
    const rz_tap *th = (const rz_tap *)s->tables, *tw = th + s->lin.Ho.d;
    with_index(total, [&](auto ix) {
        using I = decltype(ix);
        if (s->dtype == OX_FLOAT)
            resize_linear<float, true, I><<<blocks, TN_THREADS, 0, c->stream>>>(
                (float *)out[0]->data, (const float *)in[0]->data, th, tw, s->lin, (I)total);
        else if (s->dtype == OX_FLOAT16)
            resize_linear<__half, false, I><<<blocks, TN_THREADS, 0, c->stream>>>(
                (__half *)out[0]->data, (const __half *)in[0]->data, th, tw, s->lin, (I)total);
        else if (s->dtype == OX_BFLOAT16)
            resize_linear<__nv_bfloat16, false, I><<<blocks, TN_THREADS, 0, c->stream>>>(
                (__nv_bfloat16 *)out[0]->data, (const __nv_bfloat16 *)in[0]->data, th, tw, s->lin,
                (I)total);
        else
            resize_linear<double, false, I><<<blocks, TN_THREADS, 0, c->stream>>>(
                (double *)out[0]->data, (const double *)in[0]->data, th, tw, s->lin, (I)total);
    });
    return ox_cu_launched("Resize");
}
