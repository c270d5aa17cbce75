/* op_cases.h - the op cases of test_backend_ops (every op, its types, broadcasting, strided views)
   and the rule that fills their inputs; also run through the CUDA kernels' element logic on the host
   by test_cuda_kernels. Include after test.h. */
#ifndef MMS_OP_CASES_H
#define MMS_OP_CASES_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* -- inputs: a leaf's name says how to fill it ------------------------------------------------ */
/*   "idx<R>" I32 in [0, R)   "pos" I32 positions   "mask" -inf in about a quarter, row 0 all -inf
     "perm<R>" I32 distinct values in [0, R) (for R prime to 7)   "causal<K>" row i sees keys up to i + K (0 past it)   "padmask<P>" row 0 zeros, row 1 -inf at the
     padding keys (8k + 7 and the last P)   "padrows<P>" I32 1 for those tokens, else 0
     "away" |x| in [0.5, 1.5]  "plus" x in (0, 2]   else uniform in [-1, 1) */

TEST_FN void fill_leaf(struct mms_tensor *t, unsigned long long seed) {
    const int64_t n = mms_nelements(t);
    const size_t bytes = mms_nbytes(t);
    float *f = (float *)malloc(sizeof *f * (size_t)n);
    char *raw = (char *)malloc(bytes);
    unsigned long long s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    int64_t i;
    for (i = 0; i < n; i++) {
        double u;
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        u = (double)(s >> 11) / 9007199254740992.0;          /* [0, 1) */
        if (!strncmp(t->name, "idx", 3))       ((int32_t *)f)[i] = (int32_t)(u * atof(t->name + 3));
        else if (!strcmp(t->name, "pos"))      ((int32_t *)f)[i] = (int32_t)(u * 2000.0);
        else if (!strcmp(t->name, "mask"))     f[i] = (u < 0.25 || i < t->ne[0]) ? -INFINITY : (float)(u * 2.0 - 1.0);
        else if (!strncmp(t->name, "causal", 6)) f[i] = i % t->ne[0] <= i / t->ne[0] % t->ne[1] + atoi(t->name + 6) ? 0.0f : -INFINITY;
        else if (!strncmp(t->name, "padmask", 7)) {
            const int64_t k = i % t->ne[0];
            f[i] = i / t->ne[0] % 2 == 1 && (k % 8 == 7 || k >= t->ne[0] - atoi(t->name + 7)) ? -INFINITY : 0.0f;
        }
        else if (!strncmp(t->name, "padrows", 7)) ((int32_t *)f)[i] = i % 8 == 7 || i >= t->ne[0] - atoi(t->name + 7);
        else if (!strncmp(t->name, "perm", 4))  ((int32_t *)f)[i] = (int32_t)((i * 7 + (int64_t)(seed % 5)) % atoi(t->name + 4));
        else if (!strcmp(t->name, "away"))     f[i] = (float)((u < 0.5 ? -1.0 : 1.0) * (0.5 + 2.0 * fmod(u, 0.5)));
        else if (!strcmp(t->name, "plus"))     f[i] = (float)(2.0 - 2.0 * u);
        else                                   f[i] = (float)(u * 2.0 - 1.0);
    }
    if (t->type == MMS_TYPE_F32 || t->type == MMS_TYPE_I32) memcpy(raw, f, bytes);
    else mms_get_type_traits(t->type)->from_float(f, raw, n);
    EXPECT(mms_backend_tensor_set(t, raw, 0, bytes) == MMS_OK, "fill %s: %s", t->name, mms_last_error());
    free(f);
    free(raw);
}

/* -- the cases -------------------------------------------------------------------------------- */

TEST_FN struct mms_tensor *leaf(struct mms_context *c, enum mms_type t, const char *name, int64_t a, int64_t b, int64_t d, int64_t e) {
    return mms_set_name(mms_new_tensor_4d(c, t, a, b, d, e), name);
}

static const enum mms_type floats[3] = { MMS_TYPE_F32, MMS_TYPE_F16, MMS_TYPE_BF16 };
static const enum mms_type weights[8] = { MMS_TYPE_F32, MMS_TYPE_F16, MMS_TYPE_BF16, MMS_TYPE_Q8_0, MMS_TYPE_Q4_0, MMS_TYPE_Q4_K, MMS_TYPE_Q5_K, MMS_TYPE_Q6_K };
#define N_WEIGHTS ((int)(sizeof weights / sizeof weights[0]))
static const enum mms_op unary_ops[8] = { MMS_OP_SQR, MMS_OP_SQRT, MMS_OP_EXP, MMS_OP_TANH, MMS_OP_SILU, MMS_OP_GELU, MMS_OP_GELU_TANH, MMS_OP_SCALE };

/* NMSE allowed when the result (or an operand) is rounded to 16 bits, and when it is not. */
#define TOL_LOW  2e-5
#define TOL_F32  1e-9
#define TOL_COPY 0.0
#define TOL_Q8_ACT 1e-4

struct op_case {
    char   desc[96];
    double tol;
    struct mms_tensor *out;
};

/* Case i (0 .. n_cases-1) built in ctx; false when i is past the last. */
TEST_FN bool build_case(int i, struct mms_context *c, struct op_case *oc) {
    int k = 0;
    struct mms_tensor *a, *b, *out = NULL;
    oc->tol = TOL_F32;
#define CASE(cond) if (k++ == i && (cond))
    /* element-wise with broadcasting, each float type, strided a */
    for (int op = MMS_OP_ADD; op <= MMS_OP_DIV; op++)
        for (int t = 0; t < 3; t++) {
            CASE(1) {
                a = op == MMS_OP_MUL ? mms_transpose(c, leaf(c, floats[t], "a", 7, 33, 3, 2)) : leaf(c, floats[t], "a", 33, 7, 3, 2);
                b = leaf(c, floats[(t + 1) % 3], op == MMS_OP_DIV ? "away" : "b", 33, 1, 3, 1);
                out = op == MMS_OP_ADD ? mms_add(c, a, b) : op == MMS_OP_SUB ? mms_sub(c, a, b) : op == MMS_OP_MUL ? mms_mul(c, a, b) : mms_div(c, a, b);
                snprintf(oc->desc, sizeof oc->desc, "%s %s by %s", mms_op_name((enum mms_op)op), mms_type_name(floats[t]), mms_type_name(floats[(t + 1) % 3]));
                oc->tol = t ? TOL_LOW : TOL_F32;
            }
        }
    for (int u = 0; u < 8; u++)
        for (int t = 0; t < 2; t++) {
            CASE(1) {
                a = leaf(c, floats[t], unary_ops[u] == MMS_OP_SQRT ? "plus" : "a", 1601, 5, 1, 1);
                switch (unary_ops[u]) {
                    case MMS_OP_SQR:  out = mms_sqr(c, a); break;
                    case MMS_OP_SQRT: out = mms_sqrt(c, a); break;
                    case MMS_OP_EXP:  out = mms_exp(c, a); break;
                    case MMS_OP_TANH: out = mms_tanh(c, a); break;
                    case MMS_OP_SILU: out = mms_silu(c, a); break;
                    case MMS_OP_GELU: out = mms_gelu(c, a); break;
                    case MMS_OP_GELU_TANH: out = mms_gelu_tanh(c, a); break;
                    default: out = mms_scale(c, a, -1.75f); break;
                }
                snprintf(oc->desc, sizeof oc->desc, "%s %s", mms_op_name(unary_ops[u]), mms_type_name(floats[t]));
                oc->tol = t ? TOL_LOW : 1e-8;
            }
        }
    /* row reductions */
    for (int t = 0; t < 2; t++) {
        CASE(1) { out = mms_norm(c, leaf(c, floats[t], "a", 4096, 3, 2, 1), 1e-5f); snprintf(oc->desc, sizeof oc->desc, "NORM %s 4096", mms_type_name(floats[t])); oc->tol = t ? TOL_LOW : TOL_F32; }
        CASE(1) { out = mms_rms_norm(c, leaf(c, floats[t], "a", 33, 7, 1, 1), 1e-6f); snprintf(oc->desc, sizeof oc->desc, "RMS_NORM %s 33", mms_type_name(floats[t])); oc->tol = t ? TOL_LOW : TOL_F32; }
    }
    CASE(1) { out = mms_sum_rows(c, leaf(c, MMS_TYPE_F32, "a", 1601, 4, 3, 1)); snprintf(oc->desc, sizeof oc->desc, "SUM_ROWS f32 1601"); }
    CASE(1) { out = mms_argmax(c, leaf(c, MMS_TYPE_F32, "a", 1601, 9, 1, 1)); snprintf(oc->desc, sizeof oc->desc, "ARGMAX f32 1601"); oc->tol = TOL_COPY; }
    /* softmax: no mask, an f32 mask repeated over heads, an f16 mask */
    CASE(1) { out = mms_soft_max(c, leaf(c, MMS_TYPE_F32, "a", 77, 9, 4, 1)); snprintf(oc->desc, sizeof oc->desc, "SOFT_MAX f32"); }
    CASE(1) {
        out = mms_soft_max_ext(c, leaf(c, MMS_TYPE_F32, "a", 77, 9, 4, 1), leaf(c, MMS_TYPE_F32, "mask", 77, 12, 1, 1), 0.3f, 0.0f);
        snprintf(oc->desc, sizeof oc->desc, "SOFT_MAX f32, f32 mask, scale");
    }
    CASE(1) {
        out = mms_soft_max_ext(c, leaf(c, MMS_TYPE_F16, "a", 130, 5, 2, 1), leaf(c, MMS_TYPE_F16, "mask", 130, 5, 2, 1), 1.0f, 0.0f);
        snprintf(oc->desc, sizeof oc->desc, "SOFT_MAX f16, f16 mask");
        oc->tol = TOL_LOW;
    }
    /* rope: both pairings, partial rotation, frequency factors */
    for (int mode = 0; mode < 2; mode++)
        for (int ffs = 0; ffs < 2; ffs++) {
            CASE(1) {
                struct mms_tensor *ff = ffs ? leaf(c, MMS_TYPE_F32, "plus", 32, 1, 1, 1) : NULL;
                out = mms_rope_ext(c, leaf(c, MMS_TYPE_F32, "a", 80, 4, 7, 1), leaf(c, MMS_TYPE_I32, "pos", 7, 1, 1, 1), ff,
                                   64, mode ? MMS_ROPE_TYPE_NEOX : MMS_ROPE_TYPE_NORMAL, 0, 500000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
                snprintf(oc->desc, sizeof oc->desc, "ROPE %s, 64 of 80 dims%s", mode ? "neox" : "normal", ffs ? ", freq factors" : "");
                oc->tol = 1e-8;
            }
        }
    CASE(1) {
        out = mms_rope_ext(c, leaf(c, MMS_TYPE_F16, "a", 64, 3, 5, 1), leaf(c, MMS_TYPE_I32, "pos", 5, 1, 1, 1), NULL,
                           64, MMS_ROPE_TYPE_NORMAL, 0, 10000.0f, 0.5f, 0.0f, 1.0f, 0.0f, 0.0f);
        snprintf(oc->desc, sizeof oc->desc, "ROPE f16");
        oc->tol = TOL_LOW;
    }
    /* layout */
    for (int dim = 0; dim < 3; dim++) {
        CASE(1) {
            out = mms_concat(c, leaf(c, MMS_TYPE_F32, "a", 5, 3, 2, 1), leaf(c, MMS_TYPE_F32, "b", dim == 0 ? 4 : 5, dim == 1 ? 6 : 3, dim == 2 ? 3 : 2, 1), dim);
            snprintf(oc->desc, sizeof oc->desc, "CONCAT f32 dim %d", dim);
            oc->tol = TOL_COPY;
        }
    }
    CASE(1) { out = mms_concat(c, leaf(c, MMS_TYPE_I32, "idx99", 5, 3, 1, 1), leaf(c, MMS_TYPE_I32, "idx7", 5, 2, 1, 1), 1); snprintf(oc->desc, sizeof oc->desc, "CONCAT i32"); oc->tol = TOL_COPY; }
    CASE(1) { out = mms_pad(c, leaf(c, MMS_TYPE_F16, "a", 7, 5, 3, 1), 3, 2, 1, 0); snprintf(oc->desc, sizeof oc->desc, "PAD f16"); oc->tol = TOL_COPY; }
    CASE(1) {
        a = leaf(c, MMS_TYPE_F32, "a", 6, 1, 3, 1);
        out = mms_repeat(c, a, leaf(c, MMS_TYPE_F32, "b", 12, 4, 3, 2));
        snprintf(oc->desc, sizeof oc->desc, "REPEAT f32");
        oc->tol = TOL_COPY;
    }
    for (int t = 0; t < N_WEIGHTS; t++) {
        CASE(1) {
            out = mms_get_rows(c, leaf(c, weights[t], "a", 256, 11, 2, 1), leaf(c, MMS_TYPE_I32, "idx11", 6, 2, 1, 1));
            snprintf(oc->desc, sizeof oc->desc, "GET_ROWS %s", mms_type_name(weights[t]));
            oc->tol = TOL_COPY;
        }
    }
    CASE(1) { out = mms_get_rows(c, leaf(c, MMS_TYPE_I32, "idx1000", 3, 9, 1, 1), leaf(c, MMS_TYPE_I32, "idx9", 4, 1, 1, 1)); snprintf(oc->desc, sizeof oc->desc, "GET_ROWS i32"); oc->tol = TOL_COPY; }
    for (int t = 0; t < 2; t++) {
        CASE(1) {   /* distinct rows ("perm"): with repeats, which write wins would be unspecified */
            out = mms_set_rows(c, leaf(c, floats[t + 1], "a", 96, 40, 2, 1), leaf(c, MMS_TYPE_F32, "b", 96, 5, 2, 1), leaf(c, MMS_TYPE_I32, "perm40", 5, 1, 1, 1));
            snprintf(oc->desc, sizeof oc->desc, "SET_ROWS f32 into %s", mms_type_name(floats[t + 1]));
            oc->tol = TOL_COPY;
        }
    }
    for (int t = 0; t < 3; t++) {
        CASE(1) {
            a = leaf(c, floats[t], "a", 9, 6, 4, 1);
            out = mms_cpy(c, mms_permute(c, a, 1, 2, 0, 3), leaf(c, floats[(t + 1) % 3], "b", 4, 9, 6, 1));
            snprintf(oc->desc, sizeof oc->desc, "CPY permuted %s to %s", mms_type_name(floats[t]), mms_type_name(floats[(t + 1) % 3]));
            oc->tol = TOL_COPY;        /* conversions round to nearest even on both */
        }
    }
    CASE(1) { out = mms_cont_2d(c, mms_transpose(c, leaf(c, MMS_TYPE_F16, "a", 13, 7, 1, 1)), 7, 13); snprintf(oc->desc, sizeof oc->desc, "CONT transposed f16"); oc->tol = TOL_COPY; }
    CASE(1) { out = mms_dup(c, leaf(c, MMS_TYPE_I32, "idx50", 10, 3, 1, 1)); snprintf(oc->desc, sizeof oc->desc, "DUP i32"); oc->tol = TOL_COPY; }
    for (int t = 0; t < 2; t++) {
        CASE(1) {
            out = mms_im2col(c, leaf(c, MMS_TYPE_F16, "a", 3, 3, 4, 8), leaf(c, MMS_TYPE_F32, "b", 11, 9, 4, 2), 2, 1, 1, 1, 1, 2, true, floats[t]);
            snprintf(oc->desc, sizeof oc->desc, "IM2COL 2-D to %s", mms_type_name(floats[t]));
            oc->tol = TOL_COPY;
        }
    }
    CASE(1) { out = mms_im2col(c, leaf(c, MMS_TYPE_F32, "a", 5, 3, 2, 1), leaf(c, MMS_TYPE_F32, "b", 17, 3, 2, 1), 2, 1, 2, 0, 1, 1, false, MMS_TYPE_F32); snprintf(oc->desc, sizeof oc->desc, "IM2COL 1-D"); oc->tol = TOL_COPY; }
    /* mul_mat: every weight type, decode and prompt sizes, grouped-head broadcasting, a strided b */
    for (int t = 0; t < N_WEIGHTS; t++) {
        const int64_t ns[4] = { 1, 3, 17, 64 };
        for (int j = 0; j < 4; j++) {
            CASE(1) {
                out = mms_mul_mat(c, leaf(c, weights[t], "a", 512, 75, 1, 1), leaf(c, MMS_TYPE_F32, "b", 512, ns[j], 1, 1));
                snprintf(oc->desc, sizeof oc->desc, "MUL_MAT %s 512x75 by %lld", mms_type_name(weights[t]), (long long)ns[j]);
                /* block types: the CPU may round the activations to 8 bits (NMSE ~1e-5; every size for
                   the K types, decode sizes for the others) */
                oc->tol = weights[t] == MMS_TYPE_F32 ? TOL_F32 : t >= 3 ? TOL_Q8_ACT : TOL_LOW;
            }
        }
    }
    for (int t = 0; t < 3; t++) {
        CASE(1) {
            b = mms_permute(c, leaf(c, MMS_TYPE_F32, "b", 64, 6, 9, 1), 0, 2, 1, 3);        /* [64, 9, 6]: strided */
            out = mms_mul_mat(c, leaf(c, floats[t], "a", 64, 33, 2, 1), b);
            snprintf(oc->desc, sizeof oc->desc, "MUL_MAT %s grouped heads 2 -> 6, strided b", mms_type_name(floats[t]));
            oc->tol = t ? TOL_LOW : TOL_F32;
        }
    }
    CASE(1) {
        out = mms_mul_mat(c, mms_transpose(c, leaf(c, MMS_TYPE_F32, "a", 40, 96, 1, 1)), leaf(c, MMS_TYPE_F32, "b", 96, 7, 1, 1));
        snprintf(oc->desc, sizeof oc->desc, "MUL_MAT transposed f32 a");
    }
    /* decode-size products (a GPU's GEMV kernels): rows longer than one staged chunk, an odd number
       of rows, grouped-head batches, up to 8 columns; block rows not 16-byte aligned (K 288) */
    for (int t = 0; t < N_WEIGHTS; t++) {
        const int64_t ns[2] = { 1, 5 };
        for (int j = 0; j < 2; j++) {
            CASE(1) {
                const int64_t K = t >= 5 ? 2304 : 2176;   /* the K types: a multiple of 256 */
                out = mms_mul_mat(c, leaf(c, weights[t], "a", K, 19, 2, 1), leaf(c, MMS_TYPE_F32, "b", K, ns[j], 6, 1));
                snprintf(oc->desc, sizeof oc->desc, "MUL_MAT %s %lldx19 by %lld, heads 2 -> 6", mms_type_name(weights[t]), (long long)K, (long long)ns[j]);
                oc->tol = t >= 3 ? TOL_Q8_ACT : t ? TOL_LOW : TOL_F32;
            }
        }
    }
    for (int t = 0; t < 5; t++) {
        CASE(1) {
            const int64_t K = t < 3 ? 1000 : 288;
            out = mms_mul_mat(c, leaf(c, weights[t], "a", K, 9, 1, 1), leaf(c, MMS_TYPE_F32, "b", K, 2, 1, 1));
            snprintf(oc->desc, sizeof oc->desc, "MUL_MAT %s %lldx9 by 2, unaligned rows", mms_type_name(weights[t]), (long long)K);
            oc->tol = t >= 3 ? TOL_Q8_ACT : t ? TOL_LOW : TOL_F32;
        }
    }
    /* flash attention: grouped heads, masks, K/V types, a softcap, D != Dv. Prefill-size cases
       with D 64, 80 or 128 run on a GPU's tensor cores, which round Q, K, V and the weights to 16
       bits (TOL_LOW); decode-size ones (at most 8 query rows per KV head) stay in f32. */
    for (int t = 0; t < 3; t++) {
        CASE(1) {
            out = mms_flash_attn_ext(c, leaf(c, MMS_TYPE_F32, "a", 80, 9, 8, 1), leaf(c, floats[t], "k", 80, 37, 2, 1),
                                     leaf(c, floats[t], "v", 80, 37, 2, 1), leaf(c, MMS_TYPE_F16, "mask", 37, 9, 1, 1), 0.11f, 0.0f, 0.0f);
            snprintf(oc->desc, sizeof oc->desc, "FLASH_ATTN_EXT q f32, k/v %s, 8 heads on 2, mask", mms_type_name(floats[t]));
            oc->tol = TOL_LOW;
        }
    }
    CASE(1) {
        out = mms_flash_attn_ext(c, leaf(c, MMS_TYPE_F16, "a", 128, 70, 4, 2), leaf(c, MMS_TYPE_F16, "k", 128, 100, 4, 2),
                                 leaf(c, MMS_TYPE_F16, "v", 64, 100, 4, 2), NULL, 0.08f, 0.0f, 30.0f);
        snprintf(oc->desc, sizeof oc->desc, "FLASH_ATTN_EXT f16, D 128 Dv 64, batch 2, softcap, no mask");
        oc->tol = 1e-8;
    }
    /* decode: one or two queries, 32 heads on 8, a long cache with its end masked, split over key chunks */
    for (int t = 0; t < 3; t++) {
        const int64_t nq = t == 2 ? 2 : 1, D = t == 1 ? 80 : 128;
        CASE(1) {
            out = mms_flash_attn_ext(c, leaf(c, MMS_TYPE_F32, "a", D, nq, 32, 1), leaf(c, floats[t], "k", D, 3000, 8, 1),
                                     leaf(c, floats[t], "v", D, 3000, 8, 1), leaf(c, MMS_TYPE_F32, "causal2900", 3000, nq, 1, 1), 0.09f, 0.0f, 0.0f);
            snprintf(oc->desc, sizeof oc->desc, "FLASH_ATTN_EXT decode %lld x 32 heads on 8, D %lld, k/v %s, 3000 keys (last 100 masked)",
                     (long long)nq, (long long)D, mms_type_name(floats[t]));
            oc->tol = 1e-8;
        }
    }
    CASE(1) {
        out = mms_flash_attn_ext(c, leaf(c, MMS_TYPE_F32, "a", 64, 1, 4, 2), mms_permute(c, leaf(c, MMS_TYPE_F16, "k", 64, 4, 200, 2), 0, 2, 1, 3),
                                 mms_permute(c, leaf(c, MMS_TYPE_F16, "v", 64, 4, 200, 2), 0, 2, 1, 3), leaf(c, MMS_TYPE_F16, "causal150", 200, 1, 1, 1), 0.125f, 0.0f, 20.0f);
        snprintf(oc->desc, sizeof oc->desc, "FLASH_ATTN_EXT decode, cache as [D, heads, tokens] (strided), batch 2, softcap");
        oc->tol = 1e-8;
    }
    /* tensor cores: D 64, 80, 128; causal, a padding mask as shared rows (the vision encoder's) */
    for (int t = 0; t < 3; t++) {
        const int64_t D = t == 0 ? 64 : t == 1 ? 80 : 128;
        CASE(1) {
            out = mms_flash_attn_ext(c, leaf(c, MMS_TYPE_F32, "a", D, 90, 4, 1), leaf(c, floats[(t + 1) % 3], "k", D, 150, 2, 1),
                                     leaf(c, floats[(t + 1) % 3], "v", D, 150, 2, 1), leaf(c, MMS_TYPE_F32, "causal60", 150, 90, 1, 1), 0.1f, 0.0f, 0.0f);
            snprintf(oc->desc, sizeof oc->desc, "FLASH_ATTN_EXT prefill D %lld, 90 queries, k/v %s, causal", (long long)D, mms_type_name(floats[(t + 1) % 3]));
            oc->tol = TOL_LOW;
        }
    }
    for (int t = 0; t < 2; t++) {
        CASE(1) {
            const int64_t L = 136;     /* tokens 8k + 7 and the last 24 are padding */
            out = mms_flash_attn_ext_mask_rows(c, leaf(c, MMS_TYPE_F32, "a", 80, L, 2, 1), leaf(c, t ? MMS_TYPE_F16 : MMS_TYPE_F32, "k", 80, L, 2, 1),
                                               leaf(c, t ? MMS_TYPE_F16 : MMS_TYPE_F32, "v", 80, L, 2, 1), leaf(c, MMS_TYPE_F16, "padmask24", L, 2, 1, 1),
                                               leaf(c, MMS_TYPE_I32, "padrows24", L, 1, 1, 1), 0.11f, 0.0f, 0.0f);
            snprintf(oc->desc, sizeof oc->desc, "FLASH_ATTN_EXT_MASK_ROWS vision padding, %s k/v, %lld tokens", t ? "f16" : "f32", (long long)L);
            oc->tol = TOL_LOW;
        }
    }
    CASE(1) {
        out = mms_flash_attn_ext_mask_rows(c, leaf(c, MMS_TYPE_F32, "a", 32, 5, 4, 1), leaf(c, MMS_TYPE_F32, "k", 32, 41, 2, 1),
                                           leaf(c, MMS_TYPE_F32, "v", 32, 41, 2, 1), leaf(c, MMS_TYPE_F32, "mask", 41, 3, 1, 1),
                                           leaf(c, MMS_TYPE_I32, "idx3", 5, 1, 1, 1), 0.2f, 0.0f, 0.0f);
        snprintf(oc->desc, sizeof oc->desc, "FLASH_ATTN_EXT_MASK_ROWS 3 random rows, D 32 (scalar)");
        oc->tol = 1e-8;
    }
    /* chains a GPU backend runs as one kernel (the element-wise nodes as the first one's epilogue) */
    CASE(1) {
        a = leaf(c, MMS_TYPE_F32, "a", 512, 3, 1, 1);
        out = mms_mul(c, mms_rms_norm(c, a, 1e-5f), leaf(c, MMS_TYPE_F32, "b", 512, 1, 1, 1));
        snprintf(oc->desc, sizeof oc->desc, "chain RMS_NORM, MUL by a weight");
    }
    CASE(1) {
        a = leaf(c, MMS_TYPE_F32, "a", 80, 7, 1, 1);
        out = mms_add(c, mms_mul(c, mms_norm(c, a, 1e-5f), leaf(c, MMS_TYPE_F32, "b", 80, 1, 1, 1)), leaf(c, MMS_TYPE_F32, "c", 80, 1, 1, 1));
        snprintf(oc->desc, sizeof oc->desc, "chain NORM, MUL, ADD (layer norm)");
    }
    for (int t = 0; t < 2; t++) {
        CASE(1) {   /* the MLP at decode: silu(gate x) * (up x), then down and the residual */
            const enum mms_type wt = t ? MMS_TYPE_Q4_K : MMS_TYPE_F16;
            struct mms_tensor *x = leaf(c, MMS_TYPE_F32, "b", 512, 1, 1, 1);
            struct mms_tensor *g = mms_silu(c, mms_mul_mat(c, leaf(c, wt, "a", 512, 256, 1, 1), x));
            struct mms_tensor *f = mms_mul(c, g, mms_mul_mat(c, leaf(c, wt, "c", 512, 256, 1, 1), x));
            out = mms_add(c, x, mms_mul_mat(c, leaf(c, wt, "d", 256, 512, 1, 1), f));
            snprintf(oc->desc, sizeof oc->desc, "chain %s decode MLP: GEMV SILU, GEMV MUL, GEMV ADD", mms_type_name(wt));
            oc->tol = t ? 10 * TOL_Q8_ACT : TOL_LOW;    /* two products in a row on 8-bit activations */
        }
    }
    CASE(1) {   /* a gated residual (the cross layers'): GEMV, MUL by a broadcast gate (its tanh runs first), ADD */
        struct mms_tensor *x = leaf(c, MMS_TYPE_F32, "b", 256, 1, 1, 1);
        out = mms_add(c, x, mms_mul(c, mms_mul_mat(c, leaf(c, MMS_TYPE_F16, "a", 256, 256, 1, 1), x), mms_tanh(c, leaf(c, MMS_TYPE_F32, "c", 1, 1, 1, 1))));
        snprintf(oc->desc, sizeof oc->desc, "chain GEMV, MUL by a tanh gate, ADD");
        oc->tol = TOL_LOW;
    }
    for (int t = 0; t < 2; t++) {
        CASE(1) {   /* keys: rope into an f16 cache at the positions; values: a GEMV into the cache */
            struct mms_tensor *cache = leaf(c, MMS_TYPE_F16, "a", 64 * 4, 50, 1, 1), *pos = leaf(c, MMS_TYPE_I32, "perm50", 3, 1, 1, 1), *kv;
            if (t == 0) kv = mms_rope_ext(c, leaf(c, MMS_TYPE_F32, "b", 64, 4, 3, 1), pos, NULL, 64, MMS_ROPE_TYPE_NORMAL, 0, 500000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
            else kv = mms_mul_mat(c, leaf(c, MMS_TYPE_F16, "c", 128, 256, 1, 1), leaf(c, MMS_TYPE_F32, "b", 128, 3, 1, 1));
            out = mms_set_rows(c, cache, mms_reshape_2d(c, kv, 256, 3), pos);
            snprintf(oc->desc, sizeof oc->desc, "chain %s, SET_ROWS into an f16 cache", t ? "GEMV" : "ROPE");
            oc->tol = t ? TOL_LOW : TOL_COPY;
        }
    }
#undef CASE
    oc->out = out;
    return i < k;
}

#endif
