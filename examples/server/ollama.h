/* ollama.h - Ollama's API on mllama-server: POST /api/chat and /api/generate mapped onto an
   api_request, and the answers as Ollama writes them (NDJSON lines while streaming, the default;
   the last one "done": true with done_reason, the counts and the durations in nanoseconds; errors
   as {"error": "..."}), plus the model listings (/api/tags, /api/show, /api/ps, /api/version).
   A request with no messages (chat) or no prompt and no pictures (generate) is Ollama's "load
   the model" request, answered at once with done_reason "load". "format" ("json": any JSON object,
   or a JSON Schema) constrains the answer. Requests for what this model cannot do (tools,
   thinking, a schema it cannot follow, a suffix, a template, a context) are refused
   with 400 rather than silently ignored; options this server has no use for are ignored, as
   Ollama ignores unknown ones. */
#ifndef MLLAMA_SERVER_OLLAMA_H
#define MLLAMA_SERVER_OLLAMA_H

#include "json_writer.h"
#include "request.h"
#include <time.h>

/* The Ollama API version /api/version reports: the newest whose requests and answers, for the
   endpoints served here, this server matches. */
#define OLLAMA_API_VERSION "0.12.0"

/* "images": an array of base64 strings. */
SRV_FN bool ollama__images(struct api_request *r, const struct api_config *c, int64_t obj, const char *param, int *n_added,
                           struct api_error *e) {
    const struct mms_json *j = r->json;
    int64_t v = mms_json_get(j, obj, "images"), n, i;
    *n_added = 0;
    if (v < 0 || mms_json_type(j, v) == MMS_JSON_NULL) return true;
    if (mms_json_type(j, v) != MMS_JSON_ARRAY) return api__wrong_type(e, j, v, param, "an array of base64 strings");
    n = mms_json_len(j, v);
    for (i = 0; i < n; i++) {
        int64_t s = mms_json_at(j, v, i);
        size_t len;
        const char *b64 = mms_json_str(j, s, &len);
        char p[64];
        snprintf(p, sizeof p, "%s[%lld]", param, (long long)i);
        if (!b64) return api__wrong_type(e, j, s, p, "a base64 string");
        /* a data: URL is taken too (some clients send one) */
        if (strncmp(b64, "data:", 5) == 0) { if (!api_add_picture_url(r, c, b64, p, e)) return false; }
        else if (!api_add_picture_b64(r, c, b64, len, p, e)) return false;
        (*n_added)++;
    }
    return true;
}

/* "options": Ollama's model parameters; those the sampler has are used, the rest ignored. */
/* "format": "json" (any JSON object, as Ollama's json grammar), a JSON Schema object, or ""/null
   for free text. */
SRV_FN bool ollama__format(struct api_request *r, struct api_error *e) {
    const struct mms_json *j = r->json;
    const int64_t v = mms_json_get(j, 0, "format");
    const char *s;
    switch (mms_json_type(j, v)) {
    case MMS_JSON_NONE:
    case MMS_JSON_NULL: return true;
    case MMS_JSON_OBJECT: return api_set_format(r, v, "format", e);
    case MMS_JSON_STRING:
        s = mms_json_str(j, v, NULL);
        if (!s[0]) return true;
        if (strcmp(s, "json") == 0) return api_set_format(r, -1, "format", e);
        return api_fail(e, 400, "invalid_value", "format", "invalid format: '%s' (\"json\" or a JSON Schema object)", s);
    default: return api__wrong_type(e, j, v, "format", "\"json\" or a JSON Schema object");
    }
}

SRV_FN bool ollama__options(struct api_request *r, struct api_error *e) {
    const struct mms_json *j = r->json;
    int64_t o = mms_json_get(j, 0, "options"), x = 0;
    double d = -1;
    if (o < 0 || mms_json_type(j, o) == MMS_JSON_NULL) return true;
    if (mms_json_type(j, o) != MMS_JSON_OBJECT) return api__wrong_type(e, j, o, "options", "an object");
    if (!api_get_num(j, o, "temperature", "options.temperature", 0, 1e6, &d, e)) return false;
    if (d >= 0) r->sampling.temperature = (float)d;
    d = -1;
    if (!api_get_num(j, o, "top_p", "options.top_p", 0, 1, &d, e)) return false;
    if (d >= 0) r->sampling.top_p = (float)d;
    d = -1;
    if (!api_get_num(j, o, "min_p", "options.min_p", 0, 1, &d, e)) return false;
    if (d >= 0) r->sampling.min_p = (float)d;
    d = -1;
    if (!api_get_num(j, o, "repeat_penalty", "options.repeat_penalty", 0, 1e6, &d, e)) return false;
    if (d >= 0) r->sampling.repeat_penalty = (float)d;
    x = -1;
    if (!api_get_int(j, o, "top_k", "options.top_k", 0, INT32_MAX, &x, e)) return false;
    if (x >= 0) r->sampling.top_k = (int)x;
    x = -2;
    if (!api_get_int(j, o, "repeat_last_n", "options.repeat_last_n", -1, INT32_MAX, &x, e)) return false;
    if (x >= 0) r->sampling.repeat_last_n = (int)x;   /* Ollama's -1 (the whole context) is our 0 */
    else if (x == -1) r->sampling.repeat_last_n = 0;
    {
        int64_t seed = 0;
        if (!api_get_int(j, o, "seed", "options.seed", INT64_MIN + 1, INT64_MAX, &seed, e)) return false;
        if (mms_json_type(j, mms_json_get(j, o, "seed")) == MMS_JSON_NUMBER) r->sampling.seed = (uint64_t)seed;
    }
    x = 0;
    if (!api_get_int(j, o, "num_predict", "options.num_predict", INT32_MIN, INT32_MAX, &x, e)) return false;
    r->max_tokens = x > 0 ? (int)x : 0;   /* -1 (no limit), -2 (fill the context) and 0: until the end or the slot is full */
    x = 0;
    if (!api_get_int(j, o, "num_ctx", "options.num_ctx", 1, INT32_MAX, &x, e)) return false;   /* checked; the slots' size is the server's -c */
    return true;
}

SRV_FN bool ollama__common(struct api_request *r, const struct api_config *c, struct api_error *e) {
    const struct mms_json *j = r->json;
    int64_t v;
    bool think = false;
    if (!api_get_str(j, 0, "model", "model", &r->model, e)) return false;
    if (!r->model || !r->model[0]) return api_fail(e, 400, "invalid_value", "model", "model is required");
    if (!api_model_matches(r->model, c->model, true))
        return api_fail(e, 404, "model_not_found", "model", "model '%s' not found; this server serves '%s'", r->model, c->model);
    r->stream = true;   /* Ollama streams unless told not to */
    if (!api_get_bool(j, 0, "stream", "stream", &r->stream, e)) return false;
    if (!ollama__options(r, e)) return false;
    if (!api_get_stop(r, c, mms_json_get(j, 0, "options"), "options.stop", e)) return false;
    if (!ollama__format(r, e)) return false;
    if ((v = mms_json_get(j, 0, "think")) >= 0 && mms_json_type(j, v) == MMS_JSON_STRING)
        return api_fail(e, 400, "unsupported_parameter", "think", "'%s' does not support thinking", r->model);
    if (!api_get_bool(j, 0, "think", "think", &think, e)) return false;
    if (think) return api_fail(e, 400, "unsupported_parameter", "think", "'%s' does not support thinking", r->model);
    if ((v = mms_json_get(j, 0, "keep_alive")) >= 0 && mms_json_type(j, v) != MMS_JSON_NULL && mms_json_type(j, v) != MMS_JSON_STRING &&
        mms_json_type(j, v) != MMS_JSON_NUMBER)
        return api__wrong_type(e, j, v, "keep_alive", "a duration (a string like \"5m\" or a number of seconds)");
    return true;
}

/* Maps an /api/chat body onto r (zeroed by the caller). */
SRV_FN bool ollama_parse_chat(struct api_request *r, const struct api_config *c, const char *body, size_t len, struct api_error *e) {
    const struct mms_json *j;
    int64_t msgs, n, i, v;
    r->kind = API_OLLAMA_CHAT;
    r->sampling = c->defaults;
    r->sampling.seed = c->seed;
    if (!api_parse_body(r, body, len, e)) return false;
    j = r->json;
    if (!ollama__common(r, c, e)) return false;
    if ((v = mms_json_get(j, 0, "tools")) >= 0 && mms_json_type(j, v) != MMS_JSON_NULL &&
        !(mms_json_type(j, v) == MMS_JSON_ARRAY && mms_json_len(j, v) == 0))
        return api_fail(e, 400, "unsupported_parameter", "tools", "'%s' does not support tools", r->model);
    msgs = mms_json_get(j, 0, "messages");
    if (msgs < 0 || mms_json_type(j, msgs) == MMS_JSON_NULL) { r->load_only = true; return true; }
    if (mms_json_type(j, msgs) != MMS_JSON_ARRAY) return api__wrong_type(e, j, msgs, "messages", "an array");
    if ((n = mms_json_len(j, msgs)) == 0) { r->load_only = true; return true; }
    for (i = 0; i < n; i++) {
        int64_t m;
        const char *known, *content = NULL;
        char param[48];
        int n_images;
        if (!api_message_at(j, msgs, i, false, &m, &known, e)) return false;
        snprintf(param, sizeof param, "messages[%lld].content", (long long)i);
        if (!api_get_str(j, m, "content", param, &content, e)) return false;
        snprintf(param, sizeof param, "messages[%lld].images", (long long)i);
        if (!ollama__images(r, c, m, param, &n_images, e)) return false;
        if (n_images && strcmp(known, "user") != 0) return api_fail(e, 400, "invalid_value", param, "pictures go in user messages only");
        if (!api_add_message(r, known, content, n_images, e)) return false;
    }
    return true;
}

SRV_FN int ollama__count_marks(const char *s) {
    int n = 0;
    while ((s = strstr(s, "<|image|>")) != NULL) { n++; s += 9; }
    return n;
}

/* Maps an /api/generate body onto r (zeroed by the caller): the prompt as one user turn (with
   "system" before it), or with "raw" the prompt as it is. */
SRV_FN bool ollama_parse_generate(struct api_request *r, const struct api_config *c, const char *body, size_t len, struct api_error *e) {
    const struct mms_json *j;
    const char *prompt = NULL, *system = NULL, *s = NULL;
    bool raw = false;
    int n_images;
    int64_t v;
    r->kind = API_OLLAMA_GENERATE;
    r->sampling = c->defaults;
    r->sampling.seed = c->seed;
    if (!api_parse_body(r, body, len, e)) return false;
    j = r->json;
    if (!ollama__common(r, c, e)) return false;
    if (!api_get_str(j, 0, "prompt", "prompt", &prompt, e)) return false;
    if (!api_get_str(j, 0, "system", "system", &system, e)) return false;
    if (!api_get_bool(j, 0, "raw", "raw", &raw, e)) return false;
    if (!api_get_str(j, 0, "suffix", "suffix", &s, e)) return false;
    if (s && s[0]) return api_fail(e, 400, "unsupported_parameter", "suffix", "'%s' does not support insert (suffix)", r->model);
    s = NULL;
    if (!api_get_str(j, 0, "template", "template", &s, e)) return false;
    if (s && s[0]) return api_fail(e, 400, "unsupported_parameter", "template", "a custom template is not supported by this server");
    if ((v = mms_json_get(j, 0, "context")) >= 0 && mms_json_type(j, v) != MMS_JSON_NULL &&
        !(mms_json_type(j, v) == MMS_JSON_ARRAY && mms_json_len(j, v) == 0))
        return api_fail(e, 400, "unsupported_parameter", "context", "'context' is not supported by this server: send the conversation to /api/chat");
    if (!ollama__images(r, c, 0, "images", &n_images, e)) return false;
    if ((!prompt || !prompt[0]) && n_images == 0) { r->load_only = true; return true; }
    if (raw) {
        if (system && system[0]) return api_fail(e, 400, "invalid_value", "system", "'system' does not go with 'raw': write it in the prompt");
        if (ollama__count_marks(prompt ? prompt : "") != n_images)
            return api_fail(e, 400, "invalid_value", "prompt", "with 'raw' the prompt places each picture with <|image|>: it has %d for %d pictures",
                            ollama__count_marks(prompt ? prompt : ""), n_images);
        r->prompt = prompt ? prompt : "";
        return true;
    }
    if (system && system[0] && !api_add_message(r, "system", system, 0, e)) return false;
    return api_add_message(r, "user", prompt, n_images, e);
}

/* -- answers -- */

/* The time as Ollama writes it: RFC 3339 in UTC with nanoseconds. */
SRV_FN void ollama_timestamp(char *out, size_t cap) {
    struct timespec ts;
    struct tm tm;
    char date[32];
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, cap, "%s.%09ldZ", date, (long)ts.tv_nsec);
}

SRV_FN void ollama__text(struct jw *w, enum api_kind kind, const char *text, size_t len) {
    if (kind == API_OLLAMA_CHAT) {
        jw_key(w, "message");
        jw_object(w);
        jw_kstr(w, "role", "assistant");
        jw_key(w, "content");
        jw_strn(w, text, len);
        jw_end_object(w);
    } else {
        jw_key(w, "response");
        jw_strn(w, text, len);
    }
}

/* What every answer line starts with: the model, the time, and the text (an object left open). */
SRV_FN void ollama__begin_answer(struct jw *w, struct sbuf *b, enum api_kind kind, const char *model, const char *text, size_t len) {
    char ts[48];
    ollama_timestamp(ts, sizeof ts);
    jw_init(w, b);
    jw_object(w);
    jw_kstr(w, "model", model);
    jw_kstr(w, "created_at", ts);
    ollama__text(w, kind, text, len);
}

/* A line of a streamed answer with some text. */
SRV_FN void ollama_write_chunk(struct sbuf *b, enum api_kind kind, const char *model, const char *text, size_t len) {
    struct jw w;
    ollama__begin_answer(&w, b, kind, model, text, len);
    jw_kbool(&w, "done", false);
    jw_end_object(&w);
    sb_puts(b, "\n");
}

/* The last line (streaming: text "") or the whole answer: done_reason, counts and durations in ns.
   usage NULL: the "load" answer. prompt_eval_count is the whole prompt, cached tokens included,
   as Ollama counts it (its runners count the prompt's inputs before the cache is looked up); the
   cache shows in prompt_eval_duration, the time of the tokens decoded for this request. */
SRV_FN void ollama_write_final(struct sbuf *b, enum api_kind kind, const char *model, const char *text, size_t len, const char *done_reason,
                               const struct mms_reply_usage *u, int64_t total_ns, bool newline) {
    struct jw w;
    ollama__begin_answer(&w, b, kind, model, text, len);
    jw_kstr(&w, "done_reason", done_reason);
    jw_kbool(&w, "done", true);
    if (u) {
        jw_kint(&w, "total_duration", total_ns);
        jw_kint(&w, "load_duration", 0);   /* the model stays loaded */
        jw_kint(&w, "prompt_eval_count", u->prompt_tokens);
        jw_kint(&w, "prompt_eval_duration", (int64_t)(u->prompt_ms * 1e6));
        jw_kint(&w, "eval_count", u->completion_tokens);
        jw_kint(&w, "eval_duration", (int64_t)(u->gen_ms * 1e6));
    }
    jw_end_object(&w);
    if (newline) sb_puts(b, "\n");
}

SRV_FN void ollama_write_error(struct sbuf *b, const char *message, bool newline) {
    struct jw w;
    jw_init(&w, b);
    jw_object(&w);
    jw_kstr(&w, "error", message);
    jw_end_object(&w);
    if (newline) sb_puts(b, "\n");
}

/* What the listings say about the model. */
struct ollama_model_info {
    const char *name;            /* as listed: with ":latest" when it has no tag */
    const char *modified_at;     /* RFC 3339 */
    int64_t     size;            /* bytes of the model's files */
    const char *digest;          /* hex */
    int64_t     n_params;        /* every tensor's elements, the vision projector's included */
    const char *parameter_size;  /* n_params as "10.7B", "3.2M" */
    const char *quantization;    /* "Q4_K_M", "F16", ... */
    int         context_length;  /* per slot */
};

SRV_FN void ollama__details(struct jw *w, const struct ollama_model_info *m) {
    jw_key(w, "details");
    jw_object(w);
    jw_kstr(w, "parent_model", "");
    jw_kstr(w, "format", "gguf");
    jw_kstr(w, "family", "mllama");
    jw_key(w, "families");
    jw_array(w);
    jw_str(w, "mllama");
    jw_end_array(w);
    jw_kstr(w, "parameter_size", m->parameter_size);
    jw_kstr(w, "quantization_level", m->quantization);
    jw_end_object(w);
}

/* GET /api/tags (ps false) and /api/ps (ps true: the model is always loaded). */
SRV_FN void ollama_write_tags(struct sbuf *b, const struct ollama_model_info *m, bool ps) {
    struct jw w;
    jw_init(&w, b);
    jw_object(&w);
    jw_key(&w, "models");
    jw_array(&w);
    jw_object(&w);
    jw_kstr(&w, "name", m->name);
    jw_kstr(&w, "model", m->name);
    if (!ps) jw_kstr(&w, "modified_at", m->modified_at);
    jw_kint(&w, "size", m->size);
    jw_kstr(&w, "digest", m->digest);
    ollama__details(&w, m);
    if (ps) {
        jw_kstr(&w, "expires_at", "2318-01-01T00:00:00Z");   /* never: the server keeps its model */
        jw_kint(&w, "size_vram", 0);
        jw_kint(&w, "context_length", m->context_length);
    }
    jw_end_object(&w);
    jw_end_array(&w);
    jw_end_object(&w);
}

/* POST /api/show */
SRV_FN void ollama_write_show(struct sbuf *b, const struct ollama_model_info *m, const struct mms_sampler_params *defaults) {
    struct jw w;
    char params[160];
    snprintf(params, sizeof params, "temperature %g\ntop_p %g\ntop_k %d", (double)defaults->temperature,
             defaults->top_p > 0 ? (double)defaults->top_p : 1.0, defaults->top_k);
    jw_init(&w, b);
    jw_object(&w);
    jw_kstr(&w, "license", "");
    jw_kstr(&w, "modelfile", "");
    jw_kstr(&w, "parameters", params);
    jw_kstr(&w, "template", "");
    ollama__details(&w, m);
    jw_key(&w, "model_info");
    jw_object(&w);
    jw_kstr(&w, "general.architecture", "mllama");
    jw_kint(&w, "general.parameter_count", m->n_params);
    jw_kint(&w, "mllama.context_length", m->context_length);
    jw_end_object(&w);
    jw_key(&w, "capabilities");
    jw_array(&w);
    jw_str(&w, "completion");
    jw_str(&w, "vision");
    jw_end_array(&w);
    jw_kstr(&w, "modified_at", m->modified_at);
    jw_end_object(&w);
}

#endif
