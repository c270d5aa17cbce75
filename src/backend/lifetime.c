/* >>lifetime ======================================================================================
   Tensor lifetimes, in one place:
     - placement writes the tensor's record (memory kind from the buffer's usage, buffer uid,
       generation, graph), and nothing else decides what kind of memory a tensor has;
     - mms__memory_of is the one lookup every check goes through: it finds the live buffer through
       the registry (never through t->buffer, which may point at freed memory) and says whether the
       record still holds;
     - writes made through the library count in the tensor's version;
     - a kept (persistent) tensor computed by a scheduler carries its provenance: the leafs it was
       computed from and their versions then; reading it after one of them was written is stale. */

static enum mms_memory_kind mms__memory_kind_of_usage(enum mms_buffer_usage usage) {
    switch (usage) {
        case MMS_BUFFER_USAGE_COMPUTE:    return MMS_MEMORY_COMPUTE;
        case MMS_BUFFER_USAGE_PERSISTENT: return MMS_MEMORY_PERSISTENT;
        case MMS_BUFFER_USAGE_RESERVE:    return MMS_MEMORY_RESERVE;
        case MMS_BUFFER_USAGE_ANY:
        case MMS_BUFFER_USAGE_WEIGHTS:    break;
    }
    return MMS_MEMORY_STATIC;
}

MMS_API const char *mms_memory_kind_name(enum mms_memory_kind kind) {
    switch (kind) {
        case MMS_MEMORY_NONE:       return "none";
        case MMS_MEMORY_HOST:       return "host (context)";
        case MMS_MEMORY_STATIC:     return "static";
        case MMS_MEMORY_COMPUTE:    return "compute";
        case MMS_MEMORY_PERSISTENT: return "persistent";
        case MMS_MEMORY_RESERVE:    return "reserve stand-in";
    }
    return "unknown";
}

MMS_API enum mms_memory_kind mms_tensor_memory_kind(const struct mms_tensor *t) { return t ? t->placement.kind : MMS_MEMORY_NONE; }

/* -- placement -- */

/* b == NULL: host memory of an allocating context. */
static void mms__tensor_place(struct mms_tensor *t, mms_backend_buffer_t b, void *addr, uint64_t graph_id) {
    t->buffer = b;
    t->data = addr;
    t->placement.kind = b ? mms__memory_kind_of_usage(b->usage) : MMS_MEMORY_HOST;
    t->placement.buffer_uid = b ? b->uid : 0;
    t->placement.generation = b ? b->generation : 0;
    t->placement.graph_id = graph_id;
}

static void mms__tensor_unplace(struct mms_tensor *t) {
    t->data = NULL;
    t->buffer = NULL;
    memset(&t->placement, 0, sizeof t->placement);
}

/* Places t at addr in b for graph graph_id (0: none); a RESERVE buffer places without memory. */
static enum mms_status mms__tensor_alloc_for(mms_backend_buffer_t b, struct mms_tensor *t, void *addr, uint64_t graph_id) {
    char *base;
    size_t need;
    if (!b || !t) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_tensor_alloc: buffer and tensor are required");
    if (t->view_src) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_tensor_alloc: %s is a view; use mms_backend_view_init", mms__tensor_desc(t).s);
    if (t->placement.kind != MMS_MEMORY_NONE)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_tensor_alloc: %s already has memory", mms__tensor_desc(t).s);
    if (b->usage == MMS_BUFFER_USAGE_RESERVE) { mms__tensor_place(t, b, NULL, graph_id); return MMS_OK; }
    base = (char *)mms_backend_buffer_get_base(b);
    need = mms_backend_buffer_get_alloc_size(b, t);
    if ((char *)addr < base || (size_t)((char *)addr - base) > b->size || need > b->size - (size_t)((char *)addr - base))
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_tensor_alloc: %s (%zu bytes) does not fit at offset %td of buffer '%s' (%zu bytes)",
                             mms__tensor_desc(t).s, need, (char *)addr - base, mms_backend_buffer_name(b), b->size);
    mms__tensor_place(t, b, addr, graph_id);
    return b->iface.init_tensor ? b->iface.init_tensor(b, t) : MMS_OK;
}

MMS_API enum mms_status mms_backend_tensor_alloc(mms_backend_buffer_t b, struct mms_tensor *t, void *addr) {
    return mms__tensor_alloc_for(b, t, addr, 0);
}

MMS_API enum mms_status mms_backend_view_init(struct mms_tensor *t) {
    const struct mms_tensor *src;
    if (!t || !t->view_src) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_view_init: not a view");
    src = t->view_src;
    if (src->placement.kind == MMS_MEMORY_NONE)
        return mms_set_error(MMS_ERR_STATE, "mms_backend_view_init: the source of view %s has no memory yet", mms__tensor_desc(t).s);
    t->data = src->data ? (char *)src->data + t->view_offs : NULL;
    t->buffer = src->buffer;
    t->placement = src->placement;
    return (t->data && t->buffer && t->buffer->iface.init_tensor) ? t->buffer->iface.init_tensor(t->buffer, t) : MMS_OK;
}

/* -- the one lookup -- */

enum mms__memory_state {
    MMS__MEMORY_LIVE,      /* the record holds */
    MMS__MEMORY_UNPLACED,  /* never placed */
    MMS__MEMORY_FREED,     /* its buffer was freed */
    MMS__MEMORY_REUSED     /* its buffer's memory was handed out again (a newer generation) */
};

struct mms__memory {
    enum mms_memory_kind     kind;     /* from the record, whatever the state */
    enum mms__memory_state   state;
    mms_backend_buffer_t     buffer;   /* the live buffer (LIVE only; NULL for host memory) */
    const struct mms_tensor *culprit;  /* whose record failed: the tensor or its view source */
    uint64_t                 generation_now;   /* REUSED: the buffer's generation now */
};

static enum mms__memory_state mms__record_state(const struct mms_tensor *t, mms_backend_buffer_t *live, uint64_t *generation_now) {
    mms_backend_buffer_t b;
    *live = NULL;
    if (t->placement.kind == MMS_MEMORY_NONE) return MMS__MEMORY_UNPLACED;
    if (t->placement.buffer_uid == 0) return MMS__MEMORY_LIVE;   /* host memory of a context */
    b = mms__live_buffer(t->placement.buffer_uid);
    if (!b) return MMS__MEMORY_FREED;
    *generation_now = b->generation;
    if (b->generation != t->placement.generation) return MMS__MEMORY_REUSED;
    *live = b;
    return MMS__MEMORY_LIVE;
}

/* What t's memory is and whether it still holds; a view holds only if its source does too. */
static struct mms__memory mms__memory_of(const struct mms_tensor *t) {
    struct mms__memory m;
    m.kind = t->placement.kind;
    m.culprit = t;
    m.generation_now = 0;
    m.state = mms__record_state(t, &m.buffer, &m.generation_now);
    if (m.state == MMS__MEMORY_LIVE && t->view_src) {
        mms_backend_buffer_t src_live;
        enum mms__memory_state s = mms__record_state(t->view_src, &src_live, &m.generation_now);
        if (s != MMS__MEMORY_LIVE) { m.state = s; m.culprit = t->view_src; m.buffer = NULL; }
    }
    return m;
}

static bool mms__memory_is_live(const struct mms_tensor *t) { return mms__memory_of(t).state == MMS__MEMORY_LIVE; }

/* The live buffer behind t (NULL for host memory, or when the record does not hold). */
static mms_backend_buffer_t mms__live_buffer_of(const struct mms_tensor *t) { return mms__memory_of(t).buffer; }

/* -- checks -- */

/* Records why t cannot be used as a status and message; logs only when loud. */
static enum mms_status mms__tensor_check_as(const struct mms_tensor *t, const char *who, bool loud) {
    enum mms_status (*fail)(enum mms_status, const char *, ...) = loud ? mms_set_error : mms__error_quiet;
    struct mms__memory m;
    char from[48] = "";
    if (!t) return fail(MMS_ERR_INVALID_ARG, "%s: tensor is NULL", who);
    m = mms__memory_of(t);
    if (m.state == MMS__MEMORY_LIVE && m.kind != MMS_MEMORY_RESERVE) return MMS_OK;   /* checked per tensor per compute: no formatting */
    if (m.culprit->placement.graph_id)
        snprintf(from, sizeof from, " by graph #%llu", (unsigned long long)m.culprit->placement.graph_id);
    switch (m.state) {
        case MMS__MEMORY_UNPLACED:
            return fail(MMS_ERR_STATE, "%s: tensor %s has no memory: allocate it first (mms_backend_alloc_ctx_tensors, a graph "
                        "allocator or a scheduler)", who, mms__tensor_desc(t).s);
        case MMS__MEMORY_FREED:
            return fail(MMS_ERR_STALE, "%s: tensor %s lived in %s memory (placed%s) whose buffer has been freed; it must not be "
                        "used any more (a result kept across graphs must be marked persistent, and not released while in use)",
                        who, mms__tensor_desc(t).s, mms_memory_kind_name(m.kind), from);
        case MMS__MEMORY_REUSED:
            return fail(MMS_ERR_STALE, "%s: tensor %s is stale: it was placed%s in %s memory that has been handed out again "
                        "(placed in generation %llu, the buffer is at %llu). To keep a result across allocations, mark it "
                        "persistent (mms_set_persistent) or copy it out before the next allocation", who, mms__tensor_desc(t).s,
                        from, mms_memory_kind_name(m.kind), (unsigned long long)m.culprit->placement.generation,
                        (unsigned long long)m.generation_now);
        case MMS__MEMORY_LIVE:
            break;
    }
    if (m.kind == MMS_MEMORY_RESERVE)
        return fail(MMS_ERR_STATE, "%s: tensor %s is a planning stand-in (a scheduler's reserve): it has no data", who, mms__tensor_desc(t).s);
    return MMS_OK;
}

static enum mms_status mms__tensor_check(const struct mms_tensor *t, const char *who) { return mms__tensor_check_as(t, who, true); }

/* -- versions and provenance -- */

struct mms__provenance_ref { uint64_t uid, version, n_clears; };

/* One allocation: this header, then n_refs refs (freed with MMS_FREE by the tensor's context).
   It describes the last value computed, and outlives a release of the memory (what was computed
   from that value stays only as fresh as it). */
struct mms__provenance {
    uint64_t graph_id;     /* the graph that computed the kept tensor */
    uint64_t pending;      /* a graph that placed it in new memory and has not computed it yet, or 0 */
    uint64_t checked_at;   /* mms__watched_writes when it was last found up to date */
    int      n_refs;
};

static struct mms__provenance_ref *mms__provenance_refs(struct mms__provenance *p) { return (struct mms__provenance_ref *)(p + 1); }

/* A write through the library: t's memory (its root's, for a view) has new contents. */
static void mms__tensor_written(struct mms_tensor *t) {
    struct mms_tensor *r = t->view_src ? t->view_src : t;
    r->version++;
    if (r->watched) mms__watched_write();
}

/* Clears of the buffer t lives in, which write it too (0 for host memory, UINT64_MAX when t's
   memory is gone: nothing can write it there any more). */
static uint64_t mms__tensor_clears(const struct mms_tensor *t) {
    struct mms__memory m = mms__memory_of(t);
    if (m.state != MMS__MEMORY_LIVE) return UINT64_MAX;
    return m.buffer ? m.buffer->n_clears : 0;
}

/* The caller wrote a kept tensor's data itself: its value no longer comes from its inputs. */
static void mms__provenance_drop(struct mms_tensor *t) {
    struct mms_tensor *r = t->view_src ? t->view_src : t;
    MMS_FREE(r->provenance);
    r->provenance = NULL;
}

/* kept was just computed by graph graph_id from the leafs (roots, no duplicates). */
static enum mms_status mms__provenance_record(struct mms_tensor *kept, struct mms_tensor *const *leafs, int n, uint64_t graph_id) {
    struct mms__provenance *p = (struct mms__provenance *)MMS_MALLOC(sizeof *p + sizeof(struct mms__provenance_ref) * (size_t)n);
    int i;
    if (!p) return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory recording what %s was computed from", mms__tensor_desc(kept).s);
    p->graph_id = graph_id;
    p->pending = 0;
    p->n_refs = n;
    for (i = 0; i < n; i++) {
        mms__tensor_watch(leafs[i]);
        mms__provenance_refs(p)[i].uid = leafs[i]->uid;
        mms__provenance_refs(p)[i].version = leafs[i]->version;
        mms__provenance_refs(p)[i].n_clears = mms__tensor_clears(leafs[i]);
    }
    p->checked_at = mms__watched_writes_now();
    MMS_FREE(kept->provenance);
    kept->provenance = p;
    return MMS_OK;
}

/* Graph graph_id placed kept in new memory, to be computed: reading it before is an error. */
static enum mms_status mms__provenance_pending(struct mms_tensor *kept, uint64_t graph_id) {
    if (!kept->provenance) {
        if (mms__provenance_record(kept, NULL, 0, 0) != MMS_OK) return mms_last_status();
    }
    kept->provenance->pending = graph_id;
    return MMS_OK;
}

/* NULL if kept is up to date with everything it was computed from (recursively, through kept
   tensors it was computed from), else the tensor written since. */
static const struct mms_tensor *mms__provenance_outdated(const struct mms_tensor *kept, int depth) {
    struct mms__provenance *p = kept->provenance;
    uint64_t now;
    int i;
    if (!p) return NULL;
    now = mms__watched_writes_now();
    if (p->checked_at == now) return NULL;
    p->checked_at = now;                        /* optimistic: cycles of kept tensors end here */
    for (i = 0; i < p->n_refs; i++) {
        const struct mms__provenance_ref *r = &mms__provenance_refs(p)[i];
        const struct mms_tensor *in = mms__tensor_find_watched(r->uid), *deeper;
        uint64_t clears;
        if (!in) continue;                      /* its context is gone: it cannot change any more */
        clears = mms__tensor_clears(in);
        if (in->version != r->version || (clears != UINT64_MAX && clears != r->n_clears)) { p->checked_at = 0; return in; }
        if (depth < 64 && (deeper = mms__provenance_outdated(in, depth + 1)) != NULL) { p->checked_at = 0; return deeper; }
    }
    return NULL;
}

/* The check before t is read: its memory holds and, if it is a kept tensor, its value is up to date. */
static enum mms_status mms__tensor_check_read_as(const struct mms_tensor *t, const char *who, bool loud) {
    enum mms_status (*fail)(enum mms_status, const char *, ...) = loud ? mms_set_error : mms__error_quiet;
    const struct mms_tensor *root, *changed;
    enum mms_status st = mms__tensor_check_as(t, who, loud);
    if (st != MMS_OK) return st;
    root = t->view_src ? t->view_src : t;
    if (!root->provenance) return MMS_OK;
    if (root->provenance->pending)
        return fail(MMS_ERR_STATE, "%s: kept tensor %s has memory from graph #%llu, which has not computed it yet: compute that graph "
                    "before using it", who, mms__tensor_desc(root).s, (unsigned long long)root->provenance->pending);
    if ((changed = mms__provenance_outdated(root, 0)) == NULL) return MMS_OK;
    return fail(MMS_ERR_STALE, "%s: kept tensor %s is out of date: graph #%llu computed it from %s, which has been written since. "
                "Compute it again (a graph that expands it recomputes it into its kept memory) or release it",
                who, mms__tensor_desc(root).s, (unsigned long long)root->provenance->graph_id, mms__tensor_desc(changed).s);
}

static enum mms_status mms__tensor_check_read(const struct mms_tensor *t, const char *who) { return mms__tensor_check_read_as(t, who, true); }

MMS_API enum mms_status mms_backend_tensor_check(const struct mms_tensor *t) {
    return mms__tensor_check_read_as(t, "mms_backend_tensor_check", false);
}

/* -- the reserve buffer: stand-ins that are planned around but never hold data -- */

static const char *mms__reserve_buft_name(mms_backend_buffer_type_t buft) { (void)buft; return "reserve (no memory)"; }
static size_t mms__reserve_buft_alignment(mms_backend_buffer_type_t buft) { (void)buft; return 1; }
static void *mms__reserve_base(mms_backend_buffer_t b) { (void)b; return NULL; }
static enum mms_status mms__reserve_refuse(void) { return mms_set_error(MMS_ERR_STATE, "a planning stand-in has no data"); }
static enum mms_status mms__reserve_memset(mms_backend_buffer_t b, struct mms_tensor *t, uint8_t v, size_t o, size_t n) { (void)b; (void)t; (void)v; (void)o; (void)n; return mms__reserve_refuse(); }
static enum mms_status mms__reserve_set(mms_backend_buffer_t b, struct mms_tensor *t, const void *d, size_t o, size_t n) { (void)b; (void)t; (void)d; (void)o; (void)n; return mms__reserve_refuse(); }
static enum mms_status mms__reserve_get(mms_backend_buffer_t b, const struct mms_tensor *t, void *d, size_t o, size_t n) { (void)b; (void)t; (void)d; (void)o; (void)n; return mms__reserve_refuse(); }
static enum mms_status mms__reserve_clear(mms_backend_buffer_t b, uint8_t v) { (void)b; (void)v; return MMS_OK; }
static mms_backend_buffer_t mms__reserve_alloc(mms_backend_buffer_type_t buft, size_t size);

static struct mms_backend_buffer_type mms__reserve_buft = {
    { mms__reserve_buft_name, mms__reserve_alloc, mms__reserve_buft_alignment, NULL, NULL, NULL }, NULL
};

static mms_backend_buffer_t mms__reserve_alloc(mms_backend_buffer_type_t buft, size_t size) {
    struct mms_backend_buffer_i i;
    mms_backend_buffer_t b;
    memset(&i, 0, sizeof i);
    i.get_base = mms__reserve_base;
    i.memset_tensor = mms__reserve_memset;
    i.set_tensor = mms__reserve_set;
    i.get_tensor = mms__reserve_get;
    i.clear = mms__reserve_clear;
    b = mms_backend_buffer_init(buft, i, NULL, size);
    if (b) b->usage = MMS_BUFFER_USAGE_RESERVE;
    return b;
}

/* A buffer whose tensors are stand-ins: placed (so planners leave them alone), without data. */
static mms_backend_buffer_t mms__reserve_buffer_new(void) { return mms__reserve_alloc(&mms__reserve_buft, 0); }
