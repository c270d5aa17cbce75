/* Contexts, tensors, views, type conversions and graphs: everything that runs before a backend. */
#define MMSCHED_IMPLEMENTATION
#include "../mmsched.h"
#include "test.h"
#include <math.h>

/* -- contexts -- */

static void test_context_allocating_and_growing(void) {
    struct mms_context *ctx = test_ctx(false);
    struct mms_tensor *t = NULL;
    int i;
    EXPECT(ctx != NULL, "mms_init failed: %s", mms_last_error());
    /* far more than the first block: the context must grow, not fail */
    for (i = 0; i < 64; i++) {
        t = mms_new_tensor_2d(ctx, MMS_TYPE_F32, 1024, 256);
        EXPECT(t && t->data, "tensor %d has no data", i);
        if (!t) break;
        EXPECT(((uintptr_t)t->data % 64) == 0, "data of tensor %d is not 64-byte aligned", i);
        memset(t->data, i, mms_nbytes(t));   /* ASan would catch an undersized block */
    }
    EXPECT(mms_used_mem(ctx) >= 64u * 1024 * 256 * 4, "used %zu", mms_used_mem(ctx));
    EXPECT(mms_ctx_status(ctx) == MMS_OK, "status %d", mms_ctx_status(ctx));
    mms_reset(ctx);
    EXPECT(mms_used_mem(ctx) == 0 && mms_get_first_tensor(ctx) == NULL, "reset left %zu bytes", mms_used_mem(ctx));
    t = mms_new_tensor_1d(ctx, MMS_TYPE_F16, 10);
    EXPECT(t && t->data, "allocation after reset failed");
    mms_free(ctx);
}

static void test_context_fixed_buffer_runs_out_with_error(void) {
    static char mem[4096];
    struct mms_init_params ip;
    struct mms_context *ctx;
    struct mms_tensor *t;
    ip.mem_size = sizeof mem;
    ip.mem_buffer = mem;
    ip.no_alloc = false;
    ctx = mms_init(ip);
    test_capture_log();
    t = mms_new_tensor_1d(ctx, MMS_TYPE_F32, 100000);
    EXPECT(t == NULL, "a 400 KB tensor fit into 4 KB");
    EXPECT(mms_ctx_status(ctx) == MMS_ERR_OOM, "status %d", mms_ctx_status(ctx));
    EXPECT(strstr(mms_ctx_error(ctx), "context memory exhausted") != NULL, "message: %s", mms_ctx_error(ctx));
    mms_free(ctx);
    ip.mem_size = 0;
    ctx = mms_init(ip);
    EXPECT(ctx == NULL && mms_last_status() == MMS_ERR_INVALID_ARG, "mem_buffer with mem_size 0 accepted");
    mms_log_set(NULL, NULL);
}

static void test_no_alloc_context_has_no_data(void) {
    struct mms_context *ctx = test_ctx(true);
    struct mms_tensor *t = mms_new_tensor_3d(ctx, MMS_TYPE_BF16, 5, 6, 7);
    EXPECT(t && t->data == NULL && t->buffer == NULL, "no_alloc tensor got data");
    EXPECT(mms_get_no_alloc(ctx), "no_alloc not reported");
    mms_free(ctx);
}

/* -- tensors -- */

static void test_tensor_shape_and_strides(void) {
    struct mms_context *ctx = test_ctx(true);
    struct mms_tensor *t = mms_new_tensor_4d(ctx, MMS_TYPE_F16, 7, 5, 3, 2);
    EXPECT(t->ne[0] == 7 && t->ne[1] == 5 && t->ne[2] == 3 && t->ne[3] == 2, "ne");
    EXPECT(t->nb[0] == 2 && t->nb[1] == 14 && t->nb[2] == 70 && t->nb[3] == 210, "nb %zu %zu %zu %zu", t->nb[0], t->nb[1], t->nb[2], t->nb[3]);
    EXPECT(mms_nelements(t) == 210 && mms_nrows(t) == 30 && mms_nbytes(t) == 420, "counts");
    EXPECT(mms_n_dims(t) == 4 && mms_is_contiguous(t), "dims/contiguous");
    t = mms_new_tensor_2d(ctx, MMS_TYPE_F32, 9, 1);
    EXPECT(mms_n_dims(t) == 1, "n_dims of [9,1] is %d", mms_n_dims(t));
    t = mms_new_tensor_1d(ctx, MMS_TYPE_I32, 0);
    EXPECT(t && mms_nbytes(t) == 0 && mms_nelements(t) == 0, "empty tensor");
    mms_free(ctx);
}

static void test_tensor_names_flags_lookup(void) {
    struct mms_context *ctx = test_ctx(true);
    struct mms_tensor *a = mms_new_tensor_1d(ctx, MMS_TYPE_F32, 4), *b = mms_new_tensor_1d(ctx, MMS_TYPE_F32, 4);
    char longname[200];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    mms_set_name(a, "alpha");
    mms_format_name(b, "blk.%d.%s", 3, "attn_q");
    EXPECT(strcmp(mms_get_name(b), "blk.3.attn_q") == 0, "name %s", mms_get_name(b));
    EXPECT(mms_get_tensor(ctx, "alpha") == a && mms_get_tensor(ctx, "blk.3.attn_q") == b, "lookup");
    EXPECT(mms_get_tensor(ctx, "nope") == NULL, "lookup of a missing name");
    mms_set_name(a, longname);
    EXPECT(strlen(mms_get_name(a)) == MMS_MAX_NAME - 1, "long name not truncated: %zu", strlen(mms_get_name(a)));
    mms_set_input(a);
    mms_set_output(b);
    mms_set_persistent(b);
    EXPECT(a->flags == MMS_TENSOR_FLAG_INPUT, "input flag");
    EXPECT(b->flags == (MMS_TENSOR_FLAG_OUTPUT | MMS_TENSOR_FLAG_PERSISTENT), "output/persistent flags");
    EXPECT(mms_get_first_tensor(ctx) == a && mms_get_next_tensor(ctx, a) == b && mms_get_next_tensor(ctx, b) == NULL, "iteration");
    mms_free(ctx);
}

static void test_tensor_creation_errors(void) {
    struct mms_context *ctx = test_ctx(true);
    int64_t ne[5] = { 2, 2, 2, 2, 2 };
    test_capture_log();
    EXPECT(mms_new_tensor(ctx, MMS_TYPE_F32, 5, ne) == NULL, "5 dims accepted");
    EXPECT(mms_ctx_status(ctx) == MMS_ERR_INVALID_ARG && strstr(mms_ctx_error(ctx), "n_dims"), "message: %s", mms_ctx_error(ctx));
    mms_ctx_clear_error(ctx);
    EXPECT(mms_new_tensor_1d(ctx, (enum mms_type)99, 4) == NULL && strstr(mms_ctx_error(ctx), "invalid type"), "bad type");
    mms_ctx_clear_error(ctx);
    EXPECT(mms_new_tensor_2d(ctx, MMS_TYPE_F32, -1, 4) == NULL && strstr(mms_ctx_error(ctx), "invalid size"), "negative size");
    mms_ctx_clear_error(ctx);
    EXPECT(mms_new_tensor_4d(ctx, MMS_TYPE_F32, INT64_C(1) << 40, INT64_C(1) << 30, 1, 1) == NULL, "overflowing size accepted");
    mms_log_set(NULL, NULL);
    mms_free(ctx);
}

/* -- views -- */

static void test_views_share_memory_and_strides(void) {
    struct mms_context *ctx = test_ctx(false);
    struct mms_tensor *a = mms_new_tensor_3d(ctx, MMS_TYPE_F32, 4, 3, 2), *v, *p, *r, *tr;
    float *d = (float *)a->data;
    int i;
    for (i = 0; i < 24; i++) d[i] = (float)i;
    v = mms_view_2d(ctx, a, 2, 3, a->nb[1], 1 * sizeof(float));      /* columns 1..2 of every row of plane 0 */
    EXPECT(v->data == (char *)a->data + 4 && v->view_src == a && v->op == MMS_OP_VIEW, "view_2d");
    EXPECT(!mms_is_contiguous(v), "a strided view claims to be contiguous");
    p = mms_permute(ctx, a, 2, 0, 1, 3);                               /* [3,2,4] */
    EXPECT(p->ne[0] == 3 && p->ne[1] == 2 && p->ne[2] == 4, "permute ne %lld %lld %lld", (long long)p->ne[0], (long long)p->ne[1], (long long)p->ne[2]);
    EXPECT(p->nb[0] == a->nb[1] && p->nb[1] == a->nb[2] && p->nb[2] == a->nb[0], "permute nb");
    EXPECT(mms_is_permuted(p) && p->op == MMS_OP_PERMUTE, "permute flags");
    tr = mms_transpose(ctx, a);
    EXPECT(tr->ne[0] == 3 && tr->ne[1] == 4 && mms_is_transposed(tr), "transpose");
    r = mms_reshape_2d(ctx, a, 6, 4);
    EXPECT(r->data == a->data && r->ne[0] == 6 && mms_is_contiguous(r), "reshape");
    /* a view of a view points at the root with the offsets added */
    v = mms_view_1d(ctx, mms_view_1d(ctx, a, 10, 8 * sizeof(float)), 2, 3 * sizeof(float));
    EXPECT(v->view_src == a && v->view_offs == 11 * sizeof(float) && ((float *)v->data)[0] == 11.0f, "view of view");
    EXPECT(mms_view_tensor(ctx, p)->nb[2] == p->nb[2], "view_tensor keeps strides");
    mms_free(ctx);
}

static void test_view_errors(void) {
    struct mms_context *ctx = test_ctx(true);
    struct mms_tensor *a = mms_new_tensor_2d(ctx, MMS_TYPE_F32, 8, 4), *p;
    test_capture_log();
    EXPECT(mms_view_1d(ctx, a, 8, 25 * sizeof(float)) == NULL, "view beyond the end accepted");
    EXPECT(strstr(mms_ctx_error(ctx), "mms_view_1d") && strstr(mms_ctx_error(ctx), "[8,4,1,1]"), "message: %s", mms_ctx_error(ctx));
    mms_ctx_clear_error(ctx);
    EXPECT(mms_view_2d(ctx, a, 8, 4, 8 * sizeof(float), 4) == NULL, "offset view past the end accepted");
    mms_ctx_clear_error(ctx);
    EXPECT(mms_reshape_2d(ctx, a, 5, 6) == NULL && strstr(mms_ctx_error(ctx), "cannot reshape"), "bad reshape: %s", mms_ctx_error(ctx));
    mms_ctx_clear_error(ctx);
    p = mms_transpose(ctx, a);
    EXPECT(mms_reshape_1d(ctx, p, 32) == NULL && strstr(mms_ctx_error(ctx), "not contiguous"), "reshape of a transpose: %s", mms_ctx_error(ctx));
    mms_ctx_clear_error(ctx);
    EXPECT(mms_permute(ctx, a, 0, 0, 1, 2) == NULL && strstr(mms_ctx_error(ctx), "not a permutation"), "bad permutation");
    mms_log_set(NULL, NULL);
    mms_free(ctx);
}

/* -- conversions, against references computed here from the bit formats -- */

static double ref_half_to_double(unsigned h) {
    int exp = (int)((h >> 10) & 31), mant = (int)(h & 1023);
    double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (exp == 0) return sign * ldexp((double)mant, -24);
    if (exp == 31) return mant ? NAN : sign * INFINITY;
    return sign * ldexp(1024.0 + mant, exp - 25);
}

static void test_fp16_decode_exhaustive(void) {
    unsigned h;
    int bad = 0;
    for (h = 0; h < 65536; h++) {
        double want = ref_half_to_double(h);
        float got = mms_fp16_to_fp32((mms_fp16_t)h);
        if (isnan(want) ? !isnan(got) : (double)got != want) bad++;
    }
    EXPECT(bad == 0, "%d of 65536 half values decoded wrongly", bad);
}

/* The nearest half to x, ties to the even mantissa, found by search over all finite halves. */
static unsigned ref_double_to_half(double x) {
    static double vals[31744];   /* the non-negative finite halves in order: 0x0000..0x7bff */
    static int ready = 0;
    unsigned lo = 0, hi = 31743, sign = x < 0 ? 0x8000 : 0;
    double ax = fabs(x);
    if (!ready) { unsigned i; for (i = 0; i < 31744; i++) vals[i] = ref_half_to_double(i); ready = 1; }
    if (ax >= 65520.0) return sign | 0x7c00;          /* halfway past the largest half rounds to inf */
    while (hi - lo > 1) { unsigned mid = (lo + hi) / 2; if (vals[mid] <= ax) lo = mid; else hi = mid; }
    if (ax - vals[lo] < vals[hi] - ax) return sign | lo;
    if (ax - vals[lo] > vals[hi] - ax) return sign | hi;
    return sign | ((lo & 1) ? hi : lo);
}

static void test_fp16_encode_rounding(void) {
    int i, bad = 0;
    for (i = 0; i < 200000; i++) {
        /* exponents from deep subnormal to overflow, plus exact ties between neighbours */
        double x;
        if (i % 4 == 3) {
            unsigned h = (unsigned)test_rand_int(0, 31742);
            x = (ref_half_to_double(h) + ref_half_to_double(h + 1)) / 2.0 * (i % 8 == 3 ? -1 : 1);
        } else {
            x = ldexp(test_rand_uniform(1.0f, 2.0f), test_rand_int(-27, 17)) * (i % 2 ? -1 : 1);
        }
        if ((float)x != x) continue;   /* only floats exactly representable */
        if (mms_fp32_to_fp16((float)x) != ref_double_to_half(x)) {
            if (bad++ < 3) printf("    %.9g -> 0x%04x, want 0x%04x\n", x, mms_fp32_to_fp16((float)x), ref_double_to_half(x));
        }
    }
    EXPECT(bad == 0, "%d values rounded wrongly", bad);
    EXPECT(mms_fp32_to_fp16(INFINITY) == 0x7c00 && mms_fp32_to_fp16(-INFINITY) == 0xfc00, "infinities");
    EXPECT(isnan(mms_fp16_to_fp32(mms_fp32_to_fp16(NAN))), "nan");
}

static void test_bf16_round_trip(void) {
    int i, bad = 0;
    for (i = 0; i < 100000; i++) {
        float f = ldexpf(test_rand_uniform(-2.0f, 2.0f), test_rand_int(-100, 100));
        uint32_t bits, lo;
        double down, up, want;
        memcpy(&bits, &f, sizeof bits);
        lo = bits & 0xffff0000u;
        { float a, b; uint32_t hb = lo + 0x10000u; memcpy(&a, &lo, 4); memcpy(&b, &hb, 4); down = a; up = b; }
        /* nearest of the two bf16 neighbours, ties to even */
        if (fabs((double)f - down) < fabs(up - (double)f)) want = down;
        else if (fabs((double)f - down) > fabs(up - (double)f)) want = up;
        else want = ((lo >> 16) & 1) ? up : down;
        if ((double)mms_bf16_to_fp32(mms_fp32_to_bf16(f)) != want) bad++;
    }
    EXPECT(bad == 0, "%d values rounded wrongly", bad);
    EXPECT(isnan(mms_bf16_to_fp32(mms_fp32_to_bf16(NAN))), "nan");
}

static void test_type_traits(void) {
    const struct mms_type_traits *f16 = mms_get_type_traits(MMS_TYPE_F16);
    float in[5] = { 1.0f, -2.5f, 0.333333f, 65504.0f, 1e-6f }, out[5];
    mms_fp16_t h[5];
    int i;
    EXPECT(f16 && f16->type_size == 2 && f16->blck_size == 1 && !f16->is_quantized && f16->is_float, "f16 traits");
    EXPECT(strcmp(mms_type_name(MMS_TYPE_BF16), "bf16") == 0 && mms_type_size(MMS_TYPE_I32) == 4, "names/sizes");
    EXPECT(mms_get_type_traits(MMS_TYPE_INVALID) == NULL && mms_get_type_traits(MMS_TYPE_COUNT) == NULL, "invalid types");
    EXPECT(mms_row_size(MMS_TYPE_F16, 10) == 20, "row size");
    f16->from_float(in, h, 5);
    f16->to_float(h, out, 5);
    for (i = 0; i < 5; i++) EXPECT(out[i] == mms_fp16_to_fp32(mms_fp32_to_fp16(in[i])), "row conversion %d", i);
}

/* -- graphs -- */

static void test_graph_order_is_depth_first(void) {
    struct mms_context *ctx = test_ctx(true);
    struct mms_tensor *x = mms_new_tensor_1d(ctx, MMS_TYPE_F32, 4), *w = mms_new_tensor_1d(ctx, MMS_TYPE_F32, 4);
    struct mms_tensor *a, *b, *c, *d;
    struct mms_cgraph *g = mms_new_graph(ctx);
    mms_set_name(x, "x");
    mms_set_name(w, "w");
    a = mms_set_name(mms_mul(ctx, x, w), "a");
    b = mms_set_name(mms_silu(ctx, a), "b");
    c = mms_set_name(mms_add(ctx, b, a), "c");
    d = mms_set_name(mms_mul(ctx, c, mms_view_1d(ctx, w, 4, 0)), "d");
    mms_build_forward_expand(g, d);
    mms_build_forward_expand(g, d);   /* adding twice changes nothing */
    EXPECT(mms_graph_n_nodes(g) == 5 && mms_graph_n_leafs(g) == 2, "nodes %d leafs %d", mms_graph_n_nodes(g), mms_graph_n_leafs(g));
    EXPECT(mms_graph_node(g, 0) == a && mms_graph_node(g, 1) == b && mms_graph_node(g, 2) == c, "order");
    EXPECT(mms_graph_node(g, 3)->op == MMS_OP_VIEW && mms_graph_node(g, -1) == d, "view node and negative index");
    EXPECT(mms_graph_leaf(g, 0) == x && mms_graph_leaf(g, 1) == w, "leafs");
    EXPECT(mms_graph_get_tensor(g, "c") == c && mms_graph_get_tensor(g, "w") == w, "lookup by name");
    EXPECT(mms_graph_node(g, 5) == NULL && mms_graph_node(g, -6) == NULL, "out of range index");
    EXPECT(mms_graph_status(g) == MMS_OK && mms_graph_id(g) != 0, "status/id");
    mms_free(ctx);
}

static void test_graph_grows_without_cap(void) {
    struct mms_context *ctx = test_ctx(true);
    struct mms_tensor *t = mms_new_tensor_1d(ctx, MMS_TYPE_F32, 1);
    struct mms_cgraph *g = mms_new_graph(ctx);
    int i;
    for (i = 0; i < 100000; i++) t = mms_sqr(ctx, t);   /* deep chain: no recursion, no size cap */
    mms_build_forward_expand(g, t);
    EXPECT(mms_graph_n_nodes(g) == 100000 && mms_graph_n_leafs(g) == 1, "nodes %d", mms_graph_n_nodes(g));
    EXPECT(mms_graph_node(g, 99999) == t, "last node");
    mms_free(ctx);
}

static void test_graph_records_failed_ops(void) {
    struct mms_context *ctx = test_ctx(true);
    struct mms_tensor *a = mms_new_tensor_2d(ctx, MMS_TYPE_F32, 4, 3), *b = mms_new_tensor_2d(ctx, MMS_TYPE_F32, 5, 3);
    struct mms_cgraph *g = mms_new_graph(ctx);
    struct mms_tensor *bad;
    test_capture_log();
    bad = mms_add(ctx, a, b);
    EXPECT(bad == NULL, "add of [4,3] and [5,3] accepted");
    EXPECT(strstr(test_last_log(), "mms_add") && strstr(test_last_log(), "[4,3,1,1]") && strstr(test_last_log(), "[5,3,1,1]"),
           "the log names the op and both shapes: %s", test_last_log());
    EXPECT(mms_silu(ctx, bad) == NULL && test__log_count == 1, "a NULL input logged again (%d messages)", test__log_count);
    mms_build_forward_expand(g, mms_silu(ctx, bad));
    EXPECT(mms_graph_status(g) == MMS_ERR_INVALID_ARG && strstr(mms_graph_error(g), "mms_add"),
           "graph error: %s", mms_graph_error(g));
    mms_log_set(NULL, NULL);
    mms_free(ctx);
}

static void test_graph_print_and_dot(void) {
    struct mms_context *ctx = test_ctx(true);
    struct mms_tensor *x = mms_set_name(mms_new_tensor_2d(ctx, MMS_TYPE_F32, 4, 2), "in\"put");
    struct mms_tensor *y = mms_set_name(mms_gelu(ctx, mms_transpose(ctx, x)), "y");
    struct mms_cgraph *g = mms_new_graph(ctx);
    char path[] = "build/test_core_graph.dot", line[512];
    FILE *f;
    int found_edge = 0, found_escape = 0;
    mms_set_input(x);
    mms_set_output(y);
    mms_build_forward_expand(g, y);
    f = tmpfile();
    mms_graph_print(g, f);
    rewind(f);
    while (fgets(line, sizeof line, f)) if (strstr(line, "GELU") && strstr(line, "-o-") && strstr(line, "N0")) found_edge = 1;
    fclose(f);
    EXPECT(found_edge, "the printed table lacks the GELU row with its output flag and source");
    EXPECT(mms_graph_dump_dot(g, path) == MMS_OK, "dot export: %s", mms_last_error());
    f = fopen(path, "r");
    found_edge = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (strstr(line, "->")) found_edge++;
        if (strstr(line, "in_put")) found_escape = 1;
    }
    if (f) fclose(f);
    EXPECT(found_edge == 2 && found_escape, "dot file: %d edges, escaped name %d", found_edge, found_escape);
    test_capture_log();
    EXPECT_ERROR(mms_graph_dump_dot(g, "/nonexistent-dir/x.dot"), MMS_ERR_IO, "cannot write", "/nonexistent-dir/x.dot");
    mms_log_set(NULL, NULL);
    mms_free(ctx);
}

static void test_status_strings(void) {
    EXPECT(strcmp(mms_status_string(MMS_OK), "ok") == 0, "ok");
    EXPECT(strcmp(mms_status_string(MMS_ERR_STALE), "stale tensor") == 0, "stale");
    EXPECT(strcmp(mms_status_string((enum mms_status)-99), "unknown status") == 0, "unknown");
    EXPECT(strcmp(mms_op_name(MMS_OP_FLASH_ATTN_EXT), "FLASH_ATTN_EXT") == 0 && strcmp(mms_op_name(MMS_OP_COUNT), "INVALID") == 0, "op names");
    test_capture_log();
    EXPECT_ERROR(mms_set_error(MMS_ERR_IO, "custom %d", 42), MMS_ERR_IO, "custom 42");
    EXPECT(strcmp(test_last_log(), "custom 42") == 0, "logged: %s", test_last_log());
    mms_clear_error();
    EXPECT(mms_last_status() == MMS_OK && mms_last_error()[0] == '\0', "clear");
    mms_log_set(NULL, NULL);
}

int main(void) {
    test_seed();
    RUN(test_context_allocating_and_growing);
    RUN(test_context_fixed_buffer_runs_out_with_error);
    RUN(test_no_alloc_context_has_no_data);
    RUN(test_tensor_shape_and_strides);
    RUN(test_tensor_names_flags_lookup);
    RUN(test_tensor_creation_errors);
    RUN(test_views_share_memory_and_strides);
    RUN(test_view_errors);
    RUN(test_fp16_decode_exhaustive);
    RUN(test_fp16_encode_rounding);
    RUN(test_bf16_round_trip);
    RUN(test_type_traits);
    RUN(test_graph_order_is_depth_first);
    RUN(test_graph_grows_without_cap);
    RUN(test_graph_records_failed_ops);
    RUN(test_graph_print_and_dot);
    RUN(test_status_strings);
    return test_summary();
}
