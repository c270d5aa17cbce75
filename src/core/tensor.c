/* >>tensor ========================================================================================
   Contexts (a growing arena of tensor metadata and, unless no_alloc, data), tensors, shapes,
   names, flags and views. */

#define MMS__OBJ_ALIGN   16
#define MMS__DATA_ALIGN  64
#define MMS__DEFAULT_BLOCK (1u << 20)
#define MMS__MAX_BLOCK     ((size_t)64 << 20)

struct mms__block {
    struct mms__block *next;
    char  *base;
    size_t size;
    size_t used;
    bool   owned;      /* allocated by us, freed with the context */
};

/* Every tensor of a context sits in one of these; `next` threads them in creation order. */
struct mms__tensor_obj {
    struct mms_tensor       tensor;
    struct mms__tensor_obj *next;
};

struct mms_cgraph;

struct mms_context {
    struct mms__block      *first_block;
    struct mms__block      *cur_block;
    size_t                  next_block_size;
    bool                    fixed;        /* caller-owned memory: never grows */
    bool                    no_alloc;
    size_t                  used;

    struct mms__tensor_obj *first_tensor;
    struct mms__tensor_obj *last_tensor;
    struct mms_cgraph      *graphs;       /* owned graphs, freed with the context */

    enum mms_status         status;       /* first error raised while building */
    char                    error[MMS__ERROR_MAX];
};

static void mms__graph_release_all(struct mms_context *ctx);  /* graph.c */

/* -- tensor identity --
   Every tensor gets a uid when made. A tensor that a kept tensor's provenance refers to is
   "watched": registered here by uid until its context is reset or freed, so a provenance record
   can find it (or learn it is gone) without holding a pointer that may dangle. */

static volatile uint64_t  mms__tensor_uid_counter = 0;
static struct mms__ptrmap mms__watched;         /* uid -> tensor, under the global lock */

/* Under the lock: a shared model's weights are watched by contexts on several threads. */
static void mms__tensor_watch(struct mms_tensor *t) {
    mms__global_lock();
    if (!t->watched && mms__ptrmap_put(&mms__watched, t->uid, t)) t->watched = true;
    mms__global_unlock();
}

/* Writes to watched tensors so far: a kept tensor checked since the last one is still up to date. */
static uint64_t mms__watched_writes = 1;   /* under the global lock */
static void mms__watched_write(void) { mms__global_lock(); mms__watched_writes++; mms__global_unlock(); }
static uint64_t mms__watched_writes_now(void) {
    uint64_t n;
    mms__global_lock();
    n = mms__watched_writes;
    mms__global_unlock();
    return n;
}

/* The live tensor with this uid, if it is watched (NULL: its context is gone). */
static struct mms_tensor *mms__tensor_find_watched(uint64_t uid) {
    struct mms_tensor *t;
    mms__global_lock();
    t = (struct mms_tensor *)mms__ptrmap_get(&mms__watched, uid, NULL);
    mms__global_unlock();
    return t;
}

/* A context's tensors go away: unregister the watched ones, free the provenance records. */
static void mms__ctx_forget_tensors(struct mms_context *ctx) {
    struct mms__tensor_obj *o;
    for (o = ctx->first_tensor; o; o = o->next) {
        MMS_FREE(o->tensor.provenance);
        o->tensor.provenance = NULL;
    }
    mms__global_lock();
    for (o = ctx->first_tensor; o; o = o->next)
        if (o->tensor.watched) mms__ptrmap_remove(&mms__watched, o->tensor.uid);
    if (mms__watched.count == 0) mms__ptrmap_free(&mms__watched);   /* leave nothing behind at exit */
    mms__global_unlock();
}

/* Records the first build error in the context, and raises it as the thread's last error. */
static void mms__ctx_error(struct mms_context *ctx, enum mms_status status, const char *fmt, ...) MMS_PRINTF(3, 4);
static void mms__ctx_error(struct mms_context *ctx, enum mms_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mms__set_errorv(status, fmt, ap);
    va_end(ap);
    if (ctx && ctx->status == MMS_OK) {
        ctx->status = status;
        mms__copy_str(ctx->error, sizeof ctx->error, mms__last_message);
    }
}

static struct mms__block *mms__block_new(size_t size) {
    struct mms__block *b = (struct mms__block *)MMS_MALLOC(sizeof *b);
    if (!b) return NULL;
    b->base = (char *)mms__aligned_alloc(MMS__DATA_ALIGN, size);
    if (!b->base) { MMS_FREE(b); return NULL; }
    b->next = NULL;
    b->size = size;
    b->used = 0;
    b->owned = true;
    return b;
}

/* Memory from the arena, aligned; NULL (with an OOM error in the context) when it runs out. */
static void *mms__ctx_alloc(struct mms_context *ctx, size_t size, size_t align) {
    struct mms__block *b = ctx->cur_block;
    for (;;) {
        size_t start = MMS__ALIGN_UP((size_t)(uintptr_t)(b->base + b->used), align) - (size_t)(uintptr_t)b->base;
        if (start + size <= b->size) {
            ctx->used += start + size - b->used;
            b->used = start + size;
            return b->base + start;
        }
        if (b->next) {                   /* after a reset the later blocks are empty again */
            b = b->next;
            ctx->cur_block = b;
            continue;
        }
        if (ctx->fixed) {
            mms__ctx_error(ctx, MMS_ERR_OOM, "context memory exhausted: %zu more bytes needed, %zu of %zu used "
                           "(pass a larger mem_size, or mem_buffer = NULL to let the context grow)",
                           size, ctx->used, b->size);
            return NULL;
        }
        {
            size_t want = MMS__MAX(size + align, ctx->next_block_size);
            struct mms__block *nb = mms__block_new(want);
            if (!nb) {
                mms__ctx_error(ctx, MMS_ERR_OOM, "out of host memory growing a context by %zu bytes", want);
                return NULL;
            }
            b->next = nb;
            b = nb;
            ctx->cur_block = nb;
            ctx->next_block_size = MMS__MIN(ctx->next_block_size * 2, MMS__MAX_BLOCK);
        }
    }
}

MMS_API struct mms_context *mms_init(struct mms_init_params params) {
    struct mms_context *ctx = (struct mms_context *)MMS_MALLOC(sizeof *ctx);
    if (!ctx) { mms_set_error(MMS_ERR_OOM, "mms_init: out of host memory"); return NULL; }
    memset(ctx, 0, sizeof *ctx);
    ctx->no_alloc = params.no_alloc;
    if (params.mem_buffer) {
        struct mms__block *b = (struct mms__block *)MMS_MALLOC(sizeof *b);
        if (!b) { MMS_FREE(ctx); mms_set_error(MMS_ERR_OOM, "mms_init: out of host memory"); return NULL; }
        if (params.mem_size == 0) {
            MMS_FREE(b);
            MMS_FREE(ctx);
            mms_set_error(MMS_ERR_INVALID_ARG, "mms_init: mem_buffer given with mem_size 0");
            return NULL;
        }
        b->next = NULL;
        b->base = (char *)params.mem_buffer;
        b->size = params.mem_size;
        b->used = 0;
        b->owned = false;
        ctx->first_block = b;
        ctx->fixed = true;
    } else {
        size_t size = params.mem_size ? params.mem_size : MMS__DEFAULT_BLOCK;
        ctx->first_block = mms__block_new(size);
        if (!ctx->first_block) {
            MMS_FREE(ctx);
            mms_set_error(MMS_ERR_OOM, "mms_init: cannot allocate %zu bytes", size);
            return NULL;
        }
    }
    ctx->cur_block = ctx->first_block;
    ctx->next_block_size = MMS__MAX(ctx->first_block->size, (size_t)MMS__DEFAULT_BLOCK);
    return ctx;
}

MMS_API void mms_free(struct mms_context *ctx) {
    struct mms__block *b;
    if (!ctx) return;
    mms__graph_release_all(ctx);
    mms__ctx_forget_tensors(ctx);
    b = ctx->first_block;
    while (b) {
        struct mms__block *next = b->next;
        if (b->owned) mms__aligned_free(b->base);
        MMS_FREE(b);
        b = next;
    }
    MMS_FREE(ctx);
}

MMS_API void mms_reset(struct mms_context *ctx) {
    struct mms__block *b;
    if (!ctx) return;
    mms__graph_release_all(ctx);
    mms__ctx_forget_tensors(ctx);
    for (b = ctx->first_block; b; b = b->next) b->used = 0;
    ctx->cur_block = ctx->first_block;
    ctx->used = 0;
    ctx->first_tensor = ctx->last_tensor = NULL;
    ctx->status = MMS_OK;
    ctx->error[0] = '\0';
}

MMS_API size_t mms_used_mem(const struct mms_context *ctx) { return ctx ? ctx->used : 0; }
MMS_API bool   mms_get_no_alloc(const struct mms_context *ctx) { return ctx && ctx->no_alloc; }
MMS_API void   mms_set_no_alloc(struct mms_context *ctx, bool no_alloc) { if (ctx) ctx->no_alloc = no_alloc; }
MMS_API size_t mms_tensor_overhead(void) { return sizeof(struct mms__tensor_obj) + MMS__OBJ_ALIGN; }

MMS_API enum mms_status mms_ctx_status(const struct mms_context *ctx) { return ctx ? ctx->status : MMS_ERR_INVALID_ARG; }
MMS_API const char *mms_ctx_error(const struct mms_context *ctx) { return ctx ? ctx->error : "no context"; }
MMS_API void mms_ctx_clear_error(struct mms_context *ctx) {
    if (!ctx) return;
    ctx->status = MMS_OK;
    ctx->error[0] = '\0';
}

/* -- shapes -- */

MMS_API int64_t mms_nelements(const struct mms_tensor *t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }
MMS_API int64_t mms_nrows(const struct mms_tensor *t)     { return t->ne[1] * t->ne[2] * t->ne[3]; }

MMS_API size_t mms_nbytes(const struct mms_tensor *t) {
    size_t bytes;
    int i;
    for (i = 0; i < MMS_MAX_DIMS; i++) if (t->ne[i] <= 0) return 0;
    if (mms_blck_size(t->type) == 1) {
        bytes = mms_type_size(t->type);
        for (i = 0; i < MMS_MAX_DIMS; i++) bytes += (size_t)(t->ne[i] - 1) * t->nb[i];
    } else {
        bytes = mms_row_size(t->type, t->ne[0]);
        for (i = 1; i < MMS_MAX_DIMS; i++) bytes += (size_t)(t->ne[i] - 1) * t->nb[i];
    }
    return bytes;
}

MMS_API int mms_n_dims(const struct mms_tensor *t) {
    int i;
    for (i = MMS_MAX_DIMS - 1; i >= 1; i--) if (t->ne[i] > 1) return i + 1;
    return 1;
}

MMS_API bool mms_is_contiguous(const struct mms_tensor *t) {
    size_t expect = mms_type_size(t->type);
    int i;
    if (t->ne[0] != mms_blck_size(t->type) && t->nb[0] != expect) return false;
    expect = mms_row_size(t->type, t->ne[0]);
    for (i = 1; i < MMS_MAX_DIMS; i++) {
        if (t->ne[i] != 1 && t->nb[i] != expect) return false;
        expect *= (size_t)t->ne[i];
    }
    return true;
}

MMS_API bool mms_is_transposed(const struct mms_tensor *t) { return t->nb[0] > t->nb[1]; }
MMS_API bool mms_is_permuted(const struct mms_tensor *t) {
    return t->nb[0] > t->nb[1] || t->nb[1] > t->nb[2] || t->nb[2] > t->nb[3];
}

MMS_API bool mms_are_same_shape(const struct mms_tensor *a, const struct mms_tensor *b) {
    return a->ne[0] == b->ne[0] && a->ne[1] == b->ne[1] && a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3];
}

MMS_API bool mms_are_same_layout(const struct mms_tensor *a, const struct mms_tensor *b) {
    int i;
    if (a->type != b->type) return false;
    for (i = 0; i < MMS_MAX_DIMS; i++) if (a->ne[i] != b->ne[i] || (a->ne[i] > 1 && a->nb[i] != b->nb[i])) return false;
    return true;
}

MMS_API bool mms_can_repeat(const struct mms_tensor *small, const struct mms_tensor *big) {
    int i;
    for (i = 0; i < MMS_MAX_DIMS; i++) if (small->ne[i] <= 0 || big->ne[i] % small->ne[i] != 0) return false;
    return true;
}

/* "'name' f32 [4,3,1,1]" or "unnamed MUL_MAT f32 [...]": how errors refer to a tensor. */
struct mms__desc { char s[MMS_MAX_NAME + 192]; };
static struct mms__desc mms__tensor_desc(const struct mms_tensor *t) {
    struct mms__desc d;
    char shape[96];
    if (!t) { snprintf(d.s, sizeof d.s, "NULL"); return d; }
    mms__shape_str(t->ne, shape, sizeof shape);
    if (t->name[0]) snprintf(d.s, sizeof d.s, "'%s' %s %s", t->name, mms_type_name(t->type), shape);
    else            snprintf(d.s, sizeof d.s, "unnamed %s %s %s", mms_op_name(t->op), mms_type_name(t->type), shape);
    return d;
}

/* -- tensor creation -- */

static void mms__set_contiguous_strides(struct mms_tensor *t) {
    int i;
    t->nb[0] = mms_type_size(t->type);
    t->nb[1] = mms_row_size(t->type, t->ne[0]);
    for (i = 2; i < MMS_MAX_DIMS; i++) t->nb[i] = t->nb[i - 1] * (size_t)t->ne[i - 1];
}

/* Creates a tensor. With view_src it shares that tensor's memory at view_offs (views of views
   point at the root); otherwise it gets data from the arena unless the context is no_alloc. */
static struct mms_tensor *mms__new_tensor_impl(struct mms_context *ctx, const char *who, enum mms_type type,
                                               int n_dims, const int64_t *ne, struct mms_tensor *view_src, size_t view_offs) {
    struct mms__tensor_obj *obj;
    struct mms_tensor *t;
    int64_t total = 1;
    int i;

    if (!ctx) { mms_set_error(MMS_ERR_INVALID_ARG, "%s: context is NULL", who); return NULL; }
    if (!mms__type_valid(type)) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: invalid type %d", who, (int)type);
        return NULL;
    }
    if (n_dims < 1 || n_dims > MMS_MAX_DIMS || !ne) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: n_dims must be 1..%d, got %d", who, MMS_MAX_DIMS, n_dims);
        return NULL;
    }
    for (i = 0; i < n_dims; i++) {
        if (ne[i] < 0 || (ne[i] > 0 && total > (INT64_C(1) << 60) / ne[i])) {
            mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: dimension %d has invalid size %lld", who, i, (long long)ne[i]);
            return NULL;
        }
        total *= ne[i];
    }
    if (ne[0] % mms_blck_size(type) != 0) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: ne[0] = %lld is not a multiple of the %s block size %lld",
                       who, (long long)ne[0], mms_type_name(type), (long long)mms_blck_size(type));
        return NULL;
    }
    if (view_src && view_src->view_src) {
        view_offs += view_src->view_offs;
        view_src = view_src->view_src;
    }

    obj = (struct mms__tensor_obj *)mms__ctx_alloc(ctx, sizeof *obj, MMS__OBJ_ALIGN);
    if (!obj) return NULL;
    memset(obj, 0, sizeof *obj);
    t = &obj->tensor;
    t->uid = mms__atomic_next_u64(&mms__tensor_uid_counter);
    t->type = type;
    t->op = MMS_OP_NONE;
    for (i = 0; i < MMS_MAX_DIMS; i++) t->ne[i] = i < n_dims ? ne[i] : 1;
    mms__set_contiguous_strides(t);

    if (view_src) {
        t->view_src = view_src;
        t->view_offs = view_offs;
        if (view_src->placement.kind != MMS_MEMORY_NONE) {
            t->data = view_src->data ? (char *)view_src->data + view_offs : NULL;
            t->buffer = view_src->buffer;
            t->placement = view_src->placement;
        }
    } else if (!ctx->no_alloc) {
        size_t bytes = mms_nbytes(t);
        t->data = mms__ctx_alloc(ctx, bytes ? bytes : 1, MMS__DATA_ALIGN);
        if (!t->data) return NULL;   /* the tensor object stays unlinked: harmless */
        t->placement.kind = MMS_MEMORY_HOST;
    }

    if (ctx->last_tensor) ctx->last_tensor->next = obj;
    else ctx->first_tensor = obj;
    ctx->last_tensor = obj;
    return t;
}

MMS_API struct mms_tensor *mms_new_tensor(struct mms_context *ctx, enum mms_type type, int n_dims, const int64_t *ne) {
    return mms__new_tensor_impl(ctx, "mms_new_tensor", type, n_dims, ne, NULL, 0);
}
MMS_API struct mms_tensor *mms_new_tensor_1d(struct mms_context *ctx, enum mms_type type, int64_t ne0) {
    return mms__new_tensor_impl(ctx, "mms_new_tensor_1d", type, 1, &ne0, NULL, 0);
}
MMS_API struct mms_tensor *mms_new_tensor_2d(struct mms_context *ctx, enum mms_type type, int64_t ne0, int64_t ne1) {
    int64_t ne[2];
    ne[0] = ne0; ne[1] = ne1;
    return mms__new_tensor_impl(ctx, "mms_new_tensor_2d", type, 2, ne, NULL, 0);
}
MMS_API struct mms_tensor *mms_new_tensor_3d(struct mms_context *ctx, enum mms_type type, int64_t ne0, int64_t ne1, int64_t ne2) {
    int64_t ne[3];
    ne[0] = ne0; ne[1] = ne1; ne[2] = ne2;
    return mms__new_tensor_impl(ctx, "mms_new_tensor_3d", type, 3, ne, NULL, 0);
}
MMS_API struct mms_tensor *mms_new_tensor_4d(struct mms_context *ctx, enum mms_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    int64_t ne[4];
    ne[0] = ne0; ne[1] = ne1; ne[2] = ne2; ne[3] = ne3;
    return mms__new_tensor_impl(ctx, "mms_new_tensor_4d", type, 4, ne, NULL, 0);
}

MMS_API struct mms_tensor *mms_dup_tensor(struct mms_context *ctx, const struct mms_tensor *src) {
    if (!src) { if (ctx && ctx->status == MMS_OK) mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_dup_tensor: src is NULL"); return NULL; }
    return mms__new_tensor_impl(ctx, "mms_dup_tensor", src->type, MMS_MAX_DIMS, src->ne, NULL, 0);
}

MMS_API struct mms_tensor *mms_get_first_tensor(const struct mms_context *ctx) {
    return ctx && ctx->first_tensor ? &ctx->first_tensor->tensor : NULL;
}
MMS_API struct mms_tensor *mms_get_next_tensor(const struct mms_context *ctx, const struct mms_tensor *tensor) {
    const struct mms__tensor_obj *obj = (const struct mms__tensor_obj *)tensor;
    MMS__UNUSED(ctx);
    return obj && obj->next ? &obj->next->tensor : NULL;
}
MMS_API struct mms_tensor *mms_get_tensor(const struct mms_context *ctx, const char *name) {
    struct mms__tensor_obj *obj;
    if (!ctx || !name) return NULL;
    for (obj = ctx->first_tensor; obj; obj = obj->next)
        if (strcmp(obj->tensor.name, name) == 0) return &obj->tensor;
    return NULL;
}

/* -- names, flags, op params -- */

MMS_API const char *mms_get_name(const struct mms_tensor *t) { return t ? t->name : ""; }
MMS_API struct mms_tensor *mms_set_name(struct mms_tensor *t, const char *name) {
    if (t) mms__copy_str(t->name, sizeof t->name, name ? name : "");
    return t;
}
MMS_API struct mms_tensor *mms_format_name(struct mms_tensor *t, const char *fmt, ...) {
    va_list ap;
    if (!t) return NULL;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    return t;
}

MMS_API void mms_set_input(struct mms_tensor *t)      { if (t) t->flags |= MMS_TENSOR_FLAG_INPUT; }
MMS_API void mms_set_output(struct mms_tensor *t)     { if (t) t->flags |= MMS_TENSOR_FLAG_OUTPUT; }
MMS_API void mms_set_persistent(struct mms_tensor *t) { if (t) t->flags |= MMS_TENSOR_FLAG_PERSISTENT; }

MMS_API int32_t mms_get_op_params_i32(const struct mms_tensor *t, int index) {
    MMS_ASSERT(index >= 0 && index < (int)(MMS_MAX_OP_PARAMS / sizeof(int32_t)));
    return t->op_params[index];
}
MMS_API float mms_get_op_params_f32(const struct mms_tensor *t, int index) {
    float f;
    MMS_ASSERT(index >= 0 && index < (int)(MMS_MAX_OP_PARAMS / sizeof(int32_t)));
    memcpy(&f, &t->op_params[index], sizeof f);
    return f;
}
static void mms__set_op_param_i32(struct mms_tensor *t, int index, int32_t v) { t->op_params[index] = v; }
static void mms__set_op_param_f32(struct mms_tensor *t, int index, float v) { memcpy(&t->op_params[index], &v, sizeof v); }

/* -- views -- */

/* Argument checks shared by every op: NULL inputs propagate an earlier failure quietly. */
static bool mms__args_ok(struct mms_context *ctx, const char *op, struct mms_tensor *a, struct mms_tensor *b) {
    if (!ctx) { mms_set_error(MMS_ERR_INVALID_ARG, "%s: context is NULL", op); return false; }
    if (a && b) return true;
    if (ctx->status == MMS_OK)
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: argument %s is NULL", op, a ? "b" : "a");
    return false;
}

/* A view of a with the given shape at byte offset (relative to a); nb gives all four strides, or
   NULL for contiguous ones. The view must lie inside the memory of a's root. */
static struct mms_tensor *mms__view_impl(struct mms_context *ctx, const char *who, enum mms_op op, struct mms_tensor *a,
                                         int n_dims, const int64_t *ne, const size_t *nb, size_t offset) {
    struct mms_tensor *root = a->view_src ? a->view_src : a;
    size_t base = (a->view_src ? a->view_offs : 0) + offset;
    size_t extent, limit = mms_nbytes(root);
    struct mms_tensor *t;
    int i;

    t = mms__new_tensor_impl(ctx, who, a->type, n_dims, ne, a, offset);
    if (!t) return NULL;
    if (nb) for (i = 0; i < MMS_MAX_DIMS; i++) t->nb[i] = nb[i];
    extent = mms_nbytes(t);
    if (extent > 0) {
        if (base + extent > limit) {
            mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: view of %s at offset %zu spans %zu bytes, beyond the %zu bytes of its memory",
                           who, mms__tensor_desc(a).s, offset, extent, limit > base ? limit - base : 0);
            return NULL;
        }
    }
    t->op = op;
    t->src[0] = a;
    return t;
}

MMS_API struct mms_tensor *mms_view_tensor(struct mms_context *ctx, struct mms_tensor *src) {
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, "mms_view_tensor", src, src)) return NULL;
    t = mms__view_impl(ctx, "mms_view_tensor", MMS_OP_VIEW, src, MMS_MAX_DIMS, src->ne, src->nb, 0);
    if (t) mms_format_name(t, "%.50s (view)", src->name);
    return t;
}

MMS_API struct mms_tensor *mms_view_1d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, size_t offset) {
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, "mms_view_1d", a, a)) return NULL;
    t = mms__view_impl(ctx, "mms_view_1d", MMS_OP_VIEW, a, 1, &ne0, NULL, offset);
    if (t) mms_format_name(t, "%.50s (view)", a->name);
    return t;
}

MMS_API struct mms_tensor *mms_view_2d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1,
                                       size_t nb1, size_t offset) {
    int64_t ne[2];
    size_t nb[4];
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, "mms_view_2d", a, a)) return NULL;
    ne[0] = ne0; ne[1] = ne1;
    nb[0] = mms_type_size(a->type); nb[1] = nb1; nb[2] = nb1 * (size_t)ne1; nb[3] = nb[2];
    t = mms__view_impl(ctx, "mms_view_2d", MMS_OP_VIEW, a, 2, ne, nb, offset);
    if (t) mms_format_name(t, "%.50s (view)", a->name);
    return t;
}

MMS_API struct mms_tensor *mms_view_3d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                                       size_t nb1, size_t nb2, size_t offset) {
    int64_t ne[3];
    size_t nb[4];
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, "mms_view_3d", a, a)) return NULL;
    ne[0] = ne0; ne[1] = ne1; ne[2] = ne2;
    nb[0] = mms_type_size(a->type); nb[1] = nb1; nb[2] = nb2; nb[3] = nb2 * (size_t)ne2;
    t = mms__view_impl(ctx, "mms_view_3d", MMS_OP_VIEW, a, 3, ne, nb, offset);
    if (t) mms_format_name(t, "%.50s (view)", a->name);
    return t;
}

MMS_API struct mms_tensor *mms_view_4d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                                       int64_t ne3, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    int64_t ne[4];
    size_t nb[4];
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, "mms_view_4d", a, a)) return NULL;
    ne[0] = ne0; ne[1] = ne1; ne[2] = ne2; ne[3] = ne3;
    nb[0] = mms_type_size(a->type); nb[1] = nb1; nb[2] = nb2; nb[3] = nb3;
    t = mms__view_impl(ctx, "mms_view_4d", MMS_OP_VIEW, a, 4, ne, nb, offset);
    if (t) mms_format_name(t, "%.50s (view)", a->name);
    return t;
}

static struct mms_tensor *mms__reshape_impl(struct mms_context *ctx, const char *who, struct mms_tensor *a, int n_dims, const int64_t *ne) {
    struct mms_tensor *t;
    int64_t n = 1;
    char shape[96];
    int i;
    if (!mms__args_ok(ctx, who, a, a)) return NULL;
    for (i = 0; i < n_dims; i++) n *= ne[i];
    if (!mms_is_contiguous(a)) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: %s is not contiguous (use mms_cont first)", who, mms__tensor_desc(a).s);
        return NULL;
    }
    if (n != mms_nelements(a)) {
        int64_t full[4] = { 1, 1, 1, 1 };
        for (i = 0; i < n_dims; i++) full[i] = ne[i];
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: cannot reshape %s (%lld elements) to %s (%lld elements)", who,
                       mms__tensor_desc(a).s, (long long)mms_nelements(a), mms__shape_str(full, shape, sizeof shape), (long long)n);
        return NULL;
    }
    t = mms__view_impl(ctx, who, MMS_OP_RESHAPE, a, n_dims, ne, NULL, 0);
    if (t) mms_format_name(t, "%.50s (reshaped)", a->name);
    return t;
}

MMS_API struct mms_tensor *mms_reshape(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *shape_of) {
    if (!mms__args_ok(ctx, "mms_reshape", a, shape_of)) return NULL;
    return mms__reshape_impl(ctx, "mms_reshape", a, MMS_MAX_DIMS, shape_of->ne);
}
MMS_API struct mms_tensor *mms_reshape_1d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0) {
    return mms__reshape_impl(ctx, "mms_reshape_1d", a, 1, &ne0);
}
MMS_API struct mms_tensor *mms_reshape_2d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1) {
    int64_t ne[2];
    ne[0] = ne0; ne[1] = ne1;
    return mms__reshape_impl(ctx, "mms_reshape_2d", a, 2, ne);
}
MMS_API struct mms_tensor *mms_reshape_3d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2) {
    int64_t ne[3];
    ne[0] = ne0; ne[1] = ne1; ne[2] = ne2;
    return mms__reshape_impl(ctx, "mms_reshape_3d", a, 3, ne);
}
MMS_API struct mms_tensor *mms_reshape_4d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    int64_t ne[4];
    ne[0] = ne0; ne[1] = ne1; ne[2] = ne2; ne[3] = ne3;
    return mms__reshape_impl(ctx, "mms_reshape_4d", a, 4, ne);
}

static struct mms_tensor *mms__permute_impl(struct mms_context *ctx, const char *who, enum mms_op op, struct mms_tensor *a,
                                            int axis0, int axis1, int axis2, int axis3) {
    int axes[4];
    int64_t ne[4];
    size_t nb[4];
    struct mms_tensor *t;
    int i, seen = 0;
    if (!mms__args_ok(ctx, who, a, a)) return NULL;
    axes[0] = axis0; axes[1] = axis1; axes[2] = axis2; axes[3] = axis3;
    for (i = 0; i < 4; i++) {
        if (axes[i] < 0 || axes[i] > 3 || (seen & (1 << axes[i]))) {
            mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: axes (%d,%d,%d,%d) are not a permutation of 0..3",
                           who, axis0, axis1, axis2, axis3);
            return NULL;
        }
        seen |= 1 << axes[i];
    }
    for (i = 0; i < 4; i++) {
        ne[axes[i]] = a->ne[i];
        nb[axes[i]] = a->nb[i];
    }
    t = mms__view_impl(ctx, who, op, a, 4, ne, nb, 0);
    if (!t) return NULL;
    for (i = 0; i < 4; i++) mms__set_op_param_i32(t, i, axes[i]);
    return t;
}

MMS_API struct mms_tensor *mms_permute(struct mms_context *ctx, struct mms_tensor *a, int axis0, int axis1, int axis2, int axis3) {
    struct mms_tensor *t = mms__permute_impl(ctx, "mms_permute", MMS_OP_PERMUTE, a, axis0, axis1, axis2, axis3);
    if (t) mms_format_name(t, "%.50s (permuted)", a->name);
    return t;
}

MMS_API struct mms_tensor *mms_transpose(struct mms_context *ctx, struct mms_tensor *a) {
    struct mms_tensor *t = mms__permute_impl(ctx, "mms_transpose", MMS_OP_TRANSPOSE, a, 1, 0, 2, 3);
    if (t) mms_format_name(t, "%.50s (transposed)", a->name);
    return t;
}
