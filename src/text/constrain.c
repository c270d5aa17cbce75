/* >>text-constrain ================================================================================
   Constrained output: a grammar in our notation compiled to byte-level rules, and a matcher that
   keeps the set of parse stacks after the bytes so far.
   Grammar: rules of alternatives, each a sequence of elements ended by MMS__G_END; an element is a
   terminal (a set of bytes, >= 0: its index in classes) or a rule reference (-(rule + 2)). Character
   classes over code points become alternatives of UTF-8 byte-range sequences, so the matcher only
   sees bytes and a character cut across tokens is just a stack in the middle of a sequence.
   Matcher: a stack is an interned list of frames (a frame: the next element to match in its
   sequence; the parent: where to go on when the sequence ends), so a stack is one int and a state
   a sorted set of ints. Node 0 is the empty stack: a state holding it is complete. Per node, the
   closure after its terminal (independent of the byte matched) is memoised, which makes the walk
   over the vocabulary's byte trie one bit test and one array read per stack and trie node. */

#define MMS__G_END (-1)
#define MMS__G_REF(r) (-((r) + 2))
#define MMS__G_IS_REF(x) ((x) <= -2)
#define MMS__G_RULE(x) (-(x) - 2)
#define MMS__G_MAX_ELEMS (1 << 24)     /* a grammar larger than this is refused (a bounded repetition gone wild) */
#define MMS__G_MAX_REPEAT 100000
#define MMS__MASK_CACHE 256            /* masks kept per constraint; past it the cache starts over */
#define MMS__SET_NEXT_MAX (64u << 20)  /* bytes of memoised set successors per constraint; past it they start over */

struct mms__i32vec {
    int32_t *v;
    int      n, cap;
};

static bool mms__i32vec_push(struct mms__i32vec *a, int32_t x) {
    if (a->n == a->cap) {
        int cap = a->cap ? a->cap * 2 : 16;
        int32_t *p = (int32_t *)MMS_REALLOC(a->v, sizeof *p * (size_t)cap);
        if (!p) return false;
        a->v = p;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return true;
}

static bool mms__i32vec_append(struct mms__i32vec *a, const int32_t *x, int n) {
    int i;
    for (i = 0; i < n; i++) if (!mms__i32vec_push(a, x[i])) return false;
    return true;
}

static void mms__i32vec_free(struct mms__i32vec *a) {
    MMS_FREE(a->v);
    a->v = NULL;
    a->n = a->cap = 0;
}

struct mms_grammar {
    char     *text;                /* the source, in our notation */
    int32_t  *elems;               /* every alternative's elements, each ended by MMS__G_END; 0..1 is "root END" */
    int32_t  *alt_first;           /* the first element of each alternative */
    int32_t  *rule_alt;            /* rule r's alternatives: alt_first[rule_alt[r] .. rule_alt[r + 1]) */
    uint32_t *classes;             /* 8 words (256 bits) per terminal */
    int32_t  *rule_min;            /* the fewest bytes each rule matches */
    int       n_elems, n_alts, n_rules, n_classes;
};

/* -- building ---------------------------------------------------------------------------------- */

struct mms__gb_rule {
    char              *name;       /* NULL for the rules the notation's groups and repetitions make */
    struct mms__i32vec body;       /* alternatives, each ended by MMS__G_END */
    bool               defined;
    const char        *first_use;  /* where a named rule was first referenced (for the error) */
};

struct mms__gbuild {
    struct mms__gb_rule *rules;
    int                  n_rules, cap_rules;
    struct mms__i32vec   classes;   /* 8 words each */
    struct mms__ptrmap   class_ids; /* fnv of the 32 bytes -> index + 1 */
    const char          *text, *end, *s;
    long                 n_elems;
    bool                 oom;
    char                 err[256];
};

static void mms__gb_fail(struct mms__gbuild *b, const char *at, const char *fmt, ...) MMS_PRINTF(3, 4);
static void mms__gb_fail(struct mms__gbuild *b, const char *at, const char *fmt, ...) {
    va_list ap;
    char msg[200];
    int line = 1, col = 1;
    const char *p;
    if (b->err[0]) return;
    for (p = b->text; at && p < at && p < b->end; p++) { if (*p == '\n') { line++; col = 1; } else col++; }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (at) snprintf(b->err, sizeof b->err, "line %d column %d: %s", line, col, msg);
    else snprintf(b->err, sizeof b->err, "%s", msg);
}

static int mms__gb_new_rule(struct mms__gbuild *b, const char *name, size_t name_len) {
    struct mms__gb_rule *r;
    if (b->n_rules == b->cap_rules) {
        int cap = b->cap_rules ? b->cap_rules * 2 : 64;
        struct mms__gb_rule *p = (struct mms__gb_rule *)MMS_REALLOC(b->rules, sizeof *p * (size_t)cap);
        if (!p) { b->oom = true; return 0; }
        b->rules = p;
        b->cap_rules = cap;
    }
    r = &b->rules[b->n_rules];
    memset(r, 0, sizeof *r);
    if (name) {
        if (!(r->name = (char *)MMS_MALLOC(name_len + 1))) { b->oom = true; return 0; }
        memcpy(r->name, name, name_len);
        r->name[name_len] = '\0';
    }
    return b->n_rules++;
}

static int mms__gb_rule_named(struct mms__gbuild *b, const char *name, size_t len) {
    int i;
    for (i = 0; i < b->n_rules; i++)
        if (b->rules[i].name && strlen(b->rules[i].name) == len && !memcmp(b->rules[i].name, name, len)) return i;
    return mms__gb_new_rule(b, name, len);
}

/* A rule made of the given alternatives-with-ENDs; its reference. */
static int32_t mms__gb_anon(struct mms__gbuild *b, const int32_t *body, int n) {
    int r = mms__gb_new_rule(b, NULL, 0);
    if (b->oom) return MMS__G_REF(0);
    if (!mms__i32vec_append(&b->rules[r].body, body, n)) b->oom = true;
    b->rules[r].defined = true;
    b->n_elems += n;
    return MMS__G_REF(r);
}

static int32_t mms__gb_class(struct mms__gbuild *b, const uint32_t bits[8]) {
    uint64_t h = mms__fnv1a64(bits, 32, MMS__FNV1A64_START) | 1;
    bool found;
    void *v;
    int i;
    for (;; h += 2) {   /* probe on collision */
        v = mms__ptrmap_get(&b->class_ids, h, &found);
        if (!found) break;
        if (!memcmp(&b->classes.v[((intptr_t)v - 1) * 8], bits, 32)) return (int32_t)((intptr_t)v - 1);
    }
    for (i = 0; i < 8; i++) if (!mms__i32vec_push(&b->classes, (int32_t)bits[i])) { b->oom = true; return 0; }
    if (!mms__ptrmap_put(&b->class_ids, h, (void *)(intptr_t)(b->classes.n / 8))) b->oom = true;
    return b->classes.n / 8 - 1;
}

static int32_t mms__gb_byte_range(struct mms__gbuild *b, unsigned lo, unsigned hi) {
    uint32_t bits[8];
    unsigned c;
    memset(bits, 0, sizeof bits);
    for (c = lo; c <= hi; c++) bits[c >> 5] |= 1u << (c & 31);
    return mms__gb_class(b, bits);
}

/* -- code point classes as UTF-8 byte sequences -- */

/* Appends to alts one alternative per run of code points [lo, hi] that share their UTF-8 length and
   all but the ranges of each byte (the split of Rust's utf8-ranges, written anew). */
static void mms__gb_utf8_range(struct mms__gbuild *b, struct mms__i32vec *alts, uint32_t lo, uint32_t hi) {
    static const uint32_t limits[3] = { 0x7F, 0x7FF, 0xFFFF };
    unsigned char el[4], eh[4];
    int i, n;
    if (lo > hi || b->oom) return;
    for (i = 0; i < 3; i++)
        if (lo <= limits[i] && hi > limits[i]) {
            mms__gb_utf8_range(b, alts, lo, limits[i]);
            mms__gb_utf8_range(b, alts, limits[i] + 1, hi);
            return;
        }
    n = (int)mms__tok_put_utf8(lo, el);
    for (i = 1; i < n; i++) {
        const uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) { mms__gb_utf8_range(b, alts, lo, lo | m); mms__gb_utf8_range(b, alts, (lo | m) + 1, hi); return; }
            if ((hi & m) != m) { mms__gb_utf8_range(b, alts, lo, (hi & ~m) - 1); mms__gb_utf8_range(b, alts, hi & ~m, hi); return; }
        }
    }
    mms__tok_put_utf8(hi, eh);
    for (i = 0; i < n; i++) if (!mms__i32vec_push(alts, mms__gb_byte_range(b, el[i], eh[i]))) b->oom = true;
    if (!mms__i32vec_push(alts, MMS__G_END)) b->oom = true;
}

/* One element matching any one code point of the sorted, merged ranges (pairs lo, hi). */
static int32_t mms__gb_codepoints(struct mms__gbuild *b, const uint32_t *ranges, int n_ranges) {
    struct mms__i32vec alts = { NULL, 0, 0 };
    uint32_t ascii[8];
    bool any_ascii = false;
    int i, n_alt = 0;
    int32_t out;
    memset(ascii, 0, sizeof ascii);
    for (i = 0; i < n_ranges; i++) {
        uint32_t lo = ranges[2 * i], hi = ranges[2 * i + 1], c;
        for (c = lo; c <= hi && c < 0x80; c++) { ascii[c >> 5] |= 1u << (c & 31); any_ascii = true; }
        if (lo < 0x80) lo = 0x80;
        if (hi > 0x10FFFF) hi = 0x10FFFF;
        if (lo > hi) continue;
        if (lo < 0xD800 && hi > 0xDFFF) {   /* no surrogates: they are not characters */
            mms__gb_utf8_range(b, &alts, lo, 0xD7FF);
            mms__gb_utf8_range(b, &alts, 0xE000, hi);
        } else if (lo >= 0xD800 && hi <= 0xDFFF) {
            continue;
        } else {
            if (lo >= 0xD800 && lo <= 0xDFFF) lo = 0xE000;
            if (hi >= 0xD800 && hi <= 0xDFFF) hi = 0xD7FF;
            mms__gb_utf8_range(b, &alts, lo, hi);
        }
    }
    for (i = 0; i < alts.n; i++) n_alt += alts.v[i] == MMS__G_END;
    if (any_ascii && n_alt == 0) { mms__i32vec_free(&alts); return mms__gb_class(b, ascii); }
    if (any_ascii) {
        int32_t t = mms__gb_class(b, ascii), end = MMS__G_END;
        if (!mms__i32vec_push(&alts, t) || !mms__i32vec_push(&alts, end)) b->oom = true;
    }
    out = mms__gb_anon(b, alts.v, alts.n);   /* no alternatives at all: an empty class, caught as unproductive */
    mms__i32vec_free(&alts);
    return out;
}

/* -- the notation's parser -- */

static void mms__gp_space(struct mms__gbuild *b) {
    for (;;) {
        while (b->s < b->end && (*b->s == ' ' || *b->s == '\t' || *b->s == '\n' || *b->s == '\r')) b->s++;
        if (b->s < b->end && *b->s == '#') { while (b->s < b->end && *b->s != '\n') b->s++; continue; }
        return;
    }
}

static bool mms__gp_name_char(char c, bool first) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!first && ((c >= '0' && c <= '9') || c == '-'));
}

static size_t mms__gp_name_len(const struct mms__gbuild *b, const char *p) {
    const char *q = p;
    if (q >= b->end || !mms__gp_name_char(*q, true)) return 0;
    while (q < b->end && mms__gp_name_char(*q, false)) q++;
    return (size_t)(q - p);
}

/* Is p a rule's start, "name ::="? */
static bool mms__gp_at_rule(const struct mms__gbuild *b, const char *p) {
    size_t n = mms__gp_name_len(b, p);
    if (!n) return false;
    p += n;
    while (p < b->end && (*p == ' ' || *p == '\t')) p++;
    return b->end - p >= 3 && !memcmp(p, "::=", 3);
}

static int mms__gp_hex(struct mms__gbuild *b, int digits, uint32_t *out) {
    int i;
    *out = 0;
    for (i = 0; i < digits; i++, b->s++) {
        char c = b->s < b->end ? *b->s : 0;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) { mms__gb_fail(b, b->s, "expected %d hex digits", digits); return 0; }
        *out = *out * 16 + (uint32_t)d;
    }
    return 1;
}

/* One character of a literal or class (escapes decoded) as a code point; raw UTF-8 bytes pass as
   they are (a byte >= 0x80 gives itself with *raw set). */
static uint32_t mms__gp_char(struct mms__gbuild *b, bool *raw) {
    unsigned char c = (unsigned char)*b->s++;
    uint32_t v = 0;
    *raw = false;
    if (c != '\\') { *raw = c >= 0x80; return c; }
    if (b->s >= b->end) { mms__gb_fail(b, b->s, "a backslash at the end"); return 0; }
    c = (unsigned char)*b->s++;
    switch (c) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case 'x': mms__gp_hex(b, 2, &v); return v;
    case 'u': mms__gp_hex(b, 4, &v); break;
    case 'U': mms__gp_hex(b, 8, &v); break;
    case '\\': case '"': case ']': case '[': case '-': case '^': return c;
    default: mms__gb_fail(b, b->s - 2, "unknown escape \\%c", c); return 0;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) mms__gb_fail(b, b->s, "\\u%04X is not a character", (unsigned)v);
    return v;
}

static int mms__cp_cmp(const void *a, const void *b) {
    const uint32_t *x = (const uint32_t *)a, *y = (const uint32_t *)b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* [...] after the '[': ranges of code points, sorted, merged, complemented for ^. */
static int32_t mms__gp_class(struct mms__gbuild *b) {
    struct mms__i32vec r = { NULL, 0, 0 }, m = { NULL, 0, 0 };
    bool negate = false, raw;
    int i;
    int32_t out;
    if (b->s < b->end && *b->s == '^') { negate = true; b->s++; }
    while (b->s < b->end && *b->s != ']' && !b->err[0]) {
        uint32_t lo = mms__gp_char(b, &raw), hi;
        if (raw) { mms__gb_fail(b, b->s - 1, "write a non-ASCII character in a class as \\uXXXX"); break; }
        hi = lo;
        if (b->s + 1 < b->end && *b->s == '-' && b->s[1] != ']') {
            b->s++;
            hi = mms__gp_char(b, &raw);
            if (raw || hi < lo) { mms__gb_fail(b, b->s - 1, "a bad range in a class"); break; }
        }
        if (!mms__i32vec_push(&r, (int32_t)lo) || !mms__i32vec_push(&r, (int32_t)hi)) b->oom = true;
    }
    if (b->s >= b->end && !b->err[0]) mms__gb_fail(b, b->s, "a class without its ']'");
    b->s++;
    if (r.n) qsort(r.v, (size_t)r.n / 2, 2 * sizeof *r.v, mms__cp_cmp);
    for (i = 0; i < r.n; i += 2) {   /* merge */
        if (m.n && (uint32_t)r.v[i] <= (uint32_t)m.v[m.n - 1] + 1) {
            if (r.v[i + 1] > m.v[m.n - 1]) m.v[m.n - 1] = r.v[i + 1];
        } else if (!mms__i32vec_push(&m, r.v[i]) || !mms__i32vec_push(&m, r.v[i + 1])) b->oom = true;
    }
    if (negate) {
        uint32_t next = 0;
        r.n = 0;
        for (i = 0; i < m.n; i += 2) {
            if ((uint32_t)m.v[i] > next && (!mms__i32vec_push(&r, (int32_t)next) || !mms__i32vec_push(&r, m.v[i] - 1))) b->oom = true;
            next = (uint32_t)m.v[i + 1] + 1;
        }
        if (next <= 0x10FFFF && (!mms__i32vec_push(&r, (int32_t)next) || !mms__i32vec_push(&r, 0x10FFFF))) b->oom = true;
        out = mms__gb_codepoints(b, (const uint32_t *)r.v, r.n / 2);
    } else {
        out = mms__gb_codepoints(b, (const uint32_t *)m.v, m.n / 2);
    }
    mms__i32vec_free(&r);
    mms__i32vec_free(&m);
    return out;
}

static void mms__gp_alternatives(struct mms__gbuild *b, struct mms__i32vec *out);

/* x repeated min..max times (max < 0: no bound) into out. */
static void mms__gb_repeat(struct mms__gbuild *b, int32_t x, long min, long max, struct mms__i32vec *out) {
    long i;
    if ((max >= 0 && max > MMS__G_MAX_REPEAT) || min > MMS__G_MAX_REPEAT) { mms__gb_fail(b, b->s, "a repetition beyond %d", MMS__G_MAX_REPEAT); return; }
    for (i = 0; i < min; i++) if (!mms__i32vec_push(out, x)) b->oom = true;
    if (max < 0) {   /* R ::= x R | (empty) */
        int r = mms__gb_new_rule(b, NULL, 0);
        int32_t body[4];
        if (b->oom) return;
        body[0] = x; body[1] = MMS__G_REF(r); body[2] = MMS__G_END; body[3] = MMS__G_END;
        if (!mms__i32vec_append(&b->rules[r].body, body, 4) || !mms__i32vec_push(out, MMS__G_REF(r))) b->oom = true;
        b->rules[r].defined = true;
    } else if (max > min) {   /* O1 ::= x | (empty); Ok ::= x O(k-1) | (empty) */
        int32_t prev = 0, body[4];
        for (i = 0; i < max - min && !b->oom; i++) {
            int n = 0;
            body[n++] = x;
            if (i > 0) body[n++] = prev;
            body[n++] = MMS__G_END;
            body[n++] = MMS__G_END;
            prev = mms__gb_anon(b, body, n);
        }
        if (!mms__i32vec_push(out, prev)) b->oom = true;
    }
    b->n_elems += min + 4 * (max > min ? max - min : 1);
    if (b->n_elems > MMS__G_MAX_ELEMS) mms__gb_fail(b, b->s, "the grammar grows past %d elements", MMS__G_MAX_ELEMS);
}

static long mms__gp_number(struct mms__gbuild *b) {
    long v = 0;
    if (b->s >= b->end || *b->s < '0' || *b->s > '9') { mms__gb_fail(b, b->s, "expected a number"); return 0; }
    while (b->s < b->end && *b->s >= '0' && *b->s <= '9') { if (v < 100000000L) v = v * 10 + (*b->s - '0'); b->s++; }
    return v;
}

/* A sequence of items with their repetitions, into out (no END). */
static void mms__gp_sequence(struct mms__gbuild *b, struct mms__i32vec *out) {
    for (;;) {
        struct mms__i32vec item = { NULL, 0, 0 };
        const char *at;
        bool raw;
        mms__gp_space(b);
        if (b->err[0] || b->oom || b->s >= b->end || *b->s == '|' || *b->s == ')' || mms__gp_at_rule(b, b->s)) return;
        at = b->s;
        if (*b->s == '"') {
            b->s++;
            while (b->s < b->end && *b->s != '"' && !b->err[0]) {
                uint32_t c = mms__gp_char(b, &raw);
                unsigned char enc[4];
                int k, n = raw ? 1 : (int)mms__tok_put_utf8(c, enc);
                if (raw) enc[0] = (unsigned char)c;
                for (k = 0; k < n; k++) if (!mms__i32vec_push(&item, mms__gb_byte_range(b, enc[k], enc[k]))) b->oom = true;
            }
            if (b->s >= b->end) mms__gb_fail(b, at, "a literal without its closing quote");
            b->s++;
        } else if (*b->s == '[') {
            b->s++;
            if (!mms__i32vec_push(&item, mms__gp_class(b))) b->oom = true;
        } else if (*b->s == '.') {
            static const uint32_t any[2] = { 0, 0x10FFFF };
            b->s++;
            if (!mms__i32vec_push(&item, mms__gb_codepoints(b, any, 1))) b->oom = true;
        } else if (*b->s == '(') {
            struct mms__i32vec body = { NULL, 0, 0 };
            b->s++;
            mms__gp_alternatives(b, &body);
            mms__gp_space(b);
            if (b->s >= b->end || *b->s != ')') mms__gb_fail(b, at, "a '(' without its ')'");
            b->s++;
            if (!mms__i32vec_push(&item, mms__gb_anon(b, body.v, body.n))) b->oom = true;
            mms__i32vec_free(&body);
        } else if (mms__gp_name_len(b, b->s)) {
            size_t n = mms__gp_name_len(b, b->s);
            int r = mms__gb_rule_named(b, b->s, n);
            if (!b->oom && !b->rules[r].first_use) b->rules[r].first_use = b->s;
            b->s += n;
            if (!mms__i32vec_push(&item, MMS__G_REF(r))) b->oom = true;
        } else {
            mms__gb_fail(b, at, "unexpected '%c'", *b->s);
            return;
        }
        while (!b->err[0] && !b->oom && b->s < b->end && (*b->s == '*' || *b->s == '+' || *b->s == '?' || *b->s == '{')) {
            long min = 0, max = -1;
            int32_t x;
            char q = *b->s++;
            if (q == '+') min = 1;
            else if (q == '?') max = 1;
            else if (q == '{') {
                min = max = mms__gp_number(b);
                if (b->s < b->end && *b->s == ',') {
                    b->s++;
                    max = b->s < b->end && *b->s == '}' ? -1 : mms__gp_number(b);
                }
                if (b->s >= b->end || *b->s != '}' || (max >= 0 && max < min)) { mms__gb_fail(b, at, "a bad {m,n}"); break; }
                b->s++;
            }
            if (item.n == 1) x = item.v[0];
            else {
                if (!mms__i32vec_push(&item, MMS__G_END)) b->oom = true;
                x = mms__gb_anon(b, item.v, item.n);
            }
            item.n = 0;
            mms__gb_repeat(b, x, min, max, &item);
        }
        if (!mms__i32vec_append(out, item.v, item.n)) b->oom = true;
        b->n_elems += item.n;
        mms__i32vec_free(&item);
    }
}

static void mms__gp_alternatives(struct mms__gbuild *b, struct mms__i32vec *out) {
    for (;;) {
        mms__gp_sequence(b, out);
        if (!mms__i32vec_push(out, MMS__G_END)) b->oom = true;
        mms__gp_space(b);
        if (b->err[0] || b->oom || b->s >= b->end || *b->s != '|') return;
        b->s++;
    }
}

/* -- checks and flattening -- */

/* Every rule referenced is defined; every rule derives some finite string (else a state could be
   left with nothing to match); no rule reaches itself without consuming a byte (left recursion,
   which the stack matcher cannot expand). */
static void mms__gb_check(struct mms__gbuild *b, int root) {
    bool *productive = (bool *)MMS_MALLOC((size_t)b->n_rules + 1), *nullable = (bool *)MMS_MALLOC((size_t)b->n_rules + 1);
    int *color = (int *)MMS_MALLOC(sizeof(int) * ((size_t)b->n_rules + 1)), *stack = (int *)MMS_MALLOC(sizeof(int) * 2 * ((size_t)b->n_rules + 1));
    int r, i, changed;
    if (!productive || !nullable || !color || !stack) { b->oom = true; goto done; }
    for (r = 0; r < b->n_rules; r++)
        if (!b->rules[r].defined) {
            mms__gb_fail(b, b->rules[r].first_use, "rule '%s' is used but not defined", b->rules[r].name ? b->rules[r].name : "?");
            goto done;
        }
    memset(productive, 0, (size_t)b->n_rules);
    memset(nullable, 0, (size_t)b->n_rules);
    do {   /* least fixed points of "some alternative is all productive / all nullable" */
        changed = 0;
        for (r = 0; r < b->n_rules; r++) {
            const struct mms__i32vec *body = &b->rules[r].body;
            bool prod_alt = true, null_alt = true;
            for (i = 0; i < body->n; i++) {
                int32_t x = body->v[i];
                if (x == MMS__G_END) {
                    if (prod_alt && !productive[r]) { productive[r] = true; changed = 1; }
                    if (null_alt && !nullable[r]) { nullable[r] = true; changed = 1; }
                    prod_alt = null_alt = true;
                } else if (MMS__G_IS_REF(x)) {
                    prod_alt = prod_alt && productive[MMS__G_RULE(x)];
                    null_alt = null_alt && nullable[MMS__G_RULE(x)];
                } else {
                    null_alt = false;
                }
            }
        }
    } while (changed);
    for (r = 0; r < b->n_rules; r++)
        if (!productive[r]) {
            if (b->rules[r].name) mms__gb_fail(b, NULL, "rule '%s' matches no finite text", b->rules[r].name);
            else mms__gb_fail(b, NULL, "a group or class matches no finite text (an empty class, or a repetition without an end)");
            goto done;
        }
    /* left recursion: depth-first search over "r can begin with s" (s after a nullable prefix) */
    memset(color, 0, sizeof(int) * (size_t)b->n_rules);
    for (r = 0; r < b->n_rules && !b->err[0]; r++) {
        int sp = 0;
        if (color[r]) continue;
        stack[sp++] = r; stack[sp++] = 0; color[r] = 1;
        while (sp > 0 && !b->err[0]) {
            int u = stack[sp - 2], pos = stack[sp - 1];
            const struct mms__i32vec *body = &b->rules[u].body;
            bool at_start = true;
            int next = -1;
            /* find the next left-corner reference of u at or after pos */
            for (i = 0; i < body->n; i++) {
                int32_t x = body->v[i];
                if (x == MMS__G_END) { at_start = true; continue; }
                if (!at_start) continue;
                if (MMS__G_IS_REF(x) && i >= pos) { next = i; break; }
                if (!(MMS__G_IS_REF(x) && nullable[MMS__G_RULE(x)])) at_start = false;
            }
            if (next < 0) { color[u] = 2; sp -= 2; continue; }
            stack[sp - 1] = next + 1;
            {
                int v = MMS__G_RULE(body->v[next]);
                if (color[v] == 1) mms__gb_fail(b, NULL, "rule '%s' is left-recursive (it can reach itself before matching a byte)", b->rules[v].name ? b->rules[v].name : b->rules[u].name ? b->rules[u].name : "(a group)");
                else if (color[v] == 0) { color[v] = 1; stack[sp++] = v; stack[sp++] = 0; }
            }
        }
    }
    MMS__UNUSED(root);
done:
    MMS_FREE(productive);
    MMS_FREE(nullable);
    MMS_FREE(color);
    MMS_FREE(stack);
}

static void mms__gbuild_free(struct mms__gbuild *b) {
    int r;
    for (r = 0; r < b->n_rules; r++) { MMS_FREE(b->rules[r].name); mms__i32vec_free(&b->rules[r].body); }
    MMS_FREE(b->rules);
    mms__i32vec_free(&b->classes);
    mms__ptrmap_free(&b->class_ids);
}

MMS_API void mms_grammar_free(struct mms_grammar *g) {
    if (!g) return;
    MMS_FREE(g->text);
    MMS_FREE(g->elems);
    MMS_FREE(g->alt_first);
    MMS_FREE(g->rule_alt);
    MMS_FREE(g->classes);
    MMS_FREE(g->rule_min);
    MMS_FREE(g);
}

MMS_API const char *mms_grammar_text(const struct mms_grammar *g) { return g ? g->text : NULL; }

#define MMS__G_UNKNOWN (1 << 29)

/* The fewest bytes the rest of a sequence from element e matches (MMS__G_UNKNOWN while not known). */
static int32_t mms__g_seq_min(const struct mms_grammar *g, int32_t e) {
    int32_t sum = 0;
    for (; g->elems[e] != MMS__G_END; e++) {
        const int32_t x = g->elems[e], m = MMS__G_IS_REF(x) ? g->rule_min[MMS__G_RULE(x)] : 1;
        if (m >= MMS__G_UNKNOWN) return MMS__G_UNKNOWN;
        sum += m;
    }
    return sum;
}

MMS_API struct mms_grammar *mms_grammar_parse(const char *text, size_t len) {
    struct mms__gbuild b;
    struct mms_grammar *g = NULL;
    int root = -1, r, i, e, a;
    if (!text) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_grammar_parse: text is NULL"); return NULL; }
    memset(&b, 0, sizeof b);
    b.text = b.s = text;
    b.end = text + len;
    for (;;) {
        size_t n;
        mms__gp_space(&b);
        if (b.s >= b.end || b.err[0] || b.oom) break;
        if (!mms__gp_at_rule(&b, b.s)) { mms__gb_fail(&b, b.s, "expected a rule, NAME ::= ..."); break; }
        n = mms__gp_name_len(&b, b.s);
        r = mms__gb_rule_named(&b, b.s, n);
        if (b.oom) break;
        if (b.rules[r].defined) { mms__gb_fail(&b, b.s, "rule '%s' is defined twice", b.rules[r].name); break; }
        b.rules[r].defined = true;
        if (n == 4 && !memcmp(b.s, "root", 4)) root = r;
        b.s += n;
        while (*b.s != ':') b.s++;   /* mms__gp_at_rule saw spaces, then "::=" */
        b.s += 3;
        {
            struct mms__i32vec body = { NULL, 0, 0 };
            mms__gp_alternatives(&b, &body);
            if (!b.oom) { b.rules[r].body = body; b.n_elems += body.n; } else mms__i32vec_free(&body);
        }
    }
    if (!b.err[0] && !b.oom && root < 0) mms__gb_fail(&b, NULL, "no rule named root");
    if (!b.err[0] && !b.oom) mms__gb_check(&b, root);
    if (b.oom || b.err[0]) {
        if (b.oom) mms_set_error(MMS_ERR_OOM, "mms_grammar_parse: out of host memory");
        else mms_set_error(MMS_ERR_FORMAT, "grammar: %s", b.err);
        mms__gbuild_free(&b);
        return NULL;
    }
    /* flatten: elements 0..1 are "root END", the start every matcher begins from */
    g = (struct mms_grammar *)MMS_MALLOC(sizeof *g);
    if (g) {
        memset(g, 0, sizeof *g);
        g->n_elems = 2;
        g->n_rules = b.n_rules;
        for (r = 0; r < b.n_rules; r++) {
            g->n_elems += b.rules[r].body.n;
            for (i = 0; i < b.rules[r].body.n; i++) g->n_alts += b.rules[r].body.v[i] == MMS__G_END;
        }
        g->n_classes = b.classes.n / 8;
        g->text = (char *)MMS_MALLOC(len + 1);
        g->elems = (int32_t *)MMS_MALLOC(sizeof(int32_t) * (size_t)g->n_elems);
        g->alt_first = (int32_t *)MMS_MALLOC(sizeof(int32_t) * ((size_t)g->n_alts + 1));
        g->rule_alt = (int32_t *)MMS_MALLOC(sizeof(int32_t) * ((size_t)g->n_rules + 1));
        g->classes = (uint32_t *)MMS_MALLOC(32 * ((size_t)g->n_classes + 1));
        if (!g->text || !g->elems || !g->alt_first || !g->rule_alt || !g->classes) { mms_grammar_free(g); g = NULL; }
    }
    if (!g) { mms_set_error(MMS_ERR_OOM, "mms_grammar_parse: out of host memory"); mms__gbuild_free(&b); return NULL; }
    memcpy(g->text, text, len);
    g->text[len] = '\0';
    if (b.classes.n) memcpy(g->classes, b.classes.v, 32 * (size_t)g->n_classes);
    g->elems[0] = MMS__G_REF(root);
    g->elems[1] = MMS__G_END;
    e = 2;
    a = 0;
    for (r = 0; r < b.n_rules; r++) {
        const struct mms__i32vec *body = &b.rules[r].body;
        bool start = true;
        g->rule_alt[r] = a;
        for (i = 0; i < body->n; i++) {
            if (start) { g->alt_first[a++] = e; start = false; }
            g->elems[e++] = body->v[i];
            if (body->v[i] == MMS__G_END) start = true;
        }
    }
    g->rule_alt[b.n_rules] = a;
    mms__gbuild_free(&b);
    if (!(g->rule_min = (int32_t *)MMS_MALLOC(sizeof(int32_t) * (size_t)g->n_rules))) {
        mms_grammar_free(g);
        mms_set_error(MMS_ERR_OOM, "mms_grammar_parse: out of host memory");
        return NULL;
    }
    {   /* fewest bytes per rule: a fixed point from "unknown" (every rule is productive, so all end finite) */
        bool changed = true;
        for (r = 0; r < g->n_rules; r++) g->rule_min[r] = MMS__G_UNKNOWN;
        while (changed) {
            changed = false;
            for (r = 0; r < g->n_rules; r++)
                for (a = g->rule_alt[r]; a < g->rule_alt[r + 1]; a++) {
                    int32_t len = mms__g_seq_min(g, g->alt_first[a]);
                    if (len < g->rule_min[r]) { g->rule_min[r] = len; changed = true; }
                }
        }
    }
    return g;
}

/* -- the matcher ---------------------------------------------------------------------------------- */

struct mms__mask_entry {
    int32_t  *ids;
    int       n;
    uint32_t *mask;
};

struct mms_constraint {
    const struct mms_grammar *g;
    const struct mms_vocab   *vocab;
    int32_t                   n_vocab;
    /* stacks: node i is (elem[i], parent[i]); node 0 the empty stack */
    struct mms__i32vec        node_elem, node_parent;
    struct mms__ptrmap        node_ids;          /* (elem + 1) << 32 | parent -> node + 1 */
    struct mms__i32vec        after_off, after_len;   /* per node: its closure after its terminal (-1: not yet) */
    struct mms__i32vec        pool;              /* the closures */
    struct mms__i32vec        mark, cmark;       /* per node: the generation of a step / a closure that last saw it */
    uint32_t                  gen, cgen;
    struct mms__i32vec        work;
    int32_t                   start_off, start_len;
    /* the state */
    struct mms__i32vec        state, next;
    bool                      finished;
    const struct mms__token_trie *trie;          /* the vocabulary's, shared (tokenizer.c) */
    struct mms__i32vec        walk;              /* scratch of a step */
    /* the state sets the walks meet, interned, with their successor by byte (memoised: the walk of
       the next state that meets them again costs one array read per trie node) */
    struct mms__i32vec        set_off, set_len, set_pool;
    struct mms__i32vec        set_text;          /* per set, MMS__TEXT_KINDS each: mms__cs_text_next's answer (-2 not known) */
    int32_t                 **set_next;          /* per set: 256 successors (-2 not known, -1 none), or NULL */
    int                       cap_set_next;
    struct mms__ptrmap        set_ids;           /* fnv of the members | 1, probing by 2 -> set + 1 */
    size_t                    set_next_bytes;
    /* masks by state */
    struct mms__mask_entry    cache[MMS__MASK_CACHE];
    int                       n_cache;
    struct mms__ptrmap        cache_ids;
    uint32_t                 *mask_out;          /* the mask handed out when not cached */
    uint32_t                 *mask_check;        /* MMS_CONSTRAIN_CHECK: the plain walk's mask, or NULL */
    bool                      oom;
};

static void mms__cs_sets_clear(struct mms_constraint *c);

static int32_t mms__cs_node(struct mms_constraint *c, int32_t elem, int32_t parent) {
    uint64_t key = ((uint64_t)(uint32_t)(elem + 1) << 32) | (uint32_t)parent;
    bool found;
    void *v = mms__ptrmap_get(&c->node_ids, key, &found);
    int32_t id;
    if (found) return (int32_t)((intptr_t)v - 1);
    id = c->node_elem.n;
    if (!mms__i32vec_push(&c->node_elem, elem) || !mms__i32vec_push(&c->node_parent, parent) || !mms__i32vec_push(&c->after_off, -1) ||
        !mms__i32vec_push(&c->after_len, 0) || !mms__i32vec_push(&c->mark, 0) || !mms__i32vec_push(&c->cmark, 0) || !mms__ptrmap_put(&c->node_ids, key, (void *)(intptr_t)(id + 1))) {
        c->oom = true;
        return 0;
    }
    return id;
}

/* A fresh generation for marks (0 never: new nodes start at 0). */
static uint32_t mms__cs_generation(struct mms_constraint *c, struct mms__i32vec *mark, uint32_t *gen) {
    MMS__UNUSED(c);
    if (++*gen == 0) {
        memset(mark->v, 0, sizeof(int32_t) * (size_t)mark->n);
        *gen = 1;
    }
    return *gen;
}

/* The stack whose top frame is at element e of a sequence, under parent: a finished sequence is its parent. */
static int32_t mms__cs_push(struct mms_constraint *c, int32_t e, int32_t parent) {
    return c->g->elems[e] == MMS__G_END ? parent : mms__cs_node(c, e, parent);
}

/* Expands node's rule references until every stack has a terminal (or is empty) on top; appends
   those to the pool. Returns where they start; *n: how many. */
static int32_t mms__cs_closure(struct mms_constraint *c, int32_t node, int *n) {
    const int32_t off = c->pool.n;
    const uint32_t gen = mms__cs_generation(c, &c->cmark, &c->cgen);
    c->work.n = 0;
    if (!mms__i32vec_push(&c->work, node)) c->oom = true;
    c->cmark.v[node] = (int32_t)gen;
    while (c->work.n > 0 && !c->oom) {
        const int32_t u = c->work.v[--c->work.n];
        int32_t x, cont, a;
        if (u == 0 || (x = c->g->elems[c->node_elem.v[u]]) >= 0) {
            if (!mms__i32vec_push(&c->pool, u)) c->oom = true;
            continue;
        }
        cont = mms__cs_push(c, c->node_elem.v[u] + 1, c->node_parent.v[u]);
        for (a = c->g->rule_alt[MMS__G_RULE(x)]; a < c->g->rule_alt[MMS__G_RULE(x) + 1] && !c->oom; a++) {
            const int32_t v = mms__cs_push(c, c->g->alt_first[a], cont);
            if (c->oom) break;
            if ((uint32_t)c->cmark.v[v] != gen) {
                c->cmark.v[v] = (int32_t)gen;
                if (!mms__i32vec_push(&c->work, v)) c->oom = true;
            }
        }
    }
    *n = c->pool.n - off;
    return off;
}

/* The closure after node's terminal (memoised per node). */
static void mms__cs_after(struct mms_constraint *c, int32_t node, int32_t *off, int *n) {
    if (c->after_off.v[node] < 0) {
        int32_t next = mms__cs_push(c, c->node_elem.v[node] + 1, c->node_parent.v[node]);
        int k = 0;
        int32_t o = mms__cs_closure(c, next, &k);
        c->after_off.v[node] = o;
        c->after_len.v[node] = k;
    }
    *off = c->after_off.v[node];
    *n = c->after_len.v[node];
}

static bool mms__cs_class_has(const struct mms_constraint *c, int32_t node, unsigned char byte) {
    const uint32_t *cl = c->g->classes + 8 * (size_t)c->g->elems[c->node_elem.v[node]];
    return (cl[byte >> 5] >> (byte & 31)) & 1u;
}

/* The stacks of set (in vec at off, n) after one byte, appended to out, each once. */
static void mms__cs_step(struct mms_constraint *c, const struct mms__i32vec *from, int32_t off, int n, unsigned char byte, struct mms__i32vec *out) {
    const uint32_t gen = mms__cs_generation(c, &c->mark, &c->gen);
    int i, k;
    for (i = 0; i < n && !c->oom; i++) {
        const int32_t u = from->v[off + i];
        int32_t ao;
        int an;
        if (u == 0 || !mms__cs_class_has(c, u, byte)) continue;
        mms__cs_after(c, u, &ao, &an);
        for (k = 0; k < an; k++) {
            const int32_t v = c->pool.v[ao + k];
            if ((uint32_t)c->mark.v[v] != gen) {
                c->mark.v[v] = (int32_t)gen;
                if (!mms__i32vec_push(out, v)) c->oom = true;
            }
        }
    }
}

static int mms__i32_cmp(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

MMS_API void mms_constraint_reset(struct mms_constraint *c) {
    if (!c) return;
    c->state.n = 0;
    if (!mms__i32vec_append(&c->state, c->pool.v + c->start_off, c->start_len)) c->oom = true;
    qsort(c->state.v, (size_t)c->state.n, sizeof *c->state.v, mms__i32_cmp);
    c->finished = false;
}

MMS_API void mms_constraint_free(struct mms_constraint *c) {
    int i;
    if (!c) return;
    mms__i32vec_free(&c->node_elem);
    mms__i32vec_free(&c->node_parent);
    mms__ptrmap_free(&c->node_ids);
    mms__i32vec_free(&c->after_off);
    mms__i32vec_free(&c->after_len);
    mms__i32vec_free(&c->pool);
    mms__i32vec_free(&c->mark);
    mms__i32vec_free(&c->cmark);
    mms__i32vec_free(&c->work);
    mms__i32vec_free(&c->state);
    mms__i32vec_free(&c->next);
    mms__i32vec_free(&c->walk);
    mms__cs_sets_clear(c);
    MMS_FREE(c->set_next);
    for (i = 0; i < c->n_cache; i++) { MMS_FREE(c->cache[i].ids); MMS_FREE(c->cache[i].mask); }
    mms__ptrmap_free(&c->cache_ids);
    MMS_FREE(c->mask_out);
    MMS_FREE(c->mask_check);
    MMS_FREE(c);
}

MMS_API struct mms_constraint *mms_constraint_new(const struct mms_grammar *g, const struct mms_vocab *vocab) {
    struct mms_constraint *c;
    int n = 0;
    if (!g) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_constraint_new: grammar is NULL"); return NULL; }
    if (!(c = (struct mms_constraint *)MMS_MALLOC(sizeof *c))) { mms_set_error(MMS_ERR_OOM, "mms_constraint_new: out of host memory"); return NULL; }
    memset(c, 0, sizeof *c);
    c->g = g;
    c->vocab = vocab;
    /* node 0: the empty stack */
    if (!mms__i32vec_push(&c->node_elem, -1) || !mms__i32vec_push(&c->node_parent, -1) || !mms__i32vec_push(&c->after_off, -1) ||
        !mms__i32vec_push(&c->after_len, 0) || !mms__i32vec_push(&c->mark, 0) || !mms__i32vec_push(&c->cmark, 0))
        c->oom = true;
    if (!c->oom) c->start_off = mms__cs_closure(c, mms__cs_node(c, 0, 0), &n);
    c->start_len = n;
    if (!c->oom && vocab) {
        c->n_vocab = mms_vocab_n_tokens(vocab);
        c->trie = mms__vocab_trie(vocab);
        c->mask_out = (uint32_t *)MMS_MALLOC(sizeof(uint32_t) * ((size_t)c->n_vocab / 32 + 1));
        if (!c->trie || !c->mask_out) c->oom = true;
        if (getenv("MMS_CONSTRAIN_CHECK") && atoi(getenv("MMS_CONSTRAIN_CHECK")) > 0 &&
            !(c->mask_check = (uint32_t *)MMS_MALLOC(sizeof(uint32_t) * ((size_t)c->n_vocab / 32 + 1))))
            c->oom = true;
    }
    if (c->oom) { mms_constraint_free(c); mms_set_error(MMS_ERR_OOM, "mms_constraint_new: out of host memory"); return NULL; }
    mms_constraint_reset(c);
    return c;
}

MMS_API bool mms_constraint_is_complete(const struct mms_constraint *c) {
    return c && (c->finished || (c->state.n > 0 && c->state.v[0] == 0));
}

MMS_API bool mms_constraint_is_finished(const struct mms_constraint *c) { return c && c->finished; }

/* Feeds bytes: false (and the state unchanged) when they cannot continue a valid output. */
static bool mms__cs_feed(struct mms_constraint *c, const char *bytes, size_t len) {
    struct mms__i32vec cur = { NULL, 0, 0 };
    size_t i;
    bool ok = true;
    if (!mms__i32vec_append(&cur, c->state.v, c->state.n)) c->oom = true;
    for (i = 0; i < len && ok && !c->oom; i++) {
        c->next.n = 0;
        mms__cs_step(c, &cur, 0, cur.n, (unsigned char)bytes[i], &c->next);
        if (c->next.n == 0) ok = false;
        cur.n = 0;
        if (!mms__i32vec_append(&cur, c->next.v, c->next.n)) c->oom = true;
    }
    if (ok && !c->oom) {
        qsort(cur.v, (size_t)cur.n, sizeof *cur.v, mms__i32_cmp);
        c->state.n = 0;
        if (!mms__i32vec_append(&c->state, cur.v, cur.n)) c->oom = true;
    }
    mms__i32vec_free(&cur);
    return ok && !c->oom;
}

MMS_API enum mms_status mms_constraint_accept_bytes(struct mms_constraint *c, const char *bytes, size_t len) {
    if (!c || (!bytes && len)) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_constraint_accept_bytes: constraint and bytes are required");
    if (c->finished) return mms_set_error(MMS_ERR_STATE, "mms_constraint_accept_bytes: the output has ended");
    if (!mms__cs_feed(c, bytes, len))
        return c->oom ? mms_set_error(MMS_ERR_OOM, "mms_constraint_accept_bytes: out of host memory")
                      : mms__error_quiet(MMS_ERR_INVALID_ARG, "mms_constraint_accept_bytes: the bytes cannot continue the output");
    return MMS_OK;
}

MMS_API enum mms_status mms_constraint_accept(struct mms_constraint *c, int32_t id) {
    char piece[1024];
    int i, n;
    if (!c || !c->vocab) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_constraint_accept: a constraint made with a vocabulary is required");
    if (id < 0 || id >= c->n_vocab) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_constraint_accept: token %d out of range", (int)id);
    if (c->finished) return mms_set_error(MMS_ERR_STATE, "mms_constraint_accept: the output has ended");
    for (i = 0; i < c->trie->n_eog; i++)
        if (c->trie->eog[i] == id) {
            if (!mms_constraint_is_complete(c)) return mms__error_quiet(MMS_ERR_INVALID_ARG, "mms_constraint_accept: the end token %d before the output is complete", (int)id);
            c->finished = true;
            return MMS_OK;
        }
    n = mms_token_to_piece(c->vocab, id, piece, (int)sizeof piece, false);
    if (n <= 0 || n > (int)sizeof piece) return mms__error_quiet(MMS_ERR_INVALID_ARG, "mms_constraint_accept: token %d stands for no text the output can take", (int)id);
    if (!mms__cs_feed(c, piece, (size_t)n))
        return c->oom ? mms_set_error(MMS_ERR_OOM, "mms_constraint_accept: out of host memory")
                      : mms__error_quiet(MMS_ERR_INVALID_ARG, "mms_constraint_accept: token %d cannot continue the output", (int)id);
    return MMS_OK;
}

/* The fewest bytes that complete the output from a stack. */
static int32_t mms__cs_cost(const struct mms_constraint *c, int32_t node) {
    int32_t cost = 0;
    for (; node != 0; node = c->node_parent.v[node]) cost += mms__g_seq_min(c->g, c->node_elem.v[node]);
    return cost;
}

/* Appends a shortest text of the sequence from e (the lowest byte of each terminal, the shortest alternative of each rule). */
static void mms__cs_shortest_seq(const struct mms_grammar *g, int32_t e, char *buf, int cap, int *len, int depth) {
    for (; g->elems[e] != MMS__G_END && depth < 10000; e++) {
        const int32_t x = g->elems[e];
        if (MMS__G_IS_REF(x)) {
            const int32_t r = MMS__G_RULE(x);
            int32_t a, best = g->rule_alt[r];
            for (a = g->rule_alt[r]; a < g->rule_alt[r + 1]; a++) if (mms__g_seq_min(g, g->alt_first[a]) < mms__g_seq_min(g, g->alt_first[best])) best = a;
            mms__cs_shortest_seq(g, g->alt_first[best], buf, cap, len, depth + 1);
        } else {
            int byte = 0;
            while (byte < 255 && !((g->classes[8 * (size_t)x + (size_t)(byte >> 5)] >> (byte & 31)) & 1u)) byte++;
            if (*len < cap) buf[*len] = (char)byte;
            (*len)++;
        }
    }
}

MMS_API int mms_constraint_shortest_completion(const struct mms_constraint *c, char *buf, int cap) {
    int32_t best = -1, best_cost = 0, node;
    int i, len = 0;
    if (!c || (!buf && cap > 0) || cap < 0) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_constraint_shortest_completion: constraint and buffer are required");
    if (c->finished) return mms_set_error(MMS_ERR_STATE, "mms_constraint_shortest_completion: the output has ended");
    for (i = 0; i < c->state.n; i++) {
        const int32_t cost = mms__cs_cost(c, c->state.v[i]);
        if (best < 0 || cost < best_cost) { best = c->state.v[i]; best_cost = cost; }
    }
    for (node = best; node > 0; node = c->node_parent.v[node]) mms__cs_shortest_seq(c->g, c->node_elem.v[node], buf, cap, &len, 0);
    return len;
}

/* Forgets the interned sets (their memory past MMS__SET_NEXT_MAX; never during a walk). */
static void mms__cs_sets_clear(struct mms_constraint *c) {
    int i;
    for (i = 0; i < c->set_off.n && i < c->cap_set_next; i++) MMS_FREE(c->set_next[i]);
    if (c->set_next) memset(c->set_next, 0, sizeof *c->set_next * (size_t)c->cap_set_next);
    mms__i32vec_free(&c->set_off);
    mms__i32vec_free(&c->set_len);
    mms__i32vec_free(&c->set_pool);
    mms__i32vec_free(&c->set_text);
    mms__ptrmap_free(&c->set_ids);
    c->set_next_bytes = 0;
}

/* The id of a sorted set of stacks (interned on first sight); -1 when memory runs out. */
static int32_t mms__cs_set_intern(struct mms_constraint *c, const int32_t *ids, int n) {
    static const int32_t unknown[MMS__TEXT_KINDS] = { -2, -2 };
    uint64_t h = mms__fnv1a64(ids, sizeof(int32_t) * (size_t)n, MMS__FNV1A64_START) | 1;
    int32_t id;
    bool found;
    void *v;
    for (;; h += 2) {
        v = mms__ptrmap_get(&c->set_ids, h, &found);
        if (!found) break;
        id = (int32_t)((intptr_t)v - 1);
        if (c->set_len.v[id] == n && !memcmp(c->set_pool.v + c->set_off.v[id], ids, sizeof(int32_t) * (size_t)n)) return id;
    }
    id = c->set_off.n;
    if (id == c->cap_set_next) {
        int cap = c->cap_set_next ? c->cap_set_next * 2 : 256;
        int32_t **p = (int32_t **)MMS_REALLOC(c->set_next, sizeof *p * (size_t)cap);
        if (!p) { c->oom = true; return -1; }
        memset(p + c->cap_set_next, 0, sizeof *p * (size_t)(cap - c->cap_set_next));
        c->set_next = p;
        c->cap_set_next = cap;
    }
    if (!mms__i32vec_push(&c->set_off, c->set_pool.n) || !mms__i32vec_push(&c->set_len, n) || !mms__i32vec_append(&c->set_pool, ids, n) ||
        !mms__i32vec_append(&c->set_text, unknown, MMS__TEXT_KINDS) || !mms__ptrmap_put(&c->set_ids, h, (void *)(intptr_t)(id + 1))) {
        c->oom = true;
        return -1;
    }
    return id;
}

static void mms__i32_sort(int32_t *v, int n) {
    int i, j;
    if (n > 32) { qsort(v, (size_t)n, sizeof *v, mms__i32_cmp); return; }
    for (i = 1; i < n; i++) {
        const int32_t x = v[i];
        for (j = i; j > 0 && v[j - 1] > x; j--) v[j] = v[j - 1];
        v[j] = x;
    }
}

/* The set after one byte from set sid: its id, or -1 when no stack takes the byte. table: give
   sid its table of successors (1 KB) if it has none; mms__cs_chars_next does not for the sets
   inside a character, which a walk seldom meets again. */
static int32_t mms__cs_set_step_table(struct mms_constraint *c, int32_t sid, unsigned char byte, bool table) {
    int32_t *next = c->set_next[sid], nid;
    int i, k;
    if (next && next[byte] != -2) return next[byte];
    if (!next && table && c->set_next_bytes < MMS__SET_NEXT_MAX && (next = (int32_t *)MMS_MALLOC(256 * sizeof(int32_t))) != NULL) {
        uint32_t first[8];   /* the bytes some stack can take; the others lead nowhere */
        memset(first, 0, sizeof first);
        for (i = 0; i < c->set_len.v[sid]; i++) {
            const int32_t u = c->set_pool.v[c->set_off.v[sid] + i];
            if (u == 0) continue;
            for (k = 0; k < 8; k++) first[k] |= c->g->classes[8 * (size_t)c->g->elems[c->node_elem.v[u]] + (size_t)k];
        }
        for (k = 0; k < 256; k++) next[k] = (first[k >> 5] >> (k & 31)) & 1u ? -2 : -1;
        c->set_next[sid] = next;
        c->set_next_bytes += 256 * sizeof(int32_t);
        if (next[byte] != -2) return next[byte];
    }
    c->walk.n = 0;
    mms__cs_step(c, &c->set_pool, c->set_off.v[sid], c->set_len.v[sid], byte, &c->walk);
    if (c->walk.n == 0) nid = -1;
    else {
        mms__i32_sort(c->walk.v, c->walk.n);
        nid = mms__cs_set_intern(c, c->walk.v, c->walk.n);
    }
    if (next && !c->oom) next[byte] = nid;
    return nid;
}

static int32_t mms__cs_set_step(struct mms_constraint *c, int32_t sid, unsigned char byte) { return mms__cs_set_step_table(c, sid, byte, true); }

static bool mms__cs_subtree(struct mms_constraint *c, int32_t tnode, int32_t sid, uint32_t *mask);

/* Marks every token under trie node tnode whose bytes can follow set sid; with shortcuts, a
   subtree whose set reaches into free text is taken as mms__cs_subtree says. */
static void mms__cs_walk(struct mms_constraint *c, int32_t tnode, int32_t sid, bool shortcuts, uint32_t *mask) {
    int32_t ch;
    const struct mms__trie_node *node = c->trie->node;
    for (ch = node[tnode].first_child; ch >= 0 && !c->oom; ch = node[ch].next_sibling) {
        const int32_t nid = mms__cs_set_step(c, sid, node[ch].byte);
        int32_t t;
        if (nid < 0) continue;
        for (t = node[ch].first_token; t >= 0; t = c->trie->token_next[t]) mask[t >> 5] |= 1u << (t & 31);
        if (node[ch].first_child >= 0 && !(shortcuts && node[ch].shortcut && mms__cs_subtree(c, ch, nid, mask))) mms__cs_walk(c, ch, nid, shortcuts, mask);
    }
}

/* -- the shortcut through free text --
   Free text (a JSON string) lets most tokens through, and the walk above would visit most of the
   trie for it. Instead: where every character of a kind of text (mms__text_step: plain bytes, or
   plain bytes and whole UTF-8 characters) leads set s to one and the same set, for `reach` sets in
   a row from the state's (a string's characters: back to the same set, or to the next count of a
   bounded string), every token of at most reach such characters steps through those sets without
   a dead end: the walk would mark each, so they are marked from the vocabulary's list, and the
   walk skips the trie subtrees that hold only such tokens. Every other token (a byte off the
   text, a character cut at the token's end, or more characters) is walked as before.
   mms_constraint_allowed compares the result with the walk's under MMS_CONSTRAIN_CHECK. */

/* Does every stack of set s hold all of the bytes of class cl or none of them? Then a step's
   result, which depends only on which stacks take the byte, is the same for each of those bytes. */
static bool mms__cs_uniform(const struct mms_constraint *c, int32_t s, const uint32_t cl[8]) {
    int i, k;
    for (i = 0; i < c->set_len.v[s]; i++) {
        const int32_t u = c->set_pool.v[c->set_off.v[s] + i];
        const uint32_t *has;
        uint32_t all = 0, some = 0;
        if (u == 0) continue;
        has = c->g->classes + 8 * (size_t)c->g->elems[c->node_elem.v[u]];
        for (k = 0; k < 8; k++) { all |= cl[k] & ~has[k]; some |= cl[k] & has[k]; }
        if (some && all) return false;
    }
    return true;
}

/* The one set every plain byte leads s to, or -1 where they lead to different sets or nowhere. */
static int32_t mms__cs_plain_next(struct mms_constraint *c, int32_t s) {
    return mms__cs_uniform(c, s, c->trie->plain_bytes) ? mms__cs_set_step(c, s, 'a') : -1;
}

/* The one set every rest of a character beyond ASCII leads s to from the decoder's state q (0: the
   whole character), or -1 where they lead to different sets or one leads nowhere. The bytes that
   take the decoder to the same state come in runs; a run each stack holds all or none of leads s
   to one set (mms__cs_uniform), so the characters are checked a run at a time. */
static int32_t mms__cs_chars_next(struct mms_constraint *c, int32_t s, int q) {
    int32_t to = -1;
    const unsigned top = q == 0 ? 0xF4 : 0xBF;   /* past these no byte begins or goes on a character */
    unsigned b = q == 0 ? 0xC2 : 0x80, e;
    while (b <= top && !c->oom) {
        const int nq = mms__text_step(MMS__TEXT_UTF8, q, (unsigned char)b);
        uint32_t run[8];
        int32_t nid, r;
        if (nq < 0) { b++; continue; }
        memset(run, 0, sizeof run);
        for (e = b; e <= top && mms__text_step(MMS__TEXT_UTF8, q, (unsigned char)e) == nq; e++) run[e >> 5] |= 1u << (e & 31);
        if (!mms__cs_uniform(c, s, run) || (nid = mms__cs_set_step_table(c, s, (unsigned char)b, q == 0)) < 0) return -1;
        r = nq == 0 ? nid : mms__cs_chars_next(c, nid, nq);
        if (r < 0 || (to >= 0 && r != to)) return -1;
        to = r;
        b = e;
    }
    return to;
}

/* The one set every character of the kind leads s to, or -1 (memoised per set). */
static int32_t mms__cs_text_next(struct mms_constraint *c, int32_t s, int kind) {
    const int at = MMS__TEXT_KINDS * s + kind;
    int32_t to;
    if (c->set_text.v[at] != -2) return c->set_text.v[at];
    to = mms__cs_plain_next(c, s);
    if (to >= 0 && kind == MMS__TEXT_UTF8 && mms__cs_chars_next(c, s, 0) != to) to = -1;
    if (!c->oom) c->set_text.v[at] = to;
    return to;
}

/* How many characters of the kind in a row every string of them can take from set sid
   (0 .. MMS__TEXT_MAX_LEN); *last: the set after them where the reach ends short of the longest
   listed token, else -1. */
static int mms__cs_text_reach(struct mms_constraint *c, int32_t sid, int kind, int32_t *last) {
    int reach;
    *last = -1;
    for (reach = 0; reach < c->trie->text[kind].max_len && !c->oom; reach++) {
        const int32_t to = mms__cs_text_next(c, sid, kind);
        if (to < 0) { *last = sid; return reach; }
        if (to == sid) return MMS__TEXT_MAX_LEN;   /* a loop: it holds from here on */
        sid = to;
    }
    return reach;
}

/* Does no stack of set s take a byte of class cl? */
static bool mms__cs_takes_none(const struct mms_constraint *c, int32_t s, const uint32_t cl[8]) {
    int i, k;
    for (i = 0; i < c->set_len.v[s]; i++) {
        const int32_t u = c->set_pool.v[c->set_off.v[s] + i];
        if (u == 0) continue;
        for (k = 0; k < 8; k++) if (c->g->classes[8 * (size_t)c->g->elems[c->node_elem.v[u]] + (size_t)k] & cl[k]) return false;
    }
    return true;
}

/* The walk from trie node tnode in set sid, skipping the subtrees whose tokens are all listed with
   at most `skip` characters (reach, or every listed token where the set after reach characters
   takes no character of the kind, so the longer ones are refused): a node whose byte lies within
   the first reach characters of the text is walked on here; past them, by the plain walk. */
static void mms__cs_walk_text(struct mms_constraint *c, const struct mms__text_tokens *x, int32_t tnode, int32_t sid, int reach, int skip, uint32_t *mask) {
    int32_t ch;
    const struct mms__token_trie *trie = c->trie;
    const struct mms__trie_node *node = trie->node;
    const bool only_none = skip >= MMS__TEXT_MAX_LEN;   /* every listed subtree skipped: visit only the others */
    for (ch = only_none ? x->first_none[tnode] : node[tnode].first_child; ch >= 0 && !c->oom; ch = only_none ? x->next_none[ch] : node[ch].next_sibling) {
        int32_t nid, t;
        if (x->most[ch] <= skip) continue;   /* every token under it listed, marked or refused (MMS__TEXT_NONE > skip) */
        if ((nid = mms__cs_set_step(c, sid, node[ch].byte)) < 0) continue;
        for (t = node[ch].first_token; t >= 0; t = trie->token_next[t]) mask[t >> 5] |= 1u << (t & 31);
        if (node[ch].first_child < 0) continue;
        if (x->pos[ch] <= reach) mms__cs_walk_text(c, x, ch, nid, reach, skip, mask);
        else if (!node[ch].shortcut || !mms__cs_subtree(c, ch, nid, mask)) mms__cs_walk(c, ch, nid, true, mask);
    }
}

/* The shortcut from inside the trie: at node tnode, where the walk's set is sid and the path so
   far is whole characters of a kind (pos[tnode] of them), the tokens under it listed with at most
   pos[tnode] + reach(sid) characters are marked from the trie-ordered list, and the rest of the
   subtree is walked by mms__cs_walk_text. This takes an object's first key beside named ones:
   the key's first byte leaves the names behind, and the set after it is a free string's. Tried
   only where the trie says it may pay (mms__trie_node.shortcut); false (nothing done) where it
   does not apply. */
static bool mms__cs_subtree(struct mms_constraint *c, int32_t tnode, int32_t sid, uint32_t *mask) {
    const struct mms__token_trie *trie = c->trie;
    const unsigned sc = trie->node[tnode].shortcut;
    int reach[MMS__TEXT_KINDS], kind, k, bound, skip;
    int32_t last[MMS__TEXT_KINDS], i, hi, end;
    const struct mms__text_tokens *x;
    if (!sc) return false;
    for (k = 0; k < MMS__TEXT_KINDS; k++) {
        reach[k] = 0;
        last[k] = -1;
        /* UTF-8's reach is never past plain bytes' (its step must agree with theirs): skip it where plain reaches 0 */
        if (!((sc >> k) & 1u) || (k == MMS__TEXT_UTF8 && (sc & 1u) && reach[MMS__TEXT_PLAIN] == 0)) continue;
        reach[k] = mms__cs_text_reach(c, sid, k, &last[k]);
    }
    kind = reach[MMS__TEXT_UTF8] >= reach[MMS__TEXT_PLAIN] ? MMS__TEXT_UTF8 : MMS__TEXT_PLAIN;
    if (reach[kind] == 0 || c->oom) return false;
    x = &trie->text[kind];
    end = trie->end[tnode];
    bound = x->pos[tnode] + reach[kind];
    if (bound > MMS__TEXT_MAX_LEN) bound = MMS__TEXT_MAX_LEN;
    for (i = x->first[tnode], hi = x->first[end]; i < hi; i++)
        if (x->order_len[i] <= bound) mask[x->order[i] >> 5] |= 1u << (x->order[i] & 31);
    skip = last[kind] >= 0 && mms__cs_takes_none(c, last[kind], x->starts) ? MMS__TEXT_MAX_LEN : bound;
    mms__cs_walk_text(c, x, tnode, sid, bound, skip, mask);
    return true;
}

#define MMS__PART_MAX 64   /* stacks in a set for its parts to be tried */

/* The furthest reach of a part of set sid: its stacks under one parent (a mask is the union of
   its stacks' masks, so the text tokens within a part's reach are allowed by the whole set); the
   text `.*` after a pattern's match reaches free text where the set, still matching the pattern
   again, does not. 0 where no part reaches; *kind: the part's kind of text. */
static int mms__cs_part_reach(struct mms_constraint *c, int32_t sid, int *kind) {
    int32_t ids[MMS__PART_MAX], part[MMS__PART_MAX], last;
    const int n = c->set_len.v[sid];
    int best = 0, i, j, k, m, r = 0;
    if (n < 2 || n > MMS__PART_MAX) return 0;
    memcpy(ids, c->set_pool.v + c->set_off.v[sid], sizeof(int32_t) * (size_t)n);   /* interning moves the pool */
    for (i = 0; i < n && !c->oom; i++) {
        bool seen = false;
        if (ids[i] == 0) continue;
        for (j = 0; j < i && !seen; j++) seen = ids[j] != 0 && c->node_parent.v[ids[j]] == c->node_parent.v[ids[i]];
        if (seen) continue;
        for (j = i, m = 0; j < n; j++) if (ids[j] != 0 && c->node_parent.v[ids[j]] == c->node_parent.v[ids[i]]) part[m++] = ids[j];
        if (m == n - (ids[0] == 0)) return 0;   /* one part: the set itself */
        {
            const int32_t pid = mms__cs_set_intern(c, part, m);
            if (pid < 0) return 0;
            for (k = 0; k < MMS__TEXT_KINDS; k++) {
                if (k == MMS__TEXT_UTF8 && r == 0) break;   /* UTF-8 reaches no further than plain bytes */
                r = mms__cs_text_reach(c, pid, k, &last);
                if (r > best || (r == best && r > 0)) { best = r; *kind = k; }
            }
        }
    }
    return c->oom ? 0 : best;
}

/* The mask of set sid: the text tokens within reach from the vocabulary's list, the rest walked;
   the kind of text that reaches further (UTF-8 where it reaches as far as plain bytes), of the
   set or, where that reaches further and the set refuses nothing unwalked, of a part. */
static void mms__cs_mask(struct mms_constraint *c, int32_t sid, uint32_t *mask) {
    int32_t last_utf8, last_plain, k;
    const int reach_utf8 = mms__cs_text_reach(c, sid, MMS__TEXT_UTF8, &last_utf8), reach_plain = mms__cs_text_reach(c, sid, MMS__TEXT_PLAIN, &last_plain);
    int kind = reach_utf8 >= reach_plain ? MMS__TEXT_UTF8 : MMS__TEXT_PLAIN, reach = kind == MMS__TEXT_UTF8 ? reach_utf8 : reach_plain, skip, part_kind = kind, part;
    const int32_t last = kind == MMS__TEXT_UTF8 ? last_utf8 : last_plain;
    const struct mms__text_tokens *x = &c->trie->text[kind];
    if (c->oom) return;
    skip = last >= 0 && mms__cs_takes_none(c, last, x->starts) ? MMS__TEXT_MAX_LEN : reach;
    if (skip < MMS__TEXT_MAX_LEN && reach < x->max_len && (part = mms__cs_part_reach(c, sid, &part_kind)) > reach) {
        kind = part_kind;
        x = &c->trie->text[kind];
        reach = skip = part < MMS__TEXT_MAX_LEN ? part : MMS__TEXT_MAX_LEN;
    }
    if (c->oom) return;
    if (reach >= x->max_len) memcpy(mask, x->all, sizeof(uint32_t) * ((size_t)c->n_vocab / 32 + 1));
    else
        for (k = 0; k < x->len_end[reach]; k++) mask[x->by_len[k] >> 5] |= 1u << (x->by_len[k] & 31);
    mms__cs_walk_text(c, x, 0, sid, reach, skip, mask);
}

/* mask and check differ: the first token they disagree on, else -1. */
static int32_t mms__mask_diff(const uint32_t *mask, const uint32_t *check, size_t words) {
    size_t w;
    for (w = 0; w < words; w++)
        if (mask[w] != check[w]) {
            const uint32_t d = mask[w] ^ check[w];
            int b = 0;
            while (!((d >> b) & 1u)) b++;
            return (int32_t)(w * 32 + (size_t)b);
        }
    return -1;
}

/* The end tokens, where the output is complete. */
static void mms__cs_mark_end(const struct mms_constraint *c, uint32_t *mask) {
    int i;
    if (mms_constraint_is_complete(c))
        for (i = 0; i < c->trie->n_eog; i++) mask[c->trie->eog[i] >> 5] |= 1u << (c->trie->eog[i] & 31);
}

/* mask, or under MMS_CONSTRAIN_CHECK NULL (with an error) where it differs from the plain walk's. */
static const uint32_t *mms__cs_checked(struct mms_constraint *c, const uint32_t *mask) {
    const size_t words = (size_t)c->n_vocab / 32 + 1;
    int32_t diff;
    if (!c->mask_check) return mask;
    memset(c->mask_check, 0, sizeof(uint32_t) * words);
    if (c->set_next_bytes >= MMS__SET_NEXT_MAX) mms__cs_sets_clear(c);
    {
        const int32_t sid = mms__cs_set_intern(c, c->state.v, c->state.n);
        if (!c->oom) mms__cs_walk(c, 0, sid, false, c->mask_check);
    }
    mms__cs_mark_end(c, c->mask_check);
    if (c->oom) { mms_set_error(MMS_ERR_OOM, "mms_constraint_allowed: out of host memory"); return NULL; }
    if ((diff = mms__mask_diff(mask, c->mask_check, words)) >= 0) {
        mms_set_error(MMS_ERR_STATE, "mms_constraint_allowed: MMS_CONSTRAIN_CHECK: token %d is %s by the mask but %s by the plain walk", (int)diff,
                      (mask[diff >> 5] >> (diff & 31)) & 1u ? "allowed" : "refused", (c->mask_check[diff >> 5] >> (diff & 31)) & 1u ? "allowed" : "refused");
        return NULL;
    }
    return mask;
}

MMS_API const uint32_t *mms_constraint_allowed(struct mms_constraint *c) {
    const size_t words = c ? (size_t)c->n_vocab / 32 + 1 : 0;
    uint64_t h;
    uint32_t *mask;
    void *v;
    bool found;
    int i;
    if (!c || !c->vocab) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_constraint_allowed: a constraint made with a vocabulary is required"); return NULL; }
    if (c->finished) { mms_set_error(MMS_ERR_STATE, "mms_constraint_allowed: the output has ended"); return NULL; }
    h = mms__fnv1a64(c->state.v, sizeof(int32_t) * (size_t)c->state.n, MMS__FNV1A64_START) | 1;
    v = mms__ptrmap_get(&c->cache_ids, h, &found);
    if (found) {
        const struct mms__mask_entry *e = &c->cache[(intptr_t)v - 1];
        if (e->n == c->state.n && !memcmp(e->ids, c->state.v, sizeof(int32_t) * (size_t)e->n)) return mms__cs_checked(c, e->mask);
    }
    if (c->n_cache == MMS__MASK_CACHE) {   /* full: start over (the states of one output rarely come back after this many) */
        for (i = 0; i < c->n_cache; i++) { MMS_FREE(c->cache[i].ids); MMS_FREE(c->cache[i].mask); }
        c->n_cache = 0;
        mms__ptrmap_free(&c->cache_ids);
    }
    mask = c->mask_out;
    if (!found) {
        struct mms__mask_entry *e = &c->cache[c->n_cache];
        e->ids = (int32_t *)MMS_MALLOC(sizeof(int32_t) * ((size_t)c->state.n + 1));
        e->mask = (uint32_t *)MMS_MALLOC(sizeof(uint32_t) * words);
        if (e->ids && e->mask && mms__ptrmap_put(&c->cache_ids, h, (void *)(intptr_t)(c->n_cache + 1))) {
            memcpy(e->ids, c->state.v, sizeof(int32_t) * (size_t)c->state.n);
            e->n = c->state.n;
            mask = e->mask;
            c->n_cache++;
        } else {
            MMS_FREE(e->ids);
            MMS_FREE(e->mask);
        }
    }
    memset(mask, 0, sizeof(uint32_t) * words);
    if (c->set_next_bytes >= MMS__SET_NEXT_MAX) mms__cs_sets_clear(c);
    {
        const int32_t sid = mms__cs_set_intern(c, c->state.v, c->state.n);
        if (!c->oom) mms__cs_mask(c, sid, mask);
    }
    mms__cs_mark_end(c, mask);
    if (c->oom) { mms_set_error(MMS_ERR_OOM, "mms_constraint_allowed: out of host memory"); return NULL; }
    return mms__cs_checked(c, mask);
}

/* -- grammars made for the caller ------------------------------------------------------------------ */

struct mms__strbuf {
    char  *s;
    size_t n, cap;
    bool   oom;
};

/* Room for n more bytes and a NUL: where they go, or NULL (oom set). */
static char *mms__sb_room(struct mms__strbuf *b, size_t n) {
    if (b->oom) return NULL;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        char *p;
        while (cap < b->n + n + 1) cap *= 2;
        if (!(p = (char *)MMS_REALLOC(b->s, cap))) { b->oom = true; return NULL; }
        b->s = p;
        b->cap = cap;
    }
    return b->s + b->n;
}

static void mms__sb_put(struct mms__strbuf *b, const char *s, size_t n) {
    char *at = mms__sb_room(b, n);
    if (!at) return;
    memcpy(at, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}
static void mms__sb_puts(struct mms__strbuf *b, const char *s) { mms__sb_put(b, s, strlen(s)); }
static void mms__sb_printf(struct mms__strbuf *b, const char *fmt, ...) MMS_PRINTF(2, 3);
static void mms__sb_printf(struct mms__strbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) mms__sb_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* s as a literal of the notation: "..." with \" and \\ escaped and control bytes as \xHH. */
static void mms__sb_literal(struct mms__strbuf *b, const char *s, size_t n) {
    size_t i;
    mms__sb_put(b, "\"", 1);
    for (i = 0; i < n; i++) {
        const unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') { mms__sb_put(b, "\\", 1); mms__sb_put(b, s + i, 1); }
        else if (ch < 0x20 || ch == 0x7F) mms__sb_printf(b, "\\x%02X", ch);
        else mms__sb_put(b, s + i, 1);
    }
    mms__sb_put(b, "\"", 1);
}

MMS_API struct mms_grammar *mms_grammar_choice(const char *const *choices, int n) {
    struct mms__strbuf b = { NULL, 0, 0, false };
    struct mms_grammar *g;
    int i;
    if (!choices || n < 1) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_grammar_choice: at least one choice is required"); return NULL; }
    mms__sb_puts(&b, "root ::= ");
    for (i = 0; i < n; i++) {
        if (!choices[i] || !choices[i][0]) { MMS_FREE(b.s); mms_set_error(MMS_ERR_INVALID_ARG, "mms_grammar_choice: choice %d is NULL or empty", i); return NULL; }
        if (i) mms__sb_puts(&b, " | ");
        mms__sb_literal(&b, choices[i], strlen(choices[i]));
    }
    if (b.oom) { MMS_FREE(b.s); mms_set_error(MMS_ERR_OOM, "mms_grammar_choice: out of host memory"); return NULL; }
    g = mms_grammar_parse(b.s, b.n);
    MMS_FREE(b.s);
    return g;
}
