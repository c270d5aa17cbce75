/* >>serve-request =================================================================================
   A request as the engine runs it: checked, copied and tokenized on the submitting thread (its
   pictures preprocessed, its sampler made with the prompt in its history; its grammar's constraint
   taken from the pool below or made, so the engine thread never builds one), then advanced by the
   engine thread; and its text, held back while it could still be the start of a stop string. */

enum mms__serve_phase {
    MMS__SERVE_QUEUED,     /* waiting for a slot */
    MMS__SERVE_PICTURES,   /* in a slot, its pictures being added (one per engine step) */
    MMS__SERVE_PROMPT,     /* its prompt going in, a chunk per step */
    MMS__SERVE_GEN,        /* a token per step */
    MMS__SERVE_DONE
};

struct mms__serve_req {
    int32_t                 *tokens;              /* the prompt */
    int                      n_tokens;
    struct mms_mllama_image *images;              /* preprocessed with the model's parameters */
    uint64_t                *image_hash;          /* of each one's model input, compared before the pixels */
    int                      n_images;
    struct mms_sampler      *sampler;
    struct mms_grammar      *grammar;             /* a copy of the request's (NULL: free text) */
    struct mms_constraint   *constraint;          /* the sampler's, over the grammar; back to the pool at the end */
    bool                     constraint_reused;   /* taken from the pool */
    int                      max_tokens;
    char                   **stop;                /* copies; stop_len[i] bytes each */
    size_t                  *stop_len;
    int                      n_stop;
    /* the engine thread's */
    enum mms__serve_phase    phase;
    int                      slot, n_attached, n_done, n_cached, n_gen, n_encoded;
    int32_t                  last;                /* the token sampled last, decoded in the next step */
    struct mms_detokenizer   detok;
    char                    *text;                /* generated so far (after a stop string: cut before it) */
    size_t                   len, cap, ready;     /* ready: the part no stop string can still claim */
    size_t                   handed;              /* the part handed over to the reply */
    int                      counted_gen, counted_encoded;   /* in the engine's counters so far */
    enum mms_finish          finish;              /* set when it ends; handed over with the text */
    enum mms_status          status;              /* MMS_FINISH_ERROR: what failed, and why */
    char                     error[512];
    int64_t                  t_submit, t_slot, t_first;
};

static void mms__serve_req_free(struct mms__serve_req *q) {
    int i;
    for (i = 0; q->images && i < q->n_images; i++) mms_mllama_image_free(&q->images[i]);
    for (i = 0; q->stop && i < q->n_stop; i++) MMS_FREE(q->stop[i]);
    MMS_FREE(q->tokens);
    MMS_FREE(q->images);
    MMS_FREE(q->image_hash);
    MMS_FREE(q->stop);
    MMS_FREE(q->stop_len);
    MMS_FREE(q->text);
    mms_sampler_free(q->sampler);
    mms_constraint_free(q->constraint);
    mms_grammar_free(q->grammar);
    memset(q, 0, sizeof *q);
}

/* -- constraints kept for the next request of the same grammar --
   A server's clients tend to send one schema again and again. A constraint caches the masks of the
   states it met, so one taken back from an ended request answers those states at once, where a new
   one walks the vocabulary again. The pool keeps up to cap idle (grammar, constraint) pairs keyed
   by the grammar's text and drops the one unused longest; it lives in the hub, under its lock. A
   constraint is reset when taken: nothing of one answer reaches another but the cached masks,
   which depend on the grammar and the vocabulary alone. */

struct mms__serve_idle_constraint {
    struct mms_grammar    *grammar;
    struct mms_constraint *constraint;
    int64_t                last_use;
};

struct mms__serve_pool {
    struct mms__serve_idle_constraint *idle;
    int                                n, cap;
    int64_t                            clock;
};

/* Takes the idle pair whose grammar's text is text, or returns false. */
static bool mms__serve_pool_take(struct mms__serve_pool *p, const char *text, struct mms_grammar **g, struct mms_constraint **c) {
    int i;
    for (i = 0; i < p->n; i++)
        if (!strcmp(mms_grammar_text(p->idle[i].grammar), text)) {
            *g = p->idle[i].grammar;
            *c = p->idle[i].constraint;
            p->idle[i] = p->idle[--p->n];
            mms_constraint_reset(*c);
            return true;
        }
    return false;
}

/* Keeps the pair (or frees it when the pool keeps none: cap 0, or a constraint out of memory). */
static void mms__serve_pool_put(struct mms__serve_pool *p, struct mms_grammar *g, struct mms_constraint *c) {
    int i, oldest = 0;
    if (p->cap == 0 || c->oom) { mms_constraint_free(c); mms_grammar_free(g); return; }
    if (p->n == p->cap) {                        /* full: the one unused longest goes */
        for (i = 1; i < p->n; i++) if (p->idle[i].last_use < p->idle[oldest].last_use) oldest = i;
        mms_constraint_free(p->idle[oldest].constraint);
        mms_grammar_free(p->idle[oldest].grammar);
        p->idle[oldest] = p->idle[--p->n];
    }
    p->idle[p->n].grammar = g;
    p->idle[p->n].constraint = c;
    p->idle[p->n++].last_use = ++p->clock;
}

static void mms__serve_pool_free(struct mms__serve_pool *p) {
    int i;
    for (i = 0; i < p->n; i++) { mms_constraint_free(p->idle[i].constraint); mms_grammar_free(p->idle[i].grammar); }
    MMS_FREE(p->idle);
    memset(p, 0, sizeof *p);
}

/* The prompt's text: the messages through mms_mllama_chat_prompt, or the raw prompt. */
static char *mms__serve_prompt_text(const struct mms_request *r) {
    char *text;
    int n;
    if (r->prompt) {
        const size_t len = strlen(r->prompt);
        if (!(text = (char *)MMS_MALLOC(len + 1))) { mms_set_error(MMS_ERR_OOM, "mms_engine_submit: out of host memory"); return NULL; }
        memcpy(text, r->prompt, len + 1);
        return text;
    }
    if ((n = mms_mllama_chat_prompt(r->messages, r->n_messages, true, r->date, NULL, 0)) < 0) return NULL;
    if (!(text = (char *)MMS_MALLOC((size_t)n + 1))) { mms_set_error(MMS_ERR_OOM, "mms_engine_submit: out of host memory"); return NULL; }
    mms_mllama_chat_prompt(r->messages, r->n_messages, true, r->date, text, (size_t)n + 1);
    return text;
}

static bool mms__serve_utf8_valid(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        bool incomplete;
        const int k = mms__tok_utf8_unit((const unsigned char *)s + i, n - i, &cp, &incomplete);
        if (k <= 0) return false;
        i += (size_t)k;
    }
    return true;
}

/* Checks r and fills q (everything copied): the prompt tokenized, the pictures preprocessed and
   hashed, the sampler made with the prompt in its history. n_ctx: a slot's tokens. */
static enum mms_status mms__serve_req_prepare(struct mms__serve_req *q, const struct mms_request *r, struct mms_mllama_model *model,
                                              const struct mms_vocab *vocab, int n_ctx, int max_images) {
    const struct mms_mllama_hparams *hp = mms_mllama_model_get_hparams(model);
    const struct mms_mllama_image_params ip = mms_mllama_model_image_params(model);
    char *text;
    int i, n, shown = 0;
    memset(q, 0, sizeof *q);
    if (!r) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_engine_submit: request is NULL");
    if (!r->messages == !r->prompt || (r->messages && r->n_messages < 1))
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_engine_submit: a request has either messages (n_messages >= 1) or a prompt");
    if (r->n_images < 0 || r->n_images > max_images || (r->n_images > 0 && !r->images))
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_engine_submit: %d pictures; the engine takes 0..%d (max_images), given in images",
                             r->n_images, max_images);
    if (r->n_images > 0 && hp->v_n_layer == 0)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_engine_submit: the request has pictures and the model has no vision tower");
    if (r->max_tokens < 0 || r->n_stop < 0 || (r->n_stop > 0 && !r->stop))
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_engine_submit: max_tokens %d and n_stop %d must be 0 or more (stop given with n_stop)",
                             r->max_tokens, r->n_stop);
    for (i = 0; i < r->n_stop; i++)
        if (!r->stop[i] || !r->stop[i][0] || !mms__serve_utf8_valid(r->stop[i], strlen(r->stop[i])))
            return mms_set_error(MMS_ERR_INVALID_ARG, "mms_engine_submit: stop string %d is %s", i,
                                 !r->stop[i] ? "NULL" : !r->stop[i][0] ? "empty" : "not valid UTF-8");
    for (i = 0; r->messages && i < r->n_messages; i++) {
        if (r->messages[i].n_images < 0) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_engine_submit: message %d has %d pictures", i, r->messages[i].n_images);
        shown += r->messages[i].n_images;
    }
    if (r->messages && shown != r->n_images)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_engine_submit: the messages show %d pictures and the request gives %d", shown, r->n_images);
    if (!(q->sampler = mms_sampler_new(&r->sampling)))
        return mms__error_context(mms_last_status(), "mms_engine_submit: sampling: %s", mms_last_error());
    if (!(text = mms__serve_prompt_text(r))) goto fail;
    n = mms_tokenize(vocab, text, strlen(text), NULL, 0, r->prompt != NULL, true);
    if (n >= 0 && !(q->tokens = (int32_t *)MMS_MALLOC(sizeof *q->tokens * (size_t)(n + 1)))) n = mms_set_error(MMS_ERR_OOM, "mms_engine_submit: out of host memory");
    if (n >= 0) n = mms_tokenize(vocab, text, strlen(text), q->tokens, n, r->prompt != NULL, true);
    MMS_FREE(text);
    if (n < 0) goto fail;
    q->n_tokens = n;
    for (i = 0, shown = 0; i < n; i++) shown += q->tokens[i] == hp->image_token_id;
    if (n < 1 || shown != r->n_images) {
        mms_set_error(MMS_ERR_INVALID_ARG, "mms_engine_submit: the prompt has %d <|image|> marks for %d pictures%s", shown, r->n_images,
                      n < 1 ? " and no tokens" : "");
        goto fail;
    }
    if (n + 1 > n_ctx) {
        mms_set_error(MMS_ERR_INVALID_ARG, "mms_engine_submit: the prompt has %d tokens; a slot holds %d with the answer's first (n_ctx)", n, n_ctx);
        goto fail;
    }
    for (i = 0; i < n; i++) mms_sampler_accept(q->sampler, q->tokens[i]);
    q->n_images = r->n_images;
    q->images = (struct mms_mllama_image *)MMS_MALLOC(sizeof *q->images * (size_t)(q->n_images + 1));
    q->image_hash = (uint64_t *)MMS_MALLOC(sizeof *q->image_hash * (size_t)(q->n_images + 1));
    if (!q->images || !q->image_hash) { mms_set_error(MMS_ERR_OOM, "mms_engine_submit: out of host memory"); goto fail; }
    memset(q->images, 0, sizeof *q->images * (size_t)(q->n_images + 1));
    for (i = 0; i < q->n_images; i++) {
        const struct mms_image_rgb *im = &r->images[i];
        if (!im->rgb || im->width < 1 || im->height < 1 || (im->stride && im->stride < (size_t)im->width * 3)) {
            mms_set_error(MMS_ERR_INVALID_ARG, "mms_engine_submit: picture %d has no pixels (%d x %d, stride %zu)", i, im->width, im->height, im->stride);
            goto fail;
        }
        if (mms_mllama_preprocess_image(&ip, im->rgb, im->width, im->height, im->stride, &q->images[i]) != MMS_OK) {
            mms__error_context(mms_last_status(), "mms_engine_submit: picture %d: %s", i, mms_last_error());
            goto fail;
        }
        q->image_hash[i] = mms__mllama_picture_hash(&q->images[i]);
    }
    q->n_stop = r->n_stop;
    q->stop = (char **)MMS_MALLOC(sizeof *q->stop * (size_t)(q->n_stop + 1));
    q->stop_len = (size_t *)MMS_MALLOC(sizeof *q->stop_len * (size_t)(q->n_stop + 1));
    if (!q->stop || !q->stop_len) { mms_set_error(MMS_ERR_OOM, "mms_engine_submit: out of host memory"); goto fail; }
    memset(q->stop, 0, sizeof *q->stop * (size_t)(q->n_stop + 1));
    for (i = 0; i < q->n_stop; i++) {
        q->stop_len[i] = strlen(r->stop[i]);
        if (!(q->stop[i] = (char *)MMS_MALLOC(q->stop_len[i] + 1))) { mms_set_error(MMS_ERR_OOM, "mms_engine_submit: out of host memory"); goto fail; }
        memcpy(q->stop[i], r->stop[i], q->stop_len[i] + 1);
    }
    q->max_tokens = r->max_tokens;
    q->slot = -1;
    return MMS_OK;
fail:                                   /* each way here set the error */
    mms__serve_req_free(q);
    return mms_last_status();
}

/* -- the generated text -- */

/* Appends n bytes to a text buffer that grows by doubling, NUL-terminated; false when out of memory. */
static bool mms__serve_text_append(char **text, size_t *len, size_t *cap, const char *s, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 256;
        char *t;
        while (*len + n + 1 > c) c *= 2;
        if (!(t = (char *)MMS_REALLOC(*text, c))) return false;
        *text = t;
        *cap = c;
    }
    memcpy(*text + *len, s, n);
    *len += n;
    (*text)[*len] = '\0';
    return true;
}

static bool mms__serve_append(struct mms__serve_req *q, const char *s, size_t n) { return mms__serve_text_append(&q->text, &q->len, &q->cap, s, n); }

static bool mms__serve_starts(const char *s, const char *with, size_t n) { return memcmp(s, with, n) == 0; }

/* After new text: the first stop string found in what is not yet ready ends the text there (true);
   else ready moves up to the text's end less its longest tail that some stop string starts with.
   At the end (final) nothing is held back. */
static bool mms__serve_scan_stops(struct mms__serve_req *q, bool final) {
    size_t at, hold = 0;
    int i;
    for (at = q->ready; at < q->len; at++)          /* the earliest match; none can start in the ready part */
        for (i = 0; i < q->n_stop; i++)
            if (q->stop_len[i] <= q->len - at && mms__serve_starts(q->text + at, q->stop[i], q->stop_len[i])) {
                q->len = q->ready = at;
                q->text[at] = '\0';
                return true;
            }
    for (i = 0; !final && i < q->n_stop; i++) {
        size_t k = MMS__MIN(q->stop_len[i] - 1, q->len - q->ready);
        for (; k > hold; k--)
            if (mms__serve_starts(q->text + q->len - k, q->stop[i], k)) { hold = k; break; }
    }
    q->ready = q->len - hold;
    return false;
}
