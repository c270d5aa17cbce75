/* The GGUF reader and writer: our own files read back exactly, getter conversions and errors, a
   file written by the Python gguf package (tools/gen_gguf_fixture.py), every truncation and a set
   of targeted corruptions of a valid file, and the fuzz corpus replayed. */
#define MMSCHED_IMPLEMENTATION
#include "../mmsched.h"
#include "test.h"
#include "fuzz/fuzz_gguf.c"   /* fuzz_gguf_one: what the fuzzer runs on each input */
#include <dirent.h>
#include <math.h>

/* -- helpers -- */

static const char *tmp_path(const char *tag) {
    static char buf[2][512];
    static int k;
    const char *dir = getenv("TMPDIR");
    k ^= 1;
    snprintf(buf[k], sizeof buf[k], "%s/mms_test_gguf_%ld_%s.gguf", dir && *dir ? dir : "/tmp", (long)getpid(), tag);
    return buf[k];
}

/* The whole file in an exact-size block (so ASan sees a read past its end); NULL if unreadable. */
static uint8_t *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    uint8_t *p = NULL;
    size_t cap = 0, n = 0, got;
    if (!f) return NULL;
    do {
        if (n == cap) { cap = cap ? cap * 2 : 4096; p = (uint8_t *)realloc(p, cap); }
        got = fread(p + n, 1, cap - n, f);
        n += got;
    } while (got > 0);
    fclose(f);
    *size = n;
    return (uint8_t *)realloc(p, n ? n : 1);
}

/* Opens a copy of exactly size bytes; MMS_OK (closed again) or the status of the failure. */
static enum mms_status open_status(const uint8_t *data, size_t size) {
    uint8_t *copy = (uint8_t *)malloc(size ? size : 1);
    struct mms_gguf *g;
    if (size) memcpy(copy, data, size);
    g = mms_gguf_open_memory(copy, size);
    mms_gguf_close(g);
    free(copy);
    return g ? MMS_OK : mms_last_status();
}

/* A byte builder for hand-made files. */
struct bb { uint8_t *p; size_t n, cap; };
static size_t bb_put(struct bb *b, const void *src, size_t n) {
    size_t at = b->n;
    if (b->n + n > b->cap) { b->cap = (b->n + n) * 2 + 64; b->p = (uint8_t *)realloc(b->p, b->cap); }
    memcpy(b->p + b->n, src, n);
    b->n += n;
    return at;
}
static size_t bb_u8(struct bb *b, uint8_t v) { return bb_put(b, &v, 1); }
static size_t bb_u32(struct bb *b, uint32_t v) {
    uint8_t x[4]; int i;
    for (i = 0; i < 4; i++) x[i] = (uint8_t)(v >> (8 * i));
    return bb_put(b, x, 4);
}
static size_t bb_u64(struct bb *b, uint64_t v) {
    uint8_t x[8]; int i;
    for (i = 0; i < 8; i++) x[i] = (uint8_t)(v >> (8 * i));
    return bb_put(b, x, 8);
}
static size_t bb_f32(struct bb *b, float f) { uint32_t v; memcpy(&v, &f, 4); return bb_u32(b, v); }
static size_t bb_f64(struct bb *b, double f) { uint64_t v; memcpy(&v, &f, 8); return bb_u64(b, v); }
static size_t bb_str(struct bb *b, const char *s) { size_t at = bb_u64(b, strlen(s)); bb_put(b, s, strlen(s)); return at; }
static size_t bb_key(struct bb *b, const char *key, uint32_t type) { size_t at = bb_str(b, key); bb_u32(b, type); return at; }
static void bb_pad(struct bb *b, size_t align) { while (b->n % align) bb_u8(b, 0); }
static void patch_u32(uint8_t *p, size_t at, uint32_t v) { int i; for (i = 0; i < 4; i++) p[at + i] = (uint8_t)(v >> (8 * i)); }
static void patch_u64(uint8_t *p, size_t at, uint64_t v) { int i; for (i = 0; i < 8; i++) p[at + i] = (uint8_t)(v >> (8 * i)); }

static bool str_is(const char *s, size_t len, const char *want) { return s && len == strlen(want) && memcmp(s, want, len) == 0; }

static bool inside(const void *p, size_t n, const void *base, size_t size) {
    const uint8_t *q = (const uint8_t *)p, *b = (const uint8_t *)base;
    return q >= b && q + n <= b + size;
}

/* -- our writer, read back -- */

static void test_writer_round_trip_every_setter(void) {
    struct mms_gguf_writer *w = mms_gguf_writer_new();
    const char *path = tmp_path("kv");
    const char *strs[] = { "alpha", "", "\xce\xb2\xc3\xa9ta", "with\nnewline" };
    const int32_t ints[] = { 0, -1, INT32_MIN, INT32_MAX, 12345 };
    const float floats[] = { 0.0f, -0.0f, 1.5f, -3.25e-20f, 3.4e38f };
    struct mms_gguf *g;
    const char *s;
    size_t len;
    uint32_t u32; int32_t i32; uint64_t u64; float f32; bool b;
    int32_t ibuf[8]; float fbuf[8]; int64_t n, i;

    EXPECT(mms_gguf_writer_set_str(w, "general.architecture", "llama") == MMS_OK, "%s", mms_last_error());
    mms_gguf_writer_set_u32(w, "t.u32", 4000000000u);
    mms_gguf_writer_set_i32(w, "t.i32", -2147483647 - 1);
    mms_gguf_writer_set_u64(w, "t.u64", 0xfedcba9876543210ULL);
    mms_gguf_writer_set_f32(w, "t.f32", -1.0e-3f);
    mms_gguf_writer_set_bool(w, "t.true", true);
    mms_gguf_writer_set_bool(w, "t.false", false);
    mms_gguf_writer_set_str(w, "t.str", "caf\xc3\xa9 \x01 ok");
    mms_gguf_writer_set_str(w, "t.empty", "");
    mms_gguf_writer_set_arr_i32(w, "t.ints", ints, 5);
    mms_gguf_writer_set_arr_f32(w, "t.floats", floats, 5);
    mms_gguf_writer_set_arr_str(w, "t.strs", strs, 4);
    mms_gguf_writer_set_arr_i32(w, "t.none", NULL, 0);
    mms_gguf_writer_set_i32(w, "t.replaced", 1);
    mms_gguf_writer_set_str(w, "t.replaced", "second");   /* same key: new value and type, same place */
    EXPECT(mms_gguf_writer_write(w, path) == MMS_OK, "write: %s", mms_last_error());
    mms_gguf_writer_free(w);

    g = mms_gguf_open(path);
    EXPECT(g != NULL, "open: %s", mms_last_error());
    if (!g) return;
    EXPECT(mms_gguf_get_version(g) == 3 && mms_gguf_get_alignment(g) == 32, "version %u alignment %zu",
           mms_gguf_get_version(g), mms_gguf_get_alignment(g));
    EXPECT(strcmp(mms_gguf_get_path(g), path) == 0, "path %s", mms_gguf_get_path(g));
    EXPECT(mms_gguf_get_n_kv(g) == 14 && mms_gguf_get_n_tensors(g) == 0, "n_kv %lld", (long long)mms_gguf_get_n_kv(g));
    {   /* keys in the order added */
        static const char *const order[] = { "general.architecture", "t.u32", "t.i32", "t.u64", "t.f32", "t.true", "t.false",
                                             "t.str", "t.empty", "t.ints", "t.floats", "t.strs", "t.none", "t.replaced" };
        static const enum mms_gguf_type types[] = { MMS_GGUF_TYPE_STRING, MMS_GGUF_TYPE_UINT32, MMS_GGUF_TYPE_INT32, MMS_GGUF_TYPE_UINT64,
                                                    MMS_GGUF_TYPE_FLOAT32, MMS_GGUF_TYPE_BOOL, MMS_GGUF_TYPE_BOOL, MMS_GGUF_TYPE_STRING,
                                                    MMS_GGUF_TYPE_STRING, MMS_GGUF_TYPE_ARRAY, MMS_GGUF_TYPE_ARRAY, MMS_GGUF_TYPE_ARRAY,
                                                    MMS_GGUF_TYPE_ARRAY, MMS_GGUF_TYPE_STRING };
        for (i = 0; i < 14; i++) {
            EXPECT(strcmp(mms_gguf_get_key(g, i), order[i]) == 0 && mms_gguf_get_kv_type(g, i) == types[i], "key %lld: %s type %d",
                   (long long)i, mms_gguf_get_key(g, i), (int)mms_gguf_get_kv_type(g, i));
            EXPECT(mms_gguf_find_key(g, order[i]) == i, "find %s", order[i]);
        }
    }
    EXPECT(mms_gguf_get_str(g, "general.architecture", &s, &len) == MMS_OK && str_is(s, len, "llama"), "architecture");
    EXPECT(mms_gguf_get_u32(g, "t.u32", &u32) == MMS_OK && u32 == 4000000000u, "u32 %u", u32);
    EXPECT(mms_gguf_get_i32(g, "t.i32", &i32) == MMS_OK && i32 == INT32_MIN, "i32 %d", i32);
    EXPECT(mms_gguf_get_u64(g, "t.u64", &u64) == MMS_OK && u64 == 0xfedcba9876543210ULL, "u64 %llx", (unsigned long long)u64);
    EXPECT(mms_gguf_get_f32(g, "t.f32", &f32) == MMS_OK && f32 == -1.0e-3f, "f32 %g", (double)f32);
    EXPECT(mms_gguf_get_bool(g, "t.true", &b) == MMS_OK && b, "true");
    EXPECT(mms_gguf_get_bool(g, "t.false", &b) == MMS_OK && !b, "false");
    EXPECT(mms_gguf_get_str(g, "t.str", &s, &len) == MMS_OK && str_is(s, len, "caf\xc3\xa9 \x01 ok"), "str");
    EXPECT(mms_gguf_get_str(g, "t.empty", &s, &len) == MMS_OK && len == 0, "empty str %zu", len);
    EXPECT(mms_gguf_get_str(g, "t.replaced", &s, &len) == MMS_OK && str_is(s, len, "second"), "replaced");
    EXPECT(mms_gguf_get_arr_i32(g, "t.ints", ibuf, 8, &n) == MMS_OK && n == 5 && memcmp(ibuf, ints, sizeof ints) == 0, "ints n=%lld", (long long)n);
    EXPECT(mms_gguf_get_arr_type(g, mms_gguf_find_key(g, "t.ints")) == MMS_GGUF_TYPE_INT32, "ints type");
    EXPECT(mms_gguf_get_arr_f32(g, "t.floats", fbuf, 8, &n) == MMS_OK && n == 5 && memcmp(fbuf, floats, sizeof floats) == 0, "floats");
    EXPECT(mms_gguf_get_arr_n(g, mms_gguf_find_key(g, "t.strs")) == 4, "strs n");
    for (i = 0; i < 4; i++)
        EXPECT(mms_gguf_get_arr_str(g, "t.strs", i, &s, &len) == MMS_OK && str_is(s, len, strs[i]), "strs[%lld]", (long long)i);
    EXPECT(mms_gguf_get_arr_i32(g, "t.none", NULL, 0, &n) == MMS_OK && n == 0, "empty array n=%lld", (long long)n);
    mms_gguf_close(g);
    remove(path);
}

static void test_writer_round_trip_tensors_custom_alignment(void) {
    struct mms_gguf_writer *w = mms_gguf_writer_new();
    const char *path = tmp_path("tensors");
    float f32[5 * 3];
    mms_fp16_t f16[4 * 2 * 2];
    mms_bf16_t bf16[3];
    int32_t i32[2 * 1 * 3 * 2];
    const int64_t ne_f32[] = { 5, 3 }, ne_f16[] = { 4, 2, 2 }, ne_bf16[] = { 3 }, ne_i32[] = { 2, 1, 3, 2 }, ne_empty[] = { 4, 0 };
    const struct { const char *name; enum mms_type type; int n_dims; const int64_t *ne; const void *data; size_t size; int ggml; } want[] = {
        { "tok_embd.weight", MMS_TYPE_F32,  2, ne_f32,  f32,  sizeof f32,  0 },
        { "blk.0.attn_q",    MMS_TYPE_F16,  3, ne_f16,  f16,  sizeof f16,  1 },
        { "norm",            MMS_TYPE_BF16, 1, ne_bf16, bf16, sizeof bf16, 30 },
        { "empty",           MMS_TYPE_F32,  2, ne_empty, NULL, 0,          0 },
        { "ids",             MMS_TYPE_I32,  4, ne_i32,  i32,  sizeof i32,  26 },
    };
    struct mms_gguf *g;
    uint8_t *bytes;
    size_t size = 0;
    int i, d;
    for (i = 0; i < 15; i++) f32[i] = (float)i * 0.75f - 4.0f;
    for (i = 0; i < 16; i++) f16[i] = mms_fp32_to_fp16((float)(i - 8) / 4.0f);
    for (i = 0; i < 3; i++) bf16[i] = mms_fp32_to_bf16((float)i * -1.5f);
    for (i = 0; i < 12; i++) i32[i] = (int32_t)(i * 1000003) - 5000000;
    EXPECT(mms_gguf_writer_set_u32(w, "general.alignment", 128) == MMS_OK, "%s", mms_last_error());
    for (i = 0; i < 5; i++)
        EXPECT(mms_gguf_writer_add_tensor(w, want[i].name, want[i].type, want[i].n_dims, want[i].ne, want[i].data) == MMS_OK,
               "add %s: %s", want[i].name, mms_last_error());
    EXPECT(mms_gguf_writer_write(w, path) == MMS_OK, "write: %s", mms_last_error());
    mms_gguf_writer_free(w);

    bytes = read_all(path, &size);
    EXPECT(bytes && size % 128 == 0 && memcmp(bytes, "GGUF\3\0\0\0", 8) == 0, "file of %zu bytes", size);
    g = mms_gguf_open(path);
    EXPECT(g != NULL, "open: %s", mms_last_error());
    if (!g || !bytes) { mms_gguf_close(g); free(bytes); return; }
    EXPECT(mms_gguf_get_alignment(g) == 128, "alignment %zu", mms_gguf_get_alignment(g));
    EXPECT(mms_gguf_get_n_tensors(g) == 5, "n_tensors %lld", (long long)mms_gguf_get_n_tensors(g));
    for (i = 0; i < 5; i++) {
        struct mms_gguf_tensor_info info;
        EXPECT(mms_gguf_find_tensor(g, want[i].name) == i, "find %s", want[i].name);
        if (mms_gguf_get_tensor(g, i, &info) != MMS_OK) { EXPECT(0, "get_tensor %d: %s", i, mms_last_error()); continue; }
        EXPECT(strcmp(info.name, want[i].name) == 0, "name %s", info.name);
        EXPECT(info.type == want[i].type && info.ggml_type == (uint32_t)want[i].ggml && info.n_dims == want[i].n_dims,
               "%s: type %d ggml %u n_dims %d", info.name, (int)info.type, info.ggml_type, info.n_dims);
        for (d = 0; d < MMS_MAX_DIMS; d++)
            EXPECT(info.ne[d] == (d < want[i].n_dims ? want[i].ne[d] : 1), "%s ne[%d] = %lld", info.name, d, (long long)info.ne[d]);
        EXPECT(info.offset % 128 == 0 && info.size == want[i].size, "%s: offset %llu size %zu", info.name, (unsigned long long)info.offset, info.size);
        EXPECT(info.size == 0 || memcmp(info.data, want[i].data, info.size) == 0, "%s: data differs", info.name);
    }
    {   /* the same file from memory: same answers, pointers into the caller's block */
        struct mms_gguf *m = mms_gguf_open_memory(bytes, size);
        struct mms_gguf_tensor_info a, b;
        EXPECT(m != NULL, "open_memory: %s", mms_last_error());
        if (m) {
            EXPECT(strcmp(mms_gguf_get_path(m), "") == 0, "memory path");
            for (i = 0; i < 5; i++) {
                mms_gguf_get_tensor(g, i, &a);
                mms_gguf_get_tensor(m, i, &b);
                EXPECT(a.offset == b.offset && a.size == b.size && inside(b.data, b.size, bytes, size), "tensor %d", i);
                EXPECT(((const uint8_t *)b.data - bytes) % 128 == 0, "tensor %d at file offset %ld", i, (long)((const uint8_t *)b.data - bytes));
                EXPECT(b.size == 0 || memcmp(b.data, want[i].data, b.size) == 0, "tensor %d data", i);
            }
            mms_gguf_close(m);
        }
    }
    EXPECT(mms_gguf_find_tensor(g, "missing") == -1 && mms_gguf_find_tensor(g, "tok_embd") == -1, "prefix must not match");
    test_capture_log();
    {
        struct mms_gguf_tensor_info info;
        EXPECT_ERROR(mms_gguf_get_tensor(g, 5, &info), MMS_ERR_INVALID_ARG, "tensor index 5 out of range");
        EXPECT_ERROR(mms_gguf_get_tensor(g, -1, &info), MMS_ERR_INVALID_ARG, "out of range");
        EXPECT_ERROR(mms_gguf_get_tensor(g, 0, NULL), MMS_ERR_INVALID_ARG, "info is NULL");
    }
    mms_log_set(NULL, NULL);
    mms_gguf_close(g);
    free(bytes);
    remove(path);
}

/* Every key of a file copied into a writer, written, and read back: the same types and bytes,
   which covers the value types our setters cannot make (u8, i8, i16, i64, f64, bool arrays). */
static void test_writer_copy_kv_every_type(void) {
    struct mms_gguf *src = mms_gguf_open(test_src_path("fixtures/gguf/reference.gguf")), *g;
    struct mms_gguf_writer *w = mms_gguf_writer_new();
    const char *path = tmp_path("copy");
    int64_t i;
    EXPECT(src != NULL, "open fixture: %s", mms_last_error());
    if (!src) { mms_gguf_writer_free(w); return; }
    for (i = 0; i < mms_gguf_get_n_kv(src); i++)
        EXPECT(mms_gguf_writer_copy_kv(w, src, i) == MMS_OK, "copy %lld: %s", (long long)i, mms_last_error());
    EXPECT(mms_gguf_writer_write(w, path) == MMS_OK, "write: %s", mms_last_error());
    mms_gguf_writer_free(w);
    g = mms_gguf_open(path);
    EXPECT(g != NULL, "reopen: %s", mms_last_error());
    if (g) {
        EXPECT(mms_gguf_get_n_kv(g) == mms_gguf_get_n_kv(src) && mms_gguf_get_alignment(g) == 64, "n_kv %lld alignment %zu",
               (long long)mms_gguf_get_n_kv(g), mms_gguf_get_alignment(g));
        for (i = 0; i < mms_gguf_get_n_kv(src) && i < mms_gguf_get_n_kv(g); i++) {
            const struct mms__gguf_kv *a = &src->kv[i], *b = &g->kv[i];   /* white box: the encoded values */
            EXPECT(strcmp(a->key, b->key) == 0 && a->type == b->type && a->raw_size == b->raw_size &&
                   memcmp(src->base + a->raw_pos, g->base + b->raw_pos, a->raw_size) == 0, "key %s differs", a->key);
        }
        mms_gguf_close(g);
    }
    test_capture_log();
    {
        struct mms_gguf_writer *w2 = mms_gguf_writer_new();
        EXPECT_ERROR(mms_gguf_writer_copy_kv(w2, src, 99), MMS_ERR_INVALID_ARG, "key index 99 out of range");
        mms_gguf_writer_free(w2);
    }
    mms_log_set(NULL, NULL);
    mms_gguf_close(src);
    remove(path);
}

/* -- getters: conversions and errors, on a hand-made file in memory -- */

static void test_getters_convert_and_refuse(void) {
    struct bb b = { NULL, 0, 0 };
    struct mms_gguf *g;
    uint32_t u32 = 0; int32_t i32 = 0; uint64_t u64 = 0; float f32 = 0; bool bo = false;
    const char *s = NULL; size_t len = 0;
    int32_t ibuf[4]; float fbuf[4]; int64_t n = -7;
    bb_put(&b, "GGUF", 4); bb_u32(&b, 3); bb_u64(&b, 0); bb_u64(&b, 17);
    bb_key(&b, "u8", MMS_GGUF_TYPE_UINT8);    bb_u8(&b, 200);
    bb_key(&b, "i8", MMS_GGUF_TYPE_INT8);     bb_u8(&b, (uint8_t)-100);
    bb_key(&b, "u16", MMS_GGUF_TYPE_UINT16);  bb_u8(&b, 0x60); bb_u8(&b, 0xea);           /* 60000 */
    bb_key(&b, "i16", MMS_GGUF_TYPE_INT16);   bb_u8(&b, 0xd0); bb_u8(&b, 0x8a);           /* -30000 */
    bb_key(&b, "u32", MMS_GGUF_TYPE_UINT32);  bb_u32(&b, 4000000000u);
    bb_key(&b, "i32", MMS_GGUF_TYPE_INT32);   bb_u32(&b, (uint32_t)-5);
    bb_key(&b, "u64", MMS_GGUF_TYPE_UINT64);  bb_u64(&b, 5000000000ULL);
    bb_key(&b, "i64", MMS_GGUF_TYPE_INT64);   bb_u64(&b, (uint64_t)-3000000000LL);
    bb_key(&b, "i64s", MMS_GGUF_TYPE_INT64);  bb_u64(&b, (uint64_t)-7);
    bb_key(&b, "f32", MMS_GGUF_TYPE_FLOAT32); bb_f32(&b, 0.1f);
    bb_key(&b, "f64", MMS_GGUF_TYPE_FLOAT64); bb_f64(&b, 0.1);
    bb_key(&b, "f64big", MMS_GGUF_TYPE_FLOAT64); bb_f64(&b, 1e300);
    bb_key(&b, "bool", MMS_GGUF_TYPE_BOOL);   bb_u8(&b, 1);
    bb_key(&b, "str", MMS_GGUF_TYPE_STRING);  bb_u64(&b, 3); bb_put(&b, "a\0b", 3);         /* a NUL inside is kept */
    bb_key(&b, "au8", MMS_GGUF_TYPE_ARRAY);   bb_u32(&b, MMS_GGUF_TYPE_UINT8); bb_u64(&b, 3); bb_u8(&b, 1); bb_u8(&b, 255); bb_u8(&b, 0);
    bb_key(&b, "ai64", MMS_GGUF_TYPE_ARRAY);  bb_u32(&b, MMS_GGUF_TYPE_INT64); bb_u64(&b, 2); bb_u64(&b, (uint64_t)-2); bb_u64(&b, 1ULL << 40);
    bb_key(&b, "af64", MMS_GGUF_TYPE_ARRAY);  bb_u32(&b, MMS_GGUF_TYPE_FLOAT64); bb_u64(&b, 2); bb_f64(&b, -0.5); bb_f64(&b, 1e39);

    g = mms_gguf_open_memory(b.p, b.n);
    EXPECT(g != NULL, "open: %s", mms_last_error());
    if (!g) { free(b.p); return; }
    test_capture_log();
    /* in range: any integer width and signedness */
    EXPECT(mms_gguf_get_u32(g, "u8", &u32) == MMS_OK && u32 == 200, "u8 as u32");
    EXPECT(mms_gguf_get_i32(g, "u8", &i32) == MMS_OK && i32 == 200, "u8 as i32");
    EXPECT(mms_gguf_get_u64(g, "u8", &u64) == MMS_OK && u64 == 200, "u8 as u64");
    EXPECT(mms_gguf_get_i32(g, "i8", &i32) == MMS_OK && i32 == -100, "i8 as i32");
    EXPECT(mms_gguf_get_u32(g, "u16", &u32) == MMS_OK && u32 == 60000, "u16 %u", u32);
    EXPECT(mms_gguf_get_i32(g, "i16", &i32) == MMS_OK && i32 == -30000, "i16 %d", i32);
    EXPECT(mms_gguf_get_u64(g, "u32", &u64) == MMS_OK && u64 == 4000000000u, "u32 as u64");
    EXPECT(mms_gguf_get_i32(g, "i32", &i32) == MMS_OK && i32 == -5, "i32");
    EXPECT(mms_gguf_get_u64(g, "u64", &u64) == MMS_OK && u64 == 5000000000ULL, "u64");
    EXPECT(mms_gguf_get_i32(g, "i64s", &i32) == MMS_OK && i32 == -7, "small i64 as i32");
    EXPECT(mms_gguf_get_f32(g, "f32", &f32) == MMS_OK && f32 == 0.1f, "f32");
    EXPECT(mms_gguf_get_f32(g, "f64", &f32) == MMS_OK && f32 == 0.1f, "f64 as f32 %.9g", (double)f32);
    EXPECT(mms_gguf_get_bool(g, "bool", &bo) == MMS_OK && bo, "bool");
    EXPECT(mms_gguf_get_str(g, "str", &s, &len) == MMS_OK && len == 3 && memcmp(s, "a\0b", 3) == 0, "string with NUL");
    EXPECT(inside(s, len, b.p, b.n), "get_str points into the caller's memory (no copy)");
    /* out of range */
    EXPECT_ERROR(mms_gguf_get_u32(g, "i8", &u32), MMS_ERR_FORMAT, "'i8'", "i8 value -100 does not fit in u32", "gguf memory");
    EXPECT_ERROR(mms_gguf_get_u64(g, "i32", &u64), MMS_ERR_FORMAT, "i32 value -5 does not fit in u64");
    EXPECT_ERROR(mms_gguf_get_i32(g, "u32", &i32), MMS_ERR_FORMAT, "u32 value 4000000000 does not fit in i32");
    EXPECT_ERROR(mms_gguf_get_u32(g, "u64", &u32), MMS_ERR_FORMAT, "u64 value 5000000000 does not fit in u32");
    EXPECT_ERROR(mms_gguf_get_i32(g, "i64", &i32), MMS_ERR_FORMAT, "i64 value -3000000000 does not fit in i32");
    EXPECT_ERROR(mms_gguf_get_f32(g, "f64big", &f32), MMS_ERR_FORMAT, "'f64big'", "does not fit in f32");
    /* wrong type */
    EXPECT_ERROR(mms_gguf_get_f32(g, "u32", &f32), MMS_ERR_FORMAT, "'u32'", "has type u32, wanted f32 or f64");
    EXPECT_ERROR(mms_gguf_get_u32(g, "f32", &u32), MMS_ERR_FORMAT, "has type f32, wanted an integer");
    EXPECT_ERROR(mms_gguf_get_u32(g, "bool", &u32), MMS_ERR_FORMAT, "has type bool");
    EXPECT_ERROR(mms_gguf_get_bool(g, "u8", &bo), MMS_ERR_FORMAT, "has type u8, wanted a bool");
    EXPECT_ERROR(mms_gguf_get_str(g, "u8", &s, &len), MMS_ERR_FORMAT, "wanted a string");
    EXPECT_ERROR(mms_gguf_get_u32(g, "au8", &u32), MMS_ERR_FORMAT, "has type array of u8");
    EXPECT_ERROR(mms_gguf_get_arr_i32(g, "u32", ibuf, 4, &n), MMS_ERR_FORMAT, "wanted an array of integers");
    EXPECT_ERROR(mms_gguf_get_arr_i32(g, "af64", ibuf, 4, &n), MMS_ERR_FORMAT, "array of f64");
    EXPECT_ERROR(mms_gguf_get_arr_f32(g, "au8", fbuf, 4, &n), MMS_ERR_FORMAT, "wanted an array of f32 or f64");
    EXPECT_ERROR(mms_gguf_get_arr_str(g, "au8", 0, &s, &len), MMS_ERR_FORMAT, "wanted an array of strings");
    /* missing keys: the key and where it was looked for; exact bytes, no prefixes */
    EXPECT_ERROR(mms_gguf_get_u32(g, "nope", &u32), MMS_ERR_INVALID_ARG, "key 'nope' not found", "gguf memory");
    EXPECT_ERROR(mms_gguf_get_u32(g, "u", &u32), MMS_ERR_INVALID_ARG, "not found");
    EXPECT_ERROR(mms_gguf_get_u32(g, "U8", &u32), MMS_ERR_INVALID_ARG, "not found");
    EXPECT_ERROR(mms_gguf_get_str(g, "u8 ", &s, &len), MMS_ERR_INVALID_ARG, "not found");
    EXPECT_ERROR(mms_gguf_get_u32(NULL, "u8", &u32), MMS_ERR_INVALID_ARG, "gguf is NULL");
    EXPECT_ERROR(mms_gguf_get_u32(g, NULL, &u32), MMS_ERR_INVALID_ARG, "key is NULL");
    /* arrays: conversion per element, the first cap elements, the length always */
    EXPECT(mms_gguf_get_arr_i32(g, "au8", NULL, 0, &n) == MMS_OK && n == 3, "length only: %lld", (long long)n);
    memset(ibuf, 0x55, sizeof ibuf);
    EXPECT(mms_gguf_get_arr_i32(g, "au8", ibuf, 2, &n) == MMS_OK && n == 3 && ibuf[0] == 1 && ibuf[1] == 255 && ibuf[2] == 0x55555555,
           "partial copy %d %d %d", ibuf[0], ibuf[1], ibuf[2]);
    EXPECT_ERROR(mms_gguf_get_arr_i32(g, "ai64", ibuf, 4, &n), MMS_ERR_FORMAT, "'ai64' element 1", "i64 value 1099511627776 does not fit in i32");
    EXPECT(mms_gguf_get_arr_i32(g, "ai64", ibuf, 1, &n) == MMS_OK && ibuf[0] == -2 && n == 2, "first i64 element fits");
    EXPECT_ERROR(mms_gguf_get_arr_f32(g, "af64", fbuf, 4, &n), MMS_ERR_FORMAT, "element 1", "does not fit in f32");
    EXPECT(mms_gguf_get_arr_f32(g, "af64", fbuf, 1, &n) == MMS_OK && fbuf[0] == -0.5f, "f64 array as f32");
    EXPECT_ERROR(mms_gguf_get_arr_i32(g, "au8", NULL, 2, &n), MMS_ERR_INVALID_ARG, "out is NULL");
    EXPECT_ERROR(mms_gguf_get_arr_i32(g, "au8", ibuf, -1, &n), MMS_ERR_INVALID_ARG, "negative capacity");
    /* index-based calls */
    EXPECT(mms_gguf_get_arr_n(g, mms_gguf_find_key(g, "au8")) == 3 && mms_gguf_get_arr_type(g, mms_gguf_find_key(g, "ai64")) == MMS_GGUF_TYPE_INT64,
           "arr_n / arr_type");
    mms_clear_error();
    EXPECT(mms_gguf_get_arr_n(g, 0) == -1 && mms_last_status() == MMS_ERR_INVALID_ARG && strstr(mms_last_error(), "not array"),
           "arr_n of a scalar: %s", mms_last_error());
    EXPECT(mms_gguf_get_arr_type(g, 0) == MMS_GGUF_TYPE_NONE, "arr_type of a scalar");
    EXPECT(mms_gguf_get_key(g, 17) == NULL && mms_gguf_get_key(g, -1) == NULL && strstr(mms_last_error(), "key index -1 out of range"),
           "key out of range: %s", mms_last_error());
    EXPECT(mms_gguf_get_kv_type(g, 17) == MMS_GGUF_TYPE_NONE && mms_gguf_get_arr_n(g, 99) == -1, "index out of range");
    EXPECT(mms_gguf_find_key(g, NULL) == -1 && mms_gguf_find_key(NULL, "u8") == -1 && mms_gguf_get_n_kv(NULL) == 0, "NULLs");
    mms_log_set(NULL, NULL);
    mms_gguf_close(g);
    free(b.p);
}

static void test_string_arrays_and_odd_keys(void) {
    struct bb b = { NULL, 0, 0 };
    struct mms_gguf *g;
    const char *s; size_t len; int64_t n;
    int64_t i;
    char key[300];
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = '\0';   /* keys may be long, unlike tensor names */
    bb_put(&b, "GGUF", 4); bb_u32(&b, 2); bb_u64(&b, 0); bb_u64(&b, 4);   /* version 2 reads the same */
    bb_key(&b, "vocab", MMS_GGUF_TYPE_ARRAY); bb_u32(&b, MMS_GGUF_TYPE_STRING); bb_u64(&b, 1000);
    for (i = 0; i < 1000; i++) { char t[32]; snprintf(t, sizeof t, "tok%lld", (long long)i); bb_str(&b, i == 500 ? "" : t); }
    bb_key(&b, key, MMS_GGUF_TYPE_BOOL); bb_u8(&b, 0);
    bb_u64(&b, 5); bb_put(&b, "x\0yzw", 5); bb_u32(&b, MMS_GGUF_TYPE_UINT8); bb_u8(&b, 9);   /* a key with a NUL inside */
    bb_key(&b, "x", MMS_GGUF_TYPE_UINT8); bb_u8(&b, 1);
    g = mms_gguf_open_memory(b.p, b.n);
    EXPECT(g != NULL, "open: %s", mms_last_error());
    if (!g) { free(b.p); return; }
    EXPECT(mms_gguf_get_version(g) == 2, "version %u", mms_gguf_get_version(g));
    n = mms_gguf_get_arr_n(g, 0);
    EXPECT(n == 1000, "n %lld", (long long)n);
    for (i = 0; i < n; i++) {
        char t[32];
        snprintf(t, sizeof t, "tok%lld", (long long)i);
        if (mms_gguf_get_arr_str(g, "vocab", i, &s, &len) != MMS_OK || !str_is(s, len, i == 500 ? "" : t)) {
            EXPECT(0, "vocab[%lld]", (long long)i);
            break;
        }
    }
    test_capture_log();
    EXPECT_ERROR(mms_gguf_get_arr_str(g, "vocab", 1000, &s, &len), MMS_ERR_INVALID_ARG, "index 1000 out of range", "1000 strings");
    EXPECT_ERROR(mms_gguf_get_arr_str(g, "vocab", -1, &s, &len), MMS_ERR_INVALID_ARG, "out of range");
    EXPECT_ERROR(mms_gguf_get_str(g, "vocab", &s, &len), MMS_ERR_FORMAT, "array of string");
    mms_log_set(NULL, NULL);
    EXPECT(mms_gguf_find_key(g, key) == 1, "long key");
    EXPECT(mms_gguf_find_key(g, "x") == 3, "'x' must not match 'x\\0yzw': %lld", (long long)mms_gguf_find_key(g, "x"));
    EXPECT(strcmp(mms_gguf_get_key(g, 2), "x") == 0, "the C string of a key with a NUL stops there");
    mms_gguf_close(g);
    free(b.p);
}

/* Many keys and tensors: lookups go through the hash index (a linear scan per key would make
   this quadratic), every one found at its index. */
static void test_many_keys_and_tensors(void) {
    enum { N_KV = 50000, N_T = 5000 };
    struct bb b = { NULL, 0, 0 };
    struct mms_gguf *g;
    char name[64];
    int i, misses = 0;
    int64_t t0;
    bb_put(&b, "GGUF", 4); bb_u32(&b, 3); bb_u64(&b, N_T); bb_u64(&b, N_KV);
    for (i = 0; i < N_KV; i++) { snprintf(name, sizeof name, "key.%d", i); bb_key(&b, name, MMS_GGUF_TYPE_UINT32); bb_u32(&b, (uint32_t)i); }
    for (i = 0; i < N_T; i++) {
        snprintf(name, sizeof name, "blk.%d.weight", i);
        bb_str(&b, name); bb_u32(&b, 1); bb_u64(&b, 8); bb_u32(&b, 0); bb_u64(&b, (uint64_t)i * 32);
    }
    bb_pad(&b, 32);
    for (i = 0; i < N_T * 32; i++) bb_u8(&b, (uint8_t)i);
    t0 = mms_time_us();
    g = mms_gguf_open_memory(b.p, b.n);
    EXPECT(g != NULL, "open: %s", mms_last_error());
    if (!g) { free(b.p); return; }
    for (i = 0; i < N_KV; i++) {
        uint32_t v = 0;
        snprintf(name, sizeof name, "key.%d", i);
        misses += mms_gguf_find_key(g, name) != i || mms_gguf_get_u32(g, name, &v) != MMS_OK || v != (uint32_t)i;
    }
    for (i = 0; i < N_T; i++) {
        snprintf(name, sizeof name, "blk.%d.weight", i);
        misses += mms_gguf_find_tensor(g, name) != i;
    }
    EXPECT(misses == 0, "%d lookups failed", misses);
    EXPECT(mms_time_us() - t0 < 2000000, "open and %d lookups took %lld us", N_KV + N_T, (long long)(mms_time_us() - t0));
    mms_gguf_close(g);
    free(b.p);
}

/* -- the independent reference: written by gguf-py (tools/gen_gguf_fixture.py) -- */

static void test_python_reference_fixture(void) {
    /* Expected values, copied from tools/gen_gguf_fixture.py: one row per key, in file order. */
    static const struct { const char *key; enum mms_gguf_type type; long long sv; unsigned long long uv; } ints[] = {
        { "test.u8",  MMS_GGUF_TYPE_UINT8,  0, 200 },
        { "test.i8",  MMS_GGUF_TYPE_INT8,   -100, 0 },
        { "test.u16", MMS_GGUF_TYPE_UINT16, 0, 60000 },
        { "test.i16", MMS_GGUF_TYPE_INT16,  -30000, 0 },
        { "test.u32", MMS_GGUF_TYPE_UINT32, 0, 4000000000ULL },
        { "test.i32", MMS_GGUF_TYPE_INT32,  -2000000000LL, 0 },
        { "test.u64", MMS_GGUF_TYPE_UINT64, 0, (1ULL << 40) + 3 },
        { "test.i64", MMS_GGUF_TYPE_INT64,  -(1LL << 40) - 5, 0 },
    };
    static const char *const key_order[] = {
        "general.architecture", "general.alignment", "test.u8", "test.i8", "test.u16", "test.i16", "test.u32", "test.i32",
        "test.u64", "test.i64", "test.f32", "test.f64", "test.true", "test.false", "test.str", "test.str_empty",
        "test.arr_i32", "test.arr_f32", "test.arr_str", "test.arr_u8", "test.arr_i64", "test.arr_f64", "test.arr_bool" };
    static const struct { const char *name; uint32_t ggml; enum mms_type type; int n_dims; int64_t ne[4]; uint64_t offset; size_t size; } tensors[] = {
        { "t.f32",  0,  MMS_TYPE_F32,     2, { 5, 3, 1, 1 },  0,   60 },
        { "t.f16",  1,  MMS_TYPE_F16,     3, { 2, 2, 2, 1 },  64,  16 },
        { "t.i32",  26, MMS_TYPE_I32,     1, { 7, 1, 1, 1 },  128, 28 },
        { "t.q8_0", 8,  MMS_TYPE_Q8_0,   2, { 32, 2, 1, 1 }, 192, 68 },
        { "t.bf16", 30, MMS_TYPE_BF16,    1, { 4, 1, 1, 1 },  320, 8 },
    };
    static const int32_t arr_i32[] = { 1, -2, 2147483647 };
    static const float arr_f32[] = { 0.5f, -1.25f, 1e30f };
    static const char *const arr_str[] = { "a", "", "\xc3\xbc" "n" "\xc3\xaf", "tab\there" };
    static const mms_bf16_t bf16_bits[] = { 0x3f80, 0xc000, 0x0000, 0x7f80 };
    const char *path = test_src_path("fixtures/gguf/reference.gguf");
    struct mms_gguf *g = mms_gguf_open(path);
    const char *s; size_t len;
    float f32; bool bo; int64_t n, i, k;
    int32_t ibuf[4]; float fbuf[4];
    EXPECT(g != NULL, "open %s: %s", path, mms_last_error());
    if (!g) return;
    EXPECT(mms_gguf_get_version(g) == 3 && mms_gguf_get_alignment(g) == 64, "version %u alignment %zu", mms_gguf_get_version(g), mms_gguf_get_alignment(g));
    EXPECT(mms_gguf_get_n_kv(g) == 23 && mms_gguf_get_n_tensors(g) == 5, "n_kv %lld n_tensors %lld",
           (long long)mms_gguf_get_n_kv(g), (long long)mms_gguf_get_n_tensors(g));
    for (i = 0; i < 23 && i < mms_gguf_get_n_kv(g); i++)
        EXPECT(strcmp(mms_gguf_get_key(g, i), key_order[i]) == 0, "key %lld is %s, expected %s", (long long)i, mms_gguf_get_key(g, i), key_order[i]);
    EXPECT(mms_gguf_get_str(g, "general.architecture", &s, &len) == MMS_OK && str_is(s, len, "mmstest"), "architecture");
    for (k = 0; k < (int64_t)(sizeof ints / sizeof ints[0]); k++) {
        uint32_t u32; int32_t i32; uint64_t u64;
        bool neg = ints[k].sv < 0;
        enum mms_status want_u32 = !neg && ints[k].uv <= UINT32_MAX ? MMS_OK : MMS_ERR_FORMAT;
        enum mms_status want_i32 = neg ? (ints[k].sv >= INT32_MIN ? MMS_OK : MMS_ERR_FORMAT) : (ints[k].uv <= INT32_MAX ? MMS_OK : MMS_ERR_FORMAT);
        EXPECT(mms_gguf_get_kv_type(g, mms_gguf_find_key(g, ints[k].key)) == ints[k].type, "%s type", ints[k].key);
        test_capture_log();
        EXPECT(mms_gguf_get_u32(g, ints[k].key, &u32) == want_u32 && (want_u32 != MMS_OK || u32 == ints[k].uv), "%s as u32", ints[k].key);
        EXPECT(mms_gguf_get_i32(g, ints[k].key, &i32) == want_i32 &&
               (want_i32 != MMS_OK || (neg ? i32 == ints[k].sv : (unsigned long long)i32 == ints[k].uv)), "%s as i32", ints[k].key);
        EXPECT(mms_gguf_get_u64(g, ints[k].key, &u64) == (neg ? MMS_ERR_FORMAT : MMS_OK) && (neg || u64 == ints[k].uv), "%s as u64", ints[k].key);
        mms_log_set(NULL, NULL);
    }
    EXPECT(mms_gguf_get_f32(g, "test.f32", &f32) == MMS_OK && f32 == 0.15625f, "f32 %g", (double)f32);
    EXPECT(mms_gguf_get_f32(g, "test.f64", &f32) == MMS_OK && f32 == 3.14159265f, "f64 %.9g", (double)f32);
    {
        const struct mms__gguf_kv *kv = &g->kv[mms_gguf_find_key(g, "test.f64")];   /* the full double, white box */
        double d;
        mms__gguf_float(g->base + kv->val_pos, kv->type, &d);
        EXPECT(d == 3.141592653589793, "f64 %.17g", d);
    }
    EXPECT(mms_gguf_get_bool(g, "test.true", &bo) == MMS_OK && bo, "true");
    EXPECT(mms_gguf_get_bool(g, "test.false", &bo) == MMS_OK && !bo, "false");
    EXPECT(mms_gguf_get_str(g, "test.str", &s, &len) == MMS_OK && str_is(s, len, "h\xc3\xa9llo w\xc3\xb6rld"), "str");
    EXPECT(mms_gguf_get_str(g, "test.str_empty", &s, &len) == MMS_OK && len == 0, "empty str");
    EXPECT(mms_gguf_get_arr_i32(g, "test.arr_i32", ibuf, 4, &n) == MMS_OK && n == 3 && memcmp(ibuf, arr_i32, sizeof arr_i32) == 0, "arr_i32");
    EXPECT(mms_gguf_get_arr_f32(g, "test.arr_f32", fbuf, 4, &n) == MMS_OK && n == 3 && memcmp(fbuf, arr_f32, sizeof arr_f32) == 0, "arr_f32");
    EXPECT(mms_gguf_get_arr_n(g, mms_gguf_find_key(g, "test.arr_str")) == 4, "arr_str n");
    for (i = 0; i < 4; i++)
        EXPECT(mms_gguf_get_arr_str(g, "test.arr_str", i, &s, &len) == MMS_OK && str_is(s, len, arr_str[i]), "arr_str[%lld]", (long long)i);
    EXPECT(mms_gguf_get_arr_i32(g, "test.arr_u8", ibuf, 4, &n) == MMS_OK && n == 3 && ibuf[0] == 0 && ibuf[1] == 255 && ibuf[2] == 7, "arr_u8");
    test_capture_log();
    EXPECT(mms_gguf_get_arr_type(g, mms_gguf_find_key(g, "test.arr_i64")) == MMS_GGUF_TYPE_INT64 &&
           mms_gguf_get_arr_i32(g, "test.arr_i64", ibuf, 4, &n) == MMS_ERR_FORMAT && n == 2, "arr_i64 -2^40 does not fit i32");
    mms_log_set(NULL, NULL);
    EXPECT(mms_gguf_get_arr_f32(g, "test.arr_f64", fbuf, 4, &n) == MMS_OK && n == 2 && fbuf[0] == 0.25f && fbuf[1] == -8.0f, "arr_f64");
    {
        int64_t kb = mms_gguf_find_key(g, "test.arr_bool");
        const struct mms__gguf_kv *kv = &g->kv[kb];
        EXPECT(mms_gguf_get_arr_type(g, kb) == MMS_GGUF_TYPE_BOOL && mms_gguf_get_arr_n(g, kb) == 3 &&
               memcmp(g->base + kv->val_pos, "\1\0\1", 3) == 0, "arr_bool");
    }
    for (k = 0; k < 5; k++) {
        struct mms_gguf_tensor_info info;
        int d;
        if (mms_gguf_get_tensor(g, k, &info) != MMS_OK) { EXPECT(0, "tensor %lld: %s", (long long)k, mms_last_error()); continue; }
        EXPECT(strcmp(info.name, tensors[k].name) == 0 && mms_gguf_find_tensor(g, tensors[k].name) == k, "name %s", info.name);
        EXPECT(info.ggml_type == tensors[k].ggml && info.type == tensors[k].type && info.n_dims == tensors[k].n_dims,
               "%s: ggml %u type %d n_dims %d", info.name, info.ggml_type, (int)info.type, info.n_dims);
        for (d = 0; d < 4; d++) EXPECT(info.ne[d] == tensors[k].ne[d], "%s ne[%d] = %lld", info.name, d, (long long)info.ne[d]);
        EXPECT(info.offset == tensors[k].offset && info.size == tensors[k].size, "%s offset %llu size %zu", info.name,
               (unsigned long long)info.offset, info.size);
        for (i = 0; i < (int64_t)info.size / 4 && k == 0; i++) {
            float v; memcpy(&v, (const char *)info.data + 4 * i, 4);
            EXPECT(v == (float)i * 0.5f - 3.0f, "t.f32[%lld] = %g", (long long)i, (double)v);
        }
        for (i = 0; i < 8 && k == 1; i++) {
            mms_fp16_t h; memcpy(&h, (const char *)info.data + 2 * i, 2);
            EXPECT(mms_fp16_to_fp32(h) == (float)(i - 4), "t.f16[%lld]", (long long)i);
        }
        for (i = 0; i < 7 && k == 2; i++) {
            int32_t v; memcpy(&v, (const char *)info.data + 4 * i, 4);
            EXPECT(v == -3 * i, "t.i32[%lld] = %d", (long long)i, v);
        }
        for (i = 0; i < 68 && k == 3; i++)
            EXPECT(((const uint8_t *)info.data)[i] == (uint8_t)(i * 3), "t.q8_0 byte %lld", (long long)i);
        for (i = 0; i < 4 && k == 4; i++) {
            mms_bf16_t h; memcpy(&h, (const char *)info.data + 2 * i, 2);
            EXPECT(h == bf16_bits[i], "t.bf16[%lld] = %04x", (long long)i, h);
        }
    }
    mms_gguf_close(g);
}

/* -- broken files -- */

/* A small valid file built by hand, with the position of every field the corruptions patch. */
struct good_file {
    struct bb b;
    size_t version, n_tensors, n_kv;
    size_t arch_len, bool_type, bool_val, ints_keylen, ints_key, ints_elem, ints_count, strs_count, strs_first, flags_second;
    size_t align_type, align_val;
    size_t t0_name, t0_n_dims, t0_ne0, t0_ne1, t0_type, t0_offset;
    size_t t1_name, t1_name_bytes, t1_type, t1_offset, data;
};

static void make_good_file(struct good_file *f) {
    struct bb *b = &f->b;
    int i;
    memset(f, 0, sizeof *f);
    bb_put(b, "GGUF", 4);
    f->version = bb_u32(b, 3);
    f->n_tensors = bb_u64(b, 2);
    f->n_kv = bb_u64(b, 6);
    bb_key(b, "general.architecture", MMS_GGUF_TYPE_STRING); f->arch_len = bb_str(b, "test");
    f->bool_type = bb_key(b, "k.bool", MMS_GGUF_TYPE_BOOL) + 8 + 6; f->bool_val = bb_u8(b, 1);
    f->ints_keylen = bb_key(b, "k.ints", MMS_GGUF_TYPE_ARRAY);
    f->ints_key = f->ints_keylen + 8;
    f->ints_elem = bb_u32(b, MMS_GGUF_TYPE_INT32); f->ints_count = bb_u64(b, 3); bb_u32(b, 1); bb_u32(b, 2); bb_u32(b, 3);
    bb_key(b, "k.strs", MMS_GGUF_TYPE_ARRAY); bb_u32(b, MMS_GGUF_TYPE_STRING);
    f->strs_count = bb_u64(b, 2); f->strs_first = bb_str(b, "x"); bb_str(b, "yz");
    bb_key(b, "k.flag", MMS_GGUF_TYPE_ARRAY); bb_u32(b, MMS_GGUF_TYPE_BOOL); bb_u64(b, 2); bb_u8(b, 0); f->flags_second = bb_u8(b, 1);
    f->align_type = bb_key(b, "general.alignment", MMS_GGUF_TYPE_UINT32) + 8 + 17; f->align_val = bb_u32(b, 32);
    f->t0_name = bb_str(b, "w0"); f->t0_n_dims = bb_u32(b, 2); f->t0_ne0 = bb_u64(b, 8); f->t0_ne1 = bb_u64(b, 2);
    f->t0_type = bb_u32(b, 0); f->t0_offset = bb_u64(b, 0);                                   /* f32 [8,2]: 64 bytes */
    f->t1_name = bb_str(b, "w1"); f->t1_name_bytes = f->t1_name + 8; bb_u32(b, 1); bb_u64(b, 16); f->t1_type = bb_u32(b, 1); f->t1_offset = bb_u64(b, 64);   /* f16 [16]: 32 bytes */
    bb_pad(b, 32);
    f->data = b->n;
    for (i = 0; i < 96; i++) bb_u8(b, (uint8_t)i);
}

static void test_truncated_at_every_length(void) {
    struct good_file f;
    struct mms_gguf_writer *w = mms_gguf_writer_new();
    const char *path = tmp_path("trunc");
    const char *strs[] = { "a", "bc", "" };
    const int32_t ints[] = { -1, 7 };
    float data[16] = { 0 };
    const int64_t ne[] = { 8, 2 }, ne1[] = { 16 };
    uint8_t *bytes;
    size_t size = 0, len;
    int failures = 0;
    make_good_file(&f);
    EXPECT(open_status(f.b.p, f.b.n) == MMS_OK, "the hand-made file must open: %s", mms_last_error());
    /* and one from our writer, whose last tensor ends on the alignment (no padding to lose) */
    mms_gguf_writer_set_str(w, "general.architecture", "x");
    mms_gguf_writer_set_arr_str(w, "s", strs, 3);
    mms_gguf_writer_set_arr_i32(w, "i", ints, 2);
    mms_gguf_writer_set_bool(w, "b", true);
    mms_gguf_writer_add_tensor(w, "a", MMS_TYPE_F16, 1, ne1, data);
    mms_gguf_writer_add_tensor(w, "b", MMS_TYPE_F32, 2, ne, data);
    EXPECT(mms_gguf_writer_write(w, path) == MMS_OK, "write: %s", mms_last_error());
    mms_gguf_writer_free(w);
    bytes = read_all(path, &size);
    EXPECT(bytes && open_status(bytes, size) == MMS_OK, "the written file must open: %s", mms_last_error());
    test_capture_log();
    for (len = 0; len < f.b.n + size; len++) {
        const uint8_t *p = len < f.b.n ? f.b.p : bytes;
        size_t n = len < f.b.n ? len : len - f.b.n;
        mms_clear_error();
        if (!p) break;
        if (open_status(p, n) != MMS_ERR_FORMAT || !strstr(mms_last_error(), "gguf memory") || !strstr(mms_last_error(), "at byte offset")) {
            if (failures++ < 5) EXPECT(0, "%s cut to %zu bytes: status %d, %s", len < f.b.n ? "hand-made file" : "written file", n,
                                       (int)mms_last_status(), mms_last_error());
        }
    }
    EXPECT(failures == 0, "%d truncations not rejected", failures);
    EXPECT(open_status(NULL, 0) == MMS_ERR_FORMAT && strstr(mms_last_error(), "magic needs 4 bytes, 0 left"), "empty: %s", mms_last_error());
    mms_log_set(NULL, NULL);
    free(f.b.p);
    free(bytes);
    remove(path);
}

enum patch_kind { P_U32, P_U64, P_BYTE, P_BYTES, P_CUT };
struct corruption {
    const char     *what;
    enum patch_kind kind;
    size_t          field;    /* offsetof in struct good_file, or (P_CUT) a length */
    uint64_t        value;
    const char     *bytes;    /* P_BYTES: the replacement bytes */
    const char     *expect;   /* a fragment of the message */
};

#define AT(field) offsetof(struct good_file, field)

static void test_targeted_corruptions(void) {
    static const struct corruption cases[] = {
        { "bad magic",              P_BYTES, 0, 0, "GGUX", "bad magic 47 47 55 58" },
        { "version 1",              P_U32, AT(version), 1, NULL, "unsupported GGUF version 1" },
        { "version 99",             P_U32, AT(version), 99, NULL, "unsupported GGUF version 99" },
        { "big-endian",             P_U32, AT(version), 0x03000000u, NULL, "big-endian" },
        { "n_kv 2^62",              P_U64, AT(n_kv), 1ULL << 62, NULL, "n_kv 4611686018427387904 cannot fit" },
        { "n_kv max",               P_U64, AT(n_kv), UINT64_MAX, NULL, "n_kv 18446744073709551615 cannot fit" },
        { "n_kv one too many",      P_U64, AT(n_kv), 7, NULL, "" },
        { "n_tensors 2^62",         P_U64, AT(n_tensors), 1ULL << 62, NULL, "n_tensors 4611686018427387904 cannot fit" },
        { "n_tensors max",          P_U64, AT(n_tensors), UINT64_MAX, NULL, "n_tensors" },
        { "n_tensors one too many", P_U64, AT(n_tensors), 3, NULL, "" },
        { "key length 2^63",        P_U64, AT(ints_keylen), 1ULL << 63, NULL, "key of 9223372036854775808 bytes is longer than 65535" },
        { "key length 65536",       P_U64, AT(ints_keylen), 65536, NULL, "longer than 65535" },
        { "key length past end",    P_U64, AT(ints_keylen), 60000, NULL, "truncated: key of 60000 bytes" },
        { "string length max",      P_U64, AT(arch_len), UINT64_MAX, NULL, "truncated: string value of 18446744073709551615 bytes" },
        { "string length past end", P_U64, AT(arch_len), 1000, NULL, "truncated: string value of 1000 bytes" },
        { "unknown value type",     P_U32, AT(bool_type), 13, NULL, "unknown value type 13 of key 'k.bool'" },
        { "value type max",         P_U32, AT(bool_type), 0xffffffffu, NULL, "unknown value type 4294967295" },
        { "bool 7",                 P_BYTE, AT(bool_val), 7, NULL, "bool value 7 of key 'k.bool' (must be 0 or 1)" },
        { "bool array 2",           P_BYTE, AT(flags_second), 2, NULL, "bool value 2 in array 'k.flag'" },
        { "array of arrays",        P_U32, AT(ints_elem), MMS_GGUF_TYPE_ARRAY, NULL, "key 'k.ints' is an array of arrays" },
        { "unknown element type",   P_U32, AT(ints_elem), 77, NULL, "unknown array element type 77" },
        { "array count 2^62",       P_U64, AT(ints_count), 1ULL << 62, NULL, "array count 4611686018427387904 of key 'k.ints' (i32) does not fit" },
        { "array count max",        P_U64, AT(ints_count), UINT64_MAX, NULL, "array count 18446744073709551615" },
        { "string array count 2^61",P_U64, AT(strs_count), 1ULL << 61, NULL, "array count 2305843009213693952 of key 'k.strs' does not fit" },
        { "string element length",  P_U64, AT(strs_first), 1ULL << 40, NULL, "truncated: string array element of 1099511627776 bytes" },
        { "duplicate key",          P_BYTES, AT(ints_key), 0, "k.bool", "duplicate key 'k.bool' (first at byte offset" },
        { "alignment 0",            P_U32, AT(align_val), 0, NULL, "general.alignment 0 is not a non-zero power of two" },
        { "alignment 3",            P_U32, AT(align_val), 3, NULL, "general.alignment 3 is not a non-zero power of two" },
        { "alignment as i32",       P_U32, AT(align_type), MMS_GGUF_TYPE_INT32, NULL, "general.alignment has type i32 (must be u32)" },
        { "tensor name too long",   P_U64, AT(t0_name), 64, NULL, "tensor name of 64 bytes is longer than 63" },
        { "tensor name length max", P_U64, AT(t0_name), UINT64_MAX, NULL, "tensor name of 18446744073709551615 bytes" },
        { "duplicate tensor name",  P_BYTES, AT(t1_name_bytes), 0, "w0", "duplicate tensor name 'w0'" },
        { "n_dims 0",               P_U32, AT(t0_n_dims), 0, NULL, "tensor 'w0' has 0 dimensions (must be 1 to 4)" },
        { "n_dims 5",               P_U32, AT(t0_n_dims), 5, NULL, "has 5 dimensions" },
        { "n_dims max",             P_U32, AT(t0_n_dims), 0xffffffffu, NULL, "has 4294967295 dimensions" },
        { "ne 2^63",                P_U64, AT(t0_ne0), 1ULL << 63, NULL, "ne[0] = 9223372036854775808 of tensor 'w0' is out of range" },
        { "ne max",                 P_U64, AT(t0_ne1), UINT64_MAX, NULL, "ne[1] = 18446744073709551615" },
        { "ne product overflows",   P_U64, AT(t0_ne1), 1ULL << 62, NULL, "tensor 'w0' has too many elements" },
        { "ne past the end",        P_U64, AT(t0_ne0), 1ULL << 40, NULL, "data of tensor 'w0' (8796093022208 bytes at data offset 0) runs past the end" },
        { "unsupported type 4",     P_U32, AT(t0_type), 4, NULL, "unsupported tensor type 4 for tensor 'w0'" },
        { "unsupported type 1000",  P_U32, AT(t0_type), 1000, NULL, "unsupported tensor type 1000 for tensor 'w0'" },
        { "ne[0] not a block",      P_U32, AT(t1_type), 8, NULL, "ne[0] = 16 of tensor 'w1' is not a multiple of the block size 32 of q8_0" },
        { "ne[0] not a q5_k block", P_U32, AT(t1_type), 13, NULL, "ne[0] = 16 of tensor 'w1' is not a multiple of the block size 256 of q5_k" },
        { "offset misaligned",      P_U64, AT(t1_offset), 68, NULL, "offset 68 of tensor 'w1' is not a multiple of the alignment 32" },
        { "offset past the end",    P_U64, AT(t1_offset), 4096, NULL, "data of tensor 'w1' (32 bytes at data offset 4096) runs past the end" },
        { "offset max",             P_U64, AT(t1_offset), UINT64_MAX - 31, NULL, "runs past the end" },
        { "last byte missing",      P_U64, AT(t1_offset), 64 + 32, NULL, "runs past the end" },
        { "overlap",                P_U64, AT(t1_offset), 32, NULL, "tensors 'w0' (64 bytes at data offset 0) and 'w1' (at data offset 32) overlap" },
        { "no data section",        P_CUT, AT(data), 0, NULL, "data section would start" },
    };
    struct good_file f;
    size_t i;
    make_good_file(&f);
    EXPECT(open_status(f.b.p, f.b.n) == MMS_OK, "baseline: %s", mms_last_error());
    test_capture_log();
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct corruption *c = &cases[i];
        uint8_t *p = (uint8_t *)malloc(f.b.n);
        size_t at = c->field == 0 ? 0 : *(const size_t *)((const char *)&f + c->field), n = f.b.n;
        memcpy(p, f.b.p, f.b.n);
        switch (c->kind) {
            case P_U32:   patch_u32(p, at, (uint32_t)c->value); break;
            case P_U64:   patch_u64(p, at, c->value); break;
            case P_BYTE:  p[at] = (uint8_t)c->value; break;
            case P_BYTES: memcpy(p + at, c->bytes, strlen(c->bytes)); break;
            case P_CUT:   n = at - 1; break;
        }
        mms_clear_error();
        if (open_status(p, n) != MMS_ERR_FORMAT || !strstr(mms_last_error(), "gguf memory") ||
            !strstr(mms_last_error(), "at byte offset") || !strstr(mms_last_error(), c->expect))
            EXPECT(0, "%s: status %d, message: %s (wanted \"%s\")", c->what, (int)mms_last_status(), mms_last_error(), c->expect);
        free(p);
    }
    /* the offset in the message is where the bad field is */
    {
        char want[64];
        uint8_t *p = (uint8_t *)malloc(f.b.n);
        memcpy(p, f.b.p, f.b.n);
        p[f.bool_val] = 7;
        snprintf(want, sizeof want, "(at byte offset %zu)", f.bool_val);
        EXPECT_ERROR(open_status(p, f.b.n), MMS_ERR_FORMAT, want);
        free(p);
    }
    mms_log_set(NULL, NULL);
    free(f.b.p);
}

/* Seeded random damage to the hand-made file (a few bytes overwritten, ranges cut or repeated),
   through the fuzzer's walk: each opens and reads back cleanly or fails with MMS_ERR_FORMAT. */
static void test_random_mutations(void) {
    struct good_file f;
    int iter, bad = 0;
    make_good_file(&f);
    test_capture_log();
    for (iter = 0; iter < 3000; iter++) {
        size_t n = f.b.n, k, edits = (size_t)test_rand_int(1, 4);
        uint8_t *p = (uint8_t *)malloc(n + 64);
        enum mms_status st;
        memcpy(p, f.b.p, n);
        for (k = 0; k < edits; k++) {
            size_t at = (size_t)test_rand_int(0, (int)n - 1);
            switch (test_rand_int(0, 3)) {
                case 0: p[at] = (uint8_t)test_rand_u64(); break;
                case 1: p[at] ^= (uint8_t)(1u << test_rand_int(0, 7)); break;
                case 2: if (at + 8 <= n) patch_u64(p, at, test_rand_u64() >> test_rand_int(0, 63)); break;
                case 3: n = at; break;
            }
            if (n == 0) break;
        }
        st = fuzz_gguf_one(p, n);
        if (st != MMS_OK && (st != MMS_ERR_FORMAT || !strstr(mms_last_error(), "at byte offset")) && bad++ < 5)
            EXPECT(0, "mutation %d: status %d: %s", iter, (int)st, mms_last_error());
        free(p);
    }
    mms_log_set(NULL, NULL);
    free(f.b.p);
}

static void test_open_file_errors(void) {
    const char *path = tmp_path("bad");
    const char *missing = "/nonexistent-dir/mms/no-such-model.gguf";
    FILE *fp;
    test_capture_log();
    mms_clear_error();
    EXPECT(mms_gguf_open(missing) == NULL && mms_last_status() == MMS_ERR_IO && strstr(mms_last_error(), missing),
           "missing file: %d %s", (int)mms_last_status(), mms_last_error());
    mms_clear_error();
    EXPECT(mms_gguf_open(test_src_path("fixtures")) == NULL && mms_last_status() != MMS_OK && strstr(mms_last_error(), "fixtures"),
           "directory: %d %s", (int)mms_last_status(), mms_last_error());
    mms_clear_error();
    EXPECT(mms_gguf_open(NULL) == NULL && mms_last_status() == MMS_ERR_INVALID_ARG, "NULL path");
    mms_clear_error();
    EXPECT(mms_gguf_open_memory(NULL, 10) == NULL && mms_last_status() == MMS_ERR_INVALID_ARG, "NULL data");
    fp = fopen(path, "wb");
    if (fp) fclose(fp);
    mms_clear_error();
    EXPECT(mms_gguf_open(path) == NULL && mms_last_status() == MMS_ERR_FORMAT && strstr(mms_last_error(), path) &&
           strstr(mms_last_error(), "truncated"), "empty file: %s", mms_last_error());
    fp = fopen(path, "wb");
    if (fp) { fwrite("GGUF\3\0\0\0\0\0\0\0\0\0\0\0\1\0\0\0\0\0\0\0", 1, 24, fp); fclose(fp); }
    mms_clear_error();
    EXPECT(mms_gguf_open(path) == NULL && mms_last_status() == MMS_ERR_FORMAT && strstr(mms_last_error(), path) &&
           strstr(mms_last_error(), "n_kv 1 cannot fit"), "format error names the file: %s", mms_last_error());
    remove(path);
    mms_log_set(NULL, NULL);
}

static void test_writer_errors(void) {
    struct mms_gguf_writer *w = mms_gguf_writer_new();
    const int64_t ne[] = { 4, 2 }, neg[] = { -4 }, ne3[] = { 3 }, huge[] = { 1, INT64_MAX / 2, 4, 1 };
    const char *null_strs[] = { "a", NULL };
    float data[8] = { 0 };
    char longname[80];
    memset(longname, 'n', 64);
    longname[64] = '\0';
    test_capture_log();
    EXPECT_ERROR(mms_gguf_writer_set_i32(w, "general.alignment", 64), MMS_ERR_INVALID_ARG, "general.alignment must be a u32");
    EXPECT_ERROR(mms_gguf_writer_set_u32(w, "general.alignment", 0), MMS_ERR_INVALID_ARG, "not a non-zero power of two");
    EXPECT_ERROR(mms_gguf_writer_set_u32(w, "general.alignment", 48), MMS_ERR_INVALID_ARG, "48 is not");
    EXPECT_ERROR(mms_gguf_writer_set_u32(w, NULL, 1), MMS_ERR_INVALID_ARG, "key is NULL");
    EXPECT_ERROR(mms_gguf_writer_set_u32(NULL, "k", 1), MMS_ERR_INVALID_ARG, "writer is NULL");
    EXPECT_ERROR(mms_gguf_writer_set_str(w, "k", NULL), MMS_ERR_INVALID_ARG, "value of 'k' is NULL");
    EXPECT_ERROR(mms_gguf_writer_set_arr_str(w, "k", null_strs, 2), MMS_ERR_INVALID_ARG, "string 1 is NULL");
    EXPECT_ERROR(mms_gguf_writer_set_arr_i32(w, "k", NULL, 3), MMS_ERR_INVALID_ARG, "values are NULL");
    EXPECT_ERROR(mms_gguf_writer_set_arr_f32(w, "k", data, -1), MMS_ERR_INVALID_ARG, "negative length");
    EXPECT(mms_gguf_writer_add_tensor(w, "t", MMS_TYPE_F32, 2, ne, data) == MMS_OK, "add: %s", mms_last_error());
    EXPECT_ERROR(mms_gguf_writer_add_tensor(w, "t", MMS_TYPE_F32, 2, ne, data), MMS_ERR_INVALID_ARG, "duplicate tensor name 't'");
    EXPECT_ERROR(mms_gguf_writer_add_tensor(w, longname, MMS_TYPE_F32, 2, ne, data), MMS_ERR_INVALID_ARG, "longer than 63 bytes");
    EXPECT_ERROR(mms_gguf_writer_add_tensor(w, "u", MMS_TYPE_F32, 0, ne, data), MMS_ERR_INVALID_ARG, "0 dimensions");
    EXPECT_ERROR(mms_gguf_writer_add_tensor(w, "u", MMS_TYPE_F32, 5, ne, data), MMS_ERR_INVALID_ARG, "5 dimensions");
    EXPECT_ERROR(mms_gguf_writer_add_tensor(w, "u", MMS_TYPE_F32, 1, neg, data), MMS_ERR_INVALID_ARG, "ne[0] = -4 is negative");
    EXPECT_ERROR(mms_gguf_writer_add_tensor(w, "u", MMS_TYPE_INVALID, 1, ne3, data), MMS_ERR_INVALID_ARG, "has no GGUF type id");
    EXPECT_ERROR(mms_gguf_writer_add_tensor(w, "u", MMS_TYPE_F32, 1, ne3, NULL), MMS_ERR_INVALID_ARG, "data is NULL");
    EXPECT_ERROR(mms_gguf_writer_add_tensor(w, NULL, MMS_TYPE_F32, 1, ne3, data), MMS_ERR_INVALID_ARG, "name is NULL");
    EXPECT_ERROR(mms_gguf_writer_add_tensor(w, "u", MMS_TYPE_F32, 1, NULL, data), MMS_ERR_INVALID_ARG, "ne is NULL");
    EXPECT_ERROR(mms_gguf_writer_add_tensor(w, "u", MMS_TYPE_F32, 4, huge, data), MMS_ERR_INVALID_ARG, "tensor 'u': too many rows");
    {
        char *key = (char *)malloc(65537);
        memset(key, 'k', 65536);
        key[65536] = '\0';
        EXPECT_ERROR(mms_gguf_writer_set_bool(w, key, true), MMS_ERR_INVALID_ARG, "key of 65536 bytes is longer than 65535");
        key[65535] = '\0';
        EXPECT(mms_gguf_writer_set_bool(w, key, true) == MMS_OK, "a 65535-byte key: %s", mms_last_error());
        free(key);
    }
    EXPECT_ERROR(mms_gguf_writer_write(w, "/nonexistent-dir/out.gguf"), MMS_ERR_IO, "cannot create '/nonexistent-dir/out.gguf'");
    {   /* a device that refuses every write: the failure is reported, not lost in the buffer */
        FILE *probe = fopen("/dev/full", "wb");
        if (probe) {
            fclose(probe);
            EXPECT_ERROR(mms_gguf_writer_write(w, "/dev/full"), MMS_ERR_IO, "writing '/dev/full' failed", "incomplete");
        }
    }
    mms_log_set(NULL, NULL);
    mms_gguf_writer_free(w);
}

static void test_type_ids(void) {
    EXPECT(mms_gguf_type_from_mms(MMS_TYPE_F32) == 0 && mms_gguf_type_from_mms(MMS_TYPE_F16) == 1 &&
           mms_gguf_type_from_mms(MMS_TYPE_BF16) == 30 && mms_gguf_type_from_mms(MMS_TYPE_I32) == 26, "ours to GGUF");
    EXPECT(mms_gguf_type_from_mms(MMS_TYPE_INVALID) == -1 && mms_gguf_type_from_mms(MMS_TYPE_COUNT) == -1, "none");
    EXPECT(mms_gguf_type_to_mms(0) == MMS_TYPE_F32 && mms_gguf_type_to_mms(1) == MMS_TYPE_F16 && mms_gguf_type_to_mms(30) == MMS_TYPE_BF16 &&
           mms_gguf_type_to_mms(26) == MMS_TYPE_I32, "GGUF to ours");
    EXPECT(mms_gguf_type_to_mms(8) == MMS_TYPE_Q8_0 && mms_gguf_type_to_mms(2) == MMS_TYPE_Q4_0 && mms_gguf_type_to_mms(12) == MMS_TYPE_Q4_K &&
           mms_gguf_type_to_mms(14) == MMS_TYPE_Q6_K && mms_gguf_type_to_mms(13) == MMS_TYPE_Q5_K &&
           mms_gguf_type_from_mms(MMS_TYPE_Q4_K) == 12 && mms_gguf_type_from_mms(MMS_TYPE_Q5_K) == 13, "block types");
    EXPECT(mms_gguf_type_to_mms(3) == MMS_TYPE_INVALID && mms_gguf_type_to_mms(28) == MMS_TYPE_INVALID && mms_gguf_type_to_mms(4) == MMS_TYPE_INVALID,
           "unloadable or unknown");
}

/* -- the fuzz corpus: every input the fuzzer kept opens or fails cleanly -- */

static void test_fuzz_corpus_replays(void) {
    const char *dir = test_src_path("fuzz/corpus-gguf");
    char dirbuf[1024];
    DIR *d;
    struct dirent *e;
    int n_files = 0, n_ok = 0;
    snprintf(dirbuf, sizeof dirbuf, "%s", dir);
    d = opendir(dirbuf);
    EXPECT(d != NULL, "cannot list %s", dirbuf);
    if (!d) return;
    test_capture_log();
    while ((e = readdir(d)) != NULL) {
        char path[1300];
        uint8_t *p;
        size_t size = 0;
        enum mms_status st;
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dirbuf, e->d_name);
        if (!(p = read_all(path, &size))) continue;
        st = fuzz_gguf_one(p, size);   /* aborts on a broken invariant */
        EXPECT(st == MMS_OK || st == MMS_ERR_FORMAT, "%s: status %d: %s", e->d_name, (int)st, mms_last_error());
        n_ok += st == MMS_OK;
        n_files++;
        free(p);
    }
    closedir(d);
    mms_log_set(NULL, NULL);
    EXPECT(n_files >= 10, "only %d corpus files in %s", n_files, dirbuf);
    EXPECT(n_ok >= 1, "no corpus file opens");
}

int main(void) {
    int64_t t0 = mms_time_us();
    test_seed();
    RUN(test_writer_round_trip_every_setter);
    RUN(test_writer_round_trip_tensors_custom_alignment);
    RUN(test_writer_copy_kv_every_type);
    RUN(test_getters_convert_and_refuse);
    RUN(test_string_arrays_and_odd_keys);
    RUN(test_many_keys_and_tensors);
    RUN(test_python_reference_fixture);
    RUN(test_truncated_at_every_length);
    RUN(test_targeted_corruptions);
    RUN(test_random_mutations);
    RUN(test_open_file_errors);
    RUN(test_writer_errors);
    RUN(test_type_ids);
    RUN(test_fuzz_corpus_replays);
    printf("%.2f s\n", (double)(mms_time_us() - t0) / 1e6);
    return test_summary();
}
