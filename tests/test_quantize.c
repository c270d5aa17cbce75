/* The quantize program (examples/quantize.c) as a user runs it, and quantized mllama models:
   tiny4 (tests/fixtures/mllama/, f32) quantized to q8_0 keeps transformers' greedy tokens of the
   reference prompts wherever they are decided by more than the quantization noise (see test_q8_0
   for why not everywhere); its logits stay within a stated NMSE of the f32 model's; the file shrinks by
   the ratio the block layouts imply; norms, gates, biases, embedding tables and the vision tower
   keep their types as documented; the loader accepts quantized matrices and refuses a quantized
   norm or position embedding by name. tiny4's rows are 32..128 long (text 64/128, vision 32/64,
   projector 128; the tile table 2176 = 8.5 * 256), so no tensor of it fits the 256-element
   blocks of the K types: those leave tiny4 as it is (checked, byte for byte), and the K-quants and
   the q4_k_m and q5_k_m mixes are tested on a synthetic file written here (in the temporary folder) whose
   rows are multiples of 256, and on a small mllama model with random weights of such rows
   (examples/random_mllama.h): its logits against the same file dequantized and against f16.
   Plus the program's errors. QUANTIZE names the program under test. */
#ifndef _POSIX_C_SOURCE
#  define _POSIX_C_SOURCE 200809L     /* mkdtemp */
#endif
#define MMSCHED_IMPLEMENTATION
#include "../mmsched.h"
#include "test.h"
#include "mllama_load.h"
#include "ref_gguf.h"
#include <math.h>
#include "run_program.h"
#include "../examples/random_mllama.h"

#ifndef QUANTIZE
#  define QUANTIZE "build/quantize"
#endif
#define FIX "tests/fixtures/mllama/"
#define TINY4 FIX "tiny4.gguf"

static char tmpdir[64];
static mms_backend_t cpu;

/* -- running the program -- */

static long file_size(const char *path) {
    long n;
    free(test_slurp(path, &n));
    return n;
}

static bool file_exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

static const char *tmp(const char *name) {   /* a path in the temporary folder (16 in rotation) */
    static char buf[16][160];
    static int k;
    k = (k + 1) % 16;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static struct run run_quantize(const char *args) { return test_run_program(QUANTIZE, args, NULL, tmpdir); }

/* Runs quantize IN OUT TYPE [extra] and expects success; prints its total line. */
static bool quantize(const char *in, const char *out, const char *type, const char *extra) {
    char args[1024];
    struct run r;
    bool ok;
    snprintf(args, sizeof args, "%s %s %s %s", in, out, type, extra ? extra : "");
    r = run_quantize(args);
    ok = r.status == 0 && strstr(r.out, "total: ") != NULL;
    EXPECT(ok, "quantize %s: status %d\nstdout:\n%s\nstderr:\n%s", args, r.status, r.out, r.err);
    if (ok) printf("    %s: %s", type, strstr(r.out, "total: "));
    run_free(&r);
    return ok;
}

/* -- models and the reference prompts (as tests/test_mllama.c reads them) -- */

struct prompts {
    struct mms_gguf *ref;
    struct mms_mllama_image images[8];
    int n_images, n_prompts;
};

static bool prompts_open(struct prompts *p, const struct mms_mllama_model *m) {
    const struct mms_mllama_hparams *hp = mms_mllama_model_get_hparams(m);
    struct mms_mllama_image_params ip;
    uint32_t n = 0;
    int k;
    memset(p, 0, sizeof *p);
    p->ref = mms_gguf_open(FIX "tiny4-ref.gguf");
    EXPECT(p->ref != NULL, "reference: %s", mms_last_error());
    if (!p->ref) return false;
    EXPECT(mms_gguf_get_u32(p->ref, "ref.n_images", &n) == MMS_OK && n <= 8, "ref.n_images: %s", mms_last_error());
    p->n_images = n <= 8 ? (int)n : 0;
    EXPECT(mms_gguf_get_u32(p->ref, "ref.n_prompts", &n) == MMS_OK, "ref.n_prompts: %s", mms_last_error());
    p->n_prompts = (int)n;
    memset(&ip, 0, sizeof ip);
    ip.image_size = hp->v_image_size;
    ip.max_num_tiles = hp->v_max_tiles;
    memcpy(ip.mean, hp->image_mean, sizeof ip.mean);
    memcpy(ip.std, hp->image_std, sizeof ip.std);
    for (k = 0; k < p->n_images; k++) {
        char key[64];
        struct mms_gguf_tensor_info info;
        uint32_t w = 0, h = 0;
        int64_t idx;
        snprintf(key, sizeof key, "img.%d.rgb", k);
        idx = mms_gguf_find_tensor(p->ref, key);
        snprintf(key, sizeof key, "img.%d.width", k);
        mms_gguf_get_u32(p->ref, key, &w);
        snprintf(key, sizeof key, "img.%d.height", k);
        mms_gguf_get_u32(p->ref, key, &h);
        EXPECT(idx >= 0 && mms_gguf_get_tensor(p->ref, idx, &info) == MMS_OK &&
               mms_mllama_preprocess_image(&ip, (const uint8_t *)info.data, (int)w, (int)h, 0, &p->images[k]) == MMS_OK,
               "reference image %d: %s", k, mms_last_error());
    }
    return true;
}

static void prompts_close(struct prompts *p) {
    int k;
    for (k = 0; k < p->n_images; k++) mms_mllama_image_free(&p->images[k]);
    mms_gguf_close(p->ref);
}

/* A model's logits (every row of every prompt, in order), 16 greedy tokens per prompt, and the
   logits of the 16 greedy steps teacher-forced along transformers' greedy tokens (the prompt and
   the reference's tokens decoded in one batch: row g predicts greedy token g). */
struct outputs {
    float  *logits, *forced;      /* forced: [prompt][16][n_vocab] */
    int64_t n_logits;
    int     n_vocab;
    int32_t greedy[8][16];
    int     n_prompts;
};

static void outputs_free(struct outputs *o) { free(o->logits); free(o->forced); memset(o, 0, sizeof *o); }

static int argmax(const float *l, int n) {
    int j, best = 0;
    for (j = 1; j < n; j++) if (l[j] > l[best]) best = j;
    return best;
}

static bool run_model(const char *path, struct prompts *p, struct outputs *o) {
    struct mms_mllama_model *m = test_load_mllama(cpu, path, NULL, NULL, 0, false);
    struct mms_mllama_context *ctx = NULL;
    struct mms_mllama_context_params cp;
    const struct mms_mllama_hparams *hp;
    int q;
    memset(o, 0, sizeof *o);
    EXPECT(m != NULL, "load %s: %s", path, mms_last_error());
    if (!m) return false;
    hp = mms_mllama_model_get_hparams(m);
    memset(&cp, 0, sizeof cp);
    cp.n_ctx = 128;
    cp.n_batch = 64;
    cp.max_images = 2;
    ctx = mms_mllama_context_new(m, &cp);
    EXPECT(ctx != NULL, "context for %s: %s", path, mms_last_error());
    o->logits = (float *)malloc(sizeof(float) * 8 * 256 * (size_t)hp->n_vocab);
    o->forced = (float *)malloc(sizeof(float) * 8 * 16 * (size_t)hp->n_vocab);
    o->n_vocab = hp->n_vocab;
    for (q = 0; ctx && q < p->n_prompts && q < 8; q++) {
        int32_t tokens[256], imgs[8];
        bool want[256];
        int64_t n = ref_i32s(p->ref, "prompt.%d.tokens", q, tokens, 256), n_img = ref_i32s(p->ref, "prompt.%d.images", q, imgs, 8), i;
        int g;
        mms_mllama_seq_clear(ctx, 0);
        for (i = 0; i < n_img; i++)
            if (imgs[i] < 0 || imgs[i] >= p->n_images || mms_mllama_seq_add_image(ctx, 0, &p->images[imgs[i]]) != MMS_OK) {
                EXPECT(0, "%s prompt %d: add image: %s", path, q, mms_last_error());
                break;
            }
        for (i = 0; i < n; i++) want[i] = true;
        if (test_decode(ctx, tokens, (int)n, want) != MMS_OK) { EXPECT(0, "%s prompt %d: %s", path, q, mms_last_error()); break; }
        for (i = 0; i < n; i++, o->n_logits += hp->n_vocab)
            memcpy(o->logits + o->n_logits, mms_mllama_get_logits(ctx, (int)i), sizeof(float) * (size_t)hp->n_vocab);
        for (g = 0; g < 16; g++) {                  /* greedy: the argmax of the last row, one token at a time */
            const float *l = mms_mllama_get_logits(ctx, mms_mllama_get_n_logits(ctx) - 1);
            int32_t best = 0, j;
            for (j = 1; j < hp->n_vocab; j++) if (l[j] > l[best]) best = j;
            o->greedy[q][g] = best;
            if (g < 15 && test_decode(ctx, &best, 1, NULL) != MMS_OK) { EXPECT(0, "%s: decode: %s", path, mms_last_error()); break; }
        }
        mms_mllama_seq_clear(ctx, 0);                   /* teacher-forced along the reference's greedy tokens */
        for (i = 0; i < n_img; i++)
            if (imgs[i] >= 0 && imgs[i] < p->n_images) mms_mllama_seq_add_image(ctx, 0, &p->images[imgs[i]]);
        ref_i32s(p->ref, "prompt.%d.greedy", q, tokens + n, 16);
        for (i = 0; i < n + 15; i++) want[i] = i >= n - 1;
        if (n + 15 > 64 || test_decode(ctx, tokens, (int)n + 15, want) != MMS_OK) { EXPECT(0, "%s prompt %d forced: %s", path, q, mms_last_error()); break; }
        for (g = 0; g < 16; g++)
            memcpy(o->forced + ((size_t)q * 16 + (size_t)g) * (size_t)hp->n_vocab, mms_mllama_get_logits(ctx, g), sizeof(float) * (size_t)hp->n_vocab);
        o->n_prompts = q + 1;
    }
    mms_mllama_context_free(ctx);
    mms_mllama_model_free(m);
    return o->n_prompts == p->n_prompts;
}

/* Runs the model at path on the reference prompts: greedy tokens against transformers' (exact
   when exact_greedy; else only counted), logits' NMSE against the f32 model's outputs f32.
   Teacher-forced along the reference's greedy tokens, every step whose f32 margin (best logit
   minus the second) is at least `margin` must still pick the reference's token. */
static double check_model(const char *path, const char *what, struct prompts *p, const struct outputs *f32, double nmse_tol, bool exact_greedy,
                          double margin) {
    struct outputs o;
    double e = INFINITY;
    int q, kept = 0, total = 0, n_sure = 0, n_sure_kept = 0, n_forced_kept = 0;
    if (run_model(path, p, &o) && o.n_logits == f32->n_logits) {
        e = test_nmse(o.logits, f32->logits, o.n_logits);
        for (q = 0; q < o.n_prompts; q++) {
            int32_t want[16];
            int g;
            ref_i32s(p->ref, "prompt.%d.greedy", q, want, 16);
            for (g = 0; g < 16; g++) {
                const float *lf = f32->forced + ((size_t)q * 16 + (size_t)g) * (size_t)o.n_vocab;
                const float *lq = o.forced + ((size_t)q * 16 + (size_t)g) * (size_t)o.n_vocab;
                float second = -INFINITY;
                int j, best = argmax(lf, o.n_vocab);
                for (j = 0; j < o.n_vocab; j++) if (j != best && lf[j] > second) second = lf[j];
                n_forced_kept += argmax(lq, o.n_vocab) == want[g];
                if (lf[best] - second >= margin) {
                    n_sure++;
                    n_sure_kept += argmax(lq, o.n_vocab) == want[g];
                }
            }
        }
        if (margin < INFINITY)
            printf("    %s: teacher-forced greedy steps kept %d of %d; of those with an f32 margin >= %.2f, %d of %d\n", what,
                   n_forced_kept, 16 * o.n_prompts, margin, n_sure_kept, n_sure);
        else printf("    %s: teacher-forced greedy steps kept %d of %d (not required)\n", what, n_forced_kept, 16 * o.n_prompts);
        EXPECT(n_sure_kept == n_sure, "%s: %d of %d teacher-forced steps with an f32 margin >= %.2f changed", what, n_sure - n_sure_kept, n_sure, margin);
        for (q = 0; q < o.n_prompts; q++) {
            int32_t want[16];
            int g;
            ref_i32s(p->ref, "prompt.%d.greedy", q, want, 16);
            for (g = 0; g < 16 && o.greedy[q][g] == want[g]; g++) {}
            kept += g;
            total += 16;
            if (exact_greedy)
                EXPECT(g == 16, "%s prompt %d: greedy token %d is %d, transformers' %d", what, q, g, g < 16 ? o.greedy[q][g] : -1, g < 16 ? want[g] : -1);
        }
        printf("    %s: logits NMSE %.3g against f32 (tolerance %.1g); greedy tokens equal to transformers' up to the first difference: %d of %d\n",
               what, e, nmse_tol, kept, total);
        EXPECT(e <= nmse_tol, "%s: logits NMSE %.3g against the f32 model's, tolerance %.1g", what, e, nmse_tol);
    } else EXPECT(0, "%s: %d prompts run, %lld logits", what, o.n_prompts, (long long)o.n_logits);
    outputs_free(&o);
    return e;
}

/* -- what the output holds -- */

static bool is_vision(const char *name) { return !strncmp(name, "v.", 2) || !strncmp(name, "mm.", 3); }
static bool is_vision_table(const char *name) {
    return strstr(name, "patch_embd") || strstr(name, "class_embd") || strstr(name, "position_embd");
}

/* Every tensor of out against in: the documented rule for a model whose rows all fit `type`'s
   block (tiny4 and q8_0/q4_0): matrices quantized, the rest as it was; sizes as the layouts say.
   Returns the tensor bytes of in and out. */
static void check_types(const char *in_path, const char *out_path, enum mms_type type, bool vision, uint64_t *bytes_in, uint64_t *bytes_out) {
    struct mms_gguf *in = mms_gguf_open(in_path), *out = mms_gguf_open(out_path);
    int64_t i, n_bad = 0, n_quant = 0, n_kept = 0;
    *bytes_in = *bytes_out = 0;
    EXPECT(in && out, "open %s / %s: %s", in_path, out_path, mms_last_error());
    if (in && out) {
        EXPECT(mms_gguf_get_n_tensors(in) == mms_gguf_get_n_tensors(out) && mms_gguf_get_n_kv(in) <= mms_gguf_get_n_kv(out),
               "%s: %lld tensors, %lld keys; the input %lld, %lld", out_path, (long long)mms_gguf_get_n_tensors(out),
               (long long)mms_gguf_get_n_kv(out), (long long)mms_gguf_get_n_tensors(in), (long long)mms_gguf_get_n_kv(in));
        for (i = 0; i < mms_gguf_get_n_tensors(in); i++) {
            struct mms_gguf_tensor_info a, b;
            int64_t j;
            bool quant;
            mms_gguf_get_tensor(in, i, &a);
            j = mms_gguf_find_tensor(out, a.name);
            if (j < 0 || mms_gguf_get_tensor(out, j, &b) != MMS_OK) { EXPECT(0, "%s lacks %s", out_path, a.name); continue; }
            quant = a.n_dims == 2 && !is_vision_table(a.name) && (vision || !is_vision(a.name));
            if (b.type != (quant ? type : a.type) || b.n_dims != a.n_dims || memcmp(a.ne, b.ne, sizeof a.ne) != 0 ||
                b.size != mms_row_size(b.type, b.ne[0]) * (size_t)(b.ne[1] * b.ne[2] * b.ne[3]) ||
                (!quant && memcmp(a.data, b.data, a.size) != 0)) {
                if (n_bad++ < 5) EXPECT(0, "%s: %s is %s, want %s (%s)", out_path, a.name, mms_type_name(b.type),
                                        mms_type_name(quant ? type : a.type), quant ? "a matrix" : "kept");
            }
            n_quant += quant;
            n_kept += !quant;
            *bytes_in += a.size;
            *bytes_out += b.size;
        }
    }
    EXPECT(n_bad == 0, "%lld tensors of %s have the wrong type, shape, size or data", (long long)n_bad, out_path);
    EXPECT(n_quant > 0 && n_kept > 0, "%lld quantized, %lld kept", (long long)n_quant, (long long)n_kept);
    mms_gguf_close(in);
    mms_gguf_close(out);
}

static uint32_t file_type_of(const char *path) {
    struct mms_gguf *g = mms_gguf_open(path);
    uint32_t v = 12345;
    if (g) mms_gguf_get_u32(g, "general.file_type", &v);
    mms_gguf_close(g);
    return v;
}

/* -- cases -- */

static struct prompts P;
static struct outputs F32;      /* the f32 model's outputs on the reference prompts */

/* The f32 model itself: its greedy tokens are transformers' (as in test_mllama), the baseline. */
static void test_f32_baseline(void) {
    struct mms_mllama_model *m = test_load_mllama(cpu, TINY4, NULL, NULL, 0, false);
    EXPECT(m != NULL, "load: %s", mms_last_error());
    if (!m || !prompts_open(&P, m)) { mms_mllama_model_free(m); return; }
    mms_mllama_model_free(m);
    if (run_model(TINY4, &P, &F32)) check_model(TINY4, "f32", &P, &F32, 0.0, true, 0.0);
}

/* q8_0: the text matrices and the token embedding are quantized, the vision tower is kept (the
   default). The file: 44 text matrices at 34/128 of their f32 bytes, the rest as it was.
   Logits: NMSE 2.1e-4 against the f32 model (2.4e-4 with the vision tower quantized too); the
   tolerance 1e-3 leaves about 4x. The same NMSE comes from the q8_0 weights dequantized and
   stored as f32, so it is the rounding of the weights (about 3e-5 NMSE each, amplified through
   this random 6-layer model), not the q8_0 kernels.
   Greedy tokens: tiny4's reference greedy paths are decided by margins of 0.009 to 0.039
   (ref prompt.N.greedy_min_margin) on logits of spread 2, while q8_0 moves logits by about
   0.03 rms, so identical 16-token greedy runs cannot be required (measured: 54 of 80 tokens
   before the first difference; the f16 fixture, NMSE 3.7e-7, keeps all 80). What is required:
   teacher-forced along transformers' greedy tokens, every step the f32 model decides by a margin
   of at least 0.1 (about 2.5x the rms change of a difference of two logits) picks the same token
   (65 of the 80 steps; 75 of 80 steps agree in all). The AVX-512 set rounds the activations of
   q8_0 prompt products to 8 bits too (VNNI's integer dots, as decode does on every SIMD set):
   NMSE 3.8e-4, logits move about 1.35x as far, and the same 2.5x is a margin of 0.14. */
static double q8_0_margin(void) { return mms_cpu_get_kernels() == MMS_CPU_KERNELS_AVX512 ? 0.14 : 0.1; }

static void test_q8_0(void) {
    const char *out = tmp("tiny4-q8_0.gguf");
    uint64_t bin = 0, bout = 0;
    long fin = file_size(TINY4), fout;
    if (!F32.logits || !quantize(TINY4, out, "q8_0", NULL)) return;
    check_types(TINY4, out, MMS_TYPE_Q8_0, false, &bin, &bout);
    fout = file_size(out);
    printf("    q8_0: tensor data %llu -> %llu bytes (%.3fx), file %ld -> %ld bytes (%.3fx)\n", (unsigned long long)bin,
           (unsigned long long)bout, (double)bout / (double)bin, fin, fout, (double)fout / (double)fin);
    /* tiny4 is mostly text matrices: with the vision tower kept the file shrinks to about 0.48x;
       the header and alignment change by at most a few bytes per tensor */
    EXPECT(fout > 0 && fout < fin && labs((fout - fin) - (long)(bout - bin)) <= 32L * 162, "file %ld -> %ld, tensor data %llu -> %llu", fin, fout,
           (unsigned long long)bin, (unsigned long long)bout);
    EXPECT((double)fout / (double)fin < 0.5, "q8_0 file ratio %.3f, want under 0.5", (double)fout / (double)fin);
    EXPECT(file_type_of(out) == 7, "general.file_type %u, want 7 (llama.cpp's MOSTLY_Q8_0)", file_type_of(out));
    check_model(out, "q8_0", &P, &F32, 1e-3, false, q8_0_margin());
}

/* q8_0 and q4_0 with --quantize-vision: the vision matrices and the projector too (embedding
   tables, norms and gates kept); the loader takes them. q8_0 as in test_q8_0. q4_0 (16 levels
   per block of 32; weight NMSE about 8e-3): logits NMSE 0.07 measured, tolerance 0.2; its greedy
   tokens are only counted (logits move by about 0.5 rms, more than most margins here). */
static void test_vision_quantized(void) {
    const char *q8 = tmp("tiny4-q8_0-vision.gguf"), *q4 = tmp("tiny4-q4_0-vision.gguf");
    uint64_t bin = 0, bout = 0;
    if (!F32.logits) return;
    if (quantize(TINY4, q8, "q8_0", "--quantize-vision")) {
        check_types(TINY4, q8, MMS_TYPE_Q8_0, true, &bin, &bout);
        check_model(q8, "q8_0 with the vision tower", &P, &F32, 1e-3, false, q8_0_margin());
    }
    if (quantize(TINY4, q4, "q4_0", "--quantize-vision")) {
        check_types(TINY4, q4, MMS_TYPE_Q4_0, true, &bin, &bout);
        EXPECT((double)bout / (double)bin < 0.3, "q4_0 tensor ratio %.3f", (double)bout / (double)bin);
        EXPECT(file_type_of(q4) == 2, "general.file_type %u, want 2", file_type_of(q4));
        check_model(q4, "q4_0 with the vision tower", &P, &F32, 0.2, false, INFINITY);
    }
}

/* q4_k, q6_k and the q4_k_m mix on tiny4: no row is a multiple of 256, so every tensor is kept
   (each log line says so), general.file_type is left, and the output is the input, byte for
   byte; its logits are the f32 model's exactly (NMSE 0). */
static void test_k_quants_leave_tiny4(void) {
    static const char *const types[] = { "q4_k", "q6_k", "q4_k_m" };
    long in_size = 0;
    char *in = test_slurp(TINY4, &in_size);
    int k;
    for (k = 0; k < 3 && F32.logits; k++) {
        char name[64], args[512];
        long out_size = 0;
        char *out;
        struct run r;
        snprintf(name, sizeof name, "tiny4-%s.gguf", types[k]);
        snprintf(args, sizeof args, "%s %s %s", TINY4, tmp(name), types[k]);
        r = run_quantize(args);
        EXPECT(r.status == 0 && strstr(r.out, "0 of 162 tensors quantized") && strstr(r.out, "no tensor qualified") &&
               strstr(r.out, "blk.0.ffn_gate.weight") && strstr(r.out, "(kept: row length 64 not a multiple of q"),
               "%s: status %d\n%s%s", types[k], r.status, r.out, r.err);
        out = test_slurp(tmp(name), &out_size);
        EXPECT(in && out && in_size == out_size && memcmp(in, out, (size_t)in_size) == 0, "%s: the output differs from tiny4", types[k]);
        if (k == 0) check_model(tmp(name), "q4_k (nothing fits)", &P, &F32, 0.0, true, 0.0);
        free(out);
        run_free(&r);
    }
    free(in);
}

/* -- a synthetic model for the K-quants: rows of 256 and 512 -- */

#define SYN_LAYERS 16

static float syn_gauss(void) {   /* Box-Muller */
    float u = test_rand_uniform(1e-7f, 1.0f), v = test_rand_uniform(0.0f, 1.0f);
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

/* A tensor of random normal values (times 0.02) in type (f32, f16 or bf16). */
static void syn_add(struct mms_gguf_writer *w, const char *name, enum mms_type type, int n_dims, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = { ne0, ne1 }, n = ne0 * ne1;
    float *f = (float *)malloc(sizeof(float) * (size_t)n);
    void *d = malloc(mms_row_size(type, ne0) * (size_t)ne1);
    int64_t i;
    for (i = 0; i < n; i++) f[i] = 0.02f * syn_gauss();
    mms_get_type_traits(type)->from_float(f, d, n);
    EXPECT(mms_gguf_writer_add_tensor(w, name, type, n_dims, ne, d) == MMS_OK, "add %s: %s", name, mms_last_error());
    free(f);
    free(d);
}

/* Layers 3, 8 and 13 are cross-attention layers, as in the 11B model: a cross_attn_v_proj, no attn_v. */
static bool syn_cross(int il) { return il == 3 || il == 8 || il == 13; }

static bool syn_write(const char *path) {
    struct mms_gguf_writer *w = mms_gguf_writer_new();
    char name[96];
    int il;
    enum mms_status st;
    mms_gguf_writer_set_str(w, "general.architecture", "synthetic");
    mms_gguf_writer_set_u32(w, "general.file_type", 0);
    mms_gguf_writer_set_str(w, "general.name", "rows of 256");
    syn_add(w, "token_embd.weight", MMS_TYPE_F32, 2, 256, 40);
    for (il = 0; il < SYN_LAYERS; il++) {
        snprintf(name, sizeof name, "blk.%d.attn_norm.weight", il); syn_add(w, name, MMS_TYPE_F32, 1, 256, 1);
        snprintf(name, sizeof name, "blk.%d.attn_q.weight", il);    syn_add(w, name, MMS_TYPE_F16, 2, 256, 8);
        if (syn_cross(il)) snprintf(name, sizeof name, "blk.%d.cross_attn_v_proj.weight", il);
        else snprintf(name, sizeof name, "blk.%d.attn_v.weight", il);
        syn_add(w, name, MMS_TYPE_BF16, 2, 256, 4);
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", il);  syn_add(w, name, MMS_TYPE_F32, 2, 512, 4);
    }
    syn_add(w, "blk.0.odd.weight", MMS_TYPE_F32, 2, 288, 4);          /* 288: 9 blocks of 32, not of 256 */
    syn_add(w, "output.weight", MMS_TYPE_F32, 2, 256, 40);
    syn_add(w, "v.blk.0.attn_q.weight", MMS_TYPE_F16, 2, 256, 4);     /* vision: kept by default */
    syn_add(w, "v.position_embd.weight", MMS_TYPE_F32, 2, 256, 4);    /* kept always */
    st = mms_gguf_writer_write(w, path);
    EXPECT(st == MMS_OK, "write %s: %s", path, mms_last_error());
    mms_gguf_writer_free(w);
    return st == MMS_OK;
}

/* The tensors llama.cpp's Q4_K_M rule gives q6_k, worked out by hand from its
   llama_tensor_get_type (use_more_bits(i, n): i < n/8 || i >= 7*n/8 || (i - n/8) % 3 == 2), not
   from q4_k_m.h. ffn_down: i = the layer of 16: 0, 1 (< 2), 14, 15 (>= 14), 4, 7, 10, 13.
   attn_v: i = the rank among the 13 attn_v tensors (layers 3, 8 and 13 have none), n = 13: ranks
   0 (< 1), 11, 12 (>= 11), 3, 6, 9, which are layers 0, 14, 15, 4, 7, 11. cross_attn_v_proj is
   not an attn_v tensor: never. (The rule q4_k_m.h had before, ranks by layer number, n - n/8 for
   the last eighth and cross_attn_v_proj counted, fails this table on each of the three.) */
static bool syn_more_bits(const char *name, int il) {
    static const int ffn_down[] = { 0, 1, 4, 7, 10, 13, 14, 15 }, attn_v[] = { 0, 4, 7, 11, 14, 15 };
    const int *l = strstr(name, ".ffn_down.") ? ffn_down : strstr(name, ".attn_v.") ? attn_v : NULL;
    const int n = l == ffn_down ? 8 : 6;
    int i;
    for (i = 0; l && i < n; i++) if (l[i] == il) return true;
    return false;
}

static enum mms_type syn_want(const char *name, enum mms_type type, bool mix) {
    int il = -1;
    if (strstr(name, "norm") || strstr(name, "v.") == name) return MMS_TYPE_INVALID;    /* kept */
    if (!strcmp(name, "blk.0.odd.weight")) return mms_blck_size(type) == 256 ? MMS_TYPE_INVALID : type;
    if (!mix) return type;
    if (!strcmp(name, "output.weight")) return MMS_TYPE_Q6_K;
    if (sscanf(name, "blk.%d.", &il) == 1 && syn_more_bits(name, il)) return MMS_TYPE_Q6_K;
    return type;
}

/* Each quantized tensor must be exactly TYPE's from_float of the source's to_float (so f16 and
   bf16 sources go through their exact conversion), and its NMSE against the source is printed
   and held to a tolerance per type. Normal weights, worst tensor over several seeds: q8_0 3.3e-5,
   q4_0 8.9e-3, q4_k 6.1e-3, q6_k 3.7e-4 (as the step sizes predict: half-steps of 1/127, 1/8,
   ~1/15 and 1/32 of a block's range). The tolerances are about 3x those: wide for random
   tensors of 1024..2048 values, tight enough to catch a wrong scale or a lost sub-block. */
static void check_synthetic(const char *in_path, const char *out_path, enum mms_type type, bool mix, uint32_t file_type) {
    struct mms_gguf *in = mms_gguf_open(in_path), *out = mms_gguf_open(out_path);
    double worst[MMS_TYPE_COUNT] = { 0 };
    uint64_t bin = 0, bout = 0;
    int64_t i, n_bad = 0;
    int t;
    EXPECT(in && out, "open: %s", mms_last_error());
    for (i = 0; in && out && i < mms_gguf_get_n_tensors(in); i++) {
        struct mms_gguf_tensor_info a, b;
        enum mms_type want;
        int64_t j, n;
        mms_gguf_get_tensor(in, i, &a);
        want = syn_want(a.name, type, mix);
        if (want == MMS_TYPE_INVALID) want = a.type;
        j = mms_gguf_find_tensor(out, a.name);
        if (j < 0 || mms_gguf_get_tensor(out, j, &b) != MMS_OK || b.type != want) {
            if (n_bad++ < 5) EXPECT(0, "%s: %s is %s, want %s", out_path, a.name, j < 0 ? "missing" : mms_type_name(b.type), mms_type_name(want));
            continue;
        }
        bin += a.size;
        bout += b.size;
        n = a.ne[0] * a.ne[1];
        if (b.type == a.type) { EXPECT(memcmp(a.data, b.data, a.size) == 0, "%s: kept but changed", a.name); continue; }
        {
            float *src = (float *)malloc(sizeof(float) * (size_t)n), *deq = (float *)malloc(sizeof(float) * (size_t)n);
            void *q = malloc(b.size);
            double e;
            mms_get_type_traits(a.type)->to_float(a.data, src, n);
            mms_get_type_traits(b.type)->from_float(src, q, n);
            EXPECT(b.size == mms_row_size(b.type, a.ne[0]) * (size_t)a.ne[1] && memcmp(q, b.data, b.size) == 0,
                   "%s: the %s bytes are not from_float(to_float(source))", a.name, mms_type_name(b.type));
            mms_get_type_traits(b.type)->to_float(b.data, deq, n);
            e = test_nmse(deq, src, n);
            if (e > worst[b.type]) worst[b.type] = e;
            free(src);
            free(deq);
            free(q);
        }
    }
    EXPECT(n_bad == 0, "%lld tensors of the wrong type", (long long)n_bad);
    for (t = 0; t < MMS_TYPE_COUNT; t++) {
        static const double tol[MMS_TYPE_COUNT] = { 0, 0, 0, 0, 0, 1e-4, 2.5e-2, 1.5e-2, 1e-3, 4e-3 };
        if (worst[t] == 0) continue;
        printf("    %s%s: %s weights NMSE %.3g at worst (tolerance %.2g)\n", mms_type_name(type), mix ? " mix" : "", mms_type_name((enum mms_type)t),
               worst[t], tol[t]);
        EXPECT(worst[t] <= tol[t], "%s: weight NMSE %.3g above %.2g", mms_type_name((enum mms_type)t), worst[t], tol[t]);
    }
    printf("    %s%s: tensor data %llu -> %llu bytes (%.3fx)\n", mms_type_name(type), mix ? " mix" : "", (unsigned long long)bin,
           (unsigned long long)bout, (double)bout / (double)bin);
    EXPECT(file_type_of(out_path) == file_type, "general.file_type %u, want %u", file_type_of(out_path), file_type);
    mms_gguf_close(in);
    mms_gguf_close(out);
}

static void test_k_quants_on_synthetic(void) {
    static const struct { const char *arg, *extra, *file; enum mms_type type; bool mix; uint32_t file_type; } runs[] = {
        { "q4_k", NULL, "syn-q4_k.gguf", MMS_TYPE_Q4_K, false, 14 },
        { "q6_k", NULL, "syn-q6_k.gguf", MMS_TYPE_Q6_K, false, 18 },
        { "q4_k", "--mix q4_k_m", "syn-q4_k_m.gguf", MMS_TYPE_Q4_K, true, 15 },
        { "q5_k", NULL, "syn-q5_k.gguf", MMS_TYPE_Q5_K, false, 16 },
        { "Q5_K_M", NULL, "syn-q5_k_m.gguf", MMS_TYPE_Q5_K, true, 17 },
        { "Q8_0", NULL, "syn-q8_0.gguf", MMS_TYPE_Q8_0, false, 7 },
        { "q4_0", NULL, "syn-q4_0.gguf", MMS_TYPE_Q4_0, false, 2 },
    };
    char syn[160], out[160];
    size_t k;
    snprintf(syn, sizeof syn, "%s", tmp("synthetic.gguf"));
    if (!syn_write(syn)) return;
    for (k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        snprintf(out, sizeof out, "%s", tmp(runs[k].file));
        if (quantize(syn, out, runs[k].arg, runs[k].extra)) check_synthetic(syn, out, runs[k].type, runs[k].mix, runs[k].file_type);
    }
    {   /* the _m files against plain q4_k/q5_k: bigger by the q6_k tensors only */
        long a = file_size(tmp("syn-q4_k.gguf")), b = file_size(tmp("syn-q4_k_m.gguf")), c = file_size(syn);
        long a5 = file_size(tmp("syn-q5_k.gguf")), b5 = file_size(tmp("syn-q5_k_m.gguf"));
        printf("    synthetic file sizes: f32/f16/bf16 %ld, q4_k %ld (%.3fx), q4_k_m %ld (%.3fx), q5_k %ld (%.3fx), q5_k_m %ld (%.3fx)\n", c, a,
               (double)a / (double)c, b, (double)b / (double)c, a5, (double)a5 / (double)c, b5, (double)b5 / (double)c);
        EXPECT(a > 0 && b > a && b < c, "sizes %ld %ld %ld", c, a, b);
        EXPECT(a5 > b && b5 > a5 && b5 < c, "q5_k sizes %ld %ld (q4_k_m %ld, source %ld)", a5, b5, b, c);
    }
}

/* The loader: quantized matrices load (test_q8_0, test_vision_quantized); a quantized weight
   that other ops use is refused at load, naming the tensor and its type. The files are tiny4
   with one tensor replaced by its q8_0 version. */
static bool write_with_q8(const char *out_path, const char *which) {
    struct mms_gguf *in = mms_gguf_open(TINY4);
    struct mms_gguf_writer *w = mms_gguf_writer_new();
    int64_t i;
    bool ok = in && w;
    for (i = 0; ok && i < mms_gguf_get_n_kv(in); i++) ok = mms_gguf_writer_copy_kv(w, in, i) == MMS_OK;
    for (i = 0; ok && i < mms_gguf_get_n_tensors(in); i++) {
        struct mms_gguf_tensor_info info;
        mms_gguf_get_tensor(in, i, &info);
        if (!strcmp(info.name, which)) {
            int64_t n = info.ne[0] * info.ne[1];
            void *q = malloc(mms_row_size(MMS_TYPE_Q8_0, info.ne[0]) * (size_t)info.ne[1]);
            mms_get_type_traits(MMS_TYPE_Q8_0)->from_float((const float *)info.data, q, n);
            ok = mms_gguf_writer_add_tensor(w, info.name, MMS_TYPE_Q8_0, info.n_dims, info.ne, q) == MMS_OK;
            free(q);
        } else ok = mms_gguf_writer_add_tensor(w, info.name, info.type, info.n_dims, info.ne, info.data) == MMS_OK;
    }
    ok = ok && mms_gguf_writer_write(w, out_path) == MMS_OK;
    EXPECT(ok, "writing %s: %s", out_path, mms_last_error());
    mms_gguf_writer_free(w);
    mms_gguf_close(in);
    return ok;
}

/* -- the K-quants on a whole mllama model: random weights, rows of 256 and 512 -- */

#define RQ_TOKENS 24

/* Logits of every row of one prompt (an image, then 23 text tokens), then of one decoded token
   (the decode path: one column, 8-bit activations), through the model at path. */
static bool   g_no_repack;     /* load with no_cpu_repack */
static size_t g_repacked;      /* the last load's weights in CPU_REPACK buffers */

static float *random_model_logits(const char *path, int *n_vocab) {
    struct mms_mllama_load_params lp;
    struct mms_mllama_model *m;
    struct mms_mllama_context *ctx = NULL;
    struct mms_mllama_memory mem;
    struct mms_mllama_context_params cp;
    float *out = NULL;
    uint8_t rgb[80 * 60 * 3];
    int32_t tokens[RQ_TOKENS], next = 5;
    bool want[RQ_TOKENS], ok;
    int i, nv;
    memset(&lp, 0, sizeof lp);
    lp.path = path;
    lp.cpu = cpu;
    lp.no_cpu_repack = g_no_repack;
    m = mms_mllama_model_load(&lp);
    EXPECT(m != NULL, "load %s: %s", path, mms_last_error());
    if (!m) return NULL;
    *n_vocab = nv = mms_mllama_model_get_hparams(m)->n_vocab;
    memset(&cp, 0, sizeof cp);
    cp.n_ctx = 64;
    cp.n_batch = 32;
    cp.max_images = 1;
    ctx = mms_mllama_context_new(m, &cp);
    g_repacked = ctx && mms_mllama_get_memory(ctx, 0, &mem) == MMS_OK ? mem.weights_repacked : 0;
    for (i = 0; i < (int)sizeof rgb; i++) rgb[i] = (uint8_t)((i * 7 + (i / 240) * 13) & 255);   /* a patterned picture */
    tokens[0] = mms_mllama_model_get_hparams(m)->image_token_id;
    for (i = 1; i < RQ_TOKENS; i++) tokens[i] = (i * 37) % nv;
    for (i = 0; i < RQ_TOKENS; i++) want[i] = true;
    out = (float *)malloc(sizeof(float) * (RQ_TOKENS + 1) * (size_t)nv);
    ok = out && ctx && mms_mllama_seq_add_image_rgb(ctx, 0, rgb, 80, 60, 80 * 3) == MMS_OK && test_decode(ctx, tokens, RQ_TOKENS, want) == MMS_OK;
    for (i = 0; ok && i < RQ_TOKENS; i++) memcpy(out + (size_t)i * (size_t)nv, mms_mllama_get_logits(ctx, i), sizeof(float) * (size_t)nv);
    ok = ok && test_decode(ctx, &next, 1, NULL) == MMS_OK;
    if (ok) memcpy(out + (size_t)RQ_TOKENS * (size_t)nv, mms_mllama_get_logits(ctx, 0), sizeof(float) * (size_t)nv);
    else { free(out); out = NULL; }
    EXPECT(out != NULL, "%s: %s", path, mms_last_error());
    mms_mllama_context_free(ctx);
    mms_mllama_model_free(m);
    return out;
}

/* The model the quantized file means: every block-type tensor dequantized (the library's
   dequantizers equal the gguf package's, test_quant) and written as f32, metadata copied. */
static bool dequantize_file(const char *in, const char *out) {
    struct mms_gguf *g = mms_gguf_open(in);
    struct mms_gguf_writer *w = mms_gguf_writer_new();
    bool ok = g && w;
    int64_t i;
    for (i = 0; ok && i < mms_gguf_get_n_kv(g); i++) ok = mms_gguf_writer_copy_kv(w, g, i) == MMS_OK;
    for (i = 0; ok && i < mms_gguf_get_n_tensors(g); i++) {
        struct mms_gguf_tensor_info t;
        float *f = NULL;
        int64_t n = 1, d;
        ok = mms_gguf_get_tensor(g, i, &t) == MMS_OK;
        if (!ok) break;
        for (d = 0; d < t.n_dims; d++) n *= t.ne[d];
        if (mms_get_type_traits(t.type)->is_quantized) {
            f = (float *)malloc(sizeof(float) * (size_t)n);
            ok = f != NULL;
            if (ok) mms_get_type_traits(t.type)->to_float(t.data, f, n);
        }
        ok = ok && mms_gguf_writer_add_tensor(w, t.name, f ? MMS_TYPE_F32 : t.type, t.n_dims, t.ne, f ? (const void *)f : t.data) == MMS_OK;
        free(f);
    }
    ok = ok && mms_gguf_writer_write(w, out) == MMS_OK;
    EXPECT(ok, "dequantize %s: %s", in, mms_last_error());
    mms_gguf_writer_free(w);
    mms_gguf_close(g);
    return ok;
}

/* A small mllama model with random weights whose matrices all have rows of 256 or 512 (text 256
   wide, ffn 512, vision 256, projector 512; 5 text layers, one of them cross-attention, 4 + 1
   vision layers), quantized to q6_k, q4_k and the q4_k_m mix (the vision tower too with
   --quantize-vision). Required: (1) the logits equal those of the same file dequantized to f32
   (what the quantized weights mean): a decoded token's, where the activations are rounded to 8
   bits, to 1.5e-3 (measured 2.7e-4 - 6.4e-4); the prompt's to NMSE 1e-10 where its products
   dequantize the weights (scalar and NEON kernels; measured: bit-identical), to 1.5e-3 where they
   round the activations to 8 bits too (AVX2; measured 4.4e-4);
   (2) the logits stay within a stated NMSE of the f16 model's: measured
   q6_k 2.1e-3, q4_k 3.8e-2, q4_k_m 3.6e-2, q4_k with the vision tower 4.1e-2 (a random network
   amplifies weight noise: q4_k's weight NMSE is 5e-3), tolerances about 3x. */
static void test_k_quants_on_a_random_mllama(void) {
    static const struct { const char *type, *extra; double tol; } cases[5] = {
        { "q6_k", "", 6e-3 }, { "q4_k", "", 0.1 }, { "q4_k_m", "", 0.1 }, { "q4_k", "--quantize-vision", 0.12 }, { "q5_k_m", "", 0.03 }
    };
    struct mms_mllama_hparams hp;
    char f16[160];
    float *ref;
    int nv = 0, k;
    snprintf(f16, sizeof f16, "%s", tmp("random-f16.gguf"));   /* tmp's buffers rotate */
    mms_mllama_hparams_11b(&hp);
    hp.n_embd = 256; hp.n_ff = 512; hp.n_head = 4; hp.n_head_kv = 2; hp.head_dim = 64;
    hp.n_vocab = 512; hp.n_embd_rows = 520; hp.image_token_id = 512;
    hp.v_n_embd = 256; hp.v_n_ff = 512; hp.v_n_head = 4; hp.v_image_size = 56; hp.v_patch_size = 14;
    if (!write_mllama_gguf(f16, &hp, 5, 4, 1, false)) { EXPECT(0, "cannot write %s", f16); return; }
    ref = random_model_logits(f16, &nv);
    for (k = 0; ref && k < 5; k++) {
        char name[64], deq[64];
        const int64_t n_prompt = (int64_t)RQ_TOKENS * nv;
        float *got, *mean;
        size_t repacked;
        snprintf(name, sizeof name, "random-%s%s.gguf", cases[k].type, cases[k].extra[0] ? "-vision" : "");
        snprintf(deq, sizeof deq, "random-%s%s-f32.gguf", cases[k].type, cases[k].extra[0] ? "-vision" : "");
        if (!quantize(f16, tmp(name), cases[k].type, cases[k].extra[0] ? cases[k].extra : NULL) || !dequantize_file(tmp(name), tmp(deq))) continue;
        got = random_model_logits(tmp(name), &nv);
        repacked = g_repacked;
        mean = random_model_logits(tmp(deq), &nv);
        if (got && mean) {
            const double e_prompt = test_nmse(got, mean, n_prompt), e_decode = test_nmse(got + n_prompt, mean + n_prompt, nv);
            const double e_f16 = test_nmse(got, ref, n_prompt + nv);
            printf("    random mllama, %s %s: logits NMSE vs the dequantized model %.2g (prompt), %.2g (decode); vs f16 %.2g (tolerance %.2g)\n",
                   cases[k].type, cases[k].extra, e_prompt, e_decode, e_f16, cases[k].tol);
            const enum mms_cpu_kernels set = mms_cpu_get_kernels();   /* the x86 sets round prompt activations to 8 bits */
            const double prompt_tol = set == MMS_CPU_KERNELS_AVX2 || set == MMS_CPU_KERNELS_AVX512 ? 1.5e-3 : 1e-10;
            EXPECT(e_prompt <= prompt_tol && e_decode <= 1.5e-3, "%s %s: the quantized model differs from its dequantized self: %.3g (prompt, tolerance %.2g), %.3g",
                   cases[k].type, cases[k].extra, e_prompt, prompt_tol, e_decode);
            EXPECT(e_f16 <= cases[k].tol && e_f16 > 0, "%s %s: logits NMSE %.3g vs f16", cases[k].type, cases[k].extra, e_f16);
        }
        if (got && k == 1) {   /* the loader's default keeps q4_k matrices repacked; with no_cpu_repack the same model mapped */
            float *mapped;
            g_no_repack = true;
            mapped = random_model_logits(tmp(name), &nv);
            g_no_repack = false;
            EXPECT(repacked > 0 && g_repacked == 0, "q4_k: %zu bytes of weights repacked by default, %zu with no_cpu_repack", repacked, g_repacked);
            if (mapped) {
                const double e = test_nmse(got, mapped, n_prompt + nv);
                printf("    random mllama, q4_k: %zu bytes of weights repacked; logits NMSE vs the same file used mapped %.2g\n", repacked, e);
                EXPECT(e <= 1e-8, "q4_k: the repacked model's logits differ from the mapped one's by NMSE %.3g", e);
            }
            free(mapped);
        }
        free(got);
        free(mean);
    }
    free(ref);
}

static void test_loader_refuses_quantized_non_matrices(void) {
    static const char *const refused[] = { "blk.0.attn_norm.weight", "v.position_embd.weight", "v.pre_ln.weight", "mm.0.bias" };
    int k;
    test_capture_log();
    for (k = 0; k < 4; k++) {
        const char *path = tmp("refused.gguf");
        struct mms_mllama_model *m;
        if (!write_with_q8(path, refused[k])) continue;
        m = test_load_mllama(cpu, path, NULL, NULL, 0, false);
        EXPECT(m == NULL && mms_last_status() == MMS_ERR_UNSUPPORTED && strstr(mms_last_error(), refused[k]) && strstr(mms_last_error(), "q8_0"),
               "a q8_0 %s: %s", refused[k], m ? "loaded" : mms_last_error());
        mms_mllama_model_free(m);
    }
    {   /* the token embedding (get_rows) and the tile table (get_rows) are accepted quantized */
        const char *path = tmp("accepted.gguf");
        struct mms_mllama_model *m = write_with_q8(path, "token_embd.weight") ? test_load_mllama(cpu, path, NULL, NULL, 0, false) : NULL;
        EXPECT(m != NULL, "a q8_0 token_embd: %s", mms_last_error());
        mms_mllama_model_free(m);
        m = write_with_q8(path, "v.pre_tile_position_embd.weight") ? test_load_mllama(cpu, path, NULL, NULL, 0, false) : NULL;
        EXPECT(m != NULL, "a q8_0 pre-tile table: %s", mms_last_error());
        mms_mllama_model_free(m);
    }
    mms_log_set(NULL, NULL);
}

#define EXPECT_FAILS(r, code, frag) \
    EXPECT((r).status == (code) && strstr((r).err, frag) != NULL, "status %d (want %d), stderr lacks '%s':\n%s", (r).status, code, frag, (r).err)

static void test_errors(void) {
    char args[512];
    struct run r;
    r = run_quantize("/nonexistent/model.gguf out.gguf q8_0");
    EXPECT_FAILS(r, 1, "quantize: error: cannot open '/nonexistent/model.gguf': No such file or directory");
    run_free(&r);

    {   /* a broken input: no output is left behind */
        FILE *f = fopen(tmp("broken.gguf"), "wb");
        if (f) { fwrite("GGUF\x03\x00\x00\x00garbage", 1, 15, f); fclose(f); }
        snprintf(args, sizeof args, "%s %s q8_0", tmp("broken.gguf"), tmp("never.gguf"));
        r = run_quantize(args);
        EXPECT_FAILS(r, 1, "quantize: error: cannot read");
        EXPECT(!file_exists(tmp("never.gguf")), "a failed run left its output");
        run_free(&r);
    }

    snprintf(args, sizeof args, "%s %s q5_1", TINY4, tmp("never.gguf"));
    r = run_quantize(args);
    EXPECT_FAILS(r, 2, "unknown TYPE 'q5_1'");
    EXPECT(!file_exists(tmp("never.gguf")), "a failed run left its output");
    run_free(&r);

    snprintf(args, sizeof args, "%s /nonexistent/dir/out.gguf q8_0", TINY4);
    r = run_quantize(args);
    EXPECT_FAILS(r, 1, "quantize: error: cannot write '/nonexistent/dir/out.gguf'");
    run_free(&r);

    snprintf(args, sizeof args, "%s %s q8_0", TINY4, TINY4);
    r = run_quantize(args);
    EXPECT_FAILS(r, 1, "is IN");
    run_free(&r);

    snprintf(args, sizeof args, "%s %s q8_0 --mix q4_k_m", TINY4, tmp("never.gguf"));
    r = run_quantize(args);
    EXPECT_FAILS(r, 2, "--mix q4_k_m needs TYPE q4_k");
    run_free(&r);

    r = run_quantize("--bogus a b q8_0");
    EXPECT_FAILS(r, 2, "unknown option '--bogus'");
    run_free(&r);

    r = run_quantize(TINY4);
    EXPECT_FAILS(r, 2, "usage: quantize");
    run_free(&r);

    r = run_quantize("--help");
    EXPECT(r.status == 0 && strstr(r.out, "usage: quantize") && strstr(r.out, "--mix q4_k_m") && strstr(r.out, "--keep-vision"),
           "--help: status %d\n%s", r.status, r.out);
    run_free(&r);
}

int main(void) {
    FILE *probe = fopen(TINY4, "rb"), *prog = fopen(QUANTIZE, "rb");
    test_seed();
    if (!probe || !prog) {
        test_fail_all(!probe ? TINY4 : QUANTIZE, !probe ? "missing: run tools/gen_mllama_fixtures.py" : "missing: make " QUANTIZE);
        return 1;
    }
    fclose(probe);
    fclose(prog);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mms-quantize-XXXXXX");
    if (!mkdtemp(tmpdir)) { test_fail_all("a temporary folder", "cannot be made"); return 1; }
    cpu = mms_backend_cpu_init();
    RUN(test_f32_baseline);
    RUN(test_q8_0);
    RUN(test_vision_quantized);
    RUN(test_k_quants_leave_tiny4);
    RUN(test_k_quants_on_synthetic);
    RUN(test_k_quants_on_a_random_mllama);
    RUN(test_loader_refuses_quantized_non_matrices);
    RUN(test_errors);
    outputs_free(&F32);
    prompts_close(&P);
    mms_backend_free(cpu);
    {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
        if (system(cmd) != 0) printf("could not remove %s\n", tmpdir);
    }
    return test_summary();
}
