/* >>cpu-repack ====================================================================================
   Weights kept in the CPU kernels' own layout (the CPU_REPACK buffer type, cpu_backend.c). A
   prompt-size product with Q4_0, Q4_K, Q5_K or Q6_K weights repacks each tile of 8 rows side by side
   before its integer kernel runs (quant/tiles.c: mms__q4_0x8, mms__q4_kx8, mms__q5_kx8, mms__q6_kx8), once per
   thread and tile of every call; a decode step reads row by row, one stream per thread. Kept
   repacked, a product starts from the packed tiles and a decode step walks groups of 8 rows side
   by side (the gemv kernels, Q8_0's too: mms__q8_0x8; 4 groups a call for Q4_0 and Q8_0, 2 for
   the K types: the kernel cards' gemv_groups). The layout (the type's struct mms__quant_format
   in quant/cards.c): groups of 8 rows, each group one packed block per block of the type (Q4_0, Q8_0,
   Q6_K: the 8 rows' bytes permuted, the same size; Q4_K: 1184 bytes for 1152, the sub-block
   scales as bytes; Q5_K: 1440 for 1408, Q4_K's then the fifth bits), then the rows past the last multiple of 8 as they were. It depends on the
   tensor's shape only, never on the kernel set: the scalar and NEON sets (and Q8_0 prompts) unpack
   a tile of rows before using it. Only MUL_MAT may read such a tensor, as its weights (src[0]);
   setting or reading it goes through the buffer (whole tensors), which converts. */

/* The buffer type's name, which also identifies it (declared here, defined with the type). */
static const char *mms__cpu_repack_buft_get_name(mms_backend_buffer_type_t buft);

/* Whether a tensor of this shape is kept repacked in a CPU_REPACK buffer (others are stored as
   they are): matrices of a type with a layout (Q4_0, Q4_K, Q5_K, Q6_K and Q8_0) of at least 8 rows,
   contiguous, one batch. */
static bool mms__repack_layout(const struct mms_tensor *t) {
    const struct mms__quant_format *f = mms__quant_format_of(t->type);
    return f && f->pack_rows && t->ne[1] >= 8 && t->ne[2] == 1 && t->ne[3] == 1 && mms_is_contiguous(t);
}

/* t's data is in the repacked layout (a view of such a tensor is not: it cannot be read). */
static bool mms__is_repacked(const struct mms_tensor *t) {
    return t && !t->view_src && t->buffer && t->buffer->buft->iface.get_name == mms__cpu_repack_buft_get_name && mms__repack_layout(t);
}

/* The first row kept as it was (the rows before are in groups of 8). */
static int64_t mms__repack_tail(const struct mms_tensor *t) { return t->ne[1] / 8 * 8; }

static size_t mms__repack_group_bytes(const struct mms_tensor *t) {
    const struct mms__quant_format *f = mms__quant_format_of(t->type);
    return (size_t)(t->ne[0] / f->block_len) * f->group_block;
}

/* Bytes before the group of rows r..r + 7 (r < tail, a multiple of 8) or the kept row r (r >= tail). */
static size_t mms__repack_offset(const struct mms_tensor *t, int64_t r) {
    const int64_t tail = mms__repack_tail(t);
    if (r < tail) return (size_t)(r / 8) * mms__repack_group_bytes(t);
    return (size_t)(tail / 8) * mms__repack_group_bytes(t) + (size_t)(r - tail) * mms_row_size(t->type, t->ne[0]);
}

static char *mms__repack_at(const struct mms_tensor *t, int64_t r) { return (char *)t->data + mms__repack_offset(t, r); }

/* Bytes of the layout (the buffer type's allocation size). */
static size_t mms__repack_size(const struct mms_tensor *t) { return mms__repack_offset(t, t->ne[1]); }

/* Raw rows [r0, r0 + n) of a repacked tensor into dst, row_size bytes each; r0 a multiple of 8. */
static void mms__repack_rows(const struct mms_tensor *t, int64_t r0, int64_t n, void *dst) {
    const size_t rs = mms_row_size(t->type, t->ne[0]);
    const int64_t tail = mms__repack_tail(t);
    int64_t r = r0;
    int i;
    for (; r < r0 + n && r < tail; r += 8) {
        void *rows[8];
        for (i = 0; i < 8; i++) rows[i] = (char *)dst + (size_t)(r - r0 + i) * rs;
        mms__quant_format_of(t->type)->unpack_rows(mms__repack_at(t, r), t->ne[0], rows);
    }
    if (r < r0 + n) memcpy((char *)dst + (size_t)(r - r0) * rs, mms__repack_at(t, r), (size_t)(r0 + n - r) * rs);
}

/* The whole tensor from the file's layout (src) into t's memory, repacked (the kernel set's own
   pack where its card has one: the same bytes, faster). */
static void mms__repack_set(struct mms_tensor *t, const void *src) {
    const struct mms__quant_card *card = mms__quant_card_of(t->type);
    const mms__pack_fn pack = card && card->pack ? card->pack : mms__quant_format_of(t->type)->pack_rows;
    const size_t rs = mms_row_size(t->type, t->ne[0]);
    const int64_t tail = mms__repack_tail(t);
    int64_t r;
    int i;
    for (r = 0; r < tail; r += 8) {
        const void *rows[8];
        for (i = 0; i < 8; i++) rows[i] = (const char *)src + (size_t)(r + i) * rs;
        pack(rows, 8, t->ne[0], mms__repack_at(t, r));
    }
    memcpy(mms__repack_at(t, tail), (const char *)src + (size_t)tail * rs, (size_t)(t->ne[1] - tail) * rs);
}

/* The repacked tensor a node reads or writes other than as MUL_MAT's weights, or NULL. */
static const struct mms_tensor *mms__repack_misuse(const struct mms_tensor *node) {
    int i;
    if (node->view_src && mms__is_repacked(node->view_src)) return node->view_src;
    for (i = 0; i < MMS_MAX_SRC; i++)
        if (node->src[i] && (node->op != MMS_OP_MUL_MAT || i != 0) && mms__is_repacked(node->src[i])) return node->src[i];
    return NULL;
}
