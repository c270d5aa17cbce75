/* >>mllama-vision =================================================================================
   The vision encoder and projector as a graph (transformers' MllamaVisionModel). Shapes, with T tiles (all
   max_num_tiles slots, padded ones included, as transformers computes them), N tokens per tile
   (patches + class token), Np = N rounded up to 8, D the vision width:
     pixels [S, S, 3, T] -> patches [D, N-1, T] -> + pre-tile, class token, position and tile
     embeddings -> layer norm -> padded [D, Np, T] seen as one sequence of Np*T tokens ->
     local layers (taps: the inputs of the listed layers) -> layer norm -> + post-tile ->
     gated global layers -> [D + taps*D, N, T] (taps interleaved: feature 5*d + k) ->
     projector [text width, N*T]. */

struct mms__mllama_vision_inputs {
    struct mms_tensor *pixels;      /* F32 [S, S, 3, T] */
    struct mms_tensor *aspect_id;   /* I32 [1] */
    struct mms_tensor *mask;        /* F16 [Np*T, 2]: row 0 all 0, row 1 -inf at the padding keys */
    struct mms_tensor *mask_rows;   /* I32 [Np*T]: the mask row of each query, 1 for padding tokens */
};

static struct mms_tensor *mms__layer_norm(struct mms_context *ctx, struct mms_tensor *x, struct mms_tensor *w, struct mms_tensor *b, float eps) {
    return mms_add(ctx, mms_mul(ctx, mms_norm(ctx, x, eps), w), b);
}

/* Multi-head attention without biases; x [D, L] -> [D, L]. With BF16 key and value weights (a
   bf16 checkpoint, which transformers computes wholly in bf16) K and V are cast to BF16, so the
   attention runs in bf16 too: the CPU's AVX-512 set then takes vdpbf16ps for both products. */
static struct mms_tensor *mms__mllama_vision_attn(struct mms_context *ctx, const struct mms_mllama_hparams *hp,
                                                  const struct mms__mllama_vlayer *ly, struct mms_tensor *x,
                                                  const struct mms__mllama_vision_inputs *in) {
    const int64_t D = hp->v_n_embd, H = hp->v_n_head, HD = D / H, L = x->ne[1];
    const bool bf16 = ly->wk->type == MMS_TYPE_BF16 && ly->wv->type == MMS_TYPE_BF16;
    struct mms_tensor *q = mms_permute(ctx, mms_reshape_3d(ctx, mms_mul_mat(ctx, ly->wq, x), HD, H, L), 0, 2, 1, 3);
    struct mms_tensor *k = mms_permute(ctx, mms_reshape_3d(ctx, mms_mul_mat(ctx, ly->wk, x), HD, H, L), 0, 2, 1, 3);
    struct mms_tensor *v = mms_permute(ctx, mms_reshape_3d(ctx, mms_mul_mat(ctx, ly->wv, x), HD, H, L), 0, 2, 1, 3);
    if (bf16) {
        k = mms_cast(ctx, k, MMS_TYPE_BF16);
        v = mms_cast(ctx, v, MMS_TYPE_BF16);
    }
    struct mms_tensor *o = mms_flash_attn_ext_mask_rows(ctx, q, k, v, in->mask, in->mask_rows, 1.0f / sqrtf((float)HD), 0.0f, 0.0f);   /* [HD, H, L] */
    return mms_mul_mat(ctx, ly->wo, mms_reshape_2d(ctx, o, D, L));
}

/* A pre-LN encoder layer; the global ones gate both branches with their (stored) tanh(gate). */
static struct mms_tensor *mms__mllama_vision_layer_build(struct mms_context *ctx, const struct mms_mllama_hparams *hp,
                                                         const struct mms__mllama_vlayer *ly, struct mms_tensor *x,
                                                         const struct mms__mllama_vision_inputs *in) {
    struct mms_tensor *a = mms__mllama_vision_attn(ctx, hp, ly, mms__layer_norm(ctx, x, ly->ln1_w, ly->ln1_b, hp->v_eps), in);
    struct mms_tensor *f;
    if (ly->gate_attn) a = mms_mul(ctx, a, ly->gate_attn);
    x = mms_add(ctx, x, a);
    f = mms_add(ctx, mms_mul_mat(ctx, ly->fc1_w, mms__layer_norm(ctx, x, ly->ln2_w, ly->ln2_b, hp->v_eps)), ly->fc1_b);
    f = mms_add(ctx, mms_mul_mat(ctx, ly->fc2_w, mms_gelu(ctx, f)), ly->fc2_b);
    if (ly->gate_ffn) f = mms_mul(ctx, f, ly->gate_ffn);
    return mms_add(ctx, x, f);
}

/* A table row chosen by the aspect-ratio id, seen as [D, rows, T], times its gate. */
static struct mms_tensor *mms__mllama_aspect_embd(struct mms_context *ctx, struct mms_tensor *table, struct mms_tensor *gate,
                                                  struct mms_tensor *aspect_id, int64_t D, int64_t rows, int64_t T) {
    return mms_mul(ctx, mms_reshape_3d(ctx, mms_get_rows(ctx, table, aspect_id), D, rows, T), gate);
}

/* Builds the encoder; returns the projector's output [text width, N*T] and sets *vision_out to
   the encoder's output [D*(1+taps), N, T]. */
static struct mms_tensor *mms__mllama_build_vision(struct mms_context *ctx, const struct mms_mllama_model *m,
                                                   const struct mms__mllama_vision_inputs *in, struct mms_tensor **vision_out) {
    const struct mms_mllama_hparams *hp = &m->hp;
    const int64_t D = hp->v_n_embd, T = hp->v_max_tiles, N = hp->v_n_tokens, Np = hp->v_n_tokens_padded;
    const int64_t P = hp->v_patch_size, K = P * P * hp->v_channels, side = hp->v_image_size / hp->v_patch_size;
    struct mms_tensor *x, *cls, *taps = NULL, *out, *feat;
    int il, k = 0;

    /* patch embedding: a convolution with stride = kernel, as one product [D, patches * T] */
    x = mms_im2col(ctx, m->patch_embd, in->pixels, (int)P, (int)P, 0, 0, 1, 1, true, MMS_TYPE_F32);      /* [K, side, side, T] */
    x = mms_mul_mat(ctx, mms_reshape_2d(ctx, m->patch_embd, K, D), mms_reshape_2d(ctx, x, K, side * side * T));
    x = mms_reshape_3d(ctx, x, D, side * side, T);
    x = mms_add(ctx, x, mms__mllama_aspect_embd(ctx, m->pre_tile_embd, m->pre_tile_gate, in->aspect_id, D, 1, T));
    cls = mms_repeat(ctx, mms_reshape_3d(ctx, m->class_embd, D, 1, 1), mms_new_tensor_3d(ctx, MMS_TYPE_F32, D, 1, T));
    x = mms_concat(ctx, cls, x, 1);                                                                         /* [D, N, T] */
    x = mms_add(ctx, x, mms_mul(ctx, m->pos_embd, m->pos_gate));                        /* (1 - tanh g) * E_pos */
    x = mms_add(ctx, x, mms__mllama_aspect_embd(ctx, m->tile_pos_embd, m->tile_pos_gate, in->aspect_id, D, N, T));
    x = mms__layer_norm(ctx, x, m->pre_ln_w, m->pre_ln_b, hp->v_eps);
    x = mms_reshape_2d(ctx, mms_pad(ctx, x, 0, (int)(Np - N), 0, 0), D, Np * T);                         /* [D, Np*T] */

    for (il = 0; il < hp->v_n_layer; il++) {
        if (k < hp->v_n_taps && hp->v_taps[k] == il) {     /* Meta's rule: the layer's input; taps interleave */
            struct mms_tensor *tap = mms_reshape_3d(ctx, x, 1, D, Np * T);
            taps = taps ? mms_concat(ctx, taps, tap, 0) : tap;
            k++;
        }
        x = mms__mllama_vision_layer_build(ctx, hp, &m->vlayers[il], x, in);
    }
    x = mms__layer_norm(ctx, x, m->post_ln_w, m->post_ln_b, hp->v_eps);
    x = mms_add(ctx, mms_reshape_3d(ctx, x, D, Np, T), mms__mllama_aspect_embd(ctx, m->post_tile_embd, m->post_tile_gate, in->aspect_id, D, 1, T));
    x = mms_reshape_2d(ctx, x, D, Np * T);
    for (il = 0; il < hp->v_n_global; il++) x = mms__mllama_vision_layer_build(ctx, hp, &m->vglobal[il], x, in);

    /* drop the padding tokens; [global ‖ taps] per token */
    out = mms_cont(ctx, mms_view_3d(ctx, x, D, N, T, x->nb[1], x->nb[1] * (size_t)Np, 0));
    if (taps) {
        struct mms_tensor *t = mms_reshape_3d(ctx, mms_cont(ctx, taps), D * hp->v_n_taps, Np, T);
        out = mms_concat(ctx, out, mms_cont(ctx, mms_view_3d(ctx, t, t->ne[0], N, T, t->nb[1], t->nb[2], 0)), 0);
    }
    feat = mms_set_name(out, "vision_out");                                                              /* [D*(1+taps), N, T] */
    *vision_out = feat;
    x = mms_add(ctx, mms_mul_mat(ctx, m->mm_w, mms_reshape_2d(ctx, feat, hp->v_output_dim, N * T)), m->mm_b);
    return mms_set_name(x, "vision_projected");                                                          /* [text width, N*T] */
}

/* The attention mask of the encoders: token n of tile t is padding when n >= N or the tile is
   unused; only query-and-key both padding is masked (transformers' _prepare_aspect_ratio_attention_mask).
   As shared mask rows: row 0 (all 0) for a real query, row 1 (-inf at the padding keys) for a padding
   one. mask F16 [L, 2], rows I32 [L], L = Np*T. */
static void mms__mllama_vision_mask(const struct mms_mllama_hparams *hp, const int *aspect_mask, mms_fp16_t *mask, int32_t *rows) {
    const int64_t T = hp->v_max_tiles, N = hp->v_n_tokens, Np = hp->v_n_tokens_padded, L = Np * T;
    const mms_fp16_t neg_inf = mms_fp32_to_fp16(-INFINITY), zero = mms_fp32_to_fp16(0.0f);
    int64_t k;
    for (k = 0; k < L; k++) {
        const bool pad = k % Np >= N || !aspect_mask[k / Np];
        mask[k] = zero;
        mask[L + k] = pad ? neg_inf : zero;
        rows[k] = pad ? 1 : 0;
    }
}
