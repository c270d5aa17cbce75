/* server.c - mllama-server: Llama 3.2 Vision for many clients through OpenAI's and Ollama's chat
   APIs, on the library's serving engine (continuous batching, conversations that come back reuse
   their KV cache, pictures kept by content).

   build/mllama-server -m MODEL.gguf [--mmproj PROJ.gguf] [--host 127.0.0.1] [--port 8080] [-np 4] [-c 2048]
   build/mllama-server -m models/mllama-demo.gguf --port 8080

   Endpoints: POST /v1/chat/completions, GET /v1/models (OpenAI); POST /api/chat, /api/generate,
   /api/show, GET /api/tags, /api/ps, /api/version (Ollama); GET /health, /metrics. `--help` lists
   the options and limits.

   Threads: one dispatcher polls the listening socket and the idle keep-alive connections and
   hands each connection with bytes to read to a fixed pool of workers; a worker reads one request
   (head and body within --request-timeout), answers it (waiting on the engine, streaming as the
   tokens come, noticing a client that went away and cancelling its request), then gives the
   connection back. No thread per connection: connections beyond --max-conns are answered 503 at
   once. SIGTERM (or SIGINT) closes the listening socket, answers new requests 503 and /health
   503, lets every request in flight finish, then exits 0.

   The parts (each a header of static functions; server/part.h is what they share): server/http.h
   (request heads), server/json_writer.h, server/request.h (what both APIs map to),
   server/openai.h, server/ollama.h. Pictures are decoded with stb_image (Debian's
   libstb-dev) after their size is read from the header. */
#define MMSCHED_IMPLEMENTATION
#include "mmsched.h"
#include <stb/stb_image.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "server/http.h"
#include "server/json_writer.h"
#include "server/request.h"
#include "server/openai.h"
#include "server/ollama.h"

/* -- options -- */

struct options {
    const char *model, *mmproj, *vocab, *host, *alias, *api_key;
    int    port, n_slots, n_ctx, n_batch, threads, workers, max_queue, max_images, max_conns, max_headers, max_stop;
    long   max_pixels;
    size_t max_body, max_head, image_store;
    double request_timeout, keep_alive, write_timeout;
    bool   verbose;
    struct mms_sampler_params defaults;
};

static void usage(FILE *out) {
    fprintf(out,
        "usage: mllama-server -m MODEL.gguf [options]     (options take '--name value' or '--name=value')\n"
        "  -m, --model FILE          the model (Ollama's single file, a Hugging Face folder, or the text part)\n"
        "      --mmproj FILE         the vision projector of the two-file layout\n"
        "      --vocab FILE          the tokenizer from another GGUF file (for a model file without one, such as\n"
        "                            build/batch --bench's random weights; tests/fixtures/text/tok-llama3.gguf)\n"
        "  -a, --alias NAME          the model's name in the APIs (the file's name without .gguf)\n"
        "      --host ADDR           the address to listen on (127.0.0.1; 0.0.0.0 for every interface)\n"
        "      --port N              the port (8080; 0: any free one, printed at start)\n"
        "      --api-key KEY         require 'Authorization: Bearer KEY' on every endpoint but /health\n"
        "      --api-key-file FILE   the key from a file's first line (keeps it out of the process list)\n"
        "  -np, --parallel N         requests decoded together: the engine's slots (4)\n"
        "  -c, --ctx-size N          tokens of context per slot (2048, at most the model's)\n"
        "  -b, --batch-size N        most tokens one engine step decodes, all slots together (512)\n"
        "  -t, --threads N           CPU threads for the model (all cores)\n"
        "      --threads-http N      connection workers (slots + queue + 8)\n"
        "      --max-queue N         requests waiting for a slot; beyond them 503 + Retry-After (64)\n"
        "      --max-images N        pictures per request (4)\n"
        "      --max-pixels N        pixels per picture, checked before decoding (25000000)\n"
        "      --image-store MIB     memory for encoded pictures kept for reuse (0: the engine's default)\n"
        "      --max-body BYTES      request body size (67108864)\n"
        "      --max-header-bytes N  request line and headers (16384)\n"
        "      --max-headers N       header lines (64)\n"
        "      --max-conns N         open connections; beyond them 503 at once (1024)\n"
        "      --max-stop N          stop strings per request (16)\n"
        "      --request-timeout S   seconds for a request's head and body to arrive (30)\n"
        "      --keep-alive S        seconds an idle connection is kept open (15)\n"
        "      --write-timeout S     seconds a client may leave an answer unread before it is dropped (60)\n"
        "      --temp T              temperature when a request gives none (0.6)\n"
        "      --top-p P             top-p when a request gives none (0.9)\n"
        "      --top-k N             top-k when a request gives none (0: off)\n"
        "  -v, --verbose             log every request on stderr\n"
        "  -h, --help                this list\n");
}

static void die(const char *what, const char *detail) {
    fprintf(stderr, "mllama-server: error: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

static void bad_usage(const char *flag, const char *v, const char *want) {
    fprintf(stderr, "mllama-server: %s wants %s, got '%s' (--help lists the options)\n", flag, want, v);
    exit(2);
}

static long long parse_ll(const char *flag, const char *v, long long lo, long long hi) {
    char *end;
    long long x;
    char want[96];
    errno = 0;
    x = strtoll(v, &end, 10);
    snprintf(want, sizeof want, "a whole number from %lld to %lld", lo, hi);
    if (errno || end == v || *end || x < lo || x > hi) bad_usage(flag, v, want);
    return x;
}

static double parse_double(const char *flag, const char *v, double lo, double hi) {
    char *end;
    double x;
    char want[96];
    errno = 0;
    x = strtod(v, &end);
    snprintf(want, sizeof want, "a number from %g to %g", lo, hi);
    if (end == v || *end || !(x >= lo && x <= hi)) bad_usage(flag, v, want);
    return x;
}

static char *read_key_file(const char *path) {
    char line[1024];
    size_t n;
    FILE *f = fopen(path, "r");
    if (!f) die("cannot read --api-key-file", strerror(errno));
    if (!fgets(line, sizeof line, f)) { fclose(f); die("--api-key-file is empty", path); }
    fclose(f);
    n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' ')) line[--n] = '\0';
    if (!n) die("--api-key-file has an empty first line", path);
    return strdup(line);
}

static void parse_args(int argc, char **argv, struct options *o) {
    int i;
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8080;
    o->n_slots = 4;
    o->n_batch = 0;
    o->threads = mms_cpu_count();
    o->max_queue = 64;
    o->max_images = 4;
    o->max_pixels = 25000000L;
    o->max_body = 64u << 20;
    o->max_head = 16384;
    o->max_headers = 64;
    o->max_conns = 1024;
    o->max_stop = 16;
    o->request_timeout = 30;
    o->keep_alive = 15;
    o->write_timeout = 60;
    o->defaults = mms_sampler_default_params();
    o->defaults.temperature = 0.6f;   /* Llama 3.2 Vision's generation_config.json */
    o->defaults.top_p = 0.9f;
    for (i = 1; i < argc; i++) {
        char name[64];
        const char *a = argv[i], *v = NULL, *eq;
        bool inline_value = false;
        if (a[0] == '-' && a[1] == '-' && (eq = strchr(a, '=')) != NULL) {
            size_t n = (size_t)(eq - a) < sizeof name - 1 ? (size_t)(eq - a) : sizeof name - 1;
            memcpy(name, a, n);
            name[n] = '\0';
            a = name;
            v = eq + 1;
            inline_value = true;
        } else if (i + 1 < argc) v = argv[i + 1];
#define FLAG(s, l) (strcmp(a, s) == 0 || strcmp(a, l) == 0)
#define NEED() do { if (!v) { fprintf(stderr, "mllama-server: %s needs a value\n", a); exit(2); } if (!inline_value) i++; } while (0)
        if (FLAG("-h", "--help")) { usage(stdout); exit(0); }
        else if (FLAG("-m", "--model")) { NEED(); o->model = v; }
        else if (FLAG("--mmproj", "--mmproj")) { NEED(); o->mmproj = v; }
        else if (FLAG("--vocab", "--vocab")) { NEED(); o->vocab = v; }
        else if (FLAG("-a", "--alias")) { NEED(); if (!*v) bad_usage(a, v, "a name"); o->alias = v; }
        else if (FLAG("--host", "--host")) { NEED(); o->host = v; }
        else if (FLAG("--port", "--port")) { NEED(); o->port = (int)parse_ll(a, v, 0, 65535); }
        else if (FLAG("--api-key", "--api-key")) { NEED(); if (!*v) bad_usage(a, v, "a key"); o->api_key = v; }
        else if (FLAG("--api-key-file", "--api-key-file")) { NEED(); o->api_key = read_key_file(v); }
        else if (FLAG("-np", "--parallel")) { NEED(); o->n_slots = (int)parse_ll(a, v, 1, 256); }
        else if (FLAG("-c", "--ctx-size")) { NEED(); o->n_ctx = (int)parse_ll(a, v, 16, 1 << 20); }
        else if (FLAG("-b", "--batch-size")) { NEED(); o->n_batch = (int)parse_ll(a, v, 1, 1 << 16); }
        else if (FLAG("-t", "--threads")) { NEED(); o->threads = (int)parse_ll(a, v, 1, 1024); }
        else if (FLAG("--threads-http", "--threads-http")) { NEED(); o->workers = (int)parse_ll(a, v, 1, 4096); }
        else if (FLAG("--max-queue", "--max-queue")) { NEED(); o->max_queue = (int)parse_ll(a, v, 1, 1 << 16); }
        else if (FLAG("--max-images", "--max-images")) { NEED(); o->max_images = (int)parse_ll(a, v, 1, 64); }
        else if (FLAG("--max-pixels", "--max-pixels")) { NEED(); o->max_pixels = (long)parse_ll(a, v, 1, 1L << 30); }
        else if (FLAG("--image-store", "--image-store")) { NEED(); o->image_store = (size_t)parse_ll(a, v, 0, 1 << 20) << 20; }
        else if (FLAG("--max-body", "--max-body")) { NEED(); o->max_body = (size_t)parse_ll(a, v, 1024, 1LL << 31); }
        else if (FLAG("--max-header-bytes", "--max-header-bytes")) { NEED(); o->max_head = (size_t)parse_ll(a, v, 256, 1 << 20); }
        else if (FLAG("--max-headers", "--max-headers")) { NEED(); o->max_headers = (int)parse_ll(a, v, 1, HTTP_HEADERS_CAP); }
        else if (FLAG("--max-conns", "--max-conns")) { NEED(); o->max_conns = (int)parse_ll(a, v, 1, 1 << 20); }
        else if (FLAG("--max-stop", "--max-stop")) { NEED(); o->max_stop = (int)parse_ll(a, v, 0, 1024); }
        else if (FLAG("--request-timeout", "--request-timeout")) { NEED(); o->request_timeout = parse_double(a, v, 0.01, 86400); }
        else if (FLAG("--keep-alive", "--keep-alive")) { NEED(); o->keep_alive = parse_double(a, v, 0, 86400); }
        else if (FLAG("--write-timeout", "--write-timeout")) { NEED(); o->write_timeout = parse_double(a, v, 0.01, 86400); }
        else if (FLAG("--temp", "--temperature")) { NEED(); o->defaults.temperature = (float)parse_double(a, v, 0, 1e6); }
        else if (FLAG("--top-p", "--top-p")) { NEED(); o->defaults.top_p = (float)parse_double(a, v, 0, 1); }
        else if (FLAG("--top-k", "--top-k")) { NEED(); o->defaults.top_k = (int)parse_ll(a, v, 0, INT_MAX); }
        else if (FLAG("-v", "--verbose")) o->verbose = true;
        else { fprintf(stderr, "mllama-server: unknown option '%s' (--help lists the options)\n", a); exit(2); }
#undef FLAG
#undef NEED
    }
    if (!o->model) { fprintf(stderr, "mllama-server: a model is required (-m FILE)\n"); usage(stderr); exit(2); }
    if (!o->workers) o->workers = o->n_slots + o->max_queue + 8;
}

/* -- the server's state -- */

enum server_state { STATE_LOADING = 0, STATE_READY = 1, STATE_DRAINING = 2 };

struct conn {
    int          fd;
    char        *buf;          /* bytes read and not yet used (a request's head and body, or the next request) */
    size_t       len, cap;
    double       idle_since;   /* while the dispatcher holds it */
    bool         linger;       /* an answer went out before the request's body was read */
    struct conn *next;
};

/* The HTTP statuses /metrics counts, one counter each (the last counts any other). */
static const int COUNTED_STATUSES[] = { 200, 400, 401, 404, 405, 408, 413, 417, 431, 500, 501, 503, 505, 0 };
#define N_COUNTED (sizeof COUNTED_STATUSES / sizeof COUNTED_STATUSES[0])

static struct {
    struct options     opt;
    struct api_config  api;
    struct ollama_model_info info;
    char               info_name[256], info_modified[40], info_digest[40], info_quant[32], info_params[32];
    int64_t            created;          /* when the model was loaded, unix seconds */
    int                listen_fd, wake[2];
    int                stop_pipe[2];     /* SIGTERM writes a byte here; nobody reads it: readable means stop */
    int                state;            /* enum server_state, under lock */
    struct mms_engine *engine;
    pthread_mutex_t    lock;             /* state, the work queue, the given-back list, counters */
    pthread_cond_t     work_ready;
    struct conn       *work_head, *work_tail;   /* connections with bytes to read, for the workers */
    struct conn       *returned;                /* connections the workers gave back, for the dispatcher */
    bool               dispatcher_done, workers_stop;
    int                open_conns;
    int64_t            http_counts[N_COUNTED];
    uint64_t           id_counter;
    pthread_mutex_t    decode_lock;      /* at most 2 pictures decoded at once: they are large */
    pthread_cond_t     decode_free;
    int                decoding;
} S;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int get_state(void) {
    int s;
    pthread_mutex_lock(&S.lock);
    s = S.state;
    pthread_mutex_unlock(&S.lock);
    return s;
}

static void count_status(int status) {
    size_t i;
    pthread_mutex_lock(&S.lock);
    for (i = 0; i + 1 < N_COUNTED && COUNTED_STATUSES[i] != status; i++) {}
    S.http_counts[i]++;
    pthread_mutex_unlock(&S.lock);
}

static void wake_dispatcher(void) {
    char b = 1;
    ssize_t r;
    do r = write(S.wake[1], &b, 1); while (r < 0 && errno == EINTR);
}

/* The handler runs on whichever thread the signal finds: it only writes to pipes (a flag in memory
   would be a data race with the threads that read it). */
static void on_signal(int sig) {
    int saved = errno;
    char b = 1;
    ssize_t r = write(S.stop_pipe[1], &b, 1);
    (void)sig;
    (void)r;
    wake_dispatcher();
    errno = saved;
}

static bool stop_requested(void) {
    struct pollfd p;
    p.fd = S.stop_pipe[0];
    p.events = POLLIN;
    p.revents = 0;
    return poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

/* After an answer sent before the body was read (401, 413, 408...): stop writing, then read and drop
   what the client still sends, for at most a second, so that closing does not reset the connection
   before the client has read the answer. */
static void linger_close(int fd) {
    char junk[16384];
    double end = now_s() + 1.0;
    shutdown(fd, SHUT_WR);
    while (now_s() < end) {
        struct pollfd p;
        p.fd = fd;
        p.events = POLLIN;
        p.revents = 0;
        if (poll(&p, 1, 100) <= 0) continue;
        if (recv(fd, junk, sizeof junk, 0) <= 0) break;
    }
}

static void conn_close(struct conn *c) {
    if (c->linger) linger_close(c->fd);
    close(c->fd);
    free(c->buf);
    free(c);
    pthread_mutex_lock(&S.lock);
    S.open_conns--;
    pthread_mutex_unlock(&S.lock);
}

static void push_work(struct conn *c) {
    pthread_mutex_lock(&S.lock);
    c->next = NULL;
    if (S.work_tail) S.work_tail->next = c;
    else S.work_head = c;
    S.work_tail = c;
    pthread_cond_signal(&S.work_ready);
    pthread_mutex_unlock(&S.lock);
}

/* A worker gives a kept-alive connection back to the dispatcher to wait for its next request. */
static void give_back(struct conn *c) {
    pthread_mutex_lock(&S.lock);
    if (S.dispatcher_done || S.state == STATE_DRAINING) {
        pthread_mutex_unlock(&S.lock);
        conn_close(c);
        return;
    }
    c->next = S.returned;
    S.returned = c;
    pthread_mutex_unlock(&S.lock);
    wake_dispatcher();
}

/* -- sending -- */

static bool send_all(int fd, const void *data, size_t len) {
    const char *p = (const char *)data;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;   /* closed, reset, or --write-timeout passed (SO_SNDTIMEO) */
        p += n;
        len -= (size_t)n;
    }
    return true;
}

struct reply_ctx {               /* one request's answer on its connection */
    struct conn *c;
    bool         keep_alive;     /* the connection carries another request after this one */
    bool         chunked;        /* streaming with chunked encoding (HTTP/1.1) */
    bool         head_only;      /* HEAD: no body */
    bool         failed;         /* a send failed: the client is gone */
    int          status;
};

static void send_response(struct reply_ctx *r, int status, const char *type, const char *body, size_t len, const char *extra) {
    struct sbuf h;
    memset(&h, 0, sizeof h);
    if (get_state() == STATE_DRAINING) r->keep_alive = false;
    r->status = status;
    sb_printf(&h, "HTTP/1.1 %d %s\r\nServer: mllama-server\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: %s\r\n%s\r\n", status,
              http_reason(status), type, len, r->keep_alive ? "keep-alive" : "close", extra ? extra : "");
    if (!h.oom && len && !r->head_only) sb_put(&h, body, len);
    if (h.oom || !send_all(r->c->fd, h.data, h.len)) { r->failed = true; r->keep_alive = false; }
    sb_free(&h);
    count_status(status);
}

static void send_json(struct reply_ctx *r, int status, const struct sbuf *body, const char *extra) {
    if (body->oom) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}";
        send_response(r, 500, "application/json", oom, sizeof oom - 1, NULL);
        return;
    }
    send_response(r, status, "application/json", body->data, body->len, extra);
}

/* An error in the shape of the API the path belongs to. */
static void send_error(struct reply_ctx *r, bool ollama, const struct api_error *e) {
    struct sbuf b;
    const char *extra = e->status == 503 ? "Retry-After: 1\r\n" : e->status == 401 ? "WWW-Authenticate: Bearer\r\n" : NULL;
    memset(&b, 0, sizeof b);
    if (ollama) ollama_write_error(&b, e->message, false);
    else openai_write_error(&b, e);
    send_json(r, e->status, &b, extra);
    sb_free(&b);
}

static void send_error_msg(struct reply_ctx *r, bool ollama, int status, const char *code, const char *message) {
    struct api_error e;
    memset(&e, 0, sizeof e);
    api_fail(&e, status, code, NULL, "%s", message);
    send_error(r, ollama, &e);
}

static void stream_begin(struct reply_ctx *r, const char *type, int minor) {
    struct sbuf h;
    memset(&h, 0, sizeof h);
    r->status = 200;
    r->chunked = minor >= 1;
    if (!r->chunked) r->keep_alive = false;   /* HTTP/1.0: the end of the answer is the end of the connection */
    if (get_state() == STATE_DRAINING) r->keep_alive = false;
    sb_printf(&h, "HTTP/1.1 200 OK\r\nServer: mllama-server\r\nContent-Type: %s\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\n%s"
                  "Connection: %s\r\n\r\n", type, r->chunked ? "Transfer-Encoding: chunked\r\n" : "", r->keep_alive ? "keep-alive" : "close");
    if (h.oom || !send_all(r->c->fd, h.data, h.len)) r->failed = true;
    sb_free(&h);
    count_status(200);
}

static void stream_send(struct reply_ctx *r, const char *data, size_t len) {
    char size[24];
    if (r->failed || !len) return;
    if (r->chunked) {
        snprintf(size, sizeof size, "%zx\r\n", len);
        if (!send_all(r->c->fd, size, strlen(size)) || !send_all(r->c->fd, data, len) || !send_all(r->c->fd, "\r\n", 2)) r->failed = true;
    } else if (!send_all(r->c->fd, data, len)) r->failed = true;
}

static void stream_end(struct reply_ctx *r) {
    if (!r->failed && r->chunked && !send_all(r->c->fd, "0\r\n\r\n", 5)) r->failed = true;
    if (r->failed) r->keep_alive = false;
}

/* Whether the client is still there: it closed (or reset) the connection when a peek reads its end. */
static bool client_gone(int fd) {
    char b;
    ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return true;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;
    return false;
}

/* -- pictures -- */

static void decode_slot_take(void) {
    pthread_mutex_lock(&S.decode_lock);
    while (S.decoding >= 2) pthread_cond_wait(&S.decode_free, &S.decode_lock);
    S.decoding++;
    pthread_mutex_unlock(&S.decode_lock);
}

static void decode_slot_release(void) {
    pthread_mutex_lock(&S.decode_lock);
    S.decoding--;
    pthread_cond_signal(&S.decode_free);
    pthread_mutex_unlock(&S.decode_lock);
}

/* A picture file as RGB8, transparent pixels over white; NULL with the reason in e. */
static uint8_t *decode_picture(const struct api_picture *p, int index, int *w, int *h, struct api_error *e) {
    int n;
    uint8_t *rgba, *rgb;
    if (p->len > INT_MAX) { api_fail(e, 413, "image_too_large", NULL, "picture %d is over 2 GB", index + 1); return NULL; }
    if (!stbi_info_from_memory(p->bytes, (int)p->len, w, h, &n)) {
        api_fail(e, 400, "invalid_image", NULL, "picture %d cannot be read: it is not a JPEG, PNG, BMP or GIF this server decodes (%s)",
                 index + 1, stbi_failure_reason());
        return NULL;
    }
    if ((double)*w * (double)*h > (double)S.opt.max_pixels) {
        api_fail(e, 400, "image_too_large", NULL, "picture %d has %d x %d pixels, more than this server's limit of %ld (--max-pixels)",
                 index + 1, *w, *h, S.opt.max_pixels);
        return NULL;
    }
    decode_slot_take();
    rgba = stbi_load_from_memory(p->bytes, (int)p->len, w, h, &n, 4);
    decode_slot_release();
    if (!rgba) {
        api_fail(e, 400, "invalid_image", NULL, "picture %d (%d x %d) cannot be decoded: the file is damaged or cut short (%s)", index + 1,
                 *w, *h, stbi_failure_reason());
        return NULL;
    }
    if (!(rgb = (uint8_t *)malloc((size_t)*w * (size_t)*h * 3))) {
        stbi_image_free(rgba);
        api_fail(e, 500, NULL, NULL, "out of memory for picture %d", index + 1);
        return NULL;
    }
    mms_image_rgba_over_white(rgba, *w, *h, 0, rgb);
    stbi_image_free(rgba);
    return rgb;
}

/* -- generation -- */

static const char *ollama_done_reason(enum mms_finish f) { return f == MMS_FINISH_LENGTH ? "length" : "stop"; }

/* Submits the request and answers it, streaming or whole. */
static void generate(struct reply_ctx *rc, const struct http_request *hreq, struct api_request *ar) {
    bool ollama = ar->kind != API_OPENAI_CHAT;
    struct mms_image_rgb *images = NULL;
    struct mms_request req;
    struct mms_reply *reply;
    struct mms_reply_event ev;
    struct api_error e;
    struct sbuf text, out;
    char id[48];
    int64_t created = (int64_t)time(NULL);
    double t0 = now_s();
    bool first = true;
    int i;

    memset(&e, 0, sizeof e);
    memset(&ev, 0, sizeof ev);
    memset(&text, 0, sizeof text);
    memset(&out, 0, sizeof out);
    if (ar->load_only) {   /* Ollama's "load the model": it is loaded */
        ollama_write_final(&out, ar->kind, ar->model, "", 0, "load", NULL, 0, false);
        send_json(rc, 200, &out, NULL);
        sb_free(&out);
        return;
    }
    if (ar->n_pictures && !(images = (struct mms_image_rgb *)calloc((size_t)ar->n_pictures, sizeof *images))) {
        send_error_msg(rc, ollama, 500, NULL, "out of memory");
        return;
    }
    for (i = 0; i < ar->n_pictures; i++) {
        int w, h;
        uint8_t *rgb = decode_picture(&ar->pictures[i], i, &w, &h, &e);
        if (!rgb) break;
        images[i].rgb = rgb;
        images[i].width = w;
        images[i].height = h;
        free(ar->pictures[i].bytes);   /* the file is no longer needed */
        ar->pictures[i].bytes = NULL;
    }
    memset(&req, 0, sizeof req);
    req.messages = ar->messages;
    req.n_messages = ar->n_messages;
    req.prompt = ar->prompt;
    req.images = images;
    req.n_images = ar->n_pictures;
    req.sampling = ar->sampling;
    req.max_tokens = ar->max_tokens;
    req.stop = ar->stop;
    req.n_stop = ar->n_stop;
    req.grammar = ar->grammar;
    reply = e.status ? NULL : mms_engine_submit(S.engine, &req);
    for (i = 0; i < ar->n_pictures; i++) free((void *)images[i].rgb);
    free(images);
    if (e.status) { send_error(rc, ollama, &e); return; }
    if (!reply) {
        if (mms_last_status() == MMS_ERR_BUSY) api_fail(&e, 503, "server_busy", NULL, "the server is busy: every slot and queue place is taken; try again");
        else if (mms_last_status() == MMS_ERR_INVALID_ARG) api_fail(&e, 400, "invalid_request", NULL, "%s", mms_last_error());
        else api_fail(&e, 500, NULL, NULL, "the engine refused the request: %s", mms_last_error());
        send_error(rc, ollama, &e);
        return;
    }
    pthread_mutex_lock(&S.lock);
    snprintf(id, sizeof id, "chatcmpl-%08llx%08x", (unsigned long long)++S.id_counter, (unsigned)(rand() & 0x7fffffff));
    pthread_mutex_unlock(&S.lock);

    for (;;) {
        if (mms_reply_next(reply, 100, &ev) != MMS_OK) { api_fail(&e, 500, NULL, NULL, "%s", mms_last_error()); break; }
        if (ev.len) {
            if (!ar->stream) sb_put(&text, ev.text, ev.len);
            else {
                if (first) stream_begin(rc, ollama ? "application/x-ndjson" : "text/event-stream", hreq->minor);
                sb_clear(&out);
                if (ollama) ollama_write_chunk(&out, ar->kind, ar->model, ev.text, ev.len);
                else openai_write_chunk(&out, id, created, ar->model, first, ev.text, ev.len, NULL, ar->include_usage, NULL);
                first = false;
                if (out.oom) rc->failed = true;
                else stream_send(rc, out.data, out.len);
            }
        }
        if (ev.finish != MMS_FINISH_NONE) break;
        if (rc->failed || client_gone(rc->c->fd)) {   /* the client left: its slot goes to others */
            rc->failed = true;
            rc->keep_alive = false;
            mms_reply_cancel(reply);
        }
    }
    if (!ar->stream && !rc->failed) {
        sb_clear(&out);
        if (e.status || ev.finish == MMS_FINISH_ERROR || ev.finish == MMS_FINISH_CANCELLED) {
            if (!e.status) api_fail(&e, 500, NULL, NULL, "%s", ev.finish == MMS_FINISH_ERROR ? ev.error : "the request was cancelled (the server is stopping)");
            send_error(rc, ollama, &e);
        } else {
            if (text.oom) rc->failed = true;
            else if (ollama)
                ollama_write_final(&out, ar->kind, ar->model, text.data ? text.data : "", text.len, ollama_done_reason(ev.finish), &ev.usage,
                                   (int64_t)((now_s() - t0) * 1e9), false);
            else
                openai_write_completion(&out, id, created, ar->model, text.data ? text.data : "", text.len, ev.finish, &ev.usage);
            send_json(rc, 200, &out, NULL);
        }
    } else if (ar->stream && !rc->failed) {
        if (first) stream_begin(rc, ollama ? "application/x-ndjson" : "text/event-stream", hreq->minor);
        sb_clear(&out);
        if (e.status || ev.finish == MMS_FINISH_ERROR || ev.finish == MMS_FINISH_CANCELLED) {   /* the status line is sent: the error goes in the stream */
            if (!e.status) api_fail(&e, 500, NULL, NULL, "%s", ev.finish == MMS_FINISH_ERROR ? ev.error : "the request was cancelled (the server is stopping)");
            if (ollama) ollama_write_error(&out, e.message, true);
            else {
                struct jw w;
                sb_puts(&out, "data: ");
                jw_init(&w, &out);
                openai_write_error_object(&w, &e);
                sb_puts(&out, "\n\n");
            }
        } else if (ollama) {
            ollama_write_final(&out, ar->kind, ar->model, "", 0, ollama_done_reason(ev.finish), &ev.usage, (int64_t)((now_s() - t0) * 1e9), true);
        } else {
            openai_write_chunk(&out, id, created, ar->model, first, NULL, 0, openai_finish_reason(ev.finish), ar->include_usage, NULL);
            if (ar->include_usage) openai_write_chunk(&out, id, created, ar->model, false, NULL, 0, NULL, true, &ev.usage);
        }
        if (!ollama) sb_puts(&out, "data: [DONE]\n\n");
        if (out.oom) rc->failed = true;
        else stream_send(rc, out.data, out.len);
        stream_end(rc);
    }
    mms_reply_free(reply);
    sb_free(&text);
    sb_free(&out);
}

/* -- the other endpoints -- */

static void handle_health(struct reply_ctx *r) {
    static const char ok[] = "{\"status\":\"ok\"}", loading[] = "{\"status\":\"loading model\"}", draining[] = "{\"status\":\"shutting down\"}";
    int s = get_state();
    if (s == STATE_READY) send_response(r, 200, "application/json", ok, sizeof ok - 1, NULL);
    else if (s == STATE_LOADING) send_response(r, 503, "application/json", loading, sizeof loading - 1, "Retry-After: 1\r\n");
    else send_response(r, 503, "application/json", draining, sizeof draining - 1, NULL);
}

static void metric(struct sbuf *b, const char *name, const char *type, const char *help, double v) {
    sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

static void handle_metrics(struct reply_ctx *r) {
    struct mms_engine_stats st;
    struct sbuf b;
    size_t i;
    int64_t counts[N_COUNTED];
    int open_conns, state;
    memset(&b, 0, sizeof b);
    memset(&st, 0, sizeof st);
    pthread_mutex_lock(&S.lock);
    memcpy(counts, S.http_counts, sizeof counts);
    open_conns = S.open_conns;
    state = S.state;
    pthread_mutex_unlock(&S.lock);
    if (state != STATE_LOADING) mms_engine_get_stats(S.engine, &st);   /* the engine outlives the workers */
    metric(&b, "mllama_ready", "gauge", "1 when the model is loaded and the server takes requests", state == STATE_READY);
    metric(&b, "mllama_requests_total", "counter", "Generation requests the engine accepted", (double)st.requests);
    metric(&b, "mllama_requests_refused_total", "counter", "Generation requests the engine refused (busy or invalid)", (double)st.refused);
    metric(&b, "mllama_requests_finished_total", "counter", "Requests that ended normally", (double)st.finished);
    metric(&b, "mllama_requests_cancelled_total", "counter", "Requests cancelled (client gone, or the server stopping)", (double)st.cancelled);
    metric(&b, "mllama_requests_failed_total", "counter", "Requests that failed after they were accepted", (double)st.failed);
    metric(&b, "mllama_prompt_tokens_total", "counter", "Prompt tokens, cached ones included", (double)st.prompt_tokens);
    metric(&b, "mllama_cached_tokens_total", "counter", "Prompt tokens found in a slot's KV cache", (double)st.cached_tokens);
    metric(&b, "mllama_completion_tokens_total", "counter", "Generated tokens", (double)st.completion_tokens);
    metric(&b, "mllama_images_total", "counter", "Pictures in requests", (double)st.images);
    metric(&b, "mllama_images_encoded_total", "counter", "Pictures run through the vision encoder", (double)st.images_encoded);
    metric(&b, "mllama_constraints_reused_total", "counter", "Structured requests that reused an ended request's constraint",
           (double)st.constraints_reused);
    metric(&b, "mllama_steps_total", "counter", "Engine decode steps", (double)st.steps);
    metric(&b, "mllama_step_seconds_total", "counter", "Time in engine decode steps", st.step_ms_total / 1e3);
    metric(&b, "mllama_step_seconds_max", "gauge", "The longest engine decode step", st.step_ms_max / 1e3);
    metric(&b, "mllama_queue_length", "gauge", "Requests waiting for a slot", st.queued);
    metric(&b, "mllama_busy_slots", "gauge", "Slots with a request", st.busy_slots);
    metric(&b, "mllama_slots", "gauge", "Slots", st.n_slots);
    metric(&b, "mllama_image_store_bytes", "gauge", "Memory of encoded pictures kept for reuse", (double)st.image_store_bytes);
    metric(&b, "mllama_image_store_budget_bytes", "gauge", "The image store's budget", (double)st.image_store_budget);
    metric(&b, "mllama_http_connections", "gauge", "Open client connections", open_conns);
    sb_puts(&b, "# HELP mllama_http_responses_total HTTP responses by status (\"other\": any status not listed)\n"
                "# TYPE mllama_http_responses_total counter\n");
    for (i = 0; i < N_COUNTED; i++) {
        if (COUNTED_STATUSES[i]) sb_printf(&b, "mllama_http_responses_total{status=\"%d\"} %lld\n", COUNTED_STATUSES[i], (long long)counts[i]);
        else sb_printf(&b, "mllama_http_responses_total{status=\"other\"} %lld\n", (long long)counts[i]);
    }
    if (b.oom) send_response(r, 500, "text/plain", "out of memory\n", 14, NULL);
    else send_response(r, 200, "text/plain; version=0.0.4; charset=utf-8", b.data, b.len, NULL);
    sb_free(&b);
}

/* A route: its path, its method, and the API whose error shape it answers in. */
enum route_id { R_HEALTH, R_METRICS, R_OPENAI_CHAT, R_OPENAI_MODELS, R_OLLAMA_CHAT, R_OLLAMA_GENERATE, R_OLLAMA_TAGS, R_OLLAMA_SHOW,
                R_OLLAMA_PS, R_OLLAMA_VERSION, R_ROOT };

static const struct route {
    const char   *path, *method;
    enum route_id id;
    bool          ollama, needs_model;
} ROUTES[] = {   /* to add an endpoint: a row here and a case in handle_request */
    { "/health",              "GET",  R_HEALTH,          false, false },
    { "/metrics",             "GET",  R_METRICS,         false, false },
    { "/v1/chat/completions", "POST", R_OPENAI_CHAT,     false, true  },
    { "/v1/models",           "GET",  R_OPENAI_MODELS,   false, true  },
    { "/api/chat",            "POST", R_OLLAMA_CHAT,     true,  true  },
    { "/api/generate",        "POST", R_OLLAMA_GENERATE, true,  true  },
    { "/api/tags",            "GET",  R_OLLAMA_TAGS,     true,  true  },
    { "/api/show",            "POST", R_OLLAMA_SHOW,     true,  true  },
    { "/api/ps",              "GET",  R_OLLAMA_PS,       true,  true  },
    { "/api/version",         "GET",  R_OLLAMA_VERSION,  true,  false },
    { "/",                    "GET",  R_ROOT,            true,  false },
};

static bool path_has_prefix(const struct http_request *q, const char *prefix) {
    size_t n = strlen(prefix);
    return q->path_len > n && memcmp(q->path, prefix, n) == 0;
}

/* The route for the request; NULL with *wrong_method when the path is known but not the method. */
static const struct route *find_route(const struct http_request *q, bool *wrong_method, const char **allow) {
    size_t i;
    *wrong_method = false;
    for (i = 0; i < sizeof ROUTES / sizeof ROUTES[0]; i++) {
        if (!http_path_is(q, ROUTES[i].path) && !(ROUTES[i].id == R_OPENAI_MODELS && path_has_prefix(q, "/v1/models/"))) continue;
        if (http_method_is(q, ROUTES[i].method) || (strcmp(ROUTES[i].method, "GET") == 0 && http_method_is(q, "HEAD"))) return &ROUTES[i];
        *wrong_method = true;
        *allow = ROUTES[i].method;
    }
    return NULL;
}

static void handle_request(struct reply_ctx *r, const struct http_request *q, const struct route *route, const char *body, size_t body_len) {
    struct api_request ar;
    struct api_error e;
    struct sbuf b;
    bool ok;
    memset(&b, 0, sizeof b);
    memset(&e, 0, sizeof e);
    /* While draining, a request already read is still answered (its connection then closes). */
    if (route->needs_model && get_state() == STATE_LOADING) {
        send_error_msg(r, route->ollama, 503, "loading", "the model is still loading; try again");
        return;
    }
    switch (route->id) {
    case R_HEALTH: handle_health(r); return;
    case R_METRICS: handle_metrics(r); return;
    case R_ROOT: send_response(r, 200, "text/plain", "mllama-server is running\n", 25, NULL); return;
    case R_OLLAMA_VERSION:
        sb_puts(&b, "{\"version\":\"" OLLAMA_API_VERSION "\"}");
        send_json(r, 200, &b, NULL);
        break;
    case R_OPENAI_MODELS:
        if (!http_path_is(q, "/v1/models")) {   /* /v1/models/ID */
            const char *want = q->path + 11;
            size_t n = q->path_len - 11;
            if (n != strlen(S.api.model) || memcmp(want, S.api.model, n) != 0) {
                api_fail(&e, 404, "model_not_found", "model", "The model '%.*s' does not exist; this server serves '%s'", (int)(n > 200 ? 200 : n), want, S.api.model);
                send_error(r, false, &e);
                return;
            }
        }
        openai_write_models(&b, S.api.model, S.created, !http_path_is(q, "/v1/models"));
        send_json(r, 200, &b, NULL);
        break;
    case R_OLLAMA_TAGS:
    case R_OLLAMA_PS:
        ollama_write_tags(&b, &S.info, route->id == R_OLLAMA_PS);
        send_json(r, 200, &b, NULL);
        break;
    case R_OLLAMA_SHOW: {
        const char *name = NULL;
        memset(&ar, 0, sizeof ar);
        ok = api_parse_body(&ar, body, body_len, &e) && api_get_str(ar.json, 0, "model", "model", &name, &e) &&
             (name || api_get_str(ar.json, 0, "name", "name", &name, &e));
        if (ok && !name) ok = api_fail(&e, 400, "invalid_value", "model", "model is required");
        if (ok && !api_model_matches(name, S.api.model, true)) ok = api_fail(&e, 404, "model_not_found", "model", "model '%s' not found", name);
        if (ok) {
            ollama_write_show(&b, &S.info, &S.api.defaults);
            send_json(r, 200, &b, NULL);
        } else send_error(r, true, &e);
        api_request_free(&ar);
        break;
    }
    case R_OPENAI_CHAT:
    case R_OLLAMA_CHAT:
    case R_OLLAMA_GENERATE: {
        struct api_config c = S.api;
        pthread_mutex_lock(&S.lock);
        c.seed = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull ^ (++S.id_counter * 0xBF58476D1CE4E5B9ull);   /* a fresh seed for a request without one */
        pthread_mutex_unlock(&S.lock);
        memset(&ar, 0, sizeof ar);
        if (route->id == R_OPENAI_CHAT) ok = openai_parse_chat(&ar, &c, body, body_len, &e);
        else if (route->id == R_OLLAMA_CHAT) ok = ollama_parse_chat(&ar, &c, body, body_len, &e);
        else ok = ollama_parse_generate(&ar, &c, body, body_len, &e);
        if (ok) generate(r, q, &ar);
        else send_error(r, route->ollama, &e);
        api_request_free(&ar);
        break;
    }
    }
    sb_free(&b);
}

/* -- connections -- */

enum read_result { READ_OK, READ_CLOSED, READ_TIMEOUT, READ_ERROR };

/* Reads more bytes into c->buf (growing it up to limit) before the deadline. */
static enum read_result read_more(struct conn *c, size_t limit, double deadline) {
    ssize_t n;
    if (c->len == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 4096;
        char *b;
        if (cap > limit) cap = limit;
        if (cap <= c->len) return READ_ERROR;
        if (!(b = (char *)realloc(c->buf, cap))) return READ_ERROR;
        c->buf = b;
        c->cap = cap;
    }
    for (;;) {
        struct pollfd p;
        double left = deadline - now_s();
        int r;
        if (left <= 0) return READ_TIMEOUT;
        p.fd = c->fd;
        p.events = POLLIN;
        p.revents = 0;
        r = poll(&p, 1, (int)(left * 1000) + 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return READ_ERROR;
        if (r == 0) continue;
        n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (n < 0) return READ_ERROR;
        if (n == 0) return READ_CLOSED;
        c->len += (size_t)n;
        return READ_OK;
    }
}

/* Serves one request from c; returns whether the connection may carry another. */
static bool serve_one(struct conn *c) {
    struct http_limits limits;
    struct http_request q;
    struct http_error he;
    struct reply_ctx r;
    const struct route *route;
    const char *allow = NULL;
    bool wrong_method;
    double deadline = now_s() + S.opt.request_timeout;
    int64_t head_len = 0;
    size_t total;
    const char *head_buf;
    char msg[160];
    memset(&r, 0, sizeof r);
    r.c = c;
    limits.max_head = S.opt.max_head;
    limits.max_headers = S.opt.max_headers;
    while ((head_len = http_parse_head(c->buf ? c->buf : "", c->len, &limits, &q, &he)) == 0) {
        enum read_result rr = read_more(c, S.opt.max_head + 4096, deadline);
        if (rr == READ_CLOSED || rr == READ_ERROR) return false;
        if (rr == READ_TIMEOUT) {
            if (c->len) send_error_msg(&r, false, 408, "request_timeout", "the request head did not arrive in time (--request-timeout)");
            return false;
        }
    }
    if (head_len < 0) {
        c->linger = true;
        send_error_msg(&r, false, he.status, "bad_request", he.message);
        return false;
    }
    r.keep_alive = q.keep_alive;
    r.head_only = http_method_is(&q, "HEAD");
    route = find_route(&q, &wrong_method, &allow);
    /* Before the body is read: a client that may not send one is told so and the connection closed. */
    if (S.opt.api_key && (!route || route->id != R_HEALTH) && !http_bearer_ok(&q, S.opt.api_key)) {
        r.keep_alive = false;
        c->linger = true;
        send_error_msg(&r, route ? route->ollama : false, 401, "invalid_api_key", "a valid API key is required: 'Authorization: Bearer KEY'");
        return false;
    }
    if ((uint64_t)q.content_length > S.opt.max_body) {
        snprintf(msg, sizeof msg, "the request body has %lld bytes, more than this server's limit of %zu (--max-body)", (long long)q.content_length,
                 S.opt.max_body);
        r.keep_alive = false;
        c->linger = true;
        send_error_msg(&r, route ? route->ollama : false, 413, "request_too_large", msg);
        return false;
    }
    if (q.expect_continue && q.content_length > 0 && (size_t)head_len + (size_t)q.content_length > c->len &&
        !send_all(c->fd, "HTTP/1.1 100 Continue\r\n\r\n", 25))
        return false;
    total = (size_t)head_len + (size_t)q.content_length;
    head_buf = c->buf;
    while (c->len < total) {
        enum read_result rr;
        if (c->cap < total) {
            char *b = (char *)realloc(c->buf, total);
            if (!b) { r.keep_alive = false; send_error_msg(&r, false, 500, NULL, "out of memory for the request body"); return false; }
            c->buf = b;
            c->cap = total;
        }
        rr = read_more(c, total, deadline);
        if (rr == READ_CLOSED || rr == READ_ERROR) return false;
        if (rr == READ_TIMEOUT) {
            r.keep_alive = false;
            send_error_msg(&r, route ? route->ollama : false, 408, "request_timeout", "the request body did not arrive in time (--request-timeout)");
            return false;
        }
    }
    if (c->buf != head_buf) http_parse_head(c->buf, c->len, &limits, &q, &he);   /* the body moved the buffer: q points into it again */
    if (!route) {
        struct api_error e;
        memset(&e, 0, sizeof e);
        if (wrong_method) {
            char extra[64];
            api_fail(&e, 405, "method_not_allowed", NULL, "%.*s is not served on %.*s (%s is)", (int)q.method_len, q.method,
                     (int)(q.path_len > 100 ? 100 : q.path_len), q.path, allow);
            snprintf(extra, sizeof extra, "Allow: %s\r\n", allow);
            {
                struct sbuf b;
                memset(&b, 0, sizeof b);
                openai_write_error(&b, &e);
                send_json(&r, 405, &b, extra);
                sb_free(&b);
            }
        } else {
            api_fail(&e, 404, "not_found", NULL, "no endpoint at %.*s", (int)(q.path_len > 100 ? 100 : q.path_len), q.path);
            send_error(&r, path_has_prefix(&q, "/api/"), &e);
        }
    } else handle_request(&r, &q, route, c->buf + head_len, (size_t)q.content_length);
    if (S.opt.verbose)
        fprintf(stderr, "mllama-server: %.*s %.*s %d%s %.1f ms\n", (int)q.method_len, q.method, (int)(q.path_len > 200 ? 200 : q.path_len), q.path,
                r.status, r.failed ? " (client gone)" : "", (now_s() - deadline + S.opt.request_timeout) * 1e3);
    /* keep what came after this request (a pipelined one) */
    memmove(c->buf, c->buf + total, c->len - total);
    c->len -= total;
    return r.keep_alive && !r.failed;
}

static void *worker_main(void *arg) {
    (void)arg;
    for (;;) {
        struct conn *c;
        pthread_mutex_lock(&S.lock);
        while (!S.work_head && !S.workers_stop) pthread_cond_wait(&S.work_ready, &S.lock);
        if (!S.work_head) { pthread_mutex_unlock(&S.lock); return NULL; }
        c = S.work_head;
        S.work_head = c->next;
        if (!S.work_head) S.work_tail = NULL;
        pthread_mutex_unlock(&S.lock);
        for (;;) {
            if (!serve_one(c)) { conn_close(c); break; }
            if (c->len == 0) { give_back(c); break; }   /* else: a pipelined request waits in the buffer */
        }
    }
}

/* A connection over --max-conns: a short 503, without a worker. */
static void refuse_conn(int fd) {
    static const char body[] = "{\"error\":{\"message\":\"too many connections (--max-conns); try again\",\"type\":\"server_error\",\"param\":null,"
                               "\"code\":\"server_busy\"}}";
    char msg[512];
    int len = snprintf(msg, sizeof msg, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                       "Connection: close\r\nContent-Length: %zu\r\n\r\n%s", sizeof body - 1, body);
    ssize_t n = send(fd, msg, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n;
    close(fd);
    count_status(503);
}

static void set_socket_options(int fd) {
    int one = 1;
    struct timeval tv;
    tv.tv_sec = (time_t)S.opt.write_timeout;
    tv.tv_usec = (suseconds_t)((S.opt.write_timeout - (double)tv.tv_sec) * 1e6);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* The dispatcher: accepts, keeps idle connections, hands readable ones to the workers. */
static void *dispatcher_main(void *arg) {
    struct conn **idle = NULL;
    struct pollfd *fds = NULL;
    int n_idle = 0, cap = 0, i, was;
    (void)arg;
    for (;;) {
        int n_fds = 0, timeout_ms = 1000, r;
        double t = now_s();
        if (stop_requested()) break;
        if (cap < n_idle + 2) {
            cap = (n_idle + 2) * 2;
            idle = (struct conn **)realloc(idle, sizeof *idle * (size_t)cap);
            fds = (struct pollfd *)realloc(fds, sizeof *fds * (size_t)cap);
            if (!idle || !fds) die("out of memory in the dispatcher", NULL);
        }
        fds[n_fds].fd = S.wake[0]; fds[n_fds].events = POLLIN; fds[n_fds].revents = 0; n_fds++;
        fds[n_fds].fd = S.listen_fd; fds[n_fds].events = POLLIN; fds[n_fds].revents = 0; n_fds++;
        for (i = 0; i < n_idle; i++) {
            double left = idle[i]->idle_since + S.opt.keep_alive - t;
            fds[n_fds].fd = idle[i]->fd; fds[n_fds].events = POLLIN; fds[n_fds].revents = 0; n_fds++;
            if (left * 1000 < timeout_ms) timeout_ms = left > 0 ? (int)(left * 1000) + 1 : 0;
        }
        r = poll(fds, (nfds_t)n_fds, timeout_ms);
        if (r < 0 && errno != EINTR) die("poll failed", strerror(errno));
        if (stop_requested()) break;
        if (r > 0 && (fds[0].revents & POLLIN)) {
            char junk[64];
            struct conn *back;
            while (read(S.wake[0], junk, sizeof junk) == (ssize_t)sizeof junk) {}
            pthread_mutex_lock(&S.lock);
            back = S.returned;
            S.returned = NULL;
            pthread_mutex_unlock(&S.lock);
            while (back) {   /* the idle list grows below; fds is rebuilt next round */
                struct conn *next = back->next;
                if (n_idle == cap) {   /* both lists keep cap entries: the next round polls every idle one */
                    cap *= 2;
                    idle = (struct conn **)realloc(idle, sizeof *idle * (size_t)cap);
                    fds = (struct pollfd *)realloc(fds, sizeof *fds * (size_t)cap);
                    if (!idle || !fds) die("out of memory in the dispatcher", NULL);
                }
                back->idle_since = now_s();
                idle[n_idle++] = back;
                back = next;
            }
        }
        /* idle connections first (their poll entries follow the two fixed ones, in order) */
        if (r > 0) {
            int kept = 0, polled = n_fds - 2;
            for (i = 0; i < n_idle; i++) {
                if (i < polled && fds[i + 2].revents) push_work(idle[i]);
                else if (now_s() - idle[i]->idle_since >= S.opt.keep_alive) conn_close(idle[i]);
                else idle[kept++] = idle[i];
            }
            n_idle = kept;
        } else if (r == 0) {
            int kept = 0;
            for (i = 0; i < n_idle; i++) {
                if (now_s() - idle[i]->idle_since >= S.opt.keep_alive) conn_close(idle[i]);
                else idle[kept++] = idle[i];
            }
            n_idle = kept;
        }
        if (r > 0 && (fds[1].revents & POLLIN)) {
            for (;;) {
                int fd = accept(S.listen_fd, NULL, NULL);
                struct conn *c;
                bool over;
                if (fd < 0) break;   /* EAGAIN: no more waiting (the socket is non-blocking) */
                pthread_mutex_lock(&S.lock);
                over = S.open_conns >= S.opt.max_conns;
                if (!over) S.open_conns++;
                pthread_mutex_unlock(&S.lock);
                if (over) { refuse_conn(fd); continue; }
                set_socket_options(fd);
                if (!(c = (struct conn *)calloc(1, sizeof *c))) { close(fd); pthread_mutex_lock(&S.lock); S.open_conns--; pthread_mutex_unlock(&S.lock); continue; }
                c->fd = fd;
                push_work(c);
            }
        }
    }
    /* draining: no new connections; the idle ones are closed (a request in flight keeps its own) */
    close(S.listen_fd);
    pthread_mutex_lock(&S.lock);
    was = S.state;
    S.state = STATE_DRAINING;
    S.dispatcher_done = true;
    while (S.returned) {
        struct conn *c = S.returned;
        S.returned = c->next;
        c->next = NULL;
        if (n_idle < cap) idle[n_idle++] = c;
        else { pthread_mutex_unlock(&S.lock); conn_close(c); pthread_mutex_lock(&S.lock); }
    }
    pthread_mutex_unlock(&S.lock);
    for (i = 0; i < n_idle; i++) conn_close(idle[i]);
    free(idle);
    free(fds);
    if (was != STATE_LOADING) {   /* the engine exists (it was made before the state became READY, under the lock) */
        struct mms_engine_stats st;
        mms_engine_get_stats(S.engine, &st);
        fprintf(stderr, "mllama-server: stopping: no new connections; finishing the %d requests in flight\n", st.busy_slots + st.queued);
    }
    return NULL;
}

/* -- start -- */

static void log_warnings(enum mms_log_level level, const char *message, void *user) {
    (void)user;
    if (level == MMS_LOG_WARN) fprintf(stderr, "mllama-server: warning: %s\n", message);
}

static bool load_progress(float fraction, void *user) {
    (void)fraction;
    (void)user;
    return !stop_requested();   /* SIGTERM while loading stops the load */
}

static int open_listener(const char *host, int port, int *bound_port) {
    struct addrinfo hints, *res = NULL, *ai;
    char port_s[16];
    int fd = -1, one = 1, rc;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(port_s, sizeof port_s, "%d", port);
    if ((rc = getaddrinfo(host, port_s, &hints, &res)) != 0) die("cannot resolve --host", gai_strerror(rc));
    for (ai = res; ai; ai = ai->ai_next) {
        if ((fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol)) < 0) continue;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 256) == 0) break;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) die("cannot listen on the address", strerror(errno));
    {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        getsockname(fd, (struct sockaddr *)&ss, &len);
        *bound_port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port) : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

/* -- the model as the listings describe it -- */

/* llama.cpp's numbers for general.file_type (its llama_ftype) and the names Ollama's listings give
   them. A number not listed here is described by the type of most of the weights instead. To add
   one: a row with llama.cpp's number and name. */
static const struct { uint32_t id; const char *name; } FILE_TYPES[] = {
    { 0, "F32" },     { 1, "F16" },     { 2, "Q4_0" },    { 3, "Q4_1" },    { 7, "Q8_0" },    { 8, "Q5_0" },
    { 9, "Q5_1" },    { 10, "Q2_K" },   { 11, "Q3_K_S" }, { 12, "Q3_K_M" }, { 13, "Q3_K_L" }, { 14, "Q4_K_S" },
    { 15, "Q4_K_M" }, { 16, "Q5_K_S" }, { 17, "Q5_K_M" }, { 18, "Q6_K" },   { 32, "BF16" },
};

/* The weights counted over the model's files: every tensor's elements, and the elements of the
   matrices (two dimensions or more) by type, to name the type of most of them. */
struct weights {
    int64_t n_params;
    struct { char name[16]; int64_t n; } types[16];
    int     n_types;
    const char *file_type;   /* general.file_type's name, when a file gives a known one */
};

static void weights_add(struct weights *w, const char *type, int64_t n, int n_dims) {
    int i;
    w->n_params += n;
    if (n_dims < 2) return;   /* norms and biases are kept in F32 whatever the quantization */
    for (i = 0; i < w->n_types && strcmp(w->types[i].name, type) != 0; i++) {}
    if (i == w->n_types) {
        if (w->n_types == (int)(sizeof w->types / sizeof w->types[0])) return;
        snprintf(w->types[w->n_types++].name, sizeof w->types[0].name, "%s", type);
    }
    w->types[i].n += n;
}

static int64_t elements(const int64_t *ne, int n_dims) {
    int64_t n = 1;
    int d;
    for (d = 0; d < n_dims; d++) n *= ne[d];
    return n;
}

/* A GGUF file's tensors and general.file_type; false when it is not one mms_gguf_open reads. */
static bool weights_from_gguf(struct weights *w, const char *path) {
    struct mms_gguf *g = mms_gguf_open(path);
    struct mms_gguf_tensor_info t;
    uint32_t ft;
    int64_t i;
    size_t k;
    if (!g) return false;
    for (i = 0; i < mms_gguf_get_n_tensors(g); i++) {
        char type[16];
        const char *name;
        if (mms_gguf_get_tensor(g, i, &t) != MMS_OK) continue;
        name = t.type != MMS_TYPE_INVALID ? mms_type_name(t.type) : "";
        for (k = 0; name[k] && k + 1 < sizeof type; k++) type[k] = (char)toupper((unsigned char)name[k]);
        if (!name[0]) snprintf(type, sizeof type, "type %u", (unsigned)t.ggml_type);
        else type[k] = '\0';
        weights_add(w, type, elements(t.ne, t.n_dims), t.n_dims);
    }
    if (!w->file_type && mms_gguf_get_u32(g, "general.file_type", &ft) == MMS_OK)
        for (k = 0; k < sizeof FILE_TYPES / sizeof FILE_TYPES[0]; k++)
            if (FILE_TYPES[k].id == ft) w->file_type = FILE_TYPES[k].name;
    mms_gguf_close(g);
    return true;
}

/* A Hugging Face folder's *.safetensors files (their dtypes are the type names). */
static void weights_from_folder(struct weights *w, const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        char path[4096];
        struct mms_safetensors *st;
        struct mms_safetensors_info t;
        int64_t i;
        if (n < 12 || strcmp(e->d_name + n - 12, ".safetensors") != 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (!(st = mms_safetensors_open(path))) continue;
        for (i = 0; i < mms_safetensors_n_tensors(st); i++)
            if (mms_safetensors_get(st, i, &t) == MMS_OK) weights_add(w, t.dtype, elements(t.shape, t.n_dims), t.n_dims);
        mms_safetensors_close(st);
    }
    if (d) closedir(d);
}

/* Ollama's way of writing a count: "10.7B", "797.3K". */
static void human_count(char *out, size_t cap, int64_t n) {
    if (n >= 1000000000) snprintf(out, cap, "%.1fB", (double)n / 1e9);
    else if (n >= 1000000) snprintf(out, cap, "%.1fM", (double)n / 1e6);
    else if (n >= 1000) snprintf(out, cap, "%.1fK", (double)n / 1e3);
    else snprintf(out, cap, "%lld", (long long)n);
}

/* The model's name, size, date, parameters and quantization for the listings, from its files. */
static void describe_model(const struct options *o) {
    struct stat st;
    struct weights w;
    const char *base = strrchr(o->model, '/');
    size_t n;
    uint64_t h = 1469598103934665603ull;
    const char *p;
    int64_t size = 0;
    time_t mtime = 0;
    struct tm tm;
    int i, most = -1;
    base = base ? base + 1 : o->model;
    if (o->alias) snprintf(S.info_name, sizeof S.info_name, "%s", o->alias);
    else {
        snprintf(S.info_name, sizeof S.info_name, "%s", base);
        n = strlen(S.info_name);
        while (n && S.info_name[n - 1] == '/') S.info_name[--n] = '\0';
        if (n > 5 && strcmp(S.info_name + n - 5, ".gguf") == 0) S.info_name[n - 5] = '\0';
    }
    if (stat(o->model, &st) == 0) { size += st.st_size; mtime = st.st_mtime; }
    if (o->mmproj && stat(o->mmproj, &st) == 0) size += st.st_size;
    for (p = o->model; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;   /* names the file, not its contents */
    h = (h ^ (uint64_t)size) * 1099511628211ull;
    h = (h ^ (uint64_t)mtime) * 1099511628211ull;
    snprintf(S.info_digest, sizeof S.info_digest, "%016llx", (unsigned long long)h);
    gmtime_r(&mtime, &tm);
    strftime(S.info_modified, sizeof S.info_modified, "%Y-%m-%dT%H:%M:%SZ", &tm);

    memset(&w, 0, sizeof w);
    if (!weights_from_gguf(&w, o->model)) weights_from_folder(&w, o->model);
    if (o->mmproj) weights_from_gguf(&w, o->mmproj);
    for (i = 0; i < w.n_types; i++)
        if (most < 0 || w.types[i].n > w.types[most].n) most = i;
    human_count(S.info_params, sizeof S.info_params, w.n_params);
    snprintf(S.info_quant, sizeof S.info_quant, "%s", w.file_type ? w.file_type : most >= 0 ? w.types[most].name : "");
    S.info.name = S.info_name;
    S.info.modified_at = S.info_modified;
    S.info.size = size;
    S.info.digest = S.info_digest;
    S.info.n_params = w.n_params;
    S.info.parameter_size = S.info_params;
    S.info.quantization = S.info_quant;
}

int main(int argc, char **argv) {
    struct options *o = &S.opt;
    struct mms_mllama_load_params lp;
    struct mms_engine_params ep;
    struct mms_mllama_model *model = NULL;
    struct mms_vocab *vocab = NULL;
    const struct mms_mllama_hparams *hp;
    mms_backend_t cpu;
    pthread_t dispatcher, *workers;
    pthread_attr_t attr;
    struct sigaction sa;
    int i, port;

    parse_args(argc, argv, o);
    mms_log_set(log_warnings, NULL);
    pthread_mutex_init(&S.lock, NULL);
    pthread_cond_init(&S.work_ready, NULL);
    pthread_mutex_init(&S.decode_lock, NULL);
    pthread_cond_init(&S.decode_free, NULL);
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    if (pipe(S.wake) != 0 || pipe(S.stop_pipe) != 0) die("cannot make a pipe", strerror(errno));
    for (i = 0; i < 2; i++) {
        fcntl(S.wake[i], F_SETFL, fcntl(S.wake[i], F_GETFL) | O_NONBLOCK);
        fcntl(S.stop_pipe[i], F_SETFL, fcntl(S.stop_pipe[i], F_GETFL) | O_NONBLOCK);
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* Listen first: /health answers 503 while the model loads. */
    S.listen_fd = open_listener(o->host, o->port, &port);
    fprintf(stderr, "mllama-server: listening on http://%s%s%s:%d\n", strchr(o->host, ':') ? "[" : "", o->host, strchr(o->host, ':') ? "]" : "", port);
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 512 << 10);
    if (!(workers = (pthread_t *)calloc((size_t)o->workers, sizeof *workers))) die("out of memory", NULL);
    for (i = 0; i < o->workers; i++)
        if (pthread_create(&workers[i], &attr, worker_main, NULL) != 0) die("cannot start a worker thread", strerror(errno));
    if (pthread_create(&dispatcher, &attr, dispatcher_main, NULL) != 0) die("cannot start the dispatcher thread", strerror(errno));

    if (!(cpu = mms_backend_cpu_init())) die("cannot start the CPU backend", mms_last_error());
    mms_backend_cpu_set_n_threads(cpu, o->threads);
    memset(&lp, 0, sizeof lp);
    lp.path = o->model;
    lp.mmproj_path = o->mmproj;
    lp.cpu = cpu;
    lp.progress = load_progress;
    if (!(model = mms_mllama_model_load(&lp))) {
        if (stop_requested()) { fprintf(stderr, "mllama-server: stopped while loading\n"); return 0; }
        die("cannot load the model", mms_last_error());
    }
    if (!(vocab = mms_vocab_load_file(o->vocab ? o->vocab : o->model))) die("cannot load the model's vocabulary", mms_last_error());
    if (mms_vocab_chat_template(vocab)[0] && !mms_vocab_chat_template_is_builtin(vocab))
        fprintf(stderr, "mllama-server: warning: the model's chat template is not the Llama 3.2 Vision template the server renders; "
                        "prompts follow the built-in one\n");
    hp = mms_mllama_model_get_hparams(model);
    memset(&ep, 0, sizeof ep);
    ep.model = model;
    ep.vocab = vocab;
    ep.n_slots = o->n_slots;
    ep.n_ctx = o->n_ctx;
    ep.n_batch = o->n_batch;
    ep.max_queue = o->max_queue;
    ep.max_images = o->max_images;
    ep.image_store = o->image_store;
    if (!(S.engine = mms_engine_new(&ep))) die("cannot start the engine", mms_last_error());
    describe_model(o);
    S.info.context_length = o->n_ctx ? o->n_ctx : (hp->n_ctx_train < 2048 ? hp->n_ctx_train : 2048);
    S.api.model = S.info_name;
    S.api.max_images = o->max_images;
    S.api.max_stop = o->max_stop;
    S.api.defaults = o->defaults;
    S.created = (int64_t)time(NULL);
    pthread_mutex_lock(&S.lock);
    if (S.state == STATE_LOADING) S.state = STATE_READY;
    pthread_mutex_unlock(&S.lock);
    fprintf(stderr, "mllama-server: ready: model '%s', %d slots of %d tokens, %d threads%s\n", S.info_name, o->n_slots, S.info.context_length,
            o->threads, o->api_key ? ", API key required" : "");

    /* Until SIGTERM: the dispatcher returns when it has stopped accepting. */
    pthread_join(dispatcher, NULL);
    pthread_mutex_lock(&S.lock);
    S.workers_stop = true;
    pthread_cond_broadcast(&S.work_ready);
    pthread_mutex_unlock(&S.lock);
    for (i = 0; i < o->workers; i++) pthread_join(workers[i], NULL);
    free(workers);
    mms_engine_free(S.engine);
    mms_vocab_free(vocab);
    mms_mllama_model_free(model);
    mms_backend_free(cpu);
    fprintf(stderr, "mllama-server: stopped\n");
    return 0;
}
