/* simple.c - one self-attention block on the CPU backend, computed two ways.

   Builds the attention of a small transformer layer twice in one graph: with three ops
   (mul_mat, soft_max_ext, mul_mat) and with the fused flash_attn_ext, then prints how far apart
   the two results are. Shows contexts, weights in a backend buffer, graph building, inputs,
   compute and reading results back.

   Build and run: make demo   (or: cc -std=c99 -O2 -I. examples/simple.c -lm -lpthread) */
#define MMSCHED_IMPLEMENTATION
#include "mmsched.h"
#include <math.h>
#include <stdlib.h>

enum { D_MODEL = 256, N_HEAD = 8, HEAD_DIM = D_MODEL / N_HEAD, N_TOKENS = 97 };

static float frand(unsigned *state) {   /* deterministic uniform in [-1, 1) */
    *state = *state * 1664525u + 1013904223u;
    return (float)(*state >> 8) / 8388608.0f - 1.0f;
}

/* Fills a float tensor of any type with uniform values in [-scale, scale). */
static int set_random(struct mms_tensor *t, float scale, unsigned *state) {
    int64_t i, n = mms_nelements(t);
    float *v = (float *)malloc((size_t)n * sizeof *v);
    void *data = malloc(mms_nbytes(t));
    int ok;
    for (i = 0; i < n; i++) v[i] = frand(state) * scale;
    mms_get_type_traits(t->type)->from_float(v, data, n);   /* f32 -> the tensor's type */
    ok = mms_backend_tensor_set(t, data, 0, mms_nbytes(t)) == MMS_OK;
    free(v);
    free(data);
    return ok;
}

int main(void) {
    struct mms_init_params params = { 0, NULL, true };   /* metadata only: a backend buffer holds the data */
    struct mms_context *ctx = mms_init(params);
    mms_backend_t cpu = mms_backend_cpu_init();
    struct mms_tensor *x, *wq, *wk, *wv, *pos, *q, *k, *v, *kq, *o3, *ofa;
    struct mms_cgraph *graph;
    mms_backend_buffer_t buffer;
    int32_t positions[N_TOKENS];
    float *a, *b;
    double diff = 0.0, norm = 0.0;
    unsigned seed = 42;
    int i;

    if (!ctx || !cpu) { fprintf(stderr, "setup failed: %s\n", mms_last_error()); return 1; }

    /* leafs: the input and the weights (W has ne = {in, out}) */
    x   = mms_set_name(mms_new_tensor_2d(ctx, MMS_TYPE_F32, D_MODEL, N_TOKENS), "x");
    wq  = mms_set_name(mms_new_tensor_2d(ctx, MMS_TYPE_F16, D_MODEL, D_MODEL), "wq");
    wk  = mms_set_name(mms_new_tensor_2d(ctx, MMS_TYPE_F16, D_MODEL, D_MODEL), "wk");
    wv  = mms_set_name(mms_new_tensor_2d(ctx, MMS_TYPE_F16, D_MODEL, D_MODEL), "wv");
    pos = mms_set_name(mms_new_tensor_1d(ctx, MMS_TYPE_I32, N_TOKENS), "pos");
    mms_set_input(x);
    mms_set_input(pos);

    /* q, k, v per head with rotary embeddings: [HEAD_DIM, N_HEAD, N_TOKENS] */
    x = mms_rms_norm(ctx, x, 1e-5f);
    q = mms_reshape_3d(ctx, mms_mul_mat(ctx, wq, x), HEAD_DIM, N_HEAD, N_TOKENS);
    k = mms_reshape_3d(ctx, mms_mul_mat(ctx, wk, x), HEAD_DIM, N_HEAD, N_TOKENS);
    v = mms_reshape_3d(ctx, mms_mul_mat(ctx, wv, x), HEAD_DIM, N_HEAD, N_TOKENS);
    q = mms_rope_ext(ctx, q, pos, NULL, HEAD_DIM, MMS_ROPE_TYPE_NEOX, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
    k = mms_rope_ext(ctx, k, pos, NULL, HEAD_DIM, MMS_ROPE_TYPE_NEOX, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
    q = mms_permute(ctx, q, 0, 2, 1, 3);   /* [HEAD_DIM, N_TOKENS, N_HEAD] */
    k = mms_permute(ctx, k, 0, 2, 1, 3);
    v = mms_permute(ctx, v, 0, 2, 1, 3);

    /* three ops: scores [N_TOKENS(k), N_TOKENS(q), N_HEAD], softmax, weighted sum of v */
    kq = mms_soft_max_ext(ctx, mms_mul_mat(ctx, k, q), NULL, 1.0f / sqrtf((float)HEAD_DIM), 0.0f);
    o3 = mms_mul_mat(ctx, mms_cont(ctx, mms_transpose(ctx, v)), kq);              /* [HEAD_DIM, N_TOKENS, N_HEAD] */
    o3 = mms_set_name(mms_cont_2d(ctx, mms_permute(ctx, o3, 0, 2, 1, 3), D_MODEL, N_TOKENS), "attn_three_ops");

    /* fused: never stores the scores; result [HEAD_DIM, N_HEAD, N_TOKENS] */
    ofa = mms_flash_attn_ext(ctx, q, k, v, NULL, 1.0f / sqrtf((float)HEAD_DIM), 0.0f, 0.0f);
    ofa = mms_set_name(mms_reshape_2d(ctx, ofa, D_MODEL, N_TOKENS), "attn_flash");
    mms_set_output(o3);
    mms_set_output(ofa);

    graph = mms_new_graph(ctx);
    mms_build_forward_expand(graph, o3);
    mms_build_forward_expand(graph, ofa);
    if (mms_graph_status(graph) != MMS_OK) { fprintf(stderr, "%s\n", mms_graph_error(graph)); return 1; }

    /* one buffer for every tensor of the context (a graph allocator would reuse memory instead) */
    buffer = mms_backend_alloc_ctx_tensors(ctx, cpu);
    if (!buffer) { fprintf(stderr, "%s\n", mms_last_error()); return 1; }
    for (i = 0; i < N_TOKENS; i++) positions[i] = i;
    if (!set_random(mms_get_tensor(ctx, "x"), 1.0f, &seed) || !set_random(wq, 0.1f, &seed) ||
        !set_random(wk, 0.1f, &seed) || !set_random(wv, 0.1f, &seed) ||
        mms_backend_tensor_set(pos, positions, 0, sizeof positions) != MMS_OK) {
        fprintf(stderr, "%s\n", mms_last_error());
        return 1;
    }
    if (mms_backend_graph_compute(cpu, graph) != MMS_OK) { fprintf(stderr, "%s\n", mms_last_error()); return 1; }

    a = (float *)malloc(D_MODEL * N_TOKENS * sizeof *a);
    b = (float *)malloc(D_MODEL * N_TOKENS * sizeof *b);
    mms_backend_tensor_get(o3, a, 0, D_MODEL * N_TOKENS * sizeof *a);
    mms_backend_tensor_get(ofa, b, 0, D_MODEL * N_TOKENS * sizeof *b);
    for (i = 0; i < D_MODEL * N_TOKENS; i++) { diff += (a[i] - b[i]) * (double)(a[i] - b[i]); norm += a[i] * (double)a[i]; }
    printf("graph: %d nodes, %d leafs; CPU kernels: %s, %d threads\n", mms_graph_n_nodes(graph), mms_graph_n_leafs(graph),
           mms_cpu_kernels_name(mms_cpu_get_kernels()), mms_backend_cpu_get_n_threads(cpu));
    printf("attention output [%d x %d], first values: %.6f %.6f %.6f\n", N_TOKENS, D_MODEL, a[0], a[1], a[2]);
    printf("three-op attention vs flash attention: normalised squared difference %.3g\n", diff / norm);

    free(a);
    free(b);
    mms_backend_buffer_free(buffer);
    mms_backend_free(cpu);
    mms_free(ctx);
    return diff / norm < 1e-10 ? 0 : 1;
}
