/* The graph allocator: plans on the reference graphs against the bounds worked out for ggml's allocator,
   a property test on thousands of random graphs with a checker written here, plan reuse, growth,
   staleness, chunks, several buffers and the picture. */
#define MMSCHED_IMPLEMENTATION
#include "../mmsched.h"
#include "test.h"
#include "../examples/reference_graphs.h"
#include "random_graphs.h"

static mms_backend_t cpu;

static struct mms_gallocr_buffer_info plan_info(struct ref_graph *r, bool inputs_reusable) {
    struct mms_gallocr_buffer_info bi;
    mms_gallocr_t ga = mms_gallocr_new(mms_backend_cpu_buffer_type());
    memset(&bi, 0, sizeof bi);
    mms_gallocr_set_inputs_reusable(ga, inputs_reusable);
    EXPECT(mms_gallocr_reserve(ga, r->graph) == MMS_OK, "reserve: %s", mms_last_error());
    EXPECT(mms_gallocr_get_buffer_info(ga, 0, &bi) == MMS_OK, "info: %s", mms_last_error());
    EXPECT(bi.allocated >= bi.planned, "allocated %zu < planned %zu", bi.allocated, bi.planned);
    mms_gallocr_free(ga);
    return bi;
}

/* The bounds below were computed from ggml's own allocator run on the same graph (benchmarks.md
   section 3), independently of this code; under ggml's rule (inputs reusable) ours must agree. */
static void test_vit_plan_matches_bounds(void) {
    struct ref_graph r;
    struct mms_gallocr_buffer_info g, ours;
    memset(&r, 0, sizeof r);
    ref_vit_layers(&r, 4, 0, MMS_TYPE_F32);
    EXPECT(ref_place_virtual(&r), "graph: %s", mms_last_error());
    EXPECT(mms_graph_n_nodes(r.graph) == 132, "nodes %d", mms_graph_n_nodes(r.graph));
    g = plan_info(&r, true);
    EXPECT(g.n_tensors == 105, "planned tensors %d", g.n_tensors);
    EXPECT(g.lower_bound == 196833344u, "bound C %zu", g.lower_bound);
    EXPECT(g.bound_universal == 180439104u, "bound B %zu", g.bound_universal);
    EXPECT(g.no_reuse == 2402575872u, "no reuse %zu", g.no_reuse);
    EXPECT(g.planned <= g.lower_bound + g.lower_bound / 100, "planned %zu is more than 1%% over %zu", g.planned, g.lower_bound);
    EXPECT(g.planned < 205030464u, "planned %zu is not below ggml's 205030464", g.planned);
    ours = plan_info(&r, false);
    EXPECT(ours.planned <= ours.lower_bound + ours.lower_bound / 100, "inputs kept: planned %zu, bound %zu", ours.planned, ours.lower_bound);
    printf("    vit mm: ggml rule %zu (bound %zu), inputs kept %zu (bound %zu)\n", g.planned, g.lower_bound, ours.planned, ours.lower_bound);
    ref_free(&r);
}

static void test_vit_flash_plan_matches_bounds(void) {
    struct ref_graph r;
    struct mms_gallocr_buffer_info g;
    memset(&r, 0, sizeof r);
    ref_vit_layers(&r, 4, 1, MMS_TYPE_F16);
    EXPECT(ref_place_virtual(&r), "graph: %s", mms_last_error());
    EXPECT(mms_graph_n_nodes(r.graph) == 116, "nodes %d", mms_graph_n_nodes(r.graph));
    g = plan_info(&r, true);
    EXPECT(g.lower_bound == 49182720u && g.bound_universal == 40985600u && g.no_reuse == 1024640000u,
           "bounds C %zu B %zu no-reuse %zu", g.lower_bound, g.bound_universal, g.no_reuse);
    EXPECT(g.planned <= 49182720u, "planned %zu is above ggml's 49182720", g.planned);
    ref_free(&r);
}

static void test_llama_plan_near_bound(void) {
    struct ref_graph r;
    struct mms_gallocr_buffer_info g;
    memset(&r, 0, sizeof r);
    ref_llama_layers(&r, 2, 512, MMS_TYPE_F16);
    EXPECT(ref_place_virtual(&r), "graph: %s", mms_last_error());
    g = plan_info(&r, false);
    EXPECT(g.planned <= g.lower_bound + g.lower_bound / 50, "planned %zu is more than 2%% over %zu", g.planned, g.lower_bound);
    EXPECT(g.bound_universal <= g.lower_bound && g.lower_bound <= g.no_reuse, "bounds out of order");
    ref_free(&r);
}

/* -- property test: random graphs (the generator is shared with test_sched) ---------------------- */

static bool op_is_inplace_kind(enum mms_op op) {
    switch (op) {
        case MMS_OP_ADD: case MMS_OP_SUB: case MMS_OP_MUL: case MMS_OP_DIV: case MMS_OP_SCALE: case MMS_OP_SQR:
        case MMS_OP_SQRT: case MMS_OP_EXP: case MMS_OP_TANH: case MMS_OP_SILU: case MMS_OP_GELU: case MMS_OP_GELU_TANH:
        case MMS_OP_NORM: case MMS_OP_RMS_NORM: case MMS_OP_SOFT_MAX: case MMS_OP_ROPE: return true;
        default: return false;
    }
}

/* The checker: lifetimes recomputed here from the graph; no two tensors alive at the same step may
   share a byte, except a whitelisted op writing over the source that dies at that very step. */
static int check_no_overlap(struct mms_cgraph *graph) {
    int n_nodes = mms_graph_n_nodes(graph), n_leafs = mms_graph_n_leafs(graph), n = n_nodes + n_leafs, i, j, k, bad = 0;
    struct mms_tensor **t = (struct mms_tensor **)malloc(sizeof *t * (size_t)n);
    int *first = (int *)malloc(sizeof(int) * (size_t)n), *last = (int *)malloc(sizeof(int) * (size_t)n);
    for (i = 0; i < n_leafs; i++) { t[i] = mms_graph_leaf(graph, i); first[i] = last[i] = -1; }
    for (i = 0; i < n_nodes; i++) { t[n_leafs + i] = mms_graph_node(graph, i); first[n_leafs + i] = last[n_leafs + i] = i; }
    for (i = 0; i < n; i++) {                      /* last use of each root, through views */
        for (j = 0; j < n; j++) {
            const struct mms_tensor *r = t[j]->view_src ? t[j]->view_src : t[j];
            if (r != t[i]) continue;
            if (t[j]->flags & (MMS_TENSOR_FLAG_OUTPUT | MMS_TENSOR_FLAG_INPUT)) last[i] = n_nodes;
            for (k = 0; k < n_nodes; k++) {
                int s;
                for (s = 0; s < MMS_MAX_SRC; s++) if (mms_graph_node(graph, k)->src[s] == t[j] && k > last[i]) last[i] = k;
            }
        }
    }
    for (i = 0; i < n; i++) {
        for (j = i + 1; j < n; j++) {
            const char *a0 = (const char *)t[i]->data, *b0 = (const char *)t[j]->data;
            bool mem, time, inplace;
            if (t[i]->view_src || t[j]->view_src || !t[i]->buffer || t[i]->buffer != t[j]->buffer) continue;
            if (t[i]->buffer->usage != MMS_BUFFER_USAGE_COMPUTE) continue;
            mem = a0 < b0 + mms_nbytes(t[j]) && b0 < a0 + mms_nbytes(t[i]);
            time = first[i] <= last[j] && first[j] <= last[i];
            inplace = a0 == b0 && last[i] == first[j] && op_is_inplace_kind(t[j]->op) &&
                      (t[j]->src[0] == t[i] || t[j]->src[1] == t[i]) && mms_are_same_layout(t[i], t[j]);
            if (mem && time && !inplace) {
                if (bad++ < 3) printf("    overlap: %s [%d,%d] and %s [%d,%d]\n", t[i]->name, first[i], last[i], t[j]->name, first[j], last[j]);
            }
        }
    }
    free(t); free(first); free(last);
    return bad;
}

static void test_random_graphs_against_own_memory(void) {
    const int n_graphs = 2000;
    mms_gallocr_t ga = mms_gallocr_new(mms_backend_cpu_buffer_type());
    unsigned long long base = test_rand_u64();
    int gi, failures = 0, inplace_seen = 0;
    for (gi = 0; gi < n_graphs && failures < 5; gi++) {
        unsigned long long seed = base + (unsigned long long)gi * 7919;
        struct rgen g1, g2;
        struct mms_tensor *in1[4], *in2[4];
        int n_in1, n_in2, i, k;
        struct mms_cgraph *gr1 = rg_build(&g1, seed, in1, &n_in1), *gr2 = rg_build(&g2, seed, in2, &n_in2);
        mms_backend_buffer_t own = mms_backend_alloc_ctx_tensors(g2.ctx, cpu);   /* every tensor its own memory */
        bool ok = own && rg_place_weights(&g1, NULL, 0) && rg_place_weights(&g2, NULL, 0) && mms_gallocr_alloc_graph(ga, gr1) == MMS_OK;
        if (ok) {
            rg_set_inputs(gr1, seed);
            rg_set_inputs(gr2, seed);
            ok = check_no_overlap(gr1) == 0 &&
                 mms_backend_graph_compute(cpu, gr1) == MMS_OK && mms_backend_graph_compute(cpu, gr2) == MMS_OK;
        }
        for (k = 0; ok && k < mms_gallocr_get_n_tensor_infos(ga); k++) if (mms_gallocr_get_tensor_info(ga, k)->inplace_of) inplace_seen++;
        for (i = 0; ok && i < mms_graph_n_leafs(gr1); i++)         /* inputs intact after compute */
            if ((mms_graph_leaf(gr1, i)->flags & MMS_TENSOR_FLAG_INPUT) && !same_bytes(mms_graph_leaf(gr1, i), mms_graph_leaf(gr2, i))) {
                printf("    input %s was overwritten\n", mms_graph_leaf(gr1, i)->name);
                ok = false;
            }
        for (i = 0; ok && i < mms_graph_n_nodes(gr1); i++)         /* outputs equal bit for bit */
            if ((mms_graph_node(gr1, i)->flags & MMS_TENSOR_FLAG_OUTPUT) && !same_bytes(mms_graph_node(gr1, i), mms_graph_node(gr2, i))) {
                printf("    output %s differs\n", mms_graph_node(gr1, i)->name);
                ok = false;
            }
        if (!ok) {
            failures++;
            printf("    graph %d (seed %llu) failed (last error: %s)\n", gi, seed, mms_last_error());
            mms_graph_print(gr1, stdout);
            mms_gallocr_print_plan(ga, stdout);
        }
        mms_backend_buffer_free(own);
        rg_free(&g1);
        rg_free(&g2);
    }
    EXPECT(failures == 0, "%d of %d random graphs failed", failures, gi);
    EXPECT(inplace_seen > n_graphs / 4, "in-place reuse happened only %d times: the test does not exercise it", inplace_seen);
    printf("    %d random graphs, %d in-place takeovers, %d plans, %d buffer growths\n", gi, inplace_seen,
           mms_gallocr_get_n_plans(ga), mms_gallocr_get_n_reallocs(ga));
    mms_gallocr_free(ga);
}

/* -- plan reuse, growth, staleness --------------------------------------------------------------- */

/* c = add(a, b); d = mul(c, second ? b : a): same node count, different wiring. */
static struct mms_cgraph *small_graph(struct mms_context *ctx, int64_t n, bool second, struct mms_tensor **out) {
    struct mms_tensor *a = mms_new_tensor_1d(ctx, MMS_TYPE_F32, n), *b = mms_new_tensor_1d(ctx, MMS_TYPE_F32, n);
    struct mms_tensor *c = mms_add(ctx, a, b), *d = mms_mul(ctx, c, second ? b : a);
    struct mms_cgraph *g = mms_new_graph(ctx);
    mms_set_input(a);
    mms_set_input(b);
    mms_set_output(d);
    mms_build_forward_expand(g, d);
    *out = d;
    return g;
}

static void test_plan_reuse_and_replan(void) {
    struct mms_context *ctx = test_ctx(true);
    mms_gallocr_t ga = mms_gallocr_new(mms_backend_cpu_buffer_type());
    struct mms_tensor *d;
    int plans;
    EXPECT(mms_gallocr_alloc_graph(ga, small_graph(ctx, 16, false, &d)) == MMS_OK, "first alloc: %s", mms_last_error());
    plans = mms_gallocr_get_n_plans(ga);
    EXPECT(mms_gallocr_alloc_graph(ga, small_graph(ctx, 16, false, &d)) == MMS_OK && mms_gallocr_get_n_plans(ga) == plans,
           "same topology planned again (%d plans)", mms_gallocr_get_n_plans(ga));
    EXPECT(mms_gallocr_alloc_graph(ga, small_graph(ctx, 16, true, &d)) == MMS_OK && mms_gallocr_get_n_plans(ga) == plans + 1,
           "changed wiring with the same node count was not planned again");
    EXPECT(mms_gallocr_get_n_reallocs(ga) == 0, "no growth expected yet");
    EXPECT(mms_gallocr_alloc_graph(ga, small_graph(ctx, 4096, true, &d)) == MMS_OK, "bigger graph: %s", mms_last_error());
    EXPECT(mms_gallocr_get_n_reallocs(ga) == 1 && mms_gallocr_get_buffer_size(ga, 0) >= 3 * 4096 * 4, "growth: %d reallocs, %zu bytes",
           mms_gallocr_get_n_reallocs(ga), mms_gallocr_get_buffer_size(ga, 0));
    EXPECT(mms_gallocr_alloc_graph(ga, small_graph(ctx, 16, true, &d)) == MMS_OK && mms_gallocr_get_n_reallocs(ga) == 1 &&
           mms_gallocr_get_buffer_size(ga, 0) >= 3 * 4096 * 4, "a smaller graph must not shrink or regrow the buffer");
    mms_gallocr_free(ga);
    mms_free(ctx);
}

static void test_reserve_then_alloc_same_graph(void) {
    struct mms_context *ctx = test_ctx(true);
    mms_gallocr_t ga = mms_gallocr_new(mms_backend_cpu_buffer_type());
    struct mms_tensor *d;
    struct mms_cgraph *g = small_graph(ctx, 64, false, &d);
    EXPECT(mms_gallocr_reserve(ga, g) == MMS_OK, "reserve: %s", mms_last_error());
    EXPECT(mms_gallocr_alloc_graph(ga, g) == MMS_OK && mms_gallocr_get_n_plans(ga) == 1, "alloc after reserve planned again");
    EXPECT(mms_gallocr_alloc_graph(ga, g) == MMS_OK && mms_gallocr_get_n_plans(ga) == 1, "alloc twice planned again");
    EXPECT(mms_graph_node(g, 0)->src[0] == mms_graph_leaf(g, 0), "the graph was rewired");
    mms_gallocr_free(ga);
    mms_free(ctx);
}

static void test_old_allocation_is_stale(void) {
    struct mms_context *ctx = test_ctx(true);
    mms_gallocr_t ga = mms_gallocr_new(mms_backend_cpu_buffer_type());
    struct mms_tensor *d1, *d2;
    float x[8];
    test_capture_log();
    mms_gallocr_alloc_graph(ga, small_graph(ctx, 8, false, &d1));
    mms_set_name(d1, "encoder_out");
    EXPECT(mms_backend_tensor_get(d1, x, 0, sizeof x) == MMS_OK, "fresh output readable");
    mms_gallocr_alloc_graph(ga, small_graph(ctx, 8, true, &d2));
    EXPECT_ERROR(mms_backend_tensor_get(d1, x, 0, sizeof x), MMS_ERR_STALE, "'encoder_out'", "handed out again");
    EXPECT(mms_backend_tensor_get(d2, x, 0, sizeof x) == MMS_OK, "the new output is fine");
    mms_log_set(NULL, NULL);
    mms_gallocr_free(ga);
    mms_free(ctx);
}

/* A result of one graph used by a new graph next to new ops is refused, naming it; a graph object
   rebuilt over exactly the same tensors is the same graph and is fine. */
static void test_results_of_other_graphs_are_refused(void) {
    struct mms_context *ctx = test_ctx(true);
    mms_gallocr_t ga = mms_gallocr_new(mms_backend_cpu_buffer_type());
    struct mms_tensor *a = mms_new_tensor_1d(ctx, MMS_TYPE_F32, 8), *enc = mms_set_name(mms_silu(ctx, a), "enc_out");
    struct mms_cgraph *g1 = mms_new_graph(ctx), *again = mms_new_graph(ctx), *g2 = mms_new_graph(ctx);
    char id[32];
    mms_set_input(a);
    mms_build_forward_expand(g1, enc);
    mms_build_forward_expand(again, enc);
    mms_build_forward_expand(g2, mms_scale(ctx, enc, 2.0f));
    snprintf(id, sizeof id, "graph #%llu", (unsigned long long)mms_graph_id(g1));
    EXPECT(mms_gallocr_alloc_graph(ga, g1) == MMS_OK, "alloc: %s", mms_last_error());
    EXPECT(mms_gallocr_alloc_graph(ga, again) == MMS_OK, "the same tensors in a new graph object: %s", mms_last_error());
    EXPECT(mms_gallocr_alloc_graph(ga, g1) == MMS_OK, "back to the first graph object: %s", mms_last_error());
    test_capture_log();
    EXPECT_ERROR(mms_gallocr_alloc_graph(ga, g2), MMS_ERR_STALE, "'enc_out'", id, "mms_set_persistent");
    mms_log_set(NULL, NULL);
    mms_gallocr_free(ga);
    mms_free(ctx);
}

static void test_inputs_survive_compute(void) {
    struct mms_context *ctx = test_ctx(true);
    mms_gallocr_t ga = mms_gallocr_new(mms_backend_cpu_buffer_type());
    struct mms_tensor *x = mms_new_tensor_1d(ctx, MMS_TYPE_F32, 32), *y;
    struct mms_cgraph *g = mms_new_graph(ctx);
    float in[32], back[32], out1[32], out2[32];
    int i, k;
    mms_set_input(x);
    y = mms_silu(ctx, mms_add(ctx, x, mms_scale(ctx, x, 2.0f)));   /* the add is x's last use */
    mms_set_output(y);
    mms_build_forward_expand(g, y);
    for (i = 0; i < 32; i++) in[i] = (float)i / 8.0f;
    EXPECT(mms_gallocr_alloc_graph(ga, g) == MMS_OK, "alloc: %s", mms_last_error());
    mms_backend_tensor_set(x, in, 0, sizeof in);
    mms_backend_graph_compute(cpu, g);
    mms_backend_tensor_get(y, out1, 0, sizeof out1);
    mms_backend_tensor_get(x, back, 0, sizeof back);
    EXPECT(memcmp(in, back, sizeof in) == 0, "the input was overwritten");
    mms_backend_graph_compute(cpu, g);
    mms_backend_tensor_get(y, out2, 0, sizeof out2);
    EXPECT(memcmp(out1, out2, sizeof out1) == 0, "computing twice on the same inputs differs");
    for (k = 0; k < mms_gallocr_get_n_tensor_infos(ga); k++) EXPECT(mms_gallocr_get_tensor_info(ga, k)->inplace_of != x, "in place of the input");
    mms_gallocr_set_inputs_reusable(ga, true);                   /* ggml's rule: the add may take over x */
    EXPECT(mms_gallocr_alloc_graph(ga, g) == MMS_OK, "alloc: %s", mms_last_error());
    for (i = 0, k = 0; k < mms_gallocr_get_n_tensor_infos(ga); k++) if (mms_gallocr_get_tensor_info(ga, k)->inplace_of == x) i++;
    EXPECT(i == 1, "with reusable inputs one op should take over the input (%d did)", i);
    mms_gallocr_free(ga);
    mms_free(ctx);
}

/* -- chunks, several buffers, report ------------------------------------------------------------- */

static size_t small_max(mms_backend_buffer_type_t buft) { (void)buft; return 4096; }

static void test_max_size_splits_into_chunks(void) {
    struct mms_backend_buffer_type small = *mms_backend_cpu_buffer_type();
    struct mms_context *ctx = test_ctx(true);
    mms_gallocr_t ga;
    struct mms_gallocr_buffer_info bi;
    struct mms_tensor *x = mms_new_tensor_1d(ctx, MMS_TYPE_F32, 768), *y = x, *big;
    struct mms_cgraph *g = mms_new_graph(ctx);
    float in[768], out[768];
    int i;
    small.iface.get_max_size = small_max;
    ga = mms_gallocr_new(&small);
    mms_set_input(x);
    for (i = 0; i < 6; i++) y = mms_add(ctx, mms_sqr(ctx, y), y);   /* many 3 KB tensors alive together */
    mms_set_output(y);
    mms_build_forward_expand(g, y);
    EXPECT(mms_gallocr_alloc_graph(ga, g) == MMS_OK, "alloc: %s", mms_last_error());
    EXPECT(mms_gallocr_get_buffer_info(ga, 0, &bi) == MMS_OK && bi.n_chunks >= 2, "chunks %d", bi.n_chunks);
    for (i = 0; i < 768; i++) in[i] = (float)(i % 7) / 7.0f;
    mms_backend_tensor_set(x, in, 0, sizeof in);
    EXPECT(mms_backend_graph_compute(cpu, g) == MMS_OK && mms_backend_tensor_get(y, out, 0, sizeof out) == MMS_OK, "compute");
    for (i = 0; i < 768; i++) {                                      /* the same chain in float, in the same order */
        float v = in[i];
        int r;
        for (r = 0; r < 6; r++) v = v * v + v;
        if (out[i] != v) { EXPECT(out[i] == v, "element %d: %g, want %g", i, (double)out[i], (double)v); break; }
    }
    big = mms_new_tensor_1d(ctx, MMS_TYPE_F32, 2048);
    g = mms_new_graph(ctx);
    mms_build_forward_expand(g, mms_silu(ctx, big));
    test_capture_log();
    EXPECT_ERROR(mms_gallocr_alloc_graph(ga, g), MMS_ERR_UNSUPPORTED, "8192 bytes", "4096 bytes");
    mms_log_set(NULL, NULL);
    mms_gallocr_free(ga);
    mms_free(ctx);
}

static void test_several_buffers(void) {
    struct mms_backend_buffer_type second = *mms_backend_cpu_buffer_type();
    mms_backend_buffer_type_t types[2];
    struct mms_context *ctx = test_ctx(true);
    struct mms_tensor *a = mms_new_tensor_1d(ctx, MMS_TYPE_F32, 64), *b = mms_sqr(ctx, a), *c = mms_exp(ctx, b), *d = mms_tanh(ctx, c);
    struct mms_cgraph *g = mms_new_graph(ctx), *g2;
    int node_ids[3] = { 0, 1, 1 }, leaf_ids[1] = { 0 };
    mms_gallocr_t ga;
    types[0] = mms_backend_cpu_buffer_type();
    types[1] = &second;
    ga = mms_gallocr_new_n(types, 2);
    mms_set_output(d);
    mms_build_forward_expand(g, d);
    EXPECT(mms_gallocr_reserve_n(ga, g, node_ids, leaf_ids) == MMS_OK, "reserve_n: %s", mms_last_error());
    EXPECT(mms_gallocr_alloc_graph(ga, g) == MMS_OK, "alloc: %s", mms_last_error());
    EXPECT(a->buffer->buft == types[0] && b->buffer->buft == types[0] && c->buffer->buft == &second && d->buffer->buft == &second,
           "tensors in the wrong buffers");
    EXPECT(mms_gallocr_get_buffer_size(ga, 1) > 0 && mms_gallocr_get_n_buffers(ga) == 2, "second buffer");
    test_capture_log();
    node_ids[0] = 2;
    EXPECT_ERROR(mms_gallocr_reserve_n(ga, g, node_ids, leaf_ids), MMS_ERR_INVALID_ARG, "buffer id 2");
    g2 = mms_new_graph(ctx);
    mms_build_forward_expand(g2, mms_silu(ctx, mms_new_tensor_1d(ctx, MMS_TYPE_F32, 64)));
    EXPECT_ERROR(mms_gallocr_alloc_graph(ga, g2), MMS_ERR_STATE, "mms_gallocr_reserve_n");
    mms_log_set(NULL, NULL);
    mms_gallocr_free(ga);
    mms_free(ctx);
}

static void test_report_and_picture(void) {
    struct ref_graph r;
    mms_gallocr_t ga = mms_gallocr_new(mms_backend_cpu_buffer_type());
    char line[1024];
    FILE *f;
    int rects = 0, bound = 0, k, inplace = 0;
    memset(&r, 0, sizeof r);
    ref_vit_layers(&r, 1, 0, MMS_TYPE_F32);
    EXPECT(ref_place_virtual(&r) && mms_gallocr_reserve(ga, r.graph) == MMS_OK, "reserve: %s", mms_last_error());
    for (k = 0; k < mms_gallocr_get_n_tensor_infos(ga); k++) {
        const struct mms_gallocr_tensor_info *t = mms_gallocr_get_tensor_info(ga, k);
        EXPECT(t->size > 0 && t->first_use <= t->last_use, "entry %d", k);
        if (t->inplace_of) {                                         /* same memory as the source it took over */
            int j;
            inplace++;
            for (j = 0; j < k; j++)
                if (mms_gallocr_get_tensor_info(ga, j)->tensor == t->inplace_of)
                    EXPECT(mms_gallocr_get_tensor_info(ga, j)->offset == t->offset, "entry %d is not at its source's offset", k);
        }
    }
    EXPECT(inplace > 0, "no in-place entries in the report");
    EXPECT(mms_gallocr_write_svg(ga, 0, "build/test_alloc_plan.svg") == MMS_OK, "svg: %s", mms_last_error());
    f = fopen("build/test_alloc_plan.svg", "r");
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "<rect x=", 8) == 0) rects++;
        if (strstr(line, "lower bound</text>")) bound = 1;
    }
    if (f) fclose(f);
    EXPECT(rects == mms_gallocr_get_n_tensor_infos(ga) && bound, "svg has %d rectangles for %d tensors, bound line %d",
           rects, mms_gallocr_get_n_tensor_infos(ga), bound);
    f = tmpfile();
    mms_gallocr_print_plan(ga, f);
    rewind(f);
    k = 0;
    while (fgets(line, sizeof line, f)) if (strstr(line, "lower bound")) k++;
    fclose(f);
    EXPECT(k == 1, "printed plan lacks the summary line");
    test_capture_log();
    EXPECT_ERROR(mms_gallocr_write_svg(ga, 3, "x.svg"), MMS_ERR_INVALID_ARG, "no buffer 3");
    mms_log_set(NULL, NULL);
    mms_gallocr_free(ga);
    ref_free(&r);
}

static void test_errors(void) {
    struct mms_context *ctx = test_ctx(true);
    mms_gallocr_t ga = mms_gallocr_new(mms_backend_cpu_buffer_type());
    struct mms_cgraph *g = mms_new_graph(ctx);
    struct mms_gallocr_buffer_info bi;
    test_capture_log();
    mms_build_forward_expand(g, mms_add(ctx, mms_new_tensor_1d(ctx, MMS_TYPE_F32, 3), mms_new_tensor_1d(ctx, MMS_TYPE_F32, 2)));
    EXPECT_ERROR(mms_gallocr_alloc_graph(ga, g), MMS_ERR_STATE, "not built correctly", "mms_add");
    EXPECT_ERROR(mms_gallocr_get_buffer_info(ga, 0, &bi), MMS_ERR_STATE, "nothing planned");
    EXPECT(mms_gallocr_new_n(NULL, 0) == NULL && mms_last_status() == MMS_ERR_INVALID_ARG, "new_n without types");
    mms_log_set(NULL, NULL);
    mms_gallocr_free(ga);
    mms_gallocr_free(NULL);
    mms_free(ctx);
}

int main(void) {
    test_seed();
    cpu = mms_backend_cpu_init();
    if (!cpu) { printf("cannot start the CPU backend: %s\n", mms_last_error()); return 1; }
    RUN(test_vit_plan_matches_bounds);
    RUN(test_vit_flash_plan_matches_bounds);
    RUN(test_llama_plan_near_bound);
    RUN(test_random_graphs_against_own_memory);
    RUN(test_plan_reuse_and_replan);
    RUN(test_reserve_then_alloc_same_graph);
    RUN(test_old_allocation_is_stale);
    RUN(test_results_of_other_graphs_are_refused);
    RUN(test_inputs_survive_compute);
    RUN(test_max_size_splits_into_chunks);
    RUN(test_several_buffers);
    RUN(test_report_and_picture);
    RUN(test_errors);
    mms_backend_free(cpu);
    return test_summary();
}
