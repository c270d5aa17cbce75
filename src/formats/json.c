/* >>json ===========================================================================================
   The strict JSON reader: one pass over the text into a flat array of values. A container's
   children are stored together once it closes (the parser keeps them on a stack until then); an
   object also keeps its members' order sorted by key, which finds duplicates and makes lookups
   binary searches. Strings are decoded into one pool. */

#define MMS__JSON_MAX_DEPTH 128

struct mms__json_val {
    uint8_t type;
    int64_t a, b;          /* string: pool offset, length; array/object: first child slot, count */
    double  num;
};

struct mms_json {
    struct mms__json_val *v;
    int64_t  n_v, cap_v;
    int64_t *kids;           /* child value indexes, contiguous per container */
    int64_t *keys;           /* objects: the key's pool offset for each child slot */
    int64_t *sorted;         /* objects: child slots in key order */
    int64_t  n_kids, cap_kids, cap_keys;
    char    *pool;
    size_t   n_pool, cap_pool;
    char    *source;
};

struct mms__json_parser {
    struct mms_json *j;
    const char *s;
    size_t len, pos;
    int64_t *stack;          /* children (and key offsets, interleaved) of the open containers */
    int64_t  n_stack, cap_stack;
    enum mms_status st;
};

/* Whether path can be opened for reading (how folder layouts are recognised). */
MMS__MAYBE_UNUSED static bool mms__file_exists(const char *path) {   /* for the parts above */
    FILE *f = mms__fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

static char *mms__str_copy(const char *s) {
    size_t n = strlen(s) + 1;
    char *c = (char *)MMS_MALLOC(n);
    if (c) memcpy(c, s, n);
    return c;
}

static enum mms_status mms__json_fail(struct mms__json_parser *p, size_t at, const char *fmt, ...) MMS_PRINTF(3, 4);
static enum mms_status mms__json_fail(struct mms__json_parser *p, size_t at, const char *fmt, ...) {
    char what[160];
    size_t i, line = 1, col = 1;
    va_list ap;
    if (p->st != MMS_OK) return p->st;
    for (i = 0; i < at && i < p->len; i++) {
        if (p->s[i] == '\n') { line++; col = 1; } else col++;
    }
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return p->st = mms_set_error(MMS_ERR_FORMAT, "json: %s line %zu column %zu: %s", p->j->source, line, col, what);
}

static enum mms_status mms__json_oom(struct mms__json_parser *p) {
    if (p->st != MMS_OK) return p->st;
    return p->st = mms_set_error(MMS_ERR_OOM, "json: %s: out of memory", p->j->source);
}

static bool mms__json_grow(void **ptr, int64_t *cap, int64_t need, size_t elem) {
    int64_t c = *cap ? *cap : 64;
    void *q;
    if (need <= *cap) return true;
    while (c < need) c *= 2;
    if ((uint64_t)c > SIZE_MAX / elem) return false;
    q = MMS_REALLOC(*ptr, (size_t)c * elem);
    if (!q) return false;
    *ptr = q;
    *cap = c;
    return true;
}

static int64_t mms__json_new(struct mms__json_parser *p, int type) {
    struct mms_json *j = p->j;
    if (!mms__json_grow((void **)&j->v, &j->cap_v, j->n_v + 1, sizeof *j->v)) { mms__json_oom(p); return -1; }
    memset(&j->v[j->n_v], 0, sizeof *j->v);
    j->v[j->n_v].type = (uint8_t)type;
    return j->n_v++;
}

static bool mms__json_push(struct mms__json_parser *p, int64_t x) {
    if (!mms__json_grow((void **)&p->stack, &p->cap_stack, p->n_stack + 1, sizeof *p->stack)) { mms__json_oom(p); return false; }
    p->stack[p->n_stack++] = x;
    return true;
}

static bool mms__json_pool_put(struct mms__json_parser *p, const void *b, size_t n) {
    struct mms_json *j = p->j;
    if (j->n_pool + n + 1 > j->cap_pool) {
        size_t c = j->cap_pool ? j->cap_pool : 1024;
        char *q;
        while (c < j->n_pool + n + 1) {
            if (c > SIZE_MAX / 2) { mms__json_oom(p); return false; }
            c *= 2;
        }
        if (!(q = (char *)MMS_REALLOC(j->pool, c))) { mms__json_oom(p); return false; }
        j->pool = q;
        j->cap_pool = c;
    }
    memcpy(j->pool + j->n_pool, b, n);
    j->n_pool += n;
    return true;
}

static void mms__json_ws(struct mms__json_parser *p) {
    while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' || p->s[p->pos] == '\r')) p->pos++;
}

/* One UTF-8 sequence at s (n bytes left): its length, or 0 if invalid (overlong, surrogate, > U+10FFFF, cut). */
static int mms__json_utf8(const unsigned char *s, size_t n, uint32_t *cp) {
    int k, i;
    uint32_t c;
    if (s[0] < 0x80) { *cp = s[0]; return 1; }
    if (s[0] >= 0xC2 && s[0] <= 0xDF) { k = 2; c = s[0] & 0x1F; }
    else if (s[0] >= 0xE0 && s[0] <= 0xEF) { k = 3; c = s[0] & 0x0F; }
    else if (s[0] >= 0xF0 && s[0] <= 0xF4) { k = 4; c = s[0] & 0x07; }
    else return 0;
    if ((size_t)k > n) return 0;
    for (i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    if ((k == 3 && c < 0x800) || (k == 4 && (c < 0x10000 || c > 0x10FFFF)) || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *cp = c;
    return k;
}

static int mms__json_hex4(const char *s) {
    int v = 0, i;
    for (i = 0; i < 4; i++) {
        int c = s[i], d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* A string at p->pos (the opening quote) into the pool; *off and *n give it. */
static bool mms__json_string(struct mms__json_parser *p, int64_t *off, int64_t *n) {
    const size_t start = p->pos, pool0 = p->j->n_pool;
    p->pos++;
    for (;;) {
        const unsigned char c = p->pos < p->len ? (unsigned char)p->s[p->pos] : 0;
        if (p->pos >= p->len) { mms__json_fail(p, start, "unterminated string"); return false; }
        if (c == '"') { p->pos++; break; }
        if (c < 0x20) { mms__json_fail(p, p->pos, "control character 0x%02x in a string (escape it)", c); return false; }
        if (c == '\\') {
            char e = p->pos + 1 < p->len ? p->s[p->pos + 1] : 0, out = 0;
            switch (e) {
            case '"': out = '"'; break;
            case '\\': out = '\\'; break;
            case '/': out = '/'; break;
            case 'b': out = '\b'; break;
            case 'f': out = '\f'; break;
            case 'n': out = '\n'; break;
            case 'r': out = '\r'; break;
            case 't': out = '\t'; break;
            case 'u': {
                int hi = p->pos + 6 <= p->len ? mms__json_hex4(p->s + p->pos + 2) : -1;
                uint32_t cp;
                unsigned char u[4];
                int k;
                if (hi < 0) { mms__json_fail(p, p->pos, "bad \\u escape"); return false; }
                p->pos += 6;
                cp = (uint32_t)hi;
                if (hi >= 0xDC00 && hi <= 0xDFFF) { mms__json_fail(p, p->pos - 6, "lone low surrogate \\u%04x", hi); return false; }
                if (hi >= 0xD800 && hi <= 0xDBFF) {
                    int lo = p->pos + 6 <= p->len && p->s[p->pos] == '\\' && p->s[p->pos + 1] == 'u' ? mms__json_hex4(p->s + p->pos + 2) : -1;
                    if (lo < 0xDC00 || lo > 0xDFFF) { mms__json_fail(p, p->pos - 6, "high surrogate \\u%04x without its low half", hi); return false; }
                    cp = 0x10000 + (((uint32_t)hi - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
                    p->pos += 6;
                }
                if (cp < 0x80) { u[0] = (unsigned char)cp; k = 1; }
                else if (cp < 0x800) { u[0] = (unsigned char)(0xC0 | (cp >> 6)); u[1] = (unsigned char)(0x80 | (cp & 0x3F)); k = 2; }
                else if (cp < 0x10000) {
                    u[0] = (unsigned char)(0xE0 | (cp >> 12)); u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)); u[2] = (unsigned char)(0x80 | (cp & 0x3F)); k = 3;
                } else {
                    u[0] = (unsigned char)(0xF0 | (cp >> 18)); u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
                    u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)); u[3] = (unsigned char)(0x80 | (cp & 0x3F)); k = 4;
                }
                if (!mms__json_pool_put(p, u, (size_t)k)) return false;
                continue;
            }
            default:
                mms__json_fail(p, p->pos, "bad escape \\%c", e >= 0x20 && e < 0x7F ? e : '?');
                return false;
            }
            if (!mms__json_pool_put(p, &out, 1)) return false;
            p->pos += 2;
        } else {
            size_t run = p->pos;
            while (run < p->len && (unsigned char)p->s[run] >= 0x20 && p->s[run] != '"' && p->s[run] != '\\') {
                uint32_t cp;
                int k = mms__json_utf8((const unsigned char *)p->s + run, p->len - run, &cp);
                if (!k) { mms__json_fail(p, run, "invalid UTF-8 in a string"); return false; }
                run += (size_t)k;
            }
            if (!mms__json_pool_put(p, p->s + p->pos, run - p->pos)) return false;
            p->pos = run;
        }
    }
    *off = (int64_t)pool0;
    *n = (int64_t)(p->j->n_pool - pool0);
    return mms__json_pool_put(p, "", 1);   /* NUL-terminated: keys compare with strcmp */
}

/* *inexact: an integer literal (no point, no exponent) beyond 2^53, which a double rounds. */
static bool mms__json_number(struct mms__json_parser *p, double *out, bool *inexact) {
    const size_t start = p->pos;
    size_t i = p->pos;
    char buf[128];
    char *end;
    if (i < p->len && p->s[i] == '-') i++;
    if (i < p->len && p->s[i] == '0') i++;
    else if (i < p->len && p->s[i] >= '1' && p->s[i] <= '9') while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9') i++;
    else { mms__json_fail(p, start, "bad number"); return false; }
    if (i < p->len && p->s[i] >= '0' && p->s[i] <= '9') { mms__json_fail(p, start, "number with a leading zero"); return false; }
    if (i < p->len && p->s[i] == '.') {
        i++;
        if (!(i < p->len && p->s[i] >= '0' && p->s[i] <= '9')) { mms__json_fail(p, start, "bad number: no digit after the point"); return false; }
        while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9') i++;
    }
    if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
        i++;
        if (i < p->len && (p->s[i] == '+' || p->s[i] == '-')) i++;
        if (!(i < p->len && p->s[i] >= '0' && p->s[i] <= '9')) { mms__json_fail(p, start, "bad number: no digit in the exponent"); return false; }
        while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9') i++;
    }
    if (i - start >= sizeof buf) { mms__json_fail(p, start, "number of %zu characters", i - start); return false; }
    memcpy(buf, p->s + start, i - start);
    buf[i - start] = '\0';
    *inexact = false;
    if (!strpbrk(buf, ".eE")) {
        uint64_t m = 0;
        const char *c;
        for (c = buf[0] == '-' ? buf + 1 : buf; *c && !*inexact; c++) {
            *inexact = m > (UINT64_C(1) << 53) / 10;
            m = m * 10 + (uint64_t)(*c - '0');
        }
        *inexact = *inexact || m > (UINT64_C(1) << 53);
    }
    *out = strtod(buf, &end);
    if (end != buf + (i - start)) { mms__json_fail(p, start, "bad number"); return false; }
    if (*out > DBL_MAX || *out < -DBL_MAX) { mms__json_fail(p, start, "number %.40s is too large", buf); return false; }
    p->pos = i;
    return true;
}

static int mms__json_key_cmp(const struct mms_json *j, int64_t oa, int64_t ob) {
    const char *a = j->pool + oa, *b = j->pool + ob;
    return strcmp(a, b);
}

/* Sorts an object's child slots by key (insertion sort for small ones, merge sort otherwise) and
   reports the first duplicate. Keys are NUL-terminated; a key holding \u0000 compares by its prefix,
   so such keys are refused when they would tie. */
static bool mms__json_sort_members(struct mms__json_parser *p, int64_t first, int64_t n, size_t at) {
    struct mms_json *j = p->j;
    int64_t *s = j->sorted + first, i, w;
    int64_t *tmp;
    for (i = 0; i < n; i++) s[i] = first + i;
    if (n > 1) {
        tmp = (int64_t *)MMS_MALLOC(sizeof *tmp * (size_t)n);
        if (!tmp) { mms__json_oom(p); return false; }
        for (w = 1; w < n; w *= 2) {
            int64_t lo;
            for (lo = 0; lo < n; lo += 2 * w) {
                int64_t mid = MMS__MIN(lo + w, n), hi = MMS__MIN(lo + 2 * w, n), a = lo, b = mid, k = lo;
                while (a < mid && b < hi) tmp[k++] = mms__json_key_cmp(j, j->keys[s[a]], j->keys[s[b]]) <= 0 ? s[a++] : s[b++];
                while (a < mid) tmp[k++] = s[a++];
                while (b < hi) tmp[k++] = s[b++];
            }
            memcpy(s, tmp, sizeof *tmp * (size_t)n);
        }
        MMS_FREE(tmp);
    }
    for (i = 1; i < n; i++)
        if (mms__json_key_cmp(j, j->keys[s[i - 1]], j->keys[s[i]]) == 0) {
            mms__json_fail(p, at, "duplicate key \"%.60s\" in an object", j->pool + j->keys[s[i]]);
            return false;
        }
    return true;
}

/* Moves the n children on top of the stack (pairs of key offset and value for objects) to the
   container's slots. */
static bool mms__json_close(struct mms__json_parser *p, int64_t v, int64_t n, bool object, size_t at) {
    struct mms_json *j = p->j;
    const int64_t per = object ? 2 : 1, first = j->n_kids;
    int64_t i;
    if (!mms__json_grow((void **)&j->kids, &j->cap_kids, first + n, sizeof *j->kids)) { mms__json_oom(p); return false; }
    if (j->cap_keys < j->cap_kids) {   /* keys and sorted grow with kids */
        const int64_t cap = j->cap_kids;
        void *k = MMS_REALLOC(j->keys, sizeof *j->keys * (size_t)cap), *s;
        if (!k) { mms__json_oom(p); return false; }
        j->keys = (int64_t *)k;
        s = MMS_REALLOC(j->sorted, sizeof *j->sorted * (size_t)cap);
        if (!s) { mms__json_oom(p); return false; }
        j->sorted = (int64_t *)s;
        j->cap_keys = cap;
    }
    for (i = 0; i < n; i++) {
        const int64_t *e = p->stack + p->n_stack - per * n + per * i;
        j->kids[first + i] = object ? e[1] : e[0];
        j->keys[first + i] = object ? e[0] : -1;
        j->sorted[first + i] = first + i;
    }
    p->n_stack -= per * n;
    j->n_kids += n;
    j->v[v].a = first;
    j->v[v].b = n;
    return !object || mms__json_sort_members(p, first, n, at);
}

static bool mms__json_value(struct mms__json_parser *p, int depth, int64_t *out) {
    char c;
    mms__json_ws(p);
    if (p->pos >= p->len) { mms__json_fail(p, p->pos, "unexpected end of the text"); return false; }
    c = p->s[p->pos];
    if (c == '{' || c == '[') {
        const bool object = c == '{';
        const size_t at = p->pos;
        int64_t v = mms__json_new(p, object ? MMS_JSON_OBJECT : MMS_JSON_ARRAY), n = 0;
        if (v < 0) return false;
        if (depth >= MMS__JSON_MAX_DEPTH) { mms__json_fail(p, p->pos, "nesting deeper than %d", MMS__JSON_MAX_DEPTH); return false; }
        p->pos++;
        mms__json_ws(p);
        if (p->pos < p->len && p->s[p->pos] == (object ? '}' : ']')) p->pos++;
        else for (;;) {
            int64_t child, koff = -1, klen;
            if (object) {
                mms__json_ws(p);
                if (p->pos >= p->len || p->s[p->pos] != '"') { mms__json_fail(p, p->pos, "expected a key string"); return false; }
                if (!mms__json_string(p, &koff, &klen)) return false;
                mms__json_ws(p);
                if (p->pos >= p->len || p->s[p->pos] != ':') { mms__json_fail(p, p->pos, "expected ':' after a key"); return false; }
                p->pos++;
                if (!mms__json_push(p, koff)) return false;
            }
            if (!mms__json_value(p, depth + 1, &child) || !mms__json_push(p, child)) return false;
            n++;
            mms__json_ws(p);
            if (p->pos < p->len && p->s[p->pos] == ',') {
                p->pos++;
                mms__json_ws(p);
                if (p->pos < p->len && p->s[p->pos] == (object ? '}' : ']')) { mms__json_fail(p, p->pos, "trailing comma"); return false; }
                continue;
            }
            if (p->pos < p->len && p->s[p->pos] == (object ? '}' : ']')) { p->pos++; break; }
            mms__json_fail(p, p->pos, p->pos >= p->len ? "unexpected end of the text" : object ? "expected ',' or '}'" : "expected ',' or ']'");
            return false;
        }
        *out = v;
        return mms__json_close(p, v, n, object, at);
    }
    if (c == '"') {
        int64_t v = mms__json_new(p, MMS_JSON_STRING), off, n;
        if (v < 0 || !mms__json_string(p, &off, &n)) return false;
        p->j->v[v].a = off;
        p->j->v[v].b = n;
        *out = v;
        return true;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        double d;
        bool inexact;
        int64_t v;
        if (!mms__json_number(p, &d, &inexact) || (v = mms__json_new(p, MMS_JSON_NUMBER)) < 0) return false;
        p->j->v[v].num = d;
        p->j->v[v].a = inexact;
        *out = v;
        return true;
    }
    {
        static const struct { const char *word; int type; } words[3] = { { "null", MMS_JSON_NULL }, { "false", MMS_JSON_FALSE }, { "true", MMS_JSON_TRUE } };
        int k;
        for (k = 0; k < 3; k++) {
            size_t n = strlen(words[k].word);
            if (p->len - p->pos >= n && !memcmp(p->s + p->pos, words[k].word, n)) {
                p->pos += n;
                return (*out = mms__json_new(p, words[k].type)) >= 0;
            }
        }
    }
    mms__json_fail(p, p->pos, "unexpected character '%c'", c >= 0x20 && c < 0x7F ? c : '?');
    return false;
}

MMS_API struct mms_json *mms_json_parse(const char *text, size_t len, const char *source) {
    struct mms__json_parser p;
    struct mms_json *j;
    int64_t root;
    if (!text && len) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_json_parse: text is NULL"); return NULL; }
    if (!(j = (struct mms_json *)MMS_MALLOC(sizeof *j))) { mms_set_error(MMS_ERR_OOM, "json: out of memory"); return NULL; }
    memset(j, 0, sizeof *j);
    j->source = mms__str_copy(source ? source : "(memory)");
    memset(&p, 0, sizeof p);
    p.j = j;
    p.s = text ? text : "";
    p.len = len;
    if (!j->source) { mms_json_free(j); mms_set_error(MMS_ERR_OOM, "json: out of memory"); return NULL; }
    if (mms__json_value(&p, 0, &root)) {
        mms__json_ws(&p);
        if (p.pos < p.len) mms__json_fail(&p, p.pos, "text after the value");
    }
    MMS_FREE(p.stack);
    if (p.st != MMS_OK) { mms_json_free(j); return NULL; }
    return j;
}

MMS_API struct mms_json *mms_json_parse_file(const char *path) {
    struct mms__mapping map;
    struct mms_json *j;
    if (!path) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_json_parse_file: path is NULL"); return NULL; }
    if (mms__map_file(path, &map) != MMS_OK) return NULL;
    j = mms_json_parse((const char *)map.addr, map.size, path);
    mms__unmap_file(&map);
    return j;
}

MMS_API void mms_json_free(struct mms_json *j) {
    if (!j) return;
    MMS_FREE(j->v); MMS_FREE(j->kids); MMS_FREE(j->keys); MMS_FREE(j->sorted); MMS_FREE(j->pool); MMS_FREE(j->source);
    MMS_FREE(j);
}

MMS_API const char *mms_json_source(const struct mms_json *j) { return j ? j->source : ""; }

static const struct mms__json_val *mms__json_v(const struct mms_json *j, int64_t v) {
    return j && v >= 0 && v < j->n_v ? &j->v[v] : NULL;
}

MMS_API enum mms_json_type mms_json_type(const struct mms_json *j, int64_t v) {
    const struct mms__json_val *x = mms__json_v(j, v);
    return x ? (enum mms_json_type)x->type : MMS_JSON_NONE;
}

MMS_API int64_t mms_json_len(const struct mms_json *j, int64_t v) {
    const struct mms__json_val *x = mms__json_v(j, v);
    return x && (x->type == MMS_JSON_ARRAY || x->type == MMS_JSON_OBJECT) ? x->b : -1;
}

MMS_API int64_t mms_json_at(const struct mms_json *j, int64_t v, int64_t i) {
    const struct mms__json_val *x = mms__json_v(j, v);
    return x && (x->type == MMS_JSON_ARRAY || x->type == MMS_JSON_OBJECT) && i >= 0 && i < x->b ? j->kids[x->a + i] : -1;
}

MMS_API const char *mms_json_key(const struct mms_json *j, int64_t object, int64_t i, size_t *len) {
    const struct mms__json_val *x = mms__json_v(j, object);
    const char *k;
    if (!x || x->type != MMS_JSON_OBJECT || i < 0 || i >= x->b) return NULL;
    k = j->pool + j->keys[x->a + i];
    if (len) *len = strlen(k);
    return k;
}

MMS_API int64_t mms_json_get(const struct mms_json *j, int64_t object, const char *key) {
    const struct mms__json_val *x = mms__json_v(j, object);
    int64_t lo = 0, hi;
    if (!x || x->type != MMS_JSON_OBJECT || !key) return -1;
    hi = x->b;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2, slot = j->sorted[x->a + mid];
        int c = strcmp(j->pool + j->keys[slot], key);
        if (c == 0) return j->kids[slot];
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return -1;
}

MMS_API const char *mms_json_str(const struct mms_json *j, int64_t v, size_t *len) {
    const struct mms__json_val *x = mms__json_v(j, v);
    if (!x || x->type != MMS_JSON_STRING) return NULL;
    if (len) *len = (size_t)x->b;
    return j->pool + x->a;
}

MMS_API bool mms_json_num(const struct mms_json *j, int64_t v, double *out) {
    const struct mms__json_val *x = mms__json_v(j, v);
    if (!x || x->type != MMS_JSON_NUMBER) return false;
    if (out) *out = x->num;
    return true;
}

MMS_API bool mms_json_int(const struct mms_json *j, int64_t v, int64_t *out) {
    double d;
    if (!mms_json_num(j, v, &d) || j->v[v].a || d != floor(d) || fabs(d) > 9007199254740992.0) return false;
    if (out) *out = (int64_t)d;
    return true;
}

/* -- writing: compact text, as Python's json.dumps(ensure_ascii=False, separators=(",", ":")) -- */

struct mms__json_out {
    char  *buf;
    size_t room, len;   /* room: bytes that may be written before the NUL */
};

static void mms__json_put(struct mms__json_out *o, const char *s, size_t n) {
    if (o->len < o->room) memcpy(o->buf + o->len, s, n < o->room - o->len ? n : o->room - o->len);
    o->len += n;
}

static void mms__json_put_string(struct mms__json_out *o, const char *s, size_t n) {
    size_t i;
    mms__json_put(o, "\"", 1);
    for (i = 0; i < n; i++) {
        const unsigned char ch = (unsigned char)s[i];
        const char *e = ch == '"' ? "\\\"" : ch == '\\' ? "\\\\" : ch == '\n' ? "\\n" : ch == '\r' ? "\\r" : ch == '\t' ? "\\t"
                      : ch == '\b' ? "\\b" : ch == '\f' ? "\\f" : NULL;
        char u[8];
        if (e) mms__json_put(o, e, 2);
        else if (ch < 0x20) { snprintf(u, sizeof u, "\\u%04x", ch); mms__json_put(o, u, 6); }
        else mms__json_put(o, s + i, 1);
    }
    mms__json_put(o, "\"", 1);
}

static void mms__json_put_value(const struct mms_json *j, int64_t v, struct mms__json_out *o) {
    int64_t i, n, k;
    size_t len;
    const char *s;
    double d;
    char num[40];
    switch (mms_json_type(j, v)) {
    case MMS_JSON_NULL: mms__json_put(o, "null", 4); break;
    case MMS_JSON_TRUE: mms__json_put(o, "true", 4); break;
    case MMS_JSON_FALSE: mms__json_put(o, "false", 5); break;
    case MMS_JSON_NUMBER:
        if (mms_json_int(j, v, &k)) snprintf(num, sizeof num, "%lld", (long long)k);
        else {
            int p;
            mms_json_num(j, v, &d);
            for (p = 1; p <= 17; p++) {   /* the shortest text that reads back as the same double */
                snprintf(num, sizeof num, "%.*g", p, d);
                if (strtod(num, NULL) == d) break;
            }
        }
        mms__json_put(o, num, strlen(num));
        break;
    case MMS_JSON_STRING: s = mms_json_str(j, v, &len); mms__json_put_string(o, s, len); break;
    case MMS_JSON_ARRAY:
        mms__json_put(o, "[", 1);
        for (i = 0, n = mms_json_len(j, v); i < n; i++) { if (i) mms__json_put(o, ",", 1); mms__json_put_value(j, mms_json_at(j, v, i), o); }
        mms__json_put(o, "]", 1);
        break;
    case MMS_JSON_OBJECT:
        mms__json_put(o, "{", 1);
        for (i = 0, n = mms_json_len(j, v); i < n; i++) {
            s = mms_json_key(j, v, i, &len);
            if (i) mms__json_put(o, ",", 1);
            mms__json_put_string(o, s, len);
            mms__json_put(o, ":", 1);
            mms__json_put_value(j, mms_json_at(j, v, i), o);
        }
        mms__json_put(o, "}", 1);
        break;
    default: break;
    }
}

static void mms__json_out_end(struct mms__json_out *o, size_t cap) {
    if (cap) o->buf[o->len < o->room ? o->len : o->room] = '\0';
}

MMS_API int64_t mms_json_write(const struct mms_json *j, int64_t v, char *buf, size_t cap) {
    struct mms__json_out o;
    if (mms_json_type(j, v) == MMS_JSON_NONE || (!buf && cap)) return -1;
    o.buf = buf;
    o.room = cap ? cap - 1 : 0;
    o.len = 0;
    mms__json_put_value(j, v, &o);
    mms__json_out_end(&o, cap);
    return (int64_t)o.len;
}

MMS_API int64_t mms_json_write_string(const char *s, size_t len, char *buf, size_t cap) {
    struct mms__json_out o;
    if ((!s && len) || (!buf && cap)) return -1;
    o.buf = buf;
    o.room = cap ? cap - 1 : 0;
    o.len = 0;
    mms__json_put_string(&o, s, len);
    mms__json_out_end(&o, cap);
    return (int64_t)o.len;
}
