/* Several conversations at once on one loaded model. Threads: each with its own context on the
   shared model runs the reference conversations of tests/fixtures/mllama/tiny4 (image first, image
   after text, text only, two images, two consecutive image tokens: transformers' logits and greedy
   tokens, tools/gen_mllama_fixtures.py), in different orders and twice over, and must get the
   serial run's logits bit for bit; the serial run is itself checked against transformers. Built
   also under ThreadSanitizer (make test-tsan). Sequences: the same conversations as sequences of
   one context, decoded together in batches that mix prompts and single tokens of other sequences
   (interleaved), cleared and reused, trimmed and continued: each sequence's greedy tokens equal the
   serial run's and its logits are within NMSE 1e-10 of them. Reuse: a context that computes the last
   decode graph again against one that builds each anew, bit for bit, and a case per determinant of
   a decode graph's shape that must build a new one. */
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

/* A context of n_seq sequences of 128 tokens and 2 images each (1: what the serial runs use). */
static struct mms_mllama_context *seq_context_new(int n_seq) {
    struct mms_mllama_context_params cp;
    memset(&cp, 0, sizeof cp);
    cp.n_ctx = 128;
    cp.n_batch = 64;
    cp.max_images = 2;
    cp.n_seq = n_seq;
    return mms_mllama_context_new(model, &cp);
}

static struct mms_mllama_context *context_new(void) { return seq_context_new(1); }

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
    mms_mllama_seq_clear(ctx, 0);
    for (i = 0; i < p->n_tokens; i++) want[i] = true;
    for (i = 0; i < p->n_images && r->status == MMS_OK; i++) r->status = mms_mllama_seq_add_image(ctx, 0, &images[p->images[i]]);
    if (r->status == MMS_OK) r->status = test_decode(ctx, p->tokens, p->n_tokens, want);
    for (i = 0; r->status == MMS_OK && i < p->n_tokens; i++)
        memcpy(r->logits + (size_t)i * (size_t)n_vocab, mms_mllama_get_logits(ctx, i), sizeof(float) * (size_t)n_vocab);
    for (i = 0; r->status == MMS_OK && i < N_GREEDY; i++) {
        const float *l = mms_mllama_get_logits(ctx, mms_mllama_get_n_logits(ctx) - 1);
        if (i > 0) memcpy(r->logits + (size_t)(p->n_tokens + i - 1) * (size_t)n_vocab, l, sizeof(float) * (size_t)n_vocab);
        r->greedy[i] = argmax(l);
        if (i < N_GREEDY - 1) r->status = test_decode(ctx, &r->greedy[i], 1, NULL);
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

/* -- sequences of one context -- */

#define N_SEQ 4

struct seq_state {
    int    prompt;          /* the conversation it runs, -1: idle */
    int    start;           /* the step its prompt goes in */
    int    g;               /* greedy tokens known (after the prompt: 1) */
    bool   trimmed;         /* trimmed once and continued */
    int    done;            /* conversations finished on it */
    struct result got;
};

static double seq_max_nmse;    /* the largest seen, printed */
static int    seq_rows_checked;

/* The logits rows of sequence st's last step against the serial run: rows from..from+n of its result. */
static void check_rows(const struct seq_state *st, int s, int from, int n, const float *const *rows) {
    const struct prompt *p = &prompts[st->prompt];
    int i;
    for (i = 0; i < n; i++) {
        const float *want = serial[st->prompt].logits + (size_t)(from + i) * (size_t)n_vocab;
        double e = nmse(rows[i], want, (size_t)n_vocab);
        if (e > seq_max_nmse) seq_max_nmse = e;
        seq_rows_checked++;
        EXPECT(e <= 1e-10, "sequence %d, prompt %d (%d tokens), row %d: nmse %.3g against the alone run", s, st->prompt, p->n_tokens, from + i, e);
    }
}

/* Every conversation as sequences: staggered starts (prompts in the same batches as other
   sequences' single tokens, rows interleaved), one trim and continue, each sequence cleared and
   given the next conversation when it finishes, until every sequence has run two. */
static void test_sequences_equal_alone(void) {
    struct mms_mllama_context *ctx = seq_context_new(N_SEQ);
    struct seq_state st[N_SEQ];
    static const int starts[N_SEQ] = { 0, 0, 2, 5 };
    int s, step, next_prompt = 0, n_finished = 0, n_mixed = 0;
    EXPECT(ctx != NULL, "context of %d sequences: %s", N_SEQ, mms_last_error());
    if (!ctx || !serial) return;
    memset(st, 0, sizeof st);
    for (s = 0; s < N_SEQ; s++) { st[s].prompt = next_prompt++ % n_prompts; st[s].start = starts[s]; }
    for (step = 0; step < 200 && n_finished < 2 * N_SEQ; step++) {
        int32_t tokens[64], seq[64];
        bool want[64];
        const float *rows[N_SEQ][MAX_TOK];
        int n = 0, i, n_rows[N_SEQ] = { 0 }, n_prompt_rows = 0, n_single = 0;
        /* single tokens of generating sequences first and last, prompts in between */
        for (s = 0; s < N_SEQ; s++) {
            struct seq_state *q = &st[s];
            if (q->prompt < 0 || step < q->start || q->g == 0 || (s % 2)) continue;
            tokens[n] = q->got.greedy[q->g - 1]; seq[n] = s; want[n] = true; n++; n_single++;
        }
        for (s = 0; s < N_SEQ; s++) {
            struct seq_state *q = &st[s];
            const struct prompt *p;
            if (q->prompt < 0 || step < q->start || q->g != 0) continue;
            p = &prompts[q->prompt];
            if (!q->got.logits) q->got.logits = (float *)calloc(1, 1);
            EXPECT(mms_mllama_seq_get_n_past(ctx, s) == 0, "sequence %d is not clear", s);
            for (i = 0; i < p->n_images; i++)
                EXPECT(mms_mllama_seq_add_image(ctx, s, &images[p->images[i]]) == MMS_OK, "sequence %d image: %s", s, mms_last_error());
            for (i = 0; i < p->n_tokens; i++) { tokens[n] = p->tokens[i]; seq[n] = s; want[n] = true; n++; }
            n_prompt_rows++;
        }
        for (s = 0; s < N_SEQ; s++) {
            struct seq_state *q = &st[s];
            if (q->prompt < 0 || step < q->start || q->g == 0 || !(s % 2)) continue;
            tokens[n] = q->got.greedy[q->g - 1]; seq[n] = s; want[n] = true; n++; n_single++;
        }
        if (n == 0) continue;
        n_mixed += n_prompt_rows > 0 && n_single > 0;
        {
            struct mms_mllama_batch b;
            int r = 0;
            memset(&b, 0, sizeof b);
            b.n_tokens = n;
            b.tokens = tokens;
            b.seq = seq;
            b.want = want;
            if (mms_mllama_decode(ctx, &b) != MMS_OK) { EXPECT(0, "step %d: %s", step, mms_last_error()); break; }
            EXPECT(mms_mllama_get_n_logits(ctx) == n, "step %d: %d logits rows for %d asked", step, mms_mllama_get_n_logits(ctx), n);
            for (i = 0; i < n && r < mms_mllama_get_n_logits(ctx); i++, r++) rows[seq[i]][n_rows[seq[i]]++] = mms_mllama_get_logits(ctx, r);
        }
        for (s = 0; s < N_SEQ; s++) {
            struct seq_state *q = &st[s];
            const struct prompt *p;
            if (!n_rows[s]) continue;
            p = &prompts[q->prompt];
            if (q->g == 0) check_rows(q, s, 0, n_rows[s], rows[s]);                 /* the prompt's rows */
            else check_rows(q, s, p->n_tokens + q->g - 1, 1, rows[s]);              /* the step's */
            q->got.greedy[q->g] = argmax(rows[s][n_rows[s] - 1]);
            EXPECT(q->got.greedy[q->g] == serial[q->prompt].greedy[q->g], "sequence %d prompt %d: greedy token %d is %d, alone %d", s, q->prompt,
                   q->g, q->got.greedy[q->g], serial[q->prompt].greedy[q->g]);
            q->got.greedy[q->g] = serial[q->prompt].greedy[q->g];                   /* stay on the alone path */
            q->g++;
            if (q->g == 8 && !q->trimmed && s == 1) {                               /* keep 3 generated tokens, redo the rest */
                EXPECT(mms_mllama_seq_trim(ctx, s, p->n_tokens + 3) == MMS_OK, "trim: %s", mms_last_error());
                q->g = 4;
                q->trimmed = true;
            }
            if (q->g == N_GREEDY) {                                                 /* finished: clear and reuse */
                struct mms_mllama_seq_timings t;
                const int redone = q->trimmed ? 4 : 0;                              /* tokens fed again after the trim */
                EXPECT(mms_mllama_seq_get_timings(ctx, s, &t) == MMS_OK, "seq timings: %s", mms_last_error());
                EXPECT(t.n_prompt_tokens == p->n_tokens && t.n_gen_tokens == N_GREEDY - 1 + redone && t.n_calls == N_GREEDY + redone &&
                       t.prompt_ms > 0 && t.gen_ms > 0 && t.kv_cache > 0, "sequence %d timings: %d prompt tokens (want %d), %d generated "
                       "(want %d), %d calls, %.2f + %.2f ms, %zu KV bytes", s, t.n_prompt_tokens, p->n_tokens, t.n_gen_tokens,
                       N_GREEDY - 1 + redone, t.n_calls, t.prompt_ms, t.gen_ms, t.kv_cache);
                n_finished++;
                EXPECT(mms_mllama_seq_get_n_past(ctx, s) == p->n_tokens + N_GREEDY - 1, "sequence %d: n_past %d", s, mms_mllama_seq_get_n_past(ctx, s));
                EXPECT(mms_mllama_seq_clear(ctx, s) == MMS_OK, "clear");
                free(q->got.logits);
                q->got.logits = NULL;
                q->g = 0;
                q->trimmed = false;
                q->done++;
                q->prompt = q->done < 2 ? next_prompt++ % n_prompts : -1;
                q->start = step + 1 + s;
            }
        }
    }
    printf("    %d sequences, %d conversations in %d batches (%d mixing prompts and single tokens), %d logits rows: largest nmse %.3g\n",
           N_SEQ, n_finished, step, n_mixed, seq_rows_checked, seq_max_nmse);
    EXPECT(n_finished == 2 * N_SEQ, "%d conversations finished, want %d", n_finished, 2 * N_SEQ);
    {
        struct mms_mllama_timings t;
        mms_mllama_get_timings(ctx, &t);
        EXPECT(t.n_seq == N_SEQ && t.n_prompt_tokens + t.n_gen_tokens > 0, "context timings: n_seq %d", t.n_seq);
    }
    EXPECT(n_mixed >= 2, "only %d batches mixed a prompt with other sequences' tokens", n_mixed);
    for (s = 0; s < N_SEQ; s++) free(st[s].got.logits);
    mms_mllama_context_free(ctx);
}

/* -- the decode graph computed again --
   Two contexts make the same calls: pair[0] computes the last decode graph again while the batch
   shape holds, pair[1] builds every graph anew (rebuild_graphs). Every decode must give the same
   status and bit-identical logits, and pair[0] must build a graph exactly when the shape changed:
   each trigger below is a decode whose shape differs from the one before in that one determinant. */

static struct mms_mllama_context *pair[2];
static int pair_decodes;

static bool pair_new(void) {
    struct mms_mllama_context_params cp;
    int k;
    memset(&cp, 0, sizeof cp);
    cp.n_ctx = 512;                /* two attention steps of 256: a crossing */
    cp.n_batch = 300;
    cp.max_images = 2;
    cp.n_seq = 3;
    for (k = 0; k < 2; k++) {
        cp.rebuild_graphs = k == 1;
        pair[k] = mms_mllama_context_new(model, &cp);
        EXPECT(pair[k] != NULL, "context %d: %s", k, mms_last_error());
    }
    return pair[0] && pair[1];
}

static void pair_free(void) {
    mms_mllama_context_free(pair[0]);
    mms_mllama_context_free(pair[1]);
    pair[0] = pair[1] = NULL;
}

static void pair_image(int s, int image) {
    int k;
    for (k = 0; k < 2; k++) EXPECT(mms_mllama_seq_add_image(pair[k], s, &images[image]) == MMS_OK, "context %d, sequence %d: image: %s", k, s, mms_last_error());
}

static void pair_trim(int s, int n_keep) {
    int k;
    for (k = 0; k < 2; k++) EXPECT(mms_mllama_seq_trim(pair[k], s, n_keep) == MMS_OK, "context %d: trim: %s", k, mms_last_error());
}

static void pair_clear(int s) {
    int k;
    for (k = 0; k < 2; k++) EXPECT(mms_mllama_seq_clear(pair[k], s) == MMS_OK, "context %d: clear: %s", k, mms_last_error());
}

/* Text tokens (never the image token). */
static int32_t text_token(int i) { return (int32_t)(1 + (i * 7) % 97); }

/* Decodes rows tokens[i] of sequences seq[i] (want as mms_mllama_batch's) in both contexts; build:
   whether pair[0] must build a new graph (the shape changed) or compute the last one again. */
static void pair_decode(const char *what, const int32_t *tokens, const int32_t *seq, const bool *want, int n, bool build) {
    struct mms_mllama_batch b;
    struct mms_mllama_timings t0, t1;
    enum mms_status st[2];
    int k, r;
    memset(&b, 0, sizeof b);
    b.n_tokens = n;
    b.tokens = tokens;
    b.seq = seq;
    b.want = want;
    mms_mllama_get_timings(pair[0], &t0);
    for (k = 0; k < 2; k++) {
        st[k] = mms_mllama_decode(pair[k], &b);
        EXPECT(st[k] == MMS_OK, "%s: context %d: %s", what, k, mms_last_error());
    }
    mms_mllama_get_timings(pair[0], &t1);
    pair_decodes++;
    EXPECT(t1.n_decode_builds - t0.n_decode_builds == (build ? 1 : 0), "%s: %s the last graph (%d built)", what,
           build ? "computed again, wanted a new graph for" : "built a graph, wanted the last one computed again for", t1.n_decode_builds - t0.n_decode_builds);
    if (st[0] != MMS_OK || st[1] != MMS_OK) return;
    EXPECT(mms_mllama_get_n_logits(pair[0]) == mms_mllama_get_n_logits(pair[1]), "%s: %d logits rows, rebuilt %d", what,
           mms_mllama_get_n_logits(pair[0]), mms_mllama_get_n_logits(pair[1]));
    for (r = 0; r < mms_mllama_get_n_logits(pair[0]) && r < mms_mllama_get_n_logits(pair[1]); r++)
        EXPECT(memcmp(mms_mllama_get_logits(pair[0], r), mms_mllama_get_logits(pair[1], r), sizeof(float) * (size_t)n_vocab) == 0,
               "%s: logits row %d differ from the rebuilt graph's (nmse %.3g)", what, r,
               nmse(mms_mllama_get_logits(pair[0], r), mms_mllama_get_logits(pair[1], r), (size_t)n_vocab));
}

/* n rows of one sequence: tokens from `from` on (the image token where image_at == i). */
static void pair_decode_seq(const char *what, int s, int n, int from, int image_at, const bool *want, bool build) {
    int32_t tokens[300];
    int32_t seq[300];
    int i;
    for (i = 0; i < n; i++) { tokens[i] = i == image_at ? model->hp.image_token_id : text_token(from + i); seq[i] = s; }
    pair_decode(what, tokens, seq, want, n, build);
}

/* A generation with pictures, several sequences, a crossing of the attention step and a trim. */
static void test_reuse_equals_rebuild(void) {
    int32_t tok[3];
    int32_t seq3[3] = { 0, 1, 2 };
    int i, builds;
    struct mms_mllama_timings t;
    if (!pair_new()) { pair_free(); return; }
    pair_decodes = 0;
    pair_image(0, 0);
    pair_decode_seq("sequence 0's prompt", 0, 5, 0, 0, NULL, true);
    for (i = 0; i < 6; i++) {                  /* greedy tokens of sequence 0 */
        tok[0] = argmax(mms_mllama_get_logits(pair[0], mms_mllama_get_n_logits(pair[0]) - 1));
        pair_decode("sequence 0 generates", tok, NULL, NULL, 1, i == 0);
    }
    pair_decode_seq("sequence 1's prompt (text)", 1, 4, 10, -1, NULL, true);
    pair_image(2, 1 % n_images);
    pair_decode_seq("sequence 2's prompt", 2, 3, 20, 0, NULL, true);
    for (i = 0; i < 5; i++) {                  /* the three together: two groups, rows of a text sequence gated */
        int r;
        for (r = 0; r < 3; r++) tok[r] = text_token(60 + 3 * i + r);
        pair_decode("three sequences generate", tok, seq3, NULL, 3, i == 0);
    }
    /* sequence 0 at 16 tokens: to 254, then single tokens over 256 (the attention's second step) */
    pair_decode_seq("sequence 0 up to 254 tokens", 0, 238, 30, -1, NULL, true);
    for (i = 254; i < 262; i++) pair_decode_seq("sequence 0 over 256 tokens", 0, 1, i, -1, NULL, i == 254 || i == 256);
    pair_trim(0, 200);
    for (i = 200; i < 204; i++) pair_decode_seq("sequence 0 after the trim to 200", 0, 1, i, -1, NULL, i == 200);
    pair_clear(2);                             /* another picture, same shapes: computed again with its keys */
    pair_image(2, 2 % n_images);
    pair_decode_seq("sequence 2's new prompt", 2, 3, 40, 0, NULL, true);
    for (i = 0; i < 3; i++) pair_decode_seq("sequence 2 generates", 2, 1, 50 + i, -1, NULL, i == 0);
    mms_mllama_get_timings(pair[0], &t);
    builds = t.n_decode_builds;
    mms_mllama_get_timings(pair[1], &t);
    printf("    %d decodes: %d graphs built with reuse, %d without\n", pair_decodes, builds, t.n_decode_builds);
    EXPECT(t.n_decode_builds == pair_decodes && builds < pair_decodes / 2, "builds: %d with reuse, %d without, %d decodes", builds, t.n_decode_builds, pair_decodes);
    pair_free();
}

/* Each determinant of the shape alone: a decode that differs from the one before only in it must
   build its own graph (and give the rebuilt graph's logits). The number of groups has no case of
   its own: with the batch size the same, it changes the rows of some group. */
static void test_reuse_triggers(void) {
    static const bool one_of_two[2] = { false, true }, both[2] = { true, true }, all3[3] = { true, true, true };
    static const int32_t t3[3] = { 5, 6, 7 };
    int i;
    /* the batch size (the same rows wanted), then the wanted rows */
    if (!pair_new()) { pair_free(); return; }
    pair_decode_seq("prompt", 0, 4, 0, -1, NULL, true);
    pair_decode_seq("one row", 0, 1, 4, -1, NULL, true);
    pair_decode_seq("one row again", 0, 1, 5, -1, NULL, false);
    pair_decode_seq("two rows, one wanted", 0, 2, 6, -1, one_of_two, true);
    pair_decode_seq("two rows, one wanted, again", 0, 2, 8, -1, one_of_two, false);
    pair_decode_seq("two rows, both wanted", 0, 2, 10, -1, both, true);
    pair_free();

    /* the attention's width: crossing a step, and back after a trim */
    if (!pair_new()) { pair_free(); return; }
    pair_decode_seq("prompt", 0, 254, 0, -1, NULL, true);
    for (i = 254; i < 258; i++) pair_decode_seq("over 256 tokens", 0, 1, i, -1, NULL, i == 254 || i == 256);
    pair_trim(0, 250);
    pair_decode_seq("after the trim", 0, 1, 250, -1, NULL, true);
    pair_decode_seq("after the trim, again", 0, 1, 251, -1, NULL, false);
    pair_free();

    /* the first slot read: another sequence, the same width */
    if (!pair_new()) { pair_free(); return; }
    pair_decode_seq("sequence 0's prompt", 0, 4, 0, -1, NULL, true);
    pair_decode_seq("sequence 1's prompt", 1, 4, 10, -1, NULL, true);
    pair_decode_seq("sequence 0 alone", 0, 1, 4, -1, NULL, true);
    pair_decode_seq("sequence 0 alone again", 0, 1, 5, -1, NULL, false);
    pair_decode_seq("sequence 1 alone", 1, 1, 14, -1, NULL, true);
    pair_free();

    /* the gate: a text sequence's row among a group's rows, in place of one of the group's own */
    if (!pair_new()) { pair_free(); return; }
    pair_image(0, 0);
    pair_image(2, 1 % n_images);
    pair_decode_seq("sequence 0's prompt", 0, 3, 0, 0, NULL, true);
    pair_decode_seq("sequence 1's prompt (text)", 1, 3, 10, -1, NULL, true);
    pair_decode_seq("sequence 2's prompt", 2, 3, 20, 0, NULL, true);
    {
        static const int32_t s002[3] = { 0, 0, 2 }, s012[3] = { 0, 1, 2 };
        pair_decode("sequence 0 twice and sequence 2", t3, s002, all3, 3, true);
        pair_decode("sequences 0, 1 (text) and 2", t3, s012, all3, 3, true);
        pair_decode("sequences 0, 1 (text) and 2 again", t3, s012, all3, 3, false);
    }
    pair_free();

    /* a group's pictures: a second picture's token */
    if (!pair_new()) { pair_free(); return; }
    pair_image(0, 0);
    pair_decode_seq("prompt", 0, 3, 0, 0, NULL, true);
    pair_decode_seq("a token", 0, 1, 3, -1, NULL, true);
    pair_decode_seq("a token again", 0, 1, 4, -1, NULL, false);
    pair_image(0, 1 % n_images);
    pair_decode_seq("the second picture's token", 0, 1, 5, 0, NULL, true);
    pair_decode_seq("a token after it", 0, 1, 6, -1, NULL, false);
    pair_free();

    /* a group's sequence: the same rows, another sequence's pictures */
    if (!pair_new()) { pair_free(); return; }
    pair_image(1, 0);
    pair_decode_seq("sequence 0's prompt (text)", 0, 3, 0, -1, NULL, true);
    pair_decode_seq("sequence 1's prompt", 1, 3, 10, 0, NULL, true);
    pair_decode_seq("sequence 2's prompt (text)", 2, 3, 20, -1, NULL, true);
    {
        static const int32_t s012[3] = { 0, 1, 2 };
        pair_decode("sequences 0, 1 and 2: sequence 1's picture", t3, s012, NULL, 3, true);
        pair_clear(1);
        pair_image(2, 1 % n_images);
        pair_decode("sequences 0, 1 and 2: sequence 2's picture", t3, s012, NULL, 3, true);
    }
    pair_free();

    /* a group's rows */
    if (!pair_new()) { pair_free(); return; }
    pair_image(0, 0);
    pair_image(1, 1 % n_images);
    pair_decode_seq("sequence 0's prompt", 0, 3, 0, 0, NULL, true);
    pair_decode_seq("sequence 1's prompt", 1, 3, 10, 0, NULL, true);
    {
        static const int32_t s011[3] = { 0, 1, 1 }, s001[3] = { 0, 0, 1 };
        pair_decode("sequence 0 once, sequence 1 twice", t3, s011, NULL, 3, true);
        pair_decode("sequence 0 twice, sequence 1 once", t3, s001, NULL, 3, true);
    }
    pair_free();
}

/* Bad batches and sequence numbers are refused, naming the problem, and leave every sequence as it was. */
static void test_sequence_errors(void) {
    struct mms_mllama_context *ctx = seq_context_new(2);
    struct mms_mllama_context_params cp;
    struct mms_mllama_batch b;
    const struct mms_mllama_hparams *hp = mms_mllama_model_get_hparams(model);
    int32_t tokens[3] = { 1, 2, 3 }, seq[3] = { 0, 1, 2 }, img[2];
    EXPECT(ctx != NULL, "context: %s", mms_last_error());
    if (!ctx) return;
    memset(&b, 0, sizeof b);
    b.n_tokens = 3;
    b.tokens = tokens;
    b.seq = seq;
    EXPECT(mms_mllama_decode(ctx, &b) == MMS_ERR_INVALID_ARG && strstr(mms_last_error(), "sequence 2"), "sequence out of range: %s", mms_last_error());
    EXPECT(mms_mllama_seq_get_n_past(ctx, 0) == 0 && mms_mllama_seq_get_n_past(ctx, 1) == 0, "a refused batch changed a sequence");
    img[0] = hp->image_token_id;
    img[1] = 5;
    seq[0] = 0;
    seq[1] = 1;
    b.n_tokens = 2;
    b.tokens = img;
    EXPECT(mms_mllama_decode(ctx, &b) == MMS_ERR_STATE && strstr(mms_last_error(), "sequence 0"), "image token without an image: %s", mms_last_error());
    EXPECT(mms_mllama_seq_get_n_past(ctx, 1) == 0, "a refused batch changed sequence 1");
    EXPECT(mms_mllama_seq_add_image(ctx, 2, &images[0]) == MMS_ERR_INVALID_ARG, "seq_add_image out of range");
    EXPECT(mms_mllama_seq_add_image(ctx, -1, &images[0]) == MMS_ERR_INVALID_ARG, "seq_add_image -1");
    EXPECT(mms_mllama_seq_clear(ctx, 2) == MMS_ERR_INVALID_ARG, "seq_clear out of range");
    EXPECT(mms_mllama_seq_trim(ctx, 1, 1) == MMS_ERR_INVALID_ARG, "trim past n_past");
    EXPECT(mms_mllama_seq_trim(ctx, 3, 0) == MMS_ERR_INVALID_ARG, "trim out of range");
    EXPECT(mms_mllama_seq_get_n_past(ctx, 7) == 0, "n_past out of range");
    {   /* sequence 1 full: a batch that would overflow it is refused whole */
        int32_t many[64];
        int i;
        for (i = 0; i < 64; i++) many[i] = 1 + i % 7;
        b.seq = NULL;
        b.tokens = many;
        b.n_tokens = 64;
        seq[0] = 1;
        EXPECT(mms_mllama_decode(ctx, &b) == MMS_OK, "64 tokens into sequence 0: %s", mms_last_error());
        EXPECT(mms_mllama_decode(ctx, &b) == MMS_OK, "64 more: %s", mms_last_error());
        b.n_tokens = 1;
        EXPECT(mms_mllama_decode(ctx, &b) == MMS_ERR_INVALID_ARG && strstr(mms_last_error(), "sequence 0"), "past n_ctx: %s", mms_last_error());
        b.seq = seq;
        EXPECT(mms_mllama_decode(ctx, &b) == MMS_OK && mms_mllama_seq_get_n_past(ctx, 1) == 1, "sequence 1 still has room: %s", mms_last_error());
        EXPECT(mms_mllama_seq_get_n_past(ctx, 0) == 128, "sequence 0: n_past %d", mms_mllama_seq_get_n_past(ctx, 0));
        EXPECT(mms_mllama_seq_clear(ctx, 1) == MMS_OK, "clear: %s", mms_last_error());
        EXPECT(mms_mllama_seq_get_n_past(ctx, 0) == 128 && mms_mllama_seq_get_n_past(ctx, 1) == 0, "seq_clear clears its sequence only");
        EXPECT(mms_mllama_seq_trim(ctx, 0, 100) == MMS_OK, "trim: %s", mms_last_error());
        EXPECT(mms_mllama_seq_get_n_past(ctx, 0) == 100 && mms_mllama_seq_get_n_past(ctx, 1) == 0, "seq_trim trims its sequence only");
    }
    mms_mllama_context_free(ctx);
    memset(&cp, 0, sizeof cp);
    cp.n_seq = -1;
    EXPECT(mms_mllama_context_new(model, &cp) == NULL && mms_last_status() == MMS_ERR_INVALID_ARG, "n_seq -1 refused");
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
    RUN(test_sequences_equal_alone);
    RUN(test_sequence_errors);
    RUN(test_reuse_equals_rebuild);
    RUN(test_reuse_triggers);
    results_free(serial);
    for (k = 0; k < n_images; k++) mms_mllama_image_free(&images[k]);
    mms_mllama_model_free(model);
    mms_gguf_close(ref);
    mms_backend_free(cpu);
    return test_summary();
}
