/* >>text-chat =====================================================================================
   The instruct chat template of Llama 3.2 Vision, written out in C: the model's Jinja template
   has one path for conversations without tools, and that path is all this renders. */

/* Appends to a bounded buffer while counting the full length, like a chain of snprintf calls. */
struct mms__chat_out {
    char  *buf;
    size_t cap, len;
};

static void mms__chat_put(struct mms__chat_out *o, const char *s, size_t n) {
    if (o->len < o->cap) {
        size_t room = o->cap - o->len, k = n < room ? n : room;
        memcpy(o->buf + o->len, s, k);
    }
    o->len += n;
}
static void mms__chat_puts(struct mms__chat_out *o, const char *s) { mms__chat_put(o, s, strlen(s)); }

/* Length of the whitespace code point at s (as Python's str.isspace, which Jinja's trim uses), or 0. */
static size_t mms__chat_space_len(const unsigned char *s, size_t n) {
    uint32_t c;
    if (n >= 1 && ((s[0] >= 0x09 && s[0] <= 0x0d) || (s[0] >= 0x1c && s[0] <= 0x20))) return 1;
    if (n >= 2 && s[0] == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0)) return 2;
    if (n < 3 || (s[0] & 0xf0) != 0xe0) return 0;
    c = ((uint32_t)(s[0] & 0x0f) << 12) | ((uint32_t)(s[1] & 0x3f) << 6) | (uint32_t)(s[2] & 0x3f);
    return c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000 ? 3 : 0;
}

/* s as a JSON string, as the template's tojson filter writes it in transformers (non-ASCII kept). */
static void mms__chat_put_json(struct mms__chat_out *o, const char *s) {
    static const char hex[] = "0123456789abcdef";
    mms__chat_puts(o, "\"");
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        char esc[7] = { '\\', 'u', '0', '0', 0, 0, 0 };
        if (c == '"' || c == '\\') { esc[1] = (char)c; mms__chat_put(o, esc, 2); }
        else if (c == '\n') mms__chat_puts(o, "\\n");
        else if (c == '\r') mms__chat_puts(o, "\\r");
        else if (c == '\t') mms__chat_puts(o, "\\t");
        else if (c == '\b') mms__chat_puts(o, "\\b");
        else if (c == '\f') mms__chat_puts(o, "\\f");
        else if (c < 0x20) { esc[4] = hex[c >> 4]; esc[5] = hex[c & 15]; mms__chat_put(o, esc, 6); }
        else mms__chat_put(o, s, 1);
    }
    mms__chat_puts(o, "\"");
}

/* Whitespace-trimmed [*start, *end) of s. */
static void mms__chat_trim(const char *s, size_t *start, size_t *end) {
    const unsigned char *u = (const unsigned char *)s;
    size_t a = 0, b = strlen(s), k;
    while (a < b && (k = mms__chat_space_len(u + a, b - a)) > 0) a += k;
    while (b > a) {   /* step back over one code point, then test it */
        size_t p = b - 1;
        while (p > a && (u[p] & 0xc0) == 0x80) p--;
        if (mms__chat_space_len(u + p, b - p) != b - p) break;
        b = p;
    }
    *start = a;
    *end = b;
}

MMS_API int mms_chat_apply_template(const struct mms_chat_message *msgs, int n, bool add_generation_prompt, const char *date,
                                    char *buf, size_t cap) {
    struct mms__chat_out o;
    const struct mms_chat_message *system = NULL;
    bool has_images = false;
    int i, j;
    if (!msgs || n < 1 || (!buf && cap > 0))
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_chat_apply_template: at least one message (got %d) and a buffer of cap bytes are required", n);
    for (i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].role[0])
            return mms_set_error(MMS_ERR_INVALID_ARG, "mms_chat_apply_template: message %d has no role", i);
        if (msgs[i].n_images > 0 && (strcmp(msgs[i].role, "tool") == 0 || strcmp(msgs[i].role, "ipython") == 0))
            return mms_set_error(MMS_ERR_INVALID_ARG, "mms_chat_apply_template: message %d (%s) cannot hold images", i, msgs[i].role);
        if (msgs[i].n_images < 0) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_chat_apply_template: message %d has %d images", i, msgs[i].n_images);
    }
    if (n > 0 && strcmp(msgs[0].role, "system") == 0) {
        system = msgs;
        msgs++;
        n--;
        if (system->n_images > 0)
            return mms_set_error(MMS_ERR_INVALID_ARG, "mms_chat_apply_template: the system message cannot hold images");
    }
    for (i = 0; i < n; i++) has_images |= msgs[i].n_images > 0;

    o.buf = buf;
    o.cap = cap;
    o.len = 0;
    mms__chat_puts(&o, "<|begin_of_text|>");
    {
        size_t a = 0, b = 0;
        if (system && system->text) mms__chat_trim(system->text, &a, &b);
        if (has_images && b > a)
            return mms_set_error(MMS_ERR_INVALID_ARG, "mms_chat_apply_template: prompting with images is incompatible with system "
                                 "messages (the model's template forbids it)");
        if (!has_images) {
            mms__chat_puts(&o, "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: ");
            mms__chat_puts(&o, date ? date : "26 Jul 2024");
            mms__chat_puts(&o, "\n\n");
            if (b > a) mms__chat_put(&o, system->text + a, b - a);
            mms__chat_puts(&o, "<|eot_id|>");
        }
    }
    for (i = 0; i < n; i++) {
        const bool tool = strcmp(msgs[i].role, "tool") == 0 || strcmp(msgs[i].role, "ipython") == 0;
        mms__chat_puts(&o, "<|start_header_id|>");
        mms__chat_puts(&o, tool ? "ipython" : msgs[i].role);
        mms__chat_puts(&o, "<|end_header_id|>\n\n");
        if (tool) {   /* the template writes tool output through tojson */
            mms__chat_put_json(&o, msgs[i].text ? msgs[i].text : "");
        } else {
            for (j = 0; j < msgs[i].n_images; j++) mms__chat_puts(&o, "<|image|>");
            if (msgs[i].text) mms__chat_puts(&o, msgs[i].text);
        }
        mms__chat_puts(&o, "<|eot_id|>");
    }
    if (add_generation_prompt) mms__chat_puts(&o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    if (cap > 0) buf[o.len < cap ? o.len : cap - 1] = '\0';
    if (o.len > (size_t)INT_MAX) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_chat_apply_template: the conversation is over 2 GiB");
    return (int)o.len;
}
