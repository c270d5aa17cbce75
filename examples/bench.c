/* bench.c - CPU benchmarks: the machine's own limits, then single ops at the shapes that matter
   for Llama 3.2 Vision, the thread pool's synchronisation, the 4-layer ViT reference graph, and
   optionally the full mllama graphs at 11B shapes with random weights. Beside a case, "[0]" gives
   side-by-side figures of mmsched and ggml measured in one harness on one machine (not this one;
   the table below, side_by_side): context for this run, whose times are not comparable with them.

   Each case is computed `reps` times on the CPU backend; the table shows the median time, the rate
   (GFLOP/s or GB/s) and the fraction of the limit measured in the same run: for GFLOP/s an FMA loop
   run first; for GB/s a streaming read of as many bytes (128 MiB at least) run after each
   repetition (the median of those reads; shared machines' memory bandwidth moves by a third within
   one run, so the read at the start was no fair limit for a case timed minutes later); the "hot"
   decode products (the same 1024 rows each time, in cache, one thread) against a thread's share
   of the start's read: above 100% the kernel computes faster than memory can feed it. One machine-readable line per case
   starts with "BENCH ".

   Then the graph allocator on the reference graphs (reference_graphs.h): planned bytes against the
   lower bound, the universal bound and ggml's figure, planning time, and an SVG picture of each
   plan written to build/plan_<graph>.svg.

   Usage: build/bench [--threads N] [--reps N] [--filter SUBSTRING] [--plans-only] [--profile] [--cpu-time]
                      [--mllama [--text-layers N] [--vision-layers N] | --full] [--no-repack]
   --profile prints where the time went (per op type) after each graph case.
   --cpu-time times the machine's limits and the single-op cases by the process's CPU time (clock(); wall time on Windows)
   over the thread count instead of wall time: on a shared machine, time the threads spent waiting
   for a core does not count (cache and memory contention still do).
   --mllama writes a GGUF with random weights at Llama 3.2 11B Vision shapes to build/ and times one
   4-tile image encode, a 512-token prefill and single-token decodes through the mllama API.
   --full does the same with every layer of the 11B model (40 text, 32 + 8 vision), the text in the
   Q4_K_M mix (vision f16), 7.2 GiB on disk: also load time, peak resident memory against file +
   KV cache + compute, and decode against the bandwidth roofline (bytes each token reads over the
   streaming read measured first). --filter none skips the single-op cases. --no-repack loads the
   model with no_cpu_repack (Q4_0/Q4_K weights used where the file is mapped). */
#define MMSCHED_IMPLEMENTATION
#include "mmsched.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#if defined(_WIN32)
#  include <windows.h>
#  include <psapi.h>
#else
#  include <sys/resource.h>
#endif
#include "reference_graphs.h"
#include "random_mllama.h"
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#  include <immintrin.h>
#  define BENCH_X86 1
#else
#  define BENCH_X86 0
#endif

static int n_threads = 2, reps = 5, profile = 0, cpu_time = 0;
static const char *filter = NULL;
static double peak_gflops = 0.0, peak_gbs = 0.0;   /* measured below */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* -- machine limits ---------------------------------------------------------------------------- */

#if BENCH_X86
/* 12 independent FMA chains in registers hide the latency: the loop runs at a core's FMA throughput. */
#define FMA12(op) op(0) op(1) op(2) op(3) op(4) op(5) op(6) op(7) op(8) op(9) op(10) op(11)
__attribute__((target("avx2,fma"))) static float fma_loop(long iters) {
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
#define DECL(j) __m256 a##j = _mm256_set1_ps((float)j);
#define STEP(j) a##j = _mm256_fmadd_ps(a##j, m, c);
#define SUM(j) s = _mm256_add_ps(s, a##j);
    FMA12(DECL)
    __m256 s = _mm256_setzero_ps();
    float out[8], total = 0;
    long i;
    int j;
    for (i = 0; i < iters; i++) { FMA12(STEP) }
    FMA12(SUM)
    _mm256_storeu_ps(out, s);
    for (j = 0; j < 8; j++) total += out[j];
    return total;
#undef DECL
#undef STEP
#undef SUM
}

/* The same with 16 lanes, the limit of the avx512 kernel set. */
__attribute__((target("avx512f"))) static float fma_loop16(long iters) {
    const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
#define DECL(j) __m512 a##j = _mm512_set1_ps((float)j);
#define STEP(j) a##j = _mm512_fmadd_ps(a##j, m, c);
#define SUM(j) s = _mm512_add_ps(s, a##j);
    FMA12(DECL)
    __m512 s = _mm512_setzero_ps();
    long i;
    for (i = 0; i < iters; i++) { FMA12(STEP) }
    FMA12(SUM)
    return _mm512_reduce_add_ps(s);
#undef DECL
#undef STEP
#undef SUM
}
#endif

struct worker { long iters; const float *data; size_t n; double result; };

#if BENCH_X86
static void *fma_worker(void *p) {
    struct worker *w = (struct worker *)p;
    w->result = mms_cpu_get_kernels() == MMS_CPU_KERNELS_AVX512 ? fma_loop16(w->iters) : fma_loop(w->iters);
    return NULL;
}
#endif

/* Reads n floats as four streams side by side (the quarters of x), as the decode products read four
   weight rows at once: one stream per core leaves DRAM bandwidth unused (measured 14 against 28 GB/s
   with four on the 2-core Zen 3), so a one-stream loop would understate the limit. */
#if BENCH_X86
__attribute__((target("avx2"))) static double read_sum(const float *x, size_t n) {
    const size_t q = n / 32 * 8;   /* a quarter, in whole vectors */
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    float out[8];
    double total = 0;
    size_t i;
    int j;
    for (i = 0; i + 8 <= q; i += 8) {
        s0 = _mm256_add_ps(s0, _mm256_loadu_ps(x + i));
        s1 = _mm256_add_ps(s1, _mm256_loadu_ps(x + q + i));
        s2 = _mm256_add_ps(s2, _mm256_loadu_ps(x + 2 * q + i));
        s3 = _mm256_add_ps(s3, _mm256_loadu_ps(x + 3 * q + i));
    }
    _mm256_storeu_ps(out, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (j = 0; j < 8; j++) total += out[j];
    return total;
}
#else
static double read_sum(const float *x, size_t n) {
    const size_t q = n / 4;
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i;
    for (i = 0; i < q; i++) { s0 += x[i]; s1 += x[q + i]; s2 += x[2 * q + i]; s3 += x[3 * q + i]; }
    return s0 + s1 + s2 + s3;
}
#endif

static void *read_worker(void *p) {   /* streams its slice once */
    struct worker *w = (struct worker *)p;
    w->result = read_sum(w->data, w->n);
    return NULL;
}

/* Runs fn on n_threads threads, each with its own worker record; returns seconds. */
static double run_threads(void *(*fn)(void *), struct worker *w) {
    pthread_t th[64];
    int64_t t0 = mms_time_us();
    clock_t c0 = clock();
    int i;
    for (i = 0; i < n_threads; i++) pthread_create(&th[i], NULL, fn, &w[i]);
    for (i = 0; i < n_threads; i++) pthread_join(th[i], NULL);
    return cpu_time ? (double)(clock() - c0) / CLOCKS_PER_SEC / n_threads : (double)(mms_time_us() - t0) * 1e-6;
}

static float *read_buf;      /* 256 MiB read by the streaming-read measurements */
static size_t read_buf_n;    /* its floats */

/* GB/s of one streaming read of `bytes` (128 MiB at least, so starting the threads costs under 2%;
   at most the buffer) by all threads, from the k-th region of that size in the buffer (regions
   rotate so a read does not find the last one cached). */
static double streaming_read_gbs(double bytes, int k) {
    struct worker w[64];
    const size_t want = bytes < (128 << 20) ? (size_t)32 << 20 : (size_t)(bytes / sizeof(float));
    const size_t n = want < read_buf_n ? want : read_buf_n, per = n / (size_t)n_threads;
    const float *region = read_buf + (size_t)k % (read_buf_n / n) * n;
    int i;
    memset(w, 0, sizeof w);
    for (i = 0; i < n_threads; i++) { w[i].data = region + (size_t)i * per; w[i].n = per; }
    return (double)(per * (size_t)n_threads * sizeof(float)) / run_threads(read_worker, w) * 1e-9;
}

static void measure_machine(void) {
    struct worker w[64];
    double t[7];
    size_t n = (size_t)256 << 20 >> 2;   /* 256 MiB of floats */
    float *data = read_buf = (float *)malloc(n * sizeof *data);
    int r, i;
    read_buf_n = n;
    memset(w, 0, sizeof w);
#if BENCH_X86
    for (r = 0; r < 7; r++) {
        for (i = 0; i < n_threads; i++) w[i].iters = 20000000;
        t[r] = run_threads(fma_worker, w);
    }
    peak_gflops = 20000000.0 * 12 * (mms_cpu_get_kernels() == MMS_CPU_KERNELS_AVX512 ? 32 : 16) * n_threads / median(t, 7) * 1e-9;   /* lanes x 2 flops per FMA */
#endif
    for (i = 0; i < (int)n; i++) data[i] = 1.0f;
    for (r = 0; r < 7; r++) t[r] = streaming_read_gbs((double)n * sizeof(float), 0);
    peak_gbs = median(t, 7);
    printf("machine (%d threads): FMA peak %.1f GFLOP/s%s, streaming read %.1f GB/s (256 MiB, 4 streams a thread)\n", n_threads, peak_gflops,
           BENCH_X86 ? "" : " (not measured on this CPU)", peak_gbs);
    printf("BENCH name=machine fma_gflops=%.2f read_gbs=%.2f threads=%d\n", peak_gflops, peak_gbs, n_threads);
    printf("[0]: mmsched 8a54778 vs ggml d99724f2 side by side in one harness on a Zen 4 (AVX-512, 2 threads):\n"
           "     their times and ratio (< 1: mmsched faster), not this run's\n\n");
}

/* -- op cases ---------------------------------------------------------------------------------- */

struct bench_case {
    struct mms_context *ctx, *wctx;   /* wctx: weights in a CPU_REPACK buffer, or NULL */
    struct mms_cgraph  *graph;
    mms_backend_buffer_t buffer, wbuffer;
};

static void fill_random_scaled(struct mms_tensor *t, unsigned *state, float scale, float offset) {
    int64_t i, n = mms_nelements(t);
    float *v;
    void *data;
    if (t->type == MMS_TYPE_I32) return;
    v = (float *)malloc((size_t)n * sizeof *v);
    data = malloc(mms_nbytes(t));
    for (i = 0; i < n; i++) { *state = *state * 1664525u + 1013904223u; v[i] = offset + scale * ((float)(*state >> 8) / 8388608.0f - 1.0f); }
    mms_get_type_traits(t->type)->from_float(v, data, n);
    mms_backend_tensor_set(t, data, 0, mms_nbytes(t));
    free(v);
    free(data);
}

static void fill_random(struct mms_tensor *t, unsigned *state) { fill_random_scaled(t, state, 1.0f, 0.0f); }

/* Allocates every tensor of the case's context, fills the leafs with random values. */
static int bench_ready(struct bench_case *c, mms_backend_t cpu) {
    struct mms_tensor *t;
    unsigned state = 1;
    int i;
    if (mms_ctx_status(c->ctx) != MMS_OK) { fprintf(stderr, "build failed: %s\n", mms_ctx_error(c->ctx)); return 0; }
    c->buffer = mms_backend_alloc_ctx_tensors(c->ctx, cpu);
    if (!c->buffer) { fprintf(stderr, "%s\n", mms_last_error()); return 0; }
    for (i = 0; i < mms_graph_n_leafs(c->graph); i++) { t = mms_graph_leaf(c->graph, i); fill_random(t, &state); }
    return 1;
}

static void bench_done(struct bench_case *c) {
    mms_backend_buffer_free(c->buffer);
    mms_free(c->ctx);
    mms_backend_buffer_free(c->wbuffer);
    mms_free(c->wctx);
}

/* A case name as one token for the BENCH lines: "mul_mat f16 1280x1280 * 1601" -> "mul_mat_f16_1280x1280_x_1601". */
static const char *slug(const char *name) {
    static char out[128];
    size_t i, j = 0;
    for (i = 0; name[i] && j + 1 < sizeof out; i++) {
        char ch = name[i];
        if (ch == '[' || ch == ']' || ch == '(' || ch == ')') continue;
        out[j++] = ch == ' ' || ch == '/' ? '_' : ch == '*' || ch == ',' ? 'x' : ch;
    }
    out[j] = 0;
    return out;
}

/* Side-by-side figures of mmsched and ggml (measured outside this repository): one harness built against both
   libraries on a Zen 4 (AVX-512, 2 threads), mmsched at 8a54778 and ggml d99724f2 as llama.cpp builds
   it (llamafile and weight repacking on, -march=native; its repacked figure where it has one), medians
   in ms. Printed beside this run for context: only their ratio is a side-by-side measurement. */
struct side_by_side { const char *name; double ours_ms, ggml_ms; };
static const struct side_by_side *side_by_side(const char *name) {
    static const struct side_by_side ref[] = {
        { "mul_mat f32 1280x1280 * 1601", 24.3, 32.1 }, { "mul_mat f16 1280x1280 * 1601", 24.4, 28.0 },
        { "mul_mat f32 5120x1280 * 1601", 99.6, 147.3 }, { "mul_mat f16 5120x1280 * 1601", 99.8, 120.2 },
        { "mul_mat f32 4096x4096 * 512", 83.0, 119.8 }, { "mul_mat f16 4096x4096 * 512", 84.2, 94.5 },
        { "mul_mat f16 4096x4096 * 1 cold", 1.148, 1.156 }, { "mul_mat q8_0 4096x4096 * 1 cold", 0.674, 0.707 },
        { "mul_mat q4_0 4096x4096 * 1 cold", 0.369, 0.294 }, { "mul_mat q4_k 4096x4096 * 1 cold", 0.348, 0.320 },
        { "mul_mat q6_k 4096x4096 * 1 cold", 0.463, 0.459 }, { "mul_mat q4_k 14336x4096 * 1 cold", 1.350, 1.076 },
        { "mul_mat q8_0 4096x4096 * 512", 87.2, 78.9 }, { "mul_mat q4_0 4096x4096 * 512", 87.4, 61.6 },
        { "mul_mat q4_k 4096x4096 * 512", 90.0, 59.0 },
        { "attention 16x1601x80 three ops", 107.5, 379.2 }, { "attention 16x1601x80 flash_attn_ext f16 K/V", 79.1, 117.6 },
        { "soft_max_ext [1601,1601,16]", 22.5, 34.8 }, { "gelu [5120,1601]", 5.90, 17.1 }, { "rms_norm [1280,1601]", 0.295, 1.36 },
        { "vit 4 layers flash_attn f32 weights", 1613, 2373 }, { "vit 4 layers flash_attn f16 weights", 1598, 2083 },
        { "vit 4 layers mm+softmax f32 weights", 1785, 3472 },
    };
    size_t i;
    for (i = 0; i < sizeof ref / sizeof ref[0]; i++) if (!strcmp(ref[i].name, name)) return &ref[i];
    return NULL;
}

/* How a case's rate is given: GFLOP/s against the FMA peak; GB/s against a streaming read beside
   each repetition (memory moves, see above); GB/s of data kept in cache, on one thread, against a
   thread's share of the start's read (above 100%: the kernel computes faster than memory feeds it;
   one thread because on a VM two threads' 30 us products fell, one run in two, into a cycle of the
   pool's workers sleeping and waking that made them 8x slower). */
enum rate { RATE_FLOPS, RATE_BYTES, RATE_BYTES_IN_CACHE };

/* work: flops or bytes; read_gbs: the limit of a byte case (0: the start's streaming read) */
static void report(const char *name, double *ms, int n, double work, enum rate kind, double read_gbs, int threads) {
    const struct side_by_side *sbs = side_by_side(name);
    const int bytes_mode = kind != RATE_FLOPS;
    double med = median(ms, n), rate = work / (med * 1e-3) * 1e-9, g = sbs ? sbs->ggml_ms : 0.0;
    double limit = bytes_mode ? (read_gbs > 0 ? read_gbs : peak_gbs) : peak_gflops;
    char vs[64] = "";
    if (sbs) snprintf(vs, sizeof vs, "   [0] %.4g vs ggml %.4g ms: %.2fx", sbs->ours_ms, sbs->ggml_ms, sbs->ours_ms / sbs->ggml_ms);
    char beside[64] = "";
    if (read_gbs > 0) snprintf(beside, sizeof beside, kind == RATE_BYTES_IN_CACHE ? " (1 thread; its share of the read: %.1f GB/s)" : " (read beside: %.1f GB/s)", read_gbs);
    printf("%-44s %10.2f ms %9.1f %-7s %5.0f%% of limit%s%s\n", name, med, rate, bytes_mode ? "GB/s" : "GFLOP/s",
           limit > 0 ? 100.0 * rate / limit : 0.0, beside, vs);
    printf("BENCH name=%s median_ms=%.3f rate=%.2f unit=%s frac_limit=%.3f limit=%.2f ggml_ms=%.4g threads=%d kernels=%s\n", slug(name), med,
           rate, bytes_mode ? "GB/s" : "GFLOP/s", limit > 0 ? rate / limit : 0.0, limit, g, threads,
           mms_cpu_kernels_name(mms_cpu_get_kernels()));
    fflush(stdout);
}

static struct mms_context *new_ctx(void) {
    struct mms_init_params ip = { 0, NULL, true };
    return mms_init(ip);
}

/* Computes graphs[i % n_graphs] for each repetition (several graphs keep weights out of cache).
   After a read beside, the pool's workers have gone to sleep (they spin ~0.1 ms): a one-node graph
   wakes them outside the timing, as a product inside a model's graph finds them awake (waking them
   cost the small decode products 10-30% here: Q4_0 4096x4096 0.22-0.27 -> 0.20-0.22 ms, F16 0.85 -> 0.62). */
static void run_case(const char *name, mms_backend_t cpu, struct bench_case *cases, int n_graphs, double work, enum rate kind) {
    const int threads = kind == RATE_BYTES_IN_CACHE ? 1 : n_threads;
    double ms[64], gbs[64];
    struct bench_case wake = { 0 };
    int r;
    if (kind == RATE_BYTES) {
        wake.ctx = new_ctx();
        wake.graph = mms_new_graph(wake.ctx);
        mms_build_forward_expand(wake.graph, mms_scale(wake.ctx, mms_new_tensor_1d(wake.ctx, MMS_TYPE_F32, 64), 1.0f));
        if (!bench_ready(&wake, cpu)) return;
    }
    mms_backend_cpu_set_n_threads(cpu, threads);
    mms_backend_graph_compute(cpu, cases[0].graph);   /* warm up: thread pool, scratch memory */
    for (r = 0; r < reps; r++) {
        int64_t t0;
        clock_t c0;
        if (kind == RATE_BYTES) mms_backend_graph_compute(cpu, wake.graph);
        t0 = mms_time_us();
        c0 = clock();
        if (mms_backend_graph_compute(cpu, cases[(r + 1) % n_graphs].graph) != MMS_OK) { fprintf(stderr, "%s\n", mms_last_error()); return; }
        ms[r] = cpu_time ? (double)(clock() - c0) * 1e3 / CLOCKS_PER_SEC / threads : (double)(mms_time_us() - t0) * 1e-3;
        if (kind == RATE_BYTES) gbs[r] = streaming_read_gbs(work, r);
    }
    mms_backend_cpu_set_n_threads(cpu, n_threads);
    report(name, ms, reps, work, kind, kind == RATE_BYTES ? median(gbs, reps) : kind == RATE_BYTES_IN_CACHE ? peak_gbs / n_threads : 0.0, threads);
    if (kind == RATE_BYTES) bench_done(&wake);
}

static int wanted(const char *name) { return !filter || strstr(name, filter); }

/* kind: RATE_BYTES for weights read from memory ("cold": six copies), RATE_BYTES_IN_CACHE for the
   same weights each time ("hot"), RATE_FLOPS for prompt-size products. repack: the weights in a
   CPU_REPACK buffer (the kernels' own layout). */
static void bench_mul_mat(mms_backend_t cpu, enum mms_type wtype, int64_t K, int64_t M, int64_t N, enum rate kind, int repack) {
    struct bench_case c[6];
    char name[96];
    int i, n_graphs = kind == RATE_BYTES ? 6 : 1;   /* 6 weight copies: bigger than any cache on this machine */
    snprintf(name, sizeof name, "mul_mat %s %lldx%lld * %lld%s%s", mms_type_name(wtype), (long long)M, (long long)K, (long long)N,
             kind == RATE_BYTES ? " cold" : kind == RATE_BYTES_IN_CACHE ? " hot" : "", repack ? " repacked" : "");
    if (!wanted(name)) return;
    memset(c, 0, sizeof c);
    for (i = 0; i < n_graphs; i++) {
        struct mms_tensor *w, *x;
        c[i].ctx = new_ctx();
        if (repack) {
            unsigned state = 7;
            c[i].wctx = new_ctx();
            w = mms_new_tensor_2d(c[i].wctx, wtype, K, M);
            c[i].wbuffer = mms_backend_alloc_ctx_tensors_from_buft(c[i].wctx, mms_backend_cpu_repack_buffer_type());
            if (!c[i].wbuffer) { fprintf(stderr, "%s\n", mms_last_error()); return; }
            fill_random(w, &state);
        } else {
            w = mms_new_tensor_2d(c[i].ctx, wtype, K, M);
        }
        x = mms_new_tensor_2d(c[i].ctx, MMS_TYPE_F32, K, N);
        c[i].graph = mms_new_graph(c[i].ctx);
        mms_build_forward_expand(c[i].graph, mms_mul_mat(c[i].ctx, w, x));
        if (!bench_ready(&c[i], cpu)) return;
    }
    run_case(name, cpu, c, n_graphs, kind == RATE_FLOPS ? 2.0 * K * M * N : (double)mms_row_size(wtype, K) * M, kind);
    for (i = 0; i < n_graphs; i++) bench_done(&c[i]);
}

/* Decode cross attention at the 11B shapes: one query of 32 heads against the 8 K/V heads of a
   4-tile image (6404 keys, f32 as the CPU keeps them), the keys and values stored head-major
   ([128, L, 8], as mllama keeps them) or interleaved by head ([128, 8, L] viewed as heads: each
   head's key rows 4 KB apart). Six copies keep them out of cache; the rate is K/V bytes read. */
static void bench_attention_decode(mms_backend_t cpu, int head_major) {
    const int64_t D = 128, H = 32, Hkv = 8, L = 6404;
    struct bench_case c[6] = { { 0 } };   /* every field: bench_done frees what is set */
    char name[96];
    int i;
    snprintf(name, sizeof name, "decode attention 6404 keys, %s K/V", head_major ? "head-major" : "interleaved");
    if (!wanted(name)) return;
    for (i = 0; i < 6; i++) {
        struct mms_tensor *q, *k, *v;
        c[i].ctx = new_ctx();
        q = mms_permute(c[i].ctx, mms_new_tensor_3d(c[i].ctx, MMS_TYPE_F32, D, H, 1), 0, 2, 1, 3);
        if (head_major) {
            k = mms_new_tensor_3d(c[i].ctx, MMS_TYPE_F32, D, L, Hkv);
            v = mms_new_tensor_3d(c[i].ctx, MMS_TYPE_F32, D, L, Hkv);
        } else {
            k = mms_permute(c[i].ctx, mms_new_tensor_3d(c[i].ctx, MMS_TYPE_F32, D, Hkv, L), 0, 2, 1, 3);
            v = mms_permute(c[i].ctx, mms_new_tensor_3d(c[i].ctx, MMS_TYPE_F32, D, Hkv, L), 0, 2, 1, 3);
        }
        c[i].graph = mms_new_graph(c[i].ctx);
        mms_build_forward_expand(c[i].graph, mms_flash_attn_ext(c[i].ctx, q, k, v, NULL, 1.0f / sqrtf((float)D), 0.0f, 0.0f));
        if (!bench_ready(&c[i], cpu)) return;
    }
    run_case(name, cpu, c, 6, 2.0 * L * D * Hkv * sizeof(float), RATE_BYTES);
    for (i = 0; i < 6; i++) bench_done(&c[i]);
}

/* Heads as the ViT graph makes them: views [80, T, 16] of a [1280, T] projection (rows 5120 B apart). */
static struct mms_tensor *vit_heads(struct mms_context *ctx, enum mms_type type, int64_t D, int64_t T, int64_t H) {
    return mms_permute(ctx, mms_reshape_3d(ctx, mms_new_tensor_2d(ctx, type, D * H, T), D, H, T), 0, 2, 1, 3);
}

/* views: q, k, v as permuted views of projections (the ViT layout) rather than contiguous heads */
static void bench_attention(mms_backend_t cpu, int fused, enum mms_type kvtype, int views) {
    const int64_t D = 80, T = 1601, H = 16;
    struct bench_case c = { 0 };
    struct mms_tensor *q, *k, *v, *out;
    char name[96];
    snprintf(name, sizeof name, "attention 16x1601x80 %s%s%s", fused ? "flash_attn_ext" : "three ops",
             kvtype == MMS_TYPE_F16 ? " f16 K/V" : kvtype == MMS_TYPE_BF16 ? " bf16 K/V" : "", views ? " (ViT views)" : "");
    if (!wanted(name)) return;
    c.ctx = new_ctx();
    q = views ? vit_heads(c.ctx, MMS_TYPE_F32, D, T, H) : mms_new_tensor_3d(c.ctx, MMS_TYPE_F32, D, T, H);
    k = views ? vit_heads(c.ctx, kvtype, D, T, H) : mms_new_tensor_3d(c.ctx, kvtype, D, T, H);
    if (fused) {
        v = views ? vit_heads(c.ctx, kvtype, D, T, H) : mms_new_tensor_3d(c.ctx, kvtype, D, T, H);
        out = mms_flash_attn_ext(c.ctx, q, k, v, NULL, 1.0f / sqrtf((float)D), 0.0f, 0.0f);
    } else {
        v = mms_new_tensor_3d(c.ctx, MMS_TYPE_F32, T, D, H);   /* already transposed, as the ViT graph makes it */
        out = mms_mul_mat(c.ctx, v, mms_soft_max_ext(c.ctx, mms_mul_mat(c.ctx, k, q), NULL, 1.0f / sqrtf((float)D), 0.0f));
    }
    c.graph = mms_new_graph(c.ctx);
    mms_build_forward_expand(c.graph, out);
    if (!bench_ready(&c, cpu)) return;
    run_case(name, cpu, &c, 1, 4.0 * H * T * T * D, RATE_FLOPS);
    bench_done(&c);
}

/* Ops that stream memory: rate = bytes read + written. */
static void bench_stream(mms_backend_t cpu, const char *name, enum mms_op op, int64_t ne0, int64_t ne1, int64_t ne2) {
    struct bench_case c = { 0 };
    struct mms_tensor *a, *out;
    if (!wanted(name)) return;
    c.ctx = new_ctx();
    a = mms_new_tensor_3d(c.ctx, MMS_TYPE_F32, ne0, ne1, ne2);
    switch (op) {
        case MMS_OP_SOFT_MAX:  out = mms_soft_max_ext(c.ctx, a, NULL, 0.125f, 0.0f); break;
        case MMS_OP_GELU:      out = mms_gelu(c.ctx, a); break;
        case MMS_OP_GELU_TANH: out = mms_gelu_tanh(c.ctx, a); break;
        case MMS_OP_SILU:      out = mms_silu(c.ctx, a); break;
        case MMS_OP_NORM:      out = mms_norm(c.ctx, a, 1e-5f); break;
        case MMS_OP_ROPE: {
            struct mms_tensor *pos = mms_new_tensor_1d(c.ctx, MMS_TYPE_I32, ne2);
            out = mms_rope_ext(c.ctx, a, pos, NULL, (int)ne0, MMS_ROPE_TYPE_NORMAL, 0, 500000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
            c.graph = mms_new_graph(c.ctx);
            mms_build_forward_expand(c.graph, out);
            if (!bench_ready(&c, cpu)) return;
            { int32_t *p = (int32_t *)malloc((size_t)ne2 * sizeof *p); int64_t i; for (i = 0; i < ne2; i++) p[i] = (int32_t)i;
              mms_backend_tensor_set(pos, p, 0, (size_t)ne2 * sizeof *p); free(p); }
            run_case(name, cpu, &c, 1, 2.0 * (double)mms_nbytes(a), RATE_BYTES);
            bench_done(&c);
            return;
        }
        default:               out = mms_rms_norm(c.ctx, a, 1e-5f); break;
    }
    c.graph = mms_new_graph(c.ctx);
    mms_build_forward_expand(c.graph, out);
    if (!bench_ready(&c, cpu)) return;
    run_case(name, cpu, &c, 1, 2.0 * (double)mms_nbytes(a), RATE_BYTES);
    bench_done(&c);
}

/* The thread pool: a chain of n tiny nodes, each split into one part per thread (the hand-out and
   the wait for the parts), and the same chain as the backend runs it by default (tiny nodes are
   not worth splitting: the caller runs them whole); a 1-node graph costs a graph start. Medians
   over many computes. */
static void bench_threadpool(mms_backend_t cpu) {
    const int n_nodes = 256, n_runs = 200;
    struct bench_case c[2] = { { 0 } };
    double us[200], med[3];
    int g, r, i, m;
    if (!wanted("threadpool")) return;
    for (g = 0; g < 2; g++) {
        struct mms_tensor *x;
        c[g].ctx = new_ctx();
        x = mms_new_tensor_1d(c[g].ctx, MMS_TYPE_F32, 64);
        for (i = 0; i < (g == 0 ? n_nodes : 1); i++) x = mms_scale(c[g].ctx, x, 1.0f);
        c[g].graph = mms_new_graph(c[g].ctx);
        mms_build_forward_expand(c[g].graph, x);
        if (!bench_ready(&c[g], cpu)) return;
    }
    for (m = 0; m < 3; m++) {   /* the chain split, the chain by default, the 1-node graph */
        struct bench_case *bc = &c[m == 2];
        mms_backend_cpu_set_split(cpu, m == 0 ? MMS_CPU_SPLIT_ALL : MMS_CPU_SPLIT_AUTO);
        mms_backend_graph_compute(cpu, bc->graph);
        for (r = 0; r < n_runs; r++) {
            int64_t t0 = mms_time_us();
            mms_backend_graph_compute(cpu, bc->graph);
            us[r] = (double)(mms_time_us() - t0);
        }
        med[m] = median(us, n_runs);
    }
    mms_backend_cpu_set_split(cpu, MMS_CPU_SPLIT_AUTO);
    for (g = 0; g < 2; g++) bench_done(&c[g]);
    printf("%-44s %10.2f us per split node, %.2f us per node by default (%d-node chain), %.2f us per 1-node graph\n",
           "threadpool split node / node / graph start", (med[0] - med[2]) / (n_nodes - 1), (med[1] - med[2]) / (n_nodes - 1), n_nodes, med[2]);
    printf("BENCH name=threadpool split_node_us=%.3f node_us=%.3f graph_1node_us=%.3f threads=%d\n", (med[0] - med[2]) / (n_nodes - 1),
           (med[1] - med[2]) / (n_nodes - 1), med[2], n_threads);
}

/* -- graphs ------------------------------------------------------------------------------------ */

/* The 4-layer ViT of benchmarks.md section 2 with random weights (scaled like trained ones, so
   activations stay in range), compute memory planned by the graph allocator; with BF16 weights K and
   V are cast to BF16 before flash attention, as the mllama vision graph does. The input is refilled
   before every compute (in-place reuse may overwrite it), outside the timing. */
static void bench_vit(mms_backend_t cpu, enum mms_type wtype, int flash) {
    const double flops = 304.3e9;
    struct ref_graph r;
    struct mms_tensor *t;
    mms_gallocr_t ga;
    unsigned state = 7;
    double ms[64];
    char name[96];
    int i;
    snprintf(name, sizeof name, "vit 4 layers %s %s weights", flash ? "flash_attn" : "mm+softmax", mms_type_name(wtype));
    if (!wanted(name)) return;
    memset(&r, 0, sizeof r);
    ref_vit_layers(&r, 4, flash, wtype);
    r.wbuf = mms_backend_alloc_ctx_tensors(r.wctx, cpu);
    ga = mms_gallocr_new(mms_backend_cpu_buffer_type());
    if (!r.wbuf || !ga || mms_gallocr_alloc_graph(ga, r.graph) != MMS_OK) { fprintf(stderr, "%s: %s\n", name, mms_last_error()); goto done; }
    for (t = mms_get_first_tensor(r.wctx); t; t = mms_get_next_tensor(r.wctx, t)) {
        const char *n = mms_get_name(t);
        if (strstr(n, "ln") && strstr(n, "_w")) fill_random_scaled(t, &state, 0.1f, 1.0f);
        else if (t->ne[1] > 1) fill_random_scaled(t, &state, 1.7f / sqrtf((float)t->ne[0]), 0.0f);
        else fill_random_scaled(t, &state, 0.02f, 0.0f);
    }
    for (i = -1; i < reps; i++) {          /* -1: warm-up (first touch of the compute pages); the profile is of repetition 0 */
        int64_t t0;
        fill_random(r.input, &state);
        if (i == 0 && profile) mms_backend_cpu_set_profile(cpu, true);
        t0 = mms_time_us();
        if (mms_backend_graph_compute(cpu, r.graph) != MMS_OK) { fprintf(stderr, "%s: %s\n", name, mms_last_error()); goto done; }
        if (i >= 0) ms[i] = (double)(mms_time_us() - t0) * 1e-3;
        if (i == 0 && profile) mms_backend_cpu_set_profile(cpu, false);
    }
    report(name, ms, reps, flops, RATE_FLOPS, 0.0, n_threads);
    if (profile) mms_backend_cpu_print_profile(cpu, stdout);
done:
    mms_gallocr_free(ga);
    ref_free(&r);
}

/* -- the full mllama graphs at Llama 3.2 11B Vision shapes, random weights ------------------------
   A GGUF in Ollama's single-file layout with every shape of the 11B model but fewer layers (the
   layers of each stack are identical, so time per layer scales), f16 matrices, written once to
   build/ and loaded (mapped) through the mllama API like a real model. Default: a text stack of 5
   layers (4 self-attention + 1 cross-attention, the 11B model's 4:1 pattern; 1/8 of its 40) and a
   vision tower of 4 local + 1 global layers (1/8 of its 32 + 8), with the full-size embedding table,
   output head, patch and position embeddings and projector. */

static int mllama_text_layers = 5, mllama_vision_layers = 4, mllama_full = 0, mllama_no_repack = 0;

/* The process's peak resident memory so far (mapped file pages it touched included), MiB; -1 if unknown. */
static double peak_rss_mib(void) {
#if defined(_WIN32)
    PROCESS_MEMORY_COUNTERS pmc;
    return K32GetProcessMemoryInfo(GetCurrentProcess(), &pmc, sizeof pmc) ? (double)pmc.PeakWorkingSetSize / 1048576.0 : -1.0;
#else
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return -1.0;
#  if defined(__APPLE__)
    return (double)ru.ru_maxrss / 1048576.0;   /* bytes there, KiB elsewhere */
#  else
    return (double)ru.ru_maxrss / 1024.0;
#  endif
#endif
}

/* What one decode token reads from memory: every text weight once (the embedding table one row;
   the cross layers' K/V projections run only when an image is added), the self-attention keys
   and values of n_past positions and the cross K/V of the picture. */
static double decode_bytes_per_token(const char *path, const struct mms_mllama_memory *mem, int n_ctx, int n_past) {
    struct mms_gguf *gg = mms_gguf_open(path);
    struct mms_gguf_tensor_info ti;
    double bytes = 0.0;
    int64_t i;
    if (!gg) return 0.0;
    for (i = 0; i < mms_gguf_get_n_tensors(gg); i++) {
        if (mms_gguf_get_tensor(gg, i, &ti) != MMS_OK || starts_with(ti.name, "v.") || starts_with(ti.name, "mm.") ||
            strstr(ti.name, "cross_attn_k_proj") || strstr(ti.name, "cross_attn_v_proj")) continue;
        bytes += !strcmp(ti.name, "token_embd.weight") ? (double)ti.size / (double)ti.ne[1] : (double)ti.size;
    }
    mms_gguf_close(gg);
    return bytes + (double)mem->kv_cache * n_past / n_ctx + (double)mem->pictures;   /* max_images 1: the picture read */
}

static bool read_through(float fraction, void *user_data) { (void)fraction; (void)user_data; return true; }

static enum mms_status decode_tokens(struct mms_mllama_context *c, const int32_t *tokens, int n) {
    struct mms_mllama_batch b;
    memset(&b, 0, sizeof b);
    b.n_tokens = n;
    b.tokens = tokens;
    return mms_mllama_decode(c, &b);
}


static void print_profile(mms_backend_t cpu, const char *what) {
    if (!profile) return;
    printf("%s: ", what);
    mms_backend_cpu_print_profile(cpu, stdout);
}

static void bench_mllama(mms_backend_t cpu) {
    const int n_local = mllama_full ? 32 : mllama_vision_layers, n_global = (n_local + 3) / 4, n_text = mllama_full ? 40 : mllama_text_layers;
    const int n_prompt = 512, n_gen = 8;
    struct mms_mllama_hparams hp;
    struct mms_mllama_load_params lp;
    struct mms_mllama_context_params cp;
    struct mms_mllama_model *m = NULL;
    struct mms_mllama_context *c = NULL;
    struct mms_mllama_image img;
    struct mms_mllama_image_params ip;
    struct mms_mllama_timings t;
    struct mms_mllama_memory mem;
    char path[160];
    uint8_t *rgb;
    int32_t *tokens = NULL;
    double gen_ms[64], ms, scale_v, scale_t;
    int64_t t0;
    double file_mib = 0.0, bytes_tok, roof;
    FILE *f;
    int i, wrote = 0;
    mms_mllama_hparams_11b(&hp);
    snprintf(path, sizeof path, mllama_full ? "build/bench-mllama-11b-full-q4_k_m.gguf" : "build/bench-mllama-11b-t%d-v%d+%d.gguf",
             n_text, n_local, n_global);
    printf("\nLlama 3.2 11B Vision shapes, random weights (%s): %d of 40 text layers, %d + %d of 32 + 8 vision layers (%s)\n",
           mllama_full ? "text Q4_K_M, vision f16" : "f16", n_text, n_local, n_global, path);
    if ((f = fopen(path, "rb")) != NULL) {
        fclose(f);
    } else {
        t0 = mms_time_us();
        if (!write_mllama_gguf(path, &hp, n_text, n_local, n_global, mllama_full)) { remove(path); return; }
        printf("wrote the model in %.1f s\n", (double)(mms_time_us() - t0) * 1e-6);
        wrote = 1;   /* the writer held the whole file in memory: the peak below counts it */
    }
    memset(&lp, 0, sizeof lp);
    lp.path = path;
    lp.cpu = cpu;
    lp.no_cpu_repack = mllama_no_repack != 0;
    lp.progress = read_through;   /* page the mapped weights in at load, so no case below pays for it */
    memset(&cp, 0, sizeof cp);
    cp.n_ctx = 2048;
    cp.n_batch = n_prompt;
    cp.max_images = 1;
    t0 = mms_time_us();
    if (!(m = mms_mllama_model_load(&lp))) { fprintf(stderr, "%s\n", mms_last_error()); goto done; }
    ms = (double)(mms_time_us() - t0) * 1e-3;
    if ((f = fopen(path, "rb")) != NULL) { fseek(f, 0, SEEK_END); file_mib = (double)ftell(f) / 1048576.0; fclose(f); }
    printf("%-44s %10.2f ms (mapped, every page read once; %.0f MiB file)\n", "mllama load", ms, file_mib);
    printf("BENCH name=mllama_load median_ms=%.1f runs=1 file_mib=%.0f\n", ms, file_mib);
    if (!(c = mms_mllama_context_new(m, &cp))) { fprintf(stderr, "%s\n", mms_last_error()); goto done; }
    ip = mms_mllama_model_image_params(m);
    rgb = (uint8_t *)malloc((size_t)1120 * 1120 * 3);   /* 2 x 2 tiles */
    for (i = 0; i < 1120 * 1120 * 3; i++) rgb[i] = (uint8_t)((i * 7) ^ (i >> 11));
    memset(&img, 0, sizeof img);
    if (mms_mllama_preprocess_image(&ip, rgb, 1120, 1120, 0, &img) != MMS_OK) { free(rgb); fprintf(stderr, "%s\n", mms_last_error()); goto done; }
    free(rgb);
    scale_v = 40.0 / (n_local + n_global);
    scale_t = 40.0 / n_text;

    /* the image: vision encoder + projector, then each cross layer's K/V */
    if (profile) mms_backend_cpu_set_profile(cpu, true);
    mms_mllama_reset_timings(c);
    t0 = mms_time_us();
    if (mms_mllama_seq_add_image(c, 0, &img) != MMS_OK) { fprintf(stderr, "%s\n", mms_last_error()); mms_mllama_image_free(&img); goto done; }
    ms = (double)(mms_time_us() - t0) * 1e-3;
    mms_mllama_image_free(&img);
    mms_mllama_get_timings(c, &t);
    printf("%-44s %10.2f ms\n", "mllama vision encode, 4 tiles", ms);
    if (mllama_full) printf("    encoder + projector %.0f ms, cross K/V %.0f ms (all layers)\n", t.encode_ms, t.cross_kv_ms);
    else printf("    encoder + projector %.0f ms, cross K/V %.0f ms; x %.0f for 40 vision layers: about %.1f s (an upper bound)\n",
                t.encode_ms, t.cross_kv_ms, scale_v, t.encode_ms * scale_v * 1e-3);
    printf("BENCH name=mllama_vision_encode_4tiles median_ms=%.1f runs=1 layers=%d+%d encode_ms=%.1f cross_kv_ms=%.1f est_40_layers_ms=%.0f\n",
           ms, n_local, n_global, t.encode_ms, t.cross_kv_ms, t.encode_ms * scale_v);
    print_profile(cpu, "vision encode profile");

    /* a 512-token prompt that starts with the image, then single tokens */
    tokens = (int32_t *)malloc(sizeof *tokens * (size_t)n_prompt);
    for (i = 0; i < n_prompt; i++) tokens[i] = i == 0 ? hp.image_token_id : (int32_t)((i * 7919) % 128000);
    t0 = mms_time_us();
    if (decode_tokens(c, tokens, n_prompt) != MMS_OK) { fprintf(stderr, "%s\n", mms_last_error()); goto done; }
    ms = (double)(mms_time_us() - t0) * 1e-3;
    printf("%-44s %10.2f ms\n", "mllama prefill, 512 tokens", ms);
    if (mllama_full) printf("    %.1f tokens/s (all layers)\n", n_prompt / (ms * 1e-3));
    else printf("    %.1f tokens/s; x %.0f for 40 layers: about %.1f s (an upper bound: embeddings and head scale too)\n",
                n_prompt / (ms * 1e-3), scale_t, ms * scale_t * 1e-3);
    printf("BENCH name=mllama_prefill_512 median_ms=%.1f runs=1 text_layers=%d tokens_per_s=%.2f\n", ms, n_text, n_prompt / (ms * 1e-3));
    print_profile(cpu, "prefill profile");
    for (i = 0; i < n_gen; i++) {
        int32_t tok = (int32_t)(1000 + i);
        t0 = mms_time_us();
        if (decode_tokens(c, &tok, 1) != MMS_OK) { fprintf(stderr, "%s\n", mms_last_error()); goto done; }
        gen_ms[i] = (double)(mms_time_us() - t0) * 1e-3;
    }
    ms = median(gen_ms, n_gen);
    printf("%-44s %10.2f ms (median of %d)\n", "mllama decode, 1 token", ms, n_gen);
    mms_mllama_get_memory(c, 0, &mem);
    bytes_tok = decode_bytes_per_token(path, &mem, cp.n_ctx, n_prompt + n_gen / 2);
    roof = peak_gbs > 0.0 && bytes_tok > 0.0 ? peak_gbs * 1e9 / bytes_tok : 0.0;   /* 0: not known */
    printf("    %.2f tokens/s with %d layers; each reads %.0f MiB (weights, KV cache, the image's cross K/V):\n"
           "    roofline at the %.1f GB/s streaming read %.2f tokens/s, reached %.0f%%\n",
           1000.0 / ms, n_text, bytes_tok / 1048576.0, peak_gbs, roof, roof > 0.0 ? 100.0 * 1000.0 / ms / roof : 0.0);
    printf("BENCH name=mllama_decode_1 median_ms=%.2f runs=%d text_layers=%d tokens_per_s=%.2f bytes_per_token=%.0f roofline_tokens_per_s=%.2f\n",
           ms, n_gen, n_text, 1000.0 / ms, bytes_tok, roof);
    printf("%-44s %10.0f MiB (file %.0f + KV cache %.0f + picture slot %.0f + compute %.0f + image store %.0f = %.0f)%s\n",
           "mllama peak resident memory", peak_rss_mib(), file_mib, (double)mem.kv_cache / 1048576.0, (double)mem.pictures / 1048576.0,
           (double)mem.compute / 1048576.0, (double)mem.image_store_peak / 1048576.0,
           file_mib + (double)(mem.kv_cache + mem.pictures + mem.compute + mem.image_store_peak) / 1048576.0,
           wrote ? "\n    (this run wrote the model first: the peak includes the writer's copy; run again for the runtime's)" : "");
    if (mllama_no_repack) printf("    weights repacked for the CPU kernels: none (--no-repack)\n");
    else printf("    weights repacked for the CPU kernels: %.0f MiB (their mapped pages released)\n", (double)mem.weights_repacked / 1048576.0);
    printf("BENCH name=mllama_memory peak_rss_mib=%.0f file_mib=%.0f kv_mib=%.0f pictures_mib=%.0f compute_mib=%.0f store_mib=%.0f\n",
           peak_rss_mib(), file_mib, (double)mem.kv_cache / 1048576.0, (double)mem.pictures / 1048576.0, (double)mem.compute / 1048576.0,
           (double)mem.image_store_peak / 1048576.0);
    print_profile(cpu, "decode profile");
    if (profile) mms_backend_cpu_set_profile(cpu, false);
done:
    free(tokens);
    mms_mllama_context_free(c);
    mms_mllama_model_free(m);
}

/* -- allocator plans ----------------------------------------------------------------------------- */

/* Plans one reference graph under both input rules; ggml_bytes is ggml's plan under its rule. */
static void bench_plan(const char *name, struct ref_graph *r, size_t ggml_bytes) {
    mms_gallocr_t ga = mms_gallocr_new(mms_backend_cpu_buffer_type());
    struct mms_gallocr_buffer_info kept, reused;
    double us[21];
    char path[128], vs_ggml[64] = "ggml: n/a";
    int i;
    if (!ref_place_virtual(r)) { fprintf(stderr, "%s: %s\n", name, mms_last_error()); return; }
    mms_gallocr_set_inputs_reusable(ga, true);
    mms_gallocr_reserve(ga, r->graph);
    mms_gallocr_get_buffer_info(ga, 0, &reused);
    mms_gallocr_set_inputs_reusable(ga, false);
    for (i = 0; i < 21; i++) {                        /* planning time: plan from scratch each time */
        mms_gallocr_set_inplace(ga, true);            /* (setting an option drops the stored plan) */
        if (mms_gallocr_reserve(ga, r->graph) != MMS_OK) { fprintf(stderr, "%s: %s\n", name, mms_last_error()); return; }
        us[i] = (double)mms_gallocr_get_plan_time_us(ga);
    }
    mms_gallocr_get_buffer_info(ga, 0, &kept);
    snprintf(path, sizeof path, "build/plan_%s.svg", name);
    mms_gallocr_write_svg(ga, 0, path);
    if (ggml_bytes) snprintf(vs_ggml, sizeof vs_ggml, "ggml %zu (ours %+.2f%%)", ggml_bytes, 100.0 * ((double)reused.planned / (double)ggml_bytes - 1.0));
    printf("%-10s %4d nodes  inputs kept: planned %11zu, bound %11zu (+%.2f%%) | ggml rule: planned %11zu, bound C %11zu, "
           "bound B %11zu, %s | no reuse %12zu | plan %.0f us\n",
           name, mms_graph_n_nodes(r->graph), kept.planned, kept.lower_bound,
           100.0 * ((double)kept.planned / (double)kept.lower_bound - 1.0), reused.planned, reused.lower_bound,
           reused.bound_universal, vs_ggml, reused.no_reuse, median(us, 21));
    printf("BENCH name=plan_%s planned=%zu lower_bound=%zu planned_ggml_rule=%zu bound_c=%zu bound_b=%zu no_reuse=%zu ggml=%zu plan_us=%.0f\n",
           name, kept.planned, kept.lower_bound, reused.planned, reused.lower_bound, reused.bound_universal, reused.no_reuse,
           ggml_bytes, median(us, 21));
    mms_gallocr_free(ga);
    ref_free(r);
}

/* Llama 3.2 11B and 90B Vision at their real shapes, weights never read: what each graph's compute
   memory plans at, against the allocator's lower bound (4-tile image, 512-token prefill over 2048). */
static void bench_mllama_memory(mms_backend_t cpu, bool big) {
    struct mms_mllama_hparams hp;
    struct mms_mllama_context_params cp;
    struct mms_mllama_model *m;
    struct mms_mllama_context *c;
    int64_t t0;
    if (big) mms_mllama_hparams_90b(&hp);
    else mms_mllama_hparams_11b(&hp);
    memset(&cp, 0, sizeof cp);
    cp.n_ctx = 2048;
    cp.n_batch = 512;
    cp.max_images = 1;
    printf("\nLlama 3.2 %s Vision, shapes only (f16 weights, f32 activations%s)\n", big ? "90B" : "11B",
           big ? "" : "; Ollama reserves about 2.8 GiB for the vision graph");
    m = mms_mllama_model_shapes_only(&hp, cpu, MMS_TYPE_F16);
    t0 = mms_time_us();
    c = m ? mms_mllama_context_new(m, &cp) : NULL;
    if (!c) { fprintf(stderr, "%s\n", mms_last_error()); mms_mllama_model_free(m); return; }
    printf("context with every graph reserved in %.0f ms\n", (double)(mms_time_us() - t0) / 1000.0);
    mms_mllama_context_print_memory(c, stdout);
    mms_mllama_context_free(c);
    mms_mllama_model_free(m);
}

static void bench_plans(void) {
    struct ref_graph r;
    printf("\ngraph allocator (bytes; ggml's figures for the same graphs; pictures in build/plan_*.svg)\n");
    memset(&r, 0, sizeof r); ref_vit_layers(&r, 4, 0, MMS_TYPE_F32);          bench_plan("vit", &r, 205030464);
    memset(&r, 0, sizeof r); ref_vit_layers(&r, 4, 1, MMS_TYPE_F32);          bench_plan("vit_flash", &r, 49182720);
    memset(&r, 0, sizeof r); ref_llama_layers(&r, 4, 512, MMS_TYPE_F16);      bench_plan("llama", &r, 0);
}

int main(int argc, char **argv) {
    mms_backend_t cpu;
    int i, plans_only = 0, mllama = 0, layers_given = 0;
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
        else if (!strcmp(argv[i], "--plans-only")) plans_only = 1;
        else if (!strcmp(argv[i], "--profile")) profile = 1;
        else if (!strcmp(argv[i], "--cpu-time")) cpu_time = 1;
        else if (!strcmp(argv[i], "--mllama")) mllama = 1;
        else if (!strcmp(argv[i], "--full")) mllama = mllama_full = 1;
        else if (!strcmp(argv[i], "--no-repack")) mllama_no_repack = 1;
        else if (!strcmp(argv[i], "--text-layers") && i + 1 < argc) mllama_text_layers = atoi(argv[++i]), layers_given = 1;
        else if (!strcmp(argv[i], "--vision-layers") && i + 1 < argc) mllama_vision_layers = atoi(argv[++i]), layers_given = 1;
        else {
            fprintf(stderr, "usage: %s [--threads N] [--reps N] [--filter SUBSTRING] [--plans-only] [--profile] [--cpu-time] "
                    "[--mllama [--text-layers N] [--vision-layers N] | --full] [--no-repack]\n", argv[0]);
            return 2;
        }
    }
    if (n_threads < 1 || n_threads > 64 || reps < 1 || reps > 64) { fprintf(stderr, "threads 1..64, reps 1..64\n"); return 2; }
    if (mllama_full && layers_given) { fprintf(stderr, "--full takes every layer: no --text-layers or --vision-layers with it\n"); return 2; }
    if (mllama_text_layers < 1 || mllama_text_layers > 40 || mllama_vision_layers < 1 || mllama_vision_layers > 32) {
        fprintf(stderr, "--text-layers 1..40, --vision-layers 1..32\n");
        return 2;
    }
    cpu = mms_backend_cpu_init();
    if (!cpu || mms_backend_cpu_set_n_threads(cpu, n_threads) != MMS_OK) { fprintf(stderr, "%s\n", mms_last_error()); return 1; }
    printf("mmsched %s bench: %d threads, %d repetitions, CPU kernels %s%s\n", MMS_VERSION_STRING, n_threads, reps,
           mms_cpu_kernels_name(mms_cpu_get_kernels()), cpu_time ? ", single ops timed by CPU time / threads" : "");
    if (plans_only) { bench_plans(); bench_mllama_memory(cpu, false); bench_mllama_memory(cpu, true); mms_backend_free(cpu); return 0; }
    measure_machine();

    bench_mul_mat(cpu, MMS_TYPE_F32, 1280, 1280, 1601, RATE_FLOPS, 0);
    bench_mul_mat(cpu, MMS_TYPE_F16, 1280, 1280, 1601, RATE_FLOPS, 0);
    bench_mul_mat(cpu, MMS_TYPE_F32, 1280, 5120, 1601, RATE_FLOPS, 0);
    bench_mul_mat(cpu, MMS_TYPE_F16, 1280, 5120, 1601, RATE_FLOPS, 0);
    bench_mul_mat(cpu, MMS_TYPE_BF16, 1280, 5120, 1601, RATE_FLOPS, 0);
    bench_mul_mat(cpu, MMS_TYPE_F32, 4096, 4096, 512, RATE_FLOPS, 0);
    bench_mul_mat(cpu, MMS_TYPE_F16, 4096, 4096, 512, RATE_FLOPS, 0);
    bench_mul_mat(cpu, MMS_TYPE_BF16, 4096, 4096, 512, RATE_FLOPS, 0);
    bench_mul_mat(cpu, MMS_TYPE_F32, 4096, 4096, 1, RATE_BYTES, 0);
    bench_mul_mat(cpu, MMS_TYPE_F16, 4096, 4096, 1, RATE_BYTES, 0);
    bench_mul_mat(cpu, MMS_TYPE_F16, 4096, 1024, 1, RATE_BYTES_IN_CACHE, 0);
    {   /* quantized weights: decode (cold, and hot: can the kernel keep up with memory?) and prompt-size products */
        static const enum mms_type qtypes[] = { MMS_TYPE_Q8_0, MMS_TYPE_Q4_0, MMS_TYPE_Q4_K, MMS_TYPE_Q6_K, MMS_TYPE_Q5_K };
        static const enum mms_type repacks[] = { MMS_TYPE_Q8_0, MMS_TYPE_Q4_0, MMS_TYPE_Q4_K, MMS_TYPE_Q6_K, MMS_TYPE_Q5_K };   /* with a repacked layout */
        size_t q;
        for (q = 0; q < sizeof qtypes / sizeof qtypes[0]; q++) {
            bench_mul_mat(cpu, qtypes[q], 4096, 4096, 1, RATE_BYTES, 0);
            bench_mul_mat(cpu, qtypes[q], 4096, 14336, 1, RATE_BYTES, 0);
            bench_mul_mat(cpu, qtypes[q], 4096, 1024, 1, RATE_BYTES_IN_CACHE, 0);
            bench_mul_mat(cpu, qtypes[q], 4096, 4096, 512, RATE_FLOPS, 0);
            bench_mul_mat(cpu, qtypes[q], 1280, 5120, 1601, RATE_FLOPS, 0);
        }
        for (q = 0; q < sizeof repacks / sizeof repacks[0]; q++) {   /* the same with the weights kept repacked */
            bench_mul_mat(cpu, repacks[q], 4096, 4096, 1, RATE_BYTES, 1);
            bench_mul_mat(cpu, repacks[q], 4096, 14336, 1, RATE_BYTES, 1);
            bench_mul_mat(cpu, repacks[q], 4096, 1024, 1, RATE_BYTES_IN_CACHE, 1);
            bench_mul_mat(cpu, repacks[q], 4096, 4096, 512, RATE_FLOPS, 1);
        }
    }
    bench_attention(cpu, 0, MMS_TYPE_F32, 0);
    bench_attention(cpu, 1, MMS_TYPE_F32, 0);
    bench_attention(cpu, 1, MMS_TYPE_F32, 1);
    bench_attention(cpu, 1, MMS_TYPE_F16, 0);
    bench_attention(cpu, 1, MMS_TYPE_BF16, 0);
    bench_attention_decode(cpu, 0);
    bench_attention_decode(cpu, 1);
    bench_stream(cpu, "soft_max_ext [1601,1601,16]", MMS_OP_SOFT_MAX, 1601, 1601, 16);
    bench_stream(cpu, "gelu [5120,1601]", MMS_OP_GELU, 5120, 1601, 1);
    bench_stream(cpu, "gelu_tanh [5120,1601]", MMS_OP_GELU_TANH, 5120, 1601, 1);
    bench_stream(cpu, "silu [14336,512]", MMS_OP_SILU, 14336, 512, 1);
    bench_stream(cpu, "rms_norm [1280,1601]", MMS_OP_RMS_NORM, 1280, 1601, 1);
    bench_stream(cpu, "norm [1280,1601]", MMS_OP_NORM, 1280, 1601, 1);
    bench_stream(cpu, "rope [128,32,512]", MMS_OP_ROPE, 128, 32, 512);
    bench_threadpool(cpu);
    bench_vit(cpu, MMS_TYPE_F32, 1);
    bench_vit(cpu, MMS_TYPE_F16, 1);
    bench_vit(cpu, MMS_TYPE_BF16, 1);
    bench_vit(cpu, MMS_TYPE_F32, 0);
    if (mllama) bench_mllama(cpu);
    if (wanted("plan")) bench_plans();
    if (wanted("plan")) { bench_mllama_memory(cpu, false); bench_mllama_memory(cpu, true); }

    mms_backend_free(cpu);
    free(read_buf);
    return 0;
}
