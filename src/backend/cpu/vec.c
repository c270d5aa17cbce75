/* >>vec ===========================================================================================
   The kernel sets and the basic vector primitives of the CPU kernels (dot, binary ops, f16/bf16
   conversions). Every primitive has a portable scalar body and SIMD bodies (AVX2 with FMA and F16C
   on x86-64, AVX-512 with VNNI and BF16 where it replaces an AVX2 body, NEON on 64-bit ARM) chosen
   at run time (mms_cpu_set_kernels); kernels call only the dispatching names. The element-wise
   primitives are in vec_elementwise.c, the dense products in vec_dense.c, each with its AVX2,
   AVX-512 and NEON sections together; a new primitive goes to the room of its role, its bodies
   in that room's sections and its dispatching name after them. */

/* A prefetch of the n bytes at ptr (gcc, clang; elsewhere nothing) for reads the hardware's
   prefetcher does not foresee; locality 3: into every cache level, 1: into L2 and beyond. Never
   faults. A macro: gcc takes a function of prefetches alone for one without effects and drops
   its calls. */
#if defined(__GNUC__) || defined(__clang__)
#  define MMS__PREFETCH(ptr, n, locality)                                                            \
    do {                                                                                           \
        size_t mms__pf_o;                                                                          \
        for (mms__pf_o = 0; mms__pf_o < (size_t)(n); mms__pf_o += 64) __builtin_prefetch((const char *)(ptr) + mms__pf_o, 0, locality); \
    } while (0)
#else
#  define MMS__PREFETCH(ptr, n, locality) ((void)(ptr), (void)(n))
#endif

static int mms__cpu_kernels_active = -1;   /* enum mms_cpu_kernels once resolved */

MMS_API bool mms_cpu_has_avx2(void) {
    static int has = -1;
    if (has < 0) has = mms__cpu_detect_avx2() ? 1 : 0;
    return has == 1;
}

static bool mms__cpu_has_avx512(void) {
    static int has = -1;
    if (has < 0) has = mms__cpu_detect_avx512() ? 1 : 0;
    return has == 1;
}
static bool mms__cpu_has_neon(void) { return MMS__HAVE_NEON != 0; }
static bool mms__cpu_has_neon_dotprod(void) {
    static int has = -1;
    if (has < 0) has = MMS__HAVE_NEON && mms__cpu_detect_dotprod() ? 1 : 0;
    return has == 1;
}
static bool mms__cpu_has_scalar(void) { return true; }

/* The kernel sets. AUTO takes the last one the machine supports, so a set goes after those it
   extends; a new set is a new enum value, a row here and its bodies behind the dispatching names. */
static const struct mms__kernel_set {
    enum mms_cpu_kernels kernels;
    const char *name;
    bool (*supported)(void);
    const char *needs;
} mms__kernel_sets[] = {
    { MMS_CPU_KERNELS_SCALAR,       "scalar",       mms__cpu_has_scalar,       "" },
    { MMS_CPU_KERNELS_AVX2,         "avx2",         mms_cpu_has_avx2,          "an x86 CPU with AVX2, FMA and F16C and a gcc or clang build" },
    { MMS_CPU_KERNELS_AVX512,       "avx512",       mms__cpu_has_avx512,       "an x86 CPU with AVX-512 F/BW/DQ/VL, VNNI and BF16 and a gcc or clang build" },
    { MMS_CPU_KERNELS_NEON,         "neon",         mms__cpu_has_neon,         "a 64-bit ARM build with gcc or clang" },
    { MMS_CPU_KERNELS_NEON_DOTPROD, "neon_dotprod", mms__cpu_has_neon_dotprod, "a 64-bit ARM CPU with the dot-product instructions and a gcc or clang build" },
};
#define MMS__N_KERNEL_SETS ((int)(sizeof mms__kernel_sets / sizeof mms__kernel_sets[0]))

static const struct mms__kernel_set *mms__kernel_set_of(enum mms_cpu_kernels k) {
    int i;
    for (i = 0; i < MMS__N_KERNEL_SETS; i++) if (mms__kernel_sets[i].kernels == k) return &mms__kernel_sets[i];
    return NULL;
}

MMS_API const char *mms_cpu_kernels_name(enum mms_cpu_kernels k) {
    const struct mms__kernel_set *set = mms__kernel_set_of(k);
    return k == MMS_CPU_KERNELS_AUTO ? "auto" : set ? set->name : "unknown";
}

MMS_API bool mms_cpu_kernels_supported(enum mms_cpu_kernels k) {
    const struct mms__kernel_set *set = mms__kernel_set_of(k);
    return k == MMS_CPU_KERNELS_AUTO || (set && set->supported());
}

MMS_API enum mms_status mms_cpu_set_kernels(enum mms_cpu_kernels k) {
    const struct mms__kernel_set *set = mms__kernel_set_of(k);
    int i;
    if (k == MMS_CPU_KERNELS_AUTO) {
        for (i = MMS__N_KERNEL_SETS - 1; !mms__kernel_sets[i].supported(); i--) {}
        set = &mms__kernel_sets[i];
    }
    if (!set) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_cpu_set_kernels: unknown kernel set %d", (int)k);
    if (!set->supported())
        return mms_set_error(MMS_ERR_UNSUPPORTED, "mms_cpu_set_kernels: the %s kernels need %s; this machine or build lacks them",
                             set->name, set->needs);
    mms__cpu_kernels_active = (int)set->kernels;
    return MMS_OK;
}

MMS_API enum mms_cpu_kernels mms_cpu_get_kernels(void) {
    if (mms__cpu_kernels_active < 0) {
        const char *env = getenv("MMS_CPU_KERNELS");
        enum mms_cpu_kernels want = MMS_CPU_KERNELS_AUTO;
        int i;
        for (i = 0; env && env[0] && i < MMS__N_KERNEL_SETS; i++) if (!strcmp(env, mms__kernel_sets[i].name)) want = mms__kernel_sets[i].kernels;
        if (env && env[0] && want == MMS_CPU_KERNELS_AUTO && strcmp(env, "auto") != 0)
            mms__log(MMS_LOG_WARN, "MMS_CPU_KERNELS=%s is not one of auto, scalar, avx2, avx512, neon, neon_dotprod; using auto", env);
        if (mms_cpu_set_kernels(want) != MMS_OK) mms_cpu_set_kernels(MMS_CPU_KERNELS_AUTO);
    }
    return (enum mms_cpu_kernels)mms__cpu_kernels_active;
}

static enum mms_cpu_kernels mms__kernels(void) {
    return mms__cpu_kernels_active < 0 ? mms_cpu_get_kernels() : (enum mms_cpu_kernels)mms__cpu_kernels_active;
}
/* Which bodies the dispatching names take. */
MMS__MAYBE_UNUSED static bool mms__avx2(void) {   /* the AVX-512 set extends AVX2's: bodies it lacks are AVX2's */
    return MMS__HAVE_AVX2 && (mms__kernels() == MMS_CPU_KERNELS_AVX2 || mms__kernels() == MMS_CPU_KERNELS_AVX512);
}
MMS__MAYBE_UNUSED static bool mms__avx512(void) { return MMS__HAVE_AVX2 && mms__kernels() == MMS_CPU_KERNELS_AVX512; }
MMS__MAYBE_UNUSED static bool mms__neon(void) { return MMS__HAVE_NEON && (mms__kernels() == MMS_CPU_KERNELS_NEON || mms__kernels() == MMS_CPU_KERNELS_NEON_DOTPROD); }
MMS__MAYBE_UNUSED static bool mms__dotprod(void) { return MMS__HAVE_NEON && mms__kernels() == MMS_CPU_KERNELS_NEON_DOTPROD; }
static bool mms__simd(void) { return mms__kernels() != MMS_CPU_KERNELS_SCALAR; }   /* any set but scalar */

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
/* for the 8- and 16-lane helpers that must inline into their loops */
#define MMS__AVX2_INLINE MMS__TARGET_AVX2 __attribute__((always_inline)) inline
#define MMS__AVX512_INLINE MMS__TARGET_AVX512 __attribute__((always_inline)) inline

static MMS__AVX2_INLINE float mms__hsum256(__m256 v) {
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

/* mms_fp32_to_bf16's rounding (to nearest even, NaN kept quiet) on 8 values at a time */
static MMS__TARGET_AVX2 void mms__f32_to_bf16_avx2(const float *x, mms_bf16_t *y, int64_t n) {
    const __m256i lsb = _mm256_set1_epi32(1), half = _mm256_set1_epi32(0x7fff), abs = _mm256_set1_epi32(0x7fffffff),
                  inf = _mm256_set1_epi32(0x7f800000), quiet = _mm256_set1_epi32(0x40);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i u = _mm256_loadu_si256((const __m256i *)(x + i)), hi = _mm256_srli_epi32(u, 16);
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf);
        const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, half), _mm256_and_si256(hi, lsb)), 16);
        const __m256i w = _mm256_blendv_epi8(r, _mm256_or_si256(hi, quiet), nan);
        _mm_storeu_si128((__m128i *)(y + i), _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(w, w), 0x08)));
    }
    for (; i < n; i++) y[i] = mms_fp32_to_bf16(x[i]);
}

/* the whole vectors of z = x op y; returns how many elements that was */
static MMS__TARGET_AVX2 int64_t mms__binary_f32_avx2(enum mms_op op, int64_t n, float *z, const float *x, const float *y) {
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
    return i;
}
#endif

#if MMS__HAVE_NEON
/* the 4-lane helpers; NEON needs no target attribute (it is in the base ISA) */
#define MMS__NEON_INLINE __attribute__((always_inline)) inline

static MMS__NEON_INLINE float32x4_t mms__load_f16x4(const mms_fp16_t *p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }

/* One row against y, four accumulators (f32 or f16 rows: LOAD gives 4 lanes, CVT1 one value). */
#define MMS__DOTN_BODY(LOAD, CVT1)                                                                                 \
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;                                                 \
    int64_t i = 0;                                                                                                 \
    float s;                                                                                                       \
    for (; i + 16 <= n; i += 16) {                                                                                 \
        a0 = vfmaq_f32(a0, LOAD(x + i), vld1q_f32(y + i));                                                         \
        a1 = vfmaq_f32(a1, LOAD(x + i + 4), vld1q_f32(y + i + 4));                                                 \
        a2 = vfmaq_f32(a2, LOAD(x + i + 8), vld1q_f32(y + i + 8));                                                 \
        a3 = vfmaq_f32(a3, LOAD(x + i + 12), vld1q_f32(y + i + 12));                                               \
    }                                                                                                              \
    for (; i + 4 <= n; i += 4) a0 = vfmaq_f32(a0, LOAD(x + i), vld1q_f32(y + i));                                  \
    s = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));                                               \
    for (; i < n; i++) s += CVT1(x[i]) * y[i];                                                                     \
    return s;
static float mms__dot_f32_neon(int64_t n, const float *x, const float *y) {
    MMS__DOTN_BODY(vld1q_f32, (float))
}

static void mms__f16_to_f32_neon(const mms_fp16_t *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, mms__load_f16x4(x + i));
    for (; i < n; i++) y[i] = mms_fp16_to_fp32(x[i]);
}

static void mms__f32_to_f16_neon(const float *x, mms_fp16_t *y, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));   /* nearest even */
    for (; i < n; i++) y[i] = mms_fp32_to_fp16(x[i]);
}

static void mms__bf16_to_f32_neon(const mms_bf16_t *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(x + i), 16)));
    for (; i < n; i++) y[i] = mms_bf16_to_fp32(x[i]);
}

static int64_t mms__binary_f32_neon(enum mms_op op, int64_t n, float *z, const float *x, const float *y) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t a = vld1q_f32(x + i), b = vld1q_f32(y + i);
        switch (op) {
            case MMS_OP_ADD: vst1q_f32(z + i, vaddq_f32(a, b)); break;
            case MMS_OP_SUB: vst1q_f32(z + i, vsubq_f32(a, b)); break;
            case MMS_OP_MUL: vst1q_f32(z + i, vmulq_f32(a, b)); break;
            default:         vst1q_f32(z + i, vdivq_f32(a, b)); break;
        }
    }
    return i;
}
#endif

/* -- dispatching names -- */

static float mms__vec_dot_f32(int64_t n, const float *x, const float *y) {
#if MMS__HAVE_AVX2
    if (mms__avx2()) return mms__dot_f32_avx2(n, x, y);
#endif
#if MMS__HAVE_NEON
    if (mms__neon()) return mms__dot_f32_neon(n, x, y);
#endif
    return mms__dot_f32_scalar(n, x, y);
}

/* z = x op y for op in ADD, SUB, MUL, DIV; z may alias x or y */
static void mms__vec_binary_f32(enum mms_op op, int64_t n, float *z, const float *x, const float *y) {
    int64_t i = 0;
#if MMS__HAVE_AVX2
    if (mms__avx2()) i = mms__binary_f32_avx2(op, n, z, x, y);
#endif
#if MMS__HAVE_NEON
    if (mms__neon()) i = mms__binary_f32_neon(op, n, z, x, y);
#endif
    switch (op) {                      /* the scalar path, and the SIMD paths' tails */
        case MMS_OP_ADD: for (; i < n; i++) z[i] = x[i] + y[i]; break;
        case MMS_OP_SUB: for (; i < n; i++) z[i] = x[i] - y[i]; break;
        case MMS_OP_MUL: for (; i < n; i++) z[i] = x[i] * y[i]; break;
        default:         for (; i < n; i++) z[i] = x[i] / y[i]; break;
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
#if MMS__HAVE_NEON
    if (mms__neon()) {
        if (type == MMS_TYPE_F16)  { mms__f16_to_f32_neon((const mms_fp16_t *)src, dst, n); return; }
        if (type == MMS_TYPE_BF16) { mms__bf16_to_f32_neon((const mms_bf16_t *)src, dst, n); return; }
    }
#endif
    mms__type_traits[type].to_float(src, dst, n);
}

/* n f32 values to contiguous elements of a float type */
static void mms__from_f32(enum mms_type type, const float *src, void *dst, int64_t n) {
#if MMS__HAVE_AVX2
    if (mms__avx2() && type == MMS_TYPE_F16) { mms__f32_to_f16_avx2(src, (mms_fp16_t *)dst, n); return; }
    if (mms__avx2() && type == MMS_TYPE_BF16) { mms__f32_to_bf16_avx2(src, (mms_bf16_t *)dst, n); return; }
#endif
#if MMS__HAVE_NEON
    if (mms__neon() && type == MMS_TYPE_F16) { mms__f32_to_f16_neon(src, (mms_fp16_t *)dst, n); return; }
#endif
    mms__type_traits[type].from_float(src, dst, n);
}
