/* >>text-tokenizer ================================================================================
   Llama 3's byte-level BPE, with Hugging Face tokenizers' results (the fixtures check every id).
   Load: the tokens, types and merges are copied into one vocab; two open-addressing tables map a
   token's text to its id and a pair of ids to (merge rank, merged id); each token's decoded bytes
   are precomputed. Tokenize: special tokens are cut out first (longest match at the leftmost
   position, like HF's added-token splitting), each remaining segment is decoded to code points
   (an invalid UTF-8 maximal subpart counts as one U+FFFD, as bytes.decode('utf-8', 'replace')
   gives, but keeps its bytes), split into pieces by a hand-written matcher of the Llama 3 rule,
   and each piece is looked up whole ("ignore_merges", as Llama 3's tokenizer.json and tiktoken do)
   or merged from its bytes with a heap ordered by (rank, position), so long pieces cost
   O(n log n). Decode: bytes to UTF-8 with one U+FFFD per maximal invalid subpart (Python's and
   Rust's from_utf8_lossy rule), also incrementally for streaming. Nothing mutable is global. */

/* GPT-2's byte <-> printable character map: bytes that are printable Latin-1 stand for
   themselves, the others (0-32, 127-160, 173) get U+0100 onwards in byte order. */
static bool mms__tok_byte_is_self(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255); }

static uint32_t mms__tok_byte_to_cp(int b) {
    int k = 0, i;
    if (mms__tok_byte_is_self(b)) return (uint32_t)b;
    for (i = 0; i < b; i++) if (!mms__tok_byte_is_self(i)) k++;
    return 256u + (uint32_t)k;
}

static size_t mms__tok_put_utf8(uint32_t cp, unsigned char *o) {
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) { o[0] = (unsigned char)(0xC0 | (cp >> 6)); o[1] = (unsigned char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12)); o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18)); o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* UTF-8 as Unicode defines it (no overlong forms, no surrogates, nothing past U+10FFFF), for the
   decoder below and the trie's text kinds (mms__text_step): after lead byte b0, how many
   continuation bytes follow (0: ASCII; -1: b0 cannot lead) and the range the first of them must lie
   in, mms__utf8_lo/hi[*range] (the others: range 0, 0x80..0xBF). */
static const unsigned char mms__utf8_lo[5] = { 0x80, 0xA0, 0x80, 0x90, 0x80 }, mms__utf8_hi[5] = { 0xBF, 0xBF, 0x9F, 0xBF, 0x8F };
static int mms__utf8_lead(unsigned b0, int *range) {
    *range = 0;
    if (b0 < 0x80) return 0;
    if (b0 < 0xC2 || b0 > 0xF4) return -1;
    if (b0 < 0xE0) return 1;
    if (b0 < 0xF0) { *range = b0 == 0xE0 ? 1 : b0 == 0xED ? 2 : 0; return 2; }
    *range = b0 == 0xF0 ? 3 : b0 == 0xF4 ? 4 : 0;
    return 3;
}

/* One UTF-8 unit at s[0..n), n >= 1: returns its length > 0 with *cp for a valid character, or
   -len for an invalid maximal subpart (Unicode's "best practice", which Python and Rust follow);
   *incomplete is set when that subpart is a valid prefix cut by the end of the data. */
static int mms__tok_utf8_unit(const unsigned char *s, size_t n, uint32_t *cp, bool *incomplete) {
    int range, need = mms__utf8_lead(s[0], &range), k;
    uint32_t c;
    *incomplete = false;
    if (need == 0) { *cp = s[0]; return 1; }
    if (need < 0) return -1;
    c = s[0] & (0x3Fu >> need);
    for (k = 1; k <= need; k++) {
        unsigned b;
        if ((size_t)k >= n) { *incomplete = true; return -k; }
        b = s[k];
        if (b < (k == 1 ? mms__utf8_lo[range] : 0x80u) || b > (k == 1 ? mms__utf8_hi[range] : 0xBFu)) return -k;
        c = (c << 6) | (b & 0x3F);
    }
    *cp = c;
    return need + 1;
}

/* -- the vocabulary -- */

struct mms_vocab {
    int32_t        n_tokens;
    char          *text;         /* every token's text, each followed by a NUL */
    size_t        *text_off;     /* n_tokens + 1 */
    uint8_t       *type;
    unsigned char *piece;        /* every token's decoded bytes */
    size_t        *piece_off;    /* n_tokens + 1 */
    size_t         max_piece;
    int32_t       *map;          /* text -> id, open addressing; -1 = empty */
    size_t         map_mask;
    uint64_t      *pair_key;     /* (left + 1) << 32 | right; 0 = empty */
    uint32_t      *pair_rank;
    int32_t       *pair_id;
    size_t         pair_mask;
    int32_t        byte_id[256];
    unsigned char  byte_utf8[256][2];   /* each byte's character, in UTF-8 (1 or 2 bytes) */
    uint8_t        byte_utf8_len[256];
    int32_t       *special;      /* control and user-defined ids, by first byte, longest first */
    int32_t        special_start[257];
    int32_t        bos, eos;
    int32_t       *eog;
    int            n_eog;
    char          *chat_template;          /* the file's, or NULL */
    bool           chat_template_builtin;  /* byte for byte the template mms_chat_apply_template renders */
    struct mms__token_trie *trie;          /* built on first use (mms__vocab_trie), under trie_lock */
    mms__mutex     trie_lock;
};

struct mms__token_trie;
static void mms__token_trie_free(struct mms__token_trie *t);

static size_t mms__tok_hash(const void *p, size_t n) {
    const unsigned char *s = (const unsigned char *)p;
    uint64_t h = 0xCBF29CE484222325ull;
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001B3ull;
    return mms__hash64(h);
}

static const char *mms__vocab_text(const struct mms_vocab *v, int32_t id, size_t *len) {
    *len = v->text_off[id + 1] - v->text_off[id] - 1;
    return v->text + v->text_off[id];
}

static int32_t mms__vocab_lookup(const struct mms_vocab *v, const void *s, size_t n) {
    size_t i = mms__tok_hash(s, n) & v->map_mask;
    for (; v->map[i] >= 0; i = (i + 1) & v->map_mask) {
        size_t len;
        const char *t = mms__vocab_text(v, v->map[i], &len);
        if (len == n && memcmp(t, s, n) == 0) return v->map[i];
    }
    return -1;
}

static uint64_t mms__vocab_pair_key(int32_t a, int32_t b) { return ((uint64_t)(uint32_t)a + 1) << 32 | (uint32_t)b; }

/* The slot of a pair: its own, or the empty one where it would go. */
static size_t mms__vocab_pair_slot(const struct mms_vocab *v, uint64_t key) {
    size_t i = mms__hash64(key) & v->pair_mask;
    while (v->pair_key[i] != 0 && v->pair_key[i] != key) i = (i + 1) & v->pair_mask;
    return i;
}

static bool mms__vocab_is_special(const struct mms_vocab *v, int32_t id) {
    return v->type[id] == MMS_TOKEN_CONTROL || v->type[id] == MMS_TOKEN_USER_DEFINED;
}

MMS_API void mms_vocab_free(struct mms_vocab *v) {
    if (!v) return;
    MMS_FREE(v->text); MMS_FREE(v->text_off); MMS_FREE(v->type); MMS_FREE(v->piece); MMS_FREE(v->piece_off);
    MMS_FREE(v->map); MMS_FREE(v->pair_key); MMS_FREE(v->pair_rank); MMS_FREE(v->pair_id);
    MMS_FREE(v->special); MMS_FREE(v->eog); MMS_FREE(v->chat_template);
    mms__token_trie_free(v->trie);
    mms__mutex_destroy(&v->trie_lock);
    MMS_FREE(v);
}

static void *mms__vocab_alloc(size_t n, size_t size) {
    if (n != 0 && size > (size_t)-1 / n) return NULL;
    return MMS_MALLOC(n * size > 0 ? n * size : 1);
}

static const char *mms__vocab_where(const struct mms_gguf *g) {
    const char *p = mms_gguf_get_path(g);
    return p && *p ? p : "(memory)";
}

/* The quoted start of a token text for messages. */
static const char *mms__vocab_quote(const char *s, size_t n, char *buf, size_t cap) {
    size_t i, o = 0;
    buf[o++] = '"';
    for (i = 0; i < n && o + 6 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 32 && c < 127 && c != '"' && c != '\\') buf[o++] = (char)c;
        else { snprintf(buf + o, cap - o, "\\x%02x", c); o += 4; }
    }
    if (i < n && o + 4 < cap) { buf[o++] = '.'; buf[o++] = '.'; buf[o++] = '.'; }
    buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}

/* A key that must be there, as an array of elem (NONE: any integer type); its length in *n. */
static enum mms_status mms__vocab_need_array(const struct mms_gguf *g, const char *key, enum mms_gguf_type elem, int64_t *n) {
    int64_t i = mms_gguf_find_key(g, key);
    enum mms_gguf_type at;
    if (i < 0) return mms_set_error(MMS_ERR_FORMAT, "mms_vocab_load: %s: key %s is missing", mms__vocab_where(g), key);
    at = mms_gguf_get_arr_type(g, i);
    if (mms_gguf_get_kv_type(g, i) != MMS_GGUF_TYPE_ARRAY ||
        (elem == MMS_GGUF_TYPE_NONE ? (at == MMS_GGUF_TYPE_BOOL || at == MMS_GGUF_TYPE_FLOAT32 || at == MMS_GGUF_TYPE_FLOAT64 ||
                                       at == MMS_GGUF_TYPE_STRING || at == MMS_GGUF_TYPE_ARRAY)
                                    : at != elem))
        return mms_set_error(MMS_ERR_FORMAT, "mms_vocab_load: %s: key %s must be an array of %s", mms__vocab_where(g), key,
                             elem == MMS_GGUF_TYPE_STRING ? "strings" : "integers");
    *n = mms_gguf_get_arr_n(g, i);
    return MMS_OK;
}

/* An optional token id key: -1 when absent, else checked against the vocabulary size. */
static enum mms_status mms__vocab_opt_id(const struct mms_gguf *g, const char *key, int32_t n, int32_t *out) {
    uint32_t v;
    *out = -1;
    if (mms_gguf_find_key(g, key) < 0) return MMS_OK;
    if (mms_gguf_get_u32(g, key, &v) != MMS_OK)
        return mms__error_context(MMS_ERR_FORMAT, "mms_vocab_load: %s: key %s: %s", mms__vocab_where(g), key, mms_last_error());
    if (v >= (uint32_t)n)
        return mms_set_error(MMS_ERR_FORMAT, "mms_vocab_load: %s: key %s: id %u out of range (%d tokens)", mms__vocab_where(g), key,
                             v, (int)n);
    *out = (int32_t)v;
    return MMS_OK;
}

/* The decoded bytes of token id into out (room for its text length): byte-level characters
   when all of them are, else the text as it is (as HF's ByteLevel decoder falls back to). */
static size_t mms__vocab_decode_token(const struct mms_vocab *v, int32_t id, const int16_t *rev, unsigned char *out) {
    size_t len, i = 0, o = 0;
    const unsigned char *s = (const unsigned char *)mms__vocab_text(v, id, &len);
    if (v->type[id] == MMS_TOKEN_UNUSED) return 0;
    if (v->type[id] == MMS_TOKEN_BYTE && len == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>') {
        char hex[3];
        char *end;
        unsigned long b;
        hex[0] = (char)s[3]; hex[1] = (char)s[4]; hex[2] = '\0';
        b = strtoul(hex, &end, 16);
        if (end == hex + 2) { out[0] = (unsigned char)b; return 1; }
    }
    while (i < len) {
        uint32_t cp = 0;
        bool inc;
        int u = mms__tok_utf8_unit(s + i, len - i, &cp, &inc), b = u > 0 && cp < 256 + 68 ? rev[cp] : -1;
        if (b < 0) { memcpy(out, s, len); return len; }
        out[o++] = (unsigned char)b;
        i += (size_t)u;
    }
    return o;
}

static enum mms_status mms__vocab_oom(void) { return mms_set_error(MMS_ERR_OOM, "mms_vocab_load: out of memory"); }

static int mms__vocab_special_cmp(const struct mms_vocab *v, int32_t a, int32_t b) {
    size_t la, lb;
    const unsigned char *ta = (const unsigned char *)mms__vocab_text(v, a, &la), *tb = (const unsigned char *)mms__vocab_text(v, b, &lb);
    if (ta[0] != tb[0]) return ta[0] < tb[0] ? -1 : 1;
    if (la != lb) return la > lb ? -1 : 1;
    return a < b ? -1 : a > b;
}

static enum mms_status mms__vocab_build(struct mms_vocab *v, const struct mms_gguf *g) {
    const char *where = mms__vocab_where(g), *model, *s;
    const char *K_TOK = "tokenizer.ggml.tokens", *K_TYPE = "tokenizer.ggml.token_type", *K_MERGE = "tokenizer.ggml.merges";
    size_t len, total = 0, i, cap;
    int64_t n64, nt, nm, k;
    int32_t n, *types32 = NULL, id;
    char q[96];
    unsigned char *tmp;
    enum mms_status st;

    if (mms_gguf_find_key(g, "tokenizer.ggml.model") < 0)
        return mms_set_error(MMS_ERR_FORMAT, "mms_vocab_load: %s: key tokenizer.ggml.model is missing (no tokenizer in the file)", where);
    if (mms_gguf_get_str(g, "tokenizer.ggml.model", &model, &len) != MMS_OK)
        return mms__error_context(MMS_ERR_FORMAT, "mms_vocab_load: %s: key tokenizer.ggml.model: %s", where, mms_last_error());
    if (len != 4 || memcmp(model, "gpt2", 4) != 0)
        return mms_set_error(MMS_ERR_FORMAT, "mms_vocab_load: %s: key tokenizer.ggml.model is %s, expected \"gpt2\" (byte-level BPE)",
                             where, mms__vocab_quote(model, len, q, sizeof q));

    if ((st = mms__vocab_need_array(g, K_TOK, MMS_GGUF_TYPE_STRING, &n64)) != MMS_OK) return st;
    if (n64 < 256 || n64 > INT32_MAX / 2)
        return mms_set_error(MMS_ERR_FORMAT, "mms_vocab_load: %s: key %s has %lld tokens, expected 256 to %d", where, K_TOK,
                             (long long)n64, INT32_MAX / 2);
    n = (int32_t)n64;
    v->n_tokens = n;
    if ((st = mms__vocab_need_array(g, K_TYPE, MMS_GGUF_TYPE_NONE, &nt)) != MMS_OK) return st;
    if (nt != n64)
        return mms_set_error(MMS_ERR_FORMAT, "mms_vocab_load: %s: key %s has %lld entries, %s has %lld", where, K_TYPE, (long long)nt,
                             K_TOK, (long long)n64);
    if ((st = mms__vocab_need_array(g, K_MERGE, MMS_GGUF_TYPE_STRING, &nm)) != MMS_OK) return st;

    /* tokens and types */
    v->text_off = (size_t *)mms__vocab_alloc((size_t)n + 1, sizeof *v->text_off);
    v->piece_off = (size_t *)mms__vocab_alloc((size_t)n + 1, sizeof *v->piece_off);
    v->type = (uint8_t *)mms__vocab_alloc((size_t)n, 1);
    types32 = (int32_t *)mms__vocab_alloc((size_t)n, sizeof *types32);
    if (!v->text_off || !v->piece_off || !v->type || !types32) { MMS_FREE(types32); return mms__vocab_oom(); }
    if (mms_gguf_get_arr_i32(g, K_TYPE, types32, n, NULL) != MMS_OK) {
        MMS_FREE(types32);
        return mms__error_context(MMS_ERR_FORMAT, "mms_vocab_load: %s: key %s: %s", where, K_TYPE, mms_last_error());
    }
    for (id = 0; id < n; id++) {
        if (types32[id] < MMS_TOKEN_NORMAL || types32[id] > MMS_TOKEN_BYTE) {
            st = mms_set_error(MMS_ERR_FORMAT, "mms_vocab_load: %s: key %s[%d] is %d, expected 1 to 6", where, K_TYPE, (int)id,
                               (int)types32[id]);
            MMS_FREE(types32);
            return st;
        }
        v->type[id] = (uint8_t)types32[id];
    }
    MMS_FREE(types32);
    for (id = 0; id < n; id++) {
        if (mms_gguf_get_arr_str(g, K_TOK, id, &s, &len) != MMS_OK)
            return mms__error_context(MMS_ERR_FORMAT, "mms_vocab_load: %s: key %s[%d]: %s", where, K_TOK, (int)id, mms_last_error());
        if (len == 0 && v->type[id] != MMS_TOKEN_UNUSED)
            return mms_set_error(MMS_ERR_FORMAT, "mms_vocab_load: %s: key %s[%d] is an empty string", where, K_TOK, (int)id);
        if (memchr(s, '\0', len))
            return mms_set_error(MMS_ERR_FORMAT, "mms_vocab_load: %s: key %s[%d] contains a NUL byte", where, K_TOK, (int)id);
        if (len > ((size_t)-1 >> 2) - total) return mms__vocab_oom();
        v->text_off[id] = total;
        total += len + 1;
    }
    v->text_off[n] = total;
    v->text = (char *)mms__vocab_alloc(total, 1);
    v->piece = (unsigned char *)mms__vocab_alloc(total, 1);
    for (cap = 1; cap < (size_t)n * 2; cap <<= 1) {}
    v->map = (int32_t *)mms__vocab_alloc(cap, sizeof *v->map);
    if (!v->text || !v->piece || !v->map) return mms__vocab_oom();
    v->map_mask = cap - 1;
    memset(v->map, 0xFF, cap * sizeof *v->map);
    for (id = 0; id < n; id++) {
        mms_gguf_get_arr_str(g, K_TOK, id, &s, &len);
        memcpy(v->text + v->text_off[id], s, len);
        v->text[v->text_off[id] + len] = '\0';
        if (len > 0 && mms__vocab_lookup(v, s, len) < 0) {   /* a repeated text keeps its first id */
            for (i = mms__tok_hash(s, len) & v->map_mask; v->map[i] >= 0; i = (i + 1) & v->map_mask) {}
            v->map[i] = id;
        }
    }
    /* the byte-level alphabet, both ways */
    {
        int16_t rev[256 + 68];
        for (i = 0; i < 256 + 68; i++) rev[i] = -1;
        for (i = 0; i < 256; i++) {
            uint32_t c = mms__tok_byte_to_cp((int)i);
            rev[c] = (int16_t)i;
            v->byte_utf8_len[i] = (uint8_t)mms__tok_put_utf8(c, v->byte_utf8[i]);
        }
        for (id = 0, total = 0; id < n; id++) {   /* decoded pieces */
            size_t plen = mms__vocab_decode_token(v, id, rev, v->piece + total);
            v->piece_off[id] = total;
            total += plen;
            if (plen > v->max_piece) v->max_piece = plen;
        }
    }
    v->piece_off[n] = total;

    /* bytes */
    for (i = 0; i < 256; i++) {
        v->byte_id[i] = mms__vocab_lookup(v, v->byte_utf8[i], v->byte_utf8_len[i]);
        if (v->byte_id[i] < 0)
            return mms_set_error(MMS_ERR_FORMAT, "mms_vocab_load: %s: key %s has no token for byte 0x%02x (%s)", where, K_TOK, (unsigned)i,
                                 mms__vocab_quote((const char *)v->byte_utf8[i], v->byte_utf8_len[i], q, sizeof q));
    }

    /* merges */
    for (cap = 1; cap < (size_t)nm * 2 + 2; cap <<= 1) {}
    v->pair_key = (uint64_t *)mms__vocab_alloc(cap, sizeof *v->pair_key);
    v->pair_rank = (uint32_t *)mms__vocab_alloc(cap, sizeof *v->pair_rank);
    v->pair_id = (int32_t *)mms__vocab_alloc(cap, sizeof *v->pair_id);
    tmp = (unsigned char *)mms__vocab_alloc(v->text_off[n] + 1, 1);
    if (!v->pair_key || !v->pair_rank || !v->pair_id || !tmp) { MMS_FREE(tmp); return mms__vocab_oom(); }
    memset(v->pair_key, 0, cap * sizeof *v->pair_key);
    v->pair_mask = cap - 1;
    for (k = 0; k < nm; k++) {
        const char *sp;
        int32_t a, b, r;
        size_t slot;
        if (mms_gguf_get_arr_str(g, K_MERGE, k, &s, &len) != MMS_OK) {
            MMS_FREE(tmp);
            return mms__error_context(MMS_ERR_FORMAT, "mms_vocab_load: %s: key %s[%lld]: %s", where, K_MERGE, (long long)k, mms_last_error());
        }
        sp = len > 2 ? (const char *)memchr(s + 1, ' ', len - 2) : NULL;   /* neither half may be empty */
        a = sp ? mms__vocab_lookup(v, s, (size_t)(sp - s)) : -1;
        b = sp ? mms__vocab_lookup(v, sp + 1, len - (size_t)(sp - s) - 1) : -1;
        r = -1;
        if (a >= 0 && b >= 0) {
            memcpy(tmp, s, (size_t)(sp - s));
            memcpy(tmp + (sp - s), sp + 1, len - (size_t)(sp - s) - 1);
            r = mms__vocab_lookup(v, tmp, len - 1);
        }
        if (r < 0) {
            st = mms_set_error(MMS_ERR_FORMAT, "mms_vocab_load: %s: key %s[%lld] %s: %s", where, K_MERGE, (long long)k,
                               mms__vocab_quote(s, len, q, sizeof q),
                               !sp ? "not two tokens separated by a space"
                               : a < 0 || b < 0 ? "names a token that is not in tokenizer.ggml.tokens"
                                                : "makes a token that is not in tokenizer.ggml.tokens");
            MMS_FREE(tmp);
            return st;
        }
        slot = mms__vocab_pair_slot(v, mms__vocab_pair_key(a, b));
        v->pair_key[slot] = mms__vocab_pair_key(a, b);   /* a repeated pair takes the later rank, as HF's map does */
        v->pair_rank[slot] = (uint32_t)k;
        v->pair_id[slot] = r;
    }
    MMS_FREE(tmp);

    /* special tokens, sorted by first byte and then longest first, for the longest match */
    {
        int32_t ns = 0, j, c;
        for (id = 0; id < n; id++) ns += mms__vocab_is_special(v, id) && v->text_off[id + 1] - v->text_off[id] > 1;
        v->special = (int32_t *)mms__vocab_alloc((size_t)ns, sizeof *v->special);
        if (!v->special) return mms__vocab_oom();
        for (id = 0, ns = 0; id < n; id++)
            if (mms__vocab_is_special(v, id) && v->text_off[id + 1] - v->text_off[id] > 1) {
                for (j = ns++; j > 0 && mms__vocab_special_cmp(v, v->special[j - 1], id) > 0; j--) v->special[j] = v->special[j - 1];
                v->special[j] = id;
            }
        for (c = 0, j = 0; c <= 256; c++) {
            while (j < ns && (unsigned char)v->text[v->text_off[v->special[j]]] < c) j++;
            v->special_start[c] = j;
        }
    }

    /* bos, eos and the end-of-generation ids */
    if ((st = mms__vocab_opt_id(g, "tokenizer.ggml.bos_token_id", n, &v->bos)) != MMS_OK) return st;
    if ((st = mms__vocab_opt_id(g, "tokenizer.ggml.eos_token_id", n, &v->eos)) != MMS_OK) return st;
    {
        const char *K_EOS = "tokenizer.ggml.eos_token_ids", *named[3] = { "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>" };
        int64_t ne = 0, e;
        int32_t *ids;
        if (mms_gguf_find_key(g, K_EOS) >= 0 && (st = mms__vocab_need_array(g, K_EOS, MMS_GGUF_TYPE_NONE, &ne)) != MMS_OK) return st;
        if (ne > n) return mms_set_error(MMS_ERR_FORMAT, "mms_vocab_load: %s: key %s has %lld ids", where, K_EOS, (long long)ne);
        v->eog = (int32_t *)mms__vocab_alloc((size_t)ne + 4, sizeof *v->eog);
        if (!v->eog) return mms__vocab_oom();
        ids = v->eog;
        if (ne > 0 && mms_gguf_get_arr_i32(g, K_EOS, ids, ne, NULL) != MMS_OK)
            return mms__error_context(MMS_ERR_FORMAT, "mms_vocab_load: %s: key %s: %s", where, K_EOS, mms_last_error());
        for (e = 0; e < ne; e++)
            if (ids[e] < 0 || ids[e] >= n)
                return mms_set_error(MMS_ERR_FORMAT, "mms_vocab_load: %s: key %s[%lld]: id %d out of range (%d tokens)", where, K_EOS,
                                     (long long)e, (int)ids[e], (int)n);
        v->n_eog = (int)ne;
        if (v->eos >= 0) v->eog[v->n_eog++] = v->eos;
        for (e = 0; e < 3; e++) {
            int32_t t = mms__vocab_lookup(v, named[e], strlen(named[e]));
            if (t >= 0) v->eog[v->n_eog++] = t;
        }
    }
    return MMS_OK;
}

/* The Llama 3.2 Vision instruct template (tools/templates/llama-3.2-vision-instruct.jinja, the
   hub's tokenizer_config.json), which mms_chat_apply_template renders in C: known by its length
   and FNV-1a 64 hash, so a fine-tune's other template is noticed rather than silently replaced. */
#define MMS__CHAT_TEMPLATE_LEN  4909u
#define MMS__CHAT_TEMPLATE_HASH 0x75798016d5e7bb96ULL

/* tokenizer.chat_template, if the file has one (a string: anything else is malformed). */
static enum mms_status mms__vocab_chat_template(struct mms_vocab *v, const struct mms_gguf *g) {
    const char *s;
    size_t n;
    if (mms_gguf_find_key(g, "tokenizer.chat_template") < 0) return MMS_OK;
    if (mms_gguf_get_str(g, "tokenizer.chat_template", &s, &n) != MMS_OK)
        return mms__error_context(MMS_ERR_FORMAT, "mms_vocab_load: %s: %s", mms__vocab_where(g), mms_last_error());
    if (!(v->chat_template = (char *)MMS_MALLOC(n + 1))) return mms__vocab_oom();
    memcpy(v->chat_template, s, n);
    v->chat_template[n] = '\0';
    v->chat_template_builtin = n == MMS__CHAT_TEMPLATE_LEN && mms__fnv1a64(s, n, MMS__FNV1A64_START) == MMS__CHAT_TEMPLATE_HASH;
    return MMS_OK;
}

MMS_API struct mms_vocab *mms_vocab_load(const struct mms_gguf *gguf) {
    struct mms_vocab *v;
    if (!gguf) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_vocab_load: gguf is NULL"); return NULL; }
    v = (struct mms_vocab *)MMS_MALLOC(sizeof *v);
    if (!v) { mms__vocab_oom(); return NULL; }
    memset(v, 0, sizeof *v);
    mms__mutex_init(&v->trie_lock);
    v->bos = v->eos = -1;
    if (mms__vocab_build(v, gguf) != MMS_OK || mms__vocab_chat_template(v, gguf) != MMS_OK) { mms_vocab_free(v); return NULL; }
    return v;
}

MMS_API const char *mms_vocab_chat_template(const struct mms_vocab *v) { return v && v->chat_template ? v->chat_template : ""; }
MMS_API bool mms_vocab_chat_template_is_builtin(const struct mms_vocab *v) { return v && v->chat_template_builtin; }

/* Llama 3's pre-tokenizer rule, as tokenizer.json spells it: the only one mmsched implements. */
static const char mms__llama3_split[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* The id of a special token named by tokenizer_config.json (a string or {"content": ...}), or -1. */
static int64_t mms__vocab_hf_named(const struct mms_json *cfg, const char *key, char *const *tokens, int64_t n) {
    int64_t v = mms_json_get(cfg, 0, key), i;
    const char *s = mms_json_str(cfg, v, NULL);
    if (!s) s = mms_json_str(cfg, mms_json_get(cfg, v, "content"), NULL);
    for (i = 0; s && i < n; i++)
        if (tokens[i] && !strcmp(tokens[i], s)) return i;
    return -1;
}

/* A checkpoint folder's tokenizer: tokenizer.json (byte-level BPE: model.vocab, model.merges,
   added_tokens; Llama 3's pre-tokenizer), bos and eos from tokenizer_config.json, the eos ids of
   generation_config.json, written into w as the GGUF tokenizer keys (types: 1 normal, 3 special
   added, 4 other added, 5 an id hole); mms__vocab_load_hf loads them through the same checks. */
static enum mms_status mms__vocab_hf_kv(const char *dir, struct mms_gguf_writer *w) {
    char path[4096];
    struct mms_json *tj = NULL, *tc = NULL, *gc = NULL;
    enum mms_status st = MMS_ERR_FORMAT;
    char **tokens = NULL, **merges = NULL;
    int32_t *types = NULL;
    bool *owned = NULL;                       /* tokens[i] was made here (an id hole's name) */
    int64_t model, vocab, mlist, added, pre, n = 0, i, nm = 0;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if (!(tj = mms_json_parse_file(path))) goto done;
    model = mms_json_get(tj, 0, "model");
    vocab = mms_json_get(tj, model, "vocab");
    mlist = mms_json_get(tj, model, "merges");
    added = mms_json_get(tj, 0, "added_tokens");
    if (!mms_json_str(tj, mms_json_get(tj, model, "type"), NULL) || strcmp(mms_json_str(tj, mms_json_get(tj, model, "type"), NULL), "BPE") ||
        mms_json_type(tj, vocab) != MMS_JSON_OBJECT || mms_json_type(tj, mlist) != MMS_JSON_ARRAY) {
        mms_set_error(MMS_ERR_FORMAT, "mms_vocab_load: '%s': model must be a BPE with a vocab object and a merges list", path);
        goto done;
    }
    pre = mms_json_get(tj, 0, "pre_tokenizer");
    {   /* Llama 3's rule: a Split on its regex (then byte-level) */
        int64_t list = mms_json_get(tj, pre, "pretokenizers"), k;
        bool llama3 = false;
        for (k = 0; k < mms_json_len(tj, list); k++) {
            int64_t pt = mms_json_at(tj, list, k);
            const char *type = mms_json_str(tj, mms_json_get(tj, pt, "type"), NULL), *re = mms_json_str(tj, mms_json_get(tj, mms_json_get(tj, pt, "pattern"), "Regex"), NULL);
            if (type && !strcmp(type, "Split") && re && !strcmp(re, mms__llama3_split)) llama3 = true;
        }
        if (!llama3) {
            mms_set_error(MMS_ERR_UNSUPPORTED, "mms_vocab_load: '%s': pre_tokenizer is not Llama 3's (a Split on its regex), the only one mmsched implements", path);
            goto done;
        }
    }
    for (i = 0; i < mms_json_len(tj, vocab); i++) {
        int64_t id;
        if (!mms_json_int(tj, mms_json_at(tj, vocab, i), &id) || id < 0 || id >= INT32_MAX / 2) {
            mms_set_error(MMS_ERR_FORMAT, "mms_vocab_load: '%s': model.vocab[\"%.40s\"] is not a token id", path, mms_json_key(tj, vocab, i, NULL));
            goto done;
        }
        if (id + 1 > n) n = id + 1;
    }
    for (i = 0; i < mms_json_len(tj, added); i++) {
        int64_t id;
        if (!mms_json_int(tj, mms_json_get(tj, mms_json_at(tj, added, i), "id"), &id) || id < 0 || id >= INT32_MAX / 2 ||
            !mms_json_str(tj, mms_json_get(tj, mms_json_at(tj, added, i), "content"), NULL)) {
            mms_set_error(MMS_ERR_FORMAT, "mms_vocab_load: '%s': added_tokens[%lld] needs an id and a content", path, (long long)i);
            goto done;
        }
        if (id + 1 > n) n = id + 1;
    }
    tokens = (char **)MMS_MALLOC(sizeof *tokens * (size_t)(n + 1));
    types = (int32_t *)MMS_MALLOC(sizeof *types * (size_t)(n + 1));
    nm = mms_json_len(tj, mlist);
    merges = (char **)MMS_MALLOC(sizeof *merges * (size_t)(nm + 1));
    owned = (bool *)MMS_MALLOC(sizeof *owned * (size_t)(n + 1));
    if (!tokens || !types || !merges || !owned) { mms__vocab_oom(); goto done; }
    memset(tokens, 0, sizeof *tokens * (size_t)(n + 1));
    memset(owned, 0, sizeof *owned * (size_t)(n + 1));
    memset(merges, 0, sizeof *merges * (size_t)(nm + 1));
    for (i = 0; i < n; i++) types[i] = MMS_TOKEN_UNUSED;
    for (i = 0; i < mms_json_len(tj, vocab); i++) {
        int64_t id;
        mms_json_int(tj, mms_json_at(tj, vocab, i), &id);
        if (tokens[id]) { mms_set_error(MMS_ERR_FORMAT, "mms_vocab_load: '%s': id %lld is given to two tokens", path, (long long)id); goto done; }
        tokens[id] = (char *)mms_json_key(tj, vocab, i, NULL);
        types[id] = MMS_TOKEN_NORMAL;
    }
    for (i = 0; i < mms_json_len(tj, added); i++) {
        const int64_t a = mms_json_at(tj, added, i);
        int64_t id;
        mms_json_int(tj, mms_json_get(tj, a, "id"), &id);
        tokens[id] = (char *)mms_json_str(tj, mms_json_get(tj, a, "content"), NULL);
        types[id] = mms_json_type(tj, mms_json_get(tj, a, "special")) == MMS_JSON_TRUE ? MMS_TOKEN_CONTROL : MMS_TOKEN_USER_DEFINED;
    }
    for (i = 0; i < n; i++)
        if (!tokens[i]) {
            char hole[32];
            snprintf(hole, sizeof hole, "[PAD%lld]", (long long)i);
            if (!(tokens[i] = (char *)MMS_MALLOC(strlen(hole) + 1))) { mms__vocab_oom(); goto done; }
            memcpy(tokens[i], hole, strlen(hole) + 1);
            owned[i] = true;
        }
    for (i = 0; i < nm; i++) {   /* "a b" or ["a", "b"] */
        const int64_t e = mms_json_at(tj, mlist, i);
        const char *a = mms_json_str(tj, e, NULL), *b;
        if (!a) {
            a = mms_json_str(tj, mms_json_at(tj, e, 0), NULL);
            b = mms_json_str(tj, mms_json_at(tj, e, 1), NULL);
            if (!a || !b || mms_json_len(tj, e) != 2) { mms_set_error(MMS_ERR_FORMAT, "mms_vocab_load: '%s': model.merges[%lld] is not a pair of tokens", path, (long long)i); goto done; }
            if (!(merges[i] = (char *)MMS_MALLOC(strlen(a) + strlen(b) + 2))) { mms__vocab_oom(); goto done; }
            snprintf(merges[i], strlen(a) + strlen(b) + 2, "%s %s", a, b);
        } else {
            if (!(merges[i] = (char *)MMS_MALLOC(strlen(a) + 1))) { mms__vocab_oom(); goto done; }
            memcpy(merges[i], a, strlen(a) + 1);
        }
    }
    if (mms_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2") != MMS_OK ||
        mms_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tokens, n) != MMS_OK ||
        mms_gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", types, n) != MMS_OK ||
        mms_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)merges, nm) != MMS_OK)
        goto done;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    if (mms__file_exists(path)) {
        int64_t bos, eos;
        if (!(tc = mms_json_parse_file(path))) goto done;
        if ((bos = mms__vocab_hf_named(tc, "bos_token", tokens, n)) >= 0 && mms_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos) != MMS_OK) goto done;
        if ((eos = mms__vocab_hf_named(tc, "eos_token", tokens, n)) >= 0 && mms_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos) != MMS_OK) goto done;
        {   /* the chat template: a string, or a list of {name, template} of which "default" is the one */
            int64_t ct = mms_json_get(tc, 0, "chat_template"), k;
            const char *tmpl = mms_json_str(tc, ct, NULL);
            for (k = 0; !tmpl && mms_json_type(tc, ct) == MMS_JSON_ARRAY && k < mms_json_len(tc, ct); k++) {
                const char *name = mms_json_str(tc, mms_json_get(tc, mms_json_at(tc, ct, k), "name"), NULL);
                if (name && !strcmp(name, "default")) tmpl = mms_json_str(tc, mms_json_get(tc, mms_json_at(tc, ct, k), "template"), NULL);
            }
            if (tmpl && mms_gguf_writer_set_str(w, "tokenizer.chat_template", tmpl) != MMS_OK) goto done;
        }
    }
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    if (mms__file_exists(path)) {
        int64_t e, k, ne;
        int32_t ids[64];
        if (!(gc = mms_json_parse_file(path))) goto done;
        e = mms_json_get(gc, 0, "eos_token_id");
        ne = mms_json_type(gc, e) == MMS_JSON_ARRAY ? mms_json_len(gc, e) : e >= 0 ? 1 : 0;
        if (ne > 64) ne = 64;
        for (k = 0; k < ne; k++) {
            int64_t id;
            if (!mms_json_int(gc, mms_json_type(gc, e) == MMS_JSON_ARRAY ? mms_json_at(gc, e, k) : e, &id) || id < 0 || id >= n) {
                mms_set_error(MMS_ERR_FORMAT, "mms_vocab_load: '%s': eos_token_id must be token ids below %lld", path, (long long)n);
                goto done;
            }
            ids[k] = (int32_t)id;
        }
        if (ne > 0 && mms_gguf_writer_set_arr_i32(w, "tokenizer.ggml.eos_token_ids", ids, ne) != MMS_OK) goto done;
    }
    st = MMS_OK;
done:
    if (st != MMS_OK && mms_last_status() != MMS_OK) st = mms_last_status();
    for (i = 0; owned && i < n; i++)
        if (owned[i]) MMS_FREE(tokens[i]);
    for (i = 0; merges && i < nm; i++) MMS_FREE(merges[i]);
    MMS_FREE(tokens); MMS_FREE(types); MMS_FREE(merges); MMS_FREE(owned);
    mms_json_free(tj); mms_json_free(tc); mms_json_free(gc);
    return st;
}

static struct mms_vocab *mms__vocab_load_hf(const char *dir) {
    struct mms_gguf_writer *w = mms_gguf_writer_new();
    struct mms_gguf *g = NULL;
    struct mms_vocab *v = NULL;
    void *mem;
    size_t size;
    if (w && mms__vocab_hf_kv(dir, w) == MMS_OK && mms__gguf_writer_to_memory(w, &mem, &size) == MMS_OK && (g = mms__gguf_open_owned(mem, size)))
        v = mms_vocab_load(g);
    mms_gguf_close(g);
    mms_gguf_writer_free(w);
    return v;
}

MMS_API struct mms_vocab *mms_vocab_load_file(const char *path) {
    struct mms_gguf *g;
    struct mms_vocab *v;
    char probe[4096];
    if (!path) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_vocab_load_file: path is NULL"); return NULL; }
    if (!strncmp(path, MMS_OLLAMA_PREFIX, strlen(MMS_OLLAMA_PREFIX))) {   /* the model blob of Ollama's store holds it */
        struct mms_ollama_model *om = (struct mms_ollama_model *)MMS_MALLOC(sizeof *om);
        v = NULL;
        if (!om) mms_set_error(MMS_ERR_OOM, "mms_vocab_load_file: out of host memory");
        else if (mms_ollama_resolve(path, om) == MMS_OK) v = mms_vocab_load_file(om->model);
        MMS_FREE(om);
        return v;
    }
    if (strlen(path) + 16 < sizeof probe) {   /* a checkpoint folder */
        snprintf(probe, sizeof probe, "%s/tokenizer.json", path);
        if (mms__file_exists(probe)) return mms__vocab_load_hf(path);
    }
    if (!(g = mms_gguf_open(path))) return NULL;
    v = mms_vocab_load(g);
    mms_gguf_close(g);
    return v;
}

MMS_API int32_t mms_vocab_n_tokens(const struct mms_vocab *v) { return v ? v->n_tokens : 0; }
MMS_API int32_t mms_vocab_bos(const struct mms_vocab *v) { return v ? v->bos : -1; }
MMS_API int32_t mms_vocab_eos(const struct mms_vocab *v) { return v ? v->eos : -1; }

MMS_API bool mms_vocab_is_eog(const struct mms_vocab *v, int32_t id) {
    int i;
    if (!v || id < 0 || id >= v->n_tokens) return false;
    for (i = 0; i < v->n_eog; i++) if (v->eog[i] == id) return true;
    return false;
}

MMS_API enum mms_token_type mms_vocab_token_type(const struct mms_vocab *v, int32_t id) {
    if (!v || id < 0 || id >= v->n_tokens) return (enum mms_token_type)0;
    return (enum mms_token_type)v->type[id];
}

MMS_API int32_t mms_vocab_find(const struct mms_vocab *v, const char *text) {
    size_t n;
    if (!v || !text || !(n = strlen(text))) return -1;
    return mms__vocab_lookup(v, text, n);
}

MMS_API const char *mms_vocab_token_text(const struct mms_vocab *v, int32_t id) {
    size_t len;
    if (!v || id < 0 || id >= v->n_tokens) return NULL;
    return mms__vocab_text(v, id, &len);
}

/* -- tokenize -- */

struct mms__tok_out {      /* ids written up to cap, counted beyond */
    int32_t *ids;
    size_t   cap, n;
};

static void mms__tok_emit(struct mms__tok_out *o, int32_t id) {
    if (o->n < o->cap) o->ids[o->n] = id;
    o->n++;
}

struct mms__tok_work {     /* per-call scratch, sized for the whole text */
    uint32_t      *cp;     /* code points of a segment (U+FFFD for an invalid subpart) */
    uint8_t       *cls;
    size_t        *off;    /* byte offset of each code point, one more at the end */
    unsigned char *bl;     /* a piece in byte-level characters */
    int32_t       *sym_id; /* the merge symbols: id, neighbours */
    int32_t       *sym_prev, *sym_next;
    uint64_t      *heap;   /* (rank << 32) | position of the left symbol */
    size_t         n_heap;
};

/* The end of the piece that starts at code point i (< n): the first alternative of
   '(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
   \s*[\r\n]+|\s+(?!\S)|\s+' that matches there, with greedy quantifiers and backtracking. */
static size_t mms__tok_match(const uint32_t *cp, const uint8_t *cl, size_t i, size_t n) {
    uint32_t c = cp[i];
    size_t j, end;
#define MMS__TOK_NL(x) ((x) == '\r' || (x) == '\n')
    if (c == '\'' && i + 1 < n) {
        int a = mms__uni_contraction_letter(cp[i + 1]), b = i + 2 < n ? mms__uni_contraction_letter(cp[i + 2]) : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    }
    j = (cl[i] != MMS__UNI_LETTER && cl[i] != MMS__UNI_NUMBER && !MMS__TOK_NL(c)) ? i + 1 : i;
    if (j < n && cl[j] == MMS__UNI_LETTER) {          /* the optional prefix may only be dropped if cp[i] is a letter */
        while (j < n && cl[j] == MMS__UNI_LETTER) j++;
        return j;
    }
    if (cl[i] == MMS__UNI_NUMBER) {
        for (j = i + 1; j < n && j < i + 3 && cl[j] == MMS__UNI_NUMBER; j++) {}
        return j;
    }
    j = (c == ' ' && i + 1 < n && cl[i + 1] == MMS__UNI_OTHER) ? i + 1 : i;
    if (cl[j] == MMS__UNI_OTHER) {
        while (j < n && cl[j] == MMS__UNI_OTHER) j++;
        while (j < n && MMS__TOK_NL(cp[j])) j++;
        return j;
    }
    /* whitespace: the run, then \s*[\r\n]+ up to its last line break, \s+(?!\S), \s+ */
    for (end = i; end < n && cl[end] == MMS__UNI_SPACE; end++) {}
    for (j = end; j > i; j--) if (MMS__TOK_NL(cp[j - 1])) return j;
    if (end == n || end - i == 1) return end;
    return end - 1;
#undef MMS__TOK_NL
}

static void mms__tok_heap_push(struct mms__tok_work *w, uint64_t x) {
    size_t i = w->n_heap++;
    while (i > 0 && w->heap[(i - 1) / 2] > x) { w->heap[i] = w->heap[(i - 1) / 2]; i = (i - 1) / 2; }
    w->heap[i] = x;
}

static uint64_t mms__tok_heap_pop(struct mms__tok_work *w) {
    uint64_t top = w->heap[0], x = w->heap[--w->n_heap];
    size_t i = 0, n = w->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && w->heap[c + 1] < w->heap[c]) c++;
        if (w->heap[c] >= x) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n > 0) w->heap[i] = x;
    return top;
}

/* Queues the merge of symbol i with its right neighbour, if there is one. */
static void mms__tok_queue_pair(const struct mms_vocab *v, struct mms__tok_work *w, int32_t i) {
    int32_t r = w->sym_next[i];
    size_t slot;
    if (r < 0) return;
    slot = mms__vocab_pair_slot(v, mms__vocab_pair_key(w->sym_id[i], w->sym_id[r]));
    if (v->pair_key[slot] != 0) mms__tok_heap_push(w, (uint64_t)v->pair_rank[slot] << 32 | (uint32_t)i);
}

/* BPE of one piece of n bytes. */
static void mms__tok_bpe(const struct mms_vocab *v, struct mms__tok_work *w, const unsigned char *p, size_t n, struct mms__tok_out *o) {
    size_t i, bl = 0;
    int32_t id;
    if (n == 1) { mms__tok_emit(o, v->byte_id[p[0]]); return; }
    for (i = 0; i < n; i++) {
        memcpy(w->bl + bl, v->byte_utf8[p[i]], 2);
        bl += v->byte_utf8_len[p[i]];
    }
    id = mms__vocab_lookup(v, w->bl, bl);
    if (id >= 0 && v->type[id] == MMS_TOKEN_NORMAL) { mms__tok_emit(o, id); return; }
    w->n_heap = 0;
    for (i = 0; i < n; i++) {
        w->sym_id[i] = v->byte_id[p[i]];
        w->sym_prev[i] = (int32_t)i - 1;
        w->sym_next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    for (i = 0; i + 1 < n; i++) mms__tok_queue_pair(v, w, (int32_t)i);
    while (w->n_heap > 0) {
        uint64_t top = mms__tok_heap_pop(w);
        int32_t l = (int32_t)(uint32_t)top, r = w->sym_next[l];
        size_t slot;
        if (w->sym_id[l] < 0 || r < 0) continue;   /* merged away, or nothing on its right any more */
        slot = mms__vocab_pair_slot(v, mms__vocab_pair_key(w->sym_id[l], w->sym_id[r]));
        if (v->pair_key[slot] == 0 || v->pair_rank[slot] != (uint32_t)(top >> 32)) continue;   /* stale */
        w->sym_id[l] = v->pair_id[slot];
        w->sym_id[r] = -1;
        w->sym_next[l] = w->sym_next[r];
        if (w->sym_next[r] >= 0) w->sym_prev[w->sym_next[r]] = l;
        if (w->sym_prev[l] >= 0) mms__tok_queue_pair(v, w, w->sym_prev[l]);
        mms__tok_queue_pair(v, w, l);
    }
    for (i = 0; i < n; i = (size_t)w->sym_next[i]) {
        mms__tok_emit(o, w->sym_id[i]);
        if (w->sym_next[i] < 0) break;
    }
}

/* The code points of s[0..len) with their classes and byte offsets (off[n] = len); returns n. */
static size_t mms__tok_decode_cps(const unsigned char *s, size_t len, uint32_t *cps, uint8_t *cls, size_t *off) {
    size_t pos = 0, n = 0;
    while (pos < len) {
        uint32_t cp = 0xFFFD;
        bool inc;
        int u = mms__tok_utf8_unit(s + pos, len - pos, &cp, &inc);
        if (u < 0) { u = -u; cp = 0xFFFD; }
        cps[n] = cp;
        cls[n] = (uint8_t)mms__uni_class(cp);
        off[n++] = pos;
        pos += (size_t)u;
    }
    off[n] = len;
    return n;
}

/* Pre-tokenizes and merges one segment of text without special tokens. */
static void mms__tok_segment(const struct mms_vocab *v, struct mms__tok_work *w, const unsigned char *s, size_t len,
                             struct mms__tok_out *o) {
    size_t n = mms__tok_decode_cps(s, len, w->cp, w->cls, w->off), i;
    for (i = 0; i < n;) {
        size_t j = mms__tok_match(w->cp, w->cls, i, n);
        mms__tok_bpe(v, w, s + w->off[i], w->off[j] - w->off[i], o);
        i = j;
    }
}

/* The longest special token at s[0..n), or -1. */
static int32_t mms__tok_special_at(const struct mms_vocab *v, const unsigned char *s, size_t n) {
    int32_t k;
    for (k = v->special_start[s[0]]; k < v->special_start[s[0] + 1]; k++) {
        size_t len;
        const char *t = mms__vocab_text(v, v->special[k], &len);
        if (len <= n && memcmp(t, s, len) == 0) return v->special[k];
    }
    return -1;
}

MMS_API int mms_tokenize(const struct mms_vocab *vocab, const char *text, size_t len, int32_t *out, int cap, bool add_bos,
                         bool parse_special) {
    const unsigned char *s = (const unsigned char *)text;
    struct mms__tok_out o;
    struct mms__tok_work w;
    size_t start = 0, i;
    if (!vocab || (!text && len > 0) || (!out && cap > 0) || cap < 0)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_tokenize: %s", !vocab ? "vocab is NULL" : (!text && len > 0) ? "text is NULL"
                                                                    : cap < 0 ? "negative cap" : "out is NULL with a non-zero cap");
    if (add_bos && vocab->bos < 0) return mms_set_error(MMS_ERR_STATE, "mms_tokenize: add_bos, but the vocabulary has no bos token");
    if (len > (size_t)INT32_MAX) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_tokenize: text of %zu bytes is too long", len);
    o.ids = out;
    o.cap = (size_t)cap;
    o.n = 0;
    if (add_bos && !(parse_special && len > 0 && mms__tok_special_at(vocab, s, len) == vocab->bos)) mms__tok_emit(&o, vocab->bos);
    memset(&w, 0, sizeof w);
    w.cp = (uint32_t *)mms__vocab_alloc(len + 1, sizeof *w.cp);
    w.cls = (uint8_t *)mms__vocab_alloc(len + 1, 1);
    w.off = (size_t *)mms__vocab_alloc(len + 1, sizeof *w.off);
    w.bl = (unsigned char *)mms__vocab_alloc(len + 1, 2);
    w.sym_id = (int32_t *)mms__vocab_alloc(len + 1, sizeof *w.sym_id);
    w.sym_prev = (int32_t *)mms__vocab_alloc(len + 1, sizeof *w.sym_prev);
    w.sym_next = (int32_t *)mms__vocab_alloc(len + 1, sizeof *w.sym_next);
    w.heap = (uint64_t *)mms__vocab_alloc(len * 3 + 1, sizeof *w.heap);   /* each merge queues at most 2 */
    if (w.cp && w.cls && w.off && w.bl && w.sym_id && w.sym_prev && w.sym_next && w.heap) {
        for (i = 0; i < len; i++) {
            int32_t sp = parse_special && vocab->special_start[s[i]] < vocab->special_start[s[i] + 1]
                       ? mms__tok_special_at(vocab, s + i, len - i) : -1;
            if (sp < 0) continue;
            mms__tok_segment(vocab, &w, s + start, i - start, &o);
            mms__tok_emit(&o, sp);
            i += vocab->text_off[sp + 1] - vocab->text_off[sp] - 2;   /* the loop adds the last one */
            start = i + 1;
        }
        mms__tok_segment(vocab, &w, s + start, len - start, &o);
    }
    MMS_FREE(w.cp); MMS_FREE(w.cls); MMS_FREE(w.off); MMS_FREE(w.bl);
    MMS_FREE(w.sym_id); MMS_FREE(w.sym_prev); MMS_FREE(w.sym_next); MMS_FREE(w.heap);
    if (!w.cp || !w.cls || !w.off || !w.bl || !w.sym_id || !w.sym_prev || !w.sym_next || !w.heap)
        return mms_set_error(MMS_ERR_OOM, "mms_tokenize: out of memory for %zu bytes of text", len);
    if (o.n > (size_t)INT_MAX) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_tokenize: more than INT_MAX tokens");
    return (int)o.n;
}

/* -- detokenize -- */

struct mms__tok_text {     /* bytes written up to cap, counted beyond */
    char  *buf;
    size_t cap, n;
};

static void mms__tok_put(struct mms__tok_text *t, const void *p, size_t n) {
    if (t->n < t->cap) memcpy(t->buf + t->n, p, t->cap - t->n < n ? t->cap - t->n : n);
    t->n += n;
}

/* The bytes token id stands for, given render_special; NULL for a bad id. */
static const unsigned char *mms__tok_piece(const struct mms_vocab *v, int32_t id, bool render_special, size_t *len) {
    if (!v || id < 0 || id >= v->n_tokens) return NULL;
    *len = v->piece_off[id + 1] - v->piece_off[id];
    if (!render_special && (v->type[id] == MMS_TOKEN_CONTROL || v->type[id] == MMS_TOKEN_UNKNOWN)) *len = 0;
    return v->piece + v->piece_off[id];
}

/* Decodes s[0..n) after the pending bytes of d into t: whole characters, U+FFFD for each invalid
   subpart; a valid prefix cut by the end stays pending (final: becomes U+FFFD). */
static void mms__tok_decode(struct mms_detokenizer *d, const unsigned char *s, size_t n, bool final, struct mms__tok_text *t) {
    static const unsigned char fffd[3] = { 0xEF, 0xBF, 0xBD };
    unsigned char tmp[8];
    size_t tn = (size_t)d->n_pending, p = 0, q;
    uint32_t cp;
    bool inc;
    int u;
    /* first the characters that start in the pending bytes */
    memcpy(tmp, d->pending, tn);
    if (n > 0) memcpy(tmp + tn, s, n < 4 ? n : 4);
    while (p < (size_t)d->n_pending) {
        size_t avail = tn + (n < 4 ? n : 4) - p;
        u = mms__tok_utf8_unit(tmp + p, avail, &cp, &inc);
        if (inc && !final) {   /* all of s is in tmp: keep the lot pending */
            memmove(d->pending, tmp + p, avail);
            d->n_pending = (int)avail;
            return;
        }
        if (u > 0) mms__tok_put(t, tmp + p, (size_t)u); else { mms__tok_put(t, fffd, 3); u = -u; }
        p += (size_t)u;
    }
    d->n_pending = 0;
    for (q = p - tn; q < n;) {
        u = mms__tok_utf8_unit(s + q, n - q, &cp, &inc);
        if (inc && !final) {
            memcpy(d->pending, s + q, n - q);
            d->n_pending = (int)(n - q);
            return;
        }
        if (u > 0) mms__tok_put(t, s + q, (size_t)u); else { mms__tok_put(t, fffd, 3); u = -u; }
        q += (size_t)u;
    }
}

MMS_API int mms_token_to_piece(const struct mms_vocab *vocab, int32_t id, char *buf, int cap, bool render_special) {
    size_t len = 0;
    const unsigned char *p = mms__tok_piece(vocab, id, render_special, &len);
    if (!p) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_token_to_piece: %s", vocab ? "token id out of range" : "vocab is NULL");
    if (cap < 0 || (!buf && cap > 0)) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_token_to_piece: bad buffer (cap %d)", cap);
    if (cap > 0 && len > 0) memcpy(buf, p, (size_t)cap < len ? (size_t)cap : len);
    return (int)len;
}

MMS_API int mms_detokenize(const struct mms_vocab *vocab, const int32_t *ids, int n, char *buf, int cap, bool render_special) {
    struct mms_detokenizer d;
    struct mms__tok_text t;
    int i;
    if (!vocab || (!ids && n > 0) || n < 0 || cap < 0 || (!buf && cap > 0))
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_detokenize: %s", !vocab ? "vocab is NULL" : (!ids && n > 0) ? "ids is NULL"
                                                                      : n < 0 ? "negative n" : "bad buffer");
    memset(&d, 0, sizeof d);
    t.buf = buf;
    t.cap = (size_t)cap;
    t.n = 0;
    for (i = 0; i < n; i++) {
        size_t len = 0;
        const unsigned char *p = mms__tok_piece(vocab, ids[i], render_special, &len);
        if (!p) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_detokenize: ids[%d] = %d is out of range", i, (int)ids[i]);
        mms__tok_decode(&d, p, len, false, &t);
    }
    mms__tok_decode(&d, NULL, 0, true, &t);
    if (t.n > (size_t)INT_MAX - 1) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_detokenize: the text is longer than INT_MAX");
    if (t.n < t.cap) buf[t.n] = '\0';
    return (int)t.n;
}

MMS_API int mms_detokenizer_push(const struct mms_vocab *vocab, struct mms_detokenizer *d, int32_t id, char *buf, int cap,
                                 bool render_special) {
    struct mms_detokenizer next;
    struct mms__tok_text t;
    size_t len = 0;
    const unsigned char *p;
    if (!vocab || !d || !buf || cap < 1 || d->n_pending < 0 || d->n_pending > 3)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_detokenizer_push: %s", !vocab ? "vocab is NULL" : !d ? "d is NULL"
                                                                            : (!buf || cap < 1) ? "no room for the NUL" : "corrupt state");
    if (!(p = mms__tok_piece(vocab, id, render_special, &len)))
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_detokenizer_push: token id %d out of range", (int)id);
    next = *d;
    t.buf = buf;
    t.cap = (size_t)cap;
    t.n = 0;
    mms__tok_decode(&next, p, len, false, &t);
    if (t.n >= t.cap)   /* the state stays as it was: the caller may retry with more room */
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_detokenizer_push: token %d needs %zu bytes and the NUL, cap is %d", (int)id, t.n, cap);
    buf[t.n] = '\0';
    *d = next;
    return (int)t.n;
}

MMS_API int mms_detokenizer_flush(struct mms_detokenizer *d, char *buf, int cap) {
    struct mms_detokenizer next;
    struct mms__tok_text t;
    if (!d || !buf || cap < 1 || d->n_pending < 0 || d->n_pending > 3)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_detokenizer_flush: %s", !d ? "d is NULL" : (!buf || cap < 1) ? "no room for the NUL"
                                                                                                    : "corrupt state");
    t.buf = buf;
    t.cap = (size_t)cap;
    t.n = 0;
    next = *d;
    mms__tok_decode(&next, NULL, 0, true, &t);
    if (t.n >= t.cap) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_detokenizer_flush: needs %zu bytes and the NUL, cap is %d", t.n, cap);
    buf[t.n] = '\0';
    *d = next;
    return (int)t.n;
}

/* -- the vocabulary by bytes ---------------------------------------------------------------------
   The constraint matcher (constrain.c) walks every token's bytes at once, as a trie. The trie
   depends on the vocabulary only, so it is built once, on first use, and shared read-only by every
   constraint and thread after: a constraint then costs its grammar's states, not the vocabulary. */

#define MMS__TEXT_MAX_LEN 254   /* text tokens of more characters than this are not listed (the matcher walks them) */
#define MMS__TEXT_NONE 255

/* The kinds of free text the matcher's shortcut knows (constrain.c): plain bytes only, or plain
   bytes and whole UTF-8 characters beyond ASCII (a JSON string's unescaped characters). */
enum { MMS__TEXT_PLAIN, MMS__TEXT_UTF8, MMS__TEXT_KINDS };

#define MMS__SUBTREE_MIN 64   /* listed tokens under a node for the matcher's shortcut to be tried there */

struct mms__trie_node {
    int32_t       first_child, next_sibling, first_token;   /* tokens ending here: first_token, then token_next */
    unsigned char byte;
    unsigned char shortcut;   /* bit k: the path is whole characters of kind k, with MMS__SUBTREE_MIN listed tokens under it */
};

/* The tokens made of whole characters of one kind of text ("listed"), by their count of characters:
   those of at most L characters are by_len[0 .. len_end[L]). Per trie node, pos: which character
   of the text its byte belongs to (1 the first), MMS__TEXT_NONE where the path from the root leaves
   the text; most: the most characters of a token under it (itself included) where every token
   under it is listed, else MMS__TEXT_NONE. A token that ends inside a character is not listed.
   The listed tokens again in trie order (nodes are numbered in preorder, so a subtree is the nodes
   ch .. end[ch] - 1): order[first[ch] .. first[end[ch]]) are those under ch, order_len their counts
   of characters. first_none, next_none: a node's children whose most is MMS__TEXT_NONE, in
   sibling order (what a walk that skips every listed subtree visits), -1 ended. */
struct mms__text_tokens {
    int32_t       *by_len;
    int32_t        len_end[MMS__TEXT_MAX_LEN + 1];
    int            max_len;   /* the most characters of a listed token */
    uint32_t      *all;       /* the listed tokens as a mask */
    uint32_t       starts[8]; /* the bytes a character of the kind begins with, as a class */
    unsigned char *pos, *most;
    int32_t       *order, *first, *first_none, *next_none;
    unsigned char *order_len;
};

struct mms__token_trie {
    struct mms__trie_node  *node;      /* node 0 is the root (no bytes) */
    int32_t                 n_node, cap_node;
    int32_t                *token_next;   /* per token id: the next token ending at the same node, or -1 */
    int32_t                *end;          /* per node: the first node past its subtree (preorder) */
    int32_t                *eog;          /* the end tokens, kept out of the trie: they end the output */
    int                     n_eog;
    int32_t                 n_vocab;
    struct mms__text_tokens text[MMS__TEXT_KINDS];
    uint32_t                plain_bytes[8];   /* the plain bytes (mms__token_plain) as a class (a bit per byte) */
};

/* Is a byte plain text: printable ASCII or DEL, but not '"' or '\\' (what a JSON string holds unescaped)? */
static bool mms__token_plain(unsigned char b) { return b >= 0x20 && b <= 0x7F && b != '"' && b != '\\'; }

/* A decoder of one kind of text, byte by byte: the state after byte b from state (0: between
   characters; else the continuation bytes left << 4 | the range the next one must lie in, as
   mms__utf8_lead gives it), or -1 where b cannot come next. */
static int mms__text_step(int kind, int state, unsigned char b) {
    if (state == 0) {
        int range, need;
        if (mms__token_plain(b)) return 0;
        if (kind == MMS__TEXT_PLAIN || b < 0x80) return -1;
        need = mms__utf8_lead(b, &range);
        return need < 0 ? -1 : need << 4 | range;
    }
    if (b < mms__utf8_lo[state & 15] || b > mms__utf8_hi[state & 15]) return -1;
    return ((state >> 4) - 1) << 4;
}

static void mms__token_trie_free(struct mms__token_trie *t) {
    int k;
    if (!t) return;
    MMS_FREE(t->node);
    MMS_FREE(t->token_next);
    MMS_FREE(t->end);
    MMS_FREE(t->eog);
    for (k = 0; k < MMS__TEXT_KINDS; k++) {
        MMS_FREE(t->text[k].by_len);
        MMS_FREE(t->text[k].all);
        MMS_FREE(t->text[k].pos);
        MMS_FREE(t->text[k].most);
        MMS_FREE(t->text[k].order);
        MMS_FREE(t->text[k].first);
        MMS_FREE(t->text[k].first_none);
        MMS_FREE(t->text[k].next_none);
        MMS_FREE(t->text[k].order_len);
    }
    MMS_FREE(t);
}

struct mms__token_bytes {
    const unsigned char *bytes;
    size_t               len;
    int32_t              id;
};

static int mms__token_bytes_cmp(const void *a, const void *b) {
    const struct mms__token_bytes *x = (const struct mms__token_bytes *)a, *y = (const struct mms__token_bytes *)b;
    const size_t n = x->len < y->len ? x->len : y->len;
    const int r = memcmp(x->bytes, y->bytes, n);
    return r ? r : x->len != y->len ? (x->len < y->len ? -1 : 1) : (x->id < y->id ? -1 : x->id > y->id);
}

/* Inserts a token's bytes; tokens come sorted by bytes, so each node's newest child is the only candidate. */
static bool mms__token_trie_add(struct mms__token_trie *t, const struct mms__token_bytes *tb) {
    int32_t node = 0;
    size_t i;
    for (i = 0; i < tb->len; i++) {
        int32_t ch = t->node[node].first_child;
        if (ch >= 0 && t->node[ch].byte != tb->bytes[i]) ch = -1;
        if (ch < 0) {
            if (t->n_node == t->cap_node) {
                struct mms__trie_node *p = (struct mms__trie_node *)MMS_REALLOC(t->node, sizeof *p * (size_t)t->cap_node * 2);
                if (!p) return false;
                t->node = p;
                t->cap_node *= 2;
            }
            ch = t->n_node++;
            t->node[ch].first_child = t->node[ch].first_token = -1;
            t->node[ch].byte = tb->bytes[i];
            t->node[ch].shortcut = 0;
            t->node[ch].next_sibling = t->node[node].first_child;
            t->node[node].first_child = ch;
        }
        node = ch;
    }
    t->token_next[tb->id] = t->node[node].first_token;
    t->node[node].first_token = tb->id;
    return true;
}

/* The summaries of one kind of text (see struct mms__text_tokens). A child is numbered after its
   parent, so one pass down the numbers sees every parent before its children, and one pass up
   every child before its parent. */
static bool mms__token_trie_text(struct mms__token_trie *t, int kind) {
    struct mms__text_tokens *x = &t->text[kind];
    unsigned char *state = (unsigned char *)mms__vocab_alloc((size_t)t->n_node, 1);   /* the decoder's, 0xFF off the text */
    int32_t i, k, tok, ch, count[MMS__TEXT_MAX_LEN + 1];
    x->by_len = (int32_t *)mms__vocab_alloc((size_t)t->n_vocab + 1, sizeof(int32_t));
    x->all = (uint32_t *)mms__vocab_alloc((size_t)t->n_vocab / 32 + 1, sizeof(uint32_t));
    x->pos = (unsigned char *)mms__vocab_alloc((size_t)t->n_node, 1);
    x->most = (unsigned char *)mms__vocab_alloc((size_t)t->n_node, 1);
    x->order = (int32_t *)mms__vocab_alloc((size_t)t->n_vocab + 1, sizeof(int32_t));
    x->order_len = (unsigned char *)mms__vocab_alloc((size_t)t->n_vocab + 1, 1);
    x->first = (int32_t *)mms__vocab_alloc((size_t)t->n_node + 1, sizeof(int32_t));
    x->first_none = (int32_t *)mms__vocab_alloc((size_t)t->n_node, sizeof(int32_t));
    x->next_none = (int32_t *)mms__vocab_alloc((size_t)t->n_node, sizeof(int32_t));
    if (!state || !x->by_len || !x->all || !x->pos || !x->most || !x->order || !x->order_len || !x->first || !x->first_none || !x->next_none) { MMS_FREE(state); return false; }
    memset(x->all, 0, sizeof(uint32_t) * ((size_t)t->n_vocab / 32 + 1));
    memset(count, 0, sizeof count);
    for (i = 0; i < 256; i++) if (mms__text_step(kind, 0, (unsigned char)i) >= 0) x->starts[i >> 5] |= 1u << (i & 31);
    state[0] = 0;
    x->pos[0] = 0;
    for (i = 0; i < t->n_node; i++)
        for (ch = t->node[i].first_child; ch >= 0; ch = t->node[ch].next_sibling) {
            const int s = x->pos[i] == MMS__TEXT_NONE ? -1 : mms__text_step(kind, state[i], t->node[ch].byte);
            const int p = x->pos[i] + (state[i] == 0);   /* a byte after a whole character starts the next one */
            state[ch] = s < 0 ? 0xFF : (unsigned char)s;
            x->pos[ch] = s < 0 || p > MMS__TEXT_MAX_LEN ? MMS__TEXT_NONE : (unsigned char)p;
            if (s == 0 && x->pos[ch] != MMS__TEXT_NONE)
                for (tok = t->node[ch].first_token; tok >= 0; tok = t->token_next[tok]) count[x->pos[ch]]++;
        }
    for (i = 0, k = 0; i <= MMS__TEXT_MAX_LEN; i++) { k += count[i]; x->len_end[i] = k; count[i] = k - count[i]; }
    for (i = 0, k = 0; i < t->n_node; i++) {
        x->first[i] = k;
        if (state[i] == 0 && x->pos[i] != MMS__TEXT_NONE)
            for (tok = t->node[i].first_token; tok >= 0; tok = t->token_next[tok]) { x->order[k] = tok; x->order_len[k++] = x->pos[i]; }
    }
    x->first[t->n_node] = k;
    for (i = 0; i < t->n_node; i++)
        if (state[i] == 0 && x->pos[i] != MMS__TEXT_NONE && t->text[MMS__TEXT_UTF8].first[t->end[i]] - t->text[MMS__TEXT_UTF8].first[i] >= MMS__SUBTREE_MIN) t->node[i].shortcut |= (unsigned char)(1u << kind);
    for (i = t->n_node - 1; i >= 0; i--) {
        const bool listed = state[i] == 0 && x->pos[i] != MMS__TEXT_NONE;
        int m = 0;
        for (tok = t->node[i].first_token; tok >= 0; tok = t->token_next[tok]) {
            if (!listed) { m = MMS__TEXT_NONE; break; }
            x->by_len[count[x->pos[i]]++] = tok;
            x->all[tok >> 5] |= 1u << (tok & 31);
            m = x->pos[i];
            if (m > x->max_len) x->max_len = m;
        }
        for (ch = t->node[i].first_child; ch >= 0 && m < MMS__TEXT_NONE; ch = t->node[ch].next_sibling)
            if (ch <= i || x->most[ch] == MMS__TEXT_NONE) m = MMS__TEXT_NONE;
            else if (x->most[ch] > m) m = x->most[ch];
        x->most[i] = (unsigned char)m;
    }
    for (i = 0; i < t->n_node; i++) x->first_none[i] = x->next_none[i] = -1;
    for (i = 0; i < t->n_node; i++) {
        int32_t prev = -1;
        for (ch = t->node[i].first_child; ch >= 0 && x->most[i] == MMS__TEXT_NONE; ch = t->node[ch].next_sibling)
            if (x->most[ch] == MMS__TEXT_NONE) {
                if (prev < 0) x->first_none[i] = ch;
                else x->next_none[prev] = ch;
                prev = ch;
            }
    }
    MMS_FREE(state);
    return true;
}

/* Control and unknown tokens stand for no text: they are in neither the trie nor the end tokens. */
static struct mms__token_trie *mms__token_trie_build(const struct mms_vocab *v) {
    struct mms__token_trie *t = (struct mms__token_trie *)MMS_MALLOC(sizeof *t);
    struct mms__token_bytes *tb = (struct mms__token_bytes *)mms__vocab_alloc((size_t)v->n_tokens, sizeof *tb);
    int32_t id, n_tb = 0, k;
    bool ok = t && tb;
    if (t) {
        memset(t, 0, sizeof *t);
        t->n_vocab = v->n_tokens;
        t->cap_node = 1 << 16;
        t->node = (struct mms__trie_node *)MMS_MALLOC(sizeof *t->node * (size_t)t->cap_node);
        t->token_next = (int32_t *)mms__vocab_alloc((size_t)v->n_tokens, sizeof(int32_t));
        t->eog = (int32_t *)mms__vocab_alloc((size_t)v->n_tokens, sizeof(int32_t));
        ok = ok && t->node && t->token_next && t->eog;
    }
    if (ok) {
        t->n_node = 1;
        t->node[0].first_child = t->node[0].next_sibling = t->node[0].first_token = -1;
        t->node[0].byte = 0;
        t->node[0].shortcut = 0;
        for (id = 0; id < v->n_tokens; id++) {
            size_t len = 0;
            const unsigned char *p = mms__tok_piece(v, id, false, &len);
            if (mms_vocab_is_eog(v, id)) { t->eog[t->n_eog++] = id; continue; }
            if (len == 0) continue;
            tb[n_tb].bytes = p;
            tb[n_tb].len = len;
            tb[n_tb++].id = id;
        }
        qsort(tb, (size_t)n_tb, sizeof *tb, mms__token_bytes_cmp);
        for (k = 0; k < n_tb && ok; k++) ok = mms__token_trie_add(t, &tb[k]);
        if (ok && !(t->end = (int32_t *)mms__vocab_alloc((size_t)t->n_node, sizeof(int32_t)))) ok = false;
        for (id = t->n_node - 1; id >= 0 && ok; id--)   /* the newest child holds the subtree's last nodes */
            t->end[id] = t->node[id].first_child >= 0 ? t->end[t->node[id].first_child] : id + 1;
        for (k = MMS__TEXT_KINDS - 1; k >= 0 && ok; k--) ok = mms__token_trie_text(t, k);   /* UTF-8's first: the test of the count uses its list */
        for (k = 0; k < 256; k++) if (mms__token_plain((unsigned char)k)) t->plain_bytes[k >> 5] |= 1u << (k & 31);
    }
    MMS_FREE(tb);
    if (!ok) { mms__token_trie_free(t); return NULL; }
    return t;
}

/* The vocabulary's trie, built by the first caller; NULL when out of memory. */
static const struct mms__token_trie *mms__vocab_trie(const struct mms_vocab *v) {
    struct mms_vocab *w = (struct mms_vocab *)v;   /* a cache: the vocabulary's meaning does not change */
    const struct mms__token_trie *t;
    mms__mutex_lock(&w->trie_lock);
    if (!w->trie) w->trie = mms__token_trie_build(v);
    t = w->trie;
    mms__mutex_unlock(&w->trie_lock);
    return t;
}
