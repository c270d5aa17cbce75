/* The header as strict C99 (and, compiled by clang, clang's C99): declarations and implementation. */
#define MMSCHED_IMPLEMENTATION
#include "../../mmsched.h"
#include "../test.h"

static void compile_c99_smoke(void) {
    struct mms_init_params ip = { 0, NULL, false };
    struct mms_context *ctx = mms_init(ip);
    struct mms_tensor *t = mms_new_tensor_1d(ctx, MMS_TYPE_F32, 4);
    EXPECT(t != NULL && t->data != NULL, "tensor");
    mms_free(ctx);
}

int main(void) {
    RUN(compile_c99_smoke);
    return test_summary();
}
