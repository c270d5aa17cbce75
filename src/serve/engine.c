/* >>serve-engine ==================================================================================
   The engine thread and its slots: requests wait in a queue, take the idle slot (a sequence of the
   engine's mllama context) that already holds the longest part of their prompt, have their
   pictures added one per step, then advance together: each step decodes one token of every
   generating request and prompt tokens of starting ones, n_batch tokens at most, as one batch. */

/* Idle constraints the engine keeps for later requests of their grammar: one per slot, at most
   this many (a constraint's caches may grow to tens of MB: see MMS__SET_NEXT_MAX). */
#define MMS__SERVE_POOL_MAX 8

struct mms__serve_slot {
    struct mms_reply        *r;          /* running there, or NULL: idle */
    int32_t                 *kv;         /* the tokens its sequence's KV cache holds, in order */
    int                      n_kv;
    struct mms_mllama_image *images;     /* the pictures its sequence holds (the request's, taken over) */
    uint64_t                *image_hash;
    int                      n_images;
    int64_t                  last_use;
};

struct mms_engine {
    struct mms__serve_hub     *hub;
    struct mms_engine_params   p;
    struct mms_mllama_context *ctx;
    const struct mms_vocab    *vocab;
    int                        n_vocab;
    mms__thread                thread;
    bool                       started;
    /* the engine thread's */
    struct mms__serve_slot    *slots;
    int32_t                   *b_tokens, *b_seq;      /* a step's batch (n_batch) */
    bool                      *b_want;
    struct mms_reply         **b_order;               /* its starting requests (n_slots) and their tokens */
    int                       *b_take;
    int64_t                    clock;
    /* under hub->mu */
    struct mms_reply          *queue, *queue_tail;
    int                        n_queued, n_running;
    bool                       stop;
    struct mms_engine_stats    stats;
};

static void mms__serve_slot_free(struct mms__serve_slot *s) {
    int i;
    for (i = 0; s->images && i < s->n_images; i++) mms_mllama_image_free(&s->images[i]);
    MMS_FREE(s->images);
    MMS_FREE(s->image_hash);
    MMS_FREE(s->kv);
}

/* A slot whose sequence may be in any state (a failure, pictures half added): forgotten. */
static void mms__serve_slot_reset(struct mms_engine *e, int s) {
    struct mms__serve_slot *sl = &e->slots[s];
    int i;
    mms_mllama_seq_clear(e->ctx, s);
    sl->n_kv = 0;
    for (i = 0; i < sl->n_images; i++) mms_mllama_image_free(&sl->images[i]);
    sl->n_images = 0;
}

/* -- handing over -- */

static void mms__serve_usage(const struct mms__serve_req *q, int64_t now, struct mms_reply_usage *u) {
    const int64_t slot = q->t_slot ? q->t_slot : now, first = q->t_first ? q->t_first : now;
    u->prompt_tokens = q->n_tokens;
    u->cached_tokens = q->n_cached;
    u->completion_tokens = q->n_gen;
    u->images = q->n_images;
    u->images_encoded = q->n_encoded;
    u->queue_ms = (double)(slot - q->t_submit) / 1000.0;
    u->prompt_ms = q->t_slot ? (double)(first - slot) / 1000.0 : 0.0;
    u->gen_ms = q->t_first ? (double)(now - first) / 1000.0 : 0.0;
}

/* Hands r's ready text, usage and counters over (under the lock); when the request has ended,
   ends the reply, lets the slot go (its KV cache stays for a request that comes back) and drops
   the engine's reference. */
static void mms__serve_publish_locked(struct mms_engine *e, struct mms_reply *r) {
    struct mms__serve_req *q = &r->q;
    const int64_t now = mms_time_us();
    if (q->finish != MMS_FINISH_CANCELLED && q->ready > q->handed && !mms__serve_reply_put(r, q->text + q->handed, q->ready - q->handed)) {
        q->finish = MMS_FINISH_ERROR;
        q->status = MMS_ERR_OOM;
        mms__copy_str(q->error, sizeof q->error, "mms_engine: out of host memory for the reply's text");
    }
    q->handed = q->ready;
    e->stats.completion_tokens += q->n_gen - q->counted_gen;
    e->stats.images_encoded += q->n_encoded - q->counted_encoded;
    q->counted_gen = q->n_gen;
    q->counted_encoded = q->n_encoded;
    mms__serve_usage(q, now, &r->usage);
    if (q->finish == MMS_FINISH_NONE) return;
    mms__serve_reply_end(r, q->finish, q->status, q->error);
    if (q->finish == MMS_FINISH_CANCELLED) e->stats.cancelled++;
    else if (q->finish == MMS_FINISH_ERROR) e->stats.failed++;
    else e->stats.finished++;
    if (q->phase == MMS__SERVE_QUEUED) {
        e->n_queued--;
    } else {
        if (q->phase == MMS__SERVE_PICTURES) mms__serve_slot_reset(e, q->slot);   /* some of its pictures only */
        e->n_running--;
        e->slots[q->slot].r = NULL;
        e->slots[q->slot].last_use = ++e->clock;
    }
    q->phase = MMS__SERVE_DONE;
    mms__serve_reply_unref_locked(r);             /* never the hub's last: the engine holds one */
}

static void mms__serve_fail(struct mms__serve_req *q, enum mms_status status, const char *why) {
    q->finish = MMS_FINISH_ERROR;
    q->status = status;
    mms__copy_str(q->error, sizeof q->error, why);
}

/* -- taking a slot -- */

static bool mms__serve_same_images(const struct mms__serve_slot *sl, const struct mms__serve_req *q) {
    int i;
    if (sl->n_images != q->n_images) return false;
    for (i = 0; i < q->n_images; i++)
        if (sl->image_hash[i] != q->image_hash[i] || !mms__mllama_image_same(&sl->images[i], &q->images[i])) return false;
    return true;
}

/* The prompt tokens of q that slot sl's KV cache can give: the common prefix of their tokens when
   the slot holds q's pictures, the same in the same order, else nothing (-1). Tokens before the
   first <|image|> attend to every picture of their sequence, and every later token attends to
   them, so a KV cache computed with other pictures, or none, differs from a fresh run's from its
   first token on. Never the whole prompt: its last token is decoded again for the logits. */
static int mms__serve_reusable(const struct mms__serve_slot *sl, const struct mms__serve_req *q) {
    int k = 0;
    if (!mms__serve_same_images(sl, q)) return -1;
    while (k < sl->n_kv && k < q->n_tokens - 1 && sl->kv[k] == q->tokens[k]) k++;
    return k;
}

/* Puts r in the idle slot that can give the most of its prompt (among equals, the least recently
   used, so other conversations stay longer); false when no slot is idle. Under the lock. */
static bool mms__serve_admit_locked(struct mms_engine *e, struct mms_reply *r) {
    struct mms__serve_req *q = &r->q;
    struct mms__serve_slot *sl;
    int s, best = -1, best_k = -2, k, i;
    for (s = 0; s < e->p.n_slots; s++) {
        if (e->slots[s].r) continue;
        k = mms__serve_reusable(&e->slots[s], q);
        if (k > best_k || (k == best_k && e->slots[s].last_use < e->slots[best].last_use)) { best = s; best_k = k; }
    }
    if (best < 0) return false;
    sl = &e->slots[best];
    sl->r = r;
    q->slot = best;
    q->t_slot = mms_time_us();
    e->n_queued--;
    e->n_running++;
    e->stats.prompt_tokens += q->n_tokens;
    e->stats.images += q->n_images;
    if (best_k >= 0) {                            /* its pictures are in place; trimming keeps them */
        mms_mllama_seq_trim(e->ctx, best, best_k);
        sl->n_kv = q->n_done = q->n_cached = best_k;
        q->n_attached = q->n_images;
        q->phase = MMS__SERVE_PROMPT;
        e->stats.cached_tokens += best_k;
        return true;
    }
    mms__serve_slot_reset(e, best);               /* the slot takes the request's pictures over */
    for (i = 0; i < q->n_images; i++) {
        sl->images[i] = q->images[i];
        sl->image_hash[i] = q->image_hash[i];
        memset(&q->images[i], 0, sizeof q->images[i]);
    }
    sl->n_images = q->n_images;
    q->phase = q->n_images > 0 ? MMS__SERVE_PICTURES : MMS__SERVE_PROMPT;
    return true;
}

/* -- the engine thread's work between the locks -- */

/* Adds the next picture of the request that took its slot first among those waiting for one;
   false if none waits. An encode is one graph: the bound on what a step waits for. */
static bool mms__serve_add_picture(struct mms_engine *e) {
    struct mms_reply *r = NULL;
    struct mms__serve_req *q;
    enum mms_status st;
    int s, before;
    for (s = 0; s < e->p.n_slots; s++) {
        struct mms_reply *x = e->slots[s].r;
        if (x && x->q.phase == MMS__SERVE_PICTURES && (!r || x->q.t_slot < r->q.t_slot)) r = x;
    }
    if (!r) return false;
    q = &r->q;
    before = mms_mllama_get_n_encodes(e->ctx);
    if ((st = mms_mllama_seq_add_image(e->ctx, q->slot, &e->slots[q->slot].images[q->n_attached])) != MMS_OK) {
        mms__serve_fail(q, st, mms_last_error());
        mms__serve_slot_reset(e, q->slot);
        return true;
    }
    q->n_encoded += mms_mllama_get_n_encodes(e->ctx) - before;
    if (++q->n_attached == q->n_images) q->phase = MMS__SERVE_PROMPT;
    return true;
}

/* One token sampled for q: the text it adds, and whether that ends the request. The CLI's order:
   an end token ends it; else its text, then max_tokens and a full slot. */
static void mms__serve_take_token(struct mms_engine *e, struct mms__serve_req *q, int32_t id) {
    char piece[400];
    bool flush = false;
    int n;
    q->n_gen++;
    q->last = id;
    if (q->t_first == 0) q->t_first = mms_time_us();
    if (mms_vocab_is_eog(e->vocab, id)) {
        q->finish = MMS_FINISH_STOP;
        flush = true;
    } else {
        n = mms_detokenizer_push(e->vocab, &q->detok, id, piece, sizeof piece, false);
        if (n > 0 && !mms__serve_append(q, piece, (size_t)n)) { mms__serve_fail(q, MMS_ERR_OOM, "mms_engine: out of host memory for the text"); return; }
        if (mms__serve_scan_stops(q, false)) q->finish = MMS_FINISH_STOP;   /* the text ends before the stop string */
        else if ((q->max_tokens > 0 && q->n_gen >= q->max_tokens) || mms_mllama_seq_get_n_past(e->ctx, q->slot) >= e->p.n_ctx) {
            q->finish = MMS_FINISH_LENGTH;
            flush = true;
        }
    }
    if (flush) {                                  /* the last bytes, and nothing held back */
        n = mms_detokenizer_flush(&q->detok, piece, sizeof piece);
        if (n > 0 && !mms__serve_append(q, piece, (size_t)n)) { mms__serve_fail(q, MMS_ERR_OOM, "mms_engine: out of host memory for the text"); return; }
        mms__serve_scan_stops(q, true);
    }
}

/* One decode step: the last token of every generating request, then prompt tokens of starting
   ones (those with the fewest left first) up to n_batch in all; then each row whose logits
   were asked is sampled. Returns the step's milliseconds, or a negative number if there was
   nothing to decode. */
static double mms__serve_step(struct mms_engine *e) {
    struct mms_mllama_batch b;
    struct mms_reply **order = e->b_order;
    int n = 0, s, i, row, n_prompt = 0, *take = e->b_take;
    enum mms_status st;
    int64_t t0;
    for (s = 0; s < e->p.n_slots; s++) {
        struct mms_reply *r = e->slots[s].r;
        if (!r || r->q.phase != MMS__SERVE_GEN || r->q.finish != MMS_FINISH_NONE) continue;
        e->b_tokens[n] = r->q.last;
        e->b_seq[n] = s;
        e->b_want[n++] = true;
    }
    for (;;) {                                    /* starting requests, the fewest tokens left first: a short prompt
                                                     is not kept behind a long one, which takes what is left */
        struct mms_reply *next = NULL;
        for (s = 0; s < e->p.n_slots; s++) {
            struct mms_reply *r = e->slots[s].r;
            bool seen = false;
            if (!r || r->q.phase != MMS__SERVE_PROMPT || r->q.finish != MMS_FINISH_NONE) continue;
            for (i = 0; i < n_prompt; i++) seen |= order[i] == r;
            if (!seen && (!next || r->q.n_tokens - r->q.n_done < next->q.n_tokens - next->q.n_done ||
                          (r->q.n_tokens - r->q.n_done == next->q.n_tokens - next->q.n_done && r->q.t_slot < next->q.t_slot))) next = r;
        }
        if (!next || n == e->p.n_batch) break;
        take[n_prompt] = MMS__MIN(e->p.n_batch - n, next->q.n_tokens - next->q.n_done);
        for (i = 0; i < take[n_prompt]; i++) {
            e->b_tokens[n] = next->q.tokens[next->q.n_done + i];
            e->b_seq[n] = next->q.slot;
            e->b_want[n++] = next->q.n_done + i == next->q.n_tokens - 1;
        }
        order[n_prompt++] = next;
    }
    if (n == 0) return -1.0;
    memset(&b, 0, sizeof b);
    b.n_tokens = n;
    b.tokens = e->b_tokens;
    b.seq = e->b_seq;
    b.want = e->b_want;
    t0 = mms_time_us();
    st = mms_mllama_decode(e->ctx, &b);
    if (st != MMS_OK) {                           /* every request in the batch fails; their slots are forgotten */
        for (i = 0; i < n; i++) {
            struct mms__serve_req *q = &e->slots[e->b_seq[i]].r->q;
            if (q->finish == MMS_FINISH_NONE) mms__serve_fail(q, st, mms_last_error());
            mms__serve_slot_reset(e, e->b_seq[i]);
        }
        return (double)(mms_time_us() - t0) / 1000.0;
    }
    for (i = 0; i < n_prompt; i++) {              /* the prompt chunks are in the KV cache */
        struct mms__serve_req *q = &order[i]->q;
        struct mms__serve_slot *sl = &e->slots[q->slot];
        memcpy(sl->kv + sl->n_kv, q->tokens + q->n_done, sizeof *q->tokens * (size_t)take[i]);
        sl->n_kv += take[i];
        q->n_done += take[i];
    }
    for (i = 0, row = 0; i < n; i++) {
        struct mms__serve_slot *sl = &e->slots[e->b_seq[i]];
        struct mms__serve_req *q = &sl->r->q;
        int32_t id;
        if (q->phase == MMS__SERVE_GEN) sl->kv[sl->n_kv++] = e->b_tokens[i];   /* a generating row */
        if (!e->b_want[i]) continue;
        id = mms_sampler_sample(q->sampler, mms_mllama_get_logits(e->ctx, row++), e->n_vocab);
        if (id < 0) { mms__serve_fail(q, mms_last_status(), mms_last_error()); continue; }
        q->phase = MMS__SERVE_GEN;
        mms__serve_take_token(e, q, id);
    }
    return (double)(mms_time_us() - t0) / 1000.0;
}

/* -- the engine thread -- */

static void *mms__serve_main(void *arg) {
    struct mms_engine *e = (struct mms_engine *)arg;
    struct mms__serve_hub *h = e->hub;
    int s;
    mms__mutex_lock(&h->mu);
    while (!e->stop) {
        struct mms_reply **at = &e->queue, *r;
        double ms;
        for (s = 0; s < e->p.n_slots; s++)        /* cancelled: ended now, their slots free */
            if ((r = e->slots[s].r) != NULL && r->cancel) {
                r->q.finish = MMS_FINISH_CANCELLED;
                mms__serve_publish_locked(e, r);
            }
        e->queue_tail = NULL;
        while ((r = *at) != NULL) {               /* the queue in order: cancelled ones out, the first into idle slots */
            if (r->cancel || (e->n_running < e->p.n_slots && mms__serve_admit_locked(e, r))) {
                *at = r->next;
                r->next = NULL;
                if (r->cancel) { r->q.finish = MMS_FINISH_CANCELLED; mms__serve_publish_locked(e, r); }
                continue;
            }
            e->queue_tail = r;
            at = &r->next;
        }
        if (e->n_running == 0) { mms__cond_wait(&h->wake, &h->mu); continue; }
        mms__mutex_unlock(&h->mu);
        mms__serve_add_picture(e);                /* between steps: at most one encode */
        ms = mms__serve_step(e);
        mms__mutex_lock(&h->mu);
        if (ms >= 0.0) {
            e->stats.steps++;
            e->stats.step_ms_total += ms;
            if (ms > e->stats.step_ms_max) e->stats.step_ms_max = ms;
        }
        {
            struct mms_mllama_image_store is;
            mms_mllama_get_image_store(e->ctx, &is);
            e->stats.image_store_bytes = is.bytes;
        }
        for (s = 0; s < e->p.n_slots; s++)
            if ((r = e->slots[s].r) != NULL) mms__serve_publish_locked(e, r);
    }
    for (s = 0; s < e->p.n_slots; s++) {          /* freed: everything still running or waiting is cancelled */
        struct mms_reply *r = e->slots[s].r;
        if (r) { r->q.finish = MMS_FINISH_CANCELLED; mms__serve_publish_locked(e, r); }
    }
    while (e->queue) {
        struct mms_reply *r = e->queue;
        e->queue = r->next;
        r->q.finish = MMS_FINISH_CANCELLED;
        mms__serve_publish_locked(e, r);
    }
    e->queue_tail = NULL;
    mms__mutex_unlock(&h->mu);
    return NULL;
}

/* -- the public functions -- */

MMS_API void mms_engine_free(struct mms_engine *e) {
    struct mms__serve_hub *h;
    bool last;
    int s;
    if (!e) return;
    h = e->hub;
    if (e->started) {
        mms__mutex_lock(&h->mu);
        e->stop = true;
        mms__cond_broadcast(&h->wake);
        mms__mutex_unlock(&h->mu);
        mms__thread_join(e->thread);
    }
    mms_mllama_context_free(e->ctx);
    for (s = 0; e->slots && s < e->p.n_slots; s++) mms__serve_slot_free(&e->slots[s]);
    MMS_FREE(e->slots);
    MMS_FREE(e->b_tokens);
    MMS_FREE(e->b_seq);
    MMS_FREE(e->b_want);
    MMS_FREE(e->b_order);
    MMS_FREE(e->b_take);
    MMS_FREE(e);
    if (!h) return;
    mms__mutex_lock(&h->mu);
    last = --h->refs == 0;
    mms__mutex_unlock(&h->mu);
    if (last) mms__serve_hub_destroy(h);
}

MMS_API struct mms_engine *mms_engine_new(const struct mms_engine_params *params) {
    struct mms_mllama_context_params cp;
    const struct mms_mllama_hparams *hp;
    struct mms_engine *e;
    struct mms_engine_params p;
    int s;
    if (!params || !params->model) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_engine_new: a model is required"); return NULL; }
    p = *params;
    if (!p.vocab && !(p.vocab = mms_mllama_model_get_vocab(p.model))) {
        mms_set_error(MMS_ERR_INVALID_ARG, "mms_engine_new: the model's file carries no vocabulary: give one (mms_vocab_load_file)");
        return NULL;
    }
    if (p.n_slots < 0 || p.n_ctx < 0 || p.n_batch < 0 || p.max_queue < 0 || p.max_images < 0) {
        mms_set_error(MMS_ERR_INVALID_ARG, "mms_engine_new: n_slots %d, n_ctx %d, n_batch %d, max_queue %d, max_images %d: each must be 0 (the "
                      "default) or positive", p.n_slots, p.n_ctx, p.n_batch, p.max_queue, p.max_images);
        return NULL;
    }
    hp = mms_mllama_model_get_hparams(p.model);
    if (mms_vocab_n_tokens(p.vocab) < hp->n_vocab) {
        mms_set_error(MMS_ERR_INVALID_ARG, "mms_engine_new: the vocabulary has %d tokens and the model's logits %d: it is not the model's",
                      (int)mms_vocab_n_tokens(p.vocab), hp->n_vocab);
        return NULL;
    }
    if (p.n_slots == 0) p.n_slots = 4;
    if (p.n_ctx == 0) p.n_ctx = MMS__MIN(2048, hp->n_ctx_train);
    if (p.n_batch == 0) p.n_batch = 512;
    if (p.max_queue == 0) p.max_queue = 64;
    if (p.max_images == 0) p.max_images = 4;
    p.n_batch = MMS__MIN(p.n_batch, p.n_ctx * p.n_slots);   /* as the context does: a batch holds at most every slot */
    if (p.n_slots > 4096 || p.n_batch < p.n_slots || p.n_batch > 4096) {
        mms_set_error(MMS_ERR_INVALID_ARG, "mms_engine_new: n_batch %d for %d slots: a step decodes a token of every slot, so n_batch must be "
                      "at least n_slots (and both at most 4096)", p.n_batch, p.n_slots);
        return NULL;
    }
    if (!(e = (struct mms_engine *)MMS_MALLOC(sizeof *e))) { mms_set_error(MMS_ERR_OOM, "mms_engine_new: out of host memory"); return NULL; }
    memset(e, 0, sizeof *e);
    e->p = p;
    e->vocab = p.vocab;
    e->n_vocab = hp->n_vocab;
    memset(&cp, 0, sizeof cp);
    cp.n_ctx = p.n_ctx;
    cp.n_batch = p.n_batch;
    cp.max_images = p.max_images;
    cp.n_seq = p.n_slots;
    cp.image_store = p.image_store;
    e->hub = mms__serve_hub_new(MMS__MIN(p.n_slots, MMS__SERVE_POOL_MAX));
    e->slots = (struct mms__serve_slot *)MMS_MALLOC(sizeof *e->slots * (size_t)p.n_slots);
    e->b_tokens = (int32_t *)MMS_MALLOC(sizeof *e->b_tokens * (size_t)p.n_batch);
    e->b_seq = (int32_t *)MMS_MALLOC(sizeof *e->b_seq * (size_t)p.n_batch);
    e->b_want = (bool *)MMS_MALLOC(sizeof *e->b_want * (size_t)p.n_batch);
    e->b_order = (struct mms_reply **)MMS_MALLOC(sizeof *e->b_order * (size_t)p.n_slots);
    e->b_take = (int *)MMS_MALLOC(sizeof *e->b_take * (size_t)p.n_slots);
    if (!e->hub || !e->slots || !e->b_tokens || !e->b_seq || !e->b_want || !e->b_order || !e->b_take) goto oom;
    memset(e->slots, 0, sizeof *e->slots * (size_t)p.n_slots);
    for (s = 0; s < p.n_slots; s++) {
        struct mms__serve_slot *sl = &e->slots[s];
        sl->kv = (int32_t *)MMS_MALLOC(sizeof *sl->kv * (size_t)p.n_ctx);
        sl->images = (struct mms_mllama_image *)MMS_MALLOC(sizeof *sl->images * (size_t)p.max_images);
        sl->image_hash = (uint64_t *)MMS_MALLOC(sizeof *sl->image_hash * (size_t)p.max_images);
        if (!sl->kv || !sl->images || !sl->image_hash) goto oom;
        memset(sl->images, 0, sizeof *sl->images * (size_t)p.max_images);
    }
    if (!(e->ctx = mms_mllama_context_new(p.model, &cp))) {
        mms__error_context(mms_last_status(), "mms_engine_new: %s", mms_last_error());
        mms_engine_free(e);
        return NULL;
    }
    if (p.image_store == 0) mms__mllama_context_store_pictures(e->ctx, p.n_slots * p.max_images);
    {
        struct mms_mllama_image_store is;
        mms_mllama_get_image_store(e->ctx, &is);
        e->stats.image_store_budget = is.budget;
        e->stats.n_slots = p.n_slots;
    }
    if (!mms__thread_create(&e->thread, mms__serve_main, e)) {
        mms_set_error(MMS_ERR_BACKEND, "mms_engine_new: cannot start the engine thread");
        mms_engine_free(e);
        return NULL;
    }
    e->started = true;
    return e;
oom:
    mms_set_error(MMS_ERR_OOM, "mms_engine_new: out of host memory");
    mms_engine_free(e);
    return NULL;
}

/* The request's constraint: an idle one of its grammar from the hub's pool (its masks cached), or a
   new one over a copy of the grammar (the caller may free the request's on return). */
static enum mms_status mms__serve_constrain(struct mms_engine *e, struct mms__serve_req *q, const struct mms_grammar *g) {
    const char *text = mms_grammar_text(g);
    mms__mutex_lock(&e->hub->mu);
    q->constraint_reused = mms__serve_pool_take(&e->hub->constraints, text, &q->grammar, &q->constraint);
    mms__mutex_unlock(&e->hub->mu);
    if (!q->constraint_reused && (!(q->grammar = mms_grammar_parse(text, strlen(text))) || !(q->constraint = mms_constraint_new(q->grammar, e->vocab))))
        return mms__error_context(mms_last_status(), "mms_engine_submit: grammar: %s", mms_last_error());
    mms_sampler_set_constraint(q->sampler, q->constraint);
    return MMS_OK;
}

MMS_API struct mms_reply *mms_engine_submit(struct mms_engine *e, const struct mms_request *request) {
    struct mms_reply *r;
    struct mms__serve_hub *h;
    enum mms_status st;
    int64_t t0 = mms_time_us();
    if (!e) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_engine_submit: engine is NULL"); return NULL; }
    h = e->hub;
    mms__mutex_lock(&h->mu);                      /* a full queue refuses before any work */
    st = e->n_queued + e->n_running >= e->p.n_slots + e->p.max_queue ? MMS_ERR_BUSY : MMS_OK;
    if (st != MMS_OK) e->stats.refused++;
    mms__mutex_unlock(&h->mu);
    if (st != MMS_OK) {
        mms_set_error(MMS_ERR_BUSY, "mms_engine_submit: %d requests wait for a slot (max_queue); try again later", e->p.max_queue);
        return NULL;
    }
    if (!(r = (struct mms_reply *)MMS_MALLOC(sizeof *r))) { mms_set_error(MMS_ERR_OOM, "mms_engine_submit: out of host memory"); return NULL; }
    memset(r, 0, sizeof *r);
    if ((st = mms__serve_req_prepare(&r->q, request, e->p.model, e->vocab, e->p.n_ctx, e->p.max_images)) != MMS_OK ||
        (request->grammar && (st = mms__serve_constrain(e, &r->q, request->grammar)) != MMS_OK)) {
        mms__serve_req_free(&r->q);
        MMS_FREE(r);
        mms__mutex_lock(&h->mu);
        e->stats.refused++;
        mms__mutex_unlock(&h->mu);
        return NULL;
    }
    r->q.t_submit = t0;
    r->hub = h;
    r->refs = 2;                                  /* the caller's and the engine's */
    mms__cond_init(&r->cond);
    mms__mutex_lock(&h->mu);
    if (e->n_queued + e->n_running >= e->p.n_slots + e->p.max_queue) {   /* filled up meanwhile */
        e->stats.refused++;
        mms__mutex_unlock(&h->mu);
        mms__cond_destroy(&r->cond);
        mms__serve_req_free(&r->q);
        MMS_FREE(r);
        mms_set_error(MMS_ERR_BUSY, "mms_engine_submit: %d requests wait for a slot (max_queue); try again later", e->p.max_queue);
        return NULL;
    }
    h->refs++;
    e->stats.constraints_reused += r->q.constraint_reused;
    if (e->queue_tail) e->queue_tail->next = r;
    else e->queue = r;
    e->queue_tail = r;
    e->n_queued++;
    e->stats.requests++;
    mms__cond_broadcast(&h->wake);
    mms__mutex_unlock(&h->mu);
    return r;
}

MMS_API void mms_engine_get_stats(struct mms_engine *e, struct mms_engine_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!e) return;
    mms__mutex_lock(&e->hub->mu);
    *out = e->stats;
    out->queued = e->n_queued;
    out->busy_slots = e->n_running;
    mms__mutex_unlock(&e->hub->mu);
}
