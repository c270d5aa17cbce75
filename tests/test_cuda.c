/* Built by `make cuda` with MMS_CUDA and linked with mmsched_cuda.cu. Without a GPU at run time
   every case prints SKIP and passes. */
#define MMS_CUDA
#define MMSCHED_IMPLEMENTATION
#include "../mmsched.h"
#include "test.h"

static void test_cuda_entry_points(void) {
    int n;
    test_capture_log();
    n = mms_backend_cuda_get_device_count();
    if (n == 0) {
        printf("SKIP test_cuda_entry_points: no CUDA device (%s)\n", mms_last_error());
    } else {
        mms_backend_t b = mms_backend_cuda_init(0);
        EXPECT(b == NULL && mms_last_status() == MMS_ERR_UNSUPPORTED, "placeholder backend: %s", mms_last_error());
    }
    mms_log_set(NULL, NULL);
}

int main(void) {
    RUN(test_cuda_entry_points);
    return test_summary();
}
