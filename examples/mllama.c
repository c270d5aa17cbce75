/* mllama.c - describe images and chat with Llama 3.2 Vision.

   build/mllama -m MODEL.gguf [--mmproj PROJ.gguf] [--image FILE]... [-p] PROMPT
   build/mllama -m models/mllama-demo.gguf --image examples/images/circle.png "Describe this image."
   build/mllama -m ollama:llama3.2-vision --image photo.jpg "What is in this image?"   (Ollama's store)

   Images are decoded with stb_image (JPEG, PNG, BMP, GIF's first frame; Debian's libstb-dev, linked
   with -lstb) and transparent pixels are laid over white, as the model's own processor does. The
   prompt goes through the model's chat template unless --raw, with the library's layout for
   several pictures in one turn (mms_mllama_chat_prompt: a "Picture N." line for each). The answer streams to stdout, the timings by phase go to stderr. With -i the program
   keeps chatting: each line you type is a turn, "/image FILE" attaches a picture to your next
   turn, "/help" lists the commands. `--help` lists every option. */
#include <stb/stb_image.h>   /* first: the library's mms_image_load decodes with it */
#define MMSCHED_IMPLEMENTATION
#include "mmsched.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_IMAGES 16
#define MAX_TURNS  256
#define DEFAULT_MAX_PIXELS 50000000L   /* ~350 MB while decoding (RGBA and RGB copies) */

static const char IMAGE_MARK[] = "<|image|>";

struct options {
    const char *model, *mmproj, *prompt, *system, *images[MAX_IMAGES], *json_schema;
    int         n_images, n_predict, n_ctx, threads, n_gpu_layers, sched_debug, max_images;
    long        max_pixels;
    bool        vision_gpu, raw, interactive, quiet, no_repack, json;
    struct mms_sampler_params sampling;
};

static void usage(FILE *out) {
    fprintf(out,
        "usage: mllama -m MODEL.gguf [options] [-p] PROMPT    (options take '--name value' or '--name=value')\n"
        "  -m, --model FILE        the model: a GGUF (Ollama's single file, or the text part of the two-file\n"
        "                          layout), a Hugging Face folder, or ollama:NAME[:TAG] from Ollama's store\n"
        "      --mmproj FILE       the vision projector of the two-file layout\n"
        "      --image FILE        a picture for the first turn (repeat for several; JPEG, PNG, BMP, GIF)\n"
        "      --max-pixels N      refuse pictures of more than N pixels, before decoding them (%ld)\n"
        "  -p, --prompt TEXT       the question (or give it as the last argument)\n"
        "      --system TEXT       a system message (the model's template refuses one together with images)\n"
        "  -i, --interactive       keep chatting: a line per turn; /image FILE, /clear, /help, /quit\n"
        "      --raw               send the prompt as it is, without the chat template; put <|image|> where\n"
        "                          each picture goes\n"
        "  -n, --n-predict N       most tokens to generate per turn (256)\n"
        "  -c, --ctx-size N        tokens of context (2048, at most the model's)\n"
        "      --max-images N      images per conversation, 1 to 64 (default: the number of --image, at least 2)\n"
        "  -t, --threads N         CPU threads (all cores)\n"
        "      --n-gpu-layers N    text layers on the GPU, counted from the last (needs a CUDA build: make cuda)\n"
        "      --vision-gpu        the vision tower on the GPU too\n"
        "      --no-repack         use the CPU's Q4_0/Q4_K weights where the file is mapped (default: copied\n"
        "                          into the CPU kernels' layout at load, faster)\n"
        "      --sched-debug N     scheduler trace on stderr: 1 splits and buffers, 2 every node\n"
        "      --temp T            temperature (0: greedy, the default; the model's card suggests 0.6)\n"
        "      --top-k N           keep the N most likely tokens (0: off)\n"
        "      --top-p P           keep the most likely tokens up to probability P (1: off; the card suggests 0.9)\n"
        "      --min-p P           drop tokens below P times the best one's probability (0: off)\n"
        "      --repeat-penalty R  penalise tokens already in the conversation (1: off)\n"
        "      --repeat-last-n N   how far back the penalty looks (0: everything)\n"
        "  -s, --seed N            the sampler's seed (0)\n"
        "      --json-schema FILE  answer with compact JSON valid against the JSON Schema in FILE (manual section 12\n"
        "                          says which keywords are supported; others are refused, never dropped)\n"
        "      --json              answer with a JSON object (any)\n"
        "  -q, --quiet             no timings\n", DEFAULT_MAX_PIXELS);
}

static void die(const char *what, const char *detail) {
    fprintf(stderr, "mllama: error: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

static void bad_usage(const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "mllama: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, " (--help lists the options)\n");
    exit(2);
}

/* -- output: a full disk or a closed pipe is an error, not a silently short answer -- */

static void out_write(const char *s, size_t n) {
    if (n && fwrite(s, 1, n, stdout) != n) die("cannot write the answer", strerror(errno));
}

static void out_flush(void) {
    if (fflush(stdout) != 0 || ferror(stdout)) die("cannot write the answer", strerror(errno));
}

/* -- options -- */

static long parse_long(const char *flag, const char *v, long lo, long hi) {
    char *end;
    long x;
    errno = 0;
    x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "mllama: %s wants a whole number from %ld to %ld, got '%s'\n", flag, lo, hi, v);
        exit(2);
    }
    return x;
}

static int parse_int(const char *flag, const char *v, int lo, int hi) { return (int)parse_long(flag, v, lo, hi); }

static uint64_t parse_seed(const char *flag, const char *v) {
    char *end;
    unsigned long long x;
    errno = 0;
    x = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[strspn(v, " \t")] == '-' || v[strspn(v, " \t")] == '+') {
        fprintf(stderr, "mllama: %s wants a whole number from 0 to %llu, got '%s'\n", flag, (unsigned long long)UINT64_MAX, v);
        exit(2);
    }
    return (uint64_t)x;
}

/* A finite number in [lo, hi]; lo_open excludes lo itself. */
static float parse_float(const char *flag, const char *v, double lo, bool lo_open, double hi) {
    char *end;
    double x;
    errno = 0;
    x = strtod(v, &end);
    if (end == v || *end || !isfinite(x) || (lo_open ? x <= lo : x < lo) || x > hi) {
        char range[96];
        if (hi >= HUGE_VAL) snprintf(range, sizeof range, "a finite number %s %g", lo_open ? "above" : "of at least", lo);
        else snprintf(range, sizeof range, "a number %s %g %s %g", lo_open ? "above" : "from", lo, lo_open ? "and at most" : "to", hi);
        fprintf(stderr, "mllama: %s wants %s, got '%s'\n", flag, range, v);
        exit(2);
    }
    return (float)x;
}

static int count_marks(const char *s) {
    int n = 0;
    const char *p = s;
    while ((p = strstr(p, IMAGE_MARK)) != NULL) { n++; p += sizeof IMAGE_MARK - 1; }
    return n;
}

static void set_once(const char **slot, const char *what, const char *v) {
    if (*slot) { fprintf(stderr, "mllama: %s was given twice: '%s' and '%s'\n", what, *slot, v); exit(2); }
    *slot = v;
}

static void parse_args(int argc, char **argv, struct options *o) {
    int i;
    bool only_positional = false;
    memset(o, 0, sizeof *o);
    o->n_predict = 256;
    o->threads = mms_cpu_count();
    o->max_pixels = DEFAULT_MAX_PIXELS;
    o->sampling = mms_sampler_default_params();
    for (i = 1; i < argc; i++) {
        char name[64];
        const char *a = argv[i], *v = NULL, *eq = NULL;
        bool inline_value = false;
        if (only_positional || a[0] != '-' || a[1] == '\0') {        /* the prompt as an argument */
            set_once(&o->prompt, "the prompt", a);
            continue;
        }
        if (strcmp(a, "--") == 0) { only_positional = true; continue; }
        if (a[1] == '-' && (eq = strchr(a, '=')) != NULL) {         /* --name=value */
            size_t n = (size_t)(eq - a) < sizeof name - 1 ? (size_t)(eq - a) : sizeof name - 1;
            memcpy(name, a, n);
            name[n] = '\0';
            a = name;
            v = eq + 1;
            inline_value = true;
        } else if (i + 1 < argc) {
            v = argv[i + 1];
        }
#define FLAG(s, l) (strcmp(a, s) == 0 || strcmp(a, l) == 0)
#define NEED() do { if (!v) { fprintf(stderr, "mllama: %s needs a value\n", a); exit(2); } if (!inline_value) i++; } while (0)
#define SWITCH(field) do { if (inline_value) bad_usage("%s takes no value (got '%s')", a, v); o->field = true; } while (0)
        if (FLAG("-h", "--help")) { usage(stdout); exit(0); }
        else if (FLAG("-m", "--model")) { NEED(); set_once(&o->model, "-m", v); }
        else if (FLAG("--mmproj", "--mmproj")) { NEED(); set_once(&o->mmproj, "--mmproj", v); }
        else if (FLAG("--image", "--image")) {
            NEED();
            if (o->n_images == MAX_IMAGES) { fprintf(stderr, "mllama: at most %d --image\n", MAX_IMAGES); exit(2); }
            o->images[o->n_images++] = v;
        }
        else if (FLAG("-p", "--prompt")) { NEED(); set_once(&o->prompt, "the prompt", v); }
        else if (FLAG("--system", "--system")) { NEED(); set_once(&o->system, "--system", v); }
        else if (FLAG("-i", "--interactive")) SWITCH(interactive);
        else if (FLAG("--raw", "--raw")) SWITCH(raw);
        else if (FLAG("-q", "--quiet")) SWITCH(quiet);
        else if (FLAG("--vision-gpu", "--vision-gpu")) SWITCH(vision_gpu);
        else if (FLAG("--no-repack", "--no-repack")) SWITCH(no_repack);
        else if (FLAG("-n", "--n-predict")) { NEED(); o->n_predict = parse_int(a, v, 1, 1 << 20); }
        else if (FLAG("-c", "--ctx-size")) { NEED(); o->n_ctx = parse_int(a, v, 16, 1 << 20); }
        else if (FLAG("--max-images", "--max-images")) { NEED(); o->max_images = parse_int(a, v, 1, 64); }
        else if (FLAG("--max-pixels", "--max-pixels")) { NEED(); o->max_pixels = parse_long(a, v, 1, 1L << 30); }
        else if (FLAG("-t", "--threads")) { NEED(); o->threads = parse_int(a, v, 1, 1024); }
        else if (FLAG("--n-gpu-layers", "-ngl")) { NEED(); o->n_gpu_layers = parse_int(a, v, 0, 100000); }
        else if (FLAG("--sched-debug", "--sched-debug")) { NEED(); o->sched_debug = parse_int(a, v, 0, 2); }
        else if (FLAG("--temp", "--temperature")) { NEED(); o->sampling.temperature = parse_float(a, v, 0.0, false, HUGE_VAL); }
        else if (FLAG("--top-k", "--top-k")) { NEED(); o->sampling.top_k = parse_int(a, v, 0, 1 << 30); }
        else if (FLAG("--top-p", "--top-p")) { NEED(); o->sampling.top_p = parse_float(a, v, 0.0, true, 1.0); }
        else if (FLAG("--min-p", "--min-p")) { NEED(); o->sampling.min_p = parse_float(a, v, 0.0, false, 1.0); }
        else if (FLAG("--repeat-penalty", "--repeat-penalty")) { NEED(); o->sampling.repeat_penalty = parse_float(a, v, 0.0, true, HUGE_VAL); }
        else if (FLAG("--repeat-last-n", "--repeat-last-n")) { NEED(); o->sampling.repeat_last_n = parse_int(a, v, 0, 1 << 30); }
        else if (FLAG("-s", "--seed")) { NEED(); o->sampling.seed = parse_seed(a, v); }
        else if (FLAG("--json-schema", "--json-schema")) { NEED(); set_once(&o->json_schema, "--json-schema", v); }
        else if (FLAG("--json", "--json")) SWITCH(json);
        else bad_usage("unknown option '%s'%s", a, "");
#undef FLAG
#undef NEED
#undef SWITCH
    }
    if (!o->model) { fprintf(stderr, "mllama: a model is required (-m FILE)\n"); usage(stderr); exit(2); }
    if (!o->prompt && !o->interactive) { fprintf(stderr, "mllama: a prompt is required (-p TEXT, or as the last argument), or -i to chat\n"); exit(2); }
    if (o->prompt && !o->prompt[strspn(o->prompt, " \t\r\n")]) { fprintf(stderr, "mllama: the prompt is empty; ask something (-p TEXT), or -i to chat\n"); exit(2); }
    if (o->raw && o->interactive) { fprintf(stderr, "mllama: --raw and -i do not go together\n"); exit(2); }
    if (o->json && o->json_schema) { fprintf(stderr, "mllama: --json and --json-schema do not go together\n"); exit(2); }
    if (o->prompt && o->raw && count_marks(o->prompt) != o->n_images) {
        fprintf(stderr, "mllama: with --raw the prompt places each picture with %s: it has %d for %d --image\n", IMAGE_MARK,
                count_marks(o->prompt), o->n_images);
        exit(2);
    }
    if (o->prompt && o->raw && !strstr(o->prompt, "<|start_header_id|>assistant<|end_header_id|>"))
        fprintf(stderr, "mllama: warning: with --raw the prompt goes to the model as it is, and it does not end in the assistant's header "
                "(<|start_header_id|>assistant<|end_header_id|>): an instruct model may answer nothing (leave out --raw to use the chat template)\n");
    if (o->prompt && !o->raw && count_marks(o->prompt)) {
        fprintf(stderr, "mllama: the prompt has %s in it; the program places the pictures itself (--raw places them by hand)\n", IMAGE_MARK);
        exit(2);
    }
    if (o->threads > mms_cpu_count())
        fprintf(stderr, "mllama: warning: %d threads on %d cores: at most one per core works at a time, the others wait\n", o->threads,
                mms_cpu_count());
}

/* -- images -- */

/* -- the conversation -- */

struct chat {
    struct mms_mllama_context *ctx;
    struct mms_vocab          *vocab;
    struct mms_sampler        *sampler;
    struct mms_constraint     *constraint;        /* --json-schema, --json: each answer starts it anew */
    int                        n_ctx, n_batch, n_vocab, n_ctx_train, max_images;
    int32_t                    image_token;
    int32_t                   *kv;                /* the tokens in the KV cache, in order */
    int                        n_kv;
    struct image { uint8_t *rgb; int w, h; } images[MAX_IMAGES * 4];
    int                        n_images;          /* attached so far, the pending ones included */
    struct mms_chat_message    msgs[MAX_TURNS];
    char                      *texts[MAX_TURNS];
    int                        n_msgs, n_system;
};

/* Decodes and keeps an image for the conversation; false (the reason in why[]) if it cannot be read. */
static bool chat_add_image(struct chat *c, const char *path, long max_pixels, char *why, size_t why_size) {
    struct image im;
    if (!(im.rgb = mms_image_load(path, max_pixels, &im.w, &im.h))) {   /* what is wrong with the file, first */
        snprintf(why, why_size, "%s", mms_last_error());
        return false;
    }
    if (c->n_images >= c->max_images) {
        mms_image_free(im.rgb);
        snprintf(why, why_size, "this conversation holds at most %d images (--max-images; /clear starts a new one)", c->max_images);
        return false;
    }
    c->images[c->n_images++] = im;
    return true;
}

static bool chat_add_message(struct chat *c, const char *role, const char *text, int n_images) {
    if (c->n_msgs == MAX_TURNS) return false;
    c->texts[c->n_msgs] = strdup(text ? text : "");
    c->msgs[c->n_msgs].role = role;
    c->msgs[c->n_msgs].text = c->texts[c->n_msgs];
    c->msgs[c->n_msgs].n_images = n_images;
    c->n_msgs++;
    return true;
}

static void chat_drop_last_message(struct chat *c) { free(c->texts[--c->n_msgs]); }

/* Forgets the conversation (the system message stays): turns, pictures, the KV cache, the sampler's history. */
static void chat_clear(struct chat *c) {
    int i;
    while (c->n_msgs > c->n_system) chat_drop_last_message(c);
    for (i = 0; i < c->n_images; i++) mms_image_free(c->images[i].rgb);
    c->n_images = 0;
    c->n_kv = 0;
    mms_mllama_seq_clear(c->ctx, 0);
    mms_sampler_reset(c->sampler);
}

/* A whole file (NUL-terminated; *n its length), or NULL. */
static char *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0;
    *n = 0;
    if (!f) return NULL;
    for (;;) {
        size_t got;
        if (*n + 4096 + 1 > cap) {
            char *b = (char *)realloc(buf, cap = (*n + 4096 + 1) * 2);
            if (!b) { free(buf); fclose(f); return NULL; }
            buf = b;
        }
        got = fread(buf + *n, 1, cap - *n - 1, f);
        *n += got;
        if (got == 0) break;
    }
    if (ferror(f)) { free(buf); fclose(f); return NULL; }
    fclose(f);
    buf[*n] = '\0';
    return buf;
}

static int32_t *tokenize(const struct mms_vocab *v, const char *text, bool add_bos, int *n) {
    int need = mms_tokenize(v, text, strlen(text), NULL, 0, add_bos, true);
    int32_t *ids;
    if (need < 0) die("cannot tokenize the prompt", mms_last_error());
    if (!(ids = (int32_t *)malloc(sizeof *ids * (size_t)(need + 1)))) die("out of memory", NULL);
    *n = mms_tokenize(v, text, strlen(text), ids, need, add_bos, true);
    return ids;
}

/* Decodes n tokens of the conversation (sequence 0) at its next positions. */
static enum mms_status decode_tokens(struct chat *c, const int32_t *tokens, int n) {
    struct mms_mllama_batch b;
    memset(&b, 0, sizeof b);
    b.n_tokens = n;
    b.tokens = tokens;
    return mms_mllama_decode(c->ctx, &b);
}

/* Brings the KV cache to hold `tokens` with the pictures they show: when those are the pictures
   it was decoded with, it keeps the common prefix and decodes the rest; a new picture means
   decoding from the start (tokens before the first <|image|> see every picture of the
   conversation), the pictures coming from the image store without a new encode. */
static void chat_sync(struct chat *c, const int32_t *tokens, int n) {
    int keep = 0, i, n_shown = 0;
    if (n < 1) die("the prompt has no tokens", NULL);
    for (i = 0; i < n; i++) n_shown += tokens[i] == c->image_token;
    if (n_shown > c->n_images) die("the prompt has more <|image|> tokens than images given", NULL);
    if (n_shown == mms_mllama_seq_get_n_images(c->ctx, 0))
        while (keep < n && keep < c->n_kv && c->kv[keep] == tokens[keep]) keep++;
    if (keep == n) keep = n - 1;   /* the last token is decoded again for its logits */
    if (keep > 0) {
        if (mms_mllama_seq_trim(c->ctx, 0, keep) != MMS_OK) die("cannot trim the KV cache", mms_last_error());
    } else {
        mms_mllama_seq_clear(c->ctx, 0);
        for (i = 0; i < n_shown; i++)
            if (mms_mllama_seq_add_image_rgb(c->ctx, 0, c->images[i].rgb, c->images[i].w, c->images[i].h, 0) != MMS_OK)
                die("cannot encode the image", mms_last_error());
    }
    for (i = keep; i < n; i += c->n_batch) {
        int len = n - i < c->n_batch ? n - i : c->n_batch;
        if (decode_tokens(c, tokens + i, len) != MMS_OK) die("decoding the prompt failed", mms_last_error());
    }
    memcpy(c->kv, tokens, sizeof *tokens * (size_t)n);
    c->n_kv = n;
}

static void text_append(char **text, size_t *len, size_t *cap, const char *s, size_t n) {
    while (*len + n + 1 > *cap) {
        char *t = (char *)realloc(*text, *cap *= 2);
        if (!t) die("out of memory", NULL);
        *text = t;
    }
    memcpy(*text + *len, s, n);
    *len += n;
}

/* Generates until an end token, n_predict tokens or a full context (*full set); streams the text
   to stdout and returns it (free it). */
static char *chat_generate(struct chat *c, int n_predict, bool *full) {
    struct mms_detokenizer d;
    size_t len = 0, cap = 256;
    char *text = (char *)malloc(cap), piece[256];
    int i, k;
    if (!text) die("out of memory", NULL);
    memset(&d, 0, sizeof d);
    *full = false;
    if (c->constraint) mms_constraint_reset(c->constraint);
    for (i = 0; i < n_predict; i++) {
        const float *logits = mms_mllama_get_logits(c->ctx, mms_mllama_get_n_logits(c->ctx) - 1);
        int32_t id = mms_sampler_sample(c->sampler, logits, c->n_vocab);
        if (id < 0) die("sampling failed", mms_last_error());
        if (mms_vocab_is_eog(c->vocab, id)) break;
        k = mms_detokenizer_push(c->vocab, &d, id, piece, sizeof piece, false);
        if (k > 0) {
            out_write(piece, (size_t)k);
            out_flush();
            text_append(&text, &len, &cap, piece, (size_t)k);
        }
        if (c->n_kv == c->n_ctx) { *full = true; break; }
        if (decode_tokens(c, &id, 1) != MMS_OK) die("decoding failed", mms_last_error());
        c->kv[c->n_kv++] = id;
    }
    k = mms_detokenizer_flush(&d, piece, sizeof piece);
    if (k > 0) {
        out_write(piece, (size_t)k);
        text_append(&text, &len, &cap, piece, (size_t)k);
    }
    out_write("\n", 1);
    out_flush();
    text[len] = '\0';
    if (c->constraint && !mms_constraint_is_finished(c->constraint))
        fprintf(stderr, "mllama: warning: the answer stopped (-n %d or a full context) before its JSON was complete\n", n_predict);
    return text;
}

enum turn_result { TURN_DONE, TURN_TOO_LONG };

/* One user turn: the whole conversation through the template, the KV cache synced to it, the answer.
   A conversation that no longer fits the context is left as it was (TURN_TOO_LONG, message in why[]). */
static enum turn_result chat_turn(struct chat *c, const struct options *o, const char *text, int n_images, char *why, size_t why_size) {
    char *prompt, *answer;
    int32_t *tokens;
    int len, n;
    bool full;
    if (!chat_add_message(c, "user", text, o->raw ? 0 : n_images)) {
        snprintf(why, why_size, "the conversation has %d messages, the most this program keeps", MAX_TURNS);
        return TURN_TOO_LONG;
    }
    if (o->raw) {
        prompt = strdup(text);
        if (!prompt) die("out of memory", NULL);
    } else {
        len = mms_mllama_chat_prompt(c->msgs, c->n_msgs, true, NULL, NULL, 0);
        if (len < 0) die("the chat template refused the conversation", mms_last_error());
        if (!(prompt = (char *)malloc((size_t)len + 1))) die("out of memory", NULL);
        mms_mllama_chat_prompt(c->msgs, c->n_msgs, true, NULL, prompt, (size_t)len + 1);
    }
    tokens = tokenize(c->vocab, prompt, o->raw, &n);
    free(prompt);
    if (n + 1 > c->n_ctx) {
        snprintf(why, why_size, "the prompt has %d tokens and the context holds %d (raise --ctx-size, up to the model's %d)", n,
                 c->n_ctx, c->n_ctx_train);
        free(tokens);
        chat_drop_last_message(c);
        return TURN_TOO_LONG;
    }
    chat_sync(c, tokens, n);
    for (len = 0; len < n; len++) mms_sampler_accept(c->sampler, tokens[len]);
    free(tokens);
    answer = chat_generate(c, o->n_predict, &full);
    if (!chat_add_message(c, "assistant", answer, 0)) {
        free(answer);
        snprintf(why, why_size, "the conversation has %d messages, the most this program keeps", MAX_TURNS);
        return TURN_TOO_LONG;
    }
    free(answer);
    if (full) {
        snprintf(why, why_size, "the context of %d tokens is full; the answer stops here", c->n_ctx);
        return TURN_TOO_LONG;
    }
    return TURN_DONE;
}

/* -- chat commands -- */

static void chat_help(void) {
    fprintf(stderr,
        "  type a message and press Enter to send it\n"
        "  /image FILE   attach a picture to your next message (repeat for several)\n"
        "  /clear        forget the conversation and start a new one\n"
        "  /help         this list\n"
        "  /quit         end (so does Ctrl-D)\n");
}

/* The argument of a command: surrounding spaces gone, and one pair of matching quotes. */
static char *command_arg(char *s) {
    size_t n;
    while (*s == ' ' || *s == '\t') s++;
    n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = '\0';
    if (n >= 2 && (s[0] == '"' || s[0] == '\'') && s[n - 1] == s[0]) { s[n - 1] = '\0'; s++; }
    return s;
}

static bool is_command(const char *line, const char *cmd) {
    size_t n = strlen(cmd);
    return strncmp(line, cmd, n) == 0 && (line[n] == '\0' || line[n] == ' ' || line[n] == '\t');
}

static void chat_loop(struct chat *c, const struct options *o, int pending, const char *model_path) {
    char line[8192], why[1024];
    fprintf(stderr, "mllama: chatting with %s. Type a message; /image FILE attaches a picture, /help lists the commands, /quit ends.\n",
            model_path);
    for (;;) {
        size_t n;
        fprintf(stderr, "> ");
        if (!fgets(line, sizeof line, stdin)) break;
        n = strlen(line);
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
        if (is_command(line, "/quit") || is_command(line, "/exit")) break;
        if (is_command(line, "/help")) { chat_help(); continue; }
        if (is_command(line, "/clear")) {
            chat_clear(c);
            pending = 0;
            fprintf(stderr, "(the conversation is cleared)\n");
            continue;
        }
        if (is_command(line, "/image")) {
            const char *path = command_arg(line + 6);
            if (!*path) { fprintf(stderr, "mllama: /image needs a file name\n"); continue; }
            if (!chat_add_image(c, path, o->max_pixels, why, sizeof why)) {     /* a typo does not end the chat */
                fprintf(stderr, "mllama: warning: no picture attached: %s\n", why);
                if (pending) fprintf(stderr, "(still attached to your next message: %d picture%s)\n", pending, pending > 1 ? "s" : "");
                continue;
            }
            pending++;
            fprintf(stderr, "(picture attached to your next message%s)\n", pending > 1 ? ", with the others" : "");
            continue;
        }
        if (line[0] == '/' && line[1] != '\0' && line[1] != ' ' && strchr(line, ' ') == NULL && strchr(line + 1, '/') == NULL) {
            fprintf(stderr, "mllama: unknown command %s (/help lists them)\n", line);
            continue;
        }
        if (!n && !pending) continue;
        if (count_marks(line)) {
            fprintf(stderr, "mllama: warning: the message has %s in it; attach pictures with /image (nothing sent)\n", IMAGE_MARK);
            continue;
        }
        if (chat_turn(c, o, line, pending, why, sizeof why) == TURN_TOO_LONG) {
            fprintf(stderr, "mllama: %s\nmllama: /clear starts a new conversation\n", why);
            if (c->n_msgs > 0 && strcmp(c->msgs[c->n_msgs - 1].role, "assistant") == 0) pending = 0;
            continue;
        }
        pending = 0;
    }
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
    struct mms_grammar *grammar = NULL;
    char why[1024];

    parse_args(argc, argv, &o);
    mms_log_set(log_warnings, NULL);
    memset(&c, 0, sizeof c);
    c.max_images = o.max_images ? o.max_images : (o.n_images > 2 ? o.n_images : 2);
    if (o.n_images > c.max_images) { fprintf(stderr, "mllama: %d --image but --max-images %d\n", o.n_images, c.max_images); exit(2); }
    for (i = 0; i < o.n_images; i++)                  /* bad images fail before the long load */
        if (!chat_add_image(&c, o.images[i], o.max_pixels, why, sizeof why)) die("cannot read an image", why);

    if (!(cpu = mms_backend_cpu_init())) die("cannot start the CPU backend", mms_last_error());
    mms_backend_cpu_set_n_threads(cpu, o.threads);
    if (o.n_gpu_layers > 0 || o.vision_gpu)
        if (!(gpu = mms_backend_cuda_init(0))) die("--n-gpu-layers and --vision-gpu need a GPU", mms_last_error());

    memset(&lp, 0, sizeof lp);
    lp.path = o.model;
    lp.mmproj_path = o.mmproj;
    lp.cpu = cpu;
    lp.no_cpu_repack = o.no_repack;
    lp.gpu = gpu;
    lp.n_gpu_layers = o.n_gpu_layers;
    lp.vision_on_gpu = o.vision_gpu;
    if (isatty(2) || (stat(o.model, &st) == 0 && st.st_size > (256 << 20))) { lp.progress = show_progress; lp.progress_user_data = &last_pct; }
    if (!(model = mms_mllama_model_load(&lp))) die("cannot load the model", mms_last_error());
    if (!(c.vocab = mms_vocab_load_file(o.model))) die("cannot load the model's vocabulary", mms_last_error());
    if (!o.raw && mms_vocab_chat_template(c.vocab)[0] && !mms_vocab_chat_template_is_builtin(c.vocab))
        fprintf(stderr, "mllama: warning: the model's chat template is not the Llama 3.2 Vision template this program renders; "
                "prompts follow the built-in one (--raw to write them yourself)\n");
    hp = mms_mllama_model_get_hparams(model);
    c.image_token = hp->image_token_id;
    if (o.n_images > 0 && hp->v_n_layer == 0) die("the model has no vision tower", "give --mmproj for the two-file layout");

    memset(&cp, 0, sizeof cp);
    cp.n_ctx = o.n_ctx;
    cp.max_images = c.max_images;
    if (!(c.ctx = mms_mllama_context_new(model, &cp))) die("cannot make the context", mms_last_error());
    if (o.sched_debug) mms_backend_sched_set_debug(mms_mllama_context_get_sched(c.ctx), o.sched_debug, stderr);
    c.n_ctx_train = hp->n_ctx_train;
    c.n_vocab = hp->n_vocab;
    c.n_ctx = o.n_ctx ? o.n_ctx : (hp->n_ctx_train < 2048 ? hp->n_ctx_train : 2048);
    c.n_batch = 512 < c.n_ctx ? 512 : c.n_ctx;
    if (!(c.kv = (int32_t *)malloc(sizeof *c.kv * (size_t)c.n_ctx))) die("out of memory", NULL);
    if (!(c.sampler = mms_sampler_new(&o.sampling))) die("bad sampling options", mms_last_error());
    if (o.json_schema || o.json) {
        if (o.json) grammar = mms_grammar_json(true);
        else {
            size_t n_schema = 0;
            char *schema = read_file(o.json_schema, &n_schema);
            if (!schema) die("cannot read --json-schema", o.json_schema);
            grammar = mms_grammar_from_json_schema(schema, n_schema);
            free(schema);
        }
        if (!grammar) die("cannot use the JSON schema", mms_last_error());
        if (!(c.constraint = mms_constraint_new(grammar, c.vocab))) die("cannot constrain the answer", mms_last_error());
        mms_sampler_set_constraint(c.sampler, c.constraint);
    }
    if (o.system) chat_add_message(&c, "system", o.system, 0);
    c.n_system = c.n_msgs;

    if (o.prompt && chat_turn(&c, &o, o.prompt, o.n_images, why, sizeof why) == TURN_TOO_LONG) {
        if (!o.interactive && c.n_msgs == c.n_system) die("prompt too long", why);
        fprintf(stderr, "mllama: %s\n", why);
    }
    if (o.interactive) chat_loop(&c, &o, o.prompt ? 0 : o.n_images, o.model);
    if (!o.quiet) {
        fprintf(stderr, "mllama: timings of this run (%s", o.model);
        for (i = 0; i < o.n_images; i++) fprintf(stderr, "%s%s", i ? ", " : "; pictures ", o.images[i]);
        fprintf(stderr, "):\n");
        mms_mllama_print_timings(c.ctx, stderr);
    }

    for (i = 0; i < c.n_msgs; i++) free(c.texts[i]);
    for (i = 0; i < c.n_images; i++) mms_image_free(c.images[i].rgb);
    free(c.kv);
    mms_sampler_free(c.sampler);
    mms_constraint_free(c.constraint);
    mms_grammar_free(grammar);
    mms_vocab_free(c.vocab);
    mms_mllama_context_free(c.ctx);
    mms_mllama_model_free(model);
    mms_backend_free(cpu);
    if (gpu) mms_backend_free(gpu);
    if (fclose(stdout) != 0) { fprintf(stderr, "mllama: error: cannot write the answer: %s\n", strerror(errno)); return 1; }
    return 0;
}
