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
# Under ThreadSanitizer: the tests that share objects between threads (a model among contexts, the
# thread pool, an engine among threads).
TSAN_TESTS = test_mllama_seq test_backend test_engine
CUDA_ARCHS ?= 80 90
NVCC_GENCODE = $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a))
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(shell command -v $(NVCC) 2>/dev/null))
CUDA_LIBS = -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lcublas

# Tests: each tests/NAME.c is one program that ends with "N passed, N failed, N skipped". To add
# one, put its name in TESTS. It is linked against the implementation compiled once per build
# (build/lib/), which is what keeps `make test` quick, unless it also goes in SELF_CONTAINED_TESTS:
# a test that uses internal mms__ names or configures the implementation itself (MMS_MALLOC)
# compiles the implementation in (its own #define MMSCHED_IMPLEMENTATION, as the user's file does).
# A test that runs example programs names them below (see test_cli), and its flags in FLAGS_NAME.
TESTS    = test_platform test_core test_backend test_lifetime test_ops test_mm_plan test_backend_ops test_alloc test_sched test_gguf test_formats test_image test_mllama test_mllama_seq test_engine test_tokenizer test_text test_constrain test_demo test_cli test_quant test_quantize test_examples test_server
SELF_CONTAINED_TESTS = test_platform test_backend test_mm_plan test_lifetime test_gguf test_mllama test_mllama_seq test_engine test_tokenizer
EXAMPLES = simple two_graphs bench mllama quantize caption
# mllama-server's end-to-end tests: Python scripts (tests/NAME.py) that drive it with the official
# openai and ollama clients (Linux only; make test-full and make test-server).
SERVER_TESTS = server_test server_haproxy_test
PYTHON3 ?= python3

B = build

.PHONY: all help header check-header test test-full test-tsan test-server server-tests py-tests unit-tests asan-tests tsan-tests compile-tests cuda cuda-if-available examples demo bench fuzz clean \
        test-windows test-arm64 windows arm64 gpu-bundle gpu-bundle-mock

all: examples

help:
	@echo "make test      the quick suite: header check, compile checks at -O0 (C99 gcc and clang, C++,"
	@echo "               twice, static, MMS_NO_*), every test built and run natively; ends with 'N passed, N failed, N skipped'"
	@echo "               one test: make build/tests/test_text && build/tests/test_text; one case: MMS_TEST_CASE=part_of_its_name"
	@echo "make test-full what CI runs: the same (compile checks at -O2), mllama-server with the official clients, then every test again under ASan+UBSan, the TSan tests,"
	@echo "               and with nvcc the CUDA targets and their tests (host emulation and the mock runtime)"
	@echo "make test-server  mllama-server driven by the official openai and ollama clients and behind HAProxy (part of make test-full)"
	@echo "make test-tsan the tests that share a model between threads, under ThreadSanitizer (part of make test-full)"
	@echo "make examples  build examples/ into build/"
	@echo "make demo      the main job: the bundled Llama 3.2 Vision demo model describes examples/images/"
	@echo "make bench     build and run the CPU benchmarks"
	@echo "make cuda      build the CUDA backend and its tests with nvcc (CUDA_ARCHS='80 90')"
	@echo "make gpu-bundle  build/gpu-bundle: what tools/gpu_check.sh runs on a bare GPU machine (BUNDLE_ARCHS=90); gpu-bundle-mock: the same on the mock runtime"
	@echo "make test-windows  the tests and examples built with MinGW-w64, the tests run under Wine"
	@echo "make test-arm64    the tests and examples built for 64-bit ARM Linux, run under QEMU (every kernel set)"
	@echo "make fuzz      fuzz the GGUF, JSON and safetensors readers and the server's request parsing with libFuzzer, FUZZ_SECONDS (60) each, seeded from tests/fuzz/corpus-*"
	@echo "make header    regenerate mmsched.h from src/"

header:
	tools/amalgamate.sh

check-header:
	@tools/amalgamate.sh --check

$(B) $(B)/tests $(B)/tests-asan $(B)/tests-tsan $(B)/cuda $(B)/asan $(B)/tsan $(B)/lib:
	@mkdir -p $@

# -- tests ------------------------------------------------------------------------------------------
# Three builds of the tests: normal (build/tests), ASan+UBSan (build/tests-asan, the examples they
# run in build/asan) and ThreadSanitizer (build/tests-tsan). Each build compiles the implementation
# once, into build/lib/mmsched-FLAVOUR.o, and links the tests against it: -DMMSCHED_IMPL_INCLUDED
# makes the test's own #define MMSCHED_IMPLEMENTATION emit nothing (the guard in src/base/config.c).

LINKED_TESTS = $(filter-out $(SELF_CONTAINED_TESTS),$(TESTS))
TEST_DEPS    = mmsched.h tests/*.h tests/fuzz/*.c examples/reference_graphs.h
LINK_IMPL    = -DMMSCHED_IMPL_INCLUDED

# The library is compiled with stb_image.h included first, as a program that reads picture files
# does (mms_image_load): what links it links Debian's libstb too (LINKED_LIBS).
LIB_FLAGS   = -DMMSCHED_IMPLEMENTATION -include stb/stb_image.h
LINKED_LIBS = -lstb $(LIBS)
$(B)/lib/mmsched-normal.o: mmsched.h | $(B)/lib
	$(CC) $(STD) $(WARN) $(OPT) $(LIB_FLAGS) -x c -c $< -o $@
$(B)/lib/mmsched-asan.o: mmsched.h | $(B)/lib
	$(CC) $(STD) $(WARN) $(SAN) $(LIB_FLAGS) -x c -c $< -o $@
$(B)/lib/mmsched-tsan.o: mmsched.h | $(B)/lib
	$(CC) $(STD) $(WARN) $(TSAN) $(LIB_FLAGS) -x c -c $< -o $@

# The folder of the example programs a test runs ($(PROGRAMS)), set per build.
$(B)/tests/%: PROGRAMS = $(B)
$(B)/tests-asan/%: PROGRAMS = $(B)/asan
FLAGS_test_cli      = -D_POSIX_C_SOURCE=200809L -DCLI='"$(PROGRAMS)/mllama"' -DBATCH='"$(PROGRAMS)/batch"' -DCAPTION='"$(PROGRAMS)/caption"'
FLAGS_test_examples = -D_POSIX_C_SOURCE=200809L -DEXAMPLES='"$(PROGRAMS)"'
FLAGS_test_quantize = -DQUANTIZE='"$(PROGRAMS)/quantize"'
$(B)/tests/test_cli:           $(B)/mllama $(B)/batch $(B)/caption
$(B)/tests-asan/test_cli:      $(B)/asan/mllama $(B)/asan/batch $(B)/asan/caption
$(B)/tests/test_examples:      $(B)/simple $(B)/two_graphs $(B)/bench $(B)/bench_load
$(B)/tests-asan/test_examples: $(B)/asan/simple $(B)/asan/two_graphs $(B)/asan/bench $(B)/asan/bench_load
$(B)/tests/test_quantize:      $(B)/quantize
$(B)/tests-asan/test_quantize: $(B)/asan/quantize
# test_engine compares the engine's answers with the mllama program's (the normal build).
$(B)/tests/test_engine $(B)/tests-asan/test_engine $(B)/tests-tsan/test_engine: $(B)/mllama
# test_server tests mllama-server's parts (examples/server/*.h) and replays the HTTP fuzz corpus.
$(B)/tests/test_server $(B)/tests-asan/test_server: examples/server/*.h

$(addprefix $(B)/tests/,$(LINKED_TESTS)): $(B)/tests/%: tests/%.c $(TEST_DEPS) $(B)/lib/mmsched-normal.o | $(B)/tests
	$(CC) $(STD) $(WARN) $(OPT) -I. $(FLAGS_$*) $(LINK_IMPL) $< $(B)/lib/mmsched-normal.o -o $@ $(LINKED_LIBS)
$(addprefix $(B)/tests-asan/,$(LINKED_TESTS)): $(B)/tests-asan/%: tests/%.c $(TEST_DEPS) $(B)/lib/mmsched-asan.o | $(B)/tests-asan
	$(CC) $(STD) $(WARN) $(SAN) -I. $(FLAGS_$*) $(LINK_IMPL) $< $(B)/lib/mmsched-asan.o -o $@ $(LINKED_LIBS)
$(addprefix $(B)/tests-tsan/,$(LINKED_TESTS)): $(B)/tests-tsan/%: tests/%.c $(TEST_DEPS) $(B)/lib/mmsched-tsan.o | $(B)/tests-tsan
	$(CC) $(STD) $(WARN) $(TSAN) -I. $(FLAGS_$*) $(LINK_IMPL) $< $(B)/lib/mmsched-tsan.o -o $@ $(LINKED_LIBS)
$(addprefix $(B)/tests/,$(SELF_CONTAINED_TESTS)): $(B)/tests/%: tests/%.c $(TEST_DEPS) | $(B)/tests
	$(CC) $(STD) $(WARN) $(OPT) -I. $(FLAGS_$*) $< -o $@ $(LIBS)
$(addprefix $(B)/tests-asan/,$(SELF_CONTAINED_TESTS)): $(B)/tests-asan/%: tests/%.c $(TEST_DEPS) | $(B)/tests-asan
	$(CC) $(STD) $(WARN) $(SAN) -I. $(FLAGS_$*) $< -o $@ $(LIBS)
$(addprefix $(B)/tests-tsan/,$(SELF_CONTAINED_TESTS)): $(B)/tests-tsan/%: tests/%.c $(TEST_DEPS) | $(B)/tests-tsan
	$(CC) $(STD) $(WARN) $(TSAN) -I. $(FLAGS_$*) $< -o $@ $(LIBS)

# The examples the sanitizer build of the tests runs, linked against the sanitizer build of the library.
$(B)/asan/%: examples/%.c mmsched.h examples/*.h $(B)/lib/mmsched-asan.o | $(B)/asan
	$(CC) $(STD) $(WARN) $(SAN) -I. $(FLAGS_$*) $(LINK_IMPL) $< $(B)/lib/mmsched-asan.o -o $@ $(LINKED_LIBS)

# The compile checks: the header as strict C99 (gcc, clang), as C++, included twice, as two static
# copies in one program, with parts left out. They go to CHECKS at CHECK_OPT: build/compile at -O2
# for make test-full; make test builds them at -O0 into build/compile-O0 (what they check does not
# depend on the optimiser; gcc's -O2 warnings come from build/lib/ and the tests in the same run).
CHECKS    ?= $(B)/compile
CHECK_OPT ?= -O2
$(CHECKS):
	@mkdir -p $@
$(CHECKS)/c99_gcc: tests/compile/c99.c mmsched.h | $(CHECKS)
	gcc $(STD) $(WARN) $(CHECK_OPT) $< -o $@ $(LIBS)
$(CHECKS)/c99_clang: tests/compile/c99.c mmsched.h | $(CHECKS)
	@if command -v clang >/dev/null; then echo "clang $(STD) $(WARN) $(CHECK_OPT) $< -o $@"; clang $(STD) $(WARN) $(CHECK_OPT) $< -o $@ $(LIBS); \
	 else echo "SKIP clang not installed"; fi
$(CHECKS)/cpp: tests/compile/cpp.cpp mmsched.h | $(CHECKS)
	$(CXX) -std=c++11 $(WARN) $(CHECK_OPT) $< -o $@ $(LIBS)
$(CHECKS)/twice: tests/compile/twice.c mmsched.h | $(CHECKS)
	$(CC) $(STD) $(WARN) $(CHECK_OPT) $< -o $@ $(LIBS)
$(CHECKS)/static: tests/compile/static_a.c tests/compile/static_b.c mmsched.h | $(CHECKS)
	$(CC) $(STD) $(WARN) $(CHECK_OPT) tests/compile/static_a.c tests/compile/static_b.c -o $@ $(LIBS)

# The header with whole parts left out (MMS_NO_MLLAMA, MMS_NO_TEXT, MMS_NO_GGUF).
$(CHECKS)/no_mllama $(CHECKS)/no_text $(CHECKS)/no_gguf: $(CHECKS)/no_%: tests/compile/parts.c mmsched.h | $(CHECKS)
	$(CC) $(STD) $(WARN) $(CHECK_OPT) -DMMS_NO_$(shell echo $* | tr a-z A-Z) $< -o $@ $(LIBS)

# The manual's struct initialisers, each compiled under the strict flags (tests/compile/manual_inits.sh).
$(CHECKS)/manual_inits.c: src/api/manual.txt src/api/*.h tests/compile/manual_inits.sh | $(CHECKS)
	tests/compile/manual_inits.sh $@
$(CHECKS)/manual_inits: $(CHECKS)/manual_inits.c $(B)/lib/mmsched-normal.o
	$(CC) $(STD) $(WARN) $(CHECK_OPT) $(LINK_IMPL) $< $(B)/lib/mmsched-normal.o -o $@ $(LINKED_LIBS)

compile-tests: $(addprefix $(CHECKS)/,c99_gcc c99_clang cpp twice static no_mllama no_text no_gguf manual_inits)
unit-tests: $(addprefix $(B)/tests/,$(TESTS))
asan-tests: $(addprefix $(B)/tests-asan/,$(TESTS) server_test)
tsan-tests: $(addprefix $(B)/tests-tsan/,$(TSAN_TESTS) server_test)
server-tests: $(addprefix $(B)/tests/,$(SERVER_TESTS))
py-tests: $(addprefix $(B)/tests/,$(PY_TESTS))

# make test and make test-full build on every core (JOBS; make -jN chooses the build's), then run
# JOBS tests at a time (each test's output shown whole, in order). The scalar kernels are tested
# inside test_ops (every case with every kernel set).
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PARALLEL = $(if $(filter -j% --jobserver%,$(MAKEFLAGS)),,-j$(JOBS)) --output-sync=target --no-print-directory

test:
	@$(MAKE) $(PARALLEL) CHECKS=$(B)/compile-O0 CHECK_OPT=-O0 check-header compile-tests unit-tests
	@tests/run.sh -j$(JOBS) $(B)/compile-O0 $(B)/tests

# The CUDA tests' folder is looked for by the shell when the tests run: make expands every line of
# a recipe before it runs the first, and on a clean clone the folder does not exist yet.
test-full:
	@$(MAKE) $(PARALLEL) check-header compile-tests unit-tests server-tests py-tests asan-tests tsan-tests cuda-if-available
	@tests/run.sh -j$(JOBS) $(B)/compile $(B)/tests $(B)/tests-asan $(B)/tests-tsan $$(test -d $(B)/cuda/tests && echo $(B)/cuda/tests)

# mllama-server driven by the official openai and ollama clients (part of make test-full; needs
# python3-venv and the network once, for the venv).
test-server: server-tests
	@tests/run.sh $(addprefix $(B)/tests/,$(SERVER_TESTS))

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
$(W)/mllama.exe $(W)/batch.exe $(W)/caption.exe: $(W)/%.exe: examples/%.c mmsched.h examples/*.h $(W)/windows_stdio.o $(W)/stb_image.o | $(W)/include/stb
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
$(A)/mllama $(A)/batch $(A)/caption: $(A)/%: examples/%.c mmsched.h examples/*.h $(A)/stb_image.o | $(A)
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

# -- the GPU bundle ---------------------------------------------------------------------------------
# make gpu-bundle: one folder, build/gpu-bundle, with everything tools/gpu_check.sh runs on a bare GPU
# machine (nothing is compiled there): the CUDA tests, bench_cuda and the mllama program built for
# BUNDLE_ARCHS (Hopper: H100, H200) with the CUDA runtime linked statically (cuBLAS stays shared: its
# libraries are 600 MB, the toolkit's on the GPU machine), stb_image compiled in here (no libstb
# there), the demo model, the fixture test_cuda reads, the sample pictures and the script.
# make gpu-bundle-mock: the same folder built against the mock CUDA runtime (tests/cuda_mock.h), to
# rehearse the script here (GPU_CHECK_MOCK=1; its figures mean nothing). Each program runs from the
# bundle's root: the tests find tests/fixtures and models/ there as they do in the repository. The
# programs lose their debug information (2.1 MB each instead of 8.7 MB with the device code compressed).
BUNDLE_ARCHS ?= 90
BUNDLE_PROGRAMS = test_cuda test_backend_ops test_sched bench_cuda mllama
BUNDLE_DATA = models/mllama-demo.gguf tests/fixtures/demo/demo-ref.gguf $(wildcard examples/images/*.png examples/images/*.jpg)
# cudart_static opens the driver itself (-ldl, -lrt); the second rpath is where a CUDA toolkit usually is.
CUDA_STATIC_LIBS = -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -lcudart_static -lcublas -ldl -lrt
$(B)/cuda/bundle: | $(B)/cuda
	@mkdir -p $@
$(B)/cuda/bundle/mmsched_cuda.o: CUDA_ARCHS = $(BUNDLE_ARCHS)
# BUNDLE_COMPRESS: the device code 0.4 MB instead of 4.1 MB in each of the five programs (the bundle
# travels with the repository's tree, 64 MiB in all); BUNDLE_COMPRESS=--compress-mode=none if a
# driver cannot load it.
BUNDLE_COMPRESS ?= --compress-mode=size
$(B)/cuda/bundle/mmsched_cuda.o: mmsched_cuda.cu mmsched.h | $(B)/cuda/bundle
	$(NVCC) $(NVCC_FLAGS) $(BUNDLE_COMPRESS) -c $< -o $@
$(B)/cuda/bundle/stb_image.o: $(STB_HEADER) | $(B)/cuda/bundle
	printf '#define STB_IMAGE_IMPLEMENTATION\n#include "%s"\n' $(STB_HEADER) | $(CC) -O2 -w -x c -c - -o $@

# bundle_rules(folder, backend object, link libraries, defines): the programs and data of one bundle.
define bundle_rules
$(1)/bin $(1)/tests/fixtures/demo $(1)/models $(1)/images:
	@mkdir -p $$@
$(1)/bin/test_cuda: tests/test_cuda.c $(2) tests/*.h mmsched.h | $(1)/bin
	$$(CC) $$(STD) $$(WARN) $$(OPT) $(4) -I. $$< $(2) -o $$@ $(3) $$(LIBS)
$(1)/bin/test_backend_ops: tests/test_backend_ops.c $(2) tests/*.h mmsched.h | $(1)/bin
	$$(CC) $$(STD) $$(WARN) $$(OPT) -DMMS_CUDA $(4) -I. $$< $(2) -o $$@ $(3) $$(LIBS)
$(1)/bin/test_sched: tests/test_sched.c $(2) tests/*.h mmsched.h | $(1)/bin
	$$(CC) $$(STD) $$(WARN) $$(OPT) -DSCHED_ON_CUDA $(4) -I. $$< $(2) -o $$@ $(3) $$(LIBS)
$(1)/bin/bench_cuda: examples/bench_cuda.c $(2) examples/*.h mmsched.h | $(1)/bin
	$$(CC) $$(STD) -D_POSIX_C_SOURCE=200809L $$(WARN) $$(OPT) -I. -isystem $$(CUDA_HOME)/include $$< $(2) -o $$@ $(3) $$(LIBS)
$(1)/bin/mllama: examples/mllama.c $(2) $(B)/cuda/bundle/stb_image.o mmsched.h | $(1)/bin
	$$(CC) $$(STD) -D_POSIX_C_SOURCE=200809L -DMMS_CUDA $$(WARN) $$(OPT) -I. $$< $(2) $(B)/cuda/bundle/stb_image.o -o $$@ $(3) $$(LIBS)
$(1)/models/%: models/% | $(1)/models
	cp $$< $$@
$(1)/tests/fixtures/demo/%: tests/fixtures/demo/% | $(1)/tests/fixtures/demo
	cp $$< $$@
$(1)/images/%: examples/images/% | $(1)/images
	cp $$< $$@
$(1)/gpu_check.sh: tools/gpu_check.sh
	@mkdir -p $(1) && cp $$< $$@
$(1)/ok: $(addprefix $(1)/bin/,$(BUNDLE_PROGRAMS)) $(1)/gpu_check.sh $(1)/models/mllama-demo.gguf $(1)/tests/fixtures/demo/demo-ref.gguf \
         $(patsubst examples/images/%,$(1)/images/%,$(filter examples/images/%,$(BUNDLE_DATA)))
	strip --strip-debug $(1)/bin/*
	@tools/gpu_bundle_manifest.sh $(1) > $(1)/MANIFEST && touch $$@ && cat $(1)/MANIFEST
endef
$(eval $(call bundle_rules,$(B)/gpu-bundle,$(B)/cuda/bundle/mmsched_cuda.o,$(CUDA_STATIC_LIBS),))
$(eval $(call bundle_rules,$(B)/gpu-bundle-mock,$(CUDA_MOCK),$(CUDA_MOCK_LIBS),-DMMS_CUDA_MOCK))

gpu-bundle: $(B)/gpu-bundle/ok
gpu-bundle-mock: $(B)/gpu-bundle-mock/ok

# -- examples ---------------------------------------------------------------------------------------

# Each example is one file that compiles the implementation in, as the manual says to use it
# (cc -O2 -I. examples/simple.c -o simple -lm -lpthread builds one alone); here they link the library
# compiled once, as the tests do (the same code, one compile instead of one each).
# Pictures are decoded with stb_image from Debian's libstb-dev (mms_image_load; see LIB_FLAGS).
FLAGS_mllama = -D_POSIX_C_SOURCE=200809L
# bench_load (the thread count under competing load) is POSIX (fork): not among the cross-built EXAMPLES.
FLAGS_bench_load = -D_POSIX_C_SOURCE=200809L
$(B)/%: examples/%.c mmsched.h examples/*.h $(B)/lib/mmsched-normal.o | $(B)
	$(CC) $(STD) $(WARN) $(OPT) -I. $(FLAGS_$*) $(LINK_IMPL) $< $(B)/lib/mmsched-normal.o -o $@ $(LINKED_LIBS)

examples: $(addprefix $(B)/,$(EXAMPLES)) $(B)/batch $(B)/bench_load $(B)/bench_constrain $(B)/mllama-server

# mllama-server: POSIX sockets and threads, linked like the other programs (the sanitizer builds
# for server_test under asan-tests and tsan-tests).
SERVER_SRC = examples/server.c examples/server/*.h mmsched.h
$(B)/mllama-server: $(SERVER_SRC) $(B)/lib/mmsched-normal.o | $(B)
	$(CC) $(STD) -D_POSIX_C_SOURCE=200809L $(WARN) $(OPT) -I. $(LINK_IMPL) $< $(B)/lib/mmsched-normal.o -o $@ $(LINKED_LIBS)
$(B)/asan/mllama-server: $(SERVER_SRC) $(B)/lib/mmsched-asan.o | $(B)/asan
	$(CC) $(STD) -D_POSIX_C_SOURCE=200809L $(WARN) $(SAN) -I. $(LINK_IMPL) $< $(B)/lib/mmsched-asan.o -o $@ $(LINKED_LIBS)
$(B)/tsan/mllama-server: $(SERVER_SRC) $(B)/lib/mmsched-tsan.o | $(B)/tsan
	$(CC) $(STD) -D_POSIX_C_SOURCE=200809L $(WARN) $(TSAN) -I. $(LINK_IMPL) $< $(B)/lib/mmsched-tsan.o -o $@ $(LINKED_LIBS)

# The server's tests in Python drive it with the official openai and ollama clients, pinned in
# tests/requirements-server.txt and installed in a venv under build/ (a failed install fails the
# build: CI must not skip them). Each test is a wrapper that runs its script with the venv's Python;
# server_test runs again against the ASan+UBSan and the ThreadSanitizer builds of the server (a
# report makes the server exit non-zero, which the test counts as a failure).
$(B)/venv/ok: tests/requirements-server.txt | $(B)
	$(PYTHON3) -m venv $(B)/venv && $(B)/venv/bin/pip install -q -r $< && touch $@
$(addprefix $(B)/tests/,$(SERVER_TESTS)): $(B)/tests/%: tests/%.py tests/server_test.py $(B)/venv/ok $(B)/mllama-server $(B)/mllama $(B)/quantize | $(B)/tests
	printf '#!/bin/sh\nexec "$(CURDIR)/$(B)/venv/bin/python" "$(CURDIR)/tests/$*.py" "$$@"\n' > $@ && chmod +x $@
$(B)/tests-asan/server_test $(B)/tests-tsan/server_test: $(B)/tests-%/server_test: tests/server_test.py $(B)/venv/ok $(B)/%/mllama-server $(B)/mllama $(B)/quantize | $(B)/tests-%
	printf '#!/bin/sh\nMLLAMA_SERVER="$(CURDIR)/$(B)/$*/mllama-server" exec "$(CURDIR)/$(B)/venv/bin/python" "$(CURDIR)/tests/server_test.py" "$$@"\n' > $@ && chmod +x $@

# Tests in Python on the same venv that check the library's outputs with someone else's code:
# constrain_check validates the documents of test_constrain's constrained walks with jsonschema.
PY_TESTS = constrain_check
$(B)/tests/constrain_check: tests/constrain_check.py $(B)/venv/ok $(B)/tests/test_constrain | $(B)/tests
	printf '#!/bin/sh\nexec "$(CURDIR)/$(B)/venv/bin/python" "$(CURDIR)/tests/constrain_check.py" "$(CURDIR)/$(B)/tests/test_constrain" "$$@"\n' > $@ && chmod +x $@

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

$(B)/fuzz_schema: tests/fuzz/fuzz_schema.c mmsched.h | $(B)
	clang -g -O1 -fsanitize=fuzzer,address,undefined -I. $< -o $@ -lm -lpthread

$(B)/fuzz_http: tests/fuzz/fuzz_http.c examples/server/*.h mmsched.h | $(B)
	clang -g -O1 -fsanitize=fuzzer,address,undefined -DFUZZ_HTTP_MAIN -I. $< -o $@ -lm -lpthread

# The GGUF, JSON and safetensors readers and mllama-server's request parsing, FUZZ_SECONDS each; the
# corpora are replayed by test_gguf, test_formats and test_server.
fuzz: $(B)/fuzz_gguf $(B)/fuzz_json $(B)/fuzz_safetensors $(B)/fuzz_http $(B)/fuzz_schema
	@mkdir -p $(B)/fuzz-corpus $(B)/fuzz-json $(B)/fuzz-st $(B)/fuzz-http $(B)/fuzz-schema && cp -r tests/fuzz/corpus-gguf/. $(B)/fuzz-corpus/
	$(B)/fuzz_gguf -max_total_time=$(FUZZ_SECONDS) -max_len=4096 $(B)/fuzz-corpus
	$(B)/fuzz_json -max_total_time=$(FUZZ_SECONDS) -max_len=4096 $(B)/fuzz-json tests/fuzz/corpus-json
	$(B)/fuzz_safetensors -max_total_time=$(FUZZ_SECONDS) -max_len=4096 $(B)/fuzz-st tests/fuzz/corpus-safetensors
	$(B)/fuzz_http -max_total_time=$(FUZZ_SECONDS) -max_len=8192 $(B)/fuzz-http tests/fuzz/corpus-http
	$(B)/fuzz_schema -max_total_time=$(FUZZ_SECONDS) -max_len=4096 $(B)/fuzz-schema tests/fuzz/corpus-schema

clean:
	rm -rf $(B)

# The host's share of an mllama decode step at 11B shapes, on the mock CUDA runtime and on the CPU
# (tests/bench_decode_host.c): a bench, not a test, so it is not under build/cuda/tests.
$(B)/cuda/bench_decode_host: tests/bench_decode_host.c $(CUDA_MOCK) examples/random_mllama.h tests/*.h mmsched.h | $(B)/cuda
	$(CC) $(STD) $(WARN) $(OPT) -DMMS_CUDA_MOCK -I. $< $(CUDA_MOCK) -o $@ $(CUDA_MOCK_LIBS) $(LIBS)
