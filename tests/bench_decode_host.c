/* bench_decode_host.c - the host's share of one mllama decode step at Llama 3.2 11B Vision shapes,
   measured without a GPU: the CUDA backend runs on the mock runtime (tests/cuda_mock.h) with its
   kernels validated and counted but not run, so what is timed is the host's work per token, what a
   GPU would wait for. Also the CPU backend alone (--cpu), whose kernels run.
   The model: the 11B hyper-parameters with --text-layers text layers (default 5: layers 0-4, cross
   attention at 3, the 11B model's one in five), one local and one global vision layer, random
   weights in f16 or the Q4_K_M mix (examples/random_mllama.h), written once to build/. The host
   cost grows with the layers: run two layer counts and extrapolate to the 11B's 40.
   The sequence: one 4-tile picture (one tile on --cpu), an 8-token prompt, then --tokens single-token decodes. Per
   token: host microseconds in all (the decode call), building the text graph, the scheduler's
   allocation, the CUDA backend's graph signature and its replay key, and the rest (the CPU's
   kernels on --cpu); the launches (kernels + cuBLAS calls) of a token computed without a CUDA
   graph replay, and the graph launches of a replayed one; the graphs the backend replayed as
   unchanged (no signature, no key) in the whole run. Medians over the tokens; one line starting
   "BENCH ".
   usage: bench_decode_host [--weights f16|q4_k_m] [--text-layers N] [--tokens N] [--cpu] */
#define MMS_CUDA
#define MMSCHED_IMPLEMENTATION
#include "mmsched.h"
#include <stdlib.h>
#include <string.h>
#include "cuda_mock_api.h"
#include "../examples/random_mllama.h"

#define MAX_TOKENS 512

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median_of(double *v, int n) {
    if (n < 1) return -1.0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

enum { TOTAL, GRAPH, ALLOC, SIGNATURE, KEY, REST, N_PHASES };
static const char *const phase_names[N_PHASES] = { "total_us", "graph_us", "alloc_us", "signature_us", "key_us", "rest_us" };

int main(int argc, char **argv) {
    const char *weights = "f16";
    int i, n_text = 5, n_tokens = 32, on_cpu = 0, n_plain = 0, n_replayed = 0;
    struct mms_mllama_hparams hp;
    struct mms_mllama_load_params lp;
    struct mms_mllama_context_params cp;
    struct mms_mllama_model *m = NULL;
    struct mms_mllama_context *c = NULL;
    struct mms_mllama_image_params ip;
    struct mms_mllama_image img;
    struct mms_mllama_batch b;
    mms_backend_t cpu = NULL, gpu = NULL;
    static double phase[N_PHASES][MAX_TOKENS], launches[MAX_TOKENS], graph_launches[MAX_TOKENS];
    int32_t prompt[8];
    uint8_t *rgb = NULL;
    char path[160];
    int ok = 0, side;
    FILE *f;
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--weights") && i + 1 < argc) weights = argv[++i];
        else if (!strcmp(argv[i], "--text-layers") && i + 1 < argc) n_text = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) n_tokens = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cpu")) on_cpu = 1;
        else {
            fprintf(stderr, "usage: %s [--weights f16|q4_k_m] [--text-layers N] [--tokens N] [--cpu]\n", argv[0]);
            return 2;
        }
    }
    if (strcmp(weights, "f16") && strcmp(weights, "q4_k_m")) { fprintf(stderr, "bench_decode_host: --weights f16 or q4_k_m, not '%s'\n", weights); return 2; }
    if (n_text < 1 || n_tokens < 1 || n_tokens > MAX_TOKENS) { fprintf(stderr, "bench_decode_host: --text-layers >= 1, --tokens in 1..%d\n", MAX_TOKENS); return 2; }
    mms_mllama_hparams_11b(&hp);
    snprintf(path, sizeof path, "build/bench-mllama-11b-%s-t%d-v1+1.gguf", weights, n_text);
    if ((f = fopen(path, "rb")) != NULL) fclose(f);
    else if (!write_mllama_gguf(path, &hp, n_text, 1, 1, !strcmp(weights, "q4_k_m"))) { remove(path); return 1; }

    cpu = mms_backend_cpu_init();
    if (!on_cpu) {
        if (!(gpu = mms_backend_cuda_init(0))) { fprintf(stderr, "bench_decode_host: %s\n", mms_last_error()); goto done; }
        mms_cuda_mock_skip_kernels(1);   /* after the runtime's first use, which reads MMS_MOCK_SKIP_KERNELS */
    }
    memset(&lp, 0, sizeof lp);
    lp.path = path;
    lp.cpu = cpu;
    lp.gpu = gpu;
    lp.n_gpu_layers = gpu ? 1000 : 0;
    lp.vision_on_gpu = gpu != NULL;
    side = gpu ? 1120 : 560;   /* 2 x 2 tiles; on the CPU, whose kernels run, one tile */
    memset(&cp, 0, sizeof cp);
    cp.n_ctx = 2048;
    cp.n_batch = 512;
    cp.max_images = 1;
    if (!(m = mms_mllama_model_load(&lp)) || !(c = mms_mllama_context_new(m, &cp))) { fprintf(stderr, "bench_decode_host: %s\n", mms_last_error()); goto done; }
    ip = mms_mllama_model_image_params(m);
    if (!(rgb = (uint8_t *)malloc((size_t)side * side * 3))) goto done;
    for (i = 0; i < side * side * 3; i++) rgb[i] = (uint8_t)((i * 7) ^ (i >> 11));
    memset(&img, 0, sizeof img);
    if (mms_mllama_preprocess_image(&ip, rgb, side, side, 0, &img) != MMS_OK) { fprintf(stderr, "bench_decode_host: %s\n", mms_last_error()); goto done; }
    if (mms_mllama_seq_add_image(c, 0, &img) != MMS_OK) { fprintf(stderr, "bench_decode_host: %s\n", mms_last_error()); mms_mllama_image_free(&img); goto done; }
    mms_mllama_image_free(&img);
    for (i = 0; i < 8; i++) prompt[i] = i == 0 ? hp.image_token_id : (int32_t)((i * 7919) % 128000);
    memset(&b, 0, sizeof b);
    b.n_tokens = 8;
    b.tokens = prompt;
    if (mms_mllama_decode(c, &b) != MMS_OK) { fprintf(stderr, "bench_decode_host: %s\n", mms_last_error()); goto done; }
    for (i = 0; i < n_tokens; i++) {
        const int32_t tok = (int32_t)(1000 + i);
        struct mms_mllama_timings t0, t1;
        struct mms_cuda_mock_stats s;
        double sig0 = 0, key0 = 0, sig1 = 0, key1 = 0;
        int64_t start;
        b.n_tokens = 1;
        b.tokens = &tok;
        mms_mllama_get_timings(c, &t0);
        if (gpu) mms_cuda_mock_host_times(gpu, &sig0, &key0);
        mms_cuda_mock_reset_stats();
        start = mms_time_us();
        if (mms_mllama_decode(c, &b) != MMS_OK) { fprintf(stderr, "bench_decode_host: %s\n", mms_last_error()); goto done; }
        phase[TOTAL][i] = (double)(mms_time_us() - start);
        mms_mllama_get_timings(c, &t1);
        if (gpu) mms_cuda_mock_host_times(gpu, &sig1, &key1);
        mms_cuda_mock_get_stats(&s);
        phase[GRAPH][i] = (t1.graph_ms - t0.graph_ms) * 1e3;
        phase[ALLOC][i] = (t1.alloc_ms - t0.alloc_ms) * 1e3;
        phase[SIGNATURE][i] = sig1 - sig0;
        phase[KEY][i] = key1 - key0;
        phase[REST][i] = phase[TOTAL][i] - phase[GRAPH][i] - phase[ALLOC][i] - phase[SIGNATURE][i] - phase[KEY][i];
        if (s.graph_launches == 0) launches[n_plain++] = (double)(s.kernels + s.gemms);
        else graph_launches[n_replayed++] = (double)s.graph_launches;
    }
    printf("BENCH decode_host backend=%s weights=%s text_layers=%d tiles=%d tokens=%d", gpu ? "cuda-mock" : "cpu", weights, n_text,
           side == 1120 ? 4 : 1, n_tokens);
    for (i = 0; i < N_PHASES; i++) printf(" %s=%.1f", phase_names[i], median_of(phase[i], n_tokens));
    if (gpu) printf(" launches_unreplayed=%.0f (%d tokens) graph_launches_replayed=%.0f (%d tokens) unchanged_replays=%lld",
                    median_of(launches, n_plain), n_plain, median_of(graph_launches, n_replayed), n_replayed,
                    mms_cuda_mock_unchanged_replays(gpu));
    printf("\n");
    ok = 1;
done:
    free(rgb);
    mms_mllama_context_free(c);
    mms_mllama_model_free(m);
    if (gpu) mms_backend_free(gpu);
    if (cpu) mms_backend_free(cpu);
    return ok ? 0 : 1;
}
