"""tools/bedl_study.py: its folds are the protocol's (the initial distances' classifier results
of a committed fold come out again), and its studies return what the tables are built from."""
import importlib.util
import json
import pathlib

import numpy as np
import pytest

pytest.importorskip("sklearn")
pytest.importorskip("scipy")
pytest.importorskip("clarabel")

REPO = pathlib.Path(__file__).resolve().parents[1]


def _study_module():
    spec = importlib.util.spec_from_file_location("bedl_study", REPO / "tools" / "bedl_study.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def study():
    return _study_module()


@pytest.fixture(scope="module")
def strings_results(tmp_path_factory):
    """The committed Strings results, cut to fold 0 (K and beta as the protocol chose)."""
    res = json.loads((REPO / "benchmarks" / "results" / "strings.json").read_text())
    res["fold_info"] = [i for i in res["fold_info"] if i["fold"] == 0]
    res["records"] = [r for r in res["records"] if r["fold"] == 0]
    folder = tmp_path_factory.mktemp("results")
    (folder / "strings.json").write_text(json.dumps(res))
    return folder, res


def test_protocol_folds_match_the_committed_fold(study, strings_results):
    folder, res = strings_results
    X, y, senti, folds, _ = study.fold_settings("strings", str(folder))
    assert senti is None and [f[0] for f in folds] == [0]
    _, tr, te, info = folds[0]
    assert len(tr) == info["n_train"] == 190 and len(te) == info["n_test"] == 10
    assert len(set(tr) | set(te)) == len(X) == 200


def test_classifier_study_reproduces_the_initial_records(study, strings_results):
    folder, res = strings_results
    entry = study.study_classifiers("strings", str(folder), mode="pseudo")
    row = entry["folds"][0]
    initial = {r["classifier"]: r for r in res["records"] if r["metric"] == "initial"}
    assert set(initial) == set(study.CLASSIFIER_NAMES)
    for clf, rec in initial.items():
        got = row[f"initial/{clf}/paper"]
        assert got["error"] == pytest.approx(rec["error"]), clf
        assert float(got["value"]) == pytest.approx(float(rec["value"]), rel=1e-5), clf
    # the extended grid contains the paper's, so it searches a superset of bandwidths
    for b in study.full_grid().bandwidth:
        assert min(abs(e - b) / b for e in study.EXTENDED_BANDWIDTHS) < 1e-12
    assert max(study.EXTENDED_BANDWIDTHS) == pytest.approx(100.0)
    assert row["initial/SVM/extended"]["value"] in study.EXTENDED_BANDWIDTHS
    table = study.summarise_classifiers(entry)
    assert "| KNN | 10.0 |" in table  # the committed fold-0 KNN error on unit costs


def test_alignment_study_fits_both_settings(study, strings_results):
    folder, _ = strings_results
    entry = study.study_alignments("strings", str(folder))
    row = entry["folds"][0]
    for setting in study.SETTINGS:
        fit = row[setting]
        assert np.isfinite(fit["objective"]) and fit["rounds"] >= 1
        assert 0.0 <= fit["mglvq_error"] <= 1.0 and 0.0 <= fit["knn1_error"] <= 1.0
    assert study.summarise(entry).startswith("| strings | 1 |")


def test_goodness_study_rescales_to_the_other_median(study, strings_results):
    folder, res = strings_results
    entry = study.study_goodness("strings", str(folder))
    row = entry["folds"][0]
    committed = [r for r in res["records"] if r["metric"] == "initial" and r["classifier"] == "goodness"]
    assert row["initial"]["error"] == pytest.approx(committed[0]["error"])
    med = row["median_distance"]
    assert med["initial"] == pytest.approx(5.0)  # unit costs on the Strings pairs of fold 0
    assert row["initial"]["scale"] == row["bedl"]["scale"] == 1.0
    assert row["initial_at_bedl_scale"]["scale"] == pytest.approx(med["bedl"] / med["initial"])
    assert row["bedl_at_initial_scale"]["scale"] == pytest.approx(med["initial"] / med["bedl"])
    assert row["initial_at_median_1"]["scale"] == pytest.approx(1.0 / med["initial"])
    assert "| initial_at_bedl_scale |" in study.summarise_goodness(entry)
