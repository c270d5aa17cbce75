/* demo_on_device.h - the bundled demo model's greedy tokens with every text layer, the output head
   and the vision tower on a second backend, against the CPU alone (the demo's greedy paths have
   wide logit margins, see test_demo, so the tokens must be equal). Used by test_cuda_kernels (the
   emulated GPU) and test_cuda (a GPU, or the mock runtime). Include after test.h, mllama_load.h
   and ref_gguf.h. */
#ifndef MMS_DEMO_ON_DEVICE_H
#define MMS_DEMO_ON_DEVICE_H

/* Reference case k of the demo fixture (one of the samples: one picture): picture and prompt ids. */
TEST_FN bool demo_case(struct mms_gguf *ref, int k, const struct mms_mllama_model *m, struct mms_mllama_image *img, int32_t *prompt, int *n_prompt) {
    struct mms_gguf_tensor_info info;
    const struct mms_mllama_image_params ip = mms_mllama_model_image_params(m);
    const uint32_t w = ref_u32(ref, "case.%d.image.0.width", k), h = ref_u32(ref, "case.%d.image.0.height", k);
    const uint8_t *rgb = (const uint8_t *)ref_tensor(ref, "case.%d.image.0.rgb", k, &info);
    *n_prompt = (int)ref_i32s(ref, "case.%d.prompt_ids", k, prompt, 96);
    return rgb && *n_prompt <= 96 && mms_mllama_preprocess_image(&ip, rgb, (int)w, (int)h, 0, img) == MMS_OK;
}

/* Runs n_cases cases, max_new (<= 16) tokens each, on the CPU and on dev; returns how many
   continuations are equal. token_hook (may be NULL) is called around each single-token decode on
   dev: with 0 before it, 1 after. */
TEST_FN int demo_compare(mms_backend_t cpu, mms_backend_t dev, int n_cases, int max_new, void (*token_hook)(int after, void *user), void *user) {
    struct mms_gguf *ref = mms_gguf_open(test_src_path("fixtures/demo/demo-ref.gguf"));
    struct mms_mllama_model *m[2] = { NULL, NULL };
    struct mms_mllama_context *ctx[2] = { NULL, NULL };
    struct mms_mllama_context_params cp;
    int n_same = 0, k, i, j;
    EXPECT(ref != NULL, "fixture: %s", mms_last_error());
    if (!ref) return 0;
    m[0] = test_load_mllama(cpu, test_src_path("../models/mllama-demo.gguf"), NULL, NULL, 0, false);
    m[1] = test_load_mllama(cpu, test_src_path("../models/mllama-demo.gguf"), NULL, dev, 1000, true);
    memset(&cp, 0, sizeof cp);
    cp.n_ctx = 192;
    cp.n_batch = 96;
    cp.max_images = 1;
    for (i = 0; i < 2; i++) {
        ctx[i] = m[i] ? mms_mllama_context_new(m[i], &cp) : NULL;
        EXPECT(ctx[i] != NULL, "model %d: %s", i, mms_last_error());
    }
    for (k = 0; k < n_cases && ctx[0] && ctx[1]; k++) {
        const int n_vocab = mms_mllama_model_get_hparams(m[0])->n_vocab;
        struct mms_mllama_image img;
        int32_t prompt[96], out[2][16];
        int n_prompt = 0, n_out[2] = { 0, 0 };
        memset(&img, 0, sizeof img);
        if (!demo_case(ref, k, m[0], &img, prompt, &n_prompt)) { EXPECT(0, "demo case %d: %s", k, mms_last_error()); break; }
        for (i = 0; i < 2; i++) {
            bool ok;
            mms_mllama_seq_clear(ctx[i], 0);
            ok = mms_mllama_seq_add_image(ctx[i], 0, &img) == MMS_OK && test_decode(ctx[i], prompt, n_prompt, NULL) == MMS_OK;
            while (ok && n_out[i] < max_new && n_out[i] < 16) {
                const float *l = mms_mllama_get_logits(ctx[i], mms_mllama_get_n_logits(ctx[i]) - 1);
                int32_t best = 0;
                for (j = 1; j < n_vocab; j++) if (l[j] > l[best]) best = j;
                out[i][n_out[i]++] = best;
                if (i == 1 && token_hook) token_hook(0, user);
                ok = test_decode(ctx[i], &best, 1, NULL) == MMS_OK;
                if (i == 1 && token_hook) token_hook(1, user);
            }
            EXPECT(ok, "case %d on %s: %s", k, i ? mms_backend_name(dev) : "the CPU", mms_last_error());
        }
        n_same += n_out[0] == n_out[1] && memcmp(out[0], out[1], sizeof(int32_t) * (size_t)n_out[0]) == 0;
        mms_mllama_image_free(&img);
    }
    EXPECT(n_same == n_cases, "%d of %d greedy continuations equal the CPU's", n_same, n_cases);
    for (i = 0; i < 2; i++) { mms_mllama_context_free(ctx[i]); mms_mllama_model_free(m[i]); }
    mms_gguf_close(ref);
    return n_same;
}

#endif
