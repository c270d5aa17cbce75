/* >>api-types -------------------------------------------------------------------------------------
   Element types. The numbering is ours (0 is invalid, so a zeroed struct never means F32); the GGUF
   reader maps GGUF's type ids onto these. Append only. */

enum mms_type {
    MMS_TYPE_INVALID = 0,
    MMS_TYPE_F32     = 1,
    MMS_TYPE_F16     = 2,
    MMS_TYPE_BF16    = 3,
    MMS_TYPE_I32     = 4,
    MMS_TYPE_Q8_0    = 5,   /* blocks of 32: f16 scale + 32 int8 (GGUF's layouts: manual section 2) */
    MMS_TYPE_Q4_0    = 6,   /* blocks of 32: f16 scale + 32 nibbles */
    MMS_TYPE_Q4_K    = 7,   /* blocks of 256: 8 sub-blocks with 6-bit scales and mins, nibbles */
    MMS_TYPE_Q6_K    = 8,   /* blocks of 256: 16 sub-blocks with int8 scales, 6-bit values */
    MMS_TYPE_Q5_K    = 9,   /* blocks of 256: Q4_K's scales and mins, 5-bit values */
    MMS_TYPE_COUNT
};

typedef uint16_t mms_fp16_t;  /* IEEE 754 half, stored as bits */
typedef uint16_t mms_bf16_t;  /* bfloat16, stored as bits */

/* One row of the traits table. Block types (quantized) have blck_size > 1: a row of n elements
   takes n / blck_size * type_size bytes. to_float/from_float convert n elements (n a multiple of
   blck_size); from_float rounds to nearest even. */
struct mms_type_traits {
    const char *name;
    int64_t     blck_size;
    size_t      type_size;
    bool        is_quantized;
    bool        is_float;       /* usable as a floating-point operand of the ops */
    void      (*to_float)  (const void *src, float *dst, int64_t n);
    void      (*from_float)(const float *src, void *dst, int64_t n);
};

MMS_API const struct mms_type_traits *mms_get_type_traits(enum mms_type type); /* NULL if invalid */
MMS_API const char *mms_type_name(enum mms_type type);   /* "f32", ...; "invalid" if unknown */
MMS_API size_t      mms_type_size(enum mms_type type);   /* bytes per block */
MMS_API int64_t     mms_blck_size(enum mms_type type);   /* elements per block */
MMS_API size_t      mms_row_size(enum mms_type type, int64_t ne);

MMS_API float       mms_fp16_to_fp32(mms_fp16_t h);
MMS_API mms_fp16_t  mms_fp32_to_fp16(float f);
MMS_API float       mms_bf16_to_fp32(mms_bf16_t h);
MMS_API mms_bf16_t  mms_fp32_to_bf16(float f);

/* >>api-tensor ------------------------------------------------------------------------------------
   Tensors are ggml-style: up to 4 dimensions, ne[] element counts with ne[0] the contiguous one,
   nb[] byte strides. A tensor of a matrix W with `in` inputs and `out` outputs has ne = {in, out}. */

#define MMS_MAX_DIMS      4
#define MMS_MAX_SRC       6
#define MMS_MAX_OP_PARAMS 64   /* bytes */
#define MMS_MAX_NAME      64

enum mms_op {
    MMS_OP_NONE           = 0,   /* a leaf: weights, inputs, constants */
    MMS_OP_DUP            = 1,
    MMS_OP_ADD            = 2,
    MMS_OP_SUB            = 3,
    MMS_OP_MUL            = 4,
    MMS_OP_DIV            = 5,
    MMS_OP_SCALE          = 6,
    MMS_OP_SQR            = 7,
    MMS_OP_SQRT           = 8,
    MMS_OP_EXP            = 9,
    MMS_OP_TANH           = 10,
    MMS_OP_SILU           = 11,
    MMS_OP_GELU           = 12,  /* exact: x * Phi(x) with erf */
    MMS_OP_GELU_TANH      = 13,  /* the tanh approximation (what ggml calls gelu) */
    MMS_OP_SUM_ROWS       = 14,
    MMS_OP_ARGMAX         = 15,
    MMS_OP_NORM           = 16,
    MMS_OP_RMS_NORM       = 17,
    MMS_OP_MUL_MAT        = 18,
    MMS_OP_SOFT_MAX       = 19,
    MMS_OP_ROPE           = 20,
    MMS_OP_CONCAT         = 21,
    MMS_OP_PAD            = 22,
    MMS_OP_IM2COL         = 23,
    MMS_OP_GET_ROWS       = 24,
    MMS_OP_CPY            = 25,
    MMS_OP_CONT           = 26,
    MMS_OP_FLASH_ATTN_EXT = 27,
    MMS_OP_VIEW           = 28,
    MMS_OP_RESHAPE        = 29,
    MMS_OP_PERMUTE        = 30,
    MMS_OP_TRANSPOSE      = 31,
    MMS_OP_REPEAT         = 32,
    MMS_OP_SET_ROWS       = 33,
    MMS_OP_COUNT
};

MMS_API const char *mms_op_name(enum mms_op op);   /* "MUL_MAT", ... */
MMS_API bool        mms_op_is_view(enum mms_op op); /* VIEW, RESHAPE, PERMUTE, TRANSPOSE */

enum mms_tensor_flag {
    MMS_TENSOR_FLAG_INPUT      = 1,  /* set by the caller before compute; placed first by allocators */
    MMS_TENSOR_FLAG_OUTPUT     = 2,  /* read by the caller after compute; never reused in the graph */
    MMS_TENSOR_FLAG_PERSISTENT = 4   /* kept across later graphs of the same scheduler */
};

enum mms_rope_mode {
    MMS_ROPE_TYPE_NORMAL = 0,  /* rotate adjacent pairs (2i, 2i+1): Meta / GGUF llama layout */
    MMS_ROPE_TYPE_NEOX   = 2   /* rotate halves (i, i + n_dims/2): Hugging Face layout */
};

struct mms_backend_buffer;
struct mms__provenance;   /* internal */

/* What kind of memory a tensor was given, recorded when it is placed and never derived: the
   lifetime rules (section 6 of the manual) follow from it. */
enum mms_memory_kind {
    MMS_MEMORY_NONE       = 0,  /* not placed */
    MMS_MEMORY_HOST       = 1,  /* data of an allocating context: until the context is reset or freed */
    MMS_MEMORY_STATIC     = 2,  /* a buffer the caller allocated (weights, caches): until it is freed */
    MMS_MEMORY_COMPUTE    = 3,  /* a graph allocator's memory: until that allocator's next allocation */
    MMS_MEMORY_PERSISTENT = 4,  /* kept by a scheduler across graphs: until released or the scheduler is freed */
    MMS_MEMORY_RESERVE    = 5   /* a stand-in while a scheduler plans (reserve): no data, never read */
};

/* The record a placement writes into the tensor; every lifetime check reads it (and only it). */
struct mms_placement {
    enum mms_memory_kind kind;
    uint64_t buffer_uid;   /* the buffer it was placed in, 0 for host memory: detects a freed buffer */
    uint64_t generation;   /* the buffer's generation then: detects memory handed out again */
    uint64_t graph_id;     /* the graph whose allocation placed it (0: none) */
};

struct mms_tensor {
    enum mms_type type;
    enum mms_op   op;
    int64_t       ne[MMS_MAX_DIMS];  /* elements per dimension */
    size_t        nb[MMS_MAX_DIMS];  /* bytes: nb[0] = type_size, nb[i] = nb[i-1] * ne[i-1] when contiguous */
    int32_t       flags;             /* enum mms_tensor_flag */
    int32_t       op_params[MMS_MAX_OP_PARAMS / sizeof(int32_t)];
    struct mms_tensor *src[MMS_MAX_SRC];

    struct mms_tensor *view_src;     /* the tensor whose memory a view (or CPY) uses */
    size_t             view_offs;    /* byte offset into view_src */

    void                      *data;        /* NULL until placed */
    struct mms_backend_buffer *buffer;      /* NULL for host memory; may be freed: check the tensor first */
    struct mms_placement       placement;   /* written by placement only */
    uint64_t                   uid;         /* unique in the process, never 0 */
    uint64_t                   version;     /* counts the writes made through the library (set, copy, compute) */
    struct mms__provenance    *provenance;  /* internal: what a kept tensor was computed from */
    bool                       watched;     /* internal: some kept tensor's provenance refers to it */

    void *extra;                     /* backend-private per-tensor state */
    char  name[MMS_MAX_NAME];
};

/* >>api-context -----------------------------------------------------------------------------------
   A context owns tensor metadata and, unless no_alloc, tensor data. mem_size = 0 lets it grow as
   needed; with a caller-owned mem_buffer it never grows and running out is an MMS_ERR_OOM error. */

struct mms_init_params {
    size_t mem_size;    /* first block of memory (0: a default, growing as needed) */
    void  *mem_buffer;  /* caller-owned memory of mem_size bytes, or NULL */
    bool   no_alloc;    /* true: tensors get no data; a backend buffer or allocator places them */
};

struct mms_context;

MMS_API struct mms_context *mms_init(struct mms_init_params params);  /* NULL + last error */
MMS_API void   mms_free(struct mms_context *ctx);
MMS_API void   mms_reset(struct mms_context *ctx);     /* drop every tensor and graph; keep the memory */
MMS_API size_t mms_used_mem(const struct mms_context *ctx);
MMS_API bool   mms_get_no_alloc(const struct mms_context *ctx);
MMS_API void   mms_set_no_alloc(struct mms_context *ctx, bool no_alloc);
MMS_API size_t mms_tensor_overhead(void);  /* metadata bytes per tensor, to size a fixed mem_buffer */
MMS_API size_t mms_graph_overhead(void);   /* metadata bytes of an empty graph */

/* Graph building is sticky: an op given bad arguments reports an error (naming the op, the tensors
   and their shapes), returns NULL and records the first such error in the context. Later ops given
   that NULL return NULL quietly, so a whole builder can run and be checked once at the end. */
MMS_API enum mms_status mms_ctx_status(const struct mms_context *ctx);
MMS_API const char     *mms_ctx_error(const struct mms_context *ctx);   /* "" when OK */
MMS_API void            mms_ctx_clear_error(struct mms_context *ctx);

MMS_API struct mms_tensor *mms_new_tensor(struct mms_context *ctx, enum mms_type type, int n_dims, const int64_t *ne);
MMS_API struct mms_tensor *mms_new_tensor_1d(struct mms_context *ctx, enum mms_type type, int64_t ne0);
MMS_API struct mms_tensor *mms_new_tensor_2d(struct mms_context *ctx, enum mms_type type, int64_t ne0, int64_t ne1);
MMS_API struct mms_tensor *mms_new_tensor_3d(struct mms_context *ctx, enum mms_type type, int64_t ne0, int64_t ne1, int64_t ne2);
MMS_API struct mms_tensor *mms_new_tensor_4d(struct mms_context *ctx, enum mms_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
MMS_API struct mms_tensor *mms_dup_tensor(struct mms_context *ctx, const struct mms_tensor *src);  /* same type and shape, new memory */
MMS_API struct mms_tensor *mms_view_tensor(struct mms_context *ctx, struct mms_tensor *src);       /* same memory */

MMS_API struct mms_tensor *mms_get_first_tensor(const struct mms_context *ctx);
MMS_API struct mms_tensor *mms_get_next_tensor(const struct mms_context *ctx, const struct mms_tensor *tensor);
MMS_API struct mms_tensor *mms_get_tensor(const struct mms_context *ctx, const char *name);

MMS_API const char        *mms_get_name(const struct mms_tensor *tensor);
MMS_API struct mms_tensor *mms_set_name(struct mms_tensor *tensor, const char *name);  /* truncates to MMS_MAX_NAME-1 */
MMS_API struct mms_tensor *mms_format_name(struct mms_tensor *tensor, const char *fmt, ...) MMS_PRINTF(2, 3);

MMS_API void mms_set_input(struct mms_tensor *tensor);
MMS_API void mms_set_output(struct mms_tensor *tensor);
MMS_API void mms_set_persistent(struct mms_tensor *tensor);  /* kept by the scheduler across graphs (manual section 8) */

MMS_API int64_t mms_nelements(const struct mms_tensor *tensor);
MMS_API int64_t mms_nrows(const struct mms_tensor *tensor);     /* ne[1] * ne[2] * ne[3] */
MMS_API size_t  mms_nbytes(const struct mms_tensor *tensor);    /* bytes spanned, strides included */
MMS_API int     mms_n_dims(const struct mms_tensor *tensor);    /* 1..4: index of the last dim > 1, plus one */
MMS_API bool    mms_is_contiguous(const struct mms_tensor *tensor);
MMS_API bool    mms_is_transposed(const struct mms_tensor *tensor);
MMS_API bool    mms_is_permuted(const struct mms_tensor *tensor);
MMS_API bool    mms_are_same_shape(const struct mms_tensor *a, const struct mms_tensor *b);
MMS_API bool    mms_are_same_layout(const struct mms_tensor *a, const struct mms_tensor *b); /* type, ne and nb */
MMS_API bool    mms_can_repeat(const struct mms_tensor *small, const struct mms_tensor *big); /* big.ne[i] % small.ne[i] == 0 */

/* Op parameters, for backends that implement ops (layouts are listed with each op below). */
MMS_API int32_t mms_get_op_params_i32(const struct mms_tensor *tensor, int index);
MMS_API float   mms_get_op_params_f32(const struct mms_tensor *tensor, int index);

/* >>api-ops ---------------------------------------------------------------------------------------
   Each op returns a new tensor describing the result (no compute happens here), or NULL on error.
   Shapes are checked now. Float operands may be F32, F16 or BF16 unless noted; results of
   element-wise ops, norms, softmax and rope have the type of `a`, the others are F32.
   [op params: ...] gives the layout of op_params for backend implementers. */

/* Element-wise with broadcasting: b is repeated over a (a->ne[i] % b->ne[i] == 0). */
MMS_API struct mms_tensor *mms_add(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b);
MMS_API struct mms_tensor *mms_sub(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b);
MMS_API struct mms_tensor *mms_mul(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b);
MMS_API struct mms_tensor *mms_div(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b);
MMS_API struct mms_tensor *mms_scale(struct mms_context *ctx, struct mms_tensor *a, float s);   /* [f32 s] */

MMS_API struct mms_tensor *mms_sqr(struct mms_context *ctx, struct mms_tensor *a);
MMS_API struct mms_tensor *mms_sqrt(struct mms_context *ctx, struct mms_tensor *a);
MMS_API struct mms_tensor *mms_exp(struct mms_context *ctx, struct mms_tensor *a);
MMS_API struct mms_tensor *mms_tanh(struct mms_context *ctx, struct mms_tensor *a);
MMS_API struct mms_tensor *mms_silu(struct mms_context *ctx, struct mms_tensor *a);
/* gelu is the exact erf form (Hugging Face "gelu"); ggml_gelu is the tanh form, here mms_gelu_tanh.
   This is a deliberate difference from ggml: porting code that wants the approximation must rename. */
MMS_API struct mms_tensor *mms_gelu(struct mms_context *ctx, struct mms_tensor *a);
MMS_API struct mms_tensor *mms_gelu_tanh(struct mms_context *ctx, struct mms_tensor *a);

/* Reductions over ne[0]: sum_rows -> F32 [1, ne1, ne2, ne3]; argmax -> I32 [ne1, ne2, ne3]
   (the first index of the maximum; NaN never wins). */
MMS_API struct mms_tensor *mms_sum_rows(struct mms_context *ctx, struct mms_tensor *a);
MMS_API struct mms_tensor *mms_argmax(struct mms_context *ctx, struct mms_tensor *a);

/* Normalisation over ne[0]: norm is layer norm without affine ((x - mean) / sqrt(var + eps)),
   rms_norm is x / sqrt(mean(x^2) + eps). [f32 eps] */
MMS_API struct mms_tensor *mms_norm(struct mms_context *ctx, struct mms_tensor *a, float eps);
MMS_API struct mms_tensor *mms_rms_norm(struct mms_context *ctx, struct mms_tensor *a, float eps);

/* Matrix product: a [K, M, A2, A3], b [K, N, B2, B3] -> F32 [M, N, B2, B3], out[m, n] = sum_k a[k, m] b[k, n].
   a is broadcast over the batch dims (B2 % A2 == 0, B3 % A3 == 0): with grouped-query attention a
   holds the KV heads, and query head h uses KV head h / (B2 / A2). Any strides are accepted. */
MMS_API struct mms_tensor *mms_mul_mat(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b);

/* softmax(a * scale + mask) over ne[0]. mask (optional, F32 or F16): [ne0, >= ne1, m2, m3] with m2
   dividing ne2 and m3 dividing ne3; row (i1, i2, i3) adds mask row (i1, i2 % m2, i3 % m3), so a
   mask is repeated over heads like b of add. -INFINITY masks out; a row entirely masked gives zeros.
   max_bias (ALiBi) must be 0: it is not implemented. [f32 scale, f32 max_bias] */
MMS_API struct mms_tensor *mms_soft_max(struct mms_context *ctx, struct mms_tensor *a);
MMS_API struct mms_tensor *mms_soft_max_ext(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *mask, float scale, float max_bias);

/* Rotary embedding. a [head_dim, n_head, n_tokens, 1]; pos I32 [n_tokens]; freq_factors (optional)
   F32 [n_dims / 2]: theta_i = pos * freq_scale * freq_base^(-2i / n_dims) / freq_factors[i].
   The first n_dims of head_dim are rotated (pairs by mode), the rest pass through; cos and sin
   are multiplied by attn_factor. YaRN (ext_factor != 0) is not implemented; n_ctx_orig, beta_fast
   and beta_slow are only used by YaRN. [i32 n_dims, i32 mode, i32 n_ctx_orig, f32 freq_base,
   f32 freq_scale, f32 ext_factor, f32 attn_factor, f32 beta_fast, f32 beta_slow] */
MMS_API struct mms_tensor *mms_rope_ext(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *pos,
                                        struct mms_tensor *freq_factors, int n_dims, int mode, int n_ctx_orig,
                                        float freq_base, float freq_scale, float ext_factor, float attn_factor,
                                        float beta_fast, float beta_slow);

/* Layout. concat joins along dim (same type; other dims equal). pad appends zeros at the end of
   each dim. get_rows picks rows of a [ne0, R, ne2, ne3] by I32 indices b [n, ne2, ne3] ->
   [ne0, n, ne2, ne3] (F32, or I32 for an I32 a); an index out of range gives a compute error.
   [concat: i32 dim] [pad: i32 p0, p1, p2, p3] */
MMS_API struct mms_tensor *mms_concat(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b, int dim);
MMS_API struct mms_tensor *mms_pad(struct mms_context *ctx, struct mms_tensor *a, int p0, int p1, int p2, int p3);
MMS_API struct mms_tensor *mms_get_rows(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b);
/* The converse: row rows[i] of a [ne0, R, ne2, ne3] becomes row i of b [ne0, n, ne2, ne3] (float
   types, converted to a's), for every (ne2, ne3); rows I32 [n]. Returns a view of a (computing it
   writes a), like mms_cpy. The rows are data, not part of the graph's shape: a KV cache written at
   the positions of the batch gives the same graph at every position. An index out of range is a
   compute error. [src[0] b, src[1] rows, src[2] a] */
MMS_API struct mms_tensor *mms_set_rows(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b, struct mms_tensor *rows);

/* repeat tiles a over the shape of b (b.ne[i] % a.ne[i] == 0; only b's shape is used), any type. */
MMS_API struct mms_tensor *mms_repeat(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b);

/* Copies. cpy writes a into b (same number of elements, converting between F32/F16/BF16) and
   returns a view of b; dup and cont return a new contiguous copy of a; cont_Nd also reshapes. */
MMS_API struct mms_tensor *mms_cpy(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b);
MMS_API struct mms_tensor *mms_dup(struct mms_context *ctx, struct mms_tensor *a);
MMS_API struct mms_tensor *mms_cont(struct mms_context *ctx, struct mms_tensor *a);
/* a as a new contiguous tensor of another float type (a CONT node of that type), rounded to
   nearest even: a result of its own, unlike mms_cpy's view of its destination. */
MMS_API struct mms_tensor *mms_cast(struct mms_context *ctx, struct mms_tensor *a, enum mms_type type);
MMS_API struct mms_tensor *mms_cont_2d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1);
MMS_API struct mms_tensor *mms_cont_3d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2);
MMS_API struct mms_tensor *mms_cont_4d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);

/* Convolution as im2col + mul_mat (ggml's layout). 2-D: kernel a [KW, KH, IC, OC] (only its shape
   is read), input b [W, H, IC, N] -> im2col [IC*KH*KW, OW, OH, N]; 1-D (is_2D false): a [KW, IC, OC],
   b [W, IC, N] -> [IC*KW, OW, N]. OW = (W + 2*p0 - d0*(KW-1) - 1) / s0 + 1. dst_type F32 or F16.
   Column (ic*KH + ky)*KW + kx of output row (ox, oy, n) holds input (ox*s0 + kx*d0 - p0,
   oy*s1 + ky*d1 - p1, ic, n), or 0 in the padding: the order a contiguous kernel is stored in.
   conv_2d returns F32 [OW, OH, OC, N]. [im2col: i32 s0, s1, p0, p1, d0, d1, is_2D] */
MMS_API struct mms_tensor *mms_im2col(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b,
                                      int s0, int s1, int p0, int p1, int d0, int d1, bool is_2D, enum mms_type dst_type);
MMS_API struct mms_tensor *mms_conv_2d(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b,
                                       int s0, int s1, int p0, int p1, int d0, int d1);

/* Fused attention, computed with a streaming softmax (the n_q x n_kv score matrix is never stored).
   q [D, n_q, H, B] (float), k [D, n_kv, Hkv, B], v [Dv, n_kv, Hkv, B] (F32/F16/BF16, same type),
   H % Hkv == 0 (grouped heads: query head h uses KV head h / (H / Hkv)); mask optional F32/F16
   [n_kv, >= n_q, m2, m3] with m2 dividing H and m3 dividing B, repeated like soft_max_ext's.
   Result F32 [Dv, H, n_q, B] (note: heads before tokens, ready for a reshape to [Dv*H, n_q]).
   logit_softcap c != 0 replaces each score s by c * tanh(s / c) (after scale). max_bias must be 0.
   [f32 scale, f32 max_bias, f32 logit_softcap] */
MMS_API struct mms_tensor *mms_flash_attn_ext(struct mms_context *ctx, struct mms_tensor *q, struct mms_tensor *k,
                                              struct mms_tensor *v, struct mms_tensor *mask,
                                              float scale, float max_bias, float logit_softcap);
/* The same with mask rows shared between query rows: query row i (of every head and batch) adds
   mask row mask_rows[i] (I32 [n_q], each in 0 .. mask->ne[1] - 1, checked when computed) instead
   of row i, so a mask of a few patterns holds just those: the vision encoder's padding mask is two
   rows of n_kv (padding queries see no padding key, the others see every key) instead of n_q x
   n_kv. [src[4] = mask_rows] */
MMS_API struct mms_tensor *mms_flash_attn_ext_mask_rows(struct mms_context *ctx, struct mms_tensor *q, struct mms_tensor *k,
                                                        struct mms_tensor *v, struct mms_tensor *mask, struct mms_tensor *mask_rows,
                                                        float scale, float max_bias, float logit_softcap);

/* Views share memory with a; offsets and strides in bytes. The view must lie inside a's memory. */
MMS_API struct mms_tensor *mms_view_1d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, size_t offset);
MMS_API struct mms_tensor *mms_view_2d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1,
                                       size_t nb1, size_t offset);
MMS_API struct mms_tensor *mms_view_3d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                                       size_t nb1, size_t nb2, size_t offset);
MMS_API struct mms_tensor *mms_view_4d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                                       int64_t ne3, size_t nb1, size_t nb2, size_t nb3, size_t offset);
/* Reshapes need a contiguous a and the same number of elements. */
MMS_API struct mms_tensor *mms_reshape(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *shape_of);
MMS_API struct mms_tensor *mms_reshape_1d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0);
MMS_API struct mms_tensor *mms_reshape_2d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1);
MMS_API struct mms_tensor *mms_reshape_3d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2);
MMS_API struct mms_tensor *mms_reshape_4d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
/* permute moves source dim i to position axis_i (ggml's convention); transpose swaps dims 0 and 1.
   [permute: i32 axis0..3] */
MMS_API struct mms_tensor *mms_permute(struct mms_context *ctx, struct mms_tensor *a, int axis0, int axis1, int axis2, int axis3);
MMS_API struct mms_tensor *mms_transpose(struct mms_context *ctx, struct mms_tensor *a);

/* >>api-graph -------------------------------------------------------------------------------------
   A graph is the ordered list of nodes needed to compute its outputs: build_forward_expand adds a
   tensor and everything it depends on, depth first with sources in order (ggml's order). Tensors
   with op NONE are leafs, the rest nodes (views included). A tensor marked persistent (not a view)
   is a leaf too, except when it is the tensor expanded: a graph that expands a kept tensor
   computes it, any other graph reads its kept value (its producers are not walked). Graphs grow
   without a size cap and live in the context they were created in. */

struct mms_cgraph;

MMS_API struct mms_cgraph *mms_new_graph(struct mms_context *ctx);  /* NULL + last error */
MMS_API void               mms_build_forward_expand(struct mms_cgraph *graph, struct mms_tensor *tensor);
MMS_API int                mms_graph_n_nodes(const struct mms_cgraph *graph);
MMS_API struct mms_tensor *mms_graph_node(const struct mms_cgraph *graph, int i);   /* i < 0 counts from the end */
MMS_API int                mms_graph_n_leafs(const struct mms_cgraph *graph);
MMS_API struct mms_tensor *mms_graph_leaf(const struct mms_cgraph *graph, int i);
MMS_API struct mms_tensor *mms_graph_get_tensor(const struct mms_cgraph *graph, const char *name);
MMS_API uint64_t           mms_graph_id(const struct mms_cgraph *graph);   /* unique per process, never 0 */
/* A name for messages and traces ("vision encoder"); graphs are "graph #<id>" without one. */
MMS_API void               mms_graph_set_name(struct mms_cgraph *graph, const char *name);
MMS_API const char        *mms_graph_get_name(const struct mms_cgraph *graph);
/* For backends: true when the graph's owner vouches that nothing a kernel sees has changed since
   the graph was last computed (its nodes, ops, parameters, shapes, strides and every address;
   only the memory's contents differ), so a backend may replay what it recorded for it then. Only
   a scheduler sets it, on its split graphs when it allocates the same graph again (the manual,
   "Decode graphs"); any other graph answers false. */
MMS_API bool               mms_graph_unchanged(const struct mms_cgraph *graph);
/* The first error met while building (a NULL tensor from a failed op, a graph cycle), with its message. */
MMS_API enum mms_status    mms_graph_status(const struct mms_cgraph *graph);
MMS_API const char        *mms_graph_error(const struct mms_cgraph *graph);

/* A table of nodes and leafs (op, type, shape, flags, sources) written to `out` (stdout if NULL). */
MMS_API void            mms_graph_print(const struct mms_cgraph *graph, FILE *out);
/* Graphviz: `dot -Tsvg graph.dot -o graph.svg`. Inputs, outputs and views are drawn distinctly. */
MMS_API enum mms_status mms_graph_dump_dot(const struct mms_cgraph *graph, const char *path);
