/* >>mllama-runtime ================================================================================
   Encoding images and decoding tokens on one scheduler, the sequences (conversations) of a context
   with their KV-cache slots, the cache of encoded images and the cross-attention masks. */

#define MMS__MLLAMA_KV_STEP 256   /* attention spans grow in steps, so decode graphs repeat and reuse their plan */

struct mms__mllama_image_entry {
    uint64_t            hash;
    int                 n_tiles;
    struct mms_context *ctx;            /* its graph; the persistent tensors in it stay valid */
    struct mms_tensor **k, **v;         /* per text layer, set for cross layers */
    int64_t             last_use;
};

/* One conversation of a context; its KV-cache slots are [index * n_ctx, (index + 1) * n_ctx). */
struct mms__mllama_seq {
    int  n_past;
    int *conv_images;            /* cache entries, in the order added (max_images) */
    int  n_conv_images;
    int *image_pos;              /* positions of the <|image|> tokens seen (max_images) */
    int  n_image_pos;
    struct mms_mllama_seq_timings t;   /* kv_cache filled in when asked */
};

struct mms_mllama_context {
    struct mms_mllama_model         *m;
    struct mms_mllama_context_params p;
    mms_backend_sched_t              sched;
    struct mms_context              *cache_ctx[2];
    mms_backend_buffer_t             cache_buf[2];
    struct mms_tensor              **k_cache, **v_cache;     /* per text layer (self-attention ones), n_seq * n_ctx slots */
    struct mms_context              *gctx;                   /* the current graph; reset before each */
    struct mms__mllama_seq          *seqs;                   /* n_seq */
    int                             *seq_ints;               /* the sequences' image lists, one block */

    struct mms__mllama_image_entry  *images;
    int                              n_images;
    int64_t                          clock;
    int                              n_encodes;

    float                           *logits;
    int                              n_logits;

    struct mms_mllama_timings        t;                      /* memory filled in when asked */
    size_t                           kept_peak[2];           /* per model backend (0 host, 1 offload) */
    struct mms__mllama_reserved {                            /* what each reserved graph planned, per backend */
        char   name[40];
        size_t planned[2], lower_bound[2];
    }                               *reserved;
    int                              n_reserved, cap_reserved;
};

MMS_API mms_backend_sched_t mms_mllama_context_get_sched(struct mms_mllama_context *c) { return c ? c->sched : NULL; }
MMS_API int mms_mllama_get_n_logits(const struct mms_mllama_context *c) { return c ? c->n_logits : 0; }
MMS_API const float *mms_mllama_get_logits(const struct mms_mllama_context *c, int i) {
    return c && i >= 0 && i < c->n_logits ? c->logits + (size_t)i * (size_t)c->m->hp.n_vocab : NULL;
}
MMS_API int mms_mllama_get_n_past(const struct mms_mllama_context *c) { return mms_mllama_seq_get_n_past(c, 0); }
MMS_API int mms_mllama_seq_get_n_past(const struct mms_mllama_context *c, int seq) {
    return c && seq >= 0 && seq < c->p.n_seq ? c->seqs[seq].n_past : 0;
}
MMS_API int mms_mllama_get_n_encodes(const struct mms_mllama_context *c) { return c ? c->n_encodes : 0; }

static struct mms_context *mms__mllama_fresh_graph_ctx(struct mms_mllama_context *c) {
    mms_reset(c->gctx);
    return c->gctx;
}

static void mms__mllama_image_release(struct mms_mllama_context *c, struct mms__mllama_image_entry *e) {
    int il;
    for (il = 0; il < c->m->hp.n_layer && e->k; il++) {
        if (e->k[il]) mms_backend_sched_release(c->sched, e->k[il]);
        if (e->v[il]) mms_backend_sched_release(c->sched, e->v[il]);
    }
    MMS_FREE(e->k);
    MMS_FREE(e->v);
    mms_free(e->ctx);
    memset(e, 0, sizeof *e);
}

MMS_API void mms_mllama_context_free(struct mms_mllama_context *c) {
    int i;
    if (!c) return;
    for (i = 0; i < c->n_images; i++) mms__mllama_image_release(c, &c->images[i]);
    mms_backend_sched_free(c->sched);
    for (i = 0; i < 2; i++) { mms_backend_buffer_free(c->cache_buf[i]); mms_free(c->cache_ctx[i]); }
    mms_free(c->gctx);
    MMS_FREE(c->k_cache); MMS_FREE(c->v_cache); MMS_FREE(c->seqs); MMS_FREE(c->seq_ints);
    MMS_FREE(c->images); MMS_FREE(c->logits); MMS_FREE(c->reserved);
    MMS_FREE(c);
}

/* -- graphs -- */

struct mms__mllama_vision_graph {
    struct mms_cgraph *graph;
    struct mms__mllama_vision_inputs in;
    struct mms_tensor *vision_out, *projected;
};

/* The image graph: encoder and projector, and (keep) every cross layer's K/V, persistent. */
static void mms__mllama_vision_graph(struct mms_mllama_context *c, struct mms_context *ctx, bool keep,
                                     struct mms_tensor **k, struct mms_tensor **v, struct mms__mllama_vision_graph *out) {
    const struct mms_mllama_hparams *hp = &c->m->hp;
    const int64_t L = (int64_t)hp->v_n_tokens_padded * hp->v_max_tiles;
    out->in.pixels = mms_set_name(mms_new_tensor_4d(ctx, MMS_TYPE_F32, hp->v_image_size, hp->v_image_size, 3, hp->v_max_tiles), "pixels");
    out->in.aspect_id = mms_set_name(mms_new_tensor_1d(ctx, MMS_TYPE_I32, 1), "aspect_ratio_id");
    out->in.mask = mms_set_name(mms_new_tensor_2d(ctx, MMS_TYPE_F16, L, 2), "vision_mask");
    out->in.mask_rows = mms_set_name(mms_new_tensor_1d(ctx, MMS_TYPE_I32, L), "vision_mask_rows");
    mms_set_input(out->in.pixels);
    mms_set_input(out->in.aspect_id);
    mms_set_input(out->in.mask);
    mms_set_input(out->in.mask_rows);
    out->projected = mms__mllama_build_vision(ctx, c->m, &out->in, &out->vision_out);
    out->graph = mms_new_graph(ctx);
    mms_graph_set_name(out->graph, keep ? "vision encoder + cross K/V" : "vision encoder");
    if (keep) {
        mms__mllama_build_cross_kv(ctx, out->graph, c->m, out->projected, k, v);
    } else {
        mms_set_output(out->vision_out);
        mms_set_output(out->projected);
        mms_build_forward_expand(out->graph, out->vision_out);
        mms_build_forward_expand(out->graph, out->projected);
    }
}

struct mms__mllama_text_graph {
    struct mms_cgraph *graph;
    struct mms__mllama_text_inputs in;
    struct mms_tensor *logits;
    int n_kv, kv_lo;
};

/* The shape of one decode batch: rows, logits rows, the attention width and its first cache slot
   (the rows' own slots are an input); gate: some row's sequence has no image while others have. */
struct mms__mllama_batch_plan {
    int  n, n_out, n_kv, kv_lo;
    bool gate;
};

/* A cross-attention group of a batch: its rows and the kept K/V lists (per text layer) of its
   n_img images. */
struct mms__mllama_group_spec {
    int n_rows, n_img;
    struct mms_tensor ***k, ***v;
};

/* The decode graph of a batch; n_groups cross-attention groups (0: text only). */
static void mms__mllama_text_graph(struct mms_mllama_context *c, struct mms_context *ctx, const struct mms__mllama_batch_plan *bp,
                                   const struct mms__mllama_group_spec *spec, int n_groups, struct mms__mllama_text_graph *out) {
    const struct mms_mllama_hparams *hp = &c->m->hp;
    const int n = bp->n, n_out = bp->n_out;
    int il, j, g, first = 0;
    out->n_kv = bp->n_kv;
    out->kv_lo = bp->kv_lo;
    memset(&out->in, 0, sizeof out->in);
    out->in.tokens = mms_set_name(mms_new_tensor_1d(ctx, MMS_TYPE_I32, n), "tokens");
    out->in.pos = mms_set_name(mms_new_tensor_1d(ctx, MMS_TYPE_I32, n), "positions");
    out->in.slots = mms_set_name(mms_new_tensor_1d(ctx, MMS_TYPE_I32, n), "kv_slots");
    out->in.kq_mask = mms_set_name(mms_new_tensor_2d(ctx, MMS_TYPE_F32, out->n_kv, n), "kq_mask");
    out->in.out_ids = mms_set_name(mms_new_tensor_1d(ctx, MMS_TYPE_I32, n_out), "out_ids");
    mms_set_input(out->in.tokens);
    mms_set_input(out->in.pos);
    mms_set_input(out->in.slots);
    mms_set_input(out->in.kq_mask);
    mms_set_input(out->in.out_ids);
    if (n_groups > 0) {
        out->in.cross_rows = mms_set_name(mms_new_tensor_2d(ctx, MMS_TYPE_F32, 1, n), "cross_rows");
        mms_set_input(out->in.cross_rows);
        if (bp->gate) mms_set_input(out->in.cross_gate = mms_set_name(mms_new_tensor_2d(ctx, MMS_TYPE_F32, 1, n), "cross_gate"));
        if (n_groups > 1) {
            mms_set_input(out->in.cross_perm = mms_set_name(mms_new_tensor_1d(ctx, MMS_TYPE_I32, n), "cross_perm"));
            mms_set_input(out->in.cross_unperm = mms_set_name(mms_new_tensor_1d(ctx, MMS_TYPE_I32, n), "cross_unperm"));
        }
        out->in.groups = (struct mms__mllama_cross_group *)mms__ctx_alloc(ctx, sizeof *out->in.groups * (size_t)n_groups, MMS__OBJ_ALIGN);
        for (g = 0; out->in.groups && g < n_groups; g++) {
            struct mms__mllama_cross_group *gr = &out->in.groups[g];
            const int64_t L = (int64_t)spec[g].n_img * hp->v_max_tiles * hp->v_n_tokens;
            gr->first = first;
            gr->n = spec[g].n_rows;
            gr->n_img = spec[g].n_img;
            first += gr->n;
            gr->mask = mms_format_name(mms_new_tensor_2d(ctx, MMS_TYPE_F32, L, gr->n), "cross_mask.%d", g);
            mms_set_input(gr->mask);
            gr->k = (struct mms_tensor **)mms__ctx_alloc(ctx, sizeof *gr->k * (size_t)hp->n_layer * 2, MMS__OBJ_ALIGN);
            if (!gr->k) break;
            gr->v = gr->k + hp->n_layer;
            for (il = 0; il < hp->n_layer; il++) {
                gr->k[il] = gr->v[il] = NULL;
                if (!c->m->layers[il].cross) continue;
                gr->k[il] = spec[g].k[0][il];
                gr->v[il] = spec[g].v[0][il];
                for (j = 1; j < spec[g].n_img; j++) {   /* keys in conversation order, as the mask lays them out */
                    gr->k[il] = mms_concat(ctx, gr->k[il], spec[g].k[j][il], 1);
                    gr->v[il] = mms_concat(ctx, gr->v[il], spec[g].v[j][il], 1);
                }
            }
        }
        out->in.n_groups = out->in.groups && g == n_groups ? n_groups : 0;   /* else the context's error fails the graph */
    }
    out->graph = mms_new_graph(ctx);
    mms_graph_set_name(out->graph, n == 1 ? "decode" : "prefill");
    out->logits = mms__mllama_build_text(ctx, out->graph, c->m, c->k_cache, c->v_cache, bp->kv_lo, &out->in);
    mms_build_forward_expand(out->graph, out->logits);
}

/* -- creation: caches and the reservation of every graph -- */

static enum mms_status mms__mllama_make_kv_cache(struct mms_mllama_context *c) {
    const struct mms_mllama_hparams *hp = &c->m->hp;
    int il, b;
    c->k_cache = (struct mms_tensor **)MMS_MALLOC(sizeof *c->k_cache * (size_t)hp->n_layer);
    c->v_cache = (struct mms_tensor **)MMS_MALLOC(sizeof *c->v_cache * (size_t)hp->n_layer);
    if (!c->k_cache || !c->v_cache) return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory");
    for (b = 0; b < 2; b++) {
        struct mms_init_params ip = { 0, NULL, true };
        if (!(c->cache_ctx[b] = mms_init(ip))) return mms_last_status();
    }
    for (il = 0; il < hp->n_layer; il++) {
        struct mms_context *ctx = c->cache_ctx[c->m->layers[il].backend];
        c->k_cache[il] = c->v_cache[il] = NULL;
        if (c->m->layers[il].cross) continue;
        const int64_t slots = (int64_t)c->p.n_seq * c->p.n_ctx;
        c->k_cache[il] = mms_format_name(mms_new_tensor_3d(ctx, mms__mllama_kv_type(c->m, il), hp->head_dim, hp->n_head_kv, slots), "cache_k.%d", il);
        c->v_cache[il] = mms_format_name(mms_new_tensor_3d(ctx, mms__mllama_kv_type(c->m, il), hp->head_dim, hp->n_head_kv, slots), "cache_v.%d", il);
    }
    for (b = 0; b < 2; b++) {
        if (!mms_get_first_tensor(c->cache_ctx[b])) continue;
        c->cache_buf[b] = mms_backend_alloc_ctx_tensors(c->cache_ctx[b], c->m->backends[b]);
        if (!c->cache_buf[b])
            return mms__error_context(mms_last_status(), "mllama: the KV cache for %d sequences of %d tokens does not fit on %s: %s",
                                      c->p.n_seq, c->p.n_ctx, mms_backend_name(c->m->backends[b]), mms_last_error());
        /* zeros: positions past the ones written are read (then masked); NaN garbage would poison them */
        mms_backend_buffer_clear(c->cache_buf[b], 0);
    }
    return MMS_OK;
}

/* Reserves a graph and records its plan; when memory runs out the message says for which graph. */
static enum mms_status mms__mllama_reserve(struct mms_mllama_context *c, struct mms_cgraph *g) {
    enum mms_status st = mms_backend_sched_reserve(c->sched, g);
    int b;
    if (st == MMS_ERR_OOM || st == MMS_ERR_BACKEND)
        return mms__error_context(st, "mllama: the %s graph does not fit: %s", mms_graph_get_name(g), mms_last_error());
    if (st == MMS_OK) {
        if (!mms__grow((void **)&c->reserved, &c->cap_reserved, c->n_reserved + 1, sizeof *c->reserved))
            return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory");
        mms__copy_str(c->reserved[c->n_reserved].name, sizeof c->reserved[0].name, mms_graph_get_name(g));
        for (b = 0; b < mms_backend_sched_get_n_backends(c->sched); b++) {
            struct mms_gallocr_buffer_info bi;
            memset(&bi, 0, sizeof bi);
            mms_gallocr_get_buffer_info(mms_backend_sched_get_gallocr(c->sched), b, &bi);
            c->reserved[c->n_reserved].planned[b] = bi.planned;
            c->reserved[c->n_reserved].lower_bound[b] = bi.lower_bound;
        }
        c->n_reserved++;
    }
    return st;
}

static enum mms_status mms__mllama_reserve_all(struct mms_mllama_context *c) {
    const struct mms_mllama_hparams *hp = &c->m->hp;
    struct mms__mllama_vision_graph vg;
    struct mms__mllama_text_graph tg;
    struct mms_tensor ***k = NULL, ***v = NULL;
    struct mms__mllama_batch_plan bp;
    struct mms__mllama_group_spec *spec;
    struct mms_context *ctx;
    enum mms_status st = MMS_OK;
    const int n_groups = c->m->has_vision ? MMS__MIN(c->p.n_seq, c->p.n_batch) : 0, n_img = n_groups * c->p.max_images;
    int j, il;

    if (c->m->has_vision) {
        struct mms_tensor **k0, **v0;
        ctx = mms__mllama_fresh_graph_ctx(c);
        k0 = (struct mms_tensor **)mms__ctx_alloc(ctx, sizeof *k0 * (size_t)hp->n_layer * 2, MMS__OBJ_ALIGN);
        if (!k0) return mms_ctx_status(ctx);
        v0 = k0 + hp->n_layer;
        memset(k0, 0, sizeof *k0 * (size_t)hp->n_layer * 2);
        mms__mllama_vision_graph(c, ctx, true, k0, v0, &vg);
        if ((st = mms__mllama_reserve(c, vg.graph)) != MMS_OK) return st;
    }
    /* stand-ins for the kept K/V of max_images images of as many sequences as a batch can hold:
       placeholders pinned where their layers run */
    ctx = mms__mllama_fresh_graph_ctx(c);
    k = (struct mms_tensor ***)mms__ctx_alloc(ctx, sizeof *k * (size_t)(n_img + 1) * 2, MMS__OBJ_ALIGN);
    spec = (struct mms__mllama_group_spec *)mms__ctx_alloc(ctx, sizeof *spec * (size_t)(n_groups + 1), MMS__OBJ_ALIGN);
    if (!k || !spec) return mms_ctx_status(ctx);
    v = k + n_img + 1;
    for (j = 0; j < n_img; j++) {
        k[j] = (struct mms_tensor **)mms__ctx_alloc(ctx, sizeof **k * (size_t)hp->n_layer * 2, MMS__OBJ_ALIGN);
        if (!k[j]) return mms_ctx_status(ctx);
        v[j] = k[j] + hp->n_layer;
        for (il = 0; il < hp->n_layer; il++) {
            const int64_t L = (int64_t)hp->v_max_tiles * hp->v_n_tokens;
            k[j][il] = v[j][il] = NULL;
            if (!c->m->layers[il].cross) continue;
            k[j][il] = mms_new_tensor_3d(ctx, mms__mllama_kv_type(c->m, il), hp->head_dim, L, hp->n_head_kv);   /* as */
            v[j][il] = mms_new_tensor_3d(ctx, mms__mllama_kv_type(c->m, il), hp->head_dim, L, hp->n_head_kv);   /* build_cross_kv */
            mms_set_persistent(k[j][il]);
            mms_set_persistent(v[j][il]);
            mms_backend_sched_set_tensor_backend(c->sched, k[j][il], c->m->backends[c->m->layers[il].backend]);
            mms_backend_sched_set_tensor_backend(c->sched, v[j][il], c->m->backends[c->m->layers[il].backend]);
        }
    }
    memset(&bp, 0, sizeof bp);                 /* the widest batch: every sequence's slots, every row's logits */
    bp.n = bp.n_out = c->p.n_batch;
    bp.n_kv = c->p.n_seq * c->p.n_ctx;
    bp.gate = c->p.n_seq > 1;
    for (j = 0; j < n_groups; j++) {           /* every group with max_images images: the most mask and K/V */
        spec[j].n_rows = j == 0 ? c->p.n_batch - (n_groups - 1) : 1;
        spec[j].n_img = c->p.max_images;
        spec[j].k = k + j * c->p.max_images;
        spec[j].v = v + j * c->p.max_images;
    }
    mms__mllama_text_graph(c, ctx, &bp, spec, n_groups, &tg);
    st = mms__mllama_reserve(c, tg.graph);
    mms_backend_sched_reset(c->sched);          /* drops the stand-ins' pins */
    return st;
}

MMS_API struct mms_mllama_context *mms_mllama_context_new(struct mms_mllama_model *m, const struct mms_mllama_context_params *params) {
    struct mms_mllama_context *c;
    struct mms_init_params ip = { 0, NULL, true };
    mms_backend_t backends[2];
    const int64_t t0 = mms_time_us();
    int i;
    if (!m) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_context_new: model is NULL"); return NULL; }
    if (!(c = (struct mms_mllama_context *)MMS_MALLOC(sizeof *c))) { mms_set_error(MMS_ERR_OOM, "mllama: out of host memory"); return NULL; }
    memset(c, 0, sizeof *c);
    c->m = m;
    if (params) c->p = *params;
    if (c->p.n_ctx < 0 || c->p.n_batch < 0 || c->p.max_images < 0 || c->p.image_cache < 0 || c->p.n_seq < 0 || c->p.n_seq > 4096 ||
        (c->p.image_cache > 0 && c->p.image_cache < MMS__MAX(c->p.max_images, 1) * MMS__MAX(c->p.n_seq, 1))) {
        mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_context_new: n_ctx %d, n_batch %d, max_images %d, image_cache %d, n_seq %d: each must "
                      "be 0 (the default) or positive, n_seq at most 4096 and image_cache at least max_images * n_seq", c->p.n_ctx,
                      c->p.n_batch, c->p.max_images, c->p.image_cache, c->p.n_seq);
        MMS_FREE(c);
        return NULL;
    }
    if (c->p.n_ctx == 0) c->p.n_ctx = MMS__MIN(2048, m->hp.n_ctx_train);
    if (c->p.n_batch == 0) c->p.n_batch = 512;
    if (c->p.max_images == 0) c->p.max_images = 2;
    if (c->p.n_seq == 0) c->p.n_seq = 1;
    if (c->p.image_cache == 0) c->p.image_cache = c->p.max_images * c->p.n_seq + 2;
    c->p.n_batch = MMS__MIN(c->p.n_batch, c->p.n_ctx * c->p.n_seq);   /* a batch holds at most every sequence's slots */
    if (c->p.n_ctx > m->hp.n_ctx_train) {
        mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_context_new: n_ctx %d is beyond the model's training context %d", c->p.n_ctx, m->hp.n_ctx_train);
        MMS_FREE(c);
        return NULL;
    }
    backends[0] = m->backends[1];   /* the offload backend first: ops go there unless pinned elsewhere */
    backends[1] = m->backends[0];
    c->sched = mms_backend_sched_new(backends, NULL, m->backends[1] == m->backends[0] ? 1 : 2, false, false);
    c->gctx = mms_init(ip);
    c->seqs = (struct mms__mllama_seq *)MMS_MALLOC(sizeof *c->seqs * (size_t)c->p.n_seq);
    c->seq_ints = (int *)MMS_MALLOC(sizeof(int) * 2 * (size_t)c->p.max_images * (size_t)c->p.n_seq);
    c->images = (struct mms__mllama_image_entry *)MMS_MALLOC(sizeof *c->images * (size_t)c->p.image_cache);
    if (!c->sched || !c->gctx || !c->seqs || !c->seq_ints || !c->images) goto fail;
    memset(c->images, 0, sizeof *c->images * (size_t)c->p.image_cache);
    for (i = 0; i < c->p.n_seq; i++) {
        memset(&c->seqs[i], 0, sizeof c->seqs[i]);
        c->seqs[i].conv_images = c->seq_ints + (size_t)2 * (size_t)i * (size_t)c->p.max_images;
        c->seqs[i].image_pos = c->seqs[i].conv_images + c->p.max_images;
    }
    if (mms__mllama_make_kv_cache(c) != MMS_OK || mms__mllama_reserve_all(c) != MMS_OK) goto fail;
    c->t.load_ms = (double)m->load_us / 1000.0;
    c->t.context_ms = (double)(mms_time_us() - t0) / 1000.0;
    return c;
fail:
    if (mms_last_status() == MMS_OK) mms_set_error(MMS_ERR_OOM, "mllama: out of host memory");
    mms_mllama_context_free(c);
    return NULL;
}

/* Bytes on backend b (0 cpu, 1 gpu): weights, KV cache, compute memory, kept images now. */
/* repacked: the part of weights in CPU_REPACK buffers (backend 0, the CPU) */
static void mms__mllama_memory(const struct mms_mllama_context *c, int b, size_t *weights, size_t *repacked, size_t *kv, size_t *compute, size_t *kept) {
    mms_backend_t be = c->m->backends[b];
    int i;
    *weights = *repacked = 0;
    *kv = c->cache_buf[b] ? mms_backend_buffer_get_size(c->cache_buf[b]) : 0;
    for (i = 0; i < c->m->n_bufs; i++) {
        const bool rp = mms_backend_buffer_get_type(c->m->bufs[i]) == mms_backend_cpu_repack_buffer_type();
        if (mms_backend_buffer_get_type(c->m->bufs[i]) == mms_backend_get_default_buffer_type(be) ||
            (b == 0 && (rp || mms_backend_buffer_is_host(c->m->bufs[i])))) *weights += mms_backend_buffer_get_size(c->m->bufs[i]);
        if (b == 0 && rp) *repacked += mms_backend_buffer_get_size(c->m->bufs[i]);
    }
    *compute = mms_backend_sched_get_buffer_size(c->sched, be);
    *kept = mms_backend_sched_get_persistent_size(c->sched, be);
}

static int mms__mllama_n_devices(const struct mms_mllama_context *c) { return c->m->backends[1] == c->m->backends[0] ? 1 : 2; }

static void mms__mllama_note_kept(struct mms_mllama_context *c) {
    int b;
    for (b = 0; b < mms__mllama_n_devices(c); b++) {
        size_t kept = mms_backend_sched_get_persistent_size(c->sched, c->m->backends[b]);
        if (kept > c->kept_peak[b]) c->kept_peak[b] = kept;
    }
}

MMS_API void mms_mllama_context_print_memory(struct mms_mllama_context *c, FILE *out) {
    int b, i;
    if (!out) out = stdout;
    if (!c) return;
    for (b = 0; b < mms__mllama_n_devices(c); b++) {
        size_t weights, repacked, kv, compute, kept;
        mms__mllama_memory(c, b, &weights, &repacked, &kv, &compute, &kept);
        fprintf(out, "mllama memory on %s: weights %.2f MiB, KV cache %.2f MiB, compute %.2f MiB, kept images %.2f MiB",
                mms_backend_name(c->m->backends[b]), (double)weights / 1048576.0, (double)kv / 1048576.0, (double)compute / 1048576.0,
                (double)kept / 1048576.0);
        if (repacked) fprintf(out, " (weights repacked for the CPU kernels: %.2f MiB)", (double)repacked / 1048576.0);
        fputc('\n', out);
    }
    for (i = 0; i < c->n_reserved; i++)
        for (b = 0; b < mms_backend_sched_get_n_backends(c->sched); b++)
            fprintf(out, "mllama graph '%s' on %s: compute %zu bytes (%.2f MiB), lower bound %zu bytes (%.2f MiB)\n", c->reserved[i].name,
                    mms_backend_name(mms_backend_sched_get_backend(c->sched, b)), c->reserved[i].planned[b],
                    (double)c->reserved[i].planned[b] / 1048576.0, c->reserved[i].lower_bound[b], (double)c->reserved[i].lower_bound[b] / 1048576.0);
}

/* -- images -- */

static uint64_t mms__mllama_image_hash(const struct mms_mllama_image *img) {
    const size_t n = sizeof(float) * (size_t)img->max_num_tiles * 3 * (size_t)img->image_size * (size_t)img->image_size;
    uint64_t h = mms__fnv1a64(img->pixels, n, MMS__FNV1A64_START);
    h ^= (uint64_t)img->aspect_ratio_id * 0x9e3779b97f4a7c15ULL;
    return h ? h : 1;
}

static enum mms_status mms__mllama_check_image(struct mms_mllama_context *c, const struct mms_mllama_image *img, const char *who) {
    const struct mms_mllama_hparams *hp = &c->m->hp;
    if (c->m->shapes_only) return mms_set_error(MMS_ERR_STATE, "%s: the model has shapes only, no weights", who);
    if (!c->m->has_vision) return mms_set_error(MMS_ERR_UNSUPPORTED, "%s: the model was loaded without its vision tower", who);
    if (!img || !img->pixels || img->image_size != hp->v_image_size || img->max_num_tiles != hp->v_max_tiles ||
        img->n_tiles < 1 || img->n_tiles > hp->v_max_tiles)
        return mms_set_error(MMS_ERR_INVALID_ARG, "%s: the image was not preprocessed for this model (tile %d, %d tiles; the model "
                             "wants tile %d, up to %d tiles)", who, img ? img->image_size : 0, img ? img->max_num_tiles : 0,
                             hp->v_image_size, hp->v_max_tiles);
    return MMS_OK;
}

/* Sets the inputs of an allocated vision graph. */
static enum mms_status mms__mllama_set_vision_inputs(struct mms_mllama_context *c, const struct mms__mllama_vision_graph *vg,
                                                     const struct mms_mllama_image *img) {
    const int64_t L = vg->in.mask->ne[0];
    mms_fp16_t *mask = (mms_fp16_t *)MMS_MALLOC(sizeof *mask * (size_t)(2 * L));
    int32_t *rows = (int32_t *)MMS_MALLOC(sizeof *rows * (size_t)L), id = img->aspect_ratio_id;
    enum mms_status st;
    if (!mask || !rows) { MMS_FREE(mask); MMS_FREE(rows); return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory for the vision mask"); }
    mms__mllama_vision_mask(&c->m->hp, img->aspect_ratio_mask, mask, rows);
    st = mms_backend_tensor_set(vg->in.mask, mask, 0, mms_nbytes(vg->in.mask));
    if (st == MMS_OK) st = mms_backend_tensor_set(vg->in.mask_rows, rows, 0, mms_nbytes(vg->in.mask_rows));
    MMS_FREE(mask);
    MMS_FREE(rows);
    if (st == MMS_OK) st = mms_backend_tensor_set(vg->in.pixels, img->pixels, 0, mms_nbytes(vg->in.pixels));
    if (st == MMS_OK) st = mms_backend_tensor_set(vg->in.aspect_id, &id, 0, sizeof id);
    return st;
}

MMS_API enum mms_status mms_mllama_encode_image(struct mms_mllama_context *c, const struct mms_mllama_image *img, float *vision_out, float *projected) {
    struct mms__mllama_vision_graph vg;
    enum mms_status st;
    if (!c) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_encode_image: context is NULL");
    if ((st = mms__mllama_check_image(c, img, "mms_mllama_encode_image")) != MMS_OK) return st;
    mms__mllama_vision_graph(c, mms__mllama_fresh_graph_ctx(c), false, NULL, NULL, &vg);
    if ((st = mms_backend_sched_alloc_graph(c->sched, vg.graph)) != MMS_OK ||
        (st = mms__mllama_set_vision_inputs(c, &vg, img)) != MMS_OK ||
        (st = mms_backend_sched_graph_compute(c->sched, vg.graph)) != MMS_OK) return st;
    c->n_encodes++;
    if (vision_out && (st = mms_backend_tensor_get(vg.vision_out, vision_out, 0, mms_nbytes(vg.vision_out))) != MMS_OK) return st;
    if (projected && (st = mms_backend_tensor_get(vg.projected, projected, 0, mms_nbytes(vg.projected))) != MMS_OK) return st;
    return MMS_OK;
}

/* Stamps the time the projector finishes, to split an image's time into encode and cross K/V;
   the caller's eval callback still sees what it asks for. */
struct mms__mllama_stamp {
    struct mms_tensor              *mark;
    int64_t                         at;
    mms_backend_sched_eval_callback user_cb;
    void                           *user;
};

static bool mms__mllama_stamp_cb(struct mms_tensor *t, bool ask, void *ud) {
    struct mms__mllama_stamp *st = (struct mms__mllama_stamp *)ud;
    const bool user_wants = st->user_cb && st->user_cb(t, true, st->user);
    if (ask) return t == st->mark || user_wants;
    if (t == st->mark) st->at = mms_time_us();
    return user_wants ? st->user_cb(t, false, st->user) : true;
}

/* The cache entry for img: found by hash, or encoded into a free (or the least recently used,
   not in the conversation) slot. */
static enum mms_status mms__mllama_encode_kept(struct mms_mllama_context *c, const struct mms_mllama_image *img, int *slot) {
    const uint64_t hash = mms__mllama_image_hash(img);
    struct mms__mllama_vision_graph vg;
    struct mms__mllama_image_entry *e;
    struct mms_init_params ip = { 0, NULL, true };
    enum mms_status st;
    int i, j, pick = -1;
    for (i = 0; i < c->n_images; i++)
        if (c->images[i].ctx && c->images[i].hash == hash) { *slot = i; c->images[i].last_use = ++c->clock; return MMS_OK; }
    for (i = 0; i < c->p.image_cache && pick < 0; i++) if (!c->images[i].ctx) pick = i;
    for (i = 0; i < c->p.image_cache && pick < 0; i++) {   /* evict the least recently used image not in use */
        bool used = false;
        int s;
        for (s = 0; s < c->p.n_seq; s++)
            for (j = 0; j < c->seqs[s].n_conv_images; j++) used |= c->seqs[s].conv_images[j] == i;
        if (!used && (pick < 0 || c->images[i].last_use < c->images[pick].last_use)) pick = i;
    }
    if (pick < 0) return mms_set_error(MMS_ERR_STATE, "mllama: the image cache (%d) is full of images in use by the sequences", c->p.image_cache);
    e = &c->images[pick];
    if (e->ctx) mms__mllama_image_release(c, e);
    if (pick >= c->n_images) c->n_images = pick + 1;
    e->ctx = mms_init(ip);
    e->k = (struct mms_tensor **)MMS_MALLOC(sizeof *e->k * (size_t)c->m->hp.n_layer);
    e->v = (struct mms_tensor **)MMS_MALLOC(sizeof *e->v * (size_t)c->m->hp.n_layer);
    if (!e->ctx || !e->k || !e->v) { mms__mllama_image_release(c, e); return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory"); }
    memset(e->k, 0, sizeof *e->k * (size_t)c->m->hp.n_layer);
    memset(e->v, 0, sizeof *e->v * (size_t)c->m->hp.n_layer);
    mms__mllama_vision_graph(c, e->ctx, true, e->k, e->v, &vg);
    if ((st = mms_backend_sched_alloc_graph(c->sched, vg.graph)) == MMS_OK && (st = mms__mllama_set_vision_inputs(c, &vg, img)) == MMS_OK) {
        struct mms__mllama_stamp stamp;
        const int64_t t0 = mms_time_us();
        stamp.mark = vg.projected;
        stamp.at = 0;
        mms__sched_get_eval_callback(c->sched, &stamp.user_cb, &stamp.user);
        mms_backend_sched_set_eval_callback(c->sched, mms__mllama_stamp_cb, &stamp);
        st = mms_backend_sched_graph_compute(c->sched, vg.graph);
        mms_backend_sched_set_eval_callback(c->sched, stamp.user_cb, stamp.user);
        if (st == MMS_OK) {
            const int64_t t1 = mms_time_us(), mid = stamp.at ? stamp.at : t1;
            c->t.encode_ms += (double)(mid - t0) / 1000.0;
            c->t.cross_kv_ms += (double)(t1 - mid) / 1000.0;
            c->t.n_encodes++;
        }
    }
    if (st != MMS_OK) {
        mms__mllama_image_release(c, e);
        return st;
    }
    mms__mllama_note_kept(c);
    c->n_encodes++;
    e->hash = hash;
    e->n_tiles = img->n_tiles;
    e->last_use = ++c->clock;
    *slot = pick;
    return MMS_OK;
}

static enum mms_status mms__mllama_check_seq(const struct mms_mllama_context *c, int seq, const char *who) {
    if (!c) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: context is NULL", who);
    if (seq < 0 || seq >= c->p.n_seq) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: sequence %d, the context has 0..%d (n_seq)", who, seq, c->p.n_seq - 1);
    return MMS_OK;
}

MMS_API enum mms_status mms_mllama_seq_add_image(struct mms_mllama_context *c, int seq, const struct mms_mllama_image *img) {
    struct mms__mllama_seq *sq;
    enum mms_status st;
    int slot = -1;
    if ((st = mms__mllama_check_seq(c, seq, "mms_mllama_add_image")) != MMS_OK) return st;
    if ((st = mms__mllama_check_image(c, img, "mms_mllama_add_image")) != MMS_OK) return st;
    sq = &c->seqs[seq];
    if (sq->n_conv_images == c->p.max_images)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_add_image: sequence %d already has %d images (max_images)", seq, c->p.max_images);
    if ((st = mms__mllama_encode_kept(c, img, &slot)) != MMS_OK) return st;
    sq->conv_images[sq->n_conv_images++] = slot;
    return MMS_OK;
}

MMS_API enum mms_status mms_mllama_add_image(struct mms_mllama_context *c, const struct mms_mllama_image *img) {
    return mms_mllama_seq_add_image(c, 0, img);
}

MMS_API enum mms_status mms_mllama_seq_add_image_rgb(struct mms_mllama_context *c, int seq, const uint8_t *rgb, int w, int h, size_t stride) {
    struct mms_mllama_image_params ip;
    struct mms_mllama_image img;
    enum mms_status st;
    int64_t t0 = mms_time_us();
    if ((st = mms__mllama_check_seq(c, seq, "mms_mllama_add_image_rgb")) != MMS_OK) return st;
    if (!c->m->has_vision) return mms_set_error(MMS_ERR_UNSUPPORTED, "mms_mllama_add_image_rgb: the model was loaded without its vision tower");
    ip = mms_mllama_model_image_params(c->m);
    if ((st = mms_mllama_preprocess_image(&ip, rgb, w, h, stride, &img)) != MMS_OK) return st;
    c->t.preprocess_ms += (double)(mms_time_us() - t0) / 1000.0;
    c->t.n_preprocessed++;
    st = mms_mllama_seq_add_image(c, seq, &img);
    mms_mllama_image_free(&img);
    return st;
}

MMS_API enum mms_status mms_mllama_add_image_rgb(struct mms_mllama_context *c, const uint8_t *rgb, int w, int h, size_t stride) {
    return mms_mllama_seq_add_image_rgb(c, 0, rgb, w, h, stride);
}

/* -- decoding -- */

/* The cross-attention inputs of one row of sequence sq at position p. Keys are its group's n_img
   images, T tiles of N tokens each: sq's own, or (a row of a sequence without images, in the first
   group) another sequence's, all seen (anything finite) with the row's cross layers gated off
   (*gate 0). A row sees its own images of the last group of consecutive <|image|> tokens at or
   before it, minus their unused tiles; before the first one it sees all its own images uniformly,
   which transformers turns into an all-zero mask row and a zeroed MLP (*rows 0). */
static void mms__mllama_cross_row(const struct mms_mllama_context *c, const struct mms__mllama_seq *sq, int n_img, int p,
                                  float *row, float *rows, float *gate) {
    const struct mms_mllama_hparams *hp = &c->m->hp;
    const int T = hp->v_max_tiles, N = hp->v_n_tokens;
    int j, t, k, first = -1, last = -1;
    for (j = 0; j < sq->n_image_pos; j++) {          /* the group: a run of consecutive image tokens */
        if (sq->image_pos[j] > p) break;
        if (j == 0 || sq->image_pos[j] != sq->image_pos[j - 1] + 1) first = j;
        last = j;
    }
    *rows = first >= 0 ? 1.0f : 0.0f;
    *gate = sq->n_conv_images > 0 ? 1.0f : 0.0f;
    for (j = 0; j < n_img; j++) {
        const int n_tiles = sq->n_conv_images > 0 ? c->images[sq->conv_images[j]].n_tiles : 0;
        for (t = 0; t < T; t++) {
            float v = sq->n_conv_images == 0 || first < 0 ? 0.0f : (j >= first && j <= last && t < n_tiles) ? 0.0f : -INFINITY;
            for (k = 0; k < N; k++) row[((size_t)j * T + t) * N + k] = v;
        }
    }
}

/* Per decode call: where each row goes, the sequences it touches and their images. */
struct mms__mllama_batch_work {
    int32_t *pos, *out_ids, *slot;              /* per row: position in its sequence, cache slot; wanted rows */
    int32_t *perm, *unperm;                     /* the rows in cross-attention group order, and back */
    int     *seq_n, *seq_images, *seq_group;    /* per sequence: rows in the batch, <|image|> tokens, its group */
};

static void mms__mllama_batch_work_free(struct mms__mllama_batch_work *w) {
    MMS_FREE(w->pos);
    MMS_FREE(w->seq_n);
}

static bool mms__mllama_batch_work_alloc(struct mms__mllama_batch_work *w, int n, int n_seq) {
    memset(w, 0, sizeof *w);
    w->pos = (int32_t *)MMS_MALLOC(sizeof(int32_t) * (size_t)n * 5);
    w->seq_n = (int *)MMS_MALLOC(sizeof(int) * (size_t)n_seq * 3);
    if (!w->pos || !w->seq_n) { mms__mllama_batch_work_free(w); return false; }
    w->out_ids = w->pos + n;
    w->slot = w->out_ids + n;
    w->perm = w->slot + n;
    w->unperm = w->perm + n;
    memset(w->seq_n, 0, sizeof(int) * (size_t)n_seq * 3);
    w->seq_images = w->seq_n + n_seq;
    w->seq_group = w->seq_images + n_seq;
    return true;
}

/* Checks the batch against the sequences; fills the per-sequence counts, each row's position and
   cache slot and the wanted rows. */
static enum mms_status mms__mllama_plan_batch(struct mms_mllama_context *c, const struct mms_mllama_batch *b, struct mms__mllama_batch_work *w,
                                              struct mms__mllama_batch_plan *bp) {
    const struct mms_mllama_hparams *hp = &c->m->hp;
    const int n = b->n_tokens;
    int i, s, lo = -1, hi = 0;
    memset(bp, 0, sizeof *bp);
    bp->n = n;
    for (i = 0; i < n; i++) {
        s = b->seq ? b->seq[i] : 0;
        if (s < 0 || s >= c->p.n_seq)
            return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_decode: row %d belongs to sequence %d; the context has 0..%d (n_seq)", i, s, c->p.n_seq - 1);
        if (b->tokens[i] < 0 || b->tokens[i] >= hp->n_embd_rows)
            return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_decode: token %d at %d is outside the vocabulary (0..%d)", b->tokens[i], i, hp->n_embd_rows - 1);
        w->pos[i] = c->seqs[s].n_past + w->seq_n[s]++;
        w->slot[i] = s * c->p.n_ctx + w->pos[i];
        if (b->tokens[i] == hp->image_token_id) w->seq_images[s]++;
    }
    for (s = 0; s < c->p.n_seq; s++) {
        const struct mms__mllama_seq *sq = &c->seqs[s];
        if (w->seq_n[s] == 0) continue;
        if (sq->n_past + w->seq_n[s] > c->p.n_ctx)
            return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_decode: %d tokens after %d do not fit in the context of %d tokens (sequence %d)",
                                 w->seq_n[s], sq->n_past, c->p.n_ctx, s);
        if (sq->n_image_pos + w->seq_images[s] > sq->n_conv_images)
            return mms_set_error(MMS_ERR_STATE, "mms_mllama_decode: %d <|image|> tokens in sequence %d but %d images added "
                                 "(add each image with mms_mllama_add_image before its token)", sq->n_image_pos + w->seq_images[s], s, sq->n_conv_images);
        if (lo < 0) lo = s * c->p.n_ctx;      /* attention reads the slots of the batch's sequences, each up to its step */
        hi = s * c->p.n_ctx + MMS__MIN(c->p.n_ctx, (sq->n_past + w->seq_n[s] + MMS__MLLAMA_KV_STEP - 1) / MMS__MLLAMA_KV_STEP * MMS__MLLAMA_KV_STEP);
    }
    bp->n_kv = hi - lo;
    bp->kv_lo = lo;
    for (i = 0; i < n; i++) {             /* without want: the last row of each sequence */
        bool last = true;
        int j;
        for (j = i + 1; j < n && last; j++) last = (b->seq ? b->seq[j] : 0) != (b->seq ? b->seq[i] : 0);
        if (b->want ? b->want[i] : last) w->out_ids[bp->n_out++] = i;
    }
    if (bp->n_out == 0) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_decode: no row asks for logits");
    return MMS_OK;
}

/* Sets the masks of an allocated decode graph (and the rows' cross-attention group order). */
static enum mms_status mms__mllama_set_masks(struct mms_mllama_context *c, const struct mms_mllama_batch *b, const struct mms__mllama_batch_work *w,
                                             const struct mms__mllama_text_graph *tg) {
    const int n = b->n_tokens;
    size_t L = 0, size;
    float *buf, *rows, *gate;
    enum mms_status st;
    int i, j, g;
    for (g = 0; g < tg->in.n_groups; g++) L = MMS__MAX(L, (size_t)tg->in.groups[g].mask->ne[0] * (size_t)tg->in.groups[g].n);
    size = MMS__MAX((size_t)tg->n_kv * (size_t)n, L) + 2 * (size_t)n;
    if (!(buf = (float *)MMS_MALLOC(sizeof(float) * size))) return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory for the attention masks");
    rows = buf + size - 2 * (size_t)n;
    gate = rows + n;
    for (i = 0; i < n; i++) {                  /* causal within the row's own sequence */
        const int s = b->seq ? b->seq[i] : 0, first = s * c->p.n_ctx - tg->kv_lo;
        float *row = buf + (size_t)i * (size_t)tg->n_kv;
        for (j = 0; j < tg->n_kv; j++) row[j] = j >= first && j <= first + w->pos[i] ? 0.0f : -INFINITY;
    }
    st = mms_backend_tensor_set(tg->in.kq_mask, buf, 0, mms_nbytes(tg->in.kq_mask));
    for (g = 0; st == MMS_OK && g < tg->in.n_groups; g++) {
        const struct mms__mllama_cross_group *gr = &tg->in.groups[g];
        const size_t width = (size_t)gr->mask->ne[0];
        for (j = 0; j < gr->n; j++) {
            i = tg->in.cross_perm ? w->perm[gr->first + j] : gr->first + j;
            mms__mllama_cross_row(c, &c->seqs[b->seq ? b->seq[i] : 0], gr->n_img, w->pos[i], buf + width * (size_t)j, &rows[i], &gate[i]);
        }
        st = mms_backend_tensor_set(gr->mask, buf, 0, mms_nbytes(gr->mask));
    }
    if (st == MMS_OK && tg->in.n_groups > 0) st = mms_backend_tensor_set(tg->in.cross_rows, rows, 0, sizeof *rows * (size_t)n);
    if (st == MMS_OK && tg->in.cross_gate) st = mms_backend_tensor_set(tg->in.cross_gate, gate, 0, sizeof *gate * (size_t)n);
    if (st == MMS_OK && tg->in.cross_perm) st = mms_backend_tensor_set(tg->in.cross_perm, w->perm, 0, sizeof *w->perm * (size_t)n);
    if (st == MMS_OK && tg->in.cross_perm) st = mms_backend_tensor_set(tg->in.cross_unperm, w->unperm, 0, sizeof *w->unperm * (size_t)n);
    MMS_FREE(buf);
    return st;
}

MMS_API enum mms_status mms_mllama_decode_batch(struct mms_mllama_context *c, const struct mms_mllama_batch *b) {
    const struct mms_mllama_hparams *hp = c ? &c->m->hp : NULL;
    struct mms__mllama_batch_work w;
    struct mms__mllama_batch_plan bp;
    struct mms__mllama_text_graph tg;
    struct mms__mllama_group_spec *spec = NULL;
    struct mms_context *ctx;
    enum mms_status st = MMS_OK;
    int i, j, s, g, n, n_img = 0, n_groups = 0, n_text_only = 0;
    bool gen = true;
    const int64_t t0 = mms_time_us();
    if (!c || !b || !b->tokens || b->n_tokens < 1)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_decode: context, tokens and n >= 1 are required");
    if (c->m->shapes_only) return mms_set_error(MMS_ERR_STATE, "mms_mllama_decode: the model has shapes only, no weights");
    n = b->n_tokens;
    if (n > c->p.n_batch) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_decode: %d tokens in one batch, more than n_batch %d", n, c->p.n_batch);
    if (!mms__mllama_batch_work_alloc(&w, n, c->p.n_seq)) return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory");
    if ((st = mms__mllama_plan_batch(c, b, &w, &bp)) != MMS_OK) { mms__mllama_batch_work_free(&w); return st; }
    for (i = 0; i < n; i++) {                  /* the image tokens' positions (undone below if the batch fails) */
        struct mms__mllama_seq *sq = &c->seqs[b->seq ? b->seq[i] : 0];
        if (b->tokens[i] == hp->image_token_id) sq->image_pos[sq->n_image_pos++] = w.pos[i];
    }
    for (s = 0; s < c->p.n_seq; s++) {         /* a cross-attention group per sequence with images */
        if (!w.seq_n[s]) continue;
        w.seq_group[s] = c->seqs[s].n_conv_images > 0 ? n_groups++ : 0;   /* sequences without: the first group */
        n_img += c->seqs[s].n_conv_images;
        n_text_only += c->seqs[s].n_conv_images == 0;
        gen &= w.seq_n[s] == 1;
    }
    bp.gate = n_groups > 0 && n_text_only > 0;

    ctx = mms__mllama_fresh_graph_ctx(c);
    if (n_groups > 0) {                        /* the groups' images, and the rows in group order */
        struct mms_tensor ***kl = (struct mms_tensor ***)mms__ctx_alloc(ctx, sizeof *kl * (size_t)n_img * 2, MMS__OBJ_ALIGN);
        int *at = (int *)mms__ctx_alloc(ctx, sizeof *at * (size_t)n_groups, MMS__OBJ_ALIGN), off = 0;
        spec = (struct mms__mllama_group_spec *)mms__ctx_alloc(ctx, sizeof *spec * (size_t)n_groups, MMS__OBJ_ALIGN);
        if (!kl || !at || !spec) { st = mms_ctx_status(ctx); goto done; }
        for (s = 0; s < c->p.n_seq; s++) {
            const struct mms__mllama_seq *sq = &c->seqs[s];
            if (!w.seq_n[s] || sq->n_conv_images == 0) continue;
            g = w.seq_group[s];
            spec[g].n_img = sq->n_conv_images;
            spec[g].n_rows = 0;
            spec[g].k = kl + off;
            spec[g].v = kl + n_img + off;
            for (j = 0; j < sq->n_conv_images; j++, off++) {
                kl[off] = c->images[sq->conv_images[j]].k;
                kl[n_img + off] = c->images[sq->conv_images[j]].v;
            }
        }
        for (i = 0; i < n; i++) spec[w.seq_group[b->seq ? b->seq[i] : 0]].n_rows++;
        for (g = 0, off = 0; g < n_groups; off += spec[g++].n_rows) at[g] = off;
        for (i = 0; i < n; i++) {
            g = w.seq_group[b->seq ? b->seq[i] : 0];
            w.unperm[i] = at[g];
            w.perm[at[g]++] = i;
        }
    }
    mms__mllama_text_graph(c, ctx, &bp, spec, n_groups, &tg);
    if ((st = mms_backend_sched_alloc_graph(c->sched, tg.graph)) != MMS_OK) goto done;
    if ((st = mms_backend_tensor_set(tg.in.tokens, b->tokens, 0, sizeof *b->tokens * (size_t)n)) != MMS_OK ||
        (st = mms_backend_tensor_set(tg.in.pos, w.pos, 0, sizeof *w.pos * (size_t)n)) != MMS_OK ||
        (st = mms_backend_tensor_set(tg.in.slots, w.slot, 0, sizeof *w.slot * (size_t)n)) != MMS_OK ||
        (st = mms_backend_tensor_set(tg.in.out_ids, w.out_ids, 0, sizeof *w.out_ids * (size_t)bp.n_out)) != MMS_OK ||
        (st = mms__mllama_set_masks(c, b, &w, &tg)) != MMS_OK) goto done;
    {   /* inputs, graph and the logits' read go in order on the backends' streams: one wait, at the end */
        const size_t n_logits = (size_t)bp.n_out * (size_t)hp->n_vocab;
        float *l = NULL;
        enum mms_status sy;
        st = mms_backend_sched_graph_compute_async(c->sched, tg.graph);
        if (st == MMS_OK && !(l = (float *)MMS_REALLOC(c->logits, sizeof *l * n_logits)))
            st = mms_set_error(MMS_ERR_OOM, "mllama: out of host memory for logits");
        if (l) c->logits = l;
        /* into the context's own host memory, which outlives the synchronize below */
        if (st == MMS_OK)
            st = mms_backend_tensor_get_async(mms_backend_sched_get_tensor_backend(c->sched, tg.logits), tg.logits, l, 0, sizeof *l * n_logits);
        sy = mms_backend_sched_synchronize(c->sched);
        if (st == MMS_OK) st = sy;
        if (st != MMS_OK) {
            if (l) c->n_logits = 0;            /* overwritten, maybe shorter: the old rows are gone */
            goto done;
        }
        c->n_logits = bp.n_out;
    }
    {
        const double ms = (double)(mms_time_us() - t0) / 1000.0;
        for (s = 0; s < c->p.n_seq; s++) {
            struct mms_mllama_seq_timings *t = &c->seqs[s].t;
            if (!w.seq_n[s]) continue;
            c->seqs[s].n_past += w.seq_n[s];
            t->n_calls++;
            if (w.seq_n[s] == 1) { t->gen_ms += ms; t->n_gen_tokens++; }
            else { t->prompt_ms += ms; t->n_prompt_tokens += w.seq_n[s]; }
        }
        if (gen) { c->t.gen_ms += ms; c->t.n_gen_tokens += n; }
        else { c->t.prompt_ms += ms; c->t.n_prompt_tokens += n; }
    }
done:
    if (st != MMS_OK)                          /* the batch did not happen */
        for (s = 0; s < c->p.n_seq; s++) c->seqs[s].n_image_pos -= w.seq_images[s];
    mms__mllama_batch_work_free(&w);
    return st;
}

MMS_API enum mms_status mms_mllama_decode(struct mms_mllama_context *c, const int32_t *tokens, int n, const bool *want) {
    struct mms_mllama_batch b;
    memset(&b, 0, sizeof b);
    b.n_tokens = n;
    b.tokens = tokens;
    b.want = want;
    return mms_mllama_decode_batch(c, &b);
}

MMS_API enum mms_status mms_mllama_seq_clear(struct mms_mllama_context *c, int seq) {
    enum mms_status st = mms__mllama_check_seq(c, seq, "mms_mllama_seq_clear");
    if (st != MMS_OK) return st;
    c->seqs[seq].n_past = 0;
    c->seqs[seq].n_image_pos = 0;
    c->seqs[seq].n_conv_images = 0;
    memset(&c->seqs[seq].t, 0, sizeof c->seqs[seq].t);
    return MMS_OK;
}

MMS_API void mms_mllama_kv_clear(struct mms_mllama_context *c) {
    int s;
    if (!c) return;
    for (s = 0; s < c->p.n_seq; s++) mms_mllama_seq_clear(c, s);
    c->n_logits = 0;
}

MMS_API enum mms_status mms_mllama_seq_trim(struct mms_mllama_context *c, int seq, int n_keep) {
    struct mms__mllama_seq *sq;
    enum mms_status st = mms__mllama_check_seq(c, seq, "mms_mllama_kv_trim");
    if (st != MMS_OK) return st;
    sq = &c->seqs[seq];
    if (n_keep < 0 || n_keep > sq->n_past)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_kv_trim: n_keep must be in 0..%d for sequence %d", sq->n_past, seq);
    sq->n_past = n_keep;
    while (sq->n_image_pos > 0 && sq->image_pos[sq->n_image_pos - 1] >= n_keep) sq->n_image_pos--;
    if (sq->n_conv_images > sq->n_image_pos) sq->n_conv_images = sq->n_image_pos;   /* images whose token went */
    return MMS_OK;
}

MMS_API enum mms_status mms_mllama_kv_trim(struct mms_mllama_context *c, int n_keep) {
    if (!c) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_kv_trim: context is NULL");
    return mms_mllama_seq_trim(c, 0, n_keep);
}

/* -- timings -- */

MMS_API void mms_mllama_get_timings(const struct mms_mllama_context *c, struct mms_mllama_timings *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!c) return;
    *out = c->t;
    out->n_backends = mms__mllama_n_devices(c);
    out->n_seq = c->p.n_seq;
}

MMS_API enum mms_status mms_mllama_get_memory(const struct mms_mllama_context *c, int b, struct mms_mllama_memory *out) {
    size_t kept;
    if (!c || !out) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_get_memory: context and output are required");
    if (b < 0 || b >= mms__mllama_n_devices(c))
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_get_memory: backend %d, the context has %d", b, mms__mllama_n_devices(c));
    memset(out, 0, sizeof *out);
    mms__copy_str(out->name, sizeof out->name, mms_backend_name(c->m->backends[b]));
    mms__mllama_memory(c, b, &out->weights, &out->weights_repacked, &out->kv_cache, &out->compute, &kept);
    out->kept_images_peak = kept > c->kept_peak[b] ? kept : c->kept_peak[b];
    out->peak = out->weights + out->kv_cache + out->compute + out->kept_images_peak;
    return MMS_OK;
}

MMS_API enum mms_status mms_mllama_seq_get_timings(const struct mms_mllama_context *c, int seq, struct mms_mllama_seq_timings *out) {
    enum mms_status st = mms__mllama_check_seq(c, seq, "mms_mllama_seq_get_timings");
    int b;
    if (st != MMS_OK) return st;
    if (!out) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_seq_get_timings: out is NULL");
    *out = c->seqs[seq].t;
    out->kv_cache = 0;
    for (b = 0; b < 2; b++) out->kv_cache += c->cache_buf[b] ? mms_backend_buffer_get_size(c->cache_buf[b]) / (size_t)c->p.n_seq : 0;
    return MMS_OK;
}

MMS_API void mms_mllama_reset_timings(struct mms_mllama_context *c) {
    double load, context;
    int s;
    if (!c) return;
    for (s = 0; s < c->p.n_seq; s++) memset(&c->seqs[s].t, 0, sizeof c->seqs[s].t);
    load = c->t.load_ms;
    context = c->t.context_ms;
    memset(&c->t, 0, sizeof c->t);
    c->t.load_ms = load;
    c->t.context_ms = context;
}

static double mms__per_s(int n, double ms) { return ms > 0.0 ? (double)n * 1000.0 / ms : 0.0; }

MMS_API void mms_mllama_print_timings(const struct mms_mllama_context *c, FILE *out) {
    struct mms_mllama_timings t;
    int b;
    if (!out) out = stdout;
    mms_mllama_get_timings(c, &t);
    fprintf(out, "load          %10.2f ms\n", t.load_ms);
    fprintf(out, "context       %10.2f ms   (KV cache, reserving the graphs)\n", t.context_ms);
    fprintf(out, "preprocess    %10.2f ms   images: %d\n", t.preprocess_ms, t.n_preprocessed);
    fprintf(out, "image encode  %10.2f ms   encodes: %d (vision encoder + projector)\n", t.encode_ms, t.n_encodes);
    fprintf(out, "cross K/V     %10.2f ms\n", t.cross_kv_ms);
    fprintf(out, "prompt        %10.2f ms   %d tokens, %.2f tokens/s\n", t.prompt_ms, t.n_prompt_tokens, mms__per_s(t.n_prompt_tokens, t.prompt_ms));
    fprintf(out, "generation    %10.2f ms   %d tokens, %.2f tokens/s\n", t.gen_ms, t.n_gen_tokens, mms__per_s(t.n_gen_tokens, t.gen_ms));
    for (b = 0; b < t.n_backends; b++) {
        struct mms_mllama_memory m;
        if (mms_mllama_get_memory(c, b, &m) != MMS_OK) continue;
        fprintf(out, "memory %-6s peak %.2f MiB = weights %.2f + KV cache %.2f + compute %.2f + kept images %.2f\n", m.name,
                (double)m.peak / 1048576.0, (double)m.weights / 1048576.0, (double)m.kv_cache / 1048576.0,
                (double)m.compute / 1048576.0, (double)m.kept_images_peak / 1048576.0);
    }
    for (b = 0; t.n_seq > 1 && b < t.n_seq; b++) {
        struct mms_mllama_seq_timings st;
        if (mms_mllama_seq_get_timings(c, b, &st) != MMS_OK || st.n_calls == 0) continue;
        fprintf(out, "sequence %-4d prompt %d tokens %.2f ms, generation %d tokens %.2f ms (%.2f tokens/s), KV cache %.2f MiB\n", b,
                st.n_prompt_tokens, st.prompt_ms, st.n_gen_tokens, st.gen_ms, mms__per_s(st.n_gen_tokens, st.gen_ms),
                (double)st.kv_cache / 1048576.0);
    }
}
