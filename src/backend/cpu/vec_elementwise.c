/* >>vec_elementwise ===============================================================================
   Element-wise vector primitives: the unary ops and activations (exp, erf, GELU, SiLU), max,
   exp-sum (softmax), sums (norms), shift-scale and a*x+b; the scalar bodies, then the AVX2 and
   AVX-512 bodies, the NEON bodies, and the dispatching names. */

/* -- the unary ops, one value (the scalar path, and TANH everywhere) -- */

static const double mms__sqrt_half = 0.70710678118654752440;   /* 1/sqrt(2) */
static const double mms__sqrt_2_over_pi = 0.79788456080286535588;

static float mms__unary_scalar(enum mms_op op, float x, float s) {
    switch (op) {
        case MMS_OP_SCALE:     return x * s;
        case MMS_OP_SQR:       return x * x;
        case MMS_OP_SQRT:      return sqrtf(x);
        case MMS_OP_EXP:       return expf(x);
        case MMS_OP_TANH:      return tanhf(x);
        case MMS_OP_SILU:      return x / (1.0f + expf(-x));
        case MMS_OP_GELU:      return 0.5f * x * (1.0f + erff(x * (float)mms__sqrt_half));
        case MMS_OP_GELU_TANH: return 0.5f * x * (1.0f + tanhf((float)mms__sqrt_2_over_pi * (x + 0.044715f * x * x * x)));
        default:               mms__abort(__FILE__, __LINE__, "%s is not a unary op", mms_op_name(op));
    }
}

/* -- exp, erf and the activations, 8 lanes at a time -- */

/* exp(x) = 2^n p(r), n = round(x log2 e), r = x - n ln 2 in two parts, p Cephes' degree-6 fit
   (about 1 ulp). Below -87.3 the result is exactly 0 (so masked -inf scores weigh nothing);
   above 88.7 it saturates at about 3.4e38 instead of inf. NaN stays NaN (the clamps and the
   range mask would turn it into 0). Its constants, shared by the SIMD bodies (mms__exp8,
   mms__exp16, mms__exp4) so they compute alike: */
#define MMS__EXP_LO     (-87.33654f)
#define MMS__EXP_HI     88.3762626647949f
#define MMS__EXP_LOG2E  1.44269504088896341f
#define MMS__EXP_LN2_HI 0.693359375f
#define MMS__EXP_LN2_LO (-2.12194440e-4f)
#define MMS__EXP_P0     1.9875691500e-4f
#define MMS__EXP_P1     1.3981999507e-3f
#define MMS__EXP_P2     8.3334519073e-3f
#define MMS__EXP_P3     4.1665795894e-2f
#define MMS__EXP_P4     1.6666665459e-1f
#define MMS__EXP_P5     5.0000001201e-1f

#if MMS__HAVE_AVX2
static MMS__AVX2_INLINE __m256 mms__exp8(__m256 x) {
    const __m256 lo = _mm256_set1_ps(MMS__EXP_LO), x0 = x;
    __m256 keep = _mm256_cmp_ps(x, lo, _CMP_GE_OQ), n, r, r2, p;
    __m256i e;
    x = _mm256_min_ps(_mm256_max_ps(x, lo), _mm256_set1_ps(MMS__EXP_HI));
    n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(MMS__EXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(MMS__EXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(MMS__EXP_LN2_LO), r);
    r2 = _mm256_mul_ps(r, r);
    p = _mm256_fmadd_ps(_mm256_set1_ps(MMS__EXP_P0), r, _mm256_set1_ps(MMS__EXP_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(MMS__EXP_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(MMS__EXP_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(MMS__EXP_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(MMS__EXP_P5));
    p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_or_ps(_mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), keep), _mm256_cmp_ps(x0, x0, _CMP_UNORD_Q));
}

/* x / (1 + exp(-a x)): silu with a = 1; gelu_tanh is x / (1 + exp(-2u)) with u its tanh argument */
static MMS__AVX2_INLINE __m256 mms__sigmoid_mul8(__m256 x, __m256 ax) {
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), mms__exp8(_mm256_sub_ps(_mm256_setzero_ps(), ax))));
}

/* gelu(x) = x/2 (1 + erf(x/sqrt 2)) through erfc(z), z = |x|/sqrt 2, with the Chebyshev fit of
   Numerical Recipes (relative error < 1.2e-7 everywhere, so the negative tail stays accurate). */
static const float mms__erfc_fit[10] = { -1.26551223f, 1.00002368f, 0.37409196f, 0.09678418f, -0.18628806f,
                                         0.27886807f, -1.13520398f, 1.48851587f, -0.82215223f, 0.17087277f };
static MMS__AVX2_INLINE __m256 mms__gelu8(__m256 x) {
    const float *c = mms__erfc_fit;
    const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
    __m256 z = _mm256_mul_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(0.70710678118654752f));
    __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(half, z, one)), p = _mm256_set1_ps(c[9]), erfc, neg;
    int i;
    for (i = 8; i >= 0; i--) p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(c[i]));
    erfc = _mm256_mul_ps(t, mms__exp8(_mm256_fnmadd_ps(z, z, p)));
    neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
    return _mm256_mul_ps(_mm256_mul_ps(half, x), _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(2.0f), erfc), erfc, neg));
}

/* One unary op on 8 lanes (every unary op but TANH, which keeps the scalar body for its accuracy near 0). */
static MMS__AVX2_INLINE __m256 mms__unary8(enum mms_op op, __m256 x, __m256 s) {
    switch (op) {
        case MMS_OP_SCALE:     return _mm256_mul_ps(x, s);
        case MMS_OP_SQR:       return _mm256_mul_ps(x, x);
        case MMS_OP_SQRT:      return _mm256_sqrt_ps(x);
        case MMS_OP_EXP:       return mms__exp8(x);
        case MMS_OP_SILU:      return mms__sigmoid_mul8(x, x);
        case MMS_OP_GELU:      return mms__gelu8(x);
        default: {             /* GELU_TANH */
            __m256 u = _mm256_mul_ps(x, _mm256_fmadd_ps(_mm256_mul_ps(x, x), _mm256_set1_ps(0.044715f), _mm256_set1_ps(1.0f)));
            return mms__sigmoid_mul8(x, _mm256_mul_ps(u, _mm256_set1_ps(2.0f * 0.79788456080286535588f)));
        }
    }
}

/* i = RUN(op) with op a constant for each unary op but TANH: one loop per op (the AVX2 and AVX-512
   bodies), in which the op's switch folds away and its constants stay in registers */
#define MMS__UNARY_EACH_OP(RUN)                                             \
    switch (op) {                                                           \
        case MMS_OP_SCALE: i = RUN(MMS_OP_SCALE); break;                    \
        case MMS_OP_SQR:   i = RUN(MMS_OP_SQR); break;                      \
        case MMS_OP_SQRT:  i = RUN(MMS_OP_SQRT); break;                     \
        case MMS_OP_EXP:   i = RUN(MMS_OP_EXP); break;                      \
        case MMS_OP_SILU:  i = RUN(MMS_OP_SILU); break;                     \
        case MMS_OP_GELU:  i = RUN(MMS_OP_GELU); break;                     \
        default:           i = RUN(MMS_OP_GELU_TANH); break;                \
    }

/* The whole vectors of one unary op; returns how many elements it did. */
static MMS__AVX2_INLINE int64_t mms__unary_run_avx2(enum mms_op op, int64_t n, float *y, const float *x, __m256 vs) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, mms__unary8(op, _mm256_loadu_ps(x + i), vs));
    return i;
}

static MMS__TARGET_AVX2 void mms__unary_f32_avx2(enum mms_op op, int64_t n, float *y, const float *x, float s) {
    const __m256 vs = _mm256_set1_ps(s);
    float tx[8], ty[8];
    int64_t i, j;
#define MMS__RUN(o) mms__unary_run_avx2(o, n, y, x, vs)
    MMS__UNARY_EACH_OP(MMS__RUN)
#undef MMS__RUN
    if (i < n) {                       /* the tail through a padded copy: the same code, so the same results */
        for (j = 0; j < 8; j++) tx[j] = i + j < n ? x[i + j] : 0.0f;
        _mm256_storeu_ps(ty, mms__unary8(op, _mm256_loadu_ps(tx), vs));
        for (j = 0; i + j < n; j++) y[i + j] = ty[j];
    }
}

static MMS__TARGET_AVX2 float mms__max_f32_avx2(int64_t n, const float *x) {
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0;
    __m128 h;
    int64_t i = 0;
    float m;
    for (; i + 16 <= n; i += 16) {
        m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
        m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + i + 8));
    }
    m0 = _mm256_max_ps(m0, m1);
    h = _mm_max_ps(_mm256_castps256_ps128(m0), _mm256_extractf128_ps(m0, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    m = _mm_cvtss_f32(h);
    for (; i < n; i++) if (x[i] > m) m = x[i];
    return m;
}

/* The exp sums' tail from element i: 8 at a time into s0, the two 8-lane sums added, then one by
   one. Shared by the AVX2 and AVX-512 bodies, whose 16-wide loops leave the same s0 and s1. */
static MMS__AVX2_INLINE float mms__exp_sum_tail_avx2(int64_t n, float *y, const float *x, float m, int64_t i, __m256 s0, __m256 s1) {
    const __m256 vm = _mm256_set1_ps(m);
    float s;
    for (; i + 8 <= n; i += 8) {
        __m256 e0 = mms__exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        _mm256_storeu_ps(y + i, e0);
        s0 = _mm256_add_ps(s0, e0);
    }
    s = mms__hsum256(_mm256_add_ps(s0, s1));
    for (; i < n; i++) { y[i] = expf(x[i] - m); s += y[i]; }
    return s;
}

/* y = exp(x - m), returns the sum; y may be x */
static MMS__TARGET_AVX2 float mms__exp_sum_f32_avx2(int64_t n, float *y, const float *x, float m) {
    const __m256 vm = _mm256_set1_ps(m);
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 e0 = mms__exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm)), e1 = mms__exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vm));
        _mm256_storeu_ps(y + i, e0);
        _mm256_storeu_ps(y + i + 8, e1);
        s0 = _mm256_add_ps(s0, e0);
        s1 = _mm256_add_ps(s1, e1);
    }
    return mms__exp_sum_tail_avx2(n, y, x, m, i, s0, s1);
}

MMS__AVX512_CODE_BEGIN
/* mms__exp8's operations on 16 lanes: the same bits per element. */
static MMS__AVX512_INLINE __m512 mms__exp16(__m512 x) {
    const __m512 lo = _mm512_set1_ps(MMS__EXP_LO), x0 = x;
    const __mmask16 keep = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ), nan = _mm512_cmp_ps_mask(x0, x0, _CMP_UNORD_Q);
    __m512 n, r, r2, p;
    __m512i e;
    x = _mm512_min_ps(_mm512_max_ps(x, lo), _mm512_set1_ps(MMS__EXP_HI));
    n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(MMS__EXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(MMS__EXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(MMS__EXP_LN2_LO), r);
    r2 = _mm512_mul_ps(r, r);
    p = _mm512_fmadd_ps(_mm512_set1_ps(MMS__EXP_P0), r, _mm512_set1_ps(MMS__EXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(MMS__EXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(MMS__EXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(MMS__EXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(MMS__EXP_P5));
    p = _mm512_fmadd_ps(p, r2, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mask_mov_ps(_mm512_maskz_mov_ps(keep, _mm512_mul_ps(p, _mm512_castsi512_ps(e))), nan,
                              _mm512_castsi512_ps(_mm512_set1_epi32(-1)));   /* NaN in: all ones, as exp8 */
}

/* mms__sigmoid_mul8, mms__gelu8 and mms__unary8 on 16 lanes: the same operations, so the same bits. */
static MMS__AVX512_INLINE __m512 mms__sigmoid_mul16(__m512 x, __m512 ax) {
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), mms__exp16(_mm512_sub_ps(_mm512_setzero_ps(), ax))));
}
static MMS__AVX512_INLINE __m512 mms__gelu16(__m512 x) {
    const float *c = mms__erfc_fit;
    const __m512 one = _mm512_set1_ps(1.0f), half = _mm512_set1_ps(0.5f);
    const __m512 z = _mm512_mul_ps(_mm512_andnot_ps(_mm512_set1_ps(-0.0f), x), _mm512_set1_ps(0.70710678118654752f));
    const __m512 t = _mm512_div_ps(one, _mm512_fmadd_ps(half, z, one));
    __m512 p = _mm512_set1_ps(c[9]), erfc;
    int i;
    for (i = 8; i >= 0; i--) p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(c[i]));
    erfc = _mm512_mul_ps(t, mms__exp16(_mm512_fnmadd_ps(z, z, p)));
    return _mm512_mul_ps(_mm512_mul_ps(half, x), _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ),
                                                                      _mm512_sub_ps(_mm512_set1_ps(2.0f), erfc), erfc));
}
static MMS__AVX512_INLINE __m512 mms__unary16(enum mms_op op, __m512 x, __m512 s) {
    switch (op) {
        case MMS_OP_SCALE:     return _mm512_mul_ps(x, s);
        case MMS_OP_SQR:       return _mm512_mul_ps(x, x);
        case MMS_OP_SQRT:      return _mm512_sqrt_ps(x);
        case MMS_OP_EXP:       return mms__exp16(x);
        case MMS_OP_SILU:      return mms__sigmoid_mul16(x, x);
        case MMS_OP_GELU:      return mms__gelu16(x);
        default: {             /* GELU_TANH */
            const __m512 u = _mm512_mul_ps(x, _mm512_fmadd_ps(_mm512_mul_ps(x, x), _mm512_set1_ps(0.044715f), _mm512_set1_ps(1.0f)));
            return mms__sigmoid_mul16(x, _mm512_mul_ps(u, _mm512_set1_ps(2.0f * 0.79788456080286535588f)));
        }
    }
}

/* One loop per op, as mms__unary_f32_avx2; the last elements (under 16) go through AVX2's body.
   GELU (erf) gains most over 8 lanes (manual section 9): its chain of dependent FMAs, div and exp
   fills the scheduler with half the instructions. */
static MMS__AVX512_INLINE int64_t mms__unary_run_avx512(enum mms_op op, int64_t n, float *y, const float *x, __m512 vs) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, mms__unary16(op, _mm512_loadu_ps(x + i), vs));
    return i;
}
static MMS__TARGET_AVX512 void mms__unary_f32_avx512(enum mms_op op, int64_t n, float *y, const float *x, float s) {
    const __m512 vs = _mm512_set1_ps(s);
    int64_t i;
#define MMS__RUN(o) mms__unary_run_avx512(o, n, y, x, vs)
    MMS__UNARY_EACH_OP(MMS__RUN)
#undef MMS__RUN
    if (i < n) mms__unary_f32_avx2(op, n - i, y + i, x + i, s);
}

/* mms__exp_sum_f32_avx2 with 16 lanes: its two 8-lane sums are this register's halves, added in the
   same order, so the same sum (flash attention's and softmax's exp; faster than 8 lanes,
   docs/measurements.md at df71bc8). */
static MMS__TARGET_AVX512 float mms__exp_sum_f32_avx512(int64_t n, float *y, const float *x, float m) {
    const __m512 vm = _mm512_set1_ps(m);
    __m512 s = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 e = mms__exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm));
        _mm512_storeu_ps(y + i, e);
        s = _mm512_add_ps(s, e);
    }
    return mms__exp_sum_tail_avx2(n, y, x, m, i, _mm512_castps512_ps256(s), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)));
}
MMS__AVX512_CODE_END

/* y = x * a + b (b may be NULL) */
static MMS__TARGET_AVX2 void mms__axpb_f32_avx2(int64_t n, float *y, const float *x, float a, const float *b) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    if (b) for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), va, _mm256_loadu_ps(b + i)));
    else   for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), va));
    for (; i < n; i++) y[i] = x[i] * a + (b ? b[i] : 0.0f);
}

/* Sums for the norms, in double like the scalar path: sum(x) and sum((x - c)^2). */
static MMS__TARGET_AVX2 void mms__sums_f64_avx2(int64_t n, const float *x, double c, double *sum, double *sq) {
    const __m256d vc = _mm256_set1_pd(c);
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, q0 = s0, q1 = s0;
    double t[4], ts = 0.0, tq = 0.0;
    int64_t i = 0;
    int j;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), b = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        const __m256d da = _mm256_sub_pd(a, vc), db = _mm256_sub_pd(b, vc);
        s0 = _mm256_add_pd(s0, a);
        s1 = _mm256_add_pd(s1, b);
        q0 = _mm256_fmadd_pd(da, da, q0);
        q1 = _mm256_fmadd_pd(db, db, q1);
    }
    _mm256_storeu_pd(t, _mm256_add_pd(s0, s1));
    for (j = 0; j < 4; j++) ts += t[j];
    _mm256_storeu_pd(t, _mm256_add_pd(q0, q1));
    for (j = 0; j < 4; j++) tq += t[j];
    for (; i < n; i++) { ts += x[i]; tq += ((double)x[i] - c) * ((double)x[i] - c); }
    *sum = ts;
    *sq = tq;
}

/* y = (x - c) * s */
static MMS__TARGET_AVX2 void mms__shift_scale_f32_avx2(int64_t n, float *y, const float *x, float c, float s) {
    const __m256 vc = _mm256_set1_ps(c), vs = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vc), vs));
    for (; i < n; i++) y[i] = (x[i] - c) * s;
}
#endif

#if MMS__HAVE_NEON
/* exp, erf and the activations on 4 lanes: the same fits, clamps and steps as the 8-lane bodies
   above (see mms__exp8, mms__gelu8), so both SIMD sets agree to rounding. */
static MMS__NEON_INLINE float32x4_t mms__exp4(float32x4_t x) {
    const float32x4_t lo = vdupq_n_f32(MMS__EXP_LO);
    const uint32x4_t keep = vcgeq_f32(x, lo), nan = vmvnq_u32(vceqq_f32(x, x));
    float32x4_t n, r, r2, p;
    int32x4_t e;
    x = vminq_f32(vmaxq_f32(x, lo), vdupq_n_f32(MMS__EXP_HI));
    n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(MMS__EXP_LOG2E)));
    r = vfmsq_f32(x, n, vdupq_n_f32(MMS__EXP_LN2_HI));
    r = vfmsq_f32(r, n, vdupq_n_f32(MMS__EXP_LN2_LO));
    r2 = vmulq_f32(r, r);
    p = vfmaq_f32(vdupq_n_f32(MMS__EXP_P1), vdupq_n_f32(MMS__EXP_P0), r);
    p = vfmaq_f32(vdupq_n_f32(MMS__EXP_P2), p, r);
    p = vfmaq_f32(vdupq_n_f32(MMS__EXP_P3), p, r);
    p = vfmaq_f32(vdupq_n_f32(MMS__EXP_P4), p, r);
    p = vfmaq_f32(vdupq_n_f32(MMS__EXP_P5), p, r);
    p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, r2);
    e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vreinterpretq_f32_u32(vorrq_u32(vandq_u32(vreinterpretq_u32_f32(vmulq_f32(p, vreinterpretq_f32_s32(e))), keep), nan));
}

static MMS__NEON_INLINE float32x4_t mms__sigmoid_mul4(float32x4_t x, float32x4_t ax) {
    return vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), mms__exp4(vnegq_f32(ax))));
}

static MMS__NEON_INLINE float32x4_t mms__gelu4(float32x4_t x) {
    static const float c[10] = { -1.26551223f, 1.00002368f, 0.37409196f, 0.09678418f, -0.18628806f,
                                 0.27886807f, -1.13520398f, 1.48851587f, -0.82215223f, 0.17087277f };
    const float32x4_t one = vdupq_n_f32(1.0f), half = vdupq_n_f32(0.5f);
    const float32x4_t z = vmulq_f32(vabsq_f32(x), vdupq_n_f32(0.70710678118654752f));
    const float32x4_t t = vdivq_f32(one, vfmaq_f32(one, half, z));
    float32x4_t p = vdupq_n_f32(c[9]), erfc;
    int i;
    for (i = 8; i >= 0; i--) p = vfmaq_f32(vdupq_n_f32(c[i]), p, t);
    erfc = vmulq_f32(t, mms__exp4(vfmsq_f32(p, z, z)));
    return vmulq_f32(vmulq_f32(half, x), vbslq_f32(vcltq_f32(x, vdupq_n_f32(0.0f)), erfc, vsubq_f32(vdupq_n_f32(2.0f), erfc)));
}

static MMS__NEON_INLINE float32x4_t mms__unary4(enum mms_op op, float32x4_t x, float s) {
    switch (op) {
        case MMS_OP_SCALE:     return vmulq_n_f32(x, s);
        case MMS_OP_SQR:       return vmulq_f32(x, x);
        case MMS_OP_SQRT:      return vsqrtq_f32(x);
        case MMS_OP_EXP:       return mms__exp4(x);
        case MMS_OP_SILU:      return mms__sigmoid_mul4(x, x);
        case MMS_OP_GELU:      return mms__gelu4(x);
        default: {             /* GELU_TANH */
            const float32x4_t u = vmulq_f32(x, vfmaq_f32(vdupq_n_f32(1.0f), vmulq_f32(x, x), vdupq_n_f32(0.044715f)));
            return mms__sigmoid_mul4(x, vmulq_n_f32(u, 2.0f * 0.79788456080286535588f));
        }
    }
}

static void mms__unary_f32_neon(enum mms_op op, int64_t n, float *y, const float *x, float s) {
    float tx[4], ty[4];
    int64_t i = 0, j;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, mms__unary4(op, vld1q_f32(x + i), s));
    if (i < n) {                       /* the tail through a padded copy, as on AVX2 */
        for (j = 0; j < 4; j++) tx[j] = i + j < n ? x[i + j] : 0.0f;
        vst1q_f32(ty, mms__unary4(op, vld1q_f32(tx), s));
        for (j = 0; i + j < n; j++) y[i + j] = ty[j];
    }
}

/* maxNum skips NaN, as the scalar loop does */
static float mms__max_f32_neon(int64_t n, const float *x) {
    float32x4_t m0 = vdupq_n_f32(-INFINITY), m1 = m0;
    int64_t i = 0;
    float m;
    for (; i + 8 <= n; i += 8) {
        m0 = vmaxnmq_f32(m0, vld1q_f32(x + i));
        m1 = vmaxnmq_f32(m1, vld1q_f32(x + i + 4));
    }
    m = vmaxnmvq_f32(vmaxnmq_f32(m0, m1));
    for (; i < n; i++) if (x[i] > m) m = x[i];
    return m;
}

static float mms__exp_sum_f32_neon(int64_t n, float *y, const float *x, float m) {
    const float32x4_t vm = vdupq_n_f32(m);
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0;
    int64_t i = 0;
    float s;
    for (; i + 8 <= n; i += 8) {
        const float32x4_t e0 = mms__exp4(vsubq_f32(vld1q_f32(x + i), vm)), e1 = mms__exp4(vsubq_f32(vld1q_f32(x + i + 4), vm));
        vst1q_f32(y + i, e0);
        vst1q_f32(y + i + 4, e1);
        s0 = vaddq_f32(s0, e0);
        s1 = vaddq_f32(s1, e1);
    }
    for (; i + 4 <= n; i += 4) {
        const float32x4_t e0 = mms__exp4(vsubq_f32(vld1q_f32(x + i), vm));
        vst1q_f32(y + i, e0);
        s0 = vaddq_f32(s0, e0);
    }
    s = vaddvq_f32(vaddq_f32(s0, s1));
    for (; i < n; i++) { y[i] = expf(x[i] - m); s += y[i]; }
    return s;
}

static void mms__axpb_f32_neon(int64_t n, float *y, const float *x, float a, const float *b) {
    int64_t i = 0;
    if (b) for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(b + i), vld1q_f32(x + i), a));
    else   for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_n_f32(vld1q_f32(x + i), a));
    for (; i < n; i++) y[i] = x[i] * a + (b ? b[i] : 0.0f);
}

static void mms__sums_f64_neon(int64_t n, const float *x, double c, double *sum, double *sq) {
    const float64x2_t vc = vdupq_n_f64(c);
    float64x2_t s0 = vdupq_n_f64(0.0), s1 = s0, q0 = s0, q1 = s0;
    double ts, tq;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vld1q_f32(x + i);
        const float64x2_t a = vcvt_f64_f32(vget_low_f32(v)), b = vcvt_high_f64_f32(v);
        const float64x2_t da = vsubq_f64(a, vc), db = vsubq_f64(b, vc);
        s0 = vaddq_f64(s0, a);
        s1 = vaddq_f64(s1, b);
        q0 = vfmaq_f64(q0, da, da);
        q1 = vfmaq_f64(q1, db, db);
    }
    ts = vaddvq_f64(vaddq_f64(s0, s1));
    tq = vaddvq_f64(vaddq_f64(q0, q1));
    for (; i < n; i++) { ts += x[i]; tq += ((double)x[i] - c) * ((double)x[i] - c); }
    *sum = ts;
    *sq = tq;
}

static void mms__shift_scale_f32_neon(int64_t n, float *y, const float *x, float c, float s) {
    const float32x4_t vc = vdupq_n_f32(c);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_n_f32(vsubq_f32(vld1q_f32(x + i), vc), s));
    for (; i < n; i++) y[i] = (x[i] - c) * s;
}
#endif

/* -- dispatching names of the above -- */


/* y = op(x) for the unary ops (s: SCALE's factor); y may be x */
static void mms__vec_unary_f32(enum mms_op op, int64_t n, float *y, const float *x, float s) {
    int64_t i;
#if MMS__HAVE_AVX2
    if (mms__avx512() && op != MMS_OP_TANH) { mms__unary_f32_avx512(op, n, y, x, s); return; }
    if (mms__avx2() && op != MMS_OP_TANH) { mms__unary_f32_avx2(op, n, y, x, s); return; }
#endif
#if MMS__HAVE_NEON
    if (mms__neon() && op != MMS_OP_TANH) { mms__unary_f32_neon(op, n, y, x, s); return; }
#endif
    for (i = 0; i < n; i++) y[i] = mms__unary_scalar(op, x[i], s);
}

static float mms__vec_max_f32(int64_t n, const float *x) {
    float m = -INFINITY;
    int64_t i;
#if MMS__HAVE_AVX2
    if (mms__avx2()) return mms__max_f32_avx2(n, x);
#endif
#if MMS__HAVE_NEON
    if (mms__neon()) return mms__max_f32_neon(n, x);
#endif
    for (i = 0; i < n; i++) if (x[i] > m) m = x[i];
    return m;
}

/* y = exp(x - m) and the sum of y (in double on the scalar path); y may be x */
static double mms__vec_exp_sum_f32(int64_t n, float *y, const float *x, float m) {
    double s = 0.0;
    int64_t i;
#if MMS__HAVE_AVX2
    if (mms__avx512()) return (double)mms__exp_sum_f32_avx512(n, y, x, m);
    if (mms__avx2()) return (double)mms__exp_sum_f32_avx2(n, y, x, m);
#endif
#if MMS__HAVE_NEON
    if (mms__neon()) return (double)mms__exp_sum_f32_neon(n, y, x, m);
#endif
    for (i = 0; i < n; i++) { y[i] = expf(x[i] - m); s += y[i]; }
    return s;
}

/* sum(x) and sum((x - c)^2) in double */
static void mms__vec_sums_f64(int64_t n, const float *x, double c, double *sum, double *sq) {
    int64_t i;
#if MMS__HAVE_AVX2
    if (mms__avx2()) { mms__sums_f64_avx2(n, x, c, sum, sq); return; }
#endif
#if MMS__HAVE_NEON
    if (mms__neon()) { mms__sums_f64_neon(n, x, c, sum, sq); return; }
#endif
    *sum = *sq = 0.0;
    for (i = 0; i < n; i++) { *sum += x[i]; *sq += ((double)x[i] - c) * ((double)x[i] - c); }
}

/* y = (x - c) * s; y may be x */
static void mms__vec_shift_scale_f32(int64_t n, float *y, const float *x, double c, float s) {
    int64_t i;
#if MMS__HAVE_AVX2
    if (mms__avx2()) { mms__shift_scale_f32_avx2(n, y, x, (float)c, s); return; }
#endif
#if MMS__HAVE_NEON
    if (mms__neon()) { mms__shift_scale_f32_neon(n, y, x, (float)c, s); return; }
#endif
    for (i = 0; i < n; i++) y[i] = (float)((double)x[i] - c) * s;
}

/* y = x * a + b, b optional; y may be x or b */
static void mms__vec_axpb_f32(int64_t n, float *y, const float *x, float a, const float *b) {
    int64_t i;
#if MMS__HAVE_AVX2
    if (mms__avx2()) { mms__axpb_f32_avx2(n, y, x, a, b); return; }
#endif
#if MMS__HAVE_NEON
    if (mms__neon()) { mms__axpb_f32_neon(n, y, x, a, b); return; }
#endif
    for (i = 0; i < n; i++) y[i] = x[i] * a + (b ? b[i] : 0.0f);
}
