/* >>sched =========================================================================================
   The multi-backend scheduler. For each graph it
     1. assigns a backend to every tensor (pins, memory, weights, offload, spreading, fallback);
     2. cuts the nodes into splits of one backend each and lists, per split, the tensors it reads
        from memory its backend cannot use (they are copied in before the split runs);
     3. clones the caller's nodes into its own context with sources rewired to those copies, and
        plans one allocation graph (copies and clones, one buffer per backend) with its gallocr;
     4. places persistent tensors in buffers of their own, then copies every clone's placement back
        to the caller's tensor, so results are read from the caller's tensors as usual.
   The caller's graph is never rewired. Compute runs the splits in order, copying inputs first. */

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

struct mms__sched_persist {
    struct mms_tensor   *tensor;
    mms_backend_buffer_t buffer;
    int                  backend;
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
    int                        n_nodes, n_leafs;
    struct mms__ptrmap         pos;                 /* tensor -> node index + 1, or -(leaf index + 1) */
    int                       *node_backend, *leaf_backend;
    unsigned char             *node_why, *leaf_why;
    struct mms_tensor        **clones;              /* per node */
    struct mms_tensor        **leaf_clones;         /* per leaf: a placeholder for a kept tensor not made yet (reserve) */
    int                        cap_nodes, cap_leafs;
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

    struct { uint64_t id; char name[MMS_MAX_NAME]; } recent[8];   /* names of graphs allocated lately, for messages */
    int                        n_recent;
};

static char mms__sched_placeholder;   /* stands for persistent memory not yet given (reserve only) */

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
    if (!s->galloc) { mms_backend_sched_free(s); return NULL; }

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
    for (i = 0; s->events && i < s->n_backends * s->n_copies; i++) mms_backend_event_free(s->events[i]);
    for (i = 0; i < s->n_splits; i++) MMS_FREE(s->splits[i].originals);
    mms_gallocr_free(s->galloc);
    mms_free(s->ctx);
    mms__ptrmap_free(&s->pins);
    mms__ptrmap_free(&s->pos);
    MMS_FREE(s->backends); MMS_FREE(s->bufts); MMS_FREE(s->events);
    MMS_FREE(s->node_backend); MMS_FREE(s->leaf_backend); MMS_FREE(s->node_why); MMS_FREE(s->leaf_why);
    MMS_FREE(s->clones); MMS_FREE(s->leaf_clones); MMS_FREE(s->splits); MMS_FREE(s->inputs); MMS_FREE(s->persist);
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

/* Memory the scheduler does not hand out again: weights, static buffers, persistent tensors. */
static bool mms__sched_has_fixed_memory(mms_backend_sched_t s, const struct mms_tensor *t) {
    return t->data && t->data != &mms__sched_placeholder && !mms__galloc_owns(s->galloc, t->buffer) && !mms__tensor_is_transient(t);
}

static mms_backend_buffer_type_t mms__sched_buft_of(const struct mms_tensor *t) {
    return t->buffer ? t->buffer->buft : mms_backend_cpu_buffer_type();
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

/* -- 1. backends -- */

static enum mms_status mms__sched_assign_leafs(mms_backend_sched_t s, struct mms_cgraph *g) {
    int i;
    for (i = 0; i < s->n_leafs; i++) {
        struct mms_tensor *t = mms_graph_leaf(g, i);
        int pin = (int)(intptr_t)mms__ptrmap_get(&s->pins, (uint64_t)(uintptr_t)t, NULL) - 1;
        int b;
        if (mms__sched_has_fixed_memory(s, t)) {
            b = mms__sched_backend_for_buft(s, mms__sched_buft_of(t));
            if (b < 0)
                return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched: tensor %s lives in '%s' memory that none of the "
                                     "scheduler's backends can use", mms__tensor_desc(t).s, mms_backend_buft_name(mms__sched_buft_of(t)));
            s->leaf_why[i] = MMS__WHY_MEMORY;
        } else if (pin >= 0) {
            b = pin;
            s->leaf_why[i] = MMS__WHY_PIN;
        } else {
            b = s->n_backends - 1;   /* inputs are set from the host: the last backend, as in ggml */
            s->leaf_why[i] = MMS__WHY_INPUT;
        }
        s->leaf_backend[i] = b;
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
        if (t->view_src ? mms__sched_has_fixed_memory(s, t->view_src) : mms__sched_has_fixed_memory(s, t)) {
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
            int wb, b;
            if (!w || !w->buffer || w->buffer->usage != MMS_BUFFER_USAGE_WEIGHTS) continue;
            wb = mms__sched_backend_for_buft(s, w->buffer->buft);
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

/* -- 2. splits and their inputs -- */

/* Must a split on backend b copy src in first? */
static bool mms__sched_needs_copy(mms_backend_sched_t s, int b, const struct mms_tensor *src) {
    int owner = mms__sched_backend_of(s, src);
    const struct mms_tensor *root = src->view_src ? src->view_src : src;
    if (owner < 0 || owner == b) return false;
    return !mms_backend_supports_buft(s->backends[b], mms__sched_has_fixed_memory(s, root) ? mms__sched_buft_of(root) : s->bufts[owner]);
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

/* -- 3. clones, copies and the allocation graph -- */

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

/* Places a persistent node in a buffer of its own on its backend (allocation only; a reserve
   lets it stand aside with a placeholder). */
static enum mms_status mms__sched_place_persistent(mms_backend_sched_t s, struct mms_tensor *t, int b, bool reserve, uint64_t graph_id) {
    struct mms__sched_persist *p;
    mms_backend_buffer_t buf;
    enum mms_status st;
    if (reserve) return MMS_OK;
    if (mms__sched_has_fixed_memory(s, t)) return MMS_OK;   /* kept already */
    buf = mms_backend_buft_alloc_buffer(s->bufts[b], mms_backend_buft_get_alloc_size(s->bufts[b], t));
    if (!buf) return mms_set_error(mms_last_status(), "mms_backend_sched: cannot allocate persistent tensor %s on %s: %s",
                                   mms__tensor_desc(t).s, mms_backend_name(s->backends[b]), mms_last_error());
    t->data = NULL;
    t->buffer = NULL;
    if ((st = mms_backend_tensor_alloc(buf, t, mms_backend_buffer_get_base(buf))) != MMS_OK) { mms_backend_buffer_free(buf); return st; }
    t->graph_id = graph_id;
    if (!mms__grow((void **)&s->persist, &s->cap_persist, s->n_persist + 1, sizeof *s->persist)) {
        mms_backend_buffer_free(buf);
        return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory");
    }
    p = &s->persist[s->n_persist++];
    p->tensor = t;
    p->buffer = buf;
    p->backend = b;
    return MMS_OK;
}

static enum mms_status mms__sched_build(mms_backend_sched_t s, struct mms_cgraph *g, bool reserve, int **node_ids_out) {
    struct mms_tensor **nodes = NULL, **leafs = NULL;
    int *ids = NULL, n = 0, cap = s->n_nodes + s->n_inputs * s->n_copies + 1, i, j, k, c;
    enum mms_status st = MMS_OK;

    nodes = (struct mms_tensor **)MMS_MALLOC(sizeof *nodes * (size_t)cap);
    ids = (int *)MMS_MALLOC(sizeof *ids * (size_t)(cap + s->n_leafs + 1));
    leafs = (struct mms_tensor **)MMS_MALLOC(sizeof *leafs * (size_t)(s->n_leafs + 1));
    if (!nodes || !ids || !leafs) { st = mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory"); goto fail; }

    /* a kept tensor that no graph has computed yet: a placeholder when reserving, else an error */
    for (i = 0; i < s->n_leafs; i++) {
        struct mms_tensor *t = mms_graph_leaf(g, i);
        s->leaf_clones[i] = NULL;
        if (!(t->flags & MMS_TENSOR_FLAG_PERSISTENT) || t->view_src || mms__sched_has_fixed_memory(s, t)) continue;
        if (!reserve) {
            st = mms_set_error(MMS_ERR_STATE, "mms_backend_sched_alloc_graph: persistent tensor %s is an input of graph #%llu, but no "
                               "graph has computed it yet", mms__tensor_desc(t).s, (unsigned long long)mms_graph_id(g));
            goto fail;
        }
        if (!(s->leaf_clones[i] = mms__new_tensor_impl(s->ctx, "mms_backend_sched", t->type, MMS_MAX_DIMS, t->ne, NULL, 0))) {
            st = mms_get_status(s->ctx);
            goto fail;
        }
        *s->leaf_clones[i] = *t;
        s->leaf_clones[i]->data = &mms__sched_placeholder;
        s->leaf_clones[i]->buffer = NULL;
    }

    for (k = 0; k < s->n_splits; k++) {
        struct mms__sched_split *sp = &s->splits[k];
        for (j = sp->first_input; j < sp->first_input + sp->n_inputs; j++) {
            struct mms__sched_input *in = &s->inputs[j];
            for (c = 0; c < s->n_copies; c++) {
                struct mms_tensor *cp = mms__new_tensor_impl(s->ctx, "mms_backend_sched", in->src->type, MMS_MAX_DIMS, in->src->ne, NULL, 0);
                if (!cp) { st = mms_get_status(s->ctx); goto fail; }
                memcpy(cp->nb, in->src->nb, sizeof cp->nb);   /* same layout: the copy is a byte copy */
                cp->op = MMS_OP_DUP;
                /* keeps the source alive until copied; a view's own clone may come later in this
                   split, so a copy of a view depends on the view's source (a leaf or an earlier split) */
                cp->src[0] = mms__sched_mapped(s, in->src->view_src ? in->src->view_src : in->src);
                if (s->n_copies > 1) cp->flags = MMS_TENSOR_FLAG_INPUT | MMS_TENSOR_FLAG_OUTPUT;
                mms_format_name(cp, "%s#%.40s#%d", mms_backend_name(s->backends[sp->backend]), in->src->name, c);
                in->copies[c] = cp;
                ids[n] = sp->backend;
                nodes[n++] = cp;
            }
        }
        for (i = sp->i0; i < sp->i1; i++) {
            struct mms_tensor *orig = mms_graph_node(g, i);
            struct mms_tensor *cl = mms__new_tensor_impl(s->ctx, "mms_backend_sched", orig->type, MMS_MAX_DIMS, orig->ne, NULL, 0);
            if (!cl) { st = mms_get_status(s->ctx); goto fail; }
            *cl = *orig;
            for (j = 0; j < MMS_MAX_SRC; j++) {
                struct mms_tensor *cp = orig->src[j] && !mms_op_is_view(orig->op) ? mms__sched_input_copy(s, k, orig->src[j]) : NULL;
                cl->src[j] = cp ? cp : orig->src[j] ? mms__sched_mapped(s, orig->src[j]) : NULL;
            }
            if (orig->view_src) cl->view_src = mms__sched_mapped(s, orig->view_src);
            if ((orig->flags & MMS_TENSOR_FLAG_PERSISTENT) && !orig->view_src) {
                if ((st = mms__sched_place_persistent(s, orig, s->node_backend[i], reserve, mms_graph_id(g))) != MMS_OK) goto fail;
                if (reserve && !mms__sched_has_fixed_memory(s, orig)) { cl->data = &mms__sched_placeholder; cl->buffer = NULL; }
                else { cl->data = orig->data; cl->buffer = orig->buffer; cl->buffer_uid = orig->buffer_uid; cl->generation = orig->generation; }
            } else if (orig->view_src || !mms__sched_has_fixed_memory(s, orig)) {
                cl->data = NULL;                           /* planned (or, for views, given) by the gallocr */
                cl->buffer = NULL;
                cl->buffer_uid = cl->generation = cl->graph_id = 0;
            }
            s->clones[i] = cl;
            ids[n] = s->node_backend[i];
            nodes[n++] = cl;
        }
    }
    for (i = 0; i < s->n_leafs; i++) { leafs[i] = mms__sched_mapped(s, mms_graph_leaf(g, i)); ids[n + i] = s->leaf_backend[i]; }
    s->alloc_graph = mms__graph_from_lists(s->ctx, nodes, n, leafs, s->n_leafs);
    if (!s->alloc_graph || mms_graph_status(s->alloc_graph) != MMS_OK) { st = mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory"); goto fail; }
    MMS_FREE(nodes);
    MMS_FREE(leafs);
    *node_ids_out = ids;
    return MMS_OK;
fail:
    MMS_FREE(nodes);
    MMS_FREE(leafs);
    MMS_FREE(ids);
    return st;
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
        if (!sp->graph) return mms_get_status(s->ctx);
    }
    return MMS_OK;
}

/* Memory the graph relies on (weights, kept tensors, caches) must still be there: checked through
   the registry of live buffers before anything looks at a tensor's buffer. */
static enum mms_status mms__sched_check_memory(mms_backend_sched_t s, struct mms_cgraph *g, const char *who) {
    int i, n = mms_graph_n_leafs(g) + mms_graph_n_nodes(g);
    for (i = 0; i < n; i++) {
        const struct mms_tensor *t = mms__slot_tensor(g, i);
        const struct mms_tensor *m = t->view_src ? t->view_src : t;
        enum mms_status st;
        if (!mms__sched_has_fixed_memory(s, m)) continue;
        if ((st = mms__tensor_check(m, who)) != MMS_OK) return st;
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

/* Steps 1-3 for graph g: afterwards alloc_graph and the ids are ready for the gallocr. */
static enum mms_status mms__sched_split_graph(mms_backend_sched_t s, struct mms_cgraph *g, bool reserve, int **ids) {
    enum mms_status st;
    int i;
    if (!g) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched: graph is NULL");
    if (mms_graph_status(g) != MMS_OK)
        return mms_set_error(MMS_ERR_STATE, "mms_backend_sched: the graph was not built correctly: %s", mms_graph_error(g));
    if ((st = mms__sched_check_memory(s, g, reserve ? "mms_backend_sched_reserve" : "mms_backend_sched_alloc_graph")) != MMS_OK) return st;
    if (!reserve && (st = mms__galloc_check_reuse(s->galloc, g, "mms_backend_sched_alloc_graph", mms__sched_graph_name, s)) != MMS_OK) return st;
    s->allocated = false;
    s->graph = g;
    s->n_nodes = mms_graph_n_nodes(g);
    s->n_leafs = mms_graph_n_leafs(g);
    for (i = 0; i < s->n_splits; i++) { MMS_FREE(s->splits[i].originals); s->splits[i].originals = NULL; }
    mms_reset(s->ctx);
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
    if ((st = mms__sched_assign(s, g)) != MMS_OK) return st;
    if ((st = mms__sched_make_splits(s, g)) != MMS_OK) return st;
    if ((st = mms__sched_build(s, g, reserve, ids)) != MMS_OK) return st;
    return mms__sched_split_graphs(s);
oom:
    return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory");
}

/* -- public: reserve, alloc, compute -- */

MMS_API enum mms_status mms_backend_sched_reserve(mms_backend_sched_t s, struct mms_cgraph *g) {
    enum mms_status st;
    int *ids = NULL;
    if (!s) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_reserve: scheduler is NULL");
    st = mms__sched_split_graph(s, g, true, &ids);
    if (st == MMS_OK) st = mms_gallocr_reserve_n(s->galloc, s->alloc_graph, ids, ids + mms_graph_n_nodes(s->alloc_graph));
    MMS_FREE(ids);
    s->reserved_only = true;
    if (st == MMS_OK && s->debug) mms__sched_debug_print(s);
    return st;
}

MMS_API enum mms_status mms_backend_sched_alloc_graph(mms_backend_sched_t s, struct mms_cgraph *g) {
    enum mms_status st;
    int *ids = NULL, i, id, c;
    if (!s) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_alloc_graph: scheduler is NULL");
    s->cur_copy = (s->cur_copy + 1) % s->n_copies;
    st = mms__sched_split_graph(s, g, false, &ids);
    if (st == MMS_OK && !mms__galloc_plan_fits(s->galloc, s->alloc_graph))
        st = mms_gallocr_reserve_n(s->galloc, s->alloc_graph, ids, ids + mms_graph_n_nodes(s->alloc_graph));
    MMS_FREE(ids);
    if (st == MMS_OK) st = mms_gallocr_alloc_graph(s->galloc, s->alloc_graph);
    if (st != MMS_OK) return st;

    /* the caller's tensors take the clones' placement: results are read from them */
    for (i = 0; i < s->n_nodes; i++) {
        struct mms_tensor *orig = mms_graph_node(g, i), *cl = s->clones[i];
        orig->data = cl->data;
        orig->buffer = cl->buffer;
        orig->buffer_uid = cl->buffer_uid;
        orig->generation = cl->generation;
        orig->graph_id = mms_graph_id(g);
    }
    for (i = 0; i < s->n_leafs; i++) {
        struct mms_tensor *t = mms_graph_leaf(g, i);
        if (t->data && mms__galloc_owns(s->galloc, t->buffer)) t->graph_id = mms_graph_id(g);
    }
    if (s->poison)
        for (id = 0; id < s->n_backends; id++)
            for (c = 0; c < s->galloc->bufs[id].n_chunks; c++) mms_backend_buffer_clear(s->galloc->bufs[id].chunks[c], 0xff);
    s->allocated = true;
    s->reserved_only = false;
    s->graph_id = mms_graph_id(g);
    mms__sched_remember_graph(s, g);
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
        if (!part) return mms_get_status(s->ctx);
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

static enum mms_status mms__sched_compute_splits(mms_backend_sched_t s) {
    int k, j, i;
    enum mms_status st;
    for (i = 0; i < s->n_leafs; i++) {           /* weights, persistent tensors, inputs: all still valid? */
        struct mms_tensor *t = mms_graph_leaf(s->graph, i);
        if (mms_nelements(t) > 0 && (st = mms__tensor_check(t, "mms_backend_sched_graph_compute")) != MMS_OK) return st;
    }
    for (k = 0; k < s->n_splits; k++) {
        struct mms__sched_split *sp = &s->splits[k];
        mms_backend_t b = s->backends[sp->backend];
        mms_backend_event_t done;
        for (j = sp->first_input; j < sp->first_input + sp->n_inputs; j++) {
            struct mms__sched_input *in = &s->inputs[j];
            struct mms_tensor *copy = in->copies[s->cur_copy];
            bool user_input = mms__sched_pos(s, in->src) < 0 && !mms__sched_has_fixed_memory(s, in->src);
            if (user_input) {
                st = mms_backend_tensor_copy(in->src, copy);   /* set by the caller on the host: copy now */
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
    return MMS_OK;
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
    int id, c;
    if (!s) return;
    s->allocated = false;
    s->graph_id = 0;
    mms__ptrmap_free(&s->pins);
    for (id = 0; id < s->n_backends; id++)
        for (c = 0; c < s->galloc->bufs[id].n_chunks; c++) mms_backend_buffer_reset(s->galloc->bufs[id].chunks[c]);
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
    return MMS_OK;
}

MMS_API mms_backend_t mms_backend_sched_get_tensor_backend(mms_backend_sched_t s, const struct mms_tensor *t) {
    int b;
    if (!s || !t) return NULL;
    b = (int)(intptr_t)mms__ptrmap_get(&s->pins, (uint64_t)(uintptr_t)t, NULL) - 1;
    if (b < 0 && s->graph) b = mms__sched_backend_of(s, t);
    if (b < 0 && t->data && t->data != &mms__sched_placeholder) b = mms__sched_backend_for_buft(s, mms__sched_buft_of(t));
    return b >= 0 ? s->backends[b] : NULL;
}

MMS_API void mms_backend_sched_set_eval_callback(mms_backend_sched_t s, mms_backend_sched_eval_callback cb, void *user) {
    if (!s) return;
    s->callback = cb;
    s->callback_user = user;
}

/* For layers above that chain their own callback in front of the caller's. */
static void mms__sched_get_eval_callback(mms_backend_sched_t s, mms_backend_sched_eval_callback *cb, void **user) {
    *cb = s->callback;
    *user = s->callback_user;
}

MMS_API enum mms_status mms_backend_sched_release(mms_backend_sched_t s, struct mms_tensor *t) {
    int i;
    if (!s || !t) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_release: scheduler and tensor are required");
    for (i = 0; i < s->n_persist; i++) {
        if (s->persist[i].tensor != t) continue;
        mms_backend_buffer_free(s->persist[i].buffer);
        s->persist[i] = s->persist[--s->n_persist];
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
