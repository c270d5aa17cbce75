/* >>types =========================================================================================
   The per-type traits table and the scalar float conversions. Quantized block types slot in as
   more rows (blck_size > 1). The CPU backend has vectorised conversions of its own. */

MMS_API float mms_fp16_to_fp32(mms_fp16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    uint32_t bits;
    float f;
    if (exp == 0) {                       /* zero or subnormal: mant * 2^-24 */
        f = (float)mant * 5.9604644775390625e-8f;
        return sign ? -f : f;
    }
    if (exp == 31) bits = sign | 0x7f800000u | (mant << 13);          /* inf, nan */
    else           bits = sign | ((exp + 112) << 23) | (mant << 13);   /* rebias 15 -> 127 */
    memcpy(&f, &bits, sizeof f);
    return f;
}

MMS_API mms_fp16_t mms_fp32_to_fp16(float f) {
    uint32_t x, sign, ax;
    memcpy(&x, &f, sizeof x);
    sign = (x >> 16) & 0x8000;
    ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u)                 /* inf stays inf, nan stays a quiet nan */
        return (mms_fp16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 | ((ax >> 13) & 0x3ff) : 0));
    if (ax >= 0x477ff000u)                 /* rounds to above 65504 */
        return (mms_fp16_t)(sign | 0x7c00);
    if (ax < 0x38800000u) {                /* below 2^-14: a half subnormal, in units of 2^-24 */
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(ax >> 23);
        uint32_t q, rem, half;
        if (shift > 24) return (mms_fp16_t)sign;
        q = m >> shift;
        rem = m & ((1u << shift) - 1);
        half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (mms_fp16_t)(sign | q);
    }
    ax += 0xfffu + ((ax >> 13) & 1);       /* round to nearest even, carry may bump the exponent */
    return (mms_fp16_t)(sign | ((ax - 0x38000000u) >> 13));
}

MMS_API float mms_bf16_to_fp32(mms_bf16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

MMS_API mms_bf16_t mms_fp32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (mms_bf16_t)((x >> 16) | 0x40);  /* quiet nan */
    return (mms_bf16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

static void mms__f32_to_float(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }
static void mms__f32_from_float(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }

static void mms__f16_to_float(const void *src, float *dst, int64_t n) {
    const mms_fp16_t *s = (const mms_fp16_t *)src;
    int64_t i;
    for (i = 0; i < n; i++) dst[i] = mms_fp16_to_fp32(s[i]);
}
static void mms__f16_from_float(const float *src, void *dst, int64_t n) {
    mms_fp16_t *d = (mms_fp16_t *)dst;
    int64_t i;
    for (i = 0; i < n; i++) d[i] = mms_fp32_to_fp16(src[i]);
}
static void mms__bf16_to_float(const void *src, float *dst, int64_t n) {
    const mms_bf16_t *s = (const mms_bf16_t *)src;
    int64_t i;
    for (i = 0; i < n; i++) dst[i] = mms_bf16_to_fp32(s[i]);
}
static void mms__bf16_from_float(const float *src, void *dst, int64_t n) {
    mms_bf16_t *d = (mms_bf16_t *)dst;
    int64_t i;
    for (i = 0; i < n; i++) d[i] = mms_fp32_to_bf16(src[i]);
}

static const struct mms_type_traits mms__type_traits[MMS_TYPE_COUNT] = {
    /* INVALID */ { "invalid", 0, 0, false, false, NULL, NULL },
    /* F32     */ { "f32",  1, sizeof(float),      false, true,  mms__f32_to_float,  mms__f32_from_float },
    /* F16     */ { "f16",  1, sizeof(mms_fp16_t), false, true,  mms__f16_to_float,  mms__f16_from_float },
    /* BF16    */ { "bf16", 1, sizeof(mms_bf16_t), false, true,  mms__bf16_to_float, mms__bf16_from_float },
    /* I32     */ { "i32",  1, sizeof(int32_t),    false, false, NULL, NULL },
    /* Q8_0    */ { "q8_0", MMS__QK8_0, sizeof(struct mms__block_q8_0), true, false, mms__q8_0_to_float, mms__q8_0_from_float },
    /* Q4_0    */ { "q4_0", MMS__QK4_0, sizeof(struct mms__block_q4_0), true, false, mms__q4_0_to_float, mms__q4_0_from_float },
    /* Q4_K    */ { "q4_k", MMS__QK_K,  sizeof(struct mms__block_q4_k), true, false, mms__q4_k_to_float, mms__q4_k_from_float },
    /* Q6_K    */ { "q6_k", MMS__QK_K,  sizeof(struct mms__block_q6_k), true, false, mms__q6_k_to_float, mms__q6_k_from_float },
    /* Q5_K    */ { "q5_k", MMS__QK_K,  sizeof(struct mms__block_q5_k), true, false, mms__q5_k_to_float, mms__q5_k_from_float },
};

static bool mms__type_valid(enum mms_type type) { return type > MMS_TYPE_INVALID && type < MMS_TYPE_COUNT; }
static bool mms__type_is_float(enum mms_type type) { return mms__type_valid(type) && mms__type_traits[type].is_float; }
static bool mms__type_is_quantized(enum mms_type type) { return mms__type_valid(type) && mms__type_traits[type].is_quantized; }

MMS_API const struct mms_type_traits *mms_get_type_traits(enum mms_type type) {
    return mms__type_valid(type) ? &mms__type_traits[type] : NULL;
}
MMS_API const char *mms_type_name(enum mms_type type) {
    return mms__type_valid(type) ? mms__type_traits[type].name : "invalid";
}
MMS_API size_t  mms_type_size(enum mms_type type) { return mms__type_valid(type) ? mms__type_traits[type].type_size : 0; }
MMS_API int64_t mms_blck_size(enum mms_type type) { return mms__type_valid(type) ? mms__type_traits[type].blck_size : 0; }
MMS_API size_t  mms_row_size(enum mms_type type, int64_t ne) {
    return mms__type_valid(type) ? mms_type_size(type) * (size_t)(ne / mms_blck_size(type)) : 0;
}
