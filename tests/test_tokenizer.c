/* The Llama 3 tokenizer against Hugging Face tokenizers: tests/fixtures/text/tok-cases.gguf holds
   the cases and HF's ids and decoded texts for three vocabularies, a small one trained with HF
   (tok-bpe.gguf), the genuine Llama 3 one, pruned to the corpus (tok-llama3.gguf), and the bundled
   demo model's (models/mllama-demo.gguf); all made by
   tools/gen_tokenizer_fixtures.py, which documents the keys. Plus round trips, streaming, the bos
   rule, hostile vocabulary files, bad arguments and a (not timed) check that long input is fast. */
#define MMSCHED_IMPLEMENTATION
#include "../mmsched.h"
#include "test.h"

#define FIXTURES "tests/fixtures/text/"

static struct mms_gguf *fx;
static char hostile_path[1024];

/* -- fixture access -- */

static int32_t *fx_i32s(const char *key, int64_t *n) {
    int32_t *v;
    *n = 0;
    if (mms_gguf_get_arr_i32(fx, key, NULL, 0, n) != MMS_OK) { EXPECT(0, "fixture key %s: %s", key, mms_last_error()); return NULL; }
    v = (int32_t *)malloc((size_t)(*n + 1) * sizeof *v);
    if (v && mms_gguf_get_arr_i32(fx, key, v, *n, NULL) != MMS_OK) { free(v); return NULL; }
    return v;
}

static const char *fx_str(const char *key, int64_t i, size_t *len) {
    const char *s = NULL;
    *len = 0;
    if (mms_gguf_get_arr_str(fx, key, i, &s, len) != MMS_OK) EXPECT(0, "fixture key %s[%lld]: %s", key, (long long)i, mms_last_error());
    return s ? s : "";
}

static int32_t fx_int(const char *key) {
    int32_t v = -2;
    EXPECT(mms_gguf_get_i32(fx, key, &v) == MMS_OK, "fixture key %s: %s", key, mms_last_error());
    return v;
}

static int n_cases(void) {
    uint32_t n = 0;
    EXPECT(mms_gguf_get_u32(fx, "cases.count", &n) == MMS_OK, "cases.count: %s", mms_last_error());
    return (int)n;
}

static void show_bytes(const char *what, const char *s, size_t n) {
    size_t i;
    printf("      %s (%zu bytes): ", what, n);
    for (i = 0; i < n && i < 80; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 32 && c < 127) putchar(c); else printf("\\x%02x", c);
    }
    printf("%s\n", i < n ? "..." : "");
}

static struct mms_vocab *load_vocab(const char *prefix) {
    char key[128], path[512];
    const char *file = NULL;
    size_t len = 0;
    struct mms_vocab *v;
    snprintf(key, sizeof key, "%s.file", prefix);
    if (mms_gguf_get_str(fx, key, &file, &len) != MMS_OK) { EXPECT(0, "fixture key %s: %s", key, mms_last_error()); return NULL; }
    snprintf(path, sizeof path, FIXTURES "%.*s", (int)len, file);
    v = mms_vocab_load_file(path);
    EXPECT(v != NULL, "load %s: %s", path, mms_last_error());
    return v;
}

/* Tokenizes into a fresh array (caller frees); count in *n. */
static int32_t *tok(const struct mms_vocab *v, const char *s, size_t len, bool bos, bool special, int *n) {
    int32_t *ids;
    *n = mms_tokenize(v, s, len, NULL, 0, bos, special);
    if (*n < 0) return NULL;
    ids = (int32_t *)malloc((size_t)*n * sizeof *ids + 4);
    if (mms_tokenize(v, s, len, ids, *n, bos, special) != *n) { free(ids); *n = -1; return NULL; }
    return ids;
}

static char *detok(const struct mms_vocab *v, const int32_t *ids, int n, bool render, int *len) {
    char *buf;
    *len = mms_detokenize(v, ids, n, NULL, 0, render);
    if (*len < 0) return NULL;
    buf = (char *)malloc((size_t)*len + 1);
    if (mms_detokenize(v, ids, n, buf, *len + 1, render) != *len || buf[*len] != '\0') { free(buf); *len = -1; return NULL; }
    return buf;
}

/* The streaming detokenizer's text for ids (caller frees). */
static char *stream(const struct mms_vocab *v, const int32_t *ids, int n, bool render, int *len) {
    struct mms_detokenizer d;
    char piece[512];
    size_t cap = 64, used = 0;
    char *out = (char *)malloc(cap);
    int i, r;
    memset(&d, 0, sizeof d);
    for (i = 0; i <= n; i++) {
        r = i < n ? mms_detokenizer_push(v, &d, ids[i], piece, (int)sizeof piece, render) : mms_detokenizer_flush(&d, piece, (int)sizeof piece);
        if (r < 0 || piece[r] != '\0') { free(out); *len = -1; return NULL; }
        while (used + (size_t)r + 1 > cap) out = (char *)realloc(out, cap *= 2);
        memcpy(out + used, piece, (size_t)r);
        used += (size_t)r;
        /* whole characters only: what came out so far is valid UTF-8 on its own */
    }
    out[used] = '\0';
    *len = (int)used;
    return out;
}

static bool is_valid_utf8(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        bool inc;
        int u = mms__tok_utf8_unit((const unsigned char *)s + i, n - i, &cp, &inc);
        if (u < 0) return false;
        i += (size_t)u;
    }
    return true;
}

/* -- the fixture cases -- */

static long total_ids_checked;

static void check_vocab_cases(const char *prefix) {
    struct mms_vocab *v = load_vocab(prefix);
    char key[128];
    int n = n_cases(), k, mode, mismatches = 0, dec_bad = 0, stream_bad = 0, rt_bad = 0, bos_bad = 0;
    int64_t n_on_off[2], n_ids[2], ne;
    int32_t *offs[2], *ids[2], *eog;
    if (!v || n <= 0) { mms_vocab_free(v); return; }
    EXPECT(mms_vocab_n_tokens(v) == fx_int(strcat(strcpy(key, prefix), ".n_tokens")), "%s: n_tokens %d", prefix, mms_vocab_n_tokens(v));
    EXPECT(mms_vocab_bos(v) == fx_int(strcat(strcpy(key, prefix), ".bos")), "%s: bos %d", prefix, mms_vocab_bos(v));
    EXPECT(mms_vocab_eos(v) == fx_int(strcat(strcpy(key, prefix), ".eos")), "%s: eos %d", prefix, mms_vocab_eos(v));
    eog = fx_i32s(strcat(strcpy(key, prefix), ".eog"), &ne);
    if (eog) {
        int32_t id, n_eog = 0;
        for (k = 0; k < (int)ne; k++) EXPECT(mms_vocab_is_eog(v, eog[k]), "%s: %d is end of generation", prefix, (int)eog[k]);
        for (id = 0; id < mms_vocab_n_tokens(v); id++) n_eog += mms_vocab_is_eog(v, id);
        EXPECT(n_eog == (int32_t)ne, "%s: %d end-of-generation ids, the fixture has %d", prefix, (int)n_eog, (int)ne);
        EXPECT(ne >= 2, "%s: eog ids", prefix);
        free(eog);
    }
    EXPECT(!mms_vocab_is_eog(v, mms_vocab_bos(v)) && !mms_vocab_is_eog(v, -1) && !mms_vocab_is_eog(v, mms_vocab_n_tokens(v)),
           "%s: bos, -1 and n are not eog", prefix);
    for (mode = 0; mode < 2; mode++) {
        snprintf(key, sizeof key, "%s.%s.offsets", prefix, mode ? "off" : "on");
        offs[mode] = fx_i32s(key, &n_on_off[mode]);
        snprintf(key, sizeof key, "%s.%s.ids", prefix, mode ? "off" : "on");
        ids[mode] = fx_i32s(key, &n_ids[mode]);
        EXPECT(offs[mode] && n_on_off[mode] == n + 1, "%s: offsets", key);
    }
    if (!offs[0] || !offs[1] || !ids[0] || !ids[1] || n_on_off[0] != n + 1 || n_on_off[1] != n + 1) goto done;
    EXPECT(offs[0][n] > 1000 && offs[1][n] > 1000, "%s: the fixture has ids (%d, %d)", prefix, (int)offs[0][n], (int)offs[1][n]);

    for (k = 0; k < n; k++) {
        size_t len, dlen[3];
        const char *text = fx_str("cases.text", k, &len), *dec[3];
        int got_n, i, dl;
        int32_t *got;
        snprintf(key, sizeof key, "%s.decode_special", prefix); dec[0] = fx_str(key, k, &dlen[0]);
        snprintf(key, sizeof key, "%s.decode_plain", prefix);   dec[1] = fx_str(key, k, &dlen[1]);
        snprintf(key, sizeof key, "%s.decode_off", prefix);     dec[2] = fx_str(key, k, &dlen[2]);
        for (mode = 0; mode < 2; mode++) {
            const int32_t *want = ids[mode] + offs[mode][k];
            int want_n = offs[mode][k + 1] - offs[mode][k], r;
            char *s;
            got = tok(v, text, len, false, mode == 0, &got_n);
            if (!got || got_n != want_n || memcmp(got, want, (size_t)want_n * sizeof *want) != 0) {
                if (mismatches++ < 5) {
                    printf("    %s case %d, parse_special %d: %d ids, HF has %d\n", prefix, k, mode == 0, got_n, want_n);
                    show_bytes("text", text, len);
                    printf("      got:");
                    for (i = 0; got && i < got_n && i < 24; i++) printf(" %d", (int)got[i]);
                    printf("\n      HF: ");
                    for (i = 0; i < want_n && i < 24; i++) printf(" %d", (int)want[i]);
                    printf("\n");
                }
            }
            total_ids_checked += want_n;
            free(got);
            /* decoding HF's ids: whole, streamed, with and without the special tokens */
            for (r = 0; r < (mode == 0 ? 2 : 1); r++) {
                const char *wd = dec[mode == 0 ? r : 2];
                size_t wl = dlen[mode == 0 ? r : 2];
                s = detok(v, want, want_n, r == 0, &dl);
                if (!s || (size_t)dl != wl || memcmp(s, wd, wl) != 0) {
                    if (dec_bad++ < 5) { printf("    %s case %d decode (render %d)\n", prefix, k, r == 0); show_bytes("got", s ? s : "", s ? (size_t)dl : 0); show_bytes("HF ", wd, wl); }
                }
                free(s);
                s = stream(v, want, want_n, r == 0, &dl);
                if (!s || (size_t)dl != wl || memcmp(s, wd, wl) != 0) {
                    if (stream_bad++ < 5) { printf("    %s case %d stream (render %d)\n", prefix, k, r == 0); show_bytes("got", s ? s : "", s ? (size_t)dl : 0); show_bytes("HF ", wd, wl); }
                }
                free(s);
            }
        }
        /* round trip: byte-level BPE keeps every byte of valid UTF-8 */
        if (is_valid_utf8(text, len)) {
            char *s;
            got = tok(v, text, len, false, false, &got_n);
            s = got ? detok(v, got, got_n, true, &dl) : NULL;
            if (!s || (size_t)dl != len || memcmp(s, text, len) != 0) { if (rt_bad++ < 3) show_bytes("round trip", text, len); }
            free(s);
            free(got);
        }
        /* add_bos: one bos in front, never two */
        got = tok(v, text, len, true, true, &got_n);
        {
            int want_n = offs[0][k + 1] - offs[0][k];
            bool starts = want_n > 0 && ids[0][offs[0][k]] == mms_vocab_bos(v);
            if (!got || got_n != want_n + (starts ? 0 : 1) || got[0] != mms_vocab_bos(v) || (got_n > 1 && got[1] == mms_vocab_bos(v) && !(want_n > 1 && ids[0][offs[0][k] + 1] == mms_vocab_bos(v))))
                if (bos_bad++ < 3) show_bytes("add_bos", text, len);
        }
        free(got);
    }
    EXPECT(mismatches == 0, "%s: %d tokenizations differ from HF", prefix, mismatches);
    EXPECT(dec_bad == 0, "%s: %d decodes differ from HF", prefix, dec_bad);
    EXPECT(stream_bad == 0, "%s: %d streamed decodes differ from HF", prefix, stream_bad);
    EXPECT(rt_bad == 0, "%s: %d round trips failed", prefix, rt_bad);
    EXPECT(bos_bad == 0, "%s: %d add_bos results wrong", prefix, bos_bad);
    printf("    %s: %d cases, %lld + %lld ids\n", prefix, n, (long long)n_ids[0], (long long)n_ids[1]);
done:
    for (mode = 0; mode < 2; mode++) { free(offs[mode]); free(ids[mode]); }
    mms_vocab_free(v);
}

static void test_bpe_vocab_cases(void) { check_vocab_cases("bpe"); }
static void test_llama3_vocab_cases(void) { check_vocab_cases("llama3"); }
static void test_demo_vocab_cases(void) { check_vocab_cases("demo"); }   /* the bundled model's */

/* -- specific behaviour -- */

static void test_special_tokens(void) {
    struct mms_vocab *v = mms_vocab_load_file(FIXTURES "tok-llama3.gguf");
    int32_t ids[16], img, bos;
    int n;
    char buf[64];
    EXPECT(v != NULL, "load: %s", mms_last_error());
    if (!v) return;
    test_capture_log();
    img = mms_vocab_find(v, "<|image|>");
    bos = mms_vocab_bos(v);
    EXPECT(img == 128256 && bos == 128000, "<|image|> %d, bos %d", (int)img, (int)bos);
    EXPECT(mms_vocab_token_type(v, img) == MMS_TOKEN_CONTROL && mms_vocab_token_type(v, 0) == MMS_TOKEN_NORMAL, "types");
    EXPECT(mms_vocab_token_type(v, -1) == 0 && mms_vocab_token_type(v, 128257) == 0, "bad id type 0");
    EXPECT(mms_vocab_token_text(v, img) && strcmp(mms_vocab_token_text(v, img), "<|image|>") == 0, "token text");
    EXPECT(mms_vocab_token_text(v, 128257) == NULL && mms_vocab_find(v, "no such token text") == -1, "bad id / text");
    n = mms_tokenize(v, "<|image|>", 9, ids, 16, false, true);
    EXPECT(n == 1 && ids[0] == img, "one token, got %d", n);
    n = mms_tokenize(v, "<|image|>", 9, ids, 16, false, false);
    EXPECT(n > 1, "as text: %d tokens", n);
    n = mms_tokenize(v, "<|begin_of_text|>Hi", 19, ids, 16, true, true);
    EXPECT(n == 1 + mms_tokenize(v, "Hi", 2, NULL, 0, false, true) && ids[0] == bos && ids[1] != bos, "no double bos: %d", n);
    n = mms_tokenize(v, "<|begin_of_text|>Hi", 19, ids, 16, true, false);
    EXPECT(n > 2 && ids[0] == bos && ids[1] != bos, "text is not bos: %d", n);
    n = mms_tokenize(v, "", 0, ids, 16, true, true);
    EXPECT(n == 1 && ids[0] == bos, "empty with bos: %d", n);
    n = mms_tokenize(v, "", 0, NULL, 0, false, true);
    EXPECT(n == 0, "empty: %d", n);
    n = mms_token_to_piece(v, img, buf, sizeof buf, true);
    EXPECT(n == 9 && memcmp(buf, "<|image|>", 9) == 0, "render special");
    EXPECT(mms_token_to_piece(v, img, buf, sizeof buf, false) == 0, "hidden special");
    EXPECT(mms_token_to_piece(v, 128257, buf, sizeof buf, true) == MMS_ERR_INVALID_ARG, "bad id");
    EXPECT(mms_token_to_piece(v, -1, buf, sizeof buf, true) == MMS_ERR_INVALID_ARG, "negative id");
    /* an emoji split over byte tokens streams out whole */
    {
        struct mms_detokenizer d;
        int32_t b[4];
        const unsigned char smile[4] = { 0xF0, 0x9F, 0x98, 0x80 };
        int i, r, total = 0;
        char out[64];
        for (i = 0; i < 4; i++) b[i] = mms_tokenize(v, (const char *)smile + i, 1, &b[i], 1, false, false) == 1 ? b[i] : -1;
        memset(&d, 0, sizeof d);
        for (i = 0; i < 4; i++) {
            r = mms_detokenizer_push(v, &d, b[i], out, sizeof out, true);
            EXPECT(r == (i == 3 ? 4 : 0), "push %d gives %d", i, r);
            if (r == 4) EXPECT(memcmp(out, smile, 4) == 0, "the emoji");
            total += r > 0 ? r : 0;
        }
        EXPECT(mms_detokenizer_flush(&d, out, sizeof out) == 0 && total == 4, "flush");
        /* a cut character at the end: one U+FFFD from flush */
        memset(&d, 0, sizeof d);
        EXPECT(mms_detokenizer_push(v, &d, b[0], out, sizeof out, true) == 0, "pending");
        EXPECT(mms_detokenizer_push(v, &d, b[1], out, sizeof out, true) == 0, "pending");
        r = mms_detokenizer_flush(&d, out, sizeof out);
        EXPECT(r == 3 && memcmp(out, "\xEF\xBF\xBD", 4) == 0, "flush gives U+FFFD: %d", r);
        /* too little room: an error, and the state is kept for a retry */
        memset(&d, 0, sizeof d);
        mms_detokenizer_push(v, &d, b[0], out, sizeof out, true);
        mms_detokenizer_push(v, &d, b[1], out, sizeof out, true);
        mms_detokenizer_push(v, &d, b[2], out, sizeof out, true);
        EXPECT(mms_detokenizer_push(v, &d, b[3], out, 4, true) == MMS_ERR_INVALID_ARG, "no room for the NUL");
        EXPECT(mms_detokenizer_push(v, &d, b[3], out, 5, true) == 4 && memcmp(out, smile, 4) == 0, "retry");
        EXPECT(mms_detokenizer_push(v, &d, -3, out, 5, true) == MMS_ERR_INVALID_ARG, "bad id");
        EXPECT(mms_detokenizer_push(v, NULL, 0, out, 5, true) == MMS_ERR_INVALID_ARG, "NULL state");
        EXPECT(mms_detokenizer_flush(&d, NULL, 0) == MMS_ERR_INVALID_ARG, "no buffer");
    }
    mms_log_set(NULL, NULL);
    mms_vocab_free(v);
}

static void test_user_defined(void) {
    struct mms_vocab *v = mms_vocab_load_file(FIXTURES "tok-bpe.gguf");
    int32_t ids[8], u, img;
    int n;
    char buf[32];
    EXPECT(v != NULL, "load: %s", mms_last_error());
    if (!v) return;
    u = mms_vocab_find(v, "<|image|><|image|>");
    img = mms_vocab_find(v, "<|image|>");
    EXPECT(u >= 0 && img >= 0 && mms_vocab_token_type(v, u) == MMS_TOKEN_USER_DEFINED, "user-defined token %d", (int)u);
    n = mms_tokenize(v, "<|image|><|image|><|image|>", 27, ids, 8, false, true);
    EXPECT(n == 2 && ids[0] == u && ids[1] == img, "longest match first: %d", n);
    EXPECT(mms_token_to_piece(v, u, buf, sizeof buf, false) == 18, "user-defined tokens are rendered without render_special");
    n = mms_tokenize(v, "<tool>", 6, ids, 8, false, true);
    EXPECT(n == 1 && mms_token_to_piece(v, ids[0], buf, sizeof buf, false) == 6 && memcmp(buf, "<tool>", 6) == 0, "<tool>");
    mms_vocab_free(v);
}

static void test_buffers_and_args(void) {
    struct mms_vocab *v = mms_vocab_load_file(FIXTURES "tok-bpe.gguf");
    const char *text = "Hello world, this is a longer text with several tokens in it.";
    int32_t ids[64], few[64];
    int n, m, i;
    char buf[256], small[8];
    EXPECT(v != NULL, "load: %s", mms_last_error());
    if (!v) return;
    n = mms_tokenize(v, text, strlen(text), ids, 64, false, true);
    EXPECT(n > 5 && n < 64, "%d tokens", n);
    for (i = 0; i < 64; i++) few[i] = -7;
    m = mms_tokenize(v, text, strlen(text), few, 3, false, true);
    EXPECT(m == n && few[3] == -7 && memcmp(few, ids, 3 * sizeof *ids) == 0, "cap 3: count %d, the rest untouched", m);
    m = mms_detokenize(v, ids, n, buf, sizeof buf, true);
    EXPECT(m == (int)strlen(text) && strcmp(buf, text) == 0, "detokenize");
    memset(small, 'x', sizeof small);
    m = mms_detokenize(v, ids, n, small, 5, true);
    EXPECT(m == (int)strlen(text) && memcmp(small, text, 5) == 0 && small[5] == 'x', "cap 5: count %d, 5 bytes, no NUL", m);
    m = mms_detokenize(v, ids, n, buf, (int)strlen(text), true);
    EXPECT(m == (int)strlen(text) && memcmp(buf, text, (size_t)m) == 0, "exactly the bytes, no room for the NUL");
    memset(small, 'x', sizeof small);
    m = mms_token_to_piece(v, ids[0], small, 2, true);
    EXPECT(m == 5 && memcmp(small, "He", 2) == 0 && small[2] == 'x', "piece cap 2: %d", m);
    EXPECT(mms_token_to_piece(v, ids[0], NULL, 0, true) == 5, "piece size query");

    mms_clear_error();
    test_capture_log();
    EXPECT(mms_tokenize(NULL, "a", 1, ids, 4, false, true) == MMS_ERR_INVALID_ARG, "NULL vocab");
    EXPECT(mms_tokenize(v, NULL, 1, ids, 4, false, true) == MMS_ERR_INVALID_ARG, "NULL text");
    EXPECT(mms_tokenize(v, NULL, 0, ids, 4, false, false) == 0, "NULL empty text");
    EXPECT(mms_tokenize(v, "a", 1, NULL, 4, false, true) == MMS_ERR_INVALID_ARG, "NULL out");
    EXPECT(mms_tokenize(v, "a", 1, ids, -1, false, true) == MMS_ERR_INVALID_ARG, "negative cap");
    EXPECT(mms_detokenize(v, NULL, 2, buf, 8, true) == MMS_ERR_INVALID_ARG, "NULL ids");
    ids[0] = mms_vocab_n_tokens(v);
    EXPECT(mms_detokenize(v, ids, 1, buf, 8, true) == MMS_ERR_INVALID_ARG, "id out of range");
    EXPECT(mms_detokenize(v, ids, 0, buf, 8, true) == 0 && buf[0] == '\0', "no ids");
    EXPECT(mms_detokenize(NULL, ids, 1, buf, 8, true) == MMS_ERR_INVALID_ARG, "NULL vocab");
    EXPECT(mms_vocab_load(NULL) == NULL && mms_last_status() == MMS_ERR_INVALID_ARG, "load NULL");
    EXPECT(mms_vocab_load_file(FIXTURES "no-such-file.gguf") == NULL && mms_last_status() == MMS_ERR_IO, "missing file");
    EXPECT(mms_vocab_n_tokens(NULL) == 0 && mms_vocab_bos(NULL) == -1 && mms_vocab_find(NULL, "a") == -1, "NULL getters");
    mms_vocab_free(NULL);
    mms_log_set(NULL, NULL);
    mms_vocab_free(v);
}

/* The pre-tokenizer's pieces of s, as "|"-separated byte lengths, with the library's own parts. */
static void pieces(const char *s, char *out, size_t cap) {
    uint32_t cp[64];
    uint8_t cl[64];
    size_t off[65], n, i, o = 0;
    n = mms__tok_decode_cps((const unsigned char *)s, strlen(s), cp, cl, off);   /* s is short: at most 64 code points */
    out[0] = '\0';
    for (i = 0; i < n;) {
        size_t j = mms__tok_match(cp, cl, i, n);
        o += (size_t)snprintf(out + o, cap - o, "%s%zu", i ? "|" : "", off[j] - off[i]);
        i = j;
    }
}

static void test_pieces(void) {
    static const char *cases[][2] = {
        { "Hello world", "5|6" }, { "  hello", "1|6" }, { "a  \n\n  b", "1|4|1|2" }, { "x   ", "1|3" }, { "x   y", "1|2|2" },
        { "it's", "2|2" }, { "'DAY", "2|2" }, { "'llama", "3|3" }, { "'\xC5\xBFo", "3|1" }, { "12345", "3|2" },
        { " !!\n\nx", "5|1" }, { "\xE2\x82" "abc", "5" },   /* one U+FFFD for a cut character: it prefixes the letters */
        { "\xFF\xFE" "abc", "2|3" },                         /* two U+FFFD: a punctuation run, then the letters */
        { "\xC2\xA0" "a", "3" }, { "\xE3\x80\x80\xE3\x80\x80", "6" }, { "a\x1F" "b", "1|2" }, { "\r\n\r\n", "4" },
    };
    size_t i;
    char got[256];
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pieces(cases[i][0], got, sizeof got);
        EXPECT(strcmp(got, cases[i][1]) == 0, "case %d: pieces %s, expected %s", (int)i, got, cases[i][1]);
    }
}

/* -- hostile vocabulary files, made with the library's writer -- */

enum { H_OK, H_NO_MODEL, H_MODEL_LLAMA, H_MODEL_TYPE, H_NO_TOKENS, H_TOKENS_TYPE, H_TYPE_COUNT, H_TYPE_VALUE, H_NO_TYPES,
       H_NO_MERGES, H_MERGE_UNKNOWN, H_MERGE_NO_SPACE, H_MERGE_RESULT, H_BOS_RANGE, H_EOS_IDS_RANGE, H_EMPTY_TOKEN,
       H_MISSING_BYTE, H_COUNT };

static const char *write_hostile(int which) {
    struct mms_gguf_writer *w = mms_gguf_writer_new();
    const char *toks[300], *merges[4] = { "h e", "l l", "he ll", "hell o" };
    char store[300][8];
    int32_t types[300];
    int n = 0, b, i;
    for (b = 0; b < 256; b++) {   /* GPT-2's byte characters, in UTF-8 */
        uint32_t cp = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174 ? (uint32_t)b : 0;
        if (!cp) { int k = 0, j; for (j = 0; j < b; j++) k += !((j >= 33 && j <= 126) || (j >= 161 && j <= 172) || j >= 174); cp = 256u + (uint32_t)k; }
        store[n][mms__tok_put_utf8(cp, (unsigned char *)store[n])] = '\0';
        toks[n] = store[n];
        types[n++] = MMS_TOKEN_NORMAL;
    }
    toks[n] = "he"; types[n++] = MMS_TOKEN_NORMAL;
    toks[n] = "ll"; types[n++] = MMS_TOKEN_NORMAL;
    toks[n] = "hell"; types[n++] = MMS_TOKEN_NORMAL;
    toks[n] = "hello"; types[n++] = MMS_TOKEN_NORMAL;
    toks[n] = "<|eot_id|>"; types[n++] = MMS_TOKEN_CONTROL;
    if (which == H_EMPTY_TOKEN) toks[n - 3] = "";
    if (which == H_MISSING_BYTE) toks['a'] = "aa";
    if (which == H_TYPE_VALUE) types[5] = 9;
    if (which == H_MERGE_UNKNOWN) merges[1] = "l q\xC4\xA0zz";
    if (which == H_MERGE_NO_SPACE) merges[2] = "hell";
    if (which == H_MERGE_RESULT) merges[3] = "he he";
    if (which != H_NO_MODEL) {
        if (which == H_MODEL_TYPE) mms_gguf_writer_set_u32(w, "tokenizer.ggml.model", 2);
        else mms_gguf_writer_set_str(w, "tokenizer.ggml.model", which == H_MODEL_LLAMA ? "llama" : "gpt2");
    }
    if (which == H_TOKENS_TYPE) mms_gguf_writer_set_arr_i32(w, "tokenizer.ggml.tokens", types, n);
    else if (which != H_NO_TOKENS) mms_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, n);
    if (which != H_NO_TYPES) mms_gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", types, which == H_TYPE_COUNT ? n - 1 : n);
    if (which != H_NO_MERGES) mms_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, 4);
    if (which == H_BOS_RANGE) mms_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)n);
    if (which == H_EOS_IDS_RANGE) { int32_t e[2] = { n - 1, n + 5 }; mms_gguf_writer_set_arr_i32(w, "tokenizer.ggml.eos_token_ids", e, 2); }
    i = mms_gguf_writer_write(w, hostile_path) == MMS_OK;
    mms_gguf_writer_free(w);
    EXPECT(i, "write %s: %s", hostile_path, mms_last_error());
    return hostile_path;
}

static void test_hostile_vocab(void) {
    static const struct { int which; const char *key; } cases[] = {
        { H_NO_MODEL, "tokenizer.ggml.model" }, { H_MODEL_LLAMA, "tokenizer.ggml.model" }, { H_MODEL_TYPE, "tokenizer.ggml.model" },
        { H_NO_TOKENS, "tokenizer.ggml.tokens" }, { H_TOKENS_TYPE, "tokenizer.ggml.tokens" },
        { H_TYPE_COUNT, "tokenizer.ggml.token_type" }, { H_TYPE_VALUE, "tokenizer.ggml.token_type[5]" },
        { H_NO_TYPES, "tokenizer.ggml.token_type" }, { H_NO_MERGES, "tokenizer.ggml.merges" },
        { H_MERGE_UNKNOWN, "tokenizer.ggml.merges[1]" }, { H_MERGE_NO_SPACE, "tokenizer.ggml.merges[2]" },
        { H_MERGE_RESULT, "tokenizer.ggml.merges[3]" }, { H_BOS_RANGE, "tokenizer.ggml.bos_token_id" },
        { H_EOS_IDS_RANGE, "tokenizer.ggml.eos_token_ids[1]" }, { H_EMPTY_TOKEN, "tokenizer.ggml.tokens[258]" },
        { H_MISSING_BYTE, "byte 0x61" },
    };
    size_t i;
    struct mms_vocab *v;
    int32_t ids[8];
    int n;
    char buf[16];
    test_capture_log();
    v = mms_vocab_load_file(write_hostile(H_OK));
    EXPECT(v != NULL, "the valid base: %s", mms_last_error());
    if (v) {
        n = mms_tokenize(v, "hello", 5, ids, 8, false, true);
        EXPECT(n == 1 && ids[0] == 259, "hello is one token: %d", n);
        n = mms_tokenize(v, "hellhe", 6, ids, 8, false, true);
        EXPECT(n == 2 && ids[0] == 258 && ids[1] == 256, "hell + he: %d", n);
        EXPECT(mms_tokenize(v, "a", 1, ids, 8, true, true) == MMS_ERR_STATE, "add_bos without bos");
        EXPECT(mms_vocab_bos(v) == -1 && mms_vocab_eos(v) == -1 && mms_vocab_is_eog(v, 260), "no bos/eos, <|eot_id|> is eog");
        EXPECT(mms_detokenize(v, ids, n, buf, sizeof buf, true) == 6 && strcmp(buf, "hellhe") == 0, "decode");
        mms_vocab_free(v);
    }
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mms_clear_error();
        v = mms_vocab_load_file(write_hostile(cases[i].which));
        EXPECT(v == NULL && mms_last_status() == MMS_ERR_FORMAT && strstr(mms_last_error(), cases[i].key) &&
               strstr(mms_last_error(), hostile_path), "hostile %d: FORMAT naming %s and the file; got %d: %s", cases[i].which,
               cases[i].key, (int)mms_last_status(), mms_last_error());
        mms_vocab_free(v);
    }
    remove(hostile_path);
    mms_log_set(NULL, NULL);
}

/* -- speed (reported, not asserted) -- */

static void long_input(const struct mms_vocab *v, const char *what, char fill, size_t len) {
    char *s = (char *)malloc(len), *back;
    int32_t *ids;
    int n, bl;
    int64_t t0;
    memset(s, fill, len);
    t0 = mms_time_us();
    ids = tok(v, s, len, false, true, &n);
    printf("    %zu %s: %d tokens in %.1f ms\n", len, what, n, (double)(mms_time_us() - t0) / 1000.0);
    EXPECT(ids && n > 0 && (size_t)n <= len, "%s: %d tokens", what, n);
    back = ids ? detok(v, ids, n, true, &bl) : NULL;
    if ((unsigned char)fill < 0x80) EXPECT(back && (size_t)bl == len && memcmp(back, s, len) == 0, "%s round trip", what);
    else EXPECT(back && (size_t)bl == 3 * len && memcmp(back, "\xEF\xBF\xBD", 3) == 0, "%s: one U+FFFD each", what);
    free(back);
    free(ids);
    free(s);
}

static void test_speed(void) {
    struct mms_vocab *v = mms_vocab_load_file(FIXTURES "tok-llama3.gguf");
    int k, n = n_cases(), rep, total_tokens = 0;
    size_t bytes = 0;
    int64_t t0;
    int32_t *ids = (int32_t *)malloc(1 << 20);
    EXPECT(v != NULL, "load: %s", mms_last_error());
    if (!v || !ids) { free(ids); mms_vocab_free(v); return; }
    long_input(v, "spaces", ' ', 100000);
    long_input(v, "letters", 'a', 100000);
    long_input(v, "digits", '7', 100000);
    long_input(v, "newlines", '\n', 100000);
    long_input(v, "punctuation", '!', 100000);
    long_input(v, "invalid bytes", '\xff', 100000);
    t0 = mms_time_us();
    for (rep = 0; rep < 20; rep++)
        for (k = 0; k < n; k++) {
            size_t len;
            const char *text = fx_str("cases.text", k, &len);
            int r = mms_tokenize(v, text, len, ids, (1 << 20) / 4, false, true);
            total_tokens += r > 0 ? r : 0;
            bytes += len;
        }
    {
        double s = (double)(mms_time_us() - t0) / 1e6;
        printf("    corpus x20: %zu bytes, %d tokens in %.3f s: %.1f MB/s, %.0f tokens/s\n", bytes, total_tokens, s,
               (double)bytes / 1e6 / (s > 0 ? s : 1e-9), total_tokens / (s > 0 ? s : 1e-9));
    }
    free(ids);
    mms_vocab_free(v);
}

int main(int argc, char **argv) {
    (void)argc;
    snprintf(hostile_path, sizeof hostile_path, "%s.hostile.gguf", argv[0]);
    fx = mms_gguf_open(FIXTURES "tok-cases.gguf");
    if (!fx) { test_fail_all("the fixture", mms_last_error()); return 1; }
    RUN(test_bpe_vocab_cases);
    RUN(test_llama3_vocab_cases);
    RUN(test_demo_vocab_cases);
    RUN(test_pieces);
    RUN(test_special_tokens);
    RUN(test_user_defined);
    RUN(test_buffers_and_args);
    RUN(test_hostile_vocab);
    RUN(test_speed);
    printf("    %ld expected ids compared\n", total_ids_checked);
    mms_gguf_close(fx);
    return test_summary();
}
