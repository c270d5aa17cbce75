// cuda_host.h - the CUDA backend's kernels on the host, for tests on machines without a GPU.
// Include after mmsched_cuda.cu (which it runs: cu_compute_node with a host executor), test.h
// and limited_backend.h.
//   host_exec            element functors in a loop; block functors with a fiber (ucontext) per
//                        CUDA thread: cooperative barriers for __syncthreads and warp shuffles,
//                        shared memory poisoned with NaN, a barrier some threads never reach
//                        reported as a deadlock; the cuBLAS call by its documented meaning
//   emulated_gpu_new()   the CUDA backend with the host for a device: the limited test backend's
//                        memory (which the CPU may not use, so the scheduler copies as for a GPU),
//                        cu_supports_op, and cu_compute_node with host_exec
#ifndef MMS_CUDA_HOST_H
#define MMS_CUDA_HOST_H

#include <ucontext.h>
#include <vector>

// -- the host executor --

// A block's threads are fibers (ucontext) run in turn on this one thread: a fiber runs until it
// waits at a barrier (the block's, or its warp's for a shuffle) and the next one goes on. Cheap
// enough to run whole models, deterministic, and a kernel that waits for a barrier some threads
// never reach is reported as a deadlock instead of hanging.
#define FIBER_STACK (64 * 1024)

struct fiber_block {
    cu_host_block base;                  // first: the kernels see this
    int           n;                     // threads
    ucontext_t    sched;
    std::vector<ucontext_t> ctx;
    std::vector<char> stacks;
    std::vector<int>  done;
    int           current;
    unsigned      progress;              // bumped by every barrier release and finished thread
    int           block_waiting;
    unsigned      block_gen;
    int           warp_waiting[32];
    unsigned      warp_gen[32];
    float         xchg[1024];
};
static fiber_block *fiber_now;           // the block being emulated
static void (*fiber_body)(const cu_thread &th, const void *body);
static const void *fiber_body_arg;
static cu_thread  *fiber_threads;

static void fiber_yield(fiber_block *f) { swapcontext(&f->ctx[(size_t)f->current], &f->sched); }

// Wait until `count` threads have arrived at this barrier (waiting / gen are its state).
static void fiber_barrier(fiber_block *f, int *waiting, unsigned *gen, int count) {
    const unsigned g = *gen;
    if (++*waiting == count) { *waiting = 0; ++*gen; f->progress++; return; }
    while (*gen == g) fiber_yield(f);
}
static void fiber_sync(cu_host_block *b) {
    fiber_block *f = (fiber_block *)b;
    fiber_barrier(f, &f->block_waiting, &f->block_gen, f->n);
}
static float fiber_exchange(cu_host_block *b, int tid, float v, int src_lane) {
    fiber_block *f = (fiber_block *)b;
    const int w = tid / 32;
    f->xchg[tid] = v;
    fiber_barrier(f, &f->warp_waiting[w], &f->warp_gen[w], 32);
    const float r = f->xchg[w * 32 + src_lane];
    fiber_barrier(f, &f->warp_waiting[w], &f->warp_gen[w], 32);   // nobody overwrites before every lane has read
    return r;
}
static void fiber_main(int tid) {
    fiber_body(fiber_threads[tid], fiber_body_arg);
    fiber_now->done[(size_t)tid] = 1;
    fiber_now->progress++;
}
// Runs the block's fibers (fiber_threads[] set) to the end. Kept out of line: getcontext returns
// twice, which the caller's loop variables need not know about.
static __attribute__((noinline)) enum mms_status fiber_run_block(fiber_block *f, const char *what) {
    const int n = f->n;
    f->block_waiting = 0;
    memset(f->warp_waiting, 0, sizeof f->warp_waiting);
    for (int t = 0; t < n; t++) {
        f->done[(size_t)t] = 0;
        getcontext(&f->ctx[(size_t)t]);
        f->ctx[(size_t)t].uc_stack.ss_sp = f->stacks.data() + (size_t)t * FIBER_STACK;
        f->ctx[(size_t)t].uc_stack.ss_size = FIBER_STACK;
        f->ctx[(size_t)t].uc_link = &f->sched;
        makecontext(&f->ctx[(size_t)t], (void (*)())fiber_main, 1, t);
    }
    for (int left = n; left > 0;) {
        const unsigned before = f->progress;
        left = 0;
        for (int t = 0; t < n; t++) {
            if (f->done[(size_t)t]) continue;
            f->current = t;
            swapcontext(&f->sched, &f->ctx[(size_t)t]);
            left += !f->done[(size_t)t];
        }
        if (left > 0 && f->progress == before)
            return mms_set_error(MMS_ERR_STATE, "%s: block (%lld, %lld, %lld) deadlocked: %d threads wait at a barrier the others never reach",
                                 what, (long long)fiber_threads[0].bx, (long long)fiber_threads[0].by, (long long)fiber_threads[0].bz, left);
    }
    return MMS_OK;
}

template <typename B> static void fiber_call(const cu_thread &th, const void *body) { (*(const B *)body)(th); }

static float host_elem(enum mms_type t, const void *base, long long i) {
    switch (t) {
        case MMS_TYPE_F32:  return ((const float *)base)[i];
        case MMS_TYPE_F16:  return mms_fp16_to_fp32(((const mms_fp16_t *)base)[i]);
        default:            return mms_bf16_to_fp32(((const mms_bf16_t *)base)[i]);
    }
}

struct host_exec {
    char     *scratch;
    cu_fault *fault;
    int      *n_not_elementwise;   // optional: counts block kernels and cuBLAS calls run
    template <typename F> enum mms_status each(const F &f, int64_t n, const char *) const {
        for (int64_t i = 0; i < n; i++) f(i);
        return MMS_OK;
    }
    // Every block of the grid in turn, its threads as fibers; shared memory starts as NaN bytes so
    // reads before writes show.
    template <typename B> enum mms_status blocks(const B &body, cu_grid g, int threads, size_t smem, const char *what) const {
        if (n_not_elementwise) ++*n_not_elementwise;
        fiber_block *f = new fiber_block;
        std::vector<char> mem(smem + 1);
        std::vector<cu_thread> ths((size_t)threads);
        enum mms_status st = MMS_OK;
        if (threads % 32 != 0 || threads > 1024) { delete f; return mms_set_error(MMS_ERR_INVALID_ARG, "%s: %d threads", what, threads); }
        f->base.sync = fiber_sync;
        f->base.exchange = fiber_exchange;
        f->n = threads;
        f->ctx.resize((size_t)threads);
        f->stacks.resize((size_t)threads * FIBER_STACK);
        f->done.resize((size_t)threads);
        fiber_now = f;
        fiber_body = fiber_call<B>;
        fiber_body_arg = &body;
        fiber_threads = ths.data();
        for (unsigned bz = 0; bz < g.z && st == MMS_OK; bz++)
            for (unsigned by = 0; by < g.y && st == MMS_OK; by++)
                for (unsigned bx = 0; bx < g.x && st == MMS_OK; bx++) {
                    for (int t = 0; t < threads; t++) {
                        const cu_thread th = { t, threads, bx, by, bz, mem.data(), &f->base };
                        ths[(size_t)t] = th;
                    }
                    memset(mem.data(), 0xFF, smem);
                    st = fiber_run_block(f, what);
                }
        delete f;
        return st;
    }
    // cublasGemmStridedBatchedEx(OP_T, OP_N) by its definition, in double.
    enum mms_status gemm(const cu_gemm &g) const {
        const size_t es = mms_type_size(g.type);
        if (n_not_elementwise) ++*n_not_elementwise;
        for (int bi = 0; bi < g.batch; bi++) {
            const char *A = (const char *)g.a + (size_t)(bi * g.stride_a) * es, *B = (const char *)g.b + (size_t)(bi * g.stride_b) * es;
            float *C = g.c + bi * g.stride_c;
            for (int j = 0; j < g.n; j++)
                for (int i = 0; i < g.m; i++) {
                    double s = 0.0;
                    for (int kk = 0; kk < g.k; kk++) s += (double)host_elem(g.type, A, kk + i * g.lda) * host_elem(g.type, B, kk + j * g.ldb);
                    C[i + j * g.ldc] = (float)s;
                }
        }
        return MMS_OK;
    }
};

// -- the kernels as a backend --
// The limited test backend (host memory the CPU may not use) computing with cu_compute_node and
// the host executor, and cu_supports_op deciding what it runs: the CUDA backend with its device
// swapped for the host, so the scheduler's splits, copies and fallbacks around the real kernels
// run here.

static enum mms_status emu_compute(mms_backend_t b, struct mms_cgraph *g) {
    limited_of(b)->n_computes++;
    for (int j = 0; j < mms_graph_n_nodes(g); j++) {
        const struct mms_tensor *t = mms_graph_node(g, j);
        if (t->op == MMS_OP_NONE || mms_op_is_view(t->op) || mms_nelements(t) == 0) continue;
        std::vector<char> scratch(cu_scratch_need(t) + 1);
        cu_fault fault;
        memset(&fault, 0, sizeof fault);
        const host_exec ex = { scratch.data(), &fault, NULL };
        const enum mms_status st = cu_compute_node(ex, t, j);
        if (st != MMS_OK) return st;
        if (fault.set) return mms_set_error(MMS_ERR_INVALID_ARG, "GET_ROWS %s: index %lld outside 0..%lld", t->name, (long long)fault.value, (long long)fault.limit - 1);
    }
    return MMS_OK;
}

static mms_backend_t emulated_gpu_new(void) {
    mms_backend_t b = limited_backend_new("EMU-CUDA", LIMITED_ALL_OPS);
    if (!b) return NULL;
    b->iface.supports_op = cu_supports_op;
    b->iface.graph_compute = emu_compute;
    return b;
}

#endif
