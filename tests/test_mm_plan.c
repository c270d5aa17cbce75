/* The CPU matrix product's plan (mms__mm_plan_of, src/backend/cpu/ops_matmul.c) on its own: which
   strategy each weight type, shape, buffer and kernel set gets, and that the scratch it lays out
   fits the node's work size. No product is computed: the expectations are the rules of the manual's
   section 9 and of ops_matmul's top comment, written out per case; the kernel sets' cards are
   passed in, so the AVX-512 set's plans are checked on any x86-64 machine, the NEON ones on ARM. */
#define MMSCHED_IMPLEMENTATION
#include "../mmsched.h"
#include "test.h"

enum { ZERO = MMS__MM_ZERO, GEMM = MMS__MM_GEMM_F32, GEMM_BF16 = MMS__MM_GEMM_BF16, TILES = MMS__MM_QUANT_TILES,
       DOTS = MMS__MM_INT_DOTS, DIRECT = MMS__MM_FLOAT_DIRECT, ROWS = MMS__MM_ROWS };

/* A kernel set as mms__cpu_mul_mat passes it to the plan. */
struct set {
    const char                   *name;
    const struct mms__quant_card *cards;
    int                           n_cards;
    bool                          simd, gemm_bf16;
};

static const struct mms__quant_card *card_of(const struct set *s, enum mms_type type) {
    return s->cards ? mms__quant_card_in(s->cards, s->n_cards, type) : NULL;
}

static const char *strategy_name(int s) {
    static const char *names[] = { "zero", "gemm_f32", "gemm_bf16", "quant_tiles", "int_dots", "float_direct", "rows" };
    return s >= 0 && s < (int)(sizeof names / sizeof names[0]) ? names[s] : "?";
}

/* What a case expects besides its strategy (-1: not checked). */
struct want {
    int strategy;
    int unpack;         /* a repacked tile unpacked first */
    int gemv;           /* decode on the tiles' GEMV */
    int act_unsigned;
    int dot4;           /* INT_DOTS with the card's 4-column dot */
    int regroup;        /* QUANT_TILES: groups made into the card's own layout */
};

/* The plan of a [K, M] (type, repacked: in a CPU_REPACK buffer) times b [K, N] on set s, checked
   against w; the scratch must fit the work size the backend gives the node. */
static void check(const struct set *s, enum mms_type type, bool repacked, int64_t K, int64_t M, int64_t N, struct want w) {
    struct mms_init_params ip = { 0, NULL, true };
    struct mms_context *ctx = mms_init(ip), *wctx = mms_init(ip);
    struct mms_tensor *a = mms_new_tensor_2d(repacked ? wctx : ctx, type, K, M), *b = mms_new_tensor_2d(ctx, MMS_TYPE_F32, K, N);
    struct mms_tensor *out = mms_mul_mat(ctx, a, b);
    mms_backend_buffer_t wbuf = repacked ? mms_backend_alloc_ctx_tensors_from_buft(wctx, mms_backend_cpu_repack_buffer_type()) : NULL;
    char what[160];
    snprintf(what, sizeof what, "%s: %s [%lld, %lld]%s x %lld", s->name, mms_type_name(type), (long long)K, (long long)M,
             repacked ? " repacked" : "", (long long)N);
    if (!out || (repacked && !wbuf)) {
        EXPECT(0, "%s: building the case failed: %s", what, mms_last_error());
    } else {
        const struct mms__mm_plan p = mms__mm_plan_of(a, b, card_of(s, type), s->simd, s->gemm_bf16);
        EXPECT(p.repacked == repacked && mms__is_repacked(a) == repacked, "%s: repacked %d", what, (int)p.repacked);
        EXPECT((int)p.strategy == w.strategy, "%s: strategy %s, expected %s", what, strategy_name((int)p.strategy), strategy_name(w.strategy));
        if (w.unpack >= 0) EXPECT(p.unpack == (w.unpack != 0), "%s: unpack %d, expected %d", what, (int)p.unpack, w.unpack);
        if (w.gemv >= 0) EXPECT(p.gemv == (w.gemv != 0), "%s: gemv %d, expected %d", what, (int)p.gemv, w.gemv);
        if (w.act_unsigned >= 0)
            EXPECT(p.act_unsigned == (w.act_unsigned != 0), "%s: act_unsigned %d, expected %d", what, (int)p.act_unsigned, w.act_unsigned);
        if (w.dot4 >= 0) EXPECT((p.dot4 != NULL) == (w.dot4 != 0), "%s: dot4 %s, expected %s", what, p.dot4 ? "set" : "none", w.dot4 ? "set" : "none");
        if (w.regroup >= 0) EXPECT(p.regroup == (w.regroup != 0), "%s: regroup %d, expected %d", what, (int)p.regroup, w.regroup);
        if (p.regroup) {   /* a group in the format's layout where a_rows16 is; 8 regrouped ones in a_pack */
            const size_t blocks = (size_t)(K / p.fmt->block_len);
            EXPECT(p.card && p.card->regroup && p.a_group >= p.a_pack + 8 * blocks * p.card->regroup_block &&
                   p.a_group + blocks * p.fmt->group_block <= p.b_rows, "%s: no room for the regrouped tile", what);
        }
        EXPECT((p.card != NULL) == (w.strategy == TILES || w.strategy == DOTS), "%s: the card given %d", what, p.card != NULL);
        EXPECT(p.along_b == (w.strategy == GEMM || w.strategy == GEMM_BF16), "%s: along_b %d", what, (int)p.along_b);
        EXPECT(p.mb == (w.strategy == GEMM_BF16 ? 256 : 64) && p.nb == 48, "%s: tile %lld x %lld", what, (long long)p.mb, (long long)p.nb);
        EXPECT(p.tiles_m == (M + p.mb - 1) / p.mb && p.tiles_n == (N + 47) / 48 && p.n_items == p.tiles_m * p.tiles_n,
               "%s: %lld x %lld tiles, %lld items", what, (long long)p.tiles_m, (long long)p.tiles_n, (long long)p.n_items);
        /* the scratch: its parts in order, none overlapping the next, and within the node's work
           size less the 63 bytes its first 64-byte boundary may take */
        EXPECT(p.a_pack == 0 && p.a_rows16 >= (size_t)(64 * K) * 4 && p.b_rows >= p.a_rows16 + (size_t)(16 * K) * 4 &&
               p.b_q8 >= p.b_rows + (size_t)(48 * K) * 4 && p.unpacked >= p.b_q8 + 48 * p.q8_row && p.unpacked % 64 == 0 &&
               p.a_bf16 >= p.unpacked + (size_t)(48 * ((K + 1) / 2)) * 4, "%s: scratch parts out of order", what);
        EXPECT(p.scratch + 63 <= mms__mul_mat_work_size(out), "%s: scratch %zu + 63 > work size %zu", what, p.scratch,
               mms__mul_mat_work_size(out));
        if (p.unpack) EXPECT(p.scratch >= p.unpacked + 64 * mms_row_size(type, K), "%s: no room for the unpacked tile", what);
        if (w.strategy == GEMM_BF16) EXPECT(p.scratch >= p.a_bf16 + (size_t)(256 * ((K + 1) / 2)) * 4, "%s: no room for a's bf16 tile", what);
        if (w.strategy == GEMM_BF16)   /* its own parts: a gathered row of a, b's tile in pairs before a's */
            EXPECT(p.a_row_bf16 + (size_t)K * 2 <= p.b_bf16 && p.b_bf16 + (size_t)(48 * ((K + 1) / 2)) * 4 <= p.a_bf16,
                   "%s: the bf16 parts overlap", what);
    }
    mms_backend_buffer_free(wbuf);
    mms_free(ctx);
    mms_free(wctx);
}

static struct want W(int strategy) { struct want w = { strategy, -1, -1, -1, -1, -1 }; return w; }
static struct want Wx(int strategy, int unpack, int gemv, int act_unsigned, int dot4) {
    struct want w;
    w.strategy = strategy; w.unpack = unpack; w.gemv = gemv; w.act_unsigned = act_unsigned; w.dot4 = dot4; w.regroup = -1;
    return w;
}
MMS__MAYBE_UNUSED static struct want Wr(int strategy, int gemv, int regroup) { struct want w = W(strategy); w.gemv = gemv; w.regroup = regroup; return w; }

static const struct set scalar = { "scalar", NULL, 0, false, false };

/* Every set: float weights, empty products, what has no integer kernels. */
static void float_cases(const struct set *s) {
    const int direct = s->simd ? DIRECT : ROWS, gemm = s->simd ? GEMM : ROWS;
    check(s, MMS_TYPE_F32, false, 4096, 64, 1, W(direct));
    check(s, MMS_TYPE_F32, false, 4096, 64, 8, W(direct));        /* decode of up to 8 sequences: no packing */
    check(s, MMS_TYPE_F32, false, 4096, 64, 9, W(gemm));
    check(s, MMS_TYPE_F16, false, 1000, 130, 8, W(direct));
    check(s, MMS_TYPE_F16, false, 1000, 130, 512, W(gemm));
    check(s, MMS_TYPE_BF16, false, 4096, 64, 4, W(ROWS));         /* bf16 decode: converted rows */
    check(s, MMS_TYPE_BF16, false, 4096, 300, 5, W(s->gemm_bf16 ? GEMM_BF16 : gemm));
    check(s, MMS_TYPE_F32, false, 0, 64, 16, W(ZERO));
    check(s, MMS_TYPE_Q4_0, false, 0, 64, 1, W(ZERO));
}

static void test_plan_scalar(void) {
    float_cases(&scalar);
    check(&scalar, MMS_TYPE_Q4_0, false, 4096, 64, 1, Wx(ROWS, 0, 0, 0, 0));    /* dequantized, exact f32 activations */
    check(&scalar, MMS_TYPE_Q4_K, false, 4096, 64, 512, Wx(ROWS, 0, 0, 0, 0));
    check(&scalar, MMS_TYPE_Q8_0, true, 4096, 72, 1, Wx(ROWS, 1, 0, 0, 0));     /* the layout, but no kernel reads it */
    check(&scalar, MMS_TYPE_Q6_K, true, 4096, 72, 512, Wx(ROWS, 1, 0, 0, 0));
    check(&scalar, MMS_TYPE_Q5_K, false, 4096, 72, 512, Wx(ROWS, 0, 0, 0, 0));
    check(&scalar, MMS_TYPE_Q5_K, true, 4096, 72, 1, Wx(ROWS, 1, 0, 0, 0));
}

#if MMS__HAVE_AVX2
static const struct set avx2 = { "avx2", mms__cards_avx2, (int)(sizeof mms__cards_avx2 / sizeof mms__cards_avx2[0]), true, false };
static const struct set avx512 = { "avx512", mms__cards_avx512, (int)(sizeof mms__cards_avx512 / sizeof mms__cards_avx512[0]), true, true };

/* Both x86 sets: the 8-row kernels from 5 columns (Q4_0, the K types), the K types' 4-column dots
   up to 4 columns, repacked weights read in place, decode on them through the GEMV. */
static void x86_cases(const struct set *s) {
    static const enum mms_type tiled[] = { MMS_TYPE_Q4_0, MMS_TYPE_Q4_K, MMS_TYPE_Q6_K, MMS_TYPE_Q5_K };
    unsigned i;
    float_cases(s);
    for (i = 0; i < 4; i++) {
        const int k_type = tiled[i] != MMS_TYPE_Q4_0;
        check(s, tiled[i], false, 4096, 64, 1, Wx(DOTS, 0, 0, 0, k_type));
        check(s, tiled[i], false, 4096, 64, 4, Wx(DOTS, 0, 0, 0, k_type));
        check(s, tiled[i], false, 4096, 64, 5, Wx(TILES, 0, 0, 0, -1));
        check(s, tiled[i], false, 4096, 130, 512, Wx(TILES, 0, 0, 0, -1));
        check(s, tiled[i], true, 4096, 72, 1, Wx(TILES, 0, 1, 0, -1));
        check(s, tiled[i], true, 4096, 72, 4, Wx(TILES, 0, 1, 0, -1));
        check(s, tiled[i], true, 4096, 72, 512, Wx(TILES, 0, 0, 0, -1));
    }
    /* Q6_K's tiles on AVX2 read its values as bytes: regrouped past the GEMV's columns, as they are or
       repacked; never on AVX-512 (its 6-bit kernels) nor for the other types */
    check(s, MMS_TYPE_Q6_K, false, 4096, 130, 5, Wr(TILES, 0, s->cards == mms__cards_avx2));
    check(s, MMS_TYPE_Q6_K, true, 4096, 72, 512, Wr(TILES, 0, s->cards == mms__cards_avx2));
    check(s, MMS_TYPE_Q6_K, true, 4096, 72, 4, Wr(TILES, 1, 0));
    check(s, MMS_TYPE_Q4_K, false, 4096, 130, 512, Wr(TILES, 0, 0));
    check(s, MMS_TYPE_Q5_K, true, 4096, 72, 512, Wr(TILES, 0, 0));
    check(s, MMS_TYPE_Q4_0, true, 4096, 72, 512, Wr(TILES, 0, 0));
    check(s, MMS_TYPE_Q8_0, false, 4096, 64, 1, Wx(DOTS, 0, 0, 0, 1));   /* 4-column dots for a decode step of */
    check(s, MMS_TYPE_Q8_0, false, 4096, 64, 8, Wx(DOTS, 0, 0, 0, 1));   /* up to 8 sequences */
    check(s, MMS_TYPE_Q8_0, true, 4096, 72, 1, Wx(TILES, 0, 1, 0, -1));
    check(s, MMS_TYPE_Q8_0, true, 4096, 72, 4, Wx(TILES, 0, 1, 0, -1));
    check(s, MMS_TYPE_Q8_0, true, 4096, 72, 8, Wx(DOTS, 1, 0, 0, 1));    /* past the GEMV: unpacked, 4-column dots */
}

static void test_plan_avx2(void) {
    x86_cases(&avx2);
    /* Q8_0 prompts dequantize into the GEMM (no 8-row kernel on AVX2), repacked ones unpacked first */
    check(&avx2, MMS_TYPE_Q8_0, false, 4096, 64, 9, Wx(GEMM, 0, 0, 0, 0));
    check(&avx2, MMS_TYPE_Q8_0, true, 4096, 72, 512, Wx(GEMM, 1, 0, 0, 0));
}

static void test_plan_avx512(void) {
    x86_cases(&avx512);
    /* Q8_0 prompts past a decode step take the 8-row kernel, on unsigned activations */
    check(&avx512, MMS_TYPE_Q8_0, false, 4096, 64, 9, Wx(TILES, 0, 0, 1, -1));
    check(&avx512, MMS_TYPE_Q8_0, true, 4096, 72, 512, Wx(TILES, 0, 0, 1, -1));
}
#else
static void test_plan_avx2(void) { test_skip("the x86 kernel sets are not in this build"); }
static void test_plan_avx512(void) { test_skip("the x86 kernel sets are not in this build"); }
#endif

#if MMS__HAVE_NEON
/* The NEON sets: integer row dots for decode only; prompts dequantize, repacked tiles are unpacked. */
static void neon_cases(const struct set *s) {
    static const enum mms_type types[] = { MMS_TYPE_Q8_0, MMS_TYPE_Q4_0, MMS_TYPE_Q4_K, MMS_TYPE_Q6_K, MMS_TYPE_Q5_K };
    unsigned i;
    float_cases(s);
    for (i = 0; i < 5; i++) {
        check(s, types[i], false, 4096, 64, 4, Wx(DOTS, 0, 0, 0, 0));
        check(s, types[i], false, 4096, 64, 5, Wx(GEMM, 0, 0, 0, 0));
        check(s, types[i], true, 4096, 72, 1, Wx(DOTS, 1, 0, 0, 0));
        check(s, types[i], true, 4096, 72, 512, Wx(GEMM, 1, 0, 0, 0));
    }
}
static void test_plan_neon(void) {
    static const struct set neon = { "neon", mms__cards_neon, (int)(sizeof mms__cards_neon / sizeof mms__cards_neon[0]), true, false };
    static const struct set dotprod = { "neon_dotprod", mms__cards_neon_dotprod,
                                        (int)(sizeof mms__cards_neon_dotprod / sizeof mms__cards_neon_dotprod[0]), true, false };
    neon_cases(&neon);
    neon_cases(&dotprod);
}
#else
static void test_plan_neon(void) { test_skip("the NEON kernel sets are not in this build"); }
#endif

/* Weights that are not one contiguous run of rows (a transposed view) are not dotted in place. */
static void test_plan_strided(void) {
    struct mms_init_params ip = { 0, NULL, true };
    struct mms_context *ctx = mms_init(ip);
    struct mms_tensor *w = mms_new_tensor_2d(ctx, MMS_TYPE_F32, 64, 256);
    struct mms_tensor *a = mms_transpose(ctx, w), *b1 = mms_new_tensor_2d(ctx, MMS_TYPE_F32, 256, 1);
    struct mms__mm_plan p = mms__mm_plan_of(a, b1, NULL, true, false);
    EXPECT(p.strategy == MMS__MM_ROWS, "f32 transposed view x 1: strategy %s, expected rows", strategy_name((int)p.strategy));
    p = mms__mm_plan_of(w, b1 = mms_new_tensor_2d(ctx, MMS_TYPE_F32, 64, 1), NULL, true, false);
    EXPECT(p.strategy == MMS__MM_FLOAT_DIRECT, "f32 x 1: strategy %s, expected float_direct", strategy_name((int)p.strategy));
    mms_free(ctx);
}

int main(void) {
    RUN(test_plan_scalar);
    RUN(test_plan_avx2);
    RUN(test_plan_avx512);
    RUN(test_plan_neon);
    RUN(test_plan_strided);
    return test_summary();
}
