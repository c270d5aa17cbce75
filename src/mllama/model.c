/* >>mllama-model ==================================================================================
   Loading Llama 3.2 Vision: hyper-parameters from GGUF metadata, weights by name with their shapes
   checked, placement on the caller's backends. Ollama's single-file layout names the vision MLP
   ffn_up (fc1) / ffn_down (fc2) and its norms attn_norm / ffn_norm; the older projector file names
   them ln1 / ln2 and swaps ffn_up and ffn_down. Gates of the vision tower are stored already
   transformed (tanh(g), and 1 - tanh(g) for the positional gate); the text gates are raw.
   Ollama's converter also permutes the rows of the cross-attention and vision q/k projections
   within each head (its RoPE rule, applied by name; the q/k norms stay as they are): such rows are
   put back in Hugging Face order when the weights are placed (mms__mllama_qk_rows says which files
   hold them so). */

struct mms__mllama_vlayer {
    struct mms_tensor *ln1_w, *ln1_b, *wq, *wk, *wv, *wo, *ln2_w, *ln2_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
    struct mms_tensor *gate_attn, *gate_ffn;    /* global layers only: tanh(gate) */
};

struct mms__mllama_tlayer {
    bool   cross;
    int    backend;                             /* 0: cpu, 1: gpu */
    struct mms_tensor *attn_norm, *wq, *wk, *wv, *wo, *ffn_norm, *ffn_gate, *ffn_up, *ffn_down;
    struct mms_tensor *q_norm, *k_norm, *gate_attn, *gate_mlp;   /* cross layers only; gates raw */
};

/* The checkpoint folder reader (src/mllama/hf_folder.c, the part after this one). */
struct mms__hf;
enum mms__hf_xform { MMS__HF_AS_IS = 0, MMS__HF_TANH, MMS__HF_ONE_MINUS_TANH };
static bool            mms__hf_is_folder(const char *path);
static struct mms__hf *mms__hf_open(const char *dir);
static void            mms__hf_close(struct mms__hf *hf);
static enum mms_status mms__hf_hparams(const struct mms__hf *hf, struct mms_mllama_hparams *hp, int **cross, int **taps, float **rope_freqs);
static bool            mms__hf_find(struct mms__hf *hf, const char *name, struct mms_safetensors_info *info, enum mms__hf_xform *x,
                                    const struct mms_safetensors **shard);
static const char     *mms__hf_dir(const struct mms__hf *hf);
static enum mms_status mms__hf_check_all_used(const struct mms__hf *hf);

/* Where a weight's bytes are, kept by the loader until the weight is placed. */
struct mms__wsource {
    struct mms_tensor     *t;
    const void            *region;     /* the GGUF file or safetensors shard it is mapped from; NULL: loader memory */
    const void            *data;       /* in the region's mapping (or the loader's memory) */
    enum mms_type          src_type;   /* the type of data: t's, or one converted to t's f32 when placed */
    enum mms__hf_xform     xform;      /* a gate derived from the checkpoint's raw value */
    int                    backend;    /* index into the model's backends */
    int                    row_heads;  /* > 0: rows permuted within this many heads (Ollama's q/k rule), put back when placed */
};

struct mms_mllama_model {
    struct mms_mllama_hparams  hp;
    int                       *cross_layers, *taps;
    bool                      *is_cross;                 /* per text layer */
    struct mms_gguf           *files[2];
    int                        n_files;
    mms_backend_t              backends[2];              /* [0] cpu, [1] gpu (cpu again without one) */
    struct mms_context        *wctx[2];                  /* weight tensors by backend */
    mms_backend_buffer_t      *bufs;                     /* the weights' buffers: mapped regions, copies */
    int                        n_bufs, cap_bufs;
    bool                       shapes_only;
    bool                       cpu_repack;               /* Q4_0/Q4_K/Q6_K/Q8_0 matrices on the CPU backend in a CPU_REPACK buffer */
    int                        vision_backend, output_backend;
    int64_t                    load_us;
    struct mms__wsource       *sources;                  /* every weight read from a file, in declaration order */
    int                        n_sources, cap_sources;
    struct mms__hf            *hf;                       /* a checkpoint folder, or NULL */
    float                     *rope_freqs_data;          /* its llama3 divisors, computed from config.json */
    bool                       rope_neox;                /* self-attention q/k in Hugging Face's rotate-half order */
    struct mms_vocab          *vocab;                    /* the file's tokenizer, or NULL when it has none */

    struct mms_tensor *token_embd, *output_norm, *output, *rope_freqs;
    struct mms__mllama_tlayer *layers;

    bool               has_vision;
    struct mms_tensor *patch_embd, *class_embd, *pos_embd, *pos_gate, *tile_pos_embd, *tile_pos_gate;
    struct mms_tensor *pre_tile_embd, *pre_tile_gate, *post_tile_embd, *post_tile_gate;
    struct mms_tensor *pre_ln_w, *pre_ln_b, *post_ln_w, *post_ln_b, *mm_w, *mm_b;
    struct mms__mllama_vlayer *vlayers, *vglobal;
};

/* The aspect ratios with rows * cols <= max_tiles, in the processor's order; returns how many. */
static int mms__mllama_aspect_ratios(int max_tiles, int *rows, int *cols) {
    int w, h, n = 0;
    for (w = 1; w <= max_tiles; w++)
        for (h = 1; h <= max_tiles; h++)
            if (w * h <= max_tiles) {
                if (rows) { rows[n] = w; cols[n] = h; }   /* read as (rows, cols), as transformers does */
                n++;
            }
    return n;
}

static void mms__mllama_derive(struct mms_mllama_hparams *hp) {
    if (hp->v_patch_size > 0) {
        int side = hp->v_image_size / hp->v_patch_size;
        hp->v_n_patches = side * side;
        hp->v_n_tokens = hp->v_n_patches + 1;
        hp->v_n_tokens_padded = (hp->v_n_tokens + 7) / 8 * 8;
        hp->v_output_dim = hp->v_n_embd * (1 + hp->v_n_taps);
    }
}

MMS_API void mms_mllama_hparams_11b(struct mms_mllama_hparams *hp) {
    static const int cross[8] = { 3, 8, 13, 18, 23, 28, 33, 38 }, taps[5] = { 3, 7, 15, 23, 30 };
    memset(hp, 0, sizeof *hp);
    hp->n_vocab = 128256; hp->n_embd_rows = 128264; hp->n_ctx_train = 131072;
    hp->n_embd = 4096; hp->n_ff = 14336; hp->n_head = 32; hp->n_head_kv = 8; hp->head_dim = 128; hp->n_layer = 40;
    hp->rope_freq_base = 500000.0f; hp->rms_eps = 1e-5f;
    hp->n_cross = 8; hp->cross_layers = cross; hp->image_token_id = 128256;
    hp->v_n_layer = 32; hp->v_n_global = 8; hp->v_n_embd = 1280; hp->v_n_ff = 5120; hp->v_n_head = 16;
    hp->v_image_size = 560; hp->v_patch_size = 14; hp->v_max_tiles = 4; hp->v_channels = 3; hp->v_eps = 1e-5f;
    hp->v_n_taps = 5; hp->v_taps = taps;
    hp->image_mean[0] = 0.48145466f; hp->image_mean[1] = 0.4578275f; hp->image_mean[2] = 0.40821073f;
    hp->image_std[0] = 0.26862954f; hp->image_std[1] = 0.26130258f; hp->image_std[2] = 0.27577711f;
    mms__mllama_derive(hp);
}

/* Llama 3.2 90B Vision: the 11B vision tower on a Llama 3.1 70B text model with 20 cross-attention
   layers, one after every four of its 80 layers (5k + 3), as the published config has them. */
MMS_API void mms_mllama_hparams_90b(struct mms_mllama_hparams *hp) {
    static int cross[20];
    int k;
    for (k = 0; k < 20; k++) cross[k] = 5 * k + 3;
    mms_mllama_hparams_11b(hp);
    hp->n_embd = 8192; hp->n_ff = 28672; hp->n_head = 64; hp->n_head_kv = 8; hp->head_dim = 128; hp->n_layer = 100;
    hp->n_cross = 20; hp->cross_layers = cross;
    mms__mllama_derive(hp);
}

MMS_API const struct mms_mllama_hparams *mms_mllama_model_get_hparams(const struct mms_mllama_model *m) { return m ? &m->hp : NULL; }

MMS_API void mms_mllama_model_free(struct mms_mllama_model *m) {
    int i;
    if (!m) return;
    for (i = 0; i < m->n_bufs; i++) mms_backend_buffer_free(m->bufs[i]);
    MMS_FREE(m->bufs);
    for (i = 0; i < 2; i++) mms_free(m->wctx[i]);
    for (i = 0; i < m->n_files; i++) mms_gguf_close(m->files[i]);
    MMS_FREE(m->cross_layers); MMS_FREE(m->taps); MMS_FREE(m->is_cross);
    MMS_FREE(m->layers); MMS_FREE(m->vlayers); MMS_FREE(m->vglobal); MMS_FREE(m->sources); MMS_FREE(m->rope_freqs_data);
    mms__hf_close(m->hf);
    mms_vocab_free(m->vocab);
    MMS_FREE(m);
}

MMS_API const struct mms_vocab *mms_mllama_model_get_vocab(const struct mms_mllama_model *m) { return m ? m->vocab : NULL; }

/* -- hyper-parameters -- */

/* A required positive integer key; the error names the key and the file. */
static enum mms_status mms__mllama_key_int(const struct mms_gguf *g, const char *key, int *out, bool required) {
    uint32_t v;
    enum mms_status st;
    if (!required && mms_gguf_find_key(g, key) < 0) return MMS_OK;
    st = mms_gguf_get_u32(g, key, &v);
    if (st != MMS_OK) return mms__error_context(MMS_ERR_FORMAT, "mllama: %s", mms_last_error());
    if (v == 0 || v > (1u << 30)) return mms_set_error(MMS_ERR_FORMAT, "mllama: %s in '%s' is %u, out of range", key, mms_gguf_get_path(g), v);
    *out = (int)v;
    return MMS_OK;
}

static enum mms_status mms__mllama_key_float(const struct mms_gguf *g, const char *key, float *out) {
    enum mms_status st = mms_gguf_get_f32(g, key, out);
    if (st != MMS_OK) return mms__error_context(MMS_ERR_FORMAT, "mllama: %s", mms_last_error());
    if (!(*out > 0.0f)) return mms_set_error(MMS_ERR_FORMAT, "mllama: %s in '%s' must be positive, got %g", key, mms_gguf_get_path(g), (double)*out);
    return MMS_OK;
}

/* An int32 array key into a new array; every element in [0, limit). */
static enum mms_status mms__mllama_key_list(const struct mms_gguf *g, const char *key, int limit, int **out, int *n_out) {
    int64_t n = 0, i;
    int32_t *tmp;
    enum mms_status st = mms_gguf_get_arr_i32(g, key, NULL, 0, &n);
    if (st != MMS_OK) return mms__error_context(MMS_ERR_FORMAT, "mllama: %s", mms_last_error());
    if (n < 1 || n > limit) return mms_set_error(MMS_ERR_FORMAT, "mllama: %s in '%s' has %lld entries, expected 1..%d", key, mms_gguf_get_path(g), (long long)n, limit);
    tmp = (int32_t *)MMS_MALLOC(sizeof *tmp * (size_t)n);
    *out = (int *)MMS_MALLOC(sizeof **out * (size_t)n);
    if (!tmp || !*out) { MMS_FREE(tmp); return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory"); }
    if ((st = mms_gguf_get_arr_i32(g, key, tmp, n, &n)) != MMS_OK) { MMS_FREE(tmp); return st; }
    for (i = 0; i < n; i++) {
        if (tmp[i] < 0 || tmp[i] >= limit || (i > 0 && tmp[i] <= tmp[i - 1])) {
            int bad = (int)tmp[i];
            MMS_FREE(tmp);
            return mms_set_error(MMS_ERR_FORMAT, "mllama: %s in '%s': entry %lld = %d is not an ascending index below %d",
                                 key, mms_gguf_get_path(g), (long long)i, bad, limit);
        }
        (*out)[i] = tmp[i];
    }
    *n_out = (int)n;
    MMS_FREE(tmp);
    return MMS_OK;
}

/* What the loader needs of the hyper-parameters, wherever they came from (named in messages). */
static enum mms_status mms__mllama_check_text(struct mms_mllama_model *m, const char *where) {
    struct mms_mllama_hparams *hp = &m->hp;
    int i;
    if (hp->head_dim * hp->n_head != hp->n_embd || hp->head_dim % 2 != 0 || hp->n_head % hp->n_head_kv != 0)
        return mms_set_error(MMS_ERR_FORMAT, "mllama: inconsistent attention shape in '%s': %d heads (%d kv) of %d for width %d",
                             where, hp->n_head, hp->n_head_kv, hp->head_dim, hp->n_embd);
    m->is_cross = (bool *)MMS_MALLOC(sizeof(bool) * (size_t)hp->n_layer);
    if (!m->is_cross) return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory");
    for (i = 0; i < hp->n_layer; i++) m->is_cross[i] = false;
    for (i = 0; i < hp->n_cross; i++) m->is_cross[hp->cross_layers[i]] = true;
    return MMS_OK;
}

static enum mms_status mms__mllama_check_vision(const struct mms_mllama_hparams *hp, const char *where) {
    if (hp->v_image_size % hp->v_patch_size != 0 || hp->v_n_embd % hp->v_n_head != 0 || hp->v_max_tiles > 16 || hp->v_channels != 3)
        return mms_set_error(MMS_ERR_FORMAT, "mllama: unsupported vision shape in '%s': image %d, patch %d, width %d, %d heads, %d tiles, %d channels",
                             where, hp->v_image_size, hp->v_patch_size, hp->v_n_embd, hp->v_n_head, hp->v_max_tiles, hp->v_channels);
    return MMS_OK;
}

static enum mms_status mms__mllama_read_hparams(struct mms_mllama_model *m, const struct mms_gguf *text, const struct mms_gguf *vision) {
    struct mms_mllama_hparams *hp = &m->hp;
    const char *arch;
    size_t len;
    enum mms_status st;
    if (mms_gguf_get_str(text, "general.architecture", &arch, &len) != MMS_OK || len != 6 || memcmp(arch, "mllama", 6) != 0)
        return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s' is not an mllama model (general.architecture must be \"mllama\")", mms_gguf_get_path(text));
    if ((st = mms__mllama_key_int(text, "mllama.vocab_size", &hp->n_vocab, true)) != MMS_OK ||
        (st = mms__mllama_key_int(text, "mllama.block_count", &hp->n_layer, true)) != MMS_OK ||
        (st = mms__mllama_key_int(text, "mllama.context_length", &hp->n_ctx_train, true)) != MMS_OK ||
        (st = mms__mllama_key_int(text, "mllama.embedding_length", &hp->n_embd, true)) != MMS_OK ||
        (st = mms__mllama_key_int(text, "mllama.feed_forward_length", &hp->n_ff, true)) != MMS_OK ||
        (st = mms__mllama_key_int(text, "mllama.attention.head_count", &hp->n_head, true)) != MMS_OK ||
        (st = mms__mllama_key_int(text, "mllama.attention.head_count_kv", &hp->n_head_kv, true)) != MMS_OK ||
        (st = mms__mllama_key_float(text, "mllama.rope.freq_base", &hp->rope_freq_base)) != MMS_OK ||
        (st = mms__mllama_key_float(text, "mllama.attention.layer_norm_rms_epsilon", &hp->rms_eps)) != MMS_OK ||
        (st = mms__mllama_key_list(text, "mllama.attention.cross_attention_layers", hp->n_layer, &m->cross_layers, &hp->n_cross)) != MMS_OK)
        return st;
    hp->cross_layers = m->cross_layers;
    hp->head_dim = hp->n_embd / hp->n_head;
    if ((st = mms__mllama_key_int(text, "mllama.rope.dimension_count", &hp->head_dim, false)) != MMS_OK) return st;
    hp->image_token_id = hp->n_vocab;
    if ((st = mms__mllama_key_int(text, "mllama.image_token_index", &hp->image_token_id, false)) != MMS_OK) return st;
    if ((st = mms__mllama_check_text(m, mms_gguf_get_path(text))) != MMS_OK || !vision) return st;

    if ((st = mms__mllama_key_int(vision, "mllama.vision.block_count", &hp->v_n_layer, true)) != MMS_OK ||
        (st = mms__mllama_key_int(vision, "mllama.vision.global.block_count", &hp->v_n_global, true)) != MMS_OK ||
        (st = mms__mllama_key_int(vision, "mllama.vision.embedding_length", &hp->v_n_embd, true)) != MMS_OK ||
        (st = mms__mllama_key_int(vision, "mllama.vision.feed_forward_length", &hp->v_n_ff, true)) != MMS_OK ||
        (st = mms__mllama_key_int(vision, "mllama.vision.attention.head_count", &hp->v_n_head, true)) != MMS_OK ||
        (st = mms__mllama_key_int(vision, "mllama.vision.image_size", &hp->v_image_size, true)) != MMS_OK ||
        (st = mms__mllama_key_int(vision, "mllama.vision.patch_size", &hp->v_patch_size, true)) != MMS_OK ||
        (st = mms__mllama_key_int(vision, "mllama.vision.max_num_tiles", &hp->v_max_tiles, true)) != MMS_OK ||
        (st = mms__mllama_key_int(vision, "mllama.vision.num_channels", &hp->v_channels, true)) != MMS_OK ||
        (st = mms__mllama_key_float(vision, "mllama.vision.attention.layer_norm_epsilon", &hp->v_eps)) != MMS_OK ||
        (st = mms__mllama_key_list(vision, "mllama.vision.intermediate_layers_indices", hp->v_n_layer, &m->taps, &hp->v_n_taps)) != MMS_OK)
        return st;
    hp->v_taps = m->taps;
    if ((st = mms__mllama_check_vision(hp, mms_gguf_get_path(vision))) != MMS_OK) return st;
    {   /* mean and std of the image processor: ours when the converter wrote them, else CLIP's */
        struct mms_mllama_hparams clip;
        int64_t n = 0;
        mms_mllama_hparams_11b(&clip);
        memcpy(hp->image_mean, clip.image_mean, sizeof hp->image_mean);
        memcpy(hp->image_std, clip.image_std, sizeof hp->image_std);
        if (mms_gguf_find_key(vision, "mllama.vision.image_mean") >= 0 &&
            (mms_gguf_get_arr_f32(vision, "mllama.vision.image_mean", hp->image_mean, 3, &n) != MMS_OK || n != 3 ||
             mms_gguf_get_arr_f32(vision, "mllama.vision.image_std", hp->image_std, 3, &n) != MMS_OK || n != 3))
            return mms_set_error(MMS_ERR_FORMAT, "mllama: mllama.vision.image_mean/image_std in '%s' must be 3 floats each", mms_gguf_get_path(vision));
    }
    mms__mllama_derive(hp);
    return MMS_OK;
}

/* -- weights -- */

struct mms__wloader {
    struct mms_mllama_model *m;
    const struct mms_gguf   *g;            /* the file tensors come from now (unless hf) */
    struct mms__hf          *hf;           /* or the checkpoint folder */
    bool                     qk_permuted;  /* g holds q/k rows in Ollama's per-head order */
    enum mms_type            shape_type;   /* shapes only: the type of matrices */
    enum mms_status          st;
};

/* The key mmsched's converter writes (Ollama's reader ignores it): "ollama" when the q/k rows are
   permuted per head as Ollama's converter writes them, "hf" when they are in the checkpoint's order. */
#define MMS__QK_ROWS_KEY "mmsched.mllama.qk_rows"

/* Whether file g holds its cross-attention and vision q/k rows in Ollama's per-head order. In
   order: the key above when present; the older two-file layout (pair) is in the checkpoint's order
   (Ollama's legacy C++ code applies q_norm/k_norm to each head's rows as they are, which is right
   only then); a file with mllama.image_token_index, a key only mmsched's converter wrote before it
   wrote the marker, is in the checkpoint's order; any other single file is taken as written by
   Ollama's converter, which has permuted them since May 2025 (spec 6.2). */
static enum mms_status mms__mllama_qk_rows(const struct mms_gguf *g, bool pair, bool *permuted) {
    const char *v;
    size_t len;
    if (mms_gguf_find_key(g, MMS__QK_ROWS_KEY) >= 0) {
        if (mms_gguf_get_str(g, MMS__QK_ROWS_KEY, &v, &len) != MMS_OK) return mms__error_context(MMS_ERR_FORMAT, "mllama: %s", mms_last_error());
        if ((len == 6 && !memcmp(v, "ollama", 6)) || (len == 2 && !memcmp(v, "hf", 2))) { *permuted = len == 6; return MMS_OK; }
        return mms_set_error(MMS_ERR_FORMAT, "mllama: %s in '%s' is \"%.*s\", expected \"ollama\" or \"hf\"", MMS__QK_ROWS_KEY,
                             mms_gguf_get_path(g), (int)(len < 64 ? len : 64), v);
    }
    *permuted = !pair && mms_gguf_find_key(g, "mllama.image_token_index") < 0;
    return MMS_OK;
}

/* Declares weight `name` of the given shape on backend b: checked against the file, or (shapes
   only) made with that shape. NULL for an absent optional weight, or after an error (kept in L).
   quant_ok: the weight is only ever src0 of mul_mat or get_rows, so a quantized type is accepted;
   every other weight (norms, biases, gates, position and patch embeddings) must be f32/f16/bf16. */
/* A weight as a file holds it. */
struct mms__wfound {
    enum mms_type      type;
    int64_t            ne[4];
    const void        *data;
    const void        *region;
    const char        *where;       /* the file, for messages */
    const char        *file_type;   /* the type as the file names it, for messages */
    enum mms__hf_xform xform;
};

/* Finds weight `name` in the GGUF file or the checkpoint folder; false if absent (or on error, in L). */
static bool mms__weight_find(struct mms__wloader *L, const char *name, struct mms__wfound *w) {
    static char type_name[16];
    int i;
    memset(w, 0, sizeof *w);
    for (i = 0; i < 4; i++) w->ne[i] = 1;
    if (L->hf) {
        struct mms_safetensors_info si;
        const struct mms_safetensors *shard;
        if (!strcmp(name, "rope_freqs.weight")) {     /* computed from config.json */
            if (!L->m->rope_freqs_data) return false;
            w->type = MMS_TYPE_F32;
            w->ne[0] = L->m->hp.head_dim / 2;
            w->data = L->m->rope_freqs_data;
            w->where = "config.json";
            return true;
        }
        if (!mms__hf_find(L->hf, name, &si, &w->xform, &shard)) return false;
        if (si.n_dims > 4) {
            L->st = mms_set_error(MMS_ERR_FORMAT, "mllama: tensor '%s' in '%s' has %d dimensions", si.name, mms_safetensors_path(shard), si.n_dims);
            return false;
        }
        for (i = 0; i < si.n_dims; i++) w->ne[i] = si.shape[si.n_dims - 1 - i];   /* the file's order reversed: ggml's */
        w->type = si.type;
        w->data = si.data;
        w->file_type = si.dtype;
        w->where = mms_safetensors_path(shard);
        w->region = shard;
        return true;
    }
    {
        const int64_t idx = mms_gguf_find_tensor(L->g, name);
        struct mms_gguf_tensor_info info;
        if (idx < 0) return false;
        if ((L->st = mms_gguf_get_tensor(L->g, idx, &info)) != MMS_OK) return false;
        memcpy(w->ne, info.ne, sizeof w->ne);
        w->type = info.type;
        w->data = info.data;
        w->region = L->g;
        w->where = mms_gguf_get_path(L->g);
        snprintf(type_name, sizeof type_name, "GGUF type %u", info.ggml_type);
        w->file_type = type_name;
        return true;
    }
}

/* Declares weight `name` of the given shape on backend b: checked against the file, or (shapes
   only) made with that shape. NULL for an absent optional weight, or after an error (kept in L).
   quant_ok: the weight is only ever src0 of mul_mat or get_rows, so a quantized type is accepted;
   every other weight (norms, biases, gates, position and patch embeddings) must be f32/f16/bf16.
   From a checkpoint folder, those other weights and the derived gates become f32 when placed
   (they are small; the matrices are used as the files hold them). */
static struct mms_tensor *mms__weight(struct mms__wloader *L, int b, bool required, bool quant_ok, const char *name,
                                      int n_dims, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    const int64_t want[4] = { ne0, ne1, ne2, ne3 };
    struct mms__wfound w;
    struct mms_tensor *t;
    enum mms_type type;
    int i;
    if (L->st != MMS_OK) return NULL;
    if (L->m->shapes_only) {
        type = n_dims >= 2 && ne1 > 1 ? L->shape_type : MMS_TYPE_F32;
        if (mms_blck_size(type) > 1 && (!quant_ok || ne0 % mms_blck_size(type) != 0)) type = MMS_TYPE_F16;   /* as Ollama keeps them */
        t = mms_new_tensor(L->m->wctx[b], type, n_dims, want);
        if (!t) { L->st = mms_ctx_status(L->m->wctx[b]); return NULL; }
        return mms_set_name(t, name);
    }
    if (!mms__weight_find(L, name, &w)) {
        if (required && L->st == MMS_OK)
            L->st = L->hf ? mms_set_error(MMS_ERR_FORMAT, "mllama: the checkpoint folder '%s' lacks the tensor for weight '%s'", mms__hf_dir(L->hf), name)
                          : mms_set_error(MMS_ERR_FORMAT, "mllama: '%s' lacks tensor '%s'", mms_gguf_get_path(L->g), name);
        return NULL;
    }
    for (i = 0; i < 4; i++) {
        if (w.ne[i] != want[i]) {
            char got[96], exp[96];
            L->st = mms_set_error(MMS_ERR_FORMAT, "mllama: tensor '%s' in '%s' has shape %s, the %s implies %s", name, w.where,
                                  mms__shape_str(w.ne, got, sizeof got), L->hf ? "configuration" : "metadata", mms__shape_str(want, exp, sizeof exp));
            return NULL;
        }
    }
    if (w.type == MMS_TYPE_INVALID) {
        L->st = mms_set_error(MMS_ERR_UNSUPPORTED, "mllama: tensor '%s' in '%s' has %s, which mmsched cannot load", name, w.where, w.file_type);
        return NULL;
    }
    if (!mms_get_type_traits(w.type)->is_float && !(quant_ok && mms_get_type_traits(w.type)->is_quantized)) {
        L->st = mms_set_error(MMS_ERR_UNSUPPORTED, "mllama: tensor '%s' in '%s' has type %s; it is used by ops other than matrix "
                              "products and row lookups, so it must be f32, f16 or bf16", name, w.where, mms_type_name(w.type));
        return NULL;
    }
    type = L->hf && (!quant_ok || w.xform != MMS__HF_AS_IS) ? MMS_TYPE_F32 : w.type;
    t = mms_new_tensor(L->m->wctx[b], type, n_dims, want);
    if (!t) { L->st = mms_ctx_status(L->m->wctx[b]); return NULL; }
    mms_set_name(t, name);
    if (L->m->n_sources == L->m->cap_sources) {
        int cap = L->m->cap_sources ? 2 * L->m->cap_sources : 256;
        struct mms__wsource *grown = (struct mms__wsource *)MMS_REALLOC(L->m->sources, sizeof *grown * (size_t)cap);
        if (!grown) { L->st = mms_set_error(MMS_ERR_OOM, "mllama: out of host memory"); return NULL; }
        L->m->sources = grown;
        L->m->cap_sources = cap;
    }
    {
        struct mms__wsource *s = &L->m->sources[L->m->n_sources++];
        memset(s, 0, sizeof *s);
        s->t = t;
        s->region = type == w.type && w.xform == MMS__HF_AS_IS ? w.region : NULL;
        s->data = w.data;
        s->src_type = w.type;
        s->xform = w.xform;
        s->backend = b;
    }
    return t;
}

/* A q/k projection t (just declared) of n_heads heads: when its file permutes such rows per head,
   they are put back in the checkpoint's order at placement. */
static void mms__weight_qk(struct mms__wloader *L, struct mms_tensor *t, int n_heads) {
    struct mms__wsource *s;
    if (!t || !L->qk_permuted || L->st != MMS_OK) return;
    s = &L->m->sources[L->m->n_sources - 1];
    MMS_ASSERT(s->t == t);
    if (t->ne[1] % (2 * n_heads) != 0) {
        L->st = mms_set_error(MMS_ERR_FORMAT, "mllama: tensor '%s' in '%s': %lld rows are not %d heads of an even size, as Ollama's q/k "
                              "row order needs", t->name, mms_gguf_get_path(L->g), (long long)t->ne[1], n_heads);
        return;
    }
    s->row_heads = n_heads;
}

/* W1: vectors, never quantized; W2: matrices used only by mul_mat/get_rows (may be quantized);
   WF2: matrices used by other ops (float only). */
#define MMS__W1(L, b, req, n0, ...)        mms__weight(L, b, req, false, mms__wname(nb, sizeof nb, __VA_ARGS__), 1, n0, 1, 1, 1)
#define MMS__W2(L, b, req, n0, n1, ...)    mms__weight(L, b, req, true, mms__wname(nb, sizeof nb, __VA_ARGS__), 2, n0, n1, 1, 1)
#define MMS__WF2(L, b, req, n0, n1, ...)   mms__weight(L, b, req, false, mms__wname(nb, sizeof nb, __VA_ARGS__), 2, n0, n1, 1, 1)

static const char *mms__wname(char *buf, size_t size, const char *fmt, ...) MMS_PRINTF(3, 4);
static const char *mms__wname(char *buf, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    return buf;
}

static void mms__mllama_text_weights(struct mms__wloader *L, int n_gpu_layers) {
    struct mms_mllama_model *m = L->m;
    const struct mms_mllama_hparams *hp = &m->hp;
    const int64_t D = hp->n_embd, Q = (int64_t)hp->n_head * hp->head_dim, KV = (int64_t)hp->n_head_kv * hp->head_dim, FF = hp->n_ff;
    char nb[96];
    int il;
    {   /* the embedding table's row count comes from the file: vocabulary plus the image rows */
        int64_t idx = m->shapes_only ? -1 : mms_gguf_find_tensor(L->g, "token_embd.weight");
        struct mms_gguf_tensor_info info;
        m->hp.n_embd_rows = hp->n_vocab + 8;
        if (idx >= 0 && mms_gguf_get_tensor(L->g, idx, &info) == MMS_OK) m->hp.n_embd_rows = (int)info.ne[1];
        if (hp->n_embd_rows <= hp->image_token_id && L->st == MMS_OK)
            L->st = mms_set_error(MMS_ERR_FORMAT, "mllama: token_embd has %d rows, too few for the image token %d", hp->n_embd_rows, hp->image_token_id);
    }
    m->token_embd = MMS__W2(L, 0, true, D, hp->n_embd_rows, "token_embd.weight");
    m->output_norm = MMS__W1(L, m->output_backend, true, D, "output_norm.weight");
    m->output = MMS__W2(L, m->output_backend, true, D, hp->n_vocab, "output.weight");
    m->rope_freqs = MMS__W1(L, 0, false, hp->head_dim / 2, "rope_freqs.weight");
    for (il = 0; il < hp->n_layer; il++) {
        struct mms__mllama_tlayer *ly = &m->layers[il];
        int b = ly->backend = (m->backends[1] != m->backends[0] && il >= hp->n_layer - n_gpu_layers) ? 1 : 0;
        ly->cross = m->is_cross[il];
        ly->attn_norm = MMS__W1(L, b, true, D, "blk.%d.attn_norm.weight", il);
        ly->ffn_norm = MMS__W1(L, b, true, D, "blk.%d.ffn_norm.weight", il);
        ly->ffn_gate = MMS__W2(L, b, true, D, FF, "blk.%d.ffn_gate.weight", il);
        ly->ffn_up = MMS__W2(L, b, true, D, FF, "blk.%d.ffn_up.weight", il);
        ly->ffn_down = MMS__W2(L, b, true, FF, D, "blk.%d.ffn_down.weight", il);
        if (ly->cross) {
            ly->wq = MMS__W2(L, b, true, D, Q, "blk.%d.cross_attn_q_proj.weight", il);
            mms__weight_qk(L, ly->wq, hp->n_head);
            ly->wk = MMS__W2(L, b, true, D, KV, "blk.%d.cross_attn_k_proj.weight", il);
            mms__weight_qk(L, ly->wk, hp->n_head_kv);
            ly->wv = MMS__W2(L, b, true, D, KV, "blk.%d.cross_attn_v_proj.weight", il);
            ly->wo = MMS__W2(L, b, true, Q, D, "blk.%d.cross_attn_o_proj.weight", il);
            ly->q_norm = MMS__W1(L, b, true, hp->head_dim, "blk.%d.cross_attn_q_norm.weight", il);
            ly->k_norm = MMS__W1(L, b, true, hp->head_dim, "blk.%d.cross_attn_k_norm.weight", il);
            ly->gate_attn = MMS__W1(L, b, true, 1, "blk.%d.cross_attn_attn_gate", il);
            ly->gate_mlp = MMS__W1(L, b, true, 1, "blk.%d.cross_attn_mlp_gate", il);
        } else {
            ly->wq = MMS__W2(L, b, true, D, Q, "blk.%d.attn_q.weight", il);
            ly->wk = MMS__W2(L, b, true, D, KV, "blk.%d.attn_k.weight", il);
            ly->wv = MMS__W2(L, b, true, D, KV, "blk.%d.attn_v.weight", il);
            ly->wo = MMS__W2(L, b, true, Q, D, "blk.%d.attn_output.weight", il);
        }
    }
}

/* legacy: the projector file of the older two-file layout (ln1/ln2, attn_out, fc1/fc2 swapped) */
static void mms__mllama_vision_layer(struct mms__wloader *L, struct mms__mllama_vlayer *ly, const char *prefix, int il, bool global, bool legacy) {
    const struct mms_mllama_hparams *hp = &L->m->hp;
    const int b = L->m->vision_backend;
    const int64_t D = hp->v_n_embd, FF = hp->v_n_ff;
    const char *ln1 = legacy ? "ln1" : "attn_norm", *ln2 = legacy ? "ln2" : "ffn_norm";
    const char *fc1 = legacy ? "ffn_down" : "ffn_up", *fc2 = legacy ? "ffn_up" : "ffn_down";
    char nb[96];
    ly->ln1_w = MMS__W1(L, b, true, D, "%s.%d.%s.weight", prefix, il, ln1);
    ly->ln1_b = MMS__W1(L, b, true, D, "%s.%d.%s.bias", prefix, il, ln1);
    ly->ln2_w = MMS__W1(L, b, true, D, "%s.%d.%s.weight", prefix, il, ln2);
    ly->ln2_b = MMS__W1(L, b, true, D, "%s.%d.%s.bias", prefix, il, ln2);
    ly->wq = MMS__W2(L, b, true, D, D, "%s.%d.attn_q.weight", prefix, il);
    mms__weight_qk(L, ly->wq, hp->v_n_head);
    ly->wk = MMS__W2(L, b, true, D, D, "%s.%d.attn_k.weight", prefix, il);
    mms__weight_qk(L, ly->wk, hp->v_n_head);
    ly->wv = MMS__W2(L, b, true, D, D, "%s.%d.attn_v.weight", prefix, il);
    ly->wo = MMS__W2(L, b, true, D, D, "%s.%d.%s.weight", prefix, il, legacy ? "attn_out" : "attn_output");
    ly->fc1_w = MMS__W2(L, b, true, D, FF, "%s.%d.%s.weight", prefix, il, fc1);
    ly->fc1_b = MMS__W1(L, b, true, FF, "%s.%d.%s.bias", prefix, il, fc1);
    ly->fc2_w = MMS__W2(L, b, true, FF, D, "%s.%d.%s.weight", prefix, il, fc2);
    ly->fc2_b = MMS__W1(L, b, true, D, "%s.%d.%s.bias", prefix, il, fc2);
    if (global) {
        ly->gate_attn = MMS__W1(L, b, true, 1, "%s.%d.attn_gate", prefix, il);
        ly->gate_ffn = MMS__W1(L, b, true, 1, "%s.%d.ffn_gate", prefix, il);
    }
}

static void mms__mllama_vision_weights(struct mms__wloader *L, bool legacy) {
    struct mms_mllama_model *m = L->m;
    const struct mms_mllama_hparams *hp = &m->hp;
    const int b = m->vision_backend;
    const int64_t D = hp->v_n_embd, T = hp->v_max_tiles, N = hp->v_n_tokens;
    const int64_t n_ids = mms__mllama_aspect_ratios(hp->v_max_tiles, NULL, NULL) + 1;   /* id 0 is padding */
    char nb[96];
    int il;
    m->patch_embd = mms__weight(L, b, true, false, "v.patch_embd.weight", 4, hp->v_patch_size, hp->v_patch_size, hp->v_channels, D);
    m->class_embd = MMS__W1(L, b, true, D, "v.class_embd");
    m->pos_embd = MMS__WF2(L, b, true, D, N, "v.position_embd.weight");
    m->pos_gate = MMS__W1(L, b, true, 1, "v.position_embd.gate");
    m->tile_pos_embd = MMS__W2(L, b, true, T * N * D, n_ids, "v.tile_position_embd.weight");
    m->tile_pos_gate = MMS__W1(L, b, true, 1, "v.tile_position_embd.gate");
    m->pre_tile_embd = MMS__W2(L, b, true, T * D, n_ids, "v.pre_tile_position_embd.weight");
    m->pre_tile_gate = MMS__W1(L, b, true, 1, "v.pre_tile_position_embd.gate");
    m->post_tile_embd = MMS__W2(L, b, true, T * D, n_ids, "v.post_tile_position_embd.weight");
    m->post_tile_gate = MMS__W1(L, b, true, 1, "v.post_tile_position_embd.gate");
    m->pre_ln_w = MMS__W1(L, b, true, D, "v.pre_ln.weight");
    m->pre_ln_b = MMS__W1(L, b, true, D, "v.pre_ln.bias");
    m->post_ln_w = MMS__W1(L, b, true, D, "v.post_ln.weight");
    m->post_ln_b = MMS__W1(L, b, true, D, "v.post_ln.bias");
    m->mm_w = MMS__W2(L, b, true, hp->v_output_dim, hp->n_embd, "mm.0.weight");
    m->mm_b = MMS__W1(L, b, true, hp->n_embd, "mm.0.bias");
    for (il = 0; il < hp->v_n_layer; il++) mms__mllama_vision_layer(L, &m->vlayers[il], "v.blk", il, false, legacy);
    for (il = 0; il < hp->v_n_global; il++) mms__mllama_vision_layer(L, &m->vglobal[il], "v.global.blk", il, true, legacy);
}

static enum mms_status mms__mllama_keep_buffer(struct mms_mllama_model *m, mms_backend_buffer_t buf) {
    if (!buf) return mms_last_status();
    if (m->n_bufs == m->cap_bufs) {
        int cap = m->cap_bufs ? 2 * m->cap_bufs : 4;
        mms_backend_buffer_t *grown = (mms_backend_buffer_t *)MMS_REALLOC(m->bufs, sizeof *grown * (size_t)cap);
        if (!grown) { mms_backend_buffer_free(buf); return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory"); }
        m->bufs = grown;
        m->cap_bufs = cap;
    }
    mms_backend_buffer_set_usage(buf, MMS_BUFFER_USAGE_WEIGHTS);
    m->bufs[m->n_bufs++] = buf;
    return MMS_OK;
}

/* Progress of the load by bytes of weights read; the callback may stop it. */
struct mms__load_progress {
    bool  (*cb)(float fraction, void *user);
    void   *user;
    size_t  done, total;
};

static enum mms_status mms__load_step(struct mms__load_progress *lp, size_t bytes) {
    if (!lp || !lp->cb) return MMS_OK;
    lp->done += bytes;
    if (!lp->cb(lp->total ? (float)((double)lp->done / (double)lp->total) : 1.0f, lp->user))
        return mms_set_error(MMS_ABORTED, "mllama: the progress callback stopped the load");
    return MMS_OK;
}

/* Reads mapped memory page by page, so the file is read now. Returns a sum the compiler cannot drop. */
static unsigned mms__touch_pages(const void *p, size_t n) {
    const volatile unsigned char *c = (const volatile unsigned char *)p;
    unsigned sum = 0;
    size_t i;
    for (i = 0; i < n; i += 4096) sum += c[i];
    return sum;
}

/* Sets a weight from its file, putting rows that Ollama's converter permuted within each head
   (row h*d + 2i + p of the file is row h*d + p*d/2 + i of the checkpoint) back in the checkpoint's
   order. Whole rows move, so any block type works. */
static enum mms_status mms__set_weight(const struct mms__wsource *s) {
    struct mms_tensor *t = s->t;
    const char *src = (const char *)s->data;
    char *moved;
    size_t row;
    int64_t d, h, i;
    int p;
    enum mms_status st;
    if (s->src_type != t->type || s->xform != MMS__HF_AS_IS) {   /* to f32, maybe a gate's tanh (a checkpoint folder's) */
        const int64_t n = mms_nelements(t);
        float *f = (float *)MMS_MALLOC(sizeof(float) * (size_t)(n + 1));
        if (!f) return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory");
        mms_get_type_traits(s->src_type)->to_float(s->data, f, n);
        for (i = 0; i < n; i++) {
            if (s->xform == MMS__HF_TANH) f[i] = (float)tanh((double)f[i]);
            else if (s->xform == MMS__HF_ONE_MINUS_TANH) f[i] = 1.0f - (float)tanh((double)f[i]);
        }
        st = mms_backend_tensor_set(t, f, 0, mms_nbytes(t));
        MMS_FREE(f);
        return st;
    }
    if (s->row_heads == 0) return mms_backend_tensor_set(t, src, 0, mms_nbytes(t));
    row = mms_row_size(t->type, t->ne[0]);
    d = mms_nrows(t) / s->row_heads;
    if (!(moved = (char *)MMS_MALLOC(mms_nbytes(t)))) return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory");
    for (h = 0; h < s->row_heads; h++)   /* in host memory, then one set (a CPU_REPACK buffer takes whole tensors) */
        for (p = 0; p < 2; p++)
            for (i = 0; i < d / 2; i++) memcpy(moved + (size_t)(h * d + p * (d / 2) + i) * row, src + (size_t)(h * d + 2 * i + p) * row, row);
    st = mms_backend_tensor_set(t, moved, 0, mms_nbytes(t));
    MMS_FREE(moved);
    return st;
}

/* Whether weight t on backend b goes into a CPU_REPACK buffer: a Q4_0/Q4_K/Q6_K/Q8_0 matrix that only
   MUL_MAT reads (the embedding tables are read by GET_ROWS), on the CPU backend. */
static bool mms__mllama_repacks(const struct mms_mllama_model *m, int b, const struct mms_tensor *t) {
    return m->cpu_repack && mms_backend_is_cpu(m->backends[b]) && mms_backend_cpu_repacks(t) && t != m->token_embd &&
           t != m->tile_pos_embd && t != m->pre_tile_embd && t != m->post_tile_embd;
}

/* The weights of backend b that mms__mllama_repacks picks, in one CPU_REPACK buffer, repacked from
   the file; the mapped pages they came from are released (whole pages inside each weight only). */
static enum mms_status mms__mllama_place_repacked(struct mms_mllama_model *m, int b, struct mms__load_progress *lp) {
    mms_backend_buffer_type_t buft = mms_backend_cpu_repack_buffer_type();
    const size_t align = mms_backend_buft_get_alignment(buft);
    size_t total = 0;
    mms_backend_buffer_t buf;
    char *at;
    enum mms_status st;
    int i;
    for (i = 0; i < m->n_sources; i++)
        if (m->sources[i].backend == b && !m->sources[i].t->data && mms__mllama_repacks(m, b, m->sources[i].t))
            total += MMS__ALIGN_UP(mms_backend_buft_get_alloc_size(buft, m->sources[i].t), align);
    if (!total) return MMS_OK;
    if (!(buf = mms_backend_buft_alloc_buffer(buft, total)))
        return mms_set_error(mms_last_status(), "mllama: cannot allocate %zu bytes for the repacked CPU weights (no_cpu_repack keeps them mapped): %s",
                             total, mms_last_error());
    if ((st = mms__mllama_keep_buffer(m, buf)) != MMS_OK) return st;
    at = (char *)mms_backend_buffer_get_base(buf);
    for (i = 0; i < m->n_sources; i++) {
        const struct mms__wsource *s = &m->sources[i];
        if (s->backend != b || s->t->data || !mms__mllama_repacks(m, b, s->t)) continue;
        if ((st = mms_backend_tensor_alloc(buf, s->t, at)) != MMS_OK || (st = mms__set_weight(s)) != MMS_OK) return st;
        at += MMS__ALIGN_UP(mms_backend_buft_get_alloc_size(buft, s->t), align);
        if (s->region) mms__release_pages(s->data, mms_nbytes(s->t));
        if ((st = mms__load_step(lp, mms_nbytes(s->t))) != MMS_OK) return st;
    }
    return MMS_OK;
}

/* Host weights are used where the file is mapped (no copy), except those whose rows must move,
   which get a buffer of their own; on other backends every weight is copied into a buffer of the
   backend. Without a file (shapes only) weights get addresses that are never read. */
static enum mms_status mms__mllama_place_weights(struct mms_mllama_model *m, struct mms__load_progress *lp) {
    int b, f, i;
    enum mms_status st;
    unsigned touched = 0;
    for (b = 0; b < 2; b++) {
        struct mms_context *ctx = m->wctx[b];
        struct mms_tensor *t;
        if (!mms_get_first_tensor(ctx)) continue;
        if (m->shapes_only) {
            char *at = (char *)(uintptr_t)4096;
            size_t total = 0;
            mms_backend_buffer_t buf;
            for (t = mms_get_first_tensor(ctx); t; t = mms_get_next_tensor(ctx, t)) total += MMS__ALIGN_UP(mms_nbytes(t), 64);
            buf = mms_backend_cpu_buffer_from_ptr(at, total);
            if ((st = mms__mllama_keep_buffer(m, buf)) != MMS_OK) return st;
            for (t = mms_get_first_tensor(ctx); t; t = mms_get_next_tensor(ctx, t)) {
                if ((st = mms_backend_tensor_alloc(buf, t, at)) != MMS_OK) return st;
                at += MMS__ALIGN_UP(mms_nbytes(t), 64);
            }
        } else if (mms_backend_buft_is_host(mms_backend_get_default_buffer_type(m->backends[b]))) {
            const size_t align = mms_backend_get_alignment(m->backends[b]);
            size_t moved = 0;
            for (i = 0; i < m->n_sources; i++) {       /* one buffer over each mapped region's weights on this backend */
                const struct mms__wsource *s = &m->sources[i];
                const char *lo = (const char *)s->data, *hi = lo + mms_nbytes(s->t);
                mms_backend_buffer_t buf;
                if (s->backend != b || !s->region || s->row_heads || s->t->data || mms__mllama_repacks(m, b, s->t)) continue;
                for (f = i + 1; f < m->n_sources; f++) {
                    const struct mms__wsource *o = &m->sources[f];
                    if (o->backend != b || o->region != s->region || o->row_heads || mms__mllama_repacks(m, b, o->t)) continue;
                    if ((const char *)o->data < lo) lo = (const char *)o->data;
                    if ((const char *)o->data + mms_nbytes(o->t) > hi) hi = (const char *)o->data + mms_nbytes(o->t);
                }
                buf = mms_backend_cpu_buffer_from_ptr((void *)lo, (size_t)(hi - lo));
                if ((st = mms__mllama_keep_buffer(m, buf)) != MMS_OK) return st;
                for (f = i; f < m->n_sources; f++) {
                    const struct mms__wsource *o = &m->sources[f];
                    if (o->backend != b || o->region != s->region || o->row_heads || mms__mllama_repacks(m, b, o->t)) continue;
                    if ((st = mms_backend_tensor_alloc(buf, o->t, (void *)o->data)) != MMS_OK) return st;
                    if (lp && lp->cb) touched += mms__touch_pages(o->data, mms_nbytes(o->t));
                    if ((st = mms__load_step(lp, mms_nbytes(o->t))) != MMS_OK) return st;
                }
            }
            if ((st = mms__mllama_place_repacked(m, b, lp)) != MMS_OK) return st;
            for (i = 0; i < m->n_sources; i++)
                if (m->sources[i].backend == b && !m->sources[i].t->data) moved += MMS__ALIGN_UP(mms_nbytes(m->sources[i].t), align);
            if (moved) {                               /* reordered, converted or computed: a buffer of their own */
                mms_backend_buffer_t buf = mms_backend_alloc_buffer(m->backends[b], moved);
                char *at;
                if (!buf) return mms_set_error(mms_last_status(), "mllama: cannot allocate %zu bytes of reordered or converted weights on %s: %s",
                                               moved, mms_backend_name(m->backends[b]), mms_last_error());
                if ((st = mms__mllama_keep_buffer(m, buf)) != MMS_OK) return st;
                at = (char *)mms_backend_buffer_get_base(buf);
                for (i = 0; i < m->n_sources; i++) {
                    const struct mms__wsource *s = &m->sources[i];
                    if (s->backend != b || s->t->data) continue;
                    if ((st = mms_backend_tensor_alloc(buf, s->t, at)) != MMS_OK || (st = mms__set_weight(s)) != MMS_OK) return st;
                    at += MMS__ALIGN_UP(mms_nbytes(s->t), align);
                    if ((st = mms__load_step(lp, mms_nbytes(s->t))) != MMS_OK) return st;
                }
            }
        } else {
            mms_backend_buffer_t buf = mms_backend_alloc_ctx_tensors(ctx, m->backends[b]);
            if (!buf) return mms__error_context(mms_last_status(), "mllama: cannot allocate the weights on %s: %s", mms_backend_name(m->backends[b]), mms_last_error());
            if ((st = mms__mllama_keep_buffer(m, buf)) != MMS_OK) return st;
            for (i = 0; i < m->n_sources; i++) {
                if (m->sources[i].backend != b) continue;
                if ((st = mms__set_weight(&m->sources[i])) != MMS_OK) return st;
                if ((st = mms__load_step(lp, mms_nbytes(m->sources[i].t))) != MMS_OK) return st;
            }
        }
    }
    (void)touched;
    return MMS_OK;
}

/* The model object with its arrays, once the hyper-parameters are known. */
static enum mms_status mms__mllama_alloc_layers(struct mms_mllama_model *m) {
    const struct mms_mllama_hparams *hp = &m->hp;
    int b;
    for (b = 0; b < 2; b++) {
        struct mms_init_params ip = { 0, NULL, true };
        if (!(m->wctx[b] = mms_init(ip))) return mms_last_status();
    }
    m->layers = (struct mms__mllama_tlayer *)MMS_MALLOC(sizeof *m->layers * (size_t)hp->n_layer);
    m->vlayers = (struct mms__mllama_vlayer *)MMS_MALLOC(sizeof *m->vlayers * (size_t)(hp->v_n_layer + 1));
    m->vglobal = (struct mms__mllama_vlayer *)MMS_MALLOC(sizeof *m->vglobal * (size_t)(hp->v_n_global + 1));
    if (!m->layers || !m->vlayers || !m->vglobal) return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory");
    memset(m->layers, 0, sizeof *m->layers * (size_t)hp->n_layer);
    memset(m->vlayers, 0, sizeof *m->vlayers * (size_t)(hp->v_n_layer + 1));
    memset(m->vglobal, 0, sizeof *m->vglobal * (size_t)(hp->v_n_global + 1));
    return MMS_OK;
}

MMS_API struct mms_mllama_model *mms_mllama_model_load(const struct mms_mllama_load_params *p) {
    struct mms_mllama_model *m;
    struct mms__wloader L;
    struct mms__load_progress lp;
    const struct mms_gguf *vision_file;
    const int64_t t0 = mms_time_us();
    if (!p || !p->path || !p->cpu) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_model_load: a path and a cpu backend are required"); return NULL; }
    if (!strncmp(p->path, MMS_OLLAMA_PREFIX, strlen(MMS_OLLAMA_PREFIX))) {   /* a model in Ollama's store: its blobs */
        struct mms_ollama_model *om = (struct mms_ollama_model *)MMS_MALLOC(sizeof *om);
        struct mms_mllama_load_params blobs = *p;
        if (p->mmproj_path) {
            mms_set_error(MMS_ERR_INVALID_ARG, "mllama: '%s' is a model of Ollama's store, whose manifest names its projector: give no projector file", p->path);
            m = NULL;
        } else if (!om) {
            mms_set_error(MMS_ERR_OOM, "mllama: out of host memory");
            m = NULL;
        } else if (mms_ollama_resolve(p->path, om) != MMS_OK) {
            m = NULL;
        } else {
            blobs.path = om->model;
            blobs.mmproj_path = om->projector[0] ? om->projector : NULL;
            m = mms_mllama_model_load(&blobs);
        }
        MMS_FREE(om);
        return m;
    }
    if (!(m = (struct mms_mllama_model *)MMS_MALLOC(sizeof *m))) { mms_set_error(MMS_ERR_OOM, "mllama: out of host memory"); return NULL; }
    memset(m, 0, sizeof *m);
    m->backends[0] = p->cpu;
    m->backends[1] = p->gpu ? p->gpu : p->cpu;
    m->cpu_repack = !p->no_cpu_repack;
    memset(&L, 0, sizeof L);
    L.m = m;
    if (mms__hf_is_folder(p->path)) {               /* a Hugging Face checkpoint folder */
        struct mms_mllama_hparams *hp = &m->hp;
        if (p->mmproj_path) { mms_set_error(MMS_ERR_INVALID_ARG, "mllama: '%s' is a checkpoint folder; it takes no projector file", p->path); goto fail; }
        if (!(m->hf = mms__hf_open(p->path)) || mms__hf_hparams(m->hf, hp, &m->cross_layers, &m->taps, &m->rope_freqs_data) != MMS_OK) goto fail;
        hp->cross_layers = m->cross_layers;
        hp->v_taps = m->taps;
        if (mms__mllama_check_text(m, p->path) != MMS_OK || mms__mllama_check_vision(hp, p->path) != MMS_OK) goto fail;
        mms__mllama_derive(hp);
        if (p->text_only) memset(&hp->v_n_layer, 0, sizeof *hp - offsetof(struct mms_mllama_hparams, v_n_layer));
        if (mms__mllama_alloc_layers(m) != MMS_OK) goto fail;
        m->has_vision = !p->text_only;
        m->rope_neox = true;                          /* self-attention q/k as transformers keeps them */
        m->vision_backend = p->vision_on_gpu && p->gpu ? 1 : 0;
        m->output_backend = p->gpu && p->n_gpu_layers >= hp->n_layer ? 1 : 0;
        L.hf = m->hf;
        mms__mllama_text_weights(&L, p->n_gpu_layers);
        if (m->has_vision) mms__mllama_vision_weights(&L, false);
        if (L.st != MMS_OK || (m->has_vision && mms__hf_check_all_used(m->hf) != MMS_OK)) goto fail;
        if (!(m->vocab = mms_vocab_load_file(p->path))) goto fail;
        goto place;
    }
    if (mms__is_dir(p->path)) {
        mms_set_error(MMS_ERR_IO, "mllama: '%s' is a folder without config.json; a Hugging Face checkpoint folder holds config.json, the weights "
                      "(model.safetensors, or its shards and model.safetensors.index.json) and tokenizer.json (preprocessor_config.json, "
                      "tokenizer_config.json and generation_config.json are read when there)", p->path);
        goto fail;
    }
    if (!(m->files[m->n_files++] = mms_gguf_open(p->path))) goto fail;
    if (p->mmproj_path && !p->text_only && !(m->files[m->n_files++] = mms_gguf_open(p->mmproj_path))) goto fail;
    vision_file = p->text_only ? NULL : m->files[m->n_files - 1];
    if (vision_file && mms_gguf_find_key(vision_file, "mllama.vision.block_count") < 0) {
        if (p->mmproj_path) { mms_set_error(MMS_ERR_FORMAT, "mllama: '%s' has no vision tower (mllama.vision.*)", p->mmproj_path); goto fail; }
        vision_file = NULL;   /* a text-only model */
    }
    if (mms__mllama_read_hparams(m, m->files[0], vision_file) != MMS_OK || mms__mllama_alloc_layers(m) != MMS_OK) goto fail;
    m->has_vision = vision_file != NULL;
    m->vision_backend = p->vision_on_gpu && p->gpu ? 1 : 0;
    m->output_backend = p->gpu && p->n_gpu_layers >= m->hp.n_layer ? 1 : 0;
    L.g = m->files[0];
    if (mms__mllama_qk_rows(L.g, p->mmproj_path != NULL, &L.qk_permuted) != MMS_OK) goto fail;
    mms__mllama_text_weights(&L, p->n_gpu_layers);
    if (m->has_vision && L.st == MMS_OK) {
        L.g = vision_file;
        if (mms__mllama_qk_rows(L.g, p->mmproj_path != NULL, &L.qk_permuted) != MMS_OK) goto fail;
        mms__mllama_vision_weights(&L, p->mmproj_path != NULL);
    }
    if (L.st != MMS_OK) goto fail;
    if (mms_gguf_find_key(m->files[0], "tokenizer.ggml.model") >= 0 && !(m->vocab = mms_vocab_load(m->files[0]))) goto fail;
place:
    memset(&lp, 0, sizeof lp);
    lp.cb = p->progress;
    lp.user = p->progress_user_data;
    if (lp.cb) {
        int b;
        struct mms_tensor *t;
        for (b = 0; b < 2; b++)
            for (t = mms_get_first_tensor(m->wctx[b]); t; t = mms_get_next_tensor(m->wctx[b], t)) lp.total += mms_nbytes(t);
    }
    if (mms__mllama_place_weights(m, &lp) != MMS_OK) goto fail;
    MMS_FREE(m->sources);                         /* placed: the mapping is reached through the tensors now */
    m->sources = NULL;
    m->n_sources = m->cap_sources = 0;
    m->load_us = mms_time_us() - t0;
    return m;
fail:
    mms_mllama_model_free(m);
    return NULL;
}

MMS_API struct mms_mllama_image_params mms_mllama_model_image_params(const struct mms_mllama_model *m) {
    struct mms_mllama_image_params ip;
    memset(&ip, 0, sizeof ip);
    if (!m) return ip;
    ip.image_size = m->hp.v_image_size;
    ip.max_num_tiles = m->hp.v_max_tiles;
    memcpy(ip.mean, m->hp.image_mean, sizeof ip.mean);
    memcpy(ip.std, m->hp.image_std, sizeof ip.std);
    return ip;
}

MMS_API struct mms_mllama_model *mms_mllama_model_shapes_only(const struct mms_mllama_hparams *hp, mms_backend_t cpu, enum mms_type weight_type) {
    struct mms_mllama_model *m;
    struct mms__wloader L;
    int i;
    if (!hp || !cpu || hp->n_layer < 1) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_model_shapes_only: hparams and a cpu backend are required"); return NULL; }
    if (!(m = (struct mms_mllama_model *)MMS_MALLOC(sizeof *m))) { mms_set_error(MMS_ERR_OOM, "mllama: out of host memory"); return NULL; }
    memset(m, 0, sizeof *m);
    m->hp = *hp;
    m->shapes_only = true;
    m->backends[0] = m->backends[1] = cpu;
    m->cross_layers = (int *)MMS_MALLOC(sizeof(int) * (size_t)(hp->n_cross + 1));
    m->taps = (int *)MMS_MALLOC(sizeof(int) * (size_t)(hp->v_n_taps + 1));
    m->is_cross = (bool *)MMS_MALLOC(sizeof(bool) * (size_t)hp->n_layer);
    if (!m->cross_layers || !m->taps || !m->is_cross || mms__mllama_alloc_layers(m) != MMS_OK) goto fail;
    for (i = 0; i < hp->n_cross; i++) m->cross_layers[i] = hp->cross_layers[i];
    for (i = 0; i < hp->v_n_taps; i++) m->taps[i] = hp->v_taps[i];
    for (i = 0; i < hp->n_layer; i++) m->is_cross[i] = false;
    for (i = 0; i < hp->n_cross; i++) m->is_cross[hp->cross_layers[i]] = true;
    m->hp.cross_layers = m->cross_layers;
    m->hp.v_taps = m->taps;
    mms__mllama_derive(&m->hp);
    m->has_vision = hp->v_n_layer > 0;
    memset(&L, 0, sizeof L);
    L.m = m;
    L.shape_type = weight_type;
    mms__mllama_text_weights(&L, 0);
    if (m->has_vision) mms__mllama_vision_weights(&L, false);
    if (L.st != MMS_OK || mms__mllama_place_weights(m, NULL) != MMS_OK) goto fail;
    return m;
fail:
    mms_mllama_model_free(m);
    return NULL;
}
