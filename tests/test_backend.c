/* Buffers, placement, data access, staleness, the CPU backend's graph compute and its errors. */
#define MMSCHED_IMPLEMENTATION
#include "../mmsched.h"
#include "test.h"
#include "kernel_sets.h"
#include <math.h>

static mms_backend_t cpu;

static void fill(struct mms_tensor *t, float lo, float hi) {
    int64_t i, n = mms_nelements(t);
    float *v = (float *)malloc((size_t)n * sizeof *v);
    for (i = 0; i < n; i++) v[i] = test_rand_uniform(lo, hi);
    mms_backend_tensor_set(t, v, 0, (size_t)n * sizeof *v);
    free(v);
}

static void test_buffer_basics(void) {
    mms_backend_buffer_t b = mms_backend_alloc_buffer(cpu, 1000);
    EXPECT(b != NULL, "alloc: %s", mms_last_error());
    EXPECT(mms_backend_buffer_get_size(b) == 1000 && mms_backend_buffer_get_alignment(b) == 64, "size/alignment");
    EXPECT(((uintptr_t)mms_backend_buffer_get_base(b) % 64) == 0, "base alignment");
    EXPECT(mms_backend_buffer_is_host(b) && strcmp(mms_backend_buffer_name(b), "CPU") == 0, "host/name");
    EXPECT(mms_backend_buffer_get_type(b) == mms_backend_cpu_buffer_type(), "type");
    EXPECT(mms_backend_buffer_get_usage(b) == MMS_BUFFER_USAGE_ANY, "default usage");
    mms_backend_buffer_set_usage(b, MMS_BUFFER_USAGE_WEIGHTS);
    EXPECT(mms_backend_buffer_get_usage(b) == MMS_BUFFER_USAGE_WEIGHTS, "usage");
    EXPECT(mms_backend_buffer_clear(b, 7) == MMS_OK && ((unsigned char *)mms_backend_buffer_get_base(b))[999] == 7, "clear");
    EXPECT(mms_backend_buffer_get_generation(b) == 1, "first generation");
    mms_backend_buffer_reset(b);
    EXPECT(mms_backend_buffer_get_generation(b) == 2, "reset bumps the generation");
    EXPECT(mms_backend_get_max_size(cpu) == SIZE_MAX, "unlimited host buffers");
    mms_backend_buffer_free(b);
    mms_backend_buffer_free(NULL);
}

static void test_alloc_ctx_tensors_places_everything(void) {
    struct mms_context *ctx = test_ctx(true);
    struct mms_tensor *a = mms_new_tensor_2d(ctx, MMS_TYPE_F32, 3, 5);
    struct mms_tensor *h = mms_new_tensor_1d(ctx, MMS_TYPE_F16, 7);
    struct mms_tensor *v = mms_view_1d(ctx, a, 4, 2 * sizeof(float));
    mms_backend_buffer_t b = mms_backend_alloc_ctx_tensors(ctx, cpu);
    float in[15], out[4];
    int i;
    EXPECT(b != NULL, "alloc: %s", mms_last_error());
    EXPECT(a->buffer == b && h->buffer == b && v->buffer == b, "buffers");
    EXPECT(((uintptr_t)a->data % 64) == 0 && ((uintptr_t)h->data % 64) == 0, "alignment");
    EXPECT((char *)h->data >= (char *)a->data + mms_nbytes(a) || (char *)a->data >= (char *)h->data + mms_nbytes(h), "overlap");
    EXPECT(v->data == (char *)a->data + 8, "view initialised");
    for (i = 0; i < 15; i++) in[i] = (float)i;
    EXPECT(mms_backend_tensor_set(a, in, 0, sizeof in) == MMS_OK, "set");
    EXPECT(mms_backend_tensor_get(v, out, 0, sizeof out) == MMS_OK && out[0] == 2.0f && out[3] == 5.0f, "view reads the source");
    test_capture_log();
    EXPECT(mms_backend_alloc_ctx_tensors(ctx, cpu) == NULL && strstr(mms_last_error(), "no tensor"), "second alloc: %s", mms_last_error());
    mms_log_set(NULL, NULL);
    mms_backend_buffer_free(b);
    mms_free(ctx);
}

static void test_tensor_data_errors(void) {
    struct mms_context *ctx = test_ctx(true);
    struct mms_tensor *a = mms_set_name(mms_new_tensor_1d(ctx, MMS_TYPE_F32, 4), "weights");
    struct mms_tensor *b;
    mms_backend_buffer_t buf;
    float x[8] = { 0 };
    test_capture_log();
    EXPECT_ERROR(mms_backend_tensor_set(a, x, 0, 16), MMS_ERR_STATE, "'weights'", "has no memory");
    buf = mms_backend_alloc_ctx_tensors(ctx, cpu);
    EXPECT_ERROR(mms_backend_tensor_set(a, x, 8, 16), MMS_ERR_INVALID_ARG, "bytes [8, 24)", "16 bytes");
    EXPECT_ERROR(mms_backend_tensor_get(a, x, 0, 17), MMS_ERR_INVALID_ARG, "outside tensor 'weights'");
    EXPECT_ERROR(mms_backend_tensor_set(a, NULL, 0, 4), MMS_ERR_INVALID_ARG, "data is NULL");
    EXPECT(mms_backend_tensor_set(a, x, 0, 0) == MMS_OK, "empty set");
    b = mms_new_tensor_1d(ctx, MMS_TYPE_F16, 4);
    EXPECT_ERROR(mms_backend_tensor_alloc(buf, a, buf->context), MMS_ERR_INVALID_ARG, "already has memory");
    EXPECT_ERROR(mms_backend_tensor_alloc(buf, b, (char *)buf->context + 60), MMS_ERR_INVALID_ARG, "does not fit", "offset 60");
    EXPECT_ERROR(mms_backend_tensor_copy(a, b), MMS_ERR_INVALID_ARG, "differ in type");
    mms_log_set(NULL, NULL);
    mms_backend_buffer_free(buf);
    mms_free(ctx);
}

/* The heart of the lifetime model at this level: memory handed out again or freed is detected. */
static void test_stale_after_reset_and_free(void) {
    struct mms_context *ctx = test_ctx(true);
    struct mms_tensor *a = mms_set_name(mms_new_tensor_1d(ctx, MMS_TYPE_F32, 16), "encoder_out");
    struct mms_tensor *v = mms_view_1d(ctx, a, 4, 0);
    mms_backend_buffer_t buf = mms_backend_alloc_ctx_tensors(ctx, cpu), other;
    float x[16] = { 0 };
    test_capture_log();
    EXPECT(mms_backend_tensor_check(a) == MMS_OK, "fresh tensor is live");
    mms_backend_buffer_reset(buf);
    EXPECT_ERROR(mms_backend_tensor_get(a, x, 0, sizeof x), MMS_ERR_STALE, "'encoder_out'", "handed out again",
                 "generation 1", "at 2", "persistent");
    EXPECT_ERROR(mms_backend_tensor_set(v, x, 0, 4), MMS_ERR_STALE, "handed out again");
    mms_backend_buffer_free(buf);
    other = mms_backend_alloc_buffer(cpu, 64);   /* may well reuse the freed address */
    EXPECT_ERROR(mms_backend_tensor_check(a), MMS_ERR_STALE, "'encoder_out'", "freed");
    mms_log_set(NULL, NULL);
    mms_backend_buffer_free(other);
    mms_free(ctx);
}

static void test_buffer_from_ptr_and_manual_placement(void) {
    static float user_mem[64];
    mms_backend_buffer_t b = mms_backend_cpu_buffer_from_ptr(user_mem, sizeof user_mem);
    struct mms_context *ctx = test_ctx(true);
    struct mms_tensor *t = mms_new_tensor_1d(ctx, MMS_TYPE_F32, 8), *v;
    float x[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    EXPECT(b && mms_backend_buffer_get_base(b) == user_mem, "wrapped");
    EXPECT(mms_backend_tensor_alloc(b, t, user_mem + 16) == MMS_OK, "place: %s", mms_last_error());
    EXPECT(mms_backend_tensor_set(t, x, 0, sizeof x) == MMS_OK && user_mem[16 + 7] == 8.0f, "write lands in user memory");
    v = mms_view_1d(ctx, t, 2, 4 * sizeof(float));
    EXPECT(v->data == (void *)(user_mem + 20), "view of a placed tensor gets its memory at creation");
    mms_backend_buffer_free(b);   /* must not free user_mem (ASan would report it) */
    mms_free(ctx);
}

/* A small graph mixing ops; returns the output as a malloc'ed array. */
static float *run_mixed_graph(int n_threads, const float *xin, const float *win) {
    struct mms_context *ctx = test_ctx(true);
    struct mms_tensor *x = mms_new_tensor_2d(ctx, MMS_TYPE_F32, 33, 7), *w = mms_new_tensor_2d(ctx, MMS_TYPE_F16, 33, 19);
    struct mms_tensor *y = mms_gelu(ctx, mms_mul_mat(ctx, w, mms_rms_norm(ctx, x, 1e-5f)));
    struct mms_cgraph *g = mms_new_graph(ctx);
    mms_backend_buffer_t b;
    mms_fp16_t wh[33 * 19];
    float *out = (float *)malloc(19 * 7 * sizeof *out);
    int i;
    y = mms_soft_max_ext(ctx, y, NULL, 0.5f, 0.0f);
    mms_build_forward_expand(g, y);
    b = mms_backend_alloc_ctx_tensors(ctx, cpu);
    for (i = 0; i < 33 * 19; i++) wh[i] = mms_fp32_to_fp16(win[i]);
    mms_backend_tensor_set(x, xin, 0, 33 * 7 * sizeof(float));
    mms_backend_tensor_set(w, wh, 0, sizeof wh);
    mms_backend_cpu_set_n_threads(cpu, n_threads);
    EXPECT(mms_backend_graph_compute(cpu, g) == MMS_OK, "compute: %s", mms_last_error());
    mms_backend_tensor_get(y, out, 0, 19 * 7 * sizeof(float));
    mms_backend_buffer_free(b);
    mms_free(ctx);
    return out;
}

static void test_results_do_not_depend_on_thread_count(void) {
    float xin[33 * 7], win[33 * 19], *r1, *r2, *r3, *r4;
    int i;
    for (i = 0; i < 33 * 7; i++) xin[i] = test_rand_uniform(-2, 2);
    for (i = 0; i < 33 * 19; i++) win[i] = test_rand_uniform(-1, 1);
    r1 = run_mixed_graph(1, xin, win);
    mms_backend_cpu_set_split(cpu, MMS_CPU_SPLIT_ALL);   /* every node in parts */
    r2 = run_mixed_graph(2, xin, win);
    r3 = run_mixed_graph(3, xin, win);
    mms_backend_cpu_set_split(cpu, MMS_CPU_SPLIT_AUTO);
    r4 = run_mixed_graph(3, xin, win);
    EXPECT(memcmp(r1, r2, 19 * 7 * sizeof(float)) == 0 && memcmp(r1, r3, 19 * 7 * sizeof(float)) == 0 &&
           memcmp(r1, r4, 19 * 7 * sizeof(float)) == 0, "results differ by thread count");
    for (i = 0; i < 7; i++) {   /* each softmax row sums to one: the graph really ran */
        double s = 0;
        int j;
        for (j = 0; j < 19; j++) s += r1[i * 19 + j];
        EXPECT(fabs(s - 1.0) < 1e-5, "row %d sums to %g", i, s);
    }
    EXPECT(mms_backend_cpu_get_n_threads(cpu) == 3, "n_threads");
    free(r1); free(r2); free(r3); free(r4);
    mms_backend_cpu_set_n_threads(cpu, 2);
}

/* The pool's spin budget: twice the longest recent wake-up (a sleeper's time from the signal to
   running again), decaying by an eighth a wake-up, within [MMS__POOL_SPIN_MIN_US, MMS__POOL_SPIN_MAX_US].
   Each wake-up is given its time (mms__threadpool_woke_at), so a test thread the OS leaves waiting
   sees the same budgets. */
static void test_threadpool_spin_budget_follows_wake_ups(void) {
    struct mms__threadpool *pool = mms__threadpool_new(2);
    const int64_t t = mms_time_us();
    int32_t b;
    int i;
    EXPECT(pool != NULL, "pool");
    if (!pool) return;
    EXPECT(mms__atomic_load(&pool->spin_us) == MMS__POOL_SPIN_MIN_US, "starts at the minimum: %d", (int)mms__atomic_load(&pool->spin_us));
    mms__atomic_store(&pool->signal_us, (int32_t)(uint32_t)t);
    mms__threadpool_woke_at(pool, t + 300);   /* woke 300 us after the signal */
    b = mms__atomic_load(&pool->spin_us);
    EXPECT(b == 600, "300 us to wake: budget %d, want 600", (int)b);
    mms__threadpool_woke_at(pool, t + 50000);
    EXPECT(mms__atomic_load(&pool->spin_us) == MMS__POOL_SPIN_MAX_US, "50 ms to wake: budget %d, want the maximum",
           (int)mms__atomic_load(&pool->spin_us));
    mms__threadpool_woke_at(pool, t + 2);      /* then quick wake-ups: an eighth less each */
    b = mms__atomic_load(&pool->spin_us);
    EXPECT(b == MMS__POOL_SPIN_MAX_US - MMS__POOL_SPIN_MAX_US / 8, "a quick wake-up after the maximum: budget %d", (int)b);
    for (i = 0; i < 100; i++) mms__threadpool_woke_at(pool, t + 2);
    b = mms__atomic_load(&pool->spin_us);
    EXPECT(b == MMS__POOL_SPIN_MIN_US, "after 100 quick wake-ups: budget %d, want the minimum", (int)b);
    mms__atomic_store(&pool->spin_us, 800);   /* a signal 'after' the wake-up (a clock that went back): as a quick one */
    mms__threadpool_woke_at(pool, t - 1000);
    EXPECT(mms__atomic_load(&pool->spin_us) == 700, "negative wake-up: budget %d, want 700", (int)mms__atomic_load(&pool->spin_us));
    mms__threadpool_signalled(pool);            /* the signal's time is the clock's */
    EXPECT((uint32_t)mms_time_us() - (uint32_t)mms__atomic_load(&pool->signal_us) < 10000000u, "the signal's time is not the clock's");
    mms__threadpool_free(pool);
}

/* Counts each part a job ran, and which worker ran it. */
struct part_log { mms__atomic_int runs[16], by_caller; };

static void log_part(void *arg, int part, int n_parts, int worker) {
    struct part_log *l = (struct part_log *)arg;
    MMS__UNUSED(n_parts);
    mms__atomic_fetch_add(&l->runs[part], 1);
    if (worker == 0) mms__atomic_fetch_add(&l->by_caller, 1);
}

/* Every part of every job runs exactly once, on any mix of the caller and the helpers; and with
   the helpers never running (as when other programs hold every core), the caller runs them all
   and the job still ends. (A pool whose jobs end at a barrier of every thread, as this one's did
   before, never returns from the second case.) */
static void test_threadpool_runs_each_part_once_with_or_without_helpers(void) {
    struct mms__threadpool *pool = mms__threadpool_new(3);
    int job, p, hold;
    EXPECT(pool != NULL, "pool");
    if (!pool) return;
    for (hold = 0; hold < 2; hold++) {
        mms__atomic_store(&pool->test_hold_helpers, hold);
        for (job = 0; job < 300; job++) {
            struct part_log l;
            const int n_parts = 1 + job % 16;
            bool once = true;
            memset(&l, 0, sizeof l);
            mms__threadpool_run(pool, log_part, &l, n_parts);
            for (p = 0; p < 16; p++) once &= mms__atomic_load(&l.runs[p]) == (p < n_parts);
            EXPECT(once, "%s, job %d of %d parts: a part ran twice or never", hold ? "helpers held" : "helpers free", job, n_parts);
            if (hold) EXPECT(mms__atomic_load(&l.by_caller) == n_parts, "helpers held, but the caller ran %d of %d parts",
                             (int)mms__atomic_load(&l.by_caller), n_parts);
        }
    }
    mms__threadpool_free(pool);
}

/* The split rule: a node is split when what the helpers took of recent jobs, times its cost, is
   more than what a split cost lately. Learnt from jobs whose helpers never come (they take
   nothing), small and middle nodes stop being split; the cost learnt fades with time, so they are
   tried again. Asked at the moment of the last learning (or a stated time after it), so a test
   thread the OS leaves waiting for a while sees the same answers. */
static void test_threadpool_splits_what_pays(void) {
    struct mms__threadpool *pool = mms__threadpool_new(2);
    struct part_log l;
    int i;
    EXPECT(pool != NULL, "pool");
    if (!pool) return;
    EXPECT(mms__threadpool_worth_at(pool, 1000.0, pool->learnt_at), "a fresh pool splits a 1 ms node");
    EXPECT(!mms__threadpool_worth_at(pool, 1.0, pool->learnt_at), "a fresh pool splits a 1 us node");
    mms__atomic_store(&pool->test_hold_helpers, 1);
    for (i = 0; i < 64; i++) { memset(&l, 0, sizeof l); mms__threadpool_run(pool, log_part, &l, 2); }
    EXPECT(pool->share < 0.01f, "helpers that never came took a share of %g", (double)pool->share);
    EXPECT(!mms__threadpool_worth_at(pool, 1000.0, pool->learnt_at), "a 1 ms node split though the helpers take nothing");
    EXPECT(mms__threadpool_worth_at(pool, 1000.0, pool->learnt_at + 2 * MMS__POOL_FORGET_US),
           "after a pause, a 1 ms node is not tried again");
    pool->cost_us = 500.0f;                        /* splits that cost the caller half a millisecond */
    pool->share = 0.5f;
    EXPECT(!mms__threadpool_worth_at(pool, 800.0, pool->learnt_at), "a 0.8 ms node split at 0.5 ms a split");
    EXPECT(mms__threadpool_worth_at(pool, 5000.0, pool->learnt_at), "a 5 ms node not split at 0.5 ms a split");
    pool->cost_us = 0.0f;                          /* splits too quick for the clock: they still cost a microsecond */
    EXPECT(!mms__threadpool_worth_at(pool, 1.5, pool->learnt_at), "a 1.5 us node split at a split's least cost");
    EXPECT(mms__threadpool_worth_at(pool, 4.0, pool->learnt_at), "a 4 us node not split at a split's least cost");
    mms__threadpool_free(pool);
}

/* The caller's rate in its own parts: helpers that take half the parts while the caller runs at
   half speed (the two take turns on one core) saved nothing, so not even long nodes are split;
   the rate fades toward full speed without splits, so long nodes are tried again. Learning
   without a measured rate (a platform without a thread clock, or a job too short to tell) leaves
   the rate as it was. */
static void test_threadpool_counts_the_callers_slowdown(void) {
    struct mms__threadpool *pool = mms__threadpool_new(2);
    int i;
    EXPECT(pool != NULL, "pool");
    if (!pool) return;
    EXPECT(pool->rate == 1.0f, "a fresh pool's rate %g, want 1", (double)pool->rate);
    pool->cost_us = 10.0f;
    for (i = 0; i < 64; i++) mms__threadpool_learn(pool, 0.5f, 10.0f, 1.0f, pool->learnt_at);
    EXPECT(mms__threadpool_worth_at(pool, 100.0, pool->learnt_at), "half the parts at full speed: a 100 us node not split");
    for (i = 0; i < 64; i++) mms__threadpool_learn(pool, 0.5f, 10.0f, 0.5f, pool->learnt_at);
    EXPECT(pool->rate > 0.49f && pool->rate < 0.52f, "rate %g after 64 jobs at half speed", (double)pool->rate);
    EXPECT(!mms__threadpool_worth_at(pool, 10000.0, pool->learnt_at), "half the parts at half speed: a 10 ms node split");
    for (i = 0; i < 64; i++) mms__threadpool_learn(pool, 0.5f, 10.0f, -1.0f, pool->learnt_at);
    EXPECT(pool->rate > 0.49f && pool->rate < 0.52f, "an unmeasured rate moved it to %g", (double)pool->rate);
    for (i = 0; i < 64; i++) mms__threadpool_learn(pool, 0.5f, 10.0f, 0.75f, pool->learnt_at);
    EXPECT(mms__threadpool_worth_at(pool, 1000.0, pool->learnt_at), "half the parts at 3/4 speed (a third saved): a 1 ms node not split");
    EXPECT(!mms__threadpool_worth_at(pool, 20.0, pool->learnt_at), "half the parts at 3/4 speed: a 20 us node split at 10 us a split");
    for (i = 0; i < 64; i++) mms__threadpool_learn(pool, 0.5f, 10.0f, 2.0f, pool->learnt_at);
    EXPECT(pool->rate <= 1.0f, "a rate above 1 (clocks of different ticks) taken as %g", (double)pool->rate);
    for (i = 0; i < 64; i++) mms__threadpool_learn(pool, 0.5f, 10.0f, 0.3f, pool->learnt_at);
    EXPECT(!mms__threadpool_worth_at(pool, 10000.0, pool->learnt_at), "at a third of full speed: a 10 ms node split");
    EXPECT(mms__threadpool_worth_at(pool, 10000.0, pool->learnt_at + 2 * MMS__POOL_FORGET_US),
           "after a pause without splits, a 10 ms node is not tried again (rate %g)", (double)pool->rate);
    mms__threadpool_free(pool);
}

/* The clocks the pool learns from, in a build as strict as the library's own objects (-std=c99,
   no POSIX feature macros): on Linux the thread's CPU clock exists and counts this thread's work
   (without it the caller's rate above is never measured and stays 1); on Windows there is none
   and the pool keeps the rule without a rate. */
static void test_pool_clocks_in_a_strict_build(void) {
    int64_t t0 = mms__thread_cpu_ns(), w0 = mms_time_us(), t1, w1;
    volatile double x = 0.0;
    long i;
#if defined(__linux__)
    EXPECT(t0 >= 0, "no thread CPU clock on Linux (%lld): the pool cannot see the caller's rate", (long long)t0);
#elif defined(_WIN32)
    EXPECT(t0 == -1, "a thread clock on Windows (%lld), where the manual says there is none", (long long)t0);
#endif
    for (i = 0; i < 20000000 && mms_time_us() - w0 < 20000; i++) x += 1.0 / (double)(i + 1);
    t1 = mms__thread_cpu_ns();
    w1 = mms_time_us();
    EXPECT(w1 >= w0, "the wall clock ran back");
    if (t0 >= 0) {
        EXPECT(t1 > t0, "the thread clock did not advance over %lld us of work", (long long)(w1 - w0));
        EXPECT((t1 - t0) / 1000 <= (w1 - w0) + 2000, "the thread clock ran %lld us in %lld us of wall time",
               (long long)((t1 - t0) / 1000), (long long)(w1 - w0));
    }
}

/* Through the backend: a graph of many small nodes computes right whether or not the helpers ever
   run, and with helpers that never come it stops handing nodes out (each hand-out would wake
   sleepers for nothing). */
static void test_graph_on_a_pool_whose_helpers_never_run(void) {
    struct mms_context *ctx = test_ctx(true);
    struct mms_tensor *x = mms_new_tensor_1d(ctx, MMS_TYPE_F32, 4096), *y = x;
    struct mms_cgraph *g = mms_new_graph(ctx);
    struct mms__cpu_backend *cb = (struct mms__cpu_backend *)cpu->context;
    mms_backend_buffer_t b;
    float in[4096], out[4096];
    int64_t jobs;
    int i, r;
    for (i = 0; i < 300; i++) y = mms_scale(ctx, y, i % 2 ? 0.5f : 2.0f);
    mms_build_forward_expand(g, y);
    b = mms_backend_alloc_ctx_tensors(ctx, cpu);
    for (i = 0; i < 4096; i++) in[i] = (float)i;
    mms_backend_cpu_set_n_threads(cpu, 2);
    mms__atomic_store(&cb->pool->test_hold_helpers, 1);
    for (r = 0; r < 3; r++) {
        mms_backend_tensor_set(x, in, 0, sizeof in);
        jobs = cb->pool->epoch;
        EXPECT(mms_backend_graph_compute(cpu, g) == MMS_OK, "compute: %s", mms_last_error());
        mms_backend_tensor_get(y, out, 0, sizeof out);
        EXPECT(memcmp(in, out, sizeof in) == 0, "run %d: the result is wrong", r);
        if (r == 2) EXPECT(cb->pool->epoch - jobs < 10, "the third run still handed out %d of 300 nodes", (int)(cb->pool->epoch - jobs));
    }
    mms__atomic_store(&cb->pool->test_hold_helpers, 0);
    mms_backend_buffer_free(b);
    mms_free(ctx);
}

static void test_allocating_context_computes_directly(void) {
    struct mms_context *ctx = test_ctx(false);
    struct mms_tensor *a = mms_new_tensor_1d(ctx, MMS_TYPE_F32, 5), *b = mms_new_tensor_1d(ctx, MMS_TYPE_F32, 1);
    struct mms_tensor *c = mms_div(ctx, a, b);
    struct mms_cgraph *g = mms_new_graph(ctx);
    int i;
    for (i = 0; i < 5; i++) ((float *)a->data)[i] = (float)i;
    ((float *)b->data)[0] = 4.0f;
    mms_build_forward_expand(g, c);
    EXPECT(mms_backend_graph_compute(cpu, g) == MMS_OK, "compute: %s", mms_last_error());
    EXPECT(((float *)c->data)[3] == 0.75f, "3/4 = %g", (double)((float *)c->data)[3]);
    mms_free(ctx);
}

static void test_compute_errors(void) {
    struct mms_context *ctx = test_ctx(true);
    struct mms_tensor *a = mms_new_tensor_2d(ctx, MMS_TYPE_F32, 4, 3), *idx = mms_new_tensor_1d(ctx, MMS_TYPE_I32, 2);
    struct mms_tensor *rows = mms_set_name(mms_get_rows(ctx, a, idx), "picked");
    struct mms_cgraph *g = mms_new_graph(ctx), *bad = mms_new_graph(ctx);
    mms_backend_buffer_t buf;
    int32_t ids[2] = { 1, 3 };
    test_capture_log();
    mms_build_forward_expand(g, rows);
    EXPECT_ERROR(mms_backend_graph_compute(cpu, g), MMS_ERR_STATE, "has no memory");
    buf = mms_backend_alloc_ctx_tensors(ctx, cpu);
    fill(a, -1, 1);
    mms_backend_tensor_set(idx, ids, 0, sizeof ids);
    EXPECT_ERROR(mms_backend_graph_compute(cpu, g), MMS_ERR_INVALID_ARG, "GET_ROWS", "'picked'", "index 3", "0..2");
    ids[1] = 2;
    mms_backend_tensor_set(idx, ids, 0, sizeof ids);
    EXPECT(mms_backend_graph_compute(cpu, g) == MMS_OK, "valid indices: %s", mms_last_error());
    mms_build_forward_expand(bad, mms_add(ctx, a, idx));
    EXPECT_ERROR(mms_backend_graph_compute(cpu, bad), MMS_ERR_INVALID_ARG, "not built correctly", "mms_add");
    mms_backend_buffer_reset(buf);
    EXPECT_ERROR(mms_backend_graph_compute(cpu, g), MMS_ERR_STALE, "handed out again");
    mms_log_set(NULL, NULL);
    mms_backend_buffer_free(buf);
    mms_free(ctx);
}

/* A buffer type the CPU cannot read (not host memory): compute must refuse tensors in it. */
static const char *dev_name(mms_backend_buffer_type_t t) { (void)t; return "FakeDevice"; }
static size_t dev_align(mms_backend_buffer_type_t t) { (void)t; return 64; }
static void *dev_base(mms_backend_buffer_t b) { return b->context; }
static void dev_free(mms_backend_buffer_t b) { free(b->context); }
static mms_backend_buffer_t dev_alloc(mms_backend_buffer_type_t t, size_t size) {
    struct mms_backend_buffer_i i;
    memset(&i, 0, sizeof i);
    i.get_base = dev_base;
    i.free_buffer = dev_free;
    return mms_backend_buffer_init(t, i, calloc(1, size), size);
}

static void test_compute_refuses_memory_it_cannot_read(void) {
    struct mms_backend_buffer_type dev;
    struct mms_context *ctx = test_ctx(true);
    struct mms_tensor *a = mms_set_name(mms_new_tensor_1d(ctx, MMS_TYPE_F32, 4), "on_device");
    struct mms_cgraph *g = mms_new_graph(ctx);
    mms_backend_buffer_t b;
    memset(&dev, 0, sizeof dev);
    dev.iface.get_name = dev_name;
    dev.iface.alloc_buffer = dev_alloc;
    dev.iface.get_alignment = dev_align;
    mms_build_forward_expand(g, mms_sqr(ctx, a));
    b = mms_backend_alloc_ctx_tensors_from_buft(ctx, &dev);
    EXPECT(b && !mms_backend_buffer_is_host(b) && mms_backend_buft_get_max_size(&dev) == SIZE_MAX, "fake device buffer");
    test_capture_log();
    EXPECT_ERROR(mms_backend_graph_compute(cpu, g), MMS_ERR_INVALID_ARG, "'on_device'", "FakeDevice", "cannot use");
    mms_log_set(NULL, NULL);
    mms_backend_buffer_free(b);
    mms_free(ctx);
}

static void test_async_wrappers_fall_back(void) {
    struct mms_context *ctx = test_ctx(true);
    struct mms_tensor *a = mms_new_tensor_1d(ctx, MMS_TYPE_F32, 4), *b = mms_new_tensor_1d(ctx, MMS_TYPE_F32, 4);
    mms_backend_buffer_t buf = mms_backend_alloc_ctx_tensors(ctx, cpu);
    float x[4] = { 1, 2, 3, 4 }, y[4] = { 0 };
    EXPECT(mms_backend_tensor_set_async(cpu, a, x, 0, sizeof x) == MMS_OK, "set_async");
    EXPECT(mms_backend_tensor_copy_async(cpu, cpu, a, b) == MMS_OK, "copy_async: %s", mms_last_error());
    EXPECT(mms_backend_tensor_get_async(cpu, b, y, 0, sizeof y) == MMS_OK && mms_backend_synchronize(cpu) == MMS_OK, "get_async");
    EXPECT(memcmp(x, y, sizeof x) == 0, "copied values");
    EXPECT(mms_backend_event_new(cpu) == NULL, "the CPU backend has no events");
    EXPECT(mms_backend_tensor_memset(b, 0, 4, 8) == MMS_OK && mms_backend_tensor_get(b, y, 0, sizeof y) == MMS_OK &&
           y[0] == 1.0f && y[1] == 0.0f && y[2] == 0.0f && y[3] == 4.0f, "memset of a byte range");
    mms_backend_buffer_free(buf);
    mms_free(ctx);
}

/* Every kernel set selects exactly when it is supported; AVX2 and NEON exclude each other; AUTO
   takes the set the environment says this CPU must get (MMS_TEST_AUTO_KERNELS, set by the emulated
   runs from the CPU model they chose), else one that is supported. */
static void test_kernel_set_selection(void) {
    const char *want_auto = getenv("MMS_TEST_AUTO_KERNELS");
    enum mms_cpu_kernels k = MMS_CPU_KERNELS_AUTO;
    int known = 0;
    while (test_kernel_set_next(&k)) {
        known++;
        if (mms_cpu_kernels_supported(k))
            EXPECT(mms_cpu_set_kernels(k) == MMS_OK && mms_cpu_get_kernels() == k, "%s supported but not selected", mms_cpu_kernels_name(k));
        else
            EXPECT_ERROR(mms_cpu_set_kernels(k), MMS_ERR_UNSUPPORTED, mms_cpu_kernels_name(k), "need");
    }
    EXPECT(known == 5, "%d kernel sets named", known);
    EXPECT(mms_cpu_kernels_supported(MMS_CPU_KERNELS_SCALAR), "scalar always runs");
    EXPECT(mms_cpu_kernels_supported(MMS_CPU_KERNELS_AVX2) == mms_cpu_has_avx2(), "avx2 support agrees");
    EXPECT(!(mms_cpu_kernels_supported(MMS_CPU_KERNELS_AVX2) && mms_cpu_kernels_supported(MMS_CPU_KERNELS_NEON)), "avx2 and neon");
    EXPECT(!mms_cpu_kernels_supported(MMS_CPU_KERNELS_NEON_DOTPROD) || mms_cpu_kernels_supported(MMS_CPU_KERNELS_NEON), "dotprod without neon");
    EXPECT(!mms_cpu_kernels_supported(MMS_CPU_KERNELS_AVX512) || mms_cpu_kernels_supported(MMS_CPU_KERNELS_AVX2), "avx512 without avx2");
#if defined(__aarch64__)
    EXPECT(mms_cpu_kernels_supported(MMS_CPU_KERNELS_NEON), "a 64-bit ARM build without NEON");
#elif defined(__x86_64__)
    EXPECT(!mms_cpu_kernels_supported(MMS_CPU_KERNELS_NEON), "NEON on x86");
#endif
    EXPECT_ERROR(mms_cpu_set_kernels((enum mms_cpu_kernels)7), MMS_ERR_INVALID_ARG, "unknown kernel set");
    EXPECT(strcmp(mms_cpu_kernels_name((enum mms_cpu_kernels)7), "unknown") == 0, "name of an unknown set");
    EXPECT(mms_cpu_set_kernels(MMS_CPU_KERNELS_AUTO) == MMS_OK && mms_cpu_kernels_supported(mms_cpu_get_kernels()), "auto");
    if (want_auto && want_auto[0])
        EXPECT(strcmp(mms_cpu_kernels_name(mms_cpu_get_kernels()), want_auto) == 0, "auto chose %s, this CPU should get %s",
               mms_cpu_kernels_name(mms_cpu_get_kernels()), want_auto);
}

static void test_backend_settings_and_cuda_entry_points(void) {
    test_capture_log();
    EXPECT(mms_backend_is_cpu(cpu) && strcmp(mms_backend_name(cpu), "CPU") == 0, "cpu identity");
    EXPECT_ERROR(mms_backend_cpu_set_n_threads(cpu, -1), MMS_ERR_INVALID_ARG, "n_threads must be");
    EXPECT_ERROR(mms_backend_cpu_set_split(cpu, (enum mms_cpu_split)7), MMS_ERR_INVALID_ARG, "is not MMS_CPU_SPLIT_AUTO");
    EXPECT(mms_backend_cpu_set_n_threads(cpu, 0) == MMS_OK && mms_backend_cpu_get_n_threads(cpu) == mms_cpu_count(), "0: one per core");
    EXPECT(mms_cpu_count() >= 1, "cpu count");
    test_kernel_set_selection();
#ifndef MMS_CUDA
    mms_clear_error();
    EXPECT(mms_backend_cuda_get_device_count() == 0, "device count without CUDA");
    EXPECT(mms_backend_cuda_init(0) == NULL && mms_last_status() == MMS_ERR_UNSUPPORTED &&
           strstr(mms_last_error(), "MMS_CUDA"), "cuda init: %s", mms_last_error());
    EXPECT(mms_backend_cuda_buffer_type(0) == NULL && mms_backend_cuda_host_buffer_type() == NULL, "cuda buffer types");
    EXPECT(!mms_backend_is_cuda(cpu), "the CPU is not CUDA");
#endif
    mms_log_set(NULL, NULL);
}

int main(void) {
    test_seed();
    cpu = mms_backend_cpu_init();
    if (!cpu) { printf("cannot start the CPU backend: %s\n", mms_last_error()); return 1; }
    RUN(test_buffer_basics);
    RUN(test_alloc_ctx_tensors_places_everything);
    RUN(test_tensor_data_errors);
    RUN(test_stale_after_reset_and_free);
    RUN(test_buffer_from_ptr_and_manual_placement);
    RUN(test_results_do_not_depend_on_thread_count);
    RUN(test_threadpool_spin_budget_follows_wake_ups);
    RUN(test_threadpool_runs_each_part_once_with_or_without_helpers);
    RUN(test_threadpool_splits_what_pays);
    RUN(test_threadpool_counts_the_callers_slowdown);
    RUN(test_pool_clocks_in_a_strict_build);
    RUN(test_graph_on_a_pool_whose_helpers_never_run);
    RUN(test_allocating_context_computes_directly);
    RUN(test_compute_errors);
    RUN(test_compute_refuses_memory_it_cannot_read);
    RUN(test_async_wrappers_fall_back);
    RUN(test_backend_settings_and_cuda_entry_points);
    mms_backend_free(cpu);
    return test_summary();
}
