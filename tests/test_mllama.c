/* Llama 3.2 Vision against Hugging Face transformers: tiny random models converted to GGUF and
   reference tensors dumped from transformers in float32 (tools/gen_mllama_fixtures.py, committed
   under tests/fixtures/mllama/). Compared stage by stage: preprocessing, vision output, projector
   output, logits of prompts (image first, image after text, text only, two images), and 16 greedy
   tokens; the same through the two-file layout, an f16 model, and text layers split across a
   second backend. Plus the runtime's promises (an image sent twice is encoded once) and errors. */
#define MMSCHED_IMPLEMENTATION
#include "../mmsched.h"
#include "test.h"
#include "limited_backend.h"
#include "mllama_load.h"
#include "ref_gguf.h"
#include <math.h>

#define FIX "tests/fixtures/mllama/"

static mms_backend_t cpu, dev;

/* -- comparisons -- */

struct cmp { double nmse, max_err, max_ref; };

static struct cmp compare(const float *got, const float *want, int64_t n) {
    struct cmp c = { 0, 0, 0 };
    double num = 0, den = 0;
    int64_t i;
    for (i = 0; i < n; i++) {
        double d = (double)got[i] - (double)want[i];
        num += d * d;
        den += (double)want[i] * want[i];
        if (fabs(d) > c.max_err || d != d) c.max_err = d != d ? INFINITY : fabs(d);
        if (fabs(want[i]) > c.max_ref) c.max_ref = fabs(want[i]);
    }
    c.nmse = den > 0 ? num / den : num;
    return c;
}

/* got matches want within the normalised MSE and a max error relative to the largest value. */
static void expect_close(const float *got, const float *want, int64_t n, double nmse_tol, double rel_tol, const char *fmt, ...) MMS_PRINTF(6, 7);
static void expect_close(const float *got, const float *want, int64_t n, double nmse_tol, double rel_tol, const char *fmt, ...) {
    struct cmp c = compare(got, want, n);
    char label[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(label, sizeof label, fmt, ap);
    va_end(ap);
    EXPECT(c.nmse <= nmse_tol && c.max_err <= rel_tol * c.max_ref, "%s: nmse %.3g (tol %.1g), max err %.3g of max %.3g",
           label, c.nmse, nmse_tol, c.max_err, c.max_ref);
}

struct fixture {
    const char *name;
    struct mms_gguf *ref;
    struct mms_mllama_model *model;
    struct mms_mllama_context *ctx;
    struct mms_mllama_image *images;
    int n_images;
};

static struct mms_mllama_model *load_vision_on(const char *path, const char *mmproj, mms_backend_t gpu, int n_gpu_layers, bool vision_on_gpu) {
    return test_load_mllama(cpu, path, mmproj, gpu, n_gpu_layers, vision_on_gpu);
}

static struct mms_mllama_model *load(const char *path, const char *mmproj, mms_backend_t gpu, int n_gpu_layers) {
    return load_vision_on(path, mmproj, gpu, n_gpu_layers, false);
}

static struct mms_mllama_context *context(struct mms_mllama_model *m) {
    struct mms_mllama_context_params cp;
    memset(&cp, 0, sizeof cp);
    cp.n_ctx = 128;
    cp.n_batch = 64;
    cp.max_images = 2;
    return mms_mllama_context_new(m, &cp);
}

/* Preprocesses every reference image with the model's parameters. */
static void preprocess_all(struct fixture *f) {
    const struct mms_mllama_hparams *hp = mms_mllama_model_get_hparams(f->model);
    struct mms_mllama_image_params ip;
    int k;
    memset(&ip, 0, sizeof ip);
    ip.image_size = hp->v_image_size;
    ip.max_num_tiles = hp->v_max_tiles;
    memcpy(ip.mean, hp->image_mean, sizeof ip.mean);
    memcpy(ip.std, hp->image_std, sizeof ip.std);
    f->n_images = (int)ref_u32(f->ref, "ref.n_images%.0d", 0);
    f->images = (struct mms_mllama_image *)calloc((size_t)f->n_images + 1, sizeof *f->images);
    for (k = 0; k < f->n_images; k++) {
        struct mms_gguf_tensor_info info;
        const uint8_t *rgb = (const uint8_t *)ref_tensor(f->ref, "img.%d.rgb", k, &info);
        int w = (int)ref_u32(f->ref, "img.%d.width", k), h = (int)ref_u32(f->ref, "img.%d.height", k);
        if (rgb) EXPECT(mms_mllama_preprocess_image(&ip, rgb, w, h, 0, &f->images[k]) == MMS_OK, "preprocess %s image %d: %s", f->name, k, mms_last_error());
    }
}

/* A model file (mmproj: the projector of the two-file layout, or NULL) with the reference of its images. */
static bool fixture_open_files(struct fixture *f, const char *name, const char *ref, const char *model, const char *mmproj) {
    memset(f, 0, sizeof *f);
    f->name = name;
    f->ref = mms_gguf_open(ref);
    f->model = load(model, mmproj, NULL, 0);
    EXPECT(f->ref && f->model, "fixture %s: %s", name, mms_last_error());
    if (!f->ref || !f->model) return false;
    f->ctx = context(f->model);
    EXPECT(f->ctx != NULL, "context: %s", mms_last_error());
    preprocess_all(f);
    return f->ctx != NULL;
}

static bool fixture_open(struct fixture *f, const char *name) {
    char ref[256], model[256];
    snprintf(ref, sizeof ref, FIX "%s-ref.gguf", name);
    snprintf(model, sizeof model, FIX "%s.gguf", name);
    return fixture_open_files(f, name, ref, model, NULL);
}

static void fixture_close(struct fixture *f) {
    int k;
    for (k = 0; k < f->n_images; k++) mms_mllama_image_free(&f->images[k]);
    free(f->images);
    mms_mllama_context_free(f->ctx);
    mms_mllama_model_free(f->model);
    mms_gguf_close(f->ref);
}

/* -- stages -- */

static uint64_t fnv1a64(const void *data, size_t n) {
    const unsigned char *p = (const unsigned char *)data;
    uint64_t h = 0xcbf29ce484222325ULL;
    size_t i;
    for (i = 0; i < n; i++) { h ^= p[i]; h *= 0x100000001b3ULL; }
    return h;
}

/* Our preprocessing against the PIL processor's: ids, masks and every pixel value, exactly (the
   reference keeps a hash of the float bytes; tests/test_image.c compares values one by one). */
static void check_preprocessing(struct fixture *f) {
    int k, t, n_bad = 0;
    for (k = 0; k < f->n_images; k++) {
        const struct mms_mllama_image *img = &f->images[k];
        char key[64];
        int32_t mask[16];
        int64_t n = ref_i32s(f->ref, "img.%d.aspect_ratio_mask", k, mask, 16);
        uint64_t want = 0;
        snprintf(key, sizeof key, "img.%d.pixel_values_fnv1a64", k);
        EXPECT(mms_gguf_get_u64(f->ref, key, &want) == MMS_OK, "reference key %s: %s", key, mms_last_error());
        if (!img->pixels) continue;
        EXPECT(img->aspect_ratio_id == (int)ref_u32(f->ref, "img.%d.aspect_ratio_id", k) &&
               img->n_tiles == (int)ref_u32(f->ref, "img.%d.num_tiles", k), "%s image %d: id %d tiles %d", f->name, k, img->aspect_ratio_id, img->n_tiles);
        for (t = 0; t < (int)n; t++) n_bad += mask[t] != img->aspect_ratio_mask[t];
        EXPECT(fnv1a64(img->pixels, sizeof(float) * 3 * (size_t)img->max_num_tiles * (size_t)img->image_size * (size_t)img->image_size) == want,
               "%s image %d: pixel values differ from the PIL processor's", f->name, k);
    }
    EXPECT(n_bad == 0, "%d aspect-ratio mask entries differ", n_bad);
}

static void check_vision(struct fixture *f) {
    const struct mms_mllama_hparams *hp = mms_mllama_model_get_hparams(f->model);
    const int64_t nv = (int64_t)hp->v_output_dim * hp->v_n_tokens * hp->v_max_tiles, np = (int64_t)hp->n_embd * hp->v_n_tokens * hp->v_max_tiles;
    float *vis = (float *)malloc(sizeof(float) * (size_t)nv), *proj = (float *)malloc(sizeof(float) * (size_t)np);
    int k;
    for (k = 0; k < f->n_images; k++) {
        struct mms_gguf_tensor_info iv, ip;
        const float *want_v = (const float *)ref_tensor(f->ref, "img.%d.vision_out", k, &iv);
        const float *want_p = (const float *)ref_tensor(f->ref, "img.%d.proj_out", k, &ip);
        if (!want_v || !want_p || !f->images[k].pixels) continue;
        EXPECT(iv.size == sizeof(float) * (size_t)nv && ip.size == sizeof(float) * (size_t)np, "%s image %d: reference shapes", f->name, k);
        if (mms_mllama_encode_image(f->ctx, &f->images[k], vis, proj) != MMS_OK) { EXPECT(0, "encode: %s", mms_last_error()); continue; }
        expect_close(vis, want_v, nv, 1e-9, 1e-4, "%s image %d vision output", f->name, k);
        expect_close(proj, want_p, np, 1e-9, 1e-4, "%s image %d projector output", f->name, k);
    }
    free(vis);
    free(proj);
}

/* Runs prompt p of the reference on ctx from a clear conversation; fills logits (all rows) and 16
   greedy tokens. */
static bool run_prompt(struct fixture *f, struct mms_mllama_context *ctx, int p, float *logits, int32_t *greedy, int *n_tokens) {
    const struct mms_mllama_hparams *hp = mms_mllama_model_get_hparams(f->model);
    int32_t tokens[256], imgs[8];
    bool want[256] = { false };
    int64_t n = ref_i32s(f->ref, "prompt.%d.tokens", p, tokens, 256), n_img = ref_i32s(f->ref, "prompt.%d.images", p, imgs, 8), i;
    mms_mllama_seq_clear(ctx, 0);
    for (i = 0; i < n_img; i++)
        if (mms_mllama_seq_add_image(ctx, 0, &f->images[imgs[i]]) != MMS_OK) { EXPECT(0, "add image: %s", mms_last_error()); return false; }
    for (i = 0; i < n; i++) want[i] = true;
    if (test_decode(ctx, tokens, (int)n, want) != MMS_OK) { EXPECT(0, "decode prompt %d: %s", p, mms_last_error()); return false; }
    for (i = 0; i < n; i++) memcpy(logits + i * hp->n_vocab, mms_mllama_get_logits(ctx, (int)i), sizeof(float) * (size_t)hp->n_vocab);
    *n_tokens = (int)n;
    for (i = 0; i < 16; i++) {                 /* greedy: the argmax of the last row, one token at a time */
        const float *l = mms_mllama_get_logits(ctx, mms_mllama_get_n_logits(ctx) - 1);
        int32_t best = 0, j;
        for (j = 1; j < hp->n_vocab; j++) if (l[j] > l[best]) best = j;
        greedy[i] = best;
        if (i < 15 && test_decode(ctx, &best, 1, NULL) != MMS_OK) { EXPECT(0, "decode: %s", mms_last_error()); return false; }
    }
    return true;
}

/* nmse_tol and max_rel (the largest error against the largest logit) bound the logits */
static void check_prompts(struct fixture *f, struct mms_mllama_context *ctx, double nmse_tol, double max_rel, bool exact_greedy,
                          const char *what) {
    const struct mms_mllama_hparams *hp = mms_mllama_model_get_hparams(f->model);
    int p, n_prompts = (int)ref_u32(f->ref, "ref.n_prompts%.0d", 0);
    float *logits = (float *)malloc(sizeof(float) * 256 * (size_t)hp->n_vocab);
    for (p = 0; p < n_prompts; p++) {
        struct mms_gguf_tensor_info info;
        const float *want = (const float *)ref_tensor(f->ref, "prompt.%d.logits", p, &info);
        int32_t greedy[16], want_greedy[16];
        int n = 0;
        ref_i32s(f->ref, "prompt.%d.greedy", p, want_greedy, 16);
        if (!want || !run_prompt(f, ctx, p, logits, greedy, &n)) continue;
        expect_close(logits, want, (int64_t)n * hp->n_vocab, nmse_tol, max_rel, "%s %s prompt %d logits", f->name, what, p);
        if (exact_greedy) EXPECT(memcmp(greedy, want_greedy, sizeof greedy) == 0, "%s %s prompt %d: greedy tokens differ (first %d, want %d)",
                                 f->name, what, p, greedy[0], want_greedy[0]);
    }
    free(logits);
}

/* -- cases -- */

/* Every stage of one fixture against transformers, on the CPU. */
static void check_against_transformers(const char *name) {
    struct fixture f;
    if (fixture_open(&f, name)) {
        check_preprocessing(&f);
        check_vision(&f);
        check_prompts(&f, f.ctx, 1e-9, 1e-3, true, "cpu");
    }
    fixture_close(&f);
}

static void test_tiny1_against_transformers(void) { check_against_transformers("tiny1"); }
static void test_tiny4_against_transformers(void) { check_against_transformers("tiny4"); }

/* -- files as their makers wrote them (tools/gen_mllama_layout_fixtures.py: configurations gqa and
   mha, tests/fixtures/mllama/<cfg>/) -- */

static const char *const layout_cfgs[2] = { "gqa", "mha" };

/* Model file(s) of configuration cfg against a transformers reference: the vision and projector
   outputs of ref.gguf when vision is set, and the prompts of prompt_ref (its logits to NMSE 1e-9
   and its 16 greedy tokens). */
static void check_layout_file(const char *cfg, const char *model, const char *mmproj, const char *prompt_ref, bool vision, double nmse_tol,
                              double max_rel) {
    char ref[256], mp[256], pp[256], rp[256], label[128];
    struct fixture f;
    snprintf(ref, sizeof ref, FIX "%s/ref.gguf", cfg);
    snprintf(mp, sizeof mp, FIX "%s/%s", cfg, model);
    if (mmproj) snprintf(pp, sizeof pp, FIX "%s/%s", cfg, mmproj);
    snprintf(rp, sizeof rp, FIX "%s/%s", cfg, prompt_ref);
    snprintf(label, sizeof label, "%s/%s%s%s", cfg, model, mmproj ? "+" : "", mmproj ? mmproj : "");
    if (fixture_open_files(&f, label, ref, mp, mmproj ? pp : NULL)) {
        struct mms_gguf *images_ref = f.ref, *pr = mms_gguf_open(rp);
        EXPECT(pr != NULL, "%s: %s", rp, mms_last_error());
        if (vision) {
            check_preprocessing(&f);
            check_vision(&f);
        }
        if (pr) {
            f.ref = pr;
            check_prompts(&f, f.ctx, nmse_tol, max_rel, true, prompt_ref);
            f.ref = images_ref;
            mms_gguf_close(pr);
        }
    }
    fixture_close(&f);
}

/* (a) A GGUF written by tools/ollama_mllama_gguf.py, which follows Ollama's converter rule by rule:
   cross-attention and vision q/k rows permuted per head, F16 matrices, pre-transformed vision
   gates, no image token id, mean/std or aspect ratios. Against transformers run on the weights as
   the file holds them (f16 matrices). */
static void test_ollama_converter_files(void) {
    int i;
    for (i = 0; i < 2; i++) check_layout_file(layout_cfgs[i], "ollama.gguf", NULL, "ref-f16w.gguf", false, 1e-9, 1e-3);
}

/* (b) mmsched's converter with its default types writes what Ollama's converter writes: the same
   keys with the same types and values in the same order, plus four of ours (the q/k order marker,
   the image token id, mean and std, which Ollama's files lack); the same tensors in the same order,
   types, shapes, offsets and bytes, except the last bits of values both compute in float32: the
   tanh'd vision gates (math32's tanh against a correctly rounded one) and a smoothed llama3 rope
   factor (float32 against float64 arithmetic), within 2 ulp. */
static bool same_kv(const struct mms_gguf *a, int64_t ia, const struct mms_gguf *b, int64_t ib) {
    const char *key = mms_gguf_get_key(a, ia);
    enum mms_gguf_type t = mms_gguf_get_kv_type(a, ia);
    int64_t n, i;
    if (t != mms_gguf_get_kv_type(b, ib)) return false;
    if (t == MMS_GGUF_TYPE_ARRAY) {
        enum mms_gguf_type et = mms_gguf_get_arr_type(a, ia);
        n = mms_gguf_get_arr_n(a, ia);
        if (et != mms_gguf_get_arr_type(b, ib) || n != mms_gguf_get_arr_n(b, ib)) return false;
        for (i = 0; i < n; i++) {
            if (et == MMS_GGUF_TYPE_STRING) {
                const char *x, *y;
                size_t lx, ly;
                if (mms_gguf_get_arr_str(a, key, i, &x, &lx) != MMS_OK || mms_gguf_get_arr_str(b, key, i, &y, &ly) != MMS_OK ||
                    lx != ly || memcmp(x, y, lx) != 0) return false;
            }
        }
        if (et == MMS_GGUF_TYPE_INT32 || et == MMS_GGUF_TYPE_FLOAT32) {
            float *x = (float *)calloc((size_t)n + 1, sizeof(float)), *y = (float *)calloc((size_t)n + 1, sizeof(float));
            int64_t nx = 0, ny = 0;
            bool same = et == MMS_GGUF_TYPE_INT32
                ? mms_gguf_get_arr_i32(a, key, (int32_t *)x, n, &nx) == MMS_OK && mms_gguf_get_arr_i32(b, key, (int32_t *)y, n, &ny) == MMS_OK
                : mms_gguf_get_arr_f32(a, key, x, n, &nx) == MMS_OK && mms_gguf_get_arr_f32(b, key, y, n, &ny) == MMS_OK;
            same = same && memcmp(x, y, sizeof(float) * (size_t)n) == 0;
            free(x);
            free(y);
            return same;
        }
        return et == MMS_GGUF_TYPE_STRING;
    }
    if (t == MMS_GGUF_TYPE_STRING) {
        const char *x, *y;
        size_t lx, ly;
        return mms_gguf_get_str(a, key, &x, &lx) == MMS_OK && mms_gguf_get_str(b, key, &y, &ly) == MMS_OK && lx == ly && !memcmp(x, y, lx);
    }
    if (t == MMS_GGUF_TYPE_FLOAT32) {
        float x, y;
        return mms_gguf_get_f32(a, key, &x) == MMS_OK && mms_gguf_get_f32(b, key, &y) == MMS_OK && memcmp(&x, &y, sizeof x) == 0;
    }
    if (t == MMS_GGUF_TYPE_BOOL) {
        bool x, y;
        return mms_gguf_get_bool(a, key, &x) == MMS_OK && mms_gguf_get_bool(b, key, &y) == MMS_OK && x == y;
    }
    {
        uint64_t x, y;
        return mms_gguf_get_u64(a, key, &x) == MMS_OK && mms_gguf_get_u64(b, key, &y) == MMS_OK && x == y;
    }
}

static void test_converter_writes_ollama_layout(void) {
    static const char *const ours[4] = { "mllama.image_token_index", "mllama.vision.image_mean", "mllama.vision.image_std", "mmsched.mllama.qk_rows" };
    int c;
    for (c = 0; c < 2; c++) {
        char pa[256], pb[256];
        struct mms_gguf *a, *b;
        int64_t ia = 0, ib, i, n_ours = 0, n_diff_tensors = 0;
        snprintf(pa, sizeof pa, FIX "%s/ollama.gguf", layout_cfgs[c]);
        snprintf(pb, sizeof pb, FIX "%s/mmsched-auto.gguf", layout_cfgs[c]);
        a = mms_gguf_open(pa);
        b = mms_gguf_open(pb);
        EXPECT(a && b, "open: %s", mms_last_error());
        if (!a || !b) { mms_gguf_close(a); mms_gguf_close(b); continue; }
        for (ib = 0; ib < mms_gguf_get_n_kv(b); ib++) {
            const char *key = mms_gguf_get_key(b, ib);
            int k;
            bool is_ours = false;
            for (k = 0; k < 4; k++) is_ours |= !strcmp(key, ours[k]);
            if (is_ours) { n_ours++; continue; }
            EXPECT(ia < mms_gguf_get_n_kv(a) && !strcmp(key, mms_gguf_get_key(a, ia)), "%s: key %lld '%s' is not Ollama's next key", pb, (long long)ib, key);
            if (ia < mms_gguf_get_n_kv(a)) EXPECT(same_kv(a, ia, b, ib), "%s: key '%s' differs from Ollama's", pb, key);
            ia++;
        }
        EXPECT(n_ours == 4 && ia == mms_gguf_get_n_kv(a), "%s: %lld of our keys, %lld of Ollama's %lld", pb, (long long)n_ours, (long long)ia,
               (long long)mms_gguf_get_n_kv(a));
        EXPECT(mms_gguf_get_n_tensors(a) == mms_gguf_get_n_tensors(b), "tensor counts");
        for (i = 0; i < mms_gguf_get_n_tensors(a) && i < mms_gguf_get_n_tensors(b); i++) {
            struct mms_gguf_tensor_info x, y;
            if (mms_gguf_get_tensor(a, i, &x) != MMS_OK || mms_gguf_get_tensor(b, i, &y) != MMS_OK) { EXPECT(0, "tensor %lld", (long long)i); continue; }
            EXPECT(!strcmp(x.name, y.name) && x.ggml_type == y.ggml_type && !memcmp(x.ne, y.ne, sizeof x.ne) && x.offset == y.offset && x.size == y.size,
                   "%s: tensor %lld is %s, Ollama's is %s (or type, shape, offset differ)", pb, (long long)i, y.name, x.name);
            if (x.size != y.size || !memcmp(x.data, y.data, x.size)) continue;
            n_diff_tensors++;
            if (x.type == MMS_TYPE_F32 && (strstr(x.name, "gate") || !strcmp(x.name, "rope_freqs.weight"))) {
                size_t j;
                for (j = 0; j < x.size / 4; j++) {
                    int32_t u, v;
                    memcpy(&u, (const char *)x.data + 4 * j, 4);
                    memcpy(&v, (const char *)y.data + 4 * j, 4);
                    EXPECT(u - v >= -2 && u - v <= 2, "%s: %s[%zu] differs by %d ulp", pb, x.name, j, u - v);
                }
            } else EXPECT(0, "%s: the bytes of %s differ from Ollama's", pb, x.name);
        }
        EXPECT(n_diff_tensors <= 8, "%s: %lld tensors differ in their last bits", pb, (long long)n_diff_tensors);
        mms_gguf_close(a);
        mms_gguf_close(b);
    }
}

/* (c) The Hugging Face folder itself, no conversion: float32 (sharded, with its index) against
   transformers in float32, bfloat16 (its matrices used in place) against transformers run on the
   same bf16 weights in float32. Every set casts the vision attention's K and V to bf16 (BF16
   weights: the manual's rule): logits within an NMSE of 2e-6 and 0.2% of the largest (measured
   0.6-2.8e-7 and 0.03-0.08%). The avx512 set also rounds the activations of bf16 products past 4
   columns to bf16: within 1e-4 and 2% there (measured 1.1-2.3e-5 and 0.4-0.6%). The same greedy
   tokens everywhere. */
static void test_hf_folders(void) {
    const bool rounded = mms_cpu_get_kernels() == MMS_CPU_KERNELS_AVX512;
    int i;
    for (i = 0; i < 2; i++) {
        check_layout_file(layout_cfgs[i], "hf", NULL, "ref.gguf", true, 1e-9, 1e-3);
        check_layout_file(layout_cfgs[i], "hf-bf16", NULL, "ref-bf16.gguf", false, rounded ? 1e-4 : 2e-6, rounded ? 2e-2 : 2e-3);
    }
}

/* A copy of src with mmsched.mllama.qk_rows set to value (NULL: without the key). */
static bool write_with_qk_rows(const char *src, const char *dst, const char *value) {
    struct mms_gguf *g = mms_gguf_open(src);
    struct mms_gguf_writer *w = mms_gguf_writer_new();
    int64_t i;
    bool ok = g && w;
    for (i = 0; ok && i < mms_gguf_get_n_kv(g); i++)
        if (strcmp(mms_gguf_get_key(g, i), "mmsched.mllama.qk_rows")) ok = mms_gguf_writer_copy_kv(w, g, i) == MMS_OK;
    if (ok && value) ok = mms_gguf_writer_set_str(w, "mmsched.mllama.qk_rows", value) == MMS_OK;
    for (i = 0; ok && i < mms_gguf_get_n_tensors(g); i++) {
        struct mms_gguf_tensor_info t;
        ok = mms_gguf_get_tensor(g, i, &t) == MMS_OK && mms_gguf_writer_add_tensor(w, t.name, t.type, t.n_dims, t.ne, t.data) == MMS_OK;
    }
    ok = ok && mms_gguf_writer_write(w, dst) == MMS_OK;
    mms_gguf_writer_free(w);
    mms_gguf_close(g);
    return ok;
}

/* Which q/k row order a file holds: the marker decides (Ollama's file marked "ollama" reads as
   before, marked "hf" it is read unpermuted and goes wrong on image prompts), an unknown value is
   an error naming the key and the file. */
static void test_qk_rows_marker(void) {
    const char *src = FIX "gqa/ollama.gguf", *dst = "build/test_mllama_qk_rows.gguf";
    struct mms_mllama_model *m;
    EXPECT(write_with_qk_rows(src, dst, "sideways"), "write: %s", mms_last_error());
    test_capture_log();
    m = load(dst, NULL, NULL, 0);
    EXPECT(m == NULL && mms_last_status() == MMS_ERR_FORMAT && strstr(mms_last_error(), "mmsched.mllama.qk_rows") &&
           strstr(mms_last_error(), "test_mllama_qk_rows.gguf") && strstr(mms_last_error(), "sideways"), "bad marker: %s", mms_last_error());
    mms_log_set(NULL, NULL);
    mms_mllama_model_free(m);
    EXPECT(write_with_qk_rows(src, dst, "ollama"), "write: %s", mms_last_error());
    check_layout_file("gqa", "../../../../build/test_mllama_qk_rows.gguf", NULL, "ref-f16w.gguf", false, 1e-9, 1e-3);
    {   /* marked "hf", the same rows are taken in checkpoint order: the image prompts must differ */
        struct fixture f;
        char ref[] = FIX "gqa/ref.gguf";
        EXPECT(write_with_qk_rows(src, dst, "hf"), "write: %s", mms_last_error());
        if (fixture_open_files(&f, "gqa marked hf", ref, dst, NULL)) {
            const struct mms_mllama_hparams *hp = mms_mllama_model_get_hparams(f.model);
            float *a = (float *)malloc(sizeof(float) * 256 * (size_t)hp->n_vocab), *b = (float *)malloc(sizeof(float) * 256 * (size_t)hp->n_vocab);
            int32_t g[16];
            int n = 0;
            struct mms_mllama_model *right = load(src, NULL, NULL, 0);
            struct mms_mllama_context *rc = right ? context(right) : NULL;
            if (rc && run_prompt(&f, f.ctx, 0, a, g, &n) && run_prompt(&f, rc, 0, b, g, &n))
                EXPECT(compare(a, b, (int64_t)n * hp->n_vocab).nmse > 1e-5, "the marker changed nothing");
            else EXPECT(0, "run: %s", mms_last_error());
            mms_mllama_context_free(rc);
            mms_mllama_model_free(right);
            free(a);
            free(b);
        }
        fixture_close(&f);
    }
}

/* (b) and (d): our converter's f32 single file and two-file layout against transformers in float32. */
static void test_converter_files(void) {
    int i;
    for (i = 0; i < 2; i++) {
        check_layout_file(layout_cfgs[i], "mmsched.gguf", NULL, "ref.gguf", true, 1e-9, 1e-3);
        check_layout_file(layout_cfgs[i], "text.gguf", "proj.gguf", "ref.gguf", true, 1e-9, 1e-3);
    }
}

static void test_two_file_layout(void) {
    struct fixture f;
    if (fixture_open(&f, "tiny4")) {
        struct mms_mllama_model *m2 = load(FIX "tiny4-text.gguf", FIX "tiny4-proj.gguf", NULL, 0);
        struct mms_mllama_context *c2 = m2 ? context(m2) : NULL;
        EXPECT(m2 && c2, "two-file layout: %s", mms_last_error());
        if (c2) {
            struct mms_mllama_model *saved = f.model;
            f.model = m2;
            check_prompts(&f, c2, 1e-9, 1e-3, true, "two-file");
            f.model = saved;
        }
        mms_mllama_context_free(c2);
        mms_mllama_model_free(m2);
    }
    fixture_close(&f);
}

static void test_f16_model(void) {
    struct fixture f;
    if (fixture_open(&f, "tiny4")) {
        struct mms_mllama_model *m2 = load(FIX "tiny4-f16.gguf", NULL, NULL, 0);
        struct mms_mllama_context *c2 = m2 ? context(m2) : NULL;
        EXPECT(m2 && c2, "f16 model: %s", mms_last_error());
        if (c2) check_prompts(&f, c2, 1e-4, 0.2, false, "f16");
        mms_mllama_context_free(c2);
        mms_mllama_model_free(m2);
    }
    fixture_close(&f);
}

/* The text layers split between the CPU and a second backend, k = 0..all: identical logits. */
static void test_split_layers_change_nothing(void) {
    struct fixture f;
    if (fixture_open(&f, "tiny4")) {
        const struct mms_mllama_hparams *hp = mms_mllama_model_get_hparams(f.model);
        float *ref = (float *)malloc(sizeof(float) * 256 * (size_t)hp->n_vocab), *got = (float *)malloc(sizeof(float) * 256 * (size_t)hp->n_vocab);
        int32_t g_ref[16], g[16];
        int n = 0, k;
        run_prompt(&f, f.ctx, 0, ref, g_ref, &n);
        for (k = 1; k <= hp->n_layer + 1; k += 2) {
            struct mms_mllama_model *m2 = load(FIX "tiny4.gguf", NULL, dev, k);
            struct mms_mllama_context *c2 = m2 ? context(m2) : NULL;
            if (!c2) { EXPECT(0, "k = %d: %s", k, mms_last_error()); mms_mllama_model_free(m2); continue; }
            run_prompt(&f, c2, 0, got, g, &n);
            EXPECT(memcmp(ref, got, sizeof(float) * (size_t)n * (size_t)hp->n_vocab) == 0 && memcmp(g_ref, g, sizeof g) == 0,
                   "%d text layers on %s change the output", k, mms_backend_name(dev));
            EXPECT(k <= 1 || mms_backend_sched_get_n_splits(mms_mllama_context_get_sched(c2)) >= 2, "k = %d: not split", k);
            mms_mllama_context_free(c2);
            mms_mllama_model_free(m2);
        }
        free(ref);
        free(got);
    }
    fixture_close(&f);
}

/* The vision tower on the second backend, the text on the CPU (placement independent of
   n_gpu_layers): the same encoder output, bit for bit. */
static void test_vision_on_other_backend(void) {
    struct fixture f;
    if (fixture_open(&f, "tiny4")) {
        const struct mms_mllama_hparams *hp = mms_mllama_model_get_hparams(f.model);
        const size_t nv = (size_t)hp->v_output_dim * (size_t)hp->v_n_tokens * (size_t)hp->v_max_tiles;
        float *a = (float *)malloc(sizeof(float) * nv), *b = (float *)malloc(sizeof(float) * nv);
        struct mms_mllama_model *m2 = load_vision_on(FIX "tiny4.gguf", NULL, dev, 0, true);
        struct mms_mllama_context *c2 = m2 ? context(m2) : NULL;
        EXPECT(c2 != NULL, "vision on %s: %s", mms_backend_name(dev), mms_last_error());
        if (c2 && mms_mllama_encode_image(f.ctx, &f.images[2], a, NULL) == MMS_OK && mms_mllama_encode_image(c2, &f.images[2], b, NULL) == MMS_OK)
            EXPECT(memcmp(a, b, sizeof(float) * nv) == 0, "the vision output depends on where the tower runs");
        else EXPECT(0, "encode: %s", mms_last_error());
        mms_mllama_context_free(c2);
        mms_mllama_model_free(m2);
        free(a);
        free(b);
    }
    fixture_close(&f);
}

/* An image added in a later turn: the earlier tokens stay as they were decoded (text only, as
   Ollama does; transformers would recompute them with the image present), and the tokens after
   the image token see it. */
static void test_image_in_a_later_turn(void) {
    struct fixture f;
    if (fixture_open(&f, "tiny4")) {
        const struct mms_mllama_hparams *hp = mms_mllama_model_get_hparams(f.model);
        int32_t turn1[6] = { 3, 17, 40, 9, 12, 99 }, turn2[4], i;
        float *with = (float *)malloc(sizeof(float) * (size_t)hp->n_vocab), *without = (float *)malloc(sizeof(float) * (size_t)hp->n_vocab);
        turn2[0] = hp->image_token_id; turn2[1] = 55; turn2[2] = 61; turn2[3] = 70;
        for (i = 0; i < 2; i++) {
            mms_mllama_seq_clear(f.ctx, 0);
            EXPECT(test_decode(f.ctx, turn1, 6, NULL) == MMS_OK, "turn 1: %s", mms_last_error());
            if (i == 0) EXPECT(mms_mllama_seq_add_image(f.ctx, 0, &f.images[1]) == MMS_OK, "add: %s", mms_last_error());
            else turn2[0] = 5;                      /* the same turn with a text token instead */
            EXPECT(test_decode(f.ctx, turn2, 4, NULL) == MMS_OK, "turn 2: %s", mms_last_error());
            memcpy(i == 0 ? with : without, mms_mllama_get_logits(f.ctx, 0), sizeof(float) * (size_t)hp->n_vocab);
        }
        EXPECT(compare(with, without, hp->n_vocab).nmse > 1e-6, "the image in the later turn changed nothing");
        free(with);
        free(without);
    }
    fixture_close(&f);
}

/* A model whose graphs do not fit fails when the context is made, saying where. */
static void test_too_big_fails_at_load(void) {
    struct limited_backend *lb = limited_of(dev);
    struct mms_mllama_model *m = load_vision_on(FIX "tiny4.gguf", NULL, dev, 100, true);
    struct mms_mllama_context *c;
    EXPECT(m != NULL, "load: %s", mms_last_error());
    test_capture_log();
    lb->max_alloc = 4096;                             /* weights are in; the KV cache will not fit */
    c = m ? context(m) : NULL;
    EXPECT(c == NULL && mms_last_status() == MMS_ERR_OOM && strstr(mms_last_error(), "KV cache") && strstr(mms_last_error(), "TEST"),
           "the error should say what does not fit where: %s", mms_last_error());
    lb->max_alloc = 250000;                           /* the KV cache and picture slots fit; the vision graph does not */
    c = m && !c ? context(m) : c;
    EXPECT(c == NULL && mms_last_status() == MMS_ERR_OOM && strstr(mms_last_error(), "vision encoder") && strstr(mms_last_error(), "TEST"),
           "the error should name the graph and the backend: %s", mms_last_error());
    mms_log_set(NULL, NULL);
    lb->max_alloc = 0;
    mms_mllama_context_free(c);
    mms_mllama_model_free(m);
}

static void test_same_image_twice_is_encoded_once(void) {
    struct fixture f;
    if (fixture_open(&f, "tiny4")) {
        int before;
        mms_mllama_seq_clear(f.ctx, 0);
        EXPECT(mms_mllama_seq_add_image(f.ctx, 0, &f.images[0]) == MMS_OK, "add: %s", mms_last_error());
        before = mms_mllama_get_n_encodes(f.ctx);
        mms_mllama_seq_clear(f.ctx, 0);
        EXPECT(mms_mllama_seq_add_image(f.ctx, 0, &f.images[0]) == MMS_OK, "add again: %s", mms_last_error());
        EXPECT(mms_mllama_get_n_encodes(f.ctx) == before, "the second add encoded again (%d encodes)", mms_mllama_get_n_encodes(f.ctx));
        EXPECT(mms_mllama_seq_add_image(f.ctx, 0, &f.images[1]) == MMS_OK && mms_mllama_get_n_encodes(f.ctx) == before + 1, "a new image is encoded");
    }
    fixture_close(&f);
}

/* -- the image store -- */

/* Picture k of a family of 40 x 30 pictures that differ only in their pixels (the same tiles). */
static bool synthetic_picture(const struct mms_mllama_model *m, int k, struct mms_mllama_image *out) {
    const struct mms_mllama_image_params ip = mms_mllama_model_image_params(m);
    uint8_t rgb[40 * 30 * 3];
    int i;
    for (i = 0; i < (int)sizeof rgb; i++) rgb[i] = (uint8_t)((i * (7 + 2 * k) + 31 * k) ^ (i >> 5));
    return mms_mllama_preprocess_image(&ip, rgb, 40, 30, 0, out) == MMS_OK;
}

/* Sequence seq of ctx from clear: its pictures, then a prompt with an <|image|> at positions 1
   and 4 (as many as pictures); the last row's logits into out (n_vocab floats). */
static bool store_logits(struct mms_mllama_context *ctx, const struct mms_mllama_hparams *hp, int seq, const struct mms_mllama_image *const *pics,
                         int n_pics, float *out) {
    int32_t tokens[8] = { 3, 20, 17, 40, 21, 9, 12, 5 }, seqs[8];
    struct mms_mllama_batch b;
    int i;
    mms_mllama_seq_clear(ctx, seq);
    for (i = 0; i < n_pics; i++) {
        if (mms_mllama_seq_add_image(ctx, seq, pics[i]) != MMS_OK) { EXPECT(0, "sequence %d picture %d: %s", seq, i, mms_last_error()); return false; }
        tokens[i == 0 ? 1 : 4] = hp->image_token_id;
    }
    for (i = 0; i < 8; i++) seqs[i] = seq;
    memset(&b, 0, sizeof b);
    b.n_tokens = 8;
    b.tokens = tokens;
    b.seq = seqs;
    if (mms_mllama_decode(ctx, &b) != MMS_OK) { EXPECT(0, "sequence %d: %s", seq, mms_last_error()); return false; }
    memcpy(out, mms_mllama_get_logits(ctx, 0), sizeof(float) * (size_t)hp->n_vocab);
    return true;
}

static struct mms_mllama_context *store_context(struct mms_mllama_model *m, size_t budget) {
    struct mms_mllama_context_params cp;
    memset(&cp, 0, sizeof cp);
    cp.n_ctx = 64;
    cp.n_batch = 64;
    cp.max_images = 2;
    cp.n_seq = 2;
    cp.image_store = budget;
    return mms_mllama_context_new(m, &cp);
}

/* The store finds pictures by their model input: with every hash made equal (the test switch),
   the comparison alone keeps two pictures apart, each sequence answering from its own picture
   as a context of its own does; the same picture again is found, not encoded. Under a budget of
   two pictures the least recently used picture no sequence holds is evicted, a held one never,
   and a picture with no room is encoded for its sequence without being kept; the store's bytes
   and peak stay within the budget and the answers stay those of a fresh context. */
static void test_image_store(void) {
    struct mms_mllama_model *m = load(FIX "tiny4.gguf", NULL, NULL, 0);
    const struct mms_mllama_hparams *hp = m ? mms_mllama_model_get_hparams(m) : NULL;
    struct mms_mllama_image pic[4];
    const struct mms_mllama_image *one[1], *two[2];
    struct mms_mllama_image_store is;
    struct mms_mllama_memory mem;
    struct mms_mllama_context *c;
    float *want[5], *got;
    size_t per_picture = 0;
    int k;
    EXPECT(m != NULL, "load: %s", mms_last_error());
    if (!m) return;
    memset(pic, 0, sizeof pic);
    got = (float *)malloc(sizeof(float) * (size_t)hp->n_vocab);
    for (k = 0; k < 5; k++) want[k] = (float *)malloc(sizeof(float) * (size_t)hp->n_vocab);
    for (k = 0; k < 4; k++) EXPECT(synthetic_picture(m, k, &pic[k]), "picture %d: %s", k, mms_last_error());
    for (k = 0; k < 5; k++) {               /* each alone in a fresh context; 4: pictures 0 and 3 together */
        c = store_context(m, 0);
        one[0] = &pic[k < 4 ? k : 0];
        two[0] = &pic[0];
        two[1] = &pic[3];
        EXPECT(c && store_logits(c, hp, 0, k < 4 ? one : two, k < 4 ? 1 : 2, want[k]), "reference %d: %s", k, mms_last_error());
        mms_mllama_get_image_store(c, &is);
        if (k == 0) per_picture = is.bytes;
        EXPECT(k == 4 || (is.bytes == per_picture && is.n_pictures == 1 && is.n_encoded == 1), "one picture: %zu bytes (%zu), %d pictures",
               is.bytes, per_picture, is.n_pictures);
        mms_mllama_context_free(c);
    }
    EXPECT(compare(want[1], want[0], hp->n_vocab).nmse > 1e-6, "pictures 0 and 1 give the same logits: the test cannot tell them apart");

    mms__mllama_store_same_hash = true;     /* every hash equal */
    c = store_context(m, 0);
    one[0] = &pic[0];
    EXPECT(c && store_logits(c, hp, 0, one, 1, got), "picture 0: %s", mms_last_error());
    EXPECT(compare(got, want[0], hp->n_vocab).nmse <= 1e-12, "picture 0, hashes equal: nmse %.3g", compare(got, want[0], hp->n_vocab).nmse);
    one[0] = &pic[1];
    EXPECT(c && store_logits(c, hp, 1, one, 1, got), "picture 1: %s", mms_last_error());
    EXPECT(compare(got, want[1], hp->n_vocab).nmse <= 1e-12, "picture 1 after picture 0 with the same hash: nmse %.3g against picture 1 alone "
           "(%.3g against picture 0)", compare(got, want[1], hp->n_vocab).nmse, compare(got, want[0], hp->n_vocab).nmse);
    one[0] = &pic[0];
    EXPECT(c && store_logits(c, hp, 1, one, 1, got), "picture 0 again: %s", mms_last_error());
    EXPECT(compare(got, want[0], hp->n_vocab).nmse <= 1e-12, "picture 0 from the store: nmse %.3g", compare(got, want[0], hp->n_vocab).nmse);
    mms_mllama_get_image_store(c, &is);
    EXPECT(is.n_encoded == 2 && is.n_found == 1 && is.n_pictures == 2, "hashes equal: %lld encoded (want 2), %lld found (want 1), %d pictures",
           (long long)is.n_encoded, (long long)is.n_found, is.n_pictures);
    mms_mllama_context_free(c);
    mms__mllama_store_same_hash = false;

    c = store_context(m, 2 * per_picture);  /* room for two pictures */
    one[0] = &pic[0];
    EXPECT(c && store_logits(c, hp, 0, one, 1, got), "budget: picture 0: %s", mms_last_error());
    one[0] = &pic[1];
    EXPECT(c && store_logits(c, hp, 0, one, 1, got), "budget: picture 1: %s", mms_last_error());   /* picture 0 let go */
    mms_mllama_get_image_store(c, &is);
    EXPECT(is.n_pictures == 2 && is.n_held == 1 && is.n_evicted == 0 && is.bytes == 2 * per_picture, "two pictures: %d kept, %d held, %lld evicted",
           is.n_pictures, is.n_held, (long long)is.n_evicted);
    one[0] = &pic[2];
    EXPECT(c && store_logits(c, hp, 1, one, 1, got), "budget: picture 2: %s", mms_last_error());
    EXPECT(compare(got, want[2], hp->n_vocab).nmse <= 1e-12, "picture 2: nmse %.3g", compare(got, want[2], hp->n_vocab).nmse);
    mms_mllama_get_image_store(c, &is);     /* picture 0 (least recently used, held by none) went; 1 is held by sequence 0 */
    EXPECT(is.n_pictures == 2 && is.n_held == 2 && is.n_evicted == 1 && is.n_encoded == 3 && is.bytes <= is.budget,
           "third picture: %d kept, %d held, %lld evicted (want 1), %lld encoded, %zu of %zu bytes", is.n_pictures, is.n_held,
           (long long)is.n_evicted, (long long)is.n_encoded, is.bytes, is.budget);
    two[0] = &pic[0];
    two[1] = &pic[3];
    EXPECT(c && store_logits(c, hp, 1, two, 2, got), "budget: pictures 0 and 3: %s", mms_last_error());
    EXPECT(compare(got, want[4], hp->n_vocab).nmse <= 1e-12, "pictures 0 and 3: nmse %.3g", compare(got, want[4], hp->n_vocab).nmse);
    mms_mllama_get_image_store(c, &is);     /* clearing sequence 1 let picture 2 go: 0 evicts it; 3 finds 0 and 1 held and is not kept */
    EXPECT(is.n_pictures == 2 && is.n_held == 2 && is.n_evicted == 2 && is.n_not_kept == 1 && is.n_encoded == 5 && is.peak <= is.budget,
           "all held: %d kept, %d held, %lld evicted (want 2), %lld not kept (want 1), %lld encoded (want 5), peak %zu of %zu",
           is.n_pictures, is.n_held, (long long)is.n_evicted, (long long)is.n_not_kept, (long long)is.n_encoded, is.peak, is.budget);
    EXPECT(c && mms_mllama_get_memory(c, 0, &mem) == MMS_OK && mem.image_store == is.bytes && mem.image_store_peak == is.peak &&
           mem.pictures > 0, "memory: store %zu (%zu), peak %zu (%zu)", mem.image_store, is.bytes, mem.image_store_peak, is.peak);
    mms_mllama_context_free(c);
    for (k = 0; k < 4; k++) mms_mllama_image_free(&pic[k]);
    for (k = 0; k < 5; k++) free(want[k]);
    free(got);
    mms_mllama_model_free(m);
}

/* The prompt layout: one picture is the template's own rendering; several in one message get the
   first <|image|> before the text and a "Picture N." line each, every further picture's <|image|>
   before its line (the exact text written out here); "<|image|>" in a text is refused. The layout's
   effect on answers is checked against transformers by test_cli (questions about two and three
   pictures). */
static void test_chat_prompt(void) {
    struct mms_chat_message one[1] = { { "user", "What is it?", 1 } };
    struct mms_chat_message conv[3] = { { "user", "Which is red?", 2 }, { "assistant", "The first.", 0 }, { "user", "And now?", 3 } };
    const char *want = "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n<|image|>Which is red?\nPicture 1.\n<|image|>Picture 2.\n"
                       "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nThe first.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
                       "<|image|>And now?\nPicture 1.\n<|image|>Picture 2.\n<|image|>Picture 3.\n<|eot_id|>"
                       "<|start_header_id|>assistant<|end_header_id|>\n\n";
    char got[1024], tmpl[1024];
    int n = mms_mllama_chat_prompt(conv, 3, true, NULL, got, sizeof got);
    EXPECT(n == (int)strlen(want) && !strcmp(got, want), "layout (%d bytes):\n%s\nwant:\n%s", n, got, want);
    EXPECT(mms_mllama_chat_prompt(conv, 3, true, NULL, NULL, 0) == n, "length without a buffer");
    n = mms_mllama_chat_prompt(one, 1, true, "1 Jan 2026", got, sizeof got);
    EXPECT(n > 0 && mms_chat_apply_template(one, 1, true, "1 Jan 2026", tmpl, sizeof tmpl) == n && !strcmp(got, tmpl),
           "one picture is not the template's rendering:\n%s\n%s", got, tmpl);
    one[0].text = "look: <|image|>";
    test_capture_log();
    EXPECT_ERROR(mms_mllama_chat_prompt(one, 1, true, NULL, got, sizeof got), MMS_ERR_INVALID_ARG, "message 0", "<|image|>");
    EXPECT_ERROR(mms_mllama_chat_prompt(one, 0, true, NULL, got, sizeof got), MMS_ERR_INVALID_ARG, "no messages");
    mms_log_set(NULL, NULL);
}

/* Load progress: fractions rise to 1 and returning false stops the load with MMS_ABORTED. */
struct progress_log { int calls, stop_after; float last; bool rising; };

static bool on_progress(float fraction, void *user) {
    struct progress_log *pl = (struct progress_log *)user;
    if (fraction < pl->last) pl->rising = false;
    pl->last = fraction;
    return ++pl->calls < pl->stop_after;
}

static void test_load_progress(void) {
    struct mms_mllama_load_params lp;
    struct progress_log pl = { 0, 1 << 30, 0.0f, true };
    struct mms_mllama_model *m;
    memset(&lp, 0, sizeof lp);
    lp.path = FIX "tiny4.gguf";
    lp.cpu = cpu;
    lp.progress = on_progress;
    lp.progress_user_data = &pl;
    m = mms_mllama_model_load(&lp);
    EXPECT(m != NULL, "load: %s", mms_last_error());
    EXPECT(pl.calls >= 2 && pl.rising && pl.last == 1.0f, "progress: %d calls, last %g, rising %d", pl.calls, (double)pl.last, pl.rising);
    mms_mllama_model_free(m);
    pl.calls = 0; pl.stop_after = 1; pl.last = 0.0f;
    m = mms_mllama_model_load(&lp);
    EXPECT(m == NULL && mms_last_status() == MMS_ABORTED && pl.calls == 1, "a stopped load: %p, %s", (void *)m, mms_last_error());
    mms_mllama_model_free(m);
}

/* The timings count what was run: one encode, prompt and generation tokens, memory per backend. */
static void test_timings(void) {
    struct fixture f;
    if (fixture_open(&f, "tiny4")) {
        const struct mms_mllama_hparams *hp = mms_mllama_model_get_hparams(f.model);
        int32_t prompt[5] = { 3, 0, 17, 40, 9 }, next = 12;
        struct mms_mllama_timings t;
        int i;
        char text[2048];
        FILE *tmp = tmpfile();
        size_t n;
        prompt[1] = hp->image_token_id;
        mms_mllama_reset_timings(f.ctx);
        mms_mllama_get_timings(f.ctx, &t);
        EXPECT(t.load_ms > 0 && t.context_ms > 0 && t.n_encodes == 0 && t.n_prompt_tokens == 0 && t.n_gen_tokens == 0,
               "after a reset: load %g ms, context %g ms, %d encodes, %d + %d tokens", t.load_ms, t.context_ms, t.n_encodes,
               t.n_prompt_tokens, t.n_gen_tokens);
        EXPECT(mms_mllama_seq_add_image(f.ctx, 0, &f.images[0]) == MMS_OK, "add: %s", mms_last_error());
        EXPECT(test_decode(f.ctx, prompt, 5, NULL) == MMS_OK, "prompt: %s", mms_last_error());
        for (i = 0; i < 3; i++) EXPECT(test_decode(f.ctx, &next, 1, NULL) == MMS_OK, "token %d: %s", i, mms_last_error());
        mms_mllama_get_timings(f.ctx, &t);
        EXPECT(t.n_encodes == 1 && t.encode_ms > 0 && t.cross_kv_ms > 0, "encode: %d, %g ms + cross K/V %g ms", t.n_encodes, t.encode_ms, t.cross_kv_ms);
        EXPECT(t.n_prompt_tokens == 5 && t.prompt_ms > 0 && t.n_gen_tokens == 3 && t.gen_ms > 0, "tokens: prompt %d (%g ms), generation %d (%g ms)",
               t.n_prompt_tokens, t.prompt_ms, t.n_gen_tokens, t.gen_ms);
        struct mms_mllama_memory m;
        EXPECT(t.n_backends == 1 && mms_mllama_get_memory(f.ctx, 0, &m) == MMS_OK && !strcmp(m.name, "CPU") && m.weights > 0 &&
               m.kv_cache > 0 && m.pictures > 0 && m.compute > 0 && m.image_store > 0 && m.image_store_peak >= m.image_store &&
               m.peak == m.weights + m.kv_cache + m.pictures + m.compute + m.image_store_peak,
               "memory: %d backends, %s", t.n_backends, m.name);
        EXPECT_ERROR(mms_mllama_get_memory(f.ctx, 1, &m), MMS_ERR_INVALID_ARG, "backend 1");
        if (tmp) {
            mms_mllama_print_timings(f.ctx, tmp);
            rewind(tmp);
            n = fread(text, 1, sizeof text - 1, tmp);
            text[n] = '\0';
            fclose(tmp);
            EXPECT(strstr(text, "image encode") && strstr(text, "3 tokens") && strstr(text, "memory CPU"), "print:\n%s", text);
        }
    }
    fixture_close(&f);
}

static void test_errors(void) {
    struct fixture f;
    test_capture_log();
    EXPECT(load("tests/fixtures/mllama/nope.gguf", NULL, NULL, 0) == NULL && mms_last_status() == MMS_ERR_IO &&
           strstr(mms_last_error(), "nope.gguf"), "missing file: %s", mms_last_error());
    EXPECT(load("tests/fixtures/mllama/tiny1-ref.gguf", NULL, NULL, 0) == NULL && mms_last_status() == MMS_ERR_FORMAT &&
           strstr(mms_last_error(), "not an mllama model"), "wrong file: %s", mms_last_error());
    {   /* a truncated model */
        FILE *in = fopen(FIX "tiny1.gguf", "rb"), *out = fopen("build/test_mllama_truncated.gguf", "wb");
        char buf[4096];
        size_t n, total = 0;
        while (in && out && (n = fread(buf, 1, sizeof buf, in)) > 0 && total < 20000) { fwrite(buf, 1, n, out); total += n; }
        if (in) fclose(in);
        if (out) fclose(out);
        EXPECT(load("build/test_mllama_truncated.gguf", NULL, NULL, 0) == NULL && mms_last_status() == MMS_ERR_FORMAT, "truncated: %s", mms_last_error());
    }
    if (fixture_open(&f, "tiny1")) {
        const struct mms_mllama_hparams *hp = mms_mllama_model_get_hparams(f.model);
        int32_t toks[200];
        int i;
        for (i = 0; i < 200; i++) toks[i] = 1;
        mms_mllama_seq_clear(f.ctx, 0);
        toks[3] = hp->image_token_id;
        EXPECT_ERROR(test_decode(f.ctx, toks, 5, NULL), MMS_ERR_STATE, "<|image|>", "mms_mllama_seq_add_image");
        toks[3] = 1;
        EXPECT_ERROR(test_decode(f.ctx, toks, 100, NULL), MMS_ERR_INVALID_ARG, "n_batch");
        toks[0] = hp->n_embd_rows;
        EXPECT_ERROR(test_decode(f.ctx, toks, 1, NULL), MMS_ERR_INVALID_ARG, "outside the vocabulary");
        toks[0] = 1;
        for (i = 0; i < 2; i++) test_decode(f.ctx, toks, 64, NULL);
        EXPECT_ERROR(test_decode(f.ctx, toks, 1, NULL), MMS_ERR_INVALID_ARG, "do not fit in the context");
        EXPECT(mms_mllama_seq_trim(f.ctx, 0, 10) == MMS_OK && mms_mllama_seq_get_n_past(f.ctx, 0) == 10, "trim");
        {   /* context parameters: zero is the default, negative is refused */
            struct mms_mllama_context_params cp;
            struct mms_mllama_context *c2;
            memset(&cp, 0, sizeof cp);
            cp.n_ctx = -5;
            mms_clear_error();
            EXPECT(mms_mllama_context_new(f.model, &cp) == NULL && mms_last_status() == MMS_ERR_INVALID_ARG &&
                   strstr(mms_last_error(), "n_ctx -5"), "negative n_ctx: %s", mms_last_error());
            cp.n_ctx = 64;
            cp.max_images = -3;
            EXPECT(mms_mllama_context_new(f.model, &cp) == NULL && strstr(mms_last_error(), "max_images -3"),
                   "negative max_images: %s", mms_last_error());
            memset(&cp, 0, sizeof cp);
            cp.n_ctx = 64;
            c2 = mms_mllama_context_new(f.model, &cp);
            EXPECT(c2 != NULL, "zeroed parameters but n_ctx: %s", mms_last_error());
            mms_mllama_context_free(c2);
        }
    }
    fixture_close(&f);
    mms_log_set(NULL, NULL);
}

int main(void) {
    FILE *probe = fopen(FIX "tiny1.gguf", "rb");
    test_seed();
    if (!probe) { test_fail_all("fixtures", "missing: run tools/gen_mllama_fixtures.py"); return 1; }
    fclose(probe);
    cpu = mms_backend_cpu_init();
    dev = limited_backend_new("TEST", LIMITED_ALL_OPS);
    RUN(test_tiny1_against_transformers);
    RUN(test_tiny4_against_transformers);
    RUN(test_two_file_layout);
    RUN(test_ollama_converter_files);
    RUN(test_converter_writes_ollama_layout);
    RUN(test_converter_files);
    RUN(test_qk_rows_marker);
    RUN(test_hf_folders);
    RUN(test_f16_model);
    RUN(test_split_layers_change_nothing);
    RUN(test_vision_on_other_backend);
    RUN(test_image_in_a_later_turn);
    RUN(test_too_big_fails_at_load);
    RUN(test_same_image_twice_is_encoded_once);
    RUN(test_image_store);
    RUN(test_chat_prompt);
    RUN(test_load_progress);
    RUN(test_timings);
    RUN(test_errors);
    mms_backend_free(dev);
    mms_backend_free(cpu);
    return test_summary();
}
