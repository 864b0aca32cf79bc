"""`experiment all`, resuming runs per fold, configuration mismatches, the compact export and
the rendered paper table (numbers checked against hand-computed values of small fixtures)."""
import json
import math
import pathlib
import re

import numpy as np
import pytest

pytest.importorskip("sklearn")
pytest.importorskip("scipy")
pytest.importorskip("clarabel")

from bedl_torch.__main__ import main  # noqa: E402
from bedl_torch.evaluation import protocol  # noqa: E402
from bedl_torch.evaluation.protocol import (  # noqa: E402
    CLASSIFIERS, PAPER_ERRORS, PAPER_FOLDS, config_differences)
from bedl_torch.evaluation.protocol.export import (  # noqa: E402
    compact_results, dump_compact, export_runs, load_run, load_runs)
from bedl_torch.evaluation.protocol.folds import stratified_subsample  # noqa: E402
from bedl_torch.evaluation.protocol.render import (  # noqa: E402
    command_for, flagged_cells, parse_notes, render_paper_table)
from bedl_torch.evaluation.protocol.runs import read_meta_txt  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
TINY = ["--quick", "--folds", "2", "--inner-folds", "2", "--no-progress"]


def _read(path):
    return json.loads(pathlib.Path(path).read_text())


def _fold_calls(monkeypatch):
    """Record the outer folds the protocol computes (the real fold runs)."""
    calls = []
    real = protocol.folds.run_fold

    def counting(cfg, result, fold, *args):
        calls.append(fold)
        return real(cfg, result, fold, *args)

    monkeypatch.setattr(protocol.folds, "run_fold", counting)
    return calls


# --------------------------------------------------------------------------- experiment all
def test_experiment_all_quick_on_tiny_subsamples(tmp_path, capsys):
    out = tmp_path / "all"
    code = main(["experiment", "all", *TINY, "--max-items", "16", "--max-folds", "1",
                 "--metrics", "initial", "gesl", "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr()
    for k, ds in enumerate(PAPER_FOLDS):
        assert f"== [{k + 1}/6] {ds}" in printed.err
        data = _read(out / ds / "results.json")
        assert data["dataset"] == ds and data["folds_done"] == 1
        assert data["config"]["max_items"] == 16 and data["config"]["folds"] == 2
        metrics = ["initial"] if ds == "sentiment" else ["initial", "gesl"]
        assert data["config"]["metrics"] == metrics
        assert sorted((r["classifier"], r["metric"]) for r in data["records"]) == \
            sorted((c, m) for c in CLASSIFIERS for m in metrics)
        assert all(r["fold"] == 0 for r in data["records"])
        info = data["fold_info"][0]
        # 16 items drawn in proportion to the classes, at least 2 (folds) of each
        _, y = protocol.data.load_dataset(ds)
        counts = np.bincount(y)
        expected = sum(min(c, max(int(round(16 * c / len(y))), 2)) for c in counts if c)
        assert info["n_train"] + info["n_test"] == expected
        assert info["wall_s"] > 0
        env = data["environment"]
        assert env["cpu_model"] and env["nproc"] >= 1 and env["commit"]
        (session,) = env["sessions"]
        assert session["folds_before"] == 0 and session["folds_after"] == 1
        assert session["start"] <= session["end"] and env["wall_s"] == session["wall_s"] >= 0
        assert "experiment all" in session["command"]
    page = (out / "paper_table.md").read_text()
    for ds, title in [("strings", "Strings"), ("sentiment", "Sentiment")]:
        assert f"| [{title}](#{title.lower()}) | 1 of 2 |" in page
    assert "--max-items 16" in page


def test_stratified_subsample_counts():
    y = np.array([0] * 50 + [1] * 30 + [2] * 3)
    keep = stratified_subsample(y, 20, 4, seed=0)
    # shares 12.0, 7.2, 0.7 of 20 -> 12, 7, and class 2 at least 4 folds but has only 3
    assert np.bincount(y[keep]).tolist() == [12, 7, 3]
    assert len(set(keep.tolist())) == len(keep) and (np.diff(keep) > 0).all()


# --------------------------------------------------------------------------- resuming
def test_resume_keeps_complete_folds_and_computes_only_the_rest(tmp_path, monkeypatch):
    out = tmp_path / "strings"
    args = ["experiment", "strings", *TINY, "--folds", "3", "--max-items", "24",
            "--metrics", "initial", "gesl", "bedl_pseudo", "--out", str(out)]
    calls = _fold_calls(monkeypatch)
    assert main(args + ["--max-folds", "1"]) == 0
    assert calls == [0]
    first = _read(out / "results.json")
    assert first["folds_done"] == 1

    calls.clear()
    assert main(args + ["--max-folds", "2"]) == 0
    assert calls == [1]  # fold 0 is not recomputed
    second = _read(out / "results.json")
    assert second["folds_done"] == 2
    kept = [r for r in second["records"] if r["fold"] == 0]
    assert json.dumps(kept) == json.dumps(first["records"])  # bit-identical
    assert json.dumps(second["fold_info"][0]) == json.dumps(first["fold_info"][0])
    assert {r["fold"] for r in second["records"]} == {0, 1}
    s1, s2 = second["environment"]["sessions"]
    assert s1 == first["environment"]["sessions"][0]
    assert (s1["folds_before"], s1["folds_after"], s2["folds_before"], s2["folds_after"]) == \
        (0, 1, 1, 2)
    assert second["environment"]["wall_s"] == pytest.approx(s1["wall_s"] + s2["wall_s"])

    # nothing left to do: nothing runs and the file stays as it is
    calls.clear()
    text = (out / "results.json").read_text()
    assert main(args + ["--max-folds", "2"]) == 0
    assert calls == [] and (out / "results.json").read_text() == text


def test_run_continues_from_a_committed_compact_file(tmp_path, monkeypatch):
    """A compact DATASET.json (what benchmarks/results holds) copied to OUT/DATASET/results.json
    is continued like the run's own raw file: its folds are kept, only the rest run."""
    raw = tmp_path / "raw" / "strings"
    args = ["experiment", "strings", *TINY, "--folds", "3", "--max-items", "24",
            "--metrics", "initial", "gesl"]
    assert main(args + ["--max-folds", "1", "--out", str(raw)]) == 0
    compact = compact_results(_read(raw / "results.json"))
    assert compact["format"] and "table" not in compact
    out = tmp_path / "continued" / "strings"
    out.mkdir(parents=True)
    (out / "results.json").write_text(dump_compact(compact))
    calls = _fold_calls(monkeypatch)
    assert main(args + ["--out", str(out)]) == 0
    assert calls == [1, 2]
    done = _read(out / "results.json")
    assert done["folds_done"] == 3
    kept = [(r["classifier"], r["metric"], r["error"], r["value"]) for r in done["records"]
            if r["fold"] == 0]
    assert kept == [(r["classifier"], r["metric"], r["error"], r["value"])
                    for r in compact["records"]]
    assert [s["folds_after"] for s in done["environment"]["sessions"]] == [1, 3]


def test_resumed_run_equals_an_uninterrupted_one(tmp_path):
    """Folds continued later see the same split and the same training samples (drawn fold by
    fold from one generator) as a run without a break."""
    base = ["experiment", "strings", *TINY, "--folds", "3", "--train-sample", "40",
            "--metrics", "initial", "gesl"]
    assert main(base + ["--out", str(tmp_path / "whole")]) == 0
    assert main(base + ["--out", str(tmp_path / "parts"), "--max-folds", "1"]) == 0
    assert main(base + ["--out", str(tmp_path / "parts")]) == 0
    whole, parts = _read(tmp_path / "whole/results.json"), _read(tmp_path / "parts/results.json")
    assert whole["folds_done"] == parts["folds_done"] == 3

    def key(r):
        return (r["fold"], r["classifier"], r["metric"], r["error"], r["value"])

    assert sorted(map(key, whole["records"])) == sorted(map(key, parts["records"]))
    for a, b in zip(whole["fold_info"], parts["fold_info"]):
        assert a["n_train"] == b["n_train"] == 40
        assert (a["K"], a["gesl"]["objective"]) == (b["K"], b["gesl"]["objective"])


def test_interrupted_fold_is_dropped_and_rerun(tmp_path, monkeypatch, capsys):
    calls = []

    def fake_fold(cfg, result, fold, tr, te, *args):
        calls.append(fold)
        result.fold_info.append({"fold": fold, "n_train": len(tr), "n_test": len(te)})
        for clf in cfg.classifiers:
            result.records.append({"dataset": cfg.dataset, "classifier": clf,
                                   "metric": "initial", "fold": fold, "error": 0.125 * fold,
                                   "runtime_s": 0.0})
            if fold == 1 and stop[0]:
                raise KeyboardInterrupt  # half-way through fold 1

    stop = [True]
    monkeypatch.setattr(protocol.folds, "run_fold", fake_fold)
    args = ["experiment", "strings", "--folds", "3", "--quick", "--metrics", "initial",
            "--out", str(tmp_path), "--no-progress"]
    assert main(args) == 130
    assert "the same command continues" in capsys.readouterr().err
    data = _read(tmp_path / "results.json")
    assert data["folds_done"] == 1 and data["interrupted"] is True
    assert {r["fold"] for r in data["records"]} == {0, 1}  # what fold 1 had written so far
    # the export (and the table) leave the cut-off fold out
    compact = load_run(tmp_path)
    assert [r["fold"] for r in compact["records"]] == [0] * 4
    assert [i["fold"] for i in compact["fold_info"]] == [0]
    stop[0] = False
    calls.clear()
    assert main(args) == 0
    assert calls == [1, 2]
    data = _read(tmp_path / "results.json")
    assert data["folds_done"] == 3 and data["interrupted"] is False
    assert sorted(r["fold"] for r in data["records"]) == [0] * 4 + [1] * 4 + [2] * 4
    assert [i["fold"] for i in data["fold_info"]] == [0, 1, 2]


def test_config_mismatch_names_the_fields(tmp_path, capsys):
    out = tmp_path / "cystic"
    args = ["experiment", "cystic", *TINY, "--max-items", "20", "--metrics", "initial",
            "--out", str(out)]
    assert main(args + ["--max-folds", "1"]) == 0
    text = (out / "results.json").read_text()
    capsys.readouterr()
    assert main(args + ["--seed", "3", "--inner-folds", "3"]) == 2
    err = capsys.readouterr().err
    assert "inner_folds: 2 -> 3" in err and "seed: 0 -> 3" in err and "--restart" in err
    assert "max_items" not in err
    assert (out / "results.json").read_text() == text
    # how far and on how many processes a run goes is no mismatch
    assert main(args + ["--jobs", "2"]) == 0
    assert _read(out / "results.json")["folds_done"] == 2
    assert main(args + ["--seed", "3", "--restart", "--max-folds", "1"]) == 0
    data = _read(out / "results.json")
    assert data["config"]["seed"] == 3 and data["folds_done"] == 1
    assert len(data["environment"]["sessions"]) == 1
    # a file that is not an experiment's results is not overwritten without --restart
    (out / "results.json").write_text('{"records": [')
    assert main(args) == 2
    assert "results.json" in capsys.readouterr().err
    assert main(args + ["--restart"]) == 0 and _read(out / "results.json")["folds_done"] == 2


def test_resume_on_other_numeric_paths_is_refused(tmp_path, capsys):
    out = tmp_path / "cystic"
    args = ["experiment", "cystic", *TINY, "--max-items", "20", "--metrics", "initial",
            "--out", str(out)]
    assert main(args + ["--max-folds", "1"]) == 0
    data = _read(out / "results.json")
    # as if fold 0 had run on the protocol's fixed paths (this process runs on its native ones)
    now = protocol.runs.describe_paths()
    assert now["mode"] == "native"
    data["environment"]["sessions"][0]["numeric_paths"] = {
        "mode": "avx2", "environment": {**now["environment"], "MKL_CBWR": "AVX2-ish"}}
    text = json.dumps(data)
    (out / "results.json").write_text(text)
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "other numerical paths" in err and "mode: avx2 -> native" in err
    mkl_now = now["environment"].get("MKL_CBWR", "unset")
    assert f"MKL_CBWR: AVX2-ish -> {mkl_now}" in err and "--restart" in err
    assert err.count(" -> ") == 2  # only what differs
    assert (out / "results.json").read_text() == text
    # sessions from before the record are not checked
    assert protocol.runs.paths_differences([{"commit": "abc"}], {"mode": "native"}) == []
    assert protocol.runs.paths_differences(
        [{"numeric_paths": {"mode": "native"}}, {"numeric_paths": {"mode": "avx2", "environment": {"A": "1"}}}],
        {"mode": "avx2", "environment": {"A": "1"}}) == []


def test_config_differences():
    a = protocol.ExperimentConfig("strings").resolved().to_dict()
    b = protocol.ExperimentConfig("strings", n_jobs=4, max_folds=2, progress=False,
                                  max_items=None).resolved().to_dict()
    assert config_differences(a, b) == []
    b["grid"]["beta_factor"] = [1e-4]
    b["metrics"] = ("initial",)
    assert config_differences(a, b) == [
        "grid.beta_factor: [1e-06, 1e-05, 0.0001, 0.001, 0.01] -> [0.0001]",
        "metrics: ['initial', 'gesl', 'bedl_pseudo', 'bedl_exact'] -> ['initial']"]
    # results written before a field existed computed what its default computes
    old = {k: v for k, v in a.items() if k != "max_items"}
    assert config_differences(old, a) == []
    assert config_differences(old, dict(a, max_items=16)) == ["max_items: None -> 16"]


# --------------------------------------------------------------------------- export, render
def _fixture_results():
    """A hand-written results.json: Strings, 3 of 4 folds, KNN and SVM on initial and BEDL."""
    errors = {("KNN", "initial"): [0.1, 0.2, 0.3], ("KNN", "bedl_pseudo"): [0.0, 0.0, 0.0],
              ("SVM", "initial"): [0.05, 0.05, 0.2], ("SVM", "bedl_pseudo"): [0.1, 0.1, 0.1]}
    values = {"KNN": [1, 1, 3], "SVM": [0.1, 10.0, 0.1]}
    runtimes = [1.0, 2.0, 3.0]
    records = []
    for fold in range(3):
        for (clf, metric), errs in errors.items():
            records.append({"dataset": "strings", "classifier": clf, "metric": metric,
                            "fold": fold, "error": errs[fold],
                            "runtime_s": runtimes[fold] if metric != "initial" else 0.0,
                            "param": "x", "value": values[clf][fold], "n_train": 150,
                            "n_test": 50, **({"metric_param": 1e-4} if metric != "initial"
                                             else {})})
    config = protocol.ExperimentConfig("strings", folds=4, metrics=("initial", "bedl_pseudo"),
                                       classifiers=("KNN", "SVM")).resolved().to_dict()
    config["classifiers"] = ["KNN", "SVM"]
    return {"dataset": "strings", "config": config, "notes": ["a note of the run"],
            "folds_done": 3, "interrupted": False, "summary": {}, "table": "| old |",
            "fold_info": [{"fold": f, "n_train": 150, "n_test": 50, "K": 2,
                           "bedl_pseudo": {"factor": 1e-4, "beta": 0.06 + f / 3}}
                          for f in range(3)],
            "records": records, "environment": {"python": "3.11"}}


META_TXT = """commit 01d56dd2ef71091d3998066295304cf209957449
start Thu Nov 26 14:39:42 UTC 2026
load 0.41 1.04 1.46 1/80 8980
model name\t: AMD EPYC
end Thu Nov 26 16:09:42 UTC 2026
rc 0
wall_s 5400
load_end 2.10 2.00 1.90 2/81 9000
"""


def test_render_cells_from_a_hand_written_results_file(tmp_path):
    runs = tmp_path / "runs"
    (runs / "strings").mkdir(parents=True)
    (runs / "strings/results.json").write_text(json.dumps(_fixture_results()))
    (runs / "strings/meta.txt").write_text(META_TXT)
    notes = "# Notes\n\nGeneral remark.\n\n## Strings\n\nWhy SVM on BEDL is off.\n"
    page = render_paper_table(load_runs(runs), notes, command="render it")
    lines = page.splitlines()
    # KNN initial: 10, 20, 30 % -> 20.0 +- 10.0 (paper 21.0 +- 10.2: within)
    # SVM initial: 5, 5, 20 % -> 10.0 +- sqrt(75) = 8.66 (paper 9.0 +- 11.2: within)
    # SVM BEDL: 10 % in every fold vs paper 0.0 +- 0.0: flagged; runtimes 1, 2, 3 s
    assert "| classifier | initial | paper initial | BEDL (pseudo) | paper BEDL |" in lines
    assert "| KNN | 20.0 +- 10.0 | 21.0 +- 10.2 | 0.0 +- 0.0 | 0.0 +- 0.0 |" in lines
    assert "| SVM | 10.0 +- 8.7 | 9.0 +- 11.2 | 10.0 +- 0.0 (!) | 0.0 +- 0.0 |" in lines
    assert "| runtime [s] | - | - | 2 +- 1 | 1.08 +- 0.098 |" in lines
    assert ("- Strings, SVM, BEDL (pseudo): 10.0 +- 0.0 over 3 folds vs paper 0.0 +- 0.0 "
            "(+10.0 points)") in lines
    assert "| [Strings](#strings) | 3 of 4 | 5400 s (1.50 h) | 1 |" in lines
    assert "- Folds: 3 of 4 folds (partial: means and stds are over the completed folds)" \
        in lines
    assert ("- Wall-clock time: 5400 s (1.50 h), 2026-11-26T14:39:42Z to 2026-11-26T16:09:42Z; "
            "load averages (1/5/15 min) at start 0.41, 1.04, 1.46, at end 2.1, 2, 1.9") in lines
    assert "commit `01d56dd2ef71`" in page and "AMD EPYC" in page
    assert ("- Numerical paths: not recorded (a run from before the protocol held the numerical "
            "libraries to fixed paths: each library chose its own on that machine)") in lines
    assert "| KNN: neighbours | 1 (2), 3 (1) | 1 (2), 3 (1) |" in lines
    assert "| SVM: bandwidth | 0.1 (2), 10 (1) | 0.1 (2), 10 (1) |" in lines
    assert "| metric learner: f in lambda or beta = 2 K m f | - | 0.0001 (3) |" in lines
    assert ("- Command: `python -m bedl_torch experiment strings --folds 4 --metrics initial "
            "bedl_pseudo --classifiers KNN SVM`") in lines
    assert "General remark." in page and "Why SVM on BEDL is off." in page
    assert page.index("Why SVM on BEDL is off.") > page.index("## Strings")
    assert "No results yet: MiniPalindrome, Sorting, Cystic, Leukemia, Sentiment." in lines

    # the compact export renders the same page
    written = export_runs(runs, tmp_path / "compact")
    compact = _read(written["strings"])
    assert "table" not in compact and "summary" not in compact
    assert compact["environment"]["sessions"][0]["wall_s"] == 5400
    assert compact["fold_info"][1]["bedl_pseudo"]["beta"] == 0.393333  # 6 digits
    assert render_paper_table(load_runs(tmp_path / "compact"), notes,
                              command="render it") == page


def test_render_names_the_numeric_paths_of_each_session(tmp_path):
    held = {"mode": "avx2", "environment": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE",
                                            "NPY_DISABLE_CPU_FEATURES": "X86_V4"}}
    sessions = [{"numeric_paths": held, "threads": 2}, {"numeric_paths": held, "threads": 2},
                {"numeric_paths": {"mode": "native"}, "threads": 16}]
    run = _fixture_results()
    run["environment"] = {"sessions": sessions}
    (tmp_path / "strings").mkdir()
    (tmp_path / "strings/results.json").write_text(json.dumps(run))
    lines = render_paper_table(load_runs(tmp_path), "", command="render it").splitlines()
    # one entry per distinct description, in the sessions' order; numpy's list is left out
    assert ("- Numerical paths: held to fixed paths (ATEN_CPU_CAPABILITY=avx2, MKL_CBWR=COMPATIBLE), "
            "2 threads; native (each library chose its own: `--native-paths`), 16 threads") in lines


def test_flags_compare_with_the_paper_std():
    run = compact_results(_fixture_results())
    flags = flagged_cells("strings", run)
    assert [(f["classifier"], f["metric"]) for f in flags] == [("SVM", "bedl_pseudo")]
    assert flags[0]["difference"] == pytest.approx(10.0)
    # move KNN initial to 31.3 % (paper 21.0 +- 10.2): 10.3 points off, flagged
    for r in run["records"]:
        if (r["classifier"], r["metric"]) == ("KNN", "initial"):
            r["error"] += 0.113
    flags = flagged_cells("strings", run)
    assert ("KNN", "initial") in [(f["classifier"], f["metric"]) for f in flags]


def test_meta_txt_and_compact_layout(tmp_path):
    (tmp_path / "meta.txt").write_text(META_TXT)
    meta = read_meta_txt(tmp_path / "meta.txt")
    assert meta["commit"] == "01d56dd2ef71091d3998066295304cf209957449"
    assert meta["start"] == "2026-11-26T14:39:42Z" and meta["end"] == "2026-11-26T16:09:42Z"
    assert meta["load_start"] == [0.41, 1.04, 1.46] and meta["load_end"] == [2.1, 2.0, 1.9]
    assert meta["cpu_model"] == "AMD EPYC" and meta["wall_s"] == 5400 and meta["rc"] == 0
    assert read_meta_txt(tmp_path / "absent.txt") is None
    raw = _fixture_results()
    raw["records"][0]["error"] = 1 / 3
    text = dump_compact(compact_results(raw, meta))
    data = json.loads(text)
    assert data["records"][0]["error"] == 0.333333
    assert "dataset" not in data["records"][0] and "n_train" not in data["records"][0]
    # one line per record
    assert sum(1 for line in text.splitlines() if '"classifier":' in line) == len(raw["records"])


def test_command_for_round_trips_options():
    from bedl_torch.__main__ import _config, _parser

    argv = ["experiment", "sentiment", "--folds", "7", "--inner-folds", "3", "--seed", "2",
            "--beta-factors", "0.001", "--trees", "--jobs", "2", "--max-items", "100",
            "--train-sample", "0", "--prototype-candidates", "20"]
    cfg = _config(_parser().parse_args(argv), "sentiment").resolved().to_dict()
    assert cfg["train_sample"] == 0 and cfg["bedl_options"] == {"prototype_candidates": 20}
    cmd = command_for(cfg)
    assert cmd == ("python -m bedl_torch experiment sentiment --folds 7 --inner-folds 3 "
                   "--seed 2 --train-sample 0 --beta-factors 0.001 --prototype-candidates 20 "
                   "--trees --max-items 100 --jobs 2")
    again = _config(_parser().parse_args(cmd.split()[3:]), "sentiment").resolved().to_dict()
    assert config_differences(cfg, again) == []
    assert command_for(protocol.ExperimentConfig("leukemia").resolved().to_dict()) == \
        "python -m bedl_torch experiment leukemia"


def test_parse_notes_sections():
    general, sections = parse_notes("# Title\nintro\n## MiniPalindrome\nm text\n### sub\nmore\n"
                                    "## Other heading\nstill m\n## sentiment\ns text")
    assert general == "intro"
    assert sections == {"minipalindrome": "m text\n### sub\nmore\n## Other heading\nstill m",
                        "sentiment": "s text"}


def test_paper_numbers_agree_with_the_method_notes():
    """The classifiers the method notes (docs/bedl-method.md) quote from the paper's table."""
    text = (REPO / "docs/bedl-method.md").read_text()
    rows = re.findall(r"^\| (\w+) \| (\w+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$", text, re.M)
    quoted = [r for r in rows if r[0].lower() in PAPER_FOLDS]
    assert len(quoted) == 9
    for ds, clf, *cells in quoted:
        paper = PAPER_ERRORS[ds.lower()][clf]
        for metric, cell in zip(("initial", "gesl", "bedl"), cells):
            if cell.strip() == "-":
                assert metric not in paper
                continue
            mean, std = (float(v) for v in cell.split("+-"))
            assert paper[metric] == (mean, std)
    assert all(math.isfinite(v) for d in PAPER_ERRORS.values() for c in d.values()
               for cell in c.values() for v in cell)


def test_the_command_exits_1_when_a_cell_failed(monkeypatch, capsys, tmp_path):
    """The run goes on past a failed cell and writes its results, but says so in its exit
    status (it was 0), so that a script or CI sees it."""
    from bedl_torch.__main__ import main

    real = protocol.folds.classify

    def svm_fails(name, *args):
        if name == "SVM":
            raise RuntimeError("LP status unknown")
        return real(name, *args)

    argv = ["experiment", "strings", "--quick", "--folds", "2", "--inner-folds", "2", "--max-items", "20",
            "--max-folds", "1", "--metrics", "initial", "--classifiers", "KNN", "SVM", "--no-progress"]
    assert main(argv + ["--out", str(tmp_path / "ok")]) == 0  # unpatched: no cell fails
    monkeypatch.setattr(protocol.folds, "classify", svm_fails)
    assert main(argv + ["--out", str(tmp_path / "failed")]) == 1
    assert "error: 1 cells of strings failed" in capsys.readouterr().err
    assert (tmp_path / "failed" / "results.json").exists()


def test_a_failing_classifier_is_recorded_alone(monkeypatch, capsys):
    real = protocol.folds.classify

    def svm_fails(name, *args):
        if name == "SVM":
            raise RuntimeError("LP status unknown")
        return real(name, *args)

    monkeypatch.setattr(protocol.folds, "classify", svm_fails)
    cfg = protocol.ExperimentConfig("strings", quick=True, folds=2, inner_folds=2,
                                    max_items=20, max_folds=1, metrics=("initial",),
                                    classifiers=("KNN", "SVM", "goodness"), progress=False)
    result = protocol.run_experiment(cfg)
    got = {r["classifier"]: r["error"] for r in result.records}
    assert set(got) == {"KNN", "SVM", "goodness"} and len(result.records) == 3
    assert got["SVM"] is None and got["KNN"] is not None and got["goodness"] is not None
    assert "fold 0: initial SVM failed: RuntimeError: LP status unknown" in result.notes
    assert "LP status unknown" in capsys.readouterr().err
    # results of older versions recorded the whole metric as failed after a classifier
    # failed, next to the classifiers already measured: the export keeps the measured ones
    raw = _fixture_results()
    raw["records"].append({"classifier": "KNN", "metric": "bedl_pseudo", "fold": 2,
                           "error": None, "runtime_s": None, "failed": "RuntimeError: x"})
    raw["records"].append({"classifier": "MGLVQ", "metric": "bedl_pseudo", "fold": 2,
                           "error": None, "runtime_s": None, "failed": "RuntimeError: x"})
    records = compact_results(raw)["records"]
    assert len(records) == len(_fixture_results()["records"]) + 1
    assert [r["error"] for r in records if r["metric"] == "bedl_pseudo" and r["fold"] == 2
            and r["classifier"] == "KNN"] == [0.0]


def test_prototype_candidates_reach_every_bedl_fit(tmp_path, monkeypatch):
    from bedl_torch.learning import BEDL

    seen = []
    original = BEDL.fit

    def spy(self, X, y):
        seen.append((self.prototype_candidates, len(X)))
        return original(self, X, y)

    monkeypatch.setattr(BEDL, "fit", spy)
    code = main(["experiment", "strings", *TINY, "--max-items", "24", "--max-folds", "1",
                 "--metrics", "bedl_pseudo", "--classifiers", "MGLVQ", "--train-sample", "0",
                 "--prototype-candidates", "2", "--out", str(tmp_path / "s")])
    assert code == 0
    # every fit of the fold has the option (the warm-up fit on 4 points runs before the
    # folds, without it), the final one on the whole training fold
    fold_fits = [(c, n) for c, n in seen if n > 4]
    assert fold_fits and all(c == 2 for c, _ in fold_fits)
    data = _read(tmp_path / "s" / "results.json")
    assert max(n for _, n in fold_fits) == data["fold_info"][0]["n_train"]
    assert data["config"]["bedl_options"]["prototype_candidates"] == 2
