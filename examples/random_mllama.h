/* random_mllama.h - writes a GGUF in Ollama's single-file mllama layout with random weights for
   any hyper-parameters: every tensor the loader needs, matrices in f16 scaled like trained ones
   (uniform, 1.7 / sqrt(inputs)), norms near 1, gates near 0.5. examples/bench.c times the 11B
   shapes with it; tests/test_quantize.c quantizes a small one whose rows are multiples of 256.
   write_mllama_gguf(path, hparams, text layers, local vision layers, global vision layers, q4_k_m): the
   cross-attention layers are 3, 8, 13, ... (the 11B model's), the vision taps Meta's 3, 7, 15, 23,
   30 below n_local (else the last local layer). Returns 0 on failure (message on stderr).
   Include after mmsched.h. */
#ifndef MMS_RANDOM_MLLAMA_H
#define MMS_RANDOM_MLLAMA_H

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "q4_k_m.h"

struct gguf_gen { struct mms_gguf_writer *w; unsigned state; int failed; bool q4_k_m; struct mix_layers mix; };   /* q4_k_m: text matrices in the Q4_K_M mix */

/* One weight: matrices f16 (the 11B model's type; with q4_k_m set, a text matrix gets the
   Q4_K_M mix's type instead), vectors f32; values uniform in offset +- scale. */
static void gen_weight(struct gguf_gen *g, const char *name, int n_dims, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                       float scale, float offset) {
    const int64_t ne[4] = { ne0, ne1, ne2, ne3 }, n = ne0 * ne1 * ne2 * ne3;
    const bool matrix = n_dims == 2 && ne1 > 1, text = !starts_with(name, "v.") && !starts_with(name, "mm.");
    const enum mms_type type = !matrix ? (n_dims >= 2 && ne1 > 1 ? MMS_TYPE_F16 : MMS_TYPE_F32)
                             : g->q4_k_m && text ? mix_type(name, &g->mix, MMS_TYPE_Q4_K) : MMS_TYPE_F16;
    const int64_t bs = mms_blck_size(type);    /* the pool is tiled in whole blocks; quantizing a smaller one is quicker */
    const int64_t pool_max = bs > 1 ? (1 << 16) : (1 << 20), pool = n < pool_max ? n : pool_max;
    const size_t ts = mms_type_size(type);
    float *v = (float *)malloc((size_t)pool * sizeof *v);
    char *data = (char *)malloc((size_t)(n / bs) * ts);
    int64_t i;
    if (g->failed) { free(v); free(data); return; }
    if (!v || !data) { g->failed = 1; fprintf(stderr, "out of memory for %s\n", name); free(v); free(data); return; }
    for (i = 0; i < pool; i++) {
        g->state = g->state * 1664525u + 1013904223u;
        v[i] = offset + scale * ((float)(g->state >> 8) / 8388608.0f - 1.0f);
    }
    mms_get_type_traits(type)->from_float(v, data, pool);
    for (i = pool; i < n; i += pool) {     /* tile the pool from a random start: values do not change the speed */
        int64_t start, len = n - i < pool ? n - i : pool;
        g->state = g->state * 1664525u + 1013904223u;
        start = (int64_t)(g->state % (unsigned)((pool - len) / bs + 1)) * bs;
        memcpy(data + i / bs * (int64_t)ts, data + start / bs * (int64_t)ts, (size_t)(len / bs) * ts);
    }
    if (mms_gguf_writer_add_tensor(g->w, name, type, n_dims, ne, data) != MMS_OK) { fprintf(stderr, "%s\n", mms_last_error()); g->failed = 1; }
    free(v);
    free(data);
}

#define GEN1(name, n0, sc, off) gen_weight(g, name, 1, n0, 1, 1, 1, sc, off)
#define GEN2(name, n0, n1)      gen_weight(g, name, 2, n0, n1, 1, 1, 1.7f / sqrtf((float)(n0)), 0.0f)

static void gen_vision_layer(struct gguf_gen *g, const char *prefix, int il, int64_t D, int64_t FF, int gated) {
    char n[96];
#define VN(suffix) (snprintf(n, sizeof n, "%s.%d.%s", prefix, il, suffix), n)
    GEN1(VN("attn_norm.weight"), D, 0.1f, 1.0f); GEN1(VN("attn_norm.bias"), D, 0.02f, 0.0f);
    GEN1(VN("ffn_norm.weight"), D, 0.1f, 1.0f);  GEN1(VN("ffn_norm.bias"), D, 0.02f, 0.0f);
    GEN2(VN("attn_q.weight"), D, D); GEN2(VN("attn_k.weight"), D, D); GEN2(VN("attn_v.weight"), D, D); GEN2(VN("attn_output.weight"), D, D);
    GEN2(VN("ffn_up.weight"), D, FF); GEN1(VN("ffn_up.bias"), FF, 0.02f, 0.0f);
    GEN2(VN("ffn_down.weight"), FF, D); GEN1(VN("ffn_down.bias"), D, 0.02f, 0.0f);
    if (gated) { GEN1(VN("attn_gate"), 1, 0.1f, 0.5f); GEN1(VN("ffn_gate"), 1, 0.1f, 0.5f); }
#undef VN
}

/* q4_k_m: the text matrices in the Q4_K_M mix (random blocks; the vision tower stays f16, as
   quantize does by default), else every matrix f16. */
static int write_mllama_gguf(const char *path, const struct mms_mllama_hparams *hp, int n_text, int n_local, int n_global, bool q4_k_m) {
    static const int32_t taps11b[5] = { 3, 7, 15, 23, 30 };
    const int64_t D = hp->n_embd, FF = hp->n_ff, Q = (int64_t)hp->n_head * hp->head_dim, KV = (int64_t)hp->n_head_kv * hp->head_dim;
    const int64_t VD = hp->v_n_embd, VT = hp->v_max_tiles, VN = (int64_t)(hp->v_image_size / hp->v_patch_size) * (hp->v_image_size / hp->v_patch_size) + 1;
    const int64_t n_ids = 9;   /* the 8 tile layouts of up to 4 tiles, plus padding id 0 */
    struct gguf_gen gen, *g = &gen;
    int32_t cross[8], taps[5];
    int n_cross = 0, n_taps = 0, il;
    char n[96];
    memset(g, 0, sizeof *g);
    g->state = 12345;
    g->q4_k_m = q4_k_m;
    g->w = mms_gguf_writer_new();
    if (!g->w) return 0;
    for (il = 3; il < n_text && n_cross < 8; il += 5) cross[n_cross++] = il;   /* the 11B model's layers 3, 8, 13, ... */
    mix_layers_init(&g->mix);                  /* the names the layers below will have, for the mix */
    for (il = 0; il < n_text; il++) {
        int c, is_cross = 0;
        for (c = 0; c < n_cross; c++) is_cross |= cross[c] == il;
        snprintf(n, sizeof n, "blk.%d.%s", il, is_cross ? "cross_attn_v_proj.weight" : "attn_v.weight");
        mix_layers_add(&g->mix, n);
    }
    mix_layers_done(&g->mix);
    for (il = 0; il < 5; il++) if (taps11b[il] < n_local) taps[n_taps++] = taps11b[il];
    if (n_taps == 0) taps[n_taps++] = n_local - 1;
    mms_gguf_writer_set_str(g->w, "general.architecture", "mllama");
    mms_gguf_writer_set_str(g->w, "general.name", "mmsched random weights");
    mms_gguf_writer_set_u32(g->w, "mllama.vocab_size", (uint32_t)hp->n_vocab);
    mms_gguf_writer_set_u32(g->w, "mllama.block_count", (uint32_t)n_text);
    mms_gguf_writer_set_u32(g->w, "mllama.context_length", (uint32_t)hp->n_ctx_train);
    mms_gguf_writer_set_u32(g->w, "mllama.embedding_length", (uint32_t)D);
    mms_gguf_writer_set_u32(g->w, "mllama.feed_forward_length", (uint32_t)FF);
    mms_gguf_writer_set_u32(g->w, "mllama.attention.head_count", (uint32_t)hp->n_head);
    mms_gguf_writer_set_u32(g->w, "mllama.attention.head_count_kv", (uint32_t)hp->n_head_kv);
    mms_gguf_writer_set_u32(g->w, "mllama.rope.dimension_count", (uint32_t)hp->head_dim);
    mms_gguf_writer_set_f32(g->w, "mllama.rope.freq_base", hp->rope_freq_base);
    mms_gguf_writer_set_f32(g->w, "mllama.attention.layer_norm_rms_epsilon", hp->rms_eps);
    mms_gguf_writer_set_arr_i32(g->w, "mllama.attention.cross_attention_layers", cross, n_cross);
    mms_gguf_writer_set_u32(g->w, "mllama.image_token_index", (uint32_t)hp->image_token_id);
    mms_gguf_writer_set_u32(g->w, "mllama.vision.block_count", (uint32_t)n_local);
    mms_gguf_writer_set_u32(g->w, "mllama.vision.global.block_count", (uint32_t)n_global);
    mms_gguf_writer_set_u32(g->w, "mllama.vision.embedding_length", (uint32_t)VD);
    mms_gguf_writer_set_u32(g->w, "mllama.vision.feed_forward_length", (uint32_t)hp->v_n_ff);
    mms_gguf_writer_set_u32(g->w, "mllama.vision.attention.head_count", (uint32_t)hp->v_n_head);
    mms_gguf_writer_set_f32(g->w, "mllama.vision.attention.layer_norm_epsilon", hp->v_eps);
    mms_gguf_writer_set_u32(g->w, "mllama.vision.image_size", (uint32_t)hp->v_image_size);
    mms_gguf_writer_set_u32(g->w, "mllama.vision.patch_size", (uint32_t)hp->v_patch_size);
    mms_gguf_writer_set_u32(g->w, "mllama.vision.max_num_tiles", (uint32_t)VT);
    mms_gguf_writer_set_u32(g->w, "mllama.vision.num_channels", (uint32_t)hp->v_channels);
    mms_gguf_writer_set_arr_i32(g->w, "mllama.vision.intermediate_layers_indices", taps, n_taps);
    mms_gguf_writer_set_u32(g->w, "mllama.vision.projection_dim", (uint32_t)D);

    gen_weight(g, "token_embd.weight", 2, D, hp->n_embd_rows, 1, 1, 0.02f, 0.0f);
    GEN1("output_norm.weight", D, 0.1f, 1.0f);
    GEN2("output.weight", D, hp->n_vocab);
    for (il = 0; il < n_text; il++) {
        int c, is_cross = 0;
        for (c = 0; c < n_cross; c++) is_cross |= cross[c] == il;
#define TN(suffix) (snprintf(n, sizeof n, "blk.%d.%s", il, suffix), n)
        GEN1(TN("attn_norm.weight"), D, 0.1f, 1.0f);
        GEN1(TN("ffn_norm.weight"), D, 0.1f, 1.0f);
        GEN2(TN("ffn_gate.weight"), D, FF); GEN2(TN("ffn_up.weight"), D, FF); GEN2(TN("ffn_down.weight"), FF, D);
        if (is_cross) {
            GEN2(TN("cross_attn_q_proj.weight"), D, Q); GEN2(TN("cross_attn_k_proj.weight"), D, KV);
            GEN2(TN("cross_attn_v_proj.weight"), D, KV); GEN2(TN("cross_attn_o_proj.weight"), Q, D);
            GEN1(TN("cross_attn_q_norm.weight"), hp->head_dim, 0.1f, 1.0f); GEN1(TN("cross_attn_k_norm.weight"), hp->head_dim, 0.1f, 1.0f);
            GEN1(TN("cross_attn_attn_gate"), 1, 0.1f, 0.5f); GEN1(TN("cross_attn_mlp_gate"), 1, 0.1f, 0.5f);
        } else {
            GEN2(TN("attn_q.weight"), D, Q); GEN2(TN("attn_k.weight"), D, KV); GEN2(TN("attn_v.weight"), D, KV); GEN2(TN("attn_output.weight"), Q, D);
        }
#undef TN
    }
    gen_weight(g, "v.patch_embd.weight", 4, hp->v_patch_size, hp->v_patch_size, hp->v_channels, VD,
               1.7f / sqrtf((float)(hp->v_patch_size * hp->v_patch_size * hp->v_channels)), 0.0f);
    GEN1("v.class_embd", VD, 0.02f, 0.0f);
    gen_weight(g, "v.position_embd.weight", 2, VD, VN, 1, 1, 0.02f, 0.0f);
    GEN1("v.position_embd.gate", 1, 0.1f, 0.5f);
    gen_weight(g, "v.tile_position_embd.weight", 2, VT * VN * VD, n_ids, 1, 1, 0.02f, 0.0f);
    GEN1("v.tile_position_embd.gate", 1, 0.1f, 0.5f);
    gen_weight(g, "v.pre_tile_position_embd.weight", 2, VT * VD, n_ids, 1, 1, 0.02f, 0.0f);
    GEN1("v.pre_tile_position_embd.gate", 1, 0.1f, 0.5f);
    gen_weight(g, "v.post_tile_position_embd.weight", 2, VT * VD, n_ids, 1, 1, 0.02f, 0.0f);
    GEN1("v.post_tile_position_embd.gate", 1, 0.1f, 0.5f);
    GEN1("v.pre_ln.weight", VD, 0.1f, 1.0f); GEN1("v.pre_ln.bias", VD, 0.02f, 0.0f);
    GEN1("v.post_ln.weight", VD, 0.1f, 1.0f); GEN1("v.post_ln.bias", VD, 0.02f, 0.0f);
    for (il = 0; il < n_local; il++) gen_vision_layer(g, "v.blk", il, VD, hp->v_n_ff, 0);
    for (il = 0; il < n_global; il++) gen_vision_layer(g, "v.global.blk", il, VD, hp->v_n_ff, 1);
    GEN2("mm.0.weight", VD * (1 + n_taps), D);
    GEN1("mm.0.bias", D, 0.02f, 0.0f);
    if (!g->failed && mms_gguf_writer_write(g->w, path) != MMS_OK) { fprintf(stderr, "%s\n", mms_last_error()); g->failed = 1; }
    mms_gguf_writer_free(g->w);
    return !g->failed;
}

#undef GEN1
#undef GEN2

#endif
