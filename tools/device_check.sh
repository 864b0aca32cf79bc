#!/usr/bin/env bash
# GPU check, run on a machine with CUDA and a CUDA build of torch (not in CI):
# builds the extension in place against that torch and runs the tests that use
# CUDA tensors plus the core suites. Logs go to $OUT (or ./device-logs).
set -uo pipefail
out="${OUT:-device-logs}"
mkdir -p "$out"
nvidia-smi -L
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0))"
start=$(date +%s)
MAX_JOBS=16 python3 setup.py build_ext --inplace >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
python3 -m pytest -q -p no:cacheprovider -rs \
  tests/test_cuda.py tests/test_bad_input.py tests/test_symbol_table.py \
  "tests/test_bedl.py::test_cuda_device_matches_cpu" tests/test_core_properties.py 2>&1 | tee "$out/pytest.log"
