/* >>sched =========================================================================================
   The multi-backend scheduler. Allocating a graph runs these steps, in this order:
     1. check: the graph was built correctly; memory it relies on (weights, caches, kept tensors)
        still holds and kept leafs are up to date; it does not mix results another graph left in
        compute memory with new ops;
     2. assign a backend to every node and leaf (pins, memory, weights, offload, spreading, fallback);
     3. split: cut the nodes into runs of one backend and route a copy for every tensor a split reads
        from memory its backend cannot use;
     4. clone the caller's nodes into the scheduler's own context, with sources rewired to the copies;
     5. place: persistent nodes keep their memory or get a buffer of their own (a stand-in in the
        reserve buffer when only reserving), and the graph allocator plans and places the rest;
     6. publish (alloc only, and only once everything above succeeded): each caller node takes its
        clone's placement, new kept buffers are registered. Reserve writes no caller tensor.
   The caller's graph is never rewired. Compute runs the splits in order, copying inputs first, then
   counts every node as written and records what each kept node was computed from. The graph
   allocated last can be allocated again unchanged (mms__sched_alloc_again): steps 1, 5's placement
   and 6 only. */

#define MMS__SCHED_MAX_COPIES 4

enum mms__sched_reason {
    MMS__WHY_NONE, MMS__WHY_PIN, MMS__WHY_MEMORY, MMS__WHY_WEIGHTS, MMS__WHY_OFFLOAD, MMS__WHY_INPUT,
    MMS__WHY_SPREAD, MMS__WHY_FALLBACK, MMS__WHY_DEFAULT, MMS__WHY_VIEW
};

static const char *const mms__sched_reason_names[] = {
    "unassigned", "pinned", "its memory is there", "its weights are there", "offloaded: large batch on host weights",
    "graph input", "next to its neighbours", "fallback: where its weights are cannot run it", "first backend that runs it",
    "view of a tensor there"
};

struct mms__sched_input {
    struct mms_tensor *src;                         /* what the split reads (the caller's tensor) */
    int                src_backend;
    int                split;
    struct mms_tensor *copies[MMS__SCHED_MAX_COPIES];
};

struct mms__sched_split {
    int                 backend;
    int                 i0, i1;                     /* the caller's node positions [i0, i1) */
    int                 first_input, n_inputs;
    struct mms_cgraph  *graph;                      /* clones of its nodes that compute */
    struct mms_tensor **originals;                  /* the caller's node behind each of them */
};

struct mms__sched_persist {             /* a kept tensor's buffer (the tensor may be gone: compared, never read) */
    const struct mms_tensor *tensor;
    mms_backend_buffer_t     buffer;
    int                      backend;
};

struct mms__sched_kept {                /* a persistent node of the allocated graph */
    int                  node;
    mms_backend_buffer_t fresh;         /* a buffer made for it by this allocation, published with it */
    int                  first_leaf, n_leafs;   /* what it is computed from: s->kept_leafs[first..] */
};

struct mms_backend_sched {
    int                        n_backends;
    mms_backend_t             *backends;
    mms_backend_buffer_type_t *bufts;
    int                        n_copies, cur_copy;
    bool                       op_offload;
    mms_gallocr_t              galloc;
    struct mms_context        *ctx;                 /* clones, copies, internal graphs: reset per split */
    mms_backend_event_t       *events;              /* [backend * n_copies + copy], NULL where unsupported */
    struct mms__ptrmap         pins;                /* tensor -> backend index + 1 */

    /* the graph last split */
    struct mms_cgraph         *graph;
    uint64_t                   graph_id;
    bool                       allocated;
    bool                       reserved_only;
    bool                       pins_changed;        /* since the last split: the backends may differ */
    int                        n_nodes, n_leafs;
    struct mms__ptrmap         pos;                 /* tensor -> node index + 1, or -(leaf index + 1) */
    int                       *node_backend, *leaf_backend;
    unsigned char             *node_why, *leaf_why;
    struct mms_tensor        **clones;              /* per node */
    struct mms_tensor        **leaf_clones;         /* per leaf: a stand-in for a kept tensor not computed yet (reserve), or NULL */
    int                        cap_nodes, cap_leafs;
    struct mms__sched_kept    *kept;                /* persistent nodes */
    int                        n_kept, cap_kept;
    struct mms_tensor        **kept_leafs;
    int                        n_kept_leafs, cap_kept_leafs;
    mms_backend_buffer_t       reserve_buf;         /* holds the stand-ins while reserving */
    struct mms__sched_split   *splits;
    int                        n_splits, cap_splits;
    struct mms__sched_input   *inputs;
    int                        n_inputs, cap_inputs;
    struct mms_cgraph         *alloc_graph;

    struct mms__sched_persist *persist;
    int                        n_persist, cap_persist;

    mms_backend_sched_eval_callback callback;
    void                      *callback_user;
    int                        debug;
    FILE                      *debug_out;
    bool                       poison;
    char                       dump_pattern[256];
    char                       dump_dir[512];

    int                        n_again;             /* allocations that kept the last split (mms__sched_alloc_again) */
    void                     **addrs;               /* the graph's leafs', nodes' and split copies' addresses, last allocation */
    int                        n_addrs, cap_addrs;
    bool                       addrs_computed;      /* the split graphs were computed at those addresses */
    struct { uint64_t id; char name[MMS_MAX_NAME]; } recent[8];   /* names of graphs allocated lately, for messages */
    int                        n_recent;
};

static void mms__sched_debug_print(mms_backend_sched_t s);                                  /* debug.c */
static enum mms_status mms__sched_dump(mms_backend_sched_t s, const struct mms_tensor *t, int node);
static bool mms__glob_match(const char *pattern, const char *s);

/* Grows *arr (of elem-byte items) to hold at least need items. */
static bool mms__grow(void **arr, int *cap, int need, size_t elem) {
    int nc;
    void *p;
    if (need <= *cap) return true;
    nc = *cap ? *cap : 16;
    while (nc < need) nc *= 2;
    p = MMS_REALLOC(*arr, elem * (size_t)nc);
    if (!p) return false;
    *arr = p;
    *cap = nc;
    return true;
}

/* -- creation -- */

MMS_API mms_backend_sched_t mms_backend_sched_new(mms_backend_t *backends, mms_backend_buffer_type_t *bufts, int n_backends,
                                                  bool parallel, bool op_offload) {
    mms_backend_sched_t s;
    struct mms_init_params ip = { 0, NULL, true };
    const char *env;
    int i, c;
    if (!backends || n_backends < 1) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_new: needs at least one backend"); return NULL; }
    for (i = 0; i < n_backends; i++)
        if (!backends[i]) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_new: backend %d is NULL", i); return NULL; }
    s = (mms_backend_sched_t)MMS_MALLOC(sizeof *s);
    if (!s) { mms_set_error(MMS_ERR_OOM, "mms_backend_sched_new: out of host memory"); return NULL; }
    memset(s, 0, sizeof *s);
    s->n_backends = n_backends;
    s->n_copies = parallel ? MMS__SCHED_MAX_COPIES : 1;
    s->op_offload = op_offload;
    s->backends = (mms_backend_t *)MMS_MALLOC(sizeof *s->backends * (size_t)n_backends);
    s->bufts = (mms_backend_buffer_type_t *)MMS_MALLOC(sizeof *s->bufts * (size_t)n_backends);
    s->events = (mms_backend_event_t *)MMS_MALLOC(sizeof *s->events * (size_t)(n_backends * s->n_copies));
    s->ctx = mms_init(ip);
    if (!s->backends || !s->bufts || !s->events || !s->ctx) {
        mms_backend_sched_free(s);
        mms_set_error(MMS_ERR_OOM, "mms_backend_sched_new: out of host memory");
        return NULL;
    }
    for (i = 0; i < n_backends; i++) {
        s->backends[i] = backends[i];
        s->bufts[i] = bufts && bufts[i] ? bufts[i] : mms_backend_get_default_buffer_type(backends[i]);
        if (!mms_backend_supports_buft(backends[i], s->bufts[i])) {
            mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_new: backend %s cannot use buffer type %s",
                          mms_backend_name(backends[i]), mms_backend_buft_name(s->bufts[i]));
            mms_backend_sched_free(s);
            return NULL;
        }
        for (c = 0; c < s->n_copies; c++) s->events[i * s->n_copies + c] = mms_backend_event_new(backends[i]);
    }
    s->galloc = mms_gallocr_new_n(s->bufts, n_backends);
    s->reserve_buf = mms__reserve_buffer_new();
    if (!s->galloc || !s->reserve_buf) { mms_backend_sched_free(s); return NULL; }

    env = getenv("MMS_SCHED_DEBUG");
    s->debug = env ? atoi(env) : 0;
    env = getenv("MMS_SCHED_POISON");
    s->poison = env && atoi(env) != 0;
    env = getenv("MMS_SCHED_DUMP");
    if (env && env[0]) mms_backend_sched_set_dump(s, env, getenv("MMS_SCHED_DUMP_DIR"));
    return s;
}

MMS_API void mms_backend_sched_free(mms_backend_sched_t s) {
    int i;
    if (!s) return;
    for (i = 0; i < s->n_persist; i++) mms_backend_buffer_free(s->persist[i].buffer);
    for (i = 0; i < s->n_kept; i++) mms_backend_buffer_free(s->kept[i].fresh);
    mms_backend_buffer_free(s->reserve_buf);
    for (i = 0; s->events && i < s->n_backends * s->n_copies; i++) mms_backend_event_free(s->events[i]);
    for (i = 0; i < s->n_splits; i++) MMS_FREE(s->splits[i].originals);
    mms_gallocr_free(s->galloc);
    mms_free(s->ctx);
    mms__ptrmap_free(&s->pins);
    mms__ptrmap_free(&s->pos);
    MMS_FREE(s->backends); MMS_FREE(s->bufts); MMS_FREE(s->events);
    MMS_FREE(s->node_backend); MMS_FREE(s->leaf_backend); MMS_FREE(s->node_why); MMS_FREE(s->leaf_why);
    MMS_FREE(s->clones); MMS_FREE(s->leaf_clones); MMS_FREE(s->splits); MMS_FREE(s->inputs); MMS_FREE(s->persist); MMS_FREE(s->addrs);
    MMS_FREE(s->kept); MMS_FREE(s->kept_leafs);
    MMS_FREE(s);
}

/* -- where memory is -- */

static int mms__sched_backend_index(mms_backend_sched_t s, mms_backend_t b) {
    int i;
    for (i = 0; i < s->n_backends; i++) if (s->backends[i] == b) return i;
    return -1;
}

/* The first backend (by priority) that can use memory of this buffer type, or -1. */
static int mms__sched_backend_for_buft(mms_backend_sched_t s, mms_backend_buffer_type_t buft) {
    int i;
    for (i = 0; i < s->n_backends; i++) if (mms_backend_supports_buft(s->backends[i], buft)) return i;
    return -1;
}

/* Memory the scheduler does not hand out: the caller's (a context's, static buffers) and kept
   tensors still held. Compute memory and released kept tensors are placed anew. */
static bool mms__sched_has_fixed_memory(const struct mms_tensor *t) {
    switch (t->placement.kind) {
        case MMS_MEMORY_HOST:
        case MMS_MEMORY_STATIC:     return true;
        case MMS_MEMORY_PERSISTENT: return mms__memory_is_live(t);
        case MMS_MEMORY_NONE:
        case MMS_MEMORY_COMPUTE:
        case MMS_MEMORY_RESERVE:    break;
    }
    return false;
}

/* The buffer type of fixed memory (checked live: host memory of a context is the CPU's). */
static mms_backend_buffer_type_t mms__sched_buft_of(const struct mms_tensor *t) {
    mms_backend_buffer_t live = mms__live_buffer_of(t);
    return live ? live->buft : mms_backend_cpu_buffer_type();
}

static int mms__sched_pos(mms_backend_sched_t s, const struct mms_tensor *t) {
    return (int)(intptr_t)mms__ptrmap_get(&s->pos, (uint64_t)(uintptr_t)t, NULL);
}

/* The backend a tensor of the current graph lives on (views: their source's). */
static int mms__sched_backend_of(mms_backend_sched_t s, const struct mms_tensor *t) {
    int p = mms__sched_pos(s, t);
    if (p > 0) return s->node_backend[p - 1];
    if (p < 0) return s->leaf_backend[-p - 1];
    return -1;
}

static bool mms__sched_supports(mms_backend_sched_t s, int b, const struct mms_tensor *t) {
    return mms_op_is_view(t->op) || mms_backend_supports_op(s->backends[b], t);
}

static int mms__sched_first_supporting(mms_backend_sched_t s, const struct mms_tensor *t) {
    int b;
    for (b = 0; b < s->n_backends; b++) if (mms__sched_supports(s, b, t)) return b;
    return -1;
}

/* -- 1. check -- */

/* A kept tensor the graph reads that has no memory yet, or none any more: allowed only in a
   reserve, where a stand-in takes its place. */
static bool mms__sched_kept_without_memory(const struct mms_tensor *t) {
    return (t->flags & MMS_TENSOR_FLAG_PERSISTENT) && !t->view_src &&
           (t->placement.kind == MMS_MEMORY_NONE || (t->placement.kind == MMS_MEMORY_PERSISTENT && !mms__memory_is_live(t)));
}

/* Memory the graph relies on (weights, caches, kept tensors) must still hold, and kept leafs be up
   to date (values do not matter to a reserve); checked through the registry before anything looks
   at a tensor's buffer. Kept nodes whose buffer was released are simply placed again. */
static enum mms_status mms__sched_check_memory(struct mms_cgraph *g, bool reserve, const char *who) {
    int i, n = mms_graph_n_leafs(g) + mms_graph_n_nodes(g);
    for (i = 0; i < n; i++) {
        const struct mms_tensor *t = mms__slot_tensor(g, i);
        const struct mms_tensor *m = t->view_src ? t->view_src : t;
        const bool read = i < mms_graph_n_leafs(g) && !reserve;
        enum mms_status st;
        if (m->placement.kind == MMS_MEMORY_NONE || m->placement.kind == MMS_MEMORY_COMPUTE) continue;   /* planned, or the reuse check's */
        if (m->placement.kind == MMS_MEMORY_PERSISTENT && !mms__memory_is_live(m) && (reserve || i >= mms_graph_n_leafs(g))) continue;
        if ((st = read ? mms__tensor_check_read(m, who) : mms__tensor_check(m, who)) != MMS_OK) return st;
    }
    return MMS_OK;
}

/* -- 2. backends -- */

/* Where leaf t goes and why: fixed memory's backend, its pin, else the last backend (inputs are
   set from the host, as in ggml); -1 when no backend can use its memory. */
static int mms__sched_leaf_backend(mms_backend_sched_t s, const struct mms_tensor *t, unsigned char *why) {
    int pin = (int)(intptr_t)mms__ptrmap_get(&s->pins, (uint64_t)(uintptr_t)t, NULL) - 1;
    if (mms__sched_has_fixed_memory(t)) { *why = MMS__WHY_MEMORY; return mms__sched_backend_for_buft(s, mms__sched_buft_of(t)); }
    if (pin >= 0) { *why = MMS__WHY_PIN; return pin; }
    *why = MMS__WHY_INPUT;
    return s->n_backends - 1;
}

static enum mms_status mms__sched_assign_leafs(mms_backend_sched_t s, struct mms_cgraph *g) {
    int i;
    for (i = 0; i < s->n_leafs; i++) {
        struct mms_tensor *t = mms_graph_leaf(g, i);
        if ((s->leaf_backend[i] = mms__sched_leaf_backend(s, t, &s->leaf_why[i])) < 0)
            return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched: tensor %s lives in '%s' memory that none of the "
                                 "scheduler's backends can use", mms__tensor_desc(t).s, mms_backend_buft_name(mms__sched_buft_of(t)));
    }
    return MMS_OK;
}

/* Pins, memory, weights (and offload) decide first. */
static enum mms_status mms__sched_assign_fixed(mms_backend_sched_t s, struct mms_cgraph *g) {
    const int last = s->n_backends - 1;
    int i, j;
    for (i = 0; i < s->n_nodes; i++) {
        struct mms_tensor *t = mms_graph_node(g, i);
        int pin = (int)(intptr_t)mms__ptrmap_get(&s->pins, (uint64_t)(uintptr_t)t, NULL) - 1;
        s->node_backend[i] = -1;
        s->node_why[i] = MMS__WHY_NONE;
        if (mms_op_is_view(t->op)) continue;
        if (pin >= 0) {
            if (!mms__sched_supports(s, pin, t))
                return mms_set_error(MMS_ERR_UNSUPPORTED, "mms_backend_sched: %s is pinned to %s, which cannot run %s",
                                     mms__tensor_desc(t).s, mms_backend_name(s->backends[pin]), mms_op_name(t->op));
            s->node_backend[i] = pin;
            s->node_why[i] = MMS__WHY_PIN;
            continue;
        }
        if (mms__sched_has_fixed_memory(t->view_src ? t->view_src : t)) {
            const struct mms_tensor *m = t->view_src ? t->view_src : t;   /* e.g. a CPY into a cache */
            int b = mms__sched_backend_for_buft(s, mms__sched_buft_of(m));
            if (b < 0 || !mms__sched_supports(s, b, t))
                return mms_set_error(MMS_ERR_UNSUPPORTED, "mms_backend_sched: %s writes into '%s' memory, and no backend that can "
                                     "use it runs %s", mms__tensor_desc(t).s, mms_backend_buft_name(mms__sched_buft_of(m)), mms_op_name(t->op));
            s->node_backend[i] = b;
            s->node_why[i] = MMS__WHY_MEMORY;
            continue;
        }
        for (j = 0; j < 2 && s->node_backend[i] < 0; j++) {     /* src[0..1]: weights, biases, norm gains */
            const struct mms_tensor *w = t->src[j] ? (t->src[j]->view_src ? t->src[j]->view_src : t->src[j]) : NULL;
            mms_backend_buffer_t live = w ? mms__live_buffer_of(w) : NULL;   /* never w->buffer: it may be freed */
            int wb, b;
            if (!live || live->usage != MMS_BUFFER_USAGE_WEIGHTS) continue;
            wb = mms__sched_backend_for_buft(s, live->buft);
            if (wb < 0) continue;
            if (s->op_offload && wb == last) {
                for (b = 0; b < last; b++)
                    if (mms_backend_offload_op(s->backends[b], t) && mms__sched_supports(s, b, t)) {
                        s->node_backend[i] = b;
                        s->node_why[i] = MMS__WHY_OFFLOAD;
                        break;
                    }
                if (s->node_backend[i] >= 0) break;
            }
            if (mms__sched_supports(s, wb, t)) {
                s->node_backend[i] = wb;
                s->node_why[i] = MMS__WHY_WEIGHTS;
            } else {
                s->node_backend[i] = mms__sched_first_supporting(s, t);
                s->node_why[i] = MMS__WHY_FALLBACK;
            }
        }
    }
    return MMS_OK;
}

/* Unassigned ops join their neighbours: down then up, first without letting the last backend
   (the host) spread, so accelerators get the ops between their weights. */
static void mms__sched_spread(mms_backend_sched_t s, struct mms_cgraph *g) {
    const int last = s->n_backends - 1;
    int round, dir, k;
    for (round = 0; round < 2; round++) {
        for (dir = 0; dir < 2; dir++) {
            int cur = -1;
            for (k = 0; k < s->n_nodes; k++) {
                int i = dir == 0 ? k : s->n_nodes - 1 - k;
                const struct mms_tensor *t = mms_graph_node(g, i);
                if (mms_op_is_view(t->op)) continue;
                if (s->node_backend[i] >= 0) {
                    cur = (round == 0 && s->node_backend[i] == last) ? -1 : s->node_backend[i];
                } else if (cur >= 0 && mms__sched_supports(s, cur, t)) {
                    s->node_backend[i] = cur;
                    s->node_why[i] = MMS__WHY_SPREAD;
                }
            }
        }
    }
}

static enum mms_status mms__sched_assign(mms_backend_sched_t s, struct mms_cgraph *g) {
    enum mms_status st;
    int i;
    if ((st = mms__sched_assign_leafs(s, g)) != MMS_OK) return st;
    if ((st = mms__sched_assign_fixed(s, g)) != MMS_OK) return st;
    mms__sched_spread(s, g);
    for (i = 0; i < s->n_nodes; i++) {
        const struct mms_tensor *t = mms_graph_node(g, i);
        if (mms_op_is_view(t->op) || s->node_backend[i] >= 0) continue;
        s->node_backend[i] = mms__sched_first_supporting(s, t);
        s->node_why[i] = MMS__WHY_DEFAULT;
        if (s->node_backend[i] < 0)
            return mms_set_error(MMS_ERR_UNSUPPORTED, "mms_backend_sched: no backend of the scheduler runs %s (for %s)",
                                 mms_op_name(t->op), mms__tensor_desc(t).s);
    }
    for (i = 0; i < s->n_nodes; i++) {                 /* views live where their source lives */
        const struct mms_tensor *t = mms_graph_node(g, i);
        if (!mms_op_is_view(t->op)) continue;
        s->node_backend[i] = mms__sched_backend_of(s, t->view_src);
        s->node_why[i] = MMS__WHY_VIEW;
        if (s->node_backend[i] < 0) s->node_backend[i] = s->n_backends - 1;
    }
    return MMS_OK;
}

/* -- 3. splits and the copies their inputs need -- */

/* Must a split on backend b copy src in first? */
static bool mms__sched_needs_copy(mms_backend_sched_t s, int b, const struct mms_tensor *src) {
    int owner = mms__sched_backend_of(s, src);
    const struct mms_tensor *root = src->view_src ? src->view_src : src;
    if (owner < 0 || owner == b) return false;
    return !mms_backend_supports_buft(s->backends[b], mms__sched_has_fixed_memory(root) ? mms__sched_buft_of(root) : s->bufts[owner]);
}

static enum mms_status mms__sched_make_splits(mms_backend_sched_t s, struct mms_cgraph *g) {
    struct mms__sched_split *cur = NULL;
    int i, j, k;
    s->n_splits = 0;
    s->n_inputs = 0;
    for (i = 0; i < s->n_nodes; i++) {
        const struct mms_tensor *t = mms_graph_node(g, i);
        if (mms_op_is_view(t->op)) continue;
        if (!cur || cur->backend != s->node_backend[i]) {
            if (cur) cur->i1 = i;                  /* before the array may move */
            if (!mms__grow((void **)&s->splits, &s->cap_splits, s->n_splits + 1, sizeof *s->splits))
                return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory");
            cur = &s->splits[s->n_splits++];
            memset(cur, 0, sizeof *cur);
            cur->backend = s->node_backend[i];
            cur->i0 = s->n_splits == 1 ? 0 : i;       /* leading views join the first split */
            cur->first_input = s->n_inputs;
        }
        for (j = 0; j < MMS_MAX_SRC; j++) {
            struct mms_tensor *src = t->src[j];
            struct mms__sched_input *in;
            if (!src || !mms__sched_needs_copy(s, cur->backend, src)) continue;
            for (k = cur->first_input; k < s->n_inputs; k++) if (s->inputs[k].src == src) break;
            if (k < s->n_inputs) continue;
            if (!mms__grow((void **)&s->inputs, &s->cap_inputs, s->n_inputs + 1, sizeof *s->inputs))
                return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory");
            in = &s->inputs[s->n_inputs++];
            memset(in, 0, sizeof *in);
            in->src = src;
            in->src_backend = mms__sched_backend_of(s, src);
            in->split = s->n_splits - 1;
            cur->n_inputs++;
        }
    }
    if (!cur && s->n_nodes > 0) {                      /* only views: one split that computes nothing */
        if (!mms__grow((void **)&s->splits, &s->cap_splits, 1, sizeof *s->splits))
            return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory");
        cur = &s->splits[s->n_splits++];
        memset(cur, 0, sizeof *cur);
        cur->backend = s->node_backend[0];
    }
    if (cur) cur->i1 = s->n_nodes;
    return MMS_OK;
}

/* -- 4. clones, with their sources rewired to the copies -- */

static struct mms_tensor *mms__sched_input_copy(mms_backend_sched_t s, int split, const struct mms_tensor *src) {
    int k;
    for (k = s->splits[split].first_input; k < s->splits[split].first_input + s->splits[split].n_inputs; k++)
        if (s->inputs[k].src == src) return s->inputs[k].copies[s->cur_copy];
    return NULL;
}

/* What a clone (or a copy) reads in place of the caller's tensor t. */
static struct mms_tensor *mms__sched_mapped(mms_backend_sched_t s, struct mms_tensor *t) {
    int p = mms__sched_pos(s, t);
    if (p > 0) return s->clones[p - 1];
    if (p < 0 && s->leaf_clones[-p - 1]) return s->leaf_clones[-p - 1];
    return t;
}

static struct mms_tensor *mms__sched_new_internal(mms_backend_sched_t s, const struct mms_tensor *like) {
    return mms__new_tensor_impl(s->ctx, "mms_backend_sched", like->type, MMS_MAX_DIMS, like->ne, NULL, 0);
}

/* A clone shares what it can with its original: its memory if that is fixed, nothing else of the
   caller's bookkeeping (identity for versions stays the original's). */
static struct mms_tensor *mms__sched_clone(mms_backend_sched_t s, const struct mms_tensor *orig) {
    struct mms_tensor *cl = mms__sched_new_internal(s, orig);
    if (!cl) return NULL;
    *cl = *orig;
    cl->provenance = NULL;
    cl->watched = false;
    if (orig->view_src || !mms__sched_has_fixed_memory(orig)) mms__tensor_unplace(cl);   /* planned (views: given) by the gallocr */
    return cl;
}

/* Stand-ins for kept leafs no graph has computed yet: allowed only when reserving. */
static enum mms_status mms__sched_clone_leafs(mms_backend_sched_t s, struct mms_cgraph *g, bool reserve) {
    int i;
    for (i = 0; i < s->n_leafs; i++) {
        struct mms_tensor *t = mms_graph_leaf(g, i);
        s->leaf_clones[i] = NULL;
        if (!mms__sched_kept_without_memory(t)) continue;
        if (!reserve)
            return mms_set_error(MMS_ERR_STATE, "mms_backend_sched_alloc_graph: persistent tensor %s is an input of graph #%llu, but no "
                                 "graph has computed it yet", mms__tensor_desc(t).s, (unsigned long long)mms_graph_id(g));
        if (!(s->leaf_clones[i] = mms__sched_clone(s, t))) return mms_ctx_status(s->ctx);
        mms__tensor_unplace(s->leaf_clones[i]);
        mms__tensor_alloc_for(s->reserve_buf, s->leaf_clones[i], NULL, 0);
    }
    return MMS_OK;
}

static enum mms_status mms__sched_clone_nodes(mms_backend_sched_t s, struct mms_cgraph *g) {
    int i;
    for (i = 0; i < s->n_nodes; i++)
        if (!(s->clones[i] = mms__sched_clone(s, mms_graph_node(g, i)))) return mms_ctx_status(s->ctx);
    return MMS_OK;
}

/* The copy nodes of every split input (one per pipeline copy), then each clone's sources. */
static enum mms_status mms__sched_wire(mms_backend_sched_t s, struct mms_cgraph *g) {
    int k, j, c, i;
    for (k = 0; k < s->n_splits; k++) {
        struct mms__sched_split *sp = &s->splits[k];
        for (j = sp->first_input; j < sp->first_input + sp->n_inputs; j++) {
            struct mms__sched_input *in = &s->inputs[j];
            for (c = 0; c < s->n_copies; c++) {
                struct mms_tensor *cp = mms__sched_new_internal(s, in->src);
                if (!cp) return mms_ctx_status(s->ctx);
                memcpy(cp->nb, in->src->nb, sizeof cp->nb);   /* same layout: the copy is a byte copy */
                cp->op = MMS_OP_DUP;
                /* keeps the source alive until copied; a view's own clone may come later in this
                   split, so a copy of a view depends on the view's source (a leaf or an earlier split) */
                cp->src[0] = mms__sched_mapped(s, in->src->view_src ? in->src->view_src : in->src);
                if (s->n_copies > 1) cp->flags = MMS_TENSOR_FLAG_INPUT | MMS_TENSOR_FLAG_OUTPUT;
                mms_format_name(cp, "%s#%.40s#%d", mms_backend_name(s->backends[sp->backend]), in->src->name, c);
                in->copies[c] = cp;
            }
        }
        for (i = sp->i0; i < sp->i1; i++) {
            const struct mms_tensor *orig = mms_graph_node(g, i);
            struct mms_tensor *cl = s->clones[i];
            for (j = 0; j < MMS_MAX_SRC; j++) {
                struct mms_tensor *cp = orig->src[j] && !mms_op_is_view(orig->op) ? mms__sched_input_copy(s, k, orig->src[j]) : NULL;
                cl->src[j] = cp ? cp : orig->src[j] ? mms__sched_mapped(s, orig->src[j]) : NULL;
            }
            if (orig->view_src) cl->view_src = mms__sched_mapped(s, orig->view_src);
        }
    }
    return MMS_OK;
}

/* -- 5. place: kept nodes, then the allocation graph for the gallocr -- */

/* The leafs (their memory's roots) a node is computed from, appended to s->kept_leafs. */
static enum mms_status mms__sched_collect_leafs(mms_backend_sched_t s, struct mms_cgraph *g, int node, int *seen, int stamp) {
    struct mms_tensor **stack;
    int depth = 0, j;
    stack = (struct mms_tensor **)MMS_MALLOC(sizeof *stack * (size_t)(s->n_nodes + s->n_leafs + 1) * (MMS_MAX_SRC + 1));
    if (!stack) return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory");
    stack[depth++] = mms_graph_node(g, node);
    while (depth > 0) {
        struct mms_tensor *t = stack[--depth];
        int p = mms__sched_pos(s, t), at = p > 0 ? p - 1 : s->n_nodes - p - 1;
        if (p == 0 || seen[at] == stamp) continue;    /* p == 0: not in the graph (a view's root) */
        seen[at] = stamp;
        if (p < 0) {
            struct mms_tensor *root = t->view_src ? t->view_src : t;
            if (!mms__grow((void **)&s->kept_leafs, &s->cap_kept_leafs, s->n_kept_leafs + 1, sizeof *s->kept_leafs)) {
                MMS_FREE(stack);
                return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory");
            }
            s->kept_leafs[s->n_kept_leafs++] = root;
            continue;
        }
        for (j = 0; j < MMS_MAX_SRC; j++) if (t->src[j]) stack[depth++] = t->src[j];
        if (t->view_src) stack[depth++] = t->view_src;
    }
    MMS_FREE(stack);
    return MMS_OK;
}

/* Persistent nodes keep the memory they have, or get a buffer of their own on their backend (a
   stand-in in the reserve buffer when reserving). Buffers made here are published with the graph,
   or freed if the allocation fails. */
static enum mms_status mms__sched_place_kept(mms_backend_sched_t s, struct mms_cgraph *g, bool reserve) {
    int i, *seen = NULL;
    enum mms_status st = MMS_OK;
    s->n_kept = s->n_kept_leafs = 0;
    for (i = 0; i < s->n_nodes; i++) {
        struct mms_tensor *orig = mms_graph_node(g, i), *cl = s->clones[i];
        struct mms__sched_kept *k;
        int b = s->node_backend[i];
        if (!(orig->flags & MMS_TENSOR_FLAG_PERSISTENT) || orig->view_src) continue;
        if (!mms__grow((void **)&s->kept, &s->cap_kept, s->n_kept + 1, sizeof *s->kept)) return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory");
        k = &s->kept[s->n_kept++];
        memset(k, 0, sizeof *k);
        k->node = i;
        if (mms__sched_has_fixed_memory(orig)) continue;                 /* kept already: computed again in place */
        if (reserve) { mms__tensor_alloc_for(s->reserve_buf, cl, NULL, 0); continue; }
        k->fresh = mms_backend_buft_alloc_buffer(s->bufts[b], mms_backend_buft_get_alloc_size(s->bufts[b], orig));
        if (!k->fresh)
            return mms__error_context(mms_last_status(), "mms_backend_sched: cannot allocate persistent tensor %s on %s: %s",
                                      mms__tensor_desc(orig).s, mms_backend_name(s->backends[b]), mms_last_error());
        mms_backend_buffer_set_usage(k->fresh, MMS_BUFFER_USAGE_PERSISTENT);
        if ((st = mms__tensor_alloc_for(k->fresh, cl, mms_backend_buffer_get_base(k->fresh), mms_graph_id(g))) != MMS_OK) return st;
    }
    if (reserve || s->n_kept == 0) return MMS_OK;
    seen = (int *)MMS_MALLOC(sizeof *seen * (size_t)(s->n_nodes + s->n_leafs + 1));
    if (!seen) return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory");
    memset(seen, 0, sizeof *seen * (size_t)(s->n_nodes + s->n_leafs + 1));
    for (i = 0; i < s->n_kept && st == MMS_OK; i++) {
        s->kept[i].first_leaf = s->n_kept_leafs;
        st = mms__sched_collect_leafs(s, g, s->kept[i].node, seen, i + 1);
        s->kept[i].n_leafs = s->n_kept_leafs - s->kept[i].first_leaf;
    }
    MMS_FREE(seen);
    return st;
}

/* Kept buffers this allocation made but did not publish. */
static void mms__sched_drop_fresh(mms_backend_sched_t s) {
    int i;
    for (i = 0; i < s->n_kept; i++) { mms_backend_buffer_free(s->kept[i].fresh); s->kept[i].fresh = NULL; }
}

/* The graph the gallocr plans: per split its input copies, then its clones; the caller's leafs
   (or their stand-ins). ids: the backend of each node, then of each leaf. */
static enum mms_status mms__sched_alloc_graph_of(mms_backend_sched_t s, struct mms_cgraph *g, int **ids_out) {
    const int cap = s->n_nodes + s->n_inputs * s->n_copies + 1;
    struct mms_tensor **nodes = (struct mms_tensor **)MMS_MALLOC(sizeof *nodes * (size_t)cap);
    struct mms_tensor **leafs = (struct mms_tensor **)MMS_MALLOC(sizeof *leafs * (size_t)(s->n_leafs + 1));
    int *ids = (int *)MMS_MALLOC(sizeof *ids * (size_t)(cap + s->n_leafs + 1));
    int n = 0, k, j, c, i;
    if (!nodes || !leafs || !ids) { MMS_FREE(nodes); MMS_FREE(leafs); MMS_FREE(ids); return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory"); }
    for (k = 0; k < s->n_splits; k++) {
        const struct mms__sched_split *sp = &s->splits[k];
        for (j = sp->first_input; j < sp->first_input + sp->n_inputs; j++)
            for (c = 0; c < s->n_copies; c++) { ids[n] = sp->backend; nodes[n++] = s->inputs[j].copies[c]; }
        for (i = sp->i0; i < sp->i1; i++) { ids[n] = s->node_backend[i]; nodes[n++] = s->clones[i]; }
    }
    for (i = 0; i < s->n_leafs; i++) { leafs[i] = mms__sched_mapped(s, mms_graph_leaf(g, i)); ids[n + i] = s->leaf_backend[i]; }
    s->alloc_graph = mms__graph_from_lists(s->ctx, nodes, n, leafs, s->n_leafs);
    MMS_FREE(nodes);
    MMS_FREE(leafs);
    if (!s->alloc_graph || mms_graph_status(s->alloc_graph) != MMS_OK) { MMS_FREE(ids); return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory"); }
    *ids_out = ids;
    return MMS_OK;
}

/* The graphs each backend computes: the clones of a split that do work (not views). */
static enum mms_status mms__sched_split_graphs(mms_backend_sched_t s) {
    int k, i, n;
    for (k = 0; k < s->n_splits; k++) {
        struct mms__sched_split *sp = &s->splits[k];
        struct mms_tensor **list = (struct mms_tensor **)MMS_MALLOC(sizeof *list * (size_t)(sp->i1 - sp->i0 + 1));
        MMS_FREE(sp->originals);
        sp->originals = (struct mms_tensor **)MMS_MALLOC(sizeof *sp->originals * (size_t)(sp->i1 - sp->i0 + 1));
        if (!list || !sp->originals) { MMS_FREE(list); return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory"); }
        for (i = sp->i0, n = 0; i < sp->i1; i++) {
            if (mms_op_is_view(s->clones[i]->op)) continue;
            sp->originals[n] = mms_graph_node(s->graph, i);
            list[n++] = s->clones[i];
        }
        sp->graph = mms__graph_from_lists(s->ctx, list, n, NULL, 0);
        MMS_FREE(list);
        if (!sp->graph) return mms_ctx_status(s->ctx);
    }
    return MMS_OK;
}

static const char *mms__sched_graph_name(void *user, uint64_t id) {
    mms_backend_sched_t s = (mms_backend_sched_t)user;
    int i;
    for (i = 0; i < 8; i++) if (s->recent[i].id == id) return s->recent[i].name;
    return "";
}

static void mms__sched_remember_graph(mms_backend_sched_t s, const struct mms_cgraph *g) {
    int slot = s->n_recent++ % 8;
    s->recent[slot].id = mms_graph_id(g);
    mms__copy_str(s->recent[slot].name, sizeof s->recent[slot].name, mms_graph_get_name(g));
}

/* Sizes the per-node and per-leaf arrays for g and indexes its tensors. */
static enum mms_status mms__sched_index(mms_backend_sched_t s, struct mms_cgraph *g) {
    int i;
    s->graph = g;
    s->n_nodes = mms_graph_n_nodes(g);
    s->n_leafs = mms_graph_n_leafs(g);
    mms__ptrmap_free(&s->pos);
    if (!mms__grow((void **)&s->node_backend, &s->cap_nodes, s->n_nodes + 1, sizeof(int)) ||
        !mms__grow((void **)&s->leaf_backend, &s->cap_leafs, s->n_leafs + 1, sizeof(int))) goto oom;
    {   /* the other per-node and per-leaf arrays follow the same capacities */
        unsigned char *nw = (unsigned char *)MMS_REALLOC(s->node_why, (size_t)s->cap_nodes);
        unsigned char *lw = (unsigned char *)MMS_REALLOC(s->leaf_why, (size_t)s->cap_leafs);
        struct mms_tensor **cl = (struct mms_tensor **)MMS_REALLOC(s->clones, sizeof *cl * (size_t)s->cap_nodes);
        struct mms_tensor **lc = (struct mms_tensor **)MMS_REALLOC(s->leaf_clones, sizeof *lc * (size_t)s->cap_leafs);
        if (nw) s->node_why = nw;
        if (lw) s->leaf_why = lw;
        if (cl) s->clones = cl;
        if (lc) s->leaf_clones = lc;
        if (!nw || !lw || !cl || !lc) goto oom;
    }
    for (i = 0; i < s->n_nodes; i++)
        if (!mms__ptrmap_put(&s->pos, (uint64_t)(uintptr_t)mms_graph_node(g, i), (void *)(intptr_t)(i + 1))) goto oom;
    for (i = 0; i < s->n_leafs; i++)
        if (!mms__ptrmap_put(&s->pos, (uint64_t)(uintptr_t)mms_graph_leaf(g, i), (void *)(intptr_t)-(i + 1))) goto oom;
    return MMS_OK;
oom:
    return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory");
}

/* Steps 1-5 up to the gallocr: afterwards alloc_graph and its backend ids are ready. Nothing of
   the caller's is written. */
static enum mms_status mms__sched_prepare(mms_backend_sched_t s, struct mms_cgraph *g, bool reserve, int **ids) {
    const char *who = reserve ? "mms_backend_sched_reserve" : "mms_backend_sched_alloc_graph";
    enum mms_status st;
    int i;
    if (!g) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: graph is NULL", who);
    if (mms_graph_status(g) != MMS_OK)
        return mms_set_error(MMS_ERR_STATE, "%s: the graph was not built correctly: %s", who, mms_graph_error(g));
    if ((st = mms__sched_check_memory(g, reserve, who)) != MMS_OK) return st;
    if (!reserve && (st = mms__galloc_check_reuse(g, who, mms__sched_graph_name, s)) != MMS_OK) return st;
    s->allocated = false;
    mms__sched_drop_fresh(s);
    s->n_kept = 0;
    s->pins_changed = false;
    for (i = 0; i < s->n_splits; i++) { MMS_FREE(s->splits[i].originals); s->splits[i].originals = NULL; }
    mms_reset(s->ctx);
    if ((st = mms__sched_index(s, g)) != MMS_OK) return st;
    if ((st = mms__sched_assign(s, g)) != MMS_OK) return st;                /* 2 */
    if ((st = mms__sched_make_splits(s, g)) != MMS_OK) return st;           /* 3 */
    if ((st = mms__sched_clone_leafs(s, g, reserve)) != MMS_OK) return st;  /* 4 */
    if ((st = mms__sched_clone_nodes(s, g)) != MMS_OK) return st;
    if ((st = mms__sched_wire(s, g)) != MMS_OK) return st;
    if ((st = mms__sched_place_kept(s, g, reserve)) != MMS_OK) return st;   /* 5 */
    if ((st = mms__sched_alloc_graph_of(s, g, ids)) != MMS_OK) return st;
    return mms__sched_split_graphs(s);
}

/* Step 6: the caller's nodes take their clones' placement (results are read from them), leafs the
   gallocr placed are marked as this graph's, and kept buffers made for this graph are registered. */
static enum mms_status mms__sched_publish(mms_backend_sched_t s, struct mms_cgraph *g) {
    const uint64_t id = mms_graph_id(g);
    int i;
    if (!mms__grow((void **)&s->persist, &s->cap_persist, s->n_persist + s->n_kept, sizeof *s->persist))
        return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory");
    for (i = 0; i < s->n_nodes; i++) {
        struct mms_tensor *orig = mms_graph_node(g, i);
        const struct mms_tensor *cl = s->clones[i];
        orig->data = cl->data;
        orig->buffer = cl->buffer;
        orig->placement = cl->placement;
        if (orig->placement.kind == MMS_MEMORY_COMPUTE || orig->placement.kind == MMS_MEMORY_PERSISTENT) orig->placement.graph_id = id;
    }
    for (i = 0; i < s->n_leafs; i++) {
        struct mms_tensor *t = mms_graph_leaf(g, i);
        if (t->placement.kind == MMS_MEMORY_COMPUTE && !t->view_src) t->placement.graph_id = id;
    }
    for (i = 0; i < s->n_kept; i++) {
        struct mms__sched_kept *k = &s->kept[i];
        struct mms__sched_persist *p;
        if (!k->fresh) continue;
        p = &s->persist[s->n_persist++];
        p->tensor = mms_graph_node(g, k->node);
        p->buffer = k->fresh;
        p->backend = s->node_backend[k->node];
        k->fresh = NULL;
        if (mms__provenance_pending(mms_graph_node(g, k->node), id) != MMS_OK) return mms_last_status();
    }
    return MMS_OK;
}

/* Records the addresses of everything the split graphs read or write (the caller's leafs and
   nodes, the split inputs' copies); true when they are those recorded last time. */
static bool mms__sched_same_addresses(mms_backend_sched_t s, struct mms_cgraph *g) {
    const int n = s->n_leafs + s->n_nodes + s->n_inputs;
    bool same = s->n_addrs == n;
    int i;
    if (!mms__grow((void **)&s->addrs, &s->cap_addrs, n, sizeof *s->addrs)) { s->n_addrs = 0; return false; }
    for (i = 0; i < n; i++) {
        void *d = i < s->n_leafs ? mms_graph_leaf(g, i)->data
                : i < s->n_leafs + s->n_nodes ? mms_graph_node(g, i - s->n_leafs)->data
                : s->inputs[i - s->n_leafs - s->n_nodes].copies[s->cur_copy]->data;
        if (!same || s->addrs[i] != d) { same = false; s->addrs[i] = d; }
    }
    s->n_addrs = n;
    return same;
}

/* -- public: reserve, alloc, compute -- */

MMS_API enum mms_status mms_backend_sched_reserve(mms_backend_sched_t s, struct mms_cgraph *g) {
    enum mms_status st;
    int *ids = NULL;
    if (!s) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_reserve: scheduler is NULL");
    s->allocated = false;
    st = mms__sched_prepare(s, g, true, &ids);
    if (st == MMS_OK) st = mms_gallocr_reserve_n(s->galloc, s->alloc_graph, ids, ids + mms_graph_n_nodes(s->alloc_graph));
    MMS_FREE(ids);
    s->reserved_only = true;
    if (st == MMS_OK && s->debug) mms__sched_debug_print(s);
    return st;
}

MMS_API enum mms_status mms_backend_sched_alloc_graph(mms_backend_sched_t s, struct mms_cgraph *g) {
    enum mms_status st;
    int *ids = NULL;
    if (!s) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_alloc_graph: scheduler is NULL");
    s->allocated = false;                       /* a failed allocation leaves nothing allocated */
    s->cur_copy = (s->cur_copy + 1) % s->n_copies;
    st = mms__sched_prepare(s, g, false, &ids);
    if (st == MMS_OK && !mms__galloc_plan_fits(s->galloc, s->alloc_graph))
        st = mms_gallocr_reserve_n(s->galloc, s->alloc_graph, ids, ids + mms_graph_n_nodes(s->alloc_graph));
    MMS_FREE(ids);
    if (st == MMS_OK) st = mms__galloc_place(s->galloc, s->alloc_graph);
    if (st == MMS_OK) st = mms__sched_publish(s, g);
    if (st != MMS_OK) { mms__sched_drop_fresh(s); return st; }
    (void)mms__sched_same_addresses(s, g);     /* the split graphs are new: none is unchanged */
    s->addrs_computed = false;
    if (s->poison) mms__galloc_fill(s->galloc, 0xff);
    s->allocated = true;
    s->reserved_only = false;
    s->graph_id = mms_graph_id(g);
    mms__sched_remember_graph(s, g);
    if (s->debug) mms__sched_debug_print(s);
    return MMS_OK;
}

/* The graph allocated last, allocated again for another compute with new inputs (a decode step):
   when g is that graph, unchanged in size, and nothing steps 2-5 depend on has changed since (no
   pin set, every leaf goes to the same backend, no kept nodes, one pipeline copy, no callback or
   dump, whose partial graphs live in the scheduler's context until the next split), the splits,
   clones and plan stand. Only what makes earlier results stale is redone, as a full allocation
   does it: the checks of step 1, a new generation of the compute buffers with every tensor
   placed again at its planned offset, and step 6. Otherwise it is a full allocation.
   When every address is also the one its split graphs were last computed at, they are marked
   unchanged (mms_graph_unchanged): a backend may replay what it recorded for them. */
MMS__MAYBE_UNUSED static enum mms_status mms__sched_alloc_again(mms_backend_sched_t s, struct mms_cgraph *g) {
    const char *who = "mms_backend_sched_alloc_graph";
    enum mms_status st;
    bool same;
    int i;
    if (!s || !g) return mms_backend_sched_alloc_graph(s, g);
    same = s->allocated && s->graph == g && s->graph_id == mms_graph_id(g) && mms_graph_status(g) == MMS_OK &&
           mms_graph_n_nodes(g) == s->n_nodes && mms_graph_n_leafs(g) == s->n_leafs && !s->pins_changed && s->n_kept == 0 &&
           s->n_copies == 1 && !s->callback && !s->dump_pattern[0];
    for (i = 0; same && i < s->n_leafs; i++) {
        unsigned char why;
        same = mms__sched_leaf_backend(s, mms_graph_leaf(g, i), &why) == s->leaf_backend[i];
    }
    if (!same) return mms_backend_sched_alloc_graph(s, g);
    s->allocated = false;
    if ((st = mms__sched_check_memory(g, false, who)) != MMS_OK) return st;
    if ((st = mms__galloc_check_reuse(g, who, mms__sched_graph_name, s)) != MMS_OK) return st;
    if ((st = mms__galloc_place(s->galloc, s->alloc_graph)) != MMS_OK) return st;
    if ((st = mms__sched_publish(s, g)) != MMS_OK) return st;
    same = mms__sched_same_addresses(s, g) && s->addrs_computed;
    s->addrs_computed = same;
    for (i = 0; i < s->n_splits; i++) mms__graph_set_unchanged(s->splits[i].graph, same);
    if (s->poison) mms__galloc_fill(s->galloc, 0xff);
    s->allocated = true;
    s->n_again++;
    if (s->debug) mms__sched_debug_print(s);
    return MMS_OK;
}

static bool mms__sched_wants(mms_backend_sched_t s, struct mms_tensor *orig) {
    if (s->dump_pattern[0] && mms__glob_match(s->dump_pattern, orig->name)) return true;
    return s->callback && s->callback(orig, true, s->callback_user);
}

/* Runs one split's graph, stopping after each node a callback or a dump asks for. */
static enum mms_status mms__sched_run_split(mms_backend_sched_t s, struct mms__sched_split *sp) {
    mms_backend_t b = s->backends[sp->backend];
    const int n = mms_graph_n_nodes(sp->graph);
    int j = 0, k;
    enum mms_status st;
    if (!s->callback && !s->dump_pattern[0]) return mms_backend_graph_compute_async(b, sp->graph);
    while (j < n) {
        struct mms_cgraph *part;
        struct mms_tensor **nodes = (struct mms_tensor **)MMS_MALLOC(sizeof *nodes * (size_t)n);
        bool wanted = false;
        if (!nodes) return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory");
        for (k = j; k < n; k++) {
            nodes[k - j] = mms_graph_node(sp->graph, k);
            if ((wanted = mms__sched_wants(s, sp->originals[k])) != false) break;
        }
        if (k == n) k = n - 1;
        part = mms__graph_from_lists(s->ctx, nodes, k - j + 1, NULL, 0);
        MMS_FREE(nodes);
        if (!part) return mms_ctx_status(s->ctx);
        if ((st = mms_backend_graph_compute_async(b, part)) != MMS_OK) return st;
        if (wanted) {
            struct mms_tensor *orig = sp->originals[k];
            if ((st = mms_backend_synchronize(b)) != MMS_OK) return st;
            if (s->dump_pattern[0] && mms__glob_match(s->dump_pattern, orig->name) &&
                (st = mms__sched_dump(s, orig, mms__sched_pos(s, orig) - 1)) != MMS_OK) return st;
            if (s->callback && !s->callback(orig, false, s->callback_user))
                return mms_set_error(MMS_ABORTED, "mms_backend_sched: the eval callback stopped the graph after %s", mms__tensor_desc(orig).s);
        }
        j = k + 1;
    }
    return MMS_OK;
}

/* After the splits ran: every node wrote its memory, and each kept node is now what its leafs
   (at their versions now) give. */
static enum mms_status mms__sched_computed(mms_backend_sched_t s) {
    enum mms_status st;
    int i;
    for (i = 0; i < s->n_nodes; i++) {
        struct mms_tensor *t = mms_graph_node(s->graph, i);
        if (!mms_op_is_view(t->op)) mms__tensor_written(t);
    }
    for (i = 0; i < s->n_kept; i++) {
        const struct mms__sched_kept *k = &s->kept[i];
        st = mms__provenance_record(mms_graph_node(s->graph, k->node), s->kept_leafs + k->first_leaf, k->n_leafs, s->graph_id);
        if (st != MMS_OK) return st;
    }
    return MMS_OK;
}

static enum mms_status mms__sched_compute_splits(mms_backend_sched_t s) {
    int k, j, i;
    enum mms_status st;
    s->addrs_computed = true;                    /* what a backend records now, it records at these addresses */
    for (i = 0; i < s->n_leafs; i++) {           /* weights, kept tensors, inputs: all still valid and up to date? */
        struct mms_tensor *t = mms_graph_leaf(s->graph, i);
        if (mms_nelements(t) > 0 && (st = mms__tensor_check_read(t, "mms_backend_sched_graph_compute")) != MMS_OK) return st;
    }
    for (k = 0; k < s->n_splits; k++) {
        struct mms__sched_split *sp = &s->splits[k];
        mms_backend_t b = s->backends[sp->backend];
        mms_backend_event_t done;
        for (j = sp->first_input; j < sp->first_input + sp->n_inputs; j++) {
            struct mms__sched_input *in = &s->inputs[j];
            struct mms_tensor *copy = in->copies[s->cur_copy];
            bool user_input = mms__sched_pos(s, in->src) < 0 && !mms__sched_has_fixed_memory(in->src);
            if (user_input) {
                /* set by the caller, complete now: queued on b in order with its work, no wait (CUDA
                   stages pageable memory before the call returns; see the manual, section 8) */
                st = mms_backend_tensor_copy_async(s->backends[in->src_backend], b, in->src, copy);
            } else {
                mms_backend_t src_b = s->backends[in->src_backend];
                mms_backend_event_t ev = s->events[in->src_backend * s->n_copies + s->cur_copy];
                st = ev ? mms_backend_event_wait(b, ev) : mms_backend_synchronize(src_b);
                if (st == MMS_OK) st = mms_backend_tensor_copy_async(src_b, b, in->src, copy);
            }
            if (st != MMS_OK) return st;
        }
        if ((st = mms__sched_run_split(s, sp)) != MMS_OK) return st;
        done = s->events[sp->backend * s->n_copies + s->cur_copy];
        if (done && (st = mms_backend_event_record(done)) != MMS_OK) return st;
    }
    return mms__sched_computed(s);
}

MMS_API enum mms_status mms_backend_sched_graph_compute_async(mms_backend_sched_t s, struct mms_cgraph *g) {
    enum mms_status st;
    if (!s || !g) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_graph_compute: scheduler and graph are required");
    if (!s->allocated && (st = mms_backend_sched_alloc_graph(s, g)) != MMS_OK) return st;
    if (mms_graph_id(g) != s->graph_id)
        return mms_set_error(MMS_ERR_STATE, "mms_backend_sched_graph_compute: graph #%llu%s%s%s was passed, but graph #%llu is the one "
                             "allocated: call mms_backend_sched_alloc_graph for it first (or mms_backend_sched_reset)",
                             (unsigned long long)mms_graph_id(g), mms_graph_get_name(g)[0] ? " '" : "", mms_graph_get_name(g),
                             mms_graph_get_name(g)[0] ? "'" : "", (unsigned long long)s->graph_id);
    if (mms_graph_n_nodes(g) != s->n_nodes || mms_graph_n_leafs(g) != s->n_leafs)
        return mms_set_error(MMS_ERR_STATE, "mms_backend_sched_graph_compute: graph #%llu changed since it was allocated (%d nodes, "
                             "now %d): allocate it again", (unsigned long long)s->graph_id, s->n_nodes, mms_graph_n_nodes(g));
    return mms__sched_compute_splits(s);
}

MMS_API enum mms_status mms_backend_sched_synchronize(mms_backend_sched_t s) {
    int i;
    enum mms_status st;
    if (!s) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_synchronize: scheduler is NULL");
    for (i = 0; i < s->n_backends; i++) if ((st = mms_backend_synchronize(s->backends[i])) != MMS_OK) return st;
    return MMS_OK;
}

MMS_API enum mms_status mms_backend_sched_graph_compute(mms_backend_sched_t s, struct mms_cgraph *g) {
    enum mms_status st = mms_backend_sched_graph_compute_async(s, g);
    enum mms_status sy = s ? mms_backend_sched_synchronize(s) : MMS_OK;
    return st != MMS_OK ? st : sy;
}

MMS_API void mms_backend_sched_reset(mms_backend_sched_t s) {
    if (!s) return;
    s->allocated = false;
    s->graph_id = 0;
    mms__ptrmap_free(&s->pins);
    mms__galloc_reset(s->galloc);
}

/* -- pins, persistent tensors, queries -- */

MMS_API enum mms_status mms_backend_sched_set_tensor_backend(mms_backend_sched_t s, struct mms_tensor *t, mms_backend_t backend) {
    int b;
    if (!s || !t) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_set_tensor_backend: scheduler and tensor are required");
    b = mms__sched_backend_index(s, backend);
    if (b < 0) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_set_tensor_backend: backend %s is not one of the scheduler's",
                                    mms_backend_name(backend));
    if (!mms__ptrmap_put(&s->pins, (uint64_t)(uintptr_t)t, (void *)(intptr_t)(b + 1)))
        return mms_set_error(MMS_ERR_OOM, "mms_backend_sched_set_tensor_backend: out of host memory");
    s->pins_changed = true;
    return MMS_OK;
}

MMS_API mms_backend_t mms_backend_sched_get_tensor_backend(mms_backend_sched_t s, const struct mms_tensor *t) {
    int b;
    if (!s || !t) return NULL;
    b = (int)(intptr_t)mms__ptrmap_get(&s->pins, (uint64_t)(uintptr_t)t, NULL) - 1;
    if (b < 0 && s->graph) b = mms__sched_backend_of(s, t);
    if (b < 0 && mms__sched_has_fixed_memory(t)) b = mms__sched_backend_for_buft(s, mms__sched_buft_of(t));
    return b >= 0 ? s->backends[b] : NULL;
}

MMS_API void mms_backend_sched_set_eval_callback(mms_backend_sched_t s, mms_backend_sched_eval_callback cb, void *user) {
    if (!s) return;
    s->callback = cb;
    s->callback_user = user;
}

/* For layers above that chain their own callback in front of the caller's. */
MMS__MAYBE_UNUSED static void mms__sched_get_eval_callback(mms_backend_sched_t s, mms_backend_sched_eval_callback *cb, void **user) {
    *cb = s->callback;
    *user = s->callback_user;
}

MMS_API enum mms_status mms_backend_sched_release(mms_backend_sched_t s, struct mms_tensor *t) {
    int i;
    if (!s || !t) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_release: scheduler and tensor are required");
    for (i = 0; i < s->n_persist; i++) {
        if (s->persist[i].tensor != t) continue;
        mms_backend_buffer_free(s->persist[i].buffer);
        s->persist[i] = s->persist[--s->n_persist];   /* its provenance stays: what was computed from it keeps its own */
        return MMS_OK;
    }
    return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_release: %s is not a persistent tensor of this scheduler "
                         "(mark it with mms_set_persistent before its graph is allocated)", mms__tensor_desc(t).s);
}

MMS_API int           mms_backend_sched_get_n_backends(mms_backend_sched_t s) { return s ? s->n_backends : 0; }
MMS_API mms_backend_t mms_backend_sched_get_backend(mms_backend_sched_t s, int i) { return s && i >= 0 && i < s->n_backends ? s->backends[i] : NULL; }
MMS_API int           mms_backend_sched_get_n_splits(mms_backend_sched_t s) { return s ? s->n_splits : 0; }
MMS_API int           mms_backend_sched_get_n_copies(mms_backend_sched_t s) { return s ? s->n_copies : 0; }
MMS_API int           mms_backend_sched_get_n_split_inputs(mms_backend_sched_t s) { return s ? s->n_inputs : 0; }
MMS_API int           mms_backend_sched_get_n_reallocs(mms_backend_sched_t s) { return s ? mms_gallocr_get_n_reallocs(s->galloc) : 0; }
MMS_API mms_gallocr_t mms_backend_sched_get_gallocr(mms_backend_sched_t s) { return s ? s->galloc : NULL; }

MMS_API size_t mms_backend_sched_get_buffer_size(mms_backend_sched_t s, mms_backend_t backend) {
    int b = s ? mms__sched_backend_index(s, backend) : -1;
    return b >= 0 ? mms_gallocr_get_buffer_size(s->galloc, b) : 0;
}

MMS_API size_t mms_backend_sched_get_persistent_size(mms_backend_sched_t s, mms_backend_t backend) {
    int b = s ? mms__sched_backend_index(s, backend) : -1, i;
    size_t total = 0;
    for (i = 0; b >= 0 && i < s->n_persist; i++) if (s->persist[i].backend == b) total += mms_backend_buffer_get_size(s->persist[i].buffer);
    return total;
}
