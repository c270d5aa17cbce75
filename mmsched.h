/*
   mmsched.h - v0.1.0 - tensors, graphs and backends for running Llama 3.2 Vision, in one file

   This file is generated from src/ by tools/amalgamate.sh: edit the parts, not this file.

   DO THIS
       In exactly one C or C++ file, before any other include:

           #define MMSCHED_IMPLEMENTATION
           #include "mmsched.h"

       Everywhere else just include it. Link with -lm -lpthread (Windows: nothing extra).

   PLATFORMS
       Compilers: gcc and clang (C99, or as C++); MinGW-w64 on Windows. The code keeps to what MSVC
       accepts too (no VLAs, statement expressions, unguarded __attribute__ or C++ designated
       initialisers; Win32 calls and Interlocked atomics under _MSC_VER), but MSVC itself is not in
       CI and gets the scalar kernels only (the SIMD ones use gcc/clang target attributes).
       Systems: Linux and other POSIX systems (pthreads, mmap); Windows through Win32 (threads,
       SRW locks, CreateFileMapping; paths are UTF-8 and go to the wide API). With MinGW and the
       old msvcrt, include mmsched.h before other headers (it turns on MinGW's C99 printf, which
       the messages need) or define __USE_MINGW_ANSI_STDIO=1.
       ISAs: x86-64 (AVX2 and AVX-512 kernels at run time) and 64-bit ARM (NEON kernels, dotprod at
       run time: detected on Linux; elsewhere only when the build targets it); any other: the
       scalar kernels.
       Files the library writes are opened in binary mode, so text files (graph dumps, SVG plans)
       have LF line ends on Windows too. On Windows your program's stdout and stderr stay in text
       mode unless you _setmode them (the examples and tests built by `make test-windows` do).

       For the CUDA backend, also define MMS_CUDA in that file, compile mmsched_cuda.cu with nvcc
       (-Xcompiler -fno-exceptions,-fno-threadsafe-statics, so a C program links it without the C++
       runtime) and link it with -lcudart -lcublas (`make cuda` shows the commands).

   OPTIONS (define before the implementation include)
       MMSCHED_IMPLEMENTATION   emit the definitions (one translation unit only)
       MMS_STATIC               make every public function static: several differently configured
                                copies can live in one program
       MMS_API                  the decoration of public functions (default extern)
       MMS_CUDA                 the CUDA entry points come from mmsched_cuda.cu; without it they
                                exist and return MMS_ERR_UNSUPPORTED
       MMS_MALLOC, MMS_REALLOC, MMS_FREE
                                the host allocator; define all three or none
       MMS_ASSERT(c)            internal invariant check (default assert)
       MMS_NO_SIMD              leave out the AVX2, AVX-512 and NEON kernels (the scalar ones stay)
       MMS_NO_MLLAMA            leave out Llama 3.2 Vision (section 13)
       MMS_NO_TEXT              leave out the tokenizer, chat template and sampler (section 12), and
                                with them mllama (MMS_NO_MLLAMA: it writes a checkpoint's tokenizer)
       MMS_NO_GGUF              leave out the model-file readers (GGUF reader and writer, JSON,
                                safetensors: section 11), and with them the parts that read such
                                files: MMS_NO_TEXT and MMS_NO_MLLAMA
                                (the three MMS_NO_* options change the declarations too: define them
                                before every include, the same everywhere)

   ENVIRONMENT
       MMS_LOG_LEVEL=debug|info|warn|error|none   what the default logger prints (default warn)
       MMS_CPU_KERNELS=auto|scalar|avx2|avx512|neon|neon_dotprod   the CPU kernel set (default auto)
       MMS_CPU_PROFILE=1                          per-op-type CPU time, printed when the backend is freed (section 9)
       MMS_SCHED_DEBUG=1|2                        scheduler trace (section 8)
       MMS_SCHED_POISON=1                         fill compute memory with NaN at each allocation
       MMS_SCHED_DUMP=glob, MMS_SCHED_DUMP_DIR    write matching computed tensors to files

   CONTENTS
       1. Errors and logging; objects, ownership and threads
       2. Types
       3. Contexts and tensors
       4. Ops
       5. Graphs
       6. Buffers, backends and tensor lifetimes
       7. The graph allocator
       8. The scheduler: several backends, and results kept across graphs
       9. The CPU backend
       10. The CUDA backend
       11. GGUF files
       12. Text: tokenizer, chat template, sampling
       13. Llama 3.2 Vision (mllama)
       14. The mllama program
       15. Differences from ggml, on purpose

   EXAMPLE
       struct mms_init_params p = { 0, NULL, true };       // metadata only
       struct mms_context *ctx = mms_init(p);
       mms_backend_t cpu = mms_backend_cpu_init();

       struct mms_tensor *w = mms_new_tensor_2d(ctx, MMS_TYPE_F16, 1280, 5120);   // in 1280, out 5120
       struct mms_tensor *x = mms_new_tensor_2d(ctx, MMS_TYPE_F32, 1280, 1601);   // 1601 tokens
       struct mms_tensor *y = mms_gelu(ctx, mms_mul_mat(ctx, w, x));             // [5120, 1601]
       struct mms_cgraph *g = mms_new_graph(ctx);
       mms_build_forward_expand(g, y);
       if (mms_graph_status(g) != MMS_OK) fail(mms_graph_error(g));

       mms_backend_buffer_t buf = mms_backend_alloc_ctx_tensors(ctx, cpu);
       mms_backend_tensor_set(w, weights, 0, mms_nbytes(w));
       mms_backend_tensor_set(x, input, 0, mms_nbytes(x));
       if (mms_backend_graph_compute(cpu, g) != MMS_OK) fail(mms_last_error());
       mms_backend_tensor_get(y, output, 0, mms_nbytes(y));

       mms_backend_buffer_free(buf); mms_backend_free(cpu); mms_free(ctx);

       examples/simple.c is a complete program (a self-attention block computed two ways).

   1. ERRORS AND LOGGING; OBJECTS, OWNERSHIP AND THREADS
       One error model. Anything that user input can break returns an enum mms_status: MMS_OK (0),
       negative errors (INVALID_ARG, OOM, IO, FORMAT, UNSUPPORTED, BACKEND, STALE, STATE) and
       MMS_ABORTED (1); functions that create objects return NULL instead. Either way the status and a
       message are the calling thread's last error, the one store every failure writes:
       mms_last_status(), mms_last_error() (mms_clear_error() empties it; success does not). Messages
       name what failed (the op, the tensors with their names, types and shapes) and, where there is
       one, the fix. Objects that fail stickily keep a copy of their first failure, read with the same
       pair of names: mms_ctx_status / mms_ctx_error (an op built on a context failed; cleared by
       mms_ctx_clear_error or mms_reset) and mms_graph_status / mms_graph_error (the graph was given a
       failed op or could not grow). The library never exits; it aborts only on a broken internal
       invariant.

       Logging: each failure is sent once to the log callback (mms_log_set; the default prints
       warnings and errors to stderr, MMS_LOG_LEVEL changes the threshold), where it is raised; a call
       that adds context on the way out replaces the message the caller reads but does not log again.
       A question is not a failure: mms_backend_tensor_check and the GGUF getters asked for a key that
       is not there record their answer as the last error and log nothing (a caller that needed the key
       reports it). mms_set_error lets code that implements the backend interface raise errors the
       same way.

       Building graphs is sticky: an op given bad arguments returns NULL and records the first error
       in its context; ops given that NULL return NULL without a new message, and a graph given it
       records the failure and refuses to compute. So a whole model builder can run and be checked once.

       Parameter structs: a zeroed struct means the defaults everywhere (mms_init_params,
       mms_sampler_params, mms_mllama_context_params, mms_mllama_image_params; a load needs only path
       and cpu in mms_mllama_load_params). Negative counts and sizes are refused, not defaulted.

       Objects, who frees them and how long they are valid:
         context (mms_init)       owns its tensors and graphs: pointers to them are valid until
                                  mms_reset or mms_free of the context; their data as section 6 says.
         buffer (alloc_buffer,    owned by the caller, freed with mms_backend_buffer_free; tensors
           alloc_ctx_tensors)     placed in it do not keep it alive (using them after is MMS_ERR_STALE).
         backend                  owned by the caller; free it after every scheduler, model and
                                  context that uses it.
         graph allocator          owns its compute buffers (freed with it).
         scheduler                owns its compute memory and the buffers of kept tensors (freed
                                  with it, or one by one by mms_backend_sched_release); not its backends.
         gguf (mms_gguf_open)     owns the mapping: data pointers into it are valid until mms_gguf_close.
         vocab, sampler           owned by the caller (mms_vocab_free, mms_sampler_free).
         mllama model             owns its files and weight buffers, not its backends; free every
                                  context made from it first.
         mllama context           refers to its model (which must outlive it); owns its scheduler,
                                  KV cache and encoded images. mms_mllama_get_logits' pointer is valid
                                  until the next mms_mllama_decode, kv_clear or context free.
         mllama image             owned by the caller (mms_mllama_image_free).
       Threads: the last error is per thread; the log callback, the registry of live buffers and the
       registry of tensors that kept tensors were computed from are shared and locked, so buffers may
       be made and freed on any thread, and the callback may be called from any thread that raises an
       error. Everything else is one thread at a time per object: a context (and the tensors and graphs
       in it), a graph allocator, a scheduler, a sampler, an mllama context. Objects that are only read
       once made (a vocab, an open gguf) may be read from several threads.
       Shared by several threads at once, as they are:
         a CPU backend            graphs of several schedulers (contexts on other threads) take turns
                                  on its thread pool under its lock; mms_backend_cpu_set_n_threads
                                  waits for the running graph. Its profile switches are not locked.
         a loaded mllama model    read-only once loaded: any number of mllama contexts made from it
                                  may decode and encode images on as many threads at once, each
                                  context used by one thread at a time (each has its own scheduler,
                                  KV cache, image cache and logits). On the CPU their graphs take turns
                                  on the backend; building, planning, masks and sampling run in
                                  parallel. Make and free contexts on any thread; free the model last.
                                  make test-tsan runs this under ThreadSanitizer.
       A CUDA backend (mmsched_cuda.cu) has no such lock: the contexts of a model with weights on one
       must not compute at the same time (take turns around each call, or run several conversations
       as sequences of one context).

   2. TYPES
       MMS_TYPE_F32, F16 (IEEE half), BF16 (bfloat16) and I32 (indices, positions, argmax).
       mms_get_type_traits(type) gives name, block size, bytes per block and row converters.
       Conversions to F16 and BF16 round to nearest even; NaN stays NaN, overflow becomes infinity.

       Quantized block types, with GGUF's exact layouts (files from the GGUF ecosystem load as they
       are): MMS_TYPE_Q8_0 and Q4_0 (blocks of 32 values: an f16 scale and 8-bit or 4-bit values) and
       Q4_K and Q6_K (blocks of 256 in sub-blocks of 32 or 16 with 6-bit or 8-bit sub-scales; the
       usual weights of Ollama's Q4_K_M models). to_float dequantizes, bit-identical to the gguf
       package's reference; from_float is our quantizer (per block: Q8_0 and Q4_0 as the reference
       does; K types fit each sub-block by least squares). A row of a block type is ne[0] / block
       size blocks, so ne[0] must be a multiple of the block size. They are weights: the src0 of
       mul_mat (b stays f32) and of get_rows, and either side of cpy to or from a float type
       (whole contiguous rows); other ops refuse them when built. examples/quantize.c converts a GGUF.

   3. CONTEXTS AND TENSORS
       A context (mms_init) holds tensor metadata and, unless no_alloc, tensor data. With
       mem_size 0 it grows as needed; with a caller-owned mem_buffer it never grows and running out
       is MMS_ERR_OOM. mms_reset drops every tensor and graph; mms_free releases everything.

       struct mms_tensor is ggml's layout: type, op, ne[4] element counts (ne[0] is contiguous),
       nb[4] byte strides, op_params, src[], view_src/view_offs, data, buffer, name and flags.
       A weight matrix with `in` inputs and `out` outputs has ne = {in, out} and is used as
       mms_mul_mat(W, x). Flags: mms_set_input (the caller writes it before compute), mms_set_output
       (the caller reads it after compute; never reused inside the graph) and mms_set_persistent
       (kept across later graphs of one scheduler: section 8).

       Views share memory: view_1d..4d (byte strides and offset; must lie inside the source),
       reshape_1d..4d (contiguous sources), permute (source dim i goes to position axis_i),
       transpose, view_tensor. cont / cont_2d..4d and dup make contiguous copies.

   4. OPS
       Float operands may be F32, F16 or BF16; kernels compute in f32 (sums of norms and softmax in
       double). Results of element-wise ops, norms, softmax and rope have a's type; others are F32.
       Shapes are checked when the op is built.

       op                          shapes
       add sub mul div             a [any], b broadcast over a (a.ne[i] % b.ne[i] == 0)
       scale                       a * s
       sqr sqrt exp tanh silu      element-wise
       gelu                        exact: 0.5 x (1 + erf(x / sqrt 2))
       gelu_tanh                   0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
       sum_rows                    [n, r1, r2, r3] -> F32 [1, r1, r2, r3]
       argmax                      [n, r1, r2, r3] -> I32 [r1, r2, r3], first maximum, NaN never wins
       norm, rms_norm              over ne[0]; layer norm has no affine part (multiply and add after)
       mul_mat                     a [K, M, A2, A3] x b [K, N, B2, B3] -> F32 [M, N, B2, B3];
                                   B2 % A2 == 0, B3 % A3 == 0 (grouped-query heads); any strides
       soft_max_ext                softmax(a * scale + mask) over ne[0]; mask F32/F16 [ne0, >= ne1,
                                   broadcast over dims 2, 3]; a row with every entry -inf gives zeros
       rope_ext                    a [head_dim, n_head, n_tokens]; I32 positions [n_tokens]; NORMAL
                                   pairs (2i, 2i+1), NEOX pairs (i, i + n_dims/2); optional F32
                                   freq_factors [n_dims/2] divide the frequencies (llama3 scaling)
       concat                      along one dim; other dims equal; same type (I32 too)
       pad                         zeros appended at the end of each dim
       get_rows                    a [ne0, R, A2, A3] by I32 b [n, A2, A3] -> [ne0, n, A2, A3]; an index
                                   outside 0..R-1 is a compute error naming the node and the index
       cpy                         a into b (same element count, row-major order, converting between
                                   float types); returns a view of b
       cast                        a as a new contiguous tensor of another float type (CONT)
       set_rows                    a [ne0, R, ne2, ne3], b [ne0, n, ...], rows I32 [n]: row rows[i] of a
                                   := row i of b (converted); returns a view of a (a KV cache written
                                   at the batch's positions: the same graph at every position)
       im2col                      kernel [KW, KH, IC, OC], input [W, H, IC, N] -> [IC*KH*KW, OW, OH, N]
                                   (1-D: [KW, IC, OC], [W, IC, N] -> [IC*KW, OW, N])
       conv_2d                     im2col + mul_mat -> F32 [OW, OH, OC, N] (the patch embedding)
       flash_attn_ext              q [D, n_q, H, B], k [D, n_kv, Hkv, B], v [Dv, n_kv, Hkv, B],
                                   mask [n_kv, >= n_q, 1|H, 1|B] -> F32 [Dv, H, n_q, B]; streaming
                                   softmax: the n_q x n_kv scores are never stored; a query whose keys
                                   are all masked gives zeros
       flash_attn_ext_mask_rows    the same with shared mask rows: query row i adds mask row
                                   mask_rows[i] (I32 [n_q]; the mask [n_kv, >= 1, 1|H, 1|B]), e.g. a
                                   padding mask as two rows instead of n_q x n_kv

       Not implemented (an error says so when the op is built): ALiBi (max_bias != 0) and YaRN
       (ext_factor != 0).

   5. GRAPHS
       mms_new_graph(ctx) then mms_build_forward_expand(graph, tensor) for each output. The order is
       ggml's: depth first, sources in order, each tensor once. Tensors with op NONE are leafs, the
       rest nodes (views are nodes that compute nothing). A tensor marked persistent is a leaf too,
       except in a graph that expands it itself: that graph computes it, any other graph reads its kept
       value (whether it has been computed yet is checked when the graph is allocated, not here, so
       graphs may be built before). To compute a kept tensor and use it in one graph, expand it before
       what uses it. There is no size cap: arrays grow, and the
       walk is iterative, so a chain of 100,000 ops is fine. mms_graph_print writes a table of
       nodes and leafs (op, type, shape, flags i/o/p, sources); mms_graph_dump_dot writes Graphviz.

   6. BUFFERS, BACKENDS AND TENSOR LIFETIMES
       A buffer type says where memory lives, a buffer is one allocation of it, and tensors are
       placed in buffers: all the tensors of a context at once (mms_backend_alloc_ctx_tensors), or
       one by one at chosen addresses (mms_backend_tensor_alloc, mms_backend_view_init). Data moves
       with mms_backend_tensor_set/get/memset/copy, which check the byte range.

       Memory kinds. Placing a tensor writes its placement record (tensor->placement): the kind of
       memory, taken from the buffer's usage at that moment, the buffer's process-unique uid and its
       generation, and the graph that placed it. Nothing else decides what a tensor's memory is
       (mms_tensor_memory_kind reads it):
         MMS_MEMORY_HOST        data of an allocating context     valid until the context is reset or freed
         MMS_MEMORY_STATIC      a buffer of the caller's (usage   valid until the buffer is freed
                                ANY or WEIGHTS): weights, caches
         MMS_MEMORY_COMPUTE     a graph allocator's (usage        valid until that allocator's next
                                COMPUTE), placed for one graph    allocation (or its scheduler's reset)
         MMS_MEMORY_PERSISTENT  a kept tensor's own buffer in a   valid until mms_backend_sched_release
                                scheduler (usage PERSISTENT)      or the scheduler is freed
         MMS_MEMORY_RESERVE     a scheduler's stand-in while it   never holds data
                                reserves (usage RESERVE)
       Every data access and every compute checks the record with one lookup in the registry of live
       buffers (never through tensor->buffer, which may point at freed memory; mms_backend_tensor_check
       asks the same question without logging):
         - never placed                       -> MMS_ERR_STATE, "has no memory: allocate it first"
         - its buffer was freed               -> MMS_ERR_STALE, "whose buffer has been freed", even if
                                                 new memory now sits at the same address
         - its buffer was reset since         -> MMS_ERR_STALE, "handed out again (placed in generation
           (mms_backend_buffer_reset)            g, the buffer is at h)": keep results across
                                                 allocations by marking them persistent or copying out
         - a view whose source fails          -> the source's error
       Graph allocators reset their buffers before handing memory out again, which is how the use of a
       previous graph's intermediate becomes an error instead of silently wrong numbers. The checks
       cost a hash lookup per tensor per compute; they are always on.

       Writes and kept tensors. Every write made through the library counts in the tensor's version
       (tensor->version; a write to a view counts for its source): tensor_set, memset, copies,
       mms_backend_buffer_clear (all its tensors) and computing the tensor in a graph. A tensor kept by a
       scheduler (section 8) remembers what it was computed from: the leafs of the graph that computed
       it, at their versions then, and through kept leafs what those were computed from. Reading it
       (as a leaf of a graph, with tensor_get or a copy) after one of them was written is
       MMS_ERR_STALE naming the input:
           image -> [encoder graph] -> features (kept) -> [decoder graphs ...]
           mms_backend_tensor_set(image, new_pixels, ...);       // a new picture, same input tensor
           mms_backend_sched_alloc_graph(s, decoder);             // MMS_ERR_STALE: kept tensor
               // 'features' is out of date: graph #3 computed it from 'image', which has been written since
           g = mms_new_graph(ctx); mms_build_forward_expand(g, features);   // expanding it computes it again
           mms_backend_sched_alloc_graph(s, g); mms_backend_sched_graph_compute(s, g);   // now fresh
       A kept tensor placed in new memory whose graph has not been computed yet is MMS_ERR_STATE to
       read. Writing a kept tensor yourself (tensor_set) makes your value its value. Writes that bypass
       the library (through tensor->data) are not seen: use mms_backend_tensor_set for inputs of kept
       tensors.

       mms_backend_graph_compute(backend, graph) refuses a graph whose build failed, a tensor without
       memory or with stale memory, memory the backend cannot use, and ops it does not support.
       The backend interface (struct mms_backend_i and friends, at the end of the declarations) is
       public: the CPU backend, the CUDA backend and the test suite's backends implement it.

   7. THE GRAPH ALLOCATOR
       mms_gallocr_new(buft) (or new_n for several buffer types), mms_gallocr_reserve(ga, worst_case)
       at start-up, then mms_gallocr_alloc_graph(ga, graph) before each compute. Its rules (which
       tensors are planned, lifetimes, inputs surviving compute, the in-place whitelist, when a
       stored plan is reused) are listed with its declarations below.

       Planning works on lifetime intervals, not in execution order: inputs first at the bottom,
       then the rest placed by three orderings (largest first, longest-lived first, in order with
       best fit) at the lowest free offset during their lifetime; the smallest plan wins. A buffer
       type's maximum size splits a buffer into chunks; there are no other limits.

       mms_gallocr_get_buffer_info gives, per buffer, the planned bytes, the lower bound (the
       largest sum of live tensor sizes at any step under the rules), the universal bound (what no
       plan can beat, even overwriting every dying input), the bytes without any reuse and the
       bytes allocated. mms_gallocr_get_tensor_info lists each tensor's buffer, offset, size, first
       and last use and the tensor it replaced in place; mms_gallocr_print_plan prints both, and
       mms_gallocr_write_svg draws the plan (examples/bench writes build/plan_*.svg).

       Every alloc_graph starts a new generation of the buffers, so a tensor of an earlier
       allocation that is still used (read back, set, or computed) is reported as stale, naming it.

   8. THE SCHEDULER: SEVERAL BACKENDS, AND RESULTS KEPT ACROSS GRAPHS
       mms_backend_t backends[2] = { gpu, cpu };              // priority order
       mms_backend_sched_t s = mms_backend_sched_new(backends, NULL, 2, false, false);
       mms_backend_sched_reserve(s, worst_case_graph);        // optional: size memory up front
       for each step: build graph g; mms_backend_sched_alloc_graph(s, g); set the inputs;
                      mms_backend_sched_graph_compute(s, g); read the outputs.

       Where an op runs, in this order: where the caller pinned it (set_tensor_backend); where the
       memory it writes lives (a CPY into a cache); where the weights it reads live (src[0] or src[1]
       in a buffer with usage MMS_BUFFER_USAGE_WEIGHTS; with op_offload, a higher-priority backend
       whose offload_op accepts the op takes it from host weights); next to its neighbours (spread
       down then up, first from every backend but the last, then from all); else the first backend
       that supports it. A backend that does not support the op is never chosen (fallback to the
       next that does). Views live with their source. Inputs without memory go to the last backend.
       Consecutive ops on one backend form a split; a split copies in, before it runs, every tensor
       it reads from memory its backend cannot use (synchronously for graph inputs, else after
       waiting for the producing backend's event, or synchronizing it, asynchronously when the
       destination backend can). With parallel, each split input has several copies and consecutive
       graphs use them in turn.

       The caller's graph is not rewired: the scheduler computes on its own clones of the nodes,
       whose sources point at the copies, and gives each caller tensor the memory of its clone.
       Its compute memory is one graph allocator with a buffer per backend (mms_backend_sched_
       get_gallocr for the plan and the picture).

       Results across graphs. A graph's tensors live in compute memory that the next allocation
       hands out again. Four things follow:
       - Mark a tensor with mms_set_persistent and it is placed in a buffer of its own on its backend
         (a kept tensor, MMS_MEMORY_PERSISTENT). A graph that expands it computes it (into that
         buffer, made when the graph is first allocated); in every other graph it is a leaf that reads
         the kept value, on any backend (it is copied where needed). mms_backend_sched_release frees
         it; sched_free frees them all. Reading it is an error while it is not computed yet
         (MMS_ERR_STATE) and once something it was computed from has been written (MMS_ERR_STALE,
         section 6): a kept tensor never silently holds an old answer.
       - Using in a graph a result an earlier graph left in compute memory (this scheduler's, or any
         other allocator's), next to new ops, is an MMS_ERR_STALE error at allocation, e.g.
           mms_backend_sched_alloc_graph: graph #7 'consumer' uses tensor 'image_features' f32
           [48,16,1,1] as an input of ..., which graph #4 'encoder' computed in compute memory that
           this allocation hands out again: its value would be lost. Mark it with
           mms_set_persistent before graph #4 'encoder' is allocated ...
         (A graph object rebuilt over exactly the tensors of one earlier graph, with nothing new, is
         that graph again and allowed; input leafs are set anew after every allocation anyway.)
       - Reading such a tensor afterwards (tensor_get/set, or computing with it) is MMS_ERR_STALE too,
         naming the graph that placed it; so is any use of a tensor whose buffer was freed.
       - compute of a graph other than the one allocated is MMS_ERR_STATE, and so is compute after a
         failed allocation (which leaves nothing allocated); reserve-then-alloc of one graph reuses the
         plan; a graph whose topology changed is planned again and the buffers grow
         (mms_backend_sched_get_n_reallocs counts it). There are no limits on backends, splits, split
         inputs or graph size.

       What the scheduler writes in the caller's tensors, and when. Only their placement (data,
       buffer, placement record) and their version, never ops, sources, shapes or flags:
         reserve       nothing (kept tensors not computed yet are planned as stand-ins);
         alloc_graph   on success only, after every check and the plan: each node of the graph takes
                       the memory it is computed into (compute memory, or its kept buffer), each leaf
                       without memory (an input) is placed in compute memory;
         compute       each node's version, and what each kept node was computed from;
         reset, and the next allocation: nothing, but everything they placed in compute memory is stale.
       A failed allocation leaves the caller's tensors as they were.

       Eval callback (mms_backend_sched_set_eval_callback): asked for every computed node with
       ask = true; for those it wants, the split is cut there, synchronized, and it is called again
       with ask = false while the value is readable; returning false stops the graph (MMS_ABORTED).

       Trace, MMS_SCHED_DEBUG=1 (or mms_backend_sched_set_debug(s, 1, file)), one block per alloc or
       reserve, whatever the log level:
           mms_sched: alloc graph #12 'decoder': 58 nodes, 14 leafs, 3 splits, 4 split inputs, 1 pipeline copies
           mms_sched: ## split 0 on TEST: nodes 0..20, 1 inputs
           mms_sched:    copy 'img' f32 [16,8,1,1] (512 B) from CPU to TEST as 'TEST#img#0'
           mms_sched: compute memory on TEST: 3.2 KiB planned (lower bound 3.2 KiB), 12 tensors; persistent 0 B
       MMS_SCHED_DEBUG=2 adds, inside each split, one line per node:
           mms_sched:    node 5 MUL_MAT 'q' f32 [24,4,1,1] on CPU (its weights are there): CPU buffer,
                         offset 1024, size 384, live 5..9
       The reason is one of: pinned, its memory is there, its weights are there, offloaded: large
       batch on host weights, graph input, next to its neighbours, fallback: where its weights are
       cannot run it, first backend that runs it, view of a tensor there. "live a..b" are the
       allocation graph's steps (copies count as steps); "in place of X" marks in-place reuse.

       Poison, MMS_SCHED_POISON=1 (or mms_backend_sched_set_poison): every allocation fills the
       compute buffers with 0xFF bytes, which read as NaN in f32, f16 and bf16. Inputs are set after
       allocation, so only reads of memory this graph did not write (a stale pointer, an input left
       unset) turn into NaN.

       Dumps, MMS_SCHED_DUMP=glob (* and ?) with MMS_SCHED_DUMP_DIR=folder (default "."), or
       mms_backend_sched_set_dump: after each computed node whose name matches, one file
       <folder>/mms-dump-g<graph id>-n<node index>-<name>.bin holding a text line
           mmsched-dump name=<name> type=<f32|f16|bf16|i32> ne=<a,b,c,d> bytes=<n> fnv1a64=<16 hex>
       and then the elements, row-major and contiguous; the same line (with the path) goes to the
       trace output. Equal checksums across runs, placements or backends mean equal values: the
       way to bisect where two configurations start to differ.

   9. THE CPU BACKEND
       mms_backend_cpu_init() starts a thread pool with one worker per core
       (mms_backend_cpu_set_n_threads changes it). Every worker walks the graph and meets the others
       at a barrier after each node; a waiting worker spins for a few microseconds (the usual gap
       between two nodes) and then sleeps on a condition variable, so on a busy machine the OS can
       run the straggler on its core. Between graphs workers spin as briefly on the job counter,
       then sleep. build/bench measures both costs ("threadpool": about 0.1-0.3 us per barrier when
       the cores are free, about 10 us when another process holds one).
       Work is cut into pieces that depend on the shapes only (rows, or tiles handed out through an
       atomic counter so both cores stay busy on odd sizes like 1601), so results are bit-identical
       whatever the thread count.

       The kernel set is chosen at run time: AVX2 + FMA + F16C on x86-64 when the CPU and compiler
       have them (function-level target attributes, so a binary built for plain x86-64 runs
       anywhere), AVX-512 (avx512, below) where the CPU also has F/BW/DQ/VL, VNNI and BF16, NEON on
       64-bit ARM, with the dot-product instructions (sdot) for the quantized
       dots where the CPU has them (neon_dotprod); else portable C. MMS_NO_SIMD leaves the SIMD
       sets out; mms_cpu_set_kernels or MMS_CPU_KERNELS= force one, mms_cpu_kernels_supported tells
       which run here. The test suite runs every op with every set the machine has (make test-arm64:
       scalar, neon and neon_dotprod under QEMU). The NEON set has the same algorithms on 4 lanes as
       the AVX2 set described next: the GEMM's register block is 6 x 16 as 24 accumulators (24 FMAs
       per 10 loads), the 4-row decode dots (f32, f16), f16/bf16 conversion, the element-wise and
       unary ops with the same exp/erf fits, max and softmax's exp-sum, the norms' double sums, the
       transpose (4 x 4), and the 8-bit activations with integer dots for Q8_0, Q4_0, Q4_K and Q6_K
       (sdot, or widening multiplies with pairwise adds; the same rounding as AVX2's, so the same
       error budget). Still portable C on ARM: rope, im2col, concat/pad/repeat/get_rows, the copies,
       tanh, and the quantized GEMM's dequantization. The AVX2 kernels:
         mul_mat, more than 4 columns: a tile of 64 rows of a is packed transposed into panels of 16
           (f16/bf16 converted on the way) and kept while tiles of b pass; a 6 x 16 register block
           (12 accumulators, 12 FMAs per 8 loads) writes dst directly. About 95% of one core's FMA
           peak on 1280x1280x1601.
         mul_mat, 1 to 4 columns (decode): dot products straight from the weight rows, f16 converted
           inside the dot, so the weights stream from memory once (about 85-90% of the read bandwidth).
         flash_attn_ext: blocks of 96 query rows (the heads of a group share one, so grouped K/V are
           read once per group) against blocks of 128 keys; S = Q K^T and O += P V with the same
           register block, a streaming softmax per row, key blocks masked for every row skipped
           (causal prefill, unused cache), strided V rows copied once per block. The score matrix is
           never stored: memory is a few hundred KB per thread.
         soft_max, silu, gelu (erf through a Chebyshev fit of erfc, relative error < 1.2e-7),
           gelu_tanh, exp, sqr, sqrt, scale: 8 lanes with a Cephes-style exp (about 1 ulp; exactly 0
           below -87.3, so -inf mask entries weigh nothing; NaN stays NaN). tanh keeps the C library.
         norm, rms_norm: sums in double, 4 lanes. f16/bf16 rows convert with F16C / shifts.
         mul_mat with quantized weights, 1 to 4 columns (decode): each column of b is rounded once
           to 8-bit blocks with an f32 scale each (of 32 for Q8_0 and Q4_0; of 256 for Q4_K and Q6_K,
           whose sub-block scales then multiply in integers) and every weight row is dotted against
           it in integers (maddubs), so the weights stream as bytes. This adds the activations' rounding:
           each output moves by at most sum |w| * (block max / 127) / 2, an NMSE near 1e-5 (the scalar
           kernels keep f32 activations and match a double reference to 1e-10).
         mul_mat with quantized weights, more columns: the columns of b are rounded to 8-bit blocks
           as for decode (the same error budget). Q4_0 and Q4_K: each thread repacks its tile of 64
           weight rows 8 side by side (per block the 8 rows' f16 scales, Q4_K's 6-bit sub-block
           scales and mins as bytes, then the 8 rows' nibbles interleaved 4 bytes at a time), and a
           kernel makes 8 rows by 4 columns: one maddubs against 4 activation bytes broadcast leaves
           each row's products in its own lanes, so no horizontal sums and one conversion and FMA per
           block serve 8 rows; the repacked tile is scratch (the layout of CPU_REPACK buffers below),
           the weights in memory stay as they are. Q6_K: one weight row unpacked once against 4 columns. Q8_0:
           rows dequantized to f32 as the tile of a is packed, then the GEMM above (its integer forms
           measured no faster on a Zen 3 core without VNNI: sign moves and a widening madd per
           maddubs). Times against the f32 GEMM in the README.
         weights kept repacked (mms_backend_cpu_repack_buffer_type, "CPU_REPACK"): Q4_0, Q4_K and
           Q8_0 matrices of at least 8 rows are stored in that same 8-row layout (Q4_0, Q8_0: the
           file's bytes permuted, the same size; Q4_K: 1184 bytes per 8 rows and 256 columns for the
           file's 1152, its sub-block scales as bytes; the rows past the last multiple of 8 as they
           were; Q8_0 on AVX2 decode only: its prompts unpack each tile for the GEMM above). Prompt-size products
           then read the tiles in place; a decode step (1 to 4 columns) runs the 8-row kernel
           against one column with 4 groups of a tile (groups 0, 2, 4, 6, then 1, 3, 5, 7) walked
           side by side: one stream per core reads well below the bandwidth several streams get.
           Measured on a 2-core Zen 3 (build/bench --filter '4096 * ' --reps 9): decode
           14336x4096 2.22 -> 1.12 ms (96% of that run's streaming read), 4096x4096 0.57 -> 0.41
           ms, x 512 85.97 -> 78.10 ms. Q4_K's row dots already read near the bandwidth; its
           one-column kernel measured no faster (14336x4096: 3.11 -> 2.88 ms on one thread). The layout depends on the shape only: the scalar and NEON
           sets unpack each tile of rows before their usual kernels (same results as from a CPU
           buffer). Set and get whole tensors (they convert; anything else is MMS_ERR_UNSUPPORTED);
           only MUL_MAT may read such a tensor, as its first operand: computing any other op that
           reads, views or writes it fails with MMS_ERR_UNSUPPORTED naming the tensor. Types and
           shapes without a repacked layout (mms_backend_cpu_repacks false) are stored as they are.
           The buffers are not host memory to other backends: copies go through get/set.
       The AVX-512 set (avx512: AVX-512 F/BW/DQ/VL with VNNI and BF16, the OS saving the zmm state;
       Zen 4, Sapphire Rapids and later; CPUs with AVX-512 but without VNNI or BF16 take avx2) is
       the AVX2 set with these bodies replaced:
         the f32 GEMM's register block: 12 rows x 32 columns (two panels of 16) in 24 zmm
           accumulators, 24 FMAs of 16 lanes per 14 loads. Every output sums over k in the AVX2
           block's order, one FMA per k, so both sets give the same bits (f32, f16 and bf16 weights
           of prompt-size products, and flash attention's two products).
         the integer dots of the 8-row kernels (Q4_0, Q4_K, Q8_0; prompt products and the decode
           kernels on repacked weights): vpdpbusd adds 4 byte products into a row's int32 lane in
           one instruction where AVX2 spends maddubs, an add and a widening madd. The same 8-bit
           activations and exact integer sums as AVX2, so the same results (floats summed in the
           same order). Q8_0 prompt products take the 8-row kernel here too (its weights' signs
           moved onto the activations), so they round activations to 8 bits as decode does (an NMSE
           near 1e-5 per product; the AVX2 set dequantizes Q8_0 for prompts and keeps f32
           activations); a decode step of up to 8 sequences keeps the 4-column dots, so each column
           keeps the bits it gets alone.
         Not AVX-512: the decode dots of f32 and f16 weights (16-lane forms measured no faster: they
           read memory), the quantized row dots (weights not repacked, Q6_K), attention's softmax,
           the element-wise ops. BF16 weights are converted to f32 as on AVX2: vdpbf16ps gave half
           the FMAs' multiply-adds per ns on the Sapphire Rapids-class machine this was measured on
           (1.35 against 5.47 instructions per ns on one core, 32 against 16 multiply-adds each).
       Host buffers of 8 MiB and more are aligned to 2 MiB and offered to transparent huge pages
       (madvise), which helps ops that read big tensors with large strides.

       Where the time goes: mms_backend_cpu_set_profile(cpu, true) adds each node's time (until the
       last thread is done with it) to its op type; mms_backend_cpu_print_profile(cpu, out) prints
       the totals, slowest first, and resets them. MMS_CPU_PROFILE=1 turns it on for every CPU
       backend and prints to stderr when the backend is freed. build/bench --profile uses it.

   10. THE CUDA BACKEND
       mmsched_cuda.cu implements the backend interface on NVIDIA GPUs (built by `make cuda`, nvcc,
       CUDA_ARCHS="80 90" by default; it links into C programs with -lcudart -lcublas, no C++ runtime).
       mms_backend_cuda_init(i) makes a backend for GPU i: its own stream, cuBLAS handle and a scratch
       area for converted operands. Several GPUs are several backends: give them all to one scheduler
       (with the CPU last) and place weights on each to split layers; copies between GPUs go peer to
       peer on the streams, ordered by events. mms_backend_cuda_get_device_count counts every GPU;
       the backend's per-device tables hold 16 (build with -DCU_MAX_DEVICES=N for more): a device
       past them is refused with MMS_ERR_UNSUPPORTED saying so, never used as another one.
         mms_backend_cuda_buffer_type(i)   device memory (cudaMalloc, never managed memory)
         mms_backend_cuda_host_buffer_type pinned host memory: the CPU uses it as host memory and the
                                           GPU copies from and to it at full speed
       Ops: every op of section 5 for F32, F16 and BF16 (I32 where it is data: copies, concat, pad,
       repeat, get_rows). mul_mat with more than 8 columns in b goes through cuBLAS (F32; F16 and BF16
       on tensor cores, b converted to a's type; grouped heads as strided batches with a's stride 0;
       block-type weights dequantized to F16 first). Up to 8 columns (decode) it is a GEMV kernel per
       weight type, two rows per warp, every column at once, 128-bit loads where rows are 16-byte
       aligned: float weights (F32, F16, BF16) against b's f32 values as they are; block types (Q8_0,
       Q4_0, Q4_K, Q6_K) against b rounded once to 8 bits per 32 values (step max|x|/127, a relative
       error of about 1e-3 per block, as the CPU's AVX2 decode), staged through shared memory, their
       scales decoded once per 32 values, dp4a integer dots. Flash attention (D and Dv up to 256,
       masks of any strides, shared mask rows, grouped heads, softcap) picks one of three kernels:
       up to 8 query rows per KV head (decode) split-K over chunks of keys, a block per KV head and
       chunk serving every query head of the group, 128-bit K/V loads, f32 arithmetic, and a kernel
       that merges the chunks; prefill and the vision encoder on tensor cores (sm_80+, D = Dv = 64, 80
       or 128: mma.sync m16n8k16, Q, K, V and the softmax weights rounded to F16, or BF16 when K/V
       are BF16, products accumulated in f32; key tiles masked for every row skipped); a scalar f32
       kernel for the rest. The mllama runtime keeps the KV cache and the cross-attention K/V of
       layers on a CUDA backend in F16 (rounded once when written). supports_op tells the
       truth: the scheduler runs anything else on the CPU. offload_op asks for MUL_MAT with 32 or
       more columns, so large batches on host weights run on the GPU when op_offload is on.
       A graph runs with up to three element-wise F32 nodes after a decode GEMV, a norm or a rope
       done in that kernel (mul, add, sub, div, silu, and a set_rows ending the chain: rms_norm *
       weight, silu(gate) * up, residual adds, rope + KV write), every node's output still written
       and the same bits as node by node; nodes whose memory the allocator shares are fused only
       where that stays true. The q, k and v products of one row round it to 8 bits once. A graph
       computed again with the same nodes, shapes, addresses and parameters (a decode step: the KV
       cache is written at the positions input) is captured into a CUDA graph and replayed with one
       launch. MMS_CUDA_FUSE=0 and MMS_CUDA_GRAPHS=0 turn these off.
       Errors from CUDA and cuBLAS calls are statuses whose message names the call and the CUDA error
       string (the runtime's last error is read then, so the next launch does not report it again);
       cudaMalloc failures are MMS_ERR_OOM with the size. A get_rows index out of range found by a
       kernel is reported at the next synchronize (graph_compute synchronizes) with the node's name,
       which the kernel carries: the right node even when other graphs were queued after it. Copies
       between GPUs enable peer access for the pair first (else the runtime stages them through host
       memory); each backend gives its cuBLAS handle a workspace (32 MiB on Hopper, 4 MiB before).
       Build it with the legacy default stream (plain cudaMemcpy on a buffer waits for the backends'
       streams): --default-stream per-thread stops at an #error. Grids larger than CUDA's limits go
       as several launches.
       Results agree with the CPU backend to a tolerance, not to the bit (different summation orders;
       f16 products round b): tests/test_backend_ops compares every op, tests/test_sched runs the
       scheduler's tests with the GPU as the second backend, and tools/gpu_check.sh runs both, the
       demo model on the GPU and build/cuda/bench_cuda on a GPU machine. Every kernel is written as a
       __host__ __device__ functor run by an executor, so the tests also run them on the host (a
       fiber per CUDA thread, cuBLAS by its definition; tests/cuda_host.h, built to contract
       multiply-adds into FMA as nvcc does): every op against the CPU backend, the scheduler's tests
       and the demo model with the kernels as the second backend. The whole backend also runs on a
       model of the CUDA runtime and cuBLAS (tests/cuda_mock.h: two devices, the last error, streams,
       captures, launch limits, which device a copy runs on): test_cuda, test_backend_ops and
       test_sched run against it as *_mock without a GPU.

   11. GGUF FILES
       mms_gguf_open(path) maps a GGUF file (versions 2 and 3) and validates it completely before
       returning: every count, length, offset and size against the file's length, with overflow-safe
       arithmetic, types, alignment, duplicate names, overlapping tensors. Anything wrong is an
       MMS_ERR_FORMAT error naming the file, the problem and the byte offset; a truncated or hostile
       file never crashes (tests/test_gguf.c runs a corpus of broken files; tests/fuzz/fuzz_gguf.c is
       a libFuzzer target, `make fuzz`). Keys and tensors are found by name; typed getters convert
       between integer widths when the value fits. mms_gguf_writer_* writes version 3 files.
       The checkpoint formats of Hugging Face have readers as strict: mms_json_parse (RFC 8259, no
       extensions; duplicate keys, nesting past 128, numbers past a double, invalid UTF-8 and lone
       surrogates are errors with the line and column) and mms_safetensors_open (the header length,
       every entry's dtype, shape and offsets against the data, no overlap, no hole); both are fuzzed
       (tests/fuzz/fuzz_formats.c) and their hostile corpora replayed by tests/test_formats.c.

   12. TEXT: TOKENIZER, CHAT TEMPLATE, SAMPLING
       struct mms_vocab *vocab = mms_vocab_load_file("model.gguf");      // tokenizer.ggml.* keys
       struct mms_chat_message m = { "user", "Describe the picture.", 1 }; // one image, then the text
       int len = mms_chat_apply_template(&m, 1, true, NULL, buf, sizeof buf);
       int n = mms_tokenize(vocab, buf, len, ids, cap, false, true);       // no second BOS; specials on
       struct mms_sampler *s = mms_sampler_new(&params);                   // greedy when temperature 0
       id = mms_sampler_sample(s, logits, n_vocab);                        // until mms_vocab_is_eog(id)
       n = mms_detokenizer_push(vocab, &d, id, out, sizeof out, false);    // whole UTF-8 characters only

       The tokenizer is Llama 3's byte-level BPE: the pre-tokenizer's split rule written in C over
       Unicode category tables (src/text/unicode_tables.c, generated by tools/gen_unicode_tables.py),
       GPT-2's byte-to-character map, merges by rank. tests/test_tokenizer.c compares token ids with
       Hugging Face tokenizers on a multilingual, emoji, digit and whitespace corpus. Special tokens
       (control and user-defined types) are recognised in text only with parse_special; add_bos
       adds BOS unless the text already starts with it. Decoding turns invalid UTF-8 into U+FFFD as
       transformers does; the streaming detokenizer holds back a character split across tokens.

       The chat template is the instruct template of Llama 3.2 Vision rendered in C; the renderings
       equal transformers' (tests/test_text.c), including its refusal of a system message together
       with images. There is no Jinja interpreter: mms_vocab_chat_template returns the template a
       model carries (GGUF's tokenizer.chat_template, a checkpoint folder's tokenizer_config.json) and
       mms_vocab_chat_template_is_builtin says whether it is, byte for byte, the one rendered here;
       build/mllama warns when a model's template is another (a fine-tune's) and --raw lets the
       caller write the prompt. The sampler follows transformers' order (repetition penalty, temperature, top-k,
       top-p, min-p) and its distributions equal transformers' logits processors to 1e-6; draws
       come from a seeded splitmix64, so a seed gives the same text on every machine.

   13. LLAMA 3.2 VISION (MLLAMA)
       struct mms_mllama_load_params lp = { "model.gguf", NULL, cpu, NULL, 0, false, false };
       struct mms_mllama_model *model = mms_mllama_model_load(&lp);
       struct mms_mllama_context *ctx = mms_mllama_context_new(model, NULL);   // reserves all graphs
       struct mms_mllama_image img;                                            // from RGB8 pixels
       mms_mllama_preprocess_image(&params_from_hparams, rgb, w, h, 0, &img);
       mms_mllama_add_image(ctx, &img);                  // encoded once, kept (persistent tensors)
       mms_mllama_decode(ctx, prompt_tokens, n, NULL);   // the prompt holds the <|image|> token
       logits = mms_mllama_get_logits(ctx, 0);           // then decode one sampled token at a time

       The numbers are those of transformers' MllamaForConditionalGeneration in float32 with eager
       attention and the PIL image processor (tests/test_mllama.c compares every stage with fixtures
       dumped from it); the vision encoder's intermediate taps follow Meta's rule (the inputs of the
       listed layers), not the shifted rule of transformers 4.55 and later. Models load from Ollama's
       single-file layout or its older pair (text file + projector file with ln1/ln2 and swapped
       ffn_up/ffn_down); tools/convert_hf_to_gguf.py writes both from a Hugging Face checkpoint.
       A Hugging Face checkpoint folder loads as it is: give its path (config.json, model.safetensors
       or the shards of model.safetensors.index.json, preprocessor_config.json). Its matrices are
       used where the files are mapped, in their own type (f32, f16, bf16); norms, biases, gates and
       position tables are converted to f32 when placed (vision gates to tanh(g)); self-attention
       uses rotate-half RoPE on the checkpoint's q/k; every size config.json states is checked
       against the tensors, and a tensor nothing uses is an error. mms_vocab_load_file(DIR) reads its
       tokenizer.json (Llama 3's pre-tokenizer only); mms_mllama_folder_to_gguf(DIR) gives the folder
       as a GGUF in memory (what build/quantize DIR OUT TYPE reads).
       Converter conventions the loader relies on: self-attention q/k rows in Meta's interleaved
       order (RoPE pairs (2i, 2i+1)) with rope_freqs.weight holding the llama3 divisors; vision gates
       stored as tanh(g) (the positional one as 1 - tanh(g)); text gates raw. Ollama's converter also
       permutes the rows of the cross-attention and vision q/k within each head (not their q/k norms);
       the loader puts them back in Hugging Face order, moving whole rows (any type), for the files
       that hold them so: the key mmsched.mllama.qk_rows says "ollama" or "hf" when present (our
       converter writes it); without it, the two-file layout and files with mllama.image_token_index
       (a key only mmsched's converter wrote before the marker) are in Hugging Face order, and any
       other single file is taken as Ollama's. What Ollama's files lack is derived: the image token
       is vocab_size, mean/std are CLIP's (the 11B values), the aspect ratios are every (rows, cols)
       with rows * cols <= max_num_tiles in the processor's order, vision_output_dim is
       embedding_length * (1 + number of taps).
       Weights used only as matrices or looked-up rows (projections, FFN, token embedding, output
       head, tile embeddings) may be Q8_0, Q4_0, Q4_K or Q6_K; norms, biases, gates and the patch
       and position embeddings must be f32, f16 or bf16 (the load names any that is not).

       Placement: n_gpu_layers text layers, counted from the last, go to the second backend with
       their KV cache; the vision tower goes where vision_on_gpu says, independently. Weights on the
       host are used in place from the mapped file, except the Q4_0, Q4_K and Q8_0 matrices the CPU
       backend multiplies by (not the tables read by rows): by default those are copied at load into
       a CPU_REPACK buffer (section 9: the CPU kernels' 8-row layout) and the file's pages they came
       from released (madvise, on Linux; on Windows they stay in the working set until the system
       trims it), so resident memory grows by the layout's extra bytes (Q4_K: 2.8%) rather than by a
       second copy; mms_mllama_memory.weights_repacked says how much. Load
       parameter no_cpu_repack (CLI --no-repack) keeps them mapped. One scheduler runs everything; an image's
       per-layer cross-attention keys and values are persistent tensors on their layers' backends,
       cached by the pixels' hash. Memory for the worst-case graphs is reserved when the context is
       made (mms_mllama_context_print_memory reports it per backend; a model that does not fit fails
       then, naming what did not fit where and how many bytes it needed). What the 11B model takes on
       the CPU (build/bench --full: every layer, random weights, text Q4_K_M, vision f16, 2048-token
       context): a 7392 MiB file mapped, the KV cache 512 MiB (f32), compute 391 MiB, 400 MiB of
       cross K/V per 4-tile image; peak resident 8748 MiB, 53 MiB above their sum. A decode token
       reads 5891 MiB (the text weights, the used KV cache, the image's cross K/V), which bounds
       decode by the memory bandwidth: on a 2-core Zen 3 2.0-2.9 tokens/s (README, Benchmarks).

       Images and tokens: the k-th <|image|> token stands for the k-th image added; a text token
       attends to the images of the last group of consecutive image tokens at or before it; tokens
       before the first image token see a uniform mix and their MLP branch is zeroed (transformers'
       rule). An image added after some tokens were decoded does not change those tokens (Ollama does
       the same); transformers would compute them again with the image present, so for exact parity
       clear the conversation and decode it again. mms_mllama_model_shapes_only
       gives a model with shapes and no weights, for planning: at the 11B shapes the 4-tile vision
       graph plans at about 470 MiB of float32 activations (the attention runs fused, so the
       16 x 6432 x 6432 scores are never stored, and its padding mask is two shared rows of 6432
       with a row index per token, not a 6432 x 6432 array).

       mms_mllama_add_image_rgb preprocesses with the model's own parameters and adds in one call.

       Several conversations: a context with n_seq sequences holds n_seq conversations (each its own
       n_ctx KV slots, tokens, positions and max_images images; every slot reserved at creation).
           mms_mllama_seq_add_image(ctx, 1, &img);
           struct mms_mllama_batch b = { n, tokens, seqs, NULL };  // rows of any sequences, any order
           mms_mllama_decode_batch(ctx, &b);   // one graph; logits: the last row of each sequence, in batch order
           mms_mllama_seq_clear(ctx, 1);       // or mms_mllama_seq_trim(ctx, 1, n_keep)
       A batch's rows write their own sequence's slots and attend only to its tokens (the mask is -inf
       elsewhere) and its images (in the cross-attention layers the rows are gathered per sequence
       with images and each group attends to its own images' keys only; rows of a sequence without
       images join the first group with their cross layers gated to the identity), so each
       sequence's logits are those of the conversation alone (tests/test_mllama_seq.c: NMSE below
       1e-10, greedy tokens equal, for mixes of image-first, text-before-image, text-only and two-image
       conversations cleared, reused and trimmed). The matrix products see every row at once, so the
       weights are read once per step for all sequences (on the CPU, up to 8 rows of f16/f32 weights
       are summed exactly as one row alone is: test_ops mul_mat_columns); self-attention reads the
       slots from the first to the last sequence in the batch, each up to its next 256-token step.
       On the CPU a step of K sequences costs K times the multiply-adds of one, so once the products
       are bound by arithmetic rather than by reading the weights the gain stops growing: with f16
       weights on a 2-core Zen 3 that is about 3.5x at K = 8 (build/batch --bench).
       mms_mllama_get_timings (and _print_timings) splits the time by phase: load, context,
       preprocess, image encode (vision encoder + projector), cross-attention K/V, prompt and
       generation with tokens/s (a one-token decode is generation), and memory per backend (weights,
       KV cache, compute, kept images at their peak). A progress callback in the load parameters
       reports the load and can stop it.

   14. THE MLLAMA PROGRAM
       examples/mllama.c (`make examples` builds build/mllama; it links stb_image from Debian's
       libstb-dev) turns images and a prompt into text:

           build/mllama -m models/mllama-demo.gguf --image examples/images/circle.png \
                        "Describe this image."

       Options take "--name value" or "--name=value"; the prompt is -p or the last argument.
       --mmproj for the two-file layout, several --image, --max-pixels (50 million: a bigger picture
       is refused from its header, before decoding), -i for a chat, --system, --raw (no template; the
       prompt places each picture with <|image|>), -n, -c, --threads (a warning past the cores),
       --n-gpu-layers and --vision-gpu (a CUDA build), --sched-debug 1|2, --temp, --top-k, --top-p,
       --min-p, --repeat-penalty, --repeat-last-n, --seed. Transparent pixels are laid over white
       (mms_image_rgba_over_white, equal to PIL's alpha_composite). Several pictures in one turn
       each get their own <|image|> followed by a line "Picture N." (consecutive <|image|> tokens
       would all be seen by the same text, in no order). The answer streams to stdout; timings by
       phase go to stderr. Errors (a missing or broken model, an unreadable or oversized image, a
       prompt longer than the context, a failed write to stdout) print one line saying what and why
       and exit with status 1; bad options (out-of-range or non-finite numbers, a value given twice)
       exit with 2 and name the value. In a chat (/image FILE, /clear, /help, /quit) every turn
       renders the whole conversation, keeps the tokens the KV cache already holds and decodes only
       the rest; images stay encoded; a failed /image or a full context ends only that step, with
       a warning or a hint.

       models/mllama-demo.gguf is a tiny mllama trained here on synthetic pictures of shapes
       (tools/train_demo.py); `make demo` captions the pictures in examples/images/.

   15. DIFFERENCES FROM GGML, ON PURPOSE
       Names are ggml's with mms_ for ggml_, so porting is mostly a rename. Where we differ:
       - mms_gelu is the exact erf GELU; ggml_gelu (tanh approximation) is mms_gelu_tanh.
       - Unary ops are their own ops (MMS_OP_SILU, ...), not sub-ops of a UNARY op.
       - Errors are statuses and NULL results with messages, not asserts; a failed op poisons the
         rest of a graph build instead of aborting the program.
       - Type ids are ours (0 is invalid); the GGUF reader maps GGUF's ids.
       - Masks may be F32 or F16 and need no padding; flash_attn_ext accepts F32 k/v too.
       - mms_backend_tensor_set/get also work on tensors of an allocating (host) context.
       - Contexts and graphs grow; there is no graph size to choose.
       - The scheduler never rewires the caller's graph (ggml points sources at its copies), refuses
         to compute a graph other than the one allocated (ggml silently runs the allocated one),
         reports results used after their memory was handed out again (ggml: silent garbage), keeps
         persistent tensors across graphs (and reports one whose inputs changed), and has no caps
         (ggml: 16 backends, graph_size hash).
       - Every tensor records what kind of memory placed it (tensor->placement); ggml derives it from
         the buffer pointer each time.
       - ggml_backend_sched_new takes a graph_size; mms_backend_sched_new does not need one.
       - The graph allocator keeps inputs alive through the whole graph (ggml lets an in-place op
         overwrite them; mms_gallocr_set_inputs_reusable restores that), reuses a stored plan only
         for the same topology (ggml compares node counts and sizes), replans and grows by itself
         with any number of buffers' chunks, and never aborts for lack of free-block slots.
*/
/* ==== begin src/api/prologue.h ==== */
#ifndef MMSCHED_H
#define MMSCHED_H

#define MMS_VERSION_MAJOR 0
#define MMS_VERSION_MINOR 1
#define MMS_VERSION_PATCH 0
#define MMS_VERSION_STRING "0.1.0"

/* MMS_API decorates every public function: extern by default, static under MMS_STATIC
   (so two differently configured copies can live in one program). */
#ifndef MMS_API
#  if defined(MMS_STATIC) && (defined(__GNUC__) || defined(__clang__))
#    define MMS_API static __attribute__((unused))
#  elif defined(MMS_STATIC)
#    define MMS_API static
#  else
#    define MMS_API extern
#  endif
#endif

/* MinGW: the C99 printf family (%zu, %lld), not the old msvcrt's, which lacks them. */
#if defined(__MINGW32__) && !defined(__USE_MINGW_ANSI_STDIO)
#  define __USE_MINGW_ANSI_STDIO 1
#endif

/* Parts left out (MMS_NO_GGUF, MMS_NO_TEXT, MMS_NO_MLLAMA; define them before every include of
   the header, the same everywhere). Each layer goes with the ones it rests on: the tokenizer reads
   GGUF (and JSON) files, mllama reads them and writes a checkpoint folder's tokenizer. */
#if defined(MMS_NO_GGUF) && !defined(MMS_NO_TEXT)
#  define MMS_NO_TEXT
#endif
#if defined(MMS_NO_TEXT) && !defined(MMS_NO_MLLAMA)
#  define MMS_NO_MLLAMA
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>

#if defined(__MINGW32__) && !__USE_MINGW_ANSI_STDIO && !defined(_UCRT)
#  error "mmsched: with MinGW and msvcrt, include mmsched.h before other headers or define __USE_MINGW_ANSI_STDIO=1 (its messages use %zu)"
#endif

#if defined(__MINGW32__) && defined(__MINGW_PRINTF_FORMAT)
#  define MMS_PRINTF(fmt_idx, args_idx) __attribute__((format(__MINGW_PRINTF_FORMAT, fmt_idx, args_idx)))
#elif defined(__GNUC__) || defined(__clang__)
#  define MMS_PRINTF(fmt_idx, args_idx) __attribute__((format(printf, fmt_idx, args_idx)))
#else
#  define MMS_PRINTF(fmt_idx, args_idx)
#endif

#ifdef __cplusplus
extern "C" {
#endif
/* ==== end src/api/prologue.h ==== */

/* ==== begin src/api/base.h ==== */
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
    MMS_ERR_STATE        = -8   /* calls in the wrong order (e.g. compute before allocation) */
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
/* ==== end src/api/base.h ==== */

/* ==== begin src/api/core.h ==== */
/* >>api-types -------------------------------------------------------------------------------------
   Element types. The numbering is ours (0 is invalid, so a zeroed struct never means F32); the GGUF
   reader maps GGUF's type ids onto these. Append only. */

enum mms_type {
    MMS_TYPE_INVALID = 0,
    MMS_TYPE_F32     = 1,
    MMS_TYPE_F16     = 2,
    MMS_TYPE_BF16    = 3,
    MMS_TYPE_I32     = 4,
    MMS_TYPE_Q8_0    = 5,   /* blocks of 32: f16 scale + 32 int8 (GGUF's layouts: manual section 2) */
    MMS_TYPE_Q4_0    = 6,   /* blocks of 32: f16 scale + 32 nibbles */
    MMS_TYPE_Q4_K    = 7,   /* blocks of 256: 8 sub-blocks with 6-bit scales and mins, nibbles */
    MMS_TYPE_Q6_K    = 8,   /* blocks of 256: 16 sub-blocks with int8 scales, 6-bit values */
    MMS_TYPE_COUNT
};

typedef uint16_t mms_fp16_t;  /* IEEE 754 half, stored as bits */
typedef uint16_t mms_bf16_t;  /* bfloat16, stored as bits */

/* One row of the traits table. Block types (quantized) have blck_size > 1: a row of n elements
   takes n / blck_size * type_size bytes. to_float/from_float convert n elements (n a multiple of
   blck_size); from_float rounds to nearest even. */
struct mms_type_traits {
    const char *name;
    int64_t     blck_size;
    size_t      type_size;
    bool        is_quantized;
    bool        is_float;       /* usable as a floating-point operand of the ops */
    void      (*to_float)  (const void *src, float *dst, int64_t n);
    void      (*from_float)(const float *src, void *dst, int64_t n);
};

MMS_API const struct mms_type_traits *mms_get_type_traits(enum mms_type type); /* NULL if invalid */
MMS_API const char *mms_type_name(enum mms_type type);   /* "f32", ...; "invalid" if unknown */
MMS_API size_t      mms_type_size(enum mms_type type);   /* bytes per block */
MMS_API int64_t     mms_blck_size(enum mms_type type);   /* elements per block */
MMS_API size_t      mms_row_size(enum mms_type type, int64_t ne);

MMS_API float       mms_fp16_to_fp32(mms_fp16_t h);
MMS_API mms_fp16_t  mms_fp32_to_fp16(float f);
MMS_API float       mms_bf16_to_fp32(mms_bf16_t h);
MMS_API mms_bf16_t  mms_fp32_to_bf16(float f);

/* >>api-tensor ------------------------------------------------------------------------------------
   Tensors are ggml-style: up to 4 dimensions, ne[] element counts with ne[0] the contiguous one,
   nb[] byte strides. A tensor of a matrix W with `in` inputs and `out` outputs has ne = {in, out}. */

#define MMS_MAX_DIMS      4
#define MMS_MAX_SRC       6
#define MMS_MAX_OP_PARAMS 64   /* bytes */
#define MMS_MAX_NAME      64

enum mms_op {
    MMS_OP_NONE           = 0,   /* a leaf: weights, inputs, constants */
    MMS_OP_DUP            = 1,
    MMS_OP_ADD            = 2,
    MMS_OP_SUB            = 3,
    MMS_OP_MUL            = 4,
    MMS_OP_DIV            = 5,
    MMS_OP_SCALE          = 6,
    MMS_OP_SQR            = 7,
    MMS_OP_SQRT           = 8,
    MMS_OP_EXP            = 9,
    MMS_OP_TANH           = 10,
    MMS_OP_SILU           = 11,
    MMS_OP_GELU           = 12,  /* exact: x * Phi(x) with erf */
    MMS_OP_GELU_TANH      = 13,  /* the tanh approximation (what ggml calls gelu) */
    MMS_OP_SUM_ROWS       = 14,
    MMS_OP_ARGMAX         = 15,
    MMS_OP_NORM           = 16,
    MMS_OP_RMS_NORM       = 17,
    MMS_OP_MUL_MAT        = 18,
    MMS_OP_SOFT_MAX       = 19,
    MMS_OP_ROPE           = 20,
    MMS_OP_CONCAT         = 21,
    MMS_OP_PAD            = 22,
    MMS_OP_IM2COL         = 23,
    MMS_OP_GET_ROWS       = 24,
    MMS_OP_CPY            = 25,
    MMS_OP_CONT           = 26,
    MMS_OP_FLASH_ATTN_EXT = 27,
    MMS_OP_VIEW           = 28,
    MMS_OP_RESHAPE        = 29,
    MMS_OP_PERMUTE        = 30,
    MMS_OP_TRANSPOSE      = 31,
    MMS_OP_REPEAT         = 32,
    MMS_OP_SET_ROWS       = 33,
    MMS_OP_COUNT
};

MMS_API const char *mms_op_name(enum mms_op op);   /* "MUL_MAT", ... */
MMS_API bool        mms_op_is_view(enum mms_op op); /* VIEW, RESHAPE, PERMUTE, TRANSPOSE */

enum mms_tensor_flag {
    MMS_TENSOR_FLAG_INPUT      = 1,  /* set by the caller before compute; placed first by allocators */
    MMS_TENSOR_FLAG_OUTPUT     = 2,  /* read by the caller after compute; never reused in the graph */
    MMS_TENSOR_FLAG_PERSISTENT = 4   /* kept across later graphs of the same scheduler */
};

enum mms_rope_mode {
    MMS_ROPE_TYPE_NORMAL = 0,  /* rotate adjacent pairs (2i, 2i+1): Meta / GGUF llama layout */
    MMS_ROPE_TYPE_NEOX   = 2   /* rotate halves (i, i + n_dims/2): Hugging Face layout */
};

struct mms_backend_buffer;
struct mms__provenance;   /* internal */

/* What kind of memory a tensor was given, recorded when it is placed and never derived: the
   lifetime rules (section 6 of the manual) follow from it. */
enum mms_memory_kind {
    MMS_MEMORY_NONE       = 0,  /* not placed */
    MMS_MEMORY_HOST       = 1,  /* data of an allocating context: until the context is reset or freed */
    MMS_MEMORY_STATIC     = 2,  /* a buffer the caller allocated (weights, caches): until it is freed */
    MMS_MEMORY_COMPUTE    = 3,  /* a graph allocator's memory: until that allocator's next allocation */
    MMS_MEMORY_PERSISTENT = 4,  /* kept by a scheduler across graphs: until released or the scheduler is freed */
    MMS_MEMORY_RESERVE    = 5   /* a stand-in while a scheduler plans (reserve): no data, never read */
};

/* The record a placement writes into the tensor; every lifetime check reads it (and only it). */
struct mms_placement {
    enum mms_memory_kind kind;
    uint64_t buffer_uid;   /* the buffer it was placed in, 0 for host memory: detects a freed buffer */
    uint64_t generation;   /* the buffer's generation then: detects memory handed out again */
    uint64_t graph_id;     /* the graph whose allocation placed it (0: none) */
};

struct mms_tensor {
    enum mms_type type;
    enum mms_op   op;
    int64_t       ne[MMS_MAX_DIMS];  /* elements per dimension */
    size_t        nb[MMS_MAX_DIMS];  /* bytes: nb[0] = type_size, nb[i] = nb[i-1] * ne[i-1] when contiguous */
    int32_t       flags;             /* enum mms_tensor_flag */
    int32_t       op_params[MMS_MAX_OP_PARAMS / sizeof(int32_t)];
    struct mms_tensor *src[MMS_MAX_SRC];

    struct mms_tensor *view_src;     /* the tensor whose memory a view (or CPY) uses */
    size_t             view_offs;    /* byte offset into view_src */

    void                      *data;        /* NULL until placed */
    struct mms_backend_buffer *buffer;      /* NULL for host memory; may be freed: check the tensor first */
    struct mms_placement       placement;   /* written by placement only */
    uint64_t                   uid;         /* unique in the process, never 0 */
    uint64_t                   version;     /* counts the writes made through the library (set, copy, compute) */
    struct mms__provenance    *provenance;  /* internal: what a kept tensor was computed from */
    bool                       watched;     /* internal: some kept tensor's provenance refers to it */

    void *extra;                     /* backend-private per-tensor state */
    char  name[MMS_MAX_NAME];
};

/* >>api-context -----------------------------------------------------------------------------------
   A context owns tensor metadata and, unless no_alloc, tensor data. mem_size = 0 lets it grow as
   needed; with a caller-owned mem_buffer it never grows and running out is an MMS_ERR_OOM error. */

struct mms_init_params {
    size_t mem_size;    /* first block of memory (0: a default, growing as needed) */
    void  *mem_buffer;  /* caller-owned memory of mem_size bytes, or NULL */
    bool   no_alloc;    /* true: tensors get no data; a backend buffer or allocator places them */
};

struct mms_context;

MMS_API struct mms_context *mms_init(struct mms_init_params params);  /* NULL + last error */
MMS_API void   mms_free(struct mms_context *ctx);
MMS_API void   mms_reset(struct mms_context *ctx);     /* drop every tensor and graph; keep the memory */
MMS_API size_t mms_used_mem(const struct mms_context *ctx);
MMS_API bool   mms_get_no_alloc(const struct mms_context *ctx);
MMS_API void   mms_set_no_alloc(struct mms_context *ctx, bool no_alloc);
MMS_API size_t mms_tensor_overhead(void);  /* metadata bytes per tensor, to size a fixed mem_buffer */
MMS_API size_t mms_graph_overhead(void);   /* metadata bytes of an empty graph */

/* Graph building is sticky: an op given bad arguments reports an error (naming the op, the tensors
   and their shapes), returns NULL and records the first such error in the context. Later ops given
   that NULL return NULL quietly, so a whole builder can run and be checked once at the end. */
MMS_API enum mms_status mms_ctx_status(const struct mms_context *ctx);
MMS_API const char     *mms_ctx_error(const struct mms_context *ctx);   /* "" when OK */
MMS_API void            mms_ctx_clear_error(struct mms_context *ctx);

MMS_API struct mms_tensor *mms_new_tensor(struct mms_context *ctx, enum mms_type type, int n_dims, const int64_t *ne);
MMS_API struct mms_tensor *mms_new_tensor_1d(struct mms_context *ctx, enum mms_type type, int64_t ne0);
MMS_API struct mms_tensor *mms_new_tensor_2d(struct mms_context *ctx, enum mms_type type, int64_t ne0, int64_t ne1);
MMS_API struct mms_tensor *mms_new_tensor_3d(struct mms_context *ctx, enum mms_type type, int64_t ne0, int64_t ne1, int64_t ne2);
MMS_API struct mms_tensor *mms_new_tensor_4d(struct mms_context *ctx, enum mms_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
MMS_API struct mms_tensor *mms_dup_tensor(struct mms_context *ctx, const struct mms_tensor *src);  /* same type and shape, new memory */
MMS_API struct mms_tensor *mms_view_tensor(struct mms_context *ctx, struct mms_tensor *src);       /* same memory */

MMS_API struct mms_tensor *mms_get_first_tensor(const struct mms_context *ctx);
MMS_API struct mms_tensor *mms_get_next_tensor(const struct mms_context *ctx, const struct mms_tensor *tensor);
MMS_API struct mms_tensor *mms_get_tensor(const struct mms_context *ctx, const char *name);

MMS_API const char        *mms_get_name(const struct mms_tensor *tensor);
MMS_API struct mms_tensor *mms_set_name(struct mms_tensor *tensor, const char *name);  /* truncates to MMS_MAX_NAME-1 */
MMS_API struct mms_tensor *mms_format_name(struct mms_tensor *tensor, const char *fmt, ...) MMS_PRINTF(2, 3);

MMS_API void mms_set_input(struct mms_tensor *tensor);
MMS_API void mms_set_output(struct mms_tensor *tensor);
MMS_API void mms_set_persistent(struct mms_tensor *tensor);  /* kept by the scheduler across graphs (manual section 8) */

MMS_API int64_t mms_nelements(const struct mms_tensor *tensor);
MMS_API int64_t mms_nrows(const struct mms_tensor *tensor);     /* ne[1] * ne[2] * ne[3] */
MMS_API size_t  mms_nbytes(const struct mms_tensor *tensor);    /* bytes spanned, strides included */
MMS_API int     mms_n_dims(const struct mms_tensor *tensor);    /* 1..4: index of the last dim > 1, plus one */
MMS_API bool    mms_is_contiguous(const struct mms_tensor *tensor);
MMS_API bool    mms_is_transposed(const struct mms_tensor *tensor);
MMS_API bool    mms_is_permuted(const struct mms_tensor *tensor);
MMS_API bool    mms_are_same_shape(const struct mms_tensor *a, const struct mms_tensor *b);
MMS_API bool    mms_are_same_layout(const struct mms_tensor *a, const struct mms_tensor *b); /* type, ne and nb */
MMS_API bool    mms_can_repeat(const struct mms_tensor *small, const struct mms_tensor *big); /* big.ne[i] % small.ne[i] == 0 */

/* Op parameters, for backends that implement ops (layouts are listed with each op below). */
MMS_API int32_t mms_get_op_params_i32(const struct mms_tensor *tensor, int index);
MMS_API float   mms_get_op_params_f32(const struct mms_tensor *tensor, int index);

/* >>api-ops ---------------------------------------------------------------------------------------
   Each op returns a new tensor describing the result (no compute happens here), or NULL on error.
   Shapes are checked now. Float operands may be F32, F16 or BF16 unless noted; results of
   element-wise ops, norms, softmax and rope have the type of `a`, the others are F32.
   [op params: ...] gives the layout of op_params for backend implementers. */

/* Element-wise with broadcasting: b is repeated over a (a->ne[i] % b->ne[i] == 0). */
MMS_API struct mms_tensor *mms_add(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b);
MMS_API struct mms_tensor *mms_sub(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b);
MMS_API struct mms_tensor *mms_mul(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b);
MMS_API struct mms_tensor *mms_div(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b);
MMS_API struct mms_tensor *mms_scale(struct mms_context *ctx, struct mms_tensor *a, float s);   /* [f32 s] */

MMS_API struct mms_tensor *mms_sqr(struct mms_context *ctx, struct mms_tensor *a);
MMS_API struct mms_tensor *mms_sqrt(struct mms_context *ctx, struct mms_tensor *a);
MMS_API struct mms_tensor *mms_exp(struct mms_context *ctx, struct mms_tensor *a);
MMS_API struct mms_tensor *mms_tanh(struct mms_context *ctx, struct mms_tensor *a);
MMS_API struct mms_tensor *mms_silu(struct mms_context *ctx, struct mms_tensor *a);
/* gelu is the exact erf form (Hugging Face "gelu"); ggml_gelu is the tanh form, here mms_gelu_tanh.
   This is a deliberate difference from ggml: porting code that wants the approximation must rename. */
MMS_API struct mms_tensor *mms_gelu(struct mms_context *ctx, struct mms_tensor *a);
MMS_API struct mms_tensor *mms_gelu_tanh(struct mms_context *ctx, struct mms_tensor *a);

/* Reductions over ne[0]: sum_rows -> F32 [1, ne1, ne2, ne3]; argmax -> I32 [ne1, ne2, ne3]
   (the first index of the maximum; NaN never wins). */
MMS_API struct mms_tensor *mms_sum_rows(struct mms_context *ctx, struct mms_tensor *a);
MMS_API struct mms_tensor *mms_argmax(struct mms_context *ctx, struct mms_tensor *a);

/* Normalisation over ne[0]: norm is layer norm without affine ((x - mean) / sqrt(var + eps)),
   rms_norm is x / sqrt(mean(x^2) + eps). [f32 eps] */
MMS_API struct mms_tensor *mms_norm(struct mms_context *ctx, struct mms_tensor *a, float eps);
MMS_API struct mms_tensor *mms_rms_norm(struct mms_context *ctx, struct mms_tensor *a, float eps);

/* Matrix product: a [K, M, A2, A3], b [K, N, B2, B3] -> F32 [M, N, B2, B3], out[m, n] = sum_k a[k, m] b[k, n].
   a is broadcast over the batch dims (B2 % A2 == 0, B3 % A3 == 0): with grouped-query attention a
   holds the KV heads, and query head h uses KV head h / (B2 / A2). Any strides are accepted. */
MMS_API struct mms_tensor *mms_mul_mat(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b);

/* softmax(a * scale + mask) over ne[0]. mask (optional, F32 or F16): [ne0, >= ne1, m2, m3] with m2
   dividing ne2 and m3 dividing ne3; row (i1, i2, i3) adds mask row (i1, i2 % m2, i3 % m3), so a
   mask is repeated over heads like b of add. -INFINITY masks out; a row entirely masked gives zeros.
   max_bias (ALiBi) must be 0: it is not implemented. [f32 scale, f32 max_bias] */
MMS_API struct mms_tensor *mms_soft_max(struct mms_context *ctx, struct mms_tensor *a);
MMS_API struct mms_tensor *mms_soft_max_ext(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *mask, float scale, float max_bias);

/* Rotary embedding. a [head_dim, n_head, n_tokens, 1]; pos I32 [n_tokens]; freq_factors (optional)
   F32 [n_dims / 2]: theta_i = pos * freq_scale * freq_base^(-2i / n_dims) / freq_factors[i].
   The first n_dims of head_dim are rotated (pairs by mode), the rest pass through; cos and sin
   are multiplied by attn_factor. YaRN (ext_factor != 0) is not implemented; n_ctx_orig, beta_fast
   and beta_slow are only used by YaRN. [i32 n_dims, i32 mode, i32 n_ctx_orig, f32 freq_base,
   f32 freq_scale, f32 ext_factor, f32 attn_factor, f32 beta_fast, f32 beta_slow] */
MMS_API struct mms_tensor *mms_rope_ext(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *pos,
                                        struct mms_tensor *freq_factors, int n_dims, int mode, int n_ctx_orig,
                                        float freq_base, float freq_scale, float ext_factor, float attn_factor,
                                        float beta_fast, float beta_slow);

/* Layout. concat joins along dim (same type; other dims equal). pad appends zeros at the end of
   each dim. get_rows picks rows of a [ne0, R, ne2, ne3] by I32 indices b [n, ne2, ne3] ->
   [ne0, n, ne2, ne3] (F32, or I32 for an I32 a); an index out of range gives a compute error.
   [concat: i32 dim] [pad: i32 p0, p1, p2, p3] */
MMS_API struct mms_tensor *mms_concat(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b, int dim);
MMS_API struct mms_tensor *mms_pad(struct mms_context *ctx, struct mms_tensor *a, int p0, int p1, int p2, int p3);
MMS_API struct mms_tensor *mms_get_rows(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b);
/* The converse: row rows[i] of a [ne0, R, ne2, ne3] becomes row i of b [ne0, n, ne2, ne3] (float
   types, converted to a's), for every (ne2, ne3); rows I32 [n]. Returns a view of a (computing it
   writes a), like mms_cpy. The rows are data, not part of the graph's shape: a KV cache written at
   the positions of the batch gives the same graph at every position. An index out of range is a
   compute error. [src[0] b, src[1] rows, src[2] a] */
MMS_API struct mms_tensor *mms_set_rows(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b, struct mms_tensor *rows);

/* repeat tiles a over the shape of b (b.ne[i] % a.ne[i] == 0; only b's shape is used), any type. */
MMS_API struct mms_tensor *mms_repeat(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b);

/* Copies. cpy writes a into b (same number of elements, converting between F32/F16/BF16) and
   returns a view of b; dup and cont return a new contiguous copy of a; cont_Nd also reshapes. */
MMS_API struct mms_tensor *mms_cpy(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b);
MMS_API struct mms_tensor *mms_dup(struct mms_context *ctx, struct mms_tensor *a);
MMS_API struct mms_tensor *mms_cont(struct mms_context *ctx, struct mms_tensor *a);
/* a as a new contiguous tensor of another float type (a CONT node of that type), rounded to
   nearest even: a result of its own, unlike mms_cpy's view of its destination. */
MMS_API struct mms_tensor *mms_cast(struct mms_context *ctx, struct mms_tensor *a, enum mms_type type);
MMS_API struct mms_tensor *mms_cont_2d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1);
MMS_API struct mms_tensor *mms_cont_3d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2);
MMS_API struct mms_tensor *mms_cont_4d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);

/* Convolution as im2col + mul_mat (ggml's layout). 2-D: kernel a [KW, KH, IC, OC] (only its shape
   is read), input b [W, H, IC, N] -> im2col [IC*KH*KW, OW, OH, N]; 1-D (is_2D false): a [KW, IC, OC],
   b [W, IC, N] -> [IC*KW, OW, N]. OW = (W + 2*p0 - d0*(KW-1) - 1) / s0 + 1. dst_type F32 or F16.
   Column (ic*KH + ky)*KW + kx of output row (ox, oy, n) holds input (ox*s0 + kx*d0 - p0,
   oy*s1 + ky*d1 - p1, ic, n), or 0 in the padding: the order a contiguous kernel is stored in.
   conv_2d returns F32 [OW, OH, OC, N]. [im2col: i32 s0, s1, p0, p1, d0, d1, is_2D] */
MMS_API struct mms_tensor *mms_im2col(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b,
                                      int s0, int s1, int p0, int p1, int d0, int d1, bool is_2D, enum mms_type dst_type);
MMS_API struct mms_tensor *mms_conv_2d(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b,
                                       int s0, int s1, int p0, int p1, int d0, int d1);

/* Fused attention, computed with a streaming softmax (the n_q x n_kv score matrix is never stored).
   q [D, n_q, H, B] (float), k [D, n_kv, Hkv, B], v [Dv, n_kv, Hkv, B] (F32/F16/BF16, same type),
   H % Hkv == 0 (grouped heads: query head h uses KV head h / (H / Hkv)); mask optional F32/F16
   [n_kv, >= n_q, m2, m3] with m2 dividing H and m3 dividing B, repeated like soft_max_ext's.
   Result F32 [Dv, H, n_q, B] (note: heads before tokens, ready for a reshape to [Dv*H, n_q]).
   logit_softcap c != 0 replaces each score s by c * tanh(s / c) (after scale). max_bias must be 0.
   [f32 scale, f32 max_bias, f32 logit_softcap] */
MMS_API struct mms_tensor *mms_flash_attn_ext(struct mms_context *ctx, struct mms_tensor *q, struct mms_tensor *k,
                                              struct mms_tensor *v, struct mms_tensor *mask,
                                              float scale, float max_bias, float logit_softcap);
/* The same with mask rows shared between query rows: query row i (of every head and batch) adds
   mask row mask_rows[i] (I32 [n_q], each in 0 .. mask->ne[1] - 1, checked when computed) instead
   of row i, so a mask of a few patterns holds just those: the vision encoder's padding mask is two
   rows of n_kv (padding queries see no padding key, the others see every key) instead of n_q x
   n_kv. [src[4] = mask_rows] */
MMS_API struct mms_tensor *mms_flash_attn_ext_mask_rows(struct mms_context *ctx, struct mms_tensor *q, struct mms_tensor *k,
                                                        struct mms_tensor *v, struct mms_tensor *mask, struct mms_tensor *mask_rows,
                                                        float scale, float max_bias, float logit_softcap);

/* Views share memory with a; offsets and strides in bytes. The view must lie inside a's memory. */
MMS_API struct mms_tensor *mms_view_1d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, size_t offset);
MMS_API struct mms_tensor *mms_view_2d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1,
                                       size_t nb1, size_t offset);
MMS_API struct mms_tensor *mms_view_3d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                                       size_t nb1, size_t nb2, size_t offset);
MMS_API struct mms_tensor *mms_view_4d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                                       int64_t ne3, size_t nb1, size_t nb2, size_t nb3, size_t offset);
/* Reshapes need a contiguous a and the same number of elements. */
MMS_API struct mms_tensor *mms_reshape(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *shape_of);
MMS_API struct mms_tensor *mms_reshape_1d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0);
MMS_API struct mms_tensor *mms_reshape_2d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1);
MMS_API struct mms_tensor *mms_reshape_3d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2);
MMS_API struct mms_tensor *mms_reshape_4d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
/* permute moves source dim i to position axis_i (ggml's convention); transpose swaps dims 0 and 1.
   [permute: i32 axis0..3] */
MMS_API struct mms_tensor *mms_permute(struct mms_context *ctx, struct mms_tensor *a, int axis0, int axis1, int axis2, int axis3);
MMS_API struct mms_tensor *mms_transpose(struct mms_context *ctx, struct mms_tensor *a);

/* >>api-graph -------------------------------------------------------------------------------------
   A graph is the ordered list of nodes needed to compute its outputs: build_forward_expand adds a
   tensor and everything it depends on, depth first with sources in order (ggml's order). Tensors
   with op NONE are leafs, the rest nodes (views included). A tensor marked persistent (not a view)
   is a leaf too, except when it is the tensor expanded: a graph that expands a kept tensor
   computes it, any other graph reads its kept value (its producers are not walked). Graphs grow
   without a size cap and live in the context they were created in. */

struct mms_cgraph;

MMS_API struct mms_cgraph *mms_new_graph(struct mms_context *ctx);  /* NULL + last error */
MMS_API void               mms_build_forward_expand(struct mms_cgraph *graph, struct mms_tensor *tensor);
MMS_API int                mms_graph_n_nodes(const struct mms_cgraph *graph);
MMS_API struct mms_tensor *mms_graph_node(const struct mms_cgraph *graph, int i);   /* i < 0 counts from the end */
MMS_API int                mms_graph_n_leafs(const struct mms_cgraph *graph);
MMS_API struct mms_tensor *mms_graph_leaf(const struct mms_cgraph *graph, int i);
MMS_API struct mms_tensor *mms_graph_get_tensor(const struct mms_cgraph *graph, const char *name);
MMS_API uint64_t           mms_graph_id(const struct mms_cgraph *graph);   /* unique per process, never 0 */
/* A name for messages and traces ("vision encoder"); graphs are "graph #<id>" without one. */
MMS_API void               mms_graph_set_name(struct mms_cgraph *graph, const char *name);
MMS_API const char        *mms_graph_get_name(const struct mms_cgraph *graph);
/* The first error met while building (a NULL tensor from a failed op, a graph cycle), with its message. */
MMS_API enum mms_status    mms_graph_status(const struct mms_cgraph *graph);
MMS_API const char        *mms_graph_error(const struct mms_cgraph *graph);

/* A table of nodes and leafs (op, type, shape, flags, sources) written to `out` (stdout if NULL). */
MMS_API void            mms_graph_print(const struct mms_cgraph *graph, FILE *out);
/* Graphviz: `dot -Tsvg graph.dot -o graph.svg`. Inputs, outputs and views are drawn distinctly. */
MMS_API enum mms_status mms_graph_dump_dot(const struct mms_cgraph *graph, const char *path);
/* ==== end src/api/core.h ==== */

/* ==== begin src/api/backend.h ==== */
/* >>api-backend -----------------------------------------------------------------------------------
   Memory and execution. A buffer type says where memory lives (host, a device); a buffer is one
   allocation of it; tensors are placed inside buffers. A backend runs graphs whose tensors live in
   memory it can read. Placing a tensor writes its placement record (struct mms_placement: the
   memory kind from the buffer's usage, the buffer's uid and generation), so using it after its
   buffer was freed, or after its memory was handed out again (mms_backend_buffer_reset), is an
   MMS_ERR_STALE error instead of silent garbage. */

typedef struct mms_backend_buffer_type *mms_backend_buffer_type_t;
typedef struct mms_backend_buffer      *mms_backend_buffer_t;
typedef struct mms_backend             *mms_backend_t;
typedef struct mms_backend_event       *mms_backend_event_t;

/* A buffer's usage decides the memory kind of the tensors placed in it afterwards: ANY and
   WEIGHTS give MMS_MEMORY_STATIC, COMPUTE gives MMS_MEMORY_COMPUTE, PERSISTENT gives
   MMS_MEMORY_PERSISTENT, RESERVE gives MMS_MEMORY_RESERVE. Graph allocators and schedulers set
   COMPUTE, PERSISTENT and RESERVE on their own buffers; callers set WEIGHTS (or leave ANY). */
enum mms_buffer_usage {
    MMS_BUFFER_USAGE_ANY        = 0,
    MMS_BUFFER_USAGE_WEIGHTS    = 1,  /* the scheduler runs ops where their weights live */
    MMS_BUFFER_USAGE_COMPUTE    = 2,  /* reused at every graph allocation */
    MMS_BUFFER_USAGE_PERSISTENT = 3,  /* one kept tensor of a scheduler */
    MMS_BUFFER_USAGE_RESERVE    = 4   /* stand-ins while a scheduler plans: the buffer has no memory */
};

MMS_API const char          *mms_backend_buft_name(mms_backend_buffer_type_t buft);
MMS_API mms_backend_buffer_t mms_backend_buft_alloc_buffer(mms_backend_buffer_type_t buft, size_t size); /* NULL + last error */
MMS_API size_t               mms_backend_buft_get_alignment(mms_backend_buffer_type_t buft);
MMS_API size_t               mms_backend_buft_get_max_size(mms_backend_buffer_type_t buft);  /* SIZE_MAX if unlimited */
MMS_API size_t               mms_backend_buft_get_alloc_size(mms_backend_buffer_type_t buft, const struct mms_tensor *tensor);
MMS_API bool                 mms_backend_buft_is_host(mms_backend_buffer_type_t buft);

MMS_API void                 mms_backend_buffer_free(mms_backend_buffer_t buffer);   /* NULL is fine */
MMS_API const char          *mms_backend_buffer_name(mms_backend_buffer_t buffer);
MMS_API void                *mms_backend_buffer_get_base(mms_backend_buffer_t buffer);
MMS_API size_t               mms_backend_buffer_get_size(mms_backend_buffer_t buffer);
MMS_API size_t               mms_backend_buffer_get_alignment(mms_backend_buffer_t buffer);
MMS_API size_t               mms_backend_buffer_get_alloc_size(mms_backend_buffer_t buffer, const struct mms_tensor *tensor);
MMS_API bool                 mms_backend_buffer_is_host(mms_backend_buffer_t buffer);
MMS_API mms_backend_buffer_type_t mms_backend_buffer_get_type(mms_backend_buffer_t buffer);
MMS_API void                 mms_backend_buffer_set_usage(mms_backend_buffer_t buffer, enum mms_buffer_usage usage);
MMS_API enum mms_buffer_usage mms_backend_buffer_get_usage(mms_backend_buffer_t buffer);
MMS_API enum mms_status      mms_backend_buffer_clear(mms_backend_buffer_t buffer, uint8_t value);
/* Start a new generation: every tensor placed in the buffer before becomes stale. Allocators call
   this before handing the memory out again. */
MMS_API void                 mms_backend_buffer_reset(mms_backend_buffer_t buffer);
MMS_API uint64_t             mms_backend_buffer_get_generation(mms_backend_buffer_t buffer);

/* Place a tensor (not a view) at addr inside buffer; tensor memory must not already be set. */
MMS_API enum mms_status mms_backend_tensor_alloc(mms_backend_buffer_t buffer, struct mms_tensor *tensor, void *addr);
/* Give a view the memory of its view_src (which must be placed). */
MMS_API enum mms_status mms_backend_view_init(struct mms_tensor *tensor);
/* A question, so it logs nothing: OK if the tensor's memory is valid now; MMS_ERR_STATE if it was
   never placed (or is a planning stand-in); MMS_ERR_STALE if its buffer was freed or reset since,
   or, for a kept tensor, if something it was computed from has been written since (section 6 of
   the manual). The thread's last error then says which and what to do. */
MMS_API enum mms_status mms_backend_tensor_check(const struct mms_tensor *tensor);
/* The kind of memory the tensor was placed in (its record; it may be stale: check it to know). */
MMS_API enum mms_memory_kind mms_tensor_memory_kind(const struct mms_tensor *tensor);
MMS_API const char          *mms_memory_kind_name(enum mms_memory_kind kind);   /* "compute", ... */

/* Data in and out, by byte range of a contiguous tensor. Works for tensors in any buffer and for
   tensors of an allocating (host) context. Range, placement and staleness are checked. */
MMS_API enum mms_status mms_backend_tensor_set(struct mms_tensor *tensor, const void *data, size_t offset, size_t size);
MMS_API enum mms_status mms_backend_tensor_get(const struct mms_tensor *tensor, void *data, size_t offset, size_t size);
MMS_API enum mms_status mms_backend_tensor_memset(struct mms_tensor *tensor, uint8_t value, size_t offset, size_t size);
/* Copy between two tensors of the same layout, in any buffers (through the host if needed). */
MMS_API enum mms_status mms_backend_tensor_copy(const struct mms_tensor *src, struct mms_tensor *dst);

/* Place every tensor of ctx that has no memory yet (views are initialised from their sources) in
   one new buffer. NULL + last error on failure (MMS_ERR_INVALID_ARG with nothing to allocate). */
MMS_API mms_backend_buffer_t mms_backend_alloc_ctx_tensors_from_buft(struct mms_context *ctx, mms_backend_buffer_type_t buft);
MMS_API mms_backend_buffer_t mms_backend_alloc_ctx_tensors(struct mms_context *ctx, mms_backend_t backend);

MMS_API const char          *mms_backend_name(mms_backend_t backend);
MMS_API void                 mms_backend_free(mms_backend_t backend);   /* NULL is fine */
MMS_API mms_backend_buffer_type_t mms_backend_get_default_buffer_type(mms_backend_t backend);
MMS_API mms_backend_buffer_t mms_backend_alloc_buffer(mms_backend_t backend, size_t size);
MMS_API size_t               mms_backend_get_alignment(mms_backend_t backend);
MMS_API size_t               mms_backend_get_max_size(mms_backend_t backend);
MMS_API bool                 mms_backend_supports_op(mms_backend_t backend, const struct mms_tensor *op);
MMS_API bool                 mms_backend_supports_buft(mms_backend_t backend, mms_backend_buffer_type_t buft);
MMS_API bool                 mms_backend_offload_op(mms_backend_t backend, const struct mms_tensor *op);

/* Compute every node of graph, in order. Every tensor must be placed in memory this backend can
   read, and live (see mms_backend_tensor_check); a graph whose build failed is refused. */
MMS_API enum mms_status mms_backend_graph_compute(mms_backend_t backend, struct mms_cgraph *graph);
MMS_API enum mms_status mms_backend_graph_compute_async(mms_backend_t backend, struct mms_cgraph *graph);
MMS_API enum mms_status mms_backend_synchronize(mms_backend_t backend);
MMS_API enum mms_status mms_backend_tensor_set_async(mms_backend_t backend, struct mms_tensor *tensor, const void *data, size_t offset, size_t size);
MMS_API enum mms_status mms_backend_tensor_get_async(mms_backend_t backend, const struct mms_tensor *tensor, void *data, size_t offset, size_t size);
/* Queued on backend_dst after the work queued on backend_src; falls back to a synchronous copy. */
MMS_API enum mms_status mms_backend_tensor_copy_async(mms_backend_t backend_src, mms_backend_t backend_dst,
                                                      const struct mms_tensor *src, struct mms_tensor *dst);

/* Events order work across backends. A backend without events gets NULL from event_new; the
   scheduler then synchronizes instead. */
MMS_API mms_backend_event_t mms_backend_event_new(mms_backend_t backend);
MMS_API void                mms_backend_event_free(mms_backend_event_t event);
MMS_API enum mms_status     mms_backend_event_record(mms_backend_event_t event);
MMS_API enum mms_status     mms_backend_event_synchronize(mms_backend_event_t event);
MMS_API enum mms_status     mms_backend_event_wait(mms_backend_t backend, mms_backend_event_t event);

/* >>api-cpu ---------------------------------------------------------------------------------------
   The CPU backend: host memory aligned to 64 bytes, a thread pool, AVX2/FMA/F16C kernels chosen at
   run time when the CPU has them, and a portable scalar path. */

MMS_API mms_backend_t   mms_backend_cpu_init(void);   /* NULL + last error */
MMS_API bool            mms_backend_is_cpu(mms_backend_t backend);
MMS_API enum mms_status mms_backend_cpu_set_n_threads(mms_backend_t backend, int n_threads); /* default: all cores */
MMS_API int             mms_backend_cpu_get_n_threads(mms_backend_t backend);
MMS_API mms_backend_buffer_type_t mms_backend_cpu_buffer_type(void);
/* Wrap caller-owned host memory (a mapped model file, say) as a buffer; freeing it frees nothing. */
MMS_API mms_backend_buffer_t mms_backend_cpu_buffer_from_ptr(void *ptr, size_t size);
/* CPU_REPACK: host memory for weights, each kept in the CPU kernels' interleaved layout where one
   exists for its type and shape (mms_backend_cpu_repacks: Q4_0, Q4_K and Q8_0 matrices of at least
   8 rows, 2D, contiguous; others are stored as in a CPU buffer). Q4_0 and Q8_0 take the same bytes
   as the file's layout, Q4_K 2.8% more (mms_backend_buft_get_alloc_size tells); a
   prompt-size product skips repacking its tiles, a decode step reads 4 groups of 8 rows side by
   side (see the CPU backend's manual section). Such a tensor may only be read by MUL_MAT as its
   first operand (computing anything else that reads or views it fails with MMS_ERR_UNSUPPORTED);
   mms_backend_tensor_set/get convert and take whole tensors only; copies to other buffers
   convert back. Only the CPU backend uses these buffers (they are not host buffers to others). */
MMS_API mms_backend_buffer_type_t mms_backend_cpu_repack_buffer_type(void);
MMS_API bool                      mms_backend_cpu_repacks(const struct mms_tensor *tensor);
/* Per-op-type time profile: while on, each computed node's wall time (from its start until every
   thread is done with it) is added to its op's total. print writes one line per op type, slowest
   first, and resets the totals. MMS_CPU_PROFILE=1 in the environment turns it on for every CPU
   backend and prints to stderr when the backend is freed. */
MMS_API void            mms_backend_cpu_set_profile(mms_backend_t backend, bool on);
MMS_API void            mms_backend_cpu_print_profile(mms_backend_t backend, FILE *out);

enum mms_cpu_kernels {
    MMS_CPU_KERNELS_AUTO         = 0,  /* the best set this CPU and build support */
    MMS_CPU_KERNELS_SCALAR       = 1,  /* portable C */
    MMS_CPU_KERNELS_AVX2         = 2,  /* x86-64: AVX2 + FMA + F16C */
    MMS_CPU_KERNELS_NEON         = 3,  /* 64-bit ARM: NEON (every ARMv8-A CPU) */
    MMS_CPU_KERNELS_NEON_DOTPROD = 4,  /* 64-bit ARM: NEON + the dot-product instructions (ARMv8.2 dotprod) */
    MMS_CPU_KERNELS_AVX512       = 5   /* x86-64: AVX2's set + AVX-512 F/BW/DQ/VL, VNNI and BF16 (Zen 4, Sapphire Rapids) */
};
/* Choose the kernel set for the whole process (also MMS_CPU_KERNELS=auto|scalar|avx2|avx512|neon|
   neon_dotprod in the environment, read once). A set this CPU or build lacks is
   MMS_ERR_UNSUPPORTED; mms_cpu_kernels_supported tells beforehand. */
MMS_API enum mms_status       mms_cpu_set_kernels(enum mms_cpu_kernels kernels);
MMS_API enum mms_cpu_kernels  mms_cpu_get_kernels(void);         /* the one in use, never AUTO */
MMS_API const char           *mms_cpu_kernels_name(enum mms_cpu_kernels kernels);   /* "unknown" past the last set */
MMS_API bool                  mms_cpu_kernels_supported(enum mms_cpu_kernels kernels);
MMS_API bool                  mms_cpu_has_avx2(void);            /* CPU and build both support it */
MMS_API int                   mms_cpu_count(void);               /* online cores */

/* >>api-cuda --------------------------------------------------------------------------------------
   The CUDA backend lives in mmsched_cuda.cu, built with nvcc and linked when MMS_CUDA is defined.
   Without it these return 0 / NULL / false, with MMS_ERR_UNSUPPORTED as the last error. */

MMS_API int                       mms_backend_cuda_get_device_count(void);
MMS_API mms_backend_t             mms_backend_cuda_init(int device);
MMS_API bool                      mms_backend_is_cuda(mms_backend_t backend);
MMS_API mms_backend_buffer_type_t mms_backend_cuda_buffer_type(int device);
MMS_API mms_backend_buffer_type_t mms_backend_cuda_host_buffer_type(void);  /* pinned host memory */

/* >>api-backend-impl ------------------------------------------------------------------------------
   The interface a backend implements. The CPU backend, the CUDA backend and the test suite's
   limited backend are all written against it. Members marked optional may be NULL. Errors are
   reported with mms_set_error and returned as statuses. */

struct mms_backend_buffer_type_i {
    const char          *(*get_name)      (mms_backend_buffer_type_t buft);
    mms_backend_buffer_t (*alloc_buffer)  (mms_backend_buffer_type_t buft, size_t size);  /* NULL + mms_set_error */
    size_t               (*get_alignment) (mms_backend_buffer_type_t buft);
    size_t               (*get_max_size)  (mms_backend_buffer_type_t buft);  /* optional: SIZE_MAX */
    size_t               (*get_alloc_size)(mms_backend_buffer_type_t buft, const struct mms_tensor *tensor); /* optional: mms_nbytes */
    bool                 (*is_host)       (mms_backend_buffer_type_t buft);  /* optional: false */
};

struct mms_backend_buffer_type {
    struct mms_backend_buffer_type_i iface;
    void *context;
};

struct mms_backend_buffer_i {
    void            (*free_buffer)  (mms_backend_buffer_t buffer);  /* optional: release context */
    void           *(*get_base)     (mms_backend_buffer_t buffer);
    enum mms_status (*init_tensor)  (mms_backend_buffer_t buffer, struct mms_tensor *tensor);  /* optional */
    enum mms_status (*memset_tensor)(mms_backend_buffer_t buffer, struct mms_tensor *tensor, uint8_t value, size_t offset, size_t size);
    enum mms_status (*set_tensor)   (mms_backend_buffer_t buffer, struct mms_tensor *tensor, const void *data, size_t offset, size_t size);
    enum mms_status (*get_tensor)   (mms_backend_buffer_t buffer, const struct mms_tensor *tensor, void *data, size_t offset, size_t size);
    /* optional: copy src (in any buffer) into dst (in this buffer) directly; return false to let
       the caller go through the host */
    bool            (*cpy_tensor)   (mms_backend_buffer_t buffer, const struct mms_tensor *src, struct mms_tensor *dst);
    enum mms_status (*clear)        (mms_backend_buffer_t buffer, uint8_t value);
};

struct mms_backend_buffer {
    struct mms_backend_buffer_i iface;
    mms_backend_buffer_type_t   buft;
    void                       *context;
    size_t                      size;
    enum mms_buffer_usage       usage;
    uint64_t                    uid;         /* unique in the process; set by mms_backend_buffer_init */
    uint64_t                    generation;  /* starts at 1; bumped by mms_backend_buffer_reset */
    uint64_t                    n_clears;    /* mms_backend_buffer_clear calls: writes to every tensor in it */
};

/* Create the buffer object for memory a buffer type allocated (registers it as live). */
MMS_API mms_backend_buffer_t mms_backend_buffer_init(mms_backend_buffer_type_t buft, struct mms_backend_buffer_i iface,
                                                     void *context, size_t size);

struct mms_backend_i {
    const char               *(*get_name)(mms_backend_t backend);
    void                      (*free)(mms_backend_t backend);
    mms_backend_buffer_type_t (*get_default_buffer_type)(mms_backend_t backend);
    bool                      (*supports_op)(mms_backend_t backend, const struct mms_tensor *op);
    bool                      (*supports_buft)(mms_backend_t backend, mms_backend_buffer_type_t buft);
    bool                      (*offload_op)(mms_backend_t backend, const struct mms_tensor *op);  /* optional */
    /* May return before the work is done if the backend is asynchronous; synchronize waits. */
    enum mms_status           (*graph_compute)(mms_backend_t backend, struct mms_cgraph *graph);
    enum mms_status           (*synchronize)(mms_backend_t backend);                               /* optional */
    enum mms_status           (*set_tensor_async)(mms_backend_t backend, struct mms_tensor *tensor,
                                                  const void *data, size_t offset, size_t size);   /* optional */
    enum mms_status           (*get_tensor_async)(mms_backend_t backend, const struct mms_tensor *tensor,
                                                  void *data, size_t offset, size_t size);         /* optional */
    /* optional: MMS_ERR_UNSUPPORTED lets the caller fall back to a synchronous copy */
    enum mms_status           (*cpy_tensor_async)(mms_backend_t backend_src, mms_backend_t backend_dst,
                                                  const struct mms_tensor *src, struct mms_tensor *dst);
    mms_backend_event_t       (*event_new)(mms_backend_t backend);                                  /* optional */
    void                      (*event_free)(mms_backend_event_t event);
    enum mms_status           (*event_record)(mms_backend_event_t event);
    enum mms_status           (*event_synchronize)(mms_backend_event_t event);
    enum mms_status           (*event_wait)(mms_backend_t backend, mms_backend_event_t event);
};

struct mms_backend {
    struct mms_backend_i iface;
    void *context;
};

struct mms_backend_event {
    mms_backend_t backend;
    void *context;
};
/* ==== end src/api/backend.h ==== */

/* ==== begin src/api/alloc.h ==== */
/* >>api-alloc -------------------------------------------------------------------------------------
   The graph allocator plans where every tensor of a graph lives inside one or more buffers and
   places them, reusing memory as soon as a tensor is dead. Planning works on lifetime intervals
   (a tensor lives from its producer to its last consumer) and keeps the smallest of several
   placements; it reports the plan, the lower bound and a picture of it.

   Rules:
   - a tensor is planned if it has no memory yet, or its memory is in this allocator's buffers
     (a graph allocated again); tensors with other memory (weights, persistent) are left alone;
   - views cost nothing and keep their source alive until the view's last consumer;
   - inputs (mms_set_input) are placed first, at the bottom, and live through the whole graph: they
     survive compute, so a graph can be computed again on the same inputs (ggml lets an in-place
     op overwrite an input; mms_gallocr_set_inputs_reusable(true) allows that here too);
   - outputs and persistent tensors live to the end of the graph and are never reused in it;
   - in place: an op of the whitelist ADD, SUB, MUL, DIV, SCALE, SQR, SQRT, EXP, TANH, SILU, GELU,
     GELU_TANH, NORM, RMS_NORM, SOFT_MAX and ROPE takes over the memory of src[0] or src[1] when
     that source is planned here, is not a view and has no views, has the same type, shape and
     strides, and this op is its last consumer. (Every CPU kernel of these ops reads a row before
     writing the same row, and other backends must keep that property.)
   - every alloc_graph starts a new generation of its buffers: tensors placed by an earlier
     allocation become stale, and using them is an error (see the lifetime section).
   A plan is reused by alloc_graph only when the graph has the same topology as the one planned
   (ops, types, shapes, strides, flags, sources, which tensors need memory); otherwise it plans
   again and grows the buffers if needed (buffers never shrink; mms_gallocr_get_n_reallocs). */

typedef struct mms_gallocr *mms_gallocr_t;

MMS_API mms_gallocr_t   mms_gallocr_new(mms_backend_buffer_type_t buft);                      /* NULL + last error */
MMS_API mms_gallocr_t   mms_gallocr_new_n(mms_backend_buffer_type_t *bufts, int n_bufs);      /* NULL + last error */
MMS_API void            mms_gallocr_free(mms_gallocr_t galloc);

/* Plan (and allocate the buffers) for a worst-case graph. ids give each node's and leaf's buffer
   (indices into the buffer types of new_n; NULL = all in buffer 0). */
MMS_API enum mms_status mms_gallocr_reserve(mms_gallocr_t galloc, struct mms_cgraph *graph);
MMS_API enum mms_status mms_gallocr_reserve_n(mms_gallocr_t galloc, struct mms_cgraph *graph,
                                              const int *node_buffer_ids, const int *leaf_buffer_ids);
/* Place every planned tensor of graph (planning first when the topology changed). Views of
   placed tensors are initialised. */
MMS_API enum mms_status mms_gallocr_alloc_graph(mms_gallocr_t galloc, struct mms_cgraph *graph);
MMS_API size_t          mms_gallocr_get_buffer_size(mms_gallocr_t galloc, int buffer_id);  /* bytes allocated */

MMS_API void mms_gallocr_set_inputs_reusable(mms_gallocr_t galloc, bool reusable);  /* default false */
MMS_API void mms_gallocr_set_inplace(mms_gallocr_t galloc, bool enabled);           /* default true */

/* The plan: one entry per planned tensor, in execution order (leafs first). Steps are node
   indices; -1 is "before the first node" (leafs and inputs). */
struct mms_gallocr_tensor_info {
    const struct mms_tensor *tensor;
    int    buffer_id;
    int    chunk;                         /* which buffer of a buffer id split by max size */
    size_t offset;                        /* bytes from the start of the chunk */
    size_t size;                          /* bytes reserved, aligned */
    int    first_use, last_use;           /* steps: producer and last consumer (or the end) */
    const struct mms_tensor *inplace_of;  /* the dead source whose memory this took over, or NULL */
};

struct mms_gallocr_buffer_info {
    size_t      planned;        /* bytes the plan needs (all chunks) */
    size_t      lower_bound;    /* the largest sum of live sizes at any step, under the rules above */
    size_t      bound_universal;/* output plus everything still needed after each step, max over steps
                                   (no plan can go below it, whatever it overwrites) */
    size_t      no_reuse;       /* every planned tensor in its own memory */
    size_t      allocated;      /* bytes of the buffers now held (never less than planned) */
    int         n_chunks;
    int         n_tensors;
    const char *strategy;       /* the placement that won */
};

MMS_API int             mms_gallocr_get_n_buffers(mms_gallocr_t galloc);
MMS_API enum mms_status mms_gallocr_get_buffer_info(mms_gallocr_t galloc, int buffer_id, struct mms_gallocr_buffer_info *info);
MMS_API int             mms_gallocr_get_n_tensor_infos(mms_gallocr_t galloc);
MMS_API const struct mms_gallocr_tensor_info *mms_gallocr_get_tensor_info(mms_gallocr_t galloc, int i);
MMS_API int             mms_gallocr_get_n_reallocs(mms_gallocr_t galloc);  /* times a buffer had to grow */
MMS_API int             mms_gallocr_get_n_plans(mms_gallocr_t galloc);     /* times a plan was made */
MMS_API int64_t         mms_gallocr_get_plan_time_us(mms_gallocr_t galloc);/* duration of the last planning */
/* A table of the plan: per buffer the sizes and bounds, then per tensor buffer, offset, size, steps. */
MMS_API void            mms_gallocr_print_plan(mms_gallocr_t galloc, FILE *out);
/* An SVG picture of one buffer's plan: execution step across, offset up, one rectangle per tensor
   (in-place reuse drawn as the same rectangle continuing with a different shade, views as ticks),
   the live bytes per step as a line, the lower bound dashed. */
MMS_API enum mms_status mms_gallocr_write_svg(mms_gallocr_t galloc, int buffer_id, const char *path);
/* ==== end src/api/alloc.h ==== */

/* ==== begin src/api/sched.h ==== */
/* >>api-sched -------------------------------------------------------------------------------------
   The scheduler runs graphs over several backends: it decides where each op runs, cuts the graph
   into splits with the copies they need, plans all compute memory with one graph allocator, and
   keeps the lifetime promises:
   - an op runs where its weights live, where the caller pinned it, or where its neighbours run;
     ops a backend does not support fall back to one that does; inputs of a split that live in
     memory its backend cannot use are copied in;
   - a tensor marked with mms_set_persistent is kept: a graph that expands it computes it into a
     buffer of its own on its backend, outside the reusable compute memory, and every later graph of
     the same scheduler reads it as an input (on any backend) until mms_backend_sched_release or
     sched_free; reading it before it is computed, or after something it was computed from has been
     written, is an error;
   - caller tensors are written only by a successful alloc_graph (their placement) and by compute
     (their versions), never by reserve (manual section 8);
   - using in a new graph a result that an earlier graph left in compute memory is an error that
     names the tensor, the graph it came from and the fix; so is reading it back (it is stale);
   - the caller's graph is never rewired: the scheduler computes on its own copies of the nodes,
     which share memory with the caller's tensors; reserve-then-alloc of one graph works, and
     computing a graph other than the one allocated is an error.
   Debugging aids (set by the environment when the scheduler is made, or by the calls below):
     MMS_SCHED_DEBUG=1   a trace of each allocation: splits, their inputs and copies, buffer sizes
     MMS_SCHED_DEBUG=2   also every node: backend, why there, buffer, offset, size, live range
     MMS_SCHED_POISON=1  fill compute memory with 0xFF bytes (NaN in f32, f16 and bf16) at each
                         allocation, so reading memory this graph did not write shows as NaN
     MMS_SCHED_DUMP=glob write every computed node whose name matches (* and ?) to a file, with a
                         checksum; MMS_SCHED_DUMP_DIR (default ".") chooses the folder
   The trace goes to stderr (or the FILE given to mms_backend_sched_set_debug) whatever the log
   level. Formats are described in the manual. */

typedef struct mms_backend_sched *mms_backend_sched_t;

/* ask = true: does the callback want to see tensor t after it is computed? ask = false: t has been
   computed (read it with mms_backend_tensor_get); return false to stop (compute returns MMS_ABORTED). */
typedef bool (*mms_backend_sched_eval_callback)(struct mms_tensor *t, bool ask, void *user_data);

/* backends in priority order (index 0 first); bufts: the compute buffer type per backend, or NULL
   for each backend's default. parallel: keep several copies of split inputs so consecutive graphs
   can overlap (pipeline parallelism). op_offload: run ops with large batches on a higher-priority
   backend even when their weights are in host memory (the weights are copied in). */
MMS_API mms_backend_sched_t mms_backend_sched_new(mms_backend_t *backends, mms_backend_buffer_type_t *bufts, int n_backends,
                                                  bool parallel, bool op_offload);   /* NULL + last error */
MMS_API void                mms_backend_sched_free(mms_backend_sched_t sched);     /* releases persistent tensors too */

/* Plan compute memory for a worst-case graph (no tensor is placed). */
MMS_API enum mms_status mms_backend_sched_reserve(mms_backend_sched_t sched, struct mms_cgraph *graph);
/* Assign backends, split, plan (again only if the topology changed) and place every tensor. */
MMS_API enum mms_status mms_backend_sched_alloc_graph(mms_backend_sched_t sched, struct mms_cgraph *graph);
/* Compute the allocated graph (allocating it first if nothing is allocated). */
MMS_API enum mms_status mms_backend_sched_graph_compute(mms_backend_sched_t sched, struct mms_cgraph *graph);
MMS_API enum mms_status mms_backend_sched_graph_compute_async(mms_backend_sched_t sched, struct mms_cgraph *graph);
MMS_API enum mms_status mms_backend_sched_synchronize(mms_backend_sched_t sched);
/* Forget the allocation and the pins: every tensor in compute memory becomes stale. */
MMS_API void            mms_backend_sched_reset(mms_backend_sched_t sched);

/* Pin a tensor (an op) to a backend for the next allocations, until reset. */
MMS_API enum mms_status mms_backend_sched_set_tensor_backend(mms_backend_sched_t sched, struct mms_tensor *tensor, mms_backend_t backend);
MMS_API mms_backend_t   mms_backend_sched_get_tensor_backend(mms_backend_sched_t sched, const struct mms_tensor *tensor);
MMS_API void            mms_backend_sched_set_eval_callback(mms_backend_sched_t sched, mms_backend_sched_eval_callback callback, void *user_data);

/* Free the memory of a persistent tensor (it becomes stale). */
MMS_API enum mms_status mms_backend_sched_release(mms_backend_sched_t sched, struct mms_tensor *tensor);

MMS_API int           mms_backend_sched_get_n_backends(mms_backend_sched_t sched);
MMS_API mms_backend_t mms_backend_sched_get_backend(mms_backend_sched_t sched, int i);
MMS_API int           mms_backend_sched_get_n_splits(mms_backend_sched_t sched);     /* of the last graph split */
MMS_API int           mms_backend_sched_get_n_copies(mms_backend_sched_t sched);     /* pipeline copies: 1, or more with parallel */
MMS_API int           mms_backend_sched_get_n_split_inputs(mms_backend_sched_t sched); /* tensors copied between backends per compute */
MMS_API size_t        mms_backend_sched_get_buffer_size(mms_backend_sched_t sched, mms_backend_t backend);      /* compute memory */
MMS_API size_t        mms_backend_sched_get_persistent_size(mms_backend_sched_t sched, mms_backend_t backend);  /* kept tensors */
MMS_API int           mms_backend_sched_get_n_reallocs(mms_backend_sched_t sched);   /* compute buffer growths */
/* The compute-memory plan of the last allocation: see mms_gallocr_* (buffer i is backend i). */
MMS_API mms_gallocr_t mms_backend_sched_get_gallocr(mms_backend_sched_t sched);

/* Debugging aids (the environment variables above set the defaults). */
MMS_API void            mms_backend_sched_set_debug(mms_backend_sched_t sched, int level, FILE *out);   /* out NULL: stderr */
MMS_API void            mms_backend_sched_set_poison(mms_backend_sched_t sched, bool poison);
MMS_API enum mms_status mms_backend_sched_set_dump(mms_backend_sched_t sched, const char *pattern, const char *dir);
/* ==== end src/api/sched.h ==== */

#ifndef MMS_NO_GGUF   /* the parts below are left out under this option */

/* ==== begin src/api/gguf.h ==== */
/* >>api-gguf --------------------------------------------------------------------------------------
   GGUF files (versions 2 and 3): a reader that memory-maps the file and validates every count,
   offset, size and type against the file's length before anything is used (a truncated or
   hostile file is an MMS_ERR_FORMAT error naming what is wrong and where, never a crash), and a
   writer. Keys and tensors are looked up by name; values convert between integer types when they
   fit. Tensor data stays in the mapping until the file is closed. */

enum mms_gguf_type {      /* GGUF's own value type ids */
    MMS_GGUF_TYPE_NONE    = -1,  /* not in files: what the type getters return for a bad index */
    MMS_GGUF_TYPE_UINT8   = 0,
    MMS_GGUF_TYPE_INT8    = 1,
    MMS_GGUF_TYPE_UINT16  = 2,
    MMS_GGUF_TYPE_INT16   = 3,
    MMS_GGUF_TYPE_UINT32  = 4,
    MMS_GGUF_TYPE_INT32   = 5,
    MMS_GGUF_TYPE_FLOAT32 = 6,
    MMS_GGUF_TYPE_BOOL    = 7,
    MMS_GGUF_TYPE_STRING  = 8,
    MMS_GGUF_TYPE_ARRAY   = 9,
    MMS_GGUF_TYPE_UINT64  = 10,
    MMS_GGUF_TYPE_INT64   = 11,
    MMS_GGUF_TYPE_FLOAT64 = 12
};

struct mms_gguf;

/* Open a file (memory-mapped) or a block of memory (which must outlive the handle). NULL + last
   error (MMS_ERR_IO for the file, MMS_ERR_FORMAT for its contents). */
MMS_API struct mms_gguf *mms_gguf_open(const char *path);
MMS_API struct mms_gguf *mms_gguf_open_memory(const void *data, size_t size);
MMS_API void             mms_gguf_close(struct mms_gguf *gguf);

MMS_API uint32_t    mms_gguf_get_version(const struct mms_gguf *gguf);
MMS_API size_t      mms_gguf_get_alignment(const struct mms_gguf *gguf);   /* general.alignment, default 32 */
MMS_API const char *mms_gguf_get_path(const struct mms_gguf *gguf);        /* "" for memory */

/* Metadata. Keys are found by exact name (bytes compared as they are); -1 if absent. A bad index
   raises MMS_ERR_INVALID_ARG and gets NULL, MMS_GGUF_TYPE_NONE or -1, as does a non-array given to
   the two array calls. */
MMS_API int64_t            mms_gguf_get_n_kv(const struct mms_gguf *gguf);
MMS_API int64_t            mms_gguf_find_key(const struct mms_gguf *gguf, const char *key);
MMS_API const char        *mms_gguf_get_key(const struct mms_gguf *gguf, int64_t i);
MMS_API enum mms_gguf_type mms_gguf_get_kv_type(const struct mms_gguf *gguf, int64_t i);
MMS_API enum mms_gguf_type mms_gguf_get_arr_type(const struct mms_gguf *gguf, int64_t i);   /* element type of an array */
MMS_API int64_t            mms_gguf_get_arr_n(const struct mms_gguf *gguf, int64_t i);      /* elements of an array */

/* Typed getters by key. MMS_ERR_INVALID_ARG if the key is missing, MMS_ERR_FORMAT if the value has
   another type or does not fit (integers convert between widths and signedness when in range;
   f32 accepts f32 and f64). The message names the key, the file and the types. */
MMS_API enum mms_status mms_gguf_get_u32(const struct mms_gguf *gguf, const char *key, uint32_t *out);
MMS_API enum mms_status mms_gguf_get_i32(const struct mms_gguf *gguf, const char *key, int32_t *out);
MMS_API enum mms_status mms_gguf_get_u64(const struct mms_gguf *gguf, const char *key, uint64_t *out);
MMS_API enum mms_status mms_gguf_get_f32(const struct mms_gguf *gguf, const char *key, float *out);
MMS_API enum mms_status mms_gguf_get_bool(const struct mms_gguf *gguf, const char *key, bool *out);
/* Strings are not NUL-terminated in the file: the pointer is into the mapping, with its length. */
MMS_API enum mms_status mms_gguf_get_str(const struct mms_gguf *gguf, const char *key, const char **out, size_t *len);
/* Numeric arrays, converted element by element into out (the first cap elements); *n gets the
   length, so cap 0 with out NULL asks for it. i32 takes arrays of any integer type, f32 of f32/f64. */
MMS_API enum mms_status mms_gguf_get_arr_i32(const struct mms_gguf *gguf, const char *key, int32_t *out, int64_t cap, int64_t *n);
MMS_API enum mms_status mms_gguf_get_arr_f32(const struct mms_gguf *gguf, const char *key, float *out, int64_t cap, int64_t *n);
/* Element i of a string array. */
MMS_API enum mms_status mms_gguf_get_arr_str(const struct mms_gguf *gguf, const char *key, int64_t i, const char **out, size_t *len);

/* Tensors. ggml_type is GGUF's type id; type is ours (MMS_TYPE_INVALID when we have no such type:
   the tensor can still be listed, not loaded). ne has n_dims entries, the rest 1. */
struct mms_gguf_tensor_info {
    const char    *name;
    uint32_t       ggml_type;
    enum mms_type  type;
    int            n_dims;
    int64_t        ne[MMS_MAX_DIMS];
    uint64_t       offset;      /* from the start of the data section */
    size_t         size;        /* bytes */
    const void    *data;        /* into the mapping */
};

MMS_API int64_t         mms_gguf_get_n_tensors(const struct mms_gguf *gguf);
MMS_API int64_t         mms_gguf_find_tensor(const struct mms_gguf *gguf, const char *name);   /* -1 if absent */
MMS_API enum mms_status mms_gguf_get_tensor(const struct mms_gguf *gguf, int64_t i, struct mms_gguf_tensor_info *info);

/* The ggml type id of our type (GGUF stores those); -1 for none. */
MMS_API int             mms_gguf_type_from_mms(enum mms_type type);
MMS_API enum mms_type   mms_gguf_type_to_mms(uint32_t ggml_type);

/* Writer: keys and tensors in the order added; written in one go. Every add copies its data.
   Setting a key again replaces its value in place; general.alignment must be a u32 power of two. */
struct mms_gguf_writer;

MMS_API struct mms_gguf_writer *mms_gguf_writer_new(void);      /* NULL + last error */
MMS_API void                    mms_gguf_writer_free(struct mms_gguf_writer *w);
MMS_API enum mms_status mms_gguf_writer_set_u32(struct mms_gguf_writer *w, const char *key, uint32_t v);
MMS_API enum mms_status mms_gguf_writer_set_i32(struct mms_gguf_writer *w, const char *key, int32_t v);
MMS_API enum mms_status mms_gguf_writer_set_u64(struct mms_gguf_writer *w, const char *key, uint64_t v);
MMS_API enum mms_status mms_gguf_writer_set_f32(struct mms_gguf_writer *w, const char *key, float v);
MMS_API enum mms_status mms_gguf_writer_set_bool(struct mms_gguf_writer *w, const char *key, bool v);
MMS_API enum mms_status mms_gguf_writer_set_str(struct mms_gguf_writer *w, const char *key, const char *v);
MMS_API enum mms_status mms_gguf_writer_set_arr_i32(struct mms_gguf_writer *w, const char *key, const int32_t *v, int64_t n);
MMS_API enum mms_status mms_gguf_writer_set_arr_f32(struct mms_gguf_writer *w, const char *key, const float *v, int64_t n);
MMS_API enum mms_status mms_gguf_writer_set_arr_str(struct mms_gguf_writer *w, const char *key, const char *const *v, int64_t n);
/* Copies a key (any type) from an open file. */
MMS_API enum mms_status mms_gguf_writer_copy_kv(struct mms_gguf_writer *w, const struct mms_gguf *src, int64_t i);
/* A tensor of our type, ne[0..n_dims-1]; data holds mms_row_size(type, ne[0]) * rows bytes. */
MMS_API enum mms_status mms_gguf_writer_add_tensor(struct mms_gguf_writer *w, const char *name, enum mms_type type,
                                                   int n_dims, const int64_t *ne, const void *data);
MMS_API enum mms_status mms_gguf_writer_write(const struct mms_gguf_writer *w, const char *path);   /* version 3 */
/* ==== end src/api/gguf.h ==== */

/* ==== begin src/api/formats.h ==== */
/* >>api-json ---------------------------------------------------------------------------------------
   A strict JSON reader (RFC 8259), for the files Hugging Face checkpoints come with. Anything the
   grammar does not allow is an MMS_ERR_FORMAT error naming the source, the line and column and
   what is wrong: trailing commas, comments, NaN or Infinity, leading zeros, numbers too large for
   a double, control characters or invalid UTF-8 in strings, lone surrogates in \u escapes,
   duplicate keys in an object, nesting deeper than 128, anything after the value. Values are
   numbered: 0 is the root, -1 stands for none (a missing key, a wrong type, a bad index). */

enum mms_json_type {
    MMS_JSON_NONE   = 0,   /* not a value: what mms_json_type says for -1 or a bad index */
    MMS_JSON_NULL   = 1,
    MMS_JSON_FALSE  = 2,
    MMS_JSON_TRUE   = 3,
    MMS_JSON_NUMBER = 4,
    MMS_JSON_STRING = 5,
    MMS_JSON_ARRAY  = 6,
    MMS_JSON_OBJECT = 7
};

struct mms_json;

/* source names the text in error messages (a path, or NULL). NULL + last error. */
MMS_API struct mms_json *mms_json_parse(const char *text, size_t len, const char *source);
MMS_API struct mms_json *mms_json_parse_file(const char *path);    /* MMS_ERR_IO when it cannot be read */
MMS_API void             mms_json_free(struct mms_json *json);
MMS_API const char      *mms_json_source(const struct mms_json *json);

MMS_API enum mms_json_type mms_json_type(const struct mms_json *json, int64_t v);
MMS_API int64_t     mms_json_len(const struct mms_json *json, int64_t v);             /* elements or members; -1 for others */
MMS_API int64_t     mms_json_at(const struct mms_json *json, int64_t v, int64_t i);   /* element i, or the value of member i */
MMS_API const char *mms_json_key(const struct mms_json *json, int64_t object, int64_t i, size_t *len);   /* member i's key */
MMS_API int64_t     mms_json_get(const struct mms_json *json, int64_t object, const char *key);          /* by key, O(log n) */
/* A string's bytes (escapes decoded, NUL-terminated, valid UTF-8) and length; NULL for other types. */
MMS_API const char *mms_json_str(const struct mms_json *json, int64_t v, size_t *len);
MMS_API bool        mms_json_num(const struct mms_json *json, int64_t v, double *out);
/* An integral number of at most 2^53 in magnitude, which a double holds exactly (an integer
   literal beyond it is refused even when its double looks integral); false otherwise. */
MMS_API bool        mms_json_int(const struct mms_json *json, int64_t v, int64_t *out);

/* >>api-safetensors --------------------------------------------------------------------------------
   safetensors files: an 8-byte little-endian header length, a JSON header naming each tensor's
   dtype, shape and data_offsets, then the data. The file is memory-mapped and validated before
   anything is used: the header length against the file, the header as strict JSON, every entry's
   fields and types, the dtype, the shape against the byte count, the offsets inside the data and
   neither overlapping nor leaving holes (as the format's reference implementation requires).
   Errors are MMS_ERR_FORMAT naming the file, the tensor and the field. */

struct mms_safetensors;

struct mms_safetensors_info {
    const char   *name;
    const char   *dtype;       /* as written: "F32", "BF16", "I64", ... */
    enum mms_type type;        /* F32, F16 or BF16; MMS_TYPE_INVALID for the others (listed, not loadable) */
    int           n_dims;      /* 0..8 */
    int64_t       shape[8];    /* in the file's order (PyTorch's: the last dimension is contiguous) */
    size_t        size;        /* bytes */
    const void   *data;        /* into the mapping */
};

MMS_API struct mms_safetensors *mms_safetensors_open(const char *path);               /* NULL + last error */
MMS_API struct mms_safetensors *mms_safetensors_open_memory(const void *data, size_t size, const char *name);
MMS_API void                    mms_safetensors_close(struct mms_safetensors *st);
MMS_API const char             *mms_safetensors_path(const struct mms_safetensors *st);
MMS_API int64_t                 mms_safetensors_n_tensors(const struct mms_safetensors *st);
MMS_API int64_t                 mms_safetensors_find(const struct mms_safetensors *st, const char *name);   /* -1 if absent */
MMS_API enum mms_status         mms_safetensors_get(const struct mms_safetensors *st, int64_t i, struct mms_safetensors_info *info);
/* The header's __metadata__ object (-1 if none) in the parsed header. */
MMS_API const struct mms_json  *mms_safetensors_header(const struct mms_safetensors *st);
MMS_API int64_t                 mms_safetensors_metadata(const struct mms_safetensors *st);
/* ==== end src/api/formats.h ==== */

#endif

#ifndef MMS_NO_TEXT   /* the parts below are left out under this option */

/* ==== begin src/api/text.h ==== */
/* >>api-text --------------------------------------------------------------------------------------
   Text: the Llama 3 tokenizer, the chat template of the vision-instruct model, and sampling. */

/* -- tokenizer ---------------------------------------------------------------------------------------
   Llama 3's byte-level BPE, read from a GGUF's tokenizer.ggml.* keys (model "gpt2"; tokens,
   token_type, merges, bos/eos ids, eos_token_ids). Text is split by the Llama 3 pre-tokenizer rule
   (contractions, letters, 1-3 digit groups, punctuation runs, whitespace; Unicode categories from
   tables generated by tools/gen_unicode_tables.py), each piece is mapped byte by byte to GPT-2's
   printable characters and merged by merge rank. Tokens of type control (3) and user-defined (4)
   are "special": with parse_special their text in the input (e.g. "<|image|>") becomes that one
   token, without it they are ordinary text. Token ids are int32. */

struct mms_vocab;

enum mms_token_type {           /* tokenizer.ggml.token_type values */
    MMS_TOKEN_NORMAL       = 1,
    MMS_TOKEN_UNKNOWN      = 2,
    MMS_TOKEN_CONTROL      = 3,
    MMS_TOKEN_USER_DEFINED = 4,
    MMS_TOKEN_UNUSED       = 5,
    MMS_TOKEN_BYTE         = 6
};

/* From an open file (the vocabulary is copied: the file may be closed after) or a path. NULL + last
   error: MMS_ERR_FORMAT naming the key and the file when the tokenizer metadata is missing, of
   another model, or inconsistent (a merge of unknown tokens, a byte without a token, an id out of
   range, an empty token text other than of an unused token). tokens, token_type and merges are
   required; bos, eos and eos_token_ids optional. A text repeated keeps its first id. */
MMS_API struct mms_vocab *mms_vocab_load(const struct mms_gguf *gguf);
MMS_API struct mms_vocab *mms_vocab_load_file(const char *path);
MMS_API void              mms_vocab_free(struct mms_vocab *vocab);

MMS_API int32_t             mms_vocab_n_tokens(const struct mms_vocab *vocab);
MMS_API int32_t             mms_vocab_bos(const struct mms_vocab *vocab);      /* -1 when the file has none */
MMS_API int32_t             mms_vocab_eos(const struct mms_vocab *vocab);      /* -1 when the file has none */
/* End of generation: eos, the ids of tokenizer.ggml.eos_token_ids, and <|eot_id|>, <|eom_id|>,
   <|end_of_text|> when present. */
MMS_API bool                mms_vocab_is_eog(const struct mms_vocab *vocab, int32_t id);
MMS_API enum mms_token_type mms_vocab_token_type(const struct mms_vocab *vocab, int32_t id);  /* 0 for a bad id */
/* The id of the token whose stored text is exactly text (e.g. "<|image|>"), or -1. */
MMS_API int32_t             mms_vocab_find(const struct mms_vocab *vocab, const char *text);
/* The chat template the model carries (GGUF's tokenizer.chat_template, a checkpoint folder's
   tokenizer_config.json), "" when it has none; and whether it is, byte for byte, the Llama 3.2
   Vision instruct template that mms_chat_apply_template renders. A model with another template
   (a fine-tune's) would be prompted differently than it was trained: say so, or let the caller
   write prompts itself. */
MMS_API const char         *mms_vocab_chat_template(const struct mms_vocab *vocab);
MMS_API bool                mms_vocab_chat_template_is_builtin(const struct mms_vocab *vocab);
/* The token's stored text (byte-level characters for normal tokens), or NULL for a bad id. */
MMS_API const char         *mms_vocab_token_text(const struct mms_vocab *vocab, int32_t id);

/* Tokenize len bytes of text (any bytes; UTF-8 expected: each maximal invalid subpart is classed as
   one U+FFFD, as after bytes.decode('utf-8', 'replace'), but keeps its bytes, so they round-trip).
   add_bos: start with bos unless the tokens already begin with it (with parse_special, text that
   starts with "<|begin_of_text|>"), so a chat-templated prompt never gets two. Writes at most cap ids and
   returns how many the text has (call again with more room when larger), or a negative
   enum mms_status (MMS_ERR_INVALID_ARG: NULL arguments; MMS_ERR_STATE: add_bos without a bos). */
MMS_API int mms_tokenize(const struct mms_vocab *vocab, const char *text, size_t len, int32_t *out, int cap,
                         bool add_bos, bool parse_special);

/* The bytes a token stands for: byte-level decoded when every character of its text is a GPT-2
   byte character, else its text as it is (HF's ByteLevel decoder does the same). Control (and
   unknown) tokens give their text only when render_special; user-defined tokens always (as HF's
   skip_special_tokens keeps them); unused tokens nothing. Writes at most cap bytes, no NUL;
   returns the byte count (more than cap: call again with more room), or MMS_ERR_INVALID_ARG for a
   bad id. */
MMS_API int mms_token_to_piece(const struct mms_vocab *vocab, int32_t id, char *buf, int cap, bool render_special);

/* All tokens back to text, as Hugging Face's decode does: bytes that are not valid UTF-8 become
   U+FFFD. Returns the byte count like mms_token_to_piece (a NUL is added when it fits). */
MMS_API int mms_detokenize(const struct mms_vocab *vocab, const int32_t *ids, int n, char *buf, int cap, bool render_special);

/* Streaming: hands out only whole UTF-8 characters, keeping a character cut across tokens until
   its last byte arrives; invalid sequences become U+FFFD, so the pieces add up to mms_detokenize's
   text. Zero-initialise, push each token, flush at the end. Both return bytes written to buf (a NUL
   is added), or a negative status: MMS_ERR_INVALID_ARG for a bad id or when the text and its NUL do
   not fit, and then d is left as it was, so the call can be repeated with more room. A cap of
   3 * (longest piece + 3) + 1 always suffices: 400 for Llama 3, whose longest token is 128 bytes
   (valid UTF-8 needs only piece + 4). */
struct mms_detokenizer {
    unsigned char pending[4];
    int           n_pending;
};
MMS_API int mms_detokenizer_push(const struct mms_vocab *vocab, struct mms_detokenizer *d, int32_t id, char *buf, int cap,
                                 bool render_special);
MMS_API int mms_detokenizer_flush(struct mms_detokenizer *d, char *buf, int cap);

/* -- chat template -------------------------------------------------------------------------------
   The instruct template of Llama 3.2 Vision (the model's chat_template), rendered as transformers renders the
   model's own Jinja template: BOS; a leading system message is taken out and trimmed; when no
   message has an image a system block is written ("Cutting Knowledge Date: December 2023",
   "Today Date: " + date, then the system text); with images a non-empty system message is an error
   (the template raises one); every other message, a later "system" one included, is "<|start_header_id|>ROLE<|end_header_id|>\n\n", its
   images as <|image|>, its text verbatim, "<|eot_id|>" (roles "tool" and "ipython" render as
   ipython); then, if asked, the assistant header that starts the answer. Tokenize the result with
   parse_special and without add_bos (it already starts with BOS). */

struct mms_chat_message {
    const char *role;       /* "system", "user", "assistant", "tool" or "ipython" */
    const char *text;       /* may be NULL */
    int         n_images;   /* images shown before the text, one <|image|> each */
};

/* Writes at most cap bytes with a terminating NUL (like snprintf) and returns the length of the
   whole rendering, or a negative enum mms_status: MMS_ERR_INVALID_ARG for no messages, a non-empty first system
   message in a conversation with images, images in that system message, or a missing role. date: NULL for
   "26 Jul 2024" (the template's own fallback; transformers passes today's date). */
MMS_API int mms_chat_apply_template(const struct mms_chat_message *messages, int n_messages, bool add_generation_prompt,
                                    const char *date, char *buf, size_t cap);

/* -- sampling ------------------------------------------------------------------------------------
   Picks the next token from a row of logits, in transformers' order: repetition penalty (a logit
   of a token already in the history is divided by the penalty when positive, multiplied when
   negative), temperature, top-k (ties with the k-th are kept), top-p (the smallest set of the most
   likely tokens whose probability reaches top_p), min-p (tokens below min_p times the best one's
   probability go), then a draw from the remaining distribution with a seeded generator
   (splitmix64: the same seed gives the same tokens on every machine). Temperature 0 is greedy:
   the first largest logit after the penalty. */

struct mms_sampler_params {   /* zeroed: greedy, nothing else on */
    float    temperature;     /* 0: greedy */
    int      top_k;           /* 0: off */
    float    top_p;           /* 0 or 1: off */
    float    min_p;           /* 0: off */
    float    repeat_penalty;  /* 0 or 1: off */
    int      repeat_last_n;   /* tokens of history the penalty looks at; 0: all (as transformers) */
    uint64_t seed;
};

struct mms_sampler;

/* Greedy, no penalty, seed 0 (the same as a zeroed struct). */
MMS_API struct mms_sampler_params mms_sampler_default_params(void);
/* NULL + MMS_ERR_INVALID_ARG for values out of range (a negative or non-finite temperature or
   penalty, top_p or min_p outside [0, 1], negative top_k or repeat_last_n). */
MMS_API struct mms_sampler *mms_sampler_new(const struct mms_sampler_params *params);
MMS_API void                mms_sampler_free(struct mms_sampler *sampler);
/* Forget the history and restart the generator from the seed. */
MMS_API void                mms_sampler_reset(struct mms_sampler *sampler);
/* Add a token to the history (the prompt's tokens; mms_sampler_sample adds its own choice). */
MMS_API void                mms_sampler_accept(struct mms_sampler *sampler, int32_t id);
/* The chosen token, added to the history; -1 + MMS_ERR_INVALID_ARG for no logits or a NaN row. */
MMS_API int32_t             mms_sampler_sample(struct mms_sampler *sampler, const float *logits, int n_vocab);
/* The distribution the next draw would use (0 for the tokens filtered out; for greedy, 1 on the
   chosen token), without drawing; MMS_ERR_INVALID_ARG as above. */
MMS_API enum mms_status     mms_sampler_probs(const struct mms_sampler *sampler, const float *logits, int n_vocab, float *probs);
/* ==== end src/api/text.h ==== */

#endif

#ifndef MMS_NO_MLLAMA   /* the parts below are left out under this option */

/* ==== begin src/api/mllama.h ==== */
/* >>api-mllama ------------------------------------------------------------------------------------
   Llama 3.2 Vision ("mllama"). Numerics follow Hugging Face transformers' MllamaForConditionalGeneration
   in float32 (eager attention, the PIL image processor) with Meta's rule for the vision encoder's
   intermediate taps (the inputs of the listed layers, as in Meta's reference and transformers up to
   4.54; manual section 13). */

/* -- image preprocessing ----------------------------------------------------------------------------
   From RGB8 pixels to the model's input, as the PIL image processor does it: choose the tile canvas
   (rows x cols of image_size tiles, among the aspect ratios with rows * cols <= max_num_tiles,
   listed for w in 1..max, h in 1..max with w*h <= max and read as (rows, cols)), fit the image into
   it without upscaling unless both sides are smaller than a tile, resize with PIL's antialiased
   bilinear filter (bit-exact), pad with black at the bottom and right, rescale by 1/255, normalise
   per channel, and cut row-major tiles into slots; unused slots are exactly 0. */

struct mms_mllama_image_params {   /* zeroed: the 11B model's values */
    int   image_size;      /* tile side in pixels (0: 560) */
    int   max_num_tiles;   /* 1..16 (0: 4) */
    float mean[3], std[3]; /* per channel (all zero: the CLIP values of the 11B model) */
};

struct mms_mllama_image {
    float *pixels;             /* [max_num_tiles][3][image_size][image_size], row-major tiles */
    int    max_num_tiles, image_size;
    int    tiles_rows, tiles_cols, n_tiles;
    int    aspect_ratio_id;    /* 1 + index of (rows, cols) in the supported list */
    int    aspect_ratio_mask[16];  /* 1 for the first n_tiles slots, else 0 (slot 0 always 1) */
    int    resized_width, resized_height;   /* the image inside its canvas, before padding */
};

/* rgb: height rows of width pixels, 3 bytes each, rows stride bytes apart (0: width * 3).
   MMS_ERR_INVALID_ARG for an empty image or bad parameters (negative sizes, max_num_tiles above 16). */
MMS_API enum mms_status mms_mllama_preprocess_image(const struct mms_mllama_image_params *params, const uint8_t *rgb,
                                                    int width, int height, size_t stride, struct mms_mllama_image *out);
MMS_API void            mms_mllama_image_free(struct mms_mllama_image *image);

/* Pillow's Image.resize(..., BILINEAR) on RGB8, bit for bit (antialiased when shrinking), as in
   Pillow 13, which may run the vertical pass first; Pillow 12 and older can differ by one level on
   some tall images. */
MMS_API enum mms_status mms_image_resize_bilinear(const uint8_t *src, int src_w, int src_h, size_t src_stride,
                                                  uint8_t *dst, int dst_w, int dst_h);

/* RGBA8 to RGB8 over a white background, as the processor's convert_to_rgb (PIL's alpha_composite
   onto opaque white): each channel becomes round((c * a + 255 * (255 - a)) / 255). rgba rows are
   stride bytes apart (0: width * 4); rgb is width * height * 3 bytes. */
MMS_API enum mms_status mms_image_rgba_over_white(const uint8_t *rgba, int width, int height, size_t stride, uint8_t *rgb);

/* -- the model ----------------------------------------------------------------------------------------
   Loaded from Ollama's GGUF layouts: the single file (text and vision together) or the older pair
   of a text file and a vision projector file. Every hyper-parameter comes from the metadata, so a
   tiny test model and the 11B model run the same code. Weights are placed on the backends the
   caller chooses: text layers on `gpu` counted from the last (n_gpu_layers, like llama.cpp), the
   rest and the token embeddings on `cpu`; the vision tower on either, independently. Host weights
   are used in place from the mapped file (no copy). */

struct mms_mllama_hparams {
    /* text */
    int   n_vocab;          /* logits rows */
    int   n_embd_rows;      /* rows of the token embedding table (vocabulary + 8 for the image tokens) */
    int   n_ctx_train;
    int   n_embd, n_ff, n_head, n_head_kv, head_dim, n_layer;
    float rope_freq_base, rms_eps;
    int   n_cross;
    const int *cross_layers;        /* indices of the cross-attention layers, ascending */
    int   image_token_id;
    /* vision (zero when the model has no vision tower) */
    int   v_n_layer, v_n_global, v_n_embd, v_n_ff, v_n_head;
    int   v_image_size, v_patch_size, v_max_tiles, v_channels;
    float v_eps;
    int   v_n_taps;
    const int *v_taps;              /* intermediate layers whose inputs are tapped (Meta's rule) */
    float image_mean[3], image_std[3];
    int   v_n_patches;              /* per tile: (image_size / patch_size)^2 */
    int   v_n_tokens;               /* per tile: patches + the class token */
    int   v_n_tokens_padded;        /* rounded up to a multiple of 8 */
    int   v_output_dim;             /* v_n_embd * (1 + v_n_taps) */
};

struct mms_mllama_load_params {
    const char   *path;             /* the model, or the text part of the two-file layout */
    const char   *mmproj_path;      /* the projector of the two-file layout, or NULL */
    mms_backend_t cpu;              /* required: host backend */
    mms_backend_t gpu;              /* optional: a second backend for offloaded layers */
    int           n_gpu_layers;     /* text layers on gpu, counted from the last; >= n_layer also moves the output head */
    bool          vision_on_gpu;    /* the vision tower on gpu (else cpu) */
    bool          text_only;        /* do not load the vision tower */
    /* Called as weights are read, with the fraction done (0..1); return false to stop the load
       (MMS_ABORTED). When set, mapped host weights are read through once (page by page) so that the
       load really happens here rather than during the first decode. */
    bool        (*progress)(float fraction, void *user_data);
    void         *progress_user_data;
    /* By default the Q4_0, Q4_K and Q8_0 matrices the CPU backend multiplies by are copied at load into
       a CPU_REPACK buffer (mms_backend_cpu_repack_buffer_type: the kernels' interleaved layout;
       Q4_0 decode about 2x faster, Q4_K 0-13%); the file's pages of those weights are then
       released from the process's memory (madvise; Linux), so resident memory grows by the Q4_K
       copy's extra 2.8% only. true: keep every host weight where the file is mapped (no copy). */
    bool          no_cpu_repack;
};

struct mms_mllama_model;

MMS_API struct mms_mllama_model *mms_mllama_model_load(const struct mms_mllama_load_params *params);  /* NULL + last error */
MMS_API void                     mms_mllama_model_free(struct mms_mllama_model *model);
MMS_API const struct mms_mllama_hparams *mms_mllama_model_get_hparams(const struct mms_mllama_model *model);
/* A Hugging Face checkpoint folder as a GGUF in memory, in the single-file layout with mmsched's
   keys (the matrices in the checkpoint's type, the small tensors f32, q/k rows as Ollama's
   converter orders them and marked so, the vision gates transformed, the tokenizer from
   tokenizer.json): what tools such as build/quantize read. Close it with mms_gguf_close.
   NULL + last error. */
MMS_API struct mms_gguf *mms_mllama_folder_to_gguf(const char *dir);
/* The shapes of Llama 3.2 11B Vision (Meta's configuration: 40 text layers, 8 of them cross-attention,
   32 + 8 vision layers at 560-pixel tiles), and of 90B Vision (the same vision tower;
   text 8192 wide, 100 layers of which 20 cross-attention at 3, 8, ..., 98, 64 heads, 8 KV heads,
   feed-forward 28672). */
MMS_API void mms_mllama_hparams_11b(struct mms_mllama_hparams *out);
MMS_API void mms_mllama_hparams_90b(struct mms_mllama_hparams *out);
/* A model with every weight's shape but no data (placed at addresses that are never read), for
   planning memory: a context made from it reserves its graphs and reports buffer sizes, and
   refuses to compute. */
MMS_API struct mms_mllama_model *mms_mllama_model_shapes_only(const struct mms_mllama_hparams *hparams, mms_backend_t cpu,
                                                              enum mms_type weight_type);

/* -- the runtime ------------------------------------------------------------------------------------
   One scheduler runs the vision encoder and the text model. An image added to the conversation is
   encoded once: its per-layer cross-attention keys and values are persistent tensors on the
   backends of their layers, kept in a cache keyed by the pixels' hash (adding the same image again
   costs no encode). Tokens are decoded in batches at the next positions; the k-th <|image|> token
   of the conversation stands for the k-th image added, and each text token attends to the images
   of the most recent group of consecutive image tokens before it (transformers' rule; tokens
   before the first image token see a uniform mix and their MLP branch is zeroed). Without any
   image the cross layers are skipped. The worst-case graphs (an image at max tiles, a batch of
   n_batch tokens over n_ctx with max_images images, one token) are reserved when the context is
   made, so a model that does not fit fails then, saying how much memory it needed where.

   Sequences: a context holds n_seq conversations, each with its own tokens, positions, images
   (and their cross-attention K/V) and n_ctx KV-cache slots of its own, all reserved at creation
   (the worst case: n_batch rows over every sequence's slots with max_images images each).
   mms_mllama_decode_batch takes tokens of any sequences in one batch (a prompt of one, single
   tokens of others, in any order; a sequence's tokens take its next positions in batch order) and
   runs them as one graph, so the weights are read once for all rows; each row attends only to its
   own sequence's tokens and images, so a sequence's logits are those of the same conversation
   run alone. The functions without seq act on sequence 0 (mms_mllama_kv_clear on all). The
   image cache is the context's, shared by its sequences (one image in two sequences is encoded
   once). */

struct mms_mllama_context_params {   /* zeroed: the defaults; negative values are refused */
    int n_ctx;           /* tokens each sequence's KV cache holds (0: 2048, at most the training context) */
    int n_batch;         /* most tokens per decode call, all sequences together (0: 512; at most n_ctx * n_seq) */
    int max_images;      /* images per sequence (0: 2) */
    int image_cache;     /* encoded images kept, at least max_images * n_seq (0: max_images * n_seq + 2) */
    int n_seq;           /* sequences (conversations), 1..4096 (0: 1) */
};

struct mms_mllama_context;

MMS_API struct mms_mllama_context *mms_mllama_context_new(struct mms_mllama_model *model, const struct mms_mllama_context_params *params);
MMS_API void                       mms_mllama_context_free(struct mms_mllama_context *ctx);
MMS_API mms_backend_sched_t        mms_mllama_context_get_sched(struct mms_mllama_context *ctx);
/* Compute memory per backend after the reservation, the KV cache, and the kept images. */
MMS_API void                       mms_mllama_context_print_memory(struct mms_mllama_context *ctx, FILE *out);

/* Attach an image (preprocessed with the model's parameters) to the conversation. */
MMS_API enum mms_status mms_mllama_add_image(struct mms_mllama_context *ctx, const struct mms_mllama_image *image);
/* The same from RGB8 pixels (rows stride bytes apart, 0: width * 3), preprocessed with the model's
   tile size, tile count, mean and std. */
MMS_API enum mms_status mms_mllama_add_image_rgb(struct mms_mllama_context *ctx, const uint8_t *rgb, int width, int height, size_t stride);
/* The model's preprocessing parameters (for mms_mllama_preprocess_image). */
MMS_API struct mms_mllama_image_params mms_mllama_model_image_params(const struct mms_mllama_model *model);
/* Run the vision encoder alone; copies out the encoder output ([v_output_dim, tokens, tiles]) and
   the projected states ([n_embd, tokens * tiles]) when the pointers are not NULL. */
MMS_API enum mms_status mms_mllama_encode_image(struct mms_mllama_context *ctx, const struct mms_mllama_image *image,
                                                float *vision_out, float *projected);
/* Decode n tokens of sequence 0 at its next positions; want[i] asks for row i's logits (NULL: the last row). */
MMS_API enum mms_status mms_mllama_decode(struct mms_mllama_context *ctx, const int32_t *tokens, int n_tokens, const bool *want);
/* One batch of tokens of any sequences (at most n_batch). MMS_ERR_INVALID_ARG for a sequence out
   of range or one whose tokens would pass n_ctx, MMS_ERR_STATE for more <|image|> tokens in a
   sequence than images added to it; then no sequence changed. */
struct mms_mllama_batch {
    int            n_tokens;
    const int32_t *tokens;
    const int32_t *seq;          /* the sequence of each token (NULL: all sequence 0) */
    const bool    *want;         /* rows whose logits are wanted (NULL: the last row of each sequence in the batch) */
};
MMS_API enum mms_status mms_mllama_decode_batch(struct mms_mllama_context *ctx, const struct mms_mllama_batch *batch);
MMS_API int             mms_mllama_get_n_logits(const struct mms_mllama_context *ctx);
MMS_API const float    *mms_mllama_get_logits(const struct mms_mllama_context *ctx, int i);   /* n_vocab floats, rows in batch order of those asked */
MMS_API int             mms_mllama_get_n_past(const struct mms_mllama_context *ctx);
/* Sequence seq (0..n_seq-1): its images, tokens decoded so far, forgetting it or keeping its first
   n_keep tokens (its slots are reused; cached images stay). MMS_ERR_INVALID_ARG for a seq out of range. */
MMS_API enum mms_status mms_mllama_seq_add_image(struct mms_mllama_context *ctx, int seq, const struct mms_mllama_image *image);
MMS_API enum mms_status mms_mllama_seq_add_image_rgb(struct mms_mllama_context *ctx, int seq, const uint8_t *rgb, int width, int height, size_t stride);
MMS_API int             mms_mllama_seq_get_n_past(const struct mms_mllama_context *ctx, int seq);
MMS_API enum mms_status mms_mllama_seq_clear(struct mms_mllama_context *ctx, int seq);
MMS_API enum mms_status mms_mllama_seq_trim(struct mms_mllama_context *ctx, int seq, int n_keep);
MMS_API int             mms_mllama_get_n_encodes(const struct mms_mllama_context *ctx);      /* vision encodes run so far */
/* Where the time and the memory went, since the context was made or the timings were reset.
   Decode calls with one token per sequence count as generation, the others as prompt; per
   sequence, mms_mllama_seq_get_timings. */
struct mms_mllama_timings {
    double load_ms, context_ms;           /* mms_mllama_model_load, mms_mllama_context_new */
    double preprocess_ms;                 /* mms_mllama_add_image_rgb's preprocessing */
    int    n_preprocessed;
    double encode_ms, cross_kv_ms;        /* vision encoder + projector; then the cross K/V of each layer */
    int    n_encodes;
    double prompt_ms, gen_ms;
    int    n_prompt_tokens, n_gen_tokens;
    int    n_backends;                    /* backends the context uses: mms_mllama_get_memory(ctx, 0..n_backends-1) */
    int    n_seq;                         /* sequences: mms_mllama_seq_get_timings(ctx, 0..n_seq-1) */
};
MMS_API void mms_mllama_get_timings(const struct mms_mllama_context *ctx, struct mms_mllama_timings *out);
/* Memory on backend i (0: the host, 1: the offload backend when there is one): weights, KV cache,
   compute memory (planned at creation; grows only if a graph needs more) and the kept
   cross-attention K/V of encoded images at their largest. MMS_ERR_INVALID_ARG for an i out of range. */
struct mms_mllama_memory {
    char   name[32];
    size_t weights, kv_cache, compute, kept_images_peak, peak;   /* peak: the sum of the four, bytes */
    size_t weights_repacked;   /* the part of weights copied into a CPU_REPACK buffer (the rest: mapped or own buffers) */
};
MMS_API enum mms_status mms_mllama_get_memory(const struct mms_mllama_context *ctx, int i, struct mms_mllama_memory *out);
MMS_API void mms_mllama_reset_timings(struct mms_mllama_context *ctx);   /* keeps load, context and memory */
/* One sequence's share since it was last cleared (or the timings reset): its rows, and the time of
   the decode calls it took part in (a call's whole time counts for each of its sequences: the
   latency each saw; a call where the sequence had one row counts as generation). kv_cache: the
   bytes of its own slots on all backends. MMS_ERR_INVALID_ARG for a seq out of range. */
struct mms_mllama_seq_timings {
    double prompt_ms, gen_ms;
    int    n_prompt_tokens, n_gen_tokens;
    int    n_calls;                       /* decode calls it took part in */
    size_t kv_cache;
};
MMS_API enum mms_status mms_mllama_seq_get_timings(const struct mms_mllama_context *ctx, int seq, struct mms_mllama_seq_timings *out);
/* The timings as a few lines of text: each phase with its time and rate, memory per backend, and
   with several sequences a line for each that decoded since it was cleared. */
MMS_API void mms_mllama_print_timings(const struct mms_mllama_context *ctx, FILE *out);

/* Forget every sequence (tokens and images; encoded images stay cached), or keep the first n_keep tokens of sequence 0. */
MMS_API void            mms_mllama_kv_clear(struct mms_mllama_context *ctx);
MMS_API enum mms_status mms_mllama_kv_trim(struct mms_mllama_context *ctx, int n_keep);
/* ==== end src/api/mllama.h ==== */

#endif

/* ==== begin src/api/epilogue.h ==== */
#ifdef __cplusplus
}
#endif

#endif /* MMSCHED_H */
/* ==== end src/api/epilogue.h ==== */

/* ==== begin src/base/config.c ==== */
/* >>impl ==========================================================================================
   Everything below is compiled only in the one translation unit that defines MMSCHED_IMPLEMENTATION.
   The inner guard lets that unit include the header more than once. */
#if defined(MMSCHED_IMPLEMENTATION) && !defined(MMSCHED_IMPL_INCLUDED)
#define MMSCHED_IMPL_INCLUDED

/* Allocator override: all three or none. */
#if defined(MMS_MALLOC) || defined(MMS_REALLOC) || defined(MMS_FREE)
#  if !defined(MMS_MALLOC) || !defined(MMS_REALLOC) || !defined(MMS_FREE)
#    error "mmsched: define all of MMS_MALLOC, MMS_REALLOC and MMS_FREE, or none"
#  endif
#else
#  define MMS_MALLOC(size)       malloc(size)
#  define MMS_REALLOC(ptr, size) realloc(ptr, size)
#  define MMS_FREE(ptr)          free(ptr)
#endif

#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <math.h>
#include <float.h>
#include <assert.h>
#include <ctype.h>
#include <limits.h>

#ifndef MMS_ASSERT
#  define MMS_ASSERT(cond) assert(cond)
#endif

/* Internal invariants that must hold even in release builds: a failure is a bug in mmsched. */
#define MMS__CHECK(cond) \
    do { if (!(cond)) mms__abort(__FILE__, __LINE__, "internal check failed: %s", #cond); } while (0)

#define MMS__MIN(a, b) ((a) < (b) ? (a) : (b))
#define MMS__MAX(a, b) ((a) > (b) ? (a) : (b))
#define MMS__ALIGN_UP(x, a) (((x) + (a) - 1) / (a) * (a))
#define MMS__UNUSED(x) ((void)(x))
/* Unroll the next loop n times where the compiler takes the hint (gcc, clang; not nvcc's front end,
   which compiles this file too when a .cu defines MMSCHED_IMPLEMENTATION). */
#if (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#  define MMS__UNROLL4 _Pragma("GCC unroll 4")
#  define MMS__NO_UNROLL _Pragma("GCC unroll 1")   /* where unrolling spills registers */
#else
#  define MMS__UNROLL4
#  define MMS__NO_UNROLL
#endif

#if defined(__GNUC__) || defined(__clang__)
#  define MMS__NORETURN __attribute__((noreturn))
#  define MMS__MAYBE_UNUSED __attribute__((unused))
#  define MMS__THREAD_LOCAL __thread
#  define MMS__LIKELY(x) __builtin_expect(!!(x), 1)
#elif defined(_MSC_VER)
#  define MMS__NORETURN __declspec(noreturn)
#  define MMS__MAYBE_UNUSED
#  define MMS__THREAD_LOCAL __declspec(thread)
#  define MMS__LIKELY(x) (x)
#else
#  define MMS__NORETURN
#  define MMS__MAYBE_UNUSED
#  define MMS__THREAD_LOCAL _Thread_local
#  define MMS__LIKELY(x) (x)
#endif

/* The SIMD kernels are compiled with per-function target attributes where the baseline lacks them
   and chosen at run time, so one binary built for plain x86-64 (or ARMv8.0) runs everywhere.
   MMS_NO_SIMD leaves them out; other compilers (MSVC) get the scalar kernels. */
#if !defined(MMS_NO_SIMD) && (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#  define MMS__HAVE_AVX2 1
#  include <immintrin.h>
#  define MMS__TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#  define MMS__TARGET_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx512bf16")))
#else
#  define MMS__HAVE_AVX2 0
#endif

/* 64-bit ARM: NEON is part of the base ISA; the dot-product instructions (ARMv8.2 dotprod) are
   enabled per function and used only where the CPU reports them. */
#if !defined(MMS_NO_SIMD) && defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#  define MMS__HAVE_NEON 1
#  include <arm_neon.h>
#  if defined(__ARM_FEATURE_DOTPROD)
#    define MMS__TARGET_DOTPROD
#  elif defined(__clang__)
#    define MMS__TARGET_DOTPROD __attribute__((target("dotprod")))
#  else
#    define MMS__TARGET_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))
#  endif
#else
#  define MMS__HAVE_NEON 0
#endif

static MMS__NORETURN void mms__abort(const char *file, int line, const char *fmt, ...) MMS_PRINTF(3, 4);
/* ==== end src/base/config.c ==== */

/* ==== begin src/base/platform.c ==== */
/* >>platform ======================================================================================
   The only platform-specific code: threads, atomics, clocks, aligned memory, files and CPU
   features, for POSIX (Linux, macOS) and Windows (MinGW-w64; MSVC by the same Win32 calls). Paths
   are UTF-8 everywhere: on Windows they are converted to UTF-16 for the wide API. Everything else
   in the library is standard C. */

#if defined(_WIN32)
#  ifndef WIN32_LEAN_AND_MEAN
#    define WIN32_LEAN_AND_MEAN
#  endif
#  ifndef NOMINMAX
#    define NOMINMAX
#  endif
#  include <windows.h>
#  include <process.h>
#  include <errno.h>
#  if defined(_MSC_VER) && !defined(__clang__)
#    include <intrin.h>
#  endif
#else
#  include <pthread.h>
#  include <sched.h>
#  include <time.h>
#  include <unistd.h>
#  include <fcntl.h>
#  include <errno.h>
#  include <sys/mman.h>
#  include <sys/stat.h>
#  include <sys/time.h>
#endif
#if MMS__HAVE_AVX2
#  include <cpuid.h>
#endif
#if MMS__HAVE_NEON && defined(__linux__)
#  include <sys/auxv.h>
#endif

/* -- atomics: loads acquire, stores release, read-modify-writes acquire-release, counters relaxed -- */
#if defined(_MSC_VER) && !defined(__clang__)
typedef struct { volatile long v; } mms__atomic_int;   /* long is 32 bits on Windows */
static int32_t mms__atomic_load(mms__atomic_int *a)               { return (int32_t)_InterlockedOr(&a->v, 0); }
static void    mms__atomic_store(mms__atomic_int *a, int32_t x)   { _InterlockedExchange(&a->v, (long)x); }
static int32_t mms__atomic_fetch_add(mms__atomic_int *a, int32_t x) { return (int32_t)_InterlockedExchangeAdd(&a->v, (long)x); }
static uint64_t mms__atomic_next_u64(volatile uint64_t *counter)  { return (uint64_t)_InterlockedIncrement64((volatile __int64 *)counter); }
#else
typedef struct { volatile int32_t v; } mms__atomic_int;
static int32_t mms__atomic_load(mms__atomic_int *a)               { return __atomic_load_n(&a->v, __ATOMIC_ACQUIRE); }
static void    mms__atomic_store(mms__atomic_int *a, int32_t x)   { __atomic_store_n(&a->v, x, __ATOMIC_RELEASE); }
static int32_t mms__atomic_fetch_add(mms__atomic_int *a, int32_t x) { return __atomic_fetch_add(&a->v, x, __ATOMIC_ACQ_REL); }
static uint64_t mms__atomic_next_u64(volatile uint64_t *counter)  { return __atomic_add_fetch(counter, 1, __ATOMIC_RELAXED); }
#endif

static void mms__cpu_relax(void) {
#if defined(_MSC_VER) && !defined(__clang__)
    YieldProcessor();
#elif defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#if defined(_WIN32)
MMS__MAYBE_UNUSED static void mms__thread_yield(void) { SwitchToThread(); }

/* -- threads (through the C runtime, so it is set up for them), SRW locks, condition variables -- */
typedef HANDLE             mms__thread;
typedef SRWLOCK            mms__mutex;
typedef CONDITION_VARIABLE mms__cond;

struct mms__thread_start { void *(*fn)(void *); void *arg; };
static unsigned __stdcall mms__thread_main(void *p) {
    struct mms__thread_start s = *(struct mms__thread_start *)p;
    MMS_FREE(p);
    s.fn(s.arg);
    return 0;
}
static bool mms__thread_create(mms__thread *t, void *(*fn)(void *), void *arg) {
    struct mms__thread_start *s = (struct mms__thread_start *)MMS_MALLOC(sizeof *s);
    uintptr_t h;
    if (!s) return false;
    s->fn = fn;
    s->arg = arg;
    h = _beginthreadex(NULL, 0, mms__thread_main, s, 0, NULL);
    if (!h) { MMS_FREE(s); return false; }
    *t = (HANDLE)h;
    return true;
}
static void mms__thread_join(mms__thread t)      { WaitForSingleObject(t, INFINITE); CloseHandle(t); }
static void mms__mutex_init(mms__mutex *m)       { InitializeSRWLock(m); }
static void mms__mutex_destroy(mms__mutex *m)    { MMS__UNUSED(m); }
static void mms__mutex_lock(mms__mutex *m)       { AcquireSRWLockExclusive(m); }
static void mms__mutex_unlock(mms__mutex *m)     { ReleaseSRWLockExclusive(m); }
static void mms__cond_init(mms__cond *c)         { InitializeConditionVariable(c); }
static void mms__cond_destroy(mms__cond *c)      { MMS__UNUSED(c); }
static void mms__cond_wait(mms__cond *c, mms__mutex *m) { SleepConditionVariableSRW(c, m, INFINITE, 0); }
static void mms__cond_broadcast(mms__cond *c)    { WakeAllConditionVariable(c); }

static SRWLOCK mms__global_mutex = SRWLOCK_INIT;
static void mms__global_lock(void)   { AcquireSRWLockExclusive(&mms__global_mutex); }
static void mms__global_unlock(void) { ReleaseSRWLockExclusive(&mms__global_mutex); }

/* The performance counter, split so that counts times 10^6 cannot overflow. */
MMS_API int64_t mms_time_us(void) {
    LARGE_INTEGER count, freq;
    QueryPerformanceCounter(&count);
    QueryPerformanceFrequency(&freq);
    return count.QuadPart / freq.QuadPart * 1000000 + count.QuadPart % freq.QuadPart * 1000000 / freq.QuadPart;
}

MMS_API int mms_cpu_count(void) {
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    return si.dwNumberOfProcessors > 0 ? (int)si.dwNumberOfProcessors : 1;
}
#else
MMS__MAYBE_UNUSED static void mms__thread_yield(void) { sched_yield(); }

/* -- threads, mutexes, condition variables -- */
typedef pthread_t       mms__thread;
typedef pthread_mutex_t mms__mutex;
typedef pthread_cond_t  mms__cond;

static bool mms__thread_create(mms__thread *t, void *(*fn)(void *), void *arg) { return pthread_create(t, NULL, fn, arg) == 0; }
static void mms__thread_join(mms__thread t)      { pthread_join(t, NULL); }
static void mms__mutex_init(mms__mutex *m)       { pthread_mutex_init(m, NULL); }
static void mms__mutex_destroy(mms__mutex *m)    { pthread_mutex_destroy(m); }
static void mms__mutex_lock(mms__mutex *m)       { pthread_mutex_lock(m); }
static void mms__mutex_unlock(mms__mutex *m)     { pthread_mutex_unlock(m); }
static void mms__cond_init(mms__cond *c)         { pthread_cond_init(c, NULL); }
static void mms__cond_destroy(mms__cond *c)      { pthread_cond_destroy(c); }
static void mms__cond_wait(mms__cond *c, mms__mutex *m) { pthread_cond_wait(c, m); }
static void mms__cond_broadcast(mms__cond *c)    { pthread_cond_broadcast(c); }

/* A process-wide mutex for the few global tables (live buffers, log settings). */
static pthread_mutex_t mms__global_mutex = PTHREAD_MUTEX_INITIALIZER;
static void mms__global_lock(void)   { pthread_mutex_lock(&mms__global_mutex); }
static void mms__global_unlock(void) { pthread_mutex_unlock(&mms__global_mutex); }

/* A monotonic clock when the headers expose one; strict C99 builds without POSIX feature macros
   fall back to gettimeofday. */
MMS_API int64_t mms_time_us(void) {
#ifdef CLOCK_MONOTONIC
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + (int64_t)ts.tv_nsec / 1000;
#else
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000000 + (int64_t)tv.tv_usec;
#endif
}

MMS_API int mms_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}
#endif

/* -- aligned host memory: over-allocate and keep the original pointer just below the block, so it
   needs nothing beyond malloc (alignment is a power of two, at least sizeof(void *)) -- */
static void *mms__aligned_alloc(size_t alignment, size_t size) {
    char *raw, *p;
    if (size > SIZE_MAX - alignment - sizeof(void *)) return NULL;
    raw = (char *)MMS_MALLOC(size + alignment + sizeof(void *));
    if (!raw) return NULL;
    p = (char *)MMS__ALIGN_UP((uintptr_t)(raw + sizeof(void *)), (uintptr_t)alignment);
    memcpy(p - sizeof(void *), &raw, sizeof raw);
    return p;
}
/* madvise and its flags are declared only outside strict ISO C (-std=c99 hides them); their Linux
   values are the same on x86-64 and AArch64. */
#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__)) && !defined(MADV_DONTNEED)
extern int madvise(void *addr, size_t length, int advice);
#  define MADV_DONTNEED 4
#  define MADV_HUGEPAGE 14
#endif

/* Asks the kernel to back [p, p + size) with transparent huge pages where it can (Linux with THP
   in "madvise" mode): large tensors read with big strides then miss the TLB far less. */
MMS__MAYBE_UNUSED static void mms__advise_huge_pages(void *p, size_t size) {
#if defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)2 << 20, lo = MMS__ALIGN_UP((uintptr_t)p, huge), hi = ((uintptr_t)p + size) / huge * huge;
    if (hi > lo) (void)madvise((void *)lo, (size_t)(hi - lo), MADV_HUGEPAGE);
#else
    MMS__UNUSED(p);
    MMS__UNUSED(size);
#endif
}
/* Tells the kernel the whole pages inside [p, p + size) of a read-only file mapping will not be
   read again (their contents were copied elsewhere): they leave the process's resident memory and
   stay in the page cache. Nothing on systems without madvise. */
MMS__MAYBE_UNUSED static void mms__release_pages(const void *p, size_t size) {
#if defined(MADV_DONTNEED)
    const uintptr_t page = 4096, lo = MMS__ALIGN_UP((uintptr_t)p, page), hi = ((uintptr_t)p + size) / page * page;
    if (hi > lo) (void)madvise((void *)lo, (size_t)(hi - lo), MADV_DONTNEED);
#else
    MMS__UNUSED(p);
    MMS__UNUSED(size);
#endif
}
static void mms__aligned_free(void *p) {
    char *raw;
    if (!p) return;
    memcpy(&raw, (char *)p - sizeof(void *), sizeof raw);
    MMS_FREE(raw);
}

/* -- files: fopen with a UTF-8 path, always in binary mode (files written on Windows keep LF line
   ends), and read-only mappings of model files -- */
struct mms__mapping { void *addr; size_t size; };

#if defined(_WIN32)
/* path as a new UTF-16 string (free with MMS_FREE); NULL if it is not valid UTF-8 */
static wchar_t *mms__utf8_to_wide(const char *path) {
    const int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, path, -1, NULL, 0);
    wchar_t *w = n > 0 ? (wchar_t *)MMS_MALLOC((size_t)n * sizeof(wchar_t)) : NULL;
    if (w && MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, path, -1, w, n) != n) { MMS_FREE(w); w = NULL; }
    return w;
}

/* The system's message for a Win32 error code, without the trailing CR LF it comes with. */
static const char *mms__win_error(DWORD code, char *buf, size_t size) {
    size_t n = FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL, code, 0, buf, (DWORD)size, NULL);
    if (n == 0) snprintf(buf, size, "Windows error %lu", (unsigned long)code);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '.')) buf[--n] = '\0';
    return buf;
}

MMS__MAYBE_UNUSED static FILE *mms__fopen(const char *path, const char *mode) {
    wchar_t *wpath = mms__utf8_to_wide(path), wmode[8];
    FILE *f = NULL;
    size_t i, n = 0;
    for (i = 0; mode[i] && n < 6; i++) if (mode[i] != 'b') wmode[n++] = (wchar_t)mode[i];
    wmode[n++] = L'b';
    wmode[n] = L'\0';
    if (wpath) f = _wfopen(wpath, wmode);
    else errno = EINVAL;
    MMS_FREE(wpath);
    return f;
}

MMS__MAYBE_UNUSED static enum mms_status mms__map_file(const char *path, struct mms__mapping *out) {
    wchar_t *wpath = mms__utf8_to_wide(path);
    HANDLE file, mapping;
    LARGE_INTEGER size;
    char why[256];
    out->addr = NULL;
    out->size = 0;
    if (!wpath) return mms_set_error(MMS_ERR_IO, "cannot open '%s': the path is not valid UTF-8", path);
    file = CreateFileW(wpath, GENERIC_READ, FILE_SHARE_READ, NULL, OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, NULL);
    MMS_FREE(wpath);
    if (file == INVALID_HANDLE_VALUE) return mms_set_error(MMS_ERR_IO, "cannot open '%s': %s", path, mms__win_error(GetLastError(), why, sizeof why));
    if (GetFileType(file) != FILE_TYPE_DISK || !GetFileSizeEx(file, &size) || (uint64_t)size.QuadPart > (uint64_t)SIZE_MAX) {
        CloseHandle(file);
        return mms_set_error(MMS_ERR_IO, "'%s' is not a regular file", path);
    }
    out->size = (size_t)size.QuadPart;
    if (out->size > 0) {   /* an empty file cannot be mapped */
        mapping = CreateFileMappingW(file, NULL, PAGE_READONLY, 0, 0, NULL);
        out->addr = mapping ? MapViewOfFile(mapping, FILE_MAP_READ, 0, 0, 0) : NULL;
        if (!out->addr) {
            const DWORD err = GetLastError();
            if (mapping) CloseHandle(mapping);
            CloseHandle(file);
            out->size = 0;
            return mms_set_error(MMS_ERR_IO, "cannot map '%s': %s", path, mms__win_error(err, why, sizeof why));
        }
        CloseHandle(mapping);   /* the view keeps the mapping alive */
    }
    CloseHandle(file);
    return MMS_OK;
}

MMS__MAYBE_UNUSED static void mms__unmap_file(struct mms__mapping *m) {
    if (m->addr) UnmapViewOfFile(m->addr);
    m->addr = NULL;
    m->size = 0;
}
#else
MMS__MAYBE_UNUSED static FILE *mms__fopen(const char *path, const char *mode) { return fopen(path, mode); }

MMS__MAYBE_UNUSED static enum mms_status mms__map_file(const char *path, struct mms__mapping *out) {
    int fd;
    struct stat st;
    out->addr = NULL;
    out->size = 0;
    fd = open(path, O_RDONLY);
    if (fd < 0) return mms_set_error(MMS_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return mms_set_error(MMS_ERR_IO, "'%s' is not a regular file", path);
    }
    out->size = (size_t)st.st_size;
    if (out->size > 0) {
        void *addr = mmap(NULL, out->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (addr == MAP_FAILED) {
            const int err = errno;
            close(fd);
            return mms_set_error(MMS_ERR_IO, "cannot map '%s' (%zu bytes): %s", path, out->size, strerror(err));
        }
        out->addr = addr;
    }
    close(fd);
    return MMS_OK;
}

MMS__MAYBE_UNUSED static void mms__unmap_file(struct mms__mapping *m) {
    if (m->addr) munmap(m->addr, m->size);
    m->addr = NULL;
    m->size = 0;
}
#endif

/* -- CPU features: AVX2, FMA and F16C, with the OS saving the AVX state -- */
static bool mms__cpu_detect_avx2(void) {
#if MMS__HAVE_AVX2
    unsigned a, b, c, d, xcr0_lo;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    {
        bool fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
        if (!(fma && osxsave && avx && f16c)) return false;
    }
    __asm__ __volatile__("xgetbv" : "=a"(xcr0_lo) : "c"(0) : "edx");   /* the high half is not needed */
    if ((xcr0_lo & 6) != 6) return false;  /* XMM and YMM state enabled */
    if (__get_cpuid_max(0, NULL) < 7) return false;
    __cpuid_count(7, 0, a, b, c, d);
    return (b >> 5) & 1;
#else
    return false;
#endif
}

/* AVX-512 F, BW, DQ and VL with VNNI and BF16, and the OS saving the opmask and all 32 zmm registers
   (XCR0 bits 5-7 with the XMM/YMM ones). */
static bool mms__cpu_detect_avx512(void) {
#if MMS__HAVE_AVX2
    unsigned a, b, c, d, xcr0_lo;
    if (!mms__cpu_detect_avx2()) return false;
    __asm__ __volatile__("xgetbv" : "=a"(xcr0_lo) : "c"(0) : "edx");
    if ((xcr0_lo & 0xe6) != 0xe6) return false;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    if (!((b >> 16) & 1 && (b >> 17) & 1 && (b >> 30) & 1 && (b >> 31) & 1)) return false;   /* F, DQ, BW, VL */
    if (!((c >> 11) & 1)) return false;                                                     /* VNNI */
    if (a < 1 || !__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
    return (a >> 5) & 1;                                                                    /* BF16 */
#else
    return false;
#endif
}

/* -- CPU features: ARM's dot-product instructions (Linux reports them in the auxiliary vector;
   elsewhere only a build that targets them assumes them) -- */
static bool mms__cpu_detect_dotprod(void) {
#if MMS__HAVE_NEON && defined(__ARM_FEATURE_DOTPROD)
    return true;
#elif MMS__HAVE_NEON && defined(__linux__)
    return (getauxval(AT_HWCAP) >> 20) & 1;   /* HWCAP_ASIMDDP */
#else
    return false;
#endif
}
/* ==== end src/base/platform.c ==== */

/* ==== begin src/base/status.c ==== */
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
/* ==== end src/base/status.c ==== */

/* ==== begin src/base/ptrmap.c ==== */
/* >>ptrmap ========================================================================================
   A small open-addressing hash map from non-zero 64-bit keys (pointers, uids) to pointers, with
   linear probing and backward-shift deletion. It grows as needed; a zeroed struct is empty. */

struct mms__ptrmap {
    uint64_t *keys;   /* 0 = empty slot */
    void    **vals;
    size_t    cap;    /* power of two, or 0 */
    size_t    count;
};

/* FNV-1a over bytes, continued from h (MMS__FNV1A64_START to begin): checksums of dumps, pixels, texts. */
#define MMS__FNV1A64_START 0xcbf29ce484222325ULL
static uint64_t mms__fnv1a64(const void *data, size_t n, uint64_t h) {
    const unsigned char *p = (const unsigned char *)data;
    size_t i;
    for (i = 0; i < n; i++) { h ^= p[i]; h *= 0x100000001b3ULL; }
    return h;
}

static size_t mms__hash64(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return (size_t)x;
}

static void mms__ptrmap_free(struct mms__ptrmap *m) {
    MMS_FREE(m->keys);
    MMS_FREE(m->vals);
    memset(m, 0, sizeof *m);
}

static size_t mms__ptrmap_slot(const struct mms__ptrmap *m, uint64_t key) {
    size_t mask = m->cap - 1, i = mms__hash64(key) & mask;
    while (m->keys[i] != 0 && m->keys[i] != key) i = (i + 1) & mask;
    return i;
}

static void *mms__ptrmap_get(const struct mms__ptrmap *m, uint64_t key, bool *found) {
    size_t i;
    if (m->cap == 0) { if (found) *found = false; return NULL; }
    i = mms__ptrmap_slot(m, key);
    if (found) *found = m->keys[i] == key;
    return m->keys[i] == key ? m->vals[i] : NULL;
}

static bool mms__ptrmap_grow(struct mms__ptrmap *m) {
    struct mms__ptrmap bigger;
    size_t i;
    bigger.cap = m->cap ? m->cap * 2 : 64;
    bigger.count = 0;
    bigger.keys = (uint64_t *)MMS_MALLOC(bigger.cap * sizeof *bigger.keys);
    bigger.vals = (void **)MMS_MALLOC(bigger.cap * sizeof *bigger.vals);
    if (!bigger.keys || !bigger.vals) {
        MMS_FREE(bigger.keys);
        MMS_FREE(bigger.vals);
        return false;
    }
    memset(bigger.keys, 0, bigger.cap * sizeof *bigger.keys);
    for (i = 0; i < m->cap; i++) {
        if (m->keys[i]) {
            size_t j = mms__ptrmap_slot(&bigger, m->keys[i]);
            bigger.keys[j] = m->keys[i];
            bigger.vals[j] = m->vals[i];
            bigger.count++;
        }
    }
    mms__ptrmap_free(m);
    *m = bigger;
    return true;
}

/* Insert or replace. False only when memory runs out. */
static bool mms__ptrmap_put(struct mms__ptrmap *m, uint64_t key, void *val) {
    size_t i;
    MMS_ASSERT(key != 0);
    if ((m->count + 1) * 2 > m->cap && !mms__ptrmap_grow(m)) return false;
    i = mms__ptrmap_slot(m, key);
    if (m->keys[i] != key) { m->keys[i] = key; m->count++; }
    m->vals[i] = val;
    return true;
}

static void mms__ptrmap_remove(struct mms__ptrmap *m, uint64_t key) {
    size_t mask, i, j;
    if (m->cap == 0) return;
    mask = m->cap - 1;
    i = mms__ptrmap_slot(m, key);
    if (m->keys[i] != key) return;
    m->keys[i] = 0;
    m->count--;
    /* shift later members of the probe run back so lookups never stop early */
    for (j = (i + 1) & mask; m->keys[j] != 0; j = (j + 1) & mask) {
        size_t home = mms__hash64(m->keys[j]) & mask;
        bool between = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
        if (!between) {
            m->keys[i] = m->keys[j];
            m->vals[i] = m->vals[j];
            m->keys[j] = 0;
            i = j;
        }
    }
}
/* ==== end src/base/ptrmap.c ==== */

/* ==== begin src/core/quants.c ==== */
/* >>quants ========================================================================================
   Quantized block types with GGUF's exact layouts, so files from the GGUF ecosystem load as they
   are: dequantization (to_float) and our reference quantizers (from_float). Dequantization does
   the float operations in the order the format's reference does, so results are bit-identical.
     Q8_0  32 values:  f16 d, int8 q[32]                            x = d * q
     Q4_0  32 values:  f16 d, 16 bytes: x[j] low nibble, x[j+16] high   x = d * (q - 8)
     Q4_K 256 values:  f16 d, f16 dmin, 12 bytes of 6-bit scales and mins for 8 sub-blocks of 32,
                       128 bytes of nibbles (each 32 bytes: a sub-block low, the next high)
                                                                    x = d * sc * q - dmin * m
     Q6_K 256 values:  ql[128] low 4 bits, qh[64] high 2 bits, int8 scales for 16 sub-blocks of 16,
                       f16 d                                        x = d * sc * (q - 32) */

#define MMS__QK8_0 32
#define MMS__QK4_0 32
#define MMS__QK_K  256

struct mms__block_q8_0 { mms_fp16_t d; int8_t qs[MMS__QK8_0]; };
struct mms__block_q4_0 { mms_fp16_t d; uint8_t qs[MMS__QK4_0 / 2]; };
struct mms__block_q4_k { mms_fp16_t d, dmin; uint8_t scales[12]; uint8_t qs[MMS__QK_K / 2]; };
struct mms__block_q6_k { uint8_t ql[MMS__QK_K / 2]; uint8_t qh[MMS__QK_K / 4]; int8_t scales[MMS__QK_K / 16]; mms_fp16_t d; };

typedef char mms__assert_q8_0_size[sizeof(struct mms__block_q8_0) == 34 ? 1 : -1];
typedef char mms__assert_q4_0_size[sizeof(struct mms__block_q4_0) == 18 ? 1 : -1];
typedef char mms__assert_q4_k_size[sizeof(struct mms__block_q4_k) == 144 ? 1 : -1];
typedef char mms__assert_q6_k_size[sizeof(struct mms__block_q6_k) == 210 ? 1 : -1];

/* Round half away from zero, as the formats' references do (roundf), for |x| < 2^31: the
   fraction x - trunc(x) is exact, so the comparison with 0.5 is too (x + 0.5f would round
   0.49999997 up). Inline, where the C library's roundf is a call. */
static int mms__round_int(float x) {
    const int i = (int)x;
    const float f = x - (float)i;
    return i + (f >= 0.5f) - (f <= -0.5f);
}
static int mms__clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* -- Q8_0 -- */

static void mms__q8_0_to_float(const void *src, float *dst, int64_t n) {
    const struct mms__block_q8_0 *b = (const struct mms__block_q8_0 *)src;
    int64_t i;
    int j;
    for (i = 0; i < n / MMS__QK8_0; i++, b++) {
        const float d = mms_fp16_to_fp32(b->d);
        for (j = 0; j < MMS__QK8_0; j++) *dst++ = d * (float)b->qs[j];
    }
}

static void mms__q8_0_from_float(const float *src, void *dst, int64_t n) {
    struct mms__block_q8_0 *b = (struct mms__block_q8_0 *)dst;
    int64_t i;
    int j;
    for (i = 0; i < n / MMS__QK8_0; i++, b++, src += MMS__QK8_0) {
        float amax = 0.0f, d, id;
        for (j = 0; j < MMS__QK8_0; j++) amax = fabsf(src[j]) > amax ? fabsf(src[j]) : amax;
        d = amax / 127.0f;
        id = d != 0.0f ? 1.0f / d : 0.0f;
        b->d = mms_fp32_to_fp16(d);
        for (j = 0; j < MMS__QK8_0; j++) b->qs[j] = (int8_t)mms__round_int(src[j] * id);
    }
}

/* -- Q4_0 -- */

static void mms__q4_0_to_float(const void *src, float *dst, int64_t n) {
    const struct mms__block_q4_0 *b = (const struct mms__block_q4_0 *)src;
    int64_t i;
    int j;
    for (i = 0; i < n / MMS__QK4_0; i++, b++, dst += MMS__QK4_0) {
        const float d = mms_fp16_to_fp32(b->d);
        for (j = 0; j < MMS__QK4_0 / 2; j++) {
            dst[j] = (float)((b->qs[j] & 0x0f) - 8) * d;
            dst[j + MMS__QK4_0 / 2] = (float)((b->qs[j] >> 4) - 8) * d;
        }
    }
}

/* d maps the value of largest magnitude to -8 exactly; the others truncate after + 8.5. */
static void mms__q4_0_from_float(const float *src, void *dst, int64_t n) {
    struct mms__block_q4_0 *b = (struct mms__block_q4_0 *)dst;
    int64_t i;
    int j;
    for (i = 0; i < n / MMS__QK4_0; i++, b++, src += MMS__QK4_0) {
        float amax = 0.0f, max = 0.0f, d, id;
        for (j = 0; j < MMS__QK4_0; j++)
            if (fabsf(src[j]) > amax) { amax = fabsf(src[j]); max = src[j]; }
        d = max / -8.0f;
        id = d != 0.0f ? 1.0f / d : 0.0f;
        b->d = mms_fp32_to_fp16(d);
        for (j = 0; j < MMS__QK4_0 / 2; j++) {
            const int q0 = mms__clamp_int((int)(src[j] * id + 8.5f), 0, 15);
            const int q1 = mms__clamp_int((int)(src[j + MMS__QK4_0 / 2] * id + 8.5f), 0, 15);
            b->qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

/* -- Q4_K -- */

/* Sub-block j's 6-bit scale and min from the 12 packed bytes: the first four pairs are whole
   bytes' low 6 bits; the last four take 4 low bits from bytes 8..11 and 2 high bits from the
   top of bytes 0..7. */
static void mms__q4_k_scale_min(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

static void mms__q4_k_pack_scales(const int *sc, const int *m, uint8_t *q) {
    int j;
    memset(q, 0, 12);
    for (j = 0; j < 8; j++) {
        if (j < 4) {
            q[j] |= (uint8_t)sc[j];
            q[j + 4] |= (uint8_t)m[j];
        } else {
            q[j + 4] = (uint8_t)((sc[j] & 0x0f) | ((m[j] & 0x0f) << 4));
            q[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
            q[j] |= (uint8_t)((m[j] >> 4) << 6);
        }
    }
}

static void mms__q4_k_to_float(const void *src, float *dst, int64_t n) {
    const struct mms__block_q4_k *b = (const struct mms__block_q4_k *)src;
    int64_t i;
    int s, l;
    for (i = 0; i < n / MMS__QK_K; i++, b++) {
        const float d = mms_fp16_to_fp32(b->d), dmin = mms_fp16_to_fp32(b->dmin);
        const uint8_t *q = b->qs;
        for (s = 0; s < 8; s += 2, q += 32) {
            int sc0, m0, sc1, m1;
            float d0, dm0, d1, dm1;
            mms__q4_k_scale_min(s, b->scales, &sc0, &m0);
            mms__q4_k_scale_min(s + 1, b->scales, &sc1, &m1);
            d0 = d * (float)sc0; dm0 = dmin * (float)m0;
            d1 = d * (float)sc1; dm1 = dmin * (float)m1;
            for (l = 0; l < 32; l++) *dst++ = d0 * (float)(q[l] & 0x0f) - dm0;
            for (l = 0; l < 32; l++) *dst++ = d1 * (float)(q[l] >> 4) - dm1;
        }
    }
}

/* The affine fit of one sub-block: x ~ scale * q - min with q in 0..nmax. A few starting scales
   around (max - min) / nmax, each refined by least squares over its own assignment; the best kept. */
static float mms__fit_affine(const float *x, int n, int nmax, float *min_out) {
    float lo = x[0], hi = x[0], best_err = INFINITY, best_scale = 0.0f, best_min = 0.0f;
    int i, step;
    for (i = 1; i < n; i++) { lo = x[i] < lo ? x[i] : lo; hi = x[i] > hi ? x[i] : hi; }
    if (lo > 0.0f) lo = 0.0f;             /* mins are stored as non-negative offsets */
    if (hi == lo) { *min_out = -lo; return 0.0f; }
    for (step = -4; step <= 8; step += 2) {
        float iscale = ((float)nmax + 0.1f * (float)step) / (hi - lo), off0 = lo, scale = 0.0f, min = 0.0f;
        double err = 0;
        int pass;
        for (pass = 0; pass < 2; pass++) {     /* assign, fit; assign again against the fit, fit */
            double sq = 0, sx = 0, sqq = 0, sqx = 0, det, sc, off;
            for (i = 0; i < n; i++) {
                const int q = mms__clamp_int(mms__round_int(iscale * (x[i] - off0)), 0, nmax);
                sq += q; sx += x[i]; sqq += (double)q * q; sqx += (double)q * x[i];
            }
            det = n * sqq - sq * sq;            /* least squares for x = sc * q + off, off <= 0 */
            sc = det > 0 ? (n * sqx - sq * sx) / det : 1.0 / iscale;
            off = (sx - sc * sq) / n;
            if (off > 0) { off = 0; sc = sqq > 0 ? sqx / sqq : 0; }
            scale = (float)sc;
            min = (float)-off;
            if (scale <= 0.0f) break;
            iscale = 1.0f / scale;
            off0 = -min;
        }
        for (i = 0; i < n; i++) {
            const int q = scale > 0 ? mms__clamp_int(mms__round_int((x[i] + min) / scale), 0, nmax) : 0;
            const double e = x[i] - (scale * (float)q - min);
            err += e * e;
        }
        if (err < best_err) { best_err = (float)err; best_scale = scale; best_min = min; }
    }
    *min_out = best_min;
    return best_scale;
}

static void mms__q4_k_from_float(const float *src, void *dst, int64_t n) {
    struct mms__block_q4_k *b = (struct mms__block_q4_k *)dst;
    int64_t i;
    int s, l;
    for (i = 0; i < n / MMS__QK_K; i++, b++, src += MMS__QK_K) {
        float scales[8], mins[8], max_scale = 0.0f, max_min = 0.0f, d, dmin;
        int sc[8], m[8];
        for (s = 0; s < 8; s++) {
            scales[s] = mms__fit_affine(src + 32 * s, 32, 15, &mins[s]);
            max_scale = scales[s] > max_scale ? scales[s] : max_scale;
            max_min = mins[s] > max_min ? mins[s] : max_min;
        }
        b->d = mms_fp32_to_fp16(max_scale / 63.0f);
        b->dmin = mms_fp32_to_fp16(max_min / 63.0f);
        d = mms_fp16_to_fp32(b->d);
        dmin = mms_fp16_to_fp32(b->dmin);
        for (s = 0; s < 8; s++) {
            sc[s] = d > 0.0f ? mms__clamp_int(mms__round_int(scales[s] / d), 0, 63) : 0;
            m[s] = dmin > 0.0f ? mms__clamp_int(mms__round_int(mins[s] / dmin), 0, 63) : 0;
        }
        mms__q4_k_pack_scales(sc, m, b->scales);
        for (s = 0; s < 8; s++) {             /* the nibbles against the scales as stored */
            const float ds = d * (float)sc[s], dm = dmin * (float)m[s];
            uint8_t *q = b->qs + 32 * (s / 2);
            for (l = 0; l < 32; l++) {
                const int v = ds > 0.0f ? mms__clamp_int(mms__round_int((src[32 * s + l] + dm) / ds), 0, 15) : 0;
                q[l] = (uint8_t)(s % 2 ? (q[l] & 0x0f) | (v << 4) : v);
            }
        }
    }
}

/* -- Q6_K -- */

static void mms__q6_k_to_float(const void *src, float *dst, int64_t n) {
    const struct mms__block_q6_k *b = (const struct mms__block_q6_k *)src;
    int64_t i;
    int half, l;
    for (i = 0; i < n / MMS__QK_K; i++, b++) {
        const float d = mms_fp16_to_fp32(b->d);
        for (half = 0; half < 2; half++, dst += 128) {
            const uint8_t *ql = b->ql + 64 * half, *qh = b->qh + 32 * half;
            const int8_t *sc = b->scales + 8 * half;
            for (l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                dst[l] = d * (float)sc[is] * (float)q1;
                dst[l + 32] = d * (float)sc[is + 2] * (float)q2;
                dst[l + 64] = d * (float)sc[is + 4] * (float)q3;
                dst[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}

/* Symmetric per sub-block of 16: the value of largest magnitude maps to -32, then a least-squares
   refit of the scale; the 16 scales are stored as int8 multiples of d. */
static void mms__q6_k_from_float(const float *src, void *dst, int64_t n) {
    struct mms__block_q6_k *b = (struct mms__block_q6_k *)dst;
    int64_t i;
    int s, l;
    for (i = 0; i < n / MMS__QK_K; i++, b++, src += MMS__QK_K) {
        float scales[16], amax_scale = 0.0f, d;
        int q[MMS__QK_K];
        for (s = 0; s < 16; s++) {
            const float *x = src + 16 * s;
            float amax = 0.0f, max = 0.0f, scale;
            double sqx = 0, sqq = 0;
            for (l = 0; l < 16; l++)
                if (fabsf(x[l]) > amax) { amax = fabsf(x[l]); max = x[l]; }
            scale = max / -32.0f;
            if (scale != 0.0f) {
                for (l = 0; l < 16; l++) {
                    const int v = mms__clamp_int(mms__round_int(x[l] / scale), -32, 31);
                    sqx += (double)v * x[l];
                    sqq += (double)v * v;
                }
                if (sqq > 0) scale = (float)(sqx / sqq);
            }
            scales[s] = scale;
            if (fabsf(scale) > fabsf(amax_scale)) amax_scale = scale;
        }
        b->d = mms_fp32_to_fp16(fabsf(amax_scale) / 127.0f);
        d = mms_fp16_to_fp32(b->d);
        for (s = 0; s < 16; s++) {
            const int sc = d > 0.0f ? mms__clamp_int(mms__round_int(scales[s] / d), -128, 127) : 0;
            const float ds = d * (float)sc;
            b->scales[s] = (int8_t)sc;
            for (l = 0; l < 16; l++)
                q[16 * s + l] = ds != 0.0f ? mms__clamp_int(mms__round_int(src[16 * s + l] / ds), -32, 31) + 32 : 32;
        }
        memset(b->qh, 0, sizeof b->qh);
        for (s = 0; s < 2; s++) {             /* the inverse of the layout in to_float */
            uint8_t *ql = b->ql + 64 * s, *qh = b->qh + 32 * s;
            const int *v = q + 128 * s;
            for (l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((v[l] & 0x0f) | ((v[l + 64] & 0x0f) << 4));
                ql[l + 32] = (uint8_t)((v[l + 32] & 0x0f) | ((v[l + 96] & 0x0f) << 4));
                qh[l] = (uint8_t)((v[l] >> 4) | ((v[l + 32] >> 4) << 2) | ((v[l + 64] >> 4) << 4) | ((v[l + 96] >> 4) << 6));
            }
        }
    }
}
/* ==== end src/core/quants.c ==== */

/* ==== begin src/core/types.c ==== */
/* >>types =========================================================================================
   The per-type traits table and the scalar float conversions. Quantized block types slot in as
   more rows (blck_size > 1). The CPU backend has vectorised conversions of its own. */

MMS_API float mms_fp16_to_fp32(mms_fp16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    uint32_t bits;
    float f;
    if (exp == 0) {                       /* zero or subnormal: mant * 2^-24 */
        f = (float)mant * 5.9604644775390625e-8f;
        return sign ? -f : f;
    }
    if (exp == 31) bits = sign | 0x7f800000u | (mant << 13);          /* inf, nan */
    else           bits = sign | ((exp + 112) << 23) | (mant << 13);   /* rebias 15 -> 127 */
    memcpy(&f, &bits, sizeof f);
    return f;
}

MMS_API mms_fp16_t mms_fp32_to_fp16(float f) {
    uint32_t x, sign, ax;
    memcpy(&x, &f, sizeof x);
    sign = (x >> 16) & 0x8000;
    ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u)                 /* inf stays inf, nan stays a quiet nan */
        return (mms_fp16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 | ((ax >> 13) & 0x3ff) : 0));
    if (ax >= 0x477ff000u)                 /* rounds to above 65504 */
        return (mms_fp16_t)(sign | 0x7c00);
    if (ax < 0x38800000u) {                /* below 2^-14: a half subnormal, in units of 2^-24 */
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(ax >> 23);
        uint32_t q, rem, half;
        if (shift > 24) return (mms_fp16_t)sign;
        q = m >> shift;
        rem = m & ((1u << shift) - 1);
        half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (mms_fp16_t)(sign | q);
    }
    ax += 0xfffu + ((ax >> 13) & 1);       /* round to nearest even, carry may bump the exponent */
    return (mms_fp16_t)(sign | ((ax - 0x38000000u) >> 13));
}

MMS_API float mms_bf16_to_fp32(mms_bf16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

MMS_API mms_bf16_t mms_fp32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (mms_bf16_t)((x >> 16) | 0x40);  /* quiet nan */
    return (mms_bf16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

static void mms__f32_to_float(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }
static void mms__f32_from_float(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }

static void mms__f16_to_float(const void *src, float *dst, int64_t n) {
    const mms_fp16_t *s = (const mms_fp16_t *)src;
    int64_t i;
    for (i = 0; i < n; i++) dst[i] = mms_fp16_to_fp32(s[i]);
}
static void mms__f16_from_float(const float *src, void *dst, int64_t n) {
    mms_fp16_t *d = (mms_fp16_t *)dst;
    int64_t i;
    for (i = 0; i < n; i++) d[i] = mms_fp32_to_fp16(src[i]);
}
static void mms__bf16_to_float(const void *src, float *dst, int64_t n) {
    const mms_bf16_t *s = (const mms_bf16_t *)src;
    int64_t i;
    for (i = 0; i < n; i++) dst[i] = mms_bf16_to_fp32(s[i]);
}
static void mms__bf16_from_float(const float *src, void *dst, int64_t n) {
    mms_bf16_t *d = (mms_bf16_t *)dst;
    int64_t i;
    for (i = 0; i < n; i++) d[i] = mms_fp32_to_bf16(src[i]);
}

static const struct mms_type_traits mms__type_traits[MMS_TYPE_COUNT] = {
    /* INVALID */ { "invalid", 0, 0, false, false, NULL, NULL },
    /* F32     */ { "f32",  1, sizeof(float),      false, true,  mms__f32_to_float,  mms__f32_from_float },
    /* F16     */ { "f16",  1, sizeof(mms_fp16_t), false, true,  mms__f16_to_float,  mms__f16_from_float },
    /* BF16    */ { "bf16", 1, sizeof(mms_bf16_t), false, true,  mms__bf16_to_float, mms__bf16_from_float },
    /* I32     */ { "i32",  1, sizeof(int32_t),    false, false, NULL, NULL },
    /* Q8_0    */ { "q8_0", MMS__QK8_0, sizeof(struct mms__block_q8_0), true, false, mms__q8_0_to_float, mms__q8_0_from_float },
    /* Q4_0    */ { "q4_0", MMS__QK4_0, sizeof(struct mms__block_q4_0), true, false, mms__q4_0_to_float, mms__q4_0_from_float },
    /* Q4_K    */ { "q4_k", MMS__QK_K,  sizeof(struct mms__block_q4_k), true, false, mms__q4_k_to_float, mms__q4_k_from_float },
    /* Q6_K    */ { "q6_k", MMS__QK_K,  sizeof(struct mms__block_q6_k), true, false, mms__q6_k_to_float, mms__q6_k_from_float },
};

static bool mms__type_valid(enum mms_type type) { return type > MMS_TYPE_INVALID && type < MMS_TYPE_COUNT; }
static bool mms__type_is_float(enum mms_type type) { return mms__type_valid(type) && mms__type_traits[type].is_float; }
static bool mms__type_is_quantized(enum mms_type type) { return mms__type_valid(type) && mms__type_traits[type].is_quantized; }

MMS_API const struct mms_type_traits *mms_get_type_traits(enum mms_type type) {
    return mms__type_valid(type) ? &mms__type_traits[type] : NULL;
}
MMS_API const char *mms_type_name(enum mms_type type) {
    return mms__type_valid(type) ? mms__type_traits[type].name : "invalid";
}
MMS_API size_t  mms_type_size(enum mms_type type) { return mms__type_valid(type) ? mms__type_traits[type].type_size : 0; }
MMS_API int64_t mms_blck_size(enum mms_type type) { return mms__type_valid(type) ? mms__type_traits[type].blck_size : 0; }
MMS_API size_t  mms_row_size(enum mms_type type, int64_t ne) {
    return mms__type_valid(type) ? mms_type_size(type) * (size_t)(ne / mms_blck_size(type)) : 0;
}
/* ==== end src/core/types.c ==== */

/* ==== begin src/core/tensor.c ==== */
/* >>tensor ========================================================================================
   Contexts (a growing arena of tensor metadata and, unless no_alloc, data), tensors, shapes,
   names, flags and views. */

#define MMS__OBJ_ALIGN   16
#define MMS__DATA_ALIGN  64
#define MMS__DEFAULT_BLOCK (1u << 20)
#define MMS__MAX_BLOCK     ((size_t)64 << 20)

struct mms__block {
    struct mms__block *next;
    char  *base;
    size_t size;
    size_t used;
    bool   owned;      /* allocated by us, freed with the context */
};

/* Every tensor of a context sits in one of these; `next` threads them in creation order. */
struct mms__tensor_obj {
    struct mms_tensor       tensor;
    struct mms__tensor_obj *next;
};

struct mms_cgraph;

struct mms_context {
    struct mms__block      *first_block;
    struct mms__block      *cur_block;
    size_t                  next_block_size;
    bool                    fixed;        /* caller-owned memory: never grows */
    bool                    no_alloc;
    size_t                  used;

    struct mms__tensor_obj *first_tensor;
    struct mms__tensor_obj *last_tensor;
    struct mms_cgraph      *graphs;       /* owned graphs, freed with the context */

    enum mms_status         status;       /* first error raised while building */
    char                    error[MMS__ERROR_MAX];
};

static void mms__graph_release_all(struct mms_context *ctx);  /* graph.c */

/* -- tensor identity --
   Every tensor gets a uid when made. A tensor that a kept tensor's provenance refers to is
   "watched": registered here by uid until its context is reset or freed, so a provenance record
   can find it (or learn it is gone) without holding a pointer that may dangle. */

static volatile uint64_t  mms__tensor_uid_counter = 0;
static struct mms__ptrmap mms__watched;         /* uid -> tensor, under the global lock */

/* Under the lock: a shared model's weights are watched by contexts on several threads. */
static void mms__tensor_watch(struct mms_tensor *t) {
    mms__global_lock();
    if (!t->watched && mms__ptrmap_put(&mms__watched, t->uid, t)) t->watched = true;
    mms__global_unlock();
}

/* Writes to watched tensors so far: a kept tensor checked since the last one is still up to date. */
static uint64_t mms__watched_writes = 1;   /* under the global lock */
static void mms__watched_write(void) { mms__global_lock(); mms__watched_writes++; mms__global_unlock(); }
static uint64_t mms__watched_writes_now(void) {
    uint64_t n;
    mms__global_lock();
    n = mms__watched_writes;
    mms__global_unlock();
    return n;
}

/* The live tensor with this uid, if it is watched (NULL: its context is gone). */
static struct mms_tensor *mms__tensor_find_watched(uint64_t uid) {
    struct mms_tensor *t;
    mms__global_lock();
    t = (struct mms_tensor *)mms__ptrmap_get(&mms__watched, uid, NULL);
    mms__global_unlock();
    return t;
}

/* A context's tensors go away: unregister the watched ones, free the provenance records. */
static void mms__ctx_forget_tensors(struct mms_context *ctx) {
    struct mms__tensor_obj *o;
    for (o = ctx->first_tensor; o; o = o->next) {
        MMS_FREE(o->tensor.provenance);
        o->tensor.provenance = NULL;
    }
    mms__global_lock();
    for (o = ctx->first_tensor; o; o = o->next)
        if (o->tensor.watched) mms__ptrmap_remove(&mms__watched, o->tensor.uid);
    if (mms__watched.count == 0) mms__ptrmap_free(&mms__watched);   /* leave nothing behind at exit */
    mms__global_unlock();
}

/* Records the first build error in the context, and raises it as the thread's last error. */
static void mms__ctx_error(struct mms_context *ctx, enum mms_status status, const char *fmt, ...) MMS_PRINTF(3, 4);
static void mms__ctx_error(struct mms_context *ctx, enum mms_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mms__set_errorv(status, fmt, ap);
    va_end(ap);
    if (ctx && ctx->status == MMS_OK) {
        ctx->status = status;
        mms__copy_str(ctx->error, sizeof ctx->error, mms__last_message);
    }
}

static struct mms__block *mms__block_new(size_t size) {
    struct mms__block *b = (struct mms__block *)MMS_MALLOC(sizeof *b);
    if (!b) return NULL;
    b->base = (char *)mms__aligned_alloc(MMS__DATA_ALIGN, size);
    if (!b->base) { MMS_FREE(b); return NULL; }
    b->next = NULL;
    b->size = size;
    b->used = 0;
    b->owned = true;
    return b;
}

/* Memory from the arena, aligned; NULL (with an OOM error in the context) when it runs out. */
static void *mms__ctx_alloc(struct mms_context *ctx, size_t size, size_t align) {
    struct mms__block *b = ctx->cur_block;
    for (;;) {
        size_t start = MMS__ALIGN_UP((size_t)(uintptr_t)(b->base + b->used), align) - (size_t)(uintptr_t)b->base;
        if (start + size <= b->size) {
            ctx->used += start + size - b->used;
            b->used = start + size;
            return b->base + start;
        }
        if (b->next) {                   /* after a reset the later blocks are empty again */
            b = b->next;
            ctx->cur_block = b;
            continue;
        }
        if (ctx->fixed) {
            mms__ctx_error(ctx, MMS_ERR_OOM, "context memory exhausted: %zu more bytes needed, %zu of %zu used "
                           "(pass a larger mem_size, or mem_buffer = NULL to let the context grow)",
                           size, ctx->used, b->size);
            return NULL;
        }
        {
            size_t want = MMS__MAX(size + align, ctx->next_block_size);
            struct mms__block *nb = mms__block_new(want);
            if (!nb) {
                mms__ctx_error(ctx, MMS_ERR_OOM, "out of host memory growing a context by %zu bytes", want);
                return NULL;
            }
            b->next = nb;
            b = nb;
            ctx->cur_block = nb;
            ctx->next_block_size = MMS__MIN(ctx->next_block_size * 2, MMS__MAX_BLOCK);
        }
    }
}

MMS_API struct mms_context *mms_init(struct mms_init_params params) {
    struct mms_context *ctx = (struct mms_context *)MMS_MALLOC(sizeof *ctx);
    if (!ctx) { mms_set_error(MMS_ERR_OOM, "mms_init: out of host memory"); return NULL; }
    memset(ctx, 0, sizeof *ctx);
    ctx->no_alloc = params.no_alloc;
    if (params.mem_buffer) {
        struct mms__block *b = (struct mms__block *)MMS_MALLOC(sizeof *b);
        if (!b) { MMS_FREE(ctx); mms_set_error(MMS_ERR_OOM, "mms_init: out of host memory"); return NULL; }
        if (params.mem_size == 0) {
            MMS_FREE(b);
            MMS_FREE(ctx);
            mms_set_error(MMS_ERR_INVALID_ARG, "mms_init: mem_buffer given with mem_size 0");
            return NULL;
        }
        b->next = NULL;
        b->base = (char *)params.mem_buffer;
        b->size = params.mem_size;
        b->used = 0;
        b->owned = false;
        ctx->first_block = b;
        ctx->fixed = true;
    } else {
        size_t size = params.mem_size ? params.mem_size : MMS__DEFAULT_BLOCK;
        ctx->first_block = mms__block_new(size);
        if (!ctx->first_block) {
            MMS_FREE(ctx);
            mms_set_error(MMS_ERR_OOM, "mms_init: cannot allocate %zu bytes", size);
            return NULL;
        }
    }
    ctx->cur_block = ctx->first_block;
    ctx->next_block_size = MMS__MAX(ctx->first_block->size, (size_t)MMS__DEFAULT_BLOCK);
    return ctx;
}

MMS_API void mms_free(struct mms_context *ctx) {
    struct mms__block *b;
    if (!ctx) return;
    mms__graph_release_all(ctx);
    mms__ctx_forget_tensors(ctx);
    b = ctx->first_block;
    while (b) {
        struct mms__block *next = b->next;
        if (b->owned) mms__aligned_free(b->base);
        MMS_FREE(b);
        b = next;
    }
    MMS_FREE(ctx);
}

MMS_API void mms_reset(struct mms_context *ctx) {
    struct mms__block *b;
    if (!ctx) return;
    mms__graph_release_all(ctx);
    mms__ctx_forget_tensors(ctx);
    for (b = ctx->first_block; b; b = b->next) b->used = 0;
    ctx->cur_block = ctx->first_block;
    ctx->used = 0;
    ctx->first_tensor = ctx->last_tensor = NULL;
    ctx->status = MMS_OK;
    ctx->error[0] = '\0';
}

MMS_API size_t mms_used_mem(const struct mms_context *ctx) { return ctx ? ctx->used : 0; }
MMS_API bool   mms_get_no_alloc(const struct mms_context *ctx) { return ctx && ctx->no_alloc; }
MMS_API void   mms_set_no_alloc(struct mms_context *ctx, bool no_alloc) { if (ctx) ctx->no_alloc = no_alloc; }
MMS_API size_t mms_tensor_overhead(void) { return sizeof(struct mms__tensor_obj) + MMS__OBJ_ALIGN; }

MMS_API enum mms_status mms_ctx_status(const struct mms_context *ctx) { return ctx ? ctx->status : MMS_ERR_INVALID_ARG; }
MMS_API const char *mms_ctx_error(const struct mms_context *ctx) { return ctx ? ctx->error : "no context"; }
MMS_API void mms_ctx_clear_error(struct mms_context *ctx) {
    if (!ctx) return;
    ctx->status = MMS_OK;
    ctx->error[0] = '\0';
}

/* -- shapes -- */

MMS_API int64_t mms_nelements(const struct mms_tensor *t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }
MMS_API int64_t mms_nrows(const struct mms_tensor *t)     { return t->ne[1] * t->ne[2] * t->ne[3]; }

MMS_API size_t mms_nbytes(const struct mms_tensor *t) {
    size_t bytes;
    int i;
    for (i = 0; i < MMS_MAX_DIMS; i++) if (t->ne[i] <= 0) return 0;
    if (mms_blck_size(t->type) == 1) {
        bytes = mms_type_size(t->type);
        for (i = 0; i < MMS_MAX_DIMS; i++) bytes += (size_t)(t->ne[i] - 1) * t->nb[i];
    } else {
        bytes = mms_row_size(t->type, t->ne[0]);
        for (i = 1; i < MMS_MAX_DIMS; i++) bytes += (size_t)(t->ne[i] - 1) * t->nb[i];
    }
    return bytes;
}

MMS_API int mms_n_dims(const struct mms_tensor *t) {
    int i;
    for (i = MMS_MAX_DIMS - 1; i >= 1; i--) if (t->ne[i] > 1) return i + 1;
    return 1;
}

MMS_API bool mms_is_contiguous(const struct mms_tensor *t) {
    size_t expect = mms_type_size(t->type);
    int i;
    if (t->ne[0] != mms_blck_size(t->type) && t->nb[0] != expect) return false;
    expect = mms_row_size(t->type, t->ne[0]);
    for (i = 1; i < MMS_MAX_DIMS; i++) {
        if (t->ne[i] != 1 && t->nb[i] != expect) return false;
        expect *= (size_t)t->ne[i];
    }
    return true;
}

MMS_API bool mms_is_transposed(const struct mms_tensor *t) { return t->nb[0] > t->nb[1]; }
MMS_API bool mms_is_permuted(const struct mms_tensor *t) {
    return t->nb[0] > t->nb[1] || t->nb[1] > t->nb[2] || t->nb[2] > t->nb[3];
}

MMS_API bool mms_are_same_shape(const struct mms_tensor *a, const struct mms_tensor *b) {
    return a->ne[0] == b->ne[0] && a->ne[1] == b->ne[1] && a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3];
}

MMS_API bool mms_are_same_layout(const struct mms_tensor *a, const struct mms_tensor *b) {
    int i;
    if (a->type != b->type) return false;
    for (i = 0; i < MMS_MAX_DIMS; i++) if (a->ne[i] != b->ne[i] || (a->ne[i] > 1 && a->nb[i] != b->nb[i])) return false;
    return true;
}

MMS_API bool mms_can_repeat(const struct mms_tensor *small, const struct mms_tensor *big) {
    int i;
    for (i = 0; i < MMS_MAX_DIMS; i++) if (small->ne[i] <= 0 || big->ne[i] % small->ne[i] != 0) return false;
    return true;
}

/* "'name' f32 [4,3,1,1]" or "unnamed MUL_MAT f32 [...]": how errors refer to a tensor. */
struct mms__desc { char s[MMS_MAX_NAME + 192]; };
static struct mms__desc mms__tensor_desc(const struct mms_tensor *t) {
    struct mms__desc d;
    char shape[96];
    if (!t) { snprintf(d.s, sizeof d.s, "NULL"); return d; }
    mms__shape_str(t->ne, shape, sizeof shape);
    if (t->name[0]) snprintf(d.s, sizeof d.s, "'%s' %s %s", t->name, mms_type_name(t->type), shape);
    else            snprintf(d.s, sizeof d.s, "unnamed %s %s %s", mms_op_name(t->op), mms_type_name(t->type), shape);
    return d;
}

/* -- tensor creation -- */

static void mms__set_contiguous_strides(struct mms_tensor *t) {
    int i;
    t->nb[0] = mms_type_size(t->type);
    t->nb[1] = mms_row_size(t->type, t->ne[0]);
    for (i = 2; i < MMS_MAX_DIMS; i++) t->nb[i] = t->nb[i - 1] * (size_t)t->ne[i - 1];
}

/* Creates a tensor. With view_src it shares that tensor's memory at view_offs (views of views
   point at the root); otherwise it gets data from the arena unless the context is no_alloc. */
static struct mms_tensor *mms__new_tensor_impl(struct mms_context *ctx, const char *who, enum mms_type type,
                                               int n_dims, const int64_t *ne, struct mms_tensor *view_src, size_t view_offs) {
    struct mms__tensor_obj *obj;
    struct mms_tensor *t;
    int64_t total = 1;
    int i;

    if (!ctx) { mms_set_error(MMS_ERR_INVALID_ARG, "%s: context is NULL", who); return NULL; }
    if (!mms__type_valid(type)) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: invalid type %d", who, (int)type);
        return NULL;
    }
    if (n_dims < 1 || n_dims > MMS_MAX_DIMS || !ne) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: n_dims must be 1..%d, got %d", who, MMS_MAX_DIMS, n_dims);
        return NULL;
    }
    for (i = 0; i < n_dims; i++) {
        if (ne[i] < 0 || (ne[i] > 0 && total > (INT64_C(1) << 60) / ne[i])) {
            mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: dimension %d has invalid size %lld", who, i, (long long)ne[i]);
            return NULL;
        }
        total *= ne[i];
    }
    if (ne[0] % mms_blck_size(type) != 0) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: ne[0] = %lld is not a multiple of the %s block size %lld",
                       who, (long long)ne[0], mms_type_name(type), (long long)mms_blck_size(type));
        return NULL;
    }
    if (view_src && view_src->view_src) {
        view_offs += view_src->view_offs;
        view_src = view_src->view_src;
    }

    obj = (struct mms__tensor_obj *)mms__ctx_alloc(ctx, sizeof *obj, MMS__OBJ_ALIGN);
    if (!obj) return NULL;
    memset(obj, 0, sizeof *obj);
    t = &obj->tensor;
    t->uid = mms__atomic_next_u64(&mms__tensor_uid_counter);
    t->type = type;
    t->op = MMS_OP_NONE;
    for (i = 0; i < MMS_MAX_DIMS; i++) t->ne[i] = i < n_dims ? ne[i] : 1;
    mms__set_contiguous_strides(t);

    if (view_src) {
        t->view_src = view_src;
        t->view_offs = view_offs;
        if (view_src->placement.kind != MMS_MEMORY_NONE) {
            t->data = view_src->data ? (char *)view_src->data + view_offs : NULL;
            t->buffer = view_src->buffer;
            t->placement = view_src->placement;
        }
    } else if (!ctx->no_alloc) {
        size_t bytes = mms_nbytes(t);
        t->data = mms__ctx_alloc(ctx, bytes ? bytes : 1, MMS__DATA_ALIGN);
        if (!t->data) return NULL;   /* the tensor object stays unlinked: harmless */
        t->placement.kind = MMS_MEMORY_HOST;
    }

    if (ctx->last_tensor) ctx->last_tensor->next = obj;
    else ctx->first_tensor = obj;
    ctx->last_tensor = obj;
    return t;
}

MMS_API struct mms_tensor *mms_new_tensor(struct mms_context *ctx, enum mms_type type, int n_dims, const int64_t *ne) {
    return mms__new_tensor_impl(ctx, "mms_new_tensor", type, n_dims, ne, NULL, 0);
}
MMS_API struct mms_tensor *mms_new_tensor_1d(struct mms_context *ctx, enum mms_type type, int64_t ne0) {
    return mms__new_tensor_impl(ctx, "mms_new_tensor_1d", type, 1, &ne0, NULL, 0);
}
MMS_API struct mms_tensor *mms_new_tensor_2d(struct mms_context *ctx, enum mms_type type, int64_t ne0, int64_t ne1) {
    int64_t ne[2];
    ne[0] = ne0; ne[1] = ne1;
    return mms__new_tensor_impl(ctx, "mms_new_tensor_2d", type, 2, ne, NULL, 0);
}
MMS_API struct mms_tensor *mms_new_tensor_3d(struct mms_context *ctx, enum mms_type type, int64_t ne0, int64_t ne1, int64_t ne2) {
    int64_t ne[3];
    ne[0] = ne0; ne[1] = ne1; ne[2] = ne2;
    return mms__new_tensor_impl(ctx, "mms_new_tensor_3d", type, 3, ne, NULL, 0);
}
MMS_API struct mms_tensor *mms_new_tensor_4d(struct mms_context *ctx, enum mms_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    int64_t ne[4];
    ne[0] = ne0; ne[1] = ne1; ne[2] = ne2; ne[3] = ne3;
    return mms__new_tensor_impl(ctx, "mms_new_tensor_4d", type, 4, ne, NULL, 0);
}

MMS_API struct mms_tensor *mms_dup_tensor(struct mms_context *ctx, const struct mms_tensor *src) {
    if (!src) { if (ctx && ctx->status == MMS_OK) mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_dup_tensor: src is NULL"); return NULL; }
    return mms__new_tensor_impl(ctx, "mms_dup_tensor", src->type, MMS_MAX_DIMS, src->ne, NULL, 0);
}

MMS_API struct mms_tensor *mms_get_first_tensor(const struct mms_context *ctx) {
    return ctx && ctx->first_tensor ? &ctx->first_tensor->tensor : NULL;
}
MMS_API struct mms_tensor *mms_get_next_tensor(const struct mms_context *ctx, const struct mms_tensor *tensor) {
    const struct mms__tensor_obj *obj = (const struct mms__tensor_obj *)tensor;
    MMS__UNUSED(ctx);
    return obj && obj->next ? &obj->next->tensor : NULL;
}
MMS_API struct mms_tensor *mms_get_tensor(const struct mms_context *ctx, const char *name) {
    struct mms__tensor_obj *obj;
    if (!ctx || !name) return NULL;
    for (obj = ctx->first_tensor; obj; obj = obj->next)
        if (strcmp(obj->tensor.name, name) == 0) return &obj->tensor;
    return NULL;
}

/* -- names, flags, op params -- */

MMS_API const char *mms_get_name(const struct mms_tensor *t) { return t ? t->name : ""; }
MMS_API struct mms_tensor *mms_set_name(struct mms_tensor *t, const char *name) {
    if (t) mms__copy_str(t->name, sizeof t->name, name ? name : "");
    return t;
}
MMS_API struct mms_tensor *mms_format_name(struct mms_tensor *t, const char *fmt, ...) {
    va_list ap;
    if (!t) return NULL;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    return t;
}

MMS_API void mms_set_input(struct mms_tensor *t)      { if (t) t->flags |= MMS_TENSOR_FLAG_INPUT; }
MMS_API void mms_set_output(struct mms_tensor *t)     { if (t) t->flags |= MMS_TENSOR_FLAG_OUTPUT; }
MMS_API void mms_set_persistent(struct mms_tensor *t) { if (t) t->flags |= MMS_TENSOR_FLAG_PERSISTENT; }

MMS_API int32_t mms_get_op_params_i32(const struct mms_tensor *t, int index) {
    MMS_ASSERT(index >= 0 && index < (int)(MMS_MAX_OP_PARAMS / sizeof(int32_t)));
    return t->op_params[index];
}
MMS_API float mms_get_op_params_f32(const struct mms_tensor *t, int index) {
    float f;
    MMS_ASSERT(index >= 0 && index < (int)(MMS_MAX_OP_PARAMS / sizeof(int32_t)));
    memcpy(&f, &t->op_params[index], sizeof f);
    return f;
}
static void mms__set_op_param_i32(struct mms_tensor *t, int index, int32_t v) { t->op_params[index] = v; }
static void mms__set_op_param_f32(struct mms_tensor *t, int index, float v) { memcpy(&t->op_params[index], &v, sizeof v); }

/* -- views -- */

/* Argument checks shared by every op: NULL inputs propagate an earlier failure quietly. */
static bool mms__args_ok(struct mms_context *ctx, const char *op, struct mms_tensor *a, struct mms_tensor *b) {
    if (!ctx) { mms_set_error(MMS_ERR_INVALID_ARG, "%s: context is NULL", op); return false; }
    if (a && b) return true;
    if (ctx->status == MMS_OK)
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: argument %s is NULL", op, a ? "b" : "a");
    return false;
}

/* A view of a with the given shape at byte offset (relative to a); nb gives all four strides, or
   NULL for contiguous ones. The view must lie inside the memory of a's root. */
static struct mms_tensor *mms__view_impl(struct mms_context *ctx, const char *who, enum mms_op op, struct mms_tensor *a,
                                         int n_dims, const int64_t *ne, const size_t *nb, size_t offset) {
    struct mms_tensor *root = a->view_src ? a->view_src : a;
    size_t base = (a->view_src ? a->view_offs : 0) + offset;
    size_t extent, limit = mms_nbytes(root);
    struct mms_tensor *t;
    int i;

    t = mms__new_tensor_impl(ctx, who, a->type, n_dims, ne, a, offset);
    if (!t) return NULL;
    if (nb) for (i = 0; i < MMS_MAX_DIMS; i++) t->nb[i] = nb[i];
    extent = mms_nbytes(t);
    if (extent > 0) {
        if (base + extent > limit) {
            mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: view of %s at offset %zu spans %zu bytes, beyond the %zu bytes of its memory",
                           who, mms__tensor_desc(a).s, offset, extent, limit > base ? limit - base : 0);
            return NULL;
        }
    }
    t->op = op;
    t->src[0] = a;
    return t;
}

MMS_API struct mms_tensor *mms_view_tensor(struct mms_context *ctx, struct mms_tensor *src) {
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, "mms_view_tensor", src, src)) return NULL;
    t = mms__view_impl(ctx, "mms_view_tensor", MMS_OP_VIEW, src, MMS_MAX_DIMS, src->ne, src->nb, 0);
    if (t) mms_format_name(t, "%.50s (view)", src->name);
    return t;
}

MMS_API struct mms_tensor *mms_view_1d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, size_t offset) {
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, "mms_view_1d", a, a)) return NULL;
    t = mms__view_impl(ctx, "mms_view_1d", MMS_OP_VIEW, a, 1, &ne0, NULL, offset);
    if (t) mms_format_name(t, "%.50s (view)", a->name);
    return t;
}

MMS_API struct mms_tensor *mms_view_2d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1,
                                       size_t nb1, size_t offset) {
    int64_t ne[2];
    size_t nb[4];
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, "mms_view_2d", a, a)) return NULL;
    ne[0] = ne0; ne[1] = ne1;
    nb[0] = mms_type_size(a->type); nb[1] = nb1; nb[2] = nb1 * (size_t)ne1; nb[3] = nb[2];
    t = mms__view_impl(ctx, "mms_view_2d", MMS_OP_VIEW, a, 2, ne, nb, offset);
    if (t) mms_format_name(t, "%.50s (view)", a->name);
    return t;
}

MMS_API struct mms_tensor *mms_view_3d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                                       size_t nb1, size_t nb2, size_t offset) {
    int64_t ne[3];
    size_t nb[4];
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, "mms_view_3d", a, a)) return NULL;
    ne[0] = ne0; ne[1] = ne1; ne[2] = ne2;
    nb[0] = mms_type_size(a->type); nb[1] = nb1; nb[2] = nb2; nb[3] = nb2 * (size_t)ne2;
    t = mms__view_impl(ctx, "mms_view_3d", MMS_OP_VIEW, a, 3, ne, nb, offset);
    if (t) mms_format_name(t, "%.50s (view)", a->name);
    return t;
}

MMS_API struct mms_tensor *mms_view_4d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                                       int64_t ne3, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    int64_t ne[4];
    size_t nb[4];
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, "mms_view_4d", a, a)) return NULL;
    ne[0] = ne0; ne[1] = ne1; ne[2] = ne2; ne[3] = ne3;
    nb[0] = mms_type_size(a->type); nb[1] = nb1; nb[2] = nb2; nb[3] = nb3;
    t = mms__view_impl(ctx, "mms_view_4d", MMS_OP_VIEW, a, 4, ne, nb, offset);
    if (t) mms_format_name(t, "%.50s (view)", a->name);
    return t;
}

static struct mms_tensor *mms__reshape_impl(struct mms_context *ctx, const char *who, struct mms_tensor *a, int n_dims, const int64_t *ne) {
    struct mms_tensor *t;
    int64_t n = 1;
    char shape[96];
    int i;
    if (!mms__args_ok(ctx, who, a, a)) return NULL;
    for (i = 0; i < n_dims; i++) n *= ne[i];
    if (!mms_is_contiguous(a)) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: %s is not contiguous (use mms_cont first)", who, mms__tensor_desc(a).s);
        return NULL;
    }
    if (n != mms_nelements(a)) {
        int64_t full[4] = { 1, 1, 1, 1 };
        for (i = 0; i < n_dims; i++) full[i] = ne[i];
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: cannot reshape %s (%lld elements) to %s (%lld elements)", who,
                       mms__tensor_desc(a).s, (long long)mms_nelements(a), mms__shape_str(full, shape, sizeof shape), (long long)n);
        return NULL;
    }
    t = mms__view_impl(ctx, who, MMS_OP_RESHAPE, a, n_dims, ne, NULL, 0);
    if (t) mms_format_name(t, "%.50s (reshaped)", a->name);
    return t;
}

MMS_API struct mms_tensor *mms_reshape(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *shape_of) {
    if (!mms__args_ok(ctx, "mms_reshape", a, shape_of)) return NULL;
    return mms__reshape_impl(ctx, "mms_reshape", a, MMS_MAX_DIMS, shape_of->ne);
}
MMS_API struct mms_tensor *mms_reshape_1d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0) {
    return mms__reshape_impl(ctx, "mms_reshape_1d", a, 1, &ne0);
}
MMS_API struct mms_tensor *mms_reshape_2d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1) {
    int64_t ne[2];
    ne[0] = ne0; ne[1] = ne1;
    return mms__reshape_impl(ctx, "mms_reshape_2d", a, 2, ne);
}
MMS_API struct mms_tensor *mms_reshape_3d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2) {
    int64_t ne[3];
    ne[0] = ne0; ne[1] = ne1; ne[2] = ne2;
    return mms__reshape_impl(ctx, "mms_reshape_3d", a, 3, ne);
}
MMS_API struct mms_tensor *mms_reshape_4d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    int64_t ne[4];
    ne[0] = ne0; ne[1] = ne1; ne[2] = ne2; ne[3] = ne3;
    return mms__reshape_impl(ctx, "mms_reshape_4d", a, 4, ne);
}

static struct mms_tensor *mms__permute_impl(struct mms_context *ctx, const char *who, enum mms_op op, struct mms_tensor *a,
                                            int axis0, int axis1, int axis2, int axis3) {
    int axes[4];
    int64_t ne[4];
    size_t nb[4];
    struct mms_tensor *t;
    int i, seen = 0;
    if (!mms__args_ok(ctx, who, a, a)) return NULL;
    axes[0] = axis0; axes[1] = axis1; axes[2] = axis2; axes[3] = axis3;
    for (i = 0; i < 4; i++) {
        if (axes[i] < 0 || axes[i] > 3 || (seen & (1 << axes[i]))) {
            mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: axes (%d,%d,%d,%d) are not a permutation of 0..3",
                           who, axis0, axis1, axis2, axis3);
            return NULL;
        }
        seen |= 1 << axes[i];
    }
    for (i = 0; i < 4; i++) {
        ne[axes[i]] = a->ne[i];
        nb[axes[i]] = a->nb[i];
    }
    t = mms__view_impl(ctx, who, op, a, 4, ne, nb, 0);
    if (!t) return NULL;
    for (i = 0; i < 4; i++) mms__set_op_param_i32(t, i, axes[i]);
    return t;
}

MMS_API struct mms_tensor *mms_permute(struct mms_context *ctx, struct mms_tensor *a, int axis0, int axis1, int axis2, int axis3) {
    struct mms_tensor *t = mms__permute_impl(ctx, "mms_permute", MMS_OP_PERMUTE, a, axis0, axis1, axis2, axis3);
    if (t) mms_format_name(t, "%.50s (permuted)", a->name);
    return t;
}

MMS_API struct mms_tensor *mms_transpose(struct mms_context *ctx, struct mms_tensor *a) {
    struct mms_tensor *t = mms__permute_impl(ctx, "mms_transpose", MMS_OP_TRANSPOSE, a, 1, 0, 2, 3);
    if (t) mms_format_name(t, "%.50s (transposed)", a->name);
    return t;
}
/* ==== end src/core/tensor.c ==== */

/* ==== begin src/core/ops.c ==== */
/* >>ops ===========================================================================================
   Op constructors: check shapes and types, then describe the result. Nothing is computed here.
   Every error names the op, the offending tensors and their shapes. */

MMS_API const char *mms_op_name(enum mms_op op) {
    static const char *names[MMS_OP_COUNT] = {
        "NONE", "DUP", "ADD", "SUB", "MUL", "DIV", "SCALE", "SQR", "SQRT", "EXP", "TANH", "SILU", "GELU",
        "GELU_TANH", "SUM_ROWS", "ARGMAX", "NORM", "RMS_NORM", "MUL_MAT", "SOFT_MAX", "ROPE", "CONCAT", "PAD",
        "IM2COL", "GET_ROWS", "CPY", "CONT", "FLASH_ATTN_EXT", "VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE", "REPEAT",
        "SET_ROWS"
    };
    return (op >= 0 && op < MMS_OP_COUNT) ? names[op] : "INVALID";
}

MMS_API bool mms_op_is_view(enum mms_op op) {
    return op == MMS_OP_VIEW || op == MMS_OP_RESHAPE || op == MMS_OP_PERMUTE || op == MMS_OP_TRANSPOSE;
}

/* A new result tensor of op with up to three sources. */
static struct mms_tensor *mms__new_op(struct mms_context *ctx, const char *who, enum mms_op op, enum mms_type type,
                                      int n_dims, const int64_t *ne,
                                      struct mms_tensor *src0, struct mms_tensor *src1, struct mms_tensor *src2) {
    struct mms_tensor *t = mms__new_tensor_impl(ctx, who, type, n_dims, ne, NULL, 0);
    if (!t) return NULL;
    t->op = op;
    t->src[0] = src0;
    t->src[1] = src1;
    t->src[2] = src2;
    return t;
}

static bool mms__require_float(struct mms_context *ctx, const char *who, const char *role, const struct mms_tensor *t) {
    if (mms__type_is_float(t->type)) return true;
    mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: %s %s must be f32, f16 or bf16", who, role, mms__tensor_desc(t).s);
    return false;
}

static bool mms__require_type(struct mms_context *ctx, const char *who, const char *role, const struct mms_tensor *t,
                              enum mms_type type) {
    if (t->type == type) return true;
    mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: %s %s must be %s", who, role, mms__tensor_desc(t).s, mms_type_name(type));
    return false;
}

/* A block type (quantized) is read in whole rows: its blocks must be contiguous along ne[0]. */
static bool mms__require_whole_blocks(struct mms_context *ctx, const char *who, const char *role, const struct mms_tensor *t) {
    if (mms_blck_size(t->type) == 1 || t->nb[0] == mms_type_size(t->type)) return true;
    mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: %s %s is a %s view whose blocks are not contiguous along ne[0]",
                   who, role, mms__tensor_desc(t).s, mms_type_name(t->type));
    return false;
}

/* -- element-wise -- */

static struct mms_tensor *mms__binary(struct mms_context *ctx, const char *who, enum mms_op op,
                                      struct mms_tensor *a, struct mms_tensor *b) {
    if (!mms__args_ok(ctx, who, a, b)) return NULL;
    if (!mms__require_float(ctx, who, "a", a) || !mms__require_float(ctx, who, "b", b)) return NULL;
    if (!mms_can_repeat(b, a)) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG,
                       "%s: cannot broadcast b %s over a %s (each dimension of a must be a multiple of b's)",
                       who, mms__tensor_desc(b).s, mms__tensor_desc(a).s);
        return NULL;
    }
    return mms__new_op(ctx, who, op, a->type, MMS_MAX_DIMS, a->ne, a, b, NULL);
}

MMS_API struct mms_tensor *mms_add(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b) { return mms__binary(ctx, "mms_add", MMS_OP_ADD, a, b); }
MMS_API struct mms_tensor *mms_sub(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b) { return mms__binary(ctx, "mms_sub", MMS_OP_SUB, a, b); }
MMS_API struct mms_tensor *mms_mul(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b) { return mms__binary(ctx, "mms_mul", MMS_OP_MUL, a, b); }
MMS_API struct mms_tensor *mms_div(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b) { return mms__binary(ctx, "mms_div", MMS_OP_DIV, a, b); }

static struct mms_tensor *mms__unary(struct mms_context *ctx, const char *who, enum mms_op op, struct mms_tensor *a) {
    if (!mms__args_ok(ctx, who, a, a)) return NULL;
    if (!mms__require_float(ctx, who, "a", a)) return NULL;
    return mms__new_op(ctx, who, op, a->type, MMS_MAX_DIMS, a->ne, a, NULL, NULL);
}

MMS_API struct mms_tensor *mms_sqr(struct mms_context *ctx, struct mms_tensor *a)       { return mms__unary(ctx, "mms_sqr", MMS_OP_SQR, a); }
MMS_API struct mms_tensor *mms_sqrt(struct mms_context *ctx, struct mms_tensor *a)      { return mms__unary(ctx, "mms_sqrt", MMS_OP_SQRT, a); }
MMS_API struct mms_tensor *mms_exp(struct mms_context *ctx, struct mms_tensor *a)       { return mms__unary(ctx, "mms_exp", MMS_OP_EXP, a); }
MMS_API struct mms_tensor *mms_tanh(struct mms_context *ctx, struct mms_tensor *a)      { return mms__unary(ctx, "mms_tanh", MMS_OP_TANH, a); }
MMS_API struct mms_tensor *mms_silu(struct mms_context *ctx, struct mms_tensor *a)      { return mms__unary(ctx, "mms_silu", MMS_OP_SILU, a); }
MMS_API struct mms_tensor *mms_gelu(struct mms_context *ctx, struct mms_tensor *a)      { return mms__unary(ctx, "mms_gelu", MMS_OP_GELU, a); }
MMS_API struct mms_tensor *mms_gelu_tanh(struct mms_context *ctx, struct mms_tensor *a) { return mms__unary(ctx, "mms_gelu_tanh", MMS_OP_GELU_TANH, a); }

MMS_API struct mms_tensor *mms_scale(struct mms_context *ctx, struct mms_tensor *a, float s) {
    struct mms_tensor *t = mms__unary(ctx, "mms_scale", MMS_OP_SCALE, a);
    if (t) mms__set_op_param_f32(t, 0, s);
    return t;
}

/* -- reductions and norms -- */

MMS_API struct mms_tensor *mms_sum_rows(struct mms_context *ctx, struct mms_tensor *a) {
    int64_t ne[4];
    if (!mms__args_ok(ctx, "mms_sum_rows", a, a)) return NULL;
    if (!mms__require_float(ctx, "mms_sum_rows", "a", a)) return NULL;
    ne[0] = 1; ne[1] = a->ne[1]; ne[2] = a->ne[2]; ne[3] = a->ne[3];
    return mms__new_op(ctx, "mms_sum_rows", MMS_OP_SUM_ROWS, MMS_TYPE_F32, 4, ne, a, NULL, NULL);
}

MMS_API struct mms_tensor *mms_argmax(struct mms_context *ctx, struct mms_tensor *a) {
    int64_t ne[3];
    if (!mms__args_ok(ctx, "mms_argmax", a, a)) return NULL;
    if (!mms__require_float(ctx, "mms_argmax", "a", a)) return NULL;
    if (a->ne[0] < 1 || a->ne[0] > INT32_MAX) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_argmax: rows of %s must have 1..2^31-1 elements", mms__tensor_desc(a).s);
        return NULL;
    }
    ne[0] = a->ne[1]; ne[1] = a->ne[2]; ne[2] = a->ne[3];
    return mms__new_op(ctx, "mms_argmax", MMS_OP_ARGMAX, MMS_TYPE_I32, 3, ne, a, NULL, NULL);
}

static struct mms_tensor *mms__norm_impl(struct mms_context *ctx, const char *who, enum mms_op op, struct mms_tensor *a, float eps) {
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, who, a, a)) return NULL;
    if (!mms__require_float(ctx, who, "a", a)) return NULL;
    if (!(eps >= 0.0f)) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: eps must be >= 0, got %g", who, (double)eps);
        return NULL;
    }
    t = mms__new_op(ctx, who, op, a->type, MMS_MAX_DIMS, a->ne, a, NULL, NULL);
    if (t) mms__set_op_param_f32(t, 0, eps);
    return t;
}

MMS_API struct mms_tensor *mms_norm(struct mms_context *ctx, struct mms_tensor *a, float eps)     { return mms__norm_impl(ctx, "mms_norm", MMS_OP_NORM, a, eps); }
MMS_API struct mms_tensor *mms_rms_norm(struct mms_context *ctx, struct mms_tensor *a, float eps) { return mms__norm_impl(ctx, "mms_rms_norm", MMS_OP_RMS_NORM, a, eps); }

/* -- matrix product -- */

MMS_API struct mms_tensor *mms_mul_mat(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b) {
    int64_t ne[4];
    if (!mms__args_ok(ctx, "mms_mul_mat", a, b)) return NULL;
    if (!mms__type_is_quantized(a->type) && !mms__require_float(ctx, "mms_mul_mat", "a", a)) return NULL;
    if (!mms__require_float(ctx, "mms_mul_mat", "b", b) || !mms__require_whole_blocks(ctx, "mms_mul_mat", "a", a)) return NULL;
    if (a->ne[0] != b->ne[0] || b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG,
                       "mms_mul_mat: a %s and b %s do not fit (need a.ne[0] == b.ne[0] and b.ne[2], b.ne[3] multiples of a's)",
                       mms__tensor_desc(a).s, mms__tensor_desc(b).s);
        return NULL;
    }
    ne[0] = a->ne[1]; ne[1] = b->ne[1]; ne[2] = b->ne[2]; ne[3] = b->ne[3];
    return mms__new_op(ctx, "mms_mul_mat", MMS_OP_MUL_MAT, MMS_TYPE_F32, 4, ne, a, b, NULL);
}

/* -- softmax -- */

/* The mask shape rule shared by soft_max_ext and flash_attn_ext. */
static bool mms__check_mask(struct mms_context *ctx, const char *who, const struct mms_tensor *mask,
                            int64_t n_kv, int64_t n_rows, int64_t n2, int64_t n3) {
    if (mask->type != MMS_TYPE_F32 && mask->type != MMS_TYPE_F16) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: mask %s must be f32 or f16", who, mms__tensor_desc(mask).s);
        return false;
    }
    if (mask->ne[0] != n_kv || mask->ne[1] < n_rows || n2 % mask->ne[2] != 0 || n3 % mask->ne[3] != 0) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG,
                       "%s: mask %s does not fit scores [%lld,%lld,%lld,%lld] (need ne[0] == %lld, ne[1] >= %lld, "
                       "ne[2] and ne[3] dividing %lld and %lld)", who, mms__tensor_desc(mask).s,
                       (long long)n_kv, (long long)n_rows, (long long)n2, (long long)n3,
                       (long long)n_kv, (long long)n_rows, (long long)n2, (long long)n3);
        return false;
    }
    return true;
}

static struct mms_tensor *mms__soft_max_impl(struct mms_context *ctx, const char *who, struct mms_tensor *a, struct mms_tensor *mask,
                                             float scale, float max_bias) {
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, who, a, a)) return NULL;
    if (!mms__require_float(ctx, who, "a", a)) return NULL;
    if (mask && !mms__check_mask(ctx, who, mask, a->ne[0], a->ne[1], a->ne[2], a->ne[3])) return NULL;
    if (max_bias != 0.0f) {
        mms__ctx_error(ctx, MMS_ERR_UNSUPPORTED, "%s: max_bias %g (ALiBi) is not implemented; pass 0", who, (double)max_bias);
        return NULL;
    }
    t = mms__new_op(ctx, who, MMS_OP_SOFT_MAX, a->type, MMS_MAX_DIMS, a->ne, a, mask, NULL);
    if (!t) return NULL;
    mms__set_op_param_f32(t, 0, scale);
    mms__set_op_param_f32(t, 1, max_bias);
    return t;
}

MMS_API struct mms_tensor *mms_soft_max_ext(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *mask,
                                            float scale, float max_bias) {
    return mms__soft_max_impl(ctx, "mms_soft_max_ext", a, mask, scale, max_bias);
}

MMS_API struct mms_tensor *mms_soft_max(struct mms_context *ctx, struct mms_tensor *a) {
    return mms__soft_max_impl(ctx, "mms_soft_max", a, NULL, 1.0f, 0.0f);
}

/* -- rope -- */

MMS_API struct mms_tensor *mms_rope_ext(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *pos,
                                        struct mms_tensor *freq_factors, int n_dims, int mode, int n_ctx_orig,
                                        float freq_base, float freq_scale, float ext_factor, float attn_factor,
                                        float beta_fast, float beta_slow) {
    const char *who = "mms_rope_ext";
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, who, a, pos)) return NULL;
    if (!mms__require_float(ctx, who, "a", a) || !mms__require_type(ctx, who, "positions", pos, MMS_TYPE_I32)) return NULL;
    if (mode != MMS_ROPE_TYPE_NORMAL && mode != MMS_ROPE_TYPE_NEOX) {
        mms__ctx_error(ctx, MMS_ERR_UNSUPPORTED, "%s: mode %d is not supported (MMS_ROPE_TYPE_NORMAL or MMS_ROPE_TYPE_NEOX)", who, mode);
        return NULL;
    }
    if (n_dims <= 0 || n_dims % 2 != 0 || n_dims > a->ne[0]) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: n_dims %d must be even and in 2..%lld for a %s",
                       who, n_dims, (long long)a->ne[0], mms__tensor_desc(a).s);
        return NULL;
    }
    if (mms_n_dims(pos) != 1 || pos->ne[0] != a->ne[2]) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: positions %s must be 1-D with one entry per token of a %s (ne[2])",
                       who, mms__tensor_desc(pos).s, mms__tensor_desc(a).s);
        return NULL;
    }
    if (freq_factors && (!mms__require_type(ctx, who, "freq_factors", freq_factors, MMS_TYPE_F32) ||
                         mms_nelements(freq_factors) < n_dims / 2)) {
        if (ctx->status == MMS_OK)
            mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: freq_factors %s needs at least n_dims/2 = %d entries",
                           who, mms__tensor_desc(freq_factors).s, n_dims / 2);
        return NULL;
    }
    if (ext_factor != 0.0f) {
        mms__ctx_error(ctx, MMS_ERR_UNSUPPORTED, "%s: ext_factor %g (YaRN) is not implemented; pass 0", who, (double)ext_factor);
        return NULL;
    }
    if (!(freq_base > 0.0f) || !(freq_scale > 0.0f)) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: freq_base %g and freq_scale %g must be > 0", who, (double)freq_base, (double)freq_scale);
        return NULL;
    }
    t = mms__new_op(ctx, who, MMS_OP_ROPE, a->type, MMS_MAX_DIMS, a->ne, a, pos, freq_factors);
    if (!t) return NULL;
    mms__set_op_param_i32(t, 0, n_dims);
    mms__set_op_param_i32(t, 1, mode);
    mms__set_op_param_i32(t, 2, n_ctx_orig);
    mms__set_op_param_f32(t, 3, freq_base);
    mms__set_op_param_f32(t, 4, freq_scale);
    mms__set_op_param_f32(t, 5, ext_factor);
    mms__set_op_param_f32(t, 6, attn_factor);
    mms__set_op_param_f32(t, 7, beta_fast);
    mms__set_op_param_f32(t, 8, beta_slow);
    return t;
}

/* -- layout -- */

MMS_API struct mms_tensor *mms_concat(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b, int dim) {
    int64_t ne[4];
    struct mms_tensor *t;
    int i;
    if (!mms__args_ok(ctx, "mms_concat", a, b)) return NULL;
    if (dim < 0 || dim >= MMS_MAX_DIMS) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_concat: dim %d is not in 0..3", dim);
        return NULL;
    }
    if (a->type != b->type) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_concat: a %s and b %s have different types", mms__tensor_desc(a).s, mms__tensor_desc(b).s);
        return NULL;
    }
    for (i = 0; i < MMS_MAX_DIMS; i++) {
        if (i != dim && a->ne[i] != b->ne[i]) {
            mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_concat: a %s and b %s differ in dimension %d (only dim %d may differ)",
                           mms__tensor_desc(a).s, mms__tensor_desc(b).s, i, dim);
            return NULL;
        }
        ne[i] = a->ne[i] + (i == dim ? b->ne[i] : 0);
    }
    t = mms__new_op(ctx, "mms_concat", MMS_OP_CONCAT, a->type, 4, ne, a, b, NULL);
    if (t) mms__set_op_param_i32(t, 0, dim);
    return t;
}

MMS_API struct mms_tensor *mms_pad(struct mms_context *ctx, struct mms_tensor *a, int p0, int p1, int p2, int p3) {
    int64_t ne[4];
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, "mms_pad", a, a)) return NULL;
    if (!mms__require_float(ctx, "mms_pad", "a", a)) return NULL;
    if (p0 < 0 || p1 < 0 || p2 < 0 || p3 < 0) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_pad: padding (%d,%d,%d,%d) must not be negative", p0, p1, p2, p3);
        return NULL;
    }
    ne[0] = a->ne[0] + p0; ne[1] = a->ne[1] + p1; ne[2] = a->ne[2] + p2; ne[3] = a->ne[3] + p3;
    t = mms__new_op(ctx, "mms_pad", MMS_OP_PAD, a->type, 4, ne, a, NULL, NULL);
    if (!t) return NULL;
    mms__set_op_param_i32(t, 0, p0);
    mms__set_op_param_i32(t, 1, p1);
    mms__set_op_param_i32(t, 2, p2);
    mms__set_op_param_i32(t, 3, p3);
    return t;
}

MMS_API struct mms_tensor *mms_get_rows(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b) {
    int64_t ne[4];
    if (!mms__args_ok(ctx, "mms_get_rows", a, b)) return NULL;
    if (!mms__require_type(ctx, "mms_get_rows", "indices", b, MMS_TYPE_I32)) return NULL;
    if (!mms__type_is_float(a->type) && !mms__type_is_quantized(a->type) && a->type != MMS_TYPE_I32) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_get_rows: a %s has an unsupported type", mms__tensor_desc(a).s);
        return NULL;
    }
    if (!mms__require_whole_blocks(ctx, "mms_get_rows", "a", a)) return NULL;
    if (b->ne[3] != 1 || b->ne[1] != a->ne[2] || b->ne[2] != a->ne[3]) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_get_rows: indices %s do not fit a %s (need [n, a.ne[2], a.ne[3]])",
                       mms__tensor_desc(b).s, mms__tensor_desc(a).s);
        return NULL;
    }
    ne[0] = a->ne[0]; ne[1] = b->ne[0]; ne[2] = b->ne[1]; ne[3] = b->ne[2];
    return mms__new_op(ctx, "mms_get_rows", MMS_OP_GET_ROWS, a->type == MMS_TYPE_I32 ? MMS_TYPE_I32 : MMS_TYPE_F32, 4, ne, a, b, NULL);
}

MMS_API struct mms_tensor *mms_set_rows(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b, struct mms_tensor *rows) {
    const char *who = "mms_set_rows";
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, who, a, b) || !mms__args_ok(ctx, who, rows, rows)) return NULL;
    if (!mms__require_float(ctx, who, "a", a) || !mms__require_float(ctx, who, "b", b) ||
        !mms__require_type(ctx, who, "rows", rows, MMS_TYPE_I32)) return NULL;
    if (b->ne[0] != a->ne[0] || b->ne[2] != a->ne[2] || b->ne[3] != a->ne[3] || rows->ne[0] != b->ne[1] || mms_nelements(rows) != b->ne[1]) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: a %s, b %s and rows %s do not fit (a [ne0, R, ne2, ne3], b [ne0, n, ne2, ne3], rows [n])",
                       who, mms__tensor_desc(a).s, mms__tensor_desc(b).s, mms__tensor_desc(rows).s);
        return NULL;
    }
    t = mms__new_tensor_impl(ctx, who, a->type, MMS_MAX_DIMS, a->ne, a, 0);   /* shares a's memory */
    if (!t) return NULL;
    memcpy(t->nb, a->nb, sizeof t->nb);
    t->op = MMS_OP_SET_ROWS;
    t->src[0] = b;
    t->src[1] = rows;
    t->src[2] = a;
    mms_format_name(t, "%.50s (rows set)", a->name);
    return t;
}

MMS_API struct mms_tensor *mms_repeat(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b) {
    if (!mms__args_ok(ctx, "mms_repeat", a, b)) return NULL;
    if (!mms__type_valid(a->type) || !mms_can_repeat(a, b)) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_repeat: %s cannot be repeated over the shape of %s (each dimension must divide)",
                       mms__tensor_desc(a).s, mms__tensor_desc(b).s);
        return NULL;
    }
    return mms__new_op(ctx, "mms_repeat", MMS_OP_REPEAT, a->type, MMS_MAX_DIMS, b->ne, a, NULL, NULL);
}

/* -- copies -- */

/* Float to float, and between a float type and a block type (quantize, dequantize). */
static bool mms__can_convert(enum mms_type from, enum mms_type to) {
    return (mms__type_is_float(from) && (mms__type_is_float(to) || mms__type_is_quantized(to))) ||
           (mms__type_is_quantized(from) && mms__type_is_float(to));
}

MMS_API struct mms_tensor *mms_cpy(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b) {
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, "mms_cpy", a, b)) return NULL;
    if (mms_nelements(a) != mms_nelements(b)) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_cpy: a %s and b %s have different numbers of elements",
                       mms__tensor_desc(a).s, mms__tensor_desc(b).s);
        return NULL;
    }
    if (a->type != b->type && !mms__can_convert(a->type, b->type)) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_cpy: cannot convert a %s to the type of b %s",
                       mms__tensor_desc(a).s, mms__tensor_desc(b).s);
        return NULL;
    }
    if ((mms_blck_size(a->type) > 1 || mms_blck_size(b->type) > 1) &&
        (a->ne[0] != b->ne[0] || a->nb[0] != mms_type_size(a->type) || b->nb[0] != mms_type_size(b->type))) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_cpy: a %s and b %s: to or from a block type, rows must be contiguous and of the same length",
                       mms__tensor_desc(a).s, mms__tensor_desc(b).s);
        return NULL;
    }
    /* the result shares b's memory: writing it is the copy */
    t = mms__new_tensor_impl(ctx, "mms_cpy", b->type, MMS_MAX_DIMS, b->ne, b, 0);
    if (!t) return NULL;
    memcpy(t->nb, b->nb, sizeof t->nb);
    t->op = MMS_OP_CPY;
    t->src[0] = a;
    t->src[1] = b;
    mms_format_name(t, "%.50s (copy)", b->name);
    return t;
}

static struct mms_tensor *mms__cont_impl(struct mms_context *ctx, const char *who, enum mms_op op, struct mms_tensor *a,
                                         int n_dims, const int64_t *ne) {
    struct mms_tensor *t;
    int64_t n = 1;
    int i;
    if (!mms__args_ok(ctx, who, a, a)) return NULL;
    for (i = 0; i < n_dims; i++) n *= ne[i];
    if (n != mms_nelements(a)) {
        char shape[96];
        int64_t full[4] = { 1, 1, 1, 1 };
        for (i = 0; i < n_dims; i++) full[i] = ne[i];
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: %s has %lld elements, the shape %s has %lld", who, mms__tensor_desc(a).s,
                       (long long)mms_nelements(a), mms__shape_str(full, shape, sizeof shape), (long long)n);
        return NULL;
    }
    t = mms__new_op(ctx, who, op, a->type, n_dims, ne, a, NULL, NULL);
    if (t) mms_format_name(t, "%.50s (cont)", a->name);
    return t;
}

MMS_API struct mms_tensor *mms_dup(struct mms_context *ctx, struct mms_tensor *a) {
    if (!mms__args_ok(ctx, "mms_dup", a, a)) return NULL;
    return mms__cont_impl(ctx, "mms_dup", MMS_OP_DUP, a, 4, a->ne);
}
MMS_API struct mms_tensor *mms_cont(struct mms_context *ctx, struct mms_tensor *a) {
    if (!mms__args_ok(ctx, "mms_cont", a, a)) return NULL;
    return mms__cont_impl(ctx, "mms_cont", MMS_OP_CONT, a, 4, a->ne);
}
MMS_API struct mms_tensor *mms_cast(struct mms_context *ctx, struct mms_tensor *a, enum mms_type type) {
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, "mms_cast", a, a)) return NULL;
    if (!mms__type_is_float(a->type) || !mms__type_is_float(type)) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_cast: %s to %s: both must be f32, f16 or bf16", mms__tensor_desc(a).s, mms_type_name(type));
        return NULL;
    }
    t = mms__new_op(ctx, "mms_cast", MMS_OP_CONT, type, 4, a->ne, a, NULL, NULL);
    if (t) mms_format_name(t, "%.50s (%s)", a->name, mms_type_name(type));
    return t;
}
MMS_API struct mms_tensor *mms_cont_2d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1) {
    int64_t ne[2];
    ne[0] = ne0; ne[1] = ne1;
    return mms__cont_impl(ctx, "mms_cont_2d", MMS_OP_CONT, a, 2, ne);
}
MMS_API struct mms_tensor *mms_cont_3d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2) {
    int64_t ne[3];
    ne[0] = ne0; ne[1] = ne1; ne[2] = ne2;
    return mms__cont_impl(ctx, "mms_cont_3d", MMS_OP_CONT, a, 3, ne);
}
MMS_API struct mms_tensor *mms_cont_4d(struct mms_context *ctx, struct mms_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    int64_t ne[4];
    ne[0] = ne0; ne[1] = ne1; ne[2] = ne2; ne[3] = ne3;
    return mms__cont_impl(ctx, "mms_cont_4d", MMS_OP_CONT, a, 4, ne);
}

/* -- convolution -- */

static int64_t mms__conv_out_size(int64_t in, int64_t k, int s, int p, int d) {
    return (in + 2 * (int64_t)p - (int64_t)d * (k - 1) - 1) / s + 1;
}

MMS_API struct mms_tensor *mms_im2col(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b,
                                      int s0, int s1, int p0, int p1, int d0, int d1, bool is_2D, enum mms_type dst_type) {
    const char *who = "mms_im2col";
    int64_t ne[4];
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, who, a, b)) return NULL;
    if (!mms__require_float(ctx, who, "input", b)) return NULL;
    if (dst_type != MMS_TYPE_F32 && dst_type != MMS_TYPE_F16) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: dst_type must be f32 or f16, got %s", who, mms_type_name(dst_type));
        return NULL;
    }
    if (s0 < 1 || s1 < 1 || d0 < 1 || d1 < 1 || p0 < 0 || p1 < 0) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: strides and dilations must be >= 1 and paddings >= 0 "
                       "(got s %d,%d p %d,%d d %d,%d)", who, s0, s1, p0, p1, d0, d1);
        return NULL;
    }
    if (is_2D) {
        int64_t ow = mms__conv_out_size(b->ne[0], a->ne[0], s0, p0, d0);
        int64_t oh = mms__conv_out_size(b->ne[1], a->ne[1], s1, p1, d1);
        if (a->ne[2] != b->ne[2] || ow < 1 || oh < 1) {
            mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: kernel %s [KW,KH,IC,OC] does not fit input %s [W,H,IC,N] "
                           "(channels must match and the output must not be empty)", who, mms__tensor_desc(a).s, mms__tensor_desc(b).s);
            return NULL;
        }
        ne[0] = a->ne[2] * a->ne[1] * a->ne[0]; ne[1] = ow; ne[2] = oh; ne[3] = b->ne[3];
    } else {
        int64_t ow = mms__conv_out_size(b->ne[0], a->ne[0], s0, p0, d0);
        if (a->ne[1] != b->ne[1] || ow < 1 || b->ne[3] != 1) {
            mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: kernel %s [KW,IC,OC] does not fit input %s [W,IC,N] "
                           "(channels must match and the output must not be empty)", who, mms__tensor_desc(a).s, mms__tensor_desc(b).s);
            return NULL;
        }
        ne[0] = a->ne[1] * a->ne[0]; ne[1] = ow; ne[2] = b->ne[2]; ne[3] = 1;
    }
    t = mms__new_op(ctx, who, MMS_OP_IM2COL, dst_type, 4, ne, a, b, NULL);
    if (!t) return NULL;
    mms__set_op_param_i32(t, 0, s0);
    mms__set_op_param_i32(t, 1, s1);
    mms__set_op_param_i32(t, 2, p0);
    mms__set_op_param_i32(t, 3, p1);
    mms__set_op_param_i32(t, 4, d0);
    mms__set_op_param_i32(t, 5, d1);
    mms__set_op_param_i32(t, 6, is_2D ? 1 : 0);
    return t;
}

MMS_API struct mms_tensor *mms_conv_2d(struct mms_context *ctx, struct mms_tensor *a, struct mms_tensor *b,
                                       int s0, int s1, int p0, int p1, int d0, int d1) {
    struct mms_tensor *cols, *kernel, *prod;
    if (!mms__args_ok(ctx, "mms_conv_2d", a, b)) return NULL;
    if (!mms__require_float(ctx, "mms_conv_2d", "kernel", a)) return NULL;
    if (a->ne[2] != b->ne[2]) {   /* checked here too, so the error names the call the user made */
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "mms_conv_2d: kernel %s [KW,KH,IC,OC] and input %s [W,H,IC,N] have different "
                       "channel counts", mms__tensor_desc(a).s, mms__tensor_desc(b).s);
        return NULL;
    }
    cols = mms_im2col(ctx, a, b, s0, s1, p0, p1, d0, d1, true, MMS_TYPE_F32);        /* [K, OW, OH, N] */
    if (!cols) return NULL;
    kernel = mms_is_contiguous(a) ? a : mms_cont(ctx, a);
    cols = mms_reshape_2d(ctx, cols, cols->ne[0], cols->ne[1] * cols->ne[2] * cols->ne[3]);
    kernel = mms_reshape_2d(ctx, kernel, a->ne[0] * a->ne[1] * a->ne[2], a->ne[3]);  /* [K, OC] */
    prod = mms_mul_mat(ctx, cols, kernel);                                           /* [OW*OH*N, OC] */
    if (!prod) return NULL;
    prod = mms_reshape_4d(ctx, prod, mms__conv_out_size(b->ne[0], a->ne[0], s0, p0, d0),
                          mms__conv_out_size(b->ne[1], a->ne[1], s1, p1, d1), b->ne[3], a->ne[3]);
    return mms_cont(ctx, mms_permute(ctx, prod, 0, 1, 3, 2));                         /* [OW, OH, OC, N] */
}

/* -- attention -- */

static struct mms_tensor *mms__flash_attn_impl(struct mms_context *ctx, const char *who, struct mms_tensor *q, struct mms_tensor *k,
                                               struct mms_tensor *v, struct mms_tensor *mask, struct mms_tensor *mask_rows,
                                               float scale, float max_bias, float logit_softcap) {
    int64_t ne[4];
    struct mms_tensor *t;
    if (!mms__args_ok(ctx, who, q, k)) return NULL;
    if (!v) {
        if (ctx->status == MMS_OK) mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: argument v is NULL", who);
        return NULL;
    }
    if (!mms__require_float(ctx, who, "q", q) || !mms__require_float(ctx, who, "k", k) || !mms__require_float(ctx, who, "v", v)) return NULL;
    if (k->type != v->type) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: k %s and v %s must have the same type", who, mms__tensor_desc(k).s, mms__tensor_desc(v).s);
        return NULL;
    }
    if (q->ne[0] != k->ne[0] || k->ne[1] != v->ne[1] || k->ne[2] != v->ne[2] || q->ne[2] % k->ne[2] != 0 ||
        q->ne[3] != k->ne[3] || v->ne[3] != k->ne[3]) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: q %s, k %s and v %s do not fit (q [D,n_q,H,B], k [D,n_kv,Hkv,B], "
                       "v [Dv,n_kv,Hkv,B] with H a multiple of Hkv)", who, mms__tensor_desc(q).s, mms__tensor_desc(k).s, mms__tensor_desc(v).s);
        return NULL;
    }
    if (mask_rows) {                 /* every query row picks its mask row: the mask needs only those */
        if (!mask) {
            mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: mask rows %s without a mask", who, mms__tensor_desc(mask_rows).s);
            return NULL;
        }
        if (!mms__require_type(ctx, who, "mask rows", mask_rows, MMS_TYPE_I32)) return NULL;
        if (mask_rows->ne[0] != q->ne[1] || mms_nelements(mask_rows) != q->ne[1]) {
            mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: mask rows %s must be [n_q] = [%lld]", who, mms__tensor_desc(mask_rows).s, (long long)q->ne[1]);
            return NULL;
        }
    }
    if (mask && !mms__check_mask(ctx, who, mask, k->ne[1], mask_rows ? 1 : q->ne[1], q->ne[2], q->ne[3])) return NULL;
    if (max_bias != 0.0f) {
        mms__ctx_error(ctx, MMS_ERR_UNSUPPORTED, "%s: max_bias %g (ALiBi) is not implemented; pass 0", who, (double)max_bias);
        return NULL;
    }
    if (!(logit_softcap >= 0.0f)) {
        mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: logit_softcap must be >= 0, got %g", who, (double)logit_softcap);
        return NULL;
    }
    ne[0] = v->ne[0]; ne[1] = q->ne[2]; ne[2] = q->ne[1]; ne[3] = q->ne[3];
    t = mms__new_op(ctx, who, MMS_OP_FLASH_ATTN_EXT, MMS_TYPE_F32, 4, ne, q, k, v);
    if (!t) return NULL;
    t->src[3] = mask;
    t->src[4] = mask_rows;
    mms__set_op_param_f32(t, 0, scale);
    mms__set_op_param_f32(t, 1, max_bias);
    mms__set_op_param_f32(t, 2, logit_softcap);
    return t;
}

MMS_API struct mms_tensor *mms_flash_attn_ext(struct mms_context *ctx, struct mms_tensor *q, struct mms_tensor *k,
                                              struct mms_tensor *v, struct mms_tensor *mask,
                                              float scale, float max_bias, float logit_softcap) {
    return mms__flash_attn_impl(ctx, "mms_flash_attn_ext", q, k, v, mask, NULL, scale, max_bias, logit_softcap);
}

MMS_API struct mms_tensor *mms_flash_attn_ext_mask_rows(struct mms_context *ctx, struct mms_tensor *q, struct mms_tensor *k,
                                                        struct mms_tensor *v, struct mms_tensor *mask, struct mms_tensor *mask_rows,
                                                        float scale, float max_bias, float logit_softcap) {
    const char *who = "mms_flash_attn_ext_mask_rows";
    if (!mask_rows) {
        if (ctx && ctx->status == MMS_OK) mms__ctx_error(ctx, MMS_ERR_INVALID_ARG, "%s: argument mask_rows is NULL", who);
        return NULL;
    }
    return mms__flash_attn_impl(ctx, who, q, k, v, mask, mask_rows, scale, max_bias, logit_softcap);
}
/* ==== end src/core/ops.c ==== */

/* ==== begin src/core/graph.c ==== */
/* >>graph =========================================================================================
   Graphs: the nodes needed for some outputs in execution order (depth first, sources in order),
   and the leafs they read. Arrays grow; the graph is freed with its context. */

struct mms_cgraph {
    struct mms_context *ctx;
    struct mms_cgraph  *next_in_ctx;
    uint64_t            id;

    struct mms_tensor **nodes;
    int                 n_nodes, cap_nodes;
    struct mms_tensor **leafs;
    int                 n_leafs, cap_leafs;
    struct mms__ptrmap  visited;     /* every tensor already in nodes or leafs */

    enum mms_status     status;
    char                error[MMS__ERROR_MAX];
    char                name[MMS_MAX_NAME];
};

static volatile uint64_t mms__graph_id_counter = 0;

static void mms__graph_release(struct mms_cgraph *g) {
    MMS_FREE(g->nodes);
    MMS_FREE(g->leafs);
    mms__ptrmap_free(&g->visited);
    g->nodes = g->leafs = NULL;
    g->n_nodes = g->cap_nodes = g->n_leafs = g->cap_leafs = 0;
}

static void mms__graph_release_all(struct mms_context *ctx) {
    struct mms_cgraph *g;
    for (g = ctx->graphs; g; g = g->next_in_ctx) mms__graph_release(g);
    ctx->graphs = NULL;
}

MMS_API size_t mms_graph_overhead(void) { return sizeof(struct mms_cgraph) + MMS__OBJ_ALIGN; }

MMS_API struct mms_cgraph *mms_new_graph(struct mms_context *ctx) {
    struct mms_cgraph *g;
    if (!ctx) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_new_graph: context is NULL"); return NULL; }
    g = (struct mms_cgraph *)mms__ctx_alloc(ctx, sizeof *g, MMS__OBJ_ALIGN);
    if (!g) return NULL;
    memset(g, 0, sizeof *g);
    g->ctx = ctx;
    g->id = mms__atomic_next_u64(&mms__graph_id_counter);
    g->next_in_ctx = ctx->graphs;
    ctx->graphs = g;
    return g;
}

static void mms__graph_fail(struct mms_cgraph *g, enum mms_status status, const char *fmt, ...) MMS_PRINTF(3, 4);
static void mms__graph_fail(struct mms_cgraph *g, enum mms_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mms__set_errorv(status, fmt, ap);
    va_end(ap);
    if (g->status == MMS_OK) {
        g->status = status;
        mms__copy_str(g->error, sizeof g->error, mms__last_message);
    }
}

static bool mms__push_tensor(struct mms_tensor ***arr, int *n, int *cap, struct mms_tensor *t) {
    if (*n == *cap) {
        int new_cap = *cap ? *cap * 2 : 64;
        struct mms_tensor **p = (struct mms_tensor **)MMS_REALLOC(*arr, (size_t)new_cap * sizeof *p);
        if (!p) return false;
        *arr = p;
        *cap = new_cap;
    }
    (*arr)[(*n)++] = t;
    return true;
}

struct mms__visit { struct mms_tensor *t; int next_src; };

/* Leafs: tensors without an op, and kept tensors (persistent, not views) other than the tensor
   being expanded: a graph that expands a kept tensor computes it, any other graph reads its kept
   value. (Whether it has been computed yet does not matter here; allocation checks that.) */
static bool mms__is_leaf(const struct mms_tensor *t, const struct mms_tensor *expanded) {
    return t->op == MMS_OP_NONE || (t != expanded && (t->flags & MMS_TENSOR_FLAG_PERSISTENT) && !t->view_src);
}

MMS_API void mms_build_forward_expand(struct mms_cgraph *g, struct mms_tensor *tensor) {
    struct mms__visit *stack = NULL;
    int depth = 0, cap = 0;
    bool oom = false;

    if (!g) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_build_forward_expand: graph is NULL"); return; }
    if (!tensor) {
        mms__graph_fail(g, MMS_ERR_INVALID_ARG, "mms_build_forward_expand: tensor is NULL%s%s",
                        g->ctx->status != MMS_OK ? "; an op before failed: " : "", g->ctx->status != MMS_OK ? g->ctx->error : "");
        return;
    }
    if (mms__ptrmap_get(&g->visited, (uint64_t)(uintptr_t)tensor, NULL)) return;

    /* iterative depth-first post-order: deep chains cannot overflow the C stack */
    #define MMS__VISIT_PUSH(x) do {                                                                 \
        if (depth == cap) {                                                                         \
            int nc = cap ? cap * 2 : 64;                                                            \
            struct mms__visit *ns = (struct mms__visit *)MMS_REALLOC(stack, (size_t)nc * sizeof *ns); \
            if (!ns) { oom = true; break; }                                                         \
            stack = ns; cap = nc;                                                                   \
        }                                                                                           \
        if (!mms__ptrmap_put(&g->visited, (uint64_t)(uintptr_t)(x), (void *)1)) { oom = true; break; } \
        stack[depth].t = (x); stack[depth].next_src = 0; depth++;                                   \
    } while (0)

    MMS__VISIT_PUSH(tensor);
    while (depth > 0 && !oom) {
        struct mms__visit *top = &stack[depth - 1];
        if (top->next_src < MMS_MAX_SRC && !mms__is_leaf(top->t, tensor)) {
            struct mms_tensor *s = top->t->src[top->next_src++];
            if (s && !mms__ptrmap_get(&g->visited, (uint64_t)(uintptr_t)s, NULL)) MMS__VISIT_PUSH(s);
            continue;
        }
        {
            struct mms_tensor *t = top->t;
            bool leaf = mms__is_leaf(t, tensor);
            depth--;
            if (!(leaf ? mms__push_tensor(&g->leafs, &g->n_leafs, &g->cap_leafs, t)
                       : mms__push_tensor(&g->nodes, &g->n_nodes, &g->cap_nodes, t))) oom = true;
        }
    }
    #undef MMS__VISIT_PUSH
    MMS_FREE(stack);
    if (oom) mms__graph_fail(g, MMS_ERR_OOM, "mms_build_forward_expand: out of host memory growing the graph");
}

MMS_API int mms_graph_n_nodes(const struct mms_cgraph *g) { return g ? g->n_nodes : 0; }
MMS_API int mms_graph_n_leafs(const struct mms_cgraph *g) { return g ? g->n_leafs : 0; }

MMS_API struct mms_tensor *mms_graph_node(const struct mms_cgraph *g, int i) {
    if (!g) return NULL;
    if (i < 0) i += g->n_nodes;
    return (i >= 0 && i < g->n_nodes) ? g->nodes[i] : NULL;
}

MMS_API struct mms_tensor *mms_graph_leaf(const struct mms_cgraph *g, int i) {
    if (!g) return NULL;
    if (i < 0) i += g->n_leafs;
    return (i >= 0 && i < g->n_leafs) ? g->leafs[i] : NULL;
}

MMS_API struct mms_tensor *mms_graph_get_tensor(const struct mms_cgraph *g, const char *name) {
    int i;
    if (!g || !name) return NULL;
    for (i = 0; i < g->n_nodes; i++) if (strcmp(g->nodes[i]->name, name) == 0) return g->nodes[i];
    for (i = 0; i < g->n_leafs; i++) if (strcmp(g->leafs[i]->name, name) == 0) return g->leafs[i];
    return NULL;
}

MMS_API uint64_t        mms_graph_id(const struct mms_cgraph *g)     { return g ? g->id : 0; }
MMS_API void            mms_graph_set_name(struct mms_cgraph *g, const char *name) { if (g) mms__copy_str(g->name, sizeof g->name, name ? name : ""); }
MMS_API const char     *mms_graph_get_name(const struct mms_cgraph *g) { return g ? g->name : ""; }

/* A graph of exactly these nodes, in this order, without walking sources (the scheduler's splits
   and its allocation graph). Leafs are given separately. */
static struct mms_cgraph *mms__graph_from_lists(struct mms_context *ctx, struct mms_tensor **nodes, int n_nodes,
                                                struct mms_tensor **leafs, int n_leafs) {
    struct mms_cgraph *g = mms_new_graph(ctx);
    int i;
    if (!g) return NULL;
    for (i = 0; i < n_nodes; i++)
        if (!mms__push_tensor(&g->nodes, &g->n_nodes, &g->cap_nodes, nodes[i])) { mms__graph_fail(g, MMS_ERR_OOM, "out of host memory"); break; }
    for (i = 0; i < n_leafs; i++)
        if (!mms__push_tensor(&g->leafs, &g->n_leafs, &g->cap_leafs, leafs[i])) { mms__graph_fail(g, MMS_ERR_OOM, "out of host memory"); break; }
    return g;
}
MMS_API enum mms_status mms_graph_status(const struct mms_cgraph *g) { return g ? g->status : MMS_ERR_INVALID_ARG; }
MMS_API const char     *mms_graph_error(const struct mms_cgraph *g)  { return g ? g->error : "no graph"; }

static const char *mms__flags_str(int32_t flags, char *buf) {
    buf[0] = flags & MMS_TENSOR_FLAG_INPUT ? 'i' : '-';
    buf[1] = flags & MMS_TENSOR_FLAG_OUTPUT ? 'o' : '-';
    buf[2] = flags & MMS_TENSOR_FLAG_PERSISTENT ? 'p' : '-';
    buf[3] = '\0';
    return buf;
}

/* Position of t in the graph, as "N12" or "L3", or "?" if absent (for printing sources). */
static void mms__graph_ref(const struct mms_cgraph *g, const struct mms_tensor *t, char *buf, size_t size) {
    int i;
    for (i = 0; i < g->n_nodes; i++) if (g->nodes[i] == t) { snprintf(buf, size, "N%d", i); return; }
    for (i = 0; i < g->n_leafs; i++) if (g->leafs[i] == t) { snprintf(buf, size, "L%d", i); return; }
    snprintf(buf, size, "?");
}

MMS_API void mms_graph_print(const struct mms_cgraph *g, FILE *out) {
    char shape[96], flags[4], ref[32];
    int i, j;
    if (!out) out = stdout;
    if (!g) { fprintf(out, "(no graph)\n"); return; }
    fprintf(out, "graph #%llu%s%s%s: %d nodes, %d leafs%s%s\n", (unsigned long long)g->id, g->name[0] ? " '" : "", g->name,
            g->name[0] ? "'" : "", g->n_nodes, g->n_leafs,
            g->status != MMS_OK ? ", build failed: " : "", g->status != MMS_OK ? g->error : "");
    fprintf(out, "  %-6s %-15s %-5s %-28s %-3s %-20s %s\n", "id", "op", "type", "ne", "fl", "sources", "name");
    for (i = 0; i < g->n_nodes; i++) {
        const struct mms_tensor *t = g->nodes[i];
        char srcs[128] = "";
        size_t len = 0;
        for (j = 0; j < MMS_MAX_SRC; j++) {
            if (!t->src[j]) continue;
            mms__graph_ref(g, t->src[j], ref, sizeof ref);
            len += (size_t)snprintf(srcs + len, len < sizeof srcs ? sizeof srcs - len : 0, "%s%s", len ? "," : "", ref);
            if (len >= sizeof srcs) break;
        }
        fprintf(out, "  N%-5d %-15s %-5s %-28s %-3s %-20s %s\n", i, mms_op_name(t->op), mms_type_name(t->type),
                mms__shape_str(t->ne, shape, sizeof shape), mms__flags_str(t->flags, flags), srcs, t->name);
    }
    for (i = 0; i < g->n_leafs; i++) {
        const struct mms_tensor *t = g->leafs[i];
        fprintf(out, "  L%-5d %-15s %-5s %-28s %-3s %-20s %s\n", i, "LEAF", mms_type_name(t->type),
                mms__shape_str(t->ne, shape, sizeof shape), mms__flags_str(t->flags, flags), "", t->name);
    }
}

/* Names go into quoted dot labels: keep them printable and free of quotes and backslashes. */
static void mms__dot_escape(const char *in, char *out, size_t size) {
    size_t i = 0;
    for (; *in && i + 1 < size; in++) out[i++] = (*in == '"' || *in == '\\' || (unsigned char)*in < 32) ? '_' : *in;
    out[i] = '\0';
}

MMS_API enum mms_status mms_graph_dump_dot(const struct mms_cgraph *g, const char *path) {
    FILE *f;
    char shape[96], name[MMS_MAX_NAME];
    int i, j;
    if (!g || !path) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_graph_dump_dot: graph and path are required");
    f = mms__fopen(path, "w");
    if (!f) return mms_set_error(MMS_ERR_IO, "mms_graph_dump_dot: cannot write '%s'", path);
    fprintf(f, "digraph mmsched {\n  rankdir = TB;\n  node [fontname = \"monospace\", fontsize = 10];\n");
    for (i = 0; i < g->n_leafs; i++) {
        const struct mms_tensor *t = g->leafs[i];
        mms__dot_escape(t->name, name, sizeof name);
        fprintf(f, "  t%p [shape = box, style = filled, fillcolor = \"%s\", label = \"%s\\n%s %s\"];\n", (const void *)t,
                t->flags & MMS_TENSOR_FLAG_INPUT ? "#b3d9ff" : "#eeeeee", name[0] ? name : "(leaf)",
                mms_type_name(t->type), mms__shape_str(t->ne, shape, sizeof shape));
    }
    for (i = 0; i < g->n_nodes; i++) {
        const struct mms_tensor *t = g->nodes[i];
        const char *fill = t->flags & MMS_TENSOR_FLAG_OUTPUT ? "#ffd59e" : mms_op_is_view(t->op) ? "#ffffff" : "#d5f5d5";
        mms__dot_escape(t->name, name, sizeof name);
        fprintf(f, "  t%p [shape = %s, style = \"filled%s\", fillcolor = \"%s\", label = \"N%d %s\\n%s\\n%s %s\"];\n",
                (const void *)t, mms_op_is_view(t->op) ? "ellipse" : "box", mms_op_is_view(t->op) ? ",dashed" : "", fill,
                i, mms_op_name(t->op), name, mms_type_name(t->type), mms__shape_str(t->ne, shape, sizeof shape));
        for (j = 0; j < MMS_MAX_SRC; j++)
            if (t->src[j]) fprintf(f, "  t%p -> t%p [label = \"%d\"];\n", (const void *)t->src[j], (const void *)t, j);
    }
    fprintf(f, "}\n");
    if (fclose(f) != 0) return mms_set_error(MMS_ERR_IO, "mms_graph_dump_dot: error writing '%s'", path);
    return MMS_OK;
}
/* ==== end src/core/graph.c ==== */

/* ==== begin src/backend/buffer.c ==== */
/* >>buffer ========================================================================================
   Buffer types and buffers, and the registry of live buffers. Every buffer gets a process-unique
   uid and a generation; the lifetime section below records both in each tensor placed in it, so a
   freed buffer or memory handed out again is detected, not silently reused. */

static volatile uint64_t  mms__buffer_uid_counter = 0;
static struct mms__ptrmap mms__live_buffers;   /* uid -> buffer, under the global lock */

static mms_backend_buffer_t mms__live_buffer(uint64_t uid) {
    mms_backend_buffer_t b;
    mms__global_lock();
    b = (mms_backend_buffer_t)mms__ptrmap_get(&mms__live_buffers, uid, NULL);
    mms__global_unlock();
    return b;
}

/* -- buffer types -- */

MMS_API const char *mms_backend_buft_name(mms_backend_buffer_type_t buft) { return buft ? buft->iface.get_name(buft) : "(none)"; }

MMS_API mms_backend_buffer_t mms_backend_buft_alloc_buffer(mms_backend_buffer_type_t buft, size_t size) {
    if (!buft) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_buft_alloc_buffer: buffer type is NULL"); return NULL; }
    return buft->iface.alloc_buffer(buft, size);
}
MMS_API size_t mms_backend_buft_get_alignment(mms_backend_buffer_type_t buft) { return buft->iface.get_alignment(buft); }
MMS_API size_t mms_backend_buft_get_max_size(mms_backend_buffer_type_t buft) {
    return buft->iface.get_max_size ? buft->iface.get_max_size(buft) : SIZE_MAX;
}
MMS_API size_t mms_backend_buft_get_alloc_size(mms_backend_buffer_type_t buft, const struct mms_tensor *t) {
    return buft->iface.get_alloc_size ? buft->iface.get_alloc_size(buft, t) : mms_nbytes(t);
}
MMS_API bool mms_backend_buft_is_host(mms_backend_buffer_type_t buft) { return buft->iface.is_host && buft->iface.is_host(buft); }

/* -- buffers -- */

MMS_API mms_backend_buffer_t mms_backend_buffer_init(mms_backend_buffer_type_t buft, struct mms_backend_buffer_i iface,
                                                     void *context, size_t size) {
    mms_backend_buffer_t b = (mms_backend_buffer_t)MMS_MALLOC(sizeof *b);
    bool ok;
    if (!b) { mms_set_error(MMS_ERR_OOM, "mms_backend_buffer_init: out of host memory"); return NULL; }
    b->iface = iface;
    b->buft = buft;
    b->context = context;
    b->size = size;
    b->usage = MMS_BUFFER_USAGE_ANY;
    b->uid = mms__atomic_next_u64(&mms__buffer_uid_counter);
    b->generation = 1;
    b->n_clears = 0;
    mms__global_lock();
    ok = mms__ptrmap_put(&mms__live_buffers, b->uid, b);
    mms__global_unlock();
    if (!ok) {
        MMS_FREE(b);
        mms_set_error(MMS_ERR_OOM, "mms_backend_buffer_init: out of host memory");
        return NULL;
    }
    return b;
}

MMS_API void mms_backend_buffer_free(mms_backend_buffer_t b) {
    if (!b) return;
    mms__global_lock();
    mms__ptrmap_remove(&mms__live_buffers, b->uid);
    if (mms__live_buffers.count == 0) mms__ptrmap_free(&mms__live_buffers);  /* leave nothing behind at exit */
    mms__global_unlock();
    if (b->iface.free_buffer) b->iface.free_buffer(b);
    MMS_FREE(b);
}

MMS_API const char *mms_backend_buffer_name(mms_backend_buffer_t b) { return b ? mms_backend_buft_name(b->buft) : "(none)"; }
MMS_API void  *mms_backend_buffer_get_base(mms_backend_buffer_t b) { return b->size ? b->iface.get_base(b) : NULL; }
MMS_API size_t mms_backend_buffer_get_size(mms_backend_buffer_t b) { return b->size; }
MMS_API size_t mms_backend_buffer_get_alignment(mms_backend_buffer_t b) { return mms_backend_buft_get_alignment(b->buft); }
MMS_API size_t mms_backend_buffer_get_alloc_size(mms_backend_buffer_t b, const struct mms_tensor *t) { return mms_backend_buft_get_alloc_size(b->buft, t); }
MMS_API bool   mms_backend_buffer_is_host(mms_backend_buffer_t b) { return mms_backend_buft_is_host(b->buft); }
MMS_API mms_backend_buffer_type_t mms_backend_buffer_get_type(mms_backend_buffer_t b) { return b->buft; }
MMS_API void   mms_backend_buffer_set_usage(mms_backend_buffer_t b, enum mms_buffer_usage usage) { b->usage = usage; }
MMS_API enum mms_buffer_usage mms_backend_buffer_get_usage(mms_backend_buffer_t b) { return b->usage; }
MMS_API enum mms_status mms_backend_buffer_clear(mms_backend_buffer_t b, uint8_t value) {
    enum mms_status st;
    if (!b) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_buffer_clear: buffer is NULL");
    st = b->size ? b->iface.clear(b, value) : MMS_OK;
    if (st == MMS_OK) { b->n_clears++; mms__watched_write(); }   /* every tensor in it was written */
    return st;
}
MMS_API void     mms_backend_buffer_reset(mms_backend_buffer_t b) { if (b) b->generation++; }
MMS_API uint64_t mms_backend_buffer_get_generation(mms_backend_buffer_t b) { return b ? b->generation : 0; }
/* ==== end src/backend/buffer.c ==== */

/* ==== begin src/backend/lifetime.c ==== */
/* >>lifetime ======================================================================================
   Tensor lifetimes, in one place:
     - placement writes the tensor's record (memory kind from the buffer's usage, buffer uid,
       generation, graph), and nothing else decides what kind of memory a tensor has;
     - mms__memory_of is the one lookup every check goes through: it finds the live buffer through
       the registry (never through t->buffer, which may point at freed memory) and says whether the
       record still holds;
     - writes made through the library count in the tensor's version;
     - a kept (persistent) tensor computed by a scheduler carries its provenance: the leafs it was
       computed from and their versions then; reading it after one of them was written is stale. */

static enum mms_memory_kind mms__memory_kind_of_usage(enum mms_buffer_usage usage) {
    switch (usage) {
        case MMS_BUFFER_USAGE_COMPUTE:    return MMS_MEMORY_COMPUTE;
        case MMS_BUFFER_USAGE_PERSISTENT: return MMS_MEMORY_PERSISTENT;
        case MMS_BUFFER_USAGE_RESERVE:    return MMS_MEMORY_RESERVE;
        case MMS_BUFFER_USAGE_ANY:
        case MMS_BUFFER_USAGE_WEIGHTS:    break;
    }
    return MMS_MEMORY_STATIC;
}

MMS_API const char *mms_memory_kind_name(enum mms_memory_kind kind) {
    switch (kind) {
        case MMS_MEMORY_NONE:       return "none";
        case MMS_MEMORY_HOST:       return "host (context)";
        case MMS_MEMORY_STATIC:     return "static";
        case MMS_MEMORY_COMPUTE:    return "compute";
        case MMS_MEMORY_PERSISTENT: return "persistent";
        case MMS_MEMORY_RESERVE:    return "reserve stand-in";
    }
    return "unknown";
}

MMS_API enum mms_memory_kind mms_tensor_memory_kind(const struct mms_tensor *t) { return t ? t->placement.kind : MMS_MEMORY_NONE; }

/* -- placement -- */

/* b == NULL: host memory of an allocating context. */
static void mms__tensor_place(struct mms_tensor *t, mms_backend_buffer_t b, void *addr, uint64_t graph_id) {
    t->buffer = b;
    t->data = addr;
    t->placement.kind = b ? mms__memory_kind_of_usage(b->usage) : MMS_MEMORY_HOST;
    t->placement.buffer_uid = b ? b->uid : 0;
    t->placement.generation = b ? b->generation : 0;
    t->placement.graph_id = graph_id;
}

static void mms__tensor_unplace(struct mms_tensor *t) {
    t->data = NULL;
    t->buffer = NULL;
    memset(&t->placement, 0, sizeof t->placement);
}

/* Places t at addr in b for graph graph_id (0: none); a RESERVE buffer places without memory. */
static enum mms_status mms__tensor_alloc_for(mms_backend_buffer_t b, struct mms_tensor *t, void *addr, uint64_t graph_id) {
    char *base;
    size_t need;
    if (!b || !t) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_tensor_alloc: buffer and tensor are required");
    if (t->view_src) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_tensor_alloc: %s is a view; use mms_backend_view_init", mms__tensor_desc(t).s);
    if (t->placement.kind != MMS_MEMORY_NONE)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_tensor_alloc: %s already has memory", mms__tensor_desc(t).s);
    if (b->usage == MMS_BUFFER_USAGE_RESERVE) { mms__tensor_place(t, b, NULL, graph_id); return MMS_OK; }
    base = (char *)mms_backend_buffer_get_base(b);
    need = mms_backend_buffer_get_alloc_size(b, t);
    if ((char *)addr < base || (size_t)((char *)addr - base) > b->size || need > b->size - (size_t)((char *)addr - base))
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_tensor_alloc: %s (%zu bytes) does not fit at offset %td of buffer '%s' (%zu bytes)",
                             mms__tensor_desc(t).s, need, (char *)addr - base, mms_backend_buffer_name(b), b->size);
    mms__tensor_place(t, b, addr, graph_id);
    return b->iface.init_tensor ? b->iface.init_tensor(b, t) : MMS_OK;
}

MMS_API enum mms_status mms_backend_tensor_alloc(mms_backend_buffer_t b, struct mms_tensor *t, void *addr) {
    return mms__tensor_alloc_for(b, t, addr, 0);
}

MMS_API enum mms_status mms_backend_view_init(struct mms_tensor *t) {
    const struct mms_tensor *src;
    if (!t || !t->view_src) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_view_init: not a view");
    src = t->view_src;
    if (src->placement.kind == MMS_MEMORY_NONE)
        return mms_set_error(MMS_ERR_STATE, "mms_backend_view_init: the source of view %s has no memory yet", mms__tensor_desc(t).s);
    t->data = src->data ? (char *)src->data + t->view_offs : NULL;
    t->buffer = src->buffer;
    t->placement = src->placement;
    return (t->data && t->buffer && t->buffer->iface.init_tensor) ? t->buffer->iface.init_tensor(t->buffer, t) : MMS_OK;
}

/* -- the one lookup -- */

enum mms__memory_state {
    MMS__MEMORY_LIVE,      /* the record holds */
    MMS__MEMORY_UNPLACED,  /* never placed */
    MMS__MEMORY_FREED,     /* its buffer was freed */
    MMS__MEMORY_REUSED     /* its buffer's memory was handed out again (a newer generation) */
};

struct mms__memory {
    enum mms_memory_kind     kind;     /* from the record, whatever the state */
    enum mms__memory_state   state;
    mms_backend_buffer_t     buffer;   /* the live buffer (LIVE only; NULL for host memory) */
    const struct mms_tensor *culprit;  /* whose record failed: the tensor or its view source */
    uint64_t                 generation_now;   /* REUSED: the buffer's generation now */
};

static enum mms__memory_state mms__record_state(const struct mms_tensor *t, mms_backend_buffer_t *live, uint64_t *generation_now) {
    mms_backend_buffer_t b;
    *live = NULL;
    if (t->placement.kind == MMS_MEMORY_NONE) return MMS__MEMORY_UNPLACED;
    if (t->placement.buffer_uid == 0) return MMS__MEMORY_LIVE;   /* host memory of a context */
    b = mms__live_buffer(t->placement.buffer_uid);
    if (!b) return MMS__MEMORY_FREED;
    *generation_now = b->generation;
    if (b->generation != t->placement.generation) return MMS__MEMORY_REUSED;
    *live = b;
    return MMS__MEMORY_LIVE;
}

/* What t's memory is and whether it still holds; a view holds only if its source does too. */
static struct mms__memory mms__memory_of(const struct mms_tensor *t) {
    struct mms__memory m;
    m.kind = t->placement.kind;
    m.culprit = t;
    m.generation_now = 0;
    m.state = mms__record_state(t, &m.buffer, &m.generation_now);
    if (m.state == MMS__MEMORY_LIVE && t->view_src) {
        mms_backend_buffer_t src_live;
        enum mms__memory_state s = mms__record_state(t->view_src, &src_live, &m.generation_now);
        if (s != MMS__MEMORY_LIVE) { m.state = s; m.culprit = t->view_src; m.buffer = NULL; }
    }
    return m;
}

static bool mms__memory_is_live(const struct mms_tensor *t) { return mms__memory_of(t).state == MMS__MEMORY_LIVE; }

/* The live buffer behind t (NULL for host memory, or when the record does not hold). */
static mms_backend_buffer_t mms__live_buffer_of(const struct mms_tensor *t) { return mms__memory_of(t).buffer; }

/* -- checks -- */

/* Records why t cannot be used as a status and message; logs only when loud. */
static enum mms_status mms__tensor_check_as(const struct mms_tensor *t, const char *who, bool loud) {
    enum mms_status (*fail)(enum mms_status, const char *, ...) = loud ? mms_set_error : mms__error_quiet;
    struct mms__memory m;
    char from[48] = "";
    if (!t) return fail(MMS_ERR_INVALID_ARG, "%s: tensor is NULL", who);
    m = mms__memory_of(t);
    if (m.culprit->placement.graph_id)
        snprintf(from, sizeof from, " by graph #%llu", (unsigned long long)m.culprit->placement.graph_id);
    switch (m.state) {
        case MMS__MEMORY_UNPLACED:
            return fail(MMS_ERR_STATE, "%s: tensor %s has no memory: allocate it first (mms_backend_alloc_ctx_tensors, a graph "
                        "allocator or a scheduler)", who, mms__tensor_desc(t).s);
        case MMS__MEMORY_FREED:
            return fail(MMS_ERR_STALE, "%s: tensor %s lived in %s memory (placed%s) whose buffer has been freed; it must not be "
                        "used any more (a result kept across graphs must be marked persistent, and not released while in use)",
                        who, mms__tensor_desc(t).s, mms_memory_kind_name(m.kind), from);
        case MMS__MEMORY_REUSED:
            return fail(MMS_ERR_STALE, "%s: tensor %s is stale: it was placed%s in %s memory that has been handed out again "
                        "(placed in generation %llu, the buffer is at %llu). To keep a result across allocations, mark it "
                        "persistent (mms_set_persistent) or copy it out before the next allocation", who, mms__tensor_desc(t).s,
                        from, mms_memory_kind_name(m.kind), (unsigned long long)m.culprit->placement.generation,
                        (unsigned long long)m.generation_now);
        case MMS__MEMORY_LIVE:
            break;
    }
    if (m.kind == MMS_MEMORY_RESERVE)
        return fail(MMS_ERR_STATE, "%s: tensor %s is a planning stand-in (a scheduler's reserve): it has no data", who, mms__tensor_desc(t).s);
    return MMS_OK;
}

static enum mms_status mms__tensor_check(const struct mms_tensor *t, const char *who) { return mms__tensor_check_as(t, who, true); }

/* -- versions and provenance -- */

struct mms__provenance_ref { uint64_t uid, version, n_clears; };

/* One allocation: this header, then n_refs refs (freed with MMS_FREE by the tensor's context).
   It describes the last value computed, and outlives a release of the memory (what was computed
   from that value stays only as fresh as it). */
struct mms__provenance {
    uint64_t graph_id;     /* the graph that computed the kept tensor */
    uint64_t pending;      /* a graph that placed it in new memory and has not computed it yet, or 0 */
    uint64_t checked_at;   /* mms__watched_writes when it was last found up to date */
    int      n_refs;
};

static struct mms__provenance_ref *mms__provenance_refs(struct mms__provenance *p) { return (struct mms__provenance_ref *)(p + 1); }

/* A write through the library: t's memory (its root's, for a view) has new contents. */
static void mms__tensor_written(struct mms_tensor *t) {
    struct mms_tensor *r = t->view_src ? t->view_src : t;
    r->version++;
    if (r->watched) mms__watched_write();
}

/* Clears of the buffer t lives in, which write it too (0 for host memory, UINT64_MAX when t's
   memory is gone: nothing can write it there any more). */
static uint64_t mms__tensor_clears(const struct mms_tensor *t) {
    struct mms__memory m = mms__memory_of(t);
    if (m.state != MMS__MEMORY_LIVE) return UINT64_MAX;
    return m.buffer ? m.buffer->n_clears : 0;
}

/* The caller wrote a kept tensor's data itself: its value no longer comes from its inputs. */
static void mms__provenance_drop(struct mms_tensor *t) {
    struct mms_tensor *r = t->view_src ? t->view_src : t;
    MMS_FREE(r->provenance);
    r->provenance = NULL;
}

/* kept was just computed by graph graph_id from the leafs (roots, no duplicates). */
static enum mms_status mms__provenance_record(struct mms_tensor *kept, struct mms_tensor *const *leafs, int n, uint64_t graph_id) {
    struct mms__provenance *p = (struct mms__provenance *)MMS_MALLOC(sizeof *p + sizeof(struct mms__provenance_ref) * (size_t)n);
    int i;
    if (!p) return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory recording what %s was computed from", mms__tensor_desc(kept).s);
    p->graph_id = graph_id;
    p->pending = 0;
    p->n_refs = n;
    for (i = 0; i < n; i++) {
        mms__tensor_watch(leafs[i]);
        mms__provenance_refs(p)[i].uid = leafs[i]->uid;
        mms__provenance_refs(p)[i].version = leafs[i]->version;
        mms__provenance_refs(p)[i].n_clears = mms__tensor_clears(leafs[i]);
    }
    p->checked_at = mms__watched_writes_now();
    MMS_FREE(kept->provenance);
    kept->provenance = p;
    return MMS_OK;
}

/* Graph graph_id placed kept in new memory, to be computed: reading it before is an error. */
static enum mms_status mms__provenance_pending(struct mms_tensor *kept, uint64_t graph_id) {
    if (!kept->provenance) {
        if (mms__provenance_record(kept, NULL, 0, 0) != MMS_OK) return mms_last_status();
    }
    kept->provenance->pending = graph_id;
    return MMS_OK;
}

/* NULL if kept is up to date with everything it was computed from (recursively, through kept
   tensors it was computed from), else the tensor written since. */
static const struct mms_tensor *mms__provenance_outdated(const struct mms_tensor *kept, int depth) {
    struct mms__provenance *p = kept->provenance;
    uint64_t now;
    int i;
    if (!p) return NULL;
    now = mms__watched_writes_now();
    if (p->checked_at == now) return NULL;
    p->checked_at = now;                        /* optimistic: cycles of kept tensors end here */
    for (i = 0; i < p->n_refs; i++) {
        const struct mms__provenance_ref *r = &mms__provenance_refs(p)[i];
        const struct mms_tensor *in = mms__tensor_find_watched(r->uid), *deeper;
        uint64_t clears;
        if (!in) continue;                      /* its context is gone: it cannot change any more */
        clears = mms__tensor_clears(in);
        if (in->version != r->version || (clears != UINT64_MAX && clears != r->n_clears)) { p->checked_at = 0; return in; }
        if (depth < 64 && (deeper = mms__provenance_outdated(in, depth + 1)) != NULL) { p->checked_at = 0; return deeper; }
    }
    return NULL;
}

/* The check before t is read: its memory holds and, if it is a kept tensor, its value is up to date. */
static enum mms_status mms__tensor_check_read_as(const struct mms_tensor *t, const char *who, bool loud) {
    enum mms_status (*fail)(enum mms_status, const char *, ...) = loud ? mms_set_error : mms__error_quiet;
    const struct mms_tensor *root, *changed;
    enum mms_status st = mms__tensor_check_as(t, who, loud);
    if (st != MMS_OK) return st;
    root = t->view_src ? t->view_src : t;
    if (!root->provenance) return MMS_OK;
    if (root->provenance->pending)
        return fail(MMS_ERR_STATE, "%s: kept tensor %s has memory from graph #%llu, which has not computed it yet: compute that graph "
                    "before using it", who, mms__tensor_desc(root).s, (unsigned long long)root->provenance->pending);
    if ((changed = mms__provenance_outdated(root, 0)) == NULL) return MMS_OK;
    return fail(MMS_ERR_STALE, "%s: kept tensor %s is out of date: graph #%llu computed it from %s, which has been written since. "
                "Compute it again (a graph that expands it recomputes it into its kept memory) or release it",
                who, mms__tensor_desc(root).s, (unsigned long long)root->provenance->graph_id, mms__tensor_desc(changed).s);
}

static enum mms_status mms__tensor_check_read(const struct mms_tensor *t, const char *who) { return mms__tensor_check_read_as(t, who, true); }

MMS_API enum mms_status mms_backend_tensor_check(const struct mms_tensor *t) {
    return mms__tensor_check_read_as(t, "mms_backend_tensor_check", false);
}

/* -- the reserve buffer: stand-ins that are planned around but never hold data -- */

static const char *mms__reserve_buft_name(mms_backend_buffer_type_t buft) { (void)buft; return "reserve (no memory)"; }
static size_t mms__reserve_buft_alignment(mms_backend_buffer_type_t buft) { (void)buft; return 1; }
static void *mms__reserve_base(mms_backend_buffer_t b) { (void)b; return NULL; }
static enum mms_status mms__reserve_refuse(void) { return mms_set_error(MMS_ERR_STATE, "a planning stand-in has no data"); }
static enum mms_status mms__reserve_memset(mms_backend_buffer_t b, struct mms_tensor *t, uint8_t v, size_t o, size_t n) { (void)b; (void)t; (void)v; (void)o; (void)n; return mms__reserve_refuse(); }
static enum mms_status mms__reserve_set(mms_backend_buffer_t b, struct mms_tensor *t, const void *d, size_t o, size_t n) { (void)b; (void)t; (void)d; (void)o; (void)n; return mms__reserve_refuse(); }
static enum mms_status mms__reserve_get(mms_backend_buffer_t b, const struct mms_tensor *t, void *d, size_t o, size_t n) { (void)b; (void)t; (void)d; (void)o; (void)n; return mms__reserve_refuse(); }
static enum mms_status mms__reserve_clear(mms_backend_buffer_t b, uint8_t v) { (void)b; (void)v; return MMS_OK; }
static mms_backend_buffer_t mms__reserve_alloc(mms_backend_buffer_type_t buft, size_t size);

static struct mms_backend_buffer_type mms__reserve_buft = {
    { mms__reserve_buft_name, mms__reserve_alloc, mms__reserve_buft_alignment, NULL, NULL, NULL }, NULL
};

static mms_backend_buffer_t mms__reserve_alloc(mms_backend_buffer_type_t buft, size_t size) {
    struct mms_backend_buffer_i i;
    mms_backend_buffer_t b;
    memset(&i, 0, sizeof i);
    i.get_base = mms__reserve_base;
    i.memset_tensor = mms__reserve_memset;
    i.set_tensor = mms__reserve_set;
    i.get_tensor = mms__reserve_get;
    i.clear = mms__reserve_clear;
    b = mms_backend_buffer_init(buft, i, NULL, size);
    if (b) b->usage = MMS_BUFFER_USAGE_RESERVE;
    return b;
}

/* A buffer whose tensors are stand-ins: placed (so planners leave them alone), without data. */
static mms_backend_buffer_t mms__reserve_buffer_new(void) { return mms__reserve_alloc(&mms__reserve_buft, 0); }
/* ==== end src/backend/lifetime.c ==== */

/* ==== begin src/backend/tensor_data.c ==== */
/* >>tensor-data ===================================================================================
   Data in and out of placed tensors, and whole contexts placed in one buffer. Every access checks
   the tensor first (lifetime section); writes count in the tensor's version, and a kept tensor
   the caller overwrites no longer carries the provenance of its old value. */

static enum mms_status mms__tensor_range_check(const struct mms_tensor *t, size_t offset, size_t size, bool reading, const char *who) {
    enum mms_status st = reading ? mms__tensor_check_read(t, who) : mms__tensor_check(t, who);
    if (st != MMS_OK) return st;
    if (offset > mms_nbytes(t) || size > mms_nbytes(t) - offset)
        return mms_set_error(MMS_ERR_INVALID_ARG, "%s: bytes [%zu, %zu) are outside tensor %s (%zu bytes)",
                             who, offset, offset + size, mms__tensor_desc(t).s, mms_nbytes(t));
    return MMS_OK;
}

/* The caller wrote t's data (not a graph): a new version, and no provenance any more. */
static enum mms_status mms__tensor_set_by_caller(struct mms_tensor *t, enum mms_status st) {
    if (st != MMS_OK) return st;
    mms__tensor_written(t);
    mms__provenance_drop(t);
    return MMS_OK;
}

MMS_API enum mms_status mms_backend_tensor_set(struct mms_tensor *t, const void *data, size_t offset, size_t size) {
    enum mms_status st = mms__tensor_range_check(t, offset, size, false, "mms_backend_tensor_set");
    if (st != MMS_OK || size == 0) return st;
    if (!data) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_tensor_set: data is NULL");
    if (!t->buffer) { memcpy((char *)t->data + offset, data, size); return mms__tensor_set_by_caller(t, MMS_OK); }
    return mms__tensor_set_by_caller(t, t->buffer->iface.set_tensor(t->buffer, t, data, offset, size));
}

MMS_API enum mms_status mms_backend_tensor_get(const struct mms_tensor *t, void *data, size_t offset, size_t size) {
    enum mms_status st = mms__tensor_range_check(t, offset, size, true, "mms_backend_tensor_get");
    if (st != MMS_OK || size == 0) return st;
    if (!data) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_tensor_get: data is NULL");
    if (!t->buffer) { memcpy(data, (const char *)t->data + offset, size); return MMS_OK; }
    return t->buffer->iface.get_tensor(t->buffer, t, data, offset, size);
}

MMS_API enum mms_status mms_backend_tensor_memset(struct mms_tensor *t, uint8_t value, size_t offset, size_t size) {
    enum mms_status st = mms__tensor_range_check(t, offset, size, false, "mms_backend_tensor_memset");
    if (st != MMS_OK || size == 0) return st;
    if (!t->buffer) { memset((char *)t->data + offset, value, size); return mms__tensor_set_by_caller(t, MMS_OK); }
    return mms__tensor_set_by_caller(t, t->buffer->iface.memset_tensor(t->buffer, t, value, offset, size));
}

static bool mms__tensor_is_host(const struct mms_tensor *t) { return !t->buffer || mms_backend_buffer_is_host(t->buffer); }

MMS_API enum mms_status mms_backend_tensor_copy(const struct mms_tensor *src, struct mms_tensor *dst) {
    enum mms_status st;
    size_t n;
    void *tmp;
    if (!src || !dst) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_tensor_copy: src and dst are required");
    if (!mms_are_same_layout(src, dst))
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_tensor_copy: src %s and dst %s differ in type, shape or strides",
                             mms__tensor_desc(src).s, mms__tensor_desc(dst).s);
    if ((st = mms__tensor_check_read(src, "mms_backend_tensor_copy")) != MMS_OK) return st;
    if ((st = mms__tensor_check(dst, "mms_backend_tensor_copy")) != MMS_OK) return st;
    n = mms_nbytes(src);
    if (src == dst || n == 0) return MMS_OK;
    if (mms__tensor_is_host(src)) return mms_backend_tensor_set(dst, src->data, 0, n);
    if (mms__tensor_is_host(dst)) return mms__tensor_set_by_caller(dst, mms_backend_tensor_get(src, dst->data, 0, n));
    if (dst->buffer->iface.cpy_tensor && dst->buffer->iface.cpy_tensor(dst->buffer, src, dst)) return mms__tensor_set_by_caller(dst, MMS_OK);
    tmp = MMS_MALLOC(n);
    if (!tmp) return mms_set_error(MMS_ERR_OOM, "mms_backend_tensor_copy: no host memory to stage %zu bytes", n);
    st = mms_backend_tensor_get(src, tmp, 0, n);
    if (st == MMS_OK) st = mms_backend_tensor_set(dst, tmp, 0, n);
    MMS_FREE(tmp);
    return st;
}

/* -- whole contexts -- */

MMS_API mms_backend_buffer_t mms_backend_alloc_ctx_tensors_from_buft(struct mms_context *ctx, mms_backend_buffer_type_t buft) {
    const char *who = "mms_backend_alloc_ctx_tensors";
    struct mms_tensor *t;
    mms_backend_buffer_t b;
    size_t align, total = 0;
    char *base;

    if (!ctx || !buft) { mms_set_error(MMS_ERR_INVALID_ARG, "%s: context and buffer type are required", who); return NULL; }
    align = mms_backend_buft_get_alignment(buft);
    for (t = mms_get_first_tensor(ctx); t; t = mms_get_next_tensor(ctx, t))
        if (t->placement.kind == MMS_MEMORY_NONE && !t->view_src) total += MMS__ALIGN_UP(mms_backend_buft_get_alloc_size(buft, t), align);
    if (total == 0) {
        mms_set_error(MMS_ERR_INVALID_ARG, "%s: no tensor of the context needs memory (all are placed, views or empty)", who);
        return NULL;
    }
    if (total > mms_backend_buft_get_max_size(buft)) {
        mms_set_error(MMS_ERR_UNSUPPORTED, "%s: the tensors need %zu bytes, more than the %zu bytes a '%s' buffer can hold",
                      who, total, mms_backend_buft_get_max_size(buft), mms_backend_buft_name(buft));
        return NULL;
    }
    b = mms_backend_buft_alloc_buffer(buft, total);
    if (!b) return NULL;
    base = (char *)mms_backend_buffer_get_base(b);
    for (t = mms_get_first_tensor(ctx); t; t = mms_get_next_tensor(ctx, t)) {
        if (t->placement.kind == MMS_MEMORY_NONE && !t->view_src) {
            if (mms_backend_tensor_alloc(b, t, base) != MMS_OK) goto fail;
            base += MMS__ALIGN_UP(mms_backend_buft_get_alloc_size(buft, t), align);
        }
    }
    for (t = mms_get_first_tensor(ctx); t; t = mms_get_next_tensor(ctx, t))
        if (t->view_src && t->placement.kind == MMS_MEMORY_NONE && t->view_src->placement.kind != MMS_MEMORY_NONE &&
            mms_backend_view_init(t) != MMS_OK) goto fail;
    return b;
fail:   /* nothing keeps a record of the buffer freed here */
    for (t = mms_get_first_tensor(ctx); t; t = mms_get_next_tensor(ctx, t))
        if (t->placement.buffer_uid == b->uid) mms__tensor_unplace(t);
    mms_backend_buffer_free(b);
    return NULL;
}
/* ==== end src/backend/tensor_data.c ==== */

/* ==== begin src/backend/backend.c ==== */
/* >>backend =======================================================================================
   The generic side of backends: calls through the interface, with the checks every backend gets
   for free (graph built without errors, every tensor placed, alive and readable here). */

MMS_API const char *mms_backend_name(mms_backend_t b) { return b ? b->iface.get_name(b) : "(none)"; }
MMS_API void mms_backend_free(mms_backend_t b) { if (b) b->iface.free(b); }
MMS_API mms_backend_buffer_type_t mms_backend_get_default_buffer_type(mms_backend_t b) { return b->iface.get_default_buffer_type(b); }
MMS_API mms_backend_buffer_t mms_backend_alloc_buffer(mms_backend_t b, size_t size) {
    return mms_backend_buft_alloc_buffer(mms_backend_get_default_buffer_type(b), size);
}
MMS_API size_t mms_backend_get_alignment(mms_backend_t b) { return mms_backend_buft_get_alignment(mms_backend_get_default_buffer_type(b)); }
MMS_API size_t mms_backend_get_max_size(mms_backend_t b)  { return mms_backend_buft_get_max_size(mms_backend_get_default_buffer_type(b)); }
MMS_API bool mms_backend_supports_op(mms_backend_t b, const struct mms_tensor *op) { return b->iface.supports_op(b, op); }
MMS_API bool mms_backend_supports_buft(mms_backend_t b, mms_backend_buffer_type_t buft) { return b->iface.supports_buft(b, buft); }
MMS_API bool mms_backend_offload_op(mms_backend_t b, const struct mms_tensor *op) { return b->iface.offload_op && b->iface.offload_op(b, op); }

MMS_API mms_backend_buffer_t mms_backend_alloc_ctx_tensors(struct mms_context *ctx, mms_backend_t b) {
    if (!b) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_alloc_ctx_tensors: backend is NULL"); return NULL; }
    return mms_backend_alloc_ctx_tensors_from_buft(ctx, mms_backend_get_default_buffer_type(b));
}

/* Can backend b read and write the memory of t (checked live)? */
static bool mms__backend_can_use(mms_backend_t b, const struct mms_tensor *t) {
    mms_backend_buffer_t live = mms__live_buffer_of(t);
    return mms_backend_supports_buft(b, live ? live->buft : mms_backend_cpu_buffer_type());
}

static enum mms_status mms__graph_check_for(mms_backend_t b, struct mms_cgraph *g, const char *who) {
    int i, n;
    if (!b || !g) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: backend and graph are required", who);
    if (mms_graph_status(g) != MMS_OK)
        return mms_set_error(mms_graph_status(g), "%s: the graph was not built correctly: %s", who, mms_graph_error(g));
    for (n = 0; n < 2; n++) {
        int count = n == 0 ? mms_graph_n_leafs(g) : mms_graph_n_nodes(g);
        for (i = 0; i < count; i++) {
            struct mms_tensor *t = n == 0 ? mms_graph_leaf(g, i) : mms_graph_node(g, i);
            enum mms_status st;
            if (mms_nelements(t) == 0) continue;
            if (t->view_src && t->placement.kind == MMS_MEMORY_NONE && t->view_src->placement.kind != MMS_MEMORY_NONE &&
                (st = mms_backend_view_init(t)) != MMS_OK) return st;
            st = n == 0 ? mms__tensor_check_read(t, who) : mms__tensor_check(t, who);
            if (st != MMS_OK) return st;
            if (!mms__backend_can_use(b, t))
                return mms_set_error(MMS_ERR_INVALID_ARG, "%s: tensor %s lives in a '%s' buffer that backend %s cannot use",
                                     who, mms__tensor_desc(t).s, t->buffer ? mms_backend_buffer_name(t->buffer) : "host", mms_backend_name(b));
            if (n == 1 && !mms_op_is_view(t->op) && !mms_backend_supports_op(b, t))
                return mms_set_error(MMS_ERR_UNSUPPORTED, "%s: backend %s does not support %s for %s", who,
                                     mms_backend_name(b), mms_op_name(t->op), mms__tensor_desc(t).s);
        }
    }
    return MMS_OK;
}

/* Every node of a computed graph wrote its memory (a view's, its source's). */
static void mms__graph_written(struct mms_cgraph *g) {
    int i;
    for (i = 0; i < mms_graph_n_nodes(g); i++)
        if (!mms_op_is_view(mms_graph_node(g, i)->op)) mms__tensor_written(mms_graph_node(g, i));
}

MMS_API enum mms_status mms_backend_graph_compute_async(mms_backend_t b, struct mms_cgraph *g) {
    enum mms_status st = mms__graph_check_for(b, g, "mms_backend_graph_compute");
    if (st == MMS_OK) st = b->iface.graph_compute(b, g);
    if (st == MMS_OK) mms__graph_written(g);
    return st;
}

MMS_API enum mms_status mms_backend_synchronize(mms_backend_t b) {
    if (!b) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_synchronize: backend is NULL");
    return b->iface.synchronize ? b->iface.synchronize(b) : MMS_OK;
}

MMS_API enum mms_status mms_backend_graph_compute(mms_backend_t b, struct mms_cgraph *g) {
    enum mms_status st = mms_backend_graph_compute_async(b, g);
    return st != MMS_OK ? st : mms_backend_synchronize(b);
}

MMS_API enum mms_status mms_backend_tensor_set_async(mms_backend_t b, struct mms_tensor *t, const void *data, size_t offset, size_t size) {
    enum mms_status st;
    if (!b || !b->iface.set_tensor_async) return mms_backend_tensor_set(t, data, offset, size);
    st = mms__tensor_range_check(t, offset, size, false, "mms_backend_tensor_set_async");
    return st != MMS_OK ? st : mms__tensor_set_by_caller(t, b->iface.set_tensor_async(b, t, data, offset, size));
}

MMS_API enum mms_status mms_backend_tensor_get_async(mms_backend_t b, const struct mms_tensor *t, void *data, size_t offset, size_t size) {
    enum mms_status st;
    if (!b || !b->iface.get_tensor_async) return mms_backend_tensor_get(t, data, offset, size);
    st = mms__tensor_range_check(t, offset, size, true, "mms_backend_tensor_get_async");
    return st != MMS_OK ? st : b->iface.get_tensor_async(b, t, data, offset, size);
}

MMS_API enum mms_status mms_backend_tensor_copy_async(mms_backend_t backend_src, mms_backend_t backend_dst,
                                                      const struct mms_tensor *src, struct mms_tensor *dst) {
    enum mms_status st;
    if (backend_dst && backend_dst->iface.cpy_tensor_async) {
        if (!mms_are_same_layout(src, dst))
            return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_tensor_copy_async: src %s and dst %s differ in layout",
                                 mms__tensor_desc(src).s, mms__tensor_desc(dst).s);
        if ((st = mms__tensor_check_read(src, "mms_backend_tensor_copy_async")) != MMS_OK) return st;
        if ((st = mms__tensor_check(dst, "mms_backend_tensor_copy_async")) != MMS_OK) return st;
        st = backend_dst->iface.cpy_tensor_async(backend_src, backend_dst, src, dst);
        if (st != MMS_ERR_UNSUPPORTED) return mms__tensor_set_by_caller(dst, st);
    }
    /* synchronous fallback: the source must be complete before it is read */
    if ((st = mms_backend_synchronize(backend_src)) != MMS_OK) return st;
    if ((st = mms_backend_synchronize(backend_dst)) != MMS_OK) return st;
    return mms_backend_tensor_copy(src, dst);
}

MMS_API mms_backend_event_t mms_backend_event_new(mms_backend_t b) {
    return b && b->iface.event_new ? b->iface.event_new(b) : NULL;
}
MMS_API void mms_backend_event_free(mms_backend_event_t e) { if (e) e->backend->iface.event_free(e); }
MMS_API enum mms_status mms_backend_event_record(mms_backend_event_t e) {
    return e ? e->backend->iface.event_record(e) : mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_event_record: event is NULL");
}
MMS_API enum mms_status mms_backend_event_synchronize(mms_backend_event_t e) {
    return e ? e->backend->iface.event_synchronize(e) : mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_event_synchronize: event is NULL");
}
MMS_API enum mms_status mms_backend_event_wait(mms_backend_t b, mms_backend_event_t e) {
    if (!b || !e) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_event_wait: backend and event are required");
    return b->iface.event_wait ? b->iface.event_wait(b, e) : mms_backend_event_synchronize(e);
}
/* ==== end src/backend/backend.c ==== */

/* ==== begin src/backend/cpu/threadpool.c ==== */
/* >>threadpool ====================================================================================
   A pool of persistent workers for the CPU backend. The caller is worker 0. A job runs fn on every
   worker; inside a job, workers meet at barriers. Whoever waits spins for about a tenth of a
   millisecond (threads finishing a node that far apart are common: a matrix product's last tiles)
   and then sleeps on a condition variable, so a busy machine's scheduler can run the straggler on
   the waiter's core instead of watching it spin (build/bench measures a barrier). Waking a sleeper
   costs more than that on a virtual machine, up to a millisecond when its host is busy (profiles of
   build/batch --bench: small element-wise nodes took 57 us with 6 us of spinning, 17 us with
   this). Between jobs, workers spin as long on the job
   counter (back-to-back graphs, as the scheduler's splits make, start at once) and then sleep too. */

#define MMS__POOL_SPINS 4096   /* pause instructions before sleeping: about 100 us on Zen 3 */

struct mms__threadpool {
    int           n_threads;        /* workers including the caller */
    mms__thread  *threads;          /* n_threads - 1 */
    mms__mutex    mutex;
    mms__cond     cond;             /* a new job or stop */
    mms__cond     barrier_cond;     /* a barrier's phase changed */
    mms__atomic_int job_seq;        /* bumped for each job, under mutex; read while spinning */
    bool          stop;
    void        (*fn)(void *arg, int ith, int nth);
    void         *arg;
    mms__atomic_int barrier_count;
    mms__atomic_int barrier_phase;
    mms__atomic_int barrier_sleepers;
};

struct mms__worker_arg { struct mms__threadpool *pool; int ith; };

static void mms__threadpool_barrier(struct mms__threadpool *pool) {
    int32_t phase;
    int spins;
    if (pool->n_threads == 1) return;
    phase = mms__atomic_load(&pool->barrier_phase);
    if (mms__atomic_fetch_add(&pool->barrier_count, 1) == pool->n_threads - 1) {
        mms__atomic_store(&pool->barrier_count, 0);
        mms__atomic_fetch_add(&pool->barrier_phase, 1);
        /* A sleeper counts itself before it checks the phase under the mutex; both steps here are
           read-modify-writes and loads in that order, so a sleeper is either seen or sees the phase. */
        if (mms__atomic_load(&pool->barrier_sleepers) > 0) {
            mms__mutex_lock(&pool->mutex);
            mms__cond_broadcast(&pool->barrier_cond);
            mms__mutex_unlock(&pool->mutex);
        }
        return;
    }
    for (spins = 0; spins < MMS__POOL_SPINS; spins++) {
        if (mms__atomic_load(&pool->barrier_phase) != phase) return;
        mms__cpu_relax();
    }
    mms__atomic_fetch_add(&pool->barrier_sleepers, 1);
    mms__mutex_lock(&pool->mutex);
    while (mms__atomic_load(&pool->barrier_phase) == phase) mms__cond_wait(&pool->barrier_cond, &pool->mutex);
    mms__mutex_unlock(&pool->mutex);
    mms__atomic_fetch_add(&pool->barrier_sleepers, -1);
}

static void *mms__threadpool_worker(void *p) {
    struct mms__worker_arg *wa = (struct mms__worker_arg *)p;
    struct mms__threadpool *pool = wa->pool;
    int seen = 0;
    for (;;) {
        void (*fn)(void *, int, int);
        void *arg;
        int spins;
        for (spins = 0; spins < MMS__POOL_SPINS && mms__atomic_load(&pool->job_seq) == seen; spins++) mms__cpu_relax();
        mms__mutex_lock(&pool->mutex);
        while (!pool->stop && mms__atomic_load(&pool->job_seq) == seen) mms__cond_wait(&pool->cond, &pool->mutex);
        if (pool->stop) { mms__mutex_unlock(&pool->mutex); break; }
        seen = mms__atomic_load(&pool->job_seq);
        fn = pool->fn;
        arg = pool->arg;
        mms__mutex_unlock(&pool->mutex);
        fn(arg, wa->ith, pool->n_threads);
        mms__threadpool_barrier(pool);   /* the job ends when every worker is done */
    }
    MMS_FREE(wa);
    return NULL;
}

static void mms__threadpool_free(struct mms__threadpool *pool) {
    int i;
    if (!pool) return;
    mms__mutex_lock(&pool->mutex);
    pool->stop = true;
    mms__cond_broadcast(&pool->cond);
    mms__mutex_unlock(&pool->mutex);
    for (i = 0; i < pool->n_threads - 1; i++) mms__thread_join(pool->threads[i]);
    mms__mutex_destroy(&pool->mutex);
    mms__cond_destroy(&pool->cond);
    mms__cond_destroy(&pool->barrier_cond);
    MMS_FREE(pool->threads);
    MMS_FREE(pool);
}

static struct mms__threadpool *mms__threadpool_new(int n_threads) {
    struct mms__threadpool *pool = (struct mms__threadpool *)MMS_MALLOC(sizeof *pool);
    int i;
    if (!pool) return NULL;
    memset(pool, 0, sizeof *pool);
    pool->n_threads = 1;
    mms__mutex_init(&pool->mutex);
    mms__cond_init(&pool->cond);
    mms__cond_init(&pool->barrier_cond);
    pool->threads = (mms__thread *)MMS_MALLOC(sizeof(mms__thread) * (size_t)(n_threads > 1 ? n_threads - 1 : 1));
    if (!pool->threads) { mms__threadpool_free(pool); return NULL; }
    for (i = 1; i < n_threads; i++) {
        struct mms__worker_arg *wa = (struct mms__worker_arg *)MMS_MALLOC(sizeof *wa);
        if (!wa) break;
        wa->pool = pool;
        wa->ith = i;
        if (!mms__thread_create(&pool->threads[i - 1], mms__threadpool_worker, wa)) { MMS_FREE(wa); break; }
        pool->n_threads++;   /* only workers that started count */
    }
    if (pool->n_threads != n_threads) { mms__threadpool_free(pool); return NULL; }
    return pool;
}

/* Runs fn(arg, ith, n_threads) on every worker and returns when all are done. */
static void mms__threadpool_run(struct mms__threadpool *pool, void (*fn)(void *, int, int), void *arg) {
    if (pool->n_threads > 1) {
        mms__mutex_lock(&pool->mutex);
        pool->fn = fn;
        pool->arg = arg;
        mms__atomic_fetch_add(&pool->job_seq, 1);
        mms__cond_broadcast(&pool->cond);
        mms__mutex_unlock(&pool->mutex);
    }
    fn(arg, 0, pool->n_threads);
    mms__threadpool_barrier(pool);
}
/* ==== end src/backend/cpu/threadpool.c ==== */

/* ==== begin src/backend/cpu/vec.c ==== */
/* >>vec ===========================================================================================
   Vector primitives of the CPU kernels, each with a portable scalar body and SIMD bodies (AVX2 with
   FMA and F16C on x86-64, NEON on 64-bit ARM) chosen at run time (mms_cpu_set_kernels). Kernels
   call only the dispatching names. */

static int mms__cpu_kernels_active = -1;   /* enum mms_cpu_kernels once resolved */

MMS_API bool mms_cpu_has_avx2(void) {
    static int has = -1;
    if (has < 0) has = mms__cpu_detect_avx2() ? 1 : 0;
    return has == 1;
}

static bool mms__cpu_has_avx512(void) {
    static int has = -1;
    if (has < 0) has = mms__cpu_detect_avx512() ? 1 : 0;
    return has == 1;
}
static bool mms__cpu_has_neon(void) { return MMS__HAVE_NEON != 0; }
static bool mms__cpu_has_neon_dotprod(void) {
    static int has = -1;
    if (has < 0) has = MMS__HAVE_NEON && mms__cpu_detect_dotprod() ? 1 : 0;
    return has == 1;
}
static bool mms__cpu_has_scalar(void) { return true; }

/* The kernel sets. AUTO takes the last one the machine supports, so a set goes after those it
   extends; a new set is a new enum value, a row here and its bodies behind the dispatching names. */
static const struct mms__kernel_set {
    enum mms_cpu_kernels kernels;
    const char *name;
    bool (*supported)(void);
    const char *needs;
} mms__kernel_sets[] = {
    { MMS_CPU_KERNELS_SCALAR,       "scalar",       mms__cpu_has_scalar,       "" },
    { MMS_CPU_KERNELS_AVX2,         "avx2",         mms_cpu_has_avx2,          "an x86 CPU with AVX2, FMA and F16C and a gcc or clang build" },
    { MMS_CPU_KERNELS_AVX512,       "avx512",       mms__cpu_has_avx512,       "an x86 CPU with AVX-512 F/BW/DQ/VL, VNNI and BF16 and a gcc or clang build" },
    { MMS_CPU_KERNELS_NEON,         "neon",         mms__cpu_has_neon,         "a 64-bit ARM build with gcc or clang" },
    { MMS_CPU_KERNELS_NEON_DOTPROD, "neon_dotprod", mms__cpu_has_neon_dotprod, "a 64-bit ARM CPU with the dot-product instructions and a gcc or clang build" },
};
#define MMS__N_KERNEL_SETS ((int)(sizeof mms__kernel_sets / sizeof mms__kernel_sets[0]))

static const struct mms__kernel_set *mms__kernel_set_of(enum mms_cpu_kernels k) {
    int i;
    for (i = 0; i < MMS__N_KERNEL_SETS; i++) if (mms__kernel_sets[i].kernels == k) return &mms__kernel_sets[i];
    return NULL;
}

MMS_API const char *mms_cpu_kernels_name(enum mms_cpu_kernels k) {
    const struct mms__kernel_set *set = mms__kernel_set_of(k);
    return k == MMS_CPU_KERNELS_AUTO ? "auto" : set ? set->name : "unknown";
}

MMS_API bool mms_cpu_kernels_supported(enum mms_cpu_kernels k) {
    const struct mms__kernel_set *set = mms__kernel_set_of(k);
    return k == MMS_CPU_KERNELS_AUTO || (set && set->supported());
}

MMS_API enum mms_status mms_cpu_set_kernels(enum mms_cpu_kernels k) {
    const struct mms__kernel_set *set = mms__kernel_set_of(k);
    int i;
    if (k == MMS_CPU_KERNELS_AUTO) {
        for (i = MMS__N_KERNEL_SETS - 1; !mms__kernel_sets[i].supported(); i--) {}
        set = &mms__kernel_sets[i];
    }
    if (!set) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_cpu_set_kernels: unknown kernel set %d", (int)k);
    if (!set->supported())
        return mms_set_error(MMS_ERR_UNSUPPORTED, "mms_cpu_set_kernels: the %s kernels need %s; this machine or build lacks them",
                             set->name, set->needs);
    mms__cpu_kernels_active = (int)set->kernels;
    return MMS_OK;
}

MMS_API enum mms_cpu_kernels mms_cpu_get_kernels(void) {
    if (mms__cpu_kernels_active < 0) {
        const char *env = getenv("MMS_CPU_KERNELS");
        enum mms_cpu_kernels want = MMS_CPU_KERNELS_AUTO;
        int i;
        for (i = 0; env && env[0] && i < MMS__N_KERNEL_SETS; i++) if (!strcmp(env, mms__kernel_sets[i].name)) want = mms__kernel_sets[i].kernels;
        if (env && env[0] && want == MMS_CPU_KERNELS_AUTO && strcmp(env, "auto") != 0)
            mms__log(MMS_LOG_WARN, "MMS_CPU_KERNELS=%s is not one of auto, scalar, avx2, avx512, neon, neon_dotprod; using auto", env);
        if (mms_cpu_set_kernels(want) != MMS_OK) mms_cpu_set_kernels(MMS_CPU_KERNELS_AUTO);
    }
    return (enum mms_cpu_kernels)mms__cpu_kernels_active;
}

static enum mms_cpu_kernels mms__kernels(void) {
    return mms__cpu_kernels_active < 0 ? mms_cpu_get_kernels() : (enum mms_cpu_kernels)mms__cpu_kernels_active;
}
/* Which bodies the dispatching names take. */
MMS__MAYBE_UNUSED static bool mms__avx2(void) {   /* the AVX-512 set extends AVX2's: bodies it lacks are AVX2's */
    return MMS__HAVE_AVX2 && (mms__kernels() == MMS_CPU_KERNELS_AVX2 || mms__kernels() == MMS_CPU_KERNELS_AVX512);
}
MMS__MAYBE_UNUSED static bool mms__avx512(void) { return MMS__HAVE_AVX2 && mms__kernels() == MMS_CPU_KERNELS_AVX512; }
MMS__MAYBE_UNUSED static bool mms__neon(void) { return MMS__HAVE_NEON && (mms__kernels() == MMS_CPU_KERNELS_NEON || mms__kernels() == MMS_CPU_KERNELS_NEON_DOTPROD); }
MMS__MAYBE_UNUSED static bool mms__dotprod(void) { return MMS__HAVE_NEON && mms__kernels() == MMS_CPU_KERNELS_NEON_DOTPROD; }
static bool mms__simd(void) { return mms__kernels() != MMS_CPU_KERNELS_SCALAR; }   /* any set but scalar */

/* -- scalar bodies -- */

/* Four partial sums break the add dependency chain, so the scalar path is not latency-bound. */
static float mms__dot_f32_scalar(int64_t n, const float *x, const float *y) {
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += x[i] * y[i];
        s1 += x[i + 1] * y[i + 1];
        s2 += x[i + 2] * y[i + 2];
        s3 += x[i + 3] * y[i + 3];
    }
    for (; i < n; i++) s0 += x[i] * y[i];
    return (s0 + s1) + (s2 + s3);
}

#if MMS__HAVE_AVX2
/* for the 8-lane helpers that must inline into their loops */
#define MMS__AVX2_INLINE MMS__TARGET_AVX2 __attribute__((always_inline)) inline

static MMS__AVX2_INLINE float mms__hsum256(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

static MMS__TARGET_AVX2 float mms__dot_f32_avx2(int64_t n, const float *x, const float *y) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int64_t i = 0;
    float s;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
    s = mms__hsum256(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++) s += x[i] * y[i];
    return s;
}

static MMS__TARGET_AVX2 void mms__f16_to_f32_avx2(const mms_fp16_t *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    for (; i < n; i++) y[i] = mms_fp16_to_fp32(x[i]);
}

static MMS__TARGET_AVX2 void mms__f32_to_f16_avx2(const float *x, mms_fp16_t *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = mms_fp32_to_fp16(x[i]);
}

static MMS__TARGET_AVX2 void mms__bf16_to_f32_avx2(const mms_bf16_t *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + i)));
        _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    for (; i < n; i++) y[i] = mms_bf16_to_fp32(x[i]);
}

/* the whole vectors of z = x op y; returns how many elements that was */
static MMS__TARGET_AVX2 int64_t mms__binary_f32_avx2(enum mms_op op, int64_t n, float *z, const float *x, const float *y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(y + i), r;
        switch (op) {
            case MMS_OP_ADD: r = _mm256_add_ps(a, b); break;
            case MMS_OP_SUB: r = _mm256_sub_ps(a, b); break;
            case MMS_OP_MUL: r = _mm256_mul_ps(a, b); break;
            default:         r = _mm256_div_ps(a, b); break;
        }
        _mm256_storeu_ps(z + i, r);
    }
    return i;
}
#endif

#if MMS__HAVE_NEON
/* the 4-lane helpers; NEON needs no target attribute (it is in the base ISA) */
#define MMS__NEON_INLINE __attribute__((always_inline)) inline

static MMS__NEON_INLINE float32x4_t mms__load_f16x4(const mms_fp16_t *p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }

/* One row against y, four accumulators (f32 or f16 rows: LOAD gives 4 lanes, CVT1 one value). */
#define MMS__DOTN_BODY(LOAD, CVT1)                                                                                 \
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;                                                 \
    int64_t i = 0;                                                                                                 \
    float s;                                                                                                       \
    for (; i + 16 <= n; i += 16) {                                                                                 \
        a0 = vfmaq_f32(a0, LOAD(x + i), vld1q_f32(y + i));                                                         \
        a1 = vfmaq_f32(a1, LOAD(x + i + 4), vld1q_f32(y + i + 4));                                                 \
        a2 = vfmaq_f32(a2, LOAD(x + i + 8), vld1q_f32(y + i + 8));                                                 \
        a3 = vfmaq_f32(a3, LOAD(x + i + 12), vld1q_f32(y + i + 12));                                               \
    }                                                                                                              \
    for (; i + 4 <= n; i += 4) a0 = vfmaq_f32(a0, LOAD(x + i), vld1q_f32(y + i));                                  \
    s = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));                                               \
    for (; i < n; i++) s += CVT1(x[i]) * y[i];                                                                     \
    return s;
static float mms__dot_f32_neon(int64_t n, const float *x, const float *y) {
    MMS__DOTN_BODY(vld1q_f32, (float))
}

static void mms__f16_to_f32_neon(const mms_fp16_t *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, mms__load_f16x4(x + i));
    for (; i < n; i++) y[i] = mms_fp16_to_fp32(x[i]);
}

static void mms__f32_to_f16_neon(const float *x, mms_fp16_t *y, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));   /* nearest even */
    for (; i < n; i++) y[i] = mms_fp32_to_fp16(x[i]);
}

static void mms__bf16_to_f32_neon(const mms_bf16_t *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(x + i), 16)));
    for (; i < n; i++) y[i] = mms_bf16_to_fp32(x[i]);
}

static int64_t mms__binary_f32_neon(enum mms_op op, int64_t n, float *z, const float *x, const float *y) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t a = vld1q_f32(x + i), b = vld1q_f32(y + i);
        switch (op) {
            case MMS_OP_ADD: vst1q_f32(z + i, vaddq_f32(a, b)); break;
            case MMS_OP_SUB: vst1q_f32(z + i, vsubq_f32(a, b)); break;
            case MMS_OP_MUL: vst1q_f32(z + i, vmulq_f32(a, b)); break;
            default:         vst1q_f32(z + i, vdivq_f32(a, b)); break;
        }
    }
    return i;
}
#endif

/* -- dispatching names -- */

static float mms__vec_dot_f32(int64_t n, const float *x, const float *y) {
#if MMS__HAVE_AVX2
    if (mms__avx2()) return mms__dot_f32_avx2(n, x, y);
#endif
#if MMS__HAVE_NEON
    if (mms__neon()) return mms__dot_f32_neon(n, x, y);
#endif
    return mms__dot_f32_scalar(n, x, y);
}

/* z = x op y for op in ADD, SUB, MUL, DIV; z may alias x or y */
static void mms__vec_binary_f32(enum mms_op op, int64_t n, float *z, const float *x, const float *y) {
    int64_t i = 0;
#if MMS__HAVE_AVX2
    if (mms__avx2()) i = mms__binary_f32_avx2(op, n, z, x, y);
#endif
#if MMS__HAVE_NEON
    if (mms__neon()) i = mms__binary_f32_neon(op, n, z, x, y);
#endif
    switch (op) {                      /* the scalar path, and the SIMD paths' tails */
        case MMS_OP_ADD: for (; i < n; i++) z[i] = x[i] + y[i]; break;
        case MMS_OP_SUB: for (; i < n; i++) z[i] = x[i] - y[i]; break;
        case MMS_OP_MUL: for (; i < n; i++) z[i] = x[i] * y[i]; break;
        default:         for (; i < n; i++) z[i] = x[i] / y[i]; break;
    }
}

/* n contiguous elements of a float type to f32 */
static void mms__to_f32(enum mms_type type, const void *src, float *dst, int64_t n) {
#if MMS__HAVE_AVX2
    if (mms__avx2()) {
        if (type == MMS_TYPE_F16)  { mms__f16_to_f32_avx2((const mms_fp16_t *)src, dst, n); return; }
        if (type == MMS_TYPE_BF16) { mms__bf16_to_f32_avx2((const mms_bf16_t *)src, dst, n); return; }
    }
#endif
#if MMS__HAVE_NEON
    if (mms__neon()) {
        if (type == MMS_TYPE_F16)  { mms__f16_to_f32_neon((const mms_fp16_t *)src, dst, n); return; }
        if (type == MMS_TYPE_BF16) { mms__bf16_to_f32_neon((const mms_bf16_t *)src, dst, n); return; }
    }
#endif
    mms__type_traits[type].to_float(src, dst, n);
}

/* n f32 values to contiguous elements of a float type */
static void mms__from_f32(enum mms_type type, const float *src, void *dst, int64_t n) {
#if MMS__HAVE_AVX2
    if (mms__avx2() && type == MMS_TYPE_F16) { mms__f32_to_f16_avx2(src, (mms_fp16_t *)dst, n); return; }
#endif
#if MMS__HAVE_NEON
    if (mms__neon() && type == MMS_TYPE_F16) { mms__f32_to_f16_neon(src, (mms_fp16_t *)dst, n); return; }
#endif
    mms__type_traits[type].from_float(src, dst, n);
}

/* -- the unary ops, one value (the scalar path, and TANH everywhere) -- */

static const double mms__sqrt_half = 0.70710678118654752440;   /* 1/sqrt(2) */
static const double mms__sqrt_2_over_pi = 0.79788456080286535588;

static float mms__unary_scalar(enum mms_op op, float x, float s) {
    switch (op) {
        case MMS_OP_SCALE:     return x * s;
        case MMS_OP_SQR:       return x * x;
        case MMS_OP_SQRT:      return sqrtf(x);
        case MMS_OP_EXP:       return expf(x);
        case MMS_OP_TANH:      return tanhf(x);
        case MMS_OP_SILU:      return x / (1.0f + expf(-x));
        case MMS_OP_GELU:      return 0.5f * x * (1.0f + erff(x * (float)mms__sqrt_half));
        case MMS_OP_GELU_TANH: return 0.5f * x * (1.0f + tanhf((float)mms__sqrt_2_over_pi * (x + 0.044715f * x * x * x)));
        default:               mms__abort(__FILE__, __LINE__, "%s is not a unary op", mms_op_name(op));
    }
}
/* The rows of a GEMM register block (both SIMD sets write theirs once per row count R). */
#define MMS__GR_ROWS1(X) X(0)
#define MMS__GR_ROWS2(X) X(0) X(1)
#define MMS__GR_ROWS3(X) X(0) X(1) X(2)
#define MMS__GR_ROWS4(X) X(0) X(1) X(2) X(3)
#define MMS__GR_ROWS5(X) X(0) X(1) X(2) X(3) X(4)
#define MMS__GR_ROWS6(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define MMS__GR_ROWS7(X) MMS__GR_ROWS6(X) X(6)
#define MMS__GR_ROWS8(X) MMS__GR_ROWS7(X) X(7)
#define MMS__GR_ROWS9(X) MMS__GR_ROWS8(X) X(8)
#define MMS__GR_ROWS10(X) MMS__GR_ROWS9(X) X(9)
#define MMS__GR_ROWS11(X) MMS__GR_ROWS10(X) X(10)
#define MMS__GR_ROWS12(X) MMS__GR_ROWS11(X) X(11)

/* -- exp, erf and the activations, 8 lanes at a time -- */

#if MMS__HAVE_AVX2
/* exp(x) = 2^n p(r), n = round(x log2 e), r = x - n ln 2 in two parts, p Cephes' degree-6 fit
   (about 1 ulp). Below -87.3 the result is exactly 0 (so masked -inf scores weigh nothing);
   above 88.7 it saturates at about 3.4e38 instead of inf. NaN stays NaN (the clamps and the
   range mask would turn it into 0). */
static MMS__AVX2_INLINE __m256 mms__exp8(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.33654f), x0 = x;
    __m256 keep = _mm256_cmp_ps(x, lo, _CMP_GE_OQ), n, r, r2, p;
    __m256i e;
    x = _mm256_min_ps(_mm256_max_ps(x, lo), _mm256_set1_ps(88.3762626647949f));
    n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    r2 = _mm256_mul_ps(r, r);
    p = _mm256_fmadd_ps(_mm256_set1_ps(1.9875691500e-4f), r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_or_ps(_mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), keep), _mm256_cmp_ps(x0, x0, _CMP_UNORD_Q));
}

/* x / (1 + exp(-a x)): silu with a = 1; gelu_tanh is x / (1 + exp(-2u)) with u its tanh argument */
static MMS__AVX2_INLINE __m256 mms__sigmoid_mul8(__m256 x, __m256 ax) {
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), mms__exp8(_mm256_sub_ps(_mm256_setzero_ps(), ax))));
}

/* gelu(x) = x/2 (1 + erf(x/sqrt 2)) through erfc(z), z = |x|/sqrt 2, with the Chebyshev fit of
   Numerical Recipes (relative error < 1.2e-7 everywhere, so the negative tail stays accurate). */
static MMS__AVX2_INLINE __m256 mms__gelu8(__m256 x) {
    static const float c[10] = { -1.26551223f, 1.00002368f, 0.37409196f, 0.09678418f, -0.18628806f,
                                 0.27886807f, -1.13520398f, 1.48851587f, -0.82215223f, 0.17087277f };
    const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
    __m256 z = _mm256_mul_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(0.70710678118654752f));
    __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(half, z, one)), p = _mm256_set1_ps(c[9]), erfc, neg;
    int i;
    for (i = 8; i >= 0; i--) p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(c[i]));
    erfc = _mm256_mul_ps(t, mms__exp8(_mm256_fnmadd_ps(z, z, p)));
    neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
    return _mm256_mul_ps(_mm256_mul_ps(half, x), _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(2.0f), erfc), erfc, neg));
}

/* One unary op on 8 lanes (every unary op but TANH, which keeps the scalar body for its accuracy near 0). */
static MMS__AVX2_INLINE __m256 mms__unary8(enum mms_op op, __m256 x, __m256 s) {
    switch (op) {
        case MMS_OP_SCALE:     return _mm256_mul_ps(x, s);
        case MMS_OP_SQR:       return _mm256_mul_ps(x, x);
        case MMS_OP_SQRT:      return _mm256_sqrt_ps(x);
        case MMS_OP_EXP:       return mms__exp8(x);
        case MMS_OP_SILU:      return mms__sigmoid_mul8(x, x);
        case MMS_OP_GELU:      return mms__gelu8(x);
        default: {             /* GELU_TANH */
            __m256 u = _mm256_mul_ps(x, _mm256_fmadd_ps(_mm256_mul_ps(x, x), _mm256_set1_ps(0.044715f), _mm256_set1_ps(1.0f)));
            return mms__sigmoid_mul8(x, _mm256_mul_ps(u, _mm256_set1_ps(2.0f * 0.79788456080286535588f)));
        }
    }
}

static MMS__TARGET_AVX2 void mms__unary_f32_avx2(enum mms_op op, int64_t n, float *y, const float *x, float s) {
    const __m256 vs = _mm256_set1_ps(s);
    float tx[8], ty[8];
    int64_t i = 0, j;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, mms__unary8(op, _mm256_loadu_ps(x + i), vs));
    if (i < n) {                       /* the tail through a padded copy: the same code, so the same results */
        for (j = 0; j < 8; j++) tx[j] = i + j < n ? x[i + j] : 0.0f;
        _mm256_storeu_ps(ty, mms__unary8(op, _mm256_loadu_ps(tx), vs));
        for (j = 0; i + j < n; j++) y[i + j] = ty[j];
    }
}

static MMS__TARGET_AVX2 float mms__max_f32_avx2(int64_t n, const float *x) {
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0;
    __m128 h;
    int64_t i = 0;
    float m;
    for (; i + 16 <= n; i += 16) {
        m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
        m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + i + 8));
    }
    m0 = _mm256_max_ps(m0, m1);
    h = _mm_max_ps(_mm256_castps256_ps128(m0), _mm256_extractf128_ps(m0, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    m = _mm_cvtss_f32(h);
    for (; i < n; i++) if (x[i] > m) m = x[i];
    return m;
}

/* y = exp(x - m), returns the sum; y may be x */
static MMS__TARGET_AVX2 float mms__exp_sum_f32_avx2(int64_t n, float *y, const float *x, float m) {
    const __m256 vm = _mm256_set1_ps(m);
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    float s;
    for (; i + 16 <= n; i += 16) {
        __m256 e0 = mms__exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm)), e1 = mms__exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vm));
        _mm256_storeu_ps(y + i, e0);
        _mm256_storeu_ps(y + i + 8, e1);
        s0 = _mm256_add_ps(s0, e0);
        s1 = _mm256_add_ps(s1, e1);
    }
    for (; i + 8 <= n; i += 8) {
        __m256 e0 = mms__exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        _mm256_storeu_ps(y + i, e0);
        s0 = _mm256_add_ps(s0, e0);
    }
    s = mms__hsum256(_mm256_add_ps(s0, s1));
    for (; i < n; i++) { y[i] = expf(x[i] - m); s += y[i]; }
    return s;
}

/* y = x * a + b (b may be NULL) */
static MMS__TARGET_AVX2 void mms__axpb_f32_avx2(int64_t n, float *y, const float *x, float a, const float *b) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    if (b) for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), va, _mm256_loadu_ps(b + i)));
    else   for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), va));
    for (; i < n; i++) y[i] = x[i] * a + (b ? b[i] : 0.0f);
}

/* Sums for the norms, in double like the scalar path: sum(x) and sum((x - c)^2). */
static MMS__TARGET_AVX2 void mms__sums_f64_avx2(int64_t n, const float *x, double c, double *sum, double *sq) {
    const __m256d vc = _mm256_set1_pd(c);
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, q0 = s0, q1 = s0;
    double t[4], ts = 0.0, tq = 0.0;
    int64_t i = 0;
    int j;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), b = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        const __m256d da = _mm256_sub_pd(a, vc), db = _mm256_sub_pd(b, vc);
        s0 = _mm256_add_pd(s0, a);
        s1 = _mm256_add_pd(s1, b);
        q0 = _mm256_fmadd_pd(da, da, q0);
        q1 = _mm256_fmadd_pd(db, db, q1);
    }
    _mm256_storeu_pd(t, _mm256_add_pd(s0, s1));
    for (j = 0; j < 4; j++) ts += t[j];
    _mm256_storeu_pd(t, _mm256_add_pd(q0, q1));
    for (j = 0; j < 4; j++) tq += t[j];
    for (; i < n; i++) { ts += x[i]; tq += ((double)x[i] - c) * ((double)x[i] - c); }
    *sum = ts;
    *sq = tq;
}

/* y = (x - c) * s */
static MMS__TARGET_AVX2 void mms__shift_scale_f32_avx2(int64_t n, float *y, const float *x, float c, float s) {
    const __m256 vc = _mm256_set1_ps(c), vs = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vc), vs));
    for (; i < n; i++) y[i] = (x[i] - c) * s;
}

/* The register block of the small GEMMs (flash attention): C[r][0..15] (+)= sum_k A[r lda + k]
   B[k ldb + 0..15] for R rows; per k, 2 loads and R broadcasts feed 2R FMAs. One body, written
   once for each R so the accumulators stay in registers. */
#define MMS__GR_DECL(r)  __m256 c##r##0 = _mm256_setzero_ps(), c##r##1 = _mm256_setzero_ps();
#define MMS__GR_STEP(r)  { __m256 a = _mm256_broadcast_ss(A + r * lda + k);                                  \
                           c##r##0 = _mm256_fmadd_ps(a, b0, c##r##0); c##r##1 = _mm256_fmadd_ps(a, b1, c##r##1); }
#define MMS__GR_STORE(r) if (acc) { c##r##0 = _mm256_add_ps(c##r##0, _mm256_loadu_ps(C + r * ldc));               \
                                    c##r##1 = _mm256_add_ps(c##r##1, _mm256_loadu_ps(C + r * ldc + 8)); }        \
                         _mm256_storeu_ps(C + r * ldc, c##r##0); _mm256_storeu_ps(C + r * ldc + 8, c##r##1);
#define MMS__GR_DEFINE(R)                                                                                           \
    static MMS__TARGET_AVX2 void mms__gemm_r##R##x16_avx2(int64_t K, const float *A, int64_t lda, const float *B,   \
                                                          int64_t ldb, float *C, int64_t ldc, int acc) {          \
        int64_t k;                                                                                                  \
        MMS__GR_ROWS##R(MMS__GR_DECL)                                                                               \
        for (k = 0; k < K; k++) {                                                                                   \
            const __m256 b0 = _mm256_loadu_ps(B + k * ldb), b1 = _mm256_loadu_ps(B + k * ldb + 8);                 \
            MMS__GR_ROWS##R(MMS__GR_STEP)                                                                           \
        }                                                                                                           \
        MMS__GR_ROWS##R(MMS__GR_STORE)                                                                              \
    }
MMS__GR_DEFINE(1) MMS__GR_DEFINE(2) MMS__GR_DEFINE(3) MMS__GR_DEFINE(4) MMS__GR_DEFINE(5) MMS__GR_DEFINE(6)

static void (*const mms__gemm_rows_avx2[7])(int64_t, const float *, int64_t, const float *, int64_t, float *, int64_t, int) = {
    NULL, mms__gemm_r1x16_avx2, mms__gemm_r2x16_avx2, mms__gemm_r3x16_avx2, mms__gemm_r4x16_avx2, mms__gemm_r5x16_avx2, mms__gemm_r6x16_avx2 };

/* The AVX-512 register block: C[r][0..31] (+)= sum_k A[r lda + k] B[k][0..31] for R <= 12 rows,
   the 32 columns from two panels of 16 (B0, B1): per k 2 loads and R broadcasts feed 2R FMAs of
   16 lanes, 24 accumulators of the 32 zmm registers at R = 12. Each C element sums over k in the
   order of the AVX2 block, one FMA per k, so both sets give the same bits. */
#define MMS__GZ_DECL(r)  __m512 c##r##0 = _mm512_setzero_ps(), c##r##1 = _mm512_setzero_ps();
#define MMS__GZ_STEP(r)  { const __m512 a = _mm512_set1_ps(A[r * lda + k]);                                         \
                           c##r##0 = _mm512_fmadd_ps(a, b0, c##r##0); c##r##1 = _mm512_fmadd_ps(a, b1, c##r##1); }
#define MMS__GZ_STORE(r) if (acc) { c##r##0 = _mm512_add_ps(c##r##0, _mm512_loadu_ps(C + r * ldc));               \
                                    c##r##1 = _mm512_add_ps(c##r##1, _mm512_loadu_ps(C + r * ldc + 16)); }       \
                         _mm512_storeu_ps(C + r * ldc, c##r##0); _mm512_storeu_ps(C + r * ldc + 16, c##r##1);
#define MMS__GZ_DEFINE(R)                                                                                           \
    static MMS__TARGET_AVX512 void mms__gemm_r##R##x32_avx512(int64_t K, const float *A, int64_t lda, const float *B0, \
                                                              const float *B1, int64_t ldb, float *C, int64_t ldc, int acc) { \
        int64_t k;                                                                                                  \
        MMS__GR_ROWS##R(MMS__GZ_DECL)                                                                               \
        for (k = 0; k < K; k++) {                                                                                   \
            const __m512 b0 = _mm512_loadu_ps(B0 + k * ldb), b1 = _mm512_loadu_ps(B1 + k * ldb);                   \
            MMS__GR_ROWS##R(MMS__GZ_STEP)                                                                           \
        }                                                                                                           \
        MMS__GR_ROWS##R(MMS__GZ_STORE)                                                                              \
    }
MMS__GZ_DEFINE(1) MMS__GZ_DEFINE(2) MMS__GZ_DEFINE(3) MMS__GZ_DEFINE(4) MMS__GZ_DEFINE(5) MMS__GZ_DEFINE(6)
MMS__GZ_DEFINE(7) MMS__GZ_DEFINE(8) MMS__GZ_DEFINE(9) MMS__GZ_DEFINE(10) MMS__GZ_DEFINE(11) MMS__GZ_DEFINE(12)
#undef MMS__GZ_DEFINE
#undef MMS__GZ_STORE
#undef MMS__GZ_STEP
#undef MMS__GZ_DECL

typedef void (*mms__gemm_rows2_fn)(int64_t K, const float *A, int64_t lda, const float *B0, const float *B1, int64_t ldb, float *C, int64_t ldc, int acc);
static const mms__gemm_rows2_fn mms__gemm_rows_avx512[13] = {
    NULL, mms__gemm_r1x32_avx512, mms__gemm_r2x32_avx512, mms__gemm_r3x32_avx512, mms__gemm_r4x32_avx512, mms__gemm_r5x32_avx512,
    mms__gemm_r6x32_avx512, mms__gemm_r7x32_avx512, mms__gemm_r8x32_avx512, mms__gemm_r9x32_avx512, mms__gemm_r10x32_avx512,
    mms__gemm_r11x32_avx512, mms__gemm_r12x32_avx512 };

/* out[r] = dot(row r of x, y) for 4 rows ldx elements apart, f32 or f16: y is loaded once for the
   4 rows, and the weights stream as 4 sequential lines at once (faster than one row at a time). */
#define MMS__DOT4_BODY(LOAD, CVT1)                                                                                 \
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                                                    \
    int64_t i = 0;                                                                                                 \
    int r;                                                                                                         \
    for (; i + 8 <= n; i += 8) {                                                                                   \
        const __m256 vy = _mm256_loadu_ps(y + i);                                                                  \
        a0 = _mm256_fmadd_ps(LOAD(x + i), vy, a0);                                                                 \
        a1 = _mm256_fmadd_ps(LOAD(x + ldx + i), vy, a1);                                                           \
        a2 = _mm256_fmadd_ps(LOAD(x + 2 * ldx + i), vy, a2);                                                       \
        a3 = _mm256_fmadd_ps(LOAD(x + 3 * ldx + i), vy, a3);                                                       \
    }                                                                                                              \
    out[0] = mms__hsum256(a0); out[1] = mms__hsum256(a1); out[2] = mms__hsum256(a2); out[3] = mms__hsum256(a3);    \
    for (; i < n; i++) for (r = 0; r < 4; r++) out[r] += CVT1(x[r * ldx + i]) * y[i];
#define MMS__LOAD_F32(p) _mm256_loadu_ps(p)
#define MMS__LOAD_F16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define MMS__CVT_F32(v)  (v)
static MMS__TARGET_AVX2 void mms__dot4_f32_avx2(int64_t n, const float *x, int64_t ldx, const float *y, float *out) {
    MMS__DOT4_BODY(MMS__LOAD_F32, MMS__CVT_F32)
}
static MMS__TARGET_AVX2 void mms__dot4_f16_avx2(int64_t n, const mms_fp16_t *x, int64_t ldx, const float *y, float *out) {
    MMS__DOT4_BODY(MMS__LOAD_F16, mms_fp16_to_fp32)
}
/* out[c * 2 + r] = dot(row r of x, column c of y) for 2 rows ldx elements apart and 4 columns: each
   weight vector is loaded (and converted) once for the 4 columns, the decode GEMV of several
   sequences. Each (row, column) sums in the order of MMS__DOT4_BODY, so a column's results do not
   depend on how many columns run with it. */
#define MMS__DOT2X4_BODY(LOAD, CVT1)                                                                               \
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00; \
    int64_t i = 0;                                                                                                 \
    int r, c;                                                                                                      \
    for (; i + 8 <= n; i += 8) {                                                                                   \
        const __m256 w0 = LOAD(x + i), w1 = LOAD(x + ldx + i);                                                     \
        __m256 vy = _mm256_loadu_ps(y[0] + i);                                                                     \
        a00 = _mm256_fmadd_ps(w0, vy, a00); a01 = _mm256_fmadd_ps(w1, vy, a01);                                   \
        vy = _mm256_loadu_ps(y[1] + i);                                                                            \
        a10 = _mm256_fmadd_ps(w0, vy, a10); a11 = _mm256_fmadd_ps(w1, vy, a11);                                   \
        vy = _mm256_loadu_ps(y[2] + i);                                                                            \
        a20 = _mm256_fmadd_ps(w0, vy, a20); a21 = _mm256_fmadd_ps(w1, vy, a21);                                   \
        vy = _mm256_loadu_ps(y[3] + i);                                                                            \
        a30 = _mm256_fmadd_ps(w0, vy, a30); a31 = _mm256_fmadd_ps(w1, vy, a31);                                   \
    }                                                                                                              \
    out[0] = mms__hsum256(a00); out[1] = mms__hsum256(a01); out[2] = mms__hsum256(a10); out[3] = mms__hsum256(a11); \
    out[4] = mms__hsum256(a20); out[5] = mms__hsum256(a21); out[6] = mms__hsum256(a30); out[7] = mms__hsum256(a31); \
    for (; i < n; i++) for (c = 0; c < 4; c++) for (r = 0; r < 2; r++) out[c * 2 + r] += CVT1(x[r * ldx + i]) * y[c][i];
static MMS__TARGET_AVX2 void mms__dot2x4_f32_avx2(int64_t n, const float *x, int64_t ldx, const float *const *y, float *out) {
    MMS__DOT2X4_BODY(MMS__LOAD_F32, MMS__CVT_F32)
}
static MMS__TARGET_AVX2 void mms__dot2x4_f16_avx2(int64_t n, const mms_fp16_t *x, int64_t ldx, const float *const *y, float *out) {
    MMS__DOT2X4_BODY(MMS__LOAD_F16, mms_fp16_to_fp32)
}
#undef MMS__DOT2X4_BODY
#undef MMS__DOT4_BODY
#undef MMS__LOAD_F32
#undef MMS__LOAD_F16
#undef MMS__CVT_F32

static MMS__TARGET_AVX2 float mms__dot_f16_f32_avx2(int64_t n, const mms_fp16_t *x, const float *y) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int64_t i = 0;
    float s;
#define MMS__H8(o) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i + (o))))
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(MMS__H8(0), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(MMS__H8(8), _mm256_loadu_ps(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(MMS__H8(16), _mm256_loadu_ps(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(MMS__H8(24), _mm256_loadu_ps(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(MMS__H8(0), _mm256_loadu_ps(y + i), a0);
#undef MMS__H8
    s = mms__hsum256(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++) s += mms_fp16_to_fp32(x[i]) * y[i];
    return s;
}

/* 8x8 transpose of f32 from rows of src (stride lds) into rows of dst (stride ldd) */
static MMS__TARGET_AVX2 void mms__transpose8_avx2(const float *src, int64_t lds, float *dst, int64_t ldd) {
    __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + lds), r2 = _mm256_loadu_ps(src + 2 * lds),
           r3 = _mm256_loadu_ps(src + 3 * lds), r4 = _mm256_loadu_ps(src + 4 * lds), r5 = _mm256_loadu_ps(src + 5 * lds),
           r6 = _mm256_loadu_ps(src + 6 * lds), r7 = _mm256_loadu_ps(src + 7 * lds);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
           t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
           t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    r0 = _mm256_shuffle_ps(t0, t2, 0x44); r1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    r2 = _mm256_shuffle_ps(t1, t3, 0x44); r3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    r4 = _mm256_shuffle_ps(t4, t6, 0x44); r5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    r6 = _mm256_shuffle_ps(t5, t7, 0x44); r7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(dst,           _mm256_permute2f128_ps(r0, r4, 0x20));
    _mm256_storeu_ps(dst + ldd,     _mm256_permute2f128_ps(r1, r5, 0x20));
    _mm256_storeu_ps(dst + 2 * ldd, _mm256_permute2f128_ps(r2, r6, 0x20));
    _mm256_storeu_ps(dst + 3 * ldd, _mm256_permute2f128_ps(r3, r7, 0x20));
    _mm256_storeu_ps(dst + 4 * ldd, _mm256_permute2f128_ps(r0, r4, 0x31));
    _mm256_storeu_ps(dst + 5 * ldd, _mm256_permute2f128_ps(r1, r5, 0x31));
    _mm256_storeu_ps(dst + 6 * ldd, _mm256_permute2f128_ps(r2, r6, 0x31));
    _mm256_storeu_ps(dst + 7 * ldd, _mm256_permute2f128_ps(r3, r7, 0x31));
}
#endif

#if MMS__HAVE_NEON
/* exp, erf and the activations on 4 lanes: the same fits, clamps and steps as the 8-lane bodies
   above (see mms__exp8, mms__gelu8), so both SIMD sets agree to rounding. */
static MMS__NEON_INLINE float32x4_t mms__exp4(float32x4_t x) {
    const float32x4_t lo = vdupq_n_f32(-87.33654f);
    const uint32x4_t keep = vcgeq_f32(x, lo), nan = vmvnq_u32(vceqq_f32(x, x));
    float32x4_t n, r, r2, p;
    int32x4_t e;
    x = vminq_f32(vmaxq_f32(x, lo), vdupq_n_f32(88.3762626647949f));
    n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
    r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
    r2 = vmulq_f32(r, r);
    p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), vdupq_n_f32(1.9875691500e-4f), r);
    p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
    p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
    p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, r2);
    e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vreinterpretq_f32_u32(vorrq_u32(vandq_u32(vreinterpretq_u32_f32(vmulq_f32(p, vreinterpretq_f32_s32(e))), keep), nan));
}

static MMS__NEON_INLINE float32x4_t mms__sigmoid_mul4(float32x4_t x, float32x4_t ax) {
    return vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), mms__exp4(vnegq_f32(ax))));
}

static MMS__NEON_INLINE float32x4_t mms__gelu4(float32x4_t x) {
    static const float c[10] = { -1.26551223f, 1.00002368f, 0.37409196f, 0.09678418f, -0.18628806f,
                                 0.27886807f, -1.13520398f, 1.48851587f, -0.82215223f, 0.17087277f };
    const float32x4_t one = vdupq_n_f32(1.0f), half = vdupq_n_f32(0.5f);
    const float32x4_t z = vmulq_f32(vabsq_f32(x), vdupq_n_f32(0.70710678118654752f));
    const float32x4_t t = vdivq_f32(one, vfmaq_f32(one, half, z));
    float32x4_t p = vdupq_n_f32(c[9]), erfc;
    int i;
    for (i = 8; i >= 0; i--) p = vfmaq_f32(vdupq_n_f32(c[i]), p, t);
    erfc = vmulq_f32(t, mms__exp4(vfmsq_f32(p, z, z)));
    return vmulq_f32(vmulq_f32(half, x), vbslq_f32(vcltq_f32(x, vdupq_n_f32(0.0f)), erfc, vsubq_f32(vdupq_n_f32(2.0f), erfc)));
}

static MMS__NEON_INLINE float32x4_t mms__unary4(enum mms_op op, float32x4_t x, float s) {
    switch (op) {
        case MMS_OP_SCALE:     return vmulq_n_f32(x, s);
        case MMS_OP_SQR:       return vmulq_f32(x, x);
        case MMS_OP_SQRT:      return vsqrtq_f32(x);
        case MMS_OP_EXP:       return mms__exp4(x);
        case MMS_OP_SILU:      return mms__sigmoid_mul4(x, x);
        case MMS_OP_GELU:      return mms__gelu4(x);
        default: {             /* GELU_TANH */
            const float32x4_t u = vmulq_f32(x, vfmaq_f32(vdupq_n_f32(1.0f), vmulq_f32(x, x), vdupq_n_f32(0.044715f)));
            return mms__sigmoid_mul4(x, vmulq_n_f32(u, 2.0f * 0.79788456080286535588f));
        }
    }
}

static void mms__unary_f32_neon(enum mms_op op, int64_t n, float *y, const float *x, float s) {
    float tx[4], ty[4];
    int64_t i = 0, j;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, mms__unary4(op, vld1q_f32(x + i), s));
    if (i < n) {                       /* the tail through a padded copy, as on AVX2 */
        for (j = 0; j < 4; j++) tx[j] = i + j < n ? x[i + j] : 0.0f;
        vst1q_f32(ty, mms__unary4(op, vld1q_f32(tx), s));
        for (j = 0; i + j < n; j++) y[i + j] = ty[j];
    }
}

/* maxNum skips NaN, as the scalar loop does */
static float mms__max_f32_neon(int64_t n, const float *x) {
    float32x4_t m0 = vdupq_n_f32(-INFINITY), m1 = m0;
    int64_t i = 0;
    float m;
    for (; i + 8 <= n; i += 8) {
        m0 = vmaxnmq_f32(m0, vld1q_f32(x + i));
        m1 = vmaxnmq_f32(m1, vld1q_f32(x + i + 4));
    }
    m = vmaxnmvq_f32(vmaxnmq_f32(m0, m1));
    for (; i < n; i++) if (x[i] > m) m = x[i];
    return m;
}

static float mms__exp_sum_f32_neon(int64_t n, float *y, const float *x, float m) {
    const float32x4_t vm = vdupq_n_f32(m);
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0;
    int64_t i = 0;
    float s;
    for (; i + 8 <= n; i += 8) {
        const float32x4_t e0 = mms__exp4(vsubq_f32(vld1q_f32(x + i), vm)), e1 = mms__exp4(vsubq_f32(vld1q_f32(x + i + 4), vm));
        vst1q_f32(y + i, e0);
        vst1q_f32(y + i + 4, e1);
        s0 = vaddq_f32(s0, e0);
        s1 = vaddq_f32(s1, e1);
    }
    for (; i + 4 <= n; i += 4) {
        const float32x4_t e0 = mms__exp4(vsubq_f32(vld1q_f32(x + i), vm));
        vst1q_f32(y + i, e0);
        s0 = vaddq_f32(s0, e0);
    }
    s = vaddvq_f32(vaddq_f32(s0, s1));
    for (; i < n; i++) { y[i] = expf(x[i] - m); s += y[i]; }
    return s;
}

static void mms__axpb_f32_neon(int64_t n, float *y, const float *x, float a, const float *b) {
    int64_t i = 0;
    if (b) for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(b + i), vld1q_f32(x + i), a));
    else   for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_n_f32(vld1q_f32(x + i), a));
    for (; i < n; i++) y[i] = x[i] * a + (b ? b[i] : 0.0f);
}

static void mms__sums_f64_neon(int64_t n, const float *x, double c, double *sum, double *sq) {
    const float64x2_t vc = vdupq_n_f64(c);
    float64x2_t s0 = vdupq_n_f64(0.0), s1 = s0, q0 = s0, q1 = s0;
    double ts, tq;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vld1q_f32(x + i);
        const float64x2_t a = vcvt_f64_f32(vget_low_f32(v)), b = vcvt_high_f64_f32(v);
        const float64x2_t da = vsubq_f64(a, vc), db = vsubq_f64(b, vc);
        s0 = vaddq_f64(s0, a);
        s1 = vaddq_f64(s1, b);
        q0 = vfmaq_f64(q0, da, da);
        q1 = vfmaq_f64(q1, db, db);
    }
    ts = vaddvq_f64(vaddq_f64(s0, s1));
    tq = vaddvq_f64(vaddq_f64(q0, q1));
    for (; i < n; i++) { ts += x[i]; tq += ((double)x[i] - c) * ((double)x[i] - c); }
    *sum = ts;
    *sq = tq;
}

static void mms__shift_scale_f32_neon(int64_t n, float *y, const float *x, float c, float s) {
    const float32x4_t vc = vdupq_n_f32(c);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_n_f32(vsubq_f32(vld1q_f32(x + i), vc), s));
    for (; i < n; i++) y[i] = (x[i] - c) * s;
}

/* The GEMM register block on 4-lane vectors: R rows of 16 columns are 4R accumulators (24 of the
   32 registers at R = 6), fed per k by 4 loads of B and R scalars of A. */
#define MMS__GRN_DECL(r)  float32x4_t c##r##0 = vdupq_n_f32(0.0f), c##r##1 = c##r##0, c##r##2 = c##r##0, c##r##3 = c##r##0;
#define MMS__GRN_STEP(r)  { const float a = A[r * lda + k];                                                      \
                            c##r##0 = vfmaq_n_f32(c##r##0, b0, a); c##r##1 = vfmaq_n_f32(c##r##1, b1, a);          \
                            c##r##2 = vfmaq_n_f32(c##r##2, b2, a); c##r##3 = vfmaq_n_f32(c##r##3, b3, a); }
#define MMS__GRN_STORE(r) if (acc) { c##r##0 = vaddq_f32(c##r##0, vld1q_f32(C + r * ldc));                          \
                                     c##r##1 = vaddq_f32(c##r##1, vld1q_f32(C + r * ldc + 4));                      \
                                     c##r##2 = vaddq_f32(c##r##2, vld1q_f32(C + r * ldc + 8));                      \
                                     c##r##3 = vaddq_f32(c##r##3, vld1q_f32(C + r * ldc + 12)); }                   \
                          vst1q_f32(C + r * ldc, c##r##0); vst1q_f32(C + r * ldc + 4, c##r##1);                     \
                          vst1q_f32(C + r * ldc + 8, c##r##2); vst1q_f32(C + r * ldc + 12, c##r##3);
#define MMS__GRN_DEFINE(R)                                                                                          \
    static void mms__gemm_r##R##x16_neon(int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,       \
                                         float *C, int64_t ldc, int acc) {                                         \
        int64_t k;                                                                                                  \
        MMS__GR_ROWS##R(MMS__GRN_DECL)                                                                              \
        for (k = 0; k < K; k++) {                                                                                   \
            const float *bk = B + k * ldb;                                                                          \
            const float32x4_t b0 = vld1q_f32(bk), b1 = vld1q_f32(bk + 4), b2 = vld1q_f32(bk + 8), b3 = vld1q_f32(bk + 12); \
            MMS__GR_ROWS##R(MMS__GRN_STEP)                                                                          \
        }                                                                                                           \
        MMS__GR_ROWS##R(MMS__GRN_STORE)                                                                             \
    }
MMS__GRN_DEFINE(1) MMS__GRN_DEFINE(2) MMS__GRN_DEFINE(3) MMS__GRN_DEFINE(4) MMS__GRN_DEFINE(5) MMS__GRN_DEFINE(6)

static void (*const mms__gemm_rows_neon[7])(int64_t, const float *, int64_t, const float *, int64_t, float *, int64_t, int) = {
    NULL, mms__gemm_r1x16_neon, mms__gemm_r2x16_neon, mms__gemm_r3x16_neon, mms__gemm_r4x16_neon, mms__gemm_r5x16_neon, mms__gemm_r6x16_neon };

/* 4 rows of weights (f32 or f16) against one column, as the AVX2 dot4 */
#define MMS__DOT4N_BODY(LOAD, CVT1)                                                                                \
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;                                                 \
    int64_t i = 0;                                                                                                 \
    int r;                                                                                                         \
    for (; i + 4 <= n; i += 4) {                                                                                   \
        const float32x4_t vy = vld1q_f32(y + i);                                                                   \
        a0 = vfmaq_f32(a0, LOAD(x + i), vy);                                                                       \
        a1 = vfmaq_f32(a1, LOAD(x + ldx + i), vy);                                                                 \
        a2 = vfmaq_f32(a2, LOAD(x + 2 * ldx + i), vy);                                                             \
        a3 = vfmaq_f32(a3, LOAD(x + 3 * ldx + i), vy);                                                             \
    }                                                                                                              \
    out[0] = vaddvq_f32(a0); out[1] = vaddvq_f32(a1); out[2] = vaddvq_f32(a2); out[3] = vaddvq_f32(a3);            \
    for (; i < n; i++) for (r = 0; r < 4; r++) out[r] += CVT1(x[r * ldx + i]) * y[i];
static void mms__dot4_f32_neon(int64_t n, const float *x, int64_t ldx, const float *y, float *out) {
    MMS__DOT4N_BODY(vld1q_f32, (float))
}
static void mms__dot4_f16_neon(int64_t n, const mms_fp16_t *x, int64_t ldx, const float *y, float *out) {
    MMS__DOT4N_BODY(mms__load_f16x4, mms_fp16_to_fp32)
}
#undef MMS__DOT4N_BODY

static float mms__dot_f16_f32_neon(int64_t n, const mms_fp16_t *x, const float *y) {
    MMS__DOTN_BODY(mms__load_f16x4, mms_fp16_to_fp32)
}
#undef MMS__DOTN_BODY

/* 4x4 transpose: trn pairs rows, the halves then combine */
static void mms__transpose4_neon(const float *src, int64_t lds, float *dst, int64_t ldd) {
    const float32x4x2_t t01 = vtrnq_f32(vld1q_f32(src), vld1q_f32(src + lds));
    const float32x4x2_t t23 = vtrnq_f32(vld1q_f32(src + 2 * lds), vld1q_f32(src + 3 * lds));
    vst1q_f32(dst,           vcombine_f32(vget_low_f32(t01.val[0]), vget_low_f32(t23.val[0])));
    vst1q_f32(dst + ldd,     vcombine_f32(vget_low_f32(t01.val[1]), vget_low_f32(t23.val[1])));
    vst1q_f32(dst + 2 * ldd, vcombine_f32(vget_high_f32(t01.val[0]), vget_high_f32(t23.val[0])));
    vst1q_f32(dst + 3 * ldd, vcombine_f32(vget_high_f32(t01.val[1]), vget_high_f32(t23.val[1])));
}
#endif

/* -- dispatching names of the above -- */


/* y = op(x) for the unary ops (s: SCALE's factor); y may be x */
static void mms__vec_unary_f32(enum mms_op op, int64_t n, float *y, const float *x, float s) {
    int64_t i;
#if MMS__HAVE_AVX2
    if (mms__avx2() && op != MMS_OP_TANH) { mms__unary_f32_avx2(op, n, y, x, s); return; }
#endif
#if MMS__HAVE_NEON
    if (mms__neon() && op != MMS_OP_TANH) { mms__unary_f32_neon(op, n, y, x, s); return; }
#endif
    for (i = 0; i < n; i++) y[i] = mms__unary_scalar(op, x[i], s);
}

static float mms__vec_max_f32(int64_t n, const float *x) {
    float m = -INFINITY;
    int64_t i;
#if MMS__HAVE_AVX2
    if (mms__avx2()) return mms__max_f32_avx2(n, x);
#endif
#if MMS__HAVE_NEON
    if (mms__neon()) return mms__max_f32_neon(n, x);
#endif
    for (i = 0; i < n; i++) if (x[i] > m) m = x[i];
    return m;
}

/* y = exp(x - m) and the sum of y (in double on the scalar path); y may be x */
static double mms__vec_exp_sum_f32(int64_t n, float *y, const float *x, float m) {
    double s = 0.0;
    int64_t i;
#if MMS__HAVE_AVX2
    if (mms__avx2()) return (double)mms__exp_sum_f32_avx2(n, y, x, m);
#endif
#if MMS__HAVE_NEON
    if (mms__neon()) return (double)mms__exp_sum_f32_neon(n, y, x, m);
#endif
    for (i = 0; i < n; i++) { y[i] = expf(x[i] - m); s += y[i]; }
    return s;
}

/* sum(x) and sum((x - c)^2) in double */
static void mms__vec_sums_f64(int64_t n, const float *x, double c, double *sum, double *sq) {
    int64_t i;
#if MMS__HAVE_AVX2
    if (mms__avx2()) { mms__sums_f64_avx2(n, x, c, sum, sq); return; }
#endif
#if MMS__HAVE_NEON
    if (mms__neon()) { mms__sums_f64_neon(n, x, c, sum, sq); return; }
#endif
    *sum = *sq = 0.0;
    for (i = 0; i < n; i++) { *sum += x[i]; *sq += ((double)x[i] - c) * ((double)x[i] - c); }
}

/* y = (x - c) * s; y may be x */
static void mms__vec_shift_scale_f32(int64_t n, float *y, const float *x, double c, float s) {
    int64_t i;
#if MMS__HAVE_AVX2
    if (mms__avx2()) { mms__shift_scale_f32_avx2(n, y, x, (float)c, s); return; }
#endif
#if MMS__HAVE_NEON
    if (mms__neon()) { mms__shift_scale_f32_neon(n, y, x, (float)c, s); return; }
#endif
    for (i = 0; i < n; i++) y[i] = (float)((double)x[i] - c) * s;
}

/* y = x * a + b, b optional; y may be x or b */
static void mms__vec_axpb_f32(int64_t n, float *y, const float *x, float a, const float *b) {
    int64_t i;
#if MMS__HAVE_AVX2
    if (mms__avx2()) { mms__axpb_f32_avx2(n, y, x, a, b); return; }
#endif
#if MMS__HAVE_NEON
    if (mms__neon()) { mms__axpb_f32_neon(n, y, x, a, b); return; }
#endif
    for (i = 0; i < n; i++) y[i] = x[i] * a + (b ? b[i] : 0.0f);
}

typedef void (*mms__gemm_rows_fn)(int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, int acc);

/* The SIMD GEMM around a register block of 1..6 rows x 16 columns (rows[R]). */
static void mms__gemm_panels(const mms__gemm_rows_fn *rows, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                             const float *B, int64_t ldb, int64_t bpanel, float *C, int64_t ldc, int acc) {
    float tmp[6 * 16];
    int64_t i, j, r, c;
    for (j = 0; j < N; j += 16) {        /* a 16-column panel of B stays in cache across the row blocks */
        const float *bp = B + j / 16 * bpanel;
        const int64_t nc = MMS__MIN(16, N - j);
        for (i = 0; i < M; i += 6) {
            const int64_t nr = MMS__MIN(6, M - i);
            if (nc == 16) { rows[nr](K, A + i * lda, lda, bp, ldb, C + i * ldc + j, ldc, acc); continue; }
            for (r = 0; r < nr; r++)     /* a last partial panel goes through a full-width block */
                for (c = 0; c < 16; c++) tmp[r * 16 + c] = acc && c < nc ? C[(i + r) * ldc + j + c] : 0.0f;
            rows[nr](K, A + i * lda, lda, bp, ldb, tmp, 16, acc);
            for (r = 0; r < nr; r++) memcpy(C + (i + r) * ldc + j, tmp + r * 16, (size_t)nc * sizeof(float));
        }
    }
}

/* C[M x N] (+ if acc)= A[M x K] B[K x N], row-major with leading dimensions. B comes in panels of
   16 columns, panel p at B + p bpanel (16 for a plain row-major B, 16 ldb for packed panels), and
   must be readable (padded) up to a whole panel; C is written only in its N columns. */
static void mms__gemm_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                          int64_t bpanel, float *C, int64_t ldc, int acc) {
    int64_t i, j, k;
#if MMS__HAVE_AVX2
    if (mms__avx512()) {   /* pairs of whole panels by the 32-column block, what is left by AVX2's */
        for (j = 0; j + 32 <= N; j += 32)
            for (i = 0; i < M; i += 12)
                mms__gemm_rows_avx512[MMS__MIN(12, M - i)](K, A + i * lda, lda, B + j / 16 * bpanel, B + (j / 16 + 1) * bpanel, ldb,
                                                           C + i * ldc + j, ldc, acc);
        if (j < N) mms__gemm_panels(mms__gemm_rows_avx2, M, N - j, K, A, lda, B + j / 16 * bpanel, ldb, bpanel, C + j, ldc, acc);
        return;
    }
    if (mms__avx2()) { mms__gemm_panels(mms__gemm_rows_avx2, M, N, K, A, lda, B, ldb, bpanel, C, ldc, acc); return; }
#endif
#if MMS__HAVE_NEON
    if (mms__neon()) { mms__gemm_panels(mms__gemm_rows_neon, M, N, K, A, lda, B, ldb, bpanel, C, ldc, acc); return; }
#endif
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            const float *b = B + j / 16 * bpanel + j % 16;
            float s = 0.0f;
            for (k = 0; k < K; k++) s += A[i * lda + k] * b[k * ldb];
            C[i * ldc + j] = acc ? C[i * ldc + j] + s : s;
        }
}

/* out[r] = dot(row r of x, y) for 4 rows ldx elements apart, x f32 or f16 (f16 set), and the same
   for one row: the decode GEMV straight from the weights. SIMD sets only (mms__simd). */
static void mms__vec_dot4_rows(bool f16, int64_t n, const void *x, int64_t ldx, const float *y, float *out) {
#if MMS__HAVE_AVX2
    if (mms__avx2()) {
        if (f16) mms__dot4_f16_avx2(n, (const mms_fp16_t *)x, ldx, y, out);
        else     mms__dot4_f32_avx2(n, (const float *)x, ldx, y, out);
        return;
    }
#endif
#if MMS__HAVE_NEON
    if (mms__neon()) {
        if (f16) mms__dot4_f16_neon(n, (const mms_fp16_t *)x, ldx, y, out);
        else     mms__dot4_f32_neon(n, (const float *)x, ldx, y, out);
        return;
    }
#endif
    MMS__UNUSED(f16); MMS__UNUSED(n); MMS__UNUSED(x); MMS__UNUSED(ldx); MMS__UNUSED(y); MMS__UNUSED(out);
    mms__abort(__FILE__, __LINE__, "mms__vec_dot4_rows without SIMD kernels");
}
/* The 2-row x 4-column form of mms__vec_dot4_rows (out[c * 2 + r]), for the sets that have it. */
static bool mms__vec_has_dot2x4(void) {
#if MMS__HAVE_AVX2
    if (mms__avx2()) return true;
#endif
    return false;
}
static void mms__vec_dot2x4(bool f16, int64_t n, const void *x, int64_t ldx, const float *const *y, float *out) {
#if MMS__HAVE_AVX2
    if (mms__avx2()) {
        if (f16) mms__dot2x4_f16_avx2(n, (const mms_fp16_t *)x, ldx, y, out);
        else     mms__dot2x4_f32_avx2(n, (const float *)x, ldx, y, out);
        return;
    }
#endif
    MMS__UNUSED(f16); MMS__UNUSED(n); MMS__UNUSED(x); MMS__UNUSED(ldx); MMS__UNUSED(y); MMS__UNUSED(out);
    mms__abort(__FILE__, __LINE__, "mms__vec_dot2x4 without its kernels");
}
static float mms__vec_dot_row(bool f16, int64_t n, const void *x, const float *y) {
#if MMS__HAVE_AVX2
    if (mms__avx2() && f16) return mms__dot_f16_f32_avx2(n, (const mms_fp16_t *)x, y);
#endif
#if MMS__HAVE_NEON
    if (mms__neon() && f16) return mms__dot_f16_f32_neon(n, (const mms_fp16_t *)x, y);
#endif
    MMS__CHECK(!f16);
    return mms__vec_dot_f32(n, (const float *)x, y);
}

/* dst[c][r] = src[r][c] for r < R, c < Cn, in SIMD blocks of b x b where there are some */
static void mms__transpose_f32(int64_t R, int64_t Cn, const float *src, int64_t lds, float *dst, int64_t ldd) {
    void (*block)(const float *, int64_t, float *, int64_t) = NULL;
    int64_t r = 0, c, b = 0, i;
#if MMS__HAVE_AVX2
    if (mms__avx2()) { block = mms__transpose8_avx2; b = 8; }
#endif
#if MMS__HAVE_NEON
    if (mms__neon()) { block = mms__transpose4_neon; b = 4; }
#endif
    for (; block && r + b <= R; r += b) {
        for (c = 0; c + b <= Cn; c += b) block(src + r * lds + c, lds, dst + c * ldd + r, ldd);
        for (; c < Cn; c++) for (i = 0; i < b; i++) dst[c * ldd + r + i] = src[(r + i) * lds + c];
    }
    for (; r < R; r++)
        for (c = 0; c < Cn; c++) dst[c * ldd + r] = src[r * lds + c];
}

/* -- rows of tensors -- */

static char *mms__row_ptr(const struct mms_tensor *t, int64_t i1, int64_t i2, int64_t i3) {
    return (char *)t->data + i1 * (int64_t)t->nb[1] + i2 * (int64_t)t->nb[2] + i3 * (int64_t)t->nb[3];
}

/* Row (i1, i2, i3) of a float tensor as contiguous f32: a pointer into the tensor when it already
   is one, else the row converted into buf (ne[0] floats). */
static const float *mms__load_row(const struct mms_tensor *t, int64_t i1, int64_t i2, int64_t i3, float *buf) {
    const char *row = mms__row_ptr(t, i1, i2, i3);
    size_t ts = mms_type_size(t->type);
    int64_t i, n = t->ne[0];
    if (t->nb[0] == ts) {
        if (t->type == MMS_TYPE_F32) return (const float *)row;
        mms__to_f32(t->type, row, buf, n);
        return buf;
    }
    for (i = 0; i < n; i++) mms__type_traits[t->type].to_float(row + i * (int64_t)t->nb[0], buf + i, 1);
    return buf;
}

/* Writes n = ne[0] f32 values into row (i1, i2, i3) of a float tensor of any strides. */
static void mms__store_row(const struct mms_tensor *t, int64_t i1, int64_t i2, int64_t i3, const float *src) {
    char *row = mms__row_ptr(t, i1, i2, i3);
    size_t ts = mms_type_size(t->type);
    int64_t i, n = t->ne[0];
    if (t->nb[0] == ts) {
        if (t->type != MMS_TYPE_F32 || (const float *)row != src) mms__from_f32(t->type, src, row, n);
        return;
    }
    for (i = 0; i < n; i++) mms__type_traits[t->type].from_float(src + i, row + i * (int64_t)t->nb[0], 1);
}

/* A writable f32 row of dst: the row itself when dst is contiguous f32, else buf (then store it). */
static float *mms__out_row(const struct mms_tensor *t, int64_t i1, int64_t i2, int64_t i3, float *buf) {
    if (t->type == MMS_TYPE_F32 && t->nb[0] == sizeof(float)) return (float *)mms__row_ptr(t, i1, i2, i3);
    return buf;
}

/* Splits n items into nth near-equal ranges; thread ith gets [*lo, *hi). */
static void mms__split(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t per = n / nth, extra = n % nth;
    *lo = ith * per + MMS__MIN((int64_t)ith, extra);
    *hi = *lo + per + (ith < extra ? 1 : 0);
}

/* Row index r (0 .. nrows-1) to (i1, i2, i3) for a tensor of shape ne. */
static void mms__unravel_row(const int64_t *ne, int64_t r, int64_t *i1, int64_t *i2, int64_t *i3) {
    *i1 = r % ne[1];
    r /= ne[1];
    *i2 = r % ne[2];
    *i3 = r / ne[2];
}
/* ==== end src/backend/cpu/vec.c ==== */

/* ==== begin src/backend/cpu/compute.c ==== */
/* >>compute =======================================================================================
   What a CPU kernel is given: its thread index, its scratch memory and the shared state of the
   graph being computed (a work counter for dynamic scheduling, the first error). */

struct mms__compute_state {
    mms__atomic_int failed;
    enum mms_status status;
    char            error[MMS__ERROR_MAX];
    mms__atomic_int counters[2];   /* alternate between consecutive nodes; see the graph worker */
};

struct mms__compute_params {
    int   ith, nth;
    float *wdata;                  /* this thread's scratch */
    size_t wsize;                  /* bytes of it */
    mms__atomic_int *counter;      /* starts at 0 for this node, shared by its threads */
    struct mms__compute_state *state;
};

/* A kernel that meets bad data (an index out of range) reports it; the graph stops after the node. */
static void mms__compute_fail(const struct mms__compute_params *p, enum mms_status status, const char *fmt, ...) MMS_PRINTF(3, 4);
static void mms__compute_fail(const struct mms__compute_params *p, enum mms_status status, const char *fmt, ...) {
    va_list ap;
    if (mms__atomic_fetch_add(&p->state->failed, 1) != 0) return;   /* keep the first */
    va_start(ap, fmt);
    vsnprintf(p->state->error, sizeof p->state->error, fmt, ap);
    va_end(ap);
    p->state->status = status;
}

/* One element of a float tensor as f32, at any strides. */
static float mms__get_f32(const struct mms_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const char *ptr = mms__row_ptr(t, i1, i2, i3) + i0 * (int64_t)t->nb[0];
    float f;
    switch (t->type) {
        case MMS_TYPE_F32:  memcpy(&f, ptr, sizeof f); return f;
        case MMS_TYPE_F16:  { mms_fp16_t h; memcpy(&h, ptr, sizeof h); return mms_fp16_to_fp32(h); }
        case MMS_TYPE_BF16: { mms_bf16_t h; memcpy(&h, ptr, sizeof h); return mms_bf16_to_fp32(h); }
        default: mms__abort(__FILE__, __LINE__, "mms__get_f32 on a %s tensor", mms_type_name(t->type));
    }
}
/* ==== end src/backend/cpu/compute.c ==== */

/* ==== begin src/backend/cpu/ops_elementwise.c ==== */
/* >>cpu-elementwise ===============================================================================
   Element-wise ops (binary with broadcasting, unary, scale) and the copies (DUP, CONT, CPY).
   Rows are split evenly across threads. Every kernel tolerates dst sharing memory with src[0]
   (same position), which is what in-place reuse by an allocator produces. */

static void mms__cpu_binary(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0], *b = dst->src[1];
    const int64_t ne0 = dst->ne[0], nb0 = b->ne[0];
    float *abuf = p->wdata, *bbuf = abuf + ne0, *obuf = bbuf + ne0;
    int64_t r, lo, hi, k;
    mms__split(mms_nrows(dst), p->ith, p->nth, &lo, &hi);
    for (r = lo; r < hi; r++) {
        int64_t i1, i2, i3;
        const float *x, *y;
        float *out;
        mms__unravel_row(dst->ne, r, &i1, &i2, &i3);
        x = mms__load_row(a, i1, i2, i3, abuf);
        y = mms__load_row(b, i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3], bbuf);
        out = mms__out_row(dst, i1, i2, i3, obuf);
        for (k = 0; k < ne0; k += nb0) mms__vec_binary_f32(dst->op, nb0, out + k, x + k, y);
        if (out == obuf) mms__store_row(dst, i1, i2, i3, out);
    }
}

static void mms__cpu_unary(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0];
    const int64_t ne0 = dst->ne[0];
    const enum mms_op op = dst->op;
    const float s = op == MMS_OP_SCALE ? mms_get_op_params_f32(dst, 0) : 0.0f;
    float *abuf = p->wdata, *obuf = abuf + ne0;
    int64_t r, lo, hi;
    mms__split(mms_nrows(dst), p->ith, p->nth, &lo, &hi);
    for (r = lo; r < hi; r++) {
        int64_t i1, i2, i3;
        const float *x;
        float *out;
        mms__unravel_row(dst->ne, r, &i1, &i2, &i3);
        x = mms__load_row(a, i1, i2, i3, abuf);
        out = mms__out_row(dst, i1, i2, i3, obuf);
        mms__vec_unary_f32(op, ne0, out, x, s);
        if (out == obuf) mms__store_row(dst, i1, i2, i3, out);
    }
}

/* Copies a element by element into dst in logical (row-major) order; shapes may differ when the
   element counts agree. Same types copy bits; float types convert. */
static void mms__cpu_copy(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0];
    const size_t ts = mms_type_size(a->type);
    int64_t lo, hi, r, i;
    if (a->ne[0] == dst->ne[0]) {          /* rows line up one to one */
        mms__split(mms_nrows(a), p->ith, p->nth, &lo, &hi);
        for (r = lo; r < hi; r++) {
            int64_t a1, a2, a3, d1, d2, d3;
            mms__unravel_row(a->ne, r, &a1, &a2, &a3);
            mms__unravel_row(dst->ne, r, &d1, &d2, &d3);
            if (a->type == dst->type) {
                const char *s = mms__row_ptr(a, a1, a2, a3);
                char *d = mms__row_ptr(dst, d1, d2, d3);
                if (a->nb[0] == ts && dst->nb[0] == ts) memmove(d, s, mms_row_size(a->type, a->ne[0]));
                else for (i = 0; i < a->ne[0]; i++) memmove(d + i * (int64_t)dst->nb[0], s + i * (int64_t)a->nb[0], ts);
            } else {
                mms__store_row(dst, d1, d2, d3, mms__load_row(a, a1, a2, a3, p->wdata));
            }
        }
        return;
    }
    if (mms_blck_size(a->type) > 1 || mms_blck_size(dst->type) > 1) {   /* mms_cpy lets only whole rows through */
        mms__compute_fail(p, MMS_ERR_UNSUPPORTED, "%s: block types are copied in whole rows only", mms__tensor_desc(dst).s);
        return;
    }
    mms__split(mms_nelements(a), p->ith, p->nth, &lo, &hi);
    for (i = lo; i < hi; i++) {               /* general case: map flat indices */
        int64_t ai[4], di[4], k, rem;
        const char *s;
        char *d;
        for (rem = i, k = 0; k < 4; k++) { ai[k] = rem % a->ne[k]; rem /= a->ne[k]; }
        for (rem = i, k = 0; k < 4; k++) { di[k] = rem % dst->ne[k]; rem /= dst->ne[k]; }
        s = mms__row_ptr(a, ai[1], ai[2], ai[3]) + ai[0] * (int64_t)a->nb[0];
        d = mms__row_ptr(dst, di[1], di[2], di[3]) + di[0] * (int64_t)dst->nb[0];
        if (a->type == dst->type) {
            memmove(d, s, ts);
        } else {
            float f = mms__get_f32(a, ai[0], ai[1], ai[2], ai[3]);
            mms__type_traits[dst->type].from_float(&f, d, 1);
        }
    }
}
/* ==== end src/backend/cpu/ops_elementwise.c ==== */

/* ==== begin src/backend/cpu/quant_dot.c ==== */
/* >>cpu-quant-dot ==================================================================================
   Decode products with quantized weights (AVX2, NEON): the activation row is quantized once to 8-bit
   blocks (of 32 with an f32 scale for Q8_0 and Q4_0; of 256 with one scale and the sums of each
   16 for the K types, whose sub-block scales then multiply in integers and leave one float FMA
   per 256 values), and each weight row is dotted against it in integers: _mm256_maddubs_epi16 multiplies
   unsigned weight values by signed activations (Q8_0 moves its sign onto the activations; Q4_0's
   - 8 is subtracted inside the int16 products; Q4_K's mins and Q6_K's - 32 come from the
   activations' sums of 16), the block's scale product turns the integer sum into f32. The weights
   stream from memory once, as bytes, never widened to f32; decode is memory-bound when a core's
   dot runs faster than its share of the bandwidth, which per-block scalar work (scale unpacking,
   f16 conversions) easily prevents. The activations' 8-bit rounding adds a relative error of about
   1e-3 per block; the scalar kernel set keeps exact f32 activations. */

/* The most columns (sequences of one decode step) a product takes through the decode kernels
   where they have a several-column form: f16/f32 weights (ops_matmul) and Q8_0 (below). */
#define MMS__DECODE_MAX_COLS 8

struct mms__block_q8_act { float d; int16_t sums[2]; int8_t qs[32]; };   /* sums[i]: qs[16i .. 16i + 15] */
struct mms__block_q8_k { float d; int16_t bsums[16]; int8_t qs[MMS__QK_K]; };   /* bsums[i]: qs[16i .. 16i + 15] */

static bool mms__is_k_type(enum mms_type type) { return type == MMS_TYPE_Q4_K || type == MMS_TYPE_Q6_K; }

/* Bytes of one activation row in the format the weight type's dot takes (the larger for scratch). */
static size_t mms__q8_act_row_size(int64_t K) {
    return MMS__MAX((size_t)(K / 32) * sizeof(struct mms__block_q8_act), (size_t)(K / MMS__QK_K + 1) * sizeof(struct mms__block_q8_k));
}

#if MMS__HAVE_AVX2
/* The rounding of mms__round_int on 8 lanes: truncate, then step away from zero on a fraction of at
   least one half (exact, as there). */
static MMS__AVX2_INLINE __m256i mms__round_int_avx2(__m256 v) {
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), f = _mm256_sub_ps(v, t), one = _mm256_set1_ps(1.0f);
    const __m256 up = _mm256_and_ps(_mm256_cmp_ps(f, _mm256_set1_ps(0.5f), _CMP_GE_OQ), one);
    const __m256 down = _mm256_and_ps(_mm256_cmp_ps(f, _mm256_set1_ps(-0.5f), _CMP_LE_OQ), one);
    return _mm256_cvttps_epi32(_mm256_sub_ps(_mm256_add_ps(t, up), down));
}

/* mms__quantize_block_8bit for n a multiple of 32, to the same bytes; the activations are
   quantized once per product, but by every thread. */
static MMS__TARGET_AVX2 float mms__quantize_block_8bit_avx2(const float *x, int n, int8_t *qs, int16_t *sums16) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 vmax = _mm256_setzero_ps(), vid;
    __m128 m;
    float amax, id;
    int j, k;
    for (j = 0; j < n; j += 8) vmax = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + j), abs_mask), vmax);   /* NaN skipped, as in the scalar loop */
    m = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    amax = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
    id = amax > 0.0f ? 127.0f / amax : 0.0f;
    vid = _mm256_set1_ps(id);
    for (j = 0; j < n; j += 32) {
        __m256i v[4], packed;
        for (k = 0; k < 4; k++) v[k] = mms__round_int_avx2(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * k), vid));
        /* the packs interleave 4-value groups across the 128-bit halves; the dword permute restores the order */
        packed = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
        _mm256_storeu_si256((__m256i *)(qs + j), _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
        if (sums16) {   /* lanes 0 and 1 of the sum: values j..j+15 and j+16..j+31 */
            __m256i h = _mm256_hadd_epi32(_mm256_add_epi32(v[0], v[1]), _mm256_add_epi32(v[2], v[3]));
            __m128i s;
            h = _mm256_hadd_epi32(h, h);
            s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
            sums16[j / 16] = (int16_t)_mm_cvtsi128_si32(s);
            sums16[j / 16 + 1] = (int16_t)_mm_extract_epi32(s, 1);
        }
    }
    return amax / 127.0f;
}
#endif

#if MMS__HAVE_NEON
/* The same bytes on 4 lanes: vcvta rounds half away from zero, as mms__round_int does. */
static float mms__quantize_block_8bit_neon(const float *x, int n, int8_t *qs, int16_t *sums16) {
    float32x4_t vmax = vdupq_n_f32(0.0f);
    float amax, id;
    int j, k;
    for (j = 0; j < n; j += 4) vmax = vmaxnmq_f32(vmax, vabsq_f32(vld1q_f32(x + j)));   /* NaN skipped */
    amax = vmaxnmvq_f32(vmax);
    id = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (j = 0; j < n; j += 16) {
        int32x4_t v[4];
        for (k = 0; k < 4; k++) v[k] = vcvtaq_s32_f32(vmulq_n_f32(vld1q_f32(x + j + 4 * k), id));
        vst1q_s8(qs + j, vcombine_s8(vqmovn_s16(vcombine_s16(vqmovn_s32(v[0]), vqmovn_s32(v[1]))),
                                     vqmovn_s16(vcombine_s16(vqmovn_s32(v[2]), vqmovn_s32(v[3])))));
        if (sums16) sums16[j / 16] = (int16_t)vaddvq_s32(vaddq_s32(vaddq_s32(v[0], v[1]), vaddq_s32(v[2], v[3])));
    }
    return amax / 127.0f;
}
#endif

/* n values to int8 with step amax / 127; returns the step. sums16 (NULL: not wanted) gets the sums
   of each 16 int8 values. */
static float mms__quantize_block_8bit(const float *x, int n, int8_t *qs, int16_t *sums16) {
    float amax = 0.0f, id;
    int j, k;
#if MMS__HAVE_AVX2
    if (mms__avx2() && n % 32 == 0) return mms__quantize_block_8bit_avx2(x, n, qs, sums16);
#endif
#if MMS__HAVE_NEON
    if (mms__neon() && n % 16 == 0) return mms__quantize_block_8bit_neon(x, n, qs, sums16);
#endif
    for (j = 0; j < n; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    id = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (j = 0; j < n; j++) qs[j] = (int8_t)mms__round_int(x[j] * id);
    for (j = 0; sums16 && j < n / 16; j++) {
        int sum = 0;
        for (k = 0; k < 16; k++) sum += qs[16 * j + k];
        sums16[j] = (int16_t)sum;
    }
    return amax / 127.0f;
}

static void mms__quantize_row_q8_act(const float *x, struct mms__block_q8_act *y, int64_t K) {
    int64_t b;
    for (b = 0; b < K / 32; b++) y[b].d = mms__quantize_block_8bit(x + 32 * b, 32, y[b].qs, y[b].sums);
}

static void mms__quantize_row_q8_k(const float *x, struct mms__block_q8_k *y, int64_t K) {
    int64_t b;
    for (b = 0; b < K / MMS__QK_K; b++) y[b].d = mms__quantize_block_8bit(x + MMS__QK_K * b, MMS__QK_K, y[b].qs, y[b].bsums);
}

/* The activation row in the format the weight type's dot takes. */
static void mms__quantize_row_act(enum mms_type wtype, const float *x, void *y, int64_t K) {
    if (mms__is_k_type(wtype)) mms__quantize_row_q8_k(x, (struct mms__block_q8_k *)y, K);
    else mms__quantize_row_q8_act(x, (struct mms__block_q8_act *)y, K);
}

/* 8 rows of Q4_0 side by side, one block (see mms__gemm_q4_0x8_avx2): the 8 rows' f16 scales, then
   qs[k][r], bytes 4k..4k + 3 of row r's 16 bytes of nibbles. The same 144 bytes as the 8 rows'
   blocks, permuted, so weights can be kept in this layout (the CPU_REPACK buffer type). Q8_0 the
   same way with its 32 bytes of values (see mms__gemv_q8_0x8_avx2): 272 bytes. */
struct mms__q4_0x8 { mms_fp16_t d[8]; uint32_t qs[4][8]; };
struct mms__q8_0x8 { mms_fp16_t d[8]; uint32_t qs[8][8]; };

/* Both layouts for a block of an f16 scale and nq dwords (Q4_0: 4, Q8_0: 8): rows[0..n) (n <= 8;
   the others zero) of K values into K / 32 packed blocks, and the inverse for 8 rows. */
static void mms__pack_scale_dwords_x8(const void *const *rows, int n, int64_t K, int nq, void *dstv) {
    const size_t raw = sizeof(mms_fp16_t) + 4 * (size_t)nq;
    uint8_t *dst = (uint8_t *)dstv;
    int64_t b;
    int r, k;
    for (b = 0; b < K / 32; b++, dst += 8 * raw)
        for (r = 0; r < 8; r++) {
            const uint8_t *src = r < n ? (const uint8_t *)rows[r] + (size_t)b * raw : NULL;
            for (k = -1; k < nq; k++) {   /* k = -1: the scale */
                uint8_t *to = k < 0 ? dst + sizeof(mms_fp16_t) * (size_t)r : dst + 8 * sizeof(mms_fp16_t) + 4 * (size_t)(8 * k + r);
                const size_t len = k < 0 ? sizeof(mms_fp16_t) : 4;
                if (src) memcpy(to, k < 0 ? src : src + sizeof(mms_fp16_t) + 4 * (size_t)k, len);
                else memset(to, 0, len);
            }
        }
}

static void mms__unpack_scale_dwords_x8(const void *srcv, int64_t K, int nq, void *const *rows) {
    const size_t raw = sizeof(mms_fp16_t) + 4 * (size_t)nq;
    const uint8_t *src = (const uint8_t *)srcv;
    int64_t b;
    int r, k;
    for (b = 0; b < K / 32; b++, src += 8 * raw)
        for (r = 0; r < 8; r++) {
            uint8_t *dst = (uint8_t *)rows[r] + (size_t)b * raw;
            memcpy(dst, src + sizeof(mms_fp16_t) * (size_t)r, sizeof(mms_fp16_t));
            for (k = 0; k < nq; k++) memcpy(dst + sizeof(mms_fp16_t) + 4 * (size_t)k, src + 8 * sizeof(mms_fp16_t) + 4 * (size_t)(8 * k + r), 4);
        }
}

static void mms__pack_q4_0x8_rows(const void *const *rows, int n, int64_t K, void *dst) { mms__pack_scale_dwords_x8(rows, n, K, 4, dst); }
static void mms__unpack_q4_0x8_rows(const void *src, int64_t K, void *const *rows) { mms__unpack_scale_dwords_x8(src, K, 4, rows); }
static void mms__pack_q8_0x8_rows(const void *const *rows, int n, int64_t K, void *dst) { mms__pack_scale_dwords_x8(rows, n, K, 8, dst); }
static void mms__unpack_q8_0x8_rows(const void *src, int64_t K, void *const *rows) { mms__unpack_scale_dwords_x8(src, K, 8, rows); }

#if MMS__HAVE_AVX2
/* Dwords 0..3 of the 16 bytes at src[0..3] transposed: dst[8 k + i] = dword k of src[i]. */
static MMS__AVX2_INLINE void mms__transpose_dwords4(const uint8_t *const src[4], uint32_t *dst) {
    const __m128i q0 = _mm_loadu_si128((const __m128i *)src[0]), q1 = _mm_loadu_si128((const __m128i *)src[1]);
    const __m128i q2 = _mm_loadu_si128((const __m128i *)src[2]), q3 = _mm_loadu_si128((const __m128i *)src[3]);
    const __m128i t0 = _mm_unpacklo_epi32(q0, q1), t1 = _mm_unpacklo_epi32(q2, q3);   /* dwords 0, 1 */
    const __m128i t2 = _mm_unpackhi_epi32(q0, q1), t3 = _mm_unpackhi_epi32(q2, q3);   /* dwords 2, 3 */
    _mm_storeu_si128((__m128i *)dst, _mm_unpacklo_epi64(t0, t1));
    _mm_storeu_si128((__m128i *)(dst + 8), _mm_unpackhi_epi64(t0, t1));
    _mm_storeu_si128((__m128i *)(dst + 16), _mm_unpacklo_epi64(t2, t3));
    _mm_storeu_si128((__m128i *)(dst + 24), _mm_unpackhi_epi64(t2, t3));
}

/* 8 rows' blocks at a time (the layouts of mms__pack_scale_dwords_x8): dwords transposed 4 rows by
   4 at a time (the packs run once per thread and tile: block by block in scalar code they cost a
   third of the kernels' time). */
static MMS__TARGET_AVX2 void mms__pack_scale_dwords_x8_avx2(const void *const *rows, int64_t K, int nq, void *dstv) {
    const size_t raw = sizeof(mms_fp16_t) + 4 * (size_t)nq;
    uint8_t *dst = (uint8_t *)dstv;
    int64_t b;
    int r, h;
    for (b = 0; b < K / 32; b++, dst += 8 * raw) {
        const uint8_t *src[8];
        uint32_t *qs = (uint32_t *)(void *)(dst + 8 * sizeof(mms_fp16_t));
        for (r = 0; r < 8; r++) {
            src[r] = (const uint8_t *)rows[r] + (size_t)b * raw;
            memcpy(dst + sizeof(mms_fp16_t) * (size_t)r, src[r], sizeof(mms_fp16_t));
            src[r] += sizeof(mms_fp16_t);
        }
        for (h = 0; h < nq / 4; h++) {   /* dwords 4h..4h + 3 */
            mms__transpose_dwords4(src, qs + 32 * h);
            mms__transpose_dwords4(src + 4, qs + 32 * h + 4);
            for (r = 0; r < 8; r++) src[r] += 16;
        }
    }
}

static void mms__pack_q4_0x8(const void *const *rows, int n, int64_t K, void *dst) {
    if (n == 8) mms__pack_scale_dwords_x8_avx2(rows, K, 4, dst);
    else mms__pack_q4_0x8_rows(rows, n, K, dst);
}
static void mms__pack_q8_0x8(const void *const *rows, int n, int64_t K, void *dst) {
    if (n == 8) mms__pack_scale_dwords_x8_avx2(rows, K, 8, dst);
    else mms__pack_q8_0x8_rows(rows, n, K, dst);
}
#endif

#if MMS__HAVE_AVX2
/* 8 int32 lanes: lane k sums u[4k..4k+3] * s[4k..4k+3] (u unsigned, s signed bytes) */
static MMS__AVX2_INLINE __m256i mms__dot_u8s8_lanes(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* The byte products u * s (u unsigned, s signed) added into acc per int32 lane: row r's 4 products
   of a dword (the 8-row kernels below). With VNNI (the AVX-512 set) one vpdpbusd adds them to the
   lane's int32. Without, maddubs adds them to its two int16 halves, which the caller keeps in range
   and mms__u8s8_widen sums. One body serves both sets, so the instruction is written as assembly: an
   AVX2 function cannot hold the AVX-512 intrinsic (in it, this branch is never taken). */
static MMS__AVX2_INLINE __m256i mms__u8s8_add(bool vnni, __m256i acc, __m256i u, __m256i s) {
    if (vnni) {
        __asm__("%{evex%} vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
        return acc;
    }
    return _mm256_add_epi16(acc, _mm256_maddubs_epi16(u, s));
}
/* The same products summed into int32 lanes at once (the form for signed weights: moved onto
   unsigned |w| by sign, two products already fill an int16). */
static MMS__AVX2_INLINE __m256i mms__u8s8_add32(bool vnni, __m256i acc, __m256i u, __m256i s) {
    return vnni ? mms__u8s8_add(true, acc, u, s) : _mm256_add_epi32(acc, mms__dot_u8s8_lanes(u, s));
}
/* mms__u8s8_add's sums as int32 lanes. */
static MMS__AVX2_INLINE __m256i mms__u8s8_widen(bool vnni, __m256i acc) {
    return vnni ? acc : _mm256_madd_epi16(acc, _mm256_set1_epi16(1));
}
/* Two of mms__u8s8_add's accumulators summed, as int32 lanes. */
static MMS__AVX2_INLINE __m256i mms__u8s8_widen2(bool vnni, __m256i a, __m256i b) {
    return mms__u8s8_widen(vnni, vnni ? _mm256_add_epi32(a, b) : _mm256_add_epi16(a, b));
}

/* Two f16 values side by side (a block's d and dmin) as floats in lanes 0 and 1. */
static MMS__AVX2_INLINE __m128 mms__fp16x2_to_f32(const mms_fp16_t *h) {
    uint32_t bits;
    memcpy(&bits, h, sizeof bits);
    return _mm_cvtph_ps(_mm_cvtsi32_si128((int)bits));
}

/* F16C: the library's portable conversion is a branchy call, once per block here. */
static MMS__AVX2_INLINE float mms__fp16_to_f32_f16c(mms_fp16_t h) {
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

/* Two accumulators: one FMA chain would wait on itself every block. */
static MMS__TARGET_AVX2 float mms__dot_q8_0_avx2(int64_t K, const void *w, const void *xv) {
    const struct mms__block_q8_0 *b = (const struct mms__block_q8_0 *)w;
    const struct mms__block_q8_act *x = (const struct mms__block_q8_act *)xv;
    __m256 acc[2];
    int64_t i;
    acc[0] = acc[1] = _mm256_setzero_ps();
    for (i = 0; i < K / 32; i++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)b[i].qs), a = _mm256_loadu_si256((const __m256i *)x[i].qs);
        const __m256i dot = mms__dot_u8s8_lanes(_mm256_sign_epi8(q, q), _mm256_sign_epi8(a, q));
        acc[i & 1] = _mm256_fmadd_ps(_mm256_set1_ps(mms__fp16_to_f32_f16c(b[i].d) * x[i].d), _mm256_cvtepi32_ps(dot), acc[i & 1]);
    }
    return mms__hsum256(_mm256_add_ps(acc[0], acc[1]));
}

/* 32 nibbles of 16 bytes as bytes: the low nibbles first (elements 0..15), then the high ones */
static MMS__AVX2_INLINE __m256i mms__nibbles_16(const uint8_t *p) {
    const __m128i v = _mm_loadu_si128((const __m128i *)p), m = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

/* (u - c) * a for unsigned u and an offset c, summed in pairs: maddubs(u, a) - maddubs(c, a) stays
   within int16 (63 * 127 * 2 at most), then 8 int32 lanes of 4 products each. */
static MMS__AVX2_INLINE __m256i mms__dot_offset_lanes(__m256i u, __m256i c, __m256i a) {
    return _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(u, a), _mm256_maddubs_epi16(c, a)), _mm256_set1_epi16(1));
}

/* (u - c) * a summed in pairs for two 16-byte halves: 4 products per int16 lane (at most 4064 in
   size for nibbles with c = 8). */
static MMS__AVX2_INLINE __m256i mms__dot_offset_pairs2(__m256i u0, __m256i a0, __m256i u1, __m256i a1, __m256i c) {
    return _mm256_sub_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(u0, a0), _mm256_maddubs_epi16(u1, a1)),
                            _mm256_add_epi16(_mm256_maddubs_epi16(c, a0), _mm256_maddubs_epi16(c, a1)));
}

/* Q4_0 two blocks at a time: one 256-bit register holds both blocks' 16 bytes, so one and/shift
   unpacks 64 nibbles, as [low nibbles of block 0 | of block 1] and the same for the high ones; the
   activations are regrouped to match by two 128-bit permutes, and one madd, conversion and FMA
   serve both blocks (int32 lanes 0..3 and 4..7). */
static MMS__TARGET_AVX2 float mms__dot_q4_0_avx2(int64_t K, const void *w, const void *xv) {
    const struct mms__block_q4_0 *b = (const struct mms__block_q4_0 *)w;
    const struct mms__block_q8_act *x = (const struct mms__block_q8_act *)xv;
    const __m256i c8 = _mm256_set1_epi8(8), m4 = _mm256_set1_epi8(0x0f);
    const int64_t nb = K / 32;
    __m256 acc = _mm256_setzero_ps();
    float sum;
    int64_t i;
    for (i = 0; i + 2 <= nb; i += 2) {
        const __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)b[i].qs)),
                                                  _mm_loadu_si128((const __m128i *)b[i + 1].qs), 1);
        const __m256i x0 = _mm256_loadu_si256((const __m256i *)x[i].qs), x1 = _mm256_loadu_si256((const __m256i *)x[i + 1].qs);
        const __m256i p = mms__dot_offset_pairs2(_mm256_and_si256(q, m4), _mm256_permute2x128_si256(x0, x1, 0x20),
                                                 _mm256_and_si256(_mm256_srli_epi16(q, 4), m4), _mm256_permute2x128_si256(x0, x1, 0x31), c8);
        const __m256 scale = _mm256_set_m128(_mm_set1_ps(mms__fp16_to_f32_f16c(b[i + 1].d) * x[i + 1].d),
                                             _mm_set1_ps(mms__fp16_to_f32_f16c(b[i].d) * x[i].d));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(p, _mm256_set1_epi16(1))), scale, acc);
    }
    sum = mms__hsum256(acc);
    if (i < nb)   /* an odd last block */
        sum += mms__fp16_to_f32_f16c(b[i].d) * x[i].d
             * mms__hsum256(_mm256_cvtepi32_ps(mms__dot_offset_lanes(mms__nibbles_16(b[i].qs), c8, _mm256_loadu_si256((const __m256i *)x[i].qs))));
    return sum;
}

/* A Q4_K super-block's 12 bytes of packed 6-bit scales and mins (see mms__q4_k_scale_min) as 16
   int16: the 8 scales, then the 8 mins. In 32-bit words w0..w2: sub-blocks 0..3 are the low 6 bits
   of w0's bytes (scales) and w1's (mins); 4..7 the low (scales) or high (mins) nibbles of w2's
   bytes with the top 2 bits of w0's or w1's bytes moved down to bits 4..5. The 16 bytes loaded end
   4 bytes into the block's nibbles. */
static MMS__AVX2_INLINE __m256i mms__q4_k_scales_mins(const uint8_t *packed) {
    const __m128i v = _mm_loadu_si128((const __m128i *)packed);
    const __m128i w0011 = _mm_shuffle_epi32(v, 0x50), w2 = _mm_shuffle_epi32(v, 0xaa);
    const __m128i nib = _mm_blend_epi32(w0011, _mm_srlv_epi32(w2, _mm_setr_epi32(0, 0, 0, 4)), 0xa);   /* w0, w2, w1, w2 >> 4 */
    const __m128i low = _mm_and_si128(nib, _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    const __m128i top = _mm_and_si128(_mm_srli_epi32(w0011, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
    return _mm256_cvtepu8_epi16(_mm_or_si128(low, top));
}

/* Each 128-bit half of v holds 8 int16: its lanes all become lane k_lo of the low half, lane k_hi
   of the high half (byte shuffles stay within halves). */
static MMS__AVX2_INLINE __m256i mms__broadcast_i16(__m256i v, int k_lo, int k_hi) {
    const short lo = (short)((2 * k_lo + 1) << 8 | 2 * k_lo), hi = (short)((2 * k_hi + 1) << 8 | 2 * k_hi);
    return _mm256_shuffle_epi8(v, _mm256_set_epi16(hi, hi, hi, hi, hi, hi, hi, hi, lo, lo, lo, lo, lo, lo, lo, lo));
}

/* Q4_K against 256-blocks. Per pair of sub-blocks one load of 32 bytes of nibbles (low: the first
   sub-block, high: the second); each sub-block's int16 products summed in int32 by one madd
   against its 6-bit scale (at most 8 * 2 * 63 * 3810 per lane). The mins term,
   dmin * sum(min * activations), takes one madd per super-block from the activations' sums.
   One row at a time: 2 or 4 rows sharing each activation load measured 2x slower from memory. */
static MMS__TARGET_AVX2 float mms__dot_q4_k_avx2(int64_t K, const void *w, const void *xv) {
    const struct mms__block_q4_k *b = (const struct mms__block_q4_k *)w;
    const struct mms__block_q8_k *x = (const struct mms__block_q8_k *)xv;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc = _mm256_setzero_ps();
    __m128 acc_min = _mm_setzero_ps();
    int64_t i;
    int j;
    for (i = 0; i < K / MMS__QK_K; i++, b++, x++) {
        const __m256i sm = mms__q4_k_scales_mins(b->scales), scales = _mm256_permute4x64_epi64(sm, 0x44);
        const __m128i bsums = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)x->bsums), _mm_loadu_si128((const __m128i *)(x->bsums + 8)));
        const __m128 d = _mm_mul_ps(mms__fp16x2_to_f32(&b->d), _mm_set1_ps(x->d));   /* d, dmin times the activations' */
        __m256i sumi = _mm256_setzero_si256();
MMS__UNROLL4
        for (j = 0; j < 4; j++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * j));
            const __m256i lo = _mm256_maddubs_epi16(_mm256_and_si256(q, m4), _mm256_loadu_si256((const __m256i *)(x->qs + 64 * j)));
            const __m256i hi = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                                                    _mm256_loadu_si256((const __m256i *)(x->qs + 64 * j + 32)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(lo, mms__broadcast_i16(scales, 2 * j, 2 * j)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(hi, mms__broadcast_i16(scales, 2 * j + 1, 2 * j + 1)));
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_broadcastss_ps(d), acc);
        acc_min = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm_madd_epi16(_mm256_extracti128_si256(sm, 1), bsums)), _mm_permute_ps(d, 0x55), acc_min);
    }
    return mms__hsum256(_mm256_sub_ps(acc, _mm256_set_m128(_mm_setzero_ps(), acc_min)));
}

/* Group g (0..3) of half h of a Q6_K block as 32 unsigned 6-bit values: 4 low bits from ql (of
   ql[64h..64h + 31] for even g, the next 32 for odd g; low nibbles for groups 0, 1, high for 2, 3),
   2 high bits from qh[32h..] moved to bits 4..5 by one 16-bit shift. */
static MMS__AVX2_INLINE __m256i mms__q6_k_group(const struct mms__block_q6_k *b, int h, int g) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    const __m256i l = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32 * (g & 1))), hb = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
    const __m256i lo = _mm256_and_si256(g < 2 ? l : _mm256_srli_epi16(l, 4), m4);
    const __m256i hi = _mm256_and_si256(g < 2 ? _mm256_slli_epi16(hb, 4 - 2 * g) : _mm256_srli_epi16(hb, 2 * g - 4), m30);
    return _mm256_or_si256(lo, hi);
}

/* Q6_K against 256-blocks: each 32 activations are one group of a half (see mms__q6_k_to_float):
   4 low bits from ql, 2 high bits from qh moved to bits 4..5 by one 16-bit shift, then the two
   sub-blocks' int8 scales (int16 lanes 0..7 and 8..15) in the int32 sum (at most 8 * 2 * 16002 *
   128 per lane). The - 32 comes out of the loop: 32 * sum(scale * activations) from the
   activations' sums of 16, one madd per super-block. */
static MMS__TARGET_AVX2 float mms__dot_q6_k_avx2(int64_t K, const void *w, const void *xv) {
    const struct mms__block_q6_k *b = (const struct mms__block_q6_k *)w;
    const struct mms__block_q8_k *x = (const struct mms__block_q8_k *)xv;
    __m256 acc = _mm256_setzero_ps();
    int64_t i;
    int h, g;
    for (i = 0; i < K / MMS__QK_K; i++, b++, x++) {
        const __m256i scales = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
        const __m256i offset = _mm256_madd_epi16(scales, _mm256_loadu_si256((const __m256i *)x->bsums));
        const __m256i sc_half[2] = { _mm256_permute4x64_epi64(scales, 0x44), _mm256_permute4x64_epi64(scales, 0xee) };   /* a half's 8 in both lanes */
        __m256i sumi = _mm256_setzero_si256();
        for (h = 0; h < 2; h++) {
MMS__UNROLL4
            for (g = 0; g < 4; g++) {
                const __m256i p = _mm256_maddubs_epi16(mms__q6_k_group(b, h, g), _mm256_loadu_si256((const __m256i *)(x->qs + 128 * h + 32 * g)));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, mms__broadcast_i16(sc_half[h], 2 * g, 2 * g + 1)));
            }
        }
        sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(offset, 5));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(mms__fp16_to_f32_f16c(b->d) * x->d), acc);
    }
    return mms__hsum256(acc);
}


/* -- one weight row against 4 activation rows (prompt-size products, the K types) --
   The weight row's unpacking (nibbles, scales) is done once for 4 columns of activations, which
   stay in L1 while the rows of a weight tile stream past from L2; the sub-block scales multiply in
   integers, so the float work is one conversion and FMA per 256 values and column. The products
   per column are those of the single dots above. Q8_0 and Q4_0 have no such kernel here: their f32
   scale per 32 values costs a conversion, a scale product and an FMA per 32 values and column on
   top of sign, maddubs and madd, and measured 1.2-1.4x the f32 GEMM's time on a Zen 3 core
   (whose integer multiplies issue once per cycle, as FMAs do twice), against 1.0x for
   dequantizing into the f32 GEMM, which they keep. */

/* Q8_0 as mms__dot_q8_0_avx2 (the same sums and accumulators per column, so a column's result does
   not depend on the columns beside it), the weights' magnitudes taken once for 4 columns: only
   for decode steps of several sequences (N <= MMS__DECODE_MAX_COLS, see mms__q8_dot4_for). */
static MMS__TARGET_AVX2 void mms__dot4_q8_0_avx2(int64_t K, const void *w, const void *xv, size_t x_stride, float *out) {
    const struct mms__block_q8_0 *b = (const struct mms__block_q8_0 *)w;
    const struct mms__block_q8_act *x[4];
    __m256 acc[4][2];
    int64_t i;
    int c;
MMS__UNROLL4
    for (c = 0; c < 4; c++) { x[c] = (const struct mms__block_q8_act *)((const char *)xv + c * x_stride); acc[c][0] = acc[c][1] = _mm256_setzero_ps(); }
    for (i = 0; i < K / 32; i++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)b[i].qs), uq = _mm256_sign_epi8(q, q);
        const float d = mms__fp16_to_f32_f16c(b[i].d);
MMS__UNROLL4
        for (c = 0; c < 4; c++) {
            const __m256i dot = mms__dot_u8s8_lanes(uq, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)x[c][i].qs), q));
            acc[c][i & 1] = _mm256_fmadd_ps(_mm256_set1_ps(d * x[c][i].d), _mm256_cvtepi32_ps(dot), acc[c][i & 1]);
        }
    }
MMS__UNROLL4
    for (c = 0; c < 4; c++) out[c] = mms__hsum256(_mm256_add_ps(acc[c][0], acc[c][1]));
}

/* Q4_K as mms__dot_q4_k_avx2, each pair of sub-blocks unpacked once for the 4 columns. */
static MMS__TARGET_AVX2 void mms__dot4_q4_k_avx2(int64_t K, const void *w, const void *xv, size_t x_stride, float *out) {
    const struct mms__block_q4_k *b = (const struct mms__block_q4_k *)w;
    const struct mms__block_q8_k *x[4];
    const __m256i m4 = _mm256_set1_epi8(0x0f), step = _mm256_set1_epi16(0x0202);
    __m256 acc[4];
    int64_t i;
    int j, c;
MMS__UNROLL4
    for (c = 0; c < 4; c++) { x[c] = (const struct mms__block_q8_k *)((const char *)xv + c * x_stride); acc[c] = _mm256_setzero_ps(); }
    for (i = 0; i < K / MMS__QK_K; i++, b++) {
        const __m256i sm = mms__q4_k_scales_mins(b->scales), scales = _mm256_permute4x64_epi64(sm, 0x44);
        const __m128i mins = _mm256_extracti128_si256(sm, 1);
        const __m128 d = mms__fp16x2_to_f32(&b->d);
        __m256i sumi[4];
        __m256i pick = _mm256_set1_epi16(0x0100);   /* the shuffle that broadcasts int16 lane k: bytes 2k, 2k + 1 */
MMS__UNROLL4
        for (c = 0; c < 4; c++) sumi[c] = _mm256_setzero_si256();
        for (j = 0; j < 4; j++) {   /* not unrolled: gcc then spills the 4 columns' sums */
            const __m256i q = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * j));
            const __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            const __m256i sc_lo = _mm256_shuffle_epi8(scales, pick), sc_hi = _mm256_shuffle_epi8(scales, _mm256_add_epi16(pick, step));
            pick = _mm256_add_epi16(pick, _mm256_add_epi16(step, step));
MMS__UNROLL4
            for (c = 0; c < 4; c++) {
                const int8_t *a = x[c][i].qs + 64 * j;
                const __m256i plo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)a));
                const __m256i phi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(a + 32)));
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(plo, sc_lo));
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(phi, sc_hi));
            }
        }
MMS__UNROLL4
        for (c = 0; c < 4; c++) {   /* d * sum - dmin * sum(min * activations), times the activations' step */
            const struct mms__block_q8_k *xc = &x[c][i];
            const __m128i bsums = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)xc->bsums), _mm_loadu_si128((const __m128i *)(xc->bsums + 8)));
            const __m128 dc = _mm_mul_ps(d, _mm_set1_ps(xc->d));
            const __m256 m = _mm256_set_m128(_mm_setzero_ps(), _mm_mul_ps(_mm_cvtepi32_ps(_mm_madd_epi16(mins, bsums)), _mm_permute_ps(dc, 0x55)));
            acc[c] = _mm256_sub_ps(_mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[c]), _mm256_broadcastss_ps(dc), acc[c]), m);
        }
    }
MMS__UNROLL4
    for (c = 0; c < 4; c++) out[c] = mms__hsum256(acc[c]);
}

/* Q6_K as mms__dot_q6_k_avx2, each group of 32 values unpacked once for the 4 columns. */
static MMS__TARGET_AVX2 void mms__dot4_q6_k_avx2(int64_t K, const void *w, const void *xv, size_t x_stride, float *out) {
    const struct mms__block_q6_k *b = (const struct mms__block_q6_k *)w;
    const struct mms__block_q8_k *x[4];
    __m256 acc[4];
    int64_t i;
    int h, g, c;
MMS__UNROLL4
    for (c = 0; c < 4; c++) { x[c] = (const struct mms__block_q8_k *)((const char *)xv + c * x_stride); acc[c] = _mm256_setzero_ps(); }
    for (i = 0; i < K / MMS__QK_K; i++, b++) {
        const __m256i scales = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
        const __m256i sc_half[2] = { _mm256_permute4x64_epi64(scales, 0x44), _mm256_permute4x64_epi64(scales, 0xee) };
        const float d = mms__fp16_to_f32_f16c(b->d);
        __m256i sumi[4];
MMS__UNROLL4
        for (c = 0; c < 4; c++)     /* the - 32 of every value, from the activations' sums of 16 */
            sumi[c] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                       _mm256_slli_epi32(_mm256_madd_epi16(scales, _mm256_loadu_si256((const __m256i *)x[c][i].bsums)), 5));
        for (h = 0; h < 2; h++) {
MMS__UNROLL4
            for (g = 0; g < 4; g++) {
                const __m256i v = mms__q6_k_group(b, h, g), sc = mms__broadcast_i16(sc_half[h], 2 * g, 2 * g + 1);
MMS__UNROLL4
                for (c = 0; c < 4; c++) {
                    const __m256i p = _mm256_maddubs_epi16(v, _mm256_loadu_si256((const __m256i *)(x[c][i].qs + 128 * h + 32 * g)));
                    sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(p, sc));
                }
            }
        }
MMS__UNROLL4
        for (c = 0; c < 4; c++) acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[c]), _mm256_set1_ps(d * x[c][i].d), acc[c]);
    }
MMS__UNROLL4
    for (c = 0; c < 4; c++) out[c] = mms__hsum256(acc[c]);
}
#endif

/* 8 rows of Q4_K side by side, one super-block (see mms__gemm_q4_kx8_avx2): the f16 scales; sc[s][r]
   and mn[s][r]: sub-block s's 6-bit scale and min of row r as bytes (the file packs them in 12
   bytes a row; as bytes a sub-block's 8 rows widen in one instruction); qs[8j + k][r]: bytes
   4k..4k + 3 of row r's nibble chunk j (low nibbles: sub-block 2j, high: 2j + 1). 1184 bytes for
   the 8 rows' 1152. */
struct mms__q4_kx8 { mms_fp16_t d[8], dmin[8]; uint8_t sc[8][8], mn[8][8]; uint32_t qs[32][8]; };

/* Rows rows[0..n) (n <= 8; the others zero) of K values of Q4_K into K / 256 packed blocks. */
static void mms__pack_q4_kx8_rows(const void *const *rows, int n, int64_t K, void *dstv) {
    struct mms__q4_kx8 *dst = (struct mms__q4_kx8 *)dstv;
    int64_t b;
    int r, s, k;
    for (b = 0; b < K / MMS__QK_K; b++, dst++)
        for (r = 0; r < 8; r++) {
            const struct mms__block_q4_k *src = r < n ? (const struct mms__block_q4_k *)rows[r] + b : NULL;
            dst->d[r] = src ? src->d : 0;
            dst->dmin[r] = src ? src->dmin : 0;
            for (s = 0; s < 8; s++) {
                int sc = 0, mn = 0;
                if (src) mms__q4_k_scale_min(s, src->scales, &sc, &mn);
                dst->sc[s][r] = (uint8_t)sc;
                dst->mn[s][r] = (uint8_t)mn;
            }
            for (k = 0; k < 32; k++) {
                if (src) memcpy(&dst->qs[k][r], src->qs + 4 * k, 4);
                else dst->qs[k][r] = 0;
            }
        }
}

/* The inverse for 8 rows, the 12 bytes of scales packed back as the file has them (every bit of
   them is a scale's or a min's, so this gives the bytes back exactly). */
static void mms__unpack_q4_kx8_rows(const void *srcv, int64_t K, void *const *rows) {
    const struct mms__q4_kx8 *src = (const struct mms__q4_kx8 *)srcv;
    int64_t b;
    int r, s, k;
    for (b = 0; b < K / MMS__QK_K; b++, src++)
        for (r = 0; r < 8; r++) {
            struct mms__block_q4_k *dst = (struct mms__block_q4_k *)rows[r] + b;
            uint8_t *q = dst->scales;
            dst->d = src->d[r];
            dst->dmin = src->dmin[r];
            for (s = 0; s < 4; s++) {
                const int sc_hi = src->sc[s + 4][r], mn_hi = src->mn[s + 4][r];
                q[s] = (uint8_t)(src->sc[s][r] | (sc_hi >> 4) << 6);
                q[s + 4] = (uint8_t)(src->mn[s][r] | (mn_hi >> 4) << 6);
                q[s + 8] = (uint8_t)((sc_hi & 0x0f) | (mn_hi & 0x0f) << 4);
            }
            for (k = 0; k < 32; k++) memcpy(dst->qs + 4 * k, &src->qs[k][r], 4);
        }
}

#if MMS__HAVE_AVX2
static MMS__TARGET_AVX2 void mms__pack_q4_kx8_avx2(const void *const *rows, int64_t K, struct mms__q4_kx8 *dst) {
    int64_t b;
    int r, s, j;
    for (b = 0; b < K / MMS__QK_K; b++, dst++) {
        const uint8_t *src[8], *qs[8];
        uint16_t sm[8][16];   /* per row: the 8 scales, then the 8 mins */
        for (r = 0; r < 8; r++) {
            src[r] = (const uint8_t *)((const struct mms__block_q4_k *)rows[r] + b);
            _mm256_storeu_si256((__m256i *)sm[r], mms__q4_k_scales_mins(((const struct mms__block_q4_k *)src[r])->scales));
            memcpy(&dst->d[r], src[r] + offsetof(struct mms__block_q4_k, d), sizeof dst->d[r]);
            memcpy(&dst->dmin[r], src[r] + offsetof(struct mms__block_q4_k, dmin), sizeof dst->dmin[r]);
            qs[r] = src[r] + offsetof(struct mms__block_q4_k, qs);
        }
        for (s = 0; s < 8; s++)
            for (r = 0; r < 8; r++) {
                dst->sc[s][r] = (uint8_t)sm[r][s];
                dst->mn[s][r] = (uint8_t)sm[r][8 + s];
            }
        for (j = 0; j < 8; j++) {   /* dwords 4j..4j + 3 */
            const uint8_t *q[8];
            for (r = 0; r < 8; r++) q[r] = qs[r] + 16 * j;
            mms__transpose_dwords4(q, dst->qs[4 * j]);
            mms__transpose_dwords4(q + 4, dst->qs[4 * j] + 4);
        }
    }
}

static void mms__pack_q4_kx8(const void *const *rows, int n, int64_t K, void *dst) {
    if (n == 8) mms__pack_q4_kx8_avx2(rows, K, (struct mms__q4_kx8 *)dst);
    else mms__pack_q4_kx8_rows(rows, n, K, dst);
}

/* 8 rows' byte values (a sub-block's scales or mins) as int32 lanes, the value in both int16 halves
   (one madd then multiplies both of a row's int16 sums). */
static MMS__AVX2_INLINE __m256i mms__bytes8_dup16(const uint8_t *p) {
    const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}

/* mms__u8s8_add's sums as int32 lanes times 8 rows' byte factors p[r]. */
static MMS__AVX2_INLINE __m256i mms__u8s8_widen_scaled(bool vnni, __m256i acc, const uint8_t *p) {
    return vnni ? _mm256_mullo_epi32(acc, _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p))) : _mm256_madd_epi16(acc, mms__bytes8_dup16(p));
}

/* Two sub-blocks' 8 rows of bytes as int16 pairs: lane r = lo[r] | hi[r] << 16. */
static MMS__AVX2_INLINE __m256i mms__bytes8_pairs(const uint8_t *lo, const uint8_t *hi) {
    return _mm256_or_si256(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)lo)),
                           _mm256_slli_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)hi)), 16));
}
#endif

#if MMS__HAVE_AVX2
/* -- Q4_0 prompt products on repacked tiles: 8 weight rows against 4 columns --
   Each thread repacks its tile of weight rows, 8 rows side by side (mms__q4_0x8): per block the 8
   scales as floats, then for each of the block's 4 dwords of nibbles the 8 rows' dwords. One
   32-byte load then holds 8 nibbles of every row, and one maddubs against an activation dword
   broadcast to every lane leaves each row's products in its own lanes: no horizontal sums, and one
   conversion and FMA per block serve 8 rows (the single-row dots spend those per row and column,
   which kept them slower than the f32 GEMM). Low nibbles of dword k are elements 4k..4k + 3, high
   ones 16 + 4k..; the - 8 comes from the activations' sums. The int16 sums of 8 maddubs stay
   within 8 * 2 * 15 * 127. */
static MMS__AVX2_INLINE void mms__gemm_q4_0x8_body(bool vnni, int64_t K, const void *wv, const void *const xv[4], float *out) {
    const struct mms__q4_0x8 *w = (const struct mms__q4_0x8 *)wv;
    const struct mms__block_q8_act *const x[4] = { (const struct mms__block_q8_act *)xv[0], (const struct mms__block_q8_act *)xv[1],
                                                  (const struct mms__block_q8_act *)xv[2], (const struct mms__block_q8_act *)xv[3] };
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[4];
    int64_t b;
    int k, c;
MMS__UNROLL4
    for (c = 0; c < 4; c++) acc[c] = _mm256_setzero_ps();
    for (b = 0; b < K / 32; b++, w++) {
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->d));
        __m256i sum_lo[4], sum_hi[4];   /* 8 chains: VNNI's adds wait on their accumulator */
MMS__UNROLL4
        for (c = 0; c < 4; c++) sum_lo[c] = sum_hi[c] = _mm256_setzero_si256();
MMS__NO_UNROLL
        for (k = 0; k < 4; k++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)w->qs[k]);
            const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
MMS__UNROLL4
            for (c = 0; c < 4; c++) {
                int32_t a_lo, a_hi;
                memcpy(&a_lo, x[c][b].qs + 4 * k, 4);
                memcpy(&a_hi, x[c][b].qs + 16 + 4 * k, 4);
                sum_lo[c] = mms__u8s8_add(vnni, sum_lo[c], lo, _mm256_set1_epi32(a_lo));
                sum_hi[c] = mms__u8s8_add(vnni, sum_hi[c], hi, _mm256_set1_epi32(a_hi));
            }
        }
MMS__UNROLL4
        for (c = 0; c < 4; c++) {
            const __m256i t = mms__u8s8_widen2(vnni, sum_lo[c], sum_hi[c]);
            const __m256i s = _mm256_sub_epi32(t, _mm256_set1_epi32(8 * (x[c][b].sums[0] + x[c][b].sums[1])));
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_set1_ps(x[c][b].d)), acc[c]);
        }
    }
MMS__UNROLL4
    for (c = 0; c < 4; c++) _mm256_storeu_ps(out + 8 * c, acc[c]);
}
static MMS__TARGET_AVX2 void mms__gemm_q4_0x8_avx2(int64_t K, const void *wv, const void *const xv[4], float *out) {
    mms__gemm_q4_0x8_body(false, K, wv, xv, out);
}
static MMS__TARGET_AVX512 void mms__gemm_q4_0x8_avx512(int64_t K, const void *wv, const void *const xv[4], float *out) {
    mms__gemm_q4_0x8_body(true, K, wv, xv, out);
}

/* Decode on the same layout: one activation row against ns <= 4 groups of 8 rows (w[j], out[j]),
   walked side by side. Each group is its own stream through memory: one core reading one stream
   stays well below the bandwidth it gets from several (measured 1.6x faster from 4 than from 1,
   and than the single-row dots), and one conversion and FMA per block serve 8 rows. */
static MMS__AVX2_INLINE void mms__gemv_q4_0x8_body(bool vnni, int ns, int64_t K, const void *const wv[4], const void *xv, float *const out[4]) {
    const struct mms__block_q8_act *x = (const struct mms__block_q8_act *)xv;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[4];
    int64_t b;
    int j, k;
    for (j = 0; j < ns; j++) acc[j] = _mm256_setzero_ps();
    for (b = 0; b < K / 32; b++) {
        const __m256 xd = _mm256_set1_ps(x[b].d);
        const __m256i corr = _mm256_set1_epi32(8 * (x[b].sums[0] + x[b].sums[1]));
        int32_t a[8];
        memcpy(a, x[b].qs, sizeof a);
MMS__UNROLL4
        for (j = 0; j < ns; j++) {
            const struct mms__q4_0x8 *w = (const struct mms__q4_0x8 *)wv[j] + b;
            __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
MMS__UNROLL4
            for (k = 0; k < 4; k++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)w->qs[k]);
                lo = mms__u8s8_add(vnni, lo, _mm256_and_si256(v, m4), _mm256_set1_epi32(a[k]));
                hi = mms__u8s8_add(vnni, hi, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4), _mm256_set1_epi32(a[4 + k]));
            }
            lo = mms__u8s8_widen2(vnni, lo, hi);
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(lo, corr)),
                                     _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->d)), xd), acc[j]);
        }
    }
    for (j = 0; j < ns; j++) _mm256_storeu_ps(out[j], acc[j]);
}
static MMS__TARGET_AVX2 void mms__gemv_q4_0x8_avx2(int ns, int64_t K, const void *const wv[4], const void *xv, float *const out[4]) {
    mms__gemv_q4_0x8_body(false, ns, K, wv, xv, out);
}
static MMS__TARGET_AVX512 void mms__gemv_q4_0x8_avx512(int ns, int64_t K, const void *const wv[4], const void *xv, float *const out[4]) {
    mms__gemv_q4_0x8_body(true, ns, K, wv, xv, out);
}

/* Decode on the Q8_0 layout: one activation row against ns <= 4 groups of 8 rows side by side.
   Signed weights: maddubs takes |w| against the activations with w's sign moved onto them, and
   each product pair goes to int32 at once (two would overflow int16). */
static MMS__AVX2_INLINE void mms__gemv_q8_0x8_body(bool vnni, int ns, int64_t K, const void *const wv[4], const void *xv, float *const out[4]) {
    const struct mms__block_q8_act *x = (const struct mms__block_q8_act *)xv;
    __m256 acc[4];
    int64_t b;
    int j, k;
    for (j = 0; j < ns; j++) acc[j] = _mm256_setzero_ps();
    for (b = 0; b < K / 32; b++) {
        const __m256 xd = _mm256_set1_ps(x[b].d);
        int32_t a[8];
        memcpy(a, x[b].qs, sizeof a);
MMS__UNROLL4
        for (j = 0; j < ns; j++) {
            const struct mms__q8_0x8 *w = (const struct mms__q8_0x8 *)wv[j] + b;
            __m256i sum0 = _mm256_setzero_si256(), sum1 = _mm256_setzero_si256();   /* two chains */
            for (k = 0; k < 8; k += 2) {
                const __m256i v0 = _mm256_loadu_si256((const __m256i *)w->qs[k]), v1 = _mm256_loadu_si256((const __m256i *)w->qs[k + 1]);
                sum0 = mms__u8s8_add32(vnni, sum0, _mm256_abs_epi8(v0), _mm256_sign_epi8(_mm256_set1_epi32(a[k]), v0));
                sum1 = mms__u8s8_add32(vnni, sum1, _mm256_abs_epi8(v1), _mm256_sign_epi8(_mm256_set1_epi32(a[k + 1]), v1));
            }
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(sum0, sum1)),
                                     _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->d)), xd), acc[j]);
        }
    }
    for (j = 0; j < ns; j++) _mm256_storeu_ps(out[j], acc[j]);
}
static MMS__TARGET_AVX2 void mms__gemv_q8_0x8_avx2(int ns, int64_t K, const void *const wv[4], const void *xv, float *const out[4]) {
    mms__gemv_q8_0x8_body(false, ns, K, wv, xv, out);
}
static MMS__TARGET_AVX512 void mms__gemv_q8_0x8_avx512(int ns, int64_t K, const void *const wv[4], const void *xv, float *const out[4]) {
    mms__gemv_q8_0x8_body(true, ns, K, wv, xv, out);
}

/* Q8_0 prompt products on the 8-row layout, with VNNI only: each weight dword's magnitudes taken
   once for the 4 columns, its signs moved onto each column's activations. (Without VNNI, sign,
   maddubs and madd per dword and column measured slower than dequantizing into the f32 GEMM.) */
static MMS__TARGET_AVX512 void mms__gemm_q8_0x8_avx512(int64_t K, const void *wv, const void *const xv[4], float *out) {
    const struct mms__q8_0x8 *w = (const struct mms__q8_0x8 *)wv;
    const struct mms__block_q8_act *const x[4] = { (const struct mms__block_q8_act *)xv[0], (const struct mms__block_q8_act *)xv[1],
                                                  (const struct mms__block_q8_act *)xv[2], (const struct mms__block_q8_act *)xv[3] };
    __m256 acc[4];
    int64_t b;
    int k, c;
MMS__UNROLL4
    for (c = 0; c < 4; c++) acc[c] = _mm256_setzero_ps();
    for (b = 0; b < K / 32; b++, w++) {
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->d));
        __m256i sum0[4], sum1[4];   /* dwords k and k + 1: 8 chains */
MMS__UNROLL4
        for (c = 0; c < 4; c++) sum0[c] = sum1[c] = _mm256_setzero_si256();
        for (k = 0; k < 8; k += 2) {
            const __m256i v0 = _mm256_loadu_si256((const __m256i *)w->qs[k]), u0 = _mm256_abs_epi8(v0);
            const __m256i v1 = _mm256_loadu_si256((const __m256i *)w->qs[k + 1]), u1 = _mm256_abs_epi8(v1);
MMS__UNROLL4
            for (c = 0; c < 4; c++) {
                int32_t a[2];
                memcpy(a, x[c][b].qs + 4 * k, 8);
                sum0[c] = _mm256_dpbusd_epi32(sum0[c], u0, _mm256_sign_epi8(_mm256_set1_epi32(a[0]), v0));
                sum1[c] = _mm256_dpbusd_epi32(sum1[c], u1, _mm256_sign_epi8(_mm256_set1_epi32(a[1]), v1));
            }
        }
MMS__UNROLL4
        for (c = 0; c < 4; c++)
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(sum0[c], sum1[c])), _mm256_mul_ps(dw, _mm256_set1_ps(x[c][b].d)), acc[c]);
    }
MMS__UNROLL4
    for (c = 0; c < 4; c++) _mm256_storeu_ps(out + 8 * c, acc[c]);
}

/* Q4_K the same way, per super-block: each sub-block's 8 dwords of products summed in int16 (at
   most 8 * 2 * 15 * 127), then one madd by the 8 rows' scales; the mins term from the activations'
   sums of 32, one madd per two sub-blocks. */
static MMS__AVX2_INLINE void mms__gemm_q4_kx8_body(bool vnni, int64_t K, const void *wv, const void *const xv[4], float *out) {
    const struct mms__q4_kx8 *w = (const struct mms__q4_kx8 *)wv;
    const struct mms__block_q8_k *const x[4] = { (const struct mms__block_q8_k *)xv[0], (const struct mms__block_q8_k *)xv[1],
                                                 (const struct mms__block_q8_k *)xv[2], (const struct mms__block_q8_k *)xv[3] };
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[4];
    int64_t b;
    int s, k, c;
MMS__UNROLL4
    for (c = 0; c < 4; c++) acc[c] = _mm256_setzero_ps();
    for (b = 0; b < K / MMS__QK_K; b++, w++) {
        __m256i sumi[4], summ[4];
MMS__UNROLL4
        for (c = 0; c < 4; c++) sumi[c] = summ[c] = _mm256_setzero_si256();
        for (s = 0; s < 8; s += 2) {   /* sub-blocks s and s + 1: the low and high nibbles of one chunk */
            __m256i lo[4], hi[4];
MMS__UNROLL4
            for (c = 0; c < 4; c++) lo[c] = hi[c] = _mm256_setzero_si256();
            for (k = 0; k < 8; k++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)w->qs[4 * s + k]);
                const __m256i u_lo = _mm256_and_si256(v, m4), u_hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
MMS__UNROLL4
                for (c = 0; c < 4; c++) {
                    int32_t a_lo, a_hi;
                    memcpy(&a_lo, x[c][b].qs + 32 * s + 4 * k, 4);
                    memcpy(&a_hi, x[c][b].qs + 32 * s + 32 + 4 * k, 4);
                    lo[c] = mms__u8s8_add(vnni, lo[c], u_lo, _mm256_set1_epi32(a_lo));
                    hi[c] = mms__u8s8_add(vnni, hi[c], u_hi, _mm256_set1_epi32(a_hi));
                }
            }
MMS__UNROLL4
            for (c = 0; c < 4; c++)
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_add_epi32(mms__u8s8_widen_scaled(vnni, lo[c], w->sc[s]),
                                                                     mms__u8s8_widen_scaled(vnni, hi[c], w->sc[s + 1])));
        }
        {
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->d)), dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->dmin));
            __m256i mn[4];
            for (s = 0; s < 4; s++) mn[s] = mms__bytes8_pairs(w->mn[2 * s], w->mn[2 * s + 1]);
MMS__UNROLL4
            for (c = 0; c < 4; c++) {
                const int16_t *bs = x[c][b].bsums;
                const __m256 xd = _mm256_set1_ps(x[c][b].d);
                for (s = 0; s < 4; s++) {
                    const uint32_t pair = (uint32_t)(uint16_t)(bs[4 * s] + bs[4 * s + 1]) | (uint32_t)(uint16_t)(bs[4 * s + 2] + bs[4 * s + 3]) << 16;
                    summ[c] = _mm256_add_epi32(summ[c], _mm256_madd_epi16(mn[s], _mm256_set1_epi32((int)pair)));
                }
                acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[c]), _mm256_mul_ps(d, xd), acc[c]);
                acc[c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(summ[c]), _mm256_mul_ps(dmin, xd), acc[c]);
            }
        }
    }
MMS__UNROLL4
    for (c = 0; c < 4; c++) _mm256_storeu_ps(out + 8 * c, acc[c]);
}

static MMS__TARGET_AVX2 void mms__gemm_q4_kx8_avx2(int64_t K, const void *wv, const void *const xv[4], float *out) {
    mms__gemm_q4_kx8_body(false, K, wv, xv, out);
}
static MMS__TARGET_AVX512 void mms__gemm_q4_kx8_avx512(int64_t K, const void *wv, const void *const xv[4], float *out) {
    mms__gemm_q4_kx8_body(true, K, wv, xv, out);
}

/* Decode on the Q4_K layout: one activation row against ns <= 4 groups of 8 rows side by side, as
   mms__gemv_q4_0x8_avx2 does for Q4_0 (the sums as in the kernel above with one column). */
static MMS__AVX2_INLINE void mms__gemv_q4_kx8_body(bool vnni, int ns, int64_t K, const void *const wv[4], const void *xv, float *const out[4]) {
    const struct mms__block_q8_k *x = (const struct mms__block_q8_k *)xv;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[4];
    int64_t b;
    int j, s, k;
    for (j = 0; j < ns; j++) acc[j] = _mm256_setzero_ps();
    for (b = 0; b < K / MMS__QK_K; b++) {
        const __m256 xd = _mm256_set1_ps(x[b].d);
        const int16_t *bs = x[b].bsums;
        __m256i pairs[4];
        for (s = 0; s < 4; s++)
            pairs[s] = _mm256_set1_epi32((int)((uint32_t)(uint16_t)(bs[4 * s] + bs[4 * s + 1]) | (uint32_t)(uint16_t)(bs[4 * s + 2] + bs[4 * s + 3]) << 16));
        for (j = 0; j < ns; j++) {
            const struct mms__q4_kx8 *w = (const struct mms__q4_kx8 *)wv[j] + b;
            __m256i sumi = _mm256_setzero_si256(), summ = _mm256_setzero_si256();
            for (s = 0; s < 8; s += 2) {   /* sub-blocks s and s + 1: the low and high nibbles of one chunk */
                __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
MMS__UNROLL4
                for (k = 0; k < 8; k++) {
                    const __m256i v = _mm256_loadu_si256((const __m256i *)w->qs[4 * s + k]);
                    int32_t a_lo, a_hi;
                    memcpy(&a_lo, x[b].qs + 32 * s + 4 * k, 4);
                    memcpy(&a_hi, x[b].qs + 32 * s + 32 + 4 * k, 4);
                    lo = mms__u8s8_add(vnni, lo, _mm256_and_si256(v, m4), _mm256_set1_epi32(a_lo));
                    hi = mms__u8s8_add(vnni, hi, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4), _mm256_set1_epi32(a_hi));
                }
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(mms__u8s8_widen_scaled(vnni, lo, w->sc[s]), mms__u8s8_widen_scaled(vnni, hi, w->sc[s + 1])));
            }
            for (s = 0; s < 4; s++) summ = _mm256_add_epi32(summ, _mm256_madd_epi16(mms__bytes8_pairs(w->mn[2 * s], w->mn[2 * s + 1]), pairs[s]));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->d)), xd), acc[j]);
            acc[j] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(summ), _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->dmin)), xd), acc[j]);
        }
    }
    for (j = 0; j < ns; j++) _mm256_storeu_ps(out[j], acc[j]);
}
static MMS__TARGET_AVX2 void mms__gemv_q4_kx8_avx2(int ns, int64_t K, const void *const wv[4], const void *xv, float *const out[4]) {
    mms__gemv_q4_kx8_body(false, ns, K, wv, xv, out);
}
static MMS__TARGET_AVX512 void mms__gemv_q4_kx8_avx512(int ns, int64_t K, const void *const wv[4], const void *xv, float *const out[4]) {
    mms__gemv_q4_kx8_body(true, ns, K, wv, xv, out);
}
#endif

#if MMS__HAVE_NEON
/* The NEON dots: the weights unpacked to signed bytes (Q4_0's - 8 and Q6_K's - 32 applied in
   int8), 16 at a time multiplied by the activations into int32 lanes, the sub-block scales
   multiplied in int32, one float multiply-add per block. The byte product is the one piece that
   differs between the two sets: sdot where the CPU has it (4 products per lane), else widening
   multiplies (|w a| <= 128 * 127, so two of them fit an int16) with a pairwise add into int32. */
static MMS__NEON_INLINE int32x4_t mms__dot_s8_neon(int32x4_t acc, int8x16_t w, int8x16_t a) {
    return vpadalq_s16(acc, vmlal_high_s8(vmull_s8(vget_low_s8(w), vget_low_s8(a)), w, a));
}
static MMS__TARGET_DOTPROD MMS__NEON_INLINE int32x4_t mms__dot_s8_dotprod(int32x4_t acc, int8x16_t w, int8x16_t a) {
#if defined(__clang__) && !defined(__ARM_FEATURE_DOTPROD)   /* clang's arm_neon.h declares vdotq only then */
    __asm__("sdot %0.4s, %1.16b, %2.16b" : "+w"(acc) : "w"(w), "w"(a));
    return acc;
#else
    return vdotq_s32(acc, w, a);
#endif
}

static MMS__NEON_INLINE float mms__fp16_to_f32_neon(mms_fp16_t h) {
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

/* The 16 low or high nibbles of 16 bytes as signed bytes minus c */
static MMS__NEON_INLINE int8x16_t mms__nibbles_lo(uint8x16_t q, int c) { return vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f))), vdupq_n_s8((int8_t)c)); }
static MMS__NEON_INLINE int8x16_t mms__nibbles_hi(uint8x16_t q, int c) { return vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vdupq_n_s8((int8_t)c)); }

/* Q6_K's 16 values of one group: 4 bits of ql (low or high nibble), 2 of qh at bit `shift`, - 32 */
static MMS__NEON_INLINE int8x16_t mms__q6_k_values(uint8x16_t ql, bool high_nibble, uint8x16_t qh, int shift) {
    const uint8x16_t lo = high_nibble ? vshrq_n_u8(ql, 4) : vandq_u8(ql, vdupq_n_u8(0x0f));
    const uint8x16_t hi = vandq_u8(vshlq_u8(qh, vdupq_n_s8((int8_t)(4 - shift))), vdupq_n_u8(0x30));
    return vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, hi)), vdupq_n_s8(32));
}

/* The four dots, once for each byte product (SUFFIX, the target it needs, DOT). */
#define MMS__NEON_Q8_DOTS(SUFFIX, TARGET, DOT)                                                                        \
static TARGET float mms__dot_q8_0_##SUFFIX(int64_t K, const void *w, const void *xv) {                               \
    const struct mms__block_q8_0 *b = (const struct mms__block_q8_0 *)w;                                             \
    const struct mms__block_q8_act *x = (const struct mms__block_q8_act *)xv;                                        \
    float32x4_t acc = vdupq_n_f32(0.0f);                                                                             \
    int64_t i;                                                                                                       \
    for (i = 0; i < K / 32; i++) {                                                                                   \
        int32x4_t s = DOT(vdupq_n_s32(0), vld1q_s8(b[i].qs), vld1q_s8(x[i].qs));                                     \
        s = DOT(s, vld1q_s8(b[i].qs + 16), vld1q_s8(x[i].qs + 16));                                                  \
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(s), mms__fp16_to_f32_neon(b[i].d) * x[i].d);                           \
    }                                                                                                                \
    return vaddvq_f32(acc);                                                                                          \
}                                                                                                                    \
static TARGET float mms__dot_q4_0_##SUFFIX(int64_t K, const void *w, const void *xv) {                               \
    const struct mms__block_q4_0 *b = (const struct mms__block_q4_0 *)w;                                             \
    const struct mms__block_q8_act *x = (const struct mms__block_q8_act *)xv;                                        \
    float32x4_t acc = vdupq_n_f32(0.0f);                                                                             \
    int64_t i;                                                                                                       \
    for (i = 0; i < K / 32; i++) {                                                                                   \
        const uint8x16_t q = vld1q_u8(b[i].qs);                                                                      \
        int32x4_t s = DOT(vdupq_n_s32(0), mms__nibbles_lo(q, 8), vld1q_s8(x[i].qs));                                 \
        s = DOT(s, mms__nibbles_hi(q, 8), vld1q_s8(x[i].qs + 16));                                                   \
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(s), mms__fp16_to_f32_neon(b[i].d) * x[i].d);                           \
    }                                                                                                                \
    return vaddvq_f32(acc);                                                                                          \
}                                                                                                                    \
/* Q4_K: the mins term dmin * sum(min * activations) from the activations' sums of 16 */                            \
static TARGET float mms__dot_q4_k_##SUFFIX(int64_t K, const void *w, const void *xv) {                               \
    const struct mms__block_q4_k *b = (const struct mms__block_q4_k *)w;                                             \
    const struct mms__block_q8_k *x = (const struct mms__block_q8_k *)xv;                                            \
    float sum = 0.0f;                                                                                                \
    int64_t i;                                                                                                       \
    int j;                                                                                                           \
    for (i = 0; i < K / MMS__QK_K; i++, b++, x++) {                                                                  \
        int32x4_t sumi = vdupq_n_s32(0);                                                                             \
        int32_t mins = 0;                                                                                            \
        for (j = 0; j < 4; j++) {                                                                                    \
            const uint8x16_t q0 = vld1q_u8(b->qs + 32 * j), q1 = vld1q_u8(b->qs + 32 * j + 16);                      \
            const int8_t *a = x->qs + 64 * j;                                                                        \
            int sc0, m0, sc1, m1;                                                                                    \
            int32x4_t lo, hi;                                                                                        \
            mms__q4_k_scale_min(2 * j, b->scales, &sc0, &m0);                                                        \
            mms__q4_k_scale_min(2 * j + 1, b->scales, &sc1, &m1);                                                    \
            lo = DOT(DOT(vdupq_n_s32(0), mms__nibbles_lo(q0, 0), vld1q_s8(a)), mms__nibbles_lo(q1, 0), vld1q_s8(a + 16)); \
            hi = DOT(DOT(vdupq_n_s32(0), mms__nibbles_hi(q0, 0), vld1q_s8(a + 32)), mms__nibbles_hi(q1, 0), vld1q_s8(a + 48)); \
            sumi = vmlaq_n_s32(vmlaq_n_s32(sumi, lo, sc0), hi, sc1);                                                 \
            mins += m0 * (x->bsums[4 * j] + x->bsums[4 * j + 1]) + m1 * (x->bsums[4 * j + 2] + x->bsums[4 * j + 3]); \
        }                                                                                                            \
        sum += x->d * (mms__fp16_to_f32_neon(b->d) * (float)vaddvq_s32(sumi) - mms__fp16_to_f32_neon(b->dmin) * (float)mins); \
    }                                                                                                                \
    return sum;                                                                                                      \
}                                                                                                                    \
/* Q6_K: per half, group g of 32 values takes nibble g / 2 of ql[32 (g % 2) ..] and bits 2g of qh;  \
   each 16 values have their own int8 scale */                                                                       \
static TARGET float mms__dot_q6_k_##SUFFIX(int64_t K, const void *w, const void *xv) {                               \
    const struct mms__block_q6_k *b = (const struct mms__block_q6_k *)w;                                             \
    const struct mms__block_q8_k *x = (const struct mms__block_q8_k *)xv;                                            \
    float32x4_t acc = vdupq_n_f32(0.0f);                                                                             \
    int64_t i;                                                                                                       \
    int h, g, k;                                                                                                     \
    for (i = 0; i < K / MMS__QK_K; i++, b++, x++) {                                                                  \
        int32x4_t sumi = vdupq_n_s32(0);                                                                             \
        for (h = 0; h < 2; h++) {                                                                                    \
            const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;                                                \
            const int8_t *sc = b->scales + 8 * h, *a = x->qs + 128 * h;                                              \
            for (g = 0; g < 4; g++)                                                                                  \
                for (k = 0; k < 2; k++) {                                                                            \
                    const int8x16_t v = mms__q6_k_values(vld1q_u8(ql + 32 * (g % 2) + 16 * k), g >= 2,               \
                                                          vld1q_u8(qh + 16 * k), 2 * g);                             \
                    sumi = vmlaq_n_s32(sumi, DOT(vdupq_n_s32(0), v, vld1q_s8(a + 32 * g + 16 * k)), sc[2 * g + k]);  \
                }                                                                                                    \
        }                                                                                                            \
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(sumi), mms__fp16_to_f32_neon(b->d) * x->d);                             \
    }                                                                                                                \
    return vaddvq_f32(acc);                                                                                          \
}
MMS__NEON_Q8_DOTS(neon, , mms__dot_s8_neon)
MMS__NEON_Q8_DOTS(dotprod, MMS__TARGET_DOTPROD, mms__dot_s8_dotprod)
#undef MMS__NEON_Q8_DOTS
#endif

typedef float (*mms__q8_dot_fn)(int64_t K, const void *w, const void *x);

/* The integer dot of a weight type for the kernel set in use; NULL where there is none (the
   scalar set, other types): the caller then dequantizes and keeps exact f32 activations. */
static mms__q8_dot_fn mms__q8_dot_for(enum mms_type type) {
    static const enum mms_type types[4] = { MMS_TYPE_Q8_0, MMS_TYPE_Q4_0, MMS_TYPE_Q4_K, MMS_TYPE_Q6_K };
    const mms__q8_dot_fn *dots = NULL;
    int i;
#if MMS__HAVE_AVX2
    static const mms__q8_dot_fn avx2[4] = { mms__dot_q8_0_avx2, mms__dot_q4_0_avx2, mms__dot_q4_k_avx2, mms__dot_q6_k_avx2 };
    if (mms__avx2()) dots = avx2;
#endif
#if MMS__HAVE_NEON
    static const mms__q8_dot_fn neon[4] = { mms__dot_q8_0_neon, mms__dot_q4_0_neon, mms__dot_q4_k_neon, mms__dot_q6_k_neon };
    static const mms__q8_dot_fn dotprod[4] = { mms__dot_q8_0_dotprod, mms__dot_q4_0_dotprod, mms__dot_q4_k_dotprod, mms__dot_q6_k_dotprod };
    if (mms__neon()) dots = mms__dotprod() ? dotprod : neon;
#endif
    for (i = 0; dots && i < 4; i++) if (types[i] == type) return dots[i];
    return NULL;
}

/* One weight row against 4 activation rows x_stride bytes apart: out[c] = dot(w, x + c x_stride). */
typedef void (*mms__q8_dot4_fn)(int64_t K, const void *w, const void *x, size_t x_stride, float *out);

/* The 4-column dot of a weight type for the kernel set in use and a product of N columns; NULL
   where there is none (the caller then runs the f32 GEMM on dequantized weights for prompt sizes).
   Q8_0's is for decode steps of up to 8 sequences only: for prompts the GEMM is faster (see above),
   but dequantizing a whole tile for a few columns took 5x the 4-column dots' time. */
static mms__q8_dot4_fn mms__q8_dot4_for(enum mms_type type, int64_t N) {
#if MMS__HAVE_AVX2
    if (mms__avx2()) {
        switch (type) {
            case MMS_TYPE_Q4_K: return mms__dot4_q4_k_avx2;
            case MMS_TYPE_Q6_K: return mms__dot4_q6_k_avx2;
            case MMS_TYPE_Q8_0: return N <= MMS__DECODE_MAX_COLS ? mms__dot4_q8_0_avx2 : NULL;
            default: break;
        }
    }
#endif
    MMS__UNUSED(type);
    MMS__UNUSED(N);
    return NULL;
}

/* Products on repacked tiles of 8 weight rows: pack writes rows[0..n) (n <= 8, the others zero) of
   K values as K / block_len blocks of block_bytes; dot makes out[8 c + r] = dot(row r, x[c])
   against 4 activation rows in the format of mms__quantize_row_act (NULL: prompts take the other
   paths, as Q8_0's do: see ops_matmul); gemv one row against groups, for decode. */
struct mms__q8_x8 {
    void (*pack)(const void *const *rows, int n, int64_t K, void *dst);
    void (*dot)(int64_t K, const void *w, const void *const x[4], float *out);
    int64_t block_len;
    size_t block_bytes;
    /* one activation row against ns <= 4 groups (decode on weights kept repacked) */
    void (*gemv)(int ns, int64_t K, const void *const w[4], const void *x, float *const out[4]);
    int64_t dot_from_n;   /* the fewest columns dot takes (Q8_0: past a decode step of several sequences,
                             whose columns keep the bits they get alone through the 4-column dots) */
};

/* The repacked kernel prompt-size products with this weight type take; NULL: none. */
static const struct mms__q8_x8 *mms__q8_x8_for(enum mms_type type) {
#if MMS__HAVE_AVX2
    static const struct mms__q8_x8 q4_0 = { mms__pack_q4_0x8, mms__gemm_q4_0x8_avx2, 32, sizeof(struct mms__q4_0x8), mms__gemv_q4_0x8_avx2, 0 };
    static const struct mms__q8_x8 q4_k = { mms__pack_q4_kx8, mms__gemm_q4_kx8_avx2, MMS__QK_K, sizeof(struct mms__q4_kx8), mms__gemv_q4_kx8_avx2, 0 };
    static const struct mms__q8_x8 q8_0 = { mms__pack_q8_0x8, NULL, 32, sizeof(struct mms__q8_0x8), mms__gemv_q8_0x8_avx2, 0 };
    static const struct mms__q8_x8 q4_0_vnni = { mms__pack_q4_0x8, mms__gemm_q4_0x8_avx512, 32, sizeof(struct mms__q4_0x8), mms__gemv_q4_0x8_avx512, 0 };
    static const struct mms__q8_x8 q4_k_vnni = { mms__pack_q4_kx8, mms__gemm_q4_kx8_avx512, MMS__QK_K, sizeof(struct mms__q4_kx8), mms__gemv_q4_kx8_avx512, 0 };
    static const struct mms__q8_x8 q8_0_vnni = { mms__pack_q8_0x8, mms__gemm_q8_0x8_avx512, 32, sizeof(struct mms__q8_0x8), mms__gemv_q8_0x8_avx512, MMS__DECODE_MAX_COLS + 1 };
    const bool vnni = mms__avx512();
    if (mms__avx2() && type == MMS_TYPE_Q4_0) return vnni ? &q4_0_vnni : &q4_0;
    if (mms__avx2() && type == MMS_TYPE_Q8_0) return vnni ? &q8_0_vnni : &q8_0;
    if (mms__avx2() && type == MMS_TYPE_Q4_K) return vnni ? &q4_k_vnni : &q4_k;
#endif
    MMS__UNUSED(type);
    return NULL;
}
/* ==== end src/backend/cpu/quant_dot.c ==== */

/* ==== begin src/backend/cpu/repack.c ==== */
/* >>cpu-repack ====================================================================================
   Weights kept in the CPU kernels' own layout (the CPU_REPACK buffer type, cpu_backend.c). A
   prompt-size product with Q4_0 or Q4_K weights repacks each tile of 8 rows side by side before its
   integer kernel runs (quant_dot: mms__q4_0x8, mms__q4_kx8), once per thread and tile of every
   call; a decode step reads row by row, one stream per thread. Kept repacked, a product starts
   from the packed tiles and a decode step walks 4 groups of 8 rows side by side (the gemv kernels,
   Q8_0's too: mms__q8_0x8). The layout: groups of 8 rows, each group one packed block per block of
   the type (Q4_0, Q8_0: the 8 rows' bytes permuted, the same size; Q4_K: 1184 bytes for 1152, the
   sub-block scales as bytes), then the rows past the last multiple of 8 as they were. It depends
   on the tensor's shape only, never on the kernel set: the scalar and NEON sets (and Q8_0
   prompts) unpack a tile of rows before using it. Only MUL_MAT may read such a tensor, as its
   weights (src[0]); setting or reading it goes through the buffer (whole tensors), which converts. */

/* The buffer type's name, which also identifies it (declared here, defined with the type). */
static const char *mms__cpu_repack_buft_get_name(mms_backend_buffer_type_t buft);

struct mms__repack_type {
    enum mms_type type;
    int64_t       block_len;    /* values per block of the type */
    size_t        group_block;  /* bytes of 8 rows' blocks in the layout */
    void (*pack)(const void *const *rows, int n, int64_t K, void *dst);   /* n <= 8 rows, portable */
    void (*unpack)(const void *src, int64_t K, void *const *rows);        /* 8 rows back */
};

static const struct mms__repack_type *mms__repack_type_of(enum mms_type type) {
    static const struct mms__repack_type types[3] = {
        { MMS_TYPE_Q4_0, 32, sizeof(struct mms__q4_0x8), mms__pack_q4_0x8_rows, mms__unpack_q4_0x8_rows },
        { MMS_TYPE_Q4_K, MMS__QK_K, sizeof(struct mms__q4_kx8), mms__pack_q4_kx8_rows, mms__unpack_q4_kx8_rows },
        { MMS_TYPE_Q8_0, 32, sizeof(struct mms__q8_0x8), mms__pack_q8_0x8_rows, mms__unpack_q8_0x8_rows },
    };
    int i;
    for (i = 0; i < 3; i++) if (types[i].type == type) return &types[i];
    return NULL;
}

/* Whether a tensor of this shape is kept repacked in a CPU_REPACK buffer (others are stored as
   they are): Q4_0, Q4_K and Q8_0 matrices of at least 8 rows, contiguous, one batch. */
static bool mms__repack_layout(const struct mms_tensor *t) {
    return mms__repack_type_of(t->type) && t->ne[1] >= 8 && t->ne[2] == 1 && t->ne[3] == 1 && mms_is_contiguous(t);
}

/* t's data is in the repacked layout (a view of such a tensor is not: it cannot be read). */
static bool mms__is_repacked(const struct mms_tensor *t) {
    return t && !t->view_src && t->buffer && t->buffer->buft->iface.get_name == mms__cpu_repack_buft_get_name && mms__repack_layout(t);
}

/* The first row kept as it was (the rows before are in groups of 8). */
static int64_t mms__repack_tail(const struct mms_tensor *t) { return t->ne[1] / 8 * 8; }

static size_t mms__repack_group_bytes(const struct mms_tensor *t) {
    return (size_t)(t->ne[0] / mms__repack_type_of(t->type)->block_len) * mms__repack_type_of(t->type)->group_block;
}

/* Bytes before the group of rows r..r + 7 (r < tail, a multiple of 8) or the kept row r (r >= tail). */
static size_t mms__repack_offset(const struct mms_tensor *t, int64_t r) {
    const int64_t tail = mms__repack_tail(t);
    if (r < tail) return (size_t)(r / 8) * mms__repack_group_bytes(t);
    return (size_t)(tail / 8) * mms__repack_group_bytes(t) + (size_t)(r - tail) * mms_row_size(t->type, t->ne[0]);
}

static char *mms__repack_at(const struct mms_tensor *t, int64_t r) { return (char *)t->data + mms__repack_offset(t, r); }

/* Bytes of the layout (the buffer type's allocation size). */
static size_t mms__repack_size(const struct mms_tensor *t) { return mms__repack_offset(t, t->ne[1]); }

/* Raw rows [r0, r0 + n) of a repacked tensor into dst, row_size bytes each; r0 a multiple of 8. */
static void mms__repack_rows(const struct mms_tensor *t, int64_t r0, int64_t n, void *dst) {
    const size_t rs = mms_row_size(t->type, t->ne[0]);
    const int64_t tail = mms__repack_tail(t);
    int64_t r = r0;
    int i;
    for (; r < r0 + n && r < tail; r += 8) {
        void *rows[8];
        for (i = 0; i < 8; i++) rows[i] = (char *)dst + (size_t)(r - r0 + i) * rs;
        mms__repack_type_of(t->type)->unpack(mms__repack_at(t, r), t->ne[0], rows);
    }
    if (r < r0 + n) memcpy((char *)dst + (size_t)(r - r0) * rs, mms__repack_at(t, r), (size_t)(r0 + n - r) * rs);
}

/* The whole tensor from the file's layout (src) into t's memory, repacked (the AVX2 packs where
   the CPU has them: the same bytes, faster). */
static void mms__repack_set(struct mms_tensor *t, const void *src) {
    const struct mms__repack_type *rt = mms__repack_type_of(t->type);
    const size_t rs = mms_row_size(t->type, t->ne[0]);
    const int64_t tail = mms__repack_tail(t);
    void (*pack)(const void *const *rows, int n, int64_t K, void *dst) = rt->pack;
    int64_t r;
    int i;
#if MMS__HAVE_AVX2
    if (mms__avx2()) pack = mms__q8_x8_for(t->type)->pack;
#endif
    for (r = 0; r < tail; r += 8) {
        const void *rows[8];
        for (i = 0; i < 8; i++) rows[i] = (const char *)src + (size_t)(r + i) * rs;
        pack(rows, 8, t->ne[0], mms__repack_at(t, r));
    }
    memcpy(mms__repack_at(t, tail), (const char *)src + (size_t)tail * rs, (size_t)(t->ne[1] - tail) * rs);
}

/* The repacked tensor a node reads or writes other than as MUL_MAT's weights, or NULL. */
static const struct mms_tensor *mms__repack_misuse(const struct mms_tensor *node) {
    int i;
    if (node->view_src && mms__is_repacked(node->view_src)) return node->view_src;
    for (i = 0; i < MMS_MAX_SRC; i++)
        if (node->src[i] && (node->op != MMS_OP_MUL_MAT || i != 0) && mms__is_repacked(node->src[i])) return node->src[i];
    return NULL;
}
/* ==== end src/backend/cpu/repack.c ==== */

/* ==== begin src/backend/cpu/ops_matmul.c ==== */
/* >>cpu-matmul ====================================================================================
   MUL_MAT: dst[n, m] = dot(a row m, b row n), both rows running along K = ne[0]. The work is cut
   into tiles of MB rows of a by NB rows of b per batch, handed out through an atomic counter so
   both cores stay busy whatever the sizes (1601 included); tiles depend on the shapes only, so
   results do not depend on the thread count.
   - SIMD sets, N > 4 (f16/f32 weights: N > 8) (GEMM): the a tile is packed transposed into panels of 16 columns (f16/bf16
     converted on the way) and kept while consecutive tiles walk along b; the register block then
     broadcasts 6 b values per k against the 16 columns of the panel (AVX2: 12 FMAs per 8 loads;
     NEON: 24 per 10), writing dst rows directly. Tiles walk along b first so each thread packs a
     tile of a once.
   - N <= 4, f16/f32 N <= 8 (decode GEMV, of up to 8 sequences) and the scalar path: dot products
     straight from the rows (SIMD: 4 rows of weights against one column at a time, or on AVX2 2 rows
     against 4 columns, f16 converted inside the dot, each (row, column) summed the same way either
     way; quantized weights against 8-bit activations, see quant_dot), so the weights stream from
     memory exactly once.
   - Q4_0 and Q4_K weights on AVX2, N > 4: the b tile is rounded to 8-bit blocks as below, and each tile of
     a is repacked 8 rows side by side (quant_dot) into the scratch of the GEMM's packed tile, so
     one kernel call makes 8 rows by 4 columns.
   - Q4_0, Q4_K and Q8_0 weights kept repacked (a CPU_REPACK buffer, repack.c): the groups of 8 rows are
     read in place by the same kernel, and 1 to 4 columns go one by one through the one-column form
     that walks 4 groups of the tile side by side; without AVX2 (and for Q8_0 prompts on AVX2, whose
     8-row kernel would be no faster than the GEMM there; AVX-512 has one past 8 columns) each
     tile's rows are unpacked first.
   - Quantized weights with a 4-column integer dot (the K types on AVX2 for any N; Q8_0 for N <= 8,
     a decode step of several sequences), mostly prompt sizes: the b tile is
     rounded to 8-bit blocks once per thread and tile, then each weight row of the a tile is
     dotted against 4 columns at a time, those 4 staying in L1 while the a tile streams from L2. */

#define MMS__MM_MB 64
#define MMS__MM_NB 48
#define MMS__MM_GEMV_N 4

static size_t mms__mul_mat_work_size(const struct mms_tensor *dst) {
    const int64_t K = dst->src[0]->ne[0];
    const size_t unpacked = mms__is_repacked(dst->src[0]) ? MMS__MM_MB * mms_row_size(dst->src[0]->type, K) + 64 : 0;   /* <= its f32 tile */
    return (size_t)(MMS__MM_MB + 16 + MMS__MM_NB) * (size_t)K * sizeof(float) + MMS__MM_NB * mms__q8_act_row_size(K) + 128 + unpacked;
}

/* out[j * ldo + i] = dot(A[i], B[j]) for i < mr, j < nr */
static void mms__mm_tile(int64_t K, const float *const *A, int64_t mr, const float *const *B, int64_t nr, float *out, int64_t ldo) {
    int64_t i, j;
    for (i = 0; i < mr; i++)
        for (j = 0; j < nr; j++) out[j * ldo + i] = mms__vec_dot_f32(K, A[i], B[j]);
}

/* Pointers to rows [r0, r0 + n) of t in batch (i2, i3) as contiguous f32, converting into buf. */
static void mms__mm_rows(const struct mms_tensor *t, int64_t r0, int64_t n, int64_t i2, int64_t i3,
                         float *buf, const float **rows) {
    int64_t r;
    for (r = 0; r < n; r++) rows[r] = mms__load_row(t, r0 + r, i2, i3, buf + r * t->ne[0]);
}

/* Rows [r0, r0 + n) of t as f32 with one leading dimension: in place when t has it, else copied. */
static const float *mms__mm_block(const struct mms_tensor *t, int64_t r0, int64_t n, int64_t i2, int64_t i3, float *buf, int64_t *ld) {
    const int64_t K = t->ne[0];
    int64_t r;
    if (t->type == MMS_TYPE_F32 && t->nb[0] == sizeof(float) && t->nb[1] % sizeof(float) == 0) {
        *ld = (int64_t)(t->nb[1] / sizeof(float));
        return (const float *)mms__row_ptr(t, r0, i2, i3);
    }
    for (r = 0; r < n; r++) {
        const float *x = mms__load_row(t, r0 + r, i2, i3, buf + r * K);
        if (x != buf + r * K) memcpy(buf + r * K, x, (size_t)K * sizeof(float));
    }
    *ld = K;
    return buf;
}

/* Packs rows [m0, m0 + mr) of a into panels of 16: pack[p * 16 K + k * 16 + i] = a[m0 + 16 p + i][k],
   zero past mr. rowbuf holds 16 converted rows. */
static void mms__mm_pack(const struct mms_tensor *a, int64_t m0, int64_t mr, int64_t i2, int64_t i3, float *pack, float *rowbuf) {
    const int64_t K = a->ne[0];
    int64_t p, k, i;
    for (p = 0; p * 16 < mr; p++) {
        const int64_t n = MMS__MIN(16, mr - p * 16);
        int64_t ld;
        const float *rows = mms__mm_block(a, m0 + p * 16, n, i2, i3, rowbuf, &ld);
        float *panel = pack + p * 16 * K;
        mms__transpose_f32(n, K, rows, ld, panel, 16);
        if (n < 16) for (k = 0; k < K; k++) for (i = n; i < 16; i++) panel[k * 16 + i] = 0.0f;
    }
}

static void mms__cpu_mul_mat(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0], *b = dst->src[1];
    const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1];
    const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    const int64_t tiles_m = (M + MMS__MM_MB - 1) / MMS__MM_MB, tiles_n = (N + MMS__MM_NB - 1) / MMS__MM_NB;
    const int64_t n_items = tiles_m * tiles_n * b->ne[2] * b->ne[3];
    const int64_t ldo = (int64_t)(dst->nb[1] / sizeof(float));
    const bool repacked = mms__is_repacked(a);   /* a CPU_REPACK tensor (repack.c) */
    const struct mms__q8_x8 *x8 = K % 32 == 0 ? mms__q8_x8_for(a->type) : NULL;
    const bool x8_dot = x8 && x8->dot && N > MMS__MM_GEMV_N && N >= x8->dot_from_n;
    const bool x8_in_place = repacked && x8 && (N <= MMS__MM_GEMV_N ? x8->gemv != NULL : x8_dot);   /* kernels read a's groups in place */
    const mms__q8_dot4_fn q8_dot4 = K % 32 == 0 ? mms__q8_dot4_for(a->type, N) : NULL;
    const struct mms__q8_x8 *q8_x8 = x8_dot || x8_in_place ? x8 : NULL;
    const bool f16_direct = a->type == MMS_TYPE_F16 && a->nb[0] == sizeof(mms_fp16_t) && a->nb[1] % sizeof(mms_fp16_t) == 0;
    const bool f32_direct = a->type == MMS_TYPE_F32 && a->nb[0] == sizeof(float) && a->nb[1] % sizeof(float) == 0;
    const int64_t gemv_n = f16_direct || f32_direct ? MMS__DECODE_MAX_COLS : MMS__MM_GEMV_N;   /* f16/f32: packing a
                                                                                                 tile does not pay below */
    const bool gemm = mms__simd() && N > gemv_n && !q8_dot4 && !q8_x8;   /* the f32 GEMM; quantized weights
                                                                             with integer kernels take those */
    float *abuf = (float *)MMS__ALIGN_UP((uintptr_t)p->wdata, 64), *rowbuf = abuf + MMS__MM_MB * K, *bbuf = rowbuf + 16 * K;
    char *bq8 = (char *)(bbuf + MMS__MM_NB * K);   /* the b rows in 8 bits (quantized a), q8_row bytes apart */
    const size_t q8_row = mms__q8_act_row_size(K);
    char *unpacked = (char *)MMS__ALIGN_UP((uintptr_t)(bq8 + MMS__MM_NB * q8_row), 64);   /* repacked a without its kernels: */
    struct mms_tensor a_tile;                                                            /* the tile's rows as they were */
    const mms__q8_dot_fn q8_dot = !gemm && K % 32 == 0 ? mms__q8_dot_for(a->type) : NULL;   /* NULL: none for this set */
    const float *arows[MMS__MM_MB], *brows[MMS__MM_NB];
    int64_t cached = -1;   /* the tile of a (GEMM) or of b (dot path) already in the scratch */

    if (K == 0) {            /* empty products are zero */
        int64_t r, lo, hi;
        mms__split(mms_nrows(dst), p->ith, p->nth, &lo, &hi);
        for (r = lo; r < hi; r++) {
            int64_t i1, i2, i3;
            mms__unravel_row(dst->ne, r, &i1, &i2, &i3);
            memset(mms__row_ptr(dst, i1, i2, i3), 0, (size_t)M * sizeof(float));
        }
        return;
    }
    for (;;) {
        int64_t item = mms__atomic_fetch_add(p->counter, 1), tm, tn, batch, i12, i13, m0, n0, mr, nr, akey, am0;
        const struct mms_tensor *A;
        if (item >= n_items) break;
        if (gemm) {          /* along b first: the packed tile of a is reused */
            tn = item % tiles_n;
            tm = (item / tiles_n) % tiles_m;
        } else {             /* along a first: the converted b rows are reused */
            tm = item % tiles_m;
            tn = (item / tiles_m) % tiles_n;
        }
        batch = item / (tiles_m * tiles_n);
        i12 = batch % b->ne[2];
        i13 = batch / b->ne[2];
        m0 = tm * MMS__MM_MB;
        n0 = tn * MMS__MM_NB;
        mr = MMS__MIN(MMS__MM_MB, M - m0);
        nr = MMS__MIN(MMS__MM_NB, N - n0);
        akey = (tm * a->ne[2] + i12 / r2) * a->ne[3] + i13 / r3;
        A = a;
        am0 = m0;
        if (repacked && !x8_in_place) {   /* unpacked into a tensor of the tile's rows; its m0 is 0 */
            if (!gemm || cached != akey) {
                mms__repack_rows(a, m0, mr, unpacked);
                a_tile = *a;
                a_tile.data = unpacked;
                a_tile.buffer = NULL;
                a_tile.ne[1] = mr;
            }
            A = &a_tile;
            am0 = 0;
        }
        if (gemm) {
            const float *brow;
            int64_t ldb;
            if (cached != akey) {
                mms__mm_pack(A, am0, mr, i12 / r2, i13 / r3, abuf, rowbuf);
                cached = akey;
            }
            brow = mms__mm_block(b, n0, nr, i12, i13, bbuf, &ldb);
            mms__gemm_f32(nr, mr, K, brow, ldb, abuf, 16, 16 * K, (float *)mms__row_ptr(dst, n0, i12, i13) + m0, ldo, 0);
        } else {
            float *out = (float *)mms__row_ptr(dst, n0, i12, i13) + m0;
            if (cached != item / tiles_m) {
                int64_t j;
                mms__mm_rows(b, n0, nr, i12, i13, bbuf, brows);
                if (q8_dot) for (j = 0; j < nr; j++) mms__quantize_row_act(a->type, brows[j], bq8 + j * q8_row, K);
                cached = item / tiles_m;
            }
            if (q8_x8) {                       /* the tile of a in groups of 8 rows side by side, then 8 x 4 blocks */
                const size_t group = (size_t)(K / q8_x8->block_len) * q8_x8->block_bytes;   /* 64 rows: at most 37 K bytes, in the f32 tile's 256 K */
                const int64_t in_place = repacked ? MMS__MIN(mr, mms__repack_tail(a) - m0) : 0;   /* rows kept repacked */
                const int64_t ng = (mr + 7) / 8;
                const void *groups[MMS__MM_MB / 8], *rows[8], *xs[4];
                float res[MMS__MM_MB];
                int64_t g, r, j, c;
                for (g = 0; g < ng; g++) {
                    const int n = (int)MMS__MIN(8, mr - g * 8);
                    if (g * 8 < in_place) { groups[g] = mms__repack_at(a, m0 + g * 8); continue; }
                    for (r = 0; r < n; r++)   /* rows as they are: of a tensor, or a repacked one's last */
                        rows[r] = repacked ? mms__repack_at(a, m0 + g * 8 + r) : mms__row_ptr(A, am0 + g * 8 + r, i12 / r2, i13 / r3);
                    q8_x8->pack(rows, n, K, (char *)abuf + (size_t)g * group);
                    groups[g] = (char *)abuf + (size_t)g * group;
                }
                if (N <= MMS__MM_GEMV_N) {     /* decode on repacked weights: one column, 4 groups side by side */
                    for (j = 0; j < nr; j++) {
                        for (g = 0; g < MMS__MIN(ng, 2); g++) {   /* groups g, g + 2, g + 4, g + 6 */
                            const void *w4[4];
                            float *o4[4];
                            int ns = 0;
                            for (c = g; c < ng; c += 2, ns++) { w4[ns] = groups[c]; o4[ns] = res + 8 * c; }
                            q8_x8->gemv(ns, K, w4, bq8 + j * q8_row, o4);
                        }
                        for (r = 0; r < mr; r++) out[j * ldo + r] = res[r];
                    }
                    continue;
                }
                for (j = 0; j < nr; j += 4) {   /* 4 columns stay in L1 while the packed tile streams past */
                    for (c = 0; c < 4; c++) xs[c] = bq8 + MMS__MIN(j + c, nr - 1) * q8_row;
                    for (g = 0; g < ng; g++) {
                        q8_x8->dot(K, groups[g], xs, res);
                        for (c = 0; c < 4 && j + c < nr; c++)
                            for (r = 0; r < 8 && g * 8 + r < mr; r++) out[(j + c) * ldo + g * 8 + r] = res[8 * c + r];
                    }
                }
                continue;
            }
            if (q8_dot) {                      /* integer dots against the 8-bit activations */
                int64_t i, j = 0, c;
                float d[4];
                for (; q8_dot4 && j + 4 <= nr; j += 4)   /* 4 columns stay in L1 while the weight tile streams past */
                    for (i = 0; i < mr; i++) {
                        q8_dot4(K, mms__row_ptr(A, am0 + i, i12 / r2, i13 / r3), bq8 + j * q8_row, q8_row, d);
                        for (c = 0; c < 4; c++) out[(j + c) * ldo + i] = d[c];
                    }
                for (i = 0; j < nr && i < mr; i++) {
                    const void *w = mms__row_ptr(A, am0 + i, i12 / r2, i13 / r3);
                    for (c = j; c < nr; c++) out[c * ldo + i] = q8_dot(K, w, bq8 + c * q8_row);
                }
                continue;
            }
            if (mms__simd() && (f16_direct || f32_direct)) {   /* straight from the weights, 4 rows at a time */
                const size_t es = f16_direct ? sizeof(mms_fp16_t) : sizeof(float);
                const char *a0 = mms__row_ptr(A, am0, i12 / r2, i13 / r3);
                const int64_t lda = (int64_t)(a->nb[1] / es);
                const int64_t n2x4 = mms__vec_has_dot2x4() ? nr / 4 * 4 : 0;   /* columns taken 4 at a time */
                int64_t i = 0, j, r, c;
                float d[8];
                for (; i + 4 <= mr; i += 4) {
                    for (j = 0; j < n2x4; j += 4)   /* each weight loaded once for 4 columns; the same sums */
                        for (r = 0; r < 4; r += 2) {
                            mms__vec_dot2x4(f16_direct, K, a0 + (size_t)((i + r) * lda) * es, lda, brows + j, d);
                            for (c = 0; c < 4; c++) { out[(j + c) * ldo + i + r] = d[2 * c]; out[(j + c) * ldo + i + r + 1] = d[2 * c + 1]; }
                        }
                    for (j = n2x4; j < nr; j++) {
                        mms__vec_dot4_rows(f16_direct, K, a0 + (size_t)(i * lda) * es, lda, brows[j], d);
                        for (r = 0; r < 4; r++) out[j * ldo + i + r] = d[r];
                    }
                }
                for (; i < mr; i++)
                    for (j = 0; j < nr; j++) out[j * ldo + i] = mms__vec_dot_row(f16_direct, K, a0 + (size_t)(i * lda) * es, brows[j]);
                continue;
            }
            mms__mm_rows(A, am0, mr, i12 / r2, i13 / r3, abuf, arows);
            mms__mm_tile(K, arows, mr, brows, nr, out, ldo);
        }
    }
}
/* ==== end src/backend/cpu/ops_matmul.c ==== */

/* ==== begin src/backend/cpu/ops_norm.c ==== */
/* >>cpu-norm ======================================================================================
   Row reductions: layer norm, RMS norm, sum_rows, argmax. Sums are accumulated in double (on the
   AVX2 path too, four lanes at a time), so long rows lose no precision. */

static void mms__cpu_norm(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0];
    const int64_t n = dst->ne[0];
    const float eps = mms_get_op_params_f32(dst, 0);
    float *abuf = p->wdata, *obuf = abuf + n;
    int64_t r, lo, hi;
    mms__split(mms_nrows(dst), p->ith, p->nth, &lo, &hi);
    for (r = lo; r < hi; r++) {
        int64_t i1, i2, i3;
        const float *x;
        float *out, scale;
        double sum, sq, mean = 0.0;
        mms__unravel_row(dst->ne, r, &i1, &i2, &i3);
        x = mms__load_row(a, i1, i2, i3, abuf);
        out = mms__out_row(dst, i1, i2, i3, obuf);
        if (dst->op == MMS_OP_NORM) {           /* the mean first, then squares around it */
            mms__vec_sums_f64(n, x, 0.0, &sum, &sq);
            mean = sum / (double)n;
        }
        mms__vec_sums_f64(n, x, mean, &sum, &sq);
        scale = (float)(1.0 / sqrt(sq / (double)n + (double)eps));
        mms__vec_shift_scale_f32(n, out, x, mean, scale);
        if (out == obuf) mms__store_row(dst, i1, i2, i3, out);
    }
}

static void mms__cpu_sum_rows(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0];
    int64_t r, lo, hi, i;
    mms__split(mms_nrows(a), p->ith, p->nth, &lo, &hi);
    for (r = lo; r < hi; r++) {
        int64_t i1, i2, i3;
        const float *x;
        double sum = 0.0;
        mms__unravel_row(a->ne, r, &i1, &i2, &i3);
        x = mms__load_row(a, i1, i2, i3, p->wdata);
        for (i = 0; i < a->ne[0]; i++) sum += x[i];
        *(float *)mms__row_ptr(dst, i1, i2, i3) = (float)sum;
    }
}

static void mms__cpu_argmax(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0];
    int64_t r, lo, hi, i;
    mms__split(mms_nrows(a), p->ith, p->nth, &lo, &hi);
    for (r = lo; r < hi; r++) {
        int64_t i1, i2, i3, best = 0;
        const float *x;
        mms__unravel_row(a->ne, r, &i1, &i2, &i3);
        x = mms__load_row(a, i1, i2, i3, p->wdata);
        for (i = 1; i < a->ne[0]; i++)
            if (x[i] > x[best] || (x[best] != x[best] && x[i] == x[i])) best = i;   /* NaN never wins */
        ((int32_t *)dst->data)[r] = (int32_t)best;
    }
}
/* ==== end src/backend/cpu/ops_norm.c ==== */

/* ==== begin src/backend/cpu/ops_attention.c ==== */
/* >>cpu-attention =================================================================================
   Softmax with scale and mask, rotary embeddings, and fused attention with a streaming softmax. */

/* Masks: element (j, i, i2, i3) with broadcasting over dims 2 and 3, as f32. */
static const char *mms__mask_row(const struct mms_tensor *mask, int64_t i, int64_t i2, int64_t i3) {
    return mms__row_ptr(mask, i, i2 % mask->ne[2], i3 % mask->ne[3]);
}
static float mms__mask_at(const struct mms_tensor *mask, const char *row, int64_t j) {
    const char *ptr = row + j * (int64_t)mask->nb[0];
    if (mask->type == MMS_TYPE_F32) { float f; memcpy(&f, ptr, sizeof f); return f; }
    { mms_fp16_t h; memcpy(&h, ptr, sizeof h); return mms_fp16_to_fp32(h); }
}

/* One row of mask as contiguous f32 (columns j0 .. j0 + n): a pointer into the mask when it is
   contiguous f32, else converted into buf. */
static const float *mms__mask_span(const struct mms_tensor *mask, const char *row, int64_t j0, int64_t n, float *buf) {
    int64_t j;
    if (mask->type == MMS_TYPE_F32 && mask->nb[0] == sizeof(float)) return (const float *)row + j0;
    if (mask->nb[0] == mms_type_size(mask->type)) { mms__to_f32(mask->type, row + j0 * (int64_t)mask->nb[0], buf, n); return buf; }
    for (j = 0; j < n; j++) buf[j] = mms__mask_at(mask, row, j0 + j);
    return buf;
}

static void mms__cpu_soft_max(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0], *mask = dst->src[1];
    const int64_t n = dst->ne[0];
    const float scale = mms_get_op_params_f32(dst, 0);
    float *abuf = p->wdata, *obuf = abuf + n, *mbuf = obuf + n;
    int64_t r, lo, hi, i;
    mms__split(mms_nrows(dst), p->ith, p->nth, &lo, &hi);
    for (r = lo; r < hi; r++) {
        int64_t i1, i2, i3;
        const float *x;
        float *out, max;
        mms__unravel_row(dst->ne, r, &i1, &i2, &i3);
        x = mms__load_row(a, i1, i2, i3, abuf);
        out = mms__out_row(dst, i1, i2, i3, obuf);
        mms__vec_axpb_f32(n, out, x, scale, mask ? mms__mask_span(mask, mms__mask_row(mask, i1, i2, i3), 0, n, mbuf) : NULL);
        max = mms__vec_max_f32(n, out);
        if (max == -INFINITY) {              /* every entry masked: no distribution, zeros */
            for (i = 0; i < n; i++) out[i] = 0.0f;
        } else {
            double sum = mms__vec_exp_sum_f32(n, out, out, max);
            mms__vec_axpb_f32(n, out, out, (float)(1.0 / sum), NULL);
        }
        if (out == obuf) mms__store_row(dst, i1, i2, i3, out);
    }
}

static void mms__cpu_rope(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0], *pos = dst->src[1], *ff = dst->src[2];
    const int n_dims = mms_get_op_params_i32(dst, 0), mode = mms_get_op_params_i32(dst, 1);
    const float freq_base = mms_get_op_params_f32(dst, 3), freq_scale = mms_get_op_params_f32(dst, 4);
    const float attn_factor = mms_get_op_params_f32(dst, 6);
    const int64_t n = dst->ne[0], half = n_dims / 2;
    float *abuf = p->wdata, *obuf = abuf + n, *inv_freq = obuf + n, *cs = inv_freq + half, *sn = cs + half;
    int64_t r, lo, hi, i, cached_token = -1;

    for (i = 0; i < half; i++) {
        double f = (double)freq_scale * pow((double)freq_base, -2.0 * (double)i / (double)n_dims);
        if (ff) f /= (double)mms__get_f32(ff, i, 0, 0, 0);
        inv_freq[i] = (float)f;
    }
    mms__split(mms_nrows(dst), p->ith, p->nth, &lo, &hi);
    for (r = lo; r < hi; r++) {
        int64_t i1, i2, i3;
        const float *x;
        float *out;
        mms__unravel_row(dst->ne, r, &i1, &i2, &i3);
        if (i2 != cached_token) {            /* angles depend on the token only: share them across heads */
            int32_t position;
            memcpy(&position, (const char *)pos->data + i2 * (int64_t)pos->nb[0], sizeof position);
            for (i = 0; i < half; i++) {
                float theta = (float)position * inv_freq[i];
                cs[i] = (float)cos((double)theta) * attn_factor;
                sn[i] = (float)sin((double)theta) * attn_factor;
            }
            cached_token = i2;
        }
        x = mms__load_row(a, i1, i2, i3, abuf);
        out = mms__out_row(dst, i1, i2, i3, obuf);
        for (i = 0; i < half; i++) {
            int64_t j0 = mode == MMS_ROPE_TYPE_NEOX ? i : 2 * i, j1 = mode == MMS_ROPE_TYPE_NEOX ? i + half : 2 * i + 1;
            float x0 = x[j0], x1 = x[j1];
            out[j0] = x0 * cs[i] - x1 * sn[i];
            out[j1] = x0 * sn[i] + x1 * cs[i];
        }
        for (i = n_dims; i < n; i++) out[i] = x[i];
        if (out == obuf) mms__store_row(dst, i1, i2, i3, out);
    }
}

/* Flash attention, tiled. A work item is a block of QB query rows that share one K/V head (with
   grouped heads, the rows of every head of the group, so K and V are read once per group), run
   against blocks of KB keys. Per key block: S = Q K^T (Q pre-scaled, K packed transposed so the
   register block runs along keys), softcap and mask, the streaming softmax per row (running max m
   and sum l; the output accumulated so far is rescaled when m grows), then O += P V. Only the
   QB x KB score block ever exists. Blocks are fixed by the shapes, never by the thread count, so
   results do not depend on it. With at most MMS__FA_DIRECT rows in a block (decode: one query per
   sequence times the heads of a group) and f32 K and V, the scores and the weighted sum read the
   K and V rows in place: packing a block for a few rows cost more than the products. */
#define MMS__FA_QB 96
#define MMS__FA_KB 128
#define MMS__FA_DIRECT 8

struct mms__fa_dims { int64_t D, Dvp; };   /* Dvp: Dv rounded up to the 16-column register block */

static size_t mms__flash_attn_work_size(const struct mms_tensor *dst) {
    const int64_t D = dst->src[0]->ne[0], Dvp = MMS__ALIGN_UP(dst->src[2]->ne[0], 16);
    const int64_t QB = MMS__FA_QB, KB = MMS__FA_KB;
    return (size_t)(QB * D + QB * KB + QB * Dvp + 2 * QB + D * KB + KB * D + KB * Dvp + QB * KB + 10 * 16) * sizeof(float);
}

/* Rows j0 .. j0 + n of t in (i2, i3) as f32 rows with leading dimension *ld (at least width
   floats, zero beyond ne[0] up to width): in place when t already is that (and, if dense, its rows
   are packed: V rows of a ViT projection lie 5 KB apart, and reading panels of them again and
   again costs TLB misses that one copy avoids), else copied into buf. */
static const float *mms__fa_rows(const struct mms_tensor *t, int64_t j0, int64_t n, int64_t i2, int64_t i3,
                                 int64_t width, bool dense, float *buf, int64_t *ld) {
    int64_t j, i;
    if (t->type == MMS_TYPE_F32 && t->nb[0] == sizeof(float) && t->nb[1] % sizeof(float) == 0 && width == t->ne[0] &&
        (!dense || t->nb[1] == (size_t)width * sizeof(float))) {
        *ld = (int64_t)(t->nb[1] / sizeof(float));
        return (const float *)mms__row_ptr(t, j0, i2, i3);
    }
    for (j = 0; j < n; j++) {
        float *row = buf + j * width;
        const float *x = mms__load_row(t, j0 + j, i2, i3, row);
        if (x != row) memcpy(row, x, (size_t)t->ne[0] * sizeof(float));
        for (i = t->ne[0]; i < width; i++) row[i] = 0.0f;
    }
    *ld = width;
    return buf;
}

static void mms__cpu_flash_attn_ext(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *mask = dst->src[3], *mask_rows = dst->src[4];
    const int64_t D = q->ne[0], Dv = v->ne[0], Dvp = MMS__ALIGN_UP(Dv, 16), n_q = q->ne[1], n_kv = k->ne[1];
    const int64_t group = q->ne[2] / k->ne[2], Hkv = k->ne[2], rows = n_q * group;
    const int64_t QB = MMS__FA_QB, KB = MMS__FA_KB, n_blocks = (rows + QB - 1) / QB;
    const float scale = mms_get_op_params_f32(dst, 0), softcap = mms_get_op_params_f32(dst, 2);
    const bool direct = rows <= MMS__FA_DIRECT && k->type == MMS_TYPE_F32 && v->type == MMS_TYPE_F32 && k->nb[0] == sizeof(float) &&
                        v->nb[0] == sizeof(float) && k->nb[1] % sizeof(float) == 0 && v->nb[1] % sizeof(float) == 0;
    float *qb = (float *)MMS__ALIGN_UP((uintptr_t)p->wdata, 64);
    float *sb = qb + MMS__ALIGN_UP(QB * D, 16), *ob = sb + QB * KB, *mr = ob + QB * Dvp, *lr = mr + MMS__ALIGN_UP(QB, 16);
    float *kt = lr + MMS__ALIGN_UP(QB, 16), *kb = kt + MMS__ALIGN_UP(D * KB, 16), *vb = kb + MMS__ALIGN_UP(KB * D, 16);
    float *mb = vb + KB * Dvp;
    const char *mrow[MMS__FA_QB];
    const float *mspan[MMS__FA_QB];
    int64_t ih[MMS__FA_QB], iqs[MMS__FA_QB];

    for (;;) {
        const int64_t item = mms__atomic_fetch_add(p->counter, 1);
        int64_t ib, kh, r0, nr, i, j0;
        if (item >= n_blocks * Hkv * q->ne[3]) break;
        r0 = (item % n_blocks) * QB;
        kh = (item / n_blocks) % Hkv;
        ib = item / (n_blocks * Hkv);
        nr = MMS__MIN(QB, rows - r0);
        for (i = 0; i < nr; i++) {           /* row r0 + i: query r / group of head kh * group + r % group */
            float *qrow = qb + i * D;
            const float *x;
            iqs[i] = (r0 + i) / group;
            ih[i] = kh * group + (r0 + i) % group;
            x = mms__load_row(q, iqs[i], ih[i], ib, qrow);
            mms__vec_axpb_f32(D, qrow, x, scale, NULL);
            if (mask && mask_rows) {         /* the row's shared mask row */
                int32_t r;
                memcpy(&r, (const char *)mask_rows->data + iqs[i] * (int64_t)mask_rows->nb[0], sizeof r);
                if (r < 0 || r >= mask->ne[1]) {
                    mms__compute_fail(p, MMS_ERR_INVALID_ARG, "FLASH_ATTN_EXT %s: mask row %d for query %lld is outside 0..%lld",
                                      mms__tensor_desc(dst).s, (int)r, (long long)iqs[i], (long long)mask->ne[1] - 1);
                    return;
                }
                mrow[i] = mms__mask_row(mask, r, ih[i], ib);
            } else {
                mrow[i] = mask ? mms__mask_row(mask, iqs[i], ih[i], ib) : NULL;
            }
            mr[i] = -INFINITY;
            lr[i] = 0.0f;
        }
        memset(ob, 0, (size_t)(nr * Dvp) * sizeof(float));
        for (j0 = 0; j0 < n_kv; j0 += KB) {
            const int64_t nk = MMS__MIN(KB, n_kv - j0), nkp = MMS__ALIGN_UP(nk, 16);
            int64_t ldk, ldv, j;
            const float *ks, *vs;
            if (mask) {                      /* a key block masked for every row adds nothing: skip it */
                bool any = false;            /* (causal prefill halves its work; decode skips the unused cache) */
                for (i = 0; i < nr; i++) {
                    mspan[i] = mms__mask_span(mask, mrow[i], j0, nk, mb + i * KB);
                    any = any || mms__vec_max_f32(nk, mspan[i]) > -INFINITY;
                }
                if (!any) continue;
            }
            if (direct) {                    /* the scores from the key rows in place, each loaded once for 4 rows */
                const float *k0 = (const float *)mms__row_ptr(k, j0, kh, ib);
                const int64_t n4 = mms__simd() ? nr / 4 * 4 : 0;
                float d[4];
                ldk = (int64_t)(k->nb[1] / sizeof(float));
                for (j = 0; j < nk; j++) {
                    for (i = 0; i < n4; i += 4) {
                        int64_t c;
                        mms__vec_dot4_rows(false, D, qb + i * D, D, k0 + j * ldk, d);
                        for (c = 0; c < 4; c++) sb[(i + c) * KB + j] = d[c];
                    }
                    for (i = n4; i < nr; i++) sb[i * KB + j] = mms__vec_dot_f32(D, qb + i * D, k0 + j * ldk);
                }
            } else {
                ks = mms__fa_rows(k, j0, nk, kh, ib, D, false, kb, &ldk);
                mms__transpose_f32(nk, D, ks, ldk, kt, nkp);
                for (j = 0; j < D; j++) memset(kt + j * nkp + nk, 0, (size_t)(nkp - nk) * sizeof(float));
                mms__gemm_f32(nr, nkp, D, qb, D, kt, nkp, 16, sb, KB, 0);
            }
            for (i = 0; i < nr; i++) {
                float *srow = sb + i * KB, m_blk, m_new;
                if (softcap != 0.0f) for (j = 0; j < nk; j++) srow[j] = softcap * tanhf(srow[j] / softcap);
                if (mask) mms__vec_axpb_f32(nk, srow, srow, 1.0f, mspan[i]);
                m_blk = mms__vec_max_f32(nk, srow);
                if (m_blk == -INFINITY) {    /* every key of the block masked: weights 0 */
                    memset(srow, 0, (size_t)nk * sizeof(float));
                    continue;
                }
                m_new = m_blk > mr[i] ? m_blk : mr[i];
                if (m_new > mr[i]) {         /* rescale what was accumulated (nothing yet when m was -inf) */
                    const float f = expf(mr[i] - m_new);
                    mms__vec_axpb_f32(Dvp, ob + i * Dvp, ob + i * Dvp, f, NULL);
                    lr[i] *= f;
                    mr[i] = m_new;
                }
                lr[i] += (float)mms__vec_exp_sum_f32(nk, srow, srow, m_new);
            }
            /* O += P V; the direct path reads the value rows in place wherever they fill whole panels */
            vs = mms__fa_rows(v, j0, nk, kh, ib, Dvp, !direct, vb, &ldv);
            mms__gemm_f32(nr, Dvp, nk, sb, KB, vs, ldv, 16, ob, Dvp, 1);
        }
        for (i = 0; i < nr; i++) {
            float *out = (float *)mms__row_ptr(dst, ih[i], iqs[i], ib);
            mms__vec_axpb_f32(Dv, out, ob + i * Dvp, lr[i] > 0.0f ? 1.0f / lr[i] : 0.0f, NULL);   /* all keys masked: zeros */
        }
    }
}
/* ==== end src/backend/cpu/ops_attention.c ==== */

/* ==== begin src/backend/cpu/ops_layout.c ==== */
/* >>cpu-layout ====================================================================================
   Ops that move data: concat, pad, get_rows and im2col. */

/* Copies n elements of ts bytes between strided rows. */
static void mms__copy_elems(char *d, size_t dstride, const char *s, size_t sstride, int64_t n, size_t ts) {
    int64_t i;
    if (dstride == ts && sstride == ts) { memmove(d, s, (size_t)n * ts); return; }
    for (i = 0; i < n; i++) memmove(d + i * (int64_t)dstride, s + i * (int64_t)sstride, ts);
}

static void mms__zero_elems(char *d, size_t dstride, int64_t n, size_t ts) {
    int64_t i;
    if (dstride == ts) { memset(d, 0, (size_t)n * ts); return; }
    for (i = 0; i < n; i++) memset(d + i * (int64_t)dstride, 0, ts);
}

static void mms__cpu_concat(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0], *b = dst->src[1];
    const int dim = mms_get_op_params_i32(dst, 0);
    const size_t ts = mms_type_size(dst->type);
    int64_t r, lo, hi;
    mms__split(mms_nrows(dst), p->ith, p->nth, &lo, &hi);
    for (r = lo; r < hi; r++) {
        int64_t idx[4], k;
        char *d;
        mms__unravel_row(dst->ne, r, &idx[1], &idx[2], &idx[3]);
        d = mms__row_ptr(dst, idx[1], idx[2], idx[3]);
        if (dim == 0) {
            mms__copy_elems(d, dst->nb[0], mms__row_ptr(a, idx[1], idx[2], idx[3]), a->nb[0], a->ne[0], ts);
            mms__copy_elems(d + a->ne[0] * (int64_t)dst->nb[0], dst->nb[0], mms__row_ptr(b, idx[1], idx[2], idx[3]), b->nb[0], b->ne[0], ts);
        } else if (idx[dim] < a->ne[dim]) {
            mms__copy_elems(d, dst->nb[0], mms__row_ptr(a, idx[1], idx[2], idx[3]), a->nb[0], a->ne[0], ts);
        } else {
            for (k = 1; k < 4; k++) if (k == dim) idx[k] -= a->ne[dim];
            mms__copy_elems(d, dst->nb[0], mms__row_ptr(b, idx[1], idx[2], idx[3]), b->nb[0], b->ne[0], ts);
        }
    }
}

static void mms__cpu_pad(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0];
    const size_t ts = mms_type_size(dst->type);
    int64_t r, lo, hi;
    mms__split(mms_nrows(dst), p->ith, p->nth, &lo, &hi);
    for (r = lo; r < hi; r++) {
        int64_t i1, i2, i3;
        char *d;
        mms__unravel_row(dst->ne, r, &i1, &i2, &i3);
        d = mms__row_ptr(dst, i1, i2, i3);
        if (i1 < a->ne[1] && i2 < a->ne[2] && i3 < a->ne[3]) {
            mms__copy_elems(d, dst->nb[0], mms__row_ptr(a, i1, i2, i3), a->nb[0], a->ne[0], ts);
            mms__zero_elems(d + a->ne[0] * (int64_t)dst->nb[0], dst->nb[0], dst->ne[0] - a->ne[0], ts);
        } else {
            mms__zero_elems(d, dst->nb[0], dst->ne[0], ts);
        }
    }
}

static void mms__cpu_get_rows(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0], *b = dst->src[1];
    int64_t r, lo, hi;
    mms__split(mms_nrows(dst), p->ith, p->nth, &lo, &hi);
    for (r = lo; r < hi; r++) {
        int64_t i1, i2, i3;
        int32_t row;
        mms__unravel_row(dst->ne, r, &i1, &i2, &i3);
        memcpy(&row, mms__row_ptr(b, i2, i3, 0) + i1 * (int64_t)b->nb[0], sizeof row);
        if (row < 0 || row >= a->ne[1]) {
            mms__compute_fail(p, MMS_ERR_INVALID_ARG, "GET_ROWS %s: index %d at position %lld is outside 0..%lld of %s",
                              mms__tensor_desc(dst).s, (int)row, (long long)i1, (long long)a->ne[1] - 1, mms__tensor_desc(a).s);
            return;
        }
        if (a->type == MMS_TYPE_I32)
            mms__copy_elems(mms__row_ptr(dst, i1, i2, i3), dst->nb[0], mms__row_ptr(a, row, i2, i3), a->nb[0], a->ne[0], sizeof(int32_t));
        else
            mms__store_row(dst, i1, i2, i3, mms__load_row(a, row, i2, i3, p->wdata));
    }
}

/* Row rows[i] of dst (a view of a) from row i of b, for every (ne2, ne3). */
static void mms__cpu_set_rows(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *b = dst->src[0], *rows = dst->src[1];
    int64_t r, lo, hi;
    mms__split(mms_nrows(b), p->ith, p->nth, &lo, &hi);
    for (r = lo; r < hi; r++) {
        int64_t i1, i2, i3;
        int32_t row;
        mms__unravel_row(b->ne, r, &i1, &i2, &i3);
        memcpy(&row, (const char *)rows->data + i1 * (int64_t)rows->nb[0], sizeof row);
        if (row < 0 || row >= dst->ne[1]) {
            mms__compute_fail(p, MMS_ERR_INVALID_ARG, "SET_ROWS %s: index %d at position %lld is outside 0..%lld",
                              mms__tensor_desc(dst).s, (int)row, (long long)i1, (long long)dst->ne[1] - 1);
            return;
        }
        mms__store_row(dst, row, i2, i3, mms__load_row(b, i1, i2, i3, p->wdata));
    }
}

/* One output row (a patch) per output position; column c = (ic*KH + ky)*KW + kx (2-D) or
   ic*KW + kx (1-D), zero where the kernel reaches into the padding. */
static void mms__cpu_im2col(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *kern = dst->src[0], *in = dst->src[1];
    const int s0 = mms_get_op_params_i32(dst, 0), s1 = mms_get_op_params_i32(dst, 1);
    const int p0 = mms_get_op_params_i32(dst, 2), p1 = mms_get_op_params_i32(dst, 3);
    const int d0 = mms_get_op_params_i32(dst, 4), d1 = mms_get_op_params_i32(dst, 5);
    const bool is_2D = mms_get_op_params_i32(dst, 6) != 0;
    const int64_t KW = kern->ne[0], KH = is_2D ? kern->ne[1] : 1, IC = is_2D ? kern->ne[2] : kern->ne[1];
    float *obuf = p->wdata;
    int64_t r, lo, hi;
    mms__split(mms_nrows(dst), p->ith, p->nth, &lo, &hi);
    for (r = lo; r < hi; r++) {
        int64_t ox, oy, n, ic, ky, kx;
        float *out, *o;
        mms__unravel_row(dst->ne, r, &ox, &oy, &n);
        if (!is_2D) { n = oy; oy = 0; }
        out = mms__out_row(dst, ox, is_2D ? oy : n, is_2D ? n : 0, obuf);
        o = out;
        for (ic = 0; ic < IC; ic++) {
            for (ky = 0; ky < KH; ky++) {
                const int64_t iy = oy * s1 + ky * d1 - p1;
                for (kx = 0; kx < KW; kx++) {
                    const int64_t ix = ox * s0 + kx * d0 - p0;
                    if (is_2D) *o++ = (ix >= 0 && ix < in->ne[0] && iy >= 0 && iy < in->ne[1]) ? mms__get_f32(in, ix, iy, ic, n) : 0.0f;
                    else       *o++ = (ix >= 0 && ix < in->ne[0]) ? mms__get_f32(in, ix, ic, n, 0) : 0.0f;
                }
            }
        }
        if (out == obuf) mms__store_row(dst, ox, is_2D ? oy : n, is_2D ? n : 0, out);
    }
}

/* Each dst row is the matching row of a (indices modulo a's shape), repeated along ne[0]. */
static void mms__cpu_repeat(const struct mms__compute_params *p, struct mms_tensor *dst) {
    const struct mms_tensor *a = dst->src[0];
    const size_t ts = mms_type_size(dst->type);
    int64_t r, lo, hi, k;
    mms__split(mms_nrows(dst), p->ith, p->nth, &lo, &hi);
    for (r = lo; r < hi; r++) {
        int64_t i1, i2, i3;
        char *d;
        const char *s;
        mms__unravel_row(dst->ne, r, &i1, &i2, &i3);
        d = mms__row_ptr(dst, i1, i2, i3);
        s = mms__row_ptr(a, i1 % a->ne[1], i2 % a->ne[2], i3 % a->ne[3]);
        for (k = 0; k < dst->ne[0]; k += a->ne[0])
            mms__copy_elems(d + k * (int64_t)dst->nb[0], dst->nb[0], s, a->nb[0], a->ne[0], ts);
    }
}
/* ==== end src/backend/cpu/ops_layout.c ==== */

/* ==== begin src/backend/cpu/cpu_backend.c ==== */
/* >>cpu-backend ===================================================================================
   The CPU backend: its host buffer type, the op table and the graph loop on the thread pool. */

#define MMS__CPU_ALIGN 64

/* -- host buffers -- */

static void *mms__cpu_buffer_get_base(mms_backend_buffer_t b) { return b->context; }
static void  mms__cpu_buffer_free(mms_backend_buffer_t b)     { mms__aligned_free(b->context); }

static enum mms_status mms__cpu_buffer_memset_tensor(mms_backend_buffer_t b, struct mms_tensor *t, uint8_t value, size_t offset, size_t size) {
    MMS__UNUSED(b);
    memset((char *)t->data + offset, value, size);
    return MMS_OK;
}
static enum mms_status mms__cpu_buffer_set_tensor(mms_backend_buffer_t b, struct mms_tensor *t, const void *data, size_t offset, size_t size) {
    MMS__UNUSED(b);
    memcpy((char *)t->data + offset, data, size);
    return MMS_OK;
}
static enum mms_status mms__cpu_buffer_get_tensor(mms_backend_buffer_t b, const struct mms_tensor *t, void *data, size_t offset, size_t size) {
    MMS__UNUSED(b);
    memcpy(data, (const char *)t->data + offset, size);
    return MMS_OK;
}
static bool mms__cpu_buffer_cpy_tensor(mms_backend_buffer_t b, const struct mms_tensor *src, struct mms_tensor *dst) {
    MMS__UNUSED(b);
    if (src->buffer && !mms_backend_buffer_is_host(src->buffer)) return false;
    memcpy(dst->data, src->data, mms_nbytes(src));
    return true;
}
static enum mms_status mms__cpu_buffer_clear(mms_backend_buffer_t b, uint8_t value) {
    memset(b->context, value, b->size);
    return MMS_OK;
}

static const struct mms_backend_buffer_i mms__cpu_buffer_iface = {
    mms__cpu_buffer_free, mms__cpu_buffer_get_base, NULL, mms__cpu_buffer_memset_tensor,
    mms__cpu_buffer_set_tensor, mms__cpu_buffer_get_tensor, mms__cpu_buffer_cpy_tensor, mms__cpu_buffer_clear
};

/* the same, for memory the caller owns: freeing the buffer leaves it alone */
static const struct mms_backend_buffer_i mms__cpu_ptr_buffer_iface = {
    NULL, mms__cpu_buffer_get_base, NULL, mms__cpu_buffer_memset_tensor,
    mms__cpu_buffer_set_tensor, mms__cpu_buffer_get_tensor, mms__cpu_buffer_cpy_tensor, mms__cpu_buffer_clear
};

static const char *mms__cpu_buft_get_name(mms_backend_buffer_type_t buft) { MMS__UNUSED(buft); return "CPU"; }
static size_t mms__cpu_buft_get_alignment(mms_backend_buffer_type_t buft) { MMS__UNUSED(buft); return MMS__CPU_ALIGN; }
static bool   mms__cpu_buft_is_host(mms_backend_buffer_type_t buft) { MMS__UNUSED(buft); return true; }

static mms_backend_buffer_t mms__cpu_buft_alloc_buffer(mms_backend_buffer_type_t buft, size_t size) {
    const size_t align = size >= ((size_t)8 << 20) ? (size_t)2 << 20 : MMS__CPU_ALIGN;   /* big ones: huge-page aligned */
    void *mem = mms__aligned_alloc(align, MMS__ALIGN_UP(size ? size : 1, MMS__CPU_ALIGN));
    mms_backend_buffer_t b;
    if (!mem) { mms_set_error(MMS_ERR_OOM, "CPU buffer: cannot allocate %zu bytes of host memory", size); return NULL; }
    if (align != MMS__CPU_ALIGN) mms__advise_huge_pages(mem, size);
    b = mms_backend_buffer_init(buft, mms__cpu_buffer_iface, mem, size);
    if (!b) mms__aligned_free(mem);
    return b;
}

static struct mms_backend_buffer_type mms__cpu_buft = {
    { mms__cpu_buft_get_name, mms__cpu_buft_alloc_buffer, mms__cpu_buft_get_alignment, NULL, NULL, mms__cpu_buft_is_host },
    NULL
};

MMS_API mms_backend_buffer_type_t mms_backend_cpu_buffer_type(void) { return &mms__cpu_buft; }

MMS_API mms_backend_buffer_t mms_backend_cpu_buffer_from_ptr(void *ptr, size_t size) {
    if (!ptr && size) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_cpu_buffer_from_ptr: ptr is NULL"); return NULL; }
    return mms_backend_buffer_init(&mms__cpu_buft, mms__cpu_ptr_buffer_iface, ptr, size);
}

/* -- CPU_REPACK buffers: weights in the kernels' layout (repack.c) -- */

static enum mms_status mms__repack_whole(const struct mms_tensor *t, size_t offset, size_t size, const char *what) {
    if (t->view_src)
        return mms_set_error(MMS_ERR_UNSUPPORTED, "CPU_REPACK buffer: %s is a view of %s, which is kept repacked; %s the whole tensor instead",
                             mms__tensor_desc(t).s, mms__tensor_desc(t->view_src).s, what);
    if (offset == 0 && size == mms_nbytes(t)) return MMS_OK;
    return mms_set_error(MMS_ERR_UNSUPPORTED, "CPU_REPACK buffer: %s keeps %s repacked; %s it whole (offset 0, %zu bytes), not %zu bytes at %zu",
                         mms__tensor_desc(t).s, mms_type_name(t->type), what, mms_nbytes(t), size, offset);
}
static enum mms_status mms__repack_buffer_memset_tensor(mms_backend_buffer_t b, struct mms_tensor *t, uint8_t value, size_t offset, size_t size) {
    enum mms_status st;
    void *bytes;
    if (!mms__repack_layout(t->view_src ? t->view_src : t)) return mms__cpu_buffer_memset_tensor(b, t, value, offset, size);
    if ((st = mms__repack_whole(t, offset, size, "set")) != MMS_OK) return st;
    if (!(bytes = MMS_MALLOC(size))) return mms_set_error(MMS_ERR_OOM, "CPU_REPACK buffer: no host memory to stage %zu bytes", size);
    memset(bytes, value, size);   /* the tensor those bytes make, repacked */
    mms__repack_set(t, bytes);
    MMS_FREE(bytes);
    return MMS_OK;
}
static enum mms_status mms__repack_buffer_set_tensor(mms_backend_buffer_t b, struct mms_tensor *t, const void *data, size_t offset, size_t size) {
    enum mms_status st;
    if (!mms__repack_layout(t->view_src ? t->view_src : t)) return mms__cpu_buffer_set_tensor(b, t, data, offset, size);
    if ((st = mms__repack_whole(t, offset, size, "set")) != MMS_OK) return st;
    mms__repack_set(t, data);
    return MMS_OK;
}
static enum mms_status mms__repack_buffer_get_tensor(mms_backend_buffer_t b, const struct mms_tensor *t, void *data, size_t offset, size_t size) {
    enum mms_status st;
    if (!mms__repack_layout(t->view_src ? t->view_src : t)) return mms__cpu_buffer_get_tensor(b, t, data, offset, size);
    if ((st = mms__repack_whole(t, offset, size, "read")) != MMS_OK) return st;
    mms__repack_rows(t, 0, t->ne[1], data);
    return MMS_OK;
}
static bool mms__repack_buffer_cpy_tensor(mms_backend_buffer_t b, const struct mms_tensor *src, struct mms_tensor *dst) {
    MMS__UNUSED(b);
    if (src->buffer && !mms_backend_buffer_is_host(src->buffer)) return false;   /* a repacked source converts back first */
    if (mms__repack_layout(dst)) mms__repack_set(dst, src->data);
    else memcpy(dst->data, src->data, mms_nbytes(src));
    return true;
}

static const struct mms_backend_buffer_i mms__repack_buffer_iface = {
    mms__cpu_buffer_free, mms__cpu_buffer_get_base, NULL, mms__repack_buffer_memset_tensor,
    mms__repack_buffer_set_tensor, mms__repack_buffer_get_tensor, mms__repack_buffer_cpy_tensor, mms__cpu_buffer_clear
};

static const char *mms__cpu_repack_buft_get_name(mms_backend_buffer_type_t buft) { MMS__UNUSED(buft); return "CPU_REPACK"; }

/* Not host memory to others: only the CPU backend reads its tensors in place; copies convert. */
static mms_backend_buffer_t mms__cpu_repack_buft_alloc_buffer(mms_backend_buffer_type_t buft, size_t size) {
    mms_backend_buffer_t b = mms__cpu_buft_alloc_buffer(buft, size);
    if (b) b->iface = mms__repack_buffer_iface;
    return b;
}

static size_t mms__cpu_repack_buft_get_alloc_size(mms_backend_buffer_type_t buft, const struct mms_tensor *t) {
    MMS__UNUSED(buft);
    return mms__repack_layout(t) ? mms__repack_size(t) : mms_nbytes(t);
}

static struct mms_backend_buffer_type mms__cpu_repack_buft = {
    { mms__cpu_repack_buft_get_name, mms__cpu_repack_buft_alloc_buffer, mms__cpu_buft_get_alignment, NULL,
      mms__cpu_repack_buft_get_alloc_size, NULL },
    NULL
};

MMS_API mms_backend_buffer_type_t mms_backend_cpu_repack_buffer_type(void) { return &mms__cpu_repack_buft; }

MMS_API bool mms_backend_cpu_repacks(const struct mms_tensor *tensor) { return tensor && mms__repack_layout(tensor); }

/* -- the op table -- */

typedef void (*mms__cpu_kernel)(const struct mms__compute_params *p, struct mms_tensor *dst);

static mms__cpu_kernel mms__cpu_kernel_for(enum mms_op op) {
    switch (op) {
        case MMS_OP_ADD: case MMS_OP_SUB: case MMS_OP_MUL: case MMS_OP_DIV:
            return mms__cpu_binary;
        case MMS_OP_SCALE: case MMS_OP_SQR: case MMS_OP_SQRT: case MMS_OP_EXP: case MMS_OP_TANH:
        case MMS_OP_SILU: case MMS_OP_GELU: case MMS_OP_GELU_TANH:
            return mms__cpu_unary;
        case MMS_OP_DUP: case MMS_OP_CONT: case MMS_OP_CPY:
            return mms__cpu_copy;
        case MMS_OP_NORM: case MMS_OP_RMS_NORM: return mms__cpu_norm;
        case MMS_OP_SUM_ROWS:       return mms__cpu_sum_rows;
        case MMS_OP_ARGMAX:         return mms__cpu_argmax;
        case MMS_OP_MUL_MAT:        return mms__cpu_mul_mat;
        case MMS_OP_SOFT_MAX:       return mms__cpu_soft_max;
        case MMS_OP_ROPE:           return mms__cpu_rope;
        case MMS_OP_FLASH_ATTN_EXT: return mms__cpu_flash_attn_ext;
        case MMS_OP_CONCAT:         return mms__cpu_concat;
        case MMS_OP_PAD:            return mms__cpu_pad;
        case MMS_OP_GET_ROWS:       return mms__cpu_get_rows;
        case MMS_OP_IM2COL:         return mms__cpu_im2col;
        case MMS_OP_REPEAT:         return mms__cpu_repeat;
        case MMS_OP_SET_ROWS:       return mms__cpu_set_rows;
        default:                    return NULL;   /* NONE and views compute nothing */
    }
}

/* Scratch bytes one thread needs for a node. */
static size_t mms__cpu_work_size(const struct mms_tensor *t) {
    size_t row = (size_t)MMS__MAX(t->ne[0], t->src[0] ? t->src[0]->ne[0] : 0) * sizeof(float);
    switch (t->op) {
        case MMS_OP_MUL_MAT:        return mms__mul_mat_work_size(t);
        case MMS_OP_FLASH_ATTN_EXT: return mms__flash_attn_work_size(t);
        case MMS_OP_ROPE:           return 2 * row + 2 * (size_t)mms_get_op_params_i32(t, 0) * sizeof(float);
        default:                    return 3 * row;
    }
}

static bool mms__cpu_supports_types(const struct mms_tensor *t) {
    int i;
    for (i = 0; i < MMS_MAX_SRC; i++) if (t->src[i] && !mms__type_valid(t->src[i]->type)) return false;
    return mms__type_valid(t->type);
}

/* -- the backend -- */

struct mms__cpu_profile {
    bool    on, print_at_free;            /* print_at_free: turned on by MMS_CPU_PROFILE */
    int64_t us[MMS_OP_COUNT], nodes[MMS_OP_COUNT], graphs, t0;
};

struct mms__cpu_backend {
    mms__mutex              lock;         /* one graph at a time: the pool, the scratch and the profile are shared */
    int                     n_threads;
    struct mms__threadpool *pool;
    void                   *work;         /* per-thread scratch, grown as needed */
    size_t                  work_size;
    struct mms__cpu_profile prof;
};

struct mms__cpu_job {
    struct mms_cgraph         *graph;
    struct mms__threadpool    *pool;
    char                      *work;
    size_t                     wsize;     /* per thread, a multiple of the alignment */
    struct mms__compute_state  state;
    struct mms__cpu_profile   *prof;      /* NULL unless profiling */
};

/* Every worker walks the whole graph; a barrier separates nodes. Node c (counting computed nodes
   only) uses counters[c & 1]; worker 0 zeroes the other one for node c + 1, which nobody can
   touch before the barrier that ends node c. */
static void mms__cpu_graph_worker(void *arg, int ith, int nth) {
    struct mms__cpu_job *job = (struct mms__cpu_job *)arg;
    int i, n = mms_graph_n_nodes(job->graph), c = 0;
    for (i = 0; i < n; i++) {
        struct mms_tensor *node = mms_graph_node(job->graph, i);
        mms__cpu_kernel kernel = mms__cpu_kernel_for(node->op);
        struct mms__compute_params p;
        if (!kernel || mms_nelements(node) == 0) continue;
        p.ith = ith;
        p.nth = nth;
        p.wdata = (float *)(job->work + (size_t)ith * job->wsize);
        p.wsize = job->wsize;
        p.counter = &job->state.counters[c & 1];
        p.state = &job->state;
        if (ith == 0) mms__atomic_store(&job->state.counters[(c + 1) & 1], 0);
        kernel(&p, node);
        c++;
        mms__threadpool_barrier(job->pool);
        if (job->prof && ith == 0) {    /* after the barrier: the slowest thread's time */
            int64_t t = mms_time_us();
            job->prof->us[node->op] += t - job->prof->t0;
            job->prof->nodes[node->op]++;
            job->prof->t0 = t;
        }
        if (mms__atomic_load(&job->state.failed)) break;
    }
}

static const char *mms__cpu_get_name(mms_backend_t b) { MMS__UNUSED(b); return "CPU"; }

MMS_API void mms_backend_cpu_set_profile(mms_backend_t b, bool on) {
    if (mms_backend_is_cpu(b)) ((struct mms__cpu_backend *)b->context)->prof.on = on;
}

MMS_API void mms_backend_cpu_print_profile(mms_backend_t b, FILE *out) {
    struct mms__cpu_profile *pr;
    int64_t total = 0;
    int i, best;
    bool done[MMS_OP_COUNT];
    if (!mms_backend_is_cpu(b) || !out) return;
    pr = &((struct mms__cpu_backend *)b->context)->prof;
    for (i = 0; i < MMS_OP_COUNT; i++) { total += pr->us[i]; done[i] = pr->nodes[i] == 0; }
    fprintf(out, "CPU profile: %lld graphs, %.3f ms in nodes\n", (long long)pr->graphs, (double)total / 1000.0);
    for (;;) {                           /* slowest op type first */
        for (best = -1, i = 0; i < MMS_OP_COUNT; i++) if (!done[i] && (best < 0 || pr->us[i] > pr->us[best])) best = i;
        if (best < 0) break;
        done[best] = true;
        fprintf(out, "  %-16s %6lld nodes %12.3f ms %5.1f%%\n", mms_op_name((enum mms_op)best), (long long)pr->nodes[best],
                (double)pr->us[best] / 1000.0, total ? 100.0 * (double)pr->us[best] / (double)total : 0.0);
    }
    memset(pr->us, 0, sizeof pr->us);
    memset(pr->nodes, 0, sizeof pr->nodes);
    pr->graphs = 0;
}

static void mms__cpu_free(mms_backend_t b) {
    struct mms__cpu_backend *cpu = (struct mms__cpu_backend *)b->context;
    if (cpu->prof.print_at_free && cpu->prof.graphs) mms_backend_cpu_print_profile(b, stderr);
    mms__threadpool_free(cpu->pool);
    mms__aligned_free(cpu->work);
    mms__mutex_destroy(&cpu->lock);
    MMS_FREE(cpu);
    MMS_FREE(b);
}

static mms_backend_buffer_type_t mms__cpu_get_default_buffer_type(mms_backend_t b) { MMS__UNUSED(b); return &mms__cpu_buft; }

static bool mms__cpu_supports_op(mms_backend_t b, const struct mms_tensor *op) {
    MMS__UNUSED(b);
    return (op->op == MMS_OP_NONE || mms_op_is_view(op->op) || mms__cpu_kernel_for(op->op) != NULL) && mms__cpu_supports_types(op);
}

static bool mms__cpu_supports_buft(mms_backend_t b, mms_backend_buffer_type_t buft) {
    MMS__UNUSED(b);
    return mms_backend_buft_is_host(buft) || buft == &mms__cpu_repack_buft;
}

static enum mms_status mms__cpu_graph_compute_locked(struct mms__cpu_backend *cpu, struct mms_cgraph *g) {
    struct mms__cpu_job job;
    size_t wsize = 0;
    int i;
    for (i = 0; i < mms_graph_n_nodes(g); i++) {
        const struct mms_tensor *t = mms_graph_node(g, i);
        const struct mms_tensor *repacked = mms__repack_misuse(t);
        if (repacked)
            return mms_set_error(MMS_ERR_UNSUPPORTED, "CPU backend: %s %s uses %s, which a CPU_REPACK buffer keeps repacked: only MUL_MAT "
                                 "may read it, as its first operand (keep weights used otherwise in a CPU buffer)",
                                 mms_op_name(t->op), mms__tensor_desc(t).s, mms__tensor_desc(repacked).s);
        if (mms__cpu_kernel_for(t->op)) wsize = MMS__MAX(wsize, mms__cpu_work_size(t));
    }
    wsize = MMS__ALIGN_UP(wsize + 64, MMS__CPU_ALIGN);
    if (wsize * (size_t)cpu->n_threads > cpu->work_size) {
        void *w = mms__aligned_alloc(MMS__CPU_ALIGN, wsize * (size_t)cpu->n_threads);
        if (!w) return mms_set_error(MMS_ERR_OOM, "CPU backend: cannot allocate %zu bytes of scratch memory", wsize * (size_t)cpu->n_threads);
        mms__aligned_free(cpu->work);
        cpu->work = w;
        cpu->work_size = wsize * (size_t)cpu->n_threads;
    }
    memset(&job, 0, sizeof job);
    job.graph = g;
    job.pool = cpu->pool;
    job.work = (char *)cpu->work;
    job.wsize = wsize;
    if (cpu->prof.on) {
        job.prof = &cpu->prof;
        cpu->prof.graphs++;
        cpu->prof.t0 = mms_time_us();
    }
    mms__threadpool_run(cpu->pool, mms__cpu_graph_worker, &job);
    if (job.state.failed.v) return mms_set_error(job.state.status, "%s", job.state.error);
    return MMS_OK;
}

/* Graphs of several schedulers (contexts on other threads) that share this backend take turns. */
static enum mms_status mms__cpu_graph_compute(mms_backend_t b, struct mms_cgraph *g) {
    struct mms__cpu_backend *cpu = (struct mms__cpu_backend *)b->context;
    enum mms_status st;
    mms__mutex_lock(&cpu->lock);
    st = mms__cpu_graph_compute_locked(cpu, g);
    mms__mutex_unlock(&cpu->lock);
    return st;
}

static const struct mms_backend_i mms__cpu_backend_iface = {
    mms__cpu_get_name, mms__cpu_free, mms__cpu_get_default_buffer_type, mms__cpu_supports_op, mms__cpu_supports_buft,
    NULL,                    /* offload_op */
    mms__cpu_graph_compute,
    NULL, NULL, NULL, NULL,  /* synchronous: no synchronize, async set/get or copies */
    NULL, NULL, NULL, NULL, NULL
};

MMS_API mms_backend_t mms_backend_cpu_init(void) {
    mms_backend_t b = (mms_backend_t)MMS_MALLOC(sizeof *b);
    struct mms__cpu_backend *cpu = (struct mms__cpu_backend *)MMS_MALLOC(sizeof *cpu);
    if (!b || !cpu) {
        MMS_FREE(b);
        MMS_FREE(cpu);
        mms_set_error(MMS_ERR_OOM, "mms_backend_cpu_init: out of host memory");
        return NULL;
    }
    memset(cpu, 0, sizeof *cpu);
    cpu->n_threads = mms_cpu_count();
    cpu->pool = mms__threadpool_new(cpu->n_threads);
    if (!cpu->pool) {
        MMS_FREE(b);
        MMS_FREE(cpu);
        mms_set_error(MMS_ERR_BACKEND, "mms_backend_cpu_init: cannot start %d threads", mms_cpu_count());
        return NULL;
    }
    mms__mutex_init(&cpu->lock);
    mms_cpu_get_kernels();   /* resolve MMS_CPU_KERNELS now, not in the middle of a graph */
    if (getenv("MMS_CPU_PROFILE") && atoi(getenv("MMS_CPU_PROFILE")) > 0) cpu->prof.on = cpu->prof.print_at_free = true;
    b->iface = mms__cpu_backend_iface;
    b->context = cpu;
    return b;
}

MMS_API bool mms_backend_is_cpu(mms_backend_t b) { return b && b->iface.get_name == mms__cpu_get_name; }

MMS_API enum mms_status mms_backend_cpu_set_n_threads(mms_backend_t b, int n_threads) {
    struct mms__cpu_backend *cpu;
    struct mms__threadpool *pool;
    if (!mms_backend_is_cpu(b)) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_cpu_set_n_threads: not a CPU backend");
    if (n_threads < 1 || n_threads > 4096)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_cpu_set_n_threads: n_threads must be 1..4096, got %d", n_threads);
    cpu = (struct mms__cpu_backend *)b->context;
    mms__mutex_lock(&cpu->lock);      /* contexts on other threads share the backend: not while a graph runs on the old pool */
    if (n_threads != cpu->n_threads) {
        pool = mms__threadpool_new(n_threads);
        if (!pool) {
            mms__mutex_unlock(&cpu->lock);
            return mms_set_error(MMS_ERR_BACKEND, "mms_backend_cpu_set_n_threads: cannot start %d threads", n_threads);
        }
        mms__threadpool_free(cpu->pool);
        cpu->pool = pool;
        cpu->n_threads = n_threads;
    }
    mms__mutex_unlock(&cpu->lock);
    return MMS_OK;
}

MMS_API int mms_backend_cpu_get_n_threads(mms_backend_t b) {
    struct mms__cpu_backend *cpu;
    int n;
    if (!mms_backend_is_cpu(b)) return 0;
    cpu = (struct mms__cpu_backend *)b->context;
    mms__mutex_lock(&cpu->lock);
    n = cpu->n_threads;
    mms__mutex_unlock(&cpu->lock);
    return n;
}
/* ==== end src/backend/cpu/cpu_backend.c ==== */

/* ==== begin src/backend/cuda_shim.c ==== */
/* >>cuda-shim =====================================================================================
   Without MMS_CUDA the CUDA entry points exist and say so; with it they come from mmsched_cuda.cu. */

#ifndef MMS_CUDA
static void mms__cuda_unsupported(const char *who) {
    mms_set_error(MMS_ERR_UNSUPPORTED, "%s: mmsched was built without CUDA (define MMS_CUDA in the implementation file "
                  "and compile and link mmsched_cuda.cu with nvcc; see 'make cuda')", who);
}
MMS_API int mms_backend_cuda_get_device_count(void) { mms__cuda_unsupported("mms_backend_cuda_get_device_count"); return 0; }
MMS_API mms_backend_t mms_backend_cuda_init(int device) {
    MMS__UNUSED(device);
    mms__cuda_unsupported("mms_backend_cuda_init");
    return NULL;
}
MMS_API bool mms_backend_is_cuda(mms_backend_t backend) { MMS__UNUSED(backend); return false; }
MMS_API mms_backend_buffer_type_t mms_backend_cuda_buffer_type(int device) {
    MMS__UNUSED(device);
    mms__cuda_unsupported("mms_backend_cuda_buffer_type");
    return NULL;
}
MMS_API mms_backend_buffer_type_t mms_backend_cuda_host_buffer_type(void) {
    mms__cuda_unsupported("mms_backend_cuda_host_buffer_type");
    return NULL;
}
#endif
/* ==== end src/backend/cuda_shim.c ==== */

/* ==== begin src/alloc/planner.c ==== */
/* >>alloc =========================================================================================
   The graph allocator. A plan is computed from the graph alone:
     1. lifetimes: every graph tensor ("slot": leafs first, then nodes) gets the step of its
        producer and of its last consumer, through views; outputs, persistent tensors and (by
        default) inputs live to the end;
     2. blocks: each planned tensor gets a block of memory, except that an op of the in-place
        whitelist may continue the block of a dead source of the same layout;
     3. placement: per buffer, inputs go to the bottom, then several orderings of the remaining
        blocks are placed at the lowest (or best-fitting) offset free during their lifetime; the
        smallest result wins. A buffer type's maximum size splits a buffer into chunks.
   alloc_graph then allocates the buffers (growing, never shrinking), starts a new generation of
   each and places the tensors. */

struct mms__gsig {                 /* what a plan depends on, per slot; compared with memcmp */
    int32_t  op, type, flags, needs_alloc, buffer_id, pad;
    int64_t  ne[MMS_MAX_DIMS];
    uint64_t nb[MMS_MAX_DIMS], view_offs;
    int32_t  src[MMS_MAX_SRC];     /* slot + 1 of each source, 0 for none */
};

struct mms__gblock {
    size_t size;
    int    first, last;            /* steps, -1 .. n_nodes - 1 */
    int    buffer_id;
    int    owner;                  /* the slot whose memory it is now (the last in-place taker) */
    bool   input;                  /* placed at the bottom, before the rest */
    int    chunk;
    size_t offset;
};

struct mms__gbuf {
    mms_backend_buffer_type_t       buft;
    mms_backend_buffer_t           *chunks;        /* allocated buffers, one per chunk */
    int                             n_chunks;      /* allocated */
    size_t                         *planned;       /* planned bytes per chunk */
    int                             n_planned;
    struct mms_gallocr_buffer_info  info;
};

struct mms_gallocr {
    int               n_bufs;
    struct mms__gbuf *bufs;
    bool              inputs_reusable;
    bool              inplace;

    /* the plan */
    bool                 have_plan;
    int                  n_leafs, n_nodes;
    struct mms__gsig    *sig;          /* per slot */
    int                 *slot_block;   /* per slot: block index or -1 */
    int                 *slot_first, *slot_last, *slot_inplace_of;
    struct mms__gblock  *blocks;
    int                  n_blocks;
    struct mms_gallocr_tensor_info *infos;
    int                 *info_slot;
    int                  n_infos;
    int                 *view_step, *view_slot;   /* views of planned tensors: where, and of what */
    int                  n_views;

    int     n_reallocs, n_plans;
    int64_t plan_time_us;
};

static const char *const mms__strategy_names[] = { "largest first", "longest first", "in order, best fit" };

MMS_API mms_gallocr_t mms_gallocr_new_n(mms_backend_buffer_type_t *bufts, int n_bufs) {
    mms_gallocr_t ga;
    int i;
    if (!bufts || n_bufs < 1) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_gallocr_new_n: needs at least one buffer type"); return NULL; }
    for (i = 0; i < n_bufs; i++)
        if (!bufts[i]) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_gallocr_new_n: buffer type %d is NULL", i); return NULL; }
    ga = (mms_gallocr_t)MMS_MALLOC(sizeof *ga);
    if (!ga) { mms_set_error(MMS_ERR_OOM, "mms_gallocr_new: out of host memory"); return NULL; }
    memset(ga, 0, sizeof *ga);
    ga->bufs = (struct mms__gbuf *)MMS_MALLOC(sizeof *ga->bufs * (size_t)n_bufs);
    if (!ga->bufs) { MMS_FREE(ga); mms_set_error(MMS_ERR_OOM, "mms_gallocr_new: out of host memory"); return NULL; }
    memset(ga->bufs, 0, sizeof *ga->bufs * (size_t)n_bufs);
    for (i = 0; i < n_bufs; i++) ga->bufs[i].buft = bufts[i];
    ga->n_bufs = n_bufs;
    ga->inplace = true;
    return ga;
}

MMS_API mms_gallocr_t mms_gallocr_new(mms_backend_buffer_type_t buft) { return mms_gallocr_new_n(&buft, 1); }

static void mms__galloc_free_plan(mms_gallocr_t ga) {
    MMS_FREE(ga->sig); MMS_FREE(ga->slot_block); MMS_FREE(ga->slot_first); MMS_FREE(ga->slot_last);
    MMS_FREE(ga->slot_inplace_of); MMS_FREE(ga->blocks); MMS_FREE(ga->infos); MMS_FREE(ga->info_slot);
    MMS_FREE(ga->view_step); MMS_FREE(ga->view_slot);
    ga->sig = NULL; ga->slot_block = ga->slot_first = ga->slot_last = ga->slot_inplace_of = ga->info_slot = NULL;
    ga->view_step = ga->view_slot = NULL;
    ga->blocks = NULL; ga->infos = NULL;
    ga->n_blocks = ga->n_infos = ga->n_views = 0;
    ga->have_plan = false;
}

MMS_API void mms_gallocr_free(mms_gallocr_t ga) {
    int i, c;
    if (!ga) return;
    for (i = 0; i < ga->n_bufs; i++) {
        for (c = 0; c < ga->bufs[i].n_chunks; c++) mms_backend_buffer_free(ga->bufs[i].chunks[c]);
        MMS_FREE(ga->bufs[i].chunks);
        MMS_FREE(ga->bufs[i].planned);
    }
    mms__galloc_free_plan(ga);
    MMS_FREE(ga->bufs);
    MMS_FREE(ga);
}

MMS_API void mms_gallocr_set_inputs_reusable(mms_gallocr_t ga, bool reusable) { if (ga) { ga->inputs_reusable = reusable; ga->have_plan = false; } }
MMS_API void mms_gallocr_set_inplace(mms_gallocr_t ga, bool enabled)          { if (ga) { ga->inplace = enabled; ga->have_plan = false; } }

/* -- graph walking -- */

static int mms__slot_count(const struct mms_cgraph *g) { return mms_graph_n_leafs(g) + mms_graph_n_nodes(g); }
static struct mms_tensor *mms__slot_tensor(const struct mms_cgraph *g, int s) {
    int nl = mms_graph_n_leafs(g);
    return s < nl ? mms_graph_leaf(g, s) : mms_graph_node(g, s - nl);
}
static int mms__slot_step(const struct mms_cgraph *g, int s) { return s < mms_graph_n_leafs(g) ? -1 : s - mms_graph_n_leafs(g); }

/* Planned here: not a view, and without memory, or in compute memory (of an earlier allocation,
   ours or another allocator's, maybe freed by now): never relied on by a new allocation. */
static bool mms__galloc_needs(const struct mms_tensor *t) {
    return !t->view_src && (t->placement.kind == MMS_MEMORY_NONE || t->placement.kind == MMS_MEMORY_COMPUTE);
}

static bool mms__op_can_inplace(enum mms_op op) {
    switch (op) {
        case MMS_OP_ADD: case MMS_OP_SUB: case MMS_OP_MUL: case MMS_OP_DIV: case MMS_OP_SCALE:
        case MMS_OP_SQR: case MMS_OP_SQRT: case MMS_OP_EXP: case MMS_OP_TANH: case MMS_OP_SILU:
        case MMS_OP_GELU: case MMS_OP_GELU_TANH: case MMS_OP_NORM: case MMS_OP_RMS_NORM:
        case MMS_OP_SOFT_MAX: case MMS_OP_ROPE:
            return true;
        default:
            return false;
    }
}

/* Fills sig[] for graph; buffer ids from the arrays, or from old when they are NULL and it fits. */
static enum mms_status mms__galloc_signature(mms_gallocr_t ga, struct mms_cgraph *g, const int *node_ids, const int *leaf_ids,
                                             struct mms__gsig *sig, struct mms__ptrmap *slots) {
    int s, j, n = mms__slot_count(g), nl = mms_graph_n_leafs(g);
    for (s = 0; s < n; s++)
        if (!mms__ptrmap_put(slots, (uint64_t)(uintptr_t)mms__slot_tensor(g, s), (void *)(intptr_t)(s + 1)))
            return mms_set_error(MMS_ERR_OOM, "mms_gallocr: out of host memory");
    for (s = 0; s < n; s++) {
        const struct mms_tensor *t = mms__slot_tensor(g, s);
        struct mms__gsig *q = &sig[s];
        int id = s < nl ? (leaf_ids ? leaf_ids[s] : 0) : (node_ids ? node_ids[s - nl] : 0);
        memset(q, 0, sizeof *q);
        if (id < 0 || id >= ga->n_bufs)
            return mms_set_error(MMS_ERR_INVALID_ARG, "mms_gallocr_reserve_n: buffer id %d of %s is not in 0..%d",
                                 id, mms__tensor_desc(t).s, ga->n_bufs - 1);
        q->op = t->op;
        q->type = t->type;
        q->flags = t->flags;
        q->needs_alloc = mms__galloc_needs(t);
        q->buffer_id = id;
        for (j = 0; j < MMS_MAX_DIMS; j++) { q->ne[j] = t->ne[j]; q->nb[j] = t->nb[j]; }
        q->view_offs = t->view_offs;
        for (j = 0; j < MMS_MAX_SRC; j++)
            q->src[j] = t->src[j] ? (int32_t)(intptr_t)mms__ptrmap_get(slots, (uint64_t)(uintptr_t)t->src[j], NULL) : 0;
    }
    return MMS_OK;
}

/* -- placement -- */

struct mms__gap_item { size_t off, end; };

static int mms__cmp_gap_item(const void *a, const void *b) {
    const struct mms__gap_item *x = (const struct mms__gap_item *)a, *y = (const struct mms__gap_item *)b;
    return (x->off > y->off) - (x->off < y->off);
}

static bool mms__blocks_overlap_in_time(const struct mms__gblock *a, const struct mms__gblock *b) {
    return a->first <= b->last && b->first <= a->last;
}

/* Lowest (first fit) or tightest (best fit) offset in chunk c where b fits among the placed
   blocks that are alive at the same time; SIZE_MAX when it does not fit under capacity. */
static size_t mms__find_offset(const struct mms__gblock *blocks, const int *placed, int n_placed, const struct mms__gblock *b,
                               int c, size_t capacity, bool best_fit, struct mms__gap_item *scratch) {
    int i, k = 0;
    size_t cur = 0, best = SIZE_MAX, best_gap = SIZE_MAX;
    for (i = 0; i < n_placed; i++) {
        const struct mms__gblock *p = &blocks[placed[i]];
        if (p->chunk == c && p->size > 0 && mms__blocks_overlap_in_time(p, b)) {
            scratch[k].off = p->offset;
            scratch[k].end = p->offset + p->size;
            k++;
        }
    }
    qsort(scratch, (size_t)k, sizeof *scratch, mms__cmp_gap_item);
    for (i = 0; i < k; i++) {
        if (scratch[i].off > cur && scratch[i].off - cur >= b->size) {
            size_t gap = scratch[i].off - cur;
            if (!best_fit) return cur;
            if (gap < best_gap) { best_gap = gap; best = cur; }
        }
        if (scratch[i].end > cur) cur = scratch[i].end;
    }
    if (best != SIZE_MAX) return best;
    return (b->size <= capacity && cur <= capacity - b->size) ? cur : SIZE_MAX;
}

static int mms__cmp_largest_first(const void *a, const void *b, const struct mms__gblock *blocks) {
    const struct mms__gblock *x = &blocks[*(const int *)a], *y = &blocks[*(const int *)b];
    if (x->size != y->size) return x->size > y->size ? -1 : 1;
    if (x->last - x->first != y->last - y->first) return (y->last - y->first) - (x->last - x->first);
    return x->first - y->first;
}
static int mms__cmp_longest_first(const void *a, const void *b, const struct mms__gblock *blocks) {
    const struct mms__gblock *x = &blocks[*(const int *)a], *y = &blocks[*(const int *)b];
    if (x->last - x->first != y->last - y->first) return (y->last - y->first) - (x->last - x->first);
    if (x->size != y->size) return x->size > y->size ? -1 : 1;
    return x->first - y->first;
}
static int mms__cmp_in_order(const void *a, const void *b, const struct mms__gblock *blocks) {
    const struct mms__gblock *x = &blocks[*(const int *)a], *y = &blocks[*(const int *)b];
    if (x->first != y->first) return x->first - y->first;
    return *(const int *)a - *(const int *)b;
}

/* qsort has no context argument: a small insertion sort with one is enough for plan sizes. */
static void mms__sort_blocks(int *idx, int n, const struct mms__gblock *blocks,
                             int (*cmp)(const void *, const void *, const struct mms__gblock *)) {
    int i, j;
    for (i = 1; i < n; i++) {
        int v = idx[i];
        for (j = i - 1; j >= 0 && cmp(&idx[j], &v, blocks) > 0; j--) idx[j + 1] = idx[j];
        idx[j + 1] = v;
    }
}

/* Places the blocks of buffer `id` with one strategy; returns the bytes over all chunks (and the
   chunk count), or SIZE_MAX with an error when a block can never fit. Results go into blocks. */
static size_t mms__place_strategy(mms_gallocr_t ga, int id, int strategy, int *order, int n, int *placed,
                                  struct mms__gap_item *scratch, int *n_chunks_out) {
    struct mms__gblock *blocks = ga->blocks;
    size_t capacity = mms_backend_buft_get_max_size(ga->bufs[id].buft), total = 0;
    int i, c, n_placed = 0, n_chunks = n > 0 ? 1 : 0, n_inputs = 0;   /* nothing to place: no buffer */
    /* inputs first, in graph order; then the rest in the strategy's order */
    for (i = 0; i < n; i++) if (blocks[order[i]].input) { int t = order[n_inputs]; order[n_inputs++] = order[i]; order[i] = t; }
    mms__sort_blocks(order, n_inputs, blocks, mms__cmp_in_order);
    mms__sort_blocks(order + n_inputs, n - n_inputs, blocks,
                     strategy == 0 ? mms__cmp_largest_first : strategy == 1 ? mms__cmp_longest_first : mms__cmp_in_order);
    for (i = 0; i < n; i++) {
        struct mms__gblock *b = &blocks[order[i]];
        size_t off = SIZE_MAX;
        if (b->size > capacity) {
            mms_set_error(MMS_ERR_UNSUPPORTED, "mms_gallocr: a tensor needs %zu bytes, more than the %zu bytes a '%s' buffer can hold",
                          b->size, capacity, mms_backend_buft_name(ga->bufs[id].buft));
            return SIZE_MAX;
        }
        for (c = 0; off == SIZE_MAX; c++) {
            off = mms__find_offset(blocks, placed, n_placed, b, c, capacity, strategy == 2, scratch);
            if (off != SIZE_MAX) { b->chunk = c; b->offset = off; if (c + 1 > n_chunks) n_chunks = c + 1; }
        }
        placed[n_placed++] = order[i];
    }
    for (c = 0; c < n_chunks; c++) {
        size_t peak = 0;
        for (i = 0; i < n; i++) if (blocks[order[i]].chunk == c) peak = MMS__MAX(peak, blocks[order[i]].offset + blocks[order[i]].size);
        total += peak;
    }
    *n_chunks_out = n_chunks;
    return total;
}

/* Runs every strategy for buffer id, keeps the smallest result (fewer chunks on a tie) and fills
   the buffer's planned chunk sizes. Strategies are deterministic, so the winner is simply rerun. */
static enum mms_status mms__place_buffer(mms_gallocr_t ga, int id) {
    struct mms__gbuf *buf = &ga->bufs[id];
    int *order, *placed, i, k, n = 0, s, best = 0, best_chunks = 0, chunks = 0, c;
    size_t best_total = SIZE_MAX, total;
    struct mms__gap_item *scratch;
    enum mms_status st = MMS_OK;

    for (i = 0; i < ga->n_blocks; i++) if (ga->blocks[i].buffer_id == id) n++;
    order = (int *)MMS_MALLOC(sizeof(int) * (size_t)(n + 1) * 2);
    scratch = (struct mms__gap_item *)MMS_MALLOC(sizeof *scratch * (size_t)(n + 1));
    if (!order || !scratch) { st = mms_set_error(MMS_ERR_OOM, "mms_gallocr: out of host memory"); goto done; }
    placed = order + n + 1;
    for (s = 0; s <= 3; s++) {
        int strategy = s < 3 ? s : best;   /* the fourth round reruns the winner */
        for (i = 0, k = 0; i < ga->n_blocks; i++) if (ga->blocks[i].buffer_id == id) order[k++] = i;
        total = mms__place_strategy(ga, id, strategy, order, n, placed, scratch, &chunks);
        if (total == SIZE_MAX) { st = mms_last_status(); goto done; }
        if (s < 3 && (total < best_total || (total == best_total && chunks < best_chunks))) {
            best_total = total;
            best_chunks = chunks;
            best = s;
        }
    }
    MMS_FREE(buf->planned);
    buf->planned = (size_t *)MMS_MALLOC(sizeof(size_t) * (size_t)(best_chunks + 1));
    if (!buf->planned) { st = mms_set_error(MMS_ERR_OOM, "mms_gallocr: out of host memory"); goto done; }
    buf->n_planned = best_chunks;
    for (c = 0; c < best_chunks; c++) buf->planned[c] = 0;
    for (i = 0; i < ga->n_blocks; i++)
        if (ga->blocks[i].buffer_id == id)
            buf->planned[ga->blocks[i].chunk] = MMS__MAX(buf->planned[ga->blocks[i].chunk], ga->blocks[i].offset + ga->blocks[i].size);
    buf->info.planned = best_total;
    buf->info.n_chunks = best_chunks;
    buf->info.strategy = mms__strategy_names[best];
done:
    MMS_FREE(order);
    MMS_FREE(scratch);
    return st;
}

/* -- planning -- */

static int mms__galloc_root_slot(struct mms__ptrmap *slots, const struct mms_tensor *t) {
    const struct mms_tensor *root = t->view_src ? t->view_src : t;
    return (int)(intptr_t)mms__ptrmap_get(slots, (uint64_t)(uintptr_t)root, NULL) - 1;
}

/* May node (slot s, step i) continue the block of its source src (slot ss)? See the header. */
static bool mms__galloc_can_take_over(mms_gallocr_t ga, const struct mms_tensor *node, int s, int i,
                                      const struct mms_tensor *src, int ss, const bool *has_views) {
    if (ss < 0 || src->view_src || ga->slot_block[ss] < 0 || has_views[ss]) return false;
    return ga->blocks[ga->slot_block[ss]].owner == ss && ga->sig[ss].buffer_id == ga->sig[s].buffer_id &&
           ga->slot_last[ss] == i && mms_are_same_layout(src, node) &&
           !(src->flags & (MMS_TENSOR_FLAG_OUTPUT | MMS_TENSOR_FLAG_PERSISTENT)) &&
           (!(src->flags & MMS_TENSOR_FLAG_INPUT) || ga->inputs_reusable);
}

/* Lower bound (blocks as planned, in-place counted once) and universal bound (every tensor on its
   own, a dying input assumed overwritable) for buffer id, from per-step sums. */
static void mms__galloc_bounds(mms_gallocr_t ga, int id, const size_t *size, const bool *kept, int64_t *live) {
    const int n = ga->n_leafs + ga->n_nodes, steps = ga->n_nodes + 1;   /* step -1 sits at index 0 */
    struct mms_gallocr_buffer_info *info = &ga->bufs[id].info;
    int s, i;
    size_t best = 0;
    memset(live, 0, sizeof *live * (size_t)(steps + 1));
    for (i = 0; i < ga->n_blocks; i++) {
        const struct mms__gblock *b = &ga->blocks[i];
        if (b->buffer_id != id) continue;
        live[b->first + 1] += (int64_t)b->size;
        live[b->last + 2] -= (int64_t)b->size;
    }
    for (i = 0, best = 0; i < steps; i++) { if (i) live[i] += live[i - 1]; best = MMS__MAX(best, (size_t)live[i]); }
    info->lower_bound = best;

    /* universal: at node i, what is needed after it (alive past i, or kept) plus its own output */
    memset(live, 0, sizeof *live * (size_t)(steps + 1));
    info->no_reuse = 0;
    info->n_tensors = 0;
    for (s = 0; s < n; s++) {
        int first = ga->slot_first[s], last = kept[s] ? ga->n_nodes : ga->slot_last[s];
        if (ga->slot_block[s] < 0 || ga->sig[s].buffer_id != id) continue;
        info->no_reuse += size[s];
        info->n_tensors++;
        if (last > first) { live[first + 1] += (int64_t)size[s]; live[last + 1] -= (int64_t)size[s]; }
        else if (first >= 0) { live[first + 1] += (int64_t)size[s]; live[first + 2] -= (int64_t)size[s]; }
    }
    for (i = 0, best = 0; i < steps; i++) { if (i) live[i] += live[i - 1]; if (i > 0 || ga->n_nodes == 0) best = MMS__MAX(best, (size_t)live[i]); }
    info->bound_universal = best;
}

static enum mms_status mms__galloc_plan(mms_gallocr_t ga, struct mms_cgraph *g, const int *node_ids, const int *leaf_ids) {
    const int64_t t0 = mms_time_us();
    const int n = mms__slot_count(g), nl = mms_graph_n_leafs(g), nn = mms_graph_n_nodes(g), end = nn - 1;
    struct mms__ptrmap slots;
    bool *has_views = NULL, *kept = NULL;
    size_t *size = NULL;
    int64_t *live = NULL;
    enum mms_status st = MMS_OK;
    int s, i, j, id;

    if (mms_graph_status(g) != MMS_OK)
        return mms_set_error(MMS_ERR_STATE, "mms_gallocr: the graph was not built correctly: %s", mms_graph_error(g));
    memset(&slots, 0, sizeof slots);
    mms__galloc_free_plan(ga);
    ga->n_leafs = nl;
    ga->n_nodes = nn;
    ga->sig = (struct mms__gsig *)MMS_MALLOC(sizeof *ga->sig * (size_t)(n + 1));
    ga->slot_block = (int *)MMS_MALLOC(sizeof(int) * (size_t)(n + 1));
    ga->slot_first = (int *)MMS_MALLOC(sizeof(int) * (size_t)(n + 1));
    ga->slot_last = (int *)MMS_MALLOC(sizeof(int) * (size_t)(n + 1));
    ga->slot_inplace_of = (int *)MMS_MALLOC(sizeof(int) * (size_t)(n + 1));
    ga->blocks = (struct mms__gblock *)MMS_MALLOC(sizeof *ga->blocks * (size_t)(n + 1));
    ga->infos = (struct mms_gallocr_tensor_info *)MMS_MALLOC(sizeof *ga->infos * (size_t)(n + 1));
    ga->info_slot = (int *)MMS_MALLOC(sizeof(int) * (size_t)(n + 1));
    ga->view_step = (int *)MMS_MALLOC(sizeof(int) * (size_t)(n + 1));
    ga->view_slot = (int *)MMS_MALLOC(sizeof(int) * (size_t)(n + 1));
    has_views = (bool *)MMS_MALLOC(sizeof(bool) * (size_t)(n + 1));
    kept = (bool *)MMS_MALLOC(sizeof(bool) * (size_t)(n + 1));
    size = (size_t *)MMS_MALLOC(sizeof(size_t) * (size_t)(n + 1));
    live = (int64_t *)MMS_MALLOC(sizeof(int64_t) * (size_t)(nn + 3));
    if (!ga->sig || !ga->slot_block || !ga->slot_first || !ga->slot_last || !ga->slot_inplace_of || !ga->blocks ||
        !ga->infos || !ga->info_slot || !ga->view_step || !ga->view_slot || !has_views || !kept || !size || !live) {
        st = mms_set_error(MMS_ERR_OOM, "mms_gallocr: out of host memory planning %d tensors", n);
        goto done;
    }
    if ((st = mms__galloc_signature(ga, g, node_ids, leaf_ids, ga->sig, &slots)) != MMS_OK) goto done;

    /* 1. lifetimes */
    for (s = 0; s < n; s++) {
        const struct mms_tensor *t = mms__slot_tensor(g, s);
        id = ga->sig[s].buffer_id;
        ga->slot_first[s] = ga->slot_last[s] = mms__slot_step(g, s);
        ga->slot_block[s] = -1;
        ga->slot_inplace_of[s] = -1;
        has_views[s] = kept[s] = false;
        size[s] = ga->sig[s].needs_alloc
                ? MMS__ALIGN_UP(mms_backend_buft_get_alloc_size(ga->bufs[id].buft, t), mms_backend_buft_get_alignment(ga->bufs[id].buft))
                : 0;
    }
    for (i = 0; i < nn; i++) {
        const struct mms_tensor *node = mms_graph_node(g, i);
        if (node->view_src) {
            int r = mms__galloc_root_slot(&slots, node);
            if (r >= 0) {
                has_views[r] = true;
                ga->view_step[ga->n_views] = i;
                ga->view_slot[ga->n_views++] = r;
            }
        }
        for (j = 0; j < MMS_MAX_SRC; j++) {
            int r;
            if (!node->src[j]) continue;
            r = mms__galloc_root_slot(&slots, node->src[j]);
            if (r >= 0) ga->slot_last[r] = MMS__MAX(ga->slot_last[r], i);
        }
    }
    for (s = 0; s < n; s++) {
        const struct mms_tensor *t = mms__slot_tensor(g, s);
        int r = mms__galloc_root_slot(&slots, t);
        bool keep = (t->flags & (MMS_TENSOR_FLAG_OUTPUT | MMS_TENSOR_FLAG_PERSISTENT)) ||
                    ((t->flags & MMS_TENSOR_FLAG_INPUT) && !ga->inputs_reusable);
        if (keep && r >= 0) { ga->slot_last[r] = MMS__MAX(ga->slot_last[r], end); kept[r] = true; }
    }

    /* 2. blocks, with in-place takeovers */
    for (s = 0; s < n; s++) {
        const struct mms_tensor *t = mms__slot_tensor(g, s);
        struct mms__gblock *b;
        if (!ga->sig[s].needs_alloc) continue;
        if (s >= nl && ga->inplace && mms__op_can_inplace(t->op)) {
            for (j = 0; j < 2 && ga->slot_block[s] < 0; j++) {
                int ss = t->src[j] ? (int)(intptr_t)mms__ptrmap_get(&slots, (uint64_t)(uintptr_t)t->src[j], NULL) - 1 : -1;
                if (ss >= 0 && mms__galloc_can_take_over(ga, t, s, s - nl, t->src[j], ss, has_views)) {
                    b = &ga->blocks[ga->slot_block[ss]];
                    b->last = MMS__MAX(b->last, ga->slot_last[s]);
                    b->owner = s;
                    ga->slot_block[s] = ga->slot_block[ss];
                    ga->slot_inplace_of[s] = ss;
                }
            }
            if (ga->slot_block[s] >= 0) continue;
        }
        b = &ga->blocks[ga->n_blocks];
        b->size = size[s];
        b->first = ga->slot_first[s];
        b->last = ga->slot_last[s];
        b->buffer_id = ga->sig[s].buffer_id;
        b->owner = s;
        b->input = (t->flags & MMS_TENSOR_FLAG_INPUT) && !ga->inputs_reusable;
        b->chunk = 0;
        b->offset = 0;
        ga->slot_block[s] = ga->n_blocks++;
    }

    /* 3. bounds and placement, per buffer */
    for (id = 0; id < ga->n_bufs; id++) {
        mms__galloc_bounds(ga, id, size, kept, live);
        if ((st = mms__place_buffer(ga, id)) != MMS_OK) goto done;
    }

    /* the report */
    for (s = 0; s < n; s++) {
        struct mms_gallocr_tensor_info *info;
        const struct mms__gblock *b;
        if (ga->slot_block[s] < 0) continue;
        b = &ga->blocks[ga->slot_block[s]];
        info = &ga->infos[ga->n_infos];
        info->tensor = mms__slot_tensor(g, s);
        info->buffer_id = b->buffer_id;
        info->chunk = b->chunk;
        info->offset = b->offset;
        info->size = size[s];
        info->first_use = ga->slot_first[s];
        info->last_use = ga->slot_last[s];
        info->inplace_of = ga->slot_inplace_of[s] >= 0 ? mms__slot_tensor(g, ga->slot_inplace_of[s]) : NULL;
        ga->info_slot[ga->n_infos++] = s;
    }
    ga->have_plan = true;
    ga->n_plans++;
    ga->plan_time_us = mms_time_us() - t0;
done:
    mms__ptrmap_free(&slots);
    MMS_FREE(has_views);
    MMS_FREE(kept);
    MMS_FREE(size);
    MMS_FREE(live);
    if (st != MMS_OK) mms__galloc_free_plan(ga);
    return st;
}

/* Grows each buffer id's chunks to the planned sizes (never shrinking). */
static enum mms_status mms__galloc_ensure_buffers(mms_gallocr_t ga) {
    int id, c;
    for (id = 0; id < ga->n_bufs; id++) {
        struct mms__gbuf *buf = &ga->bufs[id];
        if (buf->n_planned > buf->n_chunks) {
            mms_backend_buffer_t *chunks = (mms_backend_buffer_t *)MMS_REALLOC(buf->chunks, sizeof *chunks * (size_t)buf->n_planned);
            if (!chunks) return mms_set_error(MMS_ERR_OOM, "mms_gallocr: out of host memory");
            for (c = buf->n_chunks; c < buf->n_planned; c++) chunks[c] = NULL;
            buf->chunks = chunks;
            buf->n_chunks = buf->n_planned;
        }
        buf->info.allocated = 0;
        for (c = 0; c < buf->n_chunks; c++) {
            if (c < buf->n_planned && (!buf->chunks[c] || mms_backend_buffer_get_size(buf->chunks[c]) < buf->planned[c])) {
                mms_backend_buffer_t nb = mms_backend_buft_alloc_buffer(buf->buft, buf->planned[c]);
                if (!nb)
                    return mms__error_context(mms_last_status() == MMS_OK ? MMS_ERR_OOM : mms_last_status(),
                                         "mms_gallocr: cannot allocate %zu bytes of '%s' memory for buffer %d chunk %d: %s",
                                         buf->planned[c], mms_backend_buft_name(buf->buft), id, c, mms_last_error());
                if (buf->chunks[c]) {
                    ga->n_reallocs++;
                    mms__log(MMS_LOG_DEBUG, "mms_gallocr: buffer %d chunk %d grows from %zu to %zu bytes", id, c,
                             mms_backend_buffer_get_size(buf->chunks[c]), buf->planned[c]);
                    mms_backend_buffer_free(buf->chunks[c]);
                }
                mms_backend_buffer_set_usage(nb, MMS_BUFFER_USAGE_COMPUTE);
                buf->chunks[c] = nb;
            }
            if (buf->chunks[c]) buf->info.allocated += mms_backend_buffer_get_size(buf->chunks[c]);
        }
    }
    return MMS_OK;
}

MMS_API enum mms_status mms_gallocr_reserve_n(mms_gallocr_t ga, struct mms_cgraph *g, const int *node_ids, const int *leaf_ids) {
    enum mms_status st;
    if (!ga || !g) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_gallocr_reserve: allocator and graph are required");
    st = mms__galloc_plan(ga, g, node_ids, leaf_ids);
    return st != MMS_OK ? st : mms__galloc_ensure_buffers(ga);
}

MMS_API enum mms_status mms_gallocr_reserve(mms_gallocr_t ga, struct mms_cgraph *g) {
    return mms_gallocr_reserve_n(ga, g, NULL, NULL);
}

/* Does the stored plan fit graph g exactly? (Buffer ids are taken from the plan.) */
static bool mms__galloc_plan_fits(mms_gallocr_t ga, struct mms_cgraph *g) {
    const int n = mms__slot_count(g);
    struct mms__gsig *sig;
    struct mms__ptrmap slots;
    int s, *node_ids;
    bool fits = false;
    if (!ga->have_plan || mms_graph_n_leafs(g) != ga->n_leafs || mms_graph_n_nodes(g) != ga->n_nodes) return false;
    memset(&slots, 0, sizeof slots);
    sig = (struct mms__gsig *)MMS_MALLOC(sizeof *sig * (size_t)(n + 1));
    node_ids = (int *)MMS_MALLOC(sizeof(int) * (size_t)(n + 1));
    if (sig && node_ids) {
        for (s = 0; s < n; s++) node_ids[s] = ga->sig[s].buffer_id;
        fits = mms__galloc_signature(ga, g, node_ids + ga->n_leafs, node_ids, sig, &slots) == MMS_OK &&
               memcmp(sig, ga->sig, sizeof *sig * (size_t)n) == 0;
    }
    mms__ptrmap_free(&slots);
    MMS_FREE(sig);
    MMS_FREE(node_ids);
    return fits;
}

/* The results of one graph must not become values of another: a graph that holds tensors placed
   in compute memory (this allocator's or another's) by a different graph, next to tensors of its
   own, would lose their values: the memory is handed out again, or the other allocator's is. (A graph rebuilt over exactly the tensors of one earlier
   graph, with nothing new, is that graph again and is fine; input leafs are set anew anyway.) */
static enum mms_status mms__galloc_check_reuse(struct mms_cgraph *g, const char *who,
                                                const char *(*name_of)(void *user, uint64_t graph_id), void *user) {
    const int n = mms__slot_count(g), nl = mms_graph_n_leafs(g);
    const struct mms_tensor *culprit = NULL, *reader = NULL;
    uint64_t old_id = 0;
    int s, j, n_old = 0, n_fresh = 0;
    bool mixed = false;
    #define MMS__OLD(t) ((t)->placement.kind == MMS_MEMORY_COMPUTE && (t)->placement.graph_id != mms_graph_id(g))
    for (s = 0; s < n; s++) {
        const struct mms_tensor *t = mms__slot_tensor(g, s);
        if (t->view_src || (s < nl && (t->flags & MMS_TENSOR_FLAG_INPUT))) continue;
        if (MMS__OLD(t)) {
            n_old++;
            if (!old_id) old_id = t->placement.graph_id;
            else if (t->placement.graph_id != old_id) mixed = true;
        } else if (s >= nl && t->placement.kind == MMS_MEMORY_NONE) {
            n_fresh++;
        }
    }
    if (n_old == 0 || (!mixed && n_fresh == 0)) return MMS_OK;
    for (s = nl; s < n && !culprit; s++) {                     /* an old tensor that a new node reads */
        const struct mms_tensor *t = mms__slot_tensor(g, s);
        if (t->placement.kind != MMS_MEMORY_NONE) continue;
        for (j = 0; j < MMS_MAX_SRC && !culprit; j++) {
            const struct mms_tensor *r = t->src[j] ? (t->src[j]->view_src ? t->src[j]->view_src : t->src[j]) : NULL;
            if (r && MMS__OLD(r)) { culprit = r; reader = t; }
        }
    }
    for (s = 0; s < n && !culprit; s++) {
        const struct mms_tensor *t = mms__slot_tensor(g, s);
        if (!t->view_src && !(s < nl && (t->flags & MMS_TENSOR_FLAG_INPUT)) && MMS__OLD(t)) culprit = t;
    }
    #undef MMS__OLD
    {
        const char *old_name = name_of ? name_of(user, culprit->placement.graph_id) : "";
        char old[MMS_MAX_NAME + 32];
        snprintf(old, sizeof old, "graph #%llu%s%.64s%s", (unsigned long long)culprit->placement.graph_id, old_name[0] ? " '" : "", old_name,
                 old_name[0] ? "'" : "");
        return mms_set_error(MMS_ERR_STALE, "%s: graph #%llu%s%s%s uses tensor %s%s%s, which %s computed in compute memory that "
                             "this allocation hands out again: its value would be lost. Mark it with mms_set_persistent before "
                             "%s is allocated to keep it across graphs, or copy it out with mms_backend_tensor_get",
                             who, (unsigned long long)mms_graph_id(g), mms_graph_get_name(g)[0] ? " '" : "", mms_graph_get_name(g),
                             mms_graph_get_name(g)[0] ? "'" : "", mms__tensor_desc(culprit).s, reader ? " as an input of " : "",
                             reader ? mms__tensor_desc(reader).s : "", old, old);
    }
}

/* Places every planned tensor of g by the stored plan (which must fit g): the buffers grow if
   needed and start a new generation first. */
static enum mms_status mms__galloc_place(mms_gallocr_t ga, struct mms_cgraph *g) {
    enum mms_status st;
    int id, c, s, k, i;
    if ((st = mms__galloc_ensure_buffers(ga)) != MMS_OK) return st;

    /* a new generation: whatever an earlier allocation placed is stale from now on */
    for (id = 0; id < ga->n_bufs; id++)
        for (c = 0; c < ga->bufs[id].n_chunks; c++) mms_backend_buffer_reset(ga->bufs[id].chunks[c]);

    for (k = 0; k < ga->n_infos; k++) {
        struct mms_tensor *t;
        const struct mms__gblock *b;
        mms_backend_buffer_t chunk;
        s = ga->info_slot[k];
        t = mms__slot_tensor(g, s);
        b = &ga->blocks[ga->slot_block[s]];
        chunk = ga->bufs[b->buffer_id].chunks[b->chunk];
        mms__tensor_unplace(t);
        st = mms__tensor_alloc_for(chunk, t, (char *)mms_backend_buffer_get_base(chunk) + b->offset, mms_graph_id(g));
        if (st != MMS_OK) return st;
        ga->infos[k].tensor = t;
        ga->infos[k].inplace_of = ga->slot_inplace_of[s] >= 0 ? mms__slot_tensor(g, ga->slot_inplace_of[s]) : NULL;
    }
    for (i = 0; i < mms_graph_n_nodes(g); i++) {
        struct mms_tensor *t = mms_graph_node(g, i);
        if (t->view_src && t->view_src->placement.kind != MMS_MEMORY_NONE && (st = mms_backend_view_init(t)) != MMS_OK) return st;
    }
    return MMS_OK;
}

MMS_API enum mms_status mms_gallocr_alloc_graph(mms_gallocr_t ga, struct mms_cgraph *g) {
    enum mms_status st;
    if (!ga || !g) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_gallocr_alloc_graph: allocator and graph are required");
    if (mms_graph_status(g) != MMS_OK)
        return mms_set_error(MMS_ERR_STATE, "mms_gallocr_alloc_graph: the graph was not built correctly: %s", mms_graph_error(g));
    if ((st = mms__galloc_check_reuse(g, "mms_gallocr_alloc_graph", NULL, NULL)) != MMS_OK) return st;
    if (!mms__galloc_plan_fits(ga, g)) {
        if (ga->n_bufs > 1)   /* only the caller knows which buffer each tensor goes to */
            return mms_set_error(MMS_ERR_STATE, "mms_gallocr_alloc_graph: the graph differs from the one reserved and this allocator "
                                 "has %d buffers: call mms_gallocr_reserve_n with its buffer ids first", ga->n_bufs);
        if ((st = mms__galloc_plan(ga, g, NULL, NULL)) != MMS_OK) return st;
    }
    return mms__galloc_place(ga, g);
}

/* For the scheduler: every tensor this allocator placed becomes stale (a reset), or its memory is
   filled with a byte (poison). */
static void mms__galloc_reset(mms_gallocr_t ga) {
    int id, c;
    for (id = 0; id < ga->n_bufs; id++)
        for (c = 0; c < ga->bufs[id].n_chunks; c++) mms_backend_buffer_reset(ga->bufs[id].chunks[c]);
}

static void mms__galloc_fill(mms_gallocr_t ga, uint8_t value) {
    int id, c;
    for (id = 0; id < ga->n_bufs; id++)
        for (c = 0; c < ga->bufs[id].n_chunks; c++) mms_backend_buffer_clear(ga->bufs[id].chunks[c], value);
}

/* -- queries -- */

MMS_API size_t mms_gallocr_get_buffer_size(mms_gallocr_t ga, int id) {
    size_t total = 0;
    int c;
    if (!ga || id < 0 || id >= ga->n_bufs) return 0;
    for (c = 0; c < ga->bufs[id].n_chunks; c++) if (ga->bufs[id].chunks[c]) total += mms_backend_buffer_get_size(ga->bufs[id].chunks[c]);
    return total;
}

MMS_API int mms_gallocr_get_n_buffers(mms_gallocr_t ga) { return ga ? ga->n_bufs : 0; }

MMS_API enum mms_status mms_gallocr_get_buffer_info(mms_gallocr_t ga, int id, struct mms_gallocr_buffer_info *info) {
    if (!ga || !info || id < 0 || id >= ga->n_bufs)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_gallocr_get_buffer_info: no buffer %d", id);
    if (!ga->have_plan) return mms_set_error(MMS_ERR_STATE, "mms_gallocr_get_buffer_info: nothing planned yet (reserve or allocate a graph)");
    *info = ga->bufs[id].info;
    info->allocated = mms_gallocr_get_buffer_size(ga, id);
    return MMS_OK;
}

MMS_API int mms_gallocr_get_n_tensor_infos(mms_gallocr_t ga) { return ga && ga->have_plan ? ga->n_infos : 0; }
MMS_API const struct mms_gallocr_tensor_info *mms_gallocr_get_tensor_info(mms_gallocr_t ga, int i) {
    return ga && ga->have_plan && i >= 0 && i < ga->n_infos ? &ga->infos[i] : NULL;
}
MMS_API int     mms_gallocr_get_n_reallocs(mms_gallocr_t ga)   { return ga ? ga->n_reallocs : 0; }
MMS_API int     mms_gallocr_get_n_plans(mms_gallocr_t ga)      { return ga ? ga->n_plans : 0; }
MMS_API int64_t mms_gallocr_get_plan_time_us(mms_gallocr_t ga) { return ga ? ga->plan_time_us : 0; }
/* ==== end src/alloc/planner.c ==== */

/* ==== begin src/alloc/report.c ==== */
/* >>alloc-report ==================================================================================
   The plan as a table and as an SVG picture (plain text, no dependency). */

static double mms__mib(size_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

MMS_API void mms_gallocr_print_plan(mms_gallocr_t ga, FILE *out) {
    int id, k;
    if (!out) out = stdout;
    if (!ga || !ga->have_plan) { fprintf(out, "(nothing planned)\n"); return; }
    for (id = 0; id < ga->n_bufs; id++) {
        const struct mms_gallocr_buffer_info *bi = &ga->bufs[id].info;
        fprintf(out, "buffer %d (%s): planned %zu bytes (%.2f MiB) in %d chunk%s, lower bound %zu (%.2f MiB, +%.2f%%), "
                "universal bound %zu, no reuse %zu, %d tensors, placement: %s\n",
                id, mms_backend_buft_name(ga->bufs[id].buft), bi->planned, mms__mib(bi->planned), bi->n_chunks,
                bi->n_chunks == 1 ? "" : "s", bi->lower_bound, mms__mib(bi->lower_bound),
                bi->lower_bound ? 100.0 * ((double)bi->planned - (double)bi->lower_bound) / (double)bi->lower_bound : 0.0,
                bi->bound_universal, bi->no_reuse, bi->n_tensors, bi->strategy);
    }
    fprintf(out, "  %-4s %-5s %12s %12s %6s %6s  %-24s %s\n", "buf", "chunk", "offset", "size", "first", "last", "name", "in place of");
    for (k = 0; k < ga->n_infos; k++) {
        const struct mms_gallocr_tensor_info *t = &ga->infos[k];
        char name[MMS_MAX_NAME + 32];
        if (t->tensor->name[0]) mms__copy_str(name, sizeof name, t->tensor->name);
        else snprintf(name, sizeof name, "(%s)", mms_op_name(t->tensor->op));
        fprintf(out, "  %-4d %-5d %12zu %12zu %6d %6d  %-24s %s\n", t->buffer_id, t->chunk, t->offset, t->size,
                t->first_use, t->last_use, name, t->inplace_of ? (t->inplace_of->name[0] ? t->inplace_of->name : mms_op_name(t->inplace_of->op)) : "");
    }
}

/* Names go into SVG text: escape what XML reserves. */
static void mms__svg_text(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
            case '<': fputs("&lt;", f); break;
            case '>': fputs("&gt;", f); break;
            case '&': fputs("&amp;", f); break;
            case '"': fputs("&quot;", f); break;
            default: if ((unsigned char)*s >= 32) fputc(*s, f);
        }
    }
}

MMS_API enum mms_status mms_gallocr_write_svg(mms_gallocr_t ga, int id, const char *path) {
    const double W = 1200.0, H = 640.0, left = 80.0, right = 20.0, top = 40.0, bottom = 40.0;
    const struct mms_gallocr_buffer_info *bi;
    size_t ymax, chunk_base = 0;
    double sx, sy;
    FILE *f;
    int k, i, c, steps;

    if (!ga || !path || id < 0 || id >= ga->n_bufs) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_gallocr_write_svg: no buffer %d", id);
    if (!ga->have_plan) return mms_set_error(MMS_ERR_STATE, "mms_gallocr_write_svg: nothing planned yet");
    bi = &ga->bufs[id].info;
    steps = ga->n_nodes + 1;                         /* step -1 (leafs, inputs) is column 0 */
    ymax = MMS__MAX(MMS__MAX(bi->planned, bi->lower_bound), (size_t)1);
    sx = (W - left - right) / steps;
    sy = (H - top - bottom) / (double)ymax;
    f = mms__fopen(path, "w");
    if (!f) return mms_set_error(MMS_ERR_IO, "mms_gallocr_write_svg: cannot write '%s'", path);

    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"monospace\" font-size=\"10\">\n", W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%.0f\" y=\"16\" font-size=\"13\">buffer %d (%s): planned %.2f MiB, lower bound %.2f MiB, "
            "universal bound %.2f MiB, no reuse %.2f MiB; %s</text>\n", left, id, mms_backend_buft_name(ga->bufs[id].buft),
            mms__mib(bi->planned), mms__mib(bi->lower_bound), mms__mib(bi->bound_universal), mms__mib(bi->no_reuse), bi->strategy);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">execution step (node index) &#8594;</text>\n", left, H - 10);
    fprintf(f, "<text x=\"12\" y=\"%.0f\" transform=\"rotate(-90 12 %.0f)\">offset (MiB) &#8594;</text>\n", H / 2, H / 2);
    for (i = 0; i <= 4; i++) {                       /* y axis ticks */
        double y = H - bottom - (double)ymax * i / 4 * sy;
        fprintf(f, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%.1f</text>\n",
                left, W - right, y, y, left - 4, y + 3, mms__mib((size_t)((double)ymax * i / 4)));
    }

    /* one rectangle per tensor: a block continued in place is drawn in segments of alternating shade */
    for (c = 0; c < bi->n_chunks; c++) {
        for (k = 0; k < ga->n_infos; k++) {
            const struct mms_gallocr_tensor_info *t = &ga->infos[k];
            double x0, x1, y0, y1;
            char name[MMS_MAX_NAME + 32];
            if (t->buffer_id != id || t->chunk != c || t->size == 0) continue;
            x0 = left + (t->first_use + 1) * sx;
            x1 = left + (t->last_use + 2) * sx;
            y0 = H - bottom - (double)(chunk_base + t->offset + t->size) * sy;
            y1 = H - bottom - (double)(chunk_base + t->offset) * sy;
            if (t->tensor->name[0]) mms__copy_str(name, sizeof name, t->tensor->name);
            else snprintf(name, sizeof name, "%s#%d", mms_op_name(t->tensor->op), t->first_use);
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" stroke=\"#333\" stroke-width=\"0.5\"%s>",
                    x0, y0, MMS__MAX(x1 - x0, 1.0), MMS__MAX(y1 - y0, 0.5),
                    (t->tensor->flags & MMS_TENSOR_FLAG_INPUT) ? "#9cc9f5" : (t->tensor->flags & (MMS_TENSOR_FLAG_OUTPUT | MMS_TENSOR_FLAG_PERSISTENT)) ? "#f7c27a"
                    : t->inplace_of ? "#b9e3b0" : "#d9ead3", t->inplace_of ? " stroke-dasharray=\"3,2\"" : "");
            fprintf(f, "<title>");
            mms__svg_text(f, name);
            fprintf(f, " %s, %zu bytes at offset %zu, steps %d..%d%s", mms_op_name(t->tensor->op), t->size, t->offset,
                    t->first_use, t->last_use, t->inplace_of ? ", in place of " : "");
            if (t->inplace_of) mms__svg_text(f, t->inplace_of->name[0] ? t->inplace_of->name : mms_op_name(t->inplace_of->op));
            fprintf(f, "</title></rect>\n");
            if (x1 - x0 > 6.0 * (double)strlen(name) && y1 - y0 > 9.0) {
                fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", x0 + 2, (y0 + y1) / 2 + 3);
                mms__svg_text(f, name);
                fprintf(f, "</text>\n");
            }
        }
        chunk_base += ga->bufs[id].planned[c];
        if (c + 1 < bi->n_chunks) {
            double y = H - bottom - (double)chunk_base * sy;
            fprintf(f, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"black\" stroke-width=\"2\"/>"
                    "<text x=\"%.0f\" y=\"%.1f\">chunk %d</text>\n", left, W - right, y, y, W - right - 60, y - 3, c + 1);
        }
    }

    /* views: a tick inside the source's rectangle at the step where the view is made */
    for (i = 0; i < ga->n_views; i++) {
        const struct mms__gblock *b;
        double x, y0, y1;
        if (ga->slot_block[ga->view_slot[i]] < 0) continue;
        b = &ga->blocks[ga->slot_block[ga->view_slot[i]]];
        if (b->buffer_id != id || b->size == 0) continue;
        for (c = 0, chunk_base = 0; c < b->chunk; c++) chunk_base += ga->bufs[id].planned[c];
        x = left + (ga->view_step[i] + 1.5) * sx;
        y0 = H - bottom - (double)(chunk_base + b->offset + b->size) * sy;
        y1 = H - bottom - (double)(chunk_base + b->offset) * sy;
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#555\" stroke-dasharray=\"1,2\"><title>view at step %d</title></line>\n",
                x, x, y0, y1, ga->view_step[i]);
    }

    /* live bytes per step (merged blocks), and the lower bound */
    fprintf(f, "<polyline fill=\"none\" stroke=\"#c00\" stroke-width=\"1\" points=\"");
    for (i = 0; i < steps; i++) {
        size_t live = 0;
        for (k = 0; k < ga->n_blocks; k++) {
            const struct mms__gblock *b = &ga->blocks[k];
            if (b->buffer_id == id && b->first <= i - 1 && i - 1 <= b->last) live += b->size;
        }
        fprintf(f, "%.1f,%.1f %.1f,%.1f ", left + i * sx, H - bottom - (double)live * sy, left + (i + 1) * sx, H - bottom - (double)live * sy);
    }
    fprintf(f, "\"/>\n");
    {
        double y = H - bottom - (double)bi->lower_bound * sy;
        fprintf(f, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#c00\" stroke-dasharray=\"6,4\"/>"
                "<text x=\"%.0f\" y=\"%.1f\" fill=\"#c00\">lower bound</text>\n", left, W - right, y, y, left + 4, y - 3);
    }
    fprintf(f, "<text x=\"%.0f\" y=\"30\" font-size=\"10\">blue: inputs, orange: outputs, light green: in place of a dead "
            "source (dashed), dotted ticks: views, red line: live bytes per step</text>\n", left);
    fprintf(f, "</svg>\n");
    if (fclose(f) != 0) return mms_set_error(MMS_ERR_IO, "mms_gallocr_write_svg: error writing '%s'", path);
    return MMS_OK;
}
/* ==== end src/alloc/report.c ==== */

/* ==== begin src/sched/sched.c ==== */
/* >>sched =========================================================================================
   The multi-backend scheduler. Allocating a graph runs these steps, in this order:
     1. check: the graph was built correctly; memory it relies on (weights, caches, kept tensors)
        still holds and kept leafs are up to date; it does not mix results another graph left in
        compute memory with new ops;
     2. assign a backend to every node and leaf (pins, memory, weights, offload, spreading, fallback);
     3. split: cut the nodes into runs of one backend and route a copy for every tensor a split reads
        from memory its backend cannot use;
     4. clone the caller's nodes into the scheduler's own context, with sources rewired to the copies;
     5. place: persistent nodes keep their memory or get a buffer of their own (a stand-in in the
        reserve buffer when only reserving), and the graph allocator plans and places the rest;
     6. publish (alloc only, and only once everything above succeeded): each caller node takes its
        clone's placement, new kept buffers are registered. Reserve writes no caller tensor.
   The caller's graph is never rewired. Compute runs the splits in order, copying inputs first, then
   counts every node as written and records what each kept node was computed from. */

#define MMS__SCHED_MAX_COPIES 4

enum mms__sched_reason {
    MMS__WHY_NONE, MMS__WHY_PIN, MMS__WHY_MEMORY, MMS__WHY_WEIGHTS, MMS__WHY_OFFLOAD, MMS__WHY_INPUT,
    MMS__WHY_SPREAD, MMS__WHY_FALLBACK, MMS__WHY_DEFAULT, MMS__WHY_VIEW
};

static const char *const mms__sched_reason_names[] = {
    "unassigned", "pinned", "its memory is there", "its weights are there", "offloaded: large batch on host weights",
    "graph input", "next to its neighbours", "fallback: where its weights are cannot run it", "first backend that runs it",
    "view of a tensor there"
};

struct mms__sched_input {
    struct mms_tensor *src;                         /* what the split reads (the caller's tensor) */
    int                src_backend;
    int                split;
    struct mms_tensor *copies[MMS__SCHED_MAX_COPIES];
};

struct mms__sched_split {
    int                 backend;
    int                 i0, i1;                     /* the caller's node positions [i0, i1) */
    int                 first_input, n_inputs;
    struct mms_cgraph  *graph;                      /* clones of its nodes that compute */
    struct mms_tensor **originals;                  /* the caller's node behind each of them */
};

struct mms__sched_persist {             /* a kept tensor's buffer (the tensor may be gone: compared, never read) */
    const struct mms_tensor *tensor;
    mms_backend_buffer_t     buffer;
    int                      backend;
};

struct mms__sched_kept {                /* a persistent node of the allocated graph */
    int                  node;
    mms_backend_buffer_t fresh;         /* a buffer made for it by this allocation, published with it */
    int                  first_leaf, n_leafs;   /* what it is computed from: s->kept_leafs[first..] */
};

struct mms_backend_sched {
    int                        n_backends;
    mms_backend_t             *backends;
    mms_backend_buffer_type_t *bufts;
    int                        n_copies, cur_copy;
    bool                       op_offload;
    mms_gallocr_t              galloc;
    struct mms_context        *ctx;                 /* clones, copies, internal graphs: reset per split */
    mms_backend_event_t       *events;              /* [backend * n_copies + copy], NULL where unsupported */
    struct mms__ptrmap         pins;                /* tensor -> backend index + 1 */

    /* the graph last split */
    struct mms_cgraph         *graph;
    uint64_t                   graph_id;
    bool                       allocated;
    bool                       reserved_only;
    int                        n_nodes, n_leafs;
    struct mms__ptrmap         pos;                 /* tensor -> node index + 1, or -(leaf index + 1) */
    int                       *node_backend, *leaf_backend;
    unsigned char             *node_why, *leaf_why;
    struct mms_tensor        **clones;              /* per node */
    struct mms_tensor        **leaf_clones;         /* per leaf: a stand-in for a kept tensor not computed yet (reserve), or NULL */
    int                        cap_nodes, cap_leafs;
    struct mms__sched_kept    *kept;                /* persistent nodes */
    int                        n_kept, cap_kept;
    struct mms_tensor        **kept_leafs;
    int                        n_kept_leafs, cap_kept_leafs;
    mms_backend_buffer_t       reserve_buf;         /* holds the stand-ins while reserving */
    struct mms__sched_split   *splits;
    int                        n_splits, cap_splits;
    struct mms__sched_input   *inputs;
    int                        n_inputs, cap_inputs;
    struct mms_cgraph         *alloc_graph;

    struct mms__sched_persist *persist;
    int                        n_persist, cap_persist;

    mms_backend_sched_eval_callback callback;
    void                      *callback_user;
    int                        debug;
    FILE                      *debug_out;
    bool                       poison;
    char                       dump_pattern[256];
    char                       dump_dir[512];

    struct { uint64_t id; char name[MMS_MAX_NAME]; } recent[8];   /* names of graphs allocated lately, for messages */
    int                        n_recent;
};

static void mms__sched_debug_print(mms_backend_sched_t s);                                  /* debug.c */
static enum mms_status mms__sched_dump(mms_backend_sched_t s, const struct mms_tensor *t, int node);
static bool mms__glob_match(const char *pattern, const char *s);

/* Grows *arr (of elem-byte items) to hold at least need items. */
static bool mms__grow(void **arr, int *cap, int need, size_t elem) {
    int nc;
    void *p;
    if (need <= *cap) return true;
    nc = *cap ? *cap : 16;
    while (nc < need) nc *= 2;
    p = MMS_REALLOC(*arr, elem * (size_t)nc);
    if (!p) return false;
    *arr = p;
    *cap = nc;
    return true;
}

/* -- creation -- */

MMS_API mms_backend_sched_t mms_backend_sched_new(mms_backend_t *backends, mms_backend_buffer_type_t *bufts, int n_backends,
                                                  bool parallel, bool op_offload) {
    mms_backend_sched_t s;
    struct mms_init_params ip = { 0, NULL, true };
    const char *env;
    int i, c;
    if (!backends || n_backends < 1) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_new: needs at least one backend"); return NULL; }
    for (i = 0; i < n_backends; i++)
        if (!backends[i]) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_new: backend %d is NULL", i); return NULL; }
    s = (mms_backend_sched_t)MMS_MALLOC(sizeof *s);
    if (!s) { mms_set_error(MMS_ERR_OOM, "mms_backend_sched_new: out of host memory"); return NULL; }
    memset(s, 0, sizeof *s);
    s->n_backends = n_backends;
    s->n_copies = parallel ? MMS__SCHED_MAX_COPIES : 1;
    s->op_offload = op_offload;
    s->backends = (mms_backend_t *)MMS_MALLOC(sizeof *s->backends * (size_t)n_backends);
    s->bufts = (mms_backend_buffer_type_t *)MMS_MALLOC(sizeof *s->bufts * (size_t)n_backends);
    s->events = (mms_backend_event_t *)MMS_MALLOC(sizeof *s->events * (size_t)(n_backends * s->n_copies));
    s->ctx = mms_init(ip);
    if (!s->backends || !s->bufts || !s->events || !s->ctx) {
        mms_backend_sched_free(s);
        mms_set_error(MMS_ERR_OOM, "mms_backend_sched_new: out of host memory");
        return NULL;
    }
    for (i = 0; i < n_backends; i++) {
        s->backends[i] = backends[i];
        s->bufts[i] = bufts && bufts[i] ? bufts[i] : mms_backend_get_default_buffer_type(backends[i]);
        if (!mms_backend_supports_buft(backends[i], s->bufts[i])) {
            mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_new: backend %s cannot use buffer type %s",
                          mms_backend_name(backends[i]), mms_backend_buft_name(s->bufts[i]));
            mms_backend_sched_free(s);
            return NULL;
        }
        for (c = 0; c < s->n_copies; c++) s->events[i * s->n_copies + c] = mms_backend_event_new(backends[i]);
    }
    s->galloc = mms_gallocr_new_n(s->bufts, n_backends);
    s->reserve_buf = mms__reserve_buffer_new();
    if (!s->galloc || !s->reserve_buf) { mms_backend_sched_free(s); return NULL; }

    env = getenv("MMS_SCHED_DEBUG");
    s->debug = env ? atoi(env) : 0;
    env = getenv("MMS_SCHED_POISON");
    s->poison = env && atoi(env) != 0;
    env = getenv("MMS_SCHED_DUMP");
    if (env && env[0]) mms_backend_sched_set_dump(s, env, getenv("MMS_SCHED_DUMP_DIR"));
    return s;
}

MMS_API void mms_backend_sched_free(mms_backend_sched_t s) {
    int i;
    if (!s) return;
    for (i = 0; i < s->n_persist; i++) mms_backend_buffer_free(s->persist[i].buffer);
    for (i = 0; i < s->n_kept; i++) mms_backend_buffer_free(s->kept[i].fresh);
    mms_backend_buffer_free(s->reserve_buf);
    for (i = 0; s->events && i < s->n_backends * s->n_copies; i++) mms_backend_event_free(s->events[i]);
    for (i = 0; i < s->n_splits; i++) MMS_FREE(s->splits[i].originals);
    mms_gallocr_free(s->galloc);
    mms_free(s->ctx);
    mms__ptrmap_free(&s->pins);
    mms__ptrmap_free(&s->pos);
    MMS_FREE(s->backends); MMS_FREE(s->bufts); MMS_FREE(s->events);
    MMS_FREE(s->node_backend); MMS_FREE(s->leaf_backend); MMS_FREE(s->node_why); MMS_FREE(s->leaf_why);
    MMS_FREE(s->clones); MMS_FREE(s->leaf_clones); MMS_FREE(s->splits); MMS_FREE(s->inputs); MMS_FREE(s->persist);
    MMS_FREE(s->kept); MMS_FREE(s->kept_leafs);
    MMS_FREE(s);
}

/* -- where memory is -- */

static int mms__sched_backend_index(mms_backend_sched_t s, mms_backend_t b) {
    int i;
    for (i = 0; i < s->n_backends; i++) if (s->backends[i] == b) return i;
    return -1;
}

/* The first backend (by priority) that can use memory of this buffer type, or -1. */
static int mms__sched_backend_for_buft(mms_backend_sched_t s, mms_backend_buffer_type_t buft) {
    int i;
    for (i = 0; i < s->n_backends; i++) if (mms_backend_supports_buft(s->backends[i], buft)) return i;
    return -1;
}

/* Memory the scheduler does not hand out: the caller's (a context's, static buffers) and kept
   tensors still held. Compute memory and released kept tensors are placed anew. */
static bool mms__sched_has_fixed_memory(const struct mms_tensor *t) {
    switch (t->placement.kind) {
        case MMS_MEMORY_HOST:
        case MMS_MEMORY_STATIC:     return true;
        case MMS_MEMORY_PERSISTENT: return mms__memory_is_live(t);
        case MMS_MEMORY_NONE:
        case MMS_MEMORY_COMPUTE:
        case MMS_MEMORY_RESERVE:    break;
    }
    return false;
}

/* The buffer type of fixed memory (checked live: host memory of a context is the CPU's). */
static mms_backend_buffer_type_t mms__sched_buft_of(const struct mms_tensor *t) {
    mms_backend_buffer_t live = mms__live_buffer_of(t);
    return live ? live->buft : mms_backend_cpu_buffer_type();
}

static int mms__sched_pos(mms_backend_sched_t s, const struct mms_tensor *t) {
    return (int)(intptr_t)mms__ptrmap_get(&s->pos, (uint64_t)(uintptr_t)t, NULL);
}

/* The backend a tensor of the current graph lives on (views: their source's). */
static int mms__sched_backend_of(mms_backend_sched_t s, const struct mms_tensor *t) {
    int p = mms__sched_pos(s, t);
    if (p > 0) return s->node_backend[p - 1];
    if (p < 0) return s->leaf_backend[-p - 1];
    return -1;
}

static bool mms__sched_supports(mms_backend_sched_t s, int b, const struct mms_tensor *t) {
    return mms_op_is_view(t->op) || mms_backend_supports_op(s->backends[b], t);
}

static int mms__sched_first_supporting(mms_backend_sched_t s, const struct mms_tensor *t) {
    int b;
    for (b = 0; b < s->n_backends; b++) if (mms__sched_supports(s, b, t)) return b;
    return -1;
}

/* -- 1. check -- */

/* A kept tensor the graph reads that has no memory yet, or none any more: allowed only in a
   reserve, where a stand-in takes its place. */
static bool mms__sched_kept_without_memory(const struct mms_tensor *t) {
    return (t->flags & MMS_TENSOR_FLAG_PERSISTENT) && !t->view_src &&
           (t->placement.kind == MMS_MEMORY_NONE || (t->placement.kind == MMS_MEMORY_PERSISTENT && !mms__memory_is_live(t)));
}

/* Memory the graph relies on (weights, caches, kept tensors) must still hold, and kept leafs be up
   to date (values do not matter to a reserve); checked through the registry before anything looks
   at a tensor's buffer. Kept nodes whose buffer was released are simply placed again. */
static enum mms_status mms__sched_check_memory(struct mms_cgraph *g, bool reserve, const char *who) {
    int i, n = mms_graph_n_leafs(g) + mms_graph_n_nodes(g);
    for (i = 0; i < n; i++) {
        const struct mms_tensor *t = mms__slot_tensor(g, i);
        const struct mms_tensor *m = t->view_src ? t->view_src : t;
        const bool read = i < mms_graph_n_leafs(g) && !reserve;
        enum mms_status st;
        if (m->placement.kind == MMS_MEMORY_NONE || m->placement.kind == MMS_MEMORY_COMPUTE) continue;   /* planned, or the reuse check's */
        if (m->placement.kind == MMS_MEMORY_PERSISTENT && !mms__memory_is_live(m) && (reserve || i >= mms_graph_n_leafs(g))) continue;
        if ((st = read ? mms__tensor_check_read(m, who) : mms__tensor_check(m, who)) != MMS_OK) return st;
    }
    return MMS_OK;
}

/* -- 2. backends -- */

static enum mms_status mms__sched_assign_leafs(mms_backend_sched_t s, struct mms_cgraph *g) {
    int i;
    for (i = 0; i < s->n_leafs; i++) {
        struct mms_tensor *t = mms_graph_leaf(g, i);
        int pin = (int)(intptr_t)mms__ptrmap_get(&s->pins, (uint64_t)(uintptr_t)t, NULL) - 1;
        int b;
        if (mms__sched_has_fixed_memory(t)) {
            b = mms__sched_backend_for_buft(s, mms__sched_buft_of(t));
            if (b < 0)
                return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched: tensor %s lives in '%s' memory that none of the "
                                     "scheduler's backends can use", mms__tensor_desc(t).s, mms_backend_buft_name(mms__sched_buft_of(t)));
            s->leaf_why[i] = MMS__WHY_MEMORY;
        } else if (pin >= 0) {
            b = pin;
            s->leaf_why[i] = MMS__WHY_PIN;
        } else {
            b = s->n_backends - 1;   /* inputs are set from the host: the last backend, as in ggml */
            s->leaf_why[i] = MMS__WHY_INPUT;
        }
        s->leaf_backend[i] = b;
    }
    return MMS_OK;
}

/* Pins, memory, weights (and offload) decide first. */
static enum mms_status mms__sched_assign_fixed(mms_backend_sched_t s, struct mms_cgraph *g) {
    const int last = s->n_backends - 1;
    int i, j;
    for (i = 0; i < s->n_nodes; i++) {
        struct mms_tensor *t = mms_graph_node(g, i);
        int pin = (int)(intptr_t)mms__ptrmap_get(&s->pins, (uint64_t)(uintptr_t)t, NULL) - 1;
        s->node_backend[i] = -1;
        s->node_why[i] = MMS__WHY_NONE;
        if (mms_op_is_view(t->op)) continue;
        if (pin >= 0) {
            if (!mms__sched_supports(s, pin, t))
                return mms_set_error(MMS_ERR_UNSUPPORTED, "mms_backend_sched: %s is pinned to %s, which cannot run %s",
                                     mms__tensor_desc(t).s, mms_backend_name(s->backends[pin]), mms_op_name(t->op));
            s->node_backend[i] = pin;
            s->node_why[i] = MMS__WHY_PIN;
            continue;
        }
        if (mms__sched_has_fixed_memory(t->view_src ? t->view_src : t)) {
            const struct mms_tensor *m = t->view_src ? t->view_src : t;   /* e.g. a CPY into a cache */
            int b = mms__sched_backend_for_buft(s, mms__sched_buft_of(m));
            if (b < 0 || !mms__sched_supports(s, b, t))
                return mms_set_error(MMS_ERR_UNSUPPORTED, "mms_backend_sched: %s writes into '%s' memory, and no backend that can "
                                     "use it runs %s", mms__tensor_desc(t).s, mms_backend_buft_name(mms__sched_buft_of(m)), mms_op_name(t->op));
            s->node_backend[i] = b;
            s->node_why[i] = MMS__WHY_MEMORY;
            continue;
        }
        for (j = 0; j < 2 && s->node_backend[i] < 0; j++) {     /* src[0..1]: weights, biases, norm gains */
            const struct mms_tensor *w = t->src[j] ? (t->src[j]->view_src ? t->src[j]->view_src : t->src[j]) : NULL;
            mms_backend_buffer_t live = w ? mms__live_buffer_of(w) : NULL;   /* never w->buffer: it may be freed */
            int wb, b;
            if (!live || live->usage != MMS_BUFFER_USAGE_WEIGHTS) continue;
            wb = mms__sched_backend_for_buft(s, live->buft);
            if (wb < 0) continue;
            if (s->op_offload && wb == last) {
                for (b = 0; b < last; b++)
                    if (mms_backend_offload_op(s->backends[b], t) && mms__sched_supports(s, b, t)) {
                        s->node_backend[i] = b;
                        s->node_why[i] = MMS__WHY_OFFLOAD;
                        break;
                    }
                if (s->node_backend[i] >= 0) break;
            }
            if (mms__sched_supports(s, wb, t)) {
                s->node_backend[i] = wb;
                s->node_why[i] = MMS__WHY_WEIGHTS;
            } else {
                s->node_backend[i] = mms__sched_first_supporting(s, t);
                s->node_why[i] = MMS__WHY_FALLBACK;
            }
        }
    }
    return MMS_OK;
}

/* Unassigned ops join their neighbours: down then up, first without letting the last backend
   (the host) spread, so accelerators get the ops between their weights. */
static void mms__sched_spread(mms_backend_sched_t s, struct mms_cgraph *g) {
    const int last = s->n_backends - 1;
    int round, dir, k;
    for (round = 0; round < 2; round++) {
        for (dir = 0; dir < 2; dir++) {
            int cur = -1;
            for (k = 0; k < s->n_nodes; k++) {
                int i = dir == 0 ? k : s->n_nodes - 1 - k;
                const struct mms_tensor *t = mms_graph_node(g, i);
                if (mms_op_is_view(t->op)) continue;
                if (s->node_backend[i] >= 0) {
                    cur = (round == 0 && s->node_backend[i] == last) ? -1 : s->node_backend[i];
                } else if (cur >= 0 && mms__sched_supports(s, cur, t)) {
                    s->node_backend[i] = cur;
                    s->node_why[i] = MMS__WHY_SPREAD;
                }
            }
        }
    }
}

static enum mms_status mms__sched_assign(mms_backend_sched_t s, struct mms_cgraph *g) {
    enum mms_status st;
    int i;
    if ((st = mms__sched_assign_leafs(s, g)) != MMS_OK) return st;
    if ((st = mms__sched_assign_fixed(s, g)) != MMS_OK) return st;
    mms__sched_spread(s, g);
    for (i = 0; i < s->n_nodes; i++) {
        const struct mms_tensor *t = mms_graph_node(g, i);
        if (mms_op_is_view(t->op) || s->node_backend[i] >= 0) continue;
        s->node_backend[i] = mms__sched_first_supporting(s, t);
        s->node_why[i] = MMS__WHY_DEFAULT;
        if (s->node_backend[i] < 0)
            return mms_set_error(MMS_ERR_UNSUPPORTED, "mms_backend_sched: no backend of the scheduler runs %s (for %s)",
                                 mms_op_name(t->op), mms__tensor_desc(t).s);
    }
    for (i = 0; i < s->n_nodes; i++) {                 /* views live where their source lives */
        const struct mms_tensor *t = mms_graph_node(g, i);
        if (!mms_op_is_view(t->op)) continue;
        s->node_backend[i] = mms__sched_backend_of(s, t->view_src);
        s->node_why[i] = MMS__WHY_VIEW;
        if (s->node_backend[i] < 0) s->node_backend[i] = s->n_backends - 1;
    }
    return MMS_OK;
}

/* -- 3. splits and the copies their inputs need -- */

/* Must a split on backend b copy src in first? */
static bool mms__sched_needs_copy(mms_backend_sched_t s, int b, const struct mms_tensor *src) {
    int owner = mms__sched_backend_of(s, src);
    const struct mms_tensor *root = src->view_src ? src->view_src : src;
    if (owner < 0 || owner == b) return false;
    return !mms_backend_supports_buft(s->backends[b], mms__sched_has_fixed_memory(root) ? mms__sched_buft_of(root) : s->bufts[owner]);
}

static enum mms_status mms__sched_make_splits(mms_backend_sched_t s, struct mms_cgraph *g) {
    struct mms__sched_split *cur = NULL;
    int i, j, k;
    s->n_splits = 0;
    s->n_inputs = 0;
    for (i = 0; i < s->n_nodes; i++) {
        const struct mms_tensor *t = mms_graph_node(g, i);
        if (mms_op_is_view(t->op)) continue;
        if (!cur || cur->backend != s->node_backend[i]) {
            if (cur) cur->i1 = i;                  /* before the array may move */
            if (!mms__grow((void **)&s->splits, &s->cap_splits, s->n_splits + 1, sizeof *s->splits))
                return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory");
            cur = &s->splits[s->n_splits++];
            memset(cur, 0, sizeof *cur);
            cur->backend = s->node_backend[i];
            cur->i0 = s->n_splits == 1 ? 0 : i;       /* leading views join the first split */
            cur->first_input = s->n_inputs;
        }
        for (j = 0; j < MMS_MAX_SRC; j++) {
            struct mms_tensor *src = t->src[j];
            struct mms__sched_input *in;
            if (!src || !mms__sched_needs_copy(s, cur->backend, src)) continue;
            for (k = cur->first_input; k < s->n_inputs; k++) if (s->inputs[k].src == src) break;
            if (k < s->n_inputs) continue;
            if (!mms__grow((void **)&s->inputs, &s->cap_inputs, s->n_inputs + 1, sizeof *s->inputs))
                return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory");
            in = &s->inputs[s->n_inputs++];
            memset(in, 0, sizeof *in);
            in->src = src;
            in->src_backend = mms__sched_backend_of(s, src);
            in->split = s->n_splits - 1;
            cur->n_inputs++;
        }
    }
    if (!cur && s->n_nodes > 0) {                      /* only views: one split that computes nothing */
        if (!mms__grow((void **)&s->splits, &s->cap_splits, 1, sizeof *s->splits))
            return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory");
        cur = &s->splits[s->n_splits++];
        memset(cur, 0, sizeof *cur);
        cur->backend = s->node_backend[0];
    }
    if (cur) cur->i1 = s->n_nodes;
    return MMS_OK;
}

/* -- 4. clones, with their sources rewired to the copies -- */

static struct mms_tensor *mms__sched_input_copy(mms_backend_sched_t s, int split, const struct mms_tensor *src) {
    int k;
    for (k = s->splits[split].first_input; k < s->splits[split].first_input + s->splits[split].n_inputs; k++)
        if (s->inputs[k].src == src) return s->inputs[k].copies[s->cur_copy];
    return NULL;
}

/* What a clone (or a copy) reads in place of the caller's tensor t. */
static struct mms_tensor *mms__sched_mapped(mms_backend_sched_t s, struct mms_tensor *t) {
    int p = mms__sched_pos(s, t);
    if (p > 0) return s->clones[p - 1];
    if (p < 0 && s->leaf_clones[-p - 1]) return s->leaf_clones[-p - 1];
    return t;
}

static struct mms_tensor *mms__sched_new_internal(mms_backend_sched_t s, const struct mms_tensor *like) {
    return mms__new_tensor_impl(s->ctx, "mms_backend_sched", like->type, MMS_MAX_DIMS, like->ne, NULL, 0);
}

/* A clone shares what it can with its original: its memory if that is fixed, nothing else of the
   caller's bookkeeping (identity for versions stays the original's). */
static struct mms_tensor *mms__sched_clone(mms_backend_sched_t s, const struct mms_tensor *orig) {
    struct mms_tensor *cl = mms__sched_new_internal(s, orig);
    if (!cl) return NULL;
    *cl = *orig;
    cl->provenance = NULL;
    cl->watched = false;
    if (orig->view_src || !mms__sched_has_fixed_memory(orig)) mms__tensor_unplace(cl);   /* planned (views: given) by the gallocr */
    return cl;
}

/* Stand-ins for kept leafs no graph has computed yet: allowed only when reserving. */
static enum mms_status mms__sched_clone_leafs(mms_backend_sched_t s, struct mms_cgraph *g, bool reserve) {
    int i;
    for (i = 0; i < s->n_leafs; i++) {
        struct mms_tensor *t = mms_graph_leaf(g, i);
        s->leaf_clones[i] = NULL;
        if (!mms__sched_kept_without_memory(t)) continue;
        if (!reserve)
            return mms_set_error(MMS_ERR_STATE, "mms_backend_sched_alloc_graph: persistent tensor %s is an input of graph #%llu, but no "
                                 "graph has computed it yet", mms__tensor_desc(t).s, (unsigned long long)mms_graph_id(g));
        if (!(s->leaf_clones[i] = mms__sched_clone(s, t))) return mms_ctx_status(s->ctx);
        mms__tensor_unplace(s->leaf_clones[i]);
        mms__tensor_alloc_for(s->reserve_buf, s->leaf_clones[i], NULL, 0);
    }
    return MMS_OK;
}

static enum mms_status mms__sched_clone_nodes(mms_backend_sched_t s, struct mms_cgraph *g) {
    int i;
    for (i = 0; i < s->n_nodes; i++)
        if (!(s->clones[i] = mms__sched_clone(s, mms_graph_node(g, i)))) return mms_ctx_status(s->ctx);
    return MMS_OK;
}

/* The copy nodes of every split input (one per pipeline copy), then each clone's sources. */
static enum mms_status mms__sched_wire(mms_backend_sched_t s, struct mms_cgraph *g) {
    int k, j, c, i;
    for (k = 0; k < s->n_splits; k++) {
        struct mms__sched_split *sp = &s->splits[k];
        for (j = sp->first_input; j < sp->first_input + sp->n_inputs; j++) {
            struct mms__sched_input *in = &s->inputs[j];
            for (c = 0; c < s->n_copies; c++) {
                struct mms_tensor *cp = mms__sched_new_internal(s, in->src);
                if (!cp) return mms_ctx_status(s->ctx);
                memcpy(cp->nb, in->src->nb, sizeof cp->nb);   /* same layout: the copy is a byte copy */
                cp->op = MMS_OP_DUP;
                /* keeps the source alive until copied; a view's own clone may come later in this
                   split, so a copy of a view depends on the view's source (a leaf or an earlier split) */
                cp->src[0] = mms__sched_mapped(s, in->src->view_src ? in->src->view_src : in->src);
                if (s->n_copies > 1) cp->flags = MMS_TENSOR_FLAG_INPUT | MMS_TENSOR_FLAG_OUTPUT;
                mms_format_name(cp, "%s#%.40s#%d", mms_backend_name(s->backends[sp->backend]), in->src->name, c);
                in->copies[c] = cp;
            }
        }
        for (i = sp->i0; i < sp->i1; i++) {
            const struct mms_tensor *orig = mms_graph_node(g, i);
            struct mms_tensor *cl = s->clones[i];
            for (j = 0; j < MMS_MAX_SRC; j++) {
                struct mms_tensor *cp = orig->src[j] && !mms_op_is_view(orig->op) ? mms__sched_input_copy(s, k, orig->src[j]) : NULL;
                cl->src[j] = cp ? cp : orig->src[j] ? mms__sched_mapped(s, orig->src[j]) : NULL;
            }
            if (orig->view_src) cl->view_src = mms__sched_mapped(s, orig->view_src);
        }
    }
    return MMS_OK;
}

/* -- 5. place: kept nodes, then the allocation graph for the gallocr -- */

/* The leafs (their memory's roots) a node is computed from, appended to s->kept_leafs. */
static enum mms_status mms__sched_collect_leafs(mms_backend_sched_t s, struct mms_cgraph *g, int node, int *seen, int stamp) {
    struct mms_tensor **stack;
    int depth = 0, j;
    stack = (struct mms_tensor **)MMS_MALLOC(sizeof *stack * (size_t)(s->n_nodes + s->n_leafs + 1) * (MMS_MAX_SRC + 1));
    if (!stack) return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory");
    stack[depth++] = mms_graph_node(g, node);
    while (depth > 0) {
        struct mms_tensor *t = stack[--depth];
        int p = mms__sched_pos(s, t), at = p > 0 ? p - 1 : s->n_nodes - p - 1;
        if (p == 0 || seen[at] == stamp) continue;    /* p == 0: not in the graph (a view's root) */
        seen[at] = stamp;
        if (p < 0) {
            struct mms_tensor *root = t->view_src ? t->view_src : t;
            if (!mms__grow((void **)&s->kept_leafs, &s->cap_kept_leafs, s->n_kept_leafs + 1, sizeof *s->kept_leafs)) {
                MMS_FREE(stack);
                return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory");
            }
            s->kept_leafs[s->n_kept_leafs++] = root;
            continue;
        }
        for (j = 0; j < MMS_MAX_SRC; j++) if (t->src[j]) stack[depth++] = t->src[j];
        if (t->view_src) stack[depth++] = t->view_src;
    }
    MMS_FREE(stack);
    return MMS_OK;
}

/* Persistent nodes keep the memory they have, or get a buffer of their own on their backend (a
   stand-in in the reserve buffer when reserving). Buffers made here are published with the graph,
   or freed if the allocation fails. */
static enum mms_status mms__sched_place_kept(mms_backend_sched_t s, struct mms_cgraph *g, bool reserve) {
    int i, *seen = NULL;
    enum mms_status st = MMS_OK;
    s->n_kept = s->n_kept_leafs = 0;
    for (i = 0; i < s->n_nodes; i++) {
        struct mms_tensor *orig = mms_graph_node(g, i), *cl = s->clones[i];
        struct mms__sched_kept *k;
        int b = s->node_backend[i];
        if (!(orig->flags & MMS_TENSOR_FLAG_PERSISTENT) || orig->view_src) continue;
        if (!mms__grow((void **)&s->kept, &s->cap_kept, s->n_kept + 1, sizeof *s->kept)) return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory");
        k = &s->kept[s->n_kept++];
        memset(k, 0, sizeof *k);
        k->node = i;
        if (mms__sched_has_fixed_memory(orig)) continue;                 /* kept already: computed again in place */
        if (reserve) { mms__tensor_alloc_for(s->reserve_buf, cl, NULL, 0); continue; }
        k->fresh = mms_backend_buft_alloc_buffer(s->bufts[b], mms_backend_buft_get_alloc_size(s->bufts[b], orig));
        if (!k->fresh)
            return mms__error_context(mms_last_status(), "mms_backend_sched: cannot allocate persistent tensor %s on %s: %s",
                                      mms__tensor_desc(orig).s, mms_backend_name(s->backends[b]), mms_last_error());
        mms_backend_buffer_set_usage(k->fresh, MMS_BUFFER_USAGE_PERSISTENT);
        if ((st = mms__tensor_alloc_for(k->fresh, cl, mms_backend_buffer_get_base(k->fresh), mms_graph_id(g))) != MMS_OK) return st;
    }
    if (reserve || s->n_kept == 0) return MMS_OK;
    seen = (int *)MMS_MALLOC(sizeof *seen * (size_t)(s->n_nodes + s->n_leafs + 1));
    if (!seen) return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory");
    memset(seen, 0, sizeof *seen * (size_t)(s->n_nodes + s->n_leafs + 1));
    for (i = 0; i < s->n_kept && st == MMS_OK; i++) {
        s->kept[i].first_leaf = s->n_kept_leafs;
        st = mms__sched_collect_leafs(s, g, s->kept[i].node, seen, i + 1);
        s->kept[i].n_leafs = s->n_kept_leafs - s->kept[i].first_leaf;
    }
    MMS_FREE(seen);
    return st;
}

/* Kept buffers this allocation made but did not publish. */
static void mms__sched_drop_fresh(mms_backend_sched_t s) {
    int i;
    for (i = 0; i < s->n_kept; i++) { mms_backend_buffer_free(s->kept[i].fresh); s->kept[i].fresh = NULL; }
}

/* The graph the gallocr plans: per split its input copies, then its clones; the caller's leafs
   (or their stand-ins). ids: the backend of each node, then of each leaf. */
static enum mms_status mms__sched_alloc_graph_of(mms_backend_sched_t s, struct mms_cgraph *g, int **ids_out) {
    const int cap = s->n_nodes + s->n_inputs * s->n_copies + 1;
    struct mms_tensor **nodes = (struct mms_tensor **)MMS_MALLOC(sizeof *nodes * (size_t)cap);
    struct mms_tensor **leafs = (struct mms_tensor **)MMS_MALLOC(sizeof *leafs * (size_t)(s->n_leafs + 1));
    int *ids = (int *)MMS_MALLOC(sizeof *ids * (size_t)(cap + s->n_leafs + 1));
    int n = 0, k, j, c, i;
    if (!nodes || !leafs || !ids) { MMS_FREE(nodes); MMS_FREE(leafs); MMS_FREE(ids); return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory"); }
    for (k = 0; k < s->n_splits; k++) {
        const struct mms__sched_split *sp = &s->splits[k];
        for (j = sp->first_input; j < sp->first_input + sp->n_inputs; j++)
            for (c = 0; c < s->n_copies; c++) { ids[n] = sp->backend; nodes[n++] = s->inputs[j].copies[c]; }
        for (i = sp->i0; i < sp->i1; i++) { ids[n] = s->node_backend[i]; nodes[n++] = s->clones[i]; }
    }
    for (i = 0; i < s->n_leafs; i++) { leafs[i] = mms__sched_mapped(s, mms_graph_leaf(g, i)); ids[n + i] = s->leaf_backend[i]; }
    s->alloc_graph = mms__graph_from_lists(s->ctx, nodes, n, leafs, s->n_leafs);
    MMS_FREE(nodes);
    MMS_FREE(leafs);
    if (!s->alloc_graph || mms_graph_status(s->alloc_graph) != MMS_OK) { MMS_FREE(ids); return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory"); }
    *ids_out = ids;
    return MMS_OK;
}

/* The graphs each backend computes: the clones of a split that do work (not views). */
static enum mms_status mms__sched_split_graphs(mms_backend_sched_t s) {
    int k, i, n;
    for (k = 0; k < s->n_splits; k++) {
        struct mms__sched_split *sp = &s->splits[k];
        struct mms_tensor **list = (struct mms_tensor **)MMS_MALLOC(sizeof *list * (size_t)(sp->i1 - sp->i0 + 1));
        MMS_FREE(sp->originals);
        sp->originals = (struct mms_tensor **)MMS_MALLOC(sizeof *sp->originals * (size_t)(sp->i1 - sp->i0 + 1));
        if (!list || !sp->originals) { MMS_FREE(list); return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory"); }
        for (i = sp->i0, n = 0; i < sp->i1; i++) {
            if (mms_op_is_view(s->clones[i]->op)) continue;
            sp->originals[n] = mms_graph_node(s->graph, i);
            list[n++] = s->clones[i];
        }
        sp->graph = mms__graph_from_lists(s->ctx, list, n, NULL, 0);
        MMS_FREE(list);
        if (!sp->graph) return mms_ctx_status(s->ctx);
    }
    return MMS_OK;
}

static const char *mms__sched_graph_name(void *user, uint64_t id) {
    mms_backend_sched_t s = (mms_backend_sched_t)user;
    int i;
    for (i = 0; i < 8; i++) if (s->recent[i].id == id) return s->recent[i].name;
    return "";
}

static void mms__sched_remember_graph(mms_backend_sched_t s, const struct mms_cgraph *g) {
    int slot = s->n_recent++ % 8;
    s->recent[slot].id = mms_graph_id(g);
    mms__copy_str(s->recent[slot].name, sizeof s->recent[slot].name, mms_graph_get_name(g));
}

/* Sizes the per-node and per-leaf arrays for g and indexes its tensors. */
static enum mms_status mms__sched_index(mms_backend_sched_t s, struct mms_cgraph *g) {
    int i;
    s->graph = g;
    s->n_nodes = mms_graph_n_nodes(g);
    s->n_leafs = mms_graph_n_leafs(g);
    mms__ptrmap_free(&s->pos);
    if (!mms__grow((void **)&s->node_backend, &s->cap_nodes, s->n_nodes + 1, sizeof(int)) ||
        !mms__grow((void **)&s->leaf_backend, &s->cap_leafs, s->n_leafs + 1, sizeof(int))) goto oom;
    {   /* the other per-node and per-leaf arrays follow the same capacities */
        unsigned char *nw = (unsigned char *)MMS_REALLOC(s->node_why, (size_t)s->cap_nodes);
        unsigned char *lw = (unsigned char *)MMS_REALLOC(s->leaf_why, (size_t)s->cap_leafs);
        struct mms_tensor **cl = (struct mms_tensor **)MMS_REALLOC(s->clones, sizeof *cl * (size_t)s->cap_nodes);
        struct mms_tensor **lc = (struct mms_tensor **)MMS_REALLOC(s->leaf_clones, sizeof *lc * (size_t)s->cap_leafs);
        if (nw) s->node_why = nw;
        if (lw) s->leaf_why = lw;
        if (cl) s->clones = cl;
        if (lc) s->leaf_clones = lc;
        if (!nw || !lw || !cl || !lc) goto oom;
    }
    for (i = 0; i < s->n_nodes; i++)
        if (!mms__ptrmap_put(&s->pos, (uint64_t)(uintptr_t)mms_graph_node(g, i), (void *)(intptr_t)(i + 1))) goto oom;
    for (i = 0; i < s->n_leafs; i++)
        if (!mms__ptrmap_put(&s->pos, (uint64_t)(uintptr_t)mms_graph_leaf(g, i), (void *)(intptr_t)-(i + 1))) goto oom;
    return MMS_OK;
oom:
    return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory");
}

/* Steps 1-5 up to the gallocr: afterwards alloc_graph and its backend ids are ready. Nothing of
   the caller's is written. */
static enum mms_status mms__sched_prepare(mms_backend_sched_t s, struct mms_cgraph *g, bool reserve, int **ids) {
    const char *who = reserve ? "mms_backend_sched_reserve" : "mms_backend_sched_alloc_graph";
    enum mms_status st;
    int i;
    if (!g) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: graph is NULL", who);
    if (mms_graph_status(g) != MMS_OK)
        return mms_set_error(MMS_ERR_STATE, "%s: the graph was not built correctly: %s", who, mms_graph_error(g));
    if ((st = mms__sched_check_memory(g, reserve, who)) != MMS_OK) return st;
    if (!reserve && (st = mms__galloc_check_reuse(g, who, mms__sched_graph_name, s)) != MMS_OK) return st;
    s->allocated = false;
    mms__sched_drop_fresh(s);
    s->n_kept = 0;
    for (i = 0; i < s->n_splits; i++) { MMS_FREE(s->splits[i].originals); s->splits[i].originals = NULL; }
    mms_reset(s->ctx);
    if ((st = mms__sched_index(s, g)) != MMS_OK) return st;
    if ((st = mms__sched_assign(s, g)) != MMS_OK) return st;                /* 2 */
    if ((st = mms__sched_make_splits(s, g)) != MMS_OK) return st;           /* 3 */
    if ((st = mms__sched_clone_leafs(s, g, reserve)) != MMS_OK) return st;  /* 4 */
    if ((st = mms__sched_clone_nodes(s, g)) != MMS_OK) return st;
    if ((st = mms__sched_wire(s, g)) != MMS_OK) return st;
    if ((st = mms__sched_place_kept(s, g, reserve)) != MMS_OK) return st;   /* 5 */
    if ((st = mms__sched_alloc_graph_of(s, g, ids)) != MMS_OK) return st;
    return mms__sched_split_graphs(s);
}

/* Step 6: the caller's nodes take their clones' placement (results are read from them), leafs the
   gallocr placed are marked as this graph's, and kept buffers made for this graph are registered. */
static enum mms_status mms__sched_publish(mms_backend_sched_t s, struct mms_cgraph *g) {
    const uint64_t id = mms_graph_id(g);
    int i;
    if (!mms__grow((void **)&s->persist, &s->cap_persist, s->n_persist + s->n_kept, sizeof *s->persist))
        return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory");
    for (i = 0; i < s->n_nodes; i++) {
        struct mms_tensor *orig = mms_graph_node(g, i);
        const struct mms_tensor *cl = s->clones[i];
        orig->data = cl->data;
        orig->buffer = cl->buffer;
        orig->placement = cl->placement;
        if (orig->placement.kind == MMS_MEMORY_COMPUTE || orig->placement.kind == MMS_MEMORY_PERSISTENT) orig->placement.graph_id = id;
    }
    for (i = 0; i < s->n_leafs; i++) {
        struct mms_tensor *t = mms_graph_leaf(g, i);
        if (t->placement.kind == MMS_MEMORY_COMPUTE && !t->view_src) t->placement.graph_id = id;
    }
    for (i = 0; i < s->n_kept; i++) {
        struct mms__sched_kept *k = &s->kept[i];
        struct mms__sched_persist *p;
        if (!k->fresh) continue;
        p = &s->persist[s->n_persist++];
        p->tensor = mms_graph_node(g, k->node);
        p->buffer = k->fresh;
        p->backend = s->node_backend[k->node];
        k->fresh = NULL;
        if (mms__provenance_pending(mms_graph_node(g, k->node), id) != MMS_OK) return mms_last_status();
    }
    return MMS_OK;
}

/* -- public: reserve, alloc, compute -- */

MMS_API enum mms_status mms_backend_sched_reserve(mms_backend_sched_t s, struct mms_cgraph *g) {
    enum mms_status st;
    int *ids = NULL;
    if (!s) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_reserve: scheduler is NULL");
    s->allocated = false;
    st = mms__sched_prepare(s, g, true, &ids);
    if (st == MMS_OK) st = mms_gallocr_reserve_n(s->galloc, s->alloc_graph, ids, ids + mms_graph_n_nodes(s->alloc_graph));
    MMS_FREE(ids);
    s->reserved_only = true;
    if (st == MMS_OK && s->debug) mms__sched_debug_print(s);
    return st;
}

MMS_API enum mms_status mms_backend_sched_alloc_graph(mms_backend_sched_t s, struct mms_cgraph *g) {
    enum mms_status st;
    int *ids = NULL;
    if (!s) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_alloc_graph: scheduler is NULL");
    s->allocated = false;                       /* a failed allocation leaves nothing allocated */
    s->cur_copy = (s->cur_copy + 1) % s->n_copies;
    st = mms__sched_prepare(s, g, false, &ids);
    if (st == MMS_OK && !mms__galloc_plan_fits(s->galloc, s->alloc_graph))
        st = mms_gallocr_reserve_n(s->galloc, s->alloc_graph, ids, ids + mms_graph_n_nodes(s->alloc_graph));
    MMS_FREE(ids);
    if (st == MMS_OK) st = mms__galloc_place(s->galloc, s->alloc_graph);
    if (st == MMS_OK) st = mms__sched_publish(s, g);
    if (st != MMS_OK) { mms__sched_drop_fresh(s); return st; }
    if (s->poison) mms__galloc_fill(s->galloc, 0xff);
    s->allocated = true;
    s->reserved_only = false;
    s->graph_id = mms_graph_id(g);
    mms__sched_remember_graph(s, g);
    if (s->debug) mms__sched_debug_print(s);
    return MMS_OK;
}

static bool mms__sched_wants(mms_backend_sched_t s, struct mms_tensor *orig) {
    if (s->dump_pattern[0] && mms__glob_match(s->dump_pattern, orig->name)) return true;
    return s->callback && s->callback(orig, true, s->callback_user);
}

/* Runs one split's graph, stopping after each node a callback or a dump asks for. */
static enum mms_status mms__sched_run_split(mms_backend_sched_t s, struct mms__sched_split *sp) {
    mms_backend_t b = s->backends[sp->backend];
    const int n = mms_graph_n_nodes(sp->graph);
    int j = 0, k;
    enum mms_status st;
    if (!s->callback && !s->dump_pattern[0]) return mms_backend_graph_compute_async(b, sp->graph);
    while (j < n) {
        struct mms_cgraph *part;
        struct mms_tensor **nodes = (struct mms_tensor **)MMS_MALLOC(sizeof *nodes * (size_t)n);
        bool wanted = false;
        if (!nodes) return mms_set_error(MMS_ERR_OOM, "mms_backend_sched: out of host memory");
        for (k = j; k < n; k++) {
            nodes[k - j] = mms_graph_node(sp->graph, k);
            if ((wanted = mms__sched_wants(s, sp->originals[k])) != false) break;
        }
        if (k == n) k = n - 1;
        part = mms__graph_from_lists(s->ctx, nodes, k - j + 1, NULL, 0);
        MMS_FREE(nodes);
        if (!part) return mms_ctx_status(s->ctx);
        if ((st = mms_backend_graph_compute_async(b, part)) != MMS_OK) return st;
        if (wanted) {
            struct mms_tensor *orig = sp->originals[k];
            if ((st = mms_backend_synchronize(b)) != MMS_OK) return st;
            if (s->dump_pattern[0] && mms__glob_match(s->dump_pattern, orig->name) &&
                (st = mms__sched_dump(s, orig, mms__sched_pos(s, orig) - 1)) != MMS_OK) return st;
            if (s->callback && !s->callback(orig, false, s->callback_user))
                return mms_set_error(MMS_ABORTED, "mms_backend_sched: the eval callback stopped the graph after %s", mms__tensor_desc(orig).s);
        }
        j = k + 1;
    }
    return MMS_OK;
}

/* After the splits ran: every node wrote its memory, and each kept node is now what its leafs
   (at their versions now) give. */
static enum mms_status mms__sched_computed(mms_backend_sched_t s) {
    enum mms_status st;
    int i;
    for (i = 0; i < s->n_nodes; i++) {
        struct mms_tensor *t = mms_graph_node(s->graph, i);
        if (!mms_op_is_view(t->op)) mms__tensor_written(t);
    }
    for (i = 0; i < s->n_kept; i++) {
        const struct mms__sched_kept *k = &s->kept[i];
        st = mms__provenance_record(mms_graph_node(s->graph, k->node), s->kept_leafs + k->first_leaf, k->n_leafs, s->graph_id);
        if (st != MMS_OK) return st;
    }
    return MMS_OK;
}

static enum mms_status mms__sched_compute_splits(mms_backend_sched_t s) {
    int k, j, i;
    enum mms_status st;
    for (i = 0; i < s->n_leafs; i++) {           /* weights, kept tensors, inputs: all still valid and up to date? */
        struct mms_tensor *t = mms_graph_leaf(s->graph, i);
        if (mms_nelements(t) > 0 && (st = mms__tensor_check_read(t, "mms_backend_sched_graph_compute")) != MMS_OK) return st;
    }
    for (k = 0; k < s->n_splits; k++) {
        struct mms__sched_split *sp = &s->splits[k];
        mms_backend_t b = s->backends[sp->backend];
        mms_backend_event_t done;
        for (j = sp->first_input; j < sp->first_input + sp->n_inputs; j++) {
            struct mms__sched_input *in = &s->inputs[j];
            struct mms_tensor *copy = in->copies[s->cur_copy];
            bool user_input = mms__sched_pos(s, in->src) < 0 && !mms__sched_has_fixed_memory(in->src);
            if (user_input) {
                st = mms_backend_tensor_copy(in->src, copy);   /* set by the caller on the host: copy now */
            } else {
                mms_backend_t src_b = s->backends[in->src_backend];
                mms_backend_event_t ev = s->events[in->src_backend * s->n_copies + s->cur_copy];
                st = ev ? mms_backend_event_wait(b, ev) : mms_backend_synchronize(src_b);
                if (st == MMS_OK) st = mms_backend_tensor_copy_async(src_b, b, in->src, copy);
            }
            if (st != MMS_OK) return st;
        }
        if ((st = mms__sched_run_split(s, sp)) != MMS_OK) return st;
        done = s->events[sp->backend * s->n_copies + s->cur_copy];
        if (done && (st = mms_backend_event_record(done)) != MMS_OK) return st;
    }
    return mms__sched_computed(s);
}

MMS_API enum mms_status mms_backend_sched_graph_compute_async(mms_backend_sched_t s, struct mms_cgraph *g) {
    enum mms_status st;
    if (!s || !g) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_graph_compute: scheduler and graph are required");
    if (!s->allocated && (st = mms_backend_sched_alloc_graph(s, g)) != MMS_OK) return st;
    if (mms_graph_id(g) != s->graph_id)
        return mms_set_error(MMS_ERR_STATE, "mms_backend_sched_graph_compute: graph #%llu%s%s%s was passed, but graph #%llu is the one "
                             "allocated: call mms_backend_sched_alloc_graph for it first (or mms_backend_sched_reset)",
                             (unsigned long long)mms_graph_id(g), mms_graph_get_name(g)[0] ? " '" : "", mms_graph_get_name(g),
                             mms_graph_get_name(g)[0] ? "'" : "", (unsigned long long)s->graph_id);
    if (mms_graph_n_nodes(g) != s->n_nodes || mms_graph_n_leafs(g) != s->n_leafs)
        return mms_set_error(MMS_ERR_STATE, "mms_backend_sched_graph_compute: graph #%llu changed since it was allocated (%d nodes, "
                             "now %d): allocate it again", (unsigned long long)s->graph_id, s->n_nodes, mms_graph_n_nodes(g));
    return mms__sched_compute_splits(s);
}

MMS_API enum mms_status mms_backend_sched_synchronize(mms_backend_sched_t s) {
    int i;
    enum mms_status st;
    if (!s) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_synchronize: scheduler is NULL");
    for (i = 0; i < s->n_backends; i++) if ((st = mms_backend_synchronize(s->backends[i])) != MMS_OK) return st;
    return MMS_OK;
}

MMS_API enum mms_status mms_backend_sched_graph_compute(mms_backend_sched_t s, struct mms_cgraph *g) {
    enum mms_status st = mms_backend_sched_graph_compute_async(s, g);
    enum mms_status sy = s ? mms_backend_sched_synchronize(s) : MMS_OK;
    return st != MMS_OK ? st : sy;
}

MMS_API void mms_backend_sched_reset(mms_backend_sched_t s) {
    if (!s) return;
    s->allocated = false;
    s->graph_id = 0;
    mms__ptrmap_free(&s->pins);
    mms__galloc_reset(s->galloc);
}

/* -- pins, persistent tensors, queries -- */

MMS_API enum mms_status mms_backend_sched_set_tensor_backend(mms_backend_sched_t s, struct mms_tensor *t, mms_backend_t backend) {
    int b;
    if (!s || !t) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_set_tensor_backend: scheduler and tensor are required");
    b = mms__sched_backend_index(s, backend);
    if (b < 0) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_set_tensor_backend: backend %s is not one of the scheduler's",
                                    mms_backend_name(backend));
    if (!mms__ptrmap_put(&s->pins, (uint64_t)(uintptr_t)t, (void *)(intptr_t)(b + 1)))
        return mms_set_error(MMS_ERR_OOM, "mms_backend_sched_set_tensor_backend: out of host memory");
    return MMS_OK;
}

MMS_API mms_backend_t mms_backend_sched_get_tensor_backend(mms_backend_sched_t s, const struct mms_tensor *t) {
    int b;
    if (!s || !t) return NULL;
    b = (int)(intptr_t)mms__ptrmap_get(&s->pins, (uint64_t)(uintptr_t)t, NULL) - 1;
    if (b < 0 && s->graph) b = mms__sched_backend_of(s, t);
    if (b < 0 && mms__sched_has_fixed_memory(t)) b = mms__sched_backend_for_buft(s, mms__sched_buft_of(t));
    return b >= 0 ? s->backends[b] : NULL;
}

MMS_API void mms_backend_sched_set_eval_callback(mms_backend_sched_t s, mms_backend_sched_eval_callback cb, void *user) {
    if (!s) return;
    s->callback = cb;
    s->callback_user = user;
}

/* For layers above that chain their own callback in front of the caller's. */
MMS__MAYBE_UNUSED static void mms__sched_get_eval_callback(mms_backend_sched_t s, mms_backend_sched_eval_callback *cb, void **user) {
    *cb = s->callback;
    *user = s->callback_user;
}

MMS_API enum mms_status mms_backend_sched_release(mms_backend_sched_t s, struct mms_tensor *t) {
    int i;
    if (!s || !t) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_release: scheduler and tensor are required");
    for (i = 0; i < s->n_persist; i++) {
        if (s->persist[i].tensor != t) continue;
        mms_backend_buffer_free(s->persist[i].buffer);
        s->persist[i] = s->persist[--s->n_persist];   /* its provenance stays: what was computed from it keeps its own */
        return MMS_OK;
    }
    return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_release: %s is not a persistent tensor of this scheduler "
                         "(mark it with mms_set_persistent before its graph is allocated)", mms__tensor_desc(t).s);
}

MMS_API int           mms_backend_sched_get_n_backends(mms_backend_sched_t s) { return s ? s->n_backends : 0; }
MMS_API mms_backend_t mms_backend_sched_get_backend(mms_backend_sched_t s, int i) { return s && i >= 0 && i < s->n_backends ? s->backends[i] : NULL; }
MMS_API int           mms_backend_sched_get_n_splits(mms_backend_sched_t s) { return s ? s->n_splits : 0; }
MMS_API int           mms_backend_sched_get_n_copies(mms_backend_sched_t s) { return s ? s->n_copies : 0; }
MMS_API int           mms_backend_sched_get_n_split_inputs(mms_backend_sched_t s) { return s ? s->n_inputs : 0; }
MMS_API int           mms_backend_sched_get_n_reallocs(mms_backend_sched_t s) { return s ? mms_gallocr_get_n_reallocs(s->galloc) : 0; }
MMS_API mms_gallocr_t mms_backend_sched_get_gallocr(mms_backend_sched_t s) { return s ? s->galloc : NULL; }

MMS_API size_t mms_backend_sched_get_buffer_size(mms_backend_sched_t s, mms_backend_t backend) {
    int b = s ? mms__sched_backend_index(s, backend) : -1;
    return b >= 0 ? mms_gallocr_get_buffer_size(s->galloc, b) : 0;
}

MMS_API size_t mms_backend_sched_get_persistent_size(mms_backend_sched_t s, mms_backend_t backend) {
    int b = s ? mms__sched_backend_index(s, backend) : -1, i;
    size_t total = 0;
    for (i = 0; b >= 0 && i < s->n_persist; i++) if (s->persist[i].backend == b) total += mms_backend_buffer_get_size(s->persist[i].buffer);
    return total;
}
/* ==== end src/sched/sched.c ==== */

/* ==== begin src/sched/debug.c ==== */
/* >>sched-debug ===================================================================================
   The scheduler's trace (MMS_SCHED_DEBUG), tensor dumps (MMS_SCHED_DUMP) and their settings. */

MMS_API void mms_backend_sched_set_debug(mms_backend_sched_t s, int level, FILE *out) {
    if (!s) return;
    s->debug = level;
    s->debug_out = out;
}

MMS_API void mms_backend_sched_set_poison(mms_backend_sched_t s, bool poison) { if (s) s->poison = poison; }

MMS_API enum mms_status mms_backend_sched_set_dump(mms_backend_sched_t s, const char *pattern, const char *dir) {
    if (!s) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_set_dump: scheduler is NULL");
    if (pattern && strlen(pattern) >= sizeof s->dump_pattern)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_set_dump: pattern longer than %zu characters", sizeof s->dump_pattern - 1);
    if (dir && strlen(dir) >= sizeof s->dump_dir)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_backend_sched_set_dump: folder name longer than %zu characters", sizeof s->dump_dir - 1);
    mms__copy_str(s->dump_pattern, sizeof s->dump_pattern, pattern ? pattern : "");
    mms__copy_str(s->dump_dir, sizeof s->dump_dir, dir && dir[0] ? dir : ".");
    return MMS_OK;
}

/* '*' matches any run of characters, '?' any one character. */
static bool mms__glob_match(const char *p, const char *s) {
    const char *star = NULL, *resume = NULL;
    while (*s) {
        if (*p == '*') { star = p++; resume = s; }
        else if (*p == '?' || *p == *s) { p++; s++; }
        else if (star) { p = star + 1; s = ++resume; }
        else return false;
    }
    while (*p == '*') p++;
    return *p == '\0';
}

static FILE *mms__sched_out(mms_backend_sched_t s) { return s->debug_out ? s->debug_out : stderr; }

/* Sizes the way people read them: 512 B, 12.5 KiB, 3.20 MiB. */
static const char *mms__bytes_str(size_t n, char *buf, size_t size) {
    if (n < 1024) snprintf(buf, size, "%zu B", n);
    else if (n < (size_t)1 << 20) snprintf(buf, size, "%.1f KiB", (double)n / 1024.0);
    else snprintf(buf, size, "%.2f MiB", (double)n / (1024.0 * 1024.0));
    return buf;
}

/* Level 1: the graph, its splits and their inputs, the buffers. Level 2: every node as well. */
static void mms__sched_debug_print(mms_backend_sched_t s) {
    FILE *f = mms__sched_out(s);
    struct mms__ptrmap info_of;
    char b1[32], b2[32], b3[32];
    int k, j, i, b;
    memset(&info_of, 0, sizeof info_of);
    for (k = 0; k < mms_gallocr_get_n_tensor_infos(s->galloc); k++)
        mms__ptrmap_put(&info_of, (uint64_t)(uintptr_t)mms_gallocr_get_tensor_info(s->galloc, k)->tensor, (void *)(intptr_t)(k + 1));
    fprintf(f, "mms_sched: %s graph #%llu%s%s%s: %d nodes, %d leafs, %d splits, %d split inputs, %d pipeline copies\n",
            s->reserved_only ? "reserve" : "alloc", (unsigned long long)mms_graph_id(s->graph), mms_graph_get_name(s->graph)[0] ? " '" : "",
            mms_graph_get_name(s->graph), mms_graph_get_name(s->graph)[0] ? "'" : "", s->n_nodes, s->n_leafs, s->n_splits, s->n_inputs, s->n_copies);
    for (k = 0; k < s->n_splits; k++) {
        const struct mms__sched_split *sp = &s->splits[k];
        fprintf(f, "mms_sched: ## split %d on %s: nodes %d..%d, %d inputs\n", k, mms_backend_name(s->backends[sp->backend]),
                sp->i0, sp->i1 - 1, sp->n_inputs);
        for (j = sp->first_input; j < sp->first_input + sp->n_inputs; j++) {
            const struct mms__sched_input *in = &s->inputs[j];
            fprintf(f, "mms_sched:    copy %s (%s) from %s to %s as '%s'\n", mms__tensor_desc(in->src).s,
                    mms__bytes_str(mms_nbytes(in->src), b1, sizeof b1), mms_backend_name(s->backends[in->src_backend]),
                    mms_backend_name(s->backends[sp->backend]), in->copies[s->cur_copy]->name);
        }
        if (s->debug < 2) continue;
        for (i = sp->i0; i < sp->i1; i++) {
            const struct mms_tensor *t = mms_graph_node(s->graph, i);
            int info = (int)(intptr_t)mms__ptrmap_get(&info_of, (uint64_t)(uintptr_t)s->clones[i], NULL);
            fprintf(f, "mms_sched:    node %d %s %s on %s (%s)", i, mms_op_name(t->op), mms__tensor_desc(t).s,
                    mms_backend_name(s->backends[s->node_backend[i]]), mms__sched_reason_names[s->node_why[i]]);
            if (info > 0) {
                const struct mms_gallocr_tensor_info *ti = mms_gallocr_get_tensor_info(s->galloc, info - 1);
                fprintf(f, ": %s buffer, offset %zu, size %zu, live %d..%d%s%s", mms_backend_buft_name(s->bufts[ti->buffer_id]),
                        ti->offset, ti->size, ti->first_use, ti->last_use, ti->inplace_of ? ", in place of " : "",
                        ti->inplace_of ? (ti->inplace_of->name[0] ? ti->inplace_of->name : mms_op_name(ti->inplace_of->op)) : "");
            } else if (t->view_src) {
                fprintf(f, ": view of '%s'", t->view_src->name);
            } else if (t->flags & MMS_TENSOR_FLAG_PERSISTENT) {
                fprintf(f, ": persistent, %s", mms__bytes_str(mms_nbytes(t), b1, sizeof b1));
            }
            fputc('\n', f);
        }
    }
    for (b = 0; b < s->n_backends; b++) {
        struct mms_gallocr_buffer_info bi;
        if (mms_gallocr_get_buffer_info(s->galloc, b, &bi) != MMS_OK) continue;
        fprintf(f, "mms_sched: compute memory on %s: %s planned (lower bound %s), %d tensors; persistent %s\n",
                mms_backend_name(s->backends[b]), mms__bytes_str(bi.planned, b1, sizeof b1),
                mms__bytes_str(bi.lower_bound, b2, sizeof b2), bi.n_tensors,
                mms__bytes_str(mms_backend_sched_get_persistent_size(s, s->backends[b]), b3, sizeof b3));
    }
    mms__ptrmap_free(&info_of);
}

/* One file per dumped node: a text line "mmsched-dump name=<name> type=<type> ne=<a,b,c,d>
   bytes=<n> fnv1a64=<hex>" then the tensor's elements, row-major and contiguous. */
static enum mms_status mms__sched_dump(mms_backend_sched_t s, const struct mms_tensor *t, int node) {
    const size_t row = mms_row_size(t->type, t->ne[0]);
    const size_t bytes = row * (size_t)mms_nrows(t);
    char path[768], safe[MMS_MAX_NAME];
    unsigned char *data = (unsigned char *)MMS_MALLOC(bytes + 1);
    uint64_t sum = MMS__FNV1A64_START;
    enum mms_status st = MMS_OK;
    int64_t r;
    FILE *f;
    size_t i;
    if (!data) return mms_set_error(MMS_ERR_OOM, "mms_sched dump: out of host memory for %zu bytes", bytes);
    for (i = 0; t->name[i] && i + 1 < sizeof safe; i++)
        safe[i] = (isalnum((unsigned char)t->name[i]) || t->name[i] == '.' || t->name[i] == '-') ? t->name[i] : '_';
    safe[i] = '\0';
    for (r = 0; r < mms_nrows(t) && st == MMS_OK; r++) {    /* rows one by one: views may have gaps */
        int64_t i1, i2, i3;
        mms__unravel_row(t->ne, r, &i1, &i2, &i3);
        if (t->nb[0] == mms_type_size(t->type) || mms_blck_size(t->type) > 1)
            st = mms_backend_tensor_get(t, data + (size_t)r * row, (size_t)(i1 * (int64_t)t->nb[1] + i2 * (int64_t)t->nb[2] + i3 * (int64_t)t->nb[3]), row);
        else
            st = mms_set_error(MMS_ERR_UNSUPPORTED, "mms_sched dump: %s has strided rows", mms__tensor_desc(t).s);
    }
    if (st == MMS_OK) {
        sum = mms__fnv1a64(data, bytes, sum);
        snprintf(path, sizeof path, "%s/mms-dump-g%llu-n%d-%s.bin", s->dump_dir, (unsigned long long)mms_graph_id(s->graph), node, safe);
        f = mms__fopen(path, "wb");
        if (!f) {
            st = mms_set_error(MMS_ERR_IO, "mms_sched dump: cannot write '%s'", path);
        } else {
            fprintf(f, "mmsched-dump name=%s type=%s ne=%lld,%lld,%lld,%lld bytes=%zu fnv1a64=%016llx\n", t->name, mms_type_name(t->type),
                    (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3], bytes, (unsigned long long)sum);
            if (fwrite(data, 1, bytes, f) != bytes) st = mms_set_error(MMS_ERR_IO, "mms_sched dump: error writing '%s'", path);
            if (fclose(f) != 0 && st == MMS_OK) st = mms_set_error(MMS_ERR_IO, "mms_sched dump: error writing '%s'", path);
            fprintf(mms__sched_out(s), "mms_sched: dump node %d %s fnv1a64=%016llx -> %s\n", node, mms__tensor_desc(t).s,
                    (unsigned long long)sum, path);
        }
    }
    MMS_FREE(data);
    return st;
}
/* ==== end src/sched/debug.c ==== */

#ifndef MMS_NO_GGUF   /* the parts below are left out under this option */

/* ==== begin src/gguf/gguf.c ==== */
/* >>gguf ==========================================================================================
   The GGUF reader. The file is mapped (or the caller's memory used as it is) and parsed in one
   pass: every count, length, offset and size is checked against the bytes that remain before it is
   used or anything is allocated from it, so a hostile header costs at most memory proportional to
   the file's length. Values stay in the mapping; the handle keeps positions and lookup tables.
   All multi-byte fields are decoded byte by byte: little-endian on any host, any alignment. */

#define MMS__GGUF_DEFAULT_ALIGNMENT 32
#define MMS__GGUF_MAX_KEY           65535
#define MMS__GGUF_N_VALUE_TYPES     13
/* The fewest bytes an entry can take, to bound counts before allocating for them:
   key length + type + a 1-byte value, and name length + n_dims + one ne + type + offset. */
#define MMS__GGUF_MIN_KV_BYTES      13
#define MMS__GGUF_MIN_TENSOR_BYTES  32

/* GGUF's tensor type ids that can be sized: elements and bytes per block, and our type if any. */
struct mms__gguf_ttype { uint32_t id; const char *name; uint32_t blck; uint32_t bytes; enum mms_type type; };
static const struct mms__gguf_ttype mms__gguf_ttypes[] = {
    {  0, "f32",  1,   4, MMS_TYPE_F32 },     {  1, "f16",  1,   2, MMS_TYPE_F16 },
    {  2, "q4_0", 32,  18, MMS_TYPE_Q4_0 }, {  3, "q4_1", 32,  20, MMS_TYPE_INVALID },
    {  6, "q5_0", 32,  22, MMS_TYPE_INVALID }, {  7, "q5_1", 32,  24, MMS_TYPE_INVALID },
    {  8, "q8_0", 32,  34, MMS_TYPE_Q8_0 }, {  9, "q8_1", 32,  36, MMS_TYPE_INVALID },
    { 10, "q2_k", 256, 84, MMS_TYPE_INVALID }, { 11, "q3_k", 256, 110, MMS_TYPE_INVALID },
    { 12, "q4_k", 256, 144, MMS_TYPE_Q4_K }, { 13, "q5_k", 256, 176, MMS_TYPE_INVALID },
    { 14, "q6_k", 256, 210, MMS_TYPE_Q6_K }, { 15, "q8_k", 256, 292, MMS_TYPE_INVALID },
    { 24, "i8",   1,   1, MMS_TYPE_INVALID }, { 25, "i16",  1,   2, MMS_TYPE_INVALID },
    { 26, "i32",  1,   4, MMS_TYPE_I32 },     { 27, "i64",  1,   8, MMS_TYPE_INVALID },
    { 28, "f64",  1,   8, MMS_TYPE_INVALID }, { 30, "bf16", 1,   2, MMS_TYPE_BF16 },
};

static const struct mms__gguf_ttype *mms__gguf_ttype_find(uint32_t id) {
    size_t i;
    for (i = 0; i < sizeof mms__gguf_ttypes / sizeof mms__gguf_ttypes[0]; i++)
        if (mms__gguf_ttypes[i].id == id) return &mms__gguf_ttypes[i];
    return NULL;
}

MMS_API enum mms_type mms_gguf_type_to_mms(uint32_t ggml_type) {
    const struct mms__gguf_ttype *t = mms__gguf_ttype_find(ggml_type);
    return t ? t->type : MMS_TYPE_INVALID;
}

MMS_API int mms_gguf_type_from_mms(enum mms_type type) {
    size_t i;
    if (type == MMS_TYPE_INVALID) return -1;
    for (i = 0; i < sizeof mms__gguf_ttypes / sizeof mms__gguf_ttypes[0]; i++)
        if (mms__gguf_ttypes[i].type == type) return (int)mms__gguf_ttypes[i].id;
    return -1;
}

/* Value types: names for messages and the size of the fixed-size ones (0: string, array). */
static const char *mms__gguf_type_name(uint32_t t) {
    static const char *const names[MMS__GGUF_N_VALUE_TYPES] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64" };
    return t < MMS__GGUF_N_VALUE_TYPES ? names[t] : "unknown";
}
static size_t mms__gguf_type_size(uint32_t t) {
    static const unsigned char sizes[MMS__GGUF_N_VALUE_TYPES] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };
    return t < MMS__GGUF_N_VALUE_TYPES ? sizes[t] : 0;
}

static uint16_t mms__gguf_le16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t mms__gguf_le32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t mms__gguf_le64(const uint8_t *p) { return (uint64_t)mms__gguf_le32(p) | ((uint64_t)mms__gguf_le32(p + 4) << 32); }

static bool mms__gguf_is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

/* Keys and names may hold any bytes: messages show them escaped and cut short. */
static const char *mms__gguf_quote(const uint8_t *p, size_t n, char *buf, size_t size) {
    size_t i, o = 0;
    for (i = 0; i < n && o + 8 < size; i++) {
        if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\') buf[o++] = (char)p[i];
        else o += (size_t)snprintf(buf + o, size - o, "\\x%02x", p[i]);
    }
    if (i < n) { buf[o++] = '.'; buf[o++] = '.'; buf[o++] = '.'; }
    buf[o] = '\0';
    return buf;
}

struct mms__gguf_kv {
    size_t             at;        /* where the entry starts, for messages */
    size_t             key_pos, key_len;
    enum mms_gguf_type type;
    enum mms_gguf_type arr_type;  /* arrays only */
    uint64_t           n;         /* array elements */
    size_t             val_pos;   /* scalar: the value; string: its length field; array: the first element */
    size_t             raw_pos, raw_size;  /* the value as encoded after the type field, for copying */
    size_t            *str_pos;   /* string arrays: each element's length field */
    const char        *key;       /* NUL-terminated copy in the pool */
};

struct mms__gguf_tensor {
    size_t        at, name_pos, name_len;
    const char   *name;           /* NUL-terminated copy in the pool */
    uint32_t      ggml_type;
    enum mms_type type;
    int           n_dims;
    int64_t       ne[MMS_MAX_DIMS];
    uint64_t      offset, size;
};

/* Open addressing over entry indices (stored + 1, 0 = empty), keyed by the name's bytes. The hash
   is seeded per table so that a file cannot be crafted to make every key collide. */
struct mms__gguf_index { int64_t *slots; size_t mask; uint64_t seed; };

struct mms_gguf {
    struct mms__mapping      map;       /* files only */
    void                    *owned;     /* memory the handle frees (mms__gguf_open_owned) */
    const uint8_t           *base;
    size_t                   size;
    char                    *path;      /* NULL for memory */
    char                    *where;     /* "gguf 'path'" or "gguf memory": how messages name it */
    uint32_t                 version;
    size_t                   alignment;
    int64_t                  n_kv, n_tensors;
    struct mms__gguf_kv     *kv;
    struct mms__gguf_tensor *tensors;
    size_t                   data_pos;  /* the data section */
    char                    *pool;      /* NUL-terminated keys and names */
    struct mms__gguf_index   keys, names;
};

static uint64_t mms__gguf_hash(const uint8_t *p, size_t n, uint64_t seed) {
    uint64_t h = 1469598103934665603ULL ^ seed;   /* FNV-1a */
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return mms__hash64(h);   /* FNV's low bits, which the table uses, mix poorly on their own */
}

static bool mms__gguf_index_init(struct mms__gguf_index *ix, int64_t n) {
    size_t cap = 8;
    while (cap < (size_t)n * 2) cap *= 2;   /* n is bounded by the file length, so this ends */
    if (cap > SIZE_MAX / sizeof *ix->slots) return false;
    ix->slots = (int64_t *)MMS_MALLOC(cap * sizeof *ix->slots);
    if (!ix->slots) return false;
    memset(ix->slots, 0, cap * sizeof *ix->slots);
    ix->mask = cap - 1;
    ix->seed = mms__hash64((uint64_t)(uintptr_t)ix ^ (uint64_t)mms_time_us());
    return true;
}

static void mms__gguf_entry_name(const struct mms_gguf *g, bool tensor, int64_t i, size_t *pos, size_t *len) {
    if (tensor) { *pos = g->tensors[i].name_pos; *len = g->tensors[i].name_len; }
    else        { *pos = g->kv[i].key_pos;       *len = g->kv[i].key_len; }
}

/* The index of the entry named by exactly these bytes, or -1; *slot gets where it would go. */
static int64_t mms__gguf_index_find(const struct mms_gguf *g, const struct mms__gguf_index *ix, bool tensor,
                                    const uint8_t *p, size_t n, size_t *slot) {
    size_t s;
    if (!ix->slots) return -1;
    for (s = (size_t)mms__gguf_hash(p, n, ix->seed) & ix->mask; ix->slots[s] != 0; s = (s + 1) & ix->mask) {
        size_t pos, len;
        mms__gguf_entry_name(g, tensor, ix->slots[s] - 1, &pos, &len);
        if (len == n && (n == 0 || memcmp(g->base + pos, p, n) == 0)) break;
    }
    if (slot) *slot = s;
    return ix->slots[s] - 1;
}

/* -- parsing -- */

struct mms__gguf_parser {
    struct mms_gguf *g;
    size_t           pos;
};

static enum mms_status mms__gguf_fail(const struct mms__gguf_parser *ps, size_t at, const char *fmt, ...) MMS_PRINTF(3, 4);
static enum mms_status mms__gguf_fail(const struct mms__gguf_parser *ps, size_t at, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return mms_set_error(MMS_ERR_FORMAT, "%s: %s (at byte offset %zu)", ps->g->where, msg, at);
}

static size_t mms__gguf_left(const struct mms__gguf_parser *ps) { return ps->g->size - ps->pos; }

static enum mms_status mms__gguf_need(const struct mms__gguf_parser *ps, uint64_t n, const char *what) {
    if (n > mms__gguf_left(ps))
        return mms__gguf_fail(ps, ps->pos, "truncated: %s needs %llu bytes, %zu left", what, (unsigned long long)n, mms__gguf_left(ps));
    return MMS_OK;
}

static enum mms_status mms__gguf_u32(struct mms__gguf_parser *ps, const char *what, uint32_t *out) {
    enum mms_status st = mms__gguf_need(ps, 4, what);
    if (st != MMS_OK) return st;
    *out = mms__gguf_le32(ps->g->base + ps->pos);
    ps->pos += 4;
    return MMS_OK;
}

static enum mms_status mms__gguf_u64(struct mms__gguf_parser *ps, const char *what, uint64_t *out) {
    enum mms_status st = mms__gguf_need(ps, 8, what);
    if (st != MMS_OK) return st;
    *out = mms__gguf_le64(ps->g->base + ps->pos);
    ps->pos += 8;
    return MMS_OK;
}

/* A gguf-string of at most max bytes: *pos gets where its bytes start. */
static enum mms_status mms__gguf_str(struct mms__gguf_parser *ps, const char *what, uint64_t max, size_t *pos, size_t *len) {
    size_t at = ps->pos;
    uint64_t n;
    enum mms_status st = mms__gguf_u64(ps, what, &n);
    if (st != MMS_OK) return st;
    if (n > max) return mms__gguf_fail(ps, at, "%s of %llu bytes is longer than %llu", what, (unsigned long long)n, (unsigned long long)max);
    if (n > mms__gguf_left(ps))
        return mms__gguf_fail(ps, at, "truncated: %s of %llu bytes, %zu left", what, (unsigned long long)n, mms__gguf_left(ps));
    *pos = ps->pos;
    *len = (size_t)n;
    ps->pos += (size_t)n;
    return MMS_OK;
}

static enum mms_status mms__gguf_parse_kv(struct mms__gguf_parser *ps, int64_t i) {
    struct mms_gguf *g = ps->g;
    struct mms__gguf_kv *kv = &g->kv[i];
    char q[200];
    uint32_t type, elem;
    size_t slot, tpos, tmp_pos, tmp_len;
    int64_t dup;
    enum mms_status st;

    kv->at = ps->pos;
    if ((st = mms__gguf_str(ps, "key", MMS__GGUF_MAX_KEY, &kv->key_pos, &kv->key_len)) != MMS_OK) return st;
    mms__gguf_quote(g->base + kv->key_pos, kv->key_len, q, sizeof q);
    dup = mms__gguf_index_find(g, &g->keys, false, g->base + kv->key_pos, kv->key_len, &slot);
    if (dup >= 0) return mms__gguf_fail(ps, kv->at, "duplicate key '%s' (first at byte offset %zu)", q, g->kv[dup].at);
    g->keys.slots[slot] = i + 1;

    tpos = ps->pos;
    if ((st = mms__gguf_u32(ps, "value type", &type)) != MMS_OK) return st;
    if (type >= MMS__GGUF_N_VALUE_TYPES) return mms__gguf_fail(ps, tpos, "unknown value type %u of key '%s'", type, q);
    kv->type = (enum mms_gguf_type)type;
    kv->raw_pos = ps->pos;
    kv->n = 1;

    if (type == MMS_GGUF_TYPE_STRING) {
        kv->val_pos = ps->pos;
        if ((st = mms__gguf_str(ps, "string value", UINT64_MAX, &tmp_pos, &tmp_len)) != MMS_OK) return st;
    } else if (type == MMS_GGUF_TYPE_ARRAY) {
        size_t count_at;
        uint64_t n;
        if ((st = mms__gguf_u32(ps, "array element type", &elem)) != MMS_OK) return st;
        if (elem == MMS_GGUF_TYPE_ARRAY)
            return mms__gguf_fail(ps, tpos + 4, "key '%s' is an array of arrays, which is not supported", q);
        if (elem >= MMS__GGUF_N_VALUE_TYPES) return mms__gguf_fail(ps, tpos + 4, "unknown array element type %u of key '%s'", elem, q);
        kv->arr_type = (enum mms_gguf_type)elem;
        count_at = ps->pos;
        if ((st = mms__gguf_u64(ps, "array count", &n)) != MMS_OK) return st;
        kv->n = n;
        kv->val_pos = ps->pos;
        if (elem == MMS_GGUF_TYPE_STRING) {
            uint64_t k;
            /* every element has at least its 8-byte length: bounds the table before allocating it */
            if (n > mms__gguf_left(ps) / 8)
                return mms__gguf_fail(ps, count_at, "array count %llu of key '%s' does not fit in the %zu bytes left",
                                      (unsigned long long)n, q, mms__gguf_left(ps));
            if (n > 0) {
                kv->str_pos = (size_t *)MMS_MALLOC((size_t)n * sizeof *kv->str_pos);
                if (!kv->str_pos) return mms_set_error(MMS_ERR_OOM, "%s: out of memory for string array '%s'", g->where, q);
            }
            for (k = 0; k < n; k++) {
                kv->str_pos[k] = ps->pos;
                if ((st = mms__gguf_str(ps, "string array element", UINT64_MAX, &tmp_pos, &tmp_len)) != MMS_OK) return st;
            }
        } else {
            size_t es = mms__gguf_type_size(elem);
            if (n > mms__gguf_left(ps) / es)
                return mms__gguf_fail(ps, count_at, "array count %llu of key '%s' (%s) does not fit in the %zu bytes left",
                                      (unsigned long long)n, q, mms__gguf_type_name(elem), mms__gguf_left(ps));
            if (elem == MMS_GGUF_TYPE_BOOL) {
                size_t k;
                for (k = 0; k < (size_t)n; k++)
                    if (g->base[ps->pos + k] > 1)
                        return mms__gguf_fail(ps, ps->pos + k, "bool value %u in array '%s' (must be 0 or 1)", g->base[ps->pos + k], q);
            }
            ps->pos += (size_t)n * es;
        }
    } else {
        size_t s = mms__gguf_type_size(type);
        kv->val_pos = ps->pos;
        if ((st = mms__gguf_need(ps, s, "value")) != MMS_OK) return st;
        if (type == MMS_GGUF_TYPE_BOOL && g->base[ps->pos] > 1)
            return mms__gguf_fail(ps, ps->pos, "bool value %u of key '%s' (must be 0 or 1)", g->base[ps->pos], q);
        ps->pos += s;
    }
    kv->raw_size = ps->pos - kv->raw_pos;
    return MMS_OK;
}

static enum mms_status mms__gguf_parse_tensor(struct mms__gguf_parser *ps, int64_t i) {
    struct mms_gguf *g = ps->g;
    struct mms__gguf_tensor *t = &g->tensors[i];
    const struct mms__gguf_ttype *tt;
    char q[200];
    uint32_t n_dims;
    uint64_t rows = 1, elems = 1, row_bytes;
    size_t slot, at;
    int64_t dup;
    int d;
    enum mms_status st;

    t->at = ps->pos;
    if ((st = mms__gguf_str(ps, "tensor name", MMS_MAX_NAME - 1, &t->name_pos, &t->name_len)) != MMS_OK) return st;
    mms__gguf_quote(g->base + t->name_pos, t->name_len, q, sizeof q);
    dup = mms__gguf_index_find(g, &g->names, true, g->base + t->name_pos, t->name_len, &slot);
    if (dup >= 0) return mms__gguf_fail(ps, t->at, "duplicate tensor name '%s' (first at byte offset %zu)", q, g->tensors[dup].at);
    g->names.slots[slot] = i + 1;

    at = ps->pos;
    if ((st = mms__gguf_u32(ps, "n_dims", &n_dims)) != MMS_OK) return st;
    if (n_dims < 1 || n_dims > MMS_MAX_DIMS)
        return mms__gguf_fail(ps, at, "tensor '%s' has %u dimensions (must be 1 to %d)", q, n_dims, MMS_MAX_DIMS);
    t->n_dims = (int)n_dims;
    for (d = 0; d < MMS_MAX_DIMS; d++) t->ne[d] = 1;
    for (d = 0; d < (int)n_dims; d++) {
        uint64_t ne, f;
        at = ps->pos;
        if ((st = mms__gguf_u64(ps, "ne", &ne)) != MMS_OK) return st;
        if (ne > (uint64_t)INT64_MAX)
            return mms__gguf_fail(ps, at, "ne[%d] = %llu of tensor '%s' is out of range", d, (unsigned long long)ne, q);
        /* zero counts as one here so that no product of the dimensions can overflow downstream */
        f = ne ? ne : 1;
        if (elems > (uint64_t)INT64_MAX / f)
            return mms__gguf_fail(ps, at, "tensor '%s' has too many elements (ne[%d] = %llu overflows)", q, d, (unsigned long long)ne);
        elems *= f;
        t->ne[d] = (int64_t)ne;
        if (d > 0) rows *= ne;   /* <= elems, cannot overflow */
    }

    at = ps->pos;
    if ((st = mms__gguf_u32(ps, "tensor type", &t->ggml_type)) != MMS_OK) return st;
    tt = mms__gguf_ttype_find(t->ggml_type);
    if (!tt) return mms__gguf_fail(ps, at, "unsupported tensor type %u for tensor '%s'", t->ggml_type, q);
    t->type = tt->type;
    if ((uint64_t)t->ne[0] % tt->blck != 0)
        return mms__gguf_fail(ps, at, "ne[0] = %lld of tensor '%s' is not a multiple of the block size %u of %s",
                              (long long)t->ne[0], q, tt->blck, tt->name);
    row_bytes = (uint64_t)t->ne[0] / tt->blck;
    if (row_bytes > UINT64_MAX / tt->bytes || (rows != 0 && row_bytes * tt->bytes > UINT64_MAX / rows))
        return mms__gguf_fail(ps, at, "the size of tensor '%s' overflows", q);
    t->size = row_bytes * tt->bytes * rows;

    at = ps->pos;
    if ((st = mms__gguf_u64(ps, "tensor offset", &t->offset)) != MMS_OK) return st;
    if (t->offset % g->alignment != 0)
        return mms__gguf_fail(ps, at, "offset %llu of tensor '%s' is not a multiple of the alignment %zu",
                              (unsigned long long)t->offset, q, g->alignment);
    return MMS_OK;
}

static int mms__gguf_cmp_offset(const void *a, const void *b) {
    const struct mms__gguf_tensor *x = *(const struct mms__gguf_tensor *const *)a, *y = *(const struct mms__gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset ? 1 : 0;
}

/* Every tensor's bytes inside the data section, and no two sharing a byte. */
static enum mms_status mms__gguf_check_ranges(struct mms__gguf_parser *ps) {
    struct mms_gguf *g = ps->g;
    size_t data_len = g->size - g->data_pos, n = 0;
    struct mms__gguf_tensor **order;
    char q[200], q2[200];
    int64_t i;
    for (i = 0; i < g->n_tensors; i++) {
        const struct mms__gguf_tensor *t = &g->tensors[i];
        if (t->offset > data_len || t->size > data_len - t->offset)
            return mms__gguf_fail(ps, t->at, "data of tensor '%s' (%llu bytes at data offset %llu) runs past the end of the file: "
                                  "the data section at byte %zu has %zu bytes",
                                  mms__gguf_quote(g->base + t->name_pos, t->name_len, q, sizeof q),
                                  (unsigned long long)t->size, (unsigned long long)t->offset, g->data_pos, data_len);
    }
    if (g->n_tensors < 2) return MMS_OK;
    order = (struct mms__gguf_tensor **)MMS_MALLOC((size_t)g->n_tensors * sizeof *order);
    if (!order) return mms_set_error(MMS_ERR_OOM, "%s: out of memory for %lld tensors", g->where, (long long)g->n_tensors);
    for (i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].size > 0) order[n++] = &g->tensors[i];   /* empty ranges share no byte */
    qsort(order, n, sizeof *order, mms__gguf_cmp_offset);
    for (i = 1; i < (int64_t)n; i++) {
        const struct mms__gguf_tensor *a = order[i - 1], *b = order[i];
        if (a->offset + a->size > b->offset) {
            enum mms_status st = mms__gguf_fail(ps, b->at, "tensors '%s' (%llu bytes at data offset %llu) and '%s' (at data offset %llu) overlap",
                                                mms__gguf_quote(g->base + a->name_pos, a->name_len, q, sizeof q),
                                                (unsigned long long)a->size, (unsigned long long)a->offset,
                                                mms__gguf_quote(g->base + b->name_pos, b->name_len, q2, sizeof q2),
                                                (unsigned long long)b->offset);
            MMS_FREE(order);
            return st;
        }
    }
    MMS_FREE(order);
    return MMS_OK;
}

/* NUL-terminated copies of every key and name, in one block (at most the file's length plus one
   byte per entry). */
static enum mms_status mms__gguf_build_pool(struct mms_gguf *g) {
    size_t total = 1, o = 0;
    int64_t i;
    for (i = 0; i < g->n_kv; i++) total += g->kv[i].key_len + 1;
    for (i = 0; i < g->n_tensors; i++) total += g->tensors[i].name_len + 1;
    g->pool = (char *)MMS_MALLOC(total);
    if (!g->pool) return mms_set_error(MMS_ERR_OOM, "%s: out of memory for names (%zu bytes)", g->where, total);
    for (i = 0; i < g->n_kv; i++) {
        struct mms__gguf_kv *kv = &g->kv[i];
        if (kv->key_len) memcpy(g->pool + o, g->base + kv->key_pos, kv->key_len);
        g->pool[o + kv->key_len] = '\0';
        kv->key = g->pool + o;
        o += kv->key_len + 1;
    }
    for (i = 0; i < g->n_tensors; i++) {
        struct mms__gguf_tensor *t = &g->tensors[i];
        if (t->name_len) memcpy(g->pool + o, g->base + t->name_pos, t->name_len);
        g->pool[o + t->name_len] = '\0';
        t->name = g->pool + o;
        o += t->name_len + 1;
    }
    return MMS_OK;
}

static void *mms__gguf_calloc(size_t n, size_t size) {
    void *p;
    if (n == 0) n = 1;
    if (n > SIZE_MAX / size) return NULL;
    p = MMS_MALLOC(n * size);
    if (p) memset(p, 0, n * size);
    return p;
}

static enum mms_status mms__gguf_parse(struct mms_gguf *g) {
    struct mms__gguf_parser ps;
    uint32_t version;
    uint64_t n_tensors, n_kv;
    size_t at;
    int64_t i;
    enum mms_status st;
    ps.g = g;
    ps.pos = 0;

    if ((st = mms__gguf_need(&ps, 4, "magic")) != MMS_OK) return st;
    if (memcmp(g->base, "GGUF", 4) != 0)
        return mms__gguf_fail(&ps, 0, "bad magic %02x %02x %02x %02x (not a GGUF file)", g->base[0], g->base[1], g->base[2], g->base[3]);
    ps.pos = 4;
    if ((st = mms__gguf_u32(&ps, "version", &version)) != MMS_OK) return st;
    if (version != 2 && version != 3) {
        uint32_t swapped = (version >> 24) | ((version >> 8) & 0xff00) | ((version << 8) & 0xff0000) | (version << 24);
        if (swapped == 2 || swapped == 3)
            return mms__gguf_fail(&ps, 4, "version %u read as %u: big-endian GGUF files are not supported", swapped, version);
        return mms__gguf_fail(&ps, 4, "unsupported GGUF version %u (2 and 3 are read)", version);
    }
    g->version = version;

    at = ps.pos;
    if ((st = mms__gguf_u64(&ps, "n_tensors", &n_tensors)) != MMS_OK) return st;
    if ((st = mms__gguf_u64(&ps, "n_kv", &n_kv)) != MMS_OK) return st;
    if (n_kv > mms__gguf_left(&ps) / MMS__GGUF_MIN_KV_BYTES)
        return mms__gguf_fail(&ps, at + 8, "n_kv %llu cannot fit in the %zu bytes left (an entry takes at least %d)",
                              (unsigned long long)n_kv, mms__gguf_left(&ps), MMS__GGUF_MIN_KV_BYTES);
    if (n_tensors > (mms__gguf_left(&ps) - n_kv * MMS__GGUF_MIN_KV_BYTES) / MMS__GGUF_MIN_TENSOR_BYTES)
        return mms__gguf_fail(&ps, at, "n_tensors %llu cannot fit in the %zu bytes left after %llu keys (a tensor info takes at least %d)",
                              (unsigned long long)n_tensors, mms__gguf_left(&ps), (unsigned long long)n_kv, MMS__GGUF_MIN_TENSOR_BYTES);
    g->n_kv = (int64_t)n_kv;
    g->n_tensors = (int64_t)n_tensors;
    g->kv = (struct mms__gguf_kv *)mms__gguf_calloc((size_t)n_kv, sizeof *g->kv);
    g->tensors = (struct mms__gguf_tensor *)mms__gguf_calloc((size_t)n_tensors, sizeof *g->tensors);
    if (!g->kv || !g->tensors || !mms__gguf_index_init(&g->keys, g->n_kv) || !mms__gguf_index_init(&g->names, g->n_tensors))
        return mms_set_error(MMS_ERR_OOM, "%s: out of memory for %llu keys and %llu tensors", g->where,
                             (unsigned long long)n_kv, (unsigned long long)n_tensors);

    for (i = 0; i < g->n_kv; i++)
        if ((st = mms__gguf_parse_kv(&ps, i)) != MMS_OK) return st;

    g->alignment = MMS__GGUF_DEFAULT_ALIGNMENT;
    i = mms__gguf_index_find(g, &g->keys, false, (const uint8_t *)"general.alignment", 17, NULL);
    if (i >= 0) {
        const struct mms__gguf_kv *kv = &g->kv[i];
        uint32_t a;
        if (kv->type != MMS_GGUF_TYPE_UINT32)
            return mms__gguf_fail(&ps, kv->at, "general.alignment has type %s (must be u32)", mms__gguf_type_name(kv->type));
        a = mms__gguf_le32(g->base + kv->val_pos);
        if (!mms__gguf_is_pow2(a))
            return mms__gguf_fail(&ps, kv->val_pos, "general.alignment %u is not a non-zero power of two", a);
        g->alignment = a;
    }

    for (i = 0; i < g->n_tensors; i++)
        if ((st = mms__gguf_parse_tensor(&ps, i)) != MMS_OK) return st;

    /* the data section starts at the next multiple of the alignment; a file without tensors may
       end before it (nothing would be read there) */
    {
        size_t pad = (g->alignment - ps.pos % g->alignment) % g->alignment;
        if (pad > mms__gguf_left(&ps)) {
            if (g->n_tensors > 0)
                return mms__gguf_fail(&ps, ps.pos, "truncated: the data section would start at byte %llu (aligned to %zu), past the end of the file (%zu bytes)",
                                      (unsigned long long)ps.pos + pad, g->alignment, g->size);
            pad = mms__gguf_left(&ps);
        }
        g->data_pos = ps.pos + pad;
    }
    if ((st = mms__gguf_check_ranges(&ps)) != MMS_OK) return st;
    return mms__gguf_build_pool(g);
}

/* A zeroed handle named for messages as "gguf 'path'", or "gguf memory" when path is NULL. */
static struct mms_gguf *mms__gguf_new(const char *path) {
    struct mms_gguf *g = (struct mms_gguf *)MMS_MALLOC(sizeof *g);
    size_t n = path ? strlen(path) : 0;
    if (g) {
        memset(g, 0, sizeof *g);
        g->where = (char *)MMS_MALLOC(n + 16);
        if (path) g->path = (char *)MMS_MALLOC(n + 1);
    }
    if (!g || !g->where || (path && !g->path)) {
        mms_gguf_close(g);
        mms_set_error(MMS_ERR_OOM, "gguf: out of memory opening %s", path ? path : "memory");
        return NULL;
    }
    if (path) {
        memcpy(g->path, path, n + 1);
        memcpy(g->where, "gguf '", 6);
        memcpy(g->where + 6, path, n);
        memcpy(g->where + 6 + n, "'", 2);
    } else {
        memcpy(g->where, "gguf memory", 12);
    }
    return g;
}

MMS_API void mms_gguf_close(struct mms_gguf *g) {
    int64_t i;
    if (!g) return;
    if (g->kv) for (i = 0; i < g->n_kv; i++) MMS_FREE(g->kv[i].str_pos);
    MMS_FREE(g->kv);
    MMS_FREE(g->tensors);
    MMS_FREE(g->keys.slots);
    MMS_FREE(g->names.slots);
    MMS_FREE(g->pool);
    MMS_FREE(g->path);
    MMS_FREE(g->where);
    MMS_FREE(g->owned);
    mms__unmap_file(&g->map);
    MMS_FREE(g);
}

static struct mms_gguf *mms__gguf_finish_open(struct mms_gguf *g) {
    if (mms__gguf_parse(g) != MMS_OK) {
        mms_gguf_close(g);
        return NULL;
    }
    return g;
}

MMS_API struct mms_gguf *mms_gguf_open_memory(const void *data, size_t size) {
    struct mms_gguf *g;
    if (!data && size > 0) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_gguf_open_memory: data is NULL"); return NULL; }
    if (!(g = mms__gguf_new(NULL))) return NULL;
    g->base = (const uint8_t *)data;
    g->size = size;
    return mms__gguf_finish_open(g);
}

/* A GGUF in memory that the handle owns (MMS_MALLOC'd; freed on close, or now on error). */
MMS__MAYBE_UNUSED static struct mms_gguf *mms__gguf_open_owned(void *data, size_t size) {
    struct mms_gguf *g;
    if (!(g = mms__gguf_new(NULL))) { MMS_FREE(data); return NULL; }
    g->owned = data;
    g->base = (const uint8_t *)data;
    g->size = size;
    return mms__gguf_finish_open(g);
}

MMS_API struct mms_gguf *mms_gguf_open(const char *path) {
    struct mms_gguf *g;
    if (!path) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_gguf_open: path is NULL"); return NULL; }
    if (!(g = mms__gguf_new(path))) return NULL;
    if (mms__map_file(path, &g->map) != MMS_OK) {
        mms_gguf_close(g);
        return NULL;
    }
    g->base = (const uint8_t *)g->map.addr;
    g->size = g->map.size;
    return mms__gguf_finish_open(g);
}

/* -- the handle -- */

MMS_API uint32_t    mms_gguf_get_version(const struct mms_gguf *g)   { return g ? g->version : 0; }
MMS_API size_t      mms_gguf_get_alignment(const struct mms_gguf *g) { return g ? g->alignment : 0; }
MMS_API const char *mms_gguf_get_path(const struct mms_gguf *g)      { return g && g->path ? g->path : ""; }
MMS_API int64_t     mms_gguf_get_n_kv(const struct mms_gguf *g)      { return g ? g->n_kv : 0; }
MMS_API int64_t     mms_gguf_get_n_tensors(const struct mms_gguf *g) { return g ? g->n_tensors : 0; }

MMS_API int64_t mms_gguf_find_key(const struct mms_gguf *g, const char *key) {
    if (!g || !key) return -1;
    return mms__gguf_index_find(g, &g->keys, false, (const uint8_t *)key, strlen(key), NULL);
}

MMS_API int64_t mms_gguf_find_tensor(const struct mms_gguf *g, const char *name) {
    if (!g || !name) return -1;
    return mms__gguf_index_find(g, &g->names, true, (const uint8_t *)name, strlen(name), NULL);
}

static const struct mms__gguf_kv *mms__gguf_kv_at(const struct mms_gguf *g, int64_t i, const char *fn) {
    if (!g) { mms_set_error(MMS_ERR_INVALID_ARG, "%s: gguf is NULL", fn); return NULL; }
    if (i < 0 || i >= g->n_kv) {
        mms_set_error(MMS_ERR_INVALID_ARG, "%s: %s: key index %lld out of range (%lld keys)", fn, g->where, (long long)i, (long long)g->n_kv);
        return NULL;
    }
    return &g->kv[i];
}

MMS_API const char *mms_gguf_get_key(const struct mms_gguf *g, int64_t i) {
    const struct mms__gguf_kv *kv = mms__gguf_kv_at(g, i, "mms_gguf_get_key");
    return kv ? kv->key : NULL;
}

MMS_API enum mms_gguf_type mms_gguf_get_kv_type(const struct mms_gguf *g, int64_t i) {
    const struct mms__gguf_kv *kv = mms__gguf_kv_at(g, i, "mms_gguf_get_kv_type");
    return kv ? kv->type : MMS_GGUF_TYPE_NONE;
}

MMS_API enum mms_gguf_type mms_gguf_get_arr_type(const struct mms_gguf *g, int64_t i) {
    const struct mms__gguf_kv *kv = mms__gguf_kv_at(g, i, "mms_gguf_get_arr_type");
    if (!kv) return MMS_GGUF_TYPE_NONE;
    if (kv->type != MMS_GGUF_TYPE_ARRAY) {
        mms_set_error(MMS_ERR_INVALID_ARG, "mms_gguf_get_arr_type: %s: key '%s' has type %s, not array", g->where, kv->key, mms__gguf_type_name(kv->type));
        return MMS_GGUF_TYPE_NONE;
    }
    return kv->arr_type;
}

MMS_API int64_t mms_gguf_get_arr_n(const struct mms_gguf *g, int64_t i) {
    const struct mms__gguf_kv *kv = mms__gguf_kv_at(g, i, "mms_gguf_get_arr_n");
    if (!kv) return -1;
    if (kv->type != MMS_GGUF_TYPE_ARRAY) {
        mms_set_error(MMS_ERR_INVALID_ARG, "mms_gguf_get_arr_n: %s: key '%s' has type %s, not array", g->where, kv->key, mms__gguf_type_name(kv->type));
        return -1;
    }
    return (int64_t)kv->n;   /* bounded by the file length */
}

/* -- typed getters -- */

/* The key's entry, or NULL after raising MMS_ERR_INVALID_ARG. */
static const struct mms__gguf_kv *mms__gguf_lookup(const struct mms_gguf *g, const char *key, const char *fn) {
    int64_t i;
    if (!g || !key) { mms_set_error(MMS_ERR_INVALID_ARG, "%s: %s is NULL", fn, g ? "key" : "gguf"); return NULL; }
    i = mms_gguf_find_key(g, key);
    if (i < 0) { mms__error_quiet(MMS_ERR_INVALID_ARG, "%s: %s: key '%s' not found", fn, g->where, key); return NULL; }   /* a question: absence may be fine */
    return &g->kv[i];
}

static enum mms_status mms__gguf_wrong_type(const struct mms_gguf *g, const struct mms__gguf_kv *kv, const char *fn, const char *wanted) {
    if (kv->type == MMS_GGUF_TYPE_ARRAY)
        return mms_set_error(MMS_ERR_FORMAT, "%s: %s: key '%s' has type array of %s, wanted %s", fn, g->where, kv->key,
                             mms__gguf_type_name(kv->arr_type), wanted);
    return mms_set_error(MMS_ERR_FORMAT, "%s: %s: key '%s' has type %s, wanted %s", fn, g->where, kv->key, mms__gguf_type_name(kv->type), wanted);
}

/* An integer of type t at p, as a sign and a value: *neg with *sv, or *uv. False for non-integers. */
static bool mms__gguf_int(const uint8_t *p, uint32_t t, bool *neg, int64_t *sv, uint64_t *uv) {
    int64_t s;
    switch (t) {
        case MMS_GGUF_TYPE_UINT8:  *neg = false; *uv = p[0]; return true;
        case MMS_GGUF_TYPE_UINT16: *neg = false; *uv = mms__gguf_le16(p); return true;
        case MMS_GGUF_TYPE_UINT32: *neg = false; *uv = mms__gguf_le32(p); return true;
        case MMS_GGUF_TYPE_UINT64: *neg = false; *uv = mms__gguf_le64(p); return true;
        case MMS_GGUF_TYPE_INT8:   s = (int8_t)p[0]; break;
        case MMS_GGUF_TYPE_INT16:  s = (int16_t)mms__gguf_le16(p); break;
        case MMS_GGUF_TYPE_INT32:  s = (int32_t)mms__gguf_le32(p); break;
        case MMS_GGUF_TYPE_INT64:  s = (int64_t)mms__gguf_le64(p); break;
        default: return false;
    }
    *neg = s < 0;
    *sv = s;
    *uv = (uint64_t)s;
    return true;
}

/* A float of type t at p (f32 or f64). False for other types. */
static bool mms__gguf_float(const uint8_t *p, uint32_t t, double *out) {
    if (t == MMS_GGUF_TYPE_FLOAT32) {
        uint32_t b = mms__gguf_le32(p);
        float f;
        memcpy(&f, &b, sizeof f);
        *out = f;
        return true;
    }
    if (t == MMS_GGUF_TYPE_FLOAT64) {
        uint64_t b = mms__gguf_le64(p);
        memcpy(out, &b, sizeof *out);
        return true;
    }
    return false;
}

static bool mms__gguf_fits_f32(double v) { return v != v || v == HUGE_VAL || v == -HUGE_VAL || (v <= FLT_MAX && v >= -FLT_MAX); }

static enum mms_status mms__gguf_out_of_range(const struct mms_gguf *g, const struct mms__gguf_kv *kv, const char *fn, int64_t elem,
                                              bool neg, int64_t sv, uint64_t uv, uint32_t from, const char *to) {
    char val[32], idx[32] = "";
    if (neg) snprintf(val, sizeof val, "%lld", (long long)sv);
    else     snprintf(val, sizeof val, "%llu", (unsigned long long)uv);
    if (elem >= 0) snprintf(idx, sizeof idx, " element %lld", (long long)elem);
    return mms_set_error(MMS_ERR_FORMAT, "%s: %s: key '%s'%s: %s value %s does not fit in %s", fn, g->where, kv->key, idx,
                         mms__gguf_type_name(from), val, to);
}

MMS_API enum mms_status mms_gguf_get_u32(const struct mms_gguf *g, const char *key, uint32_t *out) {
    const struct mms__gguf_kv *kv = mms__gguf_lookup(g, key, "mms_gguf_get_u32");
    bool neg; int64_t sv = 0; uint64_t uv = 0;
    if (!kv) return MMS_ERR_INVALID_ARG;
    if (kv->type == MMS_GGUF_TYPE_ARRAY || !mms__gguf_int(g->base + kv->val_pos, kv->type, &neg, &sv, &uv))
        return mms__gguf_wrong_type(g, kv, "mms_gguf_get_u32", "an integer");
    if (neg || uv > UINT32_MAX) return mms__gguf_out_of_range(g, kv, "mms_gguf_get_u32", -1, neg, sv, uv, kv->type, "u32");
    if (out) *out = (uint32_t)uv;
    return MMS_OK;
}

MMS_API enum mms_status mms_gguf_get_i32(const struct mms_gguf *g, const char *key, int32_t *out) {
    const struct mms__gguf_kv *kv = mms__gguf_lookup(g, key, "mms_gguf_get_i32");
    bool neg; int64_t sv = 0; uint64_t uv = 0;
    if (!kv) return MMS_ERR_INVALID_ARG;
    if (kv->type == MMS_GGUF_TYPE_ARRAY || !mms__gguf_int(g->base + kv->val_pos, kv->type, &neg, &sv, &uv))
        return mms__gguf_wrong_type(g, kv, "mms_gguf_get_i32", "an integer");
    if (neg ? sv < INT32_MIN : uv > INT32_MAX) return mms__gguf_out_of_range(g, kv, "mms_gguf_get_i32", -1, neg, sv, uv, kv->type, "i32");
    if (out) *out = neg ? (int32_t)sv : (int32_t)uv;
    return MMS_OK;
}

MMS_API enum mms_status mms_gguf_get_u64(const struct mms_gguf *g, const char *key, uint64_t *out) {
    const struct mms__gguf_kv *kv = mms__gguf_lookup(g, key, "mms_gguf_get_u64");
    bool neg; int64_t sv = 0; uint64_t uv = 0;
    if (!kv) return MMS_ERR_INVALID_ARG;
    if (kv->type == MMS_GGUF_TYPE_ARRAY || !mms__gguf_int(g->base + kv->val_pos, kv->type, &neg, &sv, &uv))
        return mms__gguf_wrong_type(g, kv, "mms_gguf_get_u64", "an integer");
    if (neg) return mms__gguf_out_of_range(g, kv, "mms_gguf_get_u64", -1, neg, sv, uv, kv->type, "u64");
    if (out) *out = uv;
    return MMS_OK;
}

MMS_API enum mms_status mms_gguf_get_f32(const struct mms_gguf *g, const char *key, float *out) {
    const struct mms__gguf_kv *kv = mms__gguf_lookup(g, key, "mms_gguf_get_f32");
    double v;
    if (!kv) return MMS_ERR_INVALID_ARG;
    if (kv->type == MMS_GGUF_TYPE_ARRAY || !mms__gguf_float(g->base + kv->val_pos, kv->type, &v))
        return mms__gguf_wrong_type(g, kv, "mms_gguf_get_f32", "f32 or f64");
    if (!mms__gguf_fits_f32(v))
        return mms_set_error(MMS_ERR_FORMAT, "mms_gguf_get_f32: %s: key '%s': f64 value %g does not fit in f32", g->where, kv->key, v);
    if (out) *out = (float)v;
    return MMS_OK;
}

MMS_API enum mms_status mms_gguf_get_bool(const struct mms_gguf *g, const char *key, bool *out) {
    const struct mms__gguf_kv *kv = mms__gguf_lookup(g, key, "mms_gguf_get_bool");
    if (!kv) return MMS_ERR_INVALID_ARG;
    if (kv->type != MMS_GGUF_TYPE_BOOL) return mms__gguf_wrong_type(g, kv, "mms_gguf_get_bool", "a bool");
    if (out) *out = g->base[kv->val_pos] != 0;
    return MMS_OK;
}

static void mms__gguf_str_at(const struct mms_gguf *g, size_t pos, const char **out, size_t *len) {
    if (out) *out = (const char *)(g->base + pos + 8);
    if (len) *len = (size_t)mms__gguf_le64(g->base + pos);   /* checked against the file when opened */
}

MMS_API enum mms_status mms_gguf_get_str(const struct mms_gguf *g, const char *key, const char **out, size_t *len) {
    const struct mms__gguf_kv *kv = mms__gguf_lookup(g, key, "mms_gguf_get_str");
    if (!kv) return MMS_ERR_INVALID_ARG;
    if (kv->type != MMS_GGUF_TYPE_STRING) return mms__gguf_wrong_type(g, kv, "mms_gguf_get_str", "a string");
    mms__gguf_str_at(g, kv->val_pos, out, len);
    return MMS_OK;
}

/* The array behind key for the array getters, with out/cap checked and *n set. */
static const struct mms__gguf_kv *mms__gguf_array(const struct mms_gguf *g, const char *key, const char *fn, const void *out,
                                                  int64_t cap, int64_t *n) {
    const struct mms__gguf_kv *kv;
    if (cap < 0 || (cap > 0 && !out)) {
        mms_set_error(MMS_ERR_INVALID_ARG, "%s: %s", fn, cap < 0 ? "negative capacity" : "out is NULL with a non-zero capacity");
        return NULL;
    }
    kv = mms__gguf_lookup(g, key, fn);
    if (kv && kv->type == MMS_GGUF_TYPE_ARRAY && n) *n = (int64_t)kv->n;
    return kv;
}

MMS_API enum mms_status mms_gguf_get_arr_i32(const struct mms_gguf *g, const char *key, int32_t *out, int64_t cap, int64_t *n) {
    const char *fn = "mms_gguf_get_arr_i32";
    const struct mms__gguf_kv *kv = mms__gguf_array(g, key, fn, out, cap, n);
    size_t es;
    int64_t i;
    if (!kv) return MMS_ERR_INVALID_ARG;
    es = mms__gguf_type_size(kv->arr_type);
    if (kv->type != MMS_GGUF_TYPE_ARRAY || kv->arr_type == MMS_GGUF_TYPE_BOOL || kv->arr_type == MMS_GGUF_TYPE_FLOAT32 ||
        kv->arr_type == MMS_GGUF_TYPE_FLOAT64 || es == 0)
        return mms__gguf_wrong_type(g, kv, fn, "an array of integers");
    for (i = 0; i < cap && (uint64_t)i < kv->n; i++) {
        bool neg; int64_t sv = 0; uint64_t uv = 0;
        mms__gguf_int(g->base + kv->val_pos + (size_t)i * es, kv->arr_type, &neg, &sv, &uv);
        if (neg ? sv < INT32_MIN : uv > INT32_MAX) return mms__gguf_out_of_range(g, kv, fn, i, neg, sv, uv, kv->arr_type, "i32");
        out[i] = neg ? (int32_t)sv : (int32_t)uv;
    }
    return MMS_OK;
}

MMS_API enum mms_status mms_gguf_get_arr_f32(const struct mms_gguf *g, const char *key, float *out, int64_t cap, int64_t *n) {
    const char *fn = "mms_gguf_get_arr_f32";
    const struct mms__gguf_kv *kv = mms__gguf_array(g, key, fn, out, cap, n);
    size_t es;
    int64_t i;
    if (!kv) return MMS_ERR_INVALID_ARG;
    if (kv->type != MMS_GGUF_TYPE_ARRAY || (kv->arr_type != MMS_GGUF_TYPE_FLOAT32 && kv->arr_type != MMS_GGUF_TYPE_FLOAT64))
        return mms__gguf_wrong_type(g, kv, fn, "an array of f32 or f64");
    es = mms__gguf_type_size(kv->arr_type);
    for (i = 0; i < cap && (uint64_t)i < kv->n; i++) {
        double v = 0;
        mms__gguf_float(g->base + kv->val_pos + (size_t)i * es, kv->arr_type, &v);
        if (!mms__gguf_fits_f32(v))
            return mms_set_error(MMS_ERR_FORMAT, "%s: %s: key '%s' element %lld: f64 value %g does not fit in f32", fn, g->where, kv->key, (long long)i, v);
        out[i] = (float)v;
    }
    return MMS_OK;
}

MMS_API enum mms_status mms_gguf_get_arr_str(const struct mms_gguf *g, const char *key, int64_t i, const char **out, size_t *len) {
    const char *fn = "mms_gguf_get_arr_str";
    const struct mms__gguf_kv *kv = mms__gguf_lookup(g, key, fn);
    if (!kv) return MMS_ERR_INVALID_ARG;
    if (kv->type != MMS_GGUF_TYPE_ARRAY || kv->arr_type != MMS_GGUF_TYPE_STRING)
        return mms__gguf_wrong_type(g, kv, fn, "an array of strings");
    if (i < 0 || (uint64_t)i >= kv->n)
        return mms_set_error(MMS_ERR_INVALID_ARG, "%s: %s: index %lld out of range for key '%s' (%llu strings)", fn, g->where,
                             (long long)i, kv->key, (unsigned long long)kv->n);
    mms__gguf_str_at(g, kv->str_pos[i], out, len);
    return MMS_OK;
}

/* -- tensors -- */

MMS_API enum mms_status mms_gguf_get_tensor(const struct mms_gguf *g, int64_t i, struct mms_gguf_tensor_info *info) {
    const struct mms__gguf_tensor *t;
    if (!g || !info) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_gguf_get_tensor: %s is NULL", g ? "info" : "gguf");
    if (i < 0 || i >= g->n_tensors)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_gguf_get_tensor: %s: tensor index %lld out of range (%lld tensors)", g->where,
                             (long long)i, (long long)g->n_tensors);
    t = &g->tensors[i];
    info->name = t->name;
    info->ggml_type = t->ggml_type;
    info->type = t->type;
    info->n_dims = t->n_dims;
    memcpy(info->ne, t->ne, sizeof info->ne);
    info->offset = t->offset;
    info->size = (size_t)t->size;   /* fits: it lies inside the file */
    info->data = g->base + g->data_pos + (size_t)t->offset;
    return MMS_OK;
}
/* ==== end src/gguf/gguf.c ==== */

/* ==== begin src/gguf/gguf_write.c ==== */
/* >>gguf-write ====================================================================================
   The GGUF writer. Each set or add encodes its value (or copies its tensor data) at once, so the
   caller's memory is free afterwards and writing is one pass: header, keys, tensor infos, then the
   data section with every tensor padded to the alignment (ggml's own reader expects the padding
   after the last tensor too). general.alignment, when set, must be a u32 power of two. */

struct mms__gguf_wkv {
    char    *key;         /* key_len bytes, any bytes when copied from a file */
    size_t   key_len;
    uint32_t type;
    uint8_t *val;         /* the value exactly as the file holds it after the type field */
    size_t   val_size;
};

struct mms__gguf_wtensor {
    char     name[MMS_MAX_NAME];
    uint32_t ggml_type;
    int      n_dims;
    int64_t  ne[MMS_MAX_DIMS];
    void    *data;
    size_t   size;
};

struct mms_gguf_writer {
    struct mms__gguf_wkv     *kv;
    size_t                    n_kv, cap_kv;
    struct mms__gguf_wtensor *tensors;
    size_t                    n_tensors, cap_tensors;
};

/* A growing byte buffer that remembers running out of memory, so encoders need no checks. */
struct mms__gguf_buf { uint8_t *p; size_t n, cap; bool oom; };

static void mms__gguf_buf_put(struct mms__gguf_buf *b, const void *src, size_t n) {
    if (b->oom) return;
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 64;
        uint8_t *p;
        while (cap - b->n < n) {
            if (cap > SIZE_MAX / 2) { b->oom = true; return; }
            cap *= 2;
        }
        p = (uint8_t *)MMS_REALLOC(b->p, cap);
        if (!p) { b->oom = true; return; }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void mms__gguf_buf_u32(struct mms__gguf_buf *b, uint32_t v) {
    uint8_t x[4];
    int i;
    for (i = 0; i < 4; i++) x[i] = (uint8_t)(v >> (8 * i));
    mms__gguf_buf_put(b, x, 4);
}
static void mms__gguf_buf_u64(struct mms__gguf_buf *b, uint64_t v) {
    uint8_t x[8];
    int i;
    for (i = 0; i < 8; i++) x[i] = (uint8_t)(v >> (8 * i));
    mms__gguf_buf_put(b, x, 8);
}
static void mms__gguf_buf_f32(struct mms__gguf_buf *b, float f) {
    uint32_t v;
    memcpy(&v, &f, sizeof v);
    mms__gguf_buf_u32(b, v);
}
static void mms__gguf_buf_str(struct mms__gguf_buf *b, const char *s, size_t n) {
    mms__gguf_buf_u64(b, (uint64_t)n);
    mms__gguf_buf_put(b, s, n);
}

MMS_API struct mms_gguf_writer *mms_gguf_writer_new(void) {
    struct mms_gguf_writer *w = (struct mms_gguf_writer *)MMS_MALLOC(sizeof *w);
    if (!w) { mms_set_error(MMS_ERR_OOM, "mms_gguf_writer_new: out of memory"); return NULL; }
    memset(w, 0, sizeof *w);
    return w;
}

MMS_API void mms_gguf_writer_free(struct mms_gguf_writer *w) {
    size_t i;
    if (!w) return;
    for (i = 0; i < w->n_kv; i++) { MMS_FREE(w->kv[i].key); MMS_FREE(w->kv[i].val); }
    for (i = 0; i < w->n_tensors; i++) MMS_FREE(w->tensors[i].data);
    MMS_FREE(w->kv);
    MMS_FREE(w->tensors);
    MMS_FREE(w);
}

/* Room for one more element in an array of elements of size bytes. */
static bool mms__gguf_grow(void **arr, size_t *cap, size_t n, size_t size) {
    size_t c;
    void *p;
    if (n < *cap) return true;
    c = *cap ? *cap * 2 : 16;
    if (c > SIZE_MAX / size) return false;
    p = MMS_REALLOC(*arr, c * size);
    if (!p) return false;
    *arr = p;
    *cap = c;
    return true;
}

/* Sets key (replacing its value in place if present) to an encoded value; takes val->p. */
static enum mms_status mms__gguf_writer_set(struct mms_gguf_writer *w, const char *fn, const char *key, size_t key_len,
                                            uint32_t type, struct mms__gguf_buf *val) {
    struct mms__gguf_wkv *kv = NULL;
    size_t i;
    if (val->oom) {
        MMS_FREE(val->p);
        return mms_set_error(MMS_ERR_OOM, "%s: out of memory for the value of '%.*s'", fn, (int)MMS__MIN(key_len, 200), key);
    }
    for (i = 0; i < w->n_kv; i++)
        if (w->kv[i].key_len == key_len && memcmp(w->kv[i].key, key, key_len) == 0) { kv = &w->kv[i]; break; }
    if (kv) {
        MMS_FREE(kv->val);
    } else {
        char *k = (char *)MMS_MALLOC(key_len ? key_len : 1);
        if (!k || !mms__gguf_grow((void **)&w->kv, &w->cap_kv, w->n_kv, sizeof *w->kv)) {
            MMS_FREE(k);
            MMS_FREE(val->p);
            return mms_set_error(MMS_ERR_OOM, "%s: out of memory for key '%.*s'", fn, (int)MMS__MIN(key_len, 200), key);
        }
        if (key_len) memcpy(k, key, key_len);
        kv = &w->kv[w->n_kv++];
        kv->key = k;
        kv->key_len = key_len;
    }
    kv->type = type;
    kv->val = val->p;
    kv->val_size = val->n;
    return MMS_OK;
}

/* The checks every setter shares: a writer, a key of sensible length, and general.alignment
   only as a u32 power of two (the one key whose value changes the layout). */
static enum mms_status mms__gguf_writer_check(struct mms_gguf_writer *w, const char *fn, const char *key, uint32_t type,
                                              uint64_t u32_value) {
    size_t n;
    if (!w || !key) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: %s is NULL", fn, w ? "key" : "writer");
    n = strlen(key);
    if (n > MMS__GGUF_MAX_KEY)
        return mms_set_error(MMS_ERR_INVALID_ARG, "%s: key of %zu bytes is longer than %d", fn, n, MMS__GGUF_MAX_KEY);
    if (strcmp(key, "general.alignment") == 0) {
        if (type != MMS_GGUF_TYPE_UINT32)
            return mms_set_error(MMS_ERR_INVALID_ARG, "%s: general.alignment must be a u32, not %s", fn, mms__gguf_type_name(type));
        if (!mms__gguf_is_pow2(u32_value))
            return mms_set_error(MMS_ERR_INVALID_ARG, "%s: general.alignment %llu is not a non-zero power of two", fn,
                                 (unsigned long long)u32_value);
    }
    return MMS_OK;
}

/* A scalar of size bytes, already little-endian in bytes. */
static enum mms_status mms__gguf_writer_scalar(struct mms_gguf_writer *w, const char *fn, const char *key, uint32_t type,
                                               const uint8_t *bytes, size_t size, uint64_t u32_value) {
    struct mms__gguf_buf b = { NULL, 0, 0, false };
    enum mms_status st = mms__gguf_writer_check(w, fn, key, type, u32_value);
    if (st != MMS_OK) return st;
    mms__gguf_buf_put(&b, bytes, size);
    return mms__gguf_writer_set(w, fn, key, strlen(key), type, &b);
}

static void mms__gguf_le_bytes(uint64_t v, uint8_t *out, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) out[i] = (uint8_t)(v >> (8 * i));
}

MMS_API enum mms_status mms_gguf_writer_set_u32(struct mms_gguf_writer *w, const char *key, uint32_t v) {
    uint8_t x[4];
    mms__gguf_le_bytes(v, x, 4);
    return mms__gguf_writer_scalar(w, "mms_gguf_writer_set_u32", key, MMS_GGUF_TYPE_UINT32, x, 4, v);
}
MMS_API enum mms_status mms_gguf_writer_set_i32(struct mms_gguf_writer *w, const char *key, int32_t v) {
    uint8_t x[4];
    mms__gguf_le_bytes((uint32_t)v, x, 4);
    return mms__gguf_writer_scalar(w, "mms_gguf_writer_set_i32", key, MMS_GGUF_TYPE_INT32, x, 4, 0);
}
MMS_API enum mms_status mms_gguf_writer_set_u64(struct mms_gguf_writer *w, const char *key, uint64_t v) {
    uint8_t x[8];
    mms__gguf_le_bytes(v, x, 8);
    return mms__gguf_writer_scalar(w, "mms_gguf_writer_set_u64", key, MMS_GGUF_TYPE_UINT64, x, 8, 0);
}
MMS_API enum mms_status mms_gguf_writer_set_f32(struct mms_gguf_writer *w, const char *key, float v) {
    uint8_t x[4];
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    mms__gguf_le_bytes(bits, x, 4);
    return mms__gguf_writer_scalar(w, "mms_gguf_writer_set_f32", key, MMS_GGUF_TYPE_FLOAT32, x, 4, 0);
}
MMS_API enum mms_status mms_gguf_writer_set_bool(struct mms_gguf_writer *w, const char *key, bool v) {
    uint8_t x = v ? 1 : 0;
    return mms__gguf_writer_scalar(w, "mms_gguf_writer_set_bool", key, MMS_GGUF_TYPE_BOOL, &x, 1, 0);
}

MMS_API enum mms_status mms_gguf_writer_set_str(struct mms_gguf_writer *w, const char *key, const char *v) {
    const char *fn = "mms_gguf_writer_set_str";
    struct mms__gguf_buf b = { NULL, 0, 0, false };
    enum mms_status st = mms__gguf_writer_check(w, fn, key, MMS_GGUF_TYPE_STRING, 0);
    if (st != MMS_OK) return st;
    if (!v) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: value of '%s' is NULL", fn, key);
    mms__gguf_buf_str(&b, v, strlen(v));
    return mms__gguf_writer_set(w, fn, key, strlen(key), MMS_GGUF_TYPE_STRING, &b);
}

/* The header of an array value, after the common checks of v and n. */
static enum mms_status mms__gguf_writer_arr_begin(struct mms_gguf_writer *w, const char *fn, const char *key, const void *v,
                                                  int64_t n, uint32_t elem, struct mms__gguf_buf *b) {
    enum mms_status st = mms__gguf_writer_check(w, fn, key, MMS_GGUF_TYPE_ARRAY, 0);
    if (st != MMS_OK) return st;
    if (n < 0 || (n > 0 && !v))
        return mms_set_error(MMS_ERR_INVALID_ARG, "%s: '%s': %s", fn, key, n < 0 ? "negative length" : "values are NULL");
    mms__gguf_buf_u32(b, elem);
    mms__gguf_buf_u64(b, (uint64_t)n);
    return MMS_OK;
}

MMS_API enum mms_status mms_gguf_writer_set_arr_i32(struct mms_gguf_writer *w, const char *key, const int32_t *v, int64_t n) {
    const char *fn = "mms_gguf_writer_set_arr_i32";
    struct mms__gguf_buf b = { NULL, 0, 0, false };
    int64_t i;
    enum mms_status st = mms__gguf_writer_arr_begin(w, fn, key, v, n, MMS_GGUF_TYPE_INT32, &b);
    if (st != MMS_OK) return st;
    for (i = 0; i < n && !b.oom; i++) mms__gguf_buf_u32(&b, (uint32_t)v[i]);
    return mms__gguf_writer_set(w, fn, key, strlen(key), MMS_GGUF_TYPE_ARRAY, &b);
}

MMS_API enum mms_status mms_gguf_writer_set_arr_f32(struct mms_gguf_writer *w, const char *key, const float *v, int64_t n) {
    const char *fn = "mms_gguf_writer_set_arr_f32";
    struct mms__gguf_buf b = { NULL, 0, 0, false };
    int64_t i;
    enum mms_status st = mms__gguf_writer_arr_begin(w, fn, key, v, n, MMS_GGUF_TYPE_FLOAT32, &b);
    if (st != MMS_OK) return st;
    for (i = 0; i < n && !b.oom; i++) mms__gguf_buf_f32(&b, v[i]);
    return mms__gguf_writer_set(w, fn, key, strlen(key), MMS_GGUF_TYPE_ARRAY, &b);
}

MMS_API enum mms_status mms_gguf_writer_set_arr_str(struct mms_gguf_writer *w, const char *key, const char *const *v, int64_t n) {
    const char *fn = "mms_gguf_writer_set_arr_str";
    struct mms__gguf_buf b = { NULL, 0, 0, false };
    int64_t i;
    enum mms_status st = mms__gguf_writer_arr_begin(w, fn, key, v, n, MMS_GGUF_TYPE_STRING, &b);
    if (st != MMS_OK) return st;
    for (i = 0; i < n; i++) {
        if (!v[i]) {
            MMS_FREE(b.p);
            return mms_set_error(MMS_ERR_INVALID_ARG, "%s: '%s': string %lld is NULL", fn, key, (long long)i);
        }
        mms__gguf_buf_str(&b, v[i], strlen(v[i]));
    }
    return mms__gguf_writer_set(w, fn, key, strlen(key), MMS_GGUF_TYPE_ARRAY, &b);
}

MMS_API enum mms_status mms_gguf_writer_copy_kv(struct mms_gguf_writer *w, const struct mms_gguf *src, int64_t i) {
    const char *fn = "mms_gguf_writer_copy_kv";
    const struct mms__gguf_kv *kv;
    struct mms__gguf_buf b = { NULL, 0, 0, false };
    if (!w) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: writer is NULL", fn);
    if (!(kv = mms__gguf_kv_at(src, i, fn))) return mms_last_status();
    /* the source was validated when opened, general.alignment included: its bytes go as they are */
    mms__gguf_buf_put(&b, src->base + kv->raw_pos, kv->raw_size);
    return mms__gguf_writer_set(w, fn, (const char *)(src->base + kv->key_pos), kv->key_len, kv->type, &b);
}

MMS_API enum mms_status mms_gguf_writer_add_tensor(struct mms_gguf_writer *w, const char *name, enum mms_type type,
                                                   int n_dims, const int64_t *ne, const void *data) {
    const char *fn = "mms_gguf_writer_add_tensor";
    struct mms__gguf_wtensor *t;
    int id = mms_gguf_type_from_mms(type), d;
    uint64_t rows = 1, row_size, size;
    size_t i;
    if (!w || !name || !ne)
        return mms_set_error(MMS_ERR_INVALID_ARG, "%s: %s is NULL", fn, !w ? "writer" : !name ? "name" : "ne");
    if (strlen(name) >= MMS_MAX_NAME)
        return mms_set_error(MMS_ERR_INVALID_ARG, "%s: tensor name '%.*s...' is longer than %d bytes", fn, 40, name, MMS_MAX_NAME - 1);
    if (id < 0) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: tensor '%s': type %s has no GGUF type id", fn, name, mms_type_name(type));
    if (n_dims < 1 || n_dims > MMS_MAX_DIMS)
        return mms_set_error(MMS_ERR_INVALID_ARG, "%s: tensor '%s': %d dimensions (must be 1 to %d)", fn, name, n_dims, MMS_MAX_DIMS);
    for (d = 0; d < n_dims; d++) {
        if (ne[d] < 0) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: tensor '%s': ne[%d] = %lld is negative", fn, name, d, (long long)ne[d]);
        if (d > 0) {
            if (ne[d] != 0 && rows > (uint64_t)INT64_MAX / (uint64_t)ne[d])
                return mms_set_error(MMS_ERR_INVALID_ARG, "%s: tensor '%s': too many rows", fn, name);
            rows *= (uint64_t)ne[d];
        }
    }
    if (ne[0] % mms_blck_size(type) != 0)
        return mms_set_error(MMS_ERR_INVALID_ARG, "%s: tensor '%s': ne[0] = %lld is not a multiple of the block size %lld of %s", fn, name,
                             (long long)ne[0], (long long)mms_blck_size(type), mms_type_name(type));
    row_size = (uint64_t)(ne[0] / mms_blck_size(type));
    if (row_size > SIZE_MAX / mms_type_size(type)) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: tensor '%s' is too large", fn, name);
    row_size *= mms_type_size(type);
    if (rows != 0 && row_size > SIZE_MAX / rows) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: tensor '%s' is too large", fn, name);
    size = row_size * rows;
    if (size > 0 && !data) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: tensor '%s': data is NULL", fn, name);
    for (i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: duplicate tensor name '%s'", fn, name);
    if (!mms__gguf_grow((void **)&w->tensors, &w->cap_tensors, w->n_tensors, sizeof *w->tensors))
        return mms_set_error(MMS_ERR_OOM, "%s: out of memory for tensor '%s'", fn, name);
    t = &w->tensors[w->n_tensors];
    memset(t, 0, sizeof *t);
    t->data = MMS_MALLOC(size ? (size_t)size : 1);
    if (!t->data) return mms_set_error(MMS_ERR_OOM, "%s: out of memory for the %llu bytes of tensor '%s'", fn, (unsigned long long)size, name);
    if (size) memcpy(t->data, data, (size_t)size);
    t->size = (size_t)size;
    mms__copy_str(t->name, sizeof t->name, name);
    t->ggml_type = (uint32_t)id;
    t->n_dims = n_dims;
    for (d = 0; d < MMS_MAX_DIMS; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    w->n_tensors++;
    return MMS_OK;
}

/* -- writing -- */

/* To a file, or (f NULL) to memory. */
struct mms__gguf_out { FILE *f; struct mms__gguf_buf mem; uint64_t pos; bool failed; };

static void mms__gguf_out_put(struct mms__gguf_out *o, const void *p, size_t n) {
    if (o->failed || n == 0) return;
    if (o->f ? fwrite(p, 1, n, o->f) != n : (mms__gguf_buf_put(&o->mem, p, n), o->mem.oom)) o->failed = true;
    o->pos += n;
}
static void mms__gguf_out_buf(struct mms__gguf_out *o, const struct mms__gguf_buf *b) { mms__gguf_out_put(o, b->p, b->n); }
static void mms__gguf_out_pad(struct mms__gguf_out *o, size_t alignment) {
    static const uint8_t zeros[64] = { 0 };
    size_t pad = (size_t)((alignment - o->pos % alignment) % alignment);
    while (pad > 0) {
        size_t k = MMS__MIN(pad, sizeof zeros);
        mms__gguf_out_put(o, zeros, k);
        pad -= k;
    }
}

static size_t mms__gguf_writer_alignment(const struct mms_gguf_writer *w) {
    size_t i;
    for (i = 0; i < w->n_kv; i++)
        if (w->kv[i].key_len == 17 && memcmp(w->kv[i].key, "general.alignment", 17) == 0 && w->kv[i].type == MMS_GGUF_TYPE_UINT32)
            return mms__gguf_le32(w->kv[i].val);
    return MMS__GGUF_DEFAULT_ALIGNMENT;
}

/* The file's bytes to o (opened by the caller); path names it in messages. */
static enum mms_status mms__gguf_writer_emit(const struct mms_gguf_writer *w, struct mms__gguf_out *o, const char *fn, const char *path) {
    struct mms__gguf_buf b = { NULL, 0, 0, false };
    size_t alignment = mms__gguf_writer_alignment(w), i;
    uint64_t offset = 0;
    int d;

    /* everything before the data section is small: encode it first, then write it in one go */
    mms__gguf_buf_put(&b, "GGUF", 4);
    mms__gguf_buf_u32(&b, 3);
    mms__gguf_buf_u64(&b, (uint64_t)w->n_tensors);
    mms__gguf_buf_u64(&b, (uint64_t)w->n_kv);
    for (i = 0; i < w->n_kv; i++) {
        mms__gguf_buf_str(&b, w->kv[i].key, w->kv[i].key_len);
        mms__gguf_buf_u32(&b, w->kv[i].type);
        mms__gguf_buf_put(&b, w->kv[i].val, w->kv[i].val_size);
    }
    for (i = 0; i < w->n_tensors; i++) {
        const struct mms__gguf_wtensor *t = &w->tensors[i];
        mms__gguf_buf_str(&b, t->name, strlen(t->name));
        mms__gguf_buf_u32(&b, (uint32_t)t->n_dims);
        for (d = 0; d < t->n_dims; d++) mms__gguf_buf_u64(&b, (uint64_t)t->ne[d]);
        mms__gguf_buf_u32(&b, t->ggml_type);
        mms__gguf_buf_u64(&b, offset);
        offset += MMS__ALIGN_UP((uint64_t)t->size, (uint64_t)alignment);
    }
    if (b.oom) {
        MMS_FREE(b.p);
        return mms_set_error(MMS_ERR_OOM, "%s: out of memory encoding the header of '%s'", fn, path);
    }
    mms__gguf_out_buf(o, &b);
    MMS_FREE(b.p);
    mms__gguf_out_pad(o, alignment);
    for (i = 0; i < w->n_tensors; i++) {
        mms__gguf_out_put(o, w->tensors[i].data, w->tensors[i].size);
        mms__gguf_out_pad(o, alignment);
    }
    return MMS_OK;
}

MMS_API enum mms_status mms_gguf_writer_write(const struct mms_gguf_writer *w, const char *path) {
    const char *fn = "mms_gguf_writer_write";
    struct mms__gguf_out o;
    enum mms_status st;
    if (!w || !path) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: %s is NULL", fn, w ? "path" : "writer");
    memset(&o, 0, sizeof o);
    o.f = mms__fopen(path, "wb");
    if (!o.f) return mms_set_error(MMS_ERR_IO, "%s: cannot create '%s'", fn, path);
    st = mms__gguf_writer_emit(w, &o, fn, path);
    if (fclose(o.f) != 0) o.failed = true;
    if (st != MMS_OK) return st;
    /* the partial file stays: path may be a device or pipe that is not ours to remove, and the
       reader rejects a truncated file anyway */
    if (o.failed) return mms_set_error(MMS_ERR_IO, "%s: writing '%s' failed (%llu bytes written): the file is incomplete", fn, path,
                                       (unsigned long long)o.pos);
    return MMS_OK;
}

/* The file's bytes in memory (MMS_MALLOC'd, the caller frees them with MMS_FREE). */
MMS__MAYBE_UNUSED static enum mms_status mms__gguf_writer_to_memory(const struct mms_gguf_writer *w, void **data, size_t *size) {
    struct mms__gguf_out o;
    enum mms_status st;
    memset(&o, 0, sizeof o);
    st = mms__gguf_writer_emit(w, &o, "gguf writer", "memory");
    if (st == MMS_OK && o.failed) st = mms_set_error(MMS_ERR_OOM, "gguf writer: out of memory");
    if (st != MMS_OK) { MMS_FREE(o.mem.p); return st; }
    *data = o.mem.p;
    *size = o.mem.n;
    return MMS_OK;
}
/* ==== end src/gguf/gguf_write.c ==== */

/* ==== begin src/formats/json.c ==== */
/* >>json ===========================================================================================
   The strict JSON reader: one pass over the text into a flat array of values. A container's
   children are stored together once it closes (the parser keeps them on a stack until then); an
   object also keeps its members' order sorted by key, which finds duplicates and makes lookups
   binary searches. Strings are decoded into one pool. */

#define MMS__JSON_MAX_DEPTH 128

struct mms__json_val {
    uint8_t type;
    int64_t a, b;          /* string: pool offset, length; array/object: first child slot, count */
    double  num;
};

struct mms_json {
    struct mms__json_val *v;
    int64_t  n_v, cap_v;
    int64_t *kids;           /* child value indexes, contiguous per container */
    int64_t *keys;           /* objects: the key's pool offset for each child slot */
    int64_t *sorted;         /* objects: child slots in key order */
    int64_t  n_kids, cap_kids, cap_keys;
    char    *pool;
    size_t   n_pool, cap_pool;
    char    *source;
};

struct mms__json_parser {
    struct mms_json *j;
    const char *s;
    size_t len, pos;
    int64_t *stack;          /* children (and key offsets, interleaved) of the open containers */
    int64_t  n_stack, cap_stack;
    enum mms_status st;
};

/* Whether path can be opened for reading (how folder layouts are recognised). */
MMS__MAYBE_UNUSED static bool mms__file_exists(const char *path) {   /* for the parts above */
    FILE *f = mms__fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

static char *mms__str_copy(const char *s) {
    size_t n = strlen(s) + 1;
    char *c = (char *)MMS_MALLOC(n);
    if (c) memcpy(c, s, n);
    return c;
}

static enum mms_status mms__json_fail(struct mms__json_parser *p, size_t at, const char *fmt, ...) MMS_PRINTF(3, 4);
static enum mms_status mms__json_fail(struct mms__json_parser *p, size_t at, const char *fmt, ...) {
    char what[160];
    size_t i, line = 1, col = 1;
    va_list ap;
    if (p->st != MMS_OK) return p->st;
    for (i = 0; i < at && i < p->len; i++) {
        if (p->s[i] == '\n') { line++; col = 1; } else col++;
    }
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return p->st = mms_set_error(MMS_ERR_FORMAT, "json: %s line %zu column %zu: %s", p->j->source, line, col, what);
}

static enum mms_status mms__json_oom(struct mms__json_parser *p) {
    if (p->st != MMS_OK) return p->st;
    return p->st = mms_set_error(MMS_ERR_OOM, "json: %s: out of memory", p->j->source);
}

static bool mms__json_grow(void **ptr, int64_t *cap, int64_t need, size_t elem) {
    int64_t c = *cap ? *cap : 64;
    void *q;
    if (need <= *cap) return true;
    while (c < need) c *= 2;
    if ((uint64_t)c > SIZE_MAX / elem) return false;
    q = MMS_REALLOC(*ptr, (size_t)c * elem);
    if (!q) return false;
    *ptr = q;
    *cap = c;
    return true;
}

static int64_t mms__json_new(struct mms__json_parser *p, int type) {
    struct mms_json *j = p->j;
    if (!mms__json_grow((void **)&j->v, &j->cap_v, j->n_v + 1, sizeof *j->v)) { mms__json_oom(p); return -1; }
    memset(&j->v[j->n_v], 0, sizeof *j->v);
    j->v[j->n_v].type = (uint8_t)type;
    return j->n_v++;
}

static bool mms__json_push(struct mms__json_parser *p, int64_t x) {
    if (!mms__json_grow((void **)&p->stack, &p->cap_stack, p->n_stack + 1, sizeof *p->stack)) { mms__json_oom(p); return false; }
    p->stack[p->n_stack++] = x;
    return true;
}

static bool mms__json_pool_put(struct mms__json_parser *p, const void *b, size_t n) {
    struct mms_json *j = p->j;
    if (j->n_pool + n + 1 > j->cap_pool) {
        size_t c = j->cap_pool ? j->cap_pool : 1024;
        char *q;
        while (c < j->n_pool + n + 1) {
            if (c > SIZE_MAX / 2) { mms__json_oom(p); return false; }
            c *= 2;
        }
        if (!(q = (char *)MMS_REALLOC(j->pool, c))) { mms__json_oom(p); return false; }
        j->pool = q;
        j->cap_pool = c;
    }
    memcpy(j->pool + j->n_pool, b, n);
    j->n_pool += n;
    return true;
}

static void mms__json_ws(struct mms__json_parser *p) {
    while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' || p->s[p->pos] == '\r')) p->pos++;
}

/* One UTF-8 sequence at s (n bytes left): its length, or 0 if invalid (overlong, surrogate, > U+10FFFF, cut). */
static int mms__json_utf8(const unsigned char *s, size_t n, uint32_t *cp) {
    int k, i;
    uint32_t c;
    if (s[0] < 0x80) { *cp = s[0]; return 1; }
    if (s[0] >= 0xC2 && s[0] <= 0xDF) { k = 2; c = s[0] & 0x1F; }
    else if (s[0] >= 0xE0 && s[0] <= 0xEF) { k = 3; c = s[0] & 0x0F; }
    else if (s[0] >= 0xF0 && s[0] <= 0xF4) { k = 4; c = s[0] & 0x07; }
    else return 0;
    if ((size_t)k > n) return 0;
    for (i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    if ((k == 3 && c < 0x800) || (k == 4 && (c < 0x10000 || c > 0x10FFFF)) || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *cp = c;
    return k;
}

static int mms__json_hex4(const char *s) {
    int v = 0, i;
    for (i = 0; i < 4; i++) {
        int c = s[i], d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* A string at p->pos (the opening quote) into the pool; *off and *n give it. */
static bool mms__json_string(struct mms__json_parser *p, int64_t *off, int64_t *n) {
    const size_t start = p->pos, pool0 = p->j->n_pool;
    p->pos++;
    for (;;) {
        const unsigned char c = p->pos < p->len ? (unsigned char)p->s[p->pos] : 0;
        if (p->pos >= p->len) { mms__json_fail(p, start, "unterminated string"); return false; }
        if (c == '"') { p->pos++; break; }
        if (c < 0x20) { mms__json_fail(p, p->pos, "control character 0x%02x in a string (escape it)", c); return false; }
        if (c == '\\') {
            char e = p->pos + 1 < p->len ? p->s[p->pos + 1] : 0, out = 0;
            switch (e) {
            case '"': out = '"'; break;
            case '\\': out = '\\'; break;
            case '/': out = '/'; break;
            case 'b': out = '\b'; break;
            case 'f': out = '\f'; break;
            case 'n': out = '\n'; break;
            case 'r': out = '\r'; break;
            case 't': out = '\t'; break;
            case 'u': {
                int hi = p->pos + 6 <= p->len ? mms__json_hex4(p->s + p->pos + 2) : -1;
                uint32_t cp;
                unsigned char u[4];
                int k;
                if (hi < 0) { mms__json_fail(p, p->pos, "bad \\u escape"); return false; }
                p->pos += 6;
                cp = (uint32_t)hi;
                if (hi >= 0xDC00 && hi <= 0xDFFF) { mms__json_fail(p, p->pos - 6, "lone low surrogate \\u%04x", hi); return false; }
                if (hi >= 0xD800 && hi <= 0xDBFF) {
                    int lo = p->pos + 6 <= p->len && p->s[p->pos] == '\\' && p->s[p->pos + 1] == 'u' ? mms__json_hex4(p->s + p->pos + 2) : -1;
                    if (lo < 0xDC00 || lo > 0xDFFF) { mms__json_fail(p, p->pos - 6, "high surrogate \\u%04x without its low half", hi); return false; }
                    cp = 0x10000 + (((uint32_t)hi - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
                    p->pos += 6;
                }
                if (cp < 0x80) { u[0] = (unsigned char)cp; k = 1; }
                else if (cp < 0x800) { u[0] = (unsigned char)(0xC0 | (cp >> 6)); u[1] = (unsigned char)(0x80 | (cp & 0x3F)); k = 2; }
                else if (cp < 0x10000) {
                    u[0] = (unsigned char)(0xE0 | (cp >> 12)); u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)); u[2] = (unsigned char)(0x80 | (cp & 0x3F)); k = 3;
                } else {
                    u[0] = (unsigned char)(0xF0 | (cp >> 18)); u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
                    u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)); u[3] = (unsigned char)(0x80 | (cp & 0x3F)); k = 4;
                }
                if (!mms__json_pool_put(p, u, (size_t)k)) return false;
                continue;
            }
            default:
                mms__json_fail(p, p->pos, "bad escape \\%c", e >= 0x20 && e < 0x7F ? e : '?');
                return false;
            }
            if (!mms__json_pool_put(p, &out, 1)) return false;
            p->pos += 2;
        } else {
            size_t run = p->pos;
            while (run < p->len && (unsigned char)p->s[run] >= 0x20 && p->s[run] != '"' && p->s[run] != '\\') {
                uint32_t cp;
                int k = mms__json_utf8((const unsigned char *)p->s + run, p->len - run, &cp);
                if (!k) { mms__json_fail(p, run, "invalid UTF-8 in a string"); return false; }
                run += (size_t)k;
            }
            if (!mms__json_pool_put(p, p->s + p->pos, run - p->pos)) return false;
            p->pos = run;
        }
    }
    *off = (int64_t)pool0;
    *n = (int64_t)(p->j->n_pool - pool0);
    return mms__json_pool_put(p, "", 1);   /* NUL-terminated: keys compare with strcmp */
}

/* *inexact: an integer literal (no point, no exponent) beyond 2^53, which a double rounds. */
static bool mms__json_number(struct mms__json_parser *p, double *out, bool *inexact) {
    const size_t start = p->pos;
    size_t i = p->pos;
    char buf[128];
    char *end;
    if (i < p->len && p->s[i] == '-') i++;
    if (i < p->len && p->s[i] == '0') i++;
    else if (i < p->len && p->s[i] >= '1' && p->s[i] <= '9') while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9') i++;
    else { mms__json_fail(p, start, "bad number"); return false; }
    if (i < p->len && p->s[i] >= '0' && p->s[i] <= '9') { mms__json_fail(p, start, "number with a leading zero"); return false; }
    if (i < p->len && p->s[i] == '.') {
        i++;
        if (!(i < p->len && p->s[i] >= '0' && p->s[i] <= '9')) { mms__json_fail(p, start, "bad number: no digit after the point"); return false; }
        while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9') i++;
    }
    if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
        i++;
        if (i < p->len && (p->s[i] == '+' || p->s[i] == '-')) i++;
        if (!(i < p->len && p->s[i] >= '0' && p->s[i] <= '9')) { mms__json_fail(p, start, "bad number: no digit in the exponent"); return false; }
        while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9') i++;
    }
    if (i - start >= sizeof buf) { mms__json_fail(p, start, "number of %zu characters", i - start); return false; }
    memcpy(buf, p->s + start, i - start);
    buf[i - start] = '\0';
    *inexact = false;
    if (!strpbrk(buf, ".eE")) {
        uint64_t m = 0;
        const char *c;
        for (c = buf[0] == '-' ? buf + 1 : buf; *c && !*inexact; c++) {
            *inexact = m > (UINT64_C(1) << 53) / 10;
            m = m * 10 + (uint64_t)(*c - '0');
        }
        *inexact = *inexact || m > (UINT64_C(1) << 53);
    }
    *out = strtod(buf, &end);
    if (end != buf + (i - start)) { mms__json_fail(p, start, "bad number"); return false; }
    if (*out > DBL_MAX || *out < -DBL_MAX) { mms__json_fail(p, start, "number %.40s is too large", buf); return false; }
    p->pos = i;
    return true;
}

static int mms__json_key_cmp(const struct mms_json *j, int64_t oa, int64_t ob) {
    const char *a = j->pool + oa, *b = j->pool + ob;
    return strcmp(a, b);
}

/* Sorts an object's child slots by key (insertion sort for small ones, merge sort otherwise) and
   reports the first duplicate. Keys are NUL-terminated; a key holding \u0000 compares by its prefix,
   so such keys are refused when they would tie. */
static bool mms__json_sort_members(struct mms__json_parser *p, int64_t first, int64_t n, size_t at) {
    struct mms_json *j = p->j;
    int64_t *s = j->sorted + first, i, w;
    int64_t *tmp;
    for (i = 0; i < n; i++) s[i] = first + i;
    if (n > 1) {
        tmp = (int64_t *)MMS_MALLOC(sizeof *tmp * (size_t)n);
        if (!tmp) { mms__json_oom(p); return false; }
        for (w = 1; w < n; w *= 2) {
            int64_t lo;
            for (lo = 0; lo < n; lo += 2 * w) {
                int64_t mid = MMS__MIN(lo + w, n), hi = MMS__MIN(lo + 2 * w, n), a = lo, b = mid, k = lo;
                while (a < mid && b < hi) tmp[k++] = mms__json_key_cmp(j, j->keys[s[a]], j->keys[s[b]]) <= 0 ? s[a++] : s[b++];
                while (a < mid) tmp[k++] = s[a++];
                while (b < hi) tmp[k++] = s[b++];
            }
            memcpy(s, tmp, sizeof *tmp * (size_t)n);
        }
        MMS_FREE(tmp);
    }
    for (i = 1; i < n; i++)
        if (mms__json_key_cmp(j, j->keys[s[i - 1]], j->keys[s[i]]) == 0) {
            mms__json_fail(p, at, "duplicate key \"%.60s\" in an object", j->pool + j->keys[s[i]]);
            return false;
        }
    return true;
}

/* Moves the n children on top of the stack (pairs of key offset and value for objects) to the
   container's slots. */
static bool mms__json_close(struct mms__json_parser *p, int64_t v, int64_t n, bool object, size_t at) {
    struct mms_json *j = p->j;
    const int64_t per = object ? 2 : 1, first = j->n_kids;
    int64_t i;
    if (!mms__json_grow((void **)&j->kids, &j->cap_kids, first + n, sizeof *j->kids)) { mms__json_oom(p); return false; }
    if (j->cap_keys < j->cap_kids) {   /* keys and sorted grow with kids */
        const int64_t cap = j->cap_kids;
        void *k = MMS_REALLOC(j->keys, sizeof *j->keys * (size_t)cap), *s;
        if (!k) { mms__json_oom(p); return false; }
        j->keys = (int64_t *)k;
        s = MMS_REALLOC(j->sorted, sizeof *j->sorted * (size_t)cap);
        if (!s) { mms__json_oom(p); return false; }
        j->sorted = (int64_t *)s;
        j->cap_keys = cap;
    }
    for (i = 0; i < n; i++) {
        const int64_t *e = p->stack + p->n_stack - per * n + per * i;
        j->kids[first + i] = object ? e[1] : e[0];
        j->keys[first + i] = object ? e[0] : -1;
        j->sorted[first + i] = first + i;
    }
    p->n_stack -= per * n;
    j->n_kids += n;
    j->v[v].a = first;
    j->v[v].b = n;
    return !object || mms__json_sort_members(p, first, n, at);
}

static bool mms__json_value(struct mms__json_parser *p, int depth, int64_t *out) {
    char c;
    mms__json_ws(p);
    if (p->pos >= p->len) { mms__json_fail(p, p->pos, "unexpected end of the text"); return false; }
    c = p->s[p->pos];
    if (c == '{' || c == '[') {
        const bool object = c == '{';
        const size_t at = p->pos;
        int64_t v = mms__json_new(p, object ? MMS_JSON_OBJECT : MMS_JSON_ARRAY), n = 0;
        if (v < 0) return false;
        if (depth >= MMS__JSON_MAX_DEPTH) { mms__json_fail(p, p->pos, "nesting deeper than %d", MMS__JSON_MAX_DEPTH); return false; }
        p->pos++;
        mms__json_ws(p);
        if (p->pos < p->len && p->s[p->pos] == (object ? '}' : ']')) p->pos++;
        else for (;;) {
            int64_t child, koff = -1, klen;
            if (object) {
                mms__json_ws(p);
                if (p->pos >= p->len || p->s[p->pos] != '"') { mms__json_fail(p, p->pos, "expected a key string"); return false; }
                if (!mms__json_string(p, &koff, &klen)) return false;
                mms__json_ws(p);
                if (p->pos >= p->len || p->s[p->pos] != ':') { mms__json_fail(p, p->pos, "expected ':' after a key"); return false; }
                p->pos++;
                if (!mms__json_push(p, koff)) return false;
            }
            if (!mms__json_value(p, depth + 1, &child) || !mms__json_push(p, child)) return false;
            n++;
            mms__json_ws(p);
            if (p->pos < p->len && p->s[p->pos] == ',') {
                p->pos++;
                mms__json_ws(p);
                if (p->pos < p->len && p->s[p->pos] == (object ? '}' : ']')) { mms__json_fail(p, p->pos, "trailing comma"); return false; }
                continue;
            }
            if (p->pos < p->len && p->s[p->pos] == (object ? '}' : ']')) { p->pos++; break; }
            mms__json_fail(p, p->pos, p->pos >= p->len ? "unexpected end of the text" : object ? "expected ',' or '}'" : "expected ',' or ']'");
            return false;
        }
        *out = v;
        return mms__json_close(p, v, n, object, at);
    }
    if (c == '"') {
        int64_t v = mms__json_new(p, MMS_JSON_STRING), off, n;
        if (v < 0 || !mms__json_string(p, &off, &n)) return false;
        p->j->v[v].a = off;
        p->j->v[v].b = n;
        *out = v;
        return true;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        double d;
        bool inexact;
        int64_t v;
        if (!mms__json_number(p, &d, &inexact) || (v = mms__json_new(p, MMS_JSON_NUMBER)) < 0) return false;
        p->j->v[v].num = d;
        p->j->v[v].a = inexact;
        *out = v;
        return true;
    }
    {
        static const struct { const char *word; int type; } words[3] = { { "null", MMS_JSON_NULL }, { "false", MMS_JSON_FALSE }, { "true", MMS_JSON_TRUE } };
        int k;
        for (k = 0; k < 3; k++) {
            size_t n = strlen(words[k].word);
            if (p->len - p->pos >= n && !memcmp(p->s + p->pos, words[k].word, n)) {
                p->pos += n;
                return (*out = mms__json_new(p, words[k].type)) >= 0;
            }
        }
    }
    mms__json_fail(p, p->pos, "unexpected character '%c'", c >= 0x20 && c < 0x7F ? c : '?');
    return false;
}

MMS_API struct mms_json *mms_json_parse(const char *text, size_t len, const char *source) {
    struct mms__json_parser p;
    struct mms_json *j;
    int64_t root;
    if (!text && len) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_json_parse: text is NULL"); return NULL; }
    if (!(j = (struct mms_json *)MMS_MALLOC(sizeof *j))) { mms_set_error(MMS_ERR_OOM, "json: out of memory"); return NULL; }
    memset(j, 0, sizeof *j);
    j->source = mms__str_copy(source ? source : "(memory)");
    memset(&p, 0, sizeof p);
    p.j = j;
    p.s = text ? text : "";
    p.len = len;
    if (!j->source) { mms_json_free(j); mms_set_error(MMS_ERR_OOM, "json: out of memory"); return NULL; }
    if (mms__json_value(&p, 0, &root)) {
        mms__json_ws(&p);
        if (p.pos < p.len) mms__json_fail(&p, p.pos, "text after the value");
    }
    MMS_FREE(p.stack);
    if (p.st != MMS_OK) { mms_json_free(j); return NULL; }
    return j;
}

MMS_API struct mms_json *mms_json_parse_file(const char *path) {
    struct mms__mapping map;
    struct mms_json *j;
    if (!path) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_json_parse_file: path is NULL"); return NULL; }
    if (mms__map_file(path, &map) != MMS_OK) return NULL;
    j = mms_json_parse((const char *)map.addr, map.size, path);
    mms__unmap_file(&map);
    return j;
}

MMS_API void mms_json_free(struct mms_json *j) {
    if (!j) return;
    MMS_FREE(j->v); MMS_FREE(j->kids); MMS_FREE(j->keys); MMS_FREE(j->sorted); MMS_FREE(j->pool); MMS_FREE(j->source);
    MMS_FREE(j);
}

MMS_API const char *mms_json_source(const struct mms_json *j) { return j ? j->source : ""; }

static const struct mms__json_val *mms__json_v(const struct mms_json *j, int64_t v) {
    return j && v >= 0 && v < j->n_v ? &j->v[v] : NULL;
}

MMS_API enum mms_json_type mms_json_type(const struct mms_json *j, int64_t v) {
    const struct mms__json_val *x = mms__json_v(j, v);
    return x ? (enum mms_json_type)x->type : MMS_JSON_NONE;
}

MMS_API int64_t mms_json_len(const struct mms_json *j, int64_t v) {
    const struct mms__json_val *x = mms__json_v(j, v);
    return x && (x->type == MMS_JSON_ARRAY || x->type == MMS_JSON_OBJECT) ? x->b : -1;
}

MMS_API int64_t mms_json_at(const struct mms_json *j, int64_t v, int64_t i) {
    const struct mms__json_val *x = mms__json_v(j, v);
    return x && (x->type == MMS_JSON_ARRAY || x->type == MMS_JSON_OBJECT) && i >= 0 && i < x->b ? j->kids[x->a + i] : -1;
}

MMS_API const char *mms_json_key(const struct mms_json *j, int64_t object, int64_t i, size_t *len) {
    const struct mms__json_val *x = mms__json_v(j, object);
    const char *k;
    if (!x || x->type != MMS_JSON_OBJECT || i < 0 || i >= x->b) return NULL;
    k = j->pool + j->keys[x->a + i];
    if (len) *len = strlen(k);
    return k;
}

MMS_API int64_t mms_json_get(const struct mms_json *j, int64_t object, const char *key) {
    const struct mms__json_val *x = mms__json_v(j, object);
    int64_t lo = 0, hi;
    if (!x || x->type != MMS_JSON_OBJECT || !key) return -1;
    hi = x->b;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2, slot = j->sorted[x->a + mid];
        int c = strcmp(j->pool + j->keys[slot], key);
        if (c == 0) return j->kids[slot];
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return -1;
}

MMS_API const char *mms_json_str(const struct mms_json *j, int64_t v, size_t *len) {
    const struct mms__json_val *x = mms__json_v(j, v);
    if (!x || x->type != MMS_JSON_STRING) return NULL;
    if (len) *len = (size_t)x->b;
    return j->pool + x->a;
}

MMS_API bool mms_json_num(const struct mms_json *j, int64_t v, double *out) {
    const struct mms__json_val *x = mms__json_v(j, v);
    if (!x || x->type != MMS_JSON_NUMBER) return false;
    if (out) *out = x->num;
    return true;
}

MMS_API bool mms_json_int(const struct mms_json *j, int64_t v, int64_t *out) {
    double d;
    if (!mms_json_num(j, v, &d) || j->v[v].a || d != floor(d) || fabs(d) > 9007199254740992.0) return false;
    if (out) *out = (int64_t)d;
    return true;
}
/* ==== end src/formats/json.c ==== */

/* ==== begin src/formats/safetensors.c ==== */
/* >>safetensors ====================================================================================
   The safetensors reader: the header parsed with the strict JSON reader, each entry validated,
   tensors kept in name order for binary search. */

struct mms__st_tensor {
    const char *name, *dtype;
    enum mms_type type;
    int n_dims;
    int64_t shape[8];
    uint64_t begin, end;
};

struct mms_safetensors {
    struct mms__mapping    map;
    const uint8_t         *base;
    size_t                 size;
    char                  *path;
    struct mms_json       *header;
    int64_t                metadata;     /* the __metadata__ value, or -1 */
    const uint8_t         *data;         /* after the header */
    size_t                 data_size;
    struct mms__st_tensor *t;
    int64_t                n;
};

static const struct { const char *name; int size; enum mms_type type; } mms__st_dtypes[] = {
    { "BOOL", 1, MMS_TYPE_INVALID }, { "U8", 1, MMS_TYPE_INVALID }, { "I8", 1, MMS_TYPE_INVALID },
    { "F8_E5M2", 1, MMS_TYPE_INVALID }, { "F8_E4M3", 1, MMS_TYPE_INVALID }, { "I16", 2, MMS_TYPE_INVALID },
    { "U16", 2, MMS_TYPE_INVALID }, { "F16", 2, MMS_TYPE_F16 }, { "BF16", 2, MMS_TYPE_BF16 }, { "I32", 4, MMS_TYPE_INVALID },
    { "U32", 4, MMS_TYPE_INVALID }, { "F32", 4, MMS_TYPE_F32 }, { "F64", 8, MMS_TYPE_INVALID }, { "I64", 8, MMS_TYPE_INVALID },
    { "U64", 8, MMS_TYPE_INVALID },
};

static int mms__st_cmp_name(const void *a, const void *b) {
    return strcmp(((const struct mms__st_tensor *)a)->name, ((const struct mms__st_tensor *)b)->name);
}

static int mms__st_cmp_span(const void *a, const void *b) {
    const struct mms__st_tensor *x = *(const struct mms__st_tensor *const *)a, *y = *(const struct mms__st_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* One header entry: {"dtype": ..., "shape": [...], "data_offsets": [begin, end]} and nothing else. */
static enum mms_status mms__st_entry(struct mms_safetensors *st, int64_t v, const char *name, struct mms__st_tensor *t) {
    const struct mms_json *j = st->header;
    int64_t dt = mms_json_get(j, v, "dtype"), sh = mms_json_get(j, v, "shape"), off = mms_json_get(j, v, "data_offsets"), i, n;
    uint64_t bytes;
    size_t k;
    const char *dts;
    if (mms_json_type(j, v) != MMS_JSON_OBJECT)
        return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': tensor '%s': its entry is not an object", st->path, name);
    for (i = 0; i < mms_json_len(j, v); i++) {
        const char *key = mms_json_key(j, v, i, NULL);
        if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets"))
            return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': tensor '%s': unknown field \"%.40s\"", st->path, name, key);
    }
    if (!(dts = mms_json_str(j, dt, NULL)))
        return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': tensor '%s': field dtype is %s", st->path, name, dt < 0 ? "missing" : "not a string");
    t->name = name;
    t->dtype = dts;
    for (k = 0; k < sizeof mms__st_dtypes / sizeof mms__st_dtypes[0]; k++)
        if (!strcmp(dts, mms__st_dtypes[k].name)) break;
    if (k == sizeof mms__st_dtypes / sizeof mms__st_dtypes[0])
        return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': tensor '%s': unknown dtype \"%.20s\"", st->path, name, dts);
    t->type = mms__st_dtypes[k].type;
    if (mms_json_type(j, sh) != MMS_JSON_ARRAY || (n = mms_json_len(j, sh)) > 8)
        return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': tensor '%s': field shape is %s", st->path, name,
                             sh < 0 ? "missing" : mms_json_type(j, sh) != MMS_JSON_ARRAY ? "not an array" : "longer than 8 dimensions");
    t->n_dims = (int)n;
    bytes = (uint64_t)mms__st_dtypes[k].size;
    for (i = 0; i < n; i++) {
        int64_t d;
        if (!mms_json_int(j, mms_json_at(j, sh, i), &d) || d < 0)
            return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': tensor '%s': shape[%lld] is not a non-negative integer", st->path, name, (long long)i);
        t->shape[i] = d;
        if (d != 0 && bytes > UINT64_MAX / (uint64_t)d)
            return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': tensor '%s': shape overflows a byte count", st->path, name);
        bytes *= (uint64_t)d;
    }
    {
        int64_t b, e;
        if (mms_json_type(j, off) != MMS_JSON_ARRAY || mms_json_len(j, off) != 2 || !mms_json_int(j, mms_json_at(j, off, 0), &b) ||
            !mms_json_int(j, mms_json_at(j, off, 1), &e) || b < 0 || e < b)
            return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': tensor '%s': field data_offsets must be [begin, end] with 0 <= begin <= end",
                                 st->path, name);
        t->begin = (uint64_t)b;
        t->end = (uint64_t)e;
    }
    if (t->end > st->data_size)
        return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': tensor '%s': data_offsets end %llu is past the data (%zu bytes)", st->path, name,
                             (unsigned long long)t->end, st->data_size);
    if (t->end - t->begin != bytes)
        return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': tensor '%s': data_offsets span %llu bytes, dtype %s and its shape need %llu",
                             st->path, name, (unsigned long long)(t->end - t->begin), dts, (unsigned long long)bytes);
    return MMS_OK;
}

static enum mms_status mms__st_parse(struct mms_safetensors *st) {
    uint64_t n_header = 0;
    int64_t root, i, m;
    struct mms__st_tensor **by_span;
    char where[512];
    int b;
    if (st->size < 8)
        return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': truncated: %zu bytes, the header length alone needs 8", st->path, st->size);
    for (b = 7; b >= 0; b--) n_header = (n_header << 8) | st->base[b];
    if (n_header > st->size - 8)
        return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': header length %llu is past the end of the file (%zu bytes)", st->path,
                             (unsigned long long)n_header, st->size);
    if (n_header < 2 || n_header > ((uint64_t)100 << 20))
        return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': header length %llu is outside 2 bytes to 100 MiB", st->path, (unsigned long long)n_header);
    snprintf(where, sizeof where, "safetensors '%s' header", st->path);
    if (!(st->header = mms_json_parse((const char *)st->base + 8, (size_t)n_header, where))) return mms_last_status();
    st->data = st->base + 8 + n_header;
    st->data_size = st->size - 8 - (size_t)n_header;
    root = 0;
    if (mms_json_type(st->header, root) != MMS_JSON_OBJECT)
        return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': the header is not a JSON object", st->path);
    st->metadata = -1;
    m = mms_json_len(st->header, root);
    st->t = (struct mms__st_tensor *)MMS_MALLOC(sizeof *st->t * (size_t)(m + 1));
    if (!st->t) return mms_set_error(MMS_ERR_OOM, "safetensors '%s': out of memory", st->path);
    for (i = 0; i < m; i++) {
        const char *name = mms_json_key(st->header, root, i, NULL);
        int64_t v = mms_json_at(st->header, root, i);
        enum mms_status s;
        if (!strcmp(name, "__metadata__")) {
            int64_t k;
            if (mms_json_type(st->header, v) != MMS_JSON_OBJECT)
                return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': __metadata__ is not an object", st->path);
            for (k = 0; k < mms_json_len(st->header, v); k++)
                if (mms_json_type(st->header, mms_json_at(st->header, v, k)) != MMS_JSON_STRING)
                    return mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': __metadata__ value \"%.40s\" is not a string", st->path,
                                         mms_json_key(st->header, v, k, NULL));
            st->metadata = v;
            continue;
        }
        memset(&st->t[st->n], 0, sizeof st->t[st->n]);
        if ((s = mms__st_entry(st, v, name, &st->t[st->n])) != MMS_OK) return s;
        st->n++;
    }
    /* the tensors tile the data exactly: no overlap, no hole */
    by_span = (struct mms__st_tensor **)MMS_MALLOC(sizeof *by_span * (size_t)(st->n + 1));
    if (!by_span) return mms_set_error(MMS_ERR_OOM, "safetensors '%s': out of memory", st->path);
    for (i = 0; i < st->n; i++) by_span[i] = &st->t[i];
    qsort(by_span, (size_t)st->n, sizeof *by_span, mms__st_cmp_span);
    {
        uint64_t at = 0;
        enum mms_status s = MMS_OK;
        for (i = 0; i < st->n && s == MMS_OK; i++) {
            if (by_span[i]->begin < at)
                s = mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': tensor '%s' (bytes %llu..%llu) overlaps tensor '%s'", st->path, by_span[i]->name,
                                  (unsigned long long)by_span[i]->begin, (unsigned long long)by_span[i]->end, by_span[i - 1]->name);
            else if (by_span[i]->begin > at)
                s = mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': bytes %llu..%llu of the data belong to no tensor (before '%s')", st->path,
                                  (unsigned long long)at, (unsigned long long)by_span[i]->begin, by_span[i]->name);
            at = by_span[i]->end;
        }
        if (s == MMS_OK && at != st->data_size)
            s = mms_set_error(MMS_ERR_FORMAT, "safetensors '%s': the last %llu bytes of the data belong to no tensor", st->path,
                              (unsigned long long)(st->data_size - at));
        MMS_FREE(by_span);
        if (s != MMS_OK) return s;
    }
    qsort(st->t, (size_t)st->n, sizeof *st->t, mms__st_cmp_name);
    return MMS_OK;
}

static struct mms_safetensors *mms__st_new(const char *name) {
    struct mms_safetensors *st = (struct mms_safetensors *)MMS_MALLOC(sizeof *st);
    if (!st) { mms_set_error(MMS_ERR_OOM, "safetensors: out of memory"); return NULL; }
    memset(st, 0, sizeof *st);
    st->metadata = -1;
    if (!(st->path = mms__str_copy(name ? name : "(memory)"))) { MMS_FREE(st); mms_set_error(MMS_ERR_OOM, "safetensors: out of memory"); return NULL; }
    return st;
}

MMS_API struct mms_safetensors *mms_safetensors_open(const char *path) {
    struct mms_safetensors *st;
    if (!path) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_safetensors_open: path is NULL"); return NULL; }
    if (!(st = mms__st_new(path))) return NULL;
    if (mms__map_file(path, &st->map) != MMS_OK) { mms_safetensors_close(st); return NULL; }
    st->base = (const uint8_t *)st->map.addr;
    st->size = st->map.size;
    if (mms__st_parse(st) != MMS_OK) { mms_safetensors_close(st); return NULL; }
    return st;
}

MMS_API struct mms_safetensors *mms_safetensors_open_memory(const void *data, size_t size, const char *name) {
    struct mms_safetensors *st;
    if (!data && size) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_safetensors_open_memory: data is NULL"); return NULL; }
    if (!(st = mms__st_new(name))) return NULL;
    st->base = (const uint8_t *)data;
    st->size = size;
    if (mms__st_parse(st) != MMS_OK) { mms_safetensors_close(st); return NULL; }
    return st;
}

MMS_API void mms_safetensors_close(struct mms_safetensors *st) {
    if (!st) return;
    mms__unmap_file(&st->map);
    mms_json_free(st->header);
    MMS_FREE(st->t);
    MMS_FREE(st->path);
    MMS_FREE(st);
}

MMS_API const char *mms_safetensors_path(const struct mms_safetensors *st) { return st ? st->path : ""; }
MMS_API int64_t mms_safetensors_n_tensors(const struct mms_safetensors *st) { return st ? st->n : 0; }
MMS_API const struct mms_json *mms_safetensors_header(const struct mms_safetensors *st) { return st ? st->header : NULL; }
MMS_API int64_t mms_safetensors_metadata(const struct mms_safetensors *st) { return st ? st->metadata : -1; }

MMS_API int64_t mms_safetensors_find(const struct mms_safetensors *st, const char *name) {
    int64_t lo = 0, hi;
    if (!st || !name) return -1;
    hi = st->n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(st->t[mid].name, name);
        if (c == 0) return mid;
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return -1;
}

MMS_API enum mms_status mms_safetensors_get(const struct mms_safetensors *st, int64_t i, struct mms_safetensors_info *info) {
    const struct mms__st_tensor *t;
    if (!st || !info || i < 0 || i >= st->n) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_safetensors_get: no tensor %lld", (long long)i);
    t = &st->t[i];
    memset(info, 0, sizeof *info);
    info->name = t->name;
    info->dtype = t->dtype;
    info->type = t->type;
    info->n_dims = t->n_dims;
    memcpy(info->shape, t->shape, sizeof info->shape);
    info->size = (size_t)(t->end - t->begin);
    info->data = st->data + t->begin;
    return MMS_OK;
}
/* ==== end src/formats/safetensors.c ==== */

#endif

#ifndef MMS_NO_TEXT   /* the parts below are left out under this option */

/* ==== begin src/text/unicode_tables.c ==== */
/* >>text-unicode ==================================================================================
   Generated by tools/gen_unicode_tables.py from Python's unicodedata 14.0.0
   (Oniguruma's version in HF tokenizers); do not edit. Classes of the Llama 3 pre-tokenizer rule:
   LETTER \p{L}, NUMBER \p{N}, SPACE \s (U+0009-000D, U+0085, Zs, Zl, Zp), OTHER the rest.
   Runs over the whole code space: (first code point << 8) | class, sorted. */

enum { MMS__UNI_OTHER = 0, MMS__UNI_LETTER = 1, MMS__UNI_NUMBER = 2, MMS__UNI_SPACE = 3 };

static const uint32_t mms__uni_runs[1534] = {
    0x00000000, 0x00000903, 0x00000e00, 0x00002003, 0x00002100, 0x00003002, 0x00003a00, 0x00004101, 0x00005b00, 0x00006101,
    0x00007b00, 0x00008503, 0x00008600, 0x0000a003, 0x0000a100, 0x0000aa01, 0x0000ab00, 0x0000b202, 0x0000b400, 0x0000b501,
    0x0000b600, 0x0000b902, 0x0000ba01, 0x0000bb00, 0x0000bc02, 0x0000bf00, 0x0000c001, 0x0000d700, 0x0000d801, 0x0000f700,
    0x0000f801, 0x0002c200, 0x0002c601, 0x0002d200, 0x0002e001, 0x0002e500, 0x0002ec01, 0x0002ed00, 0x0002ee01, 0x0002ef00,
    0x00037001, 0x00037500, 0x00037601, 0x00037800, 0x00037a01, 0x00037e00, 0x00037f01, 0x00038000, 0x00038601, 0x00038700,
    0x00038801, 0x00038b00, 0x00038c01, 0x00038d00, 0x00038e01, 0x0003a200, 0x0003a301, 0x0003f600, 0x0003f701, 0x00048200,
    0x00048a01, 0x00053000, 0x00053101, 0x00055700, 0x00055901, 0x00055a00, 0x00056001, 0x00058900, 0x0005d001, 0x0005eb00,
    0x0005ef01, 0x0005f300, 0x00062001, 0x00064b00, 0x00066002, 0x00066a00, 0x00066e01, 0x00067000, 0x00067101, 0x0006d400,
    0x0006d501, 0x0006d600, 0x0006e501, 0x0006e700, 0x0006ee01, 0x0006f002, 0x0006fa01, 0x0006fd00, 0x0006ff01, 0x00070000,
    0x00071001, 0x00071100, 0x00071201, 0x00073000, 0x00074d01, 0x0007a600, 0x0007b101, 0x0007b200, 0x0007c002, 0x0007ca01,
    0x0007eb00, 0x0007f401, 0x0007f600, 0x0007fa01, 0x0007fb00, 0x00080001, 0x00081600, 0x00081a01, 0x00081b00, 0x00082401,
    0x00082500, 0x00082801, 0x00082900, 0x00084001, 0x00085900, 0x00086001, 0x00086b00, 0x00087001, 0x00088800, 0x00088901,
    0x00088f00, 0x0008a001, 0x0008ca00, 0x00090401, 0x00093a00, 0x00093d01, 0x00093e00, 0x00095001, 0x00095100, 0x00095801,
    0x00096200, 0x00096602, 0x00097000, 0x00097101, 0x00098100, 0x00098501, 0x00098d00, 0x00098f01, 0x00099100, 0x00099301,
    0x0009a900, 0x0009aa01, 0x0009b100, 0x0009b201, 0x0009b300, 0x0009b601, 0x0009ba00, 0x0009bd01, 0x0009be00, 0x0009ce01,
    0x0009cf00, 0x0009dc01, 0x0009de00, 0x0009df01, 0x0009e200, 0x0009e602, 0x0009f001, 0x0009f200, 0x0009f402, 0x0009fa00,
    0x0009fc01, 0x0009fd00, 0x000a0501, 0x000a0b00, 0x000a0f01, 0x000a1100, 0x000a1301, 0x000a2900, 0x000a2a01, 0x000a3100,
    0x000a3201, 0x000a3400, 0x000a3501, 0x000a3700, 0x000a3801, 0x000a3a00, 0x000a5901, 0x000a5d00, 0x000a5e01, 0x000a5f00,
    0x000a6602, 0x000a7000, 0x000a7201, 0x000a7500, 0x000a8501, 0x000a8e00, 0x000a8f01, 0x000a9200, 0x000a9301, 0x000aa900,
    0x000aaa01, 0x000ab100, 0x000ab201, 0x000ab400, 0x000ab501, 0x000aba00, 0x000abd01, 0x000abe00, 0x000ad001, 0x000ad100,
    0x000ae001, 0x000ae200, 0x000ae602, 0x000af000, 0x000af901, 0x000afa00, 0x000b0501, 0x000b0d00, 0x000b0f01, 0x000b1100,
    0x000b1301, 0x000b2900, 0x000b2a01, 0x000b3100, 0x000b3201, 0x000b3400, 0x000b3501, 0x000b3a00, 0x000b3d01, 0x000b3e00,
    0x000b5c01, 0x000b5e00, 0x000b5f01, 0x000b6200, 0x000b6602, 0x000b7000, 0x000b7101, 0x000b7202, 0x000b7800, 0x000b8301,
    0x000b8400, 0x000b8501, 0x000b8b00, 0x000b8e01, 0x000b9100, 0x000b9201, 0x000b9600, 0x000b9901, 0x000b9b00, 0x000b9c01,
    0x000b9d00, 0x000b9e01, 0x000ba000, 0x000ba301, 0x000ba500, 0x000ba801, 0x000bab00, 0x000bae01, 0x000bba00, 0x000bd001,
    0x000bd100, 0x000be602, 0x000bf300, 0x000c0501, 0x000c0d00, 0x000c0e01, 0x000c1100, 0x000c1201, 0x000c2900, 0x000c2a01,
    0x000c3a00, 0x000c3d01, 0x000c3e00, 0x000c5801, 0x000c5b00, 0x000c5d01, 0x000c5e00, 0x000c6001, 0x000c6200, 0x000c6602,
    0x000c7000, 0x000c7802, 0x000c7f00, 0x000c8001, 0x000c8100, 0x000c8501, 0x000c8d00, 0x000c8e01, 0x000c9100, 0x000c9201,
    0x000ca900, 0x000caa01, 0x000cb400, 0x000cb501, 0x000cba00, 0x000cbd01, 0x000cbe00, 0x000cdd01, 0x000cdf00, 0x000ce001,
    0x000ce200, 0x000ce602, 0x000cf000, 0x000cf101, 0x000cf300, 0x000d0401, 0x000d0d00, 0x000d0e01, 0x000d1100, 0x000d1201,
    0x000d3b00, 0x000d3d01, 0x000d3e00, 0x000d4e01, 0x000d4f00, 0x000d5401, 0x000d5700, 0x000d5802, 0x000d5f01, 0x000d6200,
    0x000d6602, 0x000d7900, 0x000d7a01, 0x000d8000, 0x000d8501, 0x000d9700, 0x000d9a01, 0x000db200, 0x000db301, 0x000dbc00,
    0x000dbd01, 0x000dbe00, 0x000dc001, 0x000dc700, 0x000de602, 0x000df000, 0x000e0101, 0x000e3100, 0x000e3201, 0x000e3400,
    0x000e4001, 0x000e4700, 0x000e5002, 0x000e5a00, 0x000e8101, 0x000e8300, 0x000e8401, 0x000e8500, 0x000e8601, 0x000e8b00,
    0x000e8c01, 0x000ea400, 0x000ea501, 0x000ea600, 0x000ea701, 0x000eb100, 0x000eb201, 0x000eb400, 0x000ebd01, 0x000ebe00,
    0x000ec001, 0x000ec500, 0x000ec601, 0x000ec700, 0x000ed002, 0x000eda00, 0x000edc01, 0x000ee000, 0x000f0001, 0x000f0100,
    0x000f2002, 0x000f3400, 0x000f4001, 0x000f4800, 0x000f4901, 0x000f6d00, 0x000f8801, 0x000f8d00, 0x00100001, 0x00102b00,
    0x00103f01, 0x00104002, 0x00104a00, 0x00105001, 0x00105600, 0x00105a01, 0x00105e00, 0x00106101, 0x00106200, 0x00106501,
    0x00106700, 0x00106e01, 0x00107100, 0x00107501, 0x00108200, 0x00108e01, 0x00108f00, 0x00109002, 0x00109a00, 0x0010a001,
    0x0010c600, 0x0010c701, 0x0010c800, 0x0010cd01, 0x0010ce00, 0x0010d001, 0x0010fb00, 0x0010fc01, 0x00124900, 0x00124a01,
    0x00124e00, 0x00125001, 0x00125700, 0x00125801, 0x00125900, 0x00125a01, 0x00125e00, 0x00126001, 0x00128900, 0x00128a01,
    0x00128e00, 0x00129001, 0x0012b100, 0x0012b201, 0x0012b600, 0x0012b801, 0x0012bf00, 0x0012c001, 0x0012c100, 0x0012c201,
    0x0012c600, 0x0012c801, 0x0012d700, 0x0012d801, 0x00131100, 0x00131201, 0x00131600, 0x00131801, 0x00135b00, 0x00136902,
    0x00137d00, 0x00138001, 0x00139000, 0x0013a001, 0x0013f600, 0x0013f801, 0x0013fe00, 0x00140101, 0x00166d00, 0x00166f01,
    0x00168003, 0x00168101, 0x00169b00, 0x0016a001, 0x0016eb00, 0x0016ee02, 0x0016f101, 0x0016f900, 0x00170001, 0x00171200,
    0x00171f01, 0x00173200, 0x00174001, 0x00175200, 0x00176001, 0x00176d00, 0x00176e01, 0x00177100, 0x00178001, 0x0017b400,
    0x0017d701, 0x0017d800, 0x0017dc01, 0x0017dd00, 0x0017e002, 0x0017ea00, 0x0017f002, 0x0017fa00, 0x00181002, 0x00181a00,
    0x00182001, 0x00187900, 0x00188001, 0x00188500, 0x00188701, 0x0018a900, 0x0018aa01, 0x0018ab00, 0x0018b001, 0x0018f600,
    0x00190001, 0x00191f00, 0x00194602, 0x00195001, 0x00196e00, 0x00197001, 0x00197500, 0x00198001, 0x0019ac00, 0x0019b001,
    0x0019ca00, 0x0019d002, 0x0019db00, 0x001a0001, 0x001a1700, 0x001a2001, 0x001a5500, 0x001a8002, 0x001a8a00, 0x001a9002,
    0x001a9a00, 0x001aa701, 0x001aa800, 0x001b0501, 0x001b3400, 0x001b4501, 0x001b4d00, 0x001b5002, 0x001b5a00, 0x001b8301,
    0x001ba100, 0x001bae01, 0x001bb002, 0x001bba01, 0x001be600, 0x001c0001, 0x001c2400, 0x001c4002, 0x001c4a00, 0x001c4d01,
    0x001c5002, 0x001c5a01, 0x001c7e00, 0x001c8001, 0x001c8900, 0x001c9001, 0x001cbb00, 0x001cbd01, 0x001cc000, 0x001ce901,
    0x001ced00, 0x001cee01, 0x001cf400, 0x001cf501, 0x001cf700, 0x001cfa01, 0x001cfb00, 0x001d0001, 0x001dc000, 0x001e0001,
    0x001f1600, 0x001f1801, 0x001f1e00, 0x001f2001, 0x001f4600, 0x001f4801, 0x001f4e00, 0x001f5001, 0x001f5800, 0x001f5901,
    0x001f5a00, 0x001f5b01, 0x001f5c00, 0x001f5d01, 0x001f5e00, 0x001f5f01, 0x001f7e00, 0x001f8001, 0x001fb500, 0x001fb601,
    0x001fbd00, 0x001fbe01, 0x001fbf00, 0x001fc201, 0x001fc500, 0x001fc601, 0x001fcd00, 0x001fd001, 0x001fd400, 0x001fd601,
    0x001fdc00, 0x001fe001, 0x001fed00, 0x001ff201, 0x001ff500, 0x001ff601, 0x001ffd00, 0x00200003, 0x00200b00, 0x00202803,
    0x00202a00, 0x00202f03, 0x00203000, 0x00205f03, 0x00206000, 0x00207002, 0x00207101, 0x00207200, 0x00207402, 0x00207a00,
    0x00207f01, 0x00208002, 0x00208a00, 0x00209001, 0x00209d00, 0x00210201, 0x00210300, 0x00210701, 0x00210800, 0x00210a01,
    0x00211400, 0x00211501, 0x00211600, 0x00211901, 0x00211e00, 0x00212401, 0x00212500, 0x00212601, 0x00212700, 0x00212801,
    0x00212900, 0x00212a01, 0x00212e00, 0x00212f01, 0x00213a00, 0x00213c01, 0x00214000, 0x00214501, 0x00214a00, 0x00214e01,
    0x00214f00, 0x00215002, 0x00218301, 0x00218502, 0x00218a00, 0x00246002, 0x00249c00, 0x0024ea02, 0x00250000, 0x00277602,
    0x00279400, 0x002c0001, 0x002ce500, 0x002ceb01, 0x002cef00, 0x002cf201, 0x002cf400, 0x002cfd02, 0x002cfe00, 0x002d0001,
    0x002d2600, 0x002d2701, 0x002d2800, 0x002d2d01, 0x002d2e00, 0x002d3001, 0x002d6800, 0x002d6f01, 0x002d7000, 0x002d8001,
    0x002d9700, 0x002da001, 0x002da700, 0x002da801, 0x002daf00, 0x002db001, 0x002db700, 0x002db801, 0x002dbf00, 0x002dc001,
    0x002dc700, 0x002dc801, 0x002dcf00, 0x002dd001, 0x002dd700, 0x002dd801, 0x002ddf00, 0x002e2f01, 0x002e3000, 0x00300003,
    0x00300100, 0x00300501, 0x00300702, 0x00300800, 0x00302102, 0x00302a00, 0x00303101, 0x00303600, 0x00303802, 0x00303b01,
    0x00303d00, 0x00304101, 0x00309700, 0x00309d01, 0x0030a000, 0x0030a101, 0x0030fb00, 0x0030fc01, 0x00310000, 0x00310501,
    0x00313000, 0x00313101, 0x00318f00, 0x00319202, 0x00319600, 0x0031a001, 0x0031c000, 0x0031f001, 0x00320000, 0x00322002,
    0x00322a00, 0x00324802, 0x00325000, 0x00325102, 0x00326000, 0x00328002, 0x00328a00, 0x0032b102, 0x0032c000, 0x00340001,
    0x004dc000, 0x004e0001, 0x00a48d00, 0x00a4d001, 0x00a4fe00, 0x00a50001, 0x00a60d00, 0x00a61001, 0x00a62002, 0x00a62a01,
    0x00a62c00, 0x00a64001, 0x00a66f00, 0x00a67f01, 0x00a69e00, 0x00a6a001, 0x00a6e602, 0x00a6f000, 0x00a71701, 0x00a72000,
    0x00a72201, 0x00a78900, 0x00a78b01, 0x00a7cb00, 0x00a7d001, 0x00a7d200, 0x00a7d301, 0x00a7d400, 0x00a7d501, 0x00a7da00,
    0x00a7f201, 0x00a80200, 0x00a80301, 0x00a80600, 0x00a80701, 0x00a80b00, 0x00a80c01, 0x00a82300, 0x00a83002, 0x00a83600,
    0x00a84001, 0x00a87400, 0x00a88201, 0x00a8b400, 0x00a8d002, 0x00a8da00, 0x00a8f201, 0x00a8f800, 0x00a8fb01, 0x00a8fc00,
    0x00a8fd01, 0x00a8ff00, 0x00a90002, 0x00a90a01, 0x00a92600, 0x00a93001, 0x00a94700, 0x00a96001, 0x00a97d00, 0x00a98401,
    0x00a9b300, 0x00a9cf01, 0x00a9d002, 0x00a9da00, 0x00a9e001, 0x00a9e500, 0x00a9e601, 0x00a9f002, 0x00a9fa01, 0x00a9ff00,
    0x00aa0001, 0x00aa2900, 0x00aa4001, 0x00aa4300, 0x00aa4401, 0x00aa4c00, 0x00aa5002, 0x00aa5a00, 0x00aa6001, 0x00aa7700,
    0x00aa7a01, 0x00aa7b00, 0x00aa7e01, 0x00aab000, 0x00aab101, 0x00aab200, 0x00aab501, 0x00aab700, 0x00aab901, 0x00aabe00,
    0x00aac001, 0x00aac100, 0x00aac201, 0x00aac300, 0x00aadb01, 0x00aade00, 0x00aae001, 0x00aaeb00, 0x00aaf201, 0x00aaf500,
    0x00ab0101, 0x00ab0700, 0x00ab0901, 0x00ab0f00, 0x00ab1101, 0x00ab1700, 0x00ab2001, 0x00ab2700, 0x00ab2801, 0x00ab2f00,
    0x00ab3001, 0x00ab5b00, 0x00ab5c01, 0x00ab6a00, 0x00ab7001, 0x00abe300, 0x00abf002, 0x00abfa00, 0x00ac0001, 0x00d7a400,
    0x00d7b001, 0x00d7c700, 0x00d7cb01, 0x00d7fc00, 0x00f90001, 0x00fa6e00, 0x00fa7001, 0x00fada00, 0x00fb0001, 0x00fb0700,
    0x00fb1301, 0x00fb1800, 0x00fb1d01, 0x00fb1e00, 0x00fb1f01, 0x00fb2900, 0x00fb2a01, 0x00fb3700, 0x00fb3801, 0x00fb3d00,
    0x00fb3e01, 0x00fb3f00, 0x00fb4001, 0x00fb4200, 0x00fb4301, 0x00fb4500, 0x00fb4601, 0x00fbb200, 0x00fbd301, 0x00fd3e00,
    0x00fd5001, 0x00fd9000, 0x00fd9201, 0x00fdc800, 0x00fdf001, 0x00fdfc00, 0x00fe7001, 0x00fe7500, 0x00fe7601, 0x00fefd00,
    0x00ff1002, 0x00ff1a00, 0x00ff2101, 0x00ff3b00, 0x00ff4101, 0x00ff5b00, 0x00ff6601, 0x00ffbf00, 0x00ffc201, 0x00ffc800,
    0x00ffca01, 0x00ffd000, 0x00ffd201, 0x00ffd800, 0x00ffda01, 0x00ffdd00, 0x01000001, 0x01000c00, 0x01000d01, 0x01002700,
    0x01002801, 0x01003b00, 0x01003c01, 0x01003e00, 0x01003f01, 0x01004e00, 0x01005001, 0x01005e00, 0x01008001, 0x0100fb00,
    0x01010702, 0x01013400, 0x01014002, 0x01017900, 0x01018a02, 0x01018c00, 0x01028001, 0x01029d00, 0x0102a001, 0x0102d100,
    0x0102e102, 0x0102fc00, 0x01030001, 0x01032002, 0x01032400, 0x01032d01, 0x01034102, 0x01034201, 0x01034a02, 0x01034b00,
    0x01035001, 0x01037600, 0x01038001, 0x01039e00, 0x0103a001, 0x0103c400, 0x0103c801, 0x0103d000, 0x0103d102, 0x0103d600,
    0x01040001, 0x01049e00, 0x0104a002, 0x0104aa00, 0x0104b001, 0x0104d400, 0x0104d801, 0x0104fc00, 0x01050001, 0x01052800,
    0x01053001, 0x01056400, 0x01057001, 0x01057b00, 0x01057c01, 0x01058b00, 0x01058c01, 0x01059300, 0x01059401, 0x01059600,
    0x01059701, 0x0105a200, 0x0105a301, 0x0105b200, 0x0105b301, 0x0105ba00, 0x0105bb01, 0x0105bd00, 0x01060001, 0x01073700,
    0x01074001, 0x01075600, 0x01076001, 0x01076800, 0x01078001, 0x01078600, 0x01078701, 0x0107b100, 0x0107b201, 0x0107bb00,
    0x01080001, 0x01080600, 0x01080801, 0x01080900, 0x01080a01, 0x01083600, 0x01083701, 0x01083900, 0x01083c01, 0x01083d00,
    0x01083f01, 0x01085600, 0x01085802, 0x01086001, 0x01087700, 0x01087902, 0x01088001, 0x01089f00, 0x0108a702, 0x0108b000,
    0x0108e001, 0x0108f300, 0x0108f401, 0x0108f600, 0x0108fb02, 0x01090001, 0x01091602, 0x01091c00, 0x01092001, 0x01093a00,
    0x01098001, 0x0109b800, 0x0109bc02, 0x0109be01, 0x0109c002, 0x0109d000, 0x0109d202, 0x010a0001, 0x010a0100, 0x010a1001,
    0x010a1400, 0x010a1501, 0x010a1800, 0x010a1901, 0x010a3600, 0x010a4002, 0x010a4900, 0x010a6001, 0x010a7d02, 0x010a7f00,
    0x010a8001, 0x010a9d02, 0x010aa000, 0x010ac001, 0x010ac800, 0x010ac901, 0x010ae500, 0x010aeb02, 0x010af000, 0x010b0001,
    0x010b3600, 0x010b4001, 0x010b5600, 0x010b5802, 0x010b6001, 0x010b7300, 0x010b7802, 0x010b8001, 0x010b9200, 0x010ba902,
    0x010bb000, 0x010c0001, 0x010c4900, 0x010c8001, 0x010cb300, 0x010cc001, 0x010cf300, 0x010cfa02, 0x010d0001, 0x010d2400,
    0x010d3002, 0x010d3a00, 0x010e6002, 0x010e7f00, 0x010e8001, 0x010eaa00, 0x010eb001, 0x010eb200, 0x010f0001, 0x010f1d02,
    0x010f2701, 0x010f2800, 0x010f3001, 0x010f4600, 0x010f5102, 0x010f5500, 0x010f7001, 0x010f8200, 0x010fb001, 0x010fc502,
    0x010fcc00, 0x010fe001, 0x010ff700, 0x01100301, 0x01103800, 0x01105202, 0x01107000, 0x01107101, 0x01107300, 0x01107501,
    0x01107600, 0x01108301, 0x0110b000, 0x0110d001, 0x0110e900, 0x0110f002, 0x0110fa00, 0x01110301, 0x01112700, 0x01113602,
    0x01114000, 0x01114401, 0x01114500, 0x01114701, 0x01114800, 0x01115001, 0x01117300, 0x01117601, 0x01117700, 0x01118301,
    0x0111b300, 0x0111c101, 0x0111c500, 0x0111d002, 0x0111da01, 0x0111db00, 0x0111dc01, 0x0111dd00, 0x0111e102, 0x0111f500,
    0x01120001, 0x01121200, 0x01121301, 0x01122c00, 0x01128001, 0x01128700, 0x01128801, 0x01128900, 0x01128a01, 0x01128e00,
    0x01128f01, 0x01129e00, 0x01129f01, 0x0112a900, 0x0112b001, 0x0112df00, 0x0112f002, 0x0112fa00, 0x01130501, 0x01130d00,
    0x01130f01, 0x01131100, 0x01131301, 0x01132900, 0x01132a01, 0x01133100, 0x01133201, 0x01133400, 0x01133501, 0x01133a00,
    0x01133d01, 0x01133e00, 0x01135001, 0x01135100, 0x01135d01, 0x01136200, 0x01140001, 0x01143500, 0x01144701, 0x01144b00,
    0x01145002, 0x01145a00, 0x01145f01, 0x01146200, 0x01148001, 0x0114b000, 0x0114c401, 0x0114c600, 0x0114c701, 0x0114c800,
    0x0114d002, 0x0114da00, 0x01158001, 0x0115af00, 0x0115d801, 0x0115dc00, 0x01160001, 0x01163000, 0x01164401, 0x01164500,
    0x01165002, 0x01165a00, 0x01168001, 0x0116ab00, 0x0116b801, 0x0116b900, 0x0116c002, 0x0116ca00, 0x01170001, 0x01171b00,
    0x01173002, 0x01173c00, 0x01174001, 0x01174700, 0x01180001, 0x01182c00, 0x0118a001, 0x0118e002, 0x0118f300, 0x0118ff01,
    0x01190700, 0x01190901, 0x01190a00, 0x01190c01, 0x01191400, 0x01191501, 0x01191700, 0x01191801, 0x01193000, 0x01193f01,
    0x01194000, 0x01194101, 0x01194200, 0x01195002, 0x01195a00, 0x0119a001, 0x0119a800, 0x0119aa01, 0x0119d100, 0x0119e101,
    0x0119e200, 0x0119e301, 0x0119e400, 0x011a0001, 0x011a0100, 0x011a0b01, 0x011a3300, 0x011a3a01, 0x011a3b00, 0x011a5001,
    0x011a5100, 0x011a5c01, 0x011a8a00, 0x011a9d01, 0x011a9e00, 0x011ab001, 0x011af900, 0x011c0001, 0x011c0900, 0x011c0a01,
    0x011c2f00, 0x011c4001, 0x011c4100, 0x011c5002, 0x011c6d00, 0x011c7201, 0x011c9000, 0x011d0001, 0x011d0700, 0x011d0801,
    0x011d0a00, 0x011d0b01, 0x011d3100, 0x011d4601, 0x011d4700, 0x011d5002, 0x011d5a00, 0x011d6001, 0x011d6600, 0x011d6701,
    0x011d6900, 0x011d6a01, 0x011d8a00, 0x011d9801, 0x011d9900, 0x011da002, 0x011daa00, 0x011ee001, 0x011ef300, 0x011fb001,
    0x011fb100, 0x011fc002, 0x011fd500, 0x01200001, 0x01239a00, 0x01240002, 0x01246f00, 0x01248001, 0x01254400, 0x012f9001,
    0x012ff100, 0x01300001, 0x01342f00, 0x01440001, 0x01464700, 0x01680001, 0x016a3900, 0x016a4001, 0x016a5f00, 0x016a6002,
    0x016a6a00, 0x016a7001, 0x016abf00, 0x016ac002, 0x016aca00, 0x016ad001, 0x016aee00, 0x016b0001, 0x016b3000, 0x016b4001,
    0x016b4400, 0x016b5002, 0x016b5a00, 0x016b5b02, 0x016b6200, 0x016b6301, 0x016b7800, 0x016b7d01, 0x016b9000, 0x016e4001,
    0x016e8002, 0x016e9700, 0x016f0001, 0x016f4b00, 0x016f5001, 0x016f5100, 0x016f9301, 0x016fa000, 0x016fe001, 0x016fe200,
    0x016fe301, 0x016fe400, 0x01700001, 0x0187f800, 0x01880001, 0x018cd600, 0x018d0001, 0x018d0900, 0x01aff001, 0x01aff400,
    0x01aff501, 0x01affc00, 0x01affd01, 0x01afff00, 0x01b00001, 0x01b12300, 0x01b15001, 0x01b15300, 0x01b16401, 0x01b16800,
    0x01b17001, 0x01b2fc00, 0x01bc0001, 0x01bc6b00, 0x01bc7001, 0x01bc7d00, 0x01bc8001, 0x01bc8900, 0x01bc9001, 0x01bc9a00,
    0x01d2e002, 0x01d2f400, 0x01d36002, 0x01d37900, 0x01d40001, 0x01d45500, 0x01d45601, 0x01d49d00, 0x01d49e01, 0x01d4a000,
    0x01d4a201, 0x01d4a300, 0x01d4a501, 0x01d4a700, 0x01d4a901, 0x01d4ad00, 0x01d4ae01, 0x01d4ba00, 0x01d4bb01, 0x01d4bc00,
    0x01d4bd01, 0x01d4c400, 0x01d4c501, 0x01d50600, 0x01d50701, 0x01d50b00, 0x01d50d01, 0x01d51500, 0x01d51601, 0x01d51d00,
    0x01d51e01, 0x01d53a00, 0x01d53b01, 0x01d53f00, 0x01d54001, 0x01d54500, 0x01d54601, 0x01d54700, 0x01d54a01, 0x01d55100,
    0x01d55201, 0x01d6a600, 0x01d6a801, 0x01d6c100, 0x01d6c201, 0x01d6db00, 0x01d6dc01, 0x01d6fb00, 0x01d6fc01, 0x01d71500,
    0x01d71601, 0x01d73500, 0x01d73601, 0x01d74f00, 0x01d75001, 0x01d76f00, 0x01d77001, 0x01d78900, 0x01d78a01, 0x01d7a900,
    0x01d7aa01, 0x01d7c300, 0x01d7c401, 0x01d7cc00, 0x01d7ce02, 0x01d80000, 0x01df0001, 0x01df1f00, 0x01e10001, 0x01e12d00,
    0x01e13701, 0x01e13e00, 0x01e14002, 0x01e14a00, 0x01e14e01, 0x01e14f00, 0x01e29001, 0x01e2ae00, 0x01e2c001, 0x01e2ec00,
    0x01e2f002, 0x01e2fa00, 0x01e7e001, 0x01e7e700, 0x01e7e801, 0x01e7ec00, 0x01e7ed01, 0x01e7ef00, 0x01e7f001, 0x01e7ff00,
    0x01e80001, 0x01e8c500, 0x01e8c702, 0x01e8d000, 0x01e90001, 0x01e94400, 0x01e94b01, 0x01e94c00, 0x01e95002, 0x01e95a00,
    0x01ec7102, 0x01ecac00, 0x01ecad02, 0x01ecb000, 0x01ecb102, 0x01ecb500, 0x01ed0102, 0x01ed2e00, 0x01ed2f02, 0x01ed3e00,
    0x01ee0001, 0x01ee0400, 0x01ee0501, 0x01ee2000, 0x01ee2101, 0x01ee2300, 0x01ee2401, 0x01ee2500, 0x01ee2701, 0x01ee2800,
    0x01ee2901, 0x01ee3300, 0x01ee3401, 0x01ee3800, 0x01ee3901, 0x01ee3a00, 0x01ee3b01, 0x01ee3c00, 0x01ee4201, 0x01ee4300,
    0x01ee4701, 0x01ee4800, 0x01ee4901, 0x01ee4a00, 0x01ee4b01, 0x01ee4c00, 0x01ee4d01, 0x01ee5000, 0x01ee5101, 0x01ee5300,
    0x01ee5401, 0x01ee5500, 0x01ee5701, 0x01ee5800, 0x01ee5901, 0x01ee5a00, 0x01ee5b01, 0x01ee5c00, 0x01ee5d01, 0x01ee5e00,
    0x01ee5f01, 0x01ee6000, 0x01ee6101, 0x01ee6300, 0x01ee6401, 0x01ee6500, 0x01ee6701, 0x01ee6b00, 0x01ee6c01, 0x01ee7300,
    0x01ee7401, 0x01ee7800, 0x01ee7901, 0x01ee7d00, 0x01ee7e01, 0x01ee7f00, 0x01ee8001, 0x01ee8a00, 0x01ee8b01, 0x01ee9c00,
    0x01eea101, 0x01eea400, 0x01eea501, 0x01eeaa00, 0x01eeab01, 0x01eebc00, 0x01f10002, 0x01f10d00, 0x01fbf002, 0x01fbfa00,
    0x02000001, 0x02a6e000, 0x02a70001, 0x02b73900, 0x02b74001, 0x02b81e00, 0x02b82001, 0x02cea200, 0x02ceb001, 0x02ebe100,
    0x02f80001, 0x02fa1e00, 0x03000001, 0x03134b00,
};

/* Non-ASCII code points that (?i:...) matches as one of the contraction letters. */
static const uint32_t mms__uni_fold[1][2] = {
    { 0x017f, 's' },   /* LATIN SMALL LETTER LONG S */
};

static int mms__uni_class(uint32_t cp) {
    size_t lo = 0, hi = sizeof mms__uni_runs / sizeof mms__uni_runs[0];
    if (cp < 0x80) {   /* the common case, without the search */
        if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return MMS__UNI_LETTER;
        if (cp >= '0' && cp <= '9') return MMS__UNI_NUMBER;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return MMS__UNI_SPACE;
        return MMS__UNI_OTHER;
    }
    if (cp > 0x10FFFF) return MMS__UNI_OTHER;
    while (hi - lo > 1) {   /* the last run starting at or before cp */
        size_t mid = (lo + hi) / 2;
        if ((mms__uni_runs[mid] >> 8) <= cp) lo = mid; else hi = mid;
    }
    return (int)(mms__uni_runs[lo] & 0xFF);
}

/* The ASCII lower-case letter cp folds to for the contractions, or 0. */
static int mms__uni_contraction_letter(uint32_t cp) {
    size_t i;
    if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? (int)(cp + 32) : (cp >= 'a' && cp <= 'z') ? (int)cp : 0;
    for (i = 0; i < sizeof mms__uni_fold / sizeof mms__uni_fold[0]; i++)
        if (mms__uni_fold[i][0] == cp) return (int)mms__uni_fold[i][1];
    return 0;
}
/* ==== end src/text/unicode_tables.c ==== */

/* ==== begin src/text/tokenizer.c ==== */
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

/* One UTF-8 unit at s[0..n), n >= 1: returns its length > 0 with *cp for a valid character, or
   -len for an invalid maximal subpart (Unicode's "best practice", which Python and Rust follow);
   *incomplete is set when that subpart is a valid prefix cut by the end of the data. */
static int mms__tok_utf8_unit(const unsigned char *s, size_t n, uint32_t *cp, bool *incomplete) {
    unsigned b0 = s[0], lo, hi, need, k;
    uint32_t c;
    *incomplete = false;
    if (b0 < 0x80) { *cp = b0; return 1; }
    if (b0 < 0xC2 || b0 > 0xF4) return -1;
    if (b0 < 0xE0) { need = 1; lo = 0x80; hi = 0xBF; c = b0 & 0x1F; }
    else if (b0 < 0xF0) { need = 2; lo = b0 == 0xE0 ? 0xA0 : 0x80; hi = b0 == 0xED ? 0x9F : 0xBF; c = b0 & 0x0F; }
    else { need = 3; lo = b0 == 0xF0 ? 0x90 : 0x80; hi = b0 == 0xF4 ? 0x8F : 0xBF; c = b0 & 0x07; }
    for (k = 1; k <= need; k++) {
        unsigned b;
        if (k >= n) { *incomplete = true; return -(int)k; }
        b = s[k];
        if (b < (k == 1 ? lo : 0x80u) || b > (k == 1 ? hi : 0xBFu)) return -(int)k;
        c = (c << 6) | (b & 0x3F);
    }
    *cp = c;
    return (int)need + 1;
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
};

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
/* ==== end src/text/tokenizer.c ==== */

/* ==== begin src/text/chat.c ==== */
/* >>text-chat =====================================================================================
   The instruct chat template of Llama 3.2 Vision, written out in C: the model's Jinja template
   has one path for conversations without tools, and that path is all this renders. */

/* Appends to a bounded buffer while counting the full length, like a chain of snprintf calls. */
struct mms__chat_out {
    char  *buf;
    size_t cap, len;
};

static void mms__chat_put(struct mms__chat_out *o, const char *s, size_t n) {
    if (o->len < o->cap) {
        size_t room = o->cap - o->len, k = n < room ? n : room;
        memcpy(o->buf + o->len, s, k);
    }
    o->len += n;
}
static void mms__chat_puts(struct mms__chat_out *o, const char *s) { mms__chat_put(o, s, strlen(s)); }

/* Length of the whitespace code point at s (as Python's str.isspace, which Jinja's trim uses), or 0. */
static size_t mms__chat_space_len(const unsigned char *s, size_t n) {
    uint32_t c;
    if (n >= 1 && ((s[0] >= 0x09 && s[0] <= 0x0d) || (s[0] >= 0x1c && s[0] <= 0x20))) return 1;
    if (n >= 2 && s[0] == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0)) return 2;
    if (n < 3 || (s[0] & 0xf0) != 0xe0) return 0;
    c = ((uint32_t)(s[0] & 0x0f) << 12) | ((uint32_t)(s[1] & 0x3f) << 6) | (uint32_t)(s[2] & 0x3f);
    return c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000 ? 3 : 0;
}

/* s as a JSON string, as the template's tojson filter writes it in transformers (non-ASCII kept). */
static void mms__chat_put_json(struct mms__chat_out *o, const char *s) {
    static const char hex[] = "0123456789abcdef";
    mms__chat_puts(o, "\"");
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        char esc[7] = { '\\', 'u', '0', '0', 0, 0, 0 };
        if (c == '"' || c == '\\') { esc[1] = (char)c; mms__chat_put(o, esc, 2); }
        else if (c == '\n') mms__chat_puts(o, "\\n");
        else if (c == '\r') mms__chat_puts(o, "\\r");
        else if (c == '\t') mms__chat_puts(o, "\\t");
        else if (c == '\b') mms__chat_puts(o, "\\b");
        else if (c == '\f') mms__chat_puts(o, "\\f");
        else if (c < 0x20) { esc[4] = hex[c >> 4]; esc[5] = hex[c & 15]; mms__chat_put(o, esc, 6); }
        else mms__chat_put(o, s, 1);
    }
    mms__chat_puts(o, "\"");
}

/* Whitespace-trimmed [*start, *end) of s. */
static void mms__chat_trim(const char *s, size_t *start, size_t *end) {
    const unsigned char *u = (const unsigned char *)s;
    size_t a = 0, b = strlen(s), k;
    while (a < b && (k = mms__chat_space_len(u + a, b - a)) > 0) a += k;
    while (b > a) {   /* step back over one code point, then test it */
        size_t p = b - 1;
        while (p > a && (u[p] & 0xc0) == 0x80) p--;
        if (mms__chat_space_len(u + p, b - p) != b - p) break;
        b = p;
    }
    *start = a;
    *end = b;
}

MMS_API int mms_chat_apply_template(const struct mms_chat_message *msgs, int n, bool add_generation_prompt, const char *date,
                                    char *buf, size_t cap) {
    struct mms__chat_out o;
    const struct mms_chat_message *system = NULL;
    bool has_images = false;
    int i, j;
    if (!msgs || n < 1 || (!buf && cap > 0))
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_chat_apply_template: at least one message (got %d) and a buffer of cap bytes are required", n);
    for (i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].role[0])
            return mms_set_error(MMS_ERR_INVALID_ARG, "mms_chat_apply_template: message %d has no role", i);
        if (msgs[i].n_images > 0 && (strcmp(msgs[i].role, "tool") == 0 || strcmp(msgs[i].role, "ipython") == 0))
            return mms_set_error(MMS_ERR_INVALID_ARG, "mms_chat_apply_template: message %d (%s) cannot hold images", i, msgs[i].role);
        if (msgs[i].n_images < 0) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_chat_apply_template: message %d has %d images", i, msgs[i].n_images);
    }
    if (n > 0 && strcmp(msgs[0].role, "system") == 0) {
        system = msgs;
        msgs++;
        n--;
        if (system->n_images > 0)
            return mms_set_error(MMS_ERR_INVALID_ARG, "mms_chat_apply_template: the system message cannot hold images");
    }
    for (i = 0; i < n; i++) has_images |= msgs[i].n_images > 0;

    o.buf = buf;
    o.cap = cap;
    o.len = 0;
    mms__chat_puts(&o, "<|begin_of_text|>");
    {
        size_t a = 0, b = 0;
        if (system && system->text) mms__chat_trim(system->text, &a, &b);
        if (has_images && b > a)
            return mms_set_error(MMS_ERR_INVALID_ARG, "mms_chat_apply_template: prompting with images is incompatible with system "
                                 "messages (the model's template forbids it)");
        if (!has_images) {
            mms__chat_puts(&o, "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: ");
            mms__chat_puts(&o, date ? date : "26 Jul 2024");
            mms__chat_puts(&o, "\n\n");
            if (b > a) mms__chat_put(&o, system->text + a, b - a);
            mms__chat_puts(&o, "<|eot_id|>");
        }
    }
    for (i = 0; i < n; i++) {
        const bool tool = strcmp(msgs[i].role, "tool") == 0 || strcmp(msgs[i].role, "ipython") == 0;
        mms__chat_puts(&o, "<|start_header_id|>");
        mms__chat_puts(&o, tool ? "ipython" : msgs[i].role);
        mms__chat_puts(&o, "<|end_header_id|>\n\n");
        if (tool) {   /* the template writes tool output through tojson */
            mms__chat_put_json(&o, msgs[i].text ? msgs[i].text : "");
        } else {
            for (j = 0; j < msgs[i].n_images; j++) mms__chat_puts(&o, "<|image|>");
            if (msgs[i].text) mms__chat_puts(&o, msgs[i].text);
        }
        mms__chat_puts(&o, "<|eot_id|>");
    }
    if (add_generation_prompt) mms__chat_puts(&o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    if (cap > 0) buf[o.len < cap ? o.len : cap - 1] = '\0';
    if (o.len > (size_t)INT_MAX) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_chat_apply_template: the conversation is over 2 GiB");
    return (int)o.len;
}
/* ==== end src/text/chat.c ==== */

/* ==== begin src/text/sampling.c ==== */
/* >>text-sampling =================================================================================
   Sampling in transformers' order (repetition penalty, temperature, top-k, top-p, min-p, draw).
   Filters work on a list of candidates sorted by logit, so each is a cut of that list; the
   arithmetic is in double so that the cuts land where float32 references put them except on
   exact ties. */

struct mms_sampler {
    struct mms_sampler_params p;
    uint64_t                  state;
    int32_t                  *history;       /* ring of the last repeat_last_n tokens, or all of them */
    int                       n_history, cap_history, head;
    /* scratch, grown to the vocabulary */
    int32_t                  *ids;
    double                   *vals;
    int                       cap;
};

MMS_API struct mms_sampler_params mms_sampler_default_params(void) {
    struct mms_sampler_params p;
    memset(&p, 0, sizeof p);
    p.top_p = 1.0f;
    p.repeat_penalty = 1.0f;
    return p;
}

static uint64_t mms__splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

MMS_API struct mms_sampler *mms_sampler_new(const struct mms_sampler_params *params) {
    struct mms_sampler_params p = params ? *params : mms_sampler_default_params();
    struct mms_sampler *s;
    if (!(p.temperature >= 0.0f && p.temperature <= FLT_MAX) || p.top_k < 0 || !(p.top_p >= 0.0f && p.top_p <= 1.0f) ||
        !(p.min_p >= 0.0f && p.min_p <= 1.0f) || !(p.repeat_penalty >= 0.0f && p.repeat_penalty <= FLT_MAX) || p.repeat_last_n < 0) {
        mms_set_error(MMS_ERR_INVALID_ARG, "mms_sampler_new: out of range: temperature %g (finite, >= 0), top_k %d (>= 0), top_p %g "
                      "(0..1), min_p %g (0..1), repeat_penalty %g (finite, >= 0), repeat_last_n %d (>= 0)", (double)p.temperature, p.top_k,
                      (double)p.top_p, (double)p.min_p, (double)p.repeat_penalty, p.repeat_last_n);
        return NULL;
    }
    if (p.top_p == 0.0f) p.top_p = 1.0f;                      /* zeroed fields mean off */
    if (p.repeat_penalty == 0.0f) p.repeat_penalty = 1.0f;
    if (!(s = (struct mms_sampler *)MMS_MALLOC(sizeof *s))) { mms_set_error(MMS_ERR_OOM, "mms_sampler_new: out of host memory"); return NULL; }
    memset(s, 0, sizeof *s);
    s->p = p;
    s->state = p.seed;
    return s;
}

MMS_API void mms_sampler_free(struct mms_sampler *s) {
    if (!s) return;
    MMS_FREE(s->history);
    MMS_FREE(s->ids);
    MMS_FREE(s->vals);
    MMS_FREE(s);
}

MMS_API void mms_sampler_reset(struct mms_sampler *s) {
    if (!s) return;
    s->n_history = s->head = 0;
    s->state = s->p.seed;
}

MMS_API void mms_sampler_accept(struct mms_sampler *s, int32_t id) {
    if (!s || s->p.repeat_penalty == 1.0f) return;
    if (s->p.repeat_last_n > 0) {   /* a ring of the window */
        if (!s->history && !(s->history = (int32_t *)MMS_MALLOC(sizeof *s->history * (size_t)s->p.repeat_last_n))) return;
        s->cap_history = s->p.repeat_last_n;
        s->history[s->head] = id;
        s->head = (s->head + 1) % s->cap_history;
        if (s->n_history < s->cap_history) s->n_history++;
        return;
    }
    if (s->n_history == s->cap_history) {
        int cap = s->cap_history ? s->cap_history * 2 : 256;
        int32_t *h = (int32_t *)MMS_REALLOC(s->history, sizeof *h * (size_t)cap);
        if (!h) return;   /* the penalty then forgets the newest tokens; nothing else is at stake */
        s->history = h;
        s->cap_history = cap;
    }
    s->history[s->n_history++] = id;
}

/* Sorts candidates by value, largest first; equal values keep id order (the first largest wins). */
static void mms__sampler_sort(int32_t *ids, double *vals, int n) {
    int i, j;
    if (n < 2) return;
    if (n <= 16) {   /* insertion sort: stable */
        for (i = 1; i < n; i++) {
            int32_t id = ids[i];
            double v = vals[i];
            for (j = i; j > 0 && (vals[j - 1] < v || (vals[j - 1] == v && ids[j - 1] > id)); j--) { ids[j] = ids[j - 1]; vals[j] = vals[j - 1]; }
            ids[j] = id;
            vals[j] = v;
        }
        return;
    }
    {   /* quicksort on (value desc, id asc), which is a total order */
        const int m = n / 2;
        const double pv = vals[m];
        const int32_t pid = ids[m];
        i = 0;
        j = n - 1;
        while (i <= j) {
            while (vals[i] > pv || (vals[i] == pv && ids[i] < pid)) i++;
            while (vals[j] < pv || (vals[j] == pv && ids[j] > pid)) j--;
            if (i <= j) {
                int32_t ti = ids[i]; double tv = vals[i];
                ids[i] = ids[j]; vals[i] = vals[j];
                ids[j] = ti; vals[j] = tv;
                i++;
                j--;
            }
        }
        mms__sampler_sort(ids, vals, j + 1);
        mms__sampler_sort(ids + i, vals + i, n - i);
    }
}

/* Runs the filters: on return ids[0..*n_keep) are the surviving tokens, best first, with their
   probabilities in vals (they sum to 1). Greedy leaves one token with probability 1. */
static enum mms_status mms__sampler_filter(const struct mms_sampler_params *p, const int32_t *history, int n_history,
                                           const float *logits, int n_vocab, int32_t *ids, double *vals, int *n_keep) {
    double sum, cum, maxv;
    int i, n = n_vocab;
    for (i = 0; i < n_vocab; i++) {
        if (logits[i] != logits[i]) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_sampler: logit %d is NaN", i);
        ids[i] = i;
        vals[i] = logits[i];
    }
    if (p->repeat_penalty != 1.0f)   /* once per distinct token, as HF gathers, changes and scatters */
        for (i = 0; i < n_history; i++) {
            const int32_t t = history[i];
            if (t < 0 || t >= n_vocab || vals[t] != (double)logits[t]) continue;   /* changed already (or a fixed point) */
            vals[t] = logits[t] < 0.0f ? (double)(logits[t] * p->repeat_penalty) : (double)(logits[t] / p->repeat_penalty);
        }
    if (p->temperature == 0.0f) {
        int best = 0;
        for (i = 1; i < n_vocab; i++) if (vals[i] > vals[best]) best = i;
        ids[0] = best;
        vals[0] = 1.0;
        *n_keep = 1;
        return MMS_OK;
    }
    for (i = 0; i < n_vocab; i++) vals[i] /= (double)p->temperature;
    mms__sampler_sort(ids, vals, n_vocab);
    if (p->top_k > 0 && p->top_k < n) {   /* keep everything tied with the k-th */
        const double kth = vals[p->top_k - 1];
        n = p->top_k;
        while (n < n_vocab && vals[n] == kth) n++;
    }
    maxv = vals[0];
    for (i = 0, sum = 0.0; i < n; i++) sum += (vals[i] = exp(vals[i] - maxv));
    for (i = 0; i < n; i++) vals[i] /= sum;
    if (p->top_p < 1.0f) {   /* HF drops the tail whose cumulative mass is <= 1 - top_p */
        double tail = 0.0;
        const double cut = 1.0 - (double)p->top_p;
        int keep = n;
        for (i = n - 1; i > 0; i--) {
            tail += vals[i];
            if (tail <= cut) keep = i; else break;
        }
        n = keep;
    }
    if (p->min_p > 0.0f) {
        const double floor_p = (double)p->min_p * vals[0];
        int keep = 1;
        while (keep < n && vals[keep] >= floor_p) keep++;
        n = keep;
    }
    for (i = 0, cum = 0.0; i < n; i++) cum += vals[i];
    for (i = 0; i < n; i++) vals[i] /= cum;
    *n_keep = n;
    return MMS_OK;
}

static enum mms_status mms__sampler_run(const struct mms_sampler *s, const float *logits, int n_vocab, int32_t **ids, double **vals,
                                        int *n_keep, const char *who) {
    struct mms_sampler *m = (struct mms_sampler *)s;   /* scratch only */
    if (!s || !logits || n_vocab < 1) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: sampler, logits and n_vocab >= 1 are required", who);
    if (m->cap < n_vocab) {
        int32_t *ni = (int32_t *)MMS_REALLOC(m->ids, sizeof *ni * (size_t)n_vocab);
        double *nv;
        if (ni) m->ids = ni;
        nv = (double *)MMS_REALLOC(m->vals, sizeof *nv * (size_t)n_vocab);
        if (nv) m->vals = nv;
        if (!ni || !nv) return mms_set_error(MMS_ERR_OOM, "%s: out of host memory for %d candidates", who, n_vocab);
        m->cap = n_vocab;
    }
    *ids = m->ids;
    *vals = m->vals;
    /* the ring's order does not matter: the penalty sees a set */
    return mms__sampler_filter(&s->p, s->history, s->n_history, logits, n_vocab, m->ids, m->vals, n_keep);
}

MMS_API enum mms_status mms_sampler_probs(const struct mms_sampler *s, const float *logits, int n_vocab, float *probs) {
    int32_t *ids = NULL;
    double *vals = NULL;
    int i, n = 0;
    enum mms_status st;
    if (!probs) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_sampler_probs: probs is NULL");
    if ((st = mms__sampler_run(s, logits, n_vocab, &ids, &vals, &n, "mms_sampler_probs")) != MMS_OK) return st;
    for (i = 0; i < n_vocab; i++) probs[i] = 0.0f;
    for (i = 0; i < n; i++) probs[ids[i]] = (float)vals[i];
    return MMS_OK;
}

MMS_API int32_t mms_sampler_sample(struct mms_sampler *s, const float *logits, int n_vocab) {
    int32_t *ids = NULL, id;
    double *vals = NULL, u, cum = 0.0;
    int i, n = 0;
    if (mms__sampler_run(s, logits, n_vocab, &ids, &vals, &n, "mms_sampler_sample") != MMS_OK) return -1;
    id = ids[n - 1];
    if (n > 1) {
        u = (double)(mms__splitmix64(&s->state) >> 11) * (1.0 / 9007199254740992.0);   /* [0, 1) from 53 bits */
        for (i = 0; i < n; i++) {
            cum += vals[i];
            if (u < cum) { id = ids[i]; break; }
        }
    }
    mms_sampler_accept(s, id);
    return id;
}
/* ==== end src/text/sampling.c ==== */

#endif

#ifndef MMS_NO_MLLAMA   /* the parts below are left out under this option */

/* ==== begin src/mllama/image.c ==== */
/* >>mllama-image ==================================================================================
   Image preprocessing (transformers' MllamaImageProcessor): canvas choice, PIL's bilinear resize, padding, rescale,
   normalisation and tiling. Every rounding step follows the PIL processor of transformers, so the
   floats come out bit for bit the same. */

/* -- PIL-compatible bilinear resize ------------------------------------------------------------------
   PIL resamples separably, one pass per axis whose size changes, through an 8-bit temporary, so
   the order of the passes shows in the result (see the rule below). Weights are the triangle
   filter, widened by the scale factor when shrinking (antialiasing), normalised to sum 1 in
   double, then turned into 22-bit fixed point; sums start at one half and are shifted and
   clamped back to 8 bits. */

#define MMS__RS_BITS 22   /* fraction bits: 32 less 8 for the value less 2 spare, as PIL */

/* One pass along one axis: for output i, inputs first[i] .. first[i] + count[i] - 1 with weights
   k[i * ksize ..]. */
struct mms__rs_axis {
    int      ksize;
    int     *first, *count;
    int32_t *k;
};

/* A double that is really rounded to double: stops a compiler from fusing it into a later add
   (an FMA would round differently from PIL's builds). */
static double mms__rs_round(double x) {
    volatile double v = x;
    return v;
}

static void mms__rs_axis_free(struct mms__rs_axis *ax) {
    MMS_FREE(ax->first);
    MMS_FREE(ax->count);
    MMS_FREE(ax->k);
    memset(ax, 0, sizeof *ax);
}

static enum mms_status mms__rs_axis_init(struct mms__rs_axis *ax, int in_size, int out_size) {
    /* PIL passes the source box as floats and divides in double */
    const double scale = (double)(float)in_size / (double)out_size;
    const double filterscale = scale < 1.0 ? 1.0 : scale;
    const double support = filterscale;          /* the triangle's support is 1 */
    const double inv_filterscale = 1.0 / filterscale;
    double *w = NULL;
    int i, x;
    memset(ax, 0, sizeof *ax);
    /* ksize * out_size stays near 2 * in_size + 3 * out_size; these guard the int and size_t maths */
    if (ceil(support) > (double)(0x3fffffff / 2 - 1) ||
        (size_t)ceil(support) * 2 + 1 > ((size_t)-1 / sizeof(int32_t)) / (size_t)out_size)
        return mms_set_error(MMS_ERR_INVALID_ARG, "image resize: %d to %d pixels needs too wide a filter", in_size, out_size);
    ax->ksize = (int)ceil(support) * 2 + 1;
    ax->first = (int *)MMS_MALLOC((size_t)out_size * sizeof(int));
    ax->count = (int *)MMS_MALLOC((size_t)out_size * sizeof(int));
    ax->k = (int32_t *)MMS_MALLOC((size_t)out_size * (size_t)ax->ksize * sizeof(int32_t));
    w = (double *)MMS_MALLOC((size_t)ax->ksize * sizeof(double));
    if (!ax->first || !ax->count || !ax->k || !w) {
        MMS_FREE(w);
        mms__rs_axis_free(ax);
        return mms_set_error(MMS_ERR_OOM, "image resize: no memory for the filter of %d to %d pixels", in_size, out_size);
    }
    for (i = 0; i < out_size; i++) {
        const double center = mms__rs_round(((double)i + 0.5) * scale);
        double ww = 0.0;
        int32_t *k = ax->k + (size_t)i * (size_t)ax->ksize;
        /* PIL truncates toward zero after adding one half, then clips to the image */
        int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5), n;
        if (lo < 0) lo = 0;
        if (hi > in_size) hi = in_size;
        n = hi - lo;
        for (x = 0; x < n; x++) {
            double t = mms__rs_round(((double)(x + lo) - center + 0.5) * inv_filterscale);
            if (t < 0.0) t = -t;
            w[x] = t < 1.0 ? 1.0 - t : 0.0;
            ww += w[x];
        }
        for (x = 0; x < n; x++) {
            const double v = ww != 0.0 ? w[x] / ww : w[x];
            k[x] = (int32_t)(0.5 + v * (double)(1 << MMS__RS_BITS));   /* weights are never negative */
        }
        ax->first[i] = lo;
        ax->count[i] = n;
    }
    MMS_FREE(w);
    return MMS_OK;
}

/* 64-bit sums: a 32-bit sum (PIL's) cannot overflow for any size PIL accepts, and gives the same
   result; 64 bits keep larger filters exact too. */
static uint8_t mms__rs_clip8(int64_t acc) {
    acc >>= MMS__RS_BITS;
    return (uint8_t)(acc < 0 ? 0 : acc > 255 ? 255 : acc);
}

/* Rows [y0, y1) of src, resampled along x into dst (tight rows of out_w pixels). */
static void mms__rs_horizontal(const uint8_t *src, size_t src_stride, int y0, int y1, const struct mms__rs_axis *ax,
                               int out_w, uint8_t *dst) {
    const int64_t half = (int64_t)1 << (MMS__RS_BITS - 1);
    int y, i, x;
    for (y = y0; y < y1; y++) {
        const uint8_t *s = src + (size_t)y * src_stride;
        uint8_t *d = dst + (size_t)(y - y0) * (size_t)out_w * 3;
        for (i = 0; i < out_w; i++) {
            const int32_t *k = ax->k + (size_t)i * (size_t)ax->ksize;
            const uint8_t *p = s + (size_t)ax->first[i] * 3;
            const int n = ax->count[i];
            int64_t a0 = half, a1 = half, a2 = half;
            for (x = 0; x < n; x++) {
                a0 += (int64_t)p[3 * x + 0] * k[x];
                a1 += (int64_t)p[3 * x + 1] * k[x];
                a2 += (int64_t)p[3 * x + 2] * k[x];
            }
            d[3 * i + 0] = mms__rs_clip8(a0);
            d[3 * i + 1] = mms__rs_clip8(a1);
            d[3 * i + 2] = mms__rs_clip8(a2);
        }
    }
}

/* Resamples along y: source row r is src + (r - row0) * src_stride. acc holds row_bytes sums. */
static void mms__rs_vertical(const uint8_t *src, size_t src_stride, int row0, size_t row_bytes,
                             const struct mms__rs_axis *ax, int out_h, uint8_t *dst, int64_t *acc) {
    const int64_t half = (int64_t)1 << (MMS__RS_BITS - 1);
    int j, y;
    size_t b;
    for (j = 0; j < out_h; j++) {
        const int32_t *k = ax->k + (size_t)j * (size_t)ax->ksize;
        uint8_t *d = dst + (size_t)j * row_bytes;
        for (b = 0; b < row_bytes; b++) acc[b] = half;
        for (y = 0; y < ax->count[j]; y++) {
            const uint8_t *s = src + (size_t)(ax->first[j] + y - row0) * src_stride;
            const int64_t ky = k[y];
            for (b = 0; b < row_bytes; b++) acc[b] += (int64_t)s[b] * ky;
        }
        for (b = 0; b < row_bytes; b++) d[b] = mms__rs_clip8(acc[b]);
    }
}

MMS_API enum mms_status mms_image_resize_bilinear(const uint8_t *src, int src_w, int src_h, size_t src_stride,
                                                  uint8_t *dst, int dst_w, int dst_h) {
    struct mms__rs_axis ax, ay;
    uint8_t *tmp = NULL;
    int64_t *acc = NULL;
    enum mms_status st = MMS_OK;
    int need_x, need_y, vertical_first, y, y0 = 0, y1 = 0;
    size_t tmp_bytes = 0, acc_n;
    const size_t out_row = (size_t)dst_w * 3;
    if (!src || !dst) return mms_set_error(MMS_ERR_INVALID_ARG, "image resize: %s is NULL", !src ? "src" : "dst");
    if (src_w <= 0 || src_h <= 0 || dst_w <= 0 || dst_h <= 0)
        return mms_set_error(MMS_ERR_INVALID_ARG, "image resize: empty size (%dx%d to %dx%d)", src_w, src_h, dst_w, dst_h);
    if (src_stride == 0) src_stride = (size_t)src_w * 3;
    if (src_stride < (size_t)src_w * 3)
        return mms_set_error(MMS_ERR_INVALID_ARG, "image resize: stride %zu is shorter than a row of %d pixels", src_stride, src_w);
    need_x = dst_w != src_w;
    need_y = dst_h != src_h;
    if (!need_x && !need_y) {   /* PIL copies */
        for (y = 0; y < src_h; y++) memcpy(dst + (size_t)y * out_row, src + (size_t)y * src_stride, out_row);
        return MMS_OK;
    }
    /* Pillow 13 runs the vertical pass first when the height loses more than twice as many pixels
       as the width (older Pillow always went horizontal first; the two can differ by one level). */
    vertical_first = (int64_t)src_h - dst_h > 0 && (int64_t)src_h - dst_h > ((int64_t)src_w - dst_w) * 2;
    memset(&ax, 0, sizeof ax);
    memset(&ay, 0, sizeof ay);
    if (need_y && (st = mms__rs_axis_init(&ay, src_h, dst_h)) != MMS_OK) return st;
    if (need_x && (st = mms__rs_axis_init(&ax, src_w, dst_w)) != MMS_OK) { mms__rs_axis_free(&ay); return st; }
    if (need_x && need_y) {
        if (vertical_first) {
            tmp_bytes = (size_t)src_w * 3 * (size_t)dst_h;
        } else {   /* only the source rows the vertical filter reads */
            y0 = ay.first[0];
            y1 = ay.first[dst_h - 1] + ay.count[dst_h - 1];
            tmp_bytes = out_row * (size_t)(y1 - y0);
        }
        tmp = (uint8_t *)MMS_MALLOC(tmp_bytes);
    }
    acc_n = (size_t)(vertical_first ? src_w : dst_w) * 3;
    if (need_y) acc = (int64_t *)MMS_MALLOC(acc_n * sizeof(int64_t));
    if ((need_x && need_y && !tmp) || (need_y && !acc)) {
        st = mms_set_error(MMS_ERR_OOM, "image resize: no memory to resize %dx%d to %dx%d", src_w, src_h, dst_w, dst_h);
    } else if (!need_y) {
        mms__rs_horizontal(src, src_stride, 0, src_h, &ax, dst_w, dst);
    } else if (!need_x) {
        mms__rs_vertical(src, src_stride, 0, out_row, &ay, dst_h, dst, acc);
    } else if (vertical_first) {
        mms__rs_vertical(src, src_stride, 0, acc_n, &ay, dst_h, tmp, acc);
        mms__rs_horizontal(tmp, acc_n, 0, dst_h, &ax, dst_w, dst);
    } else {
        mms__rs_horizontal(src, src_stride, y0, y1, &ax, dst_w, tmp);
        mms__rs_vertical(tmp, out_row, y0, out_row, &ay, dst_h, dst, acc);
    }
    MMS_FREE(tmp);
    MMS_FREE(acc);
    mms__rs_axis_free(&ax);
    mms__rs_axis_free(&ay);
    return st;
}

/* -- canvas, fit and tiles ------------------------------------------------------------------------- */

/* The CLIP statistics of the 11B model's preprocessor_config.json. */
static const float mms__mllama_mean[3] = {0.48145466f, 0.4578275f, 0.40821073f};
static const float mms__mllama_std[3]  = {0.26862954f, 0.26130258f, 0.27577711f};

/* get_optimal_tiled_canvas: entries (rows, cols) for rows, cols in 1..max with rows * cols <= max,
   in that order. Scales are float64 quotients; equality is exact, as numpy compares them. */
static void mms__mllama_canvas(int w, int h, int tile, int max_tiles, int *out_rows, int *out_cols, int *out_id) {
    double best = 0.0;
    int have_up = 0, pass, r, c, id, best_area = 0;
    /* pass 0 picks the scale, pass 1 the entry of smallest area with exactly that scale */
    for (pass = 0; pass < 2; pass++) {
        id = 0;
        for (r = 1; r <= max_tiles; r++) {
            for (c = 1; c <= max_tiles; c++) {
                double sh, sw, s;
                if (r * c > max_tiles) continue;
                id++;
                sh = (double)tile * r / (double)h;
                sw = (double)tile * c / (double)w;
                s = sw > sh ? sh : sw;
                if (pass == 0) {
                    /* the smallest scale >= 1 if there is one, else the largest */
                    if (s >= 1.0) { if (!have_up || s < best) best = s; have_up = 1; }
                    else if (!have_up && (id == 1 || s > best)) best = s;
                } else if (s == best && (best_area == 0 || r * c < best_area)) {
                    best_area = r * c;
                    *out_rows = r;
                    *out_cols = c;
                    *out_id = id;
                }
            }
        }
    }
}

/* get_image_size_fit_to_canvas, with newer transformers' `or 1` for sides that floor to 0. */
static void mms__mllama_fit(int w, int h, int canvas_w, int canvas_h, int tile, int *new_w, int *new_h) {
    const int tw = MMS__MIN(MMS__MAX(w, tile), canvas_w);
    const int th = MMS__MIN(MMS__MAX(h, tile), canvas_h);
    const double sw = (double)tw / (double)w, sh = (double)th / (double)h;
    if (sw < sh) {
        double f = floor(mms__rs_round((double)h * sw));
        *new_w = tw;
        *new_h = f < 1.0 ? 1 : f > (double)th ? th : (int)f;
    } else {
        double f = floor(mms__rs_round((double)w * sh));
        *new_h = th;
        *new_w = f < 1.0 ? 1 : f > (double)tw ? tw : (int)f;
    }
}

MMS_API enum mms_status mms_mllama_preprocess_image(const struct mms_mllama_image_params *params, const uint8_t *rgb,
                                                    int width, int height, size_t stride, struct mms_mllama_image *out) {
    float lut[3][256];
    const float *mean, *std;
    uint8_t *resized = NULL;
    size_t tile_floats, n_floats;
    enum mms_status st;
    int S, i, c, t, rows = 1, cols = 1, id = 1, new_w, new_h, max_tiles;
    if (out) memset(out, 0, sizeof *out);
    if (!params || !rgb || !out)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mllama preprocess: %s is NULL", !params ? "params" : !rgb ? "rgb" : "out");
    if (width <= 0 || height <= 0)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mllama preprocess: empty image (%dx%d)", width, height);
    if (stride == 0) stride = (size_t)width * 3;
    if (stride < (size_t)width * 3)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mllama preprocess: stride %zu is shorter than a row of %d pixels", stride, width);
    if (params->max_num_tiles < 0 || params->max_num_tiles > 16)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mllama preprocess: max_num_tiles %d is outside 1..16 (0: 4)", params->max_num_tiles);
    max_tiles = params->max_num_tiles ? params->max_num_tiles : 4;   /* zeroed: the 11B model's values */
    S = params->image_size ? params->image_size : 560;
    /* the canvas side (up to 16 tiles) must fit an int */
    if (S < 1 || S > 0x7fffffff / 16)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mllama preprocess: image_size %d is out of range (0: 560)", S);
    mean = params->mean;
    std = params->std;
    if (mean[0] == 0.0f && mean[1] == 0.0f && mean[2] == 0.0f && std[0] == 0.0f && std[1] == 0.0f && std[2] == 0.0f) {
        mean = mms__mllama_mean;
        std = mms__mllama_std;
    }
    for (c = 0; c < 3; c++)
        if (!(std[c] != 0.0f) || !(std[c] - std[c] == 0.0f) || !(mean[c] - mean[c] == 0.0f))
            return mms_set_error(MMS_ERR_INVALID_ARG, "mllama preprocess: channel %d has mean %g, std %g (mean and std must be finite, std non-zero)",
                                 c, (double)mean[c], (double)std[c]);
    tile_floats = (size_t)3 * (size_t)S * (size_t)S;
    if ((size_t)S > ((size_t)-1 / sizeof(float)) / 48 / (size_t)S)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mllama preprocess: image_size %d is too large for memory", S);
    n_floats = tile_floats * (size_t)max_tiles;

    mms__mllama_canvas(width, height, S, max_tiles, &rows, &cols, &id);
    mms__mllama_fit(width, height, S * cols, S * rows, S, &new_w, &new_h);

    resized = (uint8_t *)MMS_MALLOC((size_t)new_w * (size_t)new_h * 3);
    out->pixels = (float *)MMS_MALLOC(n_floats * sizeof(float));
    if (!resized || !out->pixels) {
        MMS_FREE(resized);
        MMS_FREE(out->pixels);
        out->pixels = NULL;
        return mms_set_error(MMS_ERR_OOM, "mllama preprocess: no memory for %d tiles of %d pixels", max_tiles, S);
    }
    st = mms_image_resize_bilinear(rgb, width, height, stride, resized, new_w, new_h);
    if (st != MMS_OK) {
        MMS_FREE(resized);
        MMS_FREE(out->pixels);
        out->pixels = NULL;
        return st;
    }

    /* rescale: uint8 to float64 times 1/255, stored as float32; normalise: float32 (x - mean) / std.
       A table per channel gives exactly those roundings; volatile keeps them in float. */
    for (c = 0; c < 3; c++)
        for (i = 0; i < 256; i++) {
            volatile float x = (float)((double)i * (1.0 / 255.0));
            volatile float d = x - mean[c];
            lut[c][i] = d / std[c];
        }

    /* tiles in row-major order; padding (bottom, right) is black, i.e. lut[c][0] */
    for (t = 0; t < rows * cols; t++) {
        const int ty = (t / cols) * S, tx = (t % cols) * S;
        for (c = 0; c < 3; c++) {
            float *plane = out->pixels + (size_t)t * tile_floats + (size_t)c * (size_t)S * (size_t)S;
            int y, x;
            for (y = 0; y < S; y++) {
                float *d = plane + (size_t)y * (size_t)S;
                const int cy = ty + y;
                const int nx = cy < new_h ? MMS__MAX(MMS__MIN(new_w - tx, S), 0) : 0;   /* image pixels on this row */
                x = 0;
                if (nx > 0) {
                    const uint8_t *s = resized + ((size_t)cy * (size_t)new_w + (size_t)tx) * 3 + (size_t)c;
                    for (x = 0; x < nx; x++) d[x] = lut[c][s[3 * x]];
                }
                for (; x < S; x++) d[x] = lut[c][0];
            }
        }
    }
    /* unused slots are zeros, not black */
    if (rows * cols < max_tiles)
        memset(out->pixels + (size_t)rows * (size_t)cols * tile_floats, 0,
               (size_t)(max_tiles - rows * cols) * tile_floats * sizeof(float));
    MMS_FREE(resized);

    out->max_num_tiles = max_tiles;
    out->image_size = S;
    out->tiles_rows = rows;
    out->tiles_cols = cols;
    out->n_tiles = rows * cols;
    out->aspect_ratio_id = id;
    for (t = 0; t < 16; t++) out->aspect_ratio_mask[t] = t == 0 || t < rows * cols;
    out->resized_width = new_w;
    out->resized_height = new_h;
    return MMS_OK;
}

MMS_API void mms_mllama_image_free(struct mms_mllama_image *image) {
    if (!image) return;
    MMS_FREE(image->pixels);
    memset(image, 0, sizeof *image);
}

MMS_API enum mms_status mms_image_rgba_over_white(const uint8_t *rgba, int w, int h, size_t stride, uint8_t *rgb) {
    int x, y, k;
    if (!rgba || !rgb || w < 1 || h < 1 || (stride && stride < (size_t)w * 4))
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_image_rgba_over_white: pixels and a %dx%d size (stride %zu) are required", w, h, stride);
    if (!stride) stride = (size_t)w * 4;
    for (y = 0; y < h; y++) {
        const uint8_t *s = rgba + (size_t)y * stride;
        uint8_t *d = rgb + (size_t)y * (size_t)w * 3;
        for (x = 0; x < w; x++, s += 4, d += 3) {
            const unsigned a = s[3];
            for (k = 0; k < 3; k++) d[k] = (uint8_t)((2u * (s[k] * a + 255u * (255u - a)) + 255u) / 510u);   /* x / 255 rounded half up */
        }
    }
    return MMS_OK;
}
/* ==== end src/mllama/image.c ==== */

/* ==== begin src/mllama/model.c ==== */
/* >>mllama-model ==================================================================================
   Loading Llama 3.2 Vision: hyper-parameters from GGUF metadata, weights by name with their shapes
   checked, placement on the caller's backends. Ollama's single-file layout names the vision MLP
   ffn_up (fc1) / ffn_down (fc2) and its norms attn_norm / ffn_norm; the older projector file names
   them ln1 / ln2 and swaps ffn_up and ffn_down. Gates of the vision tower are stored already
   transformed (tanh(g), and 1 - tanh(g) for the positional gate); the text gates are raw.
   Ollama's converter also permutes the rows of the cross-attention and vision q/k projections
   within each head (its RoPE rule, applied by name; the q/k norms stay as they are): such rows are
   put back in Hugging Face order when the weights are placed (mms__mllama_qk_rows says which files
   hold them so). */

struct mms__mllama_vlayer {
    struct mms_tensor *ln1_w, *ln1_b, *wq, *wk, *wv, *wo, *ln2_w, *ln2_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
    struct mms_tensor *gate_attn, *gate_ffn;    /* global layers only: tanh(gate) */
};

struct mms__mllama_tlayer {
    bool   cross;
    int    backend;                             /* 0: cpu, 1: gpu */
    struct mms_tensor *attn_norm, *wq, *wk, *wv, *wo, *ffn_norm, *ffn_gate, *ffn_up, *ffn_down;
    struct mms_tensor *q_norm, *k_norm, *gate_attn, *gate_mlp;   /* cross layers only; gates raw */
};

/* The checkpoint folder reader (src/mllama/hf_folder.c, the part after this one). */
struct mms__hf;
enum mms__hf_xform { MMS__HF_AS_IS = 0, MMS__HF_TANH, MMS__HF_ONE_MINUS_TANH };
static bool            mms__hf_is_folder(const char *path);
static struct mms__hf *mms__hf_open(const char *dir);
static void            mms__hf_close(struct mms__hf *hf);
static enum mms_status mms__hf_hparams(const struct mms__hf *hf, struct mms_mllama_hparams *hp, int **cross, int **taps, float **rope_freqs);
static bool            mms__hf_find(struct mms__hf *hf, const char *name, struct mms_safetensors_info *info, enum mms__hf_xform *x,
                                    const struct mms_safetensors **shard);
static const char     *mms__hf_dir(const struct mms__hf *hf);
static enum mms_status mms__hf_check_all_used(const struct mms__hf *hf);

/* Where a weight's bytes are, kept by the loader until the weight is placed. */
struct mms__wsource {
    struct mms_tensor     *t;
    const void            *region;     /* the GGUF file or safetensors shard it is mapped from; NULL: loader memory */
    const void            *data;       /* in the region's mapping (or the loader's memory) */
    enum mms_type          src_type;   /* the type of data: t's, or one converted to t's f32 when placed */
    enum mms__hf_xform     xform;      /* a gate derived from the checkpoint's raw value */
    int                    backend;    /* index into the model's backends */
    int                    row_heads;  /* > 0: rows permuted within this many heads (Ollama's q/k rule), put back when placed */
};

struct mms_mllama_model {
    struct mms_mllama_hparams  hp;
    int                       *cross_layers, *taps;
    bool                      *is_cross;                 /* per text layer */
    struct mms_gguf           *files[2];
    int                        n_files;
    mms_backend_t              backends[2];              /* [0] cpu, [1] gpu (cpu again without one) */
    struct mms_context        *wctx[2];                  /* weight tensors by backend */
    mms_backend_buffer_t      *bufs;                     /* the weights' buffers: mapped regions, copies */
    int                        n_bufs, cap_bufs;
    bool                       shapes_only;
    bool                       cpu_repack;               /* Q4_0/Q4_K/Q8_0 matrices on the CPU backend in a CPU_REPACK buffer */
    int                        vision_backend, output_backend;
    int64_t                    load_us;
    struct mms__wsource       *sources;                  /* every weight read from a file, in declaration order */
    int                        n_sources, cap_sources;
    struct mms__hf            *hf;                       /* a checkpoint folder, or NULL */
    float                     *rope_freqs_data;          /* its llama3 divisors, computed from config.json */
    bool                       rope_neox;                /* self-attention q/k in Hugging Face's rotate-half order */

    struct mms_tensor *token_embd, *output_norm, *output, *rope_freqs;
    struct mms__mllama_tlayer *layers;

    bool               has_vision;
    struct mms_tensor *patch_embd, *class_embd, *pos_embd, *pos_gate, *tile_pos_embd, *tile_pos_gate;
    struct mms_tensor *pre_tile_embd, *pre_tile_gate, *post_tile_embd, *post_tile_gate;
    struct mms_tensor *pre_ln_w, *pre_ln_b, *post_ln_w, *post_ln_b, *mm_w, *mm_b;
    struct mms__mllama_vlayer *vlayers, *vglobal;
};

/* The aspect ratios with rows * cols <= max_tiles, in the processor's order; returns how many. */
static int mms__mllama_aspect_ratios(int max_tiles, int *rows, int *cols) {
    int w, h, n = 0;
    for (w = 1; w <= max_tiles; w++)
        for (h = 1; h <= max_tiles; h++)
            if (w * h <= max_tiles) {
                if (rows) { rows[n] = w; cols[n] = h; }   /* read as (rows, cols), as transformers does */
                n++;
            }
    return n;
}

static void mms__mllama_derive(struct mms_mllama_hparams *hp) {
    if (hp->v_patch_size > 0) {
        int side = hp->v_image_size / hp->v_patch_size;
        hp->v_n_patches = side * side;
        hp->v_n_tokens = hp->v_n_patches + 1;
        hp->v_n_tokens_padded = (hp->v_n_tokens + 7) / 8 * 8;
        hp->v_output_dim = hp->v_n_embd * (1 + hp->v_n_taps);
    }
}

MMS_API void mms_mllama_hparams_11b(struct mms_mllama_hparams *hp) {
    static const int cross[8] = { 3, 8, 13, 18, 23, 28, 33, 38 }, taps[5] = { 3, 7, 15, 23, 30 };
    memset(hp, 0, sizeof *hp);
    hp->n_vocab = 128256; hp->n_embd_rows = 128264; hp->n_ctx_train = 131072;
    hp->n_embd = 4096; hp->n_ff = 14336; hp->n_head = 32; hp->n_head_kv = 8; hp->head_dim = 128; hp->n_layer = 40;
    hp->rope_freq_base = 500000.0f; hp->rms_eps = 1e-5f;
    hp->n_cross = 8; hp->cross_layers = cross; hp->image_token_id = 128256;
    hp->v_n_layer = 32; hp->v_n_global = 8; hp->v_n_embd = 1280; hp->v_n_ff = 5120; hp->v_n_head = 16;
    hp->v_image_size = 560; hp->v_patch_size = 14; hp->v_max_tiles = 4; hp->v_channels = 3; hp->v_eps = 1e-5f;
    hp->v_n_taps = 5; hp->v_taps = taps;
    hp->image_mean[0] = 0.48145466f; hp->image_mean[1] = 0.4578275f; hp->image_mean[2] = 0.40821073f;
    hp->image_std[0] = 0.26862954f; hp->image_std[1] = 0.26130258f; hp->image_std[2] = 0.27577711f;
    mms__mllama_derive(hp);
}

/* Llama 3.2 90B Vision: the 11B vision tower on a Llama 3.1 70B text model with 20 cross-attention
   layers, one after every four of its 80 layers (5k + 3), as the published config has them. */
MMS_API void mms_mllama_hparams_90b(struct mms_mllama_hparams *hp) {
    static int cross[20];
    int k;
    for (k = 0; k < 20; k++) cross[k] = 5 * k + 3;
    mms_mllama_hparams_11b(hp);
    hp->n_embd = 8192; hp->n_ff = 28672; hp->n_head = 64; hp->n_head_kv = 8; hp->head_dim = 128; hp->n_layer = 100;
    hp->n_cross = 20; hp->cross_layers = cross;
    mms__mllama_derive(hp);
}

MMS_API const struct mms_mllama_hparams *mms_mllama_model_get_hparams(const struct mms_mllama_model *m) { return m ? &m->hp : NULL; }

MMS_API void mms_mllama_model_free(struct mms_mllama_model *m) {
    int i;
    if (!m) return;
    for (i = 0; i < m->n_bufs; i++) mms_backend_buffer_free(m->bufs[i]);
    MMS_FREE(m->bufs);
    for (i = 0; i < 2; i++) mms_free(m->wctx[i]);
    for (i = 0; i < m->n_files; i++) mms_gguf_close(m->files[i]);
    MMS_FREE(m->cross_layers); MMS_FREE(m->taps); MMS_FREE(m->is_cross);
    MMS_FREE(m->layers); MMS_FREE(m->vlayers); MMS_FREE(m->vglobal); MMS_FREE(m->sources); MMS_FREE(m->rope_freqs_data);
    mms__hf_close(m->hf);
    MMS_FREE(m);
}

/* -- hyper-parameters -- */

/* A required positive integer key; the error names the key and the file. */
static enum mms_status mms__mllama_key_int(const struct mms_gguf *g, const char *key, int *out, bool required) {
    uint32_t v;
    enum mms_status st;
    if (!required && mms_gguf_find_key(g, key) < 0) return MMS_OK;
    st = mms_gguf_get_u32(g, key, &v);
    if (st != MMS_OK) return mms__error_context(MMS_ERR_FORMAT, "mllama: %s", mms_last_error());
    if (v == 0 || v > (1u << 30)) return mms_set_error(MMS_ERR_FORMAT, "mllama: %s in '%s' is %u, out of range", key, mms_gguf_get_path(g), v);
    *out = (int)v;
    return MMS_OK;
}

static enum mms_status mms__mllama_key_float(const struct mms_gguf *g, const char *key, float *out) {
    enum mms_status st = mms_gguf_get_f32(g, key, out);
    if (st != MMS_OK) return mms__error_context(MMS_ERR_FORMAT, "mllama: %s", mms_last_error());
    if (!(*out > 0.0f)) return mms_set_error(MMS_ERR_FORMAT, "mllama: %s in '%s' must be positive, got %g", key, mms_gguf_get_path(g), (double)*out);
    return MMS_OK;
}

/* An int32 array key into a new array; every element in [0, limit). */
static enum mms_status mms__mllama_key_list(const struct mms_gguf *g, const char *key, int limit, int **out, int *n_out) {
    int64_t n = 0, i;
    int32_t *tmp;
    enum mms_status st = mms_gguf_get_arr_i32(g, key, NULL, 0, &n);
    if (st != MMS_OK) return mms__error_context(MMS_ERR_FORMAT, "mllama: %s", mms_last_error());
    if (n < 1 || n > limit) return mms_set_error(MMS_ERR_FORMAT, "mllama: %s in '%s' has %lld entries, expected 1..%d", key, mms_gguf_get_path(g), (long long)n, limit);
    tmp = (int32_t *)MMS_MALLOC(sizeof *tmp * (size_t)n);
    *out = (int *)MMS_MALLOC(sizeof **out * (size_t)n);
    if (!tmp || !*out) { MMS_FREE(tmp); return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory"); }
    if ((st = mms_gguf_get_arr_i32(g, key, tmp, n, &n)) != MMS_OK) { MMS_FREE(tmp); return st; }
    for (i = 0; i < n; i++) {
        if (tmp[i] < 0 || tmp[i] >= limit || (i > 0 && tmp[i] <= tmp[i - 1])) {
            int bad = (int)tmp[i];
            MMS_FREE(tmp);
            return mms_set_error(MMS_ERR_FORMAT, "mllama: %s in '%s': entry %lld = %d is not an ascending index below %d",
                                 key, mms_gguf_get_path(g), (long long)i, bad, limit);
        }
        (*out)[i] = tmp[i];
    }
    *n_out = (int)n;
    MMS_FREE(tmp);
    return MMS_OK;
}

/* What the loader needs of the hyper-parameters, wherever they came from (named in messages). */
static enum mms_status mms__mllama_check_text(struct mms_mllama_model *m, const char *where) {
    struct mms_mllama_hparams *hp = &m->hp;
    int i;
    if (hp->head_dim * hp->n_head != hp->n_embd || hp->head_dim % 2 != 0 || hp->n_head % hp->n_head_kv != 0)
        return mms_set_error(MMS_ERR_FORMAT, "mllama: inconsistent attention shape in '%s': %d heads (%d kv) of %d for width %d",
                             where, hp->n_head, hp->n_head_kv, hp->head_dim, hp->n_embd);
    m->is_cross = (bool *)MMS_MALLOC(sizeof(bool) * (size_t)hp->n_layer);
    if (!m->is_cross) return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory");
    for (i = 0; i < hp->n_layer; i++) m->is_cross[i] = false;
    for (i = 0; i < hp->n_cross; i++) m->is_cross[hp->cross_layers[i]] = true;
    return MMS_OK;
}

static enum mms_status mms__mllama_check_vision(const struct mms_mllama_hparams *hp, const char *where) {
    if (hp->v_image_size % hp->v_patch_size != 0 || hp->v_n_embd % hp->v_n_head != 0 || hp->v_max_tiles > 16 || hp->v_channels != 3)
        return mms_set_error(MMS_ERR_FORMAT, "mllama: unsupported vision shape in '%s': image %d, patch %d, width %d, %d heads, %d tiles, %d channels",
                             where, hp->v_image_size, hp->v_patch_size, hp->v_n_embd, hp->v_n_head, hp->v_max_tiles, hp->v_channels);
    return MMS_OK;
}

static enum mms_status mms__mllama_read_hparams(struct mms_mllama_model *m, const struct mms_gguf *text, const struct mms_gguf *vision) {
    struct mms_mllama_hparams *hp = &m->hp;
    const char *arch;
    size_t len;
    enum mms_status st;
    if (mms_gguf_get_str(text, "general.architecture", &arch, &len) != MMS_OK || len != 6 || memcmp(arch, "mllama", 6) != 0)
        return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s' is not an mllama model (general.architecture must be \"mllama\")", mms_gguf_get_path(text));
    if ((st = mms__mllama_key_int(text, "mllama.vocab_size", &hp->n_vocab, true)) != MMS_OK ||
        (st = mms__mllama_key_int(text, "mllama.block_count", &hp->n_layer, true)) != MMS_OK ||
        (st = mms__mllama_key_int(text, "mllama.context_length", &hp->n_ctx_train, true)) != MMS_OK ||
        (st = mms__mllama_key_int(text, "mllama.embedding_length", &hp->n_embd, true)) != MMS_OK ||
        (st = mms__mllama_key_int(text, "mllama.feed_forward_length", &hp->n_ff, true)) != MMS_OK ||
        (st = mms__mllama_key_int(text, "mllama.attention.head_count", &hp->n_head, true)) != MMS_OK ||
        (st = mms__mllama_key_int(text, "mllama.attention.head_count_kv", &hp->n_head_kv, true)) != MMS_OK ||
        (st = mms__mllama_key_float(text, "mllama.rope.freq_base", &hp->rope_freq_base)) != MMS_OK ||
        (st = mms__mllama_key_float(text, "mllama.attention.layer_norm_rms_epsilon", &hp->rms_eps)) != MMS_OK ||
        (st = mms__mllama_key_list(text, "mllama.attention.cross_attention_layers", hp->n_layer, &m->cross_layers, &hp->n_cross)) != MMS_OK)
        return st;
    hp->cross_layers = m->cross_layers;
    hp->head_dim = hp->n_embd / hp->n_head;
    if ((st = mms__mllama_key_int(text, "mllama.rope.dimension_count", &hp->head_dim, false)) != MMS_OK) return st;
    hp->image_token_id = hp->n_vocab;
    if ((st = mms__mllama_key_int(text, "mllama.image_token_index", &hp->image_token_id, false)) != MMS_OK) return st;
    if ((st = mms__mllama_check_text(m, mms_gguf_get_path(text))) != MMS_OK || !vision) return st;

    if ((st = mms__mllama_key_int(vision, "mllama.vision.block_count", &hp->v_n_layer, true)) != MMS_OK ||
        (st = mms__mllama_key_int(vision, "mllama.vision.global.block_count", &hp->v_n_global, true)) != MMS_OK ||
        (st = mms__mllama_key_int(vision, "mllama.vision.embedding_length", &hp->v_n_embd, true)) != MMS_OK ||
        (st = mms__mllama_key_int(vision, "mllama.vision.feed_forward_length", &hp->v_n_ff, true)) != MMS_OK ||
        (st = mms__mllama_key_int(vision, "mllama.vision.attention.head_count", &hp->v_n_head, true)) != MMS_OK ||
        (st = mms__mllama_key_int(vision, "mllama.vision.image_size", &hp->v_image_size, true)) != MMS_OK ||
        (st = mms__mllama_key_int(vision, "mllama.vision.patch_size", &hp->v_patch_size, true)) != MMS_OK ||
        (st = mms__mllama_key_int(vision, "mllama.vision.max_num_tiles", &hp->v_max_tiles, true)) != MMS_OK ||
        (st = mms__mllama_key_int(vision, "mllama.vision.num_channels", &hp->v_channels, true)) != MMS_OK ||
        (st = mms__mllama_key_float(vision, "mllama.vision.attention.layer_norm_epsilon", &hp->v_eps)) != MMS_OK ||
        (st = mms__mllama_key_list(vision, "mllama.vision.intermediate_layers_indices", hp->v_n_layer, &m->taps, &hp->v_n_taps)) != MMS_OK)
        return st;
    hp->v_taps = m->taps;
    if ((st = mms__mllama_check_vision(hp, mms_gguf_get_path(vision))) != MMS_OK) return st;
    {   /* mean and std of the image processor: ours when the converter wrote them, else CLIP's */
        struct mms_mllama_hparams clip;
        int64_t n = 0;
        mms_mllama_hparams_11b(&clip);
        memcpy(hp->image_mean, clip.image_mean, sizeof hp->image_mean);
        memcpy(hp->image_std, clip.image_std, sizeof hp->image_std);
        if (mms_gguf_find_key(vision, "mllama.vision.image_mean") >= 0 &&
            (mms_gguf_get_arr_f32(vision, "mllama.vision.image_mean", hp->image_mean, 3, &n) != MMS_OK || n != 3 ||
             mms_gguf_get_arr_f32(vision, "mllama.vision.image_std", hp->image_std, 3, &n) != MMS_OK || n != 3))
            return mms_set_error(MMS_ERR_FORMAT, "mllama: mllama.vision.image_mean/image_std in '%s' must be 3 floats each", mms_gguf_get_path(vision));
    }
    mms__mllama_derive(hp);
    return MMS_OK;
}

/* -- weights -- */

struct mms__wloader {
    struct mms_mllama_model *m;
    const struct mms_gguf   *g;            /* the file tensors come from now (unless hf) */
    struct mms__hf          *hf;           /* or the checkpoint folder */
    bool                     qk_permuted;  /* g holds q/k rows in Ollama's per-head order */
    enum mms_type            shape_type;   /* shapes only: the type of matrices */
    enum mms_status          st;
};

/* The key mmsched's converter writes (Ollama's reader ignores it): "ollama" when the q/k rows are
   permuted per head as Ollama's converter writes them, "hf" when they are in the checkpoint's order. */
#define MMS__QK_ROWS_KEY "mmsched.mllama.qk_rows"

/* Whether file g holds its cross-attention and vision q/k rows in Ollama's per-head order. In
   order: the key above when present; the older two-file layout (pair) is in the checkpoint's order
   (Ollama's legacy C++ code applies q_norm/k_norm to each head's rows as they are, which is right
   only then); a file with mllama.image_token_index, a key only mmsched's converter wrote before it
   wrote the marker, is in the checkpoint's order; any other single file is taken as written by
   Ollama's converter, which has permuted them since May 2025 (spec 6.2). */
static enum mms_status mms__mllama_qk_rows(const struct mms_gguf *g, bool pair, bool *permuted) {
    const char *v;
    size_t len;
    if (mms_gguf_find_key(g, MMS__QK_ROWS_KEY) >= 0) {
        if (mms_gguf_get_str(g, MMS__QK_ROWS_KEY, &v, &len) != MMS_OK) return mms__error_context(MMS_ERR_FORMAT, "mllama: %s", mms_last_error());
        if ((len == 6 && !memcmp(v, "ollama", 6)) || (len == 2 && !memcmp(v, "hf", 2))) { *permuted = len == 6; return MMS_OK; }
        return mms_set_error(MMS_ERR_FORMAT, "mllama: %s in '%s' is \"%.*s\", expected \"ollama\" or \"hf\"", MMS__QK_ROWS_KEY,
                             mms_gguf_get_path(g), (int)(len < 64 ? len : 64), v);
    }
    *permuted = !pair && mms_gguf_find_key(g, "mllama.image_token_index") < 0;
    return MMS_OK;
}

/* Declares weight `name` of the given shape on backend b: checked against the file, or (shapes
   only) made with that shape. NULL for an absent optional weight, or after an error (kept in L).
   quant_ok: the weight is only ever src0 of mul_mat or get_rows, so a quantized type is accepted;
   every other weight (norms, biases, gates, position and patch embeddings) must be f32/f16/bf16. */
/* A weight as a file holds it. */
struct mms__wfound {
    enum mms_type      type;
    int64_t            ne[4];
    const void        *data;
    const void        *region;
    const char        *where;       /* the file, for messages */
    const char        *file_type;   /* the type as the file names it, for messages */
    enum mms__hf_xform xform;
};

/* Finds weight `name` in the GGUF file or the checkpoint folder; false if absent (or on error, in L). */
static bool mms__weight_find(struct mms__wloader *L, const char *name, struct mms__wfound *w) {
    static char type_name[16];
    int i;
    memset(w, 0, sizeof *w);
    for (i = 0; i < 4; i++) w->ne[i] = 1;
    if (L->hf) {
        struct mms_safetensors_info si;
        const struct mms_safetensors *shard;
        if (!strcmp(name, "rope_freqs.weight")) {     /* computed from config.json */
            if (!L->m->rope_freqs_data) return false;
            w->type = MMS_TYPE_F32;
            w->ne[0] = L->m->hp.head_dim / 2;
            w->data = L->m->rope_freqs_data;
            w->where = "config.json";
            return true;
        }
        if (!mms__hf_find(L->hf, name, &si, &w->xform, &shard)) return false;
        if (si.n_dims > 4) {
            L->st = mms_set_error(MMS_ERR_FORMAT, "mllama: tensor '%s' in '%s' has %d dimensions", si.name, mms_safetensors_path(shard), si.n_dims);
            return false;
        }
        for (i = 0; i < si.n_dims; i++) w->ne[i] = si.shape[si.n_dims - 1 - i];   /* the file's order reversed: ggml's */
        w->type = si.type;
        w->data = si.data;
        w->file_type = si.dtype;
        w->where = mms_safetensors_path(shard);
        w->region = shard;
        return true;
    }
    {
        const int64_t idx = mms_gguf_find_tensor(L->g, name);
        struct mms_gguf_tensor_info info;
        if (idx < 0) return false;
        if ((L->st = mms_gguf_get_tensor(L->g, idx, &info)) != MMS_OK) return false;
        memcpy(w->ne, info.ne, sizeof w->ne);
        w->type = info.type;
        w->data = info.data;
        w->region = L->g;
        w->where = mms_gguf_get_path(L->g);
        snprintf(type_name, sizeof type_name, "GGUF type %u", info.ggml_type);
        w->file_type = type_name;
        return true;
    }
}

/* Declares weight `name` of the given shape on backend b: checked against the file, or (shapes
   only) made with that shape. NULL for an absent optional weight, or after an error (kept in L).
   quant_ok: the weight is only ever src0 of mul_mat or get_rows, so a quantized type is accepted;
   every other weight (norms, biases, gates, position and patch embeddings) must be f32/f16/bf16.
   From a checkpoint folder, those other weights and the derived gates become f32 when placed
   (they are small; the matrices are used as the files hold them). */
static struct mms_tensor *mms__weight(struct mms__wloader *L, int b, bool required, bool quant_ok, const char *name,
                                      int n_dims, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    const int64_t want[4] = { ne0, ne1, ne2, ne3 };
    struct mms__wfound w;
    struct mms_tensor *t;
    enum mms_type type;
    int i;
    if (L->st != MMS_OK) return NULL;
    if (L->m->shapes_only) {
        type = n_dims >= 2 && ne1 > 1 ? L->shape_type : MMS_TYPE_F32;
        if (mms_blck_size(type) > 1 && (!quant_ok || ne0 % mms_blck_size(type) != 0)) type = MMS_TYPE_F16;   /* as Ollama keeps them */
        t = mms_new_tensor(L->m->wctx[b], type, n_dims, want);
        if (!t) { L->st = mms_ctx_status(L->m->wctx[b]); return NULL; }
        return mms_set_name(t, name);
    }
    if (!mms__weight_find(L, name, &w)) {
        if (required && L->st == MMS_OK)
            L->st = L->hf ? mms_set_error(MMS_ERR_FORMAT, "mllama: the checkpoint folder '%s' lacks the tensor for weight '%s'", mms__hf_dir(L->hf), name)
                          : mms_set_error(MMS_ERR_FORMAT, "mllama: '%s' lacks tensor '%s'", mms_gguf_get_path(L->g), name);
        return NULL;
    }
    for (i = 0; i < 4; i++) {
        if (w.ne[i] != want[i]) {
            char got[96], exp[96];
            L->st = mms_set_error(MMS_ERR_FORMAT, "mllama: tensor '%s' in '%s' has shape %s, the %s implies %s", name, w.where,
                                  mms__shape_str(w.ne, got, sizeof got), L->hf ? "configuration" : "metadata", mms__shape_str(want, exp, sizeof exp));
            return NULL;
        }
    }
    if (w.type == MMS_TYPE_INVALID) {
        L->st = mms_set_error(MMS_ERR_UNSUPPORTED, "mllama: tensor '%s' in '%s' has %s, which mmsched cannot load", name, w.where, w.file_type);
        return NULL;
    }
    if (!mms_get_type_traits(w.type)->is_float && !(quant_ok && mms_get_type_traits(w.type)->is_quantized)) {
        L->st = mms_set_error(MMS_ERR_UNSUPPORTED, "mllama: tensor '%s' in '%s' has type %s; it is used by ops other than matrix "
                              "products and row lookups, so it must be f32, f16 or bf16", name, w.where, mms_type_name(w.type));
        return NULL;
    }
    type = L->hf && (!quant_ok || w.xform != MMS__HF_AS_IS) ? MMS_TYPE_F32 : w.type;
    t = mms_new_tensor(L->m->wctx[b], type, n_dims, want);
    if (!t) { L->st = mms_ctx_status(L->m->wctx[b]); return NULL; }
    mms_set_name(t, name);
    if (L->m->n_sources == L->m->cap_sources) {
        int cap = L->m->cap_sources ? 2 * L->m->cap_sources : 256;
        struct mms__wsource *grown = (struct mms__wsource *)MMS_REALLOC(L->m->sources, sizeof *grown * (size_t)cap);
        if (!grown) { L->st = mms_set_error(MMS_ERR_OOM, "mllama: out of host memory"); return NULL; }
        L->m->sources = grown;
        L->m->cap_sources = cap;
    }
    {
        struct mms__wsource *s = &L->m->sources[L->m->n_sources++];
        memset(s, 0, sizeof *s);
        s->t = t;
        s->region = type == w.type && w.xform == MMS__HF_AS_IS ? w.region : NULL;
        s->data = w.data;
        s->src_type = w.type;
        s->xform = w.xform;
        s->backend = b;
    }
    return t;
}

/* A q/k projection t (just declared) of n_heads heads: when its file permutes such rows per head,
   they are put back in the checkpoint's order at placement. */
static void mms__weight_qk(struct mms__wloader *L, struct mms_tensor *t, int n_heads) {
    struct mms__wsource *s;
    if (!t || !L->qk_permuted || L->st != MMS_OK) return;
    s = &L->m->sources[L->m->n_sources - 1];
    MMS_ASSERT(s->t == t);
    if (t->ne[1] % (2 * n_heads) != 0) {
        L->st = mms_set_error(MMS_ERR_FORMAT, "mllama: tensor '%s' in '%s': %lld rows are not %d heads of an even size, as Ollama's q/k "
                              "row order needs", t->name, mms_gguf_get_path(L->g), (long long)t->ne[1], n_heads);
        return;
    }
    s->row_heads = n_heads;
}

/* W1: vectors, never quantized; W2: matrices used only by mul_mat/get_rows (may be quantized);
   WF2: matrices used by other ops (float only). */
#define MMS__W1(L, b, req, n0, ...)        mms__weight(L, b, req, false, mms__wname(nb, sizeof nb, __VA_ARGS__), 1, n0, 1, 1, 1)
#define MMS__W2(L, b, req, n0, n1, ...)    mms__weight(L, b, req, true, mms__wname(nb, sizeof nb, __VA_ARGS__), 2, n0, n1, 1, 1)
#define MMS__WF2(L, b, req, n0, n1, ...)   mms__weight(L, b, req, false, mms__wname(nb, sizeof nb, __VA_ARGS__), 2, n0, n1, 1, 1)

static const char *mms__wname(char *buf, size_t size, const char *fmt, ...) MMS_PRINTF(3, 4);
static const char *mms__wname(char *buf, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    return buf;
}

static void mms__mllama_text_weights(struct mms__wloader *L, int n_gpu_layers) {
    struct mms_mllama_model *m = L->m;
    const struct mms_mllama_hparams *hp = &m->hp;
    const int64_t D = hp->n_embd, Q = (int64_t)hp->n_head * hp->head_dim, KV = (int64_t)hp->n_head_kv * hp->head_dim, FF = hp->n_ff;
    char nb[96];
    int il;
    {   /* the embedding table's row count comes from the file: vocabulary plus the image rows */
        int64_t idx = m->shapes_only ? -1 : mms_gguf_find_tensor(L->g, "token_embd.weight");
        struct mms_gguf_tensor_info info;
        m->hp.n_embd_rows = hp->n_vocab + 8;
        if (idx >= 0 && mms_gguf_get_tensor(L->g, idx, &info) == MMS_OK) m->hp.n_embd_rows = (int)info.ne[1];
        if (hp->n_embd_rows <= hp->image_token_id && L->st == MMS_OK)
            L->st = mms_set_error(MMS_ERR_FORMAT, "mllama: token_embd has %d rows, too few for the image token %d", hp->n_embd_rows, hp->image_token_id);
    }
    m->token_embd = MMS__W2(L, 0, true, D, hp->n_embd_rows, "token_embd.weight");
    m->output_norm = MMS__W1(L, m->output_backend, true, D, "output_norm.weight");
    m->output = MMS__W2(L, m->output_backend, true, D, hp->n_vocab, "output.weight");
    m->rope_freqs = MMS__W1(L, 0, false, hp->head_dim / 2, "rope_freqs.weight");
    for (il = 0; il < hp->n_layer; il++) {
        struct mms__mllama_tlayer *ly = &m->layers[il];
        int b = ly->backend = (m->backends[1] != m->backends[0] && il >= hp->n_layer - n_gpu_layers) ? 1 : 0;
        ly->cross = m->is_cross[il];
        ly->attn_norm = MMS__W1(L, b, true, D, "blk.%d.attn_norm.weight", il);
        ly->ffn_norm = MMS__W1(L, b, true, D, "blk.%d.ffn_norm.weight", il);
        ly->ffn_gate = MMS__W2(L, b, true, D, FF, "blk.%d.ffn_gate.weight", il);
        ly->ffn_up = MMS__W2(L, b, true, D, FF, "blk.%d.ffn_up.weight", il);
        ly->ffn_down = MMS__W2(L, b, true, FF, D, "blk.%d.ffn_down.weight", il);
        if (ly->cross) {
            ly->wq = MMS__W2(L, b, true, D, Q, "blk.%d.cross_attn_q_proj.weight", il);
            mms__weight_qk(L, ly->wq, hp->n_head);
            ly->wk = MMS__W2(L, b, true, D, KV, "blk.%d.cross_attn_k_proj.weight", il);
            mms__weight_qk(L, ly->wk, hp->n_head_kv);
            ly->wv = MMS__W2(L, b, true, D, KV, "blk.%d.cross_attn_v_proj.weight", il);
            ly->wo = MMS__W2(L, b, true, Q, D, "blk.%d.cross_attn_o_proj.weight", il);
            ly->q_norm = MMS__W1(L, b, true, hp->head_dim, "blk.%d.cross_attn_q_norm.weight", il);
            ly->k_norm = MMS__W1(L, b, true, hp->head_dim, "blk.%d.cross_attn_k_norm.weight", il);
            ly->gate_attn = MMS__W1(L, b, true, 1, "blk.%d.cross_attn_attn_gate", il);
            ly->gate_mlp = MMS__W1(L, b, true, 1, "blk.%d.cross_attn_mlp_gate", il);
        } else {
            ly->wq = MMS__W2(L, b, true, D, Q, "blk.%d.attn_q.weight", il);
            ly->wk = MMS__W2(L, b, true, D, KV, "blk.%d.attn_k.weight", il);
            ly->wv = MMS__W2(L, b, true, D, KV, "blk.%d.attn_v.weight", il);
            ly->wo = MMS__W2(L, b, true, Q, D, "blk.%d.attn_output.weight", il);
        }
    }
}

/* legacy: the projector file of the older two-file layout (ln1/ln2, attn_out, fc1/fc2 swapped) */
static void mms__mllama_vision_layer(struct mms__wloader *L, struct mms__mllama_vlayer *ly, const char *prefix, int il, bool global, bool legacy) {
    const struct mms_mllama_hparams *hp = &L->m->hp;
    const int b = L->m->vision_backend;
    const int64_t D = hp->v_n_embd, FF = hp->v_n_ff;
    const char *ln1 = legacy ? "ln1" : "attn_norm", *ln2 = legacy ? "ln2" : "ffn_norm";
    const char *fc1 = legacy ? "ffn_down" : "ffn_up", *fc2 = legacy ? "ffn_up" : "ffn_down";
    char nb[96];
    ly->ln1_w = MMS__W1(L, b, true, D, "%s.%d.%s.weight", prefix, il, ln1);
    ly->ln1_b = MMS__W1(L, b, true, D, "%s.%d.%s.bias", prefix, il, ln1);
    ly->ln2_w = MMS__W1(L, b, true, D, "%s.%d.%s.weight", prefix, il, ln2);
    ly->ln2_b = MMS__W1(L, b, true, D, "%s.%d.%s.bias", prefix, il, ln2);
    ly->wq = MMS__W2(L, b, true, D, D, "%s.%d.attn_q.weight", prefix, il);
    mms__weight_qk(L, ly->wq, hp->v_n_head);
    ly->wk = MMS__W2(L, b, true, D, D, "%s.%d.attn_k.weight", prefix, il);
    mms__weight_qk(L, ly->wk, hp->v_n_head);
    ly->wv = MMS__W2(L, b, true, D, D, "%s.%d.attn_v.weight", prefix, il);
    ly->wo = MMS__W2(L, b, true, D, D, "%s.%d.%s.weight", prefix, il, legacy ? "attn_out" : "attn_output");
    ly->fc1_w = MMS__W2(L, b, true, D, FF, "%s.%d.%s.weight", prefix, il, fc1);
    ly->fc1_b = MMS__W1(L, b, true, FF, "%s.%d.%s.bias", prefix, il, fc1);
    ly->fc2_w = MMS__W2(L, b, true, FF, D, "%s.%d.%s.weight", prefix, il, fc2);
    ly->fc2_b = MMS__W1(L, b, true, D, "%s.%d.%s.bias", prefix, il, fc2);
    if (global) {
        ly->gate_attn = MMS__W1(L, b, true, 1, "%s.%d.attn_gate", prefix, il);
        ly->gate_ffn = MMS__W1(L, b, true, 1, "%s.%d.ffn_gate", prefix, il);
    }
}

static void mms__mllama_vision_weights(struct mms__wloader *L, bool legacy) {
    struct mms_mllama_model *m = L->m;
    const struct mms_mllama_hparams *hp = &m->hp;
    const int b = m->vision_backend;
    const int64_t D = hp->v_n_embd, T = hp->v_max_tiles, N = hp->v_n_tokens;
    const int64_t n_ids = mms__mllama_aspect_ratios(hp->v_max_tiles, NULL, NULL) + 1;   /* id 0 is padding */
    char nb[96];
    int il;
    m->patch_embd = mms__weight(L, b, true, false, "v.patch_embd.weight", 4, hp->v_patch_size, hp->v_patch_size, hp->v_channels, D);
    m->class_embd = MMS__W1(L, b, true, D, "v.class_embd");
    m->pos_embd = MMS__WF2(L, b, true, D, N, "v.position_embd.weight");
    m->pos_gate = MMS__W1(L, b, true, 1, "v.position_embd.gate");
    m->tile_pos_embd = MMS__W2(L, b, true, T * N * D, n_ids, "v.tile_position_embd.weight");
    m->tile_pos_gate = MMS__W1(L, b, true, 1, "v.tile_position_embd.gate");
    m->pre_tile_embd = MMS__W2(L, b, true, T * D, n_ids, "v.pre_tile_position_embd.weight");
    m->pre_tile_gate = MMS__W1(L, b, true, 1, "v.pre_tile_position_embd.gate");
    m->post_tile_embd = MMS__W2(L, b, true, T * D, n_ids, "v.post_tile_position_embd.weight");
    m->post_tile_gate = MMS__W1(L, b, true, 1, "v.post_tile_position_embd.gate");
    m->pre_ln_w = MMS__W1(L, b, true, D, "v.pre_ln.weight");
    m->pre_ln_b = MMS__W1(L, b, true, D, "v.pre_ln.bias");
    m->post_ln_w = MMS__W1(L, b, true, D, "v.post_ln.weight");
    m->post_ln_b = MMS__W1(L, b, true, D, "v.post_ln.bias");
    m->mm_w = MMS__W2(L, b, true, hp->v_output_dim, hp->n_embd, "mm.0.weight");
    m->mm_b = MMS__W1(L, b, true, hp->n_embd, "mm.0.bias");
    for (il = 0; il < hp->v_n_layer; il++) mms__mllama_vision_layer(L, &m->vlayers[il], "v.blk", il, false, legacy);
    for (il = 0; il < hp->v_n_global; il++) mms__mllama_vision_layer(L, &m->vglobal[il], "v.global.blk", il, true, legacy);
}

static enum mms_status mms__mllama_keep_buffer(struct mms_mllama_model *m, mms_backend_buffer_t buf) {
    if (!buf) return mms_last_status();
    if (m->n_bufs == m->cap_bufs) {
        int cap = m->cap_bufs ? 2 * m->cap_bufs : 4;
        mms_backend_buffer_t *grown = (mms_backend_buffer_t *)MMS_REALLOC(m->bufs, sizeof *grown * (size_t)cap);
        if (!grown) { mms_backend_buffer_free(buf); return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory"); }
        m->bufs = grown;
        m->cap_bufs = cap;
    }
    mms_backend_buffer_set_usage(buf, MMS_BUFFER_USAGE_WEIGHTS);
    m->bufs[m->n_bufs++] = buf;
    return MMS_OK;
}

/* Progress of the load by bytes of weights read; the callback may stop it. */
struct mms__load_progress {
    bool  (*cb)(float fraction, void *user);
    void   *user;
    size_t  done, total;
};

static enum mms_status mms__load_step(struct mms__load_progress *lp, size_t bytes) {
    if (!lp || !lp->cb) return MMS_OK;
    lp->done += bytes;
    if (!lp->cb(lp->total ? (float)((double)lp->done / (double)lp->total) : 1.0f, lp->user))
        return mms_set_error(MMS_ABORTED, "mllama: the progress callback stopped the load");
    return MMS_OK;
}

/* Reads mapped memory page by page, so the file is read now. Returns a sum the compiler cannot drop. */
static unsigned mms__touch_pages(const void *p, size_t n) {
    const volatile unsigned char *c = (const volatile unsigned char *)p;
    unsigned sum = 0;
    size_t i;
    for (i = 0; i < n; i += 4096) sum += c[i];
    return sum;
}

/* Sets a weight from its file, putting rows that Ollama's converter permuted within each head
   (row h*d + 2i + p of the file is row h*d + p*d/2 + i of the checkpoint) back in the checkpoint's
   order. Whole rows move, so any block type works. */
static enum mms_status mms__set_weight(const struct mms__wsource *s) {
    struct mms_tensor *t = s->t;
    const char *src = (const char *)s->data;
    char *moved;
    size_t row;
    int64_t d, h, i;
    int p;
    enum mms_status st;
    if (s->src_type != t->type || s->xform != MMS__HF_AS_IS) {   /* to f32, maybe a gate's tanh (a checkpoint folder's) */
        const int64_t n = mms_nelements(t);
        float *f = (float *)MMS_MALLOC(sizeof(float) * (size_t)(n + 1));
        if (!f) return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory");
        mms_get_type_traits(s->src_type)->to_float(s->data, f, n);
        for (i = 0; i < n; i++) {
            if (s->xform == MMS__HF_TANH) f[i] = (float)tanh((double)f[i]);
            else if (s->xform == MMS__HF_ONE_MINUS_TANH) f[i] = 1.0f - (float)tanh((double)f[i]);
        }
        st = mms_backend_tensor_set(t, f, 0, mms_nbytes(t));
        MMS_FREE(f);
        return st;
    }
    if (s->row_heads == 0) return mms_backend_tensor_set(t, src, 0, mms_nbytes(t));
    row = mms_row_size(t->type, t->ne[0]);
    d = mms_nrows(t) / s->row_heads;
    if (!(moved = (char *)MMS_MALLOC(mms_nbytes(t)))) return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory");
    for (h = 0; h < s->row_heads; h++)   /* in host memory, then one set (a CPU_REPACK buffer takes whole tensors) */
        for (p = 0; p < 2; p++)
            for (i = 0; i < d / 2; i++) memcpy(moved + (size_t)(h * d + p * (d / 2) + i) * row, src + (size_t)(h * d + 2 * i + p) * row, row);
    st = mms_backend_tensor_set(t, moved, 0, mms_nbytes(t));
    MMS_FREE(moved);
    return st;
}

/* Whether weight t on backend b goes into a CPU_REPACK buffer: a Q4_0/Q4_K/Q8_0 matrix that only
   MUL_MAT reads (the embedding tables are read by GET_ROWS), on the CPU backend. */
static bool mms__mllama_repacks(const struct mms_mllama_model *m, int b, const struct mms_tensor *t) {
    return m->cpu_repack && mms_backend_is_cpu(m->backends[b]) && mms_backend_cpu_repacks(t) && t != m->token_embd &&
           t != m->tile_pos_embd && t != m->pre_tile_embd && t != m->post_tile_embd;
}

/* The weights of backend b that mms__mllama_repacks picks, in one CPU_REPACK buffer, repacked from
   the file; the mapped pages they came from are released (whole pages inside each weight only). */
static enum mms_status mms__mllama_place_repacked(struct mms_mllama_model *m, int b, struct mms__load_progress *lp) {
    mms_backend_buffer_type_t buft = mms_backend_cpu_repack_buffer_type();
    const size_t align = mms_backend_buft_get_alignment(buft);
    size_t total = 0;
    mms_backend_buffer_t buf;
    char *at;
    enum mms_status st;
    int i;
    for (i = 0; i < m->n_sources; i++)
        if (m->sources[i].backend == b && !m->sources[i].t->data && mms__mllama_repacks(m, b, m->sources[i].t))
            total += MMS__ALIGN_UP(mms_backend_buft_get_alloc_size(buft, m->sources[i].t), align);
    if (!total) return MMS_OK;
    if (!(buf = mms_backend_buft_alloc_buffer(buft, total)))
        return mms_set_error(mms_last_status(), "mllama: cannot allocate %zu bytes for the repacked CPU weights (no_cpu_repack keeps them mapped): %s",
                             total, mms_last_error());
    if ((st = mms__mllama_keep_buffer(m, buf)) != MMS_OK) return st;
    at = (char *)mms_backend_buffer_get_base(buf);
    for (i = 0; i < m->n_sources; i++) {
        const struct mms__wsource *s = &m->sources[i];
        if (s->backend != b || s->t->data || !mms__mllama_repacks(m, b, s->t)) continue;
        if ((st = mms_backend_tensor_alloc(buf, s->t, at)) != MMS_OK || (st = mms__set_weight(s)) != MMS_OK) return st;
        at += MMS__ALIGN_UP(mms_backend_buft_get_alloc_size(buft, s->t), align);
        if (s->region) mms__release_pages(s->data, mms_nbytes(s->t));
        if ((st = mms__load_step(lp, mms_nbytes(s->t))) != MMS_OK) return st;
    }
    return MMS_OK;
}

/* Host weights are used where the file is mapped (no copy), except those whose rows must move,
   which get a buffer of their own; on other backends every weight is copied into a buffer of the
   backend. Without a file (shapes only) weights get addresses that are never read. */
static enum mms_status mms__mllama_place_weights(struct mms_mllama_model *m, struct mms__load_progress *lp) {
    int b, f, i;
    enum mms_status st;
    unsigned touched = 0;
    for (b = 0; b < 2; b++) {
        struct mms_context *ctx = m->wctx[b];
        struct mms_tensor *t;
        if (!mms_get_first_tensor(ctx)) continue;
        if (m->shapes_only) {
            char *at = (char *)(uintptr_t)4096;
            size_t total = 0;
            mms_backend_buffer_t buf;
            for (t = mms_get_first_tensor(ctx); t; t = mms_get_next_tensor(ctx, t)) total += MMS__ALIGN_UP(mms_nbytes(t), 64);
            buf = mms_backend_cpu_buffer_from_ptr(at, total);
            if ((st = mms__mllama_keep_buffer(m, buf)) != MMS_OK) return st;
            for (t = mms_get_first_tensor(ctx); t; t = mms_get_next_tensor(ctx, t)) {
                if ((st = mms_backend_tensor_alloc(buf, t, at)) != MMS_OK) return st;
                at += MMS__ALIGN_UP(mms_nbytes(t), 64);
            }
        } else if (mms_backend_buft_is_host(mms_backend_get_default_buffer_type(m->backends[b]))) {
            const size_t align = mms_backend_get_alignment(m->backends[b]);
            size_t moved = 0;
            for (i = 0; i < m->n_sources; i++) {       /* one buffer over each mapped region's weights on this backend */
                const struct mms__wsource *s = &m->sources[i];
                const char *lo = (const char *)s->data, *hi = lo + mms_nbytes(s->t);
                mms_backend_buffer_t buf;
                if (s->backend != b || !s->region || s->row_heads || s->t->data || mms__mllama_repacks(m, b, s->t)) continue;
                for (f = i + 1; f < m->n_sources; f++) {
                    const struct mms__wsource *o = &m->sources[f];
                    if (o->backend != b || o->region != s->region || o->row_heads || mms__mllama_repacks(m, b, o->t)) continue;
                    if ((const char *)o->data < lo) lo = (const char *)o->data;
                    if ((const char *)o->data + mms_nbytes(o->t) > hi) hi = (const char *)o->data + mms_nbytes(o->t);
                }
                buf = mms_backend_cpu_buffer_from_ptr((void *)lo, (size_t)(hi - lo));
                if ((st = mms__mllama_keep_buffer(m, buf)) != MMS_OK) return st;
                for (f = i; f < m->n_sources; f++) {
                    const struct mms__wsource *o = &m->sources[f];
                    if (o->backend != b || o->region != s->region || o->row_heads || mms__mllama_repacks(m, b, o->t)) continue;
                    if ((st = mms_backend_tensor_alloc(buf, o->t, (void *)o->data)) != MMS_OK) return st;
                    if (lp && lp->cb) touched += mms__touch_pages(o->data, mms_nbytes(o->t));
                    if ((st = mms__load_step(lp, mms_nbytes(o->t))) != MMS_OK) return st;
                }
            }
            if ((st = mms__mllama_place_repacked(m, b, lp)) != MMS_OK) return st;
            for (i = 0; i < m->n_sources; i++)
                if (m->sources[i].backend == b && !m->sources[i].t->data) moved += MMS__ALIGN_UP(mms_nbytes(m->sources[i].t), align);
            if (moved) {                               /* reordered, converted or computed: a buffer of their own */
                mms_backend_buffer_t buf = mms_backend_alloc_buffer(m->backends[b], moved);
                char *at;
                if (!buf) return mms_set_error(mms_last_status(), "mllama: cannot allocate %zu bytes of reordered or converted weights on %s: %s",
                                               moved, mms_backend_name(m->backends[b]), mms_last_error());
                if ((st = mms__mllama_keep_buffer(m, buf)) != MMS_OK) return st;
                at = (char *)mms_backend_buffer_get_base(buf);
                for (i = 0; i < m->n_sources; i++) {
                    const struct mms__wsource *s = &m->sources[i];
                    if (s->backend != b || s->t->data) continue;
                    if ((st = mms_backend_tensor_alloc(buf, s->t, at)) != MMS_OK || (st = mms__set_weight(s)) != MMS_OK) return st;
                    at += MMS__ALIGN_UP(mms_nbytes(s->t), align);
                    if ((st = mms__load_step(lp, mms_nbytes(s->t))) != MMS_OK) return st;
                }
            }
        } else {
            mms_backend_buffer_t buf = mms_backend_alloc_ctx_tensors(ctx, m->backends[b]);
            if (!buf) return mms__error_context(mms_last_status(), "mllama: cannot allocate the weights on %s: %s", mms_backend_name(m->backends[b]), mms_last_error());
            if ((st = mms__mllama_keep_buffer(m, buf)) != MMS_OK) return st;
            for (i = 0; i < m->n_sources; i++) {
                if (m->sources[i].backend != b) continue;
                if ((st = mms__set_weight(&m->sources[i])) != MMS_OK) return st;
                if ((st = mms__load_step(lp, mms_nbytes(m->sources[i].t))) != MMS_OK) return st;
            }
        }
    }
    (void)touched;
    return MMS_OK;
}

/* The model object with its arrays, once the hyper-parameters are known. */
static enum mms_status mms__mllama_alloc_layers(struct mms_mllama_model *m) {
    const struct mms_mllama_hparams *hp = &m->hp;
    int b;
    for (b = 0; b < 2; b++) {
        struct mms_init_params ip = { 0, NULL, true };
        if (!(m->wctx[b] = mms_init(ip))) return mms_last_status();
    }
    m->layers = (struct mms__mllama_tlayer *)MMS_MALLOC(sizeof *m->layers * (size_t)hp->n_layer);
    m->vlayers = (struct mms__mllama_vlayer *)MMS_MALLOC(sizeof *m->vlayers * (size_t)(hp->v_n_layer + 1));
    m->vglobal = (struct mms__mllama_vlayer *)MMS_MALLOC(sizeof *m->vglobal * (size_t)(hp->v_n_global + 1));
    if (!m->layers || !m->vlayers || !m->vglobal) return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory");
    memset(m->layers, 0, sizeof *m->layers * (size_t)hp->n_layer);
    memset(m->vlayers, 0, sizeof *m->vlayers * (size_t)(hp->v_n_layer + 1));
    memset(m->vglobal, 0, sizeof *m->vglobal * (size_t)(hp->v_n_global + 1));
    return MMS_OK;
}

MMS_API struct mms_mllama_model *mms_mllama_model_load(const struct mms_mllama_load_params *p) {
    struct mms_mllama_model *m;
    struct mms__wloader L;
    struct mms__load_progress lp;
    const struct mms_gguf *vision_file;
    const int64_t t0 = mms_time_us();
    if (!p || !p->path || !p->cpu) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_model_load: a path and a cpu backend are required"); return NULL; }
    if (!(m = (struct mms_mllama_model *)MMS_MALLOC(sizeof *m))) { mms_set_error(MMS_ERR_OOM, "mllama: out of host memory"); return NULL; }
    memset(m, 0, sizeof *m);
    m->backends[0] = p->cpu;
    m->backends[1] = p->gpu ? p->gpu : p->cpu;
    m->cpu_repack = !p->no_cpu_repack;
    memset(&L, 0, sizeof L);
    L.m = m;
    if (mms__hf_is_folder(p->path)) {               /* a Hugging Face checkpoint folder */
        struct mms_mllama_hparams *hp = &m->hp;
        if (p->mmproj_path) { mms_set_error(MMS_ERR_INVALID_ARG, "mllama: '%s' is a checkpoint folder; it takes no projector file", p->path); goto fail; }
        if (!(m->hf = mms__hf_open(p->path)) || mms__hf_hparams(m->hf, hp, &m->cross_layers, &m->taps, &m->rope_freqs_data) != MMS_OK) goto fail;
        hp->cross_layers = m->cross_layers;
        hp->v_taps = m->taps;
        if (mms__mllama_check_text(m, p->path) != MMS_OK || mms__mllama_check_vision(hp, p->path) != MMS_OK) goto fail;
        mms__mllama_derive(hp);
        if (p->text_only) memset(&hp->v_n_layer, 0, sizeof *hp - offsetof(struct mms_mllama_hparams, v_n_layer));
        if (mms__mllama_alloc_layers(m) != MMS_OK) goto fail;
        m->has_vision = !p->text_only;
        m->rope_neox = true;                          /* self-attention q/k as transformers keeps them */
        m->vision_backend = p->vision_on_gpu && p->gpu ? 1 : 0;
        m->output_backend = p->gpu && p->n_gpu_layers >= hp->n_layer ? 1 : 0;
        L.hf = m->hf;
        mms__mllama_text_weights(&L, p->n_gpu_layers);
        if (m->has_vision) mms__mllama_vision_weights(&L, false);
        if (L.st != MMS_OK || (m->has_vision && mms__hf_check_all_used(m->hf) != MMS_OK)) goto fail;
        goto place;
    }
    if (!(m->files[m->n_files++] = mms_gguf_open(p->path))) goto fail;
    if (p->mmproj_path && !p->text_only && !(m->files[m->n_files++] = mms_gguf_open(p->mmproj_path))) goto fail;
    vision_file = p->text_only ? NULL : m->files[m->n_files - 1];
    if (vision_file && mms_gguf_find_key(vision_file, "mllama.vision.block_count") < 0) {
        if (p->mmproj_path) { mms_set_error(MMS_ERR_FORMAT, "mllama: '%s' has no vision tower (mllama.vision.*)", p->mmproj_path); goto fail; }
        vision_file = NULL;   /* a text-only model */
    }
    if (mms__mllama_read_hparams(m, m->files[0], vision_file) != MMS_OK || mms__mllama_alloc_layers(m) != MMS_OK) goto fail;
    m->has_vision = vision_file != NULL;
    m->vision_backend = p->vision_on_gpu && p->gpu ? 1 : 0;
    m->output_backend = p->gpu && p->n_gpu_layers >= m->hp.n_layer ? 1 : 0;
    L.g = m->files[0];
    if (mms__mllama_qk_rows(L.g, p->mmproj_path != NULL, &L.qk_permuted) != MMS_OK) goto fail;
    mms__mllama_text_weights(&L, p->n_gpu_layers);
    if (m->has_vision && L.st == MMS_OK) {
        L.g = vision_file;
        if (mms__mllama_qk_rows(L.g, p->mmproj_path != NULL, &L.qk_permuted) != MMS_OK) goto fail;
        mms__mllama_vision_weights(&L, p->mmproj_path != NULL);
    }
    if (L.st != MMS_OK) goto fail;
place:
    memset(&lp, 0, sizeof lp);
    lp.cb = p->progress;
    lp.user = p->progress_user_data;
    if (lp.cb) {
        int b;
        struct mms_tensor *t;
        for (b = 0; b < 2; b++)
            for (t = mms_get_first_tensor(m->wctx[b]); t; t = mms_get_next_tensor(m->wctx[b], t)) lp.total += mms_nbytes(t);
    }
    if (mms__mllama_place_weights(m, &lp) != MMS_OK) goto fail;
    MMS_FREE(m->sources);                         /* placed: the mapping is reached through the tensors now */
    m->sources = NULL;
    m->n_sources = m->cap_sources = 0;
    m->load_us = mms_time_us() - t0;
    return m;
fail:
    mms_mllama_model_free(m);
    return NULL;
}

MMS_API struct mms_mllama_image_params mms_mllama_model_image_params(const struct mms_mllama_model *m) {
    struct mms_mllama_image_params ip;
    memset(&ip, 0, sizeof ip);
    if (!m) return ip;
    ip.image_size = m->hp.v_image_size;
    ip.max_num_tiles = m->hp.v_max_tiles;
    memcpy(ip.mean, m->hp.image_mean, sizeof ip.mean);
    memcpy(ip.std, m->hp.image_std, sizeof ip.std);
    return ip;
}

MMS_API struct mms_mllama_model *mms_mllama_model_shapes_only(const struct mms_mllama_hparams *hp, mms_backend_t cpu, enum mms_type weight_type) {
    struct mms_mllama_model *m;
    struct mms__wloader L;
    int i;
    if (!hp || !cpu || hp->n_layer < 1) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_model_shapes_only: hparams and a cpu backend are required"); return NULL; }
    if (!(m = (struct mms_mllama_model *)MMS_MALLOC(sizeof *m))) { mms_set_error(MMS_ERR_OOM, "mllama: out of host memory"); return NULL; }
    memset(m, 0, sizeof *m);
    m->hp = *hp;
    m->shapes_only = true;
    m->backends[0] = m->backends[1] = cpu;
    m->cross_layers = (int *)MMS_MALLOC(sizeof(int) * (size_t)(hp->n_cross + 1));
    m->taps = (int *)MMS_MALLOC(sizeof(int) * (size_t)(hp->v_n_taps + 1));
    m->is_cross = (bool *)MMS_MALLOC(sizeof(bool) * (size_t)hp->n_layer);
    if (!m->cross_layers || !m->taps || !m->is_cross || mms__mllama_alloc_layers(m) != MMS_OK) goto fail;
    for (i = 0; i < hp->n_cross; i++) m->cross_layers[i] = hp->cross_layers[i];
    for (i = 0; i < hp->v_n_taps; i++) m->taps[i] = hp->v_taps[i];
    for (i = 0; i < hp->n_layer; i++) m->is_cross[i] = false;
    for (i = 0; i < hp->n_cross; i++) m->is_cross[hp->cross_layers[i]] = true;
    m->hp.cross_layers = m->cross_layers;
    m->hp.v_taps = m->taps;
    mms__mllama_derive(&m->hp);
    m->has_vision = hp->v_n_layer > 0;
    memset(&L, 0, sizeof L);
    L.m = m;
    L.shape_type = weight_type;
    mms__mllama_text_weights(&L, 0);
    if (m->has_vision) mms__mllama_vision_weights(&L, false);
    if (L.st != MMS_OK || mms__mllama_place_weights(m, NULL) != MMS_OK) goto fail;
    return m;
fail:
    mms_mllama_model_free(m);
    return NULL;
}
/* ==== end src/mllama/model.c ==== */

/* ==== begin src/mllama/hf_folder.c ==== */
/* >>mllama-hf =====================================================================================
   A Hugging Face checkpoint folder as Meta and transformers publish it: config.json (the
   hyper-parameters), model.safetensors or model-*.safetensors with model.safetensors.index.json
   (the weights, used where they are mapped), preprocessor_config.json (mean, std, tile size).
   Weights are found by the GGUF names the loader asks for, mapped to the checkpoint's names (the
   on-disk language_model.model.* / vision_model.* ones, or the newer model.language_model.* ones).
   Everything is checked as the GGUF reader checks its files: a missing or unreadable file, a
   field of the wrong type, a shard that the index names but lacks the tensor, a tensor no weight
   uses: each is an error naming the file and the field. */

struct mms__hf {
    char                    *dir;
    struct mms_json         *config, *preproc, *index;
    struct mms_safetensors **shards;
    uint8_t                **used;          /* per shard, per tensor: asked for by the loader */
    int                      n_shards;
};

static void mms__hf_close(struct mms__hf *hf) {
    int i;
    if (!hf) return;
    for (i = 0; i < hf->n_shards; i++) { mms_safetensors_close(hf->shards[i]); MMS_FREE(hf->used[i]); }
    MMS_FREE(hf->shards); MMS_FREE(hf->used);
    mms_json_free(hf->config); mms_json_free(hf->preproc); mms_json_free(hf->index);
    MMS_FREE(hf->dir);
    MMS_FREE(hf);
}

static const char *mms__hf_dir(const struct mms__hf *hf) { return hf->dir; }

/* dir/name into out (size bytes), cut if too long (the callers bound the folder's path). */
static void mms__hf_path(const struct mms__hf *hf, const char *name, char *out, size_t size) {
    size_t a = strlen(hf->dir), b = strlen(name);
    if (a + b + 2 > size) { out[0] = '\0'; return; }
    memcpy(out, hf->dir, a);
    out[a] = '/';
    memcpy(out + a + 1, name, b + 1);
}

/* Whether path is a checkpoint folder (it has a config.json). */
static bool mms__hf_is_folder(const char *path) {
    char p[4096];
    if (strlen(path) + 13 >= sizeof p) return false;
    snprintf(p, sizeof p, "%s/config.json", path);
    return mms__file_exists(p);
}

static enum mms_status mms__hf_add_shard(struct mms__hf *hf, const char *file) {
    char p[4096];
    struct mms_safetensors *st;
    void *grown;
    if (!*file || strchr(file, '/') || strchr(file, '\\') || !strcmp(file, "..") || strlen(file) + strlen(hf->dir) + 2 >= sizeof p)
        return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s/model.safetensors.index.json': weight_map names the shard \"%.80s\", not a file of the folder",
                             hf->dir, file);
    mms__hf_path(hf, file, p, sizeof p);
    if (!(st = mms_safetensors_open(p))) return mms_last_status();
    if (!(grown = MMS_REALLOC(hf->shards, sizeof *hf->shards * (size_t)(hf->n_shards + 1)))) { mms_safetensors_close(st); return mms_set_error(MMS_ERR_OOM, "mllama: out of memory"); }
    hf->shards = (struct mms_safetensors **)grown;
    if (!(grown = MMS_REALLOC(hf->used, sizeof *hf->used * (size_t)(hf->n_shards + 1)))) { mms_safetensors_close(st); return mms_set_error(MMS_ERR_OOM, "mllama: out of memory"); }
    hf->used = (uint8_t **)grown;
    hf->used[hf->n_shards] = (uint8_t *)MMS_MALLOC((size_t)mms_safetensors_n_tensors(st) + 1);
    hf->shards[hf->n_shards++] = st;
    if (!hf->used[hf->n_shards - 1]) return mms_set_error(MMS_ERR_OOM, "mllama: out of memory");
    memset(hf->used[hf->n_shards - 1], 0, (size_t)mms_safetensors_n_tensors(st) + 1);
    return MMS_OK;
}

static int mms__hf_shard_of(const struct mms__hf *hf, const char *file) {
    int i;
    for (i = 0; i < hf->n_shards; i++) {
        const char *p = mms_safetensors_path(hf->shards[i]);
        size_t lp = strlen(p), lf = strlen(file);
        if (lp > lf && p[lp - lf - 1] == '/' && !strcmp(p + lp - lf, file)) return i;
    }
    return -1;
}

/* The folder's files: config.json, the preprocessor's (optional), the index and every shard it
   names (or model.safetensors alone); the index and the shards must agree tensor for tensor. */
static struct mms__hf *mms__hf_open(const char *dir) {
    struct mms__hf *hf = (struct mms__hf *)MMS_MALLOC(sizeof *hf);
    char p[4096];
    size_t n = strlen(dir);
    if (!hf) { mms_set_error(MMS_ERR_OOM, "mllama: out of memory"); return NULL; }
    memset(hf, 0, sizeof *hf);
    while (n > 1 && dir[n - 1] == '/') n--;
    if (n + 64 >= sizeof p || !(hf->dir = (char *)MMS_MALLOC(n + 1))) { mms_set_error(MMS_ERR_INVALID_ARG, "mllama: folder path too long"); mms__hf_close(hf); return NULL; }
    memcpy(hf->dir, dir, n);
    hf->dir[n] = '\0';
    mms__hf_path(hf, "config.json", p, sizeof p);
    if (!(hf->config = mms_json_parse_file(p))) goto fail;
    mms__hf_path(hf, "preprocessor_config.json", p, sizeof p);
    if (mms__file_exists(p) && !(hf->preproc = mms_json_parse_file(p))) goto fail;
    mms__hf_path(hf, "model.safetensors.index.json", p, sizeof p);
    if (mms__file_exists(p)) {
        int64_t map, i;
        if (!(hf->index = mms_json_parse_file(p))) goto fail;
        map = mms_json_get(hf->index, 0, "weight_map");
        if (mms_json_type(hf->index, map) != MMS_JSON_OBJECT) {
            mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': weight_map is %s", p, map < 0 ? "missing" : "not an object");
            goto fail;
        }
        for (i = 0; i < mms_json_len(hf->index, map); i++) {
            const char *name = mms_json_key(hf->index, map, i, NULL), *file = mms_json_str(hf->index, mms_json_at(hf->index, map, i), NULL);
            int s;
            if (!file) { mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': weight_map[\"%.80s\"] is not a file name", p, name); goto fail; }
            if ((s = mms__hf_shard_of(hf, file)) < 0) {
                if (mms__hf_add_shard(hf, file) != MMS_OK) goto fail;
                s = hf->n_shards - 1;
            }
            if (mms_safetensors_find(hf->shards[s], name) < 0) {
                mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': weight_map puts tensor '%.80s' in '%s', which lacks it", p, name, file);
                goto fail;
            }
        }
        for (i = 0; i < hf->n_shards; i++) {
            int64_t t;
            for (t = 0; t < mms_safetensors_n_tensors(hf->shards[i]); t++) {
                struct mms_safetensors_info info;
                const char *in;
                mms_safetensors_get(hf->shards[i], t, &info);
                in = mms_json_str(hf->index, mms_json_get(hf->index, map, info.name), NULL);
                if (!in || mms__hf_shard_of(hf, in) != i) {
                    mms_set_error(MMS_ERR_FORMAT, "mllama: '%s' has tensor '%.80s', which the index %s", mms_safetensors_path(hf->shards[i]), info.name,
                                  in ? "puts in another shard" : "does not list");
                    goto fail;
                }
            }
        }
    } else {
        mms__hf_path(hf, "model.safetensors", p, sizeof p);
        if (!mms__file_exists(p)) { mms_set_error(MMS_ERR_IO, "mllama: '%s' has neither model.safetensors nor model.safetensors.index.json", hf->dir); goto fail; }
        if (mms__hf_add_shard(hf, "model.safetensors") != MMS_OK) goto fail;
    }
    return hf;
fail:
    mms__hf_close(hf);
    return NULL;
}

/* -- hyper-parameters from config.json -- */

/* A positive integer at obj.key (obj named `what` in messages); absent: *out kept unless required. */
static enum mms_status mms__hf_int(const struct mms_json *j, int64_t obj, const char *what, const char *key, bool required, int *out) {
    int64_t v = mms_json_get(j, obj, key), x;
    if (v < 0 || mms_json_type(j, v) == MMS_JSON_NULL) {
        if (!required) return MMS_OK;
        return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': %s%s is missing", mms_json_source(j), what, key);
    }
    if (!mms_json_int(j, v, &x) || x <= 0 || x > (1 << 30))
        return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': %s%s must be an integer from 1 to 2^30", mms_json_source(j), what, key);
    *out = (int)x;
    return MMS_OK;
}

static enum mms_status mms__hf_float(const struct mms_json *j, int64_t obj, const char *what, const char *key, bool required, float *out) {
    int64_t v = mms_json_get(j, obj, key);
    double d;
    if (v < 0 || mms_json_type(j, v) == MMS_JSON_NULL) {
        if (!required) return MMS_OK;
        return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': %s%s is missing", mms_json_source(j), what, key);
    }
    if (!mms_json_num(j, v, &d) || !(d > 0.0) || d > FLT_MAX)
        return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': %s%s must be a positive number", mms_json_source(j), what, key);
    *out = (float)d;
    return MMS_OK;
}

/* An ascending list of indexes below limit into a new array. */
static enum mms_status mms__hf_list(const struct mms_json *j, int64_t obj, const char *what, const char *key, int limit, int **out, int *n_out) {
    int64_t v = mms_json_get(j, obj, key), n = mms_json_len(j, v), i;
    if (mms_json_type(j, v) != MMS_JSON_ARRAY || n < 1 || n > limit)
        return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': %s%s must be a list of 1 to %d layer indexes", mms_json_source(j), what, key, limit);
    if (!(*out = (int *)MMS_MALLOC(sizeof **out * (size_t)n))) return mms_set_error(MMS_ERR_OOM, "mllama: out of memory");
    for (i = 0; i < n; i++) {
        int64_t x;
        if (!mms_json_int(j, mms_json_at(j, v, i), &x) || x < 0 || x >= limit || (i > 0 && x <= (*out)[i - 1]))
            return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': %s%s[%lld] is not an ascending index below %d", mms_json_source(j), what, key, (long long)i, limit);
        (*out)[i] = (int)x;
    }
    *n_out = (int)n;
    return MMS_OK;
}

/* Reads the hyper-parameters; *rope_freqs gets the llama3 divisors (head_dim / 2 floats, to free)
   or NULL when the checkpoint has no llama3 rope scaling. */
static enum mms_status mms__hf_hparams(const struct mms__hf *hf, struct mms_mllama_hparams *hp, int **cross, int **taps, float **rope_freqs) {
    const struct mms_json *j = hf->config;
    const int64_t t = mms_json_get(j, 0, "text_config"), v = mms_json_get(j, 0, "vision_config"), arch = mms_json_get(j, 0, "architectures");
    const char *a0 = mms_json_str(j, mms_json_at(j, arch, 0), NULL), *mt = mms_json_str(j, mms_json_get(j, 0, "model_type"), NULL);
    enum mms_status st;
    int64_t rs;
    *rope_freqs = NULL;
    if (!(a0 && !strcmp(a0, "MllamaForConditionalGeneration")) && !(mt && !strcmp(mt, "mllama")))
        return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s' is not a Llama 3.2 Vision checkpoint (architectures[0] must be MllamaForConditionalGeneration)",
                             mms_json_source(j));
    if (mms_json_type(j, t) != MMS_JSON_OBJECT || mms_json_type(j, v) != MMS_JSON_OBJECT)
        return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': text_config and vision_config must be objects", mms_json_source(j));
    hp->n_ctx_train = 131072;
    hp->rms_eps = 1e-5f;
    hp->rope_freq_base = 500000.0f;
    if ((st = mms__hf_int(j, t, "text_config.", "vocab_size", true, &hp->n_vocab)) != MMS_OK ||
        (st = mms__hf_int(j, t, "text_config.", "num_hidden_layers", true, &hp->n_layer)) != MMS_OK ||
        (st = mms__hf_int(j, t, "text_config.", "max_position_embeddings", false, &hp->n_ctx_train)) != MMS_OK ||
        (st = mms__hf_int(j, t, "text_config.", "hidden_size", true, &hp->n_embd)) != MMS_OK ||
        (st = mms__hf_int(j, t, "text_config.", "intermediate_size", true, &hp->n_ff)) != MMS_OK ||
        (st = mms__hf_int(j, t, "text_config.", "num_attention_heads", true, &hp->n_head)) != MMS_OK ||
        (st = mms__hf_float(j, t, "text_config.", "rope_theta", false, &hp->rope_freq_base)) != MMS_OK ||
        (st = mms__hf_float(j, t, "text_config.", "rms_norm_eps", false, &hp->rms_eps)) != MMS_OK ||
        (st = mms__hf_list(j, t, "text_config.", "cross_attention_layers", hp->n_layer, cross, &hp->n_cross)) != MMS_OK)
        return st;
    hp->n_head_kv = hp->n_head;
    if ((st = mms__hf_int(j, t, "text_config.", "num_key_value_heads", false, &hp->n_head_kv)) != MMS_OK) return st;
    hp->head_dim = hp->n_embd / hp->n_head;
    if ((st = mms__hf_int(j, t, "text_config.", "head_dim", false, &hp->head_dim)) != MMS_OK) return st;
    hp->image_token_id = hp->n_vocab;
    if ((st = mms__hf_int(j, 0, "", "image_token_index", false, &hp->image_token_id)) != MMS_OK) return st;
    if ((st = mms__hf_int(j, v, "vision_config.", "num_hidden_layers", true, &hp->v_n_layer)) != MMS_OK ||
        (st = mms__hf_int(j, v, "vision_config.", "num_global_layers", true, &hp->v_n_global)) != MMS_OK ||
        (st = mms__hf_int(j, v, "vision_config.", "hidden_size", true, &hp->v_n_embd)) != MMS_OK ||
        (st = mms__hf_int(j, v, "vision_config.", "intermediate_size", true, &hp->v_n_ff)) != MMS_OK ||
        (st = mms__hf_int(j, v, "vision_config.", "attention_heads", true, &hp->v_n_head)) != MMS_OK ||
        (st = mms__hf_int(j, v, "vision_config.", "image_size", true, &hp->v_image_size)) != MMS_OK ||
        (st = mms__hf_int(j, v, "vision_config.", "patch_size", true, &hp->v_patch_size)) != MMS_OK ||
        (st = mms__hf_int(j, v, "vision_config.", "max_num_tiles", true, &hp->v_max_tiles)) != MMS_OK ||
        (st = mms__hf_list(j, v, "vision_config.", "intermediate_layers_indices", hp->v_n_layer, taps, &hp->v_n_taps)) != MMS_OK)
        return st;
    hp->v_channels = 3;
    hp->v_eps = 1e-5f;
    if ((st = mms__hf_int(j, v, "vision_config.", "num_channels", false, &hp->v_channels)) != MMS_OK ||
        (st = mms__hf_float(j, v, "vision_config.", "norm_eps", false, &hp->v_eps)) != MMS_OK)
        return st;
    {   /* stated sizes that the shapes imply must agree */
        int out_dim = hp->v_n_embd * (1 + hp->v_n_taps);
        int64_t sar = mms_json_get(j, v, "supported_aspect_ratios"), i, n_ar = mms__mllama_aspect_ratios(hp->v_max_tiles, NULL, NULL);
        int rows[64], cols[64];
        if ((st = mms__hf_int(j, v, "vision_config.", "vision_output_dim", false, &out_dim)) != MMS_OK) return st;
        if (out_dim != hp->v_n_embd * (1 + hp->v_n_taps))
            return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': vision_config.vision_output_dim is %d, hidden_size * (1 + taps) is %d", mms_json_source(j),
                                 out_dim, hp->v_n_embd * (1 + hp->v_n_taps));
        if (hp->v_max_tiles <= 16 && sar >= 0) {
            mms__mllama_aspect_ratios(hp->v_max_tiles, rows, cols);
            if (mms_json_len(j, sar) != n_ar)
                return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': vision_config.supported_aspect_ratios has %lld entries, max_num_tiles %d gives %lld",
                                     mms_json_source(j), (long long)mms_json_len(j, sar), hp->v_max_tiles, (long long)n_ar);
            for (i = 0; i < n_ar; i++) {
                int64_t e = mms_json_at(j, sar, i), r, c;
                if (mms_json_len(j, e) != 2 || !mms_json_int(j, mms_json_at(j, e, 0), &r) || !mms_json_int(j, mms_json_at(j, e, 1), &c) ||
                    r != rows[i] || c != cols[i])
                    return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': vision_config.supported_aspect_ratios[%lld] is not [%d, %d], the processor's order",
                                         mms_json_source(j), (long long)i, rows[i], cols[i]);
            }
        }
    }
    rs = mms_json_get(j, t, "rope_scaling");
    if (rs >= 0 && mms_json_type(j, rs) != MMS_JSON_NULL) {
        const char *type = mms_json_str(j, mms_json_get(j, rs, "rope_type"), NULL);
        if (!type) type = mms_json_str(j, mms_json_get(j, rs, "type"), NULL);
        if (!type || mms_json_type(j, rs) != MMS_JSON_OBJECT)
            return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': text_config.rope_scaling must be an object with a rope_type", mms_json_source(j));
        if (!strcmp(type, "llama3")) {
            float factor = 8.0f, lo = 1.0f, hi = 4.0f;
            int orig = 8192, i;
            if ((st = mms__hf_float(j, rs, "text_config.rope_scaling.", "factor", true, &factor)) != MMS_OK ||
                (st = mms__hf_float(j, rs, "text_config.rope_scaling.", "low_freq_factor", false, &lo)) != MMS_OK ||
                (st = mms__hf_float(j, rs, "text_config.rope_scaling.", "high_freq_factor", false, &hi)) != MMS_OK ||
                (st = mms__hf_int(j, rs, "text_config.rope_scaling.", "original_max_position_embeddings", true, &orig)) != MMS_OK)
                return st;
            if (!(hi > lo) || hp->head_dim < 2 || hp->head_dim % 2)
                return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': text_config.rope_scaling: high_freq_factor must exceed low_freq_factor", mms_json_source(j));
            if (!(*rope_freqs = (float *)MMS_MALLOC(sizeof(float) * (size_t)(hp->head_dim / 2)))) return mms_set_error(MMS_ERR_OOM, "mllama: out of memory");
            for (i = 0; i < hp->head_dim / 2; i++) {   /* the llama3 divisors (spec 5): 1, factor, or smoothed between */
                const double inv = pow((double)hp->rope_freq_base, -2.0 * i / hp->head_dim), wavelen = 2.0 * 3.14159265358979323846 / inv;
                double div;
                if (wavelen < orig / (double)hi) div = 1.0;
                else if (wavelen > orig / (double)lo) div = factor;
                else {
                    const double s = (orig / wavelen - lo) / ((double)hi - lo);
                    div = 1.0 / ((1.0 - s) / factor + s);
                }
                (*rope_freqs)[i] = (float)div;
            }
        } else if (strcmp(type, "default"))
            return mms_set_error(MMS_ERR_UNSUPPORTED, "mllama: '%s': text_config.rope_scaling.rope_type \"%.20s\" is not supported (llama3 or default)",
                                 mms_json_source(j), type);
    }
    if (hf->preproc) {
        const struct mms_json *p = hf->preproc;
        int64_t mean = mms_json_get(p, 0, "image_mean"), sd = mms_json_get(p, 0, "image_std"), size = mms_json_get(p, 0, "size"), k;
        int tiles = hp->v_max_tiles, h = hp->v_image_size, w = hp->v_image_size;
        struct mms_mllama_hparams clip;
        mms_mllama_hparams_11b(&clip);
        memcpy(hp->image_mean, clip.image_mean, sizeof hp->image_mean);
        memcpy(hp->image_std, clip.image_std, sizeof hp->image_std);
        for (k = 0; k < 3 && (mean >= 0 || sd >= 0); k++) {
            double m, s;
            if (mms_json_len(p, mean) != 3 || mms_json_len(p, sd) != 3 || !mms_json_num(p, mms_json_at(p, mean, k), &m) ||
                !mms_json_num(p, mms_json_at(p, sd, k), &s) || !(s > 0))
                return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': image_mean and image_std must be 3 numbers each (std positive)", mms_json_source(p));
            hp->image_mean[k] = (float)m;
            hp->image_std[k] = (float)s;
        }
        if ((st = mms__hf_int(p, 0, "", "max_image_tiles", false, &tiles)) != MMS_OK ||
            (size >= 0 && ((st = mms__hf_int(p, size, "size.", "height", true, &h)) != MMS_OK || (st = mms__hf_int(p, size, "size.", "width", true, &w)) != MMS_OK)))
            return st;
        if (tiles != hp->v_max_tiles || h != hp->v_image_size || w != hp->v_image_size)
            return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s': tiles of %dx%d, at most %d, but config.json says %d, at most %d", mms_json_source(p), w, h,
                                 tiles, hp->v_image_size, hp->v_max_tiles);
    } else {
        struct mms_mllama_hparams clip;
        mms_mllama_hparams_11b(&clip);
        memcpy(hp->image_mean, clip.image_mean, sizeof hp->image_mean);
        memcpy(hp->image_std, clip.image_std, sizeof hp->image_std);
    }
    return MMS_OK;
}

/* -- weights by GGUF name -- */

/* The checkpoint's name (without its prefix) of a GGUF weight name, and how the value is derived. */
static bool mms__hf_name(const char *g, char *out, size_t size, enum mms__hf_xform *x) {
    static const char *const text_layer[][2] = {
        { "attn_norm.weight", "input_layernorm.weight" }, { "ffn_norm.weight", "post_attention_layernorm.weight" },
        { "attn_q.weight", "self_attn.q_proj.weight" }, { "attn_k.weight", "self_attn.k_proj.weight" },
        { "attn_v.weight", "self_attn.v_proj.weight" }, { "attn_output.weight", "self_attn.o_proj.weight" },
        { "ffn_gate.weight", "mlp.gate_proj.weight" }, { "ffn_up.weight", "mlp.up_proj.weight" }, { "ffn_down.weight", "mlp.down_proj.weight" },
        { "cross_attn_q_proj.weight", "cross_attn.q_proj.weight" }, { "cross_attn_k_proj.weight", "cross_attn.k_proj.weight" },
        { "cross_attn_v_proj.weight", "cross_attn.v_proj.weight" }, { "cross_attn_o_proj.weight", "cross_attn.o_proj.weight" },
        { "cross_attn_q_norm.weight", "cross_attn.q_norm.weight" }, { "cross_attn_k_norm.weight", "cross_attn.k_norm.weight" },
        { "cross_attn_attn_gate", "cross_attn_attn_gate" }, { "cross_attn_mlp_gate", "cross_attn_mlp_gate" },
    };
    static const char *const vision_layer[][2] = {
        { "attn_norm.weight", "input_layernorm.weight" }, { "attn_norm.bias", "input_layernorm.bias" },
        { "ffn_norm.weight", "post_attention_layernorm.weight" }, { "ffn_norm.bias", "post_attention_layernorm.bias" },
        { "attn_q.weight", "self_attn.q_proj.weight" }, { "attn_k.weight", "self_attn.k_proj.weight" },
        { "attn_v.weight", "self_attn.v_proj.weight" }, { "attn_output.weight", "self_attn.o_proj.weight" },
        { "ffn_up.weight", "mlp.fc1.weight" }, { "ffn_up.bias", "mlp.fc1.bias" }, { "ffn_down.weight", "mlp.fc2.weight" },
        { "ffn_down.bias", "mlp.fc2.bias" }, { "attn_gate", "gate_attn" }, { "ffn_gate", "gate_ffn" },
    };
    static const char *const top[][2] = {
        { "token_embd.weight", "T:model.embed_tokens.weight" }, { "output_norm.weight", "T:model.norm.weight" }, { "output.weight", "T:lm_head.weight" },
        { "v.patch_embd.weight", "V:patch_embedding.weight" }, { "v.class_embd", "V:class_embedding" },
        { "v.position_embd.weight", "V:gated_positional_embedding.embedding" }, { "v.position_embd.gate", "V:gated_positional_embedding.gate" },
        { "v.tile_position_embd.weight", "V:gated_positional_embedding.tile_embedding.weight" },
        { "v.tile_position_embd.gate", "V:gated_positional_embedding.gate" },
        { "v.pre_tile_position_embd.weight", "V:pre_tile_positional_embedding.embedding.weight" },
        { "v.pre_tile_position_embd.gate", "V:pre_tile_positional_embedding.gate" },
        { "v.post_tile_position_embd.weight", "V:post_tile_positional_embedding.embedding.weight" },
        { "v.post_tile_position_embd.gate", "V:post_tile_positional_embedding.gate" },
        { "v.pre_ln.weight", "V:layernorm_pre.weight" }, { "v.pre_ln.bias", "V:layernorm_pre.bias" },
        { "v.post_ln.weight", "V:layernorm_post.weight" }, { "v.post_ln.bias", "V:layernorm_post.bias" },
        { "mm.0.weight", "P:weight" }, { "mm.0.bias", "P:bias" },
    };
    size_t k;
    int il, used = 0;
    *x = MMS__HF_AS_IS;
    if (sscanf(g, "blk.%d.%n", &il, &used) == 1 && used > 0) {
        for (k = 0; k < sizeof text_layer / sizeof text_layer[0]; k++)
            if (!strcmp(g + used, text_layer[k][0])) { snprintf(out, size, "T:model.layers.%d.%s", il, text_layer[k][1]); return true; }
        return false;
    }
    if ((sscanf(g, "v.blk.%d.%n", &il, &used) == 1 && used > 0) || (sscanf(g, "v.global.blk.%d.%n", &il, &used) == 1 && used > 0)) {
        const bool global = g[2] == 'g';
        for (k = 0; k < sizeof vision_layer / sizeof vision_layer[0]; k++)
            if (!strcmp(g + used, vision_layer[k][0])) {
                snprintf(out, size, "V:%s.layers.%d.%s", global ? "global_transformer" : "transformer", il, vision_layer[k][1]);
                if (k >= 12) *x = MMS__HF_TANH;
                return true;
            }
        return false;
    }
    for (k = 0; k < sizeof top / sizeof top[0]; k++)
        if (!strcmp(g, top[k][0])) {
            snprintf(out, size, "%s", top[k][1]);
            if (!strcmp(g, "v.position_embd.gate")) *x = MMS__HF_ONE_MINUS_TANH;
            else if (strstr(g, ".gate")) *x = MMS__HF_TANH;
            return true;
        }
    return false;
}

/* Finds GGUF weight `name` in the folder: its shard and info (shape in the file's order), and how
   its value is derived. false when the checkpoint has no such tensor. */
static bool mms__hf_find(struct mms__hf *hf, const char *name, struct mms_safetensors_info *info, enum mms__hf_xform *x,
                         const struct mms_safetensors **shard) {
    static const char *const prefixes[3][2] = {
        { "language_model.", "model.language_model." }, { "vision_model.", "model.vision_model." },
        { "multi_modal_projector.", "model.multi_modal_projector." },
    };
    char rel[160], full[224];
    int kind, p, s;
    if (!mms__hf_name(name, rel, sizeof rel, x)) return false;
    kind = rel[0] == 'T' ? 0 : rel[0] == 'V' ? 1 : 2;
    for (p = 0; p < 2; p++) {
        if (kind == 0 && !strcmp(rel + 2, "lm_head.weight")) snprintf(full, sizeof full, p ? "lm_head.weight" : "language_model.lm_head.weight");
        else if (kind == 0 && p == 1) snprintf(full, sizeof full, "model.language_model.%s", rel + 2 + 6);   /* drops "model." */
        else snprintf(full, sizeof full, "%s%s", prefixes[kind][p], rel + 2);
        for (s = 0; s < hf->n_shards; s++) {
            int64_t i = mms_safetensors_find(hf->shards[s], full);
            if (i >= 0) {
                mms_safetensors_get(hf->shards[s], i, info);
                hf->used[s][i] = 1;
                *shard = hf->shards[s];
                return true;
            }
        }
    }
    return false;
}

/* Every tensor of the checkpoint went to a weight: one that did not is an error, not ignored. */
static enum mms_status mms__hf_check_all_used(const struct mms__hf *hf) {
    int s;
    for (s = 0; s < hf->n_shards; s++) {
        int64_t i;
        for (i = 0; i < mms_safetensors_n_tensors(hf->shards[s]); i++)
            if (!hf->used[s][i]) {
                struct mms_safetensors_info info;
                mms_safetensors_get(hf->shards[s], i, &info);
                return mms_set_error(MMS_ERR_FORMAT, "mllama: '%s' has tensor '%.100s', which no weight of the configuration uses",
                                     mms_safetensors_path(hf->shards[s]), info.name);
            }
    }
    return MMS_OK;
}

/* -- a checkpoint folder as a GGUF -- */

/* Rows h*d + p*d/2 + i (the checkpoint's order) to h*d + 2i + p: the self-attention's RoPE pairs
   (GGUF files rotate adjacent pairs) and Ollama's order for the other q/k. */
static void mms__hf_interleave_rows(const char *src, char *dst, int64_t rows, size_t row, int n_heads) {
    const int64_t d = rows / n_heads;
    int64_t h, i;
    int p;
    for (h = 0; h < n_heads; h++)
        for (p = 0; p < 2; p++)
            for (i = 0; i < d / 2; i++) memcpy(dst + (size_t)(h * d + 2 * i + p) * row, src + (size_t)(h * d + p * (d / 2) + i) * row, row);
}

static bool mms__hf_ends_with(const char *s, const char *suffix) {
    const size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* The heads of a q/k projection named as the loader names it, or 0. */
static int mms__hf_qk_heads(const struct mms_mllama_hparams *hp, const char *name) {
    const bool vision = !strncmp(name, "v.", 2);
    if (mms__hf_ends_with(name, "attn_q.weight") || mms__hf_ends_with(name, "cross_attn_q_proj.weight")) return vision ? hp->v_n_head : hp->n_head;
    if (mms__hf_ends_with(name, "attn_k.weight") || mms__hf_ends_with(name, "cross_attn_k_proj.weight")) return vision ? hp->v_n_head : hp->n_head_kv;
    return 0;
}

MMS_API struct mms_gguf *mms_mllama_folder_to_gguf(const char *dir) {
    struct mms_mllama_load_params lp;
    struct mms_mllama_model *m = NULL;
    struct mms_gguf_writer *w = NULL;
    struct mms_gguf *g = NULL;
    mms_backend_t cpu = NULL;
    const struct mms_mllama_hparams *hp;
    void *mem;
    size_t size;
    int b;
    bool ok;
    if (!dir || !mms__hf_is_folder(dir)) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_folder_to_gguf: '%s' is not a checkpoint folder (no config.json)", dir ? dir : "(null)"); return NULL; }
    memset(&lp, 0, sizeof lp);
    lp.path = dir;
    if (!(cpu = mms_backend_cpu_init()) || !(lp.cpu = cpu, m = mms_mllama_model_load(&lp)) || !(w = mms_gguf_writer_new())) goto done;
    hp = &m->hp;
    {
        const struct mms_tensor *e = m->token_embd;
        int32_t cross[256], taps[256];
        int i;
        for (i = 0; i < hp->n_cross && i < 256; i++) cross[i] = hp->cross_layers[i];
        for (i = 0; i < hp->v_n_taps && i < 256; i++) taps[i] = hp->v_taps[i];
        ok = mms_gguf_writer_set_str(w, "general.architecture", "mllama") == MMS_OK &&
             mms_gguf_writer_set_u32(w, "general.file_type", e->type == MMS_TYPE_BF16 ? 32 : e->type == MMS_TYPE_F16 ? 1 : 0) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "general.quantization_version", 2) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.vocab_size", (uint32_t)hp->n_vocab) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.block_count", (uint32_t)hp->n_layer) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.context_length", (uint32_t)hp->n_ctx_train) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.embedding_length", (uint32_t)hp->n_embd) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.feed_forward_length", (uint32_t)hp->n_ff) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.attention.head_count", (uint32_t)hp->n_head) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.attention.head_count_kv", (uint32_t)hp->n_head_kv) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.rope.dimension_count", (uint32_t)hp->head_dim) == MMS_OK &&
             mms_gguf_writer_set_f32(w, "mllama.rope.freq_base", hp->rope_freq_base) == MMS_OK &&
             mms_gguf_writer_set_f32(w, "mllama.attention.layer_norm_rms_epsilon", hp->rms_eps) == MMS_OK &&
             mms_gguf_writer_set_arr_i32(w, "mllama.attention.cross_attention_layers", cross, hp->n_cross) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.image_token_index", (uint32_t)hp->image_token_id) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.vision.block_count", (uint32_t)hp->v_n_layer) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.vision.global.block_count", (uint32_t)hp->v_n_global) == MMS_OK &&
             mms_gguf_writer_set_arr_i32(w, "mllama.vision.intermediate_layers_indices", taps, hp->v_n_taps) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.vision.embedding_length", (uint32_t)hp->v_n_embd) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.vision.feed_forward_length", (uint32_t)hp->v_n_ff) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.vision.attention.head_count", (uint32_t)hp->v_n_head) == MMS_OK &&
             mms_gguf_writer_set_f32(w, "mllama.vision.attention.layer_norm_epsilon", hp->v_eps) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.vision.image_size", (uint32_t)hp->v_image_size) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.vision.patch_size", (uint32_t)hp->v_patch_size) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.vision.max_num_tiles", (uint32_t)hp->v_max_tiles) == MMS_OK &&
             mms_gguf_writer_set_u32(w, "mllama.vision.num_channels", (uint32_t)hp->v_channels) == MMS_OK &&
             mms_gguf_writer_set_arr_f32(w, "mllama.vision.image_mean", hp->image_mean, 3) == MMS_OK &&
             mms_gguf_writer_set_arr_f32(w, "mllama.vision.image_std", hp->image_std, 3) == MMS_OK &&
             mms_gguf_writer_set_str(w, "mmsched.mllama.qk_rows", "ollama") == MMS_OK &&
             mms__vocab_hf_kv(dir, w) == MMS_OK;
    }
    for (b = 0; ok && b < 2; b++) {
        const struct mms_tensor *t;
        for (t = mms_get_first_tensor(m->wctx[b]); ok && t; t = mms_get_next_tensor(m->wctx[b], t)) {
            const int heads = mms__hf_qk_heads(hp, t->name);
            char *tmp = NULL;
            const void *data = t->data;
            if (heads) {   /* the GGUF layout's q/k row order (the loader put the checkpoint's back) */
                if (!(tmp = (char *)MMS_MALLOC(mms_nbytes(t)))) { mms_set_error(MMS_ERR_OOM, "mms_mllama_folder_to_gguf: out of memory"); ok = false; break; }
                mms__hf_interleave_rows((const char *)t->data, tmp, mms_nrows(t), mms_row_size(t->type, t->ne[0]), heads);
                data = tmp;
            }
            ok = mms_gguf_writer_add_tensor(w, t->name, t->type, mms_n_dims(t), t->ne, data) == MMS_OK;
            MMS_FREE(tmp);
        }
    }
    if (ok && mms__gguf_writer_to_memory(w, &mem, &size) == MMS_OK) g = mms__gguf_open_owned(mem, size);
done:
    mms_gguf_writer_free(w);
    mms_mllama_model_free(m);
    mms_backend_free(cpu);
    return g;
}
/* ==== end src/mllama/hf_folder.c ==== */

/* ==== begin src/mllama/vision.c ==== */
/* >>mllama-vision =================================================================================
   The vision encoder and projector as a graph (transformers' MllamaVisionModel). Shapes, with T tiles (all
   max_num_tiles slots, padded ones included, as transformers computes them), N tokens per tile
   (patches + class token), Np = N rounded up to 8, D the vision width:
     pixels [S, S, 3, T] -> patches [D, N-1, T] -> + pre-tile, class token, position and tile
     embeddings -> layer norm -> padded [D, Np, T] seen as one sequence of Np*T tokens ->
     local layers (taps: the inputs of the listed layers) -> layer norm -> + post-tile ->
     gated global layers -> [D + taps*D, N, T] (taps interleaved: feature 5*d + k) ->
     projector [text width, N*T]. */

struct mms__mllama_vision_inputs {
    struct mms_tensor *pixels;      /* F32 [S, S, 3, T] */
    struct mms_tensor *aspect_id;   /* I32 [1] */
    struct mms_tensor *mask;        /* F16 [Np*T, 2]: row 0 all 0, row 1 -inf at the padding keys */
    struct mms_tensor *mask_rows;   /* I32 [Np*T]: the mask row of each query, 1 for padding tokens */
};

static struct mms_tensor *mms__layer_norm(struct mms_context *ctx, struct mms_tensor *x, struct mms_tensor *w, struct mms_tensor *b, float eps) {
    return mms_add(ctx, mms_mul(ctx, mms_norm(ctx, x, eps), w), b);
}

/* Multi-head attention without biases; x [D, L] -> [D, L]. */
static struct mms_tensor *mms__mllama_vision_attn(struct mms_context *ctx, const struct mms_mllama_hparams *hp,
                                                  const struct mms__mllama_vlayer *ly, struct mms_tensor *x,
                                                  const struct mms__mllama_vision_inputs *in) {
    const int64_t D = hp->v_n_embd, H = hp->v_n_head, HD = D / H, L = x->ne[1];
    struct mms_tensor *q = mms_permute(ctx, mms_reshape_3d(ctx, mms_mul_mat(ctx, ly->wq, x), HD, H, L), 0, 2, 1, 3);
    struct mms_tensor *k = mms_permute(ctx, mms_reshape_3d(ctx, mms_mul_mat(ctx, ly->wk, x), HD, H, L), 0, 2, 1, 3);
    struct mms_tensor *v = mms_permute(ctx, mms_reshape_3d(ctx, mms_mul_mat(ctx, ly->wv, x), HD, H, L), 0, 2, 1, 3);
    struct mms_tensor *o = mms_flash_attn_ext_mask_rows(ctx, q, k, v, in->mask, in->mask_rows, 1.0f / sqrtf((float)HD), 0.0f, 0.0f);   /* [HD, H, L] */
    return mms_mul_mat(ctx, ly->wo, mms_reshape_2d(ctx, o, D, L));
}

/* A pre-LN encoder layer; the global ones gate both branches with their (stored) tanh(gate). */
static struct mms_tensor *mms__mllama_vision_layer_build(struct mms_context *ctx, const struct mms_mllama_hparams *hp,
                                                         const struct mms__mllama_vlayer *ly, struct mms_tensor *x,
                                                         const struct mms__mllama_vision_inputs *in) {
    struct mms_tensor *a = mms__mllama_vision_attn(ctx, hp, ly, mms__layer_norm(ctx, x, ly->ln1_w, ly->ln1_b, hp->v_eps), in);
    struct mms_tensor *f;
    if (ly->gate_attn) a = mms_mul(ctx, a, ly->gate_attn);
    x = mms_add(ctx, x, a);
    f = mms_add(ctx, mms_mul_mat(ctx, ly->fc1_w, mms__layer_norm(ctx, x, ly->ln2_w, ly->ln2_b, hp->v_eps)), ly->fc1_b);
    f = mms_add(ctx, mms_mul_mat(ctx, ly->fc2_w, mms_gelu(ctx, f)), ly->fc2_b);
    if (ly->gate_ffn) f = mms_mul(ctx, f, ly->gate_ffn);
    return mms_add(ctx, x, f);
}

/* A table row chosen by the aspect-ratio id, seen as [D, rows, T], times its gate. */
static struct mms_tensor *mms__mllama_aspect_embd(struct mms_context *ctx, struct mms_tensor *table, struct mms_tensor *gate,
                                                  struct mms_tensor *aspect_id, int64_t D, int64_t rows, int64_t T) {
    return mms_mul(ctx, mms_reshape_3d(ctx, mms_get_rows(ctx, table, aspect_id), D, rows, T), gate);
}

/* Builds the encoder; returns the projector's output [text width, N*T] and sets *vision_out to
   the encoder's output [D*(1+taps), N, T]. */
static struct mms_tensor *mms__mllama_build_vision(struct mms_context *ctx, const struct mms_mllama_model *m,
                                                   const struct mms__mllama_vision_inputs *in, struct mms_tensor **vision_out) {
    const struct mms_mllama_hparams *hp = &m->hp;
    const int64_t D = hp->v_n_embd, T = hp->v_max_tiles, N = hp->v_n_tokens, Np = hp->v_n_tokens_padded;
    const int64_t P = hp->v_patch_size, K = P * P * hp->v_channels, side = hp->v_image_size / hp->v_patch_size;
    struct mms_tensor *x, *cls, *taps = NULL, *out, *feat;
    int il, k = 0;

    /* patch embedding: a convolution with stride = kernel, as one product [D, patches * T] */
    x = mms_im2col(ctx, m->patch_embd, in->pixels, (int)P, (int)P, 0, 0, 1, 1, true, MMS_TYPE_F32);      /* [K, side, side, T] */
    x = mms_mul_mat(ctx, mms_reshape_2d(ctx, m->patch_embd, K, D), mms_reshape_2d(ctx, x, K, side * side * T));
    x = mms_reshape_3d(ctx, x, D, side * side, T);
    x = mms_add(ctx, x, mms__mllama_aspect_embd(ctx, m->pre_tile_embd, m->pre_tile_gate, in->aspect_id, D, 1, T));
    cls = mms_repeat(ctx, mms_reshape_3d(ctx, m->class_embd, D, 1, 1), mms_new_tensor_3d(ctx, MMS_TYPE_F32, D, 1, T));
    x = mms_concat(ctx, cls, x, 1);                                                                         /* [D, N, T] */
    x = mms_add(ctx, x, mms_mul(ctx, m->pos_embd, m->pos_gate));                        /* (1 - tanh g) * E_pos */
    x = mms_add(ctx, x, mms__mllama_aspect_embd(ctx, m->tile_pos_embd, m->tile_pos_gate, in->aspect_id, D, N, T));
    x = mms__layer_norm(ctx, x, m->pre_ln_w, m->pre_ln_b, hp->v_eps);
    x = mms_reshape_2d(ctx, mms_pad(ctx, x, 0, (int)(Np - N), 0, 0), D, Np * T);                         /* [D, Np*T] */

    for (il = 0; il < hp->v_n_layer; il++) {
        if (k < hp->v_n_taps && hp->v_taps[k] == il) {     /* Meta's rule: the layer's input; taps interleave */
            struct mms_tensor *tap = mms_reshape_3d(ctx, x, 1, D, Np * T);
            taps = taps ? mms_concat(ctx, taps, tap, 0) : tap;
            k++;
        }
        x = mms__mllama_vision_layer_build(ctx, hp, &m->vlayers[il], x, in);
    }
    x = mms__layer_norm(ctx, x, m->post_ln_w, m->post_ln_b, hp->v_eps);
    x = mms_add(ctx, mms_reshape_3d(ctx, x, D, Np, T), mms__mllama_aspect_embd(ctx, m->post_tile_embd, m->post_tile_gate, in->aspect_id, D, 1, T));
    x = mms_reshape_2d(ctx, x, D, Np * T);
    for (il = 0; il < hp->v_n_global; il++) x = mms__mllama_vision_layer_build(ctx, hp, &m->vglobal[il], x, in);

    /* drop the padding tokens; [global ‖ taps] per token */
    out = mms_cont(ctx, mms_view_3d(ctx, x, D, N, T, x->nb[1], x->nb[1] * (size_t)Np, 0));
    if (taps) {
        struct mms_tensor *t = mms_reshape_3d(ctx, mms_cont(ctx, taps), D * hp->v_n_taps, Np, T);
        out = mms_concat(ctx, out, mms_cont(ctx, mms_view_3d(ctx, t, t->ne[0], N, T, t->nb[1], t->nb[2], 0)), 0);
    }
    feat = mms_set_name(out, "vision_out");                                                              /* [D*(1+taps), N, T] */
    *vision_out = feat;
    x = mms_add(ctx, mms_mul_mat(ctx, m->mm_w, mms_reshape_2d(ctx, feat, hp->v_output_dim, N * T)), m->mm_b);
    return mms_set_name(x, "vision_projected");                                                          /* [text width, N*T] */
}

/* The attention mask of the encoders: token n of tile t is padding when n >= N or the tile is
   unused; only query-and-key both padding is masked (transformers' _prepare_aspect_ratio_attention_mask).
   As shared mask rows: row 0 (all 0) for a real query, row 1 (-inf at the padding keys) for a padding
   one. mask F16 [L, 2], rows I32 [L], L = Np*T. */
static void mms__mllama_vision_mask(const struct mms_mllama_hparams *hp, const int *aspect_mask, mms_fp16_t *mask, int32_t *rows) {
    const int64_t T = hp->v_max_tiles, N = hp->v_n_tokens, Np = hp->v_n_tokens_padded, L = Np * T;
    const mms_fp16_t neg_inf = mms_fp32_to_fp16(-INFINITY), zero = mms_fp32_to_fp16(0.0f);
    int64_t k;
    for (k = 0; k < L; k++) {
        const bool pad = k % Np >= N || !aspect_mask[k / Np];
        mask[k] = zero;
        mask[L + k] = pad ? neg_inf : zero;
        rows[k] = pad ? 1 : 0;
    }
}
/* ==== end src/mllama/vision.c ==== */

/* ==== begin src/mllama/text.c ==== */
/* >>mllama-text ===================================================================================
   The text decoder as graphs (transformers' MllamaTextModel): a batch of tokens (of one or several
   sequences, each row at its own position and cache slot) through
   self-attention layers (llama3 RoPE, grouped-query attention, a KV cache) and cross-attention
   layers (q/k RMS norms, tanh gates, HF's row mask on the MLP branch only), logits only for the
   rows asked; and the per-image cross-attention K/V, computed once and kept. */

struct mms__mllama_text_inputs {
    struct mms_tensor *tokens;       /* I32 [n] */
    struct mms_tensor *pos;          /* I32 [n]: each row's position in its sequence */
    struct mms_tensor *slots;        /* I32 [n]: each row's cache slot (its sequence's first slot + pos) */
    struct mms_tensor *kq_mask;      /* F32 [n_kv, n]: causal */
    int n_groups;                    /* cross-attention groups; 0: text only, cross layers skipped */
    struct mms__mllama_cross_group *groups;
    struct mms_tensor *cross_perm;   /* I32 [n]: the rows in group order (NULL with one group) */
    struct mms_tensor *cross_unperm; /* I32 [n]: each row's place in group order */
    struct mms_tensor *cross_rows;   /* F32 [1, n]: 1 where the row sees some image, else 0 */
    struct mms_tensor *cross_gate;   /* F32 [1, n]: 0 for rows of a sequence without images (their cross layers
                                        are the identity), else 1; NULL when every row's sequence has images */
    struct mms_tensor *out_ids;      /* I32 [n_out]: rows whose logits are wanted */
};

/* The rows of one sequence with images (and, in the first group, the rows of sequences without
   any) attend to that sequence's images only: rows [first, first + n) in group order, its mask,
   and its images' keys and values per cross layer (NULL elsewhere). */
struct mms__mllama_cross_group {
    int first, n, n_img;
    struct mms_tensor *mask;         /* F32 [L, n], L the group's image keys */
    struct mms_tensor **k, **v;      /* per text layer */
};

static struct mms_tensor *mms__rms(struct mms_context *ctx, struct mms_tensor *x, struct mms_tensor *w, float eps) {
    return mms_mul(ctx, mms_rms_norm(ctx, x, eps), w);
}

static struct mms_tensor *mms__mllama_mlp(struct mms_context *ctx, const struct mms__mllama_tlayer *ly, struct mms_tensor *h) {
    return mms_mul_mat(ctx, ly->ffn_down, mms_mul(ctx, mms_silu(ctx, mms_mul_mat(ctx, ly->ffn_gate, h)), mms_mul_mat(ctx, ly->ffn_up, h)));
}

static struct mms_tensor *mms__mllama_rope(struct mms_context *ctx, const struct mms_mllama_model *m, struct mms_tensor *x, struct mms_tensor *pos) {
    return mms_rope_ext(ctx, x, pos, m->rope_freqs, m->hp.head_dim, m->rope_neox ? MMS_ROPE_TYPE_NEOX : MMS_ROPE_TYPE_NORMAL, m->hp.n_ctx_train,
                        m->hp.rope_freq_base, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
}

/* [HD, heads, L] seen as [HD, L, heads], the layout attention reads. */
static struct mms_tensor *mms__heads(struct mms_context *ctx, struct mms_tensor *x) { return mms_permute(ctx, x, 0, 2, 1, 3); }

/* Rows of x [HD, Hkv, n] into the cache [HD, Hkv, slots] at the rows' slots (a sequence's slots are
   a range of its own; the slots are an input, so the graph of a KV step is the same at every position). */
static struct mms_tensor *mms__mllama_cache_write(struct mms_context *ctx, struct mms_tensor *cache, struct mms_tensor *x, struct mms_tensor *slots) {
    const int64_t w = cache->ne[0] * cache->ne[1];
    return mms_set_rows(ctx, mms_view_2d(ctx, cache, w, cache->ne[2], cache->nb[2], 0), mms_reshape_2d(ctx, x, w, x->ne[2]), slots);
}

/* Self-attention layer il; new keys and values go into their cache slots (the writes are added to
   the graph first, so they run before the attention that reads the cache from slot kv_lo on, as
   many slots as the mask is wide). */
static struct mms_tensor *mms__mllama_self_layer(struct mms_context *ctx, struct mms_cgraph *gf, const struct mms_mllama_model *m, int il,
                                                 struct mms_tensor *x, struct mms_tensor *k_cache, struct mms_tensor *v_cache,
                                                 int kv_lo, const struct mms__mllama_text_inputs *in) {
    const struct mms_mllama_hparams *hp = &m->hp;
    const struct mms__mllama_tlayer *ly = &m->layers[il];
    const int64_t HD = hp->head_dim, n = x->ne[1], n_kv = in->kq_mask->ne[0];   /* padded: masked past each sequence's tokens */
    struct mms_tensor *h = mms__rms(ctx, x, ly->attn_norm, hp->rms_eps), *q, *k, *v, *o;
    q = mms__mllama_rope(ctx, m, mms_reshape_3d(ctx, mms_mul_mat(ctx, ly->wq, h), HD, hp->n_head, n), in->pos);
    k = mms__mllama_rope(ctx, m, mms_reshape_3d(ctx, mms_mul_mat(ctx, ly->wk, h), HD, hp->n_head_kv, n), in->pos);
    v = mms_reshape_3d(ctx, mms_mul_mat(ctx, ly->wv, h), HD, hp->n_head_kv, n);
    mms_build_forward_expand(gf, mms__mllama_cache_write(ctx, k_cache, k, in->slots));
    mms_build_forward_expand(gf, mms__mllama_cache_write(ctx, v_cache, v, in->slots));
    k = mms__heads(ctx, mms_view_3d(ctx, k_cache, HD, hp->n_head_kv, n_kv, k_cache->nb[1], k_cache->nb[2], (size_t)kv_lo * k_cache->nb[2]));
    v = mms__heads(ctx, mms_view_3d(ctx, v_cache, HD, hp->n_head_kv, n_kv, v_cache->nb[1], v_cache->nb[2], (size_t)kv_lo * v_cache->nb[2]));
    o = mms_flash_attn_ext(ctx, mms__heads(ctx, q), k, v, in->kq_mask, 1.0f / sqrtf((float)HD), 0.0f, 0.0f);   /* [HD, H, n] */
    x = mms_add(ctx, x, mms_mul_mat(ctx, ly->wo, mms_reshape_2d(ctx, o, HD * hp->n_head, n)));
    return mms_add(ctx, x, mms__mllama_mlp(ctx, ly, mms__rms(ctx, x, ly->ffn_norm, hp->rms_eps)));
}

/* Cross-attention layer il: each group's query rows against its images' kept keys and values
   [HD, L, Hkv]. With several groups the rows are gathered in group order and scattered back,
   so no sequence's rows read (or pay for) another's images. */
static struct mms_tensor *mms__mllama_cross_layer(struct mms_context *ctx, const struct mms_mllama_model *m, int il, struct mms_tensor *x,
                                                  const struct mms__mllama_text_inputs *in) {
    const struct mms_mllama_hparams *hp = &m->hp;
    const struct mms__mllama_tlayer *ly = &m->layers[il];
    const int64_t HD = hp->head_dim, n = x->ne[1];
    struct mms_tensor *h = mms__rms(ctx, x, ly->attn_norm, hp->rms_eps), *q, *o = NULL, *f;
    int g;
    q = mms__rms(ctx, mms_reshape_3d(ctx, mms_mul_mat(ctx, ly->wq, h), HD, hp->n_head, n), ly->q_norm, hp->rms_eps);
    if (in->cross_perm) q = mms_get_rows(ctx, mms_reshape_2d(ctx, q, HD * hp->n_head, n), in->cross_perm);
    for (g = 0; g < in->n_groups; g++) {
        const struct mms__mllama_cross_group *gr = &in->groups[g];
        struct mms_tensor *qg = mms_view_3d(ctx, q, HD, hp->n_head, gr->n, q->nb[0] * (size_t)HD, q->nb[0] * (size_t)(HD * hp->n_head),
                                            q->nb[0] * (size_t)(HD * hp->n_head * gr->first));
        struct mms_tensor *og = mms_flash_attn_ext(ctx, mms__heads(ctx, qg), gr->k[il], gr->v[il], gr->mask, 1.0f / sqrtf((float)HD), 0.0f, 0.0f);
        og = mms_reshape_2d(ctx, og, HD * hp->n_head, gr->n);   /* [HD, H, n_g] */
        o = o ? mms_concat(ctx, o, og, 1) : og;
    }
    if (in->cross_perm) o = mms_get_rows(ctx, o, in->cross_unperm);
    o = mms_mul_mat(ctx, ly->wo, o);
    if (in->cross_gate) o = mms_mul(ctx, o, in->cross_gate);
    x = mms_add(ctx, x, mms_mul(ctx, o, mms_tanh(ctx, ly->gate_attn)));
    f = mms_mul(ctx, mms__mllama_mlp(ctx, ly, mms__rms(ctx, x, ly->ffn_norm, hp->rms_eps)), in->cross_rows);   /* HF: MLP branch only */
    return mms_add(ctx, x, mms_mul(ctx, f, mms_tanh(ctx, ly->gate_mlp)));
}

/* A batch of n tokens (positions and cache slots in in); caches per text layer (NULL for cross
   layers), read from slot kv_lo on; images' K/V per cross-attention group in in. Returns the
   logits [vocab, n_out]. */
static struct mms_tensor *mms__mllama_build_text(struct mms_context *ctx, struct mms_cgraph *gf, const struct mms_mllama_model *m,
                                                 struct mms_tensor *const *k_cache, struct mms_tensor *const *v_cache,
                                                 int kv_lo, const struct mms__mllama_text_inputs *in) {
    const struct mms_mllama_hparams *hp = &m->hp;
    struct mms_tensor *x = mms_get_rows(ctx, m->token_embd, in->tokens);   /* [D, n] */
    int il;
    for (il = 0; il < hp->n_layer; il++) {
        if (!m->layers[il].cross) x = mms__mllama_self_layer(ctx, gf, m, il, x, k_cache[il], v_cache[il], kv_lo, in);
        else if (in->n_groups > 0) x = mms__mllama_cross_layer(ctx, m, il, x, in);
        /* no image in the conversation: cross layers are the identity (as in transformers) */
    }
    x = mms_get_rows(ctx, x, in->out_ids);
    x = mms_mul_mat(ctx, m->output, mms__rms(ctx, x, m->output_norm, hp->rms_eps));
    mms_set_output(x);
    return mms_set_name(x, "logits");
}

/* The type of layer il's kept keys and values (self-attention cache, cross-attention K/V): F16
   on a CUDA backend (half the memory, and of the bytes attention reads per token), F32 elsewhere
   (the CPU keeps full precision, and any split of CPU-arithmetic backends stays bit-identical). */
static enum mms_type mms__mllama_kv_type(const struct mms_mllama_model *m, int il) {
    return mms_backend_is_cuda(m->backends[m->layers[il].backend]) ? MMS_TYPE_F16 : MMS_TYPE_F32;
}

/* The keys (after k_norm) and values [HD, L, Hkv] of every cross layer for projected image states
   [D, L], in the layer's K/V type, persistent and added to gf. Head-major, so that attention reads
   each head's keys and values as one stream: interleaved by head ([HD, Hkv, L]), each decode step
   read them 4 KB apart at the 11B shapes, at a third of the memory bandwidth. */
static void mms__mllama_build_cross_kv(struct mms_context *ctx, struct mms_cgraph *gf, const struct mms_mllama_model *m,
                                       struct mms_tensor *states, struct mms_tensor **k_out, struct mms_tensor **v_out) {
    const struct mms_mllama_hparams *hp = &m->hp;
    const int64_t HD = hp->head_dim, L = states->ne[1];
    int il;
    for (il = 0; il < hp->n_layer; il++) {
        const struct mms__mllama_tlayer *ly = &m->layers[il];
        struct mms_tensor *k, *v;
        if (!ly->cross) continue;
        k = mms__rms(ctx, mms_reshape_3d(ctx, mms_mul_mat(ctx, ly->wk, states), HD, hp->n_head_kv, L), ly->k_norm, hp->rms_eps);
        v = mms_reshape_3d(ctx, mms_mul_mat(ctx, ly->wv, states), HD, hp->n_head_kv, L);
        k_out[il] = mms_cast(ctx, mms__heads(ctx, k), mms__mllama_kv_type(m, il));   /* [HD, L, Hkv]: the keys of */
        v_out[il] = mms_cast(ctx, mms__heads(ctx, v), mms__mllama_kv_type(m, il));   /* a head side by side */
        mms_format_name(k_out[il], "blk.%d.cross_k", il);
        mms_format_name(v_out[il], "blk.%d.cross_v", il);
        mms_set_persistent(k_out[il]);
        mms_set_persistent(v_out[il]);
        mms_build_forward_expand(gf, k_out[il]);
        mms_build_forward_expand(gf, v_out[il]);
    }
}
/* ==== end src/mllama/text.c ==== */

/* ==== begin src/mllama/runtime.c ==== */
/* >>mllama-runtime ================================================================================
   Encoding images and decoding tokens on one scheduler, the sequences (conversations) of a context
   with their KV-cache slots, the cache of encoded images and the cross-attention masks. */

#define MMS__MLLAMA_KV_STEP 256   /* attention spans grow in steps, so decode graphs repeat and reuse their plan */

struct mms__mllama_image_entry {
    uint64_t            hash;
    int                 n_tiles;
    struct mms_context *ctx;            /* its graph; the persistent tensors in it stay valid */
    struct mms_tensor **k, **v;         /* per text layer, set for cross layers */
    int64_t             last_use;
};

/* One conversation of a context; its KV-cache slots are [index * n_ctx, (index + 1) * n_ctx). */
struct mms__mllama_seq {
    int  n_past;
    int *conv_images;            /* cache entries, in the order added (max_images) */
    int  n_conv_images;
    int *image_pos;              /* positions of the <|image|> tokens seen (max_images) */
    int  n_image_pos;
    struct mms_mllama_seq_timings t;   /* kv_cache filled in when asked */
};

struct mms_mllama_context {
    struct mms_mllama_model         *m;
    struct mms_mllama_context_params p;
    mms_backend_sched_t              sched;
    struct mms_context              *cache_ctx[2];
    mms_backend_buffer_t             cache_buf[2];
    struct mms_tensor              **k_cache, **v_cache;     /* per text layer (self-attention ones), n_seq * n_ctx slots */
    struct mms_context              *gctx;                   /* the current graph; reset before each */
    struct mms__mllama_seq          *seqs;                   /* n_seq */
    int                             *seq_ints;               /* the sequences' image lists, one block */

    struct mms__mllama_image_entry  *images;
    int                              n_images;
    int64_t                          clock;
    int                              n_encodes;

    float                           *logits;
    int                              n_logits;

    struct mms_mllama_timings        t;                      /* memory filled in when asked */
    size_t                           kept_peak[2];           /* per model backend (0 host, 1 offload) */
    struct mms__mllama_reserved {                            /* what each reserved graph planned, per backend */
        char   name[40];
        size_t planned[2], lower_bound[2];
    }                               *reserved;
    int                              n_reserved, cap_reserved;
};

MMS_API mms_backend_sched_t mms_mllama_context_get_sched(struct mms_mllama_context *c) { return c ? c->sched : NULL; }
MMS_API int mms_mllama_get_n_logits(const struct mms_mllama_context *c) { return c ? c->n_logits : 0; }
MMS_API const float *mms_mllama_get_logits(const struct mms_mllama_context *c, int i) {
    return c && i >= 0 && i < c->n_logits ? c->logits + (size_t)i * (size_t)c->m->hp.n_vocab : NULL;
}
MMS_API int mms_mllama_get_n_past(const struct mms_mllama_context *c) { return mms_mllama_seq_get_n_past(c, 0); }
MMS_API int mms_mllama_seq_get_n_past(const struct mms_mllama_context *c, int seq) {
    return c && seq >= 0 && seq < c->p.n_seq ? c->seqs[seq].n_past : 0;
}
MMS_API int mms_mllama_get_n_encodes(const struct mms_mllama_context *c) { return c ? c->n_encodes : 0; }

static struct mms_context *mms__mllama_fresh_graph_ctx(struct mms_mllama_context *c) {
    mms_reset(c->gctx);
    return c->gctx;
}

static void mms__mllama_image_release(struct mms_mllama_context *c, struct mms__mllama_image_entry *e) {
    int il;
    for (il = 0; il < c->m->hp.n_layer && e->k; il++) {
        if (e->k[il]) mms_backend_sched_release(c->sched, e->k[il]);
        if (e->v[il]) mms_backend_sched_release(c->sched, e->v[il]);
    }
    MMS_FREE(e->k);
    MMS_FREE(e->v);
    mms_free(e->ctx);
    memset(e, 0, sizeof *e);
}

MMS_API void mms_mllama_context_free(struct mms_mllama_context *c) {
    int i;
    if (!c) return;
    for (i = 0; i < c->n_images; i++) mms__mllama_image_release(c, &c->images[i]);
    mms_backend_sched_free(c->sched);
    for (i = 0; i < 2; i++) { mms_backend_buffer_free(c->cache_buf[i]); mms_free(c->cache_ctx[i]); }
    mms_free(c->gctx);
    MMS_FREE(c->k_cache); MMS_FREE(c->v_cache); MMS_FREE(c->seqs); MMS_FREE(c->seq_ints);
    MMS_FREE(c->images); MMS_FREE(c->logits); MMS_FREE(c->reserved);
    MMS_FREE(c);
}

/* -- graphs -- */

struct mms__mllama_vision_graph {
    struct mms_cgraph *graph;
    struct mms__mllama_vision_inputs in;
    struct mms_tensor *vision_out, *projected;
};

/* The image graph: encoder and projector, and (keep) every cross layer's K/V, persistent. */
static void mms__mllama_vision_graph(struct mms_mllama_context *c, struct mms_context *ctx, bool keep,
                                     struct mms_tensor **k, struct mms_tensor **v, struct mms__mllama_vision_graph *out) {
    const struct mms_mllama_hparams *hp = &c->m->hp;
    const int64_t L = (int64_t)hp->v_n_tokens_padded * hp->v_max_tiles;
    out->in.pixels = mms_set_name(mms_new_tensor_4d(ctx, MMS_TYPE_F32, hp->v_image_size, hp->v_image_size, 3, hp->v_max_tiles), "pixels");
    out->in.aspect_id = mms_set_name(mms_new_tensor_1d(ctx, MMS_TYPE_I32, 1), "aspect_ratio_id");
    out->in.mask = mms_set_name(mms_new_tensor_2d(ctx, MMS_TYPE_F16, L, 2), "vision_mask");
    out->in.mask_rows = mms_set_name(mms_new_tensor_1d(ctx, MMS_TYPE_I32, L), "vision_mask_rows");
    mms_set_input(out->in.pixels);
    mms_set_input(out->in.aspect_id);
    mms_set_input(out->in.mask);
    mms_set_input(out->in.mask_rows);
    out->projected = mms__mllama_build_vision(ctx, c->m, &out->in, &out->vision_out);
    out->graph = mms_new_graph(ctx);
    mms_graph_set_name(out->graph, keep ? "vision encoder + cross K/V" : "vision encoder");
    if (keep) {
        mms__mllama_build_cross_kv(ctx, out->graph, c->m, out->projected, k, v);
    } else {
        mms_set_output(out->vision_out);
        mms_set_output(out->projected);
        mms_build_forward_expand(out->graph, out->vision_out);
        mms_build_forward_expand(out->graph, out->projected);
    }
}

struct mms__mllama_text_graph {
    struct mms_cgraph *graph;
    struct mms__mllama_text_inputs in;
    struct mms_tensor *logits;
    int n_kv, kv_lo;
};

/* The shape of one decode batch: rows, logits rows, the attention width and its first cache slot
   (the rows' own slots are an input); gate: some row's sequence has no image while others have. */
struct mms__mllama_batch_plan {
    int  n, n_out, n_kv, kv_lo;
    bool gate;
};

/* A cross-attention group of a batch: its rows and the kept K/V lists (per text layer) of its
   n_img images. */
struct mms__mllama_group_spec {
    int n_rows, n_img;
    struct mms_tensor ***k, ***v;
};

/* The decode graph of a batch; n_groups cross-attention groups (0: text only). */
static void mms__mllama_text_graph(struct mms_mllama_context *c, struct mms_context *ctx, const struct mms__mllama_batch_plan *bp,
                                   const struct mms__mllama_group_spec *spec, int n_groups, struct mms__mllama_text_graph *out) {
    const struct mms_mllama_hparams *hp = &c->m->hp;
    const int n = bp->n, n_out = bp->n_out;
    int il, j, g, first = 0;
    out->n_kv = bp->n_kv;
    out->kv_lo = bp->kv_lo;
    memset(&out->in, 0, sizeof out->in);
    out->in.tokens = mms_set_name(mms_new_tensor_1d(ctx, MMS_TYPE_I32, n), "tokens");
    out->in.pos = mms_set_name(mms_new_tensor_1d(ctx, MMS_TYPE_I32, n), "positions");
    out->in.slots = mms_set_name(mms_new_tensor_1d(ctx, MMS_TYPE_I32, n), "kv_slots");
    out->in.kq_mask = mms_set_name(mms_new_tensor_2d(ctx, MMS_TYPE_F32, out->n_kv, n), "kq_mask");
    out->in.out_ids = mms_set_name(mms_new_tensor_1d(ctx, MMS_TYPE_I32, n_out), "out_ids");
    mms_set_input(out->in.tokens);
    mms_set_input(out->in.pos);
    mms_set_input(out->in.slots);
    mms_set_input(out->in.kq_mask);
    mms_set_input(out->in.out_ids);
    if (n_groups > 0) {
        out->in.cross_rows = mms_set_name(mms_new_tensor_2d(ctx, MMS_TYPE_F32, 1, n), "cross_rows");
        mms_set_input(out->in.cross_rows);
        if (bp->gate) mms_set_input(out->in.cross_gate = mms_set_name(mms_new_tensor_2d(ctx, MMS_TYPE_F32, 1, n), "cross_gate"));
        if (n_groups > 1) {
            mms_set_input(out->in.cross_perm = mms_set_name(mms_new_tensor_1d(ctx, MMS_TYPE_I32, n), "cross_perm"));
            mms_set_input(out->in.cross_unperm = mms_set_name(mms_new_tensor_1d(ctx, MMS_TYPE_I32, n), "cross_unperm"));
        }
        out->in.groups = (struct mms__mllama_cross_group *)mms__ctx_alloc(ctx, sizeof *out->in.groups * (size_t)n_groups, MMS__OBJ_ALIGN);
        for (g = 0; out->in.groups && g < n_groups; g++) {
            struct mms__mllama_cross_group *gr = &out->in.groups[g];
            const int64_t L = (int64_t)spec[g].n_img * hp->v_max_tiles * hp->v_n_tokens;
            gr->first = first;
            gr->n = spec[g].n_rows;
            gr->n_img = spec[g].n_img;
            first += gr->n;
            gr->mask = mms_format_name(mms_new_tensor_2d(ctx, MMS_TYPE_F32, L, gr->n), "cross_mask.%d", g);
            mms_set_input(gr->mask);
            gr->k = (struct mms_tensor **)mms__ctx_alloc(ctx, sizeof *gr->k * (size_t)hp->n_layer * 2, MMS__OBJ_ALIGN);
            if (!gr->k) break;
            gr->v = gr->k + hp->n_layer;
            for (il = 0; il < hp->n_layer; il++) {
                gr->k[il] = gr->v[il] = NULL;
                if (!c->m->layers[il].cross) continue;
                gr->k[il] = spec[g].k[0][il];
                gr->v[il] = spec[g].v[0][il];
                for (j = 1; j < spec[g].n_img; j++) {   /* keys in conversation order, as the mask lays them out */
                    gr->k[il] = mms_concat(ctx, gr->k[il], spec[g].k[j][il], 1);
                    gr->v[il] = mms_concat(ctx, gr->v[il], spec[g].v[j][il], 1);
                }
            }
        }
        out->in.n_groups = out->in.groups && g == n_groups ? n_groups : 0;   /* else the context's error fails the graph */
    }
    out->graph = mms_new_graph(ctx);
    mms_graph_set_name(out->graph, n == 1 ? "decode" : "prefill");
    out->logits = mms__mllama_build_text(ctx, out->graph, c->m, c->k_cache, c->v_cache, bp->kv_lo, &out->in);
    mms_build_forward_expand(out->graph, out->logits);
}

/* -- creation: caches and the reservation of every graph -- */

static enum mms_status mms__mllama_make_kv_cache(struct mms_mllama_context *c) {
    const struct mms_mllama_hparams *hp = &c->m->hp;
    int il, b;
    c->k_cache = (struct mms_tensor **)MMS_MALLOC(sizeof *c->k_cache * (size_t)hp->n_layer);
    c->v_cache = (struct mms_tensor **)MMS_MALLOC(sizeof *c->v_cache * (size_t)hp->n_layer);
    if (!c->k_cache || !c->v_cache) return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory");
    for (b = 0; b < 2; b++) {
        struct mms_init_params ip = { 0, NULL, true };
        if (!(c->cache_ctx[b] = mms_init(ip))) return mms_last_status();
    }
    for (il = 0; il < hp->n_layer; il++) {
        struct mms_context *ctx = c->cache_ctx[c->m->layers[il].backend];
        c->k_cache[il] = c->v_cache[il] = NULL;
        if (c->m->layers[il].cross) continue;
        const int64_t slots = (int64_t)c->p.n_seq * c->p.n_ctx;
        c->k_cache[il] = mms_format_name(mms_new_tensor_3d(ctx, mms__mllama_kv_type(c->m, il), hp->head_dim, hp->n_head_kv, slots), "cache_k.%d", il);
        c->v_cache[il] = mms_format_name(mms_new_tensor_3d(ctx, mms__mllama_kv_type(c->m, il), hp->head_dim, hp->n_head_kv, slots), "cache_v.%d", il);
    }
    for (b = 0; b < 2; b++) {
        if (!mms_get_first_tensor(c->cache_ctx[b])) continue;
        c->cache_buf[b] = mms_backend_alloc_ctx_tensors(c->cache_ctx[b], c->m->backends[b]);
        if (!c->cache_buf[b])
            return mms__error_context(mms_last_status(), "mllama: the KV cache for %d sequences of %d tokens does not fit on %s: %s",
                                      c->p.n_seq, c->p.n_ctx, mms_backend_name(c->m->backends[b]), mms_last_error());
        /* zeros: positions past the ones written are read (then masked); NaN garbage would poison them */
        mms_backend_buffer_clear(c->cache_buf[b], 0);
    }
    return MMS_OK;
}

/* Reserves a graph and records its plan; when memory runs out the message says for which graph. */
static enum mms_status mms__mllama_reserve(struct mms_mllama_context *c, struct mms_cgraph *g) {
    enum mms_status st = mms_backend_sched_reserve(c->sched, g);
    int b;
    if (st == MMS_ERR_OOM || st == MMS_ERR_BACKEND)
        return mms__error_context(st, "mllama: the %s graph does not fit: %s", mms_graph_get_name(g), mms_last_error());
    if (st == MMS_OK) {
        if (!mms__grow((void **)&c->reserved, &c->cap_reserved, c->n_reserved + 1, sizeof *c->reserved))
            return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory");
        mms__copy_str(c->reserved[c->n_reserved].name, sizeof c->reserved[0].name, mms_graph_get_name(g));
        for (b = 0; b < mms_backend_sched_get_n_backends(c->sched); b++) {
            struct mms_gallocr_buffer_info bi;
            memset(&bi, 0, sizeof bi);
            mms_gallocr_get_buffer_info(mms_backend_sched_get_gallocr(c->sched), b, &bi);
            c->reserved[c->n_reserved].planned[b] = bi.planned;
            c->reserved[c->n_reserved].lower_bound[b] = bi.lower_bound;
        }
        c->n_reserved++;
    }
    return st;
}

static enum mms_status mms__mllama_reserve_all(struct mms_mllama_context *c) {
    const struct mms_mllama_hparams *hp = &c->m->hp;
    struct mms__mllama_vision_graph vg;
    struct mms__mllama_text_graph tg;
    struct mms_tensor ***k = NULL, ***v = NULL;
    struct mms__mllama_batch_plan bp;
    struct mms__mllama_group_spec *spec;
    struct mms_context *ctx;
    enum mms_status st = MMS_OK;
    const int n_groups = c->m->has_vision ? MMS__MIN(c->p.n_seq, c->p.n_batch) : 0, n_img = n_groups * c->p.max_images;
    int j, il;

    if (c->m->has_vision) {
        struct mms_tensor **k0, **v0;
        ctx = mms__mllama_fresh_graph_ctx(c);
        k0 = (struct mms_tensor **)mms__ctx_alloc(ctx, sizeof *k0 * (size_t)hp->n_layer * 2, MMS__OBJ_ALIGN);
        if (!k0) return mms_ctx_status(ctx);
        v0 = k0 + hp->n_layer;
        memset(k0, 0, sizeof *k0 * (size_t)hp->n_layer * 2);
        mms__mllama_vision_graph(c, ctx, true, k0, v0, &vg);
        if ((st = mms__mllama_reserve(c, vg.graph)) != MMS_OK) return st;
    }
    /* stand-ins for the kept K/V of max_images images of as many sequences as a batch can hold:
       placeholders pinned where their layers run */
    ctx = mms__mllama_fresh_graph_ctx(c);
    k = (struct mms_tensor ***)mms__ctx_alloc(ctx, sizeof *k * (size_t)(n_img + 1) * 2, MMS__OBJ_ALIGN);
    spec = (struct mms__mllama_group_spec *)mms__ctx_alloc(ctx, sizeof *spec * (size_t)(n_groups + 1), MMS__OBJ_ALIGN);
    if (!k || !spec) return mms_ctx_status(ctx);
    v = k + n_img + 1;
    for (j = 0; j < n_img; j++) {
        k[j] = (struct mms_tensor **)mms__ctx_alloc(ctx, sizeof **k * (size_t)hp->n_layer * 2, MMS__OBJ_ALIGN);
        if (!k[j]) return mms_ctx_status(ctx);
        v[j] = k[j] + hp->n_layer;
        for (il = 0; il < hp->n_layer; il++) {
            const int64_t L = (int64_t)hp->v_max_tiles * hp->v_n_tokens;
            k[j][il] = v[j][il] = NULL;
            if (!c->m->layers[il].cross) continue;
            k[j][il] = mms_new_tensor_3d(ctx, mms__mllama_kv_type(c->m, il), hp->head_dim, L, hp->n_head_kv);   /* as */
            v[j][il] = mms_new_tensor_3d(ctx, mms__mllama_kv_type(c->m, il), hp->head_dim, L, hp->n_head_kv);   /* build_cross_kv */
            mms_set_persistent(k[j][il]);
            mms_set_persistent(v[j][il]);
            mms_backend_sched_set_tensor_backend(c->sched, k[j][il], c->m->backends[c->m->layers[il].backend]);
            mms_backend_sched_set_tensor_backend(c->sched, v[j][il], c->m->backends[c->m->layers[il].backend]);
        }
    }
    memset(&bp, 0, sizeof bp);                 /* the widest batch: every sequence's slots, every row's logits */
    bp.n = bp.n_out = c->p.n_batch;
    bp.n_kv = c->p.n_seq * c->p.n_ctx;
    bp.gate = c->p.n_seq > 1;
    for (j = 0; j < n_groups; j++) {           /* every group with max_images images: the most mask and K/V */
        spec[j].n_rows = j == 0 ? c->p.n_batch - (n_groups - 1) : 1;
        spec[j].n_img = c->p.max_images;
        spec[j].k = k + j * c->p.max_images;
        spec[j].v = v + j * c->p.max_images;
    }
    mms__mllama_text_graph(c, ctx, &bp, spec, n_groups, &tg);
    st = mms__mllama_reserve(c, tg.graph);
    mms_backend_sched_reset(c->sched);          /* drops the stand-ins' pins */
    return st;
}

MMS_API struct mms_mllama_context *mms_mllama_context_new(struct mms_mllama_model *m, const struct mms_mllama_context_params *params) {
    struct mms_mllama_context *c;
    struct mms_init_params ip = { 0, NULL, true };
    mms_backend_t backends[2];
    const int64_t t0 = mms_time_us();
    int i;
    if (!m) { mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_context_new: model is NULL"); return NULL; }
    if (!(c = (struct mms_mllama_context *)MMS_MALLOC(sizeof *c))) { mms_set_error(MMS_ERR_OOM, "mllama: out of host memory"); return NULL; }
    memset(c, 0, sizeof *c);
    c->m = m;
    if (params) c->p = *params;
    if (c->p.n_ctx < 0 || c->p.n_batch < 0 || c->p.max_images < 0 || c->p.image_cache < 0 || c->p.n_seq < 0 || c->p.n_seq > 4096 ||
        (c->p.image_cache > 0 && c->p.image_cache < MMS__MAX(c->p.max_images, 1) * MMS__MAX(c->p.n_seq, 1))) {
        mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_context_new: n_ctx %d, n_batch %d, max_images %d, image_cache %d, n_seq %d: each must "
                      "be 0 (the default) or positive, n_seq at most 4096 and image_cache at least max_images * n_seq", c->p.n_ctx,
                      c->p.n_batch, c->p.max_images, c->p.image_cache, c->p.n_seq);
        MMS_FREE(c);
        return NULL;
    }
    if (c->p.n_ctx == 0) c->p.n_ctx = MMS__MIN(2048, m->hp.n_ctx_train);
    if (c->p.n_batch == 0) c->p.n_batch = 512;
    if (c->p.max_images == 0) c->p.max_images = 2;
    if (c->p.n_seq == 0) c->p.n_seq = 1;
    if (c->p.image_cache == 0) c->p.image_cache = c->p.max_images * c->p.n_seq + 2;
    c->p.n_batch = MMS__MIN(c->p.n_batch, c->p.n_ctx * c->p.n_seq);   /* a batch holds at most every sequence's slots */
    if (c->p.n_ctx > m->hp.n_ctx_train) {
        mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_context_new: n_ctx %d is beyond the model's training context %d", c->p.n_ctx, m->hp.n_ctx_train);
        MMS_FREE(c);
        return NULL;
    }
    backends[0] = m->backends[1];   /* the offload backend first: ops go there unless pinned elsewhere */
    backends[1] = m->backends[0];
    c->sched = mms_backend_sched_new(backends, NULL, m->backends[1] == m->backends[0] ? 1 : 2, false, false);
    c->gctx = mms_init(ip);
    c->seqs = (struct mms__mllama_seq *)MMS_MALLOC(sizeof *c->seqs * (size_t)c->p.n_seq);
    c->seq_ints = (int *)MMS_MALLOC(sizeof(int) * 2 * (size_t)c->p.max_images * (size_t)c->p.n_seq);
    c->images = (struct mms__mllama_image_entry *)MMS_MALLOC(sizeof *c->images * (size_t)c->p.image_cache);
    if (!c->sched || !c->gctx || !c->seqs || !c->seq_ints || !c->images) goto fail;
    memset(c->images, 0, sizeof *c->images * (size_t)c->p.image_cache);
    for (i = 0; i < c->p.n_seq; i++) {
        memset(&c->seqs[i], 0, sizeof c->seqs[i]);
        c->seqs[i].conv_images = c->seq_ints + (size_t)2 * (size_t)i * (size_t)c->p.max_images;
        c->seqs[i].image_pos = c->seqs[i].conv_images + c->p.max_images;
    }
    if (mms__mllama_make_kv_cache(c) != MMS_OK || mms__mllama_reserve_all(c) != MMS_OK) goto fail;
    c->t.load_ms = (double)m->load_us / 1000.0;
    c->t.context_ms = (double)(mms_time_us() - t0) / 1000.0;
    return c;
fail:
    if (mms_last_status() == MMS_OK) mms_set_error(MMS_ERR_OOM, "mllama: out of host memory");
    mms_mllama_context_free(c);
    return NULL;
}

/* Bytes on backend b (0 cpu, 1 gpu): weights, KV cache, compute memory, kept images now. */
/* repacked: the part of weights in CPU_REPACK buffers (backend 0, the CPU) */
static void mms__mllama_memory(const struct mms_mllama_context *c, int b, size_t *weights, size_t *repacked, size_t *kv, size_t *compute, size_t *kept) {
    mms_backend_t be = c->m->backends[b];
    int i;
    *weights = *repacked = 0;
    *kv = c->cache_buf[b] ? mms_backend_buffer_get_size(c->cache_buf[b]) : 0;
    for (i = 0; i < c->m->n_bufs; i++) {
        const bool rp = mms_backend_buffer_get_type(c->m->bufs[i]) == mms_backend_cpu_repack_buffer_type();
        if (mms_backend_buffer_get_type(c->m->bufs[i]) == mms_backend_get_default_buffer_type(be) ||
            (b == 0 && (rp || mms_backend_buffer_is_host(c->m->bufs[i])))) *weights += mms_backend_buffer_get_size(c->m->bufs[i]);
        if (b == 0 && rp) *repacked += mms_backend_buffer_get_size(c->m->bufs[i]);
    }
    *compute = mms_backend_sched_get_buffer_size(c->sched, be);
    *kept = mms_backend_sched_get_persistent_size(c->sched, be);
}

static int mms__mllama_n_devices(const struct mms_mllama_context *c) { return c->m->backends[1] == c->m->backends[0] ? 1 : 2; }

static void mms__mllama_note_kept(struct mms_mllama_context *c) {
    int b;
    for (b = 0; b < mms__mllama_n_devices(c); b++) {
        size_t kept = mms_backend_sched_get_persistent_size(c->sched, c->m->backends[b]);
        if (kept > c->kept_peak[b]) c->kept_peak[b] = kept;
    }
}

MMS_API void mms_mllama_context_print_memory(struct mms_mllama_context *c, FILE *out) {
    int b, i;
    if (!out) out = stdout;
    if (!c) return;
    for (b = 0; b < mms__mllama_n_devices(c); b++) {
        size_t weights, repacked, kv, compute, kept;
        mms__mllama_memory(c, b, &weights, &repacked, &kv, &compute, &kept);
        fprintf(out, "mllama memory on %s: weights %.2f MiB, KV cache %.2f MiB, compute %.2f MiB, kept images %.2f MiB",
                mms_backend_name(c->m->backends[b]), (double)weights / 1048576.0, (double)kv / 1048576.0, (double)compute / 1048576.0,
                (double)kept / 1048576.0);
        if (repacked) fprintf(out, " (weights repacked for the CPU kernels: %.2f MiB)", (double)repacked / 1048576.0);
        fputc('\n', out);
    }
    for (i = 0; i < c->n_reserved; i++)
        for (b = 0; b < mms_backend_sched_get_n_backends(c->sched); b++)
            fprintf(out, "mllama graph '%s' on %s: compute %zu bytes (%.2f MiB), lower bound %zu bytes (%.2f MiB)\n", c->reserved[i].name,
                    mms_backend_name(mms_backend_sched_get_backend(c->sched, b)), c->reserved[i].planned[b],
                    (double)c->reserved[i].planned[b] / 1048576.0, c->reserved[i].lower_bound[b], (double)c->reserved[i].lower_bound[b] / 1048576.0);
}

/* -- images -- */

static uint64_t mms__mllama_image_hash(const struct mms_mllama_image *img) {
    const size_t n = sizeof(float) * (size_t)img->max_num_tiles * 3 * (size_t)img->image_size * (size_t)img->image_size;
    uint64_t h = mms__fnv1a64(img->pixels, n, MMS__FNV1A64_START);
    h ^= (uint64_t)img->aspect_ratio_id * 0x9e3779b97f4a7c15ULL;
    return h ? h : 1;
}

static enum mms_status mms__mllama_check_image(struct mms_mllama_context *c, const struct mms_mllama_image *img, const char *who) {
    const struct mms_mllama_hparams *hp = &c->m->hp;
    if (c->m->shapes_only) return mms_set_error(MMS_ERR_STATE, "%s: the model has shapes only, no weights", who);
    if (!c->m->has_vision) return mms_set_error(MMS_ERR_UNSUPPORTED, "%s: the model was loaded without its vision tower", who);
    if (!img || !img->pixels || img->image_size != hp->v_image_size || img->max_num_tiles != hp->v_max_tiles ||
        img->n_tiles < 1 || img->n_tiles > hp->v_max_tiles)
        return mms_set_error(MMS_ERR_INVALID_ARG, "%s: the image was not preprocessed for this model (tile %d, %d tiles; the model "
                             "wants tile %d, up to %d tiles)", who, img ? img->image_size : 0, img ? img->max_num_tiles : 0,
                             hp->v_image_size, hp->v_max_tiles);
    return MMS_OK;
}

/* Sets the inputs of an allocated vision graph. */
static enum mms_status mms__mllama_set_vision_inputs(struct mms_mllama_context *c, const struct mms__mllama_vision_graph *vg,
                                                     const struct mms_mllama_image *img) {
    const int64_t L = vg->in.mask->ne[0];
    mms_fp16_t *mask = (mms_fp16_t *)MMS_MALLOC(sizeof *mask * (size_t)(2 * L));
    int32_t *rows = (int32_t *)MMS_MALLOC(sizeof *rows * (size_t)L), id = img->aspect_ratio_id;
    enum mms_status st;
    if (!mask || !rows) { MMS_FREE(mask); MMS_FREE(rows); return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory for the vision mask"); }
    mms__mllama_vision_mask(&c->m->hp, img->aspect_ratio_mask, mask, rows);
    st = mms_backend_tensor_set(vg->in.mask, mask, 0, mms_nbytes(vg->in.mask));
    if (st == MMS_OK) st = mms_backend_tensor_set(vg->in.mask_rows, rows, 0, mms_nbytes(vg->in.mask_rows));
    MMS_FREE(mask);
    MMS_FREE(rows);
    if (st == MMS_OK) st = mms_backend_tensor_set(vg->in.pixels, img->pixels, 0, mms_nbytes(vg->in.pixels));
    if (st == MMS_OK) st = mms_backend_tensor_set(vg->in.aspect_id, &id, 0, sizeof id);
    return st;
}

MMS_API enum mms_status mms_mllama_encode_image(struct mms_mllama_context *c, const struct mms_mllama_image *img, float *vision_out, float *projected) {
    struct mms__mllama_vision_graph vg;
    enum mms_status st;
    if (!c) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_encode_image: context is NULL");
    if ((st = mms__mllama_check_image(c, img, "mms_mllama_encode_image")) != MMS_OK) return st;
    mms__mllama_vision_graph(c, mms__mllama_fresh_graph_ctx(c), false, NULL, NULL, &vg);
    if ((st = mms_backend_sched_alloc_graph(c->sched, vg.graph)) != MMS_OK ||
        (st = mms__mllama_set_vision_inputs(c, &vg, img)) != MMS_OK ||
        (st = mms_backend_sched_graph_compute(c->sched, vg.graph)) != MMS_OK) return st;
    c->n_encodes++;
    if (vision_out && (st = mms_backend_tensor_get(vg.vision_out, vision_out, 0, mms_nbytes(vg.vision_out))) != MMS_OK) return st;
    if (projected && (st = mms_backend_tensor_get(vg.projected, projected, 0, mms_nbytes(vg.projected))) != MMS_OK) return st;
    return MMS_OK;
}

/* Stamps the time the projector finishes, to split an image's time into encode and cross K/V;
   the caller's eval callback still sees what it asks for. */
struct mms__mllama_stamp {
    struct mms_tensor              *mark;
    int64_t                         at;
    mms_backend_sched_eval_callback user_cb;
    void                           *user;
};

static bool mms__mllama_stamp_cb(struct mms_tensor *t, bool ask, void *ud) {
    struct mms__mllama_stamp *st = (struct mms__mllama_stamp *)ud;
    const bool user_wants = st->user_cb && st->user_cb(t, true, st->user);
    if (ask) return t == st->mark || user_wants;
    if (t == st->mark) st->at = mms_time_us();
    return user_wants ? st->user_cb(t, false, st->user) : true;
}

/* The cache entry for img: found by hash, or encoded into a free (or the least recently used,
   not in the conversation) slot. */
static enum mms_status mms__mllama_encode_kept(struct mms_mllama_context *c, const struct mms_mllama_image *img, int *slot) {
    const uint64_t hash = mms__mllama_image_hash(img);
    struct mms__mllama_vision_graph vg;
    struct mms__mllama_image_entry *e;
    struct mms_init_params ip = { 0, NULL, true };
    enum mms_status st;
    int i, j, pick = -1;
    for (i = 0; i < c->n_images; i++)
        if (c->images[i].ctx && c->images[i].hash == hash) { *slot = i; c->images[i].last_use = ++c->clock; return MMS_OK; }
    for (i = 0; i < c->p.image_cache && pick < 0; i++) if (!c->images[i].ctx) pick = i;
    for (i = 0; i < c->p.image_cache && pick < 0; i++) {   /* evict the least recently used image not in use */
        bool used = false;
        int s;
        for (s = 0; s < c->p.n_seq; s++)
            for (j = 0; j < c->seqs[s].n_conv_images; j++) used |= c->seqs[s].conv_images[j] == i;
        if (!used && (pick < 0 || c->images[i].last_use < c->images[pick].last_use)) pick = i;
    }
    if (pick < 0) return mms_set_error(MMS_ERR_STATE, "mllama: the image cache (%d) is full of images in use by the sequences", c->p.image_cache);
    e = &c->images[pick];
    if (e->ctx) mms__mllama_image_release(c, e);
    if (pick >= c->n_images) c->n_images = pick + 1;
    e->ctx = mms_init(ip);
    e->k = (struct mms_tensor **)MMS_MALLOC(sizeof *e->k * (size_t)c->m->hp.n_layer);
    e->v = (struct mms_tensor **)MMS_MALLOC(sizeof *e->v * (size_t)c->m->hp.n_layer);
    if (!e->ctx || !e->k || !e->v) { mms__mllama_image_release(c, e); return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory"); }
    memset(e->k, 0, sizeof *e->k * (size_t)c->m->hp.n_layer);
    memset(e->v, 0, sizeof *e->v * (size_t)c->m->hp.n_layer);
    mms__mllama_vision_graph(c, e->ctx, true, e->k, e->v, &vg);
    if ((st = mms_backend_sched_alloc_graph(c->sched, vg.graph)) == MMS_OK && (st = mms__mllama_set_vision_inputs(c, &vg, img)) == MMS_OK) {
        struct mms__mllama_stamp stamp;
        const int64_t t0 = mms_time_us();
        stamp.mark = vg.projected;
        stamp.at = 0;
        mms__sched_get_eval_callback(c->sched, &stamp.user_cb, &stamp.user);
        mms_backend_sched_set_eval_callback(c->sched, mms__mllama_stamp_cb, &stamp);
        st = mms_backend_sched_graph_compute(c->sched, vg.graph);
        mms_backend_sched_set_eval_callback(c->sched, stamp.user_cb, stamp.user);
        if (st == MMS_OK) {
            const int64_t t1 = mms_time_us(), mid = stamp.at ? stamp.at : t1;
            c->t.encode_ms += (double)(mid - t0) / 1000.0;
            c->t.cross_kv_ms += (double)(t1 - mid) / 1000.0;
            c->t.n_encodes++;
        }
    }
    if (st != MMS_OK) {
        mms__mllama_image_release(c, e);
        return st;
    }
    mms__mllama_note_kept(c);
    c->n_encodes++;
    e->hash = hash;
    e->n_tiles = img->n_tiles;
    e->last_use = ++c->clock;
    *slot = pick;
    return MMS_OK;
}

static enum mms_status mms__mllama_check_seq(const struct mms_mllama_context *c, int seq, const char *who) {
    if (!c) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: context is NULL", who);
    if (seq < 0 || seq >= c->p.n_seq) return mms_set_error(MMS_ERR_INVALID_ARG, "%s: sequence %d, the context has 0..%d (n_seq)", who, seq, c->p.n_seq - 1);
    return MMS_OK;
}

MMS_API enum mms_status mms_mllama_seq_add_image(struct mms_mllama_context *c, int seq, const struct mms_mllama_image *img) {
    struct mms__mllama_seq *sq;
    enum mms_status st;
    int slot = -1;
    if ((st = mms__mllama_check_seq(c, seq, "mms_mllama_add_image")) != MMS_OK) return st;
    if ((st = mms__mllama_check_image(c, img, "mms_mllama_add_image")) != MMS_OK) return st;
    sq = &c->seqs[seq];
    if (sq->n_conv_images == c->p.max_images)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_add_image: sequence %d already has %d images (max_images)", seq, c->p.max_images);
    if ((st = mms__mllama_encode_kept(c, img, &slot)) != MMS_OK) return st;
    sq->conv_images[sq->n_conv_images++] = slot;
    return MMS_OK;
}

MMS_API enum mms_status mms_mllama_add_image(struct mms_mllama_context *c, const struct mms_mllama_image *img) {
    return mms_mllama_seq_add_image(c, 0, img);
}

MMS_API enum mms_status mms_mllama_seq_add_image_rgb(struct mms_mllama_context *c, int seq, const uint8_t *rgb, int w, int h, size_t stride) {
    struct mms_mllama_image_params ip;
    struct mms_mllama_image img;
    enum mms_status st;
    int64_t t0 = mms_time_us();
    if ((st = mms__mllama_check_seq(c, seq, "mms_mllama_add_image_rgb")) != MMS_OK) return st;
    if (!c->m->has_vision) return mms_set_error(MMS_ERR_UNSUPPORTED, "mms_mllama_add_image_rgb: the model was loaded without its vision tower");
    ip = mms_mllama_model_image_params(c->m);
    if ((st = mms_mllama_preprocess_image(&ip, rgb, w, h, stride, &img)) != MMS_OK) return st;
    c->t.preprocess_ms += (double)(mms_time_us() - t0) / 1000.0;
    c->t.n_preprocessed++;
    st = mms_mllama_seq_add_image(c, seq, &img);
    mms_mllama_image_free(&img);
    return st;
}

MMS_API enum mms_status mms_mllama_add_image_rgb(struct mms_mllama_context *c, const uint8_t *rgb, int w, int h, size_t stride) {
    return mms_mllama_seq_add_image_rgb(c, 0, rgb, w, h, stride);
}

/* -- decoding -- */

/* The cross-attention inputs of one row of sequence sq at position p. Keys are its group's n_img
   images, T tiles of N tokens each: sq's own, or (a row of a sequence without images, in the first
   group) another sequence's, all seen (anything finite) with the row's cross layers gated off
   (*gate 0). A row sees its own images of the last group of consecutive <|image|> tokens at or
   before it, minus their unused tiles; before the first one it sees all its own images uniformly,
   which transformers turns into an all-zero mask row and a zeroed MLP (*rows 0). */
static void mms__mllama_cross_row(const struct mms_mllama_context *c, const struct mms__mllama_seq *sq, int n_img, int p,
                                  float *row, float *rows, float *gate) {
    const struct mms_mllama_hparams *hp = &c->m->hp;
    const int T = hp->v_max_tiles, N = hp->v_n_tokens;
    int j, t, k, first = -1, last = -1;
    for (j = 0; j < sq->n_image_pos; j++) {          /* the group: a run of consecutive image tokens */
        if (sq->image_pos[j] > p) break;
        if (j == 0 || sq->image_pos[j] != sq->image_pos[j - 1] + 1) first = j;
        last = j;
    }
    *rows = first >= 0 ? 1.0f : 0.0f;
    *gate = sq->n_conv_images > 0 ? 1.0f : 0.0f;
    for (j = 0; j < n_img; j++) {
        const int n_tiles = sq->n_conv_images > 0 ? c->images[sq->conv_images[j]].n_tiles : 0;
        for (t = 0; t < T; t++) {
            float v = sq->n_conv_images == 0 || first < 0 ? 0.0f : (j >= first && j <= last && t < n_tiles) ? 0.0f : -INFINITY;
            for (k = 0; k < N; k++) row[((size_t)j * T + t) * N + k] = v;
        }
    }
}

/* Per decode call: where each row goes, the sequences it touches and their images. */
struct mms__mllama_batch_work {
    int32_t *pos, *out_ids, *slot;              /* per row: position in its sequence, cache slot; wanted rows */
    int32_t *perm, *unperm;                     /* the rows in cross-attention group order, and back */
    int     *seq_n, *seq_images, *seq_group;    /* per sequence: rows in the batch, <|image|> tokens, its group */
};

static void mms__mllama_batch_work_free(struct mms__mllama_batch_work *w) {
    MMS_FREE(w->pos);
    MMS_FREE(w->seq_n);
}

static bool mms__mllama_batch_work_alloc(struct mms__mllama_batch_work *w, int n, int n_seq) {
    memset(w, 0, sizeof *w);
    w->pos = (int32_t *)MMS_MALLOC(sizeof(int32_t) * (size_t)n * 5);
    w->seq_n = (int *)MMS_MALLOC(sizeof(int) * (size_t)n_seq * 3);
    if (!w->pos || !w->seq_n) { mms__mllama_batch_work_free(w); return false; }
    w->out_ids = w->pos + n;
    w->slot = w->out_ids + n;
    w->perm = w->slot + n;
    w->unperm = w->perm + n;
    memset(w->seq_n, 0, sizeof(int) * (size_t)n_seq * 3);
    w->seq_images = w->seq_n + n_seq;
    w->seq_group = w->seq_images + n_seq;
    return true;
}

/* Checks the batch against the sequences; fills the per-sequence counts, each row's position and
   cache slot and the wanted rows. */
static enum mms_status mms__mllama_plan_batch(struct mms_mllama_context *c, const struct mms_mllama_batch *b, struct mms__mllama_batch_work *w,
                                              struct mms__mllama_batch_plan *bp) {
    const struct mms_mllama_hparams *hp = &c->m->hp;
    const int n = b->n_tokens;
    int i, s, lo = -1, hi = 0;
    memset(bp, 0, sizeof *bp);
    bp->n = n;
    for (i = 0; i < n; i++) {
        s = b->seq ? b->seq[i] : 0;
        if (s < 0 || s >= c->p.n_seq)
            return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_decode: row %d belongs to sequence %d; the context has 0..%d (n_seq)", i, s, c->p.n_seq - 1);
        if (b->tokens[i] < 0 || b->tokens[i] >= hp->n_embd_rows)
            return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_decode: token %d at %d is outside the vocabulary (0..%d)", b->tokens[i], i, hp->n_embd_rows - 1);
        w->pos[i] = c->seqs[s].n_past + w->seq_n[s]++;
        w->slot[i] = s * c->p.n_ctx + w->pos[i];
        if (b->tokens[i] == hp->image_token_id) w->seq_images[s]++;
    }
    for (s = 0; s < c->p.n_seq; s++) {
        const struct mms__mllama_seq *sq = &c->seqs[s];
        if (w->seq_n[s] == 0) continue;
        if (sq->n_past + w->seq_n[s] > c->p.n_ctx)
            return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_decode: %d tokens after %d do not fit in the context of %d tokens (sequence %d)",
                                 w->seq_n[s], sq->n_past, c->p.n_ctx, s);
        if (sq->n_image_pos + w->seq_images[s] > sq->n_conv_images)
            return mms_set_error(MMS_ERR_STATE, "mms_mllama_decode: %d <|image|> tokens in sequence %d but %d images added "
                                 "(add each image with mms_mllama_add_image before its token)", sq->n_image_pos + w->seq_images[s], s, sq->n_conv_images);
        if (lo < 0) lo = s * c->p.n_ctx;      /* attention reads the slots of the batch's sequences, each up to its step */
        hi = s * c->p.n_ctx + MMS__MIN(c->p.n_ctx, (sq->n_past + w->seq_n[s] + MMS__MLLAMA_KV_STEP - 1) / MMS__MLLAMA_KV_STEP * MMS__MLLAMA_KV_STEP);
    }
    bp->n_kv = hi - lo;
    bp->kv_lo = lo;
    for (i = 0; i < n; i++) {             /* without want: the last row of each sequence */
        bool last = true;
        int j;
        for (j = i + 1; j < n && last; j++) last = (b->seq ? b->seq[j] : 0) != (b->seq ? b->seq[i] : 0);
        if (b->want ? b->want[i] : last) w->out_ids[bp->n_out++] = i;
    }
    if (bp->n_out == 0) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_decode: no row asks for logits");
    return MMS_OK;
}

/* Sets the masks of an allocated decode graph (and the rows' cross-attention group order). */
static enum mms_status mms__mllama_set_masks(struct mms_mllama_context *c, const struct mms_mllama_batch *b, const struct mms__mllama_batch_work *w,
                                             const struct mms__mllama_text_graph *tg) {
    const int n = b->n_tokens;
    size_t L = 0, size;
    float *buf, *rows, *gate;
    enum mms_status st;
    int i, j, g;
    for (g = 0; g < tg->in.n_groups; g++) L = MMS__MAX(L, (size_t)tg->in.groups[g].mask->ne[0] * (size_t)tg->in.groups[g].n);
    size = MMS__MAX((size_t)tg->n_kv * (size_t)n, L) + 2 * (size_t)n;
    if (!(buf = (float *)MMS_MALLOC(sizeof(float) * size))) return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory for the attention masks");
    rows = buf + size - 2 * (size_t)n;
    gate = rows + n;
    for (i = 0; i < n; i++) {                  /* causal within the row's own sequence */
        const int s = b->seq ? b->seq[i] : 0, first = s * c->p.n_ctx - tg->kv_lo;
        float *row = buf + (size_t)i * (size_t)tg->n_kv;
        for (j = 0; j < tg->n_kv; j++) row[j] = j >= first && j <= first + w->pos[i] ? 0.0f : -INFINITY;
    }
    st = mms_backend_tensor_set(tg->in.kq_mask, buf, 0, mms_nbytes(tg->in.kq_mask));
    for (g = 0; st == MMS_OK && g < tg->in.n_groups; g++) {
        const struct mms__mllama_cross_group *gr = &tg->in.groups[g];
        const size_t width = (size_t)gr->mask->ne[0];
        for (j = 0; j < gr->n; j++) {
            i = tg->in.cross_perm ? w->perm[gr->first + j] : gr->first + j;
            mms__mllama_cross_row(c, &c->seqs[b->seq ? b->seq[i] : 0], gr->n_img, w->pos[i], buf + width * (size_t)j, &rows[i], &gate[i]);
        }
        st = mms_backend_tensor_set(gr->mask, buf, 0, mms_nbytes(gr->mask));
    }
    if (st == MMS_OK && tg->in.n_groups > 0) st = mms_backend_tensor_set(tg->in.cross_rows, rows, 0, sizeof *rows * (size_t)n);
    if (st == MMS_OK && tg->in.cross_gate) st = mms_backend_tensor_set(tg->in.cross_gate, gate, 0, sizeof *gate * (size_t)n);
    if (st == MMS_OK && tg->in.cross_perm) st = mms_backend_tensor_set(tg->in.cross_perm, w->perm, 0, sizeof *w->perm * (size_t)n);
    if (st == MMS_OK && tg->in.cross_perm) st = mms_backend_tensor_set(tg->in.cross_unperm, w->unperm, 0, sizeof *w->unperm * (size_t)n);
    MMS_FREE(buf);
    return st;
}

MMS_API enum mms_status mms_mllama_decode_batch(struct mms_mllama_context *c, const struct mms_mllama_batch *b) {
    const struct mms_mllama_hparams *hp = c ? &c->m->hp : NULL;
    struct mms__mllama_batch_work w;
    struct mms__mllama_batch_plan bp;
    struct mms__mllama_text_graph tg;
    struct mms__mllama_group_spec *spec = NULL;
    struct mms_context *ctx;
    enum mms_status st = MMS_OK;
    int i, j, s, g, n, n_img = 0, n_groups = 0, n_text_only = 0;
    bool gen = true;
    const int64_t t0 = mms_time_us();
    if (!c || !b || !b->tokens || b->n_tokens < 1)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_decode: context, tokens and n >= 1 are required");
    if (c->m->shapes_only) return mms_set_error(MMS_ERR_STATE, "mms_mllama_decode: the model has shapes only, no weights");
    n = b->n_tokens;
    if (n > c->p.n_batch) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_decode: %d tokens in one batch, more than n_batch %d", n, c->p.n_batch);
    if (!mms__mllama_batch_work_alloc(&w, n, c->p.n_seq)) return mms_set_error(MMS_ERR_OOM, "mllama: out of host memory");
    if ((st = mms__mllama_plan_batch(c, b, &w, &bp)) != MMS_OK) { mms__mllama_batch_work_free(&w); return st; }
    for (i = 0; i < n; i++) {                  /* the image tokens' positions (undone below if the batch fails) */
        struct mms__mllama_seq *sq = &c->seqs[b->seq ? b->seq[i] : 0];
        if (b->tokens[i] == hp->image_token_id) sq->image_pos[sq->n_image_pos++] = w.pos[i];
    }
    for (s = 0; s < c->p.n_seq; s++) {         /* a cross-attention group per sequence with images */
        if (!w.seq_n[s]) continue;
        w.seq_group[s] = c->seqs[s].n_conv_images > 0 ? n_groups++ : 0;   /* sequences without: the first group */
        n_img += c->seqs[s].n_conv_images;
        n_text_only += c->seqs[s].n_conv_images == 0;
        gen &= w.seq_n[s] == 1;
    }
    bp.gate = n_groups > 0 && n_text_only > 0;

    ctx = mms__mllama_fresh_graph_ctx(c);
    if (n_groups > 0) {                        /* the groups' images, and the rows in group order */
        struct mms_tensor ***kl = (struct mms_tensor ***)mms__ctx_alloc(ctx, sizeof *kl * (size_t)n_img * 2, MMS__OBJ_ALIGN);
        int *at = (int *)mms__ctx_alloc(ctx, sizeof *at * (size_t)n_groups, MMS__OBJ_ALIGN), off = 0;
        spec = (struct mms__mllama_group_spec *)mms__ctx_alloc(ctx, sizeof *spec * (size_t)n_groups, MMS__OBJ_ALIGN);
        if (!kl || !at || !spec) { st = mms_ctx_status(ctx); goto done; }
        for (s = 0; s < c->p.n_seq; s++) {
            const struct mms__mllama_seq *sq = &c->seqs[s];
            if (!w.seq_n[s] || sq->n_conv_images == 0) continue;
            g = w.seq_group[s];
            spec[g].n_img = sq->n_conv_images;
            spec[g].n_rows = 0;
            spec[g].k = kl + off;
            spec[g].v = kl + n_img + off;
            for (j = 0; j < sq->n_conv_images; j++, off++) {
                kl[off] = c->images[sq->conv_images[j]].k;
                kl[n_img + off] = c->images[sq->conv_images[j]].v;
            }
        }
        for (i = 0; i < n; i++) spec[w.seq_group[b->seq ? b->seq[i] : 0]].n_rows++;
        for (g = 0, off = 0; g < n_groups; off += spec[g++].n_rows) at[g] = off;
        for (i = 0; i < n; i++) {
            g = w.seq_group[b->seq ? b->seq[i] : 0];
            w.unperm[i] = at[g];
            w.perm[at[g]++] = i;
        }
    }
    mms__mllama_text_graph(c, ctx, &bp, spec, n_groups, &tg);
    if ((st = mms_backend_sched_alloc_graph(c->sched, tg.graph)) != MMS_OK) goto done;
    if ((st = mms_backend_tensor_set(tg.in.tokens, b->tokens, 0, sizeof *b->tokens * (size_t)n)) != MMS_OK ||
        (st = mms_backend_tensor_set(tg.in.pos, w.pos, 0, sizeof *w.pos * (size_t)n)) != MMS_OK ||
        (st = mms_backend_tensor_set(tg.in.slots, w.slot, 0, sizeof *w.slot * (size_t)n)) != MMS_OK ||
        (st = mms_backend_tensor_set(tg.in.out_ids, w.out_ids, 0, sizeof *w.out_ids * (size_t)bp.n_out)) != MMS_OK ||
        (st = mms__mllama_set_masks(c, b, &w, &tg)) != MMS_OK) goto done;
    if ((st = mms_backend_sched_graph_compute(c->sched, tg.graph)) != MMS_OK) goto done;
    {
        float *l = (float *)MMS_REALLOC(c->logits, sizeof *l * (size_t)bp.n_out * (size_t)hp->n_vocab);
        if (!l) { st = mms_set_error(MMS_ERR_OOM, "mllama: out of host memory for logits"); goto done; }
        c->logits = l;
        if ((st = mms_backend_tensor_get(tg.logits, c->logits, 0, sizeof *l * (size_t)bp.n_out * (size_t)hp->n_vocab)) != MMS_OK) goto done;
        c->n_logits = bp.n_out;
    }
    {
        const double ms = (double)(mms_time_us() - t0) / 1000.0;
        for (s = 0; s < c->p.n_seq; s++) {
            struct mms_mllama_seq_timings *t = &c->seqs[s].t;
            if (!w.seq_n[s]) continue;
            c->seqs[s].n_past += w.seq_n[s];
            t->n_calls++;
            if (w.seq_n[s] == 1) { t->gen_ms += ms; t->n_gen_tokens++; }
            else { t->prompt_ms += ms; t->n_prompt_tokens += w.seq_n[s]; }
        }
        if (gen) { c->t.gen_ms += ms; c->t.n_gen_tokens += n; }
        else { c->t.prompt_ms += ms; c->t.n_prompt_tokens += n; }
    }
done:
    if (st != MMS_OK)                          /* the batch did not happen */
        for (s = 0; s < c->p.n_seq; s++) c->seqs[s].n_image_pos -= w.seq_images[s];
    mms__mllama_batch_work_free(&w);
    return st;
}

MMS_API enum mms_status mms_mllama_decode(struct mms_mllama_context *c, const int32_t *tokens, int n, const bool *want) {
    struct mms_mllama_batch b;
    memset(&b, 0, sizeof b);
    b.n_tokens = n;
    b.tokens = tokens;
    b.want = want;
    return mms_mllama_decode_batch(c, &b);
}

MMS_API enum mms_status mms_mllama_seq_clear(struct mms_mllama_context *c, int seq) {
    enum mms_status st = mms__mllama_check_seq(c, seq, "mms_mllama_seq_clear");
    if (st != MMS_OK) return st;
    c->seqs[seq].n_past = 0;
    c->seqs[seq].n_image_pos = 0;
    c->seqs[seq].n_conv_images = 0;
    memset(&c->seqs[seq].t, 0, sizeof c->seqs[seq].t);
    return MMS_OK;
}

MMS_API void mms_mllama_kv_clear(struct mms_mllama_context *c) {
    int s;
    if (!c) return;
    for (s = 0; s < c->p.n_seq; s++) mms_mllama_seq_clear(c, s);
    c->n_logits = 0;
}

MMS_API enum mms_status mms_mllama_seq_trim(struct mms_mllama_context *c, int seq, int n_keep) {
    struct mms__mllama_seq *sq;
    enum mms_status st = mms__mllama_check_seq(c, seq, "mms_mllama_kv_trim");
    if (st != MMS_OK) return st;
    sq = &c->seqs[seq];
    if (n_keep < 0 || n_keep > sq->n_past)
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_kv_trim: n_keep must be in 0..%d for sequence %d", sq->n_past, seq);
    sq->n_past = n_keep;
    while (sq->n_image_pos > 0 && sq->image_pos[sq->n_image_pos - 1] >= n_keep) sq->n_image_pos--;
    if (sq->n_conv_images > sq->n_image_pos) sq->n_conv_images = sq->n_image_pos;   /* images whose token went */
    return MMS_OK;
}

MMS_API enum mms_status mms_mllama_kv_trim(struct mms_mllama_context *c, int n_keep) {
    if (!c) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_kv_trim: context is NULL");
    return mms_mllama_seq_trim(c, 0, n_keep);
}

/* -- timings -- */

MMS_API void mms_mllama_get_timings(const struct mms_mllama_context *c, struct mms_mllama_timings *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!c) return;
    *out = c->t;
    out->n_backends = mms__mllama_n_devices(c);
    out->n_seq = c->p.n_seq;
}

MMS_API enum mms_status mms_mllama_get_memory(const struct mms_mllama_context *c, int b, struct mms_mllama_memory *out) {
    size_t kept;
    if (!c || !out) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_get_memory: context and output are required");
    if (b < 0 || b >= mms__mllama_n_devices(c))
        return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_get_memory: backend %d, the context has %d", b, mms__mllama_n_devices(c));
    memset(out, 0, sizeof *out);
    mms__copy_str(out->name, sizeof out->name, mms_backend_name(c->m->backends[b]));
    mms__mllama_memory(c, b, &out->weights, &out->weights_repacked, &out->kv_cache, &out->compute, &kept);
    out->kept_images_peak = kept > c->kept_peak[b] ? kept : c->kept_peak[b];
    out->peak = out->weights + out->kv_cache + out->compute + out->kept_images_peak;
    return MMS_OK;
}

MMS_API enum mms_status mms_mllama_seq_get_timings(const struct mms_mllama_context *c, int seq, struct mms_mllama_seq_timings *out) {
    enum mms_status st = mms__mllama_check_seq(c, seq, "mms_mllama_seq_get_timings");
    int b;
    if (st != MMS_OK) return st;
    if (!out) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_mllama_seq_get_timings: out is NULL");
    *out = c->seqs[seq].t;
    out->kv_cache = 0;
    for (b = 0; b < 2; b++) out->kv_cache += c->cache_buf[b] ? mms_backend_buffer_get_size(c->cache_buf[b]) / (size_t)c->p.n_seq : 0;
    return MMS_OK;
}

MMS_API void mms_mllama_reset_timings(struct mms_mllama_context *c) {
    double load, context;
    int s;
    if (!c) return;
    for (s = 0; s < c->p.n_seq; s++) memset(&c->seqs[s].t, 0, sizeof c->seqs[s].t);
    load = c->t.load_ms;
    context = c->t.context_ms;
    memset(&c->t, 0, sizeof c->t);
    c->t.load_ms = load;
    c->t.context_ms = context;
}

static double mms__per_s(int n, double ms) { return ms > 0.0 ? (double)n * 1000.0 / ms : 0.0; }

MMS_API void mms_mllama_print_timings(const struct mms_mllama_context *c, FILE *out) {
    struct mms_mllama_timings t;
    int b;
    if (!out) out = stdout;
    mms_mllama_get_timings(c, &t);
    fprintf(out, "load          %10.2f ms\n", t.load_ms);
    fprintf(out, "context       %10.2f ms   (KV cache, reserving the graphs)\n", t.context_ms);
    fprintf(out, "preprocess    %10.2f ms   images: %d\n", t.preprocess_ms, t.n_preprocessed);
    fprintf(out, "image encode  %10.2f ms   encodes: %d (vision encoder + projector)\n", t.encode_ms, t.n_encodes);
    fprintf(out, "cross K/V     %10.2f ms\n", t.cross_kv_ms);
    fprintf(out, "prompt        %10.2f ms   %d tokens, %.2f tokens/s\n", t.prompt_ms, t.n_prompt_tokens, mms__per_s(t.n_prompt_tokens, t.prompt_ms));
    fprintf(out, "generation    %10.2f ms   %d tokens, %.2f tokens/s\n", t.gen_ms, t.n_gen_tokens, mms__per_s(t.n_gen_tokens, t.gen_ms));
    for (b = 0; b < t.n_backends; b++) {
        struct mms_mllama_memory m;
        if (mms_mllama_get_memory(c, b, &m) != MMS_OK) continue;
        fprintf(out, "memory %-6s peak %.2f MiB = weights %.2f + KV cache %.2f + compute %.2f + kept images %.2f\n", m.name,
                (double)m.peak / 1048576.0, (double)m.weights / 1048576.0, (double)m.kv_cache / 1048576.0,
                (double)m.compute / 1048576.0, (double)m.kept_images_peak / 1048576.0);
    }
    for (b = 0; t.n_seq > 1 && b < t.n_seq; b++) {
        struct mms_mllama_seq_timings st;
        if (mms_mllama_seq_get_timings(c, b, &st) != MMS_OK || st.n_calls == 0) continue;
        fprintf(out, "sequence %-4d prompt %d tokens %.2f ms, generation %d tokens %.2f ms (%.2f tokens/s), KV cache %.2f MiB\n", b,
                st.n_prompt_tokens, st.prompt_ms, st.n_gen_tokens, st.gen_ms, mms__per_s(st.n_gen_tokens, st.gen_ms),
                (double)st.kv_cache / 1048576.0);
    }
}
/* ==== end src/mllama/runtime.c ==== */

#endif

/* ==== begin src/base/end.c ==== */
#endif /* MMSCHED_IMPLEMENTATION */
/* ==== end src/base/end.c ==== */

/*
   LICENSE

   MIT License. Copyright (c) 2026 the mmsched authors.
*/
