/* test_server: mllama-server's parts without sockets or a model: the HTTP request head parser
   (RFC 9112's grammar and the refusals a proxy-safe server owes), the JSON writer (escapes and
   UTF-8 repair, read back by the library's strict reader), base64 against RFC 4648's own test
   vectors, and the mapping of OpenAI's and Ollama's bodies onto the engine's request, with the
   status, param and code of every refusal. Then every file of tests/fuzz/corpus-http goes
   through the fuzz target's checks. tests/server_test.py drives the whole server with the
   official clients. */
#define _POSIX_C_SOURCE 200809L
#define MMSCHED_IMPLEMENTATION
#include "../mmsched.h"
#include "test.h"
#include "fuzz/fuzz_http.c"
#include <dirent.h>

static struct http_limits limits(void) {
    struct http_limits l;
    l.max_head = 1024;
    l.max_headers = 8;
    return l;
}

static int64_t parse(const char *s, struct http_request *q, struct http_error *e) {
    struct http_limits l = limits();
    memset(e, 0, sizeof *e);
    return http_parse_head(s, strlen(s), &l, q, e);
}

static void test_http_valid(void) {
    struct http_request q;
    struct http_error e;
    size_t n;
    const char *v;
    const char *s = "POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length:  12 \r\nAuthorization: Bearer sk-1\r\n\r\n{\"a\":1}";
    int64_t head = parse(s, &q, &e);
    EXPECT(head == (int64_t)(strstr(s, "\r\n\r\n") - s + 4), "head length %lld", (long long)head);
    EXPECT(http_method_is(&q, "POST") && http_path_is(&q, "/v1/chat/completions"), "method/path %.*s", (int)q.path_len, q.path);
    EXPECT(q.target_len == strlen("/v1/chat/completions?x=1"), "target");
    EXPECT(q.content_length == 12 && q.keep_alive && q.minor == 1 && q.n_headers == 3, "cl %lld", (long long)q.content_length);
    v = http_header_get(&q, "content-length", &n);
    EXPECT(v && n == 2 && memcmp(v, "12", 2) == 0, "the value loses its spaces");
    EXPECT(http_bearer_ok(&q, "sk-1") && !http_bearer_ok(&q, "sk-2") && !http_bearer_ok(&q, "sk-"), "bearer");
    /* HTTP/1.0: no Host needed, closes unless keep-alive */
    EXPECT(parse("GET /health HTTP/1.0\r\n\r\n", &q, &e) > 0 && !q.keep_alive && q.minor == 0, "1.0");
    EXPECT(parse("GET /health HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", &q, &e) > 0 && q.keep_alive, "1.0 keep-alive");
    EXPECT(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: foo, close\r\n\r\n", &q, &e) > 0 && !q.keep_alive, "close in a list");
    EXPECT(parse("POST /api/chat HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 5\r\n\r\n", &q, &e) > 0 && q.expect_continue, "expect");
    EXPECT(parse("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n", &q, &e) > 0 && q.content_length == 5,
           "equal repeated Content-Length is one");
    /* incomplete: more bytes needed */
    EXPECT(parse("GET / HTTP/1.1\r\nHost: a\r\n", &q, &e) == 0, "incomplete");
    EXPECT(parse("", &q, &e) == 0, "empty");
}

static void test_http_refusals(void) {
    static const struct { const char *req; int status; } cases[] = {
        { "GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n 2\r\n\r\n", 400 },              /* obs-fold */
        { "GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400 },                          /* space before the colon */
        { "GET / HTTP/1.1\nHost: a\n\n", 400 },                                  /* bare LF */
        { "GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n", 400 },                      /* a bare LF inside */
        { "GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n", 400 },                      /* a bare CR */
        { "GET / HTTP/1.1\r\n\r\n", 400 },                                       /* HTTP/1.1 without Host */
        { "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400 },                 /* two Hosts */
        { "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400 },
        { "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1e3\r\n\r\n", 400 },
        { "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n", 400 },
        { "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 9999999999999999\r\n\r\n", 400 },
        { "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400 },
        { "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", 501 },
        { "POST / HTTP/1.1\r\nHost: a\r\nExpect: something\r\n\r\n", 417 },
        { "GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505 },
        { "GET / HTTP/1.1x\r\nHost: a\r\n\r\n", 400 },
        { "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400 },                           /* two spaces */
        { "GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400 },                    /* absolute form */
        { "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400 },
        { "GET / HTTP/1.1\r\nHost: a\r\nX: a\001b\r\n\r\n", 400 },               /* a control byte */
        { "GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 1\r\nC: 1\r\nD: 1\r\nE: 1\r\nF: 1\r\nG: 1\r\nH: 1\r\n\r\n", 431 },   /* 9 > 8 headers */
    };
    size_t i;
    char big[1100];
    struct http_request q;
    struct http_error e;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t r = parse(cases[i].req, &q, &e);
        EXPECT(r == -1 && e.status == cases[i].status && e.message[0], "case %zu: got %lld status %d (%s)", i, (long long)r, e.status, e.message);
    }
    /* a head over max_head with no end: 431 as soon as the limit is reached */
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    memcpy(big, "GET / HTTP/1.1\r\nHost: a\r\nX: ", 28);
    EXPECT(parse(big, &q, &e) == -1 && e.status == 431, "long head: %d", e.status);
    EXPECT(http_const_time_equal("abc", 3, "abc", 3) && !http_const_time_equal("abc", 3, "abd", 3) && !http_const_time_equal("abc", 3, "abcd", 4) &&
           !http_const_time_equal("", 0, "a", 1), "constant-time compare");
}

static char *write_string(const char *s, size_t n) {
    struct sbuf b;
    memset(&b, 0, sizeof b);
    json_write_string(&b, s, n);
    return b.data;
}

static void test_json_writer(void) {
    static const struct { const char *in; size_t n; const char *out; } cases[] = {
        { "plain", 5, "\"plain\"" },
        { "q\"b\\s/", 6, "\"q\\\"b\\\\s/\"" },
        { "\n\r\t\b\f\001\037\177", 8, "\"\\n\\r\\t\\b\\f\\u0001\\u001f\177\"" },
        { "a\0b", 3, "\"a\\u0000b\"" },
        { "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9, "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"" },   /* é € 😀 kept */
        { "\xe2\x80\xa8\xe2\x80\xa9", 6, "\"\\u2028\\u2029\"" },
        { "a\xff" "b", 3, "\"a\xef\xbf\xbd" "b\"" },                                   /* an invalid byte */
        { "\xc0\xaf", 2, "\"\xef\xbf\xbd\xef\xbf\xbd\"" },                              /* overlong: two subparts */
        { "\xed\xa0\x80", 3, "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"" },              /* a surrogate */
        { "\xe2\x82", 2, "\"\xef\xbf\xbd\"" },                                          /* cut short: one subpart */
        { "\xf4\x90\x80\x80", 4, "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"" }, /* past U+10FFFF */
    };
    size_t i;
    struct sbuf b;
    struct jw w;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *s = write_string(cases[i].in, cases[i].n);
        EXPECT(s && strcmp(s, cases[i].out) == 0, "case %zu: %s", i, s ? s : "(null)");
        free(s);
    }
    memset(&b, 0, sizeof b);
    jw_init(&w, &b);
    jw_object(&w);
    jw_kint(&w, "a", -5);
    jw_key(&w, "b");
    jw_array(&w);
    jw_num(&w, 0.1);
    jw_num(&w, 1.0 / 3.0);
    jw_num(&w, HUGE_VAL);
    jw_bool(&w, true);
    jw_null(&w);
    jw_object(&w);
    jw_end_object(&w);
    jw_end_array(&w);
    jw_kstr(&w, "c", "");
    jw_end_object(&w);
    EXPECT(b.data && strcmp(b.data, "{\"a\":-5,\"b\":[0.1,0.3333333333333333,null,true,null,{}],\"c\":\"\"}") == 0, "writer: %s", b.data);
    sb_free(&b);
}

static void test_base64_rfc4648(void) {
    /* RFC 4648 section 10 */
    static const char *const plain[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar" };
    static const char *const coded[] = { "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy" };
    static const char *const bad[] = { "Zg=", "Z", "Zm9v!", "Zm 9v", "Zh==", "Zm9=", "Zg===", "====" };
    size_t i, n;
    const char *why;
    for (i = 0; i < 7; i++) {
        unsigned char *d = api_base64_decode(coded[i], strlen(coded[i]), &n, &why);
        EXPECT(d && n == strlen(plain[i]) && memcmp(d, plain[i], n) == 0, "vector %zu", i);
        free(d);
        if (i > 0 && strchr(coded[i], '=')) {   /* padding may be left out */
            d = api_base64_decode(coded[i], (size_t)(strchr(coded[i], '=') - coded[i]), &n, &why);
            EXPECT(d && n == strlen(plain[i]) && memcmp(d, plain[i], n) == 0, "vector %zu without padding", i);
            free(d);
        }
    }
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unsigned char *d = api_base64_decode(bad[i], strlen(bad[i]), &n, &why);
        EXPECT(d == NULL && why && why[0], "'%s' refused", bad[i]);
        free(d);
    }
}

static struct api_config config(void) {
    struct api_config c;
    memset(&c, 0, sizeof c);
    c.model = "mllama-demo";
    c.max_images = 2;
    c.max_stop = 4;
    c.defaults.temperature = 0.6f;
    c.defaults.top_p = 0.9f;
    c.seed = 1234;
    return c;
}

/* "Zm9v" is base64 of "foo": the mapping decodes without judging the picture (the server does). */
static void test_openai_mapping(void) {
    struct api_config c = config();
    struct api_request r;
    struct api_error e;
    const char *body =
        "{\"model\":\"mllama-demo\",\"messages\":[{\"role\":\"developer\",\"content\":\"Be brief.\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"One\"},{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,Zm9v\"}},"
        "{\"type\":\"text\",\"text\":\"Two\"},{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:;base64,YmFy\",\"detail\":\"low\"}}]},"
        "{\"role\":\"assistant\",\"content\":null},{\"role\":\"user\",\"content\":\"Again?\"}],"
        "\"stream\":true,\"stream_options\":{\"include_usage\":true},\"max_completion_tokens\":9,\"temperature\":0,\"seed\":-1,"
        "\"stop\":\"END\",\"frequency_penalty\":0,\"user\":\"x\",\"tools\":[]}";
    memset(&r, 0, sizeof r);
    memset(&e, 0, sizeof e);
    EXPECT(openai_parse_chat(&r, &c, body, strlen(body), &e), "refused: %s", e.message);
    EXPECT(r.n_messages == 4 && strcmp(r.messages[0].role, "system") == 0 && strcmp(r.messages[0].text, "Be brief.") == 0, "system");
    EXPECT(r.n_messages == 4 && strcmp(r.messages[1].text, "One\nTwo") == 0 && r.messages[1].n_images == 2, "parts: '%s'",
           r.n_messages > 1 ? r.messages[1].text : "");
    EXPECT(r.n_messages == 4 && strcmp(r.messages[2].role, "assistant") == 0 && r.messages[2].text[0] == '\0', "null content");
    EXPECT(r.n_pictures == 2 && r.pictures[0].len == 3 && memcmp(r.pictures[0].bytes, "foo", 3) == 0 && memcmp(r.pictures[1].bytes, "bar", 3) == 0,
           "pictures");
    EXPECT(r.stream && r.include_usage && r.max_tokens == 9 && r.sampling.temperature == 0 && r.sampling.top_p == 0.9f, "fields");
    EXPECT(r.sampling.seed == UINT64_MAX && r.n_stop == 1 && strcmp(r.stop[0], "END") == 0, "seed and stop");
    api_request_free(&r);

    body = "{\"model\":\"mllama-demo\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    memset(&r, 0, sizeof r);
    EXPECT(openai_parse_chat(&r, &c, body, strlen(body), &e), "minimal: %s", e.message);
    EXPECT(!r.stream && r.max_tokens == 0 && r.sampling.temperature == 0.6f && r.sampling.seed == 1234, "defaults");
    EXPECT(r.grammar == NULL, "no response_format: free text");
    api_request_free(&r);

    {   /* response_format: text, json_object and json_schema (strict or not) */
        static const char *const formats[] = { "{\"type\":\"text\"}", "{\"type\":\"json_object\"}",
            "{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"shape-1\",\"strict\":true,\"schema\":{\"type\":\"object\","
            "\"properties\":{\"a\":{\"enum\":[1,2]}},\"required\":[\"a\"]}}}",
            "{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"s\",\"strict\":false,\"schema\":{\"const\":\"x\"}}}" };
        static const char *const want[] = { NULL, "{}", "{\"a\":2}", "\"x\"" };
        char buf[512];
        size_t k;
        for (k = 0; k < sizeof formats / sizeof formats[0]; k++) {
            snprintf(buf, sizeof buf, "{\"model\":\"mllama-demo\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"response_format\":%s}",
                     formats[k]);
            memset(&r, 0, sizeof r);
            EXPECT(openai_parse_chat(&r, &c, buf, strlen(buf), &e), "response_format %s: %s", formats[k], e.message);
            EXPECT(!want[k] == !r.grammar, "response_format %s: a grammar %s", formats[k], want[k] ? "wanted" : "not wanted");
            if (want[k] && r.grammar) {   /* the grammar reads a document of the format whole */
                struct mms_constraint *m = mms_constraint_new(r.grammar, NULL);
                EXPECT(m && mms_constraint_accept_bytes(m, want[k], strlen(want[k])) == MMS_OK && mms_constraint_is_complete(m), "%s reads %s",
                       formats[k], want[k]);
                mms_constraint_free(m);
            }
            api_request_free(&r);
        }
    }
}

struct refusal { const char *body; int status; const char *param, *code; };

static void check_refusals(const struct refusal *cases, size_t n, enum api_kind kind) {
    struct api_config c = config();
    size_t i;
    for (i = 0; i < n; i++) {
        struct api_request r;
        struct api_error e;
        bool ok;
        memset(&r, 0, sizeof r);
        memset(&e, 0, sizeof e);
        if (kind == API_OPENAI_CHAT) ok = openai_parse_chat(&r, &c, cases[i].body, strlen(cases[i].body), &e);
        else if (kind == API_OLLAMA_CHAT) ok = ollama_parse_chat(&r, &c, cases[i].body, strlen(cases[i].body), &e);
        else ok = ollama_parse_generate(&r, &c, cases[i].body, strlen(cases[i].body), &e);
        EXPECT(!ok && e.status == cases[i].status && strcmp(e.param, cases[i].param) == 0 && e.code && strcmp(e.code, cases[i].code) == 0 &&
               e.message[0], "kind %d case %zu: ok %d status %d param '%s' code '%s': %s", (int)kind, i, ok, e.status, e.param, e.code ? e.code : "",
               e.message);
        api_request_free(&r);
    }
}

#define M "\"model\":\"mllama-demo\","
#define HI "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"

static void test_openai_refusals(void) {
    static const struct refusal cases[] = {
        { "{\"model\":", 400, "", "invalid_json" },
        { "[1]", 400, "", "invalid_json" },
        { "{\"a\":1,\"a\":2}", 400, "", "invalid_json" },
        { "{" HI "}", 400, "model", "invalid_value" },
        { "{\"model\":5," HI "}", 400, "model", "invalid_type" },
        { "{\"model\":\"gpt-4o\"," HI "}", 404, "model", "model_not_found" },
        { "{" M "\"messages\":{}}", 400, "messages", "invalid_type" },
        { "{" M "\"messages\":[]}", 400, "messages", "invalid_value" },
        { "{\"model\":\"mllama-demo\"}", 400, "messages", "invalid_value" },
        { "{" M "\"messages\":[5]}", 400, "messages[0]", "invalid_type" },
        { "{" M "\"messages\":[{\"content\":\"hi\"}]}", 400, "messages[0].role", "invalid_value" },
        { "{" M "\"messages\":[{\"role\":\"robot\",\"content\":\"hi\"}]}", 400, "messages[0].role", "invalid_value" },
        { "{" M "\"messages\":[{\"role\":\"user\",\"content\":5}]}", 400, "messages[0].content", "invalid_type" },
        { "{" M "\"messages\":[{\"role\":\"user\"}]}", 400, "messages[0].content", "invalid_value" },
        { "{" M "\"messages\":[{\"role\":\"user\",\"content\":\"a\\u0000b\"}]}", 400, "messages[0].content", "invalid_value" },
        { "{" M "\"messages\":[{\"role\":\"user\",\"content\":\"<|image|>\"}]}", 400, "messages", "invalid_value" },
        { "{" M "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\"}]}]}", 400, "messages[0].content[0].type", "invalid_value" },
        { "{" M "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://x/a.png\"}}]}]}", 400,
          "messages[0].content[0].image_url.url", "image_url_not_supported" },
        { "{" M "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"file:///etc/passwd\"}}]}]}", 400,
          "messages[0].content[0].image_url.url", "invalid_image_url" },
        { "{" M "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:text/plain;base64,Zm9v\"}}]}]}", 400,
          "messages[0].content[0].image_url.url", "invalid_image_url" },
        { "{" M "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png,Zm9v\"}}]}]}", 400,
          "messages[0].content[0].image_url.url", "invalid_image_url" },
        { "{" M "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,Zm9*\"}}]}]}", 400,
          "messages[0].content[0].image_url.url", "invalid_image" },
        { "{" M "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":\"data:image/png;base64,Zm9v\"}]}]}", 400,
          "messages[0].content[0].image_url", "invalid_type" },
        { "{" M "\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,Zm9v\"}}]}]}",
          400, "messages[0].content[0].image_url", "invalid_value" },
        { "{" M "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,Zm9v\"}},"
          "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,Zm9v\"}},{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,Zm9v\"}}]}]}",
          400, "messages[0].content[2].image_url.url", "too_many_images" },
        { "{" M HI ",\"temperature\":\"hot\"}", 400, "temperature", "invalid_type" },
        { "{" M HI ",\"temperature\":2.5}", 400, "temperature", "invalid_value" },
        { "{" M HI ",\"top_p\":-0.1}", 400, "top_p", "invalid_value" },
        { "{" M HI ",\"max_tokens\":0}", 400, "max_tokens", "invalid_value" },
        { "{" M HI ",\"max_tokens\":1.5}", 400, "max_tokens", "invalid_type" },
        { "{" M HI ",\"max_completion_tokens\":\"9\"}", 400, "max_completion_tokens", "invalid_type" },
        { "{" M HI ",\"seed\":1e300}", 400, "seed", "invalid_type" },
        { "{" M HI ",\"stream\":\"yes\"}", 400, "stream", "invalid_type" },
        { "{" M HI ",\"stream_options\":{\"include_usage\":true}}", 400, "stream_options", "invalid_value" },
        { "{" M HI ",\"stream\":true,\"stream_options\":{\"include_usage\":1}}", 400, "stream_options.include_usage", "invalid_type" },
        { "{" M HI ",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", 400, "stop", "invalid_value" },
        { "{" M HI ",\"stop\":[\"\"]}", 400, "stop", "invalid_value" },
        { "{" M HI ",\"stop\":[1]}", 400, "stop", "invalid_type" },
        { "{" M HI ",\"tools\":[{\"type\":\"function\"}]}", 400, "tools", "unsupported_parameter" },
        { "{" M HI ",\"n\":2}", 400, "n", "unsupported_parameter" },
        { "{" M HI ",\"logprobs\":true}", 400, "logprobs", "unsupported_parameter" },
        { "{" M HI ",\"response_format\":{\"type\":\"xml\"}}", 400, "response_format.type", "invalid_value" },
        { "{" M HI ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\",\"schema\":{\"not\":{}}}}}", 400,
          "response_format.json_schema.schema", "invalid_schema" },
        { "{" M HI ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{}}}}", 400, "response_format.json_schema.name",
          "invalid_value" },
        { "{" M HI ",\"response_format\":{\"type\":\"json_schema\"}}", 400, "response_format.json_schema", "invalid_value" },
        { "{" M HI ",\"response_format\":[]}", 400, "response_format", "invalid_type" },
    };
    check_refusals(cases, sizeof cases / sizeof cases[0], API_OPENAI_CHAT);
}

static void test_ollama_mapping(void) {
    struct api_config c = config();
    struct api_request r;
    struct api_error e;
    const char *body = "{\"model\":\"mllama-demo:latest\",\"messages\":[{\"role\":\"system\",\"content\":\"S\"},"
                       "{\"role\":\"user\",\"content\":\"Which?\",\"images\":[\"Zm9v\",\"data:image/png;base64,YmFy\"]}],"
                       "\"options\":{\"temperature\":0,\"top_k\":5,\"top_p\":0.5,\"min_p\":0.1,\"repeat_penalty\":1.1,\"repeat_last_n\":-1,"
                       "\"num_predict\":-1,\"seed\":42,\"stop\":[\"x\"],\"num_ctx\":4096,\"mirostat\":0},\"keep_alive\":\"5m\",\"format\":\"\"}";
    memset(&r, 0, sizeof r);
    memset(&e, 0, sizeof e);
    EXPECT(ollama_parse_chat(&r, &c, body, strlen(body), &e), "refused: %s", e.message);
    EXPECT(r.stream && !r.load_only && r.n_messages == 2 && r.messages[1].n_images == 2 && r.n_pictures == 2, "chat");
    EXPECT(r.sampling.temperature == 0 && r.sampling.top_k == 5 && r.sampling.top_p == 0.5f && r.sampling.min_p == 0.1f &&
           r.sampling.repeat_penalty == 1.1f && r.sampling.repeat_last_n == 0 && r.sampling.seed == 42, "options");
    EXPECT(r.max_tokens == 0 && r.n_stop == 1 && strcmp(r.stop[0], "x") == 0, "num_predict and stop");
    api_request_free(&r);

    body = "{\"model\":\"mllama-demo\",\"messages\":[]}";
    memset(&r, 0, sizeof r);
    EXPECT(ollama_parse_chat(&r, &c, body, strlen(body), &e) && r.load_only, "load: %s", e.message);
    api_request_free(&r);

    body = "{\"model\":\"mllama-demo\",\"prompt\":\"Describe.\",\"system\":\"Short.\",\"images\":[\"Zm9v\"],\"stream\":false,\"options\":{\"num_predict\":7}}";
    memset(&r, 0, sizeof r);
    EXPECT(ollama_parse_generate(&r, &c, body, strlen(body), &e), "generate: %s", e.message);
    EXPECT(!r.stream && r.n_messages == 2 && strcmp(r.messages[0].role, "system") == 0 && strcmp(r.messages[1].text, "Describe.") == 0 &&
           r.messages[1].n_images == 1 && r.n_pictures == 1 && r.max_tokens == 7 && !r.prompt, "generate fields");
    api_request_free(&r);

    body = "{\"model\":\"mllama-demo\",\"prompt\":\"<|begin_of_text|><|image|>x\",\"raw\":true,\"images\":[\"Zm9v\"]}";
    memset(&r, 0, sizeof r);
    EXPECT(ollama_parse_generate(&r, &c, body, strlen(body), &e), "raw: %s", e.message);
    EXPECT(r.prompt && strcmp(r.prompt, "<|begin_of_text|><|image|>x") == 0 && r.n_messages == 0 && r.n_pictures == 1, "raw fields");
    api_request_free(&r);

    body = "{\"model\":\"mllama-demo\"}";
    memset(&r, 0, sizeof r);
    EXPECT(ollama_parse_generate(&r, &c, body, strlen(body), &e) && r.load_only, "generate load");
    api_request_free(&r);
}

static void test_ollama_refusals(void) {
    static const struct refusal chat[] = {
        { "{\"messages\":[]}", 400, "model", "invalid_value" },
        { "{\"model\":\"\"}", 400, "model", "invalid_value" },
        { "{\"model\":\"llama3.2-vision\"}", 404, "model", "model_not_found" },
        { "{\"model\":\"mllama-demo:7b\"}", 404, "model", "model_not_found" },
        { "{" M "\"messages\":\"hi\"}", 400, "messages", "invalid_type" },
        { "{" M "\"messages\":[{\"role\":\"user\",\"content\":[\"hi\"]}]}", 400, "messages[0].content", "invalid_type" },
        { "{" M "\"messages\":[{\"role\":\"user\",\"content\":\"hi\",\"images\":\"Zm9v\"}]}", 400, "messages[0].images", "invalid_type" },
        { "{" M "\"messages\":[{\"role\":\"user\",\"content\":\"hi\",\"images\":[5]}]}", 400, "messages[0].images[0]", "invalid_type" },
        { "{" M "\"messages\":[{\"role\":\"user\",\"content\":\"hi\",\"images\":[\"Zm9v\",\"Zm9v\",\"Zm9v\"]}]}", 400, "messages[0].images[2]", "too_many_images" },
        { "{" M "\"messages\":[{\"role\":\"user\",\"content\":\"hi\",\"images\":[\"not base64!\"]}]}", 400, "messages[0].images[0]", "invalid_image" },
        { "{" M "\"messages\":[{\"role\":\"user\",\"content\":\"hi\",\"images\":[\"\"]}]}", 400, "messages[0].images[0]", "invalid_image" },
        { "{" M "\"messages\":[{\"role\":\"user\",\"content\":\"hi\",\"images\":[\"https://x/a.png\"]}]}", 400, "messages[0].images[0]", "invalid_image" },
        { "{" M "\"messages\":[{\"role\":\"system\",\"content\":\"hi\",\"images\":[\"Zm9v\"]}]}", 400, "messages[0].images", "invalid_value" },
        { "{" M "\"messages\":[{\"role\":\"developer\",\"content\":\"hi\"}]}", 400, "messages[0].role", "invalid_value" },
        { "{" M HI ",\"options\":[]}", 400, "options", "invalid_type" },
        { "{" M HI ",\"options\":{\"temperature\":\"0\"}}", 400, "options.temperature", "invalid_type" },
        { "{" M HI ",\"options\":{\"top_k\":-1}}", 400, "options.top_k", "invalid_value" },
        { "{" M HI ",\"options\":{\"top_p\":2}}", 400, "options.top_p", "invalid_value" },
        { "{" M HI ",\"options\":{\"num_predict\":1.5}}", 400, "options.num_predict", "invalid_type" },
        { "{" M HI ",\"options\":{\"num_ctx\":0}}", 400, "options.num_ctx", "invalid_value" },
        { "{" M HI ",\"options\":{\"seed\":\"1\"}}", 400, "options.seed", "invalid_type" },
        { "{" M HI ",\"options\":{\"stop\":\"\"}}", 400, "options.stop", "invalid_value" },
        { "{" M HI ",\"stream\":1}", 400, "stream", "invalid_type" },
        { "{" M HI ",\"format\":\"yaml\"}", 400, "format", "invalid_value" },
        { "{" M HI ",\"format\":{\"type\":\"object\",\"minProperties\":1}}", 400, "format", "invalid_schema" },
        { "{" M HI ",\"format\":[]}", 400, "format", "invalid_type" },
        { "{" M HI ",\"think\":true}", 400, "think", "unsupported_parameter" },
        { "{" M HI ",\"tools\":[{}]}", 400, "tools", "unsupported_parameter" },
        { "{" M HI ",\"keep_alive\":[]}", 400, "keep_alive", "invalid_type" },
    };
    static const struct refusal generate[] = {
        { "{" M "\"prompt\":5}", 400, "prompt", "invalid_type" },
        { "{" M "\"prompt\":\"x\",\"suffix\":\"y\"}", 400, "suffix", "unsupported_parameter" },
        { "{" M "\"prompt\":\"x\",\"template\":\"{{ .Prompt }}\"}", 400, "template", "unsupported_parameter" },
        { "{" M "\"prompt\":\"x\",\"context\":[1,2]}", 400, "context", "unsupported_parameter" },
        { "{" M "\"prompt\":\"x\",\"raw\":true,\"images\":[\"Zm9v\"]}", 400, "prompt", "invalid_value" },
        { "{" M "\"prompt\":\"<|image|>x\",\"raw\":true,\"system\":\"s\",\"images\":[\"Zm9v\"]}", 400, "system", "invalid_value" },
        { "{" M "\"prompt\":\"<|image|>x\",\"images\":[\"Zm9v\"]}", 400, "messages", "invalid_value" },
        { "{" M "\"prompt\":\"x\",\"raw\":\"yes\"}", 400, "raw", "invalid_type" },
    };
    check_refusals(chat, sizeof chat / sizeof chat[0], API_OLLAMA_CHAT);
    check_refusals(generate, sizeof generate / sizeof generate[0], API_OLLAMA_GENERATE);
}

/* The answers read back as JSON, with the fields the clients read. */
static void test_answers(void) {
    struct sbuf b;
    struct mms_reply_usage u;
    struct mms_json *j;
    struct api_error e;
    int64_t x;
    memset(&b, 0, sizeof b);
    memset(&u, 0, sizeof u);
    u.prompt_tokens = 30;
    u.cached_tokens = 20;
    u.completion_tokens = 5;
    u.prompt_ms = 2;
    u.gen_ms = 3;
    openai_write_completion(&b, "chatcmpl-1", 1700000000, "m", "a \"quoted\"\n", 11, MMS_FINISH_LENGTH, &u);
    j = mms_json_parse(b.data, b.len, "completion");
    EXPECT(j != NULL, "completion: %s", b.data);
    if (j) {
        int64_t ch = mms_json_at(j, mms_json_get(j, 0, "choices"), 0), us = mms_json_get(j, 0, "usage");
        EXPECT(strcmp(mms_json_str(j, mms_json_get(j, mms_json_get(j, ch, "message"), "content"), NULL), "a \"quoted\"\n") == 0, "content");
        EXPECT(strcmp(mms_json_str(j, mms_json_get(j, ch, "finish_reason"), NULL), "length") == 0, "finish");
        EXPECT(mms_json_int(j, mms_json_get(j, us, "total_tokens"), &x) && x == 35, "total");
        EXPECT(mms_json_int(j, mms_json_get(j, mms_json_get(j, us, "prompt_tokens_details"), "cached_tokens"), &x) && x == 20, "cached");
        mms_json_free(j);
    }
    sb_clear(&b);
    openai_write_chunk(&b, "chatcmpl-1", 1, "m", true, "hi", 2, NULL, true, NULL);
    EXPECT(strncmp(b.data, "data: {", 7) == 0 && strcmp(b.data + b.len - 2, "\n\n") == 0 && strstr(b.data, "\"role\":\"assistant\"") &&
           strstr(b.data, "\"usage\":null") && strstr(b.data, "\"finish_reason\":null"), "chunk: %s", b.data);
    sb_clear(&b);
    openai_write_chunk(&b, "chatcmpl-1", 1, "m", false, NULL, 0, NULL, true, &u);
    EXPECT(strstr(b.data, "\"choices\":[]") && strstr(b.data, "\"cached_tokens\":20"), "usage chunk: %s", b.data);
    sb_clear(&b);
    ollama_write_final(&b, API_OLLAMA_CHAT, "m", "", 0, "stop", &u, 9000000, true);
    j = mms_json_parse(b.data, b.len - 1, "final");
    EXPECT(j && b.data[b.len - 1] == '\n', "final: %s", b.data);
    if (j) {
        EXPECT(mms_json_int(j, mms_json_get(j, 0, "prompt_eval_count"), &x) && x == 30, "prompt_eval_count is the whole prompt, as Ollama's runners count it");
        EXPECT(mms_json_int(j, mms_json_get(j, 0, "eval_duration"), &x) && x == 3000000, "eval_duration in ns");
        EXPECT(mms_json_type(j, mms_json_get(j, 0, "done")) == MMS_JSON_TRUE, "done");
        mms_json_free(j);
    }
    sb_clear(&b);
    memset(&e, 0, sizeof e);
    api_fail(&e, 404, "model_not_found", "model", "no \"x\"");
    openai_write_error(&b, &e);
    EXPECT(strcmp(b.data, "{\"error\":{\"message\":\"no \\\"x\\\"\",\"type\":\"invalid_request_error\",\"param\":\"model\",\"code\":\"model_not_found\"}}") == 0,
           "error: %s", b.data);
    sb_free(&b);
}

static void test_fuzz_corpus_replay(void) {
    const char *dir = test_src_path("fuzz/corpus-http");
    DIR *d = opendir(dir);
    struct dirent *ent;
    int n = 0;
    EXPECT(d != NULL, "cannot list %s", dir);
    while (d && (ent = readdir(d)) != NULL) {
        char p[1400];
        long size;
        char *buf;
        if (ent->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", dir, ent->d_name);
        if (!(buf = test_slurp(p, &size))) continue;
        fuzz_http_one((const uint8_t *)buf, (size_t)size);   /* traps on a broken invariant */
        free(buf);
        n++;
    }
    if (d) closedir(d);
    EXPECT(n >= 23, "only %d corpus files", n);
}

static void quiet(enum mms_log_level level, const char *message, void *user) { (void)level; (void)message; (void)user; }

int main(void) {
    mms_log_set(quiet, NULL);
    RUN(test_http_valid);
    RUN(test_http_refusals);
    RUN(test_json_writer);
    RUN(test_base64_rfc4648);
    RUN(test_openai_mapping);
    RUN(test_openai_refusals);
    RUN(test_ollama_mapping);
    RUN(test_ollama_refusals);
    RUN(test_answers);
    RUN(test_fuzz_corpus_replay);
    return test_summary();
}
