/* >>status ========================================================================================
   The last error per thread, the log callback and the abort path for broken invariants. */

#define MMS__ERROR_MAX 1024

static MMS__THREAD_LOCAL enum mms_status mms__last_status = MMS_OK;
static MMS__THREAD_LOCAL char mms__last_message[MMS__ERROR_MAX];
static MMS__THREAD_LOCAL bool mms__last_logged = false;   /* was the last error sent to the log? */

static mms_log_callback mms__log_cb = NULL;
static void            *mms__log_user = NULL;
static int              mms__log_threshold = -1;  /* -1: read MMS_LOG_LEVEL on first use */

MMS_API const char *mms_status_string(enum mms_status status) {
    switch (status) {
        case MMS_ABORTED:         return "aborted";
        case MMS_OK:              return "ok";
        case MMS_ERR_INVALID_ARG: return "invalid argument";
        case MMS_ERR_OOM:         return "out of memory";
        case MMS_ERR_IO:          return "i/o error";
        case MMS_ERR_FORMAT:      return "malformed file";
        case MMS_ERR_UNSUPPORTED: return "unsupported";
        case MMS_ERR_BACKEND:     return "backend failure";
        case MMS_ERR_STALE:       return "stale tensor";
        case MMS_ERR_STATE:       return "wrong call order";
        case MMS_ERR_BUSY:        return "busy";
    }
    return "unknown status";
}

MMS_API enum mms_status mms_last_status(void) { return mms__last_status; }
MMS_API const char     *mms_last_error(void)  { return mms__last_message; }
MMS_API void            mms_clear_error(void) { mms__last_status = MMS_OK; mms__last_message[0] = '\0'; mms__last_logged = false; }

MMS_API void mms_log_set(mms_log_callback callback, void *user_data) {
    mms__global_lock();
    mms__log_cb = callback;
    mms__log_user = user_data;
    mms__global_unlock();
}

static int mms__log_threshold_from_env(void) {
    const char *s = getenv("MMS_LOG_LEVEL");
    if (!s) return MMS_LOG_WARN;
    if (!strcmp(s, "debug")) return MMS_LOG_DEBUG;
    if (!strcmp(s, "info"))  return MMS_LOG_INFO;
    if (!strcmp(s, "warn"))  return MMS_LOG_WARN;
    if (!strcmp(s, "error")) return MMS_LOG_ERROR;
    if (!strcmp(s, "none"))  return MMS_LOG_ERROR + 1;
    return MMS_LOG_WARN;
}

static void mms__log_message(enum mms_log_level level, const char *msg) {
    mms_log_callback cb;
    void *user;
    mms__global_lock();
    cb = mms__log_cb;
    user = mms__log_user;
    if (mms__log_threshold < 0) mms__log_threshold = mms__log_threshold_from_env();
    mms__global_unlock();
    if (cb) {
        cb(level, msg, user);
    } else if ((int)level >= mms__log_threshold) {
        static const char *names[] = { "", "debug", "info", "warning", "error" };
        fprintf(stderr, "mmsched %s: %s\n", names[level], msg);
    }
}

static void mms__logv(enum mms_log_level level, const char *fmt, va_list ap) {
    char msg[MMS__ERROR_MAX];
    vsnprintf(msg, sizeof msg, fmt, ap);
    mms__log_message(level, msg);
}

static void mms__log(enum mms_log_level level, const char *fmt, ...) MMS_PRINTF(2, 3);
static void mms__log(enum mms_log_level level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mms__logv(level, fmt, ap);
    va_end(ap);
}

/* One log line per failure: an error is logged when it is raised, a question's answer (a quiet
   error) is not, and context added on the way up is logged only if what it wraps never was. */
static enum mms_status mms__record_errorv(enum mms_status status, bool log, const char *fmt, va_list ap) {
    char msg[MMS__ERROR_MAX];
    vsnprintf(msg, sizeof msg, fmt, ap);   /* the arguments may include mms_last_error() itself */
    memcpy(mms__last_message, msg, sizeof msg);
    mms__last_status = status;
    mms__last_logged = log;
    if (log) mms__log_message(MMS_LOG_ERROR, mms__last_message);
    return status;
}

static enum mms_status mms__set_errorv(enum mms_status status, const char *fmt, va_list ap) {
    return mms__record_errorv(status, true, fmt, ap);
}

MMS_API enum mms_status mms_set_error(enum mms_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mms__record_errorv(status, true, fmt, ap);
    va_end(ap);
    return status;
}

/* The answer to a question (is this tensor usable? is this key there?): recorded, not logged. */
static enum mms_status mms__error_quiet(enum mms_status status, const char *fmt, ...) MMS_PRINTF(2, 3);
static enum mms_status mms__error_quiet(enum mms_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mms__record_errorv(status, false, fmt, ap);
    va_end(ap);
    return status;
}

/* Context for the error being returned (the format usually ends with mms_last_error()): the
   message is replaced; it is logged only if the error it wraps was not. */
static enum mms_status mms__error_context(enum mms_status status, const char *fmt, ...) MMS_PRINTF(2, 3);
static enum mms_status mms__error_context(enum mms_status status, const char *fmt, ...) {
    const bool log = !mms__last_logged;
    va_list ap;
    va_start(ap, fmt);
    mms__record_errorv(status, log, fmt, ap);
    va_end(ap);
    mms__last_logged = true;
    return status;
}

static void mms__abort(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "mmsched: %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

/* Copies src into dst of size bytes, truncating; always terminated. (snprintf("%s") would do,
   but compilers warn about intended truncation once it is inlined into user code.) */
static void mms__copy_str(char *dst, size_t size, const char *src) {
    size_t n = strlen(src);
    if (n >= size) n = size - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Formats a shape as "[a,b,c,d]" into buf; returns buf. Used by every error that names a tensor. */
static const char *mms__shape_str(const int64_t *ne, char *buf, size_t size) {
    snprintf(buf, size, "[%lld,%lld,%lld,%lld]", (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3]);
    return buf;
}
