/* mllama.c - describe images and chat with Llama 3.2 Vision.

   build/mllama -m MODEL.gguf [--mmproj PROJ.gguf] [--image FILE]... -p PROMPT
   build/mllama -m models/mllama-demo.gguf --image examples/images/circle.png -p "Describe this image."

   Images are decoded with stb_image (JPEG, PNG, BMP, GIF's first frame; Debian's libstb-dev, linked
   with -lstb) and transparent pixels are laid over white, as the model's own processor does. The
   prompt goes through the model's chat template unless --raw; the answer streams to stdout, and
   the timings by phase go to stderr. With -i the program keeps chatting: each line you type is a
   turn, and "/image FILE" attaches a picture to your next turn. `--help` lists every option. */
#define MMSCHED_IMPLEMENTATION
#include "mmsched.h"
#include <stb/stb_image.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_IMAGES 16
#define MAX_TURNS  256

struct options {
    const char *model, *mmproj, *prompt, *system, *images[MAX_IMAGES];
    int         n_images, n_predict, n_ctx, threads, n_gpu_layers, sched_debug, max_images;
    bool        vision_gpu, raw, interactive, quiet;
    struct mms_sampler_params sampling;
};

static void usage(FILE *out) {
    fprintf(out,
        "usage: mllama -m MODEL.gguf [options] -p PROMPT\n"
        "  -m, --model FILE        the model (Ollama's single file, or the text part of the two-file layout)\n"
        "      --mmproj FILE       the vision projector of the two-file layout\n"
        "      --image FILE        a picture for the first turn (repeat for several; JPEG, PNG, BMP, GIF)\n"
        "  -p, --prompt TEXT       the question\n"
        "      --system TEXT       a system message (the model's template refuses one together with images)\n"
        "  -i, --interactive       keep chatting: a line per turn; '/image FILE' adds a picture, '/quit' ends\n"
        "      --raw               send the prompt as it is, without the chat template\n"
        "  -n, --n-predict N       most tokens to generate per turn (256)\n"
        "  -c, --ctx-size N        tokens of context (2048, at most the model's)\n"
        "      --max-images N      images per conversation (the number given, at least 2)\n"
        "  -t, --threads N         CPU threads (all cores)\n"
        "      --n-gpu-layers N    text layers on the GPU, counted from the last (needs a CUDA build: make cuda)\n"
        "      --vision-gpu        the vision tower on the GPU too\n"
        "      --sched-debug N     scheduler trace on stderr: 1 splits and buffers, 2 every node\n"
        "      --temp T            temperature (0: greedy, the default; the model's card suggests 0.6)\n"
        "      --top-k N           keep the N most likely tokens (0: off)\n"
        "      --top-p P           keep the most likely tokens up to probability P (1: off; the card suggests 0.9)\n"
        "      --min-p P           drop tokens below P times the best one's probability (0: off)\n"
        "      --repeat-penalty R  penalise tokens already in the conversation (1: off)\n"
        "      --repeat-last-n N   how far back the penalty looks (0: everything)\n"
        "  -s, --seed N            the sampler's seed (0)\n"
        "  -q, --quiet             no timings\n");
}

static void die(const char *what, const char *detail) {
    fprintf(stderr, "mllama: error: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

static int parse_int(const char *flag, const char *v, int lo, int hi) {
    char *end;
    long x;
    errno = 0;
    x = v ? strtol(v, &end, 10) : 0;
    if (!v || errno || *end || x < lo || x > hi) {
        fprintf(stderr, "mllama: %s wants a whole number from %d to %d, got '%s'\n", flag, lo, hi, v ? v : "");
        exit(2);
    }
    return (int)x;
}

static float parse_float(const char *flag, const char *v) {
    char *end;
    float x = v ? strtof(v, &end) : 0.0f;
    if (!v || *end || x != x) { fprintf(stderr, "mllama: %s wants a number, got '%s'\n", flag, v ? v : ""); exit(2); }
    return x;
}

static void parse_args(int argc, char **argv, struct options *o) {
    int i;
    memset(o, 0, sizeof *o);
    o->n_predict = 256;
    o->threads = mms_cpu_count();
    o->sampling = mms_sampler_default_params();
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define FLAG(s, l) (strcmp(a, s) == 0 || strcmp(a, l) == 0)
#define NEED() do { if (!v) { fprintf(stderr, "mllama: %s needs a value\n", a); exit(2); } i++; } while (0)
        if (FLAG("-h", "--help")) { usage(stdout); exit(0); }
        else if (FLAG("-m", "--model")) { NEED(); o->model = v; }
        else if (FLAG("--mmproj", "--mmproj")) { NEED(); o->mmproj = v; }
        else if (FLAG("--image", "--image")) {
            NEED();
            if (o->n_images == MAX_IMAGES) { fprintf(stderr, "mllama: at most %d --image\n", MAX_IMAGES); exit(2); }
            o->images[o->n_images++] = v;
        }
        else if (FLAG("-p", "--prompt")) { NEED(); o->prompt = v; }
        else if (FLAG("--system", "--system")) { NEED(); o->system = v; }
        else if (FLAG("-i", "--interactive")) o->interactive = true;
        else if (FLAG("--raw", "--raw")) o->raw = true;
        else if (FLAG("-q", "--quiet")) o->quiet = true;
        else if (FLAG("--vision-gpu", "--vision-gpu")) o->vision_gpu = true;
        else if (FLAG("-n", "--n-predict")) { NEED(); o->n_predict = parse_int(a, v, 1, 1 << 20); }
        else if (FLAG("-c", "--ctx-size")) { NEED(); o->n_ctx = parse_int(a, v, 16, 1 << 20); }
        else if (FLAG("--max-images", "--max-images")) { NEED(); o->max_images = parse_int(a, v, 1, 64); }
        else if (FLAG("-t", "--threads")) { NEED(); o->threads = parse_int(a, v, 1, 1024); }
        else if (FLAG("--n-gpu-layers", "-ngl")) { NEED(); o->n_gpu_layers = parse_int(a, v, 0, 100000); }
        else if (FLAG("--sched-debug", "--sched-debug")) { NEED(); o->sched_debug = parse_int(a, v, 0, 2); }
        else if (FLAG("--temp", "--temperature")) { NEED(); o->sampling.temperature = parse_float(a, v); }
        else if (FLAG("--top-k", "--top-k")) { NEED(); o->sampling.top_k = parse_int(a, v, 0, 1 << 30); }
        else if (FLAG("--top-p", "--top-p")) {
            NEED();
            o->sampling.top_p = parse_float(a, v);
            /* the library reads 0 as off; on the command line it is a mistake */
            if (!(o->sampling.top_p > 0.0f)) { fprintf(stderr, "mllama: --top-p %s: top_p must be in (0, 1]\n", v); exit(1); }
        }
        else if (FLAG("--min-p", "--min-p")) { NEED(); o->sampling.min_p = parse_float(a, v); }
        else if (FLAG("--repeat-penalty", "--repeat-penalty")) { NEED(); o->sampling.repeat_penalty = parse_float(a, v); }
        else if (FLAG("--repeat-last-n", "--repeat-last-n")) { NEED(); o->sampling.repeat_last_n = parse_int(a, v, 0, 1 << 30); }
        else if (FLAG("-s", "--seed")) { NEED(); o->sampling.seed = (uint64_t)strtoull(v, NULL, 10); }
        else { fprintf(stderr, "mllama: unknown option '%s' (--help lists them)\n", a); exit(2); }
#undef FLAG
#undef NEED
    }
    if (!o->model) { fprintf(stderr, "mllama: a model is required (-m FILE)\n"); usage(stderr); exit(2); }
    if (!o->prompt && !o->interactive) { fprintf(stderr, "mllama: a prompt is required (-p TEXT), or -i to chat\n"); exit(2); }
    if (o->raw && o->interactive) { fprintf(stderr, "mllama: --raw and -i do not go together\n"); exit(2); }
}

/* -- images -- */

/* An image file as RGB8, transparent pixels laid over white; NULL with the reason in why[] on failure. */
static uint8_t *load_image(const char *path, int *w, int *h, char *why, size_t why_size) {
    struct stat st;
    int n;
    uint8_t *rgba, *rgb;
    FILE *f = fopen(path, "rb");
    if (!f) { snprintf(why, why_size, "%s: %s", path, strerror(errno)); return NULL; }
    fclose(f);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) { snprintf(why, why_size, "%s: is a directory, not an image", path); return NULL; }
    if (!(rgba = stbi_load(path, w, h, &n, 4))) {
        snprintf(why, why_size, "%s: cannot decode the image (%s; JPEG, PNG, BMP and GIF are supported)", path, stbi_failure_reason());
        return NULL;
    }
    if (!(rgb = (uint8_t *)malloc((size_t)*w * (size_t)*h * 3))) die("out of memory for an image", path);
    mms_image_rgba_over_white(rgba, *w, *h, 0, rgb);
    stbi_image_free(rgba);
    return rgb;
}

/* -- the conversation -- */

struct chat {
    struct mms_mllama_context *ctx;
    struct mms_vocab          *vocab;
    struct mms_sampler        *sampler;
    int                        n_ctx, n_batch, n_vocab, n_ctx_train;
    int32_t                   *kv;                /* the tokens in the KV cache, in order */
    int                        n_kv;
    struct image { uint8_t *rgb; int w, h; } images[MAX_IMAGES * 4];
    int                        n_images;
    struct mms_chat_message    msgs[MAX_TURNS];
    char                      *texts[MAX_TURNS];
    int                        n_msgs;
};

/* Decodes and keeps an image for the conversation; false (the reason in why[]) if it cannot be read. */
static bool chat_add_image(struct chat *c, const char *path, char *why, size_t why_size) {
    struct image *im;
    if (c->n_images == (int)(sizeof c->images / sizeof c->images[0])) die("too many images in one conversation", path);
    im = &c->images[c->n_images];
    if (!(im->rgb = load_image(path, &im->w, &im->h, why, why_size))) return false;
    c->n_images++;
    return true;
}

static void chat_add_message(struct chat *c, const char *role, const char *text, int n_images) {
    if (c->n_msgs == MAX_TURNS) die("the conversation is too long", "start a new one");
    c->texts[c->n_msgs] = strdup(text ? text : "");
    c->msgs[c->n_msgs].role = role;
    c->msgs[c->n_msgs].text = c->texts[c->n_msgs];
    c->msgs[c->n_msgs].n_images = n_images;
    c->n_msgs++;
}

static int32_t *tokenize(const struct mms_vocab *v, const char *text, bool add_bos, int *n) {
    int need = mms_tokenize(v, text, strlen(text), NULL, 0, add_bos, true);
    int32_t *ids;
    if (need < 0) die("cannot tokenize the prompt", mms_last_error());
    if (!(ids = (int32_t *)malloc(sizeof *ids * (size_t)(need + 1)))) die("out of memory", NULL);
    *n = mms_tokenize(v, text, strlen(text), ids, need, add_bos, true);
    return ids;
}

/* Brings the KV cache to hold `tokens`: keeps the common prefix, re-attaches the images whose
   <|image|> tokens come after it (cached: no new encode), and decodes the rest in batches. */
static void chat_sync(struct chat *c, const int32_t *tokens, int n, int32_t image_token) {
    int keep = 0, i, kept_images = 0, total_images = 0;
    while (keep < n && keep < c->n_kv && c->kv[keep] == tokens[keep]) keep++;
    if (keep == n) keep = n - 1;   /* the last token is decoded again for its logits */
    for (i = 0; i < n; i++) if (tokens[i] == image_token) { total_images++; if (i < keep) kept_images++; }
    if (total_images > c->n_images) die("the prompt has more <|image|> tokens than images given", NULL);
    if (mms_mllama_kv_trim(c->ctx, keep) != MMS_OK) die("cannot trim the KV cache", mms_last_error());
    for (i = kept_images; i < total_images; i++)
        if (mms_mllama_add_image_rgb(c->ctx, c->images[i].rgb, c->images[i].w, c->images[i].h, 0) != MMS_OK)
            die("cannot encode the image", mms_last_error());
    for (i = keep; i < n; i += c->n_batch) {
        int len = n - i < c->n_batch ? n - i : c->n_batch;
        if (mms_mllama_decode(c->ctx, tokens + i, len, NULL) != MMS_OK) die("decoding the prompt failed", mms_last_error());
    }
    memcpy(c->kv, tokens, sizeof *tokens * (size_t)n);
    c->n_kv = n;
}

/* Generates until an end token, n_predict tokens or a full context; streams the text to stdout
   and returns it (free it). */
static char *chat_generate(struct chat *c, int n_predict) {
    struct mms_detokenizer d;
    size_t len = 0, cap = 256;
    char *text = (char *)malloc(cap), piece[256];
    int i, k;
    memset(&d, 0, sizeof d);
    for (i = 0; i < n_predict; i++) {
        const float *logits = mms_mllama_get_logits(c->ctx, mms_mllama_get_n_logits(c->ctx) - 1);
        int32_t id = mms_sampler_sample(c->sampler, logits, c->n_vocab);
        if (id < 0) die("sampling failed", mms_last_error());
        if (mms_vocab_is_eog(c->vocab, id)) break;
        k = mms_detokenizer_push(c->vocab, &d, id, piece, sizeof piece, false);
        if (k > 0) {
            fwrite(piece, 1, (size_t)k, stdout);
            fflush(stdout);
            while (len + (size_t)k + 1 > cap) text = (char *)realloc(text, cap *= 2);
            memcpy(text + len, piece, (size_t)k);
            len += (size_t)k;
        }
        if (c->n_kv == c->n_ctx) { fprintf(stderr, "\nmllama: the context of %d tokens is full\n", c->n_ctx); break; }
        if (mms_mllama_decode(c->ctx, &id, 1, NULL) != MMS_OK) die("decoding failed", mms_last_error());
        c->kv[c->n_kv++] = id;
    }
    k = mms_detokenizer_flush(&d, piece, sizeof piece);
    if (k > 0) {
        fwrite(piece, 1, (size_t)k, stdout);
        while (len + (size_t)k + 1 > cap) text = (char *)realloc(text, cap *= 2);
        memcpy(text + len, piece, (size_t)k);
        len += (size_t)k;
    }
    fputc('\n', stdout);
    fflush(stdout);
    text[len] = '\0';
    return text;
}

/* One user turn: the whole conversation through the template, the KV cache synced to it, the answer. */
static void chat_turn(struct chat *c, const struct options *o, const char *user_text, int n_images, int32_t image_token) {
    char *prompt, *answer;
    int32_t *tokens;
    int len, n;
    chat_add_message(c, "user", user_text, n_images);
    if (o->raw) {
        prompt = strdup(user_text);
    } else {
        len = mms_chat_apply_template(c->msgs, c->n_msgs, true, NULL, NULL, 0);
        if (len < 0) die("the chat template refused the conversation", mms_last_error());
        prompt = (char *)malloc((size_t)len + 1);
        mms_chat_apply_template(c->msgs, c->n_msgs, true, NULL, prompt, (size_t)len + 1);
    }
    tokens = tokenize(c->vocab, prompt, o->raw, &n);
    if (n + 1 > c->n_ctx) {
        char msg[160];
        snprintf(msg, sizeof msg, "the prompt has %d tokens and the context holds %d (raise --ctx-size, up to the model's %d)", n, c->n_ctx,
                 c->n_ctx_train);
        die("prompt too long", msg);
    }
    chat_sync(c, tokens, n, image_token);
    for (len = 0; len < n; len++) mms_sampler_accept(c->sampler, tokens[len]);
    answer = chat_generate(c, o->n_predict);
    chat_add_message(c, "assistant", answer, 0);
    free(answer);
    free(tokens);
    free(prompt);
}

/* -- loading -- */

/* The library logs its errors as it raises them; this program reports them itself, once. */
static void log_warnings(enum mms_log_level level, const char *message, void *user) {
    (void)user;
    if (level == MMS_LOG_WARN) fprintf(stderr, "mllama: warning: %s\n", message);
}

static bool show_progress(float fraction, void *user) {
    int *last = (int *)user, pct = (int)(fraction * 100.0f);
    if (pct != *last) {
        *last = pct;
        fprintf(stderr, "\rloading the model %3d%%", pct);
        if (pct == 100) fputc('\n', stderr);
    }
    return true;
}

int main(int argc, char **argv) {
    struct options o;
    struct mms_mllama_load_params lp;
    struct mms_mllama_context_params cp;
    struct mms_mllama_model *model;
    const struct mms_mllama_hparams *hp;
    struct chat c;
    mms_backend_t cpu, gpu = NULL;
    struct stat st;
    int last_pct = -1, i;
    char why[512];
    int32_t image_token;

    parse_args(argc, argv, &o);
    mms_log_set(log_warnings, NULL);
    memset(&c, 0, sizeof c);
    for (i = 0; i < o.n_images; i++)                  /* bad images fail before the long load */
        if (!chat_add_image(&c, o.images[i], why, sizeof why)) die("cannot read an image", why);

    if (!(cpu = mms_backend_cpu_init())) die("cannot start the CPU backend", mms_last_error());
    mms_backend_cpu_set_n_threads(cpu, o.threads);
    if (o.n_gpu_layers > 0 || o.vision_gpu)
        if (!(gpu = mms_backend_cuda_init(0))) die("--n-gpu-layers and --vision-gpu need a GPU", mms_last_error());

    memset(&lp, 0, sizeof lp);
    lp.path = o.model;
    lp.mmproj_path = o.mmproj;
    lp.cpu = cpu;
    lp.gpu = gpu;
    lp.n_gpu_layers = o.n_gpu_layers;
    lp.vision_on_gpu = o.vision_gpu;
    if (isatty(2) || (stat(o.model, &st) == 0 && st.st_size > (256 << 20))) { lp.progress = show_progress; lp.progress_user_data = &last_pct; }
    if (!(model = mms_mllama_model_load(&lp))) die("cannot load the model", mms_last_error());
    if (!(c.vocab = mms_vocab_load_file(o.model))) die("cannot load the model's vocabulary", mms_last_error());
    hp = mms_mllama_model_get_hparams(model);
    image_token = hp->image_token_id;
    if (o.n_images > 0 && hp->v_n_layer == 0) die("the model has no vision tower", "give --mmproj for the two-file layout");

    memset(&cp, 0, sizeof cp);
    cp.n_ctx = o.n_ctx;
    cp.max_images = o.max_images ? o.max_images : (o.n_images > 2 ? o.n_images : 2);
    if (!(c.ctx = mms_mllama_context_new(model, &cp))) die("cannot make the context", mms_last_error());
    if (o.sched_debug) mms_backend_sched_set_debug(mms_mllama_context_get_sched(c.ctx), o.sched_debug, stderr);
    c.n_ctx_train = hp->n_ctx_train;
    c.n_vocab = hp->n_vocab;
    c.n_ctx = o.n_ctx ? o.n_ctx : (hp->n_ctx_train < 2048 ? hp->n_ctx_train : 2048);
    c.n_batch = 512 < c.n_ctx ? 512 : c.n_ctx;
    if (!(c.kv = (int32_t *)malloc(sizeof *c.kv * (size_t)c.n_ctx))) die("out of memory", NULL);
    if (!(c.sampler = mms_sampler_new(&o.sampling))) die("bad sampling options", mms_last_error());
    if (o.system) chat_add_message(&c, "system", o.system, 0);

    if (o.prompt) chat_turn(&c, &o, o.prompt, o.n_images, image_token);
    if (o.interactive) {
        char line[8192];
        int pending = o.prompt ? 0 : o.n_images;
        for (;;) {
            size_t n;
            fprintf(stderr, "> ");
            if (!fgets(line, sizeof line, stdin)) break;
            n = strlen(line);
            while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
            if (strcmp(line, "/quit") == 0) break;
            if (strncmp(line, "/image ", 7) == 0) {
                if (c.n_images >= cp.max_images) {
                    fprintf(stderr, "mllama: this conversation holds at most %d images (--max-images)\n", cp.max_images);
                    continue;
                }
                if (!chat_add_image(&c, line + 7, why, sizeof why)) {     /* a typo does not end the chat */
                    fprintf(stderr, "mllama: %s\n", why);
                    continue;
                }
                pending++;
                fprintf(stderr, "(image attached to your next message)\n");
                continue;
            }
            if (!n && !pending) continue;
            chat_turn(&c, &o, line, pending, image_token);
            pending = 0;
        }
    }
    if (!o.quiet) mms_mllama_print_timings(c.ctx, stderr);

    for (i = 0; i < c.n_msgs; i++) free(c.texts[i]);
    for (i = 0; i < c.n_images; i++) free(c.images[i].rgb);
    free(c.kv);
    mms_sampler_free(c.sampler);
    mms_vocab_free(c.vocab);
    mms_mllama_context_free(c.ctx);
    mms_mllama_model_free(model);
    mms_backend_free(cpu);
    if (gpu) mms_backend_free(gpu);
    return 0;
}
