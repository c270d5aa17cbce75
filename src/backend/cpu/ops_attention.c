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

static void mms__cpu_soft_max(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0], *mask = dst->src[1];
    const int64_t n = dst->ne[0];
    const float scale = mms_get_op_params_f32(dst, 0);
    float *abuf = p->wdata, *obuf = abuf + n;
    int64_t r, lo, hi, i;
    mms__split(mms_nrows(dst), p->ith, p->nth, &lo, &hi);
    for (r = lo; r < hi; r++) {
        int64_t i1, i2, i3;
        const float *x;
        const char *mrow = NULL;
        float *out, max = -INFINITY;
        double sum = 0.0;
        mms__unravel_row(dst->ne, r, &i1, &i2, &i3);
        x = mms__load_row(a, i1, i2, i3, abuf);
        out = mms__out_row(dst, i1, i2, i3, obuf);
        if (mask) mrow = mms__mask_row(mask, i1, i2, i3);
        for (i = 0; i < n; i++) {
            float v = x[i] * scale + (mrow ? mms__mask_at(mask, mrow, i) : 0.0f);
            out[i] = v;
            if (v > max) max = v;
        }
        if (max == -INFINITY) {              /* every entry masked: no distribution, zeros */
            for (i = 0; i < n; i++) out[i] = 0.0f;
        } else {
            float inv;
            for (i = 0; i < n; i++) { out[i] = expf(out[i] - max); sum += out[i]; }
            inv = (float)(1.0 / sum);
            for (i = 0; i < n; i++) out[i] *= inv;
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
    int64_t r, lo, hi, i, cached_token = -1;

    for (i = 0; i < half; i++) {
        double f = (double)freq_scale * pow((double)freq_base, -2.0 * (double)i / (double)n_dims);
        if (ff) f /= (double)mms__get_f32(ff, i, 0, 0, 0);
        inv_freq[i] = (float)f;
    }
    mms__split(mms_nrows(dst), p->ith, p->nth, &lo, &hi);
    for (r = lo; r < hi; r++) {
        int64_t i1, i2, i3;
        const float *x;
        float *out;
        mms__unravel_row(dst->ne, r, &i1, &i2, &i3);
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

/* Flash attention: per query row, scores against a block of KB keys at a time; the running
   maximum and sum rescale the accumulated output so the full score row is never stored. */
#define MMS__FA_KB 128

static size_t mms__flash_attn_work_size(const struct mms_tensor *dst) {
    return (size_t)(2 * dst->src[0]->ne[0] + 2 * dst->src[2]->ne[0] + MMS__FA_KB) * sizeof(float);
}

static void mms__cpu_flash_attn_ext(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *mask = dst->src[3];
    const int64_t D = q->ne[0], Dv = v->ne[0], n_q = q->ne[1], H = q->ne[2], n_kv = k->ne[1];
    const int64_t group = H / k->ne[2];
    const float scale = mms_get_op_params_f32(dst, 0), softcap = mms_get_op_params_f32(dst, 2);
    float *qbuf = p->wdata, *kbuf = qbuf + D, *vbuf = kbuf + D, *acc = vbuf + Dv, *sc = acc + Dv;
    int64_t r, lo, hi, i;

    mms__split(n_q * H * q->ne[3], p->ith, p->nth, &lo, &hi);
    for (r = lo; r < hi; r++) {
        const int64_t h = r % H, iq = (r / H) % n_q, ib = r / (H * n_q), kh = h / group;
        const float *qrow = mms__load_row(q, iq, h, ib, qbuf);
        const char *mrow = mask ? mms__mask_row(mask, iq, h, ib) : NULL;
        float m_run = -INFINITY, *out = (float *)mms__row_ptr(dst, h, iq, ib);
        double s_run = 0.0;
        int64_t j0, j;
        for (i = 0; i < Dv; i++) acc[i] = 0.0f;
        for (j0 = 0; j0 < n_kv; j0 += MMS__FA_KB) {
            const int64_t nb = MMS__MIN((int64_t)MMS__FA_KB, n_kv - j0);
            float m_blk = -INFINITY, m_new;
            for (j = 0; j < nb; j++) {
                float s = mms__vec_dot_f32(D, qrow, mms__load_row(k, j0 + j, kh, ib, kbuf)) * scale;
                if (softcap != 0.0f) s = softcap * tanhf(s / softcap);
                if (mrow) s += mms__mask_at(mask, mrow, j0 + j);
                sc[j] = s;
                if (s > m_blk) m_blk = s;
            }
            if (m_blk == -INFINITY) continue;              /* all masked */
            m_new = m_blk > m_run ? m_blk : m_run;
            if (m_new > m_run && m_run != -INFINITY) {    /* rescale what was accumulated */
                float f = expf(m_run - m_new);
                for (i = 0; i < Dv; i++) acc[i] *= f;
                s_run *= f;
            }
            m_run = m_new;
            for (j = 0; j < nb; j++) {
                float w = expf(sc[j] - m_run);
                if (w == 0.0f) continue;
                s_run += w;
                mms__vec_mad_f32(Dv, acc, mms__load_row(v, j0 + j, kh, ib, vbuf), w);
            }
        }
        if (s_run > 0.0) {
            float inv = (float)(1.0 / s_run);
            for (i = 0; i < Dv; i++) out[i] = acc[i] * inv;
        } else {
            for (i = 0; i < Dv; i++) out[i] = 0.0f;   /* every key masked */
        }
    }
}
