/* libFuzzer target for the GGUF reader: opens the input from memory, then walks every key through
   every getter and every tensor info, touching each byte a getter points at (so ASan sees any
   pointer outside the input). Broken invariants trap.

     clang -g -O1 -fsanitize=fuzzer,address,undefined -I. tests/fuzz/fuzz_gguf.c -o build/fuzz_gguf -lm -lpthread
     mkdir -p build/fuzz-corpus && cp -r tests/fuzz/corpus-gguf/. build/fuzz-corpus/
     build/fuzz_gguf -max_total_time=600 -max_len=4096 build/fuzz-corpus
     build/fuzz_gguf -set_cover_merge=1 -use_counters=0 tests/fuzz/corpus-gguf build/fuzz-corpus   # keep what is new

   With -DMMS_FUZZ_REPLAY (and no libFuzzer) it gets a main() that runs each file named on the
   command line through the same function, for CI:

     gcc -std=c99 -O1 -g -fsanitize=address,undefined -DMMS_FUZZ_REPLAY -I. tests/fuzz/fuzz_gguf.c -o build/fuzz_gguf_replay -lm -lpthread
     find tests/fuzz/corpus-gguf -type f | xargs build/fuzz_gguf_replay

   tests/test_gguf.c includes this file to replay the corpus as part of the suite. */
#define MMSCHED_IMPLEMENTATION
#include "../../mmsched.h"
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond) do { if (!(cond)) { fprintf(stderr, "fuzz_gguf: check failed: %s (line %d)\n", #cond, __LINE__); abort(); } } while (0)

/* Reads every byte so that a bad pointer or length is an ASan report, not a silent pass. */
static unsigned fuzz_gguf_touch(const void *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    unsigned s = 0;
    size_t i;
    for (i = 0; i < n; i++) s += b[i];
    return s;
}

static bool fuzz_gguf_inside(const void *p, size_t n, const uint8_t *data, size_t size) {
    const uint8_t *q = (const uint8_t *)p;
    return q >= data && q <= data + size && n <= (size_t)(data + size - q);
}

/* Opens data and walks it; returns the status of the open. */
static enum mms_status fuzz_gguf_one(const uint8_t *data, size_t size) {
    struct mms_gguf *g = mms_gguf_open_memory(data, size);
    volatile unsigned sink = 0;
    int64_t i, n_kv, n_tensors;
    if (!g) {
        FUZZ_CHECK(mms_last_status() != MMS_OK && strstr(mms_last_error(), "gguf memory") != NULL);
        return mms_last_status();
    }
    FUZZ_CHECK(mms_gguf_get_version(g) == 2 || mms_gguf_get_version(g) == 3);
    FUZZ_CHECK((mms_gguf_get_alignment(g) & (mms_gguf_get_alignment(g) - 1)) == 0);
    n_kv = mms_gguf_get_n_kv(g);
    for (i = 0; i < n_kv; i++) {
        const char *key = mms_gguf_get_key(g, i), *s;
        enum mms_gguf_type type = mms_gguf_get_kv_type(g, i), tj;
        int64_t j = mms_gguf_find_key(g, key), n = -1, k;
        uint32_t u32; int32_t i32; uint64_t u64; float f32; bool b; size_t len;
        int32_t ibuf[8]; float fbuf[8];
        enum mms_status st;
        FUZZ_CHECK(key != NULL && (int)type >= 0 && type <= MMS_GGUF_TYPE_FLOAT64);
        /* a key with a NUL inside is found by its C string only if another key is exactly that */
        FUZZ_CHECK(j < 0 || strcmp(mms_gguf_get_key(g, j), key) == 0);
        tj = j >= 0 ? mms_gguf_get_kv_type(g, j) : MMS_GGUF_TYPE_NONE;
        sink += (unsigned)mms_gguf_get_u32(g, key, &u32) + (unsigned)mms_gguf_get_i32(g, key, &i32);
        sink += (unsigned)mms_gguf_get_u64(g, key, &u64) + (unsigned)mms_gguf_get_f32(g, key, &f32);
        st = mms_gguf_get_bool(g, key, &b);
        FUZZ_CHECK(j >= 0 ? (st == MMS_OK) == (tj == MMS_GGUF_TYPE_BOOL) : st == MMS_ERR_INVALID_ARG);
        st = mms_gguf_get_str(g, key, &s, &len);
        FUZZ_CHECK(j >= 0 ? (st == MMS_OK) == (tj == MMS_GGUF_TYPE_STRING) : st == MMS_ERR_INVALID_ARG);
        if (st == MMS_OK) {
            FUZZ_CHECK(fuzz_gguf_inside(s, len, data, size));
            sink += fuzz_gguf_touch(s, len);
        }
        sink += (unsigned)mms_gguf_get_arr_i32(g, key, ibuf, 8, &n) + (unsigned)mms_gguf_get_arr_i32(g, key, NULL, 0, &n);
        sink += (unsigned)mms_gguf_get_arr_f32(g, key, fbuf, 8, &n);
        if (type == MMS_GGUF_TYPE_ARRAY) {
            n = mms_gguf_get_arr_n(g, i);
            FUZZ_CHECK(n >= 0 && (uint64_t)n <= size);
            FUZZ_CHECK(mms_gguf_get_arr_type(g, i) >= 0 && mms_gguf_get_arr_type(g, i) != MMS_GGUF_TYPE_ARRAY);
            if (j == i && mms_gguf_get_arr_type(g, i) == MMS_GGUF_TYPE_STRING) {
                for (k = 0; k < n; k++) {
                    FUZZ_CHECK(mms_gguf_get_arr_str(g, key, k, &s, &len) == MMS_OK && fuzz_gguf_inside(s, len, data, size));
                    sink += fuzz_gguf_touch(s, len);
                }
                FUZZ_CHECK(mms_gguf_get_arr_str(g, key, n, &s, &len) == MMS_ERR_INVALID_ARG);
            }
        } else {
            FUZZ_CHECK(mms_gguf_get_arr_n(g, i) == -1 && mms_gguf_get_arr_type(g, i) == MMS_GGUF_TYPE_NONE);
        }
    }
    FUZZ_CHECK(mms_gguf_get_key(g, n_kv) == NULL && mms_gguf_get_kv_type(g, -1) == MMS_GGUF_TYPE_NONE);
    n_tensors = mms_gguf_get_n_tensors(g);
    for (i = 0; i < n_tensors; i++) {
        struct mms_gguf_tensor_info info;
        int64_t j, nel = 1;
        int d;
        FUZZ_CHECK(mms_gguf_get_tensor(g, i, &info) == MMS_OK);
        j = mms_gguf_find_tensor(g, info.name);
        if (j >= 0) {   /* -1 only for a name with a NUL inside */
            struct mms_gguf_tensor_info other;
            FUZZ_CHECK(mms_gguf_get_tensor(g, j, &other) == MMS_OK && strcmp(other.name, info.name) == 0);
        }
        FUZZ_CHECK(strlen(info.name) < MMS_MAX_NAME && info.n_dims >= 1 && info.n_dims <= MMS_MAX_DIMS);
        FUZZ_CHECK(info.offset % mms_gguf_get_alignment(g) == 0 && fuzz_gguf_inside(info.data, info.size, data, size));
        FUZZ_CHECK(info.type == mms_gguf_type_to_mms(info.ggml_type));
        for (d = 0; d < MMS_MAX_DIMS; d++) {
            FUZZ_CHECK(info.ne[d] >= 0 && (d < info.n_dims || info.ne[d] == 1));
            if (info.ne[d] > 0) { FUZZ_CHECK(nel <= INT64_MAX / info.ne[d]); nel *= info.ne[d]; }
        }
        if (info.type != MMS_TYPE_INVALID) FUZZ_CHECK(info.size == mms_row_size(info.type, info.ne[0]) * (size_t)(info.ne[1] * info.ne[2] * info.ne[3]));
        sink += fuzz_gguf_touch(info.data, info.size);
    }
    FUZZ_CHECK(mms_gguf_get_tensor(g, n_tensors, NULL) != MMS_OK);
    for (i = 0; i < n_tensors; i++) {   /* no two tensors share a byte (inputs are small: n^2 is fine) */
        struct mms_gguf_tensor_info a, b;
        int64_t j;
        mms_gguf_get_tensor(g, i, &a);
        for (j = i + 1; j < n_tensors && a.size > 0; j++) {
            mms_gguf_get_tensor(g, j, &b);
            FUZZ_CHECK(b.size == 0 || a.offset + a.size <= b.offset || b.offset + b.size <= a.offset);
        }
    }
    (void)sink;
    mms_gguf_close(g);
    return MMS_OK;
}

static void fuzz_gguf_quiet(enum mms_log_level level, const char *message, void *user) { (void)level; (void)message; (void)user; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static bool quiet;
    if (!quiet) { mms_log_set(fuzz_gguf_quiet, NULL); quiet = true; }
    fuzz_gguf_one(data, size);
    return 0;
}

#ifdef MMS_FUZZ_REPLAY
int main(int argc, char **argv) {
    int i, n_ok = 0, n_err = 0;
    for (i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        uint8_t *buf = NULL;
        size_t size = 0, cap = 0, got;
        if (!f) { fprintf(stderr, "fuzz_gguf: cannot open %s\n", argv[i]); return 2; }
        do {   /* read whole file without fseek/ftell so pipes work too */
            if (size == cap) {
                uint8_t *p;
                cap = cap ? cap * 2 : 4096;
                p = (uint8_t *)realloc(buf, cap);
                if (!p) { fprintf(stderr, "fuzz_gguf: out of memory\n"); return 2; }
                buf = p;
            }
            got = fread(buf + size, 1, cap - size, f);
            size += got;
        } while (got > 0);
        fclose(f);
        /* an exact-size copy so ASan notices a read one past the end */
        {
            uint8_t *exact = (uint8_t *)malloc(size ? size : 1);
            if (!exact) return 2;
            if (size) memcpy(exact, buf, size);
            free(buf);
            mms_log_set(fuzz_gguf_quiet, NULL);
            if (fuzz_gguf_one(exact, size) == MMS_OK) n_ok++;
            else n_err++;
            free(exact);
        }
    }
    printf("fuzz_gguf: replayed %d files: %d opened, %d rejected cleanly\n", argc - 1, n_ok, n_err);
    return 0;
}
#endif
