/* libFuzzer target for the JSON Schema compiler and the grammar notation: an input whose first byte
   is 'G' is grammar text, any other a schema. What compiles is then matched against the input's own
   bytes and, from wherever that stops, its shortest completion, which must leave the output complete.

     clang -g -O1 -fsanitize=fuzzer,address,undefined -I. tests/fuzz/fuzz_schema.c -o build/fuzz_schema -lm -lpthread
     build/fuzz_schema -max_total_time=60 -max_len=4096 build/fuzz-schema tests/fuzz/corpus-schema */
#define MMSCHED_IMPLEMENTATION
#include "../../mmsched.h"
#include <stdlib.h>
#include <string.h>

#define FUZZ_SCHEMA_CHECK(cond) do { if (!(cond)) { fprintf(stderr, "fuzz_schema: check failed: %s (line %d)\n", #cond, __LINE__); abort(); } } while (0)

static void fuzz_schema_quiet(enum mms_log_level level, const char *message, void *user) { (void)level; (void)message; (void)user; }

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    struct mms_grammar *g;
    struct mms_constraint *c;
    size_t i;
    mms_log_set(fuzz_schema_quiet, NULL);
    if (size > 0 && data[0] == 'G') g = mms_grammar_parse((const char *)data + 1, size - 1);
    else g = mms_grammar_from_json_schema((const char *)data, size);
    if (!g) { FUZZ_SCHEMA_CHECK(mms_last_status() != MMS_OK && mms_last_error()[0]); return 0; }
    c = mms_constraint_new(g, NULL);
    FUZZ_SCHEMA_CHECK(c != NULL);
    for (i = 0; i < size && mms_constraint_accept_bytes(c, (const char *)data + i, 1) == MMS_OK; i++) {}
    {
        char tail[1 << 16];
        int n = mms_constraint_shortest_completion(c, tail, (int)sizeof tail);
        FUZZ_SCHEMA_CHECK(n >= 0);
        if (n <= (int)sizeof tail) {
            FUZZ_SCHEMA_CHECK(mms_constraint_accept_bytes(c, tail, (size_t)n) == MMS_OK);
            FUZZ_SCHEMA_CHECK(mms_constraint_is_complete(c));
        }
    }
    mms_constraint_free(c);
    mms_grammar_free(g);
    return 0;
}
