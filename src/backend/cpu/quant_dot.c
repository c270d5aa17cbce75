/* >>cpu-quant-dot ==================================================================================
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
   repacked layouts and their 8 x 4 kernels below; AVX-512: two groups, 16 rows, in a zmm register,
   and 4-row forms of the Q4_0 and Q4_K row dots). The AVX-512 bodies make the same integer sums and
   float operations as AVX2's, so both sets give the same bits. The table at the end chooses the
   kernels per weight type and kernel set. */

/* The most columns (sequences of one decode step) a product takes through the decode kernels
   where they have a several-column form: f16/f32 weights (ops_matmul) and Q8_0 (below). */
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

/* 8 rows of Q4_0 side by side, one block (see mms__gemm_q4_0x8_avx2): the 8 rows' f16 scales, then
   qs[k][r], bytes 4k..4k + 3 of row r's 16 bytes of nibbles. The same 144 bytes as the 8 rows'
   blocks, permuted, so weights can be kept in this layout (the CPU_REPACK buffer type). Q8_0 the
   same way with its 32 bytes of values (see mms__gemv_q8_0x8_avx2): 272 bytes. */
struct mms__q4_0x8 { mms_fp16_t d[8]; uint32_t qs[4][8]; };
struct mms__q8_0x8 { mms_fp16_t d[8]; uint32_t qs[8][8]; };

/* Both layouts for a block of an f16 scale and nq dwords (Q4_0: 4, Q8_0: 8): rows[0..n) (n <= 8;
   the others zero) of K values into K / 32 packed blocks, and the inverse for 8 rows. */
static void mms__pack_scale_dwords_x8(const void *const *rows, int n, int64_t K, int nq, void *dstv) {
    const size_t raw = sizeof(mms_fp16_t) + 4 * (size_t)nq;
    uint8_t *dst = (uint8_t *)dstv;
    int64_t b;
    int r, k;
    for (b = 0; b < K / 32; b++, dst += 8 * raw)
        for (r = 0; r < 8; r++) {
            const uint8_t *src = r < n ? (const uint8_t *)rows[r] + (size_t)b * raw : NULL;
            for (k = -1; k < nq; k++) {   /* k = -1: the scale */
                uint8_t *to = k < 0 ? dst + sizeof(mms_fp16_t) * (size_t)r : dst + 8 * sizeof(mms_fp16_t) + 4 * (size_t)(8 * k + r);
                const size_t len = k < 0 ? sizeof(mms_fp16_t) : 4;
                if (src) memcpy(to, k < 0 ? src : src + sizeof(mms_fp16_t) + 4 * (size_t)k, len);
                else memset(to, 0, len);
            }
        }
}

static void mms__unpack_scale_dwords_x8(const void *srcv, int64_t K, int nq, void *const *rows) {
    const size_t raw = sizeof(mms_fp16_t) + 4 * (size_t)nq;
    const uint8_t *src = (const uint8_t *)srcv;
    int64_t b;
    int r, k;
    for (b = 0; b < K / 32; b++, src += 8 * raw)
        for (r = 0; r < 8; r++) {
            uint8_t *dst = (uint8_t *)rows[r] + (size_t)b * raw;
            memcpy(dst, src + sizeof(mms_fp16_t) * (size_t)r, sizeof(mms_fp16_t));
            for (k = 0; k < nq; k++) memcpy(dst + sizeof(mms_fp16_t) + 4 * (size_t)k, src + 8 * sizeof(mms_fp16_t) + 4 * (size_t)(8 * k + r), 4);
        }
}

static void mms__pack_q4_0x8_rows(const void *const *rows, int n, int64_t K, void *dst) { mms__pack_scale_dwords_x8(rows, n, K, 4, dst); }
static void mms__unpack_q4_0x8_rows(const void *src, int64_t K, void *const *rows) { mms__unpack_scale_dwords_x8(src, K, 4, rows); }
static void mms__pack_q8_0x8_rows(const void *const *rows, int n, int64_t K, void *dst) { mms__pack_scale_dwords_x8(rows, n, K, 8, dst); }
static void mms__unpack_q8_0x8_rows(const void *src, int64_t K, void *const *rows) { mms__unpack_scale_dwords_x8(src, K, 8, rows); }

#if MMS__HAVE_AVX2
/* Dwords 0..3 of the 16 bytes at src[0..3] transposed: dst[8 k + i] = dword k of src[i]. */
static MMS__AVX2_INLINE void mms__transpose_dwords4(const uint8_t *const src[4], uint32_t *dst) {
    const __m128i q0 = _mm_loadu_si128((const __m128i *)src[0]), q1 = _mm_loadu_si128((const __m128i *)src[1]);
    const __m128i q2 = _mm_loadu_si128((const __m128i *)src[2]), q3 = _mm_loadu_si128((const __m128i *)src[3]);
    const __m128i t0 = _mm_unpacklo_epi32(q0, q1), t1 = _mm_unpacklo_epi32(q2, q3);   /* dwords 0, 1 */
    const __m128i t2 = _mm_unpackhi_epi32(q0, q1), t3 = _mm_unpackhi_epi32(q2, q3);   /* dwords 2, 3 */
    _mm_storeu_si128((__m128i *)dst, _mm_unpacklo_epi64(t0, t1));
    _mm_storeu_si128((__m128i *)(dst + 8), _mm_unpackhi_epi64(t0, t1));
    _mm_storeu_si128((__m128i *)(dst + 16), _mm_unpacklo_epi64(t2, t3));
    _mm_storeu_si128((__m128i *)(dst + 24), _mm_unpackhi_epi64(t2, t3));
}

/* 8 rows' blocks at a time (the layouts of mms__pack_scale_dwords_x8): dwords transposed 4 rows by
   4 at a time (the packs run once per thread and tile: block by block in scalar code they cost a
   third of the kernels' time). */
static MMS__TARGET_AVX2 void mms__pack_scale_dwords_x8_avx2(const void *const *rows, int64_t K, int nq, void *dstv) {
    const size_t raw = sizeof(mms_fp16_t) + 4 * (size_t)nq;
    uint8_t *dst = (uint8_t *)dstv;
    int64_t b;
    int r, h;
    for (b = 0; b < K / 32; b++, dst += 8 * raw) {
        const uint8_t *src[8];
        uint32_t *qs = (uint32_t *)(void *)(dst + 8 * sizeof(mms_fp16_t));
        for (r = 0; r < 8; r++) {
            src[r] = (const uint8_t *)rows[r] + (size_t)b * raw;
            memcpy(dst + sizeof(mms_fp16_t) * (size_t)r, src[r], sizeof(mms_fp16_t));
            src[r] += sizeof(mms_fp16_t);
        }
        for (h = 0; h < nq / 4; h++) {   /* dwords 4h..4h + 3 */
            mms__transpose_dwords4(src, qs + 32 * h);
            mms__transpose_dwords4(src + 4, qs + 32 * h + 4);
            for (r = 0; r < 8; r++) src[r] += 16;
        }
    }
}

static void mms__pack_q4_0x8(const void *const *rows, int n, int64_t K, void *dst) {
    if (n == 8) mms__pack_scale_dwords_x8_avx2(rows, K, 4, dst);
    else mms__pack_q4_0x8_rows(rows, n, K, dst);
}
static void mms__pack_q8_0x8(const void *const *rows, int n, int64_t K, void *dst) {
    if (n == 8) mms__pack_scale_dwords_x8_avx2(rows, K, 8, dst);
    else mms__pack_q8_0x8_rows(rows, n, K, dst);
}
#endif

#if MMS__HAVE_AVX2
/* 8 int32 lanes: lane k sums u[4k..4k+3] * s[4k..4k+3] (u unsigned, s signed bytes) */
static MMS__AVX2_INLINE __m256i mms__dot_u8s8_lanes(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* The byte products u * s (u unsigned, s signed) added into acc per int32 lane: row r's 4 products
   of a dword (the 8-row kernels below). With VNNI (the AVX-512 set) one vpdpbusd adds them to the
   lane's int32. Without, maddubs adds them to its two int16 halves, which the caller keeps in range
   and mms__u8s8_widen sums. One body serves both sets, so the instruction is written as assembly: an
   AVX2 function cannot hold the AVX-512 intrinsic (in it, this branch is never taken). */
static MMS__AVX2_INLINE __m256i mms__u8s8_add(bool vnni, __m256i acc, __m256i u, __m256i s) {
    if (vnni) {
        __asm__("%{evex%} vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
        return acc;
    }
    return _mm256_add_epi16(acc, _mm256_maddubs_epi16(u, s));
}
/* The same products summed into int32 lanes at once (the form for signed weights: moved onto
   unsigned |w| by sign, two products already fill an int16). */
static MMS__AVX2_INLINE __m256i mms__u8s8_add32(bool vnni, __m256i acc, __m256i u, __m256i s) {
    return vnni ? mms__u8s8_add(true, acc, u, s) : _mm256_add_epi32(acc, mms__dot_u8s8_lanes(u, s));
}
/* mms__u8s8_add's sums as int32 lanes. */
static MMS__AVX2_INLINE __m256i mms__u8s8_widen(bool vnni, __m256i acc) {
    return vnni ? acc : _mm256_madd_epi16(acc, _mm256_set1_epi16(1));
}
/* Two of mms__u8s8_add's accumulators summed, as int32 lanes. */
static MMS__AVX2_INLINE __m256i mms__u8s8_widen2(bool vnni, __m256i a, __m256i b) {
    return mms__u8s8_widen(vnni, vnni ? _mm256_add_epi32(a, b) : _mm256_add_epi16(a, b));
}

/* Two f16 values side by side (a block's d and dmin) as floats in lanes 0 and 1. */
static MMS__AVX2_INLINE __m128 mms__fp16x2_to_f32(const mms_fp16_t *h) {
    uint32_t bits;
    memcpy(&bits, h, sizeof bits);
    return _mm_cvtph_ps(_mm_cvtsi32_si128((int)bits));
}

/* F16C: the library's portable conversion is a branchy call, once per block here. */
static MMS__AVX2_INLINE float mms__fp16_to_f32_f16c(mms_fp16_t h) {
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

/* The single-row dots below stream a row of weights (decode on weights as they are, rows one after
   another): each block prefetches the bytes 4 KB ahead, faster from memory than the hardware's
   prefetch alone or 2 KB ahead (docs/measurements.md, the row dots' prefetch). */
#define MMS__DOT_PREFETCH 4096

/* acc + a Q8_0 block's products (q, its magnitudes uq, its scale d) with an activation block, the
   sign moved onto the activations. */
static MMS__AVX2_INLINE __m256 mms__q8_0_block_fma(__m256i uq, __m256i q, float d, const struct mms__block_q8_act *x, __m256 acc) {
    const __m256i dot = mms__dot_u8s8_lanes(uq, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)x->qs), q));
    return _mm256_fmadd_ps(_mm256_set1_ps(d * x->d), _mm256_cvtepi32_ps(dot), acc);
}

/* Two accumulators, even blocks into the first: one FMA chain would wait on itself every block.
   (Written as two steps a loop: indexed by i & 1 they lived in memory, and the store-to-load
   round trip made the loop far slower; docs/measurements.md, at 2b766ec.) */
static MMS__TARGET_AVX2 float mms__dot_q8_0_avx2(int64_t K, const void *w, const void *xv) {
    const struct mms__block_q8_0 *b = (const struct mms__block_q8_0 *)w;
    const struct mms__block_q8_act *x = (const struct mms__block_q8_act *)xv;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i;
    for (i = 0; i < K / 32; i += 2) {
        const __m256i q0 = _mm256_loadu_si256((const __m256i *)b[i].qs);
        acc0 = mms__q8_0_block_fma(_mm256_sign_epi8(q0, q0), q0, mms__fp16_to_f32_f16c(b[i].d), x + i, acc0);
        MMS__PREFETCH((const char *)(b + i) + MMS__DOT_PREFETCH, 2 * sizeof *b, 3);
        if (i + 1 < K / 32) {
            const __m256i q1 = _mm256_loadu_si256((const __m256i *)b[i + 1].qs);
            acc1 = mms__q8_0_block_fma(_mm256_sign_epi8(q1, q1), q1, mms__fp16_to_f32_f16c(b[i + 1].d), x + i + 1, acc1);
        }
    }
    return mms__hsum256(_mm256_add_ps(acc0, acc1));
}

/* 32 nibbles of 16 bytes as bytes: the low nibbles first (elements 0..15), then the high ones */
static MMS__AVX2_INLINE __m256i mms__nibbles_16(const uint8_t *p) {
    const __m128i v = _mm_loadu_si128((const __m128i *)p), m = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

/* (u - c) * a for unsigned u and an offset c, summed in pairs: maddubs(u, a) - maddubs(c, a) stays
   within int16 (63 * 127 * 2 at most), then 8 int32 lanes of 4 products each. */
static MMS__AVX2_INLINE __m256i mms__dot_offset_lanes(__m256i u, __m256i c, __m256i a) {
    return _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(u, a), _mm256_maddubs_epi16(c, a)), _mm256_set1_epi16(1));
}

/* (u - c) * a summed in pairs for two 16-byte halves: 4 products per int16 lane (at most 4064 in
   size for nibbles with c = 8). */
static MMS__AVX2_INLINE __m256i mms__dot_offset_pairs2(__m256i u0, __m256i a0, __m256i u1, __m256i a1, __m256i c) {
    return _mm256_sub_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(u0, a0), _mm256_maddubs_epi16(u1, a1)),
                            _mm256_add_epi16(_mm256_maddubs_epi16(c, a0), _mm256_maddubs_epi16(c, a1)));
}

/* Q4_0 two blocks at a time: one 256-bit register holds both blocks' 16 bytes, so one and/shift
   unpacks 64 nibbles, as [low nibbles of block 0 | of block 1] and the same for the high ones; the
   activations are regrouped to match by two 128-bit permutes, and one madd, conversion and FMA
   serve both blocks (int32 lanes 0..3 and 4..7). From block i with the sums acc so far (the
   AVX-512 body hands over its rest here). */
static MMS__AVX2_INLINE float mms__dot_q4_0_from_avx2(int64_t nb, const struct mms__block_q4_0 *b, const struct mms__block_q8_act *x,
                                                      int64_t i, __m256 acc) {
    const __m256i c8 = _mm256_set1_epi8(8), m4 = _mm256_set1_epi8(0x0f);
    float sum;
    for (; i + 2 <= nb; i += 2) {
        const __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)b[i].qs)),
                                                  _mm_loadu_si128((const __m128i *)b[i + 1].qs), 1);
        const __m256i x0 = _mm256_loadu_si256((const __m256i *)x[i].qs), x1 = _mm256_loadu_si256((const __m256i *)x[i + 1].qs);
        const __m256i p = mms__dot_offset_pairs2(_mm256_and_si256(q, m4), _mm256_permute2x128_si256(x0, x1, 0x20),
                                                 _mm256_and_si256(_mm256_srli_epi16(q, 4), m4), _mm256_permute2x128_si256(x0, x1, 0x31), c8);
        const __m256 scale = _mm256_set_m128(_mm_set1_ps(mms__fp16_to_f32_f16c(b[i + 1].d) * x[i + 1].d),
                                             _mm_set1_ps(mms__fp16_to_f32_f16c(b[i].d) * x[i].d));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(p, _mm256_set1_epi16(1))), scale, acc);
        MMS__PREFETCH((const char *)(b + i) + MMS__DOT_PREFETCH, 2 * sizeof *b, 3);
    }
    sum = mms__hsum256(acc);
    if (i < nb)   /* an odd last block */
        sum += mms__fp16_to_f32_f16c(b[i].d) * x[i].d
             * mms__hsum256(_mm256_cvtepi32_ps(mms__dot_offset_lanes(mms__nibbles_16(b[i].qs), c8, _mm256_loadu_si256((const __m256i *)x[i].qs))));
    return sum;
}
static MMS__TARGET_AVX2 float mms__dot_q4_0_avx2(int64_t K, const void *w, const void *xv) {
    return mms__dot_q4_0_from_avx2(K / 32, (const struct mms__block_q4_0 *)w, (const struct mms__block_q8_act *)xv, 0, _mm256_setzero_ps());
}

/* A Q4_K super-block's 12 bytes of packed 6-bit scales and mins (see mms__q4_k_scale_min) as 16
   int16: the 8 scales, then the 8 mins. In 32-bit words w0..w2: sub-blocks 0..3 are the low 6 bits
   of w0's bytes (scales) and w1's (mins); 4..7 the low (scales) or high (mins) nibbles of w2's
   bytes with the top 2 bits of w0's or w1's bytes moved down to bits 4..5. The 16 bytes loaded end
   4 bytes into the block's nibbles. */
static MMS__AVX2_INLINE __m256i mms__q4_k_scales_mins(const uint8_t *packed) {
    const __m128i v = _mm_loadu_si128((const __m128i *)packed);
    const __m128i w0011 = _mm_shuffle_epi32(v, 0x50), w2 = _mm_shuffle_epi32(v, 0xaa);
    const __m128i nib = _mm_blend_epi32(w0011, _mm_srlv_epi32(w2, _mm_setr_epi32(0, 0, 0, 4)), 0xa);   /* w0, w2, w1, w2 >> 4 */
    const __m128i low = _mm_and_si128(nib, _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    const __m128i top = _mm_and_si128(_mm_srli_epi32(w0011, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
    return _mm256_cvtepu8_epi16(_mm_or_si128(low, top));
}

/* Each 128-bit half of v holds 8 int16: its lanes all become lane k_lo of the low half, lane k_hi
   of the high half (byte shuffles stay within halves). */
static MMS__AVX2_INLINE __m256i mms__broadcast_i16(__m256i v, int k_lo, int k_hi) {
    const short lo = (short)((2 * k_lo + 1) << 8 | 2 * k_lo), hi = (short)((2 * k_hi + 1) << 8 | 2 * k_hi);
    return _mm256_shuffle_epi8(v, _mm256_set_epi16(hi, hi, hi, hi, hi, hi, hi, hi, lo, lo, lo, lo, lo, lo, lo, lo));
}

/* Q4_K against 256-blocks. Per pair of sub-blocks one load of 32 bytes of nibbles (low: the first
   sub-block, high: the second); each sub-block's int16 products summed in int32 by one madd
   against its 6-bit scale (at most 8 * 2 * 63 * 3810 per lane). The mins term,
   dmin * sum(min * activations), takes one madd per super-block from the activations' sums.
   One row at a time: 2 or 4 rows sharing each activation load were slower from memory (the
   hardware's prefetch; the AVX-512 rows kernels prefetch the next rows themselves;
   docs/measurements.md, the row dots' prefetch). */
static MMS__TARGET_AVX2 float mms__dot_q4_k_avx2(int64_t K, const void *w, const void *xv) {
    const struct mms__block_q4_k *b = (const struct mms__block_q4_k *)w;
    const struct mms__block_q8_k *x = (const struct mms__block_q8_k *)xv;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc = _mm256_setzero_ps();
    __m128 acc_min = _mm_setzero_ps();
    int64_t i;
    int j;
    for (i = 0; i < K / MMS__QK_K; i++, b++, x++) {
        const __m256i sm = mms__q4_k_scales_mins(b->scales), scales = _mm256_permute4x64_epi64(sm, 0x44);
        const __m128i bsums = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)x->bsums), _mm_loadu_si128((const __m128i *)(x->bsums + 8)));
        const __m128 d = _mm_mul_ps(mms__fp16x2_to_f32(&b->d), _mm_set1_ps(x->d));   /* d, dmin times the activations' */
        __m256i sumi = _mm256_setzero_si256();
        MMS__PREFETCH((const char *)b + MMS__DOT_PREFETCH, sizeof *b, 3);
MMS__UNROLL4
        for (j = 0; j < 4; j++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * j));
            const __m256i lo = _mm256_maddubs_epi16(_mm256_and_si256(q, m4), _mm256_loadu_si256((const __m256i *)(x->qs + 64 * j)));
            const __m256i hi = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                                                    _mm256_loadu_si256((const __m256i *)(x->qs + 64 * j + 32)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(lo, mms__broadcast_i16(scales, 2 * j, 2 * j)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(hi, mms__broadcast_i16(scales, 2 * j + 1, 2 * j + 1)));
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_broadcastss_ps(d), acc);
        acc_min = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm_madd_epi16(_mm256_extracti128_si256(sm, 1), bsums)), _mm_permute_ps(d, 0x55), acc_min);
    }
    return mms__hsum256(_mm256_sub_ps(acc, _mm256_set_m128(_mm_setzero_ps(), acc_min)));
}

/* Group g (0..3) of half h of a Q6_K block as 32 unsigned 6-bit values: 4 low bits from ql (of
   ql[64h..64h + 31] for even g, the next 32 for odd g; low nibbles for groups 0, 1, high for 2, 3),
   2 high bits from qh[32h..] moved to bits 4..5 by one 16-bit shift. */
static MMS__AVX2_INLINE __m256i mms__q6_k_group(const struct mms__block_q6_k *b, int h, int g) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    const __m256i l = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32 * (g & 1))), hb = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
    const __m256i lo = _mm256_and_si256(g < 2 ? l : _mm256_srli_epi16(l, 4), m4);
    const __m256i hi = _mm256_and_si256(g < 2 ? _mm256_slli_epi16(hb, 4 - 2 * g) : _mm256_srli_epi16(hb, 2 * g - 4), m30);
    return _mm256_or_si256(lo, hi);
}

/* Q6_K against 256-blocks: each 32 activations are one group of a half (see mms__q6_k_to_float):
   4 low bits from ql, 2 high bits from qh moved to bits 4..5 by one 16-bit shift, then the two
   sub-blocks' int8 scales (int16 lanes 0..7 and 8..15) in the int32 sum (at most 8 * 2 * 16002 *
   128 per lane). The - 32 comes out of the loop: 32 * sum(scale * activations) from the
   activations' sums of 16, one madd per super-block. */
static MMS__TARGET_AVX2 float mms__dot_q6_k_avx2(int64_t K, const void *w, const void *xv) {
    const struct mms__block_q6_k *b = (const struct mms__block_q6_k *)w;
    const struct mms__block_q8_k *x = (const struct mms__block_q8_k *)xv;
    __m256 acc = _mm256_setzero_ps();
    int64_t i;
    int h, g;
    for (i = 0; i < K / MMS__QK_K; i++, b++, x++) {
        const __m256i scales = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
        const __m256i offset = _mm256_madd_epi16(scales, _mm256_loadu_si256((const __m256i *)x->bsums));
        const __m256i sc_half[2] = { _mm256_permute4x64_epi64(scales, 0x44), _mm256_permute4x64_epi64(scales, 0xee) };   /* a half's 8 in both lanes */
        __m256i sumi = _mm256_setzero_si256();
        MMS__PREFETCH((const char *)b + MMS__DOT_PREFETCH, sizeof *b, 3);
        for (h = 0; h < 2; h++) {
MMS__UNROLL4
            for (g = 0; g < 4; g++) {
                const __m256i p = _mm256_maddubs_epi16(mms__q6_k_group(b, h, g), _mm256_loadu_si256((const __m256i *)(x->qs + 128 * h + 32 * g)));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, mms__broadcast_i16(sc_half[h], 2 * g, 2 * g + 1)));
            }
        }
        sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(offset, 5));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(mms__fp16_to_f32_f16c(b->d) * x->d), acc);
    }
    return mms__hsum256(acc);
}


/* -- one weight row against 4 activation rows (weights as they are: the K types at 4 columns,
   Q8_0 at up to 8; prompt sizes take the 8-row kernels below) --
   The weight row's unpacking (nibbles, scales) is done once for 4 columns of activations, which
   stay in L1 while the rows of a weight tile stream past from L2; the sub-block scales multiply in
   integers, so the float work is one conversion and FMA per 256 values and column. The products
   per column are those of the single dots above. */

/* Q8_0 as mms__dot_q8_0_avx2 (the same sums and accumulators per column, so a column's result does
   not depend on the columns beside it), the weights' magnitudes taken once for 4 columns: only
   for decode steps of several sequences (N <= MMS__DECODE_MAX_COLS: its cards' dot4_max_n). */
static MMS__TARGET_AVX2 void mms__dot4_q8_0_avx2(int64_t K, const void *w, const void *xv, size_t x_stride, float *out) {
    const struct mms__block_q8_0 *b = (const struct mms__block_q8_0 *)w;
    const struct mms__block_q8_act *x[4];
    __m256 acc0[4], acc1[4];
    int64_t i;
    int c;
MMS__UNROLL4
    for (c = 0; c < 4; c++) { x[c] = (const struct mms__block_q8_act *)((const char *)xv + c * x_stride); acc0[c] = acc1[c] = _mm256_setzero_ps(); }
    for (i = 0; i < K / 32; i += 2) {
        const __m256i q0 = _mm256_loadu_si256((const __m256i *)b[i].qs), uq0 = _mm256_sign_epi8(q0, q0);
        const float d0 = mms__fp16_to_f32_f16c(b[i].d);
MMS__UNROLL4
        for (c = 0; c < 4; c++) acc0[c] = mms__q8_0_block_fma(uq0, q0, d0, x[c] + i, acc0[c]);
        if (i + 1 < K / 32) {
            const __m256i q1 = _mm256_loadu_si256((const __m256i *)b[i + 1].qs), uq1 = _mm256_sign_epi8(q1, q1);
            const float d1 = mms__fp16_to_f32_f16c(b[i + 1].d);
MMS__UNROLL4
            for (c = 0; c < 4; c++) acc1[c] = mms__q8_0_block_fma(uq1, q1, d1, x[c] + i + 1, acc1[c]);
        }
    }
MMS__UNROLL4
    for (c = 0; c < 4; c++) out[c] = mms__hsum256(_mm256_add_ps(acc0[c], acc1[c]));
}

/* Q4_K as mms__dot_q4_k_avx2, each pair of sub-blocks unpacked once for the 4 columns. */
static MMS__TARGET_AVX2 void mms__dot4_q4_k_avx2(int64_t K, const void *w, const void *xv, size_t x_stride, float *out) {
    const struct mms__block_q4_k *b = (const struct mms__block_q4_k *)w;
    const struct mms__block_q8_k *x[4];
    const __m256i m4 = _mm256_set1_epi8(0x0f), step = _mm256_set1_epi16(0x0202);
    __m256 acc[4];
    int64_t i;
    int j, c;
MMS__UNROLL4
    for (c = 0; c < 4; c++) { x[c] = (const struct mms__block_q8_k *)((const char *)xv + c * x_stride); acc[c] = _mm256_setzero_ps(); }
    for (i = 0; i < K / MMS__QK_K; i++, b++) {
        const __m256i sm = mms__q4_k_scales_mins(b->scales), scales = _mm256_permute4x64_epi64(sm, 0x44);
        const __m128i mins = _mm256_extracti128_si256(sm, 1);
        const __m128 d = mms__fp16x2_to_f32(&b->d);
        __m256i sumi[4];
        __m256i pick = _mm256_set1_epi16(0x0100);   /* the shuffle that broadcasts int16 lane k: bytes 2k, 2k + 1 */
MMS__UNROLL4
        for (c = 0; c < 4; c++) sumi[c] = _mm256_setzero_si256();
        for (j = 0; j < 4; j++) {   /* not unrolled: gcc then spills the 4 columns' sums */
            const __m256i q = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * j));
            const __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            const __m256i sc_lo = _mm256_shuffle_epi8(scales, pick), sc_hi = _mm256_shuffle_epi8(scales, _mm256_add_epi16(pick, step));
            pick = _mm256_add_epi16(pick, _mm256_add_epi16(step, step));
MMS__UNROLL4
            for (c = 0; c < 4; c++) {
                const int8_t *a = x[c][i].qs + 64 * j;
                const __m256i plo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)a));
                const __m256i phi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(a + 32)));
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(plo, sc_lo));
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(phi, sc_hi));
            }
        }
MMS__UNROLL4
        for (c = 0; c < 4; c++) {   /* d * sum - dmin * sum(min * activations), times the activations' step */
            const struct mms__block_q8_k *xc = &x[c][i];
            const __m128i bsums = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)xc->bsums), _mm_loadu_si128((const __m128i *)(xc->bsums + 8)));
            const __m128 dc = _mm_mul_ps(d, _mm_set1_ps(xc->d));
            const __m256 m = _mm256_set_m128(_mm_setzero_ps(), _mm_mul_ps(_mm_cvtepi32_ps(_mm_madd_epi16(mins, bsums)), _mm_permute_ps(dc, 0x55)));
            acc[c] = _mm256_sub_ps(_mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[c]), _mm256_broadcastss_ps(dc), acc[c]), m);
        }
    }
MMS__UNROLL4
    for (c = 0; c < 4; c++) out[c] = mms__hsum256(acc[c]);
}

/* Q6_K as mms__dot_q6_k_avx2, each group of 32 values unpacked once for the 4 columns. */
static MMS__TARGET_AVX2 void mms__dot4_q6_k_avx2(int64_t K, const void *w, const void *xv, size_t x_stride, float *out) {
    const struct mms__block_q6_k *b = (const struct mms__block_q6_k *)w;
    const struct mms__block_q8_k *x[4];
    __m256 acc[4];
    int64_t i;
    int h, g, c;
MMS__UNROLL4
    for (c = 0; c < 4; c++) { x[c] = (const struct mms__block_q8_k *)((const char *)xv + c * x_stride); acc[c] = _mm256_setzero_ps(); }
    for (i = 0; i < K / MMS__QK_K; i++, b++) {
        const __m256i scales = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
        const __m256i sc_half[2] = { _mm256_permute4x64_epi64(scales, 0x44), _mm256_permute4x64_epi64(scales, 0xee) };
        const float d = mms__fp16_to_f32_f16c(b->d);
        __m256i sumi[4];
MMS__UNROLL4
        for (c = 0; c < 4; c++)     /* the - 32 of every value, from the activations' sums of 16 */
            sumi[c] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                       _mm256_slli_epi32(_mm256_madd_epi16(scales, _mm256_loadu_si256((const __m256i *)x[c][i].bsums)), 5));
        for (h = 0; h < 2; h++) {
MMS__UNROLL4
            for (g = 0; g < 4; g++) {
                const __m256i v = mms__q6_k_group(b, h, g), sc = mms__broadcast_i16(sc_half[h], 2 * g, 2 * g + 1);
MMS__UNROLL4
                for (c = 0; c < 4; c++) {
                    const __m256i p = _mm256_maddubs_epi16(v, _mm256_loadu_si256((const __m256i *)(x[c][i].qs + 128 * h + 32 * g)));
                    sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(p, sc));
                }
            }
        }
MMS__UNROLL4
        for (c = 0; c < 4; c++) acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[c]), _mm256_set1_ps(d * x[c][i].d), acc[c]);
    }
MMS__UNROLL4
    for (c = 0; c < 4; c++) out[c] = mms__hsum256(acc[c]);
}
#endif

/* 8 rows of Q4_K side by side, one super-block (see mms__gemm_q4_kx8_avx2): the f16 scales; sc[s][r]
   and mn[s][r]: sub-block s's 6-bit scale and min of row r as bytes (the file packs them in 12
   bytes a row; as bytes a sub-block's 8 rows widen in one instruction); qs[8j + k][r]: bytes
   4k..4k + 3 of row r's nibble chunk j (low nibbles: sub-block 2j, high: 2j + 1). 1184 bytes for
   the 8 rows' 1152. */
struct mms__q4_kx8 { mms_fp16_t d[8], dmin[8]; uint8_t sc[8][8], mn[8][8]; uint32_t qs[32][8]; };

/* Rows rows[0..n) (n <= 8; the others zero) of K values of Q4_K into K / 256 packed blocks. */
static void mms__pack_q4_kx8_rows(const void *const *rows, int n, int64_t K, void *dstv) {
    struct mms__q4_kx8 *dst = (struct mms__q4_kx8 *)dstv;
    int64_t b;
    int r, s, k;
    for (b = 0; b < K / MMS__QK_K; b++, dst++)
        for (r = 0; r < 8; r++) {
            const struct mms__block_q4_k *src = r < n ? (const struct mms__block_q4_k *)rows[r] + b : NULL;
            dst->d[r] = src ? src->d : 0;
            dst->dmin[r] = src ? src->dmin : 0;
            for (s = 0; s < 8; s++) {
                int sc = 0, mn = 0;
                if (src) mms__q4_k_scale_min(s, src->scales, &sc, &mn);
                dst->sc[s][r] = (uint8_t)sc;
                dst->mn[s][r] = (uint8_t)mn;
            }
            for (k = 0; k < 32; k++) {
                if (src) memcpy(&dst->qs[k][r], src->qs + 4 * k, 4);
                else dst->qs[k][r] = 0;
            }
        }
}

/* The inverse for 8 rows, the 12 bytes of scales packed back as the file has them (every bit of
   them is a scale's or a min's, so this gives the bytes back exactly). */
static void mms__unpack_q4_kx8_rows(const void *srcv, int64_t K, void *const *rows) {
    const struct mms__q4_kx8 *src = (const struct mms__q4_kx8 *)srcv;
    int64_t b;
    int r, s, k;
    for (b = 0; b < K / MMS__QK_K; b++, src++)
        for (r = 0; r < 8; r++) {
            struct mms__block_q4_k *dst = (struct mms__block_q4_k *)rows[r] + b;
            uint8_t *q = dst->scales;
            dst->d = src->d[r];
            dst->dmin = src->dmin[r];
            for (s = 0; s < 4; s++) {
                const int sc_hi = src->sc[s + 4][r], mn_hi = src->mn[s + 4][r];
                q[s] = (uint8_t)(src->sc[s][r] | (sc_hi >> 4) << 6);
                q[s + 4] = (uint8_t)(src->mn[s][r] | (mn_hi >> 4) << 6);
                q[s + 8] = (uint8_t)((sc_hi & 0x0f) | (mn_hi & 0x0f) << 4);
            }
            for (k = 0; k < 32; k++) memcpy(dst->qs + 4 * k, &src->qs[k][r], 4);
        }
}

/* 8 rows of Q6_K side by side, one super-block: the f16 scales; sc[s][r]: sub-block s's int8 scale
   of row r; ql[k][r] and qh[k][r]: dword k of row r's ql (128 bytes) and qh (64 bytes). The same
   210 bytes a row as the file's blocks, permuted (1680 for 8 rows), so keeping Q6_K weights
   repacked costs no memory. One dword of qh holds the high bits of 4 values in each of the 4
   groups of 32 of a half (see mms__q6_k_group), whose low bits are the low and high nibbles of
   two ql dwords. */
struct mms__q6_kx8 { mms_fp16_t d[8]; int8_t sc[16][8]; uint32_t ql[32][8]; uint32_t qh[16][8]; };

/* Rows rows[0..n) (n <= 8; the others zero) of K values of Q6_K into K / 256 packed blocks. */
static void mms__pack_q6_kx8_rows(const void *const *rows, int n, int64_t K, void *dstv) {
    struct mms__q6_kx8 *dst = (struct mms__q6_kx8 *)dstv;
    int64_t b;
    int r, k;
    for (b = 0; b < K / MMS__QK_K; b++, dst++)
        for (r = 0; r < 8; r++) {
            const struct mms__block_q6_k *src = r < n ? (const struct mms__block_q6_k *)rows[r] + b : NULL;
            dst->d[r] = src ? src->d : 0;
            for (k = 0; k < 16; k++) dst->sc[k][r] = src ? src->scales[k] : 0;
            for (k = 0; k < 32; k++) {
                if (src) memcpy(&dst->ql[k][r], src->ql + 4 * k, 4);
                else dst->ql[k][r] = 0;
            }
            for (k = 0; k < 16; k++) {
                if (src) memcpy(&dst->qh[k][r], src->qh + 4 * k, 4);
                else dst->qh[k][r] = 0;
            }
        }
}

static void mms__unpack_q6_kx8_rows(const void *srcv, int64_t K, void *const *rows) {
    const struct mms__q6_kx8 *src = (const struct mms__q6_kx8 *)srcv;
    int64_t b;
    int r, k;
    for (b = 0; b < K / MMS__QK_K; b++, src++)
        for (r = 0; r < 8; r++) {
            struct mms__block_q6_k *dst = (struct mms__block_q6_k *)rows[r] + b;
            dst->d = src->d[r];
            for (k = 0; k < 16; k++) dst->scales[k] = src->sc[k][r];
            for (k = 0; k < 32; k++) memcpy(dst->ql + 4 * k, &src->ql[k][r], 4);
            for (k = 0; k < 16; k++) memcpy(dst->qh + 4 * k, &src->qh[k][r], 4);
        }
}

#if MMS__HAVE_AVX2
static MMS__TARGET_AVX2 void mms__pack_q4_kx8_avx2(const void *const *rows, int64_t K, struct mms__q4_kx8 *dst) {
    int64_t b;
    int r, s, j;
    for (b = 0; b < K / MMS__QK_K; b++, dst++) {
        const uint8_t *src[8], *qs[8];
        uint16_t sm[8][16];   /* per row: the 8 scales, then the 8 mins */
        for (r = 0; r < 8; r++) {
            src[r] = (const uint8_t *)((const struct mms__block_q4_k *)rows[r] + b);
            _mm256_storeu_si256((__m256i *)sm[r], mms__q4_k_scales_mins(((const struct mms__block_q4_k *)src[r])->scales));
            memcpy(&dst->d[r], src[r] + offsetof(struct mms__block_q4_k, d), sizeof dst->d[r]);
            memcpy(&dst->dmin[r], src[r] + offsetof(struct mms__block_q4_k, dmin), sizeof dst->dmin[r]);
            qs[r] = src[r] + offsetof(struct mms__block_q4_k, qs);
        }
        for (s = 0; s < 8; s++)
            for (r = 0; r < 8; r++) {
                dst->sc[s][r] = (uint8_t)sm[r][s];
                dst->mn[s][r] = (uint8_t)sm[r][8 + s];
            }
        for (j = 0; j < 8; j++) {   /* dwords 4j..4j + 3 */
            const uint8_t *q[8];
            for (r = 0; r < 8; r++) q[r] = qs[r] + 16 * j;
            mms__transpose_dwords4(q, dst->qs[4 * j]);
            mms__transpose_dwords4(q + 4, dst->qs[4 * j] + 4);
        }
    }
}

static void mms__pack_q4_kx8(const void *const *rows, int n, int64_t K, void *dst) {
    if (n == 8) mms__pack_q4_kx8_avx2(rows, K, (struct mms__q4_kx8 *)dst);
    else mms__pack_q4_kx8_rows(rows, n, K, dst);
}

static MMS__TARGET_AVX2 void mms__pack_q6_kx8_avx2(const void *const *rows, int64_t K, struct mms__q6_kx8 *dst) {
    int64_t b;
    int r, s, j;
    for (b = 0; b < K / MMS__QK_K; b++, dst++) {
        const uint8_t *src[8], *q[8];
        for (r = 0; r < 8; r++) {
            src[r] = (const uint8_t *)((const struct mms__block_q6_k *)rows[r] + b);
            memcpy(&dst->d[r], src[r] + offsetof(struct mms__block_q6_k, d), sizeof dst->d[r]);
        }
        for (s = 0; s < 16; s++)
            for (r = 0; r < 8; r++) dst->sc[s][r] = (int8_t)src[r][offsetof(struct mms__block_q6_k, scales) + (size_t)s];
        for (j = 0; j < 12; j++) {   /* 16 bytes of each row at a time: ql's 8 chunks, then qh's 4 */
            uint32_t *to = j < 8 ? dst->ql[4 * j] : dst->qh[4 * (j - 8)];
            for (r = 0; r < 8; r++) q[r] = src[r] + 16 * (size_t)j;   /* qh follows ql in the block */
            mms__transpose_dwords4(q, to);
            mms__transpose_dwords4(q + 4, to + 4);
        }
    }
}

static void mms__pack_q6_kx8(const void *const *rows, int n, int64_t K, void *dst) {
    if (n == 8) mms__pack_q6_kx8_avx2(rows, K, (struct mms__q6_kx8 *)dst);
    else mms__pack_q6_kx8_rows(rows, n, K, dst);
}

/* The activations' sums of sub-blocks 2s and 2s + 1 (of 32 values each, from the bsums of 16) as
   the int16 pair a madd multiplies by two sub-blocks' mins. */
static MMS__AVX2_INLINE uint32_t mms__q4_k_sum_pair(const int16_t *bs, int s) {
    return (uint32_t)(uint16_t)(bs[4 * s] + bs[4 * s + 1]) | (uint32_t)(uint16_t)(bs[4 * s + 2] + bs[4 * s + 3]) << 16;
}

/* 8 rows' byte values (a sub-block's scales or mins) as int32 lanes, the value in both int16 halves
   (one madd then multiplies both of a row's int16 sums). */
static MMS__AVX2_INLINE __m256i mms__bytes8_dup16(const uint8_t *p) {
    const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}

/* mms__u8s8_add's sums as int32 lanes times 8 rows' byte factors p[r]. */
static MMS__AVX2_INLINE __m256i mms__u8s8_widen_scaled(bool vnni, __m256i acc, const uint8_t *p) {
    return vnni ? _mm256_mullo_epi32(acc, _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p))) : _mm256_madd_epi16(acc, mms__bytes8_dup16(p));
}

/* Two sub-blocks' 8 rows of bytes as int16 pairs: lane r = lo[r] | hi[r] << 16. */
static MMS__AVX2_INLINE __m256i mms__bytes8_pairs(const uint8_t *lo, const uint8_t *hi) {
    return _mm256_or_si256(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)lo)),
                           _mm256_slli_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)hi)), 16));
}
#endif

#if MMS__HAVE_AVX2
/* -- Q4_0 prompt products on repacked tiles: 8 weight rows against 4 columns --
   Each thread repacks its tile of weight rows, 8 rows side by side (mms__q4_0x8): per block the 8
   scales as floats, then for each of the block's 4 dwords of nibbles the 8 rows' dwords. One
   32-byte load then holds 8 nibbles of every row, and one maddubs against an activation dword
   broadcast to every lane leaves each row's products in its own lanes: no horizontal sums, and one
   conversion and FMA per block serve 8 rows (the single-row dots spend those per row and column,
   which kept them slower than the f32 GEMM). Low nibbles of dword k are elements 4k..4k + 3, high
   ones 16 + 4k..; the - 8 comes from the activations' sums. The int16 sums of 8 maddubs stay
   within 8 * 2 * 15 * 127. */
static MMS__AVX2_INLINE void mms__gemm_q4_0x8_body(bool vnni, int64_t K, const void *wv, const void *const xv[4], float *out) {
    const struct mms__q4_0x8 *w = (const struct mms__q4_0x8 *)wv;
    const struct mms__block_q8_act *const x[4] = { (const struct mms__block_q8_act *)xv[0], (const struct mms__block_q8_act *)xv[1],
                                                  (const struct mms__block_q8_act *)xv[2], (const struct mms__block_q8_act *)xv[3] };
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[4];
    int64_t b;
    int k, c;
MMS__UNROLL4
    for (c = 0; c < 4; c++) acc[c] = _mm256_setzero_ps();
    for (b = 0; b < K / 32; b++, w++) {
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->d));
        __m256i sum_lo[4], sum_hi[4];   /* 8 chains: VNNI's adds wait on their accumulator */
MMS__UNROLL4
        for (c = 0; c < 4; c++) sum_lo[c] = sum_hi[c] = _mm256_setzero_si256();
MMS__NO_UNROLL
        for (k = 0; k < 4; k++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)w->qs[k]);
            const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
MMS__UNROLL4
            for (c = 0; c < 4; c++) {
                int32_t a_lo, a_hi;
                memcpy(&a_lo, x[c][b].qs + 4 * k, 4);
                memcpy(&a_hi, x[c][b].qs + 16 + 4 * k, 4);
                sum_lo[c] = mms__u8s8_add(vnni, sum_lo[c], lo, _mm256_set1_epi32(a_lo));
                sum_hi[c] = mms__u8s8_add(vnni, sum_hi[c], hi, _mm256_set1_epi32(a_hi));
            }
        }
MMS__UNROLL4
        for (c = 0; c < 4; c++) {
            const __m256i t = mms__u8s8_widen2(vnni, sum_lo[c], sum_hi[c]);
            const __m256i s = _mm256_sub_epi32(t, _mm256_set1_epi32(8 * (x[c][b].sums[0] + x[c][b].sums[1])));
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_set1_ps(x[c][b].d)), acc[c]);
        }
    }
MMS__UNROLL4
    for (c = 0; c < 4; c++) _mm256_storeu_ps(out + 8 * c, acc[c]);
}
static MMS__TARGET_AVX2 void mms__gemm_q4_0x8_avx2(int64_t K, const void *wv, const void *const xv[4], float *out) {
    mms__gemm_q4_0x8_body(false, K, wv, xv, out);
}
static MMS__TARGET_AVX512 void mms__gemm_q4_0x8_avx512(int64_t K, const void *wv, const void *const xv[4], float *out) {
    mms__gemm_q4_0x8_body(true, K, wv, xv, out);
}

/* Decode on the same layout: one activation row against ns <= 4 groups of 8 rows (w[j], out[j]),
   walked side by side. Each group is its own stream through memory: one core reading one stream
   stays well below the bandwidth it gets from several (4 streams are faster than 1 and than the
   single-row dots: docs/measurements.md), and one conversion and FMA per block serve 8 rows. */
static MMS__AVX2_INLINE void mms__gemv_q4_0x8_body(bool vnni, int ns, int64_t K, const void *const wv[4], const void *xv, float *const out[4]) {
    const struct mms__block_q8_act *x = (const struct mms__block_q8_act *)xv;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[4];
    int64_t b;
    int j, k;
    for (j = 0; j < ns; j++) acc[j] = _mm256_setzero_ps();
    for (b = 0; b < K / 32; b++) {
        const __m256 xd = _mm256_set1_ps(x[b].d);
        const __m256i corr = _mm256_set1_epi32(8 * (x[b].sums[0] + x[b].sums[1]));
        int32_t a[8];
        memcpy(a, x[b].qs, sizeof a);
MMS__UNROLL4
        for (j = 0; j < ns; j++) {
            const struct mms__q4_0x8 *w = (const struct mms__q4_0x8 *)wv[j] + b;
            __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
            MMS__PREFETCH(w + 8, sizeof *w, 3);   /* 8 blocks ahead: faster from memory (docs/measurements.md) */
MMS__UNROLL4
            for (k = 0; k < 4; k++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)w->qs[k]);
                lo = mms__u8s8_add(vnni, lo, _mm256_and_si256(v, m4), _mm256_set1_epi32(a[k]));
                hi = mms__u8s8_add(vnni, hi, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4), _mm256_set1_epi32(a[4 + k]));
            }
            lo = mms__u8s8_widen2(vnni, lo, hi);
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(lo, corr)),
                                     _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->d)), xd), acc[j]);
        }
    }
    for (j = 0; j < ns; j++) _mm256_storeu_ps(out[j], acc[j]);
}
static MMS__TARGET_AVX2 void mms__gemv_q4_0x8_avx2(int ns, int64_t K, const void *const wv[4], const void *xv, float *const out[4]) {
    mms__gemv_q4_0x8_body(false, ns, K, wv, xv, out);
}
static MMS__TARGET_AVX512 void mms__gemv_q4_0x8_avx512(int ns, int64_t K, const void *const wv[4], const void *xv, float *const out[4]) {
    mms__gemv_q4_0x8_body(true, ns, K, wv, xv, out);
}

/* Decode on the Q8_0 layout: one activation row against ns <= 4 groups of 8 rows side by side.
   Signed weights: maddubs takes |w| against the activations with w's sign moved onto them, and
   each product pair goes to int32 at once (two would overflow int16). */
static MMS__AVX2_INLINE void mms__gemv_q8_0x8_body(bool vnni, int ns, int64_t K, const void *const wv[4], const void *xv, float *const out[4]) {
    const struct mms__block_q8_act *x = (const struct mms__block_q8_act *)xv;
    __m256 acc[4];
    int64_t b;
    int j, k;
    for (j = 0; j < ns; j++) acc[j] = _mm256_setzero_ps();
    for (b = 0; b < K / 32; b++) {
        const __m256 xd = _mm256_set1_ps(x[b].d);
        int32_t a[8];
        memcpy(a, x[b].qs, sizeof a);
MMS__UNROLL4
        for (j = 0; j < ns; j++) {
            const struct mms__q8_0x8 *w = (const struct mms__q8_0x8 *)wv[j] + b;
            __m256i sum0 = _mm256_setzero_si256(), sum1 = _mm256_setzero_si256();   /* two chains */
            MMS__PREFETCH(w + 8, sizeof *w, 3);   /* as the Q4_0 body */
            for (k = 0; k < 8; k += 2) {
                const __m256i v0 = _mm256_loadu_si256((const __m256i *)w->qs[k]), v1 = _mm256_loadu_si256((const __m256i *)w->qs[k + 1]);
                sum0 = mms__u8s8_add32(vnni, sum0, _mm256_abs_epi8(v0), _mm256_sign_epi8(_mm256_set1_epi32(a[k]), v0));
                sum1 = mms__u8s8_add32(vnni, sum1, _mm256_abs_epi8(v1), _mm256_sign_epi8(_mm256_set1_epi32(a[k + 1]), v1));
            }
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(sum0, sum1)),
                                     _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->d)), xd), acc[j]);
        }
    }
    for (j = 0; j < ns; j++) _mm256_storeu_ps(out[j], acc[j]);
}
static MMS__TARGET_AVX2 void mms__gemv_q8_0x8_avx2(int ns, int64_t K, const void *const wv[4], const void *xv, float *const out[4]) {
    mms__gemv_q8_0x8_body(false, ns, K, wv, xv, out);
}
static MMS__TARGET_AVX512 void mms__gemv_q8_0x8_avx512(int ns, int64_t K, const void *const wv[4], const void *xv, float *const out[4]) {
    mms__gemv_q8_0x8_body(true, ns, K, wv, xv, out);
}

/* Q8_0 prompt products on the 8-row layout, with VNNI only, against activations made unsigned
   (a + 128: mms__q8_act_unsigned; vpdpbusd multiplies unsigned by signed bytes) and 128 times
   each row's sum of weights taken off (one vpdpbusd per dword against ones, for all 4 columns).
   (Without VNNI, sign, maddubs and madd per dword and column were slower than dequantizing
   into the f32 GEMM: manual section 9.) */
static MMS__TARGET_AVX512 void mms__gemm_q8_0x8_avx512(int64_t K, const void *wv, const void *const xv[4], float *out) {
    const struct mms__q8_0x8 *w = (const struct mms__q8_0x8 *)wv;
    const struct mms__block_q8_act *const x[4] = { (const struct mms__block_q8_act *)xv[0], (const struct mms__block_q8_act *)xv[1],
                                                  (const struct mms__block_q8_act *)xv[2], (const struct mms__block_q8_act *)xv[3] };
    const __m256i ones = _mm256_set1_epi8(1);
    __m256 acc[4];
    int64_t b;
    int k, c;
MMS__UNROLL4
    for (c = 0; c < 4; c++) acc[c] = _mm256_setzero_ps();
    for (b = 0; b < K / 32; b++, w++) {
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->d));
        __m256i sum0[4], sum1[4], wsum = _mm256_setzero_si256();   /* dwords k and k + 1: 8 chains */
MMS__UNROLL4
        for (c = 0; c < 4; c++) sum0[c] = sum1[c] = _mm256_setzero_si256();
        for (k = 0; k < 8; k += 2) {
            const __m256i v0 = _mm256_loadu_si256((const __m256i *)w->qs[k]), v1 = _mm256_loadu_si256((const __m256i *)w->qs[k + 1]);
            wsum = _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(wsum, ones, v0), ones, v1);
MMS__UNROLL4
            for (c = 0; c < 4; c++) {
                int32_t a[2];
                memcpy(a, x[c][b].qs + 4 * k, 8);
                sum0[c] = _mm256_dpbusd_epi32(sum0[c], _mm256_set1_epi32(a[0]), v0);
                sum1[c] = _mm256_dpbusd_epi32(sum1[c], _mm256_set1_epi32(a[1]), v1);
            }
        }
        wsum = _mm256_slli_epi32(wsum, 7);
MMS__UNROLL4
        for (c = 0; c < 4; c++)
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_add_epi32(sum0[c], sum1[c]), wsum)),
                                     _mm256_mul_ps(dw, _mm256_set1_ps(x[c][b].d)), acc[c]);
    }
MMS__UNROLL4
    for (c = 0; c < 4; c++) _mm256_storeu_ps(out + 8 * c, acc[c]);
}

/* Q4_K the same way, per super-block: each sub-block's 8 dwords of products summed in int16 (at
   most 8 * 2 * 15 * 127), then one madd by the 8 rows' scales; the mins term from the activations'
   sums of 32, one madd per two sub-blocks. */
static MMS__AVX2_INLINE void mms__gemm_q4_kx8_body(bool vnni, int64_t K, const void *wv, const void *const xv[4], float *out) {
    const struct mms__q4_kx8 *w = (const struct mms__q4_kx8 *)wv;
    const struct mms__block_q8_k *const x[4] = { (const struct mms__block_q8_k *)xv[0], (const struct mms__block_q8_k *)xv[1],
                                                 (const struct mms__block_q8_k *)xv[2], (const struct mms__block_q8_k *)xv[3] };
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[4];
    int64_t b;
    int s, k, c;
MMS__UNROLL4
    for (c = 0; c < 4; c++) acc[c] = _mm256_setzero_ps();
    for (b = 0; b < K / MMS__QK_K; b++, w++) {
        __m256i sumi[4], summ[4];
MMS__UNROLL4
        for (c = 0; c < 4; c++) sumi[c] = summ[c] = _mm256_setzero_si256();
        for (s = 0; s < 8; s += 2) {   /* sub-blocks s and s + 1: the low and high nibbles of one chunk */
            __m256i lo[4], hi[4];
MMS__UNROLL4
            for (c = 0; c < 4; c++) lo[c] = hi[c] = _mm256_setzero_si256();
            for (k = 0; k < 8; k++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)w->qs[4 * s + k]);
                const __m256i u_lo = _mm256_and_si256(v, m4), u_hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
MMS__UNROLL4
                for (c = 0; c < 4; c++) {
                    int32_t a_lo, a_hi;
                    memcpy(&a_lo, x[c][b].qs + 32 * s + 4 * k, 4);
                    memcpy(&a_hi, x[c][b].qs + 32 * s + 32 + 4 * k, 4);
                    lo[c] = mms__u8s8_add(vnni, lo[c], u_lo, _mm256_set1_epi32(a_lo));
                    hi[c] = mms__u8s8_add(vnni, hi[c], u_hi, _mm256_set1_epi32(a_hi));
                }
            }
MMS__UNROLL4
            for (c = 0; c < 4; c++)
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_add_epi32(mms__u8s8_widen_scaled(vnni, lo[c], w->sc[s]),
                                                                     mms__u8s8_widen_scaled(vnni, hi[c], w->sc[s + 1])));
        }
        {
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->d)), dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->dmin));
            __m256i mn[4];
            for (s = 0; s < 4; s++) mn[s] = mms__bytes8_pairs(w->mn[2 * s], w->mn[2 * s + 1]);
MMS__UNROLL4
            for (c = 0; c < 4; c++) {
                const int16_t *bs = x[c][b].bsums;
                const __m256 xd = _mm256_set1_ps(x[c][b].d);
                for (s = 0; s < 4; s++) {
                    const uint32_t pair = mms__q4_k_sum_pair(bs, s);
                    summ[c] = _mm256_add_epi32(summ[c], _mm256_madd_epi16(mn[s], _mm256_set1_epi32((int)pair)));
                }
                acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[c]), _mm256_mul_ps(d, xd), acc[c]);
                acc[c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(summ[c]), _mm256_mul_ps(dmin, xd), acc[c]);
            }
        }
    }
MMS__UNROLL4
    for (c = 0; c < 4; c++) _mm256_storeu_ps(out + 8 * c, acc[c]);
}

static MMS__TARGET_AVX2 void mms__gemm_q4_kx8_avx2(int64_t K, const void *wv, const void *const xv[4], float *out) {
    mms__gemm_q4_kx8_body(false, K, wv, xv, out);
}
static MMS__TARGET_AVX512 void mms__gemm_q4_kx8_avx512(int64_t K, const void *wv, const void *const xv[4], float *out) {
    mms__gemm_q4_kx8_body(true, K, wv, xv, out);
}

/* Q6_K's 6-bit values of group g (0..3) of a half from 8 rows' dwords of ql (q: the low nibbles for
   groups 0 and 1, the high ones for 2 and 3) and of qh (h: bits 2g, 2g + 1 moved to 4, 5), as bytes. */
static MMS__AVX2_INLINE __m256i mms__q6_kx8_values(__m256i q, __m256i h, int g) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    const __m256i lo = _mm256_and_si256(g < 2 ? q : _mm256_srli_epi16(q, 4), m4);
    const __m256i hi = _mm256_and_si256(g < 2 ? _mm256_slli_epi16(h, 4 - 2 * g) : _mm256_srli_epi16(h, 2 * g - 4), m30);
    return _mm256_or_si256(lo, hi);
}

/* 8 rows' signed bytes as int32 lanes. */
static MMS__AVX2_INLINE __m256i mms__s8x8_i32(const int8_t *p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)); }

/* mms__u8s8_add's sums as int32 lanes times 8 rows' signed byte factors p[r] (Q6_K's scales). */
static MMS__AVX2_INLINE __m256i mms__u8s8_widen_scaled_s8(bool vnni, __m256i acc, const int8_t *p) {
    const __m256i v = mms__s8x8_i32(p);
    return vnni ? _mm256_mullo_epi32(acc, v) : _mm256_madd_epi16(acc, _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(v, 16)));
}

/* Two sub-blocks' 8 rows of signed bytes as int16 pairs: lane r = lo[r] | hi[r] << 16. */
static MMS__AVX2_INLINE __m256i mms__s8x8_pairs(const int8_t *lo, const int8_t *hi) {
    return _mm256_or_si256(_mm256_and_si256(mms__s8x8_i32(lo), _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(mms__s8x8_i32(hi), 16));
}

/* The activations' sums of 16 values of sub-blocks 2t and 2t + 1, as the int16 pair a madd takes. */
static MMS__AVX2_INLINE int32_t mms__bsum_pair(const int16_t *bs, int t) {
    int32_t pair;
    memcpy(&pair, bs + 2 * t, sizeof pair);
    return pair;
}

/* Q6_K the same way, per super-block: each sub-block of 16 values (4 dwords of a group) summed in
   int32 (VNNI) or in two int16 accumulators of 2 dwords each (at most 2 * 2 * 63 * 128), times
   the 8 rows' int8 scales; the - 32 of every value from the activations' sums of 16, one madd per
   two sub-blocks. A row's integer sum is mms__dot_q6_k_avx2's, exactly. */
static MMS__AVX2_INLINE void mms__gemm_q6_kx8_body(bool vnni, int64_t K, const void *wv, const void *const xv[4], float *out) {
    const struct mms__q6_kx8 *w = (const struct mms__q6_kx8 *)wv;
    const struct mms__block_q8_k *const x[4] = { (const struct mms__block_q8_k *)xv[0], (const struct mms__block_q8_k *)xv[1],
                                                 (const struct mms__block_q8_k *)xv[2], (const struct mms__block_q8_k *)xv[3] };
    __m256 acc[4];
    int64_t b;
    int t, h, g, s, k, c;
MMS__UNROLL4
    for (c = 0; c < 4; c++) acc[c] = _mm256_setzero_ps();
    for (b = 0; b < K / MMS__QK_K; b++, w++) {
        __m256i sumi[4], off[4];
MMS__UNROLL4
        for (c = 0; c < 4; c++) sumi[c] = off[c] = _mm256_setzero_si256();
        for (t = 0; t < 8; t++) {
            const __m256i sp = mms__s8x8_pairs(w->sc[2 * t], w->sc[2 * t + 1]);
MMS__UNROLL4
            for (c = 0; c < 4; c++) off[c] = _mm256_add_epi32(off[c], _mm256_madd_epi16(sp, _mm256_set1_epi32(mms__bsum_pair(x[c][b].bsums, t))));
        }
        for (h = 0; h < 2; h++)
            for (g = 0; g < 4; g++)
                for (s = 0; s < 2; s++) {   /* sub-block 8h + 2g + s: dwords 4s..4s + 3 of the group */
                    __m256i lo[4], hi[4];
MMS__UNROLL4
                    for (c = 0; c < 4; c++) lo[c] = hi[c] = _mm256_setzero_si256();
MMS__UNROLL4
                    for (k = 0; k < 4; k++) {
                        const int j = 4 * s + k;
                        const __m256i v = mms__q6_kx8_values(_mm256_loadu_si256((const __m256i *)w->ql[16 * h + 8 * (g & 1) + j]),
                                                             _mm256_loadu_si256((const __m256i *)w->qh[8 * h + j]), g);
MMS__UNROLL4
                        for (c = 0; c < 4; c++) {
                            int32_t a;
                            memcpy(&a, x[c][b].qs + 128 * h + 32 * g + 4 * j, 4);
                            if (vnni || k < 2) lo[c] = mms__u8s8_add(vnni, lo[c], v, _mm256_set1_epi32(a));
                            else hi[c] = mms__u8s8_add(vnni, hi[c], v, _mm256_set1_epi32(a));
                        }
                    }
MMS__UNROLL4
                    for (c = 0; c < 4; c++) {
                        const int8_t *sc = w->sc[8 * h + 2 * g + s];
                        const __m256i p = mms__u8s8_widen_scaled_s8(vnni, lo[c], sc);
                        sumi[c] = _mm256_add_epi32(sumi[c], vnni ? p : _mm256_add_epi32(p, mms__u8s8_widen_scaled_s8(false, hi[c], sc)));
                    }
                }
        {
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->d));
MMS__UNROLL4
            for (c = 0; c < 4; c++) {
                const __m256i q = _mm256_sub_epi32(sumi[c], _mm256_slli_epi32(off[c], 5));
                acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q), _mm256_mul_ps(d, _mm256_set1_ps(x[c][b].d)), acc[c]);
            }
        }
    }
MMS__UNROLL4
    for (c = 0; c < 4; c++) _mm256_storeu_ps(out + 8 * c, acc[c]);
}

static MMS__TARGET_AVX2 void mms__gemm_q6_kx8_avx2(int64_t K, const void *wv, const void *const xv[4], float *out) {
    mms__gemm_q6_kx8_body(false, K, wv, xv, out);
}
static MMS__TARGET_AVX512 void mms__gemm_q6_kx8_avx512(int64_t K, const void *wv, const void *const xv[4], float *out) {
    mms__gemm_q6_kx8_body(true, K, wv, xv, out);
}

/* -- AVX-512: two groups of 8 rows in one register, 16 rows against 4 or 8 columns --
   The kernels above with zmm registers: the same dword of groups w0 and w1 side by side (rows 0..7
   and 8..15 of out's 16 per column), so one vpdpbusd makes 64 products against one broadcast
   activation dword, twice the ymm form's. The integer sums and float operations of each row are
   those of the 8-row kernels, so a row gets the same bits either way. Q8_0 and Q6_K take 8
   columns a call (tile16_cols): their weights, 8.5 and 6.6 bits a value, come from L2 once for
   twice the products, faster than 4 columns (for Q8_0 with its activations made unsigned once per
   tile instead of by an xor per product; docs/measurements.md, the AVX-512 prompt kernels). */
MMS__AVX512_CODE_BEGIN
static MMS__TARGET_AVX512 __m512i mms__pair256(const void *lo, const void *hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)lo)), _mm256_loadu_si256((const __m256i *)hi), 1);
}
/* 16 rows' bytes (8 from each group) as int32 lanes */
static MMS__TARGET_AVX512 __m512i mms__bytes16_u32(const uint8_t *lo, const uint8_t *hi) {
    return _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)lo), _mm_loadl_epi64((const __m128i *)hi)));
}
static MMS__TARGET_AVX512 __m512 mms__fp16x16_pair(const mms_fp16_t *lo, const mms_fp16_t *hi) {
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)lo)), _mm_loadu_si128((const __m128i *)hi), 1));
}

static MMS__TARGET_AVX512 void mms__gemm_q4_0x16_avx512(int64_t K, const void *w0v, const void *w1v, const void *const *xv, float *out) {
    const struct mms__q4_0x8 *w0 = (const struct mms__q4_0x8 *)w0v, *w1 = (const struct mms__q4_0x8 *)w1v;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const struct mms__block_q8_act *x[8];
    __m512 acc[8];
    int64_t b;
    int k, c;
MMS__UNROLL8
    for (c = 0; c < 8; c++) { x[c] = (const struct mms__block_q8_act *)xv[c]; acc[c] = _mm512_setzero_ps(); }
    for (b = 0; b < K / 32; b++, w0++, w1++) {
        const __m512 dw = mms__fp16x16_pair(w0->d, w1->d);
        __m512i sum[8];
MMS__UNROLL8
        for (c = 0; c < 8; c++) sum[c] = _mm512_setzero_si512();
MMS__UNROLL4
        for (k = 0; k < 4; k++) {
            const __m512i v = mms__pair256(w0->qs[k], w1->qs[k]);
            const __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
MMS__UNROLL8
            for (c = 0; c < 8; c++) {
                int32_t a_lo, a_hi;
                memcpy(&a_lo, x[c][b].qs + 4 * k, 4);
                memcpy(&a_hi, x[c][b].qs + 16 + 4 * k, 4);
                sum[c] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(sum[c], lo, _mm512_set1_epi32(a_lo)), hi, _mm512_set1_epi32(a_hi));
            }
        }
MMS__UNROLL8
        for (c = 0; c < 8; c++) {
            const __m512i t = _mm512_sub_epi32(sum[c], _mm512_set1_epi32(8 * (x[c][b].sums[0] + x[c][b].sums[1])));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_mul_ps(dw, _mm512_set1_ps(x[c][b].d)), acc[c]);
        }
    }
MMS__UNROLL8
    for (c = 0; c < 8; c++) _mm512_storeu_ps(out + 16 * c, acc[c]);
}

/* Q8_0 as the 8-row kernel (unsigned activations, the rows' weight sums taken off), 8 columns a
   call (out[16 c + r], c < 8). */
static MMS__TARGET_AVX512 void mms__gemm_q8_0x16_avx512(int64_t K, const void *w0v, const void *w1v, const void *const *xv, float *out) {
    const struct mms__q8_0x8 *w0 = (const struct mms__q8_0x8 *)w0v, *w1 = (const struct mms__q8_0x8 *)w1v;
    const __m512i ones = _mm512_set1_epi8(1);
    const struct mms__block_q8_act *x[8];
    __m512 acc[8];
    int64_t b;
    int k, c;
MMS__UNROLL8
    for (c = 0; c < 8; c++) { x[c] = (const struct mms__block_q8_act *)xv[c]; acc[c] = _mm512_setzero_ps(); }
    for (b = 0; b < K / 32; b++, w0++, w1++) {
        const __m512 dw = mms__fp16x16_pair(w0->d, w1->d);
        __m512i sum[8], wsum = _mm512_setzero_si512();
MMS__UNROLL8
        for (c = 0; c < 8; c++) sum[c] = _mm512_setzero_si512();
MMS__UNROLL8
        for (k = 0; k < 8; k++) {
            const __m512i v = mms__pair256(w0->qs[k], w1->qs[k]);
            wsum = _mm512_dpbusd_epi32(wsum, ones, v);
MMS__UNROLL8
            for (c = 0; c < 8; c++) {
                int32_t a;
                memcpy(&a, x[c][b].qs + 4 * k, 4);
                sum[c] = _mm512_dpbusd_epi32(sum[c], _mm512_set1_epi32(a), v);
            }
        }
        wsum = _mm512_slli_epi32(wsum, 7);
MMS__UNROLL8
        for (c = 0; c < 8; c++)
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(sum[c], wsum)), _mm512_mul_ps(dw, _mm512_set1_ps(x[c][b].d)), acc[c]);
    }
MMS__UNROLL8
    for (c = 0; c < 8; c++) _mm512_storeu_ps(out + 16 * c, acc[c]);
}

static MMS__TARGET_AVX512 void mms__gemm_q4_kx16_avx512(int64_t K, const void *w0v, const void *w1v, const void *const *xv, float *out) {
    const struct mms__q4_kx8 *w0 = (const struct mms__q4_kx8 *)w0v, *w1 = (const struct mms__q4_kx8 *)w1v;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const struct mms__block_q8_k *x[8];
    __m512 acc[8];
    int64_t b;
    int s, k, c;
MMS__UNROLL8
    for (c = 0; c < 8; c++) { x[c] = (const struct mms__block_q8_k *)xv[c]; acc[c] = _mm512_setzero_ps(); }
    for (b = 0; b < K / MMS__QK_K; b++, w0++, w1++) {
        __m512i sumi[8], summ[8], mn[4];
MMS__UNROLL8
        for (c = 0; c < 8; c++) sumi[c] = _mm512_setzero_si512();
        for (s = 0; s < 8; s++) {   /* sub-block s: the low nibbles of chunk s / 2 for even s, the high ones for odd */
            const __m512i sc = mms__bytes16_u32(w0->sc[s], w1->sc[s]);
            __m512i p[8];
MMS__UNROLL8
            for (c = 0; c < 8; c++) p[c] = _mm512_setzero_si512();
MMS__UNROLL8
            for (k = 0; k < 8; k++) {
                const __m512i v = mms__pair256(w0->qs[4 * (s & ~1) + k], w1->qs[4 * (s & ~1) + k]);
                const __m512i u = _mm512_and_si512(s & 1 ? _mm512_srli_epi16(v, 4) : v, m4);
MMS__UNROLL8
                for (c = 0; c < 8; c++) {
                    int32_t a;
                    memcpy(&a, x[c][b].qs + 32 * s + 4 * k, 4);
                    p[c] = _mm512_dpbusd_epi32(p[c], u, _mm512_set1_epi32(a));
                }
            }
MMS__UNROLL8
            for (c = 0; c < 8; c++) {
                sumi[c] = _mm512_add_epi32(sumi[c], _mm512_mullo_epi32(p[c], sc));
                MMS__KEEP_IN_REG(sumi[c]);
            }
        }
        for (s = 0; s < 4; s++)
            mn[s] = _mm512_or_si512(mms__bytes16_u32(w0->mn[2 * s], w1->mn[2 * s]), _mm512_slli_epi32(mms__bytes16_u32(w0->mn[2 * s + 1], w1->mn[2 * s + 1]), 16));
MMS__UNROLL8
        for (c = 0; c < 8; c++) {
            summ[c] = _mm512_setzero_si512();
            for (s = 0; s < 4; s++) summ[c] = _mm512_add_epi32(summ[c], _mm512_madd_epi16(mn[s], _mm512_set1_epi32((int)mms__q4_k_sum_pair(x[c][b].bsums, s))));
        }
        {
            const __m512 d = mms__fp16x16_pair(w0->d, w1->d), dmin = mms__fp16x16_pair(w0->dmin, w1->dmin);
MMS__UNROLL8
            for (c = 0; c < 8; c++) {
                const __m512 xd = _mm512_set1_ps(x[c][b].d);
                acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[c]), _mm512_mul_ps(d, xd), acc[c]);
                acc[c] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(summ[c]), _mm512_mul_ps(dmin, xd), acc[c]);
            }
        }
    }
MMS__UNROLL8
    for (c = 0; c < 8; c++) _mm512_storeu_ps(out + 16 * c, acc[c]);
}

/* 16 rows' signed bytes (8 from each group) as int32 lanes */
static MMS__TARGET_AVX512 __m512i mms__s8x16_i32(const int8_t *lo, const int8_t *hi) {
    return _mm512_cvtepi8_epi32(_mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)lo), _mm_loadl_epi64((const __m128i *)hi)));
}
static MMS__TARGET_AVX512 __m512i mms__q6_kx16_values(__m512i q, __m512i h, int g) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
    const __m512i lo = _mm512_and_si512(g < 2 ? q : _mm512_srli_epi16(q, 4), m4);
    const __m512i hi = _mm512_and_si512(g < 2 ? _mm512_slli_epi16(h, (unsigned)(4 - 2 * g)) : _mm512_srli_epi16(h, (unsigned)(2 * g - 4)), m30);
    return _mm512_or_si512(lo, hi);
}

/* Q6_K, 8 columns a call (out[16 c + r], c < 8): one group of a half at a time, each of its dword
   steps unpacked once for the 8 columns' vpdpbusd. */
static MMS__TARGET_AVX512 void mms__gemm_q6_kx16_avx512(int64_t K, const void *w0v, const void *w1v, const void *const *xv, float *out) {
    const struct mms__q6_kx8 *w0 = (const struct mms__q6_kx8 *)w0v, *w1 = (const struct mms__q6_kx8 *)w1v;
    const struct mms__block_q8_k *x[8];
    __m512 acc[8];
    int64_t b;
    int t, h, s, g, k, c;
MMS__UNROLL8
    for (c = 0; c < 8; c++) { x[c] = (const struct mms__block_q8_k *)xv[c]; acc[c] = _mm512_setzero_ps(); }
    for (b = 0; b < K / MMS__QK_K; b++, w0++, w1++) {
        __m512i sumi[8];
MMS__UNROLL8
        for (c = 0; c < 8; c++) sumi[c] = _mm512_setzero_si512();
        for (h = 0; h < 2; h++)
            for (s = 0; s < 2; s++)
MMS__UNROLL4
                for (g = 0; g < 4; g++) {   /* sub-block 8h + 2g + s: dwords 4s..4s + 3 of group g */
                    __m512i p[8], sc;
MMS__UNROLL8
                    for (c = 0; c < 8; c++) p[c] = _mm512_setzero_si512();
MMS__UNROLL4
                    for (k = 0; k < 4; k++) {
                        const int j = 4 * s + k;
                        const __m512i v = mms__q6_kx16_values(mms__pair256(w0->ql[16 * h + 8 * (g & 1) + j], w1->ql[16 * h + 8 * (g & 1) + j]),
                                                              mms__pair256(w0->qh[8 * h + j], w1->qh[8 * h + j]), g);
MMS__UNROLL8
                        for (c = 0; c < 8; c++) {
                            int32_t a;
                            memcpy(&a, x[c][b].qs + 128 * h + 32 * g + 4 * j, 4);
                            p[c] = _mm512_dpbusd_epi32(p[c], v, _mm512_set1_epi32(a));
                        }
                    }
                    sc = mms__s8x16_i32(w0->sc[8 * h + 2 * g + s], w1->sc[8 * h + 2 * g + s]);
MMS__UNROLL8
                    for (c = 0; c < 8; c++) {
                        sumi[c] = _mm512_add_epi32(sumi[c], _mm512_mullo_epi32(p[c], sc));
                        MMS__KEEP_IN_REG(sumi[c]);   /* summed here: gcc would keep all 4 groups' p to add later, and spill */
                    }
                }
        for (t = 0; t < 8; t++) {   /* the - 32 of every value */
            const __m512i sp = _mm512_or_si512(_mm512_and_si512(mms__s8x16_i32(w0->sc[2 * t], w1->sc[2 * t]), _mm512_set1_epi32(0xffff)),
                                               _mm512_slli_epi32(mms__s8x16_i32(w0->sc[2 * t + 1], w1->sc[2 * t + 1]), 16));
MMS__UNROLL8
            for (c = 0; c < 8; c++)
                sumi[c] = _mm512_sub_epi32(sumi[c], _mm512_slli_epi32(_mm512_madd_epi16(sp, _mm512_set1_epi32(mms__bsum_pair(x[c][b].bsums, t))), 5));
        }
        {
            const __m512 d = mms__fp16x16_pair(w0->d, w1->d);
MMS__UNROLL8
            for (c = 0; c < 8; c++) acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[c]), _mm512_mul_ps(d, _mm512_set1_ps(x[c][b].d)), acc[c]);
        }
    }
MMS__UNROLL8
    for (c = 0; c < 8; c++) _mm512_storeu_ps(out + 16 * c, acc[c]);
}

/* Q4_0's row dot four blocks at a time: mms__dot_q4_0_avx2's integers (the offset 8 taken off by
   vpdpbusd of 8 against the same activations) and scales, added into its 8-lane sums a pair of
   blocks after the other, so the same bits; the four weight scales come out of one load by vpermw
   (blocks are 18 bytes apart). Fewer instructions a block, so faster (docs/measurements.md). */
static MMS__TARGET_AVX512 float mms__dot_q4_0_avx512(int64_t K, const void *w, const void *xv) {
    const struct mms__block_q4_0 *b = (const struct mms__block_q4_0 *)w;
    const struct mms__block_q8_act *x = (const struct mms__block_q8_act *)xv;
    const __m512i m4 = _mm512_set1_epi8(0x0f), c8 = _mm512_set1_epi8(8);
    const __m512i d_words = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                             0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 27, 18, 9, 0);   /* b[i + k].d: word 9 k */
    const __m512i spread = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    const int64_t nb = K / 32;
    __m256 acc = _mm256_setzero_ps();
    int64_t i;
    for (i = 0; i + 4 <= nb; i += 4) {
        __m512i q = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)b[i].qs)), lo, hi, dot, off;
        const __m512i x01 = mms__pair256(x[i].qs, x[i + 1].qs), x23 = mms__pair256(x[i + 2].qs, x[i + 3].qs);
        const __m512i alo = _mm512_shuffle_i64x2(x01, x23, 0x88), ahi = _mm512_shuffle_i64x2(x01, x23, 0xdd);   /* elements 0..15, 16..31 */
        const __m128 dw = _mm_cvtph_ps(_mm512_castsi512_si128(_mm512_permutexvar_epi16(d_words, _mm512_loadu_si512(b + i))));
        const __m512 s = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(_mm_mul_ps(dw, _mm_set_ps(x[i + 3].d, x[i + 2].d, x[i + 1].d, x[i].d))));
        __m512 f;
        q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)b[i + 1].qs), 1);
        q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)b[i + 2].qs), 2);
        q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)b[i + 3].qs), 3);
        lo = _mm512_and_si512(q, m4);
        hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
        dot = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, alo), hi, ahi);
        off = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), c8, alo), c8, ahi);
        f = _mm512_cvtepi32_ps(_mm512_sub_epi32(dot, off));
        acc = _mm256_fmadd_ps(_mm512_castps512_ps256(f), _mm512_castps512_ps256(s), acc);
        acc = _mm256_fmadd_ps(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1)),
                              _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)), acc);
        MMS__PREFETCH((const char *)(b + i) + MMS__DOT_PREFETCH, 4 * sizeof *b, 3);
    }
    return mms__dot_q4_0_from_avx2(nb, b, x, i, acc);
}

/* Q4_0 decode, n <= 4 rows w_stride bytes apart against one activation row: each pair of rows in
   one zmm register, row 2p in lanes 0..7, 2p + 1 in 8..15, so the activations' regrouping, their
   offset term (taken off by starting the sums at it, negated) and scales are made once for all
   rows, and a block's 16 bytes come by one two-register word permute (blocks are 18 bytes apart,
   their bytes from byte 2 on: at even offsets) instead of a load and insert each. Each row's integer
   sums and float operations are mms__dot_q4_0_avx512's, so the same bits. Faster than the row dots
   with the weights in cache, as fast from memory (both at the read's rate; docs/measurements.md). */
static MMS__AVX512_INLINE void mms__dot_rows_q4_0_body(int np, int64_t K, const struct mms__block_q4_0 *const *b, size_t w_stride,
                                                         const struct mms__block_q8_act *x, float *out) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), c8 = _mm512_set1_epi8(8);
    const __m512i qs_words = _mm512_set_epi16(35, 34, 33, 32, 31, 30, 29, 28, 26, 25, 24, 23, 22, 21, 20, 19,
                                              17, 16, 15, 14, 13, 12, 11, 10, 8, 7, 6, 5, 4, 3, 2, 1);   /* block k: words 9 k + 1 .. 9 k + 8 */
    const __m512i d_words = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                             0, 0, 0, 0, 0, 0, 0, 0, 59, 50, 41, 32, 27, 18, 9, 0);   /* the d of 4 blocks of two rows */
    const __m512i first = _mm512_set_epi32(5, 5, 5, 5, 4, 4, 4, 4, 1, 1, 1, 1, 0, 0, 0, 0);   /* blocks 0, 1 of each row */
    const __m512i second = _mm512_set_epi32(7, 7, 7, 7, 6, 6, 6, 6, 3, 3, 3, 3, 2, 2, 2, 2);  /* blocks 2, 3 */
    const int64_t nb = K / 32;
    __m512 acc[2] = { _mm512_setzero_ps(), _mm512_setzero_ps() };
    int64_t i;
    int p;
    for (i = 0; i + 4 <= nb; i += 4) {
        const __m512i x01 = mms__pair256(x[i].qs, x[i + 1].qs), x23 = mms__pair256(x[i + 2].qs, x[i + 3].qs);
        const __m512i alo = _mm512_shuffle_i64x2(x01, x23, 0x88), ahi = _mm512_shuffle_i64x2(x01, x23, 0xdd);   /* elements 0..15, 16..31 */
        const __m512i neg_off = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), c8, alo), c8, ahi));
        const __m128 xd = _mm_set_ps(x[i + 3].d, x[i + 2].d, x[i + 1].d, x[i].d);
        const __m256 xd2 = _mm256_set_m128(xd, xd);
        for (p = 0; p < np; p++) {
            const struct mms__block_q4_0 *b0 = b[2 * p] + i, *b1 = b[2 * p + 1] + i;
            const __m512i z0 = _mm512_loadu_si512(b0), z1 = _mm512_loadu_si512(b1);   /* 64 of each row's 72 bytes */
            const __m512i q0 = _mm512_permutex2var_epi16(z0, qs_words, _mm512_castsi128_si512(_mm_loadl_epi64((const __m128i *)((const char *)b0 + 64))));
            const __m512i q1 = _mm512_permutex2var_epi16(z1, qs_words, _mm512_castsi128_si512(_mm_loadl_epi64((const __m128i *)((const char *)b1 + 64))));
            const __m512i s0 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(neg_off, _mm512_and_si512(q0, m4), alo), _mm512_and_si512(_mm512_srli_epi16(q0, 4), m4), ahi);
            const __m512i s1 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(neg_off, _mm512_and_si512(q1, m4), alo), _mm512_and_si512(_mm512_srli_epi16(q1, 4), m4), ahi);
            const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm512_castsi512_si128(_mm512_permutex2var_epi16(z0, d_words, z1))), xd2);
            acc[p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_shuffle_i64x2(s0, s1, 0x44)), _mm512_permutexvar_ps(first, _mm512_castps256_ps512(d)), acc[p]);
            acc[p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_shuffle_i64x2(s0, s1, 0xee)), _mm512_permutexvar_ps(second, _mm512_castps256_ps512(d)), acc[p]);
        }
        /* the next rows' blocks as one stream (2 np rows are one run of memory): without it, 2 np
           interleaved short streams, the hardware's prefetch fell far behind (docs/measurements.md) */
        MMS__PREFETCH((const char *)b[0] + 2 * np * (w_stride + (size_t)i * sizeof *b[0]), 2 * np * 4 * sizeof *b[0], 3);
    }
    for (p = 0; p < np; p++) {
        out[2 * p] = mms__dot_q4_0_from_avx2(nb, b[2 * p], x, i, _mm512_castps512_ps256(acc[p]));
        out[2 * p + 1] = mms__dot_q4_0_from_avx2(nb, b[2 * p + 1], x, i, _mm512_extractf32x8_ps(acc[p], 1));
    }
}
static MMS__TARGET_AVX512 void mms__dot_rows_q4_0_avx512(int64_t K, const void *w, size_t w_stride, int n, const void *xv, float *out) {
    const struct mms__block_q4_0 *b[4];
    int r;
    for (r = 0; r < n; r++) b[r] = (const struct mms__block_q4_0 *)((const char *)w + (size_t)r * w_stride);
    if (n >= 4) mms__dot_rows_q4_0_body(2, K, b, w_stride, (const struct mms__block_q8_act *)xv, out);   /* constant pairs: acc kept in registers */
    else if (n >= 2) mms__dot_rows_q4_0_body(1, K, b, w_stride, (const struct mms__block_q8_act *)xv, out);
    if (n & 1) out[n - 1] = mms__dot_q4_0_avx512(K, b[n - 1], xv);
}

/* Q4_K decode as the Q4_0 kernel above: pairs of rows in one zmm register (row 2p in lanes 0..7,
   2p + 1 in 8..15, their 8 scales in 128-bit lanes 0-1 and 2-3 for the per-sub-block word
   broadcast), each activation chunk loaded once for all rows; mms__dot_q4_k_avx2's integer sums
   (vpdpwssd for its madd and add) and float operations per row, so the same bits; faster than the
   row dots with the weights in cache (docs/measurements.md). */
static MMS__AVX512_INLINE void mms__dot_rows_q4_k_body(int np, int64_t K, const struct mms__block_q4_k *const *b, size_t w_stride,
                                                         const struct mms__block_q8_k *x, float *out) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i d_lanes = _mm512_set_epi32(2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0);   /* d of row 2p, of 2p + 1 */
    const __m256i dmin_lanes = _mm256_set_epi32(3, 3, 3, 3, 1, 1, 1, 1);
    __m512 acc[2] = { _mm512_setzero_ps(), _mm512_setzero_ps() };
    __m256 acc_min[2] = { _mm256_setzero_ps(), _mm256_setzero_ps() };
    int64_t i;
    int p, j;
    for (i = 0; i < K / MMS__QK_K; i++, x++) {
        const __m128i bsums = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)x->bsums), _mm_loadu_si128((const __m128i *)(x->bsums + 8)));
        const __m256i bsums2 = _mm256_set_m128i(bsums, bsums);
        const __m128 xd = _mm_set1_ps(x->d);
        __m512i xq[8];   /* chunk j's 32 activations for the low nibbles, then the high ones, in both halves */
        for (j = 0; j < 8; j++) xq[j] = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x->qs + 32 * j)));
        for (p = 0; p < np; p++) {
            const struct mms__block_q4_k *b0 = b[2 * p] + i, *b1 = b[2 * p + 1] + i;
            const __m256i sm0 = mms__q4_k_scales_mins(b0->scales), sm1 = mms__q4_k_scales_mins(b1->scales);
            const __m512i sc = _mm512_shuffle_i64x2(_mm512_castsi256_si512(sm0), _mm512_castsi256_si512(sm1), 0x00);
            const __m128 d = _mm_mul_ps(_mm_movelh_ps(mms__fp16x2_to_f32(&b0->d), mms__fp16x2_to_f32(&b1->d)), xd);   /* d, dmin of each */
            __m512i sumi = _mm512_setzero_si512();
MMS__UNROLL4
            for (j = 0; j < 4; j++) {
                const __m512i q = mms__pair256(b0->qs + 32 * j, b1->qs + 32 * j);
                const short lo = (short)((4 * j + 1) << 8 | 4 * j), hi = (short)((4 * j + 3) << 8 | (4 * j + 2));   /* words 2j, 2j + 1 */
                sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(_mm512_and_si512(q, m4), xq[2 * j]), _mm512_shuffle_epi8(sc, _mm512_set1_epi16(lo)));
                sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(_mm512_and_si512(_mm512_srli_epi16(q, 4), m4), xq[2 * j + 1]),
                                           _mm512_shuffle_epi8(sc, _mm512_set1_epi16(hi)));
            }
            acc[p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_permutexvar_ps(d_lanes, _mm512_castps128_ps512(d)), acc[p]);
            acc_min[p] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_permute2x128_si256(sm0, sm1, 0x31), bsums2)),
                                         _mm256_permutevar8x32_ps(_mm256_castps128_ps256(d), dmin_lanes), acc_min[p]);
        }
        MMS__PREFETCH((const char *)b[0] + 2 * np * (w_stride + (size_t)i * sizeof *b[0]), 2 * np * sizeof *b[0], 3);   /* see the Q4_0 kernel */
    }
    for (p = 0; p < np; p++) {
        out[2 * p] = mms__hsum256(_mm256_sub_ps(_mm512_castps512_ps256(acc[p]), _mm256_set_m128(_mm_setzero_ps(), _mm256_castps256_ps128(acc_min[p]))));
        out[2 * p + 1] = mms__hsum256(_mm256_sub_ps(_mm512_extractf32x8_ps(acc[p], 1), _mm256_set_m128(_mm_setzero_ps(), _mm256_extractf128_ps(acc_min[p], 1))));
    }
}
static MMS__TARGET_AVX512 void mms__dot_rows_q4_k_avx512(int64_t K, const void *w, size_t w_stride, int n, const void *xv, float *out) {
    const struct mms__block_q4_k *b[4];
    int r;
    for (r = 0; r < n; r++) b[r] = (const struct mms__block_q4_k *)((const char *)w + (size_t)r * w_stride);
    if (n >= 4) mms__dot_rows_q4_k_body(2, K, b, w_stride, (const struct mms__block_q8_k *)xv, out);
    else if (n >= 2) mms__dot_rows_q4_k_body(1, K, b, w_stride, (const struct mms__block_q8_k *)xv, out);
    if (n & 1) out[n - 1] = mms__dot_q4_k_avx2(K, b[n - 1], xv);
}
MMS__AVX512_CODE_END

/* The Q4_K and Q6_K decode kernels below prefetch the next block of each group a share at each of
   the `steps` steps through a block (shares <= 128 bytes, 1-2 lines each; they cover the block).
   A whole block's lines at once (19 or 27 a group, two groups a call) was too many misses at once
   for a core to keep, and read far below the bandwidth (docs/measurements.md, the prefetch spread
   through the block). */
#define MMS__PREFETCH_NEXT_SHARE(w, step, steps) \
    MMS__PREFETCH((const char *)((w) + 1) + (size_t)(step) * (sizeof *(w) / (steps)), sizeof *(w) / (steps), 3)

/* Decode on the Q4_K layout: one activation row against ns <= 4 groups of 8 rows side by side, as
   mms__gemv_q4_0x8_avx2 does for Q4_0 (the sums as in the kernel above with one column). */
static MMS__AVX2_INLINE void mms__gemv_q4_kx8_body(bool vnni, int ns, int64_t K, const void *const wv[4], const void *xv, float *const out[4]) {
    const struct mms__block_q8_k *x = (const struct mms__block_q8_k *)xv;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[4];
    int64_t b;
    int j, s, k;
    for (j = 0; j < ns; j++) acc[j] = _mm256_setzero_ps();
    for (b = 0; b < K / MMS__QK_K; b++) {
        const __m256 xd = _mm256_set1_ps(x[b].d);
        const int16_t *bs = x[b].bsums;
        __m256i pairs[4];
        for (s = 0; s < 4; s++)
            pairs[s] = _mm256_set1_epi32((int)mms__q4_k_sum_pair(bs, s));
        for (j = 0; j < ns; j++) {
            const struct mms__q4_kx8 *w = (const struct mms__q4_kx8 *)wv[j] + b;
            __m256i sumi = _mm256_setzero_si256(), summ = _mm256_setzero_si256();
            for (s = 0; s < 8; s += 2) {   /* sub-blocks s and s + 1: the low and high nibbles of one chunk */
                __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
MMS__UNROLL4
                for (k = 0; k < 8; k++) {
                    const __m256i v = _mm256_loadu_si256((const __m256i *)w->qs[4 * s + k]);
                    int32_t a_lo, a_hi;
                    MMS__PREFETCH_NEXT_SHARE(w, 4 * s + k, 32);
                    memcpy(&a_lo, x[b].qs + 32 * s + 4 * k, 4);
                    memcpy(&a_hi, x[b].qs + 32 * s + 32 + 4 * k, 4);
                    lo = mms__u8s8_add(vnni, lo, _mm256_and_si256(v, m4), _mm256_set1_epi32(a_lo));
                    hi = mms__u8s8_add(vnni, hi, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4), _mm256_set1_epi32(a_hi));
                }
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(mms__u8s8_widen_scaled(vnni, lo, w->sc[s]), mms__u8s8_widen_scaled(vnni, hi, w->sc[s + 1])));
            }
            for (s = 0; s < 4; s++) summ = _mm256_add_epi32(summ, _mm256_madd_epi16(mms__bytes8_pairs(w->mn[2 * s], w->mn[2 * s + 1]), pairs[s]));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->d)), xd), acc[j]);
            acc[j] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(summ), _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->dmin)), xd), acc[j]);
        }
    }
    for (j = 0; j < ns; j++) _mm256_storeu_ps(out[j], acc[j]);
}
static MMS__TARGET_AVX2 void mms__gemv_q4_kx8_avx2(int ns, int64_t K, const void *const wv[4], const void *xv, float *const out[4]) {
    mms__gemv_q4_kx8_body(false, ns, K, wv, xv, out);
}
MMS__AVX512_CODE_BEGIN
/* The zmm decode kernels' sums of np pairs of groups: pair j's low half to out[2 j], its high half
   to out[2 j + 1]. */
static MMS__TARGET_AVX512 void mms__store_group_pairs(const __m512 *acc, int np, float *const out[4]) {
    int j;
    for (j = 0; j < np; j++) {
        _mm256_storeu_ps(out[2 * j], _mm512_castps512_ps256(acc[j]));
        _mm256_storeu_ps(out[2 * j + 1], _mm512_extractf32x8_ps(acc[j], 1));
    }
}

/* Decode on the Q4_K layout with AVX-512: groups in pairs, one zmm register each (the 16-row
   kernel's sums with one column), the pairs block by block (ops_matmul passes one: gemv_groups),
   each pair's next block prefetched, a lone last group by the 8-row body; the same integer sums
   and float operations per row, so the same bits. */
static MMS__TARGET_AVX512 void mms__gemv_q4_kx8_avx512(int ns, int64_t K, const void *const wv[4], const void *xv, float *const out[4]) {
    const struct mms__block_q8_k *x = (const struct mms__block_q8_k *)xv;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const int np = ns / 2;   /* pairs */
    __m512 acc[2] = { _mm512_setzero_ps(), _mm512_setzero_ps() };
    int64_t b;
    int j, s, k;
    for (b = 0; b < K / MMS__QK_K; b++) {
        const __m512 xd = _mm512_set1_ps(x[b].d);
        for (j = 0; j < np; j++) {
            const struct mms__q4_kx8 *w0 = (const struct mms__q4_kx8 *)wv[2 * j] + b, *w1 = (const struct mms__q4_kx8 *)wv[2 * j + 1] + b;
            __m512i sumi = _mm512_setzero_si512(), summ = _mm512_setzero_si512();
            for (s = 0; s < 8; s += 2) {   /* sub-blocks s and s + 1: the low and high nibbles of one chunk */
                __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
MMS__UNROLL8
                for (k = 0; k < 8; k++) {
                    const __m512i v = mms__pair256(w0->qs[4 * s + k], w1->qs[4 * s + k]);
                    int32_t a_lo, a_hi;
                    MMS__PREFETCH_NEXT_SHARE(w0, 4 * s + k, 32);
                    MMS__PREFETCH_NEXT_SHARE(w1, 4 * s + k, 32);
                    memcpy(&a_lo, x[b].qs + 32 * s + 4 * k, 4);
                    memcpy(&a_hi, x[b].qs + 32 * s + 32 + 4 * k, 4);
                    lo = _mm512_dpbusd_epi32(lo, _mm512_and_si512(v, m4), _mm512_set1_epi32(a_lo));
                    hi = _mm512_dpbusd_epi32(hi, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4), _mm512_set1_epi32(a_hi));
                }
                sumi = _mm512_add_epi32(sumi, _mm512_add_epi32(_mm512_mullo_epi32(lo, mms__bytes16_u32(w0->sc[s], w1->sc[s])),
                                                               _mm512_mullo_epi32(hi, mms__bytes16_u32(w0->sc[s + 1], w1->sc[s + 1]))));
            }
            for (s = 0; s < 4; s++) {
                const __m512i mn = _mm512_or_si512(mms__bytes16_u32(w0->mn[2 * s], w1->mn[2 * s]), _mm512_slli_epi32(mms__bytes16_u32(w0->mn[2 * s + 1], w1->mn[2 * s + 1]), 16));
                summ = _mm512_add_epi32(summ, _mm512_madd_epi16(mn, _mm512_set1_epi32((int)mms__q4_k_sum_pair(x[b].bsums, s))));
            }
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_mul_ps(mms__fp16x16_pair(w0->d, w1->d), xd), acc[j]);
            acc[j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(summ), _mm512_mul_ps(mms__fp16x16_pair(w0->dmin, w1->dmin), xd), acc[j]);
        }
    }
    mms__store_group_pairs(acc, np, out);
    if (ns % 2) mms__gemv_q4_kx8_body(true, 1, K, wv + ns - 1, xv, out + ns - 1);
}
MMS__AVX512_CODE_END

/* Decode on the Q6_K layout: one activation row against ns <= 4 groups, the 4 groups of a half
   unpacked from one qh and two ql loads (the sums and float operations of the kernel above with
   one column, so a column gets the same bits either way). */
static MMS__AVX2_INLINE void mms__gemv_q6_kx8_body(bool vnni, int ns, int64_t K, const void *const wv[4], const void *xv, float *const out[4]) {
    const struct mms__block_q8_k *x = (const struct mms__block_q8_k *)xv;
    __m256 acc[4];
    int64_t b;
    int j, t, h, s, k, g;
    for (j = 0; j < ns; j++) acc[j] = _mm256_setzero_ps();
    for (b = 0; b < K / MMS__QK_K; b++) {
        const __m256 xd = _mm256_set1_ps(x[b].d);
        for (j = 0; j < ns; j++) {
            const struct mms__q6_kx8 *w = (const struct mms__q6_kx8 *)wv[j] + b;
            __m256i sumi = _mm256_setzero_si256(), off = _mm256_setzero_si256();
            for (t = 0; t < 8; t++)
                off = _mm256_add_epi32(off, _mm256_madd_epi16(mms__s8x8_pairs(w->sc[2 * t], w->sc[2 * t + 1]), _mm256_set1_epi32(mms__bsum_pair(x[b].bsums, t))));
            for (h = 0; h < 2; h++)
                for (s = 0; s < 2; s++) {
                    __m256i lo[4], hi[4];
MMS__UNROLL4
                    for (g = 0; g < 4; g++) lo[g] = hi[g] = _mm256_setzero_si256();
MMS__UNROLL4
                    for (k = 0; k < 4; k++) {
                        const int i = 4 * s + k;
                        const __m256i qh = _mm256_loadu_si256((const __m256i *)w->qh[8 * h + i]);
                        MMS__PREFETCH_NEXT_SHARE(w, 8 * h + i, 16);
                        const __m256i qa = _mm256_loadu_si256((const __m256i *)w->ql[16 * h + i]), qb = _mm256_loadu_si256((const __m256i *)w->ql[16 * h + 8 + i]);
MMS__UNROLL4
                        for (g = 0; g < 4; g++) {
                            const __m256i v = mms__q6_kx8_values(g & 1 ? qb : qa, qh, g);
                            int32_t a;
                            memcpy(&a, x[b].qs + 128 * h + 32 * g + 4 * i, 4);
                            if (vnni || k < 2) lo[g] = mms__u8s8_add(vnni, lo[g], v, _mm256_set1_epi32(a));
                            else hi[g] = mms__u8s8_add(vnni, hi[g], v, _mm256_set1_epi32(a));
                        }
                    }
MMS__UNROLL4
                    for (g = 0; g < 4; g++) {
                        const int8_t *sc = w->sc[8 * h + 2 * g + s];
                        const __m256i p = mms__u8s8_widen_scaled_s8(vnni, lo[g], sc);
                        sumi = _mm256_add_epi32(sumi, vnni ? p : _mm256_add_epi32(p, mms__u8s8_widen_scaled_s8(false, hi[g], sc)));
                    }
                }
            sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(off, 5));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->d)), xd), acc[j]);
        }
    }
    for (j = 0; j < ns; j++) _mm256_storeu_ps(out[j], acc[j]);
}
static MMS__TARGET_AVX2 void mms__gemv_q6_kx8_avx2(int ns, int64_t K, const void *const wv[4], const void *xv, float *const out[4]) {
    mms__gemv_q6_kx8_body(false, ns, K, wv, xv, out);
}
MMS__AVX512_CODE_BEGIN
/* Decode on the Q6_K layout with AVX-512: groups taken in pairs, one zmm register each (as the
   16-row kernel above, one column), the pairs block by block (ops_matmul passes one), a lone
   last group by the 8-row body; a row's sums and float operations are those of the 8-row
   kernels, so the same bits. */
static MMS__TARGET_AVX512 void mms__gemv_q6_kx8_avx512(int ns, int64_t K, const void *const wv[4], const void *xv, float *const out[4]) {
    const struct mms__block_q8_k *x = (const struct mms__block_q8_k *)xv;
    const int np = ns / 2;   /* pairs */
    __m512 acc[2] = { _mm512_setzero_ps(), _mm512_setzero_ps() };
    int64_t b;
    int j, t, h, s, k, g;
    for (b = 0; b < K / MMS__QK_K; b++)
        for (j = 0; j < np; j++) {
            const struct mms__q6_kx8 *w0 = (const struct mms__q6_kx8 *)wv[2 * j] + b, *w1 = (const struct mms__q6_kx8 *)wv[2 * j + 1] + b;
            __m512i sumi = _mm512_setzero_si512(), off = _mm512_setzero_si512();
            for (t = 0; t < 8; t++) {
                const __m512i sp = _mm512_or_si512(_mm512_and_si512(mms__s8x16_i32(w0->sc[2 * t], w1->sc[2 * t]), _mm512_set1_epi32(0xffff)),
                                                   _mm512_slli_epi32(mms__s8x16_i32(w0->sc[2 * t + 1], w1->sc[2 * t + 1]), 16));
                off = _mm512_dpwssd_epi32(off, sp, _mm512_set1_epi32(mms__bsum_pair(x[b].bsums, t)));
            }
            for (h = 0; h < 2; h++)
                for (s = 0; s < 2; s++) {
                    __m512i p[4];
                    for (g = 0; g < 4; g++) p[g] = _mm512_setzero_si512();
MMS__UNROLL4
                    for (k = 0; k < 4; k++) {
                        const int i = 4 * s + k;
                        const __m512i qh = mms__pair256(w0->qh[8 * h + i], w1->qh[8 * h + i]);
                        MMS__PREFETCH_NEXT_SHARE(w0, 8 * h + i, 16);
                        MMS__PREFETCH_NEXT_SHARE(w1, 8 * h + i, 16);
                        const __m512i qa = mms__pair256(w0->ql[16 * h + i], w1->ql[16 * h + i]), qb = mms__pair256(w0->ql[16 * h + 8 + i], w1->ql[16 * h + 8 + i]);
MMS__UNROLL4
                        for (g = 0; g < 4; g++) {
                            int32_t a;
                            memcpy(&a, x[b].qs + 128 * h + 32 * g + 4 * i, 4);
                            p[g] = _mm512_dpbusd_epi32(p[g], mms__q6_kx16_values(g & 1 ? qb : qa, qh, g), _mm512_set1_epi32(a));
                        }
                    }
MMS__UNROLL4
                    for (g = 0; g < 4; g++)
                        sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(p[g], mms__s8x16_i32(w0->sc[8 * h + 2 * g + s], w1->sc[8 * h + 2 * g + s])));
                }
            sumi = _mm512_sub_epi32(sumi, _mm512_slli_epi32(off, 5));
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_mul_ps(mms__fp16x16_pair(w0->d, w1->d), _mm512_set1_ps(x[b].d)), acc[j]);
        }
    mms__store_group_pairs(acc, np, out);
    if (ns % 2) mms__gemv_q6_kx8_body(true, 1, K, wv + ns - 1, xv, out + ns - 1);
}
MMS__AVX512_CODE_END
#endif

#if MMS__HAVE_NEON
/* The NEON dots: the weights unpacked to signed bytes (Q4_0's - 8 and Q6_K's - 32 applied in
   int8), 16 at a time multiplied by the activations into int32 lanes, the sub-block scales
   multiplied in int32, one float multiply-add per block. The byte product is the one piece that
   differs between the two sets: sdot where the CPU has it (4 products per lane), else widening
   multiplies (|w a| <= 128 * 127, so two of them fit an int16) with a pairwise add into int32. */
static MMS__NEON_INLINE int32x4_t mms__dot_s8_neon(int32x4_t acc, int8x16_t w, int8x16_t a) {
    return vpadalq_s16(acc, vmlal_high_s8(vmull_s8(vget_low_s8(w), vget_low_s8(a)), w, a));
}
static MMS__TARGET_DOTPROD MMS__NEON_INLINE int32x4_t mms__dot_s8_dotprod(int32x4_t acc, int8x16_t w, int8x16_t a) {
#if defined(__clang__) && !defined(__ARM_FEATURE_DOTPROD)   /* clang's arm_neon.h declares vdotq only then */
    __asm__("sdot %0.4s, %1.16b, %2.16b" : "+w"(acc) : "w"(w), "w"(a));
    return acc;
#else
    return vdotq_s32(acc, w, a);
#endif
}

static MMS__NEON_INLINE float mms__fp16_to_f32_neon(mms_fp16_t h) {
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

/* The 16 low or high nibbles of 16 bytes as signed bytes minus c */
static MMS__NEON_INLINE int8x16_t mms__nibbles_lo(uint8x16_t q, int c) { return vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f))), vdupq_n_s8((int8_t)c)); }
static MMS__NEON_INLINE int8x16_t mms__nibbles_hi(uint8x16_t q, int c) { return vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vdupq_n_s8((int8_t)c)); }

/* Q6_K's 16 values of one group: 4 bits of ql (low or high nibble), 2 of qh at bit `shift`, - 32 */
static MMS__NEON_INLINE int8x16_t mms__q6_k_values(uint8x16_t ql, bool high_nibble, uint8x16_t qh, int shift) {
    const uint8x16_t lo = high_nibble ? vshrq_n_u8(ql, 4) : vandq_u8(ql, vdupq_n_u8(0x0f));
    const uint8x16_t hi = vandq_u8(vshlq_u8(qh, vdupq_n_s8((int8_t)(4 - shift))), vdupq_n_u8(0x30));
    return vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, hi)), vdupq_n_s8(32));
}

/* The four dots, once for each byte product (SUFFIX, the target it needs, DOT). */
#define MMS__NEON_Q8_DOTS(SUFFIX, TARGET, DOT)                                                                        \
static TARGET float mms__dot_q8_0_##SUFFIX(int64_t K, const void *w, const void *xv) {                               \
    const struct mms__block_q8_0 *b = (const struct mms__block_q8_0 *)w;                                             \
    const struct mms__block_q8_act *x = (const struct mms__block_q8_act *)xv;                                        \
    float32x4_t acc = vdupq_n_f32(0.0f);                                                                             \
    int64_t i;                                                                                                       \
    for (i = 0; i < K / 32; i++) {                                                                                   \
        int32x4_t s = DOT(vdupq_n_s32(0), vld1q_s8(b[i].qs), vld1q_s8(x[i].qs));                                     \
        s = DOT(s, vld1q_s8(b[i].qs + 16), vld1q_s8(x[i].qs + 16));                                                  \
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(s), mms__fp16_to_f32_neon(b[i].d) * x[i].d);                           \
    }                                                                                                                \
    return vaddvq_f32(acc);                                                                                          \
}                                                                                                                    \
static TARGET float mms__dot_q4_0_##SUFFIX(int64_t K, const void *w, const void *xv) {                               \
    const struct mms__block_q4_0 *b = (const struct mms__block_q4_0 *)w;                                             \
    const struct mms__block_q8_act *x = (const struct mms__block_q8_act *)xv;                                        \
    float32x4_t acc = vdupq_n_f32(0.0f);                                                                             \
    int64_t i;                                                                                                       \
    for (i = 0; i < K / 32; i++) {                                                                                   \
        const uint8x16_t q = vld1q_u8(b[i].qs);                                                                      \
        int32x4_t s = DOT(vdupq_n_s32(0), mms__nibbles_lo(q, 8), vld1q_s8(x[i].qs));                                 \
        s = DOT(s, mms__nibbles_hi(q, 8), vld1q_s8(x[i].qs + 16));                                                   \
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(s), mms__fp16_to_f32_neon(b[i].d) * x[i].d);                           \
    }                                                                                                                \
    return vaddvq_f32(acc);                                                                                          \
}                                                                                                                    \
/* Q4_K: the mins term dmin * sum(min * activations) from the activations' sums of 16 */                            \
static TARGET float mms__dot_q4_k_##SUFFIX(int64_t K, const void *w, const void *xv) {                               \
    const struct mms__block_q4_k *b = (const struct mms__block_q4_k *)w;                                             \
    const struct mms__block_q8_k *x = (const struct mms__block_q8_k *)xv;                                            \
    float sum = 0.0f;                                                                                                \
    int64_t i;                                                                                                       \
    int j;                                                                                                           \
    for (i = 0; i < K / MMS__QK_K; i++, b++, x++) {                                                                  \
        int32x4_t sumi = vdupq_n_s32(0);                                                                             \
        int32_t mins = 0;                                                                                            \
        for (j = 0; j < 4; j++) {                                                                                    \
            const uint8x16_t q0 = vld1q_u8(b->qs + 32 * j), q1 = vld1q_u8(b->qs + 32 * j + 16);                      \
            const int8_t *a = x->qs + 64 * j;                                                                        \
            int sc0, m0, sc1, m1;                                                                                    \
            int32x4_t lo, hi;                                                                                        \
            mms__q4_k_scale_min(2 * j, b->scales, &sc0, &m0);                                                        \
            mms__q4_k_scale_min(2 * j + 1, b->scales, &sc1, &m1);                                                    \
            lo = DOT(DOT(vdupq_n_s32(0), mms__nibbles_lo(q0, 0), vld1q_s8(a)), mms__nibbles_lo(q1, 0), vld1q_s8(a + 16)); \
            hi = DOT(DOT(vdupq_n_s32(0), mms__nibbles_hi(q0, 0), vld1q_s8(a + 32)), mms__nibbles_hi(q1, 0), vld1q_s8(a + 48)); \
            sumi = vmlaq_n_s32(vmlaq_n_s32(sumi, lo, sc0), hi, sc1);                                                 \
            mins += m0 * (x->bsums[4 * j] + x->bsums[4 * j + 1]) + m1 * (x->bsums[4 * j + 2] + x->bsums[4 * j + 3]); \
        }                                                                                                            \
        sum += x->d * (mms__fp16_to_f32_neon(b->d) * (float)vaddvq_s32(sumi) - mms__fp16_to_f32_neon(b->dmin) * (float)mins); \
    }                                                                                                                \
    return sum;                                                                                                      \
}                                                                                                                    \
/* Q6_K: per half, group g of 32 values takes nibble g / 2 of ql[32 (g % 2) ..] and bits 2g of qh;  \
   each 16 values have their own int8 scale */                                                                       \
static TARGET float mms__dot_q6_k_##SUFFIX(int64_t K, const void *w, const void *xv) {                               \
    const struct mms__block_q6_k *b = (const struct mms__block_q6_k *)w;                                             \
    const struct mms__block_q8_k *x = (const struct mms__block_q8_k *)xv;                                            \
    float32x4_t acc = vdupq_n_f32(0.0f);                                                                             \
    int64_t i;                                                                                                       \
    int h, g, k;                                                                                                     \
    for (i = 0; i < K / MMS__QK_K; i++, b++, x++) {                                                                  \
        int32x4_t sumi = vdupq_n_s32(0);                                                                             \
        for (h = 0; h < 2; h++) {                                                                                    \
            const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;                                                \
            const int8_t *sc = b->scales + 8 * h, *a = x->qs + 128 * h;                                              \
            for (g = 0; g < 4; g++)                                                                                  \
                for (k = 0; k < 2; k++) {                                                                            \
                    const int8x16_t v = mms__q6_k_values(vld1q_u8(ql + 32 * (g % 2) + 16 * k), g >= 2,               \
                                                          vld1q_u8(qh + 16 * k), 2 * g);                             \
                    sumi = vmlaq_n_s32(sumi, DOT(vdupq_n_s32(0), v, vld1q_s8(a + 32 * g + 16 * k)), sc[2 * g + k]);  \
                }                                                                                                    \
        }                                                                                                            \
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(sumi), mms__fp16_to_f32_neon(b->d) * x->d);                             \
    }                                                                                                                \
    return vaddvq_f32(acc);                                                                                          \
}
MMS__NEON_Q8_DOTS(neon, , mms__dot_s8_neon)
MMS__NEON_Q8_DOTS(dotprod, MMS__TARGET_DOTPROD, mms__dot_s8_dotprod)
#undef MMS__NEON_Q8_DOTS
#endif

/* >>cpu-quant-cards ===============================================================================
   Who multiplies a quantized weight type: its format (one row per type, whatever the kernel set)
   and its kernel card (one row per type in each kernel set's table). ops_matmul and repack.c read
   only these to choose a type's kernels. */

typedef void (*mms__quantize_act_fn)(const float *x, void *y, int64_t K);
typedef void (*mms__pack_fn)(const void *const *rows, int n, int64_t K, void *dst);
typedef void (*mms__unpack_fn)(const void *src, int64_t K, void *const *rows);

/* What a quantized type is to the integer kernels on every kernel set: the block length (of the
   weights and of the activation blocks its dots take), the activation format (the quantizer that
   writes it: blocks of 32 as struct mms__block_q8_act, or of 256 as struct mms__block_q8_k, within
   mms__q8_act_row_size bytes a row), and the repacked layout of 8 rows side by side (repack.c):
   group_block bytes per block of the 8 rows, the portable pack of n <= 8 rows (the others zero)
   and unpack of 8.
   To add a type: its row here (a layout of 8 rows, portable pack and unpack; a NULL pack keeps
   its tensors as they are in CPU_REPACK buffers), then its card in every kernel set's table below
   (NULL where a set has no such kernel), and its traits row (core/types.c). */
struct mms__quant_format {
    enum mms_type        type;
    int64_t              block_len;
    mms__quantize_act_fn quantize_act;
    size_t               group_block;
    mms__pack_fn         pack_rows;
    mms__unpack_fn       unpack_rows;
};

static const struct mms__quant_format mms__quant_formats[] = {
    /* Q8_0 */ { MMS_TYPE_Q8_0, 32,        mms__quantize_row_q8_act, sizeof(struct mms__q8_0x8), mms__pack_q8_0x8_rows, mms__unpack_q8_0x8_rows },
    /* Q4_0 */ { MMS_TYPE_Q4_0, 32,        mms__quantize_row_q8_act, sizeof(struct mms__q4_0x8), mms__pack_q4_0x8_rows, mms__unpack_q4_0x8_rows },
    /* Q4_K */ { MMS_TYPE_Q4_K, MMS__QK_K, mms__quantize_row_q8_k,   sizeof(struct mms__q4_kx8), mms__pack_q4_kx8_rows, mms__unpack_q4_kx8_rows },
    /* Q6_K */ { MMS_TYPE_Q6_K, MMS__QK_K, mms__quantize_row_q8_k,   sizeof(struct mms__q6_kx8), mms__pack_q6_kx8_rows, mms__unpack_q6_kx8_rows },
};

/* The type's format; NULL: none (float types, types without integer kernels). */
static const struct mms__quant_format *mms__quant_format_of(enum mms_type type) {
    int i;
    for (i = 0; i < (int)(sizeof mms__quant_formats / sizeof mms__quant_formats[0]); i++)
        if (mms__quant_formats[i].type == type) return &mms__quant_formats[i];
    return NULL;
}

/* One weight row against one activation row (in the format's layout). */
typedef float (*mms__q8_dot_fn)(int64_t K, const void *w, const void *x);
/* n <= 4 weight rows w_stride bytes apart against one activation row: out[r] = dot(w + r w_stride, x),
   each row's bits those of the type's row dot. */
typedef void (*mms__q8_dot_rows_fn)(int64_t K, const void *w, size_t w_stride, int n, const void *x, float *out);
/* One weight row against 4 activation rows x_stride bytes apart: out[c] = dot(w, x + c x_stride). */
typedef void (*mms__q8_dot4_fn)(int64_t K, const void *w, const void *x, size_t x_stride, float *out);
/* One group of 8 repacked rows against 4 activation rows: out[8 c + r] = dot(row r, x[c]). */
typedef void (*mms__tile_fn)(int64_t K, const void *w, const void *const x[4], float *out);
/* Two groups (16 rows) against tile16_cols columns: out[16 c + r]. */
typedef void (*mms__tile16_fn)(int64_t K, const void *w0, const void *w1, const void *const *x, float *out);
/* One activation row against ns <= 4 groups of 8 repacked rows: out[j][r] = dot(row r of w[j], x). */
typedef void (*mms__gemv_fn)(int ns, int64_t K, const void *const w[4], const void *x, float *const out[4]);

/* Any number of columns (dot4_max_n). */
#define MMS__ANY_N INT64_MAX

/* A weight type's kernel card for one kernel set: which integer kernels a product with these
   weights takes, and from which column count each pays (ops_matmul's choice, in order):
   - tile, tile16: prompt-size products (more than 4 columns, and at least tile_from_n; 0: all) on
     tiles of 8 rows repacked side by side (by pack, the set's own of the format's bytes; NULL: the
     format's pack_rows), 4 columns a call; tile16 (AVX-512) two groups at once against tile16_cols
     columns. act_unsigned: both take the activations' bytes plus 128 (mms__q8_act_unsigned).
     Prompts that neither tile nor dot4 takes dequantize into the f32 GEMM.
   - gemv, gemv_groups: decode (1 to 4 columns) on weights kept repacked, one column against
     gemv_groups groups of a tile walked side by side (each group a stream through memory: 4 for
     the 32-blocks, 2 for the K types' big blocks, unpacked out of order, one zmm pair with
     AVX-512: docs/measurements.md). NULL: such weights are unpacked a tile at a time.
   - dot4: one row against 4 columns of weights as they are, for products of at most dot4_max_n
     columns (Q8_0: decode steps of several sequences only; for prompts the GEMM is faster, but
     dequantizing a whole tile for a few columns takes far longer than these dots:
     docs/measurements.md).
   - dot_rows, dot: the columns left, 4 rows a call or one; with dot NULL (the scalar set has no
     table) the product dequantizes and keeps exact f32 activations.
   To add a kernel set: its table here (one row per type it has kernels for, the others left out)
   and its line in mms__quant_card_of. To add a type: a row in each table (see the formats above). */
struct mms__quant_card {
    enum mms_type       type;
    mms__q8_dot_fn      dot;
    mms__q8_dot_rows_fn dot_rows;
    mms__q8_dot4_fn     dot4;
    int64_t             dot4_max_n;
    mms__pack_fn        pack;
    mms__tile_fn        tile;
    mms__tile16_fn      tile16;
    int                 tile16_cols;
    int64_t             tile_from_n;
    bool                act_unsigned;
    mms__gemv_fn        gemv;
    int                 gemv_groups;
};

#if MMS__HAVE_AVX2
static const struct mms__quant_card mms__cards_avx2[] = {
    /* Q8_0 */ { MMS_TYPE_Q8_0, mms__dot_q8_0_avx2,   NULL,                       mms__dot4_q8_0_avx2, MMS__DECODE_MAX_COLS, mms__pack_q8_0x8, NULL,                    NULL,                     0, 0,                          false, mms__gemv_q8_0x8_avx2, 4 },
    /* Q4_0 */ { MMS_TYPE_Q4_0, mms__dot_q4_0_avx2,   NULL,                       NULL,                0,                    mms__pack_q4_0x8, mms__gemm_q4_0x8_avx2,   NULL,                     0, 0,                          false, mms__gemv_q4_0x8_avx2, 4 },
    /* Q4_K */ { MMS_TYPE_Q4_K, mms__dot_q4_k_avx2,   NULL,                       mms__dot4_q4_k_avx2, MMS__ANY_N,           mms__pack_q4_kx8, mms__gemm_q4_kx8_avx2,   NULL,                     0, 0,                          false, mms__gemv_q4_kx8_avx2, 2 },
    /* Q6_K */ { MMS_TYPE_Q6_K, mms__dot_q6_k_avx2,   NULL,                       mms__dot4_q6_k_avx2, MMS__ANY_N,           mms__pack_q6_kx8, mms__gemm_q6_kx8_avx2,   NULL,                     0, 0,                          false, mms__gemv_q6_kx8_avx2, 2 },
};
/* AVX2's bodies where the set has none of its own */
static const struct mms__quant_card mms__cards_avx512[] = {
    /* Q8_0 */ { MMS_TYPE_Q8_0, mms__dot_q8_0_avx2,   NULL,                       mms__dot4_q8_0_avx2, MMS__DECODE_MAX_COLS, mms__pack_q8_0x8, mms__gemm_q8_0x8_avx512, mms__gemm_q8_0x16_avx512, 8, MMS__DECODE_MAX_COLS + 1, true,  mms__gemv_q8_0x8_avx512, 4 },
    /* Q4_0 */ { MMS_TYPE_Q4_0, mms__dot_q4_0_avx512, mms__dot_rows_q4_0_avx512, NULL,                0,                    mms__pack_q4_0x8, mms__gemm_q4_0x8_avx512, mms__gemm_q4_0x16_avx512, 8, 0,                          false, mms__gemv_q4_0x8_avx512, 4 },
    /* Q4_K */ { MMS_TYPE_Q4_K, mms__dot_q4_k_avx2,   mms__dot_rows_q4_k_avx512, mms__dot4_q4_k_avx2, MMS__ANY_N,           mms__pack_q4_kx8, mms__gemm_q4_kx8_avx512, mms__gemm_q4_kx16_avx512, 8, 0,                          false, mms__gemv_q4_kx8_avx512, 2 },
    /* Q6_K */ { MMS_TYPE_Q6_K, mms__dot_q6_k_avx2,   NULL,                       mms__dot4_q6_k_avx2, MMS__ANY_N,           mms__pack_q6_kx8, mms__gemm_q6_kx8_avx512, mms__gemm_q6_kx16_avx512, 8, 0,                          false, mms__gemv_q6_kx8_avx512, 2 },
};
#endif
#if MMS__HAVE_NEON
/* row dots only: prompts dequantize, repacked weights are unpacked a tile at a time */
static const struct mms__quant_card mms__cards_neon[] = {
    /* Q8_0 */ { MMS_TYPE_Q8_0, mms__dot_q8_0_neon, NULL, NULL, 0, NULL, NULL, NULL, 0, 0, false, NULL, 0 },
    /* Q4_0 */ { MMS_TYPE_Q4_0, mms__dot_q4_0_neon, NULL, NULL, 0, NULL, NULL, NULL, 0, 0, false, NULL, 0 },
    /* Q4_K */ { MMS_TYPE_Q4_K, mms__dot_q4_k_neon, NULL, NULL, 0, NULL, NULL, NULL, 0, 0, false, NULL, 0 },
    /* Q6_K */ { MMS_TYPE_Q6_K, mms__dot_q6_k_neon, NULL, NULL, 0, NULL, NULL, NULL, 0, 0, false, NULL, 0 },
};
static const struct mms__quant_card mms__cards_neon_dotprod[] = {
    /* Q8_0 */ { MMS_TYPE_Q8_0, mms__dot_q8_0_dotprod, NULL, NULL, 0, NULL, NULL, NULL, 0, 0, false, NULL, 0 },
    /* Q4_0 */ { MMS_TYPE_Q4_0, mms__dot_q4_0_dotprod, NULL, NULL, 0, NULL, NULL, NULL, 0, 0, false, NULL, 0 },
    /* Q4_K */ { MMS_TYPE_Q4_K, mms__dot_q4_k_dotprod, NULL, NULL, 0, NULL, NULL, NULL, 0, 0, false, NULL, 0 },
    /* Q6_K */ { MMS_TYPE_Q6_K, mms__dot_q6_k_dotprod, NULL, NULL, 0, NULL, NULL, NULL, 0, 0, false, NULL, 0 },
};
#endif

static const struct mms__quant_card *mms__quant_card_in(const struct mms__quant_card *cards, int n, enum mms_type type) {
    int i;
    for (i = 0; i < n; i++) if (cards[i].type == type) return &cards[i];
    return NULL;
}

/* The card of a weight type in the kernel set in use; NULL: none (the scalar set, types without
   integer kernels). */
static const struct mms__quant_card *mms__quant_card_of(enum mms_type type) {
#define MMS__CARD_IN(table) mms__quant_card_in(table, (int)(sizeof table / sizeof table[0]), type)
    switch (mms__kernels()) {
#if MMS__HAVE_AVX2
        case MMS_CPU_KERNELS_AVX2:         return MMS__CARD_IN(mms__cards_avx2);
        case MMS_CPU_KERNELS_AVX512:       return MMS__CARD_IN(mms__cards_avx512);
#endif
#if MMS__HAVE_NEON
        case MMS_CPU_KERNELS_NEON:         return MMS__CARD_IN(mms__cards_neon);
        case MMS_CPU_KERNELS_NEON_DOTPROD: return MMS__CARD_IN(mms__cards_neon_dotprod);
#endif
        default:                           return NULL;   /* the scalar set */
    }
#undef MMS__CARD_IN
}
