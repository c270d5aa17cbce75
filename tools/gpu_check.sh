#!/usr/bin/env bash
# One prepared run on a machine with an NVIDIA GPU, about 8 minutes on an H200 (each step has a
# time limit; the log says where the time went). It fails (exit 1) when no GPU is usable, and when
# any step fails:
#   1. builds the CUDA targets for this GPU's architecture only (CUDA_ARCHS to override);
#   2. the CUDA tests on the device: test_cuda (buffers, copies, events, faults, graphs, the demo
#      model against the CPU), test_backend_ops (every op case against the CPU), test_sched (the
#      scheduler's tests with the GPU as the second backend). The host-only tests (test_cuda_kernels,
#      test_sched_host, the *_mock tests) are make test's, not run here;
#   3. compute-sanitizer: memcheck over test_cuda and test_backend_ops, racecheck (shared memory
#      hazards) over test_backend_ops;
#   4. the mllama program: the demo model's captions on the GPU equal the CPU's;
#   5. build/cuda/bench_cuda: cuBLAS 4096^3 F16 next to the backend's, flash attention, copies,
#      decode GEMV in GB/s against the device's peak; then Llama 3.2 11B Vision shapes with random
#      weights, entirely on the GPU, f16 and Q4_K_M-mix: decode tok/s and 4-tile encode ms against
#      the targets (TARGET lines: f16 >= 160 tok/s, Q4_K_M >= 500 tok/s, encode <= 50 ms).
# Writes the full log to $OUT/gpu_check.log (or build/gpu_check.log) and a summary, also in
# $OUT/gpu_check_summary.txt. The random models (about 21 GB and 7 GB) are written to build/.
#   tools/gpu_check.sh            CUDA_ARCHS="90" tools/gpu_check.sh
set -u
cd "$(dirname "$0")/.."
dir=${OUT:-build}
mkdir -p "$dir" build
log=$dir/gpu_check.log
summary=$dir/gpu_check_summary.txt
: > "$log"
: > "$summary"
failed=0
start=$(date +%s)
note() { echo "$*" | tee -a "$summary"; case "$*" in FAIL*) failed=1 ;; esac; }
run() {   # run NAME SECONDS COMMAND...: log everything, note PASS/FAIL with the time taken
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  echo "== $name: $* (limit ${limit} s, at $(( t0 - start )) s)" >> "$log"
  timeout "$limit" "$@" >> "$log" 2>&1
  local rc=$?
  local took=$(( $(date +%s) - t0 ))
  if [ $rc -eq 0 ]; then note "PASS  $name ($took s)"
  elif [ $rc -eq 124 ]; then note "FAIL  $name (timed out after $limit s)"
  else note "FAIL  $name ($took s, status $rc)"; fi
  return $rc
}

{ nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader || echo "nvidia-smi: none"; nvcc --version | tail -n 1; } 2>&1 | tee -a "$log" | sed 's/^/gpu: /' >> "$summary"
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  note "FAIL  no usable NVIDIA GPU (nvidia-smi -L lists none): nothing was checked"
  exit 1
fi
archs=${CUDA_ARCHS:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')}
targets="build/cuda/tests/test_cuda build/cuda/tests/test_backend_ops build/cuda/tests/test_sched build/cuda/mllama build/cuda/bench_cuda build/mllama"
run "build (CUDA_ARCHS=$archs)" 300 make -j"$(nproc)" CUDA_ARCHS="$archs" $targets || { note "FAIL  nothing else runs without the build"; exit 1; }
if ! build/cuda/tests/test_cuda 2>&1 | grep -q '^[1-9][0-9]* CUDA device'; then
  note "FAIL  the CUDA runtime sees no device: $(build/cuda/tests/test_cuda 2>&1 | head -n 1)"
  exit 1
fi

for t in test_cuda test_backend_ops test_sched; do
  run "$t" 180 env MMS_TEST_VERBOSE=1 build/cuda/tests/$t
  grep -h -E "^(SKIP|    [0-9]+ cases on|    [0-9]+ random graphs|    demo model|    decode|[0-9]+ passed)" <(sed -n "/== $t:/,/^== /p" "$log") | sed "s/^/      $t: /" >> "$summary"
done

sanitizer=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
if [ -x "$sanitizer" ]; then
  run "compute-sanitizer memcheck test_cuda" 150 "$sanitizer" --tool memcheck --error-exitcode 1 --leak-check no build/cuda/tests/test_cuda
  run "compute-sanitizer memcheck test_backend_ops" 150 "$sanitizer" --tool memcheck --error-exitcode 1 build/cuda/tests/test_backend_ops
  run "compute-sanitizer racecheck test_backend_ops" 180 "$sanitizer" --tool racecheck --error-exitcode 1 build/cuda/tests/test_backend_ops
else
  note "FAIL  compute-sanitizer not found (it comes with the CUDA toolkit)"
fi

# mllama: the bundled demo model's captions with every layer and the vision tower on the GPU must
# equal the CPU's (greedy decoding; the demo's logit margins are wide, see models/README).
ok=0; total=0
for img in examples/images/*.png examples/images/*.jpg; do
  total=$((total + 1))
  c=$(build/mllama -m models/mllama-demo.gguf --image "$img" -p "Describe this image." -q 2>>"$log")
  g=$(build/cuda/mllama -m models/mllama-demo.gguf --image "$img" -p "Describe this image." -q --n-gpu-layers 99 --vision-gpu 2>>"$log")
  echo "mllama $img: cpu '$c' gpu '$g'" >> "$log"
  [ -n "$c" ] && [ "$c" = "$g" ] && ok=$((ok + 1))
done
if [ "$ok" -eq "$total" ]; then note "PASS  mllama demo on the GPU: $ok/$total captions equal the CPU's"; else note "FAIL  mllama demo on the GPU: $ok/$total captions equal the CPU's"; fi

run "bench_cuda (kernels)" 150 build/cuda/bench_cuda --reps 10
run "bench_cuda --mllama f16 (11B shapes)" 300 build/cuda/bench_cuda --skip-micro --mllama f16
run "bench_cuda --mllama q4_k_m (11B shapes)" 200 build/cuda/bench_cuda --skip-micro --mllama q4_k_m
grep -E '^(BENCH |TARGET |    the backend at |    [0-9]+% of the peak)' "$log" | sed 's/^/bench: /' >> "$summary"
note "total $(( $(date +%s) - start )) s"
echo "---- summary ($summary; full log $log)"
cat "$summary"
exit $failed
