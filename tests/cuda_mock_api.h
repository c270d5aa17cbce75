/* cuda_mock_api.h - what a test program linked with the mock CUDA runtime (tests/cuda_mock.cu,
   built as build/cuda/mock/mmsched_cuda_mock.o) can ask it. C, so the C tests can include it. */
#ifndef MMS_CUDA_MOCK_API_H
#define MMS_CUDA_MOCK_API_H

#ifdef __cplusplus
extern "C" {
#endif

struct mms_cuda_mock_stats {
    long kernels;              /* launches (one per physical grid) */
    long gemms;                /* cuBLAS calls */
    long copies;               /* memory copies done */
    long graph_launches;       /* cudaGraphLaunch */
    long captures;             /* cudaStreamBeginCapture */
    long capture_violations;   /* calls made during a capture that the runtime refuses then */
    long staged_peer_copies;   /* copies between devices without peer access both ways */
    long wrong_device;         /* copies refused: memory of a device other than the current / the stream's */
    long errors;               /* every call that failed */
    long sync_copies;          /* cudaMemcpy, cudaMemset, cudaMemcpyPeer: legacy-stream calls the host waits for */
    long syncs;                /* cudaStreamSynchronize, cudaEventSynchronize: the host waits for a stream */
    long pageable_reads;       /* cudaMemcpyAsync device to pageable host memory: returns once done, a wait too */
};

void mms_cuda_mock_get_stats(struct mms_cuda_mock_stats *out);
void mms_cuda_mock_reset_stats(void);
/* Launches are validated and counted but their kernels not run (for shapes too large to emulate). */
void mms_cuda_mock_skip_kernels(int skip);
/* From now on the runtime has n devices (at most 20); returns the number before. */
int mms_cuda_mock_set_devices(int n);
/* The next call of this runtime function (cudaMalloc, cudaMemcpy, cudaMemcpyAsync,
   cudaStreamBeginCapture) fails with cudaErrorInvalidValue. */
void mms_cuda_mock_fail_next(const char *call);
/* Host microseconds a CUDA backend has spent, over all its graph computes, building the graphs'
   signatures and their replay keys (tests/bench_decode_host.c splits a decode step with them). */
struct mms_backend;
void mms_cuda_mock_host_times(struct mms_backend *cuda_backend, double *signature_us, double *key_us);
/* Graphs the backend replayed because their scheduler marked them unchanged (mms_graph_unchanged),
   skipping the signature and the key. */
long long mms_cuda_mock_unchanged_replays(struct mms_backend *cuda_backend);

#ifdef __cplusplus
}
#endif
#endif
