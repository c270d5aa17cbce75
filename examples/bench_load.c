/* bench_load.c - the CPU backend's thread count on a busy machine.

   build/bench_load [--loads 0,1,2] [--threads 0,1,2,4] [--reps 5] [--cases caption,prefill,decode]
                    [--sessions own|same|both] [--text-layers 4]

   For each load, L busy processes per core are started (each a loop that never sleeps), and
   three jobs are timed with each thread setting, the settings alternated within each repetition
   so that they share the machine's moods:
     caption  the demo model (models/mllama-demo.gguf) describes examples/images/circle.png:
              image encode, prompt, greedy answer (tiny graphs: synchronisation is all);
     prefill  512 prompt tokens at Llama 3.2 11B Vision shapes (random f16 weights, --text-layers
              of the 40 text layers, the fourth a cross-attention layer that text skips: the file
              build/bench-mllama-11b-t4-v1+1.gguf, 3.5 GB, is written once and kept);
     decode   one token at those shapes after the prefill (the median of 8 steps).
   Thread setting 0 is the backend's default (automatic); others are fixed counts.
   --sessions: the busy processes run in a session of their own (setsid: as another program would,
   so Linux's autogroup shares the CPU between programs, not threads), in this program's session
   (threads share the CPU one by one: more threads take more of it), or both.
   The table gives each setting's median and the default's time over the best fixed count's among
   1..cores (counts above the cores are shown, not chosen: they take CPU from the other programs).
   One machine-readable line per (case, load, sessions) starts with "BENCH ". */
#define MMSCHED_IMPLEMENTATION
#include "mmsched.h"
#include "random_mllama.h"
#include <stb/stb_image.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_SETTINGS 8
#define MAX_REPS     64
#define N_DECODE     8
#define N_PROMPT     512

static int loads[4] = { 0, 1, 2 }, n_loads = 3;
static int settings[MAX_SETTINGS] = { 0, 1, 2, 4 }, n_settings = 4;
static int reps = 5, text_layers = 4;
static bool want_caption = true, want_prefill = true, want_decode = true, own_session = true, same_session = false;

static void die(const char *what, const char *detail) {
    fprintf(stderr, "bench_load: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

static void bad_usage(const char *flag, const char *want, const char *got) {
    fprintf(stderr, "bench_load: %s wants %s, got '%s'\n", flag, want, got ? got : "nothing");
    exit(2);
}

/* A comma-separated list of whole numbers in [lo, hi], at most cap of them. */
static int parse_list(const char *flag, const char *s, int *out, int cap, int lo, int hi, const char *want) {
    int n = 0;
    const char *p = s;
    char *end;
    if (!s || !*s) bad_usage(flag, want, s);
    while (*p) {
        long v = strtol(p, &end, 10);
        if (end == p || v < lo || v > hi || n == cap || (*end && *end != ',')) bad_usage(flag, want, s);
        out[n++] = (int)v;
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* -- the competing load -- */

static pid_t busy[1024];
static int   n_busy;

static void start_load(int per_core, bool own) {
    int i, n = per_core * mms_cpu_count();
    for (i = 0; i < n && n_busy < 1024; i++) {
        pid_t p = fork();
        if (p < 0) die("fork failed", NULL);
        if (p == 0) {
            volatile unsigned long x = 0;
            if (own) setsid();
            for (;;) x++;
        }
        busy[n_busy++] = p;
    }
    {
        struct timespec ts = { 0, 200000000 };   /* let the scheduler spread them */
        nanosleep(&ts, NULL);
    }
}

static void stop_load(void) {
    int i;
    for (i = 0; i < n_busy; i++) kill(busy[i], SIGKILL);
    for (i = 0; i < n_busy; i++) waitpid(busy[i], NULL, 0);
    n_busy = 0;
}

/* -- the jobs -- */

/* n tokens of sequence 0, the last row's logits wanted. */
static enum mms_status decode(struct mms_mllama_context *c, const int32_t *tokens, int n) {
    struct mms_mllama_batch b;
    memset(&b, 0, sizeof b);
    b.n_tokens = n;
    b.tokens = tokens;
    return mms_mllama_decode(c, &b);
}

struct caption_job {
    struct mms_mllama_model *model;
    struct mms_vocab        *vocab;
    uint8_t                 *rgb;
    int                      w, h, n_prompt;
    int32_t                  prompt[256];
};

static void caption_setup(struct caption_job *j, mms_backend_t cpu) {
    struct mms_mllama_load_params lp;
    struct mms_chat_message msg = { "user", "Describe this image.", 1 };
    char text[512];
    int n;
    uint8_t *rgba = stbi_load("examples/images/circle.png", &j->w, &j->h, &n, 4);
    if (!rgba) die("cannot read examples/images/circle.png (run from the repository root)", NULL);
    if (!(j->rgb = (uint8_t *)malloc((size_t)j->w * (size_t)j->h * 3))) die("out of memory", NULL);
    mms_image_rgba_over_white(rgba, j->w, j->h, 0, j->rgb);
    stbi_image_free(rgba);
    memset(&lp, 0, sizeof lp);
    lp.path = "models/mllama-demo.gguf";
    lp.cpu = cpu;
    if (!(j->model = mms_mllama_model_load(&lp))) die("cannot load the demo model", mms_last_error());
    if (!(j->vocab = mms_vocab_load_file(lp.path))) die("cannot load its vocabulary", mms_last_error());
    if (mms_mllama_chat_prompt(&msg, 1, true, NULL, text, sizeof text) < 0) die("prompt", mms_last_error());
    j->n_prompt = mms_tokenize(j->vocab, text, strlen(text), j->prompt, 256, false, true);
    if (j->n_prompt < 1 || j->n_prompt > 256) die("tokenize", mms_last_error());
}

/* One caption from a fresh context (so the picture is encoded each time); ms of the caption alone. */
static double caption_run(struct caption_job *j) {
    struct mms_mllama_context *c = mms_mllama_context_new(j->model, NULL);
    const int n_vocab = mms_mllama_model_get_hparams(j->model)->n_vocab;
    int64_t t0;
    int i;
    if (!c) die("context", mms_last_error());
    t0 = mms_time_us();
    if (mms_mllama_seq_add_image_rgb(c, 0, j->rgb, j->w, j->h, 0) != MMS_OK) die("image", mms_last_error());
    if (decode(c, j->prompt, j->n_prompt) != MMS_OK) die("prompt", mms_last_error());
    for (i = 0; i < 64; i++) {
        const float *l = mms_mllama_get_logits(c, 0);
        int32_t best = 0, k;
        for (k = 1; k < n_vocab; k++) if (l[k] > l[best]) best = k;
        if (mms_vocab_is_eog(j->vocab, best)) break;
        if (decode(c, &best, 1) != MMS_OK) die("decode", mms_last_error());
    }
    t0 = mms_time_us() - t0;
    mms_mllama_context_free(c);
    return (double)t0 / 1000.0;
}

struct big_job {
    struct mms_mllama_model   *model;
    struct mms_mllama_context *ctx;
    int32_t                    tokens[N_PROMPT];
};

static bool read_through(float fraction, void *user_data) { (void)fraction; (void)user_data; return true; }

static void big_setup(struct big_job *j, mms_backend_t cpu) {
    struct mms_mllama_hparams hp;
    struct mms_mllama_load_params lp;
    struct mms_mllama_context_params cp;
    char path[160];
    FILE *f;
    int i;
    mms_mllama_hparams_11b(&hp);
    snprintf(path, sizeof path, "build/bench-mllama-11b-t%d-v1+1.gguf", text_layers);
    if ((f = fopen(path, "rb")) != NULL) fclose(f);
    else {
        printf("writing %s (random weights at 11B shapes, once)\n", path);
        fflush(stdout);
        if (!write_mllama_gguf(path, &hp, text_layers, 1, 1, false)) { remove(path); die("cannot write", path); }
    }
    memset(&lp, 0, sizeof lp);
    lp.path = path;
    lp.cpu = cpu;
    lp.text_only = true;
    lp.progress = read_through;
    memset(&cp, 0, sizeof cp);
    cp.n_ctx = N_PROMPT + 64;
    cp.n_batch = N_PROMPT;
    if (!(j->model = mms_mllama_model_load(&lp)) || !(j->ctx = mms_mllama_context_new(j->model, &cp))) die("cannot load", mms_last_error());
    for (i = 0; i < N_PROMPT; i++) j->tokens[i] = (int32_t)((i * 7919 + 13) % 128000);
}

static double prefill_run(struct big_job *j) {
    int64_t t0;
    mms_mllama_seq_clear(j->ctx, 0);
    t0 = mms_time_us();
    if (decode(j->ctx, j->tokens, N_PROMPT) != MMS_OK) die("prefill", mms_last_error());
    return (double)(mms_time_us() - t0) / 1000.0;
}

/* The median of N_DECODE single-token steps at N_PROMPT past. */
static double decode_run(struct big_job *j) {
    double ms[N_DECODE];
    int g;
    if (mms_mllama_seq_get_n_past(j->ctx, 0) < N_PROMPT - 1) {
        mms_mllama_seq_clear(j->ctx, 0);
        if (decode(j->ctx, j->tokens, N_PROMPT - 1) != MMS_OK) die("prefill", mms_last_error());
    }
    mms_mllama_seq_trim(j->ctx, 0, N_PROMPT - 1);
    for (g = 0; g < N_DECODE; g++) {
        int32_t t = (int32_t)(1000 + g);
        int64_t t0 = mms_time_us();
        if (decode(j->ctx, &t, 1) != MMS_OK) die("decode", mms_last_error());
        ms[g] = (double)(mms_time_us() - t0) / 1000.0;
    }
    return median(ms, N_DECODE);
}

/* -- the table -- */

enum job_kind { JOB_CAPTION, JOB_PREFILL, JOB_DECODE };
static const char *const job_names[] = { "caption", "prefill 512", "decode" };

static double run_job(enum job_kind k, struct caption_job *cj, struct big_job *bj) {
    return k == JOB_CAPTION ? caption_run(cj) : k == JOB_PREFILL ? prefill_run(bj) : decode_run(bj);
}

static void measure(enum job_kind k, mms_backend_t cpu, struct caption_job *cj, struct big_job *bj, int load, const char *sessions) {
    static double ms[MAX_SETTINGS][MAX_REPS];
    double med[MAX_SETTINGS], best = 0.0, deflt = 0.0;
    int r, s, best_n = 0;
    for (r = 0; r < reps; r++)
        for (s = 0; s < n_settings; s++) {
            const int si = (r % 2) ? n_settings - 1 - s : s;   /* alternate the order */
            if (mms_backend_cpu_set_n_threads(cpu, settings[si]) != MMS_OK) die("threads", mms_last_error());
            if (r == 0) run_job(k, cj, bj);                     /* a warm-up with this setting */
            ms[si][r] = run_job(k, cj, bj);
        }
    printf("%-12s load %d/core %-4s |", job_names[k], load, load ? sessions : "");
    for (s = 0; s < n_settings; s++) {
        med[s] = median(ms[s], reps);
        printf(" %s%-2d %9.2f |", settings[s] ? "t=" : "auto", settings[s], med[s]);
        if (settings[s] == 0) deflt = med[s];
        else if (settings[s] <= mms_cpu_count() && (best == 0.0 || med[s] < best)) { best = med[s]; best_n = settings[s]; }
    }
    if (deflt > 0.0 && best > 0.0) printf(" auto / best (t=%d) %.2f", best_n, deflt / best);
    printf("\n");
    printf("BENCH name=load_%s load=%d sessions=%s reps=%d", k == JOB_CAPTION ? "caption" : k == JOB_PREFILL ? "prefill512" : "decode",
           load, load ? sessions : "none", reps);
    for (s = 0; s < n_settings; s++) printf(" t%d_ms=%.2f", settings[s], med[s]);
    if (deflt > 0.0 && best > 0.0) printf(" best_fixed=%d auto_over_best=%.3f", best_n, deflt / best);
    printf("\n");
    fflush(stdout);
}

int main(int argc, char **argv) {
    struct caption_job cj;
    struct big_job bj;
    mms_backend_t cpu;
    int i, l, m;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--loads")) { n_loads = parse_list(a, v, loads, 4, 0, 8, "up to 4 of 0..8 (busy processes per core)"); i++; }
        else if (!strcmp(a, "--threads")) { n_settings = parse_list(a, v, settings, MAX_SETTINGS, 0, 256, "up to 8 of 0..256 (0: the default)"); i++; }
        else if (!strcmp(a, "--reps")) { int r[1]; parse_list(a, v, r, 1, 1, MAX_REPS, "1..64"); reps = r[0]; i++; }
        else if (!strcmp(a, "--text-layers")) {
            int t[1];
            parse_list(a, v, t, 1, 4, 40, "4..40 (the first cross-attention layer is the fourth)");
            text_layers = t[0];
            i++;
        } else if (!strcmp(a, "--cases") && v) {
            want_caption = strstr(v, "caption") != NULL;
            want_prefill = strstr(v, "prefill") != NULL;
            want_decode = strstr(v, "decode") != NULL;
            if (!want_caption && !want_prefill && !want_decode) bad_usage(a, "caption, prefill and/or decode", v);
            i++;
        } else if (!strcmp(a, "--sessions") && v) {
            own_session = !strcmp(v, "own") || !strcmp(v, "both");
            same_session = !strcmp(v, "same") || !strcmp(v, "both");
            if (!own_session && !same_session) bad_usage(a, "own, same or both", v);
            i++;
        } else {
            fprintf(stderr, "usage: bench_load [--loads 0,1,2] [--threads 0,1,2,4] [--reps N] [--cases caption,prefill,decode] "
                            "[--sessions own|same|both] [--text-layers N]\n");
            return 2;
        }
    }
    if (!(cpu = mms_backend_cpu_init())) die("cpu backend", mms_last_error());
    memset(&cj, 0, sizeof cj);
    memset(&bj, 0, sizeof bj);
    if (want_caption) caption_setup(&cj, cpu);
    if (want_prefill || want_decode) big_setup(&bj, cpu);
    printf("%d cores; default threads %d; %d repetitions, medians in ms\n", mms_cpu_count(), mms_backend_cpu_get_n_threads(cpu), reps);
    for (l = 0; l < n_loads; l++)
        for (m = 0; m < 2; m++) {
            const bool own = m == 0;
            if (loads[l] > 0 && !(own ? own_session : same_session)) continue;
            if (loads[l] == 0 && m == 1) continue;
            start_load(loads[l], own);
            if (want_caption) measure(JOB_CAPTION, cpu, &cj, &bj, loads[l], own ? "own" : "same");
            if (want_prefill) measure(JOB_PREFILL, cpu, &cj, &bj, loads[l], own ? "own" : "same");
            if (want_decode) measure(JOB_DECODE, cpu, &cj, &bj, loads[l], own ? "own" : "same");
            stop_load();
        }
    if (bj.ctx) mms_mllama_context_free(bj.ctx);
    if (bj.model) mms_mllama_model_free(bj.model);
    if (cj.model) mms_mllama_model_free(cj.model);
    mms_vocab_free(cj.vocab);
    free(cj.rgb);
    mms_backend_free(cpu);
    return 0;
}
