/* >>api-serve -------------------------------------------------------------------------------------
   The serving engine: many conversations on one mllama model at once, for a server or any program
   that takes requests from several threads. No sockets and no HTTP here: examples/server.c puts
   Ollama's and OpenAI's APIs in front of it.

   One engine thread owns an mllama context of n_slots sequences and runs it step by step
   (continuous batching): each step advances every generating request by one token and takes in
   prompt tokens of requests that are starting, in chunks, up to n_batch tokens in all; pictures are
   encoded between steps. Requests beyond the slots wait in a queue of max_queue; past it
   mms_engine_submit refuses them with MMS_ERR_BUSY. A request that comes back (chat clients resend
   the whole conversation every turn) takes the idle slot whose KV cache holds the longest part of
   its prompt, pictures included, and decodes only the rest (usage.cached_tokens). Encoded pictures
   are kept in an image store by content, under a memory budget: a lookup compares the picture's
   pixels, never a hash alone, so one request can never be answered from another's picture.

   A request with a grammar (structured output, e.g. a JSON Schema) samples only tokens that keep
   its answer valid, and the end token only where the answer is complete; max_tokens or a full slot
   can still cut it short (finish MMS_FINISH_LENGTH: the text is then not a whole answer), and stop
   strings apply as to any answer. The constraint is made on the submitting thread (the first one
   for a vocabulary also reads it into a byte trie, which every later one shares); when a request
   ends, its constraint is kept (one per slot, at most 8) for the next request of the same grammar,
   which then meets the masks of the states it shares already computed.

   Threads: every function may be called from any thread; one reply is read by one thread at a time.
   The model and the vocabulary are shared, read-only, and must outlive the engine. */

/* A picture as RGB8 pixels: height rows of width * 3 bytes, stride bytes apart (0: width * 3).
   Decoding files (and laying transparent pixels over white, mms_image_rgba_over_white) is the
   caller's; the engine copies what it keeps during mms_engine_submit. */
struct mms_image_rgb {
    const uint8_t *rgb;
    int            width, height;
    size_t         stride;
};

/* What a request asks. Either messages, rendered by mms_mllama_chat_prompt (the chat template, with
   the "Picture N." layout for several pictures in one message), or a raw prompt whose <|image|>
   marks stand for the pictures in order (special tokens parsed, BOS added unless it starts with
   it). images: every picture of the request in the order the messages (or marks) show them; the
   messages' n_images add up to n_images. */
struct mms_request {                 /* zeroed: nothing; messages or prompt is required */
    const struct mms_chat_message *messages;
    int                            n_messages;
    const char                    *prompt;          /* instead of messages */
    const struct mms_image_rgb    *images;
    int                            n_images;        /* at most the engine's max_images */
    struct mms_sampler_params      sampling;        /* as mms_sampler_new; zeroed: greedy */
    int                            max_tokens;      /* tokens to generate at most (0: until an end token or the slot is full) */
    const char *const             *stop;            /* stop strings: the text ends before the first one found */
    int                            n_stop;
    const char                    *date;            /* the template's "Today Date" (NULL: as mms_chat_apply_template) */
    const struct mms_grammar      *grammar;         /* the answer follows it (mms_grammar_from_json_schema, _json...;
                                                       NULL: free text); copied, so it may be freed on return */
};

enum mms_finish {
    MMS_FINISH_NONE      = 0,   /* still running */
    MMS_FINISH_STOP      = 1,   /* an end-of-generation token or a stop string */
    MMS_FINISH_LENGTH    = 2,   /* max_tokens, or the slot's context is full */
    MMS_FINISH_CANCELLED = 3,   /* mms_reply_cancel, or the engine was freed */
    MMS_FINISH_ERROR     = 4    /* the request failed after it was accepted: status and error say why */
};

struct mms_reply_usage {
    int    prompt_tokens;           /* the whole prompt, cached tokens included */
    int    cached_tokens;           /* of those, found in a slot's KV cache and not decoded again */
    int    completion_tokens;       /* tokens sampled, an end token included */
    int    images;                  /* pictures in the request */
    int    images_encoded;          /* of those, run through the vision encoder (the others came from the store) */
    double queue_ms;                /* submitted until it had a slot */
    double prompt_ms;               /* from its slot to its first generated token (pictures and prompt) */
    double gen_ms;                  /* from the first generated token to the end */
};

struct mms_reply_event {
    const char            *text;    /* text generated since the last event, NUL-terminated; valid until the next call on the reply */
    size_t                 len;
    enum mms_finish        finish;  /* not NONE: this is the last event */
    enum mms_status        status;  /* MMS_FINISH_ERROR: what failed, and error the message; else MMS_OK and "" */
    const char            *error;
    struct mms_reply_usage usage;   /* so far; final with the last event */
};

struct mms_engine_params {           /* zeroed: the defaults; negative values are refused */
    struct mms_mllama_model *model;  /* required; shared, read-only */
    const struct mms_vocab  *vocab;  /* the model's vocabulary (NULL: the one its file carries, mms_mllama_model_get_vocab) */
    int    n_slots;                  /* requests decoded together (0: 4) */
    int    n_ctx;                    /* tokens per slot (0: 2048, at most the model's training context) */
    int    n_batch;                  /* most tokens a step decodes, all slots together (0: 512) */
    int    max_queue;                /* requests waiting for a slot (0: 64) */
    int    max_images;               /* pictures per request (0: 4) */
    size_t image_store;              /* bytes of encoded pictures kept for reuse (0: room for n_slots * max_images at the model's tile count) */
};

/* Counters since the engine started, and its state now (what /metrics shows). */
struct mms_engine_stats {
    int64_t requests, refused, finished, cancelled, failed;   /* submitted (accepted), refused (busy or invalid), ended */
    int64_t prompt_tokens, cached_tokens, completion_tokens;
    int64_t images, images_encoded;
    int64_t constraints_reused;       /* constrained requests that took an ended one's constraint (its masks cached) */
    int64_t steps;
    double  step_ms_total, step_ms_max;   /* the engine thread's decode steps */
    int     queued, busy_slots, n_slots;
    size_t  image_store_bytes, image_store_budget;
};

struct mms_engine;
struct mms_reply;

/* Starts the engine thread. NULL + last error: MMS_ERR_INVALID_ARG for bad parameters,
   MMS_ERR_OOM when the slots' KV caches and graphs do not fit (the message says where). */
MMS_API struct mms_engine *mms_engine_new(const struct mms_engine_params *params);
/* Cancels every request (their replies end with MMS_FINISH_CANCELLED and stay readable until
   freed), stops the engine thread and frees the engine. */
MMS_API void               mms_engine_free(struct mms_engine *engine);
/* Queues a request and returns its reply, or NULL + last error: MMS_ERR_INVALID_ARG for a request
   that cannot run (no prompt, more pictures than max_images or than the prompt shows, a picture
   of no pixels, bad sampling values, a prompt longer than a slot), MMS_ERR_BUSY when max_queue
   requests already wait. Everything the request points to is copied: it may be freed on return. */
MMS_API struct mms_reply  *mms_engine_submit(struct mms_engine *engine, const struct mms_request *request);
MMS_API void               mms_engine_get_stats(struct mms_engine *engine, struct mms_engine_stats *out);

/* Waits up to timeout_ms (negative: as long as it takes) for new text or the end, and describes
   it in *event; an event with no text and finish NONE means the time ran out. MMS_ERR_INVALID_ARG
   for NULL arguments, else MMS_OK. After the last event it returns that event again (its text too). */
MMS_API enum mms_status    mms_reply_next(struct mms_reply *reply, int timeout_ms, struct mms_reply_event *event);
/* Stops the request at the engine's next step (its slot is freed; finish MMS_FINISH_CANCELLED
   unless it had already ended). */
MMS_API void               mms_reply_cancel(struct mms_reply *reply);
/* Cancels the request if it is still running and frees the reply. */
MMS_API void               mms_reply_free(struct mms_reply *reply);
