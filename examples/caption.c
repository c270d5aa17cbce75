/* caption.c - a picture described by Llama 3.2 Vision, in a page of C.
   cc -O2 -I. examples/caption.c -o caption -lstb -lm -lpthread && ./caption models/mllama-demo.gguf examples/images/circle.png */
#include <stb/stb_image.h>              /* first: it gives the library mms_image_load (Debian's libstb-dev) */
#define MMSCHED_IMPLEMENTATION
#include "mmsched.h"

/* The library logs its errors as it raises them; this program says them itself, once. */
static void warnings_only(enum mms_log_level level, const char *message, void *user) {
    if (level == MMS_LOG_WARN) fprintf(stderr, "caption: warning: %s\n", message);
    (void)user;
}

int main(int argc, char **argv) {
    struct mms_mllama_load_params load = { 0 };
    struct mms_engine_params params = { 0 };
    struct mms_chat_message message = { "user", "Describe this image.", 1 };
    struct mms_image_rgb picture = { 0 };
    struct mms_request request = { 0 };
    struct mms_reply_event event = { 0 };
    struct mms_engine *engine;
    struct mms_reply *reply;
    if (argc != 3) { fprintf(stderr, "usage: caption MODEL PICTURE\n"); return 2; }
    mms_log_set(warnings_only, NULL);
    load.path = argv[1];                   /* a GGUF, a Hugging Face folder or ollama:NAME */
    load.cpu = mms_backend_cpu_init();
    params.n_slots = params.max_images = 1;   /* one request of one picture at a time: the least memory */
    if (!load.cpu || !(params.model = mms_mllama_model_load(&load)) ||
        !(picture.rgb = mms_image_load(argv[2], 0, &picture.width, &picture.height)) || !(engine = mms_engine_new(&params))) {
        fprintf(stderr, "caption: %s\n", mms_last_error());
        return 1;
    }
    request.messages = &message;           /* one user message with one picture, greedy */
    request.n_messages = 1;
    request.images = &picture;
    request.n_images = 1;
    if (!(reply = mms_engine_submit(engine, &request))) { fprintf(stderr, "caption: %s\n", mms_last_error()); return 1; }
    while (event.finish == MMS_FINISH_NONE && mms_reply_next(reply, -1, &event) == MMS_OK) fputs(event.text, stdout);
    putchar('\n');
    if (event.finish == MMS_FINISH_ERROR) fprintf(stderr, "caption: %s\n", event.error);
    mms_reply_free(reply);
    mms_engine_free(engine);
    mms_image_free(picture.rgb);
    mms_mllama_model_free(params.model);
    mms_backend_free(load.cpu);
    return event.finish == MMS_FINISH_ERROR;
}
