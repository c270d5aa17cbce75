/* >>backend =======================================================================================
   The generic side of backends: calls through the interface, with the checks every backend gets
   for free (graph built without errors, every tensor placed, alive and readable here). */

MMS_API const char *mms_backend_name(mms_backend_t b) { return b ? b->iface.get_name(b) : "(none)"; }
MMS_API void mms_backend_free(mms_backend_t b) { if (b) b->iface.free(b); }
MMS_API mms_backend_buffer_type_t mms_backend_get_default_buffer_type(mms_backend_t b) { return b->iface.get_default_buffer_type(b); }
MMS_API mms_backend_buffer_t mms_backend_alloc_buffer(mms_backend_t b, size_t size) {
    return mms_backend_buft_alloc_buffer(mms_backend_get_default_buffer_type(b), size);
}
MMS_API size_t mms_backend_get_alignment(mms_backend_t b) { return mms_backend_buft_get_alignment(mms_backend_get_default_buffer_type(b)); }
MMS_API size_t mms_backend_get_max_size(mms_backend_t b)  { return mms_backend_buft_get_max_size(mms_backend_get_default_buffer_type(b)); }
MMS_API bool mms_backend_supports_op(mms_backend_t b, const struct mms_tensor *op) { return b->iface.supports_op(b, op); }
MMS_API bool mms_backend_supports_buft(mms_backend_t b, mms_backend_buffer_type_t buft) { return b->iface.supports_buft(b, buft); }
MMS_API bool mms_backend_offload_op(mms_backend_t b, const struct mms_tensor *op) { return b->iface.offload_op && b->iface.offload_op(b, op); }

MMS_API mms_backend_buffer_t mms_backend_alloc_ctx_tensors(struct mms_context *ctx, mms_backend_t b) {
    if (!b) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_alloc_ctx_tensors: backend is NULL"); return NULL; }
    return mms_backend_alloc_ctx_tensors_from_buft(ctx, mms_backend_get_default_buffer_type(b));
}

/* Can backend b read and write the memory of t (checked live)? */
static bool mms__backend_can_use(mms_backend_t b, const struct mms_tensor *t) {
    mms_backend_buffer_t live = mms__live_buffer_of(t);
    return mms_backend_supports_buft(b, live ? live->buft : mms_backend_cpu_buffer_type());
}

static enum mms_status mms__graph_check_for(mms_backend_t b, struct mms_cgraph *g, const char *who) {
    const bool unchanged = mms_graph_unchanged(g);
    int i, n;
    if (!b || !g) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: backend and graph are required", who);
    if (mms_graph_status(g) != MMS_OK)
        return mms_set_error(mms_graph_status(g), "%s: the graph was not built correctly: %s", who, mms_graph_error(g));
    for (n = 0; n < 2; n++) {
        int count = n == 0 ? mms_graph_n_leafs(g) : mms_graph_n_nodes(g);
        for (i = 0; i < count; i++) {
            struct mms_tensor *t = n == 0 ? mms_graph_leaf(g, i) : mms_graph_node(g, i);
            enum mms_status st;
            if (mms_nelements(t) == 0) continue;
            if (t->view_src && t->placement.kind == MMS_MEMORY_NONE && t->view_src->placement.kind != MMS_MEMORY_NONE &&
                (st = mms_backend_view_init(t)) != MMS_OK) return st;
            st = n == 0 ? mms__tensor_check_read(t, who) : mms__tensor_check(t, who);
            if (st != MMS_OK) return st;
            if (unchanged) continue;           /* same buffers and ops as when this passed last time */
            if (!mms__backend_can_use(b, t))
                return mms_set_error(MMS_ERR_INVALID_ARG, "%s: tensor %s lives in a '%s' buffer that backend %s cannot use",
                                     who, mms__tensor_desc(t).s, t->buffer ? mms_backend_buffer_name(t->buffer) : "host", mms_backend_name(b));
            if (n == 1 && !mms_op_is_view(t->op) && !mms_backend_supports_op(b, t))
                return mms_set_error(MMS_ERR_UNSUPPORTED, "%s: backend %s does not support %s for %s", who,
                                     mms_backend_name(b), mms_op_name(t->op), mms__tensor_desc(t).s);
        }
    }
    return MMS_OK;
}

/* Every node of a computed graph wrote its memory (a view's, its source's). */
static void mms__graph_written(struct mms_cgraph *g) {
    int i;
    for (i = 0; i < mms_graph_n_nodes(g); i++)
        if (!mms_op_is_view(mms_graph_node(g, i)->op)) mms__tensor_written(mms_graph_node(g, i));
}

MMS_API enum mms_status mms_backend_graph_compute_async(mms_backend_t b, struct mms_cgraph *g) {
    enum mms_status st = mms__graph_check_for(b, g, "mms_backend_graph_compute");
    if (st == MMS_OK) st = b->iface.graph_compute(b, g);
    if (st == MMS_OK) mms__graph_written(g);
    return st;
}

MMS_API enum mms_status mms_backend_synchronize(mms_backend_t b) {
    if (!b) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_synchronize: backend is NULL");
    return b->iface.synchronize ? b->iface.synchronize(b) : MMS_OK;
}

MMS_API enum mms_status mms_backend_graph_compute(mms_backend_t b, struct mms_cgraph *g) {
    enum mms_status st = mms_backend_graph_compute_async(b, g);
    return st != MMS_OK ? st : mms_backend_synchronize(b);
}

MMS_API enum mms_status mms_backend_tensor_set_async(mms_backend_t b, struct mms_tensor *t, const void *data, size_t offset, size_t size) {
    enum mms_status st;
    if (!b || !b->iface.set_tensor_async) return mms_backend_tensor_set(t, data, offset, size);
    st = mms__tensor_range_check(t, offset, size, false, "mms_backend_tensor_set_async");
    return st != MMS_OK ? st : mms__tensor_set_by_caller(t, b->iface.set_tensor_async(b, t, data, offset, size));
}

MMS_API enum mms_status mms_backend_tensor_get_async(mms_backend_t b, const struct mms_tensor *t, void *data, size_t offset, size_t size) {
    enum mms_status st;
    if (!b || !b->iface.get_tensor_async) return mms_backend_tensor_get(t, data, offset, size);
    st = mms__tensor_range_check(t, offset, size, true, "mms_backend_tensor_get_async");
    return st != MMS_OK ? st : b->iface.get_tensor_async(b, t, data, offset, size);
}

MMS_API enum mms_status mms_backend_tensor_copy_async(mms_backend_t backend_src, mms_backend_t backend_dst,
                                                      const struct mms_tensor *src, struct mms_tensor *dst) {
    enum mms_status st;
    if (backend_dst && backend_dst->iface.cpy_tensor_async) {
        if (!mms_are_same_layout(src, dst))
            return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_tensor_copy_async: src %s and dst %s differ in layout",
                                 mms__tensor_desc(src).s, mms__tensor_desc(dst).s);
        if ((st = mms__tensor_check_read(src, "mms_backend_tensor_copy_async")) != MMS_OK) return st;
        if ((st = mms__tensor_check(dst, "mms_backend_tensor_copy_async")) != MMS_OK) return st;
        st = backend_dst->iface.cpy_tensor_async(backend_src, backend_dst, src, dst);
        if (st != MMS_ERR_UNSUPPORTED) return mms__tensor_set_by_caller(dst, st);
    }
    /* synchronous fallback: the source must be complete before it is read */
    if ((st = mms_backend_synchronize(backend_src)) != MMS_OK) return st;
    if ((st = mms_backend_synchronize(backend_dst)) != MMS_OK) return st;
    return mms_backend_tensor_copy(src, dst);
}

MMS_API mms_backend_event_t mms_backend_event_new(mms_backend_t b) {
    return b && b->iface.event_new ? b->iface.event_new(b) : NULL;
}
MMS_API void mms_backend_event_free(mms_backend_event_t e) { if (e) e->backend->iface.event_free(e); }
MMS_API enum mms_status mms_backend_event_record(mms_backend_event_t e) {
    return e ? e->backend->iface.event_record(e) : mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_event_record: event is NULL");
}
MMS_API enum mms_status mms_backend_event_synchronize(mms_backend_event_t e) {
    return e ? e->backend->iface.event_synchronize(e) : mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_event_synchronize: event is NULL");
}
MMS_API enum mms_status mms_backend_event_wait(mms_backend_t b, mms_backend_event_t e) {
    if (!b || !e) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_event_wait: backend and event are required");
    return b->iface.event_wait ? b->iface.event_wait(b, e) : mms_backend_event_synchronize(e);
}
