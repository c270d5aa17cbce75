/* The mllama program as a user runs it: the bundled model's answers on the sample pictures (single
   file and two-file layout, one shot, several pictures, chat) equal transformers', the option forms (--name=value, a positional prompt), the chat commands
   (/help, /image with quotes, a failed /image, /clear, a full context), and its errors: a missing
   or broken model, unreadable, undecodable and oversized images, a prompt longer than the context,
   bad and repeated options, a full disk on stdout; and build/batch's captions of several pictures
   at once, equal to transformers'; fresh pictures from another renderer answered right, none running
   away. CLI names the program under test (the Makefile
   passes the normal or the sanitizer build). */
#define MMSCHED_IMPLEMENTATION
#include "mmsched.h"
#include "test.h"
#include "run_program.h"
#include "ollama_store.h"

#ifndef CLI
#  define CLI "build/mllama"
#endif
#define DEMO "models/mllama-demo.gguf"
#define DEMO_FIX "tests/fixtures/demo/"
#define FRESH DEMO_FIX "fresh/"

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

/* The header of a PNG of w x h pixels (signature and IHDR, no pixel data). */
static void write_png_header(const char *path, uint32_t w, uint32_t h) {
    unsigned char b[33] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R' };
    int i;
    for (i = 0; i < 4; i++) { b[16 + i] = (unsigned char)(w >> (24 - 8 * i)); b[20 + i] = (unsigned char)(h >> (24 - 8 * i)); }
    b[24] = 8;    /* bit depth */
    b[25] = 2;    /* RGB */
    test_write_file(path, b, sizeof b);
}

static void test_unreadable_images(void) {
    char path[128], args[512];
    char *png;
    long size = 0;
    struct run r = run_cli("-m " DEMO " --image /nonexistent.png -p hi", NULL);
    EXPECT_FAILS(r, 1, "/nonexistent.png: No such file or directory");
    EXPECT(strstr(r.err, "JPEG") == NULL, "formats listed for a missing file:\n%s", r.err);
    run_free(&r);
    /* not a picture at all: the formats are the point */
    snprintf(path, sizeof path, "%s/not-an-image.png", tmpdir);
    test_write_file(path, "this is text, not a picture\n", 28);
    snprintf(args, sizeof args, "-m " DEMO " --image %s -p hi", path);
    r = run_cli(args, NULL);
    EXPECT_FAILS(r, 1, "not a picture this program reads (JPEG, PNG, BMP or GIF)");
    run_free(&r);
    /* a PNG cut short: the format is fine, the file is not */
    png = test_slurp("examples/images/circle.png", &size);
    EXPECT(png && size > 2000, "examples/images/circle.png");
    if (png) {
        snprintf(path, sizeof path, "%s/cut.png", tmpdir);
        test_write_file(path, png, (size_t)size / 2);
        free(png);
        snprintf(args, sizeof args, "-m " DEMO " --image %s -p hi", path);
        r = run_cli(args, NULL);
        EXPECT_FAILS(r, 1, "damaged or cut short");
        EXPECT(strstr(r.err, "JPEG, PNG") == NULL, "formats listed for a damaged PNG:\n%s", r.err);
        run_free(&r);
    }
    snprintf(args, sizeof args, "-m " DEMO " --image %s -p hi", tmpdir);
    r = run_cli(args, NULL);
    EXPECT_FAILS(r, 1, "is a directory");
    run_free(&r);
    /* 16384 x 16384 is refused from its header, before any decoding (the file has no pixel data) */
    snprintf(path, sizeof path, "%s/huge.png", tmpdir);
    write_png_header(path, 16384, 16384);
    snprintf(args, sizeof args, "-m " DEMO " --image %s -p hi", path);
    r = run_cli(args, NULL);
    EXPECT_FAILS(r, 1, "16384 x 16384 pixels is more than 50000000, the most allowed");
    run_free(&r);
    r = run_cli("-m " DEMO " --image examples/images/circle.png --max-pixels=16383 -p hi", NULL);
    EXPECT_FAILS(r, 1, "128 x 128 pixels is more than 16383, the most allowed");
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
        { "-m " DEMO " -n many -p hi", 2, "-n wants a whole number from 1 to 1048576, got 'many'" },
        { "-m " DEMO " -p", 2, "-p needs a value" },
        { "-m " DEMO " --seed=", 2, "--seed wants a whole number from 0 to 18446744073709551615, got ''" },
        { "-m " DEMO " -s abc hi", 2, "-s wants a whole number from 0 to 18446744073709551615, got 'abc'" },
        { "-m " DEMO " -s -1 hi", 2, "got '-1'" },
        { "-m " DEMO " -s 18446744073709551616 hi", 2, "got '18446744073709551616'" },
        { "-m " DEMO " -s 12x hi", 2, "got '12x'" },
        { "-m " DEMO " --temp inf hi", 2, "--temp wants a finite number of at least 0, got 'inf'" },
        { "-m " DEMO " --temp=-0.5 hi", 2, "--temp wants a finite number of at least 0, got '-0.5'" },
        { "-m " DEMO " --top-p 0 hi", 2, "--top-p wants a number above 0 and at most 1, got '0'" },
        { "-m " DEMO " --top-p 1.5 hi", 2, "got '1.5'" },
        { "-m " DEMO " --min-p nan hi", 2, "--min-p wants a number from 0 to 1, got 'nan'" },
        { "-m " DEMO " --repeat-penalty 0 hi", 2, "--repeat-penalty wants a finite number above 0, got '0'" },
        { "-m " DEMO " --top-k -3 hi", 2, "--top-k wants a whole number from 0 to 1073741824, got '-3'" },
        { "-m " DEMO " -m other.gguf hi", 2, "-m was given twice: '" DEMO "' and 'other.gguf'" },
        { "-m " DEMO " -p one two", 2, "the prompt was given twice: 'one' and 'two'" },
        { "-m " DEMO " first -p second", 2, "the prompt was given twice: 'first' and 'second'" },
        { "-m " DEMO " --quiet=yes hi", 2, "--quiet takes no value (got 'yes')" },
        { "-m " DEMO " --no-repack=1 hi", 2, "--no-repack takes no value (got '1')" },
        { "-m " DEMO " --raw --image examples/images/circle.png hi", 2, "with --raw the prompt places each picture with <|image|>: it has 0 for 1 --image" },
        { "-m " DEMO " --image examples/images/circle.png '<|image|>hi'", 2, "the prompt has <|image|> in it" },
    };
    struct run r;
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = run_cli(bad[i].args, NULL);
        EXPECT_FAILS(r, bad[i].status, bad[i].says);
        run_free(&r);
    }
    r = run_cli("--help", NULL);
    EXPECT(r.status == 0 && strstr(r.out, "--image FILE") != NULL && strstr(r.out, "--max-pixels") != NULL, "help: status %d\n%s", r.status, r.out);
    run_free(&r);
}

/* -- the bundled demo model: the program's answers equal transformers' (tests/fixtures/demo/demo-ref.gguf) -- */

struct sample {
    char    kind[16], files[3][64], turns[4][128], want[512];   /* want: every answer, a line each */
    int     n_files, n_turns, turn_images[4];
};

static void split_into(char *s, const char *sep, char *out, size_t each, int cap, int *n) {
    char *save = NULL, *t;
    *n = 0;
    for (t = strtok_r(s, sep, &save); t && *n < cap; t = strtok_r(NULL, sep, &save)) snprintf(out + (size_t)(*n)++ * each, each, "%s", t);
}

/* The sample conversations of examples/images/ with transformers' greedy answers. */
static int demo_samples(struct sample *out, int cap) {
    struct mms_gguf *ref = mms_gguf_open(DEMO_FIX "demo-ref.gguf");
    uint32_t n = 0, k;
    char key[64], buf[512];
    const char *v;
    size_t len;
    int64_t n_ti = 0;
    EXPECT(ref && mms_gguf_get_u32(ref, "ref.n_samples", &n) == MMS_OK && n > 0, "demo reference: %s", mms_last_error());
    if (!ref) return 0;
    for (k = 0; k < n && (int)k < cap; k++) {
        struct sample *s = &out[k];
        memset(s, 0, sizeof *s);
        if (mms_gguf_find_key(ref, "case.0.kind") < 0) {        /* the first demo model's reference: one caption each */
            snprintf(key, sizeof key, "case.%u.name", k);
            EXPECT(mms_gguf_get_str(ref, key, &v, &len) == MMS_OK, "%s", key);
            snprintf(s->files[0], sizeof s->files[0], "%.*s", (int)len, v);
            snprintf(key, sizeof key, "case.%u.prompt", k);
            EXPECT(mms_gguf_get_str(ref, key, &v, &len) == MMS_OK, "%s", key);
            snprintf(s->turns[0], sizeof s->turns[0], "%.*s", (int)len, v);
            snprintf(key, sizeof key, "case.%u.greedy_text", k);
            EXPECT(mms_gguf_get_str(ref, key, &v, &len) == MMS_OK, "%s", key);
            snprintf(s->want, sizeof s->want, "%.*s\n", (int)len, v);
            snprintf(s->kind, sizeof s->kind, "caption");
            s->n_files = s->n_turns = s->turn_images[0] = 1;
            continue;
        }
        snprintf(key, sizeof key, "case.%u.kind", k);
        EXPECT(mms_gguf_get_str(ref, key, &v, &len) == MMS_OK, "%s", key);
        snprintf(s->kind, sizeof s->kind, "%.*s", (int)len, v);
        snprintf(key, sizeof key, "case.%u.name", k);
        EXPECT(mms_gguf_get_str(ref, key, &v, &len) == MMS_OK, "%s", key);
        snprintf(buf, sizeof buf, "%.*s", (int)len, v);
        split_into(buf, " ", s->files[0], sizeof s->files[0], 3, &s->n_files);
        snprintf(key, sizeof key, "case.%u.prompt", k);
        EXPECT(mms_gguf_get_str(ref, key, &v, &len) == MMS_OK, "%s", key);
        snprintf(buf, sizeof buf, "%.*s", (int)len, v);
        split_into(buf, "\n", s->turns[0], sizeof s->turns[0], 4, &s->n_turns);
        snprintf(key, sizeof key, "case.%u.turn_images", k);
        EXPECT(mms_gguf_get_arr_i32(ref, key, s->turn_images, 4, &n_ti) == MMS_OK && n_ti == s->n_turns, "%s", key);
        snprintf(key, sizeof key, "case.%u.answers_text", k);
        EXPECT(mms_gguf_get_str(ref, key, &v, &len) == MMS_OK, "%s", key);
        snprintf(s->want, sizeof s->want, "%.*s\n", (int)len, v);
    }
    mms_gguf_close(ref);
    return (int)k;
}

/* The program's stdin for a sample as a chat: /image lines before the turns that attach pictures. */
static void chat_input(const struct sample *s, const char *dir, char *out, size_t cap) {
    size_t n = 0;
    int t, j, f = 0;
    for (t = 0; t < s->n_turns; t++) {
        for (j = 0; j < s->turn_images[t]; j++) n += (size_t)snprintf(out + n, cap - n, "/image %s%s\n", dir, s->files[f++]);
        n += (size_t)snprintf(out + n, cap - n, "%s\n", s->turns[t]);
    }
    snprintf(out + n, cap - n, "/quit\n");
}

/* A one-turn sample as arguments: each picture (in dir) with --image, the prompt last (positional). */
static void oneshot_args(const struct sample *s, const char *dir, const char *extra, char *out, size_t cap) {
    size_t n = (size_t)snprintf(out, cap, "-m " DEMO " %s", extra);
    int j;
    for (j = 0; j < s->n_files; j++) n += (size_t)snprintf(out + n, cap - n, " --image %s%s", dir, s->files[j]);
    snprintf(out + n, cap - n, " '%s'", s->turns[0]);
}

static void test_demo_samples(void) {
    struct sample sm[16];
    int n = demo_samples(sm, 16), k, n_multi = 0, n_chat = 0;
    char args[1024], input[1024];
    for (k = 0; k < n; k++) {
        struct run r;
        if (sm[k].n_turns == 1) {
            oneshot_args(&sm[k], "examples/images/", "-q", args, sizeof args);
            r = run_cli(args, NULL);
            n_multi += sm[k].n_files > 1;
        } else {
            chat_input(&sm[k], "examples/images/", input, sizeof input);
            r = run_cli("-m " DEMO " -i -q", input);
            n_chat++;
        }
        EXPECT(r.status == 0 && !strcmp(r.out, sm[k].want), "%s (%s): status %d, said '%s', transformers '%s'\n%s", sm[k].files[0], sm[k].kind,
               r.status, r.out, sm[k].want, r.err);
        run_free(&r);
    }
    (void)n_multi;
    (void)n_chat;
    /* the two-file layout, --name=value options, with the timings (and --no-repack: nothing to
       repack in the demo's f32 weights, the same answer) */
    if (n > 0) {
        struct run r;
        snprintf(args, sizeof args, "--model=" DEMO_FIX "mllama-demo-text.gguf --mmproj=" DEMO_FIX "mllama-demo-proj.gguf --image=examples/images/%s "
                 "--no-repack --prompt='%s'", sm[0].files[0], sm[0].turns[0]);
        r = run_cli(args, NULL);
        EXPECT(r.status == 0 && !strcmp(r.out, sm[0].want), "two-file layout: status %d, said '%s'\n%s", r.status, r.out, r.err);
        EXPECT(strstr(r.err, "image encode") && strstr(r.err, "cross K/V") && strstr(r.err, "tokens/s") && strstr(r.err, "memory CPU"),
               "no timings:\n%s", r.err);
        run_free(&r);
    }
}

/* build/batch captions the one-picture samples several at once (3 sequences for more pictures, so
   sequences are cleared and reused): each line is the picture and transformers' answer. BATCH
   names the program (the Makefile passes it where it builds one). */
static void test_batch_captions(void) {
#ifdef BATCH
    struct sample sm[16];
    int n = demo_samples(sm, 16), k, n_used = 0;
    char args[2048];
    size_t len;
    struct run r;
    len = (size_t)snprintf(args, sizeof args, "-m " DEMO " -K 3 -p '%s'", n > 0 ? sm[0].turns[0] : "");
    for (k = 0; k < n; k++)
        if (sm[k].n_turns == 1 && sm[k].n_files == 1 && !strcmp(sm[k].turns[0], sm[0].turns[0])) {
            len += (size_t)snprintf(args + len, sizeof args - len, " examples/images/%s", sm[k].files[0]);
            n_used++;
        }
    EXPECT(n_used >= 4, "only %d one-picture samples with the same prompt", n_used);
    r = test_run_program(BATCH, args, NULL, tmpdir);
    EXPECT(r.status == 0, "batch: status %d\n%s", r.status, r.err);
    for (k = 0; k < n; k++) {
        char line[640];
        if (!(sm[k].n_turns == 1 && sm[k].n_files == 1 && !strcmp(sm[k].turns[0], sm[0].turns[0]))) continue;
        snprintf(line, sizeof line, "examples/images/%s: %s", sm[k].files[0], sm[k].want);   /* want ends with a newline */
        EXPECT(strstr(r.out, line) != NULL, "batch's caption of %s is not transformers' '%s':\n%s", sm[k].files[0], sm[k].want, r.out);
    }
    EXPECT(strstr(r.err, "captioned (0 failed) with 3 at once") && strstr(r.err, "tokens/s as it saw them"), "no progress or timings:\n%s", r.err);
    run_free(&r);
    r = test_run_program(BATCH, "-m " DEMO " -K 2 examples/images/circle.png tests/fixtures/demo/demo-ref.gguf", NULL, tmpdir);
    EXPECT(r.status == 1 && strstr(r.out, "examples/images/circle.png: ") && strstr(r.err, "demo-ref.gguf: not a picture"),
           "a bad picture among good ones: status %d\n%s%s", r.status, r.out, r.err);
    run_free(&r);
#else
    test_skip("build/batch is not built for this target");
#endif
}

/* -m ollama:NAME[:TAG]: a model in Ollama's store (tests/ollama_store.h), here the demo model as
   the model layer (latest) and its two-file layout as model and projector layers (11b): the same
   answers as transformers', in build/mllama and build/batch; a tag the store lacks names the
   manifest looked for. */
static void test_ollama_models(void) {
    const struct test_ollama_layer one[] = { { "model", DEMO, NULL }, { "template", NULL, "{{ .Prompt }}" }, { "license", NULL, "license" } };
    const struct test_ollama_layer two[] = { { "model", DEMO_FIX "mllama-demo-text.gguf", NULL }, { "projector", DEMO_FIX "mllama-demo-proj.gguf", NULL },
                                             { "params", NULL, "{}" } };
    static const char *const names[] = { "ollama:llama3.2-vision", "ollama:llama3.2-vision:11b" };
    struct sample sm[1];
    char store[128], args[1024];
    struct run r;
    int i;
    if (demo_samples(sm, 1) < 1) return;
    snprintf(store, sizeof store, "%s/ollama", tmpdir);
    EXPECT(test_ollama_store(store, 1, "llama3.2-vision", "latest", one, 3, 0) && test_ollama_store(store, 2, "llama3.2-vision", "11b", two, 3, 0),
           "cannot write %s", store);
    test_setenv("OLLAMA_MODELS", store);
    for (i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "-m %s -q --image examples/images/%s '%s'", names[i], sm[0].files[0], sm[0].turns[0]);
        r = run_cli(args, NULL);
        EXPECT(r.status == 0 && !strcmp(r.out, sm[0].want), "%s: status %d, said '%s', transformers '%s'\n%s", names[i], r.status, r.out, sm[0].want, r.err);
        run_free(&r);
#ifdef BATCH
        snprintf(args, sizeof args, "-m %s -p '%s' examples/images/%s", names[i], sm[0].turns[0], sm[0].files[0]);
        r = test_run_program(BATCH, args, NULL, tmpdir);
        snprintf(args, sizeof args, "examples/images/%s: %s", sm[0].files[0], sm[0].want);
        EXPECT(r.status == 0 && strstr(r.out, args) != NULL, "batch %s: status %d, said '%s'\n%s", names[i], r.status, r.out, r.err);
        run_free(&r);
#endif
    }
    r = run_cli("-m ollama:llama3.2-vision:90b -p hi", NULL);
    EXPECT_FAILS(r, 1, "cannot load the model");
    EXPECT(strstr(r.err, "/ollama/manifests/registry.ollama.ai/library/llama3.2-vision/90b") != NULL, "the manifest is not named:\n%s", r.err);
    run_free(&r);
    r = run_cli("-m ollama:llama3.2-vision:11b --mmproj " DEMO_FIX "mllama-demo-proj.gguf -p hi", NULL);
    EXPECT_FAILS(r, 1, "give no projector file");
    run_free(&r);
    test_setenv("OLLAMA_MODELS", NULL);
}

/* Edges: an empty prompt is refused; --raw without the chat template's assistant header warns (the
   answer may well be empty); with the conversation's pictures all attached, /image of a missing
   file says the file is missing, not that the conversation is full; --max-images names its range
   in the error and the help; a folder without config.json says what a checkpoint folder holds;
   the timings say which run they belong to. build/batch as build/mllama: --help exits 0 on
   stdout, a missing -m or no pictures say so, a picture over 50 million pixels is refused from
   its header, ranges read "from 1 to 64". */
static void test_edges(void) {
    static const char *const empty[] = { "-m " DEMO " -p ''", "-m " DEMO " '  '", "-m " DEMO " -i -p ''" };
    char args[512], path[128];
    struct run r;
    size_t i;
    for (i = 0; i < sizeof empty / sizeof empty[0]; i++) {
        r = run_cli(empty[i], NULL);
        EXPECT_FAILS(r, 2, "the prompt is empty");
        run_free(&r);
    }
    r = run_cli("-m " DEMO " -q --raw --image examples/images/circle.png '<|image|>Describe this image.'", NULL);
    EXPECT(r.status == 0 && strstr(r.err, "warning: with --raw") && strstr(r.err, "<|start_header_id|>assistant<|end_header_id|>"),
           "no hint for a raw prompt without the template: status %d\n%s", r.status, r.err);
    run_free(&r);
    r = run_cli("-m " DEMO " -q --raw --image examples/images/circle.png "
                "'<|start_header_id|>user<|end_header_id|><|image|>Describe this image.<|eot_id|><|start_header_id|>assistant<|end_header_id|>'", NULL);
    EXPECT(r.status == 0 && !strstr(r.err, "warning"), "a warning for a raw prompt in the template's form: status %d\n%s", r.status, r.err);
    run_free(&r);
    r = run_cli("-m " DEMO " -i -q", "/image examples/images/circle.png\n/image examples/images/circle.png\n/image /no/such.png\n"
                                     "/image examples/images/circle.png\n/quit\n");
    EXPECT(r.status == 0 && strstr(r.err, "no picture attached: /no/such.png: No such file or directory") &&
           strstr(r.err, "no picture attached: this conversation holds at most 2 images"),
           "the missing file is not reported first, or the full conversation not after:\n%s", r.err);
    run_free(&r);
    r = run_cli("-m " DEMO " --max-images 0 hi", NULL);
    EXPECT_FAILS(r, 2, "--max-images wants a whole number from 1 to 64, got '0'");
    run_free(&r);
    r = run_cli("--help", NULL);
    EXPECT(r.status == 0 && strstr(r.out, "--max-images N      images per conversation, 1 to 64"), "help:\n%s", r.out);
    run_free(&r);
    snprintf(path, sizeof path, "%s/emptydir", tmpdir);
    test_make_dir(path);
    snprintf(args, sizeof args, "-m %s -p hi", path);
    r = run_cli(args, NULL);
    EXPECT_FAILS(r, 1, "is a folder without config.json");
    EXPECT(strstr(r.err, "tokenizer.json") && strstr(r.err, "model.safetensors") && !strstr(r.err, "not a regular file"), "%s", r.err);
    run_free(&r);
    r = run_cli("-m " DEMO " --image examples/images/circle.png 'Describe this image.'", NULL);
    EXPECT(r.status == 0 && strstr(r.err, "timings of this run (" DEMO "; pictures examples/images/circle.png):\n"), "timings:\n%s", r.err);
    run_free(&r);
#ifdef BATCH
    r = test_run_program(BATCH, "--help", NULL, tmpdir);
    EXPECT(r.status == 0 && strstr(r.out, "usage: batch") && strstr(r.out, "--keep") && !*r.err, "batch --help: status %d\n%s%s", r.status, r.out, r.err);
    run_free(&r);
    r = test_run_program(BATCH, "examples/images/circle.png", NULL, tmpdir);
    EXPECT_FAILS(r, 2, "batch: a model is required (-m FILE)");
    run_free(&r);
    r = test_run_program(BATCH, "-m " DEMO, NULL, tmpdir);
    EXPECT_FAILS(r, 2, "batch: no pictures given");
    run_free(&r);
    r = test_run_program(BATCH, "-m " DEMO " -K 0 examples/images/circle.png", NULL, tmpdir);
    EXPECT_FAILS(r, 2, "-K wants a whole number from 1 to 64, got '0'");
    run_free(&r);
    snprintf(path, sizeof path, "%s/huge.png", tmpdir);
    write_png_header(path, 16384, 16384);
    snprintf(args, sizeof args, "-m " DEMO " %s", path);
    r = test_run_program(BATCH, args, NULL, tmpdir);
    EXPECT_FAILS(r, 1, "16384 x 16384 pixels is more than 50000000");
    run_free(&r);
#endif
}

/* More threads than cores: a warning, and the same answer. */
static void test_threads_warning(void) {
    struct sample sm[1];
    char args[512], extra[64];
    struct run r;
    if (demo_samples(sm, 1) < 1) return;
    snprintf(extra, sizeof extra, "-q -t %d", mms_cpu_count() + 1);
    oneshot_args(&sm[0], "examples/images/", extra, args, sizeof args);
    r = run_cli(args, NULL);
    EXPECT(r.status == 0 && !strcmp(r.out, sm[0].want), "status %d, said '%s'\n%s", r.status, r.out, r.err);
    EXPECT(strstr(r.err, "warning:") && strstr(r.err, "at most one per core works at a time"), "no warning:\n%s", r.err);
    run_free(&r);
}

/* examples/caption.c, the page of C: its captions of the one-picture samples are transformers';
   bad arguments and files give its usage or the library's message. CAPTION names the program. */
static void test_caption_example(void) {
#ifdef CAPTION
    struct sample sm[16];
    int n = demo_samples(sm, 16), k, n_used = 0;
    char args[512];
    struct run r;
    for (k = 0; k < n; k++) {
        if (sm[k].n_turns != 1 || sm[k].n_files != 1 || strcmp(sm[k].turns[0], "Describe this image.") != 0) continue;
        snprintf(args, sizeof args, DEMO " examples/images/%s", sm[k].files[0]);
        r = test_run_program(CAPTION, args, NULL, tmpdir);
        EXPECT(r.status == 0 && !strcmp(r.out, sm[k].want), "caption %s: status %d, said '%s', transformers '%s'\n%s", sm[k].files[0], r.status,
               r.out, sm[k].want, r.err);
        run_free(&r);
        n_used++;
    }
    EXPECT(n_used >= 4, "only %d one-picture captions in the reference", n_used);
    r = test_run_program(CAPTION, DEMO, NULL, tmpdir);
    EXPECT(r.status == 2 && strstr(r.err, "usage: caption MODEL PICTURE"), "one argument: status %d\n%s", r.status, r.err);
    run_free(&r);
    r = test_run_program(CAPTION, DEMO " README.md", NULL, tmpdir);
    EXPECT(r.status == 1 && strstr(r.err, "caption: README.md: not a picture this program reads") && !strstr(r.err, "mmsched error"),
           "not a picture: status %d\n%s", r.status, r.err);
    run_free(&r);
    r = test_run_program(CAPTION, "/nonexistent/model.gguf examples/images/circle.png", NULL, tmpdir);
    EXPECT(r.status == 1 && strstr(r.err, "/nonexistent/model.gguf': No such file or directory"), "no model: status %d\n%s", r.status, r.err);
    run_free(&r);
#else
    test_skip("built without CAPTION (the Makefile names the program)");
#endif
}

/* A full disk: the answer cannot be written, and the program says so and fails. */
static void test_write_error(void) {
    struct sample sm[1];
    char args[512], cmd[1024], err_path[128];
    char *err;
    int st;
    FILE *full = fopen("/dev/full", "w");
    if (!full) { printf("    /dev/full is missing: write errors not tried\n"); return; }
    fclose(full);
    if (demo_samples(sm, 1) < 1) return;
    oneshot_args(&sm[0], "examples/images/", "-q", args, sizeof args);
    snprintf(err_path, sizeof err_path, "%s/err-full", tmpdir);
    snprintf(cmd, sizeof cmd, "%s %s </dev/null >/dev/full 2>%s", CLI, args, err_path);
    st = system(cmd);
    err = test_slurp(err_path, NULL);
    EXPECT(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1 && err && strstr(err, "cannot write the answer: No space left on device"),
           "status %d, stderr:\n%s", st, err ? err : "");
    free(err);
}

/* A chat: the banner names /help; /help lists the commands; /image with spaces and quotes; a bad
   path keeps the picture already attached (with a warning); a second picture in a later turn. */
static void test_demo_chat(void) {
    struct sample sm[16];
    int n = demo_samples(sm, 16), k, chat = -1;
    char input[2048];
    struct run r;
    for (k = 0; k < n; k++) if (sm[k].n_turns == 2 && sm[k].turn_images[0] == 1 && sm[k].turn_images[1] == 1) chat = k;
    if (chat < 0 && n >= 2 && n < 16) {    /* the first demo model's reference has no chats: samples 0 and 1, the first answer checked */
        chat = n;
        sm[chat] = sm[0];
        snprintf(sm[chat].files[1], sizeof sm[chat].files[1], "%s", sm[1].files[0]);
        snprintf(sm[chat].turns[1], sizeof sm[chat].turns[1], "%s", sm[1].turns[0]);
        sm[chat].n_files = sm[chat].n_turns = 2;
        sm[chat].turn_images[1] = 1;
    }
    if (chat < 0) return;
    snprintf(input, sizeof input, "/help\n/image   \"examples/images/%s\"  \n/image /no/such.png\n%s\n/image 'examples/images/%s'\n%s\n/quit\n",
             sm[chat].files[0], sm[chat].turns[0], sm[chat].files[1], sm[chat].turns[1]);
    r = run_cli("-m " DEMO " -i -q", input);
    /* a chat of the reference: both answers are transformers'; the made-up one: the first is */
    EXPECT(r.status == 0 && (chat < n ? !strcmp(r.out, sm[chat].want)
                                      : !strncmp(r.out, sm[chat].want, strlen(sm[chat].want)) && strlen(r.out) > strlen(sm[chat].want) + 1),
           "status %d, answers:\n%s\ntransformers:\n%s\nstderr:\n%s", r.status, r.out, sm[chat].want, r.err);
    EXPECT(strstr(r.err, "/help lists the commands") != NULL, "no banner:\n%s", r.err);
    EXPECT(strstr(r.err, "/clear ") != NULL && strstr(r.err, "/image FILE ") != NULL, "/help lists no commands:\n%s", r.err);
    EXPECT(strstr(r.err, "warning: no picture attached: /no/such.png: No such file or directory") != NULL &&
           strstr(r.err, "still attached to your next message: 1 picture") != NULL, "the bad path is not reported:\n%s", r.err);
    run_free(&r);
}

/* A conversation that outgrows the context ends its turn with a hint and the chat goes on; /clear
   forgets the conversation, so the same first turn fits again and gives the same answer. */
static void test_chat_context_and_clear(void) {
    struct sample sm[1];
    char input[1024], *last;
    struct run r;
    if (demo_samples(sm, 1) < 1) return;
    snprintf(input, sizeof input, "/image examples/images/%s\n%s\n/image examples/images/%s\n%s\n/bogus\n/clear\n/image examples/images/%s\n%s\n/quit\n",
             sm[0].files[0], sm[0].turns[0], sm[0].files[0], sm[0].turns[0], sm[0].files[0], sm[0].turns[0]);
    r = run_cli("-m " DEMO " -i -q -c 40", input);
    EXPECT(r.status == 0, "status %d\n%s", r.status, r.err);
    EXPECT(strstr(r.err, "/clear starts a new conversation") != NULL && strstr(r.err, "40") != NULL, "no hint:\n%s", r.err);
    EXPECT(strstr(r.err, "unknown command /bogus") != NULL && strstr(r.err, "the conversation is cleared") != NULL, "commands:\n%s", r.err);
    EXPECT(!strncmp(r.out, sm[0].want, strlen(sm[0].want)), "first answer '%s', transformers '%s'", r.out, sm[0].want);
    last = strlen(r.out) > strlen(sm[0].want) ? r.out + strlen(r.out) - strlen(sm[0].want) : r.out;
    EXPECT(!strcmp(last, sm[0].want) && last > r.out && last[-1] == '\n', "after /clear: '%s', transformers '%s'", r.out, sm[0].want);
    run_free(&r);
}

/* An answer that runs away: more than 40 words, or one word 4 or more times in a row. */
static int runaway(const char *text) {
    char prev[64] = "", word[64];
    int n_words = 0, run = 0, len;
    while (sscanf(text, " %63s%n", word, &len) == 1) {
        text += len;
        run = strcmp(word, prev) ? 1 : run + 1;
        if (++n_words > 40 || run >= 4) return 1;
        snprintf(prev, sizeof prev, "%s", word);
    }
    return 0;
}

/* Fresh pictures drawn by another renderer than the training one (tests/fixtures/demo/fresh/, from
   tools/eval_demo.py --slice: 1:4..4:1, 16 pixels a side and up, PNG and JPEG, pictures outside the
   model's world): the expected answers follow from the scene descriptions, not from any model. The
   program must answer at least FRESH_BAR of them right and never run away. */
#define FRESH_BAR 0.8      /* the bundled model: 28 of 30, the ones before it 29, 29, 28, 23 (the full evaluation: tools/README.md) */
static void test_fresh_pictures(void) {
    char *tsv = test_slurp(FRESH "cases.tsv", NULL), *line, *save = NULL;
    int n = 0, right = 0, n_runaway = 0;
    EXPECT(tsv != NULL, "%scases.tsv is missing", FRESH);
    if (!tsv) return;
    for (line = strtok_r(tsv, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *field[4], *tab = line, *turn, *bar, args[1024], input[1024];
        const char *last;
        struct sample sm;
        int k, ran_away;
        size_t len;
        struct run r;
        if (line[0] == '#') continue;
        for (k = 0; k < 4; k++) {               /* kind, files, turns, expected (may be empty) */
            field[k] = tab;
            tab = tab ? strchr(tab, '\t') : NULL;
            if (tab) *tab++ = 0;
        }
        EXPECT(field[2] != NULL, "cases.tsv: a short line");
        if (!field[2]) break;
        if (!field[3]) field[3] = "";
        memset(&sm, 0, sizeof sm);
        split_into(field[1], " ", sm.files[0], sizeof sm.files[0], 3, &sm.n_files);
        if (!strcmp(field[0], "chat")) {        /* turns split by " | "; '+' attaches the next file */
            for (turn = field[2]; turn && sm.n_turns < 4; turn = bar ? bar + 3 : NULL) {
                bar = strstr(turn, " | ");
                if (bar) *bar = 0;
                sm.turn_images[sm.n_turns] = turn[0] == '+';
                snprintf(sm.turns[sm.n_turns++], sizeof sm.turns[0], "%s", turn + (turn[0] == '+'));
            }
            chat_input(&sm, FRESH, input, sizeof input);
            r = run_cli("-m " DEMO " -i -q", input);
        } else {
            snprintf(sm.turns[0], sizeof sm.turns[0], "%s", field[2]);
            oneshot_args(&sm, FRESH, "-q", args, sizeof args);
            r = run_cli(args, NULL);
        }
        EXPECT(r.status == 0, "%s %s: status %d\n%s", field[0], sm.files[0], r.status, r.err);
        ran_away = runaway(r.out);
        n_runaway += ran_away;
        EXPECT(!ran_away, "%s %s: a runaway answer '%.120s...'", field[0], sm.files[0], r.out);
        /* the last answer (a chat's second) is the one checked */
        len = strlen(r.out);
        if (len && r.out[len - 1] == '\n') r.out[--len] = 0;
        last = strrchr(r.out, '\n') ? strrchr(r.out, '\n') + 1 : r.out;
        right += field[3][0] && !strcmp(last, field[3]);
        n += field[3][0] != 0;
        run_free(&r);
    }
    free(tsv);
    printf("    fresh pictures: %d of %d answered right, %d runaway answers\n", right, n, n_runaway);
    EXPECT(n >= 20, "only %d cases with an expected answer", n);
    EXPECT(right >= FRESH_BAR * n, "%d of %d fresh pictures answered right; the bar is %.0f%%", right, n, 100.0 * FRESH_BAR);
}

/* --sched-debug 1 traces the scheduler's graphs and splits on stderr; the answer is unchanged. */
static void test_demo_sched_debug(void) {
    struct sample sm[1];
    char args[512];
    struct run r;
    if (demo_samples(sm, 1) < 1) return;
    oneshot_args(&sm[0], "examples/images/", "-q --sched-debug 1", args, sizeof args);
    r = run_cli(args, NULL);
    EXPECT(r.status == 0 && !strcmp(r.out, sm[0].want), "status %d, said '%s'", r.status, r.out);
    EXPECT(strstr(r.err, "'vision encoder + cross K/V'") && strstr(r.err, "## split 0 on CPU") && strstr(r.err, "'decode'"),
           "no scheduler trace:\n%s", r.err);
    run_free(&r);
}

/* --json-schema and --json: the demo model's answers (greedy and sampled, several pictures) are read
   whole by the schema's own matcher and by the strict JSON reader; schema errors and option clashes
   are refused; build/batch's answers are build/mllama's. What the answers mean is not asked: the demo model never saw JSON. */
static void test_json_schema(void) {
    static const char schema[] = "{\"type\":\"object\",\"properties\":{\"shape\":{\"enum\":[\"circle\",\"square\",\"triangle\"]},"
                                 "\"colour\":{\"enum\":[\"red\",\"green\",\"blue\"]},\"count\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":9}},"
                                 "\"required\":[\"shape\",\"colour\",\"count\"],\"additionalProperties\":false}";
    static const char unsupported[] = "{\"type\":\"object\",\"minProperties\":1}";
    static const char *const pictures[] = { "circle.png", "triangle.jpg", "three-shapes.png" };
    static const char *const sampling[] = { "", "--temp 0.8 --seed 5", "--temp 1.5 --top-k 50 --seed 9" };
    struct mms_grammar *g = mms_grammar_from_json_schema(schema, sizeof schema - 1);
    char path[128], bad[128], args[512];
    size_t k;
    struct run r;
    snprintf(path, sizeof path, "%s/schema.json", tmpdir);
    test_write_file(path, schema, sizeof schema - 1);
    for (k = 0; g && k < 3; k++) {
        struct mms_constraint *c = mms_constraint_new(g, NULL);
        struct mms_json *j;
        size_t n;
        snprintf(args, sizeof args, "-m " DEMO " --image examples/images/%s --json-schema %s %s -q 'What is in the picture?'", pictures[k], path, sampling[k]);
        r = run_cli(args, NULL);
        n = strlen(r.out);
        if (n && r.out[n - 1] == '\n') n--;
        EXPECT(r.status == 0 && mms_constraint_accept_bytes(c, r.out, n) == MMS_OK && mms_constraint_is_complete(c), "%s: status %d, said '%s'\n%s", args, r.status, r.out, r.err);
        EXPECT((j = mms_json_parse(r.out, n, "answer")) != NULL, "%s: not JSON: %s", r.out, mms_last_error());
        mms_json_free(j);
        mms_constraint_free(c);
        run_free(&r);
    }
    mms_grammar_free(g);
    r = run_cli("-m " DEMO " --image examples/images/circle.png --json -q -n 400 'Describe.'", NULL);
    EXPECT(r.status == 0 && r.out[0] == '{', "--json: status %d, said '%s'\n%s", r.status, r.out, r.err);
    EXPECT(strstr(r.err, "before its JSON was complete") || (strlen(r.out) >= 2 && r.out[strlen(r.out) - 2] == '}'), "--json: an object or the warning:\n%s", r.err);
    run_free(&r);
    snprintf(bad, sizeof bad, "%s/unsupported.json", tmpdir);
    test_write_file(bad, unsupported, strlen(unsupported));
    snprintf(args, sizeof args, "-m " DEMO " --json-schema %s hi", bad);
    r = run_cli(args, NULL);
    EXPECT_FAILS(r, 1, "minProperties at #/minProperties: not supported");
    run_free(&r);
    r = run_cli("-m " DEMO " --json-schema /nonexistent/schema.json hi", NULL);
    EXPECT_FAILS(r, 1, "cannot read --json-schema");
    run_free(&r);
    snprintf(args, sizeof args, "-m " DEMO " --json --json-schema %s hi", path);
    r = run_cli(args, NULL);
    EXPECT_FAILS(r, 2, "do not go together");
    run_free(&r);
#ifdef BATCH
    {   /* build/batch: two sequences for three pictures (a constraint starts anew on a reused one),
           each answer build/mllama --json-schema's for its picture */
        char want[3][512];
        for (k = 0; k < 3; k++) {
            snprintf(args, sizeof args, "-m " DEMO " --image examples/images/%s --json-schema %s -q 'What is in the picture?'", pictures[k], path);
            r = run_cli(args, NULL);
            snprintf(want[k], sizeof want[k], "examples/images/%s: %s", pictures[k], r.out);
            EXPECT(r.status == 0, "%s: status %d\n%s", args, r.status, r.err);
            run_free(&r);
        }
        snprintf(args, sizeof args, "-m " DEMO " -K 2 --json-schema %s -p 'What is in the picture?' examples/images/%s examples/images/%s examples/images/%s",
                 path, pictures[0], pictures[1], pictures[2]);
        r = test_run_program(BATCH, args, NULL, tmpdir);
        for (k = 0; k < 3; k++)
            EXPECT(r.status == 0 && strstr(r.out, want[k]), "batch --json-schema: status %d, no line '%s' in:\n%s%s", r.status, want[k], r.out, r.err);
        run_free(&r);
        r = test_run_program(BATCH, "-m " DEMO " --json -n 3 examples/images/circle.png", NULL, tmpdir);
        EXPECT(r.status == 0 && strstr(r.out, "circle.png: {") && strstr(r.err, "cut by -n before its JSON was complete"), "batch --json -n 3: %d\n%s%s",
               r.status, r.out, r.err);
        run_free(&r);
        snprintf(args, sizeof args, "-m " DEMO " --json-schema %s examples/images/circle.png", bad);
        r = test_run_program(BATCH, args, NULL, tmpdir);
        EXPECT_FAILS(r, 1, "minProperties at #/minProperties: not supported");
        run_free(&r);
        snprintf(args, sizeof args, "-m " DEMO " --json --json-schema %s examples/images/circle.png", path);
        r = test_run_program(BATCH, args, NULL, tmpdir);
        EXPECT_FAILS(r, 2, "do not go together");
        run_free(&r);
    }
#endif
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mms-cli-XXXXXX");
    if (!mkdtemp(tmpdir)) { printf("cannot make a temporary folder\n"); return 1; }
    RUN(test_missing_model);
    RUN(test_corrupt_model);
    RUN(test_unreadable_images);
    RUN(test_prompt_too_long);
    RUN(test_bad_options);
    RUN(test_demo_samples);
    RUN(test_batch_captions);
    RUN(test_ollama_models);
    RUN(test_edges);
    RUN(test_caption_example);
    RUN(test_threads_warning);
    RUN(test_write_error);
    RUN(test_demo_chat);
    RUN(test_chat_context_and_clear);
    RUN(test_demo_sched_debug);
    RUN(test_fresh_pictures);
    RUN(test_json_schema);
    {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
        if (system(cmd) != 0) printf("could not remove %s\n", tmpdir);
    }
    return test_summary();
}
