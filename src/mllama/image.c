/* >>mllama-image ==================================================================================
   Image preprocessing (transformers' MllamaImageProcessor): canvas choice, PIL's bilinear resize, padding, rescale,
   normalisation and tiling. Every rounding step follows the PIL processor of transformers, so the
   floats come out bit for bit the same. */

/* -- PIL-compatible bilinear resize ------------------------------------------------------------------
   PIL resamples separably, one pass per axis whose size changes, through an 8-bit temporary, so
   the order of the passes shows in the result (see the rule below). Weights are the triangle
   filter, widened by the scale factor when shrinking (antialiasing), normalised to sum 1 in
   double, then turned into 22-bit fixed point; sums start at one half and are shifted and
   clamped back to 8 bits. */

#define MMS__RS_BITS 22   /* fraction bits: 32 less 8 for the value less 2 spare, as PIL */

/* One pass along one axis: for output i, inputs first[i] .. first[i] + count[i] - 1 with weights
   k[i * ksize ..]. */
struct mms__rs_axis {
    int      ksize;
    int     *first, *count;
    int32_t *k;
};

/* A double that is really rounded to double: stops a compiler from fusing it into a later add
   (an FMA would round differently from PIL's builds). */
static double mms__rs_round(double x) {
    volatile double v = x;
    return v;
}

static void mms__rs_axis_free(struct mms__rs_axis *ax) {
    MMS_FREE(ax->first);
    MMS_FREE(ax->count);
    MMS_FREE(ax->k);
    memset(ax, 0, sizeof *ax);
}

static enum mms_status mms__rs_axis_init(struct mms__rs_axis *ax, int in_size, int out_size) {
    /* PIL passes the source box as floats and divides in double */
    const double scale = (double)(float)in_size / (double)out_size;
    const double filterscale = scale < 1.0 ? 1.0 : scale;
    const double support = filterscale;          /* the triangle's support is 1 */
    const double inv_filterscale = 1.0 / filterscale;
    double *w = NULL;
    int i, x;
    memset(ax, 0, sizeof *ax);
    /* ksize * out_size stays near 2 * in_size + 3 * out_size; these guard the int and size_t maths */
    if (ceil(support) > (double)(0x3fffffff / 2 - 1) ||
        (size_t)ceil(support) * 2 + 1 > ((size_t)-1 / sizeof(int32_t)) / (size_t)out_size)
        return mms_set_error(MMS_ERR_INVALID_ARG, "image resize: %d to %d pixels needs too wide a filter", in_size, out_size);
    ax->ksize = (int)ceil(support) * 2 + 1;
    ax->first = (int *)MMS_MALLOC((size_t)out_size * sizeof(int));
    ax->count = (int *)MMS_MALLOC((size_t)out_size * sizeof(int));
    ax->k = (int32_t *)MMS_MALLOC((size_t)out_size * (size_t)ax->ksize * sizeof(int32_t));
    w = (double *)MMS_MALLOC((size_t)ax->ksize * sizeof(double));
    if (!ax->first || !ax->count || !ax->k || !w) {
        MMS_FREE(w);
        mms__rs_axis_free(ax);
        return mms_set_error(MMS_ERR_OOM, "image resize: no memory for the filter of %d to %d pixels", in_size, out_size);
    }
    for (i = 0; i < out_size; i++) {
        const double center = mms__rs_round(((double)i + 0.5) * scale);
        double ww = 0.0;
        int32_t *k = ax->k + (size_t)i * (size_t)ax->ksize;
        /* PIL truncates toward zero after adding one half, then clips to the image */
        int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5), n;
        if (lo < 0) lo = 0;
        if (hi > in_size) hi = in_size;
        n = hi - lo;
        for (x = 0; x < n; x++) {
            double t = mms__rs_round(((double)(x + lo) - center + 0.5) * inv_filterscale);
            if (t < 0.0) t = -t;
            w[x] = t < 1.0 ? 1.0 - t : 0.0;
            ww += w[x];
        }
        for (x = 0; x < n; x++) {
            const double v = ww != 0.0 ? w[x] / ww : w[x];
            k[x] = (int32_t)(0.5 + v * (double)(1 << MMS__RS_BITS));   /* weights are never negative */
        }
        ax->first[i] = lo;
        ax->count[i] = n;
    }
    MMS_FREE(w);
    return MMS_OK;
}

/* 64-bit sums: a 32-bit sum (PIL's) cannot overflow for any size PIL accepts, and gives the same
   result; 64 bits keep larger filters exact too. */
static uint8_t mms__rs_clip8(int64_t acc) {
    acc >>= MMS__RS_BITS;
    return (uint8_t)(acc < 0 ? 0 : acc > 255 ? 255 : acc);
}

/* Rows [y0, y1) of src, resampled along x into dst (tight rows of out_w pixels). */
static void mms__rs_horizontal(const uint8_t *src, size_t src_stride, int y0, int y1, const struct mms__rs_axis *ax,
                               int out_w, uint8_t *dst) {
    const int64_t half = (int64_t)1 << (MMS__RS_BITS - 1);
    int y, i, x;
    for (y = y0; y < y1; y++) {
        const uint8_t *s = src + (size_t)y * src_stride;
        uint8_t *d = dst + (size_t)(y - y0) * (size_t)out_w * 3;
        for (i = 0; i < out_w; i++) {
            const int32_t *k = ax->k + (size_t)i * (size_t)ax->ksize;
            const uint8_t *p = s + (size_t)ax->first[i] * 3;
            const int n = ax->count[i];
            int64_t a0 = half, a1 = half, a2 = half;
            for (x = 0; x < n; x++) {
                a0 += (int64_t)p[3 * x + 0] * k[x];
                a1 += (int64_t)p[3 * x + 1] * k[x];
                a2 += (int64_t)p[3 * x + 2] * k[x];
            }
            d[3 * i + 0] = mms__rs_clip8(a0);
            d[3 * i + 1] = mms__rs_clip8(a1);
            d[3 * i + 2] = mms__rs_clip8(a2);
        }
    }
}

/* Resamples along y: source row r is src + (r - row0) * src_stride. acc holds row_bytes sums. */
static void mms__rs_vertical(const uint8_t *src, size_t src_stride, int row0, size_t row_bytes,
                             const struct mms__rs_axis *ax, int out_h, uint8_t *dst, int64_t *acc) {
    const int64_t half = (int64_t)1 << (MMS__RS_BITS - 1);
    int j, y;
    size_t b;
    for (j = 0; j < out_h; j++) {
        const int32_t *k = ax->k + (size_t)j * (size_t)ax->ksize;
        uint8_t *d = dst + (size_t)j * row_bytes;
        for (b = 0; b < row_bytes; b++) acc[b] = half;
        for (y = 0; y < ax->count[j]; y++) {
            const uint8_t *s = src + (size_t)(ax->first[j] + y - row0) * src_stride;
            const int64_t ky = k[y];
            for (b = 0; b < row_bytes; b++) acc[b] += (int64_t)s[b] * ky;
        }
        for (b = 0; b < row_bytes; b++) d[b] = mms__rs_clip8(acc[b]);
    }
}

MMS_API enum mms_status mms_image_resize_bilinear(const uint8_t *src, int src_w, int src_h, size_t src_stride,
                                                  uint8_t *dst, int dst_w, int dst_h) {
    struct mms__rs_axis ax, ay;
    uint8_t *tmp = NULL;
    int64_t *acc = NULL;
    enum mms_status st = MMS_OK;
    int need_x, need_y, vertical_first, y, y0 = 0, y1 = 0;
    size_t tmp_bytes = 0, acc_n;
    const size_t out_row = (size_t)dst_w * 3;
    if (!src || !dst) return mms_set_error(MMS_ERR_INVALID_ARG, "image resize: %s is NULL", !src ? "src" : "dst");
    if (src_w <= 0 || src_h <= 0 || dst_w <= 0 || dst_h <= 0)
        return mms_set_error(MMS_ERR_INVALID_ARG, "image resize: empty size (%dx%d to %dx%d)", src_w, src_h, dst_w, dst_h);
    if (src_stride == 0) src_stride = (size_t)src_w * 3;
    if (src_stride < (size_t)src_w * 3)
        return mms_set_error(MMS_ERR_INVALID_ARG, "image resize: stride %zu is shorter than a row of %d pixels", src_stride, src_w);
    need_x = dst_w != src_w;
    need_y = dst_h != src_h;
    if (!need_x && !need_y) {   /* PIL copies */
        for (y = 0; y < src_h; y++) memcpy(dst + (size_t)y * out_row, src + (size_t)y * src_stride, out_row);
        return MMS_OK;
    }
    /* Pillow 13 runs the vertical pass first when the height loses more than twice as many pixels
       as the width (older Pillow always went horizontal first; the two can differ by one level). */
    vertical_first = (int64_t)src_h - dst_h > 0 && (int64_t)src_h - dst_h > ((int64_t)src_w - dst_w) * 2;
    memset(&ax, 0, sizeof ax);
    memset(&ay, 0, sizeof ay);
    if (need_y && (st = mms__rs_axis_init(&ay, src_h, dst_h)) != MMS_OK) return st;
    if (need_x && (st = mms__rs_axis_init(&ax, src_w, dst_w)) != MMS_OK) { mms__rs_axis_free(&ay); return st; }
    if (need_x && need_y) {
        if (vertical_first) {
            tmp_bytes = (size_t)src_w * 3 * (size_t)dst_h;
        } else {   /* only the source rows the vertical filter reads */
            y0 = ay.first[0];
            y1 = ay.first[dst_h - 1] + ay.count[dst_h - 1];
            tmp_bytes = out_row * (size_t)(y1 - y0);
        }
        tmp = (uint8_t *)MMS_MALLOC(tmp_bytes);
    }
    acc_n = (size_t)(vertical_first ? src_w : dst_w) * 3;
    if (need_y) acc = (int64_t *)MMS_MALLOC(acc_n * sizeof(int64_t));
    if ((need_x && need_y && !tmp) || (need_y && !acc)) {
        st = mms_set_error(MMS_ERR_OOM, "image resize: no memory to resize %dx%d to %dx%d", src_w, src_h, dst_w, dst_h);
    } else if (!need_y) {
        mms__rs_horizontal(src, src_stride, 0, src_h, &ax, dst_w, dst);
    } else if (!need_x) {
        mms__rs_vertical(src, src_stride, 0, out_row, &ay, dst_h, dst, acc);
    } else if (vertical_first) {
        mms__rs_vertical(src, src_stride, 0, acc_n, &ay, dst_h, tmp, acc);
        mms__rs_horizontal(tmp, acc_n, 0, dst_h, &ax, dst_w, dst);
    } else {
        mms__rs_horizontal(src, src_stride, y0, y1, &ax, dst_w, tmp);
        mms__rs_vertical(tmp, out_row, y0, out_row, &ay, dst_h, dst, acc);
    }
    MMS_FREE(tmp);
    MMS_FREE(acc);
    mms__rs_axis_free(&ax);
    mms__rs_axis_free(&ay);
    return st;
}

/* -- canvas, fit and tiles ------------------------------------------------------------------------- */

/* The CLIP statistics of the 11B model's preprocessor_config.json. */
static const float mms__mllama_mean[3] = {0.48145466f, 0.4578275f, 0.40821073f};
static const float mms__mllama_std[3]  = {0.26862954f, 0.26130258f, 0.27577711f};

/* get_optimal_tiled_canvas: entries (rows, cols) for rows, cols in 1..max with rows * cols <= max,
   in that order. Scales are float64 quotients; equality is exact, as numpy compares them. */
static void mms__mllama_canvas(int w, int h, int tile, int max_tiles, int *out_rows, int *out_cols, int *out_id) {
    double best = 0.0;
    int have_up = 0, pass, r, c, id, best_area = 0;
    /* pass 0 picks the scale, pass 1 the entry of smallest area with exactly that scale */
    for (pass = 0; pass < 2; pass++) {
        id = 0;
        for (r = 1; r <= max_tiles; r++) {
            for (c = 1; c <= max_tiles; c++) {
                double sh, sw, s;
                if (r * c > max_tiles) continue;
                id++;
                sh = (double)tile * r / (double)h;
                sw = (double)tile * c / (double)w;
                s = sw > sh ? sh : sw;
                if (pass == 0) {
                    /* the smallest scale >= 1 if there is one, else the largest */
                    if (s >= 1.0) { if (!have_up || s < best) best = s; have_up = 1; }
                    else if (!have_up && (id == 1 || s > best)) best = s;
                } else if (s == best && (best_area == 0 || r * c < best_area)) {
                    best_area = r * c;
                    *out_rows = r;
                    *out_cols = c;
                    *out_id = id;
                }
            }
        }
    }
}

/* get_image_size_fit_to_canvas, with newer transformers' `or 1` for sides that floor to 0. */
static void mms__mllama_fit(int w, int h, int canvas_w, int canvas_h, int tile, int *new_w, int *new_h) {
    const int tw = MMS__MIN(MMS__MAX(w, tile), canvas_w);
    const int th = MMS__MIN(MMS__MAX(h, tile), canvas_h);
    const double sw = (double)tw / (double)w, sh = (double)th / (double)h;
    if (sw < sh) {
        double f = floor(mms__rs_round((double)h * sw));
        *new_w = tw;
        *new_h = f < 1.0 ? 1 : f > (double)th ? th : (int)f;
    } else {
        double f = floor(mms__rs_round((double)w * sh));
        *new_h = th;
        *new_w = f < 1.0 ? 1 : f > (double)tw ? tw : (int)f;
    }
}

MMS_API enum mms_status mms_mllama_preprocess_image(const struct mms_mllama_image_params *params, const uint8_t *rgb,
                                                    int width, int height, size_t stride, struct mms_mllama_image *out) {
    float lut[3][256];
    const float *mean, *std;
    uint8_t *resized = NULL;
    size_t tile_floats, n_floats;
    enum mms_status st;
    int S, i, c, t, rows = 1, cols = 1, id = 1, new_w, new_h, max_tiles;
    if (out) memset(out, 0, sizeof *out);
    if (!params || !rgb || !out)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mllama preprocess: %s is NULL", !params ? "params" : !rgb ? "rgb" : "out");
    if (width <= 0 || height <= 0)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mllama preprocess: empty image (%dx%d)", width, height);
    if (stride == 0) stride = (size_t)width * 3;
    if (stride < (size_t)width * 3)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mllama preprocess: stride %zu is shorter than a row of %d pixels", stride, width);
    if (params->max_num_tiles < 0 || params->max_num_tiles > 16)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mllama preprocess: max_num_tiles %d is outside 1..16 (0: 4)", params->max_num_tiles);
    max_tiles = params->max_num_tiles ? params->max_num_tiles : 4;   /* zeroed: the 11B model's values */
    S = params->image_size ? params->image_size : 560;
    /* the canvas side (up to 16 tiles) must fit an int */
    if (S < 1 || S > 0x7fffffff / 16)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mllama preprocess: image_size %d is out of range (0: 560)", S);
    mean = params->mean;
    std = params->std;
    if (mean[0] == 0.0f && mean[1] == 0.0f && mean[2] == 0.0f && std[0] == 0.0f && std[1] == 0.0f && std[2] == 0.0f) {
        mean = mms__mllama_mean;
        std = mms__mllama_std;
    }
    for (c = 0; c < 3; c++)
        if (!(std[c] != 0.0f) || !(std[c] - std[c] == 0.0f) || !(mean[c] - mean[c] == 0.0f))
            return mms_set_error(MMS_ERR_INVALID_ARG, "mllama preprocess: channel %d has mean %g, std %g (mean and std must be finite, std non-zero)",
                                 c, (double)mean[c], (double)std[c]);
    tile_floats = (size_t)3 * (size_t)S * (size_t)S;
    if ((size_t)S > ((size_t)-1 / sizeof(float)) / 48 / (size_t)S)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mllama preprocess: image_size %d is too large for memory", S);
    n_floats = tile_floats * (size_t)max_tiles;

    mms__mllama_canvas(width, height, S, max_tiles, &rows, &cols, &id);
    mms__mllama_fit(width, height, S * cols, S * rows, S, &new_w, &new_h);

    resized = (uint8_t *)MMS_MALLOC((size_t)new_w * (size_t)new_h * 3);
    out->pixels = (float *)MMS_MALLOC(n_floats * sizeof(float));
    if (!resized || !out->pixels) {
        MMS_FREE(resized);
        MMS_FREE(out->pixels);
        out->pixels = NULL;
        return mms_set_error(MMS_ERR_OOM, "mllama preprocess: no memory for %d tiles of %d pixels", max_tiles, S);
    }
    st = mms_image_resize_bilinear(rgb, width, height, stride, resized, new_w, new_h);
    if (st != MMS_OK) {
        MMS_FREE(resized);
        MMS_FREE(out->pixels);
        out->pixels = NULL;
        return st;
    }

    /* rescale: uint8 to float64 times 1/255, stored as float32; normalise: float32 (x - mean) / std.
       A table per channel gives exactly those roundings; volatile keeps them in float. */
    for (c = 0; c < 3; c++)
        for (i = 0; i < 256; i++) {
            volatile float x = (float)((double)i * (1.0 / 255.0));
            volatile float d = x - mean[c];
            lut[c][i] = d / std[c];
        }

    /* tiles in row-major order; padding (bottom, right) is black, i.e. lut[c][0] */
    for (t = 0; t < rows * cols; t++) {
        const int ty = (t / cols) * S, tx = (t % cols) * S;
        for (c = 0; c < 3; c++) {
            float *plane = out->pixels + (size_t)t * tile_floats + (size_t)c * (size_t)S * (size_t)S;
            int y, x;
            for (y = 0; y < S; y++) {
                float *d = plane + (size_t)y * (size_t)S;
                const int cy = ty + y;
                const int nx = cy < new_h ? MMS__MAX(MMS__MIN(new_w - tx, S), 0) : 0;   /* image pixels on this row */
                x = 0;
                if (nx > 0) {
                    const uint8_t *s = resized + ((size_t)cy * (size_t)new_w + (size_t)tx) * 3 + (size_t)c;
                    for (x = 0; x < nx; x++) d[x] = lut[c][s[3 * x]];
                }
                for (; x < S; x++) d[x] = lut[c][0];
            }
        }
    }
    /* unused slots are zeros, not black */
    if (rows * cols < max_tiles)
        memset(out->pixels + (size_t)rows * (size_t)cols * tile_floats, 0,
               (size_t)(max_tiles - rows * cols) * tile_floats * sizeof(float));
    MMS_FREE(resized);

    out->max_num_tiles = max_tiles;
    out->image_size = S;
    out->tiles_rows = rows;
    out->tiles_cols = cols;
    out->n_tiles = rows * cols;
    out->aspect_ratio_id = id;
    for (t = 0; t < 16; t++) out->aspect_ratio_mask[t] = t == 0 || t < rows * cols;
    out->resized_width = new_w;
    out->resized_height = new_h;
    return MMS_OK;
}

MMS_API void mms_mllama_image_free(struct mms_mllama_image *image) {
    if (!image) return;
    MMS_FREE(image->pixels);
    memset(image, 0, sizeof *image);
}

MMS_API enum mms_status mms_image_rgba_over_white(const uint8_t *rgba, int w, int h, size_t stride, uint8_t *rgb) {
    int x, y, k;
    if (!rgba || !rgb || w < 1 || h < 1 || (stride && stride < (size_t)w * 4))
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_image_rgba_over_white: pixels and a %dx%d size (stride %zu) are required", w, h, stride);
    if (!stride) stride = (size_t)w * 4;
    for (y = 0; y < h; y++) {
        const uint8_t *s = rgba + (size_t)y * stride;
        uint8_t *d = rgb + (size_t)y * (size_t)w * 3;
        for (x = 0; x < w; x++, s += 4, d += 3) {
            const unsigned a = s[3];
            for (k = 0; k < 3; k++) d[k] = (uint8_t)((2u * (s[k] * a + 255u * (255u - a)) + 255u) / 510u);   /* x / 255 rounded half up */
        }
    }
    return MMS_OK;
}
