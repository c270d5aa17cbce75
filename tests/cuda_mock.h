// cuda_mock.h - the CUDA runtime and cuBLAS, as far as mmsched_cuda.cu uses them, modelled on the
// host, so the whole CUDA backend (buffers, streams, copies, events, faults, peer access, CUDA
// graphs, the cuBLAS handle) runs and is tested on machines without a GPU. Included by
// tests/cuda_mock.cu before mmsched_cuda.cu: the macros at the end send the backend's calls here.
//
// The model: MMS_MOCK_DEVICES devices (default 2; MMS_MOCK_SKIP_KERNELS=1 validates and counts
// launches without running them), each with host memory for its device memory
// (filled with 0xFF bytes when allocated, so unwritten reads show as NaN); a current device;
// the last error, kept until read, as the runtime keeps it. Work on a stream runs when it is
// queued (so missing synchronization between streams is not modelled), or, while the stream is
// being captured, is recorded into the CUDA graph and runs at each cudaGraphLaunch with the
// arguments it was captured with. Checked as the runtime checks, or as the backend relies on:
//   - launches: grid within CUDA's limits, at most 1024 threads, shared memory within 48 KiB or
//     the kernel's cudaFuncAttributeMaxDynamicSharedMemorySize on that device; the stream's
//     device must be the current device;
//   - plain cudaMemcpy / cudaMemset (the legacy default stream, which orders them after the
//     backends' streams of the *current* device) must touch only the current device's memory;
//     async copies only their stream's device's memory;
//   - during a capture, calls that are illegal then (synchronous copies, cudaMalloc / cudaFree,
//     synchronizing the stream) fail and invalidate it, as do cuBLAS calls without a workspace
//     (cuBLAS would allocate one);
//   - copies between devices without peer access both ways are counted as staged.
//   Counted too: what makes the host wait for a device (synchronous copies, stream and event
//   synchronizes, async copies into pageable host memory), so tests can bound it per step.
// The launches themselves (tests/cuda_mock.cu) run the kernels' functors with the host executor
// of tests/cuda_host.h.
#ifndef MMS_CUDA_MOCK_H
#define MMS_CUDA_MOCK_H

#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include "cuda_mock_api.h"

#define MOCK_MAX_DEVICES 20

// One piece of work on a stream: a heap copy of a functor (its arguments as they were queued).
struct mock_op {
    void (*run)(void *arg);
    void (*drop)(void *arg);
    void *arg;
};
template <typename F> static void mock_op_run(void *a) { (*(F *)a)(); }
template <typename F> static void mock_op_drop(void *a) { delete (F *)a; }
template <typename F> static mock_op mock_make_op(const F &f) {
    mock_op op = { mock_op_run<F>, mock_op_drop<F>, new F(f) };
    return op;
}

struct mock_oplist { std::vector<mock_op> ops; int refs; };
static void mock_oplist_release(mock_oplist *l) {
    if (!l || --l->refs > 0) return;
    for (size_t i = 0; i < l->ops.size(); i++) l->ops[i].drop(l->ops[i].arg);
    delete l;
}

struct mock_stream { int device; mock_oplist *capture; bool invalidated; };
struct mock_event { int device; };
struct mock_cublas { mock_stream *stream; void *workspace; size_t workspace_size; int device; };

struct mock_alloc { char *p; size_t n; int device; bool pinned; };
struct mock_attr { int device; const void *func; int max_smem; };

static struct {
    bool                    ready;
    int                     n_devices, current;
    cudaError_t             last;
    std::vector<mock_alloc> allocs;
    std::vector<mock_attr>  attrs;
    bool                    peer[MOCK_MAX_DEVICES][MOCK_MAX_DEVICES];
    int                     n_capturing;
    bool                    capture_invalid;      // a forbidden call happened during the capture
    int                     skip_kernels;
    char                    fail_call[64];        // the next call of this name fails with fail_error
    cudaError_t             fail_error;
    struct mms_cuda_mock_stats stats;
} mock;

static void mock_init(void) {
    if (mock.ready) return;
    mock.ready = true;
    mock.n_devices = getenv("MMS_MOCK_DEVICES") ? atoi(getenv("MMS_MOCK_DEVICES")) : 2;
    mock.skip_kernels = getenv("MMS_MOCK_SKIP_KERNELS") ? atoi(getenv("MMS_MOCK_SKIP_KERNELS")) : 0;
    if (mock.n_devices < 0) mock.n_devices = 0;
    if (mock.n_devices > MOCK_MAX_DEVICES) mock.n_devices = MOCK_MAX_DEVICES;
}

// A failure: recorded as the last error (until cudaGetLastError reads it) and returned. Why is
// printed when MMS_MOCK_VERBOSE is set.
static cudaError_t mock_fail(cudaError_t e, const char *why) {
    mock.last = e;
    mock.stats.errors++;
    if (getenv("MMS_MOCK_VERBOSE")) fprintf(stderr, "cuda mock: %s: %s\n", why, cudaGetErrorName(e));
    return e;
}

// A failure the test asked for (mms_cuda_mock_fail_next).
#define MOCK_INJECTED(call) do { if (mock.fail_call[0] && !strcmp(mock.fail_call, call)) { mock.fail_call[0] = 0; return mock_fail(mock.fail_error, call " (injected)"); } } while (0)

static mock_alloc *mock_find(const void *p) {
    for (size_t i = 0; i < mock.allocs.size(); i++) {
        mock_alloc *a = &mock.allocs[i];
        if ((const char *)p >= a->p && (const char *)p < a->p + (a->n ? a->n : 1)) return a;
    }
    return NULL;
}
// The device whose memory [p, p + n) is, -1 for host memory (pinned or not), -2 for a range that
// starts in device memory and runs past its allocation.
static int mock_device_of(const void *p, size_t n) {
    const mock_alloc *a = mock_find(p);
    if (!a || a->pinned) return -1;
    return (const char *)p + n <= a->p + a->n ? a->device : -2;
}

// Calls that are illegal while a stream is being captured invalidate the capture.
static bool mock_capture_forbids(const char *what) {
    if (mock.n_capturing == 0) return false;
    mock_fail(cudaErrorStreamCaptureUnsupported, what);
    mock.stats.capture_violations++;
    mock.capture_invalid = true;
    return true;
}

// Work on a stream: recorded while it is captured, else done now.
template <typename F> static void mock_submit(mock_stream *s, const F &f) {
    if (s && s->capture) { s->capture->ops.push_back(mock_make_op(f)); return; }
    f();
}

// -- devices --

static cudaError_t mock_cudaGetDeviceCount(int *n) {
    mock_init();
    *n = mock.n_devices;
    return mock.n_devices ? cudaSuccess : mock_fail(cudaErrorNoDevice, "cudaGetDeviceCount");
}
static bool mock_bad_device(int d) { mock_init(); return d < 0 || d >= mock.n_devices; }
static cudaError_t mock_cudaSetDevice(int d) {
    if (mock_bad_device(d)) return mock_fail(cudaErrorInvalidDevice, "cudaSetDevice");
    mock.current = d;
    return cudaSuccess;
}
static cudaError_t mock_cudaGetDevice(int *d) {
    mock_init();
    if (!mock.n_devices) return mock_fail(cudaErrorNoDevice, "cudaGetDevice");
    *d = mock.current;
    return cudaSuccess;
}
static cudaError_t mock_cudaDeviceGetAttribute(int *v, cudaDeviceAttr attr, int d) {
    if (mock_bad_device(d)) return mock_fail(cudaErrorInvalidDevice, "cudaDeviceGetAttribute");
    switch (attr) {
        case cudaDevAttrComputeCapabilityMajor:        *v = 9; break;
        case cudaDevAttrComputeCapabilityMinor:        *v = 0; break;
        case cudaDevAttrMultiProcessorCount:           *v = 132; break;
        case cudaDevAttrMaxSharedMemoryPerBlockOptin:  *v = 227 * 1024; break;
        default:                                       *v = 0; break;
    }
    return cudaSuccess;
}
static cudaError_t mock_cudaGetDeviceProperties(cudaDeviceProp *p, int d) {
    if (mock_bad_device(d)) return mock_fail(cudaErrorInvalidDevice, "cudaGetDeviceProperties");
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "mock GPU %d", d);
    p->totalGlobalMem = (size_t)80 << 30;
    p->major = 9;
    p->multiProcessorCount = 132;
    p->sharedMemPerBlockOptin = 227 * 1024;
    return cudaSuccess;
}
static cudaError_t mock_cudaDeviceCanAccessPeer(int *ok, int a, int b) {
    if (mock_bad_device(a) || mock_bad_device(b)) return mock_fail(cudaErrorInvalidDevice, "cudaDeviceCanAccessPeer");
    *ok = a != b;
    return cudaSuccess;
}
static cudaError_t mock_cudaDeviceEnablePeerAccess(int peer, unsigned flags) {
    (void)flags;
    if (mock_bad_device(peer) || peer == mock.current) return mock_fail(cudaErrorInvalidDevice, "cudaDeviceEnablePeerAccess");
    if (mock.peer[mock.current][peer]) return mock_fail(cudaErrorPeerAccessAlreadyEnabled, "cudaDeviceEnablePeerAccess");
    mock.peer[mock.current][peer] = true;
    return cudaSuccess;
}
static cudaError_t mock_cudaGetLastError(void) { const cudaError_t e = mock.last; mock.last = cudaSuccess; return e; }
static cudaError_t mock_cudaPeekAtLastError(void) { return mock.last; }

// -- memory --

static cudaError_t mock_alloc_bytes(void **p, size_t n, int device, bool pinned, const char *what) {
    if (mock_capture_forbids(what)) return cudaErrorStreamCaptureUnsupported;
    if (n > ((size_t)1 << 40)) return mock_fail(pinned ? cudaErrorMemoryAllocation : cudaErrorMemoryAllocation, what);
    char *m = (char *)malloc(n ? n : 1);
    if (!m) return mock_fail(cudaErrorMemoryAllocation, what);
    memset(m, 0xFF, n);
    const mock_alloc a = { m, n, device, pinned };
    mock.allocs.push_back(a);
    *p = m;
    return cudaSuccess;
}
static cudaError_t mock_free_bytes(void *p, bool pinned, const char *what) {
    if (!p) return cudaSuccess;
    if (mock_capture_forbids(what)) return cudaErrorStreamCaptureUnsupported;
    for (size_t i = 0; i < mock.allocs.size(); i++)
        if (mock.allocs[i].p == p && mock.allocs[i].pinned == pinned) {
            free(p);
            mock.allocs.erase(mock.allocs.begin() + (long)i);
            return cudaSuccess;
        }
    return mock_fail(cudaErrorInvalidValue, what);
}
static cudaError_t mock_cudaMalloc(void **p, size_t n) {
    mock_init();
    MOCK_INJECTED("cudaMalloc");
    if (!mock.n_devices) return mock_fail(cudaErrorNoDevice, "cudaMalloc");
    return mock_alloc_bytes(p, n, mock.current, false, "cudaMalloc");
}
static cudaError_t mock_cudaFree(void *p) { return mock_free_bytes(p, false, "cudaFree"); }
static cudaError_t mock_cudaMallocHost(void **p, size_t n) {
    mock_init();
    if (!mock.n_devices) return mock_fail(cudaErrorNoDevice, "cudaMallocHost");
    return mock_alloc_bytes(p, n, -1, true, "cudaMallocHost");
}
static cudaError_t mock_cudaHostAlloc(void **p, size_t n, unsigned flags) { (void)flags; return mock_cudaMallocHost(p, n); }
static cudaError_t mock_cudaFreeHost(void *p) { return mock_free_bytes(p, true, "cudaFreeHost"); }
static cudaError_t mock_cudaHostGetDevicePointer(void **d, void *h, unsigned flags) {
    (void)flags;
    const mock_alloc *a = mock_find(h);
    if (!a || !a->pinned) return mock_fail(cudaErrorInvalidValue, "cudaHostGetDevicePointer");
    *d = h;
    return cudaSuccess;
}

// The devices a copy touches must be `device` (the current one for the legacy stream, the
// stream's for async copies); host memory may be anywhere.
static cudaError_t mock_check_copy(void *dst, const void *src, size_t n, int device, const char *what) {
    const int dd = mock_device_of(dst, n), sd = mock_device_of(src, n);
    if (dd == -2 || sd == -2) return mock_fail(cudaErrorInvalidValue, what);
    if ((dd >= 0 && dd != device) || (sd >= 0 && sd != device)) {
        mock.stats.wrong_device++;
        return mock_fail(cudaErrorInvalidDevice, what);
    }
    return cudaSuccess;
}
static cudaError_t mock_cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind) {
    (void)kind;
    MOCK_INJECTED("cudaMemcpy");
    if (mock_capture_forbids("cudaMemcpy")) return cudaErrorStreamCaptureUnsupported;
    const cudaError_t e = mock_check_copy(dst, src, n, mock.current, "cudaMemcpy (legacy stream)");
    if (e != cudaSuccess) return e;
    memmove(dst, src, n);
    mock.stats.copies++;
    mock.stats.sync_copies++;
    return cudaSuccess;
}
static cudaError_t mock_cudaMemset(void *p, int v, size_t n) {
    if (mock_capture_forbids("cudaMemset")) return cudaErrorStreamCaptureUnsupported;
    const cudaError_t e = mock_check_copy(p, p, n, mock.current, "cudaMemset (legacy stream)");
    if (e != cudaSuccess) return e;
    memset(p, v, n);
    mock.stats.sync_copies++;
    return cudaSuccess;
}
struct mock_copy_op {
    void *dst; const void *src; size_t n;
    void operator()() const { memmove(dst, src, n); mock.stats.copies++; }
};
static cudaError_t mock_cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t st) {
    mock_stream *s = (mock_stream *)st;
    (void)kind;
    MOCK_INJECTED("cudaMemcpyAsync");
    if (!s) return mock_fail(cudaErrorInvalidResourceHandle, "cudaMemcpyAsync on the legacy stream (not used by the backend)");
    const cudaError_t e = mock_check_copy(dst, src, n, s->device, "cudaMemcpyAsync");
    if (e != cudaSuccess) return e;
    const mock_alloc *host = mock_find(dst);
    if (mock_device_of(src, n) >= 0 && !(host && host->pinned)) mock.stats.pageable_reads++;
    const mock_copy_op op = { dst, src, n };
    mock_submit(s, op);
    return cudaSuccess;
}
static cudaError_t mock_peer_copy(void *dst, int dd, const void *src, int sd, size_t n, mock_stream *s, const char *what) {
    if (mock_bad_device(dd) || mock_bad_device(sd) || mock_device_of(dst, n) != dd || mock_device_of(src, n) != sd)
        return mock_fail(cudaErrorInvalidValue, what);
    if (dd != sd && !(mock.peer[sd][dd] && mock.peer[dd][sd])) mock.stats.staged_peer_copies++;
    const mock_copy_op op = { dst, src, n };
    mock_submit(s, op);
    return cudaSuccess;
}
static cudaError_t mock_cudaMemcpyPeer(void *dst, int dd, const void *src, int sd, size_t n) {
    if (mock_capture_forbids("cudaMemcpyPeer")) return cudaErrorStreamCaptureUnsupported;
    mock.stats.sync_copies++;
    return mock_peer_copy(dst, dd, src, sd, n, NULL, "cudaMemcpyPeer");
}
static cudaError_t mock_cudaMemcpyPeerAsync(void *dst, int dd, const void *src, int sd, size_t n, cudaStream_t st) {
    return mock_peer_copy(dst, dd, src, sd, n, (mock_stream *)st, "cudaMemcpyPeerAsync");
}

// -- streams, events, graphs --

static cudaError_t mock_cudaStreamCreate(cudaStream_t *st) {
    mock_init();
    if (!mock.n_devices) return mock_fail(cudaErrorNoDevice, "cudaStreamCreate");
    mock_stream *s = new mock_stream;
    s->device = mock.current;
    s->capture = NULL;
    s->invalidated = false;
    *st = (cudaStream_t)s;
    return cudaSuccess;
}
static cudaError_t mock_cudaStreamDestroy(cudaStream_t st) { delete (mock_stream *)st; return cudaSuccess; }
static cudaError_t mock_cudaStreamSynchronize(cudaStream_t st) {
    mock_stream *s = (mock_stream *)st;
    if (s && s->capture) {
        s->invalidated = true;
        mock.stats.capture_violations++;
        return mock_fail(cudaErrorStreamCaptureUnsupported, "cudaStreamSynchronize while capturing");
    }
    mock.stats.syncs++;
    return cudaSuccess;
}
static cudaError_t mock_cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned flags) {
    (void)flags;
    mock_event *e = new mock_event;
    e->device = mock.current;
    *ev = (cudaEvent_t)e;
    return cudaSuccess;
}
static cudaError_t mock_cudaEventDestroy(cudaEvent_t ev) { delete (mock_event *)ev; return cudaSuccess; }
static cudaError_t mock_cudaEventRecord(cudaEvent_t ev, cudaStream_t st) {
    if (!ev || !st || ((mock_event *)ev)->device != ((mock_stream *)st)->device) return mock_fail(cudaErrorInvalidResourceHandle, "cudaEventRecord");
    return cudaSuccess;
}
static cudaError_t mock_cudaEventSynchronize(cudaEvent_t ev) {
    if (!ev) return mock_fail(cudaErrorInvalidResourceHandle, "cudaEventSynchronize");
    mock.stats.syncs++;
    return cudaSuccess;
}
static cudaError_t mock_cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t ev, unsigned flags) {
    (void)flags;
    return st && ev ? cudaSuccess : mock_fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent");
}

static cudaError_t mock_cudaStreamBeginCapture(cudaStream_t st, cudaStreamCaptureMode mode) {
    mock_stream *s = (mock_stream *)st;
    (void)mode;
    MOCK_INJECTED("cudaStreamBeginCapture");
    if (!s || s->capture) return mock_fail(cudaErrorIllegalState, "cudaStreamBeginCapture");
    s->capture = new mock_oplist;
    s->capture->refs = 1;
    s->invalidated = false;
    mock.n_capturing++;
    mock.stats.captures++;
    return cudaSuccess;
}
static cudaError_t mock_cudaStreamEndCapture(cudaStream_t st, cudaGraph_t *g) {
    mock_stream *s = (mock_stream *)st;
    if (!s || !s->capture) return mock_fail(cudaErrorIllegalState, "cudaStreamEndCapture");
    mock_oplist *l = s->capture;
    s->capture = NULL;
    mock.n_capturing--;
    if (s->invalidated || mock.capture_invalid) {     // a forbidden call during the capture invalidated it
        mock.capture_invalid = false;
        mock_oplist_release(l);
        *g = NULL;
        return mock_fail(cudaErrorStreamCaptureInvalidated, "cudaStreamEndCapture");
    }
    *g = (cudaGraph_t)l;
    return cudaSuccess;
}
static cudaError_t mock_cudaGraphInstantiate(cudaGraphExec_t *ex, cudaGraph_t g, unsigned long long flags) {
    (void)flags;
    if (!g) return mock_fail(cudaErrorInvalidValue, "cudaGraphInstantiate");
    ((mock_oplist *)g)->refs++;
    *ex = (cudaGraphExec_t)g;
    return cudaSuccess;
}
static cudaError_t mock_cudaGraphLaunch(cudaGraphExec_t ex, cudaStream_t st) {
    mock_stream *s = (mock_stream *)st;
    mock_oplist *l = (mock_oplist *)ex;
    if (!l || !s || s->capture) return mock_fail(cudaErrorInvalidValue, "cudaGraphLaunch");
    if (s->device != mock.current) return mock_fail(cudaErrorInvalidResourceHandle, "cudaGraphLaunch on another device's stream");
    mock.stats.graph_launches++;
    for (size_t i = 0; i < l->ops.size(); i++) l->ops[i].run(l->ops[i].arg);
    return cudaSuccess;
}
static cudaError_t mock_cudaGraphExecDestroy(cudaGraphExec_t ex) { mock_oplist_release((mock_oplist *)ex); return cudaSuccess; }
static cudaError_t mock_cudaGraphDestroy(cudaGraph_t g) { mock_oplist_release((mock_oplist *)g); return cudaSuccess; }

// -- kernels: their attributes (the launches are in tests/cuda_mock.cu) --

template <typename T> static cudaError_t mock_cudaFuncSetAttribute(T *func, cudaFuncAttribute attr, int value) {
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess;
    if (value > 227 * 1024) return mock_fail(cudaErrorInvalidValue, "cudaFuncSetAttribute");
    for (size_t i = 0; i < mock.attrs.size(); i++)
        if (mock.attrs[i].device == mock.current && mock.attrs[i].func == (const void *)func) { mock.attrs[i].max_smem = value; return cudaSuccess; }
    const mock_attr a = { mock.current, (const void *)func, value };
    mock.attrs.push_back(a);
    return cudaSuccess;
}
static int mock_max_smem(const void *func) {
    for (size_t i = 0; i < mock.attrs.size(); i++)
        if (mock.attrs[i].device == mock.current && mock.attrs[i].func == func) return mock.attrs[i].max_smem;
    return 48 * 1024;
}

// A launch as the runtime validates it; false (and the last error) when it would not start.
static bool mock_launch_ok(const void *kernel, unsigned gx, unsigned gy, unsigned gz, int threads, size_t smem, cudaStream_t st) {
    mock_stream *s = (mock_stream *)st;
    if (!s) return mock_fail(cudaErrorInvalidResourceHandle, "a launch on the legacy stream (not used by the backend)"), false;
    if (s->device != mock.current) return mock_fail(cudaErrorInvalidResourceHandle, "a launch on another device's stream"), false;
    if (gx < 1 || gx > 2147483647u || gy < 1 || gy > 65535 || gz < 1 || gz > 65535 || threads < 1 || threads > 1024)
        return mock_fail(cudaErrorInvalidConfiguration, "a launch's grid or block"), false;
    if (smem > (size_t)mock_max_smem(kernel)) return mock_fail(cudaErrorInvalidValue, "a launch's shared memory"), false;
    mock.stats.kernels++;
    return true;
}

// -- cuBLAS --

static cublasStatus_t mock_cublasCreate(cublasHandle_t *h) {
    mock_init();
    if (!mock.n_devices) return CUBLAS_STATUS_NOT_INITIALIZED;
    mock_cublas *c = new mock_cublas;
    c->stream = NULL;
    c->workspace = NULL;
    c->workspace_size = 0;
    c->device = mock.current;
    *h = (cublasHandle_t)c;
    return CUBLAS_STATUS_SUCCESS;
}
static cublasStatus_t mock_cublasDestroy(cublasHandle_t h) { delete (mock_cublas *)h; return CUBLAS_STATUS_SUCCESS; }
static cublasStatus_t mock_cublasSetStream(cublasHandle_t h, cudaStream_t st) { ((mock_cublas *)h)->stream = (mock_stream *)st; return CUBLAS_STATUS_SUCCESS; }
static cublasStatus_t mock_cublasSetWorkspace(cublasHandle_t h, void *ws, size_t n) {
    if (mock_device_of(ws, n) != ((mock_cublas *)h)->device) return CUBLAS_STATUS_INVALID_VALUE;
    ((mock_cublas *)h)->workspace = ws;
    ((mock_cublas *)h)->workspace_size = n;
    return CUBLAS_STATUS_SUCCESS;
}
static cublasStatus_t mock_cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                                     const void *alpha, const void *A, cudaDataType at, int lda, long long sa,
                                                     const void *B, cudaDataType bt, int ldb, long long sb, const void *beta,
                                                     void *C, cudaDataType ct, int ldc, long long sc, int batch,
                                                     cublasComputeType_t compute, cublasGemmAlgo_t algo);

// -- the backend's calls, sent here --
#undef cudaMemcpy
#undef cudaMemset
#undef cudaMemcpyAsync
#undef cudaMemcpyPeerAsync
#undef cudaEventRecord
#undef cudaStreamBeginCapture
#undef cudaStreamEndCapture
#undef cudaGraphLaunch
#undef cudaGetDeviceProperties
#undef cublasCreate
#undef cublasDestroy
#undef cublasSetStream
#undef cublasSetWorkspace
#define cudaGetDeviceCount          mock_cudaGetDeviceCount
#define cudaSetDevice               mock_cudaSetDevice
#define cudaGetDevice               mock_cudaGetDevice
#define cudaDeviceGetAttribute      mock_cudaDeviceGetAttribute
#define cudaGetDeviceProperties     mock_cudaGetDeviceProperties
#define cudaDeviceCanAccessPeer     mock_cudaDeviceCanAccessPeer
#define cudaDeviceEnablePeerAccess  mock_cudaDeviceEnablePeerAccess
#define cudaGetLastError            mock_cudaGetLastError
#define cudaPeekAtLastError         mock_cudaPeekAtLastError
#define cudaMalloc                  mock_cudaMalloc
#define cudaFree                    mock_cudaFree
#define cudaMallocHost              mock_cudaMallocHost
#define cudaHostAlloc               mock_cudaHostAlloc
#define cudaFreeHost                mock_cudaFreeHost
#define cudaHostGetDevicePointer    mock_cudaHostGetDevicePointer
#define cudaMemcpy                  mock_cudaMemcpy
#define cudaMemset                  mock_cudaMemset
#define cudaMemcpyAsync             mock_cudaMemcpyAsync
#define cudaMemcpyPeer              mock_cudaMemcpyPeer
#define cudaMemcpyPeerAsync         mock_cudaMemcpyPeerAsync
#define cudaStreamCreate            mock_cudaStreamCreate
#define cudaStreamDestroy           mock_cudaStreamDestroy
#define cudaStreamSynchronize       mock_cudaStreamSynchronize
#define cudaStreamWaitEvent         mock_cudaStreamWaitEvent
#define cudaEventCreateWithFlags    mock_cudaEventCreateWithFlags
#define cudaEventDestroy            mock_cudaEventDestroy
#define cudaEventRecord             mock_cudaEventRecord
#define cudaEventSynchronize        mock_cudaEventSynchronize
#define cudaStreamBeginCapture      mock_cudaStreamBeginCapture
#define cudaStreamEndCapture        mock_cudaStreamEndCapture
#define cudaGraphInstantiate        mock_cudaGraphInstantiate
#define cudaGraphLaunch             mock_cudaGraphLaunch
#define cudaGraphExecDestroy        mock_cudaGraphExecDestroy
#define cudaGraphDestroy            mock_cudaGraphDestroy
#define cudaFuncSetAttribute        mock_cudaFuncSetAttribute
#define cublasCreate                mock_cublasCreate
#define cublasDestroy               mock_cublasDestroy
#define cublasSetStream             mock_cublasSetStream
#define cublasSetWorkspace          mock_cublasSetWorkspace
#define cublasGemmStridedBatchedEx  mock_cublasGemmStridedBatchedEx

#endif
