// The CUDA backend's kernels, run on the host. mmsched_cuda.cu computes every node through
// cu_compute_node with an executor; this file gives it a host executor: element functors in a
// loop, block functors with a fiber per CUDA thread (cooperative barriers for __syncthreads and
// for warp shuffles, shared memory poisoned with NaN), and the cuBLAS call by its documented meaning
// (column-major C = A^T B, strided batches). Every op case of test_backend_ops then runs node by
// node through the very code the GPU runs and is compared with the CPU backend: element ops to the
// bit, the rest within the case's tolerance. Block-type dequantization is compared bit for bit.
// What this cannot check: the CUDA runtime itself (launch limits, streams, copies, events, memory)
// and cuBLAS's arithmetic; test_backend_ops, test_sched and test_cuda do those on a GPU machine.
#include "../mmsched_cuda.cu"
#include "test.h"
#include "op_cases.h"
#include "limited_backend.h"
#include "mllama_load.h"
#include "ref_gguf.h"
#include "cuda_host.h"
#include "demo_on_device.h"
#include <string>
#include <algorithm>

// -- the tests --

static bool is_transcendental(enum mms_op op) {
    return op == MMS_OP_EXP || op == MMS_OP_TANH || op == MMS_OP_SILU || op == MMS_OP_GELU || op == MMS_OP_GELU_TANH;
}

// Output as floats (I32 converted).
static std::vector<float> as_floats(const struct mms_tensor *t) {
    std::vector<float> v((size_t)mms_nelements(t));
    EXPECT(test_get_floats(t, v.data()), "read %s: %s", t->name, mms_last_error());
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
        if (!oc.out) { EXPECT(0, "case %d (%s) did not build: %s", i, oc.desc, mms_ctx_error(c)); mms_free(c); continue; }
        struct mms_cgraph *g = mms_new_graph(c);
        mms_build_forward_expand(g, oc.out);
        mms_backend_buffer_t buf = mms_backend_alloc_ctx_tensors(c, cpu);
        EXPECT(buf != NULL, "alloc: %s", mms_last_error());
        for (int j = 0; j < mms_graph_n_leafs(g); j++) fill_leaf(mms_graph_leaf(g, j), seed + (unsigned long long)(i * 100 + j));
        EXPECT(mms_backend_graph_compute(cpu, g) == MMS_OK, "%s on the CPU: %s", oc.desc, mms_last_error());
        const size_t bytes = mms_nbytes(oc.out);
        std::vector<char> ref(oc.out->data ? (const char *)oc.out->data : NULL, oc.out->data ? (const char *)oc.out->data + bytes : NULL);
        const std::vector<float> ref_f = as_floats(oc.out);
        // the inputs again: a result that writes into one of them (cpy, set_rows) must be the kernels' own
        for (int j = 0; j < mms_graph_n_leafs(g); j++) fill_leaf(mms_graph_leaf(g, j), seed + (unsigned long long)(i * 100 + j));
        bool transcendental = false;
        int n_not_elementwise = 0;      // element ops must match the CPU to the bit, the rest within tolerance
        for (int j = 0; j < mms_graph_n_nodes(g); j++) {
            struct mms_tensor *t = mms_graph_node(g, j);
            cu_fault fault;
            if (mms_op_is_view(t->op)) continue;
            transcendental = transcendental || is_transcendental(t->op);
            if (!t->view_src) memset(t->data, 0xFF, mms_nbytes(t));
            memset(&fault, 0, sizeof fault);
            std::vector<char> scratch(cu_scratch_need(t) + 1);
            const host_exec ex = { scratch.data(), &fault, &n_not_elementwise, true, NULL };
            EXPECT(cu_compute_node(ex, t) == MMS_OK && !fault.set, "%s: node %d: %s", oc.desc, j, mms_last_error());
        }
        const bool exact = n_not_elementwise == 0 && !transcendental;
        if (exact) {
            EXPECT(memcmp(ref.data(), oc.out->data, bytes) == 0, "%s: the kernels' results differ from the CPU's", oc.desc);
            n_exact++;
        } else {
            const std::vector<float> got = as_floats(oc.out);
            const double nmse = test_nmse(got.data(), ref_f.data(), (int64_t)got.size()), tol = oc.tol > 0 ? oc.tol : 1e-12;
            EXPECT(nmse <= tol, "%s: NMSE %.3g > %.3g%s", oc.desc, nmse, tol, isinf(nmse) ? " (unwritten NaN)" : "");
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

// Every op case computed as the backend computes a graph (cu_compute_graph), fused and not: the
// same bits, and the fusing ran in the cases built for it.
static void test_fusions_change_no_bits(void) {
    const unsigned long long seed = test_rand_u64();
    mms_backend_t cpu = mms_backend_cpu_init();
    struct op_case oc;
    int n_fused = 0, n_cases = 0;
    for (int i = 0; ; i++) {
        struct mms_context *c = test_ctx(true);
        if (!build_case(i, c, &oc)) { mms_free(c); break; }
        if (!oc.out) { mms_free(c); continue; }
        struct mms_cgraph *g = mms_new_graph(c);
        mms_build_forward_expand(g, oc.out);
        mms_backend_buffer_t buf = mms_backend_alloc_ctx_tensors(c, cpu);
        size_t need = 0, need_q8 = 0;
        for (int j = 0; j < mms_graph_n_nodes(g); j++) {
            need = std::max(need, cu_scratch_need(mms_graph_node(g, j)));
            need_q8 = std::max(need_q8, cu_q8_need(mms_graph_node(g, j)));
        }
        std::vector<char> out[2], scratch(need + 1), q8_area(need_q8 + 1);
        for (int fuse = 0; fuse < 2; fuse++) {
            for (int j = 0; j < mms_graph_n_leafs(g); j++) fill_leaf(mms_graph_leaf(g, j), seed + (unsigned long long)(i * 100 + j));
            for (int j = 0; j < mms_graph_n_nodes(g); j++) {
                struct mms_tensor *t = mms_graph_node(g, j);
                if (!mms_op_is_view(t->op) && !t->view_src) memset(t->data, 0xFF, mms_nbytes(t));
            }
            cu_fault fault;
            cu_q8_cache q8 = { NULL, q8_area.data() };
            memset(&fault, 0, sizeof fault);
            const host_exec ex = { scratch.data(), &fault, NULL, true, &q8 };
            EXPECT(cu_compute_graph(ex, g, fuse != 0, "kernels") == MMS_OK && !fault.set, "%s: %s", oc.desc, mms_last_error());
            out[fuse].assign((const char *)oc.out->data, (const char *)oc.out->data + mms_nbytes(oc.out));
        }
        EXPECT(out[0] == out[1], "%s: fused, the kernels give other bits", oc.desc);
        for (int j = 0; j < mms_graph_n_nodes(g); j++) {
            cu_epilogue epi;
            int hoist[CU_HOIST], n_hoist;
            const struct mms_tensor *t = mms_graph_node(g, j);
            if (t->op != MMS_OP_NONE && !mms_op_is_view(t->op) && cu_plan_epilogue(g, j, &epi, NULL, hoist, &n_hoist) > j) { n_fused++; break; }
        }
        n_cases++;
        mms_backend_buffer_free(buf);
        mms_free(c);
    }
    printf("    %d cases, %d of them with fused nodes, seed %llu\n", n_cases, n_fused, seed);
    EXPECT(n_fused >= 7, "only %d cases fused", n_fused);
    mms_backend_free(cpu);
}

// Fused nodes in memory shared as a scheduler's allocator shares it (a dead tensor's bytes reused):
// a fused output over the producer's source is refused (other threads still read that source); a
// residual add written in place of its other operand is fused. Both give the bits of the nodes
// computed one by one.
static void test_fusion_in_shared_memory(void) {
    struct shared_case { const char *what; bool fused; };
    const shared_case cases[2] = { { "silu written over the norm's (transposed) source", false },
                                   { "add written in place of its other operand", true } };
    for (int k = 0; k < 2; k++) {
        struct mms_context *c = test_ctx(true);
        std::vector<float> arena(3 * 64);
        float *A = arena.data(), *B = A + 64, *C = A + 128;
        struct mms_tensor *x, *xt, *n, *o, *w = NULL;
        if (k == 0) {
            x = mms_new_tensor_2d(c, MMS_TYPE_F32, 5, 2);
            xt = mms_transpose(c, x);                      // rows of 2 strided through x
            n = mms_rms_norm(c, xt, 1e-5f);
            o = mms_silu(c, n);
        } else {
            x = xt = mms_new_tensor_2d(c, MMS_TYPE_F32, 8, 3);
            n = mms_rms_norm(c, x, 1e-5f);
            w = mms_new_tensor_2d(c, MMS_TYPE_F32, 8, 3);
            o = mms_add(c, n, w);
        }
        x->data = A;
        xt->data = A;
        n->data = B;
        if (w) w->data = C;
        o->data = k == 0 ? A : C;                          // over x, or over w
        struct mms_cgraph *g = mms_new_graph(c);
        mms_build_forward_expand(g, o);
        int in = -1;
        for (int j = 0; j < mms_graph_n_nodes(g); j++) if (mms_graph_node(g, j) == n) in = j;
        cu_epilogue epi;
        int hoist[CU_HOIST], n_hoist;
        const bool fused = in >= 0 && cu_plan_epilogue(g, in, &epi, NULL, hoist, &n_hoist) > in;
        EXPECT(fused == cases[k].fused, "%s: %s", cases[k].what, fused ? "fused" : "not fused");
        std::vector<char> out[2];
        for (int fuse = 0; fuse < 2; fuse++) {
            for (int j = 0; j < 40; j++) A[j] = (float)(j % 7) - 2.5f + 0.1f * (float)j;
            for (int j = 0; j < 24; j++) C[j] = 0.5f + 0.05f * (float)j;
            cu_fault fault;
            memset(&fault, 0, sizeof fault);
            const host_exec ex = { NULL, &fault, NULL, true, NULL };
            EXPECT(cu_compute_graph(ex, g, fuse != 0, "kernels") == MMS_OK && !fault.set, "%s: %s", cases[k].what, mms_last_error());
            out[fuse].assign((const char *)o->data, (const char *)o->data + mms_nbytes(o));
        }
        EXPECT(out[0] == out[1], "%s: fused, other bits than node by node", cases[k].what);
        mms_free(c);
    }
}

// Random bytes for whole blocks (scales kept finite), dequantized by cu_load and by the library.
static void test_dequantization_is_bit_exact(void) {
    const enum mms_type types[5] = { MMS_TYPE_Q8_0, MMS_TYPE_Q4_0, MMS_TYPE_Q4_K, MMS_TYPE_Q5_K, MMS_TYPE_Q6_K };
    for (int k = 0; k < 5; k++) {
        const int64_t n = 256 * 64;
        const size_t bytes = mms_row_size(types[k], n), bs = mms_type_size(types[k]);
        std::vector<uint8_t> raw(bytes);
        std::vector<float> want((size_t)n);
        for (size_t i = 0; i < bytes; i++) raw[i] = (uint8_t)test_rand_int(0, 255);
        for (size_t b = 0; b < bytes / bs; b++) {       // finite f16 scales: exponent bits below 31
            uint8_t *blk = raw.data() + b * bs;
            blk[(types[k] == MMS_TYPE_Q6_K ? 208 : 0) + 1] &= 0x7b;
            if (types[k] == MMS_TYPE_Q4_K || types[k] == MMS_TYPE_Q5_K) blk[3] &= 0x7b;   // dmin
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

// The demo model with every text layer, the head and the vision tower on the emulated GPU.
static void test_demo_model_on_the_kernels(void) {
    const int n_cases = getenv("MMS_EMU_CASES") ? atoi(getenv("MMS_EMU_CASES")) : 2, max_new = 12;
    mms_backend_t cpu = mms_backend_cpu_init(), emu = emulated_gpu_new();
    const int64_t t0 = mms_time_us();
    EXPECT(cpu && emu, "setup: %s", mms_last_error());
    if (!cpu || !emu) return;
    const int n_same = demo_compare(cpu, emu, n_cases, max_new, NULL, NULL);
    EXPECT(limited_of(emu)->n_computes > 0, "nothing ran on the emulated GPU");
    printf("    demo model, text layers + head + vision tower on the kernels: %d/%d cases, %d tokens each, equal to the CPU (%.1f s)\n",
           n_same, n_cases, max_new, (double)(mms_time_us() - t0) / 1e6);
    mms_backend_free(emu);
    mms_backend_free(cpu);
}

// The decode GEMV of every block type against an exact reference: activations that 8 bits hold
// exactly (integers, 127 the largest of every 32), random blocks, so the kernels' integer dots and
// scales must give the dequantized weights' dot products to f32 rounding (NMSE 1e-12), with rows
// spanning several staged chunks, an odd row count, grouped-head batches and 1 or 5 columns.
static void test_gemv_of_every_block_type_is_exact(void) {
    const enum mms_type types[5] = { MMS_TYPE_Q8_0, MMS_TYPE_Q4_0, MMS_TYPE_Q4_K, MMS_TYPE_Q5_K, MMS_TYPE_Q6_K };
    for (int k = 0; k < 5; k++)
        for (int nc = 1; nc <= 5; nc += 4) {
            const int64_t K = k >= 2 ? 2304 : 2176, M = 19;
            struct mms_context *c = test_ctx(false);
            struct mms_tensor *a = mms_new_tensor_3d(c, types[k], K, M, 2), *b = mms_new_tensor_3d(c, MMS_TYPE_F32, K, nc, 6);
            struct mms_tensor *out = mms_mul_mat(c, a, b);
            const size_t bytes = mms_nbytes(a), bs = mms_type_size(types[k]);
            uint8_t *raw = (uint8_t *)a->data;
            for (size_t i = 0; i < bytes; i++) raw[i] = (uint8_t)test_rand_int(0, 255);
            for (size_t blk = 0; blk < bytes / bs; blk++) {       // finite f16 scales
                raw[blk * bs + (types[k] == MMS_TYPE_Q6_K ? 208 : 0) + 1] &= 0x7b;
                if (types[k] == MMS_TYPE_Q4_K || types[k] == MMS_TYPE_Q5_K) raw[blk * bs + 3] &= 0x7b;   // dmin
            }
            float *x = (float *)b->data;
            for (int64_t i = 0; i < mms_nelements(b); i++) x[i] = i % 32 == 7 ? (test_rand_int(0, 1) ? 127.0f : -127.0f) : (float)test_rand_int(-127, 127);
            std::vector<float> w((size_t)(K * M * 2));
            mms_get_type_traits(types[k])->to_float(a->data, w.data(), K * M * 2);
            std::vector<float> want((size_t)mms_nelements(out));
            for (int64_t h = 0; h < 6; h++)
                for (int64_t n = 0; n < nc; n++)
                    for (int64_t m = 0; m < M; m++) {
                        double s = 0.0;
                        for (int64_t i = 0; i < K; i++) s += (double)w[(size_t)((h / 3 * M + m) * K + i)] * x[(h * nc + n) * K + i];
                        want[(size_t)((h * nc + n) * M + m)] = (float)s;
                    }
            std::vector<char> scratch(cu_scratch_need(out) + 1);
            cu_fault fault;
            memset(&fault, 0, sizeof fault);
            const host_exec ex = { scratch.data(), &fault, NULL, true, NULL };
            EXPECT(cu_compute_node(ex, out) == MMS_OK, "%s: %s", mms_type_name(types[k]), mms_last_error());
            const double nmse = test_nmse((const float *)out->data, want.data(), mms_nelements(out));
            EXPECT(nmse < 1e-12, "%s by %d: NMSE %.3g against the exact dot products", mms_type_name(types[k]), nc, nmse);
            mms_free(c);
        }
}

// Records the kernels a node launches (by the names the executors are given), running nothing.
struct name_exec {
    char     *scratch;
    cu_fault *fault;
    bool      tensor_cores;
    cu_q8_cache *q8;
    std::vector<std::string> *ran;
    template <typename F> enum mms_status each(const F &, int64_t, const char *what) const { ran->push_back(what); return MMS_OK; }
    template <typename B> enum mms_status blocks(const B &, cu_grid, int, size_t, const char *what) const { ran->push_back(what); return MMS_OK; }
    enum mms_status gemm(const cu_gemm &) const { ran->push_back("cuBLAS"); return MMS_OK; }
};

// Attention takes the kernel its shape calls for: split-K decode (and its combine) for up to 8
// query rows per KV head, tensor cores for prefill at D 64/80/128 (scalar without them), scalar
// for other head sizes.
static void test_attention_kernel_choice(void) {
    struct mms_context *c = test_ctx(true);
    struct {
        struct mms_tensor *t;
        bool tensor_cores;
        const char *want;
    } cases[] = {
        { mms_flash_attn_ext(c, mms_new_tensor_3d(c, MMS_TYPE_F32, 128, 1, 32), mms_new_tensor_3d(c, MMS_TYPE_F16, 128, 2048, 8),
                             mms_new_tensor_3d(c, MMS_TYPE_F16, 128, 2048, 8), NULL, 0.1f, 0.0f, 0.0f), true, "flash attention (decode),flash attention (combine)" },
        { mms_flash_attn_ext(c, mms_new_tensor_3d(c, MMS_TYPE_F32, 128, 1, 32), mms_new_tensor_3d(c, MMS_TYPE_F16, 128, 64, 8),
                             mms_new_tensor_3d(c, MMS_TYPE_F16, 128, 64, 8), NULL, 0.1f, 0.0f, 0.0f), true, "flash attention (decode)" },
        { mms_flash_attn_ext(c, mms_new_tensor_3d(c, MMS_TYPE_F32, 80, 6432, 16), mms_new_tensor_3d(c, MMS_TYPE_F32, 80, 6432, 16),
                             mms_new_tensor_3d(c, MMS_TYPE_F32, 80, 6432, 16), NULL, 0.1f, 0.0f, 0.0f), true, "flash attention (tensor cores)" },
        { mms_flash_attn_ext(c, mms_new_tensor_3d(c, MMS_TYPE_F32, 80, 6432, 16), mms_new_tensor_3d(c, MMS_TYPE_F32, 80, 6432, 16),
                             mms_new_tensor_3d(c, MMS_TYPE_F32, 80, 6432, 16), NULL, 0.1f, 0.0f, 0.0f), false, "flash attention" },
        { mms_flash_attn_ext(c, mms_new_tensor_3d(c, MMS_TYPE_F32, 96, 300, 4), mms_new_tensor_3d(c, MMS_TYPE_F16, 96, 300, 4),
                             mms_new_tensor_3d(c, MMS_TYPE_F16, 96, 300, 4), NULL, 0.1f, 0.0f, 0.0f), true, "flash attention" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        std::vector<std::string> ran;
        const name_exec ex = { NULL, NULL, cases[i].tensor_cores, NULL, &ran };
        EXPECT(cases[i].t && cu_compute_node(ex, cases[i].t) == MMS_OK, "case %zu: %s", i, mms_last_error());
        std::string got;
        for (size_t k = 0; k < ran.size(); k++) got += (k ? "," : "") + ran[k];
        EXPECT(got == cases[i].want, "case %zu ran '%s', not '%s'", i, got.c_str(), cases[i].want);
    }
    mms_free(c);
}

// A row index out of range is reported (value, position, limit, and the node's name, quoted), not read.
static void test_get_rows_reports_bad_indices(void) {
    struct mms_context *c = test_ctx(false);
    struct mms_tensor *a = mms_new_tensor_2d(c, MMS_TYPE_F32, 4, 3), *idx = mms_new_tensor_1d(c, MMS_TYPE_I32, 2);
    struct mms_tensor *out = mms_set_name(mms_get_rows(c, a, idx), "embeddings");
    cu_fault fault;
    ((int32_t *)idx->data)[0] = 1;
    ((int32_t *)idx->data)[1] = 7;
    memset(&fault, 0, sizeof fault);
    const host_exec ex = { NULL, &fault, NULL, true, NULL };
    cu_compute_node(ex, out);
    EXPECT(fault.set && !strcmp(fault.name, "embeddings") && fault.value == 7 && fault.position == 1 && fault.limit == 3,
           "fault %d node '%s' value %lld position %lld limit %lld", fault.set, fault.name, (long long)fault.value,
           (long long)fault.position, (long long)fault.limit);
    test_capture_log();
    EXPECT_ERROR(cu_fault_status(&fault, "CUDA0"), MMS_ERR_INVALID_ARG, "CUDA0: GET_ROWS 'embeddings': index 7 at position 1", "0..2");
    mms_log_set(NULL, NULL);
    mms_free(c);
}

// Checks every launch a node asks for against CUDA's limits (split as the GPU's executor splits a
// grid), without running anything.
struct check_exec {
    char     *scratch;
    cu_fault *fault;
    bool      tensor_cores;
    cu_q8_cache *q8;
    template <typename F> enum mms_status each(const F &, int64_t, const char *) const { return MMS_OK; }
    template <typename B> enum mms_status blocks(const B &, cu_grid g, int threads, size_t smem, const char *what) const {
        cu_launch l[CU_MAX_LAUNCHES];
        const int n = cu_split_grid(g, l);
        int64_t covered = 0;
        if (n < 0) return mms_set_error(MMS_ERR_UNSUPPORTED, "%s: grid too large", what);
        for (int i = 0; i < n; i++) {
            const enum mms_status st = host_check_launch(l[i], threads, smem, what);
            if (st != MMS_OK) return st;
            covered += (int64_t)l[i].x * l[i].y * l[i].z;
        }
        return covered == g.x * g.y * g.z ? MMS_OK : mms_set_error(MMS_ERR_STATE, "%s: the launches cover %lld of %lld blocks", what,
                                                                     (long long)covered, (long long)(g.x * g.y * g.z));
    }
    enum mms_status gemm(const cu_gemm &g) const {
        return g.m > 0 && g.n > 0 && g.k > 0 && g.batch > 0 ? MMS_OK : mms_set_error(MMS_ERR_INVALID_ARG, "gemm %d x %d x %d, %d batches", g.m, g.n, g.k, g.batch);
    }
};

// Shapes past CUDA's grid limits (2^31 blocks in x, 65535 in y and z): every node the backend
// says it supports launches within them (large grids go as several launches).
static void test_large_grids_launch_within_limits(void) {
    struct mms_context *c = test_ctx(true);
    const int64_t many = 70000, rows = ((int64_t)1 << 31) + 5;
    struct mms_tensor *nodes[] = {
        mms_mul_mat(c, mms_new_tensor_2d(c, MMS_TYPE_Q8_0, 32, 1), mms_new_tensor_3d(c, MMS_TYPE_F32, 32, 1, many)),     // GEMV, batch 70000
        mms_mul_mat(c, mms_new_tensor_2d(c, MMS_TYPE_F16, 32, 1), mms_new_tensor_3d(c, MMS_TYPE_F32, 32, 1, many)),
        mms_mul_mat(c, mms_new_tensor_3d(c, MMS_TYPE_F32, 32, 9, many), mms_new_tensor_3d(c, MMS_TYPE_F32, 32, 40, many)),
        mms_rms_norm(c, mms_new_tensor_2d(c, MMS_TYPE_F32, 1, rows), 1e-6f),
        mms_soft_max(c, mms_new_tensor_2d(c, MMS_TYPE_F32, 1, rows)),
        mms_sum_rows(c, mms_new_tensor_2d(c, MMS_TYPE_F32, 1, rows)),
        mms_argmax(c, mms_new_tensor_2d(c, MMS_TYPE_F32, 1, rows)),
        mms_flash_attn_ext(c, mms_new_tensor_3d(c, MMS_TYPE_F32, 64, 1, many), mms_new_tensor_3d(c, MMS_TYPE_F16, 64, 8, many),
                           mms_new_tensor_3d(c, MMS_TYPE_F16, 64, 8, many), NULL, 0.125f, 0.0f, 0.0f),
        mms_flash_attn_ext(c, mms_new_tensor_3d(c, MMS_TYPE_F32, 64, 100, many), mms_new_tensor_3d(c, MMS_TYPE_F16, 64, 8, many),
                           mms_new_tensor_3d(c, MMS_TYPE_F16, 64, 8, many), NULL, 0.125f, 0.0f, 0.0f),
    };
    int n_run = 0;
    for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
        EXPECT(nodes[i] != NULL, "node %zu: %s", i, mms_ctx_error(c));
        if (!nodes[i] || !cu_supports_op(NULL, nodes[i])) continue;
        const check_exec ex = { NULL, NULL, true, NULL };
        EXPECT(cu_compute_node(ex, nodes[i]) == MMS_OK, "node %zu (%s): %s", i, mms_op_name(nodes[i]->op), mms_last_error());
        n_run++;
    }
    EXPECT(n_run >= 6, "only %d of the large nodes are supported", n_run);
    mms_free(c);
}

int main() {
#if defined(__x86_64__)
    if (!__builtin_cpu_supports("fma")) {     // built with -mfma to contract like nvcc
        printf("FAIL test_cuda_kernels: built to contract multiply-adds into FMA as nvcc does, and this CPU has no FMA\n0 passed, 1 failed\n");
        return 1;
    }
#endif
    test_seed();
    RUN(test_dequantization_is_bit_exact);
    RUN(test_get_rows_reports_bad_indices);
    RUN(test_large_grids_launch_within_limits);
    RUN(test_gemv_of_every_block_type_is_exact);
    RUN(test_attention_kernel_choice);
    RUN(test_every_op_case_matches_the_cpu);
    RUN(test_fusions_change_no_bits);
    RUN(test_fusion_in_shared_memory);
    RUN(test_demo_model_on_the_kernels);
    return test_summary();
}
