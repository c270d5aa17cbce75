/* >>text-json-schema ==============================================================================
   JSON Schema (2020-12) compiled to the grammar notation of text-constrain, for compact JSON.
   A schema is compiled as a conjunction: the list of schema objects that apply together (allOf's
   members and $ref's targets are flattened into it), so "properties beside anyOf" and "$ref with
   siblings" mean what the standard says; each list becomes one rule, memoised by its members, which
   is also what makes recursive $ref work. A keyword is compiled (mms__js_rule and the functions
   per type), refused with an error naming it and its path (mms__js_unsupported), or else an
   annotation or unknown, and ignored as the standard says. */

/* Keywords a validator checks that this compiler does not express: an error, never dropped. To
   support one, compile it in mms__js_rule and take it off this list. */
static const char *const mms__js_unsupported[] = {
    "not", "if", "then", "else", "dependentRequired", "dependentSchemas", "dependencies", "patternProperties", "propertyNames",
    "minProperties", "maxProperties", "unevaluatedProperties", "unevaluatedItems", "contains", "minContains", "maxContains",
    "multipleOf", "$dynamicRef", "$recursiveRef", "$dynamicAnchor", "$recursiveAnchor", "additionalItems", NULL
};

#define MMS__JS_NULL 1
#define MMS__JS_BOOL 2
#define MMS__JS_OBJ  4
#define MMS__JS_ARR  8
#define MMS__JS_NUM  16   /* every number; "number" sets INT too */
#define MMS__JS_INT  32
#define MMS__JS_STR  64
#define MMS__JS_ALL  127
#define MMS__JS_MAX_MEMBERS 32
#define MMS__JS_MAX_RULES 20000

struct mms__js_member {
    int64_t id;
    bool    skip_anyof;   /* its anyOf/oneOf is being distributed by the caller */
    char    path[192];
};

struct mms__js_memo {
    int64_t ids[MMS__JS_MAX_MEMBERS];
    int     n;
    int     rule;         /* -1: the conjunction admits nothing */
};

struct mms__js {
    const struct mms_json *j;
    struct mms__strbuf     out;
    struct mms__js_memo   *memo;
    int                    n_memo, cap_memo, n_rules;
    char                   err[400];
};

static void mms__js_fail(struct mms__js *c, const char *path, const char *keyword, const char *fmt, ...) MMS_PRINTF(4, 5);
static void mms__js_fail(struct mms__js *c, const char *path, const char *keyword, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    if (c->err[0]) return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(c->err, sizeof c->err, "%s at %s: %s", keyword, path, msg);
}

static bool mms__js_in(const char *const *list, const char *s) {
    for (; *list; list++) if (!strcmp(*list, s)) return true;
    return false;
}

/* A path one step further (JSON Pointer escapes for the key). */
static void mms__js_path(char *out, size_t cap, const char *path, const char *key) {
    size_t n;
    snprintf(out, cap, "%s/", path);
    n = strlen(out);
    for (; *key && n + 3 < cap; key++) {
        if (*key == '~') { out[n++] = '~'; out[n++] = '0'; }
        else if (*key == '/') { out[n++] = '~'; out[n++] = '1'; }
        else out[n++] = *key;
    }
    out[n] = '\0';
}

static void mms__js_path_index(char *out, size_t cap, const char *path, int64_t i) {
    char num[24];
    snprintf(num, sizeof num, "%lld", (long long)i);
    mms__js_path(out, cap, path, num);
}

/* -- writing JSON values and keys as the notation's literals -- */

/* A string as Python's json.dumps(ensure_ascii=False) writes it, straight into b. */
static void mms__js_write_string(struct mms__strbuf *b, const char *s, size_t len) {
    const int64_t n = mms_json_write_string(s, len, NULL, 0);
    char *at = n >= 0 ? mms__sb_room(b, (size_t)n) : NULL;
    if (at) b->n += (size_t)mms_json_write_string(s, len, at, (size_t)n + 1);
    else b->oom = true;
}

/* A property's key and its colon, as a literal of the notation. */
static void mms__js_key_literal(struct mms__strbuf *b, const char *key) {
    struct mms__strbuf t = { NULL, 0, 0, false };
    mms__js_write_string(&t, key, strlen(key));
    mms__sb_put(&t, ":", 1);
    if (t.oom) b->oom = true;
    else mms__sb_literal(b, t.s, t.n);
    MMS_FREE(t.s);
}

/* The compact JSON text of v, straight into b. */
static void mms__js_write_value(struct mms__strbuf *b, const struct mms_json *j, int64_t v) {
    const int64_t n = mms_json_write(j, v, NULL, 0);
    char *at = n >= 0 ? mms__sb_room(b, (size_t)n) : NULL;
    if (at) b->n += (size_t)mms_json_write(j, v, at, (size_t)n + 1);
    else b->oom = true;
}

/* The types a schema's "type" keyword allows, as MMS__JS_ bits (MMS__JS_ALL without one); *bad names
   a type that is none of the seven. */
static int mms__js_type_bits(const struct mms_json *j, int64_t schema, const char **bad) {
    const int64_t v = mms_json_get(j, schema, "type");
    const bool list = v >= 0 && mms_json_type(j, v) == MMS_JSON_ARRAY;
    int64_t k, len;
    int bits = 0;
    *bad = NULL;
    if (v < 0) return MMS__JS_ALL;
    for (k = 0, len = list ? mms_json_len(j, v) : 1; k < len; k++) {
        size_t tl;
        const char *t = mms_json_str(j, list ? mms_json_at(j, v, k) : v, &tl);
        const int bit = !t ? 0 : !strcmp(t, "null") ? MMS__JS_NULL : !strcmp(t, "boolean") ? MMS__JS_BOOL : !strcmp(t, "object") ? MMS__JS_OBJ
                      : !strcmp(t, "array") ? MMS__JS_ARR : !strcmp(t, "number") ? MMS__JS_NUM | MMS__JS_INT : !strcmp(t, "integer") ? MMS__JS_INT
                      : !strcmp(t, "string") ? MMS__JS_STR : 0;
        if (!bit) { *bad = t ? t : "(not a string)"; return 0; }
        bits |= bit;
    }
    return bits;
}

/* Whether the values two schemas' const/enum allow share none. Only strings, booleans and null are
   compared (numbers such as 1 and 1.0 are equal in JSON Schema though their text differs): any other
   value, or a schema without const/enum, proves nothing. */
static bool mms__js_values_disjoint(const struct mms_json *j, int64_t a, int64_t b) {
    const int64_t ea = mms_json_get(j, a, "enum"), eb = mms_json_get(j, b, "enum");
    const int64_t la = ea >= 0 ? ea : mms_json_get(j, a, "const"), lb = eb >= 0 ? eb : mms_json_get(j, b, "const");
    int64_t x, y, nx, ny;
    if (la < 0 || lb < 0 || (ea >= 0 && mms_json_type(j, ea) != MMS_JSON_ARRAY) || (eb >= 0 && mms_json_type(j, eb) != MMS_JSON_ARRAY)) return false;
    for (x = 0, nx = ea >= 0 ? mms_json_len(j, ea) : 1; x < nx; x++)
        for (y = 0, ny = eb >= 0 ? mms_json_len(j, eb) : 1; y < ny; y++) {
            const int64_t u = ea >= 0 ? mms_json_at(j, ea, x) : la, w = eb >= 0 ? mms_json_at(j, eb, y) : lb;
            const enum mms_json_type tu = mms_json_type(j, u), tw = mms_json_type(j, w);
            size_t nu = 0, nw = 0;
            const char *su, *sw;
            if (tu != MMS_JSON_STRING && tu != MMS_JSON_TRUE && tu != MMS_JSON_FALSE && tu != MMS_JSON_NULL) return false;
            if (tw != MMS_JSON_STRING && tw != MMS_JSON_TRUE && tw != MMS_JSON_FALSE && tw != MMS_JSON_NULL) return false;
            if (tu != tw) continue;
            if (tu != MMS_JSON_STRING) return false;
            su = mms_json_str(j, u, &nu);
            sw = mms_json_str(j, w, &nw);
            if (nu == nw && !memcmp(su, sw, nu)) return false;
        }
    return true;
}

/* Whether no value can satisfy both schemas, as their own keywords show (a $ref or a conjunction is
   not looked into: it proves nothing): types that do not meet, const/enum values that do not meet,
   or objects only, with a property both require whose const/enum values do not meet. */
static bool mms__js_disjoint(const struct mms_json *j, int64_t a, int64_t b) {
    const char *bad;
    const int common = mms__js_type_bits(j, a, &bad) & mms__js_type_bits(j, b, &bad);
    const int64_t ra = mms_json_get(j, a, "required"), rb = mms_json_get(j, b, "required");
    const int64_t pa = mms_json_get(j, a, "properties"), pb = mms_json_get(j, b, "properties");
    int64_t k, len;
    if (mms_json_type(j, a) != MMS_JSON_OBJECT || mms_json_type(j, b) != MMS_JSON_OBJECT) return false;
    if (common == 0 || mms__js_values_disjoint(j, a, b)) return true;
    if (common != MMS__JS_OBJ || ra < 0 || rb < 0 || pa < 0 || pb < 0 || mms_json_type(j, ra) != MMS_JSON_ARRAY) return false;
    for (k = 0, len = mms_json_len(j, ra); k < len; k++) {
        size_t kn;
        const char *key = mms_json_str(j, mms_json_at(j, ra, k), &kn);
        int64_t r, rn, va, vb;
        bool in_b = false;
        if (!key || mms_json_type(j, rb) != MMS_JSON_ARRAY || mms_json_type(j, pa) != MMS_JSON_OBJECT || mms_json_type(j, pb) != MMS_JSON_OBJECT) continue;
        for (r = 0, rn = mms_json_len(j, rb); r < rn && !in_b; r++) {
            size_t n2;
            const char *k2 = mms_json_str(j, mms_json_at(j, rb, r), &n2);
            in_b = k2 && n2 == kn && !memcmp(k2, key, kn);
        }
        if (!in_b || memchr(key, '\0', kn)) continue;
        va = mms_json_get(j, pa, key);
        vb = mms_json_get(j, pb, key);
        if (va >= 0 && vb >= 0 && mms_json_type(j, va) == MMS_JSON_OBJECT && mms_json_type(j, vb) == MMS_JSON_OBJECT && mms__js_values_disjoint(j, va, vb)) return true;
    }
    return false;
}

/* -- the base rules every compiled schema may use -- */

static const char mms__js_base[] =
    "value ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
    "object ::= \"{\" (string \":\" value (\",\" string \":\" value)*)? \"}\"\n"
    "array ::= \"[\" (value (\",\" value)*)? \"]\"\n"
    "string ::= \"\\\"\" char* \"\\\"\"\n"
    "# one character of a string: unescaped, an escape, or a surrogate pair (a lone surrogate is no character)\n"
    "char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" ([0-9a-cA-CefEF] hex hex hex | [dD] [0-7] hex hex))\n"
    "       | \"\\\\u\" [dD] [89abAB] hex hex \"\\\\u\" [dD] [c-fC-F] hex hex\n"
    "hex ::= [0-9a-fA-F]\n"
    "integer ::= \"-\"? (\"0\" | [1-9] [0-9]*)\n"
    "number ::= integer (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)?\n"
    "# an additional property's key: unescaped characters only\n"
    "keychar ::= [^\"\\\\\\x00-\\x1F]\n"
    "d2 ::= [0-9] [0-9]\n"
    "year ::= \"000\" [1-9] | \"00\" [1-9] [0-9] | \"0\" [1-9] [0-9] [0-9] | [1-9] [0-9] [0-9] [0-9]\n"
    "leapyear ::= [0-9] [0-9] (\"0\" [48] | [2468] [048] | [13579] [26]) | (\"0\" [48] | [2468] [048] | [13579] [26]) \"00\"\n"
    "date ::= year \"-\" (\"0\" [13578] | \"1\" [02]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01])\n"
    "       | year \"-\" (\"0\" [469] | \"11\") \"-\" (\"0\" [1-9] | [12] [0-9] | \"30\")\n"
    "       | year \"-02-\" (\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]) | leapyear \"-02-29\"\n"
    "time ::= ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]+)? (\"Z\" | [-+] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])\n"
    "uuid ::= hex{8} \"-\" hex{4} \"-\" hex{4} \"-\" hex{4} \"-\" hex{12}\n"
    "email ::= [A-Za-z0-9_+-] ([A-Za-z0-9_+.-]* [A-Za-z0-9_+-])? \"@\" [A-Za-z0-9] ([A-Za-z0-9-]* [A-Za-z0-9])? (\".\" [A-Za-z0-9] ([A-Za-z0-9-]* [A-Za-z0-9])?)+\n";

/* -- numbers -- */

/* The decimal digits of non-negative integers in [lo, hi] (hi < 0: no bound), no leading zeros, as
   one parenthesised expression. */
static void mms__js_fixed_range(struct mms__strbuf *b, const char *lo, const char *hi, int n) {
    int k = 0, i;
    bool lo_zero = true, hi_nine = true;
    if (n == 0) { mms__sb_puts(b, "\"\""); return; }
    while (k < n && lo[k] == hi[k]) k++;
    if (k == n) { mms__sb_literal(b, lo, (size_t)n); return; }
    mms__sb_puts(b, "(");
    if (k) { mms__sb_literal(b, lo, (size_t)k); mms__sb_puts(b, " "); }
    for (i = k + 1; i < n; i++) { lo_zero = lo_zero && lo[i] == '0'; hi_nine = hi_nine && hi[i] == '9'; }
    if (lo_zero && hi_nine) {
        mms__sb_printf(b, "[%c-%c]", lo[k], hi[k]);
        if (n - k - 1) mms__sb_printf(b, " [0-9]{%d}", n - k - 1);
    } else {
        char nines[24], zeros[24];
        memset(nines, '9', sizeof nines);
        memset(zeros, '0', sizeof zeros);
        mms__sb_printf(b, "(\"%c\" ", lo[k]);
        mms__js_fixed_range(b, lo + k + 1, nines, n - k - 1);
        if (lo[k] + 1 <= hi[k] - 1) {
            mms__sb_printf(b, " | [%c-%c]", lo[k] + 1, hi[k] - 1);
            if (n - k - 1) mms__sb_printf(b, " [0-9]{%d}", n - k - 1);
        }
        mms__sb_printf(b, " | \"%c\" ", hi[k]);
        mms__js_fixed_range(b, zeros, hi + k + 1, n - k - 1);
        mms__sb_puts(b, ")");
    }
    mms__sb_puts(b, ")");
}

static void mms__js_uint_range(struct mms__strbuf *b, int64_t lo, int64_t hi) {
    char slo[24], shi[24], a[24], z[24];
    int nlo, nhi, len, first = 1;
    nlo = snprintf(slo, sizeof slo, "%lld", (long long)lo);
    nhi = hi < 0 ? nlo : snprintf(shi, sizeof shi, "%lld", (long long)hi);
    mms__sb_puts(b, "(");
    for (len = nlo; len <= nhi; len++) {
        if (len == nlo) memcpy(a, slo, (size_t)len + 1);
        else { memset(a, '0', (size_t)len); a[0] = '1'; a[len] = '\0'; }
        if (hi >= 0 && len == nhi) memcpy(z, shi, (size_t)len + 1);
        else { memset(z, '9', (size_t)len); z[len] = '\0'; }
        if (!first) mms__sb_puts(b, " | ");
        first = 0;
        mms__js_fixed_range(b, a, z, len);
    }
    if (hi < 0) mms__sb_printf(b, " | [1-9] [0-9]{%d} [0-9]*", nlo);
    mms__sb_puts(b, ")");
}

/* Integers in [lo, hi]; has_lo/has_hi false: no bound. */
static void mms__js_int_range(struct mms__strbuf *b, bool has_lo, int64_t lo, bool has_hi, int64_t hi) {
    bool any = false;
    mms__sb_puts(b, "(");
    if (!has_lo || lo < 0) {   /* the negative ones: "-" and magnitudes in [max(1, -hi), -lo] */
        mms__sb_puts(b, "\"-\" ");
        mms__js_uint_range(b, has_hi && hi < -1 ? -hi : 1, has_lo ? -lo : -1);
        any = true;
    }
    if (!has_hi || hi >= 0) {
        if (any) mms__sb_puts(b, " | ");
        mms__js_uint_range(b, has_lo && lo > 0 ? lo : 0, has_hi ? hi : -1);
    }
    mms__sb_puts(b, ")");
}

/* Non-negative numbers without an exponent in [m, M] (M < 0: no bound), each end exclusive or not. */
static void mms__js_nonneg_number(struct mms__strbuf *b, int64_t m, bool mex, int64_t M, bool Mex) {
    const char *frac = "(\".\" [0-9]+)?";
    bool any = false;
    mms__sb_puts(b, "(");
    if (mex) {   /* m itself only with a fraction that is not all zeros */
        if (M < 0 || m < M) { mms__sb_printf(b, "\"%lld.\" [0-9]* [1-9] [0-9]*", (long long)m); any = true; }
        m++;
    }
    if (M < 0 || m <= M - 1) {
        if (any) mms__sb_puts(b, " | ");
        mms__js_uint_range(b, m, M < 0 ? -1 : M - 1);
        mms__sb_printf(b, " %s", frac);
        any = true;
    }
    if (M >= 0 && !Mex && m <= M) {
        if (any) mms__sb_puts(b, " | ");
        mms__sb_printf(b, "\"%lld\" (\".\" \"0\"+)?", (long long)M);
        any = true;
    }
    if (!any) mms__sb_puts(b, "\"\"");
    mms__sb_puts(b, ")");
}

/* -- regular expressions (pattern) -- */

struct mms__re {
    struct mms__js *c;
    const char     *s, *end, *path, *start;
    struct mms__strbuf *b;
};

/* One code point as the JSON text of a string holds it, as a literal (canonical escapes). */
static void mms__re_char(struct mms__strbuf *b, uint32_t cp) {
    unsigned char enc[4];
    char tmp[16];
    int n;
    if (cp == '"') { mms__sb_puts(b, "\"\\\\\\\"\""); return; }
    if (cp == '\\') { mms__sb_puts(b, "\"\\\\\\\\\""); return; }
    if (cp < 0x20) {
        const char *e = cp == '\n' ? "\\\\n" : cp == '\r' ? "\\\\r" : cp == '\t' ? "\\\\t" : cp == '\b' ? "\\\\b" : cp == '\f' ? "\\\\f" : NULL;
        if (e) mms__sb_printf(b, "\"%s\"", e);
        else mms__sb_printf(b, "\"\\\\u%04x\"", (unsigned)cp);
        return;
    }
    n = (int)mms__tok_put_utf8(cp, enc);
    memcpy(tmp, enc, (size_t)n);
    mms__sb_literal(b, tmp, (size_t)n);
}

/* A set of code points (sorted, merged pairs) as one JSON string character: the plain ones as a
   class, '"', '\' and control characters as their escapes. */
static void mms__re_set(struct mms__strbuf *b, const uint32_t *r, int n) {
    int i, alts = 0;
    uint32_t c;
    struct mms__strbuf cls = { NULL, 0, 0, false };
    for (i = 0; i < n; i++) {
        uint32_t lo = r[2 * i], hi = r[2 * i + 1];
        for (c = lo; c <= hi && c < 0x20; c++) { mms__sb_puts(b, alts++ ? " | " : "("); mms__re_char(b, c); }
        if (lo <= '"' && '"' <= hi) { mms__sb_puts(b, alts++ ? " | " : "("); mms__re_char(b, '"'); }
        if (lo <= '\\' && '\\' <= hi) { mms__sb_puts(b, alts++ ? " | " : "("); mms__re_char(b, '\\'); }
        if (lo < 0x20) lo = 0x20;
        while (lo <= hi) {   /* the plain part, split around '"' and '\' */
            uint32_t stop = hi;
            if (lo <= '"' && '"' <= stop) stop = lo == '"' ? '"' : '"' - 1;
            if (lo <= '\\' && '\\' <= stop) stop = lo == '\\' ? '\\' : '\\' - 1;
            if (lo != '"' && lo != '\\') mms__sb_printf(&cls, "\\U%08X-\\U%08X", (unsigned)lo, (unsigned)stop);
            if (stop == 0xFFFFFFFFu) break;
            lo = stop + 1;
        }
    }
    if (cls.n) { mms__sb_puts(b, alts++ ? " | [" : "(["); mms__sb_put(b, cls.s, cls.n); mms__sb_puts(b, "]"); }
    if (cls.oom) b->oom = true;
    MMS_FREE(cls.s);
    mms__sb_puts(b, alts ? ")" : "[^\\x00-\\U0010FFFF]");   /* an empty set: matches nothing, caught as unproductive */
}

/* Adds the ranges of a class escape (\d \w \s, negated: only within ASCII, where Python's Unicode
   classes agree with ours) to r. */
static bool mms__re_class_escape(char e, struct mms__i32vec *r) {
    static const char *const sets[3] = { "09", "09AZaz__", "\t\r  \x0b\x0c" };
    const char *set = e == 'd' || e == 'D' ? sets[0] : e == 'w' || e == 'W' ? sets[1] : e == 's' || e == 'S' ? sets[2] : NULL;
    int i;
    if (!set) return false;
    if (e >= 'a') {
        for (i = 0; set[i]; i += 2) { mms__i32vec_push(r, set[i]); mms__i32vec_push(r, set[i + 1]); }
    } else {
        uint32_t c;
        for (c = 0; c < 0x80; c++) {
            bool in = false;
            for (i = 0; set[i]; i += 2) in = in || ((uint32_t)(unsigned char)set[i] <= c && c <= (uint32_t)(unsigned char)set[i + 1]);
            if (!in) { mms__i32vec_push(r, (int32_t)c); mms__i32vec_push(r, (int32_t)c); }
        }
    }
    return true;
}

static void mms__re_fail(struct mms__re *re, const char *what) {
    mms__js_fail(re->c, re->path, "pattern", "%s (at offset %d of the expression)", what, (int)(re->s - re->start));
}

/* The next code point of the expression (UTF-8). */
static uint32_t mms__re_next(struct mms__re *re) {
    const unsigned char *p = (const unsigned char *)re->s;
    uint32_t cp = *p;
    int n = cp < 0x80 ? 1 : cp < 0xE0 ? 2 : cp < 0xF0 ? 3 : 4, i;
    if (n > 1) cp &= (uint32_t)(0x3F >> (n - 1));
    for (i = 1; i < n && p + i < (const unsigned char *)re->end; i++) cp = (cp << 6) | (p[i] & 0x3F);
    re->s += n;
    return cp;
}

/* An escaped character after the backslash (not a class escape): its code point, or fails. */
static uint32_t mms__re_escape(struct mms__re *re) {
    char e = *re->s++;
    uint32_t v = 0;
    int i, digits = e == 'x' ? 2 : e == 'u' ? 4 : 0;
    if (digits) {
        for (i = 0; i < digits; i++) {
            char h = re->s < re->end ? *re->s++ : 0;
            int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
            if (d < 0) { mms__re_fail(re, "a bad hex escape"); return 0; }
            v = v * 16 + (uint32_t)d;
        }
        return v;
    }
    switch (e) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case 'f': return '\f';
    case 'v': return '\v';
    default:
        if (strchr(".*+?()[]{}|\\/-^$ \"'#&~,:;<>=!@%`_", e) && e) return (uint32_t)(unsigned char)e;
    }
    mms__re_fail(re, "an escape outside the supported subset (\\b, \\B, \\A, \\Z, backreferences and \\p are not supported)");
    return 0;
}

static void mms__re_alt(struct mms__re *re);

static void mms__re_class(struct mms__re *re) {
    struct mms__i32vec r = { NULL, 0, 0 }, m = { NULL, 0, 0 };
    bool negate = false, unicode_escape = false;
    int i;
    if (re->s < re->end && *re->s == '^') { negate = true; re->s++; }
    if (re->s < re->end && *re->s == ']') { mms__i32vec_push(&r, ']'); mms__i32vec_push(&r, ']'); re->s++; }
    while (re->s < re->end && *re->s != ']' && !re->c->err[0]) {
        uint32_t lo, hi;
        if (*re->s == '\\' && re->s + 1 < re->end && mms__re_class_escape(re->s[1], &r)) { unicode_escape = true; re->s += 2; continue; }
        if (*re->s == '\\') { re->s++; lo = mms__re_escape(re); }
        else if (*re->s == '[' ) { mms__re_fail(re, "a '[' inside a class (sets like [[:alpha:]] are not supported)"); break; }
        else lo = mms__re_next(re);
        hi = lo;
        if (re->s + 1 < re->end && *re->s == '-' && re->s[1] != ']') {
            re->s++;
            if (*re->s == '\\') { re->s++; hi = mms__re_escape(re); } else hi = mms__re_next(re);
            if (hi < lo) { mms__re_fail(re, "a range out of order"); break; }
        }
        mms__i32vec_push(&r, (int32_t)lo);
        mms__i32vec_push(&r, (int32_t)hi);
    }
    if (re->s >= re->end && !re->c->err[0]) mms__re_fail(re, "a class without its ']'");
    re->s++;
    if (r.n) qsort(r.v, (size_t)r.n / 2, 2 * sizeof *r.v, mms__cp_cmp);
    for (i = 0; i < r.n; i += 2) {
        if (m.n && (uint32_t)r.v[i] <= (uint32_t)m.v[m.n - 1] + 1) { if (r.v[i + 1] > m.v[m.n - 1]) m.v[m.n - 1] = r.v[i + 1]; }
        else { mms__i32vec_push(&m, r.v[i]); mms__i32vec_push(&m, r.v[i + 1]); }
    }
    if (negate) {   /* the complement; within ASCII when a Unicode-aware escape is inside (Python's \d is wider than ours) */
        const uint32_t top = unicode_escape ? 0x7F : 0x10FFFF;
        uint32_t next = 0;
        r.n = 0;
        for (i = 0; i < m.n && (uint32_t)m.v[i] <= top; i += 2) {
            if ((uint32_t)m.v[i] > next) { mms__i32vec_push(&r, (int32_t)next); mms__i32vec_push(&r, m.v[i] - 1); }
            next = (uint32_t)m.v[i + 1] + 1;
        }
        if (next <= top) { mms__i32vec_push(&r, (int32_t)next); mms__i32vec_push(&r, (int32_t)top); }
        mms__re_set(re->b, (const uint32_t *)r.v, r.n / 2);
    } else {
        mms__re_set(re->b, (const uint32_t *)m.v, m.n / 2);
    }
    mms__i32vec_free(&r);
    mms__i32vec_free(&m);
}

static void mms__re_atom(struct mms__re *re) {
    char ch = *re->s;
    if (ch == '(') {
        re->s++;
        if (re->s < re->end && *re->s == '?') {
            if (re->end - re->s >= 2 && re->s[1] == ':') re->s += 2;
            else if (re->end - re->s >= 3 && re->s[1] == 'P' && re->s[2] == '<') { while (re->s < re->end && *re->s != '>') re->s++; re->s++; }
            else { mms__re_fail(re, "lookaround, flags and other (?...) groups are not supported"); return; }
        }
        mms__sb_puts(re->b, "(");
        mms__re_alt(re);
        mms__sb_puts(re->b, ")");
        if (re->s >= re->end || *re->s != ')') { mms__re_fail(re, "a '(' without its ')'"); return; }
        re->s++;
    } else if (ch == '[') {
        re->s++;
        mms__re_class(re);
    } else if (ch == '.') {   /* any character but a newline (Python's default) */
        static const uint32_t any[4] = { 0, 9, 11, 0x10FFFF };
        re->s++;
        mms__re_set(re->b, any, 2);
    } else if (ch == '\\') {
        struct mms__i32vec r = { NULL, 0, 0 };
        re->s++;
        if (re->s < re->end && mms__re_class_escape(*re->s, &r)) {
            re->s++;
            qsort(r.v, (size_t)r.n / 2, 2 * sizeof *r.v, mms__cp_cmp);
            mms__re_set(re->b, (const uint32_t *)r.v, r.n / 2);
        } else {
            mms__re_char(re->b, mms__re_escape(re));
        }
        mms__i32vec_free(&r);
    } else if (ch == '^' || ch == '$') {
        mms__re_fail(re, "'^' and '$' only at the start and the end of the whole expression");
    } else if (ch == '*' || ch == '+' || ch == '?' || ch == '{' || ch == ')' || ch == '|') {
        mms__re_fail(re, "a quantifier or ')' with nothing before it");
    } else {
        mms__re_char(re->b, mms__re_next(re));
    }
}

static void mms__re_seq(struct mms__re *re) {
    bool any = false;
    while (re->s < re->end && *re->s != '|' && *re->s != ')' && !re->c->err[0]) {
        if (any) mms__sb_puts(re->b, " ");
        mms__sb_puts(re->b, "(");
        mms__re_atom(re);
        mms__sb_puts(re->b, ")");
        any = true;
        while (re->s < re->end && !re->c->err[0] && (*re->s == '*' || *re->s == '+' || *re->s == '?' || *re->s == '{')) {
            if (*re->s == '{') {
                const char *q = re->s + 1;
                long m = 0, n;
                if (q >= re->end || *q < '0' || *q > '9') { mms__re_fail(re, "a '{' that is no {m,n} (write \\{ for the character)"); return; }
                while (q < re->end && *q >= '0' && *q <= '9') { if (m < 100000) m = m * 10 + (*q - '0'); q++; }
                n = m;
                if (q < re->end && *q == ',') {
                    q++;
                    if (q < re->end && *q == '}') n = -1;
                    else for (n = 0; q < re->end && *q >= '0' && *q <= '9'; q++) if (n < 100000) n = n * 10 + (*q - '0');
                }
                if (q >= re->end || *q != '}' || (n >= 0 && n < m) || m > 1000 || n > 1000) { mms__re_fail(re, "a bad {m,n} (at most 1000)"); return; }
                re->s = q + 1;
                if (n < 0) mms__sb_printf(re->b, "{%ld,}", m); else mms__sb_printf(re->b, "{%ld,%ld}", m, n);
            } else {
                mms__sb_put(re->b, re->s, 1);
                re->s++;
            }
            if (re->s < re->end && *re->s == '?') re->s++;   /* lazy: the same language */
        }
    }
    if (!any) mms__sb_puts(re->b, "\"\"");
}

static void mms__re_alt(struct mms__re *re) {
    mms__re_seq(re);
    while (re->s < re->end && *re->s == '|' && !re->c->err[0]) {
        re->s++;
        mms__sb_puts(re->b, " | ");
        mms__re_seq(re);
    }
}

/* A JSON string's content matching pattern (Python's re.search: unanchored unless ^ and $). */
static void mms__js_pattern(struct mms__js *c, struct mms__strbuf *b, const char *pattern, size_t len, const char *path) {
    struct mms__re re;
    bool start = len > 0 && pattern[0] == '^', end = false;
    size_t i, bs = 0;
    const char *p;
    int depth = 0;
    /* a final '$' that is not escaped */
    if (len > 0 && pattern[len - 1] == '$') {
        for (i = len - 1; i > 0 && pattern[i - 1] == '\\'; i--) bs++;
        end = bs % 2 == 0;
    }
    re.c = c;
    re.start = pattern;
    re.s = pattern + (start ? 1 : 0);
    re.end = pattern + len - (end ? 1 : 0);
    re.path = path;
    re.b = b;
    for (p = re.s; p < re.end; p++) {   /* ^a|b$ anchors only one side of each branch: refused */
        if (*p == '\\') { p++; continue; }
        if (*p == '(') depth++;
        if (*p == ')') depth--;
        if (*p == '|' && depth == 0 && (start || end)) { mms__js_fail(c, path, "pattern", "anchors with a top-level '|' (write ^(a|b)$)"); return; }
    }
    mms__sb_puts(b, "(");
    if (!start) mms__sb_puts(b, "char* ");
    mms__sb_puts(b, "(");
    mms__re_alt(&re);
    mms__sb_puts(b, ")");
    if (re.s < re.end && !c->err[0]) mms__re_fail(&re, "an unmatched ')'");
    if (!end) mms__sb_puts(b, " char*");
    mms__sb_puts(b, ")");
}

/* -- schemas -- */

static int mms__js_rule(struct mms__js *c, struct mms__js_member *members, int n);

/* Adds schema v (at path) to the conjunction: $ref and allOf are flattened; true is nothing; false
   makes *never. */
static void mms__js_add(struct mms__js *c, struct mms__js_member *m, int *n, int64_t v, const char *path, bool *never, int depth) {
    int64_t r, k, len;
    int i;
    char sub[192];
    if (c->err[0] || depth > 64) { if (depth > 64) mms__js_fail(c, path, "$ref", "references nest deeper than 64 without a schema between"); return; }
    if (mms_json_type(c->j, v) == MMS_JSON_TRUE) return;
    if (mms_json_type(c->j, v) == MMS_JSON_FALSE) { *never = true; return; }
    if (mms_json_type(c->j, v) != MMS_JSON_OBJECT) { mms__js_fail(c, path, "schema", "a schema is an object or a boolean"); return; }
    for (i = 0; i < *n; i++) if (m[i].id == v) return;
    if (*n == MMS__JS_MAX_MEMBERS) { mms__js_fail(c, path, "allOf", "more than %d schemas apply together", MMS__JS_MAX_MEMBERS); return; }
    m[*n].id = v;
    m[*n].skip_anyof = false;
    snprintf(m[*n].path, sizeof m[*n].path, "%s", path);
    (*n)++;
    if ((r = mms_json_get(c->j, v, "$ref")) >= 0) {
        size_t rl;
        const char *ref = mms_json_str(c->j, r, &rl);
        int64_t t = 0;
        char tok[256];
        mms__js_path(sub, sizeof sub, path, "$ref");
        if (!ref || ref[0] != '#' || (ref[1] && ref[1] != '/')) { mms__js_fail(c, sub, "$ref", "'%s': only local references (#, #/...) are supported", ref ? ref : "(not a string)"); return; }
        for (ref++; *ref == '/' && t >= 0;) {   /* JSON Pointer: ~1 is '/', ~0 is '~', %XX a byte */
            size_t tn = 0;
            for (ref++; *ref && *ref != '/' && tn + 1 < sizeof tok; ref++) {
                if (*ref == '~' && (ref[1] == '0' || ref[1] == '1')) { tok[tn++] = ref[1] == '0' ? '~' : '/'; ref++; }
                else if (*ref == '%' && isxdigit((unsigned char)ref[1]) && isxdigit((unsigned char)ref[2])) {
                    char hx[3] = { ref[1], ref[2], 0 };
                    tok[tn++] = (char)strtol(hx, NULL, 16);
                    ref += 2;
                } else tok[tn++] = *ref;
            }
            tok[tn] = '\0';
            if (mms_json_type(c->j, t) == MMS_JSON_ARRAY) t = mms_json_at(c->j, t, atol(tok));
            else t = mms_json_get(c->j, t, tok);
        }
        if (t < 0) { mms__js_fail(c, sub, "$ref", "'%s' points at nothing in the schema", mms_json_str(c->j, r, &rl)); return; }
        mms__js_add(c, m, n, t, mms_json_str(c->j, r, &rl), never, depth + 1);
    }
    if ((r = mms_json_get(c->j, v, "allOf")) >= 0) {
        mms__js_path(sub, sizeof sub, path, "allOf");
        if (mms_json_type(c->j, r) != MMS_JSON_ARRAY || mms_json_len(c->j, r) < 1) { mms__js_fail(c, sub, "allOf", "a non-empty array of schemas is required"); return; }
        for (k = 0, len = mms_json_len(c->j, r); k < len; k++) {
            char item[192];
            mms__js_path_index(item, sizeof item, sub, k);
            mms__js_add(c, m, n, mms_json_at(c->j, r, k), item, never, depth + 1);
        }
    }
}

static int mms__js_new_rule(struct mms__js *c) { return c->n_rules++; }

/* The members' values of keyword (at most one member may have it: several are an error unless same). */
static int64_t mms__js_one(struct mms__js *c, const struct mms__js_member *m, int n, const char *keyword, const char **path) {
    int64_t found = -1, v;
    int i;
    for (i = 0; i < n; i++)
        if ((v = mms_json_get(c->j, m[i].id, keyword)) >= 0) {
            if (found >= 0) { mms__js_fail(c, m[i].path, keyword, "in several schemas of one allOf/$ref: not supported"); return -1; }
            found = v;
            if (path) *path = m[i].path;
        }
    return found;
}

/* A number keyword's bound, the tightest over the members; false when none has it. */
static bool mms__js_bound(struct mms__js *c, const struct mms__js_member *m, int n, const char *keyword, bool lower, double *out) {
    bool any = false;
    int i;
    for (i = 0; i < n; i++) {
        int64_t v = mms_json_get(c->j, m[i].id, keyword);
        double d;
        if (v < 0) continue;
        if (!mms_json_num(c->j, v, &d)) {
            char p[192];
            mms__js_path(p, sizeof p, m[i].path, keyword);
            mms__js_fail(c, p, keyword, "a number is required (a boolean is draft 4's form)");
            return false;
        }
        if (!any || (lower ? d > *out : d < *out)) *out = d;
        any = true;
    }
    return any;
}

static void mms__js_rule_name(char *buf, size_t cap, int rule) { snprintf(buf, cap, "s%d", rule); }

static void mms__js_ref(struct mms__strbuf *b, int rule) {
    char name[24];
    mms__js_rule_name(name, sizeof name, rule);
    mms__sb_puts(b, name);
}

/* The rule of one schema value (a single-member conjunction), or -1 for "nothing". */
static int mms__js_schema(struct mms__js *c, int64_t v, const char *path) {
    struct mms__js_member m[MMS__JS_MAX_MEMBERS];
    int n = 0;
    bool never = false;
    mms__js_add(c, m, &n, v, path, &never, 0);
    if (c->err[0] || never) return -1;
    return mms__js_rule(c, m, n);
}

/* A property of an object being compiled: its rule (-2 any value, -1 none). */
struct mms__js_prop {
    const char *key;
    int         rule;
    bool        required;
};

static bool mms__js_prop_add(struct mms__js_prop **props, int *n, int *cap, const char *key, int rule) {
    if (*n == *cap) {
        int ncap = *cap ? *cap * 2 : 16;
        struct mms__js_prop *p = (struct mms__js_prop *)MMS_REALLOC(*props, sizeof *p * (size_t)ncap);
        if (!p) return false;
        *props = p;
        *cap = ncap;
    }
    (*props)[*n].key = key;
    (*props)[*n].rule = rule;
    (*props)[*n].required = false;
    (*n)++;
    return true;
}

/* The object part of a conjunction, into b. */
static void mms__js_object(struct mms__js *c, struct mms__js_member *m, int n, struct mms__strbuf *b) {
    struct mms__js_prop *props = NULL;
    int n_props = 0, cap_props = 0, i, k, q, addl = -2;   /* addl: -2 any value, -1 none, else a rule */
    int64_t v, len;
    const char *addl_path = NULL;
    bool addl_set = false;
    /* additionalProperties: at most one member may restrict it, and then every property named must be its own */
    for (i = 0; i < n; i++) {
        if ((v = mms_json_get(c->j, m[i].id, "additionalProperties")) < 0 || mms_json_type(c->j, v) == MMS_JSON_TRUE) continue;
        if (addl_set) { mms__js_fail(c, m[i].path, "additionalProperties", "in several schemas of one allOf/$ref: not supported"); goto done; }
        addl_set = true;
        addl_path = m[i].path;
        {
            char p[192];
            mms__js_path(p, sizeof p, m[i].path, "additionalProperties");
            addl = mms__js_schema(c, v, p);
        }
        for (k = 0; k < n && !c->err[0]; k++) {
            int64_t pr = mms_json_get(c->j, m[k].id, "properties"), mine = mms_json_get(c->j, m[i].id, "properties");
            for (q = 0; k != i && pr >= 0 && q < mms_json_len(c->j, pr); q++) {
                size_t kl;
                const char *key = mms_json_key(c->j, pr, q, &kl);
                if (mine < 0 || mms_json_get(c->j, mine, key) < 0)
                    mms__js_fail(c, m[k].path, "additionalProperties", "property '%s' of another allOf branch meets the additionalProperties of %s: not supported", key, m[i].path);
            }
        }
    }
    if (c->err[0]) goto done;
    /* properties, in the order the members list them */
    for (i = 0; i < n; i++) {
        int64_t pr = mms_json_get(c->j, m[i].id, "properties");
        if (pr < 0) continue;
        if (mms_json_type(c->j, pr) != MMS_JSON_OBJECT) { mms__js_fail(c, m[i].path, "properties", "an object is required"); goto done; }
        for (k = 0, len = mms_json_len(c->j, pr); k < len; k++) {
            size_t kl;
            const char *key = mms_json_key(c->j, pr, k, &kl);
            struct mms__js_member sm[MMS__JS_MAX_MEMBERS];
            int sn = 0, r;
            bool never = false;
            for (q = 0; q < n_props; q++) if (!strcmp(props[q].key, key)) break;
            if (q < n_props) continue;   /* already compiled with every member's schema for it */
            for (q = i; q < n; q++) {
                int64_t pq = mms_json_get(c->j, m[q].id, "properties"), s;
                if (pq >= 0 && (s = mms_json_get(c->j, pq, key)) >= 0) {
                    char p[192], p2[192];
                    mms__js_path(p, sizeof p, m[q].path, "properties");
                    mms__js_path(p2, sizeof p2, p, key);
                    mms__js_add(c, sm, &sn, s, p2, &never, 0);
                }
            }
            if (c->err[0]) goto done;
            r = never ? -1 : mms__js_rule(c, sm, sn);
            if (c->err[0]) goto done;
            if (!mms__js_prop_add(&props, &n_props, &cap_props, key, r)) { b->oom = true; goto done; }
        }
    }
    /* required: a name without a property takes the additionalProperties schema */
    for (i = 0; i < n; i++) {
        int64_t rq = mms_json_get(c->j, m[i].id, "required");
        if (rq < 0) continue;
        if (mms_json_type(c->j, rq) != MMS_JSON_ARRAY) { mms__js_fail(c, m[i].path, "required", "an array of strings is required"); goto done; }
        for (k = 0, len = mms_json_len(c->j, rq); k < len; k++) {
            size_t kl;
            const char *key = mms_json_str(c->j, mms_json_at(c->j, rq, k), &kl);
            if (!key) { mms__js_fail(c, m[i].path, "required", "an array of strings is required"); goto done; }
            for (q = 0; q < n_props; q++) if (!strcmp(props[q].key, key)) break;
            if (q == n_props && !mms__js_prop_add(&props, &n_props, &cap_props, key, addl)) { b->oom = true; goto done; }
            if (props[q].rule == -1) { mms__js_fail(c, m[i].path, "required", "'%s' is required but its schema admits no value", key); goto done; }
            props[q].required = true;
        }
    }
    /* additional keys are written after the listed ones and may not repeat them: an ASCII trie of the names */
    if (addl != -1)
        for (q = 0; q < n_props; q++) {
            const char *k2;
            for (k2 = props[q].key; *k2; k2++)
                if ((unsigned char)*k2 < 0x20 || (unsigned char)*k2 >= 0x7F || *k2 == '"' || *k2 == '\\' || k2 - props[q].key > 200) {
                    mms__js_fail(c, addl_path ? addl_path : m[0].path, "additionalProperties", "property '%s' has a character other than printable ASCII: additional properties beside it are not supported (set additionalProperties to false)", props[q].key);
                    goto done;
                }
        }
    {
        /* F = first pair, R(i) = ',' pairs after property i-1; a property may be skipped unless required */
        int base = c->n_rules, addkey = -1, addpair = -1;
        struct mms__strbuf rb = { NULL, 0, 0, false };
        c->n_rules += n_props + 1;   /* s(base + i) = R(i), i in 0..n_props */
        if (addl != -1) {
            /* the key trie: one rule per prefix of a name */
            struct mms__strbuf tb = { NULL, 0, 0, false };
            char (*prefixes)[256] = NULL;
            int n_pre = 0, cap_pre = 0, pi;
            /* collect every prefix (with the empty one first) */
            for (q = -1; q < n_props; q++) {
                size_t L = q < 0 ? 0 : strlen(props[q].key), l;
                for (l = q < 0 ? 0 : 1; l <= L && l < 255; l++) {
                    for (pi = 0; pi < n_pre; pi++) if (strlen(prefixes[pi]) == l && !memcmp(prefixes[pi], props[q].key, l)) break;
                    if (pi < n_pre) continue;
                    if (n_pre == cap_pre) {
                        char (*np)[256];
                        cap_pre = cap_pre ? cap_pre * 2 : 16;
                        np = (char (*)[256])MMS_REALLOC(prefixes, sizeof *np * (size_t)cap_pre);
                        if (!np) { b->oom = true; MMS_FREE(prefixes); goto done; }
                        prefixes = np;
                    }
                    memcpy(prefixes[n_pre], q < 0 ? "" : props[q].key, l);
                    prefixes[n_pre][l] = '\0';
                    n_pre++;
                }
            }
            addkey = c->n_rules;
            c->n_rules += n_pre;
            addpair = c->n_rules++;
            for (pi = 0; pi < n_pre; pi++) {
                const size_t L = strlen(prefixes[pi]);
                bool is_name = false, any = false;
                char others[300];
                size_t no = 0;
                int pj;
                for (q = 0; q < n_props; q++) is_name = is_name || !strcmp(props[q].key, prefixes[pi]);
                mms__js_ref(&tb, addkey + pi);
                mms__sb_puts(&tb, " ::= ");
                if (!is_name) { mms__sb_puts(&tb, "\"\\\"\""); any = true; }
                for (pj = 0; pj < n_pre; pj++) {   /* the children: one character longer */
                    if (strlen(prefixes[pj]) != L + 1 || memcmp(prefixes[pj], prefixes[pi], L)) continue;
                    if (any) mms__sb_puts(&tb, " | ");
                    mms__sb_literal(&tb, prefixes[pj] + L, 1);
                    mms__sb_puts(&tb, " ");
                    mms__js_ref(&tb, addkey + pj);
                    any = true;
                    if (prefixes[pj][L] == ']' || prefixes[pj][L] == '^' || prefixes[pj][L] == '-') others[no++] = '\\';
                    others[no++] = prefixes[pj][L];
                }
                others[no] = '\0';
                if (any) mms__sb_puts(&tb, " | ");
                mms__sb_printf(&tb, "[^\"\\\\\\x00-\\x1F%s] keychar* \"\\\"\"\n", others);
            }
            mms__js_ref(&tb, addpair);
            mms__sb_puts(&tb, " ::= \"\\\"\" ");
            mms__js_ref(&tb, addkey);
            mms__sb_puts(&tb, " \":\" ");
            if (addl == -2) mms__sb_puts(&tb, "value"); else mms__js_ref(&tb, addl);
            mms__sb_puts(&tb, "\n");
            if (tb.oom) b->oom = true; else mms__sb_put(&c->out, tb.s, tb.n);
            MMS_FREE(tb.s);
            MMS_FREE(prefixes);
        }
        for (i = 0; i <= n_props; i++) {   /* R(i) */
            bool any = false;
            mms__js_ref(&rb, base + i);
            mms__sb_puts(&rb, " ::= ");
            for (k = i; k < n_props; k++) {
                if (props[k].rule == -1) continue;
                if (any) mms__sb_puts(&rb, " | ");
                mms__sb_puts(&rb, "\",\" ");
                mms__js_key_literal(&rb, props[k].key);
                mms__sb_puts(&rb, " ");
                if (props[k].rule == -2) mms__sb_puts(&rb, "value"); else mms__js_ref(&rb, props[k].rule);
                mms__sb_puts(&rb, " ");
                mms__js_ref(&rb, base + k + 1);
                any = true;
                if (props[k].required) break;
            }
            if (k == n_props) {   /* every later one may be left out: the additional ones, or the end */
                if (any) mms__sb_puts(&rb, " | ");
                if (addl != -1) { mms__sb_puts(&rb, "(\",\" "); mms__js_ref(&rb, addpair); mms__sb_puts(&rb, ")*"); }
                else mms__sb_puts(&rb, "\"\"");
            }
            mms__sb_puts(&rb, "\n");
        }
        if (rb.oom) b->oom = true; else mms__sb_put(&c->out, rb.s, rb.n);
        MMS_FREE(rb.s);
        /* the object: "{" then the first pair (R(0) without its comma) */
        mms__sb_puts(b, "\"{\" (");
        {
            bool any = false;
            for (k = 0; k < n_props; k++) {
                if (props[k].rule == -1) continue;
                if (any) mms__sb_puts(b, " | ");
                mms__js_key_literal(b, props[k].key);
                mms__sb_puts(b, " ");
                if (props[k].rule == -2) mms__sb_puts(b, "value"); else mms__js_ref(b, props[k].rule);
                mms__sb_puts(b, " ");
                mms__js_ref(b, base + k + 1);
                any = true;
                if (props[k].required) break;
            }
            if (k == n_props) {
                if (any) mms__sb_puts(b, " | ");
                if (addl != -1) { mms__sb_puts(b, "("); mms__js_ref(b, addpair); mms__sb_puts(b, " (\",\" "); mms__js_ref(b, addpair); mms__sb_puts(b, ")*)?"); }
                else mms__sb_puts(b, "\"\"");
            }
        }
        mms__sb_puts(b, ") \"}\"");
    }
done:
    MMS_FREE(props);
}

/* The array part of a conjunction, into b. */
static void mms__js_array(struct mms__js *c, struct mms__js_member *m, int n, struct mms__strbuf *b) {
    const char *ppath = NULL;
    int64_t prefix = mms__js_one(c, m, n, "prefixItems", &ppath), items;
    int n_prefix = 0, *prefix_rules = NULL, item_rule = -2, i, count;
    double dmin = 0, dmax = -1;
    long lmin, lmax;
    struct mms__js_member im[MMS__JS_MAX_MEMBERS];
    int in = 0;
    bool never = false;
    if (c->err[0]) return;
    for (i = 0; i < n; i++)
        if ((items = mms_json_get(c->j, m[i].id, "items")) >= 0) {
            char p[192];
            mms__js_path(p, sizeof p, m[i].path, "items");
            if (mms_json_type(c->j, items) == MMS_JSON_ARRAY) { mms__js_fail(c, p, "items", "an array of schemas is draft 2019's tuple form: use prefixItems"); return; }
            mms__js_add(c, im, &in, items, p, &never, 0);
        }
    if (c->err[0]) return;
    item_rule = never ? -1 : in ? mms__js_rule(c, im, in) : -2;
    if (prefix >= 0) {
        if (mms_json_type(c->j, prefix) != MMS_JSON_ARRAY) { mms__js_fail(c, ppath, "prefixItems", "an array of schemas is required"); return; }
        n_prefix = (int)mms_json_len(c->j, prefix);
        if (!(prefix_rules = (int *)MMS_MALLOC(sizeof(int) * ((size_t)n_prefix + 1)))) { b->oom = true; return; }
        for (i = 0; i < n_prefix; i++) {
            char p[192], pp[192];
            mms__js_path(pp, sizeof pp, ppath, "prefixItems");
            mms__js_path_index(p, sizeof p, pp, i);
            prefix_rules[i] = mms__js_schema(c, mms_json_at(c->j, prefix, i), p);
        }
    }
    mms__js_bound(c, m, n, "minItems", true, &dmin);
    if (!mms__js_bound(c, m, n, "maxItems", false, &dmax)) dmax = -1;
    if (c->err[0]) goto done;
    if (dmin > 1000 || dmax > 1000) { mms__js_fail(c, m[0].path, dmax > 1000 ? "maxItems" : "minItems", "more than 1000 items: not supported"); goto done; }
    lmin = (long)ceil(dmin);
    lmax = dmax < 0 ? -1 : (long)floor(dmax);
    for (i = 0; i < n; i++) {
        int64_t u = mms_json_get(c->j, m[i].id, "uniqueItems");
        if (u >= 0 && mms_json_type(c->j, u) == MMS_JSON_TRUE) { mms__js_fail(c, m[i].path, "uniqueItems", "not supported"); goto done; }
    }
    /* the longest array the element schemas allow */
    {
        long cap = item_rule == -1 ? n_prefix : -1;
        for (i = 0; i < n_prefix; i++) if (prefix_rules[i] == -1) { cap = i; break; }
        if (cap >= 0 && (lmax < 0 || lmax > cap)) lmax = cap;
    }
    if (lmax >= 0 && lmin > lmax) { mms__js_fail(c, m[0].path, "minItems", "no array can satisfy minItems %ld with at most %ld items", lmin, lmax); goto done; }
    /* positions 0 .. count-1 written out (the first lmin required), then a repetition when unbounded */
    count = lmax >= 0 ? (int)lmax : (int)(lmin > n_prefix ? lmin : n_prefix);
    mms__sb_puts(b, "\"[\" ");
    for (i = 0; i < count; i++) {
        const int r = i < n_prefix ? prefix_rules[i] : item_rule;
        if (i >= lmin) mms__sb_puts(b, "(");
        if (i) mms__sb_puts(b, "\",\" ");
        if (r == -2) mms__sb_puts(b, "value"); else mms__js_ref(b, r);
        mms__sb_puts(b, " ");
    }
    if (lmax < 0) {
        if (count == 0) { mms__sb_puts(b, "("); if (item_rule == -2) mms__sb_puts(b, "value"); else mms__js_ref(b, item_rule); mms__sb_puts(b, " "); }
        mms__sb_puts(b, "(\",\" ");
        if (item_rule == -2) mms__sb_puts(b, "value"); else mms__js_ref(b, item_rule);
        mms__sb_puts(b, ")* ");
        if (count == 0) mms__sb_puts(b, ")? ");
    }
    for (i = count - 1; i >= 0; i--) if (i >= lmin) mms__sb_puts(b, ")? ");
    mms__sb_puts(b, "\"]\"");
done:
    MMS_FREE(prefix_rules);
}

/* The string part of a conjunction, into b. */
static void mms__js_string(struct mms__js *c, struct mms__js_member *m, int n, struct mms__strbuf *b) {
    const char *ppath = NULL, *fpath = NULL;
    int64_t pattern = mms__js_one(c, m, n, "pattern", &ppath), format = mms__js_one(c, m, n, "format", &fpath);
    double dmin = 0, dmax = -1;
    bool has_len;
    if (c->err[0]) return;
    has_len = mms__js_bound(c, m, n, "minLength", true, &dmin);   /* both read: each may set its bound */
    if (mms__js_bound(c, m, n, "maxLength", false, &dmax)) has_len = true;
    if (c->err[0]) return;
    if (dmin > 10000 || dmax > 10000) { mms__js_fail(c, m[0].path, "maxLength", "lengths beyond 10000: not supported"); return; }
    if (has_len && dmax >= 0 && ceil(dmin) > floor(dmax)) { mms__js_fail(c, m[0].path, "minLength", "greater than maxLength: no string satisfies both"); return; }
    if ((pattern >= 0 || format >= 0) && has_len) {
        mms__js_fail(c, pattern >= 0 ? ppath : fpath, pattern >= 0 ? "pattern" : "format", "together with minLength/maxLength: not supported");
        return;
    }
    if (pattern >= 0 && format >= 0) { mms__js_fail(c, ppath, "pattern", "together with format: not supported"); return; }
    mms__sb_puts(b, "\"\\\"\" ");
    if (format >= 0) {
        size_t fl;
        const char *f = mms_json_str(c->j, format, &fl);
        static const char *const formats[] = { "date", "time", "date-time", "uuid", "email", NULL };
        if (!f || !mms__js_in(formats, f)) { mms__js_fail(c, fpath, "format", "'%s' is not supported (date, time, date-time, uuid, email are)", f ? f : "(not a string)"); return; }
        mms__sb_puts(b, !strcmp(f, "date-time") ? "date \"T\" time" : f);
    } else if (pattern >= 0) {
        size_t pl;
        const char *p = mms_json_str(c->j, pattern, &pl);
        char path[192];
        mms__js_path(path, sizeof path, ppath, "pattern");
        if (!p) { mms__js_fail(c, path, "pattern", "a string is required"); return; }
        mms__js_pattern(c, b, p, pl, path);
    } else if (has_len) {
        if (dmax >= 0) mms__sb_printf(b, "char{%ld,%ld}", (long)ceil(dmin), (long)floor(dmax));
        else mms__sb_printf(b, "char{%ld,}", (long)ceil(dmin));
    } else {
        mms__sb_puts(b, "char*");
    }
    mms__sb_puts(b, " \"\\\"\"");
}

/* The number part (integers only when integer_only), into b. */
static void mms__js_number(struct mms__js *c, struct mms__js_member *m, int n, bool integer_only, struct mms__strbuf *b) {
    double lo = 0, hi = 0, xlo = 0, xhi = 0;
    bool has_lo = mms__js_bound(c, m, n, "minimum", true, &lo), has_hi = mms__js_bound(c, m, n, "maximum", false, &hi);
    bool has_xlo = mms__js_bound(c, m, n, "exclusiveMinimum", true, &xlo), has_xhi = mms__js_bound(c, m, n, "exclusiveMaximum", false, &xhi);
    bool lo_ex = false, hi_ex = false;
    const double lim = 9007199254740992.0;
    if (c->err[0]) return;
    if (has_xlo && (!has_lo || xlo >= lo)) { lo = xlo; has_lo = true; lo_ex = true; }
    if (has_xhi && (!has_hi || xhi <= hi)) { hi = xhi; has_hi = true; hi_ex = true; }
    if ((has_lo && fabs(lo) > lim) || (has_hi && fabs(hi) > lim)) { mms__js_fail(c, m[0].path, has_lo && fabs(lo) > lim ? "minimum" : "maximum", "a bound beyond 2^53: not supported"); return; }
    if (integer_only) {
        int64_t ilo = 0, ihi = 0;
        if (has_lo) ilo = (int64_t)(lo_ex ? floor(lo) + 1 : ceil(lo));
        if (has_hi) ihi = (int64_t)(hi_ex ? ceil(hi) - 1 : floor(hi));
        if (has_lo && has_hi && ilo > ihi) { mms__js_fail(c, m[0].path, "minimum", "no integer lies between the bounds"); return; }
        if (!has_lo && !has_hi) mms__sb_puts(b, "integer");
        else mms__js_int_range(b, has_lo, ilo, has_hi, ihi);
        return;
    }
    if (!has_lo && !has_hi) { mms__sb_puts(b, "number"); return; }
    if ((has_lo && lo != floor(lo)) || (has_hi && hi != floor(hi))) {
        mms__js_fail(c, m[0].path, has_lo && lo != floor(lo) ? (lo_ex ? "exclusiveMinimum" : "minimum") : (hi_ex ? "exclusiveMaximum" : "maximum"),
                     "a bound with a fraction on a number: only integral bounds are supported (numbers with bounds are written without an exponent)");
        return;
    }
    if (has_lo && has_hi && (lo > hi || (lo == hi && (lo_ex || hi_ex)))) { mms__js_fail(c, m[0].path, "minimum", "no number lies between the bounds"); return; }
    {
        bool any = false;
        mms__sb_puts(b, "(");
        if (!has_lo || lo < 0) {   /* negatives: "-" and a magnitude in (max(0, -hi), -lo] */
            const bool hi_pos = !has_hi || hi >= 0;
            mms__sb_puts(b, "\"-\" ");
            mms__js_nonneg_number(b, hi_pos ? 0 : (int64_t)-hi, hi_pos ? true : hi_ex, has_lo ? (int64_t)-lo : -1, lo_ex);
            any = true;
        }
        if (!has_hi || hi > 0 || (hi == 0 && !hi_ex)) {
            if (any) mms__sb_puts(b, " | ");
            mms__js_nonneg_number(b, has_lo && lo >= 0 ? (int64_t)lo : 0, has_lo && lo >= 0 ? lo_ex : false, has_hi ? (int64_t)hi : -1, hi_ex);
        }
        mms__sb_puts(b, ")");
    }
}

/* Compiles a conjunction to a rule; its number, or -1 when it admits nothing. */
static int mms__js_rule(struct mms__js *c, struct mms__js_member *m, int n) {
    struct mms__strbuf b = { NULL, 0, 0, false };
    int rule, i, types = MMS__JS_ALL, anyof_at = -1, memo;
    int64_t k, len;
    bool any_alt = false;
    if (c->err[0]) return -1;
    if (c->n_rules > MMS__JS_MAX_RULES) { mms__js_fail(c, n ? m[0].path : "#", "schema", "compiles to more than %d rules", MMS__JS_MAX_RULES); return -1; }
    /* memo: the same conjunction is the same rule (and a recursive $ref finds itself here) */
    for (memo = 0; memo < c->n_memo; memo++) {
        if (c->memo[memo].n != n) continue;
        for (i = 0; i < n && c->memo[memo].ids[i] == (m[i].id * 2 + m[i].skip_anyof); i++) {}
        if (i == n) return c->memo[memo].rule;
    }
    if (c->n_memo == c->cap_memo) {
        int cap = c->cap_memo ? c->cap_memo * 2 : 64;
        struct mms__js_memo *p = (struct mms__js_memo *)MMS_REALLOC(c->memo, sizeof *p * (size_t)cap);
        if (!p) { c->out.oom = true; return -1; }
        c->memo = p;
        c->cap_memo = cap;
    }
    memo = c->n_memo++;
    rule = mms__js_new_rule(c);
    c->memo[memo].n = n;
    c->memo[memo].rule = rule;
    for (i = 0; i < n; i++) c->memo[memo].ids[i] = m[i].id * 2 + m[i].skip_anyof;
    if (n == 0) { mms__sb_puts(&b, "value"); any_alt = true; goto emit; }   /* true, or {} */
    /* every keyword is compiled, ignored as an annotation, or refused */
    for (i = 0; i < n; i++)
        for (k = 0, len = mms_json_len(c->j, m[i].id); k < len; k++) {
            size_t kl;
            const char *key = mms_json_key(c->j, m[i].id, k, &kl);
            if (mms__js_in(mms__js_unsupported, key)) {
                char p[192];
                mms__js_path(p, sizeof p, m[i].path, key);
                if (!strcmp(key, "uniqueItems")) continue;
                mms__js_fail(c, p, key, "not supported");
                return -1;
            }
        }
    /* type */
    for (i = 0; i < n; i++) {
        const char *bad = NULL;
        const int mine = mms__js_type_bits(c->j, m[i].id, &bad);
        if (bad) { char p[192]; mms__js_path(p, sizeof p, m[i].path, "type"); mms__js_fail(c, p, "type", "'%s' is none of the seven types", bad); return -1; }
        types &= mine;
    }
    /* anyOf/oneOf: distributed over the rest of the conjunction (oneOf only where its branches are disjoint: then a union) */
    for (i = 0; i < n && anyof_at < 0; i++)
        if (!m[i].skip_anyof && (mms_json_get(c->j, m[i].id, "anyOf") >= 0 || mms_json_get(c->j, m[i].id, "oneOf") >= 0)) anyof_at = i;
    if (anyof_at >= 0) {
        const bool is_any = mms_json_get(c->j, m[anyof_at].id, "anyOf") >= 0;
        const int64_t list = mms_json_get(c->j, m[anyof_at].id, is_any ? "anyOf" : "oneOf");
        char p[192];
        mms__js_path(p, sizeof p, m[anyof_at].path, is_any ? "anyOf" : "oneOf");
        if (mms_json_get(c->j, m[anyof_at].id, "anyOf") >= 0 && mms_json_get(c->j, m[anyof_at].id, "oneOf") >= 0) { mms__js_fail(c, p, "oneOf", "beside anyOf in one schema: not supported"); return -1; }
        if (mms_json_type(c->j, list) != MMS_JSON_ARRAY || mms_json_len(c->j, list) < 1) { mms__js_fail(c, p, is_any ? "anyOf" : "oneOf", "a non-empty array of schemas is required"); return -1; }
        for (k = 0, len = mms_json_len(c->j, list); !is_any && k < len; k++) {   /* "only one": branches that cannot both hold */
            int64_t other;
            for (other = k + 1; other < len; other++)
                if (!mms__js_disjoint(c->j, mms_json_at(c->j, list, k), mms_json_at(c->j, list, other))) {
                    mms__js_fail(c, p, "oneOf", "branches %lld and %lld may both hold for one value, and generating only what one of them "
                                 "allows is not supported (they must differ in type, const/enum, or a required property's const/enum; "
                                 "anyOf allows both)", (long long)k, (long long)other);
                    return -1;
                }
        }
        for (k = 0, len = mms_json_len(c->j, list); k < len && !c->err[0]; k++) {
            struct mms__js_member bm[MMS__JS_MAX_MEMBERS];
            int bn = n, r;
            bool never = false;
            char item[192];
            memcpy(bm, m, sizeof *m * (size_t)n);
            bm[anyof_at].skip_anyof = true;
            mms__js_path_index(item, sizeof item, p, k);
            mms__js_add(c, bm, &bn, mms_json_at(c->j, list, k), item, &never, 0);
            if (never || c->err[0]) continue;
            r = mms__js_rule(c, bm, bn);
            if (r < 0) { if (c->err[0]) goto emit; continue; }
            if (any_alt) mms__sb_puts(&b, " | ");
            mms__js_ref(&b, r);
            any_alt = true;
        }
        goto emit;
    }
    /* enum and const: the values every member's enum/const lists (compared as compact text), of the allowed types */
    {
        int64_t first = -1;
        bool first_is_enum = false, has_other = false;
        for (i = 0; i < n; i++) {
            const int64_t en = mms_json_get(c->j, m[i].id, "enum"), cn = mms_json_get(c->j, m[i].id, "const");
            if (en >= 0 && mms_json_type(c->j, en) != MMS_JSON_ARRAY) { char p[192]; mms__js_path(p, sizeof p, m[i].path, "enum"); mms__js_fail(c, p, "enum", "an array is required"); return -1; }
            if (first < 0 && (en >= 0 || cn >= 0)) { first = en >= 0 ? en : cn; first_is_enum = en >= 0; }
            else if (en >= 0 || cn >= 0) has_other = true;
        }
        if (first >= 0) {
            static const char *const others[] = { "properties", "required", "additionalProperties", "items", "prefixItems", "minItems", "maxItems",
                                                   "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", NULL };
            for (i = 0; i < n; i++)
                for (k = 0, len = mms_json_len(c->j, m[i].id); k < len; k++) {
                    size_t kl;
                    const char *key = mms_json_key(c->j, m[i].id, k, &kl);
                    if (mms__js_in(others, key)) { mms__js_fail(c, m[i].path, key, "beside enum/const: not supported"); return -1; }
                }
            for (k = 0, len = first_is_enum ? mms_json_len(c->j, first) : 1; k < len; k++) {
                const int64_t x = first_is_enum ? mms_json_at(c->j, first, k) : first;
                const enum mms_json_type t = mms_json_type(c->j, x);
                int64_t iv;
                int bit = t == MMS_JSON_NULL ? MMS__JS_NULL : t == MMS_JSON_TRUE || t == MMS_JSON_FALSE ? MMS__JS_BOOL : t == MMS_JSON_OBJECT ? MMS__JS_OBJ
                        : t == MMS_JSON_ARRAY ? MMS__JS_ARR : t == MMS_JSON_STRING ? MMS__JS_STR : mms_json_int(c->j, x, &iv) ? MMS__JS_INT : MMS__JS_NUM;
                bool everywhere = true;
                struct mms__strbuf mine = { NULL, 0, 0, false };
                if (!(types & bit)) continue;
                mms__js_write_value(&mine, c->j, x);
                for (i = 0; i < n && has_other && everywhere; i++) {   /* in every other member's enum/const too */
                    const int64_t en = mms_json_get(c->j, m[i].id, "enum"), cn = mms_json_get(c->j, m[i].id, "const");
                    int64_t q, qn;
                    bool found = false;
                    if ((en < 0 && cn < 0) || en == first || cn == first) continue;
                    for (q = 0, qn = en >= 0 ? mms_json_len(c->j, en) : 1; q < qn && !found; q++) {
                        struct mms__strbuf other = { NULL, 0, 0, false };
                        mms__js_write_value(&other, c->j, en >= 0 ? mms_json_at(c->j, en, q) : cn);
                        found = other.n == mine.n && (!mine.n || !memcmp(other.s, mine.s, mine.n));
                        MMS_FREE(other.s);
                    }
                    everywhere = found;
                }
                if (everywhere) {
                    if (any_alt) mms__sb_puts(&b, " | ");
                    mms__sb_literal(&b, mine.s ? mine.s : "", mine.n);
                    any_alt = true;
                }
                MMS_FREE(mine.s);
            }
            goto emit;
        }
    }
    /* one alternative per type */
    {
        static const int order[6] = { MMS__JS_OBJ, MMS__JS_ARR, MMS__JS_STR, MMS__JS_NUM, MMS__JS_BOOL, MMS__JS_NULL };
        int t;
        for (t = 0; t < 6 && !c->err[0]; t++) {
            const int bit = order[t];
            struct mms__strbuf alt = { NULL, 0, 0, false };
            if (bit == MMS__JS_NUM ? !(types & (MMS__JS_NUM | MMS__JS_INT)) : !(types & bit)) continue;
            if (bit == MMS__JS_OBJ) mms__js_object(c, m, n, &alt);
            else if (bit == MMS__JS_ARR) mms__js_array(c, m, n, &alt);
            else if (bit == MMS__JS_STR) mms__js_string(c, m, n, &alt);
            else if (bit == MMS__JS_NUM) mms__js_number(c, m, n, !(types & MMS__JS_NUM), &alt);
            else if (bit == MMS__JS_BOOL) mms__sb_puts(&alt, "\"true\" | \"false\"");
            else mms__sb_puts(&alt, "\"null\"");
            if (!c->err[0] && alt.n) {
                if (any_alt) mms__sb_puts(&b, " | ");
                mms__sb_puts(&b, "(");
                mms__sb_put(&b, alt.s, alt.n);
                mms__sb_puts(&b, ")");
                any_alt = true;
            }
            if (alt.oom) b.oom = true;
            MMS_FREE(alt.s);
        }
    }
emit:
    if (c->err[0]) { MMS_FREE(b.s); return -1; }
    if (!any_alt) {   /* nothing validates: the caller leaves the place out, or it is an error at the root */
        c->memo[memo].rule = -1;
        MMS_FREE(b.s);
        return -1;
    }
    mms__js_ref(&c->out, rule);
    mms__sb_puts(&c->out, " ::= ");
    mms__sb_put(&c->out, b.s, b.n);
    mms__sb_puts(&c->out, "\n");
    if (b.oom) c->out.oom = true;
    MMS_FREE(b.s);
    return rule;
}

MMS_API struct mms_grammar *mms_grammar_from_json_schema(const char *schema, size_t len) {
    struct mms__js c;
    struct mms_grammar *g = NULL;
    int root;
    if (!schema) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_grammar_from_json_schema: schema is NULL"); return NULL; }
    memset(&c, 0, sizeof c);
    if (!(c.j = mms_json_parse(schema, len, "JSON schema"))) return NULL;
    root = mms__js_schema(&c, 0, "#");
    if (!c.err[0] && root < 0) snprintf(c.err, sizeof c.err, "schema at #: no JSON value validates against it");
    if (c.err[0]) mms_set_error(MMS_ERR_UNSUPPORTED, "JSON schema: %s", c.err);
    else if (c.out.oom) mms_set_error(MMS_ERR_OOM, "mms_grammar_from_json_schema: out of host memory");
    else {
        struct mms__strbuf text = { NULL, 0, 0, false };
        mms__sb_printf(&text, "root ::= s%d\n", root);
        mms__sb_put(&text, c.out.s, c.out.n);
        mms__sb_puts(&text, mms__js_base);
        if (text.oom) mms_set_error(MMS_ERR_OOM, "mms_grammar_from_json_schema: out of host memory");
        else if (!(g = mms_grammar_parse(text.s, text.n)))
            mms__error_context(mms_last_status(), "JSON schema: the compiled grammar was refused: %s", mms_last_error());
        MMS_FREE(text.s);
    }
    MMS_FREE(c.out.s);
    MMS_FREE(c.memo);
    mms_json_free((struct mms_json *)c.j);
    return g;
}

MMS_API struct mms_grammar *mms_grammar_json(bool object_only) {
    static const char any[] = "{}", object[] = "{\"type\":\"object\"}";
    return object_only ? mms_grammar_from_json_schema(object, sizeof object - 1) : mms_grammar_from_json_schema(any, sizeof any - 1);
}
