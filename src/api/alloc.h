/* >>api-alloc -------------------------------------------------------------------------------------
   The graph allocator plans where every tensor of a graph lives inside one or more buffers and
   places them, reusing memory as soon as a tensor is dead. Planning works on lifetime intervals
   (a tensor lives from its producer to its last consumer) and keeps the smallest of several
   placements; it reports the plan, the lower bound and a picture of it.

   Rules:
   - a tensor is planned if it has no memory yet, or its memory is in this allocator's buffers
     (a graph allocated again); tensors with other memory (weights, persistent) are left alone;
   - views cost nothing and keep their source alive until the view's last consumer;
   - inputs (mms_set_input) are placed first, at the bottom, and live through the whole graph: they
     survive compute, so a graph can be computed again on the same inputs (ggml lets an in-place
     op overwrite an input; mms_gallocr_set_inputs_reusable(true) allows that here too);
   - outputs and persistent tensors live to the end of the graph and are never reused in it;
   - in place: an op of the whitelist ADD, SUB, MUL, DIV, SCALE, SQR, SQRT, EXP, TANH, SILU, GELU,
     GELU_TANH, NORM, RMS_NORM, SOFT_MAX and ROPE takes over the memory of src[0] or src[1] when
     that source is planned here, is not a view and has no views, has the same type, shape and
     strides, and this op is its last consumer. (Every CPU kernel of these ops reads a row before
     writing the same row, and other backends must keep that property.)
   - every alloc_graph starts a new generation of its buffers: tensors placed by an earlier
     allocation become stale, and using them is an error (see the lifetime section).
   A plan is reused by alloc_graph only when the graph has the same topology as the one planned
   (ops, types, shapes, strides, flags, sources, which tensors need memory); otherwise it plans
   again and grows the buffers if needed (buffers never shrink; mms_gallocr_get_n_reallocs). */

typedef struct mms_gallocr *mms_gallocr_t;

MMS_API mms_gallocr_t   mms_gallocr_new(mms_backend_buffer_type_t buft);                      /* NULL + last error */
MMS_API mms_gallocr_t   mms_gallocr_new_n(mms_backend_buffer_type_t *bufts, int n_bufs);      /* NULL + last error */
MMS_API void            mms_gallocr_free(mms_gallocr_t galloc);

/* Plan (and allocate the buffers) for a worst-case graph. ids give each node's and leaf's buffer
   (indices into the buffer types of new_n; NULL = all in buffer 0). */
MMS_API enum mms_status mms_gallocr_reserve(mms_gallocr_t galloc, struct mms_cgraph *graph);
MMS_API enum mms_status mms_gallocr_reserve_n(mms_gallocr_t galloc, struct mms_cgraph *graph,
                                              const int *node_buffer_ids, const int *leaf_buffer_ids);
/* Place every planned tensor of graph (planning first when the topology changed). Views of
   placed tensors are initialised. */
MMS_API enum mms_status mms_gallocr_alloc_graph(mms_gallocr_t galloc, struct mms_cgraph *graph);
MMS_API size_t          mms_gallocr_get_buffer_size(mms_gallocr_t galloc, int buffer_id);  /* bytes allocated */

MMS_API void mms_gallocr_set_inputs_reusable(mms_gallocr_t galloc, bool reusable);  /* default false */
MMS_API void mms_gallocr_set_inplace(mms_gallocr_t galloc, bool enabled);           /* default true */

/* The plan: one entry per planned tensor, in execution order (leafs first). Steps are node
   indices; -1 is "before the first node" (leafs and inputs). */
struct mms_gallocr_tensor_info {
    const struct mms_tensor *tensor;
    int    buffer_id;
    int    chunk;                         /* which buffer of a buffer id split by max size */
    size_t offset;                        /* bytes from the start of the chunk */
    size_t size;                          /* bytes reserved, aligned */
    int    first_use, last_use;           /* steps: producer and last consumer (or the end) */
    const struct mms_tensor *inplace_of;  /* the dead source whose memory this took over, or NULL */
};

struct mms_gallocr_buffer_info {
    size_t      planned;        /* bytes the plan needs (all chunks) */
    size_t      lower_bound;    /* the largest sum of live sizes at any step, under the rules above */
    size_t      bound_universal;/* output plus everything still needed after each step, max over steps
                                   (no plan can go below it, whatever it overwrites) */
    size_t      no_reuse;       /* every planned tensor in its own memory */
    size_t      allocated;      /* bytes of the buffers now held (never less than planned) */
    int         n_chunks;
    int         n_tensors;
    const char *strategy;       /* the placement that won */
};

MMS_API int             mms_gallocr_get_n_buffers(mms_gallocr_t galloc);
MMS_API enum mms_status mms_gallocr_get_buffer_info(mms_gallocr_t galloc, int buffer_id, struct mms_gallocr_buffer_info *info);
MMS_API int             mms_gallocr_get_n_tensor_infos(mms_gallocr_t galloc);
MMS_API const struct mms_gallocr_tensor_info *mms_gallocr_get_tensor_info(mms_gallocr_t galloc, int i);
MMS_API int             mms_gallocr_get_n_reallocs(mms_gallocr_t galloc);  /* times a buffer had to grow */
MMS_API int             mms_gallocr_get_n_plans(mms_gallocr_t galloc);     /* times a plan was made */
MMS_API int64_t         mms_gallocr_get_plan_time_us(mms_gallocr_t galloc);/* duration of the last planning */
/* A table of the plan: per buffer the sizes and bounds, then per tensor buffer, offset, size, steps. */
MMS_API void            mms_gallocr_print_plan(mms_gallocr_t galloc, FILE *out);
/* An SVG picture of one buffer's plan: execution step across, offset up, one rectangle per tensor
   (in-place reuse drawn as the same rectangle continuing with a different shade, views as ticks),
   the live bytes per step as a line, the lower bound dashed. */
MMS_API enum mms_status mms_gallocr_write_svg(mms_gallocr_t galloc, int buffer_id, const char *path);
