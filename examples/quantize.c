/* quantize: rewrites a GGUF model with quantized weight matrices.

     build/quantize [options] IN.gguf OUT.gguf TYPE
     build/quantize [options] HF_DIR OUT.gguf TYPE

   HF_DIR is a Hugging Face checkpoint folder (config.json, safetensors, tokenizer.json), read as
   the single-file GGUF it converts to (mms_mllama_folder_to_gguf: the checkpoint's own types, the
   q/k rows as Ollama orders them, the tokenizer from tokenizer.json).

   TYPE is q8_0, q4_0, q4_k, q5_k or q6_k (any case), q4_k_m (the same as q4_k --mix q4_k_m) or
   q5_k_m (the same mix on q5_k).
   Every key of IN is copied to OUT; every tensor is written, in the same order. A tensor is
   quantized to TYPE when all of these hold, else it is written as it is (its log line says why):
     - it is a matrix (2 dimensions; 1-D tensors are norms, biases, gates, rope factors),
     - its type is f32, f16 or bf16 (it goes through the type's to_float, then TYPE's from_float;
       a tensor that is already quantized is kept: requantizing only loses accuracy),
     - its row length ne[0] is a multiple of TYPE's block (32 for q8_0/q4_0, 256 for the K types),
     - it is not one of the vision tower's embedding tables (v.patch_embd, v.class_embd,
       v.position_embd, v.tile_position_embd, v.pre_tile_position_embd,
       v.post_tile_position_embd): they are added, multiplied or convolved, not multiplied as
       matrices, and mmsched's mllama loader wants them in a float type,
     - it is not in the vision tower ("v.*" and the projector "mm.*"), unless --quantize-vision:
       like Ollama, the vision weights stay as they are (f16 in Ollama's files) by default.
   Everything else (the token embedding, the text layers' projections and FFN matrices, the
   output head) is quantized.

   --mix q4_k_m: llama.cpp's Q4_K_M choice of types (written here from reading its
   llama_tensor_get_type, in the copy Ollama vendored to quantize its mllama files): q4_k
   everywhere, except q6_k for the output head (output.weight) and for two kinds of matrix where
   more_bits(i, n) holds: i < n/8 or i >= 7n/8 or (i - n/8) % 3 == 2, / rounding down. The FFN down
   projection blk.N.ffn_down.weight: i = N, n = the text layers (counted from the blk.N names). The
   self-attention V projection blk.N.attn_v.weight: i = its rank among the attn_v tensors in layer
   order and n = their count (in mllama the cross-attention layers have none, so ranks are not layer
   numbers); cross_attn_v_proj is not an attn_v tensor and stays q4_k. The vision tower, when
   quantized, gets q4_k only. A tensor whose rows do not fit the 256-element block is kept as it is
   (no fallback). q5_k_m: the same rule with q5_k in place of q4_k (llama.cpp gives Q5_K_M's Q6_K
   tensors by the same rule as Q4_K_M's, for models of one FFN per layer).

   general.file_type is set to llama.cpp's number for the result (7 q8_0, 2 q4_0, 14 q4_k,
   15 q4_k_m, 16 q5_k, 17 q5_k_m, 18 q6_k) and general.quantization_version to 2 when at least one
   tensor was quantized; when none was (a model whose rows all miss the block), both are left as in IN.

   Output: one line per tensor on stdout (index, name, shape, type from -> to, bytes from -> to,
   and why a tensor was kept), then the totals of tensor bytes and file sizes with their ratio.
   Errors go to stderr as "quantize: error: ..." with exit status 1 (missing or broken input, an
   output that cannot be written, a tensor of a type mmsched cannot read); bad usage (unknown
   option or TYPE, missing arguments) exits with 2. The whole output is built in memory before
   it is written (the GGUF writer copies every tensor), so it needs about the output's size in
   memory; IN is memory-mapped.

   Only the C standard library and mmsched.h; C99:
     cc -std=c99 -Wall -Wextra -Werror -pedantic -O2 -I. examples/quantize.c -o build/quantize -lm -lpthread */
#define MMSCHED_IMPLEMENTATION
#include "mmsched.h"
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "q4_k_m.h"

/* A Hugging Face checkpoint folder: one with a config.json. */
static bool is_folder(const char *path) {
    char p[4096];
    FILE *f;
    if (strlen(path) + 13 >= sizeof p) return false;
    snprintf(p, sizeof p, "%s/config.json", path);
    if ((f = fopen(p, "rb")) != NULL) fclose(f);
    return f != NULL;
}

static void usage(FILE *out) {
    fprintf(out,
        "usage: quantize [options] IN.gguf|HF_DIR OUT.gguf TYPE\n"
        "Rewrites a GGUF model with its weight matrices quantized to TYPE.\n"
        "\n"
        "TYPE: q8_0, q4_0 (blocks of 32), q4_k, q5_k, q6_k (blocks of 256), q4_k_m (= q4_k --mix q4_k_m)\n"
        "or q5_k_m (the same mix on q5_k).\n"
        "Quantized: 2-D f32/f16/bf16 matrices whose row length is a multiple of the block (token\n"
        "embedding, attention and FFN matrices, output head). Kept as they are: 1-D tensors (norms,\n"
        "biases, gates), rows that miss the block, tensors already quantized, the vision tower's\n"
        "patch/class/position/tile embeddings, and by default the whole vision tower (v.*, mm.*).\n"
        "\n"
        "options:\n"
        "  --mix q4_k_m        llama.cpp's Q4_K_M: q4_k, with q6_k for output.weight, for ffn_down of\n"
        "                      layer i of n and for the i-th of n self-attention attn_v tensors when\n"
        "                      i < n/8, i >= 7n/8, or (i - n/8) %% 3 == 2; needs TYPE q4_k\n"
        "  --keep-vision       keep the vision tower (v.*, mm.*) as it is (the default, as Ollama)\n"
        "  --quantize-vision   quantize the vision tower's matrices too (not its embedding tables)\n"
        "  -q, --quiet         no per-tensor lines, only the totals\n"
        "  -h, --help          this text\n"
        "\n"
        "general.file_type becomes llama.cpp's number for TYPE (7 q8_0, 2 q4_0, 14 q4_k, 15 q4_k_m,\n"
        "16 q5_k, 17 q5_k_m, 18 q6_k) when any tensor is quantized, else it is left as it is.\n"
        "Exit status: 0 done, 1 error (input, output, model), 2 bad usage.\n");
}

static const char *remove_on_error;   /* the output, when this run created it */

static void die(const char *fmt, ...) MMS_PRINTF(1, 2);
static void die(const char *fmt, ...) {
    va_list ap;
    if (remove_on_error) remove(remove_on_error);
    fputs("quantize: error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static void bad_usage(const char *fmt, const char *arg) {
    fputs("quantize: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\n(quantize --help for usage)\n", stderr);
    exit(2);
}

/* The library reports errors through mms_last_error(); its own log lines would repeat them. */
static void log_warnings(enum mms_log_level level, const char *msg, void *user) {
    (void)user;
    if (level == MMS_LOG_WARN) fprintf(stderr, "quantize: warning: %s\n", msg);
}

struct target { const char *name; enum mms_type type; uint32_t file_type; bool mix; };

static bool parse_type(const char *s, struct target *t) {
    static const struct target types[] = {
        { "q8_0", MMS_TYPE_Q8_0, 7, false },
        { "q4_0", MMS_TYPE_Q4_0, 2, false },
        { "q4_k", MMS_TYPE_Q4_K, 14, false },
        { "q5_k", MMS_TYPE_Q5_K, 16, false },
        { "q6_k", MMS_TYPE_Q6_K, 18, false },
        { "q4_k_m", MMS_TYPE_Q4_K, 15, true },
        { "q5_k_m", MMS_TYPE_Q5_K, 17, true },
    };
    char low[16];
    size_t i;
    for (i = 0; s[i] && i < sizeof low - 1; i++) low[i] = (char)tolower((unsigned char)s[i]);
    low[i] = '\0';
    if (s[i]) return false;
    for (i = 0; i < sizeof types / sizeof types[0]; i++) {
        if (strcmp(low, types[i].name) == 0) {
            *t = types[i];
            return true;
        }
    }
    return false;
}

static bool is_vision(const char *name) { return starts_with(name, "v.") || starts_with(name, "mm."); }

static bool is_vision_embedding(const char *name) {
    return starts_with(name, "v.patch_embd") || starts_with(name, "v.class_embd") || starts_with(name, "v.position_embd") ||
           starts_with(name, "v.tile_position_embd") || starts_with(name, "v.pre_tile_position_embd") ||
           starts_with(name, "v.post_tile_position_embd");
}

static long file_size(const char *path) {
    FILE *f = fopen(path, "rb");
    long n = -1;
    if (!f) return -1;
    if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    fclose(f);
    return n;
}

static const char *shape_str(const struct mms_gguf_tensor_info *info, char *buf, size_t size) {
    int d;
    size_t at = 0;
    buf[0] = '\0';
    for (d = 0; d < info->n_dims && at < size; d++)
        at += (size_t)snprintf(buf + at, size - at, "%s%lld", d ? ", " : "[", (long long)info->ne[d]);
    if (at < size) snprintf(buf + at, size - at, "]");
    return buf;
}

int main(int argc, char **argv) {
    const char *in_path = NULL, *out_path = NULL, *type_arg = NULL, *mix = NULL;
    bool quantize_vision = false, quiet = false, out_existed;
    struct target target;
    struct mms_gguf *in;
    struct mms_gguf_writer *w;
    int64_t i, n_tensors, n_kv;
    int n_layer = 0, n_quantized = 0, positional = 0, a;
    uint64_t bytes_in = 0, bytes_out = 0;
    long size_in, size_out;
    FILE *probe;
    static struct mix_layers layers;

    for (a = 1; a < argc; a++) {
        const char *s = argv[a];
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(s, "--mix")) {
            if (++a >= argc) bad_usage("%s needs a value (q4_k_m)", s);
            mix = argv[a];
            if (strcmp(mix, "q4_k_m") != 0 && strcmp(mix, "Q4_K_M") != 0) bad_usage("unknown --mix '%s' (known: q4_k_m)", mix);
        }
        else if (!strcmp(s, "--keep-vision")) quantize_vision = false;
        else if (!strcmp(s, "--quantize-vision")) quantize_vision = true;
        else if (!strcmp(s, "-q") || !strcmp(s, "--quiet")) quiet = true;
        else if (s[0] == '-' && s[1] != '\0') bad_usage("unknown option '%s'", s);
        else if (positional == 0) { in_path = s; positional++; }
        else if (positional == 1) { out_path = s; positional++; }
        else if (positional == 2) { type_arg = s; positional++; }
        else bad_usage("too many arguments ('%s')", s);
    }
    if (positional < 3) {
        usage(stderr);
        return 2;
    }
    if (!parse_type(type_arg, &target)) bad_usage("unknown TYPE '%s' (known: q8_0, q4_0, q4_k, q5_k, q6_k, q4_k_m, q5_k_m)", type_arg);
    if (mix) {
        if (target.type != MMS_TYPE_Q4_K) bad_usage("--mix q4_k_m needs TYPE q4_k, not '%s'", type_arg);
        target.mix = true;
        target.file_type = 15;
        target.name = "q4_k_m";
    }
    if (strcmp(in_path, out_path) == 0) die("OUT '%s' is IN: write to another file", out_path);
    mms_log_set(log_warnings, NULL);

    /* the input: a readable file first, for a message with the reason */
    if (!(probe = fopen(in_path, "rb"))) die("cannot open '%s': %s", in_path, strerror(errno));
    fclose(probe);
    if (is_folder(in_path)) {   /* a Hugging Face checkpoint folder, read as the GGUF it converts to */
        if (!(in = mms_mllama_folder_to_gguf(in_path))) die("cannot read the checkpoint folder '%s': %s", in_path, mms_last_error());
    } else if (!(in = mms_gguf_open(in_path))) die("cannot read '%s': %s", in_path, mms_last_error());
    /* the output: can we write there at all? (append mode: an existing file is not truncated) */
    probe = fopen(out_path, "rb");
    out_existed = probe != NULL;
    if (probe) fclose(probe);
    if (!(probe = fopen(out_path, "ab"))) die("cannot write '%s': %s", out_path, strerror(errno));
    fclose(probe);
    if (!out_existed) remove_on_error = out_path;

    if (!(w = mms_gguf_writer_new())) die("%s", mms_last_error());
    n_kv = mms_gguf_get_n_kv(in);
    for (i = 0; i < n_kv; i++)
        if (mms_gguf_writer_copy_kv(w, in, i) != MMS_OK) die("copying key %lld of '%s': %s", (long long)i, in_path, mms_last_error());

    n_tensors = mms_gguf_get_n_tensors(in);
    mix_layers_init(&layers);
    for (i = 0; i < n_tensors; i++) {           /* text layers, for the mix */
        struct mms_gguf_tensor_info info;
        if (mms_gguf_get_tensor(in, i, &info) != MMS_OK) die("'%s': %s", in_path, mms_last_error());
        if (!mix_layers_add(&layers, info.name)) die("'%s': tensor '%s' is past layer %d", in_path, info.name, MIX_MAX_LAYERS - 1);
    }
    mix_layers_done(&layers);
    n_layer = layers.n_layer;
    if (!quiet)
        printf("quantize: %s -> %s, %s%s, %lld tensors, %d text layers\n", in_path, out_path, target.name,
               quantize_vision ? " (vision tower too)" : "", (long long)n_tensors, n_layer);

    for (i = 0; i < n_tensors; i++) {
        struct mms_gguf_tensor_info info;
        const struct mms_type_traits *src_tr;
        enum mms_type want, to;
        const char *why = NULL;
        char why_buf[128], shape[96];
        const void *data;
        void *qdata = NULL;
        size_t out_size;
        if (mms_gguf_get_tensor(in, i, &info) != MMS_OK) die("'%s': %s", in_path, mms_last_error());
        if (info.type == MMS_TYPE_INVALID)
            die("tensor '%s' in '%s' has GGUF type %u, which mmsched cannot read", info.name, in_path, info.ggml_type);
        src_tr = mms_get_type_traits(info.type);
        want = target.mix ? mix_type(info.name, &layers, target.type) : target.type;
        if (info.n_dims != 2) why = info.n_dims == 1 ? "1-D" : "not a matrix";
        else if (src_tr->is_quantized) why = "already quantized";
        else if (!src_tr->is_float) why = "not a float type";
        else if (is_vision_embedding(info.name)) why = "vision embedding table";
        else if (is_vision(info.name) && !quantize_vision) why = "vision tower";
        else if (info.ne[0] % mms_blck_size(want) != 0) {
            snprintf(why_buf, sizeof why_buf, "row length %lld not a multiple of %s's block %lld", (long long)info.ne[0],
                     mms_type_name(want), (long long)mms_blck_size(want));
            why = why_buf;
        }
        to = why ? info.type : want;
        data = info.data;
        out_size = info.size;
        if (!why) {
            const struct mms_type_traits *dst_tr = mms_get_type_traits(to);
            const int64_t rows = info.ne[1], row_in = (int64_t)mms_row_size(info.type, info.ne[0]);
            const size_t row_out = mms_row_size(to, info.ne[0]);
            float *row = (float *)malloc(sizeof(float) * (size_t)info.ne[0]);
            int64_t r;
            out_size = row_out * (size_t)rows;
            qdata = malloc(out_size ? out_size : 1);
            if (!row || !qdata) die("out of memory quantizing '%s' (%zu bytes)", info.name, out_size);
            for (r = 0; r < rows; r++) {
                src_tr->to_float((const char *)info.data + r * row_in, row, info.ne[0]);
                dst_tr->from_float(row, (char *)qdata + (size_t)r * row_out, info.ne[0]);
            }
            free(row);
            data = qdata;
            n_quantized++;
        }
        if (mms_gguf_writer_add_tensor(w, info.name, to, info.n_dims, info.ne, data) != MMS_OK)
            die("adding tensor '%s': %s", info.name, mms_last_error());
        free(qdata);
        bytes_in += info.size;
        bytes_out += out_size;
        if (!quiet)
            printf("[%4lld/%lld] %-40s %-18s %5s -> %-5s %10zu -> %10zu bytes%s%s%s\n", (long long)i + 1, (long long)n_tensors, info.name,
                   shape_str(&info, shape, sizeof shape), mms_type_name(info.type), mms_type_name(to), info.size, out_size,
                   why ? " (kept: " : "", why ? why : "", why ? ")" : "");
    }
    if (n_quantized > 0) {
        if (mms_gguf_writer_set_u32(w, "general.file_type", target.file_type) != MMS_OK ||
            mms_gguf_writer_set_u32(w, "general.quantization_version", 2) != MMS_OK)
            die("%s", mms_last_error());
    }
    if (mms_gguf_writer_write(w, out_path) != MMS_OK) die("cannot write '%s': %s", out_path, mms_last_error());
    remove_on_error = NULL;
    mms_gguf_writer_free(w);
    mms_gguf_close(in);

    size_in = is_folder(in_path) ? -1 : file_size(in_path);   /* a folder has no one file size */
    size_out = file_size(out_path);
    printf("total: %d of %lld tensors quantized to %s; tensor data %llu -> %llu bytes (%.3fx), file ",
           n_quantized, (long long)n_tensors, target.name, (unsigned long long)bytes_in, (unsigned long long)bytes_out,
           bytes_in ? (double)bytes_out / (double)bytes_in : 1.0);
    if (size_in > 0) printf("%ld -> %ld bytes (%.3fx)\n", size_in, size_out, (double)size_out / (double)size_in);
    else printf("%ld bytes (from a folder)\n", size_out);
    if (n_quantized == 0)
        printf("note: no tensor qualified for %s; general.file_type left as it was\n", target.name);
    return 0;
}
