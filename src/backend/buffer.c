/* >>buffer ========================================================================================
   Buffer types and buffers, the registry of live buffers, tensor placement and data access.
   Every buffer gets a process-unique uid; a tensor placed in it keeps the uid and the buffer's
   generation, so a freed buffer or memory handed out again is detected, not silently reused. */

static volatile uint64_t  mms__buffer_uid_counter = 0;
static struct mms__ptrmap mms__live_buffers;   /* uid -> buffer, under the global lock */

static mms_backend_buffer_t mms__live_buffer(uint64_t uid) {
    mms_backend_buffer_t b;
    mms__global_lock();
    b = (mms_backend_buffer_t)mms__ptrmap_get(&mms__live_buffers, uid, NULL);
    mms__global_unlock();
    return b;
}

/* -- buffer types -- */

MMS_API const char *mms_backend_buft_name(mms_backend_buffer_type_t buft) { return buft ? buft->iface.get_name(buft) : "(none)"; }

MMS_API mms_backend_buffer_t mms_backend_buft_alloc_buffer(mms_backend_buffer_type_t buft, size_t size) {
    if (!buft) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_buft_alloc_buffer: buffer type is NULL"); return NULL; }
    return buft->iface.alloc_buffer(buft, size);
}
MMS_API size_t mms_backend_buft_get_alignment(mms_backend_buffer_type_t buft) { return buft->iface.get_alignment(buft); }
MMS_API size_t mms_backend_buft_get_max_size(mms_backend_buffer_type_t buft) {
    return buft->iface.get_max_size ? buft->iface.get_max_size(buft) : SIZE_MAX;
}
MMS_API size_t mms_backend_buft_get_alloc_size(mms_backend_buffer_type_t buft, const struct mms_tensor *t) {
    return buft->iface.get_alloc_size ? buft->iface.get_alloc_size(buft, t) : mms_nbytes(t);
}
MMS_API bool mms_backend_buft_is_host(mms_backend_buffer_type_t buft) { return buft->iface.is_host && buft->iface.is_host(buft); }

/* -- buffers -- */

MMS_API mms_backend_buffer_t mms_backend_buffer_init(mms_backend_buffer_type_t buft, struct mms_backend_buffer_i iface,
                                                     void *context, size_t size) {
    mms_backend_buffer_t b = (mms_backend_buffer_t)MMS_MALLOC(sizeof *b);
    bool ok;
    if (!b) { mms_set_error(MMS_ERR_OOM, "mms_backend_buffer_init: out of host memory"); return NULL; }
    b->iface = iface;
    b->buft = buft;
    b->context = context;
    b->size = size;
    b->usage = MMS_BUFFER_USAGE_ANY;
    b->uid = mms__atomic_next_u64(&mms__buffer_uid_counter);
    b->generation = 1;
    mms__global_lock();
    ok = mms__ptrmap_put(&mms__live_buffers, b->uid, b);
    mms__global_unlock();
    if (!ok) {
        MMS_FREE(b);
        mms_set_error(MMS_ERR_OOM, "mms_backend_buffer_init: out of host memory");
        return NULL;
    }
    return b;
}

MMS_API void mms_backend_buffer_free(mms_backend_buffer_t b) {
    if (!b) return;
    mms__global_lock();
    mms__ptrmap_remove(&mms__live_buffers, b->uid);
    if (mms__live_buffers.count == 0) mms__ptrmap_free(&mms__live_buffers);  /* leave nothing behind at exit */
    mms__global_unlock();
    if (b->iface.free_buffer) b->iface.free_buffer(b);
    MMS_FREE(b);
}

MMS_API const char *mms_backend_buffer_name(mms_backend_buffer_t b) { return b ? mms_backend_buft_name(b->buft) : "(none)"; }
MMS_API void  *mms_backend_buffer_get_base(mms_backend_buffer_t b) { return b->size ? b->iface.get_base(b) : NULL; }
MMS_API size_t mms_backend_buffer_get_size(mms_backend_buffer_t b) { return b->size; }
MMS_API size_t mms_backend_buffer_get_alignment(mms_backend_buffer_t b) { return mms_backend_buft_get_alignment(b->buft); }
MMS_API size_t mms_backend_buffer_get_alloc_size(mms_backend_buffer_t b, const struct mms_tensor *t) { return mms_backend_buft_get_alloc_size(b->buft, t); }
MMS_API bool   mms_backend_buffer_is_host(mms_backend_buffer_t b) { return mms_backend_buft_is_host(b->buft); }
MMS_API mms_backend_buffer_type_t mms_backend_buffer_get_type(mms_backend_buffer_t b) { return b->buft; }
MMS_API void   mms_backend_buffer_set_usage(mms_backend_buffer_t b, enum mms_buffer_usage usage) { b->usage = usage; }
MMS_API enum mms_buffer_usage mms_backend_buffer_get_usage(mms_backend_buffer_t b) { return b->usage; }
MMS_API enum mms_status mms_backend_buffer_clear(mms_backend_buffer_t b, uint8_t value) {
    if (!b) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_buffer_clear: buffer is NULL");
    return b->size ? b->iface.clear(b, value) : MMS_OK;
}
MMS_API void     mms_backend_buffer_reset(mms_backend_buffer_t b) { if (b) b->generation++; }
MMS_API uint64_t mms_backend_buffer_get_generation(mms_backend_buffer_t b) { return b ? b->generation : 0; }

/* -- placement -- */

static void mms__tensor_place(struct mms_tensor *t, mms_backend_buffer_t b, void *addr) {
    t->buffer = b;
    t->data = addr;
    t->buffer_uid = b ? b->uid : 0;
    t->generation = b ? b->generation : 0;
    t->graph_id = 0;   /* an allocator that places it for a graph sets this */
}

MMS_API enum mms_status mms_backend_tensor_alloc(mms_backend_buffer_t b, struct mms_tensor *t, void *addr) {
    char *base;
    size_t need;
    if (!b || !t) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_tensor_alloc: buffer and tensor are required");
    if (t->view_src) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_tensor_alloc: %s is a view; use mms_backend_view_init", mms__tensor_desc(t).s);
    if (t->data || t->buffer) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_tensor_alloc: %s already has memory", mms__tensor_desc(t).s);
    base = (char *)mms_backend_buffer_get_base(b);
    need = mms_backend_buffer_get_alloc_size(b, t);
    if ((char *)addr < base || (size_t)((char *)addr - base) > b->size || need > b->size - (size_t)((char *)addr - base))
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_tensor_alloc: %s (%zu bytes) does not fit at offset %td of buffer '%s' (%zu bytes)",
                             mms__tensor_desc(t).s, need, (char *)addr - base, mms_backend_buffer_name(b), b->size);
    mms__tensor_place(t, b, addr);
    return b->iface.init_tensor ? b->iface.init_tensor(b, t) : MMS_OK;
}

MMS_API enum mms_status mms_backend_view_init(struct mms_tensor *t) {
    const struct mms_tensor *src;
    if (!t || !t->view_src) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_view_init: not a view");
    src = t->view_src;
    if (!src->data) return mms_set_error(MMS_ERR_STATE, "mms_backend_view_init: the source of view %s has no memory yet", mms__tensor_desc(t).s);
    t->data = (char *)src->data + t->view_offs;
    t->buffer = src->buffer;
    t->buffer_uid = src->buffer_uid;
    t->generation = src->generation;
    t->graph_id = src->graph_id;
    return (t->buffer && t->buffer->iface.init_tensor) ? t->buffer->iface.init_tensor(t->buffer, t) : MMS_OK;
}

/* The check behind every data access and every compute: placed, buffer alive, same generation. */
static enum mms_status mms__tensor_check_one(const struct mms_tensor *t, const char *who) {
    mms_backend_buffer_t live;
    if (!t->data && !t->buffer)
        return mms_set_error(MMS_ERR_STATE, "%s: tensor %s has no memory: allocate it first (mms_backend_alloc_ctx_tensors, "
                             "a graph allocator or a scheduler)", who, mms__tensor_desc(t).s);
    if (!t->buffer) return MMS_OK;   /* host memory of an allocating context */
    live = mms__live_buffer(t->buffer_uid);
    if (live != t->buffer) {
        char from[48] = "";
        if (t->graph_id) snprintf(from, sizeof from, " (placed by graph #%llu)", (unsigned long long)t->graph_id);
        return mms_set_error(MMS_ERR_STALE, "%s: tensor %s lived in a buffer that has been freed%s; it must not be used any more "
                             "(a result kept across graphs must be marked persistent, and not released while in use)",
                             who, mms__tensor_desc(t).s, from);
    }
    if (live->generation != t->generation) {
        char from[48] = "";
        if (t->graph_id) snprintf(from, sizeof from, " by graph #%llu", (unsigned long long)t->graph_id);
        return mms_set_error(MMS_ERR_STALE, "%s: tensor %s is stale: it was placed%s in buffer '%s', whose memory has been handed "
                             "out again (placed in generation %llu, the buffer is at %llu). To keep a result across allocations, "
                             "mark it persistent (mms_set_persistent) or copy it out before the next allocation",
                             who, mms__tensor_desc(t).s, from, mms_backend_buffer_name(live),
                             (unsigned long long)t->generation, (unsigned long long)live->generation);
    }
    return MMS_OK;
}

static enum mms_status mms__tensor_check(const struct mms_tensor *t, const char *who) {
    enum mms_status st;
    if (!t) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: tensor is NULL", who);
    st = mms__tensor_check_one(t, who);
    if (st == MMS_OK && t->view_src) st = mms__tensor_check_one(t->view_src, who);
    return st;
}

MMS_API enum mms_status mms_backend_tensor_check(const struct mms_tensor *t) { return mms__tensor_check(t, "mms_backend_tensor_check"); }

static enum mms_status mms__tensor_range_check(const struct mms_tensor *t, size_t offset, size_t size, const char *who) {
    enum mms_status st = mms__tensor_check(t, who);
    if (st != MMS_OK) return st;
    if (offset > mms_nbytes(t) || size > mms_nbytes(t) - offset)
        return mms_set_error(MMS_ERR_INVALID_ARG, "%s: bytes [%zu, %zu) are outside tensor %s (%zu bytes)",
                             who, offset, offset + size, mms__tensor_desc(t).s, mms_nbytes(t));
    return MMS_OK;
}

MMS_API enum mms_status mms_backend_tensor_set(struct mms_tensor *t, const void *data, size_t offset, size_t size) {
    enum mms_status st = mms__tensor_range_check(t, offset, size, "mms_backend_tensor_set");
    if (st != MMS_OK || size == 0) return st;
    if (!data) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_tensor_set: data is NULL");
    if (!t->buffer) { memcpy((char *)t->data + offset, data, size); return MMS_OK; }
    return t->buffer->iface.set_tensor(t->buffer, t, data, offset, size);
}

MMS_API enum mms_status mms_backend_tensor_get(const struct mms_tensor *t, void *data, size_t offset, size_t size) {
    enum mms_status st = mms__tensor_range_check(t, offset, size, "mms_backend_tensor_get");
    if (st != MMS_OK || size == 0) return st;
    if (!data) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_tensor_get: data is NULL");
    if (!t->buffer) { memcpy(data, (const char *)t->data + offset, size); return MMS_OK; }
    return t->buffer->iface.get_tensor(t->buffer, t, data, offset, size);
}

MMS_API enum mms_status mms_backend_tensor_memset(struct mms_tensor *t, uint8_t value, size_t offset, size_t size) {
    enum mms_status st = mms__tensor_range_check(t, offset, size, "mms_backend_tensor_memset");
    if (st != MMS_OK || size == 0) return st;
    if (!t->buffer) { memset((char *)t->data + offset, value, size); return MMS_OK; }
    return t->buffer->iface.memset_tensor(t->buffer, t, value, offset, size);
}

static bool mms__tensor_is_host(const struct mms_tensor *t) { return !t->buffer || mms_backend_buffer_is_host(t->buffer); }

MMS_API enum mms_status mms_backend_tensor_copy(const struct mms_tensor *src, struct mms_tensor *dst) {
    enum mms_status st;
    size_t n;
    void *tmp;
    if (!src || !dst) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_tensor_copy: src and dst are required");
    if (!mms_are_same_layout(src, dst))
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_tensor_copy: src %s and dst %s differ in type, shape or strides",
                             mms__tensor_desc(src).s, mms__tensor_desc(dst).s);
    if ((st = mms__tensor_check(src, "mms_backend_tensor_copy")) != MMS_OK) return st;
    if ((st = mms__tensor_check(dst, "mms_backend_tensor_copy")) != MMS_OK) return st;
    n = mms_nbytes(src);
    if (src == dst || n == 0) return MMS_OK;
    if (mms__tensor_is_host(src)) return mms_backend_tensor_set(dst, src->data, 0, n);
    if (mms__tensor_is_host(dst)) return mms_backend_tensor_get(src, dst->data, 0, n);
    if (dst->buffer->iface.cpy_tensor && dst->buffer->iface.cpy_tensor(dst->buffer, src, dst)) return MMS_OK;
    tmp = MMS_MALLOC(n);
    if (!tmp) return mms_set_error(MMS_ERR_OOM, "mms_backend_tensor_copy: no host memory to stage %zu bytes", n);
    st = mms_backend_tensor_get(src, tmp, 0, n);
    if (st == MMS_OK) st = mms_backend_tensor_set(dst, tmp, 0, n);
    MMS_FREE(tmp);
    return st;
}

/* -- whole contexts -- */

MMS_API mms_backend_buffer_t mms_backend_alloc_ctx_tensors_from_buft(struct mms_context *ctx, mms_backend_buffer_type_t buft) {
    const char *who = "mms_backend_alloc_ctx_tensors";
    struct mms_tensor *t;
    mms_backend_buffer_t b;
    size_t align, total = 0;
    char *base;

    if (!ctx || !buft) { mms_set_error(MMS_ERR_INVALID_ARG, "%s: context and buffer type are required", who); return NULL; }
    align = mms_backend_buft_get_alignment(buft);
    for (t = mms_get_first_tensor(ctx); t; t = mms_get_next_tensor(ctx, t))
        if (!t->data && !t->view_src) total += MMS__ALIGN_UP(mms_backend_buft_get_alloc_size(buft, t), align);
    if (total == 0) {
        mms_set_error(MMS_ERR_INVALID_ARG, "%s: no tensor of the context needs memory (all are placed, views or empty)", who);
        return NULL;
    }
    if (total > mms_backend_buft_get_max_size(buft)) {
        mms_set_error(MMS_ERR_UNSUPPORTED, "%s: the tensors need %zu bytes, more than the %zu bytes a '%s' buffer can hold",
                      who, total, mms_backend_buft_get_max_size(buft), mms_backend_buft_name(buft));
        return NULL;
    }
    b = mms_backend_buft_alloc_buffer(buft, total);
    if (!b) return NULL;
    base = (char *)mms_backend_buffer_get_base(b);
    for (t = mms_get_first_tensor(ctx); t; t = mms_get_next_tensor(ctx, t)) {
        if (!t->data && !t->view_src) {
            if (mms_backend_tensor_alloc(b, t, base) != MMS_OK) { mms_backend_buffer_free(b); return NULL; }
            base += MMS__ALIGN_UP(mms_backend_buft_get_alloc_size(buft, t), align);
        }
    }
    for (t = mms_get_first_tensor(ctx); t; t = mms_get_next_tensor(ctx, t))
        if (t->view_src && !t->data && t->view_src->data && mms_backend_view_init(t) != MMS_OK) { mms_backend_buffer_free(b); return NULL; }
    return b;
}
