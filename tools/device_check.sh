#!/usr/bin/env bash
# GPU check, run on a machine with CUDA and a CUDA build of torch (not in CI):
# builds the extension in place against that torch with the CUDA kernels, runs the
# tests that use CUDA tensors or nccl and the GPU benchmark, then the whole suite on
# that machine's CPU (pytest-xdist where installed). Logs go to $OUT (or ./device-logs).
# BENCH_ARGS: bench_gpu.py's arguments (default --quick); GOALS_TIMEOUT=S adds the goal-sized
# table (bench_gpu.py --goals; not yet timed on a GPU); NCU=1 profiles one launch of each
# goal-sized kernel in NCU_CASES (default "sequences trees"; also trees_p) with Nsight Compute,
# NCU_TIMEOUT (60) seconds each; SUITE_TIMEOUT=0 skips the suite. The first run of new kernels,
# about 8 minutes (build 1, tests 1-2, quick table 1, goals at most 3.5, ncu at most 2):
#   SUITE_TIMEOUT=0 GOALS_TIMEOUT=200 NCU=1 timeout 560 bash tools/device_check.sh
set -uo pipefail
out="${OUT:-device-logs}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi -L
grep -m1 "model name" /proc/cpuinfo; nproc
grep -o -w -E "avx2|avx512f" /proc/cpuinfo | sort | uniq -c
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0))"
start=$(date +%s)
# A build from an earlier call can be carried back in .devso/ (the stripped library and the
# hash of the sources it was built from): a call whose csrc/ is unchanged skips the build.
sources_hash=$(find csrc setup.py -type f | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-16)  # (C order: the same on every machine)
if [ -f .devso/_C.so ] && [ "$(cat .devso/sources 2>/dev/null)" = "$sources_hash" ]; then
  cp .devso/_C.so "bedl_torch/_C$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
  echo "build: carried (sources $sources_hash)"
else
  BEDL_TORCH_CUDA=1 MAX_JOBS=$(nproc) python3 setup.py build_ext --inplace >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
  echo "build: $(( $(date +%s) - start )) s"
  strip --strip-debug -o "$out/_C.so" bedl_torch/_C*.so && echo "$sources_hash" >"$out/sources"
fi
python3 -m pytest -q -p no:cacheprovider -rs --timeout 120 tests/test_cuda.py tests/test_gpu_jobs.py \
  "tests/test_bedl.py::test_cuda_device_matches_cpu" \
  "tests/test_search.py::test_search_with_a_cost_module_on_a_device_equals_its_matrix" 2>&1 | tee "$out/cuda.log"
python3 -m pytest -q -p no:cacheprovider -rs --timeout 120 tests/test_distributed.py -k "cuda or nccl" 2>&1 | tee -a "$out/cuda.log"
echo "cuda tests: $(( $(date +%s) - start )) s"
timeout "${BENCH_TIMEOUT:-120}" python3 benchmarks/bench_gpu.py ${BENCH_ARGS:---quick} 2>&1 | tee "$out/bench_gpu.log"
echo "bench: $(( $(date +%s) - start )) s"
if [ "${GOALS_TIMEOUT:-0}" != 0 ]; then  # GOALS_TIMEOUT=S: the goal-sized table too
  timeout "$GOALS_TIMEOUT" python3 benchmarks/bench_gpu.py --goals 2>&1 | tee "$out/bench_goals.log"
  echo "goals: $(( $(date +%s) - start )) s"
fi
if [ "${NCU:-0}" = 1 ]; then  # NCU=1: Nsight Compute on one launch of each goal-sized kernel
  declare -A kernel_of=([sequences]=short_distances [trees]=tree_lanes [trees_p]=tree_coopt)
  for case in ${NCU_CASES:-sequences trees}; do
    spec="$case:${kernel_of[$case]}"
    timeout "${NCU_TIMEOUT:-60}" ncu --launch-count 1 --kernel-name "regex:${spec#*:}" --section SpeedOfLight \
      --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
      python3 benchmarks/bench_gpu.py --one "${spec%%:*}" >"$out/ncu_one.log" 2>&1
    echo "== ${spec%%:*}" | tee -a "$out/ncu.log"; cat "$out/ncu_one.log" >>"$out/ncu.log"
    grep -E "Duration|Throughput|Occupancy|Registers|Hit Rate|Block Limit" "$out/ncu_one.log" | head -30
  done
  rm -f "$out/ncu_one.log"
  echo "ncu: $(( $(date +%s) - start )) s"
fi
[ "${SUITE_TIMEOUT:-240}" = 0 ] && exit 0  # SUITE_TIMEOUT=0: the GPU part alone
# The suite in parallel, two torch threads per worker (16 threads in each of 12 workers
# oversubscribed the cores and ran past the timeout); failures in short form at the end.
xdist=""
python3 -c "import xdist" 2>/dev/null && xdist="-n $(( $(nproc) / 2 < 8 ? $(nproc) / 2 : 8 ))"
# (at most 8 files come back from $OUT: the build, its sources' hash, and six logs)
OMP_NUM_THREADS=2 timeout "${SUITE_TIMEOUT:-240}" python3 -m pytest -q -p no:cacheprovider $xdist --tb=short -rfE \
  tests 2>&1 | tee "$out/suite.log" | grep -v PytestBenchmarkWarning | tail -60
echo "suite: $(( $(date +%s) - start )) s"
