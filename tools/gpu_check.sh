#!/usr/bin/env bash
# The one prepared run on a machine with an NVIDIA GPU. Nothing is compiled there: `make gpu-bundle`
# builds, on the build machine, build/gpu-bundle (the CUDA tests, bench_cuda and the mllama program
# for Hopper, sm_90, with the CUDA runtime linked in statically and stb_image compiled in; the demo
# model, its reference fixture, the sample pictures and this script; about 16 MiB). Only cuBLAS
# (libcublas.so.13 and libcublasLt.so.13, CUDA 13) and a driver for CUDA 13 must be on the GPU machine;
# the script looks for cuBLAS beside a CUDA toolkit or in a Python CUDA package when the loader does not
# find it. Run it from the bundle (copy build/gpu-bundle to the GPU machine, e.g. as a carried path):
#   build/gpu-bundle/gpu_check.sh               (or tools/gpu_check.sh, which finds build/gpu-bundle)
# Steps, in this order, each under `timeout` and all under one deadline, GPU_CHECK_SECONDS (420 s):
# a step that would start past it is NOT RUN (never counted as a pass). Estimated seconds on a
# 16-core H100/H200 machine (ESTIMATES, from the work each step does; no GPU run has timed them yet):
#   figures      bench_kernels    ~30 s  4096^3 F16 GEMM, backend against raw cuBLAS; flash attention;
#                                        copies; decode GEMV GB/s per weight type
#                decode_f16       ~60 s  Llama 3.2 11B Vision shapes, random F16 weights (a 21 GB GGUF
#                                        written to /dev/shm, RAM, when it has room, else to disk:
#                                        the loader takes a path only), all on the GPU: 4-tile encode
#                                        ms, decode tok/s
#                decode_q4_k_m    ~40 s  the same with the text matrices in the Q4_K_M mix (7 GB)
#   correctness  test_cuda        ~30 s  buffers, copies, events, faults, graphs, the demo model vs the CPU
#                test_backend_ops ~30 s  every op case on the GPU against the CPU
#                test_sched       ~30 s  the scheduler's tests with the GPU as the second backend
#                demo_captions    ~20 s  bin/mllama: the demo model's captions with every layer and the
#                                        vision tower on the GPU equal the CPU's, for every sample picture
#   sanitizer    memcheck_ops     ~45 s  compute-sanitizer memcheck, test_backend_ops on a subset of ops
#                memcheck_demo    ~45 s  memcheck, test_cuda's demo model case
#                racecheck_ops    ~60 s  racecheck (shared memory hazards), a subset of ops
# Then a summary: each step's status (PASS, FAIL, TIMEOUT, NOT RUN with why) and seconds, the
# figures against targets scaled to the GPU that nvidia-smi names (decode is bound by memory
# bandwidth: the H200 targets, F16 >= 160 tok/s and Q4_K_M >= 500 tok/s, times 3.35/4.8 on an H100
# SXM; the 4-tile encode <= 50 ms is compute-bound: the same GH100 compute, not scaled).
# Before the steps, bench_cuda starts the backend once: when the CUDA runtime cannot use the GPU (a
# driver older than CUDA 13) the run ends there with its message, since every device case would skip.
# Exit status: 0 every step passed; 1 a step failed or timed out, or no GPU, no usable runtime or no
# bundle; 3 nothing failed but a step was NOT RUN.
# The log goes to $OUT/gpu_check.log and the summary to $OUT/gpu_check_summary.txt ($OUT when set,
# else the bundle's out/).
# Variables: GPU_CHECK_SECONDS (420), GPU_CHECK_SKIP="step step" (left out, NOT RUN),
# GPU_CHECK_MODEL_DIR (where the random 11B models go), GPU_CHECK_MOCK=1 (rehearsal on the build
# machine: build/gpu-bundle-mock, the programs linked with the mock CUDA runtime of tests/cuda_mock.h;
# the 11B figures at 4 text layers and 1 + 1 vision layers with the kernels skipped, MEANINGLESS as
# speed and labelled so; each step's limit times GPU_CHECK_MOCK_SLOWER (4): the host emulation is
# slow; the demo compares one picture; the sanitizer steps run their subsets without
# compute-sanitizer and count as NOT RUN).
# A whole rehearsal: make gpu-bundle-mock && GPU_CHECK_MOCK=1 GPU_CHECK_SECONDS=3600 tools/gpu_check.sh
set -u
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
PROMPT="Describe this image."

# The demo step's body, run by the script itself under `timeout` from the bundle's root.
# --demo-captions N: the first N pictures only.
if [ "${1:-}" = "--demo-captions" ]; then
    ok=0; total=0
    for img in $(ls images/* | head -n "${2:-1000}"); do
        total=$((total + 1))
        c=$(bin/mllama -m models/mllama-demo.gguf --image "$img" -p "$PROMPT" -q)
        g=$(bin/mllama -m models/mllama-demo.gguf --image "$img" -p "$PROMPT" -q --n-gpu-layers 99 --vision-gpu)
        if [ -n "$c" ] && [ "$c" = "$g" ]; then ok=$((ok + 1)); echo "same  $img: '$c'"
        else echo "DIFFERENT  $img: cpu '$c' gpu '$g'"; fi
    done
    echo "demo captions: $ok/$total equal the CPU's"
    [ "$total" -gt 0 ] && [ "$ok" -eq "$total" ]
    exit
fi

mock=${GPU_CHECK_MOCK:-0}
if [ -x "$(dirname "$self")/bin/test_cuda" ]; then bundle=$(dirname "$self")
elif [ "$mock" = 1 ]; then bundle=$(dirname "$self")/../build/gpu-bundle-mock
else bundle=$(dirname "$self")/../build/gpu-bundle; fi
out=${OUT:-$bundle/out}
mkdir -p "$out"
log=$out/gpu_check.log
summary=$out/gpu_check_summary.txt
: > "$log"
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }
if [ ! -x "$bundle/bin/test_cuda" ]; then
    say "FAIL  no bundle at $bundle: build it on the build machine with make gpu-bundle$([ "$mock" = 1 ] && echo -mock), then run its gpu_check.sh"
    exit 1
fi
cd "$bundle" || exit 1
mkdir -p build                       # test_sched writes its dump files to build/
total_s=${GPU_CHECK_SECONDS:-420}
start=$(date +%s)
left() { echo $(( start + total_s - $(date +%s) )); }

steps=(); statuses=(); seconds=(); details=()
record() { steps+=("$1"); statuses+=("$2"); seconds+=("$3"); details+=("$4"); printf '%-8s %4s s  %-17s %s\n' "$2" "$3" "$1" "$4" | tee -a "$log"; }

# step NAME LIMIT KIND COMMAND...: KIND test (the "N passed, N failed, N skipped" line decides:
# a test that skipped everything was NOT RUN), bench (its BENCH lines must appear), sanitizer.
step() {
    local name=$1 limit=$2 kind=$3; shift 3
    local l t0 rc took tail passed failed skipped text="" cut=""
    case " ${GPU_CHECK_SKIP:-} " in *" $name "*) record "$name" "NOT RUN" 0 "left out by GPU_CHECK_SKIP"; return ;; esac
    l=$(left)
    if [ "$l" -lt 10 ]; then record "$name" "NOT RUN" 0 "past the ${total_s}-second deadline"; return; fi
    [ "$mock" = 1 ] && limit=$(( limit * ${GPU_CHECK_MOCK_SLOWER:-4} ))
    [ "$limit" -gt "$l" ] && { limit=$l; cut=", the deadline"; }
    t0=$(date +%s)
    echo "== $name: $* (limit $limit s, at $(( t0 - start )) s)" >> "$log"
    local tmp; tmp=$(mktemp)
    timeout -k 5 "$limit" "$@" > "$tmp" 2>&1
    rc=$?
    took=$(( $(date +%s) - t0 ))
    cat "$tmp" >> "$log"
    tail=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped' "$tmp" | tail -n 1)
    case "$kind" in
        test|sanitizer)
            if [ -n "$tail" ]; then
                read -r passed _ failed _ skipped _ <<< "$tail"
                text="$passed passed, $failed failed, $skipped skipped"
                [ "$skipped" -gt 0 ] && text="$text ($(grep -h '^SKIP' "$tmp" | head -n 3 | tr '\n' ';'))"
            fi ;;
        bench) text=$(grep -c '^BENCH ' "$tmp")" BENCH lines$(grep -h -m 1 '^SKIP' "$tmp" | sed 's/^/; /')" ;;
    esac
    [ "$kind" = sanitizer ] && text="$text$(grep -h -m 1 -E 'ERROR SUMMARY' "$tmp" | sed 's/^========= */; /')"
    [ "$name" = demo_captions ] && text=$(grep -h '^demo captions' "$tmp" || echo "$(grep -c '^same' "$tmp") same, $(grep -c '^DIFFERENT' "$tmp") different when it stopped")
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then record "$name" TIMEOUT "$took" "stopped at $limit s$cut; $text"
    elif [ $rc -ne 0 ]; then record "$name" FAIL "$took" "exit status $rc; $text; $(grep -h -m 2 -E '^(FAIL|bench_cuda:|=+ (Invalid|Race|Program hit|Uninitialized|Barrier))' "$tmp" | tr '\n' ' ')"
    elif [ "$kind" != bench ] && [ "$name" != demo_captions ] && [ -z "$tail" ]; then record "$name" FAIL "$took" "no 'N passed, N failed, N skipped' line"
    elif [ -n "$tail" ] && [ "$failed" -gt 0 ]; then record "$name" FAIL "$took" "$text"
    elif [ -n "$tail" ] && [ "${passed:-0}" -eq 0 ]; then record "$name" "NOT RUN" "$took" "everything skipped: $text"
    elif [ "$kind" = bench ] && ! grep -q '^BENCH ' "$tmp"; then record "$name" FAIL "$took" "no BENCH line"
    elif [ "$kind" = sanitizer ] && [ "$mock" = 1 ]; then record "$name" "NOT RUN" "$took" "mock: no compute-sanitizer without a GPU; the subset alone ran: $text"
    else record "$name" PASS "$took" "$text"; fi
    rm -f "$tmp"
}

{
    echo "gpu_check.sh at $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), $(nproc) cores, deadline ${total_s} s"
    cat MANIFEST 2>/dev/null
} >> "$log"
if [ "$mock" = 1 ]; then
    gpu_name="mock (host emulation of the CUDA runtime; no GPU)"
    say "MOCK REHEARSAL: the programs run the CUDA backend on the host; every figure below is MEANINGLESS as speed"
else
    gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
    nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader >> "$log" 2>&1
    if [ -z "$gpu_name" ]; then say "FAIL  no usable NVIDIA GPU (nvidia-smi names none): nothing was checked"; exit 1; fi
    # cuBLAS is the one CUDA library the programs load: find it when the loader does not.
    if ldd bin/test_cuda 2>&1 | grep -q 'libcublas.*not found'; then
        lib=$( { ls -d /usr/local/cuda*/lib64/libcublas.so.13 /usr/local/cuda*/targets/*/lib/libcublas.so.13 2>/dev/null;
                 timeout 30 find / -xdev -name libcublas.so.13 -path '*nvidia*' 2>/dev/null; } | head -n 1)
        if [ -n "$lib" ]; then LD_LIBRARY_PATH=$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}; export LD_LIBRARY_PATH; echo "cuBLAS from $(dirname "$lib")" >> "$log"
        else say "FAIL  libcublas.so.13 (CUDA 13's cuBLAS) is on neither the loader's path nor beside a CUDA toolkit here"; fi
    fi
    ldd bin/test_cuda >> "$log" 2>&1
    # The CUDA runtime must see the device (a driver older than CUDA 13's says so here), else every
    # device case would print SKIP and the steps would measure and check nothing.
    seen=$(timeout 60 bin/bench_cuda --skip-micro 2>&1)
    if [ $? -ne 0 ] || echo "$seen" | grep -q '^SKIP'; then
        say "FAIL  the CUDA runtime cannot use the GPU: $(echo "$seen" | grep -m 1 -E 'SKIP|error|rror' || echo "$seen" | tail -n 1)"
        exit 1
    fi
fi
say "device: $gpu_name"

# The device's memory bandwidth (GB/s) from its name; the decode targets scale with it.
case "$gpu_name" in
    *H200*)      peak=4800 ;;
    *H100*PCIe*) peak=2000 ;;
    *H100*NVL*)  peak=3900 ;;
    *H100*)      peak=3350 ;;
    *)           peak= ;;
esac

mdir=${GPU_CHECK_MODEL_DIR:-}
if [ -z "$mdir" ]; then
    if [ "$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 { print $4 }')" -gt 24000000 ] 2>/dev/null; then mdir=/dev/shm/mmsched-gpu-check; else mdir=build; fi
fi
mkdir -p "$mdir"
if [ "$mock" = 1 ]; then
    mock_note="mock: the bench's own micro cases call the CUDA runtime and cuBLAS directly, which the mock does not replace"
    record bench_kernels "NOT RUN" 0 "$mock_note"
    small="--text-layers 4 --vision-layers 1 --decode-tokens 2"    # the loader wants a cross layer: the 4th
    step decode_f16 240 bench env MMS_MOCK_SKIP_KERNELS=1 bin/bench_cuda --skip-micro --mllama f16 $small --model-dir "$mdir"
    rm -f "$mdir"/bench-mllama-11b-*.gguf
    step decode_q4_k_m 240 bench env MMS_MOCK_SKIP_KERNELS=1 bin/bench_cuda --skip-micro --mllama q4_k_m $small --model-dir "$mdir"
else
    step bench_kernels 90 bench bin/bench_cuda --reps 10
    step decode_f16 150 bench bin/bench_cuda --skip-micro --mllama f16 --model-dir "$mdir"
    [ "$mdir" != build ] && rm -f "$mdir"/bench-mllama-11b-*.gguf      # RAM, not disk: give it back
    step decode_q4_k_m 100 bench bin/bench_cuda --skip-micro --mllama q4_k_m --model-dir "$mdir"
fi
[ "$mdir" != build ] && rm -f "$mdir"/bench-mllama-11b-*.gguf && rmdir "$mdir" 2>/dev/null

step test_cuda 120 test env MMS_TEST_VERBOSE=1 bin/test_cuda
step test_backend_ops 120 test env MMS_TEST_VERBOSE=1 bin/test_backend_ops
step test_sched 120 test bin/test_sched
# (on the mock one picture: the vision tower's host emulation takes minutes a picture)
step demo_captions 90 demo "$self" --demo-captions "$([ "$mock" = 1 ] && echo 1 || echo 1000)"

# compute-sanitizer on a short subset: the decode GEMVs, attention, reductions and row gathers
# (MMS_TEST_OPS selects op cases by their description), and the demo model's whole graph.
# (memcheck: 40 of the 138 cases; racecheck: 23)
ops_subset='MUL_MAT q4_k|MUL_MAT q6_k|FLASH_ATTN|SOFT_MAX|RMS_NORM|GET_ROWS'
race_subset='FLASH_ATTN|SOFT_MAX|MUL_MAT q4_k'
san=()
if [ "$mock" != 1 ]; then
    sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n 1)
    if [ -z "$sanitizer" ]; then
        for s in memcheck_ops memcheck_demo racecheck_ops; do record $s "NOT RUN" 0 "compute-sanitizer not found (it comes with the CUDA toolkit)"; done
    else san=("$sanitizer" --error-exitcode 1); fi
fi
if [ "$mock" = 1 ] || [ ${#san[@]} -gt 0 ]; then
    step memcheck_ops 90 sanitizer env MMS_TEST_VERBOSE=1 MMS_TEST_OPS="$ops_subset" ${san[@]+"${san[@]}"} ${san[@]+--tool memcheck} bin/test_backend_ops
    step memcheck_demo 90 sanitizer env MMS_TEST_CASE=demo_model ${san[@]+"${san[@]}"} ${san[@]+--tool memcheck --leak-check no} bin/test_cuda
    step racecheck_ops 90 sanitizer env MMS_TEST_VERBOSE=1 MMS_TEST_OPS="$race_subset" ${san[@]+"${san[@]}"} ${san[@]+--tool racecheck} bin/test_backend_ops
fi

# -- the summary ---------------------------------------------------------------------------------
n_pass=0; n_fail=0; n_not=0
{
    echo
    echo "step               status     seconds  detail"
    for i in "${!steps[@]}"; do
        printf '%-18s %-9s %7s  %s\n' "${steps[$i]}" "${statuses[$i]}" "${seconds[$i]}" "${details[$i]}"
    done
} | tee -a "$summary"
for i in "${!steps[@]}"; do
    case "${statuses[$i]}" in PASS) n_pass=$((n_pass + 1)) ;; "NOT RUN") n_not=$((n_not + 1)) ;; *) n_fail=$((n_fail + 1)) ;; esac
done

# Figures from the BENCH lines, against the targets scaled to this device.
bench() { grep -h "^BENCH $1 " "$log" | tail -n 1 | grep -o "$2=[0-9.]*" | cut -d= -f2; }
label=""; [ "$mock" = 1 ] && label="  [MOCK: meaningless]"
if [ -n "$peak" ]; then scale=$(awk "BEGIN { print $peak / 4800 }"); basis="$gpu_name, $peak GB/s: the H200 targets x $scale"
else scale=1; basis="device not in the table (H100, H200): the H200 targets, unscaled"; fi
{
    echo
    echo "figures ($basis)$label"
    verdict() {   # verdict NAME VALUE TARGET at_least|at_most UNIT
        if [ -z "$2" ]; then printf '  %-36s %s\n' "$1" "no figure (step not run or failed)"; return; fi
        if [ "$mock" = 1 ]; then printf '  %-36s %10s %-6s no verdict: mock, 4 text layers, kernels skipped\n' "$1" "$2" "$5"; return; fi
        awk -v n="$1" -v v="$2" -v t="$3" -v w="$4" -v u="$5" 'BEGIN { met = (w == "at_least") ? v >= t : v <= t;
            printf "  %-36s %10.2f %-6s target %s %.0f: %s\n", n, v, u, (w == "at_least") ? ">=" : "<=", t, met ? "met" : "MISSED" }'
    }
    verdict "decode, F16 11B" "$(bench mllama_f16_decode tok/s)" "$(awk "BEGIN { print 160 * $scale }")" at_least tok/s
    verdict "decode, Q4_K_M 11B" "$(bench mllama_q4_k_m_decode tok/s)" "$(awk "BEGIN { print 500 * $scale }")" at_least tok/s
    verdict "4-tile encode, F16 11B" "$(bench mllama_f16_encode_4tiles ms)" 50 at_most ms
    raw=$(bench "mul_mat f16 x f16 4096^3 (raw cublasGemmEx)" TFLOP/s); ours=$(bench "mul_mat f16 x f16 4096^3 (backend)" TFLOP/s)
    if [ -n "$raw" ] && [ -n "$ours" ]; then
        awk -v r="$raw" -v o="$ours" 'BEGIN { printf "  %-36s %10.1f TFLOP/s, raw cuBLAS %.1f: %.0f%% of it\n", "GEMM F16 4096^3", o, r, 100 * o / r }'
    else printf '  %-36s %s\n' "GEMM F16 4096^3" "no figure (step not run or failed)"; fi
    grep -h '^BENCH decode GEMV ' "$log" | while read -r _ _ _ type shape rest; do
        gbs=$(echo "$rest" | grep -o 'GB/s=[0-9.]*' | cut -d= -f2)
        if [ -n "$peak" ]; then awk -v n="GEMV $type $shape" -v g="$gbs" -v p="$peak" 'BEGIN { printf "  %-36s %10.1f GB/s, %.0f%% of %d\n", n, g, 100 * g / p, p }'
        else printf '  %-36s %10.1f GB/s\n' "GEMV $type $shape" "$gbs"; fi
    done
    echo
    echo "steps: $n_pass passed, $n_fail failed or timed out, $n_not not run; $(( $(date +%s) - start )) s of ${total_s}"
    echo "log $log"
} | tee -a "$summary"
[ "$n_fail" -gt 0 ] && exit 1
[ "$n_not" -gt 0 ] && exit 3
exit 0
