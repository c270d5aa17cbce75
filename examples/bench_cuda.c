/* bench_cuda.c - GPU benchmarks of the CUDA backend (build: make cuda; run: build/cuda/bench_cuda).

   - mul_mat F16 at 4096^3 through the backend (b in F16, and b in F32 converted on the way),
     next to the raw cuBLAS figure for the same product measured here (cublasGemmEx, F16 inputs,
     F32 output and accumulation): the ratio is the backend's overhead;
   - flash attention at 16 heads x 6432 tokens x 80 (the 4-tile vision encoder's shape), F16 K/V;
   - copies: device to device, host to device and back from pinned and from pageable memory;
   - decode GEMV (4096x4096 and 14336x4096, one column) per weight type, in GB/s of weights and as
     a fraction of the device's peak (memory clock x bus width);
   - with --mllama f16|q4_k_m: Llama 3.2 11B Vision at full size (40 text layers, 32 + 8 vision
     layers) with random weights (f16, or the text matrices in the Q4_K_M mix), written once to
     build/ or --model-dir DIR (about 21 GB or 7 GB; a RAM-backed /dev/shm keeps it off the disk) and loaded entirely on the GPU through the mllama API: a 4-tile
     image encode (median of 3 images), a 64-token prompt, then single-token decodes (median), in
     ms and tokens/s against the targets (f16 decode >= 160 tok/s, Q4_K_M >= 500, encode <= 50 ms
     on an H200). --skip-micro runs only that.
   Times are medians of --reps runs (default 20) after a warm-up, taken around compute + synchronize,
   so launch overhead is included. One machine-readable line per case starts with "BENCH ". */
#define MMS_CUDA
#define MMSCHED_IMPLEMENTATION
#include "mmsched.h"
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <stdlib.h>
#include <string.h>
#include "random_mllama.h"

static int reps = 20;
static const char *model_dir = "build";   /* --model-dir: where --mllama writes its random model */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double *v, int n) { qsort(v, (size_t)n, sizeof *v, cmp_double); return v[n / 2]; }

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
    med = median_of(t, reps);
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
        const double backend_s = time_graph(gpu, g);
        report(bt ? "mul_mat f16 x f32 4096^3 (backend)" : "mul_mat f16 x f16 4096^3 (backend)", backend_s, flop, "TFLOP/s");
        if (!bt) {   /* the raw cuBLAS call on the same memory */
            struct gemm_run r;
            r.n = n;
            r.a = a->data;
            r.b = b->data;
            r.c = mms_graph_node(g, -1)->data;
            cublasCreate(&r.h);
            const double raw = median_seconds(gemm_step, &r, "cublasGemmEx");
            report("mul_mat f16 x f16 4096^3 (raw cublasGemmEx)", raw, flop, "TFLOP/s");
            printf("    the backend at %.0f%% of raw cuBLAS\n", 100.0 * raw / backend_s);
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

/* The device's peak memory bandwidth in GB/s: twice the memory clock (double data rate) times the bus width. */
static double peak_gbs(void) {
    int khz = 0, bits = 0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, 0) != cudaSuccess ||
        cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, 0) != cudaSuccess) return 0.0;
    return 2.0 * (double)khz * 1e3 * (double)bits / 8.0 * 1e-9;
}

static void bench_quant_gemv(mms_backend_t gpu) {
    const enum mms_type types[5] = { MMS_TYPE_F16, MMS_TYPE_Q8_0, MMS_TYPE_Q4_0, MMS_TYPE_Q4_K, MMS_TYPE_Q6_K };
    const int64_t rows[2] = { 4096, 14336 };
    const double peak = peak_gbs();
    double sec;
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
            sec = time_graph(gpu, g);
            report(name, sec, (double)mms_nbytes(w), "GB/s");
            if (peak > 0.0) printf("    %.0f%% of the peak %.0f GB/s\n", 100.0 * (double)mms_nbytes(w) / sec * 1e-9 / peak, peak);
            mms_backend_buffer_free(buf);
            mms_free(ctx);
        }
}

/* -- the whole model -- */

static void target(const char *what, double value, double goal, bool at_least, const char *unit) {
    const bool met = at_least ? value >= goal : value <= goal;
    printf("TARGET %-36s %10.2f %s (target %s %.0f): %s\n", what, value, unit, at_least ? ">=" : "<=", goal, met ? "met" : "MISSED");
}

static bool bench_mllama(mms_backend_t gpu, const char *weights, int n_text, int n_local, int n_decode) {
    const bool q4 = !strcmp(weights, "q4_k_m");
    const int n_global = (n_local + 3) / 4, n_prompt = 64, n_images = 3;
    struct mms_mllama_hparams hp;
    struct mms_mllama_load_params lp;
    struct mms_mllama_context_params cp;
    struct mms_mllama_model *m = NULL;
    struct mms_mllama_context *c = NULL;
    struct mms_mllama_image_params ip;
    struct mms_mllama_timings t;
    struct mms_mllama_batch b;
    mms_backend_t cpu = mms_backend_cpu_init();
    double enc[8], dec[256], ms;
    int32_t tokens[64];
    char path[1100];
    uint8_t *rgb = NULL;
    bool ok = false;
    FILE *f;
    int i, k;
    int64_t t0;
    if (n_decode > 256) n_decode = 256;
    mms_mllama_hparams_11b(&hp);
    snprintf(path, sizeof path, "%s/bench-mllama-11b-%s-t%d-v%d+%d.gguf", model_dir, weights, n_text, n_local, n_global);
    printf("\nLlama 3.2 11B Vision shapes, random %s weights, %d text layers, %d + %d vision layers, all on the GPU (%s)\n",
           q4 ? "Q4_K_M-mix" : "f16", n_text, n_local, n_global, path);
    if ((f = fopen(path, "rb")) != NULL) fclose(f);
    else {
        t0 = mms_time_us();
        if (!write_mllama_gguf(path, &hp, n_text, n_local, n_global, q4)) { remove(path); goto done; }
        printf("wrote the model in %.1f s\n", (double)(mms_time_us() - t0) * 1e-6);
    }
    memset(&lp, 0, sizeof lp);
    lp.path = path;
    lp.cpu = cpu;
    lp.gpu = gpu;
    lp.n_gpu_layers = 1000;
    lp.vision_on_gpu = true;
    memset(&cp, 0, sizeof cp);
    cp.n_ctx = 2048;
    cp.n_batch = 512;
    cp.max_images = 1;
    t0 = mms_time_us();
    if (!(m = mms_mllama_model_load(&lp)) || !(c = mms_mllama_context_new(m, &cp))) { fprintf(stderr, "bench_cuda: %s\n", mms_last_error()); goto done; }
    printf("loaded in %.1f s\n", (double)(mms_time_us() - t0) * 1e-6);
    ip = mms_mllama_model_image_params(m);
    rgb = (uint8_t *)malloc((size_t)1120 * 1120 * 3);   /* 2 x 2 tiles */
    for (k = 0; k < n_images; k++) {                    /* a different picture each time: no cached encode */
        struct mms_mllama_image img;
        for (i = 0; i < 1120 * 1120 * 3; i++) rgb[i] = (uint8_t)((i * 7 + k * 131) ^ (i >> 11));
        memset(&img, 0, sizeof img);
        if (mms_mllama_preprocess_image(&ip, rgb, 1120, 1120, 0, &img) != MMS_OK) { fprintf(stderr, "bench_cuda: %s\n", mms_last_error()); goto done; }
        mms_mllama_seq_clear(c, 0);
        mms_mllama_reset_timings(c);
        t0 = mms_time_us();
        if (mms_mllama_seq_add_image(c, 0, &img) != MMS_OK) { fprintf(stderr, "bench_cuda: %s\n", mms_last_error()); mms_mllama_image_free(&img); goto done; }
        enc[k] = (double)(mms_time_us() - t0) * 1e-3;
        mms_mllama_get_timings(c, &t);
        printf("    image %d: %.2f ms (encoder + projector %.2f, cross K/V %.2f)\n", k, enc[k], t.encode_ms, t.cross_kv_ms);
        mms_mllama_image_free(&img);
    }
    ms = median_of(enc, n_images);
    printf("BENCH mllama_%s_encode_4tiles ms=%.3f\n", weights, ms);
    for (i = 0; i < n_prompt; i++) tokens[i] = i == 0 ? hp.image_token_id : (int32_t)((i * 7919) % 128000);
    memset(&b, 0, sizeof b);
    b.n_tokens = n_prompt;
    b.tokens = tokens;
    t0 = mms_time_us();
    if (mms_mllama_decode(c, &b) != MMS_OK) { fprintf(stderr, "bench_cuda: %s\n", mms_last_error()); goto done; }
    printf("BENCH mllama_%s_prefill_%d ms=%.3f\n", weights, n_prompt, (double)(mms_time_us() - t0) * 1e-3);
    for (i = 0; i < n_decode; i++) {
        int32_t tok = (int32_t)(1000 + i);
        b.n_tokens = 1;
        b.tokens = &tok;
        t0 = mms_time_us();
        if (mms_mllama_decode(c, &b) != MMS_OK) { fprintf(stderr, "bench_cuda: %s\n", mms_last_error()); goto done; }
        dec[i] = (double)(mms_time_us() - t0) * 1e-3;
    }
    ms = median_of(dec, n_decode);
    printf("BENCH mllama_%s_decode ms=%.3f tok/s=%.1f (median of %d, after a %d-token prompt)\n", weights, ms, 1000.0 / ms, n_decode, n_prompt);
    if (n_text == 40 && n_local == 32) {
        target(q4 ? "decode, Q4_K_M-mix weights" : "decode, f16 weights", 1000.0 / ms, q4 ? 500.0 : 160.0, true, "tok/s");
        target("4-tile image encode", median_of(enc, n_images), 50.0, false, "ms");
    }
    ok = true;
done:
    free(rgb);
    mms_mllama_context_free(c);
    mms_mllama_model_free(m);
    mms_backend_free(cpu);
    return ok;
}

int main(int argc, char **argv) {
    mms_backend_t gpu;
    const char *mllama = NULL;
    int i, skip_micro = 0, n_text = 40, n_local = 32, n_decode = 64;
    bool ok = true;
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mllama") && i + 1 < argc) mllama = argv[++i];
        else if (!strcmp(argv[i], "--text-layers") && i + 1 < argc) n_text = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--vision-layers") && i + 1 < argc) n_local = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--decode-tokens") && i + 1 < argc) n_decode = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--skip-micro")) skip_micro = 1;
        else if (!strcmp(argv[i], "--model-dir") && i + 1 < argc && strlen(argv[i + 1]) < 1000) model_dir = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--reps N] [--skip-micro] [--mllama f16|q4_k_m [--text-layers N] [--vision-layers N] [--decode-tokens N] [--model-dir DIR]]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (mllama && strcmp(mllama, "f16") && strcmp(mllama, "q4_k_m")) { fprintf(stderr, "bench_cuda: --mllama f16 or q4_k_m, not '%s'\n", mllama); return 2; }
    if (n_text < 1 || n_local < 1 || n_decode < 1) { fprintf(stderr, "bench_cuda: layer and token counts must be positive\n"); return 2; }
    if (!(gpu = mms_backend_cuda_init(0))) {
        printf("SKIP bench_cuda: %s\n", mms_last_error());
        return 0;
    }
    if (!skip_micro) {
        printf("%-52s %13s %15s\n", "case", "median", "rate");
        bench_mul_mat_f16(gpu);
        bench_flash_attention(gpu);
        bench_copies();
        bench_quant_gemv(gpu);
    }
    if (mllama) ok = bench_mllama(gpu, mllama, n_text, n_local, n_decode);
    mms_backend_free(gpu);
    return ok ? 0 : 1;
}
