/* bench.c - CPU benchmarks: the machine's own limits, then single ops at the shapes that matter
   for Llama 3.2 Vision (see shared/docs/benchmarks.md for ggml's figures on this kind of machine).

   Each case is a small graph computed `reps` times on the CPU backend; the table shows the median
   time, the rate (GFLOP/s or GB/s) and the fraction of the limit measured in the same run.
   One machine-readable line per case starts with "BENCH ".

   Then the graph allocator on the reference graphs (reference_graphs.h): planned bytes against the
   lower bound, the universal bound and ggml's figure, planning time, and an SVG picture of each
   plan written to build/plan_<graph>.svg.

   Usage: build/bench [--threads N] [--reps N] [--filter SUBSTRING] [--plans-only] */
#define MMSCHED_IMPLEMENTATION
#include "mmsched.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include "reference_graphs.h"
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#  include <immintrin.h>
#  define BENCH_X86 1
#else
#  define BENCH_X86 0
#endif

static int n_threads = 2, reps = 5;
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
#endif

struct worker { long iters; const float *data; size_t n; double result; };

static void *fma_worker(void *p) {
    struct worker *w = (struct worker *)p;
#if BENCH_X86
    w->result = fma_loop(w->iters);
#else
    w->result = 0;
#endif
    return NULL;
}

static void *read_worker(void *p) {   /* streams its slice once: four sums keep loads in flight */
    struct worker *w = (struct worker *)p;
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i;
    for (i = 0; i + 4 <= w->n; i += 4) { s0 += w->data[i]; s1 += w->data[i + 1]; s2 += w->data[i + 2]; s3 += w->data[i + 3]; }
    w->result = s0 + s1 + s2 + s3;
    return NULL;
}

/* Runs fn on n_threads threads, each with its own worker record; returns seconds. */
static double run_threads(void *(*fn)(void *), struct worker *w) {
    pthread_t th[64];
    int64_t t0 = mms_time_us();
    int i;
    for (i = 0; i < n_threads; i++) pthread_create(&th[i], NULL, fn, &w[i]);
    for (i = 0; i < n_threads; i++) pthread_join(th[i], NULL);
    return (double)(mms_time_us() - t0) * 1e-6;
}

static void measure_machine(void) {
    struct worker w[64];
    double t[7];
    size_t n = (size_t)256 << 20 >> 2, per = n / (size_t)n_threads;   /* 256 MiB of floats */
    float *data = (float *)malloc(n * sizeof *data);
    int r, i;
    memset(w, 0, sizeof w);
#if BENCH_X86
    for (r = 0; r < 7; r++) {
        for (i = 0; i < n_threads; i++) w[i].iters = 20000000;
        t[r] = run_threads(fma_worker, w);
    }
    peak_gflops = 20000000.0 * 12 * 16 * n_threads / median(t, 7) * 1e-9;   /* 8 lanes x 2 flops per FMA */
#endif
    for (i = 0; i < (int)n; i++) data[i] = 1.0f;
    for (r = 0; r < 7; r++) {
        for (i = 0; i < n_threads; i++) { w[i].data = data + (size_t)i * per; w[i].n = per; }
        t[r] = run_threads(read_worker, w);
    }
    peak_gbs = (double)(per * (size_t)n_threads * sizeof(float)) / median(t, 7) * 1e-9;
    free(data);
    printf("machine (%d threads): FMA peak %.1f GFLOP/s%s, streaming read %.1f GB/s\n\n", n_threads, peak_gflops,
           BENCH_X86 ? "" : " (not measured on this CPU)", peak_gbs);
}

/* -- op cases ---------------------------------------------------------------------------------- */

struct bench_case {
    struct mms_context *ctx;
    struct mms_cgraph  *graph;
    mms_backend_buffer_t buffer;
};

static void fill_random(struct mms_tensor *t, unsigned *state) {
    int64_t i, n = mms_nelements(t);
    float *v;
    void *data;
    if (t->type == MMS_TYPE_I32) return;
    v = (float *)malloc((size_t)n * sizeof *v);
    data = malloc(mms_nbytes(t));
    for (i = 0; i < n; i++) { *state = *state * 1664525u + 1013904223u; v[i] = (float)(*state >> 8) / 8388608.0f - 1.0f; }
    mms_get_type_traits(t->type)->from_float(v, data, n);
    mms_backend_tensor_set(t, data, 0, mms_nbytes(t));
    free(v);
    free(data);
}

/* Allocates every tensor of the case's context, fills the leafs with random values. */
static int bench_ready(struct bench_case *c, mms_backend_t cpu) {
    struct mms_tensor *t;
    unsigned state = 1;
    int i;
    if (mms_get_status(c->ctx) != MMS_OK) { fprintf(stderr, "build failed: %s\n", mms_get_error(c->ctx)); return 0; }
    c->buffer = mms_backend_alloc_ctx_tensors(c->ctx, cpu);
    if (!c->buffer) { fprintf(stderr, "%s\n", mms_last_error()); return 0; }
    for (i = 0; i < mms_graph_n_leafs(c->graph); i++) { t = mms_graph_leaf(c->graph, i); fill_random(t, &state); }
    return 1;
}

static void bench_done(struct bench_case *c) {
    mms_backend_buffer_free(c->buffer);
    mms_free(c->ctx);
}

/* work: flops (rate in GFLOP/s) or, with bytes_mode, bytes (rate in GB/s) */
static void report(const char *name, double *ms, int n, double work, int bytes_mode) {
    double med = median(ms, n), rate = work / (med * 1e-3) * 1e-9, limit = bytes_mode ? peak_gbs : peak_gflops;
    printf("%-44s %10.2f ms %9.1f %-7s %5.0f%% of limit\n", name, med, rate, bytes_mode ? "GB/s" : "GFLOP/s",
           limit > 0 ? 100.0 * rate / limit : 0.0);
    printf("BENCH name=%s median_ms=%.3f rate=%.2f unit=%s frac_limit=%.3f threads=%d kernels=%s\n", name, med, rate,
           bytes_mode ? "GB/s" : "GFLOP/s", limit > 0 ? rate / limit : 0.0, n_threads, mms_cpu_kernels_name(mms_cpu_get_kernels()));
    fflush(stdout);
}

/* Computes graphs[i % n_graphs] for each repetition (several graphs keep weights out of cache). */
static void run_case(const char *name, mms_backend_t cpu, struct bench_case *cases, int n_graphs, double work, int bytes_mode) {
    double ms[64];
    int r;
    mms_backend_graph_compute(cpu, cases[0].graph);   /* warm up: thread pool, scratch memory */
    for (r = 0; r < reps; r++) {
        int64_t t0 = mms_time_us();
        if (mms_backend_graph_compute(cpu, cases[(r + 1) % n_graphs].graph) != MMS_OK) { fprintf(stderr, "%s\n", mms_last_error()); return; }
        ms[r] = (double)(mms_time_us() - t0) * 1e-3;
    }
    report(name, ms, reps, work, bytes_mode);
}

static struct mms_context *new_ctx(void) {
    struct mms_init_params ip = { 0, NULL, true };
    return mms_init(ip);
}

static int wanted(const char *name) { return !filter || strstr(name, filter); }

static void bench_mul_mat(mms_backend_t cpu, enum mms_type wtype, int64_t K, int64_t M, int64_t N, int cold) {
    struct bench_case c[6];
    char name[96];
    int i, n_graphs = cold ? 6 : 1;   /* 6 weight copies: bigger than any cache on this machine */
    snprintf(name, sizeof name, "mul_mat %s %lldx%lld * %lld%s", mms_type_name(wtype), (long long)M, (long long)K, (long long)N, cold ? " cold" : "");
    if (!wanted(name)) return;
    for (i = 0; i < n_graphs; i++) {
        struct mms_tensor *w, *x;
        c[i].ctx = new_ctx();
        w = mms_new_tensor_2d(c[i].ctx, wtype, K, M);
        x = mms_new_tensor_2d(c[i].ctx, MMS_TYPE_F32, K, N);
        c[i].graph = mms_new_graph(c[i].ctx);
        mms_build_forward_expand(c[i].graph, mms_mul_mat(c[i].ctx, w, x));
        if (!bench_ready(&c[i], cpu)) return;
    }
    if (cold) run_case(name, cpu, c, n_graphs, (double)K * M * mms_type_size(wtype), 1);
    else      run_case(name, cpu, c, n_graphs, 2.0 * K * M * N, 0);
    for (i = 0; i < n_graphs; i++) bench_done(&c[i]);
}

static void bench_attention(mms_backend_t cpu, int fused) {
    const int64_t D = 80, T = 1601, H = 16;
    struct bench_case c;
    struct mms_tensor *q, *k, *v, *out;
    const char *name = fused ? "attention 16x1601x80 flash_attn_ext" : "attention 16x1601x80 three ops";
    if (!wanted(name)) return;
    c.ctx = new_ctx();
    q = mms_new_tensor_3d(c.ctx, MMS_TYPE_F32, D, T, H);
    k = mms_new_tensor_3d(c.ctx, MMS_TYPE_F32, D, T, H);
    if (fused) {
        v = mms_new_tensor_3d(c.ctx, MMS_TYPE_F32, D, T, H);
        out = mms_flash_attn_ext(c.ctx, q, k, v, NULL, 1.0f / sqrtf((float)D), 0.0f, 0.0f);
    } else {
        v = mms_new_tensor_3d(c.ctx, MMS_TYPE_F32, T, D, H);   /* already transposed, as the ViT graph makes it */
        out = mms_mul_mat(c.ctx, v, mms_soft_max_ext(c.ctx, mms_mul_mat(c.ctx, k, q), NULL, 1.0f / sqrtf((float)D), 0.0f));
    }
    c.graph = mms_new_graph(c.ctx);
    mms_build_forward_expand(c.graph, out);
    if (!bench_ready(&c, cpu)) return;
    run_case(name, cpu, &c, 1, 4.0 * H * T * T * D, 0);
    bench_done(&c);
}

/* Ops that stream memory: rate = bytes read + written. */
static void bench_stream(mms_backend_t cpu, const char *name, enum mms_op op, int64_t ne0, int64_t ne1, int64_t ne2) {
    struct bench_case c;
    struct mms_tensor *a, *out;
    if (!wanted(name)) return;
    c.ctx = new_ctx();
    a = mms_new_tensor_3d(c.ctx, MMS_TYPE_F32, ne0, ne1, ne2);
    out = op == MMS_OP_SOFT_MAX ? mms_soft_max_ext(c.ctx, a, NULL, 0.125f, 0.0f)
        : op == MMS_OP_GELU     ? mms_gelu(c.ctx, a)
        :                         mms_rms_norm(c.ctx, a, 1e-5f);
    c.graph = mms_new_graph(c.ctx);
    mms_build_forward_expand(c.graph, out);
    if (!bench_ready(&c, cpu)) return;
    run_case(name, cpu, &c, 1, 2.0 * (double)mms_nbytes(a), 1);
    bench_done(&c);
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

/* Llama 3.2 11B Vision at its real shapes, weights never read: what each graph's compute memory
   plans at, against the allocator's lower bound (4-tile image, 512-token prefill over 2048). */
static void bench_mllama_memory(mms_backend_t cpu) {
    struct mms_mllama_hparams hp;
    struct mms_mllama_context_params cp;
    struct mms_mllama_model *m;
    struct mms_mllama_context *c;
    int64_t t0;
    mms_mllama_hparams_11b(&hp);
    memset(&cp, 0, sizeof cp);
    cp.n_ctx = 2048;
    cp.n_batch = 512;
    cp.max_images = 1;
    printf("\nLlama 3.2 11B Vision, shapes only (f16 weights, f32 activations; Ollama reserves about 2.8 GiB for the vision graph)\n");
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
    printf("\ngraph allocator (bytes; ggml's figures from shared/docs/benchmarks.md; pictures in build/plan_*.svg)\n");
    memset(&r, 0, sizeof r); ref_vit_layers(&r, 4, 0, MMS_TYPE_F32);          bench_plan("vit", &r, 205030464);
    memset(&r, 0, sizeof r); ref_vit_layers(&r, 4, 1, MMS_TYPE_F32);          bench_plan("vit_flash", &r, 49182720);
    memset(&r, 0, sizeof r); ref_llama_layers(&r, 4, 512, MMS_TYPE_F16);      bench_plan("llama", &r, 0);
}

int main(int argc, char **argv) {
    mms_backend_t cpu;
    int i, plans_only = 0;
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
        else if (!strcmp(argv[i], "--plans-only")) plans_only = 1;
        else { fprintf(stderr, "usage: %s [--threads N] [--reps N] [--filter SUBSTRING] [--plans-only]\n", argv[0]); return 2; }
    }
    if (n_threads < 1 || n_threads > 64 || reps < 1 || reps > 64) { fprintf(stderr, "threads 1..64, reps 1..64\n"); return 2; }
    cpu = mms_backend_cpu_init();
    if (!cpu || mms_backend_cpu_set_n_threads(cpu, n_threads) != MMS_OK) { fprintf(stderr, "%s\n", mms_last_error()); return 1; }
    printf("mmsched %s bench: %d threads, %d repetitions, CPU kernels %s\n", MMS_VERSION_STRING, n_threads, reps,
           mms_cpu_kernels_name(mms_cpu_get_kernels()));
    if (plans_only) { bench_plans(); bench_mllama_memory(cpu); mms_backend_free(cpu); return 0; }
    measure_machine();

    bench_mul_mat(cpu, MMS_TYPE_F32, 1280, 1280, 1601, 0);
    bench_mul_mat(cpu, MMS_TYPE_F16, 1280, 1280, 1601, 0);
    bench_mul_mat(cpu, MMS_TYPE_F32, 1280, 5120, 1601, 0);
    bench_mul_mat(cpu, MMS_TYPE_F16, 1280, 5120, 1601, 0);
    bench_mul_mat(cpu, MMS_TYPE_F32, 4096, 4096, 512, 0);
    bench_mul_mat(cpu, MMS_TYPE_F16, 4096, 4096, 512, 0);
    bench_mul_mat(cpu, MMS_TYPE_F32, 4096, 4096, 1, 1);
    bench_mul_mat(cpu, MMS_TYPE_F16, 4096, 4096, 1, 1);
    bench_attention(cpu, 0);
    bench_attention(cpu, 1);
    bench_stream(cpu, "soft_max_ext [1601,1601,16]", MMS_OP_SOFT_MAX, 1601, 1601, 16);
    bench_stream(cpu, "gelu [5120,1601]", MMS_OP_GELU, 5120, 1601, 1);
    bench_stream(cpu, "rms_norm [1280,1601]", MMS_OP_RMS_NORM, 1280, 1601, 1);
    bench_plans();
    bench_mllama_memory(cpu);

    mms_backend_free(cpu);
    return 0;
}
