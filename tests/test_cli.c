/* The mllama program as a user runs it: captions of the sample pictures with the bundled model
   (single file and two-file layout, one shot and chat), and its errors for a missing or broken
   model, an unreadable image, a prompt longer than the context and bad options. CLI names the
   program under test (the Makefile passes the normal or the sanitizer build). */
#define MMSCHED_IMPLEMENTATION
#include "mmsched.h"
#include "test.h"
#include "run_program.h"

#ifndef CLI
#  define CLI "build/mllama"
#endif
#define DEMO "models/mllama-demo.gguf"
#define DEMO_FIX "tests/fixtures/demo/"

static char tmpdir[64];

/* Runs the program with args (shell syntax), stdin from `input` (or nothing). */
static struct run run_cli(const char *args, const char *input) { return test_run_program(CLI, args, input, tmpdir); }

#define EXPECT_FAILS(r, code, frag) \
    EXPECT((r).status == (code) && strstr((r).err, frag) != NULL, "status %d (want %d), stderr lacks '%s':\n%s", (r).status, code, frag, (r).err)

static void test_missing_model(void) {
    struct run r = run_cli("-m /nonexistent/model.gguf -p hi", NULL);
    EXPECT_FAILS(r, 1, "cannot load the model");
    EXPECT(strstr(r.err, "/nonexistent/model.gguf': No such file or directory") != NULL, "the path and the reason are not named:\n%s", r.err);
    run_free(&r);
}

static void test_corrupt_model(void) {
    char path[128], args[256];
    struct run r;
    snprintf(path, sizeof path, "%s/broken.gguf", tmpdir);
    test_write_file(path, "GGUF\x03\x00\x00\x00garbage", 15);
    snprintf(args, sizeof args, "-m %s -p hi", path);
    r = run_cli(args, NULL);
    EXPECT_FAILS(r, 1, "cannot load the model");
    EXPECT(strstr(r.err, "broken.gguf") != NULL && strstr(r.err, "truncated") != NULL, "no reason given:\n%s", r.err);
    run_free(&r);
    /* a valid GGUF that is not a model */
    r = run_cli("-m tests/fixtures/gguf/reference.gguf -p hi", NULL);
    EXPECT_FAILS(r, 1, "cannot load the model");
    EXPECT(strstr(r.err, "mllama") != NULL, "does not say what it wanted:\n%s", r.err);
    run_free(&r);
}

static void test_unreadable_images(void) {
    char path[128], args[512];
    struct run r = run_cli("-m " DEMO " --image /nonexistent.png -p hi", NULL);
    EXPECT_FAILS(r, 1, "/nonexistent.png: No such file or directory");
    run_free(&r);
    snprintf(path, sizeof path, "%s/not-an-image.png", tmpdir);
    test_write_file(path, "this is text, not a picture\n", 28);
    snprintf(args, sizeof args, "-m " DEMO " --image %s -p hi", path);
    r = run_cli(args, NULL);
    EXPECT_FAILS(r, 1, "cannot decode the image");
    run_free(&r);
    snprintf(args, sizeof args, "-m " DEMO " --image %s -p hi", tmpdir);
    r = run_cli(args, NULL);
    EXPECT_FAILS(r, 1, "is a directory");
    run_free(&r);
}

static void test_prompt_too_long(void) {
    char args[8192];
    int n = snprintf(args, sizeof args, "-m " DEMO " -c 64 -p '"), i;
    for (i = 0; i < 200; i++) n += snprintf(args + n, sizeof args - (size_t)n, "word%d ", i);
    snprintf(args + n, sizeof args - (size_t)n, "'");
    {
        struct run r = run_cli(args, NULL);
        EXPECT_FAILS(r, 1, "prompt too long");
        EXPECT(strstr(r.err, "context holds 64") != NULL, "no sizes given:\n%s", r.err);
        run_free(&r);
    }
}

static void test_bad_options(void) {
    static const struct { const char *args; int status; const char *says; } bad[] = {
        { "-p hi", 2, "a model is required" },
        { "-m " DEMO " --bogus -p hi", 2, "unknown option '--bogus'" },
        { "-m " DEMO " -n many -p hi", 2, "-n wants a whole number" },
        { "-m " DEMO " --top-p 0 -p hi", 1, "top_p" },
        { "-m " DEMO " -p", 2, "-p needs a value" },
    };
    struct run r;
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = run_cli(bad[i].args, NULL);
        EXPECT_FAILS(r, bad[i].status, bad[i].says);
        run_free(&r);
    }
    r = run_cli("--help", NULL);
    EXPECT(r.status == 0 && strstr(r.out, "--image FILE") != NULL, "help: status %d\n%s", r.status, r.out);
    run_free(&r);
}

/* -- the bundled demo model: the program's captions equal transformers' (tests/fixtures/demo/demo-ref.gguf) -- */

struct sample { char name[64], prompt[128], want[256]; };

/* The sample pictures of examples/images/ with their prompts and transformers' greedy captions. */
static int demo_samples(struct sample *out, int cap) {
    struct mms_gguf *ref = mms_gguf_open(DEMO_FIX "demo-ref.gguf");
    uint32_t n = 0, k;
    char key[64];
    const char *v;
    size_t len;
    EXPECT(ref && mms_gguf_get_u32(ref, "ref.n_samples", &n) == MMS_OK && n > 0, "demo reference: %s", mms_last_error());
    if (!ref) return 0;
    for (k = 0; k < n && (int)k < cap; k++) {
        snprintf(key, sizeof key, "case.%u.name", k);
        EXPECT(mms_gguf_get_str(ref, key, &v, &len) == MMS_OK, "%s", key);
        snprintf(out[k].name, sizeof out[k].name, "%.*s", (int)len, v);
        snprintf(key, sizeof key, "case.%u.prompt", k);
        EXPECT(mms_gguf_get_str(ref, key, &v, &len) == MMS_OK, "%s", key);
        snprintf(out[k].prompt, sizeof out[k].prompt, "%.*s", (int)len, v);
        snprintf(key, sizeof key, "case.%u.greedy_text", k);
        EXPECT(mms_gguf_get_str(ref, key, &v, &len) == MMS_OK, "%s", key);
        snprintf(out[k].want, sizeof out[k].want, "%.*s\n", (int)len, v);
    }
    mms_gguf_close(ref);
    return (int)k;
}

static void test_demo_captions(void) {
    struct sample sm[16];
    int n = demo_samples(sm, 16), k;
    char args[512];
    for (k = 0; k < n; k++) {
        struct run r;
        snprintf(args, sizeof args, "-m " DEMO " --image examples/images/%.63s -p '%.127s' -q", sm[k].name, sm[k].prompt);
        r = run_cli(args, NULL);
        EXPECT(r.status == 0 && !strcmp(r.out, sm[k].want), "%s: status %d, said '%s', transformers '%s'\n%s", sm[k].name, r.status, r.out, sm[k].want, r.err);
        run_free(&r);
    }
    /* the two-file layout, with the timings */
    if (n > 0) {
        struct run r;
        snprintf(args, sizeof args, "-m " DEMO_FIX "mllama-demo-text.gguf --mmproj " DEMO_FIX "mllama-demo-proj.gguf --image examples/images/%s -p '%s'",
                 sm[0].name, sm[0].prompt);
        r = run_cli(args, NULL);
        EXPECT(r.status == 0 && !strcmp(r.out, sm[0].want), "two-file layout: status %d, said '%s'\n%s", r.status, r.out, r.err);
        EXPECT(strstr(r.err, "image encode") && strstr(r.err, "cross K/V") && strstr(r.err, "tokens/s") && strstr(r.err, "memory CPU"),
               "no timings:\n%s", r.err);
        run_free(&r);
    }
}

/* A chat: an image attached in the first turn, a bad path that does not end it, a second picture
   in a later turn; the first answer is the one-shot caption. */
static void test_demo_chat(void) {
    struct sample sm[16];
    int n = demo_samples(sm, 16);
    char input[1024];
    struct run r;
    if (n < 2) return;
    snprintf(input, sizeof input, "/image examples/images/%s\n%s\n/image /no/such.png\n/image examples/images/%s\n%s\n/quit\n",
             sm[0].name, sm[0].prompt, sm[1].name, sm[1].prompt);
    r = run_cli("-m " DEMO " -i -q", input);
    EXPECT(r.status == 0 && !strncmp(r.out, sm[0].want, strlen(sm[0].want)), "status %d, answers:\n%s\nstderr:\n%s", r.status, r.out, r.err);
    EXPECT(strstr(r.err, "/no/such.png: No such file or directory") != NULL, "the bad path is not reported:\n%s", r.err);
    EXPECT(strlen(r.out) > strlen(sm[0].want) + 1 && r.out[strlen(r.out) - 1] == '\n', "no second answer:\n%s", r.out);
    run_free(&r);
}

/* --sched-debug 1 traces the scheduler's graphs and splits on stderr; the answer is unchanged. */
static void test_demo_sched_debug(void) {
    struct sample sm[1];
    char args[512];
    struct run r;
    if (demo_samples(sm, 1) < 1) return;
    snprintf(args, sizeof args, "-m " DEMO " --image examples/images/%s -p '%s' -q --sched-debug 1", sm[0].name, sm[0].prompt);
    r = run_cli(args, NULL);
    EXPECT(r.status == 0 && !strcmp(r.out, sm[0].want), "status %d, said '%s'", r.status, r.out);
    EXPECT(strstr(r.err, "'vision encoder + cross K/V'") && strstr(r.err, "## split 0 on CPU") && strstr(r.err, "'decode'"),
           "no scheduler trace:\n%s", r.err);
    run_free(&r);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mms-cli-XXXXXX");
    if (!mkdtemp(tmpdir)) { printf("cannot make a temporary folder\n"); return 1; }
    RUN(test_missing_model);
    RUN(test_corrupt_model);
    RUN(test_unreadable_images);
    RUN(test_prompt_too_long);
    RUN(test_bad_options);
    RUN(test_demo_captions);
    RUN(test_demo_chat);
    RUN(test_demo_sched_debug);
    {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
        if (system(cmd) != 0) printf("could not remove %s\n", tmpdir);
    }
    return test_summary();
}
