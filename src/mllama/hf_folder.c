/* >>mllama-hf =====================================================================================
   A Hugging Face checkpoint folder as Meta and transformers publish it: config.json (the
   hyper-parameters), model.safetensors or model-*.safetensors with model.safetensors.index.json
   (the weights, used where they are mapped), preprocessor_config.json (mean, std, tile size).
   Weights are found by the GGUF names the loader asks for, mapped to the checkpoint's names (the
   on-disk language_model.model.* / vision_model.* ones, or the newer model.language_model.* ones).
   Everything is checked as the GGUF reader checks its files: a missing or unreadable file, a
   field of the wrong type, a shard that the index names but lacks the tensor, a tensor no weight
   uses: each is an error naming the file and the field. */

struct mms__hf {
    char                    *dir;
    struct mms_json         *config, *preproc, *index;
    struct mms_safetensors **shards;
    uint8_t                **used;          /* per shard, per tensor: asked for by the loader */
    int                      n_shards;
};

static void mms__hf_close(struct mms__hf *hf) {
    int i;
    if (!hf) return;
    for (i = 0; i < hf->n_shards; i++) { mms_safetensors_close(hf->shards[i]); MMS_FREE(hf->used[i]); }
    MMS_FREE(hf->shards); MMS_FREE(hf->used);
    mms_json_free(hf->config); mms_json_free(hf->preproc); mms_json_free(hf->index);
    MMS_FREE(hf->dir);
    MMS_FREE(hf);
}

static const char *mms__hf_dir(const struct mms__hf *hf) { return hf->dir; }

/* dir/name into out (size bytes), cut if too long (the callers bound the folder's path). */
static void mms__hf_path(const struct mms__hf *hf, const char *name, char *out, size_t size) {
    size_t a = strlen(hf->dir), b = strlen(name);
    if (a + b + 2 > size) { out[0] = '\0'; return; }
    memcpy(out, hf->dir, a);
    out[a] = '/';
    memcpy(out + a + 1, name, b + 1);
}

/* Whether path is a checkpoint folder (it has a config.json). */
static bool mms__hf_is_folder(const char *path) {
    char p[4096];
    if (strlen(path) + 13 >= sizeof p) return false;
    snprintf(p, sizeof p, "%s/config.json", path);
    return mms__file_exists(p);
}

static enum mms_status mms__hf_add_shard(struct mms__hf *hf, const char *file) {
    char p[4096];
    struct mms_safetensors *st;
    void *grown;
    if (!*file || strchr(file, '/') || strchr(file, '\\') || !strcmp(file, "..") || strlen(file) + strlen(hf->dir) + 2 >= sizeof p)
        return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s/model.safetensors.index.json': weight_map names the shard \"%.80s\", not a file of the folder",
                             hf->dir, file);
    mms__hf_path(hf, file, p, sizeof p);
    if (!(st = mms_safetensors_open(p))) return mms_last_status();
    if (!(grown = MMS_REALLOC(hf->shards, sizeof *hf->shards * (size_t)(hf->n_shards + 1)))) { mms_safetensors_close(st); return mms_set_error(MMS_ERR_OOM, "mllama: out of memory"); }
    hf->shards = (struct mms_safetensors **)grown;
    if (!(grown = MMS_REALLOC(hf->used, sizeof *hf->used * (size_t)(hf->n_shards + 1)))) { mms_safetensors_close(st); return mms_set_error(MMS_ERR_OOM, "mllama: out of memory"); }
    hf->used = (uint8_t **)grown;
    hf->used[hf->n_shards] = (uint8_t *)MMS_MALLOC((size_t)mms_safetensors_n_tensors(st) + 1);
    hf->shards[hf->n_shards++] = st;
    if (!hf->used[hf->n_shards - 1]) return mms_set_error(MMS_ERR_OOM, "mllama: out of memory");
    memset(hf->used[hf->n_shards - 1], 0, (size_t)mms_safetensors_n_tensors(st) + 1);
    return MMS_OK;
}

static int mms__hf_shard_of(const struct mms__hf *hf, const char *file) {
    int i;
    for (i = 0; i < hf->n_shards; i++) {
        const char *p = mms_safetensors_path(hf->shards[i]);
        size_t lp = strlen(p), lf = strlen(file);
        if (lp > lf && p[lp - lf - 1] == '/' && !strcmp(p + lp - lf, file)) return i;
    }
    return -1;
}

/* The folder's files: config.json, the preprocessor's (optional), the index and every shard it
   names (or model.safetensors alone); the index and the shards must agree tensor for tensor. */
static struct mms__hf *mms__hf_open(const char *dir) {
    struct mms__hf *hf = (struct mms__hf *)MMS_MALLOC(sizeof *hf);
    char p[4096];
    size_t n = strlen(dir);
    if (!hf) { mms_set_error(MMS_ERR_OOM, "mllama: out of memory"); return NULL; }
    memset(hf, 0, sizeof *hf);
    while (n > 1 && dir[n - 1] == '/') n--;
    if (n + 64 >= sizeof p || !(hf->dir = (char *)MMS_MALLOC(n + 1))) { mms_set_error(MMS_ERR_INVALID_ARG, "mllama: folder path too long"); mms__hf_close(hf); return NULL; }
    memcpy(hf->dir, dir, n);
    hf->dir[n] = '\0';
    mms__hf_path(hf, "config.json", p, sizeof p);
    if (!(hf->config = mms_json_parse_file(p))) goto fail;
    mms__hf_path(hf, "preprocessor_config.json", p, sizeof p);
    if (mms__file_exists(p) && !(hf->preproc = mms_json_parse_file(p))) goto fail;
    mms__hf_path(hf, "model.safetensors.index.json", p, sizeof p);
    if (mms__file_exists(p)) {
        int64_t map, i;
        if (!(hf->index = mms_json_parse_file(p))) goto fail;
        map = mms_json_get(hf->index, 0, "weight_map");
        if (mms_json_type(hf->index, map) != MMS_JSON_OBJECT) {
            mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': weight_map is %s", p, map < 0 ? "missing" : "not an object");
            goto fail;
        }
        for (i = 0; i < mms_json_len(hf->index, map); i++) {
            const char *name = mms_json_key(hf->index, map, i, NULL), *file = mms_json_str(hf->index, mms_json_at(hf->index, map, i), NULL);
            int s;
            if (!file) { mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': weight_map[\"%.80s\"] is not a file name", p, name); goto fail; }
            if ((s = mms__hf_shard_of(hf, file)) < 0) {
                if (mms__hf_add_shard(hf, file) != MMS_OK) goto fail;
                s = hf->n_shards - 1;
            }
            if (mms_safetensors_find(hf->shards[s], name) < 0) {
                mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': weight_map puts tensor '%.80s' in '%s', which lacks it", p, name, file);
                goto fail;
            }
        }
        for (i = 0; i < hf->n_shards; i++) {
            int64_t t;
            for (t = 0; t < mms_safetensors_n_tensors(hf->shards[i]); t++) {
                struct mms_safetensors_info info;
                const char *in;
                mms_safetensors_get(hf->shards[i], t, &info);
                in = mms_json_str(hf->index, mms_json_get(hf->index, map, info.name), NULL);
                if (!in || mms__hf_shard_of(hf, in) != i) {
                    mms_set_error(MMS_ERR_FORMAT, "mllama: '%s' has tensor '%.80s', which the index %s", mms_safetensors_path(hf->shards[i]), info.name,
                                  in ? "puts in another shard" : "does not list");
                    goto fail;
                }
            }
        }
    } else {
        mms__hf_path(hf, "model.safetensors", p, sizeof p);
        if (!mms__file_exists(p)) { mms_set_error(MMS_ERR_IO, "mllama: '%s' has neither model.safetensors nor model.safetensors.index.json", hf->dir); goto fail; }
        if (mms__hf_add_shard(hf, "model.safetensors") != MMS_OK) goto fail;
    }
    return hf;
fail:
    mms__hf_close(hf);
    return NULL;
}

/* -- hyper-parameters from config.json -- */

/* A positive integer at obj.key (obj named `what` in messages); absent: *out kept unless required. */
static enum mms_status mms__hf_int(const struct mms_json *j, int64_t obj, const char *what, const char *key, bool required, int *out) {
    int64_t v = mms_json_get(j, obj, key), x;
    if (v < 0 || mms_json_type(j, v) == MMS_JSON_NULL) {
        if (!required) return MMS_OK;
        return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': %s%s is missing", mms_json_source(j), what, key);
    }
    if (!mms_json_int(j, v, &x) || x <= 0 || x > (1 << 30))
        return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': %s%s must be an integer from 1 to 2^30", mms_json_source(j), what, key);
    *out = (int)x;
    return MMS_OK;
}

static enum mms_status mms__hf_float(const struct mms_json *j, int64_t obj, const char *what, const char *key, bool required, float *out) {
    int64_t v = mms_json_get(j, obj, key);
    double d;
    if (v < 0 || mms_json_type(j, v) == MMS_JSON_NULL) {
        if (!required) return MMS_OK;
        return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': %s%s is missing", mms_json_source(j), what, key);
    }
    if (!mms_json_num(j, v, &d) || !(d > 0.0) || d > FLT_MAX)
        return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': %s%s must be a positive number", mms_json_source(j), what, key);
    *out = (float)d;
    return MMS_OK;
}

/* An ascending list of indexes below limit into a new array. */
static enum mms_status mms__hf_list(const struct mms_json *j, int64_t obj, const char *what, const char *key, int limit, int **out, int *n_out) {
    int64_t v = mms_json_get(j, obj, key), n = mms_json_len(j, v), i;
    if (mms_json_type(j, v) != MMS_JSON_ARRAY || n < 1 || n > limit)
        return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': %s%s must be a list of 1 to %d layer indexes", mms_json_source(j), what, key, limit);
    if (!(*out = (int *)MMS_MALLOC(sizeof **out * (size_t)n))) return mms_set_error(MMS_ERR_OOM, "mllama: out of memory");
    for (i = 0; i < n; i++) {
        int64_t x;
        if (!mms_json_int(j, mms_json_at(j, v, i), &x) || x < 0 || x >= limit || (i > 0 && x <= (*out)[i - 1]))
            return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': %s%s[%lld] is not an ascending index below %d", mms_json_source(j), what, key, (long long)i, limit);
        (*out)[i] = (int)x;
    }
    *n_out = (int)n;
    return MMS_OK;
}

/* Reads the hyper-parameters; *rope_freqs gets the llama3 divisors (head_dim / 2 floats, to free)
   or NULL when the checkpoint has no llama3 rope scaling. */
static enum mms_status mms__hf_hparams(const struct mms__hf *hf, struct mms_mllama_hparams *hp, int **cross, int **taps, float **rope_freqs) {
    const struct mms_json *j = hf->config;
    const int64_t t = mms_json_get(j, 0, "text_config"), v = mms_json_get(j, 0, "vision_config"), arch = mms_json_get(j, 0, "architectures");
    const char *a0 = mms_json_str(j, mms_json_at(j, arch, 0), NULL), *mt = mms_json_str(j, mms_json_get(j, 0, "model_type"), NULL);
    enum mms_status st;
    int64_t rs;
    *rope_freqs = NULL;
    if (!(a0 && !strcmp(a0, "MllamaForConditionalGeneration")) && !(mt && !strcmp(mt, "mllama")))
        return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s' is not a Llama 3.2 Vision checkpoint (architectures[0] must be MllamaForConditionalGeneration)",
                             mms_json_source(j));
    if (mms_json_type(j, t) != MMS_JSON_OBJECT || mms_json_type(j, v) != MMS_JSON_OBJECT)
        return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': text_config and vision_config must be objects", mms_json_source(j));
    hp->n_ctx_train = 131072;
    hp->rms_eps = 1e-5f;
    hp->rope_freq_base = 500000.0f;
    if ((st = mms__hf_int(j, t, "text_config.", "vocab_size", true, &hp->n_vocab)) != MMS_OK ||
        (st = mms__hf_int(j, t, "text_config.", "num_hidden_layers", true, &hp->n_layer)) != MMS_OK ||
        (st = mms__hf_int(j, t, "text_config.", "max_position_embeddings", false, &hp->n_ctx_train)) != MMS_OK ||
        (st = mms__hf_int(j, t, "text_config.", "hidden_size", true, &hp->n_embd)) != MMS_OK ||
        (st = mms__hf_int(j, t, "text_config.", "intermediate_size", true, &hp->n_ff)) != MMS_OK ||
        (st = mms__hf_int(j, t, "text_config.", "num_attention_heads", true, &hp->n_head)) != MMS_OK ||
        (st = mms__hf_float(j, t, "text_config.", "rope_theta", false, &hp->rope_freq_base)) != MMS_OK ||
        (st = mms__hf_float(j, t, "text_config.", "rms_norm_eps", false, &hp->rms_eps)) != MMS_OK ||
        (st = mms__hf_list(j, t, "text_config.", "cross_attention_layers", hp->n_layer, cross, &hp->n_cross)) != MMS_OK)
        return st;
    hp->n_head_kv = hp->n_head;
    if ((st = mms__hf_int(j, t, "text_config.", "num_key_value_heads", false, &hp->n_head_kv)) != MMS_OK) return st;
    hp->head_dim = hp->n_embd / hp->n_head;
    if ((st = mms__hf_int(j, t, "text_config.", "head_dim", false, &hp->head_dim)) != MMS_OK) return st;
    hp->image_token_id = hp->n_vocab;
    if ((st = mms__hf_int(j, 0, "", "image_token_index", false, &hp->image_token_id)) != MMS_OK) return st;
    if ((st = mms__hf_int(j, v, "vision_config.", "num_hidden_layers", true, &hp->v_n_layer)) != MMS_OK ||
        (st = mms__hf_int(j, v, "vision_config.", "num_global_layers", true, &hp->v_n_global)) != MMS_OK ||
        (st = mms__hf_int(j, v, "vision_config.", "hidden_size", true, &hp->v_n_embd)) != MMS_OK ||
        (st = mms__hf_int(j, v, "vision_config.", "intermediate_size", true, &hp->v_n_ff)) != MMS_OK ||
        (st = mms__hf_int(j, v, "vision_config.", "attention_heads", true, &hp->v_n_head)) != MMS_OK ||
        (st = mms__hf_int(j, v, "vision_config.", "image_size", true, &hp->v_image_size)) != MMS_OK ||
        (st = mms__hf_int(j, v, "vision_config.", "patch_size", true, &hp->v_patch_size)) != MMS_OK ||
        (st = mms__hf_int(j, v, "vision_config.", "max_num_tiles", true, &hp->v_max_tiles)) != MMS_OK ||
        (st = mms__hf_list(j, v, "vision_config.", "intermediate_layers_indices", hp->v_n_layer, taps, &hp->v_n_taps)) != MMS_OK)
        return st;
    hp->v_channels = 3;
    hp->v_eps = 1e-5f;
    if ((st = mms__hf_int(j, v, "vision_config.", "num_channels", false, &hp->v_channels)) != MMS_OK ||
        (st = mms__hf_float(j, v, "vision_config.", "norm_eps", false, &hp->v_eps)) != MMS_OK)
        return st;
    {   /* stated sizes that the shapes imply must agree */
        int out_dim = hp->v_n_embd * (1 + hp->v_n_taps);
        int64_t sar = mms_json_get(j, v, "supported_aspect_ratios"), n_ar = mms__mllama_aspect_ratios(hp->v_max_tiles, NULL, NULL);
        if ((st = mms__hf_int(j, v, "vision_config.", "vision_output_dim", false, &out_dim)) != MMS_OK) return st;
        if (out_dim != hp->v_n_embd * (1 + hp->v_n_taps))
            return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': vision_config.vision_output_dim is %d, hidden_size * (1 + taps) is %d", mms_json_source(j),
                                 out_dim, hp->v_n_embd * (1 + hp->v_n_taps));
        /* Only the list's length counts (the aspect-ratio tables have one row per entry, plus one);
           an image's id comes from the processor's own order, whatever order the list is in: so
           transformers reads it too. */
        if (hp->v_max_tiles <= 16 && sar >= 0 && mms_json_len(j, sar) != n_ar)
            return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': vision_config.supported_aspect_ratios has %lld entries, max_num_tiles %d gives %lld",
                                 mms_json_source(j), (long long)mms_json_len(j, sar), hp->v_max_tiles, (long long)n_ar);
    }
    rs = mms_json_get(j, t, "rope_scaling");
    if (rs >= 0 && mms_json_type(j, rs) != MMS_JSON_NULL) {
        const char *type = mms_json_str(j, mms_json_get(j, rs, "rope_type"), NULL);
        if (!type) type = mms_json_str(j, mms_json_get(j, rs, "type"), NULL);
        if (!type || mms_json_type(j, rs) != MMS_JSON_OBJECT)
            return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': text_config.rope_scaling must be an object with a rope_type", mms_json_source(j));
        if (!strcmp(type, "llama3")) {
            float factor = 8.0f, lo = 1.0f, hi = 4.0f;
            int orig = 8192, i;
            if ((st = mms__hf_float(j, rs, "text_config.rope_scaling.", "factor", true, &factor)) != MMS_OK ||
                (st = mms__hf_float(j, rs, "text_config.rope_scaling.", "low_freq_factor", false, &lo)) != MMS_OK ||
                (st = mms__hf_float(j, rs, "text_config.rope_scaling.", "high_freq_factor", false, &hi)) != MMS_OK ||
                (st = mms__hf_int(j, rs, "text_config.rope_scaling.", "original_max_position_embeddings", true, &orig)) != MMS_OK)
                return st;
            if (!(hi > lo) || hp->head_dim < 2 || hp->head_dim % 2)
                return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': text_config.rope_scaling: high_freq_factor must exceed low_freq_factor", mms_json_source(j));
            if (!(*rope_freqs = (float *)MMS_MALLOC(sizeof(float) * (size_t)(hp->head_dim / 2)))) return mms_set_error(MMS_ERR_OOM, "mllama: out of memory");
            for (i = 0; i < hp->head_dim / 2; i++) {   /* the llama3 divisors (spec 5): 1, factor, or smoothed between */
                const double inv = pow((double)hp->rope_freq_base, -2.0 * i / hp->head_dim), wavelen = 2.0 * 3.14159265358979323846 / inv;
                double div;
                if (wavelen < orig / (double)hi) div = 1.0;
                else if (wavelen > orig / (double)lo) div = factor;
                else {
                    const double s = (orig / wavelen - lo) / ((double)hi - lo);
                    div = 1.0 / ((1.0 - s) / factor + s);
                }
                (*rope_freqs)[i] = (float)div;
            }
        } else if (strcmp(type, "default"))
            return mms_set_error(MMS_ERR_UNSUPPORTED, "mllama: '%s': text_config.rope_scaling.rope_type \"%.20s\" is not supported (llama3 or default)",
                                 mms_json_source(j), type);
    }
    if (hf->preproc) {
        const struct mms_json *p = hf->preproc;
        int64_t mean = mms_json_get(p, 0, "image_mean"), sd = mms_json_get(p, 0, "image_std"), size = mms_json_get(p, 0, "size"), k;
        int tiles = hp->v_max_tiles, h = hp->v_image_size, w = hp->v_image_size;
        struct mms_mllama_hparams clip;
        mms_mllama_hparams_11b(&clip);
        memcpy(hp->image_mean, clip.image_mean, sizeof hp->image_mean);
        memcpy(hp->image_std, clip.image_std, sizeof hp->image_std);
        for (k = 0; k < 3 && (mean >= 0 || sd >= 0); k++) {
            double m, s;
            if (mms_json_len(p, mean) != 3 || mms_json_len(p, sd) != 3 || !mms_json_num(p, mms_json_at(p, mean, k), &m) ||
                !mms_json_num(p, mms_json_at(p, sd, k), &s) || !(s > 0))
                return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': image_mean and image_std must be 3 numbers each (std positive)", mms_json_source(p));
            hp->image_mean[k] = (float)m;
            hp->image_std[k] = (float)s;
        }
        if ((st = mms__hf_int(p, 0, "", "max_image_tiles", false, &tiles)) != MMS_OK ||
            (size >= 0 && ((st = mms__hf_int(p, size, "size.", "height", true, &h)) != MMS_OK || (st = mms__hf_int(p, size, "size.", "width", true, &w)) != MMS_OK)))
            return st;
        if (tiles != hp->v_max_tiles || h != hp->v_image_size || w != hp->v_image_size)
            return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': tiles of %dx%d, at most %d, but config.json says %d, at most %d", mms_json_source(p), w, h,
                                 tiles, hp->v_image_size, hp->v_max_tiles);
    } else {
        struct mms_mllama_hparams clip;
        mms_mllama_hparams_11b(&clip);
        memcpy(hp->image_mean, clip.image_mean, sizeof hp->image_mean);
        memcpy(hp->image_std, clip.image_std, sizeof hp->image_std);
    }
    return MMS_OK;
}

/* -- weights by GGUF name -- */

/* The checkpoint's name (without its prefix) of a GGUF weight name, and how the value is derived. */
static bool mms__hf_name(const char *g, char *out, size_t size, enum mms__hf_xform *x) {
    static const char *const text_layer[][2] = {
        { "attn_norm.weight", "input_layernorm.weight" }, { "ffn_norm.weight", "post_attention_layernorm.weight" },
        { "attn_q.weight", "self_attn.q_proj.weight" }, { "attn_k.weight", "self_attn.k_proj.weight" },
        { "attn_v.weight", "self_attn.v_proj.weight" }, { "attn_output.weight", "self_attn.o_proj.weight" },
        { "ffn_gate.weight", "mlp.gate_proj.weight" }, { "ffn_up.weight", "mlp.up_proj.weight" }, { "ffn_down.weight", "mlp.down_proj.weight" },
        { "cross_attn_q_proj.weight", "cross_attn.q_proj.weight" }, { "cross_attn_k_proj.weight", "cross_attn.k_proj.weight" },
        { "cross_attn_v_proj.weight", "cross_attn.v_proj.weight" }, { "cross_attn_o_proj.weight", "cross_attn.o_proj.weight" },
        { "cross_attn_q_norm.weight", "cross_attn.q_norm.weight" }, { "cross_attn_k_norm.weight", "cross_attn.k_norm.weight" },
        { "cross_attn_attn_gate", "cross_attn_attn_gate" }, { "cross_attn_mlp_gate", "cross_attn_mlp_gate" },
    };
    static const char *const vision_layer[][2] = {
        { "attn_norm.weight", "input_layernorm.weight" }, { "attn_norm.bias", "input_layernorm.bias" },
        { "ffn_norm.weight", "post_attention_layernorm.weight" }, { "ffn_norm.bias", "post_attention_layernorm.bias" },
        { "attn_q.weight", "self_attn.q_proj.weight" }, { "attn_k.weight", "self_attn.k_proj.weight" },
        { "attn_v.weight", "self_attn.v_proj.weight" }, { "attn_output.weight", "self_attn.o_proj.weight" },
        { "ffn_up.weight", "mlp.fc1.weight" }, { "ffn_up.bias", "mlp.fc1.bias" }, { "ffn_down.weight", "mlp.fc2.weight" },
        { "ffn_down.bias", "mlp.fc2.bias" }, { "attn_gate", "gate_attn" }, { "ffn_gate", "gate_ffn" },
    };
    static const char *const top[][2] = {
        { "token_embd.weight", "T:model.embed_tokens.weight" }, { "output_norm.weight", "T:model.norm.weight" }, { "output.weight", "T:lm_head.weight" },
        { "v.patch_embd.weight", "V:patch_embedding.weight" }, { "v.class_embd", "V:class_embedding" },
        { "v.position_embd.weight", "V:gated_positional_embedding.embedding" }, { "v.position_embd.gate", "V:gated_positional_embedding.gate" },
        { "v.tile_position_embd.weight", "V:gated_positional_embedding.tile_embedding.weight" },
        { "v.tile_position_embd.gate", "V:gated_positional_embedding.gate" },
        { "v.pre_tile_position_embd.weight", "V:pre_tile_positional_embedding.embedding.weight" },
        { "v.pre_tile_position_embd.gate", "V:pre_tile_positional_embedding.gate" },
        { "v.post_tile_position_embd.weight", "V:post_tile_positional_embedding.embedding.weight" },
        { "v.post_tile_position_embd.gate", "V:post_tile_positional_embedding.gate" },
        { "v.pre_ln.weight", "V:layernorm_pre.weight" }, { "v.pre_ln.bias", "V:layernorm_pre.bias" },
        { "v.post_ln.weight", "V:layernorm_post.weight" }, { "v.post_ln.bias", "V:layernorm_post.bias" },
        { "mm.0.weight", "P:weight" }, { "mm.0.bias", "P:bias" },
    };
    size_t k;
    int il, used = 0;
    *x = MMS__HF_AS_IS;
    if (sscanf(g, "blk.%d.%n", &il, &used) == 1 && used > 0) {
        for (k = 0; k < sizeof text_layer / sizeof text_layer[0]; k++)
            if (!strcmp(g + used, text_layer[k][0])) { snprintf(out, size, "T:model.layers.%d.%s", il, text_layer[k][1]); return true; }
        return false;
    }
    if ((sscanf(g, "v.blk.%d.%n", &il, &used) == 1 && used > 0) || (sscanf(g, "v.global.blk.%d.%n", &il, &used) == 1 && used > 0)) {
        const bool global = g[2] == 'g';
        for (k = 0; k < sizeof vision_layer / sizeof vision_layer[0]; k++)
            if (!strcmp(g + used, vision_layer[k][0])) {
                snprintf(out, size, "V:%s.layers.%d.%s", global ? "global_transformer" : "transformer", il, vision_layer[k][1]);
                if (k >= 12) *x = MMS__HF_TANH;
                return true;
            }
        return false;
    }
    for (k = 0; k < sizeof top / sizeof top[0]; k++)
        if (!strcmp(g, top[k][0])) {
            snprintf(out, size, "%s", top[k][1]);
            if (!strcmp(g, "v.position_embd.gate")) *x = MMS__HF_ONE_MINUS_TANH;
            else if (strstr(g, ".gate")) *x = MMS__HF_TANH;
            return true;
        }
    return false;
}

/* Finds GGUF weight `name` in the folder: its shard and info (shape in the file's order), and how
   its value is derived. false when the checkpoint has no such tensor. */
static bool mms__hf_find(struct mms__hf *hf, const char *name, struct mms_safetensors_info *info, enum mms__hf_xform *x,
                         const struct mms_safetensors **shard) {
    static const char *const prefixes[3][2] = {
        { "language_model.", "model.language_model." }, { "vision_model.", "model.vision_model." },
        { "multi_modal_projector.", "model.multi_modal_projector." },
    };
    char rel[160], full[224];
    int kind, p, s;
    if (!mms__hf_name(name, rel, sizeof rel, x)) return false;
    kind = rel[0] == 'T' ? 0 : rel[0] == 'V' ? 1 : 2;
    for (p = 0; p < 2; p++) {
        if (kind == 0 && !strcmp(rel + 2, "lm_head.weight")) snprintf(full, sizeof full, p ? "lm_head.weight" : "language_model.lm_head.weight");
        else if (kind == 0 && p == 1) snprintf(full, sizeof full, "model.language_model.%s", rel + 2 + 6);   /* drops "model." */
        else snprintf(full, sizeof full, "%s%s", prefixes[kind][p], rel + 2);
        for (s = 0; s < hf->n_shards; s++) {
            int64_t i = mms_safetensors_find(hf->shards[s], full);
            if (i >= 0) {
                mms_safetensors_get(hf->shards[s], i, info);
                hf->used[s][i] = 1;
                *shard = hf->shards[s];
                return true;
            }
        }
    }
    return false;
}

/* Every tensor of the checkpoint went to a weight: one that did not is an error, not ignored. */
static enum mms_status mms__hf_check_all_used(const struct mms__hf *hf) {
    int s;
    for (s = 0; s < hf->n_shards; s++) {
        int64_t i;
        for (i = 0; i < mms_safetensors_n_tensors(hf->shards[s]); i++)
            if (!hf->used[s][i]) {
                struct mms_safetensors_info info;
                mms_safetensors_get(hf->shards[s], i, &info);
                return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s' has tensor '%.100s', which no weight of the configuration uses",
                                     mms_safetensors_path(hf->shards[s]), info.name);
            }
    }
    return MMS_OK;
}

/* -- a checkpoint folder as a GGUF -- */

/* Rows h*d + p*d/2 + i (the checkpoint's order) to h*d + 2i + p: the self-attention's RoPE pairs
   (GGUF files rotate adjacent pairs) and Ollama's order for the other q/k. */
static void mms__hf_interleave_rows(const char *src, char *dst, int64_t rows, size_t row, int n_heads) {
    const int64_t d = rows / n_heads;
    int64_t h, i;
    int p;
    for (h = 0; h < n_heads; h++)
        for (p = 0; p < 2; p++)
            for (i = 0; i < d / 2; i++) memcpy(dst + (size_t)(h * d + 2 * i + p) * row, src + (size_t)(h * d + p * (d / 2) + i) * row, row);
}

static bool mms__hf_ends_with(const char *s, const char *suffix) {
    const size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* The heads of a q/k projection named as the loader names it, or 0. */
static int mms__hf_qk_heads(const struct mms_mllama_hparams *hp, const char *name) {
    const bool vision = !strncmp(name, "v.", 2);
    if (mms__hf_ends_with(name, "attn_q.weight") || mms__hf_ends_with(name, "cross_attn_q_proj.weight")) return vision ? hp->v_n_head : hp->n_head;
    if (mms__hf_ends_with(name, "attn_k.weight") || mms__hf_ends_with(name, "cross_attn_k_proj.weight")) return vision ? hp->v_n_head : hp->n_head_kv;
    return 0;
}

MMS_API struct mms_gguf *mms_mllama_folder_to_gguf(const char *dir) {
    struct mms_mllama_load_params lp;
    struct mms_mllama_model *m = NULL;
    struct mms_gguf_writer *w = NULL;
    struct mms_gguf *g = NULL;
    mms_backend_t cpu = NULL;
    const struct mms_mllama_hparams *hp;
    void *mem;
    size_t size;
    int b;
    bool ok;
    if (!dir || !mms__hf_is_folder(dir)) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_folder_to_gguf: '%s' is not a checkpoint folder (no config.json)", dir ? dir : "(null)"); return NULL; }
    memset(&lp, 0, sizeof lp);
    lp.path = dir;
    if (!(cpu = mms_backend_cpu_init()) || !(lp.cpu = cpu, m = mms_mllama_model_load(&lp)) || !(w = mms_gguf_writer_new())) goto done;
    hp = &m->hp;
    {
        const struct mms_tensor *e = m->token_embd;
        int32_t cross[256], taps[256];
        int i;
        for (i = 0; i < hp->n_cross && i < 256; i++) cross[i] = hp->cross_layers[i];
        for (i = 0; i < hp->v_n_taps && i < 256; i++) taps[i] = hp->v_taps[i];
        ok = mms_gguf_writer_set_str(w, "general.architecture", "mllama") == MMS_OK &&
             mms_gguf_writer_set_u32(w, "general.file_type", e->type == MMS_TYPE_BF16 ? 32 : e->type == MMS_TYPE_F16 ? 1 : 0) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "general.quantization_version", 2) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.vocab_size", (uint32_t)hp->n_vocab) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.block_count", (uint32_t)hp->n_layer) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.context_length", (uint32_t)hp->n_ctx_train) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.embedding_length", (uint32_t)hp->n_embd) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.feed_forward_length", (uint32_t)hp->n_ff) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.attention.head_count", (uint32_t)hp->n_head) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.attention.head_count_kv", (uint32_t)hp->n_head_kv) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.rope.dimension_count", (uint32_t)hp->head_dim) == MMS_OK &&
             mms_gguf_writer_set_f32(w, "mllama.rope.freq_base", hp->rope_freq_base) == MMS_OK &&
             mms_gguf_writer_set_f32(w, "mllama.attention.layer_norm_rms_epsilon", hp->rms_eps) == MMS_OK &&
             mms_gguf_writer_set_arr_i32(w, "mllama.attention.cross_attention_layers", cross, hp->n_cross) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.image_token_index", (uint32_t)hp->image_token_id) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.vision.block_count", (uint32_t)hp->v_n_layer) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.vision.global.block_count", (uint32_t)hp->v_n_global) == MMS_OK &&
             mms_gguf_writer_set_arr_i32(w, "mllama.vision.intermediate_layers_indices", taps, hp->v_n_taps) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.vision.embedding_length", (uint32_t)hp->v_n_embd) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.vision.feed_forward_length", (uint32_t)hp->v_n_ff) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.vision.attention.head_count", (uint32_t)hp->v_n_head) == MMS_OK &&
             mms_gguf_writer_set_f32(w, "mllama.vision.attention.layer_norm_epsilon", hp->v_eps) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.vision.image_size", (uint32_t)hp->v_image_size) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.vision.patch_size", (uint32_t)hp->v_patch_size) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.vision.max_num_tiles", (uint32_t)hp->v_max_tiles) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.vision.num_channels", (uint32_t)hp->v_channels) == MMS_OK &&
             mms_gguf_writer_set_arr_f32(w, "mllama.vision.image_mean", hp->image_mean, 3) == MMS_OK &&
             mms_gguf_writer_set_arr_f32(w, "mllama.vision.image_std", hp->image_std, 3) == MMS_OK &&
             mms_gguf_writer_set_str(w, "mmsched.mllama.qk_rows", "ollama") == MMS_OK &&
             mms__vocab_hf_kv(dir, w) == MMS_OK;
    }
    for (b = 0; ok && b < 2; b++) {
        const struct mms_tensor *t;
        for (t = mms_get_first_tensor(m->wctx[b]); ok && t; t = mms_get_next_tensor(m->wctx[b], t)) {
            const int heads = mms__hf_qk_heads(hp, t->name);
            char *tmp = NULL;
            const void *data = t->data;
            if (heads) {   /* the GGUF layout's q/k row order (the loader put the checkpoint's back) */
                if (!(tmp = (char *)MMS_MALLOC(mms_nbytes(t)))) { mms_set_error(MMS_ERR_OOM, "mms_mllama_folder_to_gguf: out of memory"); ok = false; break; }
                mms__hf_interleave_rows((const char *)t->data, tmp, mms_nrows(t), mms_row_size(t->type, t->ne[0]), heads);
                data = tmp;
            }
            ok = mms_gguf_writer_add_tensor(w, t->name, t->type, mms_n_dims(t), t->ne, data) == MMS_OK;
            MMS_FREE(tmp);
        }
    }
    if (ok && mms__gguf_writer_to_memory(w, &mem, &size) == MMS_OK) g = mms__gguf_open_owned(mem, size);
done:
    mms_gguf_writer_free(w);
    mms_mllama_model_free(m);
    mms_backend_free(cpu);
    return g;
}
