/* >>buffer ========================================================================================
   Buffer types and buffers, and the registry of live buffers. Every buffer gets a process-unique
   uid and a generation; the lifetime section below records both in each tensor placed in it, so a
   freed buffer or memory handed out again is detected, not silently reused. */

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
    b->n_clears = 0;
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
    enum mms_status st;
    if (!b) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_buffer_clear: buffer is NULL");
    st = b->size ? b->iface.clear(b, value) : MMS_OK;
    if (st == MMS_OK) { b->n_clears++; mms__watched_write(); }   /* every tensor in it was written */
    return st;
}
MMS_API void     mms_backend_buffer_reset(mms_backend_buffer_t b) { if (b) b->generation++; }
MMS_API uint64_t mms_backend_buffer_get_generation(mms_backend_buffer_t b) { return b ? b->generation : 0; }
