/* The strict JSON reader, the safetensors reader and a Hugging Face checkpoint folder's checks:
   values read back as written; every hostile input of tests/fuzz/corpus-{json,safetensors} (made
   by tools/gen_format_corpus.py) and every broken folder (made here from the gqa fixture) fails
   with MMS_ERR_FORMAT (or MMS_ERR_IO for a missing file) and a message naming the file and what is
   wrong; the fuzz corpora replay without a crash. Ollama's model store: names resolved to the
   blobs of a store laid out as Ollama lays it out (tests/ollama_store.h), and every way it can be
   wrong named in the error. */
#ifndef _POSIX_C_SOURCE
#  define _POSIX_C_SOURCE 200809L   /* setenv */
#endif
#define MMSCHED_IMPLEMENTATION
#include "../mmsched.h"
#include "test.h"
#include "mllama_load.h"
#include "fuzz/fuzz_formats.c"
#include "ollama_store.h"
#include <dirent.h>

static mms_backend_t cpu;

static void test_json_values(void) {
    const char *t = "{\"name\": \"a\\\"b\\\\c\\u00e9\\ud83d\\ude00\", \"n\": [0, -1.5e3, 9007199254740992, 9007199254740993, 0.5],"
                    " \"t\": true, \"f\": false, \"z\": null, \"o\": {\"b\": 2, \"a\": 1}, \"e\": [], \"eo\": {}}";
    struct mms_json *j = mms_json_parse(t, strlen(t), "values");
    int64_t n, o, x;
    size_t len;
    double d;
    const char *s;
    EXPECT(j != NULL, "parse: %s", mms_last_error());
    if (!j) return;
    s = mms_json_str(j, mms_json_get(j, 0, "name"), &len);
    EXPECT(s && len == 11 && !memcmp(s, "a\"b\\c\xc3\xa9\xf0\x9f\x98\x80", 11), "escapes decoded: %s", s ? s : "(null)");
    n = mms_json_get(j, 0, "n");
    EXPECT(mms_json_len(j, n) == 5 && mms_json_num(j, mms_json_at(j, n, 1), &d) && d == -1500.0, "numbers");
    EXPECT(mms_json_int(j, mms_json_at(j, n, 2), &x) && x == 9007199254740992LL, "2^53 is an integer");
    EXPECT(!mms_json_int(j, mms_json_at(j, n, 3), &x) && !mms_json_int(j, mms_json_at(j, n, 4), &x), "beyond 2^53 or fractional: not integers");
    EXPECT(mms_json_type(j, mms_json_get(j, 0, "t")) == MMS_JSON_TRUE && mms_json_type(j, mms_json_get(j, 0, "f")) == MMS_JSON_FALSE &&
           mms_json_type(j, mms_json_get(j, 0, "z")) == MMS_JSON_NULL, "literals");
    o = mms_json_get(j, 0, "o");
    EXPECT(!strcmp(mms_json_key(j, o, 0, NULL), "b") && mms_json_int(j, mms_json_get(j, o, "a"), &x) && x == 1, "members keep their order; lookup by key");
    EXPECT(mms_json_len(j, mms_json_get(j, 0, "e")) == 0 && mms_json_len(j, mms_json_get(j, 0, "eo")) == 0, "empty containers");
    EXPECT(mms_json_get(j, 0, "missing") == -1 && mms_json_get(j, n, "a") == -1 && mms_json_at(j, n, 5) == -1 &&
           mms_json_type(j, -1) == MMS_JSON_NONE && mms_json_str(j, n, NULL) == NULL, "absent and wrong-type lookups give -1/NULL");
    mms_json_free(j);
}

/* Each hostile file and the words its error must have (besides the file's name). */
static const struct { const char *file, *words; } hostile_json[] = {
    { "hostile-trailing-comma", "trailing comma" }, { "hostile-comment", "expected ',' or '}'" },
    { "hostile-nan", "unexpected character 'N'" }, { "hostile-leading-zero", "leading zero" },
    { "hostile-huge-number", "too large" }, { "hostile-control-character", "control character" },
    { "hostile-invalid-utf8", "invalid UTF-8" }, { "hostile-lone-surrogate", "lone low surrogate" },
    { "hostile-duplicate-keys", "duplicate key \"k\"" }, { "hostile-deep-nesting", "nesting deeper than 128" },
    { "hostile-text-after-value", "text after the value" }, { "hostile-unterminated-string", "unterminated string" },
    { "hostile-empty", "unexpected end" },
};

static const struct { const char *file, *words; } hostile_st[] = {
    { "hostile-truncated-header", "truncated" }, { "hostile-header-length-past-eof", "header length 4096 is past the end" },
    { "hostile-header-not-json", "header line 1" }, { "hostile-header-not-object", "not a JSON object" },
    { "hostile-overlapping-offsets", "tensor 'b' (bytes 4..12) overlaps tensor 'a'" }, { "hostile-offsets-past-data", "tensor 'a': data_offsets end 16 is past the data" },
    { "hostile-dtype-shape-mismatch", "tensor 'a': data_offsets span 8 bytes, dtype F32 and its shape need 16" },
    { "hostile-unknown-dtype", "tensor 'a': unknown dtype \"F31\"" }, { "hostile-duplicate-keys", "duplicate key \"a\"" },
    { "hostile-deep-nesting", "nesting deeper than 128" }, { "hostile-huge-number", "too large" },
    { "hostile-shape-overflow", "tensor 'a': shape overflows" }, { "hostile-invalid-utf8", "invalid UTF-8" },
    { "hostile-hole-in-data", "belong to no tensor" }, { "hostile-missing-offsets", "tensor 'a': field data_offsets" },
    { "hostile-negative-shape", "tensor 'a': shape[0] is not a non-negative integer" },
    { "hostile-unknown-field", "tensor 'a': unknown field \"extra\"" }, { "hostile-metadata-not-strings", "__metadata__ value \"format\" is not a string" },
};

static void test_hostile_files(void) {
    char path[1400];
    size_t i;
    test_capture_log();
    for (i = 0; i < sizeof hostile_json / sizeof hostile_json[0]; i++) {
        struct mms_json *j;
        snprintf(path, sizeof path, "%s/%s", test_src_path("fuzz/corpus-json"), hostile_json[i].file);
        j = mms_json_parse_file(path);
        EXPECT(j == NULL && mms_last_status() == MMS_ERR_FORMAT && strstr(mms_last_error(), path) && strstr(mms_last_error(), hostile_json[i].words),
               "%s: %s", hostile_json[i].file, j ? "parsed" : mms_last_error());
        mms_json_free(j);
    }
    for (i = 0; i < sizeof hostile_st / sizeof hostile_st[0]; i++) {
        struct mms_safetensors *st;
        snprintf(path, sizeof path, "%s/%s", test_src_path("fuzz/corpus-safetensors"), hostile_st[i].file);
        st = mms_safetensors_open(path);
        EXPECT(st == NULL && mms_last_status() == MMS_ERR_FORMAT && strstr(mms_last_error(), path) && strstr(mms_last_error(), hostile_st[i].words),
               "%s: %s", hostile_st[i].file, st ? "opened" : mms_last_error());
        mms_safetensors_close(st);
    }
    mms_log_set(NULL, NULL);
}

static void test_safetensors_values(void) {
    char path[1400];
    struct mms_safetensors *st;
    struct mms_safetensors_info a, b, c;
    snprintf(path, sizeof path, "%s/seed-three-tensors", test_src_path("fuzz/corpus-safetensors"));
    st = mms_safetensors_open(path);
    EXPECT(st != NULL, "open: %s", mms_last_error());
    if (!st) return;
    EXPECT(mms_safetensors_n_tensors(st) == 3 && mms_safetensors_get(st, mms_safetensors_find(st, "a"), &a) == MMS_OK &&
           mms_safetensors_get(st, mms_safetensors_find(st, "b"), &b) == MMS_OK && mms_safetensors_get(st, mms_safetensors_find(st, "c"), &c) == MMS_OK,
           "three tensors by name");
    EXPECT(a.type == MMS_TYPE_F32 && a.n_dims == 2 && a.shape[0] == 2 && a.shape[1] == 2 && a.size == 16 && ((const uint8_t *)a.data)[0] == 0 &&
           b.type == MMS_TYPE_BF16 && b.size == 6 && ((const uint8_t *)b.data)[0] == 16 && c.type == MMS_TYPE_INVALID && !strcmp(c.dtype, "I64") &&
           c.n_dims == 0 && c.size == 8, "dtypes, shapes, sizes and data");
    EXPECT(mms_safetensors_find(st, "d") == -1 && mms_safetensors_metadata(st) >= 0, "absent names; __metadata__");
    mms_safetensors_close(st);
}

/* Every corpus file through the fuzz targets: no crash, no broken invariant. */
static void replay(const char *dir_name, enum mms_status (*one)(const uint8_t *, size_t), int *n_files, int *n_ok) {
    const char *dir = test_src_path(dir_name);
    DIR *d = opendir(dir);
    struct dirent *e;
    EXPECT(d != NULL, "cannot list %s", dir);
    while (d && (e = readdir(d)) != NULL) {
        char p[1400];
        FILE *f;
        uint8_t *buf;
        long size;
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (!(f = fopen(p, "rb"))) continue;
        fseek(f, 0, SEEK_END);
        size = ftell(f);
        fseek(f, 0, SEEK_SET);
        buf = (uint8_t *)malloc((size_t)size + 1);
        if (buf && fread(buf, 1, (size_t)size, f) == (size_t)size) {
            (*n_files)++;
            *n_ok += one(buf, (size_t)size) == MMS_OK;
        }
        free(buf);
        fclose(f);
    }
    if (d) closedir(d);
}

static void test_fuzz_corpora_replay(void) {
    int nj = 0, oj = 0, ns = 0, os_ = 0;
    test_capture_log();
    replay("fuzz/corpus-json", fuzz_json_one, &nj, &oj);
    replay("fuzz/corpus-safetensors", fuzz_safetensors_one, &ns, &os_);
    mms_log_set(NULL, NULL);
    EXPECT(nj >= (int)(sizeof hostile_json / sizeof hostile_json[0]) && oj >= 1, "json corpus: %d files, %d parse", nj, oj);
    EXPECT(ns >= (int)(sizeof hostile_st / sizeof hostile_st[0]) && os_ >= 2, "safetensors corpus: %d files, %d open", ns, os_);
}

/* -- broken checkpoint folders, each made from tests/fixtures/mllama/gqa/hf -- */

static bool copy_file(const char *from, const char *to, const char *find, const char *replace) {
    FILE *in = fopen(from, "rb"), *out;
    char *buf;
    long n;
    bool ok;
    if (!in) return false;
    fseek(in, 0, SEEK_END);
    n = ftell(in);
    fseek(in, 0, SEEK_SET);
    buf = (char *)malloc((size_t)n + 1);
    ok = buf && fread(buf, 1, (size_t)n, in) == (size_t)n;
    fclose(in);
    if (!ok || !(out = fopen(to, "wb"))) { free(buf); return false; }
    buf[n] = '\0';
    if (find) {
        char *at = strstr(buf, find);
        if (!at) { free(buf); fclose(out); return false; }
        fwrite(buf, 1, (size_t)(at - buf), out);
        fputs(replace, out);
        fputs(at + strlen(find), out);
    } else fwrite(buf, 1, (size_t)n, out);
    free(buf);
    fclose(out);
    return true;
}

static const char *const hf_files[] = {
    "config.json", "generation_config.json", "preprocessor_config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors.index.json",
    "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors",
};

/* build/test_formats_hf: the fixture's folder with file `edit` edited (find -> replace), or left out when replace is NULL. */
static const char *broken_folder(const char *edit, const char *find, const char *replace) {
    static const char *dir = "build/test_formats_hf";
    char from[512], to[512];
    size_t i;
    for (i = 0; i < sizeof hf_files / sizeof hf_files[0]; i++) {
        const bool edited = !strcmp(hf_files[i], edit);
        snprintf(from, sizeof from, "tests/fixtures/mllama/gqa/hf/%s", hf_files[i]);
        snprintf(to, sizeof to, "%s/%s", dir, hf_files[i]);
        remove(to);
        if (edited && !replace) continue;
        if (!copy_file(from, to, edited ? find : NULL, edited ? replace : NULL)) { EXPECT(0, "cannot write %s", to); return dir; }
    }
    return dir;
}

static void test_broken_folders(void) {
    static const struct { const char *file, *find, *replace; enum mms_status st; const char *words; } cases[] = {
        { "model-00002-of-00003.safetensors", NULL, NULL, MMS_ERR_IO, "model-00002-of-00003.safetensors" },
        { "config.json", "\"intermediate_size\": 48", "\"intermediate_size\": 40", MMS_ERR_FORMAT, "the configuration implies" },
        { "config.json", "\"hidden_size\": 24", "\"hidden_size\": 24,", MMS_ERR_FORMAT, "config.json line" },
        { "config.json", "\"num_key_value_heads\": 1", "\"num_key_value_heads\": \"one\"", MMS_ERR_FORMAT, "text_config.num_key_value_heads must be an integer" },
        { "config.json", "\"vision_output_dim\": 64", "\"vision_output_dim\": 80", MMS_ERR_FORMAT, "vision_config.vision_output_dim is 80" },
        { "config.json", "\"rope_type\": \"llama3\"", "\"rope_type\": \"yarn\"", MMS_ERR_UNSUPPORTED, "rope_type \"yarn\"" },
        { "model.safetensors.index.json", "\"language_model.lm_head.weight\": \"model-00003-of-00003.safetensors\"",
          "\"language_model.lm_head.weight\": \"model-00001-of-00003.safetensors\"", MMS_ERR_FORMAT, "puts tensor 'language_model.lm_head.weight' in" },
        { "model.safetensors.index.json", "\"language_model.lm_head.weight\": \"model-00003-of-00003.safetensors\",", "", MMS_ERR_FORMAT,
          "has tensor 'language_model.lm_head.weight', which the index does not list" },
        { "model.safetensors.index.json", "\"language_model.lm_head.weight\": \"model-00003-of-00003.safetensors\"",
          "\"language_model.lm_head.weight\": \"../model-00003-of-00003.safetensors\"", MMS_ERR_FORMAT, "not a file of the folder" },
        { "preprocessor_config.json", "\"max_image_tiles\": 2", "\"max_image_tiles\": 4", MMS_ERR_FORMAT, "at most 4" },
        { "config.json", "],\n      [\n        2,\n        1\n      ]\n    ]", "]\n    ]", MMS_ERR_FORMAT,
          "vision_config.supported_aspect_ratios has 2 entries, max_num_tiles 2 gives 3" },
    };
    size_t i;
    test_make_dir("build/test_formats_hf");
    test_capture_log();
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *dir = broken_folder(cases[i].file, cases[i].find, cases[i].replace);
        struct mms_mllama_model *m = test_load_mllama(cpu, dir, NULL, NULL, 0, false);
        EXPECT(m == NULL && mms_last_status() == cases[i].st && strstr(mms_last_error(), cases[i].words) && strstr(mms_last_error(), dir),
               "case %zu (%s): %s", i, cases[i].file, m ? "loaded" : mms_last_error());
        mms_mllama_model_free(m);
    }
    {   /* intact, it loads */
        const char *dir = broken_folder("", NULL, NULL);
        struct mms_mllama_model *m = test_load_mllama(cpu, dir, NULL, NULL, 0, false);
        EXPECT(m != NULL, "the intact copy: %s", mms_last_error());
        mms_mllama_model_free(m);
    }
    mms_log_set(NULL, NULL);
}

/* A folder's tokenizer (tokenizer.json, tokenizer_config.json, generation_config.json) is the
   one the converter writes from it: the same tokens, types, special ids and end-of-generation set,
   the same ids for any text. A pre-tokenizer other than Llama 3's is refused. */
static void test_folder_tokenizer(void) {
    static const char *const texts[] = { "in the he on", "Hello, world! 123 4567\n\n  x", "<|begin_of_text|><|image|>the<|eot_id|>", "\xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80" };
    struct mms_vocab *a = mms_vocab_load_file("tests/fixtures/mllama/gqa/hf"), *b = mms_vocab_load_file("tests/fixtures/mllama/gqa/mmsched.gguf");
    int32_t i, n_diff = 0;
    size_t k;
    EXPECT(a && b, "load: %s", mms_last_error());
    if (a && b) {
        EXPECT(mms_vocab_n_tokens(a) == mms_vocab_n_tokens(b) && mms_vocab_bos(a) == mms_vocab_bos(b) && mms_vocab_eos(a) == mms_vocab_eos(b) &&
               mms_vocab_bos(a) >= 0, "sizes and special ids: %d/%d tokens, bos %d/%d", mms_vocab_n_tokens(a), mms_vocab_n_tokens(b), mms_vocab_bos(a), mms_vocab_bos(b));
        for (i = 0; i < mms_vocab_n_tokens(a) && i < mms_vocab_n_tokens(b); i++)
            n_diff += strcmp(mms_vocab_token_text(a, i), mms_vocab_token_text(b, i)) || mms_vocab_token_type(a, i) != mms_vocab_token_type(b, i) ||
                      mms_vocab_is_eog(a, i) != mms_vocab_is_eog(b, i);
        EXPECT(n_diff == 0, "%d tokens differ", (int)n_diff);
        for (k = 0; k < sizeof texts / sizeof texts[0]; k++) {
            int32_t x[128], y[128];
            int nx = mms_tokenize(a, texts[k], strlen(texts[k]), x, 128, true, true), ny = mms_tokenize(b, texts[k], strlen(texts[k]), y, 128, true, true);
            EXPECT(nx > 1 && nx == ny && !memcmp(x, y, sizeof(int32_t) * (size_t)nx), "text %zu: %d and %d ids", k, nx, ny);
        }
    }
    EXPECT(a && b && mms_vocab_chat_template_is_builtin(a) && mms_vocab_chat_template_is_builtin(b) &&
           !strcmp(mms_vocab_chat_template(a), mms_vocab_chat_template(b)), "the folder's and the file's chat template are Llama 3.2 Vision's");
    mms_vocab_free(a);
    mms_vocab_free(b);
    {   /* a fine-tune's template (one character changed) is told apart */
        const char *dir = broken_folder("tokenizer_config.json", "bos_token }}", "bos_token}}");
        a = mms_vocab_load_file(dir);
        EXPECT(a && mms_vocab_chat_template(a)[0] && !mms_vocab_chat_template_is_builtin(a), "another template: %s", a ? "taken for the built-in" : mms_last_error());
        mms_vocab_free(a);
        a = mms_vocab_load_file("tests/fixtures/text/tok-llama3.gguf");
        EXPECT(a && !mms_vocab_chat_template(a)[0] && !mms_vocab_chat_template_is_builtin(a), "no template: %s", a ? "one found" : mms_last_error());
        mms_vocab_free(a);
    }
    {
        const char *dir = broken_folder("tokenizer.json", "\"type\": \"Split\"", "\"type\": \"Splat\"");
        test_capture_log();
        a = mms_vocab_load_file(dir);
        EXPECT(a == NULL && mms_last_status() == MMS_ERR_UNSUPPORTED && strstr(mms_last_error(), "pre_tokenizer") && strstr(mms_last_error(), dir),
               "another pre-tokenizer: %s", a ? "loaded" : mms_last_error());
        mms_vocab_free(a);
        dir = broken_folder("tokenizer.json", "\"type\": \"BPE\"", "\"type\": \"WordPiece\"");
        a = mms_vocab_load_file(dir);
        EXPECT(a == NULL && mms_last_status() == MMS_ERR_FORMAT && strstr(mms_last_error(), "BPE"), "not BPE: %s", a ? "loaded" : mms_last_error());
        mms_vocab_free(a);
        mms_log_set(NULL, NULL);
    }
}

/* A folder read as a GGUF (what build/quantize reads) holds what the converter's f32 file of the
   same folder holds: every tensor with the same type, shape and bytes, the vision gates within
   2 ulp (a C tanh in double against numpy's float32 tanh); q/k rows marked as Ollama orders them. */
static void test_folder_to_gguf(void) {
    int c;
    for (c = 0; c < 2; c++) {
        char dir[128], conv[128];
        struct mms_gguf *g, *r;
        int64_t i, n_gates = 0;
        const char *v;
        size_t len;
        snprintf(dir, sizeof dir, "tests/fixtures/mllama/%s/hf", c ? "mha" : "gqa");
        snprintf(conv, sizeof conv, "tests/fixtures/mllama/%s/mmsched.gguf", c ? "mha" : "gqa");
        g = mms_mllama_folder_to_gguf(dir);
        r = mms_gguf_open(conv);
        EXPECT(g && r, "%s: %s", dir, mms_last_error());
        if (g && r) {
            EXPECT(mms_gguf_get_n_tensors(g) == mms_gguf_get_n_tensors(r), "%s: %lld tensors, the converter wrote %lld", dir,
                   (long long)mms_gguf_get_n_tensors(g), (long long)mms_gguf_get_n_tensors(r));
            EXPECT(mms_gguf_get_str(g, "mmsched.mllama.qk_rows", &v, &len) == MMS_OK && len == 6 && !memcmp(v, "ollama", 6), "the q/k marker");
            for (i = 0; i < mms_gguf_get_n_tensors(r); i++) {
                struct mms_gguf_tensor_info a, b;
                int64_t j;
                mms_gguf_get_tensor(r, i, &b);
                j = mms_gguf_find_tensor(g, b.name);
                if (j < 0 || mms_gguf_get_tensor(g, j, &a) != MMS_OK) { EXPECT(0, "%s: no tensor %s", dir, b.name); continue; }
                EXPECT(a.type == b.type && !memcmp(a.ne, b.ne, sizeof a.ne) && a.size == b.size, "%s: %s: type or shape differs", dir, b.name);
                if (a.size != b.size || !memcmp(a.data, b.data, a.size)) continue;
                if (strstr(b.name, "gate") && a.type == MMS_TYPE_F32 && a.size == 4) {
                    int32_t x, y;
                    memcpy(&x, a.data, 4);
                    memcpy(&y, b.data, 4);
                    EXPECT(x - y >= -2 && x - y <= 2, "%s: %s differs by %d ulp", dir, b.name, (int)(x - y));
                    n_gates++;
                } else EXPECT(0, "%s: the bytes of %s differ from the converter's", dir, b.name);
            }
            EXPECT(n_gates <= 8, "%lld gates differ", (long long)n_gates);
        }
        mms_gguf_close(g);
        mms_gguf_close(r);
    }
}

/* -- Ollama's model store -- */

static bool ends_with(const char *s, const char *tail) {
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && !strcmp(s + a - b, tail);
}

static void test_ollama_names(void) {
    const char *store = "build/test_formats_ollama";
    const struct test_ollama_layer one_file[] = {
        { "model", "models/mllama-demo.gguf", NULL }, { "template", NULL, "{{ .Prompt }}" }, { "license", NULL, "LLAMA 3.2 COMMUNITY LICENSE" },
        { "params", NULL, "{\"temperature\":0.6,\"top_p\":0.9}" } };
    const struct test_ollama_layer two_files[] = {
        { "model", "tests/fixtures/mllama/gqa/text.gguf", NULL }, { "projector", "tests/fixtures/mllama/gqa/proj.gguf", NULL },
        { "template", NULL, "{{ .Prompt }}" } };
    static const char *const same[] = { "llama3.2-vision:11b", "ollama:llama3.2-vision:11b", "library/llama3.2-vision:11b",
                                         "registry.ollama.ai/library/llama3.2-vision:11b" };
    struct mms_ollama_model om;
    char blob[72], want[256];
    size_t i;
    EXPECT(test_ollama_store(store, 1, "llama3.2-vision", "latest", one_file, 4, 0) &&
           test_ollama_store(store, 2, "llama3.2-vision", "11b", two_files, 3, 0), "cannot write the store %s", store);
    test_setenv("OLLAMA_MODELS", store);
    EXPECT(mms_ollama_resolve("ollama:llama3.2-vision", &om) == MMS_OK, "latest: %s", mms_last_error());
    test_ollama_digest(1, 1, blob);
    snprintf(want, sizeof want, "%s/blobs/sha256-%s", store, blob + 7);
    EXPECT(!strcmp(om.model, want) && om.projector[0] == '\0', "latest: model '%s', projector '%s'", om.model, om.projector);
    EXPECT(!strcmp(om.manifest, "build/test_formats_ollama/manifests/registry.ollama.ai/library/llama3.2-vision/latest"), "manifest '%s'", om.manifest);
    for (i = 0; i < sizeof same / sizeof same[0]; i++) {
        EXPECT(mms_ollama_resolve(same[i], &om) == MMS_OK, "%s: %s", same[i], mms_last_error());
        test_ollama_digest(2, 1, blob);
        EXPECT(ends_with(om.model, blob + 7), "%s: model '%s'", same[i], om.model);
        test_ollama_digest(2, 2, blob);
        EXPECT(ends_with(om.projector, blob + 7), "%s: projector '%s'", same[i], om.projector);
    }
    {   /* without OLLAMA_MODELS: ~/.ollama/models */
        const char *home = getenv("HOME");
        char *saved = home ? (char *)malloc(strlen(home) + 1) : NULL;
        if (saved) strcpy(saved, home);
        test_make_dir("build/test_formats_home");
        test_make_dir("build/test_formats_home/.ollama");
        EXPECT(test_ollama_store("build/test_formats_home/.ollama/models", 3, "llama3.2-vision", "latest", one_file, 1, 0), "cannot write the home store");
        test_setenv("OLLAMA_MODELS", NULL);
        test_setenv("HOME", "build/test_formats_home");
        EXPECT(mms_ollama_resolve("llama3.2-vision", &om) == MMS_OK && strstr(om.model, "build/test_formats_home/.ollama/models/blobs/sha256-"),
               "home store: %s (%s)", om.model, mms_last_error());
        test_capture_log();
        EXPECT_ERROR(mms_ollama_resolve("llama3.2-vision:90b", &om), MMS_ERR_IO, "build/test_formats_home/.ollama/models/manifests/registry.ollama.ai/library/llama3.2-vision/90b");
#ifndef _WIN32
        EXPECT(strstr(mms_last_error(), "/usr/share/ollama/.ollama/models/manifests/registry.ollama.ai/library/llama3.2-vision/90b") != NULL,
               "the service install's store is not named: %s", mms_last_error());
#endif
        mms_log_set(NULL, NULL);
        test_setenv("HOME", saved);
        free(saved);
        test_setenv("OLLAMA_MODELS", store);
    }
}

static void test_ollama_errors(void) {
    const char *store = "build/test_formats_ollama_bad";
    const struct test_ollama_layer no_model[] = { { "projector", "tests/fixtures/mllama/gqa/proj.gguf", NULL }, { "template", NULL, "x" } };
    const struct test_ollama_layer missing_blob[] = { { "model", NULL, NULL } };
    const struct test_ollama_layer short_blob[] = { { "model", NULL, "GGUF" } };
    const struct test_ollama_layer adapter[] = { { "model", NULL, "GGUF" }, { "adapter", NULL, "lora" } };
    const struct test_ollama_layer two_projectors[] = { { "model", NULL, "GGUF" }, { "projector", NULL, "a" }, { "projector", NULL, "b" } };
    static const char *const bad_names[] = { "", "ollama:", "../llama", "llama3.2-vision:", "a/b/c/d", "llama/../x", "-x", "name:with/slash", "lib.rary/x" };
    struct mms_ollama_model om;
    char blob[72], path[512];
    size_t i;
    bool ok = test_ollama_store(store, 4, "nomodel", "latest", no_model, 2, 0) && test_ollama_store(store, 5, "missing", "latest", missing_blob, 1, 0) &&
              test_ollama_store(store, 6, "short", "latest", short_blob, 1, 7) && test_ollama_store(store, 7, "adapter", "latest", adapter, 2, 0) &&
              test_ollama_store(store, 8, "twoproj", "latest", two_projectors, 3, 0);
    EXPECT(ok, "cannot write the store %s", store);
    test_setenv("OLLAMA_MODELS", store);
    test_capture_log();
    EXPECT_ERROR(mms_ollama_resolve("nomodel", &om), MMS_ERR_FORMAT, "has no model layer");
    EXPECT(strstr(mms_last_error(), "test_formats_ollama_bad/manifests/registry.ollama.ai/library/nomodel/latest") != NULL, "%s", mms_last_error());
    test_ollama_digest(5, 1, blob);
    snprintf(path, sizeof path, "%s/blobs/sha256-%s", store, blob + 7);
    EXPECT_ERROR(mms_ollama_resolve("missing", &om), MMS_ERR_IO, "the model blob");
    EXPECT(strstr(mms_last_error(), path) != NULL, "the missing blob '%s' is not named: %s", path, mms_last_error());
    EXPECT_ERROR(mms_ollama_resolve("short:latest", &om), MMS_ERR_FORMAT, "is 4 bytes");
    EXPECT(strstr(mms_last_error(), "says 11") != NULL, "%s", mms_last_error());
    EXPECT_ERROR(mms_ollama_resolve("adapter", &om), MMS_ERR_UNSUPPORTED, "adapter layer");
    EXPECT_ERROR(mms_ollama_resolve("twoproj", &om), MMS_ERR_UNSUPPORTED, "2 projector layers");
    EXPECT_ERROR(mms_ollama_resolve("llama3.2-vision", &om), MMS_ERR_IO, "test_formats_ollama_bad/manifests/registry.ollama.ai/library/llama3.2-vision/latest");
    EXPECT(strstr(mms_last_error(), "OLLAMA_MODELS") != NULL, "%s", mms_last_error());
    for (i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++)
        EXPECT_ERROR(mms_ollama_resolve(bad_names[i], &om), MMS_ERR_INVALID_ARG, "is not a model name");
    {   /* a manifest that is not JSON, and one whose digest is not sha256 */
        FILE *f;
        snprintf(path, sizeof path, "%s/manifests/registry.ollama.ai/library/short/notjson", store);
        if ((f = fopen(path, "wb"))) { fputs("{\"layers\": [", f); fclose(f); }
        EXPECT_ERROR(mms_ollama_resolve("short:notjson", &om), MMS_ERR_FORMAT, "notjson");
        snprintf(path, sizeof path, "%s/manifests/registry.ollama.ai/library/short/md5", store);
        if ((f = fopen(path, "wb"))) { fputs("{\"layers\":[{\"mediaType\":\"application/vnd.ollama.image.model\",\"digest\":\"md5:00\",\"size\":4}]}\n", f); fclose(f); }
        EXPECT_ERROR(mms_ollama_resolve("short:md5", &om), MMS_ERR_FORMAT, "\"md5:00\" is not sha256");
    }
    EXPECT(mms_ollama_resolve("missing", &om) != MMS_OK && om.model[0] == '\0', "a failed resolve leaves a path");
    mms_log_set(NULL, NULL);
}

int main(void) {
    test_seed();
    cpu = mms_backend_cpu_init();
    RUN(test_json_values);
    RUN(test_safetensors_values);
    RUN(test_hostile_files);
    RUN(test_fuzz_corpora_replay);
    RUN(test_broken_folders);
    RUN(test_folder_tokenizer);
    RUN(test_folder_to_gguf);
    RUN(test_ollama_names);
    RUN(test_ollama_errors);
    mms_backend_free(cpu);
    return test_summary();
}
