"""Builds the C++ extension ``bedl_torch._C`` from ``csrc/``.

Install without build isolation so the extension is compiled against the torch
that is already installed: ``pip install --no-build-isolation -e .``
"""
import glob
import os

import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

here = os.path.dirname(os.path.abspath(__file__))
sources = sorted(glob.glob(os.path.join("csrc", "*.cpp")) + glob.glob(os.path.join("csrc", "cpu", "*.cpp")))

cxx_flags = ["-O3", "-std=c++20"]  # torch 2.13 headers need C++20
link_flags = []
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
