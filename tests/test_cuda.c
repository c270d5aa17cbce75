/* The CUDA backend's own surface, built by `make cuda` with MMS_CUDA and linked with
   mmsched_cuda.cu: device and pinned buffers, copies between them, async copies and events, the
   errors (no device, bad device, out of device memory, a bad get_rows index found by a kernel).
   Without a GPU at run time the device cases print SKIP and the no-device errors are checked. The
   ops are compared with the CPU by test_backend_ops, the scheduler by test_sched, both built for CUDA.
   Built a second time as test_cuda_mock, linked with the backend built against the mock CUDA
   runtime (tests/cuda_mock.h: two devices by default), where every case runs on machines without a
   GPU and the mock's own checks are asserted too (MMS_CUDA_MOCK). */
#define MMS_CUDA
#define MMSCHED_IMPLEMENTATION
#include "../mmsched.h"
#include "test.h"
#include "mllama_load.h"
#include "ref_gguf.h"
#include "demo_on_device.h"
#ifdef MMS_CUDA_MOCK
#include "cuda_mock_api.h"
static struct mms_cuda_mock_stats mock_stats(void) {
    struct mms_cuda_mock_stats s;
    mms_cuda_mock_get_stats(&s);
    return s;
}
#endif

static int n_devices;

/* y = x * scale over n floats, as a graph of ctx (no memory yet). */
static struct mms_tensor *scale_graph(struct mms_context *ctx, int64_t n, float scale, struct mms_tensor **x, struct mms_cgraph **g) {
    struct mms_tensor *y;
    *x = mms_new_tensor_1d(ctx, MMS_TYPE_F32, n);
    y = mms_scale(ctx, *x, scale);
    *g = mms_new_graph(ctx);
    mms_build_forward_expand(*g, y);
    return y;
}


static bool need_device(const char *test) {
    (void)test;
    if (n_devices > 0) return false;
    test_skip("no CUDA device");
    return true;
}

static void test_without_a_device_errors_are_clear(void) {
    if (n_devices > 0) {
        test_capture_log();
        EXPECT_ERROR(mms_backend_cuda_init(n_devices) ? MMS_OK : mms_last_status(), MMS_ERR_INVALID_ARG, "does not exist");
        mms_log_set(NULL, NULL);
        return;
    }
    test_capture_log();
    EXPECT(mms_backend_cuda_init(0) == NULL && mms_last_status() == MMS_ERR_UNSUPPORTED, "init without a device: %s", mms_last_error());
    EXPECT(strstr(mms_last_error(), "mms_backend_cuda_init") != NULL, "the message names the call: %s", mms_last_error());
    EXPECT(mms_backend_cuda_buffer_type(0) == NULL && mms_backend_cuda_host_buffer_type() == NULL, "buffer types without a device");
    mms_log_set(NULL, NULL);
}

static void fill_pattern(float *v, int n, float base) {
    int i;
    for (i = 0; i < n; i++) v[i] = base + (float)i * 0.25f;
}

static void test_buffers_and_copies(void) {
    struct mms_context *ctx;
    struct mms_tensor *a, *b, *h;
    mms_backend_buffer_t dev_buf, host_buf;
    float in[1000], out[1000];
    if (need_device(__func__)) return;
    ctx = test_ctx(true);
    a = mms_new_tensor_1d(ctx, MMS_TYPE_F32, 1000);
    b = mms_new_tensor_1d(ctx, MMS_TYPE_F32, 1000);
    dev_buf = mms_backend_alloc_ctx_tensors_from_buft(ctx, mms_backend_cuda_buffer_type(0));
    EXPECT(dev_buf && !mms_backend_buffer_is_host(dev_buf), "device buffer: %s", mms_last_error());
    EXPECT(mms_backend_buffer_get_alignment(dev_buf) >= 256, "alignment");
    fill_pattern(in, 1000, -3.0f);
    EXPECT(mms_backend_tensor_set(a, in, 0, sizeof in) == MMS_OK, "set: %s", mms_last_error());
    EXPECT(mms_backend_tensor_copy(a, b) == MMS_OK, "device to device: %s", mms_last_error());
    EXPECT(mms_backend_tensor_get(b, out, 0, sizeof out) == MMS_OK && memcmp(in, out, sizeof in) == 0, "round trip through the device");
    EXPECT(mms_backend_tensor_memset(b, 0, 40, 80) == MMS_OK && mms_backend_tensor_get(b, out, 0, sizeof out) == MMS_OK, "memset");
    EXPECT(out[9] == in[9] && out[10] == 0.0f && out[29] == 0.0f && out[30] == in[30], "memset range");
    {   /* pinned host memory: host memory for the CPU, fast copies for the GPU */
        struct mms_context *hctx = test_ctx(true);
        h = mms_new_tensor_1d(hctx, MMS_TYPE_F32, 1000);
        host_buf = mms_backend_alloc_ctx_tensors_from_buft(hctx, mms_backend_cuda_host_buffer_type());
        EXPECT(host_buf && mms_backend_buffer_is_host(host_buf), "pinned buffer: %s", mms_last_error());
        EXPECT(mms_backend_tensor_copy(a, h) == MMS_OK && memcmp(h->data, in, sizeof in) == 0, "device to pinned host");
        mms_backend_buffer_free(host_buf);
        mms_free(hctx);
    }
    mms_backend_buffer_free(dev_buf);
    test_capture_log();
    EXPECT_ERROR(mms_backend_tensor_get(a, out, 0, sizeof out), MMS_ERR_STALE, "freed");
    EXPECT(mms_backend_buft_alloc_buffer(mms_backend_cuda_buffer_type(0), (size_t)1 << 50) == NULL && mms_last_status() == MMS_ERR_OOM,
           "a petabyte: %s", mms_last_error());
    EXPECT(strstr(mms_last_error(), "cudaMalloc") != NULL, "the message names the call: %s", mms_last_error());
    mms_log_set(NULL, NULL);
    mms_free(ctx);
}

static void test_async_copies_and_events(void) {
    mms_backend_t gpu, cpu;
    mms_backend_event_t ev;
    struct mms_context *ctx;
    struct mms_tensor *x, *y;
    mms_backend_buffer_t buf;
    struct mms_cgraph *g;
    float in[4096], out[4096];
    int i, bad = 0;
    if (need_device(__func__)) return;
    gpu = mms_backend_cuda_init(0);
    cpu = mms_backend_cpu_init();
    ctx = test_ctx(true);
    y = scale_graph(ctx, 4096, 2.0f, &x, &g);
    buf = mms_backend_alloc_ctx_tensors(ctx, gpu);
    fill_pattern(in, 4096, 1.0f);
    EXPECT(mms_backend_tensor_set_async(gpu, x, in, 0, sizeof in) == MMS_OK, "set async: %s", mms_last_error());
    EXPECT(mms_backend_graph_compute_async(gpu, g) == MMS_OK, "compute: %s", mms_last_error());
    ev = mms_backend_event_new(gpu);
    EXPECT(ev != NULL && mms_backend_event_record(ev) == MMS_OK, "event: %s", mms_last_error());
    EXPECT(mms_backend_event_wait(cpu, ev) == MMS_OK, "the CPU waits for the GPU: %s", mms_last_error());
    EXPECT(mms_backend_tensor_get_async(gpu, y, out, 0, sizeof out) == MMS_OK && mms_backend_synchronize(gpu) == MMS_OK, "get async");
    for (i = 0; i < 4096; i++) bad += out[i] != 2.0f * in[i];
    EXPECT(bad == 0, "%d wrong values", bad);
    mms_backend_event_free(ev);
    mms_backend_buffer_free(buf);
    mms_free(ctx);
    mms_backend_free(cpu);
    mms_backend_free(gpu);
}

static void test_bad_index_found_by_a_kernel(void) {
    mms_backend_t gpu;
    struct mms_context *ctx;
    struct mms_tensor *a, *idx, *out;
    mms_backend_buffer_t buf;
    struct mms_cgraph *g;
    int32_t rows[3] = { 0, 5, 1 };
    if (need_device(__func__)) return;
    gpu = mms_backend_cuda_init(0);
    ctx = test_ctx(true);
    a = mms_new_tensor_2d(ctx, MMS_TYPE_F32, 8, 4);
    idx = mms_new_tensor_1d(ctx, MMS_TYPE_I32, 3);
    out = mms_set_name(mms_get_rows(ctx, a, idx), "embeddings");
    g = mms_new_graph(ctx);
    mms_build_forward_expand(g, out);
    buf = mms_backend_alloc_ctx_tensors(ctx, gpu);
    mms_backend_tensor_set(idx, rows, 0, sizeof rows);
    test_capture_log();
    EXPECT_ERROR(mms_backend_graph_compute(gpu, g), MMS_ERR_INVALID_ARG, "GET_ROWS", "'embeddings'", "index 5", "0..3");
    rows[1] = 3;
    mms_backend_tensor_set(idx, rows, 0, sizeof rows);
    EXPECT(mms_backend_graph_compute(gpu, g) == MMS_OK, "a good index after a bad one: %s", mms_last_error());
    mms_log_set(NULL, NULL);
    mms_backend_buffer_free(buf);
    mms_free(ctx);
    mms_backend_free(gpu);
}

/* A bad index in the graph computed first is reported by name at the synchronize, even when
   another graph (with get_rows of its own) was queued in between. */
static void test_bad_index_named_at_synchronize(void) {
    mms_backend_t gpu;
    struct mms_context *ctx;
    struct mms_tensor *a, *idx1, *idx2;
    mms_backend_buffer_t buf;
    struct mms_cgraph *g1, *g2;
    int32_t bad[2] = { 1, 9 }, good[2] = { 0, 1 };
    if (need_device(__func__)) return;
    gpu = mms_backend_cuda_init(0);
    ctx = test_ctx(true);
    a = mms_new_tensor_2d(ctx, MMS_TYPE_F32, 8, 4);
    idx1 = mms_new_tensor_1d(ctx, MMS_TYPE_I32, 2);
    idx2 = mms_new_tensor_1d(ctx, MMS_TYPE_I32, 2);
    g1 = mms_new_graph(ctx);
    mms_build_forward_expand(g1, mms_set_name(mms_get_rows(ctx, a, idx1), "first_rows"));
    g2 = mms_new_graph(ctx);
    mms_build_forward_expand(g2, mms_set_name(mms_get_rows(ctx, a, idx2), "second_rows"));
    buf = mms_backend_alloc_ctx_tensors(ctx, gpu);
    mms_backend_tensor_set(idx1, bad, 0, sizeof bad);
    mms_backend_tensor_set(idx2, good, 0, sizeof good);
    test_capture_log();
    EXPECT(mms_backend_graph_compute_async(gpu, g1) == MMS_OK && mms_backend_graph_compute_async(gpu, g2) == MMS_OK, "queue: %s", mms_last_error());
    EXPECT_ERROR(mms_backend_synchronize(gpu), MMS_ERR_INVALID_ARG, "'first_rows'", "index 9");
    EXPECT(strstr(mms_last_error(), "second_rows") == NULL, "the other graph's node is named: %s", mms_last_error());
    EXPECT(mms_backend_synchronize(gpu) == MMS_OK, "the fault is reported once: %s", mms_last_error());
    mms_log_set(NULL, NULL);
    mms_backend_buffer_free(buf);
    mms_free(ctx);
    mms_backend_free(gpu);
}

/* A shared mask row out of range is found by the attention kernel and reported by name. */
static void test_bad_mask_row_found_by_a_kernel(void) {
    mms_backend_t gpu;
    struct mms_context *ctx;
    struct mms_tensor *q, *k, *v, *mask, *rows;
    mms_backend_buffer_t buf;
    struct mms_cgraph *g;
    int32_t r[4] = { 0, 1, 3, 0 };
    if (need_device(__func__)) return;
    gpu = mms_backend_cuda_init(0);
    ctx = test_ctx(true);
    q = mms_new_tensor_3d(ctx, MMS_TYPE_F32, 64, 4, 2);
    k = mms_new_tensor_3d(ctx, MMS_TYPE_F16, 64, 16, 2);
    v = mms_new_tensor_3d(ctx, MMS_TYPE_F16, 64, 16, 2);
    mask = mms_new_tensor_2d(ctx, MMS_TYPE_F32, 16, 2);
    rows = mms_new_tensor_1d(ctx, MMS_TYPE_I32, 4);
    g = mms_new_graph(ctx);
    mms_build_forward_expand(g, mms_set_name(mms_flash_attn_ext_mask_rows(ctx, q, k, v, mask, rows, 0.125f, 0.0f, 0.0f), "vision_attn"));
    buf = mms_backend_alloc_ctx_tensors(ctx, gpu);
    mms_backend_buffer_clear(buf, 0);
    mms_backend_tensor_set(rows, r, 0, sizeof r);
    test_capture_log();
    EXPECT_ERROR(mms_backend_graph_compute(gpu, g), MMS_ERR_INVALID_ARG, "FLASH_ATTN_EXT 'vision_attn'", "mask row index 3", "0..1");
    mms_log_set(NULL, NULL);
    mms_backend_buffer_free(buf);
    mms_free(ctx);
    mms_backend_free(gpu);
}

/* A decode-size product over 70000 batches: more blocks in y or z than one launch takes. */
static void test_large_batch_product(void) {
    const int64_t K = 32, batch = 70000;
    mms_backend_t gpu, cpu;
    struct mms_context *ctx;
    struct mms_tensor *w, *x, *y;
    mms_backend_buffer_t buf;
    struct mms_cgraph *g;
    float *xs, *ys, wf[32];
    unsigned char wq[34];
    int64_t i, bad = 0;
    if (need_device(__func__)) return;
    gpu = mms_backend_cuda_init(0);
    cpu = mms_backend_cpu_init();
    ctx = test_ctx(true);
    w = mms_new_tensor_2d(ctx, MMS_TYPE_Q8_0, K, 1);
    x = mms_new_tensor_3d(ctx, MMS_TYPE_F32, K, 1, batch);
    y = mms_mul_mat(ctx, w, x);
    g = mms_new_graph(ctx);
    mms_build_forward_expand(g, y);
    buf = mms_backend_alloc_ctx_tensors(ctx, gpu);
    xs = (float *)malloc(sizeof *xs * (size_t)(K * batch));
    ys = (float *)malloc(sizeof *ys * (size_t)batch);
    /* integers with 127 the largest in every block: the 8-bit steps are 1, every product and sum exact */
    for (i = 0; i < K; i++) wf[i] = i == 0 ? 127.0f : (float)(i % 7) - 3.0f;
    for (i = 0; i < K * batch; i++) xs[i] = i % K == 0 ? 127.0f : (float)((i * 37) % 11) - 5.0f;
    mms_get_type_traits(MMS_TYPE_Q8_0)->from_float(wf, wq, K);
    mms_backend_tensor_set(w, wq, 0, sizeof wq);
    mms_backend_tensor_set(x, xs, 0, sizeof *xs * (size_t)(K * batch));
#ifdef MMS_CUDA_MOCK
    mms_cuda_mock_skip_kernels(1);        /* 70000 blocks of emulated threads take too long: launches only */
#endif
    EXPECT(mms_backend_graph_compute(gpu, g) == MMS_OK, "compute: %s", mms_last_error());
#ifdef MMS_CUDA_MOCK
    mms_cuda_mock_skip_kernels(0);
#else
    mms_backend_tensor_get(y, ys, 0, sizeof *ys * (size_t)batch);
    for (i = 0; i < batch; i++) {
        float want = 0.0f;
        int64_t k;
        for (k = 0; k < K; k++) want += wf[k] * xs[i * K + k];
        bad += ys[i] != want;
    }
    EXPECT(bad == 0, "%lld of %lld batches wrong", (long long)bad, (long long)batch);
#endif
    (void)bad;
    free(xs);
    free(ys);
    mms_backend_buffer_free(buf);
    mms_free(ctx);
    mms_backend_free(cpu);
    mms_backend_free(gpu);
}

/* The CUDA graph cache replays only the graph it captured: y = cont(view of x) computed three
   times is captured and replayed (the mock counts the replays), then the same graph with one field
   of the view changed in place (its row stride, its address, its shape: 4x4 to 8x2, y's with it;
   each computed three times, so each is captured and replayed in turn) gives its own elements of
   x, never the cached graph's. The stride is not part of the cache's key: that case is told apart
   by the whole signature. Expected values come from x's, i at element i. */
static bool replay_elements_ok(struct mms_tensor *y, int64_t width, int64_t row_step, int64_t first) {
    float out[16];
    int64_t i;
    mms_backend_tensor_get(y, out, 0, sizeof out);
    for (i = 0; i < 16; i++)
        if (out[i] != (float)(first + i / width * row_step * 8 + i % width)) return false;
    return true;
}
static void test_graph_replay_only_of_the_same_graph(void) {
    static const float unwritten[16] = { -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1 };
    mms_backend_t gpu;
    struct mms_context *ctx;
    struct mms_tensor *x, *v, *y;
    mms_backend_buffer_t buf;
    struct mms_cgraph *g;
    float xs[64];
    int i, k, n_cases_ok = 0;
#ifdef MMS_CUDA_MOCK
    long replays;
#endif
    if (need_device(__func__)) return;
    gpu = mms_backend_cuda_init(0);
    ctx = test_ctx(true);
    x = mms_new_tensor_2d(ctx, MMS_TYPE_F32, 8, 8);
    v = mms_view_2d(ctx, x, 4, 4, x->nb[1], 0);
    y = mms_cont(ctx, v);
    g = mms_new_graph(ctx);
    mms_build_forward_expand(g, y);
    buf = mms_backend_alloc_ctx_tensors(ctx, gpu);
    for (i = 0; i < 64; i++) xs[i] = (float)i;
    mms_backend_tensor_set(x, xs, 0, sizeof xs);
#ifdef MMS_CUDA_MOCK
    replays = mock_stats().graph_launches;
#endif
    for (k = 0; k < 4; k++) {                  /* the graph as built, then one field changed */
        const int64_t step = k == 1 ? 2 : 1, first = k == 2 ? 4 : 0, width = k == 3 ? 8 : 4;
        v->nb[1] = (size_t)step * x->nb[1];
        v->data = (char *)x->data + first * (int64_t)sizeof(float);
        v->view_offs = (size_t)first * sizeof(float);
        v->ne[0] = y->ne[0] = width;
        v->ne[1] = y->ne[1] = 16 / width;
        y->nb[1] = (size_t)width * sizeof(float);
        y->nb[2] = y->nb[3] = 16 * sizeof(float);
        for (i = 0; i < 3; i++) {
            bool ok;
            mms_backend_tensor_set(y, unwritten, 0, sizeof unwritten);
            ok = mms_backend_graph_compute(gpu, g) == MMS_OK && replay_elements_ok(y, width, step, first);
            EXPECT(ok, "case %d (0 as built, 1 stride, 2 address, 3 shape), computation %d: not its own elements (%s)", k, i, mms_last_error());
            n_cases_ok += ok;
        }
    }
#ifdef MMS_CUDA_MOCK
    replays = mock_stats().graph_launches - replays;
    EXPECT(replays >= 8, "%ld CUDA graph launches in 12 computations of 4 graphs: the cache was not used", replays);
#endif
    printf("    graph cache: %d/12 computations of 4 graphs differing in one field gave their own elements\n", n_cases_ok);
    mms_backend_buffer_free(buf);
    mms_free(ctx);
    mms_backend_free(gpu);
}

#ifdef MMS_CUDA_MOCK
/* A failed call's error is its own: the next, unrelated launch does not report it again. */
static void test_a_failure_is_reported_once(void) {
    mms_backend_t gpu = mms_backend_cuda_init(0);
    struct mms_context *ctx = test_ctx(true);
    struct mms_tensor *x = mms_new_tensor_1d(ctx, MMS_TYPE_F32, 64), *y = mms_scale(ctx, x, 2.0f);
    struct mms_cgraph *g = mms_new_graph(ctx);
    mms_backend_buffer_t buf;
    float in[64];
    mms_build_forward_expand(g, y);
    buf = mms_backend_alloc_ctx_tensors(ctx, gpu);
    fill_pattern(in, 64, 1.0f);
    test_capture_log();
    mms_cuda_mock_fail_next("cudaMemcpy");
    EXPECT_ERROR(mms_backend_tensor_set(x, in, 0, sizeof in), MMS_ERR_BACKEND, "cudaMemcpy");
    EXPECT(mms_backend_graph_compute(gpu, g) == MMS_OK, "the next compute: %s", mms_last_error());
    mms_log_set(NULL, NULL);
    mms_backend_buffer_free(buf);
    mms_free(ctx);
    mms_backend_free(gpu);
}
#endif

/* A copy between two tensors of GPU 1 while GPU 0 is the current device (its buffer was made
   last): the copy runs on GPU 1 (whose legacy stream waits for GPU 1's backends). */
static void test_copy_on_another_device(void) {
    struct mms_context *c1, *c0;
    struct mms_tensor *a, *b;
    mms_backend_buffer_t b1, b0;
    float in[256], out[256];
    if (n_devices < 2) { printf("SKIP %s: %d CUDA device(s)\n", __func__, n_devices); return; }
    c1 = test_ctx(true);
    c0 = test_ctx(true);
    a = mms_new_tensor_1d(c1, MMS_TYPE_F32, 256);
    b = mms_new_tensor_1d(c1, MMS_TYPE_F32, 256);
    mms_new_tensor_1d(c0, MMS_TYPE_F32, 16);
    b1 = mms_backend_alloc_ctx_tensors_from_buft(c1, mms_backend_cuda_buffer_type(1));
    b0 = mms_backend_alloc_ctx_tensors_from_buft(c0, mms_backend_cuda_buffer_type(0));
    fill_pattern(in, 256, -2.0f);
    EXPECT(mms_backend_tensor_set(a, in, 0, sizeof in) == MMS_OK, "set: %s", mms_last_error());
    mms_backend_buffer_clear(b0, 0);      /* device 0 current again */
    EXPECT(mms_backend_tensor_copy(a, b) == MMS_OK && mms_backend_tensor_get(b, out, 0, sizeof out) == MMS_OK &&
           memcmp(in, out, sizeof in) == 0, "copy on GPU 1: %s", mms_last_error());
#ifdef MMS_CUDA_MOCK
    EXPECT(mock_stats().wrong_device == 0, "%ld copies ran with another device current", mock_stats().wrong_device);
#endif
    mms_backend_buffer_free(b1);
    mms_backend_buffer_free(b0);
    mms_free(c1);
    mms_free(c0);
}

/* What one decode step launches, and how often the host waits for the device (synchronous copies,
   stream/event synchronizes, async reads into pageable memory; from the second step on), counted
   by the mock runtime (on a GPU: not counted). */
struct launch_count { long kernels, gemms, graphs, sync_copies, syncs, pageable_reads, tokens; };
#ifdef MMS_CUDA_MOCK
static struct mms_cuda_mock_stats token_start;
static void count_token(int after, void *user) {
    struct launch_count *c = (struct launch_count *)user;
    struct mms_cuda_mock_stats now = mock_stats();
    if (!after) { token_start = now; return; }
    c->kernels += now.kernels - token_start.kernels;
    c->gemms += now.gemms - token_start.gemms;
    c->graphs += now.graph_launches - token_start.graph_launches;
    if (c->tokens > 0) {                  /* the first step after the prompt also grows the GPU's work areas */
        c->sync_copies += now.sync_copies - token_start.sync_copies;
        c->syncs += now.syncs - token_start.syncs;
        c->pageable_reads += now.pageable_reads - token_start.pageable_reads;
    }
    c->tokens++;
}
#endif

/* The demo model with every text layer, the head and the vision tower on the GPU: its greedy
   tokens equal the CPU's. On the mock runtime, one case (the kernels are emulated) and the
   launches per decoded token. */
static void test_demo_model_on_the_gpu(void) {
    mms_backend_t gpu, cpu;
    struct launch_count count;
    int n_cases, n_same;
    int64_t t0 = mms_time_us();
    if (need_device(__func__)) return;
    gpu = mms_backend_cuda_init(0);
    cpu = mms_backend_cpu_init();
    memset(&count, 0, sizeof count);
#ifdef MMS_CUDA_MOCK
    n_cases = 1;
    n_same = demo_compare(cpu, gpu, n_cases, 8, count_token, &count);
    EXPECT(count.tokens > 0, "no decode step counted");
    if (count.tokens > 0) {
        const double nt = (double)count.tokens;
        printf("    decode: %.1f kernel launches, %.1f cuBLAS calls, %.1f CUDA graph launches per token (mean of %ld)\n",
               (double)count.kernels / nt, (double)count.gemms / nt, (double)count.graphs / nt, count.tokens);
        /* The inputs go on the GPU's stream, the logits come back once, then one synchronize.
           Before: 7 synchronous copies (6 inputs the scheduler copied with cudaMemcpy, the logits)
           and 1 synchronize per token; now 0 and 1 (the logits' cudaMemcpyAsync into pageable
           memory returns when done too: the same wait). */
        if (count.tokens > 1) {
            const double nw = (double)(count.tokens - 1);
            printf("    decode: %.1f synchronous copies, %.1f stream/event synchronizations, %.1f async reads into pageable memory per token\n",
                   (double)count.sync_copies / nw, (double)count.syncs / nw, (double)count.pageable_reads / nw);
            EXPECT(count.sync_copies == 0, "%ld synchronous copies in %ld decode steps", count.sync_copies, count.tokens - 1);
            EXPECT(count.syncs <= count.tokens - 1, "%ld synchronizations in %ld decode steps", count.syncs, count.tokens - 1);
        }
    }
#else
    n_cases = 3;
    n_same = demo_compare(cpu, gpu, n_cases, 12, NULL, NULL);
#endif
    printf("    demo model on %s: %d/%d greedy continuations equal the CPU's (%.1f s)\n", mms_backend_name(gpu), n_same, n_cases,
           (double)(mms_time_us() - t0) / 1e6);
    mms_backend_free(cpu);
    mms_backend_free(gpu);
}

#ifdef MMS_CUDA_MOCK
/* Decode with the graph computed again while its shape holds (its split graphs replayed as
   unchanged, without a signature) against decode that builds and allocates every graph anew
   (rebuild_graphs): the same logits, bit for bit, token after token, across a new sequence
   without a picture (another graph) and a KV window growing past 256 positions (another n_kv).
   The reference is the rebuilt path, which never replays a graph marked unchanged; each context
   has its own device backend, so no CUDA graph is shared between them. */
static void test_decode_reuse_same_logits(void) {
    struct mms_gguf *ref;
    mms_backend_t cpu, gpu[2] = { NULL, NULL };
    struct mms_mllama_model *m[2] = { NULL, NULL };
    struct mms_mllama_context *ctx[2] = { NULL, NULL };
    struct mms_mllama_context_params cp;
    struct mms_mllama_image img;
    int32_t prompt[96], text[250];
    int n_prompt = 0, i, t, phase, n_vocab = 0, n_steps = 0, n_equal = 0;
    long long unchanged[2];
    if (need_device(__func__)) return;
    ref = mms_gguf_open(test_src_path("fixtures/demo/demo-ref.gguf"));
    EXPECT(ref != NULL, "fixture: %s", mms_last_error());
    if (!ref) return;
    cpu = mms_backend_cpu_init();
    memset(&cp, 0, sizeof cp);
    cp.n_ctx = 384;
    cp.n_batch = 256;
    cp.max_images = 1;
    for (i = 0; i < 2; i++) {
        gpu[i] = mms_backend_cuda_init(0);
        m[i] = test_load_mllama(cpu, test_src_path("../models/mllama-demo.gguf"), NULL, gpu[i], 1000, true);
        cp.rebuild_graphs = i == 1;
        ctx[i] = m[i] ? mms_mllama_context_new(m[i], &cp) : NULL;
        EXPECT(ctx[i] != NULL, "context %d: %s", i, mms_last_error());
    }
    memset(&img, 0, sizeof img);
    if (!ctx[0] || !ctx[1] || !demo_case(ref, 0, m[0], &img, prompt, &n_prompt)) { EXPECT(0, "setup: %s", mms_last_error()); goto done; }
    n_vocab = mms_mllama_model_get_hparams(m[0])->n_vocab;
    for (i = 0; i < 250; i++) text[i] = (int32_t)(1 + (i * 37) % 200);
    for (phase = 0; phase < 2; phase++) {      /* 0: the picture and its prompt, 8 tokens; 1: text only, 250 + 12 tokens */
        for (i = 0; i < 2; i++) {
            enum mms_status st;
            mms_mllama_seq_clear(ctx[i], 0);
            st = phase == 0 ? mms_mllama_seq_add_image(ctx[i], 0, &img) : MMS_OK;
            if (st == MMS_OK) st = phase == 0 ? test_decode(ctx[i], prompt, n_prompt, NULL) : test_decode(ctx[i], text, 250, NULL);
            EXPECT(st == MMS_OK, "phase %d, context %d, prompt: %s", phase, i, mms_last_error());
            if (st != MMS_OK) goto done;
        }
        for (t = 0; t < (phase == 0 ? 8 : 12); t++) {
            const int32_t tok = (int32_t)(3 + t * 11);
            const float *l[2];
            for (i = 0; i < 2; i++) {
                const enum mms_status st = test_decode(ctx[i], &tok, 1, NULL);
                EXPECT(st == MMS_OK, "phase %d, token %d, context %d: %s", phase, t, i, mms_last_error());
                if (st != MMS_OK) goto done;
                l[i] = mms_mllama_get_logits(ctx[i], 0);
            }
            n_steps++;
            if (memcmp(l[0], l[1], sizeof(float) * (size_t)n_vocab) == 0) n_equal++;
            else EXPECT(0, "phase %d, token %d (position %d): the reused graph's logits differ from the rebuilt graph's", phase, t,
                        mms_mllama_seq_get_n_past(ctx[0], 0) - 1);
        }
    }
    for (i = 0; i < 2; i++) unchanged[i] = mms_cuda_mock_unchanged_replays(gpu[i]);
    EXPECT(unchanged[0] >= 10, "%lld graphs replayed as unchanged in 20 decode steps with reuse: the fast path was not taken", unchanged[0]);
    EXPECT(unchanged[1] == 0, "%lld graphs replayed as unchanged with rebuild_graphs", unchanged[1]);
    printf("    decode with reuse vs rebuild_graphs: %d/%d steps with equal logits; %lld graphs replayed as unchanged\n", n_equal, n_steps,
           unchanged[0]);
done:
    mms_mllama_image_free(&img);
    for (i = 0; i < 2; i++) { mms_mllama_context_free(ctx[i]); mms_mllama_model_free(m[i]); if (gpu[i]) mms_backend_free(gpu[i]); }
    mms_backend_free(cpu);
    mms_gguf_close(ref);
}

/* A scheduler's graph allocated again (mms__sched_alloc_again) is replayed as unchanged; after an
   op parameter changes, the graph allocated anew gives the new parameter's result, not the
   replayed old one; and a graph computed straight on the backend (never marked unchanged) with a
   parameter changed in place is not replayed from its stale CUDA graph. Expected values: x times
   the scale, computed here. */
static void test_changed_graph_not_replayed(void) {
    mms_backend_t gpu;
    mms_backend_sched_t s;
    struct mms_context *ctx;
    struct mms_tensor *x, *y;
    struct mms_cgraph *g;
    mms_backend_buffer_t buf;
    float xs[16], ys[16];
    long long before;
    int i, k, bad;
    if (need_device(__func__)) return;
    gpu = mms_backend_cuda_init(0);
    ctx = test_ctx(true);
    y = scale_graph(ctx, 16, 2.0f, &x, &g);
    mms_set_input(x);
    s = mms_backend_sched_new(&gpu, NULL, 1, false, false);
    for (i = 0; i < 16; i++) xs[i] = (float)(i - 5);
    before = mms_cuda_mock_unchanged_replays(gpu);
    for (k = 0; k < 8; k++) {                  /* 0-3: scale 2; 4-7: scale 3 (set at 4, allocated anew) */
        const float scale = k < 4 ? 2.0f : 3.0f;
        enum mms_status st;
        if (k == 4) memcpy(y->op_params, &scale, sizeof scale);
        st = k == 0 || k == 4 ? mms_backend_sched_alloc_graph(s, g) : mms__sched_alloc_again(s, g);
        if (st == MMS_OK) st = mms_backend_tensor_set(x, xs, 0, sizeof xs);
        if (st == MMS_OK) st = mms_backend_sched_graph_compute(s, g);
        if (st == MMS_OK) st = mms_backend_tensor_get(y, ys, 0, sizeof ys);
        EXPECT(st == MMS_OK, "computation %d: %s", k, mms_last_error());
        for (i = 0, bad = 0; st == MMS_OK && i < 16; i++) bad += ys[i] != xs[i] * scale;
        EXPECT(st != MMS_OK || bad == 0, "computation %d (scale %g): %d of 16 values are not x * scale", k, scale, bad);
    }
    EXPECT(mms_cuda_mock_unchanged_replays(gpu) - before >= 2, "%lld graphs replayed as unchanged in 6 allocations again",
           mms_cuda_mock_unchanged_replays(gpu) - before);
    mms_backend_sched_free(s);
    mms_free(ctx);
    /* straight on the backend: captured after two computations, then the parameter changed in place */
    ctx = test_ctx(true);
    y = scale_graph(ctx, 16, 3.0f, &x, &g);
    buf = mms_backend_alloc_ctx_tensors(ctx, gpu);
    mms_backend_tensor_set(x, xs, 0, sizeof xs);
    for (k = 0; k < 6; k++) {
        const float scale = k < 3 ? 3.0f : 5.0f;
        enum mms_status st;
        if (k == 3) memcpy(y->op_params, &scale, sizeof scale);
        st = mms_backend_graph_compute(gpu, g);
        if (st == MMS_OK) st = mms_backend_tensor_get(y, ys, 0, sizeof ys);
        for (i = 0, bad = 0; st == MMS_OK && i < 16; i++) bad += ys[i] != xs[i] * scale;
        EXPECT(st == MMS_OK && bad == 0, "backend computation %d (scale %g): %d of 16 values are not x * scale (%s)", k, scale, bad,
               st == MMS_OK ? "" : mms_last_error());
    }
    mms_backend_buffer_free(buf);
    mms_free(ctx);
    mms_backend_free(gpu);
}
/* A weight placed anew at another address between two allocations again of the same graph (its
   caller wrote a new copy elsewhere): the split graph is not marked unchanged, so the product
   reads the new copy, not the address a captured CUDA graph holds. Expected: x * w, computed here. */
static void test_moved_leaf_not_replayed(void) {
    mms_backend_t gpu;
    mms_backend_sched_t s;
    struct mms_context *ctx, *wctx;
    struct mms_tensor *x, *w, *y;
    struct mms_cgraph *g;
    mms_backend_buffer_t a, b;
    float xs[16], ws[16], ys[16];
    long long before;
    int i, k, bad;
    if (need_device(__func__)) return;
    gpu = mms_backend_cuda_init(0);
    wctx = test_ctx(true);
    w = mms_new_tensor_1d(wctx, MMS_TYPE_F32, 16);
    a = mms_backend_alloc_ctx_tensors(wctx, gpu);
    b = mms_backend_alloc_buffer(gpu, 4096);
    ctx = test_ctx(true);
    x = mms_new_tensor_1d(ctx, MMS_TYPE_F32, 16);
    mms_set_input(x);
    y = mms_mul(ctx, x, w);
    g = mms_new_graph(ctx);
    mms_build_forward_expand(g, y);
    s = mms_backend_sched_new(&gpu, NULL, 1, false, false);
    for (i = 0; i < 16; i++) { xs[i] = (float)(i - 5); ws[i] = 2.0f; }
    mms_backend_tensor_set(w, ws, 0, sizeof ws);
    before = mms_cuda_mock_unchanged_replays(gpu);
    for (k = 0; k < 8; k++) {                  /* 0-3: w in buffer a, all 2; 4-7: w in buffer b, all 3 */
        enum mms_status st = MMS_OK;
        if (k == 4) {                          /* a new placement of the same tensor (a still holds the old copy) */
            memset(&w->placement, 0, sizeof w->placement);
            w->data = NULL;
            w->buffer = NULL;
            for (i = 0; i < 16; i++) ws[i] = 3.0f;
            st = mms_backend_tensor_alloc(b, w, mms_backend_buffer_get_base(b));
            if (st == MMS_OK) st = mms_backend_tensor_set(w, ws, 0, sizeof ws);
        }
        if (st == MMS_OK) st = k == 0 ? mms_backend_sched_alloc_graph(s, g) : mms__sched_alloc_again(s, g);
        if (st == MMS_OK) st = mms_backend_tensor_set(x, xs, 0, sizeof xs);
        if (st == MMS_OK) st = mms_backend_sched_graph_compute(s, g);
        if (st == MMS_OK) st = mms_backend_tensor_get(y, ys, 0, sizeof ys);
        EXPECT(st == MMS_OK, "computation %d: %s", k, mms_last_error());
        for (i = 0, bad = 0; st == MMS_OK && i < 16; i++) bad += ys[i] != xs[i] * ws[i];
        EXPECT(st != MMS_OK || bad == 0, "computation %d (w %g): %d of 16 values are not x * w", k, ws[0], bad);
    }
    EXPECT(mms_cuda_mock_unchanged_replays(gpu) - before >= 2, "%lld graphs replayed as unchanged in 7 allocations again",
           mms_cuda_mock_unchanged_replays(gpu) - before);
    mms_backend_sched_free(s);
    mms_backend_buffer_free(b);
    mms_backend_buffer_free(a);
    mms_free(ctx);
    mms_free(wctx);
    mms_backend_free(gpu);
}
#endif

/* Several GPUs are several backends: a tensor copied from GPU 0 to GPU 1 asynchronously. */
static void test_two_devices(void) {
    mms_backend_t g0, g1;
    struct mms_context *c0, *c1;
    struct mms_tensor *a, *b;
    mms_backend_buffer_t b0, b1;
    float in[512], out[512];
    if (n_devices < 2) { test_skip("%d CUDA device(s), two needed", n_devices); return; }
    g0 = mms_backend_cuda_init(0);
    g1 = mms_backend_cuda_init(1);
    c0 = test_ctx(true);
    c1 = test_ctx(true);
    a = mms_new_tensor_1d(c0, MMS_TYPE_F32, 512);
    b = mms_new_tensor_1d(c1, MMS_TYPE_F32, 512);
    b0 = mms_backend_alloc_ctx_tensors(c0, g0);
    b1 = mms_backend_alloc_ctx_tensors(c1, g1);
    fill_pattern(in, 512, 7.0f);
    mms_backend_tensor_set(a, in, 0, sizeof in);
    EXPECT(mms_backend_tensor_copy_async(g0, g1, a, b) == MMS_OK && mms_backend_synchronize(g1) == MMS_OK, "peer copy: %s", mms_last_error());
    EXPECT(mms_backend_tensor_get(b, out, 0, sizeof out) == MMS_OK && memcmp(in, out, sizeof in) == 0, "peer copy data");
    memset(out, 0, sizeof out);
    EXPECT(mms_backend_tensor_copy(b, a) == MMS_OK && mms_backend_tensor_get(a, out, 0, sizeof out) == MMS_OK &&
           memcmp(in, out, sizeof in) == 0, "buffer copy between GPUs: %s", mms_last_error());
#ifdef MMS_CUDA_MOCK
    EXPECT(mock_stats().staged_peer_copies == 0, "%ld copies between GPUs without peer access", mock_stats().staged_peer_copies);
#endif
    mms_backend_buffer_free(b0);
    mms_backend_buffer_free(b1);
    mms_free(c0);
    mms_free(c1);
    mms_backend_free(g0);
    mms_backend_free(g1);
}

/* More GPUs than the backend's per-device tables hold (CU_MAX_DEVICES, 16 by default): all are
   counted, and those past the tables are refused with an error that says so, never used as
   another device nor dropped from the count silently. On the mock runtime (it can have 18). */
static void test_devices_past_the_tables(void) {
#ifdef MMS_CUDA_MOCK
    const int before = mms_cuda_mock_set_devices(18);
    mms_backend_t last, past;
    EXPECT(mms_backend_cuda_get_device_count() == 18, "%d devices counted of 18", mms_backend_cuda_get_device_count());
    last = mms_backend_cuda_init(15);
    EXPECT(last != NULL, "device 15: %s", mms_last_error());
    past = mms_backend_cuda_init(16);
    EXPECT(!past && mms_last_status() == MMS_ERR_UNSUPPORTED && strstr(mms_last_error(), "device 16") &&
           strstr(mms_last_error(), "0..15 of the 18 present"), "device 16: %s", past ? "made" : mms_last_error());
    EXPECT(!mms_backend_cuda_buffer_type(17) && strstr(mms_last_error(), "device 17"), "buffer type of device 17: %s", mms_last_error());
    if (last) mms_backend_free(last);
    if (past) mms_backend_free(past);
    mms_cuda_mock_set_devices(before);
#else
    test_skip("needs the mock runtime's device count");
#endif
}

int main(void) {
    test_capture_log();
    n_devices = mms_backend_cuda_get_device_count();
    mms_log_set(NULL, NULL);
    printf("%d CUDA device(s)%s%s\n", n_devices, n_devices ? "" : ": ", n_devices ? "" : mms_last_error());
    RUN(test_without_a_device_errors_are_clear);
    RUN(test_buffers_and_copies);
    RUN(test_async_copies_and_events);
    RUN(test_bad_index_found_by_a_kernel);
    RUN(test_bad_index_named_at_synchronize);
    RUN(test_bad_mask_row_found_by_a_kernel);
    RUN(test_large_batch_product);
    RUN(test_graph_replay_only_of_the_same_graph);
#ifdef MMS_CUDA_MOCK
    RUN(test_a_failure_is_reported_once);
#endif
    RUN(test_copy_on_another_device);
    RUN(test_demo_model_on_the_gpu);
#ifdef MMS_CUDA_MOCK
    RUN(test_decode_reuse_same_logits);
    RUN(test_changed_graph_not_replayed);
    RUN(test_moved_leaf_not_replayed);
#endif
    RUN(test_two_devices);
    RUN(test_devices_past_the_tables);
    return test_summary();
}
