/* Every op of the CPU backend against a double-precision reference written here, for each kernel
   set the machine runs (scalar, AVX2, NEON, NEON with dotprod) and 1..3 threads, plus the shape and type checks of the op constructors.

   The reference never asks the library how to read a tensor: each input is made by this file as a
   (possibly strided, transposed, permuted or reshaped) view of a root tensor whose bytes and
   strides this file computes itself, and f16/bf16 are decoded and rounded here (IEEE round to
   nearest even). Outputs are poisoned with 0xFF bytes (NaN) before compute, so an element a kernel
   never writes fails the comparison.

   MMS_TEST_SEED=n replays a run; MMS_TEST_VERBOSE=1 prints the error of every comparison. */
#define MMSCHED_IMPLEMENTATION
#include "../mmsched.h"
#include "test.h"
#include "kernel_sets.h"

#include <math.h>

#define F32  MMS_TYPE_F32
#define F16  MMS_TYPE_F16
#define BF16 MMS_TYPE_BF16
#define I32  MMS_TYPE_I32

#define SQRT_2_OVER_PI 0.79788456080286535588

/* Loops over every index of a 4-D shape in logical (row-major, ne[0] fastest) order; the indices
   i0..i3 must be declared by the caller. AT gives the flat position of an index in that order. */
#define FOR4(ne) \
    for (i3 = 0; i3 < (ne)[3]; i3++) for (i2 = 0; i2 < (ne)[2]; i2++) \
    for (i1 = 0; i1 < (ne)[1]; i1++) for (i0 = 0; i0 < (ne)[0]; i0++)
#define AT(ne, i0, i1, i2, i3) ((i0) + (ne)[0] * ((i1) + (ne)[1] * ((i2) + (ne)[2] * (i3))))
#define SHAPE(a, b, c, d) ((const int64_t[4]){ (a), (b), (c), (d) })

static mms_backend_t g_backend;
static const char   *g_kernels = "";   /* name of the kernel set in use, for case names */
static int           g_turn;           /* rotates the thread count over computes: 1, 2, 3, 1, ... */
static int           g_verbose;

static int64_t nelem(const int64_t ne[4]) { return ne[0] * ne[1] * ne[2] * ne[3]; }

/* ================================================================================================
   Number formats, written independently of the library */

static size_t type_size(enum mms_type t) { return t == F16 || t == BF16 ? 2 : 4; }
static const char *type_str(enum mms_type t) {
    return t == F32 ? "f32" : t == F16 ? "f16" : t == BF16 ? "bf16" : t == I32 ? "i32" : "?";
}

/* Rounds x to a binary format with `mant` fraction bits and exponents emin..emax, to nearest even,
   with subnormals and overflow to infinity: f16 is (10, -14, 15), bf16 is (7, -126, 127). */
static double round_fmt(double x, int mant, int emin, int emax) {
    double a = fabs(x), r;
    int e;
    if (a == 0.0 || !(a < INFINITY)) return x;          /* zero, inf, nan */
    frexp(a, &e);                                       /* a = m * 2^e, leading bit 2^(e-1) */
    e = e - 1 < emin ? emin : e - 1;                    /* below emin the quantum stays fixed */
    r = ldexp(rint(ldexp(a, mant - e)), e - mant);      /* rint: nearest even in the default mode */
    if (r >= ldexp(1.0, emax + 1)) r = INFINITY;
    return x < 0 ? -r : r;
}

/* The value x becomes when stored as type. */
static double round_to(enum mms_type t, double x) {
    switch (t) {
        case F16:  return round_fmt(x, 10, -14, 15);
        case BF16: return round_fmt(x, 7, -126, 127);
        case F32:  return (double)(float)x;
        default:   return x;
    }
}

static double f16_value(uint16_t h) {
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m | 0x400, e - 25);
    return (h & 0x8000) ? -v : v;
}

/* Bits of a value that f16 represents exactly (see round_to). */
static uint16_t f16_bits(double v) {
    uint16_t s = signbit(v) ? 0x8000 : 0;
    double a = fabs(v);
    int e;
    if (a != a) return 0x7e00;
    if (a == INFINITY) return s | 0x7c00;
    if (a < ldexp(1.0, -14)) return (uint16_t)(s | (uint16_t)ldexp(a, 24));   /* subnormal: units of 2^-24 */
    frexp(a, &e);
    return (uint16_t)(s | ((e - 1 + 15) << 10) | (uint16_t)(ldexp(a, 11 - e) - 1024));
}

static double load_elem(enum mms_type t, const unsigned char *p) {
    float f;
    uint16_t h;
    uint32_t u;
    int32_t i;
    switch (t) {
        case F32:  memcpy(&f, p, 4); return f;
        case F16:  memcpy(&h, p, 2); return f16_value(h);
        case BF16: memcpy(&h, p, 2); u = (uint32_t)h << 16; memcpy(&f, &u, 4); return f;
        default:   memcpy(&i, p, 4); return i;
    }
}

static void store_elem(enum mms_type t, unsigned char *p, double v) {
    float f;
    uint16_t h;
    uint32_t u;
    int32_t i;
    v = round_to(t, v);
    switch (t) {
        case F32:  f = (float)v; memcpy(p, &f, 4); break;
        case F16:  h = f16_bits(v); memcpy(p, &h, 2); break;
        case BF16: f = (float)v; memcpy(&u, &f, 4); h = (uint16_t)(u >> 16); memcpy(p, &h, 2); break;
        default:   i = (int32_t)v; memcpy(p, &i, 4); break;
    }
}

static void contig_strides(enum mms_type t, const int64_t ne[4], size_t nb[4]) {
    int i;
    nb[0] = type_size(t);
    for (i = 1; i < 4; i++) nb[i] = nb[i - 1] * (size_t)ne[i - 1];
}

/* ================================================================================================
   Cases: a context, the tensors this file made (with their layout), the outputs, one compute */

enum layout { CONTIG, STRIDED, TRANSPOSED, PERMUTED, RESHAPED };
static const char *const layout_name[] = { "contig", "strided", "transposed", "permuted", "reshaped" };
static const int perm_axes[4] = { 1, 3, 0, 2 };   /* PERMUTED: root dim i becomes dim perm_axes[i] */

struct tin {
    struct mms_tensor *t;        /* what the ops see: the root or a view of it */
    struct mms_tensor *root;     /* the tensor that owns the memory */
    enum layout        layout;
    size_t             off, nb[4];  /* where t's elements lie in root: computed here, not read from t */
    size_t             size;     /* bytes of root */
    unsigned char     *host;     /* root's bytes, uploaded before compute; NULL: a destination, poisoned */
};

#define MAX_TENSORS 24
#define MAX_OUTS    32
struct tcase {
    struct mms_context  *ctx;
    mms_backend_buffer_t buf;
    struct mms_cgraph   *graph;
    struct tin           in[MAX_TENSORS];
    int                  n_in;
    struct mms_tensor   *out[MAX_OUTS];
    int                  n_out;
    int                  n_threads;
    char                 label[256];
};

static void case_begin(struct tcase *c) {
    memset(c, 0, sizeof *c);
    c->ctx = test_ctx(true);
    if (!c->ctx) { printf("mms_init failed: %s\n", mms_last_error()); exit(2); }
}

static void case_end(struct tcase *c) {
    int i;
    for (i = 0; i < c->n_in; i++) free(c->in[i].host);
    mms_backend_buffer_free(c->buf);
    mms_free(c->ctx);
}

static const struct tin *lookup(const struct tcase *c, const struct mms_tensor *t) {
    int i;
    for (i = 0; i < c->n_in; i++) if (c->in[i].t == t) return &c->in[i];
    return NULL;
}

static const struct tin *find(const struct tcase *c, const struct mms_tensor *t) {
    const struct tin *x = lookup(c, t);
    if (!x) { printf("test bug: tensor %p was not made by tensor_new\n", (const void *)t); abort(); }
    return x;
}

/* A tensor of shape ne, laid out as asked, registered with its layout (no data yet). */
static struct tin *tensor_new(struct tcase *c, enum mms_type type, const int64_t ne[4], enum layout lay) {
    struct tin *x = &c->in[c->n_in++];
    int64_t rne[4];
    size_t rnb[4];
    int i;
    if (c->n_in > MAX_TENSORS) { printf("test bug: too many tensors\n"); abort(); }
    memcpy(rne, ne, sizeof rne);
    if (lay == STRIDED)    { rne[0] += 2; rne[1] += 1; rne[2] += 1; }    /* padding on three dims */
    if (lay == TRANSPOSED) { rne[0] = ne[1]; rne[1] = ne[0]; }
    if (lay == PERMUTED)   for (i = 0; i < 4; i++) rne[i] = ne[perm_axes[i]];
    contig_strides(type, rne, rnb);
    x->layout = lay;
    x->size = type_size(type) * (size_t)nelem(rne);
    x->root = lay == RESHAPED ? mms_new_tensor_1d(c->ctx, type, nelem(ne))
                              : mms_new_tensor_4d(c->ctx, type, rne[0], rne[1], rne[2], rne[3]);
    mms_format_name(x->root, "t%d", c->n_in - 1);
    memcpy(x->nb, rnb, sizeof rnb);
    switch (lay) {
        case CONTIG:
            x->t = x->root;
            break;
        case RESHAPED:
            x->t = mms_reshape_4d(c->ctx, x->root, ne[0], ne[1], ne[2], ne[3]);
            break;
        case STRIDED:   /* starts at element (1, 1, 1, 0) of the root */
            x->off = rnb[0] + rnb[1] + rnb[2];
            x->t = mms_view_4d(c->ctx, x->root, ne[0], ne[1], ne[2], ne[3], rnb[1], rnb[2], rnb[3], x->off);
            break;
        case TRANSPOSED:
            x->t = mms_transpose(c->ctx, x->root);
            x->nb[0] = rnb[1];
            x->nb[1] = rnb[0];
            break;
        case PERMUTED:
            x->t = mms_permute(c->ctx, x->root, perm_axes[0], perm_axes[1], perm_axes[2], perm_axes[3]);
            for (i = 0; i < 4; i++) x->nb[perm_axes[i]] = rnb[i];
            break;
    }
    if (!x->t || !x->root) { printf("test bug: making a %s tensor failed: %s\n", layout_name[lay], mms_last_error()); abort(); }
    return x;
}

/* A random input: every element of the root uniform in [lo, hi) (integers in [lo, hi] for I32). */
static struct mms_tensor *tensor_rand(struct tcase *c, enum mms_type type, const int64_t ne[4], enum layout lay,
                                      double lo, double hi) {
    struct tin *x = tensor_new(c, type, ne, lay);
    size_t ts = type_size(type), k;
    x->host = (unsigned char *)malloc(x->size);
    for (k = 0; k < x->size / ts; k++)
        store_elem(type, x->host + k * ts, type == I32 ? (double)test_rand_int((int)lo, (int)hi)
                                                       : (double)test_rand_uniform((float)lo, (float)hi));
    return x->t;
}

/* A destination (of cpy): no data, its root is poisoned before compute. */
static struct mms_tensor *tensor_dst(struct tcase *c, enum mms_type type, const int64_t ne[4], enum layout lay) {
    return tensor_new(c, type, ne, lay)->t;
}

static size_t elem_offset(const struct tin *x, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return x->off + (size_t)i0 * x->nb[0] + (size_t)i1 * x->nb[1] + (size_t)i2 * x->nb[2] + (size_t)i3 * x->nb[3];
}

/* Element of an input, through the layout computed by tensor_new. */
static double in_at(const struct tcase *c, const struct mms_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const struct tin *x = find(c, t);
    return load_elem(t->type, x->host + elem_offset(x, i0, i1, i2, i3));
}

static void in_set(const struct tcase *c, const struct mms_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, double v) {
    const struct tin *x = find(c, t);
    store_elem(t->type, x->host + elem_offset(x, i0, i1, i2, i3), v);
}

/* The k-th element in logical order. */
static double in_flat(const struct tcase *c, const struct mms_tensor *t, int64_t k) {
    return in_at(c, t, k % t->ne[0], k / t->ne[0] % t->ne[1], k / (t->ne[0] * t->ne[1]) % t->ne[2],
                 k / (t->ne[0] * t->ne[1] * t->ne[2]));
}
static void in_set_flat(const struct tcase *c, const struct mms_tensor *t, int64_t k, double v) {
    in_set(c, t, k % t->ne[0], k / t->ne[0] % t->ne[1], k / (t->ne[0] * t->ne[1]) % t->ne[2],
           k / (t->ne[0] * t->ne[1] * t->ne[2]), v);
}

/* "f16[33,7,1,1]/permuted", for labels (a few rotating buffers). */
static const char *desc(const struct tcase *c, const struct mms_tensor *t) {
    static char bufs[8][96];
    static int turn;
    char *s = bufs[turn++ % 8];
    const struct tin *x = lookup(c, t);
    snprintf(s, 96, "%s[%lld,%lld,%lld,%lld]%s%s", type_str(t->type), (long long)t->ne[0], (long long)t->ne[1],
             (long long)t->ne[2], (long long)t->ne[3], x && x->layout != CONTIG ? "/" : "",
             x && x->layout != CONTIG ? layout_name[x->layout] : "");
    return s;
}

static void case_label(struct tcase *c, const char *fmt, ...) MMS_PRINTF(2, 3);
static void case_label(struct tcase *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->label, sizeof c->label, fmt, ap);
    va_end(ap);
}

/* Marks an op result as a graph output; NULL passes through (the compute then reports the build error). */
static struct mms_tensor *case_out(struct tcase *c, struct mms_tensor *t) {
    if (c->n_out == MAX_OUTS) { printf("test bug: more than %d outputs in one case\n", MAX_OUTS); abort(); }
    c->out[c->n_out++] = t;
    return t;
}

static bool is_input_root(const struct tcase *c, const struct mms_tensor *t) {
    int i;
    for (i = 0; i < c->n_in; i++) if (c->in[i].root == t && c->in[i].host) return true;
    return false;
}

/* Poisons everything but the inputs (op results, cpy destinations) and computes the graph. */
static enum mms_status case_run(struct tcase *c, int n_threads) {
    struct mms_tensor *t;
    for (t = mms_get_first_tensor(c->ctx); t; t = mms_get_next_tensor(c->ctx, t))
        if (!t->view_src && !is_input_root(c, t) && mms_nbytes(t) > 0) mms_backend_tensor_memset(t, 0xFF, 0, mms_nbytes(t));
    c->n_threads = n_threads;
    mms_backend_cpu_set_n_threads(g_backend, n_threads);
    return mms_backend_graph_compute(g_backend, c->graph);
}

/* Builds the graph of the outputs, allocates, uploads the inputs and runs it with the next thread
   count. *why says what failed. */
static enum mms_status case_compute_status(struct tcase *c, const char **why) {
    int i;
    *why = "";
    if (mms_ctx_status(c->ctx) != MMS_OK) { *why = mms_ctx_error(c->ctx); return mms_ctx_status(c->ctx); }
    c->graph = mms_new_graph(c->ctx);
    for (i = 0; i < c->n_out; i++) mms_build_forward_expand(c->graph, c->out[i]);
    if (mms_graph_status(c->graph) != MMS_OK) { *why = mms_graph_error(c->graph); return mms_graph_status(c->graph); }
    c->buf = mms_backend_alloc_ctx_tensors(c->ctx, g_backend);
    if (!c->buf) { *why = mms_last_error(); return mms_last_status(); }
    for (i = 0; i < c->n_in; i++)
        if (c->in[i].host) mms_backend_tensor_set(c->in[i].root, c->in[i].host, 0, c->in[i].size);
    if (case_run(c, 1 + g_turn++ % 3) != MMS_OK) { *why = mms_last_error(); return mms_last_status(); }
    return MMS_OK;
}

static bool case_compute(struct tcase *c) {
    const char *why;
    enum mms_status st = case_compute_status(c, &why);
    EXPECT(st == MMS_OK, "%s (%d threads): compute failed: %s", c->label, c->n_threads, why);
    return st == MMS_OK;
}

/* Bytes of a placed tensor (the whole of it). */
static unsigned char *fetch(const struct mms_tensor *t, size_t size) {
    unsigned char *bytes = (unsigned char *)malloc(size ? size : 1);
    if (mms_backend_tensor_get(t, bytes, 0, size) != MMS_OK) { printf("test bug: get failed: %s\n", mms_last_error()); abort(); }
    return bytes;
}

/* An output's elements in logical order. Op results are read as the contiguous tensors they must
   be; a cpy result through the layout of its destination; another view the graph returns (views
   as outputs) through its own strides. */
static double *case_result(const struct tcase *c, const struct mms_tensor *t) {
    const struct tin *x = lookup(c, t->op == MMS_OP_CPY ? t->src[1] : t);
    const struct mms_tensor *root = t;
    size_t off = 0, nb[4];
    unsigned char *bytes;
    double *v = (double *)malloc((size_t)nelem(t->ne) * sizeof *v);
    int64_t i0, i1, i2, i3, k = 0;
    if (x) {
        root = x->root;
        off = x->off;
        memcpy(nb, x->nb, sizeof nb);
    } else if (t->view_src) {
        root = t->view_src;
        off = t->view_offs;
        memcpy(nb, t->nb, sizeof nb);
    } else {
        contig_strides(t->type, t->ne, nb);
    }
    bytes = fetch(root, mms_nbytes(root));
    FOR4(t->ne) v[k++] = load_elem(t->type, bytes + off + (size_t)i0 * nb[0] + (size_t)i1 * nb[1] + (size_t)i2 * nb[2] + (size_t)i3 * nb[3]);
    free(bytes);
    return v;
}

static double *ref_new(const int64_t ne[4]) { return (double *)calloc((size_t)nelem(ne), sizeof(double)); }

/* The tolerance for an output stored as type: f32 results are as exact as `f32_tol`; f16 and bf16
   add their rounding (relative 2^-11 and 2^-8 per element, nmse about 1e-7 and 5e-6). */
static double tol_for(enum mms_type type, double f32_tol) {
    double t = type == F16 ? 1e-6 : type == BF16 ? 1e-4 : 0.0;
    return t > f32_tol ? t : f32_tol;
}

/* Compares output t (expected shape ne and type) with ref (logical order; freed here). tol 0
   means every element must match exactly (copies, integer results); otherwise the normalised
   MSE sum((out-ref)^2) / sum(scale^2) must be <= tol (a NaN anywhere fails). scale is ref itself,
   or for sums (terms_sq given) each element's root sum of its terms' squares: their
   rounding grows with the terms, and a sum that cancels to near zero (a few random terms) would
   otherwise turn correct f32 rounding into a large relative error. */
static void check_scaled(const struct tcase *c, const char *op, const struct mms_tensor *t, const int64_t ne[4],
                         enum mms_type type, double *ref, double *terms_sq, double tol) {
    double *got, err = 0.0, den = 0.0, nmse;
    int64_t i, n = nelem(ne), bad = 0, first = -1;
    if (!t) {
        EXPECT(t != NULL, "%s %s: the op returned NULL", op, c->label);
        free(ref);
        free(terms_sq);
        return;
    }
    if (!(t->ne[0] == ne[0] && t->ne[1] == ne[1] && t->ne[2] == ne[2] && t->ne[3] == ne[3]) || t->type != type) {
        EXPECT(0, "%s %s: result is %s [%lld,%lld,%lld,%lld], expected %s [%lld,%lld,%lld,%lld]", op, c->label,
               type_str(t->type), (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
               type_str(type), (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3]);
        free(ref);
        free(terms_sq);
        return;
    }
    got = case_result(c, t);
    for (i = 0; i < n; i++) {
        double d = got[i] - ref[i];
        if (tol == 0.0 ? !(got[i] == ref[i] || (got[i] != got[i] && ref[i] != ref[i])) : !(d == d)) {
            if (first < 0) first = i;
            bad++;
        }
        err += d * d;
        den += terms_sq ? terms_sq[i] : ref[i] * ref[i];
    }
    nmse = den > 0.0 ? err / den : err;
    if (g_verbose) printf("    %-12s %-60s %d thr: nmse %.3g (tol %.1g)\n", op, c->label, c->n_threads, nmse, tol);
    if (tol == 0.0)
        EXPECT(bad == 0, "%s %s -> %s (%d threads): %lld of %lld elements differ (nmse %.3g, tolerance: exact), "
               "first #%lld: got %.9g expected %.9g", op, c->label, desc(c, t), c->n_threads, (long long)bad, (long long)n,
               nmse, (long long)first, got[first < 0 ? 0 : first], ref[first < 0 ? 0 : first]);
    else
        EXPECT(nmse <= tol, "%s %s -> %s (%d threads): nmse %.3g > tolerance %.1g (%lld non-finite, first #%lld)",
               op, c->label, desc(c, t), c->n_threads, nmse, tol, (long long)bad, (long long)first);
    free(got);
    free(ref);
    free(terms_sq);
}

static void check(const struct tcase *c, const char *op, const struct mms_tensor *t, const int64_t ne[4],
                  enum mms_type type, double *ref, double tol) {
    check_scaled(c, op, t, ne, type, ref, NULL, tol);
}

/* ================================================================================================
   Numeric cases. Each config is one graph; shapes mix odd sizes (1, 7, 33, 1601), broadcasting and
   non-contiguous operands. */

struct cfg1 { enum mms_type type; int64_t ne[4]; enum layout lay; };
struct cfg2 { enum mms_type ta; int64_t na[4]; enum layout la; enum mms_type tb; int64_t nb[4]; enum layout lb; };

/* ---- add, sub, mul, div: b repeated over a in every dim ---- */

typedef struct mms_tensor *(*binary_fn)(struct mms_context *, struct mms_tensor *, struct mms_tensor *);
static const struct { const char *name; binary_fn fn; } binops[4] = {
    { "mms_add", mms_add }, { "mms_sub", mms_sub }, { "mms_mul", mms_mul }, { "mms_div", mms_div }
};
static double binop_ref(int op, double x, double y) {
    return op == 0 ? x + y : op == 1 ? x - y : op == 2 ? x * y : x / y;
}

static void test_binary(void) {
    static const struct cfg2 cfg[] = {
        { F32,  { 33, 7, 3, 2 }, CONTIG,     F32,  { 33, 1, 3, 1 }, CONTIG },
        { F32,  { 7, 5, 2, 3 },  PERMUTED,   F32,  { 1, 5, 1, 3 },  STRIDED },
        { F32,  { 12, 3, 1, 1 }, TRANSPOSED, F32,  { 4, 1, 1, 1 },  CONTIG },    /* b repeated along ne[0] too */
        { F16,  { 33, 4, 2, 1 }, STRIDED,    F32,  { 33, 4, 2, 1 }, TRANSPOSED },
        { BF16, { 1601, 2, 1, 1 }, CONTIG,   F16,  { 1601, 1, 1, 1 }, RESHAPED },
        { F32,  { 1, 7, 1, 2 },  CONTIG,     BF16, { 1, 7, 1, 1 },  PERMUTED },
    };
    size_t k;
    int op;
    for (k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        struct tcase c;
        struct mms_tensor *a, *b, *out[4];
        case_begin(&c);
        a = tensor_rand(&c, cfg[k].ta, cfg[k].na, cfg[k].la, -2, 2);
        b = tensor_rand(&c, cfg[k].tb, cfg[k].nb, cfg[k].lb, 0.5, 2);   /* away from 0 for div */
        case_label(&c, "a %s b %s", desc(&c, a), desc(&c, b));
        for (op = 0; op < 4; op++) out[op] = case_out(&c, binops[op].fn(c.ctx, a, b));
        if (case_compute(&c)) {
            for (op = 0; op < 4; op++) {
                const int64_t *ne = cfg[k].na, *nb = cfg[k].nb;
                double *ref = ref_new(ne);
                int64_t i0, i1, i2, i3;
                FOR4(ne) ref[AT(ne, i0, i1, i2, i3)] = binop_ref(op, in_at(&c, a, i0, i1, i2, i3),
                                                                 in_at(&c, b, i0 % nb[0], i1 % nb[1], i2 % nb[2], i3 % nb[3]));
                check(&c, binops[op].name, out[op], ne, cfg[k].ta, ref, tol_for(cfg[k].ta, 1e-12));
            }
        }
        case_end(&c);
    }
}

/* ---- unary ops and scale ---- */

#define UNARY_SCALE (-1.75f)
static struct mms_tensor *op_scale(struct mms_context *ctx, struct mms_tensor *a) { return mms_scale(ctx, a, UNARY_SCALE); }
static double ref_scale(double x)     { return UNARY_SCALE * x; }
static double ref_sqr(double x)       { return x * x; }
static double ref_silu(double x)      { return x / (1.0 + exp(-x)); }
static double ref_gelu(double x)      { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }
static double ref_gelu_tanh(double x) { return 0.5 * x * (1.0 + tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))); }

typedef struct mms_tensor *(*unary_fn)(struct mms_context *, struct mms_tensor *);
static const struct { const char *name; unary_fn fn; double (*ref)(double); bool positive; } unops[] = {
    { "mms_scale", op_scale,  ref_scale, false }, { "mms_sqr", mms_sqr, ref_sqr, false },
    { "mms_sqrt",  mms_sqrt,  sqrt,      true },  { "mms_exp", mms_exp, exp,     false },
    { "mms_tanh",  mms_tanh,  tanh,      false }, { "mms_silu", mms_silu, ref_silu, false },
    { "mms_gelu",  mms_gelu,  ref_gelu,  false }, { "mms_gelu_tanh", mms_gelu_tanh, ref_gelu_tanh, false },
};
#define N_UNOPS ((int)(sizeof unops / sizeof unops[0]))

static void test_unary(void) {
    static const struct cfg1 cfg[] = {
        { F32,  { 33, 7, 2, 1 },   CONTIG },
        { F32,  { 7, 33, 1, 1 },   TRANSPOSED },
        { F16,  { 1601, 2, 1, 1 }, STRIDED },
        { BF16, { 5, 7, 3, 2 },    PERMUTED },
        { F32,  { 1, 7, 1, 1 },    RESHAPED },
    };
    size_t k;
    int op;
    for (k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        struct tcase c;
        struct mms_tensor *a, *pos, *out[N_UNOPS];
        const int64_t *ne = cfg[k].ne;
        case_begin(&c);
        a = tensor_rand(&c, cfg[k].type, ne, cfg[k].lay, -4, 4);
        pos = tensor_rand(&c, cfg[k].type, ne, cfg[k].lay, 0.01, 9);    /* for sqrt */
        case_label(&c, "a %s", desc(&c, a));
        for (op = 0; op < N_UNOPS; op++) out[op] = case_out(&c, unops[op].fn(c.ctx, unops[op].positive ? pos : a));
        if (case_compute(&c)) {
            for (op = 0; op < N_UNOPS; op++) {
                const struct mms_tensor *x = unops[op].positive ? pos : a;
                double *ref = ref_new(ne);
                int64_t i0, i1, i2, i3;
                FOR4(ne) ref[AT(ne, i0, i1, i2, i3)] = unops[op].ref(in_at(&c, x, i0, i1, i2, i3));
                check(&c, unops[op].name, out[op], ne, cfg[k].type, ref, tol_for(cfg[k].type, 1e-10));
            }
        }
        case_end(&c);
    }
}

/* NaN in, NaN out for every unary op, in several lane positions and the scalar tail (33 values:
   4 vectors of 8 and one left over); exp also against the reference at the other special inputs
   (exp(-inf) = 0 and underflow to 0 keep masked scores weightless). */
static void test_unary_special(void) {
    static const double special[] = { NAN, -INFINITY, -100.0, -87.0, 0.0, -0.0, 1e-30, 80.0, -2.5 };
    const int64_t ne[4] = { 33, 1, 1, 1 };
    struct tcase c;
    struct mms_tensor *a, *out[N_UNOPS];
    int64_t i;
    int op;
    case_begin(&c);
    a = tensor_rand(&c, F32, ne, CONTIG, -1, 1);
    for (i = 0; i < ne[0]; i++) in_set_flat(&c, a, i, i % 4 == 1 || i == 32 ? NAN : special[i % 9]);
    case_label(&c, "special values %s", desc(&c, a));
    for (op = 0; op < N_UNOPS; op++) out[op] = case_out(&c, unops[op].fn(c.ctx, a));
    if (case_compute(&c)) {
        for (op = 0; op < N_UNOPS; op++) {
            double *got = case_result(&c, out[op]);
            for (i = 0; i < ne[0]; i++) {
                const double x = in_flat(&c, a, i), want = exp(x);
                if (x != x) EXPECT(got[i] != got[i], "%s(NaN) -> %.9g, expected NaN (%s, element %lld)", unops[op].name, got[i], c.label, (long long)i);
                else if (unops[op].ref == exp)
                    EXPECT(fabs(got[i] - want) <= 1e-6 * want + 1e-37, "mms_exp(%g) -> %.9g, expected %.9g (%s)", x, got[i], want, c.label);
            }
            free(got);
        }
    }
    case_end(&c);
}

/* ---- sum_rows and argmax ---- */

static void test_reductions(void) {
    static const struct cfg1 cfg[] = {
        { F32,  { 1601, 3, 2, 1 }, CONTIG },
        { F16,  { 7, 33, 1, 2 },   PERMUTED },
        { BF16, { 33, 5, 1, 1 },   TRANSPOSED },
        { F32,  { 1, 4, 3, 1 },    STRIDED },
    };
    size_t k;
    for (k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        struct tcase c;
        struct mms_tensor *a, *m, *sum, *am;
        const int64_t *ne = cfg[k].ne;
        case_begin(&c);
        a = tensor_rand(&c, cfg[k].type, ne, cfg[k].lay, -1, 1);
        m = tensor_rand(&c, cfg[k].type, ne, cfg[k].lay, -1, 1);
        if (ne[0] >= 10) {          /* NaN never wins (also in first place); ties go to the first index */
            in_set(&c, m, 0, 0, 0, 0, NAN);
            in_set(&c, m, 4, 1, 0, 0, NAN);
            in_set(&c, m, 2, 2, 0, 0, 5.0);
            in_set(&c, m, 7, 2, 0, 0, 5.0);
        }
        case_label(&c, "a %s", desc(&c, a));
        sum = case_out(&c, mms_sum_rows(c.ctx, a));
        am = case_out(&c, mms_argmax(c.ctx, m));
        if (case_compute(&c)) {
            const int64_t nes[4] = { 1, ne[1], ne[2], ne[3] }, nea[4] = { ne[1], ne[2], ne[3], 1 };
            double *rs = ref_new(nes), *rs_sq = ref_new(nes), *ra = ref_new(nea);
            int64_t i0, i1, i2, i3;
            for (i3 = 0; i3 < ne[3]; i3++) for (i2 = 0; i2 < ne[2]; i2++) for (i1 = 0; i1 < ne[1]; i1++) {
                double s = 0.0, sq = 0.0, best = -INFINITY;
                int64_t arg = 0;
                for (i0 = 0; i0 < ne[0]; i0++) {
                    double v = in_at(&c, m, i0, i1, i2, i3);
                    const double x = in_at(&c, a, i0, i1, i2, i3);
                    s += x;
                    sq += x * x;
                    if (v > best) { best = v; arg = i0; }
                }
                rs[AT(nes, 0, i1, i2, i3)] = s;
                rs_sq[AT(nes, 0, i1, i2, i3)] = sq;
                ra[AT(nea, i1, i2, i3, 0)] = (double)arg;
            }
            check_scaled(&c, "mms_sum_rows", sum, nes, F32, rs, rs_sq, 1e-10);
            check(&c, "mms_argmax", am, nea, I32, ra, 0.0);
        }
        case_end(&c);
    }
}

/* ---- norm and rms_norm ---- */

#define NORM_EPS 1e-5f
#define RMS_EPS  1e-6f
static struct mms_tensor *op_norm(struct mms_context *ctx, struct mms_tensor *a)     { return mms_norm(ctx, a, NORM_EPS); }
static struct mms_tensor *op_rms_norm(struct mms_context *ctx, struct mms_tensor *a) { return mms_rms_norm(ctx, a, RMS_EPS); }

static void test_norms(void) {
    static const struct cfg1 cfg[] = {
        { F32,  { 33, 7, 2, 1 },   CONTIG },
        { F32,  { 1601, 2, 1, 1 }, STRIDED },
        { F16,  { 64, 3, 1, 1 },   TRANSPOSED },
        { BF16, { 7, 5, 2, 1 },    PERMUTED },
        { F32,  { 1, 3, 1, 1 },    RESHAPED },   /* one element: norm gives 0 */
    };
    size_t k;
    for (k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        struct tcase c;
        struct mms_tensor *a, *n, *r;
        const int64_t *ne = cfg[k].ne;
        case_begin(&c);
        a = tensor_rand(&c, cfg[k].type, ne, cfg[k].lay, -1, 3);   /* a mean away from 0 */
        case_label(&c, "a %s", desc(&c, a));
        n = case_out(&c, op_norm(c.ctx, a));
        r = case_out(&c, op_rms_norm(c.ctx, a));
        if (case_compute(&c)) {
            double *rn = ref_new(ne), *rr = ref_new(ne);
            int64_t i0, i1, i2, i3;
            for (i3 = 0; i3 < ne[3]; i3++) for (i2 = 0; i2 < ne[2]; i2++) for (i1 = 0; i1 < ne[1]; i1++) {
                double sum = 0.0, sq = 0.0, var = 0.0, mean;
                for (i0 = 0; i0 < ne[0]; i0++) {
                    double v = in_at(&c, a, i0, i1, i2, i3);
                    sum += v;
                    sq += v * v;
                }
                mean = sum / (double)ne[0];
                for (i0 = 0; i0 < ne[0]; i0++) var += pow(in_at(&c, a, i0, i1, i2, i3) - mean, 2) / (double)ne[0];
                for (i0 = 0; i0 < ne[0]; i0++) {
                    double v = in_at(&c, a, i0, i1, i2, i3);
                    rn[AT(ne, i0, i1, i2, i3)] = (v - mean) / sqrt(var + NORM_EPS);
                    rr[AT(ne, i0, i1, i2, i3)] = v / sqrt(sq / (double)ne[0] + RMS_EPS);
                }
            }
            check(&c, "mms_norm", n, ne, cfg[k].type, rn, tol_for(cfg[k].type, 1e-12));
            check(&c, "mms_rms_norm", r, ne, cfg[k].type, rr, tol_for(cfg[k].type, 1e-12));
        }
        case_end(&c);
    }
}

/* ---- mul_mat, with batch broadcasting (grouped-query shapes) ---- */

static void test_mul_mat(void) {
    static const struct cfg2 cfg[] = {
        { F32,  { 33, 7, 2, 3 },   CONTIG,     F32,  { 33, 5, 4, 3 },   CONTIG },     /* b.ne[2] = 2 a.ne[2] */
        { F32,  { 16, 33, 2, 1 },  STRIDED,    F32,  { 16, 7, 8, 2 },   PERMUTED },   /* 4 heads per KV head, b.ne[3] = 2 a.ne[3] */
        { F16,  { 64, 33, 2, 1 },  TRANSPOSED, F32,  { 64, 7, 4, 1 },   CONTIG },
        { BF16, { 33, 7, 1, 2 },   CONTIG,     F32,  { 33, 1, 3, 2 },   STRIDED },
        { F32,  { 1601, 9, 1, 1 }, CONTIG,     F32,  { 1601, 5, 1, 1 }, TRANSPOSED }, /* K = 1601 */
        { F32,  { 16, 1601, 1, 1 }, RESHAPED,  F16,  { 16, 7, 1, 1 },   CONTIG },     /* M = 1601 */
        { F32,  { 8, 5, 1, 1 },    PERMUTED,   F32,  { 8, 1601, 1, 1 }, CONTIG },     /* N = 1601 */
        { F32,  { 1, 7, 1, 1 },    CONTIG,     F32,  { 1, 3, 1, 1 },    CONTIG },     /* K = 1 */
        { F16,  { 7, 1, 1, 1 },    CONTIG,     BF16, { 7, 1, 1, 1 },    STRIDED },    /* M = N = 1 */
        { F32,  { 40, 130, 2, 1 }, TRANSPOSED, F16,  { 40, 100, 4, 1 }, CONTIG },     /* several tiles of M, N and batch */
        { F32,  { 0, 5, 1, 1 },    CONTIG,     F32,  { 0, 3, 1, 1 },    CONTIG },     /* K = 0: zeros */
        /* the AVX2 paths: f16/f32 weights with N <= 8 take dot products (f16 converted inside the
           dot; 2 rows x 4 columns, then 4 rows x 1; AVX-512's cases below), N > 8 the packed GEMM
           (panels of 16 rows of a, blocks of 6 rows of b, partial ones at the edges) */
        { F16,  { 1601, 33, 1, 1 }, CONTIG,    F32,  { 1601, 2, 1, 1 }, CONTIG },     /* f16 GEMV, K with a tail */
        { F16,  { 64, 9, 1, 1 },   CONTIG,     F32,  { 64, 4, 1, 1 },   STRIDED },    /* N = 4: 2 x 4 blocks, tail rows */
        { F16,  { 1601, 22, 1, 1 }, CONTIG,    F32,  { 1601, 7, 1, 1 }, CONTIG },     /* N = 4 + 3, M = 20 + 2 */
        { F32,  { 203, 13, 2, 1 }, CONTIG,     F32,  { 203, 8, 4, 1 },  STRIDED },    /* f32 N = 8, broadcast */
        /* AVX-512: 4 rows x N <= 4 or 2 rows x N columns at once, 16 rows at a time, K in chunks of 256 past N = 2 */
        { F16,  { 1601, 37, 1, 1 }, CONTIG,    F32,  { 1601, 5, 1, 1 }, STRIDED },    /* M = 16 + 16 + 5, odd last pair */
        { F32,  { 520, 70, 1, 1 },  CONTIG,    F32,  { 520, 3, 1, 1 },  CONTIG },     /* tiles 64 + 6: a group of 4 rows with 2 */
        { F16,  { 1601, 20, 1, 1 }, CONTIG,    F32,  { 1601, 13, 1, 1 }, CONTIG },    /* GEMM: M = 16 + 4, N = 12 + 1 */
        { BF16, { 37, 70, 1, 1 },  CONTIG,     F32,  { 37, 53, 1, 1 },  STRIDED },    /* bf16 packed, N = 48 + 5 */
        /* bf16 weights on AVX-512 (vdpbf16ps, b rounded to bf16): 12-row blocks of b against 32 columns
           of a, masked at a tile's edge; K in pairs, an odd last one; a strided a packed element-wise */
        { BF16, { 64, 45, 2, 1 },  TRANSPOSED, F32,  { 64, 25, 4, 1 },  CONTIG },     /* M = 32 + 13, N = 2 x 12 + 1 */
        { BF16, { 1, 20, 1, 1 },   CONTIG,     F32,  { 1, 9, 1, 1 },    PERMUTED },   /* K = 1: one pair, half zero */
        { BF16, { 520, 300, 1, 1 }, CONTIG,    BF16, { 520, 13, 1, 1 }, STRIDED },    /* tiles of 256 + 44 rows, K in chunks
                                                                                          of 128 pairs + 4, bf16 b (exact) */
        { BF16, { 130, 16, 1, 1 }, STRIDED,    F32,  { 130, 5, 1, 1 },  CONTIG },     /* N = 5: the first GEMM size */
        { F32,  { 19, 64, 3, 1 },  STRIDED,    F32,  { 19, 96, 6, 1 },  PERMUTED },   /* whole panels and blocks, broadcast */
    };
    size_t k;
    for (k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        struct tcase c;
        struct mms_tensor *a, *b, *out;
        const int64_t *na = cfg[k].na, *nb = cfg[k].nb;
        case_begin(&c);
        a = tensor_rand(&c, cfg[k].ta, na, cfg[k].la, -1, 1);
        b = tensor_rand(&c, cfg[k].tb, nb, cfg[k].lb, -1, 1);
        case_label(&c, "a %s b %s", desc(&c, a), desc(&c, b));
        out = case_out(&c, mms_mul_mat(c.ctx, a, b));
        if (case_compute(&c)) {
            const int64_t ne[4] = { na[1], nb[1], nb[2], nb[3] }, r2 = nb[2] / na[2], r3 = nb[3] / na[3];
            /* the manual's rule: bf16 weights on the avx512 set round b to bf16 past N = 4 */
            const bool b_bf16 = cfg[k].ta == BF16 && nb[1] > 4 && mms_cpu_get_kernels() == MMS_CPU_KERNELS_AVX512;
            double *ref = ref_new(ne), *terms_sq = ref_new(ne);
            int64_t i0, i1, i2, i3, kk;
            FOR4(ne) {
                double s = 0.0, sq = 0.0;
                for (kk = 0; kk < na[0]; kk++) {
                    const double bv = in_at(&c, b, kk, i1, i2, i3);
                    const double term = in_at(&c, a, kk, i0, i2 / r2, i3 / r3) * (b_bf16 ? round_to(BF16, bv) : bv);
                    s += term;
                    sq += term * term;
                }
                ref[AT(ne, i0, i1, i2, i3)] = s;
                terms_sq[AT(ne, i0, i1, i2, i3)] = sq;
            }
            check_scaled(&c, "mms_mul_mat", out, ne, F32, ref, terms_sq, 1e-8);
        }
        case_end(&c);
    }
}

/* A column of a product does not depend on the columns computed with it (a decode step of several
   sequences gives each the bits it gets alone): N = 1..8 against the N = 1 products, to the bit,
   for the weight types with a direct decode path (up to 8 columns; past that the GEMM sums in
   another order). */
static void test_mul_mat_columns(void) {
    static const enum mms_type types[] = { MMS_TYPE_F16, MMS_TYPE_F32 };
    static const int64_t shapes[2][2] = { { 203, 22 }, { 1000, 37 } };   /* K, M: the second with K in chunks (AVX-512),
                                                                             rows in blocks of 16 and an odd last one */
    size_t ti;
    for (ti = 0; ti < 2 * sizeof types / sizeof types[0]; ti++) {
        const int64_t K = shapes[ti % 2][0], M = shapes[ti % 2][1];
        const int64_t na[4] = { K, M, 1, 1 }, nb[4] = { K, 8, 1, 1 };
        struct tcase c;
        struct mms_tensor *a, *b, *wide[8], *alone[8];
        int n, j;
        case_begin(&c);
        a = tensor_rand(&c, types[ti / 2], na, CONTIG, -1, 1);
        b = tensor_rand(&c, MMS_TYPE_F32, nb, CONTIG, -1, 1);
        case_label(&c, "a %s b %s", desc(&c, a), desc(&c, b));
        for (n = 1; n <= 8; n++) wide[n - 1] = case_out(&c, mms_mul_mat(c.ctx, a, mms_view_2d(c.ctx, b, nb[0], n, b->nb[1], 0)));
        for (j = 0; j < 8; j++) alone[j] = case_out(&c, mms_mul_mat(c.ctx, a, mms_view_2d(c.ctx, b, nb[0], 1, b->nb[1], (size_t)j * b->nb[1])));
        if (case_compute(&c)) {
            int bad = 0;
            for (n = 1; n <= 8; n++)
                for (j = 0; j < n; j++) {
                    float x[37], y[37];
                    const size_t bytes = (size_t)M * sizeof(float);
                    mms_backend_tensor_get(wide[n - 1], x, (size_t)j * wide[n - 1]->nb[1], bytes);
                    mms_backend_tensor_get(alone[j], y, 0, bytes);
                    if (memcmp(x, y, bytes) != 0) { bad++; if (g_verbose) printf("    n %d column %d: %.9g %.9g, %.9g %.9g\n", n, j, x[0], y[0], x[M - 1], y[M - 1]); }
                }
            EXPECT(bad == 0, "%s: %d columns of the N = 1..8 products differ from the column alone", c.label, bad);
        }
        case_end(&c);
    }
}

/* ---- soft_max_ext: scale, mask with -INFINITY, broadcast over dims 2/3 ---- */

static void test_soft_max(void) {
    static const struct {
        enum mms_type ta; int64_t na[4]; enum layout la;
        enum mms_type tm; int64_t nm[4]; enum layout lm;   /* tm 0: no mask */
        float scale; bool plain;                           /* plain: mms_soft_max */
    } cfg[] = {
        { F32,  { 33, 7, 4, 2 },   CONTIG,     F32, { 33, 9, 2, 1 },   CONTIG,  0.7f, false },
        { F32,  { 1601, 3, 1, 1 }, STRIDED,    F16, { 1601, 4, 1, 1 }, CONTIG,  1.3f, false },
        { F16,  { 64, 5, 2, 1 },   CONTIG,     0,   { 0, 0, 0, 0 },    CONTIG,  1.0f, true },
        { BF16, { 7, 33, 1, 1 },   TRANSPOSED, F16, { 7, 33, 1, 1 },   STRIDED, 0.5f, false },
        { F32,  { 1, 3, 2, 1 },    PERMUTED,   F32, { 1, 3, 1, 1 },    CONTIG,  2.0f, false },
        { F32,  { 1601, 5, 2, 1 }, CONTIG,     F32, { 1601, 5, 1, 1 }, CONTIG,  0.3f, false },   /* mask read in place */
    };
    size_t k;
    for (k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        struct tcase c;
        struct mms_tensor *a, *mask = NULL, *out;
        const int64_t *ne = cfg[k].na, *nm = cfg[k].nm;
        case_begin(&c);
        a = tensor_rand(&c, cfg[k].ta, ne, cfg[k].la, -5, 5);
        if (cfg[k].tm) {
            int64_t i, n = nelem(nm);
            mask = tensor_rand(&c, cfg[k].tm, nm, cfg[k].lm, -2, 0);
            for (i = 0; i < n; i++) if (test_rand_int(0, 4) == 0) in_set_flat(&c, mask, i, -INFINITY);
            for (i = 0; i < nm[0]; i++) in_set(&c, mask, i, 1, 0, 0, -INFINITY);   /* a fully masked row */
        }
        case_label(&c, "a %s mask %s scale %g", desc(&c, a), mask ? desc(&c, mask) : "none", (double)cfg[k].scale);
        out = case_out(&c, cfg[k].plain ? mms_soft_max(c.ctx, a) : mms_soft_max_ext(c.ctx, a, mask, cfg[k].scale, 0.0f));
        if (case_compute(&c)) {
            double *ref = ref_new(ne), *row = (double *)malloc((size_t)ne[0] * sizeof *row);
            int64_t i0, i1, i2, i3;
            for (i3 = 0; i3 < ne[3]; i3++) for (i2 = 0; i2 < ne[2]; i2++) for (i1 = 0; i1 < ne[1]; i1++) {
                double max = -INFINITY, sum = 0.0;
                for (i0 = 0; i0 < ne[0]; i0++) {
                    row[i0] = cfg[k].scale * in_at(&c, a, i0, i1, i2, i3) +
                              (mask ? in_at(&c, mask, i0, i1, i2 % nm[2], i3 % nm[3]) : 0.0);
                    if (row[i0] > max) max = row[i0];
                }
                for (i0 = 0; i0 < ne[0]; i0++) sum += max == -INFINITY ? 0.0 : exp(row[i0] - max);
                for (i0 = 0; i0 < ne[0]; i0++)
                    ref[AT(ne, i0, i1, i2, i3)] = max == -INFINITY ? 0.0 : exp(row[i0] - max) / sum;
            }
            free(row);
            check(&c, "mms_soft_max_ext", out, ne, cfg[k].ta, ref, tol_for(cfg[k].ta, 1e-9));
        }
        case_end(&c);
    }
}

/* ---- rope_ext ---- */

static void test_rope(void) {
    static const struct {
        enum mms_type type; int64_t ne[4]; enum layout lay;
        int mode, n_dims; bool ff; float base, fscale, attn; enum layout lpos;
    } cfg[] = {
        { F32,  { 64, 3, 5, 1 },  CONTIG,     MMS_ROPE_TYPE_NORMAL, 64, false, 10000.0f,  1.0f,  1.0f, CONTIG },
        { F32,  { 64, 4, 7, 1 },  PERMUTED,   MMS_ROPE_TYPE_NEOX,   32, true,  500000.0f, 0.25f, 1.2f, STRIDED },
        { F16,  { 48, 2, 3, 1 },  STRIDED,    MMS_ROPE_TYPE_NORMAL, 16, true,  10000.0f,  0.5f,  0.9f, CONTIG },
        { BF16, { 32, 2, 33, 1 }, TRANSPOSED, MMS_ROPE_TYPE_NEOX,   32, false, 10000.0f,  1.0f,  1.0f, CONTIG },
        { F32,  { 6, 1, 1, 1 },   CONTIG,     MMS_ROPE_TYPE_NEOX,   2,  true,  100.0f,    1.0f,  1.0f, CONTIG },
    };
    size_t k;
    for (k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        struct tcase c;
        struct mms_tensor *a, *pos, *ff = NULL, *out;
        const int64_t *ne = cfg[k].ne;
        const int nd = cfg[k].n_dims, half = nd / 2;
        case_begin(&c);
        a = tensor_rand(&c, cfg[k].type, ne, cfg[k].lay, -1, 1);
        pos = tensor_rand(&c, I32, SHAPE(ne[2], 1, 1, 1), cfg[k].lpos, 0, 512);
        if (cfg[k].ff) ff = tensor_rand(&c, F32, SHAPE(half, 1, 1, 1), CONTIG, 1, 8);
        case_label(&c, "a %s %s n_dims %d%s scale %g attn %g", desc(&c, a), cfg[k].mode == MMS_ROPE_TYPE_NEOX ? "neox" : "normal",
                   nd, ff ? " freq_factors" : "", (double)cfg[k].fscale, (double)cfg[k].attn);
        out = case_out(&c, mms_rope_ext(c.ctx, a, pos, ff, nd, cfg[k].mode, 4096, cfg[k].base, cfg[k].fscale, 0.0f,
                                        cfg[k].attn, 32.0f, 1.0f));
        if (case_compute(&c)) {
            double *ref = ref_new(ne);
            int64_t i0, i1, i2, i3, i;
            FOR4(ne) ref[AT(ne, i0, i1, i2, i3)] = in_at(&c, a, i0, i1, i2, i3);   /* dims past n_dims pass through */
            for (i3 = 0; i3 < ne[3]; i3++) for (i2 = 0; i2 < ne[2]; i2++) for (i1 = 0; i1 < ne[1]; i1++) {
                for (i = 0; i < half; i++) {
                    double theta = in_at(&c, pos, i2, 0, 0, 0) * cfg[k].fscale * pow(cfg[k].base, -2.0 * (double)i / nd) /
                                   (ff ? in_at(&c, ff, i, 0, 0, 0) : 1.0);
                    int64_t j0 = cfg[k].mode == MMS_ROPE_TYPE_NEOX ? i : 2 * i;
                    int64_t j1 = cfg[k].mode == MMS_ROPE_TYPE_NEOX ? i + half : 2 * i + 1;
                    double x0 = in_at(&c, a, j0, i1, i2, i3), x1 = in_at(&c, a, j1, i1, i2, i3);
                    ref[AT(ne, j0, i1, i2, i3)] = cfg[k].attn * (x0 * cos(theta) - x1 * sin(theta));
                    ref[AT(ne, j1, i1, i2, i3)] = cfg[k].attn * (x0 * sin(theta) + x1 * cos(theta));
                }
            }
            check(&c, "mms_rope_ext", out, ne, cfg[k].type, ref, tol_for(cfg[k].type, 1e-8));
        }
        case_end(&c);
    }
}

/* ---- concat (every dim, f32/f16/i32) and pad ---- */

static void test_concat(void) {
    static const enum mms_type types[3] = { F32, F16, I32 };
    static const enum layout lays[5] = { CONTIG, STRIDED, TRANSPOSED, PERMUTED, RESHAPED };
    int dim, t;
    for (dim = 0; dim < 4; dim++) {
        for (t = 0; t < 3; t++) {
            struct tcase c;
            struct mms_tensor *a, *b, *out;
            int64_t na[4] = { 5, 3, 2, 2 }, nb[4] = { 5, 3, 2, 2 }, ne[4];
            const enum mms_type type = types[t];
            case_begin(&c);
            nb[dim] = dim == 3 ? 1 : 4;
            a = tensor_rand(&c, type, na, lays[(dim + t) % 5], -1000, 1000);
            b = tensor_rand(&c, type, nb, lays[(dim + 2 * t + 1) % 5], -1000, 1000);
            case_label(&c, "a %s b %s dim %d", desc(&c, a), desc(&c, b), dim);
            out = case_out(&c, mms_concat(c.ctx, a, b, dim));
            memcpy(ne, na, sizeof ne);
            ne[dim] += nb[dim];
            if (case_compute(&c)) {
                double *ref = ref_new(ne);
                int64_t i0, i1, i2, i3;
                FOR4(ne) {
                    int64_t j[4];
                    j[0] = i0; j[1] = i1; j[2] = i2; j[3] = i3;
                    if (j[dim] < na[dim]) {
                        ref[AT(ne, i0, i1, i2, i3)] = in_at(&c, a, j[0], j[1], j[2], j[3]);
                    } else {
                        j[dim] -= na[dim];
                        ref[AT(ne, i0, i1, i2, i3)] = in_at(&c, b, j[0], j[1], j[2], j[3]);
                    }
                }
                check(&c, "mms_concat", out, ne, type, ref, 0.0);
            }
            case_end(&c);
        }
    }
}

static void test_pad(void) {
    static const struct { enum mms_type type; int64_t ne[4]; enum layout lay; int p[4]; } cfg[] = {
        { F32,  { 5, 3, 2, 1 },  CONTIG,     { 2, 1, 0, 3 } },
        { F16,  { 7, 4, 1, 2 },  PERMUTED,   { 0, 0, 2, 1 } },
        { BF16, { 1, 1, 1, 1 },  CONTIG,     { 3, 2, 1, 0 } },
        { F32,  { 33, 2, 1, 1 }, TRANSPOSED, { 1, 0, 0, 0 } },
    };
    size_t k;
    for (k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        struct tcase c;
        struct mms_tensor *a, *out;
        const int64_t *na = cfg[k].ne;
        const int *p = cfg[k].p;
        const int64_t ne[4] = { na[0] + p[0], na[1] + p[1], na[2] + p[2], na[3] + p[3] };
        case_begin(&c);
        a = tensor_rand(&c, cfg[k].type, na, cfg[k].lay, -1, 1);
        case_label(&c, "a %s pad %d,%d,%d,%d", desc(&c, a), p[0], p[1], p[2], p[3]);
        out = case_out(&c, mms_pad(c.ctx, a, p[0], p[1], p[2], p[3]));
        if (case_compute(&c)) {
            double *ref = ref_new(ne);
            int64_t i0, i1, i2, i3;
            FOR4(ne) ref[AT(ne, i0, i1, i2, i3)] = i0 < na[0] && i1 < na[1] && i2 < na[2] && i3 < na[3]
                                                 ? in_at(&c, a, i0, i1, i2, i3) : 0.0;
            check(&c, "mms_pad", out, ne, cfg[k].type, ref, 0.0);
        }
        case_end(&c);
    }
}

/* ---- repeat: a tiled over b's shape (indices modulo a's shape), any type ---- */

static void test_repeat(void) {
    static const struct { enum mms_type type; int64_t na[4], nb[4]; enum layout lay; } cfg[] = {
        { F32,  { 5, 1, 3, 1 }, { 10, 4, 3, 2 }, CONTIG },
        { F16,  { 1, 1, 1, 1 }, { 7, 33, 1, 1 }, CONTIG },
        { I32,  { 3, 2, 1, 1 }, { 3, 6, 2, 1 },  CONTIG },
        { BF16, { 4, 3, 2, 1 }, { 8, 3, 4, 2 },  PERMUTED },
    };
    size_t k;
    for (k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        struct tcase c;
        struct mms_tensor *a, *shape, *out;
        const int64_t *na = cfg[k].na, *ne = cfg[k].nb;
        case_begin(&c);
        a = tensor_rand(&c, cfg[k].type, na, cfg[k].lay, -1, 1);
        shape = mms_new_tensor_4d(c.ctx, F32, ne[0], ne[1], ne[2], ne[3]);
        case_label(&c, "a %s over [%lld,%lld,%lld,%lld]", desc(&c, a), (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3]);
        out = case_out(&c, mms_repeat(c.ctx, a, shape));
        if (case_compute(&c)) {
            double *ref = ref_new(ne);
            int64_t i0, i1, i2, i3;
            FOR4(ne) ref[AT(ne, i0, i1, i2, i3)] = in_at(&c, a, i0 % na[0], i1 % na[1], i2 % na[2], i3 % na[3]);
            check(&c, "mms_repeat", out, ne, cfg[k].type, ref, 0.0);
        }
        case_end(&c);
    }
}

/* ---- get_rows (f32/f16/bf16/i32 sources, 1-D to 3-D indices) ---- */

static void test_get_rows(void) {
    static const struct { enum mms_type ta; int64_t na[4]; enum layout la; int64_t ni[4]; enum layout li; } cfg[] = {
        { F32,  { 33, 10, 2, 1 }, CONTIG,     { 7, 2, 1, 1 }, CONTIG },
        { F32,  { 16, 10, 2, 3 }, TRANSPOSED, { 5, 2, 3, 1 }, STRIDED },     /* 3-D indices */
        { F16,  { 64, 50, 1, 1 }, STRIDED,    { 9, 1, 1, 1 }, CONTIG },
        { I32,  { 3, 20, 2, 1 },  CONTIG,     { 4, 2, 1, 1 }, PERMUTED },
        { BF16, { 8, 6, 1, 1 },   PERMUTED,   { 6, 1, 1, 1 }, RESHAPED },
    };
    size_t k;
    for (k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        struct tcase c;
        struct mms_tensor *a, *idx, *out;
        const int64_t *na = cfg[k].na, *ni = cfg[k].ni;
        const int64_t ne[4] = { na[0], ni[0], ni[1], ni[2] };
        const enum mms_type tout = cfg[k].ta == I32 ? I32 : F32;
        case_begin(&c);
        a = tensor_rand(&c, cfg[k].ta, na, cfg[k].la, -100, 100);
        idx = tensor_rand(&c, I32, ni, cfg[k].li, 0, (double)(na[1] - 1));
        case_label(&c, "a %s idx %s", desc(&c, a), desc(&c, idx));
        out = case_out(&c, mms_get_rows(c.ctx, a, idx));
        if (case_compute(&c)) {
            double *ref = ref_new(ne);
            int64_t i0, i1, i2, i3;
            FOR4(ne) ref[AT(ne, i0, i1, i2, i3)] = in_at(&c, a, i0, (int64_t)in_at(&c, idx, i1, i2, i3, 0), i2, i3);
            check(&c, "mms_get_rows", out, ne, tout, ref, 0.0);
        }
        case_end(&c);
    }

    {   /* an index out of range is a compute error that names the op, not a crash */
        struct tcase c;
        const char *why;
        struct mms_tensor *a, *idx;
        enum mms_status st;
        case_begin(&c);
        a = tensor_rand(&c, F32, SHAPE(4, 10, 1, 1), CONTIG, -1, 1);
        idx = tensor_rand(&c, I32, SHAPE(3, 1, 1, 1), CONTIG, 0, 9);
        in_set(&c, idx, 1, 0, 0, 0, 10);
        case_label(&c, "a %s idx %s with index 10", desc(&c, a), desc(&c, idx));
        case_out(&c, mms_get_rows(c.ctx, a, idx));
        test_capture_log();
        st = case_compute_status(&c, &why);
        mms_log_set(NULL, NULL);
        EXPECT(st == MMS_ERR_INVALID_ARG && strstr(why, "GET_ROWS") && strstr(why, "index 10"),
               "get_rows %s: status %s, message '%s'", c.label, mms_status_string(st), why);
        case_end(&c);
    }
}

/* ---- copies: cpy (conversions, views of the destination, reshaping), dup, cont ---- */

/* ref[k] = the k-th element of a in logical order, as stored in type. */
static double *ref_flat_copy(const struct tcase *c, const struct mms_tensor *a, enum mms_type type) {
    int64_t k, n = nelem(a->ne);
    double *ref = (double *)malloc((size_t)n * sizeof *ref);
    for (k = 0; k < n; k++) ref[k] = round_to(type, in_flat(c, a, k));
    return ref;
}

/* After a cpy into a view, the bytes of the destination outside the view must still be poison. */
static void check_untouched(const struct tcase *c, const struct mms_tensor *view) {
    const struct tin *x = find(c, view);
    unsigned char *bytes = fetch(x->root, x->size), *covered = (unsigned char *)calloc(x->size, 1);
    int64_t i0, i1, i2, i3, changed = 0;
    size_t i;
    FOR4(view->ne) memset(covered + elem_offset(x, i0, i1, i2, i3), 1, type_size(view->type));
    for (i = 0; i < x->size; i++) if (!covered[i] && bytes[i] != 0xFF) changed++;
    EXPECT(changed == 0, "mms_cpy %s: %lld bytes of the destination outside the view were written", c->label, (long long)changed);
    free(bytes);
    free(covered);
}

static void test_cpy(void) {
    static const struct cfg2 cfg[] = {
        { F32,  { 33, 7, 2, 1 }, CONTIG,     F16,  { 33, 7, 2, 1 },  CONTIG },
        { F16,  { 33, 7, 2, 1 }, PERMUTED,   F32,  { 33, 7, 2, 1 },  CONTIG },
        { BF16, { 16, 5, 1, 1 }, CONTIG,     F32,  { 16, 5, 1, 1 },  TRANSPOSED },  /* into a transposed view */
        { F32,  { 7, 33, 1, 1 }, TRANSPOSED, BF16, { 7, 33, 1, 1 },  STRIDED },     /* into a strided view */
        { F32,  { 40, 3, 1, 1 }, CONTIG,     BF16, { 40, 3, 1, 1 },  CONTIG },      /* the corner cases in one row (SIMD) */
        { F16,  { 9, 4, 3, 1 },  STRIDED,    BF16, { 9, 4, 3, 1 },   PERMUTED },
        { BF16, { 9, 4, 3, 1 },  RESHAPED,   F16,  { 9, 4, 3, 1 },   CONTIG },
        { F32,  { 6, 35, 1, 1 }, CONTIG,     F32,  { 15, 14, 1, 1 }, STRIDED },     /* other shape, same count */
        { F32,  { 12, 5, 2, 1 }, PERMUTED,   F16,  { 12, 10, 1, 1 }, CONTIG },
        { I32,  { 5, 6, 1, 1 },  STRIDED,    I32,  { 30, 1, 1, 1 },  CONTIG },
        { I32,  { 4, 6, 2, 1 },  PERMUTED,   I32,  { 4, 6, 2, 1 },   TRANSPOSED },  /* same type, strided rows */
        { F16,  { 1601, 1, 1, 1 }, CONTIG,   F32,  { 1, 1601, 1, 1 }, CONTIG },
    };
    /* rounding corner cases for the f32 sources: f16 ties (normal and subnormal), subnormals and
       overflow; bf16 ties, overflow and f32 subnormals */
    static const double special[] = { 1.0 + 1.0 / 2048, -(1.0 + 3.0 / 2048), -1.5 / 16777216.0, 1.0 / 33554432.0,
                                      1e-7, 3.0e-5, 6.1e-5, 65519.0, 65520.0, -1e5, 1.0 + 1.0 / 256, 1.0 + 3.0 / 256,
                                      3.4e38, 1e-40, NAN, -INFINITY };
    size_t k, s;
    for (k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        struct tcase c;
        struct mms_tensor *a, *b, *out;
        case_begin(&c);
        a = tensor_rand(&c, cfg[k].ta, cfg[k].na, cfg[k].la, -3, 3);
        b = tensor_dst(&c, cfg[k].tb, cfg[k].nb, cfg[k].lb);
        if (cfg[k].ta == F32)
            for (s = 0; s < sizeof special / sizeof special[0]; s++) in_set_flat(&c, a, (int64_t)s * 2, special[s]);
        case_label(&c, "a %s -> b %s", desc(&c, a), desc(&c, b));
        out = case_out(&c, mms_cpy(c.ctx, a, b));
        if (case_compute(&c)) {
            check(&c, "mms_cpy", out, cfg[k].nb, cfg[k].tb, ref_flat_copy(&c, a, cfg[k].tb), 0.0);
            check_untouched(&c, b);
        }
        case_end(&c);
    }
}

static void test_dup_cont(void) {
    enum kind { DUP, CONT, CONT2, CONT3, CONT4 };
    static const struct { enum kind kind; enum mms_type type; int64_t ne[4]; enum layout lay; int64_t to[4]; } cfg[] = {
        { DUP,   F32,  { 5, 7, 3, 2 },  PERMUTED,   { 5, 7, 3, 2 } },
        { CONT,  F16,  { 33, 7, 1, 1 }, TRANSPOSED, { 33, 7, 1, 1 } },
        { CONT2, F32,  { 4, 6, 5, 1 },  PERMUTED,   { 12, 10, 1, 1 } },
        { CONT3, BF16, { 6, 4, 5, 1 },  STRIDED,    { 10, 3, 4, 1 } },
        { CONT4, I32,  { 3, 4, 5, 2 },  PERMUTED,   { 2, 5, 4, 3 } },
        { CONT,  F32,  { 1, 1, 1, 1 },  RESHAPED,   { 1, 1, 1, 1 } },
    };
    static const char *const names[] = { "mms_dup", "mms_cont", "mms_cont_2d", "mms_cont_3d", "mms_cont_4d" };
    size_t k;
    for (k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        struct tcase c;
        struct mms_tensor *a, *out = NULL;
        const int64_t *to = cfg[k].to;
        case_begin(&c);
        a = tensor_rand(&c, cfg[k].type, cfg[k].ne, cfg[k].lay, -1000, 1000);
        case_label(&c, "a %s", desc(&c, a));
        switch (cfg[k].kind) {
            case DUP:   out = mms_dup(c.ctx, a); break;
            case CONT:  out = mms_cont(c.ctx, a); break;
            case CONT2: out = mms_cont_2d(c.ctx, a, to[0], to[1]); break;
            case CONT3: out = mms_cont_3d(c.ctx, a, to[0], to[1], to[2]); break;
            case CONT4: out = mms_cont_4d(c.ctx, a, to[0], to[1], to[2], to[3]); break;
        }
        case_out(&c, out);
        if (case_compute(&c)) check(&c, names[cfg[k].kind], out, to, cfg[k].type, ref_flat_copy(&c, a, cfg[k].type), 0.0);
        case_end(&c);
    }
}

/* ---- set_rows: rows of a written from b at indices ---- */

static void test_set_rows(void) {
    static const struct { enum mms_type ta, tb; int64_t na[4]; enum layout la; int64_t n; enum layout lb; } cfg[] = {
        { F32, F32, { 6, 10, 2, 1 }, CONTIG,  4, CONTIG },
        { F16, F32, { 64, 300, 1, 1 }, STRIDED, 3, PERMUTED },      /* a KV cache in f16, rows of an f32 batch */
        { BF16, F16, { 5, 7, 3, 2 }, CONTIG,  7, STRIDED },
    };
    size_t k;
    for (k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        struct tcase c;
        struct mms_tensor *a, *b, *rows, *out;
        const int64_t *na = cfg[k].na, nb[4] = { na[0], cfg[k].n, na[2], na[3] };
        int64_t i;
        case_begin(&c);
        a = tensor_rand(&c, cfg[k].ta, na, cfg[k].la, -1, 1);
        b = tensor_rand(&c, cfg[k].tb, nb, cfg[k].lb, -2, 2);
        rows = tensor_rand(&c, I32, SHAPE(cfg[k].n, 1, 1, 1), CONTIG, 0, 0);
        for (i = 0; i < cfg[k].n; i++) in_set(&c, rows, i, 0, 0, 0, (double)((i * 7 + 3) % na[1]));   /* distinct rows */
        case_label(&c, "a %s b %s rows %s", desc(&c, a), desc(&c, b), desc(&c, rows));
        out = case_out(&c, mms_set_rows(c.ctx, a, b, rows));
        if (case_compute(&c)) {
            double *ref = ref_new(na);
            int64_t i0, i1, i2, i3;
            FOR4(na) ref[AT(na, i0, i1, i2, i3)] = in_at(&c, a, i0, i1, i2, i3);
            for (i3 = 0; i3 < na[3]; i3++) for (i2 = 0; i2 < na[2]; i2++) for (i1 = 0; i1 < cfg[k].n; i1++) for (i0 = 0; i0 < na[0]; i0++)
                ref[AT(na, i0, (int64_t)in_at(&c, rows, i1, 0, 0, 0), i2, i3)] = round_to(cfg[k].ta, in_at(&c, b, i0, i1, i2, i3));
            check(&c, "mms_set_rows", out, na, cfg[k].ta, ref, 0.0);
        }
        case_end(&c);
    }
    {   /* an index out of range is a compute error that names the op, not a crash */
        struct tcase c;
        const char *why;
        struct mms_tensor *a, *b, *rows;
        enum mms_status st;
        case_begin(&c);
        a = tensor_rand(&c, F32, SHAPE(4, 10, 1, 1), CONTIG, -1, 1);
        b = tensor_rand(&c, F32, SHAPE(4, 3, 1, 1), CONTIG, -1, 1);
        rows = tensor_rand(&c, I32, SHAPE(3, 1, 1, 1), CONTIG, 0, 9);
        in_set(&c, rows, 2, 0, 0, 0, 10);
        case_label(&c, "rows %s with index 10", desc(&c, rows));
        case_out(&c, mms_set_rows(c.ctx, a, b, rows));
        test_capture_log();
        st = case_compute_status(&c, &why);
        mms_log_set(NULL, NULL);
        EXPECT(st == MMS_ERR_INVALID_ARG && strstr(why, "SET_ROWS") && strstr(why, "index 10"),
               "set_rows %s: status %s, message '%s'", c.label, mms_status_string(st), why);
        case_end(&c);
    }
}

/* ---- cast: a new contiguous tensor of another float type ---- */

static void test_cast(void) {
    static const struct { enum mms_type from, to; int64_t ne[4]; enum layout lay; } cfg[] = {
        { F32, F16,  { 7, 5, 3, 1 }, PERMUTED },
        { F32, BF16, { 9, 4, 1, 2 }, STRIDED },
        { F16, F32,  { 33, 2, 1, 1 }, TRANSPOSED },
        { BF16, F16, { 5, 6, 1, 1 }, CONTIG },
    };
    size_t k;
    for (k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        struct tcase c;
        struct mms_tensor *a, *out;
        case_begin(&c);
        a = tensor_rand(&c, cfg[k].from, cfg[k].ne, cfg[k].lay, -300, 300);
        case_label(&c, "a %s to %s", desc(&c, a), type_str(cfg[k].to));
        out = case_out(&c, mms_cast(c.ctx, a, cfg[k].to));
        if (case_compute(&c)) check(&c, "mms_cast", out, cfg[k].ne, cfg[k].to, ref_flat_copy(&c, a, cfg[k].to), 0.0);
        case_end(&c);
    }
}

/* ---- im2col (2-D and 1-D) and conv_2d ---- */

static int64_t conv_out(int64_t in, int64_t k, int s, int p, int d) { return (in + 2 * p - d * (k - 1) - 1) / s + 1; }

static void test_im2col(void) {
    static const struct {
        bool is_2D; int64_t nk[4]; enum mms_type tin; int64_t nin[4]; enum layout lin;
        int s0, s1, p0, p1, d0, d1; enum mms_type tdst;
    } cfg[] = {
        { true,  { 3, 3, 2, 4 }, F32,  { 9, 7, 2, 2 },  CONTIG,     2, 1, 1, 2, 1, 2, F32 },
        { true,  { 2, 3, 3, 1 }, F16,  { 8, 6, 3, 1 },  PERMUTED,   1, 2, 0, 1, 2, 1, F16 },
        { true,  { 3, 1, 1, 2 }, F32,  { 7, 5, 1, 3 },  STRIDED,    1, 1, 1, 0, 1, 1, F16 },  /* rounds to f16 */
        { true,  { 1, 2, 2, 1 }, BF16, { 5, 6, 2, 1 },  TRANSPOSED, 3, 2, 2, 1, 1, 3, F32 },
        { false, { 5, 3, 2, 1 }, F32,  { 33, 3, 2, 1 }, CONTIG,     2, 1, 2, 0, 1, 1, F32 },
        { false, { 3, 2, 1, 1 }, F16,  { 17, 2, 3, 1 }, TRANSPOSED, 1, 1, 0, 0, 3, 1, F16 },
    };
    size_t k;
    for (k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        struct tcase c;
        struct mms_tensor *kern, *in, *out;
        const int64_t *nk = cfg[k].nk, *nin = cfg[k].nin;
        const bool two = cfg[k].is_2D;
        const int64_t KW = nk[0], KH = two ? nk[1] : 1, IC = two ? nk[2] : nk[1];
        const int64_t OW = conv_out(nin[0], KW, cfg[k].s0, cfg[k].p0, cfg[k].d0);
        const int64_t OH = two ? conv_out(nin[1], KH, cfg[k].s1, cfg[k].p1, cfg[k].d1) : 1;
        const int64_t ne[4] = { IC * KH * KW, OW, two ? OH : nin[2], two ? nin[3] : 1 };
        case_begin(&c);
        kern = tensor_rand(&c, F16, nk, CONTIG, -1, 1);   /* only its shape is read */
        in = tensor_rand(&c, cfg[k].tin, nin, cfg[k].lin, -2, 2);
        case_label(&c, "%s kernel %s input %s s %d,%d p %d,%d d %d,%d", two ? "2-D" : "1-D", desc(&c, kern), desc(&c, in),
                   cfg[k].s0, cfg[k].s1, cfg[k].p0, cfg[k].p1, cfg[k].d0, cfg[k].d1);
        out = case_out(&c, mms_im2col(c.ctx, kern, in, cfg[k].s0, cfg[k].s1, cfg[k].p0, cfg[k].p1, cfg[k].d0, cfg[k].d1,
                                      two, cfg[k].tdst));
        if (case_compute(&c)) {
            double *ref = ref_new(ne);
            int64_t i0, i1, i2, i3;
            FOR4(ne) {   /* column i0 = (ic*KH + ky)*KW + kx; output position (i1, i2) or i1 with batch i2 */
                const int64_t kx = i0 % KW, ky = i0 / KW % KH, ic = i0 / (KW * KH);
                const int64_t ix = i1 * cfg[k].s0 + kx * cfg[k].d0 - cfg[k].p0;
                const int64_t iy = two ? i2 * cfg[k].s1 + ky * cfg[k].d1 - cfg[k].p1 : 0;
                double v = 0.0;
                if (ix >= 0 && ix < nin[0] && iy >= 0 && (!two || iy < nin[1]))
                    v = two ? in_at(&c, in, ix, iy, ic, i3) : in_at(&c, in, ix, ic, i2, 0);
                ref[AT(ne, i0, i1, i2, i3)] = round_to(cfg[k].tdst, v);
            }
            check(&c, "mms_im2col", out, ne, cfg[k].tdst, ref, 0.0);
        }
        case_end(&c);
    }
}

static void test_conv_2d(void) {
    static const struct {
        enum mms_type tk; int64_t nk[4]; enum layout lk; enum mms_type tin; int64_t nin[4]; enum layout lin;
        int s0, s1, p0, p1, d0, d1;
    } cfg[] = {
        { F32, { 3, 3, 3, 5 }, CONTIG,   F32,  { 10, 8, 3, 2 }, CONTIG,  1, 2, 1, 1, 1, 1 },
        { F16, { 2, 3, 2, 4 }, PERMUTED, F32,  { 9, 11, 2, 1 }, STRIDED, 2, 1, 0, 2, 2, 1 },  /* kernel needs a cont */
        { F32, { 1, 1, 4, 3 }, CONTIG,   BF16, { 5, 5, 4, 2 },  CONTIG,  1, 1, 0, 0, 1, 1 },
    };
    size_t k;
    for (k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        struct tcase c;
        struct mms_tensor *kern, *in, *out;
        const int64_t *nk = cfg[k].nk, *nin = cfg[k].nin;
        const int64_t ne[4] = { conv_out(nin[0], nk[0], cfg[k].s0, cfg[k].p0, cfg[k].d0),
                                conv_out(nin[1], nk[1], cfg[k].s1, cfg[k].p1, cfg[k].d1), nk[3], nin[3] };
        case_begin(&c);
        kern = tensor_rand(&c, cfg[k].tk, nk, cfg[k].lk, -1, 1);
        in = tensor_rand(&c, cfg[k].tin, nin, cfg[k].lin, -1, 1);
        case_label(&c, "kernel %s input %s s %d,%d p %d,%d d %d,%d", desc(&c, kern), desc(&c, in),
                   cfg[k].s0, cfg[k].s1, cfg[k].p0, cfg[k].p1, cfg[k].d0, cfg[k].d1);
        out = case_out(&c, mms_conv_2d(c.ctx, kern, in, cfg[k].s0, cfg[k].s1, cfg[k].p0, cfg[k].p1, cfg[k].d0, cfg[k].d1));
        if (case_compute(&c)) {
            double *ref = ref_new(ne);
            int64_t i0, i1, i2, i3, ic, ky, kx;
            FOR4(ne) {   /* direct convolution: output (x, y, oc, n) */
                double s = 0.0;
                for (ic = 0; ic < nk[2]; ic++) for (ky = 0; ky < nk[1]; ky++) for (kx = 0; kx < nk[0]; kx++) {
                    const int64_t ix = i0 * cfg[k].s0 + kx * cfg[k].d0 - cfg[k].p0, iy = i1 * cfg[k].s1 + ky * cfg[k].d1 - cfg[k].p1;
                    if (ix >= 0 && ix < nin[0] && iy >= 0 && iy < nin[1])
                        s += in_at(&c, kern, kx, ky, ic, i2) * in_at(&c, in, ix, iy, ic, i3);
                }
                ref[AT(ne, i0, i1, i2, i3)] = s;
            }
            check(&c, "mms_conv_2d", out, ne, F32, ref, 1e-9);
        }
        case_end(&c);
    }
}

/* ---- flash_attn_ext ---- */

static void test_flash_attn(void) {
    static const struct {
        int64_t D, Dv, n_q, H, Hkv, B, n_kv;
        enum mms_type tq, tkv; enum layout lq, lk, lv;
        enum mms_type tm; int64_t mh, mb;   /* mask type (0: none) and its dims 2, 3 (1 or H, 1 or B) */
        float scale, softcap;
        int64_t causal;                     /* > 0: also mask keys after query i + causal (whole key blocks masked) */
        int64_t mrows;                      /* > 0: a mask of this many rows, each query row picks one (mask_rows) */
    } cfg[] = {
        { 16, 16, 7, 4, 2, 2, 33,   F32, F32,  CONTIG,   CONTIG,     CONTIG,   F32, 1, 1, 0.25f, 0.0f, 0, 0 },
        { 8,  8,  3, 4, 1, 1, 1601, F32, F16,  PERMUTED, CONTIG,     STRIDED,  F16, 4, 1, 0.35f, 1.0f, 0, 0 },
        { 16, 12, 5, 4, 2, 1, 40,   F16, BF16, STRIDED,  TRANSPOSED, PERMUTED, 0,   1, 1, 0.25f, 0.0f, 0, 0 },
        { 64, 64, 1, 8, 2, 2, 129,  F32, F16,  CONTIG,   STRIDED,    CONTIG,   F32, 8, 2, 0.125f, 0.0f, 0, 0 },
        /* the tiled kernel: query blocks of 96 rows (grouped heads share one), key blocks of 128 */
        { 80, 80, 100, 2, 2, 1, 300, F32, F32, CONTIG,   STRIDED,    STRIDED,  0,   1, 1, 0.11f, 0.0f, 0, 0 },   /* K in place, V copied */
        { 80, 80, 50, 2, 2, 1, 260,  F32, F32, CONTIG,   CONTIG,     CONTIG,   F32, 1, 1, 0.11f, 0.0f, 0, 0 },   /* K and V in place */
        { 64, 48, 40, 8, 2, 1, 400,  F32, F16, STRIDED,  CONTIG,     CONTIG,   F16, 1, 1, 0.125f, 0.0f, 150, 0 }, /* causal, GQA 4 */
        { 128, 128, 1, 8, 2, 1, 1000, F32, F16, CONTIG,  CONTIG,     CONTIG,   F32, 1, 1, 0.09f, 0.0f, 700, 0 }, /* decode, unused cache */
        { 32, 40, 33, 2, 1, 2, 200,  F32, F32, CONTIG,   PERMUTED,   CONTIG,   F32, 2, 2, 0.2f, 2.0f, 0, 0 },    /* softcap, Dv % 16 != 0 */
        /* at most 8 rows per K/V head and f32 K/V: the rows read in place (the decode of a CPU cache) */
        { 128, 128, 1, 8, 2, 1, 1000, F32, F32, PERMUTED, STRIDED,   STRIDED,  F32, 1, 1, 0.09f, 0.0f, 700, 0 }, /* decode, unused cache */
        { 32, 40, 2, 4, 1, 2, 300,   F32, F32, STRIDED,  CONTIG,     STRIDED,  F16, 4, 2, 0.2f, 1.5f, 0, 0 },    /* 8 rows, softcap, Dv % 16 */
        { 48, 32, 3, 4, 2, 1, 150,   F32, F32, CONTIG,   CONTIG,     PERMUTED, F32, 1, 1, 0.15f, 0.0f, 0, 0 },    /* 6 rows: 4 at once + 2 */
        /* shared mask rows: the vision encoder's padding pattern (2 rows), and 3 random rows per head */
        { 80, 80, 120, 2, 2, 1, 120, F32, F32, CONTIG,   STRIDED,    STRIDED,  F16, 1, 1, 0.11f, 0.0f, 0, 2 },
        { 16, 16, 7, 4, 2, 2, 33,    F32, F16, CONTIG,   CONTIG,     CONTIG,   F32, 4, 1, 0.25f, 0.0f, 0, 3 },
        /* bf16 K/V (on avx512: both products on vdpbf16ps): the ViT's shapes with its padding mask, K in
           place, V gathered, an odd last key block (45 keys); causal GQA with an odd D and Dv = 40 */
        { 80, 80, 100, 2, 2, 1, 301, F32, BF16, CONTIG,  CONTIG,     STRIDED,  F16, 1, 1, 0.11f, 0.0f, 0, 2 },
        { 63, 40, 40, 8, 2, 1, 257,  F32, BF16, STRIDED, CONTIG,     CONTIG,   F32, 1, 1, 0.125f, 0.0f, 150, 0 },
        { 64, 64, 2, 8, 2, 1, 300,   F32, BF16, CONTIG,  CONTIG,     CONTIG,   F32, 1, 1, 0.125f, 0.0f, 0, 0 },     /* decode: 8 rows, f32 */
        /* a K/V head past the 8 MiB a thread packs whole: each query block packs its key blocks */
        { 256, 256, 12, 2, 1, 1, 8300, F32, BF16, CONTIG, CONTIG,    CONTIG,   0,   1, 1, 0.06f, 0.0f, 0, 0 },
    };
    size_t k;
    for (k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        struct tcase c;
        struct mms_tensor *q, *kt, *v, *mask = NULL, *rows = NULL, *out;
        const int64_t D = cfg[k].D, Dv = cfg[k].Dv, n_q = cfg[k].n_q, H = cfg[k].H, B = cfg[k].B, n_kv = cfg[k].n_kv;
        const int64_t nm[4] = { n_kv, cfg[k].mrows ? cfg[k].mrows : n_q + 1, cfg[k].mh, cfg[k].mb }, ne[4] = { Dv, H, n_q, B };
        case_begin(&c);
        q = tensor_rand(&c, cfg[k].tq, SHAPE(D, n_q, H, B), cfg[k].lq, -1, 1);
        kt = tensor_rand(&c, cfg[k].tkv, SHAPE(D, n_kv, cfg[k].Hkv, B), cfg[k].lk, -1, 1);
        v = tensor_rand(&c, cfg[k].tkv, SHAPE(Dv, n_kv, cfg[k].Hkv, B), cfg[k].lv, -1, 1);
        if (cfg[k].tm) {
            int64_t i, n = nelem(nm);
            mask = tensor_rand(&c, cfg[k].tm, nm, CONTIG, -1, 0);
            for (i = 0; i < n; i++) if (test_rand_int(0, 9) == 0) in_set_flat(&c, mask, i, -INFINITY);
            for (i = 0; i < n_kv; i++) {
                if (i < n_kv / 2) in_set(&c, mask, i, 0, 0, 0, -INFINITY);   /* leading key blocks all masked */
                if (n_q > 1) in_set(&c, mask, i, 1, nm[2] - 1, 0, -INFINITY);   /* a fully masked query row */
            }
            if (cfg[k].causal > 0) {
                int64_t iq, h2, b2;
                for (b2 = 0; b2 < nm[3]; b2++) for (h2 = 0; h2 < nm[2]; h2++) for (iq = 0; iq < nm[1]; iq++)
                    for (i = iq + cfg[k].causal + 1; i < n_kv; i++) in_set(&c, mask, i, iq, h2, b2, -INFINITY);
            }
            if (cfg[k].mrows == 2) {         /* row 0 sees every key, row 1 none of the padding (every 8th key and the last 20) */
                for (i = 0; i < n_kv; i++) {
                    in_set(&c, mask, i, 0, 0, 0, 0.0f);
                    in_set(&c, mask, i, 1, 0, 0, i % 8 == 7 || i >= n_kv - 20 ? -INFINITY : 0.0f);
                }
            }
        }
        if (cfg[k].mrows) {
            int64_t i;
            rows = tensor_rand(&c, I32, SHAPE(n_q, 1, 1, 1), CONTIG, 0, (double)(cfg[k].mrows - 1));
            if (cfg[k].mrows == 2) for (i = 0; i < n_q; i++) in_set(&c, rows, i, 0, 0, 0, i % 8 == 7 || i >= n_kv - 20 ? 1.0 : 0.0);
        }
        case_label(&c, "q %s k %s v %s mask %s scale %g softcap %g", desc(&c, q), desc(&c, kt), desc(&c, v),
                   mask ? desc(&c, mask) : "none", (double)cfg[k].scale, (double)cfg[k].softcap);
        out = case_out(&c, rows ? mms_flash_attn_ext_mask_rows(c.ctx, q, kt, v, mask, rows, cfg[k].scale, 0.0f, cfg[k].softcap)
                                : mms_flash_attn_ext(c.ctx, q, kt, v, mask, cfg[k].scale, 0.0f, cfg[k].softcap));
        if (case_compute(&c)) {
            /* the manual's rule: bf16 K and V on the avx512 set, more than 8 rows per K/V head, round
               the scaled query and the softmax weights to bf16; the query's rounding is repeated
               here, the weights' (taken against a running maximum) is what the tolerance allows for */
            const bool bf16 = cfg[k].tkv == BF16 && n_q * (H / cfg[k].Hkv) > 8 && mms_cpu_get_kernels() == MMS_CPU_KERNELS_AVX512;
            double *ref = ref_new(ne), *s = (double *)malloc((size_t)n_kv * sizeof *s);
            int64_t b, iq, h, j, d;
            for (b = 0; b < B; b++) for (iq = 0; iq < n_q; iq++) for (h = 0; h < H; h++) {
                const int64_t kh = h / (H / cfg[k].Hkv);
                double max = -INFINITY, sum = 0.0;
                for (j = 0; j < n_kv; j++) {
                    double dot = 0.0;
                    if (bf16) {
                        for (d = 0; d < D; d++)
                            dot += round_to(BF16, (float)in_at(&c, q, d, iq, h, b) * cfg[k].scale) * in_at(&c, kt, d, j, kh, b);
                        s[j] = dot;
                    } else {
                        for (d = 0; d < D; d++) dot += in_at(&c, q, d, iq, h, b) * in_at(&c, kt, d, j, kh, b);
                        s[j] = dot * cfg[k].scale;
                    }
                    if (cfg[k].softcap != 0.0f) s[j] = cfg[k].softcap * tanh(s[j] / cfg[k].softcap);
                    if (mask) s[j] += in_at(&c, mask, j, rows ? (int64_t)in_at(&c, rows, iq, 0, 0, 0) : iq, h % nm[2], b % nm[3]);
                    if (s[j] > max) max = s[j];
                }
                if (max == -INFINITY) continue;   /* every key masked: zeros */
                for (j = 0; j < n_kv; j++) sum += exp(s[j] - max);
                for (j = 0; j < n_kv; j++) {
                    const double w = exp(s[j] - max) / sum;
                    if (w == 0.0) continue;
                    for (d = 0; d < Dv; d++) ref[AT(ne, d, h, iq, b)] += w * in_at(&c, v, d, j, kh, b);
                }
            }
            free(s);
            check(&c, "mms_flash_attn_ext", out, ne, F32, ref, bf16 ? 2e-5 : 1e-8);
        }
        case_end(&c);
    }
    {   /* a mask row out of range is a compute error that names the op, not a crash */
        struct tcase c;
        const char *why;
        struct mms_tensor *q, *kt, *v, *mask, *rows;
        enum mms_status st;
        case_begin(&c);
        q = tensor_rand(&c, F32, SHAPE(16, 5, 2, 1), CONTIG, -1, 1);
        kt = tensor_rand(&c, F32, SHAPE(16, 9, 2, 1), CONTIG, -1, 1);
        v = tensor_rand(&c, F32, SHAPE(16, 9, 2, 1), CONTIG, -1, 1);
        mask = tensor_rand(&c, F32, SHAPE(9, 2, 1, 1), CONTIG, -1, 0);
        rows = tensor_rand(&c, I32, SHAPE(5, 1, 1, 1), CONTIG, 0, 1);
        in_set(&c, rows, 3, 0, 0, 0, 2);
        case_label(&c, "mask rows %s with row 2 of a 2-row mask", desc(&c, rows));
        case_out(&c, mms_flash_attn_ext_mask_rows(c.ctx, q, kt, v, mask, rows, 0.25f, 0.0f, 0.0f));
        test_capture_log();
        st = case_compute_status(&c, &why);
        mms_log_set(NULL, NULL);
        EXPECT(st == MMS_ERR_INVALID_ARG && strstr(why, "FLASH_ATTN_EXT") && strstr(why, "mask row 2"),
               "flash_attn %s: status %s, message '%s'", c.label, mms_status_string(st), why);
        case_end(&c);
    }
}

/* ---- views (view_1d..4d with offsets, reshape_*, permute, transpose) as operands and results.
   Here the expected elements come from the view parameters themselves, not from tensor_new. */

static void test_views(void) {
    struct tcase c;
    struct mms_tensor *r, *s, *o[8];
    const size_t fs = sizeof(float);
    double *ref[8];
    int64_t i0, i1, i2, i3;
    int i;
    case_begin(&c);
    r = tensor_rand(&c, F32, SHAPE(48, 10, 1, 1), CONTIG, -2, 2);   /* 480 floats, read as R(k) below */
    s = tensor_rand(&c, F32, SHAPE(96, 1, 1, 1), CONTIG, -2, 2);
    case_label(&c, "views of %s", desc(&c, r));
#define R(k) in_at(&c, r, (k) % 48, (k) / 48, 0, 0)
    o[0] = mms_scale(c.ctx, mms_view_1d(c.ctx, r, 100, 7 * fs), 2.0f);
    o[1] = mms_add(c.ctx, mms_view_2d(c.ctx, r, 6, 4, 2 * 48 * fs, (3 + 48) * fs),   /* rows 1, 3, 5, 7 from column 3 */
                   mms_view_2d(c.ctx, r, 6, 1, 48 * fs, 40 * fs));
    o[2] = mms_cont(c.ctx, mms_view_3d(c.ctx, r, 4, 3, 5, 16 * fs, 90 * fs, 5 * fs));
    o[3] = mms_sqr(c.ctx, mms_view_4d(c.ctx, r, 3, 2, 2, 2, 10 * fs, 50 * fs, 200 * fs, 11 * fs));
    o[4] = mms_mul(c.ctx, mms_reshape_3d(c.ctx, r, 16, 6, 5), mms_reshape_2d(c.ctx, mms_reshape_1d(c.ctx, s, 96), 16, 6));
    o[5] = mms_cont(c.ctx, mms_permute(c.ctx, mms_reshape_4d(c.ctx, r, 4, 5, 6, 4), 2, 0, 3, 1));   /* -> [5,4,4,6] */
    o[6] = mms_cont(c.ctx, mms_transpose(c.ctx, mms_reshape(c.ctx, r, mms_new_tensor_2d(c.ctx, F32, 24, 20))));
    o[7] = mms_transpose(c.ctx, mms_sqr(c.ctx, mms_reshape_2d(c.ctx, r, 24, 20)));   /* a view as the result */
    for (i = 0; i < 8; i++) case_out(&c, o[i]);
#define VIEW_REF(n, ne, expr) do { ref[n] = ref_new(ne); FOR4(ne) ref[n][AT(ne, i0, i1, i2, i3)] = (expr); } while (0)
    if (case_compute(&c)) {
        VIEW_REF(0, SHAPE(100, 1, 1, 1), 2.0 * R(7 + i0));
        VIEW_REF(1, SHAPE(6, 4, 1, 1), R(3 + 48 * (1 + 2 * i1) + i0) + R(40 + i0));
        VIEW_REF(2, SHAPE(4, 3, 5, 1), R(5 + i0 + 16 * i1 + 90 * i2));
        VIEW_REF(3, SHAPE(3, 2, 2, 2), pow(R(11 + i0 + 10 * i1 + 50 * i2 + 200 * i3), 2));
        VIEW_REF(4, SHAPE(16, 6, 5, 1), R(i0 + 16 * i1 + 96 * i2) * in_at(&c, s, i0 + 16 * i1, 0, 0, 0));
        VIEW_REF(5, SHAPE(5, 4, 4, 6), R(i2 + 4 * i0 + 20 * i3 + 120 * i1));
        VIEW_REF(6, SHAPE(20, 24, 1, 1), R(i1 + 24 * i0));
        VIEW_REF(7, SHAPE(20, 24, 1, 1), pow(R(i1 + 24 * i0), 2));
        check(&c, "mms_view_1d", o[0], SHAPE(100, 1, 1, 1), F32, ref[0], 0.0);
        check(&c, "mms_view_2d", o[1], SHAPE(6, 4, 1, 1), F32, ref[1], 1e-12);
        check(&c, "mms_view_3d", o[2], SHAPE(4, 3, 5, 1), F32, ref[2], 0.0);
        check(&c, "mms_view_4d", o[3], SHAPE(3, 2, 2, 2), F32, ref[3], 1e-12);
        check(&c, "mms_reshape_3d", o[4], SHAPE(16, 6, 5, 1), F32, ref[4], 1e-12);
        check(&c, "mms_permute", o[5], SHAPE(5, 4, 4, 6), F32, ref[5], 0.0);
        check(&c, "mms_transpose", o[6], SHAPE(20, 24, 1, 1), F32, ref[6], 0.0);
        check(&c, "view result", o[7], SHAPE(20, 24, 1, 1), F32, ref[7], 1e-12);
    }
#undef VIEW_REF
#undef R
    case_end(&c);
}

/* ---- the manual promises bit-identical results whatever the thread count (mul_mat hands its
   tiles out dynamically): one graph computed with 1, 2 and 3 threads ---- */

static void test_thread_determinism(void) {
    struct tcase c;
    struct mms_tensor *a, *b, *q, *k, *v, *out[4];
    double *first[4];
    int i, n;
    case_begin(&c);
    a = tensor_rand(&c, F32, SHAPE(40, 130, 2, 1), TRANSPOSED, -1, 1);
    b = tensor_rand(&c, F16, SHAPE(40, 100, 4, 1), CONTIG, -1, 1);
    q = tensor_rand(&c, F32, SHAPE(16, 9, 4, 1), PERMUTED, -1, 1);
    k = tensor_rand(&c, F16, SHAPE(16, 300, 2, 1), CONTIG, -1, 1);
    v = tensor_rand(&c, F16, SHAPE(16, 300, 2, 1), STRIDED, -1, 1);
    case_label(&c, "a %s b %s q %s k %s", desc(&c, a), desc(&c, b), desc(&c, q), desc(&c, k));
    out[0] = case_out(&c, mms_mul_mat(c.ctx, a, b));
    out[1] = case_out(&c, mms_soft_max_ext(c.ctx, out[0], NULL, 0.3f, 0.0f));
    out[2] = case_out(&c, mms_rms_norm(c.ctx, out[0], 1e-6f));
    out[3] = case_out(&c, mms_flash_attn_ext(c.ctx, q, k, v, NULL, 0.25f, 0.0f, 0.0f));
    if (case_compute(&c)) {
        for (i = 0; i < 4; i++) first[i] = case_result(&c, out[i]);
        for (n = 1; n <= 3; n++) {
            EXPECT(case_run(&c, n) == MMS_OK, "%s (%d threads): compute failed: %s", c.label, n, mms_last_error());
            for (i = 0; i < 4; i++) {
                size_t bytes = (size_t)nelem(out[i]->ne) * sizeof(double);
                double *ref = (double *)malloc(bytes);
                memcpy(ref, first[i], bytes);
                check(&c, mms_op_name(out[i]->op), out[i], out[i]->ne, F32, ref, 0.0);
            }
        }
        for (i = 0; i < 4; i++) free(first[i]);
    }
    case_end(&c);
}

/* ================================================================================================
   Shape and type validation: a bad call returns NULL, records the status in the context, and its
   message names the op and the shapes ("[K,M,1,1]"). Errors after the first are sticky. */

/* r must be NULL with status want; the context's error, the thread's last error and the log must
   all contain every fragment (NULL-terminated). Clears the status for the next check. */
static void expect_bad(struct mms_context *ctx, const struct mms_tensor *r, enum mms_status want, const char *call, ...) {
    va_list ap;
    const char *frag;
    EXPECT(r == NULL, "%s: returned a tensor", call);
    EXPECT(mms_ctx_status(ctx) == want, "%s: status %s, expected %s", call, mms_status_string(mms_ctx_status(ctx)),
           mms_status_string(want));
    va_start(ap, call);
    while ((frag = va_arg(ap, const char *)) != NULL)
        EXPECT(strstr(mms_ctx_error(ctx), frag) && strstr(mms_last_error(), frag) && strstr(test_last_log(), frag),
               "%s: message '%s' lacks '%s'", call, mms_ctx_error(ctx), frag);
    va_end(ap);
    mms_ctx_clear_error(ctx);
    mms_clear_error();
}
#define BAD(ctx, expr, want, ...) expect_bad(ctx, (expr), want, #expr, __VA_ARGS__, (const char *)NULL)
#define INVALID MMS_ERR_INVALID_ARG
#define UNSUPP  MMS_ERR_UNSUPPORTED

static struct mms_tensor *T(struct mms_context *ctx, enum mms_type t, int64_t a, int64_t b, int64_t c, int64_t d) {
    return mms_new_tensor_4d(ctx, t, a, b, c, d);
}

static void test_errors_elementwise(void) {
    struct mms_context *ctx = test_ctx(true);
    struct mms_tensor *a = T(ctx, F32, 4, 3, 1, 1), *b = T(ctx, F32, 3, 3, 1, 1), *ai = T(ctx, I32, 4, 3, 1, 1);
    int i;
    test_capture_log();
    for (i = 0; i < 4; i++) {
        BAD(ctx, binops[i].fn(ctx, a, b), INVALID, binops[i].name, "[3,3,1,1]", "[4,3,1,1]");
        BAD(ctx, binops[i].fn(ctx, a, ai), INVALID, binops[i].name, "[4,3,1,1]", "i32");
    }
    for (i = 0; i < N_UNOPS; i++) BAD(ctx, unops[i].fn(ctx, ai), INVALID, unops[i].name, "[4,3,1,1]", "i32");
    BAD(ctx, mms_sum_rows(ctx, ai), INVALID, "mms_sum_rows", "[4,3,1,1]");
    BAD(ctx, mms_argmax(ctx, ai), INVALID, "mms_argmax", "[4,3,1,1]");
    BAD(ctx, op_norm(ctx, ai), INVALID, "mms_norm", "[4,3,1,1]");
    BAD(ctx, op_rms_norm(ctx, ai), INVALID, "mms_rms_norm", "[4,3,1,1]");
    BAD(ctx, mms_norm(ctx, a, -1.0f), INVALID, "mms_norm", "eps");
    mms_log_set(NULL, NULL);
    mms_free(ctx);
}

static void test_errors_matmul_attention(void) {
    struct mms_context *ctx = test_ctx(true);
    struct mms_tensor *a = T(ctx, F32, 8, 5, 1, 1), *b = T(ctx, F32, 7, 3, 1, 1);
    struct mms_tensor *s = T(ctx, F32, 8, 4, 2, 1), *pos = T(ctx, I32, 5, 1, 1, 1), *x = T(ctx, F32, 8, 2, 5, 1);
    struct mms_tensor *q = T(ctx, F32, 16, 7, 3, 1), *k = T(ctx, F32, 16, 33, 2, 1), *v = T(ctx, F32, 16, 33, 2, 1);
    struct mms_tensor *q4 = T(ctx, F32, 16, 7, 4, 1), *vh = T(ctx, F16, 16, 33, 2, 1);
    test_capture_log();
    BAD(ctx, mms_mul_mat(ctx, a, b), INVALID, "mms_mul_mat", "[8,5,1,1]", "[7,3,1,1]");
    BAD(ctx, mms_mul_mat(ctx, T(ctx, F32, 8, 5, 3, 1), T(ctx, F32, 8, 3, 4, 1)), INVALID, "mms_mul_mat", "[8,5,3,1]", "[8,3,4,1]");
    BAD(ctx, mms_mul_mat(ctx, T(ctx, I32, 8, 5, 1, 1), a), INVALID, "mms_mul_mat", "[8,5,1,1]", "i32");

    BAD(ctx, mms_soft_max_ext(ctx, s, T(ctx, F32, 8, 3, 1, 1), 1.0f, 0.0f), INVALID, "mms_soft_max_ext", "[8,3,1,1]", "[8,4,2,1]");
    BAD(ctx, mms_soft_max_ext(ctx, s, T(ctx, F32, 7, 4, 1, 1), 1.0f, 0.0f), INVALID, "mms_soft_max_ext", "[7,4,1,1]", "[8,4,2,1]");
    BAD(ctx, mms_soft_max_ext(ctx, s, T(ctx, F32, 8, 4, 3, 1), 1.0f, 0.0f), INVALID, "mms_soft_max_ext", "[8,4,3,1]", "[8,4,2,1]");
    BAD(ctx, mms_soft_max_ext(ctx, s, T(ctx, BF16, 8, 4, 1, 1), 1.0f, 0.0f), INVALID, "mms_soft_max_ext", "[8,4,1,1]", "bf16");
    BAD(ctx, mms_soft_max_ext(ctx, s, NULL, 1.0f, 8.0f), UNSUPP, "mms_soft_max_ext", "max_bias");
    BAD(ctx, mms_soft_max(ctx, T(ctx, I32, 8, 4, 1, 1)), INVALID, "mms_soft_max:", "[8,4,1,1]");

    BAD(ctx, mms_rope_ext(ctx, x, T(ctx, F32, 5, 1, 1, 1), NULL, 8, 0, 0, 1e4f, 1, 0, 1, 0, 0), INVALID, "mms_rope_ext", "[5,1,1,1]", "f32");
    BAD(ctx, mms_rope_ext(ctx, x, T(ctx, I32, 3, 1, 1, 1), NULL, 8, 0, 0, 1e4f, 1, 0, 1, 0, 0), INVALID, "mms_rope_ext", "[3,1,1,1]", "[8,2,5,1]");
    BAD(ctx, mms_rope_ext(ctx, x, pos, NULL, 7, 0, 0, 1e4f, 1, 0, 1, 0, 0), INVALID, "mms_rope_ext", "[8,2,5,1]");
    BAD(ctx, mms_rope_ext(ctx, x, pos, NULL, 10, 0, 0, 1e4f, 1, 0, 1, 0, 0), INVALID, "mms_rope_ext", "[8,2,5,1]");
    BAD(ctx, mms_rope_ext(ctx, x, pos, T(ctx, F32, 3, 1, 1, 1), 8, 0, 0, 1e4f, 1, 0, 1, 0, 0), INVALID, "mms_rope_ext", "[3,1,1,1]");
    BAD(ctx, mms_rope_ext(ctx, x, pos, NULL, 8, 0, 0, 1e4f, 1, 1.0f, 1, 0, 0), UNSUPP, "mms_rope_ext", "ext_factor");
    BAD(ctx, mms_rope_ext(ctx, x, pos, NULL, 8, 1, 0, 1e4f, 1, 0, 1, 0, 0), UNSUPP, "mms_rope_ext", "mode 1");

    BAD(ctx, mms_flash_attn_ext(ctx, q, k, v, NULL, 1, 0, 0), INVALID, "mms_flash_attn_ext", "[16,7,3,1]", "[16,33,2,1]");
    BAD(ctx, mms_flash_attn_ext(ctx, T(ctx, F32, 8, 7, 4, 1), k, v, NULL, 1, 0, 0), INVALID, "mms_flash_attn_ext", "[8,7,4,1]");
    BAD(ctx, mms_flash_attn_ext(ctx, q4, k, vh, NULL, 1, 0, 0), INVALID, "mms_flash_attn_ext", "[16,33,2,1]", "f16");
    BAD(ctx, mms_flash_attn_ext(ctx, q4, k, v, T(ctx, F32, 33, 6, 1, 1), 1, 0, 0), INVALID, "mms_flash_attn_ext", "[33,6,1,1]");
    BAD(ctx, mms_flash_attn_ext(ctx, q4, k, v, T(ctx, F32, 33, 7, 3, 1), 1, 0, 0), INVALID, "mms_flash_attn_ext", "[33,7,3,1]");
    BAD(ctx, mms_flash_attn_ext(ctx, q4, k, v, NULL, 1, 2.0f, 0), UNSUPP, "mms_flash_attn_ext", "max_bias");
    BAD(ctx, mms_flash_attn_ext(ctx, q4, k, v, NULL, 1, 0, -1.0f), INVALID, "mms_flash_attn_ext", "logit_softcap");
    BAD(ctx, mms_cast(ctx, T(ctx, I32, 4, 1, 1, 1), F16), INVALID, "mms_cast", "[4,1,1,1]", "f16");
    BAD(ctx, mms_set_rows(ctx, T(ctx, F32, 8, 9, 1, 1), T(ctx, F32, 7, 2, 1, 1), T(ctx, I32, 2, 1, 1, 1)), INVALID, "mms_set_rows", "[7,2,1,1]");
    BAD(ctx, mms_set_rows(ctx, T(ctx, F32, 8, 9, 1, 1), T(ctx, F32, 8, 2, 1, 1), T(ctx, I32, 3, 1, 1, 1)), INVALID, "mms_set_rows", "[3,1,1,1]");
    BAD(ctx, mms_set_rows(ctx, T(ctx, F32, 8, 9, 1, 1), T(ctx, F32, 8, 2, 1, 1), T(ctx, F32, 2, 1, 1, 1)), INVALID, "mms_set_rows", "rows");
    BAD(ctx, mms_flash_attn_ext_mask_rows(ctx, q4, k, v, T(ctx, F32, 33, 2, 1, 1), NULL, 1, 0, 0), INVALID, "mms_flash_attn_ext_mask_rows", "NULL");
    BAD(ctx, mms_flash_attn_ext_mask_rows(ctx, q4, k, v, NULL, T(ctx, I32, 7, 1, 1, 1), 1, 0, 0), INVALID, "mms_flash_attn_ext_mask_rows", "without a mask");
    BAD(ctx, mms_flash_attn_ext_mask_rows(ctx, q4, k, v, T(ctx, F32, 33, 2, 1, 1), T(ctx, F32, 7, 1, 1, 1), 1, 0, 0), INVALID, "mask rows", "[7,1,1,1]");
    BAD(ctx, mms_flash_attn_ext_mask_rows(ctx, q4, k, v, T(ctx, F32, 33, 2, 1, 1), T(ctx, I32, 6, 1, 1, 1), 1, 0, 0), INVALID, "mask rows", "[n_q] = [7]");
    mms_log_set(NULL, NULL);
    mms_free(ctx);
}

static void test_errors_layout(void) {
    struct mms_context *ctx = test_ctx(true);
    struct mms_tensor *a = T(ctx, F32, 4, 3, 1, 1), *b = T(ctx, F32, 3, 3, 1, 1), *ai = T(ctx, I32, 4, 3, 1, 1);
    struct mms_tensor *c3 = T(ctx, F32, 4, 3, 2, 1), *rows = T(ctx, F32, 4, 10, 2, 1);
    struct mms_tensor *kern = T(ctx, F32, 3, 3, 2, 4), *img = T(ctx, F32, 9, 7, 3, 1);
    test_capture_log();
    BAD(ctx, mms_concat(ctx, c3, T(ctx, F32, 4, 2, 2, 1), 0), INVALID, "mms_concat", "[4,3,2,1]", "[4,2,2,1]");
    BAD(ctx, mms_concat(ctx, c3, T(ctx, F16, 4, 3, 2, 1), 2), INVALID, "mms_concat", "[4,3,2,1]", "f16");
    BAD(ctx, mms_concat(ctx, c3, c3, 4), INVALID, "mms_concat", "dim 4");

    BAD(ctx, mms_pad(ctx, ai, 1, 0, 0, 0), INVALID, "mms_pad", "[4,3,1,1]");
    BAD(ctx, mms_pad(ctx, a, 1, -1, 0, 0), INVALID, "mms_pad", "-1");
    BAD(ctx, mms_repeat(ctx, a, T(ctx, F32, 6, 3, 1, 1)), INVALID, "mms_repeat", "[4,3,1,1]", "[6,3,1,1]");

    BAD(ctx, mms_get_rows(ctx, rows, T(ctx, F32, 3, 2, 1, 1)), INVALID, "mms_get_rows", "[3,2,1,1]");
    BAD(ctx, mms_get_rows(ctx, rows, T(ctx, I32, 3, 3, 1, 1)), INVALID, "mms_get_rows", "[3,3,1,1]", "[4,10,2,1]");

    BAD(ctx, mms_cpy(ctx, a, b), INVALID, "mms_cpy", "[4,3,1,1]", "[3,3,1,1]");
    BAD(ctx, mms_cpy(ctx, ai, T(ctx, F32, 12, 1, 1, 1)), INVALID, "mms_cpy", "[4,3,1,1]", "[12,1,1,1]");
    BAD(ctx, mms_dup(ctx, NULL), INVALID, "mms_dup", "NULL");
    BAD(ctx, mms_cont(ctx, NULL), INVALID, "mms_cont", "NULL");
    BAD(ctx, mms_cont_2d(ctx, a, 5, 3), INVALID, "mms_cont_2d", "[4,3,1,1]", "[5,3,1,1]");
    BAD(ctx, mms_cont_3d(ctx, a, 2, 2, 2), INVALID, "mms_cont_3d", "[4,3,1,1]", "[2,2,2,1]");
    BAD(ctx, mms_cont_4d(ctx, a, 1, 2, 3, 4), INVALID, "mms_cont_4d", "[4,3,1,1]", "[1,2,3,4]");

    BAD(ctx, mms_im2col(ctx, kern, img, 1, 1, 0, 0, 1, 1, true, F32), INVALID, "mms_im2col", "[3,3,2,4]", "[9,7,3,1]");
    BAD(ctx, mms_im2col(ctx, T(ctx, F32, 5, 5, 1, 1), T(ctx, F32, 3, 3, 1, 1), 1, 1, 0, 0, 1, 1, true, F32), INVALID,
        "mms_im2col", "[5,5,1,1]", "[3,3,1,1]");
    BAD(ctx, mms_im2col(ctx, T(ctx, F32, 3, 2, 4, 1), T(ctx, F32, 9, 2, 3, 2), 1, 1, 0, 0, 1, 1, false, F32), INVALID,
        "mms_im2col", "[3,2,4,1]", "[9,2,3,2]");
    BAD(ctx, mms_im2col(ctx, kern, T(ctx, F32, 9, 7, 2, 1), 1, 1, 0, 0, 1, 1, true, I32), INVALID, "mms_im2col", "i32");
    BAD(ctx, mms_im2col(ctx, kern, T(ctx, F32, 9, 7, 2, 1), 0, 1, 0, 0, 1, 1, true, F32), INVALID, "mms_im2col", "strides");
    BAD(ctx, mms_conv_2d(ctx, T(ctx, I32, 3, 3, 2, 4), img, 1, 1, 0, 0, 1, 1), INVALID, "mms_conv_2d", "[3,3,2,4]");
    BAD(ctx, mms_conv_2d(ctx, kern, img, 1, 1, 0, 0, 1, 1), INVALID, "mms_conv_2d", "[3,3,2,4]", "[9,7,3,1]");

    BAD(ctx, mms_view_1d(ctx, a, 10, 3 * sizeof(float)), INVALID, "mms_view_1d", "[4,3,1,1]");
    BAD(ctx, mms_view_2d(ctx, a, 4, 4, 4 * sizeof(float), 0), INVALID, "mms_view_2d", "[4,3,1,1]");
    BAD(ctx, mms_view_3d(ctx, a, 2, 2, 2, 4 * sizeof(float), 8 * sizeof(float), 4), INVALID, "mms_view_3d", "[4,3,1,1]");
    BAD(ctx, mms_view_4d(ctx, a, 2, 1, 1, 2, 16, 16, 48, 0), INVALID, "mms_view_4d", "[4,3,1,1]");
    BAD(ctx, mms_reshape_2d(ctx, mms_transpose(ctx, a), 4, 3), INVALID, "mms_reshape_2d", "[3,4,1,1]", "not contiguous");
    BAD(ctx, mms_reshape_3d(ctx, a, 5, 2, 1), INVALID, "mms_reshape_3d", "[4,3,1,1]", "[5,2,1,1]");
    BAD(ctx, mms_reshape_1d(ctx, a, 13), INVALID, "mms_reshape_1d", "[4,3,1,1]", "[13,1,1,1]");
    BAD(ctx, mms_reshape_4d(ctx, a, 1, 2, 3, 4), INVALID, "mms_reshape_4d", "[4,3,1,1]", "[1,2,3,4]");
    BAD(ctx, mms_reshape(ctx, a, b), INVALID, "mms_reshape", "[4,3,1,1]", "[3,3,1,1]");
    BAD(ctx, mms_permute(ctx, a, 0, 0, 1, 2), INVALID, "mms_permute", "(0,0,1,2)");
    BAD(ctx, mms_transpose(ctx, NULL), INVALID, "mms_transpose", "NULL");
    mms_log_set(NULL, NULL);
    mms_free(ctx);
}

/* The first error stays: later ops given its NULL return NULL quietly, a second bad call does not
   replace it, and the graph and the compute refuse the build. */
static void test_errors_sticky(void) {
    struct mms_context *ctx = test_ctx(true);
    struct mms_tensor *a = T(ctx, F32, 8, 5, 1, 1), *b = T(ctx, F32, 7, 3, 1, 1), *bad, *r;
    struct mms_cgraph *g;
    char first[1024], last[1024];
    int logged;
    test_capture_log();
    bad = mms_mul_mat(ctx, a, b);
    snprintf(first, sizeof first, "%s", mms_ctx_error(ctx));
    snprintf(last, sizeof last, "%s", mms_last_error());
    logged = test__log_count;
    EXPECT(bad == NULL && strstr(first, "mms_mul_mat") && strstr(first, "[7,3,1,1]"), "first error: %s", first);

    r = mms_sqr(ctx, bad);
    r = mms_add(ctx, r, a);
    r = mms_soft_max_ext(ctx, r, NULL, 1.0f, 0.0f);
    EXPECT(r == NULL, "an op given NULL returned a tensor");
    EXPECT(mms_ctx_status(ctx) == MMS_ERR_INVALID_ARG && strcmp(mms_ctx_error(ctx), first) == 0,
           "the context error changed to: %s", mms_ctx_error(ctx));
    EXPECT(strcmp(mms_last_error(), last) == 0 && test__log_count == logged,
           "NULL propagation raised a new error: %s", mms_last_error());

    EXPECT(mms_add(ctx, a, b) == NULL, "a second bad call returned a tensor");
    EXPECT(strcmp(mms_ctx_error(ctx), first) == 0, "a second error replaced the first: %s", mms_ctx_error(ctx));

    g = mms_new_graph(ctx);
    mms_build_forward_expand(g, r);
    EXPECT(mms_graph_status(g) != MMS_OK, "a graph of a NULL output has status OK");
    EXPECT(mms_backend_graph_compute(g_backend, g) != MMS_OK, "a graph whose build failed was computed");
    mms_log_set(NULL, NULL);
    mms_free(ctx);
}

/* ================================================================================================ */

static void run_numeric(const char *name, void (*fn)(void)) {
    static char full[96];
    snprintf(full, sizeof full, "%s/%s", g_kernels, name);
    test__run(full, fn);
}

/* The AVX-512 set's softmax, f32 flash attention and unary ops give AVX2's bits: the exp
   (mms__exp16, 16 lanes), the exp sums' order and the unary bodies (mms__unary16) are AVX2's, and
   the f32 GEMM's 12 x 16 block (flash attention's last panel of 80-wide value rows) sums as AVX2's
   6 x 16. Rows of 1 to 40 (the exp loops' 16, 8 and scalar tails), attention over 200 keys (a
   partial key block) with D = Dv = 80, every unary op on 2 x 1013 values in -12..12 (a 16-lane
   loop, then AVX2's 8-lane and padded tails) and on test_unary_special's values. Self-consistency
   only; the reference checks are test_soft_max, test_flash_attn, test_unary and
   test_unary_special above. */
static void test_x86_sets_agree_float_ops(void) {
    static const int64_t lens[8] = { 1, 5, 8, 13, 16, 24, 29, 40 };
    static const double special[] = { NAN, -INFINITY, INFINITY, -100.0, -87.0, 0.0, -0.0, 1e-30, 80.0, -2.5, 1e-40 };
    enum { N_OUT = 9 + 2 * N_UNOPS };
    struct tcase c;
    struct mms_tensor *out[N_OUT], *a, *pos, *sp;
    unsigned char *got[2][N_OUT];
    int i, s, bad = 0;
    if (!mms_cpu_kernels_supported(MMS_CPU_KERNELS_AVX2) || !mms_cpu_kernels_supported(MMS_CPU_KERNELS_AVX512)) {
        test_skip("this CPU or build lacks the avx2 or the avx512 set");
        return;
    }
    case_begin(&c);
    for (i = 0; i < 8; i++) out[i] = case_out(&c, mms_soft_max_ext(c.ctx, tensor_rand(&c, F32, SHAPE(lens[i], 3, 1, 1), CONTIG, -8, 8), NULL, 0.7f, 0.0f));
    out[8] = case_out(&c, mms_flash_attn_ext(c.ctx, tensor_rand(&c, F32, SHAPE(80, 37, 4, 1), CONTIG, -1, 1),
                                             tensor_rand(&c, F32, SHAPE(80, 200, 2, 1), CONTIG, -1, 1),
                                             tensor_rand(&c, F32, SHAPE(80, 200, 2, 1), CONTIG, -1, 1), NULL, 0.11f, 0.0f, 0.0f));
    a = tensor_rand(&c, F32, SHAPE(1013, 2, 1, 1), CONTIG, -12, 12);
    pos = tensor_rand(&c, F32, SHAPE(1013, 2, 1, 1), CONTIG, 0, 12);
    sp = tensor_rand(&c, F32, SHAPE(37, 1, 1, 1), CONTIG, -1, 1);
    for (i = 0; i < 37; i++) in_set_flat(&c, sp, i, special[i % 11]);
    for (i = 0; i < N_UNOPS; i++) {
        out[9 + 2 * i] = case_out(&c, unops[i].fn(c.ctx, unops[i].positive ? pos : a));
        out[10 + 2 * i] = case_out(&c, unops[i].fn(c.ctx, sp));
    }
    for (s = 0; s < 2; s++) {
        mms_cpu_set_kernels(s ? MMS_CPU_KERNELS_AVX512 : MMS_CPU_KERNELS_AVX2);
        if (s == 0 ? !case_compute(&c) : case_run(&c, 2) != MMS_OK) break;
        for (i = 0; i < N_OUT; i++) got[s][i] = fetch(out[i], mms_nbytes(out[i]));
    }
    EXPECT(s == 2, "the avx512 compute failed: %s", mms_last_error());
    for (i = 0; s == 2 && i < N_OUT; i++) {
        if (memcmp(got[0][i], got[1][i], mms_nbytes(out[i])) != 0) {
            printf("    %s: avx512 differs from avx2\n", i < 8 ? "soft_max" : i == 8 ? "flash_attn_ext" : unops[(i - 9) / 2].name);
            bad++;
        }
        free(got[0][i]);
        free(got[1][i]);
    }
    EXPECT(bad == 0, "%d of %d results differ between the avx2 and avx512 sets", bad, N_OUT);
    mms_cpu_set_kernels(MMS_CPU_KERNELS_AUTO);
    case_end(&c);
}

int main(void) {
    enum mms_cpu_kernels k = MMS_CPU_KERNELS_AUTO;
    test_seed();
    g_verbose = getenv("MMS_TEST_VERBOSE") != NULL;
    g_backend = mms_backend_cpu_init();
    if (g_backend) mms_backend_cpu_set_split(g_backend, MMS_CPU_SPLIT_ALL);   /* every node in parts: each kernel's partition is checked */
    if (!g_backend) { printf("mms_backend_cpu_init failed: %s\n", mms_last_error()); return 2; }

    while (test_kernel_set_next(&k)) {
        if (!test_use_kernel_set(k)) continue;
        g_kernels = mms_cpu_kernels_name(k);
        run_numeric("binary", test_binary);
        run_numeric("unary", test_unary);
        run_numeric("unary_special", test_unary_special);
        run_numeric("reductions", test_reductions);
        run_numeric("norms", test_norms);
        run_numeric("mul_mat", test_mul_mat);
        run_numeric("mul_mat_columns", test_mul_mat_columns);
        run_numeric("soft_max", test_soft_max);
        run_numeric("rope", test_rope);
        run_numeric("concat", test_concat);
        run_numeric("repeat", test_repeat);
        run_numeric("pad", test_pad);
        run_numeric("get_rows", test_get_rows);
        run_numeric("cpy", test_cpy);
        run_numeric("dup_cont", test_dup_cont);
        run_numeric("im2col", test_im2col);
        run_numeric("conv_2d", test_conv_2d);
        run_numeric("flash_attn", test_flash_attn);
        run_numeric("cast", test_cast);
        run_numeric("set_rows", test_set_rows);
        run_numeric("views", test_views);
        run_numeric("thread_determinism", test_thread_determinism);
    }

    RUN(test_x86_sets_agree_float_ops);
    RUN(test_errors_elementwise);
    RUN(test_errors_matmul_attention);
    RUN(test_errors_layout);
    RUN(test_errors_sticky);

    mms_backend_free(g_backend);
    return test_summary();
}
