/* >>cpu-matmul ====================================================================================
   MUL_MAT: dst[n, m] = dot(a row m, b row n), both rows running along K = ne[0]. The work is cut
   into tiles of MB rows of a by NB rows of b per batch, handed out through an atomic counter so
   both cores stay busy whatever the sizes (1601 included); tiles depend on the shapes only, so
   results do not depend on the thread count. Which integer kernels quantized weights take on the
   kernel set in use, and from which column count, is their kernel card's (quant/cards.c:
   struct mms__quant_card; its format, struct mms__quant_format, gives the blocks and the layout).
   mms__mm_plan_of picks one of the strategies below per product (enum mms__mm_strategy) and lays
   out its scratch; tests/test_mm_plan.c checks its choices on their own. mms__cpu_mul_mat is the
   plan and a switch: one function per strategy computes a tile, the loop that hands the tiles out
   (mms__mm_run_tiles) is theirs in common.
   - SIMD sets, N > 4 (f16/f32 weights: N > 8) (GEMM): the a tile is packed transposed into panels of 16 columns (f16/bf16
     converted on the way) and kept while consecutive tiles walk along b; the register block then
     broadcasts 6 b values per k against the 16 columns of the panel (AVX2: 12 FMAs per 8 loads;
     NEON: 24 per 10), writing dst rows directly. Tiles walk along b first so each thread packs a
     tile of a once.
   - N <= 4, f16/f32 N <= 8 (decode GEMV, of up to 8 sequences) and the scalar path: dot products
     straight from the rows (SIMD: 4 rows of weights against one column at a time, or on AVX2 2 rows
     against 4 columns, on AVX-512 4 rows against up to 4 columns or 2 rows against up to 8, f16
     converted inside the dot, each (row, column) summed the same way whatever the columns beside
     it; quantized weights against 8-bit activations, see quant/row_dots.c), so the weights stream from
     memory exactly once.
   - BF16 weights on AVX-512 (vdpbf16ps), N > 4: the b tile is rounded to bf16 pairs (k, k + 1) and
     tiles of 256 rows of a are packed as panels of 16 in pairs (more rows than the f32 GEMM's 64,
     so each converted b tile serves more of them); a 12 x 32 block of f32 sums (vec_dense.c).
   - Q4_0, Q4_K, Q5_K and Q6_K weights on AVX2, N > 4: the b tile is rounded to 8-bit blocks as below, and each tile of
     a is repacked 8 rows side by side (quant/tiles.c) into the scratch of the GEMM's packed tile, so
     one kernel call makes 8 rows by 4 columns (AVX-512: two groups, 16 rows, in zmm registers).
     Where the card has a regroup (Q6_K on AVX2), each group is then made into its kernel's own
     layout (Q6_K's values as bytes), once per tile.
   - Q4_0, Q4_K, Q5_K, Q6_K and Q8_0 weights kept repacked (a CPU_REPACK buffer, repack.c): the groups of 8 rows are
     read in place by the same kernel, and 1 to 4 columns go one by one through the one-column form
     that walks groups of the tile side by side (the cards' gemv_groups: 4 for Q4_0 and Q8_0, 2
     for the K types); without AVX2 (and for Q8_0 prompts on AVX2, whose 8-row kernel would be no
     faster than the GEMM there; AVX-512 has one past 8 columns) each tile's rows are unpacked
     first.
   - Quantized weights as they are with a 4-column integer dot (the K types on AVX2 for N <= 4; Q8_0
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
static void mms__mm_dots_f32(int64_t K, const float *const *A, int64_t mr, const float *const *B, int64_t nr, float *out, int64_t ldo) {
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
   file). To add one: a value here, its choice in mms__mm_plan_of, its function (one tile, as
   mms__mm_run_tiles hands them out) and its case in mms__cpu_mul_mat's switch, and its cases in
   tests/test_mm_plan.c. */
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
    bool                             regroup;        /* QUANT_TILES past MMS__MM_GEMV_N columns: groups into the card's own layout */
    bool                             along_b;        /* tiles walk along b first (a's packed tile reused), else along a */
    int64_t                          mb, nb;         /* a tile: rows of a, rows of b */
    int64_t                          tiles_m, tiles_n, n_items;
    size_t                           q8_row;         /* bytes of one of b's rows in 8 bits */
    size_t                           a_pack;         /* a's tile packed (f32 panels, groups of 8 rows) or as f32 rows */
    size_t                           a_rows16;       /* 16 of a's rows converted for packing */
    size_t                           a_group;        /* QUANT_TILES with regroup: a group packed before its regroup, where a_rows16 is */
    size_t                           b_rows;         /* b's tile as f32 rows */
    size_t                           b_q8;           /* b's tile in 8 bits, q8_row bytes a row */
    size_t                           a_row_bf16;     /* GEMM_BF16: one of a's rows gathered (a strided a), where b_q8 is */
    size_t                           unpacked;       /* a repacked tile unpacked */
    size_t                           b_bf16;         /* GEMM_BF16: b's tile in bf16 pairs, where unpacked is, */
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
    p.regroup = p.strategy == MMS__MM_QUANT_TILES && c->regroup && N > MMS__MM_GEMV_N;
    p.along_b = p.strategy == MMS__MM_GEMM_F32 || p.strategy == MMS__MM_GEMM_BF16;
    p.mb = p.strategy == MMS__MM_GEMM_BF16 ? MMS__MM_MB_BF16 : MMS__MM_MB;   /* bf16: b's conversion shared by more rows */
    p.nb = MMS__MM_NB;
    p.tiles_m = (M + p.mb - 1) / p.mb;
    p.tiles_n = (N + p.nb - 1) / p.nb;
    p.n_items = p.tiles_m * p.tiles_n * b->ne[2] * b->ne[3];
    p.q8_row = mms__q8_act_row_size(K);
    p.a_pack = 0;
    p.a_rows16 = p.a_pack + (size_t)(MMS__MM_MB * K) * sizeof(float);
    p.a_group = p.a_rows16;   /* 8 rows of a quantized type take less than 16 f32 rows */
    p.b_rows = p.a_rows16 + (size_t)(16 * K) * sizeof(float);
    p.b_q8 = p.b_rows + (size_t)(MMS__MM_NB * K) * sizeof(float);
    p.a_row_bf16 = p.b_q8;   /* no strategy takes both */
    p.unpacked = MMS__ALIGN_UP(p.b_q8 + MMS__MM_NB * p.q8_row, 64);
    p.b_bf16 = p.unpacked;   /* nor both of these */
    p.a_bf16 = p.b_bf16 + MMS__ALIGN_UP(MMS__MM_NB * ((K + 1) / 2), 16) * sizeof(uint32_t);
    p.scratch = p.strategy == MMS__MM_QUANT_TILES || p.strategy == MMS__MM_INT_DOTS ? p.unpacked : p.b_q8;
    if (p.unpack) p.scratch = p.unpacked + (size_t)MMS__MM_MB * mms_row_size(a->type, K);
    if (p.strategy == MMS__MM_GEMM_BF16) p.scratch = p.a_bf16 + (size_t)(MMS__MM_MB_BF16 * ((K + 1) / 2)) * sizeof(uint32_t);
    return p;
}

/* One tile of a product as its strategy sees it: rows [m0, m0 + mr) of a by rows [n0, n0 + nr) of
   b in one batch, and the thread's scratch as the plan lays it out. The tile loop
   (mms__mm_run_tiles) fills it; a strategy (one function each, below) computes the tile into out. */
struct mms__mm_tile {
    const struct mms__mm_plan *plan;
    const struct mms_tensor   *a, *b;
    const struct mms_tensor   *A;             /* a, or its tile unpacked (a_tile) */
    struct mms_tensor          a_tile;        /* a repacked tile's rows as they were, in the scratch */
    int64_t                    K, m0, am0;    /* am0: the tile's first row in A (0 when unpacked) */
    int64_t                    n0, mr, nr;
    int64_t                    ia2, ia3;      /* a's batch (broadcast over b's) */
    int64_t                    ib2, ib3;      /* b's and dst's batch */
    float                     *out;           /* dst's element (m0, n0) of the batch */
    int64_t                    ldo;           /* floats between dst's rows */
    bool                       new_a;         /* a tile other than this thread's last one (GEMM: pack it) */
    bool                       new_b;         /* b's tile other than this thread's last one (load it) */
    /* the scratch, at the plan's offsets */
    void                      *a_pack;        /* a's tile packed: f32 panels, groups of 8 rows, or f32 rows */
    float                     *a_rows16;
    char                      *a_group;
    float                     *b_rows;
    char                      *b_q8;
    mms_bf16_t                *a_row_bf16;
    char                      *unpacked;
    uint32_t                  *b_bf16, *a_bf16;
    const float               *brows[MMS__MM_NB];   /* b's tile as f32 rows (the dot strategies) */
};

/* The tiles of the product in turn, handed out to the threads through the atomic counter, each
   computed by the strategy's function. GEMMs walk along b first (a's packed tile reused), the
   others along a (b's converted tile reused). */
static void mms__mm_run_tiles(const struct mms__compute_params *p, struct mms_tensor *dst, const struct mms__mm_plan *plan,
                              void (*strategy)(struct mms__mm_tile *)) {
    const struct mms_tensor *a = dst->src[0], *b = dst->src[1];
    const int64_t M = a->ne[1], N = b->ne[1];
    const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    char *const base = (char *)MMS__ALIGN_UP((uintptr_t)p->wdata, 64);
    struct mms__mm_tile t;
    int64_t last_a = -1, last_b = -1;
    memset(&t, 0, sizeof t);
    t.plan = plan;
    t.a = a;
    t.b = b;
    t.K = a->ne[0];
    t.ldo = (int64_t)(dst->nb[1] / sizeof(float));
    t.a_pack = base + plan->a_pack;
    t.a_rows16 = (float *)(base + plan->a_rows16);
    t.a_group = base + plan->a_group;
    t.b_rows = (float *)(base + plan->b_rows);
    t.b_q8 = base + plan->b_q8;
    t.a_row_bf16 = (mms_bf16_t *)(base + plan->a_row_bf16);
    t.unpacked = base + plan->unpacked;
    t.b_bf16 = (uint32_t *)(base + plan->b_bf16);
    t.a_bf16 = (uint32_t *)(base + plan->a_bf16);
    for (;;) {
        const int64_t item = mms__atomic_fetch_add(p->counter, 1);
        int64_t tm, tn, batch, akey;
        if (item >= plan->n_items) break;
        if (plan->along_b) {
            tn = item % plan->tiles_n;
            tm = (item / plan->tiles_n) % plan->tiles_m;
        } else {
            tm = item % plan->tiles_m;
            tn = (item / plan->tiles_m) % plan->tiles_n;
        }
        batch = item / (plan->tiles_m * plan->tiles_n);
        t.ib2 = batch % b->ne[2];
        t.ib3 = batch / b->ne[2];
        t.ia2 = t.ib2 / r2;
        t.ia3 = t.ib3 / r3;
        t.m0 = tm * plan->mb;
        t.n0 = tn * plan->nb;
        t.mr = MMS__MIN(plan->mb, M - t.m0);
        t.nr = MMS__MIN(plan->nb, N - t.n0);
        t.out = (float *)mms__row_ptr(dst, t.n0, t.ib2, t.ib3) + t.m0;
        akey = (tm * a->ne[2] + t.ia2) * a->ne[3] + t.ia3;
        t.new_a = akey != last_a;
        t.new_b = batch * plan->tiles_n + tn != last_b;
        last_a = akey;
        last_b = batch * plan->tiles_n + tn;
        t.A = a;
        t.am0 = t.m0;
        if (plan->unpack) {   /* unpacked into a tensor of the tile's rows; its m0 is 0 */
            if (!plan->along_b || t.new_a) {
                mms__repack_rows(a, t.m0, t.mr, t.unpacked);
                t.a_tile = *a;
                t.a_tile.data = t.unpacked;
                t.a_tile.buffer = NULL;
                t.a_tile.ne[1] = t.mr;
            }
            t.A = &t.a_tile;
            t.am0 = 0;
        }
        strategy(&t);
    }
}

/* Row r of the tile of A. */
static const void *mms__mm_a_row(const struct mms__mm_tile *t, int64_t r) { return mms__row_ptr(t->A, t->am0 + r, t->ia2, t->ia3); }

/* The dot strategies: b's tile as f32 rows (brows), and in 8 bits for the card's kernels, once
   per tile of b. */
static void mms__mm_load_b(struct mms__mm_tile *t) {
    const struct mms__mm_plan *plan = t->plan;
    int64_t j;
    if (!t->new_b) return;
    mms__mm_rows(t->b, t->n0, t->nr, t->ib2, t->ib3, t->b_rows, t->brows);
    for (j = 0; plan->card && j < t->nr; j++) {
        plan->fmt->quantize_act(t->brows[j], t->b_q8 + j * plan->q8_row, t->K);
        if (plan->act_unsigned) mms__q8_act_unsigned(t->b_q8 + j * plan->q8_row, t->K);
    }
}

/* GEMM_F32: a's tile packed as f32 panels once, b's tile against it. */
static void mms__mm_gemm_f32(struct mms__mm_tile *t) {
    const float *brow;
    int64_t ldb;
    if (t->new_a) mms__mm_pack(t->A, t->am0, t->mr, t->ia2, t->ia3, (float *)t->a_pack, t->a_rows16);
    brow = mms__mm_block(t->b, t->n0, t->nr, t->ib2, t->ib3, t->b_rows, &ldb);
    mms__gemm_f32(t->nr, t->mr, t->K, brow, ldb, (const float *)t->a_pack, 16, 16 * t->K, t->out, t->ldo, 0);
}

/* GEMM_BF16: a's tile packed in bf16 pairs once, b's tile rounded to bf16 pairs against it. */
static void mms__mm_gemm_bf16(struct mms__mm_tile *t) {
    const int64_t P = (t->K + 1) / 2;
    const float *brow;
    int64_t ldb, j;
    if (t->new_a) mms__pack_rows_bf16(t->A, t->am0, t->mr, t->ia2, t->ia3, (float *)t->a_bf16, t->a_rows16, t->a_row_bf16);
    brow = mms__mm_block(t->b, t->n0, t->nr, t->ib2, t->ib3, t->b_rows, &ldb);
    for (j = 0; j < t->nr; j++) mms__vec_bf16_pairs(t->K, brow + j * ldb, t->b_bf16 + j * P);
    mms__gemm_bf16(t->nr, t->mr, P, t->b_bf16, P, t->a_bf16, 16 * P, t->out, t->ldo, 0);
}

/* QUANT_TILES on up to MMS__MM_GEMV_N columns (decode on repacked weights): one column at a time
   against the card's gemv_groups groups side by side. */
static void mms__mm_quant_gemv(const struct mms__mm_tile *t, const void *const *groups, int64_t ng) {
    const struct mms__quant_card *card = t->plan->card;
    const int64_t stride = MMS__MM_MB / 8 / card->gemv_groups;
    float res[MMS__MM_MB];
    int64_t j, g, c, r;
    for (j = 0; j < t->nr; j++) {
        for (g = 0; g < MMS__MIN(ng, stride); g++) {   /* groups g, g + stride, ... */
            const void *w4[4];
            float *o4[4];
            int ns = 0;
            for (c = g; c < ng; c += stride, ns++) { w4[ns] = groups[c]; o4[ns] = res + 8 * c; }
            card->gemv(ns, t->K, w4, t->b_q8 + j * t->plan->q8_row, o4);
        }
        for (r = 0; r < t->mr; r++) t->out[j * t->ldo + r] = res[r];
    }
}

/* QUANT_TILES: a's tile in groups of 8 rows side by side (read in place where a is kept repacked,
   else packed into a_pack; with the card's regroup, each group then made into its tile kernels'
   layout in a_pack), then the card's 8 x 4 blocks (or 16 x tile16_cols, two groups a call). */
static void mms__mm_quant_tiles(struct mms__mm_tile *t) {
    const struct mms__mm_plan *plan = t->plan;
    const struct mms__quant_card *card = plan->card;
    const int64_t K = t->K, mr = t->mr, nr = t->nr, ldo = t->ldo;
    const size_t group = (size_t)(K / plan->fmt->block_len) * plan->fmt->group_block;   /* 8 of them take less than the f32 tile, */
    const size_t tile_group = plan->regroup ? (size_t)(K / plan->fmt->block_len) * card->regroup_block : group;   /* and so in the card's layout */
    const int64_t in_place = plan->repacked ? MMS__MIN(mr, mms__repack_tail(t->a) - t->m0) : 0;   /* rows kept repacked */
    const int64_t ng = (mr + 7) / 8;
    const int64_t step = card->tile16 ? 2 : 1;                      /* groups per kernel call */
    const int64_t cols = card->tile16 ? card->tile16_cols : 4;     /* columns per step */
    const void *groups[MMS__MM_MB / 8], *rows[8], *xs[8];
    float res[16 * 8];
    int64_t g, r, j, c, c0;
    mms__mm_load_b(t);
    for (g = 0; g < ng; g++) {
        const int n = (int)MMS__MIN(8, mr - g * 8);
        char *const tile = (char *)t->a_pack + (size_t)g * tile_group;
        if (g * 8 < in_place) groups[g] = mms__repack_at(t->a, t->m0 + g * 8);
        else {
            char *const packed = plan->regroup ? t->a_group : tile;
            for (r = 0; r < n; r++)   /* rows as they are: of a tensor, or a repacked one's last */
                rows[r] = plan->repacked ? mms__repack_at(t->a, t->m0 + g * 8 + r) : mms__mm_a_row(t, g * 8 + r);
            card->pack(rows, n, K, packed);
            groups[g] = packed;
        }
        if (plan->regroup) {
            card->regroup(groups[g], K, tile);
            groups[g] = tile;
        }
    }
    if (plan->gemv) { mms__mm_quant_gemv(t, groups, ng); return; }
    for (j = 0; j < nr; j += cols) {   /* the columns stay in L1 while the packed tile streams past */
        for (c = 0; c < cols; c++) xs[c] = t->b_q8 + MMS__MIN(j + c, nr - 1) * plan->q8_row;
        for (g = 0; g < ng; g += step) {
            const bool two = step == 2 && g + 1 < ng;   /* 2 groups at once; a lone last one by tile */
            const int64_t rows_g = two ? 16 : 8;
            for (c0 = 0; c0 < cols; c0 += two ? cols : 4) {   /* tile takes 4 columns */
                if (two) card->tile16(K, groups[g], groups[g + 1], xs, res);
                else card->tile(K, groups[g], xs + c0, res);
                for (c = 0; c < (two ? cols : 4) && j + c0 + c < nr; c++)
                    for (r = 0; r < rows_g && g * 8 + r < mr; r++) t->out[(j + c0 + c) * ldo + g * 8 + r] = res[rows_g * c + r];
            }
        }
    }
}

/* INT_DOTS: the card's integer dots of a's rows as they are against b's 8-bit rows. */
static void mms__mm_int_dots(struct mms__mm_tile *t) {
    const struct mms__mm_plan *plan = t->plan;
    const struct mms__quant_card *card = plan->card;
    const int64_t K = t->K, mr = t->mr, nr = t->nr, ldo = t->ldo;
    const size_t q8_row = plan->q8_row;
    int64_t i, j = 0, c;
    float d[4];
    mms__mm_load_b(t);
    for (; plan->dot4 && j + 4 <= nr; j += 4)   /* 4 columns stay in L1 while the weight tile streams past */
        for (i = 0; i < mr; i++) {
            plan->dot4(K, mms__mm_a_row(t, i), t->b_q8 + j * q8_row, q8_row, d);
            for (c = 0; c < 4; c++) t->out[(j + c) * ldo + i] = d[c];
        }
    if (card->dot_rows)                 /* the columns left: 4 rows a call, kept in L1 for all of them */
        for (i = 0; j < nr && i < mr; i += 4)
            for (c = j; c < nr; c++)
                card->dot_rows(K, mms__mm_a_row(t, i), t->A->nb[1], (int)MMS__MIN(4, mr - i), t->b_q8 + c * q8_row, t->out + c * ldo + i);
    else                                /* or one row at a time */
        for (i = 0; j < nr && i < mr; i++) {
            const void *w = mms__mm_a_row(t, i);
            for (c = j; c < nr; c++) t->out[c * ldo + i] = card->dot(K, w, t->b_q8 + c * q8_row);
        }
}

/* FLOAT_DIRECT: f16/f32 weights dotted straight from their rows, 4 rows at a time. */
static void mms__mm_float_direct(struct mms__mm_tile *t) {
    const bool f16 = t->a->type == MMS_TYPE_F16;
    const size_t es = f16 ? sizeof(mms_fp16_t) : sizeof(float);
    const int64_t K = t->K, mr = t->mr, nr = t->nr, ldo = t->ldo;
    const char *a0 = (const char *)mms__mm_a_row(t, 0);
    const int64_t lda = (int64_t)(t->a->nb[1] / es);
    const int64_t n2x4 = mms__vec_has_dot2x4() ? nr / 4 * 4 : 0;   /* columns taken 4 at a time */
    const float *const *brows = t->brows;
    float *out = t->out;
    int64_t i = 0, j, r, c;
    float d[8];
    mms__mm_load_b(t);
    if (mms__vec_gemv_cols(f16, K, a0, lda, mr, t->brows, nr, out, ldo)) return;   /* AVX-512 */
    for (; i + 4 <= mr; i += 4) {
        for (j = 0; j < n2x4; j += 4)   /* each weight loaded once for 4 columns; the same sums */
            for (r = 0; r < 4; r += 2) {
                mms__vec_dot2x4(f16, K, a0 + (size_t)((i + r) * lda) * es, lda, brows + j, d);
                for (c = 0; c < 4; c++) { out[(j + c) * ldo + i + r] = d[2 * c]; out[(j + c) * ldo + i + r + 1] = d[2 * c + 1]; }
            }
        for (j = n2x4; j < nr; j++) {
            mms__vec_dot4_rows(f16, K, a0 + (size_t)(i * lda) * es, lda, brows[j], d, a0 + (size_t)((i + 4 < mr ? i + 4 : i) * lda) * es);
            for (r = 0; r < 4; r++) out[j * ldo + i + r] = d[r];
        }
    }
    for (; i < mr; i++)
        for (j = 0; j < nr; j++) out[j * ldo + i] = mms__vec_dot_row(f16, K, a0 + (size_t)(i * lda) * es, brows[j]);
}

/* ROWS: both sides as f32 rows, one dot per output. */
static void mms__mm_rows_dots(struct mms__mm_tile *t) {
    const float *arows[MMS__MM_MB];
    mms__mm_load_b(t);
    mms__mm_rows(t->A, t->am0, t->mr, t->ia2, t->ia3, (float *)t->a_pack, arows);
    mms__mm_dots_f32(t->K, arows, t->mr, t->brows, t->nr, t->out, t->ldo);
}

/* ZERO: an empty product (K = 0) is zeros, the part's rows of them. */
static void mms__mm_zero(const struct mms__compute_params *p, struct mms_tensor *dst) {
    struct mms__part_rows part = mms__part_rows_of(p, dst);
    int64_t i1, i2, i3;
    while (mms__next_row(&part, &i1, &i2, &i3)) memset(mms__row_ptr(dst, i1, i2, i3), 0, (size_t)dst->ne[0] * sizeof(float));
}

static void mms__cpu_mul_mat(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0], *b = dst->src[1];
    const struct mms__mm_plan plan = mms__mm_plan_of(a, b, mms__quant_card_of(a->type), mms__simd(), mms__vec_has_gemm_bf16());
    switch (plan.strategy) {
    case MMS__MM_ZERO:         mms__mm_zero(p, dst); break;
    case MMS__MM_GEMM_F32:     mms__mm_run_tiles(p, dst, &plan, mms__mm_gemm_f32); break;
    case MMS__MM_GEMM_BF16:    mms__mm_run_tiles(p, dst, &plan, mms__mm_gemm_bf16); break;
    case MMS__MM_QUANT_TILES:  mms__mm_run_tiles(p, dst, &plan, mms__mm_quant_tiles); break;
    case MMS__MM_INT_DOTS:     mms__mm_run_tiles(p, dst, &plan, mms__mm_int_dots); break;
    case MMS__MM_FLOAT_DIRECT: mms__mm_run_tiles(p, dst, &plan, mms__mm_float_direct); break;
    case MMS__MM_ROWS:         mms__mm_run_tiles(p, dst, &plan, mms__mm_rows_dots); break;
    }
}
