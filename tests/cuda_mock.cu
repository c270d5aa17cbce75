// cuda_mock.cu - the CUDA backend, mmsched_cuda.cu as it is, built against the mock CUDA runtime
// and cuBLAS of tests/cuda_mock.h: its launches run the kernels' functors with the host executor
// of tests/cuda_host.h (or are recorded into a CUDA graph being captured), its cuBLAS calls run
// cuBLAS's definition. `make cuda` builds it as build/cuda/mock/mmsched_cuda_mock.o and links the
// CUDA tests (test_cuda, test_backend_ops, test_sched) with it a second time, as *_mock: the
// backend's use of the runtime (devices, copies, errors, faults, graphs) is tested without a GPU.
#include "cuda_mock.h"
#define MMS_CUDA_MOCK
#include "../mmsched_cuda.cu"
#include "cuda_host.h"

// A kernel that fails while it runs (a deadlock, a launch the host executor refuses) is an error
// the runtime reports at the next call that reads it, as a GPU's launch failure.
static void mock_kernel_ran(enum mms_status st) {
    if (st != MMS_OK) mock_fail(cudaErrorLaunchFailure, mms_last_error());
}

template <typename F> struct mock_each_run {
    F f;
    int64_t n;
    void operator()() const {
        if (mock.skip_kernels) return;
        for (int64_t i = 0; i < n; i++) f(i);
    }
};
template <typename F> static void cu_mock_each(const void *kernel, const F &f, int64_t n, unsigned blocks, int threads, cudaStream_t s) {
    if (!mock_launch_ok(kernel, blocks, 1, 1, threads, 0, s)) return;
    const mock_each_run<F> run = { f, n };
    mock_submit((mock_stream *)s, run);
}

template <typename B> struct mock_blocks_run {
    B body;
    cu_grid g;
    cu_launch l;
    int threads;
    size_t smem;
    void operator()() const {
        if (mock.skip_kernels) return;
        mock_kernel_ran(host_run_launch(body, g, l, threads, smem, "kernel"));
    }
};
template <typename B> static void cu_mock_blocks(const void *kernel, const B &body, cu_grid g, const cu_launch &l, int threads, size_t smem, cudaStream_t s) {
    if (!mock_launch_ok(kernel, l.x, l.y, l.z, threads, smem, s)) return;
    const mock_blocks_run<B> run = { body, g, l, threads, smem };
    mock_submit((mock_stream *)s, run);
}

struct mock_gemm_run {
    cu_gemm g;
    void operator()() const {
        if (!mock.skip_kernels) host_gemm(g);
    }
};
static bool mock_type_of(cudaDataType t, enum mms_type *out) {
    switch (t) {
        case CUDA_R_32F:  *out = MMS_TYPE_F32; return true;
        case CUDA_R_16F:  *out = MMS_TYPE_F16; return true;
        case CUDA_R_16BF: *out = MMS_TYPE_BF16; return true;
        default:          return false;
    }
}
// The one form the backend uses: C (f32) = alpha A^T B + beta C, alpha 1, beta 0, f32 compute.
static cublasStatus_t mock_cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                                     const void *alpha, const void *A, cudaDataType at, int lda, long long sa,
                                                     const void *B, cudaDataType bt, int ldb, long long sb, const void *beta,
                                                     void *C, cudaDataType ct, int ldc, long long sc, int batch,
                                                     cublasComputeType_t compute, cublasGemmAlgo_t algo) {
    mock_cublas *c = (mock_cublas *)h;
    cu_gemm g;
    (void)algo;
    if (!c || !c->stream || c->stream->device != mock.current || c->device != mock.current) return CUBLAS_STATUS_EXECUTION_FAILED;
    if (ta != CUBLAS_OP_T || tb != CUBLAS_OP_N || at != bt || ct != CUDA_R_32F || compute != CUBLAS_COMPUTE_32F ||
        *(const float *)alpha != 1.0f || *(const float *)beta != 0.0f || !mock_type_of(at, &g.type) || m < 1 || n < 1 || k < 1 || batch < 1)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (c->stream->capture && !c->workspace) {      // cuBLAS would allocate its workspace now
        mock.stats.capture_violations++;
        mock.capture_invalid = true;
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    g.m = m; g.n = n; g.k = k; g.batch = batch;
    g.a = A; g.b = B; g.c = (float *)C;
    g.lda = lda; g.ldb = ldb; g.ldc = ldc; g.stride_a = sa; g.stride_b = sb; g.stride_c = sc;
    mock.stats.gemms++;
    const mock_gemm_run run = { g };
    mock_submit(c->stream, run);
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" {
void mms_cuda_mock_get_stats(struct mms_cuda_mock_stats *out) { *out = mock.stats; }
void mms_cuda_mock_reset_stats(void) { memset(&mock.stats, 0, sizeof mock.stats); }
void mms_cuda_mock_skip_kernels(int skip) { mock.skip_kernels = skip; }
int mms_cuda_mock_set_devices(int n) {
    const int before = (mock_init(), mock.n_devices);
    mock.n_devices = n < 0 ? 0 : n > MOCK_MAX_DEVICES ? MOCK_MAX_DEVICES : n;
    return before;
}
void mms_cuda_mock_host_times(struct mms_backend *b, double *signature_us, double *key_us) {
    *signature_us = cu_of(b)->signature_us;
    *key_us = cu_of(b)->key_us;
}
long long mms_cuda_mock_unchanged_replays(struct mms_backend *b) { return (long long)cu_of(b)->n_unchanged; }
void mms_cuda_mock_fail_next(const char *call) {
    snprintf(mock.fail_call, sizeof mock.fail_call, "%s", call);
    mock.fail_error = cudaErrorInvalidValue;
}
}
