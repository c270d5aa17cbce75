// The CUDA backend's kernels, run on the host. mmsched_cuda.cu computes every node through
// cu_compute_node with an executor; this file gives it a host executor: element functors in a
// loop, block functors with one thread per CUDA thread (pthread barriers for __syncthreads and for
// warp shuffles, shared memory poisoned with NaN), and the cuBLAS call by its documented meaning
// (column-major C = A^T B, strided batches). Every op case of test_backend_ops then runs node by
// node through the very code the GPU runs and is compared with the CPU backend: element ops to the
// bit, the rest within the case's tolerance. Block-type dequantization is compared bit for bit.
// What this cannot check: the CUDA runtime itself (launch limits, streams, copies, events, memory)
// and cuBLAS's arithmetic; test_backend_ops, test_sched and test_cuda do those on a GPU machine.
#include "../mmsched_cuda.cu"
#include "test.h"
#include "op_cases.h"
#include <pthread.h>
#include <vector>

// -- the host executor --

struct host_block {
    cu_host_block     base;          // first: the kernels see this
    pthread_barrier_t block;
    pthread_barrier_t warps[32];
    float             xchg[1024];
};

static void host_sync(cu_host_block *b) { pthread_barrier_wait(&((host_block *)b)->block); }

static float host_exchange(cu_host_block *b, int tid, float v, int src_lane) {
    host_block *h = (host_block *)b;
    const int w = tid / 32;
    float r;
    h->xchg[tid] = v;
    pthread_barrier_wait(&h->warps[w]);
    r = h->xchg[w * 32 + src_lane];
    pthread_barrier_wait(&h->warps[w]);     // nobody overwrites xchg before every lane has read
    return r;
}

template <typename B> struct host_thread_arg {
    const B  *body;
    cu_thread th;
    cu_grid   grid;
    size_t    smem;
};
template <typename B> static void *host_thread_main(void *p) {
    host_thread_arg<B> *a = (host_thread_arg<B> *)p;
    for (unsigned bz = 0; bz < a->grid.z; bz++)
        for (unsigned by = 0; by < a->grid.y; by++)
            for (unsigned bx = 0; bx < a->grid.x; bx++) {
                a->th.bx = bx;
                a->th.by = by;
                a->th.bz = bz;
                if (a->th.tid == 0) memset(a->th.smem, 0xFF, a->smem);   // NaN: reads before writes show
                a->th.host->sync(a->th.host);
                (*a->body)(a->th);
                a->th.host->sync(a->th.host);                          // the block is done
            }
    return NULL;
}

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
    template <typename F> enum mms_status each(const F &f, int64_t n, const char *) const {
        for (int64_t i = 0; i < n; i++) f(i);
        return MMS_OK;
    }
    // Each host thread plays one CUDA thread through every block of the grid in turn; thread 0
    // poisons the shared memory between blocks.
    template <typename B> enum mms_status blocks(const B &body, cu_grid g, int threads, size_t smem, const char *what) const {
        std::vector<pthread_t> ids((size_t)threads);
        std::vector<host_thread_arg<B> > args((size_t)threads);
        std::vector<char> mem(smem + 1);
        host_block *hb = new host_block;
        EXPECT(threads % 32 == 0 && threads <= 1024, "%s: %d threads", what, threads);
        hb->base.sync = host_sync;
        hb->base.exchange = host_exchange;
        pthread_barrier_init(&hb->block, NULL, (unsigned)threads);
        for (int w = 0; w < threads / 32; w++) pthread_barrier_init(&hb->warps[w], NULL, 32);
        for (int t = 0; t < threads; t++) {
            const cu_thread th = { t, threads, 0, 0, 0, mem.data(), &hb->base };
            args[(size_t)t].body = &body;
            args[(size_t)t].th = th;
            args[(size_t)t].grid = g;
            args[(size_t)t].smem = smem;
            if (pthread_create(&ids[(size_t)t], NULL, host_thread_main<B>, &args[(size_t)t]) != 0) {
                fprintf(stderr, "%s: cannot start thread %d\n", what, t);
                abort();
            }
        }
        for (int t = 0; t < threads; t++) pthread_join(ids[(size_t)t], NULL);
        pthread_barrier_destroy(&hb->block);
        for (int w = 0; w < threads / 32; w++) pthread_barrier_destroy(&hb->warps[w]);
        delete hb;
        return MMS_OK;
    }
    // cublasGemmStridedBatchedEx(OP_T, OP_N) by its definition, in double.
    enum mms_status gemm(const cu_gemm &g) const {
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
        return MMS_OK;
    }
};

// -- the tests --

static bool is_transcendental(enum mms_op op) {
    return op == MMS_OP_EXP || op == MMS_OP_TANH || op == MMS_OP_SILU || op == MMS_OP_GELU || op == MMS_OP_GELU_TANH;
}
static bool is_element_op(enum mms_op op) {
    return op != MMS_OP_MUL_MAT && op != MMS_OP_NORM && op != MMS_OP_RMS_NORM && op != MMS_OP_SUM_ROWS &&
           op != MMS_OP_ARGMAX && op != MMS_OP_SOFT_MAX && op != MMS_OP_FLASH_ATTN_EXT;
}

// Output as floats (I32 converted).
static std::vector<float> as_floats(const struct mms_tensor *t) {
    const int64_t n = mms_nelements(t);
    std::vector<float> v((size_t)n);
    if (t->type == MMS_TYPE_I32) for (int64_t i = 0; i < n; i++) v[(size_t)i] = (float)((const int32_t *)t->data)[i];
    else mms_get_type_traits(t->type)->to_float(t->data, v.data(), n);
    return v;
}

static void test_every_op_case_matches_the_cpu(void) {
    const unsigned long long seed = test_rand_u64();
    mms_backend_t cpu = mms_backend_cpu_init();
    struct op_case oc;
    int n_exact = 0, n_tol = 0;
    double worst = 0.0;
    for (int i = 0; ; i++) {
        struct mms_context *c = test_ctx(true);
        if (!build_case(i, c, &oc)) { mms_free(c); break; }
        if (!oc.out) { EXPECT(0, "case %d (%s) did not build: %s", i, oc.desc, mms_get_error(c)); mms_free(c); continue; }
        struct mms_cgraph *g = mms_new_graph(c);
        mms_build_forward_expand(g, oc.out);
        mms_backend_buffer_t buf = mms_backend_alloc_ctx_tensors(c, cpu);
        EXPECT(buf != NULL, "alloc: %s", mms_last_error());
        for (int j = 0; j < mms_graph_n_leafs(g); j++) fill_leaf(mms_graph_leaf(g, j), seed + (unsigned long long)(i * 100 + j));
        EXPECT(mms_backend_graph_compute(cpu, g) == MMS_OK, "%s on the CPU: %s", oc.desc, mms_last_error());
        const size_t bytes = mms_nbytes(oc.out);
        std::vector<char> ref(oc.out->data ? (const char *)oc.out->data : NULL, oc.out->data ? (const char *)oc.out->data + bytes : NULL);
        const std::vector<float> ref_f = as_floats(oc.out);
        bool exact = true;
        for (int j = 0; j < mms_graph_n_nodes(g); j++) {
            struct mms_tensor *t = mms_graph_node(g, j);
            cu_fault fault;
            if (mms_op_is_view(t->op)) continue;
            exact = exact && is_element_op(t->op) && !is_transcendental(t->op);
            if (!t->view_src) memset(t->data, 0xFF, mms_nbytes(t));
            memset(&fault, 0, sizeof fault);
            std::vector<char> scratch(cu_scratch_need(t) + 1);
            const host_exec ex = { scratch.data(), &fault };
            EXPECT(cu_compute_node(ex, t, j) == MMS_OK && !fault.set, "%s: node %d: %s", oc.desc, j, mms_last_error());
        }
        if (exact) {
            EXPECT(memcmp(ref.data(), oc.out->data, bytes) == 0, "%s: the kernels' results differ from the CPU's", oc.desc);
            n_exact++;
        } else {
            const std::vector<float> got = as_floats(oc.out);
            double err = 0.0, norm = 0.0;
            bool nan = false;
            for (size_t e = 0; e < got.size(); e++) {
                nan = nan || (got[e] != got[e] && ref_f[e] == ref_f[e]);
                err += ((double)ref_f[e] - got[e]) * ((double)ref_f[e] - got[e]);
                norm += (double)ref_f[e] * ref_f[e];
            }
            const double nmse = err / (norm > 0 ? norm : 1.0), tol = oc.tol > 0 ? oc.tol : 1e-12;
            EXPECT(!nan && nmse <= tol, "%s: NMSE %.3g > %.3g%s", oc.desc, nmse, tol, nan ? " (unwritten NaN)" : "");
            if (nmse / tol > worst) worst = nmse / tol;
            if (getenv("MMS_TEST_VERBOSE")) printf("    %-60s NMSE %.3g\n", oc.desc, nmse);
            n_tol++;
        }
        mms_backend_buffer_free(buf);
        mms_free(c);
    }
    printf("    %d cases to the bit, %d within tolerance (worst at %.3g of its tolerance), seed %llu\n", n_exact, n_tol, worst, seed);
    EXPECT(n_exact >= 40 && n_tol >= 40, "too few cases ran");
    mms_backend_free(cpu);
}

// Random bytes for whole blocks (scales kept finite), dequantized by cu_load and by the library.
static void test_dequantization_is_bit_exact(void) {
    const enum mms_type types[4] = { MMS_TYPE_Q8_0, MMS_TYPE_Q4_0, MMS_TYPE_Q4_K, MMS_TYPE_Q6_K };
    for (int k = 0; k < 4; k++) {
        const int64_t n = 256 * 64;
        const size_t bytes = mms_row_size(types[k], n), bs = mms_type_size(types[k]);
        std::vector<uint8_t> raw(bytes);
        std::vector<float> want((size_t)n);
        for (size_t i = 0; i < bytes; i++) raw[i] = (uint8_t)test_rand_int(0, 255);
        for (size_t b = 0; b < bytes / bs; b++) {       // finite f16 scales: exponent bits below 31
            uint8_t *blk = raw.data() + b * bs;
            blk[(types[k] == MMS_TYPE_Q6_K ? 208 : 0) + 1] &= 0x7b;
            if (types[k] == MMS_TYPE_Q4_K) blk[3] &= 0x7b;
        }
        mms_get_type_traits(types[k])->to_float(raw.data(), want.data(), n);
        cu_tensor t;
        memset(&t, 0, sizeof t);
        t.data = (char *)raw.data();
        t.type = types[k];
        t.ne[0] = n; t.ne[1] = t.ne[2] = t.ne[3] = 1;
        t.nb[0] = (int64_t)bs; t.nb[1] = t.nb[2] = t.nb[3] = (int64_t)bytes;
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++) {
            const float got = cu_load(t, i, 0, 0, 0);
            bad += memcmp(&got, &want[(size_t)i], sizeof got) != 0;
        }
        EXPECT(bad == 0, "%s: %lld of %lld values differ", mms_type_name(types[k]), (long long)bad, (long long)n);
    }
}

// A row index out of range is reported (value, position, limit), not read.
static void test_get_rows_reports_bad_indices(void) {
    struct mms_context *c = test_ctx(false);
    struct mms_tensor *a = mms_new_tensor_2d(c, MMS_TYPE_F32, 4, 3), *idx = mms_new_tensor_1d(c, MMS_TYPE_I32, 2);
    struct mms_tensor *out = mms_get_rows(c, a, idx);
    cu_fault fault;
    ((int32_t *)idx->data)[0] = 1;
    ((int32_t *)idx->data)[1] = 7;
    memset(&fault, 0, sizeof fault);
    const host_exec ex = { NULL, &fault };
    cu_compute_node(ex, out, 5);
    EXPECT(fault.set && fault.node == 5 && fault.value == 7 && fault.position == 1 && fault.limit == 3,
           "fault %d node %d value %lld position %lld limit %lld", fault.set, fault.node, (long long)fault.value,
           (long long)fault.position, (long long)fault.limit);
    mms_free(c);
}

int main() {
    test_seed();
    RUN(test_dequantization_is_bit_exact);
    RUN(test_get_rows_reports_bad_indices);
    RUN(test_every_op_case_matches_the_cpu);
    return test_summary();
}
