/* libFuzzer targets for the strict JSON reader and the safetensors reader: each input is parsed
   from memory and, when it opens, walked through every getter, touching every byte a getter
   points at (ASan sees any pointer outside the input or the parser's memory). Broken invariants
   trap. One file, two targets: -DFUZZ_JSON or -DFUZZ_SAFETENSORS picks the entry point.

     clang -g -O1 -fsanitize=fuzzer,address,undefined -DFUZZ_SAFETENSORS -I. tests/fuzz/fuzz_formats.c -o build/fuzz_safetensors -lm -lpthread
     build/fuzz_safetensors -max_total_time=120 -max_len=4096 build/fuzz-st tests/fuzz/corpus-safetensors

   tests/test_formats.c includes this file and replays tests/fuzz/corpus-json and corpus-safetensors. */
#ifndef MMS_FUZZ_FORMATS_C
#define MMS_FUZZ_FORMATS_C
#ifndef MMSCHED_IMPLEMENTATION
#define MMSCHED_IMPLEMENTATION
#include "../../mmsched.h"
#endif
#include <float.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_FORMATS_CHECK(cond) do { if (!(cond)) { fprintf(stderr, "fuzz_formats: check failed: %s (line %d)\n", #cond, __LINE__); abort(); } } while (0)

static unsigned fuzz_formats_touch(const void *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    unsigned s = 0;
    size_t i;
    for (i = 0; i < n; i++) s += b[i];
    return s;
}

/* Every value of a parsed document, depth first (iteratively: documents may nest 128 deep). */
static unsigned fuzz_json_walk(const struct mms_json *j) {
    unsigned sink = 0;
    int64_t v = 0;
    for (v = 0; mms_json_type(j, v) != MMS_JSON_NONE; v++) {
        enum mms_json_type t = mms_json_type(j, v);
        int64_t n = mms_json_len(j, v), i;
        size_t len;
        const char *s;
        double d;
        int64_t x;
        if (t == MMS_JSON_ARRAY || t == MMS_JSON_OBJECT) {
            FUZZ_FORMATS_CHECK(n >= 0);
            for (i = 0; i < n; i++) {
                const int64_t c = mms_json_at(j, v, i);
                FUZZ_FORMATS_CHECK(c > v && mms_json_type(j, c) != MMS_JSON_NONE);
                if (t == MMS_JSON_OBJECT) {
                    const char *k = mms_json_key(j, v, i, &len);
                    FUZZ_FORMATS_CHECK(k != NULL && strlen(k) == len);
                    if (memchr(k, '\0', len) == NULL) FUZZ_FORMATS_CHECK(mms_json_get(j, v, k) == c);   /* keys are unique */
                    sink += fuzz_formats_touch(k, len);
                }
            }
            FUZZ_FORMATS_CHECK(mms_json_at(j, v, n) == -1 && mms_json_at(j, v, -1) == -1);
        } else FUZZ_FORMATS_CHECK(n == -1);
        if ((s = mms_json_str(j, v, &len)) != NULL) { FUZZ_FORMATS_CHECK(t == MMS_JSON_STRING && s[len] == '\0'); sink += fuzz_formats_touch(s, len); }
        if (mms_json_num(j, v, &d)) { FUZZ_FORMATS_CHECK(t == MMS_JSON_NUMBER && d == d && d <= DBL_MAX && d >= -DBL_MAX); sink += (unsigned)mms_json_int(j, v, &x); }
    }
    FUZZ_FORMATS_CHECK(v >= 1 && mms_json_type(j, -1) == MMS_JSON_NONE);
    return sink;
}

static enum mms_status fuzz_json_one(const uint8_t *data, size_t size) {
    struct mms_json *j = mms_json_parse((const char *)data, size, "fuzz");
    if (!j) {
        FUZZ_FORMATS_CHECK(mms_last_status() == MMS_ERR_FORMAT && strstr(mms_last_error(), "fuzz"));
        return mms_last_status();
    }
    (void)fuzz_json_walk(j);
    mms_json_free(j);
    return MMS_OK;
}

static enum mms_status fuzz_safetensors_one(const uint8_t *data, size_t size) {
    struct mms_safetensors *st = mms_safetensors_open_memory(data, size, "fuzz");
    int64_t i, n;
    unsigned sink = 0;
    size_t covered = 0;
    if (!st) {
        FUZZ_FORMATS_CHECK(mms_last_status() == MMS_ERR_FORMAT && strstr(mms_last_error(), "fuzz"));
        return mms_last_status();
    }
    n = mms_safetensors_n_tensors(st);
    for (i = 0; i < n; i++) {
        struct mms_safetensors_info info;
        const uint8_t *p;
        int d;
        FUZZ_FORMATS_CHECK(mms_safetensors_get(st, i, &info) == MMS_OK && mms_safetensors_find(st, info.name) == i);
        p = (const uint8_t *)info.data;
        FUZZ_FORMATS_CHECK(p >= data && p <= data + size && info.size <= (size_t)(data + size - p));
        FUZZ_FORMATS_CHECK(info.n_dims >= 0 && info.n_dims <= 8);
        for (d = 0; d < info.n_dims; d++) FUZZ_FORMATS_CHECK(info.shape[d] >= 0);
        covered += info.size;
        sink += fuzz_formats_touch(info.data, info.size);
    }
    FUZZ_FORMATS_CHECK(covered <= size && mms_safetensors_get(st, n, NULL) != MMS_OK);
    sink += fuzz_json_walk(mms_safetensors_header(st));
    mms_safetensors_close(st);
    (void)sink;
    return MMS_OK;
}

#if defined(FUZZ_JSON) || defined(FUZZ_SAFETENSORS)
static void fuzz_formats_quiet(enum mms_log_level level, const char *message, void *user) { (void)level; (void)message; (void)user; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static bool quiet;
    if (!quiet) { mms_log_set(fuzz_formats_quiet, NULL); quiet = true; }
#ifdef FUZZ_JSON
    fuzz_json_one(data, size);
#else
    fuzz_safetensors_one(data, size);
#endif
    return 0;
}
#endif
#endif
