/* >>mllama-prompt =================================================================================
   A conversation as this model's prompt: the chat template, with the layout for several pictures
   in one message (the first <|image|> before the text, then a "Picture N." line per picture,
   each further picture's <|image|> before its line). */

static const char mms__mllama_image_mark[] = "<|image|>";

/* The text of a message with n > 1 pictures: its text, then a line per picture. Free it. */
static char *mms__mllama_pictures_text(const char *text, int n) {
    const size_t cap = strlen(text) + 2 + (size_t)n * (sizeof mms__mllama_image_mark + 24);
    char *s = (char *)MMS_MALLOC(cap);
    size_t len;
    int i;
    if (!s) return NULL;
    len = (size_t)snprintf(s, cap, "%s\n", text);
    for (i = 0; i < n; i++) len += (size_t)snprintf(s + len, cap - len, "%sPicture %d.\n", i ? mms__mllama_image_mark : "", i + 1);
    return s;
}

MMS_API int mms_mllama_chat_prompt(const struct mms_chat_message *messages, int n_messages, bool add_generation_prompt, const char *date,
                                   char *buf, size_t cap) {
    struct mms_chat_message *laid;
    char **texts;
    int i = 0, n;
    if (!messages || n_messages < 1) return (int)mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_chat_prompt: no messages");
    for (i = 0; i < n_messages; i++)
        if (messages[i].text && strstr(messages[i].text, mms__mllama_image_mark))
            return (int)mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_chat_prompt: message %d has %s in its text; a message's "
                                      "pictures are its n_images, placed by the layout", i, mms__mllama_image_mark);
    laid = (struct mms_chat_message *)MMS_MALLOC(sizeof *laid * (size_t)n_messages);
    texts = (char **)MMS_MALLOC(sizeof *texts * (size_t)n_messages);
    for (i = 0; laid && texts && i < n_messages; i++) {
        laid[i] = messages[i];
        texts[i] = NULL;
        if (messages[i].n_images <= 1) continue;
        if (!(texts[i] = mms__mllama_pictures_text(messages[i].text ? messages[i].text : "", messages[i].n_images))) break;
        laid[i].text = texts[i];
        laid[i].n_images = 1;          /* the template writes the first <|image|>; the lines carry the others */
    }
    if (i == n_messages) n = mms_chat_apply_template(laid, n_messages, add_generation_prompt, date, buf, cap);
    else n = (int)mms_set_error(MMS_ERR_OOM, "mms_mllama_chat_prompt: out of host memory");
    while (texts && i-- > 0) MMS_FREE(texts[i]);
    MMS_FREE(laid);
    MMS_FREE(texts);
    return n;
}
