/* two_graphs.c - an encoder graph and a consumer graph on ONE scheduler, the wrong way and the
   right way.

   This is the bug mmsched exists for: a vision encoder's output, left in compute memory, was
   silently overwritten when the language model's graph was allocated on the same scheduler.
   Here the wrong way is reported (naming the tensor, the graph it came from and the fix), and the
   right way - one call, mms_set_persistent - gives exactly the numbers of computing everything
   in a single graph.

   Build and run: make examples && build/two_graphs */
#define MMSCHED_IMPLEMENTATION
#include "mmsched.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { D_IN = 32, N_PATCH = 16, D = 48, N_TOK = 5 };

struct weights { struct mms_context *ctx; mms_backend_buffer_t buf; struct mms_tensor *w_enc, *w_q, *w_out; };

static void fill(struct mms_tensor *t, unsigned seed, float scale) {
    int64_t i, n = mms_nelements(t);
    float *v = (float *)malloc(sizeof *v * (size_t)n);
    for (i = 0; i < n; i++) { seed = seed * 1664525u + 1013904223u; v[i] = scale * ((float)(seed >> 8) / 8388608.0f - 1.0f); }
    mms_backend_tensor_set(t, v, 0, sizeof *v * (size_t)n);
    free(v);
}

/* The "image" encoder: patches -> features [D, N_PATCH]. */
static struct mms_tensor *encoder(struct mms_context *ctx, const struct weights *w, struct mms_tensor **img) {
    *img = mms_set_name(mms_new_tensor_2d(ctx, MMS_TYPE_F32, D_IN, N_PATCH), "patches");
    mms_set_input(*img);
    return mms_set_name(mms_gelu(ctx, mms_mul_mat(ctx, w->w_enc, *img)), "image_features");
}

/* The consumer: tokens attend to the image features (cross-attention), [D, N_TOK]. */
static struct mms_tensor *consumer(struct mms_context *ctx, const struct weights *w, struct mms_tensor *feat, struct mms_tensor **tok) {
    struct mms_tensor *q, *att, *out;
    *tok = mms_set_name(mms_new_tensor_2d(ctx, MMS_TYPE_F32, D, N_TOK), "tokens");
    mms_set_input(*tok);
    q = mms_mul_mat(ctx, w->w_q, *tok);
    att = mms_soft_max_ext(ctx, mms_mul_mat(ctx, feat, q), NULL, 1.0f / sqrtf((float)D), 0.0f);   /* [N_PATCH, N_TOK] */
    out = mms_mul_mat(ctx, w->w_out, mms_add(ctx, *tok, mms_mul_mat(ctx, mms_cont(ctx, mms_transpose(ctx, feat)), att)));
    mms_set_output(out);
    return mms_set_name(out, "answer");
}

static void quiet(enum mms_log_level level, const char *message, void *user) { (void)level; (void)message; (void)user; }

static int compute(mms_backend_sched_t s, struct mms_cgraph *g, struct mms_tensor *img, struct mms_tensor *tok) {
    if (mms_backend_sched_alloc_graph(s, g) != MMS_OK) return 0;
    if (img) fill(img, 7, 1.0f);                  /* inputs are set after allocation */
    if (tok) fill(tok, 9, 1.0f);
    return mms_backend_sched_graph_compute(s, g) == MMS_OK;
}

int main(void) {
    struct mms_init_params p = { 0, NULL, true };
    mms_backend_t cpu = mms_backend_cpu_init();
    mms_backend_sched_t sched;
    struct weights w;
    struct mms_context *ctx;
    struct mms_tensor *img, *tok, *feat, *answer;
    struct mms_cgraph *g_enc, *g_use, *g_one;
    float reference[D * N_TOK], result[D * N_TOK];
    int reported, i, same;

    if (!cpu) { fprintf(stderr, "%s\n", mms_last_error()); return 1; }
    sched = mms_backend_sched_new(&cpu, NULL, 1, false, false);
    w.ctx = mms_init(p);
    w.w_enc = mms_new_tensor_2d(w.ctx, MMS_TYPE_F32, D_IN, D);
    w.w_q = mms_new_tensor_2d(w.ctx, MMS_TYPE_F32, D, D);
    w.w_out = mms_new_tensor_2d(w.ctx, MMS_TYPE_F32, D, D);
    w.buf = mms_backend_alloc_ctx_tensors(w.ctx, cpu);
    if (!sched || !w.buf) { fprintf(stderr, "%s\n", mms_last_error()); return 1; }
    mms_backend_buffer_set_usage(w.buf, MMS_BUFFER_USAGE_WEIGHTS);
    fill(w.w_enc, 1, 0.2f);
    fill(w.w_q, 2, 0.2f);
    fill(w.w_out, 3, 0.2f);

    /* The reference: encoder and consumer in one graph. */
    ctx = mms_init(p);
    answer = consumer(ctx, &w, encoder(ctx, &w, &img), &tok);
    g_one = mms_new_graph(ctx);
    mms_build_forward_expand(g_one, answer);
    if (!compute(sched, g_one, img, tok)) { fprintf(stderr, "%s\n", mms_last_error()); return 1; }
    mms_backend_tensor_get(answer, reference, 0, sizeof reference);
    mms_free(ctx);

    /* 1. The wrong way: the encoder's output stays in compute memory, the next graph uses it. */
    printf("1. the wrong way: the encoder output is not kept\n");
    ctx = mms_init(p);
    feat = encoder(ctx, &w, &img);
    g_enc = mms_new_graph(ctx);
    mms_graph_set_name(g_enc, "encoder");
    mms_build_forward_expand(g_enc, feat);
    compute(sched, g_enc, img, NULL);
    answer = consumer(ctx, &w, feat, &tok);
    g_use = mms_new_graph(ctx);
    mms_graph_set_name(g_use, "consumer");
    mms_build_forward_expand(g_use, answer);
    mms_log_set(quiet, NULL);                     /* the message is printed below, once */
    reported = mms_backend_sched_alloc_graph(sched, g_use) == MMS_ERR_STALE;
    mms_log_set(NULL, NULL);
    printf("   mmsched says: %s\n\n", reported ? mms_last_error() : "(nothing: this is a bug)");
    mms_free(ctx);

    /* 2. The right way: one call before the encoder graph is allocated. */
    printf("2. the right way: mms_set_persistent(image_features)\n");
    ctx = mms_init(p);
    feat = encoder(ctx, &w, &img);
    mms_set_persistent(feat);
    g_enc = mms_new_graph(ctx);
    mms_build_forward_expand(g_enc, feat);
    if (!compute(sched, g_enc, img, NULL)) { fprintf(stderr, "%s\n", mms_last_error()); return 1; }
    answer = consumer(ctx, &w, feat, &tok);       /* feat is now a leaf: computed once, kept */
    g_use = mms_new_graph(ctx);
    mms_build_forward_expand(g_use, answer);
    if (!compute(sched, g_use, NULL, tok)) { fprintf(stderr, "%s\n", mms_last_error()); return 1; }
    mms_backend_tensor_get(answer, result, 0, sizeof result);
    for (i = 0, same = 1; i < D * N_TOK; i++) same &= result[i] == reference[i];
    printf("   kept on the CPU: %zu bytes; answer[0..2] = %.6f %.6f %.6f; identical to the one-graph result: %s\n",
           mms_backend_sched_get_persistent_size(sched, cpu), result[0], result[1], result[2], same ? "yes" : "NO");
    mms_backend_sched_release(sched, feat);        /* or let mms_backend_sched_free release it */
    mms_free(ctx);

    mms_backend_sched_free(sched);
    mms_backend_buffer_free(w.buf);
    mms_free(w.ctx);
    mms_backend_free(cpu);
    return reported && same ? 0 : 1;
}
