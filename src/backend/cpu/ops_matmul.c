/* >>cpu-matmul ====================================================================================
   MUL_MAT: dst[m, n] = dot(a row m, b row n), both rows running along K = ne[0]. The work is cut
   into tiles of MB rows of a by NB rows of b per batch, handed out through an atomic counter so
   both cores stay busy whatever the sizes. Operands that are not contiguous f32 are converted per
   tile into the thread's scratch. The AVX2 path computes 4x3 blocks of dot products at once
   (7 loads feed 12 FMAs); edges and the scalar path use single dot products. */

#define MMS__MM_MB 64
#define MMS__MM_NB 48

static size_t mms__mul_mat_work_size(const struct mms_tensor *dst) {
    return (size_t)(MMS__MM_MB + MMS__MM_NB) * (size_t)dst->src[0]->ne[0] * sizeof(float);
}

#if MMS__HAVE_AVX2
/* c[i*3 + j] = dot(a_i, b_j) for 4 rows of a and 3 rows of b */
static MMS__TARGET_AVX2 void mms__mm_4x3_avx2(int64_t K, const float *const *A, const float *const *B, float *c) {
    const float *a0 = A[0], *a1 = A[1], *a2 = A[2], *a3 = A[3], *b0 = B[0], *b1 = B[1], *b2 = B[2];
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c02 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps(), c12 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps(), c22 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps(), c32 = _mm256_setzero_ps();
    int64_t k = 0;
    int i, j;
    for (; k + 8 <= K; k += 8) {
        __m256 vb0 = _mm256_loadu_ps(b0 + k), vb1 = _mm256_loadu_ps(b1 + k), vb2 = _mm256_loadu_ps(b2 + k), va;
        va = _mm256_loadu_ps(a0 + k);
        c00 = _mm256_fmadd_ps(va, vb0, c00); c01 = _mm256_fmadd_ps(va, vb1, c01); c02 = _mm256_fmadd_ps(va, vb2, c02);
        va = _mm256_loadu_ps(a1 + k);
        c10 = _mm256_fmadd_ps(va, vb0, c10); c11 = _mm256_fmadd_ps(va, vb1, c11); c12 = _mm256_fmadd_ps(va, vb2, c12);
        va = _mm256_loadu_ps(a2 + k);
        c20 = _mm256_fmadd_ps(va, vb0, c20); c21 = _mm256_fmadd_ps(va, vb1, c21); c22 = _mm256_fmadd_ps(va, vb2, c22);
        va = _mm256_loadu_ps(a3 + k);
        c30 = _mm256_fmadd_ps(va, vb0, c30); c31 = _mm256_fmadd_ps(va, vb1, c31); c32 = _mm256_fmadd_ps(va, vb2, c32);
    }
    c[0] = mms__hsum256(c00); c[1]  = mms__hsum256(c01); c[2]  = mms__hsum256(c02);
    c[3] = mms__hsum256(c10); c[4]  = mms__hsum256(c11); c[5]  = mms__hsum256(c12);
    c[6] = mms__hsum256(c20); c[7]  = mms__hsum256(c21); c[8]  = mms__hsum256(c22);
    c[9] = mms__hsum256(c30); c[10] = mms__hsum256(c31); c[11] = mms__hsum256(c32);
    for (; k < K; k++)
        for (i = 0; i < 4; i++)
            for (j = 0; j < 3; j++) c[i * 3 + j] += A[i][k] * B[j][k];
}
#endif

/* out[j * ldo + i] = dot(A[i], B[j]) for i < mr, j < nr */
static void mms__mm_tile(int64_t K, const float *const *A, int64_t mr, const float *const *B, int64_t nr, float *out, int64_t ldo) {
    int64_t i = 0, j;
#if MMS__HAVE_AVX2
    if (mms__avx2()) {
        float c[12];
        int64_t jj, ii;
        for (; i + 4 <= mr; i += 4) {
            for (j = 0; j + 3 <= nr; j += 3) {
                mms__mm_4x3_avx2(K, A + i, B + j, c);
                for (ii = 0; ii < 4; ii++)
                    for (jj = 0; jj < 3; jj++) out[(j + jj) * ldo + i + ii] = c[ii * 3 + jj];
            }
            for (; j < nr; j++)
                for (ii = 0; ii < 4; ii++) out[j * ldo + i + ii] = mms__vec_dot_f32(K, A[i + ii], B[j]);
        }
    }
#endif
    for (; i < mr; i++)
        for (j = 0; j < nr; j++) out[j * ldo + i] = mms__vec_dot_f32(K, A[i], B[j]);
}

/* Pointers to rows [r0, r0 + n) of t in batch (i2, i3) as contiguous f32, converting into buf. */
static void mms__mm_rows(const struct mms_tensor *t, int64_t r0, int64_t n, int64_t i2, int64_t i3,
                         float *buf, const float **rows) {
    int64_t r;
    for (r = 0; r < n; r++) rows[r] = mms__load_row(t, r0 + r, i2, i3, buf + r * t->ne[0]);
}

static void mms__cpu_mul_mat(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0], *b = dst->src[1];
    const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1];
    const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    const int64_t tiles_m = (M + MMS__MM_MB - 1) / MMS__MM_MB, tiles_n = (N + MMS__MM_NB - 1) / MMS__MM_NB;
    const int64_t n_items = tiles_m * tiles_n * b->ne[2] * b->ne[3];
    const int64_t ldo = (int64_t)(dst->nb[1] / sizeof(float));
    float *abuf = p->wdata, *bbuf = abuf + MMS__MM_MB * K;
    const float *arows[MMS__MM_MB], *brows[MMS__MM_NB];
    int64_t cached_b = -1;   /* the item whose b tile is in brows, reused while tm varies */

    if (K == 0) {            /* empty products are zero */
        int64_t r, lo, hi;
        mms__split(mms_nrows(dst), p->ith, p->nth, &lo, &hi);
        for (r = lo; r < hi; r++) {
            int64_t i1, i2, i3;
            mms__unravel_row(dst->ne, r, &i1, &i2, &i3);
            memset(mms__row_ptr(dst, i1, i2, i3), 0, (size_t)M * sizeof(float));
        }
        return;
    }
    for (;;) {
        int64_t item = mms__atomic_fetch_add(p->counter, 1), tm, tn, batch, i12, i13, m0, n0, mr, nr;
        if (item >= n_items) break;
        tm = item % tiles_m;
        tn = (item / tiles_m) % tiles_n;
        batch = item / (tiles_m * tiles_n);
        i12 = batch % b->ne[2];
        i13 = batch / b->ne[2];
        m0 = tm * MMS__MM_MB;
        n0 = tn * MMS__MM_NB;
        mr = MMS__MIN(MMS__MM_MB, M - m0);
        nr = MMS__MIN(MMS__MM_NB, N - n0);
        if (cached_b != item / tiles_m) {
            mms__mm_rows(b, n0, nr, i12, i13, bbuf, brows);
            cached_b = item / tiles_m;
        }
        mms__mm_rows(a, m0, mr, i12 / r2, i13 / r3, abuf, arows);
        mms__mm_tile(K, arows, mr, brows, nr, (float *)mms__row_ptr(dst, n0, i12, i13) + m0, ldo);
    }
}
