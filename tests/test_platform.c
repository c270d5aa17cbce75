/* The platform section (src/base/platform.c) on whatever system runs this: threads, atomics,
   mutexes and condition variables, the clock, aligned memory, file mapping, UTF-8 paths, LF line
   ends in the text files the library writes, CPU feature detection. Built natively, with MinGW
   (run under Wine) and for 64-bit ARM (run under QEMU). The references are the C library (clock,
   fopen), the compiler's own CPU detection and, on Windows, the wide-character file API. */
#define MMSCHED_IMPLEMENTATION
#include "../mmsched.h"
#include "test.h"
#include <time.h>
#if defined(_WIN32)
#  include <wchar.h>
#endif

/* -- threads, atomics, mutexes, condition variables -- */

#define N_WORKERS 4
#define N_ADDS    200000

struct shared {
    mms__atomic_int counter;
    long            plain;             /* guarded by mutex */
    int             arrived;           /* guarded by mutex; cond signals changes */
    bool            go;
    mms__mutex      mutex;
    mms__cond       cond;
};

static void *worker(void *arg) {
    struct shared *s = (struct shared *)arg;
    int i;
    mms__mutex_lock(&s->mutex);        /* meet: nobody starts adding before all are here */
    s->arrived++;
    mms__cond_broadcast(&s->cond);
    while (!s->go) mms__cond_wait(&s->cond, &s->mutex);
    mms__mutex_unlock(&s->mutex);
    for (i = 0; i < N_ADDS; i++) {
        mms__atomic_fetch_add(&s->counter, 1);
        if (i % 64 == 0) {
            mms__mutex_lock(&s->mutex);
            s->plain++;
            mms__mutex_unlock(&s->mutex);
        }
    }
    return NULL;
}

static void test_threads_atomics_locks(void) {
    struct shared s;
    mms__thread t[N_WORKERS];
    volatile uint64_t ids = 0;
    int i, started = 0;
    memset(&s, 0, sizeof s);
    mms__mutex_init(&s.mutex);
    mms__cond_init(&s.cond);
    for (i = 0; i < N_WORKERS; i++) started += mms__thread_create(&t[i], worker, &s) ? 1 : 0;
    EXPECT(started == N_WORKERS, "%d of %d threads started", started, N_WORKERS);
    mms__mutex_lock(&s.mutex);
    while (s.arrived < started) mms__cond_wait(&s.cond, &s.mutex);
    s.go = true;
    mms__cond_broadcast(&s.cond);
    mms__mutex_unlock(&s.mutex);
    for (i = 0; i < started; i++) mms__thread_join(t[i]);
    EXPECT(mms__atomic_load(&s.counter) == started * N_ADDS, "atomic adds: %d, expected %d", (int)mms__atomic_load(&s.counter), started * N_ADDS);
    EXPECT(s.plain == (long)started * ((N_ADDS + 63) / 64), "locked adds: %ld", s.plain);
    mms__atomic_store(&s.counter, -5);
    EXPECT(mms__atomic_fetch_add(&s.counter, 7) == -5 && mms__atomic_load(&s.counter) == 2, "fetch_add returns the old value");
    EXPECT(mms__atomic_next_u64(&ids) == 1 && mms__atomic_next_u64(&ids) == 2, "next_u64 counts from 1");
    mms__cond_destroy(&s.cond);
    mms__mutex_destroy(&s.mutex);
}

/* -- the clock against the C library's processor time: a busy loop of 50 ms of CPU time takes
   about that long on a monotonic wall clock; the bounds (half, a hundred times) still catch a
   clock in the wrong unit or one that stands still, whatever the emulator's own threads add -- */

static void test_clock(void) {
    const int64_t t0 = mms_time_us();
    const clock_t c0 = clock();
    int64_t t1 = t0, prev = t0, backwards = 0;
    volatile double sink = 0.0;
    long spins = 0;
    while ((double)(clock() - c0) < 0.05 * CLOCKS_PER_SEC && spins < 2000000000L) {
        int64_t t = mms_time_us();
        if (t < prev) backwards++;
        prev = t;
        sink += 1.0;
        spins++;
    }
    t1 = mms_time_us();
    EXPECT(backwards == 0, "the clock went backwards %lld times", (long long)backwards);
    EXPECT(t1 - t0 >= 25000, "50 ms of CPU time took %lld us on mms_time_us", (long long)(t1 - t0));
    EXPECT(t1 - t0 < 5000000, "50 ms of CPU time took %lld us on mms_time_us", (long long)(t1 - t0));
    EXPECT(mms_cpu_count() >= 1, "cpu count %d", mms_cpu_count());
}

/* -- aligned memory -- */

static void test_aligned_alloc(void) {
    static const size_t aligns[3] = { 64, 4096, (size_t)2 << 20 };
    int i;
    for (i = 0; i < 3; i++) {
        const size_t n = aligns[i] * 3 + 7;
        unsigned char *p = (unsigned char *)mms__aligned_alloc(aligns[i], n);
        size_t k;
        unsigned sum = 0;
        EXPECT(p && (uintptr_t)p % aligns[i] == 0, "alignment %zu: %p", aligns[i], (void *)p);
        if (!p) continue;
        for (k = 0; k < n; k++) p[k] = (unsigned char)k;      /* all of it is ours */
        for (k = 0; k < n; k++) sum += p[k] == (unsigned char)k;
        EXPECT(sum == n, "memory changed under us");
        mms__aligned_free(p);
    }
    mms__aligned_free(NULL);
    EXPECT(mms__aligned_alloc(64, SIZE_MAX - 8) == NULL, "an impossible size was allocated");
}

/* -- files: UTF-8 names, mapping, LF line ends -- */

/* "build/platform-é中.gguf": é as two UTF-8 bytes, 中 as three */
static const char utf8_name[] = "build/platform-\xc3\xa9\xe4\xb8\xad.gguf";

/* Whether the file named utf8_name exists, asked the system another way: on Windows through the
   wide API with the name's UTF-16 code units (a name stored in the ANSI code page would differ),
   elsewhere by the same bytes through the C library. */
static bool exists_by_other_api(void) {
#if defined(_WIN32)
    static const wchar_t wname[] = { 'b', 'u', 'i', 'l', 'd', '\\', 'p', 'l', 'a', 't', 'f', 'o', 'r', 'm', '-', 0x00e9, 0x4e2d,
                                     '.', 'g', 'g', 'u', 'f', 0 };
    FILE *f = _wfopen(wname, L"rb");
#else
    FILE *f = fopen(utf8_name, "rb");
#endif
    if (f) fclose(f);
    return f != NULL;
}

static void test_utf8_paths(void) {
    struct mms_gguf_writer *w = mms_gguf_writer_new();
    struct mms_gguf *g;
    uint32_t v = 0;
    remove(utf8_name);
    EXPECT(w && mms_gguf_writer_set_u32(w, "platform.answer", 42) == MMS_OK, "writer: %s", mms_last_error());
    EXPECT(w && mms_gguf_writer_write(w, utf8_name) == MMS_OK, "writing %s: %s", utf8_name, mms_last_error());
    mms_gguf_writer_free(w);
    EXPECT(exists_by_other_api(), "the file written under a UTF-8 name is not there under that name");
    g = mms_gguf_open(utf8_name);
    EXPECT(g != NULL, "mapping %s: %s", utf8_name, mms_last_error());
    EXPECT(g && mms_gguf_get_u32(g, "platform.answer", &v) == MMS_OK && v == 42, "read back %u", v);
    mms_gguf_close(g);
#if defined(_WIN32)
    {   /* not removable through the ANSI name: done through the same wide name */
        static const wchar_t wname[] = { 'b', 'u', 'i', 'l', 'd', '\\', 'p', 'l', 'a', 't', 'f', 'o', 'r', 'm', '-', 0x00e9, 0x4e2d,
                                         '.', 'g', 'g', 'u', 'f', 0 };
        EXPECT(_wremove(wname) == 0, "removing the file by its wide name");
    }
#else
    EXPECT(remove(utf8_name) == 0, "removing the file");
#endif
    {
        struct mms__mapping m;
        EXPECT_ERROR(mms__map_file("build/platform-bad-\xff\xfe.gguf", &m), MMS_ERR_IO, "cannot open");
    }
}

static void test_map_file(void) {
    const char *path = "build/platform-map.bin", *empty = "build/platform-empty.bin";
    unsigned char bytes[5000];
    struct mms__mapping m;
    FILE *f;
    size_t i;
    for (i = 0; i < sizeof bytes; i++) bytes[i] = (unsigned char)(i * 7 + 3);
    f = fopen(path, "wb");
    EXPECT(f && fwrite(bytes, 1, sizeof bytes, f) == sizeof bytes, "writing the file");
    if (f) fclose(f);
    f = fopen(empty, "wb");
    if (f) fclose(f);
    EXPECT(mms__map_file(path, &m) == MMS_OK && m.size == sizeof bytes && m.addr && memcmp(m.addr, bytes, sizeof bytes) == 0,
           "the mapping differs from the file: %s", mms_last_error());
    mms__unmap_file(&m);
    EXPECT(m.addr == NULL && m.size == 0, "unmap clears the mapping");
    EXPECT(mms__map_file(empty, &m) == MMS_OK && m.size == 0 && m.addr == NULL, "an empty file: %s", mms_last_error());
    mms__unmap_file(&m);
    EXPECT_ERROR(mms__map_file("build/platform-no-such-file.bin", &m), MMS_ERR_IO, "cannot open", "platform-no-such-file");
    EXPECT(m.addr == NULL && m.size == 0, "a failed map leaves nothing");
    EXPECT_ERROR(mms__map_file("build", &m), MMS_ERR_IO, "build");   /* a folder */
    EXPECT(strchr(mms_last_error(), '\r') == NULL && strchr(mms_last_error(), '\n') == NULL, "a system message keeps its line end: %s", mms_last_error());
    remove(path);
    remove(empty);
}

/* A text file the library writes (a graph as Graphviz) has LF line ends only. */
static void test_text_files_lf(void) {
    const char *path = "build/platform-graph.dot";
    struct mms_context *ctx = test_ctx(true);
    const int64_t ne[2] = { 4, 3 };
    struct mms_tensor *a = mms_new_tensor(ctx, MMS_TYPE_F32, 2, ne);
    struct mms_cgraph *g = mms_new_graph(ctx);
    long size = 0;
    char *text;
    mms_build_forward_expand(g, mms_sqr(ctx, mms_add(ctx, a, a)));
    EXPECT(mms_graph_dump_dot(g, path) == MMS_OK, "dump: %s", mms_last_error());
    text = test_slurp(path, &size);
    EXPECT(text && size > 0 && strchr(text, '\n') != NULL, "nothing written");
    EXPECT(text && strchr(text, '\r') == NULL, "CR in a written text file");
    free(text);
    remove(path);
    mms_free(ctx);
}

/* -- CPU features against the compiler's own detection -- */

static void test_cpu_features(void) {
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(MMS_NO_SIMD)
    __builtin_cpu_init();
    EXPECT(mms_cpu_has_avx2() == (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")),
           "AVX2+FMA: library %d, compiler %d", mms_cpu_has_avx2(), __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
    printf("    x86: avx2+fma+f16c %s\n", mms_cpu_has_avx2() ? "yes" : "no");
#elif defined(__aarch64__)
    EXPECT(mms_cpu_kernels_supported(MMS_CPU_KERNELS_NEON), "NEON on 64-bit ARM");
    printf("    arm64: dotprod %s\n", mms_cpu_kernels_supported(MMS_CPU_KERNELS_NEON_DOTPROD) ? "yes" : "no");
#endif
    EXPECT(mms_cpu_kernels_supported(mms_cpu_get_kernels()), "the kernels in use are supported");
}

int main(void) {
    test_seed();
    RUN(test_threads_atomics_locks);
    RUN(test_clock);
    RUN(test_aligned_alloc);
    RUN(test_utf8_paths);
    RUN(test_map_file);
    RUN(test_text_files_lf);
    RUN(test_cpu_features);
    return test_summary();
}
