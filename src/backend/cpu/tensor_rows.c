/* >>tensor_rows ===================================================================================
   Rows of tensors for the CPU kernels: a row's address, a row read as f32 or bf16 (converted into
   a buffer where it is not already), rows packed as GEMM panels, a row written back, and how a
   job's parts split rows. */

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

/* Row (i1, i2, i3) of a BF16 tensor as contiguous bf16: in place when it is, else gathered into buf. */
static const mms_bf16_t *mms__bf16_row(const struct mms_tensor *t, int64_t i1, int64_t i2, int64_t i3, mms_bf16_t *buf) {
    const char *row = mms__row_ptr(t, i1, i2, i3);
    int64_t k;
    if (t->nb[0] == sizeof(mms_bf16_t)) return (const mms_bf16_t *)row;
    for (k = 0; k < t->ne[0]; k++) memcpy(buf + k, row + k * (int64_t)t->nb[0], sizeof(mms_bf16_t));
    return buf;
}

/* Rows [r0, r0 + n) of a BF16 tensor t in (i2, i3) as the B panels of mms__gemm_bf16 (the rows its
   columns): panels of 16 rows in bf16 pairs, one pair a float's bits, pack[p * 16 P + kp * 16 + i] =
   (t[r0 + 16 p + i][2 kp], [2 kp + 1]) with P = (ne[0] + 1) / 2, zero past ne[0] and past n up to a whole
   pair of panels. rowbuf holds 16 rows of P pairs, written by memcpy only, so the transposer (which
   moves bits) may read them as floats; gathered holds one row of a strided t. */
static void mms__pack_rows_bf16(const struct mms_tensor *t, int64_t r0, int64_t n, int64_t i2, int64_t i3, float *pack, float *rowbuf,
                                mms_bf16_t *gathered) {
    const int64_t K = t->ne[0], P = (K + 1) / 2;
    int64_t p, r;
    for (p = 0; p * 16 < MMS__ALIGN_UP(n, 32); p++) {
        const int64_t rows = MMS__MAX(0, MMS__MIN(16, n - p * 16));
        memset(rowbuf, 0, (size_t)(16 * P) * sizeof(float));
        for (r = 0; r < rows; r++) memcpy(rowbuf + r * P, mms__bf16_row(t, r0 + p * 16 + r, i2, i3, gathered), (size_t)K * sizeof(mms_bf16_t));
        mms__transpose_f32(16, P, rowbuf, P, pack + p * 16 * P, 16);
    }
}

/* Rows [r0, r0 + n) of a BF16 tensor t in (i2, i3) as the B panels of mms__gemm_bf16 with the rows its
   k (the value rows of attention): rows 2 kp and 2 kp + 1 interleaved, pack[c / 16 * 16 P + kp * 16 +
   c % 16] = (t[r0 + 2 kp][c], t[r0 + 2 kp + 1][c]) with P = (n + 1) / 2, zero past n and past ne[0] up
   to a whole pair of panels. rowbuf holds two rows of a strided t. Only mms__gemm_bf16 reads them. */
static void mms__pack_pairs_bf16(const struct mms_tensor *t, int64_t r0, int64_t n, int64_t i2, int64_t i3, uint32_t *pack,
                                 mms_bf16_t *rowbuf) {
#if MMS__HAVE_AVX2
    if (mms__avx512()) {
        const int64_t W = t->ne[0], P = (n + 1) / 2;
        int64_t kp;
        for (kp = 0; kp < P; kp++)
            mms__interleave_bf16_avx512(W, mms__bf16_row(t, r0 + 2 * kp, i2, i3, rowbuf),
                                        2 * kp + 1 < n ? mms__bf16_row(t, r0 + 2 * kp + 1, i2, i3, rowbuf + W) : NULL,
                                        pack + kp * 16, 16 * P, MMS__ALIGN_UP(W, 32) / 16);
        return;
    }
#endif
    MMS__UNUSED(t); MMS__UNUSED(r0); MMS__UNUSED(n); MMS__UNUSED(i2); MMS__UNUSED(i3); MMS__UNUSED(pack); MMS__UNUSED(rowbuf);
    mms__abort(__FILE__, __LINE__, "mms__pack_pairs_bf16 without its kernels");
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
