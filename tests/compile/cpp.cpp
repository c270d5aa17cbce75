// The header compiled as C++ (what nvcc does with it), implementation included.
#define MMSCHED_IMPLEMENTATION
#include "../../mmsched.h"
#include "../test.h"

static void compile_cpp_smoke(void) {
    mms_init_params ip = { 0, NULL, true };
    mms_context *ctx = mms_init(ip);
    mms_tensor *a = mms_new_tensor_2d(ctx, MMS_TYPE_F16, 8, 2);
    mms_tensor *b = mms_new_tensor_2d(ctx, MMS_TYPE_F32, 8, 3);
    mms_tensor *c = mms_mul_mat(ctx, a, b);
    EXPECT(c != NULL && c->ne[0] == 2 && c->ne[1] == 3, "mul_mat shape");
    mms_free(ctx);
}

int main() {
    RUN(compile_cpp_smoke);
    return test_summary();
}
