/* The examples run as a user would run them: each must exit with status 0 and say what it is
   there to show (simple: the two attentions agree; two_graphs: the wrong hand-off is reported and
   the right one gives the one-graph answer; bench --plans-only: the plans and their bounds). */
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

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mms-examples-XXXXXX");
    if (!mkdtemp(tmpdir)) return test_fail_all("a temporary folder", "cannot be made");
    RUN(test_simple);
    RUN(test_two_graphs);
    RUN(test_bench_plans);
    return test_summary();
}
