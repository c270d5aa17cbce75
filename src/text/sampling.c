/* >>text-sampling =================================================================================
   Sampling in transformers' order (repetition penalty, temperature, top-k, top-p, min-p, draw).
   Filters work on a list of candidates sorted by logit, so each is a cut of that list; the
   arithmetic is in double so that the cuts land where float32 references put them except on
   exact ties. */

struct mms_sampler {
    struct mms_sampler_params p;
    uint64_t                  state;
    int32_t                  *history;       /* ring of the last repeat_last_n tokens, or all of them */
    int                       n_history, cap_history, head;
    /* scratch, grown to the vocabulary */
    int32_t                  *ids;
    double                   *vals;
    int                       cap;
    struct mms_constraint    *constraint;    /* not owned; NULL: every token */
};

MMS_API struct mms_sampler_params mms_sampler_default_params(void) {
    struct mms_sampler_params p;
    memset(&p, 0, sizeof p);
    p.top_p = 1.0f;
    p.repeat_penalty = 1.0f;
    return p;
}

static uint64_t mms__splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

MMS_API struct mms_sampler *mms_sampler_new(const struct mms_sampler_params *params) {
    struct mms_sampler_params p = params ? *params : mms_sampler_default_params();
    struct mms_sampler *s;
    if (!(p.temperature >= 0.0f && p.temperature <= FLT_MAX) || p.top_k < 0 || !(p.top_p >= 0.0f && p.top_p <= 1.0f) ||
        !(p.min_p >= 0.0f && p.min_p <= 1.0f) || !(p.repeat_penalty >= 0.0f && p.repeat_penalty <= FLT_MAX) || p.repeat_last_n < 0) {
        mms_set_error(MMS_ERR_INVALID_ARG, "mms_sampler_new: out of range: temperature %g (finite, >= 0), top_k %d (>= 0), top_p %g "
                      "(0..1), min_p %g (0..1), repeat_penalty %g (finite, >= 0), repeat_last_n %d (>= 0)", (double)p.temperature, p.top_k,
                      (double)p.top_p, (double)p.min_p, (double)p.repeat_penalty, p.repeat_last_n);
        return NULL;
    }
    if (p.top_p == 0.0f) p.top_p = 1.0f;                      /* zeroed fields mean off */
    if (p.repeat_penalty == 0.0f) p.repeat_penalty = 1.0f;
    if (!(s = (struct mms_sampler *)MMS_MALLOC(sizeof *s))) { mms_set_error(MMS_ERR_OOM, "mms_sampler_new: out of host memory"); return NULL; }
    memset(s, 0, sizeof *s);
    s->p = p;
    s->state = p.seed;
    return s;
}

MMS_API void mms_sampler_free(struct mms_sampler *s) {
    if (!s) return;
    MMS_FREE(s->history);
    MMS_FREE(s->ids);
    MMS_FREE(s->vals);
    MMS_FREE(s);
}

MMS_API void mms_sampler_reset(struct mms_sampler *s) {
    if (!s) return;
    s->n_history = s->head = 0;
    s->state = s->p.seed;
}

MMS_API void mms_sampler_accept(struct mms_sampler *s, int32_t id) {
    if (!s || s->p.repeat_penalty == 1.0f) return;
    if (s->p.repeat_last_n > 0) {   /* a ring of the window */
        if (!s->history && !(s->history = (int32_t *)MMS_MALLOC(sizeof *s->history * (size_t)s->p.repeat_last_n))) return;
        s->cap_history = s->p.repeat_last_n;
        s->history[s->head] = id;
        s->head = (s->head + 1) % s->cap_history;
        if (s->n_history < s->cap_history) s->n_history++;
        return;
    }
    if (s->n_history == s->cap_history) {
        int cap = s->cap_history ? s->cap_history * 2 : 256;
        int32_t *h = (int32_t *)MMS_REALLOC(s->history, sizeof *h * (size_t)cap);
        if (!h) return;   /* the penalty then forgets the newest tokens; nothing else is at stake */
        s->history = h;
        s->cap_history = cap;
    }
    s->history[s->n_history++] = id;
}

/* Sorts candidates by value, largest first; equal values keep id order (the first largest wins). */
static void mms__sampler_sort(int32_t *ids, double *vals, int n) {
    int i, j;
    if (n < 2) return;
    if (n <= 16) {   /* insertion sort: stable */
        for (i = 1; i < n; i++) {
            int32_t id = ids[i];
            double v = vals[i];
            for (j = i; j > 0 && (vals[j - 1] < v || (vals[j - 1] == v && ids[j - 1] > id)); j--) { ids[j] = ids[j - 1]; vals[j] = vals[j - 1]; }
            ids[j] = id;
            vals[j] = v;
        }
        return;
    }
    {   /* quicksort on (value desc, id asc), which is a total order */
        const int m = n / 2;
        const double pv = vals[m];
        const int32_t pid = ids[m];
        i = 0;
        j = n - 1;
        while (i <= j) {
            while (vals[i] > pv || (vals[i] == pv && ids[i] < pid)) i++;
            while (vals[j] < pv || (vals[j] == pv && ids[j] > pid)) j--;
            if (i <= j) {
                int32_t ti = ids[i]; double tv = vals[i];
                ids[i] = ids[j]; vals[i] = vals[j];
                ids[j] = ti; vals[j] = tv;
                i++;
                j--;
            }
        }
        mms__sampler_sort(ids, vals, j + 1);
        mms__sampler_sort(ids + i, vals + i, n - i);
    }
}

/* Runs the filters: on return ids[0..*n_keep) are the surviving tokens, best first, with their
   probabilities in vals (they sum to 1). Greedy leaves one token with probability 1. allowed (NULL:
   all; n_allowed bits) takes the tokens a constraint refuses out before anything else looks. */
static enum mms_status mms__sampler_filter(const struct mms_sampler_params *p, const int32_t *history, int n_history,
                                           const float *logits, int n_vocab, const uint32_t *allowed, int n_allowed,
                                           int32_t *ids, double *vals, int *n_keep) {
    double sum, cum, maxv;
    int i, n = n_vocab;
    for (i = 0; i < n_vocab; i++) {
        if (logits[i] != logits[i]) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_sampler: logit %d is NaN", i);
        ids[i] = i;
        vals[i] = logits[i];
    }
    if (p->repeat_penalty != 1.0f)   /* once per distinct token, as HF gathers, changes and scatters */
        for (i = 0; i < n_history; i++) {
            const int32_t t = history[i];
            if (t < 0 || t >= n_vocab || vals[t] != (double)logits[t]) continue;   /* changed already (or a fixed point) */
            vals[t] = logits[t] < 0.0f ? (double)(logits[t] * p->repeat_penalty) : (double)(logits[t] / p->repeat_penalty);
        }
    if (allowed) {   /* the candidates keep their id order, so ties still go to the first */
        int k = 0;
        for (i = 0; i < n_vocab && i < n_allowed; i++)
            if ((allowed[i >> 5] >> (i & 31)) & 1u) { ids[k] = ids[i]; vals[k] = vals[i]; k++; }
        if (k == 0) return mms_set_error(MMS_ERR_STATE, "mms_sampler: the constraint allows none of the %d tokens", n_vocab);
        n_vocab = n = k;
    }
    if (p->temperature == 0.0f) {
        int best = 0;
        for (i = 1; i < n_vocab; i++) if (vals[i] > vals[best]) best = i;
        ids[0] = ids[best];
        vals[0] = 1.0;
        *n_keep = 1;
        return MMS_OK;
    }
    for (i = 0; i < n_vocab; i++) vals[i] /= (double)p->temperature;
    mms__sampler_sort(ids, vals, n_vocab);
    if (p->top_k > 0 && p->top_k < n) {   /* keep everything tied with the k-th */
        const double kth = vals[p->top_k - 1];
        n = p->top_k;
        while (n < n_vocab && vals[n] == kth) n++;
    }
    maxv = vals[0];
    for (i = 0, sum = 0.0; i < n; i++) sum += (vals[i] = exp(vals[i] - maxv));
    for (i = 0; i < n; i++) vals[i] /= sum;
    if (p->top_p < 1.0f) {   /* HF drops the tail whose cumulative mass is <= 1 - top_p */
        double tail = 0.0;
        const double cut = 1.0 - (double)p->top_p;
        int keep = n;
        for (i = n - 1; i > 0; i--) {
            tail += vals[i];
            if (tail <= cut) keep = i; else break;
        }
        n = keep;
    }
    if (p->min_p > 0.0f) {
        const double floor_p = (double)p->min_p * vals[0];
        int keep = 1;
        while (keep < n && vals[keep] >= floor_p) keep++;
        n = keep;
    }
    for (i = 0, cum = 0.0; i < n; i++) cum += vals[i];
    for (i = 0; i < n; i++) vals[i] /= cum;
    *n_keep = n;
    return MMS_OK;
}

static enum mms_status mms__sampler_run(const struct mms_sampler *s, const float *logits, int n_vocab, int32_t **ids, double **vals,
                                        int *n_keep, const char *who) {
    struct mms_sampler *m = (struct mms_sampler *)s;   /* scratch only (and the constraint's mask cache) */
    const uint32_t *allowed = NULL;
    if (!s || !logits || n_vocab < 1) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: sampler, logits and n_vocab >= 1 are required", who);
    if (m->cap < n_vocab) {
        int32_t *ni = (int32_t *)MMS_REALLOC(m->ids, sizeof *ni * (size_t)n_vocab);
        double *nv;
        if (ni) m->ids = ni;
        nv = (double *)MMS_REALLOC(m->vals, sizeof *nv * (size_t)n_vocab);
        if (nv) m->vals = nv;
        if (!ni || !nv) return mms_set_error(MMS_ERR_OOM, "%s: out of host memory for %d candidates", who, n_vocab);
        m->cap = n_vocab;
    }
    *ids = m->ids;
    *vals = m->vals;
    if (s->constraint && !(allowed = mms_constraint_allowed(s->constraint))) return mms__error_context(mms_last_status(), "%s: %s", who, mms_last_error());
    /* the ring's order does not matter: the penalty sees a set */
    return mms__sampler_filter(&s->p, s->history, s->n_history, logits, n_vocab, allowed, s->constraint ? s->constraint->n_vocab : 0,
                               m->ids, m->vals, n_keep);
}

MMS_API enum mms_status mms_sampler_probs(const struct mms_sampler *s, const float *logits, int n_vocab, float *probs) {
    int32_t *ids = NULL;
    double *vals = NULL;
    int i, n = 0;
    enum mms_status st;
    if (!probs) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_sampler_probs: probs is NULL");
    if ((st = mms__sampler_run(s, logits, n_vocab, &ids, &vals, &n, "mms_sampler_probs")) != MMS_OK) return st;
    for (i = 0; i < n_vocab; i++) probs[i] = 0.0f;
    for (i = 0; i < n; i++) probs[ids[i]] = (float)vals[i];
    return MMS_OK;
}

MMS_API int32_t mms_sampler_sample(struct mms_sampler *s, const float *logits, int n_vocab) {
    int32_t *ids = NULL, id;
    double *vals = NULL, u, cum = 0.0;
    int i, n = 0;
    if (mms__sampler_run(s, logits, n_vocab, &ids, &vals, &n, "mms_sampler_sample") != MMS_OK) return -1;
    id = ids[n - 1];
    if (n > 1) {
        u = (double)(mms__splitmix64(&s->state) >> 11) * (1.0 / 9007199254740992.0);   /* [0, 1) from 53 bits */
        for (i = 0; i < n; i++) {
            cum += vals[i];
            if (u < cum) { id = ids[i]; break; }
        }
    }
    if (s->constraint && mms_constraint_accept(s->constraint, id) != MMS_OK) return -1;
    mms_sampler_accept(s, id);
    return id;
}

MMS_API void mms_sampler_set_constraint(struct mms_sampler *s, struct mms_constraint *constraint) {
    if (s) s->constraint = constraint;
}
