/* >>ops ===========================================================================================
   Op constructors: check shapes and types, then describe the result. Nothing is computed here.
   Every error names the op, the offending tensors and their shapes. */

MMS_API const char *mms_op_name(enum mms_op op) {
    static const char *names[MMS_OP_COUNT] = {
        "NONE", "DUP", "ADD", "SUB", "MUL", "DIV", "SCALE", "SQR", "SQRT", "EXP", "TANH", "SILU", "GELU",
        "GELU_TANH", "SUM_ROWS", "ARGMAX", "NORM", "RMS_NORM", "MUL_MAT", "SOFT_MAX", "ROPE", "CONCAT", "PAD",
        "IM2COL", "GET_ROWS", "CPY", "CONT", "FLASH_ATTN_EXT", "VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE", "REPEAT",
        "SET_ROWS"
    };
    return (op >= 0 && op < MMS_OP_COUNT) ? names[op] : "INVALID";
}

MMS_API bool mms_op_is_view(enum mms_op op) {
    return op == MMS_OP_VIEW || op == MMS_OP_RESHAPE || op == MMS_OP_PERMUTE || op == MMS_OP_TRANSPOSE;
}

/* A new result tensor of op with up to three sources. */
static struct mms_tensor *mms__new_op(struct mms_context *ctx, const char *who, enum mms_op op, enum mms_type type,
                                      int n_dims, const int64_t *ne,
                                      struct mms_tensor *src0, struct mms_tensor *src1, struct mms_tensor *src2) {
    struct mms_tensor *t = mms__new_tensor_impl(ctx, who, type, n_dims, ne, NULL, 0);
    if (!t) return NULL;
    t->op = op;
    t->src[0] = src0;
    t->src[1] = src1;
    t->src[2] = src2;
    return t;
}

static bool mms__require_float(struct mms_context *ctx, const char *who, const char *role, const struct mms_tensor *t) {
    if (mms__type_is_float(t->type)) return true;
    mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: %s %s must be f32, f16 or bf16", who, role, mms__tensor_desc(t).s);
    return false;
}

static bool mms__require_type(struct mms_context *ctx, const char *who, const char *role, const struct mms_tensor *t,
                              enum mms_type type) {
    if (t->type == type) return true;
    mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: %s %s must be %s", who, role, mms__tensor_desc(t).s, mms_type_name(type));
    return false;
}

/* A block type (quantized) is read in whole rows: its blocks must be contiguous along ne[0]. */
static bool mms__require_whole_blocks(struct mms_context *ctx, const char *who, const char *role, const struct mms_tensor *t) {
    if (mms_blck_size(t->type) == 1 || t->nb[0] == mms_type_size(t->type)) return true;
    mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: %s %s is a %s view whose blocks are not contiguous along ne[0]",
                   who, role, mms__tensor_desc(t).s, mms_type_name(t->type));
    return false;
}

/* -- element-wise -- */

static struct mms_tensor *mms__binary(struct mms_context *ctx, const char *who, enum mms_op op,
                                      struct mms_tensor *a, struct mms_tensor *b) {
    if (!mms__args_ok(ctx, who, a, b)) return NULL;
    if (!mms__require_float(ctx, who, "a", a) || !mms__require_float(ctx, who, "b", b)) return NULL;
    if (!mms_can_repeat(b, a)) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG,
                       "%s: cannot broadcast b %s over a %s (each dimension of a must be a multiple of b's)",
                       who, mms__tensor_desc(b).s, mms__tensor_desc(a).s);
        return NULL;
    }
    return mms__new_op(ctx, who, op, a->type, MMS_MAX_DIMS, a->ne, a, b, NULL);
}

MMS_API struct mms_tensor *mms_add(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b) { return mms__binary(ctx, "mms_add", MMS_OP_ADD, a, b); }
MMS_API struct mms_tensor *mms_sub(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b) { return mms__binary(ctx, "mms_sub", MMS_OP_SUB, a, b); }
MMS_API struct mms_tensor *mms_mul(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b) { return mms__binary(ctx, "mms_mul", MMS_OP_MUL, a, b); }
MMS_API struct mms_tensor *mms_div(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b) { return mms__binary(ctx, "mms_div", MMS_OP_DIV, a, b); }

static struct mms_tensor *mms__unary(struct mms_context *ctx, const char *who, enum mms_op op, struct mms_tensor *a) {
    if (!mms__args_ok(ctx, who, a, a)) return NULL;
    if (!mms__require_float(ctx, who, "a", a)) return NULL;
    return mms__new_op(ctx, who, op, a->type, MMS_MAX_DIMS, a->ne, a, NULL, NULL);
}

MMS_API struct mms_tensor *mms_sqr(struct mms_context *ctx, struct mms_tensor *a)       { return mms__unary(ctx, "mms_sqr", MMS_OP_SQR, a); }
MMS_API struct mms_tensor *mms_sqrt(struct mms_context *ctx, struct mms_tensor *a)      { return mms__unary(ctx, "mms_sqrt", MMS_OP_SQRT, a); }
MMS_API struct mms_tensor *mms_exp(struct mms_context *ctx, struct mms_tensor *a)       { return mms__unary(ctx, "mms_exp", MMS_OP_EXP, a); }
MMS_API struct mms_tensor *mms_tanh(struct mms_context *ctx, struct mms_tensor *a)      { return mms__unary(ctx, "mms_tanh", MMS_OP_TANH, a); }
MMS_API struct mms_tensor *mms_silu(struct mms_context *ctx, struct mms_tensor *a)      { return mms__unary(ctx, "mms_silu", MMS_OP_SILU, a); }
MMS_API struct mms_tensor *mms_gelu(struct mms_context *ctx, struct mms_tensor *a)      { return mms__unary(ctx, "mms_gelu", MMS_OP_GELU, a); }
MMS_API struct mms_tensor *mms_gelu_tanh(struct mms_context *ctx, struct mms_tensor *a) { return mms__unary(ctx, "mms_gelu_tanh", MMS_OP_GELU_TANH, a); }

MMS_API struct mms_tensor *mms_scale(struct mms_context *ctx, struct mms_tensor *a, float s) {
    struct mms_tensor *t = mms__unary(ctx, "mms_scale", MMS_OP_SCALE, a);
    if (t) mms__set_op_param_f32(t, 0, s);
    return t;
}

/* -- reductions and norms -- */

MMS_API struct mms_tensor *mms_sum_rows(struct mms_context *ctx, struct mms_tensor *a) {
    int64_t ne[4];
    if (!mms__args_ok(ctx, "mms_sum_rows", a, a)) return NULL;
    if (!mms__require_float(ctx, "mms_sum_rows", "a", a)) return NULL;
    ne[0] = 1; ne[1] = a->ne[1]; ne[2] = a->ne[2]; ne[3] = a->ne[3];
    return mms__new_op(ctx, "mms_sum_rows", MMS_OP_SUM_ROWS, MMS_TYPE_F32, 4, ne, a, NULL, NULL);
}

MMS_API struct mms_tensor *mms_argmax(struct mms_context *ctx, struct mms_tensor *a) {
    int64_t ne[3];
    if (!mms__args_ok(ctx, "mms_argmax", a, a)) return NULL;
    if (!mms__require_float(ctx, "mms_argmax", "a", a)) return NULL;
    if (a->ne[0] < 1 || a->ne[0] > INT32_MAX) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_argmax: rows of %s must have 1..2^31-1 elements", mms__tensor_desc(a).s);
        return NULL;
    }
    ne[0] = a->ne[1]; ne[1] = a->ne[2]; ne[2] = a->ne[3];
    return mms__new_op(ctx, "mms_argmax", MMS_OP_ARGMAX, MMS_TYPE_I32, 3, ne, a, NULL, NULL);
}

static struct mms_tensor *mms__norm_impl(struct mms_context *ctx, const char *who, enum mms_op op, struct mms_tensor *a, float eps) {
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, who, a, a)) return NULL;
    if (!mms__require_float(ctx, who, "a", a)) return NULL;
    if (!(eps >= 0.0f)) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: eps must be >= 0, got %g", who, (double)eps);
        return NULL;
    }
    t = mms__new_op(ctx, who, op, a->type, MMS_MAX_DIMS, a->ne, a, NULL, NULL);
    if (t) mms__set_op_param_f32(t, 0, eps);
    return t;
}

MMS_API struct mms_tensor *mms_norm(struct mms_context *ctx, struct mms_tensor *a, float eps)     { return mms__norm_impl(ctx, "mms_norm", MMS_OP_NORM, a, eps); }
MMS_API struct mms_tensor *mms_rms_norm(struct mms_context *ctx, struct mms_tensor *a, float eps) { return mms__norm_impl(ctx, "mms_rms_norm", MMS_OP_RMS_NORM, a, eps); }

/* -- matrix product -- */

MMS_API struct mms_tensor *mms_mul_mat(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b) {
    int64_t ne[4];
    if (!mms__args_ok(ctx, "mms_mul_mat", a, b)) return NULL;
    if (!mms__type_is_quantized(a->type) && !mms__require_float(ctx, "mms_mul_mat", "a", a)) return NULL;
    if (!mms__require_float(ctx, "mms_mul_mat", "b", b) || !mms__require_whole_blocks(ctx, "mms_mul_mat", "a", a)) return NULL;
    if (a->ne[0] != b->ne[0] || b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG,
                       "mms_mul_mat: a %s and b %s do not fit (need a.ne[0] == b.ne[0] and b.ne[2], b.ne[3] multiples of a's)",
                       mms__tensor_desc(a).s, mms__tensor_desc(b).s);
        return NULL;
    }
    ne[0] = a->ne[1]; ne[1] = b->ne[1]; ne[2] = b->ne[2]; ne[3] = b->ne[3];
    return mms__new_op(ctx, "mms_mul_mat", MMS_OP_MUL_MAT, MMS_TYPE_F32, 4, ne, a, b, NULL);
}

/* -- softmax -- */

/* The mask shape rule shared by soft_max_ext and flash_attn_ext. */
static bool mms__check_mask(struct mms_context *ctx, const char *who, const struct mms_tensor *mask,
                            int64_t n_kv, int64_t n_rows, int64_t n2, int64_t n3) {
    if (mask->type != MMS_TYPE_F32 && mask->type != MMS_TYPE_F16) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: mask %s must be f32 or f16", who, mms__tensor_desc(mask).s);
        return false;
    }
    if (mask->ne[0] != n_kv || mask->ne[1] < n_rows || n2 % mask->ne[2] != 0 || n3 % mask->ne[3] != 0) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG,
                       "%s: mask %s does not fit scores [%lld,%lld,%lld,%lld] (need ne[0] == %lld, ne[1] >= %lld, "
                       "ne[2] and ne[3] dividing %lld and %lld)", who, mms__tensor_desc(mask).s,
                       (long long)n_kv, (long long)n_rows, (long long)n2, (long long)n3,
                       (long long)n_kv, (long long)n_rows, (long long)n2, (long long)n3);
        return false;
    }
    return true;
}

static struct mms_tensor *mms__soft_max_impl(struct mms_context *ctx, const char *who, struct mms_tensor *a, struct mms_tensor *mask,
                                             float scale, float max_bias) {
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, who, a, a)) return NULL;
    if (!mms__require_float(ctx, who, "a", a)) return NULL;
    if (mask && !mms__check_mask(ctx, who, mask, a->ne[0], a->ne[1], a->ne[2], a->ne[3])) return NULL;
    if (max_bias != 0.0f) {
        mms__ctx_error(ctx, MMS_ERR_UNSUPPORTED, "%s: max_bias %g (ALiBi) is not implemented; pass 0", who, (double)max_bias);
        return NULL;
    }
    t = mms__new_op(ctx, who, MMS_OP_SOFT_MAX, a->type, MMS_MAX_DIMS, a->ne, a, mask, NULL);
    if (!t) return NULL;
    mms__set_op_param_f32(t, 0, scale);
    mms__set_op_param_f32(t, 1, max_bias);
    return t;
}

MMS_API struct mms_tensor *mms_soft_max_ext(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *mask,
                                            float scale, float max_bias) {
    return mms__soft_max_impl(ctx, "mms_soft_max_ext", a, mask, scale, max_bias);
}

MMS_API struct mms_tensor *mms_soft_max(struct mms_context *ctx, struct mms_tensor *a) {
    return mms__soft_max_impl(ctx, "mms_soft_max", a, NULL, 1.0f, 0.0f);
}

/* -- rope -- */

MMS_API struct mms_tensor *mms_rope_ext(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *pos,
                                        struct mms_tensor *freq_factors, int n_dims, int mode, int n_ctx_orig,
                                        float freq_base, float freq_scale, float ext_factor, float attn_factor,
                                        float beta_fast, float beta_slow) {
    const char *who = "mms_rope_ext";
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, who, a, pos)) return NULL;
    if (!mms__require_float(ctx, who, "a", a) || !mms__require_type(ctx, who, "positions", pos, MMS_TYPE_I32)) return NULL;
    if (mode != MMS_ROPE_TYPE_NORMAL && mode != MMS_ROPE_TYPE_NEOX) {
        mms__ctx_error(ctx, MMS_ERR_UNSUPPORTED, "%s: mode %d is not supported (MMS_ROPE_TYPE_NORMAL or MMS_ROPE_TYPE_NEOX)", who, mode);
        return NULL;
    }
    if (n_dims <= 0 || n_dims % 2 != 0 || n_dims > a->ne[0]) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: n_dims %d must be even and in 2..%lld for a %s",
                       who, n_dims, (long long)a->ne[0], mms__tensor_desc(a).s);
        return NULL;
    }
    if (mms_n_dims(pos) != 1 || pos->ne[0] != a->ne[2]) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: positions %s must be 1-D with one entry per token of a %s (ne[2])",
                       who, mms__tensor_desc(pos).s, mms__tensor_desc(a).s);
        return NULL;
    }
    if (freq_factors && (!mms__require_type(ctx, who, "freq_factors", freq_factors, MMS_TYPE_F32) ||
                         mms_nelements(freq_factors) < n_dims / 2)) {
        if (ctx->status == MMS_OK)
            mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: freq_factors %s needs at least n_dims/2 = %d entries",
                           who, mms__tensor_desc(freq_factors).s, n_dims / 2);
        return NULL;
    }
    if (ext_factor != 0.0f) {
        mms__ctx_error(ctx, MMS_ERR_UNSUPPORTED, "%s: ext_factor %g (YaRN) is not implemented; pass 0", who, (double)ext_factor);
        return NULL;
    }
    if (!(freq_base > 0.0f) || !(freq_scale > 0.0f)) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: freq_base %g and freq_scale %g must be > 0", who, (double)freq_base, (double)freq_scale);
        return NULL;
    }
    t = mms__new_op(ctx, who, MMS_OP_ROPE, a->type, MMS_MAX_DIMS, a->ne, a, pos, freq_factors);
    if (!t) return NULL;
    mms__set_op_param_i32(t, 0, n_dims);
    mms__set_op_param_i32(t, 1, mode);
    mms__set_op_param_i32(t, 2, n_ctx_orig);
    mms__set_op_param_f32(t, 3, freq_base);
    mms__set_op_param_f32(t, 4, freq_scale);
    mms__set_op_param_f32(t, 5, ext_factor);
    mms__set_op_param_f32(t, 6, attn_factor);
    mms__set_op_param_f32(t, 7, beta_fast);
    mms__set_op_param_f32(t, 8, beta_slow);
    return t;
}

/* -- layout -- */

MMS_API struct mms_tensor *mms_concat(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b, int dim) {
    int64_t ne[4];
    struct mms_tensor *t;
    int i;
    if (!mms__args_ok(ctx, "mms_concat", a, b)) return NULL;
    if (dim < 0 || dim >= MMS_MAX_DIMS) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_concat: dim %d is not in 0..3", dim);
        return NULL;
    }
    if (a->type != b->type) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_concat: a %s and b %s have different types", mms__tensor_desc(a).s, mms__tensor_desc(b).s);
        return NULL;
    }
    for (i = 0; i < MMS_MAX_DIMS; i++) {
        if (i != dim && a->ne[i] != b->ne[i]) {
            mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_concat: a %s and b %s differ in dimension %d (only dim %d may differ)",
                           mms__tensor_desc(a).s, mms__tensor_desc(b).s, i, dim);
            return NULL;
        }
        ne[i] = a->ne[i] + (i == dim ? b->ne[i] : 0);
    }
    t = mms__new_op(ctx, "mms_concat", MMS_OP_CONCAT, a->type, 4, ne, a, b, NULL);
    if (t) mms__set_op_param_i32(t, 0, dim);
    return t;
}

MMS_API struct mms_tensor *mms_pad(struct mms_context *ctx, struct mms_tensor *a, int p0, int p1, int p2, int p3) {
    int64_t ne[4];
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, "mms_pad", a, a)) return NULL;
    if (!mms__require_float(ctx, "mms_pad", "a", a)) return NULL;
    if (p0 < 0 || p1 < 0 || p2 < 0 || p3 < 0) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_pad: padding (%d,%d,%d,%d) must not be negative", p0, p1, p2, p3);
        return NULL;
    }
    ne[0] = a->ne[0] + p0; ne[1] = a->ne[1] + p1; ne[2] = a->ne[2] + p2; ne[3] = a->ne[3] + p3;
    t = mms__new_op(ctx, "mms_pad", MMS_OP_PAD, a->type, 4, ne, a, NULL, NULL);
    if (!t) return NULL;
    mms__set_op_param_i32(t, 0, p0);
    mms__set_op_param_i32(t, 1, p1);
    mms__set_op_param_i32(t, 2, p2);
    mms__set_op_param_i32(t, 3, p3);
    return t;
}

MMS_API struct mms_tensor *mms_get_rows(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b) {
    int64_t ne[4];
    if (!mms__args_ok(ctx, "mms_get_rows", a, b)) return NULL;
    if (!mms__require_type(ctx, "mms_get_rows", "indices", b, MMS_TYPE_I32)) return NULL;
    if (!mms__type_is_float(a->type) && !mms__type_is_quantized(a->type) && a->type != MMS_TYPE_I32) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_get_rows: a %s has an unsupported type", mms__tensor_desc(a).s);
        return NULL;
    }
    if (!mms__require_whole_blocks(ctx, "mms_get_rows", "a", a)) return NULL;
    if (b->ne[3] != 1 || b->ne[1] != a->ne[2] || b->ne[2] != a->ne[3]) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_get_rows: indices %s do not fit a %s (need [n, a.ne[2], a.ne[3]])",
                       mms__tensor_desc(b).s, mms__tensor_desc(a).s);
        return NULL;
    }
    ne[0] = a->ne[0]; ne[1] = b->ne[0]; ne[2] = b->ne[1]; ne[3] = b->ne[2];
    return mms__new_op(ctx, "mms_get_rows", MMS_OP_GET_ROWS, a->type == MMS_TYPE_I32 ? MMS_TYPE_I32 : MMS_TYPE_F32, 4, ne, a, b, NULL);
}

MMS_API struct mms_tensor *mms_set_rows(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b, struct mms_tensor *rows) {
    const char *who = "mms_set_rows";
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, who, a, b) || !mms__args_ok(ctx, who, rows, rows)) return NULL;
    if (!mms__require_float(ctx, who, "a", a) || !mms__require_float(ctx, who, "b", b) ||
        !mms__require_type(ctx, who, "rows", rows, MMS_TYPE_I32)) return NULL;
    if (b->ne[0] != a->ne[0] || b->ne[2] != a->ne[2] || b->ne[3] != a->ne[3] || rows->ne[0] != b->ne[1] || mms_nelements(rows) != b->ne[1]) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: a %s, b %s and rows %s do not fit (a [ne0, R, ne2, ne3], b [ne0, n, ne2, ne3], rows [n])",
                       who, mms__tensor_desc(a).s, mms__tensor_desc(b).s, mms__tensor_desc(rows).s);
        return NULL;
    }
    t = mms__new_tensor_impl(ctx, who, a->type, MMS_MAX_DIMS, a->ne, a, 0);   /* shares a's memory */
    if (!t) return NULL;
    memcpy(t->nb, a->nb, sizeof t->nb);
    t->op = MMS_OP_SET_ROWS;
    t->src[0] = b;
    t->src[1] = rows;
    t->src[2] = a;
    mms_format_name(t, "%.50s (rows set)", a->name);
    return t;
}

MMS_API struct mms_tensor *mms_repeat(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b) {
    if (!mms__args_ok(ctx, "mms_repeat", a, b)) return NULL;
    if (!mms__type_valid(a->type) || !mms_can_repeat(a, b)) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_repeat: %s cannot be repeated over the shape of %s (each dimension must divide)",
                       mms__tensor_desc(a).s, mms__tensor_desc(b).s);
        return NULL;
    }
    return mms__new_op(ctx, "mms_repeat", MMS_OP_REPEAT, a->type, MMS_MAX_DIMS, b->ne, a, NULL, NULL);
}

/* -- copies -- */

/* Float to float, and between a float type and a block type (quantize, dequantize). */
static bool mms__can_convert(enum mms_type from, enum mms_type to) {
    return (mms__type_is_float(from) && (mms__type_is_float(to) || mms__type_is_quantized(to))) ||
           (mms__type_is_quantized(from) && mms__type_is_float(to));
}

MMS_API struct mms_tensor *mms_cpy(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b) {
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, "mms_cpy", a, b)) return NULL;
    if (mms_nelements(a) != mms_nelements(b)) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_cpy: a %s and b %s have different numbers of elements",
                       mms__tensor_desc(a).s, mms__tensor_desc(b).s);
        return NULL;
    }
    if (a->type != b->type && !mms__can_convert(a->type, b->type)) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_cpy: cannot convert a %s to the type of b %s",
                       mms__tensor_desc(a).s, mms__tensor_desc(b).s);
        return NULL;
    }
    if ((mms_blck_size(a->type) > 1 || mms_blck_size(b->type) > 1) &&
        (a->ne[0] != b->ne[0] || a->nb[0] != mms_type_size(a->type) || b->nb[0] != mms_type_size(b->type))) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_cpy: a %s and b %s: to or from a block type, rows must be contiguous and of the same length",
                       mms__tensor_desc(a).s, mms__tensor_desc(b).s);
        return NULL;
    }
    /* the result shares b's memory: writing it is the copy */
    t = mms__new_tensor_impl(ctx, "mms_cpy", b->type, MMS_MAX_DIMS, b->ne, b, 0);
    if (!t) return NULL;
    memcpy(t->nb, b->nb, sizeof t->nb);
    t->op = MMS_OP_CPY;
    t->src[0] = a;
    t->src[1] = b;
    mms_format_name(t, "%.50s (copy)", b->name);
    return t;
}

static struct mms_tensor *mms__cont_impl(struct mms_context *ctx, const char *who, enum mms_op op, struct mms_tensor *a,
                                         int n_dims, const int64_t *ne) {
    struct mms_tensor *t;
    int64_t n = 1;
    int i;
    if (!mms__args_ok(ctx, who, a, a)) return NULL;
    for (i = 0; i < n_dims; i++) n *= ne[i];
    if (n != mms_nelements(a)) {
        char shape[96];
        int64_t full[4] = { 1, 1, 1, 1 };
        for (i = 0; i < n_dims; i++) full[i] = ne[i];
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: %s has %lld elements, the shape %s has %lld", who, mms__tensor_desc(a).s,
                       (long long)mms_nelements(a), mms__shape_str(full, shape, sizeof shape), (long long)n);
        return NULL;
    }
    t = mms__new_op(ctx, who, op, a->type, n_dims, ne, a, NULL, NULL);
    if (t) mms_format_name(t, "%.50s (cont)", a->name);
    return t;
}

MMS_API struct mms_tensor *mms_dup(struct mms_context *ctx, struct mms_tensor *a) {
    if (!mms__args_ok(ctx, "mms_dup", a, a)) return NULL;
    return mms__cont_impl(ctx, "mms_dup", MMS_OP_DUP, a, 4, a->ne);
}
MMS_API struct mms_tensor *mms_cont(struct mms_context *ctx, struct mms_tensor *a) {
    if (!mms__args_ok(ctx, "mms_cont", a, a)) return NULL;
    return mms__cont_impl(ctx, "mms_cont", MMS_OP_CONT, a, 4, a->ne);
}
MMS_API struct mms_tensor *mms_cast(struct mms_context *ctx, struct mms_tensor *a, enum mms_type type) {
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, "mms_cast", a, a)) return NULL;
    if (!mms__type_is_float(a->type) || !mms__type_is_float(type)) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_cast: %s to %s: both must be f32, f16 or bf16", mms__tensor_desc(a).s, mms_type_name(type));
        return NULL;
    }
    t = mms__new_op(ctx, "mms_cast", MMS_OP_CONT, type, 4, a->ne, a, NULL, NULL);
    if (t) mms_format_name(t, "%.50s (%s)", a->name, mms_type_name(type));
    return t;
}
MMS_API struct mms_tensor *mms_cont_2d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1) {
    int64_t ne[2];
    ne[0] = ne0; ne[1] = ne1;
    return mms__cont_impl(ctx, "mms_cont_2d", MMS_OP_CONT, a, 2, ne);
}
MMS_API struct mms_tensor *mms_cont_3d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2) {
    int64_t ne[3];
    ne[0] = ne0; ne[1] = ne1; ne[2] = ne2;
    return mms__cont_impl(ctx, "mms_cont_3d", MMS_OP_CONT, a, 3, ne);
}
MMS_API struct mms_tensor *mms_cont_4d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    int64_t ne[4];
    ne[0] = ne0; ne[1] = ne1; ne[2] = ne2; ne[3] = ne3;
    return mms__cont_impl(ctx, "mms_cont_4d", MMS_OP_CONT, a, 4, ne);
}

/* -- convolution -- */

static int64_t mms__conv_out_size(int64_t in, int64_t k, int s, int p, int d) {
    return (in + 2 * (int64_t)p - (int64_t)d * (k - 1) - 1) / s + 1;
}

MMS_API struct mms_tensor *mms_im2col(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b,
                                      int s0, int s1, int p0, int p1, int d0, int d1, bool is_2D, enum mms_type dst_type) {
    const char *who = "mms_im2col";
    int64_t ne[4];
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, who, a, b)) return NULL;
    if (!mms__require_float(ctx, who, "input", b)) return NULL;
    if (dst_type != MMS_TYPE_F32 && dst_type != MMS_TYPE_F16) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: dst_type must be f32 or f16, got %s", who, mms_type_name(dst_type));
        return NULL;
    }
    if (s0 < 1 || s1 < 1 || d0 < 1 || d1 < 1 || p0 < 0 || p1 < 0) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: strides and dilations must be >= 1 and paddings >= 0 "
                       "(got s %d,%d p %d,%d d %d,%d)", who, s0, s1, p0, p1, d0, d1);
        return NULL;
    }
    if (is_2D) {
        int64_t ow = mms__conv_out_size(b->ne[0], a->ne[0], s0, p0, d0);
        int64_t oh = mms__conv_out_size(b->ne[1], a->ne[1], s1, p1, d1);
        if (a->ne[2] != b->ne[2] || ow < 1 || oh < 1) {
            mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: kernel %s [KW,KH,IC,OC] does not fit input %s [W,H,IC,N] "
                           "(channels must match and the output must not be empty)", who, mms__tensor_desc(a).s, mms__tensor_desc(b).s);
            return NULL;
        }
        ne[0] = a->ne[2] * a->ne[1] * a->ne[0]; ne[1] = ow; ne[2] = oh; ne[3] = b->ne[3];
    } else {
        int64_t ow = mms__conv_out_size(b->ne[0], a->ne[0], s0, p0, d0);
        if (a->ne[1] != b->ne[1] || ow < 1 || b->ne[3] != 1) {
            mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: kernel %s [KW,IC,OC] does not fit input %s [W,IC,N] "
                           "(channels must match and the output must not be empty)", who, mms__tensor_desc(a).s, mms__tensor_desc(b).s);
            return NULL;
        }
        ne[0] = a->ne[1] * a->ne[0]; ne[1] = ow; ne[2] = b->ne[2]; ne[3] = 1;
    }
    t = mms__new_op(ctx, who, MMS_OP_IM2COL, dst_type, 4, ne, a, b, NULL);
    if (!t) return NULL;
    mms__set_op_param_i32(t, 0, s0);
    mms__set_op_param_i32(t, 1, s1);
    mms__set_op_param_i32(t, 2, p0);
    mms__set_op_param_i32(t, 3, p1);
    mms__set_op_param_i32(t, 4, d0);
    mms__set_op_param_i32(t, 5, d1);
    mms__set_op_param_i32(t, 6, is_2D ? 1 : 0);
    return t;
}

MMS_API struct mms_tensor *mms_conv_2d(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b,
                                       int s0, int s1, int p0, int p1, int d0, int d1) {
    struct mms_tensor *cols, *kernel, *prod;
    if (!mms__args_ok(ctx, "mms_conv_2d", a, b)) return NULL;
    if (!mms__require_float(ctx, "mms_conv_2d", "kernel", a)) return NULL;
    if (a->ne[2] != b->ne[2]) {   /* checked here too, so the error names the call the user made */
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_conv_2d: kernel %s [KW,KH,IC,OC] and input %s [W,H,IC,N] have different "
                       "channel counts", mms__tensor_desc(a).s, mms__tensor_desc(b).s);
        return NULL;
    }
    cols = mms_im2col(ctx, a, b, s0, s1, p0, p1, d0, d1, true, MMS_TYPE_F32);        /* [K, OW, OH, N] */
    if (!cols) return NULL;
    kernel = mms_is_contiguous(a) ? a : mms_cont(ctx, a);
    cols = mms_reshape_2d(ctx, cols, cols->ne[0], cols->ne[1] * cols->ne[2] * cols->ne[3]);
    kernel = mms_reshape_2d(ctx, kernel, a->ne[0] * a->ne[1] * a->ne[2], a->ne[3]);  /* [K, OC] */
    prod = mms_mul_mat(ctx, cols, kernel);                                           /* [OW*OH*N, OC] */
    if (!prod) return NULL;
    prod = mms_reshape_4d(ctx, prod, mms__conv_out_size(b->ne[0], a->ne[0], s0, p0, d0),
                          mms__conv_out_size(b->ne[1], a->ne[1], s1, p1, d1), b->ne[3], a->ne[3]);
    return mms_cont(ctx, mms_permute(ctx, prod, 0, 1, 3, 2));                         /* [OW, OH, OC, N] */
}

/* -- attention -- */

static struct mms_tensor *mms__flash_attn_impl(struct mms_context *ctx, const char *who, struct mms_tensor *q, struct mms_tensor *k,
                                               struct mms_tensor *v, struct mms_tensor *mask, struct mms_tensor *mask_rows,
                                               float scale, float max_bias, float logit_softcap) {
    int64_t ne[4];
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, who, q, k)) return NULL;
    if (!v) {
        if (ctx->status == MMS_OK) mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: argument v is NULL", who);
        return NULL;
    }
    if (!mms__require_float(ctx, who, "q", q) || !mms__require_float(ctx, who, "k", k) || !mms__require_float(ctx, who, "v", v)) return NULL;
    if (k->type != v->type) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: k %s and v %s must have the same type", who, mms__tensor_desc(k).s, mms__tensor_desc(v).s);
        return NULL;
    }
    if (q->ne[0] != k->ne[0] || k->ne[1] != v->ne[1] || k->ne[2] != v->ne[2] || q->ne[2] % k->ne[2] != 0 ||
        q->ne[3] != k->ne[3] || v->ne[3] != k->ne[3]) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: q %s, k %s and v %s do not fit (q [D,n_q,H,B], k [D,n_kv,Hkv,B], "
                       "v [Dv,n_kv,Hkv,B] with H a multiple of Hkv)", who, mms__tensor_desc(q).s, mms__tensor_desc(k).s, mms__tensor_desc(v).s);
        return NULL;
    }
    if (mask_rows) {                 /* every query row picks its mask row: the mask needs only those */
        if (!mask) {
            mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: mask rows %s without a mask", who, mms__tensor_desc(mask_rows).s);
            return NULL;
        }
        if (!mms__require_type(ctx, who, "mask rows", mask_rows, MMS_TYPE_I32)) return NULL;
        if (mask_rows->ne[0] != q->ne[1] || mms_nelements(mask_rows) != q->ne[1]) {
            mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: mask rows %s must be [n_q] = [%lld]", who, mms__tensor_desc(mask_rows).s, (long long)q->ne[1]);
            return NULL;
        }
    }
    if (mask && !mms__check_mask(ctx, who, mask, k->ne[1], mask_rows ? 1 : q->ne[1], q->ne[2], q->ne[3])) return NULL;
    if (max_bias != 0.0f) {
        mms__ctx_error(ctx, MMS_ERR_UNSUPPORTED, "%s: max_bias %g (ALiBi) is not implemented; pass 0", who, (double)max_bias);
        return NULL;
    }
    if (!(logit_softcap >= 0.0f)) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: logit_softcap must be >= 0, got %g", who, (double)logit_softcap);
        return NULL;
    }
    ne[0] = v->ne[0]; ne[1] = q->ne[2]; ne[2] = q->ne[1]; ne[3] = q->ne[3];
    t = mms__new_op(ctx, who, MMS_OP_FLASH_ATTN_EXT, MMS_TYPE_F32, 4, ne, q, k, v);
    if (!t) return NULL;
    t->src[3] = mask;
    t->src[4] = mask_rows;
    mms__set_op_param_f32(t, 0, scale);
    mms__set_op_param_f32(t, 1, max_bias);
    mms__set_op_param_f32(t, 2, logit_softcap);
    return t;
}

MMS_API struct mms_tensor *mms_flash_attn_ext(struct mms_context *ctx, struct mms_tensor *q, struct mms_tensor *k,
                                              struct mms_tensor *v, struct mms_tensor *mask,
                                              float scale, float max_bias, float logit_softcap) {
    return mms__flash_attn_impl(ctx, "mms_flash_attn_ext", q, k, v, mask, NULL, scale, max_bias, logit_softcap);
}

MMS_API struct mms_tensor *mms_flash_attn_ext_mask_rows(struct mms_context *ctx, struct mms_tensor *q, struct mms_tensor *k,
                                                        struct mms_tensor *v, struct mms_tensor *mask, struct mms_tensor *mask_rows,
                                                        float scale, float max_bias, float logit_softcap) {
    const char *who = "mms_flash_attn_ext_mask_rows";
    if (!mask_rows) {
        if (ctx && ctx->status == MMS_OK) mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: argument mask_rows is NULL", who);
        return NULL;
    }
    return mms__flash_attn_impl(ctx, who, q, k, v, mask, mask_rows, scale, max_bias, logit_softcap);
}
