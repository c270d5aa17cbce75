/* Every op on a backend under test against the CPU backend: the same graph built twice, the same
   fresh random inputs (seed printed), the output poisoned before compute (0xFF bytes: NaN in the
   float types) so an element left unwritten fails, and a normalised squared error per case
   within a tolerance that suits the op and its types.
   The normal build tests the limited test backend (tests/limited_backend.h: CPU arithmetic behind
   a buffer type of its own), which proves the harness; `make cuda` builds it with MMS_CUDA and
   tests CUDA device 0 (SKIP without one). Cases the backend does not support are listed, not failed. */
#ifdef MMS_CUDA
#define BACKEND_NAME "CUDA"
#else
#define BACKEND_NAME "the limited test backend"
#endif
#define MMSCHED_IMPLEMENTATION
#include "../mmsched.h"
#include "test.h"
#include "limited_backend.h"
#include "op_cases.h"

static mms_backend_t cpu, dut;   /* dut: the backend under test */
static int n_unsupported;

/* -- running a case on one backend --------------------------------------------------------------- */

/* The output as floats (I32 converted), NULL + message on failure. */
/* (oc->out is gone when this returns: its context is freed; *n_out is its element count) */
static float *run_case(int i, mms_backend_t b, unsigned long long seed, struct op_case *oc, bool *unsupported, int64_t *n_out) {
    struct mms_context *c = test_ctx(true);
    struct mms_cgraph *g = mms_new_graph(c);
    mms_backend_buffer_t buf = NULL;
    float *res = NULL;
    int64_t j;
    *unsupported = false;
    build_case(i, c, oc);
    if (!oc->out) { EXPECT(0, "case %d (%s) did not build: %s", i, oc->desc, mms_ctx_error(c)); goto done; }
    mms_build_forward_expand(g, oc->out);
    for (j = 0; j < mms_graph_n_nodes(g); j++) {
        struct mms_tensor *t = mms_graph_node(g, j);
        if (!mms_backend_supports_op(b, t)) { *unsupported = true; goto done; }
    }
    buf = mms_backend_alloc_ctx_tensors(c, b);
    if (!buf) { EXPECT(0, "%s: allocation: %s", oc->desc, mms_last_error()); goto done; }
    for (j = 0; j < mms_graph_n_leafs(g); j++) fill_leaf(mms_graph_leaf(g, j), seed + (unsigned long long)j);
    for (j = 0; j < mms_graph_n_nodes(g); j++) {
        struct mms_tensor *t = mms_graph_node(g, j);
        if (!t->view_src) mms_backend_tensor_memset(t, 0xFF, 0, mms_nbytes(t));
    }
    if (mms_backend_graph_compute(b, g) != MMS_OK) { EXPECT(0, "%s on %s: %s", oc->desc, mms_backend_name(b), mms_last_error()); goto done; }
    *n_out = mms_nelements(oc->out);
    res = (float *)malloc(sizeof *res * (size_t)*n_out);
    if (res && !test_get_floats(oc->out, res)) { free(res); res = NULL; }
done:
    mms_backend_buffer_free(buf);
    mms_free(c);
    return res;
}

/* MMS_TEST_OPS="text|text..." runs only the cases whose description contains one of the texts (a
   short subset, as tools/gpu_check.sh runs under compute-sanitizer); the others are counted as
   left out, never as passed. */
static bool case_selected(const char *desc) {
    const char *want = getenv("MMS_TEST_OPS"), *p;
    char one[96];
    if (!want || !*want) return true;
    for (p = want; *p; ) {
        size_t n = strcspn(p, "|");
        if (n > 0 && n < sizeof one) {
            memcpy(one, p, n);
            one[n] = '\0';
            if (strstr(desc, one)) return true;
        }
        p += n + (p[n] == '|');
    }
    return false;
}

static void test_every_op_against_the_cpu(void) {
    const unsigned long long seed = test_rand_u64();
    int i, n_cases = 0, n_left_out = 0, worst = -1;
    double worst_ratio = 0.0;
    struct op_case oc;
    for (i = 0; ; i++) {
        struct mms_context *c = test_ctx(true);
        bool more = build_case(i, c, &oc);
        mms_free(c);
        if (!more) break;
        if (!case_selected(oc.desc)) { n_cases++; n_left_out++; continue; }
        {
            bool uns_dut, uns_cpu;
            int64_t n_got = 0, n_ref = 0;
            float *got = run_case(i, dut, seed + (unsigned long long)i * 1000, &oc, &uns_dut, &n_got);
            float *ref = run_case(i, cpu, seed + (unsigned long long)i * 1000, &oc, &uns_cpu, &n_ref);
            n_cases++;
            if (uns_dut) {
                printf("    unsupported on %s (falls back to the CPU): %s\n", mms_backend_name(dut), oc.desc);
                n_unsupported++;
            } else if (got && ref && n_got == n_ref) {
                const double e = test_nmse(got, ref, n_ref);
                const bool ok = oc.tol == 0.0 ? e == 0.0 : e <= oc.tol;
                EXPECT(ok, "%s: NMSE %.3g > %.3g", oc.desc, e, oc.tol);
                if (oc.tol > 0.0 && e / oc.tol > worst_ratio) { worst_ratio = e / oc.tol; worst = i; }
                if (getenv("MMS_TEST_VERBOSE")) printf("    %-60s NMSE %.3g (tolerance %.3g)\n", oc.desc, e, oc.tol);
            }
            free(got);
            free(ref);
        }
    }
    printf("    %d cases on %s, %d unsupported, seed %llu\n", n_cases - n_left_out, mms_backend_name(dut), n_unsupported, seed);
    if (n_left_out) printf("    %d of %d cases left out (MMS_TEST_OPS=%s): not checked\n", n_left_out, n_cases, getenv("MMS_TEST_OPS"));
    EXPECT(n_left_out < n_cases, "MMS_TEST_OPS=%s selects no case", getenv("MMS_TEST_OPS"));
    if (worst >= 0) printf("    closest to its tolerance: case %d at %.3g of it\n", worst, worst_ratio);
    EXPECT(n_cases > 80, "only %d cases", n_cases);
}

/* The harness can fail: one unwritten (NaN) element, or one wrong one, is caught. */
static void test_harness_catches_bad_results(void) {
    float ref[64], got[64];
    int i;
    for (i = 0; i < 64; i++) ref[i] = got[i] = (float)i - 20.0f;
    EXPECT(test_nmse(got, ref, 64) == 0.0, "equal outputs");
    got[17] = NAN;
    EXPECT(isinf(test_nmse(got, ref, 64)), "an unwritten element passes");
    got[17] = ref[17] + 0.01f;
    EXPECT(test_nmse(got, ref, 64) > TOL_F32, "a wrong element passes");
}

int main(void) {
    test_seed();
    cpu = mms_backend_cpu_init();
#ifdef MMS_CUDA
    dut = mms_backend_cuda_init(0);
    if (!dut) {
        mms_backend_free(cpu);
        return test_skip_all("test_backend_ops on CUDA", mms_last_error());
    }
#else
    dut = limited_backend_new("TEST", LIMITED_ALL_OPS);
#endif
    if (!cpu || !dut) { printf("cannot start the backends: %s\n", mms_last_error()); return 1; }
    printf("backend under test: %s (%s)\n", mms_backend_name(dut), BACKEND_NAME);
    RUN(test_harness_catches_bad_results);
    RUN(test_every_op_against_the_cpu);
    mms_backend_free(dut);
    mms_backend_free(cpu);
    return test_summary();
}
