/* q4_k_m.h - the Q4_K_M recipe as llama.cpp chooses types (written here from reading its
   llama_tensor_get_type; quantize.c's usage text gives it in full): q4_k for a text matrix, q6_k for
   the output head and, in the layers that get more bits, for the self-attention V projection and
   ffn_down. Q5_K_M is the same rule on q5_k (base MMS_TYPE_Q5_K). Used by quantize.c (--mix q4_k_m)
   and random_mllama.h (random weights already in that mix). Include after mmsched.h. */
#ifndef MMS_Q4_K_M_H
#define MMS_Q4_K_M_H

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static inline bool starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

static inline bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The layer of a text tensor "blk.N.*", else -1. */
static inline int text_layer(const char *name) {
    const char *p;
    char *end;
    long v;
    if (!starts_with(name, "blk.")) return -1;
    p = name + 4;
    if (!isdigit((unsigned char)*p)) return -1;
    v = strtol(p, &end, 10);
    return *end == '.' && v >= 0 && v < 1000000 ? (int)v : -1;
}

/* llama.cpp's choice of the layers that get more bits, layer i of n: the first eighth, from
   7n/8 on, and every third in between (/ rounds down). */
static inline bool more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* What the mix reads off a model's tensor names before it chooses: its text layers, and for each
   the rank of its self-attention V projection among all of them (-1 where the layer has none).
   llama.cpp (and Ollama's copy, which quantized its mllama files) counts the tensors named
   attn_v.weight alone, in layer order, so a cross-attention layer's V projection is neither counted
   nor given more bits, and in mllama the self-attention layers' ranks are not their numbers. */
#define MIX_MAX_LAYERS 1024
struct mix_layers { int n_layer, n_attn_v; int attn_v_rank[MIX_MAX_LAYERS]; };

static inline void mix_layers_init(struct mix_layers *m) {
    int i;
    m->n_layer = m->n_attn_v = 0;
    for (i = 0; i < MIX_MAX_LAYERS; i++) m->attn_v_rank[i] = -1;
}

/* Notes one tensor's name; false when its layer number is past MIX_MAX_LAYERS. */
static inline bool mix_layers_add(struct mix_layers *m, const char *name) {
    const int il = text_layer(name);
    if (il < 0) return true;
    if (il >= MIX_MAX_LAYERS) return false;
    if (il >= m->n_layer) m->n_layer = il + 1;
    if (ends_with(name, ".attn_v.weight")) m->attn_v_rank[il] = 0;
    return true;
}

/* After every name: the ranks, in layer order. */
static inline void mix_layers_done(struct mix_layers *m) {
    int i;
    m->n_attn_v = 0;
    for (i = 0; i < m->n_layer; i++) if (m->attn_v_rank[i] >= 0) m->attn_v_rank[i] = m->n_attn_v++;
}

/* The type the mix wants for a tensor (before the block check). */
static inline enum mms_type mix_type(const char *name, const struct mix_layers *m, enum mms_type base) {
    const int il = text_layer(name);
    if (strcmp(name, "output.weight") == 0) return MMS_TYPE_Q6_K;
    if (il < 0 || il >= m->n_layer) return base;
    if (ends_with(name, ".attn_v.weight") && m->attn_v_rank[il] >= 0 && more_bits(m->attn_v_rank[il], m->n_attn_v)) return MMS_TYPE_Q6_K;
    if (ends_with(name, ".ffn_down.weight") && more_bits(il, m->n_layer)) return MMS_TYPE_Q6_K;
    return base;
}

#endif
