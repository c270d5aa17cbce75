/* The scheduler: the original report (an encoder graph and a consumer graph on one scheduler) as
   tests, splits and copies through a second backend that the CPU cannot read, fallbacks, pins,
   persistence, poison, dumps, the trace, and a property test against single-backend runs.
   Built a second time by `make cuda` with SCHED_ON_CUDA: the same tests with the CUDA backend in
   place of the limited test backend (results then agree with the CPU to a tolerance, not to the
   bit, and the cases that need the test backend's knobs print SKIP); and a third time, by nvcc
   with SCHED_ON_HOST_CUDA, with the CUDA backend's kernels run on the host (tests/cuda_host.h). */
#if defined(SCHED_ON_CUDA) || defined(SCHED_ON_HOST_CUDA)
#define MMS_CUDA
#endif
#define MMSCHED_IMPLEMENTATION
#include "../mmsched.h"
#include "test.h"
#include "limited_backend.h"
#include "random_graphs.h"
#ifdef SCHED_ON_HOST_CUDA      /* built as CUDA C++ by nvcc: the CUDA kernels run on the host */
#include "../mmsched_cuda.cu"
#include "cuda_host.h"
#endif

static mms_backend_t cpu, dev;     /* dev: the limited backend (or CUDA), first in priority */
static bool on_cuda;

/* Equal outputs: to the bit on the limited backend (its arithmetic is the CPU's); on CUDA within
   a normalised squared error of 1e-5 (f16 products round their inputs), NaN never equal. */
static bool same_output(const float *a, const float *b, int64_t n) {
    int64_t i;
    if (!on_cuda) return memcmp(a, b, sizeof *a * (size_t)n) == 0;
    for (i = 0; i < n; i++) if (isnan(a[i]) || isnan(b[i])) return false;
    return test_nmse(b, a, n) <= 1e-5;
}

/* The cases that steer the limited backend (op masks, offload threshold, event counters). */
static bool needs_test_backend(const char *test) {
    (void)test;
    if (on_cuda) test_skip("needs the limited test backend's knobs");
    return on_cuda;
}

static mms_backend_sched_t new_sched(void) {
    mms_backend_t bs[2];
    mms_backend_sched_t s;
    bs[0] = dev;
    bs[1] = cpu;
    s = mms_backend_sched_new(bs, NULL, 2, false, false);
    EXPECT(s != NULL, "sched: %s", mms_last_error());
    return s;
}

/* -- a small model: weights on either backend --------------------------------------------------- */

enum { D_IMG = 16, N_PATCH = 8, D = 24, N_TOK = 4, N_LAYERS = 6 };

struct model {
    struct mms_context  *wctx[2];          /* weights per backend: [0] dev, [1] cpu */
    mms_backend_buffer_t wbuf[2];
    struct mms_tensor   *w_enc, *b_enc, *w_q, *w_layer[N_LAYERS], *g_layer[N_LAYERS];
};

static void fill_det(struct mms_tensor *t, unsigned seed) {
    int64_t i, n = mms_nelements(t);
    float *v = (float *)malloc(sizeof *v * (size_t)n);
    for (i = 0; i < n; i++) { seed = seed * 1103515245u + 12345u; v[i] = (float)((seed >> 9) % 2001) / 1000.0f - 1.0f; }
    EXPECT(mms_backend_tensor_set(t, v, 0, sizeof *v * (size_t)n) == MMS_OK, "set %s: %s", t->name, mms_last_error());
    free(v);
}

/* Weights of the first k layers (and the encoder when enc_on_dev) go to dev, the rest to the CPU,
   like n_gpu_layers. */
static void model_init(struct model *m, int k, bool enc_on_dev) {
    struct mms_context *c[2];
    int l, i;
    mms_backend_t owner[2];
    owner[0] = dev;
    owner[1] = cpu;
    for (i = 0; i < 2; i++) c[i] = m->wctx[i] = test_ctx(true);
    m->w_enc = mms_set_name(mms_new_tensor_2d(c[enc_on_dev ? 0 : 1], MMS_TYPE_F32, D_IMG, D), "w_enc");
    m->b_enc = mms_set_name(mms_new_tensor_1d(c[enc_on_dev ? 0 : 1], MMS_TYPE_F32, D), "b_enc");
    m->w_q = mms_set_name(mms_new_tensor_2d(c[1], MMS_TYPE_F16, D, D), "w_q");
    for (l = 0; l < N_LAYERS; l++) {
        m->w_layer[l] = mms_format_name(mms_new_tensor_2d(c[l < k ? 0 : 1], MMS_TYPE_F32, D, D), "blk.%d.w", l);
        m->g_layer[l] = mms_format_name(mms_new_tensor_1d(c[l < k ? 0 : 1], MMS_TYPE_F32, D), "blk.%d.norm", l);
    }
    for (i = 0; i < 2; i++) {
        m->wbuf[i] = mms_get_first_tensor(c[i]) ? mms_backend_alloc_ctx_tensors(c[i], owner[i]) : NULL;
        if (m->wbuf[i]) mms_backend_buffer_set_usage(m->wbuf[i], MMS_BUFFER_USAGE_WEIGHTS);
    }
    fill_det(m->w_enc, 1); fill_det(m->b_enc, 2);
    {   /* the f16 weight: values through f32 */
        float v[D * D];
        mms_fp16_t h[D * D];
        for (i = 0; i < D * D; i++) { v[i] = (float)((i * 37) % 101) / 101.0f - 0.5f; h[i] = mms_fp32_to_fp16(v[i]); }
        EXPECT(mms_backend_tensor_set(m->w_q, h, 0, sizeof h) == MMS_OK, "set w_q: %s", mms_last_error());
    }
    for (l = 0; l < N_LAYERS; l++) { fill_det(m->w_layer[l], 10 + (unsigned)l); fill_det(m->g_layer[l], 20 + (unsigned)l); }
}

static void model_free(struct model *m) {
    int i;
    for (i = 0; i < 2; i++) { mms_backend_buffer_free(m->wbuf[i]); mms_free(m->wctx[i]); }
}

/* encoder: enc = gelu(w_enc x img + b_enc), [D, N_PATCH] */
static struct mms_tensor *build_encoder(struct mms_context *ctx, struct model *m, struct mms_tensor **img) {
    *img = mms_set_name(mms_new_tensor_2d(ctx, MMS_TYPE_F32, D_IMG, N_PATCH), "img");
    mms_set_input(*img);
    return mms_set_name(mms_gelu(ctx, mms_add(ctx, mms_mul_mat(ctx, m->w_enc, *img), m->b_enc)), "enc_out");
}

/* consumer: tokens attend to the encoder output, then N_LAYERS residual layers; [D, N_TOK] */
static struct mms_tensor *build_decoder(struct mms_context *ctx, struct model *m, struct mms_tensor *enc, struct mms_tensor **tok) {
    struct mms_tensor *q, *kq, *x;
    int l;
    *tok = mms_set_name(mms_new_tensor_2d(ctx, MMS_TYPE_F32, D, N_TOK), "tokens");
    mms_set_input(*tok);
    q = mms_mul_mat(ctx, m->w_q, *tok);                                         /* [D, N_TOK] */
    kq = mms_soft_max_ext(ctx, mms_mul_mat(ctx, enc, q), NULL, 0.2f, 0.0f);     /* [N_PATCH, N_TOK] */
    x = mms_add(ctx, *tok, mms_mul_mat(ctx, mms_cont(ctx, mms_transpose(ctx, enc)), kq));
    for (l = 0; l < N_LAYERS; l++)
        x = mms_add(ctx, x, mms_mul_mat(ctx, m->w_layer[l], mms_silu(ctx, mms_mul(ctx, mms_rms_norm(ctx, x, 1e-5f), m->g_layer[l]))));
    x = mms_set_name(x, "dec_out");
    mms_set_output(x);
    return x;
}

static void set_img_and_tokens(struct mms_tensor *img, struct mms_tensor *tok) {
    if (img) fill_det(img, 77);
    if (tok) fill_det(tok, 88);
}

/* The reference: encoder and consumer in ONE graph, on a scheduler of its own. */
static void reference_output(struct model *m, float *out) {
    struct mms_context *ctx = test_ctx(true);
    mms_backend_sched_t s = new_sched();
    struct mms_tensor *img, *tok, *y = build_decoder(ctx, m, build_encoder(ctx, m, &img), &tok);
    struct mms_cgraph *g = mms_new_graph(ctx);
    mms_build_forward_expand(g, y);
    EXPECT(mms_backend_sched_alloc_graph(s, g) == MMS_OK, "alloc: %s", mms_last_error());
    set_img_and_tokens(img, tok);
    EXPECT(mms_backend_sched_graph_compute(s, g) == MMS_OK, "compute: %s", mms_last_error());
    EXPECT(mms_backend_tensor_get(y, out, 0, sizeof(float) * D * N_TOK) == MMS_OK, "read: %s", mms_last_error());
    mms_backend_sched_free(s);
    mms_free(ctx);
}

/* -- the original report ------------------------------------------------------------------------ */

/* (1) the encoder output used by the next graph without being kept: an error naming it. */
static void test_report_stale_use_is_an_error(void) {
    struct model m;
    struct mms_context *ctx = test_ctx(true);
    mms_backend_sched_t s = new_sched();
    struct mms_tensor *img, *tok, *enc, *y;
    struct mms_cgraph *g1 = mms_new_graph(ctx), *g2 = mms_new_graph(ctx);
    char from[48];
    float v[D * N_PATCH];
    model_init(&m, 3, true);
    enc = build_encoder(ctx, &m, &img);
    mms_graph_set_name(g1, "encoder");
    mms_build_forward_expand(g1, enc);
    EXPECT(mms_backend_sched_alloc_graph(s, g1) == MMS_OK, "alloc g1: %s", mms_last_error());
    set_img_and_tokens(img, NULL);
    EXPECT(mms_backend_sched_graph_compute(s, g1) == MMS_OK, "compute g1: %s", mms_last_error());
    y = build_decoder(ctx, &m, enc, &tok);
    mms_graph_set_name(g2, "decoder");
    mms_build_forward_expand(g2, y);
    snprintf(from, sizeof from, "graph #%llu", (unsigned long long)mms_graph_id(g1));
    test_capture_log();
    EXPECT_ERROR(mms_backend_sched_alloc_graph(s, g2), MMS_ERR_STALE, "'enc_out'", from, "'encoder'", "'decoder'", "mms_set_persistent");
    /* and a graph that does not use it still makes the old result stale to read */
    {
        struct mms_tensor *t2;
        struct mms_cgraph *g3 = mms_new_graph(ctx);
        mms_build_forward_expand(g3, build_decoder(ctx, &m, mms_new_tensor_2d(ctx, MMS_TYPE_F32, D, N_PATCH), &t2));
        mms_set_input(mms_graph_leaf(g3, 0));
        EXPECT(mms_backend_sched_alloc_graph(s, g3) == MMS_OK, "alloc g3: %s", mms_last_error());
        EXPECT_ERROR(mms_backend_tensor_get(enc, v, 0, sizeof v), MMS_ERR_STALE, "'enc_out'", from);
    }
    mms_log_set(NULL, NULL);
    mms_backend_sched_free(s);
    mms_free(ctx);
    model_free(&m);
}

static bool graph_has_leaf(const struct mms_cgraph *g, const struct mms_tensor *t) {
    int i;
    for (i = 0; i < mms_graph_n_leafs(g); i++) if (mms_graph_leaf(g, i) == t) return true;
    return false;
}

static int node_index(const struct mms_cgraph *g, const struct mms_tensor *t) {
    int i;
    for (i = 0; i < mms_graph_n_nodes(g); i++) if (mms_graph_node(g, i) == t) return i;
    return -1;
}

/* (1b) the same across two schedulers: the consumer's scheduler would recompute the encoder from
   an input nobody set again */
static void test_report_stale_use_across_schedulers(void) {
    struct model m;
    struct mms_context *ctx = test_ctx(true);
    mms_backend_sched_t a = new_sched(), b = new_sched();
    struct mms_tensor *img, *tok, *enc;
    struct mms_cgraph *g1 = mms_new_graph(ctx), *g2 = mms_new_graph(ctx);
    model_init(&m, 0, false);
    enc = build_encoder(ctx, &m, &img);
    mms_build_forward_expand(g1, enc);
    EXPECT(mms_backend_sched_alloc_graph(a, g1) == MMS_OK, "alloc: %s", mms_last_error());
    set_img_and_tokens(img, NULL);
    EXPECT(mms_backend_sched_graph_compute(a, g1) == MMS_OK, "compute: %s", mms_last_error());
    mms_build_forward_expand(g2, build_decoder(ctx, &m, enc, &tok));
    test_capture_log();
    EXPECT_ERROR(mms_backend_sched_alloc_graph(b, g2), MMS_ERR_STALE, "'enc_out'", "mms_set_persistent");
    mms_log_set(NULL, NULL);
    mms_backend_sched_free(a);
    mms_backend_sched_free(b);
    mms_free(ctx);
    model_free(&m);
}

/* (2) kept with mms_set_persistent: the two graphs give exactly the one-graph result. Returns the
   output for the other report tests; dummies adds unrelated nodes to the consumer graph. */
static void run_two_graphs(struct model *m, bool dummies, float *out, mms_backend_sched_t s) {
    struct mms_context *ctx = test_ctx(true);
    struct mms_tensor *img, *tok, *enc, *y;
    struct mms_cgraph *g1 = mms_new_graph(ctx), *g2 = mms_new_graph(ctx);
    enc = build_encoder(ctx, m, &img);
    mms_set_persistent(enc);
    mms_build_forward_expand(g1, enc);
    EXPECT(mms_backend_sched_alloc_graph(s, g1) == MMS_OK, "alloc g1: %s", mms_last_error());
    set_img_and_tokens(img, NULL);
    EXPECT(mms_backend_sched_graph_compute(s, g1) == MMS_OK, "compute g1: %s", mms_last_error());
    y = build_decoder(ctx, m, enc, &tok);
    if (dummies) {      /* unrelated work: it changes the plan, it must not change the answer */
        struct mms_tensor *d1 = mms_gelu(ctx, mms_scale(ctx, mms_concat(ctx, tok, tok, 1), 3.0f));
        struct mms_tensor *d2 = mms_soft_max(ctx, mms_mul_mat(ctx, enc, enc));
        mms_set_output(d1);
        mms_set_output(d2);
        mms_build_forward_expand(g2, d1);
        mms_build_forward_expand(g2, d2);
    }
    mms_build_forward_expand(g2, y);
    EXPECT(graph_has_leaf(g2, enc), "the kept encoder output is not a leaf of the consumer graph");
    EXPECT(mms_backend_sched_alloc_graph(s, g2) == MMS_OK, "alloc g2: %s", mms_last_error());
    set_img_and_tokens(NULL, tok);
    EXPECT(mms_backend_sched_graph_compute(s, g2) == MMS_OK, "compute g2: %s", mms_last_error());
    EXPECT(mms_backend_tensor_get(y, out, 0, sizeof(float) * D * N_TOK) == MMS_OK, "read: %s", mms_last_error());
    EXPECT(mms_backend_sched_release(s, enc) == MMS_OK, "release: %s", mms_last_error());
    mms_free(ctx);
}

static void test_report_persistent_hand_off(void) {
    struct model m;
    float ref[D * N_TOK], got[D * N_TOK];
    mms_backend_sched_t s = new_sched();
    model_init(&m, 3, true);
    reference_output(&m, ref);
    run_two_graphs(&m, false, got, s);
    EXPECT(same_output(ref, got, D * N_TOK), "two graphs with a persistent hand-off differ from one graph");
    mms_backend_sched_free(s);
    model_free(&m);
}

/* (3) unrelated dummy tensors leave the output bit-identical */
static void test_report_dummy_tensors_change_nothing(void) {
    struct model m;
    float a[D * N_TOK], b[D * N_TOK];
    mms_backend_sched_t s1 = new_sched(), s2 = new_sched();
    model_init(&m, 2, false);
    run_two_graphs(&m, false, a, s1);
    run_two_graphs(&m, true, b, s2);
    EXPECT(same_output(a, b, D * N_TOK), "dummy tensors changed the output");
    mms_backend_sched_free(s1);
    mms_backend_sched_free(s2);
    model_free(&m);
}

/* (4) moving the split point (first k layers on the other backend, like n_gpu_layers) */
static void test_report_split_point_changes_nothing(void) {
    float ref[D * N_TOK], got[D * N_TOK];
    int k;
    for (k = 0; k <= N_LAYERS; k++) {
        struct model m;
        mms_backend_sched_t s = new_sched();
        model_init(&m, k, k % 2 == 1);
        run_two_graphs(&m, false, k == 0 ? ref : got, s);
        if (k > 0) EXPECT(same_output(ref, got, D * N_TOK), "k = %d layers on %s changes the output", k, mms_backend_name(dev));
        if (k > 0 && k < N_LAYERS) EXPECT(mms_backend_sched_get_n_splits(s) >= 2, "k = %d: %d splits", k, mms_backend_sched_get_n_splits(s));
        mms_backend_sched_free(s);
        model_free(&m);
    }
}

/* (5) poison: a raw pointer kept into compute memory reads NaN after the next allocation */
static void test_report_poison_shows_stale_reads(void) {
    struct model m;
    struct mms_context *ctx = test_ctx(true);
    mms_backend_sched_t s = new_sched();
    struct mms_tensor *img, *enc, *tok;
    struct mms_cgraph *g1 = mms_new_graph(ctx), *g2 = mms_new_graph(ctx);
    const float *raw;
    int reallocs, i, nan = 0;
    model_init(&m, 0, false);                 /* everything on the CPU: the raw pointer is host memory */
    enc = build_encoder(ctx, &m, &img);
    mms_build_forward_expand(g1, build_decoder(ctx, &m, enc, &tok));
    mms_backend_sched_set_poison(s, true);
    EXPECT(mms_backend_sched_alloc_graph(s, g1) == MMS_OK, "alloc: %s", mms_last_error());
    set_img_and_tokens(img, tok);
    EXPECT(mms_backend_sched_graph_compute(s, g1) == MMS_OK, "compute: %s", mms_last_error());
    raw = (const float *)enc->data;          /* the mistake: keeping a pointer into compute memory */
    EXPECT(raw && !isnan(raw[0]), "the fresh value is a number");
    reallocs = mms_backend_sched_get_n_reallocs(s);
    {                                        /* a different, smaller graph on the same scheduler */
        struct mms_tensor *x = mms_new_tensor_1d(ctx, MMS_TYPE_F32, 16);
        mms_set_input(x);
        mms_build_forward_expand(g2, mms_silu(ctx, x));
    }
    EXPECT(mms_backend_sched_alloc_graph(s, g2) == MMS_OK, "alloc g2: %s", mms_last_error());
    EXPECT(mms_backend_sched_get_n_reallocs(s) == reallocs, "the buffer moved: the raw pointer would dangle");
    for (i = 0; i < D * N_PATCH; i++) nan += isnan(raw[i]) ? 1 : 0;
    EXPECT(nan == D * N_PATCH, "only %d of %d stale values read as NaN", nan, D * N_PATCH);
    mms_backend_sched_free(s);
    mms_free(ctx);
    model_free(&m);
}

/* -- splits, copies, fallbacks, pins --------------------------------------------------------------- */

static void test_fallback_and_copies(void) {
    if (needs_test_backend(__func__)) return;
    struct model m;
    float ref[D * N_TOK], got[D * N_TOK];
    struct limited_backend *lb = limited_of(dev);
    uint64_t saved = lb->op_mask;
    mms_backend_sched_t s;
    model_init(&m, N_LAYERS, true);
    reference_output(&m, ref);
    lb->op_mask = limited_op_bit(MMS_OP_MUL_MAT) | limited_op_bit(MMS_OP_ADD);   /* no softmax, norms, gelu, silu */
    s = new_sched();
    run_two_graphs(&m, false, got, s);
    EXPECT(same_output(ref, got, D * N_TOK), "fallbacks changed the output");
    EXPECT(mms_backend_sched_get_n_splits(s) > 4 && mms_backend_sched_get_n_split_inputs(s) > 4, "splits %d inputs %d",
           mms_backend_sched_get_n_splits(s), mms_backend_sched_get_n_split_inputs(s));
    EXPECT(lb->n_events_recorded > 0, "events were never recorded");
    lb->op_mask = saved;
    mms_backend_sched_free(s);
    model_free(&m);
}

static void test_pins_and_queries(void) {
    if (needs_test_backend(__func__)) return;
    struct model m;
    struct mms_context *ctx = test_ctx(true);
    mms_backend_sched_t s = new_sched();
    struct mms_tensor *img, *enc, *tok, *y;
    struct mms_cgraph *g = mms_new_graph(ctx);
    struct limited_backend *lb = limited_of(dev);
    float ref[D * N_TOK], got[D * N_TOK];
    model_init(&m, 0, false);
    reference_output(&m, ref);
    enc = build_encoder(ctx, &m, &img);
    y = build_decoder(ctx, &m, enc, &tok);
    mms_build_forward_expand(g, y);
    EXPECT(mms_backend_sched_set_tensor_backend(s, enc, dev) == MMS_OK, "pin: %s", mms_last_error());
    EXPECT(mms_backend_sched_alloc_graph(s, g) == MMS_OK, "alloc: %s", mms_last_error());
    EXPECT(mms_backend_sched_get_tensor_backend(s, enc) == dev, "the pin was ignored");
    EXPECT(mms_backend_sched_get_tensor_backend(s, y) == cpu, "the output should run where its weights are");
    EXPECT(mms_backend_sched_get_n_backends(s) == 2 && mms_backend_sched_get_backend(s, 0) == dev, "backends");
    EXPECT(mms_backend_sched_get_buffer_size(s, dev) > 0 && mms_backend_sched_get_buffer_size(s, cpu) > 0, "buffers");
    set_img_and_tokens(img, tok);
    EXPECT(mms_backend_sched_graph_compute(s, g) == MMS_OK, "compute: %s", mms_last_error());
    EXPECT(mms_backend_tensor_get(y, got, 0, sizeof got) == MMS_OK, "read: %s", mms_last_error());
    EXPECT(same_output(ref, got, D * N_TOK), "a pin changed the output");
    test_capture_log();
    lb->op_mask = 0;
    mms_backend_sched_reset(s);
    EXPECT(mms_backend_sched_set_tensor_backend(s, enc, dev) == MMS_OK, "pin");
    EXPECT_ERROR(mms_backend_sched_alloc_graph(s, g), MMS_ERR_UNSUPPORTED, "'enc_out'", "pinned to", "GELU");
    lb->op_mask = LIMITED_ALL_OPS;
    EXPECT_ERROR(mms_backend_sched_set_tensor_backend(s, enc, NULL), MMS_ERR_INVALID_ARG, "not one of the scheduler's");
    EXPECT_ERROR(mms_backend_sched_release(s, enc), MMS_ERR_INVALID_ARG, "not a persistent tensor");
    mms_log_set(NULL, NULL);
    mms_backend_sched_free(s);
    mms_free(ctx);
    model_free(&m);
}

/* Host weights, a large batch, op_offload: the product runs on dev and its weight is copied in. */
static void test_offload_large_batches(void) {
    if (needs_test_backend(__func__)) return;
    struct mms_context *ctx = test_ctx(true), *wctx = test_ctx(true);
    struct limited_backend *lb = limited_of(dev);
    mms_backend_t bs[2];
    mms_backend_sched_t s;
    struct mms_tensor *w = mms_set_name(mms_new_tensor_2d(wctx, MMS_TYPE_F32, 32, 16), "w"), *x, *y, *small;
    struct mms_cgraph *g = mms_new_graph(ctx);
    mms_backend_buffer_t wb = mms_backend_alloc_ctx_tensors(wctx, cpu);
    float ref[16 * 64], got[16 * 64];
    int i;
    mms_backend_buffer_set_usage(wb, MMS_BUFFER_USAGE_WEIGHTS);
    fill_det(w, 5);
    x = mms_new_tensor_2d(ctx, MMS_TYPE_F32, 32, 64);            /* 64 columns: a large batch */
    mms_set_input(x);
    y = mms_set_name(mms_mul_mat(ctx, w, x), "big");
    small = mms_set_name(mms_mul_mat(ctx, w, mms_view_2d(ctx, x, 32, 2, x->nb[1], 0)), "small");
    mms_set_output(y);
    mms_set_output(small);
    mms_build_forward_expand(g, y);
    mms_build_forward_expand(g, small);
    bs[0] = dev;
    bs[1] = cpu;
    lb->offload_min_batch = 32;
    for (i = 0; i < 2; i++) {                                    /* without, then with offload */
        FILE *f = tmpfile();
        char line[512];
        int offloaded = 0;
        s = mms_backend_sched_new(bs, NULL, 2, false, i == 1);
        mms_backend_sched_set_debug(s, 2, f);
        EXPECT(mms_backend_sched_alloc_graph(s, g) == MMS_OK, "alloc: %s", mms_last_error());
        fill_det(x, 6);
        EXPECT(mms_backend_sched_graph_compute(s, g) == MMS_OK, "compute: %s", mms_last_error());
        EXPECT(mms_backend_tensor_get(y, i == 0 ? ref : got, 0, sizeof ref) == MMS_OK, "read: %s", mms_last_error());
        EXPECT(mms_backend_sched_get_tensor_backend(s, y) == (i == 1 ? dev : cpu), "pass %d: 'big' ran on %s", i,
               mms_backend_name(mms_backend_sched_get_tensor_backend(s, y)));
        EXPECT(mms_backend_sched_get_tensor_backend(s, small) == cpu, "a small batch must stay with its weights");
        rewind(f);
        while (fgets(line, sizeof line, f)) offloaded += strstr(line, "'big'") && strstr(line, "offloaded") ? 1 : 0;
        fclose(f);
        EXPECT(offloaded == i, "pass %d: %d trace lines say 'big' was offloaded", i, offloaded);
        mms_backend_sched_free(s);
    }
    EXPECT(same_output(ref, got, 16 * 64), "offloading changed the result");
    lb->offload_min_batch = 0;
    mms_backend_buffer_free(wb);
    mms_free(wctx);
    mms_free(ctx);
}

/* parallel: several copies of each split input, used in turn by consecutive graphs */
static void test_pipeline_copies(void) {
    struct model m;
    mms_backend_t bs[2];
    mms_backend_sched_t s;
    float ref[D * N_TOK], got[D * N_TOK];
    int round;
    bs[0] = dev;
    bs[1] = cpu;
    model_init(&m, 3, true);
    reference_output(&m, ref);
    s = mms_backend_sched_new(bs, NULL, 2, true, false);
    EXPECT(mms_backend_sched_get_n_copies(s) > 1, "parallel gives %d copies", mms_backend_sched_get_n_copies(s));
    for (round = 0; round < 6; round++) {
        struct mms_context *ctx = test_ctx(true);
        struct mms_tensor *img, *tok, *y = build_decoder(ctx, &m, build_encoder(ctx, &m, &img), &tok);
        struct mms_cgraph *g = mms_new_graph(ctx);
        mms_build_forward_expand(g, y);
        EXPECT(mms_backend_sched_alloc_graph(s, g) == MMS_OK, "alloc: %s", mms_last_error());
        set_img_and_tokens(img, tok);
        EXPECT(mms_backend_sched_graph_compute(s, g) == MMS_OK, "compute: %s", mms_last_error());
        EXPECT(mms_backend_tensor_get(y, got, 0, sizeof got) == MMS_OK, "read: %s", mms_last_error());
        EXPECT(same_output(ref, got, D * N_TOK), "round %d differs", round);
        mms_free(ctx);
    }
    mms_backend_sched_free(s);
    model_free(&m);
}

/* -- allocation rules ---------------------------------------------------------------------------- */

static void test_reserve_alloc_and_wrong_graph(void) {
    struct model m;
    struct mms_context *ctx = test_ctx(true);
    mms_backend_sched_t s = new_sched();
    struct mms_tensor *img, *tok, *y, *src_before[MMS_MAX_SRC];
    struct mms_cgraph *g = mms_new_graph(ctx), *other = mms_new_graph(ctx);
    mms_gallocr_t ga = mms_backend_sched_get_gallocr(s);
    int plans, i, j, rewired = 0;
    model_init(&m, 3, true);
    y = build_decoder(ctx, &m, build_encoder(ctx, &m, &img), &tok);
    mms_build_forward_expand(g, y);
    for (j = 0; j < MMS_MAX_SRC; j++) src_before[j] = y->src[j];
    EXPECT(mms_backend_sched_reserve(s, g) == MMS_OK, "reserve: %s", mms_last_error());
    plans = mms_gallocr_get_n_plans(ga);
    EXPECT(mms_backend_sched_alloc_graph(s, g) == MMS_OK && mms_gallocr_get_n_plans(ga) == plans, "alloc after reserve planned again");
    EXPECT(mms_backend_sched_alloc_graph(s, g) == MMS_OK && mms_gallocr_get_n_plans(ga) == plans, "alloc twice planned again");
    for (j = 0; j < MMS_MAX_SRC; j++) rewired += y->src[j] != src_before[j];
    for (i = 0; i < mms_graph_n_nodes(g); i++)
        for (j = 0; j < MMS_MAX_SRC; j++) {
            const struct mms_tensor *sj = mms_graph_node(g, i)->src[j];
            if (sj && strchr(sj->name, '#')) rewired++;   /* a copy's name, "<backend>#<src>#<n>" */
        }
    EXPECT(rewired == 0 && mms_backend_sched_get_n_split_inputs(s) > 0, "the caller's graph was rewired (%d)", rewired);
    {
        struct mms_tensor *x = mms_new_tensor_1d(ctx, MMS_TYPE_F32, 5);
        mms_set_input(x);
        mms_build_forward_expand(other, mms_silu(ctx, x));
    }
    test_capture_log();
    EXPECT_ERROR(mms_backend_sched_graph_compute(s, other), MMS_ERR_STATE, "is the one allocated");
    mms_log_set(NULL, NULL);
    mms_backend_sched_free(s);
    mms_free(ctx);
    model_free(&m);
}

static void test_growing_graph_replans_and_counts(void) {
    struct mms_context *ctx = test_ctx(true);
    mms_backend_sched_t s = new_sched();
    int n, reallocs = 0;
    for (n = 16; n <= 4096; n *= 4) {
        struct mms_tensor *x = mms_new_tensor_1d(ctx, MMS_TYPE_F32, n);
        struct mms_cgraph *g = mms_new_graph(ctx);
        mms_set_input(x);
        mms_build_forward_expand(g, mms_gelu(ctx, mms_sqr(ctx, x)));
        EXPECT(mms_backend_sched_alloc_graph(s, g) == MMS_OK, "alloc n=%d: %s", n, mms_last_error());
        EXPECT(mms_backend_sched_get_buffer_size(s, cpu) >= (size_t)n * 4, "buffer too small for n=%d", n);
        reallocs = mms_backend_sched_get_n_reallocs(s);
    }
    EXPECT(reallocs >= 3, "growth was not counted (%d)", reallocs);
    mms_backend_sched_free(s);
    mms_free(ctx);
}

static void test_persistent_on_other_backend_and_release(void) {
    struct model m;
    struct mms_context *ctx = test_ctx(true);
    mms_backend_sched_t s = new_sched();
    struct mms_tensor *img, *enc, *y, *x;
    struct mms_cgraph *g1 = mms_new_graph(ctx), *g2 = mms_new_graph(ctx), *g3 = mms_new_graph(ctx);
    float v[D * N_PATCH];
    model_init(&m, 0, true);                 /* the encoder runs on dev, its result is kept there */
    enc = build_encoder(ctx, &m, &img);
    mms_set_persistent(enc);
    mms_build_forward_expand(g1, enc);
    EXPECT(mms_backend_sched_alloc_graph(s, g1) == MMS_OK, "alloc: %s", mms_last_error());
    EXPECT(mms_backend_sched_get_tensor_backend(s, enc) == dev && mms_backend_sched_get_persistent_size(s, dev) >= sizeof v,
           "kept on %s, %zu bytes", mms_backend_name(mms_backend_sched_get_tensor_backend(s, enc)), mms_backend_sched_get_persistent_size(s, dev));
    set_img_and_tokens(img, NULL);
    EXPECT(mms_backend_sched_graph_compute(s, g1) == MMS_OK, "compute: %s", mms_last_error());
    y = mms_scale(ctx, enc, 2.0f);           /* a CPU-only graph reading it */
    mms_set_output(y);
    EXPECT(mms_backend_sched_set_tensor_backend(s, y, cpu) == MMS_OK, "pin: %s", mms_last_error());
    mms_build_forward_expand(g2, y);
    EXPECT(mms_graph_n_leafs(g2) == 1 && mms_graph_leaf(g2, 0) == enc, "a kept tensor is a leaf of later graphs");
    EXPECT(mms_backend_sched_alloc_graph(s, g2) == MMS_OK && mms_backend_sched_graph_compute(s, g2) == MMS_OK, "g2: %s", mms_last_error());
    EXPECT(mms_backend_sched_get_n_split_inputs(s) == 1, "the kept tensor should be copied to the CPU once");
    {
        float a[D * N_PATCH], b[D * N_PATCH];
        int i, bad = 0;
        EXPECT(mms_backend_tensor_get(enc, a, 0, sizeof a) == MMS_OK, "read: %s", mms_last_error());
        EXPECT(mms_backend_tensor_get(y, b, 0, sizeof b) == MMS_OK, "read: %s", mms_last_error());
        for (i = 0; i < D * N_PATCH; i++) bad += b[i] != 2.0f * a[i];
        EXPECT(bad == 0, "%d wrong values", bad);
    }
    EXPECT(mms_backend_sched_release(s, enc) == MMS_OK, "release");
    x = mms_silu(ctx, enc);
    mms_build_forward_expand(g3, x);
    test_capture_log();
    EXPECT_ERROR(mms_backend_tensor_get(enc, v, 0, sizeof v), MMS_ERR_STALE, "freed");
    EXPECT_ERROR(mms_backend_sched_alloc_graph(s, g3), MMS_ERR_STALE, "'enc_out'", "freed");
    mms_log_set(NULL, NULL);
    mms_backend_sched_free(s);
    mms_free(ctx);
    model_free(&m);
}

/* -- callbacks, dumps, the trace ------------------------------------------------------------------- */

struct cb_state { int asked, seen, stop_after; };
static bool count_cb(struct mms_tensor *t, bool ask, void *user) {
    struct cb_state *st = (struct cb_state *)user;
    float v;
    if (ask) { st->asked++; return strcmp(t->name, "enc_out") == 0 || st->stop_after > 0; }
    st->seen++;
    if (mms_backend_tensor_get(t, &v, 0, sizeof v) != MMS_OK) return false;
    return !(st->stop_after > 0 && st->seen >= st->stop_after);
}

static void test_eval_callback_and_dump(void) {
    struct model m;
    struct mms_context *ctx = test_ctx(true);
    mms_backend_sched_t s = new_sched();
    struct mms_tensor *img, *tok, *enc;
    struct mms_cgraph *g = mms_new_graph(ctx);
    struct cb_state st = { 0, 0, 0 };
    char line[512], path[256];
    FILE *f;
    model_init(&m, 2, true);
    enc = build_encoder(ctx, &m, &img);
    mms_set_output(enc);                     /* read again at the end, so its memory must survive */
    mms_build_forward_expand(g, build_decoder(ctx, &m, enc, &tok));
    mms_backend_sched_set_eval_callback(s, count_cb, &st);
    EXPECT(mms_backend_sched_set_dump(s, "enc_o?t", "build") == MMS_OK, "dump setting");
    EXPECT(mms_backend_sched_alloc_graph(s, g) == MMS_OK, "alloc: %s", mms_last_error());
    set_img_and_tokens(img, tok);
    EXPECT(mms_backend_sched_graph_compute(s, g) == MMS_OK, "compute: %s", mms_last_error());
    EXPECT(st.seen == 1 && st.asked > 10, "callback saw %d, asked %d", st.seen, st.asked);
    snprintf(path, sizeof path, "build/mms-dump-g%llu-n%d-enc_out.bin", (unsigned long long)mms_graph_id(g), node_index(g, enc));
    f = fopen(path, "rb");
    EXPECT(f != NULL, "no dump file %s", path);
    if (f) {
        float data[D * N_PATCH], want[D * N_PATCH];
        uint64_t h = 0xcbf29ce484222325ULL;
        char hex[32];
        size_t i;
        EXPECT(fgets(line, sizeof line, f) && strstr(line, "mmsched-dump name=enc_out type=f32 ne=24,8,1,1 bytes=768"), "header: %s", line);
        EXPECT(fread(data, 1, sizeof data, f) == sizeof data, "data");
        fclose(f);
        EXPECT(mms_backend_tensor_get(enc, want, 0, sizeof want) == MMS_OK, "read: %s", mms_last_error());
        for (i = 0; i < sizeof data; i++) { h ^= ((unsigned char *)data)[i]; h *= 0x100000001b3ULL; }
        snprintf(hex, sizeof hex, "fnv1a64=%016llx", (unsigned long long)h);
        EXPECT(memcmp(data, want, sizeof data) == 0 && strstr(line, hex), "dumped data or checksum differ (%s)", hex);
        remove(path);
    }
    st.stop_after = 3;
    st.seen = 0;
    EXPECT(mms_backend_sched_set_dump(s, "", NULL) == MMS_OK, "dump off: %s", mms_last_error());
    test_capture_log();
    EXPECT_ERROR(mms_backend_sched_graph_compute(s, g), MMS_ABORTED, "stopped the graph");
    mms_log_set(NULL, NULL);
    mms_backend_sched_free(s);
    mms_free(ctx);
    model_free(&m);
}

static void test_debug_trace(void) {
    if (needs_test_backend(__func__)) return;
    struct model m;
    struct mms_context *ctx = test_ctx(true);
    mms_backend_sched_t s = new_sched();
    struct mms_tensor *img, *tok, *enc;
    struct mms_cgraph *g = mms_new_graph(ctx);
    struct limited_backend *lb = limited_of(dev);
    FILE *f = tmpfile();
    char line[1024];
    int splits = 0, copies = 0, weights = 0, fallback = 0, spread = 0, input = 0, live = 0;
    model_init(&m, 3, true);
    lb->op_mask = LIMITED_ALL_OPS & ~limited_op_bit(MMS_OP_SOFT_MAX);
    enc = build_encoder(ctx, &m, &img);
    mms_build_forward_expand(g, build_decoder(ctx, &m, enc, &tok));
    mms_graph_set_name(g, "traced");
    mms_backend_sched_set_debug(s, 2, f);
    EXPECT(mms_backend_sched_alloc_graph(s, g) == MMS_OK, "alloc: %s", mms_last_error());
    rewind(f);
    while (fgets(line, sizeof line, f)) {
        splits += strstr(line, "## split") != NULL;
        copies += strstr(line, "    copy ") != NULL && strstr(line, " from ") != NULL;
        weights += strstr(line, "its weights are there") != NULL;
        fallback += strstr(line, "SOFT_MAX") != NULL && strstr(line, "on CPU") != NULL;
        spread += strstr(line, "next to its neighbours") != NULL;
        input += strstr(line, "(graph input)") != NULL || strstr(line, "'img'") != NULL;
        live += strstr(line, "offset ") != NULL && strstr(line, "live ") != NULL;
    }
    fclose(f);
    EXPECT(splits == mms_backend_sched_get_n_splits(s) && splits >= 3, "%d split lines for %d splits", splits, mms_backend_sched_get_n_splits(s));
    EXPECT(copies == mms_backend_sched_get_n_split_inputs(s), "%d copy lines for %d inputs", copies, mms_backend_sched_get_n_split_inputs(s));
    EXPECT(weights > 0 && fallback > 0 && spread > 0 && input > 0 && live > 10,
           "reasons: weights %d, fallback %d, spread %d, input %d; %d lines with offsets", weights, fallback, spread, input, live);
    lb->op_mask = LIMITED_ALL_OPS;
    mms_backend_sched_free(s);
    mms_free(ctx);
    model_free(&m);
}

/* -- property test ------------------------------------------------------------------------------ */

struct placement { unsigned long long rng; };
static unsigned pl_next(struct placement *p, unsigned n) {
    p->rng = p->rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)(p->rng >> 33) % n;
}
/* same_bytes, or on CUDA float outputs within same_output's tolerance */
static bool same_result(const struct mms_tensor *a, const struct mms_tensor *b) {
    const int64_t n = mms_nelements(a);
    float *x, *y;
    bool ok;
    if (!on_cuda || !mms_get_type_traits(a->type)->is_float) return same_bytes(a, b);
    x = (float *)malloc(sizeof *x * (size_t)n);
    y = (float *)malloc(sizeof *y * (size_t)n);
    ok = x && y && test_get_floats(a, x) && test_get_floats(b, y) && same_output(y, x, n);
    if (!ok && x && y) {
        int64_t i, worst = 0;
        for (i = 1; i < n; i++) if (fabs((double)x[i] - y[i]) > fabs((double)x[worst] - y[worst])) worst = i;
        printf("    NMSE %.3g; largest difference at %lld: %g here, %g on the CPU\n", test_nmse(x, y, n), (long long)worst, x[worst], y[worst]);
    }
    free(x);
    free(y);
    return ok;
}

static mms_backend_buffer_type_t random_buft(void *user, int i) {   /* each weight on a random backend */
    (void)i;
    return pl_next((struct placement *)user, 2) ? mms_backend_get_default_buffer_type(dev) : mms_backend_cpu_buffer_type();
}

static void test_random_graphs_on_two_backends(void) {
    const int n_graphs = 300;
    struct limited_backend *lb = on_cuda ? NULL : limited_of(dev);
    unsigned long long base = test_rand_u64();
    int gi, failures = 0, splits = 0, copies = 0;
    for (gi = 0; gi < n_graphs && failures < 3; gi++) {
        unsigned long long seed = base + (unsigned long long)gi * 104729;
        struct rgen ga, gb;
        struct mms_tensor *in_a[4], *in_b[4];
        struct placement pl;
        int n_a, n_b, i, op;
        struct mms_cgraph *gra = rg_build(&ga, seed, in_a, &n_a), *grb = rg_build(&gb, seed, in_b, &n_b);
        mms_backend_sched_t s = new_sched();
        mms_backend_buffer_t own = mms_backend_alloc_ctx_tensors(gb.ctx, cpu);
        bool ok;
        pl.rng = seed;
        if (lb) {                                               /* a random subset of ops on dev */
            lb->op_mask = limited_op_bit(MMS_OP_MUL_MAT);
            for (op = 0; op < MMS_OP_COUNT; op++) if (pl_next(&pl, 3)) lb->op_mask |= limited_op_bit((enum mms_op)op);
        }
        ok = own && rg_place_weights(&ga, random_buft, &pl) && rg_place_weights(&gb, NULL, 0);
        for (i = 0; ok && i < mms_graph_n_nodes(gra); i++) {   /* random pins where the op runs */
            struct mms_tensor *t = mms_graph_node(gra, i);
            mms_backend_t b = pl_next(&pl, 2) ? cpu : dev;
            if (pl_next(&pl, 5) == 0 && !mms_op_is_view(t->op) && mms_backend_supports_op(b, t))
                ok = mms_backend_sched_set_tensor_backend(s, t, b) == MMS_OK;
        }
        if (ok) ok = mms_backend_sched_alloc_graph(s, gra) == MMS_OK;
        if (ok) {
            rg_set_inputs(gra, seed);
            rg_set_inputs(grb, seed);
            ok = mms_backend_sched_graph_compute(s, gra) == MMS_OK && mms_backend_graph_compute(cpu, grb) == MMS_OK;
        }
        splits += mms_backend_sched_get_n_splits(s);
        copies += mms_backend_sched_get_n_split_inputs(s);
        for (i = 0; ok && i < mms_graph_n_nodes(gra); i++)
            if ((mms_graph_node(gra, i)->flags & MMS_TENSOR_FLAG_OUTPUT) && !same_result(mms_graph_node(gra, i), mms_graph_node(grb, i))) {
                printf("    output %s (%s %s) differs\n", mms_graph_node(gra, i)->name, mms_op_name(mms_graph_node(gra, i)->op),
                       mms_type_name(mms_graph_node(gra, i)->type));
                ok = false;
            }
        if (!ok) {
            failures++;
            printf("    graph %d (seed %llu) failed (last error: %s)\n", gi, seed, mms_last_error());
            mms_backend_sched_set_debug(s, 2, stdout);
            (void)mms_backend_sched_alloc_graph(s, gra);   /* again, for the trace of where each op went */
        }
        mms_backend_sched_free(s);
        mms_backend_buffer_free(own);
        rg_free(&ga);
        rg_free(&gb);
    }
    if (lb) lb->op_mask = LIMITED_ALL_OPS;
    EXPECT(failures == 0, "%d of %d random graphs failed", failures, gi);
    /* without the random op masks (CUDA) the graphs split less */
    EXPECT(splits > (lb ? 2 : 1) * gi && copies > gi, "the graphs were not split enough to test anything (%d splits, %d copies)", splits, copies);
    printf("    %d random graphs, %d splits, %d copies\n", gi, splits, copies);
}

int main(void) {
    test_seed();
    cpu = mms_backend_cpu_init();
#if defined(SCHED_ON_HOST_CUDA)
    on_cuda = true;
    dev = emulated_gpu_new();
#elif defined(SCHED_ON_CUDA)
    on_cuda = true;
    dev = mms_backend_cuda_init(0);
    if (!dev) {
        mms_backend_free(cpu);
        return test_skip_all("test_sched on CUDA", mms_last_error());
    }
#else
    dev = limited_backend_new("TEST", LIMITED_ALL_OPS);
#endif
    if (!cpu || !dev) { printf("cannot start the backends: %s\n", mms_last_error()); return 1; }
    mms_backend_cpu_set_n_threads(cpu, 2);
    RUN(test_report_stale_use_is_an_error);
    RUN(test_report_stale_use_across_schedulers);
    RUN(test_report_persistent_hand_off);
    RUN(test_report_dummy_tensors_change_nothing);
    RUN(test_report_split_point_changes_nothing);
    RUN(test_report_poison_shows_stale_reads);
    RUN(test_fallback_and_copies);
    RUN(test_pins_and_queries);
    RUN(test_offload_large_batches);
    RUN(test_pipeline_copies);
    RUN(test_reserve_alloc_and_wrong_graph);
    RUN(test_growing_graph_replans_and_counts);
    RUN(test_persistent_on_other_backend_and_release);
    RUN(test_eval_callback_and_dump);
    RUN(test_debug_trace);
    RUN(test_random_graphs_on_two_backends);
    mms_backend_free(dev);
    mms_backend_free(cpu);
    return test_summary();
}
