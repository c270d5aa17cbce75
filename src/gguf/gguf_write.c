/* >>gguf-write ====================================================================================
   The GGUF writer. Each set or add encodes its value (or copies its tensor data) at once, so the
   caller's memory is free afterwards and writing is one pass: header, keys, tensor infos, then the
   data section with every tensor padded to the alignment (ggml's own reader expects the padding
   after the last tensor too). general.alignment, when set, must be a u32 power of two. */

struct mms__gguf_wkv {
    char    *key;         /* key_len bytes, any bytes when copied from a file */
    size_t   key_len;
    uint32_t type;
    uint8_t *val;         /* the value exactly as the file holds it after the type field */
    size_t   val_size;
};

struct mms__gguf_wtensor {
    char     name[MMS_MAX_NAME];
    uint32_t ggml_type;
    int      n_dims;
    int64_t  ne[MMS_MAX_DIMS];
    void    *data;
    size_t   size;
};

struct mms_gguf_writer {
    struct mms__gguf_wkv     *kv;
    size_t                    n_kv, cap_kv;
    struct mms__gguf_wtensor *tensors;
    size_t                    n_tensors, cap_tensors;
};

/* A growing byte buffer that remembers running out of memory, so encoders need no checks. */
struct mms__gguf_buf { uint8_t *p; size_t n, cap; bool oom; };

static void mms__gguf_buf_put(struct mms__gguf_buf *b, const void *src, size_t n) {
    if (b->oom) return;
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 64;
        uint8_t *p;
        while (cap - b->n < n) {
            if (cap > SIZE_MAX / 2) { b->oom = true; return; }
            cap *= 2;
        }
        p = (uint8_t *)MMS_REALLOC(b->p, cap);
        if (!p) { b->oom = true; return; }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void mms__gguf_buf_u32(struct mms__gguf_buf *b, uint32_t v) {
    uint8_t x[4];
    int i;
    for (i = 0; i < 4; i++) x[i] = (uint8_t)(v >> (8 * i));
    mms__gguf_buf_put(b, x, 4);
}
static void mms__gguf_buf_u64(struct mms__gguf_buf *b, uint64_t v) {
    uint8_t x[8];
    int i;
    for (i = 0; i < 8; i++) x[i] = (uint8_t)(v >> (8 * i));
    mms__gguf_buf_put(b, x, 8);
}
static void mms__gguf_buf_f32(struct mms__gguf_buf *b, float f) {
    uint32_t v;
    memcpy(&v, &f, sizeof v);
    mms__gguf_buf_u32(b, v);
}
static void mms__gguf_buf_str(struct mms__gguf_buf *b, const char *s, size_t n) {
    mms__gguf_buf_u64(b, (uint64_t)n);
    mms__gguf_buf_put(b, s, n);
}

MMS_API struct mms_gguf_writer *mms_gguf_writer_new(void) {
    struct mms_gguf_writer *w = (struct mms_gguf_writer *)MMS_MALLOC(sizeof *w);
    if (!w) { mms_set_error(MMS_ERR_OOM, "mms_gguf_writer_new: out of memory"); return NULL; }
    memset(w, 0, sizeof *w);
    return w;
}

MMS_API void mms_gguf_writer_free(struct mms_gguf_writer *w) {
    size_t i;
    if (!w) return;
    for (i = 0; i < w->n_kv; i++) { MMS_FREE(w->kv[i].key); MMS_FREE(w->kv[i].val); }
    for (i = 0; i < w->n_tensors; i++) MMS_FREE(w->tensors[i].data);
    MMS_FREE(w->kv);
    MMS_FREE(w->tensors);
    MMS_FREE(w);
}

/* Room for one more element in an array of elements of size bytes. */
static bool mms__gguf_grow(void **arr, size_t *cap, size_t n, size_t size) {
    size_t c;
    void *p;
    if (n < *cap) return true;
    c = *cap ? *cap * 2 : 16;
    if (c > SIZE_MAX / size) return false;
    p = MMS_REALLOC(*arr, c * size);
    if (!p) return false;
    *arr = p;
    *cap = c;
    return true;
}

/* Sets key (replacing its value in place if present) to an encoded value; takes val->p. */
static enum mms_status mms__gguf_writer_set(struct mms_gguf_writer *w, const char *fn, const char *key, size_t key_len,
                                            uint32_t type, struct mms__gguf_buf *val) {
    struct mms__gguf_wkv *kv = NULL;
    size_t i;
    if (val->oom) {
        MMS_FREE(val->p);
        return mms_set_error(MMS_ERR_OOM, "%s: out of memory for the value of '%.*s'", fn, (int)MMS__MIN(key_len, 200), key);
    }
    for (i = 0; i < w->n_kv; i++)
        if (w->kv[i].key_len == key_len && memcmp(w->kv[i].key, key, key_len) == 0) { kv = &w->kv[i]; break; }
    if (kv) {
        MMS_FREE(kv->val);
    } else {
        char *k = (char *)MMS_MALLOC(key_len ? key_len : 1);
        if (!k || !mms__gguf_grow((void **)&w->kv, &w->cap_kv, w->n_kv, sizeof *w->kv)) {
            MMS_FREE(k);
            MMS_FREE(val->p);
            return mms_set_error(MMS_ERR_OOM, "%s: out of memory for key '%.*s'", fn, (int)MMS__MIN(key_len, 200), key);
        }
        if (key_len) memcpy(k, key, key_len);
        kv = &w->kv[w->n_kv++];
        kv->key = k;
        kv->key_len = key_len;
    }
    kv->type = type;
    kv->val = val->p;
    kv->val_size = val->n;
    return MMS_OK;
}

/* The checks every setter shares: a writer, a key of sensible length, and general.alignment
   only as a u32 power of two (the one key whose value changes the layout). */
static enum mms_status mms__gguf_writer_check(struct mms_gguf_writer *w, const char *fn, const char *key, uint32_t type,
                                              uint64_t u32_value) {
    size_t n;
    if (!w || !key) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: %s is NULL", fn, w ? "key" : "writer");
    n = strlen(key);
    if (n > MMS__GGUF_MAX_KEY)
        return mms_set_error(MMS_ERR_INVALID_ARG, "%s: key of %zu bytes is longer than %d", fn, n, MMS__GGUF_MAX_KEY);
    if (strcmp(key, "general.alignment") == 0) {
        if (type != MMS_GGUF_TYPE_UINT32)
            return mms_set_error(MMS_ERR_INVALID_ARG, "%s: general.alignment must be a u32, not %s", fn, mms__gguf_type_name(type));
        if (!mms__gguf_is_pow2(u32_value))
            return mms_set_error(MMS_ERR_INVALID_ARG, "%s: general.alignment %llu is not a non-zero power of two", fn,
                                 (unsigned long long)u32_value);
    }
    return MMS_OK;
}

/* A scalar of size bytes, already little-endian in bytes. */
static enum mms_status mms__gguf_writer_scalar(struct mms_gguf_writer *w, const char *fn, const char *key, uint32_t type,
                                               const uint8_t *bytes, size_t size, uint64_t u32_value) {
    struct mms__gguf_buf b = { NULL, 0, 0, false };
    enum mms_status st = mms__gguf_writer_check(w, fn, key, type, u32_value);
    if (st != MMS_OK) return st;
    mms__gguf_buf_put(&b, bytes, size);
    return mms__gguf_writer_set(w, fn, key, strlen(key), type, &b);
}

static void mms__gguf_le_bytes(uint64_t v, uint8_t *out, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) out[i] = (uint8_t)(v >> (8 * i));
}

MMS_API enum mms_status mms_gguf_writer_set_u32(struct mms_gguf_writer *w, const char *key, uint32_t v) {
    uint8_t x[4];
    mms__gguf_le_bytes(v, x, 4);
    return mms__gguf_writer_scalar(w, "mms_gguf_writer_set_u32", key, MMS_GGUF_TYPE_UINT32, x, 4, v);
}
MMS_API enum mms_status mms_gguf_writer_set_i32(struct mms_gguf_writer *w, const char *key, int32_t v) {
    uint8_t x[4];
    mms__gguf_le_bytes((uint32_t)v, x, 4);
    return mms__gguf_writer_scalar(w, "mms_gguf_writer_set_i32", key, MMS_GGUF_TYPE_INT32, x, 4, 0);
}
MMS_API enum mms_status mms_gguf_writer_set_u64(struct mms_gguf_writer *w, const char *key, uint64_t v) {
    uint8_t x[8];
    mms__gguf_le_bytes(v, x, 8);
    return mms__gguf_writer_scalar(w, "mms_gguf_writer_set_u64", key, MMS_GGUF_TYPE_UINT64, x, 8, 0);
}
MMS_API enum mms_status mms_gguf_writer_set_f32(struct mms_gguf_writer *w, const char *key, float v) {
    uint8_t x[4];
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    mms__gguf_le_bytes(bits, x, 4);
    return mms__gguf_writer_scalar(w, "mms_gguf_writer_set_f32", key, MMS_GGUF_TYPE_FLOAT32, x, 4, 0);
}
MMS_API enum mms_status mms_gguf_writer_set_bool(struct mms_gguf_writer *w, const char *key, bool v) {
    uint8_t x = v ? 1 : 0;
    return mms__gguf_writer_scalar(w, "mms_gguf_writer_set_bool", key, MMS_GGUF_TYPE_BOOL, &x, 1, 0);
}

MMS_API enum mms_status mms_gguf_writer_set_str(struct mms_gguf_writer *w, const char *key, const char *v) {
    const char *fn = "mms_gguf_writer_set_str";
    struct mms__gguf_buf b = { NULL, 0, 0, false };
    enum mms_status st = mms__gguf_writer_check(w, fn, key, MMS_GGUF_TYPE_STRING, 0);
    if (st != MMS_OK) return st;
    if (!v) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: value of '%s' is NULL", fn, key);
    mms__gguf_buf_str(&b, v, strlen(v));
    return mms__gguf_writer_set(w, fn, key, strlen(key), MMS_GGUF_TYPE_STRING, &b);
}

/* The header of an array value, after the common checks of v and n. */
static enum mms_status mms__gguf_writer_arr_begin(struct mms_gguf_writer *w, const char *fn, const char *key, const void *v,
                                                  int64_t n, uint32_t elem, struct mms__gguf_buf *b) {
    enum mms_status st = mms__gguf_writer_check(w, fn, key, MMS_GGUF_TYPE_ARRAY, 0);
    if (st != MMS_OK) return st;
    if (n < 0 || (n > 0 && !v))
        return mms_set_error(MMS_ERR_INVALID_ARG, "%s: '%s': %s", fn, key, n < 0 ? "negative length" : "values are NULL");
    mms__gguf_buf_u32(b, elem);
    mms__gguf_buf_u64(b, (uint64_t)n);
    return MMS_OK;
}

MMS_API enum mms_status mms_gguf_writer_set_arr_i32(struct mms_gguf_writer *w, const char *key, const int32_t *v, int64_t n) {
    const char *fn = "mms_gguf_writer_set_arr_i32";
    struct mms__gguf_buf b = { NULL, 0, 0, false };
    int64_t i;
    enum mms_status st = mms__gguf_writer_arr_begin(w, fn, key, v, n, MMS_GGUF_TYPE_INT32, &b);
    if (st != MMS_OK) return st;
    for (i = 0; i < n && !b.oom; i++) mms__gguf_buf_u32(&b, (uint32_t)v[i]);
    return mms__gguf_writer_set(w, fn, key, strlen(key), MMS_GGUF_TYPE_ARRAY, &b);
}

MMS_API enum mms_status mms_gguf_writer_set_arr_f32(struct mms_gguf_writer *w, const char *key, const float *v, int64_t n) {
    const char *fn = "mms_gguf_writer_set_arr_f32";
    struct mms__gguf_buf b = { NULL, 0, 0, false };
    int64_t i;
    enum mms_status st = mms__gguf_writer_arr_begin(w, fn, key, v, n, MMS_GGUF_TYPE_FLOAT32, &b);
    if (st != MMS_OK) return st;
    for (i = 0; i < n && !b.oom; i++) mms__gguf_buf_f32(&b, v[i]);
    return mms__gguf_writer_set(w, fn, key, strlen(key), MMS_GGUF_TYPE_ARRAY, &b);
}

MMS_API enum mms_status mms_gguf_writer_set_arr_str(struct mms_gguf_writer *w, const char *key, const char *const *v, int64_t n) {
    const char *fn = "mms_gguf_writer_set_arr_str";
    struct mms__gguf_buf b = { NULL, 0, 0, false };
    int64_t i;
    enum mms_status st = mms__gguf_writer_arr_begin(w, fn, key, v, n, MMS_GGUF_TYPE_STRING, &b);
    if (st != MMS_OK) return st;
    for (i = 0; i < n; i++) {
        if (!v[i]) {
            MMS_FREE(b.p);
            return mms_set_error(MMS_ERR_INVALID_ARG, "%s: '%s': string %lld is NULL", fn, key, (long long)i);
        }
        mms__gguf_buf_str(&b, v[i], strlen(v[i]));
    }
    return mms__gguf_writer_set(w, fn, key, strlen(key), MMS_GGUF_TYPE_ARRAY, &b);
}

MMS_API enum mms_status mms_gguf_writer_copy_kv(struct mms_gguf_writer *w, const struct mms_gguf *src, int64_t i) {
    const char *fn = "mms_gguf_writer_copy_kv";
    const struct mms__gguf_kv *kv;
    struct mms__gguf_buf b = { NULL, 0, 0, false };
    if (!w) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: writer is NULL", fn);
    if (!(kv = mms__gguf_kv_at(src, i, fn))) return mms_last_status();
    /* the source was validated when opened, general.alignment included: its bytes go as they are */
    mms__gguf_buf_put(&b, src->base + kv->raw_pos, kv->raw_size);
    return mms__gguf_writer_set(w, fn, (const char *)(src->base + kv->key_pos), kv->key_len, kv->type, &b);
}

MMS_API enum mms_status mms_gguf_writer_add_tensor(struct mms_gguf_writer *w, const char *name, enum mms_type type,
                                                   int n_dims, const int64_t *ne, const void *data) {
    const char *fn = "mms_gguf_writer_add_tensor";
    struct mms__gguf_wtensor *t;
    int id = mms_gguf_type_from_mms(type), d;
    uint64_t rows = 1, row_size, size;
    size_t i;
    if (!w || !name || !ne)
        return mms_set_error(MMS_ERR_INVALID_ARG, "%s: %s is NULL", fn, !w ? "writer" : !name ? "name" : "ne");
    if (strlen(name) >= MMS_MAX_NAME)
        return mms_set_error(MMS_ERR_INVALID_ARG, "%s: tensor name '%.*s...' is longer than %d bytes", fn, 40, name, MMS_MAX_NAME - 1);
    if (id < 0) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: tensor '%s': type %s has no GGUF type id", fn, name, mms_type_name(type));
    if (n_dims < 1 || n_dims > MMS_MAX_DIMS)
        return mms_set_error(MMS_ERR_INVALID_ARG, "%s: tensor '%s': %d dimensions (must be 1 to %d)", fn, name, n_dims, MMS_MAX_DIMS);
    for (d = 0; d < n_dims; d++) {
        if (ne[d] < 0) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: tensor '%s': ne[%d] = %lld is negative", fn, name, d, (long long)ne[d]);
        if (d > 0) {
            if (ne[d] != 0 && rows > (uint64_t)INT64_MAX / (uint64_t)ne[d])
                return mms_set_error(MMS_ERR_INVALID_ARG, "%s: tensor '%s': too many rows", fn, name);
            rows *= (uint64_t)ne[d];
        }
    }
    if (ne[0] % mms_blck_size(type) != 0)
        return mms_set_error(MMS_ERR_INVALID_ARG, "%s: tensor '%s': ne[0] = %lld is not a multiple of the block size %lld of %s", fn, name,
                             (long long)ne[0], (long long)mms_blck_size(type), mms_type_name(type));
    row_size = (uint64_t)(ne[0] / mms_blck_size(type));
    if (row_size > SIZE_MAX / mms_type_size(type)) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: tensor '%s' is too large", fn, name);
    row_size *= mms_type_size(type);
    if (rows != 0 && row_size > SIZE_MAX / rows) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: tensor '%s' is too large", fn, name);
    size = row_size * rows;
    if (size > 0 && !data) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: tensor '%s': data is NULL", fn, name);
    for (i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: duplicate tensor name '%s'", fn, name);
    if (!mms__gguf_grow((void **)&w->tensors, &w->cap_tensors, w->n_tensors, sizeof *w->tensors))
        return mms_set_error(MMS_ERR_OOM, "%s: out of memory for tensor '%s'", fn, name);
    t = &w->tensors[w->n_tensors];
    memset(t, 0, sizeof *t);
    t->data = MMS_MALLOC(size ? (size_t)size : 1);
    if (!t->data) return mms_set_error(MMS_ERR_OOM, "%s: out of memory for the %llu bytes of tensor '%s'", fn, (unsigned long long)size, name);
    if (size) memcpy(t->data, data, (size_t)size);
    t->size = (size_t)size;
    mms__copy_str(t->name, sizeof t->name, name);
    t->ggml_type = (uint32_t)id;
    t->n_dims = n_dims;
    for (d = 0; d < MMS_MAX_DIMS; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    w->n_tensors++;
    return MMS_OK;
}

/* -- writing -- */

/* To a file, or (f NULL) to memory. */
struct mms__gguf_out { FILE *f; struct mms__gguf_buf mem; uint64_t pos; bool failed; };

static void mms__gguf_out_put(struct mms__gguf_out *o, const void *p, size_t n) {
    if (o->failed || n == 0) return;
    if (o->f ? fwrite(p, 1, n, o->f) != n : (mms__gguf_buf_put(&o->mem, p, n), o->mem.oom)) o->failed = true;
    o->pos += n;
}
static void mms__gguf_out_buf(struct mms__gguf_out *o, const struct mms__gguf_buf *b) { mms__gguf_out_put(o, b->p, b->n); }
static void mms__gguf_out_pad(struct mms__gguf_out *o, size_t alignment) {
    static const uint8_t zeros[64] = { 0 };
    size_t pad = (size_t)((alignment - o->pos % alignment) % alignment);
    while (pad > 0) {
        size_t k = MMS__MIN(pad, sizeof zeros);
        mms__gguf_out_put(o, zeros, k);
        pad -= k;
    }
}

static size_t mms__gguf_writer_alignment(const struct mms_gguf_writer *w) {
    size_t i;
    for (i = 0; i < w->n_kv; i++)
        if (w->kv[i].key_len == 17 && memcmp(w->kv[i].key, "general.alignment", 17) == 0 && w->kv[i].type == MMS_GGUF_TYPE_UINT32)
            return mms__gguf_le32(w->kv[i].val);
    return MMS__GGUF_DEFAULT_ALIGNMENT;
}

/* The file's bytes to o (opened by the caller); path names it in messages. */
static enum mms_status mms__gguf_writer_emit(const struct mms_gguf_writer *w, struct mms__gguf_out *o, const char *fn, const char *path) {
    struct mms__gguf_buf b = { NULL, 0, 0, false };
    size_t alignment = mms__gguf_writer_alignment(w), i;
    uint64_t offset = 0;
    int d;

    /* everything before the data section is small: encode it first, then write it in one go */
    mms__gguf_buf_put(&b, "GGUF", 4);
    mms__gguf_buf_u32(&b, 3);
    mms__gguf_buf_u64(&b, (uint64_t)w->n_tensors);
    mms__gguf_buf_u64(&b, (uint64_t)w->n_kv);
    for (i = 0; i < w->n_kv; i++) {
        mms__gguf_buf_str(&b, w->kv[i].key, w->kv[i].key_len);
        mms__gguf_buf_u32(&b, w->kv[i].type);
        mms__gguf_buf_put(&b, w->kv[i].val, w->kv[i].val_size);
    }
    for (i = 0; i < w->n_tensors; i++) {
        const struct mms__gguf_wtensor *t = &w->tensors[i];
        mms__gguf_buf_str(&b, t->name, strlen(t->name));
        mms__gguf_buf_u32(&b, (uint32_t)t->n_dims);
        for (d = 0; d < t->n_dims; d++) mms__gguf_buf_u64(&b, (uint64_t)t->ne[d]);
        mms__gguf_buf_u32(&b, t->ggml_type);
        mms__gguf_buf_u64(&b, offset);
        offset += MMS__ALIGN_UP((uint64_t)t->size, (uint64_t)alignment);
    }
    if (b.oom) {
        MMS_FREE(b.p);
        return mms_set_error(MMS_ERR_OOM, "%s: out of memory encoding the header of '%s'", fn, path);
    }
    mms__gguf_out_buf(o, &b);
    MMS_FREE(b.p);
    mms__gguf_out_pad(o, alignment);
    for (i = 0; i < w->n_tensors; i++) {
        mms__gguf_out_put(o, w->tensors[i].data, w->tensors[i].size);
        mms__gguf_out_pad(o, alignment);
    }
    return MMS_OK;
}

MMS_API enum mms_status mms_gguf_writer_write(const struct mms_gguf_writer *w, const char *path) {
    const char *fn = "mms_gguf_writer_write";
    struct mms__gguf_out o;
    enum mms_status st;
    if (!w || !path) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: %s is NULL", fn, w ? "path" : "writer");
    memset(&o, 0, sizeof o);
    o.f = mms__fopen(path, "wb");
    if (!o.f) return mms_set_error(MMS_ERR_IO, "%s: cannot create '%s'", fn, path);
    st = mms__gguf_writer_emit(w, &o, fn, path);
    if (fclose(o.f) != 0) o.failed = true;
    if (st != MMS_OK) return st;
    /* the partial file stays: path may be a device or pipe that is not ours to remove, and the
       reader rejects a truncated file anyway */
    if (o.failed) return mms_set_error(MMS_ERR_IO, "%s: writing '%s' failed (%llu bytes written): the file is incomplete", fn, path,
                                       (unsigned long long)o.pos);
    return MMS_OK;
}

/* The file's bytes in memory (MMS_MALLOC'd, the caller frees them with MMS_FREE). */
MMS__MAYBE_UNUSED static enum mms_status mms__gguf_writer_to_memory(const struct mms_gguf_writer *w, void **data, size_t *size) {
    struct mms__gguf_out o;
    enum mms_status st;
    memset(&o, 0, sizeof o);
    st = mms__gguf_writer_emit(w, &o, "gguf writer", "memory");
    if (st == MMS_OK && o.failed) st = mms_set_error(MMS_ERR_OOM, "gguf writer: out of memory");
    if (st != MMS_OK) { MMS_FREE(o.mem.p); return st; }
    *data = o.mem.p;
    *size = o.mem.n;
    return MMS_OK;
}
