/* >>cuda-shim =====================================================================================
   Without MMS_CUDA the CUDA entry points exist and say so; with it they come from mmsched_cuda.cu. */

#ifndef MMS_CUDA
static void mms__cuda_unsupported(const char *who) {
    mms_set_error(MMS_ERR_UNSUPPORTED, "%s: mmsched was built without CUDA (define MMS_CUDA in the implementation file "
                  "and compile and link mmsched_cuda.cu with nvcc; see 'make cuda')", who);
}
MMS_API int mms_backend_cuda_get_device_count(void) { mms__cuda_unsupported("mms_backend_cuda_get_device_count"); return 0; }
MMS_API mms_backend_t mms_backend_cuda_init(int device) {
    MMS__UNUSED(device);
    mms__cuda_unsupported("mms_backend_cuda_init");
    return NULL;
}
MMS_API bool mms_backend_is_cuda(mms_backend_t backend) { MMS__UNUSED(backend); return false; }
MMS_API mms_backend_buffer_type_t mms_backend_cuda_buffer_type(int device) {
    MMS__UNUSED(device);
    mms__cuda_unsupported("mms_backend_cuda_buffer_type");
    return NULL;
}
MMS_API mms_backend_buffer_type_t mms_backend_cuda_host_buffer_type(void) {
    mms__cuda_unsupported("mms_backend_cuda_host_buffer_type");
    return NULL;
}
#endif
