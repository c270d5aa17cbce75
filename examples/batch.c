/* batch - many pictures captioned at once: K sequences (conversations) of one mllama context,
   advanced together by one decode call per step, so the weights are read once per step for all
   of them; each sequence has its own sampler (and with --json-schema FILE or --json its own
   constraint over one grammar: every answer compact JSON). A picture's caption is printed when it
   is done, with its timings, and its sequence takes the next picture; progress goes to stderr.
     build/batch -m models/mllama-demo.gguf -K 4 examples/images/circle.png examples/images/ring-wide.png ...
     build/batch -m model.gguf -K 8 -p "What is in this image?" -n 64 --temp 0.6 --seed 1 a.jpg b.jpg c.jpg
     build/batch -m model.gguf -K 8 --json-schema receipt.json -p "Read this receipt." -n 256 r1.jpg r2.jpg
   --bench --json (or --json-schema FILE) --vocab FILE: decode steps with greedy sampling, plain and
   constrained, in turn: what a constraint adds to a step at these shapes.
   --bench: aggregate decode speed for K = 1, 2, 4, 8 sequences at Llama 3.2 11B Vision shapes with
   random weights (the file build/bench --mllama writes: 5 of the 40 text layers; written here if
   it is missing, and then removed at the end unless --keep), each sequence after a 32-token text prompt; with --images each prompt starts with
   a picture of its own (4 tiles, encoded before the steps are timed), so the steps include the
   cross-attention layers, each sequence against its own picture's keys. */
#define MMSCHED_IMPLEMENTATION
#include <stb/stb_image.h>   /* first: the library's mms_image_load decodes with it */
#include "../mmsched.h"
#include "random_mllama.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_K 64
#define MAX_PIXELS 50000000L   /* as build/mllama's default --max-pixels: ~350 MB while decoding */

struct options {
    const char *model, *prompt, *json_schema;
    int         k, n_predict, n_threads, bench_layers, bench_gen;
    bool        json, bench, bench_images, bench_keep, bench_engine;
    int         bench_rounds;
    const char *bench_vocab;
    struct mms_sampler_params sampling;
    char      **images;
    int         n_images;
};

static void die(const char *what, const char *why) {
    fprintf(stderr, "batch: %s%s%s\n", what, why ? ": " : "", why ? why : "");
    exit(1);
}

static void usage(FILE *out) {
    fprintf(out, "usage: batch -m MODEL [-K N] [-p PROMPT] [-n N] [--temp T] [--top-p P] [--seed S] [--threads N]\n"
                    "             [--json-schema FILE | --json] IMAGE...\n"
                    "       batch --bench [--images] [--text-layers N] [--gen N] [--threads N] [--keep]\n"
                    "                    [--engine [--vocab FILE]] [--rounds N] [--json | --json-schema FILE (with --vocab)]\n"
                    "  -m MODEL     a GGUF, a Hugging Face folder, or ollama:NAME[:TAG] from Ollama's store\n"
                    "  -K N         pictures captioned at once (sequences of one context, 1..%d; default 4)\n"
                    "  -p PROMPT    the question asked of every picture (default \"Describe this image.\")\n"
                    "  -n N         most tokens per answer (default 64)\n"
                    "  --json-schema FILE  every answer compact JSON valid against the JSON Schema in FILE (the manual's\n"
                    "               section 12 lists what is supported); --json: any JSON object\n"
                    "  --bench      decode speed at 11B shapes; writes a random model of several GB to build/ first and\n"
                    "               removes it at the end (--keep keeps it for the next run)\n"
                    "  --engine     the same through the serving engine (src/api/serve.h), with a prompt taken in meanwhile\n"
                    "  --rounds N   the library and the engine at K = 1 and 8, alternated N times\n"
                    "  --bench --json / --json-schema FILE: decode with greedy sampling, plain and constrained, in turn\n", MAX_K);
}

static int int_arg(const char *s, const char *name, int lo, int hi) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "batch: %s wants a whole number from %d to %d, got '%s'\n", name, lo, hi, s);
        exit(2);
    }
    return (int)v;
}

static void parse(int argc, char **argv, struct options *o) {
    int i;
    memset(o, 0, sizeof *o);
    o->prompt = "Describe this image.";
    o->k = 4;
    o->n_predict = 64;
    o->bench_layers = 5;
    o->bench_gen = 8;
    o->bench_vocab = "tests/fixtures/text/tok-llama3.gguf";
    o->sampling = mms_sampler_default_params();
    o->images = (char **)calloc((size_t)argc, sizeof *o->images);
    if (!o->images) die("out of memory", NULL);
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const bool more = i + 1 < argc;
        if (!strcmp(a, "-m") && more) o->model = argv[++i];
        else if (!strcmp(a, "-K") && more) o->k = int_arg(argv[++i], "-K", 1, MAX_K);
        else if (!strcmp(a, "-p") && more) o->prompt = argv[++i];
        else if (!strcmp(a, "-n") && more) o->n_predict = int_arg(argv[++i], "-n", 1, 4096);
        else if (!strcmp(a, "--temp") && more) o->sampling.temperature = (float)atof(argv[++i]);
        else if (!strcmp(a, "--top-p") && more) o->sampling.top_p = (float)atof(argv[++i]);
        else if (!strcmp(a, "--seed") && more) o->sampling.seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--threads") && more) o->n_threads = int_arg(argv[++i], "--threads", 1, 4096);
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); exit(0); }
        else if (!strcmp(a, "--json-schema") && more) o->json_schema = argv[++i];
        else if (!strcmp(a, "--json")) o->json = true;
        else if (!strcmp(a, "--bench")) o->bench = true;
        else if (!strcmp(a, "--keep")) o->bench_keep = true;
        else if (!strcmp(a, "--images")) o->bench_images = true;
        else if (!strcmp(a, "--engine")) o->bench_engine = true;
        else if (!strcmp(a, "--rounds") && more) { o->bench_engine = true; o->bench_rounds = int_arg(argv[++i], "--rounds", 1, 100); }
        else if (!strcmp(a, "--vocab") && more) o->bench_vocab = argv[++i];
        else if (!strcmp(a, "--text-layers") && more) o->bench_layers = int_arg(argv[++i], "--text-layers", 1, 40);
        else if (!strcmp(a, "--gen") && more) o->bench_gen = int_arg(argv[++i], "--gen", 1, 64);
        else if (a[0] == '-') { fprintf(stderr, "batch: unknown option '%s', or it needs a value (--help lists the options)\n", a); exit(2); }
        else o->images[o->n_images++] = argv[i];
    }
    if (o->bench) return;
    if (!o->model) { fprintf(stderr, "batch: a model is required (-m FILE)\n"); usage(stderr); exit(2); }
    if (o->n_images == 0) { fprintf(stderr, "batch: no pictures given (IMAGE... after the options)\n"); exit(2); }
    if (o->json && o->json_schema) { fprintf(stderr, "batch: --json and --json-schema do not go together\n"); exit(2); }
}

/* -- captioning -- */

/* A picture file as RGB8 (transparent pixels over white), NULL with a message on failure. */
static uint8_t *load_rgb(const char *path, int *w, int *h) {
    uint8_t *rgb = mms_image_load(path, MAX_PIXELS, w, h);
    if (!rgb) fprintf(stderr, "batch: %s\n", mms_last_error());
    return rgb;
}

/* --json-schema FILE or --json: the grammar every answer follows; NULL: free text. */
static struct mms_grammar *answer_grammar(const struct options *o) {
    struct mms_grammar *g;
    struct mms_json *j;
    int64_t n;
    char *text;
    if (o->json) return mms_grammar_json(true);
    if (!o->json_schema) return NULL;
    if (!(j = mms_json_parse_file(o->json_schema))) die("cannot read --json-schema", mms_last_error());
    n = mms_json_write(j, 0, NULL, 0);
    if (n < 0 || !(text = (char *)malloc((size_t)n + 1))) die("cannot read --json-schema", mms_last_error());
    mms_json_write(j, 0, text, (size_t)n + 1);
    g = mms_grammar_from_json_schema(text, (size_t)n);
    free(text);
    mms_json_free(j);
    if (!g) die("cannot use the JSON schema", mms_last_error());
    return g;
}

struct slot {                      /* one sequence of the context */
    int                    job;    /* the picture it captions, -1: idle */
    int32_t                last;   /* its last sampled token, fed in the next step */
    int                    n_gen;
    struct mms_sampler    *sampler;
    struct mms_constraint *constraint;   /* --json-schema, --json: started anew with each picture */
    struct mms_detokenizer detok;
    char                   text[4096];
    size_t                 len;
};

static void slot_text(struct slot *s, const struct mms_vocab *v, int32_t id) {
    char piece[256];
    int n = mms_detokenizer_push(v, &s->detok, id, piece, sizeof piece, false);
    if (n > 0 && s->len + (size_t)n < sizeof s->text) { memcpy(s->text + s->len, piece, (size_t)n); s->len += (size_t)n; }
    s->text[s->len] = '\0';
}

static int32_t *prompt_tokens(const struct mms_vocab *v, const char *question, int *n) {
    struct mms_chat_message msg = { "user", question, 1 };
    int len = mms_mllama_chat_prompt(&msg, 1, true, NULL, NULL, 0), need;
    char *text;
    int32_t *ids;
    if (len < 0 || !(text = (char *)malloc((size_t)len + 1))) die("cannot render the chat template", mms_last_error());
    mms_mllama_chat_prompt(&msg, 1, true, NULL, text, (size_t)len + 1);
    need = mms_tokenize(v, text, (size_t)len, NULL, 0, false, true);
    if (need < 1 || !(ids = (int32_t *)malloc(sizeof *ids * (size_t)need))) die("cannot tokenize the prompt", mms_last_error());
    *n = mms_tokenize(v, text, (size_t)len, ids, need, false, true);
    free(text);
    return ids;
}

static void caption(const struct options *o, mms_backend_t cpu) {
    struct mms_mllama_load_params lp;
    struct mms_mllama_context_params cp;
    struct mms_mllama_model *m;
    struct mms_mllama_context *ctx;
    struct mms_vocab *vocab;
    struct mms_grammar *grammar = answer_grammar(o);
    struct slot slots[MAX_K];
    int32_t *prompt, *tokens, *seq;
    bool *want;
    int n_prompt, n_vocab, next = 0, n_done = 0, n_failed = 0, s, i, batch_cap;
    const int k = o->k < o->n_images ? o->k : o->n_images;
    const int64_t t0 = mms_time_us();
    memset(&lp, 0, sizeof lp);
    lp.path = o->model;
    lp.cpu = cpu;
    if (!(m = mms_mllama_model_load(&lp))) die("cannot load the model", mms_last_error());
    if (!(vocab = mms_vocab_load_file(o->model))) die("cannot load the model's vocabulary", mms_last_error());
    n_vocab = mms_mllama_model_get_hparams(m)->n_vocab;
    prompt = prompt_tokens(vocab, o->prompt, &n_prompt);
    memset(&cp, 0, sizeof cp);
    cp.n_seq = k;
    cp.max_images = 1;
    cp.n_ctx = n_prompt + o->n_predict + 1;
    cp.n_batch = batch_cap = n_prompt * k < 512 ? n_prompt * k : (n_prompt > 512 ? n_prompt : 512);
    if (cp.n_ctx > mms_mllama_model_get_hparams(m)->n_ctx_train) die("the prompt and -n do not fit in the model's context", NULL);
    if (!(ctx = mms_mllama_context_new(m, &cp))) die("cannot make the context", mms_last_error());
    tokens = (int32_t *)malloc(sizeof *tokens * (size_t)batch_cap);
    seq = (int32_t *)malloc(sizeof *seq * (size_t)batch_cap);
    want = (bool *)malloc(sizeof *want * (size_t)batch_cap);
    if (!tokens || !seq || !want) die("out of memory", NULL);
    for (s = 0; s < k; s++) {
        memset(&slots[s], 0, sizeof slots[s]);
        slots[s].job = -1;
        if (!(slots[s].sampler = mms_sampler_new(&o->sampling))) die("bad sampling options", mms_last_error());
        if (grammar && !(slots[s].constraint = mms_constraint_new(grammar, vocab))) die("cannot constrain the answers", mms_last_error());
        mms_sampler_set_constraint(slots[s].sampler, slots[s].constraint);
    }
    while (n_done + n_failed < o->n_images) {
        struct mms_mllama_batch b;
        int n = 0, r = 0;
        for (s = 0; s < k; s++)                /* the generating sequences' next tokens */
            if (slots[s].job >= 0) { tokens[n] = slots[s].last; seq[n] = s; want[n] = true; n++; }
        for (s = 0; s < k && next < o->n_images; s++) {   /* idle sequences take the next pictures while the batch has room */
            uint8_t *rgb;
            int w, h;
            if (slots[s].job >= 0 || n + n_prompt > batch_cap) continue;
            if (!(rgb = load_rgb(o->images[next], &w, &h))) { next++; n_failed++; s--; continue; }
            if (mms_mllama_seq_add_image_rgb(ctx, s, rgb, w, h, 0) != MMS_OK) {
                fprintf(stderr, "batch: %s: %s\n", o->images[next], mms_last_error());
                mms_image_free(rgb);
                next++;
                n_failed++;
                s--;
                continue;
            }
            mms_image_free(rgb);
            slots[s].job = next++;
            slots[s].n_gen = 0;
            slots[s].len = 0;
            slots[s].text[0] = '\0';
            memset(&slots[s].detok, 0, sizeof slots[s].detok);
            mms_sampler_reset(slots[s].sampler);
            mms_constraint_reset(slots[s].constraint);
            for (i = 0; i < n_prompt; i++) {
                mms_sampler_accept(slots[s].sampler, prompt[i]);
                tokens[n] = prompt[i]; seq[n] = s; want[n] = i == n_prompt - 1; n++;
            }
        }
        if (n == 0) break;
        memset(&b, 0, sizeof b);
        b.n_tokens = n;
        b.tokens = tokens;
        b.seq = seq;
        b.want = want;
        if (mms_mllama_decode(ctx, &b) != MMS_OK) die("decoding failed", mms_last_error());
        for (i = 0; i < n; i++) {              /* logits rows come in batch order of the rows asked */
            struct slot *sl = &slots[seq[i]];
            int32_t id;
            if (!want[i]) continue;
            id = mms_sampler_sample(sl->sampler, mms_mllama_get_logits(ctx, r++), n_vocab);
            if (id < 0) die("sampling failed", mms_last_error());
            if (!mms_vocab_is_eog(vocab, id)) slot_text(sl, vocab, id);
            sl->last = id;
            if (mms_vocab_is_eog(vocab, id) || ++sl->n_gen >= o->n_predict) {
                struct mms_mllama_seq_timings t;
                char rest[8];
                int nr = mms_detokenizer_flush(&sl->detok, rest, sizeof rest);
                if (nr > 0 && sl->len + (size_t)nr < sizeof sl->text) { memcpy(sl->text + sl->len, rest, (size_t)nr); sl->text[sl->len += (size_t)nr] = '\0'; }
                mms_mllama_seq_get_timings(ctx, seq[i], &t);
                printf("%s: %s\n", o->images[sl->job], sl->text);
                if (sl->constraint && !mms_constraint_is_complete(sl->constraint))
                    fprintf(stderr, "batch: %s: the answer was cut by -n before its JSON was complete\n", o->images[sl->job]);
                fprintf(stderr, "[%d/%d] %s: sequence %d, prompt %d tokens %.0f ms, %d tokens in %.0f ms (%.2f tokens/s as it saw them)\n",
                        n_done + n_failed + 1, o->n_images, o->images[sl->job], seq[i], t.n_prompt_tokens, t.prompt_ms, t.n_gen_tokens,
                        t.gen_ms, t.gen_ms > 0 ? t.n_gen_tokens * 1000.0 / t.gen_ms : 0.0);
                fflush(stdout);
                n_done++;
                sl->job = -1;
                mms_mllama_seq_clear(ctx, seq[i]);
            }
        }
    }
    fprintf(stderr, "%d pictures captioned (%d failed) with %d at once in %.2f s\n", n_done, n_failed, k, (double)(mms_time_us() - t0) * 1e-6);
    mms_mllama_print_timings(ctx, stderr);
    for (s = 0; s < k; s++) { mms_sampler_free(slots[s].sampler); mms_constraint_free(slots[s].constraint); }
    mms_grammar_free(grammar);
    free(tokens); free(seq); free(want); free(prompt);
    mms_vocab_free(vocab);
    mms_mllama_context_free(ctx);
    mms_mllama_model_free(m);
    if (n_failed) exit(1);
}

/* -- the aggregate decode bench -- */

static bool read_through(float fraction, void *user_data) { (void)fraction; (void)user_data; return true; }

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The random 11B-shaped model (written first if missing: *written), its weights paged in. */
static struct mms_mllama_model *bench_model(const struct options *o, mms_backend_t cpu, char *path, size_t path_size, bool *written) {
    struct mms_mllama_hparams hp;
    struct mms_mllama_load_params lp;
    struct mms_mllama_model *m;
    FILE *f;
    mms_mllama_hparams_11b(&hp);
    *written = false;
    snprintf(path, path_size, "build/bench-mllama-11b-t%d-v4+1.gguf", o->bench_layers);
    if ((f = fopen(path, "rb")) != NULL) fclose(f);   /* made by an earlier run, or build/bench --mllama: used, kept */
    else {
        fprintf(stderr, "batch: writing a random model at 11B shapes (%d text layers: several GB) to %s; it is removed at the end%s\n", o->bench_layers,
                path, o->bench_keep ? " unless --keep (given)" : " (--keep keeps it)");
        if (!write_mllama_gguf(path, &hp, o->bench_layers, 4, 1, false)) { remove(path); die("cannot write the random model", path); }
        *written = true;
    }
    memset(&lp, 0, sizeof lp);
    lp.path = path;
    lp.cpu = cpu;
    lp.progress = read_through;       /* page the mapped weights in now, not in the first step */
    if (!(m = mms_mllama_model_load(&lp))) die("cannot load the random model", mms_last_error());
    return m;
}

/* The library alone: k sequences of ctx (8 of them, 256 tokens each) after a 32-token prompt each
   (with picture, a picture each first), then --gen steps of one token each; the median step, ms.
   samplers (NULL: fixed tokens): each step's tokens are drawn by them, within the timed step, from
   the logits (a constrained one that ends its output starts a new one). */
static double library_step_ms(const struct options *o, struct mms_mllama_context *ctx, const struct mms_mllama_hparams *hp, int k, uint8_t *picture,
                              struct mms_sampler *const *samplers, struct mms_constraint *const *constraints, double *sample_ms) {
    const int n_prompt = 32, picture_side = 560;
    int32_t tokens[8 * 32], seq[8 * 32];
    double step_ms[64];
    struct mms_mllama_batch b;
    int i, g;
    for (i = 0; i < 8; i++) mms_mllama_seq_clear(ctx, i);
    memset(&b, 0, sizeof b);
    for (i = 0; i < k * n_prompt; i++) { seq[i] = i / n_prompt; tokens[i] = (int32_t)((i * 7919 + 13) % 128000); }
    for (i = 0; picture && i < k; i++) {   /* a picture of its own, the same for every K (the store keeps it) */
        picture[0] = (uint8_t)i;
        if (mms_mllama_seq_add_image_rgb(ctx, i, picture, picture_side, picture_side, picture_side * 3) != MMS_OK) die("image encode failed", mms_last_error());
        tokens[i * n_prompt] = hp->image_token_id;
    }
    b.n_tokens = k * n_prompt;
    b.tokens = tokens;
    b.seq = seq;
    if (mms_mllama_decode(ctx, &b) != MMS_OK) die("prefill failed", mms_last_error());
    for (i = 0; constraints && i < k; i++) mms_constraint_reset(constraints[i]);
    for (i = 0; i < k; i++) { tokens[i] = (int32_t)(1000 + i); seq[i] = i; }
    if (sample_ms) *sample_ms = 0.0;
    for (g = 0; g < o->bench_gen; g++) {   /* one token of every sequence per call */
        const int64_t t0 = mms_time_us();
        int64_t t1;
        b.n_tokens = k;
        if (mms_mllama_decode(ctx, &b) != MMS_OK) die("decode failed", mms_last_error());
        t1 = mms_time_us();
        for (i = 0; i < k; i++) {
            if (!samplers) { tokens[i] = (int32_t)(1000 + 31 * (g + 1) + i); continue; }
            tokens[i] = mms_sampler_sample(samplers[i], mms_mllama_get_logits(ctx, i), hp->n_vocab);
            if (tokens[i] < 0) die("sampling failed", mms_last_error());
            if (constraints && mms_constraint_is_finished(constraints[i])) { mms_constraint_reset(constraints[i]); tokens[i] = 1000 + i; }
        }
        step_ms[g] = (double)(mms_time_us() - t0) * 1e-3;
        if (sample_ms) *sample_ms += (double)(mms_time_us() - t1) * 1e-3 / o->bench_gen;
    }
    qsort(step_ms, (size_t)o->bench_gen, sizeof step_ms[0], cmp_double);
    return step_ms[o->bench_gen / 2];
}

static struct mms_mllama_context *library_context(struct mms_mllama_model *m) {
    struct mms_mllama_context_params cp;
    struct mms_mllama_context *ctx;
    memset(&cp, 0, sizeof cp);
    cp.n_seq = 8;
    cp.n_ctx = 256;
    cp.n_batch = 8 * 32;
    cp.max_images = 1;
    if (!(ctx = mms_mllama_context_new(m, &cp))) die("cannot make the context", mms_last_error());
    return ctx;
}

/* The library alone: K = 1, 2, 4, 8 sequences of one context, a decode call per step. */
static void bench_library(const struct options *o, mms_backend_t cpu, struct mms_mllama_model *m, const char *path) {
    static const int ks[] = { 1, 2, 4, 8 };
    const struct mms_mllama_hparams hp = *mms_mllama_model_get_hparams(m);
    struct mms_mllama_context *ctx = library_context(m);
    const int picture_side = 560;
    uint8_t *picture = NULL;
    double base = 0;
    size_t ki;
    int i;
    printf("Llama 3.2 11B Vision shapes, random f16 weights, %d of 40 text layers (%s), %d CPU threads; each sequence after a 32-token %s prompt\n",
           o->bench_layers, path, mms_backend_cpu_get_n_threads(cpu), o->bench_images ? "picture + text" : "text");
    if (o->bench_images && !(picture = (uint8_t *)malloc(picture_side * picture_side * 3))) die("out of memory", NULL);
    for (i = 0; picture && i < picture_side * picture_side * 3; i++) picture[i] = (uint8_t)(i * 2654435761u >> 24);
    for (ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        const int k = ks[ki];
        const double ms = library_step_ms(o, ctx, &hp, k, picture, NULL, NULL, NULL);
        if (k == 1) base = 1000.0 / ms;
        printf("K=%d  step %8.2f ms (median of %d)  aggregate %7.2f tokens/s  x%.2f of K=1\n", k, ms, o->bench_gen, k * 1000.0 / ms,
               base > 0 ? k * 1000.0 / ms / base : 0.0);
        printf("BENCH name=mllama_batch_decode%s k=%d median_ms=%.2f runs=%d text_layers=%d tokens_per_s=%.2f vs_k1=%.2f\n", picture ? "_images" : "", k, ms, o->bench_gen,
               o->bench_layers, k * 1000.0 / ms, base > 0 ? k * 1000.0 / ms / base : 0.0);
        fflush(stdout);
    }
    free(picture);
    mms_mllama_context_free(ctx);
}

/* -- the same through the serving engine -- */

/* A raw prompt of n tokens (BOS and n - 1 words) that differs from prompt k' != k from its second token. */
static void engine_prompt(char *out, size_t cap, int k, int n) {
    static const char *words[] = { " alpha", " bravo", " charlie", " delta", " echo", " foxtrot", " golf", " hotel" };
    size_t len = (size_t)snprintf(out, cap, "%s", words[k % 8]);
    int i;
    for (i = 2; i < n; i++) len += (size_t)snprintf(out + len, cap - len, " the");
}

static struct mms_engine *bench_engine_new(struct mms_mllama_model *m, const struct mms_vocab *v, int n_slots, int n_ctx, int n_batch, int max_images) {
    struct mms_engine_params ep;
    struct mms_engine *e;
    memset(&ep, 0, sizeof ep);
    ep.model = m;
    ep.vocab = v;
    ep.n_slots = n_slots;
    ep.n_ctx = n_ctx;
    ep.n_batch = n_batch;
    ep.max_images = max_images;
    if (!(e = mms_engine_new(&ep))) die("cannot start the engine", mms_last_error());
    return e;
}

/* K requests at once on K slots, n_gen tokens each: tokens generated per second while they all
   generate (they take their slots, and generate, in the same steps): the tokens after each one's
   first over the mean of their usage.gen_ms, the engine's own clock. The replies are read with
   blocking waits, so this thread takes no CPU from the steps. */
static double engine_aggregate(struct mms_mllama_model *m, const struct mms_vocab *v, int k, int n_gen, int *n_tokens) {
    struct mms_engine *e = bench_engine_new(m, v, k, 256, 0, 1);
    struct mms_reply *r[8];
    struct mms_reply_event ev;
    struct mms_request rq;
    char prompt[8][512];
    double gen_ms = 0.0;
    int i, tokens = 0;
    memset(&rq, 0, sizeof rq);
    rq.max_tokens = n_gen;
    for (i = 0; i < k; i++) {
        engine_prompt(prompt[i], sizeof prompt[i], i, 32);
        rq.prompt = prompt[i];
        if (!(r[i] = mms_engine_submit(e, &rq))) die("submit", mms_last_error());
    }
    for (i = 0; i < k; i++) {
        do { if (mms_reply_next(r[i], -1, &ev) != MMS_OK) die("reply", mms_last_error()); } while (ev.finish == MMS_FINISH_NONE);
        if (ev.finish != MMS_FINISH_LENGTH) fprintf(stderr, "batch: request %d ended early (finish %d) after %d tokens\n", i, ev.finish, ev.usage.completion_tokens);
        tokens += ev.usage.completion_tokens - 1;
        gen_ms += ev.usage.gen_ms / k;
        mms_reply_free(r[i]);
    }
    mms_engine_free(e);
    *n_tokens = tokens;
    return gen_ms > 0.0 ? tokens * 1000.0 / gen_ms : 0.0;
}

/* A request generating, then one with a 2048-token prompt: the engine's steps (its own clock,
   mms_engine_get_stats) while the first generates alone, and while the prompt goes in (n_batch
   rows a step: the generating token and n_batch - 1 of the prompt's). */
static void engine_prompt_steps(struct mms_mllama_model *m, const struct mms_vocab *v, int n_batch) {
    struct mms_engine *e = bench_engine_new(m, v, 2, 4096, n_batch, 1);
    struct mms_engine_stats s0, s1, s2;
    struct mms_request rq;
    struct mms_reply *a, *b;
    struct mms_reply_event ev;
    static char long_prompt[32768];
    char prompt[512];
    int64_t t0, t1;
    int n_events = 0;
    memset(&rq, 0, sizeof rq);
    engine_prompt(prompt, sizeof prompt, 0, 32);
    rq.prompt = prompt;
    rq.max_tokens = 4096 - 64;
    if (!(a = mms_engine_submit(e, &rq))) die("submit", mms_last_error());
    do { if (mms_reply_next(a, -1, &ev) != MMS_OK) die("reply", mms_last_error()); } while (ev.len == 0 && ev.finish == MMS_FINISH_NONE);
    mms_engine_get_stats(e, &s0);                 /* a generates alone */
    while (n_events++ < 16 && ev.finish == MMS_FINISH_NONE) if (mms_reply_next(a, -1, &ev) != MMS_OK) die("reply", mms_last_error());
    mms_engine_get_stats(e, &s1);
    engine_prompt(long_prompt, sizeof long_prompt, 1, 2048);
    rq.prompt = long_prompt;
    rq.max_tokens = 1;
    t0 = mms_time_us();
    if (!(b = mms_engine_submit(e, &rq))) die("submit", mms_last_error());
    do { if (mms_reply_next(b, -1, &ev) != MMS_OK) die("reply", mms_last_error()); } while (ev.finish == MMS_FINISH_NONE);
    t1 = mms_time_us();
    mms_engine_get_stats(e, &s2);
    printf("engine, n_batch %d: steps while a request generates alone %.2f ms (mean of %lld); while a 2048-token prompt goes in beside it "
           "(%.0f ms to its first token) %.2f ms (mean of %lld), longest %.2f ms\n", n_batch,
           (s1.step_ms_total - s0.step_ms_total) / (double)(s1.steps - s0.steps), (long long)(s1.steps - s0.steps), (double)(t1 - t0) * 1e-3,
           (s2.step_ms_total - s1.step_ms_total) / (double)(s2.steps - s1.steps), (long long)(s2.steps - s1.steps), s2.step_ms_max);
    printf("BENCH name=engine_step_beside_prompt n_batch=%d plain_ms=%.2f prompt_tokens=2048 steps=%lld mean_ms=%.2f max_ms=%.2f prompt_ms=%.0f\n",
           n_batch, (s1.step_ms_total - s0.step_ms_total) / (double)(s1.steps - s0.steps), (long long)(s2.steps - s1.steps),
           (s2.step_ms_total - s1.step_ms_total) / (double)(s2.steps - s1.steps), s2.step_ms_max, (double)(t1 - t0) * 1e-3);
    mms_reply_free(a);
    mms_reply_free(b);
    mms_engine_free(e);
}

/* Pictures through an engine whose store holds two: the store's bytes after each request against
   its budget; the first picture again at the end (evicted: encoded again). */
static void engine_store(struct mms_mllama_model *m, const struct mms_vocab *v) {
    const int side = 1120, n = 5;             /* 4 tiles each */
    struct mms_engine *e = bench_engine_new(m, v, 2, 256, 0, 1);
    struct mms_engine_stats st;
    struct mms_image_rgb pic;
    struct mms_request rq;
    struct mms_reply *r;
    struct mms_reply_event ev;
    uint8_t *rgb = (uint8_t *)malloc((size_t)side * side * 3);
    size_t most = 0;
    int i, j;
    if (!rgb) die("out of memory", NULL);
    memset(&rq, 0, sizeof rq);
    rq.prompt = "<|image|>Describe it.";
    rq.images = &pic;
    rq.n_images = 1;
    rq.max_tokens = 2;
    pic.rgb = rgb;
    pic.width = pic.height = side;
    pic.stride = 0;
    for (i = 0; i <= n; i++) {
        const int k = i < n ? i : 0;
        for (j = 0; j < side * side * 3; j++) rgb[j] = (uint8_t)((j * 2654435761u >> 24) + 37 * k);
        if (!(r = mms_engine_submit(e, &rq))) die("submit", mms_last_error());
        do { if (mms_reply_next(r, -1, &ev) != MMS_OK) die("reply", mms_last_error()); } while (ev.finish == MMS_FINISH_NONE);
        mms_reply_free(r);
        mms_engine_get_stats(e, &st);
        if (st.image_store_bytes > most) most = st.image_store_bytes;
        printf("engine: picture %d (%s): %s, to the first token %.0f ms; image store %.1f MiB of %.1f MiB, %lld encoded so far\n", k,
               i < n ? "new" : "the first again", ev.usage.images_encoded ? "encoded" : "from the store", ev.usage.prompt_ms,
               (double)st.image_store_bytes / 1048576.0, (double)st.image_store_budget / 1048576.0, (long long)st.images_encoded);
    }
    printf("BENCH name=engine_image_store pictures=%d budget_mib=%.1f most_mib=%.1f encoded=%lld\n", n, (double)st.image_store_budget / 1048576.0,
           (double)most / 1048576.0, (long long)st.images_encoded);
    free(rgb);
    mms_engine_free(e);
}

static void bench_engine(const struct options *o, struct mms_mllama_model *m) {
    struct mms_vocab *v = mms_vocab_load_file(o->bench_vocab);
    const int n_gen = 32;
    double one, eight;
    int n1, n8;
    if (!v) die("cannot load the vocabulary (--vocab, a Llama 3 tokenizer)", mms_last_error());
    one = engine_aggregate(m, v, 1, n_gen, &n1);
    eight = engine_aggregate(m, v, 8, n_gen, &n8);
    printf("engine: 1 slot %.2f tokens/s (%d tokens), 8 slots %.2f tokens/s (%d tokens): x%.2f\n", one, n1, eight, n8, one > 0 ? eight / one : 0.0);
    printf("BENCH name=engine_decode k1_tokens_per_s=%.2f k8_tokens_per_s=%.2f vs_k1=%.2f gen=%d text_layers=%d\n", one, eight, one > 0 ? eight / one : 0.0,
           n_gen, o->bench_layers);
    fflush(stdout);
    engine_prompt_steps(m, v, 512);
    fflush(stdout);
    engine_prompt_steps(m, v, 64);
    fflush(stdout);
    engine_store(m, v);
    mms_vocab_free(v);
}

/* --json or --json-schema FILE (with --vocab): every step's tokens drawn by greedy samplers, plain
   and constrained, in turn --rounds times (3 unless given) at K = 1 and 8: what a constraint adds
   to a decode step at these shapes (fewer layers than the real model: a larger share than there). */
static void bench_constrained(const struct options *o, mms_backend_t cpu, struct mms_mllama_model *m) {
    enum { MAX_ROUNDS = 100 };
    static const int ks[] = { 1, 8 };
    const struct mms_mllama_hparams hp = *mms_mllama_model_get_hparams(m);
    const int rounds = o->bench_rounds ? o->bench_rounds : 3;
    struct mms_vocab *v = mms_vocab_load_file(o->bench_vocab);
    struct mms_grammar *g = answer_grammar(o);
    struct mms_mllama_context *ctx = library_context(m);
    struct mms_sampler *plain[8], *constrained[8];
    struct mms_constraint *con[8];
    struct mms_sampler_params greedy;
    size_t ki;
    int i, r;
    if (!v) die("cannot load the vocabulary (--vocab, a Llama 3 tokenizer)", mms_last_error());
    memset(&greedy, 0, sizeof greedy);
    for (i = 0; i < 8; i++) {
        if (!(plain[i] = mms_sampler_new(&greedy)) || !(constrained[i] = mms_sampler_new(&greedy)) || !(con[i] = mms_constraint_new(g, v)))
            die("cannot make the samplers", mms_last_error());
        mms_sampler_set_constraint(constrained[i], con[i]);
    }
    printf("Llama 3.2 11B Vision shapes, random f16 weights, %d of 40 text layers, %d CPU threads: decode steps with greedy sampling, "
           "plain and constrained (%s), %d rounds in turn, %d steps each\n", o->bench_layers, mms_backend_cpu_get_n_threads(cpu), o->json ? "--json" : o->json_schema,
           rounds, o->bench_gen);
    for (ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        double ms_plain[MAX_ROUNDS], ms_con[MAX_ROUNDS], sp[MAX_ROUNDS], sc[MAX_ROUNDS];
        const int mid = rounds / 2;
        for (r = 0; r < rounds; r++) {
            ms_plain[r] = library_step_ms(o, ctx, &hp, ks[ki], NULL, plain, NULL, &sp[r]);
            ms_con[r] = library_step_ms(o, ctx, &hp, ks[ki], NULL, constrained, con, &sc[r]);
        }
        qsort(ms_plain, (size_t)rounds, sizeof ms_plain[0], cmp_double);
        qsort(ms_con, (size_t)rounds, sizeof ms_con[0], cmp_double);
        qsort(sp, (size_t)rounds, sizeof sp[0], cmp_double);
        qsort(sc, (size_t)rounds, sizeof sc[0], cmp_double);
        /* the sampling part is timed on its own too: the step's decode part is the same work in
           both, so the difference of the sampling parts is what the constraint costs a step */
        printf("K=%d  step plain %8.2f ms, constrained %8.2f ms (%.3f); sampling per step plain %.3f ms, constrained %.3f ms: "
               "+%.3f ms, %.2f%% of the plain step (medians of %d rounds)\n", ks[ki], ms_plain[mid], ms_con[mid], ms_con[mid] / ms_plain[mid], sp[mid],
               sc[mid], sc[mid] - sp[mid], 100.0 * (sc[mid] - sp[mid]) / ms_plain[mid], rounds);
        printf("BENCH name=mllama_decode_constrained k=%d plain_ms=%.2f constrained_ms=%.2f ratio=%.3f sample_plain_ms=%.3f sample_constrained_ms=%.3f "
               "added_pct=%.2f rounds=%d gen=%d text_layers=%d\n", ks[ki], ms_plain[mid], ms_con[mid], ms_con[mid] / ms_plain[mid], sp[mid], sc[mid],
               100.0 * (sc[mid] - sp[mid]) / ms_plain[mid], rounds, o->bench_gen, o->bench_layers);
        fflush(stdout);
    }
    for (i = 0; i < 8; i++) { mms_sampler_free(plain[i]); mms_sampler_free(constrained[i]); mms_constraint_free(con[i]); }
    mms_mllama_context_free(ctx);
    mms_grammar_free(g);
    mms_vocab_free(v);
}

/* --rounds N: the library's and the engine's aggregate decode at K = 1 and 8, taken in turn N
   times, so that both see the same moments of a shared machine. */
static void bench_rounds(const struct options *o, struct mms_mllama_model *m) {
    const struct mms_mllama_hparams hp = *mms_mllama_model_get_hparams(m);
    struct mms_vocab *v = mms_vocab_load_file(o->bench_vocab);
    int r, n;
    if (!v) die("cannot load the vocabulary (--vocab, a Llama 3 tokenizer)", mms_last_error());
    for (r = 0; r < o->bench_rounds; r++) {
        struct mms_mllama_context *ctx = library_context(m);
        const double lib1 = 1000.0 / library_step_ms(o, ctx, &hp, 1, NULL, NULL, NULL, NULL), lib8 = 8000.0 / library_step_ms(o, ctx, &hp, 8, NULL, NULL, NULL, NULL);
        double eng1, eng8;
        mms_mllama_context_free(ctx);
        eng1 = engine_aggregate(m, v, 1, 32, &n);
        eng8 = engine_aggregate(m, v, 8, 32, &n);
        printf("round %d: tokens/s library K=1 %.2f, K=8 %.2f (x%.2f); engine 1 slot %.2f, 8 slots %.2f (x%.2f); engine/library at 8: %.0f%%\n", r + 1,
               lib1, lib8, lib8 / lib1, eng1, eng8, eng8 / eng1, 100.0 * eng8 / lib8);
        printf("BENCH name=engine_vs_library round=%d lib_k1=%.2f lib_k8=%.2f eng_k1=%.2f eng_k8=%.2f eng_vs_lib_k8=%.3f\n", r + 1, lib1, lib8, eng1, eng8,
               eng8 / lib8);
        fflush(stdout);
    }
    mms_vocab_free(v);
}

static void bench(const struct options *o, mms_backend_t cpu) {
    char path[160];
    bool written;
    struct mms_mllama_model *m = bench_model(o, cpu, path, sizeof path, &written);
    if (o->json || o->json_schema) bench_constrained(o, cpu, m);
    else if (o->bench_rounds) bench_rounds(o, m);
    else {
        bench_library(o, cpu, m, path);
        if (o->bench_engine) bench_engine(o, m);
    }
    mms_mllama_model_free(m);
    if (written && !o->bench_keep) {
        if (remove(path) == 0) fprintf(stderr, "batch: removed %s\n", path);
        else fprintf(stderr, "batch: could not remove %s\n", path);
    }
}

int main(int argc, char **argv) {
    struct options o;
    mms_backend_t cpu;
    parse(argc, argv, &o);
    if (!(cpu = mms_backend_cpu_init())) die("cannot start the CPU backend", mms_last_error());
    if (o.n_threads && mms_backend_cpu_set_n_threads(cpu, o.n_threads) != MMS_OK) die("--threads", mms_last_error());
    if (o.bench) bench(&o, cpu);
    else caption(&o, cpu);
    mms_backend_free(cpu);
    free(o.images);
    return 0;
}
