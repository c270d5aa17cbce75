/* >>api-json ---------------------------------------------------------------------------------------
   A strict JSON reader (RFC 8259), for the files Hugging Face checkpoints come with. Anything the
   grammar does not allow is an MMS_ERR_FORMAT error naming the source, the line and column and
   what is wrong: trailing commas, comments, NaN or Infinity, leading zeros, numbers too large for
   a double, control characters or invalid UTF-8 in strings, lone surrogates in \u escapes,
   duplicate keys in an object, nesting deeper than 128, anything after the value. Values are
   numbered: 0 is the root, -1 stands for none (a missing key, a wrong type, a bad index). */

enum mms_json_type {
    MMS_JSON_NONE   = 0,   /* not a value: what mms_json_type says for -1 or a bad index */
    MMS_JSON_NULL   = 1,
    MMS_JSON_FALSE  = 2,
    MMS_JSON_TRUE   = 3,
    MMS_JSON_NUMBER = 4,
    MMS_JSON_STRING = 5,
    MMS_JSON_ARRAY  = 6,
    MMS_JSON_OBJECT = 7
};

struct mms_json;

/* source names the text in error messages (a path, or NULL). NULL + last error. */
MMS_API struct mms_json *mms_json_parse(const char *text, size_t len, const char *source);
MMS_API struct mms_json *mms_json_parse_file(const char *path);    /* MMS_ERR_IO when it cannot be read */
MMS_API void             mms_json_free(struct mms_json *json);
MMS_API const char      *mms_json_source(const struct mms_json *json);

MMS_API enum mms_json_type mms_json_type(const struct mms_json *json, int64_t v);
MMS_API int64_t     mms_json_len(const struct mms_json *json, int64_t v);             /* elements or members; -1 for others */
MMS_API int64_t     mms_json_at(const struct mms_json *json, int64_t v, int64_t i);   /* element i, or the value of member i */
MMS_API const char *mms_json_key(const struct mms_json *json, int64_t object, int64_t i, size_t *len);   /* member i's key */
MMS_API int64_t     mms_json_get(const struct mms_json *json, int64_t object, const char *key);          /* by key, O(log n) */
/* A string's bytes (escapes decoded, NUL-terminated, valid UTF-8) and length; NULL for other types. */
MMS_API const char *mms_json_str(const struct mms_json *json, int64_t v, size_t *len);
MMS_API bool        mms_json_num(const struct mms_json *json, int64_t v, double *out);
/* An integral number of at most 2^53 in magnitude, which a double holds exactly (an integer
   literal beyond it is refused even when its double looks integral); false otherwise. */
MMS_API bool        mms_json_int(const struct mms_json *json, int64_t v, int64_t *out);
/* The compact JSON text of value v (no whitespace; strings escaped as Python's
   json.dumps(ensure_ascii=False) does; numbers as the shortest text that reads back as the same
   double), and of a string of len bytes: like snprintf, at most cap bytes with a NUL, returning
   the whole length; -1 for a bad value or arguments. */
MMS_API int64_t     mms_json_write(const struct mms_json *json, int64_t v, char *buf, size_t cap);
MMS_API int64_t     mms_json_write_string(const char *s, size_t len, char *buf, size_t cap);

/* >>api-safetensors --------------------------------------------------------------------------------
   safetensors files: an 8-byte little-endian header length, a JSON header naming each tensor's
   dtype, shape and data_offsets, then the data. The file is memory-mapped and validated before
   anything is used: the header length against the file, the header as strict JSON, every entry's
   fields and types, the dtype, the shape against the byte count, the offsets inside the data and
   neither overlapping nor leaving holes (as the format's reference implementation requires).
   Errors are MMS_ERR_FORMAT naming the file, the tensor and the field. */

struct mms_safetensors;

struct mms_safetensors_info {
    const char   *name;
    const char   *dtype;       /* as written: "F32", "BF16", "I64", ... */
    enum mms_type type;        /* F32, F16 or BF16; MMS_TYPE_INVALID for the others (listed, not loadable) */
    int           n_dims;      /* 0..8 */
    int64_t       shape[8];    /* in the file's order (PyTorch's: the last dimension is contiguous) */
    size_t        size;        /* bytes */
    const void   *data;        /* into the mapping */
};

MMS_API struct mms_safetensors *mms_safetensors_open(const char *path);               /* NULL + last error */
MMS_API struct mms_safetensors *mms_safetensors_open_memory(const void *data, size_t size, const char *name);
MMS_API void                    mms_safetensors_close(struct mms_safetensors *st);
MMS_API const char             *mms_safetensors_path(const struct mms_safetensors *st);
MMS_API int64_t                 mms_safetensors_n_tensors(const struct mms_safetensors *st);
MMS_API int64_t                 mms_safetensors_find(const struct mms_safetensors *st, const char *name);   /* -1 if absent */
MMS_API enum mms_status         mms_safetensors_get(const struct mms_safetensors *st, int64_t i, struct mms_safetensors_info *info);
/* The header's __metadata__ object (-1 if none) in the parsed header. */
MMS_API const struct mms_json  *mms_safetensors_header(const struct mms_safetensors *st);
MMS_API int64_t                 mms_safetensors_metadata(const struct mms_safetensors *st);

/* >>api-ollama -------------------------------------------------------------------------------------
   Ollama's model store, where `ollama pull` puts models, read in place. A name
   [HOST/][NAMESPACE/]MODEL[:TAG] (defaults registry.ollama.ai, library, latest; Ollama's rules for
   each part; "ollama:" before it is optional) names the manifest STORE/manifests/HOST/NAMESPACE/
   MODEL/TAG, a JSON document whose "layers" list blobs by "mediaType" and "digest": the blob of
   sha256:HEX is STORE/blobs/sha256-HEX. The model is the (last) layer of media type
   application/vnd.ollama.image.model, the vision projector of Llama 3.2 Vision the layer of
   application/vnd.ollama.image.projector (the two-file layout); the template, license and
   parameter layers are not read. STORE is $OLLAMA_MODELS when set; else ~/.ollama/models
   (%USERPROFILE%\.ollama\models on Windows), then /usr/share/ollama/.ollama/models (Linux installs
   that run Ollama as a service), the first that has the manifest.
   mms_mllama_model_load and mms_vocab_load_file take "ollama:NAME" as their path. Errors name
   the path: MMS_ERR_INVALID_ARG for a name Ollama would not accept; MMS_ERR_IO for a model the
   store does not have or a blob that cannot be read; MMS_ERR_FORMAT for a manifest that is not
   JSON or has no model layer, a digest that is not sha256, a blob whose size is not the
   manifest's; MMS_ERR_UNSUPPORTED for an adapter (LoRA) layer or several projectors. */

#define MMS_OLLAMA_PREFIX "ollama:"

struct mms_ollama_model {
    char manifest[4096];    /* the manifest read */
    char model[4096];       /* the model's blob */
    char projector[4096];   /* the projector's blob; "" when the manifest has none */
};

MMS_API enum mms_status mms_ollama_resolve(const char *name, struct mms_ollama_model *out);
