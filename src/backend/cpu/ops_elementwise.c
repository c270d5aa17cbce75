/* >>cpu-elementwise ===============================================================================
   Element-wise ops (binary with broadcasting, unary, scale) and the copies (DUP, CONT, CPY).
   Rows are split evenly across threads. Every kernel tolerates dst sharing memory with src[0]
   (same position), which is what in-place reuse by an allocator produces. */

static void mms__cpu_binary(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0], *b = dst->src[1];
    const int64_t ne0 = dst->ne[0], nb0 = b->ne[0];
    float *abuf = p->wdata, *bbuf = abuf + ne0, *obuf = bbuf + ne0;
    struct mms__part_rows part = mms__part_rows_of(p, dst);
    int64_t k, i1, i2, i3;
    while (mms__next_row(&part, &i1, &i2, &i3)) {
        const float *x, *y;
        float *out;
        x = mms__load_row(a, i1, i2, i3, abuf);
        y = mms__load_row(b, i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3], bbuf);
        out = mms__out_row(dst, i1, i2, i3, obuf);
        for (k = 0; k < ne0; k += nb0) mms__vec_binary_f32(dst->op, nb0, out + k, x + k, y);
        if (out == obuf) mms__store_row(dst, i1, i2, i3, out);
    }
}

static void mms__cpu_unary(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0];
    const int64_t ne0 = dst->ne[0];
    const enum mms_op op = dst->op;
    const float s = op == MMS_OP_SCALE ? mms_get_op_params_f32(dst, 0) : 0.0f;
    float *abuf = p->wdata, *obuf = abuf + ne0;
    struct mms__part_rows part = mms__part_rows_of(p, dst);
    int64_t i1, i2, i3;
    while (mms__next_row(&part, &i1, &i2, &i3)) {
        const float *x;
        float *out;
        x = mms__load_row(a, i1, i2, i3, abuf);
        out = mms__out_row(dst, i1, i2, i3, obuf);
        mms__vec_unary_f32(op, ne0, out, x, s);
        if (out == obuf) mms__store_row(dst, i1, i2, i3, out);
    }
}

/* Copies a element by element into dst in logical (row-major) order; shapes may differ when the
   element counts agree. Same types copy bits; float types convert. */
static void mms__cpu_copy(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0];
    const size_t ts = mms_type_size(a->type);
    struct mms__part_rows part = mms__part_rows_of(p, a);
    int64_t lo, hi, i, a1, a2, a3;
    if (a->ne[0] == dst->ne[0]) {          /* rows line up one to one */
        while (mms__next_row(&part, &a1, &a2, &a3)) {
            int64_t d1, d2, d3;
            mms__unravel_row(dst->ne, part.r, &d1, &d2, &d3);
            if (a->type == dst->type) {
                const char *s = mms__row_ptr(a, a1, a2, a3);
                char *d = mms__row_ptr(dst, d1, d2, d3);
                if (a->nb[0] == ts && dst->nb[0] == ts) memmove(d, s, mms_row_size(a->type, a->ne[0]));
                else for (i = 0; i < a->ne[0]; i++) memmove(d + i * (int64_t)dst->nb[0], s + i * (int64_t)a->nb[0], ts);
            } else {
                mms__store_row(dst, d1, d2, d3, mms__load_row(a, a1, a2, a3, p->wdata));
            }
        }
        return;
    }
    if (mms_blck_size(a->type) > 1 || mms_blck_size(dst->type) > 1) {   /* mms_cpy lets only whole rows through */
        mms__compute_fail(p, MMS_ERR_UNSUPPORTED, "%s: block types are copied in whole rows only", mms__tensor_desc(dst).s);
        return;
    }
    mms__split(mms_nelements(a), p->ith, p->nth, &lo, &hi);
    for (i = lo; i < hi; i++) {               /* general case: map flat indices */
        int64_t ai[4], di[4], k, rem;
        const char *s;
        char *d;
        for (rem = i, k = 0; k < 4; k++) { ai[k] = rem % a->ne[k]; rem /= a->ne[k]; }
        for (rem = i, k = 0; k < 4; k++) { di[k] = rem % dst->ne[k]; rem /= dst->ne[k]; }
        s = mms__row_ptr(a, ai[1], ai[2], ai[3]) + ai[0] * (int64_t)a->nb[0];
        d = mms__row_ptr(dst, di[1], di[2], di[3]) + di[0] * (int64_t)dst->nb[0];
        if (a->type == dst->type) {
            memmove(d, s, ts);
        } else {
            float f = mms__get_f32(a, ai[0], ai[1], ai[2], ai[3]);
            mms__type_traits[dst->type].from_float(&f, d, 1);
        }
    }
}
