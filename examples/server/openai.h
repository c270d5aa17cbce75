/* openai.h - OpenAI's chat completions API on mllama-server: POST /v1/chat/completions mapped onto
   an api_request, and the answers written as the official client parses them (a completion, or
   server-sent chunks ending with "data: [DONE]"; errors as {"error": {message, type, param,
   code}}). Fields this model has no use for are ignored as OpenAI's compatible servers do;
   fields that ask for something it cannot do (tools, logprobs, n > 1, audio, a schema it cannot
   follow) are refused with 400 rather than silently dropped. response_format (json_object,
   json_schema) constrains the answer with the library's constraint engine. */
#ifndef MLLAMA_SERVER_OPENAI_H
#define MLLAMA_SERVER_OPENAI_H

#include "json_writer.h"
#include "request.h"

/* A message's content: a string, an array of parts (text, image_url), or null. Text parts are
   joined by a line break; the message's pictures come before its text, as the template shows them. */
SRV_FN bool openai__content(struct api_request *r, const struct api_config *c, int64_t msg, int index, const char *role,
                            struct api_error *e) {
    const struct mms_json *j = r->json;
    int64_t content = mms_json_get(j, msg, "content"), n, i;
    char param[64];
    int n_images = 0;
    struct sbuf text;
    snprintf(param, sizeof param, "messages[%d].content", index);
    switch (mms_json_type(j, content)) {
    case MMS_JSON_NONE:
    case MMS_JSON_NULL:
        if (strcmp(role, "assistant") != 0) return api_fail(e, 400, "invalid_value", param, "'%s' is required", param);
        return api_add_message(r, role, "", 0, e);
    case MMS_JSON_STRING: {
        const char *s = NULL;
        if (!api_get_str(j, msg, "content", param, &s, e)) return false;
        return api_add_message(r, role, s, 0, e);
    }
    case MMS_JSON_ARRAY: break;
    default: return api__wrong_type(e, j, content, param, "a string or an array of content parts");
    }
    memset(&text, 0, sizeof text);
    n = mms_json_len(j, content);
    for (i = 0; i < n; i++) {
        int64_t part = mms_json_at(j, content, i);
        const char *type = NULL, *s = NULL;
        char pparam[128];
        snprintf(pparam, sizeof pparam, "%s[%lld]", param, (long long)i);
        if (mms_json_type(j, part) != MMS_JSON_OBJECT) { sb_free(&text); return api__wrong_type(e, j, part, pparam, "an object"); }
        snprintf(pparam, sizeof pparam, "%s[%lld].type", param, (long long)i);
        if (!api_get_str(j, part, "type", pparam, &type, e)) { sb_free(&text); return false; }
        if (!type) { sb_free(&text); return api_fail(e, 400, "invalid_value", pparam, "'%s' is required", pparam); }
        if (strcmp(type, "text") == 0) {
            snprintf(pparam, sizeof pparam, "%s[%lld].text", param, (long long)i);
            if (!api_get_str(j, part, "text", pparam, &s, e)) { sb_free(&text); return false; }
            if (!s) { sb_free(&text); return api_fail(e, 400, "invalid_value", pparam, "'%s' is required", pparam); }
            if (text.len) sb_put(&text, "\n", 1);
            sb_puts(&text, s);
        } else if (strcmp(type, "image_url") == 0) {
            int64_t iu = mms_json_get(j, part, "image_url");
            const char *url = NULL;
            snprintf(pparam, sizeof pparam, "%s[%lld].image_url", param, (long long)i);
            if (strcmp(role, "user") != 0) { sb_free(&text); return api_fail(e, 400, "invalid_value", pparam, "pictures go in user messages only"); }
            if (mms_json_type(j, iu) != MMS_JSON_OBJECT) { sb_free(&text); return api__wrong_type(e, j, iu, pparam, "an object with a url"); }
            snprintf(pparam, sizeof pparam, "%s[%lld].image_url.url", param, (long long)i);
            if (!api_get_str(j, iu, "url", pparam, &url, e)) { sb_free(&text); return false; }
            if (!url) { sb_free(&text); return api_fail(e, 400, "invalid_value", pparam, "'%s' is required", pparam); }
            if (!api_add_picture_url(r, c, url, pparam, e)) { sb_free(&text); return false; }
            n_images++;
        } else {
            sb_free(&text);
            return api_fail(e, 400, "invalid_value", pparam, "content parts of type '%s' are not supported (text and image_url are)", type);
        }
    }
    if (text.oom) { sb_free(&text); return api_fail(e, 500, NULL, NULL, "out of memory"); }
    if (!text.data) sb_puts(&text, "");
    if (!api__keep(r, text.data)) return api_fail(e, 500, NULL, NULL, "out of memory");
    return api_add_message(r, role, text.data, n_images, e);
}

/* Fields that ask for what this server cannot do: present and not their "off" value, refused. */
SRV_FN bool openai__refuse_unsupported(const struct mms_json *j, struct api_error *e) {
    int64_t v;
    int64_t n = 1;
    bool logprobs = false;
    if ((v = mms_json_get(j, 0, "tools")) >= 0 && mms_json_type(j, v) != MMS_JSON_NULL &&
        !(mms_json_type(j, v) == MMS_JSON_ARRAY && mms_json_len(j, v) == 0))
        return api_fail(e, 400, "unsupported_parameter", "tools", "tools are not supported by this server");
    if ((v = mms_json_get(j, 0, "functions")) >= 0 && mms_json_type(j, v) != MMS_JSON_NULL)
        return api_fail(e, 400, "unsupported_parameter", "functions", "functions are not supported by this server");
    if (!api_get_bool(j, 0, "logprobs", "logprobs", &logprobs, e)) return false;
    if (logprobs) return api_fail(e, 400, "unsupported_parameter", "logprobs", "logprobs are not supported by this server");
    if (!api_get_int(j, 0, "n", "n", 1, 128, &n, e)) return false;
    if (n != 1) return api_fail(e, 400, "unsupported_parameter", "n", "this server makes one choice per request (n = 1)");
    if ((v = mms_json_get(j, 0, "audio")) >= 0 && mms_json_type(j, v) != MMS_JSON_NULL)
        return api_fail(e, 400, "unsupported_parameter", "audio", "audio is not supported by this server");
    return true;
}

/* response_format: {"type": "text"}, {"type": "json_object"} (any JSON object) or {"type":
   "json_schema", "json_schema": {"name", "schema", "strict", "description"}}. The answer follows
   the schema whether strict is true or not: a schema this server cannot follow is refused, never
   followed loosely. */
SRV_FN bool openai__response_format(struct api_request *r, struct api_error *e) {
    const struct mms_json *j = r->json;
    const int64_t v = mms_json_get(j, 0, "response_format");
    int64_t js, schema;
    const char *type = NULL, *name = NULL;
    bool strict = false;
    size_t i;
    if (v < 0 || mms_json_type(j, v) == MMS_JSON_NULL) return true;
    if (mms_json_type(j, v) != MMS_JSON_OBJECT) return api__wrong_type(e, j, v, "response_format", "an object");
    if (!api_get_str(j, v, "type", "response_format.type", &type, e)) return false;
    if (!type) return api_fail(e, 400, "invalid_value", "response_format.type", "'response_format.type' is required");
    if (strcmp(type, "text") == 0) return true;
    if (strcmp(type, "json_object") == 0) return api_set_format(r, -1, "response_format", e);
    if (strcmp(type, "json_schema") != 0)
        return api_fail(e, 400, "invalid_value", "response_format.type",
                        "'response_format.type' must be 'text', 'json_object' or 'json_schema', not '%s'", type);
    js = mms_json_get(j, v, "json_schema");
    if (js < 0) return api_fail(e, 400, "invalid_value", "response_format.json_schema", "'response_format.json_schema' is required");
    if (mms_json_type(j, js) != MMS_JSON_OBJECT) return api__wrong_type(e, j, js, "response_format.json_schema", "an object");
    if (!api_get_str(j, js, "name", "response_format.json_schema.name", &name, e)) return false;
    if (!name) return api_fail(e, 400, "invalid_value", "response_format.json_schema.name", "'response_format.json_schema.name' is required");
    for (i = 0; name[i]; i++)
        if (!isalnum((unsigned char)name[i]) && name[i] != '_' && name[i] != '-') break;
    if (name[i] || i == 0 || i > 64)
        return api_fail(e, 400, "invalid_value", "response_format.json_schema.name",
                        "'response_format.json_schema.name' must be 1 to 64 letters, digits, '_' or '-'");
    if (!api_get_bool(j, js, "strict", "response_format.json_schema.strict", &strict, e)) return false;
    schema = mms_json_get(j, js, "schema");
    if (schema < 0 || mms_json_type(j, schema) == MMS_JSON_NULL)
        return api_fail(e, 400, "invalid_value", "response_format.json_schema.schema", "'response_format.json_schema.schema' is required by this server");
    if (mms_json_type(j, schema) != MMS_JSON_OBJECT && mms_json_type(j, schema) != MMS_JSON_TRUE)
        return api__wrong_type(e, j, schema, "response_format.json_schema.schema", "an object");
    return api_set_format(r, schema, "response_format.json_schema.schema", e);
}

/* Maps a chat completions body onto r (zeroed by the caller). */
SRV_FN bool openai_parse_chat(struct api_request *r, const struct api_config *c, const char *body, size_t len, struct api_error *e) {
    const struct mms_json *j;
    int64_t msgs, n, i, so, seed = 0, max_tokens = 0;
    double temperature = -1, top_p = -1;
    bool seed_set = false;
    r->kind = API_OPENAI_CHAT;
    r->sampling = c->defaults;
    r->sampling.seed = c->seed;
    if (!api_parse_body(r, body, len, e)) return false;
    j = r->json;
    if (!api_get_str(j, 0, "model", "model", &r->model, e)) return false;
    if (!r->model) return api_fail(e, 400, "invalid_value", "model", "'model' is required");
    if (!api_model_matches(r->model, c->model, false))
        return api_fail(e, 404, "model_not_found", "model", "The model '%s' does not exist; this server serves '%s'", r->model, c->model);
    msgs = mms_json_get(j, 0, "messages");
    if (msgs < 0) return api_fail(e, 400, "invalid_value", "messages", "'messages' is required");
    if (mms_json_type(j, msgs) != MMS_JSON_ARRAY) return api__wrong_type(e, j, msgs, "messages", "an array");
    if ((n = mms_json_len(j, msgs)) == 0) return api_fail(e, 400, "invalid_value", "messages", "'messages' must have at least one message");
    for (i = 0; i < n; i++) {
        int64_t m;
        const char *known;
        if (!api_message_at(j, msgs, i, true, &m, &known, e)) return false;
        if (!openai__content(r, c, m, (int)i, known, e)) return false;
    }
    if (!api_get_bool(j, 0, "stream", "stream", &r->stream, e)) return false;
    if ((so = mms_json_get(j, 0, "stream_options")) >= 0 && mms_json_type(j, so) != MMS_JSON_NULL) {
        if (!r->stream) return api_fail(e, 400, "invalid_value", "stream_options", "'stream_options' is only allowed when 'stream' is true");
        if (mms_json_type(j, so) != MMS_JSON_OBJECT) return api__wrong_type(e, j, so, "stream_options", "an object");
        if (!api_get_bool(j, so, "include_usage", "stream_options.include_usage", &r->include_usage, e)) return false;
    }
    if (!api_get_int(j, 0, "max_tokens", "max_tokens", 1, INT32_MAX, &max_tokens, e)) return false;
    if (!api_get_int(j, 0, "max_completion_tokens", "max_completion_tokens", 1, INT32_MAX, &max_tokens, e)) return false;
    r->max_tokens = (int)max_tokens;
    if (!api_get_num(j, 0, "temperature", "temperature", 0, 2, &temperature, e)) return false;
    if (!api_get_num(j, 0, "top_p", "top_p", 0, 1, &top_p, e)) return false;
    if (temperature >= 0) r->sampling.temperature = (float)temperature;
    if (top_p >= 0) r->sampling.top_p = (float)top_p;
    if (!api_get_int(j, 0, "seed", "seed", INT64_MIN + 1, INT64_MAX, &seed, e)) return false;
    seed_set = mms_json_type(j, mms_json_get(j, 0, "seed")) == MMS_JSON_NUMBER;
    if (seed_set) r->sampling.seed = (uint64_t)seed;
    if (!api_get_stop(r, c, 0, "stop", e)) return false;
    return openai__refuse_unsupported(j, e) && openai__response_format(r, e);
}

/* -- answers -- */

SRV_FN const char *openai_finish_reason(enum mms_finish f) { return f == MMS_FINISH_LENGTH ? "length" : "stop"; }

SRV_FN void openai__usage(struct jw *w, const struct mms_reply_usage *u) {
    jw_key(w, "usage");
    jw_object(w);
    jw_kint(w, "prompt_tokens", u->prompt_tokens);
    jw_kint(w, "completion_tokens", u->completion_tokens);
    jw_kint(w, "total_tokens", (int64_t)u->prompt_tokens + u->completion_tokens);
    jw_key(w, "prompt_tokens_details");
    jw_object(w);
    jw_kint(w, "cached_tokens", u->cached_tokens);
    jw_end_object(w);
    jw_key(w, "completion_tokens_details");
    jw_object(w);
    jw_kint(w, "reasoning_tokens", 0);
    jw_end_object(w);
    jw_end_object(w);
}

SRV_FN void openai__head(struct jw *w, const char *id, const char *object, int64_t created, const char *model) {
    jw_kstr(w, "id", id);
    jw_kstr(w, "object", object);
    jw_kint(w, "created", created);
    jw_kstr(w, "model", model);
    jw_kstr(w, "system_fingerprint", "mmsched");
}

/* The whole answer of a request that did not stream. */
SRV_FN void openai_write_completion(struct sbuf *b, const char *id, int64_t created, const char *model, const char *text, size_t len,
                                    enum mms_finish finish, const struct mms_reply_usage *u) {
    struct jw w;
    jw_init(&w, b);
    jw_object(&w);
    openai__head(&w, id, "chat.completion", created, model);
    jw_key(&w, "choices");
    jw_array(&w);
    jw_object(&w);
    jw_kint(&w, "index", 0);
    jw_key(&w, "message");
    jw_object(&w);
    jw_kstr(&w, "role", "assistant");
    jw_key(&w, "content");
    jw_strn(&w, text, len);
    jw_knull(&w, "refusal");
    jw_end_object(&w);
    jw_knull(&w, "logprobs");
    jw_kstr(&w, "finish_reason", openai_finish_reason(finish));
    jw_end_object(&w);
    jw_end_array(&w);
    openai__usage(&w, u);
    jw_end_object(&w);
}

/* One server-sent event of a streamed answer: the first carries the role, the last the
   finish_reason (text NULL: no content field); with include_usage every chunk has "usage": null
   and a last chunk with no choices carries the usage (usage not NULL). */
SRV_FN void openai_write_chunk(struct sbuf *b, const char *id, int64_t created, const char *model, bool first, const char *text, size_t len,
                               const char *finish, bool include_usage, const struct mms_reply_usage *usage) {
    struct jw w;
    sb_puts(b, "data: ");
    jw_init(&w, b);
    jw_object(&w);
    openai__head(&w, id, "chat.completion.chunk", created, model);
    jw_key(&w, "choices");
    jw_array(&w);
    if (!usage) {
        jw_object(&w);
        jw_kint(&w, "index", 0);
        jw_key(&w, "delta");
        jw_object(&w);
        if (first) jw_kstr(&w, "role", "assistant");
        if (text) { jw_key(&w, "content"); jw_strn(&w, text, len); }
        jw_end_object(&w);
        jw_knull(&w, "logprobs");
        if (finish) jw_kstr(&w, "finish_reason", finish);
        else jw_knull(&w, "finish_reason");
        jw_end_object(&w);
    }
    jw_end_array(&w);
    if (usage) openai__usage(&w, usage);
    else if (include_usage) jw_knull(&w, "usage");
    jw_end_object(&w);
    sb_puts(b, "\n\n");
}

SRV_FN void openai_write_error_object(struct jw *w, const struct api_error *e) {
    jw_object(w);
    jw_key(w, "error");
    jw_object(w);
    jw_kstr(w, "message", e->message);
    jw_kstr(w, "type", e->type ? e->type : "invalid_request_error");
    if (e->param[0]) jw_kstr(w, "param", e->param);
    else jw_knull(w, "param");
    if (e->code) jw_kstr(w, "code", e->code);
    else jw_knull(w, "code");
    jw_end_object(w);
    jw_end_object(w);
}

SRV_FN void openai_write_error(struct sbuf *b, const struct api_error *e) {
    struct jw w;
    jw_init(&w, b);
    openai_write_error_object(&w, e);
}

/* GET /v1/models and /v1/models/ID (one == true: the model object alone). */
SRV_FN void openai_write_models(struct sbuf *b, const char *model, int64_t created, bool one) {
    struct jw w;
    jw_init(&w, b);
    if (!one) {
        jw_object(&w);
        jw_kstr(&w, "object", "list");
        jw_key(&w, "data");
        jw_array(&w);
    }
    jw_object(&w);
    jw_kstr(&w, "id", model);
    jw_kstr(&w, "object", "model");
    jw_kint(&w, "created", created);
    jw_kstr(&w, "owned_by", "mmsched");
    jw_end_object(&w);
    if (!one) {
        jw_end_array(&w);
        jw_end_object(&w);
    }
}

#endif
