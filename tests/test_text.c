/* The chat template and the sampler against transformers (tests/fixtures/text/chat-sampling-ref.gguf,
   made by tools/gen_text_fixtures.py), and their behaviour on their own: seeds, draws, errors. */
#define MMSCHED_IMPLEMENTATION
#include "mmsched.h"
#include "test.h"
#include <math.h>

static struct mms_gguf *fx;

static int32_t key_i32(const char *key) {
    int32_t v = -12345;
    EXPECT(mms_gguf_get_i32(fx, key, &v) == MMS_OK, "key %s: %s", key, mms_last_error());
    return v;
}
static float key_f32(const char *key) {
    float v = NAN;
    EXPECT(mms_gguf_get_f32(fx, key, &v) == MMS_OK, "key %s: %s", key, mms_last_error());
    return v;
}
/* A string value (i < 0) or array element as a NUL-terminated copy (free it). The gguf package
   leaves out keys whose string is empty, so a missing string key reads as "". */
static char *key_str(const char *key, int64_t i) {
    const char *s = "";
    size_t len = 0;
    char *c;
    if (i >= 0 || mms_gguf_find_key(fx, key) >= 0) {
        enum mms_status st = i < 0 ? mms_gguf_get_str(fx, key, &s, &len) : mms_gguf_get_arr_str(fx, key, i, &s, &len);
        EXPECT(st == MMS_OK, "key %s[%lld]: %s", key, (long long)i, mms_last_error());
    }
    c = (char *)malloc(len + 1);
    memcpy(c, s, len);
    c[len] = '\0';
    return c;
}
static const float *tensor_f32(const char *name, int64_t *n) {
    struct mms_gguf_tensor_info ti;
    int64_t idx = mms_gguf_find_tensor(fx, name);
    if (idx < 0 || mms_gguf_get_tensor(fx, idx, &ti) != MMS_OK || ti.type != MMS_TYPE_F32) { EXPECT(0, "tensor %s missing", name); return NULL; }
    *n = ti.ne[0];
    return (const float *)ti.data;
}

/* -- chat template -- */

static void test_chat_matches_transformers(void) {
    uint32_t count = 0, i;
    int checked = 0, errors = 0;
    EXPECT(mms_gguf_get_u32(fx, "chat.count", &count) == MMS_OK && count >= 15, "chat.count %u", count);
    for (i = 0; i < count; i++) {
        char key[64];
        struct mms_chat_message msgs[8];
        char *roles[8], *texts[8], *expected, *error, *date, out[4096];
        int32_t has_text[8], images[8];
        int64_t n = 0, j;
        bool gen = false;
        int got;
        snprintf(key, sizeof key, "chat.%u.images", i);
        mms_gguf_get_arr_i32(fx, key, images, 8, &n);
        if (n == 1 && images[0] < 0) n = 0;
        snprintf(key, sizeof key, "chat.%u.has_text", i);
        mms_gguf_get_arr_i32(fx, key, has_text, 8, NULL);
        for (j = 0; j < n; j++) {
            snprintf(key, sizeof key, "chat.%u.roles", i);  roles[j] = key_str(key, j);
            snprintf(key, sizeof key, "chat.%u.texts", i);  texts[j] = key_str(key, j);
            msgs[j].role = roles[j];
            msgs[j].text = has_text[j] ? texts[j] : NULL;
            msgs[j].n_images = images[j];
        }
        snprintf(key, sizeof key, "chat.%u.generation_prompt", i);  mms_gguf_get_bool(fx, key, &gen);
        snprintf(key, sizeof key, "chat.%u.date", i);      date = key_str(key, -1);
        snprintf(key, sizeof key, "chat.%u.expected", i);  expected = key_str(key, -1);
        snprintf(key, sizeof key, "chat.%u.error", i);     error = key_str(key, -1);
        mms_clear_error();
        got = mms_chat_apply_template(msgs, (int)n, gen, date, out, sizeof out);
        if (error[0]) {
            errors++;
            EXPECT(got == MMS_ERR_INVALID_ARG, "case %u: transformers raised '%s', we returned %d", i, error, got);
        } else {
            EXPECT(got == (int)strlen(expected) && strcmp(out, expected) == 0, "case %u: got %d bytes\n%s\nwant %d bytes\n%s", i, got,
                   got > 0 ? out : mms_last_error(), (int)strlen(expected), expected);
            checked++;
        }
        for (j = 0; j < n; j++) { free(roles[j]); free(texts[j]); }
        free(date); free(expected); free(error);
    }
    EXPECT(checked >= 12 && errors >= 2, "checked %d renderings and %d errors", checked, errors);
    printf("    %d renderings equal to transformers', %d errors where it raises\n", checked, errors);
}

static void test_chat_buffer_and_errors(void) {
    struct mms_chat_message m[3] = { { "user", "Describe", 1 }, { "assistant", "a cat", 0 }, { "system", "s", 0 } };
    const char *want = "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n<|image|>Describe<|eot_id|>";
    char small[10], big[256];
    int n = mms_chat_apply_template(m, 1, false, NULL, NULL, 0);
    EXPECT(n == (int)strlen(want), "length-only call gave %d", n);
    memset(small, 'x', sizeof small);
    EXPECT(mms_chat_apply_template(m, 1, false, NULL, small, sizeof small) == n && small[9] == '\0' && memcmp(small, want, 9) == 0,
           "truncated output '%.10s'", small);
    EXPECT(mms_chat_apply_template(m, 1, false, NULL, big, sizeof big) == n && strcmp(big, want) == 0, "got '%s'", big);
    EXPECT_ERROR(mms_chat_apply_template(m, 0, true, NULL, big, sizeof big), MMS_ERR_INVALID_ARG, "at least one message");
    EXPECT_ERROR(mms_chat_apply_template(NULL, 1, true, NULL, big, sizeof big), MMS_ERR_INVALID_ARG, "message");
    m[1].role = NULL;
    EXPECT_ERROR(mms_chat_apply_template(m, 2, true, NULL, big, sizeof big), MMS_ERR_INVALID_ARG, "message 1 has no role");
    m[1].role = "tool";
    m[1].n_images = 1;
    EXPECT_ERROR(mms_chat_apply_template(m, 2, true, NULL, big, sizeof big), MMS_ERR_INVALID_ARG, "tool", "cannot hold images");
    m[2].n_images = 2;
    EXPECT_ERROR(mms_chat_apply_template(m + 2, 1, true, NULL, big, sizeof big), MMS_ERR_INVALID_ARG, "system message cannot hold images");
    m[0].role = "system";
    m[0].n_images = 0;
    m[1].role = "user";
    EXPECT_ERROR(mms_chat_apply_template(m, 2, true, NULL, big, sizeof big), MMS_ERR_INVALID_ARG, "incompatible with system");
}

/* -- sampling -- */

static void test_sampling_matches_transformers(void) {
    uint32_t count = 0, i;
    double worst = 0.0;
    EXPECT(mms_gguf_get_u32(fx, "sampling.count", &count) == MMS_OK && count >= 30, "sampling.count %u", count);
    for (i = 0; i < count; i++) {
        char key[64];
        struct mms_sampler_params p = mms_sampler_default_params();
        struct mms_sampler *s;
        int32_t hist[64];
        int64_t nh = 0, nv = 0, nv2 = 0, j;
        const float *logits, *want;
        float *got;
        int32_t greedy;
        snprintf(key, sizeof key, "sampling.%u.temperature", i);     p.temperature = key_f32(key);
        snprintf(key, sizeof key, "sampling.%u.top_p", i);           p.top_p = key_f32(key);
        snprintf(key, sizeof key, "sampling.%u.min_p", i);           p.min_p = key_f32(key);
        snprintf(key, sizeof key, "sampling.%u.repeat_penalty", i);  p.repeat_penalty = key_f32(key);
        snprintf(key, sizeof key, "sampling.%u.top_k", i);           p.top_k = key_i32(key);
        snprintf(key, sizeof key, "sampling.%u.greedy_id", i);       greedy = key_i32(key);
        snprintf(key, sizeof key, "sampling.%u.history", i);
        mms_gguf_get_arr_i32(fx, key, hist, 64, &nh);
        snprintf(key, sizeof key, "sampling.%u.logits", i);          logits = tensor_f32(key, &nv);
        snprintf(key, sizeof key, "sampling.%u.probs", i);           want = tensor_f32(key, &nv2);
        if (!logits || !want || nv != nv2) continue;
        s = mms_sampler_new(&p);
        EXPECT(s != NULL, "case %u: %s", i, mms_last_error());
        if (!s) continue;
        for (j = 0; j < nh; j++) if (hist[j] >= 0) mms_sampler_accept(s, hist[j]);
        got = (float *)malloc(sizeof *got * (size_t)nv);
        EXPECT(mms_sampler_probs(s, logits, (int)nv, got) == MMS_OK, "case %u: %s", i, mms_last_error());
        for (j = 0; j < nv; j++) {
            const double d = fabs((double)got[j] - (double)want[j]);
            if (d > worst) worst = d;
            if ((got[j] == 0.0f) != (want[j] == 0.0f) || d > 1e-5) {
                EXPECT(0, "case %u (T %g, k %d, p %g, min_p %g, penalty %g): token %lld has p %.8g, transformers %.8g", i, (double)p.temperature,
                       p.top_k, (double)p.top_p, (double)p.min_p, (double)p.repeat_penalty, (long long)j, (double)got[j], (double)want[j]);
                break;
            }
        }
        if (greedy >= 0) EXPECT(mms_sampler_sample(s, logits, (int)nv) == greedy, "case %u: greedy differs from %d", i, greedy);
        free(got);
        mms_sampler_free(s);
    }
    printf("    %u distributions, largest difference %.3g\n", count, worst);
}

/* Draws follow the distribution: frequencies of 40000 draws within 5 sigma of each probability. */
static void test_sampling_draws(void) {
    const float logits[7] = { 0.1f, 1.2f, -0.5f, 2.0f, 0.7f, -3.0f, 1.9f };
    struct mms_sampler_params p = mms_sampler_default_params();
    struct mms_sampler *s;
    float probs[7];
    int counts[7] = { 0 }, i;
    const int N = 40000;
    p.temperature = 0.9f;
    p.top_p = 0.95f;
    p.seed = 1234;
    s = mms_sampler_new(&p);
    mms_sampler_probs(s, logits, 7, probs);
    for (i = 0; i < N; i++) {
        int32_t id = mms_sampler_sample(s, logits, 7);
        EXPECT(id >= 0 && id < 7, "draw %d gave %d", i, id);
        if (id >= 0 && id < 7) counts[id]++;
    }
    for (i = 0; i < 7; i++) {
        const double mean = probs[i] * N, sd = sqrt(N * probs[i] * (1.0 - probs[i]));
        EXPECT(fabs(counts[i] - mean) <= 5.0 * sd + 1e-9, "token %d drawn %d times, expected %.0f +- %.0f", i, counts[i], mean, sd);
    }
    EXPECT(probs[5] == 0.0f && counts[5] == 0, "the filtered token was drawn %d times", counts[5]);
    mms_sampler_free(s);
}

static void test_sampling_seeds(void) {
    struct mms_sampler_params p = mms_sampler_default_params();
    float logits[100];
    int32_t a[64], b[64];
    struct mms_sampler *s1, *s2;
    int i, same = 0;
    for (i = 0; i < 100; i++) logits[i] = (float)sin(i * 0.7) * 2.0f;
    p.temperature = 1.0f;
    p.seed = 42;
    s1 = mms_sampler_new(&p);
    s2 = mms_sampler_new(&p);
    for (i = 0; i < 64; i++) { a[i] = mms_sampler_sample(s1, logits, 100); b[i] = mms_sampler_sample(s2, logits, 100); }
    EXPECT(memcmp(a, b, sizeof a) == 0, "two samplers with one seed differ");
    mms_sampler_reset(s1);
    for (i = 0; i < 64; i++) b[i] = mms_sampler_sample(s1, logits, 100);
    EXPECT(memcmp(a, b, sizeof a) == 0, "reset does not replay the seed");
    mms_sampler_free(s2);
    p.seed = 43;
    s2 = mms_sampler_new(&p);
    for (i = 0; i < 64; i++) same += mms_sampler_sample(s2, logits, 100) == a[i];
    EXPECT(same < 32, "another seed gave %d of 64 equal draws", same);
    mms_sampler_free(s1);
    mms_sampler_free(s2);
}

/* The penalty remembers what the sampler chose, and repeat_last_n limits the window. */
static void test_sampling_history(void) {
    const float logits[4] = { 3.0f, 2.9f, 2.8f, -1.0f };
    struct mms_sampler_params p = mms_sampler_default_params();
    struct mms_sampler *s;
    float probs[4];
    p.repeat_penalty = 1.1f;   /* 3.0 / 1.1 = 2.73 < 2.8 */
    s = mms_sampler_new(&p);
    EXPECT(mms_sampler_sample(s, logits, 4) == 0, "first greedy pick");
    EXPECT(mms_sampler_sample(s, logits, 4) == 1, "the penalty did not see the first pick");
    EXPECT(mms_sampler_sample(s, logits, 4) == 2, "the penalty did not see the second pick");
    mms_sampler_free(s);
    p.repeat_last_n = 1;
    s = mms_sampler_new(&p);
    mms_sampler_accept(s, 1);
    mms_sampler_accept(s, 0);   /* the window holds only this one */
    EXPECT(mms_sampler_sample(s, logits, 4) == 1, "a window of 1 should forget token 1");
    mms_sampler_free(s);
    /* penalty on a negative logit multiplies: with T 1, token 3's weight shrinks by exp(-1 * 0.1) */
    p.repeat_last_n = 0;
    p.temperature = 1.0f;
    s = mms_sampler_new(&p);
    mms_sampler_accept(s, 3);
    mms_sampler_accept(s, 3);   /* twice: penalised once */
    mms_sampler_probs(s, logits, 4, probs);
    {
        double z = exp(3.0) + exp(2.9) + exp(2.8) + exp(-1.1);
        EXPECT(fabs(probs[3] - exp(-1.1) / z) < 1e-7, "p3 %.9g, expected %.9g", (double)probs[3], exp(-1.1) / z);
    }
    mms_sampler_free(s);
}

static void test_sampling_errors(void) {
    struct mms_sampler_params p = mms_sampler_default_params();
    struct mms_sampler *s;
    float logits[3] = { 1.0f, NAN, 0.0f }, probs[3];
    p.top_p = 1.5f;
    mms_clear_error();
    EXPECT(mms_sampler_new(&p) == NULL && strstr(mms_last_error(), "top_p") != NULL, "top_p 1.5 accepted: %s", mms_last_error());
    p = mms_sampler_default_params();
    p.temperature = -1.0f;
    EXPECT(mms_sampler_new(&p) == NULL && strstr(mms_last_error(), "temperature") != NULL, "negative temperature accepted");
    p.temperature = INFINITY;
    EXPECT(mms_sampler_new(&p) == NULL && strstr(mms_last_error(), "temperature") != NULL, "infinite temperature accepted");
    p = mms_sampler_default_params();
    p.repeat_penalty = -0.5f;
    EXPECT(mms_sampler_new(&p) == NULL, "negative penalty accepted");
    p.repeat_penalty = NAN;
    EXPECT(mms_sampler_new(&p) == NULL, "NaN penalty accepted");
    {   /* zeroed means the defaults: greedy, top_p and the penalty off */
        const float l[3] = { 0.5f, 2.0f, 1.0f };
        struct mms_sampler_params zero;
        memset(&zero, 0, sizeof zero);
        s = mms_sampler_new(&zero);
        EXPECT(s != NULL && mms_sampler_sample(s, l, 3) == 1 && mms_sampler_sample(s, l, 3) == 1, "a zeroed struct is greedy without penalty: %s",
               mms_last_error());
        mms_sampler_free(s);
    }
    s = mms_sampler_new(NULL);
    EXPECT(s != NULL, "default sampler: %s", mms_last_error());
    mms_clear_error();
    EXPECT(mms_sampler_sample(s, logits, 3) == -1 && strstr(mms_last_error(), "logit 1 is NaN") != NULL, "NaN: %s", mms_last_error());
    EXPECT_ERROR(mms_sampler_probs(s, logits, 0, probs), MMS_ERR_INVALID_ARG, "n_vocab");
    EXPECT_ERROR(mms_sampler_probs(s, NULL, 3, probs), MMS_ERR_INVALID_ARG, "logits");
    mms_sampler_free(s);
}

int main(void) {
    test_seed();
    test_capture_log();
    fx = mms_gguf_open("tests/fixtures/text/chat-sampling-ref.gguf");
    if (!fx) printf("    cannot open the fixture: %s\n", mms_last_error());
    if (fx) {
        RUN(test_chat_matches_transformers);
        RUN(test_sampling_matches_transformers);
    } else {
        test__failed++;
    }
    RUN(test_chat_buffer_and_errors);
    RUN(test_sampling_draws);
    RUN(test_sampling_seeds);
    RUN(test_sampling_history);
    RUN(test_sampling_errors);
    mms_gguf_close(fx);
    return test_summary();
}
