/* >>api-backend -----------------------------------------------------------------------------------
   Memory and execution. A buffer type says where memory lives (host, a device); a buffer is one
   allocation of it; tensors are placed inside buffers. A backend runs graphs whose tensors live in
   memory it can read. Placing a tensor writes its placement record (struct mms_placement: the
   memory kind from the buffer's usage, the buffer's uid and generation), so using it after its
   buffer was freed, or after its memory was handed out again (mms_backend_buffer_reset), is an
   MMS_ERR_STALE error instead of silent garbage. */

typedef struct mms_backend_buffer_type *mms_backend_buffer_type_t;
typedef struct mms_backend_buffer      *mms_backend_buffer_t;
typedef struct mms_backend             *mms_backend_t;
typedef struct mms_backend_event       *mms_backend_event_t;

/* A buffer's usage decides the memory kind of the tensors placed in it afterwards: ANY and
   WEIGHTS give MMS_MEMORY_STATIC, COMPUTE gives MMS_MEMORY_COMPUTE, PERSISTENT gives
   MMS_MEMORY_PERSISTENT, RESERVE gives MMS_MEMORY_RESERVE. Graph allocators and schedulers set
   COMPUTE, PERSISTENT and RESERVE on their own buffers; callers set WEIGHTS (or leave ANY). */
enum mms_buffer_usage {
    MMS_BUFFER_USAGE_ANY        = 0,
    MMS_BUFFER_USAGE_WEIGHTS    = 1,  /* the scheduler runs ops where their weights live */
    MMS_BUFFER_USAGE_COMPUTE    = 2,  /* reused at every graph allocation */
    MMS_BUFFER_USAGE_PERSISTENT = 3,  /* one kept tensor of a scheduler */
    MMS_BUFFER_USAGE_RESERVE    = 4   /* stand-ins while a scheduler plans: the buffer has no memory */
};

MMS_API const char          *mms_backend_buft_name(mms_backend_buffer_type_t buft);
MMS_API mms_backend_buffer_t mms_backend_buft_alloc_buffer(mms_backend_buffer_type_t buft, size_t size); /* NULL + last error */
MMS_API size_t               mms_backend_buft_get_alignment(mms_backend_buffer_type_t buft);
MMS_API size_t               mms_backend_buft_get_max_size(mms_backend_buffer_type_t buft);  /* SIZE_MAX if unlimited */
MMS_API size_t               mms_backend_buft_get_alloc_size(mms_backend_buffer_type_t buft, const struct mms_tensor *tensor);
MMS_API bool                 mms_backend_buft_is_host(mms_backend_buffer_type_t buft);

MMS_API void                 mms_backend_buffer_free(mms_backend_buffer_t buffer);   /* NULL is fine */
MMS_API const char          *mms_backend_buffer_name(mms_backend_buffer_t buffer);
MMS_API void                *mms_backend_buffer_get_base(mms_backend_buffer_t buffer);
MMS_API size_t               mms_backend_buffer_get_size(mms_backend_buffer_t buffer);
MMS_API size_t               mms_backend_buffer_get_alignment(mms_backend_buffer_t buffer);
MMS_API size_t               mms_backend_buffer_get_alloc_size(mms_backend_buffer_t buffer, const struct mms_tensor *tensor);
MMS_API bool                 mms_backend_buffer_is_host(mms_backend_buffer_t buffer);
MMS_API mms_backend_buffer_type_t mms_backend_buffer_get_type(mms_backend_buffer_t buffer);
MMS_API void                 mms_backend_buffer_set_usage(mms_backend_buffer_t buffer, enum mms_buffer_usage usage);
MMS_API enum mms_buffer_usage mms_backend_buffer_get_usage(mms_backend_buffer_t buffer);
MMS_API enum mms_status      mms_backend_buffer_clear(mms_backend_buffer_t buffer, uint8_t value);
/* Start a new generation: every tensor placed in the buffer before becomes stale. Allocators call
   this before handing the memory out again. */
MMS_API void                 mms_backend_buffer_reset(mms_backend_buffer_t buffer);
MMS_API uint64_t             mms_backend_buffer_get_generation(mms_backend_buffer_t buffer);

/* Place a tensor (not a view) at addr inside buffer; tensor memory must not already be set. */
MMS_API enum mms_status mms_backend_tensor_alloc(mms_backend_buffer_t buffer, struct mms_tensor *tensor, void *addr);
/* Give a view the memory of its view_src (which must be placed). */
MMS_API enum mms_status mms_backend_view_init(struct mms_tensor *tensor);
/* A question, so it logs nothing: OK if the tensor's memory is valid now; MMS_ERR_STATE if it was
   never placed (or is a planning stand-in); MMS_ERR_STALE if its buffer was freed or reset since,
   or, for a kept tensor, if something it was computed from has been written since (section 6 of
   the manual). The thread's last error then says which and what to do. */
MMS_API enum mms_status mms_backend_tensor_check(const struct mms_tensor *tensor);
/* The kind of memory the tensor was placed in (its record; it may be stale: check it to know). */
MMS_API enum mms_memory_kind mms_tensor_memory_kind(const struct mms_tensor *tensor);
MMS_API const char          *mms_memory_kind_name(enum mms_memory_kind kind);   /* "compute", ... */

/* Data in and out, by byte range of a contiguous tensor. Works for tensors in any buffer and for
   tensors of an allocating (host) context. Range, placement and staleness are checked. */
MMS_API enum mms_status mms_backend_tensor_set(struct mms_tensor *tensor, const void *data, size_t offset, size_t size);
MMS_API enum mms_status mms_backend_tensor_get(const struct mms_tensor *tensor, void *data, size_t offset, size_t size);
MMS_API enum mms_status mms_backend_tensor_memset(struct mms_tensor *tensor, uint8_t value, size_t offset, size_t size);
/* Copy between two tensors of the same layout, in any buffers (through the host if needed). */
MMS_API enum mms_status mms_backend_tensor_copy(const struct mms_tensor *src, struct mms_tensor *dst);

/* Place every tensor of ctx that has no memory yet (views are initialised from their sources) in
   one new buffer. NULL + last error on failure (MMS_ERR_INVALID_ARG with nothing to allocate). */
MMS_API mms_backend_buffer_t mms_backend_alloc_ctx_tensors_from_buft(struct mms_context *ctx, mms_backend_buffer_type_t buft);
MMS_API mms_backend_buffer_t mms_backend_alloc_ctx_tensors(struct mms_context *ctx, mms_backend_t backend);

MMS_API const char          *mms_backend_name(mms_backend_t backend);
MMS_API void                 mms_backend_free(mms_backend_t backend);   /* NULL is fine */
MMS_API mms_backend_buffer_type_t mms_backend_get_default_buffer_type(mms_backend_t backend);
MMS_API mms_backend_buffer_t mms_backend_alloc_buffer(mms_backend_t backend, size_t size);
MMS_API size_t               mms_backend_get_alignment(mms_backend_t backend);
MMS_API size_t               mms_backend_get_max_size(mms_backend_t backend);
MMS_API bool                 mms_backend_supports_op(mms_backend_t backend, const struct mms_tensor *op);
MMS_API bool                 mms_backend_supports_buft(mms_backend_t backend, mms_backend_buffer_type_t buft);
MMS_API bool                 mms_backend_offload_op(mms_backend_t backend, const struct mms_tensor *op);

/* Compute every node of graph, in order. Every tensor must be placed in memory this backend can
   read, and live (see mms_backend_tensor_check); a graph whose build failed is refused. */
MMS_API enum mms_status mms_backend_graph_compute(mms_backend_t backend, struct mms_cgraph *graph);
MMS_API enum mms_status mms_backend_graph_compute_async(mms_backend_t backend, struct mms_cgraph *graph);
MMS_API enum mms_status mms_backend_synchronize(mms_backend_t backend);
MMS_API enum mms_status mms_backend_tensor_set_async(mms_backend_t backend, struct mms_tensor *tensor, const void *data, size_t offset, size_t size);
MMS_API enum mms_status mms_backend_tensor_get_async(mms_backend_t backend, const struct mms_tensor *tensor, void *data, size_t offset, size_t size);
/* Queued on backend_dst after the work queued on backend_src; falls back to a synchronous copy. */
MMS_API enum mms_status mms_backend_tensor_copy_async(mms_backend_t backend_src, mms_backend_t backend_dst,
                                                      const struct mms_tensor *src, struct mms_tensor *dst);

/* Events order work across backends. A backend without events gets NULL from event_new; the
   scheduler then synchronizes instead. */
MMS_API mms_backend_event_t mms_backend_event_new(mms_backend_t backend);
MMS_API void                mms_backend_event_free(mms_backend_event_t event);
MMS_API enum mms_status     mms_backend_event_record(mms_backend_event_t event);
MMS_API enum mms_status     mms_backend_event_synchronize(mms_backend_event_t event);
MMS_API enum mms_status     mms_backend_event_wait(mms_backend_t backend, mms_backend_event_t event);

/* >>api-cpu ---------------------------------------------------------------------------------------
   The CPU backend: host memory aligned to 64 bytes, a thread pool, AVX2/FMA/F16C kernels chosen at
   run time when the CPU has them, and a portable scalar path. */

MMS_API mms_backend_t   mms_backend_cpu_init(void);   /* NULL + last error */
MMS_API bool            mms_backend_is_cpu(mms_backend_t backend);
/* Threads of the pool, the caller included: 1..4096, or 0 for the default, one per core. At most
   one per core works on a node at a time (more only wait); which nodes are split across them is
   decided as the graph runs, from what splitting costs on the machine at that moment (manual
   section 9): a busy machine's other programs slow a graph down, they do not stall it. */
MMS_API enum mms_status mms_backend_cpu_set_n_threads(mms_backend_t backend, int n_threads);
MMS_API int             mms_backend_cpu_get_n_threads(mms_backend_t backend);
/* Which nodes are split across the threads: those worth it as measured (AUTO, the default), every
   node (ALL: each kernel's parts run on every thread count, which tests want), or none (NONE).
   MMS_CPU_SPLIT=auto|all|none in the environment sets it for every CPU backend made after. */
enum mms_cpu_split {
    MMS_CPU_SPLIT_AUTO = 0,
    MMS_CPU_SPLIT_ALL  = 1,
    MMS_CPU_SPLIT_NONE = 2
};
MMS_API enum mms_status mms_backend_cpu_set_split(mms_backend_t backend, enum mms_cpu_split split);
MMS_API mms_backend_buffer_type_t mms_backend_cpu_buffer_type(void);
/* Wrap caller-owned host memory (a mapped model file, say) as a buffer; freeing it frees nothing. */
MMS_API mms_backend_buffer_t mms_backend_cpu_buffer_from_ptr(void *ptr, size_t size);
/* CPU_REPACK: host memory for weights, each kept in the CPU kernels' interleaved layout where one
   exists for its type and shape (mms_backend_cpu_repacks: Q4_0, Q4_K, Q5_K, Q6_K and Q8_0 matrices of at
   least 8 rows, 2D, contiguous; others are stored as in a CPU buffer). Q4_0, Q6_K and Q8_0 take the same bytes
   as the file's layout, Q4_K 2.8% more, Q5_K 2.3% (mms_backend_buft_get_alloc_size tells); a
   prompt-size product skips repacking its tiles, a decode step reads groups of 8 rows side by
   side (4 for Q4_0 and Q8_0, 2 for the K types; see the CPU backend's manual section). Such a tensor may only be read by MUL_MAT as its
   first operand (computing anything else that reads or views it fails with MMS_ERR_UNSUPPORTED);
   mms_backend_tensor_set/get convert and take whole tensors only; copies to other buffers
   convert back. Only the CPU backend uses these buffers (they are not host buffers to others). */
MMS_API mms_backend_buffer_type_t mms_backend_cpu_repack_buffer_type(void);
MMS_API bool                      mms_backend_cpu_repacks(const struct mms_tensor *tensor);
/* Per-op-type time profile: while on, each computed node's wall time (from its start until every
   thread is done with it) is added to its op's total. print writes one line per op type, slowest
   first, and resets the totals. MMS_CPU_PROFILE=1 in the environment turns it on for every CPU
   backend and prints to stderr when the backend is freed. */
MMS_API void            mms_backend_cpu_set_profile(mms_backend_t backend, bool on);
MMS_API void            mms_backend_cpu_print_profile(mms_backend_t backend, FILE *out);

enum mms_cpu_kernels {
    MMS_CPU_KERNELS_AUTO         = 0,  /* the best set this CPU and build support */
    MMS_CPU_KERNELS_SCALAR       = 1,  /* portable C */
    MMS_CPU_KERNELS_AVX2         = 2,  /* x86-64: AVX2 + FMA + F16C */
    MMS_CPU_KERNELS_NEON         = 3,  /* 64-bit ARM: NEON (every ARMv8-A CPU) */
    MMS_CPU_KERNELS_NEON_DOTPROD = 4,  /* 64-bit ARM: NEON + the dot-product instructions (ARMv8.2 dotprod) */
    MMS_CPU_KERNELS_AVX512       = 5   /* x86-64: AVX2's set + AVX-512 F/BW/DQ/VL, VNNI and BF16 (Zen 4, Sapphire Rapids) */
};
/* Choose the kernel set for the whole process (also MMS_CPU_KERNELS=auto|scalar|avx2|avx512|neon|
   neon_dotprod in the environment, read once). A set this CPU or build lacks is
   MMS_ERR_UNSUPPORTED; mms_cpu_kernels_supported tells beforehand. */
MMS_API enum mms_status       mms_cpu_set_kernels(enum mms_cpu_kernels kernels);
MMS_API enum mms_cpu_kernels  mms_cpu_get_kernels(void);         /* the one in use, never AUTO */
MMS_API const char           *mms_cpu_kernels_name(enum mms_cpu_kernels kernels);   /* "unknown" past the last set */
MMS_API bool                  mms_cpu_kernels_supported(enum mms_cpu_kernels kernels);
MMS_API bool                  mms_cpu_has_avx2(void);            /* CPU and build both support it */
MMS_API int                   mms_cpu_count(void);               /* online cores */

/* >>api-cuda --------------------------------------------------------------------------------------
   The CUDA backend lives in mmsched_cuda.cu, built with nvcc and linked when MMS_CUDA is defined.
   Without it these return 0 / NULL / false, with MMS_ERR_UNSUPPORTED as the last error. */

MMS_API int                       mms_backend_cuda_get_device_count(void);
MMS_API mms_backend_t             mms_backend_cuda_init(int device);
MMS_API bool                      mms_backend_is_cuda(mms_backend_t backend);
MMS_API mms_backend_buffer_type_t mms_backend_cuda_buffer_type(int device);
MMS_API mms_backend_buffer_type_t mms_backend_cuda_host_buffer_type(void);  /* pinned host memory */

/* >>api-backend-impl ------------------------------------------------------------------------------
   The interface a backend implements. The CPU backend, the CUDA backend and the test suite's
   limited backend are all written against it. Members marked optional may be NULL. Errors are
   reported with mms_set_error and returned as statuses. */

struct mms_backend_buffer_type_i {
    const char          *(*get_name)      (mms_backend_buffer_type_t buft);
    mms_backend_buffer_t (*alloc_buffer)  (mms_backend_buffer_type_t buft, size_t size);  /* NULL + mms_set_error */
    size_t               (*get_alignment) (mms_backend_buffer_type_t buft);
    size_t               (*get_max_size)  (mms_backend_buffer_type_t buft);  /* optional: SIZE_MAX */
    size_t               (*get_alloc_size)(mms_backend_buffer_type_t buft, const struct mms_tensor *tensor); /* optional: mms_nbytes */
    bool                 (*is_host)       (mms_backend_buffer_type_t buft);  /* optional: false */
};

struct mms_backend_buffer_type {
    struct mms_backend_buffer_type_i iface;
    void *context;
};

struct mms_backend_buffer_i {
    void            (*free_buffer)  (mms_backend_buffer_t buffer);  /* optional: release context */
    void           *(*get_base)     (mms_backend_buffer_t buffer);
    enum mms_status (*init_tensor)  (mms_backend_buffer_t buffer, struct mms_tensor *tensor);  /* optional */
    enum mms_status (*memset_tensor)(mms_backend_buffer_t buffer, struct mms_tensor *tensor, uint8_t value, size_t offset, size_t size);
    enum mms_status (*set_tensor)   (mms_backend_buffer_t buffer, struct mms_tensor *tensor, const void *data, size_t offset, size_t size);
    enum mms_status (*get_tensor)   (mms_backend_buffer_t buffer, const struct mms_tensor *tensor, void *data, size_t offset, size_t size);
    /* optional: copy src (in any buffer) into dst (in this buffer) directly; return false to let
       the caller go through the host */
    bool            (*cpy_tensor)   (mms_backend_buffer_t buffer, const struct mms_tensor *src, struct mms_tensor *dst);
    enum mms_status (*clear)        (mms_backend_buffer_t buffer, uint8_t value);
};

struct mms_backend_buffer {
    struct mms_backend_buffer_i iface;
    mms_backend_buffer_type_t   buft;
    void                       *context;
    size_t                      size;
    enum mms_buffer_usage       usage;
    uint64_t                    uid;         /* unique in the process; set by mms_backend_buffer_init */
    uint64_t                    generation;  /* starts at 1; bumped by mms_backend_buffer_reset */
    uint64_t                    n_clears;    /* mms_backend_buffer_clear calls: writes to every tensor in it */
};

/* Create the buffer object for memory a buffer type allocated (registers it as live). */
MMS_API mms_backend_buffer_t mms_backend_buffer_init(mms_backend_buffer_type_t buft, struct mms_backend_buffer_i iface,
                                                     void *context, size_t size);

struct mms_backend_i {
    const char               *(*get_name)(mms_backend_t backend);
    void                      (*free)(mms_backend_t backend);
    mms_backend_buffer_type_t (*get_default_buffer_type)(mms_backend_t backend);
    bool                      (*supports_op)(mms_backend_t backend, const struct mms_tensor *op);
    bool                      (*supports_buft)(mms_backend_t backend, mms_backend_buffer_type_t buft);
    bool                      (*offload_op)(mms_backend_t backend, const struct mms_tensor *op);  /* optional */
    /* May return before the work is done if the backend is asynchronous; synchronize waits. */
    enum mms_status           (*graph_compute)(mms_backend_t backend, struct mms_cgraph *graph);
    enum mms_status           (*synchronize)(mms_backend_t backend);                               /* optional */
    enum mms_status           (*set_tensor_async)(mms_backend_t backend, struct mms_tensor *tensor,
                                                  const void *data, size_t offset, size_t size);   /* optional */
    enum mms_status           (*get_tensor_async)(mms_backend_t backend, const struct mms_tensor *tensor,
                                                  void *data, size_t offset, size_t size);         /* optional */
    /* optional: MMS_ERR_UNSUPPORTED lets the caller fall back to a synchronous copy */
    enum mms_status           (*cpy_tensor_async)(mms_backend_t backend_src, mms_backend_t backend_dst,
                                                  const struct mms_tensor *src, struct mms_tensor *dst);
    mms_backend_event_t       (*event_new)(mms_backend_t backend);                                  /* optional */
    void                      (*event_free)(mms_backend_event_t event);
    enum mms_status           (*event_record)(mms_backend_event_t event);
    enum mms_status           (*event_synchronize)(mms_backend_event_t event);
    enum mms_status           (*event_wait)(mms_backend_t backend, mms_backend_event_t event);
};

struct mms_backend {
    struct mms_backend_i iface;
    void *context;
};

struct mms_backend_event {
    mms_backend_t backend;
    void *context;
};
