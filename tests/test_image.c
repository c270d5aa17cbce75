/* Image preprocessing: the PIL-exact bilinear resize and mllama's tiles, against references made
   by Pillow and transformers' PIL image processor (tests/fixtures/images/preprocess-ref.gguf,
   written by tools/gen_image_fixtures.py, which documents its keys), plus properties that need no
   fixture. */
#define MMSCHED_IMPLEMENTATION
#include "../mmsched.h"
#include "test.h"
#include <math.h>

static struct mms_gguf *fx;   /* the fixture, opened in main */

/* -- helpers -- */

/* The generator's procedural source (tools/gen_image_fixtures.py, pattern()): big sources are
   regenerated here instead of stored. */
static uint8_t *pattern(int w, int h, uint32_t seed) {
    uint8_t *p = (uint8_t *)malloc((size_t)w * (size_t)h * 3);
    uint32_t x, y, c;
    if (!p) return NULL;
    for (y = 0; y < (uint32_t)h; y++)
        for (x = 0; x < (uint32_t)w; x++)
            for (c = 0; c < 3; c++) {
                uint32_t n = x * 0x9E3779B1u + y * 0x85EBCA77u + c * 0xC2B2AE3Du + seed * 0x27D4EB2Fu, g;
                n ^= n >> 15;
                n *= 0x2C1B3C6Du;
                n ^= n >> 12;
                g = c == 0 ? x * 255u / (uint32_t)w : c == 1 ? y * 255u / (uint32_t)h : (x + y) * 255u / (uint32_t)(w + h);
                p[((size_t)y * (size_t)w + x) * 3 + c] = (uint8_t)((g + (n & 63u) + (((x / 17 + y / 13) & 1u) ? 96u : 0u)) & 255u);
            }
    return p;
}

static uint64_t fnv1a64(const uint8_t *p, size_t n) {
    uint64_t h = 0xCBF29CE484222325ull;
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001B3ull;
    return h;
}

static uint32_t key_u32(const char *key) {
    uint32_t v = 0;
    enum mms_status st = mms_gguf_get_u32(fx, key, &v);
    EXPECT(st == MMS_OK, "fixture key %s: %s", key, mms_last_error());
    return v;
}

static int32_t key_i32(const char *key) {
    int32_t v = 0;
    enum mms_status st = mms_gguf_get_i32(fx, key, &v);
    EXPECT(st == MMS_OK, "fixture key %s: %s", key, mms_last_error());
    return v;
}

/* The data of a tensor with the given ne[0], ne[1] (and ne[2], ne[3] when non-zero), or NULL
   (missing tensors are a failure only when required). */
static const void *tensor(const char *name, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, int required) {
    struct mms_gguf_tensor_info info;
    int64_t i = mms_gguf_find_tensor(fx, name);
    if (i < 0) {
        EXPECT(!required, "fixture tensor %s is missing", name);
        return NULL;
    }
    if (mms_gguf_get_tensor(fx, i, &info) != MMS_OK) {
        EXPECT(0, "fixture tensor %s: %s", name, mms_last_error());
        return NULL;
    }
    if (info.ne[0] != ne0 || info.ne[1] != ne1 || (ne2 && info.ne[2] != ne2) || (ne3 && info.ne[3] != ne3) || !info.data) {
        EXPECT(0, "fixture tensor %s has ne {%lld, %lld, %lld, %lld}, expected {%lld, %lld, %lld, %lld}", name,
               (long long)info.ne[0], (long long)info.ne[1], (long long)info.ne[2], (long long)info.ne[3],
               (long long)ne0, (long long)ne1, (long long)ne2, (long long)ne3);
        return NULL;
    }
    return info.data;
}

static void case_name(const char *prefix, int k, char *buf, size_t cap) {
    char key[64];
    const char *s = "";
    size_t len = 0;
    snprintf(key, sizeof key, "%s.%d.name", prefix, k);
    if (mms_gguf_get_str(fx, key, &s, &len) != MMS_OK) { s = "?"; len = 1; }
    snprintf(buf, cap, "%s %d (%.*s)", prefix, k, (int)len, s);
}

/* The spec's rescale and normalise (section 3.6): float64 x / 255 stored as float32, then
   (x - mean) / std in float32. */
static float normalised(int v, float mean, float std) {
    volatile float x = (float)((double)v * (1.0 / 255.0));
    volatile float d = x - mean;
    return d / std;
}

static const float clip_mean[3] = {0.48145466f, 0.4578275f, 0.40821073f};
static const float clip_std[3]  = {0.26862954f, 0.26130258f, 0.27577711f};

/* What pixels must hold: row-major tiles of the padded canvas, black padding, zero slots. */
static float *expected_pixels(const uint8_t *resized, int rw, int rh, int S, int rows, int cols, int max_tiles,
                              const float *mean, const float *std) {
    size_t plane = (size_t)S * (size_t)S, n = (size_t)max_tiles * 3 * plane;
    float *e = (float *)calloc(n, sizeof(float));
    int t, c, y, x;
    if (!e) return NULL;
    for (t = 0; t < rows * cols; t++)
        for (c = 0; c < 3; c++)
            for (y = 0; y < S; y++)
                for (x = 0; x < S; x++) {
                    int cy = (t / cols) * S + y, cx = (t % cols) * S + x;
                    int v = cy < rh && cx < rw ? resized[((size_t)cy * (size_t)rw + (size_t)cx) * 3 + (size_t)c] : 0;
                    e[(size_t)t * 3 * plane + (size_t)c * plane + (size_t)y * (size_t)S + (size_t)x] = normalised(v, mean[c], std[c]);
                }
    return e;
}

/* Number of floats that differ bit for bit, the first one and the largest difference. */
static size_t compare_floats(const float *got, const float *want, size_t n, size_t *first, double *max_diff) {
    size_t i, bad = 0;
    *first = 0;
    *max_diff = 0.0;
    for (i = 0; i < n; i++) {
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0) {
            double d = fabs((double)got[i] - (double)want[i]);
            if (bad++ == 0) *first = i;
            if (d > *max_diff || d != d) *max_diff = d;
        }
    }
    return bad;
}

/* -- resize against Pillow -- */

static void test_resize_matches_pil(void) {
    uint32_t n = key_u32("rs.count"), k;
    EXPECT(n >= 20, "only %u resize cases", n);
    for (k = 0; k < n; k++) {
        char key[64], name[160];
        int sw, sh, dw, dh;
        const uint8_t *src, *want;
        uint8_t *got;
        case_name("rs", (int)k, name, sizeof name);
        snprintf(key, sizeof key, "rs.%u.src_width", k);  sw = (int)key_u32(key);
        snprintf(key, sizeof key, "rs.%u.src_height", k); sh = (int)key_u32(key);
        snprintf(key, sizeof key, "rs.%u.dst_width", k);  dw = (int)key_u32(key);
        snprintf(key, sizeof key, "rs.%u.dst_height", k); dh = (int)key_u32(key);
        snprintf(key, sizeof key, "rs.%u.src", k);
        src = (const uint8_t *)tensor(key, 3 * (int64_t)sw, sh, 0, 0, 1);
        snprintf(key, sizeof key, "rs.%u.dst", k);
        want = (const uint8_t *)tensor(key, 3 * (int64_t)dw, dh, 0, 0, 1);
        if (!src || !want) continue;
        got = (uint8_t *)malloc((size_t)dw * (size_t)dh * 3);
        EXPECT(mms_image_resize_bilinear(src, sw, sh, 0, got, dw, dh) == MMS_OK, "%s: %s", name, mms_last_error());
        if (memcmp(got, want, (size_t)dw * (size_t)dh * 3) != 0) {
            size_t i, bad = 0, first = 0;
            for (i = 0; i < (size_t)dw * (size_t)dh * 3; i++)
                if (got[i] != want[i] && bad++ == 0) first = i;
            EXPECT(0, "%s, %dx%d to %dx%d: %zu of %zu bytes differ from PIL, first at pixel (%zu, %zu) channel %zu: %d, PIL %d",
                   name, sw, sh, dw, dh, bad, (size_t)dw * (size_t)dh * 3, first / 3 % (size_t)dw, first / 3 / (size_t)dw,
                   first % 3, got[first], want[first]);
        }
        free(got);
    }
}

/* A source with padded rows (stride > 3 * width) resizes the same as the tight one. */
static void test_resize_honours_stride(void) {
    const int sw = 37, sh = 29, pad = 13;
    const int sizes[4][2] = {{37, 29}, {11, 7}, {80, 64}, {37, 5}};
    uint8_t *tight = pattern(sw, sh, 7), *wide = (uint8_t *)malloc((size_t)(3 * sw + pad) * (size_t)sh);
    int y, s;
    memset(wide, 0xAB, (size_t)(3 * sw + pad) * (size_t)sh);
    for (y = 0; y < sh; y++) memcpy(wide + (size_t)y * (size_t)(3 * sw + pad), tight + (size_t)y * (size_t)sw * 3, (size_t)sw * 3);
    for (s = 0; s < 4; s++) {
        const int dw = sizes[s][0], dh = sizes[s][1];
        uint8_t *a = (uint8_t *)malloc((size_t)dw * (size_t)dh * 3), *b = (uint8_t *)malloc((size_t)dw * (size_t)dh * 3);
        EXPECT(mms_image_resize_bilinear(tight, sw, sh, 0, a, dw, dh) == MMS_OK, "tight: %s", mms_last_error());
        EXPECT(mms_image_resize_bilinear(wide, sw, sh, (size_t)(3 * sw + pad), b, dw, dh) == MMS_OK, "strided: %s", mms_last_error());
        EXPECT(memcmp(a, b, (size_t)dw * (size_t)dh * 3) == 0, "%dx%d: stride changes the result", dw, dh);
        free(a);
        free(b);
    }
    free(tight);
    free(wide);
}

/* -- preprocessing against transformers -- */

static void test_preprocess_matches_transformers(void) {
    uint32_t n = key_u32("img.count"), k;
    EXPECT(n >= 25, "only %u preprocessing cases", n);
    for (k = 0; k < n; k++) {
        char key[64], name[160];
        int w, h, S, mt, rw, rh, t;
        int32_t want_id, want_tiles, mask[16];
        int64_t n_mask = 0;
        uint64_t want_hash = 0;
        uint8_t *owned = NULL, *resized = NULL;
        const uint8_t *rgb = NULL;
        struct mms_mllama_image_params p;
        struct mms_mllama_image im;
        enum mms_status st;
        case_name("img", (int)k, name, sizeof name);
        snprintf(key, sizeof key, "img.%u.width", k);     w = (int)key_u32(key);
        snprintf(key, sizeof key, "img.%u.height", k);    h = (int)key_u32(key);
        snprintf(key, sizeof key, "img.%u.tile", k);      S = (int)key_u32(key);
        snprintf(key, sizeof key, "img.%u.max_tiles", k); mt = (int)key_u32(key);
        snprintf(key, sizeof key, "img.%u.resized_width", k);  rw = (int)key_u32(key);
        snprintf(key, sizeof key, "img.%u.resized_height", k); rh = (int)key_u32(key);
        snprintf(key, sizeof key, "img.%u.aspect_ratio_id", k); want_id = key_i32(key);
        snprintf(key, sizeof key, "img.%u.num_tiles", k); want_tiles = key_i32(key);
        snprintf(key, sizeof key, "img.%u.aspect_ratio_mask", k);
        EXPECT(mms_gguf_get_arr_i32(fx, key, mask, 16, &n_mask) == MMS_OK && n_mask == mt, "%s: mask: %s", name, mms_last_error());
        snprintf(key, sizeof key, "img.%u.resized_fnv1a64", k);
        EXPECT(mms_gguf_get_u64(fx, key, &want_hash) == MMS_OK, "%s: %s", name, mms_last_error());
        snprintf(key, sizeof key, "img.%u.pattern_seed", k);
        if (mms_gguf_find_key(fx, key) >= 0) {
            rgb = owned = pattern(w, h, key_u32(key));
        } else {
            snprintf(key, sizeof key, "img.%u.rgb", k);
            rgb = (const uint8_t *)tensor(key, 3 * (int64_t)w, h, 0, 0, 1);
        }
        if (!rgb || w <= 0 || h <= 0 || mt < 1 || mt > 16 || n_mask != mt) { free(owned); continue; }

        memset(&p, 0, sizeof p);   /* zero mean/std: the 11B model's CLIP values, as the fixture */
        p.image_size = S;
        p.max_num_tiles = mt;
        st = mms_mllama_preprocess_image(&p, rgb, w, h, 0, &im);
        EXPECT(st == MMS_OK, "%s: %s", name, mms_last_error());
        if (st != MMS_OK) { free(owned); continue; }
        EXPECT(im.aspect_ratio_id == want_id, "%s: aspect ratio id %d, transformers %d", name, im.aspect_ratio_id, want_id);
        EXPECT(im.n_tiles == want_tiles && im.tiles_rows * im.tiles_cols == want_tiles,
               "%s: %d tiles (%dx%d), transformers %d", name, im.n_tiles, im.tiles_rows, im.tiles_cols, want_tiles);
        for (t = 0; t < mt; t++)
            EXPECT(im.aspect_ratio_mask[t] == mask[t], "%s: mask[%d] %d, transformers %d", name, t, im.aspect_ratio_mask[t], mask[t]);
        EXPECT(im.resized_width == rw && im.resized_height == rh, "%s: resized to %dx%d, transformers %dx%d", name,
               im.resized_width, im.resized_height, rw, rh);
        EXPECT(im.max_num_tiles == mt && im.image_size == S, "%s: shape fields", name);

        /* the resized image, through the public resize: the same bytes as PIL's inside the processor */
        resized = (uint8_t *)malloc((size_t)rw * (size_t)rh * 3);
        EXPECT(mms_image_resize_bilinear(rgb, w, h, 0, resized, rw, rh) == MMS_OK, "%s: %s", name, mms_last_error());
        EXPECT(fnv1a64(resized, (size_t)rw * (size_t)rh * 3) == want_hash, "%s: the resized %dx%d image differs from PIL's (hash)", name, rw, rh);
        {
            const uint8_t *want;
            snprintf(key, sizeof key, "img.%u.resized", k);
            want = (const uint8_t *)tensor(key, 3 * (int64_t)rw, rh, 0, 0, 0);
            if (want) EXPECT(memcmp(want, resized, (size_t)rw * (size_t)rh * 3) == 0, "%s: resized bytes differ from PIL's", name);
        }

        {
            const size_t n_floats = (size_t)mt * 3 * (size_t)S * (size_t)S;
            float *exp_px = expected_pixels(resized, rw, rh, S, im.tiles_rows, im.tiles_cols, mt, clip_mean, clip_std);
            size_t bad, first;
            double max_diff;
            /* against the spec's formula applied to PIL's resized bytes: exact */
            bad = compare_floats(im.pixels, exp_px, n_floats, &first, &max_diff);
            EXPECT(bad == 0, "%s: %zu of %zu values differ from the formula, first at %zu (%.9g vs %.9g), max diff %g", name,
                   bad, n_floats, first, (double)im.pixels[first], (double)exp_px[first], max_diff);
            /* against transformers' pixel_values: exact, bit for bit (the fixture keeps their hash) */
            {
                uint64_t want_pv = 0;
                snprintf(key, sizeof key, "img.%u.pixel_values_fnv1a64", k);
                EXPECT(mms_gguf_get_u64(fx, key, &want_pv) == MMS_OK, "%s: %s", name, mms_last_error());
                EXPECT(fnv1a64((const uint8_t *)im.pixels, n_floats * sizeof(float)) == want_pv, "%s: pixel values differ from transformers' (hash)", name);
            }
            free(exp_px);
        }
        free(resized);
        free(owned);
        mms_mllama_image_free(&im);
        EXPECT(im.pixels == NULL, "%s: free leaves the pointer", name);
    }
}

/* The fixture records where it came from: the PIL processor, never the torchvision one. */
static void test_fixture_provenance(void) {
    const char *s = NULL;
    size_t len = 0, i;
    int fast = 0;
    EXPECT(mms_gguf_get_str(fx, "fixture.processor", &s, &len) == MMS_OK, "%s", mms_last_error());
    for (i = 0; s && i + 4 <= len; i++) fast |= memcmp(s + i, "Fast", 4) == 0;
    EXPECT(s && len >= 6 && memcmp(s, "Mllama", 6) == 0 && !fast, "processor %.*s", (int)len, s ? s : "");
    EXPECT(mms_gguf_get_str(fx, "fixture.pillow_version", &s, &len) == MMS_OK && len > 0, "pillow version: %s", mms_last_error());
    printf("    fixture: Pillow %.*s", (int)len, s);
    EXPECT(mms_gguf_get_str(fx, "fixture.transformers_version", &s, &len) == MMS_OK && len > 0, "transformers version: %s", mms_last_error());
    printf(", transformers %.*s\n", (int)len, s);
}

/* -- properties that need no fixture -- */

static enum mms_status preprocess(int w, int h, int S, int mt, uint32_t seed, struct mms_mllama_image *im, uint8_t **rgb_out) {
    struct mms_mllama_image_params p;
    uint8_t *rgb = pattern(w, h, seed);
    enum mms_status st;
    memset(&p, 0, sizeof p);
    p.image_size = S;
    p.max_num_tiles = mt;
    st = mms_mllama_preprocess_image(&p, rgb, w, h, 0, im);
    if (rgb_out) *rgb_out = rgb;
    else free(rgb);
    return st;
}

/* Spec section 3: 640x480 -> canvas 560 high, 1120 wide, id 2, two tiles, not resized. */
static void test_worked_example_640x480(void) {
    struct mms_mllama_image im;
    uint8_t *rgb = NULL;
    const size_t plane = 560 * 560, tile = 3 * plane;
    size_t i;
    int c, bad = 0;
    EXPECT(preprocess(640, 480, 560, 4, 5, &im, &rgb) == MMS_OK, "%s", mms_last_error());
    EXPECT(im.aspect_ratio_id == 2 && im.tiles_rows == 1 && im.tiles_cols == 2 && im.n_tiles == 2,
           "id %d, %dx%d tiles", im.aspect_ratio_id, im.tiles_rows, im.tiles_cols);
    EXPECT(im.resized_width == 640 && im.resized_height == 480, "resized to %dx%d", im.resized_width, im.resized_height);
    EXPECT(im.aspect_ratio_mask[0] == 1 && im.aspect_ratio_mask[1] == 1 && im.aspect_ratio_mask[2] == 0 && im.aspect_ratio_mask[3] == 0,
           "mask %d %d %d %d", im.aspect_ratio_mask[0], im.aspect_ratio_mask[1], im.aspect_ratio_mask[2], im.aspect_ratio_mask[3]);
    for (c = 0; c < 3; c++) {
        /* tile 0 starts at the image's top left; tile 1 at column 560 */
        EXPECT(im.pixels[(size_t)c * plane] == normalised(rgb[c], clip_mean[c], clip_std[c]), "tile 0 corner, channel %d", c);
        EXPECT(im.pixels[tile + (size_t)c * plane] == normalised(rgb[560 * 3 + c], clip_mean[c], clip_std[c]), "tile 1 corner, channel %d", c);
        EXPECT(im.pixels[tile + (size_t)c * plane + 79] == normalised(rgb[639 * 3 + c], clip_mean[c], clip_std[c]), "last column, channel %d", c);
        /* right of column 640 and below row 480: black */
        EXPECT(im.pixels[tile + (size_t)c * plane + 80] == normalised(0, clip_mean[c], clip_std[c]), "padding right, channel %d", c);
        EXPECT(im.pixels[(size_t)c * plane + 480 * 560] == normalised(0, clip_mean[c], clip_std[c]), "padding below, channel %d", c);
    }
    for (i = 2 * tile; i < 4 * tile; i++) bad += im.pixels[i] != 0.0f || signbit(im.pixels[i]);
    EXPECT(bad == 0, "%d values of the unused slots are not +0.0", bad);
    free(rgb);
    mms_mllama_image_free(&im);
}

/* The normalised black of the spec, [-1.79226, -1.75210, -1.48022], fills the padding; unused
   slots are +0.0; over many shapes and tile counts. */
static void test_padding_black_and_zero_slots(void) {
    int it;
    for (it = 0; it < 40; it++) {
        const int S = test_rand_int(1, 4) * 7, mt = test_rand_int(1, 16);
        const int w = test_rand_int(1, 4 * S * 2), h = test_rand_int(1, 4 * S * 2);
        struct mms_mllama_image im;
        size_t plane = (size_t)S * (size_t)S, i;
        int t, c, y, x, bad_pad = 0, bad_zero = 0, bad_in = 0;
        if (preprocess(w, h, S, mt, (uint32_t)it, &im, NULL) != MMS_OK) { EXPECT(0, "%dx%d: %s", w, h, mms_last_error()); continue; }
        EXPECT(im.n_tiles >= 1 && im.n_tiles <= mt && im.n_tiles == im.tiles_rows * im.tiles_cols, "%d tiles of at most %d", im.n_tiles, mt);
        EXPECT(im.resized_width >= 1 && im.resized_width <= S * im.tiles_cols && im.resized_height >= 1 && im.resized_height <= S * im.tiles_rows,
               "%dx%d resized to %dx%d, canvas %dx%d", w, h, im.resized_width, im.resized_height, S * im.tiles_cols, S * im.tiles_rows);
        /* one side fills its canvas side exactly, or the image is unscaled */
        EXPECT(im.resized_width == S * im.tiles_cols || im.resized_height == S * im.tiles_rows ||
               (im.resized_width == w && im.resized_height == h) || (w < S && h < S), "%dx%d resized to %dx%d", w, h, im.resized_width, im.resized_height);
        for (t = 0; t < mt; t++)
            EXPECT(im.aspect_ratio_mask[t] == (t < im.n_tiles), "mask[%d] = %d with %d tiles", t, im.aspect_ratio_mask[t], im.n_tiles);
        for (t = mt; t < 16; t++) EXPECT(im.aspect_ratio_mask[t] == 0, "mask[%d] beyond max_num_tiles", t);
        for (t = 0; t < im.n_tiles; t++)
            for (c = 0; c < 3; c++) {
                const float black = normalised(0, clip_mean[c], clip_std[c]);
                for (y = 0; y < S; y++)
                    for (x = 0; x < S; x++) {
                        const int cy = (t / im.tiles_cols) * S + y, cx = (t % im.tiles_cols) * S + x;
                        const float v = im.pixels[((size_t)t * 3 + (size_t)c) * plane + (size_t)y * (size_t)S + (size_t)x];
                        if (cy >= im.resized_height || cx >= im.resized_width) bad_pad += v != black;
                        else bad_in += !(v >= black && v <= normalised(255, clip_mean[c], clip_std[c]));
                    }
            }
        for (i = (size_t)im.n_tiles * 3 * plane; i < (size_t)mt * 3 * plane; i++) bad_zero += im.pixels[i] != 0.0f || signbit(im.pixels[i]);
        EXPECT(bad_pad == 0 && bad_zero == 0 && bad_in == 0, "%dx%d, tile %d, %d tiles max: %d padding values not black, %d slot values not 0, %d out of range",
               w, h, S, mt, bad_pad, bad_zero, bad_in);
        mms_mllama_image_free(&im);
    }
    EXPECT(fabs(normalised(0, clip_mean[0], clip_std[0]) + 1.79226) < 1e-5 && fabs(normalised(0, clip_mean[1], clip_std[1]) + 1.75210) < 1e-5 &&
           fabs(normalised(0, clip_mean[2], clip_std[2]) + 1.48022) < 1e-5, "black is not the spec's value");
}

/* Canvas choice and fit (spec 3.2-3.3), computed by hand for telling shapes. */
static void test_canvas_and_fit_rules(void) {
    static const struct { int w, h, id, rows, cols, rw, rh; } cases[] = {
        {640, 480, 2, 1, 2, 640, 480},
        {480, 640, 5, 2, 1, 480, 640},     /* (rows, cols) reading: tall images get the (2, 1) entry */
        {560, 560, 1, 1, 1, 560, 560},     /* scale exactly 1 counts as upscaling (>= 1) */
        {561, 560, 2, 1, 2, 561, 560},
        {1, 1, 1, 1, 1, 560, 560},         /* both sides under a tile: the longer becomes 560 */
        {280, 140, 1, 1, 1, 560, 280},
        {4032, 3024, 6, 2, 2, 1120, 840},
        {8000, 300, 4, 1, 4, 2240, 84},
        {300, 8000, 8, 4, 1, 84, 2240},
        {1, 8000, 8, 4, 1, 1, 2240},       /* floor(0.28) is 0: newer transformers' "or 1" */
        {8000, 1, 4, 1, 4, 2240, 1},
        {1200, 90, 3, 1, 3, 1200, 90},     /* fits its canvas: not resized */
        {2400, 100, 4, 1, 4, 2240, 93},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct mms_mllama_image im;
        if (preprocess(cases[i].w, cases[i].h, 560, 4, 1, &im, NULL) != MMS_OK) { EXPECT(0, "%s", mms_last_error()); continue; }
        EXPECT(im.aspect_ratio_id == cases[i].id && im.tiles_rows == cases[i].rows && im.tiles_cols == cases[i].cols &&
               im.resized_width == cases[i].rw && im.resized_height == cases[i].rh,
               "%dx%d: id %d, %dx%d tiles, resized %dx%d; expected id %d, %dx%d, %dx%d", cases[i].w, cases[i].h, im.aspect_ratio_id,
               im.tiles_rows, im.tiles_cols, im.resized_width, im.resized_height, cases[i].id, cases[i].rows, cases[i].cols, cases[i].rw, cases[i].rh);
        mms_mllama_image_free(&im);
    }
}

/* Caller statistics replace the CLIP ones; stride is honoured. */
static void test_custom_mean_std_and_stride(void) {
    struct mms_mllama_image_params p;
    struct mms_mllama_image a, b;
    const int w = 23, h = 17, pad = 5;
    uint8_t *rgb = pattern(w, h, 3), *wide = (uint8_t *)calloc((size_t)(3 * w + pad) * (size_t)h, 1);
    int y, c;
    for (y = 0; y < h; y++) memcpy(wide + (size_t)y * (size_t)(3 * w + pad), rgb + (size_t)y * (size_t)w * 3, (size_t)w * 3);
    memset(&p, 0, sizeof p);
    p.image_size = 28;
    p.max_num_tiles = 2;
    p.mean[0] = 0.5f; p.mean[1] = 0.0f; p.mean[2] = 0.25f;
    p.std[0] = 0.5f;  p.std[1] = 1.0f;  p.std[2] = 2.0f;
    EXPECT(mms_mllama_preprocess_image(&p, rgb, w, h, 0, &a) == MMS_OK, "%s", mms_last_error());
    EXPECT(mms_mllama_preprocess_image(&p, wide, w, h, (size_t)(3 * w + pad), &b) == MMS_OK, "%s", mms_last_error());
    EXPECT(memcmp(a.pixels, b.pixels, (size_t)2 * 3 * 28 * 28 * sizeof(float)) == 0, "stride changes the result");
    for (c = 0; c < 3; c++) {
        const float black = normalised(0, p.mean[c], p.std[c]);
        EXPECT(a.pixels[(size_t)c * 28 * 28 + 28 * 28 - 1] == black, "channel %d: padding %g, expected %g", c,
               (double)a.pixels[(size_t)c * 28 * 28 + 28 * 28 - 1], (double)black);
    }
    mms_mllama_image_free(&a);
    mms_mllama_image_free(&b);
    free(rgb);
    free(wide);
}

static void test_bad_input(void) {
    struct mms_mllama_image_params p;
    struct mms_mllama_image im;
    uint8_t px[12] = {0}, out[12];
    test_capture_log();   /* the errors are expected: keep them off stderr */
    memset(&p, 0, sizeof p);
    p.image_size = 560;
    p.max_num_tiles = 4;
    EXPECT_ERROR(mms_mllama_preprocess_image(NULL, px, 1, 1, 0, &im), MMS_ERR_INVALID_ARG, "params is NULL");
    EXPECT_ERROR(mms_mllama_preprocess_image(&p, NULL, 1, 1, 0, &im), MMS_ERR_INVALID_ARG, "rgb is NULL");
    EXPECT_ERROR(mms_mllama_preprocess_image(&p, px, 1, 1, 0, NULL), MMS_ERR_INVALID_ARG, "out is NULL");
    EXPECT_ERROR(mms_mllama_preprocess_image(&p, px, 0, 0, 0, &im), MMS_ERR_INVALID_ARG, "empty image", "0x0");
    EXPECT(im.pixels == NULL, "a failed call leaves pixels");
    mms_mllama_image_free(&im);   /* safe on a failed result */
    EXPECT_ERROR(mms_mllama_preprocess_image(&p, px, -3, 2, 0, &im), MMS_ERR_INVALID_ARG, "empty image", "-3x2");
    EXPECT_ERROR(mms_mllama_preprocess_image(&p, px, 2, -1, 0, &im), MMS_ERR_INVALID_ARG, "empty image", "2x-1");
    EXPECT_ERROR(mms_mllama_preprocess_image(&p, px, 2, 2, 5, &im), MMS_ERR_INVALID_ARG, "stride 5", "2 pixels");
    p.max_num_tiles = -1;
    EXPECT_ERROR(mms_mllama_preprocess_image(&p, px, 1, 1, 0, &im), MMS_ERR_INVALID_ARG, "max_num_tiles -1", "1..16");
    p.max_num_tiles = 17;
    EXPECT_ERROR(mms_mllama_preprocess_image(&p, px, 1, 1, 0, &im), MMS_ERR_INVALID_ARG, "max_num_tiles 17", "1..16");
    {   /* zeroed parameters are the 11B model's */
        struct mms_mllama_image_params zero;
        memset(&zero, 0, sizeof zero);
        EXPECT(mms_mllama_preprocess_image(&zero, px, 2, 2, 0, &im) == MMS_OK && im.image_size == 560 && im.max_num_tiles == 4,
               "zeroed parameters: %s (%d, %d)", mms_last_error(), im.image_size, im.max_num_tiles);
        mms_mllama_image_free(&im);
    }
    p.max_num_tiles = 4;
    p.image_size = -560;
    EXPECT_ERROR(mms_mllama_preprocess_image(&p, px, 1, 1, 0, &im), MMS_ERR_INVALID_ARG, "image_size -560");
    p.image_size = 560;
    p.mean[0] = 0.5f;   /* statistics given, but a std of 0 */
    EXPECT_ERROR(mms_mllama_preprocess_image(&p, px, 1, 1, 0, &im), MMS_ERR_INVALID_ARG, "channel 0", "std non-zero");
    p.std[0] = p.std[1] = p.std[2] = 1.0f;
    p.mean[1] = (float)HUGE_VAL;
    EXPECT_ERROR(mms_mllama_preprocess_image(&p, px, 1, 1, 0, &im), MMS_ERR_INVALID_ARG, "channel 1");

    EXPECT_ERROR(mms_image_resize_bilinear(NULL, 1, 1, 0, out, 1, 1), MMS_ERR_INVALID_ARG, "src is NULL");
    EXPECT_ERROR(mms_image_resize_bilinear(px, 1, 1, 0, NULL, 1, 1), MMS_ERR_INVALID_ARG, "dst is NULL");
    EXPECT_ERROR(mms_image_resize_bilinear(px, 0, 1, 0, out, 1, 1), MMS_ERR_INVALID_ARG, "empty size", "0x1 to 1x1");
    EXPECT_ERROR(mms_image_resize_bilinear(px, 1, 1, 0, out, 2, -2), MMS_ERR_INVALID_ARG, "empty size", "1x1 to 2x-2");
    EXPECT_ERROR(mms_image_resize_bilinear(px, 2, 2, 4, out, 1, 1), MMS_ERR_INVALID_ARG, "stride 4");
    mms_log_set(NULL, NULL);
}

/* A phone photo to four tiles of 560: the common case, timed (the target is well under a second). */
static void test_photo_to_four_tiles_speed(void) {
    uint8_t *rgb = pattern(4032, 3024, 30);
    struct mms_mllama_image_params p;
    struct mms_mllama_image im;
    int64_t t0, best = -1;
    int rep;
    memset(&p, 0, sizeof p);
    p.image_size = 560;
    p.max_num_tiles = 4;
    for (rep = 0; rep < 3; rep++) {
        t0 = mms_time_us();
        EXPECT(mms_mllama_preprocess_image(&p, rgb, 4032, 3024, 0, &im) == MMS_OK, "%s", mms_last_error());
        t0 = mms_time_us() - t0;
        if (best < 0 || t0 < best) best = t0;
        EXPECT(im.aspect_ratio_id == 6 && im.resized_width == 1120 && im.resized_height == 840, "id %d", im.aspect_ratio_id);
        mms_mllama_image_free(&im);
    }
    printf("    4032x3024 to 4 tiles of 560: %.1f ms\n", (double)best / 1000.0);
    free(rgb);
}

/* The fixture: MMS_IMAGE_FIXTURE, else next to this source file, else from the repository root. */
static struct mms_gguf *open_fixture(void) {
    static const char rel[] = "fixtures/images/preprocess-ref.gguf";
    const char *env = getenv("MMS_IMAGE_FIXTURE");
    const char *slash = strrchr(__FILE__, '/');
    char path[1024];
    struct mms_gguf *g;
    if (env) return mms_gguf_open(env);
    snprintf(path, sizeof path, "%.*s%s", slash ? (int)(slash - __FILE__ + 1) : 0, __FILE__, rel);
    if ((g = mms_gguf_open(path)) != NULL) return g;
    snprintf(path, sizeof path, "tests/%s", rel);
    return mms_gguf_open(path);
}

static void test_fixture_opens(void) {
    EXPECT(fx != NULL, "tests/fixtures/images/preprocess-ref.gguf: %s", mms_last_error());
}

/* Every colour and alpha over white equals PIL's alpha_composite (the fixture holds its hash). */
static void test_alpha_over_white_matches_pil(void) {
    uint8_t *grid = (uint8_t *)malloc(256 * 256 * 4), *rgb = (uint8_t *)malloc(256 * 256 * 3);
    uint64_t want = 0;
    int a, c;
    EXPECT(mms_gguf_get_u64(fx, "alpha.grid_rgb_fnv1a64", &want) == MMS_OK, "fixture key: %s", mms_last_error());
    for (a = 0; a < 256; a++)
        for (c = 0; c < 256; c++) {
            uint8_t *p = grid + ((size_t)a * 256 + (size_t)c) * 4;
            p[0] = (uint8_t)c; p[1] = (uint8_t)(255 - c); p[2] = (uint8_t)((c * 7 + a) & 255); p[3] = (uint8_t)a;
        }
    EXPECT(mms_image_rgba_over_white(grid, 256, 256, 0, rgb) == MMS_OK, "%s", mms_last_error());
    EXPECT(fnv1a64(rgb, 256 * 256 * 3) == want, "composited grid differs from PIL's");
    EXPECT(rgb[0] == 255 && rgb[(255 * 256 + 10) * 3] == 10, "a = 0 gives white, a = 255 the colour");
    EXPECT_ERROR(mms_image_rgba_over_white(grid, 0, 256, 0, rgb), MMS_ERR_INVALID_ARG, "size");
    EXPECT_ERROR(mms_image_rgba_over_white(grid, 256, 256, 100, rgb), MMS_ERR_INVALID_ARG, "stride");
    free(grid);
    free(rgb);
}

int main(void) {
    test_seed();
    fx = open_fixture();
    RUN(test_fixture_opens);
    if (fx) {
        RUN(test_fixture_provenance);
        RUN(test_resize_matches_pil);
        RUN(test_preprocess_matches_transformers);
        RUN(test_alpha_over_white_matches_pil);
    }
    RUN(test_resize_honours_stride);
    RUN(test_worked_example_640x480);
    RUN(test_padding_black_and_zero_slots);
    RUN(test_canvas_and_fit_rules);
    RUN(test_custom_mean_std_and_stride);
    RUN(test_bad_input);
    RUN(test_photo_to_four_tiles_speed);
    mms_gguf_close(fx);
    return test_summary();
}
