/* random_graphs.h - random graphs for property tests (test_alloc, test_sched). Include after
   mmsched.h and test.h. The same seed always builds the same graph: inputs "in0".. (most flagged
   as inputs), a few dozen ops of many kinds (element-wise, norms, softmax, matmul, views, reshape,
   transpose, permute, concat, cont), random outputs, and weights whose values are fixed by the
   seed and placed wherever the test says. */
#ifndef MMS_RANDOM_GRAPHS_H
#define MMS_RANDOM_GRAPHS_H

#define RG_MAX_WEIGHTS 256

struct rgen {
    unsigned long long rng;
    struct mms_context *ctx, *wctx;
    struct mms_tensor *pool[96];
    int n;
    struct mms_tensor *weights[RG_MAX_WEIGHTS];   /* in wctx (no memory until rg_place_weights) */
    float *wvalues[RG_MAX_WEIGHTS];
    mms_backend_buffer_t wbufs[RG_MAX_WEIGHTS];
    int n_weights;
};

static unsigned rg_next(struct rgen *g, unsigned n) {
    g->rng ^= g->rng >> 12; g->rng ^= g->rng << 25; g->rng ^= g->rng >> 27;
    return (unsigned)((g->rng * 2685821657736338717ULL) >> 33) % n;
}

static struct mms_tensor *rg_pick(struct rgen *g) { return g->pool[rg_next(g, (unsigned)g->n)]; }

/* A weight leaf; its values are drawn now, so they depend only on the seed. */
static struct mms_tensor *rg_weight(struct rgen *g, int64_t ne0, int64_t ne1) {
    struct mms_tensor *w;
    int64_t i;
    if (g->n_weights == RG_MAX_WEIGHTS) return NULL;
    w = mms_new_tensor_2d(g->wctx, MMS_TYPE_F32, ne0, ne1);
    mms_format_name(w, "w%d", g->n_weights);
    g->wvalues[g->n_weights] = (float *)malloc(sizeof(float) * (size_t)(ne0 * ne1));
    for (i = 0; i < ne0 * ne1; i++) g->wvalues[g->n_weights][i] = (float)((int)rg_next(g, 2001) - 1000) / 1000.0f;
    g->weights[g->n_weights++] = w;
    return w;
}
static int64_t rg_dim(struct rgen *g) { static const int64_t d[] = { 1, 2, 3, 4, 5, 8 }; return d[rg_next(g, 6)]; }

/* One random op on the pool. Returns NULL when the pick does not suit the op (then try again). */
static struct mms_tensor *rg_op(struct rgen *g) {
    struct mms_context *ctx = g->ctx;
    struct mms_tensor *a = rg_pick(g), *b = NULL;
    int i;
    switch (rg_next(g, 15)) {
        case 0:  return mms_silu(ctx, a);
        case 1:  return mms_tanh(ctx, a);
        case 2:  return mms_scale(ctx, a, 0.5f);
        case 3:  return mms_rms_norm(ctx, a, 1e-5f);
        case 4:  return mms_soft_max_ext(ctx, a, NULL, 1.0f, 0.0f);
        case 5: case 6:                                        /* binary, same shape or broadcast weight */
            for (i = 0; i < g->n; i++) {
                b = g->pool[(i + (int)rg_next(g, (unsigned)g->n)) % g->n];
                if (b != a && mms_are_same_shape(a, b)) break;
            }
            if (i == g->n) b = rg_weight(g, a->ne[0], rg_next(g, 2) ? 1 : a->ne[1]);
            if (!b) return NULL;
            if (a->ne[2] != 1 || a->ne[3] != 1) b = mms_are_same_shape(a, b) ? b : NULL;
            if (!b) return NULL;
            return rg_next(g, 2) ? mms_add(ctx, a, b) : mms_mul(ctx, a, b);
        case 7:  return (b = rg_weight(g, a->ne[0], rg_dim(g))) ? mms_mul_mat(ctx, b, a) : NULL;
        case 8:  return mms_is_contiguous(a) ? mms_reshape_2d(ctx, a, a->ne[1] * a->ne[2] * a->ne[3], a->ne[0]) : NULL;
        case 9:  return mms_transpose(ctx, a);
        case 10: return a->ne[1] >= 2 ? mms_view_2d(ctx, a, a->ne[0], a->ne[1] / 2, a->nb[1], a->nb[1]) : NULL;
        case 11: return mms_cont(ctx, a);
        case 12: return mms_concat(ctx, a, mms_gelu(ctx, a), (int)rg_next(g, 2));
        case 13: return mms_permute(ctx, a, 0, 2, 1, 3);
        default: return mms_norm(ctx, a, 1e-5f);
    }
}

/* Builds the same random graph for the same seed, in fresh contexts. */
static struct mms_cgraph *rg_build(struct rgen *g, unsigned long long seed, struct mms_tensor **inputs, int *n_inputs) {
    struct mms_cgraph *graph;
    int i, n_ops, tries = 0;
    g->rng = seed;
    g->ctx = test_ctx(true);
    g->wctx = test_ctx(true);
    g->n = 0;
    g->n_weights = 0;
    *n_inputs = 1 + (int)rg_next(g, 3);
    for (i = 0; i < *n_inputs; i++) {
        struct mms_tensor *t = mms_new_tensor_2d(g->ctx, MMS_TYPE_F32, rg_dim(g) * 2, rg_dim(g));
        mms_format_name(t, "in%d", i);
        if (rg_next(g, 4)) mms_set_input(t);   /* an unflagged one is planned like any tensor */
        inputs[i] = g->pool[g->n++] = t;
    }
    n_ops = 5 + (int)rg_next(g, 36);
    while (g->n < (int)(sizeof g->pool / sizeof g->pool[0]) && n_ops > 0 && tries++ < 1000) {
        struct mms_tensor *t = rg_op(g);
        if (!t) { mms_ctx_clear_error(g->ctx); continue; }
        mms_format_name(t, "t%d", g->n);
        if (rg_next(g, 10) == 0) mms_set_output(t);
        g->pool[g->n++] = t;
        n_ops--;
    }
    mms_set_output(g->pool[g->n - 1]);
    graph = mms_new_graph(g->ctx);
    for (i = 0; i < g->n; i++) if (g->pool[i]->flags & MMS_TENSOR_FLAG_OUTPUT) mms_build_forward_expand(graph, g->pool[i]);
    return graph;
}

/* Fills the graph's input leafs ("in0".., flagged or not) with values fixed by the seed. */
static void rg_set_inputs(struct mms_cgraph *graph, unsigned long long seed) {
    int i;
    for (i = 0; i < mms_graph_n_leafs(graph); i++) {
        struct mms_tensor *t = mms_graph_leaf(graph, i);
        int64_t k, ne = mms_nelements(t);
        float *v;
        if (strncmp(t->name, "in", 2) != 0) continue;
        v = (float *)malloc((size_t)ne * sizeof *v);
        for (k = 0; k < ne; k++) {   /* hashed, not a ramp: rows that differ by a constant make softmax and
                                        norm rows equal, and a norm across such rows gives pure rounding noise */
            unsigned long long h = (seed ^ ((unsigned long long)i << 40)) + (unsigned long long)k * 0x9E3779B97F4A7C15ULL;
            h ^= h >> 31; h *= 0xBF58476D1CE4E5B9ULL; h ^= h >> 29;
            v[k] = (float)(h % 2001) / 1000.0f - 1.0f;
        }
        mms_backend_tensor_set(t, v, 0, (size_t)ne * sizeof *v);
        free(v);
    }
}

/* Tensors a and b (same position in two builds of one graph) hold the same bytes. */
static bool same_bytes(const struct mms_tensor *a, const struct mms_tensor *b) {
    size_t nb = mms_nbytes(a);
    void *x = malloc(nb + 1), *y = malloc(nb + 1);
    bool ok = mms_backend_tensor_get(a, x, 0, nb) == MMS_OK && mms_backend_tensor_get(b, y, 0, nb) == MMS_OK && memcmp(x, y, nb) == 0;
    free(x);
    free(y);
    return ok;
}

/* Gives every weight a buffer of its own (usage WEIGHTS) of the type choose(user, i) returns (the
   CPU's when choose is NULL) and its values. False (with the last error) on failure. */
static bool rg_place_weights(struct rgen *g, mms_backend_buffer_type_t (*choose)(void *user, int i), void *user) {
    int i;
    for (i = 0; i < g->n_weights; i++) {
        mms_backend_buffer_type_t buft = choose ? choose(user, i) : mms_backend_cpu_buffer_type();
        struct mms_tensor *w = g->weights[i];
        g->wbufs[i] = mms_backend_buft_alloc_buffer(buft, mms_nbytes(w));
        if (!g->wbufs[i]) return false;
        mms_backend_buffer_set_usage(g->wbufs[i], MMS_BUFFER_USAGE_WEIGHTS);
        if (mms_backend_tensor_alloc(g->wbufs[i], w, mms_backend_buffer_get_base(g->wbufs[i])) != MMS_OK ||
            mms_backend_tensor_set(w, g->wvalues[i], 0, mms_nbytes(w)) != MMS_OK) return false;
    }
    return true;
}

static void rg_free(struct rgen *g) {
    int i;
    for (i = 0; i < g->n_weights; i++) { mms_backend_buffer_free(g->wbufs[i]); free(g->wvalues[i]); g->wbufs[i] = NULL; }
    g->n_weights = 0;
    mms_free(g->ctx);
    mms_free(g->wctx);
    g->ctx = g->wctx = NULL;
}

#endif
