/* >>mllama-context ================================================================================
   A context: the scheduler, the sequences (conversations) with their KV-cache slots and their
   pictures' keys and values, the image store, and the graphs it runs (a picture's encode, a
   decode batch), all reserved at their worst case when it is made. */

#define MMS__MLLAMA_KV_STEP 256   /* attention spans grow in steps, so decode graphs repeat and reuse their plan */

/* One conversation of a context. Its KV-cache slots are [index * n_ctx, (index + 1) * n_ctx); its
   pictures' cross-attention keys and values lie side by side in its own block of the context's
   picture memory (slot j of max_images for its j-th picture), so attention reads them in place. */
struct mms__mllama_seq {
    int  n_past;
    int  n_images;               /* pictures attached, in slots 0..n_images-1 */
    int *image_tiles;            /* each one's used tiles (max_images) */
    int *image_entry;            /* each one's image store entry, -1 when the store did not keep it (max_images) */
    int *image_pos;              /* positions of the <|image|> tokens decoded (max_images) */
    int  n_image_pos;
    struct mms_mllama_seq_timings t;   /* kv_cache filled in when asked */
};

struct mms_mllama_context {
    struct mms_mllama_model         *m;
    struct mms_mllama_context_params p;
    mms_backend_sched_t              sched;
    struct mms_context              *cache_ctx[2];
    mms_backend_buffer_t             cache_buf[2];
    struct mms_tensor              **k_cache, **v_cache;     /* per text layer (self-attention ones): [HD, Hkv, n_seq * n_ctx] */
    struct mms_tensor              **cross_k, **cross_v;     /* per text layer (cross ones): [HD, max_images * T * N, Hkv, n_seq] */
    struct mms_context              *gctx;                   /* the current graph; reset before each */
    struct mms__mllama_kept_decode  *kept;                   /* the last decode graph, computed again while its shape holds */
    struct mms__mllama_seq          *seqs;                   /* n_seq */
    int                             *seq_ints;               /* the sequences' picture lists, one block */
    struct mms__mllama_store         store;
    int                              n_encodes;

    float                           *logits;
    int                              n_logits;

    struct mms_mllama_timings        t;                      /* memory filled in when asked */
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
MMS_API int mms_mllama_get_n_encodes(const struct mms_mllama_context *c) { return c ? c->n_encodes : 0; }

static struct mms_context *mms__mllama_fresh_graph_ctx(struct mms_mllama_context *c) {
    mms_reset(c->gctx);
    return c->gctx;
}

static int mms__mllama_n_devices(const struct mms_mllama_context *c) { return c->m->backends[1] == c->m->backends[0] ? 1 : 2; }

static enum mms_status mms__mllama_check_seq(const struct mms_mllama_context *c, int seq, const char *who) {
    if (!c) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: context is NULL", who);
    if (seq < 0 || seq >= c->p.n_seq) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: sequence %d, the context has 0..%d (n_seq)", who, seq, c->p.n_seq - 1);
    return MMS_OK;
}

/* Keys per picture in the cross layers: every tile slot's tokens, padded tiles included. */
static int64_t mms__mllama_picture_keys(const struct mms_mllama_hparams *hp) { return (int64_t)hp->v_max_tiles * hp->v_n_tokens; }

/* Pictures first..first+n-1 of sequence seq in a cross layer's picture memory t: [HD, n * keys, Hkv]. */
static struct mms_tensor *mms__mllama_picture_view(struct mms_context *ctx, const struct mms_mllama_context *c, struct mms_tensor *t, int seq,
                                                   int first, int n) {
    const int64_t keys = mms__mllama_picture_keys(&c->m->hp);
    return mms_view_3d(ctx, t, t->ne[0], keys * n, t->ne[2], t->nb[1], t->nb[2], (size_t)seq * t->nb[3] + (size_t)(first * keys) * t->nb[1]);
}

/* -- graphs -- */

struct mms__mllama_vision_graph {
    struct mms_cgraph *graph;
    struct mms__mllama_vision_inputs in;
    struct mms_tensor *vision_out, *projected;
};

/* The vision graph: encoder and projector; with k set (seq >= 0), also every cross layer's keys
   and values, written into picture slot `slot` of sequence seq and, when keep, into persistent
   tensors k[il], v[il] for the image store. */
static void mms__mllama_vision_graph(struct mms_mllama_context *c, struct mms_context *ctx, int seq, int slot, bool keep,
                                     struct mms_tensor **k, struct mms_tensor **v, struct mms__mllama_vision_graph *out) {
    const struct mms_mllama_hparams *hp = &c->m->hp;
    const int64_t L = (int64_t)hp->v_n_tokens_padded * hp->v_max_tiles;
    int il;
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
    if (seq < 0) {
        mms_graph_set_name(out->graph, "vision encoder");
        mms_set_output(out->vision_out);
        mms_set_output(out->projected);
        mms_build_forward_expand(out->graph, out->vision_out);
        mms_build_forward_expand(out->graph, out->projected);
        return;
    }
    mms_graph_set_name(out->graph, keep ? "vision encoder + cross K/V" : "vision encoder + cross K/V, not kept");
    mms__mllama_build_cross_kv(ctx, c->m, out->projected, k, v);
    for (il = 0; il < hp->n_layer; il++) {
        if (!k[il]) continue;
        if (keep) {   /* in the layer's K/V type, as the sequence holds them */
            k[il] = mms_cast(ctx, k[il], c->cross_k[il]->type);
            v[il] = mms_cast(ctx, v[il], c->cross_v[il]->type);
            mms_format_name(k[il], "blk.%d.cross_k", il);
            mms_format_name(v[il], "blk.%d.cross_v", il);
            mms_set_persistent(k[il]);
            mms_set_persistent(v[il]);
            mms_build_forward_expand(out->graph, k[il]);
            mms_build_forward_expand(out->graph, v[il]);
        }
        mms_build_forward_expand(out->graph, mms_cpy(ctx, k[il], mms__mllama_picture_view(ctx, c, c->cross_k[il], seq, slot, 1)));
        mms_build_forward_expand(out->graph, mms_cpy(ctx, v[il], mms__mllama_picture_view(ctx, c, c->cross_v[il], seq, slot, 1)));
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

/* A cross-attention group of a batch: its rows, and the sequence whose first n_img pictures they see. */
struct mms__mllama_group_spec {
    int n_rows, n_img, seq;
};

/* The decode graph of a batch; n_groups cross-attention groups (0: text only). */
static void mms__mllama_text_graph(struct mms_mllama_context *c, struct mms_context *ctx, const struct mms__mllama_batch_plan *bp,
                                   const struct mms__mllama_group_spec *spec, int n_groups, struct mms__mllama_text_graph *out) {
    const struct mms_mllama_hparams *hp = &c->m->hp;
    const int n = bp->n, n_out = bp->n_out;
    int il, g, first = 0;
    out->n_kv = bp->n_kv;
    out->kv_lo = bp->kv_lo;
    memset(&out->in, 0, sizeof out->in);
    out->in.tokens = mms_set_name(mms_new_tensor_1d(ctx, MMS_TYPE_I32, n), "tokens");
    out->in.pos = mms_set_name(mms_new_tensor_1d(ctx, MMS_TYPE_I32, n), "positions");
    out->in.slots = mms_set_name(mms_new_tensor_1d(ctx, MMS_TYPE_I32, n), "kv_slots");
    out->in.kq_mask = mms_set_name(mms_new_tensor_2d(ctx, MMS_TYPE_F32, out->n_kv, n), "kq_mask");
    if (n_out > 0) mms_set_input(out->in.out_ids = mms_set_name(mms_new_tensor_1d(ctx, MMS_TYPE_I32, n_out), "out_ids"));
    mms_set_input(out->in.tokens);
    mms_set_input(out->in.pos);
    mms_set_input(out->in.slots);
    mms_set_input(out->in.kq_mask);
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
            const int64_t L = (int64_t)spec[g].n_img * mms__mllama_picture_keys(hp);
            gr->first = first;
            gr->n = spec[g].n_rows;
            gr->n_img = spec[g].n_img;
            first += gr->n;
            gr->mask = mms_format_name(mms_new_tensor_2d(ctx, MMS_TYPE_F32, L, gr->n), "cross_mask.%d", g);
            mms_set_input(gr->mask);
            gr->k = (struct mms_tensor **)mms__ctx_alloc(ctx, sizeof *gr->k * (size_t)hp->n_layer * 2, MMS__OBJ_ALIGN);
            if (!gr->k) break;
            gr->v = gr->k + hp->n_layer;
            for (il = 0; il < hp->n_layer; il++) {   /* the sequence's pictures in place, in conversation order */
                gr->k[il] = c->cross_k[il] ? mms__mllama_picture_view(ctx, c, c->cross_k[il], spec[g].seq, 0, spec[g].n_img) : NULL;
                gr->v[il] = c->cross_v[il] ? mms__mllama_picture_view(ctx, c, c->cross_v[il], spec[g].seq, 0, spec[g].n_img) : NULL;
            }
        }
        out->in.n_groups = out->in.groups && g == n_groups ? n_groups : 0;   /* else the context's error fails the graph */
    }
    out->graph = mms_new_graph(ctx);
    mms_graph_set_name(out->graph, n == 1 ? "decode" : "prefill");
    out->logits = mms__mllama_build_text(ctx, out->graph, c->m, c->k_cache, c->v_cache, bp->kv_lo, &out->in);
    if (out->logits) mms_build_forward_expand(out->graph, out->logits);   /* else the KV-cache writes are the graph */
}

/* The last decode graph with what fixed its shape: the batch plan and the cross-attention groups.
   A batch of the same shape computes it again with its own inputs (tokens, positions, slots, masks,
   wanted rows, group order); every other shape builds its own. */
struct mms__mllama_kept_decode {
    struct mms_context            *ctx;       /* the graph's tensors; reset before each build */
    struct mms__mllama_text_graph  tg;
    struct mms__mllama_batch_plan  bp;
    struct mms__mllama_group_spec *spec;      /* n_seq: at most one group per sequence */
    int                            n_groups;
    bool                           valid;
};

/* Whether the kept decode graph is the graph of this batch shape. */
static bool mms__mllama_kept_fits(const struct mms__mllama_kept_decode *k, const struct mms__mllama_batch_plan *bp,
                                  const struct mms__mllama_group_spec *spec, int n_groups) {
    int g;
    if (!k->valid || k->bp.n != bp->n || k->bp.n_out != bp->n_out || k->bp.n_kv != bp->n_kv || k->bp.kv_lo != bp->kv_lo ||
        k->bp.gate != bp->gate || k->n_groups != n_groups) return false;
    for (g = 0; g < n_groups; g++)
        if (k->spec[g].n_rows != spec[g].n_rows || k->spec[g].n_img != spec[g].n_img || k->spec[g].seq != spec[g].seq) return false;
    return true;
}

/* The decode graph of this batch shape: the kept one when it fits (and the context reuses graphs),
   else a new one, kept. */
static struct mms__mllama_text_graph *mms__mllama_decode_graph(struct mms_mllama_context *c, const struct mms__mllama_batch_plan *bp,
                                                               const struct mms__mllama_group_spec *spec, int n_groups) {
    struct mms__mllama_kept_decode *k = c->kept;
    if (!c->p.rebuild_graphs && mms__mllama_kept_fits(k, bp, spec, n_groups)) return &k->tg;
    mms_reset(k->ctx);
    mms__mllama_text_graph(c, k->ctx, bp, spec, n_groups, &k->tg);
    k->bp = *bp;
    k->n_groups = n_groups;
    if (n_groups > 0) memcpy(k->spec, spec, sizeof *spec * (size_t)n_groups);
    k->valid = mms_graph_status(k->tg.graph) == MMS_OK;
    c->t.n_decode_builds++;
    return &k->tg;
}

/* -- creation: the sequences' memory and the reservation of every graph -- */

/* The KV cache (self-attention layers) and the sequences' picture memory (cross layers), on
   their layers' backends, zeroed. */
static enum mms_status mms__mllama_make_caches(struct mms_mllama_context *c) {
    const struct mms_mllama_hparams *hp = &c->m->hp;
    const int64_t slots = (int64_t)c->p.n_seq * c->p.n_ctx, keys = mms__mllama_picture_keys(hp) * c->p.max_images;
    int il, b;
    c->k_cache = (struct mms_tensor **)MMS_MALLOC(sizeof *c->k_cache * (size_t)hp->n_layer * 4);
    if (!c->k_cache) return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory");
    memset(c->k_cache, 0, sizeof *c->k_cache * (size_t)hp->n_layer * 4);
    c->v_cache = c->k_cache + hp->n_layer;
    c->cross_k = c->v_cache + hp->n_layer;
    c->cross_v = c->cross_k + hp->n_layer;
    for (b = 0; b < 2; b++) {
        struct mms_init_params ip = { 0, NULL, true };
        if (!(c->cache_ctx[b] = mms_init(ip))) return mms_last_status();
    }
    for (il = 0; il < hp->n_layer; il++) {
        struct mms_context *ctx = c->cache_ctx[c->m->layers[il].backend];
        const enum mms_type type = mms__mllama_kv_type(c->m, il);
        if (!c->m->layers[il].cross) {
            c->k_cache[il] = mms_format_name(mms_new_tensor_3d(ctx, type, hp->head_dim, hp->n_head_kv, slots), "cache_k.%d", il);
            c->v_cache[il] = mms_format_name(mms_new_tensor_3d(ctx, type, hp->head_dim, hp->n_head_kv, slots), "cache_v.%d", il);
        } else if (c->m->has_vision) {
            c->cross_k[il] = mms_format_name(mms_new_tensor_4d(ctx, type, hp->head_dim, keys, hp->n_head_kv, c->p.n_seq), "pictures_k.%d", il);
            c->cross_v[il] = mms_format_name(mms_new_tensor_4d(ctx, type, hp->head_dim, keys, hp->n_head_kv, c->p.n_seq), "pictures_v.%d", il);
        }
    }
    for (b = 0; b < 2; b++) {
        if (!mms_get_first_tensor(c->cache_ctx[b])) continue;
        c->cache_buf[b] = mms_backend_alloc_ctx_tensors(c->cache_ctx[b], c->m->backends[b]);
        if (!c->cache_buf[b])
            return mms__error_context(mms_last_status(), "mllama: the KV cache and picture memory for %d sequences of %d tokens and %d "
                                      "pictures do not fit on %s: %s", c->p.n_seq, c->p.n_ctx, c->p.max_images,
                                      mms_backend_name(c->m->backends[b]), mms_last_error());
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

/* The worst cases: a picture's encode (kept by the store or not) and a batch of n_batch rows over
   every sequence's slots, as many sequences as a batch can hold each with max_images pictures. */
static enum mms_status mms__mllama_reserve_all(struct mms_mllama_context *c) {
    const struct mms_mllama_hparams *hp = &c->m->hp;
    struct mms__mllama_vision_graph vg;
    struct mms__mllama_text_graph tg;
    struct mms__mllama_batch_plan bp;
    struct mms__mllama_group_spec *spec;
    struct mms_context *ctx;
    enum mms_status st = MMS_OK;
    const int n_groups = c->m->has_vision ? MMS__MIN(c->p.n_seq, c->p.n_batch) : 0;
    int j, keep;

    for (keep = 0; c->m->has_vision && keep < 2; keep++) {
        struct mms_tensor **k, **v;
        ctx = mms__mllama_fresh_graph_ctx(c);
        k = (struct mms_tensor **)mms__ctx_alloc(ctx, sizeof *k * (size_t)hp->n_layer * 2, MMS__OBJ_ALIGN);
        if (!k) return mms_ctx_status(ctx);
        v = k + hp->n_layer;
        mms__mllama_vision_graph(c, ctx, 0, 0, keep == 1, k, v, &vg);
        if ((st = mms__mllama_reserve(c, vg.graph)) != MMS_OK) return st;
    }
    ctx = mms__mllama_fresh_graph_ctx(c);
    spec = (struct mms__mllama_group_spec *)mms__ctx_alloc(ctx, sizeof *spec * (size_t)(n_groups + 1), MMS__OBJ_ALIGN);
    if (!spec) return mms_ctx_status(ctx);
    memset(&bp, 0, sizeof bp);                 /* the widest batch: every sequence's slots, every row's logits */
    bp.n = bp.n_out = c->p.n_batch;
    bp.n_kv = c->p.n_seq * c->p.n_ctx;
    bp.gate = c->p.n_seq > 1;
    for (j = 0; j < n_groups; j++) {           /* every group with max_images pictures: the most mask */
        spec[j].n_rows = j == 0 ? c->p.n_batch - (n_groups - 1) : 1;
        spec[j].n_img = c->p.max_images;
        spec[j].seq = j;
    }
    mms__mllama_text_graph(c, ctx, &bp, spec, n_groups, &tg);
    st = mms__mllama_reserve(c, tg.graph);
    mms_backend_sched_reset(c->sched);
    return st;
}

/* Bytes of one kept picture at most: its keys and values in every cross layer, and the pixels of
   max_num_tiles tiles. */
static size_t mms__mllama_picture_bytes(const struct mms_mllama_context *c, int n_tiles) {
    const struct mms_mllama_hparams *hp = &c->m->hp;
    size_t bytes = sizeof(float) * 3 * (size_t)hp->v_image_size * (size_t)hp->v_image_size * (size_t)n_tiles;
    int il;
    for (il = 0; il < hp->n_layer; il++)
        if (c->cross_k[il]) bytes += 2 * mms_type_size(c->cross_k[il]->type) * (size_t)(hp->head_dim * hp->n_head_kv * mms__mllama_picture_keys(hp));
    return bytes;
}

/* Lowers the image store's budget to room for n pictures of the model's most tiles (the serving
   engine's default, when it is given no budget). */
static void mms__mllama_context_store_pictures(struct mms_mllama_context *c, int n) {
    const size_t budget = mms__mllama_picture_bytes(c, c->m->hp.v_max_tiles) * (size_t)n;
    if (c->m->has_vision && budget < c->store.budget) c->store.budget = c->p.image_store = budget;
}

MMS_API void mms_mllama_context_free(struct mms_mllama_context *c) {
    int i;
    if (!c) return;
    mms__mllama_store_free(&c->store, c->sched, c->m->hp.n_layer);
    mms_backend_sched_free(c->sched);
    for (i = 0; i < 2; i++) { mms_backend_buffer_free(c->cache_buf[i]); mms_free(c->cache_ctx[i]); }
    mms_free(c->gctx);
    if (c->kept) { mms_free(c->kept->ctx); MMS_FREE(c->kept->spec); MMS_FREE(c->kept); }
    MMS_FREE(c->k_cache); MMS_FREE(c->seqs); MMS_FREE(c->seq_ints);
    MMS_FREE(c->logits); MMS_FREE(c->reserved);
    MMS_FREE(c);
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
    if (c->p.n_ctx < 0 || c->p.n_batch < 0 || c->p.max_images < 0 || c->p.n_seq < 0 || c->p.n_seq > 4096) {
        mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_context_new: n_ctx %d, n_batch %d, max_images %d, n_seq %d: each must be 0 (the "
                      "default) or positive, n_seq at most 4096", c->p.n_ctx, c->p.n_batch, c->p.max_images, c->p.n_seq);
        MMS_FREE(c);
        return NULL;
    }
    if (c->p.n_ctx == 0) c->p.n_ctx = MMS__MIN(2048, m->hp.n_ctx_train);
    if (c->p.n_batch == 0) c->p.n_batch = 512;
    if (c->p.max_images == 0) c->p.max_images = 2;
    if (c->p.n_seq == 0) c->p.n_seq = 1;
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
    if ((c->kept = (struct mms__mllama_kept_decode *)MMS_MALLOC(sizeof *c->kept)) != NULL) {
        memset(c->kept, 0, sizeof *c->kept);
        c->kept->ctx = mms_init(ip);
        c->kept->spec = (struct mms__mllama_group_spec *)MMS_MALLOC(sizeof *c->kept->spec * (size_t)c->p.n_seq);
    }
    c->seqs = (struct mms__mllama_seq *)MMS_MALLOC(sizeof *c->seqs * (size_t)c->p.n_seq);
    c->seq_ints = (int *)MMS_MALLOC(sizeof(int) * 3 * (size_t)c->p.max_images * (size_t)c->p.n_seq);
    if (!c->sched || !c->gctx || !c->kept || !c->kept->ctx || !c->kept->spec || !c->seqs || !c->seq_ints) goto fail;
    for (i = 0; i < c->p.n_seq; i++) {
        memset(&c->seqs[i], 0, sizeof c->seqs[i]);
        c->seqs[i].image_tiles = c->seq_ints + (size_t)3 * (size_t)i * (size_t)c->p.max_images;
        c->seqs[i].image_entry = c->seqs[i].image_tiles + c->p.max_images;
        c->seqs[i].image_pos = c->seqs[i].image_entry + c->p.max_images;
    }
    if (mms__mllama_make_caches(c) != MMS_OK) goto fail;
    if (m->has_vision) {   /* the store: the budget given, or room for every sequence's pictures and two more */
        const size_t most = mms__mllama_picture_bytes(c, m->hp.v_max_tiles), least = mms__mllama_picture_bytes(c, 1);
        c->store.budget = c->p.image_store ? c->p.image_store : most * (size_t)(c->p.max_images * c->p.n_seq + 2);
        c->store.cap = (int)MMS__MIN((size_t)1 << 20, c->store.budget / least + 1);
        if (!(c->store.pics = (struct mms__mllama_picture *)MMS_MALLOC(sizeof *c->store.pics * (size_t)c->store.cap))) goto fail;
        memset(c->store.pics, 0, sizeof *c->store.pics * (size_t)c->store.cap);
    }
    c->p.image_store = c->store.budget;
    if (mms__mllama_reserve_all(c) != MMS_OK) goto fail;
    c->t.load_ms = (double)m->load_us / 1000.0;
    c->t.context_ms = (double)(mms_time_us() - t0) / 1000.0;
    return c;
fail:
    if (mms_last_status() == MMS_OK) mms_set_error(MMS_ERR_OOM, "mllama: out of host memory");
    mms_mllama_context_free(c);
    return NULL;
}
