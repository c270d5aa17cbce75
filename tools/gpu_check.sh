#!/usr/bin/env bash
# One prepared run on a machine with an NVIDIA GPU: builds the CUDA targets, runs the CUDA tests
# (op comparison against the CPU, the scheduler's tests on CPU+GPU, the backend's own tests, the
# kernels' element logic), the mllama demo model end to end on the GPU against the CPU, and the GPU
# benchmarks. Writes the full log to $OUT/gpu_check.log (or build/gpu_check.log) and ends with a
# short summary table, also in $OUT/gpu_check_summary.txt.
#   CUDA_ARCHS="90" tools/gpu_check.sh      (default: 80 90)
set -u
cd "$(dirname "$0")/.."
dir=${OUT:-build}
mkdir -p "$dir"
log=$dir/gpu_check.log
summary=$dir/gpu_check_summary.txt
: > "$log"
: > "$summary"
run() {   # run NAME COMMAND...: log everything, note PASS/FAIL with the time taken
  local name=$1; shift
  local t0=$(date +%s)
  echo "== $name: $*" >> "$log"
  "$@" >> "$log" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then note "PASS  $name ($(( $(date +%s) - t0 )) s)"; else note "FAIL  $name ($(( $(date +%s) - t0 )) s, status $rc)"; fi
}

failed=0
note() { echo "$*" | tee -a "$summary"; case "$*" in FAIL*) failed=1 ;; esac; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "nvidia-smi: none"; nvcc --version | tail -n 1; } 2>&1 | tee -a "$log" | sed 's/^/gpu: /' >> "$summary"
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  note "FAIL  no usable NVIDIA GPU (nvidia-smi -L lists none): nothing was checked"
  exit 1
fi
run "build CUDA targets (CUDA_ARCHS=${CUDA_ARCHS:-80 90})" make -j"$(nproc)" cuda examples ${CUDA_ARCHS:+CUDA_ARCHS="$CUDA_ARCHS"}
if ! build/cuda/tests/test_cuda 2>&1 | grep -q '^[1-9][0-9]* CUDA device'; then
  note "FAIL  the CUDA runtime sees no device: $(build/cuda/tests/test_cuda 2>&1 | head -n 1)"
  exit 1
fi
# test_cuda_kernels, test_sched_host and the *_mock tests run on the host (make test does them).
for t in test_cuda test_backend_ops test_sched; do
  run "$t" env MMS_TEST_VERBOSE=1 build/cuda/tests/$t
  grep -h -E "^(SKIP|    [0-9]+ cases on|    [0-9]+ random graphs|[0-9]+ passed)" <(sed -n "/== $t:/,/^== /p" "$log") | sed "s/^/      $t: /" >> "$summary"
done

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
run "mllama with timings (GPU)" build/cuda/mllama -m models/mllama-demo.gguf --image examples/images/circle.png -p "Describe this image." --n-gpu-layers 99 --vision-gpu

run "bench_cuda" build/cuda/bench_cuda --reps 20
grep '^BENCH ' "$log" | sed 's/^BENCH /bench: /' >> "$summary"
echo "---- summary ($summary; full log $log)"
cat "$summary"
exit $failed
