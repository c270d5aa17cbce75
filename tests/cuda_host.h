// cuda_host.h - the CUDA backend's kernels on the host, for tests on machines without a GPU.
// Include after mmsched_cuda.cu (which it runs: cu_compute_node with a host executor); the
// emulated backend at the end also needs test.h and limited_backend.h before.
//   host_exec            element functors in a loop; block functors with a fiber (ucontext) per
//                        CUDA thread: cooperative barriers for __syncthreads, __syncwarp and warp
//                        shuffles, mma.sync by its fragment layout, shared memory poisoned with
//                        NaN, a barrier some threads never reach reported as a deadlock; large
//                        grids split into launches as the GPU's executor splits them, each checked
//                        against CUDA's limits; the cuBLAS call by its documented meaning
//   emulated_gpu_new()   the CUDA backend with the host for a device: the limited test backend's
//                        memory (which the CPU may not use, so the scheduler copies as for a GPU),
//                        cu_supports_op, and cu_compute_node with host_exec
#ifndef MMS_CUDA_HOST_H
#define MMS_CUDA_HOST_H

#include <ucontext.h>
#include <vector>
#include <algorithm>

// -- the host executor --

// A block's threads are fibers (ucontext) run in turn on this one thread: a fiber runs until it
// waits at a barrier (the block's, or its warp's for a shuffle) and the next one goes on. Cheap
// enough to run whole models, deterministic, and a kernel that waits for a barrier some threads
// never reach is reported as a deadlock instead of hanging.
#define FIBER_STACK (64 * 1024)
#define HOST_MAX_SMEM (99 * 1024)          // the least opt-in shared memory per block of sm_80+ parts (sm_86/89)

struct fiber_warp {
    int      waiting;
    unsigned gen;
    uint32_t xchg[32][8];                  // each lane's words for a shuffle or an mma
};

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
    fiber_warp    warps[32];
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
static void fiber_syncwarp(cu_host_block *b, int tid) {
    fiber_warp *w = &((fiber_block *)b)->warps[tid / 32];
    fiber_barrier((fiber_block *)b, &w->waiting, &w->gen, 32);
}
static uint32_t fiber_exchange(cu_host_block *b, int tid, uint32_t v, int src_lane) {
    fiber_warp *w = &((fiber_block *)b)->warps[tid / 32];
    w->xchg[tid % 32][0] = v;
    fiber_syncwarp(b, tid);
    const uint32_t r = w->xchg[src_lane & 31][0];
    fiber_syncwarp(b, tid);              // nobody overwrites before every lane has read
    return r;
}
static float host_half(uint32_t h, int bf16) { return bf16 ? mms_bf16_to_fp32((mms_bf16_t)h) : mms_fp16_to_fp32((mms_fp16_t)h); }
// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}: every lane hands in its fragments (the layout
// of cu_thread::mma), each lane computes its four results from the whole A and B. The products are
// exact in f32; they are summed in double and rounded once (the hardware's order is unspecified).
static void fiber_mma(cu_host_block *b, int tid, float *d, const uint32_t *a, const uint32_t *bf, int bf16) {
    fiber_warp *w = &((fiber_block *)b)->warps[tid / 32];
    const int lane = tid % 32, g = lane / 4, t = lane % 4;
    float A[16][16], B[16][8];
    for (int r = 0; r < 4; r++) w->xchg[lane][r] = a[r];
    for (int r = 0; r < 2; r++) w->xchg[lane][4 + r] = bf[r];
    fiber_syncwarp(b, tid);
    for (int l = 0; l < 32; l++) {
        const int lg = l / 4, lt = l % 4;
        for (int i = 0; i < 8; i++) {            // A element i of lane l: register i / 2, half i % 2
            const uint32_t h = (w->xchg[l][i / 2] >> (16 * (i % 2))) & 0xffffu;
            A[lg + 8 * ((i / 2) % 2)][2 * lt + 8 * (i / 4) + i % 2] = host_half(h, bf16);
        }
        for (int i = 0; i < 4; i++) {            // B element i: register i / 2
            const uint32_t h = (w->xchg[l][4 + i / 2] >> (16 * (i % 2))) & 0xffffu;
            B[2 * lt + 8 * (i / 2) + i % 2][lg] = host_half(h, bf16);
        }
    }
    fiber_syncwarp(b, tid);
    for (int i = 0; i < 4; i++) {
        const int row = g + 8 * (i / 2), col = 2 * t + i % 2;
        double s = d[i];
        for (int k = 0; k < 16; k++) s += (double)A[row][k] * (double)B[k][col];
        d[i] = (float)s;
    }
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
    for (int w = 0; w < 32; w++) f->warps[w].waiting = 0;
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

// The fibers of a block of n threads (kept between launches: the stacks are large).
static fiber_block *fiber_block_for(int n) {
    static fiber_block *pool;
    if (!pool) {
        pool = new fiber_block;
        pool->base.sync = fiber_sync;
        pool->base.syncwarp = fiber_syncwarp;
        pool->base.exchange = fiber_exchange;
        pool->base.mma = fiber_mma;
        pool->n = 0;
        pool->progress = 0;
        pool->block_gen = 0;
        for (int w = 0; w < 32; w++) pool->warps[w].gen = 0;
    }
    if ((size_t)n > pool->ctx.size()) {
        pool->ctx.resize((size_t)n);
        pool->stacks.resize((size_t)n * FIBER_STACK);
        pool->done.resize((size_t)n);
    }
    pool->n = n;
    return pool;
}

static float host_elem(enum mms_type t, const void *base, long long i) {
    switch (t) {
        case MMS_TYPE_F32:  return ((const float *)base)[i];
        case MMS_TYPE_F16:  return mms_fp16_to_fp32(((const mms_fp16_t *)base)[i]);
        default:            return mms_bf16_to_fp32(((const mms_bf16_t *)base)[i]);
    }
}

// A launch the GPUs we build for (sm_80 and later) accept: threads a multiple of the warp up to
// 1024, shared memory within HOST_MAX_SMEM, the grid within CUDA's limits.
static enum mms_status host_check_launch(const cu_launch &l, int threads, size_t smem, const char *what) {
    if (threads <= 0 || threads % 32 != 0 || threads > 1024) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: %d threads", what, threads);
    if (smem > HOST_MAX_SMEM) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: %zu bytes of shared memory", what, smem);
    if (l.x < 1 || l.x > CU_MAX_GRID_X || l.y < 1 || l.y > CU_MAX_GRID_YZ || l.z < 1 || l.z > CU_MAX_GRID_YZ)
        return mms_set_error(MMS_ERR_INVALID_ARG, "%s: a launch of %u x %u x %u blocks", what, l.x, l.y, l.z);
    return MMS_OK;
}

// The blocks of one launch l of grid g, each block's threads as fibers; shared memory starts as
// NaN bytes so reads before writes show.
template <typename B> static enum mms_status host_run_launch(const B &body, cu_grid g, const cu_launch &l, int threads, size_t smem, const char *what) {
    enum mms_status st = host_check_launch(l, threads, smem, what);
    if (st != MMS_OK) return st;
    fiber_block *f = fiber_block_for(threads);
    std::vector<char> mem(smem + 1);
    std::vector<cu_thread> ths((size_t)threads);
    fiber_now = f;
    fiber_body = fiber_call<B>;
    fiber_body_arg = &body;
    fiber_threads = ths.data();
    for (int64_t bz = l.z0; bz < l.z0 + l.z && st == MMS_OK; bz++)
        for (int64_t by = l.y0; by < l.y0 + l.y && st == MMS_OK; by++)
            for (int64_t bx = l.x0; bx < l.x0 + l.x && st == MMS_OK; bx++) {
                for (int t = 0; t < threads; t++) {
                    const cu_thread th = { t, threads, bx, by, bz, g.x, g.y, g.z, mem.data(), &f->base };
                    ths[(size_t)t] = th;
                }
                memset(mem.data(), 0xFF, smem);
                st = fiber_run_block(f, what);
            }
    return st;
}

// cublasGemmStridedBatchedEx(OP_T, OP_N) by its definition, in double.
static void host_gemm(const cu_gemm &g) {
    const size_t es = mms_type_size(g.type);
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
}

struct host_exec {
    char     *scratch;
    cu_fault *fault;
    int      *n_not_elementwise;   // optional: counts block kernels and cuBLAS calls run
    bool      tensor_cores;        // the GPU's mma.sync (sm_80 and later): emulated
    cu_q8_cache *q8;               // optional: 8-bit activations kept between products (the graph loop)
    template <typename F> enum mms_status each(const F &f, int64_t n, const char *) const {
        for (int64_t i = 0; i < n; i++) f(i);
        return MMS_OK;
    }
    // The grid as the GPU's executor launches it (cu_split_grid), every launch checked.
    template <typename B> enum mms_status blocks(const B &body, cu_grid g, int threads, size_t smem, const char *what) const {
        cu_launch l[CU_MAX_LAUNCHES];
        const int n = cu_split_grid(g, l);
        if (n_not_elementwise) ++*n_not_elementwise;
        if (n < 0) return mms_set_error(MMS_ERR_UNSUPPORTED, "%s: a grid of %lld x %lld x %lld blocks", what, (long long)g.x, (long long)g.y, (long long)g.z);
        enum mms_status st = MMS_OK;
        for (int i = 0; i < n && st == MMS_OK; i++) st = host_run_launch(body, g, l[i], threads, smem, what);
        return st;
    }
    enum mms_status gemm(const cu_gemm &g) const {
        if (n_not_elementwise) ++*n_not_elementwise;
        host_gemm(g);
        return MMS_OK;
    }
};

// -- the kernels as a backend --
// The limited test backend (host memory the CPU may not use) computing with cu_compute_node and
// the host executor, and cu_supports_op deciding what it runs: the CUDA backend with its device
// swapped for the host, so the scheduler's splits, copies and fallbacks around the real kernels
// run here.
#ifdef MMS_LIMITED_BACKEND_H

// The graph as the CUDA backend computes it (cu_compute_graph: fused nodes, shared 8-bit activations).
static enum mms_status emu_compute(mms_backend_t b, struct mms_cgraph *g) {
    size_t need = 0, need_q8 = 0;
    limited_of(b)->n_computes++;
    for (int j = 0; j < mms_graph_n_nodes(g); j++) {
        need = std::max(need, cu_scratch_need(mms_graph_node(g, j)));
        need_q8 = std::max(need_q8, cu_q8_need(mms_graph_node(g, j)));
    }
    std::vector<char> scratch(need + 1), q8_area(need_q8 + 1);
    cu_q8_cache q8 = { NULL, q8_area.data() };
    cu_fault fault;
    memset(&fault, 0, sizeof fault);
    const host_exec ex = { scratch.data(), &fault, NULL, true, &q8 };
    const enum mms_status st = cu_compute_graph(ex, g, true, mms_backend_name(b));
    if (st != MMS_OK) return st;
    return fault.set ? cu_fault_status(&fault, mms_backend_name(b)) : MMS_OK;
}

static mms_backend_t emulated_gpu_new(void) {
    mms_backend_t b = limited_backend_new("EMU-CUDA", LIMITED_ALL_OPS);
    if (!b) return NULL;
    b->iface.supports_op = cu_supports_op;
    b->iface.graph_compute = emu_compute;
    return b;
}

#endif
#endif
