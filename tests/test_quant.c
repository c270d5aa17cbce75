/* The quantized block types Q8_0, Q4_0, Q4_K, Q6_K and Q5_K against the `gguf` package (llama.cpp's
   gguf-py numpy code): tests/fixtures/quant/quant-ref.gguf, written by tools/gen_quant_fixtures.py,
   whose header lists every key and tensor read here.

   - traits: names, block and byte sizes, the GGUF type ids both ways
   - dequantization bit-exact (the float bits compared) on blocks made without our code: gguf's
     quantization of edge-case rows, and random bytes with random finite f16 scales
   - our quantizer against gguf's on the same rows (Q8_0, Q4_0): Q8_0's bytes must be gguf's; Q4_0's
     blocks may differ only on near ties, with an error no larger than gguf's
   - the error of our quantizer on a Gaussian matrix: near gguf's where gguf quantizes, near
     llama.cpp's reference quantizer's for the K types, under a bound from the format (a plain
     min/max grid with exact scales) for all five
   - requantizing already-quantized values does not get worse
   - get_rows, cpy (both ways) and mul_mat (quantized weights times f32) through a CPU backend
     graph, with every kernel set the machine runs and 1..3 threads, against a double-precision
     reference computed from the dequantized weights (mul_mat: exact f32 activations, or with the
     SIMD sets the error budget of 8-bit activations, see matmul_case)
   - shapes a block type cannot have are rejected with an error naming the op

   MMS_TEST_SEED=n replays the random parts (the mul_mat and cpy inputs). */
#define MMSCHED_IMPLEMENTATION
#include "../mmsched.h"
#include "test.h"
#include "kernel_sets.h"

#include <math.h>

#define F32 MMS_TYPE_F32
#define I32 MMS_TYPE_I32

struct qtype {
    enum mms_type type;
    const char   *name;
    uint32_t      ggml_type;
    int64_t       blck;
    size_t        size;
    bool          gguf_quantizes;   /* gguf.quants has a quantizer for it */
};

static const struct qtype qtypes[5] = {
    { MMS_TYPE_Q8_0, "q8_0",  8,  32,  34, true  },
    { MMS_TYPE_Q4_0, "q4_0",  2,  32,  18, true  },
    { MMS_TYPE_Q4_K, "q4_k", 12, 256, 144, false },
    { MMS_TYPE_Q6_K, "q6_k", 14, 256, 210, false },
    { MMS_TYPE_Q5_K, "q5_k", 13, 256, 176, false },
};
#define N_QTYPES 5

static struct mms_gguf *g_fix;
static mms_backend_t    g_backend;
static const char      *g_kernels = "";
static int              g_turn;

/* ================================================================================================
   The fixture */

/* A copy of tensor `name` (GGUF type ggml_type: 0 f32, 24 i8), its ne[0], ne[1] and byte size. */
static void *fx_tensor(const char *name, uint32_t ggml_type, int64_t *ne0, int64_t *ne1, size_t *size) {
    struct mms_gguf_tensor_info info;
    int64_t i = mms_gguf_find_tensor(g_fix, name);
    void *copy;
    if (i < 0 || mms_gguf_get_tensor(g_fix, i, &info) != MMS_OK) {
        printf("fixture: no tensor '%s' (%s)\n", name, mms_last_error());
        exit(2);
    }
    if (info.ggml_type != ggml_type || info.n_dims > 2) {
        printf("fixture: tensor '%s' has GGUF type %u and %d dims, expected type %u\n", name,
               (unsigned)info.ggml_type, info.n_dims, (unsigned)ggml_type);
        exit(2);
    }
    copy = malloc(info.size ? info.size : 1);
    memcpy(copy, info.data, info.size);
    if (ne0) *ne0 = info.ne[0];
    if (ne1) *ne1 = info.ne[1];
    if (size) *size = info.size;
    return copy;
}

static float *fx_f32(const char *name, int64_t *ne0, int64_t *ne1) {
    return (float *)fx_tensor(name, 0, ne0, ne1, NULL);
}

/* Raw blocks of type q: checks they are [type_size, n] and returns n. */
static unsigned char *fx_blocks(const struct qtype *q, const char *what, int64_t *n_blocks) {
    char name[64];
    int64_t ne0, ne1;
    unsigned char *b;
    snprintf(name, sizeof name, "%s.%s", q->name, what);
    b = (unsigned char *)fx_tensor(name, 24, &ne0, &ne1, NULL);
    if (ne0 != (int64_t)q->size) { printf("fixture: '%s' has rows of %lld bytes\n", name, (long long)ne0); exit(2); }
    *n_blocks = ne1;
    return b;
}

static uint32_t fx_u32(const char *key) {
    uint32_t v = 0;
    if (mms_gguf_get_u32(g_fix, key, &v) != MMS_OK) { printf("fixture: %s\n", mms_last_error()); exit(2); }
    return v;
}

static float fx_key_f32(const char *key) {
    float v = 0;
    if (mms_gguf_get_f32(g_fix, key, &v) != MMS_OK) { printf("fixture: %s\n", mms_last_error()); exit(2); }
    return v;
}

static uint32_t fx_u32_of(const struct qtype *q, const char *what) {
    char key[64];
    snprintf(key, sizeof key, "%s.%s", q->name, what);
    return fx_u32(key);
}

static float fx_f32_of(const struct qtype *q, const char *what) {
    char key[64];
    snprintf(key, sizeof key, "%s.%s", q->name, what);
    return fx_key_f32(key);
}

/* ================================================================================================
   Helpers: errors, bounds, the library's conversions */

static double sq_err(const float *a, const float *b, int64_t n) {
    double s = 0, d;
    int64_t i;
    for (i = 0; i < n; i++) { d = (double)a[i] - (double)b[i]; s += d * d; }
    return s;
}

static double sq_sum(const float *a, int64_t n) {
    double s = 0;
    int64_t i;
    for (i = 0; i < n; i++) s += (double)a[i] * (double)a[i];
    return s;
}

/* The squared error (summed) a plain grid of the format would give with exact scales, assuming a
   rounding error uniform over one step (step^2 / 12 per element):
   q8_0: per 32, symmetric, step amax / 127;   q4_0: per 32, step amax / 8 (16 levels);
   q4_k, q5_k: per 32, affine from min(min, 0) to max in 15 or 31 steps;   q6_k: per 16, symmetric,
   step amax / 31. */
static double naive_sq_err(enum mms_type t, const float *x, int64_t n) {
    int64_t sub = t == MMS_TYPE_Q6_K ? 16 : 32, i, j;
    double s = 0;
    for (i = 0; i + sub <= n; i += sub) {
        double lo = 0, hi = 0, amax = 0, step;
        for (j = 0; j < sub; j++) {
            double v = x[i + j];
            if (v < lo) lo = v;
            if (v > hi) hi = v;
            if (fabs(v) > amax) amax = fabs(v);
        }
        step = t == MMS_TYPE_Q8_0 ? amax / 127 : t == MMS_TYPE_Q4_0 ? amax / 8
             : t == MMS_TYPE_Q4_K ? (hi - lo) / 15 : t == MMS_TYPE_Q5_K ? (hi - lo) / 31 : amax / 31;
        s += (double)sub * step * step / 12;
    }
    return s;
}

/* The library's quantize and dequantize of n elements (n a multiple of the block size). */
static unsigned char *quantize(const struct qtype *q, const float *x, int64_t n) {
    size_t bytes = (size_t)(n / q->blck) * q->size;
    unsigned char *b = (unsigned char *)malloc(bytes ? bytes : 1);
    memset(b, 0xA5, bytes);
    mms_get_type_traits(q->type)->from_float(x, b, n);
    return b;
}

static float *dequantize(const struct qtype *q, const void *b, int64_t n) {
    float *y = (float *)malloc((size_t)(n ? n : 1) * sizeof(float));
    memset(y, 0xFF, (size_t)n * sizeof(float));
    mms_get_type_traits(q->type)->to_float(b, y, n);
    return y;
}

static double gauss_rand(void) {   /* Box-Muller on the seeded generator */
    double u1 = test_rand_uniform(0, 1), u2 = test_rand_uniform(0, 1);
    if (u1 < 1e-12) u1 = 1e-12;
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

static bool traits_ok(const struct qtype *q) {
    const struct mms_type_traits *tr = mms_get_type_traits(q->type);
    return tr && tr->to_float && tr->from_float && tr->blck_size == q->blck && tr->type_size == q->size;
}

/* ================================================================================================
   Traits */

static void test_traits(void) {
    int k;
    for (k = 0; k < N_QTYPES; k++) {
        const struct qtype *q = &qtypes[k];
        const struct mms_type_traits *tr = mms_get_type_traits(q->type);
        EXPECT((int)q->type == 5 + k, "%s is %d in enum mms_type", q->name, (int)q->type);
        EXPECT(tr != NULL, "traits of %s", q->name);
        if (!tr) continue;
        EXPECT(tr->name && strcmp(tr->name, q->name) == 0, "name %s, got %s", q->name, tr->name ? tr->name : "(null)");
        EXPECT(strcmp(mms_type_name(q->type), q->name) == 0, "mms_type_name %s", mms_type_name(q->type));
        EXPECT(tr->blck_size == q->blck && mms_blck_size(q->type) == q->blck, "%s blck_size %lld, got %lld / %lld",
               q->name, (long long)q->blck, (long long)tr->blck_size, (long long)mms_blck_size(q->type));
        EXPECT(tr->type_size == q->size && mms_type_size(q->type) == q->size, "%s type_size %zu, got %zu / %zu",
               q->name, q->size, tr->type_size, mms_type_size(q->type));
        EXPECT(mms_row_size(q->type, 4 * q->blck) == 4 * q->size, "%s row of 4 blocks: %zu bytes",
               q->name, mms_row_size(q->type, 4 * q->blck));
        EXPECT(tr->is_quantized && !tr->is_float, "%s is_quantized %d is_float %d", q->name, tr->is_quantized, tr->is_float);
        EXPECT(tr->to_float != NULL && tr->from_float != NULL, "%s to_float and from_float", q->name);
        EXPECT(mms_gguf_type_to_mms(q->ggml_type) == q->type, "GGUF type %u -> %s, got %d", (unsigned)q->ggml_type,
               q->name, (int)mms_gguf_type_to_mms(q->ggml_type));
        EXPECT(mms_gguf_type_from_mms(q->type) == (int)q->ggml_type, "%s -> GGUF type %u, got %d", q->name,
               (unsigned)q->ggml_type, mms_gguf_type_from_mms(q->type));
        /* the fixture agrees with the table above */
        EXPECT(fx_u32_of(q, "ggml_type") == q->ggml_type && fx_u32_of(q, "blck_size") == (uint32_t)q->blck &&
               fx_u32_of(q, "type_size") == (uint32_t)q->size, "fixture sizes of %s", q->name);
    }
}

/* ================================================================================================
   Dequantization: bit-exact against gguf on every fixture block */

static void test_dequantize_exact(void) {
    int k;
    for (k = 0; k < N_QTYPES; k++) {
        const struct qtype *q = &qtypes[k];
        int64_t nb, ne0, ne1, i, j, bad_blocks = 0;
        unsigned char *blocks;
        float *ref, *got;
        if (!traits_ok(q)) { EXPECT(0, "traits of %s", q->name); continue; }
        blocks = fx_blocks(q, "blocks", &nb);
        {
            char name[64];
            snprintf(name, sizeof name, "%s.deq", q->name);
            ref = fx_f32(name, &ne0, &ne1);
        }
        EXPECT(ne0 == q->blck && ne1 == nb, "%s.deq shape [%lld, %lld]", q->name, (long long)ne0, (long long)ne1);
        got = dequantize(q, blocks, nb * q->blck);
        for (i = 0; i < nb; i++) {
            const float *r = ref + i * q->blck, *g = got + i * q->blck;
            if (memcmp(r, g, (size_t)q->blck * sizeof(float)) == 0) continue;
            bad_blocks++;
            for (j = 0; j < q->blck; j++) {
                uint32_t rb, gb;
                memcpy(&rb, &r[j], 4);
                memcpy(&gb, &g[j], 4);
                if (rb != gb) {
                    EXPECT(rb == gb, "%s block %lld element %lld: gguf %.9g (0x%08x), ours %.9g (0x%08x)", q->name,
                           (long long)i, (long long)j, (double)r[j], (unsigned)rb, (double)g[j], (unsigned)gb);
                    break;
                }
            }
        }
        printf("    %s: %lld blocks dequantized, %lld differ from gguf in some bit\n", q->name, (long long)nb,
               (long long)bad_blocks);
        free(blocks);
        free(ref);
        free(got);
    }
}

/* ================================================================================================
   Our quantizer against gguf's (Q8_0, Q4_0): on the edge-case rows and on the Gaussian matrix.
   Q8_0 must give gguf's bytes exactly: gguf's quantizer is bit-exact with ggml's reference, which
   rounds once (roundf(x * id)), so no platform freedom is left. Q4_0's reference rounds x * id + 8.5
   once with FMA and twice without it (gguf emulates the FMA in float64), so there our bytes may
   differ on near ties; per block our squared error may then exceed gguf's only by the rounding of
   a near tie (relative 1e-6). */

static void compare_with_gguf(const struct qtype *q, const char *what, const float *x, int64_t n,
                              const unsigned char *theirs) {
    int64_t nb = n / q->blck, i, same = 0, better = 0, worse = 0;
    unsigned char *ours = quantize(q, x, n);
    float *yo = dequantize(q, ours, n), *yt = dequantize(q, theirs, n);
    double eo = 0, et = 0, worst = 0;
    for (i = 0; i < nb; i++) {
        const float *xb = x + i * q->blck;
        double bo = sq_err(yo + i * q->blck, xb, q->blck), bt = sq_err(yt + i * q->blck, xb, q->blck);
        eo += bo;
        et += bt;
        if (memcmp(ours + i * q->size, theirs + i * q->size, q->size) == 0) { same++; continue; }
        if (q->type == MMS_TYPE_Q8_0) {
            int j;
            for (j = 2; j < (int)q->size && ours[i * q->size + j] == theirs[i * q->size + j]; j++) {}
            EXPECT(0, "%s %s block %lld: bytes differ from gguf's: d %02x%02x / %02x%02x, first different value #%d: "
                   "x = %.9g, ours %d, gguf %d", q->name, what, (long long)i, ours[i * q->size + 1], ours[i * q->size],
                   theirs[i * q->size + 1], theirs[i * q->size], j - 2, j < (int)q->size ? (double)xb[j - 2] : 0.0,
                   j < (int)q->size ? (int)(signed char)ours[i * q->size + j] : 0,
                   j < (int)q->size ? (int)(signed char)theirs[i * q->size + j] : 0);
        }
        if (bo < bt) better++;
        if (bo > bt) {
            worse++;
            if (bt > 0 && bo / bt > worst) worst = bo / bt;
            EXPECT(bo <= bt * (1 + 1e-6) + 1e-45, "%s %s block %lld: our squared error %.9g > gguf's %.9g "
                   "(first bytes ours %02x%02x %02x%02x, gguf %02x%02x %02x%02x)", q->name, what, (long long)i, bo, bt,
                   ours[i * q->size], ours[i * q->size + 1], ours[i * q->size + 2], ours[i * q->size + 3],
                   theirs[i * q->size], theirs[i * q->size + 1], theirs[i * q->size + 2], theirs[i * q->size + 3]);
        }
    }
    printf("    %s %s: %lld of %lld blocks bit-identical to gguf, %lld with a smaller error, %lld larger "
           "(worst ratio %.6g); mse ours %.6g, gguf %.6g\n", q->name, what, (long long)same, (long long)nb,
           (long long)better, (long long)worse, worst, eo / (double)n, et / (double)n);
    free(ours);
    free(yo);
    free(yt);
}

static void test_quantize_vs_gguf(void) {
    int k;
    int64_t gne0, gne1;
    float *gauss = fx_f32("gauss", &gne0, &gne1);
    for (k = 0; k < N_QTYPES; k++) {
        const struct qtype *q = &qtypes[k];
        char name[64];
        int64_t ne0, ne1, nb;
        float *input;
        unsigned char *iq, *gq;
        if (!q->gguf_quantizes) continue;
        if (!traits_ok(q)) { EXPECT(0, "traits of %s", q->name); continue; }
        snprintf(name, sizeof name, "%s.input", q->name);
        input = fx_f32(name, &ne0, &ne1);
        iq = fx_blocks(q, "input_q", &nb);
        EXPECT(nb * q->blck == ne0 * ne1, "%s input_q blocks %lld", q->name, (long long)nb);
        compare_with_gguf(q, "input rows", input, ne0 * ne1, iq);
        gq = fx_blocks(q, "gauss_q", &nb);
        EXPECT(nb * q->blck == gne0 * gne1, "%s gauss_q blocks %lld", q->name, (long long)nb);
        compare_with_gguf(q, "gauss", gauss, gne0 * gne1, gq);
        free(input);
        free(iq);
        free(gq);
    }
    free(gauss);
}

/* ================================================================================================
   Quantization error on the Gaussian matrix, and requantization */

/* Q8_0, Q4_0: ours / gguf's mean squared error (per block test_quantize_vs_gguf is stricter).
   Q4_K, Q6_K, Q5_K: ours / llama.cpp's reference quantizer's (quantize_row_T_ref, what llama-quantize
   writes without an importance matrix; the fixture's T.ref_gauss_mse), at most REF_FACTOR of it
   (a Q6_K fit of one starting scale, as ours was before, lands 7% above); and ours /
   the plain grid's (naive_sq_err): a least-squares fit of each sub-block must
   do at least as well as rounding onto the min/max grid with exact scales (measured: about 0.77
   and 0.85; a quantizer that only rounds onto that grid with 6- or 8-bit scales lands at 1.0 or a
   little above, wrong rounding at 4x, a lost min or sign at several times). */
#define GAUSS_FACTOR 1.05
#define NAIVE_FACTOR 1.0
#define REF_FACTOR 1.01

static void test_gauss_error(void) {
    int k;
    int64_t ne0, ne1, n;
    float *x = fx_f32("gauss", &ne0, &ne1);
    double ms = fx_key_f32("gauss.mean_sq");
    n = ne0 * ne1;
    EXPECT(fabs(sq_sum(x, n) / (double)n - ms) <= 1e-6 * ms, "gauss.mean_sq %.9g", ms);
    for (k = 0; k < N_QTYPES; k++) {
        const struct qtype *q = &qtypes[k];
        unsigned char *b;
        float *y;
        double mse, naive;
        if (!traits_ok(q)) { EXPECT(0, "traits of %s", q->name); continue; }
        b = quantize(q, x, n);
        y = dequantize(q, b, n);
        mse = sq_err(y, x, n) / (double)n;
        naive = naive_sq_err(q->type, x, n) / (double)n;
        if (q->gguf_quantizes) {
            double theirs = fx_f32_of(q, "gauss_mse");
            printf("    %s: normalised mse ours %.6g, gguf %.6g (ratio %.4f, limit %.2f); plain grid %.6g\n", q->name,
                   mse / ms, theirs / ms, mse / theirs, GAUSS_FACTOR, naive / ms);
            EXPECT(mse <= GAUSS_FACTOR * theirs, "%s: mse %.6g > %.2f x gguf's %.6g", q->name, mse, GAUSS_FACTOR, theirs);
        } else {
            const double ref = fx_f32_of(q, "ref_gauss_mse"), limit = REF_FACTOR;
            printf("    %s: normalised mse ours %.6g, llama.cpp's reference quantizer %.6g (ratio %.4f, limit %.2f)\n", q->name,
                   mse / ms, ref / ms, mse / ref, limit);
            EXPECT(mse <= limit * ref, "%s: mse %.6g > %.2f x llama.cpp's reference quantizer's %.6g", q->name, mse, limit, ref);
            printf("    %s: normalised mse ours %.6g, bound %.6g (%.2f x the plain grid's; ratio to it %.4f)\n",
                   q->name, mse / ms, NAIVE_FACTOR * naive / ms, NAIVE_FACTOR, mse / naive);
            EXPECT(mse <= NAIVE_FACTOR * naive, "%s: mse %.6g > %.2f x the plain grid's %.6g", q->name, mse, NAIVE_FACTOR, naive);
        }
        free(b);
        free(y);
    }
    free(x);
}

/* Dequantize, quantize, dequantize: (1) on our own quantization of the Gaussian matrix the second
   pass may not add more error than the first made (and for Q8_0/Q4_0, whose grids our quantizer
   lands on exactly, it adds none); (2) on gguf's Q8_0/Q4_0 blocks of the edge-case rows the values
   come back exactly; (3) on the tame random Q4_K/Q6_K blocks (values exactly on the format's grid)
   the error stays under the format bound of test_gauss_error. */
static void test_requantize(void) {
    int k;
    int64_t ne0, ne1, n;
    float *x = fx_f32("gauss", &ne0, &ne1);
    n = ne0 * ne1;
    for (k = 0; k < N_QTYPES; k++) {
        const struct qtype *q = &qtypes[k];
        unsigned char *b1, *b2, *blocks, *zq;
        float *y1, *y2, *z, *w;
        double e1, e2, ez, nz, ss;
        int64_t nb, tame, i, nt, diff = 0;
        if (!traits_ok(q)) { EXPECT(0, "traits of %s", q->name); continue; }
        b1 = quantize(q, x, n);
        y1 = dequantize(q, b1, n);
        b2 = quantize(q, y1, n);
        y2 = dequantize(q, b2, n);
        e1 = sq_err(y1, x, n);
        e2 = sq_err(y2, y1, n);
        printf("    %s: gauss requantized: first pass mse %.6g, second pass adds %.6g (%s bytes)\n", q->name,
               e1 / (double)n, e2 / (double)n, memcmp(b1, b2, (size_t)(n / q->blck) * q->size) ? "different" : "identical");
        EXPECT(e2 <= e1, "%s: requantizing adds %.6g, more than the first pass's %.6g", q->name, e2, e1);
        if (q->gguf_quantizes) EXPECT(e2 == 0, "%s: requantizing its own output changes values (%.6g)", q->name, e2);

        blocks = fx_blocks(q, "blocks", &nb);
        tame = (int64_t)fx_u32_of(q, "n_blocks_tame");
        EXPECT(tame > 0 && tame <= nb, "%s n_blocks_tame %lld", q->name, (long long)tame);
        nt = tame * q->blck;
        z = dequantize(q, blocks, nt);
        zq = quantize(q, z, nt);
        w = dequantize(q, zq, nt);
        ez = sq_err(w, z, nt);
        ss = sq_sum(z, nt);
        nz = naive_sq_err(q->type, z, nt);
        for (i = 0; i < nt; i++) diff += w[i] != z[i];
        printf("    %s: %lld tame fixture blocks requantized: %lld of %lld values change, normalised mse %.6g "
               "(bound %.6g)\n", q->name, (long long)tame, (long long)diff, (long long)nt, ss > 0 ? ez / ss : 0.0,
               ss > 0 ? NAIVE_FACTOR * nz / ss : 0.0);
        if (q->gguf_quantizes) EXPECT(diff == 0, "%s: %lld values of gguf's blocks change when requantized", q->name, (long long)diff);
        else EXPECT(ez <= NAIVE_FACTOR * nz, "%s: requantized error %.6g > bound %.6g", q->name, ez, NAIVE_FACTOR * nz);
        free(b1);
        free(b2);
        free(y1);
        free(y2);
        free(blocks);
        free(zq);
        free(z);
        free(w);
    }
    free(x);
}

/* ================================================================================================
   Ops through a CPU backend graph */

struct gcase {
    struct mms_context  *ctx, *wctx;   /* wctx: weights in a buffer of their own (CPU_REPACK) */
    mms_backend_buffer_t buf, wbuf;
    struct mms_cgraph   *graph;
    int                  n_threads;
};

static void gcase_begin(struct gcase *c) {
    memset(c, 0, sizeof *c);
    c->ctx = test_ctx(true);
    if (!c->ctx) { printf("mms_init failed: %s\n", mms_last_error()); exit(2); }
}

static void gcase_end(struct gcase *c) {
    mms_backend_buffer_free(c->buf);
    mms_free(c->ctx);
    mms_backend_buffer_free(c->wbuf);
    mms_free(c->wctx);
}

/* Builds the graph of out, allocates every tensor of the context (poisoned with 0xFF), returns false
   with a recorded failure if anything fails. */
static bool gcase_alloc(struct gcase *c, struct mms_tensor *out, const char *label) {
    struct mms_tensor *t;
    if (!out) { EXPECT(out != NULL, "%s: building the op failed: %s", label, mms_last_error()); return false; }
    mms_set_output(out);
    c->graph = mms_new_graph(c->ctx);
    mms_build_forward_expand(c->graph, out);
    if (mms_graph_status(c->graph) != MMS_OK) { EXPECT(0, "%s: graph: %s", label, mms_graph_error(c->graph)); return false; }
    c->buf = mms_backend_alloc_ctx_tensors(c->ctx, g_backend);
    if (!c->buf) { EXPECT(0, "%s: alloc: %s", label, mms_last_error()); return false; }
    for (t = mms_get_first_tensor(c->ctx); t; t = mms_get_next_tensor(c->ctx, t))
        if (!t->view_src && mms_nbytes(t) > 0) mms_backend_tensor_memset(t, 0xFF, 0, mms_nbytes(t));
    return true;
}

static bool gcase_compute(struct gcase *c, const char *label) {
    enum mms_status st;
    c->n_threads = 1 + g_turn++ % 3;
    mms_backend_cpu_set_n_threads(g_backend, c->n_threads);
    st = mms_backend_graph_compute(g_backend, c->graph);
    EXPECT(st == MMS_OK, "%s (%d threads): compute failed: %s", label, c->n_threads, mms_last_error());
    return st == MMS_OK;
}

static void *gcase_get(const struct mms_tensor *t, size_t size) {
    void *p = malloc(size ? size : 1);
    if (mms_backend_tensor_get(t, p, 0, size) != MMS_OK) { printf("test bug: get failed: %s\n", mms_last_error()); abort(); }
    return p;
}

/* get_rows from each type's fixture blocks, laid out as a matrix: the rows equal gguf's
   dequantization exactly. */
static void test_get_rows(void) {
    static const int32_t idx[7] = { 3, 0, 5, 3, 1, 7, 2 };
    int k;
    for (k = 0; k < N_QTYPES; k++) {
        const struct qtype *q = &qtypes[k];
        struct gcase c;
        struct mms_tensor *a, *ix, *out;
        int64_t nb, ne0, ne1, bpr, rows, i;
        unsigned char *blocks;
        float *deq, *got;
        char label[128], name[64];
        if (!traits_ok(q)) { EXPECT(0, "traits of %s", q->name); continue; }
        blocks = fx_blocks(q, "blocks", &nb);
        snprintf(name, sizeof name, "%s.deq", q->name);
        deq = fx_f32(name, &ne0, &ne1);
        bpr = nb / 8;             /* 8 rows */
        rows = 8;
        snprintf(label, sizeof label, "get_rows %s[%lld,%lld] x 7", q->name, (long long)(bpr * q->blck), (long long)rows);
        gcase_begin(&c);
        a = mms_new_tensor_2d(c.ctx, q->type, bpr * q->blck, rows);
        ix = mms_new_tensor_1d(c.ctx, I32, 7);
        out = a && ix ? mms_get_rows(c.ctx, a, ix) : NULL;
        if (gcase_alloc(&c, out, label)) {
            EXPECT(out->type == F32 && out->ne[0] == bpr * q->blck && out->ne[1] == 7, "%s: result %s [%lld,%lld]", label,
                   mms_type_name(out->type), (long long)out->ne[0], (long long)out->ne[1]);
            mms_backend_tensor_set(a, blocks, 0, (size_t)(bpr * rows) * q->size);
            mms_backend_tensor_set(ix, idx, 0, sizeof idx);
            if (gcase_compute(&c, label)) {
                size_t row_f = (size_t)(bpr * q->blck);
                got = (float *)gcase_get(out, row_f * 7 * sizeof(float));
                for (i = 0; i < 7; i++)
                    EXPECT(memcmp(got + (size_t)i * row_f, deq + (size_t)idx[i] * row_f, row_f * sizeof(float)) == 0,
                           "%s (%d threads): row %lld (source row %d) differs from gguf's dequantization", label,
                           c.n_threads, (long long)i, idx[i]);
                free(got);
            }
        }
        gcase_end(&c);
        free(blocks);
        free(deq);
    }
}

/* cpy f32 -> q equals from_float's bytes; cpy q -> f32 equals gguf's dequantization. */
static void test_cpy(void) {
    int k;
    for (k = 0; k < N_QTYPES; k++) {
        const struct qtype *q = &qtypes[k];
        struct gcase c;
        struct mms_tensor *src, *dst, *out;
        int64_t K = 2 * 256, R = 5, n = K * R, i, nb, ne0, ne1;
        float *x = (float *)malloc((size_t)n * sizeof(float)), *deq, *gotf;
        unsigned char *want, *got, *blocks;
        char label[128], name[64];
        if (!traits_ok(q)) { EXPECT(0, "traits of %s", q->name); free(x); continue; }
        for (i = 0; i < n; i++) x[i] = (float)(gauss_rand() * (1 + i / K));
        want = quantize(q, x, n);

        snprintf(label, sizeof label, "cpy f32[%lld,%lld] -> %s", (long long)K, (long long)R, q->name);
        gcase_begin(&c);
        src = mms_new_tensor_2d(c.ctx, F32, K, R);
        dst = mms_new_tensor_2d(c.ctx, q->type, K, R);
        out = src && dst ? mms_cpy(c.ctx, src, dst) : NULL;
        if (gcase_alloc(&c, out, label)) {
            mms_backend_tensor_set(src, x, 0, (size_t)n * sizeof(float));
            if (gcase_compute(&c, label)) {
                size_t bytes = (size_t)(n / q->blck) * q->size;
                got = (unsigned char *)gcase_get(dst, bytes);
                for (i = 0; i < n / q->blck; i++)
                    if (memcmp(got + i * q->size, want + i * q->size, q->size) != 0) {
                        EXPECT(0, "%s (%d threads): block %lld differs from from_float's", label, c.n_threads, (long long)i);
                        break;
                    }
                free(got);
            }
        }
        gcase_end(&c);

        blocks = fx_blocks(q, "blocks", &nb);
        snprintf(name, sizeof name, "%s.deq", q->name);
        deq = fx_f32(name, &ne0, &ne1);
        snprintf(label, sizeof label, "cpy %s[%lld,4] -> f32", q->name, (long long)(nb / 4 * q->blck));
        gcase_begin(&c);
        src = mms_new_tensor_2d(c.ctx, q->type, nb / 4 * q->blck, 4);
        dst = mms_new_tensor_2d(c.ctx, F32, nb / 4 * q->blck, 4);
        out = src && dst ? mms_cpy(c.ctx, src, dst) : NULL;
        if (gcase_alloc(&c, out, label)) {
            mms_backend_tensor_set(src, blocks, 0, (size_t)(nb / 4 * 4) * q->size);
            if (gcase_compute(&c, label)) {
                size_t nf = (size_t)(nb / 4 * 4 * q->blck);
                gotf = (float *)gcase_get(dst, nf * sizeof(float));
                EXPECT(memcmp(gotf, deq, nf * sizeof(float)) == 0, "%s (%d threads): differs from gguf's dequantization",
                       label, c.n_threads);
                free(gotf);
            }
        }
        gcase_end(&c);
        free(blocks);
        free(deq);
        free(want);
        free(x);
    }
}

/* mul_mat: a = quantized weights [K, M, A2], b = f32 [K, N, B2] -> [M, N, B2], against a
   double-precision product of the dequantized weights and b. MM_VIEWS (A2 = B2 = 1 only): a is rows
   1..M of a [K, M + 2] matrix and b a view with rows 8 floats apart. MM_REPACKED (A2 = 1): a lives
   in a CPU_REPACK buffer; the test checks that its memory really holds another layout (a type
   without one is stored as it is) and that reading it back gives the bytes set.

   Two honest budgets. Exact f32 activations (the scalar kernels, and any path that dequantizes the
   weights to f32): only float rounding, about K * 2^-48 relative, measured 1e-13 to 3e-13;
   MATMUL_TOL = 1e-10 leaves room for any summation order and still catches a scale misread by a
   relative 1e-4. 8-bit activations (the SIMD decode paths round each block of activations -- 32
   for Q8_0 and Q4_0, 256 for the K types -- to int8 with step amax / 127 for integer dot products): every activation moves by at most half a
   step, so each output may move by at most sum_k |w_k| * step_k / 2 (checked per element, plus
   float rounding), and the expected squared error is sum_k w_k^2 * step_k^2 / 12: about 1e-5
   here, which is what 8-bit activations cost. The normalised error must stay under 4x that
   prediction (measured/predicted over 6000 random cases: median 0.95, 99th percentile 1.6,
   largest 2.2; rounding activations with step amax / 126 instead of / 127 already lands at 5x to
   7x, and a wrong offset or scale in an integer dot is far outside both checks). With a SIMD set
   either budget is accepted for every N, since which N take the integer path is the library's
   choice; the scalar kernels must keep the exact budget. Returns the normalised squared error
   (-1 when it could not run); *pred gets the predicted normalised error of 8-bit activations. */
#define MATMUL_TOL 1e-10
enum mm_layout { MM_PLAIN, MM_VIEWS, MM_REPACKED };
static double matmul_case(const struct qtype *q, int64_t K, int64_t M, int64_t N, int64_t A2, int64_t B2, enum mm_layout layout,
                          bool allow_q8_act, double *pred) {
    const bool views = layout == MM_VIEWS;
    struct gcase c;
    struct mms_tensor *a, *b, *out, *ra = NULL, *rb = NULL;
    /* the SIMD decode paths' activation blocks: 256 for the K types (one scale per super-block), else 32 */
    const int64_t ablk = q->blck == 256 ? 256 : 32;
    int64_t na = K * M * A2, nbv = K * N * B2, no = M * N * B2, nblk = K / ablk, i, m, n, j, kk;
    float *w = (float *)malloc((size_t)na * sizeof(float)), *x = (float *)malloc((size_t)nbv * sizeof(float));
    float *wd, *got;
    unsigned char *wq;
    double *ref = (double *)malloc((size_t)no * sizeof(double)), *bound = (double *)malloc((size_t)no * sizeof(double));
    double *step = (double *)malloc((size_t)(nblk * N * B2) * sizeof(double));
    double num = 0, den = 0, nmse = -1, var = 0;
    char label[160];
    bool finite = true;
    for (i = 0; i < na; i++) w[i] = (float)gauss_rand();
    for (i = 0; i < nbv; i++) x[i] = test_rand_uniform(-1, 1);
    for (i = 0; i < nblk * N * B2; i++) {   /* the 8-bit step of each block of activations */
        double amax = 0;
        for (kk = 0; kk < ablk; kk++) amax = fabs(x[i * ablk + kk]) > amax ? fabs(x[i * ablk + kk]) : amax;
        step[i] = amax / 127;
    }
    wq = quantize(q, w, na);
    wd = dequantize(q, wq, na);
    for (j = 0; j < B2; j++)
        for (n = 0; n < N; n++)
            for (m = 0; m < M; m++) {
                const float *wr = wd + K * (m + M * (j / (B2 / A2))), *xr = x + K * (n + N * j);
                const double *sr = step + nblk * (n + N * j);
                double s = 0, sabs = 0, bnd = 0;
                for (kk = 0; kk < K; kk++) {
                    s += (double)wr[kk] * (double)xr[kk];
                    sabs += fabs((double)wr[kk] * (double)xr[kk]);
                    bnd += fabs((double)wr[kk]) * sr[kk / ablk] / 2;
                    var += (double)wr[kk] * (double)wr[kk] * sr[kk / ablk] * sr[kk / ablk] / 12;
                }
                ref[m + M * (n + N * j)] = s;
                bound[m + M * (n + N * j)] = bnd * (1 + 1e-3) + (double)(K + 4) * 1.2e-7 * (sabs + bnd);
            }
    snprintf(label, sizeof label, "%s/mul_mat %s[%lld,%lld,%lld] x f32[%lld,%lld,%lld]%s", g_kernels, q->name, (long long)K,
             (long long)M, (long long)A2, (long long)K, (long long)N, (long long)B2,
             views ? " (views)" : layout == MM_REPACKED ? " (CPU_REPACK)" : "");
    gcase_begin(&c);
    if (layout == MM_REPACKED) {
        c.wctx = test_ctx(true);
        a = mms_new_tensor_2d(c.wctx, q->type, K, M);
        b = mms_new_tensor_3d(c.ctx, F32, K, N, B2);
    } else if (views) {
        ra = mms_new_tensor_2d(c.ctx, q->type, K, M + 2);
        rb = mms_new_tensor_2d(c.ctx, F32, K + 8, N);
        a = ra ? mms_view_2d(c.ctx, ra, K, M, ra->nb[1], ra->nb[1]) : NULL;
        b = rb ? mms_view_2d(c.ctx, rb, K, N, rb->nb[1], 0) : NULL;
    } else {
        a = mms_new_tensor_3d(c.ctx, q->type, K, M, A2);
        b = mms_new_tensor_3d(c.ctx, F32, K, N, B2);
    }
    out = a && b ? mms_mul_mat(c.ctx, a, b) : NULL;
    if (gcase_alloc(&c, out, label)) {
        EXPECT(out->type == F32 && out->ne[0] == M && out->ne[1] == N && out->ne[2] == B2, "%s: result %s [%lld,%lld,%lld]",
               label, mms_type_name(out->type), (long long)out->ne[0], (long long)out->ne[1], (long long)out->ne[2]);
        if (layout == MM_REPACKED) {
            const size_t size = (size_t)(na / q->blck) * q->size;
            unsigned char *back;
            c.wbuf = mms_backend_alloc_ctx_tensors_from_buft(c.wctx, mms_backend_cpu_repack_buffer_type());
            EXPECT(c.wbuf != NULL, "%s: CPU_REPACK buffer: %s", label, mms_last_error());
            if (!c.wbuf) { gcase_end(&c); return -1; }
            EXPECT(mms_backend_tensor_set(a, wq, 0, size) == MMS_OK, "%s: set: %s", label, mms_last_error());
            EXPECT((memcmp(a->data, wq, size) != 0) == mms_backend_cpu_repacks(a), "%s: the memory %s the bytes set", label,
                   mms_backend_cpu_repacks(a) ? "holds (not repacked)" : "differs from");
            back = (unsigned char *)gcase_get(a, size);
            EXPECT(memcmp(back, wq, size) == 0, "%s: reading the weights back does not give the bytes set", label);
            free(back);
            mms_backend_tensor_set(b, x, 0, (size_t)nbv * sizeof(float));
        } else if (views) {
            size_t row = (size_t)(K / q->blck) * q->size;
            mms_backend_tensor_set(ra, wq, row, (size_t)M * row);   /* rows 1..M; rows 0 and M+1 stay poisoned */
            for (i = 0; i < N; i++) mms_backend_tensor_set(rb, x + i * K, (size_t)i * rb->nb[1], (size_t)K * sizeof(float));
        } else {
            mms_backend_tensor_set(a, wq, 0, (size_t)(na / q->blck) * q->size);
            mms_backend_tensor_set(b, x, 0, (size_t)nbv * sizeof(float));
        }
        if (gcase_compute(&c, label)) {
            int64_t over = 0, first = -1;
            got = (float *)gcase_get(out, (size_t)no * sizeof(float));
            for (i = 0; i < no; i++) {
                double d = (double)got[i] - ref[i];
                if (!isfinite(got[i])) finite = false;
                if (!(fabs(d) <= bound[i]) && over++ == 0) first = i;
                num += d * d;
                den += ref[i] * ref[i];
            }
            nmse = num / den;
            *pred = var / den;
            EXPECT(finite, "%s (%d threads): non-finite results (an element never written?)", label, c.n_threads);
            if (allow_q8_act && nmse > MATMUL_TOL) {
                EXPECT(over == 0, "%s (%d threads): %lld outputs move more than 8-bit activations allow (first #%lld: "
                       "got %.9g, exact %.9g, bound %.3g)", label, c.n_threads, (long long)over, (long long)first,
                       first >= 0 ? (double)got[first] : 0.0, first >= 0 ? ref[first] : 0.0, first >= 0 ? bound[first] : 0.0);
                EXPECT(nmse <= 4 * *pred, "%s (%d threads): normalised squared error %.3g > 4 x %.3g, the 8-bit "
                       "activations' expected error", label, c.n_threads, nmse, *pred);
            } else {
                EXPECT(nmse <= MATMUL_TOL, "%s (%d threads): normalised squared error %.3g > %.1g%s", label, c.n_threads,
                       nmse, MATMUL_TOL, allow_q8_act ? "" : " (exact f32 activations)");
            }
            free(got);
        }
    }
    gcase_end(&c);
    free(w);
    free(x);
    free(wq);
    free(wd);
    free(ref);
    free(bound);
    free(step);
    return finite ? nmse : -1;
}

/* The product of the quantized weights wq [K, M] with the N activation rows x, NULL on failure;
   repacked: the weights in a CPU_REPACK buffer. */
static float *product_in(const struct qtype *q, const unsigned char *wq, int64_t K, int64_t M, const float *x, int64_t N, bool repacked) {
    struct gcase c;
    struct mms_tensor *a, *b, *out;
    float *got = NULL;
    gcase_begin(&c);
    if (repacked) c.wctx = test_ctx(true);
    a = mms_new_tensor_2d(repacked ? c.wctx : c.ctx, q->type, K, M);
    b = mms_new_tensor_2d(c.ctx, F32, K, N);
    out = a && b ? mms_mul_mat(c.ctx, a, b) : NULL;
    if (repacked && a) c.wbuf = mms_backend_alloc_ctx_tensors_from_buft(c.wctx, mms_backend_cpu_repack_buffer_type());
    if ((!repacked || c.wbuf) && gcase_alloc(&c, out, "product")) {
        mms_backend_tensor_set(a, wq, 0, (size_t)(K / q->blck * M) * q->size);
        mms_backend_tensor_set(b, x, 0, (size_t)(K * N) * sizeof(float));
        if (gcase_compute(&c, "product")) got = (float *)gcase_get(out, (size_t)(M * N) * sizeof(float));
    }
    gcase_end(&c);
    return got;
}

/* The AVX-512 set replaces AVX2 bodies with ones that compute the same integer sums (vpdpbusd for
   maddubs) and the same float operations in the same order (the f32 GEMM's 12 x 32 and 12 x 16 blocks), so
   each product gives AVX2's bits: f32 weights, and Q4_0, Q4_K, Q6_K, Q5_K and Q8_0 weights as they are and
   repacked, for decode and prompt sizes (not Q8_0 prompts past 8 columns: AVX2 dequantizes those,
   AVX-512 rounds their activations to 8 bits; nor f32 decode of up to 8 columns, which AVX-512
   sums in 16 lanes, AVX2 in 8; both are checked against the reference above and test_ops'). The
   32-value types' row dots also at K = 608 (19 blocks: AVX-512's Q4_0 body takes 4 blocks at a
   time and hands a pair and an odd block to AVX2's). */
static void test_x86_sets_agree(void) {
    static const struct qtype f32 = { MMS_TYPE_F32, "f32", 0, 1, 4, false };
    const struct qtype *types[6] = { &f32, &qtypes[0], &qtypes[1], &qtypes[2], &qtypes[3], &qtypes[4] };
    static const int64_t Ns[5] = { 1, 3, 8, 37, 64 };
    const int64_t K = 512, M = 83;   /* f32: a tile of 64 rows (two 32-row blocks), then 16 (one panel) and 3 */
    float *w = (float *)malloc(sizeof(float) * (size_t)(608 * M)), *x = (float *)malloc(sizeof(float) * (size_t)(K * 64));   /* 608 > K */
    int t, n, r, j, cases = 0, bad = 0;
    if (!mms_cpu_kernels_supported(MMS_CPU_KERNELS_AVX2) || !mms_cpu_kernels_supported(MMS_CPU_KERNELS_AVX512)) {
        test_skip("this CPU or build lacks the avx2 or the avx512 set");
        free(w);
        free(x);
        return;
    }
    for (j = 0; j < 608 * M; j++) w[j] = (float)gauss_rand();
    for (j = 0; j < K * 64; j++) x[j] = test_rand_uniform(-1, 1);
    for (t = 0; t < 6; t++) {
        const struct qtype *q = types[t];
        unsigned char *wq = q->type == MMS_TYPE_F32 ? (unsigned char *)w : quantize(q, w, K * M);
        for (r = 0; r < (q->type == MMS_TYPE_F32 ? 1 : 2); r++)
            for (n = 0; n < 5; n++) {
                float *got[2];
                if ((q->type == MMS_TYPE_Q8_0 && Ns[n] > 8) || (q->type == MMS_TYPE_F32 && Ns[n] <= 8)) continue;
                mms_cpu_set_kernels(MMS_CPU_KERNELS_AVX2);
                got[0] = product_in(q, wq, K, M, x, Ns[n], r == 1);
                mms_cpu_set_kernels(MMS_CPU_KERNELS_AVX512);
                got[1] = product_in(q, wq, K, M, x, Ns[n], r == 1);
                EXPECT(got[0] && got[1], "%s N = %d%s: the product failed", q->name, (int)Ns[n], r ? " repacked" : "");
                cases++;
                if (got[0] && got[1] && memcmp(got[0], got[1], sizeof(float) * (size_t)(M * Ns[n])) != 0) {
                    printf("    %s N = %d%s: avx512 differs from avx2\n", q->name, (int)Ns[n], r ? " repacked" : "");
                    bad++;
                }
                free(got[0]);
                free(got[1]);
            }
        if (wq != (unsigned char *)w) free(wq);
    }
    for (t = 1; t < 5; t++) {
        const struct qtype *q = types[t];
        unsigned char *wq;
        float *got[2];
        if (q->blck != 32) continue;
        wq = quantize(q, w, 608 * M);
        mms_cpu_set_kernels(MMS_CPU_KERNELS_AVX2);
        got[0] = product_in(q, wq, 608, M, x, 1, false);
        mms_cpu_set_kernels(MMS_CPU_KERNELS_AVX512);
        got[1] = product_in(q, wq, 608, M, x, 1, false);
        EXPECT(got[0] && got[1], "%s K = 608: the product failed", q->name);
        cases++;
        if (got[0] && got[1] && memcmp(got[0], got[1], sizeof(float) * (size_t)M) != 0) {
            printf("    %s K = 608 N = 1: avx512 differs from avx2\n", q->name);
            bad++;
        }
        free(got[0]);
        free(got[1]);
        free(wq);
    }
    printf("    %d products: avx512 gives avx2's bits in %d\n", cases, cases - bad);
    EXPECT(bad == 0, "%d of %d products differ between the avx2 and avx512 sets", bad, cases);
    mms_cpu_set_kernels(MMS_CPU_KERNELS_AUTO);
    free(w);
    free(x);
}

/* A decode step of up to 8 sequences gives each column the bits it gets alone, where every N <= 8
   runs the same per-column sums: Q8_0 weights as they are, and Q4_0, Q4_K, Q6_K and Q5_K weights
   kept repacked (the mllama loader's default), whose one-column and 4-column kernels sum alike.
   Q4_0, Q4_K, Q6_K and Q5_K weights as they are take repacked tiles past 4 columns and row dots below (both
   checked against the reference above). The NEON sets have no 4-column dots and take the f32 GEMM
   on dequantized weights past 4 columns: there the promise holds up to 4. An odd number of blocks:
   the dots alternate two accumulators; 21 rows: two groups of 8 and 5 rows as they were. */
static void test_mul_mat_columns(void) {
    static const struct { int type; bool repacked; } cases[5] = { { 0, false }, { 1, true }, { 2, true }, { 3, true }, { 4, true } };
    const enum mms_cpu_kernels set = mms_cpu_get_kernels();
    const int max_n = set == MMS_CPU_KERNELS_NEON || set == MMS_CPU_KERNELS_NEON_DOTPROD ? 4 : 8;
    int t, n, j;
    for (t = 0; t < 5; t++) {
        const struct qtype *q = &qtypes[cases[t].type];
        const bool r = cases[t].repacked;
        const int64_t K = q->blck == 256 ? 768 : 288, M = 21;
        float *w = (float *)malloc(sizeof(float) * (size_t)(K * M)), *x = (float *)malloc(sizeof(float) * (size_t)(K * 8)), *alone[8];
        unsigned char *wq;
        int bad = 0;
        for (j = 0; j < K * M; j++) w[j] = (float)gauss_rand();
        for (j = 0; j < K * 8; j++) x[j] = test_rand_uniform(-1, 1);
        wq = quantize(q, w, K * M);
        for (j = 0; j < 8; j++) alone[j] = product_in(q, wq, K, M, x + K * j, 1, r);
        for (n = 2; n <= max_n; n++) {
            float *got = product_in(q, wq, K, M, x, n, r);
            for (j = 0; got && j < n; j++) bad += !alone[j] || memcmp(got + M * j, alone[j], sizeof(float) * (size_t)M) != 0;
            EXPECT(got != NULL, "%s%s: the product of %d columns failed", q->name, r ? " repacked" : "", n);
            free(got);
        }
        EXPECT(bad == 0, "%s/%s%s: %d columns of the N = 2..%d products differ from the column alone", g_kernels, q->name,
               r ? " repacked" : "", bad, max_n);
        for (j = 0; j < 8; j++) free(alone[j]);
        free(wq);
        free(w);
        free(x);
    }
}

/* A Q6_K block's 6-bit code (0..63; the value is code - 32) of value i, as gguf lays them out:
   ql[128] (low 4 bits), qh[64] (high 2 bits), int8 scales[16] (one per 16 values), f16 d. */
static int q6_k_code(const unsigned char *blk, int i) {
    const int n = i / 128, q = i % 128 / 32, l = i % 32;
    const int lo = blk[64 * n + l + 32 * (q & 1)] >> (q >= 2 ? 4 : 0) & 0x0f, hi = blk[128 + 32 * n + l] >> (2 * q) & 3;
    return lo | hi << 4;
}

/* a * b + c rounded once to float without the C library's fmaf (MinGW's rounds twice): the
   product is exact in double, the sum is rounded to odd in double (53 bits >= 2 * 24 + 2), and
   that rounds to float as the exact sum would (Boldo and Melquiond's round-to-odd). */
static float fma_once(float a, float b, float c) {
    const double p = (double)a * (double)b, s = p + (double)c, t = s - p, err = (p - (s - t)) + ((double)c - t);
    double r = s;
    uint64_t bits;
    memcpy(&bits, &r, sizeof bits);
    if (err != 0.0 && !(bits & 1)) {   /* inexact and even: one step toward the exact sum makes it odd */
        bits = (err > 0.0) == (s > 0.0) ? bits + 1 : bits - 1;
        memcpy(&r, &bits, sizeof r);
    }
    return (float)r;
}

/* 64 columns of K activations for the tiles_exact tests: integers with a +-127 in every block of
   256, so they round to themselves with step 1 (no code of ours in the reference); all 127, all
   -127, alternating or random per block. */
static void tiles_exact_activations(float *x, int64_t K) {
    int64_t n, b, i;
    for (n = 0; n < 64; n++)
        for (b = 0; b < K / 256; b++) {
            const int mode = test_rand_int(0, 3);
            float *xb = x + n * K + b * 256;
            for (i = 0; i < 256; i++) xb[i] = (float)(mode == 0 ? 127 : mode == 1 ? -127 : mode == 2 ? (i % 2 ? -127 : 127) : test_rand_int(-127, 127));
            xb[test_rand_int(0, 255)] = test_rand_int(0, 1) ? 127.0f : -127.0f;
        }
}

/* Room for the weights (M rows of K), activations (64 columns) and results of a tiles_exact test, or a skip
   (why) and false on the sets without the x86 tiles. */
static bool tiles_exact_begin(const struct qtype *q, int64_t K, int64_t M, unsigned char **wq, float **x, float **want, const char *why) {
    const enum mms_cpu_kernels set = mms_cpu_get_kernels();
    if (set != MMS_CPU_KERNELS_AVX2 && set != MMS_CPU_KERNELS_AVX512) {
        test_skip(why);
        return false;
    }
    *wq = (unsigned char *)malloc((size_t)(K / 256 * M) * q->size);
    *x = (float *)malloc(sizeof(float) * (size_t)(K * 64));
    *want = (float *)malloc(sizeof(float) * (size_t)(M * 64));
    return true;
}

/* The products of wq [K, M] with the first 5, 8 and 64 columns of x, the weights as they are and
   kept repacked, against want's bits; then frees them. */
static void tiles_exact_end(const struct qtype *q, unsigned char *wq, int64_t K, int64_t M, float *x, float *want) {
    static const int64_t Ns[3] = { 5, 8, 64 };
    int64_t i;
    int r, ni, bad = 0, cases = 0;
    for (r = 0; r < 2; r++)
        for (ni = 0; ni < 3; ni++) {
            float *got = product_in(q, wq, K, M, x, Ns[ni], r == 1);
            int diff = 0;
            EXPECT(got != NULL, "%s %s N = %d%s: the product failed", g_kernels, q->name, (int)Ns[ni], r ? " repacked" : "");
            for (i = 0; got && i < M * Ns[ni]; i++) diff += memcmp(&got[i], &want[i], sizeof(float)) != 0;
            cases++;
            bad += diff != 0;
            if (diff) printf("    %s %s N = %d%s: %d of %d outputs differ from the exact integer sums\n", g_kernels, q->name, (int)Ns[ni], r ? " repacked" : "", diff, (int)(M * Ns[ni]));
            free(got);
        }
    printf("    %s: %d %s prompt products (plain and repacked) have the exact integer sums' bits in %d\n", g_kernels, cases, q->name, cases - bad);
    EXPECT(bad == 0, "%s: %d of %d %s prompt products differ from the exact integer sums", g_kernels, bad, cases, q->name);
    free(wq);
    free(x);
    free(want);
}

/* Q6_K prompt products on the x86 sets' 8-row kernels are exact integer sums per block of 256
   (AVX2 reads the values regrouped as unsigned bytes, code = value + 32; AVX-512 the 6-bit
   layout), so each output has the bits of acc = fma((float)isum_b, d_b * dx_b, acc), rounded
   once, over the blocks b in order, computed here from the blocks' bytes alone. Blocks at the
   extremes (every code 63 or 0, i.e. values 31 or -32; scales 127 or -128) against activations at +-127 (the
   8-bit rounding's extremes) make the AVX2 kernel's int16 sums as large as they get: a sum that
   saturated or wrapped would change the bits. Activations are integers with a +-127 in every
   block, so they round to themselves with step dx = 1 (no code of ours in the reference).
   Weights as they are and kept repacked; 21 rows (two groups of 8, then 5 rows); N = 5, 8, 64.
   Other kernel sets dequantize Q6_K for prompts (checked against the reference in mul_mat). */
static void test_q6_k_tiles_exact(void) {
    const struct qtype *q = &qtypes[3];
    const int64_t K = 768, M = 21, nb = K / 256;
    float d[3 * 21];
    unsigned char *wq;
    float *x, *want;
    int64_t m, n, b, i;
    if (!tiles_exact_begin(q, K, M, &wq, &x, &want, "this set dequantizes Q6_K for prompts")) return;
    for (b = 0; b < nb * M; b++) {   /* ql, qh: random, all codes 63 or all 0; scales random, all 127 or all -128 */
        unsigned char *blk = wq + (size_t)b * q->size;
        const int codes = test_rand_int(0, 2), scales = test_rand_int(0, 2), e = test_rand_int(-12, -4), mant = test_rand_int(0, 1023);
        const uint16_t h = (uint16_t)((e + 15) << 10 | mant);
        for (i = 0; i < 192; i++) blk[i] = (unsigned char)(codes == 0 ? test_rand_int(0, 255) : codes == 1 ? 0xff : 0);
        for (i = 0; i < 16; i++) blk[192 + i] = (unsigned char)(int8_t)(scales == 0 ? test_rand_int(-128, 127) : scales == 1 ? 127 : -128);
        memcpy(blk + 208, &h, 2);   /* little-endian, as GGUF files */
        d[b] = ldexpf(1.0f + (float)mant / 1024.0f, e);
    }
    tiles_exact_activations(x, K);
    for (n = 0; n < 64; n++)
        for (m = 0; m < M; m++) {
            float acc = 0.0f;
            for (b = 0; b < nb; b++) {
                const unsigned char *blk = wq + (size_t)(m * nb + b) * q->size;
                int64_t isum = 0;
                for (i = 0; i < 256; i++) isum += (int64_t)(int8_t)blk[192 + i / 16] * (q6_k_code(blk, (int)i) - 32) * (int64_t)x[n * K + b * 256 + i];
                acc = fma_once((float)(int32_t)isum, d[m * nb + b] * 1.0f, acc);
            }
            want[n * M + m] = acc;
        }
    tiles_exact_end(q, wq, K, M, x, want);
}

/* A Q5_K block's 5-bit code (0..31) of value i, as gguf lays them out: f16 d, f16 dmin, 12 bytes
   of 6-bit scales and mins, qh[32] (bit s of byte l: value l of sub-block s), qs[128] (32 bytes per
   two sub-blocks: the first's low nibbles, the second's high). */
static int q5_k_code(const unsigned char *blk, int i) {
    const int s = i / 32, l = i % 32;
    return (blk[48 + 32 * (s / 2) + l] >> (4 * (s % 2)) & 0x0f) | (blk[16 + l] >> s & 1) << 4;
}

/* Sub-block s's 6-bit scale (min: false) or min (true) from a K block's 12 scale bytes q: bytes
   0..3 hold the scales of 0..3 and bytes 4..7 their mins in 6 bits; 4..7's come as 4 low bits from
   bytes 8..11 (scale low, min high) and 2 high bits from the top of bytes 0..3 (scales) and 4..7. */
static int k_scale_min(const unsigned char *q, int s, bool min) {
    if (s < 4) return q[s + 4 * min] & 63;
    return (q[s + 4] >> (4 * min) & 0x0f) | (q[s - 4 + 4 * min] >> 6) << 4;
}

/* Q5_K prompt products on the x86 sets' 8-row kernels, as Q6_K's above: per block of 256 the exact
   integer sums isum = sum sc * code * x and msum = sum mn * (sum of a sub-block's x), and each output
   has the bits of acc = fma((float)isum, d, acc), then fma(-(float)msum, dmin, acc), rounded once,
   over the blocks in order. Blocks with every code 31 (scales 63) against activations at +-127 make
   AVX2's int16 sums as large as they get (4 dwords of 2 * 31 * 127 a lane: 8 would wrap, and the
   bits would change). Weights as they are and kept repacked; 21 rows; N = 5, 8, 64. */
static void test_q5_k_tiles_exact(void) {
    const struct qtype *q = &qtypes[4];
    const int64_t K = 768, M = 21, nb = K / 256;
    float d[3 * 21], dmin[3 * 21];
    unsigned char *wq;
    float *x, *want;
    int64_t m, n, b, i;
    if (!tiles_exact_begin(q, K, M, &wq, &x, &want, "this set has no Q5_K tiles")) return;
    for (b = 0; b < nb * M; b++) {   /* qh, qs: random, all codes 31 or all 0; scales and mins random or all 63 */
        unsigned char *blk = wq + (size_t)b * q->size;
        const int codes = test_rand_int(0, 2), scales = test_rand_int(0, 1);
        int h;
        for (i = 16; i < 176; i++) blk[i] = (unsigned char)(codes == 0 ? test_rand_int(0, 255) : codes == 1 ? 0xff : 0);
        for (i = 4; i < 16; i++) blk[i] = (unsigned char)(scales == 0 ? test_rand_int(0, 255) : 0xff);
        for (h = 0; h < 2; h++) {   /* d, then dmin */
            const int e = test_rand_int(-12, -4), mant = test_rand_int(0, 1023);
            const uint16_t bits = (uint16_t)((e + 15) << 10 | mant);
            memcpy(blk + 2 * h, &bits, 2);   /* little-endian, as GGUF files */
            (h ? dmin : d)[b] = ldexpf(1.0f + (float)mant / 1024.0f, e);
        }
    }
    tiles_exact_activations(x, K);
    for (n = 0; n < 64; n++)
        for (m = 0; m < M; m++) {
            float acc = 0.0f;
            for (b = 0; b < nb; b++) {
                const unsigned char *blk = wq + (size_t)(m * nb + b) * q->size;
                int64_t isum = 0, msum = 0;
                for (i = 0; i < 256; i++) {
                    const int64_t xi = (int64_t)x[n * K + b * 256 + i];
                    isum += (int64_t)k_scale_min(blk + 4, (int)(i / 32), false) * q5_k_code(blk, (int)i) * xi;
                    msum += (int64_t)k_scale_min(blk + 4, (int)(i / 32), true) * xi;
                }
                acc = fma_once((float)(int32_t)isum, d[m * nb + b], acc);
                acc = fma_once(-(float)(int32_t)msum, dmin[m * nb + b], acc);
            }
            want[n * M + m] = acc;
        }
    tiles_exact_end(q, wq, K, M, x, want);
}

static void test_mul_mat(void) {
    static const int64_t Ns[4] = { 1, 2, 7, 64 };
    const bool q8_act = mms_cpu_get_kernels() != MMS_CPU_KERNELS_SCALAR;   /* every SIMD set has the integer dots */
    int k, ni, ki;
    for (k = 0; k < N_QTYPES; k++) {
        const struct qtype *q = &qtypes[k];
        double e, pred = 0;
        char line[768];
        int len = 0;
        if (!traits_ok(q)) { EXPECT(0, "traits of %s", q->name); continue; }
        for (ki = 0; ki < 2; ki++)
            for (ni = 0; ni < 4; ni++) {
                e = matmul_case(q, ki ? 512 : 256, 33, Ns[ni], 1, 1, MM_PLAIN, q8_act, &pred);
                len += snprintf(line + len, sizeof line - (size_t)len, " K%d/N%d %.2g", ki ? 512 : 256, (int)Ns[ni], e);
            }
        e = matmul_case(q, 256, 17, 5, 2, 6, MM_PLAIN, q8_act, &pred);   /* a broadcast over b's batch */
        len += snprintf(line + len, sizeof line - (size_t)len, " batch %.2g", e);
        e = matmul_case(q, q->blck == 256 ? 768 : 288, 13, 1, 1, 1, MM_PLAIN, q8_act, &pred);   /* an odd number of blocks: */
        len += snprintf(line + len, sizeof line - (size_t)len, " oddK/N1 %.2g", e);            /* the decode dots pair them */
        e = matmul_case(q, q->blck == 256 ? 768 : 288, 13, 8, 1, 1, MM_PLAIN, q8_act, &pred);   /* 4-column dots, odd blocks */
        len += snprintf(line + len, sizeof line - (size_t)len, " oddK/N8 %.2g", e);
        e = matmul_case(q, 512, 9, 3, 1, 1, MM_VIEWS, q8_act, &pred);
        len += snprintf(line + len, sizeof line - (size_t)len, " views/N3 %.2g", e);
        e = matmul_case(q, 512, 9, 16, 1, 1, MM_VIEWS, q8_act, &pred);
        len += snprintf(line + len, sizeof line - (size_t)len, " views/N16 %.2g", e);
        for (ni = 0; ni < 5; ni++) {   /* weights kept repacked: tiles of 64 rows, 8-row groups, a tail of rows as they were */
            static const int64_t rNs[5] = { 1, 3, 4, 5, 64 };
            e = matmul_case(q, 256, ni % 2 ? 67 : 137, rNs[ni], 1, ni == 4 ? 2 : 1, MM_REPACKED, q8_act, &pred);
            len += snprintf(line + len, sizeof line - (size_t)len, " repack/N%d %.2g", (int)rNs[ni], e);
        }
        if (q8_act)
            printf("    %s %s nmse:%s (bound %.0e, or with 8-bit activations half a step per activation and 4x the "
                   "expected error, %.1e for the last case)\n", g_kernels, q->name, line, MATMUL_TOL, pred);
        else
            printf("    %s %s nmse:%s (bound %.0e)\n", g_kernels, q->name, line, MATMUL_TOL);
    }
}

/* ================================================================================================
   Errors: shapes a block type cannot have */

static bool error_names(const char *frag1, const char *frag2) {
    const char *e = mms_last_error();
    return strstr(e, frag1) && (!frag2 || strstr(e, frag2));
}

static void test_errors(void) {
    int k;
    test_capture_log();
    for (k = 0; k < N_QTYPES; k++) {
        const struct qtype *q = &qtypes[k];
        struct mms_context *ctx = test_ctx(true);
        struct mms_tensor *a, *b, *t, *r;
        int64_t K = 2 * q->blck;
        char half[32];
        snprintf(half, sizeof half, "%lld", (long long)(q->blck / 2 * 3));

        /* a row that is not a whole number of blocks */
        mms_clear_error();
        t = mms_new_tensor_2d(ctx, q->type, q->blck / 2 * 3, 4);
        EXPECT(t == NULL && error_names(q->name, half), "%s: a tensor of %s elements per row is rejected: %s", q->name, half,
               mms_last_error());
        mms_ctx_clear_error(ctx);

        a = mms_new_tensor_2d(ctx, q->type, K, 33);
        b = mms_new_tensor_2d(ctx, F32, K, 3);
        EXPECT(a && b, "%s tensors: %s", q->name, mms_last_error());
        if (!a || !b) { mms_free(ctx); continue; }

        /* mul_mat whose K is not a multiple of the block size: a transposed quantized matrix
           (its rows are columns of blocks) */
        mms_clear_error();
        t = mms_transpose(ctx, a);
        r = t ? mms_mul_mat(ctx, t, mms_new_tensor_2d(ctx, F32, 33, 3)) : NULL;
        EXPECT(r == NULL && (error_names("mms_mul_mat", q->name) || error_names("mms_transpose", q->name)),
               "%s: mul_mat of a transposed quantized matrix (K = 33) is rejected naming the op and type: %s", q->name,
               mms_last_error());
        mms_ctx_clear_error(ctx);

        /* a view or reshape that splits a block */
        mms_clear_error();
        t = mms_view_2d(ctx, a, q->blck / 2, 3, a->nb[1], 0);
        EXPECT(t == NULL && error_names("mms_view_2d", q->name), "%s: a view of half a block is rejected: %s", q->name,
               mms_last_error());
        mms_ctx_clear_error(ctx);
        mms_clear_error();
        t = mms_reshape_2d(ctx, a, q->blck / 2, 4 * 33);
        EXPECT(t == NULL && error_names("mms_reshape_2d", q->name), "%s: a reshape to half blocks is rejected: %s", q->name,
               mms_last_error());
        mms_ctx_clear_error(ctx);

        /* mul_mat with mismatched K, and with quantized activations (b must be f32) */
        mms_clear_error();
        r = mms_mul_mat(ctx, a, mms_new_tensor_2d(ctx, F32, K / 2, 3));
        EXPECT(r == NULL && error_names("mms_mul_mat", NULL), "%s: mul_mat with a K mismatch is rejected: %s", q->name,
               mms_last_error());
        mms_ctx_clear_error(ctx);

        /* cpy between rows that do not hold whole blocks */
        mms_clear_error();
        r = mms_cpy(ctx, mms_new_tensor_2d(ctx, F32, q->blck / 2, 4), mms_new_tensor_2d(ctx, q->type, q->blck, 2));
        EXPECT(r == NULL && error_names("mms_cpy", q->name), "%s: cpy of rows of half a block into %s is rejected: %s",
               q->name, q->name, mms_last_error());
        mms_ctx_clear_error(ctx);
        mms_free(ctx);
    }
    mms_log_set(NULL, NULL);
}

/* Weights in a CPU_REPACK buffer: whole-tensor access only, and no op but MUL_MAT (as its first
   operand, not through a view) may read them; each misuse is refused with the reason. */
static void test_repack_errors(void) {
    struct mms_context *wctx = test_ctx(true), *ctx = test_ctx(true);
    struct mms_tensor *w = mms_new_tensor_2d(wctx, MMS_TYPE_Q4_0, 64, 16), *f = mms_new_tensor_2d(wctx, F32, 64, 16);
    struct mms_tensor *x = mms_new_tensor_2d(ctx, F32, 64, 2), *ids = mms_new_tensor_1d(ctx, MMS_TYPE_I32, 2), *r;
    mms_backend_buffer_t wbuf = mms_backend_alloc_ctx_tensors_from_buft(wctx, mms_backend_cpu_repack_buffer_type()), buf;
    const size_t size = mms_nbytes(w);
    unsigned char *bytes = (unsigned char *)calloc(size, 1);
    struct mms_cgraph *g;
    enum mms_status st;
    int i;
    test_capture_log();
    EXPECT(wbuf != NULL, "CPU_REPACK buffer: %s", mms_last_error());
    EXPECT(mms_backend_cpu_repacks(w) && !mms_backend_cpu_repacks(f), "Q4_0 [64, 16] is kept repacked, F32 is not");
    if (!wbuf) { mms_free(ctx); mms_free(wctx); free(bytes); return; }
    st = mms_backend_tensor_set(w, bytes, 0, size / 2);
    EXPECT(st == MMS_ERR_UNSUPPORTED && error_names("CPU_REPACK", "whole"), "half a repacked tensor set: %d %s", st, mms_last_error());
    st = mms_backend_tensor_get(w, bytes, 18, 18);
    EXPECT(st == MMS_ERR_UNSUPPORTED && error_names("CPU_REPACK", "whole"), "one block of a repacked tensor read: %d %s", st, mms_last_error());
    st = mms_backend_tensor_memset(w, 0, 0, 18);
    EXPECT(st == MMS_ERR_UNSUPPORTED && error_names("CPU_REPACK", "whole"), "one block of a repacked tensor memset: %d %s", st, mms_last_error());
    EXPECT(mms_backend_tensor_set(f, bytes, 4, 8) == MMS_OK, "part of an F32 tensor (stored as it is) set: %s", mms_last_error());
    {   /* a view of the repacked tensor (its rows 8..15) read on its own */
        struct mms_tensor *v = mms_view_2d(wctx, w, 64, 8, w->nb[1], 8 * w->nb[1]);
        st = v && mms_backend_view_init(v) == MMS_OK ? mms_backend_tensor_get(v, bytes, 0, mms_nbytes(v)) : MMS_ERR_INVALID_ARG;
        EXPECT(st == MMS_ERR_UNSUPPORTED && error_names("CPU_REPACK", "view"), "a view of a repacked tensor read: %d %s", st, mms_last_error());
    }
    EXPECT(mms_backend_tensor_set(w, bytes, 0, size) == MMS_OK, "a whole repacked tensor set: %s", mms_last_error());
    for (i = 0; i < 3; i++) {   /* get_rows of the table, mul_mat of a view of it, a copy of it */
        r = i == 0 ? mms_get_rows(ctx, w, ids) : i == 1 ? mms_mul_mat(ctx, mms_view_2d(ctx, w, 64, 8, w->nb[1], 8 * w->nb[1]), x)
                   : mms_dup(ctx, w);
        EXPECT(r != NULL, "build %d: %s", i, mms_last_error());
        if (!r) continue;
        g = mms_new_graph(ctx);
        mms_build_forward_expand(g, r);
        buf = mms_backend_alloc_ctx_tensors(ctx, g_backend);
        if (buf) {
            mms_backend_tensor_memset(x, 0, 0, mms_nbytes(x));
            mms_backend_tensor_memset(ids, 0, 0, mms_nbytes(ids));
        }
        st = buf ? mms_backend_graph_compute(g_backend, g) : MMS_ERR_OOM;
        EXPECT(st == MMS_ERR_UNSUPPORTED && error_names("CPU_REPACK", "only MUL_MAT"), "case %d: a misuse of a repacked tensor is refused: %d %s",
               i, st, mms_last_error());
        mms_backend_buffer_free(buf);
        mms_free(ctx);
        ctx = test_ctx(true);
        x = mms_new_tensor_2d(ctx, F32, 64, 2);
        ids = mms_new_tensor_1d(ctx, MMS_TYPE_I32, 2);
    }
    mms_log_set(NULL, NULL);
    mms_backend_buffer_free(wbuf);
    mms_free(ctx);
    mms_free(wctx);
    free(bytes);
}

/* ================================================================================================ */

static void run_numeric(const char *name, void (*fn)(void)) {
    char full[128];
    snprintf(full, sizeof full, "%s/%s", g_kernels, name);
    test__run(full, fn);
}

int main(void) {
    enum mms_cpu_kernels k = MMS_CPU_KERNELS_AUTO;
    const char *s;
    size_t len;
    test_seed();
    g_fix = mms_gguf_open(test_src_path("fixtures/quant/quant-ref.gguf"));
    if (!g_fix) { printf("cannot open the fixture: %s\n", mms_last_error()); return 2; }
    if (mms_gguf_get_str(g_fix, "quant.gguf_version", &s, &len) == MMS_OK)
        printf("fixture: gguf %.*s", (int)len, s);
    if (mms_gguf_get_str(g_fix, "quant.numpy_version", &s, &len) == MMS_OK) printf(", numpy %.*s", (int)len, s);
    printf("\n");
    g_backend = mms_backend_cpu_init();
    if (g_backend) mms_backend_cpu_set_split(g_backend, MMS_CPU_SPLIT_ALL);   /* every node in parts: each kernel's partition is checked */
    if (!g_backend) { printf("mms_backend_cpu_init failed: %s\n", mms_last_error()); return 2; }

    RUN(test_traits);
    RUN(test_dequantize_exact);
    RUN(test_quantize_vs_gguf);
    RUN(test_gauss_error);
    RUN(test_requantize);

    while (test_kernel_set_next(&k)) {
        if (!test_use_kernel_set(k)) continue;
        g_kernels = mms_cpu_kernels_name(k);
        run_numeric("get_rows", test_get_rows);
        run_numeric("cpy", test_cpy);
        run_numeric("mul_mat", test_mul_mat);
        run_numeric("mul_mat_columns", test_mul_mat_columns);
        run_numeric("q6_k_tiles_exact", test_q6_k_tiles_exact);
        run_numeric("q5_k_tiles_exact", test_q5_k_tiles_exact);
    }
    RUN(test_x86_sets_agree);
    RUN(test_errors);
    RUN(test_repack_errors);

    mms_backend_free(g_backend);
    mms_gguf_close(g_fix);
    return test_summary();
}
