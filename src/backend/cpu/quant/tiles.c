/* >>cpu-quant-tiles ================================================================================
   The layouts of 8 weight rows side by side (one block of each row, permuted; CPU_REPACK buffers
   keep weights this way, repack.c) with their portable and AVX2 packs (and Q6_K's values as bytes,
   the layout AVX2's prompt kernel reads), then the kernels that read them: 8 rows against 4
   columns (prompts; AVX2, and AVX-512 with VNNI from the same bodies), AVX-512's 16 rows in one
   register, and one column against groups side by side (decode on repacked weights). */

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

/* 8 rows of Q4_K side by side, one super-block (see mms__gemm_q4_kx8_avx2): the f16 scales; sc[s][r]
   and mn[s][r]: sub-block s's 6-bit scale and min of row r as bytes (the file packs them in 12
   bytes a row; as bytes a sub-block's 8 rows widen in one instruction); qs[8j + k][r]: bytes
   4k..4k + 3 of row r's nibble chunk j (low nibbles: sub-block 2j, high: 2j + 1). 1184 bytes for
   the 8 rows' 1152. */
struct mms__q4_kx8 { mms_fp16_t d[8], dmin[8]; uint8_t sc[8][8], mn[8][8]; uint32_t qs[32][8]; };

/* 8 rows of Q5_K side by side, one super-block: Q4_K's layout of the scales, mins and low nibbles,
   then qh[k][r]: dword k of row r's 32 bytes of fifth bits (bit s of byte l: value l of sub-block
   s, so dword k holds those of nibble dword 8j + k of every chunk j). 1440 bytes for the 8 rows'
   1408. */
struct mms__q5_kx8 { struct mms__q4_kx8 k; uint32_t qh[8][8]; };

/* The layout of Q4_K's affine super-blocks (Q4_K, Q5_K): a block of `size` bytes starts with d,
   dmin and the 12 scale bytes, its nibbles at qs_at, Q5_K's fifth bits at qh_at (0: none); a
   packed block of the 8 rows takes `packed` bytes, struct mms__q4_kx8 first, then the qh dwords. */
struct mms__k_affine { size_t size, qs_at, qh_at, packed; };
static const struct mms__k_affine mms__q4_k_affine = { sizeof(struct mms__block_q4_k), offsetof(struct mms__block_q4_k, qs), 0, sizeof(struct mms__q4_kx8) };
static const struct mms__k_affine mms__q5_k_affine = { sizeof(struct mms__block_q5_k), offsetof(struct mms__block_q5_k, qs),
                                                       offsetof(struct mms__block_q5_k, qh), sizeof(struct mms__q5_kx8) };

/* Rows rows[0..n) (n <= 8; the others zero) of K values into K / 256 packed blocks. */
static void mms__pack_k_affine_x8_rows(const struct mms__k_affine *f, const void *const *rows, int n, int64_t K, void *dstv) {
    int64_t b;
    int r, s, k;
    for (b = 0; b < K / MMS__QK_K; b++) {
        struct mms__q4_kx8 *dst = (struct mms__q4_kx8 *)((char *)dstv + (size_t)b * f->packed);
        uint32_t (*qh)[8] = f->qh_at ? ((struct mms__q5_kx8 *)dst)->qh : NULL;
        for (r = 0; r < 8; r++) {
            const uint8_t *src = r < n ? (const uint8_t *)rows[r] + (size_t)b * f->size : NULL;
            const struct mms__block_q4_k *head = (const struct mms__block_q4_k *)src;   /* d, dmin, scales: the same in Q5_K */
            dst->d[r] = src ? head->d : 0;
            dst->dmin[r] = src ? head->dmin : 0;
            for (s = 0; s < 8; s++) {
                int sc = 0, mn = 0;
                if (src) mms__q4_k_scale_min(s, head->scales, &sc, &mn);
                dst->sc[s][r] = (uint8_t)sc;
                dst->mn[s][r] = (uint8_t)mn;
            }
            for (k = 0; k < 32; k++) {
                if (src) memcpy(&dst->qs[k][r], src + f->qs_at + 4 * k, 4);
                else dst->qs[k][r] = 0;
            }
            for (k = 0; qh && k < 8; k++) {
                if (src) memcpy(&qh[k][r], src + f->qh_at + 4 * k, 4);
                else qh[k][r] = 0;
            }
        }
    }
}

/* The inverse for 8 rows, the 12 bytes of scales packed back as the file has them (every bit of
   them is a scale's or a min's, so this gives the bytes back exactly). */
static void mms__unpack_k_affine_x8_rows(const struct mms__k_affine *f, const void *srcv, int64_t K, void *const *rows) {
    int64_t b;
    int r, s, k;
    for (b = 0; b < K / MMS__QK_K; b++) {
        const struct mms__q4_kx8 *src = (const struct mms__q4_kx8 *)((const char *)srcv + (size_t)b * f->packed);
        const uint32_t (*qh)[8] = f->qh_at ? ((const struct mms__q5_kx8 *)src)->qh : NULL;
        for (r = 0; r < 8; r++) {
            uint8_t *to = (uint8_t *)rows[r] + (size_t)b * f->size;
            struct mms__block_q4_k *dst = (struct mms__block_q4_k *)to;
            uint8_t *q = dst->scales;
            dst->d = src->d[r];
            dst->dmin = src->dmin[r];
            for (s = 0; s < 4; s++) {
                const int sc_hi = src->sc[s + 4][r], mn_hi = src->mn[s + 4][r];
                q[s] = (uint8_t)(src->sc[s][r] | (sc_hi >> 4) << 6);
                q[s + 4] = (uint8_t)(src->mn[s][r] | (mn_hi >> 4) << 6);
                q[s + 8] = (uint8_t)((sc_hi & 0x0f) | (mn_hi & 0x0f) << 4);
            }
            for (k = 0; k < 32; k++) memcpy(to + f->qs_at + 4 * k, &src->qs[k][r], 4);
            for (k = 0; qh && k < 8; k++) memcpy(to + f->qh_at + 4 * k, &qh[k][r], 4);
        }
    }
}

static void mms__pack_q4_kx8_rows(const void *const *rows, int n, int64_t K, void *dst) { mms__pack_k_affine_x8_rows(&mms__q4_k_affine, rows, n, K, dst); }
static void mms__unpack_q4_kx8_rows(const void *src, int64_t K, void *const *rows) { mms__unpack_k_affine_x8_rows(&mms__q4_k_affine, src, K, rows); }
static void mms__pack_q5_kx8_rows(const void *const *rows, int n, int64_t K, void *dst) { mms__pack_k_affine_x8_rows(&mms__q5_k_affine, rows, n, K, dst); }
static void mms__unpack_q5_kx8_rows(const void *src, int64_t K, void *const *rows) { mms__unpack_k_affine_x8_rows(&mms__q5_k_affine, src, K, rows); }

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
static MMS__TARGET_AVX2 void mms__pack_k_affine_x8_avx2(const struct mms__k_affine *f, const void *const *rows, int64_t K, void *dstv) {
    int64_t b;
    int r, s, j;
    for (b = 0; b < K / MMS__QK_K; b++) {
        struct mms__q4_kx8 *dst = (struct mms__q4_kx8 *)((char *)dstv + (size_t)b * f->packed);
        const uint8_t *src[8], *qs[8];
        uint16_t sm[8][16];   /* per row: the 8 scales, then the 8 mins */
        for (r = 0; r < 8; r++) {
            src[r] = (const uint8_t *)rows[r] + (size_t)b * f->size;
            _mm256_storeu_si256((__m256i *)sm[r], mms__q4_k_scales_mins(((const struct mms__block_q4_k *)src[r])->scales));
            memcpy(&dst->d[r], src[r] + offsetof(struct mms__block_q4_k, d), sizeof dst->d[r]);
            memcpy(&dst->dmin[r], src[r] + offsetof(struct mms__block_q4_k, dmin), sizeof dst->dmin[r]);
            qs[r] = src[r] + f->qs_at;
        }
        for (s = 0; s < 8; s++)
            for (r = 0; r < 8; r++) {
                dst->sc[s][r] = (uint8_t)sm[r][s];
                dst->mn[s][r] = (uint8_t)sm[r][8 + s];
            }
        for (j = 0; j < (f->qh_at ? 10 : 8); j++) {   /* dwords 4j..4j + 3 of the nibbles, then of the fifth bits */
            uint32_t *to = j < 8 ? dst->qs[4 * j] : ((struct mms__q5_kx8 *)dst)->qh[4 * (j - 8)];
            const uint8_t *q[8];
            for (r = 0; r < 8; r++) q[r] = j < 8 ? qs[r] + 16 * j : src[r] + f->qh_at + 16 * (j - 8);
            mms__transpose_dwords4(q, to);
            mms__transpose_dwords4(q + 4, to + 4);
        }
    }
}

static void mms__pack_q4_kx8(const void *const *rows, int n, int64_t K, void *dst) {
    if (n == 8) mms__pack_k_affine_x8_avx2(&mms__q4_k_affine, rows, K, dst);
    else mms__pack_q4_kx8_rows(rows, n, K, dst);
}

static void mms__pack_q5_kx8(const void *const *rows, int n, int64_t K, void *dst) {
    if (n == 8) mms__pack_k_affine_x8_avx2(&mms__q5_k_affine, rows, K, dst);
    else mms__pack_q5_kx8_rows(rows, n, K, dst);
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

/* Q5_K's fifth bits of sub-blocks s and s + 1 (s even) of 8 rows' dword (a qh dword), as 16 in
   each byte to OR into the low (lo) and high (hi) nibbles' values. */
static MMS__AVX2_INLINE void mms__q5_kx8_fifth(__m256i qh, int s, __m256i *lo, __m256i *hi) {
    const __m256i m16 = _mm256_set1_epi8(0x10), h = _mm256_srli_epi16(qh, s);
    *lo = _mm256_or_si256(*lo, _mm256_and_si256(_mm256_slli_epi16(h, 4), m16));
    *hi = _mm256_or_si256(*hi, _mm256_and_si256(_mm256_slli_epi16(h, 3), m16));
}

/* Q4_K the same way, per super-block: each sub-block's 8 dwords of products summed in int16 (at
   most 8 * 2 * 15 * 127), then one madd by the 8 rows' scales; the mins term from the activations'
   sums of 32, one madd per two sub-blocks. Q5_K (q5: struct mms__q5_kx8) likewise with the fifth
   bits ORed into the nibbles, one sub-block at a time (the fifth bits' extra registers beside 8
   accumulators would spill); without VNNI its int16 sums are taken after 4 dwords (4 * 2 * 31 *
   127 fits, 8 would not). */
static MMS__AVX2_INLINE void mms__gemm_k_affine_x8_body(bool vnni, bool q5, int64_t K, const void *wv, const void *const xv[4], float *out) {
    const size_t packed = q5 ? sizeof(struct mms__q5_kx8) : sizeof(struct mms__q4_kx8);
    const struct mms__block_q8_k *const x[4] = { (const struct mms__block_q8_k *)xv[0], (const struct mms__block_q8_k *)xv[1],
                                                 (const struct mms__block_q8_k *)xv[2], (const struct mms__block_q8_k *)xv[3] };
    const __m256i m4 = _mm256_set1_epi8(0x0f), m16 = _mm256_set1_epi8(0x10);
    __m256 acc[4];
    int64_t b;
    int s, k, c;
MMS__UNROLL4
    for (c = 0; c < 4; c++) acc[c] = _mm256_setzero_ps();
    for (b = 0; b < K / MMS__QK_K; b++) {
        const struct mms__q4_kx8 *w = (const struct mms__q4_kx8 *)((const char *)wv + (size_t)b * packed);
        __m256i sumi[4], summ[4];
MMS__UNROLL4
        for (c = 0; c < 4; c++) sumi[c] = summ[c] = _mm256_setzero_si256();
        for (s = 0; q5 && s < 8; s++) {   /* Q5_K: one sub-block at a time (half the accumulators live) */
            __m256i p[4];
MMS__UNROLL4
            for (c = 0; c < 4; c++) p[c] = _mm256_setzero_si256();
            for (k = 0; k < 8; k++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)w->qs[4 * (s & ~1) + k]);
                const __m256i h = _mm256_loadu_si256((const __m256i *)((const struct mms__q5_kx8 *)w)->qh[k]);
                const __m256i u = _mm256_or_si256(_mm256_and_si256(s & 1 ? _mm256_srli_epi16(v, 4) : v, m4),   /* bit s of h to bit 4 */
                                                  _mm256_and_si256(s < 4 ? _mm256_slli_epi16(h, 4 - s) : _mm256_srli_epi16(h, s - 4), m16));
MMS__UNROLL4
                for (c = 0; c < 4; c++) {
                    int32_t a;
                    memcpy(&a, x[c][b].qs + 32 * s + 4 * k, 4);
                    p[c] = mms__u8s8_add(vnni, p[c], u, _mm256_set1_epi32(a));
                }
                if (!vnni && (k == 3 || k == 7)) {
MMS__UNROLL4
                    for (c = 0; c < 4; c++) {
                        sumi[c] = _mm256_add_epi32(sumi[c], mms__u8s8_widen_scaled(vnni, p[c], w->sc[s]));
                        p[c] = _mm256_setzero_si256();
                    }
                }
            }
            if (vnni) {
MMS__UNROLL4
                for (c = 0; c < 4; c++) sumi[c] = _mm256_add_epi32(sumi[c], mms__u8s8_widen_scaled(vnni, p[c], w->sc[s]));
            }
        }
        for (s = 0; !q5 && s < 8; s += 2) {   /* sub-blocks s and s + 1: the low and high nibbles of one chunk */
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
    mms__gemm_k_affine_x8_body(false, false, K, wv, xv, out);
}
static MMS__TARGET_AVX512 void mms__gemm_q4_kx8_avx512(int64_t K, const void *wv, const void *const xv[4], float *out) {
    mms__gemm_k_affine_x8_body(true, false, K, wv, xv, out);
}
static MMS__TARGET_AVX2 void mms__gemm_q5_kx8_avx2(int64_t K, const void *wv, const void *const xv[4], float *out) {
    mms__gemm_k_affine_x8_body(false, true, K, wv, xv, out);
}
static MMS__TARGET_AVX512 void mms__gemm_q5_kx8_avx512(int64_t K, const void *wv, const void *const xv[4], float *out) {
    mms__gemm_k_affine_x8_body(true, true, K, wv, xv, out);
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

/* Q6_K's layout for AVX2's prompt kernel: the 8-row layout above (mms__q6_kx8) with its 6-bit
   values unpacked into bytes, unsigned as maddubs takes them (w + 32, 0..63): q[8 (4h + g) + j][r]
   is dword j of group g of half h of row r, in the order the kernel reads them. The card's
   regroup makes it from the 8-row layout once per tile (weights packed per tile or kept
   repacked), where the 6-bit layout's kernel unpacks every value once per 4 columns: without
   VNNI that unpacking is a large share of the kernel's work (manual section 9). 2192 bytes per
   8 rows and 256 values, scratch only: weights are kept repacked in the 6-bit layout. */
struct mms__q6_kx8_u8 { mms_fp16_t d[8]; int8_t sc[16][8]; uint32_t q[64][8]; };

static MMS__TARGET_AVX2 void mms__regroup_q6_kx8_u8(const void *srcv, int64_t K, void *dstv) {
    const struct mms__q6_kx8 *src = (const struct mms__q6_kx8 *)srcv;
    struct mms__q6_kx8_u8 *dst = (struct mms__q6_kx8_u8 *)dstv;
    int64_t b;
    int h, j, g;
    for (b = 0; b < K / MMS__QK_K; b++, src++, dst++) {
        memcpy(dst->d, src->d, sizeof dst->d);
        memcpy(dst->sc, src->sc, sizeof dst->sc);
        for (h = 0; h < 2; h++)
            for (j = 0; j < 8; j++) {
                const __m256i qa = _mm256_loadu_si256((const __m256i *)src->ql[16 * h + j]), qb = _mm256_loadu_si256((const __m256i *)src->ql[16 * h + 8 + j]);
                const __m256i qh = _mm256_loadu_si256((const __m256i *)src->qh[8 * h + j]);
                for (g = 0; g < 4; g++) _mm256_storeu_si256((__m256i *)dst->q[8 * (4 * h + g) + j], mms__q6_kx8_values(g & 1 ? qb : qa, qh, g));
            }
    }
}

/* Q6_K the same way, per super-block, on either layout (bytes: mms__q6_kx8_u8's values as they
   are, else unpacked from mms__q6_kx8's bits): each sub-block of 16 values (4 dwords of a group)
   summed in int32 (VNNI) or in two int16 accumulators of 2 dwords each, times the 8 rows' int8
   scales; the - 32 of every value from the activations' sums of 16, one madd per two sub-blocks.
   No int16 sum leaves its range (maddubs would saturate, the add wrap): values 0..63 against
   activations -128..127 make each maddubs pair -16128..16002, two of them -32256..32004 (a third
   could pass 32767: hence two accumulators).
   The integer sums are exact, so a row's is mms__dot_q6_k_avx2's whatever the layout, and both
   layouts give the same bits. */
static MMS__AVX2_INLINE void mms__gemm_q6_kx8_body(bool vnni, bool bytes, int64_t K, const void *wv, const void *const xv[4], float *out) {
    const size_t block = bytes ? sizeof(struct mms__q6_kx8_u8) : sizeof(struct mms__q6_kx8);
    const struct mms__block_q8_k *const x[4] = { (const struct mms__block_q8_k *)xv[0], (const struct mms__block_q8_k *)xv[1],
                                                 (const struct mms__block_q8_k *)xv[2], (const struct mms__block_q8_k *)xv[3] };
    __m256 acc[4];
    int64_t b;
    int t, h, g, s, k, c;
MMS__UNROLL4
    for (c = 0; c < 4; c++) acc[c] = _mm256_setzero_ps();
    for (b = 0; b < K / MMS__QK_K; b++) {
        const char *blk = (const char *)wv + (size_t)b * block;
        const struct mms__q6_kx8 *w = (const struct mms__q6_kx8 *)(const void *)blk;         /* !bytes */
        const struct mms__q6_kx8_u8 *wu = (const struct mms__q6_kx8_u8 *)(const void *)blk;  /* bytes */
        const mms_fp16_t *wd = bytes ? wu->d : w->d;
        const int8_t (*wsc)[8] = bytes ? wu->sc : w->sc;
        __m256i sumi[4], off[4];
MMS__UNROLL4
        for (c = 0; c < 4; c++) sumi[c] = off[c] = _mm256_setzero_si256();
        for (t = 0; t < 8; t++) {
            const __m256i sp = mms__s8x8_pairs(wsc[2 * t], wsc[2 * t + 1]);
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
                        const __m256i v = bytes ? _mm256_loadu_si256((const __m256i *)wu->q[8 * (4 * h + g) + j])
                                                : mms__q6_kx8_values(_mm256_loadu_si256((const __m256i *)w->ql[16 * h + 8 * (g & 1) + j]),
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
                        const int8_t *sc = wsc[8 * h + 2 * g + s];
                        const __m256i p = mms__u8s8_widen_scaled_s8(vnni, lo[c], sc);
                        sumi[c] = _mm256_add_epi32(sumi[c], vnni ? p : _mm256_add_epi32(p, mms__u8s8_widen_scaled_s8(false, hi[c], sc)));
                    }
                }
        {
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)wd));
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

/* AVX2 reads the values as bytes (its card's regroup); the AVX-512 set still reads the 6-bit
   layout (the bytes are not measured there). */
static MMS__TARGET_AVX2 void mms__gemm_q6_kx8_u8_avx2(int64_t K, const void *wv, const void *const xv[4], float *out) {
    mms__gemm_q6_kx8_body(false, true, K, wv, xv, out);
}
static MMS__TARGET_AVX512 void mms__gemm_q6_kx8_avx512(int64_t K, const void *wv, const void *const xv[4], float *out) {
    mms__gemm_q6_kx8_body(true, false, K, wv, xv, out);
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

/* Q4_K and Q5_K (q5: struct mms__q5_kx8, its fifth bits ORed into the nibbles), 8 columns a call
   (out[16 c + r], c < 8), the 8-row kernel's sums and float operations per row. */
static MMS__AVX512_INLINE void mms__gemm_k_affine_x16_body(bool q5, int64_t K, const void *w0v, const void *w1v, const void *const *xv, float *out) {
    const size_t packed = q5 ? sizeof(struct mms__q5_kx8) : sizeof(struct mms__q4_kx8);
    const __m512i m4 = _mm512_set1_epi8(0x0f), m16 = _mm512_set1_epi8(0x10);
    const struct mms__block_q8_k *x[8];
    __m512 acc[8];
    int64_t b;
    int s, k, c;
MMS__UNROLL8
    for (c = 0; c < 8; c++) { x[c] = (const struct mms__block_q8_k *)xv[c]; acc[c] = _mm512_setzero_ps(); }
    for (b = 0; b < K / MMS__QK_K; b++) {
        const struct mms__q4_kx8 *w0 = (const struct mms__q4_kx8 *)((const char *)w0v + (size_t)b * packed);
        const struct mms__q4_kx8 *w1 = (const struct mms__q4_kx8 *)((const char *)w1v + (size_t)b * packed);
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
                __m512i u = _mm512_and_si512(s & 1 ? _mm512_srli_epi16(v, 4) : v, m4);
                if (q5) {   /* bit s of the qh dword to bit 4 */
                    const __m512i h = mms__pair256(((const struct mms__q5_kx8 *)w0)->qh[k], ((const struct mms__q5_kx8 *)w1)->qh[k]);
                    u = _mm512_or_si512(u, _mm512_and_si512(_mm512_slli_epi16(_mm512_srli_epi16(h, s), 4), m16));
                }
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

static MMS__TARGET_AVX512 void mms__gemm_q4_kx16_avx512(int64_t K, const void *w0v, const void *w1v, const void *const *xv, float *out) {
    mms__gemm_k_affine_x16_body(false, K, w0v, w1v, xv, out);
}
static MMS__TARGET_AVX512 void mms__gemm_q5_kx16_avx512(int64_t K, const void *w0v, const void *w1v, const void *const *xv, float *out) {
    mms__gemm_k_affine_x16_body(true, K, w0v, w1v, xv, out);
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
MMS__AVX512_CODE_END

/* The Q4_K and Q6_K decode kernels below prefetch the next block of each group a share at each of
   the `steps` steps through a block (shares <= 128 bytes, 1-2 lines each; they cover the block).
   A whole block's lines at once (19 or 27 a group, two groups a call) was too many misses at once
   for a core to keep, and read far below the bandwidth (docs/measurements.md, the prefetch spread
   through the block). */
#define MMS__PREFETCH_NEXT_SHARE(w, step, steps) \
    MMS__PREFETCH((const char *)((w) + 1) + (size_t)(step) * (sizeof *(w) / (steps)), sizeof *(w) / (steps), 3)

/* Decode on the Q4_K layout: one activation row against ns <= 4 groups of 8 rows side by side, as
   mms__gemv_q4_0x8_avx2 does for Q4_0 (the sums as in the kernel above with one column); Q5_K
   (q5) likewise. */
static MMS__AVX2_INLINE void mms__gemv_k_affine_x8_body(bool vnni, bool q5, int ns, int64_t K, const void *const wv[4], const void *xv, float *const out[4]) {
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
            const struct mms__q4_kx8 *w = (const struct mms__q4_kx8 *)((const char *)wv[j] + (size_t)b * (q5 ? sizeof(struct mms__q5_kx8) : sizeof(struct mms__q4_kx8)));
            __m256i sumi = _mm256_setzero_si256(), summ = _mm256_setzero_si256();
            for (s = 0; s < 8; s += 2) {   /* sub-blocks s and s + 1: the low and high nibbles of one chunk */
                __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
MMS__UNROLL4
                for (k = 0; k < 8; k++) {
                    const __m256i v = _mm256_loadu_si256((const __m256i *)w->qs[4 * s + k]);
                    __m256i u_lo = _mm256_and_si256(v, m4), u_hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                    int32_t a_lo, a_hi;
                    if (q5) {
                        MMS__PREFETCH_NEXT_SHARE((const struct mms__q5_kx8 *)w, 4 * s + k, 32);
                        mms__q5_kx8_fifth(_mm256_loadu_si256((const __m256i *)((const struct mms__q5_kx8 *)w)->qh[k]), s, &u_lo, &u_hi);
                    } else {
                        MMS__PREFETCH_NEXT_SHARE(w, 4 * s + k, 32);
                    }
                    memcpy(&a_lo, x[b].qs + 32 * s + 4 * k, 4);
                    memcpy(&a_hi, x[b].qs + 32 * s + 32 + 4 * k, 4);
                    lo = mms__u8s8_add(vnni, lo, u_lo, _mm256_set1_epi32(a_lo));
                    hi = mms__u8s8_add(vnni, hi, u_hi, _mm256_set1_epi32(a_hi));
                    if (q5 && !vnni && k == 3) {   /* the tile kernel's int16 sums */
                        sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(mms__u8s8_widen_scaled(vnni, lo, w->sc[s]), mms__u8s8_widen_scaled(vnni, hi, w->sc[s + 1])));
                        lo = hi = _mm256_setzero_si256();
                    }
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
    mms__gemv_k_affine_x8_body(false, false, ns, K, wv, xv, out);
}
static MMS__TARGET_AVX2 void mms__gemv_q5_kx8_avx2(int ns, int64_t K, const void *const wv[4], const void *xv, float *const out[4]) {
    mms__gemv_k_affine_x8_body(false, true, ns, K, wv, xv, out);
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
   and float operations per row, so the same bits. Q5_K (q5) likewise. */
static MMS__AVX512_INLINE void mms__gemv_k_affine_x8_avx512_body(bool q5, int ns, int64_t K, const void *const wv[4], const void *xv, float *const out[4]) {
    const struct mms__block_q8_k *x = (const struct mms__block_q8_k *)xv;
    const size_t packed = q5 ? sizeof(struct mms__q5_kx8) : sizeof(struct mms__q4_kx8);
    const __m512i m4 = _mm512_set1_epi8(0x0f), m16 = _mm512_set1_epi8(0x10);
    const int np = ns / 2;   /* pairs */
    __m512 acc[2] = { _mm512_setzero_ps(), _mm512_setzero_ps() };
    int64_t b;
    int j, s, k;
    for (b = 0; b < K / MMS__QK_K; b++) {
        const __m512 xd = _mm512_set1_ps(x[b].d);
        for (j = 0; j < np; j++) {
            const struct mms__q4_kx8 *w0 = (const struct mms__q4_kx8 *)((const char *)wv[2 * j] + (size_t)b * packed);
            const struct mms__q4_kx8 *w1 = (const struct mms__q4_kx8 *)((const char *)wv[2 * j + 1] + (size_t)b * packed);
            __m512i sumi = _mm512_setzero_si512(), summ = _mm512_setzero_si512();
            for (s = 0; s < 8; s += 2) {   /* sub-blocks s and s + 1: the low and high nibbles of one chunk */
                __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
MMS__UNROLL8
                for (k = 0; k < 8; k++) {
                    const __m512i v = mms__pair256(w0->qs[4 * s + k], w1->qs[4 * s + k]);
                    __m512i u_lo = _mm512_and_si512(v, m4), u_hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                    int32_t a_lo, a_hi;
                    if (q5) {
                        const __m512i h = _mm512_srli_epi16(mms__pair256(((const struct mms__q5_kx8 *)w0)->qh[k], ((const struct mms__q5_kx8 *)w1)->qh[k]), s);
                        MMS__PREFETCH_NEXT_SHARE((const struct mms__q5_kx8 *)w0, 4 * s + k, 32);
                        MMS__PREFETCH_NEXT_SHARE((const struct mms__q5_kx8 *)w1, 4 * s + k, 32);
                        u_lo = _mm512_or_si512(u_lo, _mm512_and_si512(_mm512_slli_epi16(h, 4), m16));
                        u_hi = _mm512_or_si512(u_hi, _mm512_and_si512(_mm512_slli_epi16(h, 3), m16));
                    } else {
                        MMS__PREFETCH_NEXT_SHARE(w0, 4 * s + k, 32);
                        MMS__PREFETCH_NEXT_SHARE(w1, 4 * s + k, 32);
                    }
                    memcpy(&a_lo, x[b].qs + 32 * s + 4 * k, 4);
                    memcpy(&a_hi, x[b].qs + 32 * s + 32 + 4 * k, 4);
                    lo = _mm512_dpbusd_epi32(lo, u_lo, _mm512_set1_epi32(a_lo));
                    hi = _mm512_dpbusd_epi32(hi, u_hi, _mm512_set1_epi32(a_hi));
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
    if (ns % 2) mms__gemv_k_affine_x8_body(true, q5, 1, K, wv + ns - 1, xv, out + ns - 1);
}
static MMS__TARGET_AVX512 void mms__gemv_q4_kx8_avx512(int ns, int64_t K, const void *const wv[4], const void *xv, float *const out[4]) {
    mms__gemv_k_affine_x8_avx512_body(false, ns, K, wv, xv, out);
}
static MMS__TARGET_AVX512 void mms__gemv_q5_kx8_avx512(int ns, int64_t K, const void *const wv[4], const void *xv, float *const out[4]) {
    mms__gemv_k_affine_x8_avx512_body(true, ns, K, wv, xv, out);
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
