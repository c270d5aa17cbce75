/* >>cpu-matmul ====================================================================================
   MUL_MAT: dst[n, m] = dot(a row m, b row n), both rows running along K = ne[0]. The work is cut
   into tiles of MB rows of a by NB rows of b per batch, handed out through an atomic counter so
   both cores stay busy whatever the sizes (1601 included); tiles depend on the shapes only, so
   results do not depend on the thread count. Which integer kernels quantized weights take on the
   kernel set in use, and from which column count, is their kernel card's (quant_dot:
   struct mms__quant_card; its format, struct mms__quant_format, gives the blocks and the layout).
   mms__mm_plan_of picks one of the strategies below per product (enum mms__mm_strategy) and lays
   out its scratch; tests/test_mm_plan.c checks its choices on their own.
   - SIMD sets, N > 4 (f16/f32 weights: N > 8) (GEMM): the a tile is packed transposed into panels of 16 columns (f16/bf16
     converted on the way) and kept while consecutive tiles walk along b; the register block then
     broadcasts 6 b values per k against the 16 columns of the panel (AVX2: 12 FMAs per 8 loads;
     NEON: 24 per 10), writing dst rows directly. Tiles walk along b first so each thread packs a
     tile of a once.
   - N <= 4, f16/f32 N <= 8 (decode GEMV, of up to 8 sequences) and the scalar path: dot products
     straight from the rows (SIMD: 4 rows of weights against one column at a time, or on AVX2 2 rows
     against 4 columns, on AVX-512 4 rows against up to 4 columns or 2 rows against up to 8, f16
     converted inside the dot, each (row, column) summed the same way whatever the columns beside
     it; quantized weights against 8-bit activations, see quant_dot), so the weights stream from
     memory exactly once.
   - BF16 weights on AVX-512 (vdpbf16ps), N > 4: the b tile is rounded to bf16 pairs (k, k + 1) and
     tiles of 256 rows of a are packed as panels of 16 in pairs (more rows than the f32 GEMM's 64,
     so each converted b tile serves more of them); a 12 x 32 block of f32 sums (vec.c).
   - Q4_0, Q4_K and Q6_K weights on AVX2, N > 4: the b tile is rounded to 8-bit blocks as below, and each tile of
     a is repacked 8 rows side by side (quant_dot) into the scratch of the GEMM's packed tile, so
     one kernel call makes 8 rows by 4 columns (AVX-512: two groups, 16 rows, in zmm registers).
   - Q4_0, Q4_K, Q6_K and Q8_0 weights kept repacked (a CPU_REPACK buffer, repack.c): the groups of 8 rows are
     read in place by the same kernel, and 1 to 4 columns go one by one through the one-column form
     that walks groups of the tile side by side (the cards' gemv_groups: 4 for Q4_0 and Q8_0, 2
     for the K types); without AVX2 (and for Q8_0 prompts on AVX2, whose 8-row kernel would be no
     faster than the GEMM there; AVX-512 has one past 8 columns) each tile's rows are unpacked
     first.
   - Quantized weights as they are with a 4-column integer dot (the K types on AVX2 for N = 4; Q8_0
     for N <= 8, a decode step of several sequences): the b tile is
     rounded to 8-bit blocks once per thread and tile, then each weight row of the a tile is
     dotted against 4 columns at a time, those 4 staying in L1 while the a tile streams from L2. */

#define MMS__MM_MB 64
#define MMS__MM_MB_BF16 256
#define MMS__MM_NB 48
#define MMS__MM_GEMV_N 4

static size_t mms__mul_mat_work_size(const struct mms_tensor *dst) {
    const int64_t K = dst->src[0]->ne[0];
    const size_t unpacked = mms__is_repacked(dst->src[0]) ? MMS__MM_MB * mms_row_size(dst->src[0]->type, K) + 64   /* <= its f32 tile */
                          : dst->src[0]->type == MMS_TYPE_BF16 ? (MMS__MM_NB + 16 + MMS__MM_MB_BF16) * (size_t)((K + 1) / 2) * 4 + 64
                          : 0;   /* bf16 a: b's tile and a's in bf16 pairs */
    return (size_t)(MMS__MM_MB + 16 + MMS__MM_NB) * (size_t)K * sizeof(float) + MMS__MM_NB * mms__q8_act_row_size(K) + 128 + unpacked;
}

/* out[j * ldo + i] = dot(A[i], B[j]) for i < mr, j < nr */
static void mms__mm_tile(int64_t K, const float *const *A, int64_t mr, const float *const *B, int64_t nr, float *out, int64_t ldo) {
    int64_t i, j;
    for (i = 0; i < mr; i++)
        for (j = 0; j < nr; j++) out[j * ldo + i] = mms__vec_dot_f32(K, A[i], B[j]);
}

/* Pointers to rows [r0, r0 + n) of t in batch (i2, i3) as contiguous f32, converting into buf. */
static void mms__mm_rows(const struct mms_tensor *t, int64_t r0, int64_t n, int64_t i2, int64_t i3,
                         float *buf, const float **rows) {
    int64_t r;
    for (r = 0; r < n; r++) rows[r] = mms__load_row(t, r0 + r, i2, i3, buf + r * t->ne[0]);
}

/* Rows [r0, r0 + n) of t as f32 with one leading dimension: in place when t has it, else copied. */
static const float *mms__mm_block(const struct mms_tensor *t, int64_t r0, int64_t n, int64_t i2, int64_t i3, float *buf, int64_t *ld) {
    const int64_t K = t->ne[0];
    int64_t r;
    if (t->type == MMS_TYPE_F32 && t->nb[0] == sizeof(float) && t->nb[1] % sizeof(float) == 0) {
        *ld = (int64_t)(t->nb[1] / sizeof(float));
        return (const float *)mms__row_ptr(t, r0, i2, i3);
    }
    for (r = 0; r < n; r++) {
        const float *x = mms__load_row(t, r0 + r, i2, i3, buf + r * K);
        if (x != buf + r * K) memcpy(buf + r * K, x, (size_t)K * sizeof(float));
    }
    *ld = K;
    return buf;
}

/* Packs rows [m0, m0 + mr) of a into panels of 16: pack[p * 16 K + k * 16 + i] = a[m0 + 16 p + i][k],
   zero past mr. rowbuf holds 16 converted rows. */
static void mms__mm_pack(const struct mms_tensor *a, int64_t m0, int64_t mr, int64_t i2, int64_t i3, float *pack, float *rowbuf) {
    const int64_t K = a->ne[0];
    int64_t p, k, i;
    for (p = 0; p * 16 < mr; p++) {
        const int64_t n = MMS__MIN(16, mr - p * 16);
        int64_t ld;
        const float *rows = mms__mm_block(a, m0 + p * 16, n, i2, i3, rowbuf, &ld);
        float *panel = pack + p * 16 * K;
        mms__transpose_f32(n, K, rows, ld, panel, 16);
        if (n < 16) for (k = 0; k < K; k++) for (i = n; i < 16; i++) panel[k * 16 + i] = 0.0f;
    }
}

/* How mms__cpu_mul_mat computes a product, one strategy per product (the list at the top of this
   file). To add one: a value here, its choice in mms__mm_plan_of, its branch in mms__cpu_mul_mat
   and its cases in tests/test_mm_plan.c. */
enum mms__mm_strategy {
    MMS__MM_ZERO,          /* K = 0: the output is zeros */
    MMS__MM_GEMM_F32,      /* a's tile packed as f32 panels (converted, dequantized or unpacked on the way), the f32 GEMM */
    MMS__MM_GEMM_BF16,     /* b rounded to bf16 pairs against a's tile packed as bf16 panels (the set's bf16 GEMM) */
    MMS__MM_QUANT_TILES,   /* the card's 8-row kernels on groups of 8 rows (packed per tile, or in place when
                              repacked); decode on repacked weights: the card's GEMV */
    MMS__MM_INT_DOTS,      /* the card's integer dots (4 columns, 4 rows or one) against 8-bit activations */
    MMS__MM_FLOAT_DIRECT,  /* f16/f32 weights dotted straight from their rows */
    MMS__MM_ROWS           /* both sides as f32 rows, one dot per output (the scalar set; what has no faster path) */
};

/* The plan of one product: its strategy, the kernels and tiles it takes, and its scratch (the
   node's work buffer) as named offsets in bytes from its first 64-byte boundary. It depends on the
   shapes, a's type and buffer, and the kernel set (card: the set's card for a's type or NULL,
   simd: not the scalar set, gemm_bf16: the set has the bf16 GEMM), never on the thread count. */
struct mms__mm_plan {
    enum mms__mm_strategy            strategy;
    const struct mms__quant_format  *fmt;            /* a's type's; NULL for the float types */
    const struct mms__quant_card    *card;           /* the card whose kernels run (QUANT_TILES, INT_DOTS), else NULL */
    mms__q8_dot4_fn                  dot4;           /* INT_DOTS: 4 columns at a time, or NULL */
    bool                             repacked;       /* a is a CPU_REPACK tensor (repack.c) */
    bool                             unpack;         /* ... whose tiles are unpacked first (no kernel reads them in place) */
    bool                             gemv;           /* QUANT_TILES on up to MMS__MM_GEMV_N columns: one column against groups */
    bool                             act_unsigned;   /* b's 8-bit rows + 128 (the card's tile kernels) */
    bool                             along_b;        /* tiles walk along b first (a's packed tile reused), else along a */
    int64_t                          mb, nb;         /* a tile: rows of a, rows of b */
    int64_t                          tiles_m, tiles_n, n_items;
    size_t                           q8_row;         /* bytes of one of b's rows in 8 bits */
    size_t                           a_pack;         /* a's tile packed (f32 panels, groups of 8 rows) or as f32 rows */
    size_t                           a_rows16;       /* 16 of a's rows converted for packing */
    size_t                           b_rows;         /* b's tile as f32 rows */
    size_t                           b_q8;           /* b's tile in 8 bits, q8_row bytes a row (GEMM_BF16: a strided row) */
    size_t                           unpacked;       /* a repacked tile unpacked; or GEMM_BF16's b tile in bf16 pairs, */
    size_t                           a_bf16;         /* then a's tile packed in bf16 pairs */
    size_t                           scratch;        /* bytes the strategy uses from the start */
};

static struct mms__mm_plan mms__mm_plan_of(const struct mms_tensor *a, const struct mms_tensor *b,
                                           const struct mms__quant_card *card, bool simd, bool gemm_bf16) {
    const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1];
    const bool f16_direct = a->type == MMS_TYPE_F16 && a->nb[0] == sizeof(mms_fp16_t) && a->nb[1] % sizeof(mms_fp16_t) == 0;
    const bool f32_direct = a->type == MMS_TYPE_F32 && a->nb[0] == sizeof(float) && a->nb[1] % sizeof(float) == 0;
    const int64_t gemv_n = f16_direct || f32_direct ? MMS__DECODE_MAX_COLS : MMS__MM_GEMV_N;   /* f16/f32: packing a
                                                                                                 tile does not pay below */
    const struct mms__quant_card *c = K % 32 == 0 ? card : NULL;   /* the set's integer kernels */
    const bool tiles = c && c->tile && N > MMS__MM_GEMV_N && N >= c->tile_from_n;
    const mms__q8_dot4_fn dot4 = c && N <= c->dot4_max_n ? c->dot4 : NULL;
    struct mms__mm_plan p;
    bool in_place;
    memset(&p, 0, sizeof p);
    p.fmt = mms__quant_format_of(a->type);
    p.repacked = mms__is_repacked(a);
    in_place = p.repacked && c && (N <= MMS__MM_GEMV_N ? c->gemv != NULL : tiles);   /* kernels read a's groups in place */
    if (K == 0) p.strategy = MMS__MM_ZERO;
    else if (tiles || in_place) p.strategy = MMS__MM_QUANT_TILES;   /* before the GEMM: integer kernels take those */
    else if (simd && N > gemv_n && !dot4) p.strategy = a->type == MMS_TYPE_BF16 && gemm_bf16 ? MMS__MM_GEMM_BF16 : MMS__MM_GEMM_F32;
    else if (c && c->dot) p.strategy = MMS__MM_INT_DOTS;
    else if (simd && (f16_direct || f32_direct)) p.strategy = MMS__MM_FLOAT_DIRECT;
    else p.strategy = MMS__MM_ROWS;
    p.card = p.strategy == MMS__MM_QUANT_TILES || p.strategy == MMS__MM_INT_DOTS ? c : NULL;
    p.dot4 = p.strategy == MMS__MM_INT_DOTS ? dot4 : NULL;
    p.unpack = p.repacked && !in_place;
    p.gemv = p.strategy == MMS__MM_QUANT_TILES && N <= MMS__MM_GEMV_N;
    p.act_unsigned = p.strategy == MMS__MM_QUANT_TILES && c->act_unsigned && N > MMS__MM_GEMV_N;
    p.along_b = p.strategy == MMS__MM_GEMM_F32 || p.strategy == MMS__MM_GEMM_BF16;
    p.mb = p.strategy == MMS__MM_GEMM_BF16 ? MMS__MM_MB_BF16 : MMS__MM_MB;   /* bf16: b's conversion shared by more rows */
    p.nb = MMS__MM_NB;
    p.tiles_m = (M + p.mb - 1) / p.mb;
    p.tiles_n = (N + p.nb - 1) / p.nb;
    p.n_items = p.tiles_m * p.tiles_n * b->ne[2] * b->ne[3];
    p.q8_row = mms__q8_act_row_size(K);
    p.a_pack = 0;
    p.a_rows16 = p.a_pack + (size_t)(MMS__MM_MB * K) * sizeof(float);
    p.b_rows = p.a_rows16 + (size_t)(16 * K) * sizeof(float);
    p.b_q8 = p.b_rows + (size_t)(MMS__MM_NB * K) * sizeof(float);
    p.unpacked = MMS__ALIGN_UP(p.b_q8 + MMS__MM_NB * p.q8_row, 64);
    p.a_bf16 = p.unpacked + MMS__ALIGN_UP(MMS__MM_NB * ((K + 1) / 2), 16) * sizeof(uint32_t);
    p.scratch = p.strategy == MMS__MM_QUANT_TILES || p.strategy == MMS__MM_INT_DOTS ? p.unpacked : p.b_q8;
    if (p.unpack) p.scratch = p.unpacked + (size_t)MMS__MM_MB * mms_row_size(a->type, K);
    if (p.strategy == MMS__MM_GEMM_BF16) p.scratch = p.a_bf16 + (size_t)(MMS__MM_MB_BF16 * ((K + 1) / 2)) * sizeof(uint32_t);
    return p;
}

static void mms__cpu_mul_mat(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0], *b = dst->src[1];
    const struct mms__mm_plan plan = mms__mm_plan_of(a, b, mms__quant_card_of(a->type), mms__simd(), mms__vec_has_gemm_bf16());
    const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1];
    const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    const int64_t ldo = (int64_t)(dst->nb[1] / sizeof(float));
    const bool repacked = plan.repacked;
    const struct mms__quant_format *fmt = plan.fmt;
    const bool gemm = plan.along_b, bf16_gemm = plan.strategy == MMS__MM_GEMM_BF16;
    const struct mms__quant_card *x8 = plan.strategy == MMS__MM_QUANT_TILES ? plan.card : NULL;   /* the 8-row kernels run */
    const mms__q8_dot_fn q8_dot = plan.card ? plan.card->dot : NULL;   /* b's rows in 8 bits for the card's kernels */
    const mms__q8_dot4_fn q8_dot4 = plan.dot4;
    const mms__q8_dot_rows_fn q8_dot_rows = plan.strategy == MMS__MM_INT_DOTS ? plan.card->dot_rows : NULL;
    const bool act_unsigned = plan.act_unsigned;
    const bool f16_direct = plan.strategy == MMS__MM_FLOAT_DIRECT && a->type == MMS_TYPE_F16;
    const int64_t mb = plan.mb, tiles_m = plan.tiles_m, tiles_n = plan.tiles_n, n_items = plan.n_items;
    char *const base = (char *)MMS__ALIGN_UP((uintptr_t)p->wdata, 64);
    float *abuf = (float *)(base + plan.a_pack), *rowbuf = (float *)(base + plan.a_rows16), *bbuf = (float *)(base + plan.b_rows);
    char *bq8 = base + plan.b_q8;
    const size_t q8_row = plan.q8_row;
    char *unpacked = base + plan.unpacked;
    struct mms_tensor a_tile;   /* a repacked tile's rows as they were */
    uint32_t *b16 = (uint32_t *)(base + plan.unpacked);
    float *pack16 = (float *)(base + plan.a_bf16);
    const float *arows[MMS__MM_MB], *brows[MMS__MM_NB];
    int64_t cached = -1;   /* the tile of a (GEMM) or of b (dot path) already in the scratch */

    if (plan.strategy == MMS__MM_ZERO) {   /* empty products are zero */
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
        int64_t item = mms__atomic_fetch_add(p->counter, 1), tm, tn, batch, i12, i13, m0, n0, mr, nr, akey, am0;
        const struct mms_tensor *A;
        if (item >= n_items) break;
        if (gemm) {          /* along b first: the packed tile of a is reused */
            tn = item % tiles_n;
            tm = (item / tiles_n) % tiles_m;
        } else {             /* along a first: the converted b rows are reused */
            tm = item % tiles_m;
            tn = (item / tiles_m) % tiles_n;
        }
        batch = item / (tiles_m * tiles_n);
        i12 = batch % b->ne[2];
        i13 = batch / b->ne[2];
        m0 = tm * mb;
        n0 = tn * MMS__MM_NB;
        mr = MMS__MIN(mb, M - m0);
        nr = MMS__MIN(MMS__MM_NB, N - n0);
        akey = (tm * a->ne[2] + i12 / r2) * a->ne[3] + i13 / r3;
        A = a;
        am0 = m0;
        if (plan.unpack) {   /* unpacked into a tensor of the tile's rows; its m0 is 0 */
            if (!gemm || cached != akey) {
                mms__repack_rows(a, m0, mr, unpacked);
                a_tile = *a;
                a_tile.data = unpacked;
                a_tile.buffer = NULL;
                a_tile.ne[1] = mr;
            }
            A = &a_tile;
            am0 = 0;
        }
        if (bf16_gemm) {
            const int64_t P = (K + 1) / 2;
            const float *brow;
            int64_t ldb, j;
            if (cached != akey) {
                mms__pack_rows_bf16(A, am0, mr, i12 / r2, i13 / r3, pack16, rowbuf, (mms_bf16_t *)bq8);   /* bq8, free in this path: a strided row */
                cached = akey;
            }
            brow = mms__mm_block(b, n0, nr, i12, i13, bbuf, &ldb);
            for (j = 0; j < nr; j++) mms__vec_bf16_pairs(K, brow + j * ldb, b16 + j * P);
            mms__gemm_bf16(nr, mr, P, b16, P, (const uint32_t *)pack16, 16 * P, (float *)mms__row_ptr(dst, n0, i12, i13) + m0, ldo, 0);
        } else if (gemm) {
            const float *brow;
            int64_t ldb;
            if (cached != akey) {
                mms__mm_pack(A, am0, mr, i12 / r2, i13 / r3, abuf, rowbuf);
                cached = akey;
            }
            brow = mms__mm_block(b, n0, nr, i12, i13, bbuf, &ldb);
            mms__gemm_f32(nr, mr, K, brow, ldb, abuf, 16, 16 * K, (float *)mms__row_ptr(dst, n0, i12, i13) + m0, ldo, 0);
        } else {
            float *out = (float *)mms__row_ptr(dst, n0, i12, i13) + m0;
            if (cached != item / tiles_m) {
                int64_t j;
                mms__mm_rows(b, n0, nr, i12, i13, bbuf, brows);
                for (j = 0; q8_dot && j < nr; j++) {
                    fmt->quantize_act(brows[j], bq8 + j * q8_row, K);
                    if (act_unsigned) mms__q8_act_unsigned(bq8 + j * q8_row, K);
                }
                cached = item / tiles_m;
            }
            if (x8) {                          /* the tile of a in groups of 8 rows side by side, then 8 x 4 blocks */
                const size_t group = (size_t)(K / fmt->block_len) * fmt->group_block;   /* 8 of them take less than the f32 tile */
                const int64_t in_place = repacked ? MMS__MIN(mr, mms__repack_tail(a) - m0) : 0;   /* rows kept repacked */
                const int64_t ng = (mr + 7) / 8;
                const void *groups[MMS__MM_MB / 8], *rows[8], *xs[8];
                float res[16 * 8];
                const int64_t step = x8->tile16 ? 2 : 1;                      /* groups per kernel call */
                const int64_t cols = x8->tile16 ? x8->tile16_cols : 4;       /* columns per step */
                int64_t g, r, j, c, c0;
                for (g = 0; g < ng; g++) {
                    const int n = (int)MMS__MIN(8, mr - g * 8);
                    if (g * 8 < in_place) { groups[g] = mms__repack_at(a, m0 + g * 8); continue; }
                    for (r = 0; r < n; r++)   /* rows as they are: of a tensor, or a repacked one's last */
                        rows[r] = repacked ? mms__repack_at(a, m0 + g * 8 + r) : mms__row_ptr(A, am0 + g * 8 + r, i12 / r2, i13 / r3);
                    x8->pack(rows, n, K, (char *)abuf + (size_t)g * group);
                    groups[g] = (char *)abuf + (size_t)g * group;
                }
                if (plan.gemv) {               /* decode on repacked weights: one column, groups side by side */
                    const int64_t stride = MMS__MM_MB / 8 / x8->gemv_groups;
                    for (j = 0; j < nr; j++) {
                        for (g = 0; g < MMS__MIN(ng, stride); g++) {   /* groups g, g + stride, ... */
                            const void *w4[4];
                            float *o4[4];
                            int ns = 0;
                            for (c = g; c < ng; c += stride, ns++) { w4[ns] = groups[c]; o4[ns] = res + 8 * c; }
                            x8->gemv(ns, K, w4, bq8 + j * q8_row, o4);
                        }
                        for (r = 0; r < mr; r++) out[j * ldo + r] = res[r];
                    }
                    continue;
                }
                for (j = 0; j < nr; j += cols) {   /* the columns stay in L1 while the packed tile streams past */
                    for (c = 0; c < cols; c++) xs[c] = bq8 + MMS__MIN(j + c, nr - 1) * q8_row;
                    for (g = 0; g < ng; g += step) {
                        const bool two = step == 2 && g + 1 < ng;   /* 2 groups at once; a lone last one by dot */
                        const int64_t rows_g = two ? 16 : 8;
                        for (c0 = 0; c0 < cols; c0 += two ? cols : 4) {   /* dot takes 4 columns */
                            if (two) x8->tile16(K, groups[g], groups[g + 1], xs, res);
                            else x8->tile(K, groups[g], xs + c0, res);
                            for (c = 0; c < (two ? cols : 4) && j + c0 + c < nr; c++)
                                for (r = 0; r < rows_g && g * 8 + r < mr; r++) out[(j + c0 + c) * ldo + g * 8 + r] = res[rows_g * c + r];
                        }
                    }
                }
                continue;
            }
            if (q8_dot) {                      /* integer dots against the 8-bit activations */
                int64_t i, j = 0, c;
                float d[4];
                for (; q8_dot4 && j + 4 <= nr; j += 4)   /* 4 columns stay in L1 while the weight tile streams past */
                    for (i = 0; i < mr; i++) {
                        q8_dot4(K, mms__row_ptr(A, am0 + i, i12 / r2, i13 / r3), bq8 + j * q8_row, q8_row, d);
                        for (c = 0; c < 4; c++) out[(j + c) * ldo + i] = d[c];
                    }
                if (q8_dot_rows)                 /* the columns left: 4 rows a call, kept in L1 for all of them */
                    for (i = 0; j < nr && i < mr; i += 4)
                        for (c = j; c < nr; c++)
                            q8_dot_rows(K, mms__row_ptr(A, am0 + i, i12 / r2, i13 / r3), A->nb[1], (int)MMS__MIN(4, mr - i), bq8 + c * q8_row,
                                        out + c * ldo + i);
                else                             /* or one row at a time */
                    for (i = 0; j < nr && i < mr; i++) {
                        const void *w = mms__row_ptr(A, am0 + i, i12 / r2, i13 / r3);
                        for (c = j; c < nr; c++) out[c * ldo + i] = q8_dot(K, w, bq8 + c * q8_row);
                    }
                continue;
            }
            if (plan.strategy == MMS__MM_FLOAT_DIRECT) {   /* straight from the weights, 4 rows at a time */
                const size_t es = f16_direct ? sizeof(mms_fp16_t) : sizeof(float);
                const char *a0 = mms__row_ptr(A, am0, i12 / r2, i13 / r3);
                const int64_t lda = (int64_t)(a->nb[1] / es);
                const int64_t n2x4 = mms__vec_has_dot2x4() ? nr / 4 * 4 : 0;   /* columns taken 4 at a time */
                int64_t i = 0, j, r, c;
                float d[8];
                if (mms__vec_gemv_cols(f16_direct, K, a0, lda, mr, brows, nr, out, ldo)) continue;   /* AVX-512 */
                for (; i + 4 <= mr; i += 4) {
                    for (j = 0; j < n2x4; j += 4)   /* each weight loaded once for 4 columns; the same sums */
                        for (r = 0; r < 4; r += 2) {
                            mms__vec_dot2x4(f16_direct, K, a0 + (size_t)((i + r) * lda) * es, lda, brows + j, d);
                            for (c = 0; c < 4; c++) { out[(j + c) * ldo + i + r] = d[2 * c]; out[(j + c) * ldo + i + r + 1] = d[2 * c + 1]; }
                        }
                    for (j = n2x4; j < nr; j++) {
                        mms__vec_dot4_rows(f16_direct, K, a0 + (size_t)(i * lda) * es, lda, brows[j], d,
                                           a0 + (size_t)((i + 4 < mr ? i + 4 : i) * lda) * es);
                        for (r = 0; r < 4; r++) out[j * ldo + i + r] = d[r];
                    }
                }
                for (; i < mr; i++)
                    for (j = 0; j < nr; j++) out[j * ldo + i] = mms__vec_dot_row(f16_direct, K, a0 + (size_t)(i * lda) * es, brows[j]);
                continue;
            }
            mms__mm_rows(A, am0, mr, i12 / r2, i13 / r3, abuf, arows);
            mms__mm_tile(K, arows, mr, brows, nr, out, ldo);
        }
    }
}
