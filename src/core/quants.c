/* >>quants ========================================================================================
   Quantized block types with GGUF's exact layouts, so files from the GGUF ecosystem load as they
   are: dequantization (to_float) and our reference quantizers (from_float). Dequantization does
   the float operations in the order the format's reference does, so results are bit-identical.
     Q8_0  32 values:  f16 d, int8 q[32]                            x = d * q
     Q4_0  32 values:  f16 d, 16 bytes: x[j] low nibble, x[j+16] high   x = d * (q - 8)
     Q4_K 256 values:  f16 d, f16 dmin, 12 bytes of 6-bit scales and mins for 8 sub-blocks of 32,
                       128 bytes of nibbles (each 32 bytes: a sub-block low, the next high)
                                                                    x = d * sc * q - dmin * m
     Q5_K 256 values:  as Q4_K with 5-bit values: f16 d, f16 dmin, the 12 scale bytes, 32 bytes of
                       high bits (bit s of byte l: value l of sub-block s), 128 bytes of low
                       nibbles as Q4_K's                            x = d * sc * q - dmin * m
     Q6_K 256 values:  ql[128] low 4 bits, qh[64] high 2 bits, int8 scales for 16 sub-blocks of 16,
                       f16 d                                        x = d * sc * (q - 32) */

#define MMS__QK8_0 32
#define MMS__QK4_0 32
#define MMS__QK_K  256

struct mms__block_q8_0 { mms_fp16_t d; int8_t qs[MMS__QK8_0]; };
struct mms__block_q4_0 { mms_fp16_t d; uint8_t qs[MMS__QK4_0 / 2]; };
struct mms__block_q4_k { mms_fp16_t d, dmin; uint8_t scales[12]; uint8_t qs[MMS__QK_K / 2]; };
struct mms__block_q5_k { mms_fp16_t d, dmin; uint8_t scales[12]; uint8_t qh[MMS__QK_K / 8]; uint8_t qs[MMS__QK_K / 2]; };
struct mms__block_q6_k { uint8_t ql[MMS__QK_K / 2]; uint8_t qh[MMS__QK_K / 4]; int8_t scales[MMS__QK_K / 16]; mms_fp16_t d; };

typedef char mms__assert_q8_0_size[sizeof(struct mms__block_q8_0) == 34 ? 1 : -1];
typedef char mms__assert_q4_0_size[sizeof(struct mms__block_q4_0) == 18 ? 1 : -1];
typedef char mms__assert_q4_k_size[sizeof(struct mms__block_q4_k) == 144 ? 1 : -1];
typedef char mms__assert_q5_k_size[sizeof(struct mms__block_q5_k) == 176 ? 1 : -1];
typedef char mms__assert_q6_k_size[sizeof(struct mms__block_q6_k) == 210 ? 1 : -1];

/* Round half away from zero, as the formats' references do (roundf), for |x| < 2^31: the
   fraction x - trunc(x) is exact, so the comparison with 0.5 is too (x + 0.5f would round
   0.49999997 up). Inline, where the C library's roundf is a call. */
static int mms__round_int(float x) {
    const int i = (int)x;
    const float f = x - (float)i;
    return i + (f >= 0.5f) - (f <= -0.5f);
}
static int mms__clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* -- Q8_0 -- */

static void mms__q8_0_to_float(const void *src, float *dst, int64_t n) {
    const struct mms__block_q8_0 *b = (const struct mms__block_q8_0 *)src;
    int64_t i;
    int j;
    for (i = 0; i < n / MMS__QK8_0; i++, b++) {
        const float d = mms_fp16_to_fp32(b->d);
        for (j = 0; j < MMS__QK8_0; j++) *dst++ = d * (float)b->qs[j];
    }
}

static void mms__q8_0_from_float(const float *src, void *dst, int64_t n) {
    struct mms__block_q8_0 *b = (struct mms__block_q8_0 *)dst;
    int64_t i;
    int j;
    for (i = 0; i < n / MMS__QK8_0; i++, b++, src += MMS__QK8_0) {
        float amax = 0.0f, d, id;
        for (j = 0; j < MMS__QK8_0; j++) amax = fabsf(src[j]) > amax ? fabsf(src[j]) : amax;
        d = amax / 127.0f;
        id = d != 0.0f ? 1.0f / d : 0.0f;
        b->d = mms_fp32_to_fp16(d);
        for (j = 0; j < MMS__QK8_0; j++) b->qs[j] = (int8_t)mms__round_int(src[j] * id);
    }
}

/* -- Q4_0 -- */

static void mms__q4_0_to_float(const void *src, float *dst, int64_t n) {
    const struct mms__block_q4_0 *b = (const struct mms__block_q4_0 *)src;
    int64_t i;
    int j;
    for (i = 0; i < n / MMS__QK4_0; i++, b++, dst += MMS__QK4_0) {
        const float d = mms_fp16_to_fp32(b->d);
        for (j = 0; j < MMS__QK4_0 / 2; j++) {
            dst[j] = (float)((b->qs[j] & 0x0f) - 8) * d;
            dst[j + MMS__QK4_0 / 2] = (float)((b->qs[j] >> 4) - 8) * d;
        }
    }
}

/* d maps the value of largest magnitude to -8 exactly; the others truncate after + 8.5. */
static void mms__q4_0_from_float(const float *src, void *dst, int64_t n) {
    struct mms__block_q4_0 *b = (struct mms__block_q4_0 *)dst;
    int64_t i;
    int j;
    for (i = 0; i < n / MMS__QK4_0; i++, b++, src += MMS__QK4_0) {
        float amax = 0.0f, max = 0.0f, d, id;
        for (j = 0; j < MMS__QK4_0; j++)
            if (fabsf(src[j]) > amax) { amax = fabsf(src[j]); max = src[j]; }
        d = max / -8.0f;
        id = d != 0.0f ? 1.0f / d : 0.0f;
        b->d = mms_fp32_to_fp16(d);
        for (j = 0; j < MMS__QK4_0 / 2; j++) {
            const int q0 = mms__clamp_int((int)(src[j] * id + 8.5f), 0, 15);
            const int q1 = mms__clamp_int((int)(src[j + MMS__QK4_0 / 2] * id + 8.5f), 0, 15);
            b->qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

/* -- Q4_K -- */

/* Sub-block j's 6-bit scale and min from the 12 packed bytes: the first four pairs are whole
   bytes' low 6 bits; the last four take 4 low bits from bytes 8..11 and 2 high bits from the
   top of bytes 0..7. */
static void mms__q4_k_scale_min(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

static void mms__q4_k_pack_scales(const int *sc, const int *m, uint8_t *q) {
    int j;
    memset(q, 0, 12);
    for (j = 0; j < 8; j++) {
        if (j < 4) {
            q[j] |= (uint8_t)sc[j];
            q[j + 4] |= (uint8_t)m[j];
        } else {
            q[j + 4] = (uint8_t)((sc[j] & 0x0f) | ((m[j] & 0x0f) << 4));
            q[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
            q[j] |= (uint8_t)((m[j] >> 4) << 6);
        }
    }
}

/* One block of Q4_K's affine sub-blocks (Q4_K, Q5_K) to floats: d, dmin, the packed scales, the
   low nibbles (each 32 bytes: a sub-block low, the next high) and the fifth bits (Q5_K's; Q4_K
   passes zeros, so the loop has no branch). */
static void mms__k_affine_block_to_float(mms_fp16_t d16, mms_fp16_t dmin16, const uint8_t *scales, const uint8_t *qs, const uint8_t *qh, float *dst) {
    const float d = mms_fp16_to_fp32(d16), dmin = mms_fp16_to_fp32(dmin16);
    int s, l;
    for (s = 0; s < 8; s++) {
        const uint8_t *q = qs + 32 * (s / 2);
        const int shift = 4 * (s % 2);
        int sc, m;
        float ds, dm;
        mms__q4_k_scale_min(s, scales, &sc, &m);
        ds = d * (float)sc; dm = dmin * (float)m;
        for (l = 0; l < 32; l++) *dst++ = ds * (float)(((q[l] >> shift) & 0x0f) | ((qh[l] >> s) & 1) << 4) - dm;
    }
}

static void mms__q4_k_to_float(const void *src, float *dst, int64_t n) {
    static const uint8_t no_fifth_bits[MMS__QK_K / 8] = { 0 };
    const struct mms__block_q4_k *b = (const struct mms__block_q4_k *)src;
    int64_t i;
    for (i = 0; i < n / MMS__QK_K; i++, b++, dst += MMS__QK_K) mms__k_affine_block_to_float(b->d, b->dmin, b->scales, b->qs, no_fifth_bits, dst);
}

/* The affine fit of one sub-block: x ~ scale * q - min with q in 0..nmax. A few starting scales
   around (max - min) / nmax, each refined by least squares over its own assignment; the best kept. */
static float mms__fit_affine(const float *x, int n, int nmax, float *min_out) {
    float lo = x[0], hi = x[0], best_err = INFINITY, best_scale = 0.0f, best_min = 0.0f;
    int i, step;
    for (i = 1; i < n; i++) { lo = x[i] < lo ? x[i] : lo; hi = x[i] > hi ? x[i] : hi; }
    if (lo > 0.0f) lo = 0.0f;             /* mins are stored as non-negative offsets */
    if (hi == lo) { *min_out = -lo; return 0.0f; }
    for (step = -4; step <= 8; step += 2) {
        float iscale = ((float)nmax + 0.1f * (float)step) / (hi - lo), off0 = lo, scale = 0.0f, min = 0.0f;
        double err = 0;
        int pass;
        for (pass = 0; pass < 2; pass++) {     /* assign, fit; assign again against the fit, fit */
            double sq = 0, sx = 0, sqq = 0, sqx = 0, det, sc, off;
            for (i = 0; i < n; i++) {
                const int q = mms__clamp_int(mms__round_int(iscale * (x[i] - off0)), 0, nmax);
                sq += q; sx += x[i]; sqq += (double)q * q; sqx += (double)q * x[i];
            }
            det = n * sqq - sq * sq;            /* least squares for x = sc * q + off, off <= 0 */
            sc = det > 0 ? (n * sqx - sq * sx) / det : 1.0 / iscale;
            off = (sx - sc * sq) / n;
            if (off > 0) { off = 0; sc = sqq > 0 ? sqx / sqq : 0; }
            scale = (float)sc;
            min = (float)-off;
            if (scale <= 0.0f) break;
            iscale = 1.0f / scale;
            off0 = -min;
        }
        for (i = 0; i < n; i++) {
            const int q = scale > 0 ? mms__clamp_int(mms__round_int((x[i] + min) / scale), 0, nmax) : 0;
            const double e = x[i] - (scale * (float)q - min);
            err += e * e;
        }
        if (err < best_err) { best_err = (float)err; best_scale = scale; best_min = min; }
    }
    *min_out = best_min;
    return best_scale;
}

/* The affine fit of a K super-block (Q4_K, Q5_K): each sub-block of 32 fitted alone, its scale and
   min stored as 6-bit multiples of the f16 d and dmin (the largest as 63), then the values (0..nmax)
   against the scales as stored: their low 4 bits into qs (each 32 bytes: a sub-block low, the next
   high), Q5_K's fifth bits into qh (NULL: none; bit s of byte l: value l of sub-block s). */
static void mms__k_affine_from_float(const float *src, int nmax, mms_fp16_t *d_out, mms_fp16_t *dmin_out, uint8_t *packed,
                                     uint8_t *qs, uint8_t *qh) {
    float scales[8], mins[8], max_scale = 0.0f, max_min = 0.0f, d, dmin;
    int sc[8], m[8], q[MMS__QK_K], s, l;
    for (s = 0; s < 8; s++) {
        scales[s] = mms__fit_affine(src + 32 * s, 32, nmax, &mins[s]);
        max_scale = scales[s] > max_scale ? scales[s] : max_scale;
        max_min = mins[s] > max_min ? mins[s] : max_min;
    }
    *d_out = mms_fp32_to_fp16(max_scale / 63.0f);
    *dmin_out = mms_fp32_to_fp16(max_min / 63.0f);
    d = mms_fp16_to_fp32(*d_out);
    dmin = mms_fp16_to_fp32(*dmin_out);
    for (s = 0; s < 8; s++) {
        sc[s] = d > 0.0f ? mms__clamp_int(mms__round_int(scales[s] / d), 0, 63) : 0;
        m[s] = dmin > 0.0f ? mms__clamp_int(mms__round_int(mins[s] / dmin), 0, 63) : 0;
    }
    mms__q4_k_pack_scales(sc, m, packed);
    for (s = 0; s < 8; s++) {
        const float ds = d * (float)sc[s], dm = dmin * (float)m[s];
        for (l = 0; l < 32; l++)
            q[32 * s + l] = ds > 0.0f ? mms__clamp_int(mms__round_int((src[32 * s + l] + dm) / ds), 0, nmax) : 0;
    }
    for (s = 0; s < 8; s += 2)
        for (l = 0; l < 32; l++) qs[16 * s + l] = (uint8_t)((q[32 * s + l] & 0x0f) | ((q[32 * s + 32 + l] & 0x0f) << 4));
    if (qh) {
        memset(qh, 0, MMS__QK_K / 8);
        for (s = 0; s < 8; s++)
            for (l = 0; l < 32; l++) qh[l] |= (uint8_t)((q[32 * s + l] >> 4) << s);
    }
}

static void mms__q4_k_from_float(const float *src, void *dst, int64_t n) {
    struct mms__block_q4_k *b = (struct mms__block_q4_k *)dst;
    int64_t i;
    for (i = 0; i < n / MMS__QK_K; i++, b++, src += MMS__QK_K) mms__k_affine_from_float(src, 15, &b->d, &b->dmin, b->scales, b->qs, NULL);
}

/* -- Q5_K -- */

static void mms__q5_k_to_float(const void *src, float *dst, int64_t n) {
    const struct mms__block_q5_k *b = (const struct mms__block_q5_k *)src;
    int64_t i;
    for (i = 0; i < n / MMS__QK_K; i++, b++, dst += MMS__QK_K) mms__k_affine_block_to_float(b->d, b->dmin, b->scales, b->qs, b->qh, dst);
}

static void mms__q5_k_from_float(const float *src, void *dst, int64_t n) {
    struct mms__block_q5_k *b = (struct mms__block_q5_k *)dst;
    int64_t i;
    for (i = 0; i < n / MMS__QK_K; i++, b++, src += MMS__QK_K) mms__k_affine_from_float(src, 31, &b->d, &b->dmin, b->scales, b->qs, b->qh);
}

/* -- Q6_K -- */

static void mms__q6_k_to_float(const void *src, float *dst, int64_t n) {
    const struct mms__block_q6_k *b = (const struct mms__block_q6_k *)src;
    int64_t i;
    int half, l;
    for (i = 0; i < n / MMS__QK_K; i++, b++) {
        const float d = mms_fp16_to_fp32(b->d);
        for (half = 0; half < 2; half++, dst += 128) {
            const uint8_t *ql = b->ql + 64 * half, *qh = b->qh + 32 * half;
            const int8_t *sc = b->scales + 8 * half;
            for (l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                dst[l] = d * (float)sc[is] * (float)q1;
                dst[l + 32] = d * (float)sc[is + 2] * (float)q2;
                dst[l + 64] = d * (float)sc[is + 4] * (float)q3;
                dst[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}

/* The symmetric fit of one Q6_K sub-block: x ~ scale * q with q in -32..31. Starting scales that put
   the value of largest magnitude near -32 (a little inside and outside), each assigned, refitted by
   least squares and assigned and refitted once more; the one of least squared error kept. */
static float mms__fit_symmetric(const float *x, int n) {
    float max = 0.0f, best_scale = 0.0f;
    double best_err = INFINITY, sxx = 0;
    int i, step, pass;
    for (i = 0; i < n; i++) {
        if (fabsf(x[i]) > fabsf(max)) max = x[i];
        sxx += (double)x[i] * x[i];
    }
    if (max == 0.0f) return 0.0f;
    for (step = -9; step <= 9; step += 3) {
        float scale = max / -(32.0f + 0.1f * (float)step);
        for (pass = 0; pass < 2 && scale != 0.0f; pass++) {
            double sqx = 0, sqq = 0, err;
            for (i = 0; i < n; i++) {
                const int v = mms__clamp_int(mms__round_int(x[i] / scale), -32, 31);
                sqx += (double)v * x[i];
                sqq += (double)v * v;
            }
            if (sqq <= 0) break;
            err = sxx - sqx * sqx / sqq;                  /* the squared error at the least-squares scale */
            scale = (float)(sqx / sqq);
            if (err < best_err) { best_err = err; best_scale = scale; }
        }
    }
    return best_scale;
}

/* Symmetric per sub-block of 16 (mms__fit_symmetric); the 16 scales are stored as int8 multiples
   of d. */
static void mms__q6_k_from_float(const float *src, void *dst, int64_t n) {
    struct mms__block_q6_k *b = (struct mms__block_q6_k *)dst;
    int64_t i;
    int s, l;
    for (i = 0; i < n / MMS__QK_K; i++, b++, src += MMS__QK_K) {
        float scales[16], amax_scale = 0.0f, d;
        int q[MMS__QK_K];
        for (s = 0; s < 16; s++) {
            scales[s] = mms__fit_symmetric(src + 16 * s, 16);
            if (fabsf(scales[s]) > fabsf(amax_scale)) amax_scale = scales[s];
        }
        b->d = mms_fp32_to_fp16(fabsf(amax_scale) / 127.0f);
        d = mms_fp16_to_fp32(b->d);
        for (s = 0; s < 16; s++) {
            const int sc = d > 0.0f ? mms__clamp_int(mms__round_int(scales[s] / d), -128, 127) : 0;
            const float ds = d * (float)sc;
            b->scales[s] = (int8_t)sc;
            for (l = 0; l < 16; l++)
                q[16 * s + l] = ds != 0.0f ? mms__clamp_int(mms__round_int(src[16 * s + l] / ds), -32, 31) + 32 : 32;
        }
        memset(b->qh, 0, sizeof b->qh);
        for (s = 0; s < 2; s++) {             /* the inverse of the layout in to_float */
            uint8_t *ql = b->ql + 64 * s, *qh = b->qh + 32 * s;
            const int *v = q + 128 * s;
            for (l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((v[l] & 0x0f) | ((v[l + 64] & 0x0f) << 4));
                ql[l + 32] = (uint8_t)((v[l + 32] & 0x0f) | ((v[l + 96] & 0x0f) << 4));
                qh[l] = (uint8_t)((v[l] >> 4) | ((v[l + 32] >> 4) << 2) | ((v[l + 64] >> 4) << 4) | ((v[l + 96] >> 4) << 6));
            }
        }
    }
}
