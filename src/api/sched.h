/* >>api-sched -------------------------------------------------------------------------------------
   The scheduler runs graphs over several backends: it decides where each op runs, cuts the graph
   into splits with the copies they need, plans all compute memory with one graph allocator, and
   keeps the lifetime promises:
   - an op runs where its weights live, where the caller pinned it, or where its neighbours run;
     ops a backend does not support fall back to one that does; inputs of a split that live in
     memory its backend cannot use are copied in;
   - a tensor marked with mms_set_persistent is kept: a graph that expands it computes it into a
     buffer of its own on its backend, outside the reusable compute memory, and every later graph of
     the same scheduler reads it as an input (on any backend) until mms_backend_sched_release or
     sched_free; reading it before it is computed, or after something it was computed from has been
     written, is an error;
   - caller tensors are written only by a successful alloc_graph (their placement) and by compute
     (their versions), never by reserve (manual section 8);
   - using in a new graph a result that an earlier graph left in compute memory is an error that
     names the tensor, the graph it came from and the fix; so is reading it back (it is stale);
   - the caller's graph is never rewired: the scheduler computes on its own copies of the nodes,
     which share memory with the caller's tensors; reserve-then-alloc of one graph works, and
     computing a graph other than the one allocated is an error.
   Debugging aids (set by the environment when the scheduler is made, or by the calls below):
     MMS_SCHED_DEBUG=1   a trace of each allocation: splits, their inputs and copies, buffer sizes
     MMS_SCHED_DEBUG=2   also every node: backend, why there, buffer, offset, size, live range
     MMS_SCHED_POISON=1  fill compute memory with 0xFF bytes (NaN in f32, f16 and bf16) at each
                         allocation, so reading memory this graph did not write shows as NaN
     MMS_SCHED_DUMP=glob write every computed node whose name matches (* and ?) to a file, with a
                         checksum; MMS_SCHED_DUMP_DIR (default ".") chooses the folder
   The trace goes to stderr (or the FILE given to mms_backend_sched_set_debug) whatever the log
   level. Formats are described in the manual. */

typedef struct mms_backend_sched *mms_backend_sched_t;

/* ask = true: does the callback want to see tensor t after it is computed? ask = false: t has been
   computed (read it with mms_backend_tensor_get); return false to stop (compute returns MMS_ABORTED). */
typedef bool (*mms_backend_sched_eval_callback)(struct mms_tensor *t, bool ask, void *user_data);

/* backends in priority order (index 0 first); bufts: the compute buffer type per backend, or NULL
   for each backend's default. parallel: keep several copies of split inputs so consecutive graphs
   can overlap (pipeline parallelism). op_offload: run ops with large batches on a higher-priority
   backend even when their weights are in host memory (the weights are copied in). */
MMS_API mms_backend_sched_t mms_backend_sched_new(mms_backend_t *backends, mms_backend_buffer_type_t *bufts, int n_backends,
                                                  bool parallel, bool op_offload);   /* NULL + last error */
MMS_API void                mms_backend_sched_free(mms_backend_sched_t sched);     /* releases persistent tensors too */

/* Plan compute memory for a worst-case graph (no tensor is placed). */
MMS_API enum mms_status mms_backend_sched_reserve(mms_backend_sched_t sched, struct mms_cgraph *graph);
/* Assign backends, split, plan (again only if the topology changed) and place every tensor. */
MMS_API enum mms_status mms_backend_sched_alloc_graph(mms_backend_sched_t sched, struct mms_cgraph *graph);
/* Compute the allocated graph (allocating it first if nothing is allocated). */
MMS_API enum mms_status mms_backend_sched_graph_compute(mms_backend_sched_t sched, struct mms_cgraph *graph);
MMS_API enum mms_status mms_backend_sched_graph_compute_async(mms_backend_sched_t sched, struct mms_cgraph *graph);
MMS_API enum mms_status mms_backend_sched_synchronize(mms_backend_sched_t sched);
/* Forget the allocation and the pins: every tensor in compute memory becomes stale. */
MMS_API void            mms_backend_sched_reset(mms_backend_sched_t sched);

/* Pin a tensor (an op) to a backend for the next allocations, until reset. */
MMS_API enum mms_status mms_backend_sched_set_tensor_backend(mms_backend_sched_t sched, struct mms_tensor *tensor, mms_backend_t backend);
MMS_API mms_backend_t   mms_backend_sched_get_tensor_backend(mms_backend_sched_t sched, const struct mms_tensor *tensor);
MMS_API void            mms_backend_sched_set_eval_callback(mms_backend_sched_t sched, mms_backend_sched_eval_callback callback, void *user_data);

/* Free the memory of a persistent tensor (it becomes stale). */
MMS_API enum mms_status mms_backend_sched_release(mms_backend_sched_t sched, struct mms_tensor *tensor);

MMS_API int           mms_backend_sched_get_n_backends(mms_backend_sched_t sched);
MMS_API mms_backend_t mms_backend_sched_get_backend(mms_backend_sched_t sched, int i);
MMS_API int           mms_backend_sched_get_n_splits(mms_backend_sched_t sched);     /* of the last graph split */
MMS_API int           mms_backend_sched_get_n_copies(mms_backend_sched_t sched);     /* pipeline copies: 1, or more with parallel */
MMS_API int           mms_backend_sched_get_n_split_inputs(mms_backend_sched_t sched); /* tensors copied between backends per compute */
MMS_API size_t        mms_backend_sched_get_buffer_size(mms_backend_sched_t sched, mms_backend_t backend);      /* compute memory */
MMS_API size_t        mms_backend_sched_get_persistent_size(mms_backend_sched_t sched, mms_backend_t backend);  /* kept tensors */
MMS_API int           mms_backend_sched_get_n_reallocs(mms_backend_sched_t sched);   /* compute buffer growths */
/* The compute-memory plan of the last allocation: see mms_gallocr_* (buffer i is backend i). */
MMS_API mms_gallocr_t mms_backend_sched_get_gallocr(mms_backend_sched_t sched);

/* Debugging aids (the environment variables above set the defaults). */
MMS_API void            mms_backend_sched_set_debug(mms_backend_sched_t sched, int level, FILE *out);   /* out NULL: stderr */
MMS_API void            mms_backend_sched_set_poison(mms_backend_sched_t sched, bool poison);
MMS_API enum mms_status mms_backend_sched_set_dump(mms_backend_sched_t sched, const char *pattern, const char *dir);
