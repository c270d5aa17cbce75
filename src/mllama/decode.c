/* >>mllama-decode =================================================================================
   Batches of tokens of any sequences as one graph: each row's position and cache slot, the
   causal mask within its own sequence, the cross-attention masks (which of its sequence's
   pictures a row sees) with the rows grouped per sequence; and a sequence's tokens: how many,
   trimming and clearing them. */

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
    *gate = sq->n_images > 0 ? 1.0f : 0.0f;
    for (j = 0; j < n_img; j++) {
        const int n_tiles = sq->n_images > 0 ? sq->image_tiles[j] : 0;
        for (t = 0; t < T; t++) {
            float v = sq->n_images == 0 || first < 0 ? 0.0f : (j >= first && j <= last && t < n_tiles) ? 0.0f : -INFINITY;
            for (k = 0; k < N; k++) row[((size_t)j * T + t) * N + k] = v;
        }
    }
}

/* Per decode call: where each row goes, the sequences it touches and their images. */
struct mms__mllama_batch_work {
    int32_t *pos, *out_ids, *slot;              /* per row: position in its sequence, cache slot; wanted rows */
    int32_t *perm, *unperm;                     /* the rows in cross-attention group order, and back */
    int     *seq_n, *seq_images, *seq_group;    /* per sequence: rows in the batch, <|image|> tokens, its group */
    int     *group_at;                          /* per group: its next row in group order */
    struct mms__mllama_group_spec *spec;        /* per group (at most n_seq) */
};

static void mms__mllama_batch_work_free(struct mms__mllama_batch_work *w) {
    MMS_FREE(w->pos);
    MMS_FREE(w->seq_n);
    MMS_FREE(w->spec);
}

static bool mms__mllama_batch_work_alloc(struct mms__mllama_batch_work *w, int n, int n_seq) {
    memset(w, 0, sizeof *w);
    w->pos = (int32_t *)MMS_MALLOC(sizeof(int32_t) * (size_t)n * 5);
    w->seq_n = (int *)MMS_MALLOC(sizeof(int) * (size_t)n_seq * 4);
    w->spec = (struct mms__mllama_group_spec *)MMS_MALLOC(sizeof *w->spec * (size_t)n_seq);
    if (!w->pos || !w->seq_n || !w->spec) { mms__mllama_batch_work_free(w); return false; }
    w->out_ids = w->pos + n;
    w->slot = w->out_ids + n;
    w->perm = w->slot + n;
    w->unperm = w->perm + n;
    memset(w->seq_n, 0, sizeof(int) * (size_t)n_seq * 4);
    w->seq_images = w->seq_n + n_seq;
    w->seq_group = w->seq_images + n_seq;
    w->group_at = w->seq_group + n_seq;
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
        if (sq->n_image_pos + w->seq_images[s] > sq->n_images)
            return mms_set_error(MMS_ERR_STATE, "mms_mllama_decode: %d <|image|> tokens in sequence %d but %d images added "
                                 "(add each image with mms_mllama_seq_add_image before its token)", sq->n_image_pos + w->seq_images[s], s, sq->n_images);
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

MMS_API enum mms_status mms_mllama_decode(struct mms_mllama_context *c, const struct mms_mllama_batch *b) {
    const struct mms_mllama_hparams *hp = c ? &c->m->hp : NULL;
    struct mms__mllama_batch_work w;
    struct mms__mllama_batch_plan bp;
    const struct mms__mllama_text_graph *tg;
    struct mms__mllama_group_spec *spec;
    enum mms_status st = MMS_OK;
    int i, s, g, n, n_groups = 0, n_text_only = 0;
    bool gen = true;
    const int64_t t0 = mms_time_us();
    int64_t t_graph;
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
        w.seq_group[s] = c->seqs[s].n_images > 0 ? n_groups++ : 0;   /* sequences without: the first group */
        n_text_only += c->seqs[s].n_images == 0;
        gen &= w.seq_n[s] == 1;
    }
    bp.gate = n_groups > 0 && n_text_only > 0;

    spec = w.spec;
    if (n_groups > 0) {                        /* the groups' sequences, and the rows in group order */
        int *at = w.group_at, off = 0;
        for (s = 0; s < c->p.n_seq; s++) {
            if (!w.seq_n[s] || c->seqs[s].n_images == 0) continue;
            g = w.seq_group[s];
            spec[g].n_img = c->seqs[s].n_images;
            spec[g].n_rows = 0;
            spec[g].seq = s;
        }
        for (i = 0; i < n; i++) spec[w.seq_group[b->seq ? b->seq[i] : 0]].n_rows++;
        for (g = 0, off = 0; g < n_groups; off += spec[g++].n_rows) at[g] = off;
        for (i = 0; i < n; i++) {
            g = w.seq_group[b->seq ? b->seq[i] : 0];
            w.unperm[i] = at[g];
            w.perm[at[g]++] = i;
        }
    }
    t_graph = mms_time_us();
    tg = mms__mllama_decode_graph(c, &bp, spec, n_groups);
    c->t.graph_ms += (double)(mms_time_us() - t_graph) / 1000.0;
    t_graph = mms_time_us();
    st = mms__sched_alloc_again(c->sched, tg->graph);
    c->t.alloc_ms += (double)(mms_time_us() - t_graph) / 1000.0;
    if (st != MMS_OK) goto done;
    if ((st = mms_backend_tensor_set(tg->in.tokens, b->tokens, 0, sizeof *b->tokens * (size_t)n)) != MMS_OK ||
        (st = mms_backend_tensor_set(tg->in.pos, w.pos, 0, sizeof *w.pos * (size_t)n)) != MMS_OK ||
        (st = mms_backend_tensor_set(tg->in.slots, w.slot, 0, sizeof *w.slot * (size_t)n)) != MMS_OK ||
        (bp.n_out > 0 && (st = mms_backend_tensor_set(tg->in.out_ids, w.out_ids, 0, sizeof *w.out_ids * (size_t)bp.n_out)) != MMS_OK) ||
        (st = mms__mllama_set_masks(c, b, &w, tg)) != MMS_OK) goto done;
    {   /* inputs, graph and the logits' read go in order on the backends' streams: one wait, at the end */
        const size_t n_logits = (size_t)bp.n_out * (size_t)hp->n_vocab;
        float *l = NULL;
        enum mms_status sy;
        st = mms_backend_sched_graph_compute_async(c->sched, tg->graph);
        if (st == MMS_OK && n_logits > 0 && !(l = (float *)MMS_REALLOC(c->logits, sizeof *l * n_logits)))
            st = mms_set_error(MMS_ERR_OOM, "mllama: out of host memory for logits");
        if (l) c->logits = l;
        /* into the context's own host memory, which outlives the synchronize below */
        if (st == MMS_OK && n_logits > 0)
            st = mms_backend_tensor_get_async(mms_backend_sched_get_tensor_backend(c->sched, tg->logits), tg->logits, l, 0, sizeof *l * n_logits);
        sy = mms_backend_sched_synchronize(c->sched);
        if (st == MMS_OK) st = sy;
        if (st != MMS_OK) {
            if (l || n_logits == 0) c->n_logits = 0;   /* overwritten, maybe shorter: the old rows are gone */
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
    if (st != MMS_OK) {                        /* the batch did not happen */
        for (s = 0; s < c->p.n_seq; s++) c->seqs[s].n_image_pos -= w.seq_images[s];
        c->kept->valid = false;
    }
    mms__mllama_batch_work_free(&w);
    return st;
}

MMS_API int mms_mllama_seq_get_n_past(const struct mms_mllama_context *c, int seq) {
    return c && seq >= 0 && seq < c->p.n_seq ? c->seqs[seq].n_past : 0;
}

MMS_API int mms_mllama_seq_get_n_images(const struct mms_mllama_context *c, int seq) {
    return c && seq >= 0 && seq < c->p.n_seq ? c->seqs[seq].n_images : 0;
}

MMS_API enum mms_status mms_mllama_seq_clear(struct mms_mllama_context *c, int seq) {
    struct mms__mllama_seq *sq;
    enum mms_status st = mms__mllama_check_seq(c, seq, "mms_mllama_seq_clear");
    int j;
    if (st != MMS_OK) return st;
    sq = &c->seqs[seq];
    for (j = 0; j < sq->n_images; j++)         /* the store may evict them once no sequence holds them */
        if (sq->image_entry[j] >= 0) c->store.pics[sq->image_entry[j]].n_users--;
    sq->n_past = 0;
    sq->n_image_pos = 0;
    sq->n_images = 0;
    memset(&sq->t, 0, sizeof sq->t);
    return MMS_OK;
}

MMS_API enum mms_status mms_mllama_seq_trim(struct mms_mllama_context *c, int seq, int n_keep) {
    struct mms__mllama_seq *sq;
    enum mms_status st = mms__mllama_check_seq(c, seq, "mms_mllama_seq_trim");
    if (st != MMS_OK) return st;
    sq = &c->seqs[seq];
    if (n_keep < 0 || n_keep > sq->n_past)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_seq_trim: n_keep must be in 0..%d for sequence %d", sq->n_past, seq);
    sq->n_past = n_keep;
    while (sq->n_image_pos > 0 && sq->image_pos[sq->n_image_pos - 1] >= n_keep) sq->n_image_pos--;   /* its pictures stay */
    return MMS_OK;
}
