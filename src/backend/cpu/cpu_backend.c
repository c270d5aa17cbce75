/* >>cpu-backend ===================================================================================
   The CPU backend: its host buffer type, the op table and the graph loop on the thread pool. */

#define MMS__CPU_ALIGN 64

/* -- host buffers -- */

static void *mms__cpu_buffer_get_base(mms_backend_buffer_t b) { return b->context; }
static void  mms__cpu_buffer_free(mms_backend_buffer_t b)     { mms__aligned_free(b->context); }

static enum mms_status mms__cpu_buffer_memset_tensor(mms_backend_buffer_t b, struct mms_tensor *t, uint8_t value, size_t offset, size_t size) {
    MMS__UNUSED(b);
    memset((char *)t->data + offset, value, size);
    return MMS_OK;
}
static enum mms_status mms__cpu_buffer_set_tensor(mms_backend_buffer_t b, struct mms_tensor *t, const void *data, size_t offset, size_t size) {
    MMS__UNUSED(b);
    memcpy((char *)t->data + offset, data, size);
    return MMS_OK;
}
static enum mms_status mms__cpu_buffer_get_tensor(mms_backend_buffer_t b, const struct mms_tensor *t, void *data, size_t offset, size_t size) {
    MMS__UNUSED(b);
    memcpy(data, (const char *)t->data + offset, size);
    return MMS_OK;
}
static bool mms__cpu_buffer_cpy_tensor(mms_backend_buffer_t b, const struct mms_tensor *src, struct mms_tensor *dst) {
    MMS__UNUSED(b);
    if (src->buffer && !mms_backend_buffer_is_host(src->buffer)) return false;
    memcpy(dst->data, src->data, mms_nbytes(src));
    return true;
}
static enum mms_status mms__cpu_buffer_clear(mms_backend_buffer_t b, uint8_t value) {
    memset(b->context, value, b->size);
    return MMS_OK;
}

static const struct mms_backend_buffer_i mms__cpu_buffer_iface = {
    mms__cpu_buffer_free, mms__cpu_buffer_get_base, NULL, mms__cpu_buffer_memset_tensor,
    mms__cpu_buffer_set_tensor, mms__cpu_buffer_get_tensor, mms__cpu_buffer_cpy_tensor, mms__cpu_buffer_clear
};

/* the same, for memory the caller owns: freeing the buffer leaves it alone */
static const struct mms_backend_buffer_i mms__cpu_ptr_buffer_iface = {
    NULL, mms__cpu_buffer_get_base, NULL, mms__cpu_buffer_memset_tensor,
    mms__cpu_buffer_set_tensor, mms__cpu_buffer_get_tensor, mms__cpu_buffer_cpy_tensor, mms__cpu_buffer_clear
};

static const char *mms__cpu_buft_get_name(mms_backend_buffer_type_t buft) { MMS__UNUSED(buft); return "CPU"; }
static size_t mms__cpu_buft_get_alignment(mms_backend_buffer_type_t buft) { MMS__UNUSED(buft); return MMS__CPU_ALIGN; }
static bool   mms__cpu_buft_is_host(mms_backend_buffer_type_t buft) { MMS__UNUSED(buft); return true; }

static mms_backend_buffer_t mms__cpu_buft_alloc_buffer(mms_backend_buffer_type_t buft, size_t size) {
    const size_t align = size >= ((size_t)8 << 20) ? (size_t)2 << 20 : MMS__CPU_ALIGN;   /* big ones: huge-page aligned */
    void *mem = mms__aligned_alloc(align, MMS__ALIGN_UP(size ? size : 1, MMS__CPU_ALIGN));
    mms_backend_buffer_t b;
    if (!mem) { mms_set_error(MMS_ERR_OOM, "CPU buffer: cannot allocate %zu bytes of host memory", size); return NULL; }
    if (align != MMS__CPU_ALIGN) mms__advise_huge_pages(mem, size);
    b = mms_backend_buffer_init(buft, mms__cpu_buffer_iface, mem, size);
    if (!b) mms__aligned_free(mem);
    return b;
}

static struct mms_backend_buffer_type mms__cpu_buft = {
    { mms__cpu_buft_get_name, mms__cpu_buft_alloc_buffer, mms__cpu_buft_get_alignment, NULL, NULL, mms__cpu_buft_is_host },
    NULL
};

MMS_API mms_backend_buffer_type_t mms_backend_cpu_buffer_type(void) { return &mms__cpu_buft; }

MMS_API mms_backend_buffer_t mms_backend_cpu_buffer_from_ptr(void *ptr, size_t size) {
    if (!ptr && size) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_cpu_buffer_from_ptr: ptr is NULL"); return NULL; }
    return mms_backend_buffer_init(&mms__cpu_buft, mms__cpu_ptr_buffer_iface, ptr, size);
}

/* -- CPU_REPACK buffers: weights in the kernels' layout (repack.c) -- */

static enum mms_status mms__repack_whole(const struct mms_tensor *t, size_t offset, size_t size, const char *what) {
    if (t->view_src)
        return mms_set_error(MMS_ERR_UNSUPPORTED, "CPU_REPACK buffer: %s is a view of %s, which is kept repacked; %s the whole tensor instead",
                             mms__tensor_desc(t).s, mms__tensor_desc(t->view_src).s, what);
    if (offset == 0 && size == mms_nbytes(t)) return MMS_OK;
    return mms_set_error(MMS_ERR_UNSUPPORTED, "CPU_REPACK buffer: %s keeps %s repacked; %s it whole (offset 0, %zu bytes), not %zu bytes at %zu",
                         mms__tensor_desc(t).s, mms_type_name(t->type), what, mms_nbytes(t), size, offset);
}
static enum mms_status mms__repack_buffer_memset_tensor(mms_backend_buffer_t b, struct mms_tensor *t, uint8_t value, size_t offset, size_t size) {
    enum mms_status st;
    void *bytes;
    if (!mms__repack_layout(t->view_src ? t->view_src : t)) return mms__cpu_buffer_memset_tensor(b, t, value, offset, size);
    if ((st = mms__repack_whole(t, offset, size, "set")) != MMS_OK) return st;
    if (!(bytes = MMS_MALLOC(size))) return mms_set_error(MMS_ERR_OOM, "CPU_REPACK buffer: no host memory to stage %zu bytes", size);
    memset(bytes, value, size);   /* the tensor those bytes make, repacked */
    mms__repack_set(t, bytes);
    MMS_FREE(bytes);
    return MMS_OK;
}
static enum mms_status mms__repack_buffer_set_tensor(mms_backend_buffer_t b, struct mms_tensor *t, const void *data, size_t offset, size_t size) {
    enum mms_status st;
    if (!mms__repack_layout(t->view_src ? t->view_src : t)) return mms__cpu_buffer_set_tensor(b, t, data, offset, size);
    if ((st = mms__repack_whole(t, offset, size, "set")) != MMS_OK) return st;
    mms__repack_set(t, data);
    return MMS_OK;
}
static enum mms_status mms__repack_buffer_get_tensor(mms_backend_buffer_t b, const struct mms_tensor *t, void *data, size_t offset, size_t size) {
    enum mms_status st;
    if (!mms__repack_layout(t->view_src ? t->view_src : t)) return mms__cpu_buffer_get_tensor(b, t, data, offset, size);
    if ((st = mms__repack_whole(t, offset, size, "read")) != MMS_OK) return st;
    mms__repack_rows(t, 0, t->ne[1], data);
    return MMS_OK;
}
static bool mms__repack_buffer_cpy_tensor(mms_backend_buffer_t b, const struct mms_tensor *src, struct mms_tensor *dst) {
    MMS__UNUSED(b);
    if (src->buffer && !mms_backend_buffer_is_host(src->buffer)) return false;   /* a repacked source converts back first */
    if (mms__repack_layout(dst)) mms__repack_set(dst, src->data);
    else memcpy(dst->data, src->data, mms_nbytes(src));
    return true;
}

static const struct mms_backend_buffer_i mms__repack_buffer_iface = {
    mms__cpu_buffer_free, mms__cpu_buffer_get_base, NULL, mms__repack_buffer_memset_tensor,
    mms__repack_buffer_set_tensor, mms__repack_buffer_get_tensor, mms__repack_buffer_cpy_tensor, mms__cpu_buffer_clear
};

static const char *mms__cpu_repack_buft_get_name(mms_backend_buffer_type_t buft) { MMS__UNUSED(buft); return "CPU_REPACK"; }

/* Not host memory to others: only the CPU backend reads its tensors in place; copies convert. */
static mms_backend_buffer_t mms__cpu_repack_buft_alloc_buffer(mms_backend_buffer_type_t buft, size_t size) {
    mms_backend_buffer_t b = mms__cpu_buft_alloc_buffer(buft, size);
    if (b) b->iface = mms__repack_buffer_iface;
    return b;
}

static size_t mms__cpu_repack_buft_get_alloc_size(mms_backend_buffer_type_t buft, const struct mms_tensor *t) {
    MMS__UNUSED(buft);
    return mms__repack_layout(t) ? mms__repack_size(t) : mms_nbytes(t);
}

static struct mms_backend_buffer_type mms__cpu_repack_buft = {
    { mms__cpu_repack_buft_get_name, mms__cpu_repack_buft_alloc_buffer, mms__cpu_buft_get_alignment, NULL,
      mms__cpu_repack_buft_get_alloc_size, NULL },
    NULL
};

MMS_API mms_backend_buffer_type_t mms_backend_cpu_repack_buffer_type(void) { return &mms__cpu_repack_buft; }

MMS_API bool mms_backend_cpu_repacks(const struct mms_tensor *tensor) { return tensor && mms__repack_layout(tensor); }

/* -- the op table -- */

typedef void (*mms__cpu_kernel)(const struct mms__compute_params *p, struct mms_tensor *dst);

static mms__cpu_kernel mms__cpu_kernel_for(enum mms_op op) {
    switch (op) {
        case MMS_OP_ADD: case MMS_OP_SUB: case MMS_OP_MUL: case MMS_OP_DIV:
            return mms__cpu_binary;
        case MMS_OP_SCALE: case MMS_OP_SQR: case MMS_OP_SQRT: case MMS_OP_EXP: case MMS_OP_TANH:
        case MMS_OP_SILU: case MMS_OP_GELU: case MMS_OP_GELU_TANH:
            return mms__cpu_unary;
        case MMS_OP_DUP: case MMS_OP_CONT: case MMS_OP_CPY:
            return mms__cpu_copy;
        case MMS_OP_NORM: case MMS_OP_RMS_NORM: return mms__cpu_norm;
        case MMS_OP_SUM_ROWS:       return mms__cpu_sum_rows;
        case MMS_OP_ARGMAX:         return mms__cpu_argmax;
        case MMS_OP_MUL_MAT:        return mms__cpu_mul_mat;
        case MMS_OP_SOFT_MAX:       return mms__cpu_soft_max;
        case MMS_OP_ROPE:           return mms__cpu_rope;
        case MMS_OP_FLASH_ATTN_EXT: return mms__cpu_flash_attn_ext;
        case MMS_OP_CONCAT:         return mms__cpu_concat;
        case MMS_OP_PAD:            return mms__cpu_pad;
        case MMS_OP_GET_ROWS:       return mms__cpu_get_rows;
        case MMS_OP_IM2COL:         return mms__cpu_im2col;
        case MMS_OP_REPEAT:         return mms__cpu_repeat;
        case MMS_OP_SET_ROWS:       return mms__cpu_set_rows;
        default:                    return NULL;   /* NONE and views compute nothing */
    }
}

/* Scratch bytes one thread needs for a node. */
static size_t mms__cpu_work_size(const struct mms_tensor *t) {
    size_t row = (size_t)MMS__MAX(t->ne[0], t->src[0] ? t->src[0]->ne[0] : 0) * sizeof(float);
    switch (t->op) {
        case MMS_OP_MUL_MAT:        return mms__mul_mat_work_size(t);
        case MMS_OP_FLASH_ATTN_EXT: return mms__flash_attn_work_size(t);
        case MMS_OP_ROPE:           return 2 * row + 2 * (size_t)mms_get_op_params_i32(t, 0) * sizeof(float);
        default:                    return 3 * row;
    }
}

static bool mms__cpu_supports_types(const struct mms_tensor *t) {
    int i;
    for (i = 0; i < MMS_MAX_SRC; i++) if (t->src[i] && !mms__type_valid(t->src[i]->type)) return false;
    return mms__type_valid(t->type);
}

/* -- the backend -- */

struct mms__cpu_profile {
    bool    on, print_at_free;            /* print_at_free: turned on by MMS_CPU_PROFILE */
    int64_t us[MMS_OP_COUNT], nodes[MMS_OP_COUNT], graphs;
};

struct mms__cpu_backend {
    mms__mutex              lock;         /* one graph at a time: the pool, the scratch and the profile are shared */
    int                     n_threads;
    int                     n_parts;      /* a split node's parts: the threads, at most one per core */
    enum mms_cpu_split      split;
    struct mms__threadpool *pool;
    void                   *work;         /* per-thread scratch, grown as needed */
    size_t                  work_size;
    struct mms__cpu_profile prof;
};

/* One node handed to the pool: every part runs the node's kernel with its own part index. */
struct mms__cpu_node_job {
    struct mms_tensor         *node;
    mms__cpu_kernel            kernel;
    char                      *work;
    size_t                     wsize;     /* per thread, a multiple of the alignment */
    mms__atomic_int            counter;   /* the kernels' work counter, zeroed for each node */
    struct mms__compute_state *state;
};

static void mms__cpu_node_part(void *arg, int part, int n_parts, int worker) {
    struct mms__cpu_node_job *job = (struct mms__cpu_node_job *)arg;
    struct mms__compute_params p;
    p.ith = part;
    p.nth = n_parts;
    p.wdata = (float *)(job->work + (size_t)worker * job->wsize);
    p.wsize = job->wsize;
    p.counter = &job->counter;
    p.state = job->state;
    job->kernel(&p, job->node);
}

/* About how long one thread takes for a node, in microseconds: its multiply-adds at
   MMS__CPU_FLOPS_PER_US and the bytes it reads and writes at MMS__CPU_BYTES_PER_US. It only
   decides which nodes are worth splitting, where being within a few times of the truth is enough. */
#define MMS__CPU_FLOPS_PER_US 30000.0
#define MMS__CPU_BYTES_PER_US 10000.0
static double mms__cpu_node_cost_us(const struct mms_tensor *t) {
    double flops = 0.0, bytes = (double)mms_nbytes(t);
    int i;
    for (i = 0; i < MMS_MAX_SRC; i++) if (t->src[i]) bytes += (double)mms_nbytes(t->src[i]);
    if (t->op == MMS_OP_MUL_MAT)          /* K x M by K x (N x batches) */
        flops = 2.0 * (double)t->src[0]->ne[0] * (double)t->src[0]->ne[1] * (double)mms_nrows(t->src[1]);
    else if (t->op == MMS_OP_FLASH_ATTN_EXT)   /* Q K^T and P V: D x Lq x Lk x heads, twice */
        flops = 4.0 * (double)t->src[0]->ne[0] * (double)mms_nrows(t->src[0]) * (double)t->src[1]->ne[1];
    return flops / MMS__CPU_FLOPS_PER_US + bytes / MMS__CPU_BYTES_PER_US;
}

/* The caller walks the graph; a node worth splitting (mms__threadpool_worth) is handed to the
   pool in one part per worker, the others run whole on the caller. */
static enum mms_status mms__cpu_run_graph(struct mms__cpu_backend *cpu, struct mms_cgraph *g, char *work, size_t wsize) {
    struct mms__compute_state state;
    struct mms__cpu_node_job job;
    int i, n = mms_graph_n_nodes(g);
    memset(&state, 0, sizeof state);
    memset(&job, 0, sizeof job);
    job.work = work;
    job.wsize = wsize;
    job.state = &state;
    for (i = 0; i < n && !mms__atomic_load(&state.failed); i++) {
        struct mms_tensor *node = mms_graph_node(g, i);
        const int64_t t0 = cpu->prof.on ? mms_time_us() : 0;
        int parts;
        job.kernel = mms__cpu_kernel_for(node->op);
        if (!job.kernel || mms_nelements(node) == 0) continue;
        job.node = node;
        mms__atomic_store(&job.counter, 0);
        parts = cpu->split == MMS_CPU_SPLIT_ALL ? cpu->n_threads   /* the partition of every thread count, cores or not */
              : cpu->split == MMS_CPU_SPLIT_NONE ? 1
              : mms__threadpool_worth(cpu->pool, mms__cpu_node_cost_us(node)) ? cpu->n_parts : 1;
        mms__threadpool_run(cpu->pool, mms__cpu_node_part, &job, parts);
        if (cpu->prof.on) {
            cpu->prof.us[node->op] += mms_time_us() - t0;
            cpu->prof.nodes[node->op]++;
        }
    }
    if (state.failed.v) return mms_set_error(state.status, "%s", state.error);
    return MMS_OK;
}

static const char *mms__cpu_get_name(mms_backend_t b) { MMS__UNUSED(b); return "CPU"; }

MMS_API void mms_backend_cpu_set_profile(mms_backend_t b, bool on) {
    if (mms_backend_is_cpu(b)) ((struct mms__cpu_backend *)b->context)->prof.on = on;
}

MMS_API void mms_backend_cpu_print_profile(mms_backend_t b, FILE *out) {
    struct mms__cpu_profile *pr;
    int64_t total = 0;
    int i, best;
    bool done[MMS_OP_COUNT];
    if (!mms_backend_is_cpu(b) || !out) return;
    pr = &((struct mms__cpu_backend *)b->context)->prof;
    for (i = 0; i < MMS_OP_COUNT; i++) { total += pr->us[i]; done[i] = pr->nodes[i] == 0; }
    fprintf(out, "CPU profile: %lld graphs, %.3f ms in nodes\n", (long long)pr->graphs, (double)total / 1000.0);
    for (;;) {                           /* slowest op type first */
        for (best = -1, i = 0; i < MMS_OP_COUNT; i++) if (!done[i] && (best < 0 || pr->us[i] > pr->us[best])) best = i;
        if (best < 0) break;
        done[best] = true;
        fprintf(out, "  %-16s %6lld nodes %12.3f ms %5.1f%%\n", mms_op_name((enum mms_op)best), (long long)pr->nodes[best],
                (double)pr->us[best] / 1000.0, total ? 100.0 * (double)pr->us[best] / (double)total : 0.0);
    }
    memset(pr->us, 0, sizeof pr->us);
    memset(pr->nodes, 0, sizeof pr->nodes);
    pr->graphs = 0;
}

static void mms__cpu_free(mms_backend_t b) {
    struct mms__cpu_backend *cpu = (struct mms__cpu_backend *)b->context;
    if (cpu->prof.print_at_free && cpu->prof.graphs) mms_backend_cpu_print_profile(b, stderr);
    mms__threadpool_free(cpu->pool);
    mms__aligned_free(cpu->work);
    mms__mutex_destroy(&cpu->lock);
    MMS_FREE(cpu);
    MMS_FREE(b);
}

static mms_backend_buffer_type_t mms__cpu_get_default_buffer_type(mms_backend_t b) { MMS__UNUSED(b); return &mms__cpu_buft; }

static bool mms__cpu_supports_op(mms_backend_t b, const struct mms_tensor *op) {
    MMS__UNUSED(b);
    return (op->op == MMS_OP_NONE || mms_op_is_view(op->op) || mms__cpu_kernel_for(op->op) != NULL) && mms__cpu_supports_types(op);
}

static bool mms__cpu_supports_buft(mms_backend_t b, mms_backend_buffer_type_t buft) {
    MMS__UNUSED(b);
    return mms_backend_buft_is_host(buft) || buft == &mms__cpu_repack_buft;
}

static enum mms_status mms__cpu_graph_compute_locked(struct mms__cpu_backend *cpu, struct mms_cgraph *g) {
    size_t wsize = 0;
    int i;
    for (i = 0; i < mms_graph_n_nodes(g); i++) {
        const struct mms_tensor *t = mms_graph_node(g, i);
        const struct mms_tensor *repacked = mms__repack_misuse(t);
        if (repacked)
            return mms_set_error(MMS_ERR_UNSUPPORTED, "CPU backend: %s %s uses %s, which a CPU_REPACK buffer keeps repacked: only MUL_MAT "
                                 "may read it, as its first operand (keep weights used otherwise in a CPU buffer)",
                                 mms_op_name(t->op), mms__tensor_desc(t).s, mms__tensor_desc(repacked).s);
        if (mms__cpu_kernel_for(t->op)) wsize = MMS__MAX(wsize, mms__cpu_work_size(t));
    }
    wsize = MMS__ALIGN_UP(wsize + 64, MMS__CPU_ALIGN);
    if (wsize * (size_t)cpu->n_threads > cpu->work_size) {
        void *w = mms__aligned_alloc(MMS__CPU_ALIGN, wsize * (size_t)cpu->n_threads);
        if (!w) return mms_set_error(MMS_ERR_OOM, "CPU backend: cannot allocate %zu bytes of scratch memory", wsize * (size_t)cpu->n_threads);
        mms__aligned_free(cpu->work);
        cpu->work = w;
        cpu->work_size = wsize * (size_t)cpu->n_threads;
    }
    if (cpu->prof.on) cpu->prof.graphs++;
    return mms__cpu_run_graph(cpu, g, (char *)cpu->work, wsize);
}

/* Graphs of several schedulers (contexts on other threads) that share this backend take turns. */
static enum mms_status mms__cpu_graph_compute(mms_backend_t b, struct mms_cgraph *g) {
    struct mms__cpu_backend *cpu = (struct mms__cpu_backend *)b->context;
    enum mms_status st;
    mms__mutex_lock(&cpu->lock);
    st = mms__cpu_graph_compute_locked(cpu, g);
    mms__mutex_unlock(&cpu->lock);
    return st;
}

static const struct mms_backend_i mms__cpu_backend_iface = {
    mms__cpu_get_name, mms__cpu_free, mms__cpu_get_default_buffer_type, mms__cpu_supports_op, mms__cpu_supports_buft,
    NULL,                    /* offload_op */
    mms__cpu_graph_compute,
    NULL, NULL, NULL, NULL,  /* synchronous: no synchronize, async set/get or copies */
    NULL, NULL, NULL, NULL, NULL
};

MMS_API mms_backend_t mms_backend_cpu_init(void) {
    mms_backend_t b = (mms_backend_t)MMS_MALLOC(sizeof *b);
    struct mms__cpu_backend *cpu = (struct mms__cpu_backend *)MMS_MALLOC(sizeof *cpu);
    if (!b || !cpu) {
        MMS_FREE(b);
        MMS_FREE(cpu);
        mms_set_error(MMS_ERR_OOM, "mms_backend_cpu_init: out of host memory");
        return NULL;
    }
    memset(cpu, 0, sizeof *cpu);
    cpu->n_threads = cpu->n_parts = mms_cpu_count();
    cpu->pool = mms__threadpool_new(cpu->n_threads);
    if (!cpu->pool) {
        MMS_FREE(b);
        MMS_FREE(cpu);
        mms_set_error(MMS_ERR_BACKEND, "mms_backend_cpu_init: cannot start %d threads", mms_cpu_count());
        return NULL;
    }
    mms__mutex_init(&cpu->lock);
    mms_cpu_get_kernels();   /* resolve MMS_CPU_KERNELS now, not in the middle of a graph */
    if (getenv("MMS_CPU_PROFILE") && atoi(getenv("MMS_CPU_PROFILE")) > 0) cpu->prof.on = cpu->prof.print_at_free = true;
    if (getenv("MMS_CPU_SPLIT")) {
        const char *e = getenv("MMS_CPU_SPLIT");
        if (!strcmp(e, "all")) cpu->split = MMS_CPU_SPLIT_ALL;
        else if (!strcmp(e, "none")) cpu->split = MMS_CPU_SPLIT_NONE;
        else if (strcmp(e, "auto") != 0) mms__log(MMS_LOG_WARN, "MMS_CPU_SPLIT=%s is not auto, all or none: auto", e);
    }
    b->iface = mms__cpu_backend_iface;
    b->context = cpu;
    return b;
}

MMS_API bool mms_backend_is_cpu(mms_backend_t b) { return b && b->iface.get_name == mms__cpu_get_name; }

MMS_API enum mms_status mms_backend_cpu_set_n_threads(mms_backend_t b, int n_threads) {
    struct mms__cpu_backend *cpu;
    struct mms__threadpool *pool;
    if (!mms_backend_is_cpu(b)) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_cpu_set_n_threads: not a CPU backend");
    if (n_threads < 0 || n_threads > 4096)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_cpu_set_n_threads: n_threads must be 1..4096 (0: the default), got %d", n_threads);
    if (n_threads == 0) n_threads = mms_cpu_count();
    cpu = (struct mms__cpu_backend *)b->context;
    mms__mutex_lock(&cpu->lock);      /* contexts on other threads share the backend: not while a graph runs on the old pool */
    if (n_threads != cpu->n_threads) {
        pool = mms__threadpool_new(n_threads);
        if (!pool) {
            mms__mutex_unlock(&cpu->lock);
            return mms_set_error(MMS_ERR_BACKEND, "mms_backend_cpu_set_n_threads: cannot start %d threads", n_threads);
        }
        mms__threadpool_free(cpu->pool);
        cpu->pool = pool;
        cpu->n_threads = n_threads;
        cpu->n_parts = MMS__MIN(n_threads, mms_cpu_count());
    }
    mms__mutex_unlock(&cpu->lock);
    return MMS_OK;
}

MMS_API enum mms_status mms_backend_cpu_set_split(mms_backend_t b, enum mms_cpu_split split) {
    struct mms__cpu_backend *cpu;
    if (!mms_backend_is_cpu(b)) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_cpu_set_split: not a CPU backend");
    if (split != MMS_CPU_SPLIT_AUTO && split != MMS_CPU_SPLIT_ALL && split != MMS_CPU_SPLIT_NONE)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_cpu_set_split: %d is not MMS_CPU_SPLIT_AUTO, _ALL or _NONE", (int)split);
    cpu = (struct mms__cpu_backend *)b->context;
    mms__mutex_lock(&cpu->lock);
    cpu->split = split;
    mms__mutex_unlock(&cpu->lock);
    return MMS_OK;
}

MMS_API int mms_backend_cpu_get_n_threads(mms_backend_t b) {
    struct mms__cpu_backend *cpu;
    int n;
    if (!mms_backend_is_cpu(b)) return 0;
    cpu = (struct mms__cpu_backend *)b->context;
    mms__mutex_lock(&cpu->lock);
    n = cpu->n_threads;
    mms__mutex_unlock(&cpu->lock);
    return n;
}
