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
    # overrides the caller's; COMPATIBLE, since MKL runs its AUTO dispatch on non-Intel
    # processors for any other branch but AUTO
    assert env["MKL_CBWR"] == "COMPATIBLE"
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
    assert paths["environment"]["MKL_CBWR"] == "COMPATIBLE"
    assert session["command"].startswith("python -m bedl_torch experiment strings")


def test_native_paths_option_keeps_the_process(tmp_path):
    session = _run(tmp_path, "--native-paths")
    paths = session["numeric_paths"]
    assert paths["mode"] == "native"
    assert "ATEN_CPU_CAPABILITY" not in paths["environment"] or \
        os.environ.get("ATEN_CPU_CAPABILITY")


# --------------------------------------------------------------------------- the tie rule
def test_selection_compares_mean_errors_exactly():
    from fractions import Fraction

    from bedl_torch.evaluation.protocol.folds import error_fraction, mean_error, select

    # Three candidates with the same mean error 4/10, written with fold errors whose
    # floating-point means round differently: (1.0 + 0.1 + 0.1) / 3 is 0.4000000000000001 and
    # (0.1 + 0.1 + 1.0) / 3 is 0.39999999999999997 in float64; neither may win (or lose) by
    # that last bit.
    folds = {"a": [(10, 10), (1, 10), (1, 10)], "b": [(1, 10), (1, 10), (10, 10)],
             "c": [(4, 10), (4, 10), (4, 10)], "d": [(5, 10), (4, 10), (4, 10)]}
    floats = {k: sum(w / n for w, n in v) / len(v) for k, v in folds.items()}
    assert floats["a"] > floats["b"]  # the situation the rule is for (float64 sums)
    exact = {k: mean_error([Fraction(w, n) for w, n in v]) for k, v in folds.items()}
    assert exact["a"] == exact["b"] == exact["c"] == Fraction(4, 10)
    for order in (["a", "b", "c", "d"], ["b", "a", "c", "d"], ["c", "b", "a", "d"],
                  ["d", "c", "a", "b"]):
        chosen, scores = select(order, exact.__getitem__)
        assert chosen == next(k for k in order if k != "d")  # the first of the tied best
        assert scores == [float(exact[k]) for k in order]
    # error_fraction counts exactly, also where pred and y are lists of labels
    assert error_fraction(["x", "y", "y"], ["x", "x", "y"]) == Fraction(1, 3)
    assert error_fraction([], []) == 0
    assert mean_error([]) == 0


def test_bedl_beta_search_ties_go_to_the_first_factor(monkeypatch):
    """fit_bedl's nested search on constructed inner errors: factors whose folds' errors are
    permutations of each other tie, and the first of them is chosen."""
    from fractions import Fraction

    import numpy as np

    from bedl_torch.evaluation.protocol import folds

    cfg = config.ExperimentConfig("strings", quick=True, inner_folds=3).resolved()
    cfg.grid.beta_factor = [1e-3, 1e-2, 1e-4]
    # float64 means 0.4000000000000001, 0.39999999999999997 and 0.4: exactly 4/10 each
    per_factor = {1e-3: [Fraction(10, 10), Fraction(1, 10), Fraction(1, 10)],
                  1e-2: [Fraction(1, 10), Fraction(1, 10), Fraction(10, 10)],
                  1e-4: [Fraction(4, 10), Fraction(4, 10), Fraction(4, 10)]}
    calls = {f: 0 for f in per_factor}

    def fake_tasks(fn, tasks, context, n_jobs):
        out = []
        for mode, K, factor, ia, ib, seed in tasks:
            out.append(per_factor[factor][calls[factor]])
            calls[factor] += 1
        return out

    fitted = {}

    class FakeBEDL:
        def __init__(self, **kwargs):
            fitted.update(kwargs)

        def fit(self, X, y):
            return self

    monkeypatch.setattr(folds, "run_tasks", fake_tasks)
    monkeypatch.setattr(folds, "BEDL", FakeBEDL)
    y = np.array([0, 1] * 9)
    data = folds.ExperimentData.__new__(folds.ExperimentData)
    data.X, data.y, data.senti = [["a"]] * len(y), y, None
    tr, te = np.arange(12), np.arange(12, 18)
    _, factor, _ = folds.fit_bedl(cfg, data, "pseudo", 1, tr, te, 0)
    assert factor == 1e-3
    assert all(c == 3 for c in calls.values())
