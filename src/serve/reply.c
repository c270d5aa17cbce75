/* >>serve-reply ===================================================================================
   A reply: what the engine thread hands over (text as it comes, the end, the usage) and what the
   reading thread takes, under the lock the engine shares with its replies. That lock (the hub)
   lives as long as the engine or any of its replies, so a reply stays readable, and can be
   cancelled or freed, after its engine is gone. */

struct mms__serve_hub {
    mms__mutex             mu;
    mms__cond              wake;          /* the engine thread waits here for work */
    int                    refs;          /* the engine and every reply not yet freed */
    struct mms__serve_pool constraints;   /* of ended requests, for the next of their grammar */
};

struct mms_reply {
    struct mms__serve_hub *hub;
    mms__cond              cond;          /* its reader waits here */
    int                    refs;          /* the caller's until mms_reply_free, the engine's until it ends */
    /* under hub->mu */
    char                  *out;           /* text handed over and not yet read */
    size_t                 out_len, out_cap;
    enum mms_finish        finish;
    enum mms_status        status;
    char                   error[512];
    struct mms_reply_usage usage;
    bool                   cancel;        /* asked by the caller */
    struct mms_reply      *next;          /* in the engine's queue */
    /* the reader's */
    char                  *ev_text;       /* the last event's text */
    size_t                 ev_cap;
    struct mms_reply_event last;
    bool                   ended;         /* the last event was handed out */
    /* made at submit, then the engine thread's */
    struct mms__serve_req  q;
};

static struct mms__serve_hub *mms__serve_hub_new(int pool_cap) {
    struct mms__serve_hub *h = (struct mms__serve_hub *)MMS_MALLOC(sizeof *h);
    if (!h) return NULL;
    memset(h, 0, sizeof *h);
    if (pool_cap > 0 && (h->constraints.idle = (struct mms__serve_idle_constraint *)MMS_MALLOC(sizeof *h->constraints.idle * (size_t)pool_cap)))
        h->constraints.cap = pool_cap;            /* out of memory: no pool, requests make their own */
    mms__mutex_init(&h->mu);
    mms__cond_init(&h->wake);
    h->refs = 1;
    return h;
}

static void mms__serve_hub_destroy(struct mms__serve_hub *h) {
    mms__serve_pool_free(&h->constraints);
    mms__cond_destroy(&h->wake);
    mms__mutex_destroy(&h->mu);
    MMS_FREE(h);
}

/* Drops a reference to r, under the hub's lock: the last one frees r and drops r's reference to
   the hub. True when that was the hub's last: the caller unlocks, then destroys the hub. */
static bool mms__serve_reply_unref_locked(struct mms_reply *r) {
    struct mms__serve_hub *h = r->hub;
    if (--r->refs > 0) return false;
    if (r->q.constraint) {                        /* kept for the next request of its grammar */
        mms__serve_pool_put(&h->constraints, r->q.grammar, r->q.constraint);
        r->q.grammar = NULL;
        r->q.constraint = NULL;
    }
    mms__serve_req_free(&r->q);
    mms__cond_destroy(&r->cond);
    MMS_FREE(r->out);
    MMS_FREE(r->ev_text);
    MMS_FREE(r);
    return --h->refs == 0;
}

/* Hands text over to the reader (under the lock); false when out of memory. */
static bool mms__serve_reply_put(struct mms_reply *r, const char *s, size_t n) {
    if (!mms__serve_text_append(&r->out, &r->out_len, &r->out_cap, s, n)) return false;
    if (n) mms__cond_broadcast(&r->cond);
    return true;
}

/* Ends r (under the lock): its finish, and for an error the status and the message. */
static void mms__serve_reply_end(struct mms_reply *r, enum mms_finish finish, enum mms_status status, const char *error) {
    if (r->finish != MMS_FINISH_NONE) return;
    r->finish = finish;
    r->status = finish == MMS_FINISH_ERROR ? status : MMS_OK;
    mms__copy_str(r->error, sizeof r->error, finish == MMS_FINISH_ERROR && error ? error : "");
    mms__cond_broadcast(&r->cond);
}

MMS_API enum mms_status mms_reply_next(struct mms_reply *r, int timeout_ms, struct mms_reply_event *ev) {
    struct mms__serve_hub *h;
    int64_t until;
    if (!r || !ev) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_reply_next: reply and event are required");
    if (r->ended) { *ev = r->last; return MMS_OK; }
    h = r->hub;
    until = mms_time_us() + (int64_t)timeout_ms * 1000;
    mms__mutex_lock(&h->mu);
    for (;;) {
        int64_t left;
        if (r->out_len > 0 || r->finish != MMS_FINISH_NONE) break;
        if (timeout_ms < 0) { mms__cond_wait(&r->cond, &h->mu); continue; }
        if ((left = until - mms_time_us()) <= 0) break;
        mms__cond_wait_ms(&r->cond, &h->mu, (int)MMS__MIN(left / 1000 + 1, (int64_t)1 << 30));
    }
    if (r->out_len + 1 > r->ev_cap || !r->ev_text) {   /* the text moves to the reader's buffer: swap them */
        char *t = r->ev_text;
        const size_t cap = r->ev_cap;
        r->ev_text = r->out;
        r->ev_cap = r->out_cap;
        r->out = t;
        r->out_cap = cap;
        if (!r->ev_text && (r->ev_text = (char *)MMS_MALLOC(1)) != NULL) r->ev_cap = 1;
        if (!r->ev_text) { mms__mutex_unlock(&h->mu); return mms_set_error(MMS_ERR_OOM, "mms_reply_next: out of host memory"); }
    } else if (r->out_len > 0) {
        memcpy(r->ev_text, r->out, r->out_len);
    }
    r->ev_text[r->out_len] = '\0';
    memset(ev, 0, sizeof *ev);
    ev->text = r->ev_text;
    ev->len = r->out_len;
    r->out_len = 0;
    ev->finish = r->finish;
    ev->status = r->status;
    ev->error = r->error;
    ev->usage = r->usage;
    if (r->finish != MMS_FINISH_NONE) { r->ended = true; r->last = *ev; }
    mms__mutex_unlock(&h->mu);
    return MMS_OK;
}

MMS_API void mms_reply_cancel(struct mms_reply *r) {
    if (!r) return;
    mms__mutex_lock(&r->hub->mu);
    if (r->finish == MMS_FINISH_NONE && !r->cancel) {
        r->cancel = true;
        mms__cond_broadcast(&r->hub->wake);
    }
    mms__mutex_unlock(&r->hub->mu);
}

MMS_API void mms_reply_free(struct mms_reply *r) {
    struct mms__serve_hub *h;
    bool last;
    if (!r) return;
    h = r->hub;
    mms__mutex_lock(&h->mu);
    if (r->finish == MMS_FINISH_NONE && !r->cancel) {
        r->cancel = true;
        mms__cond_broadcast(&h->wake);
    }
    last = mms__serve_reply_unref_locked(r);
    mms__mutex_unlock(&h->mu);
    if (last) mms__serve_hub_destroy(h);
}
