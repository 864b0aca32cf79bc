"""Loads the compiled kernels ``bedl_torch._C`` with a readable error."""
import torch

try:
    from . import _C  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the build
    raise ImportError(
        "bedl_torch's C++ extension (bedl_torch._C) could not be loaded: "
        f"{exc}. Build it against the installed torch {torch.__version__} with "
        "`pip install --no-build-isolation -e .` (or `make install`)."
    ) from exc

_built = _C.torch_version
_running = torch.__version__.split("+")[0]
if _built.split(".")[:2] != _running.split(".")[:2]:  # pragma: no cover
    raise ImportError(
        f"bedl_torch._C was built against torch {_built} but torch {torch.__version__} is "
        "installed; rebuild with `pip install --no-build-isolation -e .`."
    )

ted_cpu = _C.ted_cpu
sed_cpu = _C.sed_cpu
ted_symbols_cpu = _C.ted_symbols_cpu
sed_symbols_cpu = _C.sed_symbols_cpu
# AVX2 kernels on or off (same bits either way; tests and benchmarks compare both)
set_simd_enabled = _C.set_simd_enabled
simd_enabled = _C.simd_enabled
