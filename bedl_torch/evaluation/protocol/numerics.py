"""One instruction-set path for the numerical libraries, so that a protocol run gives the same
bits on every x86-64 processor with AVX2 (AMD or Intel, with or without AVX-512): AVX2 for
torch, oneDNN, OpenBLAS and numpy, MKL's vendor-neutral COMPATIBLE branch.

torch, MKL, OpenBLAS and numpy choose their vectorised code by the processor. On AVX-512
machines they take other paths than on AVX2 machines, their results differ in the last bits,
and BEDL's fits and the inner folds' choices turn those bits into different records. The
libraries read their path from the environment when they load, so the command line re-executes
itself with :data:`AVX2_PATHS` set (:func:`reexec_on_avx2_paths`) before anything of them runs
again; ``--native-paths`` runs on the paths each library picks instead. :func:`describe` is
what a run records of the paths it ran on (``results.json``, ``sessions[].numeric_paths``).
"""
from __future__ import annotations

import os
import sys
from typing import Dict, List, Optional, Sequence

__all__ = ["MARKER", "AVX2_PATHS", "cpu_has_avx2", "numpy_avx512_features", "avx2_environment",
           "reexec_on_avx2_paths", "describe"]

#: set in the re-executed process: which paths it was started on ("avx2")
MARKER = "BEDL_TORCH_NUMERIC_PATHS"

#: the environment that holds each library to its AVX2 path; NPY_DISABLE_CPU_FEATURES is
#: added by :func:`avx2_environment` from the features the installed numpy dispatches to
AVX2_PATHS: Dict[str, str] = {
    "ATEN_CPU_CAPABILITY": "avx2",   # torch's vectorised kernels
    # MKL (torch's BLAS and LAPACK): its branch for "Intel and compatible" processors. MKL
    # honours its AVX2 branch on Intel processors only and runs its AUTO dispatch elsewhere
    # (AMD), so COMPATIBLE (SSE2) is the one branch that is the same code on both.
    "MKL_CBWR": "COMPATIBLE",
    "ONEDNN_MAX_CPU_ISA": "AVX2",     # oneDNN (torch's mkldnn kernels)
    "OPENBLAS_CORETYPE": "Haswell",  # numpy's and scipy's OpenBLAS: the AVX2 kernels
}


def cpu_has_avx2() -> bool:
    """Whether the processor has AVX2 and FMA (Linux: /proc/cpuinfo; elsewhere unknown: False)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return "avx2" in flags and "fma" in flags
    except OSError:
        pass
    return False


def numpy_avx512_features() -> List[str]:
    """The AVX-512 features (and the x86-64-v4 level) among those the installed numpy
    dispatches to: what NPY_DISABLE_CPU_FEATURES must list to keep numpy on AVX2."""
    try:
        from numpy._core import _multiarray_umath as umath
    except ImportError:  # numpy < 2
        from numpy.core import _multiarray_umath as umath
    names = list(getattr(umath, "__cpu_dispatch__", []))
    return [n for n in names if "AVX512" in n or n == "X86_V4"]


def avx2_environment(base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """``base`` (default ``os.environ``) with :data:`AVX2_PATHS`, numpy's AVX-512 features
    disabled and :data:`MARKER` set."""
    env = dict(os.environ if base is None else base)
    env.update(AVX2_PATHS)
    features = numpy_avx512_features()
    if features:
        env["NPY_DISABLE_CPU_FEATURES"] = " ".join(features)
    env[MARKER] = "avx2"
    return env


def reexec_on_avx2_paths(argv: Sequence[str]) -> None:
    """Replace this process by ``python -m bedl_torch ARGV`` on the AVX2 paths; returns (doing
    nothing) when it already runs on them or the processor has no AVX2."""
    if os.environ.get(MARKER) == "avx2" or not cpu_has_avx2():
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "bedl_torch", *argv],
              avx2_environment())


def describe() -> dict:
    """The paths this process runs on: ``mode`` ("avx2" when started on them, else
    "native"), the variables that choose them, torch's capability and numpy's active
    AVX-512 features, and the BLAS libraries' core types where threadpoolctl reports them."""
    import numpy as np
    import torch

    names = list(AVX2_PATHS) + ["NPY_DISABLE_CPU_FEATURES"]
    out = {"mode": "avx2" if os.environ.get(MARKER) == "avx2" else "native",
           "environment": {k: os.environ[k] for k in names if k in os.environ},
           "torch_capability": torch.backends.cpu.get_cpu_capability()}
    try:
        from numpy._core import _multiarray_umath as umath
    except ImportError:  # numpy < 2
        from numpy.core import _multiarray_umath as umath
    features = getattr(umath, "__cpu_features__", {})
    out["numpy_avx512"] = sorted(k for k in numpy_avx512_features() if features.get(k))
    try:
        from threadpoolctl import threadpool_info

        out["blas"] = sorted({f"{i.get('internal_api')} {i.get('architecture')}"
                              for i in threadpool_info() if i.get("user_api") == "blas"})
    except Exception:  # noqa: BLE001 - informational only
        pass
    del np
    return out
