import os
import pathlib

import pytest
import torch

REPO = pathlib.Path(__file__).resolve().parents[1]
SHARED = pathlib.Path(os.environ.get("BEDL_SHARED", REPO.parent / "shared"))

#: BEDL_TORCH_SIMD=0 runs the whole session on the scalar kernels (the AVX2 paths off), =1 (or
#: unset) as built: AVX2 where the processor has it
SIMD_ENV = "BEDL_TORCH_SIMD"


def _simd_requested():
    value = os.environ.get(SIMD_ENV, "1")
    if value not in ("0", "1"):
        raise pytest.UsageError(f"{SIMD_ENV} must be 0 (AVX2 paths off) or 1, got {value!r}")
    return value == "1"


def pytest_configure(config):
    requested = _simd_requested()
    if SIMD_ENV in os.environ:
        from bedl_torch import _ext

        _ext.set_simd_enabled(requested)


def pytest_terminal_summary(terminalreporter):
    """Which kernels the session ran, above the summary line (also under -q)."""
    try:
        from bedl_torch import _ext
    except ImportError as exc:
        line = f"not loadable ({exc})"
    else:
        if not _simd_requested():
            line = f"scalar ({SIMD_ENV}=0: the AVX2 paths off)"
        else:
            line = "AVX2 paths on" if _ext.simd_enabled() else "scalar (no AVX2 on this processor)"
    terminalreporter.write_line(f"bedl_torch kernels: {line}")


@pytest.fixture
def simd_lanes():
    """For tests that compare the AVX2 paths with the scalar kernels: the extension, with the
    AVX2 paths on; skips where they are off for the session or the processor lacks AVX2.
    The session's setting is restored afterwards."""
    from bedl_torch import _ext

    if not _simd_requested():
        pytest.skip(f"the AVX2 paths are off for this session ({SIMD_ENV}=0)")
    if not _ext.simd_enabled():
        pytest.skip("no AVX2 on this processor: only the scalar kernels run")
    yield _ext
    _ext.set_simd_enabled(True)


@pytest.fixture(autouse=True)
def _simd_setting_unchanged():
    """A test that switches the AVX2 paths must leave them as the session set them."""
    from bedl_torch import _ext

    before = _ext.simd_enabled()
    yield
    assert _ext.simd_enabled() == before, "the test left the AVX2 paths switched"


@pytest.fixture(scope="session")
def shared_data():
    """Path of ../shared/data; tests that need it skip where it is absent."""
    path = SHARED / "data"
    if not path.is_dir():
        pytest.skip("../shared/data is not available")
    return path


@pytest.fixture(autouse=True)
def _deterministic_seed():
    torch.manual_seed(0)
    yield
