/* bench_constrain.c - what constrained decoding costs per token, on one thread.

   build/bench_constrain [--vocab FILE] [--corpus FILE] [--walks N]

   For every schema of the corpus (tests/fixtures/text/json-schema-corpus.json: 55 schemas of
   extraction forms, API objects and configurations), it times the schema's compilation
   (mms_grammar_from_json_schema, the best of 5), the constraint's construction (the vocabulary's
   byte trie), then N walks over the vocabulary (half drawing uniformly among the allowed tokens,
   half greedy over random logits, each heading for the end after 8..48 tokens along the shortest
   completion), timing each token's engine work: mms_constraint_allowed (the mask) and
   mms_constraint_accept. The walks of one schema share a constraint, as the answers of one
   program do, so masks met before come from the cache; the first walk's are reported apart.
   --vocab: the whole genuine Llama 3 vocabulary (tools/gen_bench_vocab.py writes
   build/tok-llama3-full.gguf, the default when it is there); else the tests' pruned one. */
#define MMSCHED_IMPLEMENTATION
#include "mmsched.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct samples {
    double *v;
    size_t  n, cap;
};

static void add(struct samples *s, double x) {
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 1024;
        s->v = (double *)realloc(s->v, sizeof *s->v * s->cap);
        if (!s->v) { fprintf(stderr, "bench_constrain: out of memory\n"); exit(1); }
    }
    s->v[s->n++] = x;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, struct samples *s) {
    double sum = 0;
    size_t i;
    if (!s->n) { printf("%-34s (none)\n", what); return; }
    qsort(s->v, s->n, sizeof *s->v, cmp_double);
    for (i = 0; i < s->n; i++) sum += s->v[i];
    printf("%-34s n %7zu  median %9.1f us  mean %9.1f us  p99 %9.1f us  max %9.1f us\n", what, s->n, s->v[s->n / 2], sum / (double)s->n,
           s->v[(size_t)((double)s->n * 0.99)], s->v[s->n - 1]);
}

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

int main(int argc, char **argv) {
    const char *vocab_path = NULL, *corpus_path = "tests/fixtures/text/json-schema-corpus.json";
    struct samples compile = { NULL, 0, 0 }, build = { NULL, 0, 0 }, token = { NULL, 0, 0 }, first = { NULL, 0, 0 };
    int n_walks = 4, i, w, n_docs = 0;
    struct mms_vocab *vocab;
    struct mms_json *corpus;
    int64_t cases, c;
    int32_t n_vocab, id;
    char **pieces;
    int *piece_len;
    float *logits;
    uint64_t seed = 1;
    FILE *f;
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--vocab") && i + 1 < argc) vocab_path = argv[++i];
        else if (!strcmp(argv[i], "--corpus") && i + 1 < argc) corpus_path = argv[++i];
        else if (!strcmp(argv[i], "--walks") && i + 1 < argc) n_walks = atoi(argv[++i]);
        else { fprintf(stderr, "usage: bench_constrain [--vocab FILE] [--corpus FILE] [--walks N]\n"); return 2; }
    }
    if (!vocab_path) {
        vocab_path = (f = fopen("build/tok-llama3-full.gguf", "rb")) != NULL ? "build/tok-llama3-full.gguf" : "tests/fixtures/text/tok-llama3.gguf";
        if (f) fclose(f);
    }
    if (!(vocab = mms_vocab_load_file(vocab_path)) || !(corpus = mms_json_parse_file(corpus_path))) {
        fprintf(stderr, "bench_constrain: %s\n", mms_last_error());
        return 1;
    }
    n_vocab = mms_vocab_n_tokens(vocab);
    pieces = (char **)calloc((size_t)n_vocab, sizeof *pieces);
    piece_len = (int *)calloc((size_t)n_vocab, sizeof *piece_len);
    logits = (float *)malloc(sizeof *logits * (size_t)n_vocab);
    for (id = 0; id < n_vocab; id++) {
        char piece[1024];
        int n = mms_token_to_piece(vocab, id, piece, sizeof piece, false);
        if (n > 0 && n <= (int)sizeof piece) { pieces[id] = (char *)malloc((size_t)n); memcpy(pieces[id], piece, (size_t)n); piece_len[id] = n; }
    }
    cases = mms_json_get(corpus, 0, "cases");
    printf("bench_constrain: %s (%d tokens), %s (%lld schemas), %d walks each, one thread\n", vocab_path, (int)n_vocab, corpus_path,
           (long long)mms_json_len(corpus, cases), n_walks);
    for (c = 0; c < mms_json_len(corpus, cases); c++) {
        const int64_t sv = mms_json_get(corpus, mms_json_at(corpus, cases, c), "schema");
        const int64_t len = mms_json_write(corpus, sv, NULL, 0);
        char *schema = (char *)malloc((size_t)len + 1);
        struct mms_grammar *g = NULL;
        struct mms_constraint *con;
        double best = 1e30;
        int64_t t0;
        mms_json_write(corpus, sv, schema, (size_t)len + 1);
        for (i = 0; i < 5; i++) {
            mms_grammar_free(g);
            t0 = mms_time_us();
            g = mms_grammar_from_json_schema(schema, (size_t)len);
            if ((double)(mms_time_us() - t0) < best) best = (double)(mms_time_us() - t0);
        }
        free(schema);
        if (!g) { fprintf(stderr, "bench_constrain: %s\n", mms_last_error()); return 1; }
        add(&compile, best);
        t0 = mms_time_us();
        con = mms_constraint_new(g, vocab);
        add(&build, (double)(mms_time_us() - t0));
        for (w = 0; con && w < n_walks; w++) {
            const int wander = 8 + 8 * (w % 6);
            int step;
            for (id = 0; id < n_vocab; id++) logits[id] = (float)(rng_next(&seed) >> 40);
            mms_constraint_reset(con);
            for (step = 0; step < 2000; step++) {
                const uint32_t *mask;
                int32_t pick = -1, n_allowed = 0;
                double dt;
                t0 = mms_time_us();
                mask = mms_constraint_allowed(con);
                dt = (double)(mms_time_us() - t0);
                if (!mask) { fprintf(stderr, "bench_constrain: %s\n", mms_last_error()); return 1; }
                for (id = 0; id < n_vocab; id++) n_allowed += (mask[id >> 5] >> (id & 31)) & 1u;
                if (step >= wander) {   /* the end, else the longest token along a shortest completion */
                    char want[4096];
                    const int nw = mms_constraint_shortest_completion(con, want, (int)sizeof want);
                    int bestlen = 0;
                    for (id = 0; id < n_vocab; id++) {
                        if (!((mask[id >> 5] >> (id & 31)) & 1u)) continue;
                        if (nw == 0 && mms_vocab_is_eog(vocab, id)) { pick = id; break; }
                        if (piece_len[id] > bestlen && piece_len[id] <= nw && !memcmp(pieces[id], want, (size_t)piece_len[id])) { bestlen = piece_len[id]; pick = id; }
                    }
                } else if (w % 2 == 0) {
                    int32_t k = (int32_t)(rng_next(&seed) % (uint64_t)(n_allowed ? n_allowed : 1));
                    for (id = 0; id < n_vocab; id++) if (((mask[id >> 5] >> (id & 31)) & 1u) && k-- == 0) { pick = id; break; }
                } else {
                    for (id = 0; id < n_vocab; id++) if (((mask[id >> 5] >> (id & 31)) & 1u) && (pick < 0 || logits[id] > logits[pick])) pick = id;
                }
                if (pick < 0) { fprintf(stderr, "bench_constrain: no token to pick\n"); return 1; }
                t0 = mms_time_us();
                if (mms_constraint_accept(con, pick) != MMS_OK) { fprintf(stderr, "bench_constrain: %s\n", mms_last_error()); return 1; }
                dt += (double)(mms_time_us() - t0);
                add(&token, dt);
                if (w == 0) add(&first, dt);
                if (mms_constraint_is_finished(con)) { n_docs++; break; }
            }
        }
        mms_constraint_free(con);
        mms_grammar_free(g);
    }
    report("compile a schema (best of 5)", &compile);
    report("mms_constraint_new (the first builds the trie)", &build);
    report("per token: mask + accept", &token);
    report("per token, first walk of each", &first);
    printf("%d documents completed\n", n_docs);
    for (id = 0; id < n_vocab; id++) free(pieces[id]);
    free(pieces);
    free(piece_len);
    free(logits);
    free(compile.v);
    free(build.v);
    free(token.v);
    free(first.v);
    mms_json_free(corpus);
    mms_vocab_free(vocab);
    return 0;
}
