/* Several conversations at once on one loaded model. Threads: each with its own context on the
   shared model runs the reference conversations of tests/fixtures/mllama/tiny4 (image first, image
   after text, text only, two images, two consecutive image tokens: transformers' logits and greedy
   tokens, tools/gen_mllama_fixtures.py), in different orders and twice over, and must get the
   serial run's logits bit for bit; the serial run is itself checked against transformers. Built
   also under ThreadSanitizer (make test-tsan). */
#define MMSCHED_IMPLEMENTATION
#include "../mmsched.h"
#include "test.h"
#include "mllama_load.h"
#include "ref_gguf.h"

#define FIX       "tests/fixtures/mllama/"
#define N_GREEDY  16
#define MAX_TOK   64
#define N_THREADS 3

static mms_backend_t             cpu;
static struct mms_gguf          *ref;
static struct mms_mllama_model  *model;
static struct mms_mllama_image   images[8];
static int                       n_images, n_prompts, n_vocab;

/* One reference conversation: its prompt, images and what transformers computed. */
struct prompt {
    int32_t tokens[MAX_TOK], images[8], want_greedy[N_GREEDY];
    int     n_tokens, n_images;
    const float *want_logits;          /* [vocab, n_tokens] */
};
static struct prompt prompts[8];

/* What one run of a conversation gave: every prompt row's logits, then each generated step's. */
struct result {
    float  *logits;                    /* [(n_tokens + N_GREEDY - 1), vocab] */
    int32_t greedy[N_GREEDY];
    enum mms_status status;
    char    error[1100];
};

static size_t result_rows(const struct prompt *p) { return (size_t)p->n_tokens + N_GREEDY - 1; }

static struct mms_mllama_context *context_new(void) {
    struct mms_mllama_context_params cp;
    memset(&cp, 0, sizeof cp);
    cp.n_ctx = 128;
    cp.n_batch = 64;
    cp.max_images = 2;
    return mms_mllama_context_new(model, &cp);
}

static int32_t argmax(const float *l) {
    int32_t best = 0, j;
    for (j = 1; j < n_vocab; j++) if (l[j] > l[best]) best = j;
    return best;
}

/* Conversation p from a clear context: no EXPECT here (it runs on other threads); the status and
   message go into r. */
static void run_conversation(struct mms_mllama_context *ctx, const struct prompt *p, struct result *r) {
    bool want[MAX_TOK];
    int i;
    r->status = MMS_OK;
    mms_mllama_kv_clear(ctx);
    for (i = 0; i < p->n_tokens; i++) want[i] = true;
    for (i = 0; i < p->n_images && r->status == MMS_OK; i++) r->status = mms_mllama_add_image(ctx, &images[p->images[i]]);
    if (r->status == MMS_OK) r->status = mms_mllama_decode(ctx, p->tokens, p->n_tokens, want);
    for (i = 0; r->status == MMS_OK && i < p->n_tokens; i++)
        memcpy(r->logits + (size_t)i * (size_t)n_vocab, mms_mllama_get_logits(ctx, i), sizeof(float) * (size_t)n_vocab);
    for (i = 0; r->status == MMS_OK && i < N_GREEDY; i++) {
        const float *l = mms_mllama_get_logits(ctx, mms_mllama_get_n_logits(ctx) - 1);
        if (i > 0) memcpy(r->logits + (size_t)(p->n_tokens + i - 1) * (size_t)n_vocab, l, sizeof(float) * (size_t)n_vocab);
        r->greedy[i] = argmax(l);
        if (i < N_GREEDY - 1) r->status = mms_mllama_decode(ctx, &r->greedy[i], 1, NULL);
    }
    if (r->status != MMS_OK) snprintf(r->error, sizeof r->error, "%s", mms_last_error());
}

static double nmse(const float *got, const float *want, size_t n) {
    double num = 0, den = 0;
    size_t i;
    for (i = 0; i < n; i++) {
        double d = (double)got[i] - (double)want[i];
        num += d != d ? INFINITY : d * d;
        den += (double)want[i] * want[i];
    }
    return den > 0 ? num / den : num;
}

static struct result *results_new(void) {
    struct result *r = (struct result *)calloc((size_t)n_prompts, sizeof *r);
    int p;
    for (p = 0; r && p < n_prompts; p++) r[p].logits = (float *)calloc(result_rows(&prompts[p]) * (size_t)n_vocab, sizeof(float));
    return r;
}

static void results_free(struct result *r) {
    int p;
    for (p = 0; r && p < n_prompts; p++) free(r[p].logits);
    free(r);
}

static struct result *serial;   /* every conversation alone on one context, checked against transformers */

static void test_serial_against_transformers(void) {
    struct mms_mllama_context *ctx = context_new();
    int p;
    EXPECT(ctx != NULL, "context: %s", mms_last_error());
    serial = results_new();
    for (p = 0; ctx && p < n_prompts; p++) {
        run_conversation(ctx, &prompts[p], &serial[p]);
        EXPECT(serial[p].status == MMS_OK, "prompt %d: %s", p, serial[p].error);
        if (serial[p].status != MMS_OK) continue;
        EXPECT(nmse(serial[p].logits, prompts[p].want_logits, (size_t)prompts[p].n_tokens * (size_t)n_vocab) <= 1e-9,
               "prompt %d: logits nmse %.3g against transformers", p,
               nmse(serial[p].logits, prompts[p].want_logits, (size_t)prompts[p].n_tokens * (size_t)n_vocab));
        EXPECT(memcmp(serial[p].greedy, prompts[p].want_greedy, sizeof serial[p].greedy) == 0, "prompt %d: greedy tokens differ from transformers'", p);
    }
    mms_mllama_context_free(ctx);
}

struct worker {
    int            id;
    mms__thread    thread;
    struct result *res[2];     /* two rounds on the same context (the image cache reused) */
    enum mms_status status;
    char           error[1100];
};

static void *worker_main(void *arg) {
    struct worker *w = (struct worker *)arg;
    struct mms_mllama_context *ctx = context_new();
    int round, k;
    if (!ctx) {
        w->status = mms_last_status();
        snprintf(w->error, sizeof w->error, "context: %s", mms_last_error());
        return NULL;
    }
    for (round = 0; round < 2; round++)
        for (k = 0; k < n_prompts; k++) {                        /* each thread in another order */
            int p = (k + w->id * (round + 1)) % n_prompts;
            run_conversation(ctx, &prompts[p], &w->res[round][p]);
        }
    mms_mllama_context_free(ctx);
    return NULL;
}

/* N threads, each with its own context on the one model, all at once: the serial results exactly. */
static void test_threads_equal_serial(void) {
    struct worker w[N_THREADS];
    int t, round, p;
    if (!serial) { test_skip("no serial run"); return; }
    memset(w, 0, sizeof w);
    for (t = 0; t < N_THREADS; t++) {
        w[t].id = t + 1;
        w[t].res[0] = results_new();
        w[t].res[1] = results_new();
        EXPECT(mms__thread_create(&w[t].thread, worker_main, &w[t]), "thread %d did not start", t);
    }
    for (t = 0; t < N_THREADS; t++) mms__thread_join(w[t].thread);
    for (t = 0; t < N_THREADS; t++) {
        EXPECT(w[t].status == MMS_OK, "thread %d: %s", t, w[t].error);
        for (round = 0; w[t].status == MMS_OK && round < 2; round++)
            for (p = 0; p < n_prompts; p++) {
                const struct result *r = &w[t].res[round][p];
                EXPECT(r->status == MMS_OK, "thread %d round %d prompt %d: %s", t, round, p, r->error);
                if (r->status != MMS_OK) continue;
                EXPECT(memcmp(r->greedy, serial[p].greedy, sizeof r->greedy) == 0, "thread %d round %d prompt %d: other greedy tokens", t, round, p);
                EXPECT(memcmp(r->logits, serial[p].logits, result_rows(&prompts[p]) * (size_t)n_vocab * sizeof(float)) == 0,
                       "thread %d round %d prompt %d: logits differ from the serial run's (nmse %.3g)", t, round, p,
                       nmse(r->logits, serial[p].logits, result_rows(&prompts[p]) * (size_t)n_vocab));
            }
        results_free(w[t].res[0]);
        results_free(w[t].res[1]);
    }
}

static bool read_reference(void) {
    const struct mms_mllama_hparams *hp = mms_mllama_model_get_hparams(model);
    struct mms_mllama_image_params ip = mms_mllama_model_image_params(model);
    int k;
    n_vocab = hp->n_vocab;
    n_images = (int)ref_u32(ref, "ref.n_images%.0d", 0);
    n_prompts = (int)ref_u32(ref, "ref.n_prompts%.0d", 0);
    if (n_images > 8 || n_prompts > 8 || n_prompts < 1) return false;
    for (k = 0; k < n_images; k++) {
        struct mms_gguf_tensor_info info;
        const uint8_t *rgb = (const uint8_t *)ref_tensor(ref, "img.%d.rgb", k, &info);
        if (!rgb || mms_mllama_preprocess_image(&ip, rgb, (int)ref_u32(ref, "img.%d.width", k), (int)ref_u32(ref, "img.%d.height", k), 0,
                                                &images[k]) != MMS_OK) return false;
    }
    for (k = 0; k < n_prompts; k++) {
        struct prompt *p = &prompts[k];
        struct mms_gguf_tensor_info info;
        p->n_tokens = (int)ref_i32s(ref, "prompt.%d.tokens", k, p->tokens, MAX_TOK);
        p->n_images = (int)ref_i32s(ref, "prompt.%d.images", k, p->images, 8);
        ref_i32s(ref, "prompt.%d.greedy", k, p->want_greedy, N_GREEDY);
        p->want_logits = (const float *)ref_tensor(ref, "prompt.%d.logits", k, &info);
        if (!p->want_logits || p->n_tokens < 1 || p->n_tokens > MAX_TOK || info.size != sizeof(float) * (size_t)p->n_tokens * (size_t)n_vocab) return false;
    }
    return true;
}

int main(void) {
    int k;
    cpu = mms_backend_cpu_init();
    ref = mms_gguf_open(FIX "tiny4-ref.gguf");
    model = ref && cpu ? test_load_mllama(cpu, FIX "tiny4.gguf", NULL, NULL, 0, false) : NULL;
    test__case_name = "reading the reference";
    if (!model || !read_reference()) {
        test_fail_all("the tiny4 fixture and its reference", mms_last_error());
        return 1;
    }
    RUN(test_serial_against_transformers);
    RUN(test_threads_equal_serial);
    results_free(serial);
    for (k = 0; k < n_images; k++) mms_mllama_image_free(&images[k]);
    mms_mllama_model_free(model);
    mms_gguf_close(ref);
    mms_backend_free(cpu);
    return test_summary();
}
