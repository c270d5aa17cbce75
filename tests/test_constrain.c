/* Constrained output against independent references: tests/fixtures/text/json-schema-corpus.json
   holds JSON Schemas of real kinds and documents with Python jsonschema's verdicts
   (tools/gen_constrain_fixtures.py); the matcher, fed each document byte by byte, must agree on
   every one. Walks over the genuine Llama 3 vocabulary (tests/fixtures/text/tok-llama3.gguf, pruned
   to the tokenizer corpus's tokens but every one of its 256 byte tokens kept), random and
   greedy over random logits, must never meet a state with no allowed token, must end only where the
   output is complete (every mask also equal to the plain trie walk's: MMS_CONSTRAIN_CHECK is set
   here), and with MMS_CONSTRAIN_DUMP=FILE write their documents for
   tests/constrain_check.py, which validates them with jsonschema (make test-full). Plus the grammar
   notation, its errors, and the unsupported keywords' errors. */
#ifndef _POSIX_C_SOURCE
#  define _POSIX_C_SOURCE 200809L   /* setenv */
#endif
#define MMSCHED_IMPLEMENTATION
#include "../mmsched.h"
#include "test.h"

#define FIXTURES "tests/fixtures/text/"

static struct mms_json *corpus;
static struct mms_vocab *vocab;

static char **pieces;   /* every token's bytes */
static int   *piece_len;

static bool bit(const uint32_t *mask, int32_t id) { return (mask[id >> 5] >> (id & 31)) & 1u; }

/* A value's compact JSON text (mms_json_write), malloc'ed. */
static char *json_text(const struct mms_json *j, int64_t v, size_t *len) {
    const int64_t n = mms_json_write(j, v, NULL, 0);
    char *buf = (char *)malloc((size_t)n + 1);
    mms_json_write(j, v, buf, (size_t)n + 1);
    *len = (size_t)n;
    return buf;
}

/* A string as a JSON string, malloc'ed. */
static char *json_string(const char *s, size_t len) {
    const int64_t n = mms_json_write_string(s, len, NULL, 0);
    char *buf = (char *)malloc((size_t)n + 1);
    mms_json_write_string(s, len, buf, (size_t)n + 1);
    return buf;
}

static struct mms_grammar *case_grammar(int64_t c, const char **name) {
    size_t len = 0, nl;
    struct mms_grammar *g;
    char *buf = json_text(corpus, mms_json_get(corpus, c, "schema"), &len);
    *name = mms_json_str(corpus, mms_json_get(corpus, c, "name"), &nl);
    g = mms_grammar_from_json_schema(buf, len);
    free(buf);
    return g;
}

static int64_t cases(void) { return mms_json_get(corpus, 0, "cases"); }

/* Every corpus document, byte by byte: accepted and complete exactly when jsonschema says valid. */
static void test_corpus_verdicts(void) {
    int64_t cs = cases(), i, k;
    int agree = 0, n_valid = 0, n_invalid = 0, n_outside = 0;
    EXPECT(cs >= 0 && mms_json_len(corpus, cs) >= 50, "the corpus has its cases");
    for (i = 0; i < mms_json_len(corpus, cs); i++) {
        const int64_t c = mms_json_at(corpus, cs, i), docs = mms_json_get(corpus, c, "docs");
        const char *name;
        struct mms_grammar *g = case_grammar(c, &name);
        EXPECT(g != NULL, "%s compiles: %s", name, mms_last_error());
        if (!g) continue;
        for (k = 0; k < mms_json_len(corpus, docs); k++) {
            const int64_t d = mms_json_at(corpus, docs, k);
            size_t tl = 0;
            const char *text = mms_json_str(corpus, mms_json_get(corpus, d, "text"), &tl);
            const bool valid = mms_json_type(corpus, mms_json_get(corpus, d, "valid")) == MMS_JSON_TRUE;
            /* valid, but outside what the grammar writes (an email the stated subset leaves out): only soundness is asked */
            const bool outside = mms_json_type(corpus, mms_json_get(corpus, d, "subset")) == MMS_JSON_FALSE;
            struct mms_constraint *m = mms_constraint_new(g, NULL);
            size_t b;
            bool ok = true, mine;
            for (b = 0; b < tl && ok; b++) ok = mms_constraint_accept_bytes(m, text + b, 1) == MMS_OK;
            mine = ok && mms_constraint_is_complete(m);
            if (outside) { EXPECT(!mine || valid, "%s: %s: outside the subset, yet accepted and invalid", name, text); n_outside++; mms_constraint_free(m); continue; }
            EXPECT(mine == valid, "%s: %s: jsonschema says %s, the matcher %s (%s)", name, text, valid ? "valid" : "invalid",
                   mine ? "accepts" : "refuses", ok ? "whole bytes" : "stopped early");
            agree += mine == valid;
            n_valid += valid;
            n_invalid += !valid;
            mms_constraint_free(m);
        }
        mms_grammar_free(g);
    }
    printf("    %d documents agree with jsonschema (%d valid, %d invalid); %d valid ones outside the grammar's subset, none of them accepted wrongly\n",
           agree, n_valid, n_invalid, n_outside);
    EXPECT(n_valid > 500 && n_invalid > 300, "both kinds of document are there");
}

/* mms_json_write against Python's json.dumps: every corpus document, read and written again, is the
   generator's text byte for byte. */
static void test_json_write(void) {
    int64_t cs = cases(), i, k;
    int same = 0, n = 0;
    for (i = 0; i < mms_json_len(corpus, cs); i++) {
        const int64_t docs = mms_json_get(corpus, mms_json_at(corpus, cs, i), "docs");
        for (k = 0; k < mms_json_len(corpus, docs); k++) {
            size_t tl = 0, wl = 0;
            const char *text = mms_json_str(corpus, mms_json_get(corpus, mms_json_at(corpus, docs, k), "text"), &tl);
            struct mms_json *d = mms_json_parse(text, tl, "doc");
            char *w;
            if (!d) continue;   /* Python wrote it, our strict reader refuses it: duplicate keys, say */
            w = json_text(d, 0, &wl);
            EXPECT(wl == tl && !memcmp(w, text, tl), "wrote %s for %s", w, text);
            same += wl == tl && !memcmp(w, text, tl);
            n++;
            free(w);
            mms_json_free(d);
        }
    }
    printf("    %d of %d documents written back as Python wrote them\n", same, n);
    EXPECT(n > 1500, "the documents were read");
    EXPECT(mms_json_write_string("a\"\x01", 3, NULL, 0) == 11 && mms_json_write(corpus, -1, NULL, 0) == -1, "lengths and a bad value");
}

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* One walk: mode 0 draws uniformly among the allowed tokens, mode 1 takes the best of fixed random
   logits (a random-weight model's greedy answer). After `wander` tokens it heads for the end: the
   end token, else a closing byte, else the shortest allowed piece. Returns the document's length,
   or -1 when the walk broke a rule (reported). */
static int n_exact_checks;

static int walk(struct mms_constraint *c, const struct mms_grammar *g, bool exact, const float *logits, int mode, uint64_t seed, int wander, char *doc,
                int cap, const char *name) {
    const int32_t n_vocab = mms_vocab_n_tokens(vocab);
    int len = 0, step;
    mms_constraint_reset(c);
    for (step = 0; step < 600; step++) {
        const uint32_t *mask = mms_constraint_allowed(c);
        int32_t id, pick = -1, n_allowed = 0, eog_allowed = 0;
        int n;
        if (!mask) { EXPECT(mask != NULL, "%s: allowed: %s", name, mms_last_error()); return -1; }
        for (id = 0; id < n_vocab; id++)
            if (bit(mask, id)) { n_allowed++; if (mms_vocab_is_eog(vocab, id)) eog_allowed = 1; }
        if (n_allowed == 0) { EXPECT(n_allowed > 0, "%s: a dead state after \"%.*s\"", name, len, doc); return -1; }
        if (exact && step % 8 == 3) {   /* the mask against the byte matcher, token by token */
            struct mms_constraint *m = mms_constraint_new(g, NULL);
            int n_wrong = 0;
            mms_constraint_accept_bytes(m, doc, (size_t)len);
            for (id = 0; id < n_vocab && m; id++) {
                bool ok;
                if (!piece_len[id] || mms_vocab_is_eog(vocab, id)) continue;
                ok = mms_constraint_accept_bytes(m, pieces[id], (size_t)piece_len[id]) == MMS_OK;
                if (ok) { mms_constraint_reset(m); mms_constraint_accept_bytes(m, doc, (size_t)len); }
                if (ok != bit(mask, id) && n_wrong++ < 3) EXPECT(0, "%s: after \"%.*s\" token %d is %s by the mask but %s by the bytes", name, len, doc, (int)id,
                                                            bit(mask, id) ? "allowed" : "refused", ok ? "taken" : "refused");
            }
            n_exact_checks++;
            mms_constraint_free(m);
        }
        if (eog_allowed != (int)mms_constraint_is_complete(c)) {
            EXPECT(0, "%s: the end token is %s where the output is %s", name, eog_allowed ? "allowed" : "refused", mms_constraint_is_complete(c) ? "complete" : "not complete");
            return -1;
        }
        if (step >= wander) {   /* finish: the end, else the longest token along a shortest completion */
            char want[4096];
            int best = 0;
            const int nw = mms_constraint_shortest_completion(c, want, (int)sizeof want);
            EXPECT(nw >= 0 && (nw == 0) == (int)mms_constraint_is_complete(c), "%s: shortest completion %d", name, nw);
            for (id = 0; id < n_vocab && eog_allowed && pick < 0; id++) if (bit(mask, id) && mms_vocab_is_eog(vocab, id)) pick = id;
            for (id = 0; id < n_vocab && pick < 0 && nw > 0; id++)
                if (bit(mask, id) && piece_len[id] > best && piece_len[id] <= nw && !memcmp(pieces[id], want, (size_t)piece_len[id])) best = piece_len[id];
            for (id = 0; id < n_vocab && pick < 0 && best > 0; id++)
                if (bit(mask, id) && piece_len[id] == best && !memcmp(pieces[id], want, (size_t)best)) pick = id;
            if (pick < 0) { EXPECT(pick >= 0, "%s: no allowed token starts the shortest completion \"%.*s\"", name, nw, want); return -1; }
        } else if (mode == 0) {
            int32_t k = (int32_t)(rng_next(&seed) % (uint64_t)n_allowed);
            for (id = 0; id < n_vocab; id++) if (bit(mask, id) && k-- == 0) { pick = id; break; }
        } else {
            for (id = 0; id < n_vocab; id++) if (bit(mask, id) && (pick < 0 || logits[id] > logits[pick])) pick = id;
        }
        if (mms_constraint_accept(c, pick) != MMS_OK) { EXPECT(0, "%s: an allowed token %d refused: %s", name, (int)pick, mms_last_error()); return -1; }
        if (mms_vocab_is_eog(vocab, pick)) return len;
        n = piece_len[pick];
        if (len + n >= cap) { EXPECT(0, "%s: a document past %d bytes", name, cap); return -1; }
        memcpy(doc + len, pieces[pick], (size_t)n);
        len += n;
        doc[len] = '\0';
    }
    EXPECT(0, "%s: no end after 600 tokens: \"%.60s...\"", name, doc);
    return -1;
}

/* Walks over Llama 3's vocabulary for every corpus schema; the documents are re-read by a fresh
   byte matcher and written to $MMS_CONSTRAIN_DUMP for jsonschema (tests/constrain_check.py). */
static void test_vocab_walks(void) {
    const char *dump_path = getenv("MMS_CONSTRAIN_DUMP");
    FILE *dump = dump_path ? fopen(dump_path, "wb") : NULL;
    int64_t cs = cases(), i;
    int32_t n_vocab, id;
    float *logits;
    uint64_t s = 7;
    int n_docs = 0, w;
    static char doc[1 << 16];
    if (!vocab) { EXPECT(vocab != NULL, "the vocabulary loads: %s", mms_last_error()); return; }
    EXPECT(!dump_path || dump, "%s opens", dump_path);
    n_vocab = mms_vocab_n_tokens(vocab);
    logits = (float *)malloc(sizeof *logits * (size_t)n_vocab);

    for (i = 0; i < mms_json_len(corpus, cs); i++) {
        const int64_t c = mms_json_at(corpus, cs, i);
        const char *name;
        struct mms_grammar *g = case_grammar(c, &name);
        struct mms_constraint *con = g ? mms_constraint_new(g, vocab) : NULL;
        EXPECT(con != NULL, "%s: constraint: %s", name, mms_last_error());
        for (w = 0; con && w < 6; w++) {
            int len;
            for (id = 0; id < n_vocab; id++) logits[id] = (float)(rng_next(&s) >> 40) / (float)(1 << 24);
            len = walk(con, g, w < 2, logits, w % 2, s + (uint64_t)w, w < 2 ? 8 : w < 4 ? 24 : 48, doc, (int)sizeof doc, name);
            if (len >= 0) {
                struct mms_constraint *m = mms_constraint_new(g, NULL);
                EXPECT(mms_constraint_accept_bytes(m, doc, (size_t)len) == MMS_OK && mms_constraint_is_complete(m), "%s: a fresh matcher reads %s", name, doc);
                mms_constraint_free(m);
                n_docs++;
                if (dump) {
                    char *jn = json_string(name, strlen(name)), *jd = json_string(doc, (size_t)len);
                    fprintf(dump, "{\"case\":%s,\"doc\":%s}\n", jn, jd);
                    free(jn);
                    free(jd);
                }
            }
        }
        mms_constraint_free(con);
        mms_grammar_free(g);
    }
    printf("    %d documents written by walks over %d tokens; %d masks equal to the byte matcher's verdicts token by token\n", n_docs, (int)n_vocab, n_exact_checks);
    EXPECT(n_exact_checks > 100, "masks were checked");
    EXPECT(n_docs == 6 * (int)mms_json_len(corpus, cs), "every walk ended with a document");
    if (dump) fclose(dump);
    free(logits);
}

/* The sampler with a constraint: greedy and sampled (temperature, top-k, top-p) answers over random
   logits are the documents of the schema; its probabilities are 0 outside the allowed tokens; the
   greedy pick is the best allowed logit; after the end, sampling fails with MMS_ERR_STATE. */
static void test_sampler_constraint(void) {
    static const char schema[] = "{\"type\":\"object\",\"properties\":{\"shape\":{\"enum\":[\"circle\",\"square\"]},"
                                 "\"n\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":12}},\"required\":[\"shape\",\"n\"],\"additionalProperties\":false}";
    struct mms_grammar *g = mms_grammar_from_json_schema(schema, sizeof schema - 1);
    const int32_t n_vocab = vocab ? mms_vocab_n_tokens(vocab) : 0;
    float *logits = (float *)malloc(sizeof(float) * (size_t)(n_vocab + 1)), *probs = (float *)malloc(sizeof(float) * (size_t)(n_vocab + 1));
    uint64_t seed = 3;
    int run;
    EXPECT(g != NULL && vocab != NULL, "grammar and vocabulary: %s", mms_last_error());
    for (run = 0; g && vocab && run < 4; run++) {
        struct mms_sampler_params sp = mms_sampler_default_params();
        struct mms_sampler *s;
        struct mms_constraint *c = mms_constraint_new(g, vocab), *check = mms_constraint_new(g, NULL);
        char doc[512];
        int len = 0, step;
        int32_t id = -1, i;
        sp.temperature = run == 0 ? 0.0f : 0.8f;
        sp.top_k = run == 2 ? 40 : 0;
        sp.top_p = run == 3 ? 0.9f : 1.0f;
        sp.seed = (uint64_t)run;
        s = mms_sampler_new(&sp);
        mms_sampler_set_constraint(s, c);
        for (step = 0; step < 64; step++) {
            const uint32_t *mask;
            int32_t best = -1;
            for (i = 0; i < n_vocab; i++) logits[i] = (float)(rng_next(&seed) >> 40) / (float)(1 << 20);
            mask = mms_constraint_allowed(c);
            for (i = 0; mask && i < n_vocab; i++) if (bit(mask, i) && (best < 0 || logits[i] > logits[best])) best = i;
            EXPECT(mms_sampler_probs(s, logits, n_vocab, probs) == MMS_OK, "probs: %s", mms_last_error());
            mask = mms_constraint_allowed(c);
            for (i = 0; mask && i < n_vocab; i++) if (!bit(mask, i) && probs[i] != 0.0f) { EXPECT(0, "token %d has probability %g but is not allowed", (int)i, (double)probs[i]); break; }
            id = mms_sampler_sample(s, logits, n_vocab);
            EXPECT(id >= 0, "sample: %s", mms_last_error());
            if (id < 0) break;
            if (run == 0) EXPECT(id == best, "greedy takes the best allowed logit: %d, not %d", (int)id, (int)best);
            if (mms_vocab_is_eog(vocab, id)) break;
            memcpy(doc + len, pieces[id], (size_t)piece_len[id]);
            len += piece_len[id];
        }
        doc[len] = '\0';
        EXPECT(id >= 0 && mms_vocab_is_eog(vocab, id) && mms_constraint_is_finished(c), "run %d ended with an end token: %s", run, doc);
        EXPECT(mms_constraint_accept_bytes(check, doc, (size_t)len) == MMS_OK && mms_constraint_is_complete(check), "run %d wrote a document of the schema: %s", run, doc);
        EXPECT(!strncmp(doc, "{\"shape\":\"", 10), "run %d: %s", run, doc);
        EXPECT(mms_sampler_sample(s, logits, n_vocab) == -1 && mms_last_status() == MMS_ERR_STATE, "nothing after the end");
        mms_sampler_set_constraint(s, NULL);
        EXPECT(mms_sampler_sample(s, logits, n_vocab) >= 0, "without the constraint the sampler is free again");
        mms_sampler_free(s);
        mms_constraint_free(c);
        mms_constraint_free(check);
    }
    free(logits);
    free(probs);
    mms_grammar_free(g);
}

/* A state that cuts a multi-byte character: the tokens that finish it are allowed, the end is not. */
static void test_utf8_across_tokens(void) {
    static const char gs[] = "root ::= \"\\\"\" [\\u00e9\\u65e5]+ \"\\\"\"";
    struct mms_grammar *g = mms_grammar_parse(gs, sizeof gs - 1);
    struct mms_constraint *c = g && vocab ? mms_constraint_new(g, vocab) : NULL;
    const uint32_t *mask;
    int32_t id, n_allowed = 0;
    EXPECT(c != NULL, "constraint: %s", mms_last_error());
    if (!c) { mms_grammar_free(g); return; }
    EXPECT(mms_constraint_accept_bytes(c, "\"\xE6", 2) == MMS_OK, "half of U+65E5 is taken");
    EXPECT(!mms_constraint_is_complete(c), "not complete inside a character");
    EXPECT(mms_constraint_accept_bytes(c, "\x41", 1) != MMS_OK, "an ASCII byte cannot finish it");
    mask = mms_constraint_allowed(c);
    for (id = 0; mask && id < mms_vocab_n_tokens(vocab); id++)
        if (bit(mask, id)) {
            char piece[64];
            int n = mms_token_to_piece(vocab, id, piece, sizeof piece, false);
            n_allowed++;
            EXPECT(n >= 1 && (unsigned char)piece[0] == 0x97, "token %d continues U+65E5 (%02x)", (int)id, n >= 1 ? (unsigned char)piece[0] : 0);
        }
    EXPECT(n_allowed >= 1, "the byte token 0x97 is allowed");
    EXPECT(mms_constraint_accept_bytes(c, "\x97\xA5\"", 3) == MMS_OK && mms_constraint_is_complete(c), "the character and the quote finish it");
    mms_constraint_free(c);
    mms_grammar_free(g);
}

/* The mask after prefix against the byte matcher, token by token (and, MMS_CONSTRAIN_CHECK being
   set, against the plain walk); a copy of the mask (malloc'ed) for the caller's own checks, or NULL. */
static uint32_t *mask_against_bytes(struct mms_grammar *g, const char *what, const char *prefix, int min_allowed) {
    struct mms_constraint *c = g ? mms_constraint_new(g, vocab) : NULL, *m = g ? mms_constraint_new(g, NULL) : NULL;
    const size_t plen = strlen(prefix);
    const uint32_t *mask = NULL;
    uint32_t *copy = NULL;
    int32_t id, n_allowed = 0, n_wrong = 0;
    EXPECT(c && m, "%s: %s", what, mms_last_error());
    if (c && m) {
        EXPECT(mms_constraint_accept_bytes(c, prefix, plen) == MMS_OK, "%s: the prefix \"%s\"", what, prefix);
        mask = mms_constraint_allowed(c);
        EXPECT(mask != NULL, "%s after \"%s\": allowed: %s", what, prefix, mms_last_error());
    }
    for (id = 0; mask && id < mms_vocab_n_tokens(vocab); id++) {
        bool ok;
        if (!piece_len[id] || mms_vocab_is_eog(vocab, id)) continue;
        mms_constraint_reset(m);
        mms_constraint_accept_bytes(m, prefix, plen);
        ok = mms_constraint_accept_bytes(m, pieces[id], (size_t)piece_len[id]) == MMS_OK;
        n_allowed += ok;
        if (ok != bit(mask, id) && n_wrong++ < 3)
            EXPECT(0, "%s after \"%s\": token %d \"%.*s\" is %s by the mask but %s by the bytes", what, prefix, (int)id, piece_len[id], pieces[id],
                   bit(mask, id) ? "allowed" : "refused", ok ? "taken" : "refused");
    }
    if (mask) {
        EXPECT(n_allowed >= min_allowed, "%s after \"%s\": %d tokens allowed", what, prefix, (int)n_allowed);
        copy = (uint32_t *)malloc(sizeof(uint32_t) * ((size_t)mms_vocab_n_tokens(vocab) / 32 + 1));
        memcpy(copy, mask, sizeof(uint32_t) * ((size_t)mms_vocab_n_tokens(vocab) / 32 + 1));
    }
    mms_constraint_free(c);
    mms_constraint_free(m);
    return copy;
}

/* The shortcut through plain text (printable ASCII but '"' and '\\'), where its reach ends each
   way: a loop, a count run out, a class holding only part of the plain bytes, plain bytes that
   lead to different sets. */
static void test_plain_shortcut(void) {
    static const struct { const char *grammar, *prefix; } cases_[] = {
        { "root ::= \"x\" [\\x20-\\x7F]*", "x" },
        { "root ::= \"\\\"\" [^\"\\\\\\x00-\\x1F]{0,5} \"\\\"\"", "\"" },
        { "root ::= \"\\\"\" [^\"\\\\\\x00-\\x1F]{0,5} \"\\\"\"", "\"ab" },
        { "root ::= [\\x20-\\x7F]{2} [a-z]+ \".\"", "" },
        { "root ::= [\\x20-\\x7F] [\\x20-\\x7F] [\\x20-\\x7F] \"!\" | [\\x20-\\x7F] [\\x20-\\x7F] [a-z]+", "" },
        { "root ::= ([\\x20-\\x7F] | \"a\" \"b\")+ \"!\"", "" },
    };
    size_t k;
    for (k = 0; vocab && k < sizeof cases_ / sizeof cases_[0]; k++) {
        struct mms_grammar *g = mms_grammar_parse(cases_[k].grammar, strlen(cases_[k].grammar));
        free(mask_against_bytes(g, cases_[k].grammar, cases_[k].prefix, 100));
        mms_grammar_free(g);
    }
}

/* The token whose bytes are s, or -1. */
static int32_t token_of(const char *s) {
    int32_t id;
    for (id = 0; vocab && id < mms_vocab_n_tokens(vocab); id++)
        if (piece_len[id] == (int)strlen(s) && !memcmp(pieces[id], s, strlen(s))) return id;
    return -1;
}

/* The shortcut through whole UTF-8 characters (a JSON string's): counts of characters, not bytes,
   at a bounded string's edge ("ст" is 2 characters in 4 bytes, "ств" 3); tokens mixing ASCII and
   other characters; tokens that end inside a character ("о\xD0", a byte alone), which are walked;
   bytes that begin no character (never allowed); classes that leave out some characters, or send
   them elsewhere than the ASCII ones (the shortcut must not take them). Each mask against the byte
   matcher, token by token, and a few tokens by what UTF-8 says of them. */
static void test_utf8_shortcut(void) {
    static const char *const str2 = "root ::= \"\\\"\" [^\"\\\\\\x00-\\x1F]{0,2} \"\\\"\"";
    static const struct { const char *grammar, *prefix; } cases_[] = {
        { "root ::= \"\\\"\" [^\"\\\\\\x00-\\x1F]{0,2} \"\\\"\"", "\"\xC3\xA9" },
        { "root ::= \"\\\"\" [^\"\\\\\\x00-\\x1F]{0,2} \"\\\"\"", "\"a\xD1" },
        { "root ::= \"\\\"\" [^\"\\\\\\x00-\\x1F]{2,3} \"\\\"\"", "\"" },
        { "root ::= \"\\\"\" [^\"\\\\\\x00-\\x1F]{2} [a-z]* \"\\\"\"", "\"" },
        { "root ::= \"\\\"\" [^\"\\\\\\x00-\\x1F]{0,4} \"\\\"\"", "\"\xD1\x81" },
        { "root ::= \"\\\"\" [^\"\\\\\\x00-\\x1F\\u00e9]* \"\\\"\"", "\"" },
        { "root ::= \"\\\"\" [^\"\\\\\\x00-\\x1F\\u2019]* \"\\\"\"", "\"" },
        { "root ::= \"\\\"\" [\\x20-\\x21\\x23-\\x5B\\x5D-\\x7F\\u0080-\\u07FF]* \"\\\"\"", "\"" },
        { "root ::= \"\\\"\" ([^\"\\\\\\x00-\\x1F\\u0080-\\U0010FFFF] | [\\u0080-\\U0010FFFF] \"!\")* \"\\\"\"", "\"" },
        { "root ::= \"\\\"\" ([^\"\\\\\\x00-\\x1F\\u0080-\\U0010FFFF] | [\\u0080-\\U0010FFFF] \"!\")* \"\\\"\"", "\"\xC3\xA9!" },
        { "root ::= \"\\\"\" ([^\"\\\\\\x00-\\x1F\\u0080-\\U0010FFFF] | [\\u0080-\\u07FF] \"!\" | [\\u0800-\\U0010FFFF])* \"\\\"\"", "\"" },
    };
    static const char *const schemas[] = { "{\"type\":\"string\",\"maxLength\":2}", "{\"type\":\"string\",\"minLength\":1,\"maxLength\":1}",
                                           "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"string\",\"maxLength\":3}}}" };
    static const char *const schema_prefix[] = { "\"", "\"", "{\"n\":\"\xC3\xA9" };
    struct { const char *bytes; bool allowed; } after_quote[] = {   /* str2 after '"': up to 2 characters */
        { "\xC3\xA9", true }, { "\xD1\x81\xD1\x82", true }, { "\xD1\x81\xD1\x82\xD0\xB2", false }, { " d\xC3\xA9", false }, { "\xC3\xA9s", true },
        { "\xE2\x80\x99", true }, { "\xD0\xBE\xD0", true }, { "\xC3", true }, { "\xE2", true }, { "\xED", true }, { "\x80", false }, { "\xC0", false },
        { "\xF5", false }, { "\xFF", false },
    };
    struct mms_grammar *g;
    uint32_t *mask;
    size_t k;
    if (!vocab) return;
    g = mms_grammar_parse(str2, strlen(str2));
    mask = mask_against_bytes(g, str2, "\"", 1000);
    for (k = 0; mask && k < sizeof after_quote / sizeof after_quote[0]; k++) {
        const int32_t id = token_of(after_quote[k].bytes);
        EXPECT(id >= 0, "the test vocabulary has token \"%s\"", after_quote[k].bytes);
        if (id >= 0) EXPECT(bit(mask, id) == after_quote[k].allowed, "token \"%s\" is %s after '\"' (up to 2 characters)", after_quote[k].bytes, after_quote[k].allowed ? "allowed" : "refused");
    }
    free(mask);
    free(mask_against_bytes(g, str2, "\"a", 500));
    mms_grammar_free(g);
    for (k = 0; k < sizeof cases_ / sizeof cases_[0]; k++) {
        g = mms_grammar_parse(cases_[k].grammar, strlen(cases_[k].grammar));
        free(mask_against_bytes(g, cases_[k].grammar, cases_[k].prefix, 1));
        mms_grammar_free(g);
    }
    for (k = 0; k < sizeof schemas / sizeof schemas[0]; k++) {
        g = mms_grammar_from_json_schema(schemas[k], strlen(schemas[k]));
        free(mask_against_bytes(g, schemas[k], schema_prefix[k], 100));
        mms_grammar_free(g);
    }
}

/* The shortcut from inside the trie (a subtree whose set, after its first bytes, reaches into free
   text): an object's key beside named ones (the names' first letters lead elsewhere, every other
   first character to a free key), with additionalProperties true or a schema, at the first key and
   after one; grammars where a subtree's reach is a count (the bound is its characters after the
   subtree's own: " " then 3 more, where a 5th character must be a letter: " that"), where the set after
   the count takes no character (longer tokens refused unwalked), and where it is a subtree of
   characters beyond ASCII. Each mask against the byte matcher, token by token, and MMS_CONSTRAIN_CHECK
   (set here) against the plain walk. */
static void test_subtree_shortcut(void) {
    static const struct { const char *grammar, *prefix; } cases_[] = {
        { "root ::= \"the\" \"!\" | [a-z ] [\\x20-\\x7F]{3} [a-z]", "" },
        { "root ::= \"the\" \"!\" | [a-z ] [\\x20-\\x7F]{0,3} \"\\\"\"", "" },
        { "root ::= \"in\" [0-9] | [a-z ] [^\"\\\\\\x00-\\x1F]{0,2} \"\\\"\"", "" },
        { "root ::= \" t\" \"?\" | [a-z ] [^\"\\\\\\x00-\\x1F]* \"\\\"\"", "" },
        { "root ::= \"\\u00e9t\" \"!\" | [^\"\\\\\\x00-\\x1F] [^\"\\\\\\x00-\\x1F]{0,2} \"\\\"\"", "" },
    };
    static const char *const schemas[] = {
        "{\"type\":\"object\",\"properties\":{\"title\":{\"type\":\"string\"},\"body\":{\"type\":\"string\"},\"assignee\":{\"type\":\"null\"}}}",
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"}},\"additionalProperties\":{\"type\":\"boolean\"}}",
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"s\":{\"type\":\"integer\"},\"t\":{\"type\":\"integer\"}}}",
    };
    static const char *const schema_prefix[] = { "{\"", "{\"name\":\"x\",\"", "{\"" };
    size_t k;
    if (!vocab) return;
    for (k = 0; k < sizeof cases_ / sizeof cases_[0]; k++) {
        struct mms_grammar *g = mms_grammar_parse(cases_[k].grammar, strlen(cases_[k].grammar));
        EXPECT(g != NULL, "%s: %s", cases_[k].grammar, mms_last_error());
        free(mask_against_bytes(g, cases_[k].grammar, cases_[k].prefix, 100));
        mms_grammar_free(g);
    }
    for (k = 0; k < sizeof schemas / sizeof schemas[0]; k++) {
        struct mms_grammar *g = mms_grammar_from_json_schema(schemas[k], strlen(schemas[k]));
        EXPECT(g != NULL, "%s: %s", schemas[k], mms_last_error());
        free(mask_against_bytes(g, schemas[k], schema_prefix[k], 1000));
        mms_grammar_free(g);
    }
}

/* The shortcut taken from a part of the set (its stacks under one parent): after a pattern's
   match, where the text after it reaches free text but the set, still able to match again, does
   not; a part whose reach is a count ("urgent", then up to 2 characters, then a letter: a third
   character must be a letter, and the text before "urgent" takes only a-t and spaces, so it
   allows no more), where neither the part's reach nor the set's refusals may be taken for more
   than they say. Each mask against the byte matcher and the plain walk. */
static void test_part_shortcut(void) {
    static const struct { const char *grammar, *prefix; } cases_[] = {
        { "root ::= \"\\\"\" [^\"\\\\\\x00-\\x1F]* \"urgent\" [^\"\\\\\\x00-\\x1F]* \"\\\"\"", "\"ab urgent" },
        { "root ::= \"\\\"\" [^\"\\\\\\x00-\\x1F]* \"urgent\" [^\"\\\\\\x00-\\x1F]* \"\\\"\"", "\"urgent urg" },
        { "root ::= \"\\\"\" [a-t ]* \"urgent\" [\\x20-\\x21\\x23-\\x5B\\x5D-\\x7F]{0,2} [a-z] \"\\\"\"", "\"urgent" },
    };
    static const char *const schema = "{\"type\":\"string\",\"pattern\":\"urgent\"}";
    struct mms_grammar *g;
    size_t k;
    if (!vocab) return;
    for (k = 0; k < sizeof cases_ / sizeof cases_[0]; k++) {
        g = mms_grammar_parse(cases_[k].grammar, strlen(cases_[k].grammar));
        EXPECT(g != NULL, "%s: %s", cases_[k].grammar, mms_last_error());
        free(mask_against_bytes(g, cases_[k].grammar, cases_[k].prefix, 100));
        mms_grammar_free(g);
    }
    g = mms_grammar_from_json_schema(schema, strlen(schema));
    free(mask_against_bytes(g, schema, "\"an urgent", 1000));
    mms_grammar_free(g);
}

static void test_grammar_notation(void) {
    static const struct { const char *text, *yes[4], *no[4]; } cases_[] = {
        { "root ::= \"yes\" | \"no\"", { "yes", "no" }, { "y", "yesno", "maybe" } },
        { "root ::= [a-c]{2,3} \"!\"?", { "ab", "abc!", "cc" }, { "a", "abcd", "ad" } },
        { "# a comment\nroot ::= item (\",\" item)*\nitem ::= [0-9]+ | \"x\"", { "1", "1,x,22" }, { ",", "1,", "x1" } },
        { "root ::= [^a]", { "b", "\xC3\xA9", "\xF0\x9F\x8E\x89" }, { "a", "\xC3", "bb" } },
        { "root ::= \"\\u00e9\" . [\\x41-\\x42]", { "\xC3\xA9zA", "\xC3\xA9\xE6\x97\xA5" "B" }, { "\xC3\xA9zC" } },
        { "root ::= (\"ab\"){2}", { "abab" }, { "ab", "ababab" } },
    };
    static const struct { const char *text, *want; } bad[] = {
        { "root ::= undefined_rule", "'undefined_rule' is used but not defined" },
        { "root ::= root \"a\" | \"b\"", "left-recursive" },
        { "root ::= \"a\" root", "matches no finite text" },
        { "root ::= \"a\"\nroot ::= \"b\"", "defined twice" },
        { "start ::= \"a\"", "no rule named root" },
        { "root ::= \"a", "without its closing quote" },
        { "root ::= [b-a]", "a bad range" },
        { "root ::= (\"a\"", "without its ')'" },
        { "root ::= \"a\"{3,2}", "a bad {m,n}" },
    };
    size_t i, k;
    for (i = 0; i < sizeof cases_ / sizeof cases_[0]; i++) {
        struct mms_grammar *g = mms_grammar_parse(cases_[i].text, strlen(cases_[i].text));
        EXPECT(g != NULL, "%s: %s", cases_[i].text, mms_last_error());
        for (k = 0; g && k < 4; k++) {
            struct mms_constraint *c;
            if (cases_[i].yes[k]) {
                c = mms_constraint_new(g, NULL);
                EXPECT(mms_constraint_accept_bytes(c, cases_[i].yes[k], strlen(cases_[i].yes[k])) == MMS_OK && mms_constraint_is_complete(c), "%s takes %s", cases_[i].text, cases_[i].yes[k]);
                mms_constraint_free(c);
            }
            if (cases_[i].no[k]) {
                c = mms_constraint_new(g, NULL);
                EXPECT(!(mms_constraint_accept_bytes(c, cases_[i].no[k], strlen(cases_[i].no[k])) == MMS_OK && mms_constraint_is_complete(c)), "%s refuses %s", cases_[i].text, cases_[i].no[k]);
                mms_constraint_free(c);
            }
        }
        mms_grammar_free(g);
    }
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct mms_grammar *g = mms_grammar_parse(bad[i].text, strlen(bad[i].text));
        EXPECT(g == NULL && mms_last_status() == MMS_ERR_FORMAT && strstr(mms_last_error(), bad[i].want), "%s: %s (want %s)", bad[i].text, mms_last_error(), bad[i].want);
        mms_grammar_free(g);
    }
    {   /* choice: exactly one of the strings, raw */
        const char *const choices[] = { "red", "green", "say \"hi\"" };
        struct mms_grammar *g = mms_grammar_choice(choices, 3);
        struct mms_constraint *c = mms_constraint_new(g, NULL);
        EXPECT(c && mms_constraint_accept_bytes(c, "say \"hi\"", 8) == MMS_OK && mms_constraint_is_complete(c), "choice takes a quoted one");
        mms_constraint_free(c);
        c = mms_constraint_new(g, NULL);
        EXPECT(c && mms_constraint_accept_bytes(c, "blue", 4) != MMS_OK, "choice refuses another");
        mms_constraint_free(c);
        mms_grammar_free(g);
        EXPECT(mms_grammar_choice(choices, 0) == NULL && mms_last_status() == MMS_ERR_INVALID_ARG, "no choice");
    }
    {   /* json_object: objects only; any JSON: any value */
        struct mms_grammar *g = mms_grammar_json(true), *a = mms_grammar_json(false);
        struct mms_constraint *c = mms_constraint_new(g, NULL);
        EXPECT(c && mms_constraint_accept_bytes(c, "{\"a\":[1,{}]}", 12) == MMS_OK && mms_constraint_is_complete(c), "json_object takes an object");
        mms_constraint_free(c);
        c = mms_constraint_new(g, NULL);
        EXPECT(c && mms_constraint_accept_bytes(c, "[1]", 3) != MMS_OK, "json_object refuses an array");
        mms_constraint_free(c);
        c = mms_constraint_new(a, NULL);
        EXPECT(c && mms_constraint_accept_bytes(c, "[1,\"x\",null]", 12) == MMS_OK && mms_constraint_is_complete(c), "any JSON takes an array");
        EXPECT(c && mms_constraint_accept_bytes(c, " ", 1) != MMS_OK, "compact: no whitespace");
        mms_constraint_free(c);
        mms_grammar_free(g);
        mms_grammar_free(a);
    }
}

/* Every keyword that is not supported gives an error naming it and where it is. */
static void test_unsupported_keywords(void) {
    static const struct { const char *schema, *keyword, *path; } cases_[] = {
        { "{\"type\":\"object\",\"properties\":{\"a\":{\"not\":{\"type\":\"string\"}}}}", "not", "#/properties/a/not" },
        { "{\"if\":{\"type\":\"string\"},\"then\":{\"minLength\":1}}", "if", "#/if" },
        { "{\"patternProperties\":{\"^x\":{}}}", "patternProperties", "#/patternProperties" },
        { "{\"type\":\"object\",\"propertyNames\":{\"maxLength\":3}}", "propertyNames", "#/propertyNames" },
        { "{\"type\":\"object\",\"minProperties\":1}", "minProperties", "#/minProperties" },
        { "{\"type\":\"object\",\"maxProperties\":3}", "maxProperties", "#/maxProperties" },
        { "{\"dependentRequired\":{\"a\":[\"b\"]}}", "dependentRequired", "#/dependentRequired" },
        { "{\"type\":\"array\",\"contains\":{\"type\":\"integer\"}}", "contains", "#/contains" },
        { "{\"type\":\"array\",\"uniqueItems\":true}", "uniqueItems", "#" },
        { "{\"type\":\"number\",\"multipleOf\":0.5}", "multipleOf", "#/multipleOf" },
        { "{\"unevaluatedProperties\":false}", "unevaluatedProperties", "#/unevaluatedProperties" },
        { "{\"$defs\":{\"a\":{\"type\":\"string\",\"format\":\"uri\"}},\"$ref\":\"#/$defs/a\"}", "format", "#/$defs/a" },
        { "{\"$ref\":\"other.json#/x\"}", "$ref", "#/$ref" },
        { "{\"$ref\":\"#/$defs/missing\"}", "$ref", "#/$ref" },
        { "{\"type\":\"array\",\"items\":[{\"type\":\"string\"}]}", "items", "#/items" },
        { "{\"type\":\"number\",\"minimum\":0.5}", "minimum", "#" },
        { "{\"type\":\"string\",\"pattern\":\"^a(?=b)\"}", "pattern", "#/pattern" },
        { "{\"type\":\"string\",\"pattern\":\"\\\\bword\"}", "pattern", "#/pattern" },
        { "{\"type\":\"string\",\"pattern\":\"^a$|^b$\"}", "pattern", "#/pattern" },
        { "{\"type\":\"string\",\"pattern\":\"^a+$\",\"maxLength\":3}", "pattern", "#" },
        { "{\"type\":\"object\",\"properties\":{\"caf\\u00e9\":{}}}", "additionalProperties", "#" },
        { "{\"type\":\"tuple\"}", "type", "#/type" },
        { "{\"enum\":[\"a\"],\"maxLength\":3}", "maxLength", "#" },
        { "{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "minimum", "#" },
        { "{\"type\":\"object\",\"properties\":{\"a\":false},\"required\":[\"a\"]}", "required", "#" },
        { "false", "schema", "#" },
        { "{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"string\",\"maxLength\":3}]}", "oneOf", "#/oneOf" },
        { "{\"oneOf\":[{\"type\":\"number\"},{\"type\":\"integer\"}]}", "oneOf", "#/oneOf" },
        { "{\"oneOf\":[{\"const\":1},{\"const\":1.0}]}", "oneOf", "#/oneOf" },
        { "{\"oneOf\":[{\"type\":[\"object\",\"string\"],\"properties\":{\"k\":{\"const\":\"a\"}},\"required\":[\"k\"]},"
          "{\"properties\":{\"k\":{\"const\":\"b\"}},\"required\":[\"k\"]}]}", "oneOf", "#/oneOf" },
        { "{\"type\":\"object\",\"properties\":{\"v\":{\"oneOf\":[{\"enum\":[\"a\",\"b\"]},{\"enum\":[\"b\",\"c\"]}]}}}", "oneOf", "#/properties/v/oneOf" },
    };
    /* oneOf whose branches cannot both hold compiles: by type, by const/enum, by a required discriminator */
    static const char *const disjoint[] = {
        "{\"oneOf\":[{\"type\":\"string\"},{\"type\":[\"integer\",\"null\"]}]}",
        "{\"oneOf\":[{\"enum\":[\"a\",true]},{\"enum\":[\"b\",false,null]}]}",
        "{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"a\"}},\"required\":[\"k\"]},"
        "{\"properties\":{\"k\":{\"const\":\"b\"},\"n\":{}},\"required\":[\"n\",\"k\"]}]}",
    };
    size_t i;
    for (i = 0; i < sizeof disjoint / sizeof disjoint[0]; i++) {
        struct mms_grammar *g = mms_grammar_from_json_schema(disjoint[i], strlen(disjoint[i]));
        EXPECT(g != NULL, "%s: %s", disjoint[i], mms_last_error());
        mms_grammar_free(g);
    }
    for (i = 0; i < sizeof cases_ / sizeof cases_[0]; i++) {
        char want[256];
        struct mms_grammar *g = mms_grammar_from_json_schema(cases_[i].schema, strlen(cases_[i].schema));
        snprintf(want, sizeof want, "%s at %s", cases_[i].keyword, cases_[i].path);
        EXPECT(g == NULL && mms_last_status() == MMS_ERR_UNSUPPORTED && strstr(mms_last_error(), want), "%s: %s (want \"%s\")", cases_[i].schema, g ? "compiled" : mms_last_error(), want);
        mms_grammar_free(g);
    }
    EXPECT(mms_grammar_from_json_schema("{\"type\":", 8) == NULL && mms_last_status() == MMS_ERR_FORMAT, "not JSON: %s", mms_last_error());
    EXPECT(mms_grammar_from_json_schema(NULL, 0) == NULL && mms_last_status() == MMS_ERR_INVALID_ARG, "NULL");
}

/* The API's edges: an end token only when complete, nothing after the end, bytes refused leave the state. */
static void test_api_edges(void) {
    static const char gs[] = "root ::= \"ab\" \"c\"?";
    struct mms_grammar *g = mms_grammar_parse(gs, sizeof gs - 1);
    struct mms_constraint *c = g && vocab ? mms_constraint_new(g, vocab) : NULL;
    const int32_t eot = vocab ? mms_vocab_find(vocab, "<|eot_id|>") : -1;
    EXPECT(c != NULL && eot >= 0, "constraint and <|eot_id|>: %s", mms_last_error());
    if (!c) { mms_grammar_free(g); return; }
    EXPECT(mms_constraint_accept(c, eot) == MMS_ERR_INVALID_ARG, "no end before the output is complete");
    EXPECT(mms_constraint_accept_bytes(c, "ax", 2) == MMS_ERR_INVALID_ARG, "bytes that cannot continue");
    EXPECT(mms_constraint_accept_bytes(c, "ab", 2) == MMS_OK && mms_constraint_is_complete(c), "the refused bytes left the state as it was");
    EXPECT(bit(mms_constraint_allowed(c), eot), "the end is allowed once complete");
    EXPECT(mms_constraint_accept(c, eot) == MMS_OK && mms_constraint_is_finished(c), "the end");
    EXPECT(mms_constraint_allowed(c) == NULL && mms_last_status() == MMS_ERR_STATE, "nothing after the end");
    EXPECT(mms_constraint_accept(c, -1) == MMS_ERR_INVALID_ARG, "a bad id");
    mms_constraint_reset(c);
    EXPECT(!mms_constraint_is_finished(c) && !mms_constraint_is_complete(c), "reset starts over");
    mms_constraint_free(c);
    mms_grammar_free(g);
    EXPECT(mms_constraint_new(NULL, NULL) == NULL && mms_last_status() == MMS_ERR_INVALID_ARG, "no grammar");
}

/* The expected errors are checked by their messages; the log would only repeat them. */
static void quiet(enum mms_log_level level, const char *message, void *user) { (void)level; (void)message; (void)user; }

int main(void) {
    mms_log_set(quiet, NULL);
    /* every mask the tests take is also computed by the plain trie walk, and a difference fails the
       call (the shortcut through plain text against the walk, for every state the walks visit) */
#if defined(_WIN32)
    _putenv_s("MMS_CONSTRAIN_CHECK", "1");
#else
    setenv("MMS_CONSTRAIN_CHECK", "1", 1);
#endif
    corpus = mms_json_parse_file(FIXTURES "json-schema-corpus.json");
    vocab = mms_vocab_load_file(FIXTURES "tok-llama3.gguf");
    if (!corpus) printf("    corpus: %s\n", mms_last_error());
    if (vocab) {   /* every token's bytes, once */
        const int32_t n_vocab = mms_vocab_n_tokens(vocab);
        int32_t id;
        pieces = (char **)calloc((size_t)n_vocab, sizeof *pieces);
        piece_len = (int *)calloc((size_t)n_vocab, sizeof *piece_len);
        for (id = 0; id < n_vocab; id++) {
            char piece[1024];
            int n = mms_token_to_piece(vocab, id, piece, sizeof piece, false);
            if (n > 0 && n <= (int)sizeof piece) { pieces[id] = (char *)malloc((size_t)n); memcpy(pieces[id], piece, (size_t)n); piece_len[id] = n; }
        }
    }
    RUN(test_grammar_notation);
    RUN(test_unsupported_keywords);
    RUN(test_api_edges);
    RUN(test_utf8_across_tokens);
    RUN(test_plain_shortcut);
    RUN(test_utf8_shortcut);
    RUN(test_subtree_shortcut);
    RUN(test_part_shortcut);
    RUN(test_corpus_verdicts);
    RUN(test_json_write);
    RUN(test_vocab_walks);
    RUN(test_sampler_constraint);
    if (vocab) {
        int32_t id;
        for (id = 0; id < mms_vocab_n_tokens(vocab); id++) free(pieces[id]);
        free(pieces);
        free(piece_len);
    }
    mms_json_free(corpus);
    mms_vocab_free(vocab);
    return test_summary();
}
