/* >>tensor-data ===================================================================================
   Data in and out of placed tensors, and whole contexts placed in one buffer. Every access checks
   the tensor first (lifetime section); writes count in the tensor's version, and a kept tensor
   the caller overwrites no longer carries the provenance of its old value. */

static enum mms_status mms__tensor_range_check(const struct mms_tensor *t, size_t offset, size_t size, bool reading, const char *who) {
    enum mms_status st = reading ? mms__tensor_check_read(t, who) : mms__tensor_check(t, who);
    if (st != MMS_OK) return st;
    if (offset > mms_nbytes(t) || size > mms_nbytes(t) - offset)
        return mms_set_error(MMS_ERR_INVALID_ARG, "%s: bytes [%zu, %zu) are outside tensor %s (%zu bytes)",
                             who, offset, offset + size, mms__tensor_desc(t).s, mms_nbytes(t));
    return MMS_OK;
}

/* The caller wrote t's data (not a graph): a new version, and no provenance any more. */
static enum mms_status mms__tensor_set_by_caller(struct mms_tensor *t, enum mms_status st) {
    if (st != MMS_OK) return st;
    mms__tensor_written(t);
    mms__provenance_drop(t);
    return MMS_OK;
}

MMS_API enum mms_status mms_backend_tensor_set(struct mms_tensor *t, const void *data, size_t offset, size_t size) {
    enum mms_status st = mms__tensor_range_check(t, offset, size, false, "mms_backend_tensor_set");
    if (st != MMS_OK || size == 0) return st;
    if (!data) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_tensor_set: data is NULL");
    if (!t->buffer) { memcpy((char *)t->data + offset, data, size); return mms__tensor_set_by_caller(t, MMS_OK); }
    return mms__tensor_set_by_caller(t, t->buffer->iface.set_tensor(t->buffer, t, data, offset, size));
}

MMS_API enum mms_status mms_backend_tensor_get(const struct mms_tensor *t, void *data, size_t offset, size_t size) {
    enum mms_status st = mms__tensor_range_check(t, offset, size, true, "mms_backend_tensor_get");
    if (st != MMS_OK || size == 0) return st;
    if (!data) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_tensor_get: data is NULL");
    if (!t->buffer) { memcpy(data, (const char *)t->data + offset, size); return MMS_OK; }
    return t->buffer->iface.get_tensor(t->buffer, t, data, offset, size);
}

MMS_API enum mms_status mms_backend_tensor_memset(struct mms_tensor *t, uint8_t value, size_t offset, size_t size) {
    enum mms_status st = mms__tensor_range_check(t, offset, size, false, "mms_backend_tensor_memset");
    if (st != MMS_OK || size == 0) return st;
    if (!t->buffer) { memset((char *)t->data + offset, value, size); return mms__tensor_set_by_caller(t, MMS_OK); }
    return mms__tensor_set_by_caller(t, t->buffer->iface.memset_tensor(t->buffer, t, value, offset, size));
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
    if ((st = mms__tensor_check_read(src, "mms_backend_tensor_copy")) != MMS_OK) return st;
    if ((st = mms__tensor_check(dst, "mms_backend_tensor_copy")) != MMS_OK) return st;
    n = mms_nbytes(src);
    if (src == dst || n == 0) return MMS_OK;
    if (mms__tensor_is_host(src)) return mms_backend_tensor_set(dst, src->data, 0, n);
    if (mms__tensor_is_host(dst)) return mms__tensor_set_by_caller(dst, mms_backend_tensor_get(src, dst->data, 0, n));
    if (dst->buffer->iface.cpy_tensor && dst->buffer->iface.cpy_tensor(dst->buffer, src, dst)) return mms__tensor_set_by_caller(dst, MMS_OK);
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
        if (t->placement.kind == MMS_MEMORY_NONE && !t->view_src) total += MMS__ALIGN_UP(mms_backend_buft_get_alloc_size(buft, t), align);
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
        if (t->placement.kind == MMS_MEMORY_NONE && !t->view_src) {
            if (mms_backend_tensor_alloc(b, t, base) != MMS_OK) goto fail;
            base += MMS__ALIGN_UP(mms_backend_buft_get_alloc_size(buft, t), align);
        }
    }
    for (t = mms_get_first_tensor(ctx); t; t = mms_get_next_tensor(ctx, t))
        if (t->view_src && t->placement.kind == MMS_MEMORY_NONE && t->view_src->placement.kind != MMS_MEMORY_NONE &&
            mms_backend_view_init(t) != MMS_OK) goto fail;
    return b;
fail:   /* nothing keeps a record of the buffer freed here */
    for (t = mms_get_first_tensor(ctx); t; t = mms_get_next_tensor(ctx, t))
        if (t->placement.buffer_uid == b->uid) mms__tensor_unplace(t);
    mms_backend_buffer_free(b);
    return NULL;
}
