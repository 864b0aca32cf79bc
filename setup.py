"""Builds the C++ extension ``bedl_torch._C`` from ``csrc/``.

Install without build isolation so the extension is compiled against the torch
that is already installed: ``pip install --no-build-isolation -e .``

Environment variables:
  DEBUG=1     compile with ``-O1 -g`` instead of ``-O3`` (for a debugger).
  SANITIZE=1  compile and link with AddressSanitizer and UndefinedBehaviorSanitizer
              (``-O1 -g``); the interpreter is not instrumented, so load the result with
              libasan preloaded (``make test-asan`` builds it into ``build/asan`` and does so).
"""
import glob
import os

import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension


def _env_flag(name: str) -> bool:
    value = os.environ.get(name, "").strip().lower()
    if value in ("", "0", "no", "off", "false"):
        return False
    if value in ("1", "yes", "on", "true"):
        return True
    raise ValueError(f"environment variable {name}={os.environ[name]!r}: expected 0 or 1")


here = os.path.dirname(os.path.abspath(__file__))
# csrc/*.cpp (bindings) and every .cpp under csrc/cpu (the CPU backend, by algorithm)
sources = sorted(glob.glob(os.path.join("csrc", "*.cpp")) +
                 glob.glob(os.path.join("csrc", "cpu", "**", "*.cpp"), recursive=True))

debug = _env_flag("DEBUG")
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

setup(
    ext_modules=[
        CppExtension(
            name="bedl_torch._C",
            sources=sources,
            include_dirs=[os.path.join(here, "csrc")],
            extra_compile_args={"cxx": cxx_flags},
            extra_link_args=link_flags,
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
