/* >>vec ===========================================================================================
   Vector primitives of the CPU kernels, each with a portable scalar body and an AVX2/FMA/F16C body
   chosen at run time (mms_cpu_set_kernels). Kernels call only the dispatching names. */

static int mms__cpu_kernels_active = -1;   /* enum mms_cpu_kernels once resolved */

MMS_API bool mms_cpu_has_avx2(void) {
    static int has = -1;
    if (has < 0) has = mms__cpu_detect_avx2() ? 1 : 0;
    return has == 1;
}

MMS_API const char *mms_cpu_kernels_name(enum mms_cpu_kernels k) {
    switch (k) {
        case MMS_CPU_KERNELS_AUTO:   return "auto";
        case MMS_CPU_KERNELS_SCALAR: return "scalar";
        case MMS_CPU_KERNELS_AVX2:   return "avx2";
    }
    return "unknown";
}

MMS_API enum mms_status mms_cpu_set_kernels(enum mms_cpu_kernels k) {
    if (k == MMS_CPU_KERNELS_AUTO) k = mms_cpu_has_avx2() ? MMS_CPU_KERNELS_AVX2 : MMS_CPU_KERNELS_SCALAR;
    if (k == MMS_CPU_KERNELS_AVX2 && !mms_cpu_has_avx2())
        return mms_set_error(MMS_ERR_UNSUPPORTED, "mms_cpu_set_kernels: AVX2 kernels need a CPU with AVX2, FMA and F16C and an "
                             "x86 build with gcc or clang (this %s)", MMS__HAVE_AVX2 ? "CPU lacks them" : "build has none");
    if (k != MMS_CPU_KERNELS_SCALAR && k != MMS_CPU_KERNELS_AVX2)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_cpu_set_kernels: unknown kernel set %d", (int)k);
    mms__cpu_kernels_active = (int)k;
    return MMS_OK;
}

MMS_API enum mms_cpu_kernels mms_cpu_get_kernels(void) {
    if (mms__cpu_kernels_active < 0) {
        const char *env = getenv("MMS_CPU_KERNELS");
        enum mms_cpu_kernels want = MMS_CPU_KERNELS_AUTO;
        if (env && !strcmp(env, "scalar")) want = MMS_CPU_KERNELS_SCALAR;
        else if (env && !strcmp(env, "avx2")) want = MMS_CPU_KERNELS_AVX2;
        else if (env && strcmp(env, "auto") != 0 && env[0])
            mms__log(MMS_LOG_WARN, "MMS_CPU_KERNELS=%s is not one of auto, scalar, avx2; using auto", env);
        if (mms_cpu_set_kernels(want) != MMS_OK) mms_cpu_set_kernels(MMS_CPU_KERNELS_AUTO);
    }
    return (enum mms_cpu_kernels)mms__cpu_kernels_active;
}

static bool mms__avx2(void) {
#if MMS__HAVE_AVX2
    return (mms__cpu_kernels_active < 0 ? mms_cpu_get_kernels() : (enum mms_cpu_kernels)mms__cpu_kernels_active) == MMS_CPU_KERNELS_AVX2;
#else
    return false;
#endif
}

/* -- scalar bodies -- */

/* Four partial sums break the add dependency chain, so the scalar path is not latency-bound. */
static float mms__dot_f32_scalar(int64_t n, const float *x, const float *y) {
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += x[i] * y[i];
        s1 += x[i + 1] * y[i + 1];
        s2 += x[i + 2] * y[i + 2];
        s3 += x[i + 3] * y[i + 3];
    }
    for (; i < n; i++) s0 += x[i] * y[i];
    return (s0 + s1) + (s2 + s3);
}

#if MMS__HAVE_AVX2
static MMS__TARGET_AVX2 float mms__hsum256(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

static MMS__TARGET_AVX2 float mms__dot_f32_avx2(int64_t n, const float *x, const float *y) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int64_t i = 0;
    float s;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
    s = mms__hsum256(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++) s += x[i] * y[i];
    return s;
}

static MMS__TARGET_AVX2 void mms__f16_to_f32_avx2(const mms_fp16_t *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    for (; i < n; i++) y[i] = mms_fp16_to_fp32(x[i]);
}

static MMS__TARGET_AVX2 void mms__f32_to_f16_avx2(const float *x, mms_fp16_t *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = mms_fp32_to_fp16(x[i]);
}

static MMS__TARGET_AVX2 void mms__bf16_to_f32_avx2(const mms_bf16_t *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + i)));
        _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    for (; i < n; i++) y[i] = mms_bf16_to_fp32(x[i]);
}

static MMS__TARGET_AVX2 void mms__mad_f32_avx2(int64_t n, float *y, const float *x, float a) {
    __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), va, _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

static MMS__TARGET_AVX2 void mms__binary_f32_avx2(enum mms_op op, int64_t n, float *z, const float *x, const float *y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(y + i), r;
        switch (op) {
            case MMS_OP_ADD: r = _mm256_add_ps(a, b); break;
            case MMS_OP_SUB: r = _mm256_sub_ps(a, b); break;
            case MMS_OP_MUL: r = _mm256_mul_ps(a, b); break;
            default:         r = _mm256_div_ps(a, b); break;
        }
        _mm256_storeu_ps(z + i, r);
    }
    for (; i < n; i++) {
        switch (op) {
            case MMS_OP_ADD: z[i] = x[i] + y[i]; break;
            case MMS_OP_SUB: z[i] = x[i] - y[i]; break;
            case MMS_OP_MUL: z[i] = x[i] * y[i]; break;
            default:         z[i] = x[i] / y[i]; break;
        }
    }
}
#endif

/* -- dispatching names -- */

static float mms__vec_dot_f32(int64_t n, const float *x, const float *y) {
#if MMS__HAVE_AVX2
    if (mms__avx2()) return mms__dot_f32_avx2(n, x, y);
#endif
    return mms__dot_f32_scalar(n, x, y);
}

/* y += a * x */
static void mms__vec_mad_f32(int64_t n, float *y, const float *x, float a) {
    int64_t i;
#if MMS__HAVE_AVX2
    if (mms__avx2()) { mms__mad_f32_avx2(n, y, x, a); return; }
#endif
    for (i = 0; i < n; i++) y[i] += a * x[i];
}

/* z = x op y for op in ADD, SUB, MUL, DIV; z may alias x or y */
static void mms__vec_binary_f32(enum mms_op op, int64_t n, float *z, const float *x, const float *y) {
    int64_t i;
#if MMS__HAVE_AVX2
    if (mms__avx2()) { mms__binary_f32_avx2(op, n, z, x, y); return; }
#endif
    switch (op) {
        case MMS_OP_ADD: for (i = 0; i < n; i++) z[i] = x[i] + y[i]; break;
        case MMS_OP_SUB: for (i = 0; i < n; i++) z[i] = x[i] - y[i]; break;
        case MMS_OP_MUL: for (i = 0; i < n; i++) z[i] = x[i] * y[i]; break;
        default:         for (i = 0; i < n; i++) z[i] = x[i] / y[i]; break;
    }
}

/* n contiguous elements of a float type to f32 */
static void mms__to_f32(enum mms_type type, const void *src, float *dst, int64_t n) {
#if MMS__HAVE_AVX2
    if (mms__avx2()) {
        if (type == MMS_TYPE_F16)  { mms__f16_to_f32_avx2((const mms_fp16_t *)src, dst, n); return; }
        if (type == MMS_TYPE_BF16) { mms__bf16_to_f32_avx2((const mms_bf16_t *)src, dst, n); return; }
    }
#endif
    mms__type_traits[type].to_float(src, dst, n);
}

/* n f32 values to contiguous elements of a float type */
static void mms__from_f32(enum mms_type type, const float *src, void *dst, int64_t n) {
#if MMS__HAVE_AVX2
    if (mms__avx2() && type == MMS_TYPE_F16) { mms__f32_to_f16_avx2(src, (mms_fp16_t *)dst, n); return; }
#endif
    mms__type_traits[type].from_float(src, dst, n);
}

/* -- rows of tensors -- */

static char *mms__row_ptr(const struct mms_tensor *t, int64_t i1, int64_t i2, int64_t i3) {
    return (char *)t->data + i1 * (int64_t)t->nb[1] + i2 * (int64_t)t->nb[2] + i3 * (int64_t)t->nb[3];
}

/* Row (i1, i2, i3) of a float tensor as contiguous f32: a pointer into the tensor when it already
   is one, else the row converted into buf (ne[0] floats). */
static const float *mms__load_row(const struct mms_tensor *t, int64_t i1, int64_t i2, int64_t i3, float *buf) {
    const char *row = mms__row_ptr(t, i1, i2, i3);
    size_t ts = mms_type_size(t->type);
    int64_t i, n = t->ne[0];
    if (t->nb[0] == ts) {
        if (t->type == MMS_TYPE_F32) return (const float *)row;
        mms__to_f32(t->type, row, buf, n);
        return buf;
    }
    for (i = 0; i < n; i++) mms__type_traits[t->type].to_float(row + i * (int64_t)t->nb[0], buf + i, 1);
    return buf;
}

/* Writes n = ne[0] f32 values into row (i1, i2, i3) of a float tensor of any strides. */
static void mms__store_row(const struct mms_tensor *t, int64_t i1, int64_t i2, int64_t i3, const float *src) {
    char *row = mms__row_ptr(t, i1, i2, i3);
    size_t ts = mms_type_size(t->type);
    int64_t i, n = t->ne[0];
    if (t->nb[0] == ts) {
        if (t->type != MMS_TYPE_F32 || (const float *)row != src) mms__from_f32(t->type, src, row, n);
        return;
    }
    for (i = 0; i < n; i++) mms__type_traits[t->type].from_float(src + i, row + i * (int64_t)t->nb[0], 1);
}

/* A writable f32 row of dst: the row itself when dst is contiguous f32, else buf (then store it). */
static float *mms__out_row(const struct mms_tensor *t, int64_t i1, int64_t i2, int64_t i3, float *buf) {
    if (t->type == MMS_TYPE_F32 && t->nb[0] == sizeof(float)) return (float *)mms__row_ptr(t, i1, i2, i3);
    return buf;
}

/* Splits n items into nth near-equal ranges; thread ith gets [*lo, *hi). */
static void mms__split(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t per = n / nth, extra = n % nth;
    *lo = ith * per + MMS__MIN((int64_t)ith, extra);
    *hi = *lo + per + (ith < extra ? 1 : 0);
}

/* Row index r (0 .. nrows-1) to (i1, i2, i3) for a tensor of shape ne. */
static void mms__unravel_row(const int64_t *ne, int64_t r, int64_t *i1, int64_t *i2, int64_t *i3) {
    *i1 = r % ne[1];
    r /= ne[1];
    *i2 = r % ne[2];
    *i3 = r / ne[2];
}
