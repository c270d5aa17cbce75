/* limited_backend.h - a second backend for tests, written only against mmsched's public backend
   interface (struct mms_backend_i and friends). Include after mmsched.h.

   Its memory is host memory of a buffer type of its own that says it is not host memory, so the
   CPU backend refuses it: every tensor crossing between the two must be copied by the scheduler.
   It runs only the ops in a mask the test chooses, so unsupported ops must fall back. Events and
   async copies exist (trivially) so the scheduler's event paths run. The arithmetic is borrowed
   from a CPU backend, so results are bit-identical to CPU-only runs whatever the split.
   Include after test.h. */
#ifndef MMS_LIMITED_BACKEND_H
#define MMS_LIMITED_BACKEND_H

#include <stdlib.h>
#include <string.h>

struct limited_backend {
    char                           name[32];
    uint64_t                       op_mask;      /* bit (1 << op) set: supported */
    mms_backend_t                  cpu;          /* the arithmetic */
    struct mms_backend_buffer_type buft;
    int64_t                        offload_min_batch;  /* offload_op: MUL_MAT with at least this many columns (0: never) */
    size_t                         max_alloc;    /* buffers larger than this fail as out of memory (0: no limit) */
    int                            n_computes;   /* graphs computed here */
    int                            n_events_recorded, n_events_waited;
};

#define LIMITED_ALL_OPS (~(uint64_t)0)

static struct limited_backend *limited_of(mms_backend_t b) { return (struct limited_backend *)b->context; }

/* -- buffers: host memory that claims not to be -- */

static void *limited_buf_base(mms_backend_buffer_t b) { return b->context; }
static void  limited_buf_free(mms_backend_buffer_t b) { free(b->context); }
static enum mms_status limited_buf_memset(mms_backend_buffer_t b, struct mms_tensor *t, uint8_t v, size_t off, size_t n) {
    (void)b; memset((char *)t->data + off, v, n); return MMS_OK;
}
static enum mms_status limited_buf_set(mms_backend_buffer_t b, struct mms_tensor *t, const void *d, size_t off, size_t n) {
    (void)b; memcpy((char *)t->data + off, d, n); return MMS_OK;
}
static enum mms_status limited_buf_get(mms_backend_buffer_t b, const struct mms_tensor *t, void *d, size_t off, size_t n) {
    (void)b; memcpy(d, (const char *)t->data + off, n); return MMS_OK;
}
static bool limited_buf_cpy(mms_backend_buffer_t b, const struct mms_tensor *src, struct mms_tensor *dst) {
    (void)b;
    if (src->buffer && !mms_backend_buffer_is_host(src->buffer) && src->buffer->buft != b->buft) return false;
    memcpy(dst->data, src->data, mms_nbytes(src));
    return true;
}
static enum mms_status limited_buf_clear(mms_backend_buffer_t b, uint8_t v) { memset(b->context, v, b->size); return MMS_OK; }

static const char *limited_buft_name(mms_backend_buffer_type_t t) { return ((struct limited_backend *)t->context)->name; }
static size_t limited_buft_align(mms_backend_buffer_type_t t) { (void)t; return 32; }
static mms_backend_buffer_t limited_buft_alloc(mms_backend_buffer_type_t t, size_t size) {
    struct mms_backend_buffer_i i;
    size_t limit = ((struct limited_backend *)t->context)->max_alloc;
    void *mem = limit && size > limit ? NULL : calloc(1, size ? size : 1);
    mms_backend_buffer_t b;
    if (!mem) { mms_set_error(MMS_ERR_OOM, "%s: cannot allocate %zu bytes", limited_buft_name(t), size); return NULL; }
    memset(&i, 0, sizeof i);
    i.free_buffer = limited_buf_free;
    i.get_base = limited_buf_base;
    i.memset_tensor = limited_buf_memset;
    i.set_tensor = limited_buf_set;
    i.get_tensor = limited_buf_get;
    i.cpy_tensor = limited_buf_cpy;
    i.clear = limited_buf_clear;
    b = mms_backend_buffer_init(t, i, mem, size);
    if (!b) free(mem);
    return b;
}

/* -- the backend -- */

static const char *limited_name(mms_backend_t b) { return limited_of(b)->name; }
static void limited_free(mms_backend_t b) {
    mms_backend_free(limited_of(b)->cpu);
    free(limited_of(b));
    free(b);
}
static mms_backend_buffer_type_t limited_default_buft(mms_backend_t b) { return &limited_of(b)->buft; }
static bool limited_supports_op(mms_backend_t b, const struct mms_tensor *op) {
    return (int)op->op < 64 && (limited_of(b)->op_mask >> op->op & 1) && mms_backend_supports_op(limited_of(b)->cpu, op);
}
static bool limited_supports_buft(mms_backend_t b, mms_backend_buffer_type_t t) { return t == &limited_of(b)->buft; }
static bool limited_offload_op(mms_backend_t b, const struct mms_tensor *op) {
    int64_t min = limited_of(b)->offload_min_batch;
    return min > 0 && op->op == MMS_OP_MUL_MAT && op->ne[1] >= min;
}
static enum mms_status limited_compute(mms_backend_t b, struct mms_cgraph *g) {
    limited_of(b)->n_computes++;
    /* straight to the CPU's implementation: the generic entry point would (rightly) refuse memory
       that is not host memory */
    return limited_of(b)->cpu->iface.graph_compute(limited_of(b)->cpu, g);
}
static enum mms_status limited_set_async(mms_backend_t b, struct mms_tensor *t, const void *d, size_t off, size_t n) {
    (void)b; return mms_backend_tensor_set(t, d, off, n);
}
static enum mms_status limited_get_async(mms_backend_t b, const struct mms_tensor *t, void *d, size_t off, size_t n) {
    (void)b; return mms_backend_tensor_get(t, d, off, n);
}
static mms_backend_event_t limited_event_new(mms_backend_t b) {
    mms_backend_event_t e = (mms_backend_event_t)calloc(1, sizeof *e);
    if (e) e->backend = b;
    return e;
}
static void limited_event_free(mms_backend_event_t e) { free(e); }
static enum mms_status limited_event_record(mms_backend_event_t e) { limited_of(e->backend)->n_events_recorded++; return MMS_OK; }
static enum mms_status limited_event_sync(mms_backend_event_t e) { (void)e; return MMS_OK; }
static enum mms_status limited_event_wait(mms_backend_t b, mms_backend_event_t e) { (void)e; limited_of(b)->n_events_waited++; return MMS_OK; }

TEST_FN mms_backend_t limited_backend_new(const char *name, uint64_t op_mask) {
    mms_backend_t b = (mms_backend_t)calloc(1, sizeof *b);
    struct limited_backend *lb = (struct limited_backend *)calloc(1, sizeof *lb);
    if (!b || !lb || !(lb->cpu = mms_backend_cpu_init())) { free(b); free(lb); return NULL; }
    snprintf(lb->name, sizeof lb->name, "%s", name);
    lb->op_mask = op_mask;
    lb->buft.iface.get_name = limited_buft_name;
    lb->buft.iface.alloc_buffer = limited_buft_alloc;
    lb->buft.iface.get_alignment = limited_buft_align;
    lb->buft.context = lb;
    b->iface.get_name = limited_name;
    b->iface.free = limited_free;
    b->iface.get_default_buffer_type = limited_default_buft;
    b->iface.supports_op = limited_supports_op;
    b->iface.supports_buft = limited_supports_buft;
    b->iface.offload_op = limited_offload_op;
    b->iface.graph_compute = limited_compute;
    b->iface.set_tensor_async = limited_set_async;
    b->iface.get_tensor_async = limited_get_async;
    b->iface.event_new = limited_event_new;
    b->iface.event_free = limited_event_free;
    b->iface.event_record = limited_event_record;
    b->iface.event_synchronize = limited_event_sync;
    b->iface.event_wait = limited_event_wait;
    b->context = lb;
    return b;
}

TEST_FN uint64_t limited_op_bit(enum mms_op op) { return (uint64_t)1 << op; }

#endif
