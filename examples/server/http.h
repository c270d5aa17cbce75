/* http.h - the HTTP/1.1 request head parser of mllama-server (RFC 9112), on bytes only: no
   sockets, so tests/test_server.c and the fuzzer (tests/fuzz/fuzz_http.c) run it alone.

   Strict on purpose: a request a proxy could read differently from us is refused, never guessed.
   Lines end with CRLF; no folded header lines, no space before a header's colon, no control bytes;
   Content-Length is digits only, and when repeated each copy must be equal; Transfer-Encoding
   (chunked bodies) is refused with 501 (clients send JSON with a Content-Length); HTTP/1.1 needs
   a Host header. Every refusal gives the status to answer and a message naming what was wrong. */
#ifndef MLLAMA_SERVER_HTTP_H
#define MLLAMA_SERVER_HTTP_H

#include "part.h"



#define HTTP_HEADERS_CAP 256   /* the most a request may have, whatever max_headers says */

struct http_limits {
    size_t max_head;      /* bytes of request line and headers, the blank line included */
    int    max_headers;   /* header lines */
};

struct http_header {
    const char *name, *value;   /* into the parsed buffer, not NUL-terminated */
    size_t      name_len, value_len;
};

struct http_request {
    const char *method, *target, *path;  /* into the buffer; path is the target up to '?' */
    size_t      method_len, target_len, path_len;
    int         minor;                   /* HTTP/1.minor: 0 or 1 */
    struct http_header headers[HTTP_HEADERS_CAP];
    int         n_headers;
    int64_t     content_length;          /* 0 when absent */
    bool        keep_alive;              /* the connection may carry another request after this one */
    bool        expect_continue;         /* the client waits for "100 Continue" before the body */
};

struct http_error {
    int  status;          /* 400, 417, 431, 501 or 505 */
    char message[160];
};

SRV_FN int http__fail(struct http_error *err, int status, const char *message) {
    err->status = status;
    snprintf(err->message, sizeof err->message, "%s", message);
    return -1;
}

/* RFC 9110's tchar: the characters of methods and header names. */
SRV_FN bool http__is_tchar(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

SRV_FN bool http__ieq(const char *a, size_t n, const char *b) {
    size_t i;
    if (strlen(b) != n) return false;
    for (i = 0; i < n; i++) {
        char x = a[i], y = b[i];
        if (x >= 'A' && x <= 'Z') x = (char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z') y = (char)(y - 'A' + 'a');
        if (x != y) return false;
    }
    return true;
}

/* The value of the first header called name (case-insensitive), or NULL. */
SRV_FN const char *http_header_get(const struct http_request *req, const char *name, size_t *len) {
    int i;
    for (i = 0; i < req->n_headers; i++)
        if (http__ieq(req->headers[i].name, req->headers[i].name_len, name)) {
            *len = req->headers[i].value_len;
            return req->headers[i].value;
        }
    return NULL;
}

/* Whether a comma-separated header value (Connection's) lists token, case-insensitive. */
SRV_FN bool http__list_has(const char *v, size_t n, const char *token) {
    size_t i = 0;
    while (i < n) {
        size_t start, end;
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) i++;
        start = i;
        while (i < n && v[i] != ',') i++;
        end = i;
        while (end > start && (v[end - 1] == ' ' || v[end - 1] == '\t')) end--;
        if (end > start && http__ieq(v + start, end - start, token)) return true;
    }
    return false;
}

SRV_FN bool http_path_is(const struct http_request *req, const char *path) {
    return req->path_len == strlen(path) && memcmp(req->path, path, req->path_len) == 0;
}

SRV_FN bool http_method_is(const struct http_request *req, const char *method) {
    return req->method_len == strlen(method) && memcmp(req->method, method, req->method_len) == 0;
}

/* Parses the head at the start of buf[0..len). Returns its length (up to and including the blank
   line) when complete, 0 when more bytes are needed (len is still under max_head), or -1 with
   *err filled. */
SRV_FN int64_t http_parse_head(const char *buf, size_t len, const struct http_limits *limits, struct http_request *req,
                               struct http_error *err) {
    size_t scan = len < limits->max_head ? len : limits->max_head, head_len = 0, i, p;
    bool seen_length = false, seen_host = false, close = false, keep = false;
    for (i = 0; i < scan; i++) {
        if (buf[i] == '\n' && (i == 0 || buf[i - 1] != '\r')) return http__fail(err, 400, "malformed request: lines must end with CRLF");
        if (i + 3 < scan && buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' && buf[i + 3] == '\n') { head_len = i + 4; break; }
    }
    if (!head_len) {
        char msg[96];
        if (len < limits->max_head) return 0;
        snprintf(msg, sizeof msg, "the request line and headers are over %zu bytes", limits->max_head);
        return http__fail(err, 431, msg);
    }
    memset(req, 0, sizeof *req);

    /* request-line = method SP request-target SP HTTP-version CRLF */
    p = 0;
    while (p < head_len && http__is_tchar((unsigned char)buf[p])) p++;
    if (p == 0 || buf[p] != ' ') return http__fail(err, 400, "malformed request line: expected a method, then one space");
    req->method = buf;
    req->method_len = p;
    if (p > 16) return http__fail(err, 400, "malformed request line: the method is too long");
    req->target = buf + ++p;
    while (p < head_len && (unsigned char)buf[p] > ' ' && (unsigned char)buf[p] < 0x7f) p++;
    req->target_len = (size_t)(buf + p - req->target);
    if (req->target_len == 0 || buf[p] != ' ') return http__fail(err, 400, "malformed request line: expected a target, then one space");
    if (req->target[0] != '/') return http__fail(err, 400, "malformed request line: the target must be a path starting with '/'");
    req->path = req->target;
    req->path_len = 0;
    while (req->path_len < req->target_len && req->target[req->path_len] != '?' && req->target[req->path_len] != '#') req->path_len++;
    p++;
    if (head_len - p < 10 || memcmp(buf + p, "HTTP/", 5) != 0 || buf[p + 6] != '.' || buf[p + 8] != '\r' || buf[p + 9] != '\n' ||
        buf[p + 5] < '0' || buf[p + 5] > '9' || buf[p + 7] < '0' || buf[p + 7] > '9')
        return http__fail(err, 400, "malformed request line: expected HTTP/1.1 or HTTP/1.0 at its end");
    if (buf[p + 5] != '1') return http__fail(err, 505, "only HTTP/1.0 and HTTP/1.1 are served");
    req->minor = buf[p + 7] - '0';
    if (req->minor > 1) req->minor = 1;   /* HTTP/1.x for x > 1 is read as 1.1 (RFC 9110 2.5) */
    p += 10;

    /* header fields, until the blank line */
    while (p < head_len - 2) {
        struct http_header *h;
        size_t line_end = p, name_end, vs, ve;
        while (buf[line_end] != '\r') line_end++;
        if (buf[line_end + 1] != '\n') return http__fail(err, 400, "malformed header: a CR not followed by LF");
        if (buf[p] == ' ' || buf[p] == '\t') return http__fail(err, 400, "malformed header: folded lines (obs-fold) are not accepted");
        name_end = p;
        while (name_end < line_end && http__is_tchar((unsigned char)buf[name_end])) name_end++;
        if (name_end == p || buf[name_end] != ':') return http__fail(err, 400, "malformed header: expected a name and a colon");
        if (req->n_headers >= limits->max_headers || req->n_headers >= HTTP_HEADERS_CAP) {
            char msg[64];
            snprintf(msg, sizeof msg, "more than %d header lines", limits->max_headers < HTTP_HEADERS_CAP ? limits->max_headers : HTTP_HEADERS_CAP);
            return http__fail(err, 431, msg);
        }
        vs = name_end + 1;
        while (vs < line_end && (buf[vs] == ' ' || buf[vs] == '\t')) vs++;
        ve = line_end;
        while (ve > vs && (buf[ve - 1] == ' ' || buf[ve - 1] == '\t')) ve--;
        for (i = vs; i < ve; i++) {
            unsigned char c = (unsigned char)buf[i];
            if ((c < ' ' && c != '\t') || c == 0x7f) return http__fail(err, 400, "malformed header: a control character in a value");
        }
        h = &req->headers[req->n_headers++];
        h->name = buf + p;
        h->name_len = name_end - p;
        h->value = buf + vs;
        h->value_len = ve - vs;
        p = line_end + 2;
    }

    for (i = 0; i < (size_t)req->n_headers; i++) {
        const struct http_header *h = &req->headers[i];
        if (http__ieq(h->name, h->name_len, "content-length")) {
            int64_t n = 0;
            size_t k;
            if (h->value_len == 0 || h->value_len > 15) return http__fail(err, 400, "Content-Length must be a whole number of at most 15 digits");
            for (k = 0; k < h->value_len; k++) {
                if (h->value[k] < '0' || h->value[k] > '9') return http__fail(err, 400, "Content-Length must be digits only");
                n = n * 10 + (h->value[k] - '0');
            }
            if (seen_length && n != req->content_length) return http__fail(err, 400, "two different Content-Length headers");
            seen_length = true;
            req->content_length = n;
        } else if (http__ieq(h->name, h->name_len, "transfer-encoding")) {
            return http__fail(err, 501, "Transfer-Encoding is not supported: send the body with a Content-Length");
        } else if (http__ieq(h->name, h->name_len, "host")) {
            if (seen_host) return http__fail(err, 400, "two Host headers");
            seen_host = true;
        } else if (http__ieq(h->name, h->name_len, "connection")) {
            close = close || http__list_has(h->value, h->value_len, "close");
            keep = keep || http__list_has(h->value, h->value_len, "keep-alive");
        } else if (http__ieq(h->name, h->name_len, "expect")) {
            if (!http__ieq(h->value, h->value_len, "100-continue")) return http__fail(err, 417, "the only expectation served is 100-continue");
            req->expect_continue = req->minor >= 1;
        }
    }
    if (req->minor >= 1 && !seen_host) return http__fail(err, 400, "an HTTP/1.1 request needs a Host header");
    req->keep_alive = req->minor >= 1 ? !close : (keep && !close);
    return (int64_t)head_len;
}

/* Compares a and b in a time that depends on their lengths only, not on where they differ (an
   API key must not leak through response times). */
SRV_FN bool http_const_time_equal(const char *a, size_t a_len, const char *b, size_t b_len) {
    unsigned char diff = (unsigned char)(a_len != b_len);
    size_t i, n = a_len > b_len ? a_len : b_len;
    for (i = 0; i < n; i++) {
        unsigned char x = i < a_len ? (unsigned char)a[i] : 0, y = i < b_len ? (unsigned char)b[i] : 0;
        diff |= (unsigned char)(x ^ y);
    }
    return diff == 0;
}

/* Whether the request carries "Authorization: Bearer KEY" for this key. */
SRV_FN bool http_bearer_ok(const struct http_request *req, const char *key) {
    size_t len;
    const char *v = http_header_get(req, "authorization", &len);
    if (!v || len < 7 || !http__ieq(v, 6, "bearer") || v[6] != ' ') return false;
    v += 7;
    len -= 7;
    while (len && *v == ' ') { v++; len--; }
    return http_const_time_equal(v, len, key, strlen(key));
}

SRV_FN const char *http_reason(int status) {
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default:  return "Unknown";
    }
}

#endif
