/* The serving engine (src/serve/) with the bundled demo model. References: every conversation of
   the demo reference (tests/fixtures/demo/demo-ref.gguf: captions, questions, two and three
   pictures, two-turn chats, pictures outside the model's world) run alone through the plain
   mllama API, whose prompt tokens must equal the reference's (transformers' template) and whose
   greedy answers must equal transformers'; and build/mllama's stdout for the same messages and
   pictures (written as BMP files, which it decodes to the same pixels). Checked: many requests
   from several threads at once (streaming reads with short timeouts, polling, blocking reads; a
   sampled request against the same sampler alone), each answer equal to its reference; cancel
   (a running and a queued request; the slot is reused, the others unaffected), mms_reply_free
   of a running request, a full queue (MMS_ERR_BUSY), the engine freed with requests in flight;
   prefix reuse (a returning conversation reuses its slot's KV cache and answers as a fresh
   engine does; one that adds a picture reuses nothing); the image store's comparison (every
   hash forced equal) and its budget; stop strings split across tokens; max_tokens; invalid
   requests; constrained requests (a JSON Schema) from several threads, each as the same
   constraint alone. Built also under ThreadSanitizer (make test-tsan). */
#define _POSIX_C_SOURCE 200809L
#define MMSCHED_IMPLEMENTATION
#include "../mmsched.h"
#include "test.h"
#include "run_program.h"
#include "mllama_load.h"
#include <time.h>

#define DEMO      "models/mllama-demo.gguf"
#define REF       "tests/fixtures/demo/demo-ref.gguf"
#ifndef CLI
#  define CLI     "build/mllama"
#endif
#define MAX_CASES 48
#define MAX_PICS  3
#define N_CTX     512

struct picture { uint8_t *rgb; int w, h; };

/* A conversation of the reference: its turns (a user message each, pictures before the text) and
   what transformers answered to the last turn; then what the plain API alone answered. */
struct conv {
    char           kind[16], turns[2][256], want[512];
    int            n_turns, turn_images[2], n_pics;
    struct picture pics[MAX_PICS];
    int32_t        want_ids[256];        /* the whole conversation's prompt, as transformers rendered it */
    int            n_want_ids;
    char           answers[2][512];      /* alone: each turn's answer (the first goes into the second's messages) */
};

static struct mms_mllama_model *model;
static struct mms_vocab        *vocab;
static mms_backend_t            cpu;
static struct conv              convs[MAX_CASES];
static int                      n_convs, max_new;
static char                     tmpdir[64];

/* -- the reference -- */

static bool ref_str(struct mms_gguf *g, const char *fmt, int k, char *out, size_t cap) {
    char key[96];
    const char *v;
    size_t len;
    snprintf(key, sizeof key, fmt, k);
    if (mms_gguf_get_str(g, key, &v, &len) != MMS_OK) return false;
    snprintf(out, cap, "%.*s", (int)len, v);
    return true;
}

static uint32_t ref_u32(struct mms_gguf *g, const char *fmt, int k, int j) {
    char key[96];
    uint32_t v = 0;
    snprintf(key, sizeof key, fmt, k, j);
    mms_gguf_get_u32(g, key, &v);
    return v;
}

static bool read_reference(void) {
    struct mms_gguf *g = mms_gguf_open(REF);
    int k, j;
    char prompt[600], answers[1100], *nl;
    if (!g) return false;
    n_convs = (int)ref_u32(g, "ref.n_cases%.0d", 0, 0);
    max_new = (int)ref_u32(g, "ref.max_new_tokens%.0d", 0, 0);
    if (n_convs > MAX_CASES) n_convs = MAX_CASES;
    for (k = 0; k < n_convs; k++) {
        struct conv *c = &convs[k];
        char key[96];
        int64_t n = 0;
        memset(c, 0, sizeof *c);
        if (!ref_str(g, "case.%d.kind", k, c->kind, sizeof c->kind) || !ref_str(g, "case.%d.prompt", k, prompt, sizeof prompt) ||
            !ref_str(g, "case.%d.answers_text", k, answers, sizeof answers)) { mms_gguf_close(g); return false; }
        c->n_pics = (int)ref_u32(g, "case.%d.n_images", k, 0);
        snprintf(key, sizeof key, "case.%d.turn_images", k);
        if (mms_gguf_get_arr_i32(g, key, c->turn_images, 2, &n) != MMS_OK || n < 1 || n > 2 || c->n_pics > MAX_PICS) { mms_gguf_close(g); return false; }
        c->n_turns = (int)n;
        nl = strchr(prompt, '\n');
        if ((c->n_turns == 2) != (nl != NULL)) { mms_gguf_close(g); return false; }
        if (nl) { *nl = '\0'; mms__copy_str(c->turns[1], sizeof c->turns[1], nl + 1); }
        mms__copy_str(c->turns[0], sizeof c->turns[0], prompt);
        nl = strrchr(answers, '\n');
        mms__copy_str(c->want, sizeof c->want, nl ? nl + 1 : answers);
        snprintf(key, sizeof key, "case.%d.prompt_ids", k);
        if (mms_gguf_get_arr_i32(g, key, c->want_ids, 256, &n) != MMS_OK || n > 256) { mms_gguf_close(g); return false; }
        c->n_want_ids = (int)n;
        for (j = 0; j < c->n_pics; j++) {
            struct mms_gguf_tensor_info info;
            int64_t idx;
            c->pics[j].w = (int)ref_u32(g, "case.%d.image.%d.width", k, j);
            c->pics[j].h = (int)ref_u32(g, "case.%d.image.%d.height", k, j);
            snprintf(key, sizeof key, "case.%d.image.%d.rgb", k, j);
            if ((idx = mms_gguf_find_tensor(g, key)) < 0 || mms_gguf_get_tensor(g, idx, &info) != MMS_OK ||
                info.size != (size_t)c->pics[j].w * (size_t)c->pics[j].h * 3 || !(c->pics[j].rgb = (uint8_t *)malloc(info.size))) {
                mms_gguf_close(g);
                return false;
            }
            memcpy(c->pics[j].rgb, info.data, info.size);
        }
    }
    mms_gguf_close(g);
    return n_convs > 0 && max_new > 0;
}

/* The messages and pictures of conversation c up to turn t (0 or 1; the assistant's answer to
   turn 0 from answers[0]). Returns the number of messages. */
static int conv_messages(const struct conv *c, int t, struct mms_chat_message *msgs, struct mms_image_rgb *imgs, int *n_imgs) {
    int n = 0, i, p = 0;
    for (i = 0; i <= t; i++) {
        int j;
        if (i > 0) { msgs[n].role = "assistant"; msgs[n].text = c->answers[0]; msgs[n].n_images = 0; n++; }
        msgs[n].role = "user";
        msgs[n].text = c->turns[i];
        msgs[n].n_images = c->turn_images[i];
        n++;
        for (j = 0; j < c->turn_images[i]; j++, p++) {
            imgs[p].rgb = c->pics[p].rgb;
            imgs[p].width = c->pics[p].w;
            imgs[p].height = c->pics[p].h;
            imgs[p].stride = 0;
        }
    }
    *n_imgs = p;
    return n;
}

/* -- the plain API alone, as build/mllama runs a conversation -- */

struct alone {
    char   text[1024];
    int    n_gen, n_prompt;
    int32_t tokens[300];
    enum mms_finish finish;
};

/* One request run alone on a context of its own: prompt, pictures, then the CLI's loop (an end
   token stops; the text; max_tokens or a full context stops; the token decoded); its grammar
   constrains the sampler as build/mllama --json-schema does. */
static struct mms_mllama_context *alone_ctx;   /* one sequence, cleared for each run */

static bool run_alone(const struct mms_request *rq, struct alone *out) {
    struct mms_mllama_context_params cp;
    struct mms_mllama_context *ctx;
    struct mms_sampler *smp = NULL;
    struct mms_constraint *con = NULL;
    struct mms_detokenizer d;
    struct mms_mllama_batch b;
    char prompt[4096], piece[400];
    int n, i, k;
    bool ok = false;
    memset(out, 0, sizeof *out);
    memset(&cp, 0, sizeof cp);
    cp.n_ctx = N_CTX;
    cp.max_images = 4;
    if (!alone_ctx && !(alone_ctx = mms_mllama_context_new(model, &cp))) return false;
    ctx = alone_ctx;
    mms_mllama_seq_clear(ctx, 0);
    if (rq->messages) n = mms_mllama_chat_prompt(rq->messages, rq->n_messages, true, rq->date, prompt, sizeof prompt);
    else n = snprintf(prompt, sizeof prompt, "%s", rq->prompt);
    if (n < 0 || n >= (int)sizeof prompt) goto done;
    out->n_prompt = mms_tokenize(vocab, prompt, (size_t)n, out->tokens, 300, rq->prompt != NULL, true);
    if (out->n_prompt < 1 || out->n_prompt > 300) goto done;
    for (i = 0; i < rq->n_images; i++)
        if (mms_mllama_seq_add_image_rgb(ctx, 0, rq->images[i].rgb, rq->images[i].width, rq->images[i].height, rq->images[i].stride) != MMS_OK) goto done;
    memset(&b, 0, sizeof b);
    b.n_tokens = out->n_prompt;
    b.tokens = out->tokens;
    if (mms_mllama_decode(ctx, &b) != MMS_OK || !(smp = mms_sampler_new(&rq->sampling))) goto done;
    if (rq->grammar && !(con = mms_constraint_new(rq->grammar, vocab))) goto done;
    mms_sampler_set_constraint(smp, con);
    for (i = 0; i < out->n_prompt; i++) mms_sampler_accept(smp, out->tokens[i]);
    memset(&d, 0, sizeof d);
    out->finish = MMS_FINISH_LENGTH;
    for (;;) {
        int32_t id = mms_sampler_sample(smp, mms_mllama_get_logits(ctx, mms_mllama_get_n_logits(ctx) - 1), mms_mllama_model_get_hparams(model)->n_vocab);
        out->n_gen++;
        if (id < 0) goto done;
        if (mms_vocab_is_eog(vocab, id)) { out->finish = MMS_FINISH_STOP; break; }
        k = mms_detokenizer_push(vocab, &d, id, piece, sizeof piece, false);
        if (k > 0) strncat(out->text, piece, sizeof out->text - strlen(out->text) - 1);
        if ((rq->max_tokens > 0 && out->n_gen >= rq->max_tokens) || mms_mllama_seq_get_n_past(ctx, 0) >= N_CTX) break;
        b.n_tokens = 1;
        b.tokens = &id;
        if (mms_mllama_decode(ctx, &b) != MMS_OK) goto done;
    }
    k = mms_detokenizer_flush(&d, piece, sizeof piece);
    if (k > 0) strncat(out->text, piece, sizeof out->text - strlen(out->text) - 1);
    ok = true;
done:
    mms_sampler_free(smp);
    mms_constraint_free(con);
    return ok;
}

static void request_for(const struct conv *c, int t, struct mms_request *rq, struct mms_chat_message *msgs, struct mms_image_rgb *imgs) {
    int n_imgs;
    memset(rq, 0, sizeof *rq);
    rq->n_messages = conv_messages(c, t, msgs, imgs, &n_imgs);
    rq->messages = msgs;
    rq->images = imgs;
    rq->n_images = n_imgs;
    rq->max_tokens = max_new;
}

/* Every conversation alone: its prompt tokens are transformers', its answers transformers'. */
static void test_alone_equals_transformers(void) {
    int k, t, n_equal = 0;
    for (k = 0; k < n_convs; k++) {
        struct conv *c = &convs[k];
        for (t = 0; t < c->n_turns; t++) {
            struct mms_chat_message msgs[4];
            struct mms_image_rgb imgs[MAX_PICS];
            struct mms_request rq;
            struct alone a;
            request_for(c, t, &rq, msgs, imgs);
            EXPECT(run_alone(&rq, &a), "case %d turn %d alone: %s", k, t, mms_last_error());
            mms__copy_str(c->answers[t], sizeof c->answers[t], a.text);
            if (t == c->n_turns - 1) {
                EXPECT(a.n_prompt == c->n_want_ids && !memcmp(a.tokens, c->want_ids, sizeof(int32_t) * (size_t)a.n_prompt),
                       "case %d (%s): the prompt's %d tokens are not transformers' %d", k, c->kind, a.n_prompt, c->n_want_ids);
                n_equal += !strcmp(a.text, c->want);
                EXPECT(!strcmp(a.text, c->want), "case %d (%s): alone '%s', transformers '%s'", k, c->kind, a.text, c->want);
            }
        }
    }
    printf("    %d of %d conversations: prompt tokens and answers equal transformers'\n", n_equal, n_convs);
}

/* -- the engine -- */

static struct mms_engine *engine_with(int n_slots, int max_queue, size_t image_store, int n_ctx, int n_batch) {
    struct mms_engine_params ep;
    memset(&ep, 0, sizeof ep);
    ep.model = model;
    ep.vocab = vocab;
    ep.n_slots = n_slots;
    ep.n_ctx = n_ctx;
    ep.n_batch = n_batch;
    ep.max_queue = max_queue;
    ep.image_store = image_store;
    return mms_engine_new(&ep);
}

static struct mms_engine *engine_new(int n_slots, int max_queue, size_t image_store) {
    return engine_with(n_slots, max_queue, image_store, N_CTX, 64);
}

/* A reply read to its end: mode 0 blocking, 1 a 1 ms timeout, 2 polling (timeout 0). */
struct got {
    char   text[1024];
    int    n_events, n_empty;
    enum mms_finish finish;
    enum mms_status status;
    char   error[256];
    struct mms_reply_usage usage;
    bool   read_error;
};

static void read_reply(struct mms_reply *r, int mode, struct got *g) {
    struct mms_reply_event ev;
    memset(g, 0, sizeof *g);
    for (;;) {
        if (mms_reply_next(r, mode == 0 ? -1 : mode == 1 ? 1 : 0, &ev) != MMS_OK) { g->read_error = true; return; }
        g->n_events++;
        if (ev.len == 0 && ev.finish == MMS_FINISH_NONE) { g->n_empty++; if (mode == 2) mms__thread_yield(); continue; }
        if (strlen(g->text) + ev.len < sizeof g->text) strncat(g->text, ev.text, ev.len);
        if (ev.finish != MMS_FINISH_NONE) {
            g->finish = ev.finish;
            g->status = ev.status;
            mms__copy_str(g->error, sizeof g->error, ev.error);
            g->usage = ev.usage;
            return;
        }
    }
}

/* Submits rq and reads the answer. */
static bool ask(struct mms_engine *e, const struct mms_request *rq, int mode, struct got *g) {
    struct mms_reply *r = mms_engine_submit(e, rq);
    if (!r) { memset(g, 0, sizeof *g); mms__copy_str(g->error, sizeof g->error, mms_last_error()); return false; }
    read_reply(r, mode, g);
    mms_reply_free(r);
    return true;
}

struct worker {
    mms__thread thread;
    struct mms_engine *e;
    int id, n_threads;
    struct got got[MAX_CASES][2];
    bool submitted[MAX_CASES][2];
};

/* Worker id takes every n_threads-th conversation, each of its turns (the first turns of the
   chats too: one has no picture), each with another reading mode. */
static void *worker_main(void *arg) {
    struct worker *w = (struct worker *)arg;
    int k, t;
    for (k = w->id; k < n_convs; k += w->n_threads)
        for (t = 0; t < convs[k].n_turns; t++) {
            struct mms_chat_message msgs[4];
            struct mms_image_rgb imgs[MAX_PICS];
            struct mms_request rq;
            request_for(&convs[k], t, &rq, msgs, imgs);
            w->submitted[k][t] = ask(w->e, &rq, (k + t + w->id) % 3, &w->got[k][t]);
        }
    return NULL;
}

/* Four threads at once on three slots (the others queue): every answer as alone, usage sane. */
static void test_threads(void) {
    enum { N_THREADS = 4 };
    static struct worker w[N_THREADS];
    struct mms_engine *e = engine_new(3, 64, 0);
    struct mms_engine_stats st;
    int t, k, turn, n_ok = 0, n_pics = 0, n_requests = 0, n_text_only = 0;
    int64_t completion = 0;
    EXPECT(e != NULL, "engine: %s", mms_last_error());
    if (!e) return;
    memset(w, 0, sizeof w);
    for (t = 0; t < N_THREADS; t++) {
        w[t].e = e;
        w[t].id = t;
        w[t].n_threads = N_THREADS;
        EXPECT(mms__thread_create(&w[t].thread, worker_main, &w[t]), "thread %d", t);
    }
    for (t = 0; t < N_THREADS; t++) mms__thread_join(w[t].thread);
    for (t = 0; t < N_THREADS; t++)
        for (k = t; k < n_convs; k += N_THREADS)
            for (turn = 0; turn < convs[k].n_turns; turn++) {
                const struct got *g = &w[t].got[k][turn];
                const struct conv *c = &convs[k];
                const char *want = c->answers[turn];
                const int shown = turn == 0 ? c->turn_images[0] : c->n_pics;
                EXPECT(w[t].submitted[k][turn] && !g->read_error, "case %d turn %d: not submitted: %s", k, turn, g->error);
                EXPECT(g->finish == MMS_FINISH_STOP && !strcmp(g->text, want), "case %d turn %d (%s, thread %d, mode %d): engine '%s' (finish %d: %s), "
                       "alone '%s'", k, turn, c->kind, t, (k + turn + t) % 3, g->text, g->finish, g->error, want);
                EXPECT(g->usage.prompt_tokens > 0 && g->usage.images == shown && g->usage.completion_tokens >= 1 &&
                       g->usage.images_encoded <= g->usage.images && g->usage.cached_tokens < g->usage.prompt_tokens && g->usage.queue_ms >= 0 &&
                       g->usage.prompt_ms > 0, "case %d turn %d usage: prompt %d, cached %d, completion %d, images %d (%d), encoded %d, "
                       "%.2f/%.2f/%.2f ms", k, turn, g->usage.prompt_tokens, g->usage.cached_tokens, g->usage.completion_tokens, g->usage.images,
                       shown, g->usage.images_encoded, g->usage.queue_ms, g->usage.prompt_ms, g->usage.gen_ms);
                if (turn == c->n_turns - 1)
                    EXPECT(g->usage.prompt_tokens == c->n_want_ids, "case %d: %d prompt tokens, transformers' %d", k, g->usage.prompt_tokens, c->n_want_ids);
                n_ok += g->finish == MMS_FINISH_STOP && !strcmp(g->text, want);
                n_pics += shown;
                n_text_only += shown == 0;
                n_requests++;
                completion += g->usage.completion_tokens;
            }
    mms_engine_get_stats(e, &st);
    EXPECT(n_text_only > 0, "no request without a picture");
    EXPECT(st.requests == n_requests && st.finished == n_requests && st.refused == 0 && st.completion_tokens == completion && st.images == n_pics &&
           st.steps > 0 && st.step_ms_total > 0 && st.queued == 0 && st.busy_slots == 0 && st.n_slots == 3 && st.image_store_budget > 0,
           "stats: %lld requests (%d), %lld finished, %lld completion tokens (%lld), %lld images (%d), %lld steps", (long long)st.requests, n_requests,
           (long long)st.finished, (long long)st.completion_tokens, (long long)completion, (long long)st.images, n_pics, (long long)st.steps);
    printf("    %d threads, %d requests (%d without a picture) on 3 slots: %d answers equal alone; %lld steps, %.2f ms mean, %.2f ms longest\n",
           N_THREADS, n_requests, n_text_only, n_ok, (long long)st.steps, st.step_ms_total / (double)(st.steps ? st.steps : 1), st.step_ms_max);
    mms_engine_free(e);
}

/* A sampled request (temperature, top-p, a seed) against the same sampler alone. */
static void test_sampling(void) {
    struct mms_engine *e = engine_new(2, 8, 0);
    struct mms_chat_message msgs[4];
    struct mms_image_rgb imgs[MAX_PICS];
    struct mms_request rq;
    struct alone a;
    struct got g;
    int seed;
    if (!e) { EXPECT(0, "engine: %s", mms_last_error()); return; }
    for (seed = 1; seed <= 3; seed++) {
        request_for(&convs[0], 0, &rq, msgs, imgs);
        rq.sampling.temperature = 1.5f;
        rq.sampling.top_p = 0.95f;
        rq.sampling.seed = (uint64_t)seed;
        rq.max_tokens = 24;
        EXPECT(run_alone(&rq, &a), "alone: %s", mms_last_error());
        EXPECT(ask(e, &rq, 0, &g), "submit: %s", g.error);
        EXPECT(!strcmp(g.text, a.text) && g.usage.completion_tokens == a.n_gen, "seed %d: engine '%s' (%d tokens), alone '%s' (%d)", seed, g.text,
               g.usage.completion_tokens, a.text, a.n_gen);
    }
    mms_engine_free(e);
}

/* -- structured output -- */

#define STRUCTURED_SCHEMA "{\"type\":\"object\",\"properties\":{\"caption\":{\"type\":\"string\",\"maxLength\":30}," \
                          "\"count\":{\"enum\":[1,2,3]}},\"required\":[\"caption\",\"count\"],\"additionalProperties\":false}"
#define STRUCTURED_PER_THREAD 3

struct structured_worker {
    mms__thread        thread;
    struct mms_engine *e;
    int                id;
    struct got         got[STRUCTURED_PER_THREAD];
    bool               submitted[STRUCTURED_PER_THREAD];
};

static int structured_case(int id, int j) { return (id + 4 * j) % n_convs; }

/* Each request makes its grammar and frees it as soon as it is submitted (the engine keeps a copy). */
static void *structured_main(void *arg) {
    struct structured_worker *w = (struct structured_worker *)arg;
    int j;
    for (j = 0; j < STRUCTURED_PER_THREAD; j++) {
        struct mms_chat_message msgs[4];
        struct mms_image_rgb imgs[MAX_PICS];
        struct mms_request rq;
        struct mms_grammar *g = mms_grammar_from_json_schema(STRUCTURED_SCHEMA, strlen(STRUCTURED_SCHEMA));
        struct mms_reply *r;
        request_for(&convs[structured_case(w->id, j)], 0, &rq, msgs, imgs);
        rq.grammar = g;
        rq.max_tokens = 64;
        r = g ? mms_engine_submit(w->e, &rq) : NULL;
        mms_grammar_free(g);
        if (!(w->submitted[j] = r != NULL)) { mms__copy_str(w->got[j].error, sizeof w->got[j].error, mms_last_error()); continue; }
        read_reply(r, j % 3, &w->got[j]);
        mms_reply_free(r);
    }
    return NULL;
}

/* The answer is a whole output of the grammar (bytes fed to a fresh matcher). */
static bool grammar_complete(const struct mms_grammar *g, const char *text) {
    struct mms_constraint *m = mms_constraint_new(g, NULL);
    const bool ok = m && mms_constraint_accept_bytes(m, text, strlen(text)) == MMS_OK && mms_constraint_is_complete(m);
    mms_constraint_free(m);
    return ok;
}

/* Constrained requests from four threads at once, made while the model's vocabulary has no trie
   yet (they race to build it; make test-tsan): each answer equals the same request run alone with
   the same constraint and is a whole output of the schema; a sampled one too; max_tokens cuts one
   short (finish LENGTH, not a whole output); a request takes an ended one's constraint of the same
   grammar (counted in the stats) and answers as alone. */
static void test_structured(void) {
    enum { N_THREADS = 4 };
    static struct structured_worker w[N_THREADS];
    struct mms_engine *e = engine_new(2, 64, 0);
    struct mms_grammar *g = mms_grammar_from_json_schema(STRUCTURED_SCHEMA, strlen(STRUCTURED_SCHEMA));
    struct mms_chat_message msgs[4];
    struct mms_image_rgb imgs[MAX_PICS];
    struct mms_request rq;
    struct alone a;
    struct got got;
    struct mms_engine_stats st0, st1;
    int t, j, n_equal = 0;
    if (!e || !g) { EXPECT(0, "engine and grammar: %s", mms_last_error()); mms_engine_free(e); mms_grammar_free(g); return; }
    memset(w, 0, sizeof w);
    for (t = 0; t < N_THREADS; t++) {
        w[t].e = e;
        w[t].id = t;
        EXPECT(mms__thread_create(&w[t].thread, structured_main, &w[t]), "thread %d", t);
    }
    for (t = 0; t < N_THREADS; t++) mms__thread_join(w[t].thread);
    for (t = 0; t < N_THREADS; t++)
        for (j = 0; j < STRUCTURED_PER_THREAD; j++) {
            const int k = structured_case(t, j);
            const struct got *gt = &w[t].got[j];
            request_for(&convs[k], 0, &rq, msgs, imgs);
            rq.grammar = g;
            rq.max_tokens = 64;
            EXPECT(w[t].submitted[j] && !gt->read_error, "case %d: not submitted: %s", k, gt->error);
            EXPECT(run_alone(&rq, &a), "alone: %s", mms_last_error());
            EXPECT(gt->finish == a.finish && !strcmp(gt->text, a.text), "case %d (%s, thread %d): engine '%s' (finish %d: %s), alone '%s' (finish %d)",
                   k, convs[k].kind, t, gt->text, gt->finish, gt->error, a.text, a.finish);
            EXPECT(gt->finish != MMS_FINISH_STOP || grammar_complete(g, gt->text), "case %d: '%s' is not a whole output of the schema", k, gt->text);
            n_equal += gt->finish == MMS_FINISH_STOP && !strcmp(gt->text, a.text);
        }
    EXPECT(n_equal > 0, "no constrained answer finished");
    mms_engine_get_stats(e, &st0);
    EXPECT(st0.constraints_reused > 0 && st0.constraints_reused < N_THREADS * STRUCTURED_PER_THREAD, "%lld of %d requests took an ended one's constraint",
           (long long)st0.constraints_reused, N_THREADS * STRUCTURED_PER_THREAD);
    request_for(&convs[0], 0, &rq, msgs, imgs);
    rq.grammar = g;
    rq.max_tokens = 64;
    rq.sampling.temperature = 1.5f;
    rq.sampling.seed = 5;
    EXPECT(ask(e, &rq, 0, &got) && run_alone(&rq, &a), "sampled: %s", got.error);
    EXPECT(got.finish == a.finish && !strcmp(got.text, a.text), "sampled: engine '%s', alone '%s'", got.text, a.text);
    rq.max_tokens = 4;
    EXPECT(ask(e, &rq, 0, &got), "cut: %s", got.error);
    EXPECT(got.finish == MMS_FINISH_LENGTH && got.usage.completion_tokens == 4 && !grammar_complete(g, got.text), "max_tokens 4: finish %d, '%s'",
           got.finish, got.text);
    mms_engine_get_stats(e, &st1);
    EXPECT(st1.constraints_reused == st0.constraints_reused + 2, "one request after another of one grammar: %lld reused, want %lld",
           (long long)st1.constraints_reused, (long long)st0.constraints_reused + 2);
    {   /* another grammar makes its own; the first grammar's answer, from a constraint that served
           others, is still the one alone */
        struct mms_grammar *other = mms_grammar_json(true);
        request_for(&convs[1], 0, &rq, msgs, imgs);
        rq.grammar = other;
        rq.max_tokens = 8;
        EXPECT(ask(e, &rq, 0, &got), "another grammar: %s", got.error);
        mms_grammar_free(other);
        request_for(&convs[4], 0, &rq, msgs, imgs);
        rq.grammar = g;
        rq.max_tokens = 64;
        EXPECT(ask(e, &rq, 0, &got) && run_alone(&rq, &a), "again: %s", got.error);
        EXPECT(got.finish == a.finish && !strcmp(got.text, a.text), "a reused constraint: engine '%s', alone '%s'", got.text, a.text);
        mms_engine_get_stats(e, &st0);
        EXPECT(st0.constraints_reused == st1.constraints_reused + 1, "%lld reused, want %lld", (long long)st0.constraints_reused,
               (long long)st1.constraints_reused + 1);
    }
    printf("    %d threads x %d constrained requests on 2 slots: %d finished answers equal alone, e.g. %s\n", N_THREADS, STRUCTURED_PER_THREAD,
           n_equal, w[0].got[0].text);
    mms_grammar_free(g);
    mms_engine_free(e);
}

/* -- build/mllama -- */

/* RGB8 as a 24-bit BMP (rows bottom-up, BGR, padded to 4 bytes): decoded to the same pixels. */
static bool write_bmp(const char *path, const struct picture *p) {
    const int row = (p->w * 3 + 3) & ~3;
    const uint32_t size = 54 + (uint32_t)row * (uint32_t)p->h;
    unsigned char h[54] = { 'B', 'M' }, pad[3] = { 0, 0, 0 };
    FILE *f = fopen(path, "wb");
    int x, y, i;
    if (!f) return false;
    for (i = 0; i < 4; i++) {
        h[2 + i] = (unsigned char)(size >> (8 * i));
        h[18 + i] = (unsigned char)((uint32_t)p->w >> (8 * i));
        h[22 + i] = (unsigned char)((uint32_t)p->h >> (8 * i));
    }
    h[10] = 54; h[14] = 40; h[26] = 1; h[28] = 24;
    fwrite(h, 1, 54, f);
    for (y = p->h - 1; y >= 0; y--) {
        for (x = 0; x < p->w; x++) {
            const uint8_t *px = p->rgb + ((size_t)y * (size_t)p->w + (size_t)x) * 3;
            unsigned char bgr[3];
            bgr[0] = px[2]; bgr[1] = px[1]; bgr[2] = px[0];
            fwrite(bgr, 1, 3, f);
        }
        fwrite(pad, 1, (size_t)(row - p->w * 3), f);
    }
    return fclose(f) == 0;
}

/* One-turn conversations (one, two and three pictures), max_tokens (-n) and a sampled one: the
   engine's text equals what build/mllama prints for the same pictures and question. */
static void test_equals_the_program(void) {
    static const int picks[] = { 0, 6, 8, 11, 38, 44 };
    struct mms_engine *e = engine_new(2, 8, 0);
    size_t i;
    int n_checked = 0;
    if (!e) { EXPECT(0, "engine: %s", mms_last_error()); return; }
    for (i = 0; i < sizeof picks / sizeof picks[0] + 2; i++) {
        const int k = i < sizeof picks / sizeof picks[0] ? picks[i] : 0;
        const struct conv *c = &convs[k];
        struct mms_chat_message msgs[4];
        struct mms_image_rgb imgs[MAX_PICS];
        struct mms_request rq;
        struct got g;
        struct run r;
        char args[2048], want[1100], path[128];
        size_t len;
        int j;
        if (k >= n_convs || c->n_turns != 1) continue;
        request_for(c, 0, &rq, msgs, imgs);
        len = (size_t)snprintf(args, sizeof args, "-m " DEMO " -q -c %d", N_CTX);
        if (i == sizeof picks / sizeof picks[0]) { rq.max_tokens = 3; len += (size_t)snprintf(args + len, sizeof args - len, " -n 3"); }
        else if (i > sizeof picks / sizeof picks[0]) {
            rq.sampling.temperature = 0.8f;
            rq.sampling.seed = 7;
            len += (size_t)snprintf(args + len, sizeof args - len, " --temp 0.8 --seed 7");
        } else len += (size_t)snprintf(args + len, sizeof args - len, " -n %d", max_new);
        for (j = 0; j < c->n_pics; j++) {
            snprintf(path, sizeof path, "%s/case%d-%d.bmp", tmpdir, k, j);
            EXPECT(write_bmp(path, &c->pics[j]), "%s", path);
            len += (size_t)snprintf(args + len, sizeof args - len, " --image %s", path);
        }
        snprintf(args + len, sizeof args - len, " '%s'", c->turns[0]);
        r = test_run_program(CLI, args, NULL, tmpdir);
        EXPECT(ask(e, &rq, 1, &g), "submit: %s", g.error);
        snprintf(want, sizeof want, "%s\n", g.text);
        EXPECT(r.status == 0 && !strcmp(r.out, want), "case %d (%s%s): build/mllama said '%s' (status %d), the engine '%s'\n%s", k, c->kind,
               i >= sizeof picks / sizeof picks[0] ? ", -n 3 or sampled" : "", r.out, r.status, g.text, r.err);
        if (i == sizeof picks / sizeof picks[0])
            EXPECT(g.finish == MMS_FINISH_LENGTH && g.usage.completion_tokens == 3, "max_tokens 3: finish %d, %d tokens", g.finish, g.usage.completion_tokens);
        n_checked++;
        run_free(&r);
    }
    printf("    %d answers equal build/mllama's\n", n_checked);
    mms_engine_free(e);
}

/* -- cancelling, the queue -- */

/* A request that stays long in its prompt: about 3400 tokens of text, taken in 16 a step. */
#define LONG_CTX 4096
static char long_text[20000];

static void long_request(struct mms_request *rq) {
    int i;
    if (!long_text[0]) for (i = 0; i < 1700; i++) strcat(long_text, i % 7 ? "word " : "line\n");
    memset(rq, 0, sizeof *rq);
    rq->prompt = long_text;
    rq->max_tokens = 4;
}

/* Waits (up to 60 s) until the engine runs n requests. */
static bool wait_busy(struct mms_engine *e, int n) {
    struct mms_engine_stats st;
    int i;
    for (i = 0; i < 60000; i++) {
        mms_engine_get_stats(e, &st);
        if (st.busy_slots == n) return true;
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL);
    }
    return false;
}

/* Cancelling a running request ends it (CANCELLED) and frees its slot, which the next request
   takes; a request answered beside it is unaffected; a queued request cancelled never runs;
   mms_reply_free of a running request cancels it. The running ones are long prompts. */
static void test_cancel(void) {
    struct mms_engine *e = engine_with(2, 8, 0, LONG_CTX, 16);
    struct mms_chat_message msgs[4];
    struct mms_image_rgb imgs[MAX_PICS];
    struct mms_request lrq, rq;
    struct mms_reply *a, *b, *q, *other;
    struct mms_engine_stats st;
    struct got g, go;
    if (!e) { EXPECT(0, "engine: %s", mms_last_error()); return; }
    long_request(&lrq);
    request_for(&convs[6], 0, &rq, msgs, imgs);
    a = mms_engine_submit(e, &lrq);
    b = mms_engine_submit(e, &lrq);
    EXPECT(a && b && wait_busy(e, 2), "two long requests running: %s", mms_last_error());
    q = mms_engine_submit(e, &rq);                /* both slots busy: it waits */
    mms_engine_get_stats(e, &st);
    EXPECT(q && st.queued == 1, "queued: %p, %d waiting", (void *)q, st.queued);
    if (!a || !b || !q) { mms_engine_free(e); return; }
    mms_reply_cancel(q);                          /* queued: never runs */
    read_reply(q, 0, &g);
    EXPECT(g.finish == MMS_FINISH_CANCELLED && g.text[0] == '\0' && g.usage.completion_tokens == 0, "queued and cancelled: finish %d, '%s'",
           g.finish, g.text);
    mms_reply_cancel(a);                          /* running: its slot goes to the next request */
    read_reply(a, 1, &g);
    EXPECT(g.finish == MMS_FINISH_CANCELLED && g.usage.completion_tokens == 0, "running and cancelled: finish %d after %d tokens", g.finish,
           g.usage.completion_tokens);
    other = mms_engine_submit(e, &rq);            /* takes the free slot while b still runs */
    EXPECT(other != NULL, "submit: %s", mms_last_error());
    if (other) { read_reply(other, 2, &go); mms_reply_free(other); }
    EXPECT(other && go.finish == MMS_FINISH_STOP && !strcmp(go.text, convs[6].answers[0]), "beside a running request: '%s', alone '%s'", go.text,
           convs[6].answers[0]);
    mms_engine_get_stats(e, &st);
    EXPECT(st.busy_slots == 1, "the long request b still runs: %d busy", st.busy_slots);
    mms_reply_free(b);                            /* running: freeing cancels it */
    mms_reply_free(a);
    mms_reply_free(q);
    EXPECT(wait_busy(e, 0), "b's slot is not let go");
    if (n_convs > 38) {                           /* three pictures, cancelled at once (while they go in, or before): */
        struct mms_chat_message m3[4];            /* the same request after it answers as alone */
        struct mms_image_rgb i3[MAX_PICS];
        struct mms_request r3;
        struct mms_reply *x;
        request_for(&convs[38], 0, &r3, m3, i3);
        x = mms_engine_submit(e, &r3);
        mms_reply_cancel(x);
        if (x) { read_reply(x, 0, &g); mms_reply_free(x); }
        EXPECT(x && g.finish == MMS_FINISH_CANCELLED, "three pictures cancelled: finish %d", g.finish);
        EXPECT(ask(e, &r3, 0, &g) && !strcmp(g.text, convs[38].answers[0]), "three pictures after a cancel: '%s', alone '%s'", g.text,
               convs[38].answers[0]);
    }
    EXPECT(ask(e, &rq, 0, &g) && !strcmp(g.text, convs[6].answers[0]), "after the cancels: '%s'", g.text);
    mms_engine_get_stats(e, &st);
    EXPECT(st.cancelled == 4 && st.finished == 3 && st.busy_slots == 0 && st.queued == 0, "stats: %lld cancelled (want 4), %lld finished, %d busy",
           (long long)st.cancelled, (long long)st.finished, st.busy_slots);
    mms_engine_free(e);
}

/* One slot and a queue of one: a third request is refused with MMS_ERR_BUSY, and the engine
   freed with a request running and one waiting ends both (CANCELLED), still readable. */
static void test_queue_full_and_free(void) {
    struct mms_engine *e = engine_with(1, 1, 0, LONG_CTX, 16);
    struct mms_request lrq;
    struct mms_reply *a, *b, *c;
    struct mms_engine_stats st;
    struct got g;
    if (!e) { EXPECT(0, "engine: %s", mms_last_error()); return; }
    long_request(&lrq);
    a = mms_engine_submit(e, &lrq);
    b = mms_engine_submit(e, &lrq);
    c = mms_engine_submit(e, &lrq);
    EXPECT(a && b && !c && mms_last_status() == MMS_ERR_BUSY && strstr(mms_last_error(), "max_queue"), "third request: %p, %s", (void *)c,
           mms_last_error());
    mms_engine_get_stats(e, &st);
    EXPECT(st.refused == 1 && st.requests == 2, "stats: %lld refused, %lld requests", (long long)st.refused, (long long)st.requests);
    EXPECT(wait_busy(e, 1), "the first request does not run");
    mms_engine_free(e);
    if (a) { read_reply(a, 0, &g); EXPECT(g.finish == MMS_FINISH_CANCELLED, "running, engine freed: finish %d", g.finish); }
    if (b) { read_reply(b, 1, &g); EXPECT(g.finish == MMS_FINISH_CANCELLED && g.text[0] == '\0', "queued, engine freed: finish %d", g.finish); }
    mms_reply_free(a);
    mms_reply_free(b);
}

/* -- prefix reuse -- */

/* Conversation c's second turn on engine e after its first: returns the reply read. */
static void second_turn(struct mms_engine *e, const struct conv *c, struct got *first, struct got *second) {
    struct mms_chat_message msgs[4];
    struct mms_image_rgb imgs[MAX_PICS];
    struct mms_request rq;
    request_for(c, 0, &rq, msgs, imgs);
    EXPECT(ask(e, &rq, 0, first), "first turn: %s", first->error);
    request_for(c, 1, &rq, msgs, imgs);
    EXPECT(ask(e, &rq, 1, second), "second turn: %s", second->error);
}

/* A returning conversation with the same pictures (case 43: a picture, then a text turn) takes
   its slot again and decodes only the new part: cached tokens reported, the answer that of a
   fresh engine and of the conversation alone. One whose second turn adds a picture (case 42:
   text, then a picture; case 9: a picture each turn) reuses nothing and answers as fresh. */
static void test_prefix_reuse(void) {
    static const int cases[] = { 43, 42, 9, 40 };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct conv *c = &convs[cases[i]];
        const bool same_pictures = c->n_turns == 2 && c->turn_images[1] == 0;
        struct mms_engine *e = engine_new(2, 8, 0), *fresh = engine_new(2, 8, 0);
        struct mms_chat_message msgs[4];
        struct mms_image_rgb imgs[MAX_PICS];
        struct mms_request rq;
        struct got t1, t2, f2;
        if (cases[i] >= n_convs || c->n_turns != 2 || !e || !fresh) { EXPECT(0, "case %d: engine %s", cases[i], mms_last_error()); continue; }
        second_turn(e, c, &t1, &t2);
        request_for(c, 1, &rq, msgs, imgs);
        EXPECT(ask(fresh, &rq, 2, &f2), "fresh: %s", f2.error);
        EXPECT(!strcmp(t1.text, c->answers[0]) && !strcmp(t2.text, c->answers[1]) && !strcmp(f2.text, c->answers[1]),
               "case %d: turn 1 '%s' (alone '%s'), turn 2 '%s', fresh '%s', alone '%s'", cases[i], t1.text, c->answers[0], t2.text, f2.text,
               c->answers[1]);
        EXPECT(f2.usage.cached_tokens == 0, "case %d: a fresh engine reports %d cached tokens", cases[i], f2.usage.cached_tokens);
        if (same_pictures)
            EXPECT(t2.usage.cached_tokens >= t1.usage.prompt_tokens && t2.usage.cached_tokens < t2.usage.prompt_tokens &&
                   t2.usage.images_encoded == 0, "case %d: the returning conversation reused %d of %d tokens (its first turn had %d), encoded %d",
                   cases[i], t2.usage.cached_tokens, t2.usage.prompt_tokens, t1.usage.prompt_tokens, t2.usage.images_encoded);
        else
            EXPECT(t2.usage.cached_tokens == 0, "case %d: a conversation that adds a picture reused %d tokens computed without it", cases[i],
                   t2.usage.cached_tokens);
        printf("    case %d (%s): turn 2 %d prompt tokens, %d cached\n", cases[i], same_pictures ? "same pictures" : "a picture added",
               t2.usage.prompt_tokens, t2.usage.cached_tokens);
        mms_engine_free(e);
        mms_engine_free(fresh);
    }
}

/* -- the image store -- */

/* Every hash forced equal: requests with different pictures at once each get their own answer
   (the store compares the pixels); then a budget of one picture: pictures evicted, the answers
   unchanged, the store within its budget. */
static void test_image_store(void) {
    static const int cases[] = { 0, 1, 2, 3, 4, 5 };
    struct mms_reply *r[6];
    struct got g;
    struct mms_engine_stats st;
    size_t i;
    int round;
    for (round = 0; round < 2; round++) {
        struct mms_engine *e;
        struct mms_chat_message msgs[6][4];
        struct mms_image_rgb imgs[6][MAX_PICS];
        struct mms_request rq;
        mms__mllama_store_same_hash = round == 0;
        e = engine_new(3, 8, round == 0 ? 0 : 1);   /* round 1: a budget below one picture */
        if (!e) { EXPECT(0, "engine: %s", mms_last_error()); break; }
        for (i = 0; i < 6; i++) {
            request_for(&convs[cases[i]], 0, &rq, msgs[i], imgs[i]);
            r[i] = mms_engine_submit(e, &rq);
            EXPECT(r[i] != NULL, "submit: %s", mms_last_error());
        }
        for (i = 0; i < 6; i++) {
            if (!r[i]) continue;
            read_reply(r[i], (int)i % 3, &g);
            EXPECT(!strcmp(g.text, convs[cases[i]].answers[0]), "%s, case %d: '%s', alone '%s'", round == 0 ? "hashes equal" : "tiny budget",
                   cases[i], g.text, convs[cases[i]].answers[0]);
            mms_reply_free(r[i]);
        }
        mms_engine_get_stats(e, &st);
        EXPECT(st.images_encoded == 6 && st.image_store_bytes <= st.image_store_budget, "%s: %lld encoded, store %zu of %zu bytes",
               round == 0 ? "hashes equal" : "tiny budget", (long long)st.images_encoded, st.image_store_bytes, st.image_store_budget);
        mms_engine_free(e);
        mms__mllama_store_same_hash = false;
    }
}

/* -- stop strings, invalid requests -- */

/* Stop strings against caption 6's answer, which is many tokens: one across two tokens ends the
   text just before it, whatever the reading; one that never comes is held back while it might
   and then given out; the earliest of several wins. */
static void test_stop_strings(void) {
    const struct conv *c = &convs[6];
    const char *answer = c->answers[0], *stops[3];
    struct mms_engine *e = engine_new(2, 8, 0);
    struct mms_chat_message msgs[4];
    struct mms_image_rgb imgs[MAX_PICS];
    struct mms_request rq;
    struct got g;
    char want[512];
    int mode;
    if (!e || strlen(answer) < 30) { EXPECT(0, "engine %p, answer '%s'", (void *)e, answer); mms_engine_free(e); return; }
    request_for(c, 0, &rq, msgs, imgs);
    rq.stop = stops;
    for (mode = 0; mode < 3; mode++) {
        const char *at = strstr(answer, "ed circle at");   /* "r|ed| circle| at" */
        stops[0] = "d circle a";
        rq.n_stop = 1;
        EXPECT(at != NULL, "the answer '%s' has no 'ed circle at'", answer);
        snprintf(want, sizeof want, "%.*s", at ? (int)(at - answer + 1) : 0, answer);
        EXPECT(ask(e, &rq, mode, &g) && g.finish == MMS_FINISH_STOP && !strcmp(g.text, want), "stop '%s', mode %d: '%s', want '%s'", stops[0],
               mode, g.text, want);
        stops[0] = "background with stripes";                /* starts to match at the very end */
        EXPECT(ask(e, &rq, mode, &g) && g.finish == MMS_FINISH_STOP && !strcmp(g.text, answer), "stop never found, mode %d: '%s', want '%s'", mode,
               g.text, answer);
        stops[0] = "triangle";
        stops[1] = "blue";
        stops[2] = "square on";
        rq.n_stop = 3;
        at = strstr(answer, "blue");
        snprintf(want, sizeof want, "%.*s", at ? (int)(at - answer) : 0, answer);
        EXPECT(ask(e, &rq, mode, &g) && !strcmp(g.text, want), "three stops, mode %d: '%s', want '%s'", mode, g.text, want);
    }
    mms_engine_free(e);
}

static void expect_refused(struct mms_engine *e, const struct mms_request *rq, const char *what, const char *fragment) {
    struct mms_reply *r = mms_engine_submit(e, rq);
    EXPECT(r == NULL && mms_last_status() == MMS_ERR_INVALID_ARG && strstr(mms_last_error(), fragment), "%s: %p, %s", what, (void *)r, mms_last_error());
    mms_reply_free(r);
}

static void test_invalid_requests(void) {
    struct mms_engine *e = engine_new(2, 8, 0);
    struct mms_engine_params ep;
    struct mms_chat_message msgs[4], bad[1];
    struct mms_image_rgb imgs[MAX_PICS], five[5];
    struct mms_request rq;
    struct mms_engine_stats st;
    const char *stops[1];
    char *longp;
    int i;
    if (!e) { EXPECT(0, "engine: %s", mms_last_error()); return; }
    test_capture_log();
    memset(&rq, 0, sizeof rq);
    expect_refused(e, &rq, "nothing", "either messages");
    expect_refused(e, NULL, "NULL", "NULL");
    request_for(&convs[0], 0, &rq, msgs, imgs);
    rq.prompt = "hello";
    expect_refused(e, &rq, "both messages and prompt", "either messages");
    request_for(&convs[0], 0, &rq, msgs, imgs);
    rq.n_images = 0;
    expect_refused(e, &rq, "a picture shown, none given", "show 1 pictures and the request gives 0");
    for (i = 0; i < 5; i++) five[i] = imgs[0];
    rq.images = five;
    rq.n_images = 5;
    expect_refused(e, &rq, "five pictures", "0..4 (max_images)");
    request_for(&convs[0], 0, &rq, msgs, imgs);
    imgs[0].rgb = NULL;
    expect_refused(e, &rq, "no pixels", "picture 0 has no pixels");
    request_for(&convs[0], 0, &rq, msgs, imgs);
    imgs[0].width = 0;
    expect_refused(e, &rq, "zero width", "picture 0 has no pixels");
    request_for(&convs[0], 0, &rq, msgs, imgs);
    rq.sampling.temperature = -1.0f;
    expect_refused(e, &rq, "temperature -1", "sampling");
    request_for(&convs[0], 0, &rq, msgs, imgs);
    rq.max_tokens = -1;
    expect_refused(e, &rq, "max_tokens -1", "max_tokens -1");
    request_for(&convs[0], 0, &rq, msgs, imgs);
    stops[0] = "";
    rq.stop = stops;
    rq.n_stop = 1;
    expect_refused(e, &rq, "an empty stop string", "stop string 0 is empty");
    stops[0] = "\xff\xfe";
    expect_refused(e, &rq, "a stop string not UTF-8", "not valid UTF-8");
    bad[0].role = "user";
    bad[0].text = "look: <|image|>";
    bad[0].n_images = 0;
    memset(&rq, 0, sizeof rq);
    rq.messages = bad;
    rq.n_messages = 1;
    expect_refused(e, &rq, "<|image|> in a message", "<|image|> in its text");
    request_for(&convs[0], 0, &rq, msgs, imgs);
    rq.messages = NULL;
    rq.n_messages = 0;
    rq.prompt = "<|image|><|image|>Describe.";
    expect_refused(e, &rq, "two marks, one picture", "2 <|image|> marks for 1 pictures");
    longp = (char *)malloc(20000);
    for (i = 0; i < 2000; i++) memcpy(longp + 10 * i, "word word ", 10);
    longp[19999] = '\0';
    memset(&rq, 0, sizeof rq);
    rq.prompt = longp;
    expect_refused(e, &rq, "a prompt longer than a slot", "a slot holds 512");
    free(longp);
    mms_engine_get_stats(e, &st);
    EXPECT(st.refused == 14 && st.requests == 0, "stats: %lld refused (want 14), %lld requests", (long long)st.refused, (long long)st.requests);
    mms_engine_free(e);
    memset(&ep, 0, sizeof ep);
    EXPECT(mms_engine_new(&ep) == NULL && mms_last_status() == MMS_ERR_INVALID_ARG && strstr(mms_last_error(), "a model is required"), "no model: %s",
           mms_last_error());
    EXPECT(mms_mllama_model_get_vocab(model) && mms_vocab_n_tokens(mms_mllama_model_get_vocab(model)) == mms_vocab_n_tokens(vocab) &&
           !strcmp(mms_vocab_token_text(mms_mllama_model_get_vocab(model), mms_vocab_n_tokens(vocab) - 1),
                   mms_vocab_token_text(vocab, mms_vocab_n_tokens(vocab) - 1)),
           "the model does not carry the vocabulary its file has");
    ep.model = model;
    ep.vocab = vocab;
    ep.n_slots = -1;
    EXPECT(mms_engine_new(&ep) == NULL && strstr(mms_last_error(), "n_slots -1"), "n_slots -1: %s", mms_last_error());
    ep.n_slots = 8;
    ep.n_batch = 4;
    EXPECT(mms_engine_new(&ep) == NULL && strstr(mms_last_error(), "at least n_slots"), "n_batch below n_slots: %s", mms_last_error());
    {   /* a reply's arguments */
        struct mms_reply_event ev;
        EXPECT(mms_reply_next(NULL, 0, &ev) == MMS_ERR_INVALID_ARG, "reply_next(NULL)");
        mms_reply_cancel(NULL);
        mms_reply_free(NULL);
        mms_engine_free(NULL);
        mms_engine_get_stats(NULL, &st);
        EXPECT(st.requests == 0, "stats of NULL");
    }
    mms_log_set(NULL, NULL);
}

/* RUN, then the case's time (the engine's cases start engines and run the program: minutes in all). */
#define TIMED(fn) do { int64_t t0_ = mms_time_us(); RUN(fn); printf("    (%.1f s)\n", (double)(mms_time_us() - t0_) * 1e-6); } while (0)

int main(void) {
    int k, j;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mms-engine-XXXXXX");
    if (!mkdtemp(tmpdir)) { printf("cannot make a temporary folder\n"); return 1; }
    cpu = mms_backend_cpu_init();
    model = cpu ? test_load_mllama(cpu, DEMO, NULL, NULL, 0, false) : NULL;
    vocab = mms_vocab_load_file(DEMO);
    test__case_name = "reading the demo model and its reference";
    if (!model || !vocab || !read_reference()) return test_fail_all("the demo model and its reference", mms_last_error());
    TIMED(test_alone_equals_transformers);
    TIMED(test_threads);
    TIMED(test_sampling);
    TIMED(test_structured);
    TIMED(test_equals_the_program);
    TIMED(test_cancel);
    TIMED(test_queue_full_and_free);
    TIMED(test_prefix_reuse);
    TIMED(test_image_store);
    TIMED(test_stop_strings);
    TIMED(test_invalid_requests);
    for (k = 0; k < n_convs; k++)
        for (j = 0; j < convs[k].n_pics; j++) free(convs[k].pics[j].rgb);
    mms_mllama_context_free(alone_ctx);
    mms_vocab_free(vocab);
    mms_mllama_model_free(model);
    mms_backend_free(cpu);
    {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
        if (system(cmd) != 0) printf("could not remove %s\n", tmpdir);
    }
    return test_summary();
}
