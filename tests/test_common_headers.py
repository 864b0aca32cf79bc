"""csrc/common is backend-free: its headers compile as CUDA device code (nvcc, where found) and
as plain C++ without torch; the CPU kernels instantiate them (their bits are checked against
references everywhere else in the suite). The GPU kernels, which include no torch header,
compile with nvcc alone too."""
import os
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMON = os.path.join(REPO, "csrc", "common")


def test_common_headers_include_no_torch_and_no_containers():
    """Nothing in a cell may allocate, throw or need torch: the GPU instantiates them."""
    for name in sorted(os.listdir(COMMON)):
        text = open(os.path.join(COMMON, name)).read()
        for banned in ("torch/", "ATen/", "c10/", "<vector>", "std::vector", "throw ", "new ", "malloc"):
            assert banned not in text, f"csrc/common/{name} uses {banned!r}"


def test_common_headers_compile_as_plain_cpp(tmp_path):
    cxx = shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    src = tmp_path / "cells.cpp"
    src.write_text('#include "forest.h"\n#include "sequence.h"\n#include "weights.h"\n'
                   "int main() { bedl::dp::Tie tie{1e-9, 1.0, false}; uint8_t f = 0;\n"
                   "  double v = bedl::ted::forest_value_flags<false>(tie, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, f);\n"
                   "  return (v == 1.0 && f == 7) ? 0 : 1; }\n")
    exe = tmp_path / "cells"
    subprocess.run([cxx, "-std=c++20", "-O1", f"-I{COMMON}", str(src), "-o", str(exe)], check=True,
                   capture_output=True, timeout=120)
    # all three alternatives cost 1 and tie: flags kDel | kIns | kMatch
    assert subprocess.run([str(exe)], timeout=30).returncode == 0


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_common_headers_compile_as_device_code(tmp_path):
    out = tmp_path / "cells.ptx"
    proc = subprocess.run(["nvcc", "-std=c++20", "--ptx", "-o", str(out),
                           os.path.join(REPO, "tests", "cuda", "common_cells.cu")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert ".entry" in out.read_text()


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
@pytest.mark.parametrize("kind, kernels", [
    ("seq", ["sequence_distances_kernel", "sequence_coopt_kernel", "sequence_soft_kernel",
             "sequence_short_distances_kernel", "sequence_warp_distances_kernel"]),
    ("tree", ["tree_distances_kernel", "tree_coopt_kernel", "tree_soft_kernel"])])
def test_gpu_kernels_compile_as_device_code(tmp_path, kind, kernels):
    """The CUDA kernels (csrc/cuda/*/kernels.cu include no torch header) compile with nvcc
    alone, every kernel of each file among the entries: a CUDA build's device code is checked
    wherever nvcc is, GPU or not."""
    out = tmp_path / f"{kind}.ptx"
    proc = subprocess.run(["nvcc", "-std=c++20", "--fmad=false", "--ptx", f"-I{os.path.join(REPO, 'csrc')}",
                           "-o", str(out), os.path.join(REPO, "csrc", "cuda", kind, "kernels.cu")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    entries = [line for line in out.read_text().splitlines() if ".entry " in line]  # (internal linkage: no .visible)
    for name in kernels:
        assert any(name in line for line in entries), name
