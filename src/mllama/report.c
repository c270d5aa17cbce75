/* >>mllama-report ================================================================================
   Where the time and the memory of a context went: timings by phase and per sequence, memory per
   backend, the image store. */

/* Bytes on backend b (0 cpu, 1 gpu) of the weights (repacked: the part in CPU_REPACK buffers,
   on the CPU), the KV cache, the sequences' picture memory and the compute memory. */
static void mms__mllama_memory(const struct mms_mllama_context *c, int b, struct mms_mllama_memory *out) {
    mms_backend_t be = c->m->backends[b];
    int i;
    for (i = 0; i < c->m->n_bufs; i++) {
        const bool rp = mms_backend_buffer_get_type(c->m->bufs[i]) == mms_backend_cpu_repack_buffer_type();
        if (mms_backend_buffer_get_type(c->m->bufs[i]) == mms_backend_get_default_buffer_type(be) ||
            (b == 0 && (rp || mms_backend_buffer_is_host(c->m->bufs[i])))) out->weights += mms_backend_buffer_get_size(c->m->bufs[i]);
        if (b == 0 && rp) out->weights_repacked += mms_backend_buffer_get_size(c->m->bufs[i]);
    }
    for (i = 0; i < c->m->hp.n_layer; i++) {
        if (c->m->layers[i].backend != b) continue;
        if (c->k_cache[i]) out->kv_cache += mms_nbytes(c->k_cache[i]) + mms_nbytes(c->v_cache[i]);
        if (c->cross_k[i]) out->pictures += mms_nbytes(c->cross_k[i]) + mms_nbytes(c->cross_v[i]);
    }
    out->compute = mms_backend_sched_get_buffer_size(c->sched, be);
    out->image_store = c->store.bytes_on[b];
    out->image_store_peak = c->store.peak_on[b];
    out->peak = out->weights + out->kv_cache + out->pictures + out->compute + out->image_store_peak;
}

MMS_API void mms_mllama_context_print_memory(struct mms_mllama_context *c, FILE *out) {
    int b, i;
    if (!out) out = stdout;
    if (!c) return;
    for (b = 0; b < mms__mllama_n_devices(c); b++) {
        struct mms_mllama_memory m;
        memset(&m, 0, sizeof m);
        mms__mllama_memory(c, b, &m);
        fprintf(out, "mllama memory on %s: weights %.2f MiB, KV cache %.2f MiB, pictures %.2f MiB, compute %.2f MiB, image store %.2f MiB",
                mms_backend_name(c->m->backends[b]), (double)m.weights / 1048576.0, (double)m.kv_cache / 1048576.0,
                (double)m.pictures / 1048576.0, (double)m.compute / 1048576.0, (double)m.image_store / 1048576.0);
        if (m.weights_repacked) fprintf(out, " (weights repacked for the CPU kernels: %.2f MiB)", (double)m.weights_repacked / 1048576.0);
        fputc('\n', out);
    }
    for (i = 0; i < c->n_reserved; i++)
        for (b = 0; b < mms_backend_sched_get_n_backends(c->sched); b++)
            fprintf(out, "mllama graph '%s' on %s: compute %zu bytes (%.2f MiB), lower bound %zu bytes (%.2f MiB)\n", c->reserved[i].name,
                    mms_backend_name(mms_backend_sched_get_backend(c->sched, b)), c->reserved[i].planned[b],
                    (double)c->reserved[i].planned[b] / 1048576.0, c->reserved[i].lower_bound[b], (double)c->reserved[i].lower_bound[b] / 1048576.0);
}

/* -- timings -- */

MMS_API void mms_mllama_get_timings(const struct mms_mllama_context *c, struct mms_mllama_timings *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!c) return;
    *out = c->t;
    out->n_backends = mms__mllama_n_devices(c);
    out->n_seq = c->p.n_seq;
}

MMS_API enum mms_status mms_mllama_get_memory(const struct mms_mllama_context *c, int b, struct mms_mllama_memory *out) {
    if (!c || !out) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_get_memory: context and output are required");
    if (b < 0 || b >= mms__mllama_n_devices(c))
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_get_memory: backend %d, the context has %d", b, mms__mllama_n_devices(c));
    memset(out, 0, sizeof *out);
    mms__copy_str(out->name, sizeof out->name, mms_backend_name(c->m->backends[b]));
    mms__mllama_memory(c, b, out);
    return MMS_OK;
}

MMS_API void mms_mllama_get_image_store(const struct mms_mllama_context *c, struct mms_mllama_image_store *out) {
    int i;
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!c) return;
    out->budget = c->store.budget;
    out->bytes = c->store.bytes;
    out->peak = c->store.peak;
    for (i = 0; i < c->store.cap; i++) {
        out->n_pictures += c->store.pics[i].ctx != NULL;
        out->n_held += c->store.pics[i].ctx && c->store.pics[i].n_users > 0;
    }
    out->n_found = c->store.n_hits;
    out->n_encoded = c->store.n_encodes;
    out->n_evicted = c->store.n_evicted;
    out->n_not_kept = c->store.n_not_kept;
}

MMS_API enum mms_status mms_mllama_seq_get_timings(const struct mms_mllama_context *c, int seq, struct mms_mllama_seq_timings *out) {
    enum mms_status st = mms__mllama_check_seq(c, seq, "mms_mllama_seq_get_timings");
    int b;
    if (st != MMS_OK) return st;
    if (!out) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_seq_get_timings: out is NULL");
    *out = c->seqs[seq].t;
    out->kv_cache = 0;
    for (b = 0; b < 2; b++) out->kv_cache += c->cache_buf[b] ? mms_backend_buffer_get_size(c->cache_buf[b]) / (size_t)c->p.n_seq : 0;   /* with its picture slots */
    return MMS_OK;
}

MMS_API void mms_mllama_reset_timings(struct mms_mllama_context *c) {
    double load, context;
    int s;
    if (!c) return;
    for (s = 0; s < c->p.n_seq; s++) memset(&c->seqs[s].t, 0, sizeof c->seqs[s].t);
    load = c->t.load_ms;
    context = c->t.context_ms;
    memset(&c->t, 0, sizeof c->t);
    c->t.load_ms = load;
    c->t.context_ms = context;
}

static double mms__per_s(int n, double ms) { return ms > 0.0 ? (double)n * 1000.0 / ms : 0.0; }

MMS_API void mms_mllama_print_timings(const struct mms_mllama_context *c, FILE *out) {
    struct mms_mllama_timings t;
    struct mms_mllama_image_store is;
    int b;
    if (!out) out = stdout;
    mms_mllama_get_timings(c, &t);
    fprintf(out, "load          %10.2f ms\n", t.load_ms);
    fprintf(out, "context       %10.2f ms   (KV cache, reserving the graphs)\n", t.context_ms);
    fprintf(out, "preprocess    %10.2f ms   images: %d\n", t.preprocess_ms, t.n_preprocessed);
    fprintf(out, "image encode  %10.2f ms   encodes: %d (vision encoder + projector)\n", t.encode_ms, t.n_encodes);
    fprintf(out, "cross K/V     %10.2f ms\n", t.cross_kv_ms);
    fprintf(out, "prompt        %10.2f ms   %d tokens, %.2f tokens/s\n", t.prompt_ms, t.n_prompt_tokens, mms__per_s(t.n_prompt_tokens, t.prompt_ms));
    fprintf(out, "generation    %10.2f ms   %d tokens, %.2f tokens/s\n", t.gen_ms, t.n_gen_tokens, mms__per_s(t.n_gen_tokens, t.gen_ms));
    for (b = 0; b < t.n_backends; b++) {
        struct mms_mllama_memory m;
        if (mms_mllama_get_memory(c, b, &m) != MMS_OK) continue;
        fprintf(out, "memory %-6s peak %.2f MiB = weights %.2f + KV cache %.2f + pictures %.2f + compute %.2f + image store %.2f (at its peak)\n",
                m.name, (double)m.peak / 1048576.0, (double)m.weights / 1048576.0, (double)m.kv_cache / 1048576.0, (double)m.pictures / 1048576.0,
                (double)m.compute / 1048576.0, (double)m.image_store_peak / 1048576.0);
    }
    mms_mllama_get_image_store(c, &is);
    if (is.budget > 0)
        fprintf(out, "image store   %.2f MiB of %.2f MiB (peak %.2f): %d pictures, %d held by sequences; %lld found, %lld encoded, "
                "%lld evicted, %lld not kept\n", (double)is.bytes / 1048576.0, (double)is.budget / 1048576.0, (double)is.peak / 1048576.0,
                is.n_pictures, is.n_held, (long long)is.n_found, (long long)is.n_encoded, (long long)is.n_evicted, (long long)is.n_not_kept);
    for (b = 0; t.n_seq > 1 && b < t.n_seq; b++) {
        struct mms_mllama_seq_timings st;
        if (mms_mllama_seq_get_timings(c, b, &st) != MMS_OK || st.n_calls == 0) continue;
        fprintf(out, "sequence %-4d prompt %d tokens %.2f ms, generation %d tokens %.2f ms (%.2f tokens/s), KV cache %.2f MiB\n", b,
                st.n_prompt_tokens, st.prompt_ms, st.n_gen_tokens, st.gen_ms, mms__per_s(st.n_gen_tokens, st.gen_ms),
                (double)st.kv_cache / 1048576.0);
    }
}

