/* >>mllama-image-file =============================================================================
   Picture files as RGB8 through stb_image, when the program includes it before the implementation:
   stb_image.h's include guard (STBI_INCLUDE_STB_IMAGE_H) turns this part on, and its functions come
   from the program (Debian's libstb, or the program's own STB_IMAGE_IMPLEMENTATION). The size is
   read from the header before anything is decoded; transparent pixels are laid over white, as the
   processor's convert_to_rgb does. */

#define MMS__IMAGE_MAX_PIXELS 50000000L

#ifdef STBI_INCLUDE_STB_IMAGE_H

/* Checks the header's size against max_pixels, decodes as RGBA and composites onto white. */
static uint8_t *mms__image_rgb(const char *name, int w, int h, long max_pixels, stbi_uc *(*decode)(void *, int *, int *), void *src,
                               int *width, int *height) {
    stbi_uc *rgba;
    uint8_t *rgb;
    if (max_pixels <= 0) max_pixels = MMS__IMAGE_MAX_PIXELS;
    if (w < 1 || h < 1 || (double)w * (double)h > (double)max_pixels) {
        mms_set_error(MMS_ERR_INVALID_ARG, "%s: %d x %d pixels is more than %ld, the most allowed", name, w, h, max_pixels);
        return NULL;
    }
    if (!(rgba = decode(src, width, height))) {
        mms_set_error(MMS_ERR_FORMAT, "%s: cannot decode the %d x %d picture, the file is damaged or cut short (stb_image: %s)", name, w, h,
                      stbi_failure_reason());
        return NULL;
    }
    if (*width != w || *height != h || !(rgb = (uint8_t *)MMS_MALLOC((size_t)w * (size_t)h * 3))) {
        stbi_image_free(rgba);
        mms_set_error(MMS_ERR_OOM, "%s: out of host memory for a %d x %d picture", name, w, h);
        return NULL;
    }
    mms_image_rgba_over_white(rgba, w, h, 0, rgb);
    stbi_image_free(rgba);
    return rgb;
}

static stbi_uc *mms__image_decode_file(void *f, int *w, int *h) { int n; return stbi_load_from_file((FILE *)f, w, h, &n, 4); }

struct mms__image_bytes { const stbi_uc *data; int size; };
static stbi_uc *mms__image_decode_bytes(void *b, int *w, int *h) {
    const struct mms__image_bytes *m = (const struct mms__image_bytes *)b;
    int n;
    return stbi_load_from_memory(m->data, m->size, w, h, &n, 4);
}

MMS_API uint8_t *mms_image_load(const char *path, long max_pixels, int *width, int *height) {
    FILE *f;
    uint8_t *rgb;
    int w, h, n;
    if (!path || !width || !height) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_image_load: path, width and height are required"); return NULL; }
    if (mms__is_dir(path)) { mms_set_error(MMS_ERR_IO, "%s: is a directory, not a picture", path); return NULL; }
    if (!(f = mms__fopen(path, "rb"))) { mms_set_error(MMS_ERR_IO, "%s: %s", path, strerror(errno)); return NULL; }
    if (!stbi_info_from_file(f, &w, &h, &n)) {
        fclose(f);
        mms_set_error(MMS_ERR_FORMAT, "%s: not a picture this program reads (JPEG, PNG, BMP or GIF): %s", path, stbi_failure_reason());
        return NULL;
    }
    rgb = mms__image_rgb(path, w, h, max_pixels, mms__image_decode_file, f, width, height);
    fclose(f);
    return rgb;
}

MMS_API uint8_t *mms_image_decode(const void *data, size_t size, long max_pixels, int *width, int *height) {
    struct mms__image_bytes b;
    int w, h, n;
    if (!data || !width || !height) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_image_decode: data, width and height are required"); return NULL; }
    if (size == 0 || size > INT_MAX) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_image_decode: %zu bytes is no picture stb_image reads", size); return NULL; }
    b.data = (const stbi_uc *)data;
    b.size = (int)size;
    if (!stbi_info_from_memory(b.data, b.size, &w, &h, &n)) {
        mms_set_error(MMS_ERR_FORMAT, "the bytes are not a picture this program reads (JPEG, PNG, BMP or GIF): %s", stbi_failure_reason());
        return NULL;
    }
    return mms__image_rgb("the picture", w, h, max_pixels, mms__image_decode_bytes, &b, width, height);
}

#else

MMS_API uint8_t *mms_image_load(const char *path, long max_pixels, int *width, int *height) {
    MMS__UNUSED(max_pixels); MMS__UNUSED(width); MMS__UNUSED(height);
    mms_set_error(MMS_ERR_UNSUPPORTED, "mms_image_load(%s): this program's mmsched.h implementation was compiled without stb_image: include "
                  "<stb/stb_image.h> before it (and link -lstb)", path ? path : "NULL");
    return NULL;
}

MMS_API uint8_t *mms_image_decode(const void *data, size_t size, long max_pixels, int *width, int *height) {
    MMS__UNUSED(data); MMS__UNUSED(size); MMS__UNUSED(max_pixels); MMS__UNUSED(width); MMS__UNUSED(height);
    mms_set_error(MMS_ERR_UNSUPPORTED, "mms_image_decode: this program's mmsched.h implementation was compiled without stb_image: include "
                  "<stb/stb_image.h> before it (and link -lstb)");
    return NULL;
}

#endif

MMS_API void mms_image_free(const uint8_t *rgb) { MMS_FREE((void *)(uintptr_t)rgb); }
