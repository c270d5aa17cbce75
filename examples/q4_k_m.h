/* q4_k_m.h - the "Q4_K_M-like" recipe (llama.cpp's rule of thumb, written from its description;
   quantize.c's usage text gives it in full): q4_k for a text matrix, q6_k for the output head and,
   in the layers that get more bits, for the V projections and ffn_down. Q5_K_M is the same rule on
   q5_k (base MMS_TYPE_Q5_K). Used by quantize.c
   (--mix q4_k_m) and random_mllama.h (random weights already in that mix). Include after mmsched.h. */
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

/* Layer i of n gets more bits in the first and last eighth and every third layer in between. */
static inline bool more_bits(int i, int n) {
    int eighth = n / 8;
    return i < eighth || i >= n - eighth || (i - eighth) % 3 == 2;
}

/* The type the mix wants for a tensor (before the block check). */
static inline enum mms_type mix_type(const char *name, int n_layer, enum mms_type base) {
    int il = text_layer(name);
    if (strcmp(name, "output.weight") == 0) return MMS_TYPE_Q6_K;
    if (il >= 0 && (ends_with(name, ".attn_v.weight") || ends_with(name, ".cross_attn_v_proj.weight") || ends_with(name, ".ffn_down.weight")) &&
        more_bits(il, n_layer))
        return MMS_TYPE_Q6_K;
    return base;
}

#endif
