/* >>cpu-norm ======================================================================================
   Row reductions: layer norm, RMS norm, sum_rows, argmax. Sums are accumulated in double (on the
   AVX2 path too, four lanes at a time), so long rows lose no precision. */

static void mms__cpu_norm(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0];
    const int64_t n = dst->ne[0];
    const float eps = mms_get_op_params_f32(dst, 0);
    float *abuf = p->wdata, *obuf = abuf + n;
    struct mms__part_rows part = mms__part_rows_of(p, dst);
    int64_t i1, i2, i3;
    while (mms__next_row(&part, &i1, &i2, &i3)) {
        const float *x;
        float *out, scale;
        double sum, sq, mean = 0.0;
        x = mms__load_row(a, i1, i2, i3, abuf);
        out = mms__out_row(dst, i1, i2, i3, obuf);
        if (dst->op == MMS_OP_NORM) {           /* the mean first, then squares around it */
            mms__vec_sums_f64(n, x, 0.0, &sum, &sq);
            mean = sum / (double)n;
        }
        mms__vec_sums_f64(n, x, mean, &sum, &sq);
        scale = (float)(1.0 / sqrt(sq / (double)n + (double)eps));
        mms__vec_shift_scale_f32(n, out, x, mean, scale);
        if (out == obuf) mms__store_row(dst, i1, i2, i3, out);
    }
}

static void mms__cpu_sum_rows(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0];
    struct mms__part_rows part = mms__part_rows_of(p, a);
    int64_t i, i1, i2, i3;
    while (mms__next_row(&part, &i1, &i2, &i3)) {
        const float *x;
        double sum = 0.0;
        x = mms__load_row(a, i1, i2, i3, p->wdata);
        for (i = 0; i < a->ne[0]; i++) sum += x[i];
        *(float *)mms__row_ptr(dst, i1, i2, i3) = (float)sum;
    }
}

static void mms__cpu_argmax(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0];
    struct mms__part_rows part = mms__part_rows_of(p, a);
    int64_t i, i1, i2, i3;
    while (mms__next_row(&part, &i1, &i2, &i3)) {
        int64_t best = 0;
        const float *x;
        x = mms__load_row(a, i1, i2, i3, p->wdata);
        for (i = 1; i < a->ne[0]; i++)
            if (x[i] > x[best] || (x[best] != x[best] && x[i] == x[i])) best = i;   /* NaN never wins */
        ((int32_t *)dst->data)[part.r] = (int32_t)best;
    }
}
