/* The examples run as a user would run them: each must exit with status 0 and say what it is
   there to show (simple: the two attentions agree; two_graphs: the wrong hand-off is reported and
   the right one gives the one-graph answer; bench --plans-only: the plans and their bounds), and
   refuse bad options with a message. */
#define MMSCHED_IMPLEMENTATION
#include "../mmsched.h"
#include "test.h"
#include "run_program.h"

static char tmpdir[64];

static void expect_run(const char *program, const char *args, const char *const *says) {
    struct run r = test_run_program(program, args, NULL, tmpdir);
    int i;
    EXPECT(r.status == 0, "%s %s exited with %d: %s", program, args, r.status, r.err);
    for (i = 0; says[i]; i++) EXPECT(strstr(r.out, says[i]) != NULL, "%s %s does not say \"%s\":\n%s", program, args, says[i], r.out);
    run_free(&r);
}

static void test_simple(void) {
    static const char *const says[] = { "three-op attention vs flash attention: normalised squared difference", NULL };
    expect_run(EXAMPLES "/simple", "", says);
}

static void test_two_graphs(void) {
    static const char *const says[] = { "mms_set_persistent before graph", "identical to the one-graph result: yes", NULL };
    expect_run(EXAMPLES "/two_graphs", "", says);
}

static void test_bench_plans(void) {
    static const char *const says[] = { "lower bound", "Llama 3.2 11B Vision, shapes only", NULL };
    expect_run(EXAMPLES "/bench", "--plans-only", says);
}

/* Cases of each kind run to the end, one repetition (not timed: a crash or a failed case is what
   this catches; an uninitialised case once ended the run silently after the first decode attention). */
static void test_bench_cases(void) {
    static const char *const attention[] = { "decode attention 6404 keys, interleaved K/V", "decode attention 6404 keys, head-major K/V", NULL };
    static const char *const stream[] = { "rms_norm [1280,1601]", NULL }, *const pool[] = { "threadpool split node / node / graph start", NULL };
    static const char *const hot[] = { "mul_mat q4_k 1024x4096 * 1 hot ", "mul_mat q4_k 1024x4096 * 1 hot repacked", "(1 thread; its share of the read", NULL };
    expect_run(EXAMPLES "/bench", "--reps 1 --filter 'decode attention'", attention);
    expect_run(EXAMPLES "/bench", "--reps 1 --filter 'q4_k 1024x4096 * 1 hot'", hot);
    expect_run(EXAMPLES "/bench", "--reps 1 --filter 'rms_norm'", stream);
    expect_run(EXAMPLES "/bench", "--reps 1 --filter threadpool", pool);
}

/* The load benchmark starts its busy processes, times the caption with the default and one
   thread under each load, and stops them (not timed: that it runs, and its table). */
static void test_bench_load(void) {
    static const char *const says[] = { "caption      load 0/core", "caption      load 1/core own", "auto / best (t=1)",
                                        "BENCH name=load_caption load=1 sessions=own reps=1", NULL };
    expect_run(EXAMPLES "/bench_load", "--cases caption --loads 0,1 --threads 0,1 --reps 1", says);
}

/* Bad options end at once with status 2 and say what is wrong (before any case runs). */
static void expect_refused(const char *program, const char *args, const char *says) {
    struct run r = test_run_program(program, args, NULL, tmpdir);
    EXPECT(r.status == 2, "%s %s exited with %d (want 2)", program, args, r.status);
    EXPECT(strstr(r.err, says) != NULL, "%s %s does not say \"%s\" on stderr:\n%s", program, args, says, r.err);
    EXPECT(strstr(r.out, "machine (") == NULL, "%s %s ran the cases:\n%s", program, args, r.out);
    run_free(&r);
}

/* --plans-only with each: were the check gone, the run would stop after the plans (exit 0), not start an 11B model */
static void test_bench_bad_options(void) {
    expect_refused(EXAMPLES "/bench", "--plans-only --full --text-layers 3", "--full takes every layer");
    expect_refused(EXAMPLES "/bench", "--plans-only --mllama --text-layers 0", "--text-layers 1..40");
    expect_refused(EXAMPLES "/bench", "--plans-only --mllama --vision-layers 33", "--vision-layers 1..32");
    expect_refused(EXAMPLES "/bench", "--plans-only --threads 0", "threads 1..64");
    expect_refused(EXAMPLES "/bench", "--fast", "usage:");
    expect_refused(EXAMPLES "/bench_load", "--loads 1,x", "--loads wants up to 4 of 0..8");
    expect_refused(EXAMPLES "/bench_load", "--text-layers 2", "--text-layers wants 4..40");
    expect_refused(EXAMPLES "/bench_load", "--cases none", "--cases wants caption, prefill and/or decode");
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mms-examples-XXXXXX");
    if (!mkdtemp(tmpdir)) return test_fail_all("a temporary folder", "cannot be made");
    RUN(test_simple);
    RUN(test_two_graphs);
    RUN(test_bench_plans);
    RUN(test_bench_cases);
    RUN(test_bench_load);
    RUN(test_bench_bad_options);
    return test_summary();
}
