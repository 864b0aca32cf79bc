# Device-image check (not in CI): does a torch-only extension survive a TORCH_CHECK message that formats an int64?
# On the 2026-11 GPU image (torch 2.11.0+cu130, GCC 13.3) it segfaults inside libstdc++ ostream; std::to_string is fine.
from torch.utils.cpp_extension import load_inline
src = r'''
#include <torch/extension.h>
void fail(int64_t v) { TORCH_CHECK(v < 0, "value ", v, " is not negative"); }
void fail_str(int64_t v) { TORCH_CHECK(v < 0, "value ", std::to_string(v), " is not negative"); }
'''
m = load_inline("minimal_check", cpp_sources=src, functions=["fail", "fail_str"], verbose=False)
try:
    m.fail_str(3)
except RuntimeError as e:
    print("to_string message ok:", str(e).splitlines()[0])
try:
    m.fail(3)
except RuntimeError as e:
    print("int64 message ok:", str(e).splitlines()[0])
