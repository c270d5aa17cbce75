/* >>api-mllama ------------------------------------------------------------------------------------
   Llama 3.2 Vision ("mllama"). Numerics follow Hugging Face transformers' MllamaForConditionalGeneration
   in float32 (eager attention, the PIL image processor) with Meta's rule for the vision encoder's
   intermediate taps; shared/docs/mllama-spec.md is the specification. */

/* -- image preprocessing ----------------------------------------------------------------------------
   From RGB8 pixels to the model's input, as the PIL image processor does it: choose the tile canvas
   (rows x cols of image_size tiles, among the aspect ratios with rows * cols <= max_num_tiles,
   listed for w in 1..max, h in 1..max with w*h <= max and read as (rows, cols)), fit the image into
   it without upscaling unless both sides are smaller than a tile, resize with PIL's antialiased
   bilinear filter (bit-exact), pad with black at the bottom and right, rescale by 1/255, normalise
   per channel, and cut row-major tiles into slots; unused slots are exactly 0. */

struct mms_mllama_image_params {
    int   image_size;      /* tile side in pixels (560 for the 11B model) */
    int   max_num_tiles;   /* 4 for the 11B model */
    float mean[3], std[3]; /* per channel; zero-initialised means the CLIP values of the 11B model */
};

struct mms_mllama_image {
    float *pixels;             /* [max_num_tiles][3][image_size][image_size], row-major tiles */
    int    max_num_tiles, image_size;
    int    tiles_rows, tiles_cols, n_tiles;
    int    aspect_ratio_id;    /* 1 + index of (rows, cols) in the supported list */
    int    aspect_ratio_mask[16];  /* 1 for the first n_tiles slots, else 0 (slot 0 always 1) */
    int    resized_width, resized_height;   /* the image inside its canvas, before padding */
};

/* rgb: height rows of width pixels, 3 bytes each, rows stride bytes apart (0: width * 3).
   MMS_ERR_INVALID_ARG for an empty image or bad parameters (max_num_tiles 1..16). */
MMS_API enum mms_status mms_mllama_preprocess_image(const struct mms_mllama_image_params *params, const uint8_t *rgb,
                                                    int width, int height, size_t stride, struct mms_mllama_image *out);
MMS_API void            mms_mllama_image_free(struct mms_mllama_image *image);

/* PIL's Image.resize(..., BILINEAR) on RGB8, bit for bit (antialiased when shrinking). */
MMS_API enum mms_status mms_image_resize_bilinear(const uint8_t *src, int src_w, int src_h, size_t src_stride,
                                                  uint8_t *dst, int dst_w, int dst_h);
