/* >>alloc =========================================================================================
   The graph allocator. A plan is computed from the graph alone:
     1. lifetimes: every graph tensor ("slot": leafs first, then nodes) gets the step of its
        producer and of its last consumer, through views; outputs, persistent tensors and (by
        default) inputs live to the end;
     2. blocks: each planned tensor gets a block of memory, except that an op of the in-place
        whitelist may continue the block of a dead source of the same layout;
     3. placement: per buffer, inputs go to the bottom, then several orderings of the remaining
        blocks are placed at the lowest (or best-fitting) offset free during their lifetime; the
        smallest result wins. A buffer type's maximum size splits a buffer into chunks.
   alloc_graph then allocates the buffers (growing, never shrinking), starts a new generation of
   each and places the tensors. */

struct mms__gsig {                 /* what a plan depends on, per slot; compared with memcmp */
    int32_t  op, type, flags, needs_alloc, buffer_id, pad;
    int64_t  ne[MMS_MAX_DIMS];
    uint64_t nb[MMS_MAX_DIMS], view_offs;
    int32_t  src[MMS_MAX_SRC];     /* slot + 1 of each source, 0 for none */
};

struct mms__gblock {
    size_t size;
    int    first, last;            /* steps, -1 .. n_nodes - 1 */
    int    buffer_id;
    int    owner;                  /* the slot whose memory it is now (the last in-place taker) */
    bool   input;                  /* placed at the bottom, before the rest */
    int    chunk;
    size_t offset;
};

struct mms__gbuf {
    mms_backend_buffer_type_t       buft;
    mms_backend_buffer_t           *chunks;        /* allocated buffers, one per chunk */
    int                             n_chunks;      /* allocated */
    size_t                         *planned;       /* planned bytes per chunk */
    int                             n_planned;
    struct mms_gallocr_buffer_info  info;
};

struct mms_gallocr {
    int               n_bufs;
    struct mms__gbuf *bufs;
    bool              inputs_reusable;
    bool              inplace;

    /* the plan */
    bool                 have_plan;
    int                  n_leafs, n_nodes;
    struct mms__gsig    *sig;          /* per slot */
    int                 *slot_block;   /* per slot: block index or -1 */
    int                 *slot_first, *slot_last, *slot_inplace_of;
    struct mms__gblock  *blocks;
    int                  n_blocks;
    struct mms_gallocr_tensor_info *infos;
    int                 *info_slot;
    int                  n_infos;
    int                 *view_step, *view_slot;   /* views of planned tensors: where, and of what */
    int                  n_views;

    int     n_reallocs, n_plans;
    int64_t plan_time_us;
};

static const char *const mms__strategy_names[] = { "largest first", "longest first", "in order, best fit" };

MMS_API mms_gallocr_t mms_gallocr_new_n(mms_backend_buffer_type_t *bufts, int n_bufs) {
    mms_gallocr_t ga;
    int i;
    if (!bufts || n_bufs < 1) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_gallocr_new_n: needs at least one buffer type"); return NULL; }
    for (i = 0; i < n_bufs; i++)
        if (!bufts[i]) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_gallocr_new_n: buffer type %d is NULL", i); return NULL; }
    ga = (mms_gallocr_t)MMS_MALLOC(sizeof *ga);
    if (!ga) { mms_set_error(MMS_ERR_OOM, "mms_gallocr_new: out of host memory"); return NULL; }
    memset(ga, 0, sizeof *ga);
    ga->bufs = (struct mms__gbuf *)MMS_MALLOC(sizeof *ga->bufs * (size_t)n_bufs);
    if (!ga->bufs) { MMS_FREE(ga); mms_set_error(MMS_ERR_OOM, "mms_gallocr_new: out of host memory"); return NULL; }
    memset(ga->bufs, 0, sizeof *ga->bufs * (size_t)n_bufs);
    for (i = 0; i < n_bufs; i++) ga->bufs[i].buft = bufts[i];
    ga->n_bufs = n_bufs;
    ga->inplace = true;
    return ga;
}

MMS_API mms_gallocr_t mms_gallocr_new(mms_backend_buffer_type_t buft) { return mms_gallocr_new_n(&buft, 1); }

static void mms__galloc_free_plan(mms_gallocr_t ga) {
    MMS_FREE(ga->sig); MMS_FREE(ga->slot_block); MMS_FREE(ga->slot_first); MMS_FREE(ga->slot_last);
    MMS_FREE(ga->slot_inplace_of); MMS_FREE(ga->blocks); MMS_FREE(ga->infos); MMS_FREE(ga->info_slot);
    MMS_FREE(ga->view_step); MMS_FREE(ga->view_slot);
    ga->sig = NULL; ga->slot_block = ga->slot_first = ga->slot_last = ga->slot_inplace_of = ga->info_slot = NULL;
    ga->view_step = ga->view_slot = NULL;
    ga->blocks = NULL; ga->infos = NULL;
    ga->n_blocks = ga->n_infos = ga->n_views = 0;
    ga->have_plan = false;
}

MMS_API void mms_gallocr_free(mms_gallocr_t ga) {
    int i, c;
    if (!ga) return;
    for (i = 0; i < ga->n_bufs; i++) {
        for (c = 0; c < ga->bufs[i].n_chunks; c++) mms_backend_buffer_free(ga->bufs[i].chunks[c]);
        MMS_FREE(ga->bufs[i].chunks);
        MMS_FREE(ga->bufs[i].planned);
    }
    mms__galloc_free_plan(ga);
    MMS_FREE(ga->bufs);
    MMS_FREE(ga);
}

MMS_API void mms_gallocr_set_inputs_reusable(mms_gallocr_t ga, bool reusable) { if (ga) { ga->inputs_reusable = reusable; ga->have_plan = false; } }
MMS_API void mms_gallocr_set_inplace(mms_gallocr_t ga, bool enabled)          { if (ga) { ga->inplace = enabled; ga->have_plan = false; } }

/* -- graph walking -- */

static int mms__slot_count(const struct mms_cgraph *g) { return mms_graph_n_leafs(g) + mms_graph_n_nodes(g); }
static struct mms_tensor *mms__slot_tensor(const struct mms_cgraph *g, int s) {
    int nl = mms_graph_n_leafs(g);
    return s < nl ? mms_graph_leaf(g, s) : mms_graph_node(g, s - nl);
}
static int mms__slot_step(const struct mms_cgraph *g, int s) { return s < mms_graph_n_leafs(g) ? -1 : s - mms_graph_n_leafs(g); }

/* Planned here: not a view, and without memory, or in compute memory (of an earlier allocation,
   ours or another allocator's, maybe freed by now): never relied on by a new allocation. */
static bool mms__galloc_needs(const struct mms_tensor *t) {
    return !t->view_src && (t->placement.kind == MMS_MEMORY_NONE || t->placement.kind == MMS_MEMORY_COMPUTE);
}

static bool mms__op_can_inplace(enum mms_op op) {
    switch (op) {
        case MMS_OP_ADD: case MMS_OP_SUB: case MMS_OP_MUL: case MMS_OP_DIV: case MMS_OP_SCALE:
        case MMS_OP_SQR: case MMS_OP_SQRT: case MMS_OP_EXP: case MMS_OP_TANH: case MMS_OP_SILU:
        case MMS_OP_GELU: case MMS_OP_GELU_TANH: case MMS_OP_NORM: case MMS_OP_RMS_NORM:
        case MMS_OP_SOFT_MAX: case MMS_OP_ROPE:
            return true;
        default:
            return false;
    }
}

/* Fills sig[] for graph; buffer ids from the arrays, or from old when they are NULL and it fits. */
static enum mms_status mms__galloc_signature(mms_gallocr_t ga, struct mms_cgraph *g, const int *node_ids, const int *leaf_ids,
                                             struct mms__gsig *sig, struct mms__ptrmap *slots) {
    int s, j, n = mms__slot_count(g), nl = mms_graph_n_leafs(g);
    for (s = 0; s < n; s++)
        if (!mms__ptrmap_put(slots, (uint64_t)(uintptr_t)mms__slot_tensor(g, s), (void *)(intptr_t)(s + 1)))
            return mms_set_error(MMS_ERR_OOM, "mms_gallocr: out of host memory");
    for (s = 0; s < n; s++) {
        const struct mms_tensor *t = mms__slot_tensor(g, s);
        struct mms__gsig *q = &sig[s];
        int id = s < nl ? (leaf_ids ? leaf_ids[s] : 0) : (node_ids ? node_ids[s - nl] : 0);
        memset(q, 0, sizeof *q);
        if (id < 0 || id >= ga->n_bufs)
            return mms_set_error(MMS_ERR_INVALID_ARG, "mms_gallocr_reserve_n: buffer id %d of %s is not in 0..%d",
                                 id, mms__tensor_desc(t).s, ga->n_bufs - 1);
        q->op = t->op;
        q->type = t->type;
        q->flags = t->flags;
        q->needs_alloc = mms__galloc_needs(t);
        q->buffer_id = id;
        for (j = 0; j < MMS_MAX_DIMS; j++) { q->ne[j] = t->ne[j]; q->nb[j] = t->nb[j]; }
        q->view_offs = t->view_offs;
        for (j = 0; j < MMS_MAX_SRC; j++)
            q->src[j] = t->src[j] ? (int32_t)(intptr_t)mms__ptrmap_get(slots, (uint64_t)(uintptr_t)t->src[j], NULL) : 0;
    }
    return MMS_OK;
}

/* -- placement -- */

struct mms__gap_item { size_t off, end; };

static int mms__cmp_gap_item(const void *a, const void *b) {
    const struct mms__gap_item *x = (const struct mms__gap_item *)a, *y = (const struct mms__gap_item *)b;
    return (x->off > y->off) - (x->off < y->off);
}

static bool mms__blocks_overlap_in_time(const struct mms__gblock *a, const struct mms__gblock *b) {
    return a->first <= b->last && b->first <= a->last;
}

/* Lowest (first fit) or tightest (best fit) offset in chunk c where b fits among the placed
   blocks that are alive at the same time; SIZE_MAX when it does not fit under capacity. */
static size_t mms__find_offset(const struct mms__gblock *blocks, const int *placed, int n_placed, const struct mms__gblock *b,
                               int c, size_t capacity, bool best_fit, struct mms__gap_item *scratch) {
    int i, k = 0;
    size_t cur = 0, best = SIZE_MAX, best_gap = SIZE_MAX;
    for (i = 0; i < n_placed; i++) {
        const struct mms__gblock *p = &blocks[placed[i]];
        if (p->chunk == c && p->size > 0 && mms__blocks_overlap_in_time(p, b)) {
            scratch[k].off = p->offset;
            scratch[k].end = p->offset + p->size;
            k++;
        }
    }
    qsort(scratch, (size_t)k, sizeof *scratch, mms__cmp_gap_item);
    for (i = 0; i < k; i++) {
        if (scratch[i].off > cur && scratch[i].off - cur >= b->size) {
            size_t gap = scratch[i].off - cur;
            if (!best_fit) return cur;
            if (gap < best_gap) { best_gap = gap; best = cur; }
        }
        if (scratch[i].end > cur) cur = scratch[i].end;
    }
    if (best != SIZE_MAX) return best;
    return (b->size <= capacity && cur <= capacity - b->size) ? cur : SIZE_MAX;
}

static int mms__cmp_largest_first(const void *a, const void *b, const struct mms__gblock *blocks) {
    const struct mms__gblock *x = &blocks[*(const int *)a], *y = &blocks[*(const int *)b];
    if (x->size != y->size) return x->size > y->size ? -1 : 1;
    if (x->last - x->first != y->last - y->first) return (y->last - y->first) - (x->last - x->first);
    return x->first - y->first;
}
static int mms__cmp_longest_first(const void *a, const void *b, const struct mms__gblock *blocks) {
    const struct mms__gblock *x = &blocks[*(const int *)a], *y = &blocks[*(const int *)b];
    if (x->last - x->first != y->last - y->first) return (y->last - y->first) - (x->last - x->first);
    if (x->size != y->size) return x->size > y->size ? -1 : 1;
    return x->first - y->first;
}
static int mms__cmp_in_order(const void *a, const void *b, const struct mms__gblock *blocks) {
    const struct mms__gblock *x = &blocks[*(const int *)a], *y = &blocks[*(const int *)b];
    if (x->first != y->first) return x->first - y->first;
    return *(const int *)a - *(const int *)b;
}

/* qsort has no context argument: a small insertion sort with one is enough for plan sizes. */
static void mms__sort_blocks(int *idx, int n, const struct mms__gblock *blocks,
                             int (*cmp)(const void *, const void *, const struct mms__gblock *)) {
    int i, j;
    for (i = 1; i < n; i++) {
        int v = idx[i];
        for (j = i - 1; j >= 0 && cmp(&idx[j], &v, blocks) > 0; j--) idx[j + 1] = idx[j];
        idx[j + 1] = v;
    }
}

/* Places the blocks of buffer `id` with one strategy; returns the bytes over all chunks (and the
   chunk count), or SIZE_MAX with an error when a block can never fit. Results go into blocks. */
static size_t mms__place_strategy(mms_gallocr_t ga, int id, int strategy, int *order, int n, int *placed,
                                  struct mms__gap_item *scratch, int *n_chunks_out) {
    struct mms__gblock *blocks = ga->blocks;
    size_t capacity = mms_backend_buft_get_max_size(ga->bufs[id].buft), total = 0;
    int i, c, n_placed = 0, n_chunks = n > 0 ? 1 : 0, n_inputs = 0;   /* nothing to place: no buffer */
    /* inputs first, in graph order; then the rest in the strategy's order */
    for (i = 0; i < n; i++) if (blocks[order[i]].input) { int t = order[n_inputs]; order[n_inputs++] = order[i]; order[i] = t; }
    mms__sort_blocks(order, n_inputs, blocks, mms__cmp_in_order);
    mms__sort_blocks(order + n_inputs, n - n_inputs, blocks,
                     strategy == 0 ? mms__cmp_largest_first : strategy == 1 ? mms__cmp_longest_first : mms__cmp_in_order);
    for (i = 0; i < n; i++) {
        struct mms__gblock *b = &blocks[order[i]];
        size_t off = SIZE_MAX;
        if (b->size > capacity) {
            mms_set_error(MMS_ERR_UNSUPPORTED, "mms_gallocr: a tensor needs %zu bytes, more than the %zu bytes a '%s' buffer can hold",
                          b->size, capacity, mms_backend_buft_name(ga->bufs[id].buft));
            return SIZE_MAX;
        }
        for (c = 0; off == SIZE_MAX; c++) {
            off = mms__find_offset(blocks, placed, n_placed, b, c, capacity, strategy == 2, scratch);
            if (off != SIZE_MAX) { b->chunk = c; b->offset = off; if (c + 1 > n_chunks) n_chunks = c + 1; }
        }
        placed[n_placed++] = order[i];
    }
    for (c = 0; c < n_chunks; c++) {
        size_t peak = 0;
        for (i = 0; i < n; i++) if (blocks[order[i]].chunk == c) peak = MMS__MAX(peak, blocks[order[i]].offset + blocks[order[i]].size);
        total += peak;
    }
    *n_chunks_out = n_chunks;
    return total;
}

/* Runs every strategy for buffer id, keeps the smallest result (fewer chunks on a tie) and fills
   the buffer's planned chunk sizes. Strategies are deterministic, so the winner is simply rerun. */
static enum mms_status mms__place_buffer(mms_gallocr_t ga, int id) {
    struct mms__gbuf *buf = &ga->bufs[id];
    int *order, *placed, i, k, n = 0, s, best = 0, best_chunks = 0, chunks = 0, c;
    size_t best_total = SIZE_MAX, total;
    struct mms__gap_item *scratch;
    enum mms_status st = MMS_OK;

    for (i = 0; i < ga->n_blocks; i++) if (ga->blocks[i].buffer_id == id) n++;
    order = (int *)MMS_MALLOC(sizeof(int) * (size_t)(n + 1) * 2);
    scratch = (struct mms__gap_item *)MMS_MALLOC(sizeof *scratch * (size_t)(n + 1));
    if (!order || !scratch) { st = mms_set_error(MMS_ERR_OOM, "mms_gallocr: out of host memory"); goto done; }
    placed = order + n + 1;
    for (s = 0; s <= 3; s++) {
        int strategy = s < 3 ? s : best;   /* the fourth round reruns the winner */
        for (i = 0, k = 0; i < ga->n_blocks; i++) if (ga->blocks[i].buffer_id == id) order[k++] = i;
        total = mms__place_strategy(ga, id, strategy, order, n, placed, scratch, &chunks);
        if (total == SIZE_MAX) { st = mms_last_status(); goto done; }
        if (s < 3 && (total < best_total || (total == best_total && chunks < best_chunks))) {
            best_total = total;
            best_chunks = chunks;
            best = s;
        }
    }
    MMS_FREE(buf->planned);
    buf->planned = (size_t *)MMS_MALLOC(sizeof(size_t) * (size_t)(best_chunks + 1));
    if (!buf->planned) { st = mms_set_error(MMS_ERR_OOM, "mms_gallocr: out of host memory"); goto done; }
    buf->n_planned = best_chunks;
    for (c = 0; c < best_chunks; c++) buf->planned[c] = 0;
    for (i = 0; i < ga->n_blocks; i++)
        if (ga->blocks[i].buffer_id == id)
            buf->planned[ga->blocks[i].chunk] = MMS__MAX(buf->planned[ga->blocks[i].chunk], ga->blocks[i].offset + ga->blocks[i].size);
    buf->info.planned = best_total;
    buf->info.n_chunks = best_chunks;
    buf->info.strategy = mms__strategy_names[best];
done:
    MMS_FREE(order);
    MMS_FREE(scratch);
    return st;
}

/* -- planning -- */

static int mms__galloc_root_slot(struct mms__ptrmap *slots, const struct mms_tensor *t) {
    const struct mms_tensor *root = t->view_src ? t->view_src : t;
    return (int)(intptr_t)mms__ptrmap_get(slots, (uint64_t)(uintptr_t)root, NULL) - 1;
}

/* May node (slot s, step i) continue the block of its source src (slot ss)? See the header. */
static bool mms__galloc_can_take_over(mms_gallocr_t ga, const struct mms_tensor *node, int s, int i,
                                      const struct mms_tensor *src, int ss, const bool *has_views) {
    if (ss < 0 || src->view_src || ga->slot_block[ss] < 0 || has_views[ss]) return false;
    return ga->blocks[ga->slot_block[ss]].owner == ss && ga->sig[ss].buffer_id == ga->sig[s].buffer_id &&
           ga->slot_last[ss] == i && mms_are_same_layout(src, node) &&
           !(src->flags & (MMS_TENSOR_FLAG_OUTPUT | MMS_TENSOR_FLAG_PERSISTENT)) &&
           (!(src->flags & MMS_TENSOR_FLAG_INPUT) || ga->inputs_reusable);
}

/* Lower bound (blocks as planned, in-place counted once) and universal bound (every tensor on its
   own, a dying input assumed overwritable) for buffer id, from per-step sums. */
static void mms__galloc_bounds(mms_gallocr_t ga, int id, const size_t *size, const bool *kept, int64_t *live) {
    const int n = ga->n_leafs + ga->n_nodes, steps = ga->n_nodes + 1;   /* step -1 sits at index 0 */
    struct mms_gallocr_buffer_info *info = &ga->bufs[id].info;
    int s, i;
    size_t best = 0;
    memset(live, 0, sizeof *live * (size_t)(steps + 1));
    for (i = 0; i < ga->n_blocks; i++) {
        const struct mms__gblock *b = &ga->blocks[i];
        if (b->buffer_id != id) continue;
        live[b->first + 1] += (int64_t)b->size;
        live[b->last + 2] -= (int64_t)b->size;
    }
    for (i = 0, best = 0; i < steps; i++) { if (i) live[i] += live[i - 1]; best = MMS__MAX(best, (size_t)live[i]); }
    info->lower_bound = best;

    /* universal: at node i, what is needed after it (alive past i, or kept) plus its own output */
    memset(live, 0, sizeof *live * (size_t)(steps + 1));
    info->no_reuse = 0;
    info->n_tensors = 0;
    for (s = 0; s < n; s++) {
        int first = ga->slot_first[s], last = kept[s] ? ga->n_nodes : ga->slot_last[s];
        if (ga->slot_block[s] < 0 || ga->sig[s].buffer_id != id) continue;
        info->no_reuse += size[s];
        info->n_tensors++;
        if (last > first) { live[first + 1] += (int64_t)size[s]; live[last + 1] -= (int64_t)size[s]; }
        else if (first >= 0) { live[first + 1] += (int64_t)size[s]; live[first + 2] -= (int64_t)size[s]; }
    }
    for (i = 0, best = 0; i < steps; i++) { if (i) live[i] += live[i - 1]; if (i > 0 || ga->n_nodes == 0) best = MMS__MAX(best, (size_t)live[i]); }
    info->bound_universal = best;
}

static enum mms_status mms__galloc_plan(mms_gallocr_t ga, struct mms_cgraph *g, const int *node_ids, const int *leaf_ids) {
    const int64_t t0 = mms_time_us();
    const int n = mms__slot_count(g), nl = mms_graph_n_leafs(g), nn = mms_graph_n_nodes(g), end = nn - 1;
    struct mms__ptrmap slots;
    bool *has_views = NULL, *kept = NULL;
    size_t *size = NULL;
    int64_t *live = NULL;
    enum mms_status st = MMS_OK;
    int s, i, j, id;

    if (mms_graph_status(g) != MMS_OK)
        return mms_set_error(MMS_ERR_STATE, "mms_gallocr: the graph was not built correctly: %s", mms_graph_error(g));
    memset(&slots, 0, sizeof slots);
    mms__galloc_free_plan(ga);
    ga->n_leafs = nl;
    ga->n_nodes = nn;
    ga->sig = (struct mms__gsig *)MMS_MALLOC(sizeof *ga->sig * (size_t)(n + 1));
    ga->slot_block = (int *)MMS_MALLOC(sizeof(int) * (size_t)(n + 1));
    ga->slot_first = (int *)MMS_MALLOC(sizeof(int) * (size_t)(n + 1));
    ga->slot_last = (int *)MMS_MALLOC(sizeof(int) * (size_t)(n + 1));
    ga->slot_inplace_of = (int *)MMS_MALLOC(sizeof(int) * (size_t)(n + 1));
    ga->blocks = (struct mms__gblock *)MMS_MALLOC(sizeof *ga->blocks * (size_t)(n + 1));
    ga->infos = (struct mms_gallocr_tensor_info *)MMS_MALLOC(sizeof *ga->infos * (size_t)(n + 1));
    ga->info_slot = (int *)MMS_MALLOC(sizeof(int) * (size_t)(n + 1));
    ga->view_step = (int *)MMS_MALLOC(sizeof(int) * (size_t)(n + 1));
    ga->view_slot = (int *)MMS_MALLOC(sizeof(int) * (size_t)(n + 1));
    has_views = (bool *)MMS_MALLOC(sizeof(bool) * (size_t)(n + 1));
    kept = (bool *)MMS_MALLOC(sizeof(bool) * (size_t)(n + 1));
    size = (size_t *)MMS_MALLOC(sizeof(size_t) * (size_t)(n + 1));
    live = (int64_t *)MMS_MALLOC(sizeof(int64_t) * (size_t)(nn + 3));
    if (!ga->sig || !ga->slot_block || !ga->slot_first || !ga->slot_last || !ga->slot_inplace_of || !ga->blocks ||
        !ga->infos || !ga->info_slot || !ga->view_step || !ga->view_slot || !has_views || !kept || !size || !live) {
        st = mms_set_error(MMS_ERR_OOM, "mms_gallocr: out of host memory planning %d tensors", n);
        goto done;
    }
    if ((st = mms__galloc_signature(ga, g, node_ids, leaf_ids, ga->sig, &slots)) != MMS_OK) goto done;

    /* 1. lifetimes */
    for (s = 0; s < n; s++) {
        const struct mms_tensor *t = mms__slot_tensor(g, s);
        id = ga->sig[s].buffer_id;
        ga->slot_first[s] = ga->slot_last[s] = mms__slot_step(g, s);
        ga->slot_block[s] = -1;
        ga->slot_inplace_of[s] = -1;
        has_views[s] = kept[s] = false;
        size[s] = ga->sig[s].needs_alloc
                ? MMS__ALIGN_UP(mms_backend_buft_get_alloc_size(ga->bufs[id].buft, t), mms_backend_buft_get_alignment(ga->bufs[id].buft))
                : 0;
    }
    for (i = 0; i < nn; i++) {
        const struct mms_tensor *node = mms_graph_node(g, i);
        if (node->view_src) {
            int r = mms__galloc_root_slot(&slots, node);
            if (r >= 0) {
                has_views[r] = true;
                ga->view_step[ga->n_views] = i;
                ga->view_slot[ga->n_views++] = r;
            }
        }
        for (j = 0; j < MMS_MAX_SRC; j++) {
            int r;
            if (!node->src[j]) continue;
            r = mms__galloc_root_slot(&slots, node->src[j]);
            if (r >= 0) ga->slot_last[r] = MMS__MAX(ga->slot_last[r], i);
        }
    }
    for (s = 0; s < n; s++) {
        const struct mms_tensor *t = mms__slot_tensor(g, s);
        int r = mms__galloc_root_slot(&slots, t);
        bool keep = (t->flags & (MMS_TENSOR_FLAG_OUTPUT | MMS_TENSOR_FLAG_PERSISTENT)) ||
                    ((t->flags & MMS_TENSOR_FLAG_INPUT) && !ga->inputs_reusable);
        if (keep && r >= 0) { ga->slot_last[r] = MMS__MAX(ga->slot_last[r], end); kept[r] = true; }
    }

    /* 2. blocks, with in-place takeovers */
    for (s = 0; s < n; s++) {
        const struct mms_tensor *t = mms__slot_tensor(g, s);
        struct mms__gblock *b;
        if (!ga->sig[s].needs_alloc) continue;
        if (s >= nl && ga->inplace && mms__op_can_inplace(t->op)) {
            for (j = 0; j < 2 && ga->slot_block[s] < 0; j++) {
                int ss = t->src[j] ? (int)(intptr_t)mms__ptrmap_get(&slots, (uint64_t)(uintptr_t)t->src[j], NULL) - 1 : -1;
                if (ss >= 0 && mms__galloc_can_take_over(ga, t, s, s - nl, t->src[j], ss, has_views)) {
                    b = &ga->blocks[ga->slot_block[ss]];
                    b->last = MMS__MAX(b->last, ga->slot_last[s]);
                    b->owner = s;
                    ga->slot_block[s] = ga->slot_block[ss];
                    ga->slot_inplace_of[s] = ss;
                }
            }
            if (ga->slot_block[s] >= 0) continue;
        }
        b = &ga->blocks[ga->n_blocks];
        b->size = size[s];
        b->first = ga->slot_first[s];
        b->last = ga->slot_last[s];
        b->buffer_id = ga->sig[s].buffer_id;
        b->owner = s;
        b->input = (t->flags & MMS_TENSOR_FLAG_INPUT) && !ga->inputs_reusable;
        b->chunk = 0;
        b->offset = 0;
        ga->slot_block[s] = ga->n_blocks++;
    }

    /* 3. bounds and placement, per buffer */
    for (id = 0; id < ga->n_bufs; id++) {
        mms__galloc_bounds(ga, id, size, kept, live);
        if ((st = mms__place_buffer(ga, id)) != MMS_OK) goto done;
    }

    /* the report */
    for (s = 0; s < n; s++) {
        struct mms_gallocr_tensor_info *info;
        const struct mms__gblock *b;
        if (ga->slot_block[s] < 0) continue;
        b = &ga->blocks[ga->slot_block[s]];
        info = &ga->infos[ga->n_infos];
        info->tensor = mms__slot_tensor(g, s);
        info->buffer_id = b->buffer_id;
        info->chunk = b->chunk;
        info->offset = b->offset;
        info->size = size[s];
        info->first_use = ga->slot_first[s];
        info->last_use = ga->slot_last[s];
        info->inplace_of = ga->slot_inplace_of[s] >= 0 ? mms__slot_tensor(g, ga->slot_inplace_of[s]) : NULL;
        ga->info_slot[ga->n_infos++] = s;
    }
    ga->have_plan = true;
    ga->n_plans++;
    ga->plan_time_us = mms_time_us() - t0;
done:
    mms__ptrmap_free(&slots);
    MMS_FREE(has_views);
    MMS_FREE(kept);
    MMS_FREE(size);
    MMS_FREE(live);
    if (st != MMS_OK) mms__galloc_free_plan(ga);
    return st;
}

/* Grows each buffer id's chunks to the planned sizes (never shrinking). */
static enum mms_status mms__galloc_ensure_buffers(mms_gallocr_t ga) {
    int id, c;
    for (id = 0; id < ga->n_bufs; id++) {
        struct mms__gbuf *buf = &ga->bufs[id];
        if (buf->n_planned > buf->n_chunks) {
            mms_backend_buffer_t *chunks = (mms_backend_buffer_t *)MMS_REALLOC(buf->chunks, sizeof *chunks * (size_t)buf->n_planned);
            if (!chunks) return mms_set_error(MMS_ERR_OOM, "mms_gallocr: out of host memory");
            for (c = buf->n_chunks; c < buf->n_planned; c++) chunks[c] = NULL;
            buf->chunks = chunks;
            buf->n_chunks = buf->n_planned;
        }
        buf->info.allocated = 0;
        for (c = 0; c < buf->n_chunks; c++) {
            if (c < buf->n_planned && (!buf->chunks[c] || mms_backend_buffer_get_size(buf->chunks[c]) < buf->planned[c])) {
                mms_backend_buffer_t nb = mms_backend_buft_alloc_buffer(buf->buft, buf->planned[c]);
                if (!nb)
                    return mms__error_context(mms_last_status() == MMS_OK ? MMS_ERR_OOM : mms_last_status(),
                                         "mms_gallocr: cannot allocate %zu bytes of '%s' memory for buffer %d chunk %d: %s",
                                         buf->planned[c], mms_backend_buft_name(buf->buft), id, c, mms_last_error());
                if (buf->chunks[c]) {
                    ga->n_reallocs++;
                    mms__log(MMS_LOG_DEBUG, "mms_gallocr: buffer %d chunk %d grows from %zu to %zu bytes", id, c,
                             mms_backend_buffer_get_size(buf->chunks[c]), buf->planned[c]);
                    mms_backend_buffer_free(buf->chunks[c]);
                }
                mms_backend_buffer_set_usage(nb, MMS_BUFFER_USAGE_COMPUTE);
                buf->chunks[c] = nb;
            }
            if (buf->chunks[c]) buf->info.allocated += mms_backend_buffer_get_size(buf->chunks[c]);
        }
    }
    return MMS_OK;
}

MMS_API enum mms_status mms_gallocr_reserve_n(mms_gallocr_t ga, struct mms_cgraph *g, const int *node_ids, const int *leaf_ids) {
    enum mms_status st;
    if (!ga || !g) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_gallocr_reserve: allocator and graph are required");
    st = mms__galloc_plan(ga, g, node_ids, leaf_ids);
    return st != MMS_OK ? st : mms__galloc_ensure_buffers(ga);
}

MMS_API enum mms_status mms_gallocr_reserve(mms_gallocr_t ga, struct mms_cgraph *g) {
    return mms_gallocr_reserve_n(ga, g, NULL, NULL);
}

/* Does the stored plan fit graph g exactly? (Buffer ids are taken from the plan.) */
static bool mms__galloc_plan_fits(mms_gallocr_t ga, struct mms_cgraph *g) {
    const int n = mms__slot_count(g);
    struct mms__gsig *sig;
    struct mms__ptrmap slots;
    int s, *node_ids;
    bool fits = false;
    if (!ga->have_plan || mms_graph_n_leafs(g) != ga->n_leafs || mms_graph_n_nodes(g) != ga->n_nodes) return false;
    memset(&slots, 0, sizeof slots);
    sig = (struct mms__gsig *)MMS_MALLOC(sizeof *sig * (size_t)(n + 1));
    node_ids = (int *)MMS_MALLOC(sizeof(int) * (size_t)(n + 1));
    if (sig && node_ids) {
        for (s = 0; s < n; s++) node_ids[s] = ga->sig[s].buffer_id;
        fits = mms__galloc_signature(ga, g, node_ids + ga->n_leafs, node_ids, sig, &slots) == MMS_OK &&
               memcmp(sig, ga->sig, sizeof *sig * (size_t)n) == 0;
    }
    mms__ptrmap_free(&slots);
    MMS_FREE(sig);
    MMS_FREE(node_ids);
    return fits;
}

/* The results of one graph must not become values of another: a graph that holds tensors placed
   in compute memory (this allocator's or another's) by a different graph, next to tensors of its
   own, would lose their values: the memory is handed out again, or the other allocator's is. (A graph rebuilt over exactly the tensors of one earlier
   graph, with nothing new, is that graph again and is fine; input leafs are set anew anyway.) */
static enum mms_status mms__galloc_check_reuse(struct mms_cgraph *g, const char *who,
                                                const char *(*name_of)(void *user, uint64_t graph_id), void *user) {
    const int n = mms__slot_count(g), nl = mms_graph_n_leafs(g);
    const struct mms_tensor *culprit = NULL, *reader = NULL;
    uint64_t old_id = 0;
    int s, j, n_old = 0, n_fresh = 0;
    bool mixed = false;
    #define MMS__OLD(t) ((t)->placement.kind == MMS_MEMORY_COMPUTE && (t)->placement.graph_id != mms_graph_id(g))
    for (s = 0; s < n; s++) {
        const struct mms_tensor *t = mms__slot_tensor(g, s);
        if (t->view_src || (s < nl && (t->flags & MMS_TENSOR_FLAG_INPUT))) continue;
        if (MMS__OLD(t)) {
            n_old++;
            if (!old_id) old_id = t->placement.graph_id;
            else if (t->placement.graph_id != old_id) mixed = true;
        } else if (s >= nl && t->placement.kind == MMS_MEMORY_NONE) {
            n_fresh++;
        }
    }
    if (n_old == 0 || (!mixed && n_fresh == 0)) return MMS_OK;
    for (s = nl; s < n && !culprit; s++) {                     /* an old tensor that a new node reads */
        const struct mms_tensor *t = mms__slot_tensor(g, s);
        if (t->placement.kind != MMS_MEMORY_NONE) continue;
        for (j = 0; j < MMS_MAX_SRC && !culprit; j++) {
            const struct mms_tensor *r = t->src[j] ? (t->src[j]->view_src ? t->src[j]->view_src : t->src[j]) : NULL;
            if (r && MMS__OLD(r)) { culprit = r; reader = t; }
        }
    }
    for (s = 0; s < n && !culprit; s++) {
        const struct mms_tensor *t = mms__slot_tensor(g, s);
        if (!t->view_src && !(s < nl && (t->flags & MMS_TENSOR_FLAG_INPUT)) && MMS__OLD(t)) culprit = t;
    }
    #undef MMS__OLD
    {
        const char *old_name = name_of ? name_of(user, culprit->placement.graph_id) : "";
        char old[MMS_MAX_NAME + 32];
        snprintf(old, sizeof old, "graph #%llu%s%.64s%s", (unsigned long long)culprit->placement.graph_id, old_name[0] ? " '" : "", old_name,
                 old_name[0] ? "'" : "");
        return mms_set_error(MMS_ERR_STALE, "%s: graph #%llu%s%s%s uses tensor %s%s%s, which %s computed in compute memory that "
                             "this allocation hands out again: its value would be lost. Mark it with mms_set_persistent before "
                             "%s is allocated to keep it across graphs, or copy it out with mms_backend_tensor_get",
                             who, (unsigned long long)mms_graph_id(g), mms_graph_get_name(g)[0] ? " '" : "", mms_graph_get_name(g),
                             mms_graph_get_name(g)[0] ? "'" : "", mms__tensor_desc(culprit).s, reader ? " as an input of " : "",
                             reader ? mms__tensor_desc(reader).s : "", old, old);
    }
}

/* Places every planned tensor of g by the stored plan (which must fit g): the buffers grow if
   needed and start a new generation first. */
static enum mms_status mms__galloc_place(mms_gallocr_t ga, struct mms_cgraph *g) {
    enum mms_status st;
    int id, c, s, k, i;
    if ((st = mms__galloc_ensure_buffers(ga)) != MMS_OK) return st;

    /* a new generation: whatever an earlier allocation placed is stale from now on */
    for (id = 0; id < ga->n_bufs; id++)
        for (c = 0; c < ga->bufs[id].n_chunks; c++) mms_backend_buffer_reset(ga->bufs[id].chunks[c]);

    for (k = 0; k < ga->n_infos; k++) {
        struct mms_tensor *t;
        const struct mms__gblock *b;
        mms_backend_buffer_t chunk;
        s = ga->info_slot[k];
        t = mms__slot_tensor(g, s);
        b = &ga->blocks[ga->slot_block[s]];
        chunk = ga->bufs[b->buffer_id].chunks[b->chunk];
        mms__tensor_unplace(t);
        st = mms__tensor_alloc_for(chunk, t, (char *)mms_backend_buffer_get_base(chunk) + b->offset, mms_graph_id(g));
        if (st != MMS_OK) return st;
        ga->infos[k].tensor = t;
        ga->infos[k].inplace_of = ga->slot_inplace_of[s] >= 0 ? mms__slot_tensor(g, ga->slot_inplace_of[s]) : NULL;
    }
    for (i = 0; i < mms_graph_n_nodes(g); i++) {
        struct mms_tensor *t = mms_graph_node(g, i);
        if (t->view_src && t->view_src->placement.kind != MMS_MEMORY_NONE && (st = mms_backend_view_init(t)) != MMS_OK) return st;
    }
    return MMS_OK;
}

MMS_API enum mms_status mms_gallocr_alloc_graph(mms_gallocr_t ga, struct mms_cgraph *g) {
    enum mms_status st;
    if (!ga || !g) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_gallocr_alloc_graph: allocator and graph are required");
    if (mms_graph_status(g) != MMS_OK)
        return mms_set_error(MMS_ERR_STATE, "mms_gallocr_alloc_graph: the graph was not built correctly: %s", mms_graph_error(g));
    if ((st = mms__galloc_check_reuse(g, "mms_gallocr_alloc_graph", NULL, NULL)) != MMS_OK) return st;
    if (!mms__galloc_plan_fits(ga, g)) {
        if (ga->n_bufs > 1)   /* only the caller knows which buffer each tensor goes to */
            return mms_set_error(MMS_ERR_STATE, "mms_gallocr_alloc_graph: the graph differs from the one reserved and this allocator "
                                 "has %d buffers: call mms_gallocr_reserve_n with its buffer ids first", ga->n_bufs);
        if ((st = mms__galloc_plan(ga, g, NULL, NULL)) != MMS_OK) return st;
    }
    return mms__galloc_place(ga, g);
}

/* For the scheduler: every tensor this allocator placed becomes stale (a reset), or its memory is
   filled with a byte (poison). */
static void mms__galloc_reset(mms_gallocr_t ga) {
    int id, c;
    for (id = 0; id < ga->n_bufs; id++)
        for (c = 0; c < ga->bufs[id].n_chunks; c++) mms_backend_buffer_reset(ga->bufs[id].chunks[c]);
}

static void mms__galloc_fill(mms_gallocr_t ga, uint8_t value) {
    int id, c;
    for (id = 0; id < ga->n_bufs; id++)
        for (c = 0; c < ga->bufs[id].n_chunks; c++) mms_backend_buffer_clear(ga->bufs[id].chunks[c], value);
}

/* -- queries -- */

MMS_API size_t mms_gallocr_get_buffer_size(mms_gallocr_t ga, int id) {
    size_t total = 0;
    int c;
    if (!ga || id < 0 || id >= ga->n_bufs) return 0;
    for (c = 0; c < ga->bufs[id].n_chunks; c++) if (ga->bufs[id].chunks[c]) total += mms_backend_buffer_get_size(ga->bufs[id].chunks[c]);
    return total;
}

MMS_API int mms_gallocr_get_n_buffers(mms_gallocr_t ga) { return ga ? ga->n_bufs : 0; }

MMS_API enum mms_status mms_gallocr_get_buffer_info(mms_gallocr_t ga, int id, struct mms_gallocr_buffer_info *info) {
    if (!ga || !info || id < 0 || id >= ga->n_bufs)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_gallocr_get_buffer_info: no buffer %d", id);
    if (!ga->have_plan) return mms_set_error(MMS_ERR_STATE, "mms_gallocr_get_buffer_info: nothing planned yet (reserve or allocate a graph)");
    *info = ga->bufs[id].info;
    info->allocated = mms_gallocr_get_buffer_size(ga, id);
    return MMS_OK;
}

MMS_API int mms_gallocr_get_n_tensor_infos(mms_gallocr_t ga) { return ga && ga->have_plan ? ga->n_infos : 0; }
MMS_API const struct mms_gallocr_tensor_info *mms_gallocr_get_tensor_info(mms_gallocr_t ga, int i) {
    return ga && ga->have_plan && i >= 0 && i < ga->n_infos ? &ga->infos[i] : NULL;
}
MMS_API int     mms_gallocr_get_n_reallocs(mms_gallocr_t ga)   { return ga ? ga->n_reallocs : 0; }
MMS_API int     mms_gallocr_get_n_plans(mms_gallocr_t ga)      { return ga ? ga->n_plans : 0; }
MMS_API int64_t mms_gallocr_get_plan_time_us(mms_gallocr_t ga) { return ga ? ga->plan_time_us : 0; }
