// The CUDA backend's element logic, run on the host: every op case of test_backend_ops whose nodes
// are element ops (binary, unary, copies, layout, get_rows, im2col, rope) is computed by the CPU
// backend, then again node by node through the very functors mmsched_cuda.cu launches on the GPU
// (cu_element_op with a host loop for a runner), and the bytes compared. The block types'
// dequantization is compared with the library's, bit for bit. Needs no GPU: it checks what the
// kernels compute per element, not the launches, the row kernels, flash attention or cuBLAS
// (test_backend_ops does those on a GPU machine).
#include "../mmsched_cuda.cu"
#include "test.h"
#include "op_cases.h"

struct host_run {
    template <typename F> enum mms_status operator()(const F &f, int64_t n, const char *) const {
        for (int64_t i = 0; i < n; i++) f(i);
        return MMS_OK;
    }
};

struct no_run {
    template <typename F> enum mms_status operator()(const F &, int64_t, const char *) const { return MMS_OK; }
};

static bool all_element_ops(struct mms_cgraph *g) {
    for (int j = 0; j < mms_graph_n_nodes(g); j++) {
        const struct mms_tensor *t = mms_graph_node(g, j);
        cu_fault fault;
        enum mms_status st;
        memset(&fault, 0, sizeof fault);
        if (!mms_op_is_view(t->op) && !cu_element_op(t, &fault, 0, no_run(), &st)) return false;
    }
    return true;
}

static bool is_transcendental(enum mms_op op) {
    return op == MMS_OP_EXP || op == MMS_OP_TANH || op == MMS_OP_SILU || op == MMS_OP_GELU || op == MMS_OP_GELU_TANH;
}

static void test_element_ops_match_the_cpu(void) {
    const unsigned long long seed = test_rand_u64();
    mms_backend_t cpu = mms_backend_cpu_init();
    struct op_case oc;
    int n_run = 0, n_other = 0;
    for (int i = 0; ; i++) {
        struct mms_context *c = test_ctx(true);
        if (!build_case(i, c, &oc)) { mms_free(c); break; }
        if (!oc.out) { EXPECT(0, "case %d (%s) did not build: %s", i, oc.desc, mms_get_error(c)); mms_free(c); continue; }
        struct mms_cgraph *g = mms_new_graph(c);
        mms_build_forward_expand(g, oc.out);
        if (!all_element_ops(g)) { n_other++; mms_free(c); continue; }
        mms_backend_buffer_t buf = mms_backend_alloc_ctx_tensors(c, cpu);
        EXPECT(buf != NULL, "alloc: %s", mms_last_error());
        for (int j = 0; j < mms_graph_n_leafs(g); j++) fill_leaf(mms_graph_leaf(g, j), seed + (unsigned long long)(i * 100 + j));
        EXPECT(mms_backend_graph_compute(cpu, g) == MMS_OK, "%s on the CPU: %s", oc.desc, mms_last_error());
        const size_t bytes = mms_nbytes(oc.out);
        char *ref = (char *)malloc(bytes);
        memcpy(ref, oc.out->data, bytes);
        for (int j = 0; j < mms_graph_n_nodes(g); j++) {
            struct mms_tensor *t = mms_graph_node(g, j);
            cu_fault fault;
            enum mms_status st = MMS_OK;
            if (mms_op_is_view(t->op)) continue;
            if (!t->view_src) memset(t->data, 0xFF, mms_nbytes(t));
            memset(&fault, 0, sizeof fault);
            cu_element_op(t, &fault, j, host_run(), &st);
            EXPECT(st == MMS_OK && !fault.set, "%s: node %d failed", oc.desc, j);
        }
        if (is_transcendental(oc.out->op) && oc.out->type == MMS_TYPE_F32) {
            // libm on the host here, the CPU backend's own exp/tanh/erf: a few ulps apart
            const float *x = (const float *)ref, *y = (const float *)oc.out->data;
            double err = 0, norm = 0;
            for (int64_t e = 0; e < mms_nelements(oc.out); e++) { err += ((double)x[e] - y[e]) * ((double)x[e] - y[e]); norm += (double)x[e] * x[e]; }
            EXPECT(err <= 1e-12 * norm, "%s: NMSE %.3g", oc.desc, err / norm);
        } else if (is_transcendental(oc.out->op)) {
            int64_t off = 0;     // 16-bit results: at most one unit in the last place apart
            for (int64_t e = 0; e < mms_nelements(oc.out); e++) {
                const int dv = (int)((const uint16_t *)ref)[e] - (int)((const uint16_t *)oc.out->data)[e];
                off += dv > 1 || dv < -1;
            }
            EXPECT(off == 0, "%s: %lld values more than one ulp apart", oc.desc, (long long)off);
        } else {
            EXPECT(memcmp(ref, oc.out->data, bytes) == 0, "%s: the kernel's elements differ from the CPU's", oc.desc);
        }
        n_run++;
        free(ref);
        mms_backend_buffer_free(buf);
        mms_free(c);
    }
    printf("    %d element-op cases compared on the host (seed %llu); %d cases use row kernels, attention or cuBLAS\n", n_run, seed, n_other);
    EXPECT(n_run >= 40, "only %d cases ran", n_run);
    mms_backend_free(cpu);
}

// Random bytes for whole blocks (scales kept finite), dequantized by cu_load and by the library.
static void test_dequantization_is_bit_exact(void) {
    const enum mms_type types[4] = { MMS_TYPE_Q8_0, MMS_TYPE_Q4_0, MMS_TYPE_Q4_K, MMS_TYPE_Q6_K };
    for (int k = 0; k < 4; k++) {
        const int64_t n = 256 * 64;
        const size_t bytes = mms_row_size(types[k], n);
        uint8_t *raw = (uint8_t *)malloc(bytes);
        float *want = (float *)malloc(sizeof(float) * (size_t)n);
        for (size_t i = 0; i < bytes; i++) raw[i] = (uint8_t)test_rand_int(0, 255);
        const size_t bs = mms_type_size(types[k]);
        for (size_t b = 0; b < bytes / bs; b++) {       // finite f16 scales: exponent bits below 31
            uint8_t *blk = raw + b * bs;
            const size_t at[2] = { types[k] == MMS_TYPE_Q6_K ? 208u : 0u, 2u };
            for (int s = 0; s < (types[k] == MMS_TYPE_Q4_K ? 2 : 1); s++) blk[at[s] + 1] &= 0x7b;
        }
        mms_get_type_traits(types[k])->to_float(raw, want, n);
        cu_tensor t;
        memset(&t, 0, sizeof t);
        t.data = (char *)raw;
        t.type = types[k];
        t.ne[0] = n; t.ne[1] = t.ne[2] = t.ne[3] = 1;
        t.nb[0] = (int64_t)bs; t.nb[1] = t.nb[2] = t.nb[3] = (int64_t)bytes;
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++) {
            const float got = cu_load(t, i, 0, 0, 0);
            bad += memcmp(&got, &want[i], sizeof got) != 0;
        }
        EXPECT(bad == 0, "%s: %lld of %lld values differ", mms_type_name(types[k]), (long long)bad, (long long)n);
        free(raw);
        free(want);
    }
}

// A row index out of range is reported (value, position, limit), not read.
static void test_get_rows_reports_bad_indices(void) {
    struct mms_context *c = test_ctx(false);
    struct mms_tensor *a = mms_new_tensor_2d(c, MMS_TYPE_F32, 4, 3), *idx = mms_new_tensor_1d(c, MMS_TYPE_I32, 2);
    struct mms_tensor *out = mms_get_rows(c, a, idx);
    cu_fault fault;
    enum mms_status st;
    ((int32_t *)idx->data)[0] = 1;
    ((int32_t *)idx->data)[1] = 7;
    memset(&fault, 0, sizeof fault);
    cu_element_op(out, &fault, 5, host_run(), &st);
    EXPECT(fault.set && fault.node == 5 && fault.value == 7 && fault.position == 1 && fault.limit == 3,
           "fault %d node %d value %lld position %lld limit %lld", fault.set, fault.node, (long long)fault.value,
           (long long)fault.position, (long long)fault.limit);
    mms_free(c);
}

int main() {
    test_seed();
    RUN(test_dequantization_is_bit_exact);
    RUN(test_get_rows_reports_bad_indices);
    RUN(test_element_ops_match_the_cpu);
    return test_summary();
}
