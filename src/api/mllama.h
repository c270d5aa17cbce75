/* >>api-mllama ------------------------------------------------------------------------------------
   Llama 3.2 Vision ("mllama"). Numerics follow Hugging Face transformers' MllamaForConditionalGeneration
   in float32 (eager attention, the PIL image processor) with Meta's rule for the vision encoder's
   intermediate taps (the inputs of the listed layers, as in Meta's reference and transformers up to
   4.54; manual section 13). */

/* -- image preprocessing ----------------------------------------------------------------------------
   From RGB8 pixels to the model's input, as the PIL image processor does it: choose the tile canvas
   (rows x cols of image_size tiles, among the aspect ratios with rows * cols <= max_num_tiles,
   listed for w in 1..max, h in 1..max with w*h <= max and read as (rows, cols)), fit the image into
   it without upscaling unless both sides are smaller than a tile, resize with PIL's antialiased
   bilinear filter (bit-exact), pad with black at the bottom and right, rescale by 1/255, normalise
   per channel, and cut row-major tiles into slots; unused slots are exactly 0. */

struct mms_mllama_image_params {   /* zeroed: the 11B model's values */
    int   image_size;      /* tile side in pixels (0: 560) */
    int   max_num_tiles;   /* 1..16 (0: 4) */
    float mean[3], std[3]; /* per channel (all zero: the CLIP values of the 11B model) */
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
   MMS_ERR_INVALID_ARG for an empty image or bad parameters (negative sizes, max_num_tiles above 16). */
MMS_API enum mms_status mms_mllama_preprocess_image(const struct mms_mllama_image_params *params, const uint8_t *rgb,
                                                    int width, int height, size_t stride, struct mms_mllama_image *out);
MMS_API void            mms_mllama_image_free(struct mms_mllama_image *image);

/* Pillow's Image.resize(..., BILINEAR) on RGB8, bit for bit (antialiased when shrinking), as in
   Pillow 13, which may run the vertical pass first; Pillow 12 and older can differ by one level on
   some tall images. */
MMS_API enum mms_status mms_image_resize_bilinear(const uint8_t *src, int src_w, int src_h, size_t src_stride,
                                                  uint8_t *dst, int dst_w, int dst_h);

/* RGBA8 to RGB8 over a white background, as the processor's convert_to_rgb (PIL's alpha_composite
   onto opaque white): each channel becomes round((c * a + 255 * (255 - a)) / 255). rgba rows are
   stride bytes apart (0: width * 4); rgb is width * height * 3 bytes. */
MMS_API enum mms_status mms_image_rgba_over_white(const uint8_t *rgba, int width, int height, size_t stride, uint8_t *rgb);

/* Picture files (JPEG, PNG, BMP, GIF's first frame, what stb_image reads) as RGB8, transparent
   pixels over white: there when the program includes stb_image.h before the implementation
       #include <stb/stb_image.h>          (Debian's libstb-dev; link -lstb)
       #define MMSCHED_IMPLEMENTATION
       #include "mmsched.h"
   and otherwise NULL with MMS_ERR_UNSUPPORTED saying so. The size is read from the header first:
   a picture of more than max_pixels pixels (0: 50 million, about 350 MB while decoding) is refused
   before it is decoded. mms_image_decode reads a file's bytes from memory (a picture sent over the
   network). NULL + last error naming the file and what is wrong (no such file, a folder, not a
   picture, too large, damaged). Free the pixels with mms_image_free. */
MMS_API uint8_t *mms_image_load(const char *path, long max_pixels, int *width, int *height);
MMS_API uint8_t *mms_image_decode(const void *data, size_t size, long max_pixels, int *width, int *height);
MMS_API void     mms_image_free(const uint8_t *rgb);

/* -- the model ----------------------------------------------------------------------------------------
   Loaded from Ollama's GGUF layouts: the single file (text and vision together) or the older pair
   of a text file and a vision projector file. Every hyper-parameter comes from the metadata, so a
   tiny test model and the 11B model run the same code. Weights are placed on the backends the
   caller chooses: text layers on `gpu` counted from the last (n_gpu_layers, like llama.cpp), the
   rest and the token embeddings on `cpu`; the vision tower on either, independently. Host weights
   are used in place from the mapped file (no copy). */

struct mms_mllama_hparams {
    /* text */
    int   n_vocab;          /* logits rows */
    int   n_embd_rows;      /* rows of the token embedding table (vocabulary + 8 for the image tokens) */
    int   n_ctx_train;
    int   n_embd, n_ff, n_head, n_head_kv, head_dim, n_layer;
    float rope_freq_base, rms_eps;
    int   n_cross;
    const int *cross_layers;        /* indices of the cross-attention layers, ascending */
    int   image_token_id;
    /* vision (zero when the model has no vision tower) */
    int   v_n_layer, v_n_global, v_n_embd, v_n_ff, v_n_head;
    int   v_image_size, v_patch_size, v_max_tiles, v_channels;
    float v_eps;
    int   v_n_taps;
    const int *v_taps;              /* intermediate layers whose inputs are tapped (Meta's rule) */
    float image_mean[3], image_std[3];
    int   v_n_patches;              /* per tile: (image_size / patch_size)^2 */
    int   v_n_tokens;               /* per tile: patches + the class token */
    int   v_n_tokens_padded;        /* rounded up to a multiple of 8 */
    int   v_output_dim;             /* v_n_embd * (1 + v_n_taps) */
};

struct mms_mllama_load_params {
    /* The model: a GGUF file (or the text part of the two-file layout), a Hugging Face checkpoint
       folder, or "ollama:NAME[:TAG]", a model in Ollama's store (mms_ollama_resolve: its model blob,
       and its projector blob as mmproj_path, which must then be NULL). */
    const char   *path;
    const char   *mmproj_path;      /* the projector of the two-file layout, or NULL */
    mms_backend_t cpu;              /* required: host backend */
    mms_backend_t gpu;              /* optional: a second backend for offloaded layers */
    int           n_gpu_layers;     /* text layers on gpu, counted from the last; >= n_layer also moves the output head */
    bool          vision_on_gpu;    /* the vision tower on gpu (else cpu) */
    bool          text_only;        /* do not load the vision tower */
    /* Called as weights are read, with the fraction done (0..1); return false to stop the load
       (MMS_ABORTED). When set, mapped host weights are read through once (page by page) so that the
       load really happens here rather than during the first decode. */
    bool        (*progress)(float fraction, void *user_data);
    void         *progress_user_data;
    /* By default the Q4_0, Q4_K, Q5_K, Q6_K and Q8_0 matrices the CPU backend multiplies by are copied at load into
       a CPU_REPACK buffer (mms_backend_cpu_repack_buffer_type: the kernels' interleaved layout;
       decode 1.2-3.4x as fast on a 2-core Xeon, see the README); the file's pages of those weights are then
       released from the process's memory (madvise; Linux), so resident memory grows by the Q4_K
       copy's extra 2.8% only (Q5_K's 2.3%). true: keep every host weight where the file is mapped (no copy). */
    bool          no_cpu_repack;
};

struct mms_mllama_model;

MMS_API struct mms_mllama_model *mms_mllama_model_load(const struct mms_mllama_load_params *params);  /* NULL + last error */
MMS_API void                     mms_mllama_model_free(struct mms_mllama_model *model);
MMS_API const struct mms_mllama_hparams *mms_mllama_model_get_hparams(const struct mms_mllama_model *model);
/* The vocabulary (tokenizer, chat template) the model's file carries, read with the weights: a
   GGUF's tokenizer.ggml.* keys, a checkpoint folder's tokenizer.json. NULL when the file has none
   (a model written with random weights); a tokenizer the file has but that does not load fails
   the model's load. Owned by the model. */
MMS_API const struct mms_vocab *mms_mllama_model_get_vocab(const struct mms_mllama_model *model);
/* A Hugging Face checkpoint folder as a GGUF in memory, in the single-file layout with mmsched's
   keys (the matrices in the checkpoint's type, the small tensors f32, q/k rows as Ollama's
   converter orders them and marked so, the vision gates transformed, the tokenizer from
   tokenizer.json): what tools such as build/quantize read. Close it with mms_gguf_close.
   NULL + last error. */
MMS_API struct mms_gguf *mms_mllama_folder_to_gguf(const char *dir);
/* The shapes of Llama 3.2 11B Vision (Meta's configuration: 40 text layers, 8 of them cross-attention,
   32 + 8 vision layers at 560-pixel tiles), and of 90B Vision (the same vision tower;
   text 8192 wide, 100 layers of which 20 cross-attention at 3, 8, ..., 98, 64 heads, 8 KV heads,
   feed-forward 28672). */
MMS_API void mms_mllama_hparams_11b(struct mms_mllama_hparams *out);
MMS_API void mms_mllama_hparams_90b(struct mms_mllama_hparams *out);
/* A model with every weight's shape but no data (placed at addresses that are never read), for
   planning memory: a context made from it reserves its graphs and reports buffer sizes, and
   refuses to compute. */
MMS_API struct mms_mllama_model *mms_mllama_model_shapes_only(const struct mms_mllama_hparams *hparams, mms_backend_t cpu,
                                                              enum mms_type weight_type);

/* -- prompts --------------------------------------------------------------------------------------
   A conversation as the prompt the runtime decodes: mms_chat_apply_template (section 12) with the
   layout for several pictures in one message. A message of n > 1 pictures gets the first
   <|image|> before its text (the template's), then after the text a line "Picture 1." and, for
   every further picture k, "<|image|>Picture k." on a line of its own: a text row sees only the
   pictures of the last run of <|image|> tokens before it, so each line is where the question
   meets its picture, and consecutive <|image|> tokens would be seen together, in no order (the
   answer itself sees the last picture alone). A message of one picture is as the template writes
   it. build/mllama, build/batch and the serving engine prompt with it. Returns like
   mms_chat_apply_template; MMS_ERR_INVALID_ARG also for "<|image|>" in a message's text (its
   pictures are its n_images). Tokenize the result with parse_special, without add_bos. */
MMS_API int mms_mllama_chat_prompt(const struct mms_chat_message *messages, int n_messages, bool add_generation_prompt,
                                   const char *date, char *buf, size_t cap);

/* -- the runtime ------------------------------------------------------------------------------------
   A context runs the vision encoder and the text model on one scheduler for n_seq sequences
   (conversations), each with its own tokens, positions, pictures and n_ctx KV-cache slots. The
   functions on a sequence are mms_mllama_seq_* and take its index (0..n_seq-1) after the context.
   Everything is reserved when the context is made (the KV cache, max_images picture slots per
   sequence, the worst-case graphs: a picture's encode, a batch of n_batch tokens over every
   sequence's slots), so a model that does not fit fails then, saying how much memory it needed
   where.

   Pictures: mms_mllama_seq_add_image gives a sequence its next picture. Encoded pictures are
   kept in the context's image store, found by their model input (the preprocessed pixels and the
   tile layout: a hash, then the input itself compared, so two pictures are never confused), under
   a budget of bytes: the least recently used pictures that no sequence holds are evicted, and a
   picture that does not fit is encoded for its sequence and not kept. Adding a stored picture
   costs no encode. The picture's cross-attention keys and values are then copied once into the
   sequence's own picture slots, where every decode step reads all of its pictures in place.

   Tokens: mms_mllama_decode takes a batch of tokens of any sequences (a prompt of one, single
   tokens of others, in any order; a sequence's tokens take its next positions in batch order) and
   runs them as one graph, so the weights are read once for all rows; each row attends only to its
   own sequence's tokens and pictures, so a sequence's logits are those of the same conversation
   run alone. The k-th <|image|> token of a sequence stands for its k-th picture; each text token
   attends to the pictures of the most recent group of consecutive <|image|> tokens before it
   (transformers' rule); tokens before the first <|image|> token see a uniform mix of all the
   sequence's pictures and their MLP branch is zeroed. Without any picture the cross layers are
   skipped. */

struct mms_mllama_context_params {   /* zeroed: the defaults; negative values are refused */
    int    n_ctx;          /* tokens each sequence's KV cache holds (0: 2048, at most the training context) */
    int    n_batch;        /* most tokens per decode call, all sequences together (0: 512; at most n_ctx * n_seq) */
    int    max_images;     /* pictures per sequence (0: 2) */
    int    n_seq;          /* sequences (conversations), 1..4096 (0: 1) */
    size_t image_store;    /* bytes of encoded pictures the store keeps (0: room for max_images * n_seq + 2 pictures of the
                              model's most tiles) */
    bool   rebuild_graphs; /* build every decode graph anew; false: a batch of the last batch's shape computes its graph
                              again (the manual, "Decode graphs"); the logits are the same either way */
};

struct mms_mllama_context;

MMS_API struct mms_mllama_context *mms_mllama_context_new(struct mms_mllama_model *model, const struct mms_mllama_context_params *params);
MMS_API void                       mms_mllama_context_free(struct mms_mllama_context *ctx);
MMS_API mms_backend_sched_t        mms_mllama_context_get_sched(struct mms_mllama_context *ctx);
/* Memory per backend after the reservation (KV cache, picture slots, compute) and the image store. */
MMS_API void                       mms_mllama_context_print_memory(struct mms_mllama_context *ctx, FILE *out);

/* The model's preprocessing parameters (for mms_mllama_preprocess_image). */
MMS_API struct mms_mllama_image_params mms_mllama_model_image_params(const struct mms_mllama_model *model);
/* Run the vision encoder alone; copies out the encoder output ([v_output_dim, tokens, tiles]) and
   the projected states ([n_embd, tokens * tiles]) when the pointers are not NULL. */
MMS_API enum mms_status mms_mllama_encode_image(struct mms_mllama_context *ctx, const struct mms_mllama_image *image,
                                                float *vision_out, float *projected);
MMS_API int             mms_mllama_get_n_encodes(const struct mms_mllama_context *ctx);      /* vision encodes run so far */

/* -- sequences --
   add_image: the sequence's next picture (preprocessed with the model's parameters), from the
   store or encoded. MMS_ERR_INVALID_ARG when it has max_images already. add_image_rgb: the same
   from RGB8 pixels (rows stride bytes apart, 0: width * 3), preprocessed with the model's tile
   size, tile count, mean and std.
   clear: forget its tokens and pictures (the store keeps what it kept). trim: keep its first
   n_keep tokens (0..n_past) and all its pictures; the next <|image|> token decoded stands for
   the first picture whose token was trimmed. Both leave the other sequences alone.
   A picture added after some of its tokens were decoded does not change them; a sequence whose
   pictures change is decoded again from its first token for the numbers of a fresh run (tokens
   before the first <|image|> see every picture). MMS_ERR_INVALID_ARG for a seq out of range. */
MMS_API enum mms_status mms_mllama_seq_add_image(struct mms_mllama_context *ctx, int seq, const struct mms_mllama_image *image);
MMS_API enum mms_status mms_mllama_seq_add_image_rgb(struct mms_mllama_context *ctx, int seq, const uint8_t *rgb, int width, int height, size_t stride);
MMS_API int             mms_mllama_seq_get_n_past(const struct mms_mllama_context *ctx, int seq);     /* tokens decoded; 0 for a bad seq */
MMS_API int             mms_mllama_seq_get_n_images(const struct mms_mllama_context *ctx, int seq);   /* pictures added */
MMS_API enum mms_status mms_mllama_seq_clear(struct mms_mllama_context *ctx, int seq);
MMS_API enum mms_status mms_mllama_seq_trim(struct mms_mllama_context *ctx, int seq, int n_keep);

/* -- decoding --
   One batch of tokens of any sequences (at most n_batch). MMS_ERR_INVALID_ARG for a sequence out
   of range or one whose tokens would pass n_ctx, MMS_ERR_STATE for more <|image|> tokens in a
   sequence than pictures added to it; then no sequence changed. One sequence's tokens:
       struct mms_mllama_batch b = { n, tokens, NULL, NULL };   // all sequence 0
       mms_mllama_decode(ctx, &b);
       logits = mms_mllama_get_logits(ctx, 0);                   // its last row's */
struct mms_mllama_batch {
    int            n_tokens;
    const int32_t *tokens;
    const int32_t *seq;          /* the sequence of each token (NULL: all sequence 0) */
    const bool    *want;         /* rows whose logits are wanted (NULL: the last row of each sequence in the batch;
                                    none: the batch only fills the KV cache, as a prompt's first chunks) */
};
MMS_API enum mms_status mms_mllama_decode(struct mms_mllama_context *ctx, const struct mms_mllama_batch *batch);
MMS_API int             mms_mllama_get_n_logits(const struct mms_mllama_context *ctx);
MMS_API const float    *mms_mllama_get_logits(const struct mms_mllama_context *ctx, int i);   /* n_vocab floats, rows in batch order of those asked */

/* -- reports --
   Where the time and the memory went, since the context was made or the timings were reset.
   Decode calls with one token per sequence count as generation, the others as prompt; per
   sequence, mms_mllama_seq_get_timings. */
struct mms_mllama_timings {
    double load_ms, context_ms;           /* mms_mllama_model_load, mms_mllama_context_new */
    double preprocess_ms;                 /* mms_mllama_seq_add_image_rgb's preprocessing */
    int    n_preprocessed;
    double encode_ms, cross_kv_ms;        /* vision encoder + projector; then the cross K/V of each layer */
    int    n_encodes;
    double prompt_ms, gen_ms;
    int    n_prompt_tokens, n_gen_tokens;
    double graph_ms, alloc_ms;            /* host time within prompt_ms + gen_ms: building the text graphs, the scheduler allocating them */
    int    n_decode_builds;               /* decode graphs built; the other decode calls computed the last one again */
    int    n_backends;                    /* backends the context uses: mms_mllama_get_memory(ctx, 0..n_backends-1) */
    int    n_seq;                         /* sequences: mms_mllama_seq_get_timings(ctx, 0..n_seq-1) */
};
MMS_API void mms_mllama_get_timings(const struct mms_mllama_context *ctx, struct mms_mllama_timings *out);
/* Memory on backend i (0: the host, 1: the offload backend when there is one): weights, KV cache,
   the sequences' picture slots (n_seq * max_images pictures' cross-attention keys and values, all
   tiles), compute memory (planned at creation; grows only if a graph needs more) and the image
   store's pictures (keys and values; the host also their pixels), now and at its largest.
   MMS_ERR_INVALID_ARG for an i out of range. */
struct mms_mllama_memory {
    char   name[32];
    size_t weights, kv_cache, pictures, compute, image_store, image_store_peak;
    size_t peak;               /* weights + kv_cache + pictures + compute + image_store_peak, bytes */
    size_t weights_repacked;   /* the part of weights copied into a CPU_REPACK buffer (the rest: mapped or own buffers) */
};
MMS_API enum mms_status mms_mllama_get_memory(const struct mms_mllama_context *ctx, int i, struct mms_mllama_memory *out);
/* The image store on all backends: bytes held now and at most, its budget, the pictures it holds
   (held: by some sequence, so not evicted), and since the context was made, pictures found in it,
   encoded, evicted and encoded without being kept (no room under the budget). */
struct mms_mllama_image_store {
    size_t  budget, bytes, peak;
    int     n_pictures, n_held;
    int64_t n_found, n_encoded, n_evicted, n_not_kept;
};
MMS_API void mms_mllama_get_image_store(const struct mms_mllama_context *ctx, struct mms_mllama_image_store *out);
MMS_API void mms_mllama_reset_timings(struct mms_mllama_context *ctx);   /* keeps load, context and memory */
/* One sequence's share since it was last cleared (or the timings reset): its rows, and the time of
   the decode calls it took part in (a call's whole time counts for each of its sequences: the
   latency each saw; a call where the sequence had one row counts as generation). kv_cache: the
   bytes of its own KV slots and picture slots on all backends. MMS_ERR_INVALID_ARG for a seq out
   of range. */
struct mms_mllama_seq_timings {
    double prompt_ms, gen_ms;
    int    n_prompt_tokens, n_gen_tokens;
    int    n_calls;                       /* decode calls it took part in */
    size_t kv_cache;
};
MMS_API enum mms_status mms_mllama_seq_get_timings(const struct mms_mllama_context *ctx, int seq, struct mms_mllama_seq_timings *out);
/* The timings as a few lines of text: each phase with its time and rate, memory per backend, the
   image store, and with several sequences a line for each that decoded since it was cleared. */
MMS_API void mms_mllama_print_timings(const struct mms_mllama_context *ctx, FILE *out);
