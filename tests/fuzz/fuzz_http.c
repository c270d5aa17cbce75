/* libFuzzer target for mllama-server's request parsing: the input is a raw HTTP request (head and
   body) as a client would send it. The head goes through the HTTP parser; when it is complete
   and the body is in the input, the body goes to the mapping of the endpoint its path names
   (OpenAI's chat completions, Ollama's chat or generate; any other path: each of the three in
   turn). What comes out is checked: every pointer of the parsed head inside the input, the
   pictures counted as the messages say, every string valid for the engine; and every answer
   the server would write about it (an error object with the parser's message, a completion with
   the mapped text) must read back with the strict JSON reader. Broken invariants trap.

     clang -g -O1 -fsanitize=fuzzer,address,undefined -I. tests/fuzz/fuzz_http.c -o build/fuzz_http -lm -lpthread
     build/fuzz_http -max_total_time=300 -max_len=8192 build/fuzz-http tests/fuzz/corpus-http

   tests/test_server.c includes this file and replays tests/fuzz/corpus-http. */
#ifndef MMS_FUZZ_HTTP_C
#define MMS_FUZZ_HTTP_C
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L   /* clock_gettime, gmtime_r (Ollama's timestamps) */
#endif
#ifndef MMSCHED_IMPLEMENTATION
#define MMSCHED_IMPLEMENTATION
#include "../../mmsched.h"
#endif
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../../examples/server/http.h"
#include "../../examples/server/json_writer.h"
#include "../../examples/server/request.h"
#include "../../examples/server/openai.h"
#include "../../examples/server/ollama.h"

#define FUZZ_HTTP_CHECK(cond) do { if (!(cond)) { fprintf(stderr, "fuzz_http: check failed: %s (line %d)\n", #cond, __LINE__); abort(); } } while (0)

static bool fuzz_http_inside(const void *p, size_t n, const uint8_t *data, size_t size) {
    const uint8_t *b = (const uint8_t *)p;
    return b >= data && b + n <= data + size;
}

/* What the server writes must be JSON its own strict reader (and so any) accepts. */
static void fuzz_http_check_json(const struct sbuf *b) {
    struct mms_json *j;
    FUZZ_HTTP_CHECK(!b->oom);
    j = mms_json_parse(b->data, b->len, "fuzz answer");
    FUZZ_HTTP_CHECK(j != NULL);
    mms_json_free(j);
}

static void fuzz_http_check_error(const struct api_error *e) {
    struct sbuf b;
    FUZZ_HTTP_CHECK(e->status >= 400 && e->status < 600 && e->message[0]);
    memset(&b, 0, sizeof b);
    openai_write_error(&b, e);
    fuzz_http_check_json(&b);
    sb_clear(&b);
    ollama_write_error(&b, e->message, false);
    fuzz_http_check_json(&b);
    sb_free(&b);
}

/* Maps a body with one API's parser and checks the result. */
static void fuzz_http_map(enum api_kind kind, const char *body, size_t len) {
    struct api_config c;
    struct api_request r;
    struct api_error e;
    bool ok;
    int i, images = 0;
    memset(&c, 0, sizeof c);
    c.model = "mllama-demo";
    c.max_images = 4;
    c.max_stop = 4;
    memset(&r, 0, sizeof r);
    memset(&e, 0, sizeof e);
    if (kind == API_OPENAI_CHAT) ok = openai_parse_chat(&r, &c, body, len, &e);
    else if (kind == API_OLLAMA_CHAT) ok = ollama_parse_chat(&r, &c, body, len, &e);
    else ok = ollama_parse_generate(&r, &c, body, len, &e);
    if (!ok) {
        fuzz_http_check_error(&e);
    } else {
        struct sbuf b;
        struct mms_reply_usage u;
        FUZZ_HTTP_CHECK(r.model && api_model_matches(r.model, c.model, kind != API_OPENAI_CHAT));
        FUZZ_HTTP_CHECK(r.n_pictures <= c.max_images && r.n_stop <= c.max_stop && r.max_tokens >= 0);
        FUZZ_HTTP_CHECK(r.load_only || r.prompt || r.n_messages > 0);
        for (i = 0; i < r.n_messages; i++) {
            FUZZ_HTTP_CHECK(r.messages[i].role && api_role(r.messages[i].role, false) && r.messages[i].text && r.messages[i].n_images >= 0);
            FUZZ_HTTP_CHECK(!strstr(r.messages[i].text, "<|image|>"));
            images += r.messages[i].n_images;
        }
        if (!r.load_only) FUZZ_HTTP_CHECK(r.prompt ? r.n_messages == 0 : images == r.n_pictures);
        for (i = 0; i < r.n_pictures; i++) FUZZ_HTTP_CHECK(r.pictures[i].bytes != NULL);
        for (i = 0; i < r.n_stop; i++) FUZZ_HTTP_CHECK(r.stop[i][0] != '\0');
        if (r.grammar) {                          /* a format accepted is one the engine can follow */
            struct mms_constraint *m = mms_constraint_new(r.grammar, NULL);
            char done[256];
            const int n = m ? mms_constraint_shortest_completion(m, done, (int)sizeof done) : -1;
            FUZZ_HTTP_CHECK(m && n >= 0);
            if (n <= (int)sizeof done) FUZZ_HTTP_CHECK(mms_constraint_accept_bytes(m, done, (size_t)n) == MMS_OK && mms_constraint_is_complete(m));
            mms_constraint_free(m);
        }
        memset(&b, 0, sizeof b);
        memset(&u, 0, sizeof u);
        for (i = 0; i < r.n_messages; i++) {   /* the texts as an answer would carry them */
            sb_clear(&b);
            openai_write_completion(&b, "chatcmpl-fuzz", 0, r.model, r.messages[i].text, strlen(r.messages[i].text), MMS_FINISH_STOP, &u);
            fuzz_http_check_json(&b);
            sb_clear(&b);
            ollama_write_final(&b, kind == API_OLLAMA_GENERATE ? kind : API_OLLAMA_CHAT, r.model, r.messages[i].text, strlen(r.messages[i].text),
                               "stop", &u, 1, false);
            fuzz_http_check_json(&b);
        }
        sb_free(&b);
    }
    api_request_free(&r);
}

static void fuzz_http_one(const uint8_t *data, size_t size) {
    struct http_limits lim;
    struct http_request q;
    struct http_error err;
    int64_t head;
    int i;
    lim.max_head = 4096;
    lim.max_headers = 32;
    head = http_parse_head((const char *)data, size, &lim, &q, &err);
    if (head < 0) {
        struct api_error e;
        memset(&e, 0, sizeof e);
        FUZZ_HTTP_CHECK(err.status >= 400 && err.status < 600 && err.message[0]);
        api_fail(&e, err.status, "bad_request", NULL, "%s", err.message);
        fuzz_http_check_error(&e);
        return;
    }
    if (head == 0) { FUZZ_HTTP_CHECK(size < lim.max_head); return; }
    FUZZ_HTTP_CHECK((size_t)head <= size && (size_t)head <= lim.max_head);
    FUZZ_HTTP_CHECK(fuzz_http_inside(q.method, q.method_len, data, (size_t)head) && q.method_len > 0);
    FUZZ_HTTP_CHECK(fuzz_http_inside(q.target, q.target_len, data, (size_t)head) && q.target[0] == '/');
    FUZZ_HTTP_CHECK(q.path == q.target && q.path_len <= q.target_len);
    FUZZ_HTTP_CHECK(q.n_headers <= lim.max_headers && q.content_length >= 0 && (q.minor == 0 || q.minor == 1));
    for (i = 0; i < q.n_headers; i++) {
        FUZZ_HTTP_CHECK(fuzz_http_inside(q.headers[i].name, q.headers[i].name_len, data, (size_t)head) && q.headers[i].name_len > 0);
        FUZZ_HTTP_CHECK(fuzz_http_inside(q.headers[i].value, q.headers[i].value_len, data, (size_t)head));
    }
    (void)http_bearer_ok(&q, "key");
    if ((uint64_t)q.content_length > size - (size_t)head) return;
    {
        const char *body = (const char *)data + head;
        size_t len = (size_t)q.content_length;
        if (http_path_is(&q, "/v1/chat/completions")) fuzz_http_map(API_OPENAI_CHAT, body, len);
        else if (http_path_is(&q, "/api/chat")) fuzz_http_map(API_OLLAMA_CHAT, body, len);
        else if (http_path_is(&q, "/api/generate")) fuzz_http_map(API_OLLAMA_GENERATE, body, len);
        else {
            fuzz_http_map(API_OPENAI_CHAT, body, len);
            fuzz_http_map(API_OLLAMA_CHAT, body, len);
            fuzz_http_map(API_OLLAMA_GENERATE, body, len);
        }
    }
}

#ifdef FUZZ_HTTP_MAIN
static void fuzz_http_quiet(enum mms_log_level level, const char *message, void *user) { (void)level; (void)message; (void)user; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static bool quiet;
    if (!quiet) { mms_log_set(fuzz_http_quiet, NULL); quiet = true; }
    fuzz_http_one(data, size);
    return 0;
}
#endif
#endif
