/* >>graph =========================================================================================
   Graphs: the nodes needed for some outputs in execution order (depth first, sources in order),
   and the leafs they read. Arrays grow; the graph is freed with its context. */

struct mms_cgraph {
    struct mms_context *ctx;
    struct mms_cgraph  *next_in_ctx;
    uint64_t            id;

    struct mms_tensor **nodes;
    int                 n_nodes, cap_nodes;
    struct mms_tensor **leafs;
    int                 n_leafs, cap_leafs;
    struct mms__ptrmap  visited;     /* every tensor already in nodes or leafs */

    enum mms_status     status;
    char                error[MMS__ERROR_MAX];
    char                name[MMS_MAX_NAME];
    bool                unchanged;   /* mms_graph_unchanged: set by a scheduler on its own split graphs only */
};

static volatile uint64_t mms__graph_id_counter = 0;

static void mms__graph_release(struct mms_cgraph *g) {
    MMS_FREE(g->nodes);
    MMS_FREE(g->leafs);
    mms__ptrmap_free(&g->visited);
    g->nodes = g->leafs = NULL;
    g->n_nodes = g->cap_nodes = g->n_leafs = g->cap_leafs = 0;
}

static void mms__graph_release_all(struct mms_context *ctx) {
    struct mms_cgraph *g;
    for (g = ctx->graphs; g; g = g->next_in_ctx) mms__graph_release(g);
    ctx->graphs = NULL;
}

MMS_API size_t mms_graph_overhead(void) { return sizeof(struct mms_cgraph) + MMS__OBJ_ALIGN; }

MMS_API struct mms_cgraph *mms_new_graph(struct mms_context *ctx) {
    struct mms_cgraph *g;
    if (!ctx) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_new_graph: context is NULL"); return NULL; }
    g = (struct mms_cgraph *)mms__ctx_alloc(ctx, sizeof *g, MMS__OBJ_ALIGN);
    if (!g) return NULL;
    memset(g, 0, sizeof *g);
    g->ctx = ctx;
    g->id = mms__atomic_next_u64(&mms__graph_id_counter);
    g->next_in_ctx = ctx->graphs;
    ctx->graphs = g;
    return g;
}

static void mms__graph_fail(struct mms_cgraph *g, enum mms_status status, const char *fmt, ...) MMS_PRINTF(3, 4);
static void mms__graph_fail(struct mms_cgraph *g, enum mms_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mms__set_errorv(status, fmt, ap);
    va_end(ap);
    if (g->status == MMS_OK) {
        g->status = status;
        mms__copy_str(g->error, sizeof g->error, mms__last_message);
    }
}

static bool mms__push_tensor(struct mms_tensor ***arr, int *n, int *cap, struct mms_tensor *t) {
    if (*n == *cap) {
        int new_cap = *cap ? *cap * 2 : 64;
        struct mms_tensor **p = (struct mms_tensor **)MMS_REALLOC(*arr, (size_t)new_cap * sizeof *p);
        if (!p) return false;
        *arr = p;
        *cap = new_cap;
    }
    (*arr)[(*n)++] = t;
    return true;
}

struct mms__visit { struct mms_tensor *t; int next_src; };

/* Leafs: tensors without an op, and kept tensors (persistent, not views) other than the tensor
   being expanded: a graph that expands a kept tensor computes it, any other graph reads its kept
   value. (Whether it has been computed yet does not matter here; allocation checks that.) */
static bool mms__is_leaf(const struct mms_tensor *t, const struct mms_tensor *expanded) {
    return t->op == MMS_OP_NONE || (t != expanded && (t->flags & MMS_TENSOR_FLAG_PERSISTENT) && !t->view_src);
}

MMS_API void mms_build_forward_expand(struct mms_cgraph *g, struct mms_tensor *tensor) {
    struct mms__visit *stack = NULL;
    int depth = 0, cap = 0;
    bool oom = false;

    if (!g) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_build_forward_expand: graph is NULL"); return; }
    if (!tensor) {
        mms__graph_fail(g, MMS_ERR_INVALID_ARG, "mms_build_forward_expand: tensor is NULL%s%s",
                        g->ctx->status != MMS_OK ? "; an op before failed: " : "", g->ctx->status != MMS_OK ? g->ctx->error : "");
        return;
    }
    if (mms__ptrmap_get(&g->visited, (uint64_t)(uintptr_t)tensor, NULL)) return;

    /* iterative depth-first post-order: deep chains cannot overflow the C stack */
    #define MMS__VISIT_PUSH(x) do {                                                                 \
        if (depth == cap) {                                                                         \
            int nc = cap ? cap * 2 : 64;                                                            \
            struct mms__visit *ns = (struct mms__visit *)MMS_REALLOC(stack, (size_t)nc * sizeof *ns); \
            if (!ns) { oom = true; break; }                                                         \
            stack = ns; cap = nc;                                                                   \
        }                                                                                           \
        if (!mms__ptrmap_put(&g->visited, (uint64_t)(uintptr_t)(x), (void *)1)) { oom = true; break; } \
        stack[depth].t = (x); stack[depth].next_src = 0; depth++;                                   \
    } while (0)

    MMS__VISIT_PUSH(tensor);
    while (depth > 0 && !oom) {
        struct mms__visit *top = &stack[depth - 1];
        if (top->next_src < MMS_MAX_SRC && !mms__is_leaf(top->t, tensor)) {
            struct mms_tensor *s = top->t->src[top->next_src++];
            if (s && !mms__ptrmap_get(&g->visited, (uint64_t)(uintptr_t)s, NULL)) MMS__VISIT_PUSH(s);
            continue;
        }
        {
            struct mms_tensor *t = top->t;
            bool leaf = mms__is_leaf(t, tensor);
            depth--;
            if (!(leaf ? mms__push_tensor(&g->leafs, &g->n_leafs, &g->cap_leafs, t)
                       : mms__push_tensor(&g->nodes, &g->n_nodes, &g->cap_nodes, t))) oom = true;
        }
    }
    #undef MMS__VISIT_PUSH
    MMS_FREE(stack);
    if (oom) mms__graph_fail(g, MMS_ERR_OOM, "mms_build_forward_expand: out of host memory growing the graph");
}

MMS_API int mms_graph_n_nodes(const struct mms_cgraph *g) { return g ? g->n_nodes : 0; }
MMS_API int mms_graph_n_leafs(const struct mms_cgraph *g) { return g ? g->n_leafs : 0; }

MMS_API struct mms_tensor *mms_graph_node(const struct mms_cgraph *g, int i) {
    if (!g) return NULL;
    if (i < 0) i += g->n_nodes;
    return (i >= 0 && i < g->n_nodes) ? g->nodes[i] : NULL;
}

MMS_API struct mms_tensor *mms_graph_leaf(const struct mms_cgraph *g, int i) {
    if (!g) return NULL;
    if (i < 0) i += g->n_leafs;
    return (i >= 0 && i < g->n_leafs) ? g->leafs[i] : NULL;
}

MMS_API struct mms_tensor *mms_graph_get_tensor(const struct mms_cgraph *g, const char *name) {
    int i;
    if (!g || !name) return NULL;
    for (i = 0; i < g->n_nodes; i++) if (strcmp(g->nodes[i]->name, name) == 0) return g->nodes[i];
    for (i = 0; i < g->n_leafs; i++) if (strcmp(g->leafs[i]->name, name) == 0) return g->leafs[i];
    return NULL;
}

MMS_API uint64_t        mms_graph_id(const struct mms_cgraph *g)     { return g ? g->id : 0; }
MMS_API void            mms_graph_set_name(struct mms_cgraph *g, const char *name) { if (g) mms__copy_str(g->name, sizeof g->name, name ? name : ""); }
MMS_API const char     *mms_graph_get_name(const struct mms_cgraph *g) { return g ? g->name : ""; }
MMS_API bool            mms_graph_unchanged(const struct mms_cgraph *g) { return g && g->unchanged; }
MMS__MAYBE_UNUSED static void mms__graph_set_unchanged(struct mms_cgraph *g, bool v) { g->unchanged = v; }

/* A graph of exactly these nodes, in this order, without walking sources (the scheduler's splits
   and its allocation graph). Leafs are given separately. */
static struct mms_cgraph *mms__graph_from_lists(struct mms_context *ctx, struct mms_tensor **nodes, int n_nodes,
                                                struct mms_tensor **leafs, int n_leafs) {
    struct mms_cgraph *g = mms_new_graph(ctx);
    int i;
    if (!g) return NULL;
    for (i = 0; i < n_nodes; i++)
        if (!mms__push_tensor(&g->nodes, &g->n_nodes, &g->cap_nodes, nodes[i])) { mms__graph_fail(g, MMS_ERR_OOM, "out of host memory"); break; }
    for (i = 0; i < n_leafs; i++)
        if (!mms__push_tensor(&g->leafs, &g->n_leafs, &g->cap_leafs, leafs[i])) { mms__graph_fail(g, MMS_ERR_OOM, "out of host memory"); break; }
    return g;
}
MMS_API enum mms_status mms_graph_status(const struct mms_cgraph *g) { return g ? g->status : MMS_ERR_INVALID_ARG; }
MMS_API const char     *mms_graph_error(const struct mms_cgraph *g)  { return g ? g->error : "no graph"; }

static const char *mms__flags_str(int32_t flags, char *buf) {
    buf[0] = flags & MMS_TENSOR_FLAG_INPUT ? 'i' : '-';
    buf[1] = flags & MMS_TENSOR_FLAG_OUTPUT ? 'o' : '-';
    buf[2] = flags & MMS_TENSOR_FLAG_PERSISTENT ? 'p' : '-';
    buf[3] = '\0';
    return buf;
}

/* Position of t in the graph, as "N12" or "L3", or "?" if absent (for printing sources). */
static void mms__graph_ref(const struct mms_cgraph *g, const struct mms_tensor *t, char *buf, size_t size) {
    int i;
    for (i = 0; i < g->n_nodes; i++) if (g->nodes[i] == t) { snprintf(buf, size, "N%d", i); return; }
    for (i = 0; i < g->n_leafs; i++) if (g->leafs[i] == t) { snprintf(buf, size, "L%d", i); return; }
    snprintf(buf, size, "?");
}

MMS_API void mms_graph_print(const struct mms_cgraph *g, FILE *out) {
    char shape[96], flags[4], ref[32];
    int i, j;
    if (!out) out = stdout;
    if (!g) { fprintf(out, "(no graph)\n"); return; }
    fprintf(out, "graph #%llu%s%s%s: %d nodes, %d leafs%s%s\n", (unsigned long long)g->id, g->name[0] ? " '" : "", g->name,
            g->name[0] ? "'" : "", g->n_nodes, g->n_leafs,
            g->status != MMS_OK ? ", build failed: " : "", g->status != MMS_OK ? g->error : "");
    fprintf(out, "  %-6s %-15s %-5s %-28s %-3s %-20s %s\n", "id", "op", "type", "ne", "fl", "sources", "name");
    for (i = 0; i < g->n_nodes; i++) {
        const struct mms_tensor *t = g->nodes[i];
        char srcs[128] = "";
        size_t len = 0;
        for (j = 0; j < MMS_MAX_SRC; j++) {
            if (!t->src[j]) continue;
            mms__graph_ref(g, t->src[j], ref, sizeof ref);
            len += (size_t)snprintf(srcs + len, len < sizeof srcs ? sizeof srcs - len : 0, "%s%s", len ? "," : "", ref);
            if (len >= sizeof srcs) break;
        }
        fprintf(out, "  N%-5d %-15s %-5s %-28s %-3s %-20s %s\n", i, mms_op_name(t->op), mms_type_name(t->type),
                mms__shape_str(t->ne, shape, sizeof shape), mms__flags_str(t->flags, flags), srcs, t->name);
    }
    for (i = 0; i < g->n_leafs; i++) {
        const struct mms_tensor *t = g->leafs[i];
        fprintf(out, "  L%-5d %-15s %-5s %-28s %-3s %-20s %s\n", i, "LEAF", mms_type_name(t->type),
                mms__shape_str(t->ne, shape, sizeof shape), mms__flags_str(t->flags, flags), "", t->name);
    }
}

/* Names go into quoted dot labels: keep them printable and free of quotes and backslashes. */
static void mms__dot_escape(const char *in, char *out, size_t size) {
    size_t i = 0;
    for (; *in && i + 1 < size; in++) out[i++] = (*in == '"' || *in == '\\' || (unsigned char)*in < 32) ? '_' : *in;
    out[i] = '\0';
}

MMS_API enum mms_status mms_graph_dump_dot(const struct mms_cgraph *g, const char *path) {
    FILE *f;
    char shape[96], name[MMS_MAX_NAME];
    int i, j;
    if (!g || !path) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_graph_dump_dot: graph and path are required");
    f = mms__fopen(path, "w");
    if (!f) return mms_set_error(MMS_ERR_IO, "mms_graph_dump_dot: cannot write '%s'", path);
    fprintf(f, "digraph mmsched {\n  rankdir = TB;\n  node [fontname = \"monospace\", fontsize = 10];\n");
    for (i = 0; i < g->n_leafs; i++) {
        const struct mms_tensor *t = g->leafs[i];
        mms__dot_escape(t->name, name, sizeof name);
        fprintf(f, "  t%p [shape = box, style = filled, fillcolor = \"%s\", label = \"%s\\n%s %s\"];\n", (const void *)t,
                t->flags & MMS_TENSOR_FLAG_INPUT ? "#b3d9ff" : "#eeeeee", name[0] ? name : "(leaf)",
                mms_type_name(t->type), mms__shape_str(t->ne, shape, sizeof shape));
    }
    for (i = 0; i < g->n_nodes; i++) {
        const struct mms_tensor *t = g->nodes[i];
        const char *fill = t->flags & MMS_TENSOR_FLAG_OUTPUT ? "#ffd59e" : mms_op_is_view(t->op) ? "#ffffff" : "#d5f5d5";
        mms__dot_escape(t->name, name, sizeof name);
        fprintf(f, "  t%p [shape = %s, style = \"filled%s\", fillcolor = \"%s\", label = \"N%d %s\\n%s\\n%s %s\"];\n",
                (const void *)t, mms_op_is_view(t->op) ? "ellipse" : "box", mms_op_is_view(t->op) ? ",dashed" : "", fill,
                i, mms_op_name(t->op), name, mms_type_name(t->type), mms__shape_str(t->ne, shape, sizeof shape));
        for (j = 0; j < MMS_MAX_SRC; j++)
            if (t->src[j]) fprintf(f, "  t%p -> t%p [label = \"%d\"];\n", (const void *)t->src[j], (const void *)t, j);
    }
    fprintf(f, "}\n");
    if (fclose(f) != 0) return mms_set_error(MMS_ERR_IO, "mms_graph_dump_dot: error writing '%s'", path);
    return MMS_OK;
}
