/* >>gguf ==========================================================================================
   The GGUF reader. The file is mapped (or the caller's memory used as it is) and parsed in one
   pass: every count, length, offset and size is checked against the bytes that remain before it is
   used or anything is allocated from it, so a hostile header costs at most memory proportional to
   the file's length. Values stay in the mapping; the handle keeps positions and lookup tables.
   All multi-byte fields are decoded byte by byte: little-endian on any host, any alignment. */

#define MMS__GGUF_DEFAULT_ALIGNMENT 32
#define MMS__GGUF_MAX_KEY           65535
#define MMS__GGUF_N_VALUE_TYPES     13
/* The fewest bytes an entry can take, to bound counts before allocating for them:
   key length + type + a 1-byte value, and name length + n_dims + one ne + type + offset. */
#define MMS__GGUF_MIN_KV_BYTES      13
#define MMS__GGUF_MIN_TENSOR_BYTES  32

/* GGUF's tensor type ids that can be sized: elements and bytes per block, and our type if any. */
struct mms__gguf_ttype { uint32_t id; const char *name; uint32_t blck; uint32_t bytes; enum mms_type type; };
static const struct mms__gguf_ttype mms__gguf_ttypes[] = {
    {  0, "f32",  1,   4, MMS_TYPE_F32 },     {  1, "f16",  1,   2, MMS_TYPE_F16 },
    {  2, "q4_0", 32,  18, MMS_TYPE_Q4_0 }, {  3, "q4_1", 32,  20, MMS_TYPE_INVALID },
    {  6, "q5_0", 32,  22, MMS_TYPE_INVALID }, {  7, "q5_1", 32,  24, MMS_TYPE_INVALID },
    {  8, "q8_0", 32,  34, MMS_TYPE_Q8_0 }, {  9, "q8_1", 32,  36, MMS_TYPE_INVALID },
    { 10, "q2_k", 256, 84, MMS_TYPE_INVALID }, { 11, "q3_k", 256, 110, MMS_TYPE_INVALID },
    { 12, "q4_k", 256, 144, MMS_TYPE_Q4_K }, { 13, "q5_k", 256, 176, MMS_TYPE_Q5_K },
    { 14, "q6_k", 256, 210, MMS_TYPE_Q6_K }, { 15, "q8_k", 256, 292, MMS_TYPE_INVALID },
    { 24, "i8",   1,   1, MMS_TYPE_INVALID }, { 25, "i16",  1,   2, MMS_TYPE_INVALID },
    { 26, "i32",  1,   4, MMS_TYPE_I32 },     { 27, "i64",  1,   8, MMS_TYPE_INVALID },
    { 28, "f64",  1,   8, MMS_TYPE_INVALID }, { 30, "bf16", 1,   2, MMS_TYPE_BF16 },
};

static const struct mms__gguf_ttype *mms__gguf_ttype_find(uint32_t id) {
    size_t i;
    for (i = 0; i < sizeof mms__gguf_ttypes / sizeof mms__gguf_ttypes[0]; i++)
        if (mms__gguf_ttypes[i].id == id) return &mms__gguf_ttypes[i];
    return NULL;
}

MMS_API enum mms_type mms_gguf_type_to_mms(uint32_t ggml_type) {
    const struct mms__gguf_ttype *t = mms__gguf_ttype_find(ggml_type);
    return t ? t->type : MMS_TYPE_INVALID;
}

MMS_API int mms_gguf_type_from_mms(enum mms_type type) {
    size_t i;
    if (type == MMS_TYPE_INVALID) return -1;
    for (i = 0; i < sizeof mms__gguf_ttypes / sizeof mms__gguf_ttypes[0]; i++)
        if (mms__gguf_ttypes[i].type == type) return (int)mms__gguf_ttypes[i].id;
    return -1;
}

/* Value types: names for messages and the size of the fixed-size ones (0: string, array). */
static const char *mms__gguf_type_name(uint32_t t) {
    static const char *const names[MMS__GGUF_N_VALUE_TYPES] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64" };
    return t < MMS__GGUF_N_VALUE_TYPES ? names[t] : "unknown";
}
static size_t mms__gguf_type_size(uint32_t t) {
    static const unsigned char sizes[MMS__GGUF_N_VALUE_TYPES] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };
    return t < MMS__GGUF_N_VALUE_TYPES ? sizes[t] : 0;
}

static uint16_t mms__gguf_le16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t mms__gguf_le32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t mms__gguf_le64(const uint8_t *p) { return (uint64_t)mms__gguf_le32(p) | ((uint64_t)mms__gguf_le32(p + 4) << 32); }

static bool mms__gguf_is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

/* Keys and names may hold any bytes: messages show them escaped and cut short. */
static const char *mms__gguf_quote(const uint8_t *p, size_t n, char *buf, size_t size) {
    size_t i, o = 0;
    for (i = 0; i < n && o + 8 < size; i++) {
        if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\') buf[o++] = (char)p[i];
        else o += (size_t)snprintf(buf + o, size - o, "\\x%02x", p[i]);
    }
    if (i < n) { buf[o++] = '.'; buf[o++] = '.'; buf[o++] = '.'; }
    buf[o] = '\0';
    return buf;
}

struct mms__gguf_kv {
    size_t             at;        /* where the entry starts, for messages */
    size_t             key_pos, key_len;
    enum mms_gguf_type type;
    enum mms_gguf_type arr_type;  /* arrays only */
    uint64_t           n;         /* array elements */
    size_t             val_pos;   /* scalar: the value; string: its length field; array: the first element */
    size_t             raw_pos, raw_size;  /* the value as encoded after the type field, for copying */
    size_t            *str_pos;   /* string arrays: each element's length field */
    const char        *key;       /* NUL-terminated copy in the pool */
};

struct mms__gguf_tensor {
    size_t        at, name_pos, name_len;
    const char   *name;           /* NUL-terminated copy in the pool */
    uint32_t      ggml_type;
    enum mms_type type;
    int           n_dims;
    int64_t       ne[MMS_MAX_DIMS];
    uint64_t      offset, size;
};

/* Open addressing over entry indices (stored + 1, 0 = empty), keyed by the name's bytes. The hash
   is seeded per table so that a file cannot be crafted to make every key collide. */
struct mms__gguf_index { int64_t *slots; size_t mask; uint64_t seed; };

struct mms_gguf {
    struct mms__mapping      map;       /* files only */
    void                    *owned;     /* memory the handle frees (mms__gguf_open_owned) */
    const uint8_t           *base;
    size_t                   size;
    char                    *path;      /* NULL for memory */
    char                    *where;     /* "gguf 'path'" or "gguf memory": how messages name it */
    uint32_t                 version;
    size_t                   alignment;
    int64_t                  n_kv, n_tensors;
    struct mms__gguf_kv     *kv;
    struct mms__gguf_tensor *tensors;
    size_t                   data_pos;  /* the data section */
    char                    *pool;      /* NUL-terminated keys and names */
    struct mms__gguf_index   keys, names;
};

static uint64_t mms__gguf_hash(const uint8_t *p, size_t n, uint64_t seed) {
    uint64_t h = 1469598103934665603ULL ^ seed;   /* FNV-1a */
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return mms__hash64(h);   /* FNV's low bits, which the table uses, mix poorly on their own */
}

static bool mms__gguf_index_init(struct mms__gguf_index *ix, int64_t n) {
    size_t cap = 8;
    while (cap < (size_t)n * 2) cap *= 2;   /* n is bounded by the file length, so this ends */
    if (cap > SIZE_MAX / sizeof *ix->slots) return false;
    ix->slots = (int64_t *)MMS_MALLOC(cap * sizeof *ix->slots);
    if (!ix->slots) return false;
    memset(ix->slots, 0, cap * sizeof *ix->slots);
    ix->mask = cap - 1;
    ix->seed = mms__hash64((uint64_t)(uintptr_t)ix ^ (uint64_t)mms_time_us());
    return true;
}

static void mms__gguf_entry_name(const struct mms_gguf *g, bool tensor, int64_t i, size_t *pos, size_t *len) {
    if (tensor) { *pos = g->tensors[i].name_pos; *len = g->tensors[i].name_len; }
    else        { *pos = g->kv[i].key_pos;       *len = g->kv[i].key_len; }
}

/* The index of the entry named by exactly these bytes, or -1; *slot gets where it would go. */
static int64_t mms__gguf_index_find(const struct mms_gguf *g, const struct mms__gguf_index *ix, bool tensor,
                                    const uint8_t *p, size_t n, size_t *slot) {
    size_t s;
    if (!ix->slots) return -1;
    for (s = (size_t)mms__gguf_hash(p, n, ix->seed) & ix->mask; ix->slots[s] != 0; s = (s + 1) & ix->mask) {
        size_t pos, len;
        mms__gguf_entry_name(g, tensor, ix->slots[s] - 1, &pos, &len);
        if (len == n && (n == 0 || memcmp(g->base + pos, p, n) == 0)) break;
    }
    if (slot) *slot = s;
    return ix->slots[s] - 1;
}

/* -- parsing -- */

struct mms__gguf_parser {
    struct mms_gguf *g;
    size_t           pos;
};

static enum mms_status mms__gguf_fail(const struct mms__gguf_parser *ps, size_t at, const char *fmt, ...) MMS_PRINTF(3, 4);
static enum mms_status mms__gguf_fail(const struct mms__gguf_parser *ps, size_t at, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return mms_set_error(MMS_ERR_FORMAT, "%s: %s (at byte offset %zu)", ps->g->where, msg, at);
}

static size_t mms__gguf_left(const struct mms__gguf_parser *ps) { return ps->g->size - ps->pos; }

static enum mms_status mms__gguf_need(const struct mms__gguf_parser *ps, uint64_t n, const char *what) {
    if (n > mms__gguf_left(ps))
        return mms__gguf_fail(ps, ps->pos, "truncated: %s needs %llu bytes, %zu left", what, (unsigned long long)n, mms__gguf_left(ps));
    return MMS_OK;
}

static enum mms_status mms__gguf_u32(struct mms__gguf_parser *ps, const char *what, uint32_t *out) {
    enum mms_status st = mms__gguf_need(ps, 4, what);
    if (st != MMS_OK) return st;
    *out = mms__gguf_le32(ps->g->base + ps->pos);
    ps->pos += 4;
    return MMS_OK;
}

static enum mms_status mms__gguf_u64(struct mms__gguf_parser *ps, const char *what, uint64_t *out) {
    enum mms_status st = mms__gguf_need(ps, 8, what);
    if (st != MMS_OK) return st;
    *out = mms__gguf_le64(ps->g->base + ps->pos);
    ps->pos += 8;
    return MMS_OK;
}

/* A gguf-string of at most max bytes: *pos gets where its bytes start. */
static enum mms_status mms__gguf_str(struct mms__gguf_parser *ps, const char *what, uint64_t max, size_t *pos, size_t *len) {
    size_t at = ps->pos;
    uint64_t n;
    enum mms_status st = mms__gguf_u64(ps, what, &n);
    if (st != MMS_OK) return st;
    if (n > max) return mms__gguf_fail(ps, at, "%s of %llu bytes is longer than %llu", what, (unsigned long long)n, (unsigned long long)max);
    if (n > mms__gguf_left(ps))
        return mms__gguf_fail(ps, at, "truncated: %s of %llu bytes, %zu left", what, (unsigned long long)n, mms__gguf_left(ps));
    *pos = ps->pos;
    *len = (size_t)n;
    ps->pos += (size_t)n;
    return MMS_OK;
}

static enum mms_status mms__gguf_parse_kv(struct mms__gguf_parser *ps, int64_t i) {
    struct mms_gguf *g = ps->g;
    struct mms__gguf_kv *kv = &g->kv[i];
    char q[200];
    uint32_t type, elem;
    size_t slot, tpos, tmp_pos, tmp_len;
    int64_t dup;
    enum mms_status st;

    kv->at = ps->pos;
    if ((st = mms__gguf_str(ps, "key", MMS__GGUF_MAX_KEY, &kv->key_pos, &kv->key_len)) != MMS_OK) return st;
    mms__gguf_quote(g->base + kv->key_pos, kv->key_len, q, sizeof q);
    dup = mms__gguf_index_find(g, &g->keys, false, g->base + kv->key_pos, kv->key_len, &slot);
    if (dup >= 0) return mms__gguf_fail(ps, kv->at, "duplicate key '%s' (first at byte offset %zu)", q, g->kv[dup].at);
    g->keys.slots[slot] = i + 1;

    tpos = ps->pos;
    if ((st = mms__gguf_u32(ps, "value type", &type)) != MMS_OK) return st;
    if (type >= MMS__GGUF_N_VALUE_TYPES) return mms__gguf_fail(ps, tpos, "unknown value type %u of key '%s'", type, q);
    kv->type = (enum mms_gguf_type)type;
    kv->raw_pos = ps->pos;
    kv->n = 1;

    if (type == MMS_GGUF_TYPE_STRING) {
        kv->val_pos = ps->pos;
        if ((st = mms__gguf_str(ps, "string value", UINT64_MAX, &tmp_pos, &tmp_len)) != MMS_OK) return st;
    } else if (type == MMS_GGUF_TYPE_ARRAY) {
        size_t count_at;
        uint64_t n;
        if ((st = mms__gguf_u32(ps, "array element type", &elem)) != MMS_OK) return st;
        if (elem == MMS_GGUF_TYPE_ARRAY)
            return mms__gguf_fail(ps, tpos + 4, "key '%s' is an array of arrays, which is not supported", q);
        if (elem >= MMS__GGUF_N_VALUE_TYPES) return mms__gguf_fail(ps, tpos + 4, "unknown array element type %u of key '%s'", elem, q);
        kv->arr_type = (enum mms_gguf_type)elem;
        count_at = ps->pos;
        if ((st = mms__gguf_u64(ps, "array count", &n)) != MMS_OK) return st;
        kv->n = n;
        kv->val_pos = ps->pos;
        if (elem == MMS_GGUF_TYPE_STRING) {
            uint64_t k;
            /* every element has at least its 8-byte length: bounds the table before allocating it */
            if (n > mms__gguf_left(ps) / 8)
                return mms__gguf_fail(ps, count_at, "array count %llu of key '%s' does not fit in the %zu bytes left",
                                      (unsigned long long)n, q, mms__gguf_left(ps));
            if (n > 0) {
                kv->str_pos = (size_t *)MMS_MALLOC((size_t)n * sizeof *kv->str_pos);
                if (!kv->str_pos) return mms_set_error(MMS_ERR_OOM, "%s: out of memory for string array '%s'", g->where, q);
            }
            for (k = 0; k < n; k++) {
                kv->str_pos[k] = ps->pos;
                if ((st = mms__gguf_str(ps, "string array element", UINT64_MAX, &tmp_pos, &tmp_len)) != MMS_OK) return st;
            }
        } else {
            size_t es = mms__gguf_type_size(elem);
            if (n > mms__gguf_left(ps) / es)
                return mms__gguf_fail(ps, count_at, "array count %llu of key '%s' (%s) does not fit in the %zu bytes left",
                                      (unsigned long long)n, q, mms__gguf_type_name(elem), mms__gguf_left(ps));
            if (elem == MMS_GGUF_TYPE_BOOL) {
                size_t k;
                for (k = 0; k < (size_t)n; k++)
                    if (g->base[ps->pos + k] > 1)
                        return mms__gguf_fail(ps, ps->pos + k, "bool value %u in array '%s' (must be 0 or 1)", g->base[ps->pos + k], q);
            }
            ps->pos += (size_t)n * es;
        }
    } else {
        size_t s = mms__gguf_type_size(type);
        kv->val_pos = ps->pos;
        if ((st = mms__gguf_need(ps, s, "value")) != MMS_OK) return st;
        if (type == MMS_GGUF_TYPE_BOOL && g->base[ps->pos] > 1)
            return mms__gguf_fail(ps, ps->pos, "bool value %u of key '%s' (must be 0 or 1)", g->base[ps->pos], q);
        ps->pos += s;
    }
    kv->raw_size = ps->pos - kv->raw_pos;
    return MMS_OK;
}

static enum mms_status mms__gguf_parse_tensor(struct mms__gguf_parser *ps, int64_t i) {
    struct mms_gguf *g = ps->g;
    struct mms__gguf_tensor *t = &g->tensors[i];
    const struct mms__gguf_ttype *tt;
    char q[200];
    uint32_t n_dims;
    uint64_t rows = 1, elems = 1, row_bytes;
    size_t slot, at;
    int64_t dup;
    int d;
    enum mms_status st;

    t->at = ps->pos;
    if ((st = mms__gguf_str(ps, "tensor name", MMS_MAX_NAME - 1, &t->name_pos, &t->name_len)) != MMS_OK) return st;
    mms__gguf_quote(g->base + t->name_pos, t->name_len, q, sizeof q);
    dup = mms__gguf_index_find(g, &g->names, true, g->base + t->name_pos, t->name_len, &slot);
    if (dup >= 0) return mms__gguf_fail(ps, t->at, "duplicate tensor name '%s' (first at byte offset %zu)", q, g->tensors[dup].at);
    g->names.slots[slot] = i + 1;

    at = ps->pos;
    if ((st = mms__gguf_u32(ps, "n_dims", &n_dims)) != MMS_OK) return st;
    if (n_dims < 1 || n_dims > MMS_MAX_DIMS)
        return mms__gguf_fail(ps, at, "tensor '%s' has %u dimensions (must be 1 to %d)", q, n_dims, MMS_MAX_DIMS);
    t->n_dims = (int)n_dims;
    for (d = 0; d < MMS_MAX_DIMS; d++) t->ne[d] = 1;
    for (d = 0; d < (int)n_dims; d++) {
        uint64_t ne, f;
        at = ps->pos;
        if ((st = mms__gguf_u64(ps, "ne", &ne)) != MMS_OK) return st;
        if (ne > (uint64_t)INT64_MAX)
            return mms__gguf_fail(ps, at, "ne[%d] = %llu of tensor '%s' is out of range", d, (unsigned long long)ne, q);
        /* zero counts as one here so that no product of the dimensions can overflow downstream */
        f = ne ? ne : 1;
        if (elems > (uint64_t)INT64_MAX / f)
            return mms__gguf_fail(ps, at, "tensor '%s' has too many elements (ne[%d] = %llu overflows)", q, d, (unsigned long long)ne);
        elems *= f;
        t->ne[d] = (int64_t)ne;
        if (d > 0) rows *= ne;   /* <= elems, cannot overflow */
    }

    at = ps->pos;
    if ((st = mms__gguf_u32(ps, "tensor type", &t->ggml_type)) != MMS_OK) return st;
    tt = mms__gguf_ttype_find(t->ggml_type);
    if (!tt) return mms__gguf_fail(ps, at, "unsupported tensor type %u for tensor '%s'", t->ggml_type, q);
    t->type = tt->type;
    if ((uint64_t)t->ne[0] % tt->blck != 0)
        return mms__gguf_fail(ps, at, "ne[0] = %lld of tensor '%s' is not a multiple of the block size %u of %s",
                              (long long)t->ne[0], q, tt->blck, tt->name);
    row_bytes = (uint64_t)t->ne[0] / tt->blck;
    if (row_bytes > UINT64_MAX / tt->bytes || (rows != 0 && row_bytes * tt->bytes > UINT64_MAX / rows))
        return mms__gguf_fail(ps, at, "the size of tensor '%s' overflows", q);
    t->size = row_bytes * tt->bytes * rows;

    at = ps->pos;
    if ((st = mms__gguf_u64(ps, "tensor offset", &t->offset)) != MMS_OK) return st;
    if (t->offset % g->alignment != 0)
        return mms__gguf_fail(ps, at, "offset %llu of tensor '%s' is not a multiple of the alignment %zu",
                              (unsigned long long)t->offset, q, g->alignment);
    return MMS_OK;
}

static int mms__gguf_cmp_offset(const void *a, const void *b) {
    const struct mms__gguf_tensor *x = *(const struct mms__gguf_tensor *const *)a, *y = *(const struct mms__gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset ? 1 : 0;
}

/* Every tensor's bytes inside the data section, and no two sharing a byte. */
static enum mms_status mms__gguf_check_ranges(struct mms__gguf_parser *ps) {
    struct mms_gguf *g = ps->g;
    size_t data_len = g->size - g->data_pos, n = 0;
    struct mms__gguf_tensor **order;
    char q[200], q2[200];
    int64_t i;
    for (i = 0; i < g->n_tensors; i++) {
        const struct mms__gguf_tensor *t = &g->tensors[i];
        if (t->offset > data_len || t->size > data_len - t->offset)
            return mms__gguf_fail(ps, t->at, "data of tensor '%s' (%llu bytes at data offset %llu) runs past the end of the file: "
                                  "the data section at byte %zu has %zu bytes",
                                  mms__gguf_quote(g->base + t->name_pos, t->name_len, q, sizeof q),
                                  (unsigned long long)t->size, (unsigned long long)t->offset, g->data_pos, data_len);
    }
    if (g->n_tensors < 2) return MMS_OK;
    order = (struct mms__gguf_tensor **)MMS_MALLOC((size_t)g->n_tensors * sizeof *order);
    if (!order) return mms_set_error(MMS_ERR_OOM, "%s: out of memory for %lld tensors", g->where, (long long)g->n_tensors);
    for (i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].size > 0) order[n++] = &g->tensors[i];   /* empty ranges share no byte */
    qsort(order, n, sizeof *order, mms__gguf_cmp_offset);
    for (i = 1; i < (int64_t)n; i++) {
        const struct mms__gguf_tensor *a = order[i - 1], *b = order[i];
        if (a->offset + a->size > b->offset) {
            enum mms_status st = mms__gguf_fail(ps, b->at, "tensors '%s' (%llu bytes at data offset %llu) and '%s' (at data offset %llu) overlap",
                                                mms__gguf_quote(g->base + a->name_pos, a->name_len, q, sizeof q),
                                                (unsigned long long)a->size, (unsigned long long)a->offset,
                                                mms__gguf_quote(g->base + b->name_pos, b->name_len, q2, sizeof q2),
                                                (unsigned long long)b->offset);
            MMS_FREE(order);
            return st;
        }
    }
    MMS_FREE(order);
    return MMS_OK;
}

/* NUL-terminated copies of every key and name, in one block (at most the file's length plus one
   byte per entry). */
static enum mms_status mms__gguf_build_pool(struct mms_gguf *g) {
    size_t total = 1, o = 0;
    int64_t i;
    for (i = 0; i < g->n_kv; i++) total += g->kv[i].key_len + 1;
    for (i = 0; i < g->n_tensors; i++) total += g->tensors[i].name_len + 1;
    g->pool = (char *)MMS_MALLOC(total);
    if (!g->pool) return mms_set_error(MMS_ERR_OOM, "%s: out of memory for names (%zu bytes)", g->where, total);
    for (i = 0; i < g->n_kv; i++) {
        struct mms__gguf_kv *kv = &g->kv[i];
        if (kv->key_len) memcpy(g->pool + o, g->base + kv->key_pos, kv->key_len);
        g->pool[o + kv->key_len] = '\0';
        kv->key = g->pool + o;
        o += kv->key_len + 1;
    }
    for (i = 0; i < g->n_tensors; i++) {
        struct mms__gguf_tensor *t = &g->tensors[i];
        if (t->name_len) memcpy(g->pool + o, g->base + t->name_pos, t->name_len);
        g->pool[o + t->name_len] = '\0';
        t->name = g->pool + o;
        o += t->name_len + 1;
    }
    return MMS_OK;
}

static void *mms__gguf_calloc(size_t n, size_t size) {
    void *p;
    if (n == 0) n = 1;
    if (n > SIZE_MAX / size) return NULL;
    p = MMS_MALLOC(n * size);
    if (p) memset(p, 0, n * size);
    return p;
}

static enum mms_status mms__gguf_parse(struct mms_gguf *g) {
    struct mms__gguf_parser ps;
    uint32_t version;
    uint64_t n_tensors, n_kv;
    size_t at;
    int64_t i;
    enum mms_status st;
    ps.g = g;
    ps.pos = 0;

    if ((st = mms__gguf_need(&ps, 4, "magic")) != MMS_OK) return st;
    if (memcmp(g->base, "GGUF", 4) != 0)
        return mms__gguf_fail(&ps, 0, "bad magic %02x %02x %02x %02x (not a GGUF file)", g->base[0], g->base[1], g->base[2], g->base[3]);
    ps.pos = 4;
    if ((st = mms__gguf_u32(&ps, "version", &version)) != MMS_OK) return st;
    if (version != 2 && version != 3) {
        uint32_t swapped = (version >> 24) | ((version >> 8) & 0xff00) | ((version << 8) & 0xff0000) | (version << 24);
        if (swapped == 2 || swapped == 3)
            return mms__gguf_fail(&ps, 4, "version %u read as %u: big-endian GGUF files are not supported", swapped, version);
        return mms__gguf_fail(&ps, 4, "unsupported GGUF version %u (2 and 3 are read)", version);
    }
    g->version = version;

    at = ps.pos;
    if ((st = mms__gguf_u64(&ps, "n_tensors", &n_tensors)) != MMS_OK) return st;
    if ((st = mms__gguf_u64(&ps, "n_kv", &n_kv)) != MMS_OK) return st;
    if (n_kv > mms__gguf_left(&ps) / MMS__GGUF_MIN_KV_BYTES)
        return mms__gguf_fail(&ps, at + 8, "n_kv %llu cannot fit in the %zu bytes left (an entry takes at least %d)",
                              (unsigned long long)n_kv, mms__gguf_left(&ps), MMS__GGUF_MIN_KV_BYTES);
    if (n_tensors > (mms__gguf_left(&ps) - n_kv * MMS__GGUF_MIN_KV_BYTES) / MMS__GGUF_MIN_TENSOR_BYTES)
        return mms__gguf_fail(&ps, at, "n_tensors %llu cannot fit in the %zu bytes left after %llu keys (a tensor info takes at least %d)",
                              (unsigned long long)n_tensors, mms__gguf_left(&ps), (unsigned long long)n_kv, MMS__GGUF_MIN_TENSOR_BYTES);
    g->n_kv = (int64_t)n_kv;
    g->n_tensors = (int64_t)n_tensors;
    g->kv = (struct mms__gguf_kv *)mms__gguf_calloc((size_t)n_kv, sizeof *g->kv);
    g->tensors = (struct mms__gguf_tensor *)mms__gguf_calloc((size_t)n_tensors, sizeof *g->tensors);
    if (!g->kv || !g->tensors || !mms__gguf_index_init(&g->keys, g->n_kv) || !mms__gguf_index_init(&g->names, g->n_tensors))
        return mms_set_error(MMS_ERR_OOM, "%s: out of memory for %llu keys and %llu tensors", g->where,
                             (unsigned long long)n_kv, (unsigned long long)n_tensors);

    for (i = 0; i < g->n_kv; i++)
        if ((st = mms__gguf_parse_kv(&ps, i)) != MMS_OK) return st;

    g->alignment = MMS__GGUF_DEFAULT_ALIGNMENT;
    i = mms__gguf_index_find(g, &g->keys, false, (const uint8_t *)"general.alignment", 17, NULL);
    if (i >= 0) {
        const struct mms__gguf_kv *kv = &g->kv[i];
        uint32_t a;
        if (kv->type != MMS_GGUF_TYPE_UINT32)
            return mms__gguf_fail(&ps, kv->at, "general.alignment has type %s (must be u32)", mms__gguf_type_name(kv->type));
        a = mms__gguf_le32(g->base + kv->val_pos);
        if (!mms__gguf_is_pow2(a))
            return mms__gguf_fail(&ps, kv->val_pos, "general.alignment %u is not a non-zero power of two", a);
        g->alignment = a;
    }

    for (i = 0; i < g->n_tensors; i++)
        if ((st = mms__gguf_parse_tensor(&ps, i)) != MMS_OK) return st;

    /* the data section starts at the next multiple of the alignment; a file without tensors may
       end before it (nothing would be read there) */
    {
        size_t pad = (g->alignment - ps.pos % g->alignment) % g->alignment;
        if (pad > mms__gguf_left(&ps)) {
            if (g->n_tensors > 0)
                return mms__gguf_fail(&ps, ps.pos, "truncated: the data section would start at byte %llu (aligned to %zu), past the end of the file (%zu bytes)",
                                      (unsigned long long)ps.pos + pad, g->alignment, g->size);
            pad = mms__gguf_left(&ps);
        }
        g->data_pos = ps.pos + pad;
    }
    if ((st = mms__gguf_check_ranges(&ps)) != MMS_OK) return st;
    return mms__gguf_build_pool(g);
}

/* A zeroed handle named for messages as "gguf 'path'", or "gguf memory" when path is NULL. */
static struct mms_gguf *mms__gguf_new(const char *path) {
    struct mms_gguf *g = (struct mms_gguf *)MMS_MALLOC(sizeof *g);
    size_t n = path ? strlen(path) : 0;
    if (g) {
        memset(g, 0, sizeof *g);
        g->where = (char *)MMS_MALLOC(n + 16);
        if (path) g->path = (char *)MMS_MALLOC(n + 1);
    }
    if (!g || !g->where || (path && !g->path)) {
        mms_gguf_close(g);
        mms_set_error(MMS_ERR_OOM, "gguf: out of memory opening %s", path ? path : "memory");
        return NULL;
    }
    if (path) {
        memcpy(g->path, path, n + 1);
        memcpy(g->where, "gguf '", 6);
        memcpy(g->where + 6, path, n);
        memcpy(g->where + 6 + n, "'", 2);
    } else {
        memcpy(g->where, "gguf memory", 12);
    }
    return g;
}

MMS_API void mms_gguf_close(struct mms_gguf *g) {
    int64_t i;
    if (!g) return;
    if (g->kv) for (i = 0; i < g->n_kv; i++) MMS_FREE(g->kv[i].str_pos);
    MMS_FREE(g->kv);
    MMS_FREE(g->tensors);
    MMS_FREE(g->keys.slots);
    MMS_FREE(g->names.slots);
    MMS_FREE(g->pool);
    MMS_FREE(g->path);
    MMS_FREE(g->where);
    MMS_FREE(g->owned);
    mms__unmap_file(&g->map);
    MMS_FREE(g);
}

static struct mms_gguf *mms__gguf_finish_open(struct mms_gguf *g) {
    if (mms__gguf_parse(g) != MMS_OK) {
        mms_gguf_close(g);
        return NULL;
    }
    return g;
}

MMS_API struct mms_gguf *mms_gguf_open_memory(const void *data, size_t size) {
    struct mms_gguf *g;
    if (!data && size > 0) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_gguf_open_memory: data is NULL"); return NULL; }
    if (!(g = mms__gguf_new(NULL))) return NULL;
    g->base = (const uint8_t *)data;
    g->size = size;
    return mms__gguf_finish_open(g);
}

/* A GGUF in memory that the handle owns (MMS_MALLOC'd; freed on close, or now on error). */
MMS__MAYBE_UNUSED static struct mms_gguf *mms__gguf_open_owned(void *data, size_t size) {
    struct mms_gguf *g;
    if (!(g = mms__gguf_new(NULL))) { MMS_FREE(data); return NULL; }
    g->owned = data;
    g->base = (const uint8_t *)data;
    g->size = size;
    return mms__gguf_finish_open(g);
}

MMS_API struct mms_gguf *mms_gguf_open(const char *path) {
    struct mms_gguf *g;
    if (!path) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_gguf_open: path is NULL"); return NULL; }
    if (!(g = mms__gguf_new(path))) return NULL;
    if (mms__map_file(path, &g->map) != MMS_OK) {
        mms_gguf_close(g);
        return NULL;
    }
    g->base = (const uint8_t *)g->map.addr;
    g->size = g->map.size;
    return mms__gguf_finish_open(g);
}

/* -- the handle -- */

MMS_API uint32_t    mms_gguf_get_version(const struct mms_gguf *g)   { return g ? g->version : 0; }
MMS_API size_t      mms_gguf_get_alignment(const struct mms_gguf *g) { return g ? g->alignment : 0; }
MMS_API const char *mms_gguf_get_path(const struct mms_gguf *g)      { return g && g->path ? g->path : ""; }
MMS_API int64_t     mms_gguf_get_n_kv(const struct mms_gguf *g)      { return g ? g->n_kv : 0; }
MMS_API int64_t     mms_gguf_get_n_tensors(const struct mms_gguf *g) { return g ? g->n_tensors : 0; }

MMS_API int64_t mms_gguf_find_key(const struct mms_gguf *g, const char *key) {
    if (!g || !key) return -1;
    return mms__gguf_index_find(g, &g->keys, false, (const uint8_t *)key, strlen(key), NULL);
}

MMS_API int64_t mms_gguf_find_tensor(const struct mms_gguf *g, const char *name) {
    if (!g || !name) return -1;
    return mms__gguf_index_find(g, &g->names, true, (const uint8_t *)name, strlen(name), NULL);
}

static const struct mms__gguf_kv *mms__gguf_kv_at(const struct mms_gguf *g, int64_t i, const char *fn) {
    if (!g) { mms_set_error(MMS_ERR_INVALID_ARG, "%s: gguf is NULL", fn); return NULL; }
    if (i < 0 || i >= g->n_kv) {
        mms_set_error(MMS_ERR_INVALID_ARG, "%s: %s: key index %lld out of range (%lld keys)", fn, g->where, (long long)i, (long long)g->n_kv);
        return NULL;
    }
    return &g->kv[i];
}

MMS_API const char *mms_gguf_get_key(const struct mms_gguf *g, int64_t i) {
    const struct mms__gguf_kv *kv = mms__gguf_kv_at(g, i, "mms_gguf_get_key");
    return kv ? kv->key : NULL;
}

MMS_API enum mms_gguf_type mms_gguf_get_kv_type(const struct mms_gguf *g, int64_t i) {
    const struct mms__gguf_kv *kv = mms__gguf_kv_at(g, i, "mms_gguf_get_kv_type");
    return kv ? kv->type : MMS_GGUF_TYPE_NONE;
}

MMS_API enum mms_gguf_type mms_gguf_get_arr_type(const struct mms_gguf *g, int64_t i) {
    const struct mms__gguf_kv *kv = mms__gguf_kv_at(g, i, "mms_gguf_get_arr_type");
    if (!kv) return MMS_GGUF_TYPE_NONE;
    if (kv->type != MMS_GGUF_TYPE_ARRAY) {
        mms_set_error(MMS_ERR_INVALID_ARG, "mms_gguf_get_arr_type: %s: key '%s' has type %s, not array", g->where, kv->key, mms__gguf_type_name(kv->type));
        return MMS_GGUF_TYPE_NONE;
    }
    return kv->arr_type;
}

MMS_API int64_t mms_gguf_get_arr_n(const struct mms_gguf *g, int64_t i) {
    const struct mms__gguf_kv *kv = mms__gguf_kv_at(g, i, "mms_gguf_get_arr_n");
    if (!kv) return -1;
    if (kv->type != MMS_GGUF_TYPE_ARRAY) {
        mms_set_error(MMS_ERR_INVALID_ARG, "mms_gguf_get_arr_n: %s: key '%s' has type %s, not array", g->where, kv->key, mms__gguf_type_name(kv->type));
        return -1;
    }
    return (int64_t)kv->n;   /* bounded by the file length */
}

/* -- typed getters -- */

/* The key's entry, or NULL after raising MMS_ERR_INVALID_ARG. */
static const struct mms__gguf_kv *mms__gguf_lookup(const struct mms_gguf *g, const char *key, const char *fn) {
    int64_t i;
    if (!g || !key) { mms_set_error(MMS_ERR_INVALID_ARG, "%s: %s is NULL", fn, g ? "key" : "gguf"); return NULL; }
    i = mms_gguf_find_key(g, key);
    if (i < 0) { mms__error_quiet(MMS_ERR_INVALID_ARG, "%s: %s: key '%s' not found", fn, g->where, key); return NULL; }   /* a question: absence may be fine */
    return &g->kv[i];
}

static enum mms_status mms__gguf_wrong_type(const struct mms_gguf *g, const struct mms__gguf_kv *kv, const char *fn, const char *wanted) {
    if (kv->type == MMS_GGUF_TYPE_ARRAY)
        return mms_set_error(MMS_ERR_FORMAT, "%s: %s: key '%s' has type array of %s, wanted %s", fn, g->where, kv->key,
                             mms__gguf_type_name(kv->arr_type), wanted);
    return mms_set_error(MMS_ERR_FORMAT, "%s: %s: key '%s' has type %s, wanted %s", fn, g->where, kv->key, mms__gguf_type_name(kv->type), wanted);
}

/* An integer of type t at p, as a sign and a value: *neg with *sv, or *uv. False for non-integers. */
static bool mms__gguf_int(const uint8_t *p, uint32_t t, bool *neg, int64_t *sv, uint64_t *uv) {
    int64_t s;
    switch (t) {
        case MMS_GGUF_TYPE_UINT8:  *neg = false; *uv = p[0]; return true;
        case MMS_GGUF_TYPE_UINT16: *neg = false; *uv = mms__gguf_le16(p); return true;
        case MMS_GGUF_TYPE_UINT32: *neg = false; *uv = mms__gguf_le32(p); return true;
        case MMS_GGUF_TYPE_UINT64: *neg = false; *uv = mms__gguf_le64(p); return true;
        case MMS_GGUF_TYPE_INT8:   s = (int8_t)p[0]; break;
        case MMS_GGUF_TYPE_INT16:  s = (int16_t)mms__gguf_le16(p); break;
        case MMS_GGUF_TYPE_INT32:  s = (int32_t)mms__gguf_le32(p); break;
        case MMS_GGUF_TYPE_INT64:  s = (int64_t)mms__gguf_le64(p); break;
        default: return false;
    }
    *neg = s < 0;
    *sv = s;
    *uv = (uint64_t)s;
    return true;
}

/* A float of type t at p (f32 or f64). False for other types. */
static bool mms__gguf_float(const uint8_t *p, uint32_t t, double *out) {
    if (t == MMS_GGUF_TYPE_FLOAT32) {
        uint32_t b = mms__gguf_le32(p);
        float f;
        memcpy(&f, &b, sizeof f);
        *out = f;
        return true;
    }
    if (t == MMS_GGUF_TYPE_FLOAT64) {
        uint64_t b = mms__gguf_le64(p);
        memcpy(out, &b, sizeof *out);
        return true;
    }
    return false;
}

static bool mms__gguf_fits_f32(double v) { return v != v || v == HUGE_VAL || v == -HUGE_VAL || (v <= FLT_MAX && v >= -FLT_MAX); }

static enum mms_status mms__gguf_out_of_range(const struct mms_gguf *g, const struct mms__gguf_kv *kv, const char *fn, int64_t elem,
                                              bool neg, int64_t sv, uint64_t uv, uint32_t from, const char *to) {
    char val[32], idx[32] = "";
    if (neg) snprintf(val, sizeof val, "%lld", (long long)sv);
    else     snprintf(val, sizeof val, "%llu", (unsigned long long)uv);
    if (elem >= 0) snprintf(idx, sizeof idx, " element %lld", (long long)elem);
    return mms_set_error(MMS_ERR_FORMAT, "%s: %s: key '%s'%s: %s value %s does not fit in %s", fn, g->where, kv->key, idx,
                         mms__gguf_type_name(from), val, to);
}

MMS_API enum mms_status mms_gguf_get_u32(const struct mms_gguf *g, const char *key, uint32_t *out) {
    const struct mms__gguf_kv *kv = mms__gguf_lookup(g, key, "mms_gguf_get_u32");
    bool neg; int64_t sv = 0; uint64_t uv = 0;
    if (!kv) return MMS_ERR_INVALID_ARG;
    if (kv->type == MMS_GGUF_TYPE_ARRAY || !mms__gguf_int(g->base + kv->val_pos, kv->type, &neg, &sv, &uv))
        return mms__gguf_wrong_type(g, kv, "mms_gguf_get_u32", "an integer");
    if (neg || uv > UINT32_MAX) return mms__gguf_out_of_range(g, kv, "mms_gguf_get_u32", -1, neg, sv, uv, kv->type, "u32");
    if (out) *out = (uint32_t)uv;
    return MMS_OK;
}

MMS_API enum mms_status mms_gguf_get_i32(const struct mms_gguf *g, const char *key, int32_t *out) {
    const struct mms__gguf_kv *kv = mms__gguf_lookup(g, key, "mms_gguf_get_i32");
    bool neg; int64_t sv = 0; uint64_t uv = 0;
    if (!kv) return MMS_ERR_INVALID_ARG;
    if (kv->type == MMS_GGUF_TYPE_ARRAY || !mms__gguf_int(g->base + kv->val_pos, kv->type, &neg, &sv, &uv))
        return mms__gguf_wrong_type(g, kv, "mms_gguf_get_i32", "an integer");
    if (neg ? sv < INT32_MIN : uv > INT32_MAX) return mms__gguf_out_of_range(g, kv, "mms_gguf_get_i32", -1, neg, sv, uv, kv->type, "i32");
    if (out) *out = neg ? (int32_t)sv : (int32_t)uv;
    return MMS_OK;
}

MMS_API enum mms_status mms_gguf_get_u64(const struct mms_gguf *g, const char *key, uint64_t *out) {
    const struct mms__gguf_kv *kv = mms__gguf_lookup(g, key, "mms_gguf_get_u64");
    bool neg; int64_t sv = 0; uint64_t uv = 0;
    if (!kv) return MMS_ERR_INVALID_ARG;
    if (kv->type == MMS_GGUF_TYPE_ARRAY || !mms__gguf_int(g->base + kv->val_pos, kv->type, &neg, &sv, &uv))
        return mms__gguf_wrong_type(g, kv, "mms_gguf_get_u64", "an integer");
    if (neg) return mms__gguf_out_of_range(g, kv, "mms_gguf_get_u64", -1, neg, sv, uv, kv->type, "u64");
    if (out) *out = uv;
    return MMS_OK;
}

MMS_API enum mms_status mms_gguf_get_f32(const struct mms_gguf *g, const char *key, float *out) {
    const struct mms__gguf_kv *kv = mms__gguf_lookup(g, key, "mms_gguf_get_f32");
    double v;
    if (!kv) return MMS_ERR_INVALID_ARG;
    if (kv->type == MMS_GGUF_TYPE_ARRAY || !mms__gguf_float(g->base + kv->val_pos, kv->type, &v))
        return mms__gguf_wrong_type(g, kv, "mms_gguf_get_f32", "f32 or f64");
    if (!mms__gguf_fits_f32(v))
        return mms_set_error(MMS_ERR_FORMAT, "mms_gguf_get_f32: %s: key '%s': f64 value %g does not fit in f32", g->where, kv->key, v);
    if (out) *out = (float)v;
    return MMS_OK;
}

MMS_API enum mms_status mms_gguf_get_bool(const struct mms_gguf *g, const char *key, bool *out) {
    const struct mms__gguf_kv *kv = mms__gguf_lookup(g, key, "mms_gguf_get_bool");
    if (!kv) return MMS_ERR_INVALID_ARG;
    if (kv->type != MMS_GGUF_TYPE_BOOL) return mms__gguf_wrong_type(g, kv, "mms_gguf_get_bool", "a bool");
    if (out) *out = g->base[kv->val_pos] != 0;
    return MMS_OK;
}

static void mms__gguf_str_at(const struct mms_gguf *g, size_t pos, const char **out, size_t *len) {
    if (out) *out = (const char *)(g->base + pos + 8);
    if (len) *len = (size_t)mms__gguf_le64(g->base + pos);   /* checked against the file when opened */
}

MMS_API enum mms_status mms_gguf_get_str(const struct mms_gguf *g, const char *key, const char **out, size_t *len) {
    const struct mms__gguf_kv *kv = mms__gguf_lookup(g, key, "mms_gguf_get_str");
    if (!kv) return MMS_ERR_INVALID_ARG;
    if (kv->type != MMS_GGUF_TYPE_STRING) return mms__gguf_wrong_type(g, kv, "mms_gguf_get_str", "a string");
    mms__gguf_str_at(g, kv->val_pos, out, len);
    return MMS_OK;
}

/* The array behind key for the array getters, with out/cap checked and *n set. */
static const struct mms__gguf_kv *mms__gguf_array(const struct mms_gguf *g, const char *key, const char *fn, const void *out,
                                                  int64_t cap, int64_t *n) {
    const struct mms__gguf_kv *kv;
    if (cap < 0 || (cap > 0 && !out)) {
        mms_set_error(MMS_ERR_INVALID_ARG, "%s: %s", fn, cap < 0 ? "negative capacity" : "out is NULL with a non-zero capacity");
        return NULL;
    }
    kv = mms__gguf_lookup(g, key, fn);
    if (kv && kv->type == MMS_GGUF_TYPE_ARRAY && n) *n = (int64_t)kv->n;
    return kv;
}

MMS_API enum mms_status mms_gguf_get_arr_i32(const struct mms_gguf *g, const char *key, int32_t *out, int64_t cap, int64_t *n) {
    const char *fn = "mms_gguf_get_arr_i32";
    const struct mms__gguf_kv *kv = mms__gguf_array(g, key, fn, out, cap, n);
    size_t es;
    int64_t i;
    if (!kv) return MMS_ERR_INVALID_ARG;
    es = mms__gguf_type_size(kv->arr_type);
    if (kv->type != MMS_GGUF_TYPE_ARRAY || kv->arr_type == MMS_GGUF_TYPE_BOOL || kv->arr_type == MMS_GGUF_TYPE_FLOAT32 ||
        kv->arr_type == MMS_GGUF_TYPE_FLOAT64 || es == 0)
        return mms__gguf_wrong_type(g, kv, fn, "an array of integers");
    for (i = 0; i < cap && (uint64_t)i < kv->n; i++) {
        bool neg; int64_t sv = 0; uint64_t uv = 0;
        mms__gguf_int(g->base + kv->val_pos + (size_t)i * es, kv->arr_type, &neg, &sv, &uv);
        if (neg ? sv < INT32_MIN : uv > INT32_MAX) return mms__gguf_out_of_range(g, kv, fn, i, neg, sv, uv, kv->arr_type, "i32");
        out[i] = neg ? (int32_t)sv : (int32_t)uv;
    }
    return MMS_OK;
}

MMS_API enum mms_status mms_gguf_get_arr_f32(const struct mms_gguf *g, const char *key, float *out, int64_t cap, int64_t *n) {
    const char *fn = "mms_gguf_get_arr_f32";
    const struct mms__gguf_kv *kv = mms__gguf_array(g, key, fn, out, cap, n);
    size_t es;
    int64_t i;
    if (!kv) return MMS_ERR_INVALID_ARG;
    if (kv->type != MMS_GGUF_TYPE_ARRAY || (kv->arr_type != MMS_GGUF_TYPE_FLOAT32 && kv->arr_type != MMS_GGUF_TYPE_FLOAT64))
        return mms__gguf_wrong_type(g, kv, fn, "an array of f32 or f64");
    es = mms__gguf_type_size(kv->arr_type);
    for (i = 0; i < cap && (uint64_t)i < kv->n; i++) {
        double v = 0;
        mms__gguf_float(g->base + kv->val_pos + (size_t)i * es, kv->arr_type, &v);
        if (!mms__gguf_fits_f32(v))
            return mms_set_error(MMS_ERR_FORMAT, "%s: %s: key '%s' element %lld: f64 value %g does not fit in f32", fn, g->where, kv->key, (long long)i, v);
        out[i] = (float)v;
    }
    return MMS_OK;
}

MMS_API enum mms_status mms_gguf_get_arr_str(const struct mms_gguf *g, const char *key, int64_t i, const char **out, size_t *len) {
    const char *fn = "mms_gguf_get_arr_str";
    const struct mms__gguf_kv *kv = mms__gguf_lookup(g, key, fn);
    if (!kv) return MMS_ERR_INVALID_ARG;
    if (kv->type != MMS_GGUF_TYPE_ARRAY || kv->arr_type != MMS_GGUF_TYPE_STRING)
        return mms__gguf_wrong_type(g, kv, fn, "an array of strings");
    if (i < 0 || (uint64_t)i >= kv->n)
        return mms_set_error(MMS_ERR_INVALID_ARG, "%s: %s: index %lld out of range for key '%s' (%llu strings)", fn, g->where,
                             (long long)i, kv->key, (unsigned long long)kv->n);
    mms__gguf_str_at(g, kv->str_pos[i], out, len);
    return MMS_OK;
}

/* -- tensors -- */

MMS_API enum mms_status mms_gguf_get_tensor(const struct mms_gguf *g, int64_t i, struct mms_gguf_tensor_info *info) {
    const struct mms__gguf_tensor *t;
    if (!g || !info) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_gguf_get_tensor: %s is NULL", g ? "info" : "gguf");
    if (i < 0 || i >= g->n_tensors)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_gguf_get_tensor: %s: tensor index %lld out of range (%lld tensors)", g->where,
                             (long long)i, (long long)g->n_tensors);
    t = &g->tensors[i];
    info->name = t->name;
    info->ggml_type = t->ggml_type;
    info->type = t->type;
    info->n_dims = t->n_dims;
    memcpy(info->ne, t->ne, sizeof info->ne);
    info->offset = t->offset;
    info->size = (size_t)t->size;   /* fits: it lies inside the file */
    info->data = g->base + g->data_pos + (size_t)t->offset;
    return MMS_OK;
}
