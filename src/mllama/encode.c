/* >>mllama-encode =================================================================================
   Pictures into sequences: a picture added to a sequence is found in the image store by its
   model input, or encoded (vision encoder, projector, every cross layer's keys and values); its
   keys and values are then copied once into the sequence's next picture slot. */

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
    mms__mllama_vision_graph(c, mms__mllama_fresh_graph_ctx(c), -1, 0, false, NULL, NULL, &vg);
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

/* Encodes img into picture slot `slot` of sequence seq; with entry >= 0 the store keeps it there
   (the graph's context and K/V pass to the store). */
static enum mms_status mms__mllama_encode_into(struct mms_mllama_context *c, const struct mms_mllama_image *img, uint64_t hash, int seq, int slot,
                                               int entry) {
    const struct mms_mllama_hparams *hp = &c->m->hp;
    struct mms_init_params ip = { 0, NULL, true };
    struct mms__mllama_vision_graph vg;
    struct mms__mllama_stamp stamp;
    struct mms_context *ctx = entry >= 0 ? mms_init(ip) : mms__mllama_fresh_graph_ctx(c);
    struct mms_tensor **k = (struct mms_tensor **)MMS_MALLOC(sizeof *k * (size_t)hp->n_layer * 2), **v;
    enum mms_status st;
    bool allocated = false;
    int64_t t0, t1;
    size_t bytes[2] = { 0, 0 };
    int il;
    if (!ctx || !k) {
        if (entry >= 0) mms_free(ctx);
        MMS_FREE(k);
        return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory");
    }
    v = k + hp->n_layer;
    mms__mllama_vision_graph(c, ctx, seq, slot, entry >= 0, k, v, &vg);
    if ((st = mms_backend_sched_alloc_graph(c->sched, vg.graph)) == MMS_OK) allocated = true;   /* kept K/V have their buffers */
    if (st == MMS_OK && (st = mms__mllama_set_vision_inputs(c, &vg, img)) == MMS_OK) {
        stamp.mark = vg.projected;
        stamp.at = 0;
        mms__sched_get_eval_callback(c->sched, &stamp.user_cb, &stamp.user);
        mms_backend_sched_set_eval_callback(c->sched, mms__mllama_stamp_cb, &stamp);
        t0 = mms_time_us();
        st = mms_backend_sched_graph_compute(c->sched, vg.graph);
        t1 = mms_time_us();
        mms_backend_sched_set_eval_callback(c->sched, stamp.user_cb, stamp.user);
        if (st == MMS_OK) {
            c->t.encode_ms += (double)((stamp.at ? stamp.at : t1) - t0) / 1000.0;
            c->t.cross_kv_ms += (double)(t1 - (stamp.at ? stamp.at : t1)) / 1000.0;
            c->t.n_encodes++;
            c->n_encodes++;
            c->store.n_encodes++;
        }
    }
    if (entry < 0) {
        MMS_FREE(k);
        return st;
    }
    if (st == MMS_OK) {
        for (il = 0; il < hp->n_layer; il++)
            if (k[il]) bytes[c->m->layers[il].backend] += mms_nbytes(k[il]) + mms_nbytes(v[il]);
        if ((st = mms__mllama_store_put(&c->store, entry, img, hash, ctx, k, v, bytes)) == MMS_OK) return MMS_OK;
    }
    for (il = 0; allocated && il < hp->n_layer; il++) {   /* published by the allocation: held by the scheduler */
        if (k[il]) mms_backend_sched_release(c->sched, k[il]);
        if (v[il]) mms_backend_sched_release(c->sched, v[il]);
    }
    mms_free(ctx);
    MMS_FREE(k);
    return st;
}

/* Copies stored picture e into picture slot `slot` of sequence seq. */
static enum mms_status mms__mllama_copy_picture(struct mms_mllama_context *c, const struct mms__mllama_picture *e, int seq, int slot) {
    struct mms_context *ctx = mms__mllama_fresh_graph_ctx(c);
    struct mms_cgraph *g = mms_new_graph(ctx);
    enum mms_status st;
    int il;
    mms_graph_set_name(g, "picture from the image store");
    for (il = 0; il < c->m->hp.n_layer; il++) {
        if (!e->k[il]) continue;
        mms_build_forward_expand(g, mms_cpy(ctx, e->k[il], mms__mllama_picture_view(ctx, c, c->cross_k[il], seq, slot, 1)));
        mms_build_forward_expand(g, mms_cpy(ctx, e->v[il], mms__mllama_picture_view(ctx, c, c->cross_v[il], seq, slot, 1)));
    }
    st = mms_backend_sched_alloc_graph(c->sched, g);
    if (st != MMS_OK) return st;
    return mms_backend_sched_graph_compute(c->sched, g);
}

MMS_API enum mms_status mms_mllama_seq_add_image(struct mms_mllama_context *c, int seq, const struct mms_mllama_image *img) {
    struct mms__mllama_seq *sq;
    enum mms_status st;
    uint64_t hash;
    int entry, slot;
    if ((st = mms__mllama_check_seq(c, seq, "mms_mllama_seq_add_image")) != MMS_OK) return st;
    if ((st = mms__mllama_check_image(c, img, "mms_mllama_seq_add_image")) != MMS_OK) return st;
    sq = &c->seqs[seq];
    if (sq->n_images == c->p.max_images)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_seq_add_image: sequence %d already has %d images (max_images)", seq, c->p.max_images);
    slot = sq->n_images;
    hash = mms__mllama_picture_hash(img);
    if ((entry = mms__mllama_store_find(&c->store, img, hash)) >= 0) {
        st = mms__mllama_copy_picture(c, &c->store.pics[entry], seq, slot);
    } else {
        entry = mms__mllama_store_make_room(&c->store, c->sched, c->m->hp.n_layer, mms__mllama_picture_bytes(c, img->n_tiles));
        if (entry < 0) c->store.n_not_kept++;
        st = mms__mllama_encode_into(c, img, hash, seq, slot, entry);
        if (st != MMS_OK) entry = -1;
    }
    if (st != MMS_OK) return st;
    if (entry >= 0) c->store.pics[entry].n_users++;
    sq->image_tiles[slot] = img->n_tiles;
    sq->image_entry[slot] = entry;
    sq->n_images++;
    return MMS_OK;
}

MMS_API enum mms_status mms_mllama_seq_add_image_rgb(struct mms_mllama_context *c, int seq, const uint8_t *rgb, int w, int h, size_t stride) {
    struct mms_mllama_image_params ip;
    struct mms_mllama_image img;
    enum mms_status st;
    int64_t t0 = mms_time_us();
    if ((st = mms__mllama_check_seq(c, seq, "mms_mllama_seq_add_image_rgb")) != MMS_OK) return st;
    if (!c->m->has_vision) return mms_set_error(MMS_ERR_UNSUPPORTED, "mms_mllama_seq_add_image_rgb: the model was loaded without its vision tower");
    ip = mms_mllama_model_image_params(c->m);
    if ((st = mms_mllama_preprocess_image(&ip, rgb, w, h, stride, &img)) != MMS_OK) return st;
    c->t.preprocess_ms += (double)(mms_time_us() - t0) / 1000.0;
    c->t.n_preprocessed++;
    st = mms_mllama_seq_add_image(c, seq, &img);
    mms_mllama_image_free(&img);
    return st;
}
