/* >>api-status ------------------------------------------------------------------------------------
   Errors are values. Every call that user input can break returns an enum mms_status, or NULL
   together with a status kept per thread (mms_last_status / mms_last_error). The library never
   calls exit(); only broken internal invariants abort. */

enum mms_status {
    MMS_ABORTED          =  1,  /* a callback asked to stop */
    MMS_OK               =  0,
    MMS_ERR_INVALID_ARG  = -1,  /* bad argument: wrong shape, type, range or NULL */
    MMS_ERR_OOM          = -2,  /* out of host or device memory */
    MMS_ERR_IO           = -3,  /* a file could not be read or written */
    MMS_ERR_FORMAT       = -4,  /* a file is malformed */
    MMS_ERR_UNSUPPORTED  = -5,  /* not built in, or not supported by this backend */
    MMS_ERR_BACKEND      = -6,  /* a backend (driver, device) failed */
    MMS_ERR_STALE        = -7,  /* a tensor's memory was reused or freed since it was placed */
    MMS_ERR_STATE        = -8,  /* calls in the wrong order (e.g. compute before allocation) */
    MMS_ERR_BUSY         = -9   /* a queue is full: try again later */
};

MMS_API const char      *mms_status_string(enum mms_status status);

/* The last error raised on the calling thread: its status and a message that names what failed
   and why. Successful calls do not clear it; mms_clear_error() does. */
MMS_API enum mms_status  mms_last_status(void);
MMS_API const char      *mms_last_error(void);
MMS_API void             mms_clear_error(void);

/* Raise an error: record status and message as the thread's last error, log it at ERROR level and
   return status (so `return mms_set_error(MMS_ERR_INVALID_ARG, "...")` reads naturally). Meant for
   code that implements the backend interface; the library uses it for all its own errors. */
MMS_API enum mms_status  mms_set_error(enum mms_status status, const char *fmt, ...) MMS_PRINTF(2, 3);

enum mms_log_level {
    MMS_LOG_DEBUG = 1,
    MMS_LOG_INFO  = 2,
    MMS_LOG_WARN  = 3,
    MMS_LOG_ERROR = 4
};

/* Every error and warning goes through the log callback. The default prints WARN and ERROR lines
   to stderr (MMS_LOG_LEVEL=debug|info|warn|error|none in the environment changes the threshold).
   The message has no trailing newline. mms_log_set(NULL, NULL) restores the default. */
typedef void (*mms_log_callback)(enum mms_log_level level, const char *message, void *user_data);
MMS_API void mms_log_set(mms_log_callback callback, void *user_data);

/* Wall-clock time in microseconds from an arbitrary origin (monotonic). */
MMS_API int64_t mms_time_us(void);
