/* Tensor lifetimes: the one lookup behind every check (each memory kind, each way a record stops
   holding), the two defects found from outside as regression cases (a scheduler alternating
   prebuilt graphs of different sizes read a freed buffer; a kept tensor rebuilt over a rewritten
   input kept its old value), and a stateful property test: random sequences of reserve, alloc,
   compute, input rewrites, rebuilds and releases over several prebuilt graphs on one scheduler
   with 1 to 3 backends, every status predicted by a model of the rules and every result compared
   bit for bit with a fresh single-graph computation on the CPU; half of its allocations go through
   the scheduler's allocation of the same graph again (a decode step's), under the same rules.

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

#ifndef LIFETIME_OLD_API
/* The graph allocated last, allocated again (a decode step's reuse): the split stays, each new
   input gives a full allocation's result, and what a full allocation makes stale is stale after it
   too (a view of the last result, another graph's result); a pin, a callback or another graph in
   between, or freed weights: as a full allocation. */
static bool eval_nothing(struct mms_tensor *t, bool ask, void *user) { (void)t; (void)user; return !ask; }

static void test_same_graph_allocated_again(void) {
    mms_backend_t cpu = mms_backend_cpu_init(), dev = limited_backend_new("TEST", LIMITED_ALL_OPS), bs[2];
    struct mms_context *wctx = test_ctx(true);
    struct mms_tensor *w = mms_set_name(mms_new_tensor_2d(wctx, MMS_TYPE_F32, D, D), "w"), *view;
    mms_backend_buffer_t wbuf = mms_backend_alloc_ctx_tensors(wctx, dev);
    mms_backend_sched_t s, ref;
    struct chain a, b, r;
    float want[D * 4], got[D * 4], v[D];
    int round, again;
    bs[0] = dev; bs[1] = cpu;
    mms_backend_buffer_set_usage(wbuf, MMS_BUFFER_USAGE_WEIGHTS);
    set_random(w, 5);
    s = mms_backend_sched_new(bs, NULL, 2, false, false);
    ref = mms_backend_sched_new(bs, NULL, 2, false, false);
    chain_build(&a, w, 4);
    chain_build(&b, w, 3);
    chain_build(&r, w, 4);
    EXPECT(mms_backend_sched_alloc_graph(s, a.g) == MMS_OK, "alloc: %s", mms_last_error());
    for (round = 0; round < 3; round++) {      /* each round other inputs, against a full allocation of another graph */
        again = s->n_again;
        EXPECT(mms__sched_alloc_again(s, a.g) == MMS_OK, "again %d: %s", round, mms_last_error());
        EXPECT(s->n_again == again + 1, "round %d: a full allocation, wanted the split kept", round);
        set_random(a.x, 20 + round);
        EXPECT(mms_backend_sched_graph_compute(s, a.g) == MMS_OK, "compute %d: %s", round, mms_last_error());
        EXPECT(mms_backend_tensor_get(a.y, got, 0, sizeof got) == MMS_OK, "read %d: %s", round, mms_last_error());
        EXPECT(mms_backend_sched_alloc_graph(ref, r.g) == MMS_OK, "alloc ref: %s", mms_last_error());
        set_random(r.x, 20 + round);
        EXPECT(mms_backend_sched_graph_compute(ref, r.g) == MMS_OK, "compute ref: %s", mms_last_error());
        EXPECT(mms_backend_tensor_get(r.y, want, 0, sizeof want) == MMS_OK, "read ref: %s", mms_last_error());
        EXPECT(memcmp(got, want, sizeof got) == 0, "round %d: the result differs from a full allocation's", round);
    }
    /* a view of the result taken after the compute: stale once the graph is allocated again */
    view = mms_view_1d(a.ctx, a.y, D, 0);
    EXPECT(mms_backend_view_init(view) == MMS_OK && mms_backend_tensor_get(view, v, 0, sizeof v) == MMS_OK, "view: %s", mms_last_error());
    EXPECT(mms__sched_alloc_again(s, a.g) == MMS_OK, "again: %s", mms_last_error());
    EXPECT_ERROR(mms_backend_tensor_get(view, v, 0, sizeof v), MMS_ERR_STALE, "is stale", "compute memory");
    /* another graph in between: allocated in full, and the other graph's result is stale */
    EXPECT(mms_backend_sched_alloc_graph(s, b.g) == MMS_OK, "alloc B: %s", mms_last_error());
    set_random(b.x, 10);
    EXPECT(mms_backend_sched_graph_compute(s, b.g) == MMS_OK, "compute B: %s", mms_last_error());
    again = s->n_again;
    EXPECT(mms__sched_alloc_again(s, a.g) == MMS_OK && s->n_again == again, "after another graph: %s", mms_last_error());
    EXPECT_ERROR(mms_backend_tensor_get(b.y, v, 0, sizeof v), MMS_ERR_STALE, "'y'", "is stale");
    /* a pin, a callback: allocated in full */
    EXPECT(mms__sched_alloc_again(s, a.g) == MMS_OK && s->n_again == again + 1, "again: %s", mms_last_error());
    EXPECT(mms_backend_sched_set_tensor_backend(s, a.y, cpu) == MMS_OK, "pin: %s", mms_last_error());
    EXPECT(mms__sched_alloc_again(s, a.g) == MMS_OK && s->n_again == again + 1, "after a pin: %s", mms_last_error());
    EXPECT(mms_backend_sched_get_tensor_backend(s, a.y) == cpu, "the pin holds");
    EXPECT(mms__sched_alloc_again(s, a.g) == MMS_OK && s->n_again == again + 2, "after the pin's allocation: %s", mms_last_error());
    mms_backend_sched_set_eval_callback(s, eval_nothing, NULL);
    EXPECT(mms__sched_alloc_again(s, a.g) == MMS_OK && s->n_again == again + 2, "with a callback: %s", mms_last_error());
    set_random(a.x, 22);
    EXPECT(mms_backend_sched_graph_compute(s, a.g) == MMS_OK, "compute: %s", mms_last_error());
    EXPECT(mms_backend_tensor_get(a.y, got, 0, sizeof got) == MMS_OK && memcmp(got, want, sizeof got) == 0, "the result after the pin differs");
    mms_backend_sched_set_eval_callback(s, NULL, NULL);
    /* the weights' memory freed: the error of a full allocation */
    mms_backend_buffer_free(wbuf);
    EXPECT_ERROR(mms__sched_alloc_again(s, a.g), MMS_ERR_STALE, "'w'", "has been freed");
    mms_backend_sched_free(s);
    mms_backend_sched_free(ref);
    mms_free(a.ctx); mms_free(b.ctx); mms_free(r.ctx);
    mms_free(wctx);
    mms_backend_free(dev); mms_backend_free(cpu);
}
#endif

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

/* -- the stateful property test ------------------------------------------------------------------
   Prebuilt graphs on one scheduler: three that compute kept tensors (P0 from an input in a static
   buffer, P1 from an input in compute memory, Q from P0), four that read them (sizes 3 to 150
   tokens, so compute memory grows and shrinks), two that keep nothing (4 and 300 columns). A model
   of the lifetime rules predicts every status; results must equal a fresh CPU-only computation of
   the same ops bit for bit. */

enum { N_IN = 12, N_P0 = 6, N_P1 = 10 };
enum { E0, E1, E2, C0, C1, C2, C3, S0, S1, N_SLOTS };
enum { K_P0, K_P1, K_Q, N_KEPT };
enum { NEVER, PENDING, COMPUTED, RELEASED };
enum { OUT_UNKNOWN, OUT_LIVE, OUT_STALE };
static const char *const slot_names[N_SLOTS] = { "E0", "E1", "E2", "C0", "C1", "C2", "C3", "S0", "S1" };
static const int consumer_cols[4] = { 3, 40, 150, 8 }, standalone_cols[2] = { 4, 300 };

struct wset { struct mms_tensor *e0, *b0, *e1, *h, *gh, *q, *o, *s; };
#define WSET_N 8
static struct mms_tensor **wset_at(struct wset *w, int i) { return &w->e0 + i; }
static const int64_t wset_shape[WSET_N][2] = { { N_IN, D }, { D, 1 }, { N_IN, D }, { D, D }, { D, 1 }, { D, D }, { D, D }, { D, D } };

static struct mms_tensor *enc0(struct mms_context *c, struct wset *w, struct mms_tensor *x) { return mms_gelu(c, mms_add(c, mms_mul_mat(c, w->e0, x), w->b0)); }
static struct mms_tensor *enc1(struct mms_context *c, struct wset *w, struct mms_tensor *x) { return mms_silu(c, mms_mul_mat(c, w->e1, x)); }
static struct mms_tensor *derive(struct mms_context *c, struct wset *w, struct mms_tensor *p) {
    return mms_mul(c, mms_rms_norm(c, mms_mul_mat(c, w->h, p), 1e-5f), w->gh);
}
static struct mms_tensor *consume(struct mms_context *c, struct wset *w, struct mms_tensor *p, struct mms_tensor *tok) {
    struct mms_tensor *kq = mms_soft_max_ext(c, mms_mul_mat(c, p, mms_mul_mat(c, w->q, tok)), NULL, 0.25f, 0.0f);
    return mms_add(c, tok, mms_mul_mat(c, w->o, mms_mul_mat(c, mms_cont(c, mms_transpose(c, p)), kq)));
}
static struct mms_tensor *standalone(struct mms_context *c, struct wset *w, struct mms_tensor *x, int layers) {
    int l;
    for (l = 0; l < layers; l++) x = mms_add(c, x, mms_mul_mat(c, w->s, mms_silu(c, mms_rms_norm(c, x, 1e-5f))));
    return x;
}

struct slot { struct mms_context *ctx; struct mms_cgraph *g; int build; struct mms_tensor *in, *out; };
struct kept { int state; int x0_version_at, p0_gen_at; };

struct world {
    int n_backends;
    mms_backend_t backends[3], ref_cpu;
    struct mms_context *wctx[3], *xctx, *kctx[3];
    mms_backend_buffer_t wbuf[3], xbuf;
    struct wset w;
    float *wv[WSET_N];
    struct mms_tensor *x0, *xs[2], *x1, *p[N_KEPT];
    float *x0v, *xsv[2], *x1v, *tokv[4], *outv[N_SLOTS];
    struct slot slot[N_SLOTS];
    mms_backend_sched_t s;
    unsigned long long rng;
    /* the model */
    int allocated, allocated_build;
    struct kept k[N_KEPT];
    int x0_version, p0_gen, out_state[N_SLOTS];
    bool out_known[N_SLOTS];
    int n_ops;
    int *counts;    /* [9] compared results, [10] expected errors seen */
};

static unsigned rnd(struct world *W, unsigned n) {
    W->rng ^= W->rng >> 12; W->rng ^= W->rng << 25; W->rng ^= W->rng >> 27;
    return (unsigned)((W->rng * 2685821657736338717ULL) >> 33) % n;
}

static float *new_values(struct world *W, int64_t n) {
    float *v = (float *)malloc(sizeof *v * (size_t)n);
    fill(v, n, &W->rng);
    return v;
}

/* The CPU alone computes out = f(inputs) from host values, on fresh tensors. */
struct refcalc { struct mms_context *ctx; struct wset w; };
static void ref_begin(struct world *W, struct refcalc *r) {
    int i;
    r->ctx = test_ctx(false);
    for (i = 0; i < WSET_N; i++) {
        struct mms_tensor *t = mms_new_tensor_2d(r->ctx, MMS_TYPE_F32, wset_shape[i][0], wset_shape[i][1]);
        memcpy(t->data, W->wv[i], mms_nbytes(t));
        *wset_at(&r->w, i) = t;
    }
}
static struct mms_tensor *ref_input(struct refcalc *r, const float *v, int64_t ne0, int64_t ne1) {
    struct mms_tensor *t = mms_new_tensor_2d(r->ctx, MMS_TYPE_F32, ne0, ne1);
    memcpy(t->data, v, mms_nbytes(t));
    return t;
}
static float *ref_end(struct world *W, struct refcalc *r, struct mms_tensor *out) {
    struct mms_cgraph *g = mms_new_graph(r->ctx);
    float *v = (float *)malloc(mms_nbytes(out));
    mms_build_forward_expand(g, out);
    EXPECT(mms_backend_graph_compute(W->ref_cpu, g) == MMS_OK, "reference: %s", mms_last_error());
    memcpy(v, out->data, mms_nbytes(out));
    mms_free(r->ctx);
    return v;
}

static struct mms_tensor *p_of(struct world *W, int slot) {
    switch (slot) { case C0: return W->p[K_P0]; case C1: return W->p[K_P1]; case C3: return W->p[K_Q]; default: return NULL; }
}

static void build_slot(struct world *W, int i) {
    struct slot *sl = &W->slot[i];
    struct mms_context *c;
    if (i <= E2) {                                   /* a new graph object over the same kept tensor */
        c = W->kctx[i];
        sl->g = mms_new_graph(c);
        mms_build_forward_expand(sl->g, W->p[i]);
    } else {
        mms_free(sl->ctx);
        c = sl->ctx = test_ctx(true);
        if (i <= C3) {
            struct mms_tensor *p = i == C2 ? mms_concat(c, W->p[K_P0], W->p[K_P1], 1) : p_of(W, i);
            sl->in = mms_set_name(mms_new_tensor_2d(c, MMS_TYPE_F32, D, consumer_cols[i - C0]), "tok");
            mms_set_input(sl->in);
            sl->out = consume(c, &W->w, p, sl->in);
        } else {
            sl->in = W->xs[i - S0];
            sl->out = standalone(c, &W->w, sl->in, i == S0 ? 2 : 3);
        }
        mms_set_name(sl->out, "out");
        mms_set_output(sl->out);
        sl->g = mms_new_graph(c);
        mms_build_forward_expand(sl->g, sl->out);
        W->out_state[i] = OUT_STALE;   /* a new tensor: never placed */
    }
    mms_graph_set_name(sl->g, slot_names[i]);
    EXPECT(mms_graph_status(sl->g) == MMS_OK, "build %s: %s", slot_names[i], mms_graph_error(sl->g));
    sl->build++;
}

static void world_init(struct world *W, int n_backends, bool parallel, unsigned long long seed) {
    int i;
    memset(W, 0, sizeof *W);
    W->rng = seed ? seed : 1;
    W->n_backends = n_backends;
    if (n_backends >= 2) W->backends[0] = limited_backend_new("DEV0", LIMITED_ALL_OPS);
    if (n_backends >= 3) W->backends[1] = limited_backend_new("DEV1", LIMITED_ALL_OPS & ~limited_op_bit(MMS_OP_SOFT_MAX) & ~limited_op_bit(MMS_OP_GELU));
    W->backends[n_backends - 1] = mms_backend_cpu_init();
    W->ref_cpu = mms_backend_cpu_init();
    for (i = 0; i < n_backends; i++) W->wctx[i] = test_ctx(true);
    for (i = 0; i < WSET_N; i++) {                   /* each weight on a random backend */
        struct mms_tensor *t = mms_new_tensor_2d(W->wctx[rnd(W, (unsigned)n_backends)], MMS_TYPE_F32, wset_shape[i][0], wset_shape[i][1]);
        mms_format_name(t, "w%d", i);
        *wset_at(&W->w, i) = t;
        W->wv[i] = new_values(W, mms_nelements(t));
    }
    for (i = 0; i < n_backends; i++) {
        if (!mms_get_first_tensor(W->wctx[i])) continue;
        W->wbuf[i] = mms_backend_alloc_ctx_tensors(W->wctx[i], W->backends[i]);
        mms_backend_buffer_set_usage(W->wbuf[i], MMS_BUFFER_USAGE_WEIGHTS);
    }
    for (i = 0; i < WSET_N; i++) mms_backend_tensor_set(*wset_at(&W->w, i), W->wv[i], 0, mms_nbytes(*wset_at(&W->w, i)));
    W->xctx = test_ctx(true);                        /* inputs in a buffer of the caller's */
    W->x0 = mms_set_name(mms_new_tensor_2d(W->xctx, MMS_TYPE_F32, N_IN, N_P0), "x0");
    for (i = 0; i < 2; i++) W->xs[i] = mms_format_name(mms_new_tensor_2d(W->xctx, MMS_TYPE_F32, D, standalone_cols[i]), "xs%d", i);
    W->xbuf = mms_backend_alloc_ctx_tensors(W->xctx, W->backends[n_backends - 1]);
    W->x0v = new_values(W, mms_nelements(W->x0));
    mms_backend_tensor_set(W->x0, W->x0v, 0, mms_nbytes(W->x0));
    for (i = 0; i < 2; i++) { W->xsv[i] = new_values(W, mms_nelements(W->xs[i])); mms_backend_tensor_set(W->xs[i], W->xsv[i], 0, mms_nbytes(W->xs[i])); }
    W->x1v = new_values(W, N_IN * N_P1);             /* replaced before each compute that reads them */
    for (i = 0; i < 4; i++) W->tokv[i] = new_values(W, (int64_t)D * consumer_cols[i]);
    for (i = 0; i < N_KEPT; i++) W->kctx[i] = test_ctx(true);
    W->p[K_P0] = mms_set_name(enc0(W->kctx[0], &W->w, W->x0), "P0");
    W->x1 = mms_set_name(mms_new_tensor_2d(W->kctx[1], MMS_TYPE_F32, N_IN, N_P1), "x1");
    mms_set_input(W->x1);
    W->p[K_P1] = mms_set_name(enc1(W->kctx[1], &W->w, W->x1), "P1");
    W->p[K_Q] = mms_set_name(derive(W->kctx[2], &W->w, W->p[K_P0]), "Q");
    for (i = 0; i < N_KEPT; i++) mms_set_persistent(W->p[i]);
    for (i = 0; i < N_SLOTS; i++) build_slot(W, i);   /* the consumers before anything is computed */
    W->s = mms_backend_sched_new(W->backends, NULL, n_backends, parallel, false);
    EXPECT(W->s != NULL, "sched: %s", mms_last_error());
    W->allocated = -1;
}

static void world_free(struct world *W) {
    int i;
    mms_backend_sched_free(W->s);
    for (i = 0; i < N_SLOTS; i++) { if (i > E2) mms_free(W->slot[i].ctx); free(W->outv[i]); }
    for (i = 0; i < N_KEPT; i++) mms_free(W->kctx[i]);
    for (i = 0; i < 4; i++) free(W->tokv[i]);
    mms_backend_buffer_free(W->xbuf); mms_free(W->xctx);
    for (i = 0; i < W->n_backends; i++) { mms_backend_buffer_free(W->wbuf[i]); mms_free(W->wctx[i]); mms_backend_free(W->backends[i]); }
    for (i = 0; i < WSET_N; i++) free(W->wv[i]);
    free(W->x0v); free(W->x1v); free(W->xsv[0]); free(W->xsv[1]);
    mms_backend_free(W->ref_cpu);
}

/* -- the model: what each step must return -- */

static bool p0_outdated(const struct world *W) { return W->k[K_P0].state != NEVER && W->x0_version != W->k[K_P0].x0_version_at; }
static bool outdated(const struct world *W, int k) {
    if (k == K_P0) return p0_outdated(W);
    if (k == K_Q) return W->k[K_Q].state != NEVER && (W->p0_gen != W->k[K_Q].p0_gen_at || p0_outdated(W));
    return false;
}
/* Reading kept tensor k (as a leaf, or with tensor_get). */
static enum mms_status use_status(const struct world *W, int k) {
    switch (W->k[k].state) {
        case NEVER: case PENDING: return MMS_ERR_STATE;
        case RELEASED:            return MMS_ERR_STALE;
        default:                  return outdated(W, k) ? MMS_ERR_STALE : MMS_OK;
    }
}
/* The kept leafs of a slot's graph. */
static int leafs_of(int slot, int *k) {
    switch (slot) {
        case E2: k[0] = K_P0; return 1;
        case C0: k[0] = K_P0; return 1;
        case C1: k[0] = K_P1; return 1;
        case C2: k[0] = K_P0; k[1] = K_P1; return 2;
        case C3: k[0] = K_Q; return 1;
        default: return 0;
    }
}
/* OK, or one of the statuses the slot's kept leafs allow (several may fail: any of theirs). */
static bool leafs_allow(const struct world *W, int slot, enum mms_status got, enum mms_status *want) {
    int k[2], n = leafs_of(slot, k), i;
    bool all_ok = true;
    *want = MMS_OK;
    for (i = 0; i < n; i++) {
        enum mms_status st = use_status(W, k[i]);
        if (st != MMS_OK) { all_ok = false; *want = st; if (got == st) return true; }
    }
    return all_ok && got == MMS_OK;
}

#define EXPECT_STEP(cond, ...) EXPECT(cond, "seed %llu step %d: " __VA_ARGS__)

/* MMS_LIFETIME_VALUES_ONLY=1 compares results only (statuses are not predicted, the model follows
   what the library returned) and goes on after a failure: the way to run this test against a
   library with other rules, such as the one before memory kinds, and see whether it gives wrong
   numbers or crashes. */
static bool values_only;

static bool check_status(struct world *W, unsigned long long seed, const char *what, int slot, enum mms_status got, bool ok) {
    if (values_only) return true;
    if (ok && got != MMS_OK) W->counts[10]++;
    if (!ok) printf("    model and library disagree: %s %s returned %d%s%s\n", what, slot >= 0 ? slot_names[slot] : "", (int)got,
                    got != MMS_OK ? ": " : "", got != MMS_OK ? mms_last_error() : "");
    EXPECT(ok, "seed %llu step %d: %s %s", seed, W->n_ops, what, slot >= 0 ? slot_names[slot] : "");
    return ok;
}

static void compare(struct world *W, unsigned long long seed, const char *what, const float *want, struct mms_tensor *t) {
    const int64_t n = mms_nelements(t);
    float *got = (float *)malloc(sizeof *got * (size_t)n);
    enum mms_status st = mms_backend_tensor_get(t, got, 0, sizeof *got * (size_t)n);
    EXPECT(st == MMS_OK && memcmp(got, want, sizeof *got * (size_t)n) == 0, "seed %llu step %d: %s differs from the single-graph CPU result (%s)",
           seed, W->n_ops, what, st == MMS_OK ? "values" : mms_last_error());
    W->counts[9]++;
    free(got);
}

/* Slot i was just allocated: earlier compute results are stale, its kept tensor has memory. */
static void allocated(struct world *W, int i) {
    int j;
    W->allocated = i;
    W->allocated_build = W->slot[i].build;
    for (j = 0; j < N_SLOTS; j++) W->out_state[j] = OUT_STALE;
    if (i > E2) { W->out_state[i] = OUT_LIVE; W->out_known[i] = false; }
    if (i <= E2 && (W->k[i].state == NEVER || W->k[i].state == RELEASED)) W->k[i].state = PENDING;
}

static void step_alloc(struct world *W, unsigned long long seed, int i) {
    enum mms_status want, got;
#ifndef LIFETIME_OLD_API
    if (rnd(W, 2)) {            /* as a decode step allocates: the last graph again when nothing changed, same rules */
        const int before = W->s->n_again;
        got = mms__sched_alloc_again(W->s, W->slot[i].g);
        W->counts[11] += W->s->n_again - before;
    } else
#endif
        got = mms_backend_sched_alloc_graph(W->s, W->slot[i].g);
    const bool ok = leafs_allow(W, i, got, &want);
    check_status(W, seed, "alloc", i, got, ok);
    W->allocated = -1;
    if (got == MMS_OK) allocated(W, i);
}

/* What a kept tensor or an output must hold: the whole chain from the current inputs, one graph
   on the CPU alone. */
static struct mms_tensor *ref_kept(struct world *W, struct refcalc *r, int k) {
    struct mms_tensor *p0 = enc0(r->ctx, &r->w, ref_input(r, W->x0v, N_IN, N_P0));
    if (k == K_P0) return p0;
    if (k == K_Q) return derive(r->ctx, &r->w, p0);
    return enc1(r->ctx, &r->w, ref_input(r, W->x1v, N_IN, N_P1));
}
static float *reference(struct world *W, int i) {
    struct refcalc r;
    struct mms_tensor *out;
    ref_begin(W, &r);
    if (i <= E2) out = ref_kept(W, &r, i);
    else if (i <= C3) {
        struct mms_tensor *p = i == C2 ? mms_concat(r.ctx, ref_kept(W, &r, K_P0), ref_kept(W, &r, K_P1), 1)
                                       : ref_kept(W, &r, i == C0 ? K_P0 : i == C1 ? K_P1 : K_Q);
        out = consume(r.ctx, &r.w, p, ref_input(&r, W->tokv[i - C0], D, consumer_cols[i - C0]));
    } else out = standalone(r.ctx, &r.w, ref_input(&r, W->xsv[i - S0], D, standalone_cols[i - S0]), i == S0 ? 2 : 3);
    return ref_end(W, &r, out);
}

static void computed(struct world *W, unsigned long long seed, int i) {
    float *want;
    if (i == E0) { W->k[K_P0].x0_version_at = W->x0_version; W->p0_gen++; }
    if (i == E2) W->k[K_Q].p0_gen_at = W->p0_gen;
    if (i <= E2) W->k[i].state = COMPUTED;
    want = reference(W, i);
    if (i <= E2) compare(W, seed, slot_names[i], want, W->p[i]);
    else {
        compare(W, seed, slot_names[i], want, W->slot[i].out);
        free(W->outv[i]);
        W->outv[i] = want;
        want = NULL;
        W->out_known[i] = true;
    }
    free(want);
}

static void step_compute(struct world *W, unsigned long long seed, int i) {
    enum mms_status want = MMS_OK, got;
    bool ok;
    const bool has_compute_input = i == E1 || (i >= C0 && i <= C3);
    if (W->allocated < 0 && has_compute_input) { step_alloc(W, seed, i); if (W->allocated != i) return; }
    if (W->allocated < 0) {                          /* compute allocates first */
        got = mms_backend_sched_graph_compute(W->s, W->slot[i].g);
        ok = leafs_allow(W, i, got, &want);
        if (check_status(W, seed, "compute (allocating)", i, got, ok) && got == MMS_OK) { allocated(W, i); computed(W, seed, i); }
        return;
    }
    if (W->allocated != i || W->allocated_build != W->slot[i].build) {
        got = mms_backend_sched_graph_compute(W->s, W->slot[i].g);
        check_status(W, seed, "compute (not the allocated graph)", i, got, got == MMS_ERR_STATE);
        return;
    }
    if (i == E1) {                                   /* its input, set after allocation */
        free(W->x1v);
        W->x1v = new_values(W, N_IN * N_P1);
        EXPECT(mms_backend_tensor_set(W->x1, W->x1v, 0, mms_nbytes(W->x1)) == MMS_OK, "set x1: %s", mms_last_error());
    } else if (i >= C0 && i <= C3) {
        free(W->tokv[i - C0]);
        W->tokv[i - C0] = new_values(W, (int64_t)D * consumer_cols[i - C0]);
        EXPECT(mms_backend_tensor_set(W->slot[i].in, W->tokv[i - C0], 0, mms_nbytes(W->slot[i].in)) == MMS_OK, "set tok: %s", mms_last_error());
    }
    got = mms_backend_sched_graph_compute(W->s, W->slot[i].g);
    if (i <= E2 && W->k[i].state == RELEASED) ok = got == MMS_ERR_STALE;     /* its kept memory was released since */
    else ok = leafs_allow(W, i, got, &want);
    if (check_status(W, seed, "compute", i, got, ok) && got == MMS_OK) computed(W, seed, i);
}

static void step_read_kept(struct world *W, unsigned long long seed, int k) {
    const int64_t n = mms_nelements(W->p[k]);
    float *v = (float *)malloc(sizeof *v * (size_t)n);
    enum mms_status got = mms_backend_tensor_get(W->p[k], v, 0, sizeof *v * (size_t)n), want = use_status(W, k);
    if (W->k[k].state == NEVER) want = MMS_ERR_STATE;
    check_status(W, seed, k == K_P0 ? "read P0" : k == K_P1 ? "read P1" : "read Q", -1, got, got == want);
    if (got == MMS_OK) {
        float *ref = reference(W, k);
        EXPECT(memcmp(v, ref, sizeof *v * (size_t)n) == 0, "seed %llu step %d: kept %s differs from the single-graph CPU result",
               seed, W->n_ops, slot_names[k]);
        free(ref);
    }
    free(v);
}

static void step_read_old(struct world *W, unsigned long long seed, int i) {
    struct mms_tensor *t = W->slot[i].out;
    const int64_t n = mms_nelements(t);
    float *v;
    enum mms_status got;
    if (W->out_state[i] == OUT_UNKNOWN) return;
    v = (float *)malloc(sizeof *v * (size_t)n);
    got = mms_backend_tensor_get(t, v, 0, sizeof *v * (size_t)n);
    if (W->out_state[i] == OUT_STALE)
        check_status(W, seed, "read an output whose memory was handed out again (or never placed)", i, got, got == MMS_ERR_STALE || got == MMS_ERR_STATE);
    else {
        check_status(W, seed, "read the allocated graph's output", i, got, got == MMS_OK);
        if (got == MMS_OK && W->out_known[i]) EXPECT(memcmp(v, W->outv[i], sizeof *v * (size_t)n) == 0, "seed %llu step %d: output differs", seed, W->n_ops);
    }
    free(v);
}

static void run_sequence(int n_backends, bool parallel, unsigned long long seed, int steps, int *counts) {
    struct world W;
    int n, i, k;
    enum mms_status got;
    world_init(&W, n_backends, parallel, seed);
    W.counts = counts;
    for (n = 0; n < steps && (values_only || test__case_failures == 0); n++) {
        const unsigned op = rnd(&W, 100);
        W.n_ops = n;
        i = (int)rnd(&W, N_SLOTS);
        k = (int)rnd(&W, N_KEPT);
        if (op < 42)      { step_alloc(&W, seed, i); counts[0]++; if (W.allocated == i) { step_compute(&W, seed, i); counts[1]++; } }
        else if (op < 54) { step_alloc(&W, seed, i); counts[0]++; }
        else if (op < 66) { step_compute(&W, seed, i); counts[1]++; }
        else if (op < 70) {                                                     /* reserve: plans only */
            got = mms_backend_sched_reserve(W.s, W.slot[i].g);
            check_status(&W, seed, "reserve", i, got, got == MMS_OK);
            W.allocated = -1;
            for (k = 0; k < N_SLOTS; k++) if (W.out_state[k] == OUT_LIVE) W.out_state[k] = OUT_UNKNOWN;   /* buffers may have grown */
            counts[2]++;
        } else if (op < 75) {                                                   /* a new picture in x0 */
            free(W.x0v);
            W.x0v = new_values(&W, N_IN * N_P0);
            got = mms_backend_tensor_set(W.x0, W.x0v, 0, mms_nbytes(W.x0));
            check_status(&W, seed, "rewrite x0", -1, got, got == MMS_OK);
            W.x0_version++;
            counts[3]++;
        } else if (op < 78) {                                                   /* new values for a standalone input */
            int j = (int)rnd(&W, 2);
            free(W.xsv[j]);
            W.xsv[j] = new_values(&W, mms_nelements(W.xs[j]));
            mms_backend_tensor_set(W.xs[j], W.xsv[j], 0, mms_nbytes(W.xs[j]));
            counts[3]++;
        } else if (op < 82) {                                                   /* release a kept tensor */
            const bool held = W.k[k].state == COMPUTED || W.k[k].state == PENDING;
            got = mms_backend_sched_release(W.s, W.p[k]);
            check_status(&W, seed, "release", -1, got, held ? got == MMS_OK : got == MMS_ERR_INVALID_ARG);
            if (held) W.k[k].state = RELEASED;
            counts[4]++;
        } else if (op < 88) { build_slot(&W, i); counts[5]++; }                 /* rebuild (kept ones: a new graph over the same tensor) */
        else if (op < 94) { step_read_kept(&W, seed, k); counts[6]++; }
        else if (op < 98) { if (i > E2) step_read_old(&W, seed, i); counts[6]++; }
        else {
            mms_backend_sched_reset(W.s);
            W.allocated = -1;
            for (k = 0; k < N_SLOTS; k++) if (W.out_state[k] != OUT_UNKNOWN) W.out_state[k] = OUT_STALE;
            counts[7]++;
        }
    }
    counts[8] += n;
    {   /* freeing the scheduler frees the kept tensors' memory */
        mms_backend_sched_t s = W.s;
        W.s = NULL;
        mms_backend_sched_free(s);
        for (k = 0; k < N_KEPT; k++) {
            float v;
            if (W.k[k].state != COMPUTED && W.k[k].state != PENDING) continue;
            EXPECT(mms_backend_tensor_get(W.p[k], &v, 0, sizeof v) == MMS_ERR_STALE, "seed %llu: kept tensor readable after sched_free", seed);
        }
    }
    world_free(&W);
}

static void test_lifetime_property(void) {
    unsigned long long base = test_rand_u64() % 1000000007ULL;
    values_only = getenv("MMS_LIFETIME_VALUES_ONLY") && atoi(getenv("MMS_LIFETIME_VALUES_ONLY"));
    int counts[12] = { 0 }, seq, n_seq = getenv("MMS_LIFETIME_SEQUENCES") ? atoi(getenv("MMS_LIFETIME_SEQUENCES")) : 150;
    mms_log_set(test__log_cb, NULL);                 /* expected errors are many: keep them off the output */
    for (seq = 0; seq < n_seq && (values_only || test__case_failures == 0); seq++) {
        const unsigned long long seed = base + (unsigned long long)seq;
        int before = test__case_failures;
        run_sequence(1 + seq % 3, seq % 4 == 3, seed, 120, counts);
        if (test__case_failures != before) printf("    failing sequence: seed %llu, %d backends (replay with MMS_TEST_SEED)\n", seed, 1 + seq % 3);
    }
    mms_log_set(NULL, NULL);
    printf("    %d sequences (1-3 backends, %d with pipeline copies), %d steps: %d allocs, %d computes, %d reserves, %d input "
           "rewrites, %d releases, %d rebuilds, %d reads, %d resets over %d prebuilt graphs; %d results compared, %d errors "
           "predicted and returned; %d allocations kept the last split\n", seq, seq / 4, counts[8], counts[0], counts[1], counts[2], counts[3],
           counts[4], counts[5], counts[6], counts[7], N_SLOTS, counts[9], counts[10], counts[11]);
#ifndef LIFETIME_OLD_API
    EXPECT(values_only || counts[11] > 0, "no allocation kept the last split");
#endif
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);   /* a crash (the guard allocator's) must not lose the lines before it */
    test_seed();
#ifndef LIFETIME_OLD_API
    RUN(test_memory_kinds);
#endif
    RUN(test_alternating_prebuilt_graphs);
    RUN(test_kept_tensor_after_input_rewrite);
#ifndef LIFETIME_OLD_API
    RUN(test_same_graph_allocated_again);
#endif
    RUN(test_lifetime_property);
    return test_summary();
}
