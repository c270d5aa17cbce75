/* >>cpu-quant-cards ===============================================================================
   Who multiplies a quantized weight type: its format (one row per type, whatever the kernel set)
   and its kernel card (one row per type in each kernel set's table). ops_matmul and repack.c read
   only these to choose a type's kernels. */

typedef void (*mms__quantize_act_fn)(const float *x, void *y, int64_t K);
typedef void (*mms__pack_fn)(const void *const *rows, int n, int64_t K, void *dst);
typedef void (*mms__unpack_fn)(const void *src, int64_t K, void *const *rows);
/* One group of 8 rows (K values each) from the format's layout into a tile kernel's own. */
typedef void (*mms__regroup_fn)(const void *group, int64_t K, void *dst);

/* What a quantized type is to the integer kernels on every kernel set: the block length (of the
   weights and of the activation blocks its dots take), the activation format (the quantizer that
   writes it: blocks of 32 as struct mms__block_q8_act, or of 256 as struct mms__block_q8_k, within
   mms__q8_act_row_size bytes a row), and the repacked layout of 8 rows side by side (repack.c):
   group_block bytes per block of the 8 rows, the portable pack of n <= 8 rows (the others zero)
   and unpack of 8.
   To add a type: its row here (a layout of 8 rows, portable pack and unpack; a NULL pack keeps
   its tensors as they are in CPU_REPACK buffers), then its card in every kernel set's table below
   (NULL where a set has no such kernel), and its traits row (core/types.c). */
struct mms__quant_format {
    enum mms_type        type;
    int64_t              block_len;
    mms__quantize_act_fn quantize_act;
    size_t               group_block;
    mms__pack_fn         pack_rows;
    mms__unpack_fn       unpack_rows;
};

static const struct mms__quant_format mms__quant_formats[] = {
    /* Q8_0 */ { MMS_TYPE_Q8_0, 32,        mms__quantize_row_q8_act, sizeof(struct mms__q8_0x8), mms__pack_q8_0x8_rows, mms__unpack_q8_0x8_rows },
    /* Q4_0 */ { MMS_TYPE_Q4_0, 32,        mms__quantize_row_q8_act, sizeof(struct mms__q4_0x8), mms__pack_q4_0x8_rows, mms__unpack_q4_0x8_rows },
    /* Q4_K */ { MMS_TYPE_Q4_K, MMS__QK_K, mms__quantize_row_q8_k,   sizeof(struct mms__q4_kx8), mms__pack_q4_kx8_rows, mms__unpack_q4_kx8_rows },
    /* Q6_K */ { MMS_TYPE_Q6_K, MMS__QK_K, mms__quantize_row_q8_k,   sizeof(struct mms__q6_kx8), mms__pack_q6_kx8_rows, mms__unpack_q6_kx8_rows },
    /* Q5_K */ { MMS_TYPE_Q5_K, MMS__QK_K, mms__quantize_row_q8_k,   sizeof(struct mms__q5_kx8), mms__pack_q5_kx8_rows, mms__unpack_q5_kx8_rows },
};

/* The type's format; NULL: none (float types, types without integer kernels). */
static const struct mms__quant_format *mms__quant_format_of(enum mms_type type) {
    int i;
    for (i = 0; i < (int)(sizeof mms__quant_formats / sizeof mms__quant_formats[0]); i++)
        if (mms__quant_formats[i].type == type) return &mms__quant_formats[i];
    return NULL;
}

/* One weight row against one activation row (in the format's layout). */
typedef float (*mms__q8_dot_fn)(int64_t K, const void *w, const void *x);
/* n <= 4 weight rows w_stride bytes apart against one activation row: out[r] = dot(w + r w_stride, x),
   each row's bits those of the type's row dot. */
typedef void (*mms__q8_dot_rows_fn)(int64_t K, const void *w, size_t w_stride, int n, const void *x, float *out);
/* One weight row against 4 activation rows x_stride bytes apart: out[c] = dot(w, x + c x_stride). */
typedef void (*mms__q8_dot4_fn)(int64_t K, const void *w, const void *x, size_t x_stride, float *out);
/* One group of 8 repacked rows against 4 activation rows: out[8 c + r] = dot(row r, x[c]). */
typedef void (*mms__tile_fn)(int64_t K, const void *w, const void *const x[4], float *out);
/* Two groups (16 rows) against tile16_cols columns: out[16 c + r]. */
typedef void (*mms__tile16_fn)(int64_t K, const void *w0, const void *w1, const void *const *x, float *out);
/* One activation row against ns <= 4 groups of 8 repacked rows: out[j][r] = dot(row r of w[j], x). */
typedef void (*mms__gemv_fn)(int ns, int64_t K, const void *const w[4], const void *x, float *const out[4]);

/* Any number of columns (dot4_max_n). */
#define MMS__ANY_N INT64_MAX

/* A weight type's kernel card for one kernel set: which integer kernels a product with these
   weights takes, and from which column count each pays (ops_matmul's choice, in order):
   - tile, tile16: prompt-size products (more than 4 columns, and at least tile_from_n; 0: all) on
     tiles of 8 rows repacked side by side (by pack, the set's own of the format's bytes; NULL: the
     format's pack_rows), 4 columns a call; tile16 (AVX-512) two groups at once against tile16_cols
     columns. act_unsigned: both take the activations' bytes plus 128 (mms__q8_act_unsigned).
     regroup (NULL: none): both read a layout of their own (regroup_block bytes per block of the 8
     rows), made by regroup from each group in the format's layout once per tile, whether packed
     for the tile or kept repacked (Q6_K on AVX2: its values as bytes, unpacked once per tile
     instead of once per 4 columns). The GEMV reads the format's layout.
     Prompts that neither tile nor dot4 takes dequantize into the f32 GEMM.
   - gemv, gemv_groups: decode (1 to 4 columns) on weights kept repacked, one column against
     gemv_groups groups of a tile walked side by side (each group a stream through memory: 4 for
     the 32-blocks, 2 for the K types' big blocks, unpacked out of order, one zmm pair with
     AVX-512: docs/measurements.md). NULL: such weights are unpacked a tile at a time.
   - dot4: one row against 4 columns of weights as they are, for products of at most dot4_max_n
     columns (Q8_0: decode steps of several sequences only; for prompts the GEMM is faster, but
     dequantizing a whole tile for a few columns takes far longer than these dots:
     docs/measurements.md).
   - dot_rows, dot: the columns left, 4 rows a call or one; with dot NULL (the scalar set has no
     table) the product dequantizes and keeps exact f32 activations.
   To add a kernel set: its table here (one row per type it has kernels for, the others left out)
   and its line in mms__quant_card_of. To add a type: a row in each table (see the formats above). */
struct mms__quant_card {
    enum mms_type       type;
    mms__q8_dot_fn      dot;
    mms__q8_dot_rows_fn dot_rows;
    mms__q8_dot4_fn     dot4;
    int64_t             dot4_max_n;
    mms__pack_fn        pack;
    mms__regroup_fn     regroup;
    size_t              regroup_block;
    mms__tile_fn        tile;
    mms__tile16_fn      tile16;
    int                 tile16_cols;
    int64_t             tile_from_n;
    bool                act_unsigned;
    mms__gemv_fn        gemv;
    int                 gemv_groups;
};

#if MMS__HAVE_AVX2
static const struct mms__quant_card mms__cards_avx2[] = {
    /* Q8_0 */ { MMS_TYPE_Q8_0, mms__dot_q8_0_avx2,   NULL,                      mms__dot4_q8_0_avx2, MMS__DECODE_MAX_COLS, mms__pack_q8_0x8, NULL,                   0,                             NULL,                     NULL,                     0, 0,                        false, mms__gemv_q8_0x8_avx2,   4 },
    /* Q4_0 */ { MMS_TYPE_Q4_0, mms__dot_q4_0_avx2,   NULL,                      NULL,                0,                    mms__pack_q4_0x8, NULL,                   0,                             mms__gemm_q4_0x8_avx2,    NULL,                     0, 0,                        false, mms__gemv_q4_0x8_avx2,   4 },
    /* Q4_K */ { MMS_TYPE_Q4_K, mms__dot_q4_k_avx2,   NULL,                      mms__dot4_q4_k_avx2, MMS__ANY_N,           mms__pack_q4_kx8, NULL,                   0,                             mms__gemm_q4_kx8_avx2,    NULL,                     0, 0,                        false, mms__gemv_q4_kx8_avx2,   2 },
    /* Q6_K */ { MMS_TYPE_Q6_K, mms__dot_q6_k_avx2,   NULL,                      mms__dot4_q6_k_avx2, MMS__ANY_N,           mms__pack_q6_kx8, mms__regroup_q6_kx8_u8, sizeof(struct mms__q6_kx8_u8), mms__gemm_q6_kx8_u8_avx2, NULL,                     0, 0,                        false, mms__gemv_q6_kx8_avx2,   2 },
    /* Q5_K */ { MMS_TYPE_Q5_K, mms__dot_q5_k_avx2,   NULL,                      mms__dot4_q5_k_avx2, MMS__ANY_N,           mms__pack_q5_kx8, NULL,                   0,                             mms__gemm_q5_kx8_avx2,    NULL,                     0, 0,                        false, mms__gemv_q5_kx8_avx2,   2 },
};
/* AVX2's bodies where the set has none of its own */
static const struct mms__quant_card mms__cards_avx512[] = {
    /* Q8_0 */ { MMS_TYPE_Q8_0, mms__dot_q8_0_avx2,   NULL,                      mms__dot4_q8_0_avx2, MMS__DECODE_MAX_COLS, mms__pack_q8_0x8, NULL,                   0,                             mms__gemm_q8_0x8_avx512,  mms__gemm_q8_0x16_avx512, 8, MMS__DECODE_MAX_COLS + 1, true,  mms__gemv_q8_0x8_avx512, 4 },
    /* Q4_0 */ { MMS_TYPE_Q4_0, mms__dot_q4_0_avx512, mms__dot_rows_q4_0_avx512, NULL,                0,                    mms__pack_q4_0x8, NULL,                   0,                             mms__gemm_q4_0x8_avx512,  mms__gemm_q4_0x16_avx512, 8, 0,                        false, mms__gemv_q4_0x8_avx512, 4 },
    /* Q4_K */ { MMS_TYPE_Q4_K, mms__dot_q4_k_avx2,   mms__dot_rows_q4_k_avx512, mms__dot4_q4_k_avx2, MMS__ANY_N,           mms__pack_q4_kx8, NULL,                   0,                             mms__gemm_q4_kx8_avx512,  mms__gemm_q4_kx16_avx512, 8, 0,                        false, mms__gemv_q4_kx8_avx512, 2 },
    /* Q6_K */ { MMS_TYPE_Q6_K, mms__dot_q6_k_avx2,   NULL,                      mms__dot4_q6_k_avx2, MMS__ANY_N,           mms__pack_q6_kx8, NULL,                   0,                             mms__gemm_q6_kx8_avx512,  mms__gemm_q6_kx16_avx512, 8, 0,                        false, mms__gemv_q6_kx8_avx512, 2 },
    /* Q5_K */ { MMS_TYPE_Q5_K, mms__dot_q5_k_avx2,   NULL,                      mms__dot4_q5_k_avx2, MMS__ANY_N,           mms__pack_q5_kx8, NULL,                   0,                             mms__gemm_q5_kx8_avx512,  mms__gemm_q5_kx16_avx512, 8, 0,                        false, mms__gemv_q5_kx8_avx512, 2 },
};
#endif
#if MMS__HAVE_NEON
/* row dots only: prompts dequantize, repacked weights are unpacked a tile at a time */
static const struct mms__quant_card mms__cards_neon[] = {
    /* Q8_0 */ { MMS_TYPE_Q8_0, mms__dot_q8_0_neon, NULL, NULL, 0, NULL, NULL, 0, NULL, NULL, 0, 0, false, NULL, 0 },
    /* Q4_0 */ { MMS_TYPE_Q4_0, mms__dot_q4_0_neon, NULL, NULL, 0, NULL, NULL, 0, NULL, NULL, 0, 0, false, NULL, 0 },
    /* Q4_K */ { MMS_TYPE_Q4_K, mms__dot_q4_k_neon, NULL, NULL, 0, NULL, NULL, 0, NULL, NULL, 0, 0, false, NULL, 0 },
    /* Q6_K */ { MMS_TYPE_Q6_K, mms__dot_q6_k_neon, NULL, NULL, 0, NULL, NULL, 0, NULL, NULL, 0, 0, false, NULL, 0 },
    /* Q5_K */ { MMS_TYPE_Q5_K, mms__dot_q5_k_neon, NULL, NULL, 0, NULL, NULL, 0, NULL, NULL, 0, 0, false, NULL, 0 },
};
static const struct mms__quant_card mms__cards_neon_dotprod[] = {
    /* Q8_0 */ { MMS_TYPE_Q8_0, mms__dot_q8_0_dotprod, NULL, NULL, 0, NULL, NULL, 0, NULL, NULL, 0, 0, false, NULL, 0 },
    /* Q4_0 */ { MMS_TYPE_Q4_0, mms__dot_q4_0_dotprod, NULL, NULL, 0, NULL, NULL, 0, NULL, NULL, 0, 0, false, NULL, 0 },
    /* Q4_K */ { MMS_TYPE_Q4_K, mms__dot_q4_k_dotprod, NULL, NULL, 0, NULL, NULL, 0, NULL, NULL, 0, 0, false, NULL, 0 },
    /* Q6_K */ { MMS_TYPE_Q6_K, mms__dot_q6_k_dotprod, NULL, NULL, 0, NULL, NULL, 0, NULL, NULL, 0, 0, false, NULL, 0 },
    /* Q5_K */ { MMS_TYPE_Q5_K, mms__dot_q5_k_dotprod, NULL, NULL, 0, NULL, NULL, 0, NULL, NULL, 0, 0, false, NULL, 0 },
};
#endif

static const struct mms__quant_card *mms__quant_card_in(const struct mms__quant_card *cards, int n, enum mms_type type) {
    int i;
    for (i = 0; i < n; i++) if (cards[i].type == type) return &cards[i];
    return NULL;
}

/* The card of a weight type in the kernel set in use; NULL: none (the scalar set, types without
   integer kernels). */
static const struct mms__quant_card *mms__quant_card_of(enum mms_type type) {
#define MMS__CARD_IN(table) mms__quant_card_in(table, (int)(sizeof table / sizeof table[0]), type)
    switch (mms__kernels()) {
#if MMS__HAVE_AVX2
        case MMS_CPU_KERNELS_AVX2:         return MMS__CARD_IN(mms__cards_avx2);
        case MMS_CPU_KERNELS_AVX512:       return MMS__CARD_IN(mms__cards_avx512);
#endif
#if MMS__HAVE_NEON
        case MMS_CPU_KERNELS_NEON:         return MMS__CARD_IN(mms__cards_neon);
        case MMS_CPU_KERNELS_NEON_DOTPROD: return MMS__CARD_IN(mms__cards_neon_dotprod);
#endif
        default:                           return NULL;   /* the scalar set */
    }
#undef MMS__CARD_IN
}
