"""Builds the C++ extension ``bedl_torch._C`` from ``csrc/``.

Install without build isolation so the extension is compiled against the torch
that is already installed: ``pip install --no-build-isolation -e .``

Environment variables:
  DEBUG=1     compile with ``-O1 -g`` instead of ``-O3`` (for a debugger).
  BEDL_TORCH_CUDA=0/1  build the CUDA kernels (csrc/cuda) or not; unset: where nvcc and a
              CUDA build of torch are found. 1 fails where either is missing.
  TORCH_CUDA_ARCH_LIST  the GPU architectures to compile for (torch's variable); unset on a
              machine without a visible GPU: "8.0;9.0+PTX" (A100, H100/H200 and newer via PTX).
  SANITIZE=1  compile and link with AddressSanitizer and UndefinedBehaviorSanitizer
              (``-O1 -g``); the interpreter is not instrumented, so load the result with
              libasan preloaded (``make test-asan`` builds it into ``build/asan`` and does so).
"""
import glob
import os

import torch
from setuptools import setup
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension


def _env_flag(name: str, default: bool = False) -> bool:
    value = os.environ.get(name, "").strip().lower()
    if value == "":
        return default
    if value in ("0", "no", "off", "false"):
        return False
    if value in ("1", "yes", "on", "true"):
        return True
    raise ValueError(f"environment variable {name}={os.environ[name]!r}: expected 0 or 1")


here = os.path.dirname(os.path.abspath(__file__))
# csrc/*.cpp (bindings) and every .cpp under csrc/cpu (the CPU backend, by algorithm)
sources = sorted(glob.glob(os.path.join("csrc", "*.cpp")) +
                 glob.glob(os.path.join("csrc", "cpu", "**", "*.cpp"), recursive=True))

debug = _env_flag("DEBUG")
cuda_found = torch.version.cuda is not None and CUDA_HOME is not None
with_cuda = _env_flag("BEDL_TORCH_CUDA", default=cuda_found)
if with_cuda and not cuda_found:
    raise RuntimeError(
        "BEDL_TORCH_CUDA=1 needs a CUDA build of torch and the CUDA toolkit (nvcc); found torch "
        f"{torch.__version__} (CUDA {torch.version.cuda}) and CUDA_HOME={CUDA_HOME}")
sanitize = _env_flag("SANITIZE")

cxx_flags = ["-std=c++20"]  # torch 2.13 headers need C++20
link_flags = []
if debug or sanitize:
    cxx_flags += ["-O1", "-g"]
else:
    cxx_flags.append("-O3")
if sanitize:
    # float-cast-overflow (an out-of-range double to integer) is undefined but not part of
    # gcc's "undefined" group. -fno-wrapv undoes Python's -fwrapv, so that signed integer
    # overflow (index arithmetic) is reported instead of silently wrapping.
    sanitizers = ["-fsanitize=address,undefined,float-cast-overflow", "-fno-omit-frame-pointer"]
    cxx_flags += sanitizers + ["-fno-wrapv"]
    link_flags += sanitizers
# at::parallel_for expands to OpenMP pragmas in the headers when torch was built with
# OpenMP; without -fopenmp here they would silently run on one thread.
if torch.backends.openmp.is_available():
    cxx_flags.append("-fopenmp")
    link_flags.append("-fopenmp")

extension_kind = CppExtension
extra_compile_args = {"cxx": cxx_flags}
define_macros = []
if with_cuda:
    # the GPU backend: kernels (.cu, no torch headers) and their torch glue (.cpp)
    sources += sorted(glob.glob(os.path.join("csrc", "cuda", "**", "*.cpp"), recursive=True) +
                      glob.glob(os.path.join("csrc", "cuda", "**", "*.cu"), recursive=True))
    extension_kind = CUDAExtension
    if not os.environ.get("TORCH_CUDA_ARCH_LIST") and not torch.cuda.is_available():
        # torch picks the architectures of the visible GPUs; a build machine without one
        # (CI, a wheel builder) gets these instead of an error
        os.environ["TORCH_CUDA_ARCH_LIST"] = "8.0;9.0+PTX"
    define_macros.append(("BEDL_WITH_CUDA", "1"))
    # --fmad=false: no fused multiply-adds, so every product and sum rounds as on the CPU
    # (the kernels' results are the CPU kernels' bits, see docs/gpu.md)
    extra_compile_args["nvcc"] = ["-std=c++20", "-O1" if debug else "-O3", "-lineinfo", "--fmad=false"]

setup(
    ext_modules=[
        extension_kind(
            name="bedl_torch._C",
            sources=sources,
            include_dirs=[os.path.join(here, "csrc")],
            define_macros=define_macros,
            extra_compile_args=extra_compile_args,
            extra_link_args=link_flags,
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
