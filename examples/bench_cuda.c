/* bench_cuda.c - GPU benchmarks of the CUDA backend (build: make cuda; run: build/cuda/bench_cuda).

   - mul_mat F16 at 4096^3 through the backend (b in F16, and b in F32 converted on the way),
     next to the raw cuBLAS figure for the same product measured here (cublasGemmEx, F16 inputs,
     F32 output and accumulation): the ratio is the backend's overhead;
   - flash attention at 16 heads x 6432 tokens x 80 (the 4-tile vision encoder's shape), F16 K/V;
   - copies: device to device, host to device and back from pinned and from pageable memory;
   - quantized decode GEMV (4096x4096 and 14336x4096, one column) per block type, in GB/s of weights.
   Times are medians of --reps runs (default 20) after a warm-up, taken around compute + synchronize,
   so launch overhead is included. One machine-readable line per case starts with "BENCH ". */
#define MMS_CUDA
#define MMSCHED_IMPLEMENTATION
#include "mmsched.h"
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <stdlib.h>
#include <string.h>

static int reps = 20;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void die(const char *what) {
    fprintf(stderr, "bench_cuda: %s: %s\n", what, mms_last_error());
    exit(1);
}

/* Median seconds of reps runs of step(arg), after one run to warm up; a failed run ends the program. */
static double median_seconds(bool (*step)(void *arg), void *arg, const char *what) {
    double *t = (double *)malloc(sizeof(double) * (size_t)reps), med;
    int i;
    for (i = -1; i < reps; i++) {
        const int64_t t0 = mms_time_us();
        if (!step(arg)) die(what);
        if (i >= 0) t[i] = (double)(mms_time_us() - t0) * 1e-6;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    med = t[reps / 2];
    free(t);
    return med;
}

struct graph_run { mms_backend_t gpu; struct mms_cgraph *g; };
static bool graph_step(void *arg) {
    struct graph_run *r = (struct graph_run *)arg;
    return mms_backend_graph_compute(r->gpu, r->g) == MMS_OK;
}
static double time_graph(mms_backend_t gpu, struct mms_cgraph *g) {
    struct graph_run r;
    r.gpu = gpu;
    r.g = g;
    return median_seconds(graph_step, &r, "compute");
}

/* The raw cuBLAS product c = a^T b of n x n F16 matrices, F32 result, synchronized. */
struct gemm_run { cublasHandle_t h; int n; const void *a, *b; void *c; };
static bool gemm_step(void *arg) {
    const struct gemm_run *r = (const struct gemm_run *)arg;
    const float one = 1.0f, zero = 0.0f;
    return cublasGemmEx(r->h, CUBLAS_OP_T, CUBLAS_OP_N, r->n, r->n, r->n, &one, r->a, CUDA_R_16F, r->n, r->b, CUDA_R_16F, r->n,
                        &zero, r->c, CUDA_R_32F, r->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS &&
           cudaDeviceSynchronize() == cudaSuccess;
}

/* amount: FLOP for a "TFLOP/s" rate, bytes for "GB/s" */
static void report(const char *name, double seconds, double amount, const char *unit) {
    const double rate = amount / seconds * (unit[0] == 'G' ? 1e-9 : 1e-12);
    printf("%-52s %10.3f ms %10.1f %s\n", name, seconds * 1e3, rate, unit);
    printf("BENCH %s ms=%.4f %s=%.2f\n", name, seconds * 1e3, unit, rate);
}

/* Random contents for every tensor of ctx (values in [-1, 1), block types quantized). */
static void fill_all(struct mms_context *ctx) {
    struct mms_tensor *t;
    unsigned s = 12345;
    for (t = mms_get_first_tensor(ctx); t; t = mms_get_next_tensor(ctx, t)) {
        int64_t n = mms_nelements(t), i;
        float *f;
        void *raw;
        if (t->view_src || t->op != MMS_OP_NONE) continue;
        f = (float *)malloc(sizeof *f * (size_t)n);
        raw = malloc(mms_nbytes(t));
        for (i = 0; i < n; i++) { s = s * 1103515245u + 12345u; f[i] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f; }
        mms_get_type_traits(t->type)->from_float(f, raw, n);
        mms_backend_tensor_set(t, raw, 0, mms_nbytes(t));
        free(f);
        free(raw);
    }
}

static void bench_mul_mat_f16(mms_backend_t gpu) {
    const int n = 4096;
    const double flop = 2.0 * n * (double)n * n;
    int bt;
    for (bt = 0; bt < 2; bt++) {
        struct mms_init_params ip = { 0, NULL, true };
        struct mms_context *ctx = mms_init(ip);
        struct mms_tensor *a = mms_new_tensor_2d(ctx, MMS_TYPE_F16, n, n);
        struct mms_tensor *b = mms_new_tensor_2d(ctx, bt ? MMS_TYPE_F32 : MMS_TYPE_F16, n, n);
        struct mms_cgraph *g = mms_new_graph(ctx);
        mms_backend_buffer_t buf;
        mms_build_forward_expand(g, mms_mul_mat(ctx, a, b));
        if (!(buf = mms_backend_alloc_ctx_tensors(ctx, gpu))) die("alloc");
        fill_all(ctx);
        report(bt ? "mul_mat f16 x f32 4096^3 (backend)" : "mul_mat f16 x f16 4096^3 (backend)", time_graph(gpu, g), flop, "TFLOP/s");
        if (!bt) {   /* the raw cuBLAS call on the same memory */
            struct gemm_run r;
            r.n = n;
            r.a = a->data;
            r.b = b->data;
            r.c = mms_graph_node(g, -1)->data;
            cublasCreate(&r.h);
            report("mul_mat f16 x f16 4096^3 (raw cublasGemmEx)", median_seconds(gemm_step, &r, "cublasGemmEx"), flop, "TFLOP/s");
            cublasDestroy(r.h);
        }
        mms_backend_buffer_free(buf);
        mms_free(ctx);
    }
}

static void bench_flash_attention(mms_backend_t gpu) {
    const int64_t D = 80, N = 6432, H = 16;
    struct mms_init_params ip = { 0, NULL, true };
    struct mms_context *ctx = mms_init(ip);
    struct mms_tensor *q = mms_new_tensor_3d(ctx, MMS_TYPE_F32, D, N, H);
    struct mms_tensor *k = mms_new_tensor_3d(ctx, MMS_TYPE_F16, D, N, H);
    struct mms_tensor *v = mms_new_tensor_3d(ctx, MMS_TYPE_F16, D, N, H);
    struct mms_cgraph *g = mms_new_graph(ctx);
    mms_backend_buffer_t buf;
    mms_build_forward_expand(g, mms_flash_attn_ext(ctx, q, k, v, NULL, 0.111803f, 0.0f, 0.0f));
    if (!(buf = mms_backend_alloc_ctx_tensors(ctx, gpu))) die("alloc");
    fill_all(ctx);
    report("flash attention 16 x 6432 x 80, f16 k/v", time_graph(gpu, g), 4.0 * (double)H * (double)N * (double)N * (double)D, "TFLOP/s");
    mms_backend_buffer_free(buf);
    mms_free(ctx);
}

/* Copy kind 0: device to device; 1, 2: pinned host to device and back; 3, 4: pageable. */
struct copy_run { int kind; struct mms_tensor *a, *b, *h; char *pageable; };
static bool copy_step(void *arg) {
    const struct copy_run *r = (const struct copy_run *)arg;
    const size_t bytes = mms_nbytes(r->a);
    switch (r->kind) {
        case 0:  return mms_backend_tensor_copy(r->a, r->b) == MMS_OK;
        case 1:  return mms_backend_tensor_copy(r->h, r->a) == MMS_OK;
        case 2:  return mms_backend_tensor_copy(r->a, r->h) == MMS_OK;
        case 3:  return mms_backend_tensor_set(r->a, r->pageable, 0, bytes) == MMS_OK;
        default: return mms_backend_tensor_get(r->a, r->pageable, 0, bytes) == MMS_OK;
    }
}

static void bench_copies(void) {
    const size_t bytes = (size_t)1 << 30;
    struct mms_init_params ip = { 0, NULL, true };
    struct mms_context *dctx = mms_init(ip), *hctx = mms_init(ip);
    struct mms_tensor *a = mms_new_tensor_1d(dctx, MMS_TYPE_F32, (int64_t)(bytes / 4));
    struct mms_tensor *b = mms_new_tensor_1d(dctx, MMS_TYPE_F32, (int64_t)(bytes / 4));
    struct mms_tensor *h = mms_new_tensor_1d(hctx, MMS_TYPE_F32, (int64_t)(bytes / 4));
    mms_backend_buffer_t dbuf = mms_backend_alloc_ctx_tensors_from_buft(dctx, mms_backend_cuda_buffer_type(0));
    mms_backend_buffer_t hbuf = mms_backend_alloc_ctx_tensors_from_buft(hctx, mms_backend_cuda_host_buffer_type());
    char *pageable = (char *)malloc(bytes);
    const char *names[5] = { "copy device to device 1 GiB", "copy pinned host to device 1 GiB", "copy device to pinned host 1 GiB",
                             "copy pageable host to device 1 GiB", "copy device to pageable host 1 GiB" };
    int kind;
    if (!dbuf || !hbuf || !pageable) die("alloc");
    memset(pageable, 1, bytes);
    memset(h->data, 1, bytes);
    for (kind = 0; kind < 5; kind++) {
        struct copy_run r;
        r.kind = kind;
        r.a = a;
        r.b = b;
        r.h = h;
        r.pageable = pageable;
        /* device to device reads and writes every byte: count both */
        report(names[kind], median_seconds(copy_step, &r, names[kind]), (double)bytes * (kind == 0 ? 2.0 : 1.0), "GB/s");
    }
    free(pageable);
    mms_backend_buffer_free(dbuf);
    mms_backend_buffer_free(hbuf);
    mms_free(dctx);
    mms_free(hctx);
}

static void bench_quant_gemv(mms_backend_t gpu) {
    const enum mms_type types[5] = { MMS_TYPE_F16, MMS_TYPE_Q8_0, MMS_TYPE_Q4_0, MMS_TYPE_Q4_K, MMS_TYPE_Q6_K };
    const int64_t rows[2] = { 4096, 14336 };
    int t, r;
    for (t = 0; t < 5; t++)
        for (r = 0; r < 2; r++) {
            struct mms_init_params ip = { 0, NULL, true };
            struct mms_context *ctx = mms_init(ip);
            struct mms_tensor *w = mms_new_tensor_2d(ctx, types[t], 4096, rows[r]);
            struct mms_tensor *x = mms_new_tensor_2d(ctx, MMS_TYPE_F32, 4096, 1);
            struct mms_cgraph *g = mms_new_graph(ctx);
            mms_backend_buffer_t buf;
            char name[64];
            mms_build_forward_expand(g, mms_mul_mat(ctx, w, x));
            if (!(buf = mms_backend_alloc_ctx_tensors(ctx, gpu))) die("alloc");
            fill_all(ctx);
            snprintf(name, sizeof name, "decode GEMV %s %lldx4096", mms_type_name(types[t]), (long long)rows[r]);
            report(name, time_graph(gpu, g), (double)mms_nbytes(w), "GB/s");
            mms_backend_buffer_free(buf);
            mms_free(ctx);
        }
}

int main(int argc, char **argv) {
    mms_backend_t gpu;
    int i;
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else { fprintf(stderr, "usage: %s [--reps N]\n", argv[0]); return 2; }
    }
    if (reps < 1) reps = 1;
    if (!(gpu = mms_backend_cuda_init(0))) {
        printf("SKIP bench_cuda: %s\n", mms_last_error());
        return 0;
    }
    printf("%-52s %13s %15s\n", "case", "median", "rate");
    bench_mul_mat_f16(gpu);
    bench_flash_attention(gpu);
    bench_copies();
    bench_quant_gemv(gpu);
    mms_backend_free(gpu);
    return 0;
}
