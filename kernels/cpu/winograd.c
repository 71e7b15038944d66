/* Winograd F(4x4, 3x3) convolution (Lavin and Gray, "Fast Algorithms for Convolutional
 * Neural Networks", 2015): each 4x4 block of outputs ("tile") of an output channel is
 *
 *     Y = A^T [ sum over input channels c of U_c (.) V_c ] A,
 *     U_c = G g_c G^T (the 3x3 filter, 6x6), V_c = B^T d_c B (the tile's 6x6 inputs),
 *
 * so that the 36 elementwise products of a tile replace 144 multiply-adds: for each of the
 * 36 positions e of the 6x6 transform, the sum over c is one GEMM of the tiles' V (tiles x C)
 * by the filters' U (C x M). The matrices interpolate at 0, 1, -1, 1/2, -2 and infinity
 * rather than Lavin's 0, +-1, +-2: about half the rounding error (Barabasz, Anderson and
 * Gregg, "Error analysis and improving the accuracy of Winograd convolution", 2020; here
 * the worst random case of tests/test_nn.c fell from 5.5e-6 to 2.4e-6 of the outputs'
 * magnitude; the direct GEMM's stay below 1e-6). The tiles of all images are numbered in
 * one sequence and done in blocks (block_tiles), each whole on one thread, in its own
 * scratch:
 *
 *   1. input transform: 16 tiles at a time ("chunks"), read with masked loads (zeros for the
 *      pads), down the columns then across, stored as the packed A operand of sgemm.c
 *      (panels of 8 tiles), one per position e;
 *   2. the 36 GEMMs (sgemm.c, the filters packed once as its B operand) into P: tile-major,
 *      the 36 positions' rows of M outputs side by side;
 *   3. output transform: for each tile and 16 output channels, the 36 values A^T . A,
 *      + bias, + the residual, the activation, stored into the image.
 *
 * Each output is the same function of the inputs whatever the blocks or threads (every
 * GEMM sums over c in sgemm's fixed order; tests/test_nn.c checks it). Measured
 * (docs/PERFORMANCE.md, tools/conv_layers.py): 2.3-3x faster than the direct GEMM on
 * resnet's 3x3 layers.
 */
#include "kernels/cpu/winograd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include "kernels/cpu/vecmath.h"
#define HAVE_WINO 1
#endif

#define NE 36 /* positions of the 6x6 transform */

/* The transformed inputs and products of a block take 36 (C + M) floats a tile: blocks of
 * about this many bytes keep them in the L2 and L3 caches between the three steps. */
#define BLOCK_BYTES (2 << 20)

static int64_t round_up(int64_t v, int64_t m) {
    return (v + m - 1) / m * m;
}

static int64_t tiles_w(const struct ox_wino *g) {
    return (g->OW + 3) / 4;
}

static int64_t tiles_per_image(const struct ox_wino *g) {
    return (g->OH + 3) / 4 * tiles_w(g);
}

/* The most tiles of one block: a multiple of 8 (a panel of the GEMMs' A). */
static int64_t block_tiles(const struct ox_wino *g) {
    int64_t total = round_up(g->N * tiles_per_image(g), 8);
    int64_t tb = BLOCK_BYTES / (NE * (g->C + g->M) * 4) / 8 * 8;
    if (tb < 8) tb = 8;
    return tb < total ? tb : total;
}

/* OX_WINOGRAD=0 in the environment turns the Winograd form off (for comparisons: the
 * direct GEMM then runs every convolution); read once. */
static bool wino_enabled(void) {
    static int on = -1; /* -1: not read yet */
    int v = __atomic_load_n(&on, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *e = getenv("OX_WINOGRAD");
        v = !(e && !strcmp(e, "0"));
        __atomic_store_n(&on, v, __ATOMIC_RELAXED);
    }
    return v == 1;
}

bool ox_wino_applies(const struct ox_wino *g) {
#ifdef HAVE_WINO
    if (!wino_enabled() || !ox_sgemm_is_fast() || g->OH < 1 || g->OW < 1) return false;
    /* few channels: the GEMMs' depth (C) or width (M) too small for the transforms to pay */
    if (g->C < 8 || g->M < 16) return false;
    /* U is 4x the filters' size and streams from memory once a block: it must be shared by
     * enough tiles. 512 channels in and out at 7 x 7 (4 tiles an image), alone, one thread:
     * batch 1 1.8x slower than the direct GEMM, batch 2 the same, batch 4 1.8x faster; 256
     * channels at 14 x 14 (16 tiles) 3x faster at batch 1 */
    if (g->N * tiles_per_image(g) < 16) return false;
    /* the transformed filters stay in memory for the session: at most 16 MiB a layer (256
     * channels in and out: 9.4 MB; 512 and 512, 37.7 MB, would have raised resnet18's peak
     * RSS at batch 8 from 121 to 233 MiB, past ONNX Runtime's, for 15% of its time) */
    if ((double)ox_wino_weight_floats(g->C, g->M) * 4 > 16.0 * (1 << 20)) return false;
    return true;
#else
    (void)g;
    return false;
#endif
}

int64_t ox_wino_weight_floats(int64_t C, int64_t M) {
    return NE * ox_sgemm_packed_b_floats(C, M);
}

/* U = G g G^T for each (output channel m, input channel c), in double; position e of U is
 * element (c, m) of the e-th packed B (sgemm.c: column blocks of OX_GEMM_NR). */
void ox_wino_pack_weights(const float *w, int64_t C, int64_t M, float *dst) {
    static const double G[6][3] = {{1, 0, 0},
                                   {1.0 / 3, 1.0 / 3, 1.0 / 3},
                                   {-1.0 / 3, 1.0 / 3, -1.0 / 3},
                                   {-16.0 / 15, -8.0 / 15, -4.0 / 15},
                                   {1.0 / 15, -2.0 / 15, 4.0 / 15},
                                   {0, 0, 1}};
    int64_t per = ox_sgemm_packed_b_floats(C, M), NR = OX_GEMM_NR;
    memset(dst, 0, sizeof(float) * (size_t)(NE * per));
    /* a column block's channels innermost: each position's writes go to consecutive floats */
    for (int64_t m0 = 0; m0 < M; m0 += NR)
        for (int64_t c = 0; c < C; c++)
            for (int64_t m = m0; m < M && m < m0 + NR; m++) {
                const float *f = w + (m * C + c) * 9;
                double t[6][3], u;
                for (int i = 0; i < 6; i++)
                    for (int k = 0; k < 3; k++)
                        t[i][k] = G[i][0] * f[k] + G[i][1] * f[3 + k] + G[i][2] * f[6 + k];
                float *d = dst + m0 * C + c * NR + (m - m0);
                for (int i = 0; i < 6; i++)
                    for (int k = 0; k < 6; k++) {
                        u = t[i][0] * G[k][0] + t[i][1] * G[k][1] + t[i][2] * G[k][2];
                        d[(i * 6 + k) * per] = (float)u;
                    }
            }
}

/* A thread's scratch: V (a block's transformed inputs: 36 packed A operands of tiles x C,
 * panels of 8 tiles) and P (the block's products).
 *
 * Floats from one position's V to the next: the 36 are written side by side, and at a
 * multiple of 4 KiB apart they would all fall in one set of the L1 cache (the input
 * transform ran 5x slower so): one cache line past a multiple of 4 KiB puts them in 36
 * consecutive sets. */
static int64_t v_stride(const struct ox_wino *g, int64_t tb) {
    return round_up(round_up(tb, OX_GEMM_MR) * g->C, 1024) + 16;
}

static int64_t v_floats(const struct ox_wino *g, int64_t tb) {
    return NE * v_stride(g, tb);
}

/* Floats from one tile's products to the next: 36 rows of M, and a cache line more where
 * that is a multiple of 4 KiB (the GEMMs store 8 tiles' rows at a time). */
static int64_t p_stride(const struct ox_wino *g) {
    return NE * g->M % 1024 ? NE * g->M : NE * g->M + 16;
}

static int64_t p_floats(const struct ox_wino *g, int64_t tb) {
    return tb * p_stride(g);
}

/* Scratch of one thread: V and P of a block. */
static int64_t slot_floats(const struct ox_wino *g) {
    int64_t tb = block_tiles(g);
    return round_up(v_floats(g, tb), 16) + round_up(p_floats(g, tb), 16);
}

int64_t ox_wino_scratch_floats(const struct ox_wino *g, int n_threads) {
    return slot_floats(g) * (n_threads > 1 ? n_threads : 1);
}

#ifdef HAVE_WINO

struct wino_job {
    const struct ox_wino *g;
    const float *x, *pw, *bias, *z;
    float *y, *scratch;
    float lo, hi;
    bool silu;
    int64_t tb; /* tiles of a block (the last may have fewer) */
};

/* A block: tiles [t0, t0 + tb) of all images, its V and P. */
struct wino_blk {
    int64_t t0, tb, mp; /* mp: tb rounded up to 8 */
    float *V, *P;
};

/* Block b of the job, in the scratch slot of thread tid: its tail rows of V zeroed. */
static struct wino_blk wino_blk(const struct wino_job *j, int64_t b, int tid) {
    const struct ox_wino *g = j->g;
    int64_t total = g->N * tiles_per_image(g);
    struct wino_blk k = {.t0 = b * j->tb};
    k.tb = total - k.t0 < j->tb ? total - k.t0 : j->tb;
    k.mp = round_up(k.tb, 8);
    k.V = j->scratch + tid * slot_floats(g);
    k.P = k.V + round_up(v_floats(g, block_tiles(g)), 16);
    if (k.tb % 8) /* rows of the last panel past the tiles: zeros, never garbage */
        for (int64_t p = 0; p < NE; p++)
            for (int64_t k0 = 0; k0 < g->C; k0 += OX_GEMM_KC) {
                int64_t kc = g->C - k0 < OX_GEMM_KC ? g->C - k0 : OX_GEMM_KC;
                memset(k.V + p * v_stride(g, k.tb) + k0 * k.mp + (k.mp - 8) * kc, 0,
                       sizeof(float) * (size_t)(8 * kc));
            }
    return k;
}

/* o = B^T d for six vectors: the input transform along one axis. */
__attribute__((target("avx512f"), always_inline)) static inline void bt6(const __m512 d[6],
                                                                         __m512 o[6]) {
    __m512 t31 = _mm512_sub_ps(d[3], d[1]), t42 = _mm512_sub_ps(d[4], d[2]);
    __m512 h = _mm512_set1_ps(0.5f), one5 = _mm512_set1_ps(1.5f), two = _mm512_set1_ps(2.0f);
    __m512 two5 = _mm512_set1_ps(2.5f);
    o[0] = _mm512_fmadd_ps(one5, t31, _mm512_fnmadd_ps(two, d[2], _mm512_add_ps(d[0], d[4])));
    o[1] = _mm512_fmadd_ps(two5, d[3], _mm512_fmadd_ps(h, d[2], _mm512_sub_ps(d[4], d[1])));
    o[2] = _mm512_fmadd_ps(h, d[3], _mm512_fnmadd_ps(two5, d[2], _mm512_add_ps(d[4], d[1])));
    o[3] = _mm512_fmadd_ps(two, t31, t42);
    o[4] = _mm512_fnmadd_ps(h, t31, t42);
    o[5] = _mm512_fmadd_ps(one5, t42, _mm512_fnmadd_ps(two, d[3], _mm512_add_ps(d[5], d[1])));
}

/* o = A^T m for six vectors: the output transform along one axis (four outputs). */
__attribute__((target("avx512f"), always_inline)) static inline void at4(const __m512 m[6],
                                                                         __m512 o[4]) {
    __m512 s12 = _mm512_add_ps(m[1], m[2]), d12 = _mm512_sub_ps(m[1], m[2]);
    o[0] = _mm512_add_ps(_mm512_add_ps(m[0], s12), _mm512_add_ps(m[3], m[4]));
    o[1] = _mm512_fnmadd_ps(_mm512_set1_ps(2.0f), m[4],
                            _mm512_fmadd_ps(_mm512_set1_ps(0.5f), m[3], d12));
    o[2] = _mm512_fmadd_ps(_mm512_set1_ps(4.0f), m[4],
                           _mm512_fmadd_ps(_mm512_set1_ps(0.25f), m[3], s12));
    o[3] = _mm512_add_ps(_mm512_fnmadd_ps(_mm512_set1_ps(8.0f), m[4],
                                          _mm512_fmadd_ps(_mm512_set1_ps(0.125f), m[3], d12)),
                         m[5]);
}

/* Lanes 4 l + ph (l < 8) of a0:a1 in lanes 0-7 and of a2:a3 in lanes 8-15: phase ph of 64
 * floats taken four at a time. */
__attribute__((target("avx512f"), always_inline)) static inline __m512
phase4(__m512 a0, __m512 a1, __m512 a2, __m512 a3, int ph) {
    __m512i lo = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 28, 24, 20, 16, 12, 8, 4, 0);
    __m512i hi = _mm512_set_epi32(28, 24, 20, 16, 12, 8, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    __m512i add = _mm512_set1_epi32(ph);
    return _mm512_mask_blend_ps(0xFF00, _mm512_permutex2var_ps(a0, _mm512_add_epi32(lo, add), a1),
                                _mm512_permutex2var_ps(a2, _mm512_add_epi32(hi, add), a3));
}

/* Where the lanes of a row chunk go in V: tiles tl0.. (cnt of them) lie in up to three
 * panels of 8 from panel tl0 / 8; its i-th takes lanes from[i] + q at the positions q of
 * mask[i]. The vectors are made and kept in vector registers and stores (made through
 * scalar stores, each reload would wait for them). */
__attribute__((target("avx512f"), always_inline)) static inline int
chunk_dst(int64_t tl0, int64_t cnt, __m512i from[3], __mmask8 mask[3]) {
    int np = (int)((tl0 + cnt - 1) / 8 - tl0 / 8 + 1);
    __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    for (int i = 0; i < 3; i++) {
        int64_t first = (tl0 / 8 + i) * 8 - tl0; /* the lane for position 0 */
        unsigned m = 0;
        for (int q = 0; q < 8; q++)
            if (i < np && first + q >= 0 && first + q < cnt) m |= 1u << q;
        mask[i] = (__mmask8)m;
        from[i] = _mm512_and_si512(_mm512_add_epi32(iota, _mm512_set1_epi32((int)first)),
                                   _mm512_set1_epi32(15));
    }
    return np;
}

/* A chunk: at most 16 consecutive tiles of a block (lanes), in segments that each lie in
 * one row of tiles of one image. Tile l's six input columns are columns 4 l..4 l + 5 of the
 * chunk's rows (80 columns, five vectors): segment s fills columns 4 off[s] on, the last
 * segment also the two after its tiles; the two columns after another segment are the next
 * one's first two, and go to the lanes that end segments (ends) separately. Inputs outside
 * the image (the pads) are zeros: masked off in vm and rows. */
struct chunk {
    int64_t tl0, cnt;    /* first tile (in the block) and tiles */
    int ns, nv;          /* segments, vectors of columns used */
    int64_t off[16];     /* segment s: its first lane, */
    int64_t n[16];       /* tiles, */
    int64_t src[16];     /* the index in channel 0 of its image of its first input (top left
                            of its first tile, in the padding when negative), */
    unsigned rows[16];   /* its input rows inside the image (bit jr), */
    __mmask16 vm[5][16]; /* its columns inside the image in each vector, */
    __mmask16 tail[16];  /* and whether its two columns after the tiles are (bits 0, 1) */
    __mmask16 ends;      /* lanes that end a segment before the last */
};

static void chunk_make(const struct wino_job *j, const struct wino_blk *k, int64_t tl0,
                       struct chunk *ch) {
    const struct ox_wino *g = j->g;
    int64_t T = tiles_per_image(g), tw = tiles_w(g), H = g->H, W = g->W;
    memset(ch, 0, sizeof *ch);
    ch->tl0 = tl0;
    ch->cnt = k->tb - tl0 < 16 ? k->tb - tl0 : 16;
    ch->nv = (int)((4 * ch->cnt + 2 + 15) / 16);
    for (int64_t l = 0; l < ch->cnt;) {
        int64_t t = k->t0 + tl0 + l, n = t / T, ty = t % T / tw, tx = t % T % tw;
        int64_t cnt = tw - tx < ch->cnt - l ? tw - tx : ch->cnt - l;
        int64_t iy = 4 * ty - g->pt, ix = 4 * tx - g->pl;
        int s = ch->ns++;
        ch->off[s] = l;
        ch->n[s] = cnt;
        ch->src[s] = (n * g->C * H + iy) * W + ix;
        for (int jr = 0; jr < 6; jr++)
            if (iy + jr >= 0 && iy + jr < H) ch->rows[s] |= 1u << jr;
        l += cnt;
        if (l < ch->cnt) ch->ends |= (__mmask16)(1u << (l - 1));
        /* chunk columns [c0, c1) are this segment's, column q is input column ix + q - c0 */
        int64_t c0 = 4 * ch->off[s], c1 = 4 * l + (l < ch->cnt ? 0 : 2);
        for (int v = 0; v < ch->nv; v++)
            for (int q = 0; q < 16; q++) {
                int64_t col = 16 * v + q, in = ix + col - c0;
                if (col >= c0 && col < c1 && in >= 0 && in < W)
                    ch->vm[v][s] |= (__mmask16)(1u << q);
            }
        for (int e = 0; e < 2; e++)
            if (ix + 4 * cnt + e >= 0 && ix + 4 * cnt + e < W) ch->tail[s] |= (__mmask16)(1u << e);
    }
}

/* x + off for an offset that may lie before x (the padding left of a masked load's first
 * lane; the masked-off lanes are never read). */
static inline const float *at(const float *x, int64_t off) {
    return (const float *)((uintptr_t)x + (uintptr_t)(off * (int64_t)sizeof(float)));
}

/* V of every tile of block k, a chunk at a time, every input channel. For each channel, the
 * chunk's six input rows are transformed down the columns, a vector of 16 columns at a time
 * (each put together from its segments' rows by masked loads), into rows[]; then the
 * columns of the tiles are taken apart by phase (column 4 l + jc is lane l of phase jc) and
 * transformed across. rows[] is written and read in whole aligned vectors, so that each
 * read takes its data straight from the store before it. */
__attribute__((target("avx512f,avx512vl"))) static void input_chunks(const struct wino_job *j,
                                                                     const struct wino_blk *k) {
    const struct ox_wino *g = j->g;
    int64_t KC = OX_GEMM_KC, HW = g->H * g->W, W = g->W, vs = v_stride(g, k->tb);
    float rows[6][80] __attribute__((aligned(64)));
    float ext[2][6][16] __attribute__((aligned(64)));
    memset(rows, 0, sizeof rows);
    for (int64_t tl0 = 0; tl0 < k->tb; tl0 += 16) {
        struct chunk ch;
        chunk_make(j, k, tl0, &ch);
        __m512i from[3];
        __mmask8 mask[3];
        int np = chunk_dst(ch.tl0, ch.cnt, from, mask);
        for (int64_t c = 0; c < g->C; c++) {
            int64_t k0 = c / KC * KC, kc = g->C - k0 < KC ? g->C - k0 : KC;
            float *vt = k->V + k0 * k->mp + (c - k0) * 8 + ch.tl0 / 8 * 8 * kc;
            const float *xc = j->x + c * HW;
            for (int v = 0; v < ch.nv; v++) {
                __m512 d[6], o[6];
                for (int jr = 0; jr < 6; jr++) d[jr] = _mm512_setzero_ps();
                for (int s = 0; s < ch.ns; s++) {
                    if (!ch.vm[v][s]) continue;
                    int64_t off = ch.src[s] + 16 * v - 4 * ch.off[s];
                    for (int jr = 0; jr < 6; jr++)
                        if (ch.rows[s] >> jr & 1)
                            d[jr] = _mm512_mask_loadu_ps(d[jr], ch.vm[v][s], at(xc, off + jr * W));
                }
                bt6(d, o);
                for (int i = 0; i < 6; i++) _mm512_store_ps(rows[i] + 16 * v, o[i]);
            }
            if (ch.ends) { /* the two columns after each segment but the last */
                __m512 d4[6], d5[6], o[6];
                for (int jr = 0; jr < 6; jr++) d4[jr] = d5[jr] = _mm512_setzero_ps();
                for (int s = 0; s + 1 < ch.ns; s++) {
                    const float *xs = xc + ch.src[s] + 4 * ch.n[s];
                    __mmask16 lane = (__mmask16)(1u << (ch.off[s] + ch.n[s] - 1));
                    for (int jr = 0; jr < 6; jr++) {
                        if (!(ch.rows[s] >> jr & 1)) continue;
                        if (ch.tail[s] & 1)
                            d4[jr] = _mm512_mask_mov_ps(d4[jr], lane, _mm512_set1_ps(xs[jr * W]));
                        if (ch.tail[s] & 2)
                            d5[jr] =
                                _mm512_mask_mov_ps(d5[jr], lane, _mm512_set1_ps(xs[jr * W + 1]));
                    }
                }
                bt6(d4, o);
                for (int i = 0; i < 6; i++) _mm512_store_ps(ext[0][i], o[i]);
                bt6(d5, o);
                for (int i = 0; i < 6; i++) _mm512_store_ps(ext[1][i], o[i]);
            }
            for (int i = 0; i < 6; i++) {
                const float *r = rows[i];
                __m512 a0 = _mm512_load_ps(r), a1 = _mm512_load_ps(r + 16);
                __m512 a2 = _mm512_load_ps(r + 32), a3 = _mm512_load_ps(r + 48);
                __m512i a4 = _mm512_castps_si512(_mm512_load_ps(r + 64));
                __m512 d[6], o[6];
                for (int jc = 0; jc < 4; jc++) d[jc] = phase4(a0, a1, a2, a3, jc);
                /* columns 4 l + 4 and 4 l + 5: phases 0 and 1 a lane on, then r[64], r[65];
                 * at the end of a segment, the columns kept aside */
                d[4] = _mm512_castsi512_ps(_mm512_alignr_epi32(a4, _mm512_castps_si512(d[0]), 1));
                d[5] = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_alignr_epi32(a4, a4, 1),
                                                               _mm512_castps_si512(d[1]), 1));
                if (ch.ends) {
                    d[4] = _mm512_mask_load_ps(d[4], ch.ends, ext[0][i]);
                    d[5] = _mm512_mask_load_ps(d[5], ch.ends, ext[1][i]);
                }
                bt6(d, o);
                for (int kk = 0; kk < 6; kk++) {
                    float *de = vt + (i * 6 + kk) * vs;
                    for (int p = 0; p < np; p++)
                        _mm256_mask_storeu_ps(
                            de + p * 8 * kc, mask[p],
                            _mm512_castps512_ps256(_mm512_permutexvar_ps(from[p], o[kk])));
                }
            }
        }
    }
}

/* GEMMs [p0, p1) of the 36 of block k, on this thread. */
static void gemm_range(const struct wino_job *j, const struct wino_blk *k, int64_t p0, int64_t p1) {
    const struct ox_wino *g = j->g;
    int64_t per = ox_sgemm_packed_b_floats(g->C, g->M), vs = v_stride(g, k->tb);
    for (int64_t p = p0; p < p1; p++) {
        struct ox_gemm_b bb = {.packed = j->pw + p * per};
        ox_sgemm_packed(NULL, k->V + p * vs, k->tb, g->M, g->C, &bb, k->P + p * g->M, p_stride(g),
                        NULL, false);
    }
}

/* Stores lane group L of v (four outputs of one row of a tile) where it is valid. */
#define STORE4(L)                                                                                  \
    if (4 * (L) + kk < mn) _mm_mask_storeu_ps(yr + (L)*4 * plane, kq, _mm512_extractf32x4_ps(v, L))
#define LOAD4(L)                                                                                   \
    if (4 * (L) + kk < mn)                                                                         \
    zz = _mm512_insertf32x4(zz, _mm_maskz_loadu_ps(kq, zr + (L)*4 * plane), L)

/* The output transform of block k: for each tile and 16 output channels, A^T . A gives each row of
 * the tile's outputs as four vectors (one per column, lanes: channels); a 4 x 4 transpose in each
 * 128-bit lane turns them into four outputs of a row per lane group (channel 4 L + kk of vector kk
 * in lanes 4 L..4 L + 3), stored with one 128-bit store each. */
__attribute__((target("avx512f,avx512vl"))) static void outputs(const struct wino_job *j,
                                                                const struct wino_blk *k) {
    const struct ox_wino *g = j->g;
    int64_t M = g->M, T = tiles_per_image(g), tw = tiles_w(g);
    int64_t OH = g->OH, OW = g->OW, plane = OH * OW;
    __m512 lo = _mm512_set1_ps(j->lo), hi = _mm512_set1_ps(j->hi);
    for (int64_t tl = 0; tl < k->tb; tl++) {
        int64_t t = k->t0 + tl, n = t / T, oy = t % T / tw * 4, ox = t % T % tw * 4;
        int64_t rn = OH - oy < 4 ? OH - oy : 4, qn = OW - ox < 4 ? OW - ox : 4;
        __mmask8 kq = (__mmask8)((1u << qn) - 1);
        for (int64_t m0 = 0; m0 < M; m0 += 16) {
            int64_t mn = M - m0 < 16 ? M - m0 : 16;
            __mmask16 km = (__mmask16)((1u << mn) - 1);
            const float *p = k->P + tl * p_stride(g) + m0;
            __m512 s[4][6], o[4], m[6];
            for (int jc = 0; jc < 6; jc++) {
                for (int i = 0; i < 6; i++) m[i] = _mm512_maskz_loadu_ps(km, p + (i * 6 + jc) * M);
                at4(m, o);
                for (int r = 0; r < 4; r++) s[r][jc] = o[r];
            }
            __m512 bias = j->bias ? _mm512_maskz_loadu_ps(km, j->bias + m0) : _mm512_setzero_ps();
            for (int64_t r = 0; r < rn; r++) {
                at4(s[r], o);
                for (int q = 0; q < 4; q++) o[q] = _mm512_add_ps(o[q], bias);
                __m512 t0 = _mm512_unpacklo_ps(o[0], o[1]), t1 = _mm512_unpacklo_ps(o[2], o[3]);
                __m512 t2 = _mm512_unpackhi_ps(o[0], o[1]), t3 = _mm512_unpackhi_ps(o[2], o[3]);
                __m512 w[4] = {_mm512_shuffle_ps(t0, t1, 0x44), _mm512_shuffle_ps(t0, t1, 0xEE),
                               _mm512_shuffle_ps(t2, t3, 0x44), _mm512_shuffle_ps(t2, t3, 0xEE)};
                for (int kk = 0; kk < 4; kk++) {
                    int64_t off = ((n * M + m0 + kk) * OH + oy + r) * OW + ox;
                    __m512 v = w[kk];
                    if (j->z) {
                        const float *zr = j->z + off;
                        __m512 zz = _mm512_setzero_ps();
                        LOAD4(0);
                        LOAD4(1);
                        LOAD4(2);
                        LOAD4(3);
                        v = _mm512_add_ps(v, zz);
                    }
                    v = j->silu ? silu16(v) : _mm512_min_ps(hi, _mm512_max_ps(lo, v));
                    float *yr = j->y + off;
                    STORE4(0);
                    STORE4(1);
                    STORE4(2);
                    STORE4(3);
                }
            }
        }
    }
}

/* Blocks [b, e), each whole on this thread (its own V and P). */
static void block_piece(void *arg, int64_t b, int64_t e, int tid) {
    const struct wino_job *j = arg;
    for (int64_t i = b; i < e; i++) {
        struct wino_blk k = wino_blk(j, i, tid);
        input_chunks(j, &k);
        gemm_range(j, &k, 0, NE);
        outputs(j, &k);
    }
}

struct gemm_split {
    const struct wino_job *j;
    const struct wino_blk *k;
};

static void gemm_piece(void *arg, int64_t b, int64_t e, int tid) {
    (void)tid;
    const struct gemm_split *s = arg;
    gemm_range(s->j, s->k, b, e);
}

/* Where all the tiles make one block and the transformed filters are at least this large,
 * the threads share the 36 GEMMs of that block instead of its tiles (see ox_wino_conv). */
#define SPLIT_FILTER_BYTES (4 << 20)

/* The threads share the tiles: each does whole blocks, from the input to the output, with
 * no wait in between; at least one block per thread. But where all the tiles make one block
 * and the transformed filters take over 4 MiB, each thread would read all of them (from
 * memory, in a model) for a few tiles: then the inputs are transformed on this thread, the
 * threads share the 36 GEMMs (each reads the filters of its positions), and the outputs are
 * transformed here (resnet18's 256-channel 14 x 14 layers at batch 1, 2 threads, in the
 * model: 0.68-0.72 -> 0.52-0.61 ms; squeezenet1_1's 1.3-2.4 MB layers, whose filters stay in
 * cache, were slower that way: 0.10 -> 0.16 ms). The same outputs, bit for bit, either way.
 * (Sharing the output channels, after transforming the inputs together, was slower alone:
 * 0.32 ms against 0.20 for the 256-channel layer.) */
void ox_wino_conv(struct ox_pool *pool, const struct ox_wino *g, const float *x,
                  const float *packed_w, const float *bias, const float *z, float lo, float hi,
                  bool silu, float *y, float *scratch) {
    int T = ox_pool_size(pool);
    int64_t total = g->N * tiles_per_image(g), TB = block_tiles(g);
    struct wino_job j = {.g = g,
                         .x = x,
                         .pw = packed_w,
                         .bias = bias,
                         .z = z,
                         .y = y,
                         .scratch = scratch,
                         .lo = lo,
                         .hi = hi,
                         .silu = silu};
    if (T > 1 && total <= TB &&
        (double)ox_wino_weight_floats(g->C, g->M) * sizeof(float) >= SPLIT_FILTER_BYTES) {
        j.tb = total;
        struct wino_blk k = wino_blk(&j, 0, 0);
        input_chunks(&j, &k);
        struct gemm_split s = {&j, &k};
        ox_parallel_for(pool, NE, gemm_piece, &s);
        outputs(&j, &k);
        return;
    }
    int64_t blocks = (total + TB - 1) / TB;
    if (blocks < T) blocks = T;
    j.tb = (total + blocks - 1) / blocks; /* blocks of even size */
    ox_parallel_for(pool, (total + j.tb - 1) / j.tb, block_piece, &j);
}

#else

void ox_wino_conv(struct ox_pool *pool, const struct ox_wino *g, const float *x,
                  const float *packed_w, const float *bias, const float *z, float lo, float hi,
                  bool silu, float *y, float *scratch) {
    (void)pool, (void)g, (void)x, (void)packed_w, (void)bias, (void)z, (void)lo, (void)hi;
    (void)silu, (void)y, (void)scratch; /* never called: ox_wino_applies is false */
}

#endif
