/* >>sched-debug ===================================================================================
   The scheduler's trace (MMS_SCHED_DEBUG), tensor dumps (MMS_SCHED_DUMP) and their settings. */

MMS_API void mms_backend_sched_set_debug(mms_backend_sched_t s, int level, FILE *out) {
    if (!s) return;
    s->debug = level;
    s->debug_out = out;
}

MMS_API void mms_backend_sched_set_poison(mms_backend_sched_t s, bool poison) { if (s) s->poison = poison; }

MMS_API enum mms_status mms_backend_sched_set_dump(mms_backend_sched_t s, const char *pattern, const char *dir) {
    if (!s) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_set_dump: scheduler is NULL");
    if (pattern && strlen(pattern) >= sizeof s->dump_pattern)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_set_dump: pattern longer than %zu characters", sizeof s->dump_pattern - 1);
    if (dir && strlen(dir) >= sizeof s->dump_dir)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_set_dump: folder name longer than %zu characters", sizeof s->dump_dir - 1);
    mms__copy_str(s->dump_pattern, sizeof s->dump_pattern, pattern ? pattern : "");
    mms__copy_str(s->dump_dir, sizeof s->dump_dir, dir && dir[0] ? dir : ".");
    return MMS_OK;
}

/* '*' matches any run of characters, '?' any one character. */
static bool mms__glob_match(const char *p, const char *s) {
    const char *star = NULL, *resume = NULL;
    while (*s) {
        if (*p == '*') { star = p++; resume = s; }
        else if (*p == '?' || *p == *s) { p++; s++; }
        else if (star) { p = star + 1; s = ++resume; }
        else return false;
    }
    while (*p == '*') p++;
    return *p == '\0';
}

static FILE *mms__sched_out(mms_backend_sched_t s) { return s->debug_out ? s->debug_out : stderr; }

/* Sizes the way people read them: 512 B, 12.5 KiB, 3.20 MiB. */
static const char *mms__bytes_str(size_t n, char *buf, size_t size) {
    if (n < 1024) snprintf(buf, size, "%zu B", n);
    else if (n < (size_t)1 << 20) snprintf(buf, size, "%.1f KiB", (double)n / 1024.0);
    else snprintf(buf, size, "%.2f MiB", (double)n / (1024.0 * 1024.0));
    return buf;
}

/* Level 1: the graph, its splits and their inputs, the buffers. Level 2: every node as well. */
static void mms__sched_debug_print(mms_backend_sched_t s) {
    FILE *f = mms__sched_out(s);
    struct mms__ptrmap info_of;
    char b1[32], b2[32], b3[32];
    int k, j, i, b;
    memset(&info_of, 0, sizeof info_of);
    for (k = 0; k < mms_gallocr_get_n_tensor_infos(s->galloc); k++)
        mms__ptrmap_put(&info_of, (uint64_t)(uintptr_t)mms_gallocr_get_tensor_info(s->galloc, k)->tensor, (void *)(intptr_t)(k + 1));
    fprintf(f, "mms_sched: %s graph #%llu%s%s%s: %d nodes, %d leafs, %d splits, %d split inputs, %d pipeline copies\n",
            s->reserved_only ? "reserve" : "alloc", (unsigned long long)mms_graph_id(s->graph), mms_graph_get_name(s->graph)[0] ? " '" : "",
            mms_graph_get_name(s->graph), mms_graph_get_name(s->graph)[0] ? "'" : "", s->n_nodes, s->n_leafs, s->n_splits, s->n_inputs, s->n_copies);
    for (k = 0; k < s->n_splits; k++) {
        const struct mms__sched_split *sp = &s->splits[k];
        fprintf(f, "mms_sched: ## split %d on %s: nodes %d..%d, %d inputs\n", k, mms_backend_name(s->backends[sp->backend]),
                sp->i0, sp->i1 - 1, sp->n_inputs);
        for (j = sp->first_input; j < sp->first_input + sp->n_inputs; j++) {
            const struct mms__sched_input *in = &s->inputs[j];
            fprintf(f, "mms_sched:    copy %s (%s) from %s to %s as '%s'\n", mms__tensor_desc(in->src).s,
                    mms__bytes_str(mms_nbytes(in->src), b1, sizeof b1), mms_backend_name(s->backends[in->src_backend]),
                    mms_backend_name(s->backends[sp->backend]), in->copies[s->cur_copy]->name);
        }
        if (s->debug < 2) continue;
        for (i = sp->i0; i < sp->i1; i++) {
            const struct mms_tensor *t = mms_graph_node(s->graph, i);
            int info = (int)(intptr_t)mms__ptrmap_get(&info_of, (uint64_t)(uintptr_t)s->clones[i], NULL);
            fprintf(f, "mms_sched:    node %d %s %s on %s (%s)", i, mms_op_name(t->op), mms__tensor_desc(t).s,
                    mms_backend_name(s->backends[s->node_backend[i]]), mms__sched_reason_names[s->node_why[i]]);
            if (info > 0) {
                const struct mms_gallocr_tensor_info *ti = mms_gallocr_get_tensor_info(s->galloc, info - 1);
                fprintf(f, ": %s buffer, offset %zu, size %zu, live %d..%d%s%s", mms_backend_buft_name(s->bufts[ti->buffer_id]),
                        ti->offset, ti->size, ti->first_use, ti->last_use, ti->inplace_of ? ", in place of " : "",
                        ti->inplace_of ? (ti->inplace_of->name[0] ? ti->inplace_of->name : mms_op_name(ti->inplace_of->op)) : "");
            } else if (t->view_src) {
                fprintf(f, ": view of '%s'", t->view_src->name);
            } else if (t->flags & MMS_TENSOR_FLAG_PERSISTENT) {
                fprintf(f, ": persistent, %s", mms__bytes_str(mms_nbytes(t), b1, sizeof b1));
            }
            fputc('\n', f);
        }
    }
    for (b = 0; b < s->n_backends; b++) {
        struct mms_gallocr_buffer_info bi;
        if (mms_gallocr_get_buffer_info(s->galloc, b, &bi) != MMS_OK) continue;
        fprintf(f, "mms_sched: compute memory on %s: %s planned (lower bound %s), %d tensors; persistent %s\n",
                mms_backend_name(s->backends[b]), mms__bytes_str(bi.planned, b1, sizeof b1),
                mms__bytes_str(bi.lower_bound, b2, sizeof b2), bi.n_tensors,
                mms__bytes_str(mms_backend_sched_get_persistent_size(s, s->backends[b]), b3, sizeof b3));
    }
    mms__ptrmap_free(&info_of);
}

/* One file per dumped node: a text line "mmsched-dump name=<name> type=<type> ne=<a,b,c,d>
   bytes=<n> fnv1a64=<hex>" then the tensor's elements, row-major and contiguous. */
static enum mms_status mms__sched_dump(mms_backend_sched_t s, const struct mms_tensor *t, int node) {
    const size_t row = mms_row_size(t->type, t->ne[0]);
    const size_t bytes = row * (size_t)mms_nrows(t);
    char path[768], safe[MMS_MAX_NAME];
    unsigned char *data = (unsigned char *)MMS_MALLOC(bytes + 1);
    uint64_t sum = MMS__FNV1A64_START;
    enum mms_status st = MMS_OK;
    int64_t r;
    FILE *f;
    size_t i;
    if (!data) return mms_set_error(MMS_ERR_OOM, "mms_sched dump: out of host memory for %zu bytes", bytes);
    for (i = 0; t->name[i] && i + 1 < sizeof safe; i++)
        safe[i] = (isalnum((unsigned char)t->name[i]) || t->name[i] == '.' || t->name[i] == '-') ? t->name[i] : '_';
    safe[i] = '\0';
    for (r = 0; r < mms_nrows(t) && st == MMS_OK; r++) {    /* rows one by one: views may have gaps */
        int64_t i1, i2, i3;
        mms__unravel_row(t->ne, r, &i1, &i2, &i3);
        if (t->nb[0] == mms_type_size(t->type) || mms_blck_size(t->type) > 1)
            st = mms_backend_tensor_get(t, data + (size_t)r * row, (size_t)(i1 * (int64_t)t->nb[1] + i2 * (int64_t)t->nb[2] + i3 * (int64_t)t->nb[3]), row);
        else
            st = mms_set_error(MMS_ERR_UNSUPPORTED, "mms_sched dump: %s has strided rows", mms__tensor_desc(t).s);
    }
    if (st == MMS_OK) {
        sum = mms__fnv1a64(data, bytes, sum);
        snprintf(path, sizeof path, "%s/mms-dump-g%llu-n%d-%s.bin", s->dump_dir, (unsigned long long)mms_graph_id(s->graph), node, safe);
        f = mms__fopen(path, "wb");
        if (!f) {
            st = mms_set_error(MMS_ERR_IO, "mms_sched dump: cannot write '%s'", path);
        } else {
            fprintf(f, "mmsched-dump name=%s type=%s ne=%lld,%lld,%lld,%lld bytes=%zu fnv1a64=%016llx\n", t->name, mms_type_name(t->type),
                    (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3], bytes, (unsigned long long)sum);
            if (fwrite(data, 1, bytes, f) != bytes) st = mms_set_error(MMS_ERR_IO, "mms_sched dump: error writing '%s'", path);
            if (fclose(f) != 0 && st == MMS_OK) st = mms_set_error(MMS_ERR_IO, "mms_sched dump: error writing '%s'", path);
            fprintf(mms__sched_out(s), "mms_sched: dump node %d %s fnv1a64=%016llx -> %s\n", node, mms__tensor_desc(t).s,
                    (unsigned long long)sum, path);
        }
    }
    MMS_FREE(data);
    return st;
}
