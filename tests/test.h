/* The test harness shared by every test executable: cases, expectations, skips, a recording
   logger and the closing "N passed, N failed, N skipped" line that tests/run.sh adds up. A skipped
   case is not a pass. Include after mmsched.h. */
#ifndef MMS_TEST_H
#define MMS_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <math.h>
#if defined(_WIN32)
#  include <direct.h>
#else
#  include <sys/stat.h>
#endif

#if defined(__GNUC__) || defined(__clang__)
#  define TEST_FN static __attribute__((unused))
#else
#  define TEST_FN static
#endif

static int         test__passed, test__failed, test__skipped, test__case_failures;
static const char *test__case_name = "";
static char        test__skip_reason[256];

/* Records a failure of the current case (and prints it) unless cond holds. */
#define EXPECT(cond, ...) \
    do { if (!(cond)) test__fail(__FILE__, __LINE__, #cond, __VA_ARGS__); } while (0)

TEST_FN void test__fail(const char *file, int line, const char *cond, const char *fmt, ...) {
    va_list ap;
    if (test__case_failures++ < 8) {
        fprintf(stdout, "    %s:%d: %s: expected %s: ", file, line, test__case_name, cond);
        va_start(ap, fmt);
        vfprintf(stdout, fmt, ap);
        va_end(ap);
        fputc('\n', stdout);
    }
}

/* The current case cannot run here (no device, no kernel set): it counts as skipped, not passed,
   with the reason printed. Return from the case after calling it. */
TEST_FN void test_skip(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(test__skip_reason, sizeof test__skip_reason, fmt, ap);
    va_end(ap);
}

/* MMS_TEST_CASE=text runs only the cases whose name contains text (the others are neither run nor
   counted); a program none of whose cases matches fails, so a mistyped name cannot pass. */
static int test__selected_cases;
TEST_FN const char *test__case_filter(void) {
    const char *want = getenv("MMS_TEST_CASE");
    return want && *want ? want : NULL;
}

/* Runs one case and prints PASS, FAIL or SKIP with its name. */
#define RUN(fn) test__run(#fn, fn)
TEST_FN void test__run(const char *name, void (*fn)(void)) {
    if (test__case_filter() && !strstr(name, test__case_filter())) return;
    test__selected_cases++;
    test__case_name = name;
    test__case_failures = 0;
    test__skip_reason[0] = '\0';
    fn();
    if (test__case_failures > 0) { test__failed++; printf("FAIL %s (%d failed expectations)\n", name, test__case_failures); }
    else if (test__skip_reason[0]) { test__skipped++; printf("SKIP %s: %s\n", name, test__skip_reason); }
    else { test__passed++; printf("PASS %s\n", name); }
    fflush(stdout);
}

TEST_FN int test_summary(void) {
    if (test__case_filter() && test__selected_cases == 0) {
        printf("FAIL MMS_TEST_CASE=%s: no case name here contains it\n", test__case_filter());
        test__failed++;
    }
    printf("%d passed, %d failed, %d skipped\n", test__passed, test__failed, test__skipped);
    return test__failed ? 1 : 0;
}

/* Something outside a case (a kernel set, a device) cannot run here: counted as skipped, said why. */
TEST_FN void test_skip_part(const char *what, const char *reason) {
    printf("SKIP %s: %s\n", what, reason);
    test__skipped++;
}

/* The whole executable cannot run here: one skipped part, and the summary. */
TEST_FN int test_skip_all(const char *what, const char *reason) {
    test_skip_part(what, reason);
    return test_summary();
}

/* The whole executable cannot run because something it needs is missing: a failure. */
TEST_FN int test_fail_all(const char *what, const char *reason) {
    printf("FAIL %s: %s\n", what, reason);
    test__failed++;
    return test_summary();
}

/* A whole file as a NUL-terminated string (NULL if unreadable); its length in *size if given. */
TEST_FN char *test_slurp(const char *path, long *size) {
    FILE *f = fopen(path, "rb");
    long n;
    char *s;
    if (size) *size = -1;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    s = (char *)malloc((size_t)n + 1);
    if (s) s[fread(s, 1, (size_t)n, f)] = '\0';
    if (size) *size = n;
    fclose(f);
    return s;
}

/* Makes a folder (one level; an existing one is fine). */
TEST_FN void test_make_dir(const char *path) {
#if defined(_WIN32)
    _mkdir(path);
#else
    mkdir(path, 0777);
#endif
}

/* A path in tests/, as the compiler named this header: the tests run from where they were
   compiled (the repository root under make). */
TEST_FN const char *test_src_path(const char *rel) {
    static char buf[1024];
    const char *slash = strrchr(__FILE__, '/');
    int dir = slash ? (int)(slash - __FILE__ + 1) : 0;
    snprintf(buf, sizeof buf, "%.*s%s", dir, __FILE__, rel);
    return buf;
}

/* A context that grows as needed; no_alloc: metadata only. */
TEST_FN struct mms_context *test_ctx(bool no_alloc) {
    struct mms_init_params ip;
    ip.mem_size = 0;
    ip.mem_buffer = NULL;
    ip.no_alloc = no_alloc;
    return mms_init(ip);
}

/* A logger that keeps the last messages instead of printing them, so tests can check what the
   library said. */
static char test__log[4096];
static int  test__log_count;
TEST_FN void test__log_cb(enum mms_log_level level, const char *msg, void *user) {
    (void)user;
    if (level < MMS_LOG_WARN) return;
    snprintf(test__log, sizeof test__log, "%s", msg);
    test__log_count++;
}
TEST_FN void test_capture_log(void) { mms_log_set(test__log_cb, NULL); test__log[0] = '\0'; test__log_count = 0; }
TEST_FN const char *test_last_log(void) { return test__log; }

/* A status and a last-error message that must contain every given fragment (NULL-terminated). */
TEST_FN int test__error_is(enum mms_status got, enum mms_status want, ...) {
    va_list ap;
    const char *frag;
    int ok = got == want;
    va_start(ap, want);
    while ((frag = va_arg(ap, const char *)) != NULL) if (!strstr(mms_last_error(), frag)) ok = 0;
    va_end(ap);
    if (!ok) printf("    got status %d (%s), message: %s\n", (int)got, mms_status_string(got), mms_last_error());
    return ok;
}
#define EXPECT_ERROR(expr, want, ...) \
    do { mms_clear_error(); { enum mms_status test__st = (expr); \
         EXPECT(test__error_is(test__st, want, __VA_ARGS__, (const char *)NULL), "error %s", #want); } } while (0)

/* Seeded random numbers: xorshift64*, the same sequence on every platform. The seed comes from
   MMS_TEST_SEED when set, else from the clock, and is printed so a failure can be replayed. */
static unsigned long long test__rng = 88172645463325252ULL;
TEST_FN unsigned long long test_seed(void) {
    const char *env = getenv("MMS_TEST_SEED");
    unsigned long long s = env ? strtoull(env, NULL, 10) : (unsigned long long)mms_time_us();
    test__rng = s ? s : 1;
    printf("seed %llu (replay with MMS_TEST_SEED=%llu)\n", s, s);
    return s;
}
TEST_FN unsigned long long test_rand_u64(void) {
    test__rng ^= test__rng >> 12; test__rng ^= test__rng << 25; test__rng ^= test__rng >> 27;
    return test__rng * 2685821657736338717ULL;
}
TEST_FN float test_rand_uniform(float lo, float hi) {  /* in [lo, hi) */
    return lo + (hi - lo) * (float)((test_rand_u64() >> 40) * (1.0 / 16777216.0));
}
TEST_FN int test_rand_int(int lo, int hi) {            /* in [lo, hi] */
    return lo + (int)(test_rand_u64() % (unsigned long long)(hi - lo + 1));
}

/* -- comparing outputs -- */

/* Normalised squared error of got against want (by want's energy, or 1 when that is 0). An element
   that is NaN in got where want has a number gives +inf (unwritten, or garbage); elements where want
   is NaN, or both are the same infinity, are skipped. */
TEST_FN double test_nmse(const float *got, const float *want, int64_t n) {
    double err = 0.0, norm = 0.0;
    int64_t i;
    for (i = 0; i < n; i++) {
        if (got[i] != got[i] && want[i] == want[i]) return INFINITY;
        if (want[i] != want[i] || (isinf(want[i]) && want[i] == got[i])) continue;
        err += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
        norm += (double)want[i] * want[i];
    }
    return err / (norm > 0.0 ? norm : 1.0);
}

/* The elements of t (any buffer, any strides) in logical order as floats: float and block types
   converted, I32 cast. False (with the last error) if t cannot be read. */
TEST_FN bool test_get_floats(const struct mms_tensor *t, float *out) {
    const size_t span = mms_nbytes(t);
    char *raw = (char *)malloc(span ? span : 1);
    int64_t i1, i2, i3, k = 0;
    const bool ok = raw && mms_backend_tensor_get(t, raw, 0, span) == MMS_OK;
    for (i3 = 0; ok && i3 < t->ne[3]; i3++)
        for (i2 = 0; i2 < t->ne[2]; i2++)
            for (i1 = 0; i1 < t->ne[1]; i1++, k += t->ne[0]) {
                const char *row = raw + i1 * (int64_t)t->nb[1] + i2 * (int64_t)t->nb[2] + i3 * (int64_t)t->nb[3];
                int64_t i0;
                if (t->type == MMS_TYPE_I32) {
                    for (i0 = 0; i0 < t->ne[0]; i0++) { int32_t v; memcpy(&v, row + i0 * (int64_t)t->nb[0], sizeof v); out[k + i0] = (float)v; }
                } else if (t->nb[0] == mms_type_size(t->type)) {
                    mms_get_type_traits(t->type)->to_float(row, out + k, t->ne[0]);
                } else {
                    for (i0 = 0; i0 < t->ne[0]; i0++) mms_get_type_traits(t->type)->to_float(row + i0 * (int64_t)t->nb[0], out + k + i0, 1);
                }
            }
    free(raw);
    return ok;
}

#endif
