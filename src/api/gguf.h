/* >>api-gguf --------------------------------------------------------------------------------------
   GGUF files (versions 2 and 3): a reader that memory-maps the file and validates every count,
   offset, size and type against the file's length before anything is used (a truncated or
   hostile file is an MMS_ERR_FORMAT error naming what is wrong and where, never a crash), and a
   writer. Keys and tensors are looked up by name; values convert between integer types when they
   fit. Tensor data stays in the mapping until the file is closed. */

enum mms_gguf_type {      /* GGUF's own value type ids */
    MMS_GGUF_TYPE_NONE    = -1,  /* not in files: what the type getters return for a bad index */
    MMS_GGUF_TYPE_UINT8   = 0,
    MMS_GGUF_TYPE_INT8    = 1,
    MMS_GGUF_TYPE_UINT16  = 2,
    MMS_GGUF_TYPE_INT16   = 3,
    MMS_GGUF_TYPE_UINT32  = 4,
    MMS_GGUF_TYPE_INT32   = 5,
    MMS_GGUF_TYPE_FLOAT32 = 6,
    MMS_GGUF_TYPE_BOOL    = 7,
    MMS_GGUF_TYPE_STRING  = 8,
    MMS_GGUF_TYPE_ARRAY   = 9,
    MMS_GGUF_TYPE_UINT64  = 10,
    MMS_GGUF_TYPE_INT64   = 11,
    MMS_GGUF_TYPE_FLOAT64 = 12
};

struct mms_gguf;

/* Open a file (memory-mapped) or a block of memory (which must outlive the handle). NULL + last
   error (MMS_ERR_IO for the file, MMS_ERR_FORMAT for its contents). */
MMS_API struct mms_gguf *mms_gguf_open(const char *path);
MMS_API struct mms_gguf *mms_gguf_open_memory(const void *data, size_t size);
MMS_API void             mms_gguf_close(struct mms_gguf *gguf);

MMS_API uint32_t    mms_gguf_get_version(const struct mms_gguf *gguf);
MMS_API size_t      mms_gguf_get_alignment(const struct mms_gguf *gguf);   /* general.alignment, default 32 */
MMS_API const char *mms_gguf_get_path(const struct mms_gguf *gguf);        /* "" for memory */

/* Metadata. Keys are found by exact name (bytes compared as they are); -1 if absent. A bad index
   raises MMS_ERR_INVALID_ARG and gets NULL, MMS_GGUF_TYPE_NONE or -1, as does a non-array given to
   the two array calls. */
MMS_API int64_t            mms_gguf_get_n_kv(const struct mms_gguf *gguf);
MMS_API int64_t            mms_gguf_find_key(const struct mms_gguf *gguf, const char *key);
MMS_API const char        *mms_gguf_get_key(const struct mms_gguf *gguf, int64_t i);
MMS_API enum mms_gguf_type mms_gguf_get_kv_type(const struct mms_gguf *gguf, int64_t i);
MMS_API enum mms_gguf_type mms_gguf_get_arr_type(const struct mms_gguf *gguf, int64_t i);   /* element type of an array */
MMS_API int64_t            mms_gguf_get_arr_n(const struct mms_gguf *gguf, int64_t i);      /* elements of an array */

/* Typed getters by key. MMS_ERR_INVALID_ARG if the key is missing, MMS_ERR_FORMAT if the value has
   another type or does not fit (integers convert between widths and signedness when in range;
   f32 accepts f32 and f64). The message names the key, the file and the types. */
MMS_API enum mms_status mms_gguf_get_u32(const struct mms_gguf *gguf, const char *key, uint32_t *out);
MMS_API enum mms_status mms_gguf_get_i32(const struct mms_gguf *gguf, const char *key, int32_t *out);
MMS_API enum mms_status mms_gguf_get_u64(const struct mms_gguf *gguf, const char *key, uint64_t *out);
MMS_API enum mms_status mms_gguf_get_f32(const struct mms_gguf *gguf, const char *key, float *out);
MMS_API enum mms_status mms_gguf_get_bool(const struct mms_gguf *gguf, const char *key, bool *out);
/* Strings are not NUL-terminated in the file: the pointer is into the mapping, with its length. */
MMS_API enum mms_status mms_gguf_get_str(const struct mms_gguf *gguf, const char *key, const char **out, size_t *len);
/* Numeric arrays, converted element by element into out (the first cap elements); *n gets the
   length, so cap 0 with out NULL asks for it. i32 takes arrays of any integer type, f32 of f32/f64. */
MMS_API enum mms_status mms_gguf_get_arr_i32(const struct mms_gguf *gguf, const char *key, int32_t *out, int64_t cap, int64_t *n);
MMS_API enum mms_status mms_gguf_get_arr_f32(const struct mms_gguf *gguf, const char *key, float *out, int64_t cap, int64_t *n);
/* Element i of a string array. */
MMS_API enum mms_status mms_gguf_get_arr_str(const struct mms_gguf *gguf, const char *key, int64_t i, const char **out, size_t *len);

/* Tensors. ggml_type is GGUF's type id; type is ours (MMS_TYPE_INVALID when we have no such type:
   the tensor can still be listed, not loaded). ne has n_dims entries, the rest 1. */
struct mms_gguf_tensor_info {
    const char    *name;
    uint32_t       ggml_type;
    enum mms_type  type;
    int            n_dims;
    int64_t        ne[MMS_MAX_DIMS];
    uint64_t       offset;      /* from the start of the data section */
    size_t         size;        /* bytes */
    const void    *data;        /* into the mapping */
};

MMS_API int64_t         mms_gguf_get_n_tensors(const struct mms_gguf *gguf);
MMS_API int64_t         mms_gguf_find_tensor(const struct mms_gguf *gguf, const char *name);   /* -1 if absent */
MMS_API enum mms_status mms_gguf_get_tensor(const struct mms_gguf *gguf, int64_t i, struct mms_gguf_tensor_info *info);

/* The ggml type id of our type (GGUF stores those); -1 for none. */
MMS_API int             mms_gguf_type_from_mms(enum mms_type type);
MMS_API enum mms_type   mms_gguf_type_to_mms(uint32_t ggml_type);

/* Writer: keys and tensors in the order added; written in one go. Every add copies its data.
   Setting a key again replaces its value in place; general.alignment must be a u32 power of two. */
struct mms_gguf_writer;

MMS_API struct mms_gguf_writer *mms_gguf_writer_new(void);      /* NULL + last error */
MMS_API void                    mms_gguf_writer_free(struct mms_gguf_writer *w);
MMS_API enum mms_status mms_gguf_writer_set_u32(struct mms_gguf_writer *w, const char *key, uint32_t v);
MMS_API enum mms_status mms_gguf_writer_set_i32(struct mms_gguf_writer *w, const char *key, int32_t v);
MMS_API enum mms_status mms_gguf_writer_set_u64(struct mms_gguf_writer *w, const char *key, uint64_t v);
MMS_API enum mms_status mms_gguf_writer_set_f32(struct mms_gguf_writer *w, const char *key, float v);
MMS_API enum mms_status mms_gguf_writer_set_bool(struct mms_gguf_writer *w, const char *key, bool v);
MMS_API enum mms_status mms_gguf_writer_set_str(struct mms_gguf_writer *w, const char *key, const char *v);
MMS_API enum mms_status mms_gguf_writer_set_arr_i32(struct mms_gguf_writer *w, const char *key, const int32_t *v, int64_t n);
MMS_API enum mms_status mms_gguf_writer_set_arr_f32(struct mms_gguf_writer *w, const char *key, const float *v, int64_t n);
MMS_API enum mms_status mms_gguf_writer_set_arr_str(struct mms_gguf_writer *w, const char *key, const char *const *v, int64_t n);
/* Copies a key (any type) from an open file. */
MMS_API enum mms_status mms_gguf_writer_copy_kv(struct mms_gguf_writer *w, const struct mms_gguf *src, int64_t i);
/* A tensor of our type, ne[0..n_dims-1]; data holds mms_row_size(type, ne[0]) * rows bytes. */
MMS_API enum mms_status mms_gguf_writer_add_tensor(struct mms_gguf_writer *w, const char *name, enum mms_type type,
                                                   int n_dims, const int64_t *ne, const void *data);
MMS_API enum mms_status mms_gguf_writer_write(const struct mms_gguf_writer *w, const char *path);   /* version 3 */
