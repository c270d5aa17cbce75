/* >>cpu-attention =================================================================================
   Softmax with scale and mask, rotary embeddings, and fused attention with a streaming softmax. */

/* Masks: element (j, i, i2, i3) with broadcasting over dims 2 and 3, as f32. */
static const char *mms__mask_row(const struct mms_tensor *mask, int64_t i, int64_t i2, int64_t i3) {
    return mms__row_ptr(mask, i, i2 % mask->ne[2], i3 % mask->ne[3]);
}
static float mms__mask_at(const struct mms_tensor *mask, const char *row, int64_t j) {
    const char *ptr = row + j * (int64_t)mask->nb[0];
    if (mask->type == MMS_TYPE_F32) { float f; memcpy(&f, ptr, sizeof f); return f; }
    { mms_fp16_t h; memcpy(&h, ptr, sizeof h); return mms_fp16_to_fp32(h); }
}

/* One row of mask as contiguous f32 (columns j0 .. j0 + n): a pointer into the mask when it is
   contiguous f32, else converted into buf. */
static const float *mms__mask_span(const struct mms_tensor *mask, const char *row, int64_t j0, int64_t n, float *buf) {
    int64_t j;
    if (mask->type == MMS_TYPE_F32 && mask->nb[0] == sizeof(float)) return (const float *)row + j0;
    if (mask->nb[0] == mms_type_size(mask->type)) { mms__to_f32(mask->type, row + j0 * (int64_t)mask->nb[0], buf, n); return buf; }
    for (j = 0; j < n; j++) buf[j] = mms__mask_at(mask, row, j0 + j);
    return buf;
}

static void mms__cpu_soft_max(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0], *mask = dst->src[1];
    const int64_t n = dst->ne[0];
    const float scale = mms_get_op_params_f32(dst, 0);
    float *abuf = p->wdata, *obuf = abuf + n, *mbuf = obuf + n;
    struct mms__part_rows part = mms__part_rows_of(p, dst);
    int64_t i, i1, i2, i3;
    while (mms__next_row(&part, &i1, &i2, &i3)) {
        const float *x;
        float *out, max;
        x = mms__load_row(a, i1, i2, i3, abuf);
        out = mms__out_row(dst, i1, i2, i3, obuf);
        mms__vec_axpb_f32(n, out, x, scale, mask ? mms__mask_span(mask, mms__mask_row(mask, i1, i2, i3), 0, n, mbuf) : NULL);
        max = mms__vec_max_f32(n, out);
        if (max == -INFINITY) {              /* every entry masked: no distribution, zeros */
            for (i = 0; i < n; i++) out[i] = 0.0f;
        } else {
            double sum = mms__vec_exp_sum_f32(n, out, out, max);
            mms__vec_axpb_f32(n, out, out, (float)(1.0 / sum), NULL);
        }
        if (out == obuf) mms__store_row(dst, i1, i2, i3, out);
    }
}

static void mms__cpu_rope(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0], *pos = dst->src[1], *ff = dst->src[2];
    const int n_dims = mms_get_op_params_i32(dst, 0), mode = mms_get_op_params_i32(dst, 1);
    const float freq_base = mms_get_op_params_f32(dst, 3), freq_scale = mms_get_op_params_f32(dst, 4);
    const float attn_factor = mms_get_op_params_f32(dst, 6);
    const int64_t n = dst->ne[0], half = n_dims / 2;
    float *abuf = p->wdata, *obuf = abuf + n, *inv_freq = obuf + n, *cs = inv_freq + half, *sn = cs + half;
    struct mms__part_rows part = mms__part_rows_of(p, dst);
    int64_t i, cached_token = -1, i1, i2, i3;

    for (i = 0; i < half; i++) {
        double f = (double)freq_scale * pow((double)freq_base, -2.0 * (double)i / (double)n_dims);
        if (ff) f /= (double)mms__get_f32(ff, i, 0, 0, 0);
        inv_freq[i] = (float)f;
    }
    while (mms__next_row(&part, &i1, &i2, &i3)) {
        const float *x;
        float *out;
        if (i2 != cached_token) {            /* angles depend on the token only: share them across heads */
            int32_t position;
            memcpy(&position, (const char *)pos->data + i2 * (int64_t)pos->nb[0], sizeof position);
            for (i = 0; i < half; i++) {
                float theta = (float)position * inv_freq[i];
                cs[i] = (float)cos((double)theta) * attn_factor;
                sn[i] = (float)sin((double)theta) * attn_factor;
            }
            cached_token = i2;
        }
        x = mms__load_row(a, i1, i2, i3, abuf);
        out = mms__out_row(dst, i1, i2, i3, obuf);
        for (i = 0; i < half; i++) {
            int64_t j0 = mode == MMS_ROPE_TYPE_NEOX ? i : 2 * i, j1 = mode == MMS_ROPE_TYPE_NEOX ? i + half : 2 * i + 1;
            float x0 = x[j0], x1 = x[j1];
            out[j0] = x0 * cs[i] - x1 * sn[i];
            out[j1] = x0 * sn[i] + x1 * cs[i];
        }
        for (i = n_dims; i < n; i++) out[i] = x[i];
        if (out == obuf) mms__store_row(dst, i1, i2, i3, out);
    }
}

/* Flash attention, tiled. A work item is a block of QB query rows that share one K/V head (with
   grouped heads, the rows of every head of the group, so K and V are read once per group), run
   against blocks of KB keys. Per key block: S = Q K^T (Q pre-scaled, K packed transposed so the
   register block runs along keys), softcap and mask, the streaming softmax per row (running max m
   and sum l; the output accumulated so far is rescaled when m grows), then O += P V. Only the
   QB x KB score block ever exists. Blocks are fixed by the shapes, never by the thread count, so
   results do not depend on it. With at most MMS__FA_DIRECT rows in a block (decode: one query per
   sequence times the heads of a group) and f32 K and V, the scores and the weighted sum read the
   K and V rows in place: packing a block for a few rows cost more than the products. BF16 K and V
   past MMS__FA_DIRECT rows take AVX-512's bf16 GEMM for both products (Q and P rounded to bf16). */
#define MMS__FA_QB 96
#define MMS__FA_KB 128
#define MMS__FA_DIRECT 8

#define MMS__FA_HEAD_PACK_MAX (8 << 20)

/* The bf16 path (BF16 K and V, more than MMS__FA_DIRECT rows, vdpbf16ps) with the 4-byte words one
   key block's K and V panels take (*kblock, *vblock). */
static bool mms__fa_bf16(const struct mms_tensor *dst, int64_t *kblock, int64_t *vblock) {
    const struct mms_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2];
    *kblock = MMS__FA_KB * ((q->ne[0] + 1) / 2);                         /* panels of 16 keys, pairs along D */
    *vblock = MMS__ALIGN_UP(v->ne[0], 32) * (MMS__FA_KB / 2);            /* value rows interleaved by pairs of keys */
    return q->ne[1] * (q->ne[2] / k->ne[2]) > MMS__FA_DIRECT && k->type == MMS_TYPE_BF16 && v->type == MMS_TYPE_BF16 &&
           mms__vec_has_gemm_bf16();
}

/* Words of one whole K/V head packed for the bf16 path, 0 when it does not apply or would take
   more than MMS__FA_HEAD_PACK_MAX bytes (then each query block packs its key blocks again). */
static int64_t mms__fa_head_pack_words(const struct mms_tensor *dst) {
    int64_t kblock, vblock, words;
    if (!mms__fa_bf16(dst, &kblock, &vblock)) return 0;
    words = (dst->src[1]->ne[1] + MMS__FA_KB - 1) / MMS__FA_KB * (kblock + vblock);
    return words * 4 <= MMS__FA_HEAD_PACK_MAX ? words : 0;
}

static size_t mms__flash_attn_work_size(const struct mms_tensor *dst) {
    const int64_t D = dst->src[0]->ne[0], Dvp = MMS__ALIGN_UP(dst->src[2]->ne[0], 16);
    const int64_t QB = MMS__FA_QB, KB = MMS__FA_KB, bf16 = QB * ((D + 1) / 2) + QB * KB / 2 + 2 * Dvp;   /* Q, P in pairs; V rows */
    return (size_t)(QB * D + QB * KB + QB * Dvp + 2 * QB + D * KB + KB * D + KB * Dvp + QB * KB + bf16 + 14 * 16 +
                    mms__fa_head_pack_words(dst)) * sizeof(float);
}

/* Rows j0 .. j0 + n of t in (i2, i3) as f32 rows with leading dimension *ld (at least width
   floats, zero beyond ne[0] up to width): in place when t already is that (and, if dense, its rows
   are packed: V rows of a ViT projection lie 5 KB apart, and reading panels of them again and
   again costs TLB misses that one copy avoids), else copied into buf. */
static const float *mms__fa_rows(const struct mms_tensor *t, int64_t j0, int64_t n, int64_t i2, int64_t i3,
                                 int64_t width, bool dense, float *buf, int64_t *ld) {
    int64_t j, i;
    if (t->type == MMS_TYPE_F32 && t->nb[0] == sizeof(float) && t->nb[1] % sizeof(float) == 0 && width == t->ne[0] &&
        (!dense || t->nb[1] == (size_t)width * sizeof(float))) {
        *ld = (int64_t)(t->nb[1] / sizeof(float));
        return (const float *)mms__row_ptr(t, j0, i2, i3);
    }
    for (j = 0; j < n; j++) {
        float *row = buf + j * width;
        const float *x = mms__load_row(t, j0 + j, i2, i3, row);
        if (x != row) memcpy(row, x, (size_t)t->ne[0] * sizeof(float));
        for (i = t->ne[0]; i < width; i++) row[i] = 0.0f;
    }
    *ld = width;
    return buf;
}

static void mms__cpu_flash_attn_ext(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *mask = dst->src[3], *mask_rows = dst->src[4];
    const int64_t D = q->ne[0], Dv = v->ne[0], Dvp = MMS__ALIGN_UP(Dv, 16), n_q = q->ne[1], n_kv = k->ne[1];
    const int64_t group = q->ne[2] / k->ne[2], Hkv = k->ne[2], rows = n_q * group;
    const int64_t QB = MMS__FA_QB, KB = MMS__FA_KB, n_blocks = (rows + QB - 1) / QB;
    const float scale = mms_get_op_params_f32(dst, 0), softcap = mms_get_op_params_f32(dst, 2);
    const bool direct = rows <= MMS__FA_DIRECT && k->type == MMS_TYPE_F32 && v->type == MMS_TYPE_F32 && k->nb[0] == sizeof(float) &&
                        v->nb[0] == sizeof(float) && k->nb[1] % sizeof(float) == 0 && v->nb[1] % sizeof(float) == 0;
    float *qb = (float *)MMS__ALIGN_UP((uintptr_t)p->wdata, 64);
    float *sb = qb + MMS__ALIGN_UP(QB * D, 16), *ob = sb + QB * KB, *mr = ob + QB * Dvp, *lr = mr + MMS__ALIGN_UP(QB, 16);
    float *kt = lr + MMS__ALIGN_UP(QB, 16), *kb = kt + MMS__ALIGN_UP(D * KB, 16), *vb = kb + MMS__ALIGN_UP(KB * D, 16);
    float *mb = vb + KB * Dvp;
    /* BF16 K and V on the sets with vdpbf16ps, past decode's rows: Q and P rounded to bf16, both
       products in bf16 pairs (decode keeps f32 Q and P, as mul_mat keeps f32 activations there).
       A thread packs a whole K/V head once and keeps it while its query blocks share the head (the
       threads take the blocks of one head side by side), where that fits. */
    int64_t kblock, vblock;
    const bool bf16 = mms__fa_bf16(dst, &kblock, &vblock);
    const int64_t PD = (D + 1) / 2, head_words = mms__fa_head_pack_words(dst);
    uint32_t *q16 = (uint32_t *)(mb + MMS__ALIGN_UP(QB * KB, 16)), *p16 = q16 + MMS__ALIGN_UP(QB * PD, 16);   /* Q, P pairs */
    mms_bf16_t *vrow = (mms_bf16_t *)(p16 + MMS__ALIGN_UP(QB * KB / 2, 16));   /* two strided value rows */
    uint32_t *khead = (uint32_t *)MMS__ALIGN_UP((uintptr_t)(vrow + 2 * Dvp), 64);   /* the head's K blocks, then its V blocks */
    uint32_t *vhead = khead + (head_words ? (n_kv + KB - 1) / KB * kblock : 0);
    int64_t packed_head = -1;   /* ib * Hkv + kh of the head in khead/vhead */
    const char *mrow[MMS__FA_QB];
    const float *mspan[MMS__FA_QB];
    int64_t ih[MMS__FA_QB], iqs[MMS__FA_QB];

    for (;;) {
        const int64_t item = mms__atomic_fetch_add(p->counter, 1);
        int64_t ib, kh, r0, nr, i, j0;
        if (item >= n_blocks * Hkv * q->ne[3]) break;
        r0 = (item % n_blocks) * QB;
        kh = (item / n_blocks) % Hkv;
        ib = item / (n_blocks * Hkv);
        nr = MMS__MIN(QB, rows - r0);
        for (i = 0; i < nr; i++) {           /* row r0 + i: query r / group of head kh * group + r % group */
            float *qrow = qb + i * D;
            const float *x;
            iqs[i] = (r0 + i) / group;
            ih[i] = kh * group + (r0 + i) % group;
            x = mms__load_row(q, iqs[i], ih[i], ib, qrow);
            mms__vec_axpb_f32(D, qrow, x, scale, NULL);
            if (mask && mask_rows) {         /* the row's shared mask row */
                int32_t r;
                memcpy(&r, (const char *)mask_rows->data + iqs[i] * (int64_t)mask_rows->nb[0], sizeof r);
                if (r < 0 || r >= mask->ne[1]) {
                    mms__compute_fail(p, MMS_ERR_INVALID_ARG, "FLASH_ATTN_EXT %s: mask row %d for query %lld is outside 0..%lld",
                                      mms__tensor_desc(dst).s, (int)r, (long long)iqs[i], (long long)mask->ne[1] - 1);
                    return;
                }
                mrow[i] = mms__mask_row(mask, r, ih[i], ib);
            } else {
                mrow[i] = mask ? mms__mask_row(mask, iqs[i], ih[i], ib) : NULL;
            }
            mr[i] = -INFINITY;
            lr[i] = 0.0f;
        }
        memset(ob, 0, (size_t)(nr * Dvp) * sizeof(float));
        for (i = 0; bf16 && i < nr; i++) mms__vec_bf16_pairs(D, qb + i * D, q16 + i * PD);
        if (head_words && packed_head != ib * Hkv + kh) {
            for (j0 = 0; j0 < n_kv; j0 += KB) {
                const int64_t nk = MMS__MIN(KB, n_kv - j0);
                mms__pack_rows_bf16(k, j0, nk, kh, ib, (float *)(khead + j0 / KB * kblock), kb, (mms_bf16_t *)(kb + 16 * PD));
                mms__pack_pairs_bf16(v, j0, nk, kh, ib, vhead + j0 / KB * vblock, vrow);
            }
            packed_head = ib * Hkv + kh;
        }
        for (j0 = 0; j0 < n_kv; j0 += KB) {
            const int64_t nk = MMS__MIN(KB, n_kv - j0), nkp = MMS__ALIGN_UP(nk, 16);
            int64_t ldk, ldv, j;
            const float *ks, *vs;
            if (mask) {                      /* a key block masked for every row adds nothing: skip it */
                bool any = false;            /* (causal prefill halves its work; decode skips the unused cache) */
                for (i = 0; i < nr; i++) {
                    mspan[i] = mms__mask_span(mask, mrow[i], j0, nk, mb + i * KB);
                    any = any || mms__vec_max_f32(nk, mspan[i]) > -INFINITY;
                }
                if (!any) continue;
            }
            if (direct) {                    /* the scores from the key rows in place, each loaded once for 4 rows */
                const float *k0 = (const float *)mms__row_ptr(k, j0, kh, ib);
                const int64_t n4 = mms__simd() ? nr / 4 * 4 : 0;
                float d[4];
                ldk = (int64_t)(k->nb[1] / sizeof(float));
                for (j = 0; j < nk; j++) {
                    /* rows of one head lie a token's heads apart in a KV cache, too far for the
                       hardware's prefetch: the key rows 16 ahead and this block's value rows */
                    if (j0 + j + 16 < n_kv) MMS__PREFETCH(k0 + (j + 16) * ldk, (size_t)D * sizeof(float), 1);
                    MMS__PREFETCH(mms__row_ptr(v, j0 + j, kh, ib), (size_t)Dv * sizeof(float), 1);
                    for (i = 0; i < n4; i += 4) {
                        int64_t c;
                        mms__vec_dot4_rows(false, D, qb + i * D, D, k0 + j * ldk, d, NULL);
                        for (c = 0; c < 4; c++) sb[(i + c) * KB + j] = d[c];
                    }
                    for (i = n4; i < nr; i++) sb[i * KB + j] = mms__vec_dot_f32(D, qb + i * D, k0 + j * ldk);
                }
            } else if (bf16) {               /* K packed as bf16 panels of 16 keys, pairs along D */
                const uint32_t *kp = khead + j0 / KB * kblock;
                if (!head_words) {
                    mms__pack_rows_bf16(k, j0, nk, kh, ib, kt, kb, (mms_bf16_t *)(kb + 16 * PD));   /* kb: 16 rows of pairs, a strided row */
                    kp = (const uint32_t *)kt;
                }
                mms__gemm_bf16(nr, nkp, PD, q16, PD, kp, 16 * PD, sb, KB, 0);
            } else {
                ks = mms__fa_rows(k, j0, nk, kh, ib, D, false, kb, &ldk);
                mms__transpose_f32(nk, D, ks, ldk, kt, nkp);
                for (j = 0; j < D; j++) memset(kt + j * nkp + nk, 0, (size_t)(nkp - nk) * sizeof(float));
                mms__gemm_f32(nr, nkp, D, qb, D, kt, nkp, 16, sb, KB, 0);
            }
            for (i = 0; i < nr; i++) {
                float *srow = sb + i * KB, m_blk, m_new;
                if (softcap != 0.0f) for (j = 0; j < nk; j++) srow[j] = softcap * tanhf(srow[j] / softcap);
                if (mask) mms__vec_axpb_f32(nk, srow, srow, 1.0f, mspan[i]);
                m_blk = mms__vec_max_f32(nk, srow);
                if (m_blk == -INFINITY) {    /* every key of the block masked: weights 0 */
                    memset(srow, 0, (size_t)nk * sizeof(float));
                    continue;
                }
                m_new = m_blk > mr[i] ? m_blk : mr[i];
                if (m_new > mr[i]) {         /* rescale what was accumulated (nothing yet when m was -inf) */
                    const float f = expf(mr[i] - m_new);
                    mms__vec_axpb_f32(Dvp, ob + i * Dvp, ob + i * Dvp, f, NULL);
                    lr[i] *= f;
                    mr[i] = m_new;
                }
                lr[i] += (float)mms__vec_exp_sum_f32(nk, srow, srow, m_new);
            }
            /* O += P V; the direct path reads the value rows in place wherever they fill whole panels */
            if (bf16) {                      /* P in pairs of keys against value rows interleaved by pairs */
                const int64_t PK = (nk + 1) / 2;
                const uint32_t *vp = vhead + j0 / KB * vblock;
                for (i = 0; i < nr; i++) mms__vec_bf16_pairs(nk, sb + i * KB, p16 + i * (KB / 2));
                if (!head_words) {
                    mms__pack_pairs_bf16(v, j0, nk, kh, ib, (uint32_t *)vb, vrow);
                    vp = (const uint32_t *)vb;
                }
                mms__gemm_bf16(nr, Dvp, PK, p16, KB / 2, vp, 16 * PK, ob, Dvp, 1);
                continue;
            }
            vs = mms__fa_rows(v, j0, nk, kh, ib, Dvp, !direct, vb, &ldv);
            mms__gemm_f32(nr, Dvp, nk, sb, KB, vs, ldv, 16, ob, Dvp, 1);
        }
        for (i = 0; i < nr; i++) {
            float *out = (float *)mms__row_ptr(dst, ih[i], iqs[i], ib);
            mms__vec_axpb_f32(Dv, out, ob + i * Dvp, lr[i] > 0.0f ? 1.0f / lr[i] : 0.0f, NULL);   /* all keys masked: zeros */
        }
    }
}
