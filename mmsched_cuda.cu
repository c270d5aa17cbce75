// mmsched_cuda.cu - the CUDA backend of mmsched.
//
// Compile with nvcc and link together with a C file that defines MMSCHED_IMPLEMENTATION and
// MMS_CUDA (see `make cuda`). This is a placeholder until the CUDA backend lands: the entry
// points exist, count devices, and report MMS_ERR_UNSUPPORTED for everything else.
#define MMS_CUDA
#include "mmsched.h"
#include <cuda_runtime.h>

int mms_backend_cuda_get_device_count(void) {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        mms_set_error(MMS_ERR_BACKEND, "cudaGetDeviceCount: %s", cudaGetErrorString(err));
        return 0;
    }
    return n;
}

mms_backend_t mms_backend_cuda_init(int device) {
    mms_set_error(MMS_ERR_UNSUPPORTED, "mms_backend_cuda_init(%d): the CUDA backend is not implemented yet", device);
    return NULL;
}

bool mms_backend_is_cuda(mms_backend_t backend) {
    (void)backend;
    return false;
}

mms_backend_buffer_type_t mms_backend_cuda_buffer_type(int device) {
    mms_set_error(MMS_ERR_UNSUPPORTED, "mms_backend_cuda_buffer_type(%d): the CUDA backend is not implemented yet", device);
    return NULL;
}

mms_backend_buffer_type_t mms_backend_cuda_host_buffer_type(void) {
    mms_set_error(MMS_ERR_UNSUPPORTED, "mms_backend_cuda_host_buffer_type: the CUDA backend is not implemented yet");
    return NULL;
}
