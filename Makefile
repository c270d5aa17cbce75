# mmsched build. Everything goes to build/. `make help` lists the targets.

CC      ?= cc
CXX     ?= c++
NVCC    ?= nvcc
OPT     ?= -O2 -g
STD      = -std=c99
WARN     = -Wall -Wextra -Werror -pedantic
LIBS     = -lm -lpthread
SAN      = -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
TSAN     = -O1 -g -fsanitize=thread -fno-omit-frame-pointer
# Under ThreadSanitizer: the tests that share objects between threads (a model among contexts, an engine among threads).
TSAN_TESTS = test_mllama_seq test_engine
CUDA_ARCHS ?= 80 90
NVCC_GENCODE = $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a))
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(shell command -v $(NVCC) 2>/dev/null))
CUDA_LIBS = -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lcublas

TESTS    = test_platform test_core test_backend test_lifetime test_ops test_backend_ops test_alloc test_sched test_gguf test_formats test_image test_mllama test_mllama_seq test_engine test_tokenizer test_text test_demo test_cli test_quant test_quantize test_examples test_server
# mllama-server's end-to-end tests: Python scripts (tests/NAME.py) run with the official clients, Linux only.
SERVER_TESTS = server_test server_haproxy_test
EXAMPLES = simple two_graphs bench mllama quantize
PYTHON3 ?= python3

B = build

.PHONY: all help header check-header test test-tsan unit-tests asan-tests tsan-tests compile-tests cuda cuda-if-available examples demo bench fuzz clean \
        test-windows test-arm64 windows arm64

all: examples

help:
	@echo "make test      header check, compile checks (C99, C++, static, twice), tests, tests under ASan+UBSan,"
	@echo "               CUDA compile-and-link when nvcc is present; ends with 'N passed, N failed'"
	@echo "make test-tsan the tests that share a model between threads, under ThreadSanitizer (also part of make test)"
	@echo "make examples  build examples/ into build/"
	@echo "make demo      the main job: the bundled Llama 3.2 Vision demo model describes examples/images/"
	@echo "make bench     build and run the CPU benchmarks"
	@echo "make cuda      build the CUDA backend and its tests with nvcc (CUDA_ARCHS='80 90')"
	@echo "make test-windows  the tests and examples built with MinGW-w64, the tests run under Wine"
	@echo "make test-arm64    the tests and examples built for 64-bit ARM Linux, run under QEMU (every kernel set)"
	@echo "make fuzz      fuzz the GGUF, JSON and safetensors readers and the server's request parsing with libFuzzer, FUZZ_SECONDS (60) each, seeded from tests/fuzz/corpus-*"
	@echo "make header    regenerate mmsched.h from src/"

header:
	tools/amalgamate.sh

check-header:
	@tools/amalgamate.sh --check

$(B) $(B)/tests $(B)/tests-asan $(B)/tests-tsan $(B)/compile $(B)/cuda $(B)/asan $(B)/tsan:
	@mkdir -p $@

# -- tests ------------------------------------------------------------------------------------------

$(B)/tests/%: tests/%.c mmsched.h tests/*.h examples/reference_graphs.h | $(B)/tests
	$(CC) $(STD) $(WARN) $(OPT) -I. $< -o $@ $(LIBS)

$(B)/tests-asan/%: tests/%.c mmsched.h tests/*.h examples/reference_graphs.h | $(B)/tests-asan
	$(CC) $(STD) $(WARN) $(SAN) -I. $< -o $@ $(LIBS)

$(B)/tests-tsan/%: tests/%.c mmsched.h tests/*.h | $(B)/tests-tsan
	$(CC) $(STD) $(WARN) $(TSAN) -I. $< -o $@ $(LIBS)

# test_engine compares the engine's answers with the mllama program's (the normal build).
$(B)/tests/test_engine $(B)/tests-asan/test_engine $(B)/tests-tsan/test_engine: $(B)/mllama
# test_cli runs the mllama program: the normal build, and under sanitizers a sanitized build.
$(B)/tests/test_cli: tests/test_cli.c tests/*.h mmsched.h $(B)/mllama $(B)/batch | $(B)/tests
	$(CC) $(STD) -D_POSIX_C_SOURCE=200809L $(WARN) $(OPT) -I. -DCLI='"$(B)/mllama"' -DBATCH='"$(B)/batch"' $< -o $@ $(LIBS)
$(B)/tests-asan/test_cli: tests/test_cli.c tests/*.h mmsched.h $(B)/asan/mllama $(B)/asan/batch | $(B)/tests-asan
	$(CC) $(STD) -D_POSIX_C_SOURCE=200809L $(WARN) $(SAN) -I. -DCLI='"$(B)/asan/mllama"' -DBATCH='"$(B)/asan/batch"' $< -o $@ $(LIBS)
# test_examples runs the examples: the normal builds, and under sanitizers sanitized builds.
$(B)/tests/test_examples: tests/test_examples.c tests/*.h mmsched.h $(B)/simple $(B)/two_graphs $(B)/bench | $(B)/tests
	$(CC) $(STD) -D_POSIX_C_SOURCE=200809L $(WARN) $(OPT) -I. -DEXAMPLES='"$(B)"' $< -o $@ $(LIBS)
$(B)/tests-asan/test_examples: tests/test_examples.c tests/*.h mmsched.h $(B)/asan/simple $(B)/asan/two_graphs $(B)/asan/bench | $(B)/tests-asan
	$(CC) $(STD) -D_POSIX_C_SOURCE=200809L $(WARN) $(SAN) -I. -DEXAMPLES='"$(B)/asan"' $< -o $@ $(LIBS)
$(B)/asan/simple $(B)/asan/two_graphs $(B)/asan/bench: $(B)/asan/%: examples/%.c mmsched.h examples/*.h | $(B)/asan
	$(CC) $(STD) $(WARN) $(SAN) -I. $< -o $@ $(LIBS)
# test_server tests mllama-server's parts (examples/server/*.h) and replays the HTTP fuzz corpus.
$(B)/tests/test_server $(B)/tests-asan/test_server: examples/server/*.h tests/fuzz/fuzz_http.c
# test_quantize runs the quantize program the same way.
$(B)/tests/test_quantize: tests/test_quantize.c tests/*.h mmsched.h $(B)/quantize | $(B)/tests
	$(CC) $(STD) $(WARN) $(OPT) -I. -DQUANTIZE='"$(B)/quantize"' $< -o $@ $(LIBS)
$(B)/tests-asan/test_quantize: tests/test_quantize.c tests/*.h mmsched.h $(B)/asan/quantize | $(B)/tests-asan
	$(CC) $(STD) $(WARN) $(SAN) -I. -DQUANTIZE='"$(B)/asan/quantize"' $< -o $@ $(LIBS)
$(B)/asan/quantize: examples/quantize.c mmsched.h | $(B)/asan
	$(CC) $(STD) $(WARN) $(SAN) -I. $< -o $@ $(LIBS)
$(B)/asan/mllama: examples/mllama.c mmsched.h | $(B)/asan
	$(CC) $(STD) -D_POSIX_C_SOURCE=200809L $(WARN) $(SAN) -I. $< -o $@ -lstb $(LIBS)
$(B)/asan/batch: examples/batch.c mmsched.h examples/random_mllama.h | $(B)/asan
	$(CC) $(STD) $(WARN) $(SAN) -I. $< -o $@ -lstb $(LIBS)

$(B)/compile/c99_gcc: tests/compile/c99.c mmsched.h | $(B)/compile
	gcc $(STD) $(WARN) -O2 $< -o $@ $(LIBS)
$(B)/compile/c99_clang: tests/compile/c99.c mmsched.h | $(B)/compile
	@if command -v clang >/dev/null; then echo "clang $(STD) $(WARN) -O2 $< -o $@"; clang $(STD) $(WARN) -O2 $< -o $@ $(LIBS); \
	 else echo "SKIP clang not installed"; fi
$(B)/compile/cpp: tests/compile/cpp.cpp mmsched.h | $(B)/compile
	$(CXX) -std=c++11 $(WARN) -O2 $< -o $@ $(LIBS)
$(B)/compile/twice: tests/compile/twice.c mmsched.h | $(B)/compile
	$(CC) $(STD) $(WARN) -O2 $< -o $@ $(LIBS)
$(B)/compile/static: tests/compile/static_a.c tests/compile/static_b.c mmsched.h | $(B)/compile
	$(CC) $(STD) $(WARN) -O2 tests/compile/static_a.c tests/compile/static_b.c -o $@ $(LIBS)

# The header with whole parts left out (MMS_NO_MLLAMA, MMS_NO_TEXT, MMS_NO_GGUF).
$(B)/compile/no_mllama $(B)/compile/no_text $(B)/compile/no_gguf: $(B)/compile/no_%: tests/compile/parts.c mmsched.h | $(B)/compile
	$(CC) $(STD) $(WARN) -O2 -DMMS_NO_$(shell echo $* | tr a-z A-Z) $< -o $@ $(LIBS)

compile-tests: $(B)/compile/c99_gcc $(B)/compile/c99_clang $(B)/compile/cpp $(B)/compile/twice $(B)/compile/static \
               $(B)/compile/no_mllama $(B)/compile/no_text $(B)/compile/no_gguf
unit-tests: $(addprefix $(B)/tests/,$(TESTS) $(SERVER_TESTS))
asan-tests: $(addprefix $(B)/tests-asan/,$(TESTS) server_test)
tsan-tests: $(addprefix $(B)/tests-tsan/,$(TSAN_TESTS) server_test)

# The scalar kernels are tested inside test_ops (it runs every case with both kernel sets).
test: check-header compile-tests unit-tests asan-tests tsan-tests cuda-if-available
	@tests/run.sh $(B)/compile $(B)/tests $(B)/tests-asan $(B)/tests-tsan $(wildcard $(B)/cuda/tests)

# ThreadSanitizer alone (a reported data race makes the test exit with status 66: a failure in run.sh).
test-tsan: tsan-tests
	@tests/run.sh $(B)/tests-tsan

# -- CUDA -------------------------------------------------------------------------------------------
# The CUDA tests go to build/cuda/tests: test_cuda_kernels and test_sched_host run the kernels' code
# on the host (no GPU needed); the others run on GPU 0 and print SKIP without one.

CUDA_TESTS = test_cuda test_backend_ops test_sched test_cuda_kernels test_sched_host
# No exceptions or thread-safe statics: the object links into C programs without libstdc++.
NVCC_FLAGS = -O2 $(NVCC_GENCODE) --Werror all-warnings -Xcompiler -Wall,-Wextra,-fno-exceptions,-fno-threadsafe-statics
# Programs that run the kernels on the host carry device code only as PTX (no ptxas: faster builds).
NVCC_HOST_FLAGS = $(subst code=sm_,code=compute_,$(NVCC_FLAGS))

$(B)/cuda/tests: | $(B)/cuda
	@mkdir -p $@

$(B)/cuda/mmsched_cuda.o: mmsched_cuda.cu mmsched.h | $(B)/cuda
	$(NVCC) $(NVCC_FLAGS) -c $< -o $@

# The library's implementation with MMS_CUDA, for programs whose own file is CUDA C++.
$(B)/cuda/mmsched_impl.o: mmsched.h | $(B)/cuda
	$(CC) $(STD) $(WARN) $(OPT) -DMMS_CUDA -DMMSCHED_IMPLEMENTATION -x c -c $< -o $@

$(B)/cuda/tests/test_cuda: tests/test_cuda.c $(B)/cuda/mmsched_cuda.o tests/*.h mmsched.h | $(B)/cuda/tests
	$(CC) $(STD) $(WARN) $(OPT) -I. $< $(B)/cuda/mmsched_cuda.o -o $@ $(CUDA_LIBS) $(LIBS)
$(B)/cuda/tests/test_backend_ops: tests/test_backend_ops.c $(B)/cuda/mmsched_cuda.o tests/*.h mmsched.h | $(B)/cuda/tests
	$(CC) $(STD) $(WARN) $(OPT) -DMMS_CUDA -I. $< $(B)/cuda/mmsched_cuda.o -o $@ $(CUDA_LIBS) $(LIBS)
$(B)/cuda/tests/test_sched: tests/test_sched.c $(B)/cuda/mmsched_cuda.o tests/*.h mmsched.h | $(B)/cuda/tests
	$(CC) $(STD) $(WARN) $(OPT) -DSCHED_ON_CUDA -I. $< $(B)/cuda/mmsched_cuda.o -o $@ $(CUDA_LIBS) $(LIBS)
$(B)/cuda/tests/test_sched_host: tests/test_sched.c mmsched_cuda.cu tests/*.h mmsched.h | $(B)/cuda/tests
	$(NVCC) $(NVCC_HOST_FLAGS) -x cu -DSCHED_ON_HOST_CUDA -I. $< -o $@ -lcublas -lm -lpthread
# The kernels' host code contracts a * b + c into FMA as nvcc does on the device, so a result that
# depends on it differs from the CPU's here too (x86 needs -mfma for that; the test checks the CPU).
NVCC_HOST_FMA = -Xcompiler -ffp-contract=fast$(if $(filter x86_64,$(shell uname -m)),$(comma)-mfma)
comma := ,
$(B)/cuda/tests/test_cuda_kernels: tests/test_cuda_kernels.cu mmsched_cuda.cu $(B)/cuda/mmsched_impl.o tests/*.h mmsched.h | $(B)/cuda/tests
	$(NVCC) $(NVCC_HOST_FLAGS) $(NVCC_HOST_FMA) -I. $< $(B)/cuda/mmsched_impl.o -o $@ -lcublas -lm -lpthread

$(B)/cuda/mllama: examples/mllama.c $(B)/cuda/mmsched_cuda.o mmsched.h | $(B)/cuda
	$(CC) $(STD) -D_POSIX_C_SOURCE=200809L -DMMS_CUDA $(WARN) $(OPT) -I. $< $(B)/cuda/mmsched_cuda.o -o $@ -lstb $(CUDA_LIBS) $(LIBS)
$(B)/cuda/bench_cuda: examples/bench_cuda.c $(B)/cuda/mmsched_cuda.o mmsched.h | $(B)/cuda
	$(CC) $(STD) -D_POSIX_C_SOURCE=200809L $(WARN) $(OPT) -I. -isystem $(CUDA_HOME)/include $< $(B)/cuda/mmsched_cuda.o -o $@ $(CUDA_LIBS) $(LIBS)

# The backend built against the mock CUDA runtime (tests/cuda_mock.h), and the CUDA tests linked
# with it: every device case runs on the host, on two mock devices.
CUDA_MOCK = $(B)/cuda/mock/mmsched_cuda_mock.o
CUDA_MOCK_LIBS = $(CUDA_LIBS) -lstdc++
$(B)/cuda/mock: | $(B)/cuda
	@mkdir -p $@
$(CUDA_MOCK): tests/cuda_mock.cu mmsched_cuda.cu tests/*.h mmsched.h | $(B)/cuda/mock
	$(NVCC) $(NVCC_HOST_FLAGS) $(NVCC_HOST_FMA) -I. -c $< -o $@
$(B)/cuda/tests/test_cuda_mock: tests/test_cuda.c $(CUDA_MOCK) tests/*.h mmsched.h | $(B)/cuda/tests
	$(CC) $(STD) $(WARN) $(OPT) -DMMS_CUDA_MOCK -I. $< $(CUDA_MOCK) -o $@ $(CUDA_MOCK_LIBS) $(LIBS)
$(B)/cuda/tests/test_backend_ops_mock: tests/test_backend_ops.c $(CUDA_MOCK) tests/*.h mmsched.h | $(B)/cuda/tests
	$(CC) $(STD) $(WARN) $(OPT) -DMMS_CUDA -DMMS_CUDA_MOCK -I. $< $(CUDA_MOCK) -o $@ $(CUDA_MOCK_LIBS) $(LIBS)
$(B)/cuda/tests/test_sched_mock: tests/test_sched.c $(CUDA_MOCK) tests/*.h mmsched.h | $(B)/cuda/tests
	$(CC) $(STD) $(WARN) $(OPT) -DSCHED_ON_CUDA -DMMS_CUDA_MOCK -I. $< $(CUDA_MOCK) -o $@ $(CUDA_MOCK_LIBS) $(LIBS)
CUDA_MOCK_TESTS = test_cuda_mock test_backend_ops_mock test_sched_mock

# The backend relies on the legacy default stream: a per-thread default stream build must stop at #error.
$(B)/cuda/per_thread_stream_refused: mmsched_cuda.cu mmsched.h | $(B)/cuda
	@if $(NVCC) --default-stream per-thread -E -I. mmsched_cuda.cu -o /dev/null 2>/dev/null; then \
	  echo "mmsched_cuda.cu builds with --default-stream per-thread; it must refuse"; exit 1; fi
	@touch $@

cuda: $(addprefix $(B)/cuda/tests/,$(CUDA_TESTS) $(CUDA_MOCK_TESTS)) $(B)/cuda/mllama $(B)/cuda/bench_cuda $(B)/cuda/per_thread_stream_refused

cuda-if-available:
	@if command -v $(NVCC) >/dev/null; then $(MAKE) --no-print-directory cuda; \
	 else echo "SKIP CUDA targets: nvcc not found"; fi

# -- other platforms ---------------------------------------------------------------------------------
# Windows: MinGW-w64, the tests run under Wine. 64-bit ARM Linux: a cross gcc, the tests run under
# QEMU's user mode, on a CPU with the dot-product instructions (every kernel set) and on one
# without (the NEON set and the run-time choice). stb_image is compiled from Debian's header for
# both (libstb-dev's library is the host's). No sanitizers there: they run natively in `make test`.

WIN_CC   ?= x86_64-w64-mingw32-gcc
WINE     ?= wine
ARM_CC   ?= aarch64-linux-gnu-gcc
QEMU_ARM ?= qemu-aarch64 -L /usr/aarch64-linux-gnu
# QEMU's CPU models: one with dotprod (ARMv8.2 and later), one without (ARMv8.0: NEON only)
ARM_CPU_DOTPROD ?= max
ARM_CPU_PLAIN   ?= cortex-a53
STB_HEADER ?= /usr/include/stb/stb_image.h

W = $(B)/windows
A = $(B)/arm64
# Left out, each counted as skipped with its reason: on Windows the tests that run the example
# programs through a POSIX shell (tests/run_program.h); on ARM test_examples, which runs bench.
WIN_LEFT_OUT = test_cli test_quantize test_examples test_engine
WIN_TESTS = $(filter-out $(WIN_LEFT_OUT),$(TESTS))
ARM_LEFT_OUT = test_examples
ARM_TESTS = $(filter-out $(ARM_LEFT_OUT),$(TESTS))
# bench measures an x86 machine's limits with AVX2 (and timing under QEMU means nothing)
ARM_EXAMPLES = $(filter-out bench,$(EXAMPLES))
# under the CPU without dotprod: the selection, the platform, the NEON set's ops and quantized dots, a model
ARM_PLAIN_TESTS = test_backend test_platform test_ops test_quant test_mllama

$(W) $(W)/tests $(W)/run $(W)/include $(A) $(A)/tests $(A)/run $(A)/qemu:
	@mkdir -p $@

# stb_image's implementation from Debian's header, and an include folder with just stb/
$(W)/include/stb: | $(W)/include
	ln -sfn $(dir $(STB_HEADER)) $@
$(W)/stb_image.o: $(STB_HEADER) | $(W)
	printf '#define STB_IMAGE_IMPLEMENTATION\n#include "%s"\n' $(STB_HEADER) | $(WIN_CC) -O2 -w -x c -c - -o $@
$(A)/stb_image.o: $(STB_HEADER) | $(A)
	printf '#define STB_IMAGE_IMPLEMENTATION\n#include "%s"\n' $(STB_HEADER) | $(ARM_CC) -O2 -w -x c -c - -o $@

$(W)/windows_stdio.o: tests/windows_stdio.c | $(W)
	$(WIN_CC) $(STD) $(WARN) -O2 -c $< -o $@

# -Wvla: what MSVC would reject (statement expressions and the rest are -pedantic's)
WIN_FLAGS = $(STD) $(WARN) -Wvla -O2 -I.
$(W)/tests/%.exe: tests/%.c mmsched.h tests/*.h examples/reference_graphs.h $(W)/windows_stdio.o | $(W)/tests
	$(WIN_CC) $(WIN_FLAGS) $< $(W)/windows_stdio.o -o $@
# a left-out test as a wrapper that reports it skipped
MMS_SKIP_WRAPPER = printf '\043!/bin/sh\necho "SKIP %s: %s"\necho "0 passed, 0 failed, 1 skipped"\n'
$(W)/run/skip-%: | $(W)/run
	@$(MMS_SKIP_WRAPPER) "$* on Windows" "it runs the example programs through a POSIX shell (tests/run_program.h)" > $@ && chmod +x $@
$(A)/run/skip-%: | $(A)/run
	@$(MMS_SKIP_WRAPPER) "$* on 64-bit ARM" "it runs bench, which measures x86 limits with AVX2" > $@ && chmod +x $@
$(W)/run/%: $(W)/tests/%.exe | $(W)/run
	@printf '#!/bin/sh\nWINEPREFIX=$(CURDIR)/$(W)/wineprefix WINEDEBUG=-all exec $(WINE) %s "$$@"\n' $< > $@ && chmod +x $@
$(W)/%.exe: examples/%.c mmsched.h examples/*.h $(W)/windows_stdio.o | $(W)
	$(WIN_CC) $(WIN_FLAGS) $< $(W)/windows_stdio.o -o $@ -static -lpthread
# test_server: the Ollama answers' timestamps use clock_gettime, which MinGW-w64 has in winpthreads.
$(W)/tests/test_server.exe: tests/test_server.c mmsched.h tests/*.h tests/fuzz/fuzz_http.c examples/server/*.h $(W)/windows_stdio.o | $(W)/tests
	$(WIN_CC) $(WIN_FLAGS) $< $(W)/windows_stdio.o -o $@ -static -lpthread
$(W)/mllama.exe $(W)/batch.exe: $(W)/%.exe: examples/%.c mmsched.h examples/*.h $(W)/windows_stdio.o $(W)/stb_image.o | $(W)/include/stb
	$(WIN_CC) $(WIN_FLAGS) -isystem $(W)/include $< $(W)/windows_stdio.o $(W)/stb_image.o -o $@

ARM_FLAGS = $(STD) $(WARN) -O2 -I.
$(A)/tests/%: tests/%.c mmsched.h tests/*.h examples/reference_graphs.h | $(A)/tests
	$(ARM_CC) $(ARM_FLAGS) $< -o $@ $(LIBS)
# test_cli and test_quantize run the programs through scripts that start them under QEMU
$(A)/qemu/%: $(A)/% | $(A)/qemu
	@printf '#!/bin/sh\nexec $(QEMU_ARM) -cpu $(ARM_CPU_DOTPROD) %s "$$@"\n' $< > $@ && chmod +x $@
$(A)/tests/test_cli: tests/test_cli.c tests/*.h mmsched.h $(A)/qemu/mllama $(A)/qemu/batch | $(A)/tests
	$(ARM_CC) $(ARM_FLAGS) -D_POSIX_C_SOURCE=200809L -DCLI='"$(A)/qemu/mllama"' -DBATCH='"$(A)/qemu/batch"' $< -o $@ $(LIBS)
$(A)/tests/test_engine: tests/test_engine.c tests/*.h mmsched.h $(A)/qemu/mllama | $(A)/tests
	$(ARM_CC) $(ARM_FLAGS) -DCLI='"$(A)/qemu/mllama"' $< -o $@ $(LIBS)
$(A)/tests/test_quantize: tests/test_quantize.c tests/*.h mmsched.h $(A)/qemu/quantize | $(A)/tests
	$(ARM_CC) $(ARM_FLAGS) -DQUANTIZE='"$(A)/qemu/quantize"' $< -o $@ $(LIBS)
$(A)/run/%: $(A)/tests/% | $(A)/run
	@printf '#!/bin/sh\nMMS_TEST_AUTO_KERNELS=neon_dotprod exec $(QEMU_ARM) -cpu $(ARM_CPU_DOTPROD) %s "$$@"\n' $< > $@ && chmod +x $@
$(A)/run/%-plain: $(A)/tests/% | $(A)/run
	@printf '#!/bin/sh\nMMS_TEST_AUTO_KERNELS=neon MMS_TEST_KERNELS=neon exec $(QEMU_ARM) -cpu $(ARM_CPU_PLAIN) %s "$$@"\n' $< > $@ && chmod +x $@
$(A)/%: examples/%.c mmsched.h examples/*.h | $(A)
	$(ARM_CC) $(ARM_FLAGS) $< -o $@ $(LIBS)
$(A)/mllama $(A)/batch: $(A)/%: examples/%.c mmsched.h examples/*.h $(A)/stb_image.o | $(A)
	$(ARM_CC) $(ARM_FLAGS) -D_POSIX_C_SOURCE=200809L $< $(A)/stb_image.o -o $@ $(LIBS)

windows: $(addprefix $(W)/tests/,$(addsuffix .exe,$(WIN_TESTS))) $(addprefix $(W)/run/,$(WIN_TESTS) $(addprefix skip-,$(WIN_LEFT_OUT))) \
         $(addprefix $(W)/,$(addsuffix .exe,$(EXAMPLES) batch))
arm64: $(addprefix $(A)/tests/,$(ARM_TESTS)) $(addprefix $(A)/run/,$(ARM_TESTS) $(addprefix skip-,$(ARM_LEFT_OUT))) \
       $(addprefix $(A)/run/,$(addsuffix -plain,$(ARM_PLAIN_TESTS))) \
       $(addprefix $(A)/,$(ARM_EXAMPLES) batch)

test-windows: windows
	@tests/run.sh $(W)/run

test-arm64: arm64
	@if command -v clang >/dev/null; then clang --target=aarch64-linux-gnu -isystem /usr/aarch64-linux-gnu/include $(STD) $(WARN) -O2 \
	   -fsyntax-only tests/compile/c99.c && echo "clang: the header compiles for 64-bit ARM"; else echo "SKIP clang for 64-bit ARM: clang not installed"; fi
	@tests/run.sh $(A)/run

# -- examples ---------------------------------------------------------------------------------------

$(B)/%: examples/%.c mmsched.h examples/reference_graphs.h | $(B)
	$(CC) $(STD) $(WARN) $(OPT) -I. $< -o $@ $(LIBS)

# The mllama program decodes images with stb_image from Debian's libstb-dev (so does batch).
$(B)/mllama: examples/mllama.c mmsched.h | $(B)
	$(CC) $(STD) -D_POSIX_C_SOURCE=200809L $(WARN) $(OPT) -I. $< -o $@ -lstb $(LIBS)
$(B)/batch: examples/batch.c mmsched.h examples/random_mllama.h | $(B)
	$(CC) $(STD) $(WARN) $(OPT) -I. $< -o $@ -lstb $(LIBS)

# mllama-server: POSIX sockets and threads; pictures decoded with stb_image like the mllama program.
$(B)/mllama-server: examples/server.c examples/server/*.h mmsched.h | $(B)
	$(CC) $(STD) -D_POSIX_C_SOURCE=200809L $(WARN) $(OPT) -I. $< -o $@ -lstb $(LIBS)

examples: $(addprefix $(B)/,$(EXAMPLES)) $(B)/batch $(B)/mllama-server

# The server's tests in Python drive it with the official openai and ollama clients, pinned in
# tests/requirements-server.txt and installed in a venv under build/ (a failed install fails the
# build: CI must not skip them). Each test is a wrapper that runs its script with the venv's Python.
$(B)/venv/ok: tests/requirements-server.txt | $(B)
	$(PYTHON3) -m venv $(B)/venv && $(B)/venv/bin/pip install -q -r $< && touch $@
$(addprefix $(B)/tests/,$(SERVER_TESTS)): $(B)/tests/%: tests/%.py tests/server_test.py $(B)/venv/ok $(B)/mllama-server $(B)/mllama $(B)/quantize | $(B)/tests
	printf '#!/bin/sh\nexec "$(CURDIR)/$(B)/venv/bin/python" "$(CURDIR)/tests/$*.py" "$$@"\n' > $@ && chmod +x $@
# server_test again against the server built with ASan+UBSan (asan-tests) and with ThreadSanitizer
# (tsan-tests): a report makes the server exit non-zero, which the test counts as a failure.
$(B)/asan/mllama-server: examples/server.c examples/server/*.h mmsched.h | $(B)/asan
	$(CC) $(STD) -D_POSIX_C_SOURCE=200809L $(WARN) $(SAN) -I. $< -o $@ -lstb $(LIBS)
$(B)/tsan/mllama-server: examples/server.c examples/server/*.h mmsched.h | $(B)/tsan
	$(CC) $(STD) -D_POSIX_C_SOURCE=200809L $(WARN) $(TSAN) -I. $< -o $@ -lstb $(LIBS)
$(B)/tests-asan/server_test $(B)/tests-tsan/server_test: $(B)/tests-%/server_test: tests/server_test.py $(B)/venv/ok $(B)/%/mllama-server $(B)/mllama $(B)/quantize | $(B)/tests-%
	printf '#!/bin/sh\nMLLAMA_SERVER="$(CURDIR)/$(B)/$*/mllama-server" exec "$(CURDIR)/$(B)/venv/bin/python" "$(CURDIR)/tests/server_test.py" "$$@"\n' > $@ && chmod +x $@

# The main job: the bundled demo model describes the sample pictures (timings shown for the last).
DEMO_MODEL  ?= models/mllama-demo.gguf
DEMO_PROMPT ?= Describe this image.
demo: $(B)/mllama
	@set -e; last=$$(ls examples/images/*.png examples/images/*.jpg examples/images/*.gif examples/images/*.bmp 2>/dev/null | tail -n 1); \
	for f in $$(ls examples/images/*.png examples/images/*.jpg examples/images/*.gif examples/images/*.bmp 2>/dev/null); do \
	  printf '%-40s ' "$$f:"; \
	  if [ "$$f" = "$$last" ]; then $(B)/mllama -m $(DEMO_MODEL) --image "$$f" -p "$(DEMO_PROMPT)"; \
	  else $(B)/mllama -m $(DEMO_MODEL) --image "$$f" -p "$(DEMO_PROMPT)" -q; fi; \
	done

bench: $(B)/bench
	$(B)/bench

# -- fuzzing (clang with libFuzzer); the corpus is replayed by test_gguf in `make test` ----------------

FUZZ_SECONDS ?= 60

$(B)/fuzz_gguf: tests/fuzz/fuzz_gguf.c mmsched.h | $(B)
	clang -g -O1 -fsanitize=fuzzer,address,undefined -I. $< -o $@ -lm -lpthread

$(B)/fuzz_json: tests/fuzz/fuzz_formats.c mmsched.h | $(B)
	clang -g -O1 -fsanitize=fuzzer,address,undefined -DFUZZ_JSON -I. $< -o $@ -lm -lpthread
$(B)/fuzz_safetensors: tests/fuzz/fuzz_formats.c mmsched.h | $(B)
	clang -g -O1 -fsanitize=fuzzer,address,undefined -DFUZZ_SAFETENSORS -I. $< -o $@ -lm -lpthread

$(B)/fuzz_http: tests/fuzz/fuzz_http.c examples/server/*.h mmsched.h | $(B)
	clang -g -O1 -fsanitize=fuzzer,address,undefined -DFUZZ_HTTP_MAIN -I. $< -o $@ -lm -lpthread

# The GGUF, JSON and safetensors readers and mllama-server's request parsing, FUZZ_SECONDS each; the
# corpora are replayed by test_gguf, test_formats and test_server.
fuzz: $(B)/fuzz_gguf $(B)/fuzz_json $(B)/fuzz_safetensors $(B)/fuzz_http
	@mkdir -p $(B)/fuzz-corpus $(B)/fuzz-json $(B)/fuzz-st $(B)/fuzz-http && cp -r tests/fuzz/corpus-gguf/. $(B)/fuzz-corpus/
	$(B)/fuzz_gguf -max_total_time=$(FUZZ_SECONDS) -max_len=4096 $(B)/fuzz-corpus
	$(B)/fuzz_json -max_total_time=$(FUZZ_SECONDS) -max_len=4096 $(B)/fuzz-json tests/fuzz/corpus-json
	$(B)/fuzz_safetensors -max_total_time=$(FUZZ_SECONDS) -max_len=4096 $(B)/fuzz-st tests/fuzz/corpus-safetensors
	$(B)/fuzz_http -max_total_time=$(FUZZ_SECONDS) -max_len=8192 $(B)/fuzz-http tests/fuzz/corpus-http

clean:
	rm -rf $(B)
