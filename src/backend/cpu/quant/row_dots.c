/* >>cpu-quant-row-dots =============================================================================
   One weight row as it is stored against one activation row (decode), or against 4 of them, and
   AVX-512's 4-row forms: the AVX2 bodies first, then AVX-512's, which make the same integer sums
   and float operations (the same bits). */

#if MMS__HAVE_AVX2
/* 8 int32 lanes: lane k sums u[4k..4k+3] * s[4k..4k+3] (u unsigned, s signed bytes) */
static MMS__AVX2_INLINE __m256i mms__dot_u8s8_lanes(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* The byte products u * s (u unsigned, s signed) added into acc per int32 lane: row r's 4 products
   of a dword (the 8-row kernels of tiles.c). With VNNI (the AVX-512 set) one vpdpbusd adds them to the
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

/* The K types of Q4_K's affine sub-blocks (Q4_K, Q5_K) share their 4-column dot: a block of `size`
   bytes begins as both structs do (d, dmin, the 12 packed scale bytes), its low nibbles at byte
   qs_at (32 bytes per pair of sub-blocks: the first low, the second high) and, for Q5_K, the fifth
   bits at byte qh_at (bit s of byte l: value l of sub-block s; qh_at 0: none). The constant offsets
   inline into each type's own function. */

/* Sub-blocks 2j (lo) and 2j + 1 (hi) of the block at blk as 32 unsigned bytes each. *h: the block's
   fifth bits shifted down 2j (by the calls for j - 1), bit 0 and 1 of each byte those of 2j, 2j + 1:
   to bit 4 by 16-bit shifts whose mask keeps each byte's own bit. */
static MMS__AVX2_INLINE void mms__k_affine_pair(const uint8_t *blk, size_t qs_at, size_t qh_at, int j, __m256i *h, __m256i *lo, __m256i *hi) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i q = _mm256_loadu_si256((const __m256i *)(blk + qs_at + 32 * j));
    *lo = _mm256_and_si256(q, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    if (qh_at) {
        const __m256i m16 = _mm256_set1_epi8(0x10);
        *lo = _mm256_or_si256(*lo, _mm256_and_si256(_mm256_slli_epi16(*h, 4), m16));
        *hi = _mm256_or_si256(*hi, _mm256_and_si256(_mm256_slli_epi16(*h, 3), m16));
        *h = _mm256_srli_epi16(*h, 2);
    }
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
   Q8_0 at up to 8; prompt sizes take the 8-row kernels of tiles.c) --
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

/* Q4_K as mms__dot_q4_k_avx2 (Q5_K likewise, its 5-bit values at most 2 * 31 * 127 per int16 lane),
   each pair of sub-blocks unpacked once for ncols (4; Q5_K's single dot: 1) columns. */
static MMS__AVX2_INLINE void mms__dot4_k_affine_avx2(int64_t K, const uint8_t *w, size_t size, size_t qs_at, size_t qh_at,
                                                     const void *xv, size_t x_stride, float *out, int ncols) {
    const struct mms__block_q8_k *x[4];
    const __m256i step = _mm256_set1_epi16(0x0202);
    __m256 acc[4];
    int64_t i;
    int j, c;
MMS__UNROLL4
    for (c = 0; c < ncols; c++) { x[c] = (const struct mms__block_q8_k *)((const char *)xv + c * x_stride); acc[c] = _mm256_setzero_ps(); }
    for (i = 0; i < K / MMS__QK_K; i++, w += size) {
        const __m256i sm = mms__q4_k_scales_mins(w + 4), scales = _mm256_permute4x64_epi64(sm, 0x44);
        const __m128i mins = _mm256_extracti128_si256(sm, 1);
        const __m128 d = mms__fp16x2_to_f32((const mms_fp16_t *)w);
        __m256i sumi[4], h = qh_at ? _mm256_loadu_si256((const __m256i *)(w + qh_at)) : _mm256_setzero_si256();
        __m256i pick = _mm256_set1_epi16(0x0100);   /* the shuffle that broadcasts int16 lane k: bytes 2k, 2k + 1 */
MMS__UNROLL4
        for (c = 0; c < ncols; c++) sumi[c] = _mm256_setzero_si256();
        for (j = 0; j < 4; j++) {   /* not unrolled: gcc then spills the 4 columns' sums */
            __m256i lo, hi;
            const __m256i sc_lo = _mm256_shuffle_epi8(scales, pick), sc_hi = _mm256_shuffle_epi8(scales, _mm256_add_epi16(pick, step));
            mms__k_affine_pair(w, qs_at, qh_at, j, &h, &lo, &hi);
            pick = _mm256_add_epi16(pick, _mm256_add_epi16(step, step));
MMS__UNROLL4
            for (c = 0; c < ncols; c++) {
                const int8_t *a = x[c][i].qs + 64 * j;
                const __m256i plo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)a));
                const __m256i phi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(a + 32)));
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(plo, sc_lo));
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(phi, sc_hi));
            }
        }
MMS__UNROLL4
        for (c = 0; c < ncols; c++) {   /* d * sum - dmin * sum(min * activations), times the activations' step */
            const struct mms__block_q8_k *xc = &x[c][i];
            const __m128i bsums = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)xc->bsums), _mm_loadu_si128((const __m128i *)(xc->bsums + 8)));
            const __m128 dc = _mm_mul_ps(d, _mm_set1_ps(xc->d));
            const __m256 m = _mm256_set_m128(_mm_setzero_ps(), _mm_mul_ps(_mm_cvtepi32_ps(_mm_madd_epi16(mins, bsums)), _mm_permute_ps(dc, 0x55)));
            acc[c] = _mm256_sub_ps(_mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[c]), _mm256_broadcastss_ps(dc), acc[c]), m);
        }
    }
MMS__UNROLL4
    for (c = 0; c < ncols; c++) out[c] = mms__hsum256(acc[c]);
}

static MMS__TARGET_AVX2 void mms__dot4_q4_k_avx2(int64_t K, const void *w, const void *xv, size_t x_stride, float *out) {
    mms__dot4_k_affine_avx2(K, (const uint8_t *)w, sizeof(struct mms__block_q4_k), offsetof(struct mms__block_q4_k, qs), 0, xv, x_stride, out, 4);
}

static MMS__TARGET_AVX2 void mms__dot4_q5_k_avx2(int64_t K, const void *w, const void *xv, size_t x_stride, float *out) {
    mms__dot4_k_affine_avx2(K, (const uint8_t *)w, sizeof(struct mms__block_q5_k), offsetof(struct mms__block_q5_k, qs),
                            offsetof(struct mms__block_q5_k, qh), xv, x_stride, out, 4);
}

/* Q5_K's row dot is its 4-column dot on one column: a column's bits never depend on the columns
   beside it (decode of several sequences), with no repacked layout to give that. */
static MMS__TARGET_AVX2 float mms__dot_q5_k_avx2(int64_t K, const void *w, const void *xv) {
    float out;
    mms__dot4_k_affine_avx2(K, (const uint8_t *)w, sizeof(struct mms__block_q5_k), offsetof(struct mms__block_q5_k, qs),
                            offsetof(struct mms__block_q5_k, qh), xv, 0, &out, 1);
    return out;
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

/* -- AVX-512 -- */
MMS__AVX512_CODE_BEGIN
/* Two 32-byte loads as one zmm register (lo in its low half). */
static MMS__TARGET_AVX512 __m512i mms__pair256(const void *lo, const void *hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)lo)), _mm256_loadu_si256((const __m256i *)hi), 1);
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
#endif
