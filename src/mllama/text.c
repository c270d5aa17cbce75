/* >>mllama-text ===================================================================================
   The text decoder as graphs (transformers' MllamaTextModel): a batch of tokens (of one or several
   sequences, each row at its own position and cache slot) through
   self-attention layers (llama3 RoPE, grouped-query attention, a KV cache) and cross-attention
   layers (q/k RMS norms, tanh gates, HF's row mask on the MLP branch only), logits only for the
   rows asked; and the per-image cross-attention K/V. */

struct mms__mllama_text_inputs {
    struct mms_tensor *tokens;       /* I32 [n] */
    struct mms_tensor *pos;          /* I32 [n]: each row's position in its sequence */
    struct mms_tensor *slots;        /* I32 [n]: each row's cache slot (its sequence's first slot + pos) */
    struct mms_tensor *kq_mask;      /* F32 [n_kv, n]: causal */
    int n_groups;                    /* cross-attention groups; 0: text only, cross layers skipped */
    struct mms__mllama_cross_group *groups;
    struct mms_tensor *cross_perm;   /* I32 [n]: the rows in group order (NULL with one group) */
    struct mms_tensor *cross_unperm; /* I32 [n]: each row's place in group order */
    struct mms_tensor *cross_rows;   /* F32 [1, n]: 1 where the row sees some image, else 0 */
    struct mms_tensor *cross_gate;   /* F32 [1, n]: 0 for rows of a sequence without images (their cross layers
                                        are the identity), else 1; NULL when every row's sequence has images */
    struct mms_tensor *out_ids;      /* I32 [n_out]: rows whose logits are wanted; NULL: none (the batch fills the KV cache) */
};

/* The rows of one sequence with images (and, in the first group, the rows of sequences without
   any) attend to that sequence's images only: rows [first, first + n) in group order, its mask,
   and its images' keys and values per cross layer (NULL elsewhere). */
struct mms__mllama_cross_group {
    int first, n, n_img;
    struct mms_tensor *mask;         /* F32 [L, n], L the group's image keys */
    struct mms_tensor **k, **v;      /* per text layer */
};

static struct mms_tensor *mms__rms(struct mms_context *ctx, struct mms_tensor *x, struct mms_tensor *w, float eps) {
    return mms_mul(ctx, mms_rms_norm(ctx, x, eps), w);
}

static struct mms_tensor *mms__mllama_mlp(struct mms_context *ctx, const struct mms__mllama_tlayer *ly, struct mms_tensor *h) {
    return mms_mul_mat(ctx, ly->ffn_down, mms_mul(ctx, mms_silu(ctx, mms_mul_mat(ctx, ly->ffn_gate, h)), mms_mul_mat(ctx, ly->ffn_up, h)));
}

static struct mms_tensor *mms__mllama_rope(struct mms_context *ctx, const struct mms_mllama_model *m, struct mms_tensor *x, struct mms_tensor *pos) {
    return mms_rope_ext(ctx, x, pos, m->rope_freqs, m->hp.head_dim, m->rope_neox ? MMS_ROPE_TYPE_NEOX : MMS_ROPE_TYPE_NORMAL, m->hp.n_ctx_train,
                        m->hp.rope_freq_base, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
}

/* [HD, heads, L] seen as [HD, L, heads], the layout attention reads. */
static struct mms_tensor *mms__heads(struct mms_context *ctx, struct mms_tensor *x) { return mms_permute(ctx, x, 0, 2, 1, 3); }

/* Rows of x [HD, Hkv, n] into the cache [HD, Hkv, slots] at the rows' slots (a sequence's slots are
   a range of its own; the slots are an input, so the graph of a KV step is the same at every position). */
static struct mms_tensor *mms__mllama_cache_write(struct mms_context *ctx, struct mms_tensor *cache, struct mms_tensor *x, struct mms_tensor *slots) {
    const int64_t w = cache->ne[0] * cache->ne[1];
    return mms_set_rows(ctx, mms_view_2d(ctx, cache, w, cache->ne[2], cache->nb[2], 0), mms_reshape_2d(ctx, x, w, x->ne[2]), slots);
}

/* Self-attention layer il; new keys and values go into their cache slots (the writes are added to
   the graph first, so they run before the attention that reads the cache from slot kv_lo on, as
   many slots as the mask is wide). */
static struct mms_tensor *mms__mllama_self_layer(struct mms_context *ctx, struct mms_cgraph *gf, const struct mms_mllama_model *m, int il,
                                                 struct mms_tensor *x, struct mms_tensor *k_cache, struct mms_tensor *v_cache,
                                                 int kv_lo, const struct mms__mllama_text_inputs *in) {
    const struct mms_mllama_hparams *hp = &m->hp;
    const struct mms__mllama_tlayer *ly = &m->layers[il];
    const int64_t HD = hp->head_dim, n = x->ne[1], n_kv = in->kq_mask->ne[0];   /* padded: masked past each sequence's tokens */
    struct mms_tensor *h = mms__rms(ctx, x, ly->attn_norm, hp->rms_eps), *q, *k, *v, *o;
    q = mms__mllama_rope(ctx, m, mms_reshape_3d(ctx, mms_mul_mat(ctx, ly->wq, h), HD, hp->n_head, n), in->pos);
    k = mms__mllama_rope(ctx, m, mms_reshape_3d(ctx, mms_mul_mat(ctx, ly->wk, h), HD, hp->n_head_kv, n), in->pos);
    v = mms_reshape_3d(ctx, mms_mul_mat(ctx, ly->wv, h), HD, hp->n_head_kv, n);
    mms_build_forward_expand(gf, mms__mllama_cache_write(ctx, k_cache, k, in->slots));
    mms_build_forward_expand(gf, mms__mllama_cache_write(ctx, v_cache, v, in->slots));
    k = mms__heads(ctx, mms_view_3d(ctx, k_cache, HD, hp->n_head_kv, n_kv, k_cache->nb[1], k_cache->nb[2], (size_t)kv_lo * k_cache->nb[2]));
    v = mms__heads(ctx, mms_view_3d(ctx, v_cache, HD, hp->n_head_kv, n_kv, v_cache->nb[1], v_cache->nb[2], (size_t)kv_lo * v_cache->nb[2]));
    o = mms_flash_attn_ext(ctx, mms__heads(ctx, q), k, v, in->kq_mask, 1.0f / sqrtf((float)HD), 0.0f, 0.0f);   /* [HD, H, n] */
    x = mms_add(ctx, x, mms_mul_mat(ctx, ly->wo, mms_reshape_2d(ctx, o, HD * hp->n_head, n)));
    return mms_add(ctx, x, mms__mllama_mlp(ctx, ly, mms__rms(ctx, x, ly->ffn_norm, hp->rms_eps)));
}

/* Cross-attention layer il: each group's query rows against its images' kept keys and values
   [HD, L, Hkv]. With several groups the rows are gathered in group order and scattered back,
   so no sequence's rows read (or pay for) another's images. */
static struct mms_tensor *mms__mllama_cross_layer(struct mms_context *ctx, const struct mms_mllama_model *m, int il, struct mms_tensor *x,
                                                  const struct mms__mllama_text_inputs *in) {
    const struct mms_mllama_hparams *hp = &m->hp;
    const struct mms__mllama_tlayer *ly = &m->layers[il];
    const int64_t HD = hp->head_dim, n = x->ne[1];
    struct mms_tensor *h = mms__rms(ctx, x, ly->attn_norm, hp->rms_eps), *q, *o = NULL, *f;
    int g;
    q = mms__rms(ctx, mms_reshape_3d(ctx, mms_mul_mat(ctx, ly->wq, h), HD, hp->n_head, n), ly->q_norm, hp->rms_eps);
    if (in->cross_perm) q = mms_get_rows(ctx, mms_reshape_2d(ctx, q, HD * hp->n_head, n), in->cross_perm);
    for (g = 0; g < in->n_groups; g++) {
        const struct mms__mllama_cross_group *gr = &in->groups[g];
        struct mms_tensor *qg = mms_view_3d(ctx, q, HD, hp->n_head, gr->n, q->nb[0] * (size_t)HD, q->nb[0] * (size_t)(HD * hp->n_head),
                                            q->nb[0] * (size_t)(HD * hp->n_head * gr->first));
        struct mms_tensor *og = mms_flash_attn_ext(ctx, mms__heads(ctx, qg), gr->k[il], gr->v[il], gr->mask, 1.0f / sqrtf((float)HD), 0.0f, 0.0f);
        og = mms_reshape_2d(ctx, og, HD * hp->n_head, gr->n);   /* [HD, H, n_g] */
        o = o ? mms_concat(ctx, o, og, 1) : og;
    }
    if (in->cross_perm) o = mms_get_rows(ctx, o, in->cross_unperm);
    o = mms_mul_mat(ctx, ly->wo, o);
    if (in->cross_gate) o = mms_mul(ctx, o, in->cross_gate);
    x = mms_add(ctx, x, mms_mul(ctx, o, mms_tanh(ctx, ly->gate_attn)));
    f = mms_mul(ctx, mms__mllama_mlp(ctx, ly, mms__rms(ctx, x, ly->ffn_norm, hp->rms_eps)), in->cross_rows);   /* HF: MLP branch only */
    return mms_add(ctx, x, mms_mul(ctx, f, mms_tanh(ctx, ly->gate_mlp)));
}

/* A batch of n tokens (positions and cache slots in in); caches per text layer (NULL for cross
   layers), read from slot kv_lo on; images' K/V per cross-attention group in in. Returns the
   logits [vocab, n_out], or NULL without out_ids. */
static struct mms_tensor *mms__mllama_build_text(struct mms_context *ctx, struct mms_cgraph *gf, const struct mms_mllama_model *m,
                                                 struct mms_tensor *const *k_cache, struct mms_tensor *const *v_cache,
                                                 int kv_lo, const struct mms__mllama_text_inputs *in) {
    const struct mms_mllama_hparams *hp = &m->hp;
    struct mms_tensor *x = mms_get_rows(ctx, m->token_embd, in->tokens);   /* [D, n] */
    int il;
    for (il = 0; il < hp->n_layer; il++) {
        if (!m->layers[il].cross) x = mms__mllama_self_layer(ctx, gf, m, il, x, k_cache[il], v_cache[il], kv_lo, in);
        else if (in->n_groups > 0) x = mms__mllama_cross_layer(ctx, m, il, x, in);
        /* no image in the conversation: cross layers are the identity (as in transformers) */
    }
    if (!in->out_ids) return NULL;   /* the cache writes are in gf already; what comes after them is not needed */
    x = mms_get_rows(ctx, x, in->out_ids);
    x = mms_mul_mat(ctx, m->output, mms__rms(ctx, x, m->output_norm, hp->rms_eps));
    mms_set_output(x);
    return mms_set_name(x, "logits");
}

/* The type of layer il's kept keys and values (self-attention cache, cross-attention K/V): F16
   on a CUDA backend (half the memory, and of the bytes attention reads per token), F32 elsewhere
   (the CPU keeps full precision, and any split of CPU-arithmetic backends stays bit-identical). */
static enum mms_type mms__mllama_kv_type(const struct mms_mllama_model *m, int il) {
    return mms_backend_is_cuda(m->backends[m->layers[il].backend]) ? MMS_TYPE_F16 : MMS_TYPE_F32;
}

/* The keys (after k_norm) and values [HD, L, Hkv] of every cross layer for projected image states
   [D, L] (NULL for the other layers), in f32; the caller stores them in the layer's K/V type.
   Head-major, so that attention reads each head's keys and values as one stream: interleaved by
   head ([HD, Hkv, L]), each decode step read them 4 KB apart at the 11B shapes, at a third of the
   memory bandwidth. */
static void mms__mllama_build_cross_kv(struct mms_context *ctx, const struct mms_mllama_model *m, struct mms_tensor *states,
                                       struct mms_tensor **k_out, struct mms_tensor **v_out) {
    const struct mms_mllama_hparams *hp = &m->hp;
    const int64_t HD = hp->head_dim, L = states->ne[1];
    int il;
    for (il = 0; il < hp->n_layer; il++) {
        const struct mms__mllama_tlayer *ly = &m->layers[il];
        k_out[il] = v_out[il] = NULL;
        if (!ly->cross) continue;
        k_out[il] = mms__heads(ctx, mms__rms(ctx, mms_reshape_3d(ctx, mms_mul_mat(ctx, ly->wk, states), HD, hp->n_head_kv, L), ly->k_norm, hp->rms_eps));
        v_out[il] = mms__heads(ctx, mms_reshape_3d(ctx, mms_mul_mat(ctx, ly->wv, states), HD, hp->n_head_kv, L));
    }
}
