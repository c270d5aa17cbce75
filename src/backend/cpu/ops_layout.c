/* >>cpu-layout ====================================================================================
   Ops that move data: concat, pad, get_rows and im2col. */

/* Copies n elements of ts bytes between strided rows. */
static void mms__copy_elems(char *d, size_t dstride, const char *s, size_t sstride, int64_t n, size_t ts) {
    int64_t i;
    if (dstride == ts && sstride == ts) { memmove(d, s, (size_t)n * ts); return; }
    for (i = 0; i < n; i++) memmove(d + i * (int64_t)dstride, s + i * (int64_t)sstride, ts);
}

static void mms__zero_elems(char *d, size_t dstride, int64_t n, size_t ts) {
    int64_t i;
    if (dstride == ts) { memset(d, 0, (size_t)n * ts); return; }
    for (i = 0; i < n; i++) memset(d + i * (int64_t)dstride, 0, ts);
}

static void mms__cpu_concat(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0], *b = dst->src[1];
    const int dim = mms_get_op_params_i32(dst, 0);
    const size_t ts = mms_type_size(dst->type);
    struct mms__part_rows part = mms__part_rows_of(p, dst);
    int64_t idx[4], k;
    while (mms__next_row(&part, &idx[1], &idx[2], &idx[3])) {
        char *d;
        d = mms__row_ptr(dst, idx[1], idx[2], idx[3]);
        if (dim == 0) {
            mms__copy_elems(d, dst->nb[0], mms__row_ptr(a, idx[1], idx[2], idx[3]), a->nb[0], a->ne[0], ts);
            mms__copy_elems(d + a->ne[0] * (int64_t)dst->nb[0], dst->nb[0], mms__row_ptr(b, idx[1], idx[2], idx[3]), b->nb[0], b->ne[0], ts);
        } else if (idx[dim] < a->ne[dim]) {
            mms__copy_elems(d, dst->nb[0], mms__row_ptr(a, idx[1], idx[2], idx[3]), a->nb[0], a->ne[0], ts);
        } else {
            for (k = 1; k < 4; k++) if (k == dim) idx[k] -= a->ne[dim];
            mms__copy_elems(d, dst->nb[0], mms__row_ptr(b, idx[1], idx[2], idx[3]), b->nb[0], b->ne[0], ts);
        }
    }
}

static void mms__cpu_pad(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0];
    const size_t ts = mms_type_size(dst->type);
    struct mms__part_rows part = mms__part_rows_of(p, dst);
    int64_t i1, i2, i3;
    while (mms__next_row(&part, &i1, &i2, &i3)) {
        char *d;
        d = mms__row_ptr(dst, i1, i2, i3);
        if (i1 < a->ne[1] && i2 < a->ne[2] && i3 < a->ne[3]) {
            mms__copy_elems(d, dst->nb[0], mms__row_ptr(a, i1, i2, i3), a->nb[0], a->ne[0], ts);
            mms__zero_elems(d + a->ne[0] * (int64_t)dst->nb[0], dst->nb[0], dst->ne[0] - a->ne[0], ts);
        } else {
            mms__zero_elems(d, dst->nb[0], dst->ne[0], ts);
        }
    }
}

static void mms__cpu_get_rows(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0], *b = dst->src[1];
    struct mms__part_rows part = mms__part_rows_of(p, dst);
    int64_t i1, i2, i3;
    while (mms__next_row(&part, &i1, &i2, &i3)) {
        int32_t row;
        memcpy(&row, mms__row_ptr(b, i2, i3, 0) + i1 * (int64_t)b->nb[0], sizeof row);
        if (row < 0 || row >= a->ne[1]) {
            mms__compute_fail(p, MMS_ERR_INVALID_ARG, "GET_ROWS %s: index %d at position %lld is outside 0..%lld of %s",
                              mms__tensor_desc(dst).s, (int)row, (long long)i1, (long long)a->ne[1] - 1, mms__tensor_desc(a).s);
            return;
        }
        if (a->type == MMS_TYPE_I32)
            mms__copy_elems(mms__row_ptr(dst, i1, i2, i3), dst->nb[0], mms__row_ptr(a, row, i2, i3), a->nb[0], a->ne[0], sizeof(int32_t));
        else
            mms__store_row(dst, i1, i2, i3, mms__load_row(a, row, i2, i3, p->wdata));
    }
}

/* Row rows[i] of dst (a view of a) from row i of b, for every (ne2, ne3). */
static void mms__cpu_set_rows(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *b = dst->src[0], *rows = dst->src[1];
    struct mms__part_rows part = mms__part_rows_of(p, b);
    int64_t i1, i2, i3;
    while (mms__next_row(&part, &i1, &i2, &i3)) {
        int32_t row;
        memcpy(&row, (const char *)rows->data + i1 * (int64_t)rows->nb[0], sizeof row);
        if (row < 0 || row >= dst->ne[1]) {
            mms__compute_fail(p, MMS_ERR_INVALID_ARG, "SET_ROWS %s: index %d at position %lld is outside 0..%lld",
                              mms__tensor_desc(dst).s, (int)row, (long long)i1, (long long)dst->ne[1] - 1);
            return;
        }
        mms__store_row(dst, row, i2, i3, mms__load_row(b, i1, i2, i3, p->wdata));
    }
}

/* One output row (a patch) per output position; column c = (ic*KH + ky)*KW + kx (2-D) or
   ic*KW + kx (1-D), zero where the kernel reaches into the padding. */
static void mms__cpu_im2col(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *kern = dst->src[0], *in = dst->src[1];
    const int s0 = mms_get_op_params_i32(dst, 0), s1 = mms_get_op_params_i32(dst, 1);
    const int p0 = mms_get_op_params_i32(dst, 2), p1 = mms_get_op_params_i32(dst, 3);
    const int d0 = mms_get_op_params_i32(dst, 4), d1 = mms_get_op_params_i32(dst, 5);
    const bool is_2D = mms_get_op_params_i32(dst, 6) != 0;
    const int64_t KW = kern->ne[0], KH = is_2D ? kern->ne[1] : 1, IC = is_2D ? kern->ne[2] : kern->ne[1];
    float *obuf = p->wdata;
    struct mms__part_rows part = mms__part_rows_of(p, dst);
    int64_t ox, oy, n;
    while (mms__next_row(&part, &ox, &oy, &n)) {
        int64_t ic, ky, kx;
        float *out, *o;
        if (!is_2D) { n = oy; oy = 0; }
        out = mms__out_row(dst, ox, is_2D ? oy : n, is_2D ? n : 0, obuf);
        o = out;
        for (ic = 0; ic < IC; ic++) {
            for (ky = 0; ky < KH; ky++) {
                const int64_t iy = oy * s1 + ky * d1 - p1;
                for (kx = 0; kx < KW; kx++) {
                    const int64_t ix = ox * s0 + kx * d0 - p0;
                    if (is_2D) *o++ = (ix >= 0 && ix < in->ne[0] && iy >= 0 && iy < in->ne[1]) ? mms__get_f32(in, ix, iy, ic, n) : 0.0f;
                    else       *o++ = (ix >= 0 && ix < in->ne[0]) ? mms__get_f32(in, ix, ic, n, 0) : 0.0f;
                }
            }
        }
        if (out == obuf) mms__store_row(dst, ox, is_2D ? oy : n, is_2D ? n : 0, out);
    }
}

/* Each dst row is the matching row of a (indices modulo a's shape), repeated along ne[0]. */
static void mms__cpu_repeat(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0];
    const size_t ts = mms_type_size(dst->type);
    struct mms__part_rows part = mms__part_rows_of(p, dst);
    int64_t k, i1, i2, i3;
    while (mms__next_row(&part, &i1, &i2, &i3)) {
        char *d;
        const char *s;
        d = mms__row_ptr(dst, i1, i2, i3);
        s = mms__row_ptr(a, i1 % a->ne[1], i2 % a->ne[2], i3 % a->ne[3]);
        for (k = 0; k < dst->ne[0]; k += a->ne[0])
            mms__copy_elems(d + k * (int64_t)dst->nb[0], dst->nb[0], s, a->nb[0], a->ne[0], ts);
    }
}
