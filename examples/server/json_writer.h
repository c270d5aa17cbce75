/* json_writer.h - a growing byte buffer and a JSON writer on it, for mllama-server's answers.

   Strings are written as valid JSON whatever their bytes: quotes, backslashes and control
   characters escaped, U+2028 and U+2029 escaped too (JavaScript reads them as line ends), and
   bytes that are not valid UTF-8 written as U+FFFD, one per maximal invalid subpart (as Python's
   bytes.decode('utf-8', 'replace') does). Numbers that are not finite are written as null. Out of
   memory sets buf->oom and stops writing; the caller checks it once at the end. */
#ifndef MLLAMA_SERVER_JSON_WRITER_H
#define MLLAMA_SERVER_JSON_WRITER_H

#include "part.h"


#include <math.h>

struct sbuf {
    char  *data;   /* NUL-terminated while not oom */
    size_t len, cap;
    bool   oom;
};

SRV_FN bool sb_reserve(struct sbuf *b, size_t more) {
    size_t cap;
    char *d;
    if (b->oom) return false;
    if (b->len + more + 1 <= b->cap) return true;
    cap = b->cap ? b->cap : 256;
    while (cap < b->len + more + 1) {
        if (cap > ((size_t)-1) / 2) { b->oom = true; return false; }
        cap *= 2;
    }
    if (!(d = (char *)realloc(b->data, cap))) { b->oom = true; return false; }
    b->data = d;
    b->cap = cap;
    return true;
}

SRV_FN void sb_put(struct sbuf *b, const void *s, size_t n) {
    if (!sb_reserve(b, n)) return;
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

SRV_FN void sb_puts(struct sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 2, 3)))
#endif
SRV_FN void sb_printf(struct sbuf *b, const char *fmt, ...) {
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !sb_reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

SRV_FN void sb_clear(struct sbuf *b) {
    b->len = 0;
    if (b->data) b->data[0] = '\0';
}

SRV_FN void sb_free(struct sbuf *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* The length of the valid UTF-8 sequence at s (1-4 bytes), or 0 when it is not one (overlong
   forms, surrogates and code points past U+10FFFF are not). *cp gets its code point. Also the
   length of the maximal invalid subpart in *bad when 0 is returned. */
SRV_FN int utf8_seq(const unsigned char *s, size_t n, uint32_t *cp, int *bad) {
    unsigned char c = s[0];
    int need, i;
    uint32_t lo = 0x80, hi = 0xBF, v;
    *bad = 1;
    if (c < 0x80) { *cp = c; return 1; }
    if (c >= 0xC2 && c <= 0xDF) { need = 1; v = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { need = 2; v = c & 0x0F; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { need = 3; v = c & 0x07; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else return 0;
    for (i = 1; i <= need; i++) {
        unsigned char x;
        if ((size_t)i >= n) return 0;
        x = s[i];
        if (x < lo || x > hi) return 0;
        lo = 0x80;
        hi = 0xBF;
        v = (v << 6) | (x & 0x3F);
        *bad = i + 1;
    }
    *cp = v;
    return need + 1;
}

/* A JSON string literal of n bytes of s. */
SRV_FN void json_write_string(struct sbuf *b, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, run = 0;
    sb_put(b, "\"", 1);
    while (i < n) {
        unsigned char c = u[i];
        uint32_t cp;
        int bad, k;
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') { i++; run++; continue; }
        sb_put(b, s + i - run, run);
        run = 0;
        if (c < 0x80) {
            switch (c) {
            case '"':  sb_puts(b, "\\\""); break;
            case '\\': sb_puts(b, "\\\\"); break;
            case '\n': sb_puts(b, "\\n"); break;
            case '\r': sb_puts(b, "\\r"); break;
            case '\t': sb_puts(b, "\\t"); break;
            case '\b': sb_puts(b, "\\b"); break;
            case '\f': sb_puts(b, "\\f"); break;
            default:   sb_printf(b, "\\u%04x", c); break;
            }
            i++;
            continue;
        }
        k = utf8_seq(u + i, n - i, &cp, &bad);
        if (k == 0) { sb_puts(b, "\xEF\xBF\xBD"); i += (size_t)bad; continue; }
        if (cp == 0x2028 || cp == 0x2029) sb_printf(b, "\\u%04x", (unsigned)cp);
        else sb_put(b, s + i, (size_t)k);
        i += (size_t)k;
    }
    sb_put(b, s + i - run, run);
    sb_put(b, "\"", 1);
}

/* The writer: it puts the commas and colons. Nesting deeper than JW_DEPTH sets oom (a bug). */
#define JW_DEPTH 32
struct jw {
    struct sbuf *b;
    int          depth;
    bool         has_items[JW_DEPTH];
    bool         after_key;
};

SRV_FN void jw_init(struct jw *w, struct sbuf *b) {
    memset(w, 0, sizeof *w);
    w->b = b;
}

SRV_FN void jw__item(struct jw *w) {
    if (w->after_key) { w->after_key = false; return; }
    if (w->has_items[w->depth]) sb_put(w->b, ",", 1);
    w->has_items[w->depth] = true;
}

SRV_FN void jw__open(struct jw *w, const char *c) {
    jw__item(w);
    if (w->depth + 1 >= JW_DEPTH) { w->b->oom = true; return; }
    sb_puts(w->b, c);
    w->has_items[++w->depth] = false;
}

SRV_FN void jw__close(struct jw *w, const char *c) {
    if (w->depth > 0) w->depth--;
    sb_puts(w->b, c);
}

SRV_FN void jw_object(struct jw *w) { jw__open(w, "{"); }
SRV_FN void jw_end_object(struct jw *w) { jw__close(w, "}"); }
SRV_FN void jw_array(struct jw *w) { jw__open(w, "["); }
SRV_FN void jw_end_array(struct jw *w) { jw__close(w, "]"); }

SRV_FN void jw_key(struct jw *w, const char *key) {
    jw__item(w);
    json_write_string(w->b, key, strlen(key));
    sb_put(w->b, ":", 1);
    w->after_key = true;
}

SRV_FN void jw_strn(struct jw *w, const char *s, size_t n) { jw__item(w); json_write_string(w->b, s, n); }
SRV_FN void jw_str(struct jw *w, const char *s) { jw_strn(w, s, strlen(s)); }
SRV_FN void jw_int(struct jw *w, int64_t v) { jw__item(w); sb_printf(w->b, "%lld", (long long)v); }
SRV_FN void jw_bool(struct jw *w, bool v) { jw__item(w); sb_puts(w->b, v ? "true" : "false"); }
SRV_FN void jw_null(struct jw *w) { jw__item(w); sb_puts(w->b, "null"); }
/* The shortest of %.15g, %.16g, %.17g that reads back as the same double. */
SRV_FN void jw_num(struct jw *w, double v) {
    char s[40];
    int digits;
    jw__item(w);
    if (!isfinite(v)) { sb_puts(w->b, "null"); return; }
    for (digits = 15; digits < 17; digits++) {
        snprintf(s, sizeof s, "%.*g", digits, v);
        if (strtod(s, NULL) == v) break;
    }
    snprintf(s, sizeof s, "%.*g", digits, v);
    sb_puts(w->b, s);
}

/* key: value shorthands */
SRV_FN void jw_kstr(struct jw *w, const char *k, const char *v) { jw_key(w, k); jw_str(w, v); }
SRV_FN void jw_kint(struct jw *w, const char *k, int64_t v) { jw_key(w, k); jw_int(w, v); }
SRV_FN void jw_kbool(struct jw *w, const char *k, bool v) { jw_key(w, k); jw_bool(w, v); }
SRV_FN void jw_knull(struct jw *w, const char *k) { jw_key(w, k); jw_null(w); }

#endif
