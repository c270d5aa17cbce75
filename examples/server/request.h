/* request.h - what mllama-server's two APIs have in common: the request both map to (messages or
   a raw prompt, the pictures as encoded files, sampling, limits), the error they answer with, and
   the checked readers of JSON fields both use (a wrong type or range names the field). openai.h
   and ollama.h map their bodies onto it; server.c decodes the pictures and submits it. Needs
   mmsched.h (the JSON reader and the engine's request types) included before it. */
#ifndef MLLAMA_SERVER_REQUEST_H
#define MLLAMA_SERVER_REQUEST_H

#include "part.h"

enum api_kind { API_OPENAI_CHAT = 1, API_OLLAMA_CHAT = 2, API_OLLAMA_GENERATE = 3 };

struct api_config {
    const char *model;                  /* the name of the one model served */
    int         max_images;             /* pictures per request */
    int         max_stop;               /* stop strings per request */
    struct mms_sampler_params defaults; /* for what a request does not say */
    uint64_t    seed;                   /* the seed of a request that gives none (the caller makes a fresh one each time) */
};

struct api_picture {                    /* an image file as sent (PNG, JPEG...), base64 decoded */
    unsigned char *bytes;
    size_t         len;
};

struct api_request {
    enum api_kind            kind;
    struct mms_json         *json;      /* the body: the strings below point into it */
    const char              *model;
    struct mms_chat_message *messages;
    int                      n_messages;
    const char              *prompt;    /* Ollama's raw generate: the prompt as it is, <|image|> marks placing the pictures */
    struct api_picture      *pictures;
    int                      n_pictures;
    struct mms_sampler_params sampling;
    int                      max_tokens;   /* 0: until an end token or the slot is full */
    const char             **stop;
    int                      n_stop;
    bool                     stream, include_usage;
    bool                     load_only;    /* Ollama's "load the model" request: nothing to generate */
    struct mms_grammar      *grammar;      /* the answer's format (structured output), or NULL: free text */
    char                   **owned;        /* strings made here (joined text parts) */
    int                      n_owned;
};

struct api_error {
    int         status;      /* HTTP status */
    const char *type;        /* OpenAI's error type */
    const char *code;        /* OpenAI's error code, or NULL */
    char        param[64];   /* the field at fault ("" for none) */
    char        message[512];
};

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 5, 6)))
#endif
SRV_FN bool api_fail(struct api_error *e, int status, const char *code, const char *param, const char *fmt, ...) {
    va_list ap;
    e->status = status;
    e->type = status >= 500 ? "server_error" : "invalid_request_error";
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return false;
}

SRV_FN void api_request_free(struct api_request *r) {
    int i;
    for (i = 0; i < r->n_pictures; i++) free(r->pictures[i].bytes);
    for (i = 0; i < r->n_owned; i++) free(r->owned[i]);
    free(r->pictures);
    free(r->owned);
    free(r->messages);
    free((void *)r->stop);
    mms_grammar_free(r->grammar);
    mms_json_free(r->json);
    memset(r, 0, sizeof *r);
}

SRV_FN char *api__keep(struct api_request *r, char *s) {
    char **o;
    if (!s) return NULL;
    if (!(o = (char **)realloc(r->owned, sizeof *o * (size_t)(r->n_owned + 1)))) { free(s); return NULL; }
    r->owned = o;
    r->owned[r->n_owned++] = s;
    return s;
}

SRV_FN const char *api__type_name(enum mms_json_type t) {
    switch (t) {
    case MMS_JSON_NULL:   return "null";
    case MMS_JSON_FALSE:
    case MMS_JSON_TRUE:   return "a boolean";
    case MMS_JSON_NUMBER: return "a number";
    case MMS_JSON_STRING: return "a string";
    case MMS_JSON_ARRAY:  return "an array";
    case MMS_JSON_OBJECT: return "an object";
    default:              return "nothing";
    }
}

SRV_FN bool api__wrong_type(struct api_error *e, const struct mms_json *j, int64_t v, const char *param, const char *want) {
    return api_fail(e, 400, "invalid_type", param, "'%s' must be %s, not %s", param, want, api__type_name(mms_json_type(j, v)));
}

/* Each reader looks up key in obj: absent or null leaves *out as it is and returns true; a value of
   the wrong type or out of range fails naming param. */

SRV_FN bool api_get_bool(const struct mms_json *j, int64_t obj, const char *key, const char *param, bool *out, struct api_error *e) {
    int64_t v = mms_json_get(j, obj, key);
    enum mms_json_type t = mms_json_type(j, v);
    if (v < 0 || t == MMS_JSON_NULL) return true;
    if (t != MMS_JSON_TRUE && t != MMS_JSON_FALSE) return api__wrong_type(e, j, v, param, "a boolean");
    *out = t == MMS_JSON_TRUE;
    return true;
}

SRV_FN bool api_get_num(const struct mms_json *j, int64_t obj, const char *key, const char *param, double lo, double hi, double *out,
                        struct api_error *e) {
    int64_t v = mms_json_get(j, obj, key);
    double d;
    if (v < 0 || mms_json_type(j, v) == MMS_JSON_NULL) return true;
    if (!mms_json_num(j, v, &d)) return api__wrong_type(e, j, v, param, "a number");
    if (d < lo || d > hi) return api_fail(e, 400, "invalid_value", param, "'%s' must be from %g to %g, not %g", param, lo, hi, d);
    *out = d;
    return true;
}

SRV_FN bool api_get_int(const struct mms_json *j, int64_t obj, const char *key, const char *param, int64_t lo, int64_t hi, int64_t *out,
                        struct api_error *e) {
    int64_t v = mms_json_get(j, obj, key), x;
    if (v < 0 || mms_json_type(j, v) == MMS_JSON_NULL) return true;
    if (!mms_json_int(j, v, &x)) return api__wrong_type(e, j, v, param, "a whole number");
    if (x < lo || x > hi)
        return api_fail(e, 400, "invalid_value", param, "'%s' must be from %lld to %lld, not %lld", param, (long long)lo, (long long)hi,
                        (long long)x);
    *out = x;
    return true;
}

/* A string field; *out points into the JSON. Strings with a NUL byte in them are refused (the
   engine's strings end at NUL: the text would be cut silently). */
SRV_FN bool api_get_str(const struct mms_json *j, int64_t obj, const char *key, const char *param, const char **out, struct api_error *e) {
    int64_t v = mms_json_get(j, obj, key);
    size_t len;
    const char *s;
    if (v < 0 || mms_json_type(j, v) == MMS_JSON_NULL) return true;
    if (!(s = mms_json_str(j, v, &len))) return api__wrong_type(e, j, v, param, "a string");
    if (strlen(s) != len) return api_fail(e, 400, "invalid_value", param, "'%s' has a NUL character (\\u0000) in it", param);
    *out = s;
    return true;
}

/* The root must be an object. */
SRV_FN bool api_parse_body(struct api_request *r, const char *body, size_t len, struct api_error *e) {
    const char *why;
    if (!(r->json = mms_json_parse(body, len, "the request body"))) {
        why = mms_last_error();
        return api_fail(e, 400, "invalid_json", NULL, "%s", why);
    }
    if (mms_json_type(r->json, 0) != MMS_JSON_OBJECT) return api_fail(e, 400, "invalid_json", NULL, "the request body must be a JSON object");
    return true;
}

/* Whether the client's model name is ours; Ollama's names may carry the tag ":latest" or not. */
SRV_FN bool api_model_matches(const char *asked, const char *ours, bool ollama_tags) {
    size_t a = strlen(asked), o = strlen(ours);
    if (strcmp(asked, ours) == 0) return true;
    if (!ollama_tags) return false;
    if (a == o + 7 && strncmp(asked, ours, o) == 0 && strcmp(asked + o, ":latest") == 0) return true;
    if (o == a + 7 && strncmp(ours, asked, a) == 0 && strcmp(ours + a, ":latest") == 0) return true;
    return false;
}

/* -- pictures -- */

SRV_FN int api__b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Standard base64 (RFC 4648 section 4), '=' padding optional; anything else in it is an error.
   Returns the decoded bytes (free them) and their count, or NULL (*why says why). */
SRV_FN unsigned char *api_base64_decode(const char *s, size_t n, size_t *out_len, const char **why) {
    unsigned char *out;
    size_t i, o = 0, pad = 0;
    uint32_t acc = 0;
    int bits = 0;
    while (pad < 2 && n > 0 && s[n - 1] == '=') { n--; pad++; }
    if ((n + pad) % 4 != 0 && pad > 0) { *why = "its '=' padding does not make a multiple of 4 characters"; return NULL; }
    if (n % 4 == 1) { *why = "its length is not that of base64"; return NULL; }
    if (!(out = (unsigned char *)malloc(n / 4 * 3 + 3))) { *why = "out of memory"; return NULL; }
    for (i = 0; i < n; i++) {
        int v = api__b64_value((unsigned char)s[i]);
        if (v < 0) { free(out); *why = "it has a character that is not base64"; return NULL; }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) { bits -= 8; out[o++] = (unsigned char)(acc >> bits); }
    }
    if (bits > 0 && (acc & ((1u << bits) - 1)) != 0) { free(out); *why = "its last character has bits past the data"; return NULL; }
    *out_len = o;
    return out;
}

/* Adds a picture from base64 text; param names it in errors. */
SRV_FN bool api_add_picture_b64(struct api_request *r, const struct api_config *c, const char *b64, size_t len, const char *param,
                                struct api_error *e) {
    struct api_picture *p;
    const char *why = NULL;
    unsigned char *bytes;
    size_t n;
    if (r->n_pictures >= c->max_images)
        return api_fail(e, 400, "too_many_images", param, "too many pictures: this server takes at most %d per request", c->max_images);
    if (len == 0) return api_fail(e, 400, "invalid_image", param, "%s: the picture is empty", param);
    if (!(bytes = api_base64_decode(b64, len, &n, &why)))
        return api_fail(e, 400, "invalid_image", param, "%s: the picture is not valid base64: %s", param, why);
    if (!(p = (struct api_picture *)realloc(r->pictures, sizeof *p * (size_t)(r->n_pictures + 1)))) {
        free(bytes);
        return api_fail(e, 500, NULL, param, "out of memory");
    }
    r->pictures = p;
    p[r->n_pictures].bytes = bytes;
    p[r->n_pictures].len = n;
    r->n_pictures++;
    return true;
}

/* A data: URL (RFC 2397) with base64 data of an image type; the server fetches nothing, so an
   http(s) URL is refused with the way to send the picture instead. */
SRV_FN bool api_add_picture_url(struct api_request *r, const struct api_config *c, const char *url, const char *param, struct api_error *e) {
    const char *comma, *meta;
    size_t meta_len;
    if (strncmp(url, "http://", 7) == 0 || strncmp(url, "https://", 8) == 0)
        return api_fail(e, 400, "image_url_not_supported", param,
                        "%s: this server fetches nothing from the network; send the picture itself as a data: URL "
                        "(data:image/png;base64,...)", param);
    if (strncmp(url, "data:", 5) != 0)
        return api_fail(e, 400, "invalid_image_url", param, "%s: the URL must be a data: URL (data:image/png;base64,...)", param);
    meta = url + 5;
    if (!(comma = strchr(meta, ','))) return api_fail(e, 400, "invalid_image_url", param, "%s: the data: URL has no comma before its data", param);
    meta_len = (size_t)(comma - meta);
    if (meta_len < 7 || memcmp(comma - 7, ";base64", 7) != 0)
        return api_fail(e, 400, "invalid_image_url", param, "%s: the data: URL must be base64 (data:image/png;base64,...)", param);
    if (meta_len > 7 && strncmp(meta, "image/", 6) != 0 && strncmp(meta, "application/octet-stream", 24) != 0)
        return api_fail(e, 400, "invalid_image_url", param, "%s: the data: URL is not of an image type (image/...)", param);
    return api_add_picture_b64(r, c, comma + 1, strlen(comma + 1), param, e);
}

/* -- common fields -- */

/* A message's text must not place pictures itself: its <|image|> marks would make the prompt show
   pictures where the client put none (the pictures go in image parts or "images"). */
SRV_FN bool api_add_message(struct api_request *r, const char *role, const char *text, int n_images, struct api_error *e) {
    struct mms_chat_message *m;
    if (text && strstr(text, "<|image|>"))
        return api_fail(e, 400, "invalid_value", "messages", "a message's text has <|image|> in it; send pictures as pictures, not as that mark");
    m = (struct mms_chat_message *)realloc(r->messages, sizeof *m * (size_t)(r->n_messages + 1));
    if (!m) return api_fail(e, 500, NULL, NULL, "out of memory");
    r->messages = m;
    m[r->n_messages].role = role;
    m[r->n_messages].text = text ? text : "";
    m[r->n_messages].n_images = n_images;
    r->n_messages++;
    return true;
}

/* Structured output: the answer follows the JSON Schema at v (object_only ignored), or with v < 0
   is any JSON object (OpenAI's json_object, Ollama's "json"). A schema the library cannot follow
   fails naming the keyword and its place in the schema, never silently loosened. */
SRV_FN bool api_set_format(struct api_request *r, int64_t v, const char *param, struct api_error *e) {
    if (v < 0) r->grammar = mms_grammar_json(true);
    else {
        const int64_t n = mms_json_write(r->json, v, NULL, 0);
        char *text = n >= 0 ? (char *)malloc((size_t)n + 1) : NULL;
        if (!text) return api_fail(e, 500, NULL, NULL, "out of memory");
        mms_json_write(r->json, v, text, (size_t)n + 1);
        r->grammar = mms_grammar_from_json_schema(text, (size_t)n);
        free(text);
    }
    if (r->grammar) return true;
    if (mms_last_status() == MMS_ERR_OOM) return api_fail(e, 500, NULL, NULL, "out of memory");
    return api_fail(e, 400, "invalid_schema", param, "this server cannot follow the schema in '%s': %s", param, mms_last_error());
}

/* "stop": a string or an array of strings (each non-empty). */
SRV_FN bool api_get_stop(struct api_request *r, const struct api_config *c, int64_t obj, const char *param, struct api_error *e) {
    const struct mms_json *j = r->json;
    int64_t v = mms_json_get(j, obj, "stop"), n, i;
    enum mms_json_type t = mms_json_type(j, v);
    if (v < 0 || t == MMS_JSON_NULL) return true;
    if (t != MMS_JSON_STRING && t != MMS_JSON_ARRAY) return api__wrong_type(e, j, v, param, "a string or an array of strings");
    n = t == MMS_JSON_STRING ? 1 : mms_json_len(j, v);
    if (n > c->max_stop) return api_fail(e, 400, "invalid_value", param, "'%s' has %lld strings; at most %d", param, (long long)n, c->max_stop);
    free((void *)r->stop);
    r->n_stop = 0;
    if (!(r->stop = (const char **)calloc((size_t)(n ? n : 1), sizeof *r->stop))) return api_fail(e, 500, NULL, NULL, "out of memory");
    for (i = 0; i < n; i++) {
        int64_t s = t == MMS_JSON_STRING ? v : mms_json_at(j, v, i);
        size_t len;
        const char *str = mms_json_str(j, s, &len);
        if (!str) return api__wrong_type(e, j, s, param, "a string or an array of strings");
        if (len == 0 || strlen(str) != len) return api_fail(e, 400, "invalid_value", param, "'%s': a stop string must be non-empty text", param);
        r->stop[r->n_stop++] = str;
    }
    return true;
}

/* The role the template renders for a message's role, or NULL; the system role of OpenAI's newer
   models ("developer") is a system message to this one. */
SRV_FN const char *api_role(const char *role, bool openai) {
    static const char *const roles[] = { "system", "user", "assistant", "tool" };
    size_t i;
    if (openai && strcmp(role, "developer") == 0) return "system";
    for (i = 0; i < sizeof roles / sizeof roles[0]; i++)
        if (strcmp(role, roles[i]) == 0) return roles[i];
    return NULL;
}

/* Message i of the array msgs (both APIs): an object with a role the template renders. *msg gets
   the message and *role that role. */
SRV_FN bool api_message_at(const struct mms_json *j, int64_t msgs, int64_t i, bool openai, int64_t *msg, const char **role,
                           struct api_error *e) {
    const char *asked = NULL;
    char param[48];
    *msg = mms_json_at(j, msgs, i);
    snprintf(param, sizeof param, "messages[%lld]", (long long)i);
    if (mms_json_type(j, *msg) != MMS_JSON_OBJECT) return api__wrong_type(e, j, *msg, param, "an object");
    snprintf(param, sizeof param, "messages[%lld].role", (long long)i);
    if (!api_get_str(j, *msg, "role", param, &asked, e)) return false;
    if (!asked) return api_fail(e, 400, "invalid_value", param, "'%s' is required", param);
    if (!(*role = api_role(asked, openai)))
        return api_fail(e, 400, "invalid_value", param, "'%s' is '%s'; it must be system, %suser, assistant or tool", param, asked,
                        openai ? "developer, " : "");
    return true;
}

#endif
