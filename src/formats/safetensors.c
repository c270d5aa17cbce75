/* >>safetensors ====================================================================================
   The safetensors reader: the header parsed with the strict JSON reader, each entry validated,
   tensors kept in name order for binary search. */

struct mms__st_tensor {
    const char *name, *dtype;
    enum mms_type type;
    int n_dims;
    int64_t shape[8];
    uint64_t begin, end;
};

struct mms_safetensors {
    struct mms__mapping    map;
    const uint8_t         *base;
    size_t                 size;
    char                  *path;
    struct mms_json       *header;
    int64_t                metadata;     /* the __metadata__ value, or -1 */
    const uint8_t         *data;         /* after the header */
    size_t                 data_size;
    struct mms__st_tensor *t;
    int64_t                n;
};

static const struct { const char *name; int size; enum mms_type type; } mms__st_dtypes[] = {
    { "BOOL", 1, MMS_TYPE_INVALID }, { "U8", 1, MMS_TYPE_INVALID }, { "I8", 1, MMS_TYPE_INVALID },
    { "F8_E5M2", 1, MMS_TYPE_INVALID }, { "F8_E4M3", 1, MMS_TYPE_INVALID }, { "I16", 2, MMS_TYPE_INVALID },
    { "U16", 2, MMS_TYPE_INVALID }, { "F16", 2, MMS_TYPE_F16 }, { "BF16", 2, MMS_TYPE_BF16 }, { "I32", 4, MMS_TYPE_INVALID },
    { "U32", 4, MMS_TYPE_INVALID }, { "F32", 4, MMS_TYPE_F32 }, { "F64", 8, MMS_TYPE_INVALID }, { "I64", 8, MMS_TYPE_INVALID },
    { "U64", 8, MMS_TYPE_INVALID },
};

static int mms__st_cmp_name(const void *a, const void *b) {
    return strcmp(((const struct mms__st_tensor *)a)->name, ((const struct mms__st_tensor *)b)->name);
}

static int mms__st_cmp_span(const void *a, const void *b) {
    const struct mms__st_tensor *x = *(const struct mms__st_tensor *const *)a, *y = *(const struct mms__st_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* One header entry: {"dtype": ..., "shape": [...], "data_offsets": [begin, end]} and nothing else. */
static enum mms_status mms__st_entry(struct mms_safetensors *st, int64_t v, const char *name, struct mms__st_tensor *t) {
    const struct mms_json *j = st->header;
    int64_t dt = mms_json_get(j, v, "dtype"), sh = mms_json_get(j, v, "shape"), off = mms_json_get(j, v, "data_offsets"), i, n;
    uint64_t bytes;
    size_t k;
    const char *dts;
    if (mms_json_type(j, v) != MMS_JSON_OBJECT)
        return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': tensor '%s': its entry is not an object", st->path, name);
    for (i = 0; i < mms_json_len(j, v); i++) {
        const char *key = mms_json_key(j, v, i, NULL);
        if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets"))
            return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': tensor '%s': unknown field \"%.40s\"", st->path, name, key);
    }
    if (!(dts = mms_json_str(j, dt, NULL)))
        return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': tensor '%s': field dtype is %s", st->path, name, dt < 0 ? "missing" : "not a string");
    t->name = name;
    t->dtype = dts;
    for (k = 0; k < sizeof mms__st_dtypes / sizeof mms__st_dtypes[0]; k++)
        if (!strcmp(dts, mms__st_dtypes[k].name)) break;
    if (k == sizeof mms__st_dtypes / sizeof mms__st_dtypes[0])
        return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': tensor '%s': unknown dtype \"%.20s\"", st->path, name, dts);
    t->type = mms__st_dtypes[k].type;
    if (mms_json_type(j, sh) != MMS_JSON_ARRAY || (n = mms_json_len(j, sh)) > 8)
        return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': tensor '%s': field shape is %s", st->path, name,
                             sh < 0 ? "missing" : mms_json_type(j, sh) != MMS_JSON_ARRAY ? "not an array" : "longer than 8 dimensions");
    t->n_dims = (int)n;
    bytes = (uint64_t)mms__st_dtypes[k].size;
    for (i = 0; i < n; i++) {
        int64_t d;
        if (!mms_json_int(j, mms_json_at(j, sh, i), &d) || d < 0)
            return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': tensor '%s': shape[%lld] is not a non-negative integer", st->path, name, (long long)i);
        t->shape[i] = d;
        if (d != 0 && bytes > UINT64_MAX / (uint64_t)d)
            return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': tensor '%s': shape overflows a byte count", st->path, name);
        bytes *= (uint64_t)d;
    }
    {
        int64_t b, e;
        if (mms_json_type(j, off) != MMS_JSON_ARRAY || mms_json_len(j, off) != 2 || !mms_json_int(j, mms_json_at(j, off, 0), &b) ||
            !mms_json_int(j, mms_json_at(j, off, 1), &e) || b < 0 || e < b)
            return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': tensor '%s': field data_offsets must be [begin, end] with 0 <= begin <= end",
                                 st->path, name);
        t->begin = (uint64_t)b;
        t->end = (uint64_t)e;
    }
    if (t->end > st->data_size)
        return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': tensor '%s': data_offsets end %llu is past the data (%zu bytes)", st->path, name,
                             (unsigned long long)t->end, st->data_size);
    if (t->end - t->begin != bytes)
        return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': tensor '%s': data_offsets span %llu bytes, dtype %s and its shape need %llu",
                             st->path, name, (unsigned long long)(t->end - t->begin), dts, (unsigned long long)bytes);
    return MMS_OK;
}

static enum mms_status mms__st_parse(struct mms_safetensors *st) {
    uint64_t n_header = 0;
    int64_t root, i, m;
    struct mms__st_tensor **by_span;
    char where[512];
    int b;
    if (st->size < 8)
        return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': truncated: %zu bytes, the header length alone needs 8", st->path, st->size);
    for (b = 7; b >= 0; b--) n_header = (n_header << 8) | st->base[b];
    if (n_header > st->size - 8)
        return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': header length %llu is past the end of the file (%zu bytes)", st->path,
                             (unsigned long long)n_header, st->size);
    if (n_header < 2 || n_header > ((uint64_t)100 << 20))
        return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': header length %llu is outside 2 bytes to 100 MiB", st->path, (unsigned long long)n_header);
    snprintf(where, sizeof where, "safetensors '%s' header", st->path);
    if (!(st->header = mms_json_parse((const char *)st->base + 8, (size_t)n_header, where))) return mms_last_status();
    st->data = st->base + 8 + n_header;
    st->data_size = st->size - 8 - (size_t)n_header;
    root = 0;
    if (mms_json_type(st->header, root) != MMS_JSON_OBJECT)
        return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': the header is not a JSON object", st->path);
    st->metadata = -1;
    m = mms_json_len(st->header, root);
    st->t = (struct mms__st_tensor *)MMS_MALLOC(sizeof *st->t * (size_t)(m + 1));
    if (!st->t) return mms_set_error(MMS_ERR_OOM, "safetensors '%s': out of memory", st->path);
    for (i = 0; i < m; i++) {
        const char *name = mms_json_key(st->header, root, i, NULL);
        int64_t v = mms_json_at(st->header, root, i);
        enum mms_status s;
        if (!strcmp(name, "__metadata__")) {
            int64_t k;
            if (mms_json_type(st->header, v) != MMS_JSON_OBJECT)
                return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': __metadata__ is not an object", st->path);
            for (k = 0; k < mms_json_len(st->header, v); k++)
                if (mms_json_type(st->header, mms_json_at(st->header, v, k)) != MMS_JSON_STRING)
                    return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': __metadata__ value \"%.40s\" is not a string", st->path,
                                         mms_json_key(st->header, v, k, NULL));
            st->metadata = v;
            continue;
        }
        memset(&st->t[st->n], 0, sizeof st->t[st->n]);
        if ((s = mms__st_entry(st, v, name, &st->t[st->n])) != MMS_OK) return s;
        st->n++;
    }
    /* the tensors tile the data exactly: no overlap, no hole */
    by_span = (struct mms__st_tensor **)MMS_MALLOC(sizeof *by_span * (size_t)(st->n + 1));
    if (!by_span) return mms_set_error(MMS_ERR_OOM, "safetensors '%s': out of memory", st->path);
    for (i = 0; i < st->n; i++) by_span[i] = &st->t[i];
    qsort(by_span, (size_t)st->n, sizeof *by_span, mms__st_cmp_span);
    {
        uint64_t at = 0;
        enum mms_status s = MMS_OK;
        for (i = 0; i < st->n && s == MMS_OK; i++) {
            if (by_span[i]->begin < at)
                s = mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': tensor '%s' (bytes %llu..%llu) overlaps tensor '%s'", st->path, by_span[i]->name,
                                  (unsigned long long)by_span[i]->begin, (unsigned long long)by_span[i]->end, by_span[i - 1]->name);
            else if (by_span[i]->begin > at)
                s = mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': bytes %llu..%llu of the data belong to no tensor (before '%s')", st->path,
                                  (unsigned long long)at, (unsigned long long)by_span[i]->begin, by_span[i]->name);
            at = by_span[i]->end;
        }
        if (s == MMS_OK && at != st->data_size)
            s = mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': the last %llu bytes of the data belong to no tensor", st->path,
                              (unsigned long long)(st->data_size - at));
        MMS_FREE(by_span);
        if (s != MMS_OK) return s;
    }
    qsort(st->t, (size_t)st->n, sizeof *st->t, mms__st_cmp_name);
    return MMS_OK;
}

static struct mms_safetensors *mms__st_new(const char *name) {
    struct mms_safetensors *st = (struct mms_safetensors *)MMS_MALLOC(sizeof *st);
    if (!st) { mms_set_error(MMS_ERR_OOM, "safetensors: out of memory"); return NULL; }
    memset(st, 0, sizeof *st);
    st->metadata = -1;
    if (!(st->path = mms__str_copy(name ? name : "(memory)"))) { MMS_FREE(st); mms_set_error(MMS_ERR_OOM, "safetensors: out of memory"); return NULL; }
    return st;
}

MMS_API struct mms_safetensors *mms_safetensors_open(const char *path) {
    struct mms_safetensors *st;
    if (!path) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_safetensors_open: path is NULL"); return NULL; }
    if (!(st = mms__st_new(path))) return NULL;
    if (mms__map_file(path, &st->map) != MMS_OK) { mms_safetensors_close(st); return NULL; }
    st->base = (const uint8_t *)st->map.addr;
    st->size = st->map.size;
    if (mms__st_parse(st) != MMS_OK) { mms_safetensors_close(st); return NULL; }
    return st;
}

MMS_API struct mms_safetensors *mms_safetensors_open_memory(const void *data, size_t size, const char *name) {
    struct mms_safetensors *st;
    if (!data && size) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_safetensors_open_memory: data is NULL"); return NULL; }
    if (!(st = mms__st_new(name))) return NULL;
    st->base = (const uint8_t *)data;
    st->size = size;
    if (mms__st_parse(st) != MMS_OK) { mms_safetensors_close(st); return NULL; }
    return st;
}

MMS_API void mms_safetensors_close(struct mms_safetensors *st) {
    if (!st) return;
    mms__unmap_file(&st->map);
    mms_json_free(st->header);
    MMS_FREE(st->t);
    MMS_FREE(st->path);
    MMS_FREE(st);
}

MMS_API const char *mms_safetensors_path(const struct mms_safetensors *st) { return st ? st->path : ""; }
MMS_API int64_t mms_safetensors_n_tensors(const struct mms_safetensors *st) { return st ? st->n : 0; }
MMS_API const struct mms_json *mms_safetensors_header(const struct mms_safetensors *st) { return st ? st->header : NULL; }
MMS_API int64_t mms_safetensors_metadata(const struct mms_safetensors *st) { return st ? st->metadata : -1; }

MMS_API int64_t mms_safetensors_find(const struct mms_safetensors *st, const char *name) {
    int64_t lo = 0, hi;
    if (!st || !name) return -1;
    hi = st->n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(st->t[mid].name, name);
        if (c == 0) return mid;
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return -1;
}

MMS_API enum mms_status mms_safetensors_get(const struct mms_safetensors *st, int64_t i, struct mms_safetensors_info *info) {
    const struct mms__st_tensor *t;
    if (!st || !info || i < 0 || i >= st->n) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_safetensors_get: no tensor %lld", (long long)i);
    t = &st->t[i];
    memset(info, 0, sizeof *info);
    info->name = t->name;
    info->dtype = t->dtype;
    info->type = t->type;
    info->n_dims = t->n_dims;
    memcpy(info->shape, t->shape, sizeof info->shape);
    info->size = (size_t)(t->end - t->begin);
    info->data = st->data + t->begin;
    return MMS_OK;
}
