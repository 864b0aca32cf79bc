"""The protocol's numerical paths: grids written as literals, and `python -m bedl_torch
experiment` re-executing itself on the libraries' AVX2 paths (recorded in results.json)."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("sklearn")
pytest.importorskip("scipy")
pytest.importorskip("clarabel")

from bedl_torch.evaluation.protocol import config, numerics  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--quick", "--folds", "2", "--inner-folds", "2", "--no-progress", "--max-items", "12",
        "--max-folds", "1", "--metrics", "initial", "--classifiers", "KNN"]


def test_paper_grid_is_the_decimal_values():
    # np.logspace(-5, 1, 7)[0] is 9.999999999999999e-06 on AVX-512 processors: the grid must
    # not depend on it
    grid = config.full_grid()
    assert grid.goodness_lam == [1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0]
    assert grid.beta_factor == grid.gesl_factor == [1e-6, 1e-5, 1e-4, 1e-3, 1e-2]
    assert grid.bandwidth[0] == 0.1 and grid.bandwidth[3] == 1.0 and grid.bandwidth[6] == 10.0
    assert [repr(v) for v in grid.bandwidth[1:3] + grid.bandwidth[4:6]] == [
        "0.21544346900318834", "0.46415888336127786", "2.1544346900318834", "4.6415888336127775"]
    assert grid.bandwidth == sorted(grid.bandwidth)


def test_avx2_environment_names_every_library():
    env = numerics.avx2_environment({"PATH": "/bin", "MKL_CBWR": "AUTO"})
    assert env["PATH"] == "/bin"
    assert env["ATEN_CPU_CAPABILITY"] == "avx2"
    assert env["MKL_CBWR"] == "AVX2"  # overrides the caller's
    assert env["OPENBLAS_CORETYPE"] == "Haswell"
    assert env[numerics.MARKER] == "avx2"
    from numpy._core import _multiarray_umath as umath

    dispatched = set(umath.__cpu_dispatch__)
    disabled = env.get("NPY_DISABLE_CPU_FEATURES", "").split()
    assert set(disabled) <= dispatched
    assert {f for f in dispatched if "AVX512" in f} <= set(disabled)


def _run(tmp_path, *extra):
    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k != numerics.MARKER}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-m", "bedl_torch", "experiment", "strings", *TINY,
                           "--out", str(out), *extra], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads((out / "results.json").read_text())["environment"]["sessions"][-1]


@pytest.mark.skipif(not numerics.cpu_has_avx2(), reason="the processor has no AVX2")
def test_experiment_reexecutes_on_the_avx2_paths(tmp_path):
    session = _run(tmp_path)
    paths = session["numeric_paths"]
    assert paths["mode"] == "avx2"
    assert paths["torch_capability"] == "AVX2"
    assert paths["numpy_avx512"] == []
    assert paths["environment"]["OPENBLAS_CORETYPE"] == "Haswell"
    assert session["command"].startswith("python -m bedl_torch experiment strings")


def test_native_paths_option_keeps_the_process(tmp_path):
    session = _run(tmp_path, "--native-paths")
    paths = session["numeric_paths"]
    assert paths["mode"] == "native"
    assert "ATEN_CPU_CAPABILITY" not in paths["environment"] or \
        os.environ.get("ATEN_CPU_CAPABILITY")
