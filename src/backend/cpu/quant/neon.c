/* >>cpu-quant-neon =================================================================================
   The NEON and NEON dotprod sets' row dots (the sets have no tile kernels: their prompts dequantize
   into the f32 GEMM, their repacked weights are unpacked a tile at a time). */

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

/* Bit s of each of 16 bytes as 16 (Q5_K's fifth bit of a value), as a signed byte. */
static MMS__NEON_INLINE int8x16_t mms__fifth_bit(uint8x16_t qh, int s) {
    return vreinterpretq_s8_u8(vandq_u8(vshlq_u8(qh, vdupq_n_s8((int8_t)(4 - s))), vdupq_n_u8(0x10)));
}

/* The dots, once for each byte product (SUFFIX, the target it needs, DOT). */
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
/* Q4_K and Q5_K (blocks as in row_dots.c's mms__dot4_k_affine_avx2: size bytes, d, dmin and the     \
   packed scales first, the nibbles at qs_at, Q5_K's fifth bits at qh_at, 0: none): the mins term      \
   dmin * sum(min * activations) from the activations' sums of 16 */                                   \
static TARGET MMS__NEON_INLINE float mms__dot_k_affine_##SUFFIX(int64_t K, const uint8_t *b, size_t size, size_t qs_at, size_t qh_at, \
                                                                const struct mms__block_q8_k *x) {   \
    float sum = 0.0f;                                                                                                \
    int64_t i;                                                                                                       \
    int j;                                                                                                           \
    for (i = 0; i < K / MMS__QK_K; i++, b += size, x++) {                                                            \
        int32x4_t sumi = vdupq_n_s32(0);                                                                             \
        int32_t mins = 0;                                                                                            \
        mms_fp16_t d, dmin;                                                                                          \
        memcpy(&d, b, sizeof d);                                                                                     \
        memcpy(&dmin, b + 2, sizeof dmin);                                                                           \
        for (j = 0; j < 4; j++) {                                                                                    \
            const uint8x16_t q0 = vld1q_u8(b + qs_at + 32 * j), q1 = vld1q_u8(b + qs_at + 32 * j + 16);              \
            const int8_t *a = x->qs + 64 * j;                                                                        \
            int8x16_t v0 = mms__nibbles_lo(q0, 0), v1 = mms__nibbles_lo(q1, 0), v2 = mms__nibbles_hi(q0, 0), v3 = mms__nibbles_hi(q1, 0); \
            int sc0, m0, sc1, m1;                                                                                    \
            int32x4_t lo, hi;                                                                                        \
            if (qh_at) {                                                                                             \
                const uint8x16_t h0 = vld1q_u8(b + qh_at), h1 = vld1q_u8(b + qh_at + 16);                          \
                v0 = vorrq_s8(v0, mms__fifth_bit(h0, 2 * j));                                                        \
                v1 = vorrq_s8(v1, mms__fifth_bit(h1, 2 * j));                                                        \
                v2 = vorrq_s8(v2, mms__fifth_bit(h0, 2 * j + 1));                                                    \
                v3 = vorrq_s8(v3, mms__fifth_bit(h1, 2 * j + 1));                                                    \
            }                                                                                                        \
            mms__q4_k_scale_min(2 * j, b + 4, &sc0, &m0);                                                            \
            mms__q4_k_scale_min(2 * j + 1, b + 4, &sc1, &m1);                                                        \
            lo = DOT(DOT(vdupq_n_s32(0), v0, vld1q_s8(a)), v1, vld1q_s8(a + 16));                                    \
            hi = DOT(DOT(vdupq_n_s32(0), v2, vld1q_s8(a + 32)), v3, vld1q_s8(a + 48));                               \
            sumi = vmlaq_n_s32(vmlaq_n_s32(sumi, lo, sc0), hi, sc1);                                                 \
            mins += m0 * (x->bsums[4 * j] + x->bsums[4 * j + 1]) + m1 * (x->bsums[4 * j + 2] + x->bsums[4 * j + 3]); \
        }                                                                                                            \
        sum += x->d * (mms__fp16_to_f32_neon(d) * (float)vaddvq_s32(sumi) - mms__fp16_to_f32_neon(dmin) * (float)mins); \
    }                                                                                                                \
    return sum;                                                                                                      \
}                                                                                                                    \
static TARGET float mms__dot_q4_k_##SUFFIX(int64_t K, const void *w, const void *xv) {                               \
    return mms__dot_k_affine_##SUFFIX(K, (const uint8_t *)w, sizeof(struct mms__block_q4_k), offsetof(struct mms__block_q4_k, qs), 0, \
                                      (const struct mms__block_q8_k *)xv);                                          \
}                                                                                                                    \
static TARGET float mms__dot_q5_k_##SUFFIX(int64_t K, const void *w, const void *xv) {                               \
    return mms__dot_k_affine_##SUFFIX(K, (const uint8_t *)w, sizeof(struct mms__block_q5_k), offsetof(struct mms__block_q5_k, qs), \
                                      offsetof(struct mms__block_q5_k, qh), (const struct mms__block_q8_k *)xv);    \
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
