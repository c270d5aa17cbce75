/* Loading an mllama model for the tests: every placement the load parameters allow. */
#ifndef MMS_TEST_MLLAMA_LOAD_H
#define MMS_TEST_MLLAMA_LOAD_H

static struct mms_mllama_model *test_load_mllama(mms_backend_t cpu, const char *path, const char *mmproj, mms_backend_t gpu,
                                                 int n_gpu_layers, bool vision_on_gpu) {
    struct mms_mllama_load_params lp;
    memset(&lp, 0, sizeof lp);
    lp.path = path;
    lp.mmproj_path = mmproj;
    lp.cpu = cpu;
    lp.gpu = gpu;
    lp.n_gpu_layers = n_gpu_layers;
    lp.vision_on_gpu = vision_on_gpu;
    return mms_mllama_model_load(&lp);
}

/* Decodes n tokens of sequence 0 at its next positions (want: as mms_mllama_batch's). */
TEST_FN enum mms_status test_decode(struct mms_mllama_context *ctx, const int32_t *tokens, int n, const bool *want) {
    struct mms_mllama_batch b;
    memset(&b, 0, sizeof b);
    b.n_tokens = n;
    b.tokens = tokens;
    b.want = want;
    return mms_mllama_decode(ctx, &b);
}

#endif
