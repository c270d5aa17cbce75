/* >>cpu-quant ======================================================================================
   Products with quantized weights on integer kernels (AVX2, AVX-512 with VNNI, NEON with or without
   sdot; the scalar set has none and dequantizes). Decode (row dots): the activation row is quantized once to 8-bit
   blocks (of 32 with an f32 scale for Q8_0 and Q4_0; of 256 with one scale and the sums of each
   16 for the K types, whose sub-block scales then multiply in integers and leave one float FMA
   per 256 values), and each weight row is dotted against it in integers: _mm256_maddubs_epi16 multiplies
   unsigned weight values by signed activations (Q8_0 moves its sign onto the activations; Q4_0's
   - 8 is subtracted inside the int16 products; Q4_K's mins and Q6_K's - 32 come from the
   activations' sums of 16), the block's scale product turns the integer sum into f32. The weights
   stream from memory once, as bytes, never widened to f32; decode is memory-bound when a core's
   dot runs faster than its share of the bandwidth, which per-block scalar work (scale unpacking,
   f16 conversions) easily prevents. The activations' 8-bit rounding adds a relative error of about
   1e-3 per block; the scalar kernel set keeps exact f32 activations.
   Prompt-size products (and decode on weights kept repacked) run on 8 weight rows side by side (the
   repacked layouts and their 8 x 4 kernels of tiles.c; AVX-512: two groups, 16 rows, in a zmm register,
   and 4-row forms of the Q4_0 and Q4_K row dots). The AVX-512 bodies make the same integer sums and
   float operations as AVX2's, so both sets give the same bits. The tables of cards.c choose the
   kernels per weight type and kernel set.
   The folder's rooms, each on what the ones before it define: activations.c (the activation rows
   in 8 bits), row_dots.c (weight rows as they are: AVX2, then AVX-512), tiles.c (the layouts of 8
   rows side by side and their kernels: AVX2 and AVX-512), neon.c (the NEON sets' row dots) and
   cards.c (the formats and kernel cards that choose among all of these). */

/* The most columns (sequences of one decode step) a product takes through the decode kernels
   where they have a several-column form: f16/f32 weights (ops_matmul) and Q8_0 (row_dots.c). */
#define MMS__DECODE_MAX_COLS 8

struct mms__block_q8_act { float d; int16_t sums[2]; int8_t qs[32]; };   /* sums[i]: qs[16i .. 16i + 15] */
struct mms__block_q8_k { float d; int16_t bsums[16]; int8_t qs[MMS__QK_K]; };   /* bsums[i]: qs[16i .. 16i + 15] */

/* Bytes of one activation row in the format the weight type's dot takes (the larger for scratch). */
static size_t mms__q8_act_row_size(int64_t K) {
    return MMS__MAX((size_t)(K / 32) * sizeof(struct mms__block_q8_act), (size_t)(K / MMS__QK_K + 1) * sizeof(struct mms__block_q8_k));
}

#if MMS__HAVE_AVX2
/* The rounding of mms__round_int on 8 lanes: truncate, then step away from zero on a fraction of at
   least one half (exact, as there). */
static MMS__AVX2_INLINE __m256i mms__round_int_avx2(__m256 v) {
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), f = _mm256_sub_ps(v, t), one = _mm256_set1_ps(1.0f);
    const __m256 up = _mm256_and_ps(_mm256_cmp_ps(f, _mm256_set1_ps(0.5f), _CMP_GE_OQ), one);
    const __m256 down = _mm256_and_ps(_mm256_cmp_ps(f, _mm256_set1_ps(-0.5f), _CMP_LE_OQ), one);
    return _mm256_cvttps_epi32(_mm256_sub_ps(_mm256_add_ps(t, up), down));
}

/* mms__quantize_block_8bit for n a multiple of 32, to the same bytes; the activations are
   quantized once per product, but by every thread. */
static MMS__TARGET_AVX2 float mms__quantize_block_8bit_avx2(const float *x, int n, int8_t *qs, int16_t *sums16) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 vmax = _mm256_setzero_ps(), vid;
    __m128 m;
    float amax, id;
    int j, k;
    for (j = 0; j < n; j += 8) vmax = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + j), abs_mask), vmax);   /* NaN skipped, as in the scalar loop */
    m = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    amax = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
    id = amax > 0.0f ? 127.0f / amax : 0.0f;
    vid = _mm256_set1_ps(id);
    for (j = 0; j < n; j += 32) {
        __m256i v[4], packed;
        for (k = 0; k < 4; k++) v[k] = mms__round_int_avx2(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * k), vid));
        /* the packs interleave 4-value groups across the 128-bit halves; the dword permute restores the order */
        packed = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
        _mm256_storeu_si256((__m256i *)(qs + j), _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
        if (sums16) {   /* lanes 0 and 1 of the sum: values j..j+15 and j+16..j+31 */
            __m256i h = _mm256_hadd_epi32(_mm256_add_epi32(v[0], v[1]), _mm256_add_epi32(v[2], v[3]));
            __m128i s;
            h = _mm256_hadd_epi32(h, h);
            s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
            sums16[j / 16] = (int16_t)_mm_cvtsi128_si32(s);
            sums16[j / 16 + 1] = (int16_t)_mm_extract_epi32(s, 1);
        }
    }
    return amax / 127.0f;
}
#endif

#if MMS__HAVE_NEON
/* The same bytes on 4 lanes: vcvta rounds half away from zero, as mms__round_int does. */
static float mms__quantize_block_8bit_neon(const float *x, int n, int8_t *qs, int16_t *sums16) {
    float32x4_t vmax = vdupq_n_f32(0.0f);
    float amax, id;
    int j, k;
    for (j = 0; j < n; j += 4) vmax = vmaxnmq_f32(vmax, vabsq_f32(vld1q_f32(x + j)));   /* NaN skipped */
    amax = vmaxnmvq_f32(vmax);
    id = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (j = 0; j < n; j += 16) {
        int32x4_t v[4];
        for (k = 0; k < 4; k++) v[k] = vcvtaq_s32_f32(vmulq_n_f32(vld1q_f32(x + j + 4 * k), id));
        vst1q_s8(qs + j, vcombine_s8(vqmovn_s16(vcombine_s16(vqmovn_s32(v[0]), vqmovn_s32(v[1]))),
                                     vqmovn_s16(vcombine_s16(vqmovn_s32(v[2]), vqmovn_s32(v[3])))));
        if (sums16) sums16[j / 16] = (int16_t)vaddvq_s32(vaddq_s32(vaddq_s32(v[0], v[1]), vaddq_s32(v[2], v[3])));
    }
    return amax / 127.0f;
}
#endif

/* n values to int8 with step amax / 127; returns the step. sums16 (NULL: not wanted) gets the sums
   of each 16 int8 values. */
static float mms__quantize_block_8bit(const float *x, int n, int8_t *qs, int16_t *sums16) {
    float amax = 0.0f, id;
    int j, k;
#if MMS__HAVE_AVX2
    if (mms__avx2() && n % 32 == 0) return mms__quantize_block_8bit_avx2(x, n, qs, sums16);
#endif
#if MMS__HAVE_NEON
    if (mms__neon() && n % 16 == 0) return mms__quantize_block_8bit_neon(x, n, qs, sums16);
#endif
    for (j = 0; j < n; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    id = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (j = 0; j < n; j++) qs[j] = (int8_t)mms__round_int(x[j] * id);
    for (j = 0; sums16 && j < n / 16; j++) {
        int sum = 0;
        for (k = 0; k < 16; k++) sum += qs[16 * j + k];
        sums16[j] = (int16_t)sum;
    }
    return amax / 127.0f;
}

/* The activation rows of the dots (struct mms__quant_format's quantize_act): blocks of 32 for Q8_0
   and Q4_0, of 256 for the K types. */
static void mms__quantize_row_q8_act(const float *x, void *yv, int64_t K) {
    struct mms__block_q8_act *y = (struct mms__block_q8_act *)yv;
    int64_t b;
    for (b = 0; b < K / 32; b++) y[b].d = mms__quantize_block_8bit(x + 32 * b, 32, y[b].qs, y[b].sums);
}

static void mms__quantize_row_q8_k(const float *x, void *yv, int64_t K) {
    struct mms__block_q8_k *y = (struct mms__block_q8_k *)yv;
    int64_t b;
    for (b = 0; b < K / MMS__QK_K; b++) y[b].d = mms__quantize_block_8bit(x + MMS__QK_K * b, MMS__QK_K, y[b].qs, y[b].bsums);
}

/* A Q8_0-format activation row (mms__quantize_row_q8_act) as unsigned bytes, each value plus 128 (for
   kernels that multiply unsigned activations by the signed weights); the sums stay as they were. */
static void mms__q8_act_unsigned(void *y, int64_t K) {
    struct mms__block_q8_act *b = (struct mms__block_q8_act *)y;
    int64_t i;
    int k;
    for (i = 0; i < K / 32; i++)
        for (k = 0; k < 32; k++) b[i].qs[k] = (int8_t)(uint8_t)((uint8_t)b[i].qs[k] ^ 0x80u);
}
