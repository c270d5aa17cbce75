/* >>vec_dense =====================================================================================
   Dense float products: the small GEMMs' register blocks (f32; bf16 pairs on AVX-512), the
   4-row and 2x4 dots and the wide GEMV of the decode products, the f16 row dot and the
   transposes; the AVX2 and AVX-512 bodies, the NEON bodies, then the dispatching names. */

/* The rows of a GEMM register block (both SIMD sets write theirs once per row count R). */
#define MMS__GR_ROWS1(X) X(0)
#define MMS__GR_ROWS2(X) X(0) X(1)
#define MMS__GR_ROWS3(X) X(0) X(1) X(2)
#define MMS__GR_ROWS4(X) X(0) X(1) X(2) X(3)
#define MMS__GR_ROWS5(X) X(0) X(1) X(2) X(3) X(4)
#define MMS__GR_ROWS6(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define MMS__GR_ROWS7(X) MMS__GR_ROWS6(X) X(6)
#define MMS__GR_ROWS8(X) MMS__GR_ROWS7(X) X(7)
#define MMS__GR_ROWS9(X) MMS__GR_ROWS8(X) X(8)
#define MMS__GR_ROWS10(X) MMS__GR_ROWS9(X) X(9)
#define MMS__GR_ROWS11(X) MMS__GR_ROWS10(X) X(10)
#define MMS__GR_ROWS12(X) MMS__GR_ROWS11(X) X(11)

#if MMS__HAVE_AVX2
/* The register block of the small GEMMs (flash attention): C[r][0..15] (+)= sum_k A[r lda + k]
   B[k ldb + 0..15] for R rows; per k, 2 loads and R broadcasts feed 2R FMAs. One body, written
   once for each R so the accumulators stay in registers. */
#define MMS__GR_DECL(r)  __m256 c##r##0 = _mm256_setzero_ps(), c##r##1 = _mm256_setzero_ps();
#define MMS__GR_STEP(r)  { __m256 a = _mm256_broadcast_ss(A + r * lda + k);                                  \
                           c##r##0 = _mm256_fmadd_ps(a, b0, c##r##0); c##r##1 = _mm256_fmadd_ps(a, b1, c##r##1); }
#define MMS__GR_STORE(r) if (acc) { c##r##0 = _mm256_add_ps(c##r##0, _mm256_loadu_ps(C + r * ldc));               \
                                    c##r##1 = _mm256_add_ps(c##r##1, _mm256_loadu_ps(C + r * ldc + 8)); }        \
                         _mm256_storeu_ps(C + r * ldc, c##r##0); _mm256_storeu_ps(C + r * ldc + 8, c##r##1);
#define MMS__GR_DEFINE(R)                                                                                           \
    static MMS__TARGET_AVX2 void mms__gemm_r##R##x16_avx2(int64_t K, const float *A, int64_t lda, const float *B,   \
                                                          int64_t ldb, float *C, int64_t ldc, int acc) {          \
        int64_t k;                                                                                                  \
        MMS__GR_ROWS##R(MMS__GR_DECL)                                                                               \
        for (k = 0; k < K; k++) {                                                                                   \
            const __m256 b0 = _mm256_loadu_ps(B + k * ldb), b1 = _mm256_loadu_ps(B + k * ldb + 8);                 \
            MMS__GR_ROWS##R(MMS__GR_STEP)                                                                           \
        }                                                                                                           \
        MMS__GR_ROWS##R(MMS__GR_STORE)                                                                              \
    }
MMS__GR_DEFINE(1) MMS__GR_DEFINE(2) MMS__GR_DEFINE(3) MMS__GR_DEFINE(4) MMS__GR_DEFINE(5) MMS__GR_DEFINE(6)

static void (*const mms__gemm_rows_avx2[7])(int64_t, const float *, int64_t, const float *, int64_t, float *, int64_t, int) = {
    NULL, mms__gemm_r1x16_avx2, mms__gemm_r2x16_avx2, mms__gemm_r3x16_avx2, mms__gemm_r4x16_avx2, mms__gemm_r5x16_avx2, mms__gemm_r6x16_avx2 };

/* The AVX-512 register block: C[r][0..31] (+)= sum_k A[r lda + k] B[k][0..31] for R <= 12 rows,
   the 32 columns from two panels of 16 (B0, B1): per k 2 loads and R broadcasts feed 2R FMAs of
   16 lanes, 24 accumulators of the 32 zmm registers at R = 12. Each C element sums over k in the
   order of the AVX2 block, one FMA per k, so both sets give the same bits. */
#define MMS__GZ_DECL(r)  __m512 c##r##0 = _mm512_setzero_ps(), c##r##1 = _mm512_setzero_ps();
#define MMS__GZ_STEP(r)  { const __m512 a = _mm512_set1_ps(A[r * lda + k]);                                         \
                           c##r##0 = _mm512_fmadd_ps(a, b0, c##r##0); c##r##1 = _mm512_fmadd_ps(a, b1, c##r##1); }
#define MMS__GZ_STORE(r) if (acc) { c##r##0 = _mm512_add_ps(c##r##0, _mm512_loadu_ps(C + r * ldc));               \
                                    c##r##1 = _mm512_add_ps(c##r##1, _mm512_loadu_ps(C + r * ldc + 16)); }       \
                         _mm512_storeu_ps(C + r * ldc, c##r##0); _mm512_storeu_ps(C + r * ldc + 16, c##r##1);
#define MMS__GZ_DEFINE(R)                                                                                           \
    static MMS__TARGET_AVX512 void mms__gemm_r##R##x32_avx512(int64_t K, const float *A, int64_t lda, const float *B0, \
                                                              const float *B1, int64_t ldb, float *C, int64_t ldc, int acc) { \
        int64_t k;                                                                                                  \
        MMS__GR_ROWS##R(MMS__GZ_DECL)                                                                               \
        for (k = 0; k < K; k++) {                                                                                   \
            const __m512 b0 = _mm512_loadu_ps(B0 + k * ldb), b1 = _mm512_loadu_ps(B1 + k * ldb);                   \
            MMS__GR_ROWS##R(MMS__GZ_STEP)                                                                           \
        }                                                                                                           \
        MMS__GR_ROWS##R(MMS__GZ_STORE)                                                                              \
    }
MMS__GZ_DEFINE(1) MMS__GZ_DEFINE(2) MMS__GZ_DEFINE(3) MMS__GZ_DEFINE(4) MMS__GZ_DEFINE(5) MMS__GZ_DEFINE(6)
MMS__GZ_DEFINE(7) MMS__GZ_DEFINE(8) MMS__GZ_DEFINE(9) MMS__GZ_DEFINE(10) MMS__GZ_DEFINE(11) MMS__GZ_DEFINE(12)
#undef MMS__GZ_DEFINE
#undef MMS__GZ_STORE
#undef MMS__GZ_STEP
#undef MMS__GZ_DECL

typedef void (*mms__gemm_rows2_fn)(int64_t K, const float *A, int64_t lda, const float *B0, const float *B1, int64_t ldb, float *C, int64_t ldc, int acc);
static const mms__gemm_rows2_fn mms__gemm_rows_avx512[13] = {
    NULL, mms__gemm_r1x32_avx512, mms__gemm_r2x32_avx512, mms__gemm_r3x32_avx512, mms__gemm_r4x32_avx512, mms__gemm_r5x32_avx512,
    mms__gemm_r6x32_avx512, mms__gemm_r7x32_avx512, mms__gemm_r8x32_avx512, mms__gemm_r9x32_avx512, mms__gemm_r10x32_avx512,
    mms__gemm_r11x32_avx512, mms__gemm_r12x32_avx512 };

/* The same for one panel, C[r][0..15] (R <= 12): a product's last 16 columns (flash attention's
   80-wide value rows) at the zmm rate rather than AVX2's 6 x 16 block, with its bits. */
#define MMS__GZ1_DECL(r)  __m512 c##r = _mm512_setzero_ps();
#define MMS__GZ1_STEP(r)  c##r = _mm512_fmadd_ps(_mm512_set1_ps(A[r * lda + k]), b0, c##r);
#define MMS__GZ1_STORE(r) _mm512_storeu_ps(C + r * ldc, acc ? _mm512_add_ps(c##r, _mm512_loadu_ps(C + r * ldc)) : c##r);
#define MMS__GZ1_DEFINE(R)                                                                                          \
    static MMS__TARGET_AVX512 void mms__gemm_r##R##x16_avx512(int64_t K, const float *A, int64_t lda, const float *B0, \
                                                              int64_t ldb, float *C, int64_t ldc, int acc) {        \
        int64_t k;                                                                                                  \
        MMS__GR_ROWS##R(MMS__GZ1_DECL)                                                                              \
        for (k = 0; k < K; k++) {                                                                                   \
            const __m512 b0 = _mm512_loadu_ps(B0 + k * ldb);                                                        \
            MMS__GR_ROWS##R(MMS__GZ1_STEP)                                                                          \
        }                                                                                                           \
        MMS__GR_ROWS##R(MMS__GZ1_STORE)                                                                             \
    }
MMS__GZ1_DEFINE(1) MMS__GZ1_DEFINE(2) MMS__GZ1_DEFINE(3) MMS__GZ1_DEFINE(4) MMS__GZ1_DEFINE(5) MMS__GZ1_DEFINE(6)
MMS__GZ1_DEFINE(7) MMS__GZ1_DEFINE(8) MMS__GZ1_DEFINE(9) MMS__GZ1_DEFINE(10) MMS__GZ1_DEFINE(11) MMS__GZ1_DEFINE(12)
#undef MMS__GZ1_DEFINE
#undef MMS__GZ1_STORE
#undef MMS__GZ1_STEP
#undef MMS__GZ1_DECL

static void (*const mms__gemm_rows16_avx512[13])(int64_t, const float *, int64_t, const float *, int64_t, float *, int64_t, int) = {
    NULL, mms__gemm_r1x16_avx512, mms__gemm_r2x16_avx512, mms__gemm_r3x16_avx512, mms__gemm_r4x16_avx512, mms__gemm_r5x16_avx512,
    mms__gemm_r6x16_avx512, mms__gemm_r7x16_avx512, mms__gemm_r8x16_avx512, mms__gemm_r9x16_avx512, mms__gemm_r10x16_avx512,
    mms__gemm_r11x16_avx512, mms__gemm_r12x16_avx512 };

/* The BF16 register block (AVX-512 BF16): C[r][0..ncols) = sum_k A[r][k] B[k][0..ncols) for R <= 12
   rows, A and B in bf16 pairs (one dword holds k = 2p and 2p + 1): A's rows lda dwords apart, B as
   two panels of 16 columns (B0, B1: dword p * 16 + column). Per pair 2 loads and R broadcasts feed
   2R vdpbf16ps of 32 products; each adds its pair's products (exact in f32) to the sum, rounding to
   nearest, with subnormal inputs and results taken as zero. ncols (1..32) columns are stored. The
   same block is also made for one panel (ncols <= 16, B1 unused: MMS__GB_P1 drops the second
   panel's code), each sum computed as in the two-panel one: flash attention's 80-wide value rows
   end with such a panel, where a half-masked call spent twice the instructions. */
#define MMS__GB_DECL(r)  __m512 c##r##0 = _mm512_setzero_ps(); MMS__GB_P1(__m512 c##r##1 = _mm512_setzero_ps();)
#define MMS__GB_STEP(r)  { const __m512bh a = (__m512bh)_mm512_set1_epi32((int)A[r * lda + p]);                   \
                           c##r##0 = _mm512_dpbf16_ps(c##r##0, a, b0); MMS__GB_P1(c##r##1 = _mm512_dpbf16_ps(c##r##1, a, b1);) }
#define MMS__GB_STORE(r) if (acc) { c##r##0 = _mm512_add_ps(c##r##0, _mm512_maskz_loadu_ps(m0, C + r * ldc));              \
                                    MMS__GB_P1(c##r##1 = _mm512_add_ps(c##r##1, _mm512_maskz_loadu_ps(m1, C + r * ldc + 16));) } \
                         _mm512_mask_storeu_ps(C + r * ldc, m0, c##r##0); MMS__GB_P1(_mm512_mask_storeu_ps(C + r * ldc + 16, m1, c##r##1);)
#define MMS__GB_DEFINE(R, W)                                                                                        \
    static MMS__TARGET_AVX512 void mms__gemm_bf16_r##R##x##W##_avx512(int64_t P, const uint32_t *A, int64_t lda,   \
                                                                      const uint32_t *B0, const uint32_t *B1, float *C, \
                                                                      int64_t ldc, int ncols, int acc) {            \
        const __mmask16 m0 = ncols >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << ncols) - 1);                     \
        MMS__GB_P1(const __mmask16 m1 = ncols >= 32 ? (__mmask16)0xffff : ncols <= 16 ? (__mmask16)0 : (__mmask16)((1u << (ncols - 16)) - 1);) \
        int64_t p;                                                                                                  \
        MMS__GR_ROWS##R(MMS__GB_DECL)                                                                               \
        MMS__UNUSED(B1);                                                                                            \
        for (p = 0; p < P; p++) {                                                                                   \
            const __m512bh b0 = (__m512bh)_mm512_loadu_si512(B0 + p * 16);                                         \
            MMS__GB_P1(const __m512bh b1 = (__m512bh)_mm512_loadu_si512(B1 + p * 16);)                             \
            MMS__GR_ROWS##R(MMS__GB_STEP)                                                                           \
        }                                                                                                           \
        MMS__GR_ROWS##R(MMS__GB_STORE)                                                                              \
    }
#define MMS__GB_P1(code) code
MMS__GB_DEFINE(1, 32) MMS__GB_DEFINE(2, 32) MMS__GB_DEFINE(3, 32) MMS__GB_DEFINE(4, 32) MMS__GB_DEFINE(5, 32) MMS__GB_DEFINE(6, 32)
MMS__GB_DEFINE(7, 32) MMS__GB_DEFINE(8, 32) MMS__GB_DEFINE(9, 32) MMS__GB_DEFINE(10, 32) MMS__GB_DEFINE(11, 32) MMS__GB_DEFINE(12, 32)
#undef MMS__GB_P1
#define MMS__GB_P1(code)
MMS__GB_DEFINE(1, 16) MMS__GB_DEFINE(2, 16) MMS__GB_DEFINE(3, 16) MMS__GB_DEFINE(4, 16) MMS__GB_DEFINE(5, 16) MMS__GB_DEFINE(6, 16)
MMS__GB_DEFINE(7, 16) MMS__GB_DEFINE(8, 16) MMS__GB_DEFINE(9, 16) MMS__GB_DEFINE(10, 16) MMS__GB_DEFINE(11, 16) MMS__GB_DEFINE(12, 16)
#undef MMS__GB_P1
#undef MMS__GB_DEFINE
#undef MMS__GB_STORE
#undef MMS__GB_STEP
#undef MMS__GB_DECL

typedef void (*mms__gemm_bf16_fn)(int64_t P, const uint32_t *A, int64_t lda, const uint32_t *B0, const uint32_t *B1, float *C, int64_t ldc,
                                  int ncols, int acc);
static const mms__gemm_bf16_fn mms__gemm_bf16_rows_avx512[13] = {
    NULL, mms__gemm_bf16_r1x32_avx512, mms__gemm_bf16_r2x32_avx512, mms__gemm_bf16_r3x32_avx512, mms__gemm_bf16_r4x32_avx512,
    mms__gemm_bf16_r5x32_avx512, mms__gemm_bf16_r6x32_avx512, mms__gemm_bf16_r7x32_avx512, mms__gemm_bf16_r8x32_avx512,
    mms__gemm_bf16_r9x32_avx512, mms__gemm_bf16_r10x32_avx512, mms__gemm_bf16_r11x32_avx512, mms__gemm_bf16_r12x32_avx512 };
static const mms__gemm_bf16_fn mms__gemm_bf16_rows16_avx512[13] = {
    NULL, mms__gemm_bf16_r1x16_avx512, mms__gemm_bf16_r2x16_avx512, mms__gemm_bf16_r3x16_avx512, mms__gemm_bf16_r4x16_avx512,
    mms__gemm_bf16_r5x16_avx512, mms__gemm_bf16_r6x16_avx512, mms__gemm_bf16_r7x16_avx512, mms__gemm_bf16_r8x16_avx512,
    mms__gemm_bf16_r9x16_avx512, mms__gemm_bf16_r10x16_avx512, mms__gemm_bf16_r11x16_avx512, mms__gemm_bf16_r12x16_avx512 };

/* out[c / 16 * stride + c % 16] = (x[c], y[c]) as a dword for c < 16 panels, zero past n (and y NULL: zero). */
static MMS__TARGET_AVX512 void mms__interleave_bf16_avx512(int64_t n, const mms_bf16_t *x, const mms_bf16_t *y, uint32_t *out,
                                                           int64_t stride, int64_t panels) {
    int64_t p;
    for (p = 0; p < panels; p++) {
        const int64_t c = p * 16, left = MMS__MAX(0, MMS__MIN(16, n - c));
        const __mmask16 m = (__mmask16)((1u << left) - 1);
        const __m256i a = _mm256_maskz_loadu_epi16(m, x + c), b = y ? _mm256_maskz_loadu_epi16(m, y + c) : _mm256_setzero_si256();
        const __m256i lo = _mm256_unpacklo_epi16(a, b), hi = _mm256_unpackhi_epi16(a, b);   /* columns 0-3 8-11, 4-7 12-15 */
        _mm256_storeu_si256((__m256i *)(out + p * stride), _mm256_permute2x128_si256(lo, hi, 0x20));
        _mm256_storeu_si256((__m256i *)(out + p * stride + 8), _mm256_permute2x128_si256(lo, hi, 0x31));
    }
}

/* y[p] = the bf16 pair (x[2p], x[2p + 1]) for p < (n + 1) / 2, rounded to nearest even (vcvtne2ps2bf16:
   as mms_fp32_to_bf16 but for subnormals, taken as zero, which vdpbf16ps does anyway), a last odd value
   paired with zero. */
static MMS__TARGET_AVX512 void mms__f32_to_bf16_pairs_avx512(int64_t n, const float *x, uint32_t *y) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        _mm512_storeu_si512(y + i / 2, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i)));
    for (; i < n; i += 2)
        y[i / 2] = (uint32_t)mms_fp32_to_bf16(x[i]) | (i + 1 < n ? (uint32_t)mms_fp32_to_bf16(x[i + 1]) << 16 : 0u);
}

/* out[r] = dot(row r of x, y) for 4 rows ldx elements apart, f32 or f16: y is loaded once for the
   4 rows, and the weights stream as 4 sequential lines at once (faster than one row at a time).
   PREFETCH(i): f16's 4 rows take a quarter line each a step, which the hardware's prefetcher does not
   follow (well below a plain read from memory); prefetching the next 4 rows' bytes in order, a line
   a step, one linear stream, keeps up with the read (docs/measurements.md, F16 decode from memory).
   f32 is left as it was. */
#define MMS__DOT4_BODY(LOAD, CVT1, PREFETCH)                                                                       \
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                                                    \
    int64_t i = 0;                                                                                                 \
    int r;                                                                                                         \
    for (; i + 8 <= n; i += 8) {                                                                                   \
        const __m256 vy = _mm256_loadu_ps(y + i);                                                                  \
        PREFETCH(i)                                                                                                \
        a0 = _mm256_fmadd_ps(LOAD(x + i), vy, a0);                                                                 \
        a1 = _mm256_fmadd_ps(LOAD(x + ldx + i), vy, a1);                                                           \
        a2 = _mm256_fmadd_ps(LOAD(x + 2 * ldx + i), vy, a2);                                                       \
        a3 = _mm256_fmadd_ps(LOAD(x + 3 * ldx + i), vy, a3);                                                       \
    }                                                                                                              \
    out[0] = mms__hsum256(a0); out[1] = mms__hsum256(a1); out[2] = mms__hsum256(a2); out[3] = mms__hsum256(a3);    \
    for (; i < n; i++) for (r = 0; r < 4; r++) out[r] += CVT1(x[r * ldx + i]) * y[i];
#define MMS__LOAD_F32(p) _mm256_loadu_ps(p)
#define MMS__LOAD_F16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define MMS__CVT_F32(v)  (v)
#define MMS__DOT4_NO_PREFETCH(i)
#define MMS__DOT4_LINEAR(i) _mm_prefetch(next + (i) * 8, _MM_HINT_T0);   /* 4 rows x 8 halves: 64 bytes a step */
static MMS__TARGET_AVX2 void mms__dot4_f32_avx2(int64_t n, const float *x, int64_t ldx, const float *y, float *out) {
    MMS__DOT4_BODY(MMS__LOAD_F32, MMS__CVT_F32, MMS__DOT4_NO_PREFETCH)
}
/* next: the bytes to prefetch (the next 4 rows, or these again where none follow) */
static MMS__TARGET_AVX2 void mms__dot4_f16_avx2(int64_t n, const mms_fp16_t *x, int64_t ldx, const float *y, float *out,
                                                const char *next) {
    MMS__DOT4_BODY(MMS__LOAD_F16, mms_fp16_to_fp32, MMS__DOT4_LINEAR)
}
#undef MMS__DOT4_LINEAR
#undef MMS__DOT4_NO_PREFETCH
/* out[c * 2 + r] = dot(row r of x, column c of y) for 2 rows ldx elements apart and 4 columns: each
   weight vector is loaded (and converted) once for the 4 columns, the decode GEMV of several
   sequences. Each (row, column) sums in the order of MMS__DOT4_BODY, so a column's results do not
   depend on how many columns run with it. */
#define MMS__DOT2X4_BODY(LOAD, CVT1)                                                                               \
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00; \
    int64_t i = 0;                                                                                                 \
    int r, c;                                                                                                      \
    for (; i + 8 <= n; i += 8) {                                                                                   \
        const __m256 w0 = LOAD(x + i), w1 = LOAD(x + ldx + i);                                                     \
        __m256 vy = _mm256_loadu_ps(y[0] + i);                                                                     \
        a00 = _mm256_fmadd_ps(w0, vy, a00); a01 = _mm256_fmadd_ps(w1, vy, a01);                                   \
        vy = _mm256_loadu_ps(y[1] + i);                                                                            \
        a10 = _mm256_fmadd_ps(w0, vy, a10); a11 = _mm256_fmadd_ps(w1, vy, a11);                                   \
        vy = _mm256_loadu_ps(y[2] + i);                                                                            \
        a20 = _mm256_fmadd_ps(w0, vy, a20); a21 = _mm256_fmadd_ps(w1, vy, a21);                                   \
        vy = _mm256_loadu_ps(y[3] + i);                                                                            \
        a30 = _mm256_fmadd_ps(w0, vy, a30); a31 = _mm256_fmadd_ps(w1, vy, a31);                                   \
    }                                                                                                              \
    out[0] = mms__hsum256(a00); out[1] = mms__hsum256(a01); out[2] = mms__hsum256(a10); out[3] = mms__hsum256(a11); \
    out[4] = mms__hsum256(a20); out[5] = mms__hsum256(a21); out[6] = mms__hsum256(a30); out[7] = mms__hsum256(a31); \
    for (; i < n; i++) for (c = 0; c < 4; c++) for (r = 0; r < 2; r++) out[c * 2 + r] += CVT1(x[r * ldx + i]) * y[c][i];
static MMS__TARGET_AVX2 void mms__dot2x4_f32_avx2(int64_t n, const float *x, int64_t ldx, const float *const *y, float *out) {
    MMS__DOT2X4_BODY(MMS__LOAD_F32, MMS__CVT_F32)
}
static MMS__TARGET_AVX2 void mms__dot2x4_f16_avx2(int64_t n, const mms_fp16_t *x, int64_t ldx, const float *const *y, float *out) {
    MMS__DOT2X4_BODY(MMS__LOAD_F16, mms_fp16_to_fp32)
}
#undef MMS__DOT2X4_BODY
#undef MMS__DOT4_BODY
#undef MMS__LOAD_F32
#undef MMS__LOAD_F16
#undef MMS__CVT_F32

/* The AVX-512 decode GEMV of 1 to 8 columns (the sequences of a batch), f16 or f32 weights: every
   (row, column) sums 16 lanes, lane l over k = l, l + 16, ... in order, then the lanes
   (_mm512_reduce_add_ps) and the K % 16 elements left one by one, the same way whatever the
   columns beside it, so a sequence gets the same bits in a batch as alone. R rows of weights are
   loaded and converted once for all the columns: 4 rows for up to 4 columns (4 streams keep the
   memory busy where 2 do not), 2 rows past that (2 conversions feed up to 16 FMAs,
   within the 32 registers). Past 2 columns K is walked in chunks of MMS__GV_KC so that the
   columns' chunk (8 x 1 KB) stays in L1 while the rows of a block of MMS__GV_RB stream past, the
   lanes' sums kept in acc between chunks (storing them does not change their order); each row's
   next chunk is prefetched as its current one is read. The chunk size and the prefetch distances
   below are the best measured (docs/measurements.md, the AVX-512 decode GEMV). Up to 2 columns each
   row is walked whole: f32 prefetching each row MMS__GV_PF bytes ahead, f16 the tile's next R rows'
   bytes in order, as fast as these are read: f16 takes half a line of each of the R rows a step,
   which neither the hardware's prefetcher nor a prefetch down each row kept up with, whatever the
   distance; one linear stream does (docs/measurements.md, F16 decode from memory). */
MMS__AVX512_CODE_BEGIN
#define MMS__GV_RB 16
#define MMS__GV_KC 256
#define MMS__GV_PF 2048
#define MMS__GV_LOAD_F32(p) _mm512_loadu_ps(p)
#define MMS__GV_LOAD_F16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define MMS__GV_KEEP(v) MMS__KEEP_IN_REG(v)   /* one load of a column for all R rows, in a register: the
                                                   compiler would fold a load into each FMA (slower) */
#define MMS__GV_DECL2(c)  __m512 s##c##0 = _mm512_loadu_ps(acc + 32 * c), s##c##1 = _mm512_loadu_ps(acc + 32 * c + 16);
#define MMS__GV_STEP2(c)  { __m512 vy = _mm512_loadu_ps(y[c] + i); MMS__GV_KEEP(vy);                                            \
                            s##c##0 = _mm512_fmadd_ps(w0, vy, s##c##0); s##c##1 = _mm512_fmadd_ps(w1, vy, s##c##1); }
#define MMS__GV_STORE2(c) _mm512_storeu_ps(acc + 32 * c, s##c##0); _mm512_storeu_ps(acc + 32 * c + 16, s##c##1);
#define MMS__GV_DECL4(c)  __m512 s##c##0 = _mm512_loadu_ps(acc + 64 * c), s##c##1 = _mm512_loadu_ps(acc + 64 * c + 16), \
                                 s##c##2 = _mm512_loadu_ps(acc + 64 * c + 32), s##c##3 = _mm512_loadu_ps(acc + 64 * c + 48);
#define MMS__GV_STEP4(c)  { __m512 vy = _mm512_loadu_ps(y[c] + i); MMS__GV_KEEP(vy);                                            \
                            s##c##0 = _mm512_fmadd_ps(w0, vy, s##c##0); s##c##1 = _mm512_fmadd_ps(w1, vy, s##c##1); \
                            s##c##2 = _mm512_fmadd_ps(w2, vy, s##c##2); s##c##3 = _mm512_fmadd_ps(w3, vy, s##c##3); }
#define MMS__GV_STORE4(c) _mm512_storeu_ps(acc + 64 * c, s##c##0); _mm512_storeu_ps(acc + 64 * c + 16, s##c##1);   \
                          _mm512_storeu_ps(acc + 64 * c + 32, s##c##2); _mm512_storeu_ps(acc + 64 * c + 48, s##c##3);
#define MMS__GV_W2(LOAD) const __m512 w0 = LOAD(x[0] + i), w1 = LOAD(x[1] + i);
#define MMS__GV_W4(LOAD) const __m512 w0 = LOAD(x[0] + i), w1 = LOAD(x[1] + i), w2 = LOAD(x[2] + i), w3 = LOAD(x[3] + i);
/* Prefetching, chosen when the kernel is made (a test in the loop slows f32 from memory):
   MMS__GV_ROW_AHEAD each row MMS__GV_PF bytes ahead, MMS__GV_CHUNK_AHEAD each row's next chunk,
   MMS__GV_LINEAR the bytes at next in order, as many a step as the step reads (R * 16 elements: 1,
   2 or 4 lines), one linear stream */
#define MMS__GV_NEXT(r, pf) _mm_prefetch((const char *)(x[r] + i + (pf)), _MM_HINT_T1);
#define MMS__GV_AHEAD2(pf) MMS__GV_NEXT(0, pf) MMS__GV_NEXT(1, pf)
#define MMS__GV_AHEAD4(pf) MMS__GV_NEXT(0, pf) MMS__GV_NEXT(1, pf) MMS__GV_NEXT(2, pf) MMS__GV_NEXT(3, pf)
#define MMS__GV_ROW_AHEAD(R, T) MMS__GV_AHEAD##R(MMS__GV_PF / (int64_t)sizeof(T))
#define MMS__GV_CHUNK_AHEAD(R, T) MMS__GV_AHEAD##R(MMS__GV_KC)
#define MMS__GV_LINEAR(R, T) { const char *np = next + (i - k0) * R * (int64_t)sizeof(T);                        \
                               _mm_prefetch(np, _MM_HINT_T0);                                                      \
                               if (R * sizeof(T) >= 8) _mm_prefetch(np + 64, _MM_HINT_T0);                          \
                               if (R * sizeof(T) >= 16) { _mm_prefetch(np + 128, _MM_HINT_T0); _mm_prefetch(np + 192, _MM_HINT_T0); } }
/* acc[(c * R + r) * 16 + l] += lane l of row r (at xv[r]) times column c, over k in [k0, k1), prefetching
   by PREFETCH */
#define MMS__GV_DEFINE(R, C, NAME, T, LOAD, PREFETCH)                                                               \
    static MMS__TARGET_AVX512 void mms__gv_##R##x##C##_##NAME(int64_t k0, int64_t k1, const char *next,              \
                                                              const void *const *xv, const float *const *y, float *acc) { \
        const T *x[R];                                                                                             \
        int64_t i;                                                                                                 \
        MMS__UNUSED(next);   /* MMS__GV_LINEAR's */                                                                 \
        for (i = 0; i < R; i++) x[i] = (const T *)xv[i];                                                           \
        {                                                                                                          \
            MMS__GR_ROWS##C(MMS__GV_DECL##R)                                                                       \
            for (i = k0; i < k1; i += 16) {                                                                        \
                MMS__GV_W##R(LOAD)                                                                                 \
                PREFETCH(R, T)                                                                                     \
                MMS__GR_ROWS##C(MMS__GV_STEP##R)                                                                   \
            }                                                                                                      \
            MMS__GR_ROWS##C(MMS__GV_STORE##R)                                                                      \
        }                                                                                                          \
    }
/* whole rows (up to 2 columns): WHOLE's prefetching; in chunks: each row's next chunk */
#define MMS__GV_DEFINE_ALL(NAME, T, LOAD, WHOLE)                                                                   \
    MMS__GV_DEFINE(4, 1, NAME, T, LOAD, WHOLE) MMS__GV_DEFINE(4, 2, NAME, T, LOAD, WHOLE)                           \
    MMS__GV_DEFINE(4, 3, NAME, T, LOAD, MMS__GV_CHUNK_AHEAD) MMS__GV_DEFINE(4, 4, NAME, T, LOAD, MMS__GV_CHUNK_AHEAD) \
    MMS__GV_DEFINE(2, 5, NAME, T, LOAD, MMS__GV_CHUNK_AHEAD) MMS__GV_DEFINE(2, 6, NAME, T, LOAD, MMS__GV_CHUNK_AHEAD) \
    MMS__GV_DEFINE(2, 7, NAME, T, LOAD, MMS__GV_CHUNK_AHEAD) MMS__GV_DEFINE(2, 8, NAME, T, LOAD, MMS__GV_CHUNK_AHEAD) \
    static void (*const mms__gv_##NAME[9])(int64_t, int64_t, const char *, const void *const *, const float *const *,   \
                                           float *) = {                                                            \
        NULL, mms__gv_4x1_##NAME, mms__gv_4x2_##NAME, mms__gv_4x3_##NAME, mms__gv_4x4_##NAME,                      \
        mms__gv_2x5_##NAME, mms__gv_2x6_##NAME, mms__gv_2x7_##NAME, mms__gv_2x8_##NAME };
MMS__GV_DEFINE_ALL(f16, mms_fp16_t, MMS__GV_LOAD_F16, MMS__GV_LINEAR)
MMS__GV_DEFINE_ALL(f32, float, MMS__GV_LOAD_F32, MMS__GV_ROW_AHEAD)
#undef MMS__GV_DEFINE_ALL
#undef MMS__GV_DEFINE
#undef MMS__GV_W4
#undef MMS__GV_W2
#undef MMS__GV_LINEAR
#undef MMS__GV_CHUNK_AHEAD
#undef MMS__GV_ROW_AHEAD
#undef MMS__GV_AHEAD4
#undef MMS__GV_AHEAD2
#undef MMS__GV_NEXT
#undef MMS__GV_STORE4
#undef MMS__GV_STEP4
#undef MMS__GV_DECL4
#undef MMS__GV_STORE2
#undef MMS__GV_STEP2
#undef MMS__GV_DECL2
#undef MMS__GV_KEEP
#undef MMS__GV_LOAD_F16
#undef MMS__GV_LOAD_F32

/* out[c * ldo + i] = dot(row i of x, column c of y) for i < mr rows ldx elements apart, c < nr <= 8 */
static MMS__TARGET_AVX512 void mms__gemv_cols_avx512(bool f16, int64_t K, const void *x, int64_t ldx, int64_t mr,
                                                     const float *const *y, int64_t nr, float *out, int64_t ldo) {
    void (*const rows_x_cols)(int64_t, int64_t, const char *, const void *const *, const float *const *, float *) =
        f16 ? mms__gv_f16[nr] : mms__gv_f32[nr];
    const int64_t R = nr <= 4 ? 4 : 2;
    const size_t es = f16 ? sizeof(mms_fp16_t) : sizeof(float);
    const bool whole_rows = nr <= 2;   /* else in chunks */
    const int64_t K16 = K / 16 * 16, kc = whole_rows ? MMS__MAX(K16, 16) : MMS__GV_KC;
    float acc[MMS__GV_RB * 8 * 16];   /* per group of R rows: [column][row][lane] */
    const void *xr[4];
    int64_t i0, i, r, k0, c, k;
    for (i0 = 0; i0 < mr; i0 += MMS__GV_RB) {
        const int64_t rb = MMS__MIN(MMS__GV_RB, mr - i0);
        const char *x0 = (const char *)x + (size_t)(i0 * ldx) * es;
        memset(acc, 0, (size_t)((rb + R - 1) / R * R * nr * 16) * sizeof(float));
        for (k0 = 0; k0 < K16; k0 += kc)
            for (i = 0; i < rb; i += R) {
                const int64_t next = i0 + i + R < mr ? i + R : i;   /* the tile's next R rows (the last: these,
                                                                         already on their way) for f16's linear prefetch */
                for (r = 0; r < R; r++) xr[r] = x0 + (size_t)(MMS__MIN(i + r, rb - 1) * ldx) * es;   /* past the
                                                                                   last row: it again, unused */
                rows_x_cols(k0, MMS__MIN(k0 + kc, K16), x0 + (size_t)(next * ldx) * es, xr, y, acc + i * nr * 16);
            }
        for (i = 0; i < rb; i++) {
            const char *row = x0 + (size_t)(i * ldx) * es;
            for (c = 0; c < nr; c++) {
                float s = _mm512_reduce_add_ps(_mm512_loadu_ps(acc + ((i / R * nr + c) * R + i % R) * 16));
                for (k = K16; k < K; k++)
                    s += (f16 ? mms_fp16_to_fp32(((const mms_fp16_t *)row)[k]) : ((const float *)row)[k]) * y[c][k];
                out[c * ldo + i0 + i] = s;
            }
        }
    }
}
MMS__AVX512_CODE_END

static MMS__TARGET_AVX2 float mms__dot_f16_f32_avx2(int64_t n, const mms_fp16_t *x, const float *y) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int64_t i = 0;
    float s;
#define MMS__H8(o) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i + (o))))
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(MMS__H8(0), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(MMS__H8(8), _mm256_loadu_ps(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(MMS__H8(16), _mm256_loadu_ps(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(MMS__H8(24), _mm256_loadu_ps(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(MMS__H8(0), _mm256_loadu_ps(y + i), a0);
#undef MMS__H8
    s = mms__hsum256(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++) s += mms_fp16_to_fp32(x[i]) * y[i];
    return s;
}

/* 8x8 transpose of f32 from rows of src (stride lds) into rows of dst (stride ldd) */
static MMS__TARGET_AVX2 void mms__transpose8_avx2(const float *src, int64_t lds, float *dst, int64_t ldd) {
    __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + lds), r2 = _mm256_loadu_ps(src + 2 * lds),
           r3 = _mm256_loadu_ps(src + 3 * lds), r4 = _mm256_loadu_ps(src + 4 * lds), r5 = _mm256_loadu_ps(src + 5 * lds),
           r6 = _mm256_loadu_ps(src + 6 * lds), r7 = _mm256_loadu_ps(src + 7 * lds);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
           t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
           t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    r0 = _mm256_shuffle_ps(t0, t2, 0x44); r1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    r2 = _mm256_shuffle_ps(t1, t3, 0x44); r3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    r4 = _mm256_shuffle_ps(t4, t6, 0x44); r5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    r6 = _mm256_shuffle_ps(t5, t7, 0x44); r7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(dst,           _mm256_permute2f128_ps(r0, r4, 0x20));
    _mm256_storeu_ps(dst + ldd,     _mm256_permute2f128_ps(r1, r5, 0x20));
    _mm256_storeu_ps(dst + 2 * ldd, _mm256_permute2f128_ps(r2, r6, 0x20));
    _mm256_storeu_ps(dst + 3 * ldd, _mm256_permute2f128_ps(r3, r7, 0x20));
    _mm256_storeu_ps(dst + 4 * ldd, _mm256_permute2f128_ps(r0, r4, 0x31));
    _mm256_storeu_ps(dst + 5 * ldd, _mm256_permute2f128_ps(r1, r5, 0x31));
    _mm256_storeu_ps(dst + 6 * ldd, _mm256_permute2f128_ps(r2, r6, 0x31));
    _mm256_storeu_ps(dst + 7 * ldd, _mm256_permute2f128_ps(r3, r7, 0x31));
}
#endif

#if MMS__HAVE_NEON
/* The GEMM register block on 4-lane vectors: R rows of 16 columns are 4R accumulators (24 of the
   32 registers at R = 6), fed per k by 4 loads of B and R scalars of A. */
#define MMS__GRN_DECL(r)  float32x4_t c##r##0 = vdupq_n_f32(0.0f), c##r##1 = c##r##0, c##r##2 = c##r##0, c##r##3 = c##r##0;
#define MMS__GRN_STEP(r)  { const float a = A[r * lda + k];                                                      \
                            c##r##0 = vfmaq_n_f32(c##r##0, b0, a); c##r##1 = vfmaq_n_f32(c##r##1, b1, a);          \
                            c##r##2 = vfmaq_n_f32(c##r##2, b2, a); c##r##3 = vfmaq_n_f32(c##r##3, b3, a); }
#define MMS__GRN_STORE(r) if (acc) { c##r##0 = vaddq_f32(c##r##0, vld1q_f32(C + r * ldc));                          \
                                     c##r##1 = vaddq_f32(c##r##1, vld1q_f32(C + r * ldc + 4));                      \
                                     c##r##2 = vaddq_f32(c##r##2, vld1q_f32(C + r * ldc + 8));                      \
                                     c##r##3 = vaddq_f32(c##r##3, vld1q_f32(C + r * ldc + 12)); }                   \
                          vst1q_f32(C + r * ldc, c##r##0); vst1q_f32(C + r * ldc + 4, c##r##1);                     \
                          vst1q_f32(C + r * ldc + 8, c##r##2); vst1q_f32(C + r * ldc + 12, c##r##3);
#define MMS__GRN_DEFINE(R)                                                                                          \
    static void mms__gemm_r##R##x16_neon(int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,       \
                                         float *C, int64_t ldc, int acc) {                                         \
        int64_t k;                                                                                                  \
        MMS__GR_ROWS##R(MMS__GRN_DECL)                                                                              \
        for (k = 0; k < K; k++) {                                                                                   \
            const float *bk = B + k * ldb;                                                                          \
            const float32x4_t b0 = vld1q_f32(bk), b1 = vld1q_f32(bk + 4), b2 = vld1q_f32(bk + 8), b3 = vld1q_f32(bk + 12); \
            MMS__GR_ROWS##R(MMS__GRN_STEP)                                                                          \
        }                                                                                                           \
        MMS__GR_ROWS##R(MMS__GRN_STORE)                                                                             \
    }
MMS__GRN_DEFINE(1) MMS__GRN_DEFINE(2) MMS__GRN_DEFINE(3) MMS__GRN_DEFINE(4) MMS__GRN_DEFINE(5) MMS__GRN_DEFINE(6)

static void (*const mms__gemm_rows_neon[7])(int64_t, const float *, int64_t, const float *, int64_t, float *, int64_t, int) = {
    NULL, mms__gemm_r1x16_neon, mms__gemm_r2x16_neon, mms__gemm_r3x16_neon, mms__gemm_r4x16_neon, mms__gemm_r5x16_neon, mms__gemm_r6x16_neon };

/* 4 rows of weights (f32 or f16) against one column, as the AVX2 dot4 */
#define MMS__DOT4N_BODY(LOAD, CVT1)                                                                                \
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;                                                 \
    int64_t i = 0;                                                                                                 \
    int r;                                                                                                         \
    for (; i + 4 <= n; i += 4) {                                                                                   \
        const float32x4_t vy = vld1q_f32(y + i);                                                                   \
        a0 = vfmaq_f32(a0, LOAD(x + i), vy);                                                                       \
        a1 = vfmaq_f32(a1, LOAD(x + ldx + i), vy);                                                                 \
        a2 = vfmaq_f32(a2, LOAD(x + 2 * ldx + i), vy);                                                             \
        a3 = vfmaq_f32(a3, LOAD(x + 3 * ldx + i), vy);                                                             \
    }                                                                                                              \
    out[0] = vaddvq_f32(a0); out[1] = vaddvq_f32(a1); out[2] = vaddvq_f32(a2); out[3] = vaddvq_f32(a3);            \
    for (; i < n; i++) for (r = 0; r < 4; r++) out[r] += CVT1(x[r * ldx + i]) * y[i];
static void mms__dot4_f32_neon(int64_t n, const float *x, int64_t ldx, const float *y, float *out) {
    MMS__DOT4N_BODY(vld1q_f32, (float))
}
static void mms__dot4_f16_neon(int64_t n, const mms_fp16_t *x, int64_t ldx, const float *y, float *out) {
    MMS__DOT4N_BODY(mms__load_f16x4, mms_fp16_to_fp32)
}
#undef MMS__DOT4N_BODY

static float mms__dot_f16_f32_neon(int64_t n, const mms_fp16_t *x, const float *y) {
    MMS__DOTN_BODY(mms__load_f16x4, mms_fp16_to_fp32)
}
#undef MMS__DOTN_BODY

/* 4x4 transpose: trn pairs rows, the halves then combine */
static void mms__transpose4_neon(const float *src, int64_t lds, float *dst, int64_t ldd) {
    const float32x4x2_t t01 = vtrnq_f32(vld1q_f32(src), vld1q_f32(src + lds));
    const float32x4x2_t t23 = vtrnq_f32(vld1q_f32(src + 2 * lds), vld1q_f32(src + 3 * lds));
    vst1q_f32(dst,           vcombine_f32(vget_low_f32(t01.val[0]), vget_low_f32(t23.val[0])));
    vst1q_f32(dst + ldd,     vcombine_f32(vget_low_f32(t01.val[1]), vget_low_f32(t23.val[1])));
    vst1q_f32(dst + 2 * ldd, vcombine_f32(vget_high_f32(t01.val[0]), vget_high_f32(t23.val[0])));
    vst1q_f32(dst + 3 * ldd, vcombine_f32(vget_high_f32(t01.val[1]), vget_high_f32(t23.val[1])));
}
#endif

/* -- dispatching names of the above -- */

typedef void (*mms__gemm_rows_fn)(int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, int acc);

/* The SIMD GEMM around a register block of 1..6 rows x 16 columns (rows[R]). */
MMS__MAYBE_UNUSED static void mms__gemm_panels(const mms__gemm_rows_fn *rows, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                             const float *B, int64_t ldb, int64_t bpanel, float *C, int64_t ldc, int acc) {
    float tmp[6 * 16];
    int64_t i, j, r, c;
    for (j = 0; j < N; j += 16) {        /* a 16-column panel of B stays in cache across the row blocks */
        const float *bp = B + j / 16 * bpanel;
        const int64_t nc = MMS__MIN(16, N - j);
        for (i = 0; i < M; i += 6) {
            const int64_t nr = MMS__MIN(6, M - i);
            if (nc == 16) { rows[nr](K, A + i * lda, lda, bp, ldb, C + i * ldc + j, ldc, acc); continue; }
            for (r = 0; r < nr; r++)     /* a last partial panel goes through a full-width block */
                for (c = 0; c < 16; c++) tmp[r * 16 + c] = acc && c < nc ? C[(i + r) * ldc + j + c] : 0.0f;
            rows[nr](K, A + i * lda, lda, bp, ldb, tmp, 16, acc);
            for (r = 0; r < nr; r++) memcpy(C + (i + r) * ldc + j, tmp + r * 16, (size_t)nc * sizeof(float));
        }
    }
}

/* C[M x N] (+ if acc)= A[M x K] B[K x N], row-major with leading dimensions. B comes in panels of
   16 columns, panel p at B + p bpanel (16 for a plain row-major B, 16 ldb for packed panels), and
   must be readable (padded) up to a whole panel; C is written only in its N columns. */
static void mms__gemm_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                          int64_t bpanel, float *C, int64_t ldc, int acc) {
    int64_t i, j, k;
#if MMS__HAVE_AVX2
    if (mms__avx512()) {   /* pairs of whole panels by the 32-column block, a last whole panel by the
                              16-column one, a part of a panel by AVX2's */
        for (j = 0; j + 32 <= N; j += 32)
            for (i = 0; i < M; i += 12)
                mms__gemm_rows_avx512[MMS__MIN(12, M - i)](K, A + i * lda, lda, B + j / 16 * bpanel, B + (j / 16 + 1) * bpanel, ldb,
                                                           C + i * ldc + j, ldc, acc);
        if (j + 16 <= N) {
            for (i = 0; i < M; i += 12)
                mms__gemm_rows16_avx512[MMS__MIN(12, M - i)](K, A + i * lda, lda, B + j / 16 * bpanel, ldb, C + i * ldc + j, ldc, acc);
            j += 16;
        }
        if (j < N) mms__gemm_panels(mms__gemm_rows_avx2, M, N - j, K, A, lda, B + j / 16 * bpanel, ldb, bpanel, C + j, ldc, acc);
        return;
    }
    if (mms__avx2()) { mms__gemm_panels(mms__gemm_rows_avx2, M, N, K, A, lda, B, ldb, bpanel, C, ldc, acc); return; }
#endif
#if MMS__HAVE_NEON
    if (mms__neon()) { mms__gemm_panels(mms__gemm_rows_neon, M, N, K, A, lda, B, ldb, bpanel, C, ldc, acc); return; }
#endif
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            const float *b = B + j / 16 * bpanel + j % 16;
            float s = 0.0f;
            for (k = 0; k < K; k++) s += A[i * lda + k] * b[k * ldb];
            C[i * ldc + j] = acc ? C[i * ldc + j] + s : s;
        }
}

/* BF16 products on the sets with vdpbf16ps (AVX-512 BF16): C[M x N] = A[M x K] B[K x N] with A's
   rows and B in bf16 pairs as mms__gemm_bf16_r*x32 takes them, K = 2P; B in panels of 16 columns
   bpanel dwords apart, readable (zero-padded) up to a whole pair of panels; C (+ if acc) written in
   its N columns only. mms__vec_bf16_pairs rounds f32 rows for it. */
#define MMS__GEMM_BF16_PC 128
static bool mms__vec_has_gemm_bf16(void) { return mms__avx512(); }
static void mms__vec_bf16_pairs(int64_t n, const float *x, uint32_t *y) {
#if MMS__HAVE_AVX2
    if (mms__avx512()) { mms__f32_to_bf16_pairs_avx512(n, x, y); return; }
#endif
    MMS__UNUSED(n); MMS__UNUSED(x); MMS__UNUSED(y);
    mms__abort(__FILE__, __LINE__, "mms__vec_bf16_pairs without its kernels");
}
static void mms__gemm_bf16(int64_t M, int64_t N, int64_t P, const uint32_t *A, int64_t lda, const uint32_t *B, int64_t bpanel,
                           float *C, int64_t ldc, int acc) {
#if MMS__HAVE_AVX2
    if (mms__avx512()) {   /* K in chunks whose 32 columns of B (16 KB) stay in L1 across the row blocks */
        int64_t i, j, p0;
        for (p0 = 0; p0 < P; p0 += MMS__GEMM_BF16_PC)
            for (j = 0; j < N; j += 32)
                for (i = 0; i < M; i += 12)
                    (N - j > 16 ? mms__gemm_bf16_rows_avx512 : mms__gemm_bf16_rows16_avx512)[MMS__MIN(12, M - i)](
                        MMS__MIN(MMS__GEMM_BF16_PC, P - p0), A + i * lda + p0, lda, B + j / 16 * bpanel + p0 * 16,
                        B + (j / 16 + 1) * bpanel + p0 * 16, C + i * ldc + j, ldc, (int)MMS__MIN(32, N - j), acc || p0 > 0);
        return;
    }
#endif
    MMS__UNUSED(M); MMS__UNUSED(N); MMS__UNUSED(P); MMS__UNUSED(A); MMS__UNUSED(lda); MMS__UNUSED(B); MMS__UNUSED(bpanel);
    MMS__UNUSED(C); MMS__UNUSED(ldc); MMS__UNUSED(acc);
    mms__abort(__FILE__, __LINE__, "mms__gemm_bf16 without its kernels");
}

/* out[r] = dot(row r of x, y) for 4 rows ldx elements apart, x f32 or f16 (f16 set), and the same
   for one row: the decode GEMV straight from the weights. SIMD sets only (mms__simd). next (f16; NULL
   for f32): the rows that come after these, or these again where none do, for the prefetcher. */
static void mms__vec_dot4_rows(bool f16, int64_t n, const void *x, int64_t ldx, const float *y, float *out, const void *next) {
    MMS__UNUSED(next);
#if MMS__HAVE_AVX2
    if (mms__avx2()) {
        if (f16) mms__dot4_f16_avx2(n, (const mms_fp16_t *)x, ldx, y, out, (const char *)next);
        else     mms__dot4_f32_avx2(n, (const float *)x, ldx, y, out);
        return;
    }
#endif
#if MMS__HAVE_NEON
    if (mms__neon()) {
        if (f16) mms__dot4_f16_neon(n, (const mms_fp16_t *)x, ldx, y, out);
        else     mms__dot4_f32_neon(n, (const float *)x, ldx, y, out);
        return;
    }
#endif
    MMS__UNUSED(f16); MMS__UNUSED(n); MMS__UNUSED(x); MMS__UNUSED(ldx); MMS__UNUSED(y); MMS__UNUSED(out);
    mms__abort(__FILE__, __LINE__, "mms__vec_dot4_rows without SIMD kernels");
}
/* The 2-row x 4-column form of mms__vec_dot4_rows (out[c * 2 + r]), for the sets that have it. */
static bool mms__vec_has_dot2x4(void) {
#if MMS__HAVE_AVX2
    if (mms__avx2()) return true;
#endif
    return false;
}
static void mms__vec_dot2x4(bool f16, int64_t n, const void *x, int64_t ldx, const float *const *y, float *out) {
#if MMS__HAVE_AVX2
    if (mms__avx2()) {
        if (f16) mms__dot2x4_f16_avx2(n, (const mms_fp16_t *)x, ldx, y, out);
        else     mms__dot2x4_f32_avx2(n, (const float *)x, ldx, y, out);
        return;
    }
#endif
    MMS__UNUSED(f16); MMS__UNUSED(n); MMS__UNUSED(x); MMS__UNUSED(ldx); MMS__UNUSED(y); MMS__UNUSED(out);
    mms__abort(__FILE__, __LINE__, "mms__vec_dot2x4 without its kernels");
}
/* The decode GEMV of a tile, mr rows of x (ldx elements apart) against nr <= 8 columns, as one call
   (out[c * ldo + i]) for the sets that have one; false: the caller goes through the forms above. */
static bool mms__vec_gemv_cols(bool f16, int64_t K, const void *x, int64_t ldx, int64_t mr, const float *const *y, int64_t nr,
                               float *out, int64_t ldo) {
#if MMS__HAVE_AVX2
    if (mms__avx512() && nr >= 1 && nr <= 8) { mms__gemv_cols_avx512(f16, K, x, ldx, mr, y, nr, out, ldo); return true; }
#endif
    MMS__UNUSED(f16); MMS__UNUSED(K); MMS__UNUSED(x); MMS__UNUSED(ldx); MMS__UNUSED(mr); MMS__UNUSED(y); MMS__UNUSED(nr);
    MMS__UNUSED(out); MMS__UNUSED(ldo);
    return false;
}
static float mms__vec_dot_row(bool f16, int64_t n, const void *x, const float *y) {
#if MMS__HAVE_AVX2
    if (mms__avx2() && f16) return mms__dot_f16_f32_avx2(n, (const mms_fp16_t *)x, y);
#endif
#if MMS__HAVE_NEON
    if (mms__neon() && f16) return mms__dot_f16_f32_neon(n, (const mms_fp16_t *)x, y);
#endif
    MMS__CHECK(!f16);
    return mms__vec_dot_f32(n, (const float *)x, y);
}

/* dst[c][r] = src[r][c] for r < R, c < Cn, in SIMD blocks of b x b where there are some */
static void mms__transpose_f32(int64_t R, int64_t Cn, const float *src, int64_t lds, float *dst, int64_t ldd) {
    void (*block)(const float *, int64_t, float *, int64_t) = NULL;
    int64_t r = 0, c, b = 0, i;
#if MMS__HAVE_AVX2
    if (mms__avx2()) { block = mms__transpose8_avx2; b = 8; }
#endif
#if MMS__HAVE_NEON
    if (mms__neon()) { block = mms__transpose4_neon; b = 4; }
#endif
    for (; block && r + b <= R; r += b) {
        for (c = 0; c + b <= Cn; c += b) block(src + r * lds + c, lds, dst + c * ldd + r, ldd);
        for (; c < Cn; c++) for (i = 0; i < b; i++) dst[c * ldd + r + i] = src[(r + i) * lds + c];
    }
    for (; r < R; r++)
        for (c = 0; c < Cn; c++) dst[c * ldd + r] = src[r * lds + c];
}
