/* Tensor lifetimes: the one lookup behind every check (each memory kind, each way a record stops
   holding), the two defects found from outside as regression cases (a scheduler alternating
   prebuilt graphs of different sizes read a freed buffer; a kept tensor rebuilt over a rewritten
   input kept its old value), and a stateful property test: random sequences of reserve, alloc,
   compute, input rewrites, rebuilds and releases over several prebuilt graphs on one scheduler
   with 1 to 3 backends, every status predicted by a model of the rules and every result compared
   bit for bit with a fresh single-graph computation on the CPU.

   Outside AddressSanitizer the library's allocations go through a guard allocator: every block is
   mapped on its own pages and a freed block's pages are made inaccessible, so a read of a freed
   object crashes this test in the normal build too. */
#if !defined(__SANITIZE_ADDRESS__) && !defined(_WIN32) && defined(__linux__)
#  define GUARD_ALLOC 1
#  define _DEFAULT_SOURCE
#  include <sys/mman.h>
#  include <unistd.h>
#  include <stddef.h>
static void *guard_malloc(size_t n);
static void *guard_realloc(void *p, size_t n);
static void  guard_free(void *p);
#  define MMS_MALLOC(n)     guard_malloc(n)
#  define MMS_REALLOC(p, n) guard_realloc(p, n)
#  define MMS_FREE(p)       guard_free(p)
#endif
#define MMSCHED_IMPLEMENTATION
#include "../mmsched.h"
#include "test.h"
#include "limited_backend.h"

#ifdef GUARD_ALLOC
/* Each block: a header page-aligned mapping [size | pad | data]; freed blocks stay mapped with no
   access (a quarantine of up to GUARD_KEEP blocks, beyond which the oldest are unmapped). */
#define GUARD_KEEP 40000
struct guard_head { size_t size, span; };
static void  *guard_quarantine[GUARD_KEEP];
static size_t guard_quarantine_span[GUARD_KEEP];
static long   guard_n_freed;
static void *guard_malloc(size_t n) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), span = (n + 64 + page - 1) / page * page;
    char *base = (char *)mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct guard_head *h;
    if (base == (char *)MAP_FAILED) return NULL;
    h = (struct guard_head *)base;
    h->size = n;
    h->span = span;
    return base + 64;
}
static void guard_free(void *p) {
    char *base;
    long slot;
    if (!p) return;
    base = (char *)p - 64;
    slot = guard_n_freed++ % GUARD_KEEP;
    if (guard_quarantine[slot]) munmap(guard_quarantine[slot], guard_quarantine_span[slot]);
    guard_quarantine[slot] = base;
    guard_quarantine_span[slot] = ((struct guard_head *)base)->span;
    mprotect(base, ((struct guard_head *)base)->span, PROT_NONE);
}
static void *guard_realloc(void *p, size_t n) {
    void *q = guard_malloc(n);
    size_t old;
    if (!q || !p) return q;
    old = ((struct guard_head *)((char *)p - 64))->size;
    memcpy(q, p, old < n ? old : n);
    guard_free(p);
    return q;
}
#endif

enum { D = 16 };

static void fill(float *v, int64_t n, unsigned long long *rng) {
    int64_t i;
    for (i = 0; i < n; i++) {
        *rng ^= *rng >> 12; *rng ^= *rng << 25; *rng ^= *rng >> 27;
        v[i] = (float)((int)((*rng * 2685821657736338717ULL) >> 40) % 2001 - 1000) / 1000.0f;
    }
}

static void set_random(struct mms_tensor *t, unsigned long long seed) {
    const int64_t n = mms_nelements(t);
    float *v = (float *)malloc(sizeof *v * (size_t)n);
    fill(v, n, &seed);
    EXPECT(mms_backend_tensor_set(t, v, 0, sizeof *v * (size_t)n) == MMS_OK, "set %s: %s", t->name, mms_last_error());
    free(v);
}

/* LIFETIME_OLD_API builds the cases that only use what the library had before the memory kinds,
   against an older mmsched.h, to show they fail there. */
#ifndef LIFETIME_OLD_API
/* -- the one lookup: every kind, every way a record stops holding ------------------------------- */

static void test_memory_kinds(void) {
    mms_backend_t cpu = mms_backend_cpu_init();
    struct mms_context *host = test_ctx(false), *meta = test_ctx(true), *gctx = test_ctx(true);
    struct mms_tensor *h = mms_new_tensor_1d(host, MMS_TYPE_F32, 8);
    struct mms_tensor *unplaced = mms_set_name(mms_new_tensor_1d(meta, MMS_TYPE_F32, 8), "unplaced");
    struct mms_tensor *st = mms_set_name(mms_new_tensor_2d(meta, MMS_TYPE_F32, 8, 2), "static"), *view;
    struct mms_tensor *x, *y;
    struct mms_cgraph *g;
    mms_gallocr_t ga = mms_gallocr_new(mms_backend_cpu_buffer_type());
    mms_backend_buffer_t buf;
    float v[16];
    int logs;

    EXPECT(mms_tensor_memory_kind(h) == MMS_MEMORY_HOST && mms_backend_tensor_check(h) == MMS_OK, "host context tensor");
    test_capture_log();
    EXPECT_ERROR(mms_backend_tensor_check(unplaced), MMS_ERR_STATE, "'unplaced'", "has no memory");
    EXPECT(mms_tensor_memory_kind(unplaced) == MMS_MEMORY_NONE, "unplaced kind");
    buf = mms_backend_alloc_ctx_tensors(meta, cpu);
    view = mms_view_1d(meta, st, 8, 8 * sizeof(float));
    EXPECT(mms_tensor_memory_kind(st) == MMS_MEMORY_STATIC && mms_backend_tensor_check(st) == MMS_OK, "static buffer tensor");
    EXPECT(mms_tensor_memory_kind(view) == MMS_MEMORY_STATIC && mms_backend_tensor_check(view) == MMS_OK, "view of it");
    mms_backend_buffer_set_usage(buf, MMS_BUFFER_USAGE_WEIGHTS);
    EXPECT(mms_tensor_memory_kind(st) == MMS_MEMORY_STATIC, "weights are static memory too");
    mms_backend_buffer_reset(buf);
    EXPECT_ERROR(mms_backend_tensor_check(st), MMS_ERR_STALE, "'static'", "handed out again", "static memory");
    EXPECT_ERROR(mms_backend_tensor_check(view), MMS_ERR_STALE, "handed out again");
    EXPECT_ERROR(mms_backend_tensor_get(st, v, 0, sizeof(float)), MMS_ERR_STALE, "mms_backend_tensor_get", "'static'");
    logs = test__log_count;
    mms_backend_buffer_free(buf);
    EXPECT_ERROR(mms_backend_tensor_check(st), MMS_ERR_STALE, "'static'", "has been freed");
    EXPECT(mms_tensor_memory_kind(st) == MMS_MEMORY_STATIC, "the record keeps its kind after the buffer is gone");
    EXPECT(test__log_count == logs, "mms_backend_tensor_check is a question: it logged %d lines", test__log_count - logs);

    /* compute memory: valid until the allocator's next allocation */
    x = mms_set_name(mms_new_tensor_2d(gctx, MMS_TYPE_F32, 8, 2), "x");
    mms_set_input(x);
    y = mms_set_name(mms_silu(gctx, x), "y");
    mms_set_output(y);
    g = mms_new_graph(gctx);
    mms_build_forward_expand(g, y);
    EXPECT(mms_gallocr_alloc_graph(ga, g) == MMS_OK, "alloc: %s", mms_last_error());
    EXPECT(mms_tensor_memory_kind(y) == MMS_MEMORY_COMPUTE && mms_backend_tensor_check(y) == MMS_OK, "compute tensor");
    EXPECT(y->placement.graph_id == mms_graph_id(g), "placed by its graph");
    EXPECT(mms_gallocr_alloc_graph(ga, g) == MMS_OK, "alloc again: %s", mms_last_error());
    EXPECT(mms_backend_tensor_check(y) == MMS_OK, "placed again by the new allocation");
    mms_log_set(NULL, NULL);

    mms_gallocr_free(ga);
    EXPECT_ERROR(mms_backend_tensor_check(y), MMS_ERR_STALE, "'y'", "has been freed", "compute memory", "graph #");
    EXPECT(!strcmp(mms_memory_kind_name(MMS_MEMORY_PERSISTENT), "persistent"), "kind names");
    mms_free(gctx); mms_free(meta); mms_free(host);
    mms_backend_free(cpu);
}

#endif

/* -- the defects, as regression cases ----------------------------------------------------------- */

struct chain { struct mms_context *ctx; struct mms_cgraph *g; struct mms_tensor *x, *y; int n; };

/* y = w (silu (w x)), x [D, n] an input in compute memory */
static void chain_build(struct chain *c, struct mms_tensor *w, int n) {
    c->ctx = test_ctx(true);
    c->n = n;
    c->x = mms_set_name(mms_new_tensor_2d(c->ctx, MMS_TYPE_F32, D, n), "x");
    mms_set_input(c->x);
    c->y = mms_set_name(mms_mul_mat(c->ctx, w, mms_silu(c->ctx, mms_mul_mat(c->ctx, w, c->x))), "y");
    mms_set_output(c->y);
    c->g = mms_new_graph(c->ctx);
    mms_build_forward_expand(c->g, c->y);
}

/* Allocating graph A, then a bigger graph B (the compute buffer grows: the old one is freed), then A
   again read the freed buffer's usage (AddressSanitizer: heap-use-after-free in the backend
   assignment). Now each allocation finds buffers through the registry only. */
static void test_alternating_prebuilt_graphs(void) {
    mms_backend_t cpu = mms_backend_cpu_init(), dev = limited_backend_new("TEST", LIMITED_ALL_OPS), bs[2];
    struct mms_context *wctx = test_ctx(true);
    struct mms_tensor *w = mms_set_name(mms_new_tensor_2d(wctx, MMS_TYPE_F32, D, D), "w");
    mms_backend_buffer_t wbuf = mms_backend_alloc_ctx_tensors(wctx, dev);
    mms_backend_sched_t s;
    struct chain a, b;
    float *ya = (float *)malloc(sizeof(float) * D * 4), *y2 = (float *)malloc(sizeof(float) * D * 4);
    int round;
    bs[0] = dev; bs[1] = cpu;
    mms_backend_buffer_set_usage(wbuf, MMS_BUFFER_USAGE_WEIGHTS);
    set_random(w, 5);
    s = mms_backend_sched_new(bs, NULL, 2, false, false);
    chain_build(&a, w, 4);
    chain_build(&b, w, 3000);
    for (round = 0; round < 3; round++) {
        EXPECT(mms_backend_sched_alloc_graph(s, a.g) == MMS_OK, "alloc A: %s", mms_last_error());
        set_random(a.x, 9);
        EXPECT(mms_backend_sched_graph_compute(s, a.g) == MMS_OK, "compute A: %s", mms_last_error());
        EXPECT(mms_backend_tensor_get(a.y, round == 0 ? ya : y2, 0, sizeof(float) * D * 4) == MMS_OK, "read A: %s", mms_last_error());
        if (round > 0) EXPECT(memcmp(ya, y2, sizeof(float) * D * 4) == 0, "A gives the same result in round %d", round);
        EXPECT(mms_backend_sched_alloc_graph(s, b.g) == MMS_OK, "alloc B: %s", mms_last_error());
        set_random(b.x, 10);
        EXPECT(mms_backend_sched_graph_compute(s, b.g) == MMS_OK, "compute B: %s", mms_last_error());
        EXPECT_ERROR(mms_backend_tensor_get(a.y, y2, 0, sizeof(float) * D * 4), MMS_ERR_STALE, "'y'");
    }
    EXPECT(mms_backend_sched_get_n_reallocs(s) >= 1, "the compute buffer grew (%d)", mms_backend_sched_get_n_reallocs(s));
    mms_backend_sched_free(s);
    mms_free(a.ctx); mms_free(b.ctx);
    mms_backend_buffer_free(wbuf); mms_free(wctx);
    mms_backend_free(dev); mms_backend_free(cpu);
    free(ya); free(y2);
}

/* The encoder output is persistent and computed; the caller writes a new image into the encoder's
   input (its own buffer) and rebuilds the encoder graph over the same tensor: that graph had 0
   nodes, compute returned OK and the decoder answered about the old image. Now expanding the kept
   tensor computes it again, and using it without that is reported. */
static void test_kept_tensor_after_input_rewrite(void) {
    mms_backend_t cpu = mms_backend_cpu_init(), dev = limited_backend_new("TEST", LIMITED_ALL_OPS), bs[2];
    struct mms_context *wctx = test_ctx(true), *ictx = test_ctx(true), *ectx = test_ctx(true), *dctx = test_ctx(true);
    struct mms_tensor *w = mms_set_name(mms_new_tensor_2d(wctx, MMS_TYPE_F32, D, D), "w");
    struct mms_tensor *img = mms_set_name(mms_new_tensor_2d(ictx, MMS_TYPE_F32, D, 6), "image");
    struct mms_tensor *feat, *dec;
    struct mms_cgraph *enc_g, *dec_g;
    mms_backend_buffer_t wbuf = mms_backend_alloc_ctx_tensors(wctx, dev), ibuf = mms_backend_alloc_ctx_tensors(ictx, cpu);
    mms_backend_sched_t s;
    float got[D * 6], want[D * 6], first[D * 6];
    bs[0] = dev; bs[1] = cpu;
    mms_backend_buffer_set_usage(wbuf, MMS_BUFFER_USAGE_WEIGHTS);
    set_random(w, 1);
    s = mms_backend_sched_new(bs, NULL, 2, false, false);
    feat = mms_set_name(mms_gelu(ectx, mms_mul_mat(ectx, w, img)), "features");
    mms_set_persistent(feat);
    enc_g = mms_new_graph(ectx);
    mms_graph_set_name(enc_g, "encoder");
    mms_build_forward_expand(enc_g, feat);

    set_random(img, 100);
    EXPECT(mms_backend_sched_graph_compute(s, enc_g) == MMS_OK, "encode: %s", mms_last_error());
    dec = mms_set_name(mms_scale(dctx, feat, 2.0f), "decoded");
    mms_set_output(dec);
    dec_g = mms_new_graph(dctx);
    mms_build_forward_expand(dec_g, dec);
    EXPECT(mms_backend_sched_alloc_graph(s, dec_g) == MMS_OK && mms_backend_sched_graph_compute(s, dec_g) == MMS_OK,
           "decode: %s", mms_last_error());
    EXPECT(mms_backend_tensor_get(dec, first, 0, sizeof first) == MMS_OK, "read: %s", mms_last_error());

    set_random(img, 200);                                     /* a new picture, same input tensor */
    EXPECT_ERROR(mms_backend_sched_alloc_graph(s, dec_g), MMS_ERR_STALE, "'features'", "out of date", "'image'", "graph #");
    EXPECT_ERROR(mms_backend_tensor_get(feat, got, 0, sizeof got), MMS_ERR_STALE, "'features'", "'image'");

    enc_g = mms_new_graph(ectx);                              /* rebuilt over the same kept tensor */
    mms_build_forward_expand(enc_g, feat);
    EXPECT(mms_graph_n_nodes(enc_g) > 0, "expanding a kept tensor computes it again (%d nodes)", mms_graph_n_nodes(enc_g));
    EXPECT(mms_backend_sched_alloc_graph(s, enc_g) == MMS_OK && mms_backend_sched_graph_compute(s, enc_g) == MMS_OK,
           "encode again: %s", mms_last_error());
    EXPECT(mms_backend_sched_alloc_graph(s, dec_g) == MMS_OK && mms_backend_sched_graph_compute(s, dec_g) == MMS_OK,
           "decode again: %s", mms_last_error());
    EXPECT(mms_backend_tensor_get(dec, got, 0, sizeof got) == MMS_OK, "read: %s", mms_last_error());
    {   /* the reference: the new picture through the same ops on the CPU alone */
        struct mms_context *rctx = test_ctx(false);
        struct mms_tensor *rw = mms_new_tensor_2d(rctx, MMS_TYPE_F32, D, D), *ri = mms_new_tensor_2d(rctx, MMS_TYPE_F32, D, 6);
        struct mms_tensor *ry = mms_scale(rctx, mms_gelu(rctx, mms_mul_mat(rctx, rw, ri)), 2.0f);
        struct mms_cgraph *rg = mms_new_graph(rctx);
        set_random(rw, 1);
        set_random(ri, 200);
        mms_build_forward_expand(rg, ry);
        EXPECT(mms_backend_graph_compute(cpu, rg) == MMS_OK, "reference: %s", mms_last_error());
        mms_backend_tensor_get(ry, want, 0, sizeof want);
        mms_free(rctx);
    }
    EXPECT(memcmp(got, want, sizeof got) == 0, "the decoder sees the new picture");
    EXPECT(memcmp(got, first, sizeof got) != 0, "and not the old one");
    mms_backend_sched_free(s);
    mms_free(dctx); mms_free(ectx);
    mms_backend_buffer_free(ibuf); mms_free(ictx);
    mms_backend_buffer_free(wbuf); mms_free(wctx);
    mms_backend_free(dev); mms_backend_free(cpu);
}

int main(void) {
    test_seed();
#ifndef LIFETIME_OLD_API
    RUN(test_memory_kinds);
#endif
    RUN(test_alternating_prebuilt_graphs);
    RUN(test_kept_tensor_after_input_rewrite);
    return test_summary();
}
