/* reference_graphs.h - the graphs the allocator is measured on, shared by examples/bench.c and
   tests/test_alloc.c. Include after mmsched.h.

   - ref_vit_layers: the 4-layer ViT encoder that ggml's allocator was measured on, exactly
     (T = 1601 tokens, D = 1280, 16 heads of 80, MLP 5120), with mul_mat + soft_max_ext attention
     (flash 0) or with flash_attn_ext (flash 1; with BF16 weights its K and V cast to BF16 first,
     as the mllama vision graph does);
   - ref_llama_layers: a llama-style text decoder stack (hidden 4096, 32 heads, 8 KV heads,
     MLP 14336, causal mask) over a batch of tokens.
   Weights are leafs of their own context. For planning only, ref_place_virtual gives them
   addresses without memory (a buffer wrapped around a fake pointer that is never read), so the
   allocator leaves them alone exactly as it would real weights. Never compute such a graph. */
#ifndef MMS_REFERENCE_GRAPHS_H
#define MMS_REFERENCE_GRAPHS_H

#include <math.h>

struct ref_graph {
    struct mms_context  *ctx;       /* activations: planned by the allocator */
    struct mms_context  *wctx;      /* weights */
    mms_backend_buffer_t wbuf;
    struct mms_cgraph   *graph;
    struct mms_tensor   *input, *output;
};

static struct mms_context *ref_new_ctx(void) {
    struct mms_init_params ip = { 0, NULL, true };
    return mms_init(ip);
}

static struct mms_tensor *ref_weight(struct mms_context *wctx, enum mms_type type, int64_t ne0, int64_t ne1, const char *name, int layer) {
    struct mms_tensor *t = ne1 > 1 ? mms_new_tensor_2d(wctx, type, ne0, ne1) : mms_new_tensor_1d(wctx, MMS_TYPE_F32, ne0);
    return mms_format_name(t, "L%d.%s", layer, name);
}

/* Layer norm with affine parameters, as the ViT uses it. */
static struct mms_tensor *ref_ln(struct mms_context *ctx, struct mms_tensor *x, struct mms_tensor *w, struct mms_tensor *b) {
    return mms_add(ctx, mms_mul(ctx, mms_norm(ctx, x, 1e-5f), w), b);
}

static void ref_vit_layers(struct ref_graph *r, int n_layers, int flash, enum mms_type wtype) {
    const int64_t T = 1601, D = 1280, H = 16, HD = 80, FF = 5120;
    struct mms_context *ctx = r->ctx = ref_new_ctx(), *wctx = r->wctx = ref_new_ctx();
    struct mms_tensor *x;
    int l;
    x = r->input = mms_set_name(mms_new_tensor_2d(ctx, MMS_TYPE_F32, D, T), "inp");
    mms_set_input(x);
    for (l = 0; l < n_layers; l++) {
        struct mms_tensor *h, *q, *k, *v, *o;
        h = ref_ln(ctx, x, ref_weight(wctx, wtype, D, 1, "ln1_w", l), ref_weight(wctx, wtype, D, 1, "ln1_b", l));
        q = mms_add(ctx, mms_mul_mat(ctx, ref_weight(wctx, wtype, D, D, "wq", l), h), ref_weight(wctx, wtype, D, 1, "bq", l));
        q = mms_permute(ctx, mms_reshape_3d(ctx, q, HD, H, T), 0, 2, 1, 3);                          /* [80,1601,16] */
        k = mms_add(ctx, mms_mul_mat(ctx, ref_weight(wctx, wtype, D, D, "wk", l), h), ref_weight(wctx, wtype, D, 1, "bk", l));
        k = mms_permute(ctx, mms_reshape_3d(ctx, k, HD, H, T), 0, 2, 1, 3);
        v = mms_add(ctx, mms_mul_mat(ctx, ref_weight(wctx, wtype, D, D, "wv", l), h), ref_weight(wctx, wtype, D, 1, "bv", l));
        if (flash) {
            v = mms_permute(ctx, mms_reshape_3d(ctx, v, HD, H, T), 0, 2, 1, 3);                      /* [80,1601,16] view */
            if (wtype == MMS_TYPE_BF16) { k = mms_cast(ctx, k, wtype); v = mms_cast(ctx, v, wtype); } /* head-major copies */
            o = mms_reshape_2d(ctx, mms_flash_attn_ext(ctx, q, k, v, NULL, 1.0f / sqrtf((float)HD), 0.0f, 0.0f), D, T);
        } else {
            struct mms_tensor *kq;
            v = mms_cont(ctx, mms_permute(ctx, mms_reshape_3d(ctx, v, HD, H, T), 1, 2, 0, 3));      /* [1601,80,16] copy */
            kq = mms_soft_max_ext(ctx, mms_mul_mat(ctx, k, q), NULL, 1.0f / sqrtf((float)HD), 0.0f); /* [1601,1601,16] */
            o = mms_cont_2d(ctx, mms_permute(ctx, mms_mul_mat(ctx, v, kq), 0, 2, 1, 3), D, T);
        }
        x = mms_add(ctx, x, mms_add(ctx, mms_mul_mat(ctx, ref_weight(wctx, wtype, D, D, "wo", l), o), ref_weight(wctx, wtype, D, 1, "bo", l)));
        h = ref_ln(ctx, x, ref_weight(wctx, wtype, D, 1, "ln2_w", l), ref_weight(wctx, wtype, D, 1, "ln2_b", l));
        h = mms_gelu(ctx, mms_add(ctx, mms_mul_mat(ctx, ref_weight(wctx, wtype, D, FF, "w1", l), h), ref_weight(wctx, wtype, FF, 1, "b1", l)));
        x = mms_add(ctx, x, mms_add(ctx, mms_mul_mat(ctx, ref_weight(wctx, wtype, FF, D, "w2", l), h), ref_weight(wctx, wtype, D, 1, "b2", l)));
    }
    r->output = mms_set_name(x, "out");
    mms_set_output(x);
    r->graph = mms_new_graph(ctx);
    mms_build_forward_expand(r->graph, x);
}

static void ref_llama_layers(struct ref_graph *r, int n_layers, int64_t T, enum mms_type wtype) {
    const int64_t D = 4096, H = 32, HKV = 8, HD = 128, FF = 14336;
    struct mms_context *ctx = r->ctx = ref_new_ctx(), *wctx = r->wctx = ref_new_ctx();
    struct mms_tensor *x, *pos, *mask;
    int l;
    x = r->input = mms_set_name(mms_new_tensor_2d(ctx, MMS_TYPE_F32, D, T), "embd");
    pos = mms_set_name(mms_new_tensor_1d(ctx, MMS_TYPE_I32, T), "pos");
    mask = mms_set_name(mms_new_tensor_2d(ctx, MMS_TYPE_F32, T, T), "kq_mask");
    mms_set_input(x);
    mms_set_input(pos);
    mms_set_input(mask);
    for (l = 0; l < n_layers; l++) {
        struct mms_tensor *h, *q, *k, *v, *kq, *o, *g, *u;
        h = mms_mul(ctx, mms_rms_norm(ctx, x, 1e-5f), ref_weight(wctx, wtype, D, 1, "attn_norm", l));
        q = mms_reshape_3d(ctx, mms_mul_mat(ctx, ref_weight(wctx, wtype, D, H * HD, "wq", l), h), HD, H, T);
        k = mms_reshape_3d(ctx, mms_mul_mat(ctx, ref_weight(wctx, wtype, D, HKV * HD, "wk", l), h), HD, HKV, T);
        v = mms_reshape_3d(ctx, mms_mul_mat(ctx, ref_weight(wctx, wtype, D, HKV * HD, "wv", l), h), HD, HKV, T);
        q = mms_rope_ext(ctx, q, pos, NULL, (int)HD, MMS_ROPE_TYPE_NEOX, 0, 500000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
        k = mms_rope_ext(ctx, k, pos, NULL, (int)HD, MMS_ROPE_TYPE_NEOX, 0, 500000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
        q = mms_permute(ctx, q, 0, 2, 1, 3);                                                        /* [128,T,32] */
        k = mms_permute(ctx, k, 0, 2, 1, 3);                                                        /* [128,T,8] */
        kq = mms_soft_max_ext(ctx, mms_mul_mat(ctx, k, q), mask, 1.0f / sqrtf((float)HD), 0.0f);   /* [T,T,32] */
        v = mms_cont(ctx, mms_permute(ctx, v, 1, 2, 0, 3));                                        /* [T,128,8] */
        o = mms_cont_2d(ctx, mms_permute(ctx, mms_mul_mat(ctx, v, kq), 0, 2, 1, 3), D, T);
        x = mms_add(ctx, x, mms_mul_mat(ctx, ref_weight(wctx, wtype, D, D, "wo", l), o));
        h = mms_mul(ctx, mms_rms_norm(ctx, x, 1e-5f), ref_weight(wctx, wtype, D, 1, "ffn_norm", l));
        g = mms_silu(ctx, mms_mul_mat(ctx, ref_weight(wctx, wtype, D, FF, "ffn_gate", l), h));
        u = mms_mul_mat(ctx, ref_weight(wctx, wtype, D, FF, "ffn_up", l), h);
        x = mms_add(ctx, x, mms_mul_mat(ctx, ref_weight(wctx, wtype, FF, D, "ffn_down", l), mms_mul(ctx, g, u)));
    }
    r->output = mms_set_name(x, "out");
    mms_set_output(x);
    r->graph = mms_new_graph(ctx);
    mms_build_forward_expand(r->graph, x);
}

/* Gives every weight an address inside a buffer wrapped around a fake pointer: enough for the
   allocator (which only needs to see that weights have memory), never for compute. */
static int ref_place_virtual(struct ref_graph *r) {
    struct mms_tensor *t;
    size_t total = 0;
    char *base = (char *)(uintptr_t)4096;
    for (t = mms_get_first_tensor(r->wctx); t; t = mms_get_next_tensor(r->wctx, t)) total += (mms_nbytes(t) + 63) / 64 * 64;
    r->wbuf = mms_backend_cpu_buffer_from_ptr(base, total);
    if (!r->wbuf) return 0;
    for (t = mms_get_first_tensor(r->wctx); t; t = mms_get_next_tensor(r->wctx, t)) {
        if (mms_backend_tensor_alloc(r->wbuf, t, base) != MMS_OK) return 0;
        base += (mms_nbytes(t) + 63) / 64 * 64;
    }
    return mms_ctx_status(r->ctx) == MMS_OK && mms_ctx_status(r->wctx) == MMS_OK && mms_graph_status(r->graph) == MMS_OK;
}

static void ref_free(struct ref_graph *r) {
    mms_backend_buffer_free(r->wbuf);
    mms_free(r->ctx);
    mms_free(r->wctx);
    r->wbuf = NULL;
    r->ctx = r->wctx = NULL;
}

#endif
