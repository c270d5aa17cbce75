/* The header with parts left out: built once with each of -DMMS_NO_MLLAMA, -DMMS_NO_TEXT and
   -DMMS_NO_GGUF. The rest must compile and run, and what was left out must really be gone: a
   variable with the name of one of its functions would not compile next to its declaration. */
#define MMSCHED_IMPLEMENTATION
#include "../../mmsched.h"
#include "../test.h"

#ifdef MMS_NO_MLLAMA
static int mms_mllama_model_load = 1;
#endif
#ifdef MMS_NO_TEXT
static int mms_tokenize = 1;
#endif
#ifdef MMS_NO_GGUF
static int mms_gguf_open = 1;
#endif

static void compile_parts_smoke(void) {
    struct mms_init_params ip = { 0, NULL, false };
    struct mms_context *ctx = mms_init(ip);
    mms_backend_t cpu = mms_backend_cpu_init();
    struct mms_tensor *x = mms_new_tensor_1d(ctx, MMS_TYPE_F32, 4), *y = mms_scale(ctx, x, 2.0f);
    struct mms_cgraph *g = mms_new_graph(ctx);
    float v[4] = { 1, 2, 3, 4 };
    memcpy(x->data, v, sizeof v);
    mms_build_forward_expand(g, y);
    EXPECT(mms_backend_graph_compute(cpu, g) == MMS_OK && ((float *)y->data)[3] == 8.0f, "compute: %s", mms_last_error());
#ifdef MMS_NO_MLLAMA
    EXPECT(mms_mllama_model_load == 1, "left out");
#endif
#ifdef MMS_NO_TEXT
    EXPECT(mms_tokenize == 1, "left out");
#endif
#ifdef MMS_NO_GGUF
    EXPECT(mms_gguf_open == 1, "left out");
#endif
    mms_backend_free(cpu);
    mms_free(ctx);
}

int main(void) {
    RUN(compile_parts_smoke);
    return test_summary();
}
